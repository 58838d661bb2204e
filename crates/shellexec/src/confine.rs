//! Kernel confinement of a child process: Landlock, rlimits, no_new_privs.
//!
//! The parent builds everything that allocates or may fail ([`prepare`]);
//! the child, between fork and exec, only makes async-signal-safe system
//! calls ([`Prepared::apply_in_child`]).
//!
//! # Threat model
//!
//! The command an agent asks for is untrusted. Confinement limits what the
//! shell running it, and everything that shell starts, can reach: files
//! outside the roots, the network, and processes outside the run. It is a
//! layer on top of the ordinary user and file permissions, never a
//! replacement: Landlock takes no capability away, so a child running as
//! root keeps root's other powers (see *Limits* below).
//!
//! # What the child is granted
//!
//! Landlock denies everything the ruleset *handles* (all file-system rights
//! of the ABI in use, TCP bind and connect from ABI 4) except:
//!
//! | object | rights |
//! |---|---|
//! | each `read_dirs` entry | read files, list directories, execute |
//! | `/usr`, `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`, `/libx32`, `/etc` (those that exist; with `etc_files_only`, of `/etc` only the files it names) | read files, list directories, execute |
//! | each `write_dirs` entry | the above, and write, truncate, create regular files, directories, symlinks, fifos and sockets, remove, rename or link across directories, connect to UNIX sockets there (ABI 9); **never** create device nodes, **never** device ioctls |
//! | `/dev/null` | read, write and truncate (shells redirect to it with `O_TRUNC`) |
//! | `/dev/zero`, `/dev/urandom` | read |
//! | `/proc/<pid>` of the confined process itself | read files, list directories |
//! | TCP (ABI ≥ 4) | connect to the `connect_ports`; bind to none |
//! | scoping (ABI ≥ 6) | signals and abstract UNIX sockets reach only processes of the same Landlock domain |
//!
//! `/dev/tty`, `/dev/shm`, `/tmp`, `/run`, `/var`, `/home`, `/opt` and the
//! rest of `/proc` and `/dev` are not granted: the executor gives the child a
//! private temporary directory as a write dir. Files already open when the
//! child is confined (stdin, stdout, stderr) keep working whatever they are.
//!
//! ## Why `/proc/self` is granted in the child
//!
//! Landlock rules name inodes, not path strings, and every process has its
//! own `/proc/<pid>` directory. Opened in the parent, `/proc/self` would grant
//! the *parent's* directory. So the ruleset is built in the child, from file
//! descriptors the parent opened ahead, plus `/proc/self` opened by the child
//! itself just before it confines itself. Consequences:
//!
//! - the process that runs the command (the shell, and whatever it execs in
//!   place) reads its own `/proc/self`; processes it forks do **not** read
//!   theirs (their pid differs) and no process reads another's `/proc/<pid>`;
//! - `/dev/fd/N` and `/proc/self/fd/N` of pipes keep working in every
//!   descendant: Landlock does not check pipes and sockets;
//! - under memory pressure the kernel may drop and recreate the `/proc/<pid>`
//!   inode, after which the grant no longer matches: access then fails
//!   closed.
//!
//! The parent builds the same ruleset once in [`prepare`] (and throws it
//! away) so that a rule the kernel refuses is reported there, not as a
//! failed spawn.
//!
//! # Compatibility
//!
//! Modelled on the `landlock` crate's compatibility levels: [`ConfineMode`]
//! `BestEffort` uses what the kernel offers and the [`ConfinementReport`]
//! says exactly what will be enforced; `Required` refuses
//! ([`ErrorCode::ConfineUnavailable`]) when Landlock, TCP restriction (ABI 4)
//! or scoping (ABI 6) is missing; `Off` uses no Landlock. Every mode sets
//! no_new_privs and the rlimits: they cost nothing and no mode should let a
//! child gain privileges through a setuid binary or dump core.
//!
//! # Limits
//!
//! - Landlock does not restrict `chmod`, `chown`, extended attributes,
//!   timestamps, UDP, raw sockets, `ptrace` inside the domain, or module
//!   loading, nor an open for neither reading nor writing (`O_ACCMODE` 3;
//!   the seccomp filter refuses it on the floor); before ABI 3 it does not
//!   restrict `truncate(2)` (the filter refuses it on the floor, and an
//!   open for reading with `O_TRUNC`), before ABI 9
//!   connecting to a UNIX socket by path (e.g. a daemon's socket under
//!   `/run`). The report's `notes` say which apply.
//! - A child running as root can read root-only files under the granted
//!   directories (`/etc/shadow`) and keeps its capabilities but the
//!   `CAP_NET_*` ones, every `CAP_SYS_*`, `CAP_MKNOD` and (on the floor)
//!   `CAP_LINUX_IMMUTABLE`, which every mode
//!   but `Off` takes away, as the namespaces do (route netlink, which the
//!   seccomp filter allows for name lookups, would otherwise change the
//!   host's network, a process may set its own scheduling, real-time
//!   included, and `CAP_SYS_RESOURCE` raises hard limits): run the
//!   executor as an unprivileged user.
//! - `RLIMIT_NPROC` counts every process of the child's *real user*, not the
//!   child's descendants, and the kernel does not enforce it for root (uid 0
//!   in the initial user namespace) nor for a process with
//!   `CAP_SYS_RESOURCE` or `CAP_SYS_ADMIN`; the report then leaves it out of
//!   `rlimits` and says so in `notes`.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{Access, AccessFs, AccessNet, BitFlags, Scope, ABI};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::process::Resource;
use sandgate_codes::ErrorCode;
use serde::Serialize;
use syscalls::{Errno, Sysno};

use crate::ns::ViewPlan;
use crate::seccomp::{self, Filters, Listen, SeccompSpec};

/// How much confinement a run demands (`exec.confine` in the policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfineMode {
    /// No kernel confinement (rlimits and no_new_privs still apply).
    Off,
    /// Whatever the kernel offers; the report says what was enforced.
    BestEffort,
    /// Refuse to run unless every part is enforced.
    Required,
}

/// What the child may touch.
#[derive(Clone, Debug, Default)]
pub struct ConfineSpec {
    /// Directories the child may read (and execute from).
    pub read_dirs: Vec<PathBuf>,
    /// Directories the child may read and write.
    pub write_dirs: Vec<PathBuf>,
    /// TCP ports the child may connect to (Landlock ABI 4 and later).
    pub connect_ports: Vec<u16>,
    /// RLIMIT_FSIZE: the largest file the child may write.
    pub max_file_size: Option<u64>,
    /// RLIMIT_NPROC: how many processes the child's user may have.
    pub max_processes: Option<u64>,
    /// RLIMIT_DATA: the most data memory (heap and private writable
    /// mappings) of each process, in bytes; a backstop of the executor's
    /// memory limit.
    pub max_data_bytes: Option<u64>,
    /// RLIMIT_CPU: the most CPU seconds of each process (soft limit:
    /// `SIGXCPU`; the hard limit, a second later, `SIGKILL`); a backstop of
    /// the executor's CPU limit.
    pub max_cpu_secs: Option<u64>,
    /// Allow UDP sockets under the seccomp filter (name resolution needs
    /// them while the child has any network access).
    pub udp: bool,
    /// The embedder serves the network grants (`connect_ports`, `udp`)
    /// through a proxy inside a network namespace of the command's own
    /// where namespaces are available: the view is planned even though
    /// the spec grants network access. Without namespaces the command
    /// runs on the floor with `connect_ports` and `udp` as given; inside
    /// them TCP reaches only the namespace's loopback and UDP sockets are
    /// refused.
    pub network_in_namespace: bool,
    /// Refuse every TCP bind and connect (Landlock ABI 4 and later) in a
    /// network namespace of the child's own too, where the ruleset
    /// otherwise leaves TCP to the namespace. For a child that shares the
    /// namespace with what the embedder serves there (confined git beside
    /// the shell's egress proxy and forwarders), the namespace alone would
    /// let it reach whatever the shell is granted. `connect_ports` must be
    /// empty.
    pub no_tcp: bool,
    /// Grant of `/etc` only these files (read), not the directory: for a
    /// child that needs none of the host's configuration, so that nothing
    /// it prints (a line of a file it was tricked into reading) can be
    /// one of `/etc/passwd` or `/etc/hostname`. A file that does not exist
    /// is passed over. `None`: `/etc` as every other system directory.
    pub etc_files_only: Option<Vec<PathBuf>>,
}

/// What was in force for one run, reported with every result.
///
/// Computed by [`prepare`] before any child exists: it states what
/// [`Prepared::apply_in_child`] will enforce, nothing more.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ConfinementReport {
    /// The mode asked for.
    pub mode: Option<ConfineMode>,
    /// The Landlock ABI version used, if any.
    pub landlock_abi: Option<u32>,
    /// The Landlock ABI version the kernel offers, if any (informational).
    pub kernel_abi: Option<u32>,
    /// Filesystem access restricted by Landlock.
    pub fs: bool,
    /// TCP connect/bind restricted by Landlock.
    pub net: bool,
    /// Signals and abstract unix sockets scoped by Landlock.
    pub scoped: bool,
    /// no_new_privs set.
    pub no_new_privs: bool,
    /// rlimits set and enforced, as (name, value), e.g. `("RLIMIT_CORE", 0)`.
    pub rlimits: Vec<(String, u64)>,
    /// A seccomp filter installed (see [`crate::seccomp`]).
    pub seccomp: bool,
    /// What the seccomp filter refuses, by class (empty without one).
    pub seccomp_refuses: Vec<String>,
    /// The command ran in namespaces of its own: the executor's user and
    /// network namespace (loopback only), a fresh mount namespace, and a
    /// PID namespace whose PID 1 is the keeper.
    pub namespaces: bool,
    /// The command saw the allowlist view (a tmpfs root holding the
    /// system directories read-only, the roots, a minimal `/dev`, its own
    /// `/proc` and private tmpfs for `/tmp`, `/var/tmp`, `/run`,
    /// `/dev/shm`) instead of the host's tree.
    pub view: bool,
    /// In the view: how the protected entries beneath the write root were
    /// held while the command ran ([`crate::binds`]); absent without
    /// protected entries or without the view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protected_binds: Option<crate::binds::ProtectedBinds>,
    /// With protected paths: how the check after the command found what
    /// it changed (inotify, or the ctime walk and why); absent without
    /// protected paths or when the command did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protected_detection: Option<crate::protected::ProtectedDetection>,
    /// Each guarantee that was not in force.
    pub missing: Vec<ConfinePart>,
    /// What the fields above do not say: gaps in what is enforced.
    pub notes: Vec<String>,
    /// The resource limits and the mechanism holding each (set by the
    /// executor for each result; absent from a bare [`prepare`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::limits::LimitsReport>,
}

/// A part of the confinement a kernel may lack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConfinePart {
    /// Landlock itself (and with it all filesystem restriction).
    Landlock,
    /// TCP connect/bind restriction (Landlock ABI 4).
    Network,
    /// Signal and abstract UNIX socket scoping (Landlock ABI 6).
    Scoping,
    /// The seccomp filter (sockets Landlock cannot judge, `listen`, and
    /// the system calls no command needs).
    Seccomp,
    /// User, network (loopback only), mount and PID namespaces of the
    /// command's own, the keeper as PID 1.
    Namespaces,
    /// The allowlist view of the host's files (`pivot_root` onto a tmpfs).
    View,
}

impl ConfinePart {
    /// The Landlock ABI version that brings this part.
    pub const fn min_abi(self) -> u32 {
        match self {
            ConfinePart::Landlock => 1,
            ConfinePart::Network => NET_ABI,
            ConfinePart::Scoping => SCOPE_ABI,
            ConfinePart::Seccomp | ConfinePart::Namespaces | ConfinePart::View => 0,
        }
    }
}

impl fmt::Display for ConfinePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfinePart::Landlock => "Landlock filesystem restriction",
            ConfinePart::Network => "network (TCP connect/bind) restriction",
            ConfinePart::Scoping => "scoping of signals and abstract UNIX sockets",
            ConfinePart::Seccomp => "the seccomp filter",
            ConfinePart::Namespaces => "namespaces of the command's own",
            ConfinePart::View => "the allowlist view of the host's files",
        })
    }
}

/// What went wrong, broadly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfineErrorKind {
    /// `Required` mode and the kernel lacks a part ([`ConfineError::missing`]).
    Unavailable,
    /// A read or write directory could not be opened.
    Path,
    /// The kernel refused to build the ruleset.
    Kernel,
}

/// Confinement could not be prepared.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConfineError {
    kind: ConfineErrorKind,
    message: String,
    missing: Vec<ConfinePart>,
    #[source]
    source: Option<io::Error>,
}

impl ConfineError {
    /// What went wrong, broadly.
    pub fn kind(&self) -> ConfineErrorKind {
        self.kind
    }

    /// The error code: `E_CONFINE_UNAVAILABLE` when a required part is
    /// missing, `E_NOT_FOUND` for a missing directory, `E_IO` otherwise.
    pub fn code(&self) -> ErrorCode {
        match self.kind {
            ConfineErrorKind::Unavailable => ErrorCode::ConfineUnavailable,
            ConfineErrorKind::Path if self.errno() == Some(libc::ENOENT) => ErrorCode::NotFound,
            ConfineErrorKind::Path | ConfineErrorKind::Kernel => ErrorCode::Io,
        }
    }

    /// The parts the kernel lacks (empty unless the kind is `Unavailable`).
    pub fn missing(&self) -> &[ConfinePart] {
        &self.missing
    }

    /// The OS error number, where there is one.
    pub fn errno(&self) -> Option<i32> {
        self.source.as_ref().and_then(io::Error::raw_os_error)
    }

    #[cold]
    fn unavailable(missing: Vec<ConfinePart>, available: Option<u32>, kernel: Option<u32>) -> Self {
        let offered = match (available, kernel) {
            (None, None) => "this kernel offers no Landlock".to_owned(),
            (None, Some(k)) => format!("Landlock disabled by the caller (kernel offers ABI {k})"),
            (Some(a), Some(k)) if a < k => {
                format!("Landlock limited to ABI {a} by the caller (kernel offers ABI {k})")
            }
            (Some(a), _) => format!("this kernel offers Landlock ABI {a}"),
        };
        let parts: Vec<String> = missing
            .iter()
            .map(|p| match (p, p.min_abi()) {
                (ConfinePart::Seccomp, _) => format!("{p} (needs seccomp filters in the kernel)"),
                (_, 0) => p.to_string(),
                (_, abi) => format!("{p} (needs Landlock ABI {abi})"),
            })
            .collect();
        ConfineError {
            kind: ConfineErrorKind::Unavailable,
            message: format!(
                "confinement is required but unavailable: missing {}; {offered}",
                parts.join(", ")
            ),
            missing,
            source: None,
        }
    }

    /// `Required` mode and the executor cannot give the command
    /// namespaces of its own (`why` says which step the host refused).
    #[cold]
    pub(crate) fn namespaces_unavailable(why: &str) -> Self {
        ConfineError {
            kind: ConfineErrorKind::Unavailable,
            message: format!(
                "confinement is required but unavailable: missing {} and {}; {why}",
                ConfinePart::Namespaces,
                ConfinePart::View
            ),
            missing: vec![ConfinePart::Namespaces, ConfinePart::View],
            source: None,
        }
    }

    #[cold]
    fn path(what: &str, path: &Path, source: io::Error) -> Self {
        ConfineError {
            kind: ConfineErrorKind::Path,
            message: format!("cannot open {what} {}", sandgate_codes::shown(path)),
            missing: Vec::new(),
            source: Some(source),
        }
    }

    #[cold]
    fn kernel(source: io::Error) -> Self {
        ConfineError {
            kind: ConfineErrorKind::Kernel,
            message: "the kernel refused the Landlock ruleset".to_owned(),
            missing: Vec::new(),
            source: Some(source),
        }
    }
}

/// Confinement ready to be applied to any number of children.
///
/// Cloning is cheap (a reference count); clone it into each
/// `pre_exec` closure. `Send + Sync`: the file descriptors it holds are only
/// read, by the parent and by children, never closed before the last clone
/// is dropped.
#[derive(Clone)]
pub struct Prepared {
    inner: Arc<Inner>,
    /// A second Landlock layer the caller asked for ([`Prepared::narrowed`]):
    /// its path rules, applied after the plan's own.
    narrow: Option<Arc<[PathRule]>>,
    /// How many of `narrow`'s rules are the directories asked for (the
    /// rest are system paths).
    narrow_dirs: usize,
}

/// The view's private tmpfs mounts, as the child opens them.
const VIEW_TMP: [&std::ffi::CStr; 4] = [c"/tmp", c"/var/tmp", c"/run", c"/dev/shm"];

struct Inner {
    report: ConfinementReport,
    /// (resource, soft, hard).
    rlimits: Vec<(Resource, u64, u64)>,
    landlock: Option<Plan>,
    seccomp: Option<Filters>,
    /// The view of the spec's directories; `None` in `Off` mode, or when
    /// the spec grants network access without
    /// [`ConfineSpec::network_in_namespace`] (the namespace would cut it).
    view: Option<ViewPlan>,
    /// Landlock is enforced, handles every right that changes a file or a
    /// directory (truncate needs ABI 3), and grants none of them beneath
    /// any directory: see [`Prepared::writes_nothing`].
    writes_nothing: bool,
    /// Take the `CAP_NET_*`, `CAP_SYS_*`, `CAP_MKNOD` and
    /// `CAP_LINUX_IMMUTABLE` capabilities away (every mode but `Off`).
    drop_host_caps: bool,
}

/// The Landlock ruleset to build, with every path already opened.
struct Plan {
    attr: RulesetAttr,
    /// The same without TCP rules: in a network namespace of its own the
    /// command may bind and connect on its loopback, and reaches nothing
    /// else. With [`ConfineSpec::no_tcp`] TCP stays handled (and nothing
    /// granted) there too.
    attr_own_network: RulesetAttr,
    /// The spec's directories first (`roots` of them), then the system
    /// paths every command reads.
    paths: Vec<PathRule>,
    roots: usize,
    /// Which of `paths` are the write roots.
    write_roots: std::ops::Range<usize>,
    /// Each system path that holds spec directories (as `/usr` holds
    /// `/usr/src/app`): its rule's index in `paths`, the path it opened
    /// and those directories, symbolic links resolved. A narrowing layer
    /// grants it without them.
    system_holding: Vec<(usize, PathBuf, Vec<PathBuf>)>,
    /// Which of the view's private tmpfs mounts ([`VIEW_TMP`]) a narrowing
    /// layer grants: only those no spec directory lies beneath, since the
    /// view binds such a directory inside the mount, where a rule on the
    /// mount would cover it.
    view_tmp_narrowed: [bool; VIEW_TMP.len()],
    /// The rights the kernel accepts on a non-directory.
    file_access: u64,
    /// Every right but making devices: what a narrowing layer grants on
    /// each of its directories (the plan's own layer still decides which
    /// of them the command has there).
    grant_dir: u64,
    /// `ConnectTcp` from ABI 4, 0 below: then no port rule is added.
    connect_access: u64,
    /// The TCP ports the spec grants (none with `no_tcp`), sorted, once
    /// each, whatever the ABI: Landlock's port rules from ABI 4, and what
    /// the executor judges a connect by where it judges connects
    /// ([`Prepared::socket_rules`]), below ABI 4 too, where Landlock does
    /// not judge TCP.
    tcp_ports: Vec<u16>,
    /// Rights on the child's own `/proc/<pid>`; 0 when not granted.
    proc_self_access: u64,
    /// Rights on the view's private tmpfs mounts (granted only inside the
    /// view, where they are the command's own).
    view_tmp_access: u64,
}

struct PathRule {
    fd: OwnedFd,
    access: u64,
}

impl fmt::Debug for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plan = self.inner.landlock.as_ref();
        f.debug_struct("Prepared")
            .field("report", &self.inner.report)
            .field("path_rules", &plan.map(|p| p.paths.len()))
            .field("tcp_ports", &plan.map(|p| &p.tcp_ports))
            .finish()
    }
}

/// The newest Landlock ABI whose rights this module was written against;
/// a newer kernel is used at this level (the kernel keeps old ABIs working).
pub const NEWEST_ABI: u32 = 9;
const NET_ABI: u32 = 4;
const SCOPE_ABI: u32 = 6;
/// Landlock judges connecting to a UNIX socket by path.
const UNIX_ABI: u32 = 9;

// Raw Landlock uapi (include/uapi/linux/landlock.h). The `landlock` crate
// keeps its own copy private, and the child must not go through an API that
// allocates.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
const LANDLOCK_RULE_PATH_BENEATH: libc::c_uint = 1;
const LANDLOCK_RULE_NET_PORT: libc::c_uint = 2;

/// `struct landlock_ruleset_attr` up to `scoped`: older kernels accept the
/// larger size as long as the fields they do not know are zero.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's header).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct landlock_net_port_attr`.
#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// `struct rlimit64`, as `prlimit64` takes it.
#[repr(C)]
struct Rlimit64 {
    cur: u64,
    max: u64,
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`—the
/// Landlock ABI version the running kernel offers.
///
/// `None` when the kernel lacks Landlock (`ENOSYS`) or it is disabled at boot
/// (`EOPNOTSUPP`).
///
/// # References
///  - [landlock_create_ruleset(2)](https://man7.org/linux/man-pages/man2/landlock_create_ruleset.2.html)
pub fn kernel_abi() -> Option<u32> {
    // SAFETY: with a NULL attribute pointer, size 0 and the VERSION flag the
    // kernel reads no memory and only returns the ABI version or an error.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|&v| v > 0)
}

/// Prepares confinement for children: see [`prepare_with_abi`].
pub fn prepare(spec: &ConfineSpec, mode: ConfineMode) -> Result<Prepared, ConfineError> {
    prepare_with_abi(spec, mode, None)
}

/// Prepares confinement for children, using at most Landlock ABI `abi_limit`.
///
/// Runs in the parent: opens every path to grant, decides what the kernel
/// (limited to `abi_limit`, which lets tests play an older kernel; `Some(0)`
/// plays a kernel without Landlock) can enforce, checks it against `mode`,
/// and builds the ruleset once so that the kernel's refusal surfaces here.
///
/// # Errors
///
/// - `Required` mode and Landlock, TCP restriction (ABI 4) or scoping
///   (ABI 6) is missing: [`ErrorCode::ConfineUnavailable`], naming each
///   missing part;
/// - a `read_dirs` or `write_dirs` entry cannot be opened (`E_NOT_FOUND`,
///   `E_IO`);
/// - the kernel refuses the ruleset (`E_IO`).
pub fn prepare_with_abi(
    spec: &ConfineSpec,
    mode: ConfineMode,
    abi_limit: Option<u32>,
) -> Result<Prepared, ConfineError> {
    let kernel = kernel_abi();
    let available = match abi_limit {
        Some(limit) => kernel.map(|k| k.min(limit)).filter(|&a| a > 0),
        None => kernel,
    };

    let mut notes = Vec::new();
    let landlock = match mode {
        ConfineMode::Off => None,
        ConfineMode::BestEffort | ConfineMode::Required => {
            if mode == ConfineMode::Required {
                let mut missing = missing_parts(available);
                if !seccomp::available() {
                    missing.push(ConfinePart::Seccomp);
                }
                if !missing.is_empty() {
                    return Err(ConfineError::unavailable(missing, available, kernel));
                }
            }
            if let (Some(limit), Some(k)) = (abi_limit, kernel) {
                if limit < k {
                    notes.push(format!(
                        "Landlock limited to ABI {limit} by the caller (kernel offers ABI {k})"
                    ));
                }
            }
            match available {
                Some(abi) => Some(plan(spec, abi.min(NEWEST_ABI))?),
                None => None,
            }
        }
    };

    if let Some(plan) = &landlock {
        // Build once and discard: the kernel's refusal is reported now.
        let ruleset = build_ruleset(plan, &plan.paths, false, false)
            .map_err(|e| ConfineError::kernel(io::Error::from_raw_os_error(e.into_raw())))?;
        close_raw(ruleset);
    }

    let used_abi = landlock.as_ref().and(available.map(|a| a.min(NEWEST_ABI)));
    // Before ABI 9 Landlock does not judge UNIX sockets by path: the
    // executor does, where it supervises the command.
    let judge_sockets = used_abi.is_some_and(|abi| abi < UNIX_ABI);
    if used_abi.is_some() {
        notes.push(
            "Landlock does not restrict chmod, chown, extended attributes, timestamps, \
             UDP or raw sockets"
                .to_owned(),
        );
    }

    let seccomp = match mode {
        ConfineMode::Off => None,
        _ if !seccomp::available() => {
            notes.push(
                "this kernel has no seccomp filters: sockets other than TCP, \
                 listen and the system calls listed in the documentation are not refused"
                    .to_owned(),
            );
            None
        }
        _ => Some(
            // Landlock scopes signals from ABI 6; below (or without it)
            // the executor judges them.
            Filters::build(
                SeccompSpec { udp: spec.udp },
                seccomp::notify_available(),
                used_abi.is_none_or(|abi| abi < SCOPE_ABI),
                judge_sockets,
                used_abi.is_some_and(|abi| abi < 3),
            )
            .map_err(ConfineError::kernel)?,
        ),
    };
    if used_abi.is_some_and(|abi| abi < 3) {
        // On the floor the filter refuses truncation instead; in the view
        // only the write root, the private tmpfs mounts and a few devices
        // are writable.
        notes.push(if seccomp.is_some() {
            "Landlock does not judge truncation (needs ABI 3): on the floor truncate(2) \
             and opens for reading that truncate (O_TRUNC) are refused"
                .to_owned()
        } else {
            "truncate(2) is not restricted (needs Landlock ABI 3)".to_owned()
        });
    }
    if used_abi.is_some_and(|abi| abi < NET_ABI)
        && seccomp.as_ref().is_some_and(Filters::judges_sockets)
    {
        notes.push(
            "Landlock does not judge TCP (needs ABI 4): on the floor the executor judges \
             every TCP connect by the granted ports instead"
                .to_owned(),
        );
    }
    if judge_sockets && !seccomp.as_ref().is_some_and(Filters::judges_sockets) {
        notes.push(
            "connecting to a UNIX socket by path is not restricted (needs Landlock ABI 9, \
             or seccomp user notification for the executor to judge it)"
                .to_owned(),
        );
    }
    let seccomp_spec = SeccompSpec { udp: spec.udp };
    let seccomp_refuses = seccomp
        .as_ref()
        .map(|f| {
            let listen = if f.notifies() {
                Listen::Supervised
            } else {
                Listen::Refused
            };
            seccomp::refused_names(
                seccomp_spec,
                listen,
                f.judges_signals(),
                f.judges_sockets(),
                f.refuses_truncation(),
            )
        })
        .unwrap_or_default();
    // The view needs a network namespace of the command's own, whose only
    // interface is its loopback: a spec that grants network access runs
    // without, unless the embedder serves those grants there.
    let grants_network = !spec.connect_ports.is_empty() || spec.udp;
    let view = if mode == ConfineMode::Off || (grants_network && !spec.network_in_namespace) {
        None
    } else {
        Some(
            ViewPlan::new(&spec.read_dirs, &spec.write_dirs)
                .map_err(|e| ConfineError::path("a directory of the view", Path::new(""), e))?,
        )
    };
    let mut missing = if mode == ConfineMode::Off {
        missing_parts(None)
    } else {
        missing_parts(available)
    };
    if seccomp.is_none() {
        missing.push(ConfinePart::Seccomp);
    }
    missing.extend([ConfinePart::Namespaces, ConfinePart::View]);

    let rlimits = rlimits(spec);
    let nproc_exempt = nproc_exempt();
    let mut reported = Vec::new();
    for &(resource, value, _) in &rlimits {
        let name = rlimit_name(resource);
        if resource == Resource::Nproc && nproc_exempt {
            notes.push(format!(
                "{name}={value} is set but not enforced: the process runs as root \
                 or has CAP_SYS_RESOURCE or CAP_SYS_ADMIN"
            ));
        } else {
            reported.push((name.to_owned(), value));
        }
    }
    if rustix::process::geteuid().is_root() {
        notes.push(if mode == ConfineMode::Off {
            "the child runs as root: it keeps its capabilities and can read \
             root-only files under the granted directories"
                .to_owned()
        } else {
            "the child runs as root: it keeps its capabilities but CAP_NET_*, \
             CAP_SYS_*, CAP_MKNOD and CAP_LINUX_IMMUTABLE, and can read root-only files under the granted \
             directories"
                .to_owned()
        });
    }

    let report = ConfinementReport {
        mode: Some(mode),
        landlock_abi: used_abi,
        kernel_abi: kernel,
        fs: landlock.is_some(),
        net: landlock
            .as_ref()
            .is_some_and(|p| p.attr.handled_access_net != 0),
        scoped: landlock.as_ref().is_some_and(|p| p.attr.scoped != 0),
        no_new_privs: true,
        rlimits: reported,
        seccomp: seccomp.is_some(),
        seccomp_refuses,
        namespaces: false,
        view: false,
        protected_binds: None,
        protected_detection: None,
        missing,
        notes,
        limits: None,
    };
    let writes_nothing = spec.write_dirs.is_empty()
        && landlock
            .as_ref()
            .is_some_and(|p| p.attr.handled_access_fs & WRITE_RIGHTS == WRITE_RIGHTS);
    Ok(Prepared {
        inner: Arc::new(Inner {
            report,
            rlimits,
            landlock,
            seccomp,
            view,
            writes_nothing,
            drop_host_caps: mode != ConfineMode::Off,
        }),
        narrow: None,
        narrow_dirs: 0,
    })
}

fn missing_parts(available: Option<u32>) -> Vec<ConfinePart> {
    [
        ConfinePart::Landlock,
        ConfinePart::Network,
        ConfinePart::Scoping,
    ]
    .into_iter()
    .filter(|p| available.is_none_or(|a| a < p.min_abi()))
    .collect()
}

/// Every right that changes a file or a directory: with all of them handled
/// and none granted beneath a directory, a child cannot change what is
/// there (device nodes aside, and none is granted).
const WRITE_RIGHTS: u64 = {
    use AccessFs::*;
    WriteFile as u64
        | RemoveDir as u64
        | RemoveFile as u64
        | MakeChar as u64
        | MakeDir as u64
        | MakeReg as u64
        | MakeSock as u64
        | MakeFifo as u64
        | MakeBlock as u64
        | MakeSym as u64
        | Refer as u64
        | Truncate as u64
};

/// The rights to grant, from the `landlock` crate's table of rights per ABI.
struct Rights {
    handled: u64,
    read_exec: u64,
    write: u64,
    file: u64,
}

impl Rights {
    fn new(abi: ABI) -> Self {
        let all = AccessFs::from_all(abi);
        // Device nodes in a writable directory would be a way around every
        // rule (root could mknod the disk); device ioctls are not needed.
        let write = all & !(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev);
        Rights {
            handled: all.bits(),
            read_exec: AccessFs::from_read(abi).bits(),
            write: write.bits(),
            file: AccessFs::from_file(abi).bits(),
        }
    }
}

fn plan(spec: &ConfineSpec, abi: u32) -> Result<Plan, ConfineError> {
    let landlock_abi = ABI::from(i32::try_from(abi).unwrap_or(i32::MAX));
    let rights = Rights::new(landlock_abi);
    let read = BitFlags::from(AccessFs::ReadFile).bits();
    let read_write = (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate).bits();

    let mut paths = Vec::new();
    for dir in &spec.read_dirs {
        let fd = open_path(dir).map_err(|e| ConfineError::path("read dir", dir, e))?;
        push_rule(&mut paths, fd, rights.read_exec, rights.file);
    }
    let first_write = paths.len();
    for dir in &spec.write_dirs {
        let fd = open_path(dir).map_err(|e| ConfineError::path("write dir", dir, e))?;
        push_rule(&mut paths, fd, rights.write, rights.file);
    }
    let roots = paths.len();
    let write_roots = first_write..roots;
    let etc_files = spec
        .etc_files_only
        .iter()
        .flatten()
        .map(|p| (p.as_path(), read));
    let system = crate::SYSTEM_DIRS
        .iter()
        .filter(|p| spec.etc_files_only.is_none() || **p != "/etc")
        .map(|p| (Path::new(*p), rights.read_exec))
        .chain(etc_files)
        .chain([
            (Path::new("/dev/null"), read_write),
            (Path::new("/dev/zero"), read),
            (Path::new("/dev/urandom"), read),
        ]);
    // The spec's directories as the host names them (symbolic links
    // resolved where they can be).
    let root_paths: Vec<PathBuf> = spec
        .read_dirs
        .iter()
        .chain(&spec.write_dirs)
        .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
        .collect();
    let mut system_holding = Vec::new();
    for (path, access) in system {
        match open_path(Path::new(path)) {
            Ok(fd) => {
                let at = paths.len();
                push_rule(&mut paths, fd, access, rights.file);
                if let (true, Ok(real)) = (paths.len() > at, std::fs::canonicalize(path)) {
                    let held: Vec<PathBuf> = root_paths
                        .iter()
                        .filter(|r| r.starts_with(&real) && **r != real)
                        .cloned()
                        .collect();
                    if !held.is_empty() {
                        system_holding.push((at, real, held));
                    }
                }
            }
            // Not every system has /lib32 or /libx32: nothing to grant.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(ConfineError::path("system path", Path::new(path), e)),
        }
    }

    let (handled_access_net, connect_access) = if abi >= NET_ABI {
        (
            (AccessNet::BindTcp | AccessNet::ConnectTcp).bits(),
            BitFlags::from(AccessNet::ConnectTcp).bits(),
        )
    } else {
        (0, 0)
    };
    let mut tcp_ports = if spec.no_tcp {
        Vec::new()
    } else {
        spec.connect_ports.clone()
    };
    tcp_ports.sort_unstable();
    tcp_ports.dedup();
    let scoped = if abi >= SCOPE_ABI {
        Scope::from_all(landlock_abi).bits()
    } else {
        0
    };
    let proc_self_access = if Path::new("/proc/self").exists() {
        (AccessFs::ReadFile | AccessFs::ReadDir).bits()
    } else {
        0
    };

    Ok(Plan {
        attr: RulesetAttr {
            handled_access_fs: rights.handled,
            handled_access_net,
            scoped,
        },
        attr_own_network: RulesetAttr {
            handled_access_fs: rights.handled,
            handled_access_net: if spec.no_tcp { handled_access_net } else { 0 },
            scoped,
        },
        // A spec that grants no write (confined git) writes nothing, not
        // even the view's private tmpfs.
        view_tmp_access: if spec.write_dirs.is_empty() {
            0
        } else {
            rights.write
        },
        paths,
        roots,
        write_roots,
        system_holding,
        view_tmp_narrowed: VIEW_TMP.map(|t| {
            let t = Path::new(OsStr::from_bytes(t.to_bytes()));
            !root_paths
                .iter()
                .any(|r| r.starts_with(t) || !r.is_absolute())
        }),
        file_access: rights.file,
        grant_dir: rights.write | rights.read_exec,
        connect_access,
        tcp_ports,
        proc_self_access,
    })
}

/// Adds a rule, keeping only the rights the kernel accepts on a
/// non-directory (`file_access`) when `fd` is not a directory.
fn push_rule(paths: &mut Vec<PathRule>, fd: OwnedFd, access: u64, file_access: u64) {
    let is_dir = rustix::fs::fstat(&fd)
        .map(|st| FileType::from_raw_mode(st.st_mode).is_dir())
        .unwrap_or(false);
    let access = if is_dir { access } else { access & file_access };
    if access != 0 {
        paths.push(PathRule { fd, access });
    }
}

/// Grants `access` on everything in directory `dir` but the `held`
/// directories beneath it: each entry that holds none of them whole, and
/// the entries of one that does, in turn. A symbolic link gets no rule:
/// what it leads to is judged where it lies. Entries made later are not
/// granted, which only narrows.
fn grant_without(
    dir: &Path,
    held: &[&Path],
    access: u64,
    file_access: u64,
    out: &mut Vec<PathRule>,
) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_symlink() || held.contains(&path.as_path()) {
            continue;
        }
        if held.iter().any(|h| h.starts_with(&path)) {
            grant_without(&path, held, access, file_access, out)?;
            continue;
        }
        let fd = open_path_with(&path, OFlags::NOFOLLOW)?;
        // Swapped for a link since it was listed: judged where it leads.
        if rustix::fs::fstat(&fd)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
        {
            continue;
        }
        push_rule(out, fd, access, file_access);
    }
    Ok(())
}

/// Opens `path` with `O_PATH | O_CLOEXEC` (following symlinks: rules name
/// what a path leads to) on a descriptor above 2, so that the stdio set-up
/// between fork and exec cannot replace it.
fn open_path(path: &Path) -> io::Result<OwnedFd> {
    open_path_with(path, OFlags::empty())
}

/// [`open_path`] with `extra` flags (`O_NOFOLLOW`).
fn open_path_with(path: &Path, extra: OFlags) -> io::Result<OwnedFd> {
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC | extra, Mode::empty())?;
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
}

fn rlimits(spec: &ConfineSpec) -> Vec<(Resource, u64, u64)> {
    // No real-time scheduling and no higher priority than the executor's:
    // a host may grant its user either through these limits (audio
    // groups, `LimitRTPRIO=`), and a `SCHED_FIFO` busy loop starves the
    // host's own work on its CPUs whatever the command's CPU limit.
    let mut out = vec![
        (Resource::Core, 0, 0),
        (Resource::Rtprio, 0, 0),
        (Resource::Nice, 0, 0),
    ];
    if let Some(v) = spec.max_file_size {
        out.push((Resource::Fsize, v, v));
    }
    if let Some(v) = spec.max_processes {
        out.push((Resource::Nproc, v, v));
    }
    if let Some(v) = spec.max_data_bytes {
        out.push((Resource::Data, v, v));
    }
    if let Some(v) = spec.max_cpu_secs {
        // The soft limit sends SIGXCPU (which names the limit in the
        // result); the hard one, a second later, SIGKILL.
        out.push((Resource::Cpu, v, v.saturating_add(1)));
    }
    // Never above the current hard limit: only a privileged process may
    // raise it, and lower is what the caller asked for anyway.
    for (resource, soft, hard) in &mut out {
        if let Some(max) = rustix::process::getrlimit(*resource).maximum {
            *soft = (*soft).min(max);
            *hard = (*hard).min(max);
        }
    }
    out
}

fn rlimit_name(resource: Resource) -> &'static str {
    match resource {
        Resource::Core => "RLIMIT_CORE",
        Resource::Fsize => "RLIMIT_FSIZE",
        Resource::Nproc => "RLIMIT_NPROC",
        Resource::Data => "RLIMIT_DATA",
        Resource::Cpu => "RLIMIT_CPU",
        Resource::Rtprio => "RLIMIT_RTPRIO",
        Resource::Nice => "RLIMIT_NICE",
        _ => "RLIMIT_?",
    }
}

/// Whether fork ignores RLIMIT_NPROC for our credentials (kernel/fork.c:
/// the real user is root, or CAP_SYS_RESOURCE or CAP_SYS_ADMIN). When the
/// capabilities cannot be read, assume it is ignored: the report must not
/// claim what may not hold.
fn nproc_exempt() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_SYS_RESOURCE: u32 = 24;
    if rustix::process::getuid().is_root() {
        return true;
    }
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return true;
    };
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
    match cap_eff {
        Some(caps) => caps & (1 << CAP_SYS_ADMIN | 1 << CAP_SYS_RESOURCE) != 0,
        None => true,
    }
}

impl Prepared {
    /// What [`apply_in_child`](Self::apply_in_child) enforces.
    pub fn report(&self) -> &ConfinementReport {
        &self.inner.report
    }

    /// Whether a child under this confinement can change nothing on any
    /// filesystem but its private tmpfs mounts and `/dev/null`: Landlock is
    /// enforced, handles every right that writes, truncates, creates,
    /// removes, renames or links (so ABI 3 or later), and the spec grants
    /// no write directory. Confined git runs so; the executor then skips
    /// the protected-paths record and check, which cannot find anything.
    pub fn writes_nothing(&self) -> bool {
        self.inner.writes_nothing
    }

    /// Whether a child under this confinement has a file size limit
    /// (`RLIMIT_FSIZE`, from [`ConfineSpec::max_file_size`]): a write past
    /// it gets `SIGXFSZ`.
    pub fn limits_file_size(&self) -> bool {
        self.inner
            .rlimits
            .iter()
            .any(|&(r, _, _)| r == Resource::Fsize)
    }

    /// This confinement narrowed to `dirs`: a second Landlock layer that
    /// grants, of the filesystem, only what lies beneath one of `dirs` and
    /// the system paths the first layer grants (with the same `/proc` and
    /// private tmpfs rules; a system path that holds one of the spec's
    /// directories, as `/usr` holds `/usr/src/app`, is granted without
    /// it). Landlock layers only ever take rights away, so
    /// the command keeps, beneath each of `dirs`, exactly the rights the
    /// first layer gave it there and loses every granted directory outside
    /// them; a directory outside every granted one grants nothing. A file
    /// among `dirs` grants that file alone. An empty
    /// `dirs` leaves the command none of the spec's directories. Network
    /// rules are the first layer's alone.
    ///
    /// # Errors
    ///
    /// `E_CONFINE_UNAVAILABLE` when this confinement enforces no Landlock
    /// layer (mode `Off`, or a kernel without Landlock): nothing could
    /// narrow the command, so it must not run as if narrowed. `E_IO` when
    /// a descriptor cannot be duplicated, or a system path that holds one
    /// of the spec's directories cannot be listed.
    pub fn narrowed(&self, dirs: &[BorrowedFd<'_>]) -> Result<Prepared, ConfineError> {
        let Some(plan) = &self.inner.landlock else {
            return Err(ConfineError {
                kind: ConfineErrorKind::Unavailable,
                message: "cannot narrow the command to the directories asked for: no Landlock \
                          ruleset is enforced here"
                    .to_owned(),
                missing: vec![ConfinePart::Landlock],
                source: None,
            });
        };
        let dup = |fd: BorrowedFd<'_>| {
            rustix::io::fcntl_dupfd_cloexec(fd, 3).map_err(|e| ConfineError::kernel(e.into()))
        };
        let mut paths = Vec::with_capacity(dirs.len() + plan.paths.len() - plan.roots);
        for &dir in dirs {
            // A file given among them gets what the kernel allows on a file
            // (more would fail the command's start with EINVAL).
            push_rule(&mut paths, dup(dir)?, plan.grant_dir, plan.file_access);
        }
        let narrow_dirs = paths.len();
        for (k, rule) in plan.paths.iter().enumerate().skip(plan.roots) {
            // A system path that holds one of the spec's directories (a
            // workspace at /usr/src/app) would grant the command all of
            // it: granted instead without the branches leading there.
            match plan.system_holding.iter().find(|(i, _, _)| *i == k) {
                Some((_, sys, held)) => {
                    let held: Vec<&Path> = held.iter().map(PathBuf::as_path).collect();
                    grant_without(sys, &held, rule.access, plan.file_access, &mut paths)
                        .map_err(|e| ConfineError::path("system path", sys, e))?;
                }
                None => paths.push(PathRule {
                    fd: dup(rule.fd.as_fd())?,
                    access: rule.access,
                }),
            }
        }
        Ok(Prepared {
            inner: Arc::clone(&self.inner),
            narrow: Some(paths.into()),
            narrow_dirs,
        })
    }

    /// What the executor lets the command connect to, where it judges
    /// `connect` ([`crate::connect`]): `None` where it does not.
    pub(crate) fn socket_rules(&self) -> Option<crate::connect::SocketRules> {
        let plan = self.inner.landlock.as_ref()?;
        if !self.inner.seccomp.as_ref()?.judges_sockets() {
            return None;
        }
        fn fds(rules: &[PathRule]) -> Vec<BorrowedFd<'_>> {
            rules.iter().map(|r| r.fd.as_fd()).collect()
        }
        let write_roots = fds(&plan.paths[plan.write_roots.clone()]);
        let narrowing = self.narrow.as_deref().map(|n| fds(&n[..self.narrow_dirs]));
        // Below ABI 4 Landlock does not judge TCP: the executor, which
        // sees every connect here, judges it by the granted ports as
        // Landlock would from ABI 4.
        Some(crate::connect::SocketRules::new(
            &write_roots,
            narrowing.as_deref(),
            plan.tcp_ports.clone(),
        ))
    }

    /// Whether [`Prepared::narrowed`] made this one.
    pub fn is_narrowed(&self) -> bool {
        self.narrow.is_some()
    }

    /// The view to build when the command runs in namespaces of its own;
    /// `None` when it must not (`Off` mode, or network access granted).
    pub(crate) fn view(&self) -> Option<&ViewPlan> {
        self.inner.view.as_ref()
    }

    /// What is enforced for a command run in namespaces of its own with
    /// the view (`root`: the caller is root).
    pub(crate) fn report_in_namespaces(&self, root: bool) -> ConfinementReport {
        let mut r = self.inner.report.clone();
        r.namespaces = true;
        r.view = true;
        r.missing
            .retain(|p| !matches!(p, ConfinePart::Namespaces | ConfinePart::View));
        // TCP is left to the network namespace (loopback only), not to
        // Landlock's port rules, unless the spec refuses it outright.
        let no_tcp = self
            .inner
            .landlock
            .as_ref()
            .is_some_and(|p| p.attr_own_network.handled_access_net != 0);
        r.net = no_tcp;
        if r.seccomp {
            // Inside the namespace UDP reaches nothing and is refused.
            r.seccomp_refuses = seccomp::refused_names(
                SeccompSpec { udp: false },
                Listen::OwnNetwork,
                false,
                false,
                false,
            );
        }
        r.notes.retain(|n| !n.starts_with("the child runs as root"));
        if !no_tcp {
            r.notes.push(
                "TCP is confined by the command's network namespace, whose only interface is \
                 its own loopback; Landlock's port rules are not used"
                    .to_owned(),
            );
        }
        if root {
            r.notes.push(
                "the child runs as root in its user namespace (an identity map): it has lost \
                 CAP_SYS_*, CAP_NET_* and CAP_MKNOD, keeps the file capabilities such as \
                 CAP_DAC_OVERRIDE within the namespace, and can read root-only files in \
                 the view"
                    .to_owned(),
            );
        }
        r
    }

    /// Confines the calling process: rlimits, no_new_privs, then Landlock.
    ///
    /// In order: `prlimit64(0, …)` sets soft and hard RLIMIT_CORE,
    /// RLIMIT_RTPRIO and RLIMIT_NICE to 0, RLIMIT_FSIZE, RLIMIT_NPROC,
    /// RLIMIT_DATA and RLIMIT_CPU to the spec's values;
    /// `prctl(PR_SET_NO_NEW_PRIVS, 1)`; then, unless the mode is `Off` or the
    /// kernel lacks Landlock, `landlock_create_ruleset`, one
    /// `landlock_add_rule` per granted path and port and for the process's
    /// own `/proc/self`, and `landlock_restrict_self`; unless the mode is
    /// `Off`, the `CAP_NET_*`, `CAP_SYS_*`, `CAP_MKNOD` and
    /// `CAP_LINUX_IMMUTABLE` capabilities are dropped (`prctl`, `capset`) and the seccomp filter installed. Only raw system
    /// calls: no allocation, no lock, so it is safe between fork and exec.
    /// Meant for `std::os::unix::process::CommandExt::pre_exec`.
    ///
    /// # Errors
    ///
    /// The first failing call's OS error; the child should then not exec
    /// (`pre_exec` makes the spawn fail with it).
    ///
    /// # Safety
    ///
    /// Call it only in a single-threaded child between fork and exec (a
    /// `pre_exec` closure). The restrictions are irreversible and apply to
    /// the calling thread and everything it later starts: called in the
    /// parent it would confine the parent's thread. `self` must have been
    /// cloned into the child by the parent (as a closure capture is), so
    /// that its file descriptors are open there.
    ///
    /// # References
    ///  - [landlock_restrict_self(2)](https://man7.org/linux/man-pages/man2/landlock_restrict_self.2.html)
    ///  - [prctl(2) PR_SET_NO_NEW_PRIVS](https://man7.org/linux/man-pages/man2/prctl.2.html)
    ///  - [prlimit(2)](https://man7.org/linux/man-pages/man2/prlimit.2.html)
    pub unsafe fn apply_in_child(&self) -> io::Result<()> {
        // SAFETY: forwarded: the caller is the child between fork and exec.
        unsafe { self.apply_raw(Listen::Refused, false) }
            .map(drop)
            .map_err(|e| io::Error::from_raw_os_error(e.into_raw()))
    }

    /// Whether the seccomp filter hands `listen` to a supervisor (the
    /// executor), which must then receive the listener from the child.
    pub(crate) fn notifies(&self) -> bool {
        self.inner.seccomp.as_ref().is_some_and(Filters::notifies)
    }

    /// [`Prepared::apply_in_child`] with the kernel's error number: every
    /// call is a raw system call that neither sets nor reads `errno`, so a
    /// child that shares the executor's memory (and so a thread's `errno`)
    /// may call it.
    ///
    /// With [`Listen::Supervised`], `listen` goes to a supervisor through
    /// the returned seccomp listener (close-on-exec), which the caller
    /// hands to the executor; with [`Listen::Refused`], every `listen`
    /// answers `ENOSYS`; with [`Listen::OwnNetwork`] (`in_view` set) the
    /// child is in the view and a network namespace of its own: `listen`
    /// is allowed, Landlock leaves TCP alone and grants the view's private
    /// tmpfs mounts.
    ///
    /// # Safety
    ///
    /// As for [`Prepared::apply_in_child`].
    pub(crate) unsafe fn apply_raw(
        &self,
        listen: Listen,
        in_view: bool,
    ) -> Result<Option<RawFd>, Errno> {
        for &(resource, cur, max) in &self.inner.rlimits {
            let limit = Rlimit64 { cur, max };
            // SAFETY: pid 0 is the calling process; `limit` is a live
            // `struct rlimit64`; a NULL old-limit pointer is allowed.
            unsafe {
                syscalls::syscall!(
                    Sysno::prlimit64,
                    0,
                    resource as u32,
                    &limit as *const Rlimit64,
                    0
                )
            }?;
        }

        // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
        unsafe { syscalls::syscall!(Sysno::prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }?;

        if let Some(plan) = &self.inner.landlock {
            let layers = [
                Some((&plan.paths[..], false)),
                self.narrow.as_deref().map(|n| (n, true)),
            ];
            for (paths, narrowing) in layers.into_iter().flatten() {
                let ruleset = build_ruleset(plan, paths, in_view, narrowing)?;
                // SAFETY: `ruleset` is a Landlock ruleset descriptor we own;
                // flags 0.
                let r = unsafe { syscalls::syscall!(Sysno::landlock_restrict_self, ruleset, 0) };
                close_raw(ruleset);
                r?;
            }
        }
        // In the view the command's capabilities were dropped already
        // (`ns::drop_caps`), and are not the host network's anyway.
        if self.inner.drop_host_caps && !in_view {
            crate::ns::drop_host_caps()?;
        }
        match &self.inner.seccomp {
            Some(filters) => filters.install_raw(listen),
            None => Ok(None),
        }
    }
}

/// Closes a descriptor with a raw system call (errors ignored, as `OwnedFd`
/// does).
fn close_raw(fd: RawFd) {
    // SAFETY: the caller owns `fd` and never uses it again.
    let _ = unsafe { syscalls::syscall!(Sysno::close, fd) };
}

/// Builds the plan's ruleset with raw system calls only (no allocation, no
/// `errno`), so the child may call it; returns the ruleset's descriptor,
/// which the caller closes. `paths`: the plan's own, or a narrowing
/// layer's (`narrowing`: the filesystem alone is handled, the network is
/// left to the plan's layer, and only the view's tmpfs mounts no spec
/// directory lies beneath are granted). `in_view`: the caller is inside the view, in a
/// network namespace of its own.
fn build_ruleset(
    plan: &Plan,
    paths: &[PathRule],
    in_view: bool,
    narrowing: bool,
) -> Result<RawFd, Errno> {
    let fs_only = RulesetAttr {
        handled_access_fs: plan.attr.handled_access_fs,
        handled_access_net: 0,
        scoped: 0,
    };
    let attr = if narrowing {
        &fs_only
    } else if in_view {
        &plan.attr_own_network
    } else {
        &plan.attr
    };
    // SAFETY: `attr` is a live `struct landlock_ruleset_attr` prefix of
    // the size passed; the kernel only reads it.
    let ruleset = unsafe {
        syscalls::syscall!(
            Sysno::landlock_create_ruleset,
            attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0
        )
    }? as RawFd;
    let rules = || -> Result<(), Errno> {
        for rule in paths {
            add_path_rule(ruleset, rule.fd.as_raw_fd(), rule.access)?;
        }
        if plan.proc_self_access != 0 {
            // Outside the view, /proc shows the host's processes: only the
            // first process's own /proc/<pid> is granted. In the view /proc
            // is a fresh mount of the command's own PID namespace, which
            // shows its processes alone: it is granted whole, so that every
            // process of the tree can read its own /proc/self (and
            // /proc/meminfo, /proc/cpuinfo) as programs expect.
            let proc = if in_view { c"/proc" } else { c"/proc/self" };
            // SAFETY: a NUL-terminated literal path; O_PATH opens nothing's
            // content.
            let opened = unsafe {
                syscalls::syscall!(
                    Sysno::openat,
                    libc::AT_FDCWD,
                    proc.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    0
                )
            };
            // No /proc (or no memory): grant nothing, fail closed.
            if let Ok(proc_self) = opened {
                let r = add_path_rule(ruleset, proc_self as RawFd, plan.proc_self_access);
                close_raw(proc_self as RawFd);
                r?;
            }
        }
        if in_view && plan.view_tmp_access != 0 {
            for (k, path) in VIEW_TMP.iter().enumerate() {
                if narrowing && !plan.view_tmp_narrowed[k] {
                    continue;
                }
                // SAFETY: a NUL-terminated literal path, opened O_PATH.
                let opened = unsafe {
                    syscalls::syscall!(
                        Sysno::openat,
                        libc::AT_FDCWD,
                        path.as_ptr(),
                        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                        0
                    )
                };
                // Missing from the view: nothing to grant.
                if let Ok(fd) = opened {
                    let r = add_path_rule(ruleset, fd as RawFd, plan.view_tmp_access);
                    close_raw(fd as RawFd);
                    r?;
                }
            }
        }
        // Below ABI 4 (`connect_access` 0) Landlock takes no port rule.
        let ports: &[u16] = if in_view || narrowing || plan.connect_access == 0 {
            &[]
        } else {
            &plan.tcp_ports
        };
        for &port in ports {
            let attr = NetPortAttr {
                allowed_access: plan.connect_access,
                port: u64::from(port),
            };
            // SAFETY: `ruleset` is ours; `attr` is a live
            // `struct landlock_net_port_attr`; flags 0.
            unsafe {
                syscalls::syscall!(
                    Sysno::landlock_add_rule,
                    ruleset,
                    LANDLOCK_RULE_NET_PORT,
                    &attr as *const NetPortAttr,
                    0
                )
            }?;
        }
        Ok(())
    };
    match rules() {
        Ok(()) => Ok(ruleset),
        Err(e) => {
            close_raw(ruleset);
            Err(e)
        }
    }
}

fn add_path_rule(ruleset: RawFd, parent_fd: RawFd, access: u64) -> Result<(), Errno> {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd,
    };
    // SAFETY: `ruleset` is ours; `attr` is a live (packed)
    // `struct landlock_path_beneath_attr`; `parent_fd` is open; flags 0.
    unsafe {
        syscalls::syscall!(
            Sysno::landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            std::ptr::addr_of!(attr),
            0
        )
    }
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bit(a: AccessFs) -> u64 {
        BitFlags::from(a).bits()
    }

    #[test]
    fn uapi_layouts_match_the_kernel() {
        assert_eq!(std::mem::size_of::<PathBeneathAttr>(), 12);
        assert_eq!(std::mem::size_of::<NetPortAttr>(), 16);
        assert_eq!(std::mem::size_of::<RulesetAttr>(), 24);
        assert_eq!(std::mem::size_of::<Rlimit64>(), 16);
    }

    #[test]
    fn missing_parts_follow_the_abi() {
        use ConfinePart::*;
        assert_eq!(missing_parts(None), vec![Landlock, Network, Scoping]);
        assert_eq!(missing_parts(Some(3)), vec![Network, Scoping]);
        assert_eq!(missing_parts(Some(5)), vec![Scoping]);
        assert!(missing_parts(Some(6)).is_empty());
    }

    #[test]
    fn write_rights_never_make_devices() {
        let r = Rights::new(ABI::V6);
        assert_eq!(r.write & bit(AccessFs::MakeChar), 0);
        assert_eq!(r.write & bit(AccessFs::MakeBlock), 0);
        assert_eq!(r.write & bit(AccessFs::IoctlDev), 0);
        assert_ne!(r.write & bit(AccessFs::Truncate), 0);
        assert_eq!(r.read_exec & bit(AccessFs::WriteFile), 0);
    }
}
