//! The shell executor (SPEC §7): `shell -c command`, confined, with a
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
//! keeper's exit from a pidfd.
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
//!   kill is refused.
//! - If the executor process itself dies abruptly, nothing ends the
//!   command: the keeper and the command run until they end by themselves.
//! - A descendant that hands an output pipe to an unrelated process (over a
//!   UNIX socket) can keep the pipe open: the deadline backstop then ends
//!   the call and marks it timed out.
//! - A process stuck in uninterruptible sleep cannot be killed until it
//!   wakes; the backstop returns regardless and a thread reaps the keeper
//!   later.

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsString};
use std::fmt;
use std::fs;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sandgate_codes::ErrorCode;

use crate::confine::{self, ConfineMode, ConfineSpec, ConfinementReport, Prepared};
use crate::env::EnvPlan;
use crate::redact::Redactor;
use crate::spawn::{self, exit_code, pidfd_open, pollfd, Keeper, Spawned};

/// Exit code of a timed-out command.
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code of an aborted command.
pub const EXIT_ABORTED: i32 = 130;
/// Exit code when the shell could not be started.
pub const EXIT_NOT_STARTED: i32 = 127;

/// How long past `timeout + grace` a call may last, whatever the child
/// does.
pub const BACKSTOP_MARGIN: Duration = Duration::from_secs(2);

/// How often the subtree is scanned while it is being killed.
const KILL_SCAN: Duration = Duration::from_millis(10);

/// Output buffers from this size on are mapped ahead ([`prefault`]).
const PREFAULT_FROM: usize = 1 << 20;

/// How far past the next read an output buffer is kept mapped.
const PREFAULT_AHEAD: usize = 512 * 1024;

/// A stream's pipe is widened once this many bytes came through it.
const WIDEN_FROM: usize = 1 << 20;

/// Pipe sizes tried, in order, when a stream is widened.
const WIDE_PIPE: [libc::c_int; 2] = [1 << 20, 256 << 10];

/// `madvise` advice (linux/mman.h), not in every `libc` release.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Bytes read per `read(2)`.
const READ_CHUNK: usize = 128 * 1024;

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
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// The host environment the child's is planned from; `None` for the
    /// executor's own ([`std::env::vars_os`]). Meant for tests and
    /// embedders that keep their environment elsewhere.
    pub host_env: Option<Vec<(OsString, OsString)>>,
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
            .field("grace", &self.grace)
            .field("host_env_names", &host_env)
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
            grace: Duration::from_millis(500),
            host_env: None,
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
    /// The SPEC §8 code.
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
            message: format!("{message}: {source}"),
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

    fn try_new() -> io::Result<Self> {
        // SAFETY: eventfd takes integer arguments and returns a new
        // descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just returned this descriptor; we own it.
        let event = unsafe { OwnedFd::from_raw_fd(fd) };
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
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our eventfd.
            let _ = unsafe {
                libc::write(
                    self.inner.event.as_raw_fd(),
                    std::ptr::addr_of!(one).cast(),
                    8,
                )
            };
        }
    }

    /// Whether [`AbortSignal::abort`] was called.
    pub fn is_aborted(&self) -> bool {
        self.inner.aborted.load(Ordering::SeqCst)
    }

    fn raw_fd(&self) -> RawFd {
        self.inner.event.as_raw_fd()
    }
}

impl Default for AbortSignal {
    fn default() -> Self {
        Self::new()
    }
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
    /// [`EnvPlan::names_digest`] of the child's environment.
    pub env_names_digest: String,
    /// The confinement in force.
    pub confined: ConfinementReport,
    /// Wall-clock time of the call.
    pub duration: Duration,
}

/// Runs shell commands for an agent (SPEC §7).
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
#[derive(Debug)]
pub struct LocalShellExecutor {
    config: ExecConfig,
    state: Mutex<State>,
    idle: Condvar,
    /// The last child environment planned, reused while the host
    /// environment and the temporary directory are unchanged.
    child_env: Mutex<Option<Arc<ChildEnv>>>,
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
    fn for_program(config: &ExecConfig, env: &[(OsString, OsString)]) -> Result<Self, ExecError> {
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
            redactor: plan.redactor(),
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
    fn plan(config: &ExecConfig, host: Option<Vec<(OsString, OsString)>>, tmpdir: &str) -> Self {
        let source: Vec<(OsString, OsString)> = match (&host, &config.host_env) {
            (Some(vars), _) | (None, Some(vars)) => vars.clone(),
            (None, None) => std::env::vars_os().collect(),
        };
        let extra: Vec<(String, String)> = ["TMPDIR", "TMP", "TEMP"]
            .iter()
            .map(|n| ((*n).to_owned(), tmpdir.to_owned()))
            .collect();
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
            redactor: plan.redactor(),
            plan,
        }
    }
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
}

impl LocalShellExecutor {
    /// An executor that is not started yet.
    pub fn new(config: ExecConfig) -> Self {
        LocalShellExecutor {
            config,
            state: Mutex::new(State::default()),
            idle: Condvar::new(),
            child_env: Mutex::new(None),
        }
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
        let cached = self
            .child_env
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(env) = cached {
            if env.host == host && env.tmpdir == tmpdir {
                return env;
            }
        }
        let env = Arc::new(ChildEnv::plan(&self.config, host, tmpdir));
        *self.child_env.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&env));
        env
    }
}

impl LocalShellExecutor {
    /// Registers an exec with the running session: its registration
    /// (which deregisters when dropped, a panic included, so that dispose
    /// never waits for an exec that is gone), its internal abort, the
    /// temporary directory and the session's confinement.
    fn register(&self) -> Result<(Running<'_>, AbortSignal, String, Prepared), ExecError> {
        let mut state = self.lock();
        let Some(session) = &state.session else {
            return Err(ExecError::new(
                ErrorCode::NotStarted,
                "the executor was not started",
            ));
        };
        let tmpdir = session.tmpdir_str.clone();
        let prepared = session.prepared.clone();
        let internal =
            AbortSignal::try_new().map_err(|e| ExecError::io("cannot create an eventfd", e))?;
        let id = state.next_id;
        state.next_id += 1;
        state.running.insert(id, internal.clone());
        Ok((Running { executor: self, id }, internal, tmpdir, prepared))
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
        let argv = std::iter::once(program.as_os_str())
            .chain(args.iter().map(OsString::as_os_str))
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| ExecError::new(ErrorCode::Request, "an argument holds a NUL byte"))?;
        let env = Arc::new(ChildEnv::for_program(&self.config, env)?);
        let (running, internal, _, _) = self.register()?;
        let result = run(
            &self.config,
            Start::Program(program, argv),
            opts,
            &env,
            confine,
            &internal,
            began,
        );
        drop(running);
        result
    }
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
        let mut spec = self.config.confine.clone();
        spec.write_dirs.push(tmpdir.clone());
        match confine::prepare(&spec, self.config.confine_mode) {
            Ok(prepared) => {
                state.session = Some(Session {
                    tmpdir,
                    tmpdir_str,
                    prepared,
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
        let (running, internal, tmpdir, prepared) = self.register()?;
        let env = self.child_env(&tmpdir);
        let result = run(
            &self.config,
            Start::Shell(command),
            opts,
            &env,
            &prepared,
            &internal,
            began,
        );
        drop(running);
        result
    }

    fn dispose(&self) -> Result<(), ExecError> {
        let mut state = self.lock();
        let session = state.session.take();
        for signal in state.running.values() {
            signal.abort();
        }
        // Each exec returns within grace + margin of its abort; bound the
        // wait anyway.
        let limit = later(
            Instant::now(),
            self.config.grace.saturating_add(BACKSTOP_MARGIN * 2),
        );
        while !state.running.is_empty() {
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
        *self.child_env.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if let Some(session) = session {
            match fs::remove_dir_all(&session.tmpdir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(ExecError::io("cannot remove the temporary directory", e)),
            }
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
        if state.running.is_empty() {
            self.executor.idle.notify_all();
        }
    }
}

/// Creates `sandgate-exec-<random>` under the system temporary directory,
/// mode 0700.
fn make_tmpdir() -> Result<PathBuf, ExecError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    for _ in 0..16 {
        let name = format!("sandgate-exec-{:016x}", random_u64(&COUNTER));
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

/// Why the command is being ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Timeout,
    Abort,
    /// The shell exited; what it left behind is being cleaned up.
    Exited,
}

/// Where killing the keeper's subtree stands.
enum Reap {
    /// Nothing asked yet.
    Idle,
    /// SIGTERM sent (to each process seen) since then.
    Term(Instant),
    /// SIGKILL to each process seen, at every scan.
    Kill,
    /// The subtree was empty.
    Done,
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
    prepared: &Prepared,
    internal: &AbortSignal,
    began: Instant,
) -> Result<ExecResult, ExecError> {
    let timeout = opts.timeout.unwrap_or(config.default_timeout);
    let mut result = ExecResult {
        exit_code: 0,
        stdout: Vec::new(),
        stderr: Vec::new(),
        truncated: false,
        timed_out: false,
        aborted: false,
        env_names_digest: env.names_digest.clone(),
        confined: prepared.report().clone(),
        duration: Duration::ZERO,
    };
    if opts.abort.as_ref().is_some_and(AbortSignal::is_aborted) || internal.is_aborted() {
        result.exit_code = EXIT_ABORTED;
        result.aborted = true;
        result.duration = began.elapsed();
        return Ok(result);
    }

    let env_owner: Arc<dyn std::any::Any + Send + Sync> = env.clone();
    let cwd = opts.cwd.as_ref().map(|fd| fd.as_fd());
    let (program, argv, what) = match start {
        Start::Shell(command) => (
            config.shell.as_path(),
            spawn::shell_argv(&config.shell, command),
            "the shell".to_owned(),
        ),
        Start::Program(program, argv) => (program, Ok(argv), program.display().to_string()),
    };
    let spawned =
        argv.and_then(|argv| spawn::spawn(program, argv, &env.envp, env_owner, prepared, cwd));
    let Spawned {
        mut keeper,
        stdout,
        stderr,
        status: status_r,
        notify,
    } = match spawned {
        Ok(spawned) => spawned,
        Err(e) => {
            result.exit_code = EXIT_NOT_STARTED;
            result.stderr = format!("sandgate: cannot start {what}: {e}\n").into_bytes();
            result.duration = began.elapsed();
            return Ok(result);
        }
    };
    let keeper_pid = keeper.pid();

    let deadline = later(began, timeout);
    let backstop = later(later(deadline, config.grace), BACKSTOP_MARGIN);
    let mut streams = [
        Stream::new(stdout, env.redactor.clone()),
        Stream::new(stderr, env.redactor.clone()),
    ];
    for s in &streams {
        if let Some(fd) = &s.fd {
            set_nonblocking(fd.as_raw_fd());
        }
    }
    set_nonblocking(status_r.as_raw_fd());
    let mut status_fd = Some(status_r);
    // The seccomp listener for `listen` calls, served while anything of
    // the command may still call it.
    let mut notify_fd = notify;
    let mut status_buf: Vec<u8> = Vec::with_capacity(4);
    let mut shell_status: Option<i32> = None;
    let mut end: Option<End> = None;
    let mut reap = Reap::Idle;
    let mut signalled: HashSet<(i32, u64)> = HashSet::new();
    let mut captured = 0usize;
    // Allocated at the first output, so that a silent command costs none.
    let mut buf: Vec<u8> = Vec::new();
    let user_abort = opts.abort.clone();
    let mut backstop_hit = false;
    let mut abort_noted = false;
    let mut next_scan = began;

    loop {
        let now = Instant::now();
        if now >= backstop {
            backstop_hit = true;
            break;
        }
        // Start ending the command when a limit is reached. An abort after
        // the shell exited only hurries the clean-up.
        let aborted = !abort_noted
            && (user_abort.as_ref().is_some_and(AbortSignal::is_aborted) || internal.is_aborted());
        abort_noted |= aborted;
        let limit = if aborted {
            Some(End::Abort)
        } else if end.is_none() && now >= deadline && shell_status.is_none() {
            Some(End::Timeout)
        } else {
            None
        };
        if let Some(limit) = limit {
            if end.is_none() {
                end = Some(limit);
                match limit {
                    End::Timeout => result.timed_out = true,
                    End::Abort => result.aborted = true,
                    End::Exited => {}
                }
            }
            match reap {
                Reap::Idle | Reap::Done => reap = Reap::Term(now),
                // Already ending: carry on.
                Reap::Term(_) | Reap::Kill => {}
            }
        }
        if shell_status.is_some() && end.is_none() {
            end = Some(End::Exited);
            reap = Reap::Term(now);
        }
        // Kill the subtree: one scan per round, at most one per KILL_SCAN
        // (a flood makes rounds short). A new stage scans at once.
        let scan = now >= next_scan || matches!(reap, Reap::Term(since) if since == now);
        if scan && matches!(reap, Reap::Term(_) | Reap::Kill) {
            next_scan = now + KILL_SCAN;
        }
        match reap {
            Reap::Idle | Reap::Done => {}
            _ if !scan => {}
            // After a normal exit the keeper usually follows at once; it
            // exits only when waitpid says it has no child left, so its exit
            // proves the subtree empty and spares a scan of all of /proc.
            Reap::Term(since)
                if end == Some(End::Exited) && since == now && keeper_gone(&mut keeper) =>
            {
                reap = Reap::Done;
            }
            Reap::Term(since) => {
                let kill = now.duration_since(since) >= config.grace;
                let procs = subtree(keeper_pid);
                if procs.is_empty() {
                    reap = Reap::Done;
                } else {
                    let sig = if kill { libc::SIGKILL } else { libc::SIGTERM };
                    for p in &procs {
                        if kill || signalled.insert((p.pid, p.start)) {
                            signal(p, sig);
                            if sig == libc::SIGTERM {
                                signal(p, libc::SIGCONT);
                            }
                        }
                    }
                    if kill {
                        reap = Reap::Kill;
                    }
                }
            }
            Reap::Kill => {
                let procs = subtree(keeper_pid);
                if procs.is_empty() {
                    reap = Reap::Done;
                } else {
                    for p in &procs {
                        signal(p, libc::SIGKILL);
                    }
                }
            }
        }
        // Finished: the shell's status is known (or the keeper is gone),
        // nothing is left in the subtree, and both pipes are closed.
        let outputs_open = streams.iter().any(|s| s.fd.is_some());
        let status_known = shell_status.is_some() || status_fd.is_none();
        if status_known && matches!(reap, Reap::Done) && !outputs_open {
            break;
        }
        if status_fd.is_none() && shell_status.is_none() && end.is_none() {
            // The keeper died without reporting: end everything.
            end = Some(End::Exited);
            reap = Reap::Term(now);
        }

        // Wait for output, the status, an abort or the next deadline.
        let mut wake = backstop;
        if end.is_none() {
            wake = wake.min(deadline);
        }
        let mut timeout_ms = ms_until(wake, now);
        if matches!(reap, Reap::Term(_) | Reap::Kill)
            || (matches!(reap, Reap::Done) && !outputs_open)
        {
            timeout_ms = timeout_ms.min(KILL_SCAN.as_millis() as i32);
        }
        let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(5);
        let mut roles: Vec<Role> = Vec::with_capacity(5);
        for (i, s) in streams.iter().enumerate() {
            if let Some(fd) = &s.fd {
                pfds.push(pollfd(fd.as_raw_fd()));
                roles.push(Role::Output(i));
            }
        }
        if let Some(fd) = &status_fd {
            pfds.push(pollfd(fd.as_raw_fd()));
            roles.push(Role::Status);
        }
        if let Some(fd) = &notify_fd {
            pfds.push(pollfd(fd.as_raw_fd()));
            roles.push(Role::Notify);
        }
        if !abort_noted {
            if let Some(a) = &user_abort {
                pfds.push(pollfd(a.raw_fd()));
                roles.push(Role::Abort);
            }
            pfds.push(pollfd(internal.raw_fd()));
            roles.push(Role::Abort);
        }
        // SAFETY: `pfds` is a live array of `pfds.len()` pollfd structs.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 {
            // EINTR, or a transient ENOMEM: try again (the backstop bounds
            // the loop). Returning here would leave the command running.
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                std::thread::sleep(Duration::from_millis(1));
            }
            continue;
        }
        for (pfd, role) in pfds.iter().zip(&roles) {
            if pfd.revents == 0 {
                continue;
            }
            match *role {
                Role::Output(i) => {
                    if buf.is_empty() {
                        buf = vec![0u8; READ_CHUNK];
                    }
                    let cap = config.max_output_bytes;
                    streams[i].drain(&mut buf, &mut captured, cap, &mut result.truncated);
                }
                Role::Status => {
                    if let Some(fd) = &status_fd {
                        let mut word = [0u8; 4];
                        let want = 4 - status_buf.len().min(4);
                        match read_some(fd.as_raw_fd(), as_uninit(&mut word[..want])) {
                            ReadOutcome::Data(n) => {
                                status_buf.extend_from_slice(&word[..n]);
                                if status_buf.len() >= 4 {
                                    let raw = [
                                        status_buf[0],
                                        status_buf[1],
                                        status_buf[2],
                                        status_buf[3],
                                    ];
                                    shell_status = Some(i32::from_ne_bytes(raw));
                                    status_fd = None;
                                }
                            }
                            ReadOutcome::Eof => status_fd = None,
                            ReadOutcome::Again => {}
                        }
                    }
                }
                Role::Notify => {
                    if pfd.revents & libc::POLLIN != 0 {
                        if let Some(fd) = &notify_fd {
                            crate::seccomp::serve_one(fd);
                        }
                    } else {
                        // POLLHUP: no process of the command is left
                        // under the filter.
                        notify_fd = None;
                    }
                }
                // Handled at the top of the loop.
                Role::Abort => {}
            }
        }
    }

    // Collect the keeper (it exits once its subtree is empty).
    let keeper_status = if backstop_hit {
        result.timed_out = !result.aborted;
        for p in subtree(keeper_pid) {
            signal(&p, libc::SIGKILL);
        }
        match keeper.try_wait() {
            Ok(Some(st)) => Some(st),
            _ => {
                reap_later(keeper);
                None
            }
        }
    } else {
        wait_until(keeper, backstop)
    };

    for s in &mut streams {
        s.finish();
    }
    let [out, err] = streams;
    result.stdout = out.out;
    result.stderr = err.out;
    if shell_status.is_none() && keeper_status.is_none() && end != Some(End::Abort) {
        // Nothing says how it ended, and the backstop ended the wait.
        result.timed_out = true;
    }
    result.exit_code = match end {
        Some(End::Timeout) => EXIT_TIMEOUT,
        Some(End::Abort) => EXIT_ABORTED,
        _ if result.timed_out => EXIT_TIMEOUT,
        _ => match (shell_status, keeper_status) {
            (Some(code), _) => code,
            (None, Some(st)) => exit_code(st).unwrap_or(EXIT_NOT_STARTED),
            (None, None) => EXIT_TIMEOUT,
        },
    };
    result.duration = began.elapsed();
    Ok(result)
}

#[derive(Clone, Copy)]
enum Role {
    Output(usize),
    Status,
    Notify,
    Abort,
}

/// One output stream being captured.
struct Stream {
    fd: Option<OwnedFd>,
    redactor: Option<Redactor>,
    out: Vec<u8>,
    /// Bytes read from the pipe so far, kept or dropped.
    read: usize,
    /// Offset in `out` below which its spare capacity is known mapped.
    mapped: usize,
    /// Bytes past the cap came through and were dropped: whatever the
    /// redactor still holds back at the cap may be the start of a secret
    /// whose rest was dropped, so it is never emitted.
    dropped: bool,
}

impl Stream {
    fn new(fd: OwnedFd, redactor: Redactor) -> Self {
        Stream {
            fd: Some(fd),
            redactor: Some(redactor),
            out: Vec::new(),
            read: 0,
            mapped: 0,
            dropped: false,
        }
    }

    /// What the redactor still holds back, redacted, once the stream is
    /// over: nothing when bytes past the cap were dropped (the held-back
    /// tail could be a prefix of a withheld value or a token whose rest
    /// was cut off).
    fn finish(&mut self) {
        if let Some(r) = self.redactor.take() {
            if !self.dropped {
                let tail = r.finish();
                self.out.extend_from_slice(&tail);
            }
        }
    }

    /// Reads what is there (a bounded number of chunks, to stay fair to
    /// the other stream), keeping bytes up to the shared cap.
    ///
    /// Below the cap the read lands straight in `out`, and the bytes that
    /// start no secret stay there (the common case: one copy, by the
    /// kernel); anything else goes back through the redactor via `buf`.
    /// Past the cap, reads land in `buf` and are dropped.
    fn drain(&mut self, buf: &mut [u8], captured: &mut usize, cap: usize, truncated: &mut bool) {
        for _ in 0..16 {
            let Some(fd) = &self.fd else { return };
            let fd = fd.as_raw_fd();
            let room = cap.saturating_sub(*captured);
            let outcome = match &mut self.redactor {
                Some(r) if room > 0 => {
                    let want = room.min(buf.len());
                    if self.out.capacity() - self.out.len() < want {
                        // Grow geometrically (double what is there, at
                        // least this read), never past the cap: the
                        // redactor emits at most what it is fed plus
                        // markers, so appends rarely reallocate.
                        let len = self.out.len();
                        self.out
                            .reserve_exact(len.min(cap.saturating_sub(len)).max(want));
                        // A moved buffer may be backed anew.
                        self.mapped = len;
                    }
                    prefault(&self.out, &mut self.mapped, want);
                    let start = self.out.len();
                    let outcome = read_some(fd, &mut self.out.spare_capacity_mut()[..want]);
                    if let ReadOutcome::Data(n) = outcome {
                        // SAFETY: read(2) initialised these `n` bytes.
                        unsafe { self.out.set_len(start + n) };
                        *captured += n;
                        let quiet = r.pass_quiet(&self.out[start..]);
                        if quiet < n {
                            let rest = n - quiet;
                            buf[..rest].copy_from_slice(&self.out[start + quiet..]);
                            self.out.truncate(start + quiet);
                            r.push_into(&buf[..rest], &mut self.out);
                        }
                    }
                    outcome
                }
                _ => {
                    let outcome = read_some(fd, as_uninit(buf));
                    if matches!(outcome, ReadOutcome::Data(_)) && room == 0 {
                        *truncated = true;
                        self.dropped = true;
                    }
                    outcome
                }
            };
            match outcome {
                ReadOutcome::Data(n) => {
                    // Widened once: on the read that reaches WIDEN_FROM.
                    if self.read < WIDEN_FROM && self.read + n >= WIDEN_FROM {
                        widen(fd);
                    }
                    self.read += n;
                }
                ReadOutcome::Eof => {
                    self.fd = None;
                    return;
                }
                ReadOutcome::Again => return,
            }
        }
    }
}

/// Maps the output buffer's memory a little ahead of the next read of
/// `want` bytes (`MADV_POPULATE_WRITE`, Linux 5.14), in steps about
/// one read long. Otherwise each 4 KiB page faults in inside `read(2)`,
/// while the kernel holds the pipe's lock and the writer waits; mapped
/// here, outside that lock, the writer keeps filling the pipe, and the
/// freshly zeroed pages are still in cache when the read lands in them.
/// Only for buffers of [`PREFAULT_FROM`] bytes and more, and never past
/// the capacity, which never exceeds the cap. Advice only: an older
/// kernel's `EINVAL` is ignored and the pages fault in as before.
fn prefault(out: &Vec<u8>, mapped: &mut usize, want: usize) {
    let cap = out.capacity();
    if cap < PREFAULT_FROM {
        return;
    }
    let len = out.len();
    let target = (len + want + PREFAULT_AHEAD).min(cap);
    let from = (*mapped).max(len);
    if from >= target {
        return;
    }
    let page = 4096;
    let base = out.as_ptr() as usize;
    let start = (base + from).next_multiple_of(page);
    let end = (base + target) & !(page - 1);
    if end > start {
        // SAFETY: the range lies inside the vector's allocation, past
        // its initialised part; populating it changes how it is
        // backed, never its contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, MADV_POPULATE_WRITE) };
        *mapped = end - base;
    }
}

/// Enlarges a busy stream's pipe (`F_SETPIPE_SZ`): with the default
/// 64 KiB the writer fills it in a moment and then waits on every read,
/// so a bulk stream moves in many small turns. Done only for a stream that
/// has carried [`WIDEN_FROM`] bytes, since wide pipes count against the
/// user's pipe allowance (`pipe-user-pages-soft`). Best effort: a refusal
/// (a lower `pipe-max-size`, the allowance spent) keeps the pipe as it is.
fn widen(fd: RawFd) {
    for size in WIDE_PIPE {
        // SAFETY: fcntl on our own descriptor with an integer argument.
        if unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, size) } >= 0 {
            return;
        }
    }
}

/// A byte buffer as the uninitialised memory `read_some` fills.
fn as_uninit(buf: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: `u8` and `MaybeUninit<u8>` have the same layout, and
    // `read_some` only writes bytes (never de-initialises any).
    unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

enum ReadOutcome {
    Data(usize),
    Eof,
    Again,
}

fn read_some(fd: RawFd, buf: &mut [MaybeUninit<u8>]) -> ReadOutcome {
    loop {
        // SAFETY: reads at most `buf.len()` bytes into a live buffer.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            return ReadOutcome::Data(n as usize);
        }
        if n == 0 {
            return ReadOutcome::Eof;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return ReadOutcome::Again,
            // Any other error: treat the stream as ended.
            _ => return ReadOutcome::Eof,
        }
    }
}

/// `t + d`, saturating at a far future instead of overflowing.
fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .or_else(|| t.checked_add(Duration::from_secs(1 << 30)))
        .unwrap_or(t)
}

fn ms_until(when: Instant, now: Instant) -> i32 {
    let d = when.saturating_duration_since(now);
    // Round up so that a wake-up is never early.
    let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    i32::try_from(ms).unwrap_or(i32::MAX)
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on our own descriptor with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// Sleeps until the process behind `pidfd` exits or `d` passes; without a
/// pidfd, sleeps `step` (at most `d`).
fn await_exit(pidfd: Option<&OwnedFd>, d: Duration, step: Duration) {
    match pidfd {
        Some(fd) => {
            let mut p = pollfd(fd.as_raw_fd());
            let ms = i32::try_from(d.as_millis().max(1)).unwrap_or(i32::MAX);
            // SAFETY: `p` is one live pollfd struct. EINTR or an error only
            // makes the caller look again sooner.
            unsafe { libc::poll(&mut p, 1, ms) };
        }
        None => std::thread::sleep(step.min(d)),
    }
}

/// Waits for the keeper until `limit` (looking every `step` without a
/// pidfd): its wait status, `Ok(None)` if it still runs at `limit`, an
/// error if it cannot be waited for.
fn await_keeper(keeper: &mut Keeper, limit: Instant, step: Duration) -> io::Result<Option<i32>> {
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
/// reporting the shell's status when nothing else is left).
fn keeper_gone(keeper: &mut Keeper) -> bool {
    let limit = Instant::now() + Duration::from_millis(2);
    matches!(
        await_keeper(keeper, limit, Duration::from_micros(100)),
        Ok(Some(_))
    )
}

/// Waits for the keeper until `limit`; past it, hands it to a thread.
fn wait_until(mut keeper: Keeper, limit: Instant) -> Option<i32> {
    match await_keeper(&mut keeper, limit, Duration::from_millis(1)) {
        Ok(Some(st)) => Some(st),
        Ok(None) => {
            reap_later(keeper);
            None
        }
        Err(_) => None,
    }
}

/// Kills the keeper's subtree until the keeper is reaped, on a thread.
fn reap_later(mut keeper: Keeper) {
    let _ = std::thread::Builder::new()
        .name("sandgate-reaper".into())
        .spawn(move || loop {
            for p in subtree(keeper.pid()) {
                signal(&p, libc::SIGKILL);
            }
            match keeper.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                _ => return,
            }
        });
}

/// A process in the keeper's subtree.
struct Proc {
    pid: i32,
    /// Start time in clock ticks since boot: with the pid, it names one
    /// process for good.
    start: u64,
}

/// `(ppid, start time, state)` of `pid`, from `/proc/<pid>/stat`.
fn stat(pid: i32) -> Option<(i32, u64, u8)> {
    let text = fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain anything: fields resume after the last
    // ')'.
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let state = *fields.first()?.as_bytes().first()?;
    let ppid = fields.get(1)?.parse().ok()?;
    // Field 22 of stat(5); `fields[0]` is field 3.
    let start = fields.get(19)?.parse().ok()?;
    Some((ppid, start, state))
}

/// Every process below `root` in the parent/child graph, `root` excluded.
fn subtree(root: i32) -> Vec<Proc> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<i32, Vec<(i32, u64, u8)>> = HashMap::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some((ppid, start, state)) = stat(pid) {
            children.entry(ppid).or_default().push((pid, start, state));
        }
    }
    let mut out = Vec::new();
    let mut queue = vec![root];
    let mut seen = HashSet::from([root]);
    while let Some(parent) = queue.pop() {
        for &(pid, start, state) in children.get(&parent).into_iter().flatten() {
            if !seen.insert(pid) {
                continue;
            }
            queue.push(pid);
            // Zombies count: a thread-group leader that called
            // pthread_exit shows `Z` while its other threads run (and hold
            // the pipes). Signalling a true zombie is harmless, and the
            // keeper reaps those at once.
            if state != b'X' {
                out.push(Proc { pid, start });
            }
        }
    }
    out
}

/// Signals `p` if it is still the process that was seen (same start time),
/// through a pidfd where the kernel has them so that a recycled pid is
/// never hit.
fn signal(p: &Proc, sig: i32) {
    let Some(pidfd) = pidfd_open(p.pid) else {
        if stat(p.pid).is_some_and(|(_, start, _)| start == p.start) {
            // SAFETY: kill takes integer arguments; the pid was checked
            // just above (a small window remains without pidfds).
            unsafe { libc::kill(p.pid, sig) };
        }
        return;
    };
    // The pidfd pins the process: if it is the one seen now, it is the one
    // signalled.
    if stat(p.pid).is_some_and(|(_, start, _)| start == p.start) {
        // SAFETY: `pidfd` is ours; a NULL siginfo and flags 0 are allowed.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_fd().as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_uint,
            )
        };
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

    #[test]
    fn ms_until_rounds_up() {
        let now = Instant::now();
        assert_eq!(ms_until(now + Duration::from_micros(1), now), 1);
        assert_eq!(ms_until(now, now + Duration::from_secs(1)), 0);
    }

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
