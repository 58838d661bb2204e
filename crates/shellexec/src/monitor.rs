//! The sampling monitor: every [`SAMPLE`] while a command runs, the
//! executor reads its cgroup counters (when a cgroup holds a limit) and
//! walks the keeper's subtree in `/proc` for the limits no cgroup holds,
//! and names the first limit reached. The run then ends the whole tree
//! (see `run.rs`).
//!
//! What is summed over the tree (every process below the keeper, zombies
//! included, which the keeper reaps at once; in namespaces, not the
//! namespace's PID 1 itself, which is sandgate's and shares the
//! executor's memory, `clone(CLONE_VM)`: its resident set is the host
//! process's, and its one task is not the command's):
//!
//! - memory: resident pages (`rss` of `/proc/<pid>/stat`) times the page
//!   size (pages shared between processes count once per process), plus,
//!   in namespaces, what the view's private tmpfs mounts hold (`statfs`
//!   through the namespace's PID 1, the keeper's child: its
//!   `/proc/<pid>/root` is the view): their used blocks, and 1 KiB for
//!   each inode in use, which an empty file costs in kernel memory;
//! - tasks: threads (`num_threads`), so processes and threads;
//! - CPU time: user and system time of each process and of the children
//!   it reaped, plus those the keeper reaped (the time of a process that
//!   ended is added to its reaper's; PID 1's reaped children count, its
//!   own time does not), in clock ticks.

use std::time::{Duration, Instant};

use crate::cgroup::Lease;
use crate::limits::Limit;
use crate::proctree;

/// How often the tree is sampled.
pub(crate) const SAMPLE: Duration = Duration::from_millis(20);
/// When the first sample is taken: a command that ends sooner (`true`)
/// costs no walk of `/proc`.
const FIRST_SAMPLE: Duration = Duration::from_millis(10);

/// The limits to check by walking `/proc` (those no cgroup holds).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Walked {
    pub memory_bytes: Option<u64>,
    pub tasks: Option<u64>,
    pub cpu_ms: Option<u64>,
}

impl Walked {
    fn any(&self) -> bool {
        self.memory_bytes.is_some() || self.tasks.is_some() || self.cpu_ms.is_some()
    }
}

/// One run's monitor.
#[derive(Debug)]
pub(crate) struct Monitor {
    keeper: i32,
    walked: Walked,
    lease: Option<Lease>,
    /// The command runs in namespaces: the keeper's child is the
    /// namespace's PID 1, not a process of the command.
    in_view: bool,
    /// When the command runs in a view with private tmpfs mounts: the
    /// executor's own root (device and inode), which the view's PID 1
    /// keeps until it has moved into its view.
    view: Option<(u64, u64)>,
    next: Instant,
    page_size: u64,
    ticks_per_sec: u64,
}

impl Monitor {
    /// A monitor of the tree below `keeper` (in a view of its own when
    /// `view`), or `None` when there is nothing to check.
    pub(crate) fn new(
        keeper: i32,
        walked: Walked,
        lease: Option<Lease>,
        view: bool,
        began: Instant,
    ) -> Option<Monitor> {
        if !walked.any() && lease.is_none() {
            return None;
        }
        Some(Monitor {
            keeper,
            walked,
            lease,
            in_view: view,
            view: view
                .then(|| rustix::fs::stat("/").ok())
                .flatten()
                .map(|own| (own.st_dev, own.st_ino)),
            next: began + FIRST_SAMPLE,
            page_size: page_size(),
            ticks_per_sec: clock_ticks(),
        })
    }

    /// When the next sample is due.
    pub(crate) fn next(&self) -> Instant {
        self.next
    }

    /// Takes a sample if one is due: the first limit reached, if any.
    pub(crate) fn sample(&mut self, now: Instant) -> Option<Limit> {
        if now < self.next {
            return None;
        }
        self.next = now + SAMPLE;
        if let Some(limit) = self.lease.as_ref().and_then(Lease::reached) {
            return Some(limit);
        }
        if !self.walked.any() {
            return None;
        }
        let (keeper, tree) = proctree::subtree_stats_walked(self.keeper);
        let w = self.walked;
        // In namespaces, the namespace's PID 1 (the keeper's child) is
        // sandgate's: its resident set is the executor's whole memory.
        let pid1 = self
            .in_view
            .then(|| tree.iter().find(|p| p.ppid == self.keeper).map(|p| p.pid))
            .flatten();
        let command = || tree.iter().filter(|p| Some(p.pid) != pid1);
        if let Some(max) = w.tasks {
            let tasks: u64 = command().map(|p| p.threads).sum();
            if tasks > max {
                return Some(Limit::Tasks);
            }
        }
        if let Some(max) = w.memory_bytes {
            let pages: u64 = command().map(|p| p.rss).sum();
            let tmpfs = match (self.view, pid1) {
                (Some(own_root), Some(pid1)) => tmpfs_used(pid1, own_root),
                _ => 0,
            };
            if pages.saturating_mul(self.page_size).saturating_add(tmpfs) > max {
                return Some(Limit::Memory);
            }
        }
        if let Some(max) = w.cpu_ms {
            let reaped = keeper.map_or(0, |k| k.cutime + k.cstime);
            let own = |p: &proctree::Stat| {
                if Some(p.pid) == pid1 {
                    0
                } else {
                    p.utime + p.stime
                }
            };
            let ticks: u64 = reaped
                + tree
                    .iter()
                    .map(|p| own(p) + p.cutime + p.cstime)
                    .sum::<u64>();
            if ticks.saturating_mul(1000) / self.ticks_per_sec >= max {
                return Some(Limit::Cpu);
            }
        }
        None
    }

    /// The limit a cgroup counter shows reached, looked at once more when
    /// the run is over (an OOM kill that ended the command between two
    /// samples).
    pub(crate) fn last_word(&self) -> Option<Limit> {
        self.lease.as_ref().and_then(Lease::reached)
    }

    /// The cgroup lease, to give back once the run is over.
    pub(crate) fn into_lease(self) -> Option<Lease> {
        self.lease
    }
}

/// The bytes in use on the private tmpfs mounts of the view whose PID 1
/// is `pid1`, its inodes included (a mount that cannot be read counts
/// nothing). Nothing while
/// `pid1` has not yet moved into its view: its root is still the
/// executor's (`own_root`), whose `/tmp` (a tmpfs on many hosts) is not
/// the command's.
fn tmpfs_used(pid1: i32, own_root: (u64, u64)) -> u64 {
    let root = format!("/proc/{pid1}/root");
    let Ok(view) = rustix::fs::stat(root.as_str()) else {
        return 0;
    };
    if (view.st_dev, view.st_ino) == own_root {
        return 0;
    }
    crate::ns::PRIVATE_TMPFS
        .iter()
        .filter_map(|(path, _)| rustix::fs::statfs(format!("{root}{path}")).ok())
        .map(|st| {
            let used = st.f_blocks.saturating_sub(st.f_bfree);
            let inodes = st.f_files.saturating_sub(st.f_ffree);
            used.saturating_mul(u64::try_from(st.f_bsize).unwrap_or(0))
                .saturating_add(inodes.saturating_mul(crate::ns::TMPFS_INODE_BYTES))
        })
        .sum()
}

/// `sysconf(_SC_PAGESIZE)`: the unit of `rss` in `/proc/<pid>/stat`.
fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// `sysconf(_SC_CLK_TCK)`: the unit of the times in `/proc/<pid>/stat`.
fn clock_ticks() -> u64 {
    // SAFETY: sysconf reads a constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|&t| t > 0).unwrap_or(100)
}
