//! A policy stated from code: the same keys, defaults and gate rules as
//! the file, as typed structs.
//!
//! [`PolicyOptions`] mirrors the file section by section and key by key
//! (its field names are the file's keys; a test checks them against
//! [`KNOWN_KEYS`](crate::KNOWN_KEYS)). [`Policy::from_options`] writes the
//! options out as the policy text they stand for and resolves that text
//! through the one decoder and the one set of gate rules, so a setting
//! refused in a file is refused from code with the same message, naming
//! the same dotted key. The bindings' options (Python keyword arguments, Go
//! functional options, Node object literals) arrive as JSON in this shape
//! ([`PolicyOptions::from_json`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{PolicyError, PolicyErrorKind};
use crate::{decode, gate, Confine, Policy, SecurityMode};

/// A whole policy, from code. Every field is optional: what is left out
/// takes the same default as a key left out of a file, so
/// `PolicyOptions::default()` grants nothing.
///
/// ```
/// use sandgate_policy::{ExecutorOptions, FsOptions, Policy, PolicyOptions};
/// # let dir = tempfile::tempdir()?;
/// # std::fs::create_dir(dir.path().join("work"))?;
/// let policy = Policy::from_options(
///     &PolicyOptions {
///         fs: FsOptions { write_root: Some("work".into()), ..Default::default() },
///         exec: ExecutorOptions { enabled: true, timeout_ms: Some(5_000), ..Default::default() },
///         ..Default::default()
///     },
///     dir.path(),
/// )?;
/// assert_eq!(policy.exec().timeout_ms, 5_000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyOptions {
    /// `security_mode` (default restricted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_mode: Option<SecurityMode>,
    /// `[fs]`.
    pub fs: FsOptions,
    /// `[exec]`.
    pub exec: ExecutorOptions,
    /// `[net]`.
    pub net: NetOptions,
    /// `[budgets]`.
    pub budgets: BudgetOptions,
}

/// `[fs]` from code.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FsOptions {
    /// `fs.read_roots`: relative to the base directory, or absolute.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read_roots: Vec<PathBuf>,
    /// `fs.write_root`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_root: Option<PathBuf>,
    /// `fs.deny_write` patterns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny_write: Vec<String>,
    /// `fs.max_read_bytes` (default [`DEFAULT_MAX_READ_BYTES`](crate::DEFAULT_MAX_READ_BYTES)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_read_bytes: Option<u64>,
    /// `fs.max_write_bytes` (default [`DEFAULT_MAX_WRITE_BYTES`](crate::DEFAULT_MAX_WRITE_BYTES)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_write_bytes: Option<u64>,
    /// `fs.allow_overwrite` (default false).
    #[serde(skip_serializing_if = "is_false")]
    pub allow_overwrite: bool,
}

/// `[exec]` from code.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutorOptions {
    /// `exec.enabled` (default false).
    #[serde(skip_serializing_if = "is_false")]
    pub enabled: bool,
    /// `exec.shell` (default [`DEFAULT_SHELL`](crate::DEFAULT_SHELL)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// `exec.timeout_ms` (default [`DEFAULT_TIMEOUT_MS`](crate::DEFAULT_TIMEOUT_MS)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `exec.max_output_bytes` (default [`DEFAULT_MAX_OUTPUT_BYTES`](crate::DEFAULT_MAX_OUTPUT_BYTES)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
    /// `exec.env_inherit`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_inherit: Vec<String>,
    /// `exec.confine` (default best effort).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confine: Option<Confine>,
    /// `exec.process_allow`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub process_allow: Vec<String>,
    /// `exec.max_memory_bytes` (default [`DEFAULT_MAX_MEMORY_BYTES`](crate::DEFAULT_MAX_MEMORY_BYTES)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_memory_bytes: Option<u64>,
    /// `exec.max_tasks` (default [`DEFAULT_MAX_TASKS`](crate::DEFAULT_MAX_TASKS)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tasks: Option<u64>,
    /// `exec.max_cpu_ms` (default: no CPU limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cpu_ms: Option<u64>,
}

/// `[net]` from code.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetOptions {
    /// `net.allow` entries.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// `net.allow_http` (default false).
    #[serde(skip_serializing_if = "is_false")]
    pub allow_http: bool,
    /// `[[net.credentials]]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<CredentialOptions>,
    /// `[[net.rules]]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RequestRuleOptions>,
}

/// One `[[net.credentials]]` entry from code: the same keys as the file.
/// The value itself is never an option: name its source (`env` or
/// `file`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CredentialOptions {
    /// The host name the header is set for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The port (default: any the grant admits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The header name (default `Authorization`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The host environment variable holding the value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// The file holding the value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// `"Bearer"`, `"token"` or `"basic"` (default: the value as it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// The user of the basic scheme.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Methods the injected requests must use (default: any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Path prefixes the injected requests must fall under (default: any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub path_prefixes: Vec<String>,
}

/// One `[[net.rules]]` entry from code.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RequestRuleOptions {
    /// The host name the rule applies to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The port (default: any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Methods matched (default: any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Path prefixes matched (default: any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub path_prefixes: Vec<String>,
    /// `"allow"` or `"deny"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// `[budgets]` from code: `None` is unlimited, `Some(0)` none allowed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetOptions {
    /// `budgets.fs_ops`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_ops: Option<u64>,
    /// `budgets.exec_ops`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_ops: Option<u64>,
    /// `budgets.net_ops`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_ops: Option<u64>,
}

/// The section a bare key name belongs to (`""` for the top level), from
/// the one list of keys.
/// An option [`PolicyOptions::from_flat_json`] does not know: the error
/// names it, says what an option may be, and suggests the key a
/// camelCase spelling stands for.
#[cold]
fn unknown_flat_key(key: &str) -> PolicyError {
    let mut snake = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
        }
        snake.push(c.to_ascii_lowercase());
    }
    let all: Vec<&str> = crate::KNOWN_KEYS
        .iter()
        .flat_map(|(_, keys)| keys.iter().copied())
        .collect();
    let hint = if snake != key && all.contains(&snake.as_str()) {
        format!(" (did you mean `{snake}`?)")
    } else {
        String::new()
    };
    PolicyError::new(
        PolicyErrorKind::UnknownKey,
        None,
        format!(
            "unknown option `{key}`{hint}: an option is a policy file key without its section, \
             or a whole section; known: {}",
            all.join(", ")
        ),
    )
}

fn section_of(key: &str) -> Option<&'static str> {
    crate::KNOWN_KEYS
        .iter()
        .find(|(section, keys)| {
            keys.contains(&key)
                && !(section.is_empty() && crate::KNOWN_KEYS.iter().any(|(s, _)| *s == key))
        })
        .map(|(section, _)| *section)
}

/// The deepest key of `value` that alone makes the options refused, and
/// that refusal: each member or element is tried by itself, in the place
/// `wrap` puts it (`{"exec": {"timeout_ms": -1}}` for `exec.timeout_ms`).
fn blame(
    value: &serde_json::Value,
    wrap: &dyn Fn(serde_json::Value) -> serde_json::Value,
    path: &str,
) -> Option<(String, serde_json::Error)> {
    use serde_json::Value;
    let refused = |v: Value| serde_json::from_value::<PolicyOptions>(wrap(v)).err();
    // A list or a table where the key takes neither: the key itself.
    let empty = match value {
        Value::Object(_) => Value::Object(Default::default()),
        Value::Array(_) => Value::Array(Vec::new()),
        _ => return None,
    };
    if refused(empty).is_some() {
        return None;
    }
    match value {
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            let alone = Value::Object([(k.clone(), v.clone())].into_iter().collect());
            let e = refused(alone)?;
            let key = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            let k = k.clone();
            let inner = move |x: Value| wrap(Value::Object([(k.clone(), x)].into_iter().collect()));
            Some(blame(v, &inner, &key).unwrap_or((key, e)))
        }),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            let e = refused(Value::Array(vec![v.clone()]))?;
            let key = format!("{path}[{i}]");
            let inner = |x: Value| wrap(Value::Array(vec![x]));
            Some(blame(v, &inner, &key).unwrap_or((key, e)))
        }),
        _ => None,
    }
}

/// JSON as a value, refusing a key given twice in one object (which
/// `serde_json` would let the last one win): `Err(Some(dotted key))` for
/// that, `Err(None)` with the parse error for malformed JSON.
fn strict_json(json: &str) -> Result<serde_json::Value, (Option<String>, serde_json::Error)> {
    use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
    use serde_json::Value;
    use std::cell::RefCell;

    struct Strict<'a> {
        path: String,
        twice: &'a RefCell<Option<String>>,
    }
    impl<'de> DeserializeSeed<'de> for Strict<'_> {
        type Value = Value;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Strict<'_> {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(v.into())
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(v.into())
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut items = Vec::new();
            loop {
                let seed = Strict {
                    path: format!("{}[{}]", self.path, items.len()),
                    twice: self.twice,
                };
                match seq.next_element_seed(seed)? {
                    Some(v) => items.push(v),
                    None => return Ok(Value::Array(items)),
                }
            }
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let path = if self.path.is_empty() {
                    key.clone()
                } else {
                    format!("{}.{key}", self.path)
                };
                if out.contains_key(&key) {
                    *self.twice.borrow_mut() = Some(path);
                    return Err(A::Error::custom("a key given twice"));
                }
                let value = map.next_value_seed(Strict {
                    path,
                    twice: self.twice,
                })?;
                out.insert(key, value);
            }
            Ok(Value::Object(out))
        }
    }

    let twice = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(json);
    let value = Strict {
        path: String::new(),
        twice: &twice,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    value.map_err(|e| (twice.into_inner(), e))
}

/// A key the options state twice, refused as the file refuses one.
fn given_twice(key: String) -> PolicyError {
    PolicyError::new(
        PolicyErrorKind::DuplicateKey,
        Some(key),
        "given more than once: each option may appear once, flat or in its section \
         (a second one is refused, never merged)",
    )
}

/// Parsed JSON options, or the refusal: a key given twice, or not JSON.
fn parse_options(json: &str, what: &str) -> Result<serde_json::Value, PolicyError> {
    strict_json(json).map_err(|(twice, e)| match twice {
        Some(key) => given_twice(key),
        None => PolicyError::new(
            PolicyErrorKind::WrongType,
            None,
            format!("the policy options are not {what}: {e}"),
        ),
    })
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl PolicyOptions {
    /// Options from a JSON object shaped like the policy file (sections as
    /// nested objects: `{"fs": {"write_root": "work"}, "exec": {...}}`).
    /// An unknown key or a wrong type is refused, naming it.
    pub fn from_json(json: &str) -> Result<PolicyOptions, PolicyError> {
        Self::from_json_value(parse_options(json, "JSON")?)
    }

    /// Options from parsed JSON; a refusal names the dotted key to blame
    /// (`exec.timeout_ms`, `fs.read_roots[1]`, `net.credentials[0].port`),
    /// as the file's refusals do.
    fn from_json_value(value: serde_json::Value) -> Result<PolicyOptions, PolicyError> {
        let e = match serde_json::from_value(value.clone()) {
            Ok(options) => return Ok(options),
            Err(e) => e,
        };
        let (key, e) = match blame(&value, &|v| v, "") {
            Some((key, e)) => (Some(key), e),
            None => (None, e),
        };
        let message = e.to_string();
        let kind = if message.starts_with("unknown field") {
            PolicyErrorKind::UnknownKey
        } else if message.starts_with("invalid value") {
            PolicyErrorKind::InvalidValue
        } else {
            PolicyErrorKind::WrongType
        };
        Err(PolicyError::new(
            kind,
            key,
            format!("the policy options are refused: {message}"),
        ))
    }

    /// Options from a flat JSON object whose keys are the policy file's
    /// key names without their section (`{"write_root": "work", "enabled":
    /// true, "timeout_ms": 5000}`): every key name is unique across the
    /// sections, so each says where it belongs. A section may also be
    /// given whole, as in [`from_json`](Self::from_json). This is the shape
    /// the bindings' keyword arguments and option objects arrive in.
    pub fn from_flat_json(json: &str) -> Result<PolicyOptions, PolicyError> {
        let flat = match parse_options(json, "a JSON object")? {
            serde_json::Value::Object(flat) => flat,
            other => {
                return Err(PolicyError::new(
                    PolicyErrorKind::WrongType,
                    None,
                    format!("the policy options are not a JSON object, found {other}"),
                ))
            }
        };
        let mut nested = serde_json::Map::new();
        for (key, value) in flat {
            let is_section = crate::KNOWN_KEYS.iter().any(|(s, _)| *s == key);
            let (section, entries) = match (section_of(&key), value) {
                // A whole section: merged with its keys given flat.
                (_, serde_json::Value::Object(t)) if is_section => (key, t),
                (Some(section), value) if !section.is_empty() => {
                    (section.to_owned(), [(key, value)].into_iter().collect())
                }
                (None, _) if !is_section => return Err(unknown_flat_key(&key)),
                // Top-level keys stay where they are, for the decoder.
                (_, value) => {
                    nested.insert(key, value);
                    continue;
                }
            };
            let table = nested
                .entry(section.clone())
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let serde_json::Value::Object(t) = table {
                for (key, value) in entries {
                    if t.contains_key(&key) {
                        return Err(given_twice(format!("{section}.{key}")));
                    }
                    t.insert(key, value);
                }
            }
        }
        Self::from_json_value(serde_json::Value::Object(nested))
    }

    /// The bytes of the options' text values (roots, patterns, names):
    /// fewer than [`PolicyOptions::to_toml`] writes, found without writing.
    fn value_bytes(&self) -> usize {
        let all = |v: &[String]| v.iter().map(String::len).sum::<usize>();
        let one = |v: &Option<String>| v.as_ref().map_or(0, String::len);
        let fs = &self.fs;
        let exec = &self.exec;
        let net = &self.net;
        fs.read_roots
            .iter()
            .map(|p| p.as_os_str().len())
            .sum::<usize>()
            + fs.write_root.as_ref().map_or(0, |p| p.as_os_str().len())
            + all(&fs.deny_write)
            + one(&exec.shell)
            + all(&exec.env_inherit)
            + all(&exec.process_allow)
            + all(&net.allow)
            + net
                .credentials
                .iter()
                .map(|c| {
                    [&c.host, &c.header, &c.env, &c.file, &c.scheme, &c.user]
                        .into_iter()
                        .map(one)
                        .sum::<usize>()
                        + all(&c.methods)
                        + all(&c.path_prefixes)
                })
                .sum::<usize>()
            + net
                .rules
                .iter()
                .map(|r| one(&r.host) + one(&r.action) + all(&r.methods) + all(&r.path_prefixes))
                .sum::<usize>()
    }

    /// The policy file these options stand for: what
    /// [`Policy::from_options`] resolves and digests. A host can print it
    /// to show the authority it grants, or save it as a policy file (with
    /// roots made absolute, or written beside them).
    pub fn to_toml(&self) -> Result<String, PolicyError> {
        toml::to_string(self).map_err(|e| {
            PolicyError::new(
                PolicyErrorKind::InvalidValue,
                None,
                format!("the policy options cannot be written as a policy: {e}"),
            )
        })
    }
}

impl Policy {
    /// Resolves a policy stated from code, as if it were the file
    /// [`PolicyOptions::to_toml`] writes: the same defaults, the same gate
    /// rules, every problem at once, each naming its dotted key (the
    /// problems carry no line: there is no file). Relative roots resolve
    /// against `base_dir`. No policy file exists, so no directory is kept
    /// out of the write root on its account. The digest is taken over that
    /// text, which may be at most [`MAX_POLICY_BYTES`](crate::MAX_POLICY_BYTES),
    /// as a file may.
    pub fn from_options(options: &PolicyOptions, base_dir: &Path) -> Result<Policy, PolicyError> {
        // As a file over the cap is refused, so is its text: a 100 MB root
        // was written, parsed for half a minute and quoted whole in the
        // refusal. The values' own bytes are judged before anything is
        // written, the text after.
        let over = |len: usize| {
            PolicyError::new(
                PolicyErrorKind::InvalidValue,
                None,
                format!(
                    "the policy stated from code is {len} bytes or more as TOML, over the {} a \
                     policy may have",
                    crate::MAX_POLICY_BYTES
                ),
            )
        };
        let least = options.value_bytes();
        if least as u64 > crate::MAX_POLICY_BYTES {
            return Err(over(least));
        }
        let text = options.to_toml()?;
        if text.len() as u64 > crate::MAX_POLICY_BYTES {
            return Err(over(text.len()));
        }
        let digest = crate::digest_of(text.as_bytes());
        let decoded =
            decode::decode(&text).map_err(|p| PolicyError::found(p, &text).without_locations())?;
        let dirs = gate::PolicyDirs::unprotected(base_dir)?;
        let inner = gate::resolve(
            decoded.raw,
            &decoded.removed,
            decoded.problems,
            &dirs,
            digest,
        )
        .map_err(|p| PolicyError::found(p, &text).without_locations())?;
        Ok(Policy {
            inner: std::sync::Arc::new(inner),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field set, so that serialization writes every key.
    fn everything() -> PolicyOptions {
        PolicyOptions {
            security_mode: Some(SecurityMode::TrustedHost),
            fs: FsOptions {
                read_roots: vec!["r".into()],
                write_root: Some("w".into()),
                deny_write: vec!["*.lock".into()],
                max_read_bytes: Some(1),
                max_write_bytes: Some(1),
                allow_overwrite: true,
            },
            exec: ExecutorOptions {
                enabled: true,
                shell: Some("/bin/sh".into()),
                timeout_ms: Some(1),
                max_output_bytes: Some(1),
                env_inherit: vec!["X".into()],
                confine: Some(Confine::Off),
                process_allow: vec!["git:status".into()],
                max_memory_bytes: Some(1),
                max_tasks: Some(1),
                max_cpu_ms: Some(1),
            },
            net: NetOptions {
                allow: vec!["example.com".into()],
                allow_http: true,
                credentials: vec![CredentialOptions {
                    host: Some("example.com".into()),
                    env: Some("TOKEN".into()),
                    ..Default::default()
                }],
                rules: vec![RequestRuleOptions {
                    host: Some("example.com".into()),
                    action: Some("allow".into()),
                    ..Default::default()
                }],
            },
            budgets: BudgetOptions {
                fs_ops: Some(1),
                exec_ops: Some(1),
                net_ops: Some(1),
            },
        }
    }

    /// The options' names are the file's keys: one table, checked here
    /// against the decoder's list rather than typed a second time.
    #[test]
    fn option_names_are_the_policy_keys() {
        let json = serde_json::to_value(everything()).unwrap();
        let top: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for (section, keys) in crate::KNOWN_KEYS {
            if section.is_empty() {
                let mut want: Vec<&str> = keys.to_vec();
                let mut have = top.clone();
                want.sort_unstable();
                have.sort_unstable();
                assert_eq!(have, want, "top-level options");
                continue;
            }
            let mut have: Vec<&str> = json[*section]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let mut want = keys.to_vec();
            have.sort_unstable();
            want.sort_unstable();
            assert_eq!(have, want, "[{section}] options");
        }
    }

    #[test]
    fn key_names_are_unique_across_sections() {
        let mut seen = std::collections::BTreeSet::new();
        for (section, keys) in crate::KNOWN_KEYS {
            for key in *keys {
                let is_section = crate::KNOWN_KEYS.iter().any(|(s, _)| s == key);
                if section.is_empty() && is_section {
                    continue;
                }
                assert!(seen.insert(*key), "`{key}` is in two sections");
            }
        }
    }

    #[test]
    fn flat_json_places_each_key_in_its_section() {
        let o = PolicyOptions::from_flat_json(
            r#"{"write_root": "w", "enabled": true, "timeout_ms": 5, "allow": ["a.example"],
                "exec_ops": 2, "security_mode": "trusted_host", "net": {"allow_http": true}}"#,
        )
        .unwrap();
        assert_eq!(o.fs.write_root.as_deref(), Some(Path::new("w")));
        assert!(o.exec.enabled);
        assert_eq!(o.exec.timeout_ms, Some(5));
        assert_eq!(o.net.allow, ["a.example"]);
        assert!(o.net.allow_http);
        assert_eq!(o.budgets.exec_ops, Some(2));
        assert_eq!(o.security_mode, Some(SecurityMode::TrustedHost));
        let e = PolicyOptions::from_flat_json(r#"{"write_roots": "w"}"#).unwrap_err();
        assert_eq!(e.kind(), PolicyErrorKind::UnknownKey);
        assert!(e.message().contains("write_roots"), "{e}");
        // The error says flat keys are options, not only the sections.
        assert!(e.message().contains("write_root,"), "{e}");
        let e = PolicyOptions::from_flat_json(r#"{"writeRoot": "w"}"#).unwrap_err();
        assert_eq!(e.kind(), PolicyErrorKind::UnknownKey);
        assert!(e.message().contains("did you mean `write_root`"), "{e}");
        let e = PolicyOptions::from_flat_json(r#"{"maxTasks": 1}"#).unwrap_err();
        assert!(e.message().contains("did you mean `max_tasks`"), "{e}");
    }

    #[test]
    fn defaults_write_an_empty_policy() {
        let text = PolicyOptions::default().to_toml().unwrap();
        assert!(
            text.lines()
                .all(|l| l.trim().is_empty() || l.starts_with('[')),
            "{text}"
        );
    }

    #[test]
    fn json_refuses_unknown_keys_naming_them() {
        let e = PolicyOptions::from_json(r#"{"fs": {"write_roots": "w"}}"#).unwrap_err();
        assert_eq!(e.kind(), PolicyErrorKind::UnknownKey);
        assert!(e.message().contains("write_roots"), "{e}");
        let e = PolicyOptions::from_json(r#"{"exec": {"timeout_ms": "5"}}"#).unwrap_err();
        assert_eq!(e.kind(), PolicyErrorKind::WrongType);
        let o =
            PolicyOptions::from_json(r#"{"exec": {"enabled": true, "confine": "off"}}"#).unwrap();
        assert!(o.exec.enabled);
        assert_eq!(o.exec.confine, Some(Confine::Off));
    }
}
