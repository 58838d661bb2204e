//! From policy text to typed, unchecked settings: the TOML parse (syntax
//! and duplicated keys), the shape pass ([`crate::shape`]), then serde.

use std::collections::BTreeSet;
use std::ops::Range;

use serde::Deserialize;
use toml::de::DeTable;
use toml::Spanned;

use crate::error::{PolicyErrorKind, Problem, MAX_PROBLEMS};
use crate::{shape, Confine, SecurityMode};

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
/// Default `exec.max_memory_bytes`: 2 GiB for the command's whole tree.
pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 2 << 30;
/// The smallest admitted `exec.max_memory_bytes`: 16 MiB (a shell and a
/// small tool need a few MiB each).
pub const MIN_MEMORY_BYTES: u64 = 16 << 20;
/// Default `exec.max_tasks`: processes and threads of the command's tree.
pub const DEFAULT_MAX_TASKS: u64 = 4096;
/// The smallest admitted `exec.max_tasks`: the shell and a command.
pub const MIN_TASKS: u64 = 2;
/// The smallest admitted `exec.max_cpu_ms`.
pub const MIN_CPU_MS: u64 = 10;
/// Default `exec.shell`.
pub const DEFAULT_SHELL: &str = "/bin/bash";

/// The whole file, as written. Every field is optional: an absent key takes
/// its default in the gate.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawPolicy {
    pub(crate) security_mode: Option<SecurityMode>,
    pub(crate) fs: RawFs,
    pub(crate) exec: RawExec,
    pub(crate) net: RawNet,
    pub(crate) budgets: RawBudgets,
}

/// `[fs]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawFs {
    pub(crate) read_roots: Vec<Spanned<String>>,
    pub(crate) write_root: Option<Spanned<String>>,
    pub(crate) deny_write: Vec<String>,
    pub(crate) max_read_bytes: Option<Spanned<i64>>,
    pub(crate) max_write_bytes: Option<Spanned<i64>>,
    pub(crate) allow_overwrite: bool,
}

/// `[exec]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawExec {
    pub(crate) enabled: bool,
    pub(crate) shell: Option<Spanned<String>>,
    pub(crate) timeout_ms: Option<Spanned<i64>>,
    pub(crate) max_output_bytes: Option<Spanned<i64>>,
    pub(crate) max_memory_bytes: Option<Spanned<i64>>,
    pub(crate) max_tasks: Option<Spanned<i64>>,
    pub(crate) max_cpu_ms: Option<Spanned<i64>>,
    pub(crate) env_inherit: Vec<Spanned<String>>,
    pub(crate) confine: Option<Confine>,
    pub(crate) process_allow: Vec<Spanned<String>>,
}

/// `[net]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawNet {
    pub(crate) allow: Vec<Spanned<String>>,
    pub(crate) allow_http: bool,
    pub(crate) credentials: Vec<Spanned<RawCredential>>,
    pub(crate) rules: Vec<Spanned<RawRule>>,
}

/// One `[[net.credentials]]` entry. Every key optional here: a missing
/// one is the gate's refusal, naming it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawCredential {
    pub(crate) host: Option<Spanned<String>>,
    pub(crate) port: Option<Spanned<i64>>,
    pub(crate) header: Option<Spanned<String>>,
    pub(crate) env: Option<Spanned<String>>,
    pub(crate) file: Option<Spanned<String>>,
    pub(crate) scheme: Option<Spanned<String>>,
    pub(crate) user: Option<Spanned<String>>,
    pub(crate) methods: Vec<Spanned<String>>,
    pub(crate) path_prefixes: Vec<Spanned<String>>,
}

/// One `[[net.rules]]` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawRule {
    pub(crate) host: Option<Spanned<String>>,
    pub(crate) port: Option<Spanned<i64>>,
    pub(crate) methods: Vec<Spanned<String>>,
    pub(crate) path_prefixes: Vec<Spanned<String>>,
    pub(crate) action: Option<Spanned<String>>,
}

/// `[budgets]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawBudgets {
    pub(crate) fs_ops: Option<Spanned<i64>>,
    pub(crate) exec_ops: Option<Spanned<i64>>,
    pub(crate) net_ops: Option<Spanned<i64>>,
}

/// A decoded file: the settings that passed, the dotted keys that were
/// refused and left out, and the problems found so far.
pub(crate) struct Decoded {
    pub(crate) raw: RawPolicy,
    pub(crate) removed: BTreeSet<String>,
    pub(crate) problems: Vec<Problem>,
}

/// The dotted key a parse error at `span` concerns: for a duplicate, the
/// earlier definition of the same name nearest before it; otherwise the
/// key-value whose value holds the error or whose key is on its line.
fn blame(
    text: &str,
    keys: &[(String, Range<usize>, Range<usize>)],
    span: &Range<usize>,
    duplicate: bool,
) -> Option<String> {
    let before = keys.iter().filter(|(_, k, _)| k.start <= span.start);
    if duplicate {
        let raw = text.get(span.clone()).unwrap_or("");
        let name = key_name(raw);
        let name = shape::segment(&name);
        let name = name.as_ref();
        let named = |path: &String| path == name || path.ends_with(&format!(".{name}"));
        let nearest = before
            .filter(|(p, _, _)| named(p))
            .max_by_key(|(_, k, _)| k.start)
            .map(|(p, _, _)| p.clone());
        return nearest.or_else(|| {
            keys.iter()
                .find(|(p, _, _)| named(p))
                .map(|(p, _, _)| p.clone())
        });
    }
    // A key that starts at or after the start of the error's line, and
    // not after the error, is on its line (one look at the text, not one
    // per key: a file can hold a hundred thousand keys).
    let line_start = text
        .get(..span.start)
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1);
    before
        .filter(|(_, k, v)| span.start <= v.end || k.start >= line_start)
        .max_by_key(|(_, k, _)| k.start)
        .map(|(p, _, _)| p.clone())
}

/// The name a key segment as written stands for: a quoted key with its
/// escapes decoded (`"write\u005froot"` is `write_root`), a bare one as it is.
fn key_name(raw: &str) -> String {
    let bare = || raw.trim_matches(|c| c == '"' || c == '\'').to_owned();
    if !raw.starts_with(['"', '\'']) {
        return bare();
    }
    // The parser decodes the quoted text exactly as it does a key's.
    let line = format!("k = {raw}");
    let Ok(doc) = DeTable::parse(&line) else {
        return bare();
    };
    match doc.get_ref().get("k").map(|v| v.get_ref()) {
        Some(toml::de::DeValue::String(s)) => s.to_string(),
        _ => bare(),
    }
}

/// Parses and decodes `text`. `Err` when the file cannot be decoded at all
/// (a syntax error), with every parse problem found.
pub(crate) fn decode(text: &str) -> Result<Decoded, Vec<Problem>> {
    // Before the parser, which recurses once per level (see `depth`).
    if let Some(problem) = crate::depth::check(text) {
        return Err(vec![problem]);
    }
    let (doc, errors) = DeTable::parse_recoverable(text);
    let (span, mut doc) = (doc.span(), doc.into_inner());
    let keys = shape::keys(&doc);
    let mut problems = Vec::new();
    let mut syntax = false;
    // Past the first few, a parse error is only counted: naming its key
    // means a look through every key and the text before it, and a file
    // can hold a parse error for nearly each of its bytes.
    let mut omitted = 0;
    for err in &errors {
        if problems.len() == MAX_PROBLEMS {
            syntax |= !err.message().starts_with("duplicate key");
            omitted += 1;
            continue;
        }
        let at = err.span().unwrap_or(0..0);
        let message = err.message().trim_end();
        if message.starts_with("duplicate key") {
            problems.push(Problem::new(
                PolicyErrorKind::DuplicateKey,
                blame(text, &keys, &at, true),
                "defined more than once: each key and each table may appear only once (a second \
                 definition is refused, never merged)",
                Some(at),
            ));
        } else {
            syntax = true;
            problems.push(Problem::new(
                PolicyErrorKind::Syntax,
                blame(text, &keys, &at, false),
                format!("not valid TOML: {message}"),
                Some(at),
            ));
        }
    }
    if omitted > 0 {
        problems.push(Problem::more(PolicyErrorKind::Syntax, omitted));
    }
    // After a syntax error the parser's recovery is a guess: report what
    // it found and decode nothing more.
    if syntax {
        return Err(problems);
    }
    let (shape_problems, removed) = shape::check(&mut doc);
    problems.extend(shape_problems);
    let deserializer = toml::de::Deserializer::from(Spanned::new(span, doc));
    match RawPolicy::deserialize(deserializer) {
        Ok(raw) => Ok(Decoded {
            raw,
            removed,
            problems,
        }),
        Err(err) => {
            // The shape pass refuses everything serde would; this keeps a
            // refusal (never a wrong policy) should they ever disagree.
            let at = err.span();
            problems.push(Problem::new(
                PolicyErrorKind::WrongType,
                at.as_ref().and_then(|s| blame(text, &keys, s, false)),
                err.message().trim_end().to_owned(),
                at,
            ));
            Err(problems)
        }
    }
}
