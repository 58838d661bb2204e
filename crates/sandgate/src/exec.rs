//! The shell executor as a policy grants it (docs/reference/executor.md): the facade's half.
//!
//! [`Executor::from_policy`] turns a policy's `[exec]`, roots, `net.allow`
//! ports and budgets into a confined [`LocalShellExecutor`]; [`Executor::exec`]
//! resolves the working directory beneath the roots by descriptor, counts
//! the budget, and runs the command. Refusals before anything runs are
//! errors (`E_DENIED`, `E_PATH_*`, `E_CONFINE_UNAVAILABLE`); a command that
//! ran, timed out, was aborted or could not start is a result.
//!
//! A `git status|diff|log` request under `process_allow` is confined git
//! ([`sandgate_shellexec::git`]): vetted and planned, then run from its
//! argv (no shell) under a Landlock ruleset of its own that reads the root
//! and writes nothing, never the shell's, whose write root and ports a
//! driver the vetting missed could otherwise use.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use sandgate_codes::ErrorCode;
use sandgate_policy::{Confine, Policy};
use sandgate_rootfs::Root;
use sandgate_shellexec::confine::{self, ConfineMode, ConfineSpec, Prepared};
use sandgate_shellexec::exec::{ExecConfig, ExecOptions, LocalShellExecutor, ShellExecutor};
use sandgate_shellexec::git::{self, GitSubcommand};

pub use sandgate_shellexec::confine::ConfinementReport;
pub use sandgate_shellexec::exec::{AbortSignal, ExecResult};

use crate::error::Error;
use crate::relpath::RelPath;

/// How many processes a confined command's user may have (RLIMIT_NPROC).
/// The kernel counts every process of the real user, so this is generous;
/// it stops fork bombs, not ordinary builds.
pub const MAX_PROCESSES: u64 = 4096;

/// Which grant admits a command ([`Executor::explain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecGrant {
    /// `exec.enabled = true`: the command runs through the shell.
    Shell,
    /// A `process_allow` entry (`"git:status"`, …): the command runs as
    /// confined git.
    ConfinedGit(&'static str),
}

/// A command admitted to run, and the grant that admits it.
struct Admitted {
    run: Run,
    grant: ExecGrant,
}

/// How an admitted command runs.
enum Run {
    /// `shell -c command`.
    Shell(String),
    /// Confined git, from these words (already checked against the schema).
    Git(Vec<String>),
}

/// The executor a policy grants.
pub struct Executor {
    inner: LocalShellExecutor,
    /// `[exec] enabled`: any command through the shell.
    enabled: bool,
    /// `process_allow`: confined git subcommands, with or without the shell.
    git: Vec<GitSubcommand>,
    /// The directory git runs in (the write root, else the first read root).
    git_root: Option<std::path::PathBuf>,
    /// How much of git's own ruleset is demanded: `required` when the
    /// policy requires confinement, else best effort (never off: the ruleset
    /// costs nothing and git needs nothing it takes away).
    git_mode: ConfineMode,
    /// Git's own ruleset (read the root, write nothing, no TCP), prepared
    /// on first use.
    git_confine: Mutex<Option<Prepared>>,
    /// Where `cwd` is resolved: the write root, else the first read root.
    cwd_root: Option<Root>,
    max_timeout: Duration,
    exec_ops: Option<AtomicU64>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

/// The executor's error, or `E_NOT_STARTED` for an executor that was
/// disposed meanwhile.
fn run_error(e: sandgate_shellexec::exec::ExecError) -> Error {
    if e.code() == ErrorCode::NotStarted {
        Error::new(ErrorCode::NotStarted, "the executor was not started")
    } else {
        Error::from(e)
    }
}

impl Executor {
    /// The executor `policy` grants (not started). With `exec.enabled =
    /// false` it exists but refuses every command with `E_DENIED`.
    pub fn from_policy(policy: &Policy) -> Result<Executor, Error> {
        let exec = policy.exec();
        let confine_mode = match exec.confine {
            Confine::Off => ConfineMode::Off,
            Confine::BestEffort => ConfineMode::BestEffort,
            Confine::Required => ConfineMode::Required,
        };
        let mut read_dirs = policy.read_roots().to_vec();
        let write_dirs: Vec<_> = policy
            .write_root()
            .map(|w| w.to_path_buf())
            .into_iter()
            .collect();
        read_dirs.retain(|d| !write_dirs.contains(d));
        let mut connect_ports: Vec<u16> =
            policy.net_allow().iter().filter_map(|e| e.port()).collect();
        connect_ports.sort_unstable();
        connect_ports.dedup();
        let config = ExecConfig {
            shell: exec.shell.clone().into(),
            default_timeout: Duration::from_millis(exec.timeout_ms),
            max_output_bytes: usize::try_from(exec.max_output_bytes).unwrap_or(usize::MAX),
            env_inherit: exec.env_inherit.clone(),
            confine_mode,
            confine: ConfineSpec {
                read_dirs,
                write_dirs,
                connect_ports,
                max_file_size: Some(policy.limits().max_write_bytes),
                max_processes: Some(MAX_PROCESSES),
                udp: !policy.net_allow().is_empty(),
            },
            ..ExecConfig::default()
        };
        let cwd_dir = policy
            .write_root()
            .or_else(|| policy.read_roots().first().map(|p| p.as_path()));
        let cwd_root = cwd_dir
            .map(Root::open)
            .transpose()
            .map_err(|e| Error::from(e).with_key("fs.write_root"))?;
        let git = exec
            .process_allow
            .iter()
            .filter_map(|e| GitSubcommand::from_allow_entry(e))
            .collect();
        Ok(Executor {
            inner: LocalShellExecutor::new(config),
            enabled: exec.enabled,
            git,
            git_root: cwd_dir.map(|p| p.to_path_buf()),
            git_mode: match confine_mode {
                ConfineMode::Required => ConfineMode::Required,
                ConfineMode::Off | ConfineMode::BestEffort => ConfineMode::BestEffort,
            },
            git_confine: Mutex::new(None),
            cwd_root,
            max_timeout: Duration::from_millis(exec.timeout_ms),
            exec_ops: policy.budgets().exec_ops.map(AtomicU64::new),
        })
    }

    /// Whether the policy enables the shell.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether the policy grants anything to run: the shell or confined git.
    pub fn runs_anything(&self) -> bool {
        self.enabled || !self.git.is_empty()
    }

    /// Whether `command` would be run, and how, without running it: the
    /// same decision [`exec`](Self::exec) takes before anything starts
    /// (`E_DENIED` when neither the shell nor a matching confined-git
    /// grant admits it). Budgets and the kernel's confinement are not
    /// consulted.
    pub fn explain(&self, command: &str) -> Result<ExecGrant, Error> {
        self.admit(command).map(|a| a.grant)
    }

    /// The decision [`exec`](Self::exec) and [`explain`](Self::explain)
    /// share: which grant admits `command`, and the command line to run.
    fn admit(&self, command: &str) -> Result<Admitted, Error> {
        // A git command under `process_allow` runs as confined git: its argv
        // is rebuilt from the subcommand's schema and git runs hardened,
        // whether or not the shell itself is enabled.
        let looks_like_git = command.split_whitespace().next() == Some("git");
        let git_words = if looks_like_git && !self.git.is_empty() {
            match git::split_words(command) {
                Ok(words) => Some(words),
                // With the shell granted, shell syntax is the shell's business.
                Err(_) if self.enabled => None,
                Err(e) => return Err(Error::from(e)),
            }
        } else {
            None
        };
        let admitted = match (&git_words, self.enabled) {
            (Some(words), _) => {
                // The same planning exec does: a refused flag or pathspec
                // is refused here too.
                self.git_plan(words)?;
                let entry = words
                    .get(1)
                    .and_then(|sub| {
                        self.git
                            .iter()
                            .find(|g| g.allow_entry().strip_prefix("git:") == Some(sub.as_str()))
                    })
                    .map_or("git", |g| g.allow_entry());
                Admitted {
                    run: Run::Git(words.clone()),
                    grant: ExecGrant::ConfinedGit(entry),
                }
            }
            (None, true) => {
                if command.contains('\0') {
                    return Err(Error::request("the command contains a NUL byte"));
                }
                Admitted {
                    run: Run::Shell(command.to_owned()),
                    grant: ExecGrant::Shell,
                }
            }
            (None, false) if self.git.is_empty() => {
                return Err(Error::denied(
                    "exec is not enabled by the policy ([exec] enabled = false)",
                ))
            }
            (None, false) => {
                return Err(Error::denied(format!(
                    "only confined git is granted (process_allow: {}); the shell is not enabled",
                    self.git
                        .iter()
                        .map(|g| g.allow_entry())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        };
        Ok(admitted)
    }

    /// Creates the private TMPDIR and prepares confinement; with `confine =
    /// "required"` on a kernel that lacks a part, `E_CONFINE_UNAVAILABLE`.
    pub fn start(&self) -> Result<(), Error> {
        if !self.runs_anything() {
            return Ok(());
        }
        self.inner.start().map_err(Error::from)
    }

    /// Runs `command` with `shell -c`, in `cwd` (a name beneath the write
    /// root, or the first read root; default: that root itself), for at most
    /// `timeout` (never more than the policy's `timeout_ms`). A confined git
    /// request runs git itself in `cwd`, on the repository at the root.
    pub fn exec(
        &self,
        command: &str,
        cwd: Option<&str>,
        timeout: Option<Duration>,
        abort: Option<AbortSignal>,
    ) -> Result<ExecResult, Error> {
        let command = match self.admit(command)?.run {
            Run::Git(words) => return self.exec_git(&words, cwd, timeout, abort),
            Run::Shell(command) => command,
        };
        let opts = self.call_options(cwd, timeout, abort)?;
        self.inner.exec(&command, opts).map_err(run_error)
    }

    /// Runs a program from its argv (`argv[0]` is the program, searched in
    /// the child's `PATH` when it names no directory), without a shell, under
    /// the same environment plan, confinement, limits and budget as
    /// [`Executor::exec`]. The words reach the program byte for byte.
    ///
    /// # Errors
    ///
    /// `E_DENIED` when the policy does not enable the shell (a program can
    /// do what a shell can) or the budget is spent; `E_REQUEST` for an
    /// empty argv or a NUL byte; otherwise as [`Executor::exec`].
    pub fn exec_argv(
        &self,
        argv: &[std::ffi::OsString],
        cwd: Option<&str>,
        timeout: Option<Duration>,
        abort: Option<AbortSignal>,
    ) -> Result<ExecResult, Error> {
        if !self.enabled {
            return Err(Error::denied(
                "exec is not enabled by the policy ([exec] enabled = false)",
            ));
        }
        let Some((program, args)) = argv.split_first() else {
            return Err(Error::request("the program's argv is empty"));
        };
        let opts = self.call_options(cwd, timeout, abort)?;
        self.inner
            .exec_argv(std::path::Path::new(program), args, opts)
            .map_err(run_error)
    }

    /// Checks the timeout, starts the executor, spends one `exec_ops` and
    /// resolves `cwd` beneath the root by descriptor.
    fn call_options(
        &self,
        cwd: Option<&str>,
        timeout: Option<Duration>,
        abort: Option<AbortSignal>,
    ) -> Result<ExecOptions, Error> {
        if timeout == Some(Duration::ZERO) {
            return Err(Error::request("timeout_ms must be at least 1"));
        }
        // Started on first use (starting again does nothing), so that a
        // kernel lacking a required part answers E_CONFINE_UNAVAILABLE for
        // each request and runs nothing.
        self.inner.start().map_err(Error::from)?;
        if let Some(left) = &self.exec_ops {
            left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .map_err(|_| Error::denied("the exec_ops budget is spent"))?;
        }
        let cwd: Option<OwnedFd> = match (&self.cwd_root, cwd) {
            (None, _) => None,
            (Some(root), None) => Some(root.try_clone().map_err(Error::from)?.into_fd()),
            (Some(root), Some(name)) => {
                let rel = RelPath::parse(name)?;
                let dir = root
                    .open_dir(&rel)
                    .map_err(|e| Error::from(e).with_path(rel.as_str()))?;
                Some(dir.into_fd())
            }
        };
        let timeout = Some(timeout.map_or(self.max_timeout, |t| t.min(self.max_timeout)));
        Ok(ExecOptions {
            cwd,
            timeout,
            abort,
        })
    }

    /// The hardened git invocation `words` plan to (refused as exec
    /// would refuse it).
    fn git_plan(&self, words: &[String]) -> Result<git::GitInvocation, Error> {
        let root = self
            .git_root
            .as_deref()
            .ok_or_else(|| Error::denied("confined git needs a root to run in"))?;
        git::plan(words, &self.git, root).map_err(Error::from)
    }

    /// Runs the hardened git invocation `words` plans, from its argv (no
    /// shell), under git's own read-only ruleset rather than the shell's.
    fn exec_git(
        &self,
        words: &[String],
        cwd: Option<&str>,
        timeout: Option<Duration>,
        abort: Option<AbortSignal>,
    ) -> Result<ExecResult, Error> {
        let inv = self.git_plan(words)?;
        let opts = self.call_options(cwd, timeout, abort)?;
        let prepared = self.git_prepared(&inv)?;
        let mut result = self
            .inner
            .exec_program(&inv.program, &inv.args, &inv.env, &prepared, opts)
            .map_err(run_error)?;
        result.confined.notes.insert(
            0,
            "confined git runs under a ruleset of its own: it may read the root and the \
             system directories, write no file, and connect to or bind no TCP port"
                .to_owned(),
        );
        Ok(result)
    }

    /// Git's ruleset, prepared once (the root does not change).
    fn git_prepared(&self, inv: &git::GitInvocation) -> Result<Prepared, Error> {
        let mut slot = self.git_confine.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(prepared) = &*slot {
            return Ok(prepared.clone());
        }
        let prepared = confine::prepare(&inv.confine_spec(), self.git_mode).map_err(Error::from)?;
        *slot = Some(prepared.clone());
        Ok(prepared)
    }

    /// Kills anything still running and removes the private TMPDIR.
    pub fn dispose(&self) {
        let _ = self.inner.dispose();
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.dispose();
    }
}
