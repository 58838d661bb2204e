//! cgroup v1 `memory` and `pids` controllers for the executor, as root:
//! a parent cgroup per executor beneath the executor's own cgroup of each
//! controller, and a pool of child cgroups beneath it, each holding the
//! limits written once at creation and leased to one exec at a time.
//!
//! Placement: the shell, between its `clone` and its `execve`, writes `0`
//! (the calling process) to each leased cgroup's `cgroup.procs` through a
//! descriptor the pool opened ahead ([`Placement::enter`]): a raw `write`,
//! no allocation. The keeper stays outside: it shares the executor's
//! memory, and the memory controller's OOM killer, choosing it, would kill
//! every process that shares that memory — the executor included.
//!
//! Attribution: `memory.oom_control`'s `oom_kill` and `pids.events`' `max`
//! are read when a lease starts and at every sample; a rise is a limit
//! reached. The counters cannot be reset, so a reused cgroup compares
//! against the values read when it was leased.
//!
//! A cgroup that still holds a process when its exec ends (a process that
//! could not be killed) is not reused. Every cgroup the pool made is
//! removed when the pool is dropped (those still holding a process stay).

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rustix::fs::{Mode, OFlags};
use syscalls::{Errno, Sysno};

use crate::limits::Limit;
use crate::sys::above_stdio;

/// `CGROUP_SUPER_MAGIC`: the file system type of a cgroup v1 hierarchy.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;

/// One controller of the pool: its parent directory and what it limits.
#[derive(Debug)]
struct Controller {
    /// `memory` or `pids`.
    name: &'static str,
    parent: PathBuf,
    /// The files written in each child at creation, in order.
    settings: Vec<(&'static str, String)>,
    /// The counter file read for attribution, and the key in it.
    counter: (&'static str, &'static str),
    limit: Limit,
}

/// A child cgroup of each controller, ready for an exec.
#[derive(Debug)]
struct Slot {
    dirs: Vec<PathBuf>,
    /// `cgroup.procs` of each, open for writing.
    procs: Vec<OwnedFd>,
    /// The counter file of each, open for reading.
    counters: Vec<OwnedFd>,
}

/// The executor's cgroups.
#[derive(Debug)]
pub(crate) struct Pool {
    controllers: Vec<Controller>,
    free: Mutex<Vec<Slot>>,
    /// Every child made (for removal at drop).
    made: Mutex<Vec<PathBuf>>,
    next: AtomicU64,
}

/// The descriptors the shell writes itself into; `-1` for none. Plain
/// integers, copied into the block the shell reads before `execve`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placement {
    procs: [RawFd; 2],
}

impl Default for Placement {
    fn default() -> Self {
        Placement { procs: [-1; 2] }
    }
}

impl Placement {
    /// Moves the calling process into the leased cgroups: `write(fd, "0",
    /// 1)` on each `cgroup.procs` (in cgroup v1, pid 0 names the writer).
    /// A raw system call, no allocation and no `errno`: safe in the shell
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
}

/// A cgroup slot leased to one exec; back to the pool with
/// [`Pool::release`].
#[derive(Debug)]
pub(crate) struct Lease {
    slot: Option<Slot>,
    /// The counters when the lease began, per controller.
    baseline: Vec<u64>,
    limits: Vec<Limit>,
}

impl Lease {
    pub(crate) fn placement(&self) -> Placement {
        let mut p = Placement::default();
        if let Some(slot) = &self.slot {
            for (i, fd) in slot.procs.iter().enumerate().take(2) {
                p.procs[i] = fd.as_raw_fd();
            }
        }
        p
    }

    /// The first limit whose counter rose since the lease began.
    pub(crate) fn reached(&self) -> Option<Limit> {
        let slot = self.slot.as_ref()?;
        slot.counters
            .iter()
            .zip(&self.baseline)
            .zip(&self.limits)
            .find(|((fd, &base), _)| read_counter(fd).is_some_and(|n| n > base))
            .map(|(_, &limit)| limit)
    }
}

/// The value of `key` in a flat-keyed cgroup file (`key value` lines),
/// read from the start of `fd`.
fn read_counter(fd: &OwnedFd) -> Option<u64> {
    let mut buf = [0u8; 512];
    let n = rustix::io::pread(fd, &mut buf, 0).ok()?;
    parse_counter(&buf[..n])
}

/// The number after the first word of the one line that names a counter:
/// `oom_kill N` in `memory.oom_control`, `max N` in `pids.events`.
fn parse_counter(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        matches!(key, "oom_kill" | "max")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

/// The executor's own cgroup path in the v1 hierarchy of `controller`,
/// from `/proc/self/cgroup` (`N:memory:/path`).
fn own_path(controller: &str) -> io::Result<String> {
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

/// Whether `dir` is on a cgroup v1 file system.
fn is_cgroup_v1(dir: &Path) -> io::Result<bool> {
    let st = rustix::fs::statfs(dir)?;
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_type as i64 == CGROUP_SUPER_MAGIC)
}

impl Pool {
    /// Makes the executor's parent cgroups under `root` for a memory
    /// limit of `memory` bytes and a task limit of `tasks`.
    ///
    /// # Errors
    ///
    /// Why the cgroups cannot be made (not root, no v1 hierarchy, a
    /// read-only or foreign file system, …), in words for the report.
    pub(crate) fn new(
        root: &Path,
        memory: Option<u64>,
        tasks: Option<u64>,
    ) -> Result<Pool, String> {
        if !rustix::process::geteuid().is_root() {
            return Err(
                "cgroup v1 controllers are used only when the executor runs as root".into(),
            );
        }
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "sandgate-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut controllers = Vec::new();
        let wanted = [
            memory.map(|bytes| {
                (
                    "memory",
                    vec![
                        ("memory.limit_in_bytes", bytes.to_string()),
                        // Swap counts too, where the kernel accounts it.
                        ("memory.memsw.limit_in_bytes", bytes.to_string()),
                    ],
                    ("memory.oom_control", "oom_kill"),
                    Limit::Memory,
                )
            }),
            tasks.map(|n| {
                (
                    "pids",
                    vec![("pids.max", n.to_string())],
                    ("pids.events", "max"),
                    Limit::Tasks,
                )
            }),
        ];
        for (controller, settings, counter, limit) in wanted.into_iter().flatten() {
            let made = (|| -> io::Result<PathBuf> {
                let own = own_path(controller)?;
                let base = root.join(controller).join(own.trim_start_matches('/'));
                if !is_cgroup_v1(&base)? {
                    return Err(io::Error::other(format!(
                        "{} is not a cgroup v1 hierarchy",
                        base.display()
                    )));
                }
                sweep_stale(&base);
                let parent = base.join(&name);
                fs::create_dir(&parent)?;
                Ok(parent)
            })();
            match made {
                Ok(parent) => controllers.push(Controller {
                    name: controller,
                    parent,
                    settings,
                    counter,
                    limit,
                }),
                Err(e) => {
                    for c in &controllers {
                        let _ = fs::remove_dir(&c.parent);
                    }
                    return Err(format!(
                        "cannot create a cgroup v1 {controller} cgroup under {}: {e}",
                        root.display()
                    ));
                }
            }
        }
        let pool = Pool {
            controllers,
            free: Mutex::new(Vec::new()),
            made: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        };
        // One slot now: a limit the kernel refuses is reported at start.
        let slot = pool.make_slot().map_err(|e| {
            format!(
                "cannot set up a cgroup v1 cgroup under {}: {e}",
                root.display()
            )
        })?;
        pool.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(slot);
        Ok(pool)
    }

    /// Whether the pool holds `limit`.
    pub(crate) fn holds(&self, limit: Limit) -> bool {
        self.controllers.iter().any(|c| c.limit == limit)
    }

    fn make_slot(&self) -> io::Result<Slot> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut slot = Slot {
            dirs: Vec::new(),
            procs: Vec::new(),
            counters: Vec::new(),
        };
        for c in &self.controllers {
            let dir = c.parent.join(n.to_string());
            if let Err(e) = fs::create_dir(&dir) {
                self.discard(slot);
                return Err(e);
            }
            self.made
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(dir.clone());
            slot.dirs.push(dir.clone());
            let set = || -> io::Result<(OwnedFd, OwnedFd)> {
                for (file, value) in &c.settings {
                    match fs::write(dir.join(file), value) {
                        Ok(()) => {}
                        // No swap accounting in this kernel: nothing to bound.
                        Err(e)
                            if e.kind() == io::ErrorKind::NotFound
                                && *file == "memory.memsw.limit_in_bytes" => {}
                        Err(e) => {
                            return Err(io::Error::new(e.kind(), format!("{} {file}: {e}", c.name)))
                        }
                    }
                }
                let procs = rustix::fs::open(
                    dir.join("cgroup.procs"),
                    OFlags::WRONLY | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                let counter = rustix::fs::open(
                    dir.join(c.counter.0),
                    OFlags::RDONLY | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                Ok((above_stdio(procs)?, above_stdio(counter)?))
            };
            match set() {
                Ok((procs, counter)) => {
                    slot.procs.push(procs);
                    slot.counters.push(counter);
                }
                Err(e) => {
                    self.discard(slot);
                    return Err(e);
                }
            }
        }
        Ok(slot)
    }

    /// Removes a slot's cgroups (those that hold no process).
    fn discard(&self, slot: Slot) {
        let Slot {
            dirs,
            procs,
            counters,
        } = slot;
        drop((procs, counters));
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
            .map(|fd| read_counter(fd).unwrap_or(0))
            .collect();
        Ok(Lease {
            slot: Some(slot),
            baseline,
            limits: self.controllers.iter().map(|c| c.limit).collect(),
        })
    }

    /// Takes a slot back once its exec is over: reused when no process is
    /// left in it, otherwise kept aside (and never reused).
    pub(crate) fn release(&self, mut lease: Lease) {
        let Some(slot) = lease.slot.take() else {
            return;
        };
        let empty = slot.dirs.iter().all(|d| {
            fs::read(d.join("cgroup.procs"))
                .is_ok_and(|procs| procs.iter().all(u8::is_ascii_whitespace))
        });
        if empty {
            self.free
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(slot);
        }
    }
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
        for c in &self.controllers {
            let _ = fs::remove_dir(&c.parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_parse() {
        assert_eq!(
            parse_counter(b"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"),
            Some(3)
        );
        assert_eq!(parse_counter(b"max 17\n"), Some(17));
        assert_eq!(parse_counter(b"oom_kill_disable 0\nunder_oom 0\n"), None);
    }
}
