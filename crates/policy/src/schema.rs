//! Strict decoding of the TOML document into raw, unchecked settings.
//!
//! Decoding is done by hand over `toml::Table` rather than with
//! `#[derive(Deserialize)]` so that every unknown key, wrong type and bad
//! word is reported with its full dotted key (`fs.max_read_bytes`,
//! `net.allow[2]`), which serde's messages do not reliably carry.

use toml::{Table, Value};

use crate::error::{PolicyError, PolicyErrorKind};
use crate::locate::locate;
use crate::{Confine, SecurityMode};

/// Default `fs.max_read_bytes`: 10 MiB.
pub const DEFAULT_MAX_READ_BYTES: u64 = 10 * 1024 * 1024;
/// Default `fs.max_write_bytes`: 5 MiB.
pub const DEFAULT_MAX_WRITE_BYTES: u64 = 5 * 1024 * 1024;
/// Default `exec.max_output_bytes`: 8 MiB (stdout and stderr together).
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 8 * 1024 * 1024;
/// Default `exec.timeout_ms`: 30 s.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The largest admitted `exec.timeout_ms`: 24 h.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;
/// Default `exec.shell`.
pub const DEFAULT_SHELL: &str = "/bin/bash";

/// A value with the dotted key it came from, kept for later gate errors.
#[derive(Debug)]
pub(crate) struct Keyed<T> {
    pub(crate) key: String,
    pub(crate) value: T,
}

#[derive(Debug)]
pub(crate) struct RawPolicy {
    pub(crate) mode: SecurityMode,
    pub(crate) read_roots: Vec<Keyed<String>>,
    pub(crate) write_root: Option<Keyed<String>>,
    pub(crate) deny_write: Vec<String>,
    pub(crate) max_read_bytes: Keyed<i64>,
    pub(crate) max_write_bytes: Keyed<i64>,
    pub(crate) allow_overwrite: bool,
    pub(crate) exec_enabled: bool,
    pub(crate) shell: Keyed<String>,
    pub(crate) timeout_ms: Keyed<i64>,
    pub(crate) max_output_bytes: Keyed<i64>,
    pub(crate) env_inherit: Vec<Keyed<String>>,
    pub(crate) confine: Confine,
    pub(crate) process_allow: Vec<Keyed<String>>,
    pub(crate) net_allow: Vec<Keyed<String>>,
    pub(crate) allow_http: bool,
    pub(crate) fs_ops: Option<Keyed<i64>>,
    pub(crate) exec_ops: Option<Keyed<i64>>,
    pub(crate) net_ops: Option<Keyed<i64>>,
}

/// Parses the text as TOML, mapping parse errors (duplicates included) to
/// errors that name the key.
pub(crate) fn parse_toml(text: &str) -> Result<Table, PolicyError> {
    text.parse::<Table>().map_err(|err| {
        let span = err.span();
        let located = span.as_ref().map(|s| locate(text, s.start));
        let position = span
            .as_ref()
            .map(|s| line_col(text, s.start))
            .map(|(line, col)| format!(" (line {line}, column {col})"))
            .unwrap_or_default();
        let message = err.message().trim_end().to_owned();
        if message.starts_with("duplicate key") {
            let key = located.and_then(|l| l.exact.or(l.enclosing));
            return PolicyError::new(
                PolicyErrorKind::DuplicateKey,
                key,
                format!(
                    "defined more than once{position}: each key and each table may appear only \
                     once (a second definition is refused, never merged)"
                ),
            );
        }
        PolicyError::new(
            PolicyErrorKind::Syntax,
            located.and_then(|l| l.enclosing),
            format!("not valid TOML{position}: {message}"),
        )
    })
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

fn a_type(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

#[cold]
fn wrong_type(key: String, expected: &str, found: &Value) -> PolicyError {
    let found = a_type(found);
    PolicyError::at(
        PolicyErrorKind::WrongType,
        key,
        format!("expected {expected}, found {found}"),
    )
}

/// One table of the document, with its dotted prefix.
struct Section<'a> {
    prefix: &'static str,
    table: &'a Table,
}

impl<'a> Section<'a> {
    /// Refuses every key not in `known`.
    fn new(prefix: &'static str, table: &'a Table, known: &[&str]) -> Result<Self, PolicyError> {
        if let Some(unknown) = table.keys().find(|k| !known.contains(&k.as_str())) {
            let hint = known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let where_ = if prefix.is_empty() {
                "at the top level".to_owned()
            } else {
                format!("in [{prefix}]")
            };
            return Err(PolicyError::at(
                PolicyErrorKind::UnknownKey,
                join(prefix, unknown),
                format!("unknown key {where_}; the known keys are {hint}"),
            ));
        }
        Ok(Section { prefix, table })
    }

    fn key(&self, key: &str) -> String {
        join(self.prefix, key)
    }

    fn table(&self, key: &str) -> Result<Option<&'a Table>, PolicyError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Table(t)) => Ok(Some(t)),
            Some(other) => Err(wrong_type(self.key(key), "a table", other)),
        }
    }

    fn string(&self, key: &str) -> Result<Option<Keyed<String>>, PolicyError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(Keyed {
                key: self.key(key),
                value: s.clone(),
            })),
            Some(other) => Err(wrong_type(self.key(key), "a string", other)),
        }
    }

    fn integer(&self, key: &str) -> Result<Option<Keyed<i64>>, PolicyError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Integer(i)) => Ok(Some(Keyed {
                key: self.key(key),
                value: *i,
            })),
            Some(other) => Err(wrong_type(self.key(key), "an integer", other)),
        }
    }

    fn integer_or(&self, key: &str, default: u64) -> Result<Keyed<i64>, PolicyError> {
        Ok(self.integer(key)?.unwrap_or_else(|| Keyed {
            key: self.key(key),
            value: i64::try_from(default).unwrap_or(i64::MAX),
        }))
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, PolicyError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Boolean(b)) => Ok(Some(*b)),
            Some(other) => Err(wrong_type(
                self.key(key),
                "a boolean (true or false)",
                other,
            )),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<Keyed<String>>, PolicyError> {
        match self.table.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let key = format!("{}[{i}]", self.key(key));
                    match item {
                        Value::String(s) => Ok(Keyed {
                            key,
                            value: s.clone(),
                        }),
                        other => Err(wrong_type(key, "a string", other)),
                    }
                })
                .collect(),
            Some(other) => Err(wrong_type(self.key(key), "an array of strings", other)),
        }
    }

    /// A string that must be one of `words`.
    fn word<T: Copy>(&self, key: &str, words: &[(&str, T)]) -> Result<Option<T>, PolicyError> {
        let Some(value) = self.string(key)? else {
            return Ok(None);
        };
        match words.iter().find(|(w, _)| *w == value.value) {
            Some((_, t)) => Ok(Some(*t)),
            None => {
                let admitted = words
                    .iter()
                    .map(|(w, _)| format!("\"{w}\""))
                    .collect::<Vec<_>>()
                    .join(", ");
                Err(PolicyError::at(
                    PolicyErrorKind::InvalidValue,
                    value.key,
                    format!(
                        "\"{}\" is not one of {admitted}",
                        value.value.escape_debug()
                    ),
                ))
            }
        }
    }
}

/// The keys a policy may hold, by section: the top level (`""`, where
/// `fs`, `exec`, `net` and `budgets` are the sections) and each section.
/// Any other key is refused as unknown.
pub const KNOWN_KEYS: &[(&str, &[&str])] = &[
    ("", &["security_mode", "fs", "exec", "net", "budgets"]),
    (
        "fs",
        &[
            "read_roots",
            "write_root",
            "deny_write",
            "max_read_bytes",
            "max_write_bytes",
            "allow_overwrite",
        ],
    ),
    (
        "exec",
        &[
            "enabled",
            "shell",
            "timeout_ms",
            "max_output_bytes",
            "env_inherit",
            "confine",
            "process_allow",
        ],
    ),
    ("net", &["allow", "allow_http"]),
    ("budgets", &["fs_ops", "exec_ops", "net_ops"]),
];

/// [`KNOWN_KEYS`] of `section`.
fn known_keys(section: &str) -> &'static [&'static str] {
    KNOWN_KEYS
        .iter()
        .find(|(name, _)| *name == section)
        .map_or(&[], |(_, keys)| keys)
}

/// Decodes the document, refusing unknown keys, wrong types and unknown
/// words. Ranges and the gate rules are checked by the caller.
pub(crate) fn decode(doc: &Table) -> Result<RawPolicy, PolicyError> {
    let top = Section::new("", doc, known_keys(""))?;
    let mode = top
        .word(
            "security_mode",
            &[
                ("restricted", SecurityMode::Restricted),
                ("trusted_host", SecurityMode::TrustedHost),
            ],
        )?
        .unwrap_or_default();

    let empty = Table::new();
    let fs_table = top.table("fs")?;
    let exec_table = top.table("exec")?;
    let net_table = top.table("net")?;
    let budgets_table = top.table("budgets")?;

    let fs = Section::new("fs", fs_table.unwrap_or(&empty), known_keys("fs"))?;
    let read_roots = fs.strings("read_roots")?;
    let write_root = fs.string("write_root")?;
    let deny_write = fs
        .strings("deny_write")?
        .into_iter()
        .map(|k| k.value)
        .collect();
    let max_read_bytes = fs.integer_or("max_read_bytes", DEFAULT_MAX_READ_BYTES)?;
    let max_write_bytes = fs.integer_or("max_write_bytes", DEFAULT_MAX_WRITE_BYTES)?;
    let allow_overwrite = fs.boolean("allow_overwrite")?.unwrap_or(false);

    let exec = Section::new("exec", exec_table.unwrap_or(&empty), known_keys("exec"))?;
    let exec_enabled = exec.boolean("enabled")?.unwrap_or(false);
    let shell = exec.string("shell")?.unwrap_or_else(|| Keyed {
        key: exec.key("shell"),
        value: DEFAULT_SHELL.to_owned(),
    });
    let timeout_ms = exec.integer_or("timeout_ms", DEFAULT_TIMEOUT_MS)?;
    let max_output_bytes = exec.integer_or("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES)?;
    let env_inherit = exec.strings("env_inherit")?;
    let confine = exec
        .word(
            "confine",
            &[
                ("off", Confine::Off),
                ("best_effort", Confine::BestEffort),
                ("required", Confine::Required),
            ],
        )?
        .unwrap_or_default();
    let process_allow = exec.strings("process_allow")?;

    let net = Section::new("net", net_table.unwrap_or(&empty), known_keys("net"))?;
    let net_allow = net.strings("allow")?;
    let allow_http = net.boolean("allow_http")?.unwrap_or(false);

    let budgets = Section::new(
        "budgets",
        budgets_table.unwrap_or(&empty),
        known_keys("budgets"),
    )?;
    let fs_ops = budgets.integer("fs_ops")?;
    let exec_ops = budgets.integer("exec_ops")?;
    let net_ops = budgets.integer("net_ops")?;

    Ok(RawPolicy {
        mode,
        read_roots,
        write_root,
        deny_write,
        max_read_bytes,
        max_write_bytes,
        allow_overwrite,
        exec_enabled,
        shell,
        timeout_ms,
        max_output_bytes,
        env_inherit,
        confine,
        process_allow,
        net_allow,
        allow_http,
        fs_ops,
        exec_ops,
        net_ops,
    })
}
