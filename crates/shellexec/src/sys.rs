//! The kernel calls the executor's thread makes, through rustix: none of
//! them reads or writes `errno` (rustix's Linux backend makes raw system
//! calls), which matters because the keeper shares the executor's memory
//! and thread-local storage (see `spawn.rs`). Also the exit codes and the
//! wait-status arithmetic, which the keeper uses too.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

/// Exit code of a timed-out command.
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code of an aborted command.
pub const EXIT_ABORTED: i32 = 130;
/// Exit code when the command could not be started.
pub const EXIT_NOT_STARTED: i32 = 127;

/// `pidfd_open(pid, 0)`: a descriptor that pins the process and becomes
/// readable when it exits; `None` where the kernel has none (before 5.3)
/// or the process is gone.
///
/// # References
///  - [pidfd_open(2)](https://man7.org/linux/man-pages/man2/pidfd_open.2.html)
pub(crate) fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Waits for child `pid` to end and reaps it, EINTR retried: a signal the
/// host's handler takes (one installed without `SA_RESTART`) would
/// otherwise end the wait and leave the child a zombie for as long as the
/// host runs.
pub(crate) fn reap(pid: i32) {
    let Some(p) = rustix::process::Pid::from_raw(pid) else {
        return;
    };
    while let Err(rustix::io::Errno::INTR) =
        rustix::process::waitpid(Some(p), rustix::process::WaitOptions::empty())
    {}
}

/// `poll(2)` on one descriptor for readability, for at most `ms`
/// milliseconds (0: do not wait): whether it is readable (or hung up).
pub(crate) fn readable(fd: impl AsFd, ms: i32) -> bool {
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let timeout = timespec(ms);
    matches!(rustix::event::poll(&mut fds, Some(&timeout)), Ok(n) if n > 0)
}

/// A poll timeout of `ms` milliseconds (never negative).
pub(crate) fn timespec(ms: i32) -> Timespec {
    let ms = i64::from(ms.max(0));
    Timespec {
        tv_sec: ms / 1000,
        tv_nsec: (ms % 1000) * 1_000_000,
    }
}

/// The exit code a wait status stands for: the code, or 128 + the signal;
/// `None` for a stop or a continue. Pure arithmetic (`WIFEXITED` and
/// friends), so the keeper may call it.
pub(crate) const fn exit_code(st: i32) -> Option<i32> {
    let sig = st & 0x7f;
    if sig == 0 {
        Some((st >> 8) & 0xff)
    } else if sig != 0x7f && st & 0xffff != 0xffff {
        Some(128 + sig)
    } else {
        None
    }
}

/// `fcntl(F_SETFL, O_NONBLOCK)` added to what is set (errors ignored: a
/// blocking read then only delays the loop until data comes).
pub(crate) fn set_nonblocking(fd: impl AsFd) {
    if let Ok(flags) = rustix::fs::fcntl_getfl(&fd) {
        let _ = rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK);
    }
}

/// What one read gave.
pub(crate) enum ReadOutcome {
    /// This many bytes, now initialised at the start of the buffer.
    Data(usize),
    /// The write end is closed (or the descriptor failed).
    Eof,
    /// Nothing to read now.
    Again,
}

/// One `read(2)` into `buf` (EINTR retried).
pub(crate) fn read_some(fd: impl AsFd, buf: &mut [MaybeUninit<u8>]) -> ReadOutcome {
    loop {
        match rustix::io::read(&fd, &mut *buf) {
            Ok(([], _)) => return ReadOutcome::Eof,
            Ok((init, _)) => return ReadOutcome::Data(init.len()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::AGAIN) => return ReadOutcome::Again,
            Err(_) => return ReadOutcome::Eof,
        }
    }
}

/// A close-on-exec pipe, both ends numbered above 2 (the keeper moves the
/// child's stdio onto 0–2, which must not hit any of them).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// `fd`, or a close-on-exec duplicate of it numbered 3 or above.
pub(crate) fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if std::os::fd::AsRawFd::as_raw_fd(&fd) > 2 {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
}

/// `t + d`, saturating far in the future.
pub(crate) fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .or_else(|| t.checked_add(Duration::from_secs(1 << 30)))
        .unwrap_or(t)
}

/// Milliseconds from `now` until `when`, rounded up, for `poll`.
pub(crate) fn ms_until(when: Instant, now: Instant) -> i32 {
    let d = when.saturating_duration_since(now);
    let ms = d.as_nanos().div_ceil(1_000_000);
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// Sleeps until the process behind `pidfd` exits or `d` passes; without a
/// pidfd, sleeps `step` (at most `d`).
pub(crate) fn await_exit(pidfd: Option<&OwnedFd>, d: Duration, step: Duration) {
    match pidfd {
        Some(fd) => {
            let ms = i32::try_from(d.as_millis().max(1)).unwrap_or(i32::MAX);
            // A spurious wake only makes the caller look again sooner.
            readable(fd, ms);
        }
        None => std::thread::sleep(step.min(d)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_matches_the_libc_macros() {
        for st in [
            0,
            1 << 8,
            42 << 8,
            255 << 8,
            9,
            15,
            9 | 0x80,
            0x137f,
            0xffff,
        ] {
            let want = if libc::WIFEXITED(st) {
                Some(libc::WEXITSTATUS(st))
            } else if libc::WIFSIGNALED(st) {
                Some(128 + libc::WTERMSIG(st))
            } else {
                None
            };
            assert_eq!(exit_code(st), want, "status {st:#x}");
        }
    }

    #[test]
    fn ms_until_rounds_up() {
        let now = Instant::now();
        assert_eq!(ms_until(now, now), 0);
        assert_eq!(ms_until(now + Duration::from_micros(1), now), 1);
        assert_eq!(ms_until(now + Duration::from_millis(5), now), 5);
    }
}
