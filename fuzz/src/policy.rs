//! The policy file (docs/reference/policy.md): loading never panics; a refusal carries
//! `E_POLICY`; an accepted policy obeys every gate rule (roots are existing
//! canonical directories, the write root does not contain the policy's
//! directory, caps positive, timeout in range, budgets only for granted
//! capabilities, restricted mode's process and network limits), its digest
//! is the sha256 of the bytes, its summary is JSON, and loading is
//! deterministic. A valid policy with exactly one strictness fault (an
//! unknown key, a duplicated key, a wrong type) is refused for that fault.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sandgate_policy::{Policy, PolicyErrorKind, SecurityMode, CONFINED_GIT, KNOWN_KEYS};
use sha2::{Digest, Sha256};

use crate::bytes::Bytes;

/// A directory holding the roots the policies name, made once per process.
struct Fixture {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical tempdir");
        for d in ["inputs", "templates", "workspace", "workspace/sub"] {
            std::fs::create_dir_all(base.join(d)).expect("mkdir");
        }
        std::fs::write(base.join("file.txt"), b"x").expect("write");
        std::os::unix::fs::symlink("inputs", base.join("link")).expect("symlink");
        Fixture { _tmp: tmp, base }
    })
}

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("string")
}

/// A TOML value for a key, right type or not.
fn value(b: &mut Bytes, base: &Path) -> String {
    const STRINGS: &[&str] = &[
        "inputs",
        "templates",
        "workspace",
        "workspace/sub",
        ".",
        "..",
        "",
        "file.txt",
        "link",
        "missing",
        "/",
        "/tmp",
        "inputs/../workspace",
        "restricted",
        "trusted_host",
        "off",
        "best_effort",
        "required",
        "/bin/bash",
        "bash",
        "git:status",
        "git:diff",
        "git:push",
        "api.example.com",
        "*.example.com",
        "127.0.0.1",
        "127.0.0.1:7655",
        "localhost:7655",
        "[::1]:7655",
        "::1",
        "10.0.0.1",
        "169.254.169.254",
        "http://h",
        "h:0",
        "*.yml",
        ".github/**",
        "a\u{0}b",
        "é",
    ];
    match b.below(12) {
        0..=2 => toml_str(b.pick(STRINGS)),
        3 => toml_str(&base.join(b.pick(STRINGS)).display().to_string()),
        4 => b
            .pick(&[
                "0",
                "1",
                "-1",
                "30000",
                "86400000",
                "86400001",
                "9223372036854775807",
            ])
            .to_owned(),
        5 => b.pick(&["true", "false"]).to_owned(),
        6 => b.pick(&["1.5", "1979-05-27", "{}", "{ a = 1 }"]).to_owned(),
        _ => {
            let n = b.below(4);
            let items: Vec<String> = (0..n).map(|_| toml_str(b.pick(STRINGS))).collect();
            format!("[{}]", items.join(", "))
        }
    }
}

/// A policy text built from the known sections and keys
/// ([`KNOWN_KEYS`]: at the top level a section's name comes up as a plain
/// key too) with values of any type, now and then an unknown or repeated
/// key or table.
fn structured(b: &mut Bytes, base: &Path) -> String {
    let mut text = String::new();
    let nsec = 1 + b.below(5);
    for i in 0..nsec {
        let (name, keys) = if b.below(16) == 0 {
            ("bogus", &["x"][..])
        } else {
            b.pick(KNOWN_KEYS)
        };
        if i > 0 && name.is_empty() {
            continue;
        }
        if !name.is_empty() {
            text.push_str(&format!("[{name}]\n"));
        }
        for _ in 0..b.below(keys.len() + 2) {
            let key = if b.below(16) == 0 {
                "bogus"
            } else {
                b.pick(keys)
            };
            let v = value(b, base);
            text.push_str(&format!("{key} = {v}\n"));
        }
    }
    text
}

/// A valid policy; `fault` 1-3 injects one strictness fault.
fn faulted(fault: usize) -> (String, PolicyErrorKind) {
    let mut text = String::from(
        "security_mode = \"restricted\"\n[fs]\nread_roots = [\"inputs\"]\nwrite_root = \"workspace\"\n",
    );
    let kind = match fault {
        1 => {
            text.push_str("colour = \"blue\"\n");
            PolicyErrorKind::UnknownKey
        }
        2 => {
            text.push_str("write_root = \"templates\"\n");
            PolicyErrorKind::DuplicateKey
        }
        _ => {
            text.push_str("max_read_bytes = \"10\"\n");
            PolicyErrorKind::WrongType
        }
    };
    (text, kind)
}

/// Decodes `data` into policy bytes and checks them.
pub fn check(data: &[u8]) {
    let f = fixture();
    let mut b = Bytes::new(data);
    match b.byte() % 8 {
        0 => check_bytes(b.rest(), &f.base),
        1 => {
            let (text, kind) = faulted(1 + b.below(3));
            let e = Policy::from_bytes(text.as_bytes(), &f.base, None)
                .expect_err("a faulted policy loads");
            assert_eq!(e.kind(), kind, "{text}: {e}");
            check_bytes(text.as_bytes(), &f.base);
        }
        _ => {
            let text = structured(&mut b, &f.base);
            check_bytes(text.as_bytes(), &f.base);
        }
    }
}

/// The invariants for one policy text.
pub fn check_bytes(bytes: &[u8], base: &Path) {
    let first = Policy::from_bytes(bytes, base, None);
    let again = Policy::from_bytes(bytes, base, None);
    match (&first, &again) {
        (Ok(p), Ok(q)) => {
            assert_eq!(p.digest(), q.digest());
            assert_eq!(p.summary().to_json(), q.summary().to_json());
            check_policy(p, bytes, base);
        }
        (Err(e), Err(e2)) => {
            assert_eq!(e.code().as_str(), "E_POLICY");
            assert_eq!((e.kind(), e.key()), (e2.kind(), e2.key()));
            assert_eq!(e.problems(), e2.problems());
            assert!(!e.message().is_empty());
            assert!(e.to_string().starts_with("policy"));
            check_problems(e, bytes);
        }
        _ => panic!("loading twice answered differently"),
    }
}

/// Every problem is located where it says, in file order.
fn check_problems(e: &sandgate_policy::PolicyError, bytes: &[u8]) {
    let problems = e.problems();
    assert!(!problems.is_empty());
    assert_eq!((problems[0].kind(), problems[0].key()), (e.kind(), e.key()));
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let lines: Vec<&str> = text.split('\n').collect();
    let mut last = 0;
    for p in problems {
        assert!(!p.message().is_empty());
        let Some(at) = p.location() else {
            continue;
        };
        assert!(at.span().start >= last, "problems out of file order: {e}");
        last = at.span().start;
        let line = lines.get(at.line() - 1).expect("the line exists");
        // A problem in a `[[net.credentials]]` entry is located but never
        // quoted: the line may hold a token.
        let credential = p.key().is_some_and(|k| {
            k.strip_prefix("net.credentials")
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        });
        let quoted = if credential {
            ""
        } else {
            line.trim_end_matches('\r')
        };
        assert_eq!(at.source_line(), quoted, "{e}");
        assert!(
            at.column() >= 1 && at.column() <= line.chars().count() + 1,
            "{e}"
        );
    }
}

fn check_policy(p: &Policy, bytes: &[u8], base: &Path) {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(p.digest(), format!("sha256:{hex}"));
    let roots = p
        .read_roots()
        .iter()
        .map(PathBuf::as_path)
        .chain(p.write_root());
    for r in roots {
        assert!(r.is_absolute() && r.is_dir(), "root {r:?}");
        assert_eq!(
            r.canonicalize().ok().as_deref(),
            Some(r),
            "root {r:?} not canonical"
        );
    }
    if let Some(w) = p.write_root() {
        assert!(
            !base.starts_with(w),
            "write root {w:?} holds the policy's directory"
        );
    }
    let limits = p.limits();
    assert!(limits.max_read_bytes > 0 && limits.max_write_bytes > 0);
    let exec = p.exec();
    assert!((1..=86_400_000).contains(&exec.timeout_ms));
    assert!(exec.max_output_bytes > 0);
    let budgets = p.budgets();
    if budgets.fs_ops.is_some() {
        assert!(!p.read_roots().is_empty() || p.write_root().is_some());
    }
    if budgets.exec_ops.is_some() {
        assert!(exec.enabled);
    }
    if budgets.net_ops.is_some() {
        assert!(!p.net_allow().is_empty());
    }
    for e in p.net_allow() {
        assert_ne!(e.port(), Some(0), "{}", e.raw());
    }
    if p.security_mode() == SecurityMode::Restricted {
        for a in &exec.process_allow {
            assert!(CONFINED_GIT.contains(&a.as_str()), "process_allow {a:?}");
        }
        for e in p.net_allow() {
            if e.is_loopback() {
                assert!(
                    matches!(e.host(), sandgate_policy::NetHost::Ip(_)) && e.port().is_some(),
                    "restricted mode admitted {:?}",
                    e.raw()
                );
            }
        }
    }
    let json: serde_json::Value =
        serde_json::from_str(&p.summary().to_json()).expect("summary is JSON");
    assert!(json.is_object());
    assert!(json.to_string().contains(p.digest()));
    let _ = p.summary().to_string();
}
