//! The shell executor as a policy grants it (SPEC §7): the facade's half.
//!
//! [`Executor::from_policy`] turns a policy's `[exec]`, roots, `net.allow`
//! ports and budgets into a confined [`LocalShellExecutor`]; [`Executor::exec`]
//! resolves the working directory beneath the roots by descriptor, counts
//! the budget, and runs the command. Refusals before anything runs are
//! errors (`E_DENIED`, `E_PATH_*`, `E_CONFINE_UNAVAILABLE`); a command that
//! ran, timed out, was aborted or could not start is a result.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sandgate_codes::ErrorCode;
use sandgate_policy::{Confine, Policy};
use sandgate_rootfs::Root;
use sandgate_shellexec::confine::{ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{ExecConfig, ExecOptions, LocalShellExecutor, ShellExecutor};

pub use sandgate_shellexec::confine::ConfinementReport;
pub use sandgate_shellexec::exec::{AbortSignal, ExecResult};

use crate::error::Error;
use crate::relpath::RelPath;

/// How many processes a confined command's user may have (RLIMIT_NPROC).
/// The kernel counts every process of the real user, so this is generous;
/// it stops fork bombs, not ordinary builds.
pub const MAX_PROCESSES: u64 = 4096;

/// The executor a policy grants.
pub struct Executor {
    inner: LocalShellExecutor,
    enabled: bool,
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

fn exec_error(e: sandgate_shellexec::exec::ExecError) -> Error {
    Error::new(e.code(), e.to_string()).with_errno(e.errno())
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
        Ok(Executor {
            inner: LocalShellExecutor::new(config),
            enabled: exec.enabled,
            cwd_root,
            max_timeout: Duration::from_millis(exec.timeout_ms),
            exec_ops: policy.budgets().exec_ops.map(AtomicU64::new),
        })
    }

    /// Whether the policy enables the shell.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Creates the private TMPDIR and prepares confinement; with `confine =
    /// "required"` on a kernel that lacks a part, `E_CONFINE_UNAVAILABLE`.
    pub fn start(&self) -> Result<(), Error> {
        if !self.enabled {
            return Ok(());
        }
        self.inner.start().map_err(exec_error)
    }

    /// Runs `command` with `shell -c`, in `cwd` (a name beneath the write
    /// root, or the first read root; default: that root itself), for at most
    /// `timeout` (never more than the policy's `timeout_ms`).
    pub fn exec(
        &self,
        command: &str,
        cwd: Option<&str>,
        timeout: Option<Duration>,
        abort: Option<AbortSignal>,
    ) -> Result<ExecResult, Error> {
        if !self.enabled {
            return Err(Error::denied(
                "exec is not enabled by the policy ([exec] enabled = false)",
            ));
        }
        if command.contains('\0') {
            return Err(Error::request("the command contains a NUL byte"));
        }
        if timeout == Some(Duration::ZERO) {
            return Err(Error::request("timeout_ms must be at least 1"));
        }
        // Started on first use (starting again does nothing), so that a
        // kernel lacking a required part answers E_CONFINE_UNAVAILABLE for
        // each request and runs nothing.
        self.inner.start().map_err(exec_error)?;
        if let Some(left) = &self.exec_ops {
            left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .map_err(|_| Error::denied("the exec_ops budget is spent"))?;
        }
        let cwd = match (&self.cwd_root, cwd) {
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
        self.inner
            .exec(
                command,
                ExecOptions {
                    cwd,
                    timeout,
                    abort,
                },
            )
            .map_err(|e| {
                if e.code() == ErrorCode::NotStarted {
                    Error::new(ErrorCode::NotStarted, "the executor was not started")
                } else {
                    exec_error(e)
                }
            })
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
