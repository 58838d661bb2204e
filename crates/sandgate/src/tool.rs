//! The JSON tool endpoint (docs/reference/json-endpoint.md): one request object in, one answer
//! object out, for every file tool of a [`Sandbox`].
//!
//! Requests are strict: the keys of each op are exact, a key may appear
//! once, and each value has one JSON type (booleans are booleans, counts are
//! non-negative integers). Anything else is answered with `E_REQUEST` naming
//! the key. A bad request never ends a session: [`ToolSession::handle_line`]
//! always answers.
//!
//! A request may carry an `id` (a JSON string or number); its answer
//! carries the same `id`, refusals included, whenever the id could be read.
//! At the level of a stream of lines ([`ToolSession::handle_input`]), a line
//! is bytes: blank lines and lines starting with `#` are skipped without an
//! answer, and a line that is not UTF-8 is answered with `E_REQUEST`.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use base64::Engine as _;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Map, Value};

use crate::error::{Error, ErrorCode};
use crate::sandbox::{EditOptions, Sandbox, WriteOptions};

/// A JSON object in request order, with the first key that appeared twice
/// (a request holding one is refused, but its `id` can still be answered).
struct StrictObject {
    fields: Vec<(String, Value)>,
    duplicate: Option<String>,
}

impl StrictObject {
    /// The fields, or `E_REQUEST` naming the duplicated key.
    fn into_fields(self) -> Result<Vec<(String, Value)>, Error> {
        match self.duplicate {
            None => Ok(self.fields),
            // Shown as names are: a key may hold a line break or a
            // terminal's escape.
            Some(key) => Err(bad(format!(
                "not a valid request object: duplicated key `{}`",
                shown_key(&key)
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for StrictObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrictObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictObject, A::Error> {
                let mut fields: Vec<(String, Value)> = Vec::new();
                // Looked up by hash, not by comparing each key with every
                // earlier one: a line of a million distinct keys fits in
                // the line cap, and a quadratic check held the session
                // (and a signal) for hours.
                let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
                let mut duplicate = None;
                while let Some(key) = map.next_key::<String>()? {
                    let value: StrictValue = map.next_value()?;
                    if !seen.insert(key.clone()) {
                        duplicate.get_or_insert(key);
                        continue;
                    }
                    if let Some(inner) = value.duplicate {
                        duplicate.get_or_insert_with(|| nested_path(&key, &inner));
                    }
                    fields.push((key, value.value));
                }
                Ok(StrictObject { fields, duplicate })
            }
        }
        d.deserialize_map(V)
    }
}

/// A JSON value read as [`Value`] reads one, with the path of the first key
/// an object inside it gives twice (`a.b`, `a[0].b`): a request's keys are
/// unique at every depth, since a value such as `fetch`'s `headers` that
/// kept the last of two would run another request than a reader that kept
/// the first would judge.
struct StrictValue {
    value: Value,
    duplicate: Option<String>,
}

impl From<Value> for StrictValue {
    fn from(value: Value) -> Self {
        StrictValue {
            value,
            duplicate: None,
        }
    }
}

/// `key`'s path joined to the path `inner` of a key inside its value.
fn nested_path(key: &str, inner: &str) -> String {
    if inner.starts_with('[') {
        format!("{key}{inner}")
    } else {
        format!("{key}.{inner}")
    }
}

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrictValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
                Ok(Value::Bool(v).into())
            }
            fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
                Ok(Value::from(v).into())
            }
            fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
                Ok(Value::from(v).into())
            }
            fn visit_f64<E>(self, v: f64) -> Result<StrictValue, E> {
                Ok(Value::from(v).into())
            }
            fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
                Ok(Value::String(v.to_owned()).into())
            }
            fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
                Ok(Value::String(v).into())
            }
            fn visit_unit<E>(self) -> Result<StrictValue, E> {
                Ok(Value::Null.into())
            }
            fn visit_none<E>(self) -> Result<StrictValue, E> {
                Ok(Value::Null.into())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
                let mut items = Vec::new();
                let mut duplicate = None;
                while let Some(item) = seq.next_element::<StrictValue>()? {
                    if let Some(inner) = item.duplicate {
                        duplicate.get_or_insert_with(|| {
                            nested_path(&format!("[{}]", items.len()), &inner)
                        });
                    }
                    items.push(item.value);
                }
                Ok(StrictValue {
                    value: Value::Array(items),
                    duplicate,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
                // The map itself says whether a key came before (in
                // logarithmic time, so a line of a million keys stays
                // cheap); the first value is the one kept.
                let mut fields = Map::new();
                let mut duplicate = None;
                while let Some(key) = map.next_key::<String>()? {
                    let value: StrictValue = map.next_value()?;
                    match fields.entry(key) {
                        serde_json::map::Entry::Occupied(e) => {
                            duplicate.get_or_insert_with(|| e.key().clone());
                        }
                        serde_json::map::Entry::Vacant(e) => {
                            if let Some(inner) = value.duplicate {
                                duplicate.get_or_insert_with(|| nested_path(e.key(), &inner));
                            }
                            e.insert(value.value);
                        }
                    }
                }
                Ok(StrictValue {
                    value: Value::Object(fields),
                    duplicate,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether `text` (JSON) gives a key twice in one object at any depth,
/// keys compared once their escapes are read; `false` when it is not
/// JSON. The cheap question [`duplicated_key`] answers in full: nothing is
/// kept but each object's keys (borrowed from `text` where they hold no
/// escape), so a server can ask it of every message it reads and build
/// the key's path only for the rare one that gives one.
pub fn gives_a_key_twice(text: &str) -> bool {
    let mut de = serde_json::Deserializer::from_str(text);
    serde::de::DeserializeSeed::deserialize(KeysOnce, &mut de).is_ok_and(|twice| twice)
        && de.end().is_ok()
}

/// A [`serde::de::DeserializeSeed`] reading one JSON value and keeping only
/// its objects' keys: whether one of them gives a key twice.
#[derive(Clone, Copy)]
struct KeysOnce;

impl<'de> serde::de::DeserializeSeed<'de> for KeysOnce {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

/// One object key, borrowed from the input when it has no escape.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Visitor<'de> for KeysOnce {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut twice = false;
        while let Some(t) = seq.next_element_seed(self)? {
            twice |= t;
        }
        Ok(twice)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        // A few keys are compared with each other (no hashing, no
        // allocation for the usual message); past that, by hash, so a line
        // of a million keys stays linear.
        const FEW: usize = 16;
        let mut few: Vec<Key<'de>> = Vec::new();
        let mut many: std::collections::HashSet<std::borrow::Cow<'de, str>> =
            std::collections::HashSet::new();
        let mut twice = false;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            twice |= map.next_value_seed(self)?;
            if twice {
                continue;
            }
            if many.is_empty() && few.len() < FEW {
                twice = few.iter().any(|k| k.0 == key.0);
                few.push(key);
            } else {
                many.extend(few.drain(..).map(|k| k.0));
                twice = !many.insert(key.0);
            }
        }
        Ok(twice)
    }
}

/// The first key that `text`, a JSON object, gives twice; `None` when it
/// gives none, or when `text` is not a JSON object (the caller's own parse
/// says what is wrong with it then). For a host that reads a JSON object of
/// options itself, such as the C ABI's grep options: a request's keys are
/// unique, since JSON leaves a repeated key's meaning open and a reader that
/// kept the first would judge another request than the one that runs.
pub fn duplicated_key(text: &str) -> Option<String> {
    serde_json::from_str::<StrictObject>(text)
        .ok()
        .and_then(|o| o.duplicate)
}

/// The fields of one request, consumed key by key; what is left over is an
/// unknown key.
struct Fields {
    op: String,
    map: Vec<(String, Value)>,
    /// Set once every field was read ([`Fields::done`]): a refusal after
    /// that comes from the sandbox, which audited it.
    read: Rc<Cell<bool>>,
}

fn bad(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::Request, message)
}

/// A key, op or header name a request gave, as a refusal quotes it: shown
/// as names are (controls and a terminal's escapes written out), and past
/// 200 bytes by its first 100 and `…`, so that neither an escape sequence
/// nor a megabyte-long key is carried into the message.
fn shown_key(key: &str) -> String {
    match sandgate_codes::clipped(key, 200, 100) {
        (key, false) => crate::policy::shown(key),
        (head, true) => format!("{}…", crate::policy::shown(head)),
    }
}

impl Fields {
    fn take(&mut self, key: &str) -> Option<Value> {
        let i = self.map.iter().position(|(k, _)| k == key)?;
        Some(self.map.swap_remove(i).1)
    }

    fn opt_str(&mut self, key: &str) -> Result<Option<String>, Error> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(bad(format!("`{key}` must be a string"))),
        }
    }

    fn str(&mut self, key: &str) -> Result<String, Error> {
        self.opt_str(key)?
            .ok_or_else(|| bad(format!("`{}` needs `{key}`", self.op)))
    }

    fn opt_bool(&mut self, key: &str) -> Result<Option<bool>, Error> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(_) => Err(bad(format!(
                "`{key}` must be a JSON boolean (true or false)"
            ))),
        }
    }

    fn opt_count(&mut self, key: &str) -> Result<Option<usize>, Error> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) => Ok(Some(usize::try_from(v).unwrap_or(usize::MAX))),
                None => Err(bad(format!("`{key}` must be a non-negative integer"))),
            },
            Some(_) => Err(bad(format!("`{key}` must be a non-negative integer"))),
        }
    }

    /// Refuses whatever key the op did not take.
    fn done(self) -> Result<(), Error> {
        match self.map.first() {
            None => {
                self.read.set(true);
                Ok(())
            }
            Some((k, _)) => Err(bad(format!(
                "unknown key `{}` for op `{}`",
                shown_key(k),
                shown_key(&self.op)
            ))),
        }
    }
}

/// The file requests' ops, named as the sandbox records them.
const FILE_OPS: [&str; 10] = [
    "read", "write", "edit", "list", "stat", "mkdir", "delete", "rename", "glob", "grep",
];

/// The sandbox's name for a file request's op (`None` for the others).
fn file_op(op: &str) -> Option<&'static str> {
    FILE_OPS.iter().copied().find(|o| *o == op)
}

/// The name a file request gave, as the sandbox records it: `path`
/// (empty when it is not a string), `from -> to` for a rename, `.` for a
/// search with no base.
fn given_name(op: &str, map: &[(String, Value)]) -> String {
    let text = |k: &str| {
        map.iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.as_str())
    };
    match op {
        "rename" => format!(
            "{} -> {}",
            text("from").unwrap_or_default(),
            text("to").unwrap_or_default()
        ),
        "glob" | "grep" if map.iter().all(|(n, _)| n != "path") => ".".into(),
        _ => text("path").unwrap_or_default().to_owned(),
    }
}

/// The ops a request may name.
pub const OPS: &[&str] = &[
    "summary", "read", "write", "edit", "list", "stat", "mkdir", "delete", "rename", "glob",
    "grep", "exec", "fetch",
];

/// One session of the tool endpoint: a sandbox and what `summary` answers.
pub struct ToolSession {
    sandbox: Sandbox,
    summary: Value,
    executor: Option<crate::exec::Executor>,
    fetcher: Option<crate::fetch::Fetcher>,
    abort: Option<crate::exec::AbortSignal>,
    /// Set from another thread to end the `read`, `grep`, `glob` or
    /// `fetch` in flight (and every later one) with `E_ABORTED`.
    cancel: Arc<AtomicBool>,
    /// Whether [`ToolSession::set_cancel`] gave `cancel` (only then is a
    /// `fetch` given the flag: a cancellable fetch takes helper threads).
    fetch_cancellable: bool,
}

impl ToolSession {
    /// A session over `sandbox`; `summary` is what the `summary` op answers
    /// (the policy summary with its digest).
    /// It has no executor and no fetcher: `exec` and `fetch` are refused
    /// with `E_DENIED`.
    pub fn new(sandbox: Sandbox, summary: Value) -> ToolSession {
        ToolSession {
            sandbox,
            summary,
            executor: None,
            fetcher: None,
            abort: None,
            cancel: Arc::new(AtomicBool::new(false)),
            fetch_cancellable: false,
        }
    }

    /// Gives every `exec` of the session `abort`: once it is aborted, a
    /// running command's whole tree is ended (exit code 130) and every
    /// later one ends at once. For a server that must not leave a command
    /// running when it is told to stop (`sandgate tool` on SIGTERM).
    pub fn set_exec_abort(&mut self, abort: crate::exec::AbortSignal) {
        self.abort = Some(abort);
    }

    /// Gives the session's `read` (by line range), `grep`, `glob` and
    /// `fetch` `cancel`: once it is set (from another thread), the one in
    /// flight stops and answers `E_ABORTED`, and so does every later one.
    /// A ranged read counts every line of its file, so without it a read
    /// of a huge (or sparse) file holds the session for as long as the
    /// file takes to read. For a server that must stop promptly when it
    /// is told to (`sandgate tool` on SIGTERM). Writes, edits and the
    /// other ops are bounded by the policy's byte caps and are not
    /// stopped: each completes or leaves its file as it was.
    pub fn set_cancel(&mut self, cancel: Arc<AtomicBool>) {
        self.cancel = cancel;
        self.fetch_cancellable = true;
    }

    /// A session with everything `policy` grants, the shell included when
    /// `[exec]` enables it, and the fetcher `[net]` grants.
    pub fn from_policy(policy: &sandgate_policy::Policy) -> Result<ToolSession, Error> {
        let summary = policy.summary().to_json_value();
        let executor = crate::exec::Executor::from_policy(policy)?;
        Ok(ToolSession {
            sandbox: Sandbox::from_policy(policy)?,
            summary,
            executor: Some(executor),
            fetcher: Some(crate::fetch::from_policy(policy)),
            abort: None,
            cancel: Arc::new(AtomicBool::new(false)),
            fetch_cancellable: false,
        })
    }

    /// The sandbox behind the session.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Answers one line of the endpoint's input, given as the bytes between
    /// two line feeds (a final `\r` is JSON whitespace and ignored).
    ///
    /// `None` for a line that is skipped without an answer: blank (only
    /// ASCII whitespace) or a comment (its first non-blank byte is `#`).
    /// Every other line is answered, never ending the session: a line that
    /// is not UTF-8 with `E_REQUEST` (and the request's `id` where it can be
    /// read), the rest as [`handle_line`](Self::handle_line) answers.
    pub fn handle_input(&self, line: &[u8]) -> Option<Value> {
        if is_skipped(line) {
            return None;
        }
        Some(match std::str::from_utf8(line) {
            Ok(text) => self.handle_line(text),
            Err(e) => with_id(
                error_answer(&bad(format!(
                    "the request line is not valid UTF-8 (at byte {})",
                    e.valid_up_to()
                ))),
                id_of_lossy(line),
            ),
        })
    }

    /// Answers one request line. Never fails: a malformed line gets an
    /// `E_REQUEST` answer (with the request's `id` when the line is a JSON
    /// object whose `id` could be read).
    pub fn handle_line(&self, line: &str) -> Value {
        match serde_json::from_str::<StrictObject>(line) {
            Ok(obj) => self.handle_object(obj),
            Err(e) => error_answer(&bad(format!("not a valid request object: {e}"))),
        }
    }

    /// Answers one already-parsed request value (duplicate keys cannot be
    /// detected in a `Value`; use [`handle_line`](Self::handle_line) for
    /// untrusted text).
    pub fn handle_value(&self, request: &Value) -> Value {
        match request {
            Value::Object(m) => self.handle_object(StrictObject {
                fields: m.clone().into_iter().collect(),
                duplicate: None,
            }),
            _ => error_answer(&bad("a request must be a JSON object")),
        }
    }

    /// Answers a request object, echoing its `id`.
    fn handle_object(&self, obj: StrictObject) -> Value {
        let id = match request_id(&obj) {
            Ok(id) => id,
            Err(e) => return error_answer(&e),
        };
        let answer = match obj.into_fields() {
            Ok(map) => self.handle_fields(map),
            Err(e) => error_answer(&e),
        };
        with_id(answer, id)
    }

    fn handle_fields(&self, mut map: Vec<(String, Value)>) -> Value {
        if let Some(i) = map.iter().position(|(k, _)| k == "id") {
            map.swap_remove(i);
        }
        let op = match map.iter().position(|(k, _)| k == "op") {
            Some(i) => match map.swap_remove(i).1 {
                Value::String(s) => s,
                _ => return error_answer(&bad("`op` must be a string")),
            },
            None => return error_answer(&bad("a request needs `op`")),
        };
        // What a file request names, for the record of one refused before
        // the sandbox saw it.
        let given = file_op(&op).map(|op| (op, given_name(op, &map)));
        let read = Rc::new(Cell::new(false));
        let fields = Fields {
            op: op.clone(),
            map,
            read: Rc::clone(&read),
        };
        if op == "fetch" {
            return self.fetch(fields);
        }
        match self.dispatch(&op, fields) {
            Ok(mut answer) => {
                answer.insert("ok".into(), Value::Bool(true));
                Value::Object(answer)
            }
            // Fields that do not fit are refused here, before the sandbox
            // saw the request: it is audited, and spends no budget, as a
            // malformed request never does.
            Err(e) => match given {
                Some((op, name)) if !read.get() => {
                    error_answer(&self.sandbox.audit_refusal(op, &name, e))
                }
                _ => error_answer(&e),
            },
        }
    }

    fn dispatch(&self, op: &str, mut f: Fields) -> Result<Map<String, Value>, Error> {
        let sb = &self.sandbox;
        let mut out = Map::new();
        match op {
            "summary" => {
                f.done()?;
                out.insert("summary".into(), self.summary.clone());
            }
            "read" => {
                let path = f.str("path")?;
                let (offset, limit) = (f.opt_count("offset")?, f.opt_count("limit")?);
                f.done()?;
                if offset.is_none() && limit.is_none() {
                    let bytes = sb.read(&path)?;
                    out.insert("size".into(), json!(bytes.len()));
                    put_content(&mut out, bytes);
                } else {
                    let (offset, limit) =
                        (offset.unwrap_or(1), limit.unwrap_or(crate::MAX_RANGE_LINES));
                    let r = sb.read_lines_cancellable(&path, offset, limit, &self.cancel)?;
                    out.insert("size".into(), json!(r.content.len()));
                    out.insert("offset".into(), json!(r.offset));
                    out.insert("limit".into(), json!(limit));
                    out.insert("lines".into(), json!(r.lines));
                    out.insert("total_lines".into(), json!(r.total_lines));
                    out.insert("truncated".into(), json!(r.truncated));
                    put_content(&mut out, r.content);
                }
            }
            "write" => {
                let path = f.str("path")?;
                let text = f.opt_str("content")?;
                let b64 = f.opt_str("content_base64")?;
                let overwrite = f.opt_bool("overwrite")?.unwrap_or(false);
                f.done()?;
                let bytes = match (text, b64) {
                    (Some(t), None) => t.into_bytes(),
                    (None, Some(b)) => base64::engine::general_purpose::STANDARD
                        .decode(b)
                        .map_err(|e| bad(format!("`content_base64` is not valid base64: {e}")))?,
                    _ => {
                        return Err(bad(
                            "`write` needs exactly one of `content` and `content_base64`",
                        ))
                    }
                };
                out.insert(
                    "size".into(),
                    json!(sb.write(&path, &bytes, WriteOptions::default().overwrite(overwrite))?),
                );
            }
            "edit" => {
                let path = f.str("path")?;
                let old = f.str("old")?;
                let new = f.str("new")?;
                let all = f.opt_bool("all")?.unwrap_or(false);
                f.done()?;
                out.insert(
                    "replacements".into(),
                    json!(sb.edit(&path, &old, &new, EditOptions::default().replace_all(all))?),
                );
            }
            "list" => {
                let path = f.str("path")?;
                f.done()?;
                let entries: Vec<Value> = sb
                    .list(&path)?
                    .into_iter()
                    .map(|e| json!({"name": e.name, "kind": e.kind.as_str(), "size": e.size}))
                    .collect();
                out.insert("entries".into(), Value::Array(entries));
            }
            "stat" => {
                let path = f.str("path")?;
                f.done()?;
                let s = sb.stat(&path)?;
                out.insert("kind".into(), json!(s.kind.as_str()));
                out.insert("size".into(), json!(s.size));
                out.insert("mode".into(), json!(s.mode));
            }
            "mkdir" | "delete" => {
                let path = f.str("path")?;
                f.done()?;
                if op == "mkdir" {
                    sb.mkdir(&path)?
                } else {
                    sb.delete(&path)?
                }
            }
            "rename" => {
                let from = f.str("from")?;
                let to = f.str("to")?;
                f.done()?;
                sb.rename(&from, &to)?;
            }
            "glob" => {
                let pattern = f.str("pattern")?;
                let path = f.opt_str("path")?;
                f.done()?;
                let found = sb.glob_found_cancellable(&pattern, path.as_deref(), &self.cancel)?;
                out.insert("paths".into(), json!(found.results));
                put_cut(&mut out, found.cut);
                if found.unreadable > 0 {
                    out.insert("unreadable".into(), json!(found.unreadable));
                }
            }
            "grep" => {
                let pattern = f.str("pattern")?;
                let path = f.opt_str("path")?;
                // Fields are read in this order, so a bad one is named first.
                let opts = crate::search::GrepOptions {
                    max_results: f.opt_count("max_results")?,
                    glob: f.opt_str("glob")?,
                    case_insensitive: f.opt_bool("case_insensitive")?.unwrap_or(false),
                    before: f.opt_count("before")?.unwrap_or(0),
                    after: f.opt_count("after")?.unwrap_or(0),
                    mode: match f.opt_str("mode")? {
                        Some(mode) => mode.parse()?,
                        None => crate::search::GrepMode::Lines,
                    },
                    gitignore: f.opt_bool("gitignore")?.unwrap_or(false),
                    cancel: Some(Arc::clone(&self.cancel)),
                };
                if opts.mode != crate::search::GrepMode::Lines
                    && (opts.before > 0 || opts.after > 0)
                {
                    return Err(bad("`before` and `after` apply to mode `lines` only"));
                }
                f.done()?;
                let found = sb.grep_found(&pattern, path.as_deref(), &opts)?;
                grep_answer(&mut out, found.results, &opts);
                put_cut(&mut out, found.cut);
                if found.unreadable > 0 {
                    out.insert("unreadable".into(), json!(found.unreadable));
                }
                if found.binary > 0 {
                    out.insert("binary".into(), json!(found.binary));
                }
            }
            "exec" => {
                let command = f.str("command")?;
                let cwd = f.opt_str("cwd")?;
                let timeout_ms = f.opt_count("timeout_ms")?.map(|ms| ms as u64);
                f.done()?;
                // The endpoint speaks for an agent: its cwd is a root-relative
                // name, never a host path, even one the executor would map.
                if let Some(c) = &cwd {
                    crate::relpath::RelPath::parse(c)?;
                }
                let Some(executor) = &self.executor else {
                    return Err(Error::new(
                        ErrorCode::Denied,
                        "this session has no shell executor",
                    ));
                };
                let r = executor.exec(
                    &command,
                    crate::ExecOptions {
                        cwd,
                        timeout_ms,
                        abort: self.abort.clone(),
                        ..Default::default()
                    },
                )?;
                out.insert("exit_code".into(), json!(r.exit_code));
                put_stream(&mut out, "stdout", r.stdout);
                put_stream(&mut out, "stderr", r.stderr);
                out.insert("truncated".into(), json!(r.truncated));
                out.insert("timed_out".into(), json!(r.timed_out));
                out.insert("aborted".into(), json!(r.aborted));
                out.insert("limit".into(), json!(r.limit.map(|l| l.as_str())));
                out.insert(
                    "confined".into(),
                    serde_json::to_value(&r.confined).unwrap_or(Value::Null),
                );
                out.insert("env_names_digest".into(), json!(r.env_names_digest));
                out.insert(
                    "protected_changes".into(),
                    serde_json::to_value(&r.protected_changes).unwrap_or(Value::Null),
                );
                out.insert("duration_ms".into(), json!(r.duration.as_millis() as u64));
            }
            other => {
                return Err(bad(format!(
                    "unknown op `{}` (ops: {})",
                    shown_key(other),
                    OPS.join(", ")
                )))
            }
        }
        Ok(out)
    }
}

impl ToolSession {
    /// The `fetch` op: its own answer shape, since a refusal carries the
    /// matching rule and the hops taken.
    fn fetch(&self, f: Fields) -> Value {
        let (url, mut opts) = match fetch_request(f) {
            Ok(r) => r,
            Err(e) => return error_answer(&e),
        };
        if self.fetch_cancellable {
            opts.cancel = Some(crate::fetch::CancelFlag::from_arc(Arc::clone(&self.cancel)));
        }
        let Some(fetcher) = &self.fetcher else {
            return error_answer(&Error::new(
                ErrorCode::Denied,
                "this session has no fetcher",
            ));
        };
        fetch_answer(fetcher, &url, &opts).0
    }
}

/// Whether the endpoint skips `line` without an answer: it is blank (ASCII
/// whitespace only, a `\r` before the line feed included) or a comment
/// (its first non-blank byte is `#`).
pub fn is_skipped(line: &[u8]) -> bool {
    matches!(line.trim_ascii_start().first(), None | Some(b'#'))
}

/// The request's `id`: `None` when it has none; `E_REQUEST` when it is
/// neither a string nor a number, or appears twice (then it cannot be
/// echoed, since no one value is the id).
fn request_id(obj: &StrictObject) -> Result<Option<Value>, Error> {
    if obj.duplicate.as_deref() == Some("id") {
        return Err(bad("not a valid request object: duplicated key `id`"));
    }
    match obj.fields.iter().find(|(k, _)| k == "id") {
        None => Ok(None),
        // Past 64 bits an integer is read as a float, and would come back
        // as another number (`100000000000000000000001` as `1e+23`): a
        // client matching answers by id would never find its own.
        Some((_, Value::Number(n)))
            if n.is_f64()
                && n.as_f64()
                    .is_some_and(|f| f.abs() >= 9_223_372_036_854_775_808.0) =>
        {
            Err(bad(
                "`id` is a number past what a 64-bit integer holds, which would not come \
                 back as sent: give a string, or an integer of at most 64 bits",
            ))
        }
        Some((_, v @ (Value::String(_) | Value::Number(_)))) => Ok(Some(v.clone())),
        Some(_) => Err(bad("`id` must be a string or a number")),
    }
}

/// The `id` of a line that is not UTF-8, when it can still be read exactly:
/// invalid bytes become U+FFFD in the lossy text but never change its JSON
/// structure (every structural byte is ASCII), so an id that is a number,
/// or a string without U+FFFD, is the one the caller sent.
fn id_of_lossy(line: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(line);
    let obj = serde_json::from_str::<StrictObject>(&text).ok()?;
    match request_id(&obj).ok()?? {
        Value::String(s) if s.contains('\u{fffd}') => None,
        id => Some(id),
    }
}

/// `answer` with `"id": id` added when there is one.
fn with_id(mut answer: Value, id: Option<Value>) -> Value {
    if let (Some(id), Value::Object(m)) = (id, &mut answer) {
        m.insert("id".into(), id);
    }
    answer
}

/// Answers one `fetch` request given as JSON text: the keys of the tool's
/// `fetch` op without `op` (`url`, `method?`, `headers?`, `body?` or
/// `body_base64?`, `timeout_ms?`, `max_bytes?`; duplicate or unknown keys
/// are `E_REQUEST`), answered in the op's shape (`ok`, and `status`,
/// `headers`, `body` or `body_base64`, `truncated`, `hops`; or `error` with
/// `rule` and `hops`), with the refusal's error when it is one. For hosts
/// that speak JSON, such as the C ABI.
pub fn fetch_json(fetcher: &crate::fetch::Fetcher, request: &str) -> (Value, Option<Error>) {
    fetch_json_cancellable(fetcher, request, None)
}

/// [`fetch_json`], ended (`E_ABORTED`, its connection closed) once
/// `cancel` is set from another thread ([`crate::fetch::CancelFlag`]).
pub fn fetch_json_cancellable(
    fetcher: &crate::fetch::Fetcher,
    request: &str,
    cancel: Option<crate::fetch::CancelFlag>,
) -> (Value, Option<Error>) {
    let parsed = serde_json::from_str::<StrictObject>(request)
        .map_err(|e| bad(format!("not a valid fetch request: {e}")))
        .and_then(StrictObject::into_fields)
        .and_then(|map| {
            fetch_request(Fields {
                op: "fetch".to_owned(),
                map,
                read: Rc::default(),
            })
        });
    match parsed {
        Ok((url, mut opts)) => {
            opts.cancel = cancel;
            fetch_answer(fetcher, &url, &opts)
        }
        Err(e) => {
            // Refused before the fetcher saw it: reported as it reports
            // its own refusals, by the origin of a `url` it could read.
            let value = serde_json::from_str::<Value>(request).ok();
            let url = value
                .as_ref()
                .and_then(|v| v.get("url"))
                .and_then(Value::as_str);
            fetcher.audit_refusal(url, e.code());
            (error_answer(&e), Some(e))
        }
    }
}

/// The fetch op's answer, and the refusal's error when it is one.
fn fetch_answer(
    fetcher: &crate::fetch::Fetcher,
    url: &str,
    opts: &crate::fetch::FetchOptions,
) -> (Value, Option<Error>) {
    match fetcher.fetch(url, opts) {
        Ok(r) => {
            let mut out = Map::new();
            out.insert("ok".into(), Value::Bool(true));
            out.insert("status".into(), json!(r.status));
            let mut headers = Map::new();
            for (k, v) in r.headers {
                match headers.get_mut(&k) {
                    Some(Value::String(prev)) => {
                        prev.push_str(", ");
                        prev.push_str(&v);
                    }
                    _ => {
                        headers.insert(k, Value::String(v));
                    }
                }
            }
            out.insert("headers".into(), Value::Object(headers));
            put_stream(&mut out, "body", r.body);
            out.insert("truncated".into(), json!(r.truncated));
            out.insert("hops".into(), hops_json(&r.hops));
            (Value::Object(out), None)
        }
        Err(e) => {
            let error = Error::from(e.clone());
            let mut answer = error_answer(&error);
            if let Some(err) = answer.get_mut("error").and_then(Value::as_object_mut) {
                if let Some(rule) = e.rule() {
                    err.insert("rule".into(), json!(rule));
                }
                err.insert("hops".into(), hops_json(e.hops()));
            }
            (answer, Some(error))
        }
    }
}

/// The strict keys of a `fetch` request: `url`, `method?`, `headers?` (an
/// object of strings), `body?` or `body_base64?`, `timeout_ms?`,
/// `max_bytes?`.
fn fetch_request(mut f: Fields) -> Result<(String, crate::fetch::FetchOptions), Error> {
    let url = f.str("url")?;
    let method = f.opt_str("method")?;
    let headers = match f.take("headers") {
        None => Vec::new(),
        Some(Value::Object(m)) => {
            // HTTP compares header names without regard to ASCII case, so
            // `A` and `a` are one header given twice: which value a server
            // (or a proxy on the way) takes is its own choice, not the
            // caller's.
            let mut seen = std::collections::HashMap::with_capacity(m.len());
            let mut headers = Vec::with_capacity(m.len());
            for (k, v) in m {
                let Value::String(s) = v else {
                    return Err(bad(format!(
                        "the header `{}` must be a string",
                        shown_key(&k)
                    )));
                };
                if let Some(first) = seen.insert(k.to_ascii_lowercase(), k.clone()) {
                    return Err(bad(format!(
                        "`headers` gives the header `{}` twice (as `{}` and `{}`): header names \
                         are compared without regard to case",
                        shown_key(&k),
                        shown_key(&first),
                        shown_key(&k)
                    )));
                }
                headers.push((k, s));
            }
            headers
        }
        Some(_) => return Err(bad("`headers` must be an object of strings")),
    };
    let text = f.opt_str("body")?;
    let b64 = f.opt_str("body_base64")?;
    let timeout = f.opt_count("timeout_ms")?;
    let max_bytes = f.opt_count("max_bytes")?;
    f.done()?;
    let body = match (text, b64) {
        (None, None) => None,
        (Some(t), None) => Some(t.into_bytes()),
        (None, Some(b)) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| bad(format!("`body_base64` is not valid base64: {e}")))?,
        ),
        (Some(_), Some(_)) => {
            return Err(bad("`fetch` takes at most one of `body` and `body_base64`"))
        }
    };
    if timeout == Some(0) {
        return Err(bad("`timeout_ms` must be at least 1"));
    }
    let mut opts = crate::fetch::FetchOptions::new();
    opts.method = method;
    opts.headers = headers;
    opts.body = body;
    opts.timeout = timeout.map(|ms| std::time::Duration::from_millis(ms as u64));
    opts.max_bytes = max_bytes.map(|n| n as u64);
    Ok((url, opts))
}

fn hops_json(hops: &[crate::fetch::Hop]) -> Value {
    Value::Array(
        hops.iter()
            .map(|h| {
                json!({
                    "url": h.url,
                    "method": h.method,
                    "addresses": h.addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                    "status": h.status,
                    "allowed": h.allowed,
                    "reason": h.reason,
                    "rule": h.rule,
                })
            })
            .collect(),
    )
}

/// The grep op's answer fields: `matches` (with `before`/`after` when
/// context was asked for, `line_truncated: true` on a line not answered
/// whole, `text_start` where a long line's text starts when its first
/// match ends past byte 1000, `before_truncated`/`after_truncated` the
/// indices of context lines cut at 1000 bytes), `files` or `counts` by
/// mode.
fn grep_answer(
    out: &mut Map<String, Value>,
    found: crate::search::GrepOutput,
    opts: &crate::search::GrepOptions,
) {
    use crate::search::GrepOutput;
    match found {
        GrepOutput::Lines(matches) => {
            let matches = matches
                .into_iter()
                .map(|m| {
                    let mut o = Map::new();
                    o.insert("path".into(), json!(m.path));
                    o.insert("line".into(), json!(m.line));
                    o.insert("text".into(), json!(m.text));
                    // Only when cut, so an answer of whole lines reads as before.
                    if m.line_truncated() {
                        o.insert("line_truncated".into(), json!(true));
                    }
                    if m.text_start > 0 {
                        o.insert("text_start".into(), json!(m.text_start));
                    }
                    if opts.before > 0 {
                        o.insert("before".into(), json!(m.before));
                    }
                    if opts.after > 0 {
                        o.insert("after".into(), json!(m.after));
                    }
                    // Likewise only when some context line was cut.
                    if !m.before_cut.is_empty() {
                        o.insert("before_truncated".into(), json!(m.before_cut));
                    }
                    if !m.after_cut.is_empty() {
                        o.insert("after_truncated".into(), json!(m.after_cut));
                    }
                    Value::Object(o)
                })
                .collect();
            out.insert("matches".into(), Value::Array(matches));
        }
        GrepOutput::Files(files) => {
            out.insert("files".into(), json!(files));
        }
        GrepOutput::Counts(counts) => {
            let counts = counts
                .into_iter()
                .map(|(path, count)| json!({"path": path, "count": count}))
                .collect();
            out.insert("counts".into(), Value::Array(counts));
        }
    }
}

/// A search's `truncated` (whether the answer was cut) and `limit` (the
/// cap that cut it, as [`crate::search::Cut::as_str`] names it; `null`
/// when whole),
/// as `exec` answers its own.
fn put_cut(out: &mut Map<String, Value>, cut: Option<crate::search::Cut>) {
    out.insert("truncated".into(), json!(cut.is_some()));
    out.insert("limit".into(), json!(cut.map(|c| c.as_str())));
}

/// `key` as text, or `key_base64` when the bytes are not UTF-8.
fn put_stream(out: &mut Map<String, Value>, key: &str, bytes: Vec<u8>) {
    match String::from_utf8(bytes) {
        Ok(text) => out.insert(key.into(), Value::String(text)),
        Err(e) => out.insert(
            format!("{key}_base64"),
            Value::String(base64::engine::general_purpose::STANDARD.encode(e.into_bytes())),
        ),
    };
}

fn put_content(out: &mut Map<String, Value>, bytes: Vec<u8>) {
    match String::from_utf8(bytes) {
        Ok(text) => out.insert("content".into(), Value::String(text)),
        Err(e) => out.insert(
            "content_base64".into(),
            Value::String(base64::engine::general_purpose::STANDARD.encode(e.into_bytes())),
        ),
    };
}

/// The `{"ok":false,"error":{…}}` answer for an error.
pub fn error_answer(e: &Error) -> Value {
    let mut err = Map::new();
    err.insert("code".into(), json!(e.code().as_str()));
    err.insert("message".into(), json!(e.message()));
    if let Some(p) = e.path() {
        err.insert("path".into(), json!(p));
    }
    if let Some(p) = e.pattern() {
        err.insert("pattern".into(), json!(p));
    }
    if let Some(k) = e.key() {
        err.insert("key".into(), json!(k));
    }
    json!({"ok": false, "error": err})
}

/// Appends `value` as compact JSON: the bytes `serde_json::to_writer`
/// writes for it, with every string (keys included) escaped by
/// [`write_json_str`].
///
/// serde_json escapes a string one byte at a time. A file's text is most of
/// an answer, and that loop was a third of the CPU of a 4 KiB `read`; its
/// cost also moved by a quarter from one build to the next with where the
/// loop happened to be placed in the binary (docs/BENCHMARKS.md). Numbers
/// are still written by serde_json.
pub fn write_json(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Writing a number into a vector cannot fail.
        Value::Number(n) => {
            let _ = serde_json::to_writer(&mut *out, n);
        }
        Value::String(s) => write_json_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_str(out, key);
                out.push(b':');
                write_json(out, item);
            }
            out.push(b'}');
        }
    }
}

/// Appends `text` as a JSON string, quotes included, escaped as serde_json
/// escapes it (`\"`, `\\`, the short escapes, `\u00XX` for other control
/// characters, nothing else), sixteen or more bytes at a step.
pub fn write_json_str(out: &mut Vec<u8>, text: &str) {
    if text.len() <= ESCAPE_PIECE {
        json_escape_simd::escape_into(text, out);
        return;
    }
    // The escaper reserves room for the worst case, six bytes out for each
    // byte in: a long text is escaped a piece at a time so that a 16 MiB
    // read does not ask for 96 MiB more.
    out.reserve(text.len() + 2);
    out.push(b'"');
    let mut piece = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(ESCAPE_PIECE);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        piece.clear();
        json_escape_simd::escape_into(head, &mut piece);
        // Without the quotes the escaper puts around each piece.
        out.extend_from_slice(&piece[1..piece.len() - 1]);
        rest = tail;
    }
    out.push(b'"');
}

/// The longest text [`write_json_str`] escapes in one step.
const ESCAPE_PIECE: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Any JSON value, strings drawn from every character (controls,
    /// quotes, backslashes, non-ASCII, line separators) at any length.
    fn any_value() -> impl Strategy<Value = Value> {
        let text = prop_oneof![
            any::<String>(),
            proptest::collection::vec(
                prop_oneof![
                    Just('"'),
                    Just('\\'),
                    Just('\u{7f}'),
                    Just('\u{2028}'),
                    (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap()),
                    any::<char>(),
                    Just('a'),
                ],
                0..200,
            )
            .prop_map(|cs| cs.into_iter().collect()),
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            text.clone().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::vec((text.clone(), inner), 0..8)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn written_json_is_what_serde_json_writes(value in any_value()) {
            let mut ours = b"kept".to_vec();
            write_json(&mut ours, &value);
            let theirs = serde_json::to_vec(&value).unwrap();
            prop_assert_eq!(String::from_utf8(ours[4..].to_vec()).unwrap(),
                String::from_utf8(theirs).unwrap());
        }
    }

    /// JSON text whose objects may give a key twice, at any depth, in
    /// spellings that read the same (`"a"`, `"\u0061"`) or not (`"A"`).
    fn text_with_keys() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            Just("\"a\""),
            Just("\"\\u0061\""),
            Just("\"A\""),
            Just("\"b\""),
            Just("\"ab\""),
        ];
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("1".to_owned()),
            Just("\"x\\\"y\"".to_owned()),
        ];
        let tree = leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                proptest::collection::vec((key.clone(), inner), 0..20).prop_map(|kv| {
                    let kv: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                    format!("{{{}}}", kv.join(","))
                }),
            ]
        });
        proptest::collection::vec(("[a-z]{1,3}", tree), 0..6).prop_map(|kv| {
            let kv: Vec<String> = kv
                .into_iter()
                .map(|(k, v)| format!("\"{k}\":{v}"))
                .collect();
            format!("{{{}}}", kv.join(","))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The cheap scan answers what the full one does.
        #[test]
        fn the_cheap_scan_finds_what_the_full_scan_finds(text in text_with_keys()) {
            prop_assert_eq!(gives_a_key_twice(&text), duplicated_key(&text).is_some(), "{}", text);
        }
    }

    #[test]
    fn dupkey26_a_key_given_twice_is_named_as_names_are_shown() {
        let s = super::ToolSession::new(
            crate::Sandbox::builder().build().unwrap(),
            serde_json::json!({}),
        );
        let line = r#"{"op":"stat","a\nb\u001b[2J":1,"a\nb\u001b[2J":2,"id":7}"#;
        let a = s.handle_line(line);
        assert_eq!(a["error"]["code"], "E_REQUEST", "{a}");
        assert_eq!(
            a["error"]["message"],
            "not a valid request object: duplicated key `a\\u{a}b\\u{1b}[2J`",
            "{a}"
        );
        let a = s.handle_line(r#"{"op":"stat","path":"x","path":"y"}"#);
        assert_eq!(
            a["error"]["message"], "not a valid request object: duplicated key `path`",
            "{a}"
        );
    }

    #[test]
    fn the_cheap_scan_at_its_edges() {
        assert!(!gives_a_key_twice(r#"{"a":1,"b":[{"a":2},{"a":3}]}"#));
        assert!(gives_a_key_twice(r#"{"a":1,"b":[{"a":2,"a":3}]}"#));
        assert!(gives_a_key_twice(r#"{"p\u0061th":1,"path":2}"#));
        assert!(!gives_a_key_twice(r#"{"path":1,"Path":2}"#));
        // Not JSON, or JSON followed by more: not answered here.
        assert!(!gives_a_key_twice(r#"{"a":1,"a":2"#));
        assert!(!gives_a_key_twice(r#"{"a":1,"a":2} x"#));
        // Past the few keys compared with each other: by hash.
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        assert!(!gives_a_key_twice(&format!("{{{}}}", many.join(","))));
        for at in [1, 15, 16, 17, 39] {
            let dup = format!("{{{},\"k{at}\":0}}", many.join(","));
            assert!(gives_a_key_twice(&dup), "k{at}");
            let first = format!("{{\"k{at}\":0,{}}}", many.join(","));
            assert!(gives_a_key_twice(&first), "k{at} first");
        }
        // A deep message is refused by the parser's depth bound, not a
        // stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(!gives_a_key_twice(&deep));
        // A million distinct keys stay cheap.
        let huge: Vec<String> = (0..1_000_000).map(|i| format!("\"{i}\":0")).collect();
        assert!(!gives_a_key_twice(&format!("{{{}}}", huge.join(","))));
    }

    #[test]
    fn every_byte_class_is_escaped_as_serde_json_escapes_it() {
        // Each control character, the two escaped printables and their
        // neighbours, at every offset within and across vector widths.
        let specials: String = (0u8..0x80)
            .map(char::from)
            .chain(['\u{e9}', '\u{2028}', '\u{1f600}'])
            .collect();
        for pad in 0..70 {
            let text = format!("{}{specials}{}", "x".repeat(pad), "y".repeat(pad));
            let mut ours = Vec::new();
            write_json_str(&mut ours, &text);
            assert_eq!(ours, serde_json::to_vec(&text).unwrap(), "pad {pad}");
        }
    }

    #[test]
    fn a_long_text_is_escaped_in_pieces_as_a_whole() {
        // Specials and characters of two to four bytes on every side of
        // each piece's end, so that cuts fall inside characters and right
        // before escapes.
        let unit: String = [
            'a',
            '\n',
            '"',
            '\\',
            '\u{1}',
            '\u{e9}',
            '\u{2028}',
            '\u{1f600}',
        ]
        .into_iter()
        .collect();
        for shift in 0..12 {
            let mut text = "x".repeat(ESCAPE_PIECE - 8 + shift);
            while text.len() < 3 * ESCAPE_PIECE + 100 {
                text.push_str(&unit);
            }
            let mut ours = b"kept".to_vec();
            write_json_str(&mut ours, &text);
            assert!(
                ours[4..] == serde_json::to_vec(&text).unwrap()[..],
                "shift {shift}"
            );
        }
    }
}
