//! The first pass over a parsed policy: every key, type and closed-set
//! word checked against the format, with its span, all problems at once.
//!
//! serde stops at the first error, and a user with two mistakes in a file
//! should not have to run the check twice. So this pass walks the spanned
//! document the `toml` crate parses, records a problem for each unknown
//! key, wrong type and unknown word (with a "did you mean" when a known
//! spelling is close), and removes the offending entries, so that serde
//! then decodes what passed and the gate rules see every key that was
//! well-formed. The dotted keys it removed are returned, so that a gate
//! rule that depends on one of them (a budget on `exec.enabled`) stays
//! quiet rather than report a consequence of the first mistake.

use std::collections::BTreeSet;
use std::ops::Range;

use toml::de::{DeTable, DeValue};

use crate::error::{PolicyErrorKind, Problem};

/// What a key holds.
#[derive(Clone, Copy)]
enum Shape {
    Str,
    Int,
    Bool,
    StrList,
    /// A string that is one of these words.
    Word(&'static [&'static str]),
    Table(&'static [(&'static str, Shape)]),
    /// An array of tables (`[[net.credentials]]`), each of these keys.
    TableList(&'static [(&'static str, Shape)]),
}

/// `security_mode` words.
pub(crate) const MODES: &[&str] = &["restricted", "trusted_host"];
/// `exec.confine` words.
pub(crate) const CONFINES: &[&str] = &["off", "best_effort", "required"];

const FS: &[(&str, Shape)] = &[
    ("read_roots", Shape::StrList),
    ("write_root", Shape::Str),
    ("deny_write", Shape::StrList),
    ("max_read_bytes", Shape::Int),
    ("max_write_bytes", Shape::Int),
    ("allow_overwrite", Shape::Bool),
];

const EXEC: &[(&str, Shape)] = &[
    ("enabled", Shape::Bool),
    ("shell", Shape::Str),
    ("timeout_ms", Shape::Int),
    ("max_output_bytes", Shape::Int),
    ("max_memory_bytes", Shape::Int),
    ("max_tasks", Shape::Int),
    ("max_cpu_ms", Shape::Int),
    ("env_inherit", Shape::StrList),
    ("confine", Shape::Word(CONFINES)),
    ("process_allow", Shape::StrList),
];

/// `net.credentials[].scheme` words.
pub(crate) const SCHEMES: &[&str] = &["Bearer", "token", "basic"];
/// `net.rules[].action` words.
pub(crate) const ACTIONS: &[&str] = &["allow", "deny"];

const CREDENTIAL: &[(&str, Shape)] = &[
    ("host", Shape::Str),
    ("port", Shape::Int),
    ("header", Shape::Str),
    ("env", Shape::Str),
    ("file", Shape::Str),
    ("scheme", Shape::Word(SCHEMES)),
    ("user", Shape::Str),
    ("methods", Shape::StrList),
    ("path_prefixes", Shape::StrList),
];

const RULE: &[(&str, Shape)] = &[
    ("host", Shape::Str),
    ("port", Shape::Int),
    ("methods", Shape::StrList),
    ("path_prefixes", Shape::StrList),
    ("action", Shape::Word(ACTIONS)),
];

const NET: &[(&str, Shape)] = &[
    ("allow", Shape::StrList),
    ("allow_http", Shape::Bool),
    ("credentials", Shape::TableList(CREDENTIAL)),
    ("rules", Shape::TableList(RULE)),
];

const BUDGETS: &[(&str, Shape)] = &[
    ("fs_ops", Shape::Int),
    ("exec_ops", Shape::Int),
    ("net_ops", Shape::Int),
];

const TOP: &[(&str, Shape)] = &[
    ("security_mode", Shape::Word(MODES)),
    ("fs", Shape::Table(FS)),
    ("exec", Shape::Table(EXEC)),
    ("net", Shape::Table(NET)),
    ("budgets", Shape::Table(BUDGETS)),
];

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
            "max_memory_bytes",
            "max_tasks",
            "max_cpu_ms",
            "env_inherit",
            "confine",
            "process_allow",
        ],
    ),
    ("net", &["allow", "allow_http", "credentials", "rules"]),
    ("budgets", &["fs_ops", "exec_ops", "net_ops"]),
];

/// The closest of `known` to `word`, when it is close enough to be what
/// was meant: a small edit distance, or the same word in another case.
pub(crate) fn did_you_mean<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = word.to_lowercase();
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&lower, k), *k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// A key as it is named in a dotted path: bare when TOML would take it
/// bare, else quoted as a TOML basic string (`"fs.write_root"`, `""`,
/// `"a\nb"`), so that a quoted key holding a dot is never shown as the
/// known key it spells, and one holding a line break, a terminal control
/// or a bidirectional override cannot redraw the refusal that names it.
pub(crate) fn segment(key: &str) -> std::borrow::Cow<'_, str> {
    let bare = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !key.is_empty() && key.chars().all(bare) {
        return std::borrow::Cow::Borrowed(key);
    }
    let mut out = String::with_capacity(key.len() + 2);
    out.push('"');
    for c in key.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if sandgate_codes::terminal_unsafe(c) => {
                out.push_str(&format!("\\u{:04X}", u32::from(c)))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    std::borrow::Cow::Owned(out)
}

fn join(prefix: &str, key: &str) -> String {
    let key = segment(key);
    if prefix.is_empty() {
        key.into_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

fn a_type(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(a) if a.iter().all(|v| v.get_ref().is_table()) && !a.is_empty() => {
            "an array of tables"
        }
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

fn expected(shape: Shape) -> &'static str {
    match shape {
        Shape::Str | Shape::Word(_) => "a string",
        Shape::Int => "an integer",
        Shape::Bool => "a boolean (true or false)",
        Shape::StrList => "an array of strings",
        Shape::Table(_) => "a table",
        Shape::TableList(_) => "an array of tables",
    }
}

/// Whether a TOML integer fits the i64 serde will decode it into. The
/// parser gives the digits ready for `from_str_radix`: without the radix
/// prefix (`0x`, `0o`, `0b`) and without underscores.
fn fits_i64(digits: &str, radix: u32) -> bool {
    i64::from_str_radix(digits, radix).is_ok()
}

struct Pass {
    problems: Vec<Problem>,
    removed: BTreeSet<String>,
}

impl Pass {
    fn problem(&mut self, kind: PolicyErrorKind, key: String, message: String, span: Range<usize>) {
        self.problems
            .push(Problem::new(kind, Some(key), message, Some(span)));
    }

    fn table(&mut self, prefix: &str, table: &mut DeTable<'_>, known: &[(&str, Shape)]) {
        let mut bad = Vec::new();
        for (key, value) in table.iter_mut() {
            let name = key.get_ref().as_ref();
            let dotted = join(prefix, name);
            let Some((_, shape)) = known.iter().find(|(k, _)| *k == name) else {
                let names: Vec<&str> = known.iter().map(|(k, _)| *k).collect();
                let where_ = if prefix.is_empty() {
                    "at the top level".to_owned()
                } else {
                    format!("in [{prefix}]")
                };
                let hint = match did_you_mean(name, &names) {
                    Some(k) => format!("did you mean `{k}`?"),
                    None => format!(
                        "the known keys are {}",
                        names
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                self.problem(
                    PolicyErrorKind::UnknownKey,
                    dotted.clone(),
                    format!("unknown key {where_}; {hint}"),
                    key.span(),
                );
                bad.push(name.to_owned());
                self.removed.insert(dotted);
                continue;
            };
            let span = value.span();
            if !self.value(&dotted, *shape, value.get_mut(), span) {
                bad.push(name.to_owned());
                self.removed.insert(dotted);
            }
        }
        for name in &bad {
            table.remove(name.as_str());
        }
    }

    /// Checks one value; false when it was refused (the caller removes it).
    fn value(
        &mut self,
        key: &str,
        shape: Shape,
        value: &mut DeValue<'_>,
        span: Range<usize>,
    ) -> bool {
        let wrong = |pass: &mut Pass, key: String, value: &DeValue<'_>, span, shape| {
            pass.problem(
                PolicyErrorKind::WrongType,
                key,
                format!("expected {}, found {}", expected(shape), a_type(value)),
                span,
            );
            false
        };
        match (shape, &mut *value) {
            (Shape::Str, DeValue::String(_)) | (Shape::Bool, DeValue::Boolean(_)) => true,
            (Shape::Int, DeValue::Integer(i)) => {
                if fits_i64(i.as_str(), i.radix()) {
                    return true;
                }
                self.problem(
                    PolicyErrorKind::InvalidValue,
                    key.to_owned(),
                    // As written, with its radix prefix (`0xffffffffffffffff`).
                    format!("{i} does not fit a 64-bit signed integer"),
                    span,
                );
                false
            }
            (Shape::Word(words), DeValue::String(s)) => {
                if words.contains(&s.as_ref()) {
                    return true;
                }
                let admitted = words
                    .iter()
                    .map(|w| format!("\"{w}\""))
                    .collect::<Vec<_>>()
                    .join(", ");
                let hint = did_you_mean(s, words)
                    .map(|w| format!("; did you mean \"{w}\"?"))
                    .unwrap_or_default();
                self.problem(
                    PolicyErrorKind::InvalidValue,
                    key.to_owned(),
                    format!("\"{}\" is not one of {admitted}{hint}", s.escape_debug()),
                    span,
                );
                false
            }
            (Shape::StrList, DeValue::Array(items)) => {
                let mut ok = true;
                for (i, item) in items.iter().enumerate() {
                    if !item.get_ref().is_str() {
                        ok = wrong(
                            self,
                            format!("{key}[{i}]"),
                            item.get_ref(),
                            item.span(),
                            Shape::Str,
                        );
                    }
                }
                ok
            }
            (Shape::Table(known), DeValue::Table(t)) => {
                self.table(key, t, known);
                true
            }
            (Shape::TableList(known), DeValue::Array(items)) => {
                let mut ok = true;
                for (i, item) in items.iter_mut().enumerate() {
                    let span = item.span();
                    let entry = format!("{key}[{i}]");
                    match item.get_mut() {
                        DeValue::Table(t) => self.table(&entry, t, known),
                        other => ok = wrong(self, entry, other, span, Shape::Table(known)),
                    }
                }
                ok
            }
            (shape, value) => wrong(self, key.to_owned(), value, span, shape),
        }
    }
}

/// Checks the document against the format, removing what it refuses.
/// Answers the problems and the dotted keys removed.
pub(crate) fn check(doc: &mut DeTable<'_>) -> (Vec<Problem>, BTreeSet<String>) {
    let mut pass = Pass {
        problems: Vec::new(),
        removed: BTreeSet::new(),
    };
    pass.table("", doc, TOP);
    (pass.problems, pass.removed)
}

/// Every dotted path of the document with the span of its key and of its
/// value, depth first, the keys of each array-of-tables entry included
/// (`net.rules[0].host`): what a parse error is matched against to name
/// the key it concerns.
pub(crate) fn keys(doc: &DeTable<'_>) -> Vec<(String, Range<usize>, Range<usize>)> {
    fn walk(
        prefix: &str,
        table: &DeTable<'_>,
        out: &mut Vec<(String, Range<usize>, Range<usize>)>,
    ) {
        for (key, value) in table.iter() {
            let dotted = join(prefix, key.get_ref());
            out.push((dotted.clone(), key.span(), value.span()));
            match value.get_ref() {
                DeValue::Table(t) => walk(&dotted, t, out),
                DeValue::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let DeValue::Table(t) = item.get_ref() {
                            walk(&format!("{dotted}[{i}]"), t, out);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk("", doc, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_keys_list_the_shapes() {
        let mut sections = vec![("", TOP)];
        sections.extend(TOP.iter().filter_map(|(name, shape)| match shape {
            Shape::Table(t) => Some((*name, *t)),
            _ => None,
        }));
        assert_eq!(sections.len(), KNOWN_KEYS.len());
        for ((name, shapes), (known_name, known)) in sections.iter().zip(KNOWN_KEYS) {
            assert_eq!(name, known_name);
            let names: Vec<&str> = shapes.iter().map(|(k, _)| *k).collect();
            assert_eq!(&names[..], *known);
        }
    }

    #[test]
    fn suggestions_are_close_spellings_only() {
        let keys = KNOWN_KEYS[1].1;
        assert_eq!(did_you_mean("read_rots", keys), Some("read_roots"));
        assert_eq!(did_you_mean("Max_Read_Bytes", keys), Some("max_read_bytes"));
        assert_eq!(did_you_mean("writeroot", keys), Some("write_root"));
        assert_eq!(did_you_mean("colour", keys), None);
        assert_eq!(did_you_mean("requried", CONFINES), Some("required"));
        assert_eq!(did_you_mean("strict", CONFINES), None);
    }
}
