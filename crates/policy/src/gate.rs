//! The gate rules: from decoded settings to a resolved policy, or every
//! problem found, each naming its key.

use std::collections::BTreeSet;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;

use crate::decode::{
    RawPolicy, DEFAULT_MAX_MEMORY_BYTES, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_READ_BYTES,
    DEFAULT_MAX_TASKS, DEFAULT_MAX_WRITE_BYTES, DEFAULT_SHELL, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS,
    MIN_CPU_MS, MIN_MEMORY_BYTES, MIN_TASKS,
};
use crate::error::{PolicyError, PolicyErrorKind, Problem};
use crate::net;
use crate::{Budgets, ExecPolicy, Inner, Limits, SecurityMode, StatedLimits, CONFINED_GIT};
use sandgate_codes::shown;

/// The directories the write root may not contain: where the policy file
/// lives, as named and as resolved.
pub(crate) struct PolicyDirs {
    base: PathBuf,
    protected: Vec<PathBuf>,
    /// The directories holding a symbolic link that the policy file's path
    /// goes through (canonical): whoever can replace one of those links
    /// chooses the file the next load reads.
    link_dirs: Vec<PathBuf>,
    /// The policy file's device when it has more than one name (a hard
    /// link): another name may lie in any directory of that filesystem.
    linked_on: Option<u64>,
}

impl PolicyDirs {
    /// `links` is the policy file's `(device, number of names)`, when it
    /// was read from a file.
    pub(crate) fn resolve(
        base_dir: &Path,
        policy_path: Option<&Path>,
        links: Option<(u64, u64)>,
    ) -> Result<Self, PolicyError> {
        let unresolvable = |err: io::Error| {
            PolicyError::new(
                PolicyErrorKind::Read,
                None,
                format!("cannot resolve the policy file's directory: {err}"),
            )
        };
        let base = base_dir.canonicalize().map_err(unresolvable)?;
        let mut protected = vec![base.clone()];
        if let Some(path) = policy_path {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            protected.push(parent.canonicalize().map_err(unresolvable)?);
            // The file itself may be a symlink into another directory: an
            // agent able to write there could rewrite the policy too.
            if let Some(real_parent) = path.canonicalize().ok().as_deref().and_then(Path::parent) {
                protected.push(real_parent.to_path_buf());
            }
        }
        // So may a link on the way to it, in any directory: the path was
        // read through it, and is read through it again at the next load.
        let link_dirs = match policy_path {
            Some(path) => links_on_the_way(path).map_err(unresolvable)?,
            None => Vec::new(),
        };
        let linked_on = links.and_then(|(dev, names)| (names > 1).then_some(dev));
        Ok(PolicyDirs {
            base,
            protected,
            link_dirs,
            linked_on,
        })
    }

    /// Whether a second name of the policy file may lie in `root`: it has
    /// one, and `root` is on the same filesystem (a hard link cannot
    /// cross one).
    fn may_hold_a_link(&self, root: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.linked_on
            .is_some_and(|dev| std::fs::metadata(root).map_or(true, |m| m.dev() == dev))
    }

    /// A policy with no file (stated from code): relative roots resolve
    /// against `base_dir`, and no directory is kept out of the write root.
    pub(crate) fn unprotected(base_dir: &Path) -> Result<Self, PolicyError> {
        let base = base_dir.canonicalize().map_err(|err| {
            PolicyError::new(
                PolicyErrorKind::Read,
                None,
                format!(
                    "cannot resolve the base directory `{}`: {err}",
                    shown(base_dir)
                ),
            )
        })?;
        Ok(PolicyDirs {
            base,
            protected: Vec::new(),
            link_dirs: Vec::new(),
            linked_on: None,
        })
    }
}

/// The directories (canonical) that hold a symbolic link resolving `path`
/// goes through, its directories' links and the file's own included, in
/// the order met. Resolved as the kernel does: component by component, a
/// link's target spliced in where it stood (`..` after a link leaves the
/// directory the link led to), at most 40 links.
fn links_on_the_way(path: &Path) -> io::Result<Vec<PathBuf>> {
    use std::ffi::OsString;
    use std::path::Component;
    /// What is left to resolve, next first.
    fn push_front(pending: &mut Vec<Option<OsString>>, path: &Path) {
        // `None` is `..`; the root and `.` are handled by the caller.
        let parts: Vec<Option<OsString>> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(Some(n.to_os_string())),
                Component::ParentDir => Some(None),
                _ => None,
            })
            .collect();
        pending.extend(parts.into_iter().rev());
    }
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let mut resolved = PathBuf::from("/");
    let mut pending = Vec::new();
    push_front(&mut pending, &absolute);
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut hops = 0;
    while let Some(part) = pending.pop() {
        let Some(name) = part else {
            resolved.pop();
            continue;
        };
        let next = resolved.join(&name);
        let is_link = match std::fs::symlink_metadata(&next) {
            Ok(meta) => meta.file_type().is_symlink(),
            // A notional file (`from_bytes`), or one gone since it was
            // read: nothing further is read through a link.
            Err(e) if e.kind() == io::ErrorKind::NotFound => break,
            Err(e) => return Err(e),
        };
        if !is_link {
            resolved = next;
            continue;
        }
        hops += 1;
        if hops > 40 {
            return Err(rustix::io::Errno::LOOP.into());
        }
        if !dirs.contains(&resolved) {
            dirs.push(resolved.clone());
        }
        let target = std::fs::read_link(&next)?;
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
        push_front(&mut pending, &target);
    }
    Ok(dirs)
}

/// A setting with its dotted key and, when it was written, its place.
pub(crate) struct Field<T> {
    pub(crate) key: String,
    pub(crate) value: T,
    pub(crate) span: Option<Range<usize>>,
}

impl<T> Field<T> {
    fn written(key: impl Into<String>, value: Spanned<T>) -> Field<T> {
        let span = value.span();
        Field {
            key: key.into(),
            value: value.into_inner(),
            span: Some(span),
        }
    }

    fn or(key: &str, value: Option<Spanned<T>>, default: T) -> Field<T> {
        match value {
            Some(v) => Field::written(key, v),
            None => Field {
                key: key.to_owned(),
                value: default,
                span: None,
            },
        }
    }

    fn list(key: &str, items: Vec<Spanned<T>>) -> Vec<Field<T>> {
        items
            .into_iter()
            .enumerate()
            .map(|(i, v)| Field::written(format!("{key}[{i}]"), v))
            .collect()
    }
}

/// Collects problems; a rule that depends on a key the shape pass removed
/// asks [`Gate::removed`] first and stays quiet.
struct Gate<'a> {
    problems: Vec<Problem>,
    removed: &'a BTreeSet<String>,
}

impl Gate<'_> {
    fn refuse<T>(&mut self, kind: PolicyErrorKind, field: &Field<T>, message: impl Into<String>) {
        self.problems.push(Problem::new(
            kind,
            Some(field.key.clone()),
            message,
            field.span.clone(),
        ));
    }

    fn invalid<T>(&mut self, field: &Field<T>, message: impl Into<String>) {
        self.refuse(PolicyErrorKind::InvalidValue, field, message);
    }

    /// Whether `key`, or the section holding it, was refused by the shape
    /// pass (so its default stands in for what the file meant).
    fn removed(&self, key: &str) -> bool {
        self.removed.contains(key)
            || key
                .split_once('.')
                .is_some_and(|(section, _)| self.removed.contains(section))
    }

    fn positive_bytes(&mut self, value: &Field<i64>) -> u64 {
        match u64::try_from(value.value) {
            Ok(n) if n > 0 => n,
            _ => {
                self.invalid(
                    value,
                    format!(
                        "a byte cap must be a positive number of bytes, found {}",
                        value.value
                    ),
                );
                1
            }
        }
    }

    /// A resource limit: at least `min` (a smaller one could not even
    /// start a shell), else refused with `what` naming the unit.
    fn at_least(&mut self, value: &Field<i64>, min: u64, what: &str) -> u64 {
        match u64::try_from(value.value) {
            Ok(n) if n >= min => n,
            _ => {
                self.invalid(
                    value,
                    format!(
                        "must be at least {min} {what} (a smaller limit cannot start a shell), \
                         found {}",
                        value.value
                    ),
                );
                min
            }
        }
    }

    /// A root as written, resolved: `(canonical, as named)`, the second the
    /// absolute path before its symlinks were resolved.
    fn root(&mut self, root: &Field<String>, base: &Path) -> Option<(PathBuf, PathBuf)> {
        let written = &root.value;
        if written.is_empty() {
            self.invalid(root, "an empty path is not a root");
            return None;
        }
        if written.contains('\0') {
            self.invalid(root, "a root path may not contain a NUL byte");
            return None;
        }
        let path = Path::new(written);
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            base.join(path)
        };
        let quoted = written.escape_debug();
        let canonical = match joined.canonicalize() {
            Ok(c) => c,
            Err(err) => {
                let message = if err.kind() == io::ErrorKind::NotFound {
                    format!(
                        "the root \"{quoted}\" does not exist (looked for {})",
                        shown(&joined)
                    )
                } else {
                    format!(
                        "the root \"{quoted}\" ({}) cannot be resolved: {err}",
                        shown(&joined)
                    )
                };
                self.refuse(PolicyErrorKind::RootMissing, root, message);
                return None;
            }
        };
        let is_dir = std::fs::metadata(&canonical)
            .map(|m| m.is_dir())
            .unwrap_or(false);
        if !is_dir {
            self.refuse(
                PolicyErrorKind::RootNotDirectory,
                root,
                format!(
                    "the root \"{quoted}\" ({}) is not a directory",
                    shown(&canonical)
                ),
            );
            return None;
        }
        Some((canonical, joined))
    }

    /// A budget: `Some` when written and valid; a budget for a capability
    /// not granted is refused unless that grant's own key was refused.
    fn budget(
        &mut self,
        budget: Option<&Field<i64>>,
        granted: Option<bool>,
        missing: &str,
    ) -> Option<u64> {
        let budget = budget?;
        let Ok(n) = u64::try_from(budget.value) else {
            self.invalid(
                budget,
                format!(
                    "a budget is 0 (none allowed) or more, found {}; leave it out for unlimited",
                    budget.value
                ),
            );
            return None;
        };
        if granted == Some(false) {
            self.refuse(
                PolicyErrorKind::BudgetWithoutCapability,
                budget,
                format!("a budget for a capability the policy does not grant: {missing}"),
            );
        }
        Some(n)
    }
}

/// Applies every gate rule and answers the resolved policy, or every
/// problem found (those of `earlier` passes included).
pub(crate) fn resolve(
    raw: RawPolicy,
    removed: &BTreeSet<String>,
    earlier: Vec<Problem>,
    dirs: &PolicyDirs,
    digest: String,
) -> Result<Inner, Vec<Problem>> {
    let mut gate = Gate {
        problems: earlier,
        removed,
    };
    let mode = raw.security_mode.unwrap_or_default();
    // With `security_mode` refused, the mode-dependent rules would judge
    // the file by a mode it did not ask for.
    let mode_known = !gate.removed("security_mode");
    let restricted = mode_known && mode == SecurityMode::Restricted;

    // [fs]
    let fs = raw.fs;
    let max_read_bytes = Field::or(
        "fs.max_read_bytes",
        fs.max_read_bytes,
        DEFAULT_MAX_READ_BYTES as i64,
    );
    let max_write_bytes = Field::or(
        "fs.max_write_bytes",
        fs.max_write_bytes,
        DEFAULT_MAX_WRITE_BYTES as i64,
    );
    let limits = Limits {
        max_read_bytes: gate.positive_bytes(&max_read_bytes),
        max_write_bytes: gate.positive_bytes(&max_write_bytes),
        allow_overwrite: fs.allow_overwrite,
    };
    let read_root_fields = Field::list("fs.read_roots", fs.read_roots);
    let (read_roots, read_roots_named): (Vec<PathBuf>, Vec<PathBuf>) = read_root_fields
        .iter()
        .filter_map(|root| gate.root(root, &dirs.base))
        .unzip();
    let write_root_field = fs.write_root.map(|w| Field::written("fs.write_root", w));
    let write_root = match &write_root_field {
        None => None,
        Some(root) => match gate.root(root, &dirs.base) {
            Some((resolved, _)) if dirs.protected.iter().any(|dir| dir.starts_with(&resolved)) => {
                gate.refuse(
                    PolicyErrorKind::WriteRootContainsPolicy,
                    root,
                    format!(
                        "the write root \"{}\" contains the policy file's own directory, so the \
                         agent could rewrite its own policy; choose a directory that does not \
                         hold the policy file (a subdirectory such as \"workspace\")",
                        root.value.escape_debug()
                    ),
                );
                None
            }
            Some((resolved, _)) if dirs.link_dirs.iter().any(|dir| dir.starts_with(&resolved)) => {
                gate.refuse(
                    PolicyErrorKind::WriteRootContainsPolicy,
                    root,
                    format!(
                        "the write root \"{}\" holds a symbolic link the policy file's path goes \
                         through, so the agent could replace the link and choose the policy the \
                         next load reads; name the policy file by a path whose links lie outside \
                         the write root",
                        root.value.escape_debug()
                    ),
                );
                None
            }
            Some((resolved, _)) if dirs.may_hold_a_link(&resolved) => {
                gate.refuse(
                    PolicyErrorKind::WriteRootContainsPolicy,
                    root,
                    format!(
                        "the policy file has more than one name (a hard link), and another may \
                         lie in the write root \"{}\" (the same filesystem), where the agent \
                         could rewrite the policy in place; give the policy file one name",
                        root.value.escape_debug()
                    ),
                );
                None
            }
            // A file's gate never gets here with `/` (it holds the file's
            // directory); a policy stated from code, which has no file,
            // would grant every file the host user may write.
            Some((resolved, _)) if resolved == Path::new("/") => {
                gate.invalid(
                    root,
                    format!(
                        "the write root \"{}\" is the whole filesystem, which holds every \
                         policy, program and setting of the host; choose a directory for the \
                         agent's work",
                        root.value.escape_debug()
                    ),
                );
                None
            }
            resolved => resolved,
        },
    };
    let (write_root, write_root_named) = write_root.unzip();
    // What the file grants as written: a root that failed to resolve is
    // reported on its own, not again through the rules that need a root.
    let has_root = if gate.removed("fs.read_roots") || gate.removed("fs.write_root") {
        None
    } else {
        Some(!read_root_fields.is_empty() || write_root_field.is_some())
    };

    // [exec]
    let ex = raw.exec;
    let timeout = Field::or("exec.timeout_ms", ex.timeout_ms, DEFAULT_TIMEOUT_MS as i64);
    let timeout_ms = match u64::try_from(timeout.value) {
        Ok(ms @ 1..=MAX_TIMEOUT_MS) => ms,
        _ => {
            gate.invalid(
                &timeout,
                format!(
                    "must be between 1 and {MAX_TIMEOUT_MS} ms (24 h), found {}",
                    timeout.value
                ),
            );
            DEFAULT_TIMEOUT_MS
        }
    };
    let max_output = Field::or(
        "exec.max_output_bytes",
        ex.max_output_bytes,
        DEFAULT_MAX_OUTPUT_BYTES as i64,
    );
    let max_output_bytes = gate.positive_bytes(&max_output);
    let memory = Field::or(
        "exec.max_memory_bytes",
        ex.max_memory_bytes,
        DEFAULT_MAX_MEMORY_BYTES as i64,
    );
    let max_memory_bytes = gate.at_least(&memory, MIN_MEMORY_BYTES, "bytes (16 MiB)");
    let tasks = Field::or("exec.max_tasks", ex.max_tasks, DEFAULT_MAX_TASKS as i64);
    let max_tasks = gate.at_least(&tasks, MIN_TASKS, "processes and threads");
    let cpu = ex.max_cpu_ms.map(|v| Field::written("exec.max_cpu_ms", v));
    let max_cpu_ms = cpu.as_ref().map(|cpu| gate.at_least(cpu, MIN_CPU_MS, "ms"));
    let stated_limits = StatedLimits {
        memory: memory.span.is_some(),
        tasks: tasks.span.is_some(),
    };
    let shell = Field::or("exec.shell", ex.shell, DEFAULT_SHELL.to_owned());
    if !shell.value.starts_with('/') || shell.value.contains('\0') {
        gate.invalid(
            &shell,
            format!(
                "the shell must be an absolute path without NUL bytes, found \"{}\"",
                shell.value.escape_debug()
            ),
        );
    }
    let env_inherit = Field::list("exec.env_inherit", ex.env_inherit);
    for name in &env_inherit {
        if name.value.is_empty() || name.value.contains(['=', '\0']) {
            gate.invalid(
                name,
                format!(
                    "\"{}\" is not an environment variable name (empty, or holds `=` or NUL)",
                    name.value.escape_debug()
                ),
            );
        }
    }
    let process_allow = Field::list("exec.process_allow", ex.process_allow);
    for entry in &process_allow {
        let value = &entry.value;
        let confined = CONFINED_GIT.contains(&value.as_str());
        if restricted && !confined {
            gate.refuse(
                PolicyErrorKind::ProcessNotAllowed,
                entry,
                format!(
                    "\"{}\" is not admitted in restricted mode: only \"git:status\", \
                     \"git:diff\" and \"git:log\" (confined git); anything else needs \
                     security_mode = \"trusted_host\"",
                    value.escape_debug()
                ),
            );
        } else if value.is_empty() || value.chars().any(char::is_control) {
            gate.invalid(
                entry,
                "a process_allow entry is a non-empty name without control characters",
            );
        } else if confined && has_root == Some(false) {
            gate.refuse(
                PolicyErrorKind::ProcessNotAllowed,
                entry,
                format!(
                    "\"{value}\" runs confined git in a root, and the policy grants none: set \
                     fs.write_root or fs.read_roots"
                ),
            );
        }
    }
    let exec_enabled = (!gate.removed("exec.enabled")).then_some(ex.enabled);
    let exec = ExecPolicy {
        enabled: ex.enabled,
        shell: shell.value,
        timeout_ms,
        max_output_bytes,
        max_memory_bytes,
        max_tasks,
        max_cpu_ms,
        stated_limits,
        env_inherit: env_inherit.into_iter().map(|k| k.value).collect(),
        confine: ex.confine.unwrap_or_default(),
        process_allow: process_allow.into_iter().map(|k| k.value).collect(),
    };

    // [net]
    let net_fields = Field::list("net.allow", raw.net.allow);
    let mut allow = Vec::with_capacity(net_fields.len());
    for item in &net_fields {
        match net::gate_entry(&item.value, mode_known.then_some(mode)) {
            Ok(entry) => allow.push(entry),
            Err((kind, message)) => gate.refuse(kind, item, message),
        }
    }
    let net_granted = (!gate.removed("net.allow")).then_some(!net_fields.is_empty());
    let net = sandgate_netguard::Rules::new(mode.into(), allow, raw.net.allow_http);
    // Where the agent reads through the file tools: a credential's file
    // must lie elsewhere.
    let mut agent_roots: Vec<(String, &Path)> = Vec::new();
    for (i, (canonical, named)) in read_roots.iter().zip(&read_roots_named).enumerate() {
        agent_roots.push((format!("fs.read_roots[{i}]"), canonical));
        agent_roots.push((format!("fs.read_roots[{i}]"), named));
    }
    for root in write_root.iter().chain(write_root_named.iter()) {
        agent_roots.push(("fs.write_root".to_owned(), root));
    }
    let credentials = net_credentials(
        &mut gate,
        raw.net.credentials,
        &net,
        &exec.env_inherit,
        &agent_roots,
    );
    let request_rules = net_request_rules(&mut gate, raw.net.rules, &net);

    // [budgets]
    let b = raw.budgets;
    let fs_ops = b.fs_ops.map(|v| Field::written("budgets.fs_ops", v));
    let exec_ops = b.exec_ops.map(|v| Field::written("budgets.exec_ops", v));
    let net_ops = b.net_ops.map(|v| Field::written("budgets.net_ops", v));
    let budgets = Budgets {
        fs_ops: gate.budget(
            fs_ops.as_ref(),
            has_root,
            "no fs.read_roots and no fs.write_root",
        ),
        exec_ops: gate.budget(exec_ops.as_ref(), exec_enabled, "exec.enabled is not true"),
        net_ops: gate.budget(net_ops.as_ref(), net_granted, "net.allow is empty"),
    };

    if !gate.problems.is_empty() {
        return Err(gate.problems);
    }
    Ok(Inner {
        mode,
        read_roots,
        read_roots_named,
        write_root,
        write_root_named,
        deny_write: fs.deny_write,
        limits,
        exec,
        net,
        credentials,
        request_rules,
        budgets,
        digest,
    })
}

/// A required key of an array-of-tables entry, or a refusal naming it.
fn required<T>(
    gate: &mut Gate<'_>,
    entry: &Field<()>,
    key: &str,
    v: Option<Spanned<T>>,
) -> Option<Field<T>> {
    match v {
        Some(v) => Some(Field::written(format!("{}.{key}", entry.key), v)),
        None => {
            let missing = Field {
                key: format!("{}.{key}", entry.key),
                value: (),
                span: entry.span.clone(),
            };
            gate.invalid(&missing, format!("`{key}` is required"));
            None
        }
    }
}

/// The host and port of a credential or rule: one name, granted by
/// `net.allow` (over https on that port, 443 when none is given).
fn gate_target(
    gate: &mut Gate<'_>,
    entry: &Field<()>,
    host: Option<Spanned<String>>,
    port: Option<Spanned<i64>>,
    rules: &sandgate_netguard::Rules,
) -> Option<(String, Option<u16>)> {
    let host = required(gate, entry, "host", host)?;
    let name = match net::check_host(&host.value) {
        Ok(n) => n,
        Err(why) => {
            gate.invalid(&host, why);
            return None;
        }
    };
    let port = match port.map(|p| Field::written(format!("{}.port", entry.key), p)) {
        None => None,
        Some(p) => match u16::try_from(p.value) {
            Ok(n) if n > 0 => Some(n),
            _ => {
                gate.invalid(&p, format!("a port is 1 to 65535, found {}", p.value));
                return None;
            }
        },
    };
    if !gate.removed("net.allow") {
        let probe = port.unwrap_or(443);
        if let Err(d) = rules.admit(
            sandgate_netguard::Hop::First,
            Some("https"),
            &name,
            Some(probe),
        ) {
            gate.refuse(
                PolicyErrorKind::NetEntryRefused,
                &host,
                format!("{name}:{probe} is not granted by net.allow ({})", d.reason),
            );
            return None;
        }
    }
    Some((name, port))
}

fn gate_methods(gate: &mut Gate<'_>, key: &str, methods: Vec<Spanned<String>>) -> Vec<String> {
    Field::list(key, methods)
        .into_iter()
        .filter_map(|m| match net::check_method(&m.value) {
            Ok(()) => Some(m.value),
            Err(why) => {
                gate.invalid(&m, why);
                None
            }
        })
        .collect()
}

fn gate_prefixes(gate: &mut Gate<'_>, key: &str, prefixes: Vec<Spanned<String>>) -> Vec<String> {
    Field::list(key, prefixes)
        .into_iter()
        .filter_map(|p| match net::check_prefix(&p.value) {
            Ok(()) => Some(p.value),
            Err(why) => {
                gate.invalid(&p, why);
                None
            }
        })
        .collect()
}

/// `[[net.credentials]]`.
///
/// A variable that `exec.env_inherit` also passes is refused: the proxy
/// sets a credential so that the command never holds it, and every command
/// would find this one in its environment. So is a file inside a read root
/// or the write root (as written, or as its links resolve): the agent's
/// file tools would read it, no command needed.
fn net_credentials(
    gate: &mut Gate<'_>,
    raw: Vec<Spanned<crate::decode::RawCredential>>,
    rules: &sandgate_netguard::Rules,
    env_inherit: &[String],
    agent_roots: &[(String, &Path)],
) -> Vec<net::NetCredential> {
    let mut out: Vec<net::NetCredential> = Vec::new();
    for (i, item) in raw.into_iter().enumerate() {
        let entry = Field {
            key: format!("net.credentials[{i}]"),
            value: (),
            span: Some(item.span()),
        };
        let c = item.into_inner();
        let k = |name: &str| format!("{}.{name}", entry.key);
        let target = gate_target(gate, &entry, c.host, c.port, rules);
        let header = match c.header.map(|h| Field::written(k("header"), h)) {
            None => Some("Authorization".to_owned()),
            Some(h) => match net::check_header(&h.value) {
                Ok(()) => Some(h.value),
                Err(why) => {
                    gate.invalid(&h, why);
                    None
                }
            },
        };
        let env = c.env.map(|v| Field::written(k("env"), v));
        let file = c.file.map(|v| Field::written(k("file"), v));
        let source = match (env, file) {
            (Some(e), None) => {
                if e.value.is_empty() || e.value.contains(['=', '\0']) {
                    gate.invalid(
                        &e,
                        "an environment variable's name may not be empty or hold `=`",
                    );
                    None
                } else if env_inherit.contains(&e.value) {
                    gate.invalid(
                        &e,
                        format!(
                            "`{}` is also in exec.env_inherit, which hands it to every command; \
                             the proxy sets a credential so that the command never holds it: \
                             take the name out of env_inherit",
                            e.value.escape_debug()
                        ),
                    );
                    None
                } else {
                    Some(net::CredentialSource::Env(e.value))
                }
            }
            (None, Some(f)) => {
                if !Path::new(&f.value).is_absolute() || f.value.contains('\0') {
                    gate.invalid(&f, "a credential file must be an absolute path");
                    None
                } else if let Some(root) = readable_by_agent(Path::new(&f.value), agent_roots) {
                    gate.invalid(
                        &f,
                        format!(
                            "the file lies inside {root}, which the agent reads through its \
                             file tools; the proxy sets a credential so that the agent never \
                             holds it: keep the value outside every root"
                        ),
                    );
                    None
                } else {
                    Some(net::CredentialSource::File(PathBuf::from(f.value)))
                }
            }
            (Some(e), Some(_)) => {
                gate.invalid(
                    &e,
                    "give the value's source once: `env` or `file`, not both",
                );
                None
            }
            (None, None) => {
                gate.invalid(
                    &entry,
                    "the value's source is required: `env = \"VAR\"` (a host environment \
                     variable) or `file = \"/path\"`; a value is never written in the policy",
                );
                None
            }
        };
        let scheme = c.scheme.map(|s| Field::written(k("scheme"), s));
        let user = c.user.map(|u| Field::written(k("user"), u));
        let scheme_value = scheme.as_ref().map(|s| match s.value.as_str() {
            "Bearer" => net::CredentialScheme::Bearer,
            "token" => net::CredentialScheme::Token,
            _ => net::CredentialScheme::Basic,
        });
        let mut user_ok = true;
        match (&scheme_value, &user) {
            (Some(net::CredentialScheme::Basic), None) => {
                gate.invalid(
                    scheme.as_ref().expect("a scheme"),
                    "the basic scheme needs `user`",
                );
                user_ok = false;
            }
            (Some(net::CredentialScheme::Basic), Some(u))
                if u.value.contains(':') || u.value.bytes().any(|b| b < b' ') =>
            {
                gate.invalid(u, "a basic user may not hold `:` or control characters");
                user_ok = false;
            }
            (Some(net::CredentialScheme::Basic), Some(_)) => {}
            (_, Some(u)) => {
                gate.invalid(u, "`user` belongs to the basic scheme only");
                user_ok = false;
            }
            (_, None) => {}
        }
        let methods = gate_methods(gate, &k("methods"), c.methods);
        let path_prefixes = gate_prefixes(gate, &k("path_prefixes"), c.path_prefixes);
        let (Some((host, port)), Some(header), Some(source), true) =
            (target, header, source, user_ok)
        else {
            continue;
        };
        if out
            .iter()
            .any(|o| o.host == host && o.port == port && o.header.eq_ignore_ascii_case(&header))
        {
            gate.invalid(
                &entry,
                format!("a second credential for {host} and header {header}: one value per header"),
            );
            continue;
        }
        out.push(net::NetCredential {
            host,
            port,
            header,
            source,
            scheme: scheme_value,
            user: user.map(|u| u.value),
            methods,
            path_prefixes,
        });
    }
    out
}

/// The key of the root that holds `file`, as written or as its links
/// resolve (a file not there yet: its lexical path, then its directory's
/// resolved one).
fn readable_by_agent<'r>(file: &Path, roots: &'r [(String, &Path)]) -> Option<&'r str> {
    let resolved = file.canonicalize().ok().or_else(|| {
        let parent = file.parent()?.canonicalize().ok()?;
        Some(parent.join(file.file_name()?))
    });
    let spellings = std::iter::once(file.to_path_buf()).chain(resolved);
    for spelling in spellings {
        if let Some((key, _)) = roots.iter().find(|(_, root)| spelling.starts_with(root)) {
            return Some(key);
        }
    }
    None
}

/// `[[net.rules]]`.
fn net_request_rules(
    gate: &mut Gate<'_>,
    raw: Vec<Spanned<crate::decode::RawRule>>,
    rules: &sandgate_netguard::Rules,
) -> Vec<net::NetRequestRule> {
    let mut out = Vec::new();
    for (i, item) in raw.into_iter().enumerate() {
        let entry = Field {
            key: format!("net.rules[{i}]"),
            value: (),
            span: Some(item.span()),
        };
        let r = item.into_inner();
        let k = |name: &str| format!("{}.{name}", entry.key);
        let target = gate_target(gate, &entry, r.host, r.port, rules);
        let action = required(gate, &entry, "action", r.action).map(|a| {
            if a.value == "deny" {
                net::RuleAction::Deny
            } else {
                net::RuleAction::Allow
            }
        });
        let methods = gate_methods(gate, &k("methods"), r.methods);
        let path_prefixes = gate_prefixes(gate, &k("path_prefixes"), r.path_prefixes);
        if let (Some((host, port)), Some(action)) = (target, action) {
            out.push(net::NetRequestRule {
                host,
                port,
                methods,
                path_prefixes,
                action,
            });
        }
    }
    out
}
