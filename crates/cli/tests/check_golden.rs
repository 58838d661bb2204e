//! `sandgate check` on every policy the project ships (the example policy
//! and every distinct policy of tests/vectors) against the outputs recorded
//! in tests/golden/check.txt: the summary (text and JSON) and the digest of
//! an accepted policy, and the refused key of a refused one, must not change
//! when the policy decoder does.
//!
//! Case directories differ from run to run, so their canonical path is
//! written `$DIR`. Run with `SANDGATE_BLESS=1` to record the outputs anew
//! (only when a change of output is intended).

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const SANDGATE: &str = env!("CARGO_BIN_EXE_sandgate");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/check.txt")
}

/// Builds the part of a vector case's tree that a policy can name: files,
/// directories and symlinks.
fn build_tree(dir: &Path, tree: &[Value]) {
    for entry in tree {
        let path = dir.join(entry["path"].as_str().expect("tree path"));
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        if let Some(text) = entry["file"].as_str() {
            fs::write(&path, text).unwrap();
        } else if entry["dir"] == Value::Bool(true) {
            fs::create_dir_all(&path).unwrap();
        } else if let Some(target) = entry["symlink"].as_str() {
            symlink(target, &path).unwrap();
        }
    }
}

/// The first line of stderr that names a key, or the first line.
fn refused_key(stderr: &str) -> String {
    stderr
        .split("policy key `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .map(|k| format!("key {k}"))
        .unwrap_or_else(|| "no key".to_owned())
}

/// `sandgate check` (text, then `--json`) on the policy file in `dir`.
fn record(out: &mut String, label: &str, dir: &Path, policy: &Path) {
    let canonical = dir.canonicalize().unwrap();
    let shown = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes).replace(&canonical.display().to_string(), "$DIR")
    };
    out.push_str(&format!("=== {label}\n"));
    let text = Command::new(SANDGATE)
        .arg("check")
        .arg(policy)
        .output()
        .unwrap();
    let code = text.status.code().unwrap_or(-1);
    out.push_str(&format!("exit {code}\n"));
    if code != 0 {
        out.push_str(&refused_key(&shown(&text.stderr)));
        out.push('\n');
        return;
    }
    out.push_str(&shown(&text.stdout));
    let json = Command::new(SANDGATE)
        .args(["check", "--json"])
        .arg(policy)
        .output()
        .unwrap();
    assert!(json.status.success(), "{label}: --json refused");
    out.push_str("json ");
    out.push_str(&shown(&json.stdout));
}

fn outputs() -> String {
    let mut out = String::new();
    let examples = repo().join("examples");
    record(
        &mut out,
        "examples/agent-policy.toml",
        &examples,
        &examples.join("agent-policy.toml"),
    );
    let mut files: Vec<PathBuf> = fs::read_dir(repo().join("tests/vectors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut seen = BTreeSet::new();
    for file in files {
        let doc: Value = serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for case in doc["cases"].as_array().unwrap() {
            let policy = case["policy"].as_str().unwrap();
            if !seen.insert(policy.to_owned()) {
                continue;
            }
            let tmp = tempfile::tempdir().unwrap();
            build_tree(
                tmp.path(),
                case["tree"].as_array().map_or(&[], Vec::as_slice),
            );
            let path = tmp.path().join("policy.toml");
            fs::write(&path, policy).unwrap();
            let label = format!("{name}: {}", case["name"].as_str().unwrap());
            record(&mut out, &label, tmp.path(), &path);
        }
    }
    out
}

#[test]
fn check_outputs_match_the_recorded_ones() {
    let now = outputs();
    if std::env::var_os("SANDGATE_BLESS").is_some() {
        fs::create_dir_all(golden_path().parent().unwrap()).unwrap();
        fs::write(golden_path(), &now).unwrap();
        return;
    }
    let recorded = fs::read_to_string(golden_path()).expect("tests/golden/check.txt");
    // Every recorded output must be produced again unchanged; a policy
    // added to the vectors since the recording is checked from the next
    // recording on (it has no recorded output to compare with).
    let now_sections = sections(&now);
    let mut missing = Vec::new();
    for (name, body) in sections(&recorded) {
        match now_sections.iter().find(|(n, _)| *n == name) {
            Some((_, now_body)) => {
                assert_eq!(now_body, &body, "sandgate check output changed for {name}")
            }
            None => missing.push(name),
        }
    }
    assert!(
        missing.is_empty(),
        "recorded policies no longer shipped: {missing:?}"
    );
}

/// The output split at its `=== ` headers: (header, body).
fn sections(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("=== ") {
            out.push((name.to_owned(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}
