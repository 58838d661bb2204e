//! sandgate's Model Context Protocol server: a policy's confined tools for
//! any MCP host.
//!
//! The tools carry the names and argument shapes of the reference
//! filesystem server, so a host configuration switches by changing its
//! command; each call goes through one [`Sandbox`] (the
//! policy's roots, deny patterns, caps, budgets and audit), so what the
//! kernel refuses the model reads as a tool result with `isError: true`
//! naming the code. Protocol errors (an unknown tool, arguments that do not
//! fit the tool's schema) are JSON-RPC errors. The server ends only when its
//! input closes.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let policy = sandgate::policy::Policy::load("policy.toml")?;
//! let server = sandgate_mcp::Server::from_policy(&policy, None, Vec::new())?;
//! server.serve_stdio().await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

/// Says a line on stderr through [`say`].
macro_rules! say {
    ($($t:tt)*) => {
        $crate::say(format_args!($($t)*))
    };
}

pub mod audit;
mod edits;
mod inline;
pub mod lines;
pub mod paths;
pub mod starter;
pub mod tools;
pub mod transport;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use sandgate::policy::Policy;
use sandgate::rootfs::{ErrorKind, Root};
use sandgate::{AuditSink, Error, ErrorCode, Executor, Fetcher, RelPath, Sandbox, SandboxBuilder};

use crate::paths::GrantedDir;

/// Tools answered per `tools/list` page.
pub const TOOLS_PAGE: usize = 50;

/// What every session shares: the sandbox, the executor and fetcher when
/// granted, and the granted directories for mapping host paths.
pub(crate) struct Core {
    pub(crate) sandbox: Sandbox,
    pub(crate) executor: Option<Executor>,
    pub(crate) fetcher: Option<Fetcher>,
    pub(crate) dirs: Vec<GrantedDir>,
    /// The read roots, opened, to tell which one answers for a name and
    /// where it leads.
    read_roots: Vec<Root>,
    /// The write root, opened, when it is not also a read root.
    write_only_root: Option<Root>,
    /// The policy's `fs.max_read_bytes`: the most one read answers, and
    /// the most file content one `read_multiple_files` answer holds.
    pub(crate) max_read_bytes: u64,
    /// The sandbox's and executor's sink, for the calls refused here
    /// before either sees them ([`Core::refused`]).
    audit: Option<AuditSink>,
    /// Places for the calls that run on the blocking pool, shared by
    /// every session: all of [`MAX_RUNNING`] but the
    /// [`RESERVED_PLACES`]...
    running: tokio::sync::Semaphore,
    /// ...which go only to a session running no long call.
    reserved: tokio::sync::Semaphore,
}

impl Core {
    /// Reports a call refused before the sandbox or the executor saw it
    /// (a name outside the granted directories or the client's roots, a
    /// write into a read-only directory) to the audit sink, as they report
    /// theirs: `op`, the name as given, the refusal's code. Answers `e`.
    pub(crate) fn refused(&self, op: &'static str, given: &str, e: Error) -> Error {
        if let Some(sink) = &self.audit {
            sink(&sandgate::AuditEvent {
                op,
                path: given.to_owned(),
                size: None,
                time: std::time::SystemTime::now(),
                outcome: e.code(),
                exit_code: None,
                limit: None,
            });
        }
        e
    }
}

/// The most long calls one session holds at once, running or waiting for
/// one of the [`MAX_RUNNING`] places; one more is answered at once with a
/// JSON-RPC error naming the cap. Each call held costs a few KiB (its
/// request, its task): holding every one, 100,000 pipelined by one client
/// grew the server past 600 MiB.
pub const MAX_HELD: usize = 256;

/// The most of the [`MAX_RUNNING`] places one session runs calls in at
/// once: half, so that a session holding slow calls (commands that sleep,
/// fetches from a server that stalls) leaves the other sessions (of up to
/// 64 over `--http` or `--unix`) places to run in. Its further calls wait
/// their turn in the session, as calls past [`MAX_RUNNING`] do. On stdio,
/// where the one session is the only one, it may use every place.
pub const MAX_SESSION_RUNNING: usize = MAX_RUNNING / 2;

/// How many of the [`MAX_RUNNING`] places go only to a session that runs
/// no long call when it asks (over `--http` or `--unix`): a session's
/// share alone cannot keep two sessions holding slow calls from taking
/// all 32 places, and then every other session waited until one of their
/// calls ended. With these kept, two such sessions run at most 28 calls
/// together and a third session's call runs at once, as do those of up to
/// three more. A call is counted from the moment it asks, so a burst of
/// calls from one session takes at most one reserved place. On stdio, the
/// one session may use every place.
pub const RESERVED_PLACES: usize = MAX_RUNNING / 8;

/// JSON-RPC's server-error code, for a call refused by [`MAX_HELD`].
const TOO_MANY_CALLS: i32 = -32000;

/// The most long calls (those run on the blocking pool: a search, a
/// listing, a write, a command, a fetch) one server runs at once, across
/// all its sessions; more wait their turn (and can be cancelled while
/// they wait). Each running command holds about four processes and a
/// dozen descriptors: unbounded, 300 calls pipelined by one client all
/// ran at once (the blocking pool holds up to 512 threads) and, under the
/// usual limit of 1024 descriptors, most failed for want of one.
pub const MAX_RUNNING: usize = 32;

/// The client roots in force: each a granted directory's index, a
/// root-relative prefix (`.` for the whole directory), and where that
/// prefix led when the client first listed it (links inside the granted
/// directory followed; the prefix itself when it was not there). A root
/// that leads elsewhere at a call (a command replaced it with a link)
/// covers nothing, and listing it again does not move it, so a session
/// never widens between two lists of roots nor by a new one.
/// Shared, so that a call takes them without copying.
pub(crate) type ClientRoots = Arc<[(usize, String, PathBuf)]>;

/// A client's roots, as far as they lie inside the granted directories.
#[derive(Clone, Debug)]
pub(crate) enum Narrow {
    /// The client offers no roots: the policy's roots apply.
    None,
    /// Asked for; calls wait (a little) for the answer. The roots asked
    /// for before, if any, stay in force meanwhile and after a failed
    /// answer: a session never widens because a client failed to say what
    /// its roots are now.
    Pending(Option<ClientRoots>),
    /// Names must lie below one of these: a granted directory's index and a
    /// root-relative prefix (`.` for the whole directory).
    To(ClientRoots),
}

/// One session: the shared core and what this client narrowed it to.
pub(crate) struct Shared {
    core: Arc<Core>,
    narrow: std::sync::RwLock<Narrow>,
    /// Whether the transport may answer short calls itself: set once the
    /// session is initialized and its client roots asked for, cleared
    /// while they are asked for again.
    inline_ready: AtomicBool,
    /// Whether a `roots/list` request is in flight, and whether the client
    /// said its roots changed since it was sent.
    asking: std::sync::Mutex<Asking>,
    /// Places for the long calls this session holds, [`MAX_HELD`].
    held: tokio::sync::Semaphore,
    /// This session's share of the running places,
    /// [`MAX_SESSION_RUNNING`].
    share: tokio::sync::Semaphore,
    /// Whether this is the server's only session (stdio): it may use the
    /// [`RESERVED_PLACES`] whenever it asks.
    alone: bool,
    /// How many places this session's calls run in now.
    busy: AtomicUsize,
    /// The room left in the output of this session's transport, where it
    /// is a [`lines::LineTransport`] (stdio, the UNIX socket).
    room: std::sync::OnceLock<lines::OutputRoom>,
}

impl Shared {
    /// Whether the transport's output holds more answers than it queues
    /// before the session stops starting calls (the client is not taking
    /// them).
    fn output_full(&self) -> bool {
        self.room.get().is_some_and(lines::OutputRoom::full)
    }

    /// Waits until the transport's output is not full.
    async fn output_room(&self) {
        if let Some(room) = self.room.get() {
            room.wait().await;
        }
    }

    /// Waits until the client is wholly gone (it can take no answer any
    /// more: see [`lines::OutputRoom::gone`]); never, where the transport
    /// is not a [`lines::LineTransport`].
    async fn client_gone(&self) {
        match self.room.get() {
            Some(room) => room.gone().await,
            None => std::future::pending().await,
        }
    }
}

/// Counts a session's long call from the moment it asks for a place
/// until it ends, waiting included.
struct Busy<'a>(&'a AtomicUsize);

impl<'a> Busy<'a> {
    /// The count, and whether the session had no other long call asking
    /// for a place or running.
    fn new(n: &'a AtomicUsize) -> (Busy<'a>, bool) {
        let before = n.fetch_add(1, Ordering::SeqCst);
        (Busy(n), before == 0)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The state of asking a client for its roots: one request at a time, so
/// a client that says its roots changed over and over (and never answers)
/// cannot make the server hold a request and a task for each time.
#[derive(Default)]
struct Asking {
    in_flight: bool,
    again: bool,
}

impl std::ops::Deref for Shared {
    type Target = Core;
    fn deref(&self) -> &Core {
        &self.core
    }
}

/// Whether `rel`, a name at or below `prefix` in `root`, stays beneath
/// `prefix` when resolved. The client root is opened beneath `root`, and
/// the rest of the name is resolved beneath that descriptor (`openat2`
/// with `RESOLVE_BENEATH`, or the descriptor walk), following links, so
/// that one leading out of it fails as an escape. A name not there yet is
/// judged by the nearest part of it that is, where a write would create
/// it. A client root that is missing holds nothing to resolve through; one
/// that cannot be opened as a directory for another reason covers
/// nothing.
fn leads_beneath(root: &Root, prefix: &str, listed: &Path, rel: &RelPath) -> bool {
    let sub = match open_client_root(root, prefix, listed) {
        Ok(sub) => sub,
        Err(kind) => return kind == ErrorKind::NotFound,
    };
    let rest: Vec<&str> = rel.components().skip(parts(prefix).count()).collect();
    for n in (1..=rest.len()).rev() {
        match sub.resolve_path(rest[..n].join("/")) {
            Ok(_) => return true,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return e.kind() != ErrorKind::Escape,
        }
    }
    true
}

/// Opens client root `prefix` beneath `root`, following links inside it,
/// when it still leads to `listed`, where it led when the client listed
/// it; else fails with the kind of the failure, [`ErrorKind::Escape`]
/// when it leads elsewhere (or procfs cannot say where it leads).
fn open_client_root(root: &Root, prefix: &str, listed: &Path) -> Result<Root, ErrorKind> {
    let sub = root.open_dir(prefix).map_err(|e| e.kind())?;
    match sub.path_within(root) {
        Ok(now) if now == listed => Ok(sub),
        _ => Err(ErrorKind::Escape),
    }
}

/// Where client root `prefix` leads beneath `root` now, links inside it
/// followed: the prefix itself when it is not there (then it must be
/// made where it is spelled).
fn listed_place(root: &Root, prefix: &str) -> PathBuf {
    root.resolved_path(prefix)
        .unwrap_or_else(|_| parts(prefix).collect())
}

/// The side of the sandbox a name goes to: a read resolves a relative name
/// in the first read root that holds it, a write in the write root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Read,
    Write,
}

/// The components of a root-relative name: the pieces between slashes,
/// without the empty ones and `.`.
fn parts(name: &str) -> impl Iterator<Item = &str> {
    name.split('/').filter(|c| !c.is_empty() && *c != ".")
}

/// Whether root-relative `rel` lies at or below `prefix`, by components.
fn rel_below(rel: &str, prefix: &str) -> bool {
    let mut r = parts(rel);
    parts(prefix).all(|p| r.next() == Some(p))
}

impl Shared {
    /// Refuses a name outside the client's roots (when it gave any). The
    /// name is judged in the granted directory the call will resolve it
    /// in (for a relative name, the first read root that holds it, or the
    /// write root), and, below a client root narrower than that whole
    /// directory, by where it leads: resolved by the kernel beneath the
    /// client root's own descriptor, as [`leads_beneath`] does, so
    /// a symbolic link out of the client root is refused like a name
    /// spelled outside it. A name the sandbox refuses whatever the roots
    /// (`..`, a NUL byte) is left for it to refuse.
    fn within_client_roots(&self, m: &paths::Mapped, side: Side) -> Result<(), Error> {
        let Some(roots) = self.client_roots() else {
            return Ok(());
        };
        let Ok(rel) = RelPath::parse(&m.rel) else {
            return Ok(());
        };
        // With no read root holding a relative name, the read finds
        // nothing: any granted directory may cover it.
        let target = m.dir.or_else(|| self.answering_dir(&rel, side));
        self.judge(&roots, &rel, target)
            .map_err(|why| Error::new(ErrorCode::Denied, why).with_path(m.rel.clone()))
    }

    /// Whether one of the client's `roots` covers `rel` in granted
    /// directory `target` (in any, when `None`), and, below a client root
    /// narrower than that whole directory, where the name leads; else why
    /// not.
    fn judge(
        &self,
        roots: &[(usize, String, PathBuf)],
        rel: &RelPath,
        target: Option<usize>,
    ) -> Result<(), &'static str> {
        let same = |d: usize| target.is_none_or(|t| self.dirs[d].resolved == self.dirs[t].resolved);
        let covering: Vec<(&str, &Path)> = roots
            .iter()
            .filter(|(d, prefix, _)| same(*d) && rel_below(rel.as_str(), prefix))
            .map(|(_, prefix, listed)| (prefix.as_str(), listed.as_path()))
            .collect();
        if covering.is_empty() {
            return Err("outside the roots this client declared");
        }
        let Some(t) = target else {
            return Ok(());
        };
        if covering
            .iter()
            .any(|&(prefix, listed)| prefix == "." || self.leads_beneath(t, prefix, listed, rel))
        {
            Ok(())
        } else {
            Err("outside the roots this client declared: resolved, the name leads out of them")
        }
    }

    /// The name a walk over a directory (`grep`, `search_files`) uses for
    /// `given`: as [`Shared::read_name`], and, since such a walk goes
    /// through the directory in every read root that holds it, with the
    /// client's roots judged in each read root where the name is there,
    /// not only the first.
    pub(crate) fn walk_name(&self, op: &'static str, given: &str) -> Result<String, Error> {
        self.map_walk(given).map_err(|e| self.refused(op, given, e))
    }

    fn map_walk(&self, given: &str) -> Result<String, Error> {
        let name = self.map_read(given)?;
        let Some(roots) = self.client_roots() else {
            return Ok(name);
        };
        let Ok(rel) = RelPath::parse(&name) else {
            return Ok(name);
        };
        for (k, root) in self.read_roots.iter().enumerate() {
            // Every root where the name is there, file or directory: a
            // walk takes the directory in each, a single file from the
            // first where it can be looked at.
            if root.stat(rel.as_str()).is_err() {
                continue;
            }
            let target = self.dirs.iter().position(|d| d.read_index == Some(k));
            if self.judge(&roots, &rel, target).is_err() {
                return Err(Error::new(
                    ErrorCode::Denied,
                    "outside the roots this client declared: the search would also go through this directory in a read root they do not cover",
                )
                .with_path(name));
            }
        }
        Ok(name)
    }

    /// The granted directory a relative name is resolved in: the write
    /// root for a write; for a read, the first read root that holds it
    /// (as the sandbox looks: the first where it is not missing), `None`
    /// when none does.
    fn answering_dir(&self, rel: &RelPath, side: Side) -> Option<usize> {
        let k = match side {
            Side::Write => return self.dirs.iter().position(|d| d.is_write),
            Side::Read => self.read_roots.iter().position(
                |r| !matches!(r.stat(rel.as_str()), Err(e) if e.kind() == ErrorKind::NotFound),
            )?,
        };
        self.dirs.iter().position(|d| d.read_index == Some(k))
    }

    /// The granted directory `d`, opened.
    fn dir_root(&self, d: usize) -> Option<&Root> {
        match self.dirs[d].read_index {
            Some(k) => self.read_roots.get(k),
            None => self.write_only_root.as_ref(),
        }
    }

    /// Whether `rel`, a name at or below `prefix` in granted directory
    /// `d`, stays beneath `prefix` when resolved ([`leads_beneath`]).
    fn leads_beneath(&self, d: usize, prefix: &str, listed: &Path, rel: &RelPath) -> bool {
        self.dir_root(d)
            .is_some_and(|root| leads_beneath(root, prefix, listed, rel))
    }

    /// The client's roots, when it narrowed the session: a granted
    /// directory's index and the root-relative prefix of each.
    pub(crate) fn client_roots(&self) -> Option<ClientRoots> {
        match &*self.narrow.read().unwrap_or_else(|p| p.into_inner()) {
            Narrow::To(roots) | Narrow::Pending(Some(roots)) => Some(Arc::clone(roots)),
            Narrow::None | Narrow::Pending(None) => None,
        }
    }

    /// The client's roots opened, for a command narrowed to them
    /// ([`sandgate::ExecOptions::within`]), when it narrowed the session.
    /// A root that cannot be opened (gone, no longer a directory, or
    /// leading elsewhere than when listed) is left out, which narrows
    /// further.
    pub(crate) fn client_root_dirs(&self) -> Option<Arc<[std::os::fd::OwnedFd]>> {
        let roots = self.client_roots()?;
        let dirs: Vec<_> = roots
            .iter()
            .filter_map(|(d, rel, listed)| {
                let root = self.dir_root(*d)?;
                let dir = if rel == "." {
                    root.try_clone().ok()?
                } else {
                    open_client_root(root, rel, listed).ok()?
                };
                Some(dir.into_fd())
            })
            .collect();
        Some(dirs.into())
    }

    /// Sets the session's narrowing from a client's root URIs: each root
    /// inside a granted directory narrows to it, a root holding a granted
    /// directory keeps that directory whole, a root elsewhere adds nothing.
    /// A root already in force keeps where it led when first listed.
    pub(crate) fn narrow_to(&self, uris: &[String]) {
        // A root listed before keeps where it led then: a command may
        // have swapped it for a link since, and listing it again must not
        // follow that link (the session would widen to its target).
        let before = self.client_roots();
        let listed_before = |d: usize, rel: &str| {
            before
                .as_deref()?
                .iter()
                .find(|(bd, brel, _)| *bd == d && brel == rel)
                .map(|(_, _, listed)| listed.clone())
        };
        let mut out = Vec::new();
        for uri in uris {
            let Some(path) = file_uri_path(uri) else {
                continue;
            };
            if let Ok(m) = paths::map(&self.dirs, &path) {
                if let Some(d) = m.dir {
                    if !m.rel.split('/').any(|c| c == "..") {
                        let listed = match self.dir_root(d) {
                            Some(_) if m.rel == "." => PathBuf::from("."),
                            Some(root) => listed_before(d, &m.rel)
                                .unwrap_or_else(|| listed_place(root, &m.rel)),
                            None => PathBuf::from("."),
                        };
                        out.push((d, m.rel, listed));
                    }
                }
                continue;
            }
            let p = std::path::Path::new(&path);
            for (i, d) in self.dirs.iter().enumerate() {
                if d.spelled.starts_with(p) || d.resolved.starts_with(p) {
                    out.push((i, ".".to_owned(), PathBuf::from(".")));
                }
            }
        }
        *self.narrow.write().unwrap_or_else(|p| p.into_inner()) = Narrow::To(out.into());
    }

    fn asking(&self) -> std::sync::MutexGuard<'_, Asking> {
        self.asking.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_narrow(&self, n: Narrow) {
        *self.narrow.write().unwrap_or_else(|p| p.into_inner()) = n;
    }

    fn narrow_pending(&self) -> bool {
        matches!(
            *self.narrow.read().unwrap_or_else(|p| p.into_inner()),
            Narrow::Pending(_)
        )
    }

    /// The name a read-side tool's `op` uses for `given`. An absolute path
    /// in a read root after the first is refused when an earlier root holds
    /// the same name, since names resolve in the first root that holds
    /// them. A refusal is audited as `op` ([`Core::refused`]).
    pub(crate) fn read_name(&self, op: &'static str, given: &str) -> Result<String, Error> {
        self.map_read(given).map_err(|e| self.refused(op, given, e))
    }

    /// [`Shared::read_name`] without auditing a refusal.
    pub(crate) fn map_read(&self, given: &str) -> Result<String, Error> {
        let m = paths::map(&self.dirs, given)?;
        self.within_client_roots(&m, Side::Read)?;
        if let Some(i) = m.dir {
            match self.dirs[i].read_index {
                None => {
                    return Err(Error::new(
                        ErrorCode::Denied,
                        "this path is in the write root, which is not a read root",
                    ))
                }
                Some(k) => {
                    if self.read_roots[..k].iter().any(|r| r.lstat(&m.rel).is_ok()) {
                        return Err(Error::new(
                            ErrorCode::PathInvalid,
                            "an earlier read root holds the same name and answers for it; this copy cannot be reached",
                        )
                        .with_path(m.rel));
                    }
                }
            }
        }
        Ok(m.rel)
    }

    /// The name a write-side tool's `op` uses for `given`: an absolute path
    /// must be in the write root. A refusal is audited as `op`
    /// ([`Core::refused`]).
    pub(crate) fn write_name(&self, op: &'static str, given: &str) -> Result<String, Error> {
        self.map_write(given)
            .map_err(|e| self.refused(op, given, e))
    }

    /// The working directory `exec` names by `given`: beneath the write
    /// root; in a policy without one, beneath the first read root, where
    /// the executor runs commands (so its absolute host path is taken as
    /// the relative name is, and a path in another read root is refused
    /// rather than looked up beneath the first). A refusal is audited as
    /// `exec` ([`Core::refused`]).
    pub(crate) fn cwd_name(&self, given: &str) -> Result<String, Error> {
        if self.dirs.iter().any(|d| d.is_write) {
            return self.write_name("exec", given);
        }
        self.map_cwd(given)
            .map_err(|e| self.refused("exec", given, e))
    }

    /// [`Shared::cwd_name`] for a policy without a write root, without
    /// auditing a refusal.
    fn map_cwd(&self, given: &str) -> Result<String, Error> {
        let m = paths::map(&self.dirs, given)?;
        if m.dir.is_some_and(|i| self.dirs[i].read_index != Some(0)) {
            return Err(Error::new(
                ErrorCode::Denied,
                "commands run in the first read root (the policy has no write root); this \
                 path is in another directory",
            )
            .with_path(m.rel));
        }
        if let (Some(roots), Ok(rel)) = (self.client_roots(), RelPath::parse(&m.rel)) {
            let first = self.dirs.iter().position(|d| d.read_index == Some(0));
            self.judge(&roots, &rel, m.dir.or(first))
                .map_err(|why| Error::new(ErrorCode::Denied, why).with_path(m.rel.clone()))?;
        }
        Ok(m.rel)
    }

    /// [`Shared::write_name`] without auditing a refusal.
    pub(crate) fn map_write(&self, given: &str) -> Result<String, Error> {
        let m = paths::map_for_write(&self.dirs, given)?;
        self.within_client_roots(&m, Side::Write)?;
        if let Some(i) = m.dir {
            if !self.dirs[i].is_write {
                return Err(Error::new(
                    ErrorCode::Denied,
                    "this path is in a read-only directory; writes go to the write root",
                )
                .with_path(m.rel));
            }
        }
        Ok(m.rel)
    }
}

/// The MCP server over one policy.
#[derive(Clone)]
pub struct Server {
    shared: Arc<Shared>,
    tools: Arc<Vec<Tool>>,
    instructions: String,
}

impl Server {
    /// A server with everything `policy` grants: the sandbox and the
    /// executor (with `audit` as their sink), the shell when `[exec]` grants it, fetch when `[net]`
    /// does. `spelled` lists other spellings of the roots (as the operator
    /// typed them, symlinks kept) that absolute paths may use; each must
    /// resolve to a granted root.
    pub fn from_policy(
        policy: &Policy,
        audit: Option<AuditSink>,
        spelled: Vec<PathBuf>,
    ) -> Result<Server, Error> {
        let mut b = SandboxBuilder::from_policy(policy);
        if let Some(sink) = &audit {
            b.audit_sink(Arc::clone(sink));
        }
        let sandbox = b.build()?;
        let executor = Executor::from_policy(policy)?;
        executor.set_audit_sink(audit.clone());
        let executor = executor.runs_anything().then_some(executor);
        let fetcher =
            (!policy.net_allow().is_empty()).then(|| sandgate::fetch::from_policy(policy));
        // Each fetch call is reported by the fetcher itself, made or
        // refused, by its hops' origins (never a secret of the URL).
        if let Some(f) = &fetcher {
            f.set_audit_sink(audit.clone());
        }
        let mut dirs: Vec<GrantedDir> = Vec::new();
        let mut read_roots = Vec::new();
        for (i, r) in policy.read_roots().iter().enumerate() {
            dirs.push(GrantedDir {
                spelled: r.clone(),
                resolved: r.clone(),
                read_index: Some(i),
                is_write: policy.write_root() == Some(r.as_path()),
            });
            read_roots.push(Root::open(r).map_err(Error::from)?);
        }
        let mut write_only_root = None;
        if let Some(w) = policy.write_root() {
            if !dirs.iter().any(|d| d.is_write) {
                write_only_root = Some(Root::open(w).map_err(Error::from)?);
                dirs.push(GrantedDir {
                    spelled: w.to_owned(),
                    resolved: w.to_owned(),
                    read_index: None,
                    is_write: true,
                });
            }
        }
        // Other spellings of the same directories.
        for s in spelled {
            let abs = std::path::absolute(&s).unwrap_or(s);
            if let Ok(real) = std::fs::canonicalize(&abs) {
                if let Some(d) = dirs.iter().find(|d| d.resolved == real).cloned() {
                    if d.spelled != abs {
                        dirs.push(GrantedDir { spelled: abs, ..d });
                    }
                }
            }
        }
        let tools = tools::definitions(executor.is_some(), fetcher.is_some());
        let instructions = format!(
            "Files are confined by sandgate to {} (names relative to the root, or absolute paths inside it). Refusals name a code such as E_PATH_ESCAPE or E_FS_PROTECTED and are final.",
            policy
                .read_roots()
                .iter()
                // As every message names a path: never the lossy spelling,
                // which can be another directory's name.
                .map(sandgate::policy::shown)
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(Server {
            shared: Arc::new(Shared {
                core: Arc::new(Core {
                    sandbox,
                    executor,
                    fetcher,
                    dirs,
                    read_roots,
                    write_only_root,
                    max_read_bytes: policy.limits().max_read_bytes,
                    audit,
                    running: tokio::sync::Semaphore::new(MAX_RUNNING - RESERVED_PLACES),
                    reserved: tokio::sync::Semaphore::new(RESERVED_PLACES),
                }),
                narrow: std::sync::RwLock::new(Narrow::None),
                inline_ready: AtomicBool::new(false),
                asking: std::sync::Mutex::default(),
                held: tokio::sync::Semaphore::new(MAX_HELD),
                // Served alone (stdio), the session may use every place;
                // the sessions of a transport that serves many are made
                // by `new_session`, with a share.
                share: tokio::sync::Semaphore::new(MAX_RUNNING),
                alone: true,
                busy: AtomicUsize::new(0),
                room: std::sync::OnceLock::new(),
            }),
            tools: Arc::new(tools),
            instructions,
        })
    }

    /// The tools this server lists.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// A server for another session: the same sandbox (and budgets), with
    /// its own client roots.
    pub fn new_session(&self) -> Server {
        Server {
            shared: Arc::new(Shared {
                core: Arc::clone(&self.shared.core),
                narrow: std::sync::RwLock::new(Narrow::None),
                inline_ready: AtomicBool::new(false),
                asking: std::sync::Mutex::default(),
                held: tokio::sync::Semaphore::new(MAX_HELD),
                share: tokio::sync::Semaphore::new(MAX_SESSION_RUNNING),
                alone: false,
                busy: AtomicUsize::new(0),
                room: std::sync::OnceLock::new(),
            }),
            tools: Arc::clone(&self.tools),
            instructions: self.instructions.clone(),
        }
    }

    /// Asks the client for its roots (when it has any) and narrows this
    /// session to them. A client that does not answer the first time
    /// leaves the policy's roots in force, as the reference server does;
    /// one that fails to answer again keeps the roots it had. One request
    /// is in flight at a time: when the roots change again meanwhile, they
    /// are asked for once more after its answer, and calls wait until then.
    // Roots are part of the revisions this server speaks (up to
    // 2025-11-25); the SDK marks them deprecated for a later one.
    #[allow(deprecated)]
    fn fetch_client_roots(&self, peer: rmcp::Peer<RoleServer>) {
        let has_roots = peer
            .peer_info()
            .is_some_and(|i| i.capabilities.roots.is_some());
        if !has_roots {
            return;
        }
        let before = self.shared.client_roots();
        self.shared.set_narrow(Narrow::Pending(before));
        {
            let mut asking = self.shared.asking();
            if asking.in_flight {
                asking.again = true;
                return;
            }
            asking.in_flight = true;
        }
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            loop {
                match tokio::time::timeout(Duration::from_secs(10), peer.list_roots()).await {
                    Ok(Ok(r)) => {
                        let uris: Vec<String> = r.roots.into_iter().map(|r| r.uri).collect();
                        shared.narrow_to(&uris);
                    }
                    _ => {
                        let before = shared.client_roots();
                        shared.set_narrow(before.map_or(Narrow::None, Narrow::To));
                    }
                }
                let mut asking = shared.asking();
                if !asking.again {
                    asking.in_flight = false;
                    return;
                }
                asking.again = false;
                drop(asking);
                // Changed since the request: calls wait for the next answer.
                let now = shared.client_roots();
                shared.set_narrow(Narrow::Pending(now));
            }
        });
    }

    /// Serves MCP on stdin and stdout until stdin closes. Standard input
    /// that cannot be read (a directory, a descriptor open only for
    /// writing) before the session starts is an error naming it and the
    /// system's reason, not the SDK's "connection closed".
    pub async fn serve_stdio(self) -> Result<(), std::io::Error> {
        let inline: Arc<dyn lines::Inline> = Arc::new(self.clone());
        let transport = lines::LineTransport::stdio_with(Some(inline));
        self.watch_output(&transport);
        let input = transport.input();
        let running = self
            .serve(transport)
            .await
            .map_err(|e| match input.error() {
                Some(read) => std::io::Error::new(
                    read.kind(),
                    format!("the standard input cannot be read as a stream: {read}"),
                ),
                None => std::io::Error::other(e),
            })?;
        running.waiting().await.map_err(std::io::Error::other)?;
        Ok(())
    }

    /// Makes this session's long calls wait for room in `transport`'s
    /// output before they start, and its progress notifications skip
    /// while it is full.
    pub fn watch_output(&self, transport: &lines::LineTransport) {
        let _ = self.shared.room.set(transport.room());
    }

    /// Runs one tool call to its answer. `cancel` stops a long search or
    /// command when set.
    fn run(
        &self,
        name: &str,
        args: serde_json::Value,
        cancel: Cancel,
    ) -> Result<tools::Answer, ErrorData> {
        let s = &*self.shared;
        // Arguments that do not fit the tool are answered with invalid
        // params, and recorded as the tool's other refusals are: the name
        // it gave is taken before they are read (only where a sink hears).
        let given = s.audit.as_ref().and_then(|_| audit_given(name, &args));
        // A fetch is recorded by its fetcher, by the URL's origin only.
        let url = (s.audit.is_some() && name == "fetch")
            .then(|| args.get("url").and_then(|u| u.as_str()).map(str::to_owned));
        self.dispatch(name, args, cancel).inspect_err(|e| {
            if let (Some(url), Some(f)) = (&url, &s.fetcher) {
                f.audit_refusal(url.as_deref(), sandgate::ErrorCode::Request);
            }
            if let Some((op, path)) = &given {
                s.refused(
                    op,
                    path,
                    sandgate::Error::new(sandgate::ErrorCode::Request, e.message.to_string()),
                );
            }
        })
    }

    /// [`Server::run`]'s call of the tool, its arguments read.
    fn dispatch(
        &self,
        name: &str,
        args: serde_json::Value,
        cancel: Cancel,
    ) -> Result<tools::Answer, ErrorData> {
        let s = &*self.shared;
        Ok(match name {
            "read_text_file" => tools::read_text_file(s, parse(args)?, &cancel.flag),
            "read_media_file" => tools::read_media_file(s, parse(args)?),
            "read_multiple_files" => tools::read_multiple_files(s, parse(args)?),
            "write_file" => tools::write_file(s, parse(args)?),
            "edit_file" => tools::edit_file(s, parse(args)?),
            "create_directory" => tools::create_directory(s, parse(args)?),
            "list_directory" => tools::list_directory(s, parse(args)?),
            "list_directory_with_sizes" => tools::list_directory_with_sizes(s, parse(args)?),
            "directory_tree" => tools::directory_tree(s, parse(args)?),
            "move_file" => tools::move_file(s, parse(args)?),
            "search_files" => tools::search_files(s, parse(args)?),
            "get_file_info" => tools::get_file_info(s, parse(args)?),
            "list_allowed_directories" => tools::list_allowed_directories(s, parse(args)?),
            "grep" => tools::grep(s, parse(args)?, cancel.flag),
            "exec" if s.executor.is_some() => {
                tools::exec(s, parse(args)?, cancel.abort.unwrap_or_default())
            }
            "fetch" if s.fetcher.is_some() => tools::fetch(s, parse(args)?, cancel.flag),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{other}`"),
                    None,
                ))
            }
        })
    }
    /// Whether a call is short enough to run on the protocol's own thread:
    /// listing the allowed directories, one file's metadata, and reading a
    /// regular file of at most [`INLINE_READ`] bytes whole. Everything else
    /// (a search, a listing, a write, a command, a fetch, a big read, a
    /// head or tail, or a read of something that is not a regular file)
    /// runs on the blocking pool,
    /// where it can be cancelled and report progress while the server
    /// keeps answering.
    fn runs_inline(&self, name: &str, args: &serde_json::Value) -> bool {
        match name {
            "list_allowed_directories" | "get_file_info" => true,
            // A head or tail counts every line of the file, which the
            // read cap does not bound (hours for a sparse file of
            // terabytes): never here, where it could not be cancelled and
            // would hold every other message of the session.
            "read_text_file" if counts_lines(args) => false,
            "read_text_file" | "read_media_file" => {
                match args.get("path").and_then(serde_json::Value::as_str) {
                    Some(path) => self.small_regular_file(path),
                    // Invalid arguments: answered at once.
                    None => true,
                }
            }
            _ => false,
        }
    }

    /// Whether a read of `path` is short: every read is when the policy
    /// caps reads at [`INLINE_READ`] bytes or less (the default cap is
    /// 10 MiB); under a larger cap, a regular file of at most
    /// [`INLINE_READ`] bytes in the first read root holding it, or a name
    /// the read will refuse at once. This only picks the thread; the read
    /// itself checks everything (the kind, the cap) again.
    pub(crate) fn small_regular_file(&self, path: &str) -> bool {
        // Every read is capped at INLINE_READ bytes or less: no read needs
        // looking at before it is run inline.
        if self.shared.max_read_bytes <= INLINE_READ {
            return true;
        }
        let Ok(rel) = self.shared.map_read(path) else {
            return true;
        };
        match self
            .shared
            .read_roots
            .iter()
            .find_map(|r| r.stat(&rel).ok())
        {
            Some(m) => m.kind() == sandgate::FileKind::File && m.len() <= INLINE_READ,
            None => true,
        }
    }

    /// Runs a call on the blocking pool, stopping it when the client
    /// cancels and reporting progress every half second when asked.
    async fn run_blocking(
        &self,
        name: String,
        args: serde_json::Value,
        cancel: Cancel,
        context: &RequestContext<RoleServer>,
    ) -> Result<tools::Answer, ErrorData> {
        let this = self.clone();
        let c2 = cancel.clone();
        let mut job = tokio::task::spawn_blocking(move || this.run(&name, args, c2));
        let progress = context.meta.get_progress_token();
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        tick.tick().await;
        let mut ticks = 0u32;
        // The progress notification being sent: awaited beside the work
        // and the cancel, never in their place. Once the input closed, the
        // SDK takes no more notifications while it waits for the last
        // answers, and a send awaited here held the call until that wait
        // ran out: the answer of a client that still reads was lost.
        let mut notifying: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> =
            None;
        let done = loop {
            tokio::select! {
                r = &mut job => break r,
                // Cancelled, or nobody can take the answer any more (the
                // client is gone: it is not given the seconds a client
                // that still reads has for its last answers).
                _ = async {
                    tokio::select! {
                        _ = context.ct.cancelled() => {}
                        _ = self.shared.client_gone() => {}
                    }
                } => {
                    cancel.flag.store(true, Ordering::Relaxed);
                    if let Some(a) = &cancel.abort {
                        a.abort();
                    }
                    // Let the work stop, then answer (the client has
                    // stopped waiting; the answer is dropped).
                    let _ = (&mut job).await;
                    return Err(ErrorData::internal_error("the call was cancelled", None));
                }
                _ = async {
                    if let Some(n) = notifying.as_mut() {
                        n.await;
                    }
                }, if notifying.is_some() => notifying = None,
                _ = tick.tick(), if progress.is_some() => {
                    ticks += 1;
                    // A client taking none of its output gets no more
                    // notifications queued for it, nor one while the last
                    // is not yet taken (the next one says how many ticks
                    // have passed).
                    if self.shared.output_full() || notifying.is_some() {
                        continue;
                    }
                    if let Some(token) = &progress {
                        let peer = context.peer.clone();
                        let note = ProgressNotificationParam::new(token.clone(), f64::from(ticks))
                            .with_message("still running");
                        notifying = Some(Box::pin(async move {
                            let _ = peer.notify_progress(note).await;
                        }));
                    }
                }
            }
        };
        done.map_err(|e| ErrorData::internal_error(format!("the call failed: {e}"), None))?
    }
}

/// The largest file a read answers on the protocol's own thread (bigger
/// ones go to the blocking pool): 16 MiB, which takes a few tens of
/// milliseconds to read and answer, about what one `grep` progress tick
/// leaves the client waiting. A whole read cannot be cancelled part way
/// on either thread; what the blocking pool adds is that other calls are
/// answered meanwhile. A head or tail, which counts every line of the
/// file whatever its size, always runs on the blocking pool, and stops
/// when cancelled.
pub const INLINE_READ: u64 = 16 * 1024 * 1024;

/// The local path of a `file://` URI (percent-decoded), if it is one. The
/// scheme and the host `localhost` are matched in any letter case, as
/// URIs allow; a `%` not followed by two hex digits makes it none (a root
/// the client meant is then dropped, which only narrows).
fn file_uri_path(uri: &str) -> Option<String> {
    let scheme = uri.get(..7)?;
    if !scheme.eq_ignore_ascii_case("file://") {
        return None;
    }
    let rest = &uri[7..];
    let rest = match rest.get(..9) {
        Some(host) if host.eq_ignore_ascii_case("localhost") => &rest[9..],
        _ => rest,
    };
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let digit = |b: Option<&u8>| (*b? as char).to_digit(16);
            let (hi, lo) = (digit(bytes.get(i + 1))?, digit(bytes.get(i + 2))?);
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The methods a client may call whose params the SDK parses: a request
/// naming one reaches [`Server::on_custom_request`] only when its params
/// do not fit.
const CLIENT_METHODS: &[&str] = &[
    "ping",
    "initialize",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/directory/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// The error for a request the SDK parsed as none of the protocol's: the
/// params of a known method that do not fit it are invalid params, saying
/// why where it can (a `tools/call` without `name`, or with a `name` that
/// is not text); any other method is not found.
fn unparsed_request(method: &str, params: Option<&serde_json::Value>) -> ErrorData {
    if !CLIENT_METHODS.contains(&method) {
        return ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: {method}"),
            None,
        );
    }
    let why = match (method, params) {
        ("tools/call", None) => "params are missing".to_owned(),
        ("tools/call", Some(p)) => match CallToolRequestParams::deserialize(p) {
            Err(e) => e.to_string(),
            // What the SDK refused parses once the line is a value: a key
            // given twice (the value keeps the last).
            Ok(_) => "a key is given twice".to_owned(),
        },
        _ => "they do not have the shape the method takes".to_owned(),
    };
    ErrorData::invalid_params(format!("invalid params for {method}: {why}"), None)
}

/// Whether `read_text_file` arguments ask for a head or a tail read by
/// line range ([`tools::ReadTextFile::counts_lines`]); arguments that do
/// not parse are answered at once, and say no.
fn counts_lines(args: &serde_json::Value) -> bool {
    serde_json::from_value::<tools::ReadTextFile>(args.clone()).is_ok_and(|a| a.counts_lines())
}

/// The ways a running call can be told to stop. The abort signal (an
/// eventfd) is made only for `exec`, the one tool that polls it.
#[derive(Clone)]
struct Cancel {
    flag: Arc<AtomicBool>,
    abort: Option<sandgate::exec::AbortSignal>,
}

/// What a call of tool `name` is recorded as when its arguments do not
/// fit it: the op its sandbox, executor or fetcher call records, and the
/// name it gave as far as it gave one (`from -> to` for a move). `None`
/// for a tool that names nothing (or none this server has).
fn audit_given(name: &str, args: &serde_json::Value) -> Option<(&'static str, String)> {
    let text = |k: &str| args.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    let op = match name {
        "read_text_file" | "read_media_file" | "read_multiple_files" => "read",
        "write_file" => "write",
        "edit_file" if args.get("dryRun").and_then(|v| v.as_bool()) == Some(true) => "edit_dry_run",
        "edit_file" => "edit",
        "create_directory" => "mkdir",
        "list_directory" | "list_directory_with_sizes" | "directory_tree" => "list",
        "move_file" => {
            return Some((
                "rename",
                format!("{} -> {}", text("source"), text("destination")),
            ))
        }
        "search_files" => "glob",
        "get_file_info" => "stat",
        "grep" => "grep",
        "exec" => return Some(("exec", text("cwd").to_owned())),
        _ => return None,
    };
    Some((op, text("path").to_owned()))
}

fn parse<T: DeserializeOwned>(args: serde_json::Value) -> Result<T, ErrorData> {
    serde_json::from_value(args)
        .map_err(|e| ErrorData::invalid_params(format!("invalid arguments: {e}"), None))
}

impl ServerHandler for Server {
    #[allow(deprecated)]
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
        .with_server_info(
            Implementation::new("sandgate", env!("CARGO_PKG_VERSION"))
                .with_title("sandgate: confined file tools"),
        )
        .with_instructions(self.instructions.clone())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    // Logging is part of the revisions this server speaks (up to
    // 2025-11-25); the SDK marks it deprecated for a later one.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= self.tools.len())
                .ok_or_else(|| ErrorData::invalid_params("invalid cursor", None))?,
        };
        let end = (start + TOOLS_PAGE).min(self.tools.len());
        let mut page = ListToolsResult::with_all_items(self.tools[start..end].to_vec());
        if end < self.tools.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }

    /// A request the SDK could not parse as one of the protocol's: an
    /// unknown method (-32601, named), or a known one whose params do not
    /// fit it (-32602, saying why), where the SDK's default answered
    /// "method not found" for both.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        Err(unparsed_request(&request.method, request.params.as_ref()))
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.fetch_client_roots(context.peer);
        self.shared.inline_ready.store(true, Ordering::Release);
    }

    async fn on_roots_list_changed(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.fetch_client_roots(context.peer);
        self.shared.inline_ready.store(true, Ordering::Release);
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let request_name = name.clone();
        if !self.tools.iter().any(|t| t.name == name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                None,
            ));
        }
        // The client's roots narrow every call: wait briefly for them.
        for _ in 0..500 {
            if !self.shared.narrow_pending() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let inline = self.runs_inline(&name, &args);
        // A long call waits for one of the MAX_RUNNING places, before it
        // takes anything (the abort signal's descriptor included).
        let _held = if inline {
            None
        } else {
            Some(self.shared.held.try_acquire().map_err(|_| {
                ErrorData::new(
                    rmcp::model::ErrorCode(TOO_MANY_CALLS),
                    format!(
                        "too many calls in flight: this session holds at most {MAX_HELD} long calls at once; wait for answers before sending more"
                    ),
                    None,
                )
            })?)
        };
        // First one of this session's share of the places, then one of
        // the server's: one session never takes them all, and a session
        // running nothing may take a reserved one, so that sessions
        // holding slow calls never take them all either.
        let _running = if inline {
            None
        } else {
            let closing = |_| ErrorData::internal_error("the server is closing", None);
            tokio::select! {
                p = async { loop {
                    // A call starts only while the client takes its
                    // answers: its own answer and those of the calls
                    // that run with it are then all that is queued past
                    // the output's high water.
                    self.shared.output_room().await;
                    // Counted before it waits: calls a session sends at
                    // once are not each taken for its first, so one
                    // session takes at most one reserved place.
                    let (busy, first) = Busy::new(&self.shared.busy);
                    let share = self.shared.share.acquire().await.map_err(closing)?;
                    let place = if self.shared.alone || first {
                        // A free place of the general pool first: a
                        // reserved one taken while a general one was free
                        // would be missing for the next idle session.
                        tokio::select! {
                            biased;
                            p = self.shared.running.acquire() => p,
                            p = self.shared.reserved.acquire() => p,
                        }
                    } else {
                        self.shared.running.acquire().await
                    }
                    .map_err(closing)?;
                    // The output filled while this call waited for its
                    // place: the place goes back while it waits for room.
                    if !self.shared.output_full() {
                        break Ok::<_, ErrorData>((share, place, busy));
                    }
                }} => Some(p?),
                _ = context.ct.cancelled() => {
                    return Err(ErrorData::internal_error("the call was cancelled", None));
                }
                _ = self.shared.client_gone() => {
                    return Err(ErrorData::internal_error("the client is gone", None));
                }
            }
        };
        // The signal takes a descriptor: out of them, the call is refused
        // naming the shortage (making it could not fail here: it panicked
        // and the call was never answered).
        let abort = if name == "exec" {
            match sandgate::exec::AbortSignal::try_new() {
                Ok(a) => Some(a),
                Err(e) => {
                    let e = self.shared.refused(
                        "exec",
                        "",
                        Error::new(
                            ErrorCode::Io,
                            format!("cannot make the command's cancel signal: {e}"),
                        ),
                    );
                    let tool = self.tools.iter().find(|t| t.name == request_name);
                    return Ok(tool_result(tool, Err(e)).into());
                }
            }
        } else {
            None
        };
        let cancel = Cancel {
            flag: Arc::new(AtomicBool::new(false)),
            abort,
        };
        let answer = if inline {
            // Short work answers on this thread: handing it to another and
            // back would cost more than the work itself.
            self.run(&name, args, cancel)?
        } else {
            self.run_blocking(name, args, cancel, &context).await?
        };
        let tool = self.tools.iter().find(|t| t.name == request_name);
        Ok(tool_result(tool, answer).into())
    }
}

/// What a call of `tool` answers: its content (and the structured copy
/// its output schema asks for), or the refusal as a text naming the code,
/// with `isError` set.
pub(crate) fn tool_result(tool: Option<&Tool>, answer: tools::Answer) -> CallToolResult {
    match answer {
        Ok(mut content) => {
            let structured = tool.and_then(|t| tools::structured(t, &mut content));
            let mut r = CallToolResult::success(content);
            r.structured_content = structured;
            r
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(tools::describe(&e))]),
    }
}

/// Where a server listens.
#[derive(Clone, Debug)]
pub enum Listen {
    /// stdin and stdout, until stdin closes.
    Stdio,
    /// Streamable HTTP on a loopback address, with the bearer token written
    /// to the file.
    Http(std::net::SocketAddr, PathBuf),
    /// A UNIX socket at the path.
    Unix(PathBuf),
}

impl Server {
    /// Serves MCP as `listen` says, on a runtime of its own (for callers
    /// that are not async).
    pub fn serve_blocking(self, listen: Listen) -> Result<(), std::io::Error> {
        if let Listen::Http(addr, _) = &listen {
            transport::check_loopback(addr).map_err(std::io::Error::other)?;
        }
        // One thread serves the protocol: it reads and writes stdio (a
        // pipe or a socket), and answers short calls itself; long calls
        // run on the blocking pool. Two workers stealing each other's
        // tasks cost about three times the CPU per call, and handing every
        // read, call and write to another thread cost about ten context
        // switches and 200 µs of CPU per 4 KiB read (measured by `cargo
        // xtask bench --only mcp` and `perf stat`).
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            match listen {
                Listen::Stdio => self.serve_stdio().await,
                Listen::Http(addr, token) => transport::serve_http(self, addr, &token).await,
                Listen::Unix(path) => transport::serve_unix(self, &path).await,
            }
        })
    }
}

/// The policy of the reference server's command-line form: every directory
/// a read root, the first also the write root, overwriting allowed (its
/// `write_file` and `edit_file` replace files), restricted mode (every
/// `.git` component protected), what `sandgate init` protects besides
/// ([`starter::DENY_WRITE`]: `.github`, lockfiles, the settings of MCP
/// hosts and editors), no shell, no network. A first directory that is, or
/// lies inside, one of [`starter::KEPT_DIRS`] is refused (`E_POLICY`), and
/// so is `/`, the home directory or one holding it
/// ([`starter::home_refusal`]).
pub fn policy_for_dirs(dirs: &[PathBuf]) -> Result<Policy, Error> {
    if dirs.is_empty() {
        return Err(Error::new(
            ErrorCode::Request,
            "name at least one directory",
        ));
    }
    let mut roots = Vec::new();
    for d in dirs {
        let real = std::fs::canonicalize(d).map_err(|e| {
            Error::new(
                ErrorCode::NotFound,
                format!("{}: {e}", sandgate::policy::shown(d)),
            )
        })?;
        let s = real.to_str().ok_or_else(|| {
            Error::new(
                ErrorCode::PathInvalid,
                format!("{}: not UTF-8", sandgate::policy::shown(d)),
            )
        })?;
        // A JSON string is a valid TOML basic string once DEL, which JSON
        // leaves raw and TOML forbids raw, is escaped too.
        let quoted = serde_json::to_string(s).unwrap_or_default();
        if roots.is_empty() {
            if let Some(why) = starter::home_refusal(&real) {
                return Err(Error::new(
                    ErrorCode::Policy,
                    format!("{why} (or serve a policy written by hand with --policy)"),
                ));
            }
            if let Some(name) = starter::kept_component(&real) {
                return Err(Error::new(
                    ErrorCode::Policy,
                    format!(
                        "{}: the directory is or lies inside `{name}`, which the directory \
                         form keeps from the agent; give the work tree around it (or serve a \
                         policy written by hand with --policy)",
                        sandgate::policy::shown(&real)
                    ),
                ));
            }
        }
        roots.push(quoted.replace('\u{7f}', "\\u007F"));
    }
    let toml = format!(
        "security_mode = \"restricted\"\n\n[fs]\nread_roots = [{}]\nwrite_root = {}\n\
         deny_write = {}\nallow_overwrite = true\n",
        roots.join(", "),
        roots[0],
        starter::deny_write_toml()
    );
    Policy::from_bytes(toml.as_bytes(), std::path::Path::new("/"), None).map_err(Error::from)
}

/// `text` with every control but line feed and tab, and every
/// bidirectional embedding, override or isolate, written as `\u{…}`, for a
/// terminal: an escape sequence in a file's content or name could
/// otherwise set the terminal's title or clipboard, hide or redraw what is
/// shown, and the bidirectional controls reorder it.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c != '\n' && c != '\t' && sandgate::policy::terminal_unsafe(c);
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Writes `args` and a newline to stderr, in one write, or nothing: where
/// stderr is a regular file (a log) that the line would take past the
/// process's file size limit (`ulimit -f`), it is not written, since the
/// write would raise `SIGXFSZ`, whose default action ends the program
/// embedding the server; a failed write is not a panic either, as
/// `eprintln!`'s is.
///
/// The line goes out through [`terminal_safe`]: it names files the user or
/// an agent chose (the socket, the token file, the audit file), and an
/// escape sequence in one would otherwise reach the terminal as is.
pub(crate) fn say(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    use std::os::fd::AsFd;
    let text = args.to_string();
    let line = format!("{}\n", terminal_safe(&text));
    let stderr = std::io::stderr();
    if let Some(at) = lines::regular_file_offset(stderr.as_fd()) {
        if sandgate::rootfs::within_file_size_limit(at.saturating_add(line.len() as u64)).is_err() {
            return;
        }
    }
    let _ = stderr.lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    /// A known method whose params do not fit is invalid params, not an
    /// unknown method (before, both were -32601 with the bare method name).
    #[test]
    fn a_request_the_sdk_could_not_parse_is_answered_by_what_is_wrong() {
        use serde_json::json;
        let e = super::unparsed_request("no/such", None);
        assert_eq!(e.code.0, -32601);
        assert_eq!(e.message, "method not found: no/such");
        for (params, why) in [
            (None, "params are missing"),
            (Some(json!({"arguments": {}})), "missing field `name`"),
            (Some(json!({"name": 5})), "invalid type"),
            (
                Some(json!({"name": "read_text_file"})),
                "a key is given twice",
            ),
        ] {
            let e = super::unparsed_request("tools/call", params.as_ref());
            assert_eq!(e.code.0, -32602, "{params:?}");
            assert!(e.message.contains(why), "{params:?}: {}", e.message);
            assert!(e.message.starts_with("invalid params for tools/call: "));
        }
        let e = super::unparsed_request("resources/read", Some(&json!({})));
        assert_eq!(e.code.0, -32602);
    }

    #[test]
    fn file_uris_are_read_as_uris_are_written() {
        use super::file_uri_path as p;
        assert_eq!(p("file:///srv/app").as_deref(), Some("/srv/app"));
        // Scheme and host in any letter case (before, these were dropped).
        assert_eq!(p("FILE:///srv/app").as_deref(), Some("/srv/app"));
        assert_eq!(p("File://LocalHost/srv/a%20b").as_deref(), Some("/srv/a b"));
        assert_eq!(p("file://localhost/srv").as_deref(), Some("/srv"));
        // Strict escapes: a sign is no hex digit, a cut escape is none.
        assert_eq!(p("file:///a%+1"), None);
        assert_eq!(p("file:///a%4"), None);
        assert_eq!(p("file:///a%"), None);
        assert_eq!(p("file:///a%2F%2e%2E").as_deref(), Some("/a/.."));
        // Another host, a relative path, another scheme, not UTF-8.
        assert_eq!(p("file://example.com/srv"), None);
        assert_eq!(p("file:srv"), None);
        assert_eq!(p("https:///srv"), None);
        assert_eq!(p("file:///a%FF"), None);
        assert_eq!(p("file:/"), None);
    }

    use super::*;
    use sandgate::Resolver;
    use std::os::unix::fs::symlink;

    /// A tree with a client root `src` and links in and out of it.
    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("src/deep/er")).unwrap();
        std::fs::write(d.join("a.txt"), "outside src").unwrap();
        std::fs::write(d.join("src/lib.rs"), "inside").unwrap();
        std::fs::write(d.join("src/file"), "a file").unwrap();
        symlink("..", d.join("src/up")).unwrap();
        symlink(d, d.join("src/abs")).unwrap();
        symlink(d.join("src/lib.rs"), d.join("src/abs_in")).unwrap();
        symlink("../a.txt", d.join("src/a_link")).unwrap();
        symlink("lib.rs", d.join("src/in_link")).unwrap();
        symlink("deep/er", d.join("src/down")).unwrap();
        symlink("../../..", d.join("src/deep/er/out")).unwrap();
        symlink("../..", d.join("src/deep/er/top")).unwrap();
        symlink("nowhere", d.join("src/dangling_in")).unwrap();
        symlink("../nowhere", d.join("src/dangling_out")).unwrap();
        symlink("src", d.join("src_link")).unwrap();
        t
    }

    fn leads(root: &Root, prefix: &str, name: &str) -> bool {
        leads_beneath(
            root,
            prefix,
            &listed_place(root, prefix),
            &RelPath::parse(name).unwrap(),
        )
    }

    #[test]
    fn names_are_judged_by_where_they_lead_under_both_resolvers() {
        let t = tree();
        let mut resolvers = vec![Resolver::Walk];
        if !Root::open(t.path()).unwrap().openat2_unavailable() {
            resolvers.push(Resolver::Openat2);
        }
        for resolver in resolvers {
            let root = Root::open_with_resolver(t.path(), resolver).unwrap();
            let at = |prefix: &str, name: &str| (resolver, prefix.to_owned(), name.to_owned());
            for (prefix, name) in [
                ("src", "src"),
                ("src", "src/lib.rs"),
                ("src", "src/in_link"),
                ("src", "src/down/top/lib.rs"),
                ("src", "src/new.txt"),
                ("src", "src/new/deeper/file.txt"),
                ("src", "src/dangling_in"),
                ("src", "src/deep/er"),
                ("src/deep", "src/deep/er"),
                // The client root is what its name resolves to.
                ("src_link", "src_link/lib.rs"),
                // Missing: nothing to resolve through.
                ("gone", "gone/x"),
            ] {
                assert!(leads(&root, prefix, name), "{:?}", at(prefix, name));
            }
            for (prefix, name) in [
                ("src", "src/up"),
                ("src", "src/up/a.txt"),
                ("src", "src/up/src/lib.rs"),
                ("src", "src/abs"),
                ("src", "src/abs_in"),
                ("src", "src/a_link"),
                ("src", "src/up/new.txt"),
                ("src", "src/dangling_out"),
                ("src", "src/down/out/a.txt"),
                ("src", "src/deep/er/out"),
                ("src/deep", "src/deep/er/top"),
                ("src/deep", "src/deep/er/top/lib.rs"),
                ("src/deep/er", "src/deep/er/top"),
                // A file is no directory to stay beneath.
                ("src/file", "src/file"),
            ] {
                assert!(!leads(&root, prefix, name), "{:?}", at(prefix, name));
            }
        }
    }

    /// `sandgate mcp DIR...` serves any UTF-8 directory name as itself:
    /// quotes, backslashes, line breaks, other control characters and DEL
    /// (which TOML forbids raw in a string, and JSON's escaping leaves raw).
    #[test]
    fn policy_for_dirs_takes_any_utf8_directory_name() {
        for name in [
            "del\u{7f}dir",
            "q\"uote\\back",
            "tab\tnl\n[exec]",
            "\u{1}\u{9f}x",
        ] {
            let t = tempfile::tempdir().unwrap();
            let (a, b) = (t.path().join(name), t.path().join("second"));
            std::fs::create_dir(&a).unwrap();
            std::fs::create_dir(&b).unwrap();
            let policy = policy_for_dirs(&[a.clone(), b.clone()])
                .unwrap_or_else(|e| panic!("{name:?}: {}", e.message()));
            let (a, b) = (a.canonicalize().unwrap(), b.canonicalize().unwrap());
            assert_eq!(policy.write_root(), Some(a.as_path()), "{name:?}");
            assert_eq!(policy.read_roots(), [a, b], "{name:?}");
            assert!(!policy.exec().enabled, "{name:?}");
        }
    }
}
