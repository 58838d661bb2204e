//! The JSON tool endpoint (docs/reference/json-endpoint.md): `ToolSession::handle_line` never
//! panics and always answers one JSON object on one line, `{"ok":true,…}`
//! or `{"ok":false,"error":{"code":"E_…","message":…}}` with a known code;
//! text that is not a JSON object, a duplicated key, an unknown key, a
//! missing required key or a value of the wrong JSON type is `E_REQUEST`;
//! a well-formed request of a plain op is never `E_REQUEST`; a request
//! without duplicates answers the same through `handle_value`; no message
//! holds the host path of the fixture outside the roots; nothing outside
//! the write root changes.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use sandgate::{ErrorCode, Sandbox, ToolSession};
use serde_json::Value;

use crate::bytes::Bytes;

/// Two sessions over one temporary tree: `rw` with a read root and a write
/// root, `ro` with the read root alone (so its answers never change).
struct Fixture {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    write_root: PathBuf,
    rw: ToolSession,
    ro: ToolSession,
}

fn fixture() -> &'static Mutex<Fixture> {
    static F: OnceLock<Mutex<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        let read = base.join("read");
        let write = base.join("write");
        std::fs::create_dir_all(read.join("dir")).expect("mkdir");
        std::fs::create_dir_all(&write).expect("mkdir");
        std::fs::write(read.join("a.txt"), b"hello\nworld\n").expect("write");
        std::fs::write(read.join("dir/b.txt"), b"b\n").expect("write");
        std::fs::write(read.join("bin"), b"\xff\xfe\0").expect("write");
        std::fs::write(base.join("outside.txt"), b"outside").expect("write");
        std::os::unix::fs::symlink("../outside.txt", read.join("escape")).expect("symlink");
        std::os::unix::fs::symlink("a.txt", read.join("inlink")).expect("symlink");
        let session = |with_write: bool| {
            let mut b = Sandbox::builder();
            b.read_root(&read)
                .max_read_bytes(1 << 16)
                .max_write_bytes(1 << 12)
                .deny_write_patterns(["protected/**", "*.lock"]);
            if with_write {
                b.read_root(&write).write_root(&write);
            }
            let summary = serde_json::json!({"fixture": true});
            ToolSession::new(b.build().expect("sandbox"), summary)
        };
        let (rw, ro) = (session(true), session(false));
        Mutex::new(Fixture {
            _tmp: tmp,
            base,
            write_root: write,
            rw,
            ro,
        })
    })
}

/// JSON type of a request value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    Str,
    Bool,
    Count,
}

/// The keys of each op (after `op`): name, type, required.
fn schema(op: &str) -> Option<&'static [(&'static str, Ty, bool)]> {
    use Ty::*;
    Some(match op {
        "summary" => &[],
        "read" => &[
            ("path", Str, true),
            ("offset", Count, false),
            ("limit", Count, false),
        ],
        "write" => &[
            ("path", Str, true),
            ("content", Str, false),
            ("content_base64", Str, false),
            ("overwrite", Bool, false),
        ],
        "edit" => &[
            ("path", Str, true),
            ("old", Str, true),
            ("new", Str, true),
            ("all", Bool, false),
        ],
        "list" | "stat" | "mkdir" | "delete" => &[("path", Str, true)],
        "rename" => &[("from", Str, true), ("to", Str, true)],
        "glob" => &[("pattern", Str, true), ("path", Str, false)],
        "grep" => &[
            ("pattern", Str, true),
            ("path", Str, false),
            ("max_results", Count, false),
            ("glob", Str, false),
            ("case_insensitive", Bool, false),
            ("before", Count, false),
            ("after", Count, false),
            ("mode", Str, false),
            ("gitignore", Bool, false),
        ],
        "exec" => &[
            ("command", Str, true),
            ("cwd", Str, false),
            ("timeout_ms", Count, false),
        ],
        _ => return None,
    })
}

const OPS: &[&str] = &[
    "summary", "read", "write", "edit", "list", "stat", "mkdir", "delete", "rename", "glob",
    "grep", "exec", "fetch", "READ", "", "nope",
];
const KEYS: &[&str] = &[
    "path",
    "offset",
    "limit",
    "content",
    "content_base64",
    "overwrite",
    "old",
    "new",
    "all",
    "from",
    "to",
    "pattern",
    "max_results",
    "glob",
    "case_insensitive",
    "before",
    "after",
    "mode",
    "gitignore",
    "command",
    "cwd",
    "timeout_ms",
    "url",
    "bogus",
    "Path",
];
const STRINGS: &[&str] = &[
    "a.txt",
    "dir",
    "dir/b.txt",
    "bin",
    "escape",
    "inlink",
    ".",
    "..",
    "../outside.txt",
    "/etc",
    "new.txt",
    "protected/x",
    "x.lock",
    "dir/../a.txt",
    "con",
    "a\\b",
    "",
    "hello",
    "*",
    "**/*",
    "[",
    "(",
    "w",
    "aGk=",
    "!!",
    "\u{0}",
    "é",
    "lines",
    "files",
    "count",
];
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "2001",
    "-1",
    "1.0",
    "1e3",
    "18446744073709551616",
];

/// One generated request: its text, and what the generator knows about it.
struct Generated {
    text: String,
    /// `Some(false)` when some key is duplicated; `Some(true)` when every key
    /// is unique; the value, its JSON form without duplicates.
    unique: bool,
    /// Whether it breaks the op's key schema (unknown, missing, wrong type,
    /// duplicated, or no string `op`).
    malformed: bool,
    /// A well-formed request of an op whose arguments are all checked by
    /// the request layer (so `E_REQUEST` would be wrong).
    plain: bool,
}

fn gen_value(b: &mut Bytes) -> (String, Option<Ty>) {
    match b.below(8) {
        0..=3 => (
            serde_json::to_string(b.pick(STRINGS)).expect("string"),
            Some(Ty::Str),
        ),
        4 => (b.pick(&["true", "false"]).to_owned(), Some(Ty::Bool)),
        5 => {
            let n = b.pick(NUMBERS);
            let count = n.parse::<u64>().is_ok();
            (n.to_owned(), count.then_some(Ty::Count))
        }
        6 => (b.pick(&["null", "[]", "{}", "1.5"]).to_owned(), None),
        _ => (
            serde_json::to_string(&b.text(6)).expect("string"),
            Some(Ty::Str),
        ),
    }
}

fn generate(b: &mut Bytes) -> Generated {
    let op = b.pick(OPS);
    let mut keys: Vec<(String, String, Option<Ty>)> = Vec::new();
    let op_ty = match b.below(16) {
        0 => None,
        1 => Some(("1".to_owned(), None)),
        _ => Some((serde_json::to_string(op).expect("op"), Some(Ty::Str))),
    };
    if let Some((v, t)) = op_ty.clone() {
        keys.push(("op".to_owned(), v, t));
    }
    let sch = schema(op);
    // Mostly the op's own keys with values of the right type.
    if let Some(sch) = sch {
        for &(k, ty, required) in sch {
            if required || b.bool() {
                let (v, t) = if b.below(8) == 0 {
                    gen_value(b)
                } else {
                    match ty {
                        Ty::Str => (serde_json::to_string(b.pick(STRINGS)).expect("s"), Some(ty)),
                        Ty::Bool => (b.pick(&["true", "false"]).to_owned(), Some(ty)),
                        Ty::Count => (b.pick(&["1", "2", "3", "10"]).to_owned(), Some(ty)),
                    }
                };
                keys.push((k.to_owned(), v, t));
            }
        }
    }
    for _ in 0..b.below(3) {
        let (v, t) = gen_value(b);
        keys.push((b.pick(KEYS).to_owned(), v, t));
    }
    if !keys.is_empty() && b.below(8) == 0 {
        let i = b.below(keys.len());
        let dup = keys[i].clone();
        keys.push(dup);
    }
    // Shuffle a little.
    for i in (1..keys.len()).rev() {
        let j = b.below(i + 1);
        keys.swap(i, j);
    }
    let text = format!(
        "{{{}}}",
        keys.iter()
            .map(|(k, v, _)| format!("{}:{v}", serde_json::to_string(k).expect("key")))
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut names: Vec<&str> = keys.iter().map(|(k, _, _)| k.as_str()).collect();
    names.sort_unstable();
    let unique = names.windows(2).all(|w| w[0] != w[1]);
    let op_ok = matches!(op_ty, Some((_, Some(Ty::Str))));
    let malformed = !unique
        || !op_ok
        || match sch {
            None => op != "fetch",
            Some(sch) => {
                let rest: Vec<_> = keys.iter().filter(|(k, _, _)| k != "op").collect();
                rest.iter()
                    .any(|(k, _, t)| match sch.iter().find(|(n, _, _)| n == k) {
                        None => true,
                        Some((_, ty, _)) => *t != Some(*ty),
                    })
                    || sch
                        .iter()
                        .any(|(n, _, req)| *req && !rest.iter().any(|(k, _, _)| k == n))
            }
        };
    let has = |k: &str| keys.iter().any(|(n, _, _)| n == k);
    let plain = !malformed
        && match op {
            "summary" | "list" | "stat" | "mkdir" | "delete" | "rename" => true,
            "read" => !has("offset") && !has("limit"),
            "write" => has("content") && !has("content_base64"),
            _ => false,
        };
    Generated {
        text,
        unique,
        malformed,
        plain,
    }
}

/// Decodes `data` into a request line and checks the answers.
pub fn check(data: &[u8]) {
    let fx = fixture().lock().unwrap_or_else(|e| e.into_inner());
    let mut b = Bytes::new(data);
    if b.below(4) == 0 {
        let line = String::from_utf8_lossy(b.rest()).into_owned();
        check_line(&fx, &line, None);
    } else {
        let g = generate(&mut b);
        check_line(&fx, &g.text, Some(&g));
    }
}

/// The answer's code, after checking its shape.
fn answer_code(fx: &Fixture, line: &str, answer: &Value) -> Option<ErrorCode> {
    let obj = answer.as_object().expect("an answer is an object");
    let text = serde_json::to_string(answer).expect("serializes");
    assert!(!text.contains('\n'), "answer on more than one line");
    match obj.get("ok") {
        Some(Value::Bool(true)) => {
            assert!(!obj.contains_key("error"));
            None
        }
        Some(Value::Bool(false)) => {
            let err = obj["error"].as_object().expect("error object");
            let code = err["code"].as_str().expect("code string");
            let code: ErrorCode = code.parse().expect("a known code");
            let message = err["message"].as_str().expect("message string");
            assert!(!message.is_empty());
            // No host path outside the roots: the fixture's own directory
            // appears only as the prefix of a root.
            let base = fx.base.display().to_string();
            let scrubbed = text
                .replace(&format!("{base}/read"), "")
                .replace(&format!("{base}/write"), "");
            assert!(
                !scrubbed.contains(&base) || line.contains(&base),
                "{line:?} answered with a host path: {text}"
            );
            Some(code)
        }
        _ => panic!("`ok` is not a boolean in {text}"),
    }
}

fn check_line(fx: &Fixture, line: &str, gen: Option<&Generated>) {
    let answer = fx.rw.handle_line(line);
    let code = answer_code(fx, line, &answer);
    let ro_answer = fx.ro.handle_line(line);
    let ro_code = answer_code(fx, line, &ro_answer);

    // Not a JSON object at all: E_REQUEST.
    let parsed: Option<Value> = serde_json::from_str(line).ok();
    if !matches!(parsed, Some(Value::Object(_))) {
        assert_eq!(code, Some(ErrorCode::Request), "{line:?}");
        assert_eq!(ro_code, Some(ErrorCode::Request), "{line:?}");
    }
    if let Some(g) = gen {
        if g.malformed {
            assert_eq!(code, Some(ErrorCode::Request), "{line:?}: {answer}");
            assert_eq!(ro_code, Some(ErrorCode::Request), "{line:?}: {ro_answer}");
        }
        if g.plain {
            assert_ne!(code, Some(ErrorCode::Request), "{line:?}: {answer}");
            assert_ne!(ro_code, Some(ErrorCode::Request), "{line:?}: {ro_answer}");
        }
        if g.unique {
            if let Some(v) = &parsed {
                let via_value = fx.ro.handle_value(v);
                assert_eq!(
                    answer_code(fx, line, &via_value),
                    ro_code,
                    "{line:?}: {ro_answer} vs {via_value}"
                );
            }
        }
    }
    // The write root is emptied after each request, and the read root and
    // the outside file are never changed.
    let read = fx.base.join("read");
    assert_eq!(
        std::fs::read(fx.base.join("outside.txt")).ok().as_deref(),
        Some(&b"outside"[..])
    );
    assert_eq!(
        std::fs::read(read.join("a.txt")).ok().as_deref(),
        Some(&b"hello\nworld\n"[..])
    );
    let mut names: Vec<_> = std::fs::read_dir(&read)
        .expect("read root")
        .map(|e| e.expect("entry").file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["a.txt", "bin", "dir", "escape", "inlink"]);
    for e in std::fs::read_dir(&fx.write_root).expect("write root") {
        let p = e.expect("entry").path();
        if p.is_dir() && !p.is_symlink() {
            std::fs::remove_dir_all(&p).expect("clean");
        } else {
            std::fs::remove_file(&p).expect("clean");
        }
    }
}
