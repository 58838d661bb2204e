//! Deny-write patterns at every door that writes, as docs/reference/deny-write.md states them:
//! the directories a write or mkdir would make are checked, compatibility
//! forms are names of their own while case, canonical forms, ligatures and
//! ignorable code points fold, a pattern cannot start with an escape, and
//! the shell undoes what it did under other spellings and through a renamed
//! parent. Run as root and as uid 65534.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sandgate::policy::Policy;
use sandgate::{
    ErrorCode, ExecOptions, Executor, ProtectedAction, Sandbox, ToolSession, WriteOptions,
};
use serde_json::Value;

fn sandbox(root: &Path, patterns: &[&str]) -> Sandbox {
    let mut b = Sandbox::builder();
    b.read_root(root)
        .write_root(root)
        .deny_write_patterns(patterns.iter().copied())
        .allow_overwrite(true);
    b.build().unwrap()
}

fn protected_by(r: Result<impl std::fmt::Debug, sandgate::Error>, pattern: &str, named: &str) {
    let e = r.unwrap_err();
    assert_eq!(e.code(), ErrorCode::FsProtected, "{e}");
    assert_eq!(e.pattern(), Some(pattern), "{e}");
    assert!(e.message().contains(&format!("`{named}`")), "{e}");
}

#[test]
fn denyglob26_write_and_mkdir_check_each_directory_they_would_make() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let s = sandbox(r, &["secrets", "a/b"]);
    let w = WriteOptions::default();
    protected_by(s.write("secrets/k", b"x", w), "secrets", "secrets");
    protected_by(s.write("x/SECRETS/k", b"x", w), "secrets", "x/SECRETS");
    protected_by(s.mkdir("a/B/c"), "a/b", "a/B");
    assert!(!r.join("secrets").exists() && !r.join("x").exists() && !r.join("a").exists());
    // A name-only pattern names the directory, not what it holds.
    fs::create_dir(r.join("secrets")).unwrap();
    assert_eq!(s.write("secrets/k", b"x", w).unwrap(), 1);
}

#[test]
fn denyglob26_compatibility_forms_are_names_of_their_own() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let s = sandbox(r, &["Makefile", "secret.key", "ﬁle.txt", ".github/**"]);
    let w = WriteOptions::default();
    for (name, pattern) in [
        ("MAKEFILE", "Makefile"),
        ("Make\u{200b}file", "Makefile"),
        ("\u{17f}ecret.\u{212a}ey", "secret.key"),
        ("FILE.TXT", "ﬁle.txt"),
        (".G\u{130}THUB/x", ".github/**"),
        (".g\u{131}thub/x", ".github/**"),
        (".github//x", ".github/**"),
    ] {
        let e = s.write(name, b"x", w).unwrap_err();
        assert_eq!(
            (e.code(), e.pattern()),
            (ErrorCode::FsProtected, Some(pattern)),
            "{name:?}: {e}"
        );
    }
    // Full-width, mathematical and circled letters fold to the letter only
    // under compatibility normalization, which no volume applies to names.
    for name in [
        "ＭＡＫＥＦＩＬＥ",
        "\u{1d40c}akefile",
        "\u{24c2}akefile",
        "Makefile.",
        "Makefile ",
    ] {
        assert_eq!(s.write(name, b"x", w).unwrap(), 1, "{name:?}");
    }

    let ws = r.join("ws");
    fs::create_dir(&ws).unwrap();
    let p = r.join("policy.toml");
    fs::write(
        &p,
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\ndeny_write = [\"Makefile\"]\n",
    )
    .unwrap();
    let session = ToolSession::from_policy(&Policy::load(&p).unwrap()).unwrap();
    let a = session.handle_line(r#"{"op":"write","path":"MAKEFILE","content":"x"}"#);
    assert_eq!(a["error"]["code"], Value::from("E_FS_PROTECTED"), "{a}");
    assert_eq!(a["error"]["pattern"], Value::from("Makefile"), "{a}");
    let a = session.handle_line(r#"{"op":"write","path":"ＭＡＫＥＦＩＬＥ","content":"x"}"#);
    assert_eq!(a["ok"], Value::Bool(true), "{a}");
}

#[test]
fn denyglob26_a_pattern_cannot_start_with_an_escape() {
    let t = tempfile::tempdir().unwrap();
    let mut b = Sandbox::builder();
    b.write_root(t.path()).deny_write("\\*.lock");
    let Err(e) = b.build() else {
        panic!("a pattern starting with an escape was accepted")
    };
    assert_eq!(e.code(), ErrorCode::Policy, "{e}");
    assert!(e.message().contains("`\\*.lock`"), "{e}");
    let s = sandbox(t.path(), &["[*].lock"]);
    protected_by(
        s.write("*.lock", b"x", WriteOptions::default()),
        "[*].lock",
        "*.lock",
    );
    assert_eq!(s.write("a.lock", b"x", WriteOptions::default()).unwrap(), 1);
}

#[test]
fn denyglob26_the_shell_undoes_other_spellings_and_a_renamed_parent() {
    for namespaces in [false, true] {
        let t = tempfile::tempdir().unwrap();
        fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let r = t.path().join("w");
        fs::create_dir_all(r.join(".github/workflows")).unwrap();
        fs::write(r.join(".github/workflows/ci.yml"), "orig").unwrap();
        fs::write(r.join("Makefile"), "orig").unwrap();
        let mut b = Executor::builder();
        b.write_root(&r)
            .enabled(true)
            .timeout_ms(60_000)
            .namespaces(namespaces);
        for p in [".github/**", "Makefile", "ﬁle.txt", "secrets"] {
            b.deny_write(p);
        }
        let ex = b.build().unwrap();
        ex.start().unwrap();
        ex.exec("true", ExecOptions::default()).unwrap();
        let cases: &[(&str, &[(&str, &str)])] = &[
            (
                "printf c > control.txt && printf evil > MAKEFILE",
                &[("MAKEFILE", "Makefile")],
            ),
            ("printf evil > FILE.TXT", &[("FILE.TXT", "ﬁle.txt")]),
            (
                "mkdir .G\u{130}THUB && echo x > .G\u{130}THUB/x",
                &[(".G\u{130}THUB", ".github/**")],
            ),
            (
                "mkdir -p q/SECRETS && echo x > q/SECRETS/k",
                &[("q/SECRETS", "secrets")],
            ),
        ];
        for (cmd, expect) in cases {
            let res = ex.exec(cmd, ExecOptions::default()).unwrap();
            assert_eq!(
                res.exit_code,
                0,
                "{cmd}: {}",
                String::from_utf8_lossy(&res.stderr)
            );
            let got: Vec<(&str, &str, ProtectedAction)> = res
                .protected_changes
                .iter()
                .map(|c| (c.path.as_str(), c.pattern.as_str(), c.action))
                .collect();
            let want: Vec<_> = expect
                .iter()
                .map(|&(p, pat)| (p, pat, ProtectedAction::Quarantined))
                .collect();
            assert_eq!(got, want, "namespaces={namespaces} {cmd}");
            assert!(!r.join(expect[0].0).exists(), "{cmd}");
        }
        assert_eq!(fs::read_to_string(r.join("control.txt")).unwrap(), "c");
        // The brief's parent rename: the floor puts it back, namespaces refuse it.
        let res = ex
            .exec(
                "mv .github gh && echo evil > gh/workflows/ci.yml && echo new > gh/workflows/new.yml",
                ExecOptions::default(),
            )
            .unwrap();
        if namespaces {
            assert_ne!(res.exit_code, 0);
        } else {
            assert_eq!(res.exit_code, 0, "{}", String::from_utf8_lossy(&res.stderr));
            assert!(res
                .protected_changes
                .iter()
                .any(|c| c.path == ".github/workflows/new.yml"
                    && c.action == ProtectedAction::Quarantined));
        }
        assert_eq!(
            fs::read_to_string(r.join(".github/workflows/ci.yml")).unwrap(),
            "orig"
        );
        assert!(!r.join(".github/workflows/new.yml").exists() && !r.join("gh").exists());
        assert_eq!(fs::read_to_string(r.join("Makefile")).unwrap(), "orig");
    }
}
