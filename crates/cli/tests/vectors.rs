//! Runs the shared vectors in `tests/vectors/*.json` (format: that
//! directory's README.md) twice per case: in-process through the facade's
//! JSON endpoint (`ToolSession::handle_line`) and through the `sandgate tool`
//! binary, each on a freshly built tree. Every failing case is reported by
//! file and name, then the test fails once.
//!
//! `SANDGATE_VECTOR=<substring>` runs only the cases whose name contains it;
//! `SANDGATE_VECTOR_TIMES=1` prints the time each case took.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{Map, Value};

/// The fewest cases the vector files must hold in all.
const MIN_CASES: usize = 100;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

/// One case, with the file it came from.
struct Case {
    file: String,
    name: String,
    body: Map<String, Value>,
}

impl Case {
    fn label(&self) -> String {
        format!("{}: {}", self.file, self.name)
    }
}

/// Every case of every vector file, in file then case order; a file that is
/// not a `{"cases": [...]}` object panics with its name.
fn load_cases() -> Vec<Case> {
    let mut files: Vec<PathBuf> = fs::read_dir(vectors_dir())
        .expect("tests/vectors exists")
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no vector files in {:?}", vectors_dir());
    let mut out = Vec::new();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let Value::Object(doc) = doc else {
            panic!("{file}: not a JSON object")
        };
        for key in doc.keys() {
            assert!(
                ["cases", "description"].contains(&key.as_str()),
                "{file}: unknown top-level key `{key}`"
            );
        }
        let Some(Value::Array(cases)) = doc.get("cases") else {
            panic!("{file}: needs a `cases` array")
        };
        for (i, case) in cases.iter().enumerate() {
            let Value::Object(body) = case else {
                panic!("{file}: case #{i} is not an object")
            };
            let name = body
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{file}: case #{i} has no string `name`"))
                .to_owned();
            out.push(Case {
                file: file.clone(),
                name,
                body: body.clone(),
            });
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Format validation

fn check_keys(obj: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), String> {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(format!("{what}: unknown key `{k}`"));
        }
    }
    Ok(())
}

fn as_obj<'v>(v: &'v Value, what: &str) -> Result<&'v Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what}: must be an object"))
}

fn as_array<'v>(v: Option<&'v Value>, what: &str) -> Result<&'v [Value], String> {
    match v {
        None => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(format!("{what}: must be an array")),
    }
}

/// A tree path: relative, no `..`, no empty or `.` components.
fn check_tree_path(p: &str, what: &str) -> Result<(), String> {
    let ok = !p.is_empty()
        && Path::new(p)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        && !p.split('/').any(|c| c.is_empty() || c == ".");
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: `{p}` is not a plain relative path"))
    }
}

const TREE_KINDS: &[&str] = &["file", "file_base64", "dir", "symlink", "hardlink"];

fn check_entry(e: &Value, after: bool, what: &str) -> Result<(), String> {
    let e = as_obj(e, what)?;
    let path = e
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what}: needs a string `path`"))?;
    check_tree_path(path, what)?;
    let mut kinds: Vec<&str> = TREE_KINDS.to_vec();
    if after {
        kinds.push("absent");
    }
    let present: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|k| e.contains_key(*k))
        .collect();
    if present.len() != 1 {
        return Err(format!(
            "{what} `{path}`: needs exactly one of {kinds:?}, found {present:?}"
        ));
    }
    let kind = present[0];
    let mut allowed = vec!["path", kind];
    match kind {
        "file" | "symlink" | "file_base64" | "hardlink" => {
            if !e[kind].is_string() {
                return Err(format!("{what} `{path}`: `{kind}` must be a string"));
            }
        }
        "dir" | "absent" => {
            if e[kind] != Value::Bool(true) {
                return Err(format!("{what} `{path}`: `{kind}` must be true"));
            }
        }
        _ => unreachable!(),
    }
    if kind == "hardlink" {
        check_tree_path(e[kind].as_str().unwrap(), what)?;
    }
    if kind == "file_base64" {
        b64decode(e[kind].as_str().unwrap()).map_err(|m| format!("{what} `{path}`: {m}"))?;
    }
    if matches!(kind, "file" | "file_base64" | "dir") {
        allowed.push("mode");
        if let Some(m) = e.get("mode") {
            let ok = m
                .as_str()
                .is_some_and(|s| s.len() == 4 && u32::from_str_radix(s, 8).is_ok());
            if !ok {
                return Err(format!(
                    "{what} `{path}`: `mode` is four octal digits as a string (\"0644\")"
                ));
            }
        }
    }
    if after && kind == "dir" {
        allowed.push("entries");
        if let Some(v) = e.get("entries") {
            let ok = v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
            if !ok {
                return Err(format!("{what} `{path}`: `entries` is an array of names"));
            }
        }
    }
    check_keys(e, &allowed, &format!("{what} `{path}`"))
}

fn check_expect(x: &Value, what: &str) -> Result<(), String> {
    let x = as_obj(x, what)?;
    if x.contains_key("skipped") {
        check_keys(x, &["skipped"], what)?;
        return match x["skipped"] {
            Value::Bool(true) => Ok(()),
            _ => Err(format!("{what}: `skipped` must be true")),
        };
    }
    match x.get("ok") {
        Some(Value::Bool(true)) => Ok(()),
        Some(Value::Bool(false)) => {
            check_keys(x, &["ok", "code", "path", "pattern", "key", "id"], what)?;
            match x.get("code").and_then(Value::as_str) {
                Some(c) if c.starts_with("E_") => Ok(()),
                _ => Err(format!("{what}: a refusal needs `code` (\"E_…\")")),
            }
        }
        _ => Err(format!("{what}: needs `ok` (true or false)")),
    }
}

/// Checks the shape of one case; the runner relies on it.
fn validate(case: &Case) -> Result<(), String> {
    let b = &case.body;
    check_keys(
        b,
        &[
            "name",
            "description",
            "tree",
            "policy",
            "steps",
            "tree_after",
            "wire",
            "policy_error",
        ],
        "case",
    )?;
    let snake = !case.name.is_empty()
        && case.name.starts_with(|c: char| c.is_ascii_lowercase())
        && case
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !snake {
        return Err("`name` must be snake_case".into());
    }
    if !b.get("description").is_some_and(Value::is_string) {
        return Err("needs a string `description`".into());
    }
    if !b.get("policy").is_some_and(Value::is_string) {
        return Err("needs a string `policy` (TOML text)".into());
    }
    if let Some(w) = b.get("wire") {
        if !w.is_boolean() {
            return Err("`wire` must be a boolean".into());
        }
    }
    for (i, e) in as_array(b.get("tree"), "tree")?.iter().enumerate() {
        check_entry(e, false, &format!("tree[{i}]"))?;
    }
    for (i, e) in as_array(b.get("tree_after"), "tree_after")?
        .iter()
        .enumerate()
    {
        check_entry(e, true, &format!("tree_after[{i}]"))?;
    }
    let steps = as_array(b.get("steps"), "steps")?;
    if let Some(pe) = b.get("policy_error") {
        let pe = as_obj(pe, "policy_error")?;
        check_keys(pe, &["code", "key"], "policy_error")?;
        if pe.get("code").and_then(Value::as_str) != Some("E_POLICY") {
            return Err("policy_error: `code` must be \"E_POLICY\"".into());
        }
        if !steps.is_empty() {
            return Err("a case with `policy_error` has no steps".into());
        }
        return Ok(());
    }
    if steps.is_empty() {
        return Err("needs at least one step".into());
    }
    for (i, s) in steps.iter().enumerate() {
        let what = format!("steps[{i}]");
        let s = as_obj(s, &what)?;
        check_keys(
            s,
            &["request", "line", "line_base64", "wire", "expect"],
            &what,
        )?;
        let line = match (s.get("request"), s.get("line"), s.get("line_base64")) {
            (Some(Value::Object(_)), None, None) => None,
            (None, Some(Value::String(l)), None) => Some(l.as_bytes().to_vec()),
            (None, None, Some(Value::String(b))) => {
                Some(b64decode(b).map_err(|m| format!("{what}: `line_base64`: {m}"))?)
            }
            _ => {
                return Err(format!(
                    "{what}: needs exactly one of `request` (object), `line` (string) and `line_base64` (string)"
                ))
            }
        };
        if let Some(l) = &line {
            if l.contains(&b'\n') {
                return Err(format!("{what}: a line may not hold a line feed"));
            }
            let wire = s.get("wire") == Some(&Value::Bool(true))
                || b.get("wire") == Some(&Value::Bool(true));
            if !wire {
                return Err(format!("{what}: a line step must be marked `wire`"));
            }
        }
        if let Some(w) = s.get("wire") {
            if !w.is_boolean() {
                return Err(format!("{what}: `wire` must be a boolean"));
            }
        }
        let expect = s
            .get("expect")
            .ok_or_else(|| format!("{what}: needs `expect`"))?;
        check_expect(expect, &format!("{what}.expect"))?;
        if expect.get("skipped").is_some() && line.is_none() {
            return Err(format!(
                "{what}: only a raw line can be skipped without an answer"
            ));
        }
        // A binding skips a wire step of an ordinary case: it must be a
        // refusal that changes nothing, so the later steps stay valid.
        let step_wire = s.get("wire") == Some(&Value::Bool(true));
        if step_wire && b.get("wire") != Some(&Value::Bool(true)) && expect["code"] != "E_REQUEST" {
            return Err(format!(
                "{what}: a wire step in an ordinary case must expect E_REQUEST"
            ));
        }
        let text = match s.get("request") {
            Some(r) => r.to_string(),
            None => String::from_utf8_lossy(line.as_deref().unwrap_or_default()).into_owned(),
        };
        if text.contains("{case_dir}") || expect.to_string().contains("{case_dir}") {
            return Err(format!(
                "{what}: `{{case_dir}}` is for tree symlink targets and the policy only"
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Trees

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding, strictly.
fn b64decode(s: &str) -> Result<Vec<u8>, String> {
    let bytes = s.as_bytes();
    if bytes.len() % 4 != 0 {
        return Err(format!("base64 `{s}`: length is not a multiple of 4"));
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (ci, chunk) in bytes.chunks(4).enumerate() {
        let last = ci + 1 == bytes.len() / 4;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err(format!("base64 `{s}`: bad padding"));
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            let v = B64
                .iter()
                .position(|&x| x == c)
                .ok_or_else(|| format!("base64 `{s}`: bad character"))?;
            n = n << 6 | v as u32;
        }
        n <<= 6 * pad as u32;
        let three = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&three[..3 - pad]);
    }
    Ok(out)
}

fn expand(text: &str, case_dir: &Path) -> String {
    text.replace("{case_dir}", &case_dir.to_string_lossy())
}

fn set_mode(path: &Path, e: &Value) -> Result<(), String> {
    if let Some(m) = e.get("mode").and_then(Value::as_str) {
        let mode = u32::from_str_radix(m, 8).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|err| format!("chmod {}: {err}", path.display()))?;
    }
    Ok(())
}

/// Builds `tree` and writes `policy.toml` in `dir`.
fn build(case: &Case, dir: &Path) -> Result<(), String> {
    for e in as_array(case.body.get("tree"), "tree")? {
        let rel = e["path"].as_str().unwrap();
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|err| format!("tree `{rel}`: {err}"))?;
        }
        let made = if let Some(text) = e.get("file").and_then(Value::as_str) {
            fs::write(&path, text)
        } else if let Some(b) = e.get("file_base64").and_then(Value::as_str) {
            fs::write(&path, b64decode(b)?)
        } else if e.get("dir").is_some() {
            fs::create_dir_all(&path)
        } else if let Some(target) = e.get("symlink").and_then(Value::as_str) {
            symlink(expand(target, dir), &path)
        } else if let Some(target) = e.get("hardlink").and_then(Value::as_str) {
            fs::hard_link(dir.join(target), &path)
        } else {
            unreachable!("validated")
        };
        made.map_err(|err| format!("tree `{rel}`: {err}"))?;
        set_mode(&path, e)?;
    }
    let policy = expand(case.body["policy"].as_str().unwrap(), dir);
    fs::write(dir.join("policy.toml"), policy).map_err(|e| format!("policy.toml: {e}"))
}

/// Checks `tree_after`; returns every difference.
fn check_tree_after(case: &Case, dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in as_array(case.body.get("tree_after"), "tree_after").unwrap_or(&[]) {
        let rel = e["path"].as_str().unwrap();
        let path = dir.join(rel);
        let meta = fs::symlink_metadata(&path);
        let mut fail = |m: String| out.push(format!("tree_after `{rel}`: {m}"));
        if e.get("absent").is_some() {
            if let Ok(m) = meta {
                fail(format!("must not exist, found {:?}", m.file_type()));
            }
            continue;
        }
        let meta = match meta {
            Ok(m) => m,
            Err(err) => {
                fail(format!("missing ({err})"));
                continue;
            }
        };
        let want_bytes = if let Some(t) = e.get("file").and_then(Value::as_str) {
            Some(t.as_bytes().to_vec())
        } else {
            e.get("file_base64")
                .and_then(Value::as_str)
                .map(|b| b64decode(b).unwrap())
        };
        if let Some(want) = want_bytes {
            if !meta.file_type().is_file() {
                fail(format!(
                    "must be a regular file, found {:?}",
                    meta.file_type()
                ));
            } else {
                let got = fs::read(&path).unwrap_or_default();
                if got != want {
                    fail(format!(
                        "content {:?}, want {:?}",
                        String::from_utf8_lossy(&got),
                        String::from_utf8_lossy(&want)
                    ));
                }
            }
        } else if e.get("dir").is_some() {
            if !meta.is_dir() {
                fail(format!("must be a directory, found {:?}", meta.file_type()));
            } else if let Some(Value::Array(want)) = e.get("entries") {
                let mut got: Vec<String> = fs::read_dir(&path)
                    .map(|rd| {
                        rd.filter_map(Result::ok)
                            .map(|d| d.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                got.sort();
                let mut want: Vec<String> = want
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect();
                want.sort();
                if got != want {
                    fail(format!("entries {got:?}, want {want:?}"));
                }
            }
        } else if let Some(target) = e.get("symlink").and_then(Value::as_str) {
            let want = expand(target, dir);
            match fs::read_link(&path) {
                Ok(t) if t == Path::new(&want) => {}
                Ok(t) => fail(format!("symlink to {t:?}, want {want:?}")),
                Err(_) => fail(format!("must be a symlink, found {:?}", meta.file_type())),
            }
        } else if let Some(other) = e.get("hardlink").and_then(Value::as_str) {
            match fs::symlink_metadata(dir.join(other)) {
                Ok(o) if o.ino() == meta.ino() && o.dev() == meta.dev() => {}
                _ => fail(format!("must be the same file as `{other}`")),
            }
        }
        if let Some(m) = e.get("mode").and_then(Value::as_str) {
            let want = u32::from_str_radix(m, 8).unwrap();
            if meta.mode() & 0o7777 != want {
                fail(format!("mode {:04o}, want {m}", meta.mode() & 0o7777));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Matching answers

/// `expected` against `actual`: objects as subsets (recursively), arrays by
/// length and in order, everything else by equality.
fn matches(expected: &Value, actual: &Value, at: &str, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                match a.get(k) {
                    Some(av) => matches(ev, av, &format!("{at}.{k}"), out),
                    None => out.push(format!("{at}.{k}: missing, want {ev}")),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                out.push(format!(
                    "{at}: {} elements, want {}: {}",
                    a.len(),
                    e.len(),
                    shorten(&actual.to_string())
                ));
                return;
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                matches(ev, av, &format!("{at}[{i}]"), out);
            }
        }
        _ => {
            if expected != actual {
                out.push(format!(
                    "{at}: {}, want {}",
                    shorten(&actual.to_string()),
                    shorten(&expected.to_string())
                ));
            }
        }
    }
}

/// Differences between one step's `expect` and the answer.
fn check_answer(expect: &Value, answer: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let want_ok = expect["ok"].as_bool().unwrap();
    if answer.get("ok") != Some(&Value::Bool(want_ok)) {
        return vec![format!("want ok={want_ok}, got {answer}")];
    }
    if want_ok {
        let mut fields = expect.as_object().unwrap().clone();
        fields.remove("ok");
        matches(&Value::Object(fields), answer, "answer", &mut out);
        if answer.get("error").is_some() {
            out.push(format!("an ok answer carries `error`: {answer}"));
        }
    } else {
        match (expect.get("id"), answer.get("id")) {
            (None, _) | (Some(Value::Null), None) => {}
            (Some(want), got) if got != Some(want) => out.push(format!(
                "id: {}, want {want}",
                got.map_or("none".to_owned(), Value::to_string)
            )),
            _ => {}
        }
        let error = &answer["error"];
        for key in ["code", "path", "pattern", "key"] {
            let got = error.get(key);
            match expect.get(key) {
                None => {}
                Some(Value::Null) if got.is_some() => {
                    out.push(format!("error.{key}: {}, want none", got.unwrap()));
                }
                Some(Value::Null) => {}
                Some(want) if got != Some(want) => {
                    out.push(format!(
                        "error.{key}: {}, want {want}",
                        got.unwrap_or(&Value::Null)
                    ));
                }
                Some(_) => {}
            }
        }
        if !error.get("message").is_some_and(Value::is_string) {
            out.push("error.message: missing".into());
        }
        if !out.is_empty() {
            out.push(format!("  (answer: {})", shorten(&answer.to_string())));
        }
    }
    out
}

/// The request lines of a case, in order, as bytes.
fn request_lines(case: &Case) -> Vec<Vec<u8>> {
    as_array(case.body.get("steps"), "steps")
        .unwrap()
        .iter()
        .map(|s| match (s.get("line"), s.get("line_base64")) {
            (Some(Value::String(l)), _) => l.as_bytes().to_vec(),
            (_, Some(Value::String(b))) => b64decode(b).unwrap(),
            _ => serde_json::to_vec(&s["request"]).unwrap(),
        })
        .collect()
}

/// Whether a step's line must be skipped without an answer.
fn is_skipped_step(step: &Value) -> bool {
    step["expect"]["skipped"] == Value::Bool(true)
}

/// Checks every answer against its step (`None`: the step got no answer);
/// also that no answer but a `summary` names the case directory (answers
/// speak root-relative names).
fn check_answers(case: &Case, dir: &Path, answers: &[Option<Value>]) -> Vec<String> {
    let steps = as_array(case.body.get("steps"), "steps").unwrap();
    let mut out = Vec::new();
    if answers.len() != steps.len() {
        out.push(format!(
            "{} answers for {} requests",
            answers.len(),
            steps.len()
        ));
    }
    let host = dir.to_string_lossy().into_owned();
    for (i, (step, answer)) in steps.iter().zip(answers).enumerate() {
        let answer = match (is_skipped_step(step), answer) {
            (true, None) => continue,
            (true, Some(a)) => {
                out.push(format!(
                    "step {i} {}: answered a line that must be skipped: {a}",
                    request_lines_one(step)
                ));
                continue;
            }
            (false, None) => {
                out.push(format!("step {i} {}: no answer", request_lines_one(step)));
                continue;
            }
            (false, Some(a)) => a,
        };
        let mut diffs = check_answer(&step["expect"], answer);
        let line_op = step
            .get("line")
            .and_then(Value::as_str)
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| v["op"].clone());
        let is_summary =
            step["request"]["op"] == "summary" || line_op.is_some_and(|op| op == "summary");
        if !is_summary && answer.to_string().contains(&host) {
            diffs.push(format!("the answer names a host path: {answer}"));
        }
        for d in diffs {
            out.push(format!("step {i} {}: {d}", request_lines_one(step)));
        }
    }
    out
}

fn request_lines_one(step: &Value) -> String {
    match (step.get("line"), step.get("line_base64")) {
        (Some(Value::String(l)), _) => shorten(l),
        (_, Some(Value::String(b))) => format!("(base64 {b})"),
        _ => shorten(&step["request"].to_string()),
    }
}

/// `s`, cut to a readable length for a failure report.
fn shorten(s: &str) -> String {
    const MAX: usize = 300;
    if s.chars().count() > MAX {
        format!(
            "{}… ({} bytes)",
            s.chars().take(MAX).collect::<String>(),
            s.len()
        )
    } else {
        s.to_owned()
    }
}

// ---------------------------------------------------------------------------
// The two ways to run a case

fn run_in_process(case: &Case) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    if let Err(e) = build(case, &dir) {
        return vec![format!("building the tree: {e}")];
    }
    let policy_path = dir.join("policy.toml");
    let loaded = sandgate::policy::Policy::load(&policy_path)
        .map_err(|e| (e.code().as_str().to_owned(), e.key().map(str::to_owned)))
        .and_then(|p| {
            sandgate::ToolSession::from_policy(&p)
                .map_err(|e| (e.code().as_str().to_owned(), e.key().map(str::to_owned)))
        });
    if let Some(pe) = case.body.get("policy_error") {
        return match loaded {
            Ok(_) => vec![format!("the policy loaded; want it refused with {pe}")],
            Err((code, key)) => {
                let mut out = Vec::new();
                if pe["code"] != code.as_str() {
                    out.push(format!("policy refused with {code}, want {}", pe["code"]));
                }
                if let Some(want) = pe.get("key") {
                    if key.as_deref() != want.as_str() {
                        out.push(format!("policy refused naming key {key:?}, want {want}"));
                    }
                }
                out
            }
        };
    }
    let session = match loaded {
        Ok(s) => s,
        Err((code, key)) => return vec![format!("the policy was refused: {code} {key:?}")],
    };
    let answers: Vec<Option<Value>> = request_lines(case)
        .iter()
        .map(|l| session.handle_input(l))
        .collect();
    drop(session);
    let mut out = check_answers(case, &dir, &answers);
    out.extend(check_tree_after(case, &dir));
    out
}

fn run_binary(case: &Case) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    if let Err(e) = build(case, &dir) {
        return vec![format!("building the tree: {e}")];
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .arg("tool")
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sandgate");
    let mut input = Vec::new();
    for l in request_lines(case) {
        input.extend_from_slice(&l);
        input.push(b'\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // The process may exit early (a refused policy): ignore EPIPE.
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("wait for sandgate");
    writer.join().unwrap();
    let status = output.status;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if let Some(pe) = case.body.get("policy_error") {
        let mut out = Vec::new();
        if status.code() != Some(2) {
            out.push(format!("`sandgate tool` exited {status}, want 2"));
        }
        for want in [&pe["code"], pe.get("key").unwrap_or(&Value::Null)] {
            if let Some(want) = want.as_str() {
                if !stderr.contains(want) {
                    out.push(format!("stderr does not name `{want}`: {stderr:?}"));
                }
            }
        }
        if !stdout.is_empty() {
            out.push(format!("a refused policy still answered: {stdout:?}"));
        }
        return out;
    }
    let mut out = Vec::new();
    if !status.success() {
        out.push(format!(
            "`sandgate tool` exited {status}: {}",
            shorten(&stderr)
        ));
    }
    let mut parsed = Vec::new();
    for (i, l) in stdout.lines().enumerate() {
        match serde_json::from_str::<Value>(l) {
            Ok(v) => parsed.push(v),
            Err(e) => out.push(format!("answer line {i} is not JSON ({e}): {l:?}")),
        }
    }
    // Answers come for the steps that are not skipped, in order; a surplus
    // answer lands on a skipped step (or after the last) and is reported.
    let steps = as_array(case.body.get("steps"), "steps").unwrap();
    let mut parsed = parsed.into_iter();
    let answers: Vec<Option<Value>> = steps
        .iter()
        .map(|s| {
            if is_skipped_step(s) {
                None
            } else {
                parsed.next()
            }
        })
        .collect();
    let surplus: Vec<Value> = parsed.collect();
    if !surplus.is_empty() {
        out.push(format!(
            "{} answer(s) more than the steps that must be answered: {}",
            surplus.len(),
            shorten(&Value::Array(surplus).to_string())
        ));
    }
    out.extend(check_answers(case, &dir, &answers));
    out.extend(check_tree_after(case, &dir));
    out
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic".to_owned())
}

// ---------------------------------------------------------------------------
// Tests

#[test]
fn vector_files_are_well_formed() {
    let cases = load_cases();
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for case in &cases {
        if let Err(e) = validate(case) {
            problems.push(format!("{}: {e}", case.label()));
        }
        if !names.insert(case.name.clone()) {
            problems.push(format!("{}: the name is used twice", case.label()));
        }
    }
    assert!(
        cases.len() >= MIN_CASES,
        "{} cases; the vectors hold at least {MIN_CASES}",
        cases.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn vectors_pass_in_process_and_through_the_binary() {
    let start = Instant::now();
    let filter = std::env::var("SANDGATE_VECTOR").ok();
    let cases: Vec<Case> = load_cases()
        .into_iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f)))
        .collect();
    let times = std::env::var_os("SANDGATE_VECTOR_TIMES").is_some();
    // Cases are independent (each has its own directories and process):
    // run them on a few threads, report in file order.
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Vec<String>>> = cases.iter().map(|_| Mutex::default()).collect();
    let workers = std::thread::available_parallelism().map_or(4, |n| n.get().min(8));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = cases.get(i) else { break };
                let case_start = Instant::now();
                let diffs = run_case(case);
                if times {
                    eprintln!("{:>8.1?}  {}", case_start.elapsed(), case.label());
                }
                *results[i].lock().unwrap() = diffs;
            });
        }
    });
    let failures: Vec<String> = results
        .into_iter()
        .flat_map(|m| m.into_inner().unwrap())
        .collect();
    eprintln!("vectors: {} cases in {:.2?}", cases.len(), start.elapsed());
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every difference of one case, run both ways, labelled.
fn run_case(case: &Case) -> Vec<String> {
    if let Err(e) = validate(case) {
        return vec![format!("{}: malformed: {e}", case.label())];
    }
    let in_process = std::panic::catch_unwind(|| run_in_process(case))
        .unwrap_or_else(|p| vec![format!("panicked: {}", panic_text(&p))]);
    let mut out = Vec::new();
    for (how, diffs) in [("in-process", in_process), ("binary", run_binary(case))] {
        for d in diffs {
            out.push(format!("{} [{how}] {d}", case.label()));
        }
    }
    out
}
