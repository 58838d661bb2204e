//! The shell executor as a policy grants it (docs/reference/executor.md): the facade's half.
//!
//! [`Executor::from_policy`] turns a policy's `[exec]`, roots, `net.allow`
//! ports and budgets into a confined [`LocalShellExecutor`]; [`Executor::exec`]
//! resolves the working directory beneath the roots by descriptor, counts
//! the budget, and runs the command. Refusals before anything runs are
//! errors (`E_DENIED`, `E_PATH_*`, `E_CONFINE_UNAVAILABLE`); a command that
//! ran, timed out, was aborted or could not start is a result.
//!
//! Where `net.allow` grants anything and commands run in namespaces of
//! their own, starting the executor also starts its egress proxy
//! ([`sandgate_proxy`]) on listeners made inside the command's network
//! namespace, and sets the proxy variables for every command; the proxy
//! stops at dispose. Without namespaces the grants are Landlock port
//! rules on the floor.
//!
//! A `git status|diff|log` request under `process_allow` is confined git
//! ([`sandgate_shellexec::git`]): vetted and planned, then run from its
//! argv (no shell) under a Landlock ruleset of its own that reads the root
//! and writes nothing, never the shell's, whose write root and ports a
//! driver the vetting missed could otherwise use.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandgate_codes::ErrorCode;
use sandgate_policy::{Confine, Policy, PolicyError, PolicyOptions, SecurityMode};
use sandgate_protect::{Action, Detection, Protector};
use sandgate_rootfs::Root;
use sandgate_shellexec::confine::{self, ConfineMode, ConfineSpec, Prepared};
use sandgate_shellexec::exec::{
    ExecConfig, ExecOptions as RunOptions, LocalShellExecutor, ShellExecutor,
};
use sandgate_shellexec::git::{self, GitSubcommand};
use sandgate_shellexec::limits::ResourceLimits;
use sandgate_shellexec::protected::{Checkpoint, EntryKind, ProtectedEntry, ProtectedPaths};

/// The resolver trait the egress proxy asks; the same trait as
/// [`crate::fetch::Resolve`], so one resolver serves the shell's proxy and
/// the confined fetch.
pub use sandgate_proxy::Resolve as NetResolve;
use sandgate_proxy::SystemResolver;
pub use sandgate_proxy::{
    AuditRecord as NetAuditRecord, Protocol as NetProtocol, RequestRecord as NetRequestRecord,
    Verdict as NetVerdict,
};

pub use sandgate_shellexec::confine::ConfinementReport;
pub use sandgate_shellexec::exec::{outlive_file_size_limit, AbortSignal, ExecResult};
pub use sandgate_shellexec::limits::{Limit, LimitsReport, Mechanism};
pub use sandgate_shellexec::protected::{ProtectedAction, ProtectedChange, ProtectedDetection};

use crate::audit::{AuditEvent, AuditSink};
use crate::error::Error;
use crate::hostpath::{self, GrantedDir};
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
    /// Where `cwd` is resolved: the write root, else the first read root.
    cwd_root: Option<Root>,
    /// That root's host paths, for an absolute `cwd` inside it.
    cwd_dirs: Vec<GrantedDir>,
    /// The policy's other granted directories (the read roots, as named
    /// and resolved): an absolute `cwd` in one of them is granted but no
    /// place for a command, refused `E_DENIED` as MCP refuses it, not
    /// `E_PATH_ESCAPE` (outside every root).
    other_dirs: Vec<GrantedDir>,
    max_timeout: Duration,
    exec_ops: Option<AtomicU64>,
    /// The egress proxy's state when `net.allow` grants anything.
    net: Option<NetState>,
    /// Where each call is reported ([`Executor::set_audit_sink`]), shared
    /// with the egress proxy, which reports each connection there.
    audit: Arc<Mutex<Option<AuditSink>>>,
    /// The protected paths' hook and the directories it keeps in existence
    /// once commands run in namespaces ([`placeholder_dirs`]).
    placeholders: Option<(Arc<Protection>, Vec<PathBuf>)>,
}

/// The proxy a command in namespaces of its own reaches the network
/// through, started with the executor.
struct NetState {
    rules: sandgate_netguard::Rules,
    /// `[[net.credentials]]`: set by the proxy, read at start.
    credentials: Vec<sandgate_policy::NetCredential>,
    /// `[[net.rules]]`.
    request_rules: Vec<sandgate_policy::NetRequestRule>,
    /// The policy's roots (canonical): a credential's file may not lie
    /// inside one, where commands and file tools read.
    roots: Vec<std::path::PathBuf>,
    /// The roots an intercepted host's certificate must chain to, as PEM
    /// (`None`: the system's).
    upstream_roots: Mutex<Option<String>>,
    resolver: Mutex<Arc<dyn NetResolve>>,
    /// The running proxy and what the commands are told about it.
    served: Mutex<Option<Served>>,
    /// The report gates of proxies a dispose took out of `served` and is
    /// stopping: another dispose at once finds `served` empty, and waits
    /// for their reports too before it returns.
    stopping: Mutex<Vec<Arc<ReportGate>>>,
}

struct Served {
    proxy: sandgate_proxy::Proxy,
    /// Whether the proxy's connections may still report to the audit
    /// sink, and the reports under way: closed by [`Executor::dispose`]
    /// once the proxy stopped, so that none reaches the sink once dispose
    /// (or drop) has returned.
    reporting: Arc<ReportGate>,
    /// The proxy's address inside the namespace (IPv4 loopback).
    address: std::net::SocketAddr,
    /// What each result's notes say about the network.
    notes: Vec<String>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

/// The egress proxy's report of each connection to the executor's audit
/// sink (the one set when the connection ends): `op` `connect`, `path`
/// the host and port the command asked for (`host:port`, an IPv6 literal
/// in brackets; empty when it never said), `size` the bytes relayed both
/// ways, `outcome` `OK` when the target was admitted and connected to,
/// else `E_NET_DENIED`. Never a path, header or byte of the traffic, nor
/// the proxy's reason.
/// Nothing is reported once `reporting` is closed, and neither `dispose`
/// nor `set_audit_sink` returns while a report is under way on another
/// thread, so the caller may free the callback it replaced or the
/// executor's (a C caller's user data) at once. No lock is held while the
/// sink runs: it may call back into the executor, `dispose` and
/// `set_audit_sink` included (those then do not wait for the report they
/// are called from).
fn connection_audit(
    audit: Arc<Mutex<Option<AuditSink>>>,
    reporting: Arc<ReportGate>,
) -> sandgate_proxy::RecordSink {
    Arc::new(move |r: &NetAuditRecord| {
        let Some(_report) = reporting.enter() else {
            return;
        };
        let Some(sink) = audit.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
            return;
        };
        let path = match (r.host.as_str(), r.port) {
            ("", 0) => String::new(),
            // A malformed target the proxy refused (`evil.example:abc`,
            // recorded whole with port 0) as it was given, never
            // bracketed as if it were an IPv6 address.
            (host, 0) if host.contains(':') && host.parse::<std::net::Ipv6Addr>().is_err() => {
                host.to_owned()
            }
            (host, port) if host.contains(':') && !host.starts_with('[') => {
                format!("[{host}]:{port}")
            }
            (host, port) => format!("{host}:{port}"),
        };
        sink(&AuditEvent {
            op: "connect",
            path,
            // The bytes relayed, whenever any were: a connection refused
            // after some moved (an intercepted one ended on a refused
            // request, an opaque one whose first flight was refused after
            // the server spoke) is not recorded as if none had.
            size: (r.allowed || r.bytes_up + r.bytes_down > 0).then(|| r.bytes_up + r.bytes_down),
            time: std::time::SystemTime::now(),
            outcome: if r.allowed {
                ErrorCode::Ok
            } else {
                ErrorCode::NetDenied
            },
            exit_code: None,
            limit: None,
        });
    })
}

/// The reports of one proxy's connections to the audit sink: whether they
/// may still be made, and how many are under way, so that `dispose` and
/// `set_audit_sink` can wait for them without a lock held across the sink.
#[derive(Default)]
struct ReportGate {
    /// Closed, and the reports under way.
    state: Mutex<(bool, usize)>,
    ended: std::sync::Condvar,
}

thread_local! {
    /// The gates (by address) this thread is making a report through: a
    /// sink that calls back in is not waited for by its own thread.
    static REPORTING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A report under way ([`ReportGate::enter`]); ended when dropped.
struct Report<'a>(&'a ReportGate);

impl ReportGate {
    fn key(&self) -> usize {
        self as *const ReportGate as usize
    }

    /// Counts a report in, unless the gate is closed.
    fn enter(&self) -> Option<Report<'_>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.0 {
            return None;
        }
        state.1 += 1;
        REPORTING.with(|r| r.borrow_mut().push(self.key()));
        Some(Report(self))
    }

    /// Waits until no report is under way but this thread's own.
    fn wait_idle(&self) {
        let own = REPORTING.with(|r| r.borrow().iter().filter(|k| **k == self.key()).count());
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while state.1 > own {
            state = self.ended.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Lets no more reports in, and waits for those under way.
    fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0 = true;
        self.wait_idle();
    }
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        let key = self.0.key();
        REPORTING.with(|r| {
            let mut r = r.borrow_mut();
            if let Some(i) = r.iter().rposition(|k| *k == key) {
                r.remove(i);
            }
        });
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        state.1 -= 1;
        self.0.ended.notify_all();
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

/// The options of one [`Executor::exec`] call. `Default` is the root
/// itself, the policy's `timeout_ms`, and no abort signal.
///
/// ```no_run
/// # use sandgate::{ExecOptions, Executor};
/// # let ex: Executor = todo!();
/// let r = ex.exec("cargo test", ExecOptions { cwd: Some("crates/core".into()), ..Default::default() })?;
/// # Ok::<(), sandgate::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ExecOptions {
    /// The working directory: a name beneath the root commands run in (the
    /// write root, else the first read root), or an absolute host path
    /// inside that root, mapped to its name component by component; the
    /// directory is then opened beneath the root by descriptor, as any
    /// name is. `None`: the root itself.
    pub cwd: Option<String>,
    /// The call's timeout in milliseconds (at least 1). One longer than
    /// the policy's `exec.timeout_ms` runs under the policy's, and the
    /// result's `confined.notes` says so: the operator's limit holds, and
    /// the caller can see it did.
    pub timeout_ms: Option<u64>,
    /// Aborting it ends the call with exit code 130.
    pub abort: Option<AbortSignal>,
    /// Narrows this call to these directories, which the caller opened
    /// (`O_PATH` is enough; e.g. `Root::open_dir(name)?.into_fd()`): a
    /// second Landlock layer leaves the command, of the directories the
    /// policy grants, only what lies beneath one of them, with the rights
    /// the policy gave it there, plus the system directories and its
    /// private `TMPDIR`. It can only take rights away: a directory the
    /// policy does not grant gives nothing. `Some` of an empty list leaves
    /// the command no granted directory. The MCP server narrows its
    /// client's calls to the client's roots so. Refused with
    /// `E_CONFINE_UNAVAILABLE`, running nothing, where no Landlock layer
    /// is enforced.
    pub within: Option<std::sync::Arc<[OwnedFd]>>,
}

/// Builds an [`Executor`] from code, with the policy file's option names
/// and defaults ([`PolicyOptions`]): the options go through the same gate
/// rules as a file, so what a file may not grant, code may not either.
///
/// ```no_run
/// use sandgate::Executor;
/// let ex = Executor::builder()
///     .write_root("/srv/work")
///     .enabled(true)
///     .timeout_ms(10_000)
///     .build()?;
/// # Ok::<(), sandgate::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ExecutorBuilder {
    options: PolicyOptions,
    base_dir: Option<PathBuf>,
    floor_only: bool,
}

impl ExecutorBuilder {
    /// Everything at the policy file's defaults: nothing granted.
    pub fn new() -> ExecutorBuilder {
        ExecutorBuilder::default()
    }
    /// Starts from a whole set of options (the same a policy file holds).
    pub fn options(&mut self, options: PolicyOptions) -> &mut Self {
        self.options = options;
        self
    }
    /// Where relative roots resolve (default: the current directory).
    pub fn base_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.base_dir = Some(dir.into());
        self
    }
    /// `security_mode`.
    pub fn security_mode(&mut self, mode: SecurityMode) -> &mut Self {
        self.options.security_mode = Some(mode);
        self
    }
    /// Adds one of `fs.read_roots` (the command may read it).
    pub fn read_root(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.options.fs.read_roots.push(dir.into());
        self
    }
    /// `fs.write_root`: the command may write it, and runs in it.
    pub fn write_root(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.options.fs.write_root = Some(dir.into());
        self
    }
    /// Adds one of `fs.deny_write` (protected from the shell too).
    pub fn deny_write(&mut self, pattern: impl Into<String>) -> &mut Self {
        self.options.fs.deny_write.push(pattern.into());
        self
    }
    /// `exec.enabled`.
    pub fn enabled(&mut self, on: bool) -> &mut Self {
        self.options.exec.enabled = on;
        self
    }
    /// `exec.shell` (an absolute path).
    pub fn shell(&mut self, shell: impl Into<String>) -> &mut Self {
        self.options.exec.shell = Some(shell.into());
        self
    }
    /// `exec.timeout_ms`: the longest any call runs.
    pub fn timeout_ms(&mut self, ms: u64) -> &mut Self {
        self.options.exec.timeout_ms = Some(ms);
        self
    }
    /// `exec.max_output_bytes` (stdout and stderr together).
    pub fn max_output_bytes(&mut self, n: u64) -> &mut Self {
        self.options.exec.max_output_bytes = Some(n);
        self
    }
    /// Adds one of `exec.env_inherit`.
    pub fn env_inherit(&mut self, name: impl Into<String>) -> &mut Self {
        self.options.exec.env_inherit.push(name.into());
        self
    }
    /// `exec.confine`.
    pub fn confine(&mut self, mode: Confine) -> &mut Self {
        self.options.exec.confine = Some(mode);
        self
    }
    /// Adds one of `exec.process_allow`.
    pub fn process_allow(&mut self, entry: impl Into<String>) -> &mut Self {
        self.options.exec.process_allow.push(entry.into());
        self
    }
    /// Adds one of `net.allow`.
    pub fn net_allow(&mut self, entry: impl Into<String>) -> &mut Self {
        self.options.net.allow.push(entry.into());
        self
    }
    /// Adds one `[[net.credentials]]` entry.
    pub fn net_credential(&mut self, entry: sandgate_policy::CredentialOptions) -> &mut Self {
        self.options.net.credentials.push(entry);
        self
    }
    /// Adds one `[[net.rules]]` entry.
    pub fn net_rule(&mut self, entry: sandgate_policy::RequestRuleOptions) -> &mut Self {
        self.options.net.rules.push(entry);
        self
    }
    /// `net.allow_http`.
    pub fn allow_http(&mut self, on: bool) -> &mut Self {
        self.options.net.allow_http = on;
        self
    }
    /// `budgets.exec_ops` (`None`: unlimited).
    pub fn exec_ops(&mut self, budget: Option<u64>) -> &mut Self {
        self.options.budgets.exec_ops = budget;
        self
    }
    /// `false` keeps every command on the floor — Landlock, seccomp and
    /// the after-the-fact check of protected paths, without namespaces of
    /// its own — as on a host that refuses namespaces. Default `true`:
    /// namespaces where the host allows them.
    pub fn namespaces(&mut self, on: bool) -> &mut Self {
        self.floor_only = !on;
        self
    }
    /// Resolves the options as a policy and builds its executor (not
    /// started). A setting the gate refuses answers `E_POLICY` naming its
    /// key.
    pub fn build(&self) -> Result<Executor, Error> {
        let base = match &self.base_dir {
            Some(d) => d.clone(),
            None => std::env::current_dir().map_err(|e| {
                Error::new(
                    ErrorCode::Io,
                    format!("cannot find the current directory: {e}"),
                )
                .with_errno(e.raw_os_error())
            })?,
        };
        let policy = Policy::from_options(&self.options, &base).map_err(policy_error)?;
        let mut ex = Executor::with_policy(&policy, !self.floor_only)?;
        // The roots as the caller spelled them, so an absolute cwd written
        // that way maps too (the policy keeps them resolved).
        let cwd_dir = self
            .options
            .fs
            .write_root
            .as_ref()
            .or(self.options.fs.read_roots.first());
        if let (Some(dir), Some(first)) = (cwd_dir, ex.cwd_dirs.first().cloned()) {
            let spelled = std::path::absolute(base.join(dir)).unwrap_or_else(|_| base.join(dir));
            if spelled != first.spelled {
                ex.cwd_dirs.push(GrantedDir { spelled, ..first });
            }
        }
        Ok(ex)
    }
}

/// A refused policy as the facade's error: `E_POLICY`, the first
/// problem's key, and every problem in the message.
fn policy_error(e: PolicyError) -> Error {
    let err = Error::new(ErrorCode::Policy, e.to_string());
    match e.key() {
        Some(key) => err.with_key(key.to_owned()),
        None => err,
    }
}

impl Executor {
    /// An [`ExecutorBuilder`]: an executor from options rather than a
    /// policy file.
    pub fn builder() -> ExecutorBuilder {
        ExecutorBuilder::new()
    }

    /// The executor `options` grant, as if they were a policy file in
    /// `base_dir` ([`Policy::from_options`]).
    pub fn from_options(options: &PolicyOptions, base_dir: &Path) -> Result<Executor, Error> {
        ExecutorBuilder {
            options: options.clone(),
            base_dir: Some(base_dir.to_path_buf()),
            floor_only: false,
        }
        .build()
    }

    /// The executor `policy` grants (not started). With `exec.enabled =
    /// false` it exists but refuses every command with `E_DENIED`.
    pub fn from_policy(policy: &Policy) -> Result<Executor, Error> {
        Executor::with_policy(policy, true)
    }

    /// [`from_policy`](Self::from_policy), with or without namespaces.
    fn with_policy(policy: &Policy, namespaces: bool) -> Result<Executor, Error> {
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
        // A read root at or beneath the write root is granted whole by the
        // write root already; listed again it would be bound read-only over
        // it in the view, taking away writes the file tools (and the floor)
        // allow there. Both are canonical, so the test is by components.
        read_dirs.retain(|d| !write_dirs.iter().any(|w| d.starts_with(w)));
        let mut connect_ports: Vec<u16> =
            policy.net_allow().iter().filter_map(|e| e.port()).collect();
        connect_ports.sort_unstable();
        connect_ports.dedup();
        // `required` demands only the limits the file states itself.
        let required = if confine_mode == ConfineMode::Required {
            [
                (Limit::Memory, exec.stated_limits.memory),
                (Limit::Tasks, exec.stated_limits.tasks),
                (Limit::Cpu, exec.max_cpu_ms.is_some()),
            ]
            .into_iter()
            .filter_map(|(limit, stated)| stated.then_some(limit))
            .collect()
        } else {
            Vec::new()
        };
        let protection = if exec.enabled {
            protection(policy)?
        } else {
            None
        };
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
                network_in_namespace: !policy.net_allow().is_empty(),
                ..ConfineSpec::default()
            },
            limits: ResourceLimits {
                max_memory_bytes: Some(exec.max_memory_bytes),
                max_tasks: Some(exec.max_tasks),
                max_cpu_ms: exec.max_cpu_ms,
                required,
                ..ResourceLimits::default()
            },
            namespaces,
            protected: protection.clone().map(|p| p as Arc<dyn ProtectedPaths>),
            ..ExecConfig::default()
        };
        let cwd_dir = policy
            .write_root()
            .or_else(|| policy.read_roots().first().map(|p| p.as_path()));
        // The same root as the policy named it (symlinks kept), so a cwd
        // spelled through a symlinked root maps too.
        let cwd_named = match policy.write_root() {
            Some(_) => policy.write_root_as_named(),
            None => policy.read_roots_as_named().first().map(|p| p.as_path()),
        };
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
            cwd_root,
            cwd_dirs: cwd_dir
                .map(|d| GrantedDir {
                    spelled: cwd_named.unwrap_or(d).to_path_buf(),
                    resolved: d.to_path_buf(),
                    read_index: None,
                    is_write: true,
                })
                .into_iter()
                .collect(),
            other_dirs: policy
                .read_roots()
                .iter()
                .zip(policy.read_roots_as_named())
                .enumerate()
                .map(|(i, (resolved, named))| GrantedDir {
                    spelled: named.clone(),
                    resolved: resolved.clone(),
                    read_index: Some(i),
                    is_write: false,
                })
                .collect(),
            max_timeout: Duration::from_millis(exec.timeout_ms),
            exec_ops: policy.budgets().exec_ops.map(AtomicU64::new),
            net: (!policy.net_allow().is_empty()).then(|| NetState {
                rules: policy.net_rules().clone(),
                credentials: policy.net_credentials().to_vec(),
                request_rules: policy.net_request_rules().to_vec(),
                roots: policy
                    .read_roots()
                    .iter()
                    .map(|p| p.to_path_buf())
                    .chain(policy.write_root().map(|p| p.to_path_buf()))
                    .collect(),
                upstream_roots: Mutex::new(None),
                resolver: Mutex::new(Arc::new(SystemResolver)),
                served: Mutex::new(None),
                stopping: Mutex::new(Vec::new()),
            }),
            audit: Arc::new(Mutex::new(None)),
            placeholders: protection.map(|p| (p, placeholder_dirs(policy))),
        })
    }

    /// Replaces the resolver the egress proxy turns names into addresses
    /// with (the system's by default): for tests that count queries or
    /// answer differently each time, and for embedders with a resolver of
    /// their own. Takes effect at the next start; does nothing when the
    /// policy grants no network access.
    pub fn set_net_resolver(&self, resolver: Arc<dyn NetResolve>) {
        if let Some(net) = &self.net {
            *net.resolver.lock().unwrap_or_else(|e| e.into_inner()) = resolver;
        }
    }

    /// Replaces the roots the egress proxy verifies an intercepted host's
    /// certificate against (the system's by default) with the
    /// certificates of a PEM bundle: for tests whose upstreams use a test
    /// CA, and for embedders with a private CA. Takes effect at the next
    /// start; does nothing when the policy grants no network access.
    pub fn set_net_upstream_roots(&self, pem: impl Into<String>) {
        if let Some(net) = &self.net {
            *net.upstream_roots.lock().unwrap_or_else(|e| e.into_inner()) = Some(pem.into());
        }
    }

    /// What the egress proxy did with each request to a host it
    /// intercepts (`[[net.credentials]]`, `[[net.rules]]`), oldest first:
    /// host, method, path, the rule that decided and the verdict —
    /// never a credential's value.
    pub fn net_requests(&self) -> Vec<NetRequestRecord> {
        self.with_served(|s| s.proxy.requests()).unwrap_or_default()
    }

    /// What the egress proxy did with each connection the commands made
    /// (oldest first; the last 4,096 are kept). Empty when the policy
    /// grants no network access or commands run without namespaces (then
    /// the policy's ports are reached directly, on the floor).
    pub fn net_audit(&self) -> Vec<NetAuditRecord> {
        self.with_served(|s| s.proxy.audit()).unwrap_or_default()
    }

    /// The egress proxy's address inside the commands' network namespace,
    /// while it runs.
    pub fn proxy_address(&self) -> Option<std::net::SocketAddr> {
        self.with_served(|s| s.address)
    }

    /// `f` of the running proxy, if one runs.
    fn with_served<T>(&self, f: impl FnOnce(&Served) -> T) -> Option<T> {
        let net = self.net.as_ref()?;
        let served = net.served.lock().unwrap_or_else(|e| e.into_inner());
        served.as_ref().map(f)
    }

    /// Starts the shell executor and, where commands run in namespaces of
    /// their own and the policy grants network access, the egress proxy
    /// (once).
    fn start_all(&self) -> Result<(), Error> {
        self.inner.start().map_err(Error::from)?;
        // In the view protected directories are bound read-only, so one
        // that is missing is made (empty) to be bound too.
        if let Some((protection, dirs)) = &self.placeholders {
            if self.inner.in_namespaces() && !dirs.is_empty() {
                protection.0.set_placeholders(dirs.clone());
            }
        }
        let Some(net) = &self.net else {
            return Ok(());
        };
        let mut served = net.served.lock().unwrap_or_else(|e| e.into_inner());
        let intercepting = !net.credentials.is_empty() || !net.request_rules.is_empty();
        if served.is_some() {
            return Ok(());
        }
        if !self.inner.in_namespaces() {
            if intercepting {
                // Without the proxy, the command would reach those hosts
                // directly: no credential, and no rule enforced.
                let _ = self.inner.dispose();
                return Err(Error::new(
                    ErrorCode::ConfineUnavailable,
                    "net.credentials and net.rules need the egress proxy, which serves commands \
                     only where they run in namespaces of their own; they are unavailable here",
                )
                .with_key(if net.credentials.is_empty() {
                    "net.rules"
                } else {
                    "net.credentials"
                }));
            }
            return Ok(());
        }
        let intercept = if intercepting {
            match self.interception(net) {
                Ok(i) => Some(i),
                Err(e) => {
                    let _ = self.inner.dispose();
                    return Err(e);
                }
            }
        } else {
            None
        };
        // Forwarders first, at each literal grant's own address and port,
        // so the proxy's port (picked by the kernel) cannot take one.
        // (An unspecified or multicast literal is nothing to listen at, and
        // the rules refuse to dial it anyway.)
        let mut literals: Vec<std::net::SocketAddr> = Vec::new();
        for e in net.rules.allow() {
            if let (sandgate_netguard::NetHost::Ip(ip), Some(port)) = (e.host(), e.port()) {
                let addr = std::net::SocketAddr::new(*ip, port);
                if !ip.is_unspecified() && !ip.is_multicast() && !literals.contains(&addr) {
                    literals.push(addr);
                }
            }
        }
        let mut addrs = literals.clone();
        addrs.push("127.0.0.1:0".parse().expect("a literal address"));
        addrs.push("[::1]:0".parse().expect("a literal address"));
        let net_error = |what: String| Error::new(ErrorCode::Io, what);
        let Some(mut listeners) = self
            .inner
            .listen_in_namespace(&addrs)
            .map_err(Error::from)?
        else {
            return Ok(());
        };
        let v6 = listeners.pop().expect("one answer per address");
        let v4 = listeners.pop().expect("one answer per address");
        let v4 = v4.map_err(|e| {
            net_error(format!(
                "cannot listen for the egress proxy inside the command's network namespace: {e}"
            ))
        })?;
        let mut config = sandgate_proxy::ProxyConfig::new(net.rules.clone());
        config.resolver = Arc::clone(&net.resolver.lock().unwrap_or_else(|e| e.into_inner()));
        let reporting = Arc::new(ReportGate::default());
        config.on_record = Some(connection_audit(
            Arc::clone(&self.audit),
            Arc::clone(&reporting),
        ));
        let mut ca_vars = Vec::new();
        if let Some((intercept, bundle)) = intercept {
            for name in [
                "SSL_CERT_FILE",
                "REQUESTS_CA_BUNDLE",
                "NODE_EXTRA_CA_CERTS",
                "GIT_SSL_CAINFO",
                "CURL_CA_BUNDLE",
            ] {
                ca_vars.push((name.to_owned(), bundle.clone()));
            }
            config.intercept = Some(Arc::new(intercept));
        }
        let proxy = sandgate_proxy::Proxy::new(config);
        let fail = |proxy: &sandgate_proxy::Proxy, e: std::io::Error| {
            proxy.stop();
            net_error(format!("cannot start the egress proxy: {e}"))
        };
        let address = proxy.serve(v4).map_err(|e| fail(&proxy, e))?;
        let mut notes = vec![format!(
            "network: through sandgate's egress proxy at {address} inside the command's network \
             namespace (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY); every target is judged by net.allow"
        )];
        if let Ok(v6) = v6 {
            proxy.serve(v6).map_err(|e| fail(&proxy, e))?;
        }
        for (target, listener) in literals.iter().zip(listeners) {
            match listener {
                Ok(l) => {
                    proxy.forward(l, *target).map_err(|e| fail(&proxy, e))?;
                    notes.push(format!(
                        "network: {target} is forwarded for programs that ignore proxies"
                    ));
                }
                Err(e) => notes.push(format!(
                    "network: {target} is reachable through the proxy only (no forwarder inside \
                     the namespace: {e})"
                )),
            }
        }
        let http = format!("http://{address}");
        let socks = format!("socks5h://{address}");
        let no_proxy = "localhost,127.0.0.1,::1".to_owned();
        let mut vars = Vec::new();
        for (name, value) in [
            ("HTTP_PROXY", &http),
            ("HTTPS_PROXY", &http),
            ("ALL_PROXY", &socks),
            ("NO_PROXY", &no_proxy),
        ] {
            vars.push((name.to_owned(), value.clone()));
            vars.push((name.to_ascii_lowercase(), value.clone()));
        }
        vars.push(("NODE_USE_ENV_PROXY".to_owned(), "1".to_owned()));
        if !ca_vars.is_empty() {
            notes.push(
                "network: requests to the hosts of net.credentials and net.rules are \
                 intercepted (TLS ends at the proxy, whose CA the command trusts through \
                 SSL_CERT_FILE and its kin)"
                    .to_owned(),
            );
        }
        vars.extend(ca_vars);
        self.inner.set_child_env(vars);
        *served = Some(Served {
            proxy,
            reporting,
            address,
            notes,
        });
        Ok(())
    }

    /// The proxy's interception: each credential's value read from its
    /// source (never printed, added to the redacted values), a CA made in
    /// memory, and its bundle (the system roots and the CA) written in the
    /// executor's private temporary directory. Answers the interception
    /// and the bundle's path.
    fn interception(&self, net: &NetState) -> Result<(sandgate_proxy::Intercept, String), Error> {
        use sandgate_policy::{CredentialSource, RuleAction};
        use sandgate_proxy::{Injection, RequestMatch, RequestRule, Secret};
        let mut injections = Vec::new();
        let mut withheld = Vec::new();
        for (i, c) in net.credentials.iter().enumerate() {
            let key = format!("net.credentials[{i}]");
            let refuse = |why: String| {
                Error::new(
                    ErrorCode::Policy,
                    format!("{key}: cannot use the value from {}: {why}", c.source),
                )
                .with_key(key.clone())
            };
            let raw: Vec<u8> = match &c.source {
                // The executor hands these host variables to every command
                // (but the temporary directory's, which it sets itself; the
                // policy refuses those `exec.env_inherit` adds).
                CredentialSource::Env(name)
                    if sandgate_shellexec::env::BASE_ALLOWLIST.contains(&name.as_str())
                        && !["TMPDIR", "TMP", "TEMP"].contains(&name.as_str()) =>
                {
                    return Err(refuse(format!(
                        "`{name}` is passed to every command, which would hold the value; \
                         keep it in a variable commands do not receive"
                    )));
                }
                CredentialSource::Env(name) => match std::env::var_os(name) {
                    Some(v) => v.into_encoded_bytes(),
                    None => return Err(refuse("the variable is not set".into())),
                },
                CredentialSource::File(path) => {
                    let file = std::fs::File::open(path)
                        .map_err(|e| refuse(format!("cannot read the file: {e}")))?;
                    beyond_commands(&file, path, &net.roots).map_err(refuse)?;
                    let mut bytes = Vec::new();
                    let read = std::io::Read::read_to_end(
                        &mut std::io::Read::take(file, 65_537),
                        &mut bytes,
                    );
                    if let Err(e) = read {
                        return Err(refuse(format!("cannot read the file: {e}")));
                    }
                    if bytes.len() > 65_536 {
                        return Err(refuse("the file is over 64 KiB".into()));
                    }
                    if bytes.ends_with(b"\n") {
                        bytes.pop();
                        if bytes.ends_with(b"\r") {
                            bytes.pop();
                        }
                    }
                    bytes
                }
                _ => return Err(refuse("an unknown kind of source".into())),
            };
            // Output redaction passes values this short (they would match
            // ordinary text): a host that reflects the credential would
            // hand it to the command as it is.
            let min = sandgate_shellexec::redact::MIN_VALUE_LEN;
            if raw.len() < min {
                return Err(refuse(format!(
                    "the value is {} bytes long; a credential shorter than {min} bytes \
                     cannot be redacted from the commands' output",
                    raw.len()
                )));
            }
            // Servers drop blanks around a header's value (RFC 9110, 5.5):
            // a host that reflects it would show the value without them,
            // which is not the value redaction withholds.
            if raw.first().is_some_and(|&b| b == b' ' || b == b'\t')
                || raw.last().is_some_and(|&b| b == b' ' || b == b'\t')
            {
                return Err(refuse(
                    "the value begins or ends with a blank (a space or a tab), which servers \
                     drop from a header's value, so a host that reflects it would show the \
                     command a value redaction does not know; remove the blank"
                        .into(),
                ));
            }
            let header_value = c.header_value(&raw);
            let value = Secret::new(header_value.clone()).map_err(refuse)?;
            let name = match &c.source {
                CredentialSource::Env(name) => name.clone(),
                _ => key.clone(),
            };
            withheld.push((name.clone(), raw));
            // A host may reflect what follows the scheme word alone: for
            // `basic`, the base64 of `user:value`, which decodes at once.
            if let Some(i) = header_value.iter().position(|&b| b == b' ') {
                withheld.push((name.clone(), header_value[i + 1..].to_vec()));
            }
            withheld.push((name, header_value));
            injections.push(Injection {
                target: RequestMatch {
                    host: c.host.clone(),
                    port: c.port,
                    methods: c.methods.clone(),
                    path_prefixes: c.path_prefixes.clone(),
                },
                header: c.header.clone(),
                value,
                label: key,
            });
        }
        let rules = net
            .request_rules
            .iter()
            .enumerate()
            .map(|(i, r)| RequestRule {
                target: RequestMatch {
                    host: r.host.clone(),
                    port: r.port,
                    methods: r.methods.clone(),
                    path_prefixes: r.path_prefixes.clone(),
                },
                allow: r.action == RuleAction::Allow,
                label: format!("net.rules[{i}]"),
            })
            .collect::<Vec<_>>();
        let hosts: Vec<String> = injections
            .iter()
            .map(|i| i.target.host.clone())
            .chain(rules.iter().map(|r| r.target.host.clone()))
            .collect();
        let no_roots = |why: String| {
            Error::new(
                ErrorCode::Io,
                format!("cannot intercept the hosts of net.credentials and net.rules: {why}"),
            )
        };
        let (system, system_pem) = match sandgate_proxy::system_roots() {
            Ok((store, pem)) => (Some(store), pem),
            Err(_) => (None, String::new()),
        };
        let upstream = match &*net.upstream_roots.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(pem) => sandgate_proxy::roots_from_pem(pem),
            None => match system {
                Some(store) => store,
                None => {
                    return Err(no_roots(
                        sandgate_proxy::system_roots().err().unwrap_or_default(),
                    ))
                }
            },
        };
        let authority = sandgate_proxy::CertAuthority::generate(&hosts).map_err(no_roots)?;
        let Some(tmpdir) = self.inner.tmpdir() else {
            return Err(no_roots("the executor has no temporary directory".into()));
        };
        let bundle = tmpdir.join("sandgate-ca-bundle.pem");
        let mut text = system_pem;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(authority.certificate_pem());
        // A bundle past the file size limit (`ulimit -f`) would raise
        // `SIGXFSZ`, which ends the program embedding the library.
        sandgate_rootfs::within_file_size_limit(text.len() as u64)
            .and_then(|()| std::fs::write(&bundle, text))
            .map_err(|e| {
                no_roots(format!(
                    "cannot write the CA bundle {}: {e}",
                    bundle.display()
                ))
            })?;
        let Some(bundle) = bundle.to_str().map(str::to_owned) else {
            return Err(no_roots("the CA bundle's path is not UTF-8".into()));
        };
        self.inner.set_withheld_values(withheld);
        Ok((
            sandgate_proxy::Intercept {
                authority: Arc::new(authority),
                upstream_roots: Arc::new(upstream),
                injections,
                rules,
            },
            bundle,
        ))
    }

    /// The network notes for a result, while the proxy runs.
    fn net_notes(&self, result: &mut ExecResult) {
        if let Some(net) = &self.net {
            if let Some(s) = net
                .served
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
            {
                result.confined.notes.extend(s.notes.iter().cloned());
            }
        }
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
        let admitted = self.admit(command)?;
        if let Run::Git(words) = &admitted.run {
            // Everything exec would check, without the private copy of the
            // repository exec makes: explaining writes nothing.
            let root = self.git_root()?;
            git::vet(words, &self.git, root)?;
        }
        Ok(admitted.grant)
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
                // Planned (or, to explain, vetted) by the caller: a refused
                // flag or pathspec is refused there.
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

    /// `text` redacted as a command's output is: of the withheld values
    /// (credential-shaped host variables, `[[net.credentials]]` values
    /// once started) and of token shapes. For what a caller prints about a
    /// command beside its output, such as its argv.
    pub fn redact(&self, text: &[u8]) -> Vec<u8> {
        self.inner.redact(text)
    }

    /// Creates the private TMPDIR and prepares confinement; with `confine =
    /// "required"` on a kernel that lacks a part, `E_CONFINE_UNAVAILABLE`.
    pub fn start(&self) -> Result<(), Error> {
        if !self.runs_anything() {
            return Ok(());
        }
        self.start_all()
    }

    /// Runs `command` with `shell -c` under `opts` ([`ExecOptions`]: the
    /// working directory, the timeout, an abort signal). A confined git
    /// request runs git itself in `cwd`, on the repository at the root.
    pub fn exec(&self, command: &str, opts: ExecOptions) -> Result<ExecResult, Error> {
        let cwd = opts.cwd.clone().unwrap_or_default();
        let command = match self.admit(command) {
            Ok(grant) => grant.run,
            Err(e) => return self.audited("exec", &cwd, Err(e)),
        };
        let command = match command {
            Run::Git(words) => {
                // Planned once: the repository vetted and copied once.
                let inv = match self.git_plan(&words) {
                    Ok(inv) => inv,
                    Err(e) => return self.audited("exec", &cwd, Err(e)),
                };
                return self.audited("git", &cwd, self.exec_git(&inv, opts));
            }
            Run::Shell(command) => command,
        };
        let result = self.call_options(opts).and_then(|(run, note)| {
            self.spend()?;
            let mut result = self.inner.exec(&command, run).map_err(run_error)?;
            self.net_notes(&mut result);
            Ok(with_note(result, note))
        });
        self.audited("exec", &cwd, result)
    }

    /// Sets where each call of [`exec`](Self::exec) and
    /// [`exec_argv`](Self::exec_argv) is reported, refused ones included:
    /// an [`AuditEvent`] with `op` `exec` (or `git` for confined git), the
    /// working directory as asked, the bytes of output, the exit code and
    /// the limit that stopped the command. Never the command's text or
    /// output. Each connection a command makes through the egress proxy
    /// is reported too, as it ends: `op` `connect`, `path` the `host:port`
    /// asked for, `size` the bytes relayed (also by one refused after
    /// some moved), `outcome` `OK` or
    /// `E_NET_DENIED`; never its path, query or bytes. Those reports come
    /// from the proxy's threads; none is made once [`dispose`](Self::dispose)
    /// (or drop) has returned, and this call waits for one under way. A
    /// sandbox and an executor of one policy usually share one sink.
    pub fn set_audit_sink(&self, sink: Option<AuditSink>) {
        *self.audit.lock().unwrap_or_else(|e| e.into_inner()) = sink;
        let gate = self.net.as_ref().and_then(|net| {
            let served = net.served.lock().unwrap_or_else(|e| e.into_inner());
            served.as_ref().map(|s| Arc::clone(&s.reporting))
        });
        if let Some(gate) = gate {
            gate.wait_idle();
        }
    }

    /// Reports a command refused as malformed before it reached
    /// [`exec`](Self::exec) (the C ABI's refusal of a command or working
    /// directory that is not UTF-8) to the audit sink, as `exec` reports
    /// its own refusals: `op` `exec`, `path` the working directory as
    /// given (what is not text replaced), `outcome` the refusal's code.
    /// Like every request refused as malformed, it spends no budget.
    /// Answers the refusal.
    pub fn audit_refusal(&self, cwd: &str, e: Error) -> Error {
        match self.audited("exec", cwd, Err(e)) {
            Err(e) => e,
            Ok(_) => unreachable!("a refusal is handed back as given"),
        }
    }

    /// Reports `result` to the audit sink, if any, and hands it back.
    fn audited(
        &self,
        op: &'static str,
        cwd: &str,
        result: Result<ExecResult, Error>,
    ) -> Result<ExecResult, Error> {
        let sink = self.audit.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(sink) = sink {
            // A command that could not be started did not run: its 127 is
            // sandgate's, not the command's, and the record says so.
            let ran = |r: &&ExecResult| !r.not_started;
            let (size, exit_code, limit) = match &result {
                Ok(r) => (
                    Some((r.stdout.len() + r.stderr.len()) as u64),
                    Some(r).filter(ran).map(|r| r.exit_code),
                    r.limit.map(|l| l.as_str()),
                ),
                Err(_) => (None, None, None),
            };
            // A command its caller aborted is recorded as a cancelled
            // search or fetch is, apart from one exiting 130 of its own.
            let outcome = match &result {
                Ok(r) if r.not_started => ErrorCode::NotStarted,
                Ok(r) if r.aborted => ErrorCode::Aborted,
                Ok(_) => ErrorCode::Ok,
                Err(e) => e.code(),
            };
            sink(&AuditEvent {
                op,
                path: cwd.to_owned(),
                size,
                time: std::time::SystemTime::now(),
                outcome,
                exit_code,
                limit,
            });
        }
        result
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
        opts: ExecOptions,
    ) -> Result<ExecResult, Error> {
        let cwd = opts.cwd.clone().unwrap_or_default();
        let result = self.run_argv(argv, opts);
        self.audited("exec", &cwd, result)
    }

    fn run_argv(
        &self,
        argv: &[std::ffi::OsString],
        opts: ExecOptions,
    ) -> Result<ExecResult, Error> {
        if !self.enabled {
            return Err(Error::denied(
                "exec is not enabled by the policy ([exec] enabled = false)",
            ));
        }
        let Some((program, args)) = argv.split_first() else {
            return Err(Error::request("the program's argv is empty"));
        };
        let (run, note) = self.call_options(opts)?;
        self.spend()?;
        let mut result = self
            .inner
            .exec_argv(std::path::Path::new(program), args, run)
            .map_err(run_error)?;
        self.net_notes(&mut result);
        Ok(with_note(result, note))
    }

    /// Checks the timeout, starts the executor and resolves `cwd` beneath
    /// the root by descriptor. Answers the run's options and, when the
    /// caller asked for more time than the policy grants, the note saying
    /// so. Spends no budget: a call refused here runs nothing ([`spend`]
    /// comes last, right before the command runs).
    ///
    /// [`spend`]: Self::spend
    fn call_options(&self, opts: ExecOptions) -> Result<(RunOptions, Option<String>), Error> {
        if opts.timeout_ms == Some(0) {
            return Err(Error::request("timeout_ms must be at least 1"));
        }
        // Started on first use (starting again does nothing), so that a
        // kernel lacking a required part answers E_CONFINE_UNAVAILABLE for
        // each request and runs nothing.
        self.start_all()?;
        let cwd: Option<OwnedFd> = match (&self.cwd_root, opts.cwd.as_deref()) {
            (None, _) => None,
            (Some(root), None) => Some(root.try_clone().map_err(Error::from)?.into_fd()),
            (Some(root), Some(given)) => {
                let name = match hostpath::map(&self.cwd_dirs, given) {
                    Ok(m) => m.rel,
                    Err(e) => match hostpath::map(&self.other_dirs, given) {
                        Ok(m) => {
                            return Err(Error::denied(
                                "commands run in the write root (or, without one, the first \
                                 read root); this path is in another granted directory",
                            )
                            .with_path(m.rel))
                        }
                        Err(_) => return Err(e),
                    },
                };
                let rel = RelPath::parse(&name)?;
                let dir = root
                    .open_dir(&rel)
                    .map_err(|e| Error::from(e).with_path(rel.as_str()))?;
                Some(dir.into_fd())
            }
        };
        let within = opts
            .within
            .as_deref()
            .map(|dirs| dirs.iter().map(OwnedFd::try_clone).collect())
            .transpose()
            .map_err(Error::from)?;
        let asked = opts.timeout_ms.map(Duration::from_millis);
        let note = asked.filter(|t| *t > self.max_timeout).map(|t| {
            format!(
                "the call asked for a {} ms timeout; the policy's exec.timeout_ms ({} ms) applied",
                t.as_millis(),
                self.max_timeout.as_millis()
            )
        });
        let timeout = Some(asked.map_or(self.max_timeout, |t| t.min(self.max_timeout)));
        Ok((
            RunOptions {
                cwd,
                timeout,
                abort: opts.abort,
                within,
            },
            note,
        ))
    }

    /// Spends one `exec_ops`: called once everything that can refuse a
    /// call before it runs has passed, so that only commands that run (or
    /// that the executor then fails to start) count.
    fn spend(&self) -> Result<(), Error> {
        if let Some(left) = &self.exec_ops {
            left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .map_err(|_| Error::denied("the exec_ops budget is spent"))?;
        }
        Ok(())
    }

    /// The hardened git invocation `words` plan to (refused as exec
    /// would refuse it).
    fn git_plan(&self, words: &[String]) -> Result<git::GitInvocation, Error> {
        git::plan(words, &self.git, self.git_root()?).map_err(Error::from)
    }

    /// The root confined git runs in.
    fn git_root(&self) -> Result<&Path, Error> {
        self.git_root
            .as_deref()
            .ok_or_else(|| Error::denied("confined git needs a root to run in"))
    }

    /// Runs the hardened git invocation `inv` ([`Self::git_plan`]), from
    /// its argv (no shell), under git's own read-only ruleset rather than
    /// the shell's.
    fn exec_git(&self, inv: &git::GitInvocation, opts: ExecOptions) -> Result<ExecResult, Error> {
        if let (Some(dirs), Some(root)) = (opts.within.as_deref(), self.git_root.as_deref()) {
            // Narrowed to directories that do not hold the repository's
            // root, git could read nothing of it and would only say "not a
            // git repository". Where /proc cannot say where a directory
            // is, git runs and the narrowing alone decides.
            let places: Result<Vec<_>, _> = dirs
                .iter()
                .map(|d| std::fs::read_link(format!("/proc/self/fd/{}", d.as_raw_fd())))
                .collect();
            // `root` is canonical already: the policy's root.
            if places.is_ok_and(|p| !p.iter().any(|p| root.starts_with(p))) {
                return Err(Error::denied(
                    "confined git reads the repository at the root, which lies outside the \
                     directories this call is narrowed to (the client's roots): it could read \
                     nothing of it",
                ));
            }
        }
        let (mut run, note) = self.call_options(opts)?;
        if let (Some(within), Some(git_dir)) = (run.within.as_mut(), inv.git_dir()) {
            // git's private copy of the vetted repository lies outside the
            // root: narrowed, git still reads it.
            within.push(std::fs::File::open(git_dir).map_err(Error::from)?.into());
        }
        let prepared = self.git_prepared(inv)?;
        self.spend()?;
        let mut result = self
            .inner
            .exec_program(&inv.program, &inv.args, &inv.env, &prepared, run)
            .map_err(run_error)?;
        result.confined.notes.insert(
            0,
            "confined git runs under a ruleset of its own: it may read the root and the \
             system directories but /etc (of which only ld.so.cache and localtime), write no \
             file, and connect to or bind no TCP port"
                .to_owned(),
        );
        Ok(with_note(result, note))
    }

    /// Git's ruleset, prepared for each run: it grants the root and the
    /// invocation's own private git directory.
    fn git_prepared(&self, inv: &git::GitInvocation) -> Result<Prepared, Error> {
        confine::prepare(&inv.confine_spec(), self.git_mode).map_err(Error::from)
    }

    /// Kills anything still running and removes the private TMPDIR.
    pub fn dispose(&self) {
        let _ = self.inner.dispose();
        if let Some(net) = &self.net {
            // Taken out first: a report waited for below may call back
            // into the executor, which looks at `served`.
            // Taken out and listed as stopping under the one lock, so that
            // a dispose at once that finds `served` empty finds the gate.
            let (served, others) = {
                let mut served = net.served.lock().unwrap_or_else(|e| e.into_inner());
                let mut stopping = net.stopping.lock().unwrap_or_else(|e| e.into_inner());
                let others = stopping.clone();
                let served = served.take();
                if let Some(s) = &served {
                    stopping.push(Arc::clone(&s.reporting));
                }
                (served, others)
            };
            if let Some(s) = served {
                s.proxy.stop();
                // A connection's thread can still be ending: it reports
                // nothing from here on, and one reporting now is waited for.
                s.reporting.close();
                net.stopping
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|g| !Arc::ptr_eq(g, &s.reporting));
            }
            // Another dispose is stopping a proxy: none of its reports
            // reaches the sink once this one returns either (closing a gate
            // twice is harmless; a report this thread makes is not waited
            // for).
            for gate in others {
                gate.close();
            }
        }
    }
}

/// The check of protected paths around each shell command: the policy's
/// deny-write patterns and restricted mode's `.git` beneath the write root,
/// and `.git/config` wherever git hooks are protected (`core.hooksPath`
/// there can point hooks anywhere). `None` without a write root or without
/// any protection.
fn protection(policy: &Policy) -> Result<Option<Arc<Protection>>, Error> {
    let Some(write_root) = policy.write_root() else {
        return Ok(None);
    };
    let guard = crate::sandbox::deny_write_guard(
        policy.deny_write().iter(),
        policy.security_mode() == SecurityMode::Restricted,
    )?;
    if !guard.has_patterns() {
        return Ok(None);
    }
    let protector = Protector::new(write_root, guard).map_err(|e| {
        Error::new(
            ErrorCode::Io,
            format!("cannot protect paths beneath the write root: {e}"),
        )
        .with_key("fs.write_root")
        .with_errno(e.raw_os_error())
    })?;
    Ok(Some(Arc::new(Protection(
        Arc::new(protector),
        write_root.to_path_buf(),
    ))))
}

/// Refuses a credential's file (opened as `file` from `path`) that a
/// command could read itself: one inside a policy root, where commands and
/// the file tools read, or inside a system directory every command reads
/// (`/etc`, `/usr`, ...), or one with a second name (a hard link) that
/// could lie there. The proxy sets the value so that the command never
/// holds it.
fn beyond_commands(file: &std::fs::File, path: &Path, roots: &[PathBuf]) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    // Where the opened file is, every link followed: from the descriptor
    // when /proc is there, so nothing can move between the look and the
    // open.
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .or_else(|_| std::fs::canonicalize(path))
        .map_err(|e| format!("cannot tell where the file lies: {e}"))?;
    let system = sandgate_shellexec::SYSTEM_DIRS
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok());
    if let Some(dir) = roots
        .iter()
        .cloned()
        .chain(system)
        .find(|d| real.starts_with(d))
    {
        return Err(format!(
            "the file lies inside {}, which commands can read; keep the value where they cannot",
            sandgate_policy::shown(&dir)
        ));
    }
    let names = file
        .metadata()
        .map_err(|e| format!("cannot read the file: {e}"))?
        .nlink();
    if names > 1 {
        return Err(format!(
            "the file has {names} names (hard links), and another may lie where commands \
             read; give the value a file with one name"
        ));
    }
    Ok(())
}

/// The directories a deny-write pattern protects as a whole by name
/// (`.github/**`, `.github/workflows/**`: a literal path then `/**`), made
/// when missing so that the view can bind them read-only. Never one
/// holding a component that folds to `.git` (deny-write's fold: `.GIT`,
/// `.g\u{200b}it`, `.gıt`): an empty `.git` would change where git looks
/// for a repository, and a volume that folds names takes those for it.
fn placeholder_dirs(policy: &Policy) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = policy
        .deny_write()
        .iter()
        .filter_map(|p| {
            let p = p.strip_prefix("./").unwrap_or(p);
            let dir = p.strip_suffix("/**")?;
            let literal = !dir.is_empty()
                && !dir.starts_with('/')
                && !dir.contains(['*', '?', '[', ']', '{', '}', '\\'])
                && dir.split('/').all(|c| {
                    !c.is_empty() && c != "." && c != ".." && sandgate_fileguard::fold(c) != ".git"
                });
            literal.then(|| PathBuf::from(dir))
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// [`Protector`] as the executor's hook, and the write root it protects.
struct Protection(Arc<Protector>, std::path::PathBuf);

impl ProtectedPaths for Protection {
    fn before(&self) -> std::io::Result<Box<dyn Checkpoint>> {
        Ok(Box::new(Settling(self.0.begin()?, self.0.clone())))
    }

    fn before_until(
        &self,
        deadline: std::time::Instant,
        stop: &dyn Fn() -> bool,
    ) -> std::io::Result<Box<dyn Checkpoint>> {
        Ok(Box::new(Settling(
            self.0.begin_until(Some(deadline), stop)?,
            self.0.clone(),
        )))
    }

    fn root(&self) -> Option<&std::path::Path> {
        Some(&self.1)
    }

    fn detection(&self) -> Option<ProtectedDetection> {
        match self.0.detection() {
            Detection::Pending => None,
            Detection::Inotify => Some(ProtectedDetection {
                mode: "inotify".into(),
                reason: None,
            }),
            Detection::CtimeWalk(why) => Some(ProtectedDetection {
                mode: "ctime_walk".into(),
                reason: Some(why.into()),
            }),
        }
    }
}

/// Names that no pattern names on purpose: a protected directory whose
/// children of these names (a plain one, a dotted one, and one a level
/// deeper) are all protected is taken to have all of its content
/// protected (`dir/**`, restricted mode's `.git`), and is bound read-only
/// as a whole in the view. Any other protected directory is only pinned
/// there, its protected entries bound one by one.
const SUBTREE_PROBES: &[&str] = &[
    "zz-sandgate-probe",
    ".zz-sandgate-probe",
    "zz-sandgate-probe/zz-sandgate-probe.d",
];

struct Settling(sandgate_protect::Checkpoint, Arc<Protector>);

impl Checkpoint for Settling {
    fn entries(&self) -> Vec<ProtectedEntry> {
        let guard = self.1.guard();
        let protects = |p: &str| guard.check_write(p, None).refusal().is_some();
        // Directories found wholly protected: what is beneath one is too,
        // without asking the patterns again (a `.git` holds hundreds).
        let mut wholly: Vec<std::path::PathBuf> = Vec::new();
        self.0
            .protected_entries()
            .into_iter()
            .map(|e| {
                // The file type bits of `st_mode` (inode(7)).
                let kind = match e.mode & 0o170_000 {
                    0o100_000 => EntryKind::File,
                    0o040_000 => EntryKind::Directory,
                    0o120_000 => EntryKind::Symlink,
                    _ => EntryKind::Other,
                };
                let is_dir = kind == EntryKind::Directory;
                let inherited = is_dir && wholly.iter().any(|w| e.path.starts_with(w));
                let subtree = inherited
                    || (is_dir
                        && e.path.to_str().is_some_and(|dir| {
                            SUBTREE_PROBES
                                .iter()
                                .all(|probe| protects(&format!("{dir}/{probe}")))
                        }));
                if subtree && !inherited {
                    wholly.push(e.path.clone());
                }
                ProtectedEntry {
                    path: e.path,
                    dev: e.dev,
                    ino: e.ino,
                    kind,
                    nlink: e.nlink,
                    subtree,
                }
            })
            .collect()
    }

    fn after(self: Box<Self>) -> Vec<ProtectedChange> {
        self.0
            .settle()
            .into_iter()
            .map(|c| ProtectedChange {
                path: c.path,
                pattern: c.pattern,
                action: match c.action {
                    Action::Restored => ProtectedAction::Restored,
                    Action::Quarantined => ProtectedAction::Quarantined,
                    Action::Reported => ProtectedAction::Reported,
                },
            })
            .collect()
    }
}

/// Adds the timeout note, when there is one, to the result's notes.
fn with_note(mut result: ExecResult, note: Option<String>) -> ExecResult {
    if let Some(note) = note {
        result.confined.notes.push(note);
    }
    result
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.dispose();
    }
}
