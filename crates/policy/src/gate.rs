//! The gate rules: from decoded settings to a resolved policy, or a refusal
//! that names the key.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{PolicyError, PolicyErrorKind};
use crate::net::{NetEntry, NetRules};
use crate::schema::{Keyed, RawPolicy, MAX_TIMEOUT_MS};
use crate::{Budgets, ExecPolicy, Inner, Limits, SecurityMode, CONFINED_GIT};

/// The directories the write root may not contain: where the policy file
/// lives, as named and as resolved.
pub(crate) struct PolicyDirs {
    base: PathBuf,
    protected: Vec<PathBuf>,
}

impl PolicyDirs {
    pub(crate) fn resolve(
        base_dir: &Path,
        policy_path: Option<&Path>,
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
        Ok(PolicyDirs { base, protected })
    }
}

#[cold]
fn invalid(key: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::at(PolicyErrorKind::InvalidValue, key, message)
}

fn positive_bytes(value: &Keyed<i64>) -> Result<u64, PolicyError> {
    match u64::try_from(value.value) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(invalid(
            &value.key,
            format!(
                "a byte cap must be a positive number of bytes, found {}",
                value.value
            ),
        )),
    }
}

fn resolve_root(root: &Keyed<String>, base: &Path) -> Result<PathBuf, PolicyError> {
    let written = &root.value;
    if written.is_empty() {
        return Err(invalid(&root.key, "an empty path is not a root"));
    }
    if written.contains('\0') {
        return Err(invalid(&root.key, "a root path may not contain a NUL byte"));
    }
    let path = Path::new(written);
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let quoted = written.escape_debug();
    let canonical = joined.canonicalize().map_err(|err| {
        let message = if err.kind() == io::ErrorKind::NotFound {
            format!("the root \"{quoted}\" does not exist")
        } else {
            format!("the root \"{quoted}\" cannot be resolved: {err}")
        };
        PolicyError::at(PolicyErrorKind::RootMissing, root.key.clone(), message)
    })?;
    let is_dir = std::fs::metadata(&canonical)
        .map(|m| m.is_dir())
        .unwrap_or(false);
    if !is_dir {
        return Err(PolicyError::at(
            PolicyErrorKind::RootNotDirectory,
            root.key.clone(),
            format!("the root \"{quoted}\" is not a directory"),
        ));
    }
    Ok(canonical)
}

fn check_budget(
    budget: &Option<Keyed<i64>>,
    granted: bool,
    missing: &str,
) -> Result<Option<u64>, PolicyError> {
    let Some(budget) = budget else {
        return Ok(None);
    };
    let Ok(n) = u64::try_from(budget.value) else {
        return Err(invalid(
            &budget.key,
            format!(
                "a budget is 0 (none allowed) or more, found {}; leave it out for unlimited",
                budget.value
            ),
        ));
    };
    if !granted {
        return Err(PolicyError::at(
            PolicyErrorKind::BudgetWithoutCapability,
            budget.key.clone(),
            format!("a budget for a capability the policy does not grant: {missing}"),
        ));
    }
    Ok(Some(n))
}

/// Applies every gate rule, in the order of the file's sections.
pub(crate) fn resolve(
    raw: RawPolicy,
    dirs: &PolicyDirs,
    digest: String,
) -> Result<Inner, PolicyError> {
    let mode = raw.mode;

    // [fs]
    let limits = Limits {
        max_read_bytes: positive_bytes(&raw.max_read_bytes)?,
        max_write_bytes: positive_bytes(&raw.max_write_bytes)?,
        allow_overwrite: raw.allow_overwrite,
    };
    let read_roots = raw
        .read_roots
        .iter()
        .map(|root| resolve_root(root, &dirs.base))
        .collect::<Result<Vec<_>, _>>()?;
    let write_root = match &raw.write_root {
        None => None,
        Some(root) => {
            let resolved = resolve_root(root, &dirs.base)?;
            if dirs.protected.iter().any(|dir| dir.starts_with(&resolved)) {
                return Err(PolicyError::at(
                    PolicyErrorKind::WriteRootContainsPolicy,
                    root.key.clone(),
                    format!(
                        "the write root \"{}\" contains the policy file's own directory, so the \
                         agent could rewrite its own policy; choose a directory that does not \
                         hold the policy file (a subdirectory such as \"workspace\")",
                        root.value.escape_debug()
                    ),
                ));
            }
            Some(resolved)
        }
    };
    let has_root = !read_roots.is_empty() || write_root.is_some();

    // [exec]
    let timeout_ms = match u64::try_from(raw.timeout_ms.value) {
        Ok(ms @ 1..=MAX_TIMEOUT_MS) => ms,
        _ => {
            return Err(invalid(
                &raw.timeout_ms.key,
                format!(
                    "must be between 1 and {MAX_TIMEOUT_MS} ms (24 h), found {}",
                    raw.timeout_ms.value
                ),
            ))
        }
    };
    let max_output_bytes = positive_bytes(&raw.max_output_bytes)?;
    let shell = &raw.shell;
    if !shell.value.starts_with('/') || shell.value.contains('\0') {
        return Err(invalid(
            &shell.key,
            format!(
                "the shell must be an absolute path without NUL bytes, found \"{}\"",
                shell.value.escape_debug()
            ),
        ));
    }
    for name in &raw.env_inherit {
        if name.value.is_empty() || name.value.contains(['=', '\0']) {
            return Err(invalid(
                &name.key,
                format!(
                    "\"{}\" is not an environment variable name (empty, or holds `=` or NUL)",
                    name.value.escape_debug()
                ),
            ));
        }
    }
    for entry in &raw.process_allow {
        let value = &entry.value;
        let confined = CONFINED_GIT.contains(&value.as_str());
        if mode == SecurityMode::Restricted && !confined {
            return Err(PolicyError::at(
                PolicyErrorKind::ProcessNotAllowed,
                entry.key.clone(),
                format!(
                    "\"{}\" is not admitted in restricted mode: only \"git:status\", \
                     \"git:diff\" and \"git:log\" (confined git); anything else needs \
                     security_mode = \"trusted_host\"",
                    value.escape_debug()
                ),
            ));
        }
        if value.is_empty() || value.chars().any(char::is_control) {
            return Err(invalid(
                &entry.key,
                "a process_allow entry is a non-empty name without control characters",
            ));
        }
        if confined && !has_root {
            return Err(PolicyError::at(
                PolicyErrorKind::ProcessNotAllowed,
                entry.key.clone(),
                format!(
                    "\"{value}\" runs confined git in a root, and the policy grants none: set \
                     fs.write_root or fs.read_roots"
                ),
            ));
        }
    }
    let exec = ExecPolicy {
        enabled: raw.exec_enabled,
        shell: raw.shell.value,
        timeout_ms,
        max_output_bytes,
        env_inherit: raw.env_inherit.into_iter().map(|k| k.value).collect(),
        confine: raw.confine,
        process_allow: raw.process_allow.into_iter().map(|k| k.value).collect(),
    };

    // [net]
    let mut allow = Vec::with_capacity(raw.net_allow.len());
    for item in &raw.net_allow {
        let quoted = item.value.escape_debug();
        let entry = NetEntry::parse(&item.value).map_err(|why| {
            PolicyError::at(
                PolicyErrorKind::NetEntryMalformed,
                item.key.clone(),
                format!("\"{quoted}\" is malformed: {why}"),
            )
        })?;
        if mode == SecurityMode::Restricted {
            if let Some(why) = entry.restricted_refusal() {
                return Err(PolicyError::at(
                    PolicyErrorKind::NetEntryRefused,
                    item.key.clone(),
                    format!("\"{quoted}\": {why}"),
                ));
            }
        }
        allow.push(entry);
    }
    let net = NetRules {
        mode,
        allow,
        allow_http: raw.allow_http,
    };

    // [budgets]
    let budgets = Budgets {
        fs_ops: check_budget(
            &raw.fs_ops,
            has_root,
            "no fs.read_roots and no fs.write_root",
        )?,
        exec_ops: check_budget(&raw.exec_ops, exec.enabled, "exec.enabled is not true")?,
        net_ops: check_budget(&raw.net_ops, !net.allow.is_empty(), "net.allow is empty")?,
    };

    Ok(Inner {
        mode,
        read_roots,
        write_root,
        deny_write: raw.deny_write,
        limits,
        exec,
        net,
        budgets,
        digest,
    })
}
