//! The executor's cgroups: a parent cgroup per executor and beneath it a
//! pool of child cgroups ("slots"), each holding the limits written once
//! at creation and leased to one exec at a time.
//!
//! Two kinds, best first:
//!
//! - **cgroup v2**, beneath a cgroup the host delegates to the executor's
//!   user: the one named by [`ResourceLimits::cgroup_parent`] or
//!   `SANDGATE_CGROUP_PARENT` (a delegated cgroup that holds no process,
//!   such as the one systemd gives a unit with `Delegate=yes` and
//!   `DelegateSubgroup=`), otherwise the executor's own cgroup. The
//!   `memory` and `pids` controllers are used when the parent offers them;
//!   the pool enables them in the named parent's `cgroup.subtree_control`,
//!   never in a cgroup it was not told to use (the executor's own cgroup
//!   holds the host's processes, and the "no internal processes" rule
//!   forbids a cgroup with processes to hand controllers to children). CPU
//!   time is read from `cpu.stat`, which every v2 cgroup has with or
//!   without a controller. The shell is born in its slot:
//!   `clone3(CLONE_INTO_CGROUP)` with the slot's directory, probed once
//!   when the pool is made. The host process is never moved.
//! - **cgroup v1** `memory` and `pids` controllers, as root, for the limits
//!   no v2 controller holds: the shell, between its `clone` and its
//!   `execve`, writes `0` (itself) to each slot's `cgroup.procs` through a
//!   descriptor the pool opened ahead ([`Placement::enter`]), a raw
//!   `write` with no allocation.
//!
//! The keeper stays outside: it shares the executor's memory, and the
//! memory controller's OOM killer, choosing it, would kill every process
//! that shares that memory, the executor included. The shell shares it too
//! until its `execve`, but nothing is charged to its slot before then
//! (pages are charged to the memory's owner, the executor), so no OOM can
//! happen in the slot while it does.
//!
//! Attribution: `oom_kill` (v1 `memory.oom_control`, v2 `memory.events`)
//! and `max` (`pids.events`) are read when a lease starts and at every
//! sample; a rise is a limit reached. The counters cannot be reset, so a
//! reused cgroup compares against the values read when it was leased; CPU
//! time (`usage_usec`) likewise. A v2 slot has `memory.oom.group` set, so
//! an OOM kill ends its whole tree.
//!
//! A slot that still holds a process when its exec ends is killed
//! (`cgroup.kill` in v2); one that still holds a process after that is not
//! reused. Nor is one still charged with shared memory (`shmem` in
//! `memory.stat`): what its exec left on a tmpfs (a write root or
//! `TMPDIR` there, `/dev/shm`) stays charged to the cgroup that wrote it
//! after every process has ended, cannot be reclaimed without swap, and
//! would count against the next exec's limit (a command after one that
//! left 96 MiB on a tmpfs was ended at 16 MiB of a 128 MiB limit). Such
//! a slot is removed (the kernel keeps the charge with the removed
//! cgroup) and a fresh one made when needed; page cache, which the
//! kernel reclaims when the next exec needs room, does not stop reuse. Every cgroup the pool made is removed when the pool is dropped
//! (those still holding a process stay), and a new pool removes what pools
//! of processes that are gone left behind.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rustix::fs::{Mode, OFlags};
use syscalls::{Errno, Sysno};

use crate::limits::Limit;
use crate::sys::above_stdio;

/// `CGROUP_SUPER_MAGIC`: the file system type of a cgroup v1 hierarchy.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
/// `CGROUP2_SUPER_MAGIC`: the file system type of the cgroup v2 hierarchy.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The environment variable naming a delegated cgroup v2 parent.
pub(crate) const PARENT_ENV: &str = "SANDGATE_CGROUP_PARENT";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    V1,
    V2,
}

/// A counter read for attribution: its file, the key in it, and the limit
/// a rise means.
#[derive(Clone, Copy, Debug)]
struct Counter {
    file: &'static str,
    key: &'static str,
    limit: Limit,
}

/// One hierarchy the pool uses: a v1 controller's, or the v2 one.
#[derive(Debug)]
struct Hierarchy {
    kind: Kind,
    /// What it is, in words (`cgroup v1 memory`, `cgroup v2`).
    what: String,
    /// The executor's parent cgroup in it (made by the pool).
    parent: PathBuf,
    /// The files written in each slot at creation, in order.
    settings: Vec<(&'static str, String)>,
    counters: Vec<Counter>,
    /// Whether `cpu.stat` is read for the CPU limit (v2).
    cpu: bool,
}

/// A cgroup in each hierarchy, ready for an exec.
#[derive(Debug, Default)]
struct Slot {
    dirs: Vec<PathBuf>,
    /// v1: `cgroup.procs` of each, open for writing.
    procs: Vec<OwnedFd>,
    /// v2: the slot's directory (for `clone3`) and its `cgroup.kill`.
    dir: Option<OwnedFd>,
    kill: Option<OwnedFd>,
    /// The counter files, in the pool's order of counters.
    counters: Vec<OwnedFd>,
    /// v2: `cpu.stat`.
    cpu: Option<OwnedFd>,
    /// `memory.stat` of the hierarchy that holds memory, read at release.
    stat: Option<OwnedFd>,
}

/// The executor's cgroups.
#[derive(Debug)]
pub(crate) struct Pool {
    hierarchies: Vec<Hierarchy>,
    /// Every hierarchy's counters, in order.
    counters: Vec<Counter>,
    /// The CPU limit `cpu.stat` holds, in microseconds.
    cpu_usec: Option<u64>,
    free: Mutex<Vec<Slot>>,
    /// Every slot directory made (for removal at drop).
    made: Mutex<Vec<PathBuf>>,
    next: AtomicU64,
}

/// Where the shell goes: the v1 `cgroup.procs` it writes itself into and
/// the v2 directory it is born in; `-1` for none. Plain integers, copied
/// into the block the shell reads before `execve`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placement {
    procs: [RawFd; 2],
    cgroup: RawFd,
}

impl Default for Placement {
    fn default() -> Self {
        Placement {
            procs: [-1; 2],
            cgroup: -1,
        }
    }
}

impl Placement {
    /// Moves the calling process into the leased v1 cgroups: `write(fd,
    /// "0", 1)` on each `cgroup.procs` (pid 0 names the writer). A raw
    /// system call, no allocation and no `errno`: safe in the shell
    /// between `clone` and `execve`.
    ///
    /// # Errors
    ///
    /// The kernel's refusal: the command must then not run.
    pub(crate) fn enter(&self) -> Result<(), Errno> {
        for &fd in &self.procs {
            if fd < 0 {
                continue;
            }
            let zero = b"0";
            // SAFETY: a live 1-byte buffer.
            unsafe { syscalls::syscall!(Sysno::write, fd, zero.as_ptr(), 1) }?;
        }
        Ok(())
    }

    /// The v2 cgroup directory the shell is started in, if any.
    pub(crate) fn cgroup(&self) -> Option<RawFd> {
        (self.cgroup >= 0).then_some(self.cgroup)
    }
}

/// A slot leased to one exec; back to the pool with [`Pool::release`].
#[derive(Debug)]
pub(crate) struct Lease {
    slot: Option<Slot>,
    /// The counters when the lease began, in the pool's order.
    baseline: Vec<u64>,
    counters: Vec<Counter>,
    /// `usage_usec` when the lease began, and the limit above it.
    cpu: Option<(u64, u64)>,
}

impl Lease {
    pub(crate) fn placement(&self) -> Placement {
        let mut p = Placement::default();
        if let Some(slot) = &self.slot {
            for (i, fd) in slot.procs.iter().enumerate().take(2) {
                p.procs[i] = fd.as_raw_fd();
            }
            if let Some(dir) = &slot.dir {
                p.cgroup = dir.as_raw_fd();
            }
        }
        p
    }

    /// The first limit whose counter rose since the lease began, or the
    /// CPU limit once the slot's CPU time passed it.
    pub(crate) fn reached(&self) -> Option<Limit> {
        let slot = self.slot.as_ref()?;
        let counted = slot
            .counters
            .iter()
            .zip(&self.baseline)
            .zip(&self.counters)
            .find(|((fd, &base), c)| read_counter(fd, c.key).is_some_and(|n| n > base))
            .map(|(_, c)| c.limit);
        counted.or_else(|| {
            let (base, max) = self.cpu?;
            let used = read_counter(slot.cpu.as_ref()?, "usage_usec")?;
            (used.saturating_sub(base) >= max).then_some(Limit::Cpu)
        })
    }
}

/// `PID_MAX_LIMIT` on 64-bit: no system has more pids than this, so no
/// cgroup more tasks, and `pids.max` refuses it and anything above
/// (`EINVAL`).
const PIDS_MAX: u64 = 4 * 1024 * 1024;

/// What `pids.max` gets for a task limit of `n`: `max` for a limit no tree
/// can reach (one the kernel would refuse, which would cost the executor
/// its cgroups, memory's too).
fn pids_max(n: u64) -> String {
    if n >= PIDS_MAX {
        "max".to_owned()
    } else {
        n.to_string()
    }
}

/// The value of `key` in a flat-keyed cgroup file (`key value` lines),
/// read from the start of `fd` (its first 4 KiB: `memory.stat` is the
/// longest read, and `shmem` comes early in it).
fn read_counter(fd: &OwnedFd, key: &str) -> Option<u64> {
    let mut buf = [0u8; 4096];
    let n = rustix::io::pread(fd, &mut buf, 0).ok()?;
    parse_counter(&buf[..n], key)
}

/// The number on the line of `key` in a flat-keyed file: `oom_kill N` in
/// `memory.oom_control` or `memory.events`, `max N` in `pids.events`,
/// `usage_usec N` in `cpu.stat`.
fn parse_counter(text: &[u8], key: &str) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    text.lines().find_map(|line| {
        let (k, value) = line.split_once(' ')?;
        (k == key).then(|| value.trim().parse().ok()).flatten()
    })
}

/// The executor's own cgroup path in the v1 hierarchy of `controller`,
/// from `/proc/self/cgroup` (`N:memory:/path`).
fn own_v1_path(controller: &str) -> io::Result<String> {
    let text = fs::read_to_string("/proc/self/cgroup")?;
    text.lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
            list.split(',')
                .any(|c| c == controller)
                .then(|| path.to_owned())
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no cgroup v1 {controller} hierarchy in /proc/self/cgroup"),
            )
        })
}

/// The executor's own cgroup v2 directory: its path in the hierarchy
/// (`0::/path` in `/proc/self/cgroup`) beneath a `cgroup2` mount found in
/// `/proc/self/mountinfo` at or below `under`.
fn own_v2_dir(under: &Path) -> Result<PathBuf, String> {
    let own = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("/proc/self/cgroup: {e}"))?
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
        .ok_or("no cgroup v2 hierarchy in /proc/self/cgroup")?;
    let mounts = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    for line in mounts.lines() {
        let Some((fields, after)) = line.split_once(" - ") else {
            continue;
        };
        if after.split(' ').next() != Some("cgroup2") {
            continue;
        }
        let fields: Vec<&str> = fields.split(' ').collect();
        let (Some(root), Some(point)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        let point = PathBuf::from(unescape(point));
        if !point.starts_with(under) {
            continue;
        }
        // The mount shows the hierarchy from `root` down.
        let root = unescape(root);
        let rel = if root == "/" {
            Some(own.trim_start_matches('/'))
        } else {
            own.strip_prefix(root.as_str())
                .filter(|rest| rest.is_empty() || rest.starts_with('/'))
                .map(|rest| rest.trim_start_matches('/'))
        };
        if let Some(rel) = rel {
            return Ok(if rel.is_empty() {
                point
            } else {
                point.join(rel)
            });
        }
    }
    Err(format!(
        "no cgroup2 mount under {} shows the executor's cgroup {own}",
        under.display()
    ))
}

/// `\040` and the like in `/proc/self/mountinfo`, back to bytes.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let n = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(n);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Removes what executors of processes that are gone left under `base`.
///
/// A pool removes its cgroups when it is dropped, but a host process that
/// ends without dropping it (killed, `exit` from a binding whose objects
/// are never finalized) leaves `sandgate-<pid>-<n>/` and its slots behind.
/// The next pool made under the same parent removes those whose `<pid>` no
/// longer exists; the kernel refuses to remove a cgroup that still holds a
/// process, so nothing running is disturbed. A `<pid>` reused by another
/// process keeps its leftovers until that one ends.
fn sweep_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("sandgate-"))
            .and_then(|rest| rest.split_once('-'))
            .filter(|(_, seq)| !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let dir = entry.path();
        if let Ok(slots) = fs::read_dir(&dir) {
            for slot in slots.flatten() {
                if slot.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = fs::remove_dir(slot.path());
                }
            }
        }
        let _ = fs::remove_dir(&dir);
    }
}

/// The file system type of `dir`.
fn fs_type(dir: &Path) -> io::Result<i64> {
    let st = rustix::fs::statfs(dir)?;
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_type as i64)
}

/// The words of a cgroup v2 list file (`cgroup.controllers`,
/// `cgroup.subtree_control`).
fn words(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// What a pool is asked to hold.
#[derive(Debug)]
pub(crate) struct Wanted<'a> {
    /// Where the v1 hierarchies are mounted; cgroup2 mounts are looked for
    /// at or below it too.
    pub root: &'a Path,
    /// A delegated cgroup v2 parent, when the host names one.
    pub v2_parent: Option<&'a Path>,
    pub memory: Option<u64>,
    pub tasks: Option<u64>,
    pub cpu_ms: Option<u64>,
}

impl Pool {
    /// Makes the executor's cgroups for what `want` asks, v2 first, v1 as
    /// root for what v2 cannot hold. `None` when no cgroup holds anything;
    /// the notes say why each better mechanism is not used.
    pub(crate) fn new(want: &Wanted<'_>) -> (Option<Pool>, Vec<String>) {
        let mut notes = Vec::new();
        let pool = match Pool::build(want, true, &mut notes) {
            Ok(pool) => pool,
            // Without v2, v1 (as root) may still hold memory and tasks.
            Err(()) => Pool::build(want, false, &mut notes).unwrap_or(None),
        };
        (pool, notes)
    }

    /// [`Pool::new`], with or without v2. `Err` when the kernel refused
    /// to start a process in the v2 slot (said in `notes`).
    fn build(
        want: &Wanted<'_>,
        with_v2: bool,
        notes: &mut Vec<String>,
    ) -> Result<Option<Pool>, ()> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "sandgate-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut hierarchies = Vec::new();
        if with_v2 {
            match v2(want, &name, notes) {
                Ok(Some(h)) => hierarchies.push(h),
                Ok(None) => {}
                Err(why) => notes.push(why),
            }
        }
        let held = |limit: Limit| {
            hierarchies
                .iter()
                .any(|h: &Hierarchy| h.counters.iter().any(|c| c.limit == limit))
        };
        let v1_memory = want.memory.filter(|_| !held(Limit::Memory));
        let v1_tasks = want.tasks.filter(|_| !held(Limit::Tasks));
        if v1_memory.is_some() || v1_tasks.is_some() {
            match v1(want.root, &name, v1_memory, v1_tasks) {
                Ok(mut made) => hierarchies.append(&mut made),
                Err(why) => notes.push(why),
            }
        }
        if hierarchies.is_empty() {
            return Ok(None);
        }
        let cpu_usec = want
            .cpu_ms
            .filter(|_| hierarchies.iter().any(|h| h.cpu))
            .map(|ms| ms.saturating_mul(1000));
        let pool = Pool {
            counters: hierarchies
                .iter()
                .flat_map(|h| h.counters.iter().copied())
                .collect(),
            hierarchies,
            cpu_usec,
            free: Mutex::new(Vec::new()),
            made: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        };
        // One slot now: a limit the kernel refuses is reported at start,
        // and the v2 slot is where `clone3` is probed.
        let slot = match pool.make_slot() {
            Ok(slot) => slot,
            Err(e) => {
                notes.push(format!("cannot set up the executor's cgroups: {e}"));
                return Ok(None);
            }
        };
        if let Some(dir) = &slot.dir {
            if let Err(e) = crate::spawn::probe_clone_into(dir.as_fd()) {
                notes.push(format!(
                    "cgroup v2: the kernel refuses to start a process in {} \
                     (clone3 with CLONE_INTO_CGROUP: {e})",
                    slot.dirs[0].display()
                ));
                pool.discard(slot);
                return Err(());
            }
        }
        pool.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(slot);
        Ok(Some(pool))
    }

    /// Whether the pool holds `limit`.
    pub(crate) fn holds(&self, limit: Limit) -> bool {
        self.counters.iter().any(|c| c.limit == limit)
            || (limit == Limit::Cpu && self.cpu_usec.is_some())
    }

    /// Whether `limit` is held by the v2 hierarchy (else by v1).
    pub(crate) fn by_v2(&self, limit: Limit) -> bool {
        self.hierarchies.iter().any(|h| {
            h.kind == Kind::V2
                && (h.counters.iter().any(|c| c.limit == limit) || (limit == Limit::Cpu && h.cpu))
        })
    }

    fn make_slot(&self) -> io::Result<Slot> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut slot = Slot::default();
        for h in &self.hierarchies {
            let dir = h.parent.join(n.to_string());
            if let Err(e) = fs::create_dir(&dir) {
                self.discard(slot);
                return Err(io::Error::new(
                    e.kind(),
                    format!("{}: {}: {e}", h.what, dir.display()),
                ));
            }
            self.made
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(dir.clone());
            slot.dirs.push(dir.clone());
            if let Err(e) = fill(h, &dir, &mut slot) {
                self.discard(slot);
                return Err(e);
            }
        }
        Ok(slot)
    }

    /// Removes a slot's cgroups (those that hold no process).
    fn discard(&self, slot: Slot) {
        let dirs = slot.dirs.clone();
        drop(slot);
        for dir in dirs {
            if fs::remove_dir(&dir).is_ok() {
                self.made
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|d| d != &dir);
            }
        }
    }

    /// A slot for one exec: a free one, or a new one.
    ///
    /// # Errors
    ///
    /// The kernel's refusal to make a new cgroup.
    pub(crate) fn lease(&self) -> io::Result<Lease> {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let slot = match free {
            Some(slot) => slot,
            None => self.make_slot()?,
        };
        let baseline = slot
            .counters
            .iter()
            .zip(&self.counters)
            .map(|(fd, c)| read_counter(fd, c.key).unwrap_or(0))
            .collect();
        let cpu = match (self.cpu_usec, &slot.cpu) {
            (Some(max), Some(fd)) => Some((read_counter(fd, "usage_usec").unwrap_or(0), max)),
            _ => None,
        };
        Ok(Lease {
            slot: Some(slot),
            baseline,
            counters: self.counters.clone(),
            cpu,
        })
    }

    /// Takes a slot back once its exec is over: what is left in a v2 slot
    /// is killed; the slot is reused when no process is left in it,
    /// otherwise kept aside (and never reused). One whose process list
    /// cannot be read is removed if it is empty, else kept aside.
    pub(crate) fn release(&self, mut lease: Lease) {
        let Some(slot) = lease.slot.take() else {
            return;
        };
        // Opened by name each time: a cgroup v1 `cgroup.procs` kept open
        // answers from a list the kernel made at an earlier read and keeps
        // for a second, so a process that joined since would not be seen.
        // `None` when a list could not be read (the process out of
        // descriptors or memory): whether the slot is empty is not known.
        let empty = || -> Option<bool> {
            let mut all = true;
            for d in &slot.dirs {
                let procs = fs::read(d.join("cgroup.procs")).ok()?;
                all &= procs.iter().all(u8::is_ascii_whitespace);
            }
            Some(all)
        };
        let Some(mut reusable) = empty() else {
            // Removing a cgroup needs no descriptor and succeeds only when
            // no process is in it: an empty slot is removed, where before
            // it was set aside unused until the pool was dropped (one more
            // cgroup for each exec that met the shortage); one with a
            // process in it is set aside, as below.
            self.discard(slot);
            return;
        };
        if !reusable {
            if let Some(kill) = &slot.kill {
                let _ = rustix::io::write(kill, b"1");
                // The kill is asynchronous: give the tree a moment to go.
                for _ in 0..50 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    if empty() == Some(true) {
                        reusable = true;
                        break;
                    }
                }
            }
        }
        if !reusable {
            return;
        }
        // Shared memory an exec left (files on a tmpfs) stays charged to
        // the slot: the next exec would start with it counted.
        let charged = slot
            .stat
            .as_ref()
            .and_then(|fd| read_counter(fd, "shmem"))
            .is_some_and(|bytes| bytes > 0);
        if charged {
            self.discard(slot);
        } else {
            self.free
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(slot);
        }
    }
}

/// Writes a new slot's settings in `dir` and opens its files into `slot`.
fn fill(h: &Hierarchy, dir: &Path, slot: &mut Slot) -> io::Result<()> {
    let open = |file: &str, flags: OFlags| -> io::Result<OwnedFd> {
        let fd = rustix::fs::open(dir.join(file), flags | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {file}: {e}", h.what)))?;
        above_stdio(fd)
    };
    for (file, value) in &h.settings {
        match fs::write(dir.join(file), value) {
            Ok(()) => {}
            // No swap accounting in this kernel: nothing to bound.
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    && matches!(*file, "memory.memsw.limit_in_bytes" | "memory.swap.max") => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("{} {file}: {e}", h.what))),
        }
    }
    match h.kind {
        Kind::V1 => slot.procs.push(open("cgroup.procs", OFlags::WRONLY)?),
        Kind::V2 => {
            slot.dir = Some(open(".", OFlags::RDONLY | OFlags::DIRECTORY)?);
            // `cgroup.kill` came with Linux 5.14; without it what is left
            // is only not reused.
            slot.kill = open("cgroup.kill", OFlags::WRONLY).ok();
            if h.cpu {
                slot.cpu = Some(open("cpu.stat", OFlags::RDONLY)?);
            }
        }
    }
    for c in &h.counters {
        slot.counters.push(open(c.file, OFlags::RDONLY)?);
    }
    if h.counters.iter().any(|c| c.limit == Limit::Memory) {
        slot.stat = Some(open("memory.stat", OFlags::RDONLY)?);
    }
    Ok(())
}

/// The cgroup v2 hierarchy for `want`, or `None` when it would hold
/// nothing; notes say which controllers are missing and why.
fn v2(want: &Wanted<'_>, name: &str, notes: &mut Vec<String>) -> Result<Option<Hierarchy>, String> {
    let (base, delegated) = match want.v2_parent {
        Some(p) => (p.to_path_buf(), true),
        None => (
            own_v2_dir(want.root).map_err(|e| format!("cgroup v2: {e}"))?,
            false,
        ),
    };
    match fs_type(&base) {
        Ok(CGROUP2_SUPER_MAGIC) => {}
        Ok(_) => {
            return Err(format!(
                "cgroup v2: {} is not a cgroup v2 directory",
                base.display()
            ))
        }
        Err(e) => return Err(format!("cgroup v2: {}: {e}", base.display())),
    }
    let wanted: Vec<&str> = [want.memory.map(|_| "memory"), want.tasks.map(|_| "pids")]
        .into_iter()
        .flatten()
        .collect();
    if delegated {
        // The named parent holds no process: it may hand controllers down.
        let offered = words(&base.join("cgroup.controllers"));
        let enabled = words(&base.join("cgroup.subtree_control"));
        let enable: Vec<String> = wanted
            .iter()
            .filter(|c| offered.iter().any(|o| o == *c) && !enabled.iter().any(|e| e == *c))
            .map(|c| format!("+{c}"))
            .collect();
        if !enable.is_empty() {
            if let Err(e) = fs::write(base.join("cgroup.subtree_control"), enable.join(" ")) {
                notes.push(format!(
                    "cgroup v2: cannot enable {} in {}: {e}{}",
                    enable.join(" "),
                    base.display(),
                    if e.raw_os_error() == Some(libc::EBUSY) {
                        " (it holds processes of its own: a delegated parent must not)"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    sweep_stale(&base);
    let parent = base.join(name);
    fs::create_dir(&parent).map_err(|e| {
        format!(
            "cgroup v2: cannot create a cgroup under {}: {e}{}",
            base.display(),
            if delegated {
                ""
            } else {
                " (name a cgroup delegated to this user with SANDGATE_CGROUP_PARENT)"
            }
        )
    })?;
    let offered = words(&parent.join("cgroup.controllers"));
    let usable: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|c| offered.iter().any(|o| o == c))
        .collect();
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|c| !usable.contains(c))
        .collect();
    if !missing.is_empty() {
        notes.push(format!(
            "cgroup v2: no {} controller is offered beneath {}{}",
            missing.join(" or "),
            base.display(),
            if delegated {
                ""
            } else {
                " (the executor's own cgroup; name a delegated cgroup that holds no process \
                 with SANDGATE_CGROUP_PARENT)"
            }
        ));
    }
    if !usable.is_empty() {
        let enable: Vec<String> = usable.iter().map(|c| format!("+{c}")).collect();
        if let Err(e) = fs::write(parent.join("cgroup.subtree_control"), enable.join(" ")) {
            let _ = fs::remove_dir(&parent);
            return Err(format!(
                "cgroup v2: cannot enable {} in {}: {e}",
                enable.join(" "),
                parent.display()
            ));
        }
    }
    let mut settings = Vec::new();
    let mut counters = Vec::new();
    if let Some(bytes) = want.memory.filter(|_| usable.contains(&"memory")) {
        settings.push(("memory.max", bytes.to_string()));
        // Swap would let the tree hold more than the limit.
        settings.push(("memory.swap.max", "0".to_owned()));
        // An OOM kill ends the whole tree, not one process of it.
        settings.push(("memory.oom.group", "1".to_owned()));
        counters.push(Counter {
            file: "memory.events",
            key: "oom_kill",
            limit: Limit::Memory,
        });
    }
    if let Some(n) = want.tasks.filter(|_| usable.contains(&"pids")) {
        settings.push(("pids.max", pids_max(n)));
        counters.push(Counter {
            file: "pids.events",
            key: "max",
            limit: Limit::Tasks,
        });
    }
    let cpu = want.cpu_ms.is_some() && parent.join("cpu.stat").exists();
    if counters.is_empty() && !cpu {
        let _ = fs::remove_dir(&parent);
        return Ok(None);
    }
    Ok(Some(Hierarchy {
        kind: Kind::V2,
        what: "cgroup v2".to_owned(),
        parent,
        settings,
        counters,
        cpu,
    }))
}

/// The cgroup v1 hierarchies (as root) for a memory limit of `memory`
/// bytes and a task limit of `tasks`.
fn v1(
    root: &Path,
    name: &str,
    memory: Option<u64>,
    tasks: Option<u64>,
) -> Result<Vec<Hierarchy>, String> {
    if !rustix::process::geteuid().is_root() {
        return Err("cgroup v1 controllers are used only when the executor runs as root".into());
    }
    let wanted = [
        memory.map(|bytes| {
            (
                "memory",
                vec![
                    ("memory.limit_in_bytes", bytes.to_string()),
                    // Swap counts too, where the kernel accounts it.
                    ("memory.memsw.limit_in_bytes", bytes.to_string()),
                ],
                Counter {
                    file: "memory.oom_control",
                    key: "oom_kill",
                    limit: Limit::Memory,
                },
            )
        }),
        tasks.map(|n| {
            (
                "pids",
                vec![("pids.max", pids_max(n))],
                Counter {
                    file: "pids.events",
                    key: "max",
                    limit: Limit::Tasks,
                },
            )
        }),
    ];
    let mut made: Vec<Hierarchy> = Vec::new();
    for (controller, settings, counter) in wanted.into_iter().flatten() {
        let parent = (|| -> io::Result<PathBuf> {
            let own = own_v1_path(controller)?;
            let base = root.join(controller).join(own.trim_start_matches('/'));
            if fs_type(&base)? != CGROUP_SUPER_MAGIC {
                return Err(io::Error::other(format!(
                    "{} is not a cgroup v1 hierarchy",
                    base.display()
                )));
            }
            sweep_stale(&base);
            let parent = base.join(name);
            fs::create_dir(&parent)?;
            Ok(parent)
        })();
        match parent {
            Ok(parent) => made.push(Hierarchy {
                kind: Kind::V1,
                what: format!("cgroup v1 {controller}"),
                parent,
                settings,
                counters: vec![counter],
                cpu: false,
            }),
            Err(e) => {
                for h in &made {
                    let _ = fs::remove_dir(&h.parent);
                }
                return Err(format!(
                    "cannot create a cgroup v1 {controller} cgroup under {}: {e}",
                    root.display()
                ));
            }
        }
    }
    Ok(made)
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).clear();
        for dir in self
            .made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = fs::remove_dir(dir);
        }
        for h in &self.hierarchies {
            let _ = fs::remove_dir(&h.parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_parse() {
        let v1 = b"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(parse_counter(v1, "oom_kill"), Some(3));
        assert_eq!(parse_counter(b"max 17\n", "max"), Some(17));
        assert_eq!(
            parse_counter(b"oom_kill_disable 0\nunder_oom 0\n", "oom_kill"),
            None
        );
        // v2's memory.events has a `max` line (reclaim at the limit) before
        // `oom_kill`: only the key asked for counts.
        let v2 = b"low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n";
        assert_eq!(parse_counter(v2, "oom_kill"), Some(1));
        let cpu = b"usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n";
        assert_eq!(parse_counter(cpu, "usage_usec"), Some(1500));
    }

    #[test]
    fn mountinfo_fields_unescape() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/end\\04"), "/end\\04");
    }
}
