//! `sandgate explain` against what `sandgate tool` actually does, on the
//! example policy: for each case the explanation (allowed, or the refusal's
//! code) must be what the endpoint then answers for the same request. Each
//! case runs on its own fresh copy of examples/, explain first (it must
//! change nothing), then the endpoint.

use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

const SANDGATE: &str = env!("CARGO_BIN_EXE_sandgate");

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Copies a tree, keeping symlinks as symlinks.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if kind.is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Every entry below `dir` with its content, to show nothing changed.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
                out.push((path, Vec::new()));
            } else if meta.is_file() {
                out.push((path.clone(), fs::read(&path).unwrap()));
            } else {
                out.push((
                    path.clone(),
                    fs::read_link(&path)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            }
        }
    }
    out.sort();
    out
}

fn explain(policy: &Path, kind: &str, target: &str) -> Value {
    let out = Command::new(SANDGATE)
        .args(["explain", "--json", "--as", kind])
        .arg(policy)
        .arg(target)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{kind} {target}: {e}: {text:?} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let answer = v["answers"][0].clone();
    let want_exit = if answer["allowed"] == Value::Bool(true) {
        0
    } else {
        1
    };
    assert_eq!(out.status.code(), Some(want_exit), "{kind} {target}: {v}");
    answer
}

fn tool(policy: &Path, request: &Value) -> Value {
    let mut child = Command::new(SANDGATE)
        .args(["tool", "--policy"])
        .arg(policy)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{request}").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(text.lines().next().expect("one answer")).unwrap()
}

/// (kind, target, expected: "OK" or the code) — the expectation pins the
/// case, the endpoint must agree with explain.
const CASES: &[(&str, &str, &str)] = &[
    ("read", "notes/todo.md", "OK"),
    ("read", "release-notes.md", "OK"),
    ("read", "src/parser.py", "OK"),
    ("read", "missing.txt", "E_NOT_FOUND"),
    ("read", "../private/secret.txt", "E_PATH_INVALID"),
    ("read", "/etc/passwd", "E_PATH_INVALID"),
    ("read", "notes", "E_NOT_FILE"),
    ("read", "shared-notes/secret.txt", "E_PATH_ESCAPE"),
    ("write", "notes/new.md", "OK"),
    ("write", "notes/todo.md", "OK"),
    ("write", "deep/new/dirs/file.txt", "OK"),
    ("write", "release-notes.md", "OK"),
    ("write", ".github/workflows/ci.yml", "E_FS_PROTECTED"),
    ("write", "Cargo.lock", "E_FS_PROTECTED"),
    ("write", ".git/config", "E_FS_PROTECTED"),
    ("write", ".", "E_PATH_INVALID"),
    ("write", "shared-notes/x.txt", "E_PATH_ESCAPE"),
    ("write", "notes", "E_NOT_FILE"),
    ("run", "echo hello", "OK"),
    ("run", "git status", "OK"),
];

fn request(kind: &str, target: &str) -> Value {
    match kind {
        "read" => json!({"op": "read", "path": target}),
        "write" => json!({"op": "write", "path": target, "content": "x\n", "overwrite": true}),
        _ => json!({"op": "exec", "command": target}),
    }
}

#[test]
fn explain_agrees_with_the_tool_endpoint_on_the_example_policy() {
    let mut problems = Vec::new();
    for (kind, target, want) in CASES {
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&examples_dir(), tmp.path());
        let policy = tmp.path().join("agent-policy.toml");
        let before = snapshot(tmp.path());
        let said = explain(&policy, kind, target);
        assert_eq!(
            before,
            snapshot(tmp.path()),
            "explain {kind} {target} changed the tree"
        );
        let said_code = said["code"].as_str().unwrap_or("OK");
        let answer = tool(&policy, &request(kind, target));
        let did = answer["error"]["code"].as_str().unwrap_or("OK");
        if answer["ok"] != said["allowed"] || said_code != did {
            problems.push(format!(
                "{kind} {target}: explain says {said_code} ({}), the endpoint answered {did} ({answer})",
                said["rule"]
            ));
        }
        if said_code != *want {
            problems.push(format!(
                "{kind} {target}: explain says {said_code}, want {want}"
            ));
        }
        if said["rule"].as_str().unwrap_or("").is_empty() {
            problems.push(format!("{kind} {target}: no rule named"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn explain_names_the_deciding_rule() {
    let policy = examples_dir().join("agent-policy.toml");
    let read = explain(&policy, "read", "release-notes.md");
    assert_eq!(read["rule"], "fs.read_roots[1]");
    let write = explain(&policy, "write", ".github/workflows/ci.yml");
    assert_eq!(write["code"], "E_FS_PROTECTED");
    assert_eq!(write["rule"], "fs.deny_write \".github/**\"");
    let lock = explain(&policy, "write", "Cargo.lock");
    assert_eq!(lock["rule"], "fs.deny_write \"*.lock\"");
    let run = explain(&policy, "run", "ls");
    assert_eq!(run["rule"], "exec.enabled = true");
    let connect = explain(&policy, "connect", "api.example.com:443");
    assert_eq!(connect["code"], "E_NET_DENIED");
    assert_eq!(connect["allowed"], false);
}

#[test]
fn explain_guesses_what_the_target_is() {
    let policy = examples_dir().join("agent-policy.toml");
    let ask = |target: &str| -> Vec<String> {
        let out = Command::new(SANDGATE)
            .args(["explain", "--json"])
            .arg(&policy)
            .arg(target)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["answers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["op"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ask("notes/todo.md"), ["read", "write"]);
    assert_eq!(ask("example.com:443"), ["connect"]);
    assert_eq!(ask("[::1]:7655"), ["connect"]);
    assert_eq!(ask("2606:4700::abcd"), ["connect"]);
    assert_eq!(ask("ls -l"), ["run"]);
}

#[test]
fn explain_reads_an_ipv6_connect_target_as_the_policy_does() {
    use sandgate::policy::Policy;
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    fs::write(
        &policy,
        "[net]\nallow = [\"2606:4700::1111\", \"[2606:4700::2]:8443\"]\n",
    )
    .unwrap();
    let p = Policy::load(&policy).unwrap();
    // (target, the host and port the enforcement is asked about)
    let cases: &[(&str, &str, Option<u16>)] = &[
        ("2606:4700::1111", "2606:4700::1111", None),
        ("[2606:4700::1111]", "2606:4700::1111", None),
        ("[2606:4700::1111]:8080", "2606:4700::1111", Some(8080)),
        ("[2606:4700::2]:8443", "2606:4700::2", Some(8443)),
        ("2606:4700::2", "2606:4700::2", None),
    ];
    for (target, host, port) in cases {
        let want = p.authorize("https", host, *port, None);
        let got = explain(&policy, "connect", target);
        assert_eq!(
            got["allowed"],
            Value::Bool(want.allowed),
            "explain {target}: {got} but the policy says {want:?}"
        );
    }
    // A target that could be read two ways is refused as such, never
    // answered for one of the readings.
    let got = explain(&policy, "connect", "2606:4700::1111:443");
    assert_eq!(got["allowed"], false);
    assert!(
        got["detail"].as_str().unwrap().contains("reads as a port"),
        "{got}"
    );
}

#[test]
fn run17_a_budget_of_zero_is_what_explain_answers() {
    // `budgets.fs_ops = 0` and `budgets.exec_ops = 0` allow no call at all,
    // yet explain answered "allowed" for a read, a write and a command
    // that the endpoint then refused with E_DENIED.
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("ws")).unwrap();
    fs::write(tmp.path().join("ws/a.txt"), "hello\n").unwrap();
    let policy = tmp.path().join("policy.toml");
    fs::write(
        &policy,
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\nallow_overwrite = true\n\
         [exec]\nenabled = true\n[budgets]\nfs_ops = 0\nexec_ops = 0\n",
    )
    .unwrap();
    for (kind, target, rule) in [
        ("read", "a.txt", "budgets.fs_ops = 0"),
        ("write", "new.txt", "budgets.fs_ops = 0"),
        ("run", "echo hi", "budgets.exec_ops = 0"),
    ] {
        let said = explain(&policy, kind, target);
        let answer = tool(&policy, &request(kind, target));
        assert_eq!(answer["error"]["code"], "E_DENIED", "{kind}: {answer}");
        assert_eq!(said["allowed"], false, "{kind} {target}: {said}");
        assert_eq!(said["code"], "E_DENIED", "{kind} {target}: {said}");
        assert_eq!(said["rule"], rule, "{kind} {target}: {said}");
    }
    assert!(!tmp.path().join("ws/new.txt").exists());
}

/// `explain` names the read root that allows a read as the summary does,
/// with a byte that is not UTF-8 as `\xNN`, never as U+FFFD: a root in
/// `d` + 0xFC and one in `d` + U+FFFD (two directories) are named apart.
#[test]
fn shown23_explain_names_a_root_not_utf8_as_its_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    for dir in [&b"d\xfc"[..], "d\u{fffd}".as_bytes()] {
        let home = tmp.path().join(OsStr::from_bytes(dir));
        fs::create_dir_all(home.join("ws")).unwrap();
        fs::write(home.join("ws/a.txt"), "x").unwrap();
        fs::write(home.join("policy.toml"), "[fs]\nread_roots = [\"ws\"]\n").unwrap();
        // The policy named relative to the directory: the arguments are
        // text.
        let out = Command::new(SANDGATE)
            .args(["explain", "--json", "--as", "read", "policy.toml", "a.txt"])
            .current_dir(&home)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(0), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        let answer = &v["answers"][0];
        assert_eq!(answer["allowed"], Value::Bool(true), "{answer}");
        seen.push(answer["detail"].as_str().unwrap().to_owned());
    }
    assert_ne!(seen[0], seen[1], "two roots, one name");
    assert!(seen[0].ends_with("/d\\xfc/ws"), "{}", seen[0]);
    assert!(seen[1].ends_with("/d\u{fffd}/ws"), "{}", seen[1]);
}

/// Explaining a confined git command vets it as running it would (the
/// schema, the repository) but makes no private copy of the repository,
/// which running it does: explaining writes nothing. With `TMPDIR` naming
/// a directory that does not exist, where no copy could be made, the
/// command is still explained as allowed (before, explain made the copy,
/// and answered `E_IO`), and nothing is made there; a refused flag is
/// still refused.
#[test]
fn explain27_a_git_command_is_vetted_without_copying_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status();
    if !init.is_ok_and(|s| s.success()) {
        eprintln!("note: skipped: git cannot make a repository here");
        return;
    }
    let policy = dir.path().join("policy.toml");
    fs::write(
        &policy,
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n\n[exec]\nprocess_allow = [\"git:status\"]\n",
    )
    .unwrap();
    let missing = dir.path().join("missing");
    let ask = |command: &str| {
        let out = Command::new(SANDGATE)
            .args(["explain", "--json", "--as", "run"])
            .arg(&policy)
            .arg(command)
            .env("TMPDIR", &missing)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{command}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v["answers"][0].clone())
    };
    let (code, answer) = ask("git status");
    assert_eq!(code, Some(0), "{answer}");
    assert_eq!(answer["allowed"], true, "{answer}");
    assert_eq!(answer["rule"], "exec.process_allow \"git:status\"");
    assert!(!missing.exists(), "explain made {}", missing.display());
    let (code, answer) = ask("git status --output=x");
    assert_eq!(code, Some(1), "{answer}");
    assert_eq!(answer["allowed"], false, "{answer}");
}
