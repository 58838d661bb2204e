//! One run of a command, as a state machine: [`Run::step`] waits for one
//! event (output, the exit status, a `listen` to judge, an abort, a
//! deadline) and moves the run on, until it is [`Phase::Finished`] or the
//! backstop ends the wait.
//!
//! The phases:
//!
//! - `Running`: the command runs; nothing asked it to end.
//! - `Ending(why)`: a timeout, an abort, a resource limit the monitor saw
//!   reached, or the command's own exit (then
//!   what it left behind is cleaned up); the [`Killer`] empties the
//!   keeper's subtree while output is still read.
//! - `Finished`: the exit status is known (or the keeper is gone), the
//!   subtree is empty, both pipes are closed.
//! - `Backstop`: the call outlived timeout + grace + margin (a process
//!   holds a pipe outside the subtree, or cannot be killed): everything
//!   that can be killed is, and the call returns anyway.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

use rustix::event::{PollFd, PollFlags};

use crate::capture::Capture;
use crate::cgroup::Lease;
use crate::exec::{AbortSignal, BACKSTOP_MARGIN};
use crate::limits::Limit;
use crate::monitor::Monitor;
use crate::proctree::{self, Killer, KILL_SCAN};
use crate::spawn::Keeper;
use crate::sys::{self, exit_code, later, ms_until, read_some, ReadOutcome};
use crate::sys::{EXIT_ABORTED, EXIT_NOT_STARTED, EXIT_TIMEOUT};

/// Why the command is being ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    Timeout,
    Abort,
    /// The command exited by itself; what it left behind is cleaned up.
    Exited,
    /// The monitor saw a resource limit reached.
    Limit,
}

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Running,
    Ending(End),
    Finished,
    Backstop,
}

/// The status pipe: the keeper writes the command's exit code (4 bytes)
/// once the command's own process ends.
struct StatusPipe {
    fd: Option<OwnedFd>,
    buf: Vec<u8>,
}

/// How a run ended, for the result.
pub(crate) struct Outcome {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub truncated: bool,
    pub timed_out: bool,
    pub aborted: bool,
    /// The limit that ended the command, when known.
    pub limit: Option<Limit>,
    /// The cgroup lease, to give back to the pool.
    pub lease: Option<Lease>,
}

pub(crate) struct Run {
    deadline: Instant,
    backstop: Instant,
    keeper: Keeper,
    capture: Capture,
    status: StatusPipe,
    /// The command's exit code, once the keeper reported it.
    exited: Option<i32>,
    /// The seccomp listener for the command's `listen` calls, served while
    /// anything of the command may still call it (shared with the threads
    /// that perform waiting connects).
    notify: Option<Arc<OwnedFd>>,
    /// The command's connects, where the executor judges them.
    connects: Option<crate::connect::Connects>,
    user_abort: Option<AbortSignal>,
    internal: AbortSignal,
    /// An abort was seen (its descriptors are no longer polled).
    abort_noted: bool,
    killer: Killer,
    /// The last poll found the keeper's pidfd readable (it has exited).
    keeper_exited: bool,
    phase: Phase,
    /// Why it is ending or ended, once known (kept past `Ending`).
    why: Option<End>,
    timed_out: bool,
    aborted: bool,
    /// Samples the tree against the resource limits while it runs.
    monitor: Option<Monitor>,
    /// The resource limit the monitor saw reached.
    limit: Option<Limit>,
    /// A CPU limit is in force (with `RLIMIT_CPU` as its backstop): only
    /// then does a death by `SIGXCPU` name it.
    cpu_limited: bool,
    /// A file size limit (`RLIMIT_FSIZE`) is in force: only then does a
    /// death by `SIGXFSZ` name it.
    file_size_limited: bool,
}

/// What a polled descriptor stands for.
#[derive(Clone, Copy)]
enum Role {
    Output(usize),
    Status,
    Notify,
    Abort,
    /// The keeper's pidfd, polled while its subtree is being ended: its
    /// exit makes a scan due at once ([`Killer::step`]'s `keeper_exited`).
    Keeper,
}

impl Run {
    /// A run of a spawned command, ending at `began + timeout` at the
    /// latest (and returning by the backstop after that).
    pub fn new(
        keeper: Keeper,
        status: OwnedFd,
        notify: Option<OwnedFd>,
        capture: Capture,
        timing: (Instant, std::time::Duration, std::time::Duration),
        user_abort: Option<AbortSignal>,
        internal: AbortSignal,
    ) -> Run {
        let (began, timeout, grace) = timing;
        let deadline = later(began, timeout);
        let backstop = later(later(deadline, grace), BACKSTOP_MARGIN);
        sys::set_nonblocking(&status);
        let keeper_pid = keeper.pid();
        Run {
            deadline,
            backstop,
            keeper,
            capture,
            status: StatusPipe {
                fd: Some(status),
                buf: Vec::with_capacity(4),
            },
            exited: None,
            notify: notify.map(Arc::new),
            connects: None,
            user_abort,
            internal,
            abort_noted: false,
            killer: Killer::new(keeper_pid, grace, began),
            keeper_exited: false,
            phase: Phase::Running,
            why: None,
            timed_out: false,
            aborted: false,
            monitor: None,
            limit: None,
            cpu_limited: false,
            file_size_limited: false,
        }
    }

    /// Samples the tree against resource limits while the command runs;
    /// `cpu_limited` says a CPU limit is in force.
    pub fn with_monitor(mut self, monitor: Option<Monitor>, cpu_limited: bool) -> Run {
        self.monitor = monitor;
        self.cpu_limited = cpu_limited;
        self
    }

    /// Judges the command's connects by `rules` ([`crate::connect`]), where
    /// its filter hands them to the executor.
    pub fn with_socket_rules(mut self, rules: Option<crate::connect::SocketRules>) -> Run {
        self.connects = rules.map(|r| crate::connect::Connects::new(Arc::new(r)));
        self
    }

    /// Says a file size limit (`RLIMIT_FSIZE`) is in force, so that a
    /// death by `SIGXFSZ` names it.
    pub fn with_file_size_limit(mut self, limited: bool) -> Run {
        self.file_size_limited = limited;
        self
    }

    /// Steps until the run is over; then collects the keeper and the
    /// output.
    pub fn finish(mut self) -> Outcome {
        while !matches!(self.phase, Phase::Finished | Phase::Backstop) {
            self.step();
        }
        self.collect()
    }

    /// Moves the run on by one event.
    pub fn step(&mut self) {
        let now = Instant::now();
        if now >= self.backstop {
            self.phase = Phase::Backstop;
            return;
        }
        self.check_limits(now);
        self.check_resources(now);
        let after_exit = self.phase == Phase::Ending(End::Exited);
        self.killer
            .step(now, &mut self.keeper, after_exit, self.keeper_exited);

        let status_known = self.exited.is_some() || self.status.fd.is_none();
        if status_known && self.killer.done() && !self.capture.open() {
            self.phase = Phase::Finished;
            return;
        }
        if self.status.fd.is_none() && self.exited.is_none() && self.phase == Phase::Running {
            // The keeper died without reporting: end everything.
            self.end(End::Exited, now);
        }
        self.wait(now);
    }

    /// Starts ending the command when a limit is reached or it exited.
    fn check_limits(&mut self, now: Instant) {
        // An abort after the command exited only hurries the clean-up.
        let aborted = !self.abort_noted
            && (self
                .user_abort
                .as_ref()
                .is_some_and(AbortSignal::is_aborted)
                || self.internal.is_aborted());
        self.abort_noted |= aborted;
        if aborted {
            self.end(End::Abort, now);
            self.killer.begin(now);
        } else if self.phase == Phase::Running && now >= self.deadline && self.exited.is_none() {
            self.end(End::Timeout, now);
        }
        if self.exited.is_some() && self.phase == Phase::Running {
            self.end(End::Exited, now);
        }
    }

    /// Samples the tree when a sample is due, and ends it past a limit.
    fn check_resources(&mut self, now: Instant) {
        if self.phase != Phase::Running || self.exited.is_some() {
            return;
        }
        if let Some(limit) = self.monitor.as_mut().and_then(|m| m.sample(now)) {
            self.limit = Some(limit);
            self.end(End::Limit, now);
        }
    }

    /// Enters `Ending(why)` (the first reason stays) and starts the kill.
    fn end(&mut self, why: End, now: Instant) {
        if self.phase == Phase::Running {
            self.phase = Phase::Ending(why);
            self.why = Some(why);
            match why {
                End::Timeout => self.timed_out = true,
                End::Abort => self.aborted = true,
                End::Exited | End::Limit => {}
            }
        }
        self.killer.begin(now);
    }

    /// Waits for output, the status, a `listen`, an abort or the next
    /// deadline, and handles what came.
    fn wait(&mut self, now: Instant) {
        let mut wake = self.backstop;
        if self.phase == Phase::Running {
            wake = wake.min(self.deadline);
            if let Some(m) = &self.monitor {
                wake = wake.min(m.next());
            }
        }
        let mut timeout_ms = ms_until(wake, now);
        if self.killer.active() || (self.killer.done() && !self.capture.open()) {
            timeout_ms = timeout_ms.min(KILL_SCAN.as_millis() as i32);
        }

        let mut roles: Vec<Role> = Vec::with_capacity(7);
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(7);
        for (i, s) in self.capture.streams.iter().enumerate() {
            if let Some(fd) = &s.fd {
                fds.push(PollFd::new(fd, PollFlags::IN));
                roles.push(Role::Output(i));
            }
        }
        if let Some(fd) = &self.status.fd {
            fds.push(PollFd::new(fd, PollFlags::IN));
            roles.push(Role::Status);
        }
        if let Some(fd) = &self.notify {
            fds.push(PollFd::new(fd, PollFlags::IN));
            roles.push(Role::Notify);
        }
        if !self.abort_noted {
            if let Some(a) = &self.user_abort {
                fds.push(PollFd::new(a.event(), PollFlags::IN));
                roles.push(Role::Abort);
            }
            fds.push(PollFd::new(self.internal.event(), PollFlags::IN));
            roles.push(Role::Abort);
        }
        if self.killer.active() {
            if let Some(fd) = self.keeper.pidfd() {
                fds.push(PollFd::new(fd, PollFlags::IN));
                roles.push(Role::Keeper);
            }
        }
        // EINTR or a transient ENOMEM: the next step tries again (the
        // backstop bounds the loop); returning would leave the command
        // running.
        let ready: Vec<(Role, PollFlags)> =
            match rustix::event::poll(&mut fds, Some(&sys::timespec(timeout_ms))) {
                Ok(_) => roles
                    .iter()
                    .zip(&fds)
                    .filter(|(_, f)| !f.revents().is_empty())
                    .map(|(r, f)| (*r, f.revents()))
                    .collect(),
                Err(rustix::io::Errno::INTR) => Vec::new(),
                Err(_) => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    Vec::new()
                }
            };
        drop(fds);
        self.keeper_exited = false;
        for (role, revents) in ready {
            match role {
                Role::Output(i) => self.capture.drain(i),
                Role::Status => self.read_status(),
                Role::Notify => {
                    if revents.contains(PollFlags::IN) {
                        if let Some(fd) = &self.notify {
                            let keeper = self.keeper.pid();
                            crate::seccomp::serve_one(fd, keeper, self.connects.as_mut());
                        }
                    } else {
                        // Hung up: no process of the command is left
                        // under the filter.
                        self.notify = None;
                    }
                }
                // Seen at the next step's limit check.
                Role::Abort => {}
                // A scan at the next step.
                Role::Keeper => self.keeper_exited = true,
            }
        }
    }

    fn read_status(&mut self) {
        let Some(fd) = &self.status.fd else { return };
        let mut word = [std::mem::MaybeUninit::<u8>::uninit(); 4];
        let want = 4 - self.status.buf.len().min(4);
        match read_some(fd, &mut word[..want]) {
            ReadOutcome::Data(n) => {
                for b in &word[..n] {
                    // SAFETY: read(2) initialised the first `n` bytes.
                    self.status.buf.push(unsafe { b.assume_init() });
                }
                if let Ok(raw) = <[u8; 4]>::try_from(&self.status.buf[..]) {
                    self.exited = Some(i32::from_ne_bytes(raw));
                    self.status.fd = None;
                }
            }
            ReadOutcome::Eof => self.status.fd = None,
            ReadOutcome::Again => {}
        }
    }

    /// Collects the keeper (it exits once its subtree is empty) and the
    /// output, and says how the run ended.
    fn collect(self) -> Outcome {
        let Run {
            backstop,
            mut keeper,
            capture,
            exited,
            phase,
            why,
            mut timed_out,
            aborted,
            monitor,
            limit,
            cpu_limited,
            file_size_limited,
            connects,
            ..
        } = self;
        let keeper_status = if phase == Phase::Backstop {
            timed_out = !aborted;
            for p in proctree::subtree(keeper.pid()) {
                proctree::signal(&p, rustix::process::Signal::KILL);
            }
            match keeper.try_wait() {
                Ok(Some(st)) => Some(st),
                _ => {
                    proctree::reap_later(keeper);
                    None
                }
            }
        } else {
            proctree::wait_until(keeper, backstop)
        };
        // Every process of the command is gone (but past the backstop):
        // the threads performing its connects end within a slice.
        if let (Some(c), false) = (connects, phase == Phase::Backstop) {
            c.finish();
        }
        let (stdout, stderr, truncated) = capture.finish();
        if exited.is_none() && keeper_status.is_none() && why != Some(End::Abort) {
            // Nothing says how it ended, and the backstop ended the wait.
            timed_out = true;
        }
        let exit_code = match why {
            Some(End::Timeout) => EXIT_TIMEOUT,
            Some(End::Abort) => EXIT_ABORTED,
            _ if timed_out => EXIT_TIMEOUT,
            _ => match (exited, keeper_status) {
                (Some(code), _) => code,
                (None, Some(st)) => exit_code(st).unwrap_or(EXIT_NOT_STARTED),
                (None, None) => EXIT_TIMEOUT,
            },
        };
        // What ended it, most specific first: a limit the monitor saw, a
        // cgroup counter that rose (an OOM kill between two samples), a
        // process killed by its CPU or file size rlimit, the timeout, the
        // output cap. The exit code of a `SIGXCPU` death names the CPU
        // limit only where one is in force: a command can die of `SIGXCPU`
        // by its own hand, or exit 152, and must not pass for stopped by a
        // limit the policy does not set (where one is set, it could as well
        // reach it). The same holds for `SIGXFSZ` (153) and the file size
        // limit.
        let limit = limit
            .or_else(|| monitor.as_ref().and_then(Monitor::last_word))
            .or_else(|| (cpu_limited && exit_code == 128 + libc::SIGXCPU).then_some(Limit::Cpu))
            .or_else(|| {
                (file_size_limited && exit_code == 128 + libc::SIGXFSZ).then_some(Limit::FileSize)
            })
            .or(timed_out.then_some(Limit::Timeout))
            .or(truncated.then_some(Limit::Output));
        Outcome {
            exit_code,
            stdout,
            stderr,
            truncated,
            timed_out,
            aborted,
            limit: if aborted { None } else { limit },
            lease: monitor.and_then(Monitor::into_lease),
        }
    }
}
