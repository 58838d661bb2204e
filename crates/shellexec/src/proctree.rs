//! Finding and ending every process a command started: the keeper's
//! subtree of the parent/child graph, read from `/proc`, and the
//! SIGTERM-then-SIGKILL sequence that empties it.
//!
//! The keeper is a child subreaper, so whatever the command starts —
//! backgrounded, `setsid`, double-forked — stays below it. Each process
//! is named by its pid and start time, and signalled through a pidfd, so a
//! recycled pid is never hit.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use crate::spawn::Keeper;
use crate::sys::{await_exit, pidfd_open};

/// How often the subtree is scanned while it is being killed.
pub(crate) const KILL_SCAN: Duration = Duration::from_millis(10);

/// Where killing the keeper's subtree stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reap {
    /// Nothing asked yet.
    Idle,
    /// SIGTERM sent (to each process seen) since then.
    Term(Instant),
    /// SIGKILL to each process seen, at every scan.
    Kill,
    /// The subtree was empty.
    Done,
}

/// Empties a keeper's subtree: SIGTERM (with SIGCONT, so a stopped
/// process sees it) to each process once, SIGKILL to all after the grace
/// period, a scan at most every [`KILL_SCAN`], until a scan finds nothing
/// and the keeper is gone (told, once a scan finds nothing or the grace
/// is over, to kill its children itself: see [`Keeper::sweep`]).
pub(crate) struct Killer {
    root: i32,
    grace: Duration,
    pub reap: Reap,
    signalled: HashSet<(i32, u64)>,
    next_scan: Instant,
    /// The keeper was told to kill its children ([`Keeper::sweep`]).
    swept: bool,
}

impl Killer {
    pub fn new(root: i32, grace: Duration, now: Instant) -> Self {
        Killer {
            root,
            grace,
            reap: Reap::Idle,
            signalled: HashSet::new(),
            next_scan: now,
            swept: false,
        }
    }

    /// Starts ending the subtree, unless that is under way.
    pub fn begin(&mut self, now: Instant) {
        if matches!(self.reap, Reap::Idle | Reap::Done) {
            self.reap = Reap::Term(now);
        }
    }

    /// Whether signals are being sent (the loop then wakes every scan).
    pub fn active(&self) -> bool {
        matches!(self.reap, Reap::Term(_) | Reap::Kill)
    }

    pub fn done(&self) -> bool {
        self.reap == Reap::Done
    }

    /// Tells the keeper to kill its children until none is left, once (a
    /// real-time signal queues: one per scan would pile up).
    fn sweep(&mut self, keeper: &Keeper) {
        if !self.swept {
            self.swept = true;
            keeper.sweep();
        }
    }

    /// One round: scans and signals if a scan is due. `after_exit` says
    /// the command's own process exited normally: then the keeper usually
    /// exits at once (it exits only when it has no child left), which
    /// proves the subtree empty and spares a scan of all of /proc.
    /// `keeper_exited` says the run's poll found the keeper exited (not
    /// reaped yet, so its pid is still its own): that makes a scan due at
    /// once, where the next one would otherwise hold the answer up to
    /// `KILL_SCAN`, as it does whenever the keeper takes longer than
    /// `keeper_gone`'s moment (PID 1 ending its namespaces on a busy
    /// host).
    pub fn step(
        &mut self,
        now: Instant,
        keeper: &mut Keeper,
        after_exit: bool,
        keeper_exited: bool,
    ) {
        let fresh = matches!(self.reap, Reap::Term(since) if since == now);
        let scan = now >= self.next_scan || fresh || keeper_exited;
        if !scan || !self.active() {
            return;
        }
        self.next_scan = now + KILL_SCAN;
        // A keeper the command stopped would reap nothing and never exit.
        keeper.resume();
        if fresh && after_exit && keeper_gone(keeper) {
            self.reap = Reap::Done;
            return;
        }
        let procs = subtree(self.root);
        if procs.is_empty() {
            // The subtree is empty once the keeper, which exits only when
            // it has no child left, is gone. A scan can miss what still
            // lives: a process that forks and exits at once has a new pid
            // at every scan, listed after the scan's list was read; it is
            // re-parented to the keeper, which kills it when told.
            if keeper_gone(keeper) {
                self.reap = Reap::Done;
            } else {
                self.sweep(keeper);
            }
            return;
        }
        match self.reap {
            Reap::Term(since) if now.duration_since(since) < self.grace => {
                for p in &procs {
                    if self.signalled.insert((p.pid, p.start)) {
                        signal(p, Signal::TERM);
                        signal(p, Signal::CONT);
                    }
                }
            }
            _ => {
                for p in &procs {
                    signal(p, Signal::KILL);
                }
                self.sweep(keeper);
                self.reap = Reap::Kill;
            }
        }
    }
}

/// Waits for the keeper until `limit` (looking every `step` without a
/// pidfd): its wait status, `Ok(None)` if it still runs at `limit`, an
/// error if it cannot be waited for.
pub(crate) fn await_keeper(
    keeper: &mut Keeper,
    limit: Instant,
    step: Duration,
) -> io::Result<Option<i32>> {
    loop {
        if let Some(st) = keeper.try_wait()? {
            return Ok(Some(st));
        }
        let now = Instant::now();
        if now >= limit {
            return Ok(None);
        }
        await_exit(keeper.pidfd(), limit - now, step);
    }
}

/// Whether the keeper has exited, giving it a moment (it exits right after
/// reporting the shell's status when nothing else is left): reaped, or
/// no longer ours to wait for (a host that ignores `SIGCHLD` reaps it).
fn keeper_gone(keeper: &mut Keeper) -> bool {
    let limit = Instant::now() + Duration::from_millis(2);
    !matches!(
        await_keeper(keeper, limit, Duration::from_micros(100)),
        Ok(None)
    )
}

/// Waits for the keeper until `limit`; past it, hands it to a thread.
pub(crate) fn wait_until(mut keeper: Keeper, limit: Instant) -> Option<i32> {
    match await_keeper(&mut keeper, limit, Duration::from_millis(1)) {
        Ok(Some(st)) => Some(st),
        Ok(None) => {
            reap_later(keeper);
            None
        }
        Err(_) => None,
    }
}

/// Kills the keeper's subtree until the keeper is reaped, on a thread
/// (the keeper told once to kill its children too).
pub(crate) fn reap_later(mut keeper: Keeper) {
    let _ = std::thread::Builder::new()
        .name("sandgate-reaper".into())
        .spawn(move || {
            keeper.sweep();
            loop {
                for p in subtree(keeper.pid()) {
                    signal(&p, Signal::KILL);
                }
                keeper.resume();
                match keeper.try_wait() {
                    Ok(None) => await_exit(
                        keeper.pidfd(),
                        Duration::from_millis(100),
                        Duration::from_millis(100),
                    ),
                    _ => return,
                }
            }
        });
}

/// A process in the keeper's subtree.
pub(crate) struct Proc {
    pid: i32,
    /// Start time in clock ticks since boot: with the pid, it names one
    /// process for good.
    start: u64,
}

/// What `/proc/<pid>/stat` says of a process (see proc_pid_stat(5)).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stat {
    pub pid: i32,
    pub state: u8,
    pub ppid: i32,
    /// Its process group.
    pub pgrp: i32,
    /// User and system time, then those of its reaped children, in clock
    /// ticks.
    pub utime: u64,
    pub stime: u64,
    pub cutime: u64,
    pub cstime: u64,
    pub threads: u64,
    /// Start time in clock ticks since boot.
    pub start: u64,
    /// Resident set size in pages.
    pub rss: u64,
}

/// `/proc/<pid>/stat`, parsed.
pub(crate) fn stat_of(pid: i32) -> Option<Stat> {
    let text = fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain anything: fields resume after the last
    // ')'.
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // `fields[0]` is field 3 of stat(5).
    let num = |field: usize| -> Option<u64> { fields.get(field - 3)?.parse().ok() };
    Some(Stat {
        pid,
        state: *fields.first()?.as_bytes().first()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        utime: num(14)?,
        stime: num(15)?,
        // Signed in the kernel's format; never negative in practice.
        cutime: num(16).unwrap_or(0),
        cstime: num(17).unwrap_or(0),
        threads: num(20).unwrap_or(1),
        start: num(22)?,
        rss: num(24).unwrap_or(0),
    })
}

/// `(ppid, start time, state)` of `pid`.
fn stat(pid: i32) -> Option<(i32, u64, u8)> {
    stat_of(pid).map(|s| (s.ppid, s.start, s.state))
}

/// Every process below `root` in the parent/child graph, `root` excluded,
/// with its `/proc/<pid>/stat` (zombies included); and `root`'s own.
pub(crate) fn subtree_stats(root: i32) -> (Option<Stat>, Vec<Stat>) {
    let Ok(dir) = fs::read_dir("/proc") else {
        return (None, Vec::new());
    };
    let mut children: HashMap<i32, Vec<Stat>> = HashMap::new();
    let mut root_stat = None;
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(st) = stat_of(pid) {
            if pid == root {
                root_stat = Some(st);
            }
            children.entry(st.ppid).or_default().push(st);
        }
    }
    let mut out = Vec::new();
    let mut queue = vec![root];
    let mut seen = HashSet::from([root]);
    while let Some(parent) = queue.pop() {
        for st in children.get(&parent).into_iter().flatten() {
            if !seen.insert(st.pid) {
                continue;
            }
            queue.push(st.pid);
            // Zombies count: a thread-group leader that called
            // pthread_exit shows `Z` while its other threads run (and hold
            // the pipes). Signalling a true zombie is harmless, and the
            // keeper reaps those at once.
            if st.state != b'X' {
                out.push(*st);
            }
        }
    }
    (root_stat, out)
}

/// As [`subtree_stats`], found by walking down from `root` through the
/// kernel's lists of each thread's children (as [`any_below`] does), so
/// that the cost follows `root`'s own tree rather than every process of
/// the host: the monitor samples every running command's tree 50 times a
/// second, and reading every process's `stat` each time made 32 commands
/// running at once cost the executor more than a CPU on a host of a few
/// hundred processes. Across `/proc` where the kernel lists no children.
/// At most 100,000 processes are looked at. A process that moves in the
/// tree while it is walked (its parent ends and the keeper adopts it) may
/// be missed by one walk and is seen by the next; the kill scans, which
/// must see everything, read all of `/proc` ([`subtree_stats`]).
pub(crate) fn subtree_stats_walked(root: i32) -> (Option<Stat>, Vec<Stat>) {
    let Some(mut stack) = children(root) else {
        return subtree_stats(root);
    };
    let root_stat = stat_of(root);
    let mut out = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut budget = 100_000;
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        budget -= 1;
        if budget == 0 {
            break;
        }
        // Gone since its parent's list was read: nothing to count.
        let Some(st) = stat_of(pid) else { continue };
        if st.state != b'X' {
            out.push(st);
        }
        stack.extend(children(pid).unwrap_or_default());
    }
    (root_stat, out)
}

/// Whether `found` holds for some process below `root`, looked for by
/// walking down from it through the kernel's lists of each thread's
/// children (`/proc/<pid>/task/<tid>/children`), so that the cost follows
/// `root`'s own tree rather than every process of the host; where the
/// kernel lists no children, across `/proc` ([`subtree_stats`]). At most
/// 100,000 processes are looked at.
pub(crate) fn any_below(root: i32, mut found: impl FnMut(i32) -> bool) -> bool {
    let Some(mut stack) = children(root) else {
        return subtree_stats(root).1.iter().any(|st| found(st.pid));
    };
    let mut budget = 100_000;
    while let Some(pid) = stack.pop() {
        budget -= 1;
        if budget == 0 {
            return false;
        }
        if found(pid) {
            return true;
        }
        stack.extend(children(pid).unwrap_or_default());
    }
    false
}

/// The children of every thread of process `pid`; `None` where the kernel
/// does not list them (or the process is gone).
///
/// A thread that ends between the listing of the threads and the read of
/// its list is no answer about the process: it had none of its children
/// to show any more (they went to another thread of it, maybe one already
/// read), so the threads are listed and read again. Before, such a thread
/// made every child of the process unseen, and the command's own process
/// group was taken for another's.
fn children(pid: i32) -> Option<Vec<i32>> {
    const TRIES: usize = 16;
    let mut out = Vec::new();
    for _ in 0..TRIES {
        out.clear();
        let mut raced = false;
        for task in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
            match fs::read_to_string(task.path().join("children")) {
                Ok(listed) => out.extend(
                    listed
                        .split_whitespace()
                        .filter_map(|n| n.parse::<i32>().ok()),
                ),
                // The thread has ended since it was listed.
                Err(_) if !task.path().exists() => raced = true,
                Err(_) => return None,
            }
        }
        if !raced {
            break;
        }
    }
    Some(out)
}

/// Every process below `root` in the parent/child graph, `root` excluded.
pub(crate) fn subtree(root: i32) -> Vec<Proc> {
    subtree_stats(root)
        .1
        .into_iter()
        .map(|st| Proc {
            pid: st.pid,
            start: st.start,
        })
        .collect()
}

/// Signals `p` if it is still the process that was seen (same start time),
/// through a pidfd where the kernel has them so that a recycled pid is
/// never hit.
pub(crate) fn signal(p: &Proc, sig: Signal) {
    let Some(pidfd) = pidfd_open(p.pid) else {
        if stat(p.pid).is_some_and(|(_, start, _)| start == p.start) {
            // A small window remains without pidfds (before Linux 5.3).
            if let Some(pid) = Pid::from_raw(p.pid) {
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
        return;
    };
    // The pidfd pins the process: if it is the one seen now, it is the one
    // signalled.
    if stat(p.pid).is_some_and(|(_, start, _)| start == p.start) {
        let _ = rustix::process::pidfd_send_signal(&pidfd, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_this_process() {
        let (ppid, start, state) = stat(std::process::id() as i32).unwrap();
        assert!(ppid > 0);
        assert!(start > 0);
        assert!(state.is_ascii_uppercase());
    }

    /// The walk through the children lists finds what the scan of all
    /// of `/proc` finds: a shell's backgrounded children, a subshell's
    /// own child, a zombie if the shell has not reaped it yet, and no
    /// process outside the tree.
    #[test]
    fn the_walk_down_finds_the_whole_tree() {
        let mut sh = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "sleep 30 & (sleep 30 & wait) & (exit 0) & sleep 30 & echo go; sleep 30",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(sh.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let root = sh.id() as i32;
        let pids = |(_, v): (Option<Stat>, Vec<Stat>)| {
            let mut p: Vec<i32> = v.iter().map(|s| s.pid).collect();
            p.sort_unstable();
            p
        };
        // Settled: the same answer twice from the full scan.
        let deadline = Instant::now() + Duration::from_secs(10);
        let (mut full, mut walked) = (Vec::new(), vec![-1]);
        while Instant::now() < deadline {
            let before = pids(subtree_stats(root));
            walked = pids(subtree_stats_walked(root));
            full = pids(subtree_stats(root));
            if before == full && full == walked && full.len() >= 5 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for p in subtree(root) {
            signal(&p, Signal::KILL);
        }
        let _ = sh.kill();
        let _ = sh.wait();
        // The three sleeps, the subshell and the subshell's sleep.
        assert!(full.len() >= 5, "the tree: {full:?}");
        assert_eq!(walked, full);
        assert_eq!(
            subtree_stats_walked(root).0.map(|s| s.pid),
            None,
            "the shell is gone"
        );
    }
}
