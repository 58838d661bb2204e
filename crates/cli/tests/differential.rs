//! Differential testing across doors: a random tree (files, directories,
//! relative and absolute symlinks inside the root, links out of it,
//! dangling links and loops, names that a deny-write pattern matches in
//! another case or normal form, names with spaces, a newline or bytes that
//! are not UTF-8) and a random sequence of file operations, each name
//! spelled in a random way (`./a`, `a/`, `a//b`, `a/.`, `x/../a`, and for
//! the MCP server and the Rust host-name mapping the absolute host path),
//! run on fresh copies of the tree through the Rust `Sandbox`, the JSON
//! endpoint (`sandgate tool`), the MCP server (`sandgate mcp`) and, when
//! the C library is built beside the binary (`cargo build -p
//! sandgate-ffi`), the C ABI through the Python binding. Every
//! operation must answer the same code through every door (MCP's
//! `isError` text starts with it), the same result where the doors'
//! answers carry the same data, and the trees must be byte-identical
//! afterwards.
//!
//! `SANDGATE_DIFF_CASES` sets the number of random cases (48 by default,
//! the same ones on every run); `SANDGATE_DIFF_RANDOM=1` draws new ones. A
//! failing case is shrunk and printed whole.

mod mcp_support;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use sandgate::{EditOptions, Policy, Sandbox, WriteOptions};
use serde_json::{json, Value};

use mcp_support::{tool_session, McpSession};

/// The tree's places, parents before children; each is absent, a file, a
/// directory or a symlink in a generated tree.
const SLOTS: &[&[u8]] = &[
    b"a.txt",
    b"dir",
    b"dir/x.txt",
    b"dir/sub",
    b"dir/sub/y.md",
    b"sp ace.txt",
    b"nl\nname",
    b"Makefile",
    b"x.lock",
    b"X.LOCK",
    "caf\u{e9}.txt".as_bytes(),
    "cafe\u{301}.txt".as_bytes(),
    b"bad\xffname",
    b"ln",
    b"dir/ln2",
    b"conf",
    b"conf/settings.json",
    b"conf/other.txt",
];

/// What a file may hold.
const CONTENTS: &[&[u8]] = &[
    b"hello\n",
    b"needle here\nsecond line\n",
    b"needle needle\n",
    b"",
    b"bytes \xff\xfe needle\n",
];

/// Where a symlink may point; `@` stands for the copy's own directory (an
/// absolute target).
const TARGETS: &[&str] = &[
    "a.txt",
    "dir",
    "dir/x.txt",
    "../a.txt",
    "sub",
    "../outside/secret.txt",
    "../../outside",
    "@/ws/a.txt",
    "@/ws/dir",
    "@/outside/secret.txt",
    "nowhere",
    "ln",
];

/// Names the operations use (besides every UTF-8 place above).
const EXTRA_NAMES: &[&str] = &[
    "new.txt",
    "b.txt",
    "dir/new.txt",
    "nodir/f",
    "MAKEFILE",
    "y.Lock",
    "x.loc\u{212a}",
    "Caf\u{c9}.TXT",
    ".",
    "dir/sub/new",
    "CONF/Settings.json",
    "ln/x",
    "dir/ln2/z",
    "conf/new.txt",
];

const DENY: &[&str] = &["Makefile", "*.lock", "caf\u{e9}.txt", "conf/settings.json"];

const EDIT_OLD: &[&str] = &["needle", "hello", "second", "zzz", ""];
const EDIT_NEW: &[&str] = &["N", "", "needle"];
const GLOBS: &[&str] = &[
    "*.txt", "**/*.txt", "*", "**/*", "dir/*", "[", "**/x*", "*.lock",
];
const GREPS: &[&str] = &["needle", "^h", "(", "line$", "e"];

fn names() -> Vec<String> {
    let mut v: Vec<String> = SLOTS
        .iter()
        .filter_map(|s| std::str::from_utf8(s).ok().map(str::to_owned))
        .collect();
    v.extend(EXTRA_NAMES.iter().map(|s| s.to_string()));
    v
}

#[derive(Clone, Debug)]
enum Node {
    Absent,
    File(usize),
    Dir,
    Link(usize),
}

/// A name as the agent spells it: which name, which spelling, and whether
/// the doors that map host paths get the absolute host path.
#[derive(Clone, Debug)]
struct Name {
    which: usize,
    spelling: u8,
    absolute: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Read(Name),
    Write(Name, usize, bool),
    Edit(Name, usize, usize, bool),
    List(Name),
    Stat(Name),
    Mkdir(Name),
    Delete(Name),
    Rename(Name, Name),
    Glob(usize, Name),
    Grep(usize, Name),
}

#[derive(Clone, Debug)]
struct Case {
    tree: Vec<Node>,
    overwrite: bool,
    /// The write root `ws` inside the read root `.` (else `ws` is both).
    nested: bool,
    mcp: bool,
    ops: Vec<Op>,
}

fn node() -> impl Strategy<Value = Node> {
    prop_oneof![
        3 => Just(Node::Absent),
        4 => (0..CONTENTS.len()).prop_map(Node::File),
        2 => Just(Node::Dir),
        2 => (0..TARGETS.len()).prop_map(Node::Link),
    ]
}

fn name() -> impl Strategy<Value = Name> {
    (0..names().len(), 0u8..14, any::<bool>()).prop_map(|(which, spelling, absolute)| Name {
        which,
        spelling,
        absolute,
    })
}

/// A name that is usually not there yet: a rename's destination.
fn fresh() -> impl Strategy<Value = Name> {
    let all = names();
    let fresh: Vec<usize> = [
        "new.txt",
        "dir/new.txt",
        "conf/new.txt",
        "dir/sub/new",
        "b.txt",
    ]
    .iter()
    .filter_map(|f| all.iter().position(|n| n == f))
    .collect();
    (proptest::sample::select(fresh), 0u8..14, any::<bool>()).prop_map(
        |(which, spelling, absolute)| Name {
            which,
            spelling,
            absolute,
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => name().prop_map(Op::Read),
        3 => (name(), 0..CONTENTS.len(), any::<bool>()).prop_map(|(n, c, o)| Op::Write(n, c, o)),
        2 => (name(), 0..EDIT_OLD.len(), 0..EDIT_NEW.len(), any::<bool>())
            .prop_map(|(n, o, w, a)| Op::Edit(n, o, w, a)),
        2 => name().prop_map(Op::List),
        2 => name().prop_map(Op::Stat),
        2 => name().prop_map(Op::Mkdir),
        2 => name().prop_map(Op::Delete),
        3 => (name(), prop_oneof![name(), fresh()]).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (0..GLOBS.len(), name()).prop_map(|(g, n)| Op::Glob(g, n)),
        1 => (0..GREPS.len(), name()).prop_map(|(g, n)| Op::Grep(g, n)),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(node(), SLOTS.len()),
        prop_oneof![1 => Just(false), 3 => Just(true)],
        any::<bool>(),
        any::<bool>(),
        proptest::collection::vec(op(), 1..12),
    )
        .prop_map(|(tree, overwrite, nested, mcp, mut ops)| {
            if mcp {
                // Only what the MCP server can say: no delete, every write
                // may replace, an edit replaces one occurrence.
                ops.retain(|o| !matches!(o, Op::Delete(_)));
                for o in &mut ops {
                    match o {
                        // write_file takes text: bytes that are not
                        // UTF-8 cannot be said.
                        Op::Write(_, c, ow) => {
                            *ow = true;
                            if std::str::from_utf8(CONTENTS[*c]).is_err() {
                                *c = 1;
                            }
                        }
                        Op::Edit(_, _, _, all) => *all = false,
                        _ => {}
                    }
                }
            }
            Case {
                tree,
                overwrite,
                nested,
                mcp,
                ops,
            }
        })
}

/// One copy of the tree: `ws` (read and write root), `outside` (granted to
/// nothing) and the policy.
struct Copy {
    dir: tempfile::TempDir,
    nested: bool,
}

impl Copy {
    fn new(case: &Case) -> Copy {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        fs::create_dir_all(base.join("ws")).unwrap();
        fs::create_dir_all(base.join("outside")).unwrap();
        fs::write(base.join("outside/secret.txt"), "SECRET\n").unwrap();
        let ws = base.join("ws");
        for (slot, n) in SLOTS.iter().zip(&case.tree) {
            let p = ws.join(std::ffi::OsStr::from_bytes(slot));
            // A place whose parent is not a real directory is left out.
            if !fs::symlink_metadata(p.parent().unwrap()).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            match n {
                Node::Absent => {}
                Node::File(c) => fs::write(&p, CONTENTS[*c]).unwrap(),
                Node::Dir => fs::create_dir(&p).unwrap(),
                Node::Link(t) => {
                    let t = TARGETS[*t].replace('@', base.to_str().unwrap());
                    std::os::unix::fs::symlink(t, &p).unwrap();
                }
            }
        }
        let deny: Vec<String> = DENY.iter().map(|d| format!("{d:?}")).collect();
        fs::write(
            base.join("policy.toml"),
            format!(
                "[fs]\nread_roots = [\"{}\"]\nwrite_root = \"ws\"\nallow_overwrite = {}\ndeny_write = [{}]\n",
                if case.nested { "." } else { "ws" },
                case.overwrite,
                deny.join(", ")
            ),
        )
        .unwrap();
        for p in walk(base) {
            if !fs::symlink_metadata(&p).unwrap().file_type().is_symlink() {
                let _ = fs::set_permissions(&p, fs::Permissions::from_mode(0o755));
            }
        }
        Copy {
            dir,
            nested: case.nested,
        }
    }

    fn base(&self) -> &Path {
        self.dir.path()
    }

    fn policy(&self) -> PathBuf {
        self.base().join("policy.toml")
    }

    /// The name `n` as spelled for a read-side or a (`write`) write-side
    /// operation: relative to the root that takes it (in the nested layout
    /// reads name `ws/…` in the read root `.`), or (`host`) the absolute
    /// host path when the name asks for it.
    fn spell(&self, n: &Name, host: bool, write: bool) -> String {
        let p = names()[n.which].clone();
        let rel = match n.spelling {
            8 => format!("./{p}"),
            9 => format!("{p}/"),
            10 => p.replacen('/', "//", 1),
            11 => format!("{p}/."),
            12 => format!("dir/../{p}"),
            13 => format!(".//{p}"),
            _ => p.clone(),
        };
        if host && n.absolute {
            format!("{}/ws/{rel}", self.base().display())
        } else if self.nested && !write {
            format!("ws/{rel}")
        } else {
            rel
        }
    }

    /// Every entry beneath the copy, as `path kind mode content-or-target`
    /// (absolute link targets with the copy's directory as `@`).
    fn snapshot(&self) -> Vec<String> {
        let base = self.base();
        walk(base)
            .into_iter()
            .skip(1)
            .map(|p| {
                let m = fs::symlink_metadata(&p).unwrap();
                let rel = p
                    .strip_prefix(base)
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec();
                let rel = String::from_utf8_lossy(&rel).escape_debug().to_string();
                let mode = m.mode() & 0o7777;
                if m.file_type().is_symlink() {
                    let t = fs::read_link(&p).unwrap();
                    let t = t.to_string_lossy().replace(base.to_str().unwrap(), "@");
                    format!("{rel} link {t}")
                } else if m.is_dir() {
                    format!("{rel} dir {mode:o}")
                } else {
                    format!("{rel} file {mode:o} {:?}", fs::read(&p).unwrap())
                }
            })
            .collect()
    }
}

/// Every entry beneath `dir` (itself first), links not followed.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        i += 1;
        if fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
            let mut names: Vec<_> = fs::read_dir(&p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            out.extend(names);
        }
    }
    out
}

/// One door's answer to one operation: `ok` or the refusal's code, what
/// the answer says where the doors' answers hold the same data, and (from
/// the Rust door) what the MCP server's text must then be.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    code: String,
    detail: String,
    mcp_text: Option<String>,
}

fn refused(code: &str) -> Answer {
    Answer {
        code: code.to_owned(),
        detail: String::new(),
        mcp_text: None,
    }
}

fn kind_name(k: sandgate::FileKind) -> &'static str {
    match k {
        sandgate::FileKind::File => "file",
        sandgate::FileKind::Dir => "dir",
        sandgate::FileKind::Symlink => "symlink",
        _ => "other",
    }
}

fn kind_tag(k: &str) -> &'static str {
    match k {
        "dir" => "[DIR]",
        "file" => "[FILE]",
        "symlink" => "[LINK]",
        _ => "[OTHER]",
    }
}

fn rust_door(copy: &Copy, ops: &[Op]) -> Vec<Answer> {
    let sb = Sandbox::from_policy(&Policy::load(copy.policy()).unwrap()).unwrap();
    // An absolute host path goes through the host-name mapping first, as a
    // host holding such a path does.
    let read_name = |n: &Name| -> Result<String, sandgate::Error> {
        let s = copy.spell(n, true, false);
        if n.absolute {
            sb.host_read_name(&s)
        } else {
            Ok(s)
        }
    };
    let write_name = |n: &Name| -> Result<String, sandgate::Error> {
        let s = copy.spell(n, true, true);
        if n.absolute {
            sb.host_write_name(&s)
        } else {
            Ok(s)
        }
    };
    let ok = |detail: String, mcp_text: Option<String>| Answer {
        code: "ok".into(),
        detail,
        mcp_text,
    };
    ops.iter()
        .map(|op| {
            let r: Result<Answer, sandgate::Error> = (|| match op {
                Op::Read(n) => {
                    let b = sb.read(&read_name(n)?)?;
                    let text = String::from_utf8_lossy(&b).into_owned();
                    Ok(ok(format!("{b:?}"), Some(text)))
                }
                Op::Write(n, c, o) => {
                    let size = sb.write(
                        &write_name(n)?,
                        CONTENTS[*c],
                        WriteOptions::default().overwrite(*o),
                    )?;
                    Ok(ok(size.to_string(), None))
                }
                Op::Edit(n, o, w, all) => {
                    let count = sb.edit(
                        &write_name(n)?,
                        EDIT_OLD[*o],
                        EDIT_NEW[*w],
                        EditOptions::default().replace_all(*all),
                    )?;
                    Ok(ok(count.to_string(), None))
                }
                Op::List(n) => {
                    let entries = sb.list(&read_name(n)?)?;
                    let detail: Vec<String> = entries
                        .iter()
                        .map(|e| format!("{:?} {} {}", e.name, kind_name(e.kind), e.size))
                        .collect();
                    let text: Vec<String> = entries
                        .iter()
                        .map(|e| format!("{} {}", kind_tag(kind_name(e.kind)), e.name))
                        .collect();
                    Ok(ok(detail.join("\n"), Some(text.join("\n"))))
                }
                Op::Stat(n) => {
                    let st = sb.stat(&read_name(n)?)?;
                    Ok(ok(
                        format!("{} {} {:o}", kind_name(st.kind), st.size, st.mode),
                        None,
                    ))
                }
                Op::Mkdir(n) => sb.mkdir(&write_name(n)?).map(|()| ok(String::new(), None)),
                Op::Delete(n) => sb.delete(&write_name(n)?).map(|()| ok(String::new(), None)),
                Op::Rename(a, b) => {
                    let (a, b) = (write_name(a)?, write_name(b)?);
                    sb.rename(&a, &b).map(|()| ok(String::new(), None))
                }
                Op::Glob(g, n) => {
                    let paths = sb.glob(GLOBS[*g], Some(&read_name(n)?))?;
                    let text = if paths.is_empty() {
                        "No matches found".to_owned()
                    } else {
                        paths.join("\n")
                    };
                    Ok(ok(format!("{paths:?}"), Some(text)))
                }
                Op::Grep(g, n) => {
                    let ms = sb.grep(GREPS[*g], Some(&read_name(n)?), None)?;
                    let detail: Vec<String> = ms
                        .iter()
                        .map(|m| format!("{:?}:{}:{:?}", m.path, m.line, m.text))
                        .collect();
                    Ok(ok(detail.join("\n"), None))
                }
            })();
            r.unwrap_or_else(|e| refused(e.code().as_str()))
        })
        .collect()
}

fn b64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {s}"),
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        acc = (acc << 6) | u32::from(val(c));
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn tool_door(copy: &Copy, ops: &[Op]) -> Vec<Answer> {
    parse_answers(
        ops,
        tool_session(&copy.policy(), &requests(copy, ops, false)),
    )
}

/// The ops as JSON endpoint requests, names spelled relative or (`host`)
/// as absolute host paths where a name asks for it.
fn requests(copy: &Copy, ops: &[Op], host: bool) -> Vec<Value> {
    let s = |n: &Name| copy.spell(n, host, false);
    let w = |n: &Name| copy.spell(n, host, true);
    ops.iter()
        .map(|op| match op {
            Op::Read(n) => json!({"op":"read","path":s(n)}),
            Op::Write(n, c, o) => match std::str::from_utf8(CONTENTS[*c]) {
                Ok(t) => json!({"op":"write","path":w(n),"content":t,"overwrite":o}),
                Err(_) => json!({"op":"write","path":w(n),
                    "content_base64":b64_encode(CONTENTS[*c]),"overwrite":o}),
            },
            Op::Edit(n, o, nw, all) => {
                json!({"op":"edit","path":w(n),"old":EDIT_OLD[*o],"new":EDIT_NEW[*nw],"all":all})
            }
            Op::List(n) => json!({"op":"list","path":s(n)}),
            Op::Stat(n) => json!({"op":"stat","path":s(n)}),
            Op::Mkdir(n) => json!({"op":"mkdir","path":w(n)}),
            Op::Delete(n) => json!({"op":"delete","path":w(n)}),
            Op::Rename(a, b) => json!({"op":"rename","from":w(a),"to":w(b)}),
            Op::Glob(g, n) => json!({"op":"glob","pattern":GLOBS[*g],"path":s(n)}),
            Op::Grep(g, n) => json!({"op":"grep","pattern":GREPS[*g],"path":s(n)}),
        })
        .collect()
}

/// The C ABI door, through the Python binding: the same requests, an
/// absolute host path mapped with `Sandbox.host_name` (the C ABI's
/// `sg_sandbox_host_name`) as the Rust door maps it, answers in the JSON
/// endpoint's shape.
const C_ABI_DOOR: &str = r#"
import base64, json, sys
import sandgate
reqs = json.load(sys.stdin)
sb = sandgate.Sandbox.from_policy(sandgate.Policy.load(sys.argv[1]))
WRITES = {"write", "edit", "mkdir", "delete", "rename"}
def name(r, key):
    p = r[key]
    return sb.host_name(p, write=r["op"] in WRITES) if p.startswith("/") else p
def answer(r):
    op = r["op"]
    if op == "read":
        return {"content_base64": base64.b64encode(sb.read(name(r, "path"))).decode()}
    if op == "write":
        data = r["content"].encode() if "content" in r else base64.b64decode(r["content_base64"])
        return {"size": sb.write(name(r, "path"), data, overwrite=r["overwrite"])}
    if op == "edit":
        return {"replacements": sb.edit(name(r, "path"), r["old"], r["new"], all=r["all"])}
    if op == "list":
        return {"entries": [{"name": e.name, "kind": e.kind, "size": e.size} for e in sb.list(name(r, "path"))]}
    if op == "stat":
        st = sb.stat(name(r, "path"))
        return {"kind": st.kind, "size": st.size, "mode": st.mode}
    if op == "mkdir":
        return sb.mkdir(name(r, "path")) or {}
    if op == "delete":
        return sb.delete(name(r, "path")) or {}
    if op == "rename":
        src = name(r, "from")
        return sb.rename(src, name(r, "to")) or {}
    if op == "glob":
        return {"paths": list(sb.glob(r["pattern"], name(r, "path")))}
    if op == "grep":
        return {"matches": [{"path": m.path, "line": m.line, "text": m.text}
                            for m in sb.grep(r["pattern"], name(r, "path"))]}
    raise ValueError(op)
out = []
for r in reqs:
    try:
        a = answer(r)
        a["ok"] = True
    except sandgate.SandgateError as e:
        a = {"ok": False, "error": {"code": e.code}}
    out.append(a)
json.dump(out, sys.stdout)
"#;

/// The Python binding over the C library built in this target directory,
/// when both are there (`cargo build -p sandgate-ffi`); `None` otherwise,
/// and then `SANDGATE_DIFF_C_ABI=1` makes its absence a failure.
fn c_abi_env() -> Option<(PathBuf, PathBuf)> {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_sandgate"));
    let lib = exe.parent().unwrap().join("libsandgate.so");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bindings/python/src");
    // `cargo test -p sandgate-cli` does not build the library: one older
    // than a source file of the crates would answer for code no longer
    // there, so it is left out (`cargo test --workspace` builds it first).
    let fresh = fs::metadata(&lib)
        .and_then(|m| m.modified())
        .is_ok_and(|built| {
            newest_source(&Path::new(env!("CARGO_MANIFEST_DIR")).join("..")) <= built
        });
    if lib.is_file() && !fresh {
        eprintln!(
            "differential: {} is older than the sources; the C ABI door is left out",
            lib.display()
        );
    }
    let there = fresh
        && src.is_dir()
        && Command::new("python3")
            .arg("-c")
            .arg("import sandgate")
            .env("PYTHONPATH", &src)
            .env("SANDGATE_LIBRARY", &lib)
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        there || std::env::var_os("SANDGATE_DIFF_C_ABI").is_none(),
        "SANDGATE_DIFF_C_ABI is set, but the Python binding cannot load {}",
        lib.display()
    );
    there.then_some((lib, src))
}

/// The newest modification time of the `.rs` files below `dir`.
fn newest_source(dir: &Path) -> std::time::SystemTime {
    let mut newest = std::time::UNIX_EPOCH;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                    newest = newest.max(t);
                }
            }
        }
    }
    newest
}

fn c_abi_door(copy: &Copy, ops: &[Op], (lib, src): &(PathBuf, PathBuf)) -> Vec<Answer> {
    let reqs = requests(copy, ops, true);
    // Outside the copy, which a read root may hold whole.
    let script_dir = tempfile::tempdir().unwrap();
    let script = script_dir.path().join("door.py");
    fs::write(&script, C_ABI_DOOR).unwrap();
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(copy.policy())
        .env("PYTHONPATH", src)
        .env("SANDGATE_LIBRARY", lib)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::from(reqs).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the C ABI door answered no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    parse_answers(ops, answers)
}

/// Answers in the JSON endpoint's shape, as each door's `detail`.
fn parse_answers(ops: &[Op], answers: Vec<Value>) -> Vec<Answer> {
    ops.iter()
        .zip(answers)
        .map(|(op, a)| {
            if a["ok"] != json!(true) {
                return refused(a["error"]["code"].as_str().unwrap());
            }
            let detail = match op {
                Op::Read(_) => {
                    let b = match a["content"].as_str() {
                        Some(t) => t.as_bytes().to_vec(),
                        None => b64_decode(a["content_base64"].as_str().unwrap()),
                    };
                    format!("{b:?}")
                }
                Op::Write(..) => a["size"].to_string(),
                Op::Edit(..) => a["replacements"].to_string(),
                Op::List(_) => a["entries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        format!(
                            "{:?} {} {}",
                            e["name"].as_str().unwrap(),
                            e["kind"].as_str().unwrap(),
                            e["size"]
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                Op::Stat(_) => format!(
                    "{} {} {:o}",
                    a["kind"].as_str().unwrap(),
                    a["size"],
                    a["mode"].as_u64().unwrap()
                ),
                Op::Glob(..) => {
                    let p: Vec<String> = a["paths"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| p.as_str().unwrap().to_owned())
                        .collect();
                    format!("{p:?}")
                }
                Op::Grep(..) => a["matches"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| {
                        format!(
                            "{:?}:{}:{:?}",
                            m["path"].as_str().unwrap(),
                            m["line"],
                            m["text"].as_str().unwrap()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            Answer {
                code: "ok".into(),
                detail,
                mcp_text: None,
            }
        })
        .collect()
}

fn b64_encode(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk.len();
        let v = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= n {
                out.push(A[((v >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A `sandgate mcp` session.
struct Mcp(McpSession);

impl Mcp {
    fn start(policy: &Path) -> Mcp {
        Mcp(McpSession::start(
            [OsStr::new("--policy"), policy.as_os_str()],
            "differential",
        ))
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.0.request(method, params)
    }

    /// A tool call's answer: `ok` with the text, or the code that starts
    /// the `isError` text (`RPC` for a protocol error).
    fn call(&mut self, name: &str, args: Value) -> Answer {
        let v = self.request("tools/call", json!({"name":name,"arguments":args}));
        if v.get("error").is_some() {
            return refused(&format!("RPC {}", v["error"]));
        }
        let text = v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        if v["result"]["isError"] == json!(true) {
            refused(text.split(':').next().unwrap())
        } else {
            Answer {
                code: "ok".into(),
                detail: String::new(),
                mcp_text: Some(text),
            }
        }
    }
}

fn mcp_door(copy: &Copy, ops: &[Op]) -> Vec<Answer> {
    let mut m = Mcp::start(&copy.policy());
    let s = |n: &Name| copy.spell(n, true, false);
    let w = |n: &Name| copy.spell(n, true, true);
    ops.iter()
        .map(|op| match op {
            Op::Read(n) => m.call("read_text_file", json!({"path":s(n)})),
            Op::Write(n, c, _) => m.call(
                "write_file",
                json!({"path":w(n),"content":String::from_utf8_lossy(CONTENTS[*c])}),
            ),
            Op::Edit(n, o, nw, _) => m.call(
                "edit_file",
                json!({"path":w(n),"edits":[{"oldText":EDIT_OLD[*o],"newText":EDIT_NEW[*nw]}]}),
            ),
            Op::List(n) => m.call("list_directory", json!({"path":s(n)})),
            Op::Stat(n) => m.call("get_file_info", json!({"path":s(n)})),
            Op::Mkdir(n) => m.call("create_directory", json!({"path":w(n)})),
            Op::Delete(_) => unreachable!("the MCP server has no delete tool"),
            Op::Rename(a, b) => m.call("move_file", json!({"source":w(a),"destination":w(b)})),
            Op::Glob(g, n) => m.call("search_files", json!({"path":s(n),"pattern":GLOBS[*g]})),
            Op::Grep(g, n) => m.call("grep", json!({"pattern":GREPS[*g],"path":s(n)})),
        })
        .collect()
}

/// Runs `case` through every door on fresh copies and names the first
/// difference.
fn differ(
    case: &Case,
    seen: &Mutex<BTreeMap<String, u32>>,
    c_abi: Option<&(PathBuf, PathBuf)>,
) -> Result<(), String> {
    let copies: Vec<Copy> = (0..4).map(|_| Copy::new(case)).collect();
    let rust = rust_door(&copies[0], &case.ops);
    {
        let mut seen = seen.lock().unwrap();
        for (op, a) in case.ops.iter().zip(&rust) {
            let kind = format!("{op:?}");
            let kind = kind.split('(').next().unwrap();
            *seen.entry(format!("{kind} {}", a.code)).or_default() += 1;
        }
    }
    let tool = tool_door(&copies[1], &case.ops);
    let mcp = case.mcp.then(|| mcp_door(&copies[2], &case.ops));
    let c = c_abi.map(|env| c_abi_door(&copies[3], &case.ops, env));
    for (i, op) in case.ops.iter().enumerate() {
        let (r, t) = (&rust[i], &tool[i]);
        if (&r.code, &r.detail) != (&t.code, &t.detail) {
            return Err(format!(
                "op {i} {op:?} ({:?}): rust {r:?}, tool {t:?}",
                copies[1].spell(op_name(op), false, false)
            ));
        }
        if let Some(c) = &c {
            let c = &c[i];
            if (&r.code, &r.detail) != (&c.code, &c.detail) {
                return Err(format!(
                    "op {i} {op:?} ({:?}): rust {r:?}, C ABI {c:?}",
                    copies[3].spell(op_name(op), true, false)
                ));
            }
        }
        if let Some(mcp) = &mcp {
            let m = &mcp[i];
            let text_differs = match (&r.mcp_text, &m.mcp_text) {
                (Some(want), Some(got)) => want != got,
                _ => false,
            };
            if r.code != m.code || text_differs {
                return Err(format!(
                    "op {i} {op:?} ({:?}): rust {r:?}, mcp {m:?}",
                    copies[2].spell(op_name(op), true, false)
                ));
            }
        }
    }
    let want = copies[0].snapshot();
    let doors = [
        ("tool", true),
        ("mcp", case.mcp),
        ("C ABI", c_abi.is_some()),
    ];
    for ((door, ran), copy) in doors.iter().zip(&copies[1..]) {
        if !ran {
            continue;
        }
        let got = copy.snapshot();
        if got != want {
            return Err(format!(
                "tree after {door} differs from rust:\nrust {want:#?}\n{door} {got:#?}"
            ));
        }
    }
    Ok(())
}

fn op_name(op: &Op) -> &Name {
    match op {
        Op::Read(n)
        | Op::Write(n, ..)
        | Op::Edit(n, ..)
        | Op::List(n)
        | Op::Stat(n)
        | Op::Mkdir(n)
        | Op::Delete(n)
        | Op::Rename(n, _)
        | Op::Glob(_, n)
        | Op::Grep(_, n) => n,
    }
}

#[test]
fn every_door_answers_a_random_sequence_alike() {
    let cases = std::env::var("SANDGATE_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    // The same cases on every run unless SANDGATE_DIFF_RANDOM asks for new
    // ones (to explore; a failure prints its case whole).
    let mut runner = if std::env::var_os("SANDGATE_DIFF_RANDOM").is_some() {
        TestRunner::new(config)
    } else {
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
    };
    let checked = std::sync::atomic::AtomicU32::new(0);
    let seen = Mutex::new(BTreeMap::new());
    let c_abi = c_abi_env();
    let result = runner.run(&case(), |c| {
        checked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        differ(&c, &seen, c_abi.as_ref()).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let seen = seen.into_inner().unwrap();
    eprintln!(
        "differential: {} cases checked (doors: rust, tool, mcp{}); operations by outcome: {seen:?}",
        checked.load(std::sync::atomic::Ordering::Relaxed),
        if c_abi.is_some() {
            ", C ABI"
        } else {
            "; no C ABI: build sandgate-ffi"
        }
    );
    // The sequences reach both sides of the doors: every kind of operation
    // succeeded somewhere, and refusals came from names, patterns and the
    // tree alike.
    for want in [
        "Read ok",
        "Write ok",
        "Mkdir ok",
        "Rename ok",
        "List ok",
        "Glob ok",
    ] {
        assert!(seen.contains_key(want), "no {want:?} in {seen:?}");
    }
    for want in ["E_FS_PROTECTED", "E_PATH_ESCAPE", "E_NOT_FOUND"] {
        assert!(
            seen.keys().any(|k| k.ends_with(want)),
            "no {want} in {seen:?}"
        );
    }
}

/// A write root inside a read root listed before it (`read_roots = ["."]`,
/// `write_root = "ws"`, a common layout): an absolute host path inside the
/// write root is a name there for every write-side door, the MCP server's
/// tools and the Rust host-name mapping alike. Before, the mapper took the
/// first granted directory that held the path, the read root, and refused
/// the write as one in a read-only directory (`E_DENIED`, path `ws/a.txt`)
/// although the server listed that very directory as its write root.
#[test]
fn an_absolute_path_in_a_write_root_inside_a_read_root_is_written_there() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    fs::create_dir_all(base.join("ws/sub")).unwrap();
    fs::write(base.join("ws/old.txt"), "needle\n").unwrap();
    fs::write(base.join("top.txt"), "top\n").unwrap();
    fs::write(
        base.join("policy.toml"),
        "[fs]\nread_roots = [\".\"]\nwrite_root = \"ws\"\nallow_overwrite = true\n",
    )
    .unwrap();
    for p in walk(base) {
        let _ = fs::set_permissions(&p, fs::Permissions::from_mode(0o755));
    }
    let abs = |rel: &str| format!("{}/{rel}", base.display());

    // The Rust host-name mapping.
    let sb = Sandbox::from_policy(&Policy::load(base.join("policy.toml")).unwrap()).unwrap();
    assert_eq!(sb.host_write_name(&abs("ws/a.txt")).unwrap(), "a.txt");
    assert_eq!(sb.host_write_name(&abs("ws/sub/")).unwrap(), "sub/");
    assert_eq!(sb.host_write_name(&abs("ws")).unwrap(), ".");
    // Reads still name the file in the first read root that holds it.
    assert_eq!(sb.host_read_name(&abs("ws/old.txt")).unwrap(), "ws/old.txt");
    // Outside the write root, a write is still refused.
    assert_eq!(
        sb.host_write_name(&abs("top.txt"))
            .unwrap_err()
            .code()
            .as_str(),
        "E_DENIED"
    );
    assert_eq!(
        sb.host_write_name("/nowhere/else")
            .unwrap_err()
            .code()
            .as_str(),
        "E_PATH_ESCAPE"
    );

    // The MCP server's write-side tools.
    let mut m = Mcp::start(&base.join("policy.toml"));
    let calls = [
        (
            "write_file",
            json!({"path":abs("ws/a.txt"),"content":"A\n"}),
        ),
        ("create_directory", json!({"path":abs("ws/sub/deeper")})),
        (
            "edit_file",
            json!({"path":abs("ws/old.txt"),"edits":[{"oldText":"needle","newText":"pin"}]}),
        ),
        (
            "move_file",
            json!({"source":abs("ws/a.txt"),"destination":abs("ws/sub/b.txt")}),
        ),
    ];
    for (tool, args) in calls {
        let a = m.call(tool, args.clone());
        assert_eq!(a.code, "ok", "{tool} {args}: {a:?}");
    }
    let a = m.call("write_file", json!({"path":abs("top.txt"),"content":"x"}));
    assert_eq!(a.code, "E_DENIED", "{a:?}");
    drop(m);
    assert_eq!(fs::read(base.join("ws/sub/b.txt")).unwrap(), b"A\n");
    assert!(base.join("ws/sub/deeper").is_dir());
    assert_eq!(fs::read(base.join("ws/old.txt")).unwrap(), b"pin\n");
    assert!(!base.join("ws/a.txt").exists());
    assert_eq!(fs::read(base.join("top.txt")).unwrap(), b"top\n");
}

/// `directory_tree` walks what glob walks: a subdirectory that cannot be
/// listed by name (one no tool can name: a `:`, a Windows device name, a
/// name that is not UTF-8; or, for an unprivileged server, one whose
/// permissions refuse it) is shown without `children` and said in a
/// second block, and the rest of the tree is answered. Before, one such
/// directory anywhere below failed the whole call (`E_PATH_INVALID:
/// Windows drive path`) while glob over the same tree answered.
#[test]
fn a_directory_tree_answers_around_a_directory_it_cannot_list() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let ws = base.join("ws");
    for d in ["ok", "a:b/in", "con/in", "shut/in"] {
        fs::create_dir_all(ws.join(d)).unwrap();
    }
    fs::create_dir(ws.join(std::ffi::OsStr::from_bytes(b"bad\xffdir"))).unwrap();
    fs::write(ws.join("ok/f.txt"), "f\n").unwrap();
    fs::write(
        base.join("policy.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n",
    )
    .unwrap();
    for p in walk(base) {
        let _ = fs::set_permissions(&p, fs::Permissions::from_mode(0o755));
    }
    // Unlistable for an unprivileged server (root lists it anyway).
    fs::set_permissions(ws.join("shut"), fs::Permissions::from_mode(0o311)).unwrap();
    let mut m = Mcp::start(&base.join("policy.toml"));
    let v = m.request(
        "tools/call",
        json!({"name":"directory_tree","arguments":{"path":"."}}),
    );
    let _ = fs::set_permissions(ws.join("shut"), fs::Permissions::from_mode(0o755));
    assert_eq!(v["result"]["isError"], json!(false), "{v}");
    let blocks = v["result"]["content"].as_array().unwrap();
    let tree: Value = serde_json::from_str(blocks[0]["text"].as_str().unwrap()).unwrap();
    let names: Vec<&str> = tree
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a:b", "bad\\xffdir", "con", "ok", "shut"], "{tree}");
    let ok = tree.as_array().unwrap().iter().find(|e| e["name"] == "ok");
    assert_eq!(ok.unwrap()["children"][0]["name"], "f.txt", "{tree}");
    for name in ["a:b", "bad\\xffdir", "con"] {
        let e = tree.as_array().unwrap().iter().find(|e| e["name"] == name);
        assert!(e.unwrap().get("children").is_none(), "{name}: {tree}");
    }
    let said = blocks[1..]
        .iter()
        .any(|b| b["text"].as_str().unwrap().contains("could not be listed"));
    assert!(said, "{v}");
}
