//! The summary: JSON shape and the human-readable page.

use std::collections::BTreeSet;

use sandgate_policy::Summary;
use serde_json::Value;

use crate::common::Fixture;

const FULL: &str = r#"
[fs]
read_roots = ["inputs", "templates"]
write_root = "workspace"
deny_write = [".github/**", "*.yml"]
[exec]
enabled = true
env_inherit = ["GITHUB_TOKEN"]
process_allow = ["git:status"]
[net]
allow = ["api.example.com", "127.0.0.1:7655"]
[budgets]
fs_ops = 1000
exec_ops = 0
"#;

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect()
}

#[test]
fn summary_json_shape() {
    let fx = Fixture::new();
    let p = fx.load(FULL).unwrap();
    let v: Value = serde_json::from_str(&p.summary().to_json()).unwrap();
    assert_eq!(
        keys(&v),
        BTreeSet::from([
            "mode",
            "read_roots",
            "write_root",
            "deny_write",
            "limits",
            "exec",
            "net",
            "budgets",
            "digest"
        ])
    );
    assert_eq!(v["mode"], "restricted");
    let roots: Vec<_> = [fx.canon("project/inputs"), fx.canon("project/templates")]
        .iter()
        .map(|p| Value::from(p.to_str().unwrap()))
        .collect();
    assert_eq!(v["read_roots"], Value::Array(roots));
    assert_eq!(
        v["write_root"],
        fx.canon("project/workspace").to_str().unwrap()
    );
    assert_eq!(v["deny_write"], serde_json::json!([".github/**", "*.yml"]));
    assert_eq!(
        v["limits"],
        serde_json::json!({"max_read_bytes": 10485760, "max_write_bytes": 5242880, "allow_overwrite": false})
    );
    assert_eq!(
        v["exec"],
        serde_json::json!({
            "enabled": true, "shell": "/bin/bash", "timeout_ms": 30000, "max_output_bytes": 8388608,
            "max_memory_bytes": 2147483648u64, "max_tasks": 4096, "max_cpu_ms": null,
            "env_inherit": ["GITHUB_TOKEN"], "confine": "best_effort", "process_allow": ["git:status"]
        })
    );
    assert_eq!(
        v["net"],
        serde_json::json!({"allow": ["api.example.com", "127.0.0.1:7655"], "allow_http": false})
    );
    assert_eq!(
        v["budgets"],
        serde_json::json!({"fs_ops": 1000, "exec_ops": 0, "net_ops": null})
    );
    assert_eq!(v["digest"], p.digest());
    assert_eq!(p.summary().to_json_value(), v);
}

#[test]
fn summary_json_of_an_empty_policy() {
    let p = Fixture::new()
        .load("security_mode = \"trusted_host\"\n")
        .unwrap();
    let v: Value = serde_json::from_str(&p.summary().to_json()).unwrap();
    assert_eq!(v["mode"], "trusted_host");
    assert_eq!(v["read_roots"], serde_json::json!([]));
    assert_eq!(v["write_root"], Value::Null);
    assert_eq!(v["exec"]["enabled"], false);
    assert_eq!(
        v["budgets"],
        serde_json::json!({"fs_ops": null, "exec_ops": null, "net_ops": null})
    );
}

#[test]
fn summary_round_trips_through_json() {
    let p = Fixture::new().load(FULL).unwrap();
    let s = p.summary();
    let back: Summary = serde_json::from_str(&s.to_json()).unwrap();
    assert_eq!(back, s);
}

#[test]
fn summary_display_is_aligned_and_complete() {
    let fx = Fixture::new();
    let p = fx.load(FULL).unwrap();
    let text = p.summary().to_string();
    for needle in [
        "mode",
        "restricted",
        "read roots",
        "write root",
        "deny write",
        ".github/**",
        "every .git component",
        "max read",
        "10485760 bytes (10 MiB)",
        "overwrite",
        "shell",
        "/bin/bash -c COMMAND",
        "timeout",
        "30000 ms (30 s)",
        "max output",
        "env inherit",
        "GITHUB_TOKEN",
        "confine",
        "best_effort",
        "process allow",
        "git:status",
        "allow",
        "api.example.com",
        "127.0.0.1:7655",
        "http",
        "fs ops",
        "1000",
        "exec ops",
        "0 (none allowed)",
        "net ops",
        "unlimited",
        p.digest(),
        fx.canon("project/templates").to_str().unwrap(),
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    // Every indented row puts its value in the same column.
    let columns: BTreeSet<usize> = text
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(|l| {
            let b = l.as_bytes();
            (3..b.len())
                .find(|&i| b[i] != b' ' && b[i - 1] == b' ' && b[i - 2] == b' ')
                .unwrap_or(0)
        })
        .collect();
    assert_eq!(columns.len(), 1, "values not aligned:\n{text}");
}

#[test]
fn summary_display_says_what_is_off() {
    let text = Fixture::new().load("").unwrap().summary().to_string();
    for needle in [
        "none (no reads)",
        "none (no writes)",
        "disabled",
        "none (no network)",
        "refused (https and wss only)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

/// The summary's roots show bytes that are not UTF-8 as `\xNN`, never as
/// U+FFFD (a real name of its own): on the page and in the JSON.
#[test]
fn leads22_summary_roots_not_utf8_are_shown_as_their_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fx = Fixture::new();
    let home = fx.project().join(OsStr::from_bytes(b"d\xfc"));
    std::fs::create_dir_all(home.join("ws")).unwrap();
    let path = home.join("policy.toml");
    std::fs::write(&path, "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n").unwrap();
    let s = sandgate_policy::Policy::load(&path).unwrap().summary();
    assert!(s.read_roots[0].ends_with("d\\xfc/ws"), "{:?}", s.read_roots);
    assert_eq!(s.write_root.as_deref(), Some(s.read_roots[0].as_str()));
    let page = s.to_string();
    assert!(
        page.contains("d\\xfc/ws") && !page.contains('\u{fffd}'),
        "{page}"
    );
    let json = s.to_json();
    assert!(
        json.contains("d\\\\xfc/ws") && !json.contains('\u{fffd}'),
        "{json}"
    );
}

/// The summary's roots double a literal backslash, so that a root named
/// `d\xfc` (the four characters) and one named `d` + the byte 0xFC are
/// shown differently, on the page and in the JSON.
#[test]
fn shown23_summary_roots_with_a_backslash_are_shown_doubled() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fx = Fixture::new();
    let mut seen = Vec::new();
    for dir in [&b"d\xfc"[..], &b"d\\xfc"[..]] {
        let home = fx.project().join(OsStr::from_bytes(dir));
        std::fs::create_dir_all(home.join("ws")).unwrap();
        let path = home.join("policy.toml");
        std::fs::write(&path, "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n").unwrap();
        let s = sandgate_policy::Policy::load(&path).unwrap().summary();
        seen.push((s.read_roots[0].clone(), s.to_string(), s.to_json()));
    }
    let (byte, text) = (&seen[0], &seen[1]);
    assert_ne!(byte.0, text.0, "two roots, one name");
    assert!(byte.0.ends_with("/d\\xfc/ws"), "{}", byte.0);
    assert!(text.0.ends_with("/d\\\\xfc/ws"), "{}", text.0);
    assert!(text.1.contains("/d\\\\xfc/ws"), "{}", text.1);
    assert!(text.2.contains("/d\\\\\\\\xfc/ws"), "{}", text.2);
}

/// A root whose path holds a line feed is shown with it as `\u{a}` on the
/// summary's page, so that it cannot add a line of its own (a forged
/// `write root` line).
#[test]
fn shown23_summary_root_with_a_line_feed_is_one_line() {
    let fx = Fixture::new();
    let home = fx.project().join("d\n  write root        /");
    std::fs::create_dir_all(home.join("ws")).unwrap();
    let path = home.join("policy.toml");
    std::fs::write(&path, "[fs]\nread_roots = [\"ws\"]\n").unwrap();
    let s = sandgate_policy::Policy::load(&path).unwrap().summary();
    let page = s.to_string();
    assert!(!s.read_roots[0].contains('\n'), "{:?}", s.read_roots);
    assert!(page.contains("/d\\u{a}  write root        /ws"), "{page}");
    assert_eq!(page.matches("write root").count(), 2, "{page}");
}
