//! The sandgate policy file: strict TOML, gate rules, digest, summary,
//! and the network rules it grants.
//!
//! A policy states the whole authority of an agent: the roots it may read,
//! the one root it may write, the patterns it may not write, its byte caps,
//! whether and how it may run commands, which hosts it may reach, and how
//! many operations of each kind it gets. This crate turns the file into an
//! immutable [`Policy`] or refuses it with a [`PolicyError`] that holds every
//! independent problem, in file order, each naming the dotted key, the line
//! and column, and showing the line with a caret under the offending part
//! (and a "did you mean" for a misspelt key or word); the line of a
//! `[[net.credentials]]` entry is not shown (it may hold a credential).
//!
//! The crate is pure data. It reads the policy file itself and, to apply the
//! gate rules, checks that each configured root exists and is a directory
//! and canonicalizes it; it opens nothing else, and it enforces nothing: the
//! facade hands the resolved settings to the mechanisms that do. The
//! network rules themselves (entry syntax, address classes, the authorizer)
//! live in `sandgate-netguard`; this crate parses `net.allow` with it,
//! applies restricted mode's refusals at load, and produces its
//! [`NetRules`] ([`Policy::net_rules`]).
//!
//! ```no_run
//! use sandgate_policy::Policy;
//!
//! let policy = Policy::load("agent-policy.toml")?;
//! println!("{}", policy.summary());
//! let decision = policy.authorize("https", "api.example.com", None, None);
//! assert!(decision.allowed || !decision.reason.is_empty());
//! # Ok::<(), sandgate_policy::PolicyError>(())
//! ```
//!
//! **Threat model.** The file is written by the operator and trusted; the
//! agent that runs under it is not. So the gate refuses, at load, settings
//! that would quietly hand the agent more than the file seems to say: a
//! write root that holds the policy file (the agent could rewrite its own
//! policy), a budget for a capability that is not granted (a contradiction
//! that usually hides a mistake), and in restricted mode process and network
//! grants that reach outside the confinement (arbitrary programs, every
//! local port, private networks, the cloud metadata service).
//!
//! **Choices the policy format leaves open.**
//!
//! - The digest reads `sha256:<64 lowercase hex>`, over the exact bytes.
//! - `exec.shell` must be an absolute path (its existence is the executor's
//!   business); `exec.env_inherit` names may not be empty or hold `=`.
//! - A confined-git `process_allow` entry needs a root to run in, so it is
//!   refused when the policy grants no read or write root.
//! - `budgets.exec_ops` needs `exec.enabled = true`, even when
//!   `process_allow` lists confined git (fail closed; say so if the facade
//!   counts git runs as exec operations and needs this relaxed).
//! - `*.suffix` admits names strictly below `suffix`, at any depth, never
//!   `suffix` itself; list both for both.
//! - Loopback: restricted mode reaches it only through a port-qualified
//!   loopback literal; trusted_host also honours bare loopback literals and
//!   loopback names (`localhost`) as the operator's grant. In every mode a
//!   name that is not a loopback entry but resolves to loopback is refused
//!   (DNS rebinding), as is any redirect to loopback and any unspecified
//!   address (`0.0.0.0` reaches the local host on Linux).
//! - Address classes: IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6
//!   addresses are judged by the IPv4 address they carry (a 6to4 address of
//!   a loopback or unspecified IPv4 address counts as private); 100.64/10
//!   (shared address space), fec0::/10 and the local-use NAT64 prefix
//!   64:ff9b:1::/48 count as private, 240/4 as reserved.
//! - `[[net.credentials]]` names where a value is read from (`env` or
//!   `file`), never the value: this crate reads neither (the executor does,
//!   when it starts). Its `host` and that of a `[[net.rules]]` entry is one
//!   exact name that `net.allow` must grant on the entry's port (443 when
//!   none is given); `header` defaults to `Authorization`; two entries for
//!   the same host, port and header are refused.
//! - An unbracketed IPv6 entry whose last group could be read as a port
//!   (`::1:80`, `2001:db8::1:443`) is refused as ambiguous; write
//!   `[addr]` or `[addr]:PORT`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod decode;
mod depth;
mod error;
mod gate;
mod net;
mod options;
mod shape;
mod summary;

use std::fs::File;
use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sandgate_netguard::Hop;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use decode::{
    DEFAULT_MAX_MEMORY_BYTES, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_READ_BYTES, DEFAULT_MAX_TASKS,
    DEFAULT_MAX_WRITE_BYTES, DEFAULT_SHELL, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, MIN_CPU_MS,
    MIN_MEMORY_BYTES, MIN_TASKS,
};
pub use depth::MAX_DEPTH;
pub use error::{Location, PolicyError, PolicyErrorKind, Problem, MAX_PROBLEMS, MAX_SHOWN_LINE};
pub use net::{CredentialScheme, CredentialSource, NetCredential, NetRequestRule, RuleAction};
pub use options::{
    BudgetOptions, CredentialOptions, ExecutorOptions, FsOptions, NetOptions, PolicyOptions,
    RequestRuleOptions,
};
pub use sandgate_codes::{shown, terminal_unsafe};
pub use sandgate_netguard::{
    classify, AddrClass, MalformedEntry, NetDecision, NetEntry, NetHost, Rules as NetRules,
};
pub use shape::KNOWN_KEYS;
pub use summary::{Summary, SummaryNet};

/// The largest policy file [`Policy::load`] reads: 1 MiB. A policy is a
/// short list of grants; anything larger is a mistake (or `/dev/zero`).
pub const MAX_POLICY_BYTES: u64 = 1024 * 1024;

/// The three `process_allow` entries restricted mode admits: git run through
/// the confined adapter (confined git).
pub const CONFINED_GIT: [&str; 3] = ["git:status", "git:diff", "git:log"];

/// `security_mode`: how far the policy may reach beyond confinement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecurityMode {
    /// The default: only confined grants (the gate rules), `.git`
    /// protected, no private network or loopback beyond port-qualified
    /// literals.
    #[default]
    Restricted,
    /// Operator-approved host integrations: any `process_allow` entry,
    /// bare loopback grants, private literals. No confinement claim.
    TrustedHost,
}

impl SecurityMode {
    /// The word used in the policy file (`"restricted"`, `"trusted_host"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            SecurityMode::Restricted => "restricted",
            SecurityMode::TrustedHost => "trusted_host",
        }
    }
}

/// `exec.confine`: how kernel confinement of the shell is applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confine {
    /// No kernel confinement.
    Off,
    /// The default: use what the kernel offers and report what was enforced.
    #[default]
    BestEffort,
    /// Refuse to run (`E_CONFINE_UNAVAILABLE`) if any part is missing.
    Required,
}

impl Confine {
    /// The word used in the policy file (`"off"`, `"best_effort"`,
    /// `"required"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Confine::Off => "off",
            Confine::BestEffort => "best_effort",
            Confine::Required => "required",
        }
    }
}

/// File byte caps and the overwrite switch (`[fs]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Limits {
    /// `fs.max_read_bytes`: the most one read returns (positive).
    pub max_read_bytes: u64,
    /// `fs.max_write_bytes`: the most one write accepts (positive).
    pub max_write_bytes: u64,
    /// `fs.allow_overwrite`: whether replacing an existing file may be
    /// granted (a tool call must also ask for it).
    pub allow_overwrite: bool,
}

/// The `[exec]` settings. With no `[exec]` table, or without
/// `enabled = true`, exec is disabled and the other fields hold defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExecPolicy {
    /// `exec.enabled`: whether shell commands may run (default false).
    pub enabled: bool,
    /// `exec.shell`: absolute path of the shell run as `shell -c command`.
    pub shell: String,
    /// `exec.timeout_ms`: 1..=86_400_000.
    pub timeout_ms: u64,
    /// `exec.max_output_bytes`: stdout and stderr together (positive).
    pub max_output_bytes: u64,
    /// `exec.max_memory_bytes`: memory of the command's whole tree
    /// (default 2 GiB, at least 16 MiB).
    pub max_memory_bytes: u64,
    /// `exec.max_tasks`: processes and threads of the command's whole
    /// tree (default 4096, at least 2).
    pub max_tasks: u64,
    /// `exec.max_cpu_ms`: CPU time of the command's whole tree (default
    /// none, at least 10).
    pub max_cpu_ms: Option<u64>,
    /// Which of the limits with a default the file states itself (so
    /// that `confine = "required"` demands them).
    #[serde(skip)]
    pub stated_limits: StatedLimits,
    /// `exec.env_inherit`: extra variable names passed from the host,
    /// credentials included (the operator's lever).
    pub env_inherit: Vec<String>,
    /// `exec.confine`.
    pub confine: Confine,
    /// `exec.process_allow`: in restricted mode only [`CONFINED_GIT`]
    /// entries.
    pub process_allow: Vec<String>,
}

/// Which resource limits with a default a policy file states itself
/// (`exec.max_cpu_ms` has none: it is stated when present).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatedLimits {
    /// `exec.max_memory_bytes` is written in the file.
    pub memory: bool,
    /// `exec.max_tasks` is written in the file.
    pub tasks: bool,
}

/// `[budgets]`: operation ceilings; `None` is unlimited, `Some(0)` none
/// allowed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Budgets {
    /// `budgets.fs_ops`.
    pub fs_ops: Option<u64>,
    /// `budgets.exec_ops`.
    pub exec_ops: Option<u64>,
    /// `budgets.net_ops`.
    pub net_ops: Option<u64>,
}

/// A resolved, immutable policy.
///
/// Cloning is cheap (the settings are shared). Every root is a canonical
/// absolute path that existed and was a directory at load.
#[derive(Clone, Debug)]
pub struct Policy {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    mode: SecurityMode,
    read_roots: Vec<PathBuf>,
    read_roots_named: Vec<PathBuf>,
    write_root: Option<PathBuf>,
    write_root_named: Option<PathBuf>,
    deny_write: Vec<String>,
    limits: Limits,
    exec: ExecPolicy,
    net: NetRules,
    credentials: Vec<NetCredential>,
    request_rules: Vec<NetRequestRule>,
    budgets: Budgets,
    digest: String,
}

impl Policy {
    /// Reads and resolves the policy file at `path`.
    ///
    /// Relative roots resolve against the file's directory; the write root
    /// may not contain that directory (nor, when the file is a symlink, the
    /// directory of the file it points to), nor lie on the file's
    /// filesystem when the file has a second name (a hard link, which a
    /// command could rewrite in place). The digest is taken over the exact
    /// bytes read. Files over [`MAX_POLICY_BYTES`] are refused, and so is
    /// anything that is not a regular file (a FIFO would block the open
    /// until some writer came; a device has no bytes of its own to digest).
    /// The open itself never waits: the name may be swapped for a FIFO
    /// after any check of it.
    pub fn load(path: impl AsRef<Path>) -> Result<Policy, PolicyError> {
        let path = path.as_ref();
        // Judged before the open (a device is not opened), and again on
        // what was opened: the name may have changed in between, so the
        // open is `O_NONBLOCK`, which a FIFO without a writer cannot hold
        // up, and `O_NOCTTY`, so a terminal never becomes this process's
        // controlling one. Once the file is known to be regular the flag
        // is cleared (it means nothing there, but the read should not
        // depend on that).
        if let Ok(meta) = std::fs::metadata(path) {
            regular_file(path, &meta)?;
        }
        use rustix::fs::OFlags;
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        let file = File::from(
            rustix::fs::open(path, flags, rustix::fs::Mode::empty())
                .map_err(|e| PolicyError::read(path, e.into()))?,
        );
        let links = {
            use std::os::unix::fs::MetadataExt;
            let meta = file.metadata().map_err(|e| PolicyError::read(path, e))?;
            regular_file(path, &meta)?;
            rustix::fs::fcntl_getfl(&file)
                .and_then(|f| rustix::fs::fcntl_setfl(&file, f - OFlags::NONBLOCK))
                .map_err(|e| PolicyError::read(path, e.into()))?;
            (meta.dev(), meta.nlink())
        };
        let mut bytes = Vec::new();
        file.take(MAX_POLICY_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| PolicyError::read(path, e))?;
        if bytes.len() as u64 > MAX_POLICY_BYTES {
            return Err(PolicyError::new(
                PolicyErrorKind::Read,
                None,
                format!(
                    "the policy file `{}` is over {MAX_POLICY_BYTES} bytes",
                    shown(path)
                ),
            )
            .in_file(path));
        }
        let base_dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        Policy::resolve_bytes(&bytes, base_dir, Some(path), Some(links))
            .map_err(|e| e.in_file(path))
    }

    /// Resolves a policy from its bytes, as if read from a file in
    /// `base_dir` (relative roots resolve against it).
    ///
    /// The write-root containment gate protects `base_dir` and, when
    /// `policy_path` is given, the directory of that file (as named and as
    /// its symlinks resolve). Tests pass the path of a notional policy
    /// file, or `None` to protect `base_dir` alone.
    ///
    /// Every independent problem is reported at once, in file order: all
    /// syntax errors and duplicated keys; or else every unknown key, wrong
    /// type and unknown word, together with every gate rule broken by the
    /// keys that were well-formed.
    pub fn from_bytes(
        bytes: &[u8],
        base_dir: &Path,
        policy_path: Option<&Path>,
    ) -> Result<Policy, PolicyError> {
        Policy::resolve_bytes(bytes, base_dir, policy_path, None)
    }

    /// [`Policy::from_bytes`], with the file's `(device, number of
    /// names)` when it was read from one: a policy file with a second name
    /// keeps the write roots of its filesystem out (the name may lie
    /// there).
    fn resolve_bytes(
        bytes: &[u8],
        base_dir: &Path,
        policy_path: Option<&Path>,
        links: Option<(u64, u64)>,
    ) -> Result<Policy, PolicyError> {
        let digest = digest_of(bytes);
        let text = std::str::from_utf8(bytes).map_err(|e| {
            PolicyError::new(
                PolicyErrorKind::Syntax,
                None,
                format!(
                    "the policy file is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ),
            )
        })?;
        let decoded = decode::decode(text).map_err(|p| PolicyError::found(p, text))?;
        let dirs = gate::PolicyDirs::resolve(base_dir, policy_path, links)?;
        let inner = gate::resolve(
            decoded.raw,
            &decoded.removed,
            decoded.problems,
            &dirs,
            digest,
        )
        .map_err(|p| PolicyError::found(p, text))?;
        Ok(Policy {
            inner: Arc::new(inner),
        })
    }

    /// `security_mode`.
    pub fn security_mode(&self) -> SecurityMode {
        self.inner.mode
    }

    /// `fs.read_roots`, canonical and absolute, in the file's order (the
    /// first root that holds a name wins).
    pub fn read_roots(&self) -> &[PathBuf] {
        &self.inner.read_roots
    }

    /// `fs.write_root`, canonical and absolute, if one is granted.
    pub fn write_root(&self) -> Option<&Path> {
        self.inner.write_root.as_deref()
    }

    /// `fs.read_roots` as named: absolute, in the same order as
    /// [`read_roots`](Self::read_roots), with their symlinks kept. Only for
    /// recognising a host path spelled through a symlinked root; a root is
    /// opened by its canonical path.
    pub fn read_roots_as_named(&self) -> &[PathBuf] {
        &self.inner.read_roots_named
    }

    /// `fs.write_root` as named (absolute, symlinks kept); see
    /// [`read_roots_as_named`](Self::read_roots_as_named).
    pub fn write_root_as_named(&self) -> Option<&Path> {
        self.inner.write_root_named.as_deref()
    }

    /// `fs.deny_write`, verbatim. The patterns are validated by the guard
    /// that compiles them, not here.
    pub fn deny_write(&self) -> &[String] {
        &self.inner.deny_write
    }

    /// The byte caps and overwrite switch.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// The `[exec]` settings.
    pub fn exec(&self) -> &ExecPolicy {
        &self.inner.exec
    }

    /// `net.allow`, parsed, in the file's order.
    pub fn net_allow(&self) -> &[NetEntry] {
        self.inner.net.allow()
    }

    /// `net.allow_http`.
    pub fn allow_http(&self) -> bool {
        self.inner.net.allow_http()
    }

    /// The network rules the policy grants (`security_mode`, `net.allow`,
    /// `net.allow_http`), for the mechanisms that enforce them: the
    /// confined fetch, and anything else that dials on the agent's behalf.
    pub fn net_rules(&self) -> &NetRules {
        &self.inner.net
    }

    /// `[[net.credentials]]`: the headers the shell's egress proxy sets on
    /// requests to each host (the values are read by the executor when it
    /// starts, from their sources; the policy holds none).
    pub fn net_credentials(&self) -> &[NetCredential] {
        &self.inner.credentials
    }

    /// `[[net.rules]]`: the method and path rules of the hosts the shell's
    /// egress proxy intercepts. For a request to such a host: one that
    /// matches a `deny` rule is refused; when the host has any `allow`
    /// rule, one that matches none of them is refused; the rest pass. A
    /// rule matches when its methods (any, if none are listed) hold the
    /// request's and one of its path prefixes (any, if none) holds the
    /// request's path, at a `/` boundary.
    pub fn net_request_rules(&self) -> &[NetRequestRule] {
        &self.inner.request_rules
    }

    /// `[budgets]`.
    pub fn budgets(&self) -> Budgets {
        self.inner.budgets
    }

    /// The digest of the policy file's exact bytes: `"sha256:"` followed by
    /// 64 lowercase hex digits.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// What the policy grants, for people (`Display`) and programs
    /// (`to_json`).
    pub fn summary(&self) -> Summary {
        Summary::of(self)
    }

    /// Decides whether a request to `scheme://host:port` may be made.
    ///
    /// - `scheme`: `https` and `wss` (default port 443); `http` and `ws`
    ///   (default port 80) only with `net.allow_http`; any other is refused.
    /// - `host`: a DNS name (matched case-insensitively), an IPv4 literal,
    ///   or an IPv6 literal with or without brackets. Anything else,
    ///   including spellings like `0x7f.1` that some resolvers read as
    ///   addresses, is refused.
    /// - `port`: the explicit port, or `None` for the scheme's default.
    /// - `resolved_ip`: the address about to be dialled. Pass it: names are
    ///   matched without it, but the address rules (restricted mode refuses
    ///   private, link-local, unspecified, reserved and multicast
    ///   addresses; loopback needs an entry that grants it) can only apply
    ///   to an address they are shown. Call once before resolving and again
    ///   with each address before connecting.
    ///
    /// Entries: `host` admits any port, `host:PORT` one port, `*.suffix`
    /// strict subdomains of `suffix` at any depth (not `suffix` itself: list
    /// it too for that). The first matching entry decides.
    pub fn authorize(
        &self,
        scheme: &str,
        host: &str,
        port: Option<u16>,
        resolved_ip: Option<IpAddr>,
    ) -> NetDecision {
        self.inner
            .net
            .authorize(Hop::First, scheme, host, port, resolved_ip)
    }

    /// Like [`authorize`](Policy::authorize), for the target of a redirect
    /// hop: the same rules, and loopback (a loopback literal, a loopback
    /// name, or a loopback `resolved_ip`) is always refused, the granted
    /// port included, in every mode.
    pub fn authorize_redirect(
        &self,
        scheme: &str,
        host: &str,
        port: Option<u16>,
        resolved_ip: Option<IpAddr>,
    ) -> NetDecision {
        self.inner
            .net
            .authorize(Hop::Redirect, scheme, host, port, resolved_ip)
    }
}

/// Refuses a policy path that is not a regular file, naming what it is.
fn regular_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), PolicyError> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a file"
    };
    Err(PolicyError::new(
        PolicyErrorKind::Read,
        None,
        format!(
            "the policy file `{}` is not a regular file ({what})",
            shown(path)
        ),
    )
    .in_file(path))
}

fn digest_of(bytes: &[u8]) -> String {
    sandgate_codes::sha256_text(&Sha256::digest(bytes).into())
}
