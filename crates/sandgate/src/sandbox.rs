//! The agent-facing sandbox (docs/reference/sandbox.md): every file tool an agent is handed,
//! confined to granted roots, guarded by deny-write patterns, capped,
//! budgeted and audited.

use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use sandgate_codes::ErrorCode;
use sandgate_fileguard::{Guard, GuardBuilder, Verdict};
use sandgate_rootfs::{ErrorKind, FileKind, OpenOptions, RenameMode, Resolver, Root};

use crate::audit::{AuditEvent, AuditSink};
use crate::bytes::{
    count_occurrences, count_places, read_line_capped, replace_all, skip_line, ReadCancelled,
};
use crate::error::Error;
use crate::hostpath::{self, GrantedDir};
use crate::relpath::RelPath;
use crate::search;

/// Default cap of one read: 10 MiB.
pub const DEFAULT_MAX_READ_BYTES: u64 = 10 * 1024 * 1024;
/// Default cap of one write: 5 MiB.
pub const DEFAULT_MAX_WRITE_BYTES: u64 = 5 * 1024 * 1024;
/// Most lines one ranged read serves.
pub const MAX_RANGE_LINES: usize = 2000;
/// Most entries a directory rename looks through for protected names; a
/// directory holding more (at any depth) is not moved.
pub const MAX_RENAME_WALK_ENTRIES: usize = 10_000;
/// Most directories a directory rename's walk holds open at once besides
/// the top: a tree thousands of levels deep would otherwise take a
/// descriptor per level and exhaust the process's limit (EMFILE, for every
/// thread of the host while it lasts). A level let go is opened again from
/// the top, never through a link, and must be the directory it was.
const RENAME_WALK_HELD: usize = 64;

/// The options of one [`Sandbox::write`]. `Default`: create the file
/// exclusively (an existing file is refused with `E_EXISTS`).
///
/// ```no_run
/// # use sandgate::{Sandbox, WriteOptions};
/// # let sb: Sandbox = todo!();
/// sb.write("notes.md", b"new", WriteOptions::default())?; // create only
/// sb.write("notes.md", b"again", WriteOptions::default().overwrite(true))?;
/// # Ok::<(), sandgate::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// The call's half of the overwrite rule: an existing regular file is
    /// replaced only when this is true and the sandbox allows overwriting
    /// (`allow_overwrite`). Default false.
    pub overwrite: bool,
}

impl WriteOptions {
    /// Sets [`overwrite`](Self::overwrite).
    #[must_use]
    pub fn overwrite(mut self, on: bool) -> Self {
        self.overwrite = on;
        self
    }
}

/// The options of one [`Sandbox::edit`]. `Default`: the old text must occur
/// exactly once.
///
/// ```no_run
/// # use sandgate::{EditOptions, Sandbox};
/// # let sb: Sandbox = todo!();
/// sb.edit("src/lib.rs", "old_name", "new_name", EditOptions::default().replace_all(true))?;
/// # Ok::<(), sandgate::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EditOptions {
    /// Replace every occurrence (at least one) instead of exactly one.
    /// Default false.
    pub replace_all: bool,
}

impl EditOptions {
    /// Sets [`replace_all`](Self::replace_all).
    #[must_use]
    pub fn replace_all(mut self, on: bool) -> Self {
        self.replace_all = on;
        self
    }
}

/// Builds a [`Sandbox`]. Nothing is granted until configured: a sandbox
/// built from `SandboxBuilder::new()` alone refuses every operation.
///
/// The options mirror a Go-style options API: read roots, write root, byte
/// caps, the host's half of the overwrite rule, deny patterns and an audit
/// sink.
#[derive(Clone)]
pub struct SandboxBuilder {
    read_roots: Vec<PathBuf>,
    write_root: Option<PathBuf>,
    max_read_bytes: u64,
    max_write_bytes: u64,
    allow_overwrite: bool,
    deny_write: Vec<String>,
    restricted: bool,
    audit: Option<AuditSink>,
    resolver: Resolver,
    fs_ops: Option<u64>,
    /// Roots as a policy named them (canonical path, path as named), so a
    /// host path spelled through a symlinked root maps too.
    named: Vec<(PathBuf, PathBuf)>,
}

impl Default for SandboxBuilder {
    fn default() -> Self {
        SandboxBuilder::new()
    }
}

impl std::fmt::Debug for SandboxBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxBuilder")
            .field("read_roots", &self.read_roots)
            .field("write_root", &self.write_root)
            .field("max_read_bytes", &self.max_read_bytes)
            .field("max_write_bytes", &self.max_write_bytes)
            .field("allow_overwrite", &self.allow_overwrite)
            .field("deny_write", &self.deny_write)
            .field("restricted", &self.restricted)
            .field("audit", &self.audit.is_some())
            .field("resolver", &self.resolver)
            .field("fs_ops", &self.fs_ops)
            .finish()
    }
}

impl SandboxBuilder {
    /// Nothing granted; restricted mode; default caps.
    pub fn new() -> SandboxBuilder {
        SandboxBuilder {
            read_roots: Vec::new(),
            write_root: None,
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
            max_write_bytes: DEFAULT_MAX_WRITE_BYTES,
            allow_overwrite: false,
            deny_write: Vec::new(),
            restricted: true,
            audit: None,
            resolver: Resolver::Auto,
            fs_ops: None,
            named: Vec::new(),
        }
    }
    /// A builder holding everything a policy grants for files: roots, caps,
    /// the overwrite switch, deny patterns, the mode and the fs_ops budget.
    /// Add an audit sink before building if you want one.
    pub fn from_policy(policy: &sandgate_policy::Policy) -> SandboxBuilder {
        let limits = policy.limits();
        let mut b = SandboxBuilder::new();
        b.read_roots(policy.read_roots().iter().cloned())
            .max_read_bytes(limits.max_read_bytes)
            .max_write_bytes(limits.max_write_bytes)
            .allow_overwrite(limits.allow_overwrite)
            .deny_write_patterns(policy.deny_write().iter().cloned())
            .restricted(policy.security_mode() == sandgate_policy::SecurityMode::Restricted)
            .fs_ops_budget(policy.budgets().fs_ops);
        if let Some(w) = policy.write_root() {
            b.write_root(w);
        }
        b.named = policy
            .read_roots()
            .iter()
            .cloned()
            .zip(policy.read_roots_as_named().iter().cloned())
            .chain(
                policy
                    .write_root()
                    .map(Path::to_path_buf)
                    .zip(policy.write_root_as_named().map(Path::to_path_buf)),
            )
            .collect();
        b
    }

    /// Adds a read root (looked up after those added before it).
    pub fn read_root(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.read_roots.push(dir.into());
        self
    }
    /// Adds several read roots, in order.
    pub fn read_roots<I: IntoIterator<Item = P>, P: Into<PathBuf>>(
        &mut self,
        dirs: I,
    ) -> &mut Self {
        self.read_roots.extend(dirs.into_iter().map(Into::into));
        self
    }
    /// Sets the one write root.
    pub fn write_root(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.write_root = Some(dir.into());
        self
    }
    /// Caps one read (bytes, at least 1).
    pub fn max_read_bytes(&mut self, n: u64) -> &mut Self {
        self.max_read_bytes = n;
        self
    }
    /// Caps one write (bytes, at least 1).
    pub fn max_write_bytes(&mut self, n: u64) -> &mut Self {
        self.max_write_bytes = n;
        self
    }
    /// The host's half of the overwrite rule: replacing an existing file also
    /// needs `overwrite = true` in the call.
    pub fn allow_overwrite(&mut self, on: bool) -> &mut Self {
        self.allow_overwrite = on;
        self
    }
    /// Adds a deny-write pattern (docs/reference/deny-write.md).
    pub fn deny_write(&mut self, pattern: impl Into<String>) -> &mut Self {
        self.deny_write.push(pattern.into());
        self
    }
    /// Adds several deny-write patterns.
    pub fn deny_write_patterns<I: IntoIterator<Item = S>, S: Into<String>>(
        &mut self,
        patterns: I,
    ) -> &mut Self {
        self.deny_write.extend(patterns.into_iter().map(Into::into));
        self
    }
    /// Restricted mode (the default) also protects every `.git` component.
    pub fn restricted(&mut self, on: bool) -> &mut Self {
        self.restricted = on;
        self
    }
    /// Calls `sink` after every operation, refused ones included.
    pub fn audit(&mut self, sink: impl Fn(&AuditEvent) + Send + Sync + 'static) -> &mut Self {
        self.audit = Some(Arc::new(sink));
        self
    }
    /// Uses an already shared audit sink.
    pub fn audit_sink(&mut self, sink: AuditSink) -> &mut Self {
        self.audit = Some(sink);
        self
    }
    /// Forces a resolver (tests and benchmarks; the default is `Auto`).
    pub fn resolver(&mut self, resolver: Resolver) -> &mut Self {
        self.resolver = resolver;
        self
    }
    /// Limits the number of file operations (`None`: unlimited; `Some(0)`:
    /// none allowed).
    pub fn fs_ops_budget(&mut self, budget: Option<u64>) -> &mut Self {
        self.fs_ops = budget;
        self
    }

    /// Opens the roots and compiles the patterns.
    ///
    /// Refuses (`E_POLICY`, naming the setting) zero byte caps and malformed
    /// patterns; a root that cannot be opened as a directory answers with its
    /// OS error.
    pub fn build(&self) -> Result<Sandbox, Error> {
        if self.max_read_bytes == 0 {
            return Err(
                Error::new(ErrorCode::Policy, "max_read_bytes must be at least 1")
                    .with_key("max_read_bytes"),
            );
        }
        if self.max_write_bytes == 0 {
            return Err(
                Error::new(ErrorCode::Policy, "max_write_bytes must be at least 1")
                    .with_key("max_write_bytes"),
            );
        }
        let guard = deny_write_guard(self.deny_write.iter(), self.restricted)?;
        let open = |dir: &Path, what: &str| {
            Root::open_with_resolver(dir, self.resolver).map_err(|e| {
                Error::from(e)
                    .with_key(what.to_owned())
                    // Never the lossy spelling, another directory's name.
                    .with_path(sandgate_policy::shown(dir))
            })
        };
        let read_roots = self
            .read_roots
            .iter()
            .map(|d| open(d, "read_roots"))
            .collect::<Result<Vec<_>, _>>()?;
        let write_root = self
            .write_root
            .as_deref()
            .map(|d| open(d, "write_root"))
            .transpose()?;
        let inner = Inner {
            dirs: granted_dirs(&self.read_roots, self.write_root.as_deref(), &self.named),
            read_roots,
            write_root,
            guard_active: guard.has_patterns() || guard.is_restricted(),
            guard,
            max_read_bytes: self.max_read_bytes,
            max_write_bytes: self.max_write_bytes,
            allow_overwrite: self.allow_overwrite,
            fs_ops: self.fs_ops.map(AtomicU64::new),
        };
        Ok(Sandbox {
            state: RwLock::new(Some(Arc::new(inner))),
            audit: self.audit.clone(),
        })
    }
}

/// The granted directories' host paths: each read root in order (marked
/// as the write root when it is the same directory), then the write root
/// when it is not also a read root. A directory whose path cannot be
/// resolved keeps its spelling for both. A root a policy named through a
/// symlink (`named`: canonical path, path as named) is spelled as named.
fn granted_dirs(
    read_roots: &[PathBuf],
    write_root: Option<&Path>,
    named: &[(PathBuf, PathBuf)],
) -> Vec<GrantedDir> {
    let both = |dir: &Path| {
        let as_named = named.iter().find(|(c, _)| c == dir).map(|(_, n)| n);
        let spelled = as_named
            .cloned()
            .or_else(|| std::path::absolute(dir).ok())
            .unwrap_or_else(|| dir.to_path_buf());
        let resolved = std::fs::canonicalize(dir).unwrap_or_else(|_| spelled.clone());
        (spelled, resolved)
    };
    let write = write_root.map(both);
    let mut dirs: Vec<GrantedDir> = read_roots
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let (spelled, resolved) = both(dir);
            GrantedDir {
                is_write: write.as_ref().is_some_and(|(_, w)| *w == resolved),
                spelled,
                resolved,
                read_index: Some(i),
            }
        })
        .collect();
    if let Some((spelled, resolved)) = write {
        if !dirs.iter().any(|d| d.is_write) {
            dirs.push(GrantedDir {
                spelled,
                resolved,
                read_index: None,
                is_write: true,
            });
        }
    }
    dirs
}

/// The confined file toolkit handed to an agent.
///
/// `Send + Sync`: share it between threads (in an `Arc`) and call any
/// operation concurrently. [`close`](Self::close) releases the roots;
/// operations called afterwards answer `E_CLOSED`.
pub struct Sandbox {
    state: RwLock<Option<Arc<Inner>>>,
    /// The audit sink, kept here rather than with the state [`Sandbox::close`]
    /// drops, so that a call refused with `E_CLOSED` is reported like every
    /// other refusal.
    audit: Option<AuditSink>,
}

struct Inner {
    /// The roots' host paths, as spelled and resolved, for
    /// [`Sandbox::host_read_name`] and [`Sandbox::host_write_name`].
    dirs: Vec<GrantedDir>,
    read_roots: Vec<Root>,
    write_root: Option<Root>,
    guard: Guard,
    /// Whether any deny rule exists: resolved-path checks and the hard-link
    /// refusal apply only then.
    guard_active: bool,
    max_read_bytes: u64,
    max_write_bytes: u64,
    allow_overwrite: bool,
    fs_ops: Option<AtomicU64>,
}

/// What the audit event of one operation will say.
struct Ctx {
    path: Option<String>,
    size: Option<u64>,
    audit: bool,
}

impl Ctx {
    fn path(&mut self, p: impl FnOnce() -> String) {
        if self.audit {
            self.path = Some(p());
        }
    }

    /// Takes the name a deny-rule refusal of a resolved name gives (where
    /// the name led through in-root symlinks, which is what was refused)
    /// as the event's path, and hands the refusal back. The spelling alone
    /// may match no pattern and would hide what was aimed at.
    fn refused_at(&mut self, e: Error) -> Error {
        self.refused_as(e, str::to_owned)
    }

    /// [`Ctx::refused_at`], with the event's path made from the refused
    /// name by `shown` (a rename's `from -> to`).
    fn refused_as(&mut self, e: Error, shown: impl FnOnce(&str) -> String) -> Error {
        if e.code() == ErrorCode::FsProtected {
            if let Some(p) = e.path() {
                self.path(|| shown(p));
            }
        }
        e
    }

    /// Keeps a name that is no longer needed as the event's path, without
    /// copying it (the hot read-only operations).
    fn keep_path(&mut self, rel: RelPath) {
        if self.audit {
            self.path = Some(rel.into_string());
        }
    }
}

/// A ranged read's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinesRead {
    /// The lines served, with their line endings.
    pub content: Vec<u8>,
    /// The first line asked for (1-based).
    pub offset: usize,
    /// How many lines were served (fewer than asked at the end of the file
    /// or where the byte cap cut the range at a whole line).
    pub lines: usize,
    /// Lines in the whole file.
    pub total_lines: usize,
    /// Whether the byte cap cut the range short.
    pub truncated: bool,
}

/// What [`Sandbox::edit_many`] answers: the file's bytes before and after
/// the edits (after is what was written, or would be on a dry run).
///
/// Both are `None` where a [`read`](Sandbox::read) of the same name would
/// not be served from the write root: the write root is not a read root,
/// or an earlier read root holds the name and answers for it. The write
/// root grants no reads by itself, so an edit must not show what a read
/// refuses; the edit is applied (or judged, on a dry run) all the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditPreview {
    /// The file as it was read; `None` where the file tools may not read it.
    pub before: Option<Vec<u8>>,
    /// The file with every edit applied; `None` where the file tools may
    /// not read it.
    pub after: Option<Vec<u8>>,
}

/// One entry of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListEntry {
    /// The entry's name. A name that is not UTF-8 is shown with each byte
    /// that is not part of valid UTF-8 as `\xNN`: agent-facing names never
    /// hold a backslash, so acting on that spelling is `E_PATH_INVALID`,
    /// never another file (which a lossy `U+FFFD` spelling could be).
    pub name: String,
    /// `file`, `dir`, `symlink` or `other` (symlinks are not followed).
    pub kind: FileKind,
    /// Size in bytes (of the link itself for a symlink).
    pub size: u64,
}

/// What [`Sandbox::stat`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatInfo {
    /// The kind, following a final symlink beneath the root.
    pub kind: FileKind,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Last modification time, in seconds since the Unix epoch.
    pub mtime: i64,
}

/// What [`Sandbox::explain_read`] and [`Sandbox::explain_write`] answer
/// when the operation would be allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FsGrant {
    /// Readable; `root` is the index in `fs.read_roots` of the first root
    /// that holds the name (the one a read uses).
    Read {
        /// Index in the read roots.
        root: usize,
    },
    /// Writable beneath the write root; `exists` when the write would
    /// replace an existing file (which `allow_overwrite` grants).
    Write {
        /// Whether a file is already there.
        exists: bool,
    },
}

impl Sandbox {
    /// A builder with nothing granted.
    pub fn builder() -> SandboxBuilder {
        SandboxBuilder::new()
    }

    /// The sandbox a policy grants (no audit sink).
    pub fn from_policy(policy: &sandgate_policy::Policy) -> Result<Sandbox, Error> {
        SandboxBuilder::from_policy(policy).build()
    }

    /// Releases the roots. Operations called afterwards answer `E_CLOSED`;
    /// those already running finish first.
    pub fn close(&self) {
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Malformed deny-pattern components that were treated as `*` (fail
    /// closed), one message each, for the operator to see.
    pub fn warnings(&self) -> Vec<String> {
        match self
            .state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            Some(inner) => inner
                .guard
                .warnings()
                .iter()
                .map(ToString::to_string)
                .collect(),
            None => Vec::new(),
        }
    }

    /// Fs operations left in the budget (`None`: unlimited).
    pub fn fs_ops_remaining(&self) -> Option<u64> {
        let inner = self
            .state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        inner.fs_ops.as_ref().map(|b| b.load(Ordering::SeqCst))
    }

    /// Runs one operation: closed check, budget, the body, then the audit
    /// event (refusals included).
    fn op<T>(
        &self,
        name: &'static str,
        raw: &str,
        body: impl FnOnce(&Inner, &mut Ctx) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut ctx = Ctx {
            path: None,
            size: None,
            audit: self.audit.is_some(),
        };
        // `current` holds the lock only while it clones the state: the
        // sink below (a refusal's after close included) runs with no lock
        // held, so a slow sink holds up neither `close` nor other
        // threads' calls.
        let result = self
            .current()
            .and_then(|inner| inner.take_budget().and_then(|()| body(&inner, &mut ctx)));
        self.record(
            name,
            || ctx.path.unwrap_or_else(|| raw.to_owned()),
            ctx.size,
            result.as_ref().err().map_or(ErrorCode::Ok, Error::code),
        );
        result
    }

    /// Tells the audit sink, if there is one, of a call: `path` is made
    /// only when it is.
    fn record(
        &self,
        op: &'static str,
        path: impl FnOnce() -> String,
        size: Option<u64>,
        outcome: ErrorCode,
    ) {
        if let Some(sink) = &self.audit {
            sink(&AuditEvent {
                op,
                path: path(),
                size,
                time: SystemTime::now(),
                outcome,
                exit_code: None,
                limit: None,
            });
        }
    }

    /// Reports a call that a door refused as malformed before the sandbox
    /// saw it (the C ABI's refusal of a name that is not UTF-8, the JSON
    /// endpoint's of a field that does not fit): the audit sink hears of
    /// it with `op`, `path` as given (what is not text replaced) and the
    /// refusal's code. Like every request refused as malformed before it
    /// reaches the sandbox, it spends no budget (the shared vector
    /// `budget_malformed_requests_are_not_fs_ops`). Answers the refusal;
    /// once the sandbox is closed, `E_CLOSED` instead (recorded so), as
    /// every operation answers then, malformed or not.
    pub fn audit_refusal(&self, op: &'static str, path: &str, e: Error) -> Error {
        let e = match self.current() {
            Ok(_) => e,
            Err(closed) => closed,
        };
        self.record(op, || path.to_owned(), None, e.code());
        e
    }

    /// Whether [`read`](Self::read) of `path` would succeed, and from
    /// which read root, decided by the checks `read` makes (the name, the
    /// granted roots in order, the kind and the byte cap) without reading
    /// the file or spending the budget.
    pub fn explain_read(&self, path: &str) -> Result<FsGrant, Error> {
        let inner = self.current()?;
        let rel = RelPath::parse(path)?;
        let (index, meta) = inner.stat_first_index(&rel)?;
        if !meta.is_file() {
            return Err(not_file(&rel));
        }
        if meta.len() > inner.max_read_bytes {
            return Err(Error::new(
                ErrorCode::TooLarge,
                format!(
                    "{} bytes is over max_read_bytes ({}): read a line range instead",
                    meta.len(),
                    inner.max_read_bytes
                ),
            )
            .with_path(rel.as_str()));
        }
        Ok(FsGrant::Read { root: index })
    }

    /// Whether [`write`](Self::write) of `path` with `overwrite` asked for
    /// would succeed, decided by the checks `write` makes (the name, the
    /// write root, the deny rules on the name as spelled and as it
    /// resolves through in-root symlinks, and for an existing entry its
    /// kind, links and the overwrite grant) without writing, creating a
    /// directory or spending the budget.
    pub fn explain_write(&self, path: &str) -> Result<FsGrant, Error> {
        let inner = self.current()?;
        let rel = RelPath::parse(path)?;
        let wr = inner.admit_write(&rel, None)?;
        let (dir, name, resolved) = match inner.open_checked(wr, &rel, Entry::Other) {
            Ok(found) => found,
            // Missing parents are created by `write`, each checked as
            // spelled (done above) and where it lands (nothing there yet).
            Err(e) if e.code() == ErrorCode::NotFound => {
                return Ok(FsGrant::Write { exists: false })
            }
            Err(e) => return Err(e),
        };
        match dir.lstat(name) {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(FsGrant::Write { exists: false }),
            Err(e) => Err(at(e, &resolved)),
            Ok(meta) => {
                inner.check_existing(&meta, &resolved)?;
                if !inner.allow_overwrite {
                    return Err(exists(&resolved, inner.allow_overwrite, true));
                }
                Ok(FsGrant::Write { exists: true })
            }
        }
    }

    /// The name a read-side operation takes for `path`, given by the host:
    /// an absolute host path inside a read root (compared with each root
    /// component by component, as its directory was spelled and as its
    /// symlinks resolve, never by string prefix) becomes its root-relative
    /// name; anything else is returned as given, for the operation's own
    /// name check to judge. Agent-supplied names never need this.
    ///
    /// # Errors
    ///
    /// `E_PATH_INVALID` for a path holding a NUL byte, which names no file
    /// (absolute or relative, in a root or not; the message does not
    /// repeat it); `E_PATH_ESCAPE` for an absolute path outside every root (the
    /// message does not repeat it); `E_DENIED` for one in the write root
    /// when that is not also a read root; `E_PATH_INVALID` for one in a
    /// later read root whose name an earlier root also holds, since
    /// names resolve in the first root that holds them and the read would
    /// reach the other file.
    pub fn host_read_name(&self, path: &str) -> Result<String, Error> {
        let inner = self.current()?;
        let m = hostpath::map(&inner.dirs, path)?;
        let Some(i) = m.dir else { return Ok(m.rel) };
        match inner.dirs[i].read_index {
            None => Err(Error::denied(
                "this path is in the write root, which is not a read root",
            )),
            Some(k) => {
                let shadowed = RelPath::parse(&m.rel).is_ok_and(|rel| {
                    inner.read_roots[..k]
                        .iter()
                        .any(|r| r.lstat(rel.as_str()).is_ok())
                });
                if shadowed {
                    return Err(Error::new(
                        ErrorCode::PathInvalid,
                        "an earlier read root holds the same name and answers for it; this copy \
                         cannot be reached",
                    )
                    .with_path(m.rel));
                }
                Ok(m.rel)
            }
        }
    }

    /// The name a write-side operation takes for `path`, given by the
    /// host: an absolute host path inside the write root becomes its
    /// root-relative name (compared as [`host_read_name`](Self::host_read_name)
    /// does); anything else is returned as given.
    ///
    /// # Errors
    ///
    /// `E_PATH_INVALID` for a path holding a NUL byte; `E_PATH_ESCAPE` for
    /// an absolute path outside every root; `E_DENIED` for one inside a
    /// read root that is not the write root.
    pub fn host_write_name(&self, path: &str) -> Result<String, Error> {
        let inner = self.current()?;
        let m = hostpath::map_for_write(&inner.dirs, path)?;
        match m.dir {
            Some(i) if !inner.dirs[i].is_write => Err(Error::denied(
                "this path is in a read-only root; writes go to the write root",
            )
            .with_path(m.rel)),
            _ => Ok(m.rel),
        }
    }

    fn current(&self) -> Result<Arc<Inner>, Error> {
        self.state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(Arc::clone)
            .ok_or_else(|| Error::new(ErrorCode::Closed, "the sandbox was closed"))
    }

    /// Reads a whole file from the first read root that holds it. A file
    /// larger than `max_read_bytes` is refused (`E_TOO_LARGE`): read it by
    /// line ranges instead.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, Error> {
        self.op("read", path, |inner, ctx| {
            let rel = RelPath::parse(path)?;
            let buf = inner.read_first(&rel);
            ctx.keep_path(rel);
            let buf = buf?;
            ctx.size = Some(buf.len() as u64);
            Ok(buf)
        })
    }

    /// Reads `limit` lines (at most 2000) starting at line `offset`
    /// (1-based), cut at a whole line so the answer stays under
    /// `max_read_bytes`, and counts the file's lines.
    pub fn read_lines(&self, path: &str, offset: usize, limit: usize) -> Result<LinesRead, Error> {
        self.read_lines_cancellable(path, offset, limit, &AtomicBool::new(false))
    }

    /// [`Sandbox::read_lines`], stopped with `E_ABORTED` once `cancel` is
    /// set (from another thread). A ranged read counts every line of the
    /// file, so its time grows with the file's data, not with the range
    /// (the holes of a sparse file, which hold no newline, are passed over
    /// unread where the filesystem reports them). The flag is looked at
    /// every 64 KiB read.
    pub fn read_lines_cancellable(
        &self,
        path: &str,
        offset: usize,
        limit: usize,
        cancel: &AtomicBool,
    ) -> Result<LinesRead, Error> {
        self.op("read", path, |inner, ctx| {
            if offset == 0 {
                return Err(Error::request("offset is 1-based: the first line is 1"));
            }
            check_range_limit(limit)?;
            let rel = RelPath::parse(path)?;
            ctx.path(|| rel.as_str().to_owned());
            let mut file = inner.open_read(&rel)?;
            if !file.metadata().map_err(|e| io_error(&rel, e))?.is_file() {
                return Err(not_file(&rel));
            }
            let r = read_range(inner, &rel, &mut file, offset, limit, cancel)?;
            ctx.size = Some(r.content.len() as u64);
            Ok(r)
        })
    }

    /// Reads the last `limit` lines (at most 2000) of a file, as
    /// [`Sandbox::read_lines`] reads a range, in one operation (one
    /// `fs_ops`, one open: the lines are counted and then read from the same
    /// file). A file of fewer lines is read whole.
    pub fn read_last_lines(&self, path: &str, limit: usize) -> Result<LinesRead, Error> {
        self.read_last_lines_cancellable(path, limit, &AtomicBool::new(false))
    }

    /// [`Sandbox::read_last_lines`], stopped with `E_ABORTED` once
    /// `cancel` is set, as [`Sandbox::read_lines_cancellable`] is.
    pub fn read_last_lines_cancellable(
        &self,
        path: &str,
        limit: usize,
        cancel: &AtomicBool,
    ) -> Result<LinesRead, Error> {
        self.op("read", path, |inner, ctx| {
            check_range_limit(limit)?;
            let rel = RelPath::parse(path)?;
            ctx.path(|| rel.as_str().to_owned());
            let mut file = inner.open_read(&rel)?;
            if !file.metadata().map_err(|e| io_error(&rel, e))?.is_file() {
                return Err(not_file(&rel));
            }
            let mut total = 0usize;
            {
                let mut reader = BufReader::with_capacity(64 * 1024, &mut file);
                while skip_line(&mut reader, cancel).map_err(|e| read_error(&rel, e))? > 0 {
                    total += 1;
                }
            }
            file.seek(std::io::SeekFrom::Start(0))
                .map_err(|e| io_error(&rel, e))?;
            let offset = total.saturating_sub(limit) + 1;
            let mut r = read_range(inner, &rel, &mut file, offset, limit, cancel)?;
            // The file lost lines between the count and the read (cut
            // meanwhile): its last lines are those the read counted, so
            // it is read once more from there rather than answered empty.
            if r.total_lines < total && r.offset > r.total_lines {
                file.seek(std::io::SeekFrom::Start(0))
                    .map_err(|e| io_error(&rel, e))?;
                let offset = r.total_lines.saturating_sub(limit) + 1;
                r = read_range(inner, &rel, &mut file, offset, limit, cancel)?;
            }
            ctx.size = Some(r.content.len() as u64);
            Ok(r)
        })
    }

    /// Writes a file below the write root, atomically and durably, creating
    /// parent directories. A new file is created exclusively; an existing
    /// regular file is replaced only when the sandbox allows overwriting and
    /// the call asks for it ([`WriteOptions::overwrite`]). Returns the bytes
    /// written.
    pub fn write(&self, path: &str, content: &[u8], options: WriteOptions) -> Result<u64, Error> {
        let overwrite = options.overwrite;
        self.op("write", path, |inner, ctx| {
            let rel = RelPath::parse(path)?;
            ctx.path(|| rel.as_str().to_owned());
            let wr = inner.admit_write(&rel, Some(content.len() as u64))?;
            let (dir, name, resolved, made) = inner
                .open_checked_creating(wr, &rel)
                .map_err(|e| ctx.refused_at(e))?;
            ctx.path(|| resolved.clone());
            match dir.lstat(name) {
                Err(e) if e.kind() == ErrorKind::NotFound => dir
                    .write_atomic(name, content, RenameMode::NoReplace)
                    .map_err(|e| at(e, &resolved))?,
                Err(e) => return Err(at(e, &resolved)),
                Ok(meta) => {
                    inner.check_existing(&meta, &resolved)?;
                    if !(inner.allow_overwrite && overwrite) {
                        return Err(exists(&resolved, inner.allow_overwrite, overwrite));
                    }
                    check_may_write(&dir, name, &resolved)?;
                    inner.replace(&dir, name, &rel, &resolved, content)?;
                }
            }
            made.keep();
            ctx.size = Some(content.len() as u64);
            Ok(content.len() as u64)
        })
    }

    /// Replaces `old` with `new` in a file below the write root: `old` must
    /// occur exactly once, or at least once with
    /// [`EditOptions::replace_all`]. Written through the
    /// same atomic path as [`write`](Self::write); needs the sandbox's
    /// `allow_overwrite` (an edit replaces an existing file). Returns how many
    /// occurrences were replaced.
    pub fn edit(
        &self,
        path: &str,
        old: &str,
        new: &str,
        options: EditOptions,
    ) -> Result<usize, Error> {
        let all = options.replace_all;
        let mut count = 0;
        let request_ok = || match old.is_empty() {
            true => Err(Error::request("old text must not be empty")),
            false => Ok(()),
        };
        self.edit_file(path, false, request_ok, |inner, _, text, resolved| {
            count = match all {
                true => count_occurrences(text, old.as_bytes()),
                // One place to replace: overlapping places count as two.
                false => count_places(text, old.as_bytes()),
            };
            if count == 0 {
                return Err(Error::new(
                    ErrorCode::EditNoMatch,
                    "the old text does not occur in the file",
                )
                .with_path(resolved));
            }
            if count > 1 && !all {
                return Err(Error::new(
                    ErrorCode::EditAmbiguous,
                    format!(
                        "the old text occurs {count} times; pass all=true or give more context"
                    ),
                )
                .with_path(resolved));
            }
            // The result's size is known before it is built: over the write
            // cap it is refused here, never built (each of a million
            // one-byte matches replaced by a megabyte would be a terabyte).
            let size = (text.len() as u64)
                .saturating_sub((old.len() as u64).saturating_mul(count as u64))
                .saturating_add((new.len() as u64).saturating_mul(count as u64));
            if size > inner.max_write_bytes {
                return Err(Error::new(
                    ErrorCode::TooLarge,
                    format!("the edited file would be {size} bytes, over max_write_bytes"),
                )
                .with_path(resolved));
            }
            Ok(replace_all(text, old.as_bytes(), new.as_bytes()))
        })?;
        Ok(count)
    }

    /// Applies several `(old, new)` replacements to one file below the write
    /// root, in order, each to the text the previous ones left; each `old`
    /// must occur exactly once at its turn. Either every edit applies and the
    /// file is replaced once (atomically, as [`write`](Self::write)), or
    /// nothing changes. With `dry_run` nothing is written, but every check a
    /// real edit makes (write root, deny patterns, hard links, overwrite
    /// rule, caps) still runs first, so a dry run never shows the content of
    /// a file the edit would be refused on. Answers the file's bytes before
    /// and after, where a read of `path` would be served from the write
    /// root (see [`EditPreview`]); never otherwise.
    pub fn edit_many(
        &self,
        path: &str,
        edits: &[(&str, &str)],
        dry_run: bool,
    ) -> Result<EditPreview, Error> {
        let request_ok = || match edits.iter().position(|(old, _)| old.is_empty()) {
            Some(i) => Err(Error::request(format!(
                "edit #{}: old text must not be empty",
                i + 1
            ))),
            None => Ok(()),
        };
        let mut before = Vec::new();
        let mut shown = false;
        let after = self.edit_file(path, dry_run, request_ok, |inner, rel, text, resolved| {
            shown = inner.reads_from_write_root(rel);
            if shown {
                before = text.to_vec();
            }
            let mut cur = text.to_vec();
            for (i, (old, new)) in edits.iter().enumerate() {
                match count_places(&cur, old.as_bytes()) {
                    1 => cur = replace_all(&cur, old.as_bytes(), new.as_bytes()),
                    0 => {
                        return Err(Error::new(
                            ErrorCode::EditNoMatch,
                            format!("edit #{}: the old text does not occur in the file", i + 1),
                        )
                        .with_path(resolved))
                    }
                    n => {
                        return Err(Error::new(
                            ErrorCode::EditAmbiguous,
                            format!(
                                "edit #{}: the old text occurs {n} times; give more context",
                                i + 1
                            ),
                        )
                        .with_path(resolved))
                    }
                }
            }
            Ok(cur)
        })?;
        Ok(match shown {
            true => EditPreview {
                before: Some(before),
                after: Some(after),
            },
            false => EditPreview {
                before: None,
                after: None,
            },
        })
    }

    /// The shared body of the edits: the name and write root, the request's
    /// own check, every write check, then the file's text through `change`,
    /// then one atomic replace unless `dry_run`.
    fn edit_file(
        &self,
        path: &str,
        dry_run: bool,
        request_ok: impl FnOnce() -> Result<(), Error>,
        change: impl FnOnce(&Inner, &RelPath, &[u8], &str) -> Result<Vec<u8>, Error>,
    ) -> Result<Vec<u8>, Error> {
        // A dry run writes nothing: its record must not read as an edit.
        let op = if dry_run { "edit_dry_run" } else { "edit" };
        self.op(op, path, |inner, ctx| {
            let rel = RelPath::parse(path)?;
            ctx.path(|| rel.as_str().to_owned());
            let wr = inner.write_root_for(&rel, "edit")?;
            request_ok()?;
            if !inner.allow_overwrite {
                return Err(Error::denied(
                    "editing replaces an existing file, which this sandbox does not allow (allow_overwrite = false)",
                )
                .with_path(rel.as_str()));
            }
            inner.check_write(rel.as_str(), None)?;
            if rel.must_be_dir() {
                return Err(file_name_with_slash(wr, &rel));
            }
            let (dir, name, resolved) = inner
                .open_checked(wr, &rel, Entry::Other)
                .map_err(|e| ctx.refused_at(e))?;
            ctx.path(|| resolved.clone());
            let meta = dir.lstat(name).map_err(|e| at(e, &resolved))?;
            inner.check_existing(&meta, &resolved)?;
            if meta.len() > inner.max_read_bytes {
                return Err(too_large_read(&rel, meta.len(), inner.max_read_bytes));
            }
            let file = dir
                .open_with(name, OpenOptions::new().read(true).follow(false))
                .map_err(|e| at(e, &resolved))?;
            // The name may hold another file by now (swapped since the
            // lstat): the checks must hold for the file that is read, or a
            // FIFO swapped in would be read (and waited on) as text.
            let opened = file.metadata().map_err(|e| io_error(&rel, e))?;
            let kind = if opened.is_file() {
                FileKind::File
            } else {
                FileKind::Other
            };
            inner.check_kind_and_links(kind, std::os::unix::fs::MetadataExt::nlink(&opened), &resolved)?;
            // A dry run too: it answers what the edit would do.
            check_may_write(&dir, name, &resolved)?;
            // Memory that cannot be had is an error, not an abort of the
            // whole process (read_to_end below grows the same way).
            let mut text = Vec::new();
            text.try_reserve_exact(meta.len() as usize).map_err(|_| {
                io_error(&rel, rustix::io::Errno::NOMEM.into())
            })?;
            // One byte past the cap tells a file that grew; saturating, so
            // a cap of u64::MAX (no cap) does not wrap to reading nothing.
            file.take(inner.max_read_bytes.saturating_add(1))
                .read_to_end(&mut text)
                .map_err(|e| io_error(&rel, e))?;
            if text.len() as u64 > inner.max_read_bytes {
                // Grew (or was swapped for a larger file) since the size
                // check: what was read is only its beginning, and writing
                // an edit of it back would cut the file.
                return Err(Error::new(
                    ErrorCode::TooLarge,
                    format!(
                        "the file grew over the read cap of {} bytes (max_read_bytes) while being read; nothing was changed",
                        inner.max_read_bytes
                    ),
                )
                .with_path(rel.as_str()));
            }
            let out = change(inner, &rel, &text, &resolved)?;
            if out.len() as u64 > inner.max_write_bytes {
                return Err(Error::new(
                    ErrorCode::TooLarge,
                    format!("the edited file would be {} bytes, over max_write_bytes", out.len()),
                )
                .with_path(resolved));
            }
            if !dry_run {
                inner.replace(&dir, name, &rel, &resolved, &out)?;
                ctx.size = Some(out.len() as u64);
            }
            Ok(out)
        })
    }

    /// Lists a directory from the first read root that holds it, sorted by
    /// name; symlinks are listed, not followed.
    pub fn list(&self, path: &str) -> Result<Vec<ListEntry>, Error> {
        self.list_max(path, usize::MAX).map(|(entries, _)| entries)
    }

    /// Lists at most `max` entries of a directory, as [`Sandbox::list`]
    /// does, and says whether it holds more. A huge directory costs memory
    /// and `lstat` calls for `max` entries only, never for all it holds;
    /// which entries are listed when there are more is then the
    /// filesystem's order, not the first `max` by name.
    pub fn list_max(&self, path: &str, max: usize) -> Result<(Vec<ListEntry>, bool), Error> {
        self.op("list", path, |inner, ctx| {
            let rel = RelPath::parse(path)?;
            ctx.path(|| rel.as_str().to_owned());
            let root = inner.first_holding(&rel)?;
            let dir = root.open_dir(&rel).map_err(|e| at(e, rel.as_str()))?;
            let (entries, more) = dir
                .read_dir_max(".", max)
                .map_err(|e| at(e, rel.as_str()))?;
            let mut out = Vec::new();
            for e in entries {
                let name = shown_name(e.name());
                let size = dir.lstat(e.name()).map(|m| m.len()).unwrap_or(0);
                out.push(ListEntry {
                    name,
                    kind: e.kind(),
                    size,
                });
            }
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok((out, more))
        })
    }

    /// Kind, size and mode of what `path` names in the first read root that
    /// holds it (following a final symlink beneath the root).
    pub fn stat(&self, path: &str) -> Result<StatInfo, Error> {
        self.op("stat", path, |inner, ctx| {
            let rel = RelPath::parse(path)?;
            let meta = inner.stat_first(&rel).map(|(_, meta)| meta);
            ctx.keep_path(rel);
            let meta = meta?;
            Ok(StatInfo {
                kind: meta.kind(),
                size: meta.len(),
                mode: meta.mode(),
                mtime: meta.mtime().0,
            })
        })
    }

    /// Creates a directory (and its parents) below the write root. An
    /// existing directory is fine; an existing non-directory is `E_EXISTS`.
    pub fn mkdir(&self, path: &str) -> Result<(), Error> {
        self.op("mkdir", path, |inner, ctx| {
            let rel = RelPath::parse(path)?;
            ctx.path(|| rel.as_str().to_owned());
            let wr = inner.write_root_for(&rel, "mkdir")?;
            inner.check_write(rel.as_str(), None)?;
            let (dir, name, resolved, made) = inner
                .open_checked_creating(wr, &rel)
                .map_err(|e| ctx.refused_at(e))?;
            ctx.path(|| resolved.clone());
            match dir.mkdir(name, 0o777) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Exists => match dir.stat(name) {
                    Ok(m) if m.is_dir() => {}
                    _ => return Err(at(e, &resolved)),
                },
                Err(e) => return Err(at(e, &resolved)),
            }
            made.keep();
            Ok(())
        })
    }

    /// Deletes one file, one symlink entry (never its target) or one empty
    /// directory below the write root. Deny patterns protect the target and
    /// its ancestors.
    pub fn delete(&self, path: &str) -> Result<(), Error> {
        self.op("delete", path, |inner, ctx| {
            let rel = RelPath::parse(path)?;
            ctx.path(|| rel.as_str().to_owned());
            let wr = inner.write_root_for(&rel, "delete")?;
            // Ancestor protection concerns directories, and links: a file
            // has nothing beneath it, but the paths beneath a link go with
            // it (deleting the host's `.claude -> conf/claude` removes
            // `.claude/settings.json`).
            let is_dir = inner.entry_is_dir(wr, &rel)?;
            let kind = inner.entry_kind(wr, &rel, is_dir);
            inner.check_target(rel.as_str(), None, kind)?;
            let (dir, name, resolved) = inner
                .open_checked(wr, &rel, kind)
                .map_err(|e| ctx.refused_at(e))?;
            ctx.path(|| resolved.clone());
            // Remove the kind that was checked: a file swapped for a
            // directory meanwhile fails instead of being removed unchecked.
            if is_dir {
                dir.remove_dir(name)
            } else {
                dir.remove_file(name)
            }
            .map_err(|e| at(e, &resolved))
        })
    }

    /// Moves `from` to `to` within the write root; the destination must not
    /// exist. Deny patterns protect both and their ancestors. A directory
    /// is moved only when nothing beneath it is protected: every entry it
    /// holds (links as entries, never followed; at most
    /// [`MAX_RENAME_WALK_ENTRIES`]) is checked where it is and where it would
    /// land, and a larger directory is refused.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), Error> {
        let raw = format!("{from} -> {to}");
        self.op("rename", &raw, |inner, ctx| {
            let (f, t) = (RelPath::parse(from)?, RelPath::parse(to)?);
            ctx.path(|| format!("{f} -> {t}"));
            let wr = inner.write_root_for(&f, "rename")?;
            inner.write_root_for(&t, "rename")?;
            // What moves is what the source is: a directory carries whatever
            // lies beneath it, so both names get the ancestor rule then.
            let is_dir = inner.entry_is_dir(wr, &f)?;
            if t.must_be_dir() && !is_dir {
                // `to/` demands a directory, and what would arrive is not one.
                return Err(Error::new(
                    ErrorCode::NotDir,
                    "the destination ends in '/' but the source is not a directory",
                )
                .with_path(f.as_str()));
            }
            // A link holds no entries, but paths beneath its name lead
            // wherever it does (and the agent may change what is there):
            // arriving at a name above protected paths, it would put them
            // in a directory of the agent's choosing, and leaving one, it
            // takes them away. Both its names get the link rule.
            let kind = inner.entry_kind(wr, &f, is_dir);
            let is_link = kind == Entry::Link;
            inner.check_target(f.as_str(), None, kind)?;
            inner.check_target(t.as_str(), None, kind)?;
            // A refusal where one name resolved is audited with that name.
            let (fdir, fname, fres) = inner
                .open_checked(wr, &f, kind)
                .map_err(|e| ctx.refused_as(e, |p| format!("{p} -> {t}")))?;
            let (tdir, tname, tres) = inner
                .open_checked(wr, &t, kind)
                .map_err(|e| ctx.refused_as(e, |p| format!("{fres} -> {p}")))?;
            ctx.path(|| format!("{fres} -> {tres}"));
            if inner.would_show(&fdir, &tdir) {
                return Err(Error::denied(
                    "the destination lies in a read root and the source does not: the write \
                     root grants no reads, and a rename may not carry what the file tools \
                     cannot read to where they read it",
                )
                .with_path(format!("{fres} -> {tres}")));
            }
            // The rules above were chosen by the kind the name showed; the
            // entry may have been swapped since. Pin what is there now (its
            // identity), require the kind that was checked, walk that very
            // directory, and after the move require that it is what arrived.
            let checked = if inner.guard_active {
                let src = fdir.lstat(fname).map_err(|e| at(e, &fres))?;
                if src.is_dir() != is_dir || src.is_symlink() != is_link {
                    return Err(changed_under_rename(&fres));
                }
                if is_dir {
                    let top = fdir.open_child_dir(fname).map_err(|e| at(e, &fres))?;
                    let opened = top.stat(".").map_err(|e| at(e, &fres))?;
                    if !same_object(&opened, &src) {
                        return Err(changed_under_rename(&fres));
                    }
                    inner.check_moved_entries(
                        top,
                        (f.as_str(), &fres),
                        (t.as_str(), &tres),
                    )?;
                }
                Some(src)
            } else {
                None
            };
            fdir.rename_to(fname, &tdir, tname, RenameMode::NoReplace)
                .map_err(|e| {
                    let invalid = e.errno().map(std::io::Error::from_raw_os_error);
                    if is_dir
                        && invalid.is_some_and(|e| e.kind() == std::io::ErrorKind::InvalidInput)
                        && moves_into_itself(wr, &fdir, fname, &tdir)
                    {
                        // Still the OS error it is (E_IO, errno kept), said
                        // so that a model can act on it.
                        return Error::new(ErrorCode::Io, "cannot move a directory inside itself")
                            .with_errno(e.errno())
                            .with_path(format!("{fres} -> {tres}"));
                    }
                    let p = if e.path() == tname.to_string_lossy() {
                        &tres
                    } else {
                        &fres
                    };
                    at(e, p)
                })?;
            if let Some(src) = checked {
                let arrived = tdir.lstat(tname);
                if !arrived.as_ref().is_ok_and(|m| same_object(m, &src)) {
                    // Another entry took the source name between the pin and
                    // the move: what moved was never checked. Put it back.
                    return Err(
                        match tdir.rename_to(tname, &fdir, fname, RenameMode::NoReplace) {
                            Ok(()) => changed_under_rename(&fres),
                            Err(e) => Error::new(
                                ErrorCode::Io,
                                format!(
                                    "`{fres}` was replaced while being renamed, and what was moved to `{tres}` unchecked could not be moved back: {}",
                                    e.reason()
                                ),
                            )
                            .with_errno(e.errno())
                            .with_path(tres),
                        },
                    );
                }
            }
            Ok(())
        })
    }

    /// Paths matching a glob (`*` within a component, `**` across) below
    /// `path` (default: the root) in every read root, first root winning,
    /// sorted, capped at [`search::MAX_GLOB_RESULTS`]. Symlinks are matched
    /// as entries and never followed. The answer does not say whether it
    /// was cut: [`glob_found`](Self::glob_found) does.
    pub fn glob(&self, pattern: &str, path: Option<&str>) -> Result<Vec<String>, Error> {
        self.glob_found(pattern, path).map(|f| f.results)
    }

    /// Like [`glob`](Self::glob), saying whether the answer was cut: at
    /// [`search::MAX_GLOB_RESULTS`] paths when more match, or where the
    /// walk stopped at [`search::MAX_WALK_ENTRIES`] entries. A cut answer
    /// holds the first paths the walk met (roots in order; in each
    /// directory its entries in name order, then its subdirectories one
    /// by one), sorted by name: not the first by name, but the same ones
    /// for the same tree. A subdirectory below `path` that cannot be
    /// listed is passed over and counted in [`search::Found::unreadable`].
    pub fn glob_found(
        &self,
        pattern: &str,
        path: Option<&str>,
    ) -> Result<search::Found<Vec<String>>, Error> {
        self.glob_found_cancellable(pattern, path, &AtomicBool::new(false))
    }

    /// [`Sandbox::glob_found`], stopped with `E_ABORTED` once `cancel` is
    /// set (from another thread); the flag is looked at before each entry
    /// the walk visits.
    pub fn glob_found_cancellable(
        &self,
        pattern: &str,
        path: Option<&str>,
        cancel: &AtomicBool,
    ) -> Result<search::Found<Vec<String>>, Error> {
        self.op("glob", path.unwrap_or("."), |inner, ctx| {
            let base = RelPath::parse(path.unwrap_or("."))?;
            ctx.path(|| base.as_str().to_owned());
            let roots = inner.read_roots()?;
            search::glob(roots, &base, pattern, cancel)
        })
    }

    /// Lines matching a regular expression in the files below `path`
    /// (default: the root) in every read root, first root winning; binary
    /// files (a NUL in the first 8 KiB, counted in
    /// [`search::Found::binary`]) and files over `max_read_bytes` are
    /// skipped; symlinks are never followed. `path` may name a directory
    /// or a regular file; a FIFO, socket or device is `E_NOT_FILE`. At most `max_results` (default 100, at most 1000) matches.
    /// [`grep_with`](Self::grep_with) offers the other search options.
    pub fn grep(
        &self,
        pattern: &str,
        path: Option<&str>,
        max_results: Option<usize>,
    ) -> Result<Vec<search::GrepMatch>, Error> {
        let opts = search::GrepOptions {
            max_results,
            ..Default::default()
        };
        match self.grep_with(pattern, path, &opts)? {
            search::GrepOutput::Lines(m) => Ok(m),
            _ => unreachable!("the default grep mode answers lines"),
        }
    }

    /// Like [`grep`](Self::grep), with an include glob, case folding,
    /// context lines, an answer mode (lines, files, counts), a result cap
    /// and `.gitignore`/`.ignore` filtering as `opts` says. The ignore files
    /// are read through the same confined opens as every other file, and
    /// the walk stays on descriptors beneath each root. The answer does not
    /// say whether it was cut: [`grep_found`](Self::grep_found) does.
    pub fn grep_with(
        &self,
        pattern: &str,
        path: Option<&str>,
        opts: &search::GrepOptions,
    ) -> Result<search::GrepOutput, Error> {
        self.grep_found(pattern, path, opts).map(|f| f.results)
    }

    /// Like [`grep_with`](Self::grep_with), saying whether the answer was
    /// cut: at `max_results` when a match more was met past them (so an
    /// answer of exactly `max_results` is not cut), where the walk stopped
    /// at [`search::MAX_WALK_ENTRIES`] entries, or when a file over
    /// `max_read_bytes` was passed over unsearched.
    pub fn grep_found(
        &self,
        pattern: &str,
        path: Option<&str>,
        opts: &search::GrepOptions,
    ) -> Result<search::Found<search::GrepOutput>, Error> {
        self.op("grep", path.unwrap_or("."), |inner, ctx| {
            let base = RelPath::parse(path.unwrap_or("."))?;
            ctx.path(|| base.as_str().to_owned());
            let roots = inner.read_roots()?;
            search::grep(roots, &base, pattern, opts, inner.max_read_bytes)
        })
    }
}

impl Inner {
    fn take_budget(&self) -> Result<(), Error> {
        match &self.fs_ops {
            None => Ok(()),
            Some(left) => left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .map(drop)
                .map_err(|_| Error::denied("the fs_ops budget is spent")),
        }
    }

    fn read_roots(&self) -> Result<&[Root], Error> {
        if self.read_roots.is_empty() {
            return Err(Error::denied("no read roots are granted"));
        }
        Ok(&self.read_roots)
    }

    /// The write root, for an operation that cannot target the root itself.
    fn write_root_for(&self, rel: &RelPath, op: &str) -> Result<&Root, Error> {
        let wr = self
            .write_root
            .as_ref()
            .ok_or_else(|| Error::denied("no write root is granted"))?;
        if rel.is_root() {
            return Err(Error::new(
                ErrorCode::PathInvalid,
                format!("cannot {op} the root itself"),
            )
            .with_path("."));
        }
        // The kernel's limit counts the terminating NUL: refuse a name it
        // cannot take before creating any parent for it.
        if rel.as_str().len() >= crate::relpath::MAX_NAME_BYTES {
            return Err(Error::new(
                ErrorCode::PathInvalid,
                "path too long for the operating system (4096 bytes)",
            )
            .with_path(rel.as_str()));
        }
        Ok(wr)
    }

    /// The checks a write makes before touching anything: a write root is
    /// granted and `rel` is not the root itself, `size` (when known) is
    /// within the cap, and the deny rules admit the name as spelled.
    fn admit_write(&self, rel: &RelPath, size: Option<u64>) -> Result<&Root, Error> {
        let wr = self.write_root_for(rel, "write")?;
        if let Some(size) = size.filter(|n| *n > self.max_write_bytes) {
            return Err(Error::new(
                ErrorCode::TooLarge,
                format!(
                    "{size} bytes is over the write cap of {} bytes (max_write_bytes)",
                    self.max_write_bytes
                ),
            )
            .with_path(rel.as_str()));
        }
        self.check_write(rel.as_str(), None)?;
        if rel.must_be_dir() {
            return Err(file_name_with_slash(wr, rel));
        }
        Ok(wr)
    }

    /// Runs `op` in each read root in order until one holds `rel`: the
    /// one walk every read-side operation (and [`Sandbox::explain_read`])
    /// makes. Answers the root's index in `fs.read_roots` and `op`'s
    /// result; `E_NOT_FOUND` when no root holds `rel`.
    fn in_first_root<T>(
        &self,
        rel: &RelPath,
        mut op: impl FnMut(&Root) -> sandgate_rootfs::Result<T>,
    ) -> Result<(usize, T), Error> {
        for (index, root) in self.read_roots()?.iter().enumerate() {
            match op(root) {
                Ok(t) => return Ok((index, t)),
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) if e.kind() == ErrorKind::TooLarge => {
                    return Err(Error::new(
                        ErrorCode::TooLarge,
                        format!(
                            "{}; over max_read_bytes ({}): read a line range instead",
                            e.reason(),
                            self.max_read_bytes
                        ),
                    )
                    .with_path(rel.as_str()))
                }
                Err(e) => return Err(at(e, rel.as_str())),
            }
        }
        Err(not_found(rel))
    }

    /// Opens `rel` for reading in the first read root that holds it.
    fn open_read(&self, rel: &RelPath) -> Result<std::fs::File, Error> {
        self.in_first_root(rel, |root| root.open_file(rel))
            .map(|(_, f)| f)
    }

    /// Reads `rel` whole from the first read root that holds it, refusing
    /// more than `max_read_bytes` before reading a byte.
    fn read_first(&self, rel: &RelPath) -> Result<Vec<u8>, Error> {
        self.in_first_root(rel, |root| root.read_max(rel, self.max_read_bytes))
            .map(|(_, buf)| buf)
    }

    fn stat_first(&self, rel: &RelPath) -> Result<(&Root, sandgate_rootfs::Metadata), Error> {
        let (index, meta) = self.stat_first_index(rel)?;
        Ok((&self.read_roots[index], meta))
    }

    /// The first read root (by its place in `fs.read_roots`) that holds
    /// `rel`, and what is there.
    fn stat_first_index(&self, rel: &RelPath) -> Result<(usize, sandgate_rootfs::Metadata), Error> {
        self.in_first_root(rel, |root| root.stat(rel))
    }

    /// Whether a rename from `fdir` into `tdir` would show a read root
    /// what the file tools may not read: the write root is not a read
    /// root, the destination lies beneath one (a read root inside the write
    /// root) and the source beneath none. A place that cannot be told (no
    /// procfs) counts as beneath a read root for the destination and as
    /// beneath none for the source, so a doubt refuses.
    fn would_show(&self, fdir: &Root, tdir: &Root) -> bool {
        if self.read_roots.is_empty()
            || self
                .dirs
                .iter()
                .any(|d| d.is_write && d.read_index.is_some())
        {
            return false;
        }
        // Some(true) beneath a read root, Some(false) beneath none, None
        // cannot be told.
        let beneath = |dir: &Root| {
            let mut known = true;
            for r in &self.read_roots {
                match dir.path_within(r) {
                    Ok(_) => return Some(true),
                    Err(e) if e.kind() == ErrorKind::Escape => {}
                    Err(_) => known = false,
                }
            }
            known.then_some(false)
        };
        beneath(tdir) != Some(false) && beneath(fdir) != Some(true)
    }

    /// Whether a read of `rel` would be served from the write root: the
    /// write root is also a read root, and no earlier read root holds the
    /// name (anything there but a plain absence counts, so a doubt answers
    /// no). What an edit may show of the file it changed hangs on this.
    fn reads_from_write_root(&self, rel: &RelPath) -> bool {
        let Some(k) = self
            .dirs
            .iter()
            .find(|d| d.is_write)
            .and_then(|d| d.read_index)
        else {
            return false;
        };
        self.read_roots[..k]
            .iter()
            .all(|r| matches!(r.lstat(rel.as_str()), Err(e) if e.kind() == ErrorKind::NotFound))
    }

    fn first_holding(&self, rel: &RelPath) -> Result<&Root, Error> {
        self.stat_first(rel).map(|(root, _)| root)
    }

    fn verdict(&self, v: Verdict<'_>) -> Result<(), Error> {
        match v.refusal() {
            None => Ok(()),
            Some(r) => Err(Error::new(ErrorCode::FsProtected, r.to_string())
                .with_path(r.path())
                .with_pattern(r.rule().as_str())),
        }
    }

    fn check_write(&self, spelled: &str, resolved: Option<&str>) -> Result<(), Error> {
        self.verdict(self.guard.check_write(spelled, resolved))
    }

    fn check_move(&self, spelled: &str, resolved: Option<&str>) -> Result<(), Error> {
        self.verdict(self.guard.check_rename_or_delete(spelled, resolved))
    }

    /// The rename/delete check for an entry: with the ancestor rule when it
    /// is a directory, the link rule when it is a symbolic link, the target
    /// alone otherwise.
    fn check_target(
        &self,
        spelled: &str,
        resolved: Option<&str>,
        kind: Entry,
    ) -> Result<(), Error> {
        match kind {
            Entry::Dir => self.check_move(spelled, resolved),
            Entry::Link => self.verdict(self.guard.check_link(spelled, resolved)),
            Entry::Other => self.check_write(spelled, resolved),
        }
    }

    /// Which rename/delete rule `rel`'s final entry (not followed) gets,
    /// `is_dir` being [`entry_is_dir`](Self::entry_is_dir)'s answer.
    fn entry_kind(&self, wr: &Root, rel: &RelPath, is_dir: bool) -> Entry {
        if is_dir {
            Entry::Dir
        } else if self.guard_active && wr.lstat(rel.as_str()).is_ok_and(|m| m.is_symlink()) {
            Entry::Link
        } else {
            Entry::Other
        }
    }

    /// Whether `rel`'s final entry (not followed) is a directory. Spelled
    /// with a trailing slash, it must be one: `file/` and `link/` (a link,
    /// even to a directory, is no directory entry to remove or move) are
    /// `E_NOT_DIR`.
    fn entry_is_dir(&self, wr: &Root, rel: &RelPath) -> Result<bool, Error> {
        let is_dir = wr
            .lstat(rel)
            .map(|m| m.is_dir())
            .map_err(|e| at(e, rel.as_str()))?;
        if rel.must_be_dir() {
            let entry = wr.lstat(rel.as_str()).map_err(|e| at(e, rel.as_str()))?;
            if !entry.is_dir() {
                return Err(Error::new(
                    ErrorCode::NotDir,
                    "not a directory (a name ending in '/' must name a directory, not a link to one)",
                )
                .with_path(rel.as_str()));
            }
        }
        Ok(is_dir)
    }

    /// Refuses to move the directory `name` (in `parent`) when anything it
    /// holds is protected: walks beneath it through descriptors, one per
    /// level, never following a link (a link is checked as an entry by its
    /// own name), and checks every entry's name under the source and the
    /// destination (each as spelled and as resolved). More than
    /// [`MAX_RENAME_WALK_ENTRIES`] entries, or any error while walking, is
    /// a refusal: what was not seen was not checked.
    fn check_moved_entries(
        &self,
        top: Root,
        from: (&str, &str),
        to: (&str, &str),
    ) -> Result<(), Error> {
        /// One directory of the walk, open while it is among the last
        /// [`RENAME_WALK_HELD`] (the top always is), and its
        /// subdirectories still to visit.
        struct Level {
            dir: Option<Root>,
            /// Its name in the level above (empty for the top).
            name: std::ffi::OsString,
            /// What it was when its descriptor was let go.
            id: Option<sandgate_rootfs::Metadata>,
            subdirs: Vec<(std::ffi::OsString, String)>,
        }
        let mut left = MAX_RENAME_WALK_ENTRIES;
        let visit = |dir: Root, prefix: &str, left: &mut usize| -> Result<Level, Error> {
            let shown = |rel: &str| format!("{}/{rel}", from.0);
            // One entry over what is left is enough to refuse: a huge
            // directory is never read whole.
            let (entries, _) = dir
                .read_dir_max(".", left.saturating_add(1))
                .map_err(|e| at(e, &shown(prefix)))?;
            let mut subdirs = Vec::new();
            for e in entries {
                if *left == 0 {
                    return Err(Error::new(
                        ErrorCode::FsProtected,
                        format!(
                            "`{}` holds more than {MAX_RENAME_WALK_ENTRIES} entries, too many to check against the deny-write rules, so it is not moved",
                            from.0
                        ),
                    )
                    .with_path(from.0));
                }
                *left -= 1;
                // A name that is not UTF-8 is judged in its lossy spelling:
                // patterns are text, and a replacement character can only
                // widen what a wildcard matches.
                let entry = e.name().to_string_lossy();
                let rel = if prefix.is_empty() {
                    entry.into_owned()
                } else {
                    format!("{prefix}/{entry}")
                };
                for (spelled, resolved) in [from, to] {
                    let (s, r) = (format!("{spelled}/{rel}"), format!("{resolved}/{rel}"));
                    if let Some(refusal) = self.guard.check_write(&s, Some(&r)).refusal() {
                        return Err(Error::new(
                            ErrorCode::FsProtected,
                            format!(
                                "the directory `{}` cannot be moved: beneath it, {refusal}",
                                from.0
                            ),
                        )
                        .with_path(refusal.path())
                        .with_pattern(refusal.rule().as_str()));
                    }
                }
                if e.kind() == FileKind::Dir {
                    subdirs.push((e.name().to_owned(), rel));
                }
            }
            Ok(Level {
                dir: Some(dir),
                name: std::ffi::OsString::new(),
                id: None,
                subdirs,
            })
        };
        let mut stack = vec![visit(top, "", &mut left)?];
        // Levels 1..held_from were let go; the top and those below are open.
        let mut held_from = 1;
        while let Some(level) = stack.last_mut() {
            let Some((child, rel)) = level.subdirs.pop() else {
                stack.pop();
                // Levels let go above the ones left stay let go.
                held_from = held_from.min(stack.len().max(1));
                continue;
            };
            if level.dir.is_none() {
                // Back at a level let go: open the chain again from the
                // top, never following a link, each the directory it was.
                let last = stack.len() - 1;
                held_from = last.saturating_sub(RENAME_WALK_HELD - 1).max(1);
                let mut cur = stack[0].dir.as_ref().map(Root::try_clone);
                for (i, l) in stack.iter_mut().enumerate().take(last + 1).skip(1) {
                    let opened = match cur {
                        Some(Ok(parent)) => parent.open_child_dir(&l.name),
                        Some(Err(e)) => Err(e),
                        None => break,
                    };
                    let dir = opened.map_err(|e| at(e, from.0))?;
                    let now = dir.stat(".").map_err(|e| at(e, from.0))?;
                    if l.id.as_ref().is_some_and(|id| !same_object(id, &now)) {
                        return Err(changed_under_rename(from.1));
                    }
                    cur = Some(dir.try_clone());
                    if i >= held_from {
                        l.dir = Some(dir);
                    }
                }
            }
            let Some(parent) = stack.last().and_then(|l| l.dir.as_ref()) else {
                return Err(Error::new(
                    ErrorCode::Io,
                    "a directory being moved could not be opened again to check it",
                )
                .with_path(from.0));
            };
            let dir = parent
                .open_child_dir(&child)
                .map_err(|e| at(e, &format!("{}/{rel}", from.0)))?;
            let mut next = visit(dir, &rel, &mut left)?;
            next.name = child;
            stack.push(next);
            if stack.len() - held_from > RENAME_WALK_HELD {
                let l = &mut stack[held_from];
                if let Some(dir) = l.dir.take() {
                    l.id = Some(dir.stat(".").map_err(|e| at(e, from.0))?);
                }
                held_from += 1;
            }
        }
        Ok(())
    }

    /// Opens the directory that holds `rel`'s final entry, learns where it
    /// really is (through in-root symlinks), and checks the resolved name
    /// against the deny rules. Everything after acts through this very
    /// descriptor, so the check and the act concern the same directory.
    fn open_checked<'p>(
        &self,
        wr: &Root,
        rel: &'p RelPath,
        kind: Entry,
    ) -> Result<(Root, &'p Path, String), Error> {
        // With its trailing slash, if any: `file/` is refused (E_NOT_DIR)
        // here for mkdir, delete and rename alike.
        let (dir, name) = wr
            .open_parent(Path::new(rel.as_resolved_str()))
            .map_err(|e| at(e, rel.as_str()))?;
        let resolved = if self.guard_active {
            let parent = dir.path_within(wr).map_err(|e| at(e, rel.as_str()))?;
            let name = name.to_string_lossy();
            let resolved = match parent.to_string_lossy() {
                p if p == "." => name.into_owned(),
                p => format!("{p}/{name}"),
            };
            self.check_target(rel.as_str(), Some(&resolved), kind)?;
            resolved
        } else {
            rel.as_str().to_owned()
        };
        Ok((dir, name, resolved))
    }

    /// [`open_checked`](Self::open_checked) for a write or mkdir target,
    /// creating its missing parents first when the parent is missing (the
    /// common case, an existing parent, resolves it only once). The
    /// directories it made are removed again unless the caller keeps them
    /// ([`MadeDirs::keep`]) once the call has succeeded.
    fn open_checked_creating<'p>(
        &self,
        wr: &Root,
        rel: &'p RelPath,
    ) -> Result<(Root, &'p Path, String, MadeDirs), Error> {
        match self.open_checked(wr, rel, Entry::Other) {
            Err(e) if e.code() == ErrorCode::NotFound => {
                let made = self.ensure_parents(wr, rel)?;
                // On an error here `made` is dropped: the parents go again.
                let (dir, name, resolved) = self.open_checked(wr, rel, Entry::Other)?;
                Ok((dir, name, resolved, made))
            }
            r => r.map(|(dir, name, resolved)| (dir, name, resolved, MadeDirs(Vec::new()))),
        }
    }

    /// Refuses to overwrite anything but a singly linked regular file.
    fn check_existing(
        &self,
        meta: &sandgate_rootfs::Metadata,
        resolved: &str,
    ) -> Result<(), Error> {
        self.check_kind_and_links(meta.kind(), meta.nlink(), resolved)
    }

    /// [`check_existing`](Self::check_existing) on a kind and a link count.
    fn check_kind_and_links(
        &self,
        kind: FileKind,
        nlink: u64,
        resolved: &str,
    ) -> Result<(), Error> {
        match kind {
            FileKind::Symlink => {
                return Err(Error::new(
                    ErrorCode::Symlink,
                    "the target is a symbolic link; write to the file it names instead",
                )
                .with_path(resolved))
            }
            FileKind::File => {}
            _ => {
                return Err(
                    Error::new(ErrorCode::NotFile, "the target is not a regular file")
                        .with_path(resolved),
                )
            }
        }
        if self.guard_active && nlink > 1 {
            return Err(Error::new(
                ErrorCode::Hardlink,
                format!(
                    "the file has {nlink} hard links; its other names cannot be checked against the deny rules"
                ),
            )
            .with_path(resolved));
        }
        Ok(())
    }

    /// Replaces the existing file `name` in `dir` (`rel` as spelled,
    /// `resolved` where it is) with `data`. A replace links the new content
    /// under a temporary name first and removes an entry it finds there as a
    /// leftover; where a deny rule protects that name, such an entry is a
    /// protected file, so the replace uses a name of its own instead and
    /// removes nothing.
    fn replace(
        &self,
        dir: &Root,
        name: &Path,
        rel: &RelPath,
        resolved: &str,
        data: &[u8],
    ) -> Result<(), Error> {
        let temp = sandgate_rootfs::temp_name(name.as_os_str());
        let temp = temp.to_string_lossy();
        let beside = |path: &str| match path.rsplit_once('/') {
            Some((parent, _)) => format!("{parent}/{temp}"),
            None => temp.clone().into_owned(),
        };
        let protected = self.guard_active
            && self
                .guard
                .check_write(&beside(rel.as_str()), Some(&beside(resolved)))
                .is_refused();
        if protected {
            dir.replace_unique(name, data)
        } else {
            dir.replace(name, data)
        }
        .map_err(|e| at(e, resolved))
    }

    /// Creates the missing parent directories of `rel` one at a time, each
    /// checked where it really lands, so that a write through an in-root
    /// symlink never creates a directory inside a protected area. Answers
    /// the directories it made; on an error, those are removed again.
    fn ensure_parents(&self, wr: &Root, rel: &RelPath) -> Result<MadeDirs, Error> {
        let mut made = MadeDirs(Vec::new());
        let Some(parent) = rel.parent() else {
            return Ok(made);
        };
        if parent.is_root() {
            return Ok(made);
        }
        match wr.stat(&parent) {
            Ok(m) if m.is_dir() => return Ok(made),
            Ok(_) => {
                return Err(Error::new(ErrorCode::NotDir, "a parent is not a directory")
                    .with_path(parent.as_str()))
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(at(e, parent.as_str())),
        }
        let mut prefix = RelPath::root();
        for c in parent.components() {
            prefix = prefix.join(c)?;
            match wr.stat(&prefix) {
                Ok(m) if m.is_dir() => continue,
                Ok(_) => {
                    return Err(Error::new(ErrorCode::NotDir, "a parent is not a directory")
                        .with_path(prefix.as_str()))
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(at(e, prefix.as_str())),
            }
            self.check_write(prefix.as_str(), None)?;
            let (dir, name, resolved) = self.open_checked(wr, &prefix, Entry::Other)?;
            match dir.mkdir(name, 0o777) {
                Ok(()) => made.0.push((dir, name.to_path_buf())),
                // Created meanwhile: fine if it is a directory now.
                Err(e)
                    if e.kind() == ErrorKind::Exists
                        && dir.stat(name).is_ok_and(|m| m.is_dir()) => {}
                Err(e) => return Err(at(e, &resolved)),
            }
        }
        Ok(made)
    }
}

/// The parent directories one write or mkdir made, each with the
/// descriptor of the directory it was made in. Unless [`keep`](Self::keep)
/// is called (the call succeeded), dropping it removes them again,
/// deepest first, through those descriptors and only while empty: a
/// refused call (a name the host cannot hold, a deny rule met deeper down,
/// a failed write) leaves no half-made path behind.
#[must_use]
struct MadeDirs(Vec<(Root, PathBuf)>);

impl MadeDirs {
    /// The call succeeded: the directories stay.
    fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for MadeDirs {
    fn drop(&mut self) {
        while let Some((dir, name)) = self.0.pop() {
            // Not empty any more (someone else's entry arrived): left.
            let _ = dir.remove_dir(&name);
        }
    }
}

/// Whether the directory `tdir` is the entry `fname` of `fdir` or lies
/// beneath it, both found by their descriptors within `wr`: the move
/// `rename(2)` refuses with `EINVAL` (which also means a flag the
/// filesystem lacks, so the error alone does not say which).
fn moves_into_itself(wr: &Root, fdir: &Root, fname: &Path, tdir: &Root) -> bool {
    let parts = |p: &Path| -> Vec<std::ffi::OsString> {
        p.components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .map(|c| c.as_os_str().to_owned())
            .collect()
    };
    match (fdir.path_within(wr), tdir.path_within(wr)) {
        (Ok(from), Ok(to)) => parts(&to).starts_with(&parts(&from.join(fname))),
        _ => false,
    }
}

/// How a listing shows an entry's name: as it is when it is UTF-8, else
/// with each stray byte as `\xNN`. No agent-facing name holds a backslash
/// (§2), so the escaped spelling cannot name another entry, while the lossy
/// one (`U+FFFD` for each stray byte) can be a real name of its own.
fn shown_name(name: &std::ffi::OsStr) -> String {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    if let Ok(s) = std::str::from_utf8(bytes) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(bytes.len() * 2);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// Whether two metadata describe the same object (device and inode).
fn same_object(a: &sandgate_rootfs::Metadata, b: &sandgate_rootfs::Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// What a rename or deletion acts on, for the deny-write rule it gets
/// ([`Inner::check_target`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Entry {
    /// A directory: the ancestor rule.
    Dir,
    /// A symbolic link: the link rule.
    Link,
    /// Anything else, or a name to write: the target alone.
    Other,
}

/// A rename's source was swapped for another entry while the rename checked
/// it; nothing was moved.
#[cold]
fn changed_under_rename(resolved: &str) -> Error {
    Error::new(
        ErrorCode::Io,
        "the source was replaced by another entry while the rename checked it; nothing was moved (try again)",
    )
    .with_path(resolved)
}

/// Re-anchors a rootfs error on the root-relative name the caller knows.
#[cold]
fn at(e: sandgate_rootfs::Error, path: &str) -> Error {
    Error::from(e).with_path(path)
}

/// Why a file cannot be written or edited under a name that ends in `/`:
/// `E_NOT_DIR` when the name holds something that is not a directory (a
/// file, or a link to one), the resolver's refusal where it has one, else
/// `E_NOT_FILE`.
#[cold]
fn file_name_with_slash(wr: &Root, rel: &RelPath) -> Error {
    match wr.stat(rel) {
        Err(e) if e.kind() != ErrorKind::NotFound => at(e, rel.as_str()),
        _ => {
            Error::new(ErrorCode::NotFile, "a file name cannot end in '/'").with_path(rel.as_str())
        }
    }
}

/// Refuses to replace the regular file `name` in `dir` (one component,
/// `resolved` where it is) when the kernel would not let this process open
/// it for writing: a file made read-only (`chmod a-w`), by its mode, an ACL
/// or an immutable flag. A replace renames a new file over the old one,
/// which needs only the directory's write permission, so without this the
/// file's own permission would be ignored. The kernel answers for this
/// process's own credentials (`faccessat2` with `AT_EACCESS`, the link not
/// followed): root, whom the kernel lets write a 0444 file, may replace it
/// as it may write it. Where `faccessat2` is missing (before Linux 5.8) or
/// refused by a seccomp filter, opening the file for writing, without
/// truncating it, answers instead. Only a refusal of permission refuses
/// here (`E_IO`, its errno kept); any other answer (the entry swapped
/// meanwhile) is left to the replace, which answers as it does.
fn check_may_write(dir: &Root, name: &Path, resolved: &str) -> Result<(), Error> {
    use rustix::fs::{accessat, openat, Access, AtFlags, Mode, OFlags};
    use rustix::io::Errno;
    let flags = AtFlags::EACCESS | AtFlags::SYMLINK_NOFOLLOW;
    let answer = match accessat(dir, name, Access::WRITE_OK, flags) {
        Err(Errno::NOSYS | Errno::PERM) => {
            let how = OFlags::WRONLY
                | OFlags::NOFOLLOW
                | OFlags::NONBLOCK
                | OFlags::NOCTTY
                | OFlags::CLOEXEC;
            openat(dir, name, how, Mode::empty()).map(drop)
        }
        r => r,
    };
    match answer {
        Err(e @ (Errno::ACCESS | Errno::PERM | Errno::ROFS)) => {
            let os = std::io::Error::from(e);
            Err(Error::new(
                ErrorCode::Io,
                format!(
                    "this process may not write the file ({os}); replacing it would override its permissions, so it was left as it is"
                ),
            )
            .with_errno(Some(e.raw_os_error()))
            .with_path(resolved))
        }
        _ => Ok(()),
    }
}

#[cold]
fn not_found(rel: &RelPath) -> Error {
    Error::new(
        ErrorCode::NotFound,
        "no such file or directory in any read root",
    )
    .with_path(rel.as_str())
}

#[cold]
fn not_file(rel: &RelPath) -> Error {
    Error::new(ErrorCode::NotFile, "not a regular file").with_path(rel.as_str())
}

#[cold]
fn too_large_read(rel: &RelPath, size: u64, cap: u64) -> Error {
    Error::new(
        ErrorCode::TooLarge,
        format!("{size} bytes is over the read cap of {cap} bytes (max_read_bytes); read a line range instead"),
    )
    .with_path(rel.as_str())
}

#[cold]
fn exists(resolved: &str, allowed: bool, asked: bool) -> Error {
    let why = match (allowed, asked) {
        (false, _) => {
            "the file exists and this sandbox does not allow overwriting (allow_overwrite = false)"
        }
        (true, false) => "the file exists; pass overwrite=true to replace it",
        (true, true) => "the file exists",
    };
    Error::new(ErrorCode::Exists, why).with_path(resolved)
}

#[cold]
fn cancelled(rel: &RelPath) -> Error {
    Error::new(ErrorCode::Aborted, "the read was cancelled").with_path(rel.as_str())
}

/// [`io_error`], but [`skip_line`]'s cancellation is [`cancelled`].
#[cold]
fn read_error(rel: &RelPath, e: std::io::Error) -> Error {
    match e.get_ref().is_some_and(|inner| inner.is::<ReadCancelled>()) {
        true => cancelled(rel),
        false => io_error(rel, e),
    }
}

#[cold]
fn io_error(rel: &RelPath, e: std::io::Error) -> Error {
    Error::from(e).with_path(rel.as_str())
}

/// A ranged read's line count must be 1 to [`MAX_RANGE_LINES`].
fn check_range_limit(limit: usize) -> Result<(), Error> {
    if limit == 0 || limit > MAX_RANGE_LINES {
        return Err(Error::request(format!(
            "limit must be between 1 and {MAX_RANGE_LINES}"
        )));
    }
    Ok(())
}

/// `limit` lines of `file` from line `offset` (1-based), cut at a whole
/// line so they stay under `max_read_bytes`, and the file's line count.
fn read_range(
    inner: &Inner,
    rel: &RelPath,
    file: &mut std::fs::File,
    offset: usize,
    limit: usize,
    cancel: &AtomicBool,
) -> Result<LinesRead, Error> {
    let alone = || {
        Error::new(
            ErrorCode::TooLarge,
            format!(
                "line {offset} alone is longer than max_read_bytes ({})",
                inner.max_read_bytes
            ),
        )
        .with_path(rel.as_str())
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let (mut content, mut lines, mut total, mut truncated) = (Vec::new(), 0usize, 0usize, false);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Lines outside the range are only counted, not kept.
        let keep = total + 1 >= offset && lines < limit && !truncated;
        if cancel.load(Ordering::Relaxed) {
            return Err(cancelled(rel));
        }
        let n = if keep {
            // Hold at most one byte more than still fits, enough to
            // tell that the line does not: the cap bounds memory too,
            // however long the line is on disk.
            // Saturating: a cap of u64::MAX (no cap) must not wrap
            // to a limit of nothing.
            let room = inner.max_read_bytes - content.len() as u64;
            let n = read_line_capped(&mut reader, room.saturating_add(1), &mut line)
                .map_err(|e| io_error(rel, e))?;
            if n as u64 > room && line.last() != Some(&b'\n') {
                // The range's first line does not fit: refused at once,
                // not after reading the rest of a file that may be
                // terabytes (sparse) without a line break.
                if lines == 0 {
                    return Err(alone());
                }
                n + skip_line(&mut reader, cancel).map_err(|e| read_error(rel, e))?
            } else {
                n
            }
        } else {
            skip_line(&mut reader, cancel).map_err(|e| read_error(rel, e))?
        };
        if n == 0 {
            break;
        }
        total += 1;
        if keep {
            if (content.len() + line.len()) as u64 > inner.max_read_bytes {
                truncated = true;
            } else {
                content
                    .try_reserve(line.len())
                    .map_err(|_| io_error(rel, rustix::io::Errno::NOMEM.into()))?;
                content.extend_from_slice(&line);
                lines += 1;
            }
        }
    }
    if truncated && lines == 0 {
        return Err(alone());
    }
    Ok(LinesRead {
        content,
        offset,
        lines,
        total_lines: total,
        truncated,
    })
}

/// Where git's hooks and config live, at the root and in a repository
/// nested beneath it: when a hook is protected at one of these places, so
/// is the config beside them.
/// Each entry: the hooks directory, the config's name there, and the
/// pattern that protects that config.
const GIT_HOOKS_AND_CONFIG: [(&str, &str, &str); 2] = [
    (".git/hooks", ".git/config", ".git/config"),
    ("nested/.git/hooks", "nested/.git/config", "**/.git/config"),
];

/// Whether `guard` refuses a write to any hook git runs in `hooks_dir`.
fn covers_a_hook(guard: &Guard, hooks_dir: &str) -> bool {
    sandgate_shellexec::GIT_HOOKS.iter().any(|h| {
        guard
            .check_write(&format!("{hooks_dir}/{h}"), None)
            .is_refused()
    })
}

/// The configs that go with the hooks `pattern` protects in the
/// repositories it names: for each component that can stand for a
/// repository's `.git` (any spelling that folds to it, a wildcard that
/// matches it, or `**`) after which the rest of the pattern covers a hook,
/// the pattern's components before it followed by `.git/config`
/// (`vendor/lib/.git/hooks/**` gives `vendor/lib/.git/config`,
/// `vendor/*/hooks/**` gives `vendor/.git/config`), with `**/` before
/// `.git` when that component is `**` (`vendor/**/hooks/**` gives
/// `vendor/**/.git/config`).
fn hook_configs(pattern: &str) -> Vec<String> {
    let mut rest = pattern;
    while let Some(r) = rest.strip_prefix("./") {
        rest = r;
    }
    let comps: Vec<&str> = rest
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let mut out = Vec::new();
    for (i, comp) in comps.iter().enumerate() {
        let recursive = *comp == "**";
        // A `.git` component then `hooks/<hook>`: the tail needs at least
        // those components, unless `**` stands for all of them.
        if !recursive && comps.len() - i < 2 {
            continue;
        }
        let is_git = recursive
            || GuardBuilder::new()
                .pattern(comp)
                .build()
                .is_ok_and(|g| g.check_write(".git", None).is_refused());
        if !is_git {
            continue;
        }
        let mut tail = comps[i..].join("/");
        if rest.ends_with('/') {
            tail.push('/');
        }
        let Ok(tail) = GuardBuilder::new().pattern(&tail).build() else {
            continue;
        };
        if covers_a_hook(&tail, ".git/hooks") {
            let mut config = comps[..i].join("/");
            if !config.is_empty() {
                config.push('/');
            }
            if recursive {
                config.push_str("**/");
            }
            config.push_str(".git/config");
            out.push(config);
        }
    }
    out
}

/// The deny-write guard of `patterns` (and restricted mode's `.git`), for
/// the file tools and the shell alike: where it protects git's hooks it
/// protects `.git/config` too, since `core.hooksPath` set there points the
/// hooks anywhere.
pub(crate) fn deny_write_guard<I, S>(patterns: I, restricted: bool) -> Result<Guard, Error>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let patterns: Vec<String> = patterns
        .into_iter()
        .map(|p| p.as_ref().to_owned())
        .collect();
    let mut builder = GuardBuilder::new();
    builder.patterns(&patterns).restricted(restricted);
    let built = |b: &GuardBuilder| {
        b.build()
            .map_err(|e| Error::from(e).with_key("fs.deny_write"))
    };
    let guard = built(&builder)?;
    let mut added = false;
    for (hooks, config, pattern) in GIT_HOOKS_AND_CONFIG {
        if covers_a_hook(&guard, hooks) && guard.check_write(config, None).is_allowed() {
            builder.pattern(pattern);
            added = true;
        }
    }
    for config in patterns.iter().flat_map(|p| hook_configs(p)) {
        builder.pattern(&config);
        added = true;
    }
    if added {
        return built(&builder);
    }
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<Sandbox>();
    }
}
