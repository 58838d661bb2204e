//! Starting a command: the keeper and the shell (see the process layout in
//! [`crate::exec`]).
//!
//! The keeper is started with `clone(CLONE_VM)`: it runs in the executor's
//! memory, on a stack of its own, so nothing of the executor is copied (a
//! `fork` copies the page tables, and every page either side then writes
//! takes a copy-on-write fault). The keeper starts the shell with
//! `clone(CLONE_VM | CLONE_VFORK)`, as `posix_spawn` does, and waits until
//! the shell has called `execve`.
//!
//! Both run in memory the executor keeps using, so between their `clone`
//! and their end (the keeper) or `execve` (the shell) they obey these rules:
//!
//! - only raw system calls (the `syscalls` crate, and a `clone` written in
//!   assembly on x86_64 and aarch64), which neither set nor read `errno`:
//!   `errno` lives in the thread-local storage of the executor's thread,
//!   whose register the keeper inherits. On other architectures `clone`
//!   goes through glibc, which writes `errno` only when it fails, while
//!   the executor's thread is blocked in a raw `read`;
//! - no allocation, no lock, no panic: they read a [`Shared`] block made
//!   before the `clone` and write only its two atomics, their stacks and
//!   their own descriptor tables;
//! - every signal is blocked from the `clone` on (the executor blocks them
//!   around it, and the mask is inherited), so no handler of the host's can
//!   run on these stacks; the keeper resets the caught ones to the default
//!   before the shell is started, and the shell unblocks signals just
//!   before `execve`;
//! - the block is freed only once the keeper has exited *after* reporting
//!   that the shell was past `execve` (or had exited). A keeper that dies
//!   before that report (killed from outside) leaves its block allocated
//!   for good: its shell may still be using it.
//!
//! Under valgrind, which refuses `CLONE_VM` without `CLONE_THREAD`, the
//! keeper is forked instead (a copy of memory; the rules still hold).
//!
//! The keeper reports on the status pipe: first 8 bytes (`0` and `0` when
//! the shell started; `1` and the error number when it could not), then,
//! once the shell ends, its exit code as 4 bytes.

use std::any::Any;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use rustix::process::{Pid, WaitOptions};
use syscalls::{Errno, Sysno};

use crate::binds::{self, BindPlan};
use crate::cgroup::Placement;
use crate::confine::Prepared;
use crate::ns::{self, Namespaces};
use crate::seccomp::Listen;
use crate::sys::{above_stdio, exit_code, pidfd_open, pipe, readable, EXIT_NOT_STARTED};

/// Bytes of the keeper's stack (it makes a few raw system calls).
const KEEPER_STACK: usize = 64 * 1024;
/// Bytes of the shell's stack between its `clone` and its `execve`
/// (confinement is applied there).
const SHELL_STACK: usize = 128 * 1024;
/// Bytes of the stack of the keeper that is PID 1 of the command's PID
/// namespace (it builds the view).
const PID1_STACK: usize = 64 * 1024;

/// The first report's tags.
const STARTED: u32 = 0;
const FAILED: u32 = 1;

/// The errno reported for an `execve` that answered `ENOENT` for a file
/// that is there: what is missing is the interpreter its `#!` line names
/// (or its dynamic loader). No errno has this value.
const INTERPRETER_MISSING: i32 = 0x1000 | libc::ENOENT;

/// Everything the keeper and the shell read between `clone` and `execve`,
/// made before the keeper is started and freed only once it is gone.
struct Shared {
    /// Both stacks, behind guard pages.
    _stacks: Stacks,
    shell_top: usize,
    pid1_top: usize,
    /// Set when the command runs in namespaces of its own.
    ns: Option<NsJoin>,
    /// In namespaces: the working directory's path (the view binds it at
    /// its host path), checked against `cwd` when that is set.
    cwd_path: Option<CString>,
    /// Where to `execve` the shell, in order (a `PATH` search when the
    /// shell names no directory).
    paths: Vec<CString>,
    search: bool,
    /// NULL-terminated, pointing into `_args` and `_env`.
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    _args: Vec<CString>,
    _env: Arc<dyn Any + Send + Sync>,
    prepared: Prepared,
    /// The shell's working directory, or -1.
    cwd: RawFd,
    /// The shell's stdin, stdout and stderr (all above 2).
    stdio: [RawFd; 3],
    /// The status pipe's write end (above 2).
    status: RawFd,
    /// The shell's end of the socket that carries its seccomp listener to
    /// the executor (above 2), or -1 when the filter notifies nobody.
    notify: RawFd,
    /// The cgroups the shell enters before `execve`.
    placement: Placement,
    /// The executor's pid, which the keeper checks its parent against.
    parent: i32,
    /// Set by the keeper: its pid, which the shell checks its parent
    /// against.
    keeper: AtomicI32,
    /// Set by the shell when it cannot be started: the error number.
    failed: AtomicI32,
    /// In namespaces: the protected entries to bind in the view.
    binds: Option<BindPlan>,
    /// Set by PID 1: what it could not bind ([`binds::pack_skipped`]),
    /// sent with the start report.
    binds_skipped: AtomicU32,
}

// SAFETY: the raw pointers point into strings the block owns, which never
// change; the block is only read (but for its atomics).
unsafe impl Send for Shared {}
// SAFETY: as for `Send`.
unsafe impl Sync for Shared {}

/// The namespaces an exec joins, as raw descriptors the keeper inherits.
#[derive(Clone, Copy)]
struct NsJoin {
    user: RawFd,
    net: RawFd,
    root: bool,
    last_cap: u32,
    /// How long PID 1 lets what the command left behind end after SIGTERM.
    grace_ms: u32,
}

/// Namespaces to run a command in (see `ns.rs`).
pub(crate) struct InNamespaces<'a> {
    pub namespaces: &'a Namespaces,
    /// Between SIGTERM and SIGKILL for what the command leaves behind.
    pub grace: std::time::Duration,
    /// The working directory's path when the caller gave none.
    pub default_cwd: Option<std::path::PathBuf>,
    /// The protected entries to bind read-only in the view.
    pub binds: Option<BindPlan>,
}

/// A started command: the keeper, and the executor's ends of the pipes.
pub(crate) struct Spawned {
    pub keeper: Keeper,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The status pipe's read end, past the start report.
    pub status: OwnedFd,
    /// The seccomp listener for the shell's `listen` calls, when the
    /// filter hands them to the executor.
    pub notify: Option<OwnedFd>,
    /// What PID 1 could not bind ([`binds::pack_skipped`]).
    pub binds_skipped: u32,
    /// The command kept its keeper stopped before the keeper could report
    /// the start, and was killed for it.
    pub held: bool,
}

/// The keeper process: our child until it is reaped.
pub(crate) struct Keeper {
    pid: i32,
    pidfd: Option<OwnedFd>,
    /// The block its stack lives in; freed once it may be (see the module
    /// documentation), leaked otherwise.
    shared: *mut Shared,
    /// The shell is past `execve` or gone: the block is no longer read by
    /// the shell.
    started: bool,
    /// Its wait status once reaped.
    status: Option<i32>,
}

// SAFETY: `shared` is only freed by the one owner of the `Keeper`.
unsafe impl Send for Keeper {}

impl Keeper {
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Readable once the keeper exits.
    pub fn pidfd(&self) -> Option<&OwnedFd> {
        self.pidfd.as_ref()
    }

    /// Its wait status if it has exited (reaping it), `Ok(None)` if it
    /// runs, an error if it cannot be waited for (no longer our child).
    pub fn try_wait(&mut self) -> io::Result<Option<i32>> {
        self.waitpid(WaitOptions::NOHANG)
    }

    /// Tells the floor's keeper the tree is being ended ([`SWEEP`]): it
    /// then kills each child it has until none is left, and exits. Never
    /// sent once it is reaped (its pid may be another's then); a keeper in
    /// namespaces leaves the signal blocked and pending (PID 1 ends the
    /// namespace).
    pub fn sweep(&self) {
        if self.status.is_some() {
            return;
        }
        match &self.pidfd {
            Some(fd) => {
                // SAFETY: a raw call on a descriptor we own and integers.
                let _ = unsafe {
                    syscalls::syscall!(Sysno::pidfd_send_signal, fd.as_raw_fd(), SWEEP, 0, 0)
                };
            }
            None => {
                // Our child, not yet reaped: the pid is still its own.
                // SAFETY: a raw call on integers.
                let _ = unsafe { syscalls::syscall!(Sysno::kill, self.pid, SWEEP) };
            }
        }
    }

    /// Continues the keeper if something stopped it: without signal
    /// scoping the command can (`kill -STOP $PPID`), and a stopped keeper
    /// neither reports, nor reaps, nor sweeps. Harmless when it runs (it
    /// keeps `SIGCONT` blocked and never reads it). Never sent once it is
    /// reaped.
    pub fn resume(&self) {
        if self.status.is_some() {
            return;
        }
        match &self.pidfd {
            Some(fd) => {
                let _ = rustix::process::pidfd_send_signal(fd, rustix::process::Signal::CONT);
            }
            None => {
                // Our child, not yet reaped: the pid is still its own.
                // SAFETY: a raw call on integers.
                let _ = unsafe { syscalls::syscall!(Sysno::kill, self.pid, libc::SIGCONT) };
            }
        }
    }

    /// Blocks until the keeper exits (it is about to).
    fn wait(&mut self) {
        let _ = self.waitpid(WaitOptions::empty());
    }

    /// `waitpid` on the keeper (EINTR retried): its status once it has
    /// exited (freeing the block if it may be), `Ok(None)` while it runs
    /// (`WNOHANG`).
    fn waitpid(&mut self, options: WaitOptions) -> io::Result<Option<i32>> {
        if let Some(st) = self.status {
            return Ok(Some(st));
        }
        let pid =
            Pid::from_raw(self.pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        loop {
            match rustix::process::waitpid(Some(pid), options) {
                Ok(None) => return Ok(None),
                Ok(Some((_, st))) => {
                    let st = st.as_raw();
                    self.status = Some(st);
                    self.release();
                    return Ok(Some(st));
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Whether the keeper is known to have exited: reaped, or its pidfd
    /// readable (a host that ignores SIGCHLD reaps it for us).
    fn exited(&self) -> bool {
        self.status.is_some() || self.pidfd.as_ref().is_some_and(|fd| readable(fd, 0))
    }

    /// Frees the block if nothing can use it any more.
    fn release(&mut self) {
        if self.shared.is_null() || !self.started || !self.exited() {
            return;
        }
        // SAFETY: made by `Box::into_raw` in `spawn`; the keeper has exited
        // and the shell is past `execve`, so nothing else uses it; nulled so
        // that it is freed once.
        drop(unsafe { Box::from_raw(self.shared) });
        self.shared = std::ptr::null_mut();
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // Freed if the keeper is gone; otherwise left allocated, as its
        // stack may still be in use.
        self.release();
    }
}

/// Whether the keeper may share the executor's memory (not under
/// valgrind, which refuses such a `clone`).
fn share_memory() -> bool {
    static SHARE: OnceLock<bool> = OnceLock::new();
    *SHARE.get_or_init(|| {
        std::fs::read("/proc/self/maps")
            .map(|maps| !maps.windows(9).any(|w| w == b"vgpreload"))
            .unwrap_or(true)
    })
}

/// Where `execvp` would look for `name` with the child's `PATH`.
fn search_paths(name: &[u8], envp: &[CString]) -> Vec<CString> {
    let path = envp
        .iter()
        .find_map(|kv| kv.as_bytes().strip_prefix(b"PATH="))
        .unwrap_or(b"/bin:/usr/bin");
    path.split(|&b| b == b':')
        .filter_map(|dir| {
            // An empty entry is the working directory.
            let mut full = Vec::with_capacity(dir.len() + 1 + name.len());
            if !dir.is_empty() {
                full.extend_from_slice(dir);
                full.push(b'/');
            }
            full.extend_from_slice(name);
            CString::new(full).ok()
        })
        .collect()
}

fn nul(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what} contains a NUL byte"),
    )
}

/// What the keeper starts.
pub(crate) enum Program<'a> {
    /// `shell -c command`.
    Shell { shell: &'a Path, command: &'a str },
    /// A program by path (searched in the child's `PATH` when it names no
    /// directory), from its argv (`args[0]` included), passed as bytes.
    Argv { path: &'a Path, args: Vec<CString> },
}

impl Program<'_> {
    /// The path to `execve` and the argv.
    fn parts(self) -> io::Result<(CString, Vec<CString>)> {
        match self {
            Program::Shell { shell, command } => {
                let path = CString::new(shell.as_os_str().as_bytes())
                    .map_err(|_| nul("the shell's path"))?;
                let args = vec![
                    path.clone(),
                    CString::from(c"-c"),
                    CString::new(command).map_err(|_| nul("the command"))?,
                ];
                Ok((path, args))
            }
            Program::Argv { path, args } => {
                let path = CString::new(path.as_os_str().as_bytes())
                    .map_err(|_| nul("the program's path"))?;
                Ok((path, args))
            }
        }
    }
}

/// The keeper's and the shell's stacks, each with a `PROT_NONE` guard
/// page below it, so that an overflow faults (SIGSEGV in that process)
/// instead of writing into the executor's heap or the other stack.
///
/// Layout, low to high: guard, keeper stack, guard, shell stack, guard,
/// PID 1's stack.
struct Stacks {
    base: *mut std::ffi::c_void,
    len: usize,
}

const GUARD: usize = 4096;

impl Stacks {
    fn map() -> io::Result<Stacks> {
        use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};
        let len = GUARD + KEEPER_STACK + GUARD + SHELL_STACK + GUARD + PID1_STACK;
        // SAFETY: a fresh private anonymous mapping at an address the
        // kernel picks; nothing else refers to it.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::STACK,
            )?
        };
        let stacks = Stacks { base, len };
        for at in [
            0,
            GUARD + KEEPER_STACK,
            GUARD + KEEPER_STACK + GUARD + SHELL_STACK,
        ] {
            // SAFETY: a page-aligned page inside the mapping just made.
            unsafe {
                rustix::mm::mprotect(
                    base.cast::<u8>().add(at).cast(),
                    GUARD,
                    MprotectFlags::empty(),
                )?
            };
        }
        Ok(stacks)
    }

    /// The keeper's stack top (stacks grow down).
    fn keeper_top(&self) -> usize {
        self.base as usize + GUARD + KEEPER_STACK
    }

    /// The shell's stack top.
    fn shell_top(&self) -> usize {
        self.base as usize + GUARD + KEEPER_STACK + GUARD + SHELL_STACK
    }

    /// PID 1's stack top.
    fn pid1_top(&self) -> usize {
        self.base as usize + self.len
    }
}

impl Drop for Stacks {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, used by nothing any more (the
        // block holding it is freed only when the keeper and the shell are
        // done with it).
        unsafe {
            let _ = rustix::mm::munmap(self.base, self.len);
        }
    }
}

/// Starts the keeper and, through it, `program`. An error means nothing
/// runs: the program could not be started (with the kernel's reason), or
/// its path or an argument holds a NUL byte. `deadline` is the call's:
/// past it, a keeper the command holds stopped before its start report
/// ends the wait (see the start report below).
#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn(
    program: Program<'_>,
    envp: &[CString],
    env_owner: Arc<dyn Any + Send + Sync>,
    prepared: &Prepared,
    cwd: Option<BorrowedFd<'_>>,
    in_ns: Option<InNamespaces<'_>>,
    placement: Placement,
    deadline: std::time::Instant,
) -> io::Result<Spawned> {
    let (path, args) = program.parts()?;
    // In the view the working directory is found by its path (the same as
    // on the host), and checked against the descriptor.
    let cwd_path = match (&in_ns, cwd) {
        (None, _) => None,
        (Some(_), Some(fd)) => {
            let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
            Some(CString::new(link.as_os_str().as_bytes()).map_err(|_| nul("the directory"))?)
        }
        (Some(n), None) => n
            .default_cwd
            .as_ref()
            .and_then(|p| CString::new(p.as_os_str().as_bytes()).ok()),
    };
    let mut in_ns = in_ns;
    let bind_plan = in_ns
        .as_mut()
        .and_then(|n| n.binds.take())
        .filter(|p| !p.is_empty());
    let ns_join = in_ns.as_ref().map(|n| NsJoin {
        user: n.namespaces.user.as_raw_fd(),
        net: n.namespaces.net.as_raw_fd(),
        root: n.namespaces.root,
        last_cap: n.namespaces.last_cap,
        grace_ms: u32::try_from(n.grace.as_millis()).unwrap_or(u32::MAX),
    });
    let search = !path.as_bytes().contains(&b'/');
    let paths = if path.as_bytes().is_empty() {
        Vec::new()
    } else if search {
        search_paths(path.as_bytes(), envp)
    } else {
        vec![path]
    };
    if paths.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }

    // The child's ends, all above 2 and close-on-exec in the executor.
    let cwd = cwd
        .map(|fd| rustix::io::fcntl_dupfd_cloexec(fd, 3))
        .transpose()?;
    let null = above_stdio(rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    let notify = if prepared.notifies() && ns_join.is_none() {
        let (ours, theirs) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )?;
        Some((ours, above_stdio(theirs)?))
    } else {
        None
    };

    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    let stacks = Stacks::map()?;
    let keeper_top = stacks.keeper_top();
    let shared = Box::new(Shared {
        shell_top: stacks.shell_top(),
        pid1_top: stacks.pid1_top(),
        ns: ns_join,
        cwd_path,
        _stacks: stacks,
        paths,
        search,
        argv,
        envp: envp_ptrs,
        _args: args,
        _env: env_owner,
        prepared: prepared.clone(),
        cwd: cwd.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
        stdio: [null.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()],
        status: status_w.as_raw_fd(),
        notify: notify.as_ref().map_or(-1, |(_, theirs)| theirs.as_raw_fd()),
        placement,
        parent: rustix::process::getpid().as_raw_nonzero().get(),
        keeper: AtomicI32::new(0),
        failed: AtomicI32::new(0),
        binds: bind_plan,
        binds_skipped: AtomicU32::new(0),
    });
    let shared = Box::into_raw(shared);

    // Every signal blocked, with the raw call: glibc's pthread_sigmask
    // silently keeps its own SIGCANCEL and SIGSETXID unblocked, and their
    // handlers must not run on the keeper's stack either (glibc's
    // posix_spawn blocks them the same way). The keeper inherits the mask.
    let old = block_all_signals();
    let pid = if share_memory() {
        // SAFETY: `keeper_main` runs on its own stack inside the block,
        // which stays allocated while it may run (see `Keeper::release`),
        // and follows the module's rules.
        unsafe {
            libc::clone(
                keeper_main,
                keeper_top as *mut libc::c_void,
                libc::CLONE_VM | libc::SIGCHLD,
                shared.cast(),
            )
        }
    } else {
        // SAFETY: a fork-like clone (no shared memory, no new stack): the
        // child returns here on its copy of this stack and becomes the
        // keeper, which never returns.
        let r =
            unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) };
        if r == 0 {
            keeper_main(shared.cast());
        }
        r as libc::pid_t
    };
    let clone_error = io::Error::last_os_error();
    restore_signals(old);
    // The keeper has its own copies of the child's ends.
    let notify = notify.map(|(ours, theirs)| {
        drop(theirs);
        ours
    });
    drop((null, out_w, err_w, status_w, cwd));
    if pid < 0 {
        // SAFETY: no keeper was started; the block is ours alone.
        drop(unsafe { Box::from_raw(shared) });
        return Err(clone_error);
    }
    // The keeper is our child and not yet reaped: its pid cannot be reused
    // before we wait for it.
    let mut keeper = Keeper {
        pid,
        pidfd: pidfd_open(pid),
        shared,
        started: false,
        status: None,
    };

    // The start report (raw reads: the keeper may write `errno`). On the
    // floor the shell can stop its keeper before the keeper reports
    // (`kill -STOP $PPID` right away), and while this waits nothing
    // watches the command (no abort, no resource sample): the wait looks
    // again every [`START_STEP_MS`] and continues a stopped keeper, which
    // then reports at once; a keeper found stopped again at the next look
    // (or still at the call's deadline) was stopped on purpose, and the
    // command's tree is killed, so that nothing is left to stop the keeper
    // and the wait ends. (A slow start that is not stopped, such as a view
    // being built, is waited for as before: the run answers the timeout.)
    let mut report = [0u8; 8];
    let mut got = 0;
    let mut was_stopped = false;
    let mut held = false;
    while got < report.len() {
        if !readable(&status_r, START_STEP_MS) {
            let stopped = crate::proctree::stat_of(keeper.pid()).is_some_and(|st| st.state == b'T');
            if stopped && (was_stopped || std::time::Instant::now() >= deadline) {
                held = true;
                for p in crate::proctree::subtree(keeper.pid()) {
                    crate::proctree::signal(&p, rustix::process::Signal::KILL);
                }
            }
            was_stopped = stopped;
            keeper.resume();
            continue;
        }
        match rustix::io::read(status_r.as_fd(), &mut report[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    if got < report.len() {
        // The keeper died before the shell was started (killed from
        // outside): its block stays allocated (see the module docs).
        keeper.wait();
        return Err(io::Error::other(
            "the keeper process ended before starting the shell",
        ));
    }
    keeper.started = true;
    let tag = u32::from_ne_bytes([report[0], report[1], report[2], report[3]]);
    let errno = i32::from_ne_bytes([report[4], report[5], report[6], report[7]]);
    if tag != STARTED {
        keeper.wait();
        if tag == FAILED && errno == INTERPRETER_MISSING {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "No such file or directory: the file is there, so what is missing is \
                 the interpreter its `#!` line names, or its dynamic loader",
            ));
        }
        return Err(io::Error::from_raw_os_error(if tag == FAILED {
            errno
        } else {
            libc::EIO
        }));
    }
    // The shell sent its listener before `execve`, so it is queued now.
    let notify =
        match notify {
            Some(sock) => Some(receive_fd(&sock).ok_or_else(|| {
                io::Error::other("the shell did not hand over its seccomp listener")
            })?),
            None => None,
        };
    Ok(Spawned {
        keeper,
        stdout: out_r,
        stderr: err_r,
        status: status_r,
        notify,
        binds_skipped: errno as u32,
        held,
    })
}

/// One descriptor queued on `sock` (`SCM_RIGHTS`), without waiting.
fn receive_fd(sock: &OwnedFd) -> Option<OwnedFd> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    rustix::net::recvmsg(
        sock,
        &mut [io::IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
    )
    .ok()?;
    let mut got = None;
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = msg {
            for fd in fds {
                got.get_or_insert(fd);
            }
        }
    }
    got
}

/// Blocks every signal of the calling thread with the raw call (glibc's
/// `pthread_sigmask` silently keeps its own SIGCANCEL and SIGSETXID
/// unblocked) and returns the mask it replaced.
pub(crate) fn block_all_signals() -> u64 {
    let all: u64 = !0;
    let mut old: u64 = 0;
    // SAFETY: two live 8-byte sigsets; the kernel writes only `old`.
    let _ = unsafe {
        syscalls::syscall!(
            Sysno::rt_sigprocmask,
            libc::SIG_SETMASK,
            &all as *const u64,
            &mut old as *mut u64,
            8
        )
    };
    old
}

/// Puts back a mask [`block_all_signals`] returned.
pub(crate) fn restore_signals(old: u64) {
    // SAFETY: a live 8-byte sigset; no old mask is asked for.
    let _ = unsafe {
        syscalls::syscall!(
            Sysno::rt_sigprocmask,
            libc::SIG_SETMASK,
            &old as *const u64,
            0,
            8
        )
    };
}

/// Ends the calling process (the keeper or the shell) with `code`.
pub(crate) fn exit(code: i32) -> ! {
    // SAFETY: exit_group ends the calling process; it does not return.
    let _ = unsafe { syscalls::syscall!(Sysno::exit_group, code) };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Writes all of `bytes` to `fd`, ignoring errors (the executor may be
/// gone).
pub(crate) fn write_all(fd: RawFd, bytes: &[u8]) {
    let mut done = 0;
    while done < bytes.len() {
        let rest = &bytes[done..];
        // SAFETY: `rest` is a live buffer of `rest.len()` bytes.
        match unsafe { syscalls::syscall!(Sysno::write, fd, rest.as_ptr(), rest.len()) } {
            Ok(n) => done += n,
            Err(Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}

fn report(fd: RawFd, tag: u32, errno: i32) {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&tag.to_ne_bytes());
    bytes[4..].copy_from_slice(&errno.to_ne_bytes());
    write_all(fd, &bytes);
}

/// The keeper, from its `clone` to its end (see the module's rules).
///
/// In namespaces it joins the executor's user and network namespace and
/// starts PID 1 of a new PID and mount namespace ([`pid1_main`]), which
/// does the rest; it then only waits for PID 1 and exits with its code.
extern "C" fn keeper_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the block, alive while the keeper runs.
    let s = unsafe { &*(arg as *const Shared) };
    // The command must not outlive the executor (killed, or its thread
    // gone): in namespaces the keeper dies with it, and PID 1 and the
    // whole namespace with the keeper; on the floor the keeper is told
    // ([`ORPHANED`]) and ends the command's tree first (see `keep`).
    let death = if s.ns.is_some() {
        libc::SIGKILL
    } else {
        ORPHANED
    };
    // SAFETY: raw calls on integers.
    let orphaned = unsafe {
        syscalls::syscall!(Sysno::prctl, libc::PR_SET_PDEATHSIG, death, 0, 0, 0).is_err()
            || syscalls::syscall!(Sysno::getppid).map_or(true, |p| p as i32 != s.parent)
    };
    if orphaned {
        exit(EXIT_NOT_STARTED)
    }
    if let Some(ns) = s.ns {
        // SAFETY: this is the keeper.
        match unsafe { start_pid1(s, ns, arg) } {
            // SAFETY: as above; PID 1 has its own copies of every
            // descriptor.
            Ok(pid1) => unsafe { relay(pid1) },
            Err(e) => {
                report(s.status, FAILED, e.into_raw());
                exit(EXIT_NOT_STARTED)
            }
        }
    }
    // SAFETY: this is the keeper.
    keeper_body(s, arg, None)
}

/// Starts the shell and keeps it: the keeper's work (or PID 1's, with the
/// grace of its clean-up).
fn keeper_body(s: &Shared, arg: *mut libc::c_void, cleanup_ms: Option<u32>) -> ! {
    // SAFETY: called only by the keeper or PID 1.
    match unsafe { start_shell(s, arg) } {
        Ok(shell) => {
            report(
                s.status,
                STARTED,
                s.binds_skipped.load(Ordering::SeqCst) as i32,
            );
            // SAFETY: this is the keeper, its shell past `execve`.
            unsafe { keep(shell, s.status, cleanup_ms) }
        }
        Err(e) => {
            report(s.status, FAILED, e.into_raw());
            exit(EXIT_NOT_STARTED)
        }
    }
}

/// Joins the user and network namespace and starts PID 1 of a new PID
/// and mount namespace (by `clone`: the process that calls
/// `unshare(CLONE_NEWPID)` stays outside, and its first child would be
/// PID 1).
///
/// # Safety
///
/// Only in the keeper, with every signal blocked.
unsafe fn start_pid1(s: &Shared, ns: NsJoin, arg: *mut libc::c_void) -> Result<i32, Errno> {
    // SAFETY: raw calls on descriptors the keeper inherited; `clone` as in
    // `start_shell`.
    unsafe {
        syscalls::syscall!(Sysno::setns, ns.user, libc::CLONE_NEWUSER)?;
        syscalls::syscall!(Sysno::setns, ns.net, libc::CLONE_NEWNET)?;
        raw_clone(
            (libc::CLONE_VM
                | libc::CLONE_NEWPID
                | libc::CLONE_NEWNS
                | libc::CLONE_NEWIPC
                | libc::SIGCHLD) as usize,
            s.pid1_top,
            pid1_main,
            arg,
        )
    }
}

/// `clone(flags, stack_top)` as a raw system call: the child runs
/// `f(arg)` on the new stack and exits with its return value. Unlike
/// glibc's `clone`, it never writes `errno`, which lives in the executor
/// thread's storage that the keeper shares.
///
/// # Safety
///
/// `stack_top` is the 16-byte aligned top of a stack that stays mapped
/// while the child runs; `f` follows the module's rules.
///
/// # References
///  - [clone(2)](https://man7.org/linux/man-pages/man2/clone.2.html)
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
unsafe fn raw_clone(
    flags: usize,
    stack_top: usize,
    f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> Result<i32, Errno> {
    // SAFETY: forwarded; `clone` takes the flags and the stack top (the
    // parent and child TID pointers and the TLS are unused).
    unsafe {
        clone_call(
            libc::SYS_clone as usize,
            [flags, stack_top, 0, 0, 0],
            f,
            arg,
        )
    }
}

/// A system call of the `clone` family (`clone`, `clone3`) with up to five
/// arguments: in the child, which starts on the stack the arguments name
/// with the parent's registers but the stack pointer and the return value,
/// it calls `f(arg)` and exits with its return value (`f` never returns
/// into this frame: it ends with `exit_group`, so the exit is a backstop).
/// The parent returns from the system call as from any other.
///
/// # Safety
///
/// `args` name a stack that stays mapped while the child runs, as the
/// system call `nr` reads them; `f` follows the module's rules.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
unsafe fn clone_call(
    nr: usize,
    args: [usize; 5],
    f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> Result<i32, Errno> {
    let ret: isize;
    // SAFETY: see the function's documentation.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, 231",
            "syscall",
            "ud2",
            "2:",
            inlateout("rax") nr as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r12") f as usize,
            in("r13") arg as usize,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!(
            "svc 0",
            "cbnz x0, 2f",
            "mov x29, xzr",
            "mov x0, x21",
            "blr x20",
            "mov x8, #94",
            "svc 0",
            "brk #1",
            "2:",
            inlateout("x0") args[0] as isize => ret,
            in("x1") args[1],
            in("x2") args[2],
            in("x3") args[3],
            in("x4") args[4],
            in("x8") nr,
            in("x20") f as usize,
            in("x21") arg as usize,
            options(nostack),
        );
    }
    if (-4095..0).contains(&ret) {
        Err(Errno::new(-ret as i32))
    } else {
        Ok(ret as i32)
    }
}

/// `CLONE_INTO_CGROUP` (Linux 5.7): `clone3` places the child in the
/// cgroup v2 directory whose descriptor is `CloneArgs::cgroup`.
pub(crate) const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` of `clone3` as far as `cgroup` (its second
/// version, 88 bytes).
///
/// # References
///  - [clone3(2)](https://man7.org/linux/man-pages/man2/clone3.2.html)
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CloneArgs {
    pub flags: u64,
    pub pidfd: u64,
    pub child_tid: u64,
    pub parent_tid: u64,
    pub exit_signal: u64,
    /// The lowest address of the child's stack (`stack_size` bytes above
    /// it are the stack).
    pub stack: u64,
    pub stack_size: u64,
    pub tls: u64,
    pub set_tid: u64,
    pub set_tid_size: u64,
    pub cgroup: u64,
}

/// `clone3(args)` as a raw system call, as [`raw_clone`] does `clone`:
/// the child runs `f(arg)` on the stack `args` names and exits with its
/// return value; `errno` is never written.
///
/// # Safety
///
/// `args.stack + args.stack_size` is the 16-byte aligned top of a stack
/// that stays mapped while the child runs; `f` follows the module's rules.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) unsafe fn raw_clone3(
    args: &CloneArgs,
    f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> Result<i32, Errno> {
    let size = std::mem::size_of::<CloneArgs>();
    // SAFETY: forwarded; the kernel starts the child with the stack
    // pointer at `stack + stack_size`.
    unsafe {
        clone_call(
            libc::SYS_clone3 as usize,
            [args as *const CloneArgs as usize, size, 0, 0, 0],
            f,
            arg,
        )
    }
}

/// No raw `clone3` is written for this architecture: the cgroup v2 path
/// is not offered ([`probe_clone_into`] says so).
///
/// # Safety
///
/// Never unsafe: it does nothing.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) unsafe fn raw_clone3(
    _args: &CloneArgs,
    _f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    _arg: *mut libc::c_void,
) -> Result<i32, Errno> {
    Err(Errno::ENOSYS)
}

/// Whether the kernel places a child into the cgroup v2 directory `dir`
/// with `clone3(CLONE_INTO_CGROUP)`, as the shell will be: a child that
/// exits at once is started there (in the executor's memory, on a small
/// stack of its own, as the shell is) and reaped.
///
/// # Errors
///
/// The kernel's refusal: `ENOSYS` or `E2BIG` (no `clone3` or no
/// `CLONE_INTO_CGROUP`), `EACCES` (the cgroup is not delegated to this
/// user), `EBUSY` (the cgroup distributes controllers), ….
pub(crate) fn probe_clone_into(dir: BorrowedFd<'_>) -> Result<(), Errno> {
    extern "C" fn leave(_: *mut libc::c_void) -> libc::c_int {
        exit(0)
    }
    let mut stack = vec![0u128; 1024];
    let top = (stack.as_mut_ptr() as usize + stack.len() * 16) & !15;
    let base = stack.as_mut_ptr() as usize;
    let args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        stack: base as u64,
        stack_size: (top - base) as u64,
        cgroup: dir.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // No handler of the host's may run on the child's stack.
    let old = block_all_signals();
    // SAFETY: the child only exits; the stack outlives it (CLONE_VFORK
    // returns once it has).
    let started = unsafe { raw_clone3(&args, leave, std::ptr::null_mut()) };
    restore_signals(old);
    let pid = started?;
    let mut st: libc::c_int = 0;
    loop {
        // SAFETY: a raw wait for the child just started, into a local; a
        // host that reaps every child itself may have taken it first
        // (ECHILD).
        let waited =
            unsafe { syscalls::syscall!(Sysno::wait4, pid, &mut st as *mut libc::c_int, 0, 0) };
        if waited != Err(Errno::EINTR) {
            break;
        }
    }
    drop(stack);
    Ok(())
}

/// `clone` through glibc where no raw version is written: it writes
/// `errno` only on failure (read back at once; the executor's thread is
/// blocked in a raw read meanwhile).
///
/// # Safety
///
/// As for the raw version.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn raw_clone(
    flags: usize,
    stack_top: usize,
    f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> Result<i32, Errno> {
    // SAFETY: forwarded.
    let pid = unsafe { libc::clone(f, stack_top as *mut libc::c_void, flags as i32, arg) };
    if pid < 0 {
        // SAFETY: glibc's thread-local errno of this thread.
        return Err(Errno::new(unsafe { *libc::__errno_location() }));
    }
    Ok(pid)
}

/// The keeper once PID 1 runs: holds no descriptor, waits for PID 1 and
/// exits with its code.
///
/// # Safety
///
/// Only in the keeper.
unsafe fn relay(pid1: i32) -> ! {
    // SAFETY: raw calls on integers and locals.
    unsafe {
        close_descriptors(0, &[]);
        loop {
            let mut st: libc::c_int = 0;
            match syscalls::syscall!(Sysno::wait4, pid1, &mut st as *mut libc::c_int, 0, 0) {
                Err(Errno::EINTR) => continue,
                Ok(_) => match exit_code(st) {
                    Some(code) => exit(code & 0xff),
                    None => continue,
                },
                Err(_) => exit(EXIT_NOT_STARTED),
            }
        }
    }
}

/// PID 1 of the command's PID namespace: dies with the keeper, builds the
/// view in its fresh mount namespace, then starts and keeps the shell;
/// once the shell ends it ends everything else in the namespace.
extern "C" fn pid1_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the block, alive while PID 1 runs (the keeper waits
    // for it).
    let s = unsafe { &*(arg as *const Shared) };
    let Some(ns) = s.ns else {
        exit(EXIT_NOT_STARTED)
    };
    // SAFETY: raw calls; `enter_view` runs in this process's own mount
    // namespace.
    let set_up = unsafe {
        syscalls::syscall!(Sysno::prctl, libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0)
            .map(drop)
            .and_then(|()| match s.prepared.view() {
                Some(view) => ns::enter_view(view),
                None => Err(Errno::EINVAL),
            })
            .and_then(|()| match &s.binds {
                Some(plan) => binds::apply(plan).map(|skipped| {
                    s.binds_skipped.store(skipped, Ordering::SeqCst);
                }),
                None => Ok(()),
            })
    };
    if let Err(e) = set_up {
        report(s.status, FAILED, e.into_raw());
        exit(EXIT_NOT_STARTED)
    }
    keeper_body(s, arg, Some(ns.grace_ms))
}

/// Makes the keeper a subreaper and starts the shell; returns its pid once
/// it is past `execve`, or why it could not be started (after reaping it).
///
/// # Safety
///
/// Only in the keeper, with every signal blocked.
unsafe fn start_shell(s: &Shared, arg: *mut libc::c_void) -> Result<i32, Errno> {
    // SAFETY: every call below is a raw system call on integers, on the
    // block, or on locals.
    unsafe {
        syscalls::syscall!(Sysno::prctl, libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)?;
        let me = syscalls::syscall!(Sysno::getpid)? as i32;
        s.keeper.store(me, Ordering::SeqCst);

        // The host's handlers are functions in the shared memory: reset
        // them (in this process only) so the shell can unblock signals
        // before `execve` without running one. SIGPIPE goes back to the
        // default too, as `std` does for its children.
        for sig in 1..=64usize {
            if sig == libc::SIGKILL as usize || sig == libc::SIGSTOP as usize {
                continue;
            }
            let mut old: linux_raw_sys::general::kernel_sigaction = std::mem::zeroed();
            let got = syscalls::syscall!(
                Sysno::rt_sigaction,
                sig,
                0,
                &mut old as *mut linux_raw_sys::general::kernel_sigaction,
                8
            );
            if got.is_err() {
                continue;
            }
            let handler = old.sa_handler_kernel.map_or(0, |f| f as usize);
            if handler > 1 || (handler == 1 && sig == libc::SIGPIPE as usize) {
                let dfl: linux_raw_sys::general::kernel_sigaction = std::mem::zeroed();
                syscalls::syscall!(
                    Sysno::rt_sigaction,
                    sig,
                    &dfl as *const linux_raw_sys::general::kernel_sigaction,
                    0,
                    8
                )?;
            }
        }

        for (target, &fd) in s.stdio.iter().enumerate() {
            syscalls::syscall!(Sysno::dup3, fd, target, 0)?;
        }
        // Where a cgroup v2 cgroup holds the limits, the shell is born in
        // it (`CLONE_INTO_CGROUP`): nothing of it ever runs outside.
        let shell = match s.placement.cgroup() {
            Some(cgroup) => raw_clone3(
                &CloneArgs {
                    flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP,
                    exit_signal: libc::SIGCHLD as u64,
                    stack: (s.shell_top - SHELL_STACK) as u64,
                    stack_size: SHELL_STACK as u64,
                    cgroup: cgroup as u64,
                    ..CloneArgs::default()
                },
                shell_main,
                arg,
            )?,
            None => raw_clone(
                (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as usize,
                s.shell_top,
                shell_main,
                arg,
            )?,
        };
        let failed = s.failed.load(Ordering::SeqCst);
        if failed != 0 {
            let mut st: libc::c_int = 0;
            while let Err(Errno::EINTR) =
                syscalls::syscall!(Sysno::wait4, shell, &mut st as *mut libc::c_int, 0, 0)
            {
            }
            return Err(Errno::new(failed));
        }
        Ok(shell)
    }
}

/// The keeper once the shell runs: holds nothing but the status pipe,
/// reports the shell's exit code, reaps every descendant, exits with the
/// shell's code.
///
/// As PID 1 (`cleanup_ms` set), once the shell has ended it sends SIGTERM
/// (and SIGCONT) to every other process of the namespace, SIGKILL to those
/// left after `cleanup_ms`, and exits when none is left.
///
/// As the floor's keeper (`cleanup_ms` unset), it also waits for
/// [`ORPHANED`], its parent-death signal: the executor is gone, and
/// nothing will end the command's tree on timeout, so it kills the tree
/// itself ([`end_children`]) and exits. And for [`SWEEP`], the executor's
/// word that the tree is being ended: from then on it sends SIGKILL to
/// every child it has at each turn (what the executor's scan of `/proc`
/// cannot see, such as a process that forks and exits at once and so
/// lives under a new pid at every scan, is re-parented to it), still
/// reporting the shell's code, and exits once it has no child left.
///
/// # Safety
///
/// Only in the keeper or PID 1.
unsafe fn keep(shell: i32, status: RawFd, cleanup_ms: Option<u32>) -> ! {
    // SAFETY: every call below is a raw system call on integers or locals.
    unsafe {
        let fd = if status == 3 {
            3
        } else {
            match syscalls::syscall!(Sysno::dup3, status, 3, 0) {
                Ok(_) => 3,
                Err(_) => -1,
            }
        };
        if syscalls::syscall!(Sysno::close_range, 4, u32::MAX, 0).is_err() {
            for other in 4..65536 {
                let _ = syscalls::syscall!(Sysno::close, other);
            }
        }
        for std_fd in 0..3 {
            let _ = syscalls::syscall!(Sysno::close, std_fd);
        }
        let mut code = EXIT_NOT_STARTED;
        let mut reported = fd < 0;
        let mut sweeping = false;
        // The floor's keeper waits for its children and for the executor's
        // death together (PID 1 dies with its keeper instead), through a
        // signalfd: the signals stay blocked all along.
        let watch = if cleanup_ms.is_none() {
            signal_fd()
        } else {
            -1
        };
        loop {
            if sweeping && !kill_children() {
                // No list of children to read: the executor's scans go on.
                sweeping = false;
            }
            let mut st: libc::c_int = 0;
            let r = match syscalls::syscall!(
                Sysno::wait4,
                -1isize,
                &mut st as *mut libc::c_int,
                if watch >= 0 { libc::WNOHANG } else { 0 },
                0
            ) {
                Ok(0) if sweeping => {
                    pause_1ms();
                    continue;
                }
                Ok(0) => {
                    match next_signal(watch) {
                        ORPHANED => {
                            end_children();
                            break;
                        }
                        SWEEP => sweeping = true,
                        _ => {}
                    }
                    continue;
                }
                Ok(pid) => pid as i32,
                Err(Errno::EINTR) => continue,
                Err(_) => break,
            };
            if r != shell {
                continue;
            }
            let Some(exited) = exit_code(st) else {
                continue;
            };
            code = exited;
            if !reported {
                write_all(fd, &code.to_ne_bytes());
                let _ = syscalls::syscall!(Sysno::close, fd);
                reported = true;
            }
            if let Some(grace_ms) = cleanup_ms {
                end_namespace(grace_ms);
            }
        }
        exit(code & 0xff)
    }
}

/// How often the wait for the start report looks again (see [`spawn`]).
const START_STEP_MS: i32 = 10;

/// The floor keeper's parent-death signal (`SIGRTMAX`: sent by nothing
/// else, and queued, so never lost).
const ORPHANED: i32 = 64;

/// The executor's word to the floor keeper that the command's tree is
/// being ended (`SIGRTMAX - 1`, sent by nothing else): see `keep`.
pub(crate) const SWEEP: i32 = 63;

/// A signalfd for `SIGCHLD`, [`ORPHANED`] and [`SWEEP`] (which stay
/// blocked), or -1.
fn signal_fd() -> RawFd {
    let set: u64 = (1 << (libc::SIGCHLD - 1)) | (1 << (ORPHANED - 1)) | (1 << (SWEEP - 1));
    // SAFETY: a raw call on a local.
    unsafe {
        syscalls::syscall!(
            Sysno::signalfd4,
            -1isize,
            &set as *const u64,
            8,
            libc::SFD_CLOEXEC
        )
    }
    .map_or(-1, |fd| fd as RawFd)
}

/// Waits on the signalfd `fd` for `SIGCHLD`, [`ORPHANED`] or [`SWEEP`], at most a
/// second (a host that ignores `SIGCHLD` leaves the keeper's children none
/// to send); answers the signal taken, or 0.
fn next_signal(fd: RawFd) -> i32 {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let limit = libc::timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    // `struct signalfd_siginfo`: 128 bytes, the signal number first.
    let mut info = [0u32; 32];
    // SAFETY: raw calls on locals; a NULL mask leaves the blocked set
    // alone.
    unsafe {
        match syscalls::syscall!(
            Sysno::ppoll,
            &mut poll as *mut libc::pollfd,
            1,
            &limit as *const libc::timespec,
            0,
            8
        ) {
            Ok(n) if n > 0 => {}
            _ => return 0,
        }
        match syscalls::syscall!(Sysno::read, fd, info.as_mut_ptr(), 128) {
            Ok(128) => info[0] as i32,
            _ => 0,
        }
    }
}

/// The floor keeper, its executor gone: ends the command's whole tree,
/// all of which is beneath the keeper (a subreaper). SIGKILL to each
/// child (read from `/proc/thread-self/children`), reaping, and again for
/// what was re-parented to it, until it has no child left. Without that
/// file it gives up (the shell still dies with the keeper).
fn end_children() {
    loop {
        if !kill_children() {
            return;
        }
        loop {
            let mut st: libc::c_int = 0;
            // SAFETY: raw calls on integers and locals.
            match unsafe {
                syscalls::syscall!(
                    Sysno::wait4,
                    -1isize,
                    &mut st as *mut libc::c_int,
                    libc::WNOHANG,
                    0
                )
            } {
                Ok(0) => break,
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(_) => return,
            }
        }
        pause_1ms();
    }
}

/// Sleeps a millisecond (a raw call: the keeper runs no library code).
fn pause_1ms() {
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    // SAFETY: a raw call on a local.
    let _ = unsafe {
        syscalls::syscall!(
            Sysno::clock_nanosleep,
            libc::CLOCK_MONOTONIC,
            0,
            &pause as *const libc::timespec,
            0
        )
    };
}

/// SIGKILL to every child of this process (they are not reaped yet, so
/// their pids are theirs). False when the list cannot be read.
fn kill_children() -> bool {
    // SAFETY: raw calls on a NUL-terminated literal, integers and a local
    // buffer.
    unsafe {
        let Ok(fd) = syscalls::syscall!(
            Sysno::openat,
            libc::AT_FDCWD,
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
            0
        ) else {
            return false;
        };
        let mut buf = [0u8; 1024];
        let mut pid: i32 = 0;
        let mut digits = false;
        loop {
            let n = match syscalls::syscall!(Sysno::read, fd, buf.as_mut_ptr(), buf.len()) {
                Ok(0) => break,
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(_) => break,
            };
            for &b in buf.iter().take(n) {
                if b.is_ascii_digit() {
                    pid = pid.saturating_mul(10).saturating_add(i32::from(b - b'0'));
                    digits = true;
                } else {
                    if digits && pid > 0 {
                        let _ = syscalls::syscall!(Sysno::kill, pid, libc::SIGKILL);
                    }
                    pid = 0;
                    digits = false;
                }
            }
        }
        if digits && pid > 0 {
            let _ = syscalls::syscall!(Sysno::kill, pid, libc::SIGKILL);
        }
        let _ = syscalls::syscall!(Sysno::close, fd);
    }
    true
}

/// PID 1 ends every other process of its namespace: SIGTERM and SIGCONT,
/// then SIGKILL to what is left after `grace_ms`, reaping as they go.
/// Returns once it has no child left.
fn end_namespace(grace_ms: u32) {
    // SAFETY: raw calls on integers and locals; `kill(-1)` from PID 1
    // reaches every process of its namespace but itself.
    unsafe {
        let _ = syscalls::syscall!(Sysno::kill, -1isize, libc::SIGTERM);
        let _ = syscalls::syscall!(Sysno::kill, -1isize, libc::SIGCONT);
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        let mut waited = 0u32;
        loop {
            let mut st: libc::c_int = 0;
            match syscalls::syscall!(
                Sysno::wait4,
                -1isize,
                &mut st as *mut libc::c_int,
                libc::WNOHANG,
                0
            ) {
                Ok(0) => {}
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(_) => return,
            }
            if waited >= grace_ms {
                break;
            }
            let _ = syscalls::syscall!(
                Sysno::clock_nanosleep,
                libc::CLOCK_MONOTONIC,
                0,
                &pause as *const libc::timespec,
                0
            );
            waited += 1;
        }
        let _ = syscalls::syscall!(Sysno::kill, -1isize, libc::SIGKILL);
    }
}

/// The shell, from its `clone` to its `execve` (see the module's rules).
/// Never returns.
extern "C" fn shell_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the block; the keeper waits (CLONE_VFORK) until this
    // process has called `execve` or exited.
    let s = unsafe { &*(arg as *const Shared) };
    // SAFETY: this is the shell before `execve`.
    let e = match unsafe { prepare_shell(s) } {
        // SAFETY: as above.
        Ok(()) => unsafe { exec_shell(s) },
        Err(e) => e,
    };
    s.failed.store(e.into_raw().max(1), Ordering::SeqCst);
    exit(EXIT_NOT_STARTED)
}

/// The shell between `clone` and `execve`: ordinary scheduling
/// ([`ordinary_scheduling`]), its own session, the caller's directory, the
/// confinement, inherited descriptors closed on exec, and signals
/// unblocked.
///
/// # Safety
///
/// Only in the shell before `execve`.
unsafe fn prepare_shell(s: &Shared) -> Result<(), Errno> {
    // SAFETY: every call below is a raw system call on integers or on the
    // block; `apply_raw` is errno-free and allocates nothing.
    unsafe {
        syscalls::syscall!(Sysno::prctl, libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0)?;
        // The keeper may already be gone (then the death signal never
        // comes).
        if syscalls::syscall!(Sysno::getppid)? as i32 != s.keeper.load(Ordering::SeqCst) {
            return Err(Errno::ESRCH);
        }
        // Into the exec's cgroups (the keeper stays out), before anything
        // of the command runs.
        s.placement.enter()?;
        ordinary_scheduling()?;
        syscalls::syscall!(Sysno::setsid)?;
        let listen = match s.ns {
            Some(ns) => {
                enter_cwd(s)?;
                ns::drop_caps(ns.root, ns.last_cap)?;
                Listen::OwnNetwork
            }
            None => {
                if s.cwd >= 0 {
                    syscalls::syscall!(Sysno::fchdir, s.cwd)?;
                }
                if s.notify >= 0 {
                    Listen::Supervised
                } else {
                    Listen::Refused
                }
            }
        };
        if let Some(listener) = s.prepared.apply_raw(listen, s.ns.is_some())? {
            let sent = send_fd(s.notify, listener);
            let _ = syscalls::syscall!(Sysno::close, listener);
            sent?;
        }
        close_inherited();
        let empty: u64 = 0;
        syscalls::syscall!(
            Sysno::rt_sigprocmask,
            libc::SIG_SETMASK,
            &empty as *const u64,
            0,
            8
        )?;
    }
    Ok(())
}

/// Descriptors the embedding program left inheritable never reach the
/// command: every descriptor from 3 on is marked close-on-exec
/// (`CLOSE_RANGE_CLOEXEC`, Linux 5.11), else closed now
/// ([`close_descriptors`]: nothing the shell does from here to `execve`
/// uses one). Before, a failed `close_range` (an older kernel, or a
/// container runtime's seccomp profile older than the call) was ignored
/// and a host file the command could not open was read through `<&7`.
///
/// # Safety
///
/// Only in the shell before `execve`.
unsafe fn close_inherited() {
    // SAFETY: raw calls on integers.
    unsafe {
        if syscalls::syscall!(Sysno::close_range, 3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC).is_err() {
            close_descriptors(3, &[]);
        }
    }
}

/// Closes every descriptor from `from` on but those in `keep`:
/// `close_range` (Linux 5.9), else, where it is refused (an older kernel,
/// or a container runtime's seccomp profile older than the call), those
/// `/proc/self/fd` lists, one by one, and without `/proc` every number
/// below the descriptor limit. Raw system calls only, no allocation.
///
/// # Safety
///
/// Only in a child of the executor that holds none of its descriptors
/// but `keep` from then on.
pub(crate) unsafe fn close_descriptors(from: u32, keep: &[i32]) {
    let kept = |fd: usize| keep.iter().any(|&k| k >= 0 && k as usize == fd);
    // SAFETY: raw calls on integers, a literal path and a local buffer.
    unsafe {
        let mut lo = from;
        let mut ranges_closed = true;
        loop {
            // The next kept descriptor at or above `lo`.
            let next = keep
                .iter()
                .filter(|&&k| k >= 0 && k as u32 >= lo)
                .map(|&k| k as u32)
                .min();
            let hi = next.map_or(u32::MAX, |k| k.saturating_sub(1));
            if next != Some(lo) && syscalls::syscall!(Sysno::close_range, lo, hi, 0).is_err() {
                ranges_closed = false;
                break;
            }
            match next {
                Some(k) if k < u32::MAX => lo = k + 1,
                _ => break,
            }
        }
        if ranges_closed {
            return;
        }
        let listed = syscalls::syscall!(
            Sysno::openat,
            libc::AT_FDCWD,
            c"/proc/self/fd".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0
        );
        if let Ok(dir) = listed {
            let mut buf = [0u8; 2048];
            let mut whole = false;
            // `linux_dirent64`: inode (8 bytes), offset (8), record length
            // (2), type (1), then the NUL-terminated name. The listing
            // goes by descriptor number, so closing what was listed
            // loses nothing of what follows.
            while let Ok(n) =
                syscalls::syscall!(Sysno::getdents64, dir, buf.as_mut_ptr(), buf.len())
            {
                if n == 0 {
                    whole = true;
                    break;
                }
                let mut at = 0;
                while at + 19 < n {
                    let len = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
                    if len == 0 || at + len > n {
                        break;
                    }
                    let mut fd: usize = 0;
                    let mut digits = 0;
                    for &b in &buf[at + 19..at + len] {
                        if b == 0 {
                            break;
                        }
                        if !b.is_ascii_digit() || digits > 10 {
                            digits = 0;
                            break;
                        }
                        fd = fd * 10 + usize::from(b - b'0');
                        digits += 1;
                    }
                    if digits > 0 && fd >= from as usize && fd != dir && !kept(fd) {
                        let _ = syscalls::syscall!(Sysno::close, fd);
                    }
                    at += len;
                }
            }
            let _ = syscalls::syscall!(Sysno::close, dir);
            if whole {
                return;
            }
        }
        // `struct rlimit64`: the soft limit, then the hard one.
        let mut limit = [0u64; 2];
        let below = match syscalls::syscall!(
            Sysno::prlimit64,
            0,
            libc::RLIMIT_NOFILE,
            0,
            limit.as_mut_ptr()
        ) {
            Ok(_) => limit[0].clamp(65_536, 1 << 20) as usize,
            Err(_) => 65_536,
        };
        for fd in from as usize..below {
            if !kept(fd) {
                let _ = syscalls::syscall!(Sysno::close, fd);
            }
        }
    }
}

/// Takes back what the calling thread's scheduling would hand the
/// command: a real-time policy (`SCHED_FIFO`, `SCHED_RR`) becomes
/// `SCHED_OTHER`, a raised priority (a negative nice value) nice 0, and
/// the real-time I/O class the best-effort one. Each is a step down, which
/// needs no privilege; the command's zero `RLIMIT_RTPRIO` and
/// `RLIMIT_NICE` (and, run as root, the capabilities it loses) keep it
/// from stepping back up. A lower priority than the default (a positive
/// nice value, `SCHED_BATCH`, `SCHED_IDLE`, the idle I/O class) is kept.
///
/// # Safety
///
/// Only in the shell before `execve`.
unsafe fn ordinary_scheduling() -> Result<(), Errno> {
    const SCHED_RESET_ON_FORK: usize = 0x4000_0000;
    const PRIO_PROCESS: usize = 0;
    const IOPRIO_WHO_PROCESS: usize = 1;
    const IOPRIO_CLASS_SHIFT: usize = 13;
    const IOPRIO_CLASS_RT: usize = 1;
    /// Best effort, at its default level (4).
    const IOPRIO_BEST_EFFORT: usize = (2 << IOPRIO_CLASS_SHIFT) | 4;
    // SAFETY: raw calls on integers and on a live local `sched_param`.
    unsafe {
        // A call the host's own sandbox refuses tells nothing to take
        // back; a step down it refuses fails the start.
        let policy = syscalls::syscall!(Sysno::sched_getscheduler, 0)
            .map_or(libc::SCHED_OTHER as usize, |p| p & !SCHED_RESET_ON_FORK);
        if policy == libc::SCHED_FIFO as usize || policy == libc::SCHED_RR as usize {
            let param = libc::sched_param { sched_priority: 0 };
            syscalls::syscall!(
                Sysno::sched_setscheduler,
                0,
                libc::SCHED_OTHER,
                &param as *const libc::sched_param
            )?;
        }
        // The system call answers 20 - nice (1 to 40).
        if syscalls::syscall!(Sysno::getpriority, PRIO_PROCESS, 0).is_ok_and(|p| p > 20) {
            syscalls::syscall!(Sysno::setpriority, PRIO_PROCESS, 0, 0)?;
        }
        let ioprio = syscalls::syscall!(Sysno::ioprio_get, IOPRIO_WHO_PROCESS, 0).unwrap_or(0);
        if ioprio >> IOPRIO_CLASS_SHIFT == IOPRIO_CLASS_RT {
            syscalls::syscall!(Sysno::ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_BEST_EFFORT)?;
        }
    }
    Ok(())
}

/// In the view: changes to the working directory by its path and checks
/// that it is the directory the caller's descriptor names (same device and
/// inode); without a descriptor, a path that is not in the view leaves the
/// shell at `/`.
///
/// # Safety
///
/// Only in the shell before `execve`.
unsafe fn enter_cwd(s: &Shared) -> Result<(), Errno> {
    let Some(path) = &s.cwd_path else {
        return Ok(());
    };
    // SAFETY: raw calls on a NUL-terminated path, descriptors and locals.
    unsafe {
        let moved = syscalls::syscall!(Sysno::chdir, path.as_ptr());
        if s.cwd < 0 {
            return Ok(());
        }
        moved?;
        let mut want: libc::stat = std::mem::zeroed();
        let mut got: libc::stat = std::mem::zeroed();
        syscalls::syscall!(Sysno::fstat, s.cwd, &mut want as *mut libc::stat)?;
        let here = syscalls::syscall!(
            Sysno::openat,
            libc::AT_FDCWD,
            c".".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0
        )?;
        let r = syscalls::syscall!(Sysno::fstat, here, &mut got as *mut libc::stat);
        let _ = syscalls::syscall!(Sysno::close, here);
        r?;
        if want.st_dev != got.st_dev || want.st_ino != got.st_ino {
            return Err(Errno::ENOENT);
        }
    }
    Ok(())
}

/// Sends `fd` over the UNIX socket `sock` (`SCM_RIGHTS`, one data byte)
/// with a raw `sendmsg` on stack memory.
///
/// # Safety
///
/// Only in the shell before `execve` (or any process, but it allocates
/// nothing and leaves `errno` alone for that).
unsafe fn send_fd(sock: RawFd, fd: RawFd) -> Result<(), Errno> {
    /// A control message with one descriptor, padded to `CMSG_SPACE`.
    #[repr(C)]
    struct OneFd {
        hdr: libc::cmsghdr,
        fd: RawFd,
        pad: u32,
    }
    let byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_ptr() as *mut libc::c_void,
        iov_len: 1,
    };
    // SAFETY: both are plain C structs for which all-zero is valid.
    let (mut control, mut msg): (OneFd, libc::msghdr) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    control.hdr.cmsg_len = std::mem::size_of::<libc::cmsghdr>() + std::mem::size_of::<RawFd>();
    control.hdr.cmsg_level = libc::SOL_SOCKET;
    control.hdr.cmsg_type = libc::SCM_RIGHTS;
    control.fd = fd;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&mut control as *mut OneFd).cast();
    msg.msg_controllen = std::mem::size_of::<OneFd>();
    // SAFETY: `msg` points at live locals for the duration of the call.
    unsafe {
        syscalls::syscall!(
            Sysno::sendmsg,
            sock,
            &msg as *const libc::msghdr,
            libc::MSG_NOSIGNAL
        )
    }
    .map(drop)
}

/// `execve`s the shell, searching as `execvp` does; returns why it failed
/// ([`INTERPRETER_MISSING`] for an `ENOENT` on a file that is there).
///
/// # Safety
///
/// Only in the shell before `execve`.
unsafe fn exec_shell(s: &Shared) -> Errno {
    let mut denied = false;
    let mut interpreter = false;
    for path in &s.paths {
        // SAFETY: NUL-terminated path, NULL-terminated argv and envp of
        // NUL-terminated strings the block owns.
        let r = unsafe {
            syscalls::syscall!(
                Sysno::execve,
                path.as_ptr(),
                s.argv.as_ptr(),
                s.envp.as_ptr()
            )
        };
        // `ENOENT` for a file that is there: its interpreter or loader is
        // what is missing.
        let there = || {
            // SAFETY: a NUL-terminated path the block owns.
            unsafe {
                syscalls::syscall!(Sysno::faccessat, libc::AT_FDCWD, path.as_ptr(), libc::F_OK)
            }
            .is_ok()
        };
        if r == Err(Errno::ENOENT) && there() {
            if !s.search {
                return Errno::new(INTERPRETER_MISSING);
            }
            interpreter = true;
        }
        match r {
            Err(e) if s.search && e == Errno::EACCES => denied = true,
            Err(e)
                if s.search
                    && [
                        Errno::ENOENT,
                        Errno::ENOTDIR,
                        Errno::ESTALE,
                        Errno::ENODEV,
                        Errno::ETIMEDOUT,
                    ]
                    .contains(&e) => {}
            Err(e) => return e,
            Ok(_) => return Errno::EINVAL,
        }
    }
    if denied {
        Errno::EACCES
    } else if interpreter {
        Errno::new(INTERPRETER_MISSING)
    } else {
        Errno::ENOENT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recurses `depth` frames of about 1 KiB each, touching every frame.
    #[inline(never)]
    fn deep(depth: usize) -> u8 {
        let frame = std::hint::black_box([depth as u8; 1024]);
        if depth == 0 {
            return frame[0];
        }
        deep(depth - 1).wrapping_add(std::hint::black_box(frame[512]))
    }

    extern "C" fn overflow(_: *mut libc::c_void) -> libc::c_int {
        // Past the keeper's stack by 16 KiB: into the guard page below it.
        let r = deep(KEEPER_STACK / 1024 + 16);
        exit(i32::from(r) & 1)
    }

    #[test]
    fn a_keeper_stack_overflow_hits_the_guard_page() {
        let stacks = Stacks::map().unwrap();
        // The page below each stack is mapped, but with no access.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let base = stacks.base as usize;
        for guard in [base, base + GUARD + KEEPER_STACK] {
            let line = maps
                .lines()
                .find(|l| {
                    let range = l.split(' ').next().unwrap();
                    let (lo, hi) = range.split_once('-').unwrap();
                    let (lo, hi) = (
                        usize::from_str_radix(lo, 16).unwrap(),
                        usize::from_str_radix(hi, 16).unwrap(),
                    );
                    lo <= guard && guard < hi
                })
                .expect("the guard page is mapped");
            assert!(line.split(' ').nth(1).unwrap().starts_with("---"), "{line}");
        }
        // A keeper (sharing this process's memory) that overflows its stack
        // dies of SIGSEGV at the guard page, writing nothing below it.
        // SAFETY: `overflow` runs on the mapped stack, which outlives it
        // (waited for below), and makes only raw system calls besides the
        // recursion.
        let pid = unsafe {
            libc::clone(
                overflow,
                stacks.keeper_top() as *mut libc::c_void,
                libc::CLONE_VM | libc::SIGCHLD,
                std::ptr::null_mut(),
            )
        };
        assert!(pid > 0);
        let (_, st) = rustix::process::waitpid(Pid::from_raw(pid), WaitOptions::empty())
            .unwrap()
            .unwrap();
        assert_eq!(exit_code(st.as_raw()), Some(128 + libc::SIGSEGV));
    }

    extern "C" fn mark(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: the test passes a live `AtomicI32`.
        let cell = unsafe { &*(arg as *const AtomicI32) };
        cell.store(42, Ordering::SeqCst);
        7
    }

    fn small_stack() -> (Vec<u128>, usize) {
        let mut stack = vec![0u128; 8 * 1024];
        // One past the end, 16-byte aligned (u128 elements).
        let top = stack.as_mut_ptr_range().end as usize;
        (stack, top)
    }

    #[test]
    fn the_raw_clone_runs_the_child_on_its_stack_in_shared_memory() {
        let (_stack, top) = small_stack();
        let cell = AtomicI32::new(0);
        // SAFETY: the child uses only its stack and the atomic; VFORK keeps
        // this thread suspended until the child has exited.
        let pid = unsafe {
            raw_clone(
                (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as usize,
                top,
                mark,
                &cell as *const AtomicI32 as *mut libc::c_void,
            )
        }
        .expect("clone");
        assert_eq!(cell.load(Ordering::SeqCst), 42, "the child shares memory");
        let (_, st) = rustix::process::waitpid(Pid::from_raw(pid), WaitOptions::empty())
            .unwrap()
            .unwrap();
        assert_eq!(exit_code(st.as_raw()), Some(7));
    }

    #[test]
    fn a_refused_raw_clone_answers_its_error_number_and_leaves_errno_alone() {
        let (_stack, top) = small_stack();
        // SAFETY: this thread's own errno.
        unsafe { *libc::__errno_location() = 12345 };
        // CLONE_SIGHAND without CLONE_VM is invalid: EINVAL, and no child.
        // SAFETY: the call fails before any child exists.
        let got = unsafe {
            raw_clone(
                (libc::CLONE_SIGHAND | libc::SIGCHLD) as usize,
                top,
                mark,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(got.unwrap_err(), Errno::new(libc::EINVAL));
        // SAFETY: this thread's own errno.
        assert_eq!(unsafe { *libc::__errno_location() }, 12345);
    }
}
