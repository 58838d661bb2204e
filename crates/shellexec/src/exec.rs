//! The shell executor (docs/reference/executor.md): `shell -c command`, confined, with a
//! filtered environment, capped and redacted output, timeouts, abort, and
//! the guarantee that nothing the command started outlives the call.
//!
//! # Process layout
//!
//! Each exec starts a *keeper* process with `clone(CLONE_VM)` (it runs in
//! the executor's memory, on its own stack, so nothing is copied; see
//! `spawn.rs` for the rules that makes it follow), which makes itself a
//! child subreaper (`PR_SET_CHILD_SUBREAPER`) and starts the shell with
//! `clone(CLONE_VM | CLONE_VFORK)`, as `posix_spawn` does. The shell starts
//! a new session (`setsid`), changes to the caller's directory, is confined
//! ([`crate::confine::Prepared::apply_in_child`]), unblocks signals, and
//! execs from an argv and envp made before the keeper was started. The
//! keeper reports on a status pipe that the shell started (or why it
//! could not), closes every other descriptor, reports the shell's exit
//! status as soon as the shell ends, and then reaps every process that
//! re-parents to it until none is left. The executor learns of the
//! keeper's exit from a pidfd. The keeper has a parent-death signal: if
//! the executor dies (or the thread that called `exec` ends) first, it
//! kills everything beneath it and exits.
//!
//! # In namespaces
//!
//! Where the host allows it (a probe at [`ShellExecutor::start`] really
//! does it, once per executor) and the mode is not `Off`, the keeper
//! first joins the executor's user and network namespace (loopback only)
//! and starts, by `clone`, a second keeper that is PID 1 of a fresh PID
//! and mount namespace. PID 1 builds the allowlist view (a tmpfs root with
//! the system directories read-only, the roots at their own paths, a
//! minimal `/dev`, its own `/proc`, private tmpfs for `/tmp`, `/var/tmp`,
//! `/run`, `/dev/shm`) and starts the shell as above; the shell is never
//! PID 1. Once the shell has exited, PID 1 ends every other process of the
//! namespace (SIGTERM, the grace period, SIGKILL) and exits; its death
//! ends whatever is left. A spec that grants network access runs on the
//! floor unless [`ConfineSpec::network_in_namespace`] says the embedder
//! serves those grants through a proxy inside the namespace: it then asks
//! for listeners there ([`LocalShellExecutor::listen_in_namespace`]) and
//! adds the proxy variables ([`LocalShellExecutor::set_child_env`]). The
//! result's `confined` report says which applied (`namespaces`, `view`,
//! `missing`).
//!
//! The child environment ([`EnvPlan`]), its digest and its redactor are
//! planned once and reused while the host environment (read at every
//! exec) and the temporary directory stay the same.
//!
//! Because the keeper is a subreaper, whatever the command starts —
//! backgrounded, `setsid`, `setpgid`, double-forked — stays in the
//! keeper's subtree of the parent/child graph. The executor walks that
//! subtree in `/proc` and signals each process (SIGTERM, then SIGKILL after
//! the grace period, repeated until the subtree is empty): on timeout, on
//! abort, and after the shell exits by itself while something it started
//! is still running. No privilege is needed.
//!
//! # Resource limits
//!
//! [`ExecConfig::limits`] bounds memory, tasks and CPU time of each
//! command's tree ([`crate::limits`]): the shell enters a cgroup of its own
//! before `execve` where the executor holds cgroups, and the run loop
//! samples the tree otherwise, ending it past a limit. The result's
//! [`ExecResult::limit`] names the limit that ended the command.
//!
//! # Exit codes
//!
//! The shell's own status (a signal `n` gives `128 + n`); 124 on timeout;
//! 130 on abort; 127 when the shell could not be started.
//!
//! # Limits
//!
//! - The command runs as the executor's user. Unless Landlock signal
//!   scoping is in force (ABI 6 and a mode other than `Off`; the report's
//!   `scoped`), it may SIGKILL its keeper (`kill -9 $PPID`): the shell then
//!   dies too (`PR_SET_PDEATHSIG`), but what it started in the background
//!   re-parents past the keeper and is no longer found. With scoping the
//!   kill is refused. It may also stop its keeper (`kill -STOP $PPID`),
//!   which then neither reports nor reaps: the call ends at its timeout,
//!   and the executor continues the keeper (at each wait for the start
//!   report, at each scan while the tree is ended) so that it is reaped
//!   before the call returns.
//! - If the executor process itself dies abruptly (SIGKILL), the keeper's
//!   parent-death signal ends the command's tree (see the process layout
//!   above), unless the command stopped its keeper first, which only a
//!   command whose signals nothing judges can do: a stopped keeper acts on
//!   nothing, and with the executor gone nobody continues it, so the tree
//!   may run on until something sends the keeper `SIGCONT`.
//! - A descendant that hands an output pipe to an unrelated process (over a
//!   UNIX socket) can keep the pipe open: the deadline backstop then ends
//!   the call and marks it timed out.
//! - A process stuck in uninterruptible sleep cannot be killed until it
//!   wakes; the backstop returns regardless and a thread reaps the keeper
//!   later.

use std::collections::HashMap;
use std::ffi::{CString, OsString};
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sandgate_codes::ErrorCode;

use crate::capture::Capture;
use crate::confine::{self, ConfineError, ConfineMode, ConfineSpec, ConfinementReport, Prepared};
use crate::env::EnvPlan;
use crate::limits::{self, Limit, ResourceLimits};
use crate::monitor::Monitor;
use crate::ns::Namespaces;
use crate::protected::{ProtectedChange, ProtectedPaths};
use crate::redact::Redactor;
use crate::run::Run;
use crate::spawn::{self, Spawned};
use crate::sys::later;

pub use crate::sys::{EXIT_ABORTED, EXIT_NOT_STARTED, EXIT_TIMEOUT};

/// How long past `timeout + grace` a call may last, whatever the child
/// does.
pub const BACKSTOP_MARGIN: Duration = Duration::from_secs(2);

/// How the executor runs commands.
///
/// `Debug` prints the names of `host_env`, never its values.
#[derive(Clone)]
pub struct ExecConfig {
    /// The shell, run as `shell -c command`.
    pub shell: PathBuf,
    /// The timeout when an exec names none.
    pub default_timeout: Duration,
    /// The most bytes of stdout and stderr together that are kept (before
    /// redaction); the rest is read and dropped.
    pub max_output_bytes: usize,
    /// Host variables passed on top of the base allowlist
    /// ([`EnvPlan::build`]).
    pub env_inherit: Vec<String>,
    /// How much kernel confinement is demanded.
    pub confine_mode: ConfineMode,
    /// What the child may touch; the private temporary directory is added
    /// to `write_dirs` by [`ShellExecutor::start`].
    pub confine: ConfineSpec,
    /// Memory, task and CPU limits of each command's tree
    /// ([`crate::limits`]).
    pub limits: ResourceLimits,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// The host environment the child's is planned from; `None` for the
    /// executor's own ([`std::env::vars_os`]). Meant for tests and
    /// embedders that keep their environment elsewhere.
    pub host_env: Option<Vec<(OsString, OsString)>>,
    /// Run commands in namespaces of their own with the allowlist view
    /// where the host allows it (probed at [`ShellExecutor::start`]); in
    /// `Off` mode never. `false` keeps every command on the floor
    /// (Landlock and seccomp only), as on a host without namespaces.
    pub namespaces: bool,
    /// Called around every command to find and undo changes to protected
    /// paths ([`crate::protected`]); `None` protects nothing.
    pub protected: Option<Arc<dyn ProtectedPaths>>,
}

impl fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host_env: Option<Vec<_>> = self
            .host_env
            .as_ref()
            .map(|vars| vars.iter().map(|(name, _)| name).collect());
        f.debug_struct("ExecConfig")
            .field("shell", &self.shell)
            .field("default_timeout", &self.default_timeout)
            .field("max_output_bytes", &self.max_output_bytes)
            .field("env_inherit", &self.env_inherit)
            .field("confine_mode", &self.confine_mode)
            .field("confine", &self.confine)
            .field("limits", &self.limits)
            .field("grace", &self.grace)
            .field("host_env_names", &host_env)
            .field("namespaces", &self.namespaces)
            .field("protected", &self.protected.is_some())
            .finish()
    }
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            shell: PathBuf::from("/bin/sh"),
            default_timeout: Duration::from_secs(30),
            max_output_bytes: 1024 * 1024,
            env_inherit: Vec::new(),
            confine_mode: ConfineMode::BestEffort,
            confine: ConfineSpec::default(),
            limits: ResourceLimits::default(),
            grace: Duration::from_millis(500),
            host_env: None,
            namespaces: true,
            protected: None,
        }
    }
}

/// An executor failure that is not a command result (a command that fails
/// to start is a result: exit code 127).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ExecError {
    code: ErrorCode,
    message: String,
    #[source]
    source: Option<io::Error>,
}

impl ExecError {
    /// The error code (docs/reference/errors.md).
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The OS error number, where there is one.
    pub fn errno(&self) -> Option<i32> {
        self.source.as_ref().and_then(io::Error::raw_os_error)
    }

    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ExecError {
            code,
            message: message.into(),
            source: None,
        }
    }

    fn io(message: &str, source: io::Error) -> Self {
        ExecError {
            code: ErrorCode::Io,
            message: message.to_owned(),
            source: Some(source),
        }
    }
}

/// A cancellation handle: clone it, pass a clone in [`ExecOptions`], and
/// call [`AbortSignal::abort`] from anywhere. A running exec wakes at once
/// (the signal is an eventfd polled with the output pipes). Once aborted it
/// stays aborted: every exec given it afterwards ends at once.
#[derive(Clone, Debug)]
pub struct AbortSignal {
    inner: Arc<AbortInner>,
}

#[derive(Debug)]
struct AbortInner {
    aborted: AtomicBool,
    /// Readable once aborted (never read, so it stays readable).
    event: OwnedFd,
}

impl AbortSignal {
    /// A fresh, not aborted signal.
    ///
    /// # Panics
    ///
    /// When the process cannot create an eventfd (out of descriptors).
    pub fn new() -> Self {
        Self::try_new().expect("eventfd for AbortSignal")
    }

    /// A fresh, not aborted signal, or the error that stopped the process
    /// from creating its eventfd (out of descriptors).
    pub fn try_new() -> io::Result<Self> {
        use rustix::event::EventfdFlags;
        let event = rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(AbortSignal {
            inner: Arc::new(AbortInner {
                aborted: AtomicBool::new(false),
                event,
            }),
        })
    }

    /// Aborts every exec that was given this signal (or a clone of it).
    pub fn abort(&self) {
        if !self.inner.aborted.swap(true, Ordering::SeqCst) {
            let _ = rustix::io::write(&self.inner.event, &1u64.to_ne_bytes());
        }
    }

    /// Whether [`AbortSignal::abort`] was called.
    pub fn is_aborted(&self) -> bool {
        self.inner.aborted.load(Ordering::SeqCst)
    }

    /// The eventfd that becomes readable once aborted.
    pub(crate) fn event(&self) -> &OwnedFd {
        &self.inner.event
    }
}

impl Default for AbortSignal {
    fn default() -> Self {
        Self::new()
    }
}

/// The signal [`AbortSignal::on_signals`] aborts from its handler.
static ON_SIGNAL: std::sync::OnceLock<AbortSignal> = std::sync::OnceLock::new();
/// The last signal that handler caught (0: none).
static CAUGHT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The handler [`AbortSignal::on_signals`] installs: only atomics and a
/// raw `write` to the eventfd (async-signal-safe, errno untouched).
#[cfg(target_os = "linux")]
extern "C" fn abort_on_signal(sig: libc::c_int) {
    CAUGHT.store(sig, Ordering::SeqCst);
    if let Some(s) = ON_SIGNAL.get() {
        if !s.inner.aborted.swap(true, Ordering::SeqCst) {
            use std::os::fd::AsRawFd;
            let one = 1u64.to_ne_bytes();
            // SAFETY: a raw write of 8 live bytes to the eventfd, which
            // the static keeps open.
            let _ = unsafe {
                syscalls::syscall!(
                    syscalls::Sysno::write,
                    s.inner.event.as_raw_fd(),
                    one.as_ptr(),
                    one.len()
                )
            };
        }
    }
}

impl AbortSignal {
    /// Makes `signals` (SIGINT, SIGTERM, SIGHUP, …) abort this signal
    /// instead of ending the process, for a program whose job is to
    /// supervise one exec (`sandgate run`): a process that simply died
    /// would leave the command's whole tree running past its timeout,
    /// since nothing else ends it. The caller then exits as the signal
    /// said ([`AbortSignal::caught_signal`]). A signal the process
    /// inherited as ignored (`nohup`) stays ignored. Once per process: a
    /// second call is refused (`AlreadyExists`).
    #[cfg(target_os = "linux")]
    pub fn on_signals(&self, signals: &[i32]) -> io::Result<()> {
        if ON_SIGNAL.set(self.clone()).is_err() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "an abort signal already handles this process's signals",
            ));
        }
        for &sig in signals {
            // SAFETY: a zeroed sigaction filled with a handler that only
            // touches atomics and makes a raw system call.
            let installed = unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = abort_on_signal as extern "C" fn(libc::c_int) as usize;
                act.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                let done = libc::sigaction(sig, &act, &mut old);
                if done == 0 && old.sa_sigaction == libc::SIG_IGN {
                    libc::sigaction(sig, &old, std::ptr::null_mut())
                } else {
                    done
                }
            };
            if installed != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Blocks until this signal is aborted.
    pub fn wait(&self) {
        use rustix::event::{poll, PollFd, PollFlags};
        while !self.is_aborted() {
            let mut fds = [PollFd::new(&self.inner.event, PollFlags::IN)];
            let _ = poll(&mut fds, None);
        }
    }

    /// The last signal the handler of [`AbortSignal::on_signals`] caught.
    pub fn caught_signal() -> Option<i32> {
        match CAUGHT.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }
}

/// The handler [`outlive_file_size_limit`] installs: nothing, so a write
/// past the limit answers `EFBIG` instead of ending the process.
#[cfg(target_os = "linux")]
extern "C" fn ignore_file_size_signal(_: libc::c_int) {}

/// Makes a write past this process's file size limit (`RLIMIT_FSIZE`,
/// `ulimit -f`) fail with `EFBIG` instead of ending the process with
/// `SIGXFSZ`, for a server that writes files for an agent and an audit:
/// an agent's large write would otherwise end the server, and the audit
/// record with it. A handler, not `SIG_IGN`: a handler goes back to the
/// default at `execve`, so the commands the server runs still die of
/// `SIGXFSZ` at their own limit, as [`Limit::FileSize`] reports.
#[cfg(target_os = "linux")]
pub fn outlive_file_size_limit() -> io::Result<()> {
    // SAFETY: a zeroed sigaction filled with a handler that does nothing.
    let done = unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = ignore_file_size_signal as extern "C" fn(libc::c_int) as usize;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGXFSZ, &act, std::ptr::null_mut())
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Per-call options.
#[derive(Debug, Default)]
pub struct ExecOptions {
    /// The directory to run in: a descriptor (`O_PATH` is enough) the
    /// caller resolved beneath its roots; `None` keeps the executor's.
    pub cwd: Option<OwnedFd>,
    /// Overrides [`ExecConfig::default_timeout`].
    pub timeout: Option<Duration>,
    /// Ends the call early (exit code 130).
    pub abort: Option<AbortSignal>,
    /// Narrows this call to these directories (descriptors the caller
    /// opened; `O_PATH` is enough): a second Landlock layer leaves the
    /// command, of the directories its confinement grants, only what lies
    /// beneath one of them, with the rights it had there, and the system
    /// paths every command reads ([`Prepared::narrowed`]; a file among them
    /// grants that file alone). It can only take rights away. `Some(vec![])` leaves the command no granted
    /// directory. Refused (`E_CONFINE_UNAVAILABLE`, nothing runs) where no
    /// Landlock layer is enforced.
    pub within: Option<Vec<OwnedFd>>,
}

/// The outcome of one command.
#[derive(Clone, Debug)]
pub struct ExecResult {
    /// The shell's exit code (`128 + n` for signal `n`), or 124, 130, 127.
    pub exit_code: i32,
    /// Standard output, redacted.
    pub stdout: Vec<u8>,
    /// Standard error, redacted.
    pub stderr: Vec<u8>,
    /// Output was dropped past `max_output_bytes`.
    pub truncated: bool,
    /// The timeout (or the deadline backstop) ended the call.
    pub timed_out: bool,
    /// An abort ended the call.
    pub aborted: bool,
    /// The executor could not start the command (exit code 127, `stderr`
    /// says why: the shell missing or not executable, no descriptor or
    /// process left, no cgroup for its limits): nothing of it ran. A
    /// command the shell ran that exits 127 (its "not found") leaves this
    /// `false`.
    pub not_started: bool,
    /// The limit that ended the command, when it is known: a resource
    /// limit a cgroup event, the monitor or `SIGXCPU` showed reached, else
    /// the timeout, else the output cap. `None` otherwise (and after an
    /// abort); a process that failed an allocation under `RLIMIT_DATA`
    /// and exited is not attributed.
    pub limit: Option<Limit>,
    /// [`EnvPlan::names_digest`] of the child's environment.
    pub env_names_digest: String,
    /// The confinement in force.
    pub confined: ConfinementReport,
    /// Wall-clock time of the call.
    pub duration: Duration,
    /// Changes the command made to protected paths, each undone or
    /// reported ([`ExecConfig::protected`]); empty when nothing is
    /// protected or nothing protected changed.
    pub protected_changes: Vec<ProtectedChange>,
}

/// Runs shell commands for an agent (docs/reference/executor.md).
pub trait ShellExecutor: Send + Sync {
    /// Prepares the session: a private temporary directory (the child's
    /// `TMPDIR`, `TMP` and `TEMP`, writable under confinement) and the
    /// confinement. Starting a started executor does nothing.
    ///
    /// # Errors
    ///
    /// `E_CONFINE_UNAVAILABLE` when the mode is `Required` and the kernel
    /// lacks a part (nothing can run then); `E_NOT_FOUND` or `E_IO` for a
    /// confinement directory that cannot be opened; `E_IO` when the
    /// temporary directory cannot be made.
    fn start(&self) -> Result<(), ExecError>;

    /// Runs `command`; may be called concurrently from several threads.
    /// A command that fails, times out, is aborted or cannot start is a
    /// result (exit codes 124, 130, 127), not an error.
    ///
    /// # Errors
    ///
    /// `E_NOT_STARTED` before [`ShellExecutor::start`] or after
    /// [`ShellExecutor::dispose`]; `E_IO` when the executor cannot make a
    /// pipe or an eventfd.
    fn exec(&self, command: &str, opts: ExecOptions) -> Result<ExecResult, ExecError>;

    /// Aborts every running exec (each returns 130 once its processes are
    /// gone) and removes the temporary directory. Disposing twice, or
    /// before start, does nothing.
    ///
    /// # Errors
    ///
    /// `E_IO` when the temporary directory cannot be removed.
    fn dispose(&self) -> Result<(), ExecError>;
}

/// The local executor: see the module documentation.
///
/// `Debug` names the withheld values, never prints them.
pub struct LocalShellExecutor {
    config: ExecConfig,
    state: Mutex<State>,
    idle: Condvar,
    /// Held by a dispose from start to end: a second one at once waits
    /// for the first's cleanup (the TMPDIR's removal) rather than return
    /// before it, finding no session.
    disposal: Mutex<()>,
    /// The last child environment planned, reused while the host
    /// environment and the temporary directory are unchanged.
    child_env: Mutex<EnvCache>,
    /// Variables the embedder adds to every shell's environment
    /// ([`LocalShellExecutor::set_child_env`]).
    extra_env: Mutex<Vec<(String, String)>>,
    /// Values the embedder holds back from the child and wants redacted
    /// ([`LocalShellExecutor::set_withheld_values`]).
    extra_withheld: Mutex<Vec<(String, Vec<u8>)>>,
}

impl fmt::Debug for LocalShellExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The embedder's withheld values (the egress proxy's credentials
        // among them) by name only, as the plan's are.
        let withheld: Vec<String> = self
            .extra_withheld
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, _)| name.clone())
            .collect();
        f.debug_struct("LocalShellExecutor")
            .field("config", &self.config)
            .field("state", &self.state)
            .field("child_env", &self.child_env)
            .field("extra_env", &self.extra_env)
            .field("extra_withheld_names", &withheld)
            .finish_non_exhaustive()
    }
}

/// What each exec derives from the host environment: planning it and
/// compiling its redactor cost tens of microseconds, so it is done once and
/// reused for as long as its inputs are the same (compared at every exec).
struct ChildEnv {
    /// The host environment it was planned from; `None` when it comes from
    /// [`ExecConfig::host_env`], which never changes.
    host: Option<Vec<(OsString, OsString)>>,
    tmpdir: String,
    plan: EnvPlan,
    names_digest: String,
    /// Cloned (sharing its compiled rules) for each stream.
    redactor: Redactor,
    /// The plan's variables as `NAME=value` C strings, for `execve`.
    envp: Vec<CString>,
}

impl ChildEnv {
    /// The environment of a program run without a shell: exactly `env`;
    /// every credential-shaped host variable is withheld, so redacted.
    /// `redactor` makes the redactor of the plan's withheld values (the
    /// executor adds the embedder's), built once here.
    fn for_program(
        config: &ExecConfig,
        env: &[(OsString, OsString)],
        redactor: impl FnOnce(&EnvPlan) -> Redactor,
    ) -> Result<Self, ExecError> {
        let host: Vec<(OsString, OsString)> = match &config.host_env {
            Some(vars) => vars.clone(),
            None => std::env::vars_os().collect(),
        };
        let plan = EnvPlan::build_with_base(&[], host, &[], &[]);
        let mut envp = Vec::with_capacity(env.len());
        let mut names = Vec::with_capacity(env.len());
        for (name, value) in env {
            let (name, value) = (name.as_bytes(), value.as_bytes());
            if name.is_empty() || name.contains(&b'=') {
                return Err(ExecError::new(
                    ErrorCode::Request,
                    "an environment variable's name is empty or holds `=`",
                ));
            }
            let kv = [name, b"=", value].concat();
            envp.push(CString::new(kv).map_err(|_| {
                ExecError::new(
                    ErrorCode::Request,
                    "an environment variable holds a NUL byte",
                )
            })?);
            names.push(name);
        }
        names.sort_unstable();
        names.dedup();
        Ok(ChildEnv {
            host: None,
            tmpdir: String::new(),
            names_digest: crate::env::names_digest(names),
            redactor: redactor(&plan),
            plan,
            envp,
        })
    }
}

impl fmt::Debug for ChildEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names only, never values (the plan's Debug prints no values).
        f.debug_struct("ChildEnv")
            .field("plan", &self.plan)
            .finish()
    }
}

impl ChildEnv {
    /// The environment of a shell command. `redactor` is as for
    /// [`ChildEnv::for_program`].
    fn plan(
        config: &ExecConfig,
        host: Option<Vec<(OsString, OsString)>>,
        tmpdir: &str,
        added: &[(String, String)],
        redactor: impl FnOnce(&EnvPlan) -> Redactor,
    ) -> Self {
        let source: Vec<(OsString, OsString)> = match (&host, &config.host_env) {
            (Some(vars), _) | (None, Some(vars)) => vars.clone(),
            (None, None) => std::env::vars_os().collect(),
        };
        let mut extra: Vec<(String, String)> = ["TMPDIR", "TMP", "TEMP"]
            .iter()
            .map(|n| ((*n).to_owned(), tmpdir.to_owned()))
            .collect();
        extra.extend(added.iter().cloned());
        let plan = EnvPlan::build(source, &config.env_inherit, &extra);
        // Names and values hold no NUL (the plan drops such entries).
        let envp = plan
            .vars()
            .iter()
            .filter_map(|(name, value)| {
                let mut kv = Vec::with_capacity(name.len() + 1 + value.len());
                kv.extend_from_slice(name.as_bytes());
                kv.push(b'=');
                kv.extend_from_slice(value.as_bytes());
                CString::new(kv).ok()
            })
            .collect();
        ChildEnv {
            envp,
            host,
            tmpdir: tmpdir.to_owned(),
            names_digest: plan.names_digest(),
            redactor: redactor(&plan),
            plan,
        }
    }
}

/// The cached child environment ([`LocalShellExecutor::child_env`]).
#[derive(Debug, Default)]
struct EnvCache {
    /// Counts the changes of what the embedder adds
    /// ([`LocalShellExecutor::set_child_env`],
    /// [`LocalShellExecutor::set_withheld_values`]) and disposals: a plan
    /// begun before one is never cached.
    generation: u64,
    env: Option<Arc<ChildEnv>>,
}

#[derive(Debug, Default)]
struct State {
    session: Option<Session>,
    /// The internal abort of each running exec.
    running: HashMap<u64, AbortSignal>,
    next_id: u64,
}

#[derive(Debug)]
struct Session {
    tmpdir: PathBuf,
    tmpdir_str: String,
    prepared: Prepared,
    /// The executor's namespaces, or why there are none.
    namespaces: Result<Arc<Namespaces>, String>,
    limits: Arc<limits::Setup>,
}

impl LocalShellExecutor {
    /// An executor that is not started yet.
    pub fn new(config: ExecConfig) -> Self {
        LocalShellExecutor {
            config,
            state: Mutex::new(State::default()),
            idle: Condvar::new(),
            disposal: Mutex::new(()),
            child_env: Mutex::new(EnvCache::default()),
            extra_env: Mutex::new(Vec::new()),
            extra_withheld: Mutex::new(Vec::new()),
        }
    }

    /// Adds `values` (a name for the redaction marker, the value's bytes)
    /// to the withheld values every command's output is redacted of, as
    /// if they were withheld host variables: secrets the embedder holds
    /// for the command without giving them to it (the egress proxy's
    /// credentials). Replaces what an earlier call set.
    pub fn set_withheld_values(&self, values: Vec<(String, Vec<u8>)>) {
        *self
            .extra_withheld
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = values;
        self.forget_child_env();
    }

    /// Drops the cached child environment, and keeps a plan under way
    /// (made from what was set before) from being cached.
    fn forget_child_env(&self) {
        let mut cache = self.child_env.lock().unwrap_or_else(|e| e.into_inner());
        cache.generation = cache.generation.wrapping_add(1);
        cache.env = None;
    }

    /// A redactor for `plan`'s withheld values and the embedder's.
    fn redactor_for(&self, plan: &EnvPlan) -> Redactor {
        let extra = self
            .extra_withheld
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Redactor::new(
            plan.withheld()
                .iter()
                .map(|(n, v)| (n.clone(), v.as_encoded_bytes().to_vec()))
                .chain(extra),
        )
    }

    /// `bytes` redacted as the output of a command run now would be: of
    /// the withheld values (host variables and the embedder's, see
    /// [`LocalShellExecutor::set_withheld_values`]) and of token shapes.
    /// For what an embedder prints about a command beside its output (its
    /// argv), which must not show what the output would not.
    pub fn redact(&self, bytes: &[u8]) -> Vec<u8> {
        let tmpdir = self
            .lock()
            .session
            .as_ref()
            .map(|s| s.tmpdir_str.clone())
            .unwrap_or_default();
        redacted(&self.child_env(&tmpdir).redactor, bytes)
    }

    /// Adds `vars` to the environment of every command run from now on
    /// (after the host's allowlist; a name given twice keeps the last
    /// value). The facade sets the proxy variables this way once the
    /// proxy listens. Replaces what an earlier call set.
    pub fn set_child_env(&self, vars: Vec<(String, String)>) {
        *self.extra_env.lock().unwrap_or_else(|e| e.into_inner()) = vars;
        self.forget_child_env();
    }

    /// Whether commands run in the executor's own namespaces (started,
    /// the probe succeeded and the confinement plans a view).
    pub fn in_namespaces(&self) -> bool {
        self.lock()
            .session
            .as_ref()
            .is_some_and(|s| s.namespaces.is_ok() && s.prepared.view().is_some())
    }

    /// Creates a TCP listener at each of `addrs` inside the executor's
    /// network namespace (port 0: the kernel picks one), for the executor
    /// to serve from the host's side: the proxy and the literal-address
    /// forwarders. `Ok(None)` when commands do not run in namespaces
    /// ([`LocalShellExecutor::in_namespaces`]); otherwise one answer per
    /// address.
    ///
    /// # Errors
    ///
    /// `E_NOT_STARTED` before start; `E_IO` when the helper process that
    /// joins the namespace cannot run.
    pub fn listen_in_namespace(
        &self,
        addrs: &[std::net::SocketAddr],
    ) -> Result<Option<Vec<io::Result<OwnedFd>>>, ExecError> {
        let ns = {
            let state = self.lock();
            let Some(session) = &state.session else {
                return Err(ExecError::new(
                    ErrorCode::NotStarted,
                    "the executor was not started",
                ));
            };
            match (&session.namespaces, session.prepared.view()) {
                (Ok(ns), Some(_)) => Arc::clone(ns),
                _ => return Ok(None),
            }
        };
        crate::netns::listen_inside(&ns, addrs)
            .map(Some)
            .map_err(|e| ExecError::io("cannot create a listener in the network namespace", e))
    }

    /// The private temporary directory, while started.
    pub fn tmpdir(&self) -> Option<PathBuf> {
        self.lock().session.as_ref().map(|s| s.tmpdir.clone())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The child environment for an exec now: the cached plan when the
    /// host environment (read afresh at every exec, as before) and the
    /// temporary directory are what it was planned from, else a new plan.
    fn child_env(&self, tmpdir: &str) -> Arc<ChildEnv> {
        let host: Option<Vec<(OsString, OsString)>> = match &self.config.host_env {
            Some(_) => None,
            None => Some(std::env::vars_os().collect()),
        };
        loop {
            let (generation, cached) = {
                let cache = self.child_env.lock().unwrap_or_else(|e| e.into_inner());
                (cache.generation, cache.env.clone())
            };
            if let Some(env) = cached {
                if env.host == host && env.tmpdir == tmpdir {
                    return env;
                }
            }
            let added = self
                .extra_env
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let env = Arc::new(ChildEnv::plan(
                &self.config,
                host.clone(),
                tmpdir,
                &added,
                |plan| self.redactor_for(plan),
            ));
            let mut cache = self.child_env.lock().unwrap_or_else(|e| e.into_inner());
            // The embedder changed what every command gets while this
            // plan was made from the earlier values: plan again, so that
            // neither this exec nor a later one (through the cache) runs
            // without the change.
            if cache.generation == generation {
                cache.env = Some(Arc::clone(&env));
                return env;
            }
        }
    }
}

impl LocalShellExecutor {
    /// Registers an exec with the running session: its registration
    /// (which deregisters when dropped, a panic included, so that dispose
    /// never waits for an exec that is gone), its internal abort, the
    /// temporary directory and the session's confinement.
    #[allow(clippy::type_complexity)]
    fn register(
        &self,
    ) -> Result<
        (
            Running<'_>,
            AbortSignal,
            String,
            Prepared,
            Result<Arc<Namespaces>, String>,
            Arc<limits::Setup>,
        ),
        ExecError,
    > {
        let mut state = self.lock();
        let Some(session) = &state.session else {
            return Err(ExecError::new(
                ErrorCode::NotStarted,
                "the executor was not started",
            ));
        };
        let tmpdir = session.tmpdir_str.clone();
        let prepared = session.prepared.clone();
        let namespaces = session.namespaces.clone();
        let limits = Arc::clone(&session.limits);
        let internal =
            AbortSignal::try_new().map_err(|e| ExecError::io("cannot create an eventfd", e))?;
        let id = state.next_id;
        state.next_id += 1;
        state.running.insert(id, internal.clone());
        Ok((
            Running { executor: self, id },
            internal,
            tmpdir,
            prepared,
            namespaces,
            limits,
        ))
    }

    /// Runs `program` with `args` directly, without a shell:
    /// `execve(program, [program, args…], env)`, where `env` is the whole
    /// environment (nothing of the host's is added), confined by `confine`
    /// in place of the executor's own confinement (prepared by the caller
    /// with [`confine::prepare`]). Everything else is as for
    /// [`ShellExecutor::exec`]: a session of its own, the keeper, the
    /// timeout, abort, the output cap, and redaction of every
    /// credential-shaped host variable's value (none reaches the program)
    /// and of token shapes. `args` are passed as bytes, unchanged.
    ///
    /// # Errors
    ///
    /// `E_NOT_STARTED` before [`ShellExecutor::start`] or after
    /// [`ShellExecutor::dispose`]; `E_REQUEST` when an argument or a
    /// variable holds a NUL byte, or a variable's name is empty or holds
    /// `=`; `E_IO` when the executor cannot make a pipe or an eventfd.
    pub fn exec_program(
        &self,
        program: &Path,
        args: &[OsString],
        env: &[(OsString, OsString)],
        confine: &Prepared,
        opts: ExecOptions,
    ) -> Result<ExecResult, ExecError> {
        let began = Instant::now();
        let argv = argv_of(program, args)?;
        let env = Arc::new(ChildEnv::for_program(&self.config, env, |plan| {
            self.redactor_for(plan)
        })?);
        let (running, internal, _, _, namespaces, limits) = self.register()?;
        let result = run(
            &self.config,
            Start::Program(program, argv),
            opts,
            &env,
            (confine, &namespaces, &limits),
            &internal,
            began,
        );
        drop(running);
        result
    }
}

impl LocalShellExecutor {
    /// Runs `path` with `args` directly, without a shell — `execve(path,
    /// [path, args…])`, searched in the child's `PATH` when `path` names no
    /// directory — with everything [`ShellExecutor::exec`] gives a shell
    /// command: the executor's environment plan, its confinement, the
    /// keeper, the timeout, abort, the cap and redaction. `args` are
    /// passed as bytes, unchanged (no quoting, no shell).
    ///
    /// # Errors
    ///
    /// As [`ShellExecutor::exec`], and `E_REQUEST` when the path or an
    /// argument holds a NUL byte.
    pub fn exec_argv(
        &self,
        path: &Path,
        args: &[OsString],
        opts: ExecOptions,
    ) -> Result<ExecResult, ExecError> {
        let began = Instant::now();
        let argv = argv_of(path, args)?;
        self.run_in_session(Start::Program(path, argv), opts, began)
    }

    /// Runs `start` under the session's environment plan and confinement,
    /// registered so that dispose can abort it.
    fn run_in_session(
        &self,
        start: Start<'_>,
        opts: ExecOptions,
        began: Instant,
    ) -> Result<ExecResult, ExecError> {
        let (running, internal, tmpdir, prepared, namespaces, limits) = self.register()?;
        let env = self.child_env(&tmpdir);
        let result = run(
            &self.config,
            start,
            opts,
            &env,
            (&prepared, &namespaces, &limits),
            &internal,
            began,
        );
        drop(running);
        result
    }
}

/// `[path, args…]` as C strings.
fn argv_of(path: &Path, args: &[OsString]) -> Result<Vec<CString>, ExecError> {
    std::iter::once(path.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| ExecError::new(ErrorCode::Request, "an argument holds a NUL byte"))
}

impl Drop for LocalShellExecutor {
    fn drop(&mut self) {
        let _ = self.dispose();
    }
}

impl ShellExecutor for LocalShellExecutor {
    fn start(&self) -> Result<(), ExecError> {
        let mut state = self.lock();
        if state.session.is_some() {
            return Ok(());
        }
        let tmpdir = make_tmpdir()?;
        let Some(tmpdir_str) = tmpdir.to_str().map(str::to_owned) else {
            let _ = fs::remove_dir(&tmpdir);
            return Err(ExecError::new(
                ErrorCode::Io,
                "the temporary directory's path is not UTF-8",
            ));
        };
        let limits = match limits::setup(&self.config.limits) {
            Ok(limits) => limits,
            Err(why) => {
                let _ = fs::remove_dir_all(&tmpdir);
                return Err(ExecError::new(ErrorCode::ConfineUnavailable, why));
            }
        };
        let mut spec = self.config.confine.clone();
        spec.write_dirs.push(tmpdir.clone());
        spec.max_data_bytes = spec.max_data_bytes.or(limits.data_bytes);
        spec.max_cpu_secs = spec.max_cpu_secs.or(limits.cpu_secs);
        let mode = self.config.confine_mode;
        let prepared = confine::prepare(&spec, mode).and_then(|prepared| {
            let namespaces = if mode == ConfineMode::Off {
                Err("confinement is off".to_owned())
            } else if !self.config.namespaces {
                Err("namespaces are turned off in the executor's configuration".to_owned())
            } else if prepared.view().is_none() {
                Err(
                    "the policy grants network access and the executor serves no proxy \
                     inside a network namespace of the command's own"
                        .to_owned(),
                )
            } else {
                Namespaces::create().map(Arc::new).map_err(|e| e.0)
            };
            match (&namespaces, mode) {
                (Err(why), ConfineMode::Required) => Err(ConfineError::namespaces_unavailable(why)),
                _ => Ok((prepared, namespaces)),
            }
        });
        match prepared {
            Ok((prepared, namespaces)) => {
                state.session = Some(Session {
                    tmpdir,
                    tmpdir_str,
                    prepared,
                    namespaces,
                    limits: Arc::new(limits),
                });
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&tmpdir);
                Err(ExecError {
                    code: e.code(),
                    message: e.to_string(),
                    source: e.errno().map(io::Error::from_raw_os_error),
                })
            }
        }
    }

    fn exec(&self, command: &str, opts: ExecOptions) -> Result<ExecResult, ExecError> {
        let began = Instant::now();
        self.run_in_session(Start::Shell(command), opts, began)
    }

    fn dispose(&self) -> Result<(), ExecError> {
        let _disposal = self.disposal.lock().unwrap_or_else(|e| e.into_inner());
        let mut state = self.lock();
        let session = state.session.take();
        // What the embedder added is the session's, and goes with it now,
        // under the lock: the wait below releases it, and a session
        // started meanwhile (another thread's `start`, the facade's
        // proxy variables set for it) is not this dispose's to clear.
        // The added variables go first, then the cache with a new
        // generation: a plan made between the two (a `redact` call) saw
        // the old variables and must not be kept for a later session.
        self.extra_env
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.forget_child_env();
        // The execs of this session, aborted and waited for; those of a
        // session started during the wait are not.
        let aborted: Vec<u64> = state.running.keys().copied().collect();
        for signal in state.running.values() {
            signal.abort();
        }
        // Each exec returns within grace + margin of its abort; bound the
        // wait anyway.
        let limit = later(
            Instant::now(),
            self.config.grace.saturating_add(BACKSTOP_MARGIN * 2),
        );
        while aborted.iter().any(|id| state.running.contains_key(id)) {
            let now = Instant::now();
            if now >= limit {
                break;
            }
            state = self
                .idle
                .wait_timeout(state, limit - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(state);
        if let Some(session) = session {
            crate::tmpdir::remove(&session.tmpdir)
                .map_err(|e| ExecError::io("cannot remove the temporary directory", e))?;
        }
        Ok(())
    }
}

/// A running exec's registration.
struct Running<'a> {
    executor: &'a LocalShellExecutor,
    id: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut state = self.executor.lock();
        state.running.remove(&self.id);
        // A dispose waits for the execs it aborted, not for all.
        self.executor.idle.notify_all();
    }
}

/// Creates `sandgate-exec-<random>` under the system temporary directory,
/// mode 0700.
/// Makes the session's private TMPDIR, `sandgate-exec-<owner>-<random>`
/// in the host's temporary directory ([`tmpdir::owner_tag`]), after
/// removing those whose owner process is gone ([`tmpdir::sweep`]).
fn make_tmpdir() -> Result<PathBuf, ExecError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = crate::tmpdir::base()
        .map_err(|e| ExecError::io("cannot find the temporary directory", e))?;
    let owner = crate::tmpdir::owner_tag();
    if let Some(owner) = &owner {
        crate::tmpdir::sweep(&base, owner);
    }
    for _ in 0..16 {
        let random = random_u64(&COUNTER);
        let name = match &owner {
            Some(owner) => format!("{}{owner}-{random:016x}", crate::tmpdir::PREFIX),
            None => format!("{}{random:016x}", crate::tmpdir::PREFIX),
        };
        let path = base.join(name);
        match fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(ExecError::io("cannot create a temporary directory", e)),
        }
    }
    Err(ExecError::new(
        ErrorCode::Io,
        "cannot create a temporary directory: every name taken",
    ))
}

fn random_u64(counter: &AtomicU64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(counter.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// What a run starts.
enum Start<'a> {
    /// `shell -c command`, the shell being [`ExecConfig::shell`].
    Shell(&'a str),
    /// A program, from its argv (`argv[0]` included).
    Program(&'a Path, Vec<CString>),
}

fn run(
    config: &ExecConfig,
    start: Start<'_>,
    opts: ExecOptions,
    env: &Arc<ChildEnv>,
    confinement: (
        &Prepared,
        &Result<Arc<Namespaces>, String>,
        &Arc<limits::Setup>,
    ),
    internal: &AbortSignal,
    began: Instant,
) -> Result<ExecResult, ExecError> {
    let (prepared, namespaces, limits) = confinement;
    let narrowed = match &opts.within {
        Some(dirs) => {
            // The session's private TMPDIR stays the command's own.
            let tmp = (!env.tmpdir.is_empty())
                .then(|| {
                    rustix::fs::open(
                        env.tmpdir.as_str(),
                        rustix::fs::OFlags::PATH
                            | rustix::fs::OFlags::DIRECTORY
                            | rustix::fs::OFlags::CLOEXEC,
                        rustix::fs::Mode::empty(),
                    )
                })
                .transpose()
                .map_err(|e| ExecError::io("cannot open the private TMPDIR", e.into()))?;
            let dirs: Vec<BorrowedFd<'_>> = dirs.iter().chain(&tmp).map(AsFd::as_fd).collect();
            Some(
                prepared
                    .narrowed(&dirs)
                    .map_err(|e| ExecError::new(e.code(), e.to_string()))?,
            )
        }
        None => None,
    };
    let prepared = narrowed.as_ref().unwrap_or(prepared);
    let timeout = opts.timeout.unwrap_or(config.default_timeout);
    let mut in_ns = match namespaces {
        Ok(ns) if prepared.view().is_some() => Some(spawn::InNamespaces {
            namespaces: ns,
            grace: config.grace,
            default_cwd: std::env::current_dir().ok(),
            binds: None,
        }),
        _ => None,
    };
    let mut confined = match (&in_ns, namespaces) {
        (Some(n), _) => prepared.report_in_namespaces(n.namespaces.root),
        (None, Err(why)) if prepared.report().mode != Some(ConfineMode::Off) => {
            let mut r = prepared.report().clone();
            r.notes
                .push(format!("no namespaces of the command's own: {why}"));
            r
        }
        (None, _) => prepared.report().clone(),
    };
    if let Some(dirs) = &opts.within {
        confined.notes.push(format!(
            "narrowed by the caller: of the granted directories, the command reaches only \
             what lies beneath {} director{} it was given",
            dirs.len(),
            if dirs.len() == 1 { "y" } else { "ies" }
        ));
    }
    let mut result = ExecResult {
        exit_code: 0,
        stdout: Vec::new(),
        stderr: Vec::new(),
        truncated: false,
        timed_out: false,
        aborted: false,
        not_started: false,
        limit: None,
        env_names_digest: env.names_digest.clone(),
        confined,
        duration: Duration::ZERO,
        protected_changes: Vec::new(),
    };
    if limits.report != limits::LimitsReport::default() {
        result.confined.limits = Some(limits.report.clone());
    }
    if opts.abort.as_ref().is_some_and(AbortSignal::is_aborted) || internal.is_aborted() {
        result.exit_code = EXIT_ABORTED;
        result.aborted = true;
        result.duration = began.elapsed();
        return Ok(result);
    }

    let env_owner: Arc<dyn std::any::Any + Send + Sync> = env.clone();
    let cwd = opts.cwd.as_ref().map(|fd| fd.as_fd());
    let (program, what) = match start {
        Start::Shell(command) => (
            spawn::Program::Shell {
                shell: &config.shell,
                command,
            },
            "the shell".to_owned(),
        ),
        // The program's name is shown as its output would be: redacted.
        Start::Program(path, args) => (
            spawn::Program::Argv { path, args },
            String::from_utf8_lossy(&redacted(
                &env.redactor,
                path.as_os_str().as_encoded_bytes(),
            ))
            .into_owned(),
        ),
    };
    let pool = limits.pool.as_ref();
    let lease = match pool.map(crate::cgroup::Pool::lease).transpose() {
        Ok(lease) => lease,
        Err(e) => {
            // Never run outside the cgroup that holds the limits.
            result.exit_code = EXIT_NOT_STARTED;
            result.not_started = true;
            result.stderr =
                format!("sandgate: cannot start {what}: no cgroup for its limits: {e}\n")
                    .into_bytes();
            result.duration = began.elapsed();
            return Ok(result);
        }
    };
    let placement = lease.as_ref().map(|l| l.placement()).unwrap_or_default();
    // The protected state is recorded before anything of the command runs;
    // without a record the command does not run. A command that can write
    // nowhere (confined git) cannot change it: no record, no check.
    let protected = config
        .protected
        .as_ref()
        .filter(|_| !prepared.writes_nothing());
    // The wait for a turn on the write root (another process's command
    // holds it) counts against the call's timeout and ends with an abort.
    let stop = || opts.abort.as_ref().is_some_and(AbortSignal::is_aborted) || internal.is_aborted();
    let checkpoint = match protected
        .map(|p| p.before_until(began + timeout, &stop))
        .transpose()
    {
        Ok(checkpoint) => checkpoint,
        Err(e) => {
            if let (Some(pool), Some(lease)) = (pool, lease) {
                pool.release(lease);
            }
            if e.kind() == std::io::ErrorKind::Interrupted {
                result.exit_code = EXIT_ABORTED;
                result.aborted = true;
                result.duration = began.elapsed();
                return Ok(result);
            }
            if e.kind() == std::io::ErrorKind::TimedOut {
                result.exit_code = EXIT_TIMEOUT;
                result.timed_out = true;
                result.limit = Some(Limit::Timeout);
                result.not_started = true;
                result.stderr = format!("sandgate: {what} did not start: {e}\n").into_bytes();
                result.duration = began.elapsed();
                return Ok(result);
            }
            result.exit_code = EXIT_NOT_STARTED;
            result.not_started = true;
            result.stderr =
                format!("sandgate: cannot start {what}: cannot record the protected paths: {e}\n")
                    .into_bytes();
            result.duration = began.elapsed();
            return Ok(result);
        }
    };
    // In the view, the recorded protected entries are bound read-only.
    let mut planned_binds = None;
    if let (Some(n), Some(checkpoint), Some(hook)) = (
        in_ns.as_mut(),
        checkpoint.as_ref(),
        config.protected.as_ref(),
    ) {
        match plan_binds(config, hook.as_ref(), checkpoint.as_ref()) {
            Ok(plan) => {
                planned_binds = plan.as_ref().map(|p| p.planned);
                n.binds = plan;
            }
            Err(why) => {
                if let (Some(pool), Some(lease)) = (pool, lease) {
                    pool.release(lease);
                }
                result.exit_code = EXIT_NOT_STARTED;
                result.not_started = true;
                result.stderr = format!("sandgate: cannot start {what}: {why}\n").into_bytes();
                result.duration = began.elapsed();
                return Ok(result);
            }
        }
    }
    let view = in_ns.is_some();
    let spawned = match spawn::spawn(
        program,
        &env.envp,
        env_owner,
        prepared,
        cwd,
        in_ns,
        placement,
        later(began, timeout),
    ) {
        Ok(spawned) => spawned,
        Err(e) => {
            if let (Some(pool), Some(lease)) = (pool, lease) {
                pool.release(lease);
            }
            result.exit_code = EXIT_NOT_STARTED;
            result.not_started = true;
            result.stderr = format!("sandgate: cannot start {what}: {e}\n").into_bytes();
            result.duration = began.elapsed();
            return Ok(result);
        }
    };
    let Spawned {
        keeper,
        stdout,
        stderr,
        status,
        notify,
        binds_skipped,
        held,
    } = spawned;
    if held {
        result.confined.notes.push(
            "the command kept its keeper stopped (SIGSTOP) before the keeper could report \
             that it started, and was killed for it"
                .to_owned(),
        );
    }
    if let Some(planned) = planned_binds {
        let held = crate::binds::applied(planned, binds_skipped);
        if held.floor > planned.floor {
            result.confined.notes.push(format!(
                "{} protected entries were not bound in the view (not what the record says: \
                 replaced, renamed or removed meanwhile; or a mount call failed): they are \
                 left to the after-the-fact check",
                held.floor - planned.floor
            ));
        }
        result.confined.protected_binds = Some(held);
    }
    let capture = Capture::new(stdout, stderr, &env.redactor, config.max_output_bytes);
    let monitor = Monitor::new(keeper.pid(), limits.walked, lease, view, began);
    let outcome = Run::new(
        keeper,
        status,
        notify,
        capture,
        (began, timeout, config.grace),
        opts.abort.clone(),
        internal.clone(),
    )
    .with_monitor(monitor, limits.report.max_cpu_ms.is_some())
    .with_file_size_limit(prepared.limits_file_size())
    .with_socket_rules(prepared.socket_rules())
    .finish();
    // Every process of the command is dead now: undo what it did to
    // protected paths.
    if let Some(checkpoint) = checkpoint {
        result.protected_changes = checkpoint.after();
        result.confined.protected_detection = protected.and_then(|p| p.detection());
    }
    if let (Some(pool), Some(lease)) = (pool, outcome.lease) {
        pool.release(lease);
    }
    result.limit = outcome.limit;
    result.exit_code = outcome.exit_code;
    result.stdout = outcome.stdout;
    result.stderr = outcome.stderr;
    result.truncated = outcome.truncated;
    result.timed_out = outcome.timed_out;
    result.aborted = outcome.aborted;
    result.duration = began.elapsed();
    Ok(result)
}

/// The binds of the recorded protected entries in the view, when the
/// hook names its root and the view binds that root writable. `required`
/// refuses a protected file with more than one link: its other names
/// would stay writable.
fn plan_binds(
    config: &ExecConfig,
    hook: &dyn ProtectedPaths,
    checkpoint: &dyn crate::protected::Checkpoint,
) -> Result<Option<crate::binds::BindPlan>, String> {
    let Some(root) = hook.root() else {
        return Ok(None);
    };
    let root = fs::canonicalize(root)
        .map_err(|e| format!("cannot resolve the protected write root: {e}"))?;
    let in_view = config
        .confine
        .write_dirs
        .iter()
        .any(|d| fs::canonicalize(d).is_ok_and(|d| d == root));
    if !in_view {
        return Ok(None);
    }
    let entries = checkpoint.entries();
    if entries.is_empty() {
        return Ok(None);
    }
    if config.confine_mode == ConfineMode::Required {
        if let Some(e) = entries
            .iter()
            .find(|e| e.kind == crate::protected::EntryKind::File && e.nlink > 1)
        {
            return Err(format!(
                "the protected file {} has {} hard links: its other names cannot be bound \
                 read-only, and confinement is required (remove the extra links)",
                sandgate_codes::shown(&e.path),
                e.nlink
            ));
        }
    }
    let strict = config.confine_mode == ConfineMode::Required;
    crate::binds::BindPlan::new(&root, &entries, strict)
        .map(Some)
        .map_err(|e| format!("cannot plan the binds of the protected paths: {e}"))
}

/// `bytes` passed whole through a fresh clone of `redactor`.
fn redacted(redactor: &Redactor, bytes: &[u8]) -> Vec<u8> {
    let mut r = redactor.clone();
    let mut out = r.push(bytes);
    out.extend(r.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abort_signal_is_shared_by_clones() {
        let a = AbortSignal::new();
        let b = a.clone();
        assert!(!b.is_aborted());
        a.abort();
        assert!(b.is_aborted());
        a.abort();
    }

    #[test]
    fn executor_and_signal_are_send_sync() {
        fn f<T: Send + Sync>() {}
        f::<LocalShellExecutor>();
        f::<AbortSignal>();
    }
}
