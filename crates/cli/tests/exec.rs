//! `exec` through the tool endpoint and `sandgate exec`, on real processes:
//! refusals before anything runs, results for whatever ran, confinement in
//! force where the kernel has Landlock.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use sandgate::policy::Policy;
use sandgate::ToolSession;
use serde_json::{json, Value};

mod support;
use support::holding;

/// A case directory with `ws/` (write root), `outside/secret`, and a policy.
fn case(exec_section: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("ws/sub")).unwrap();
    fs::create_dir_all(dir.path().join("outside")).unwrap();
    fs::write(dir.path().join("outside/secret"), "OUTSIDE").unwrap();
    fs::write(dir.path().join("ws/hello.txt"), "hello\n").unwrap();
    std::os::unix::fs::symlink("../outside", dir.path().join("ws/out")).unwrap();
    let policy = format!("[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n{exec_section}");
    fs::write(dir.path().join("policy.toml"), policy).unwrap();
    dir
}

fn session(dir: &Path) -> ToolSession {
    ToolSession::from_policy(&Policy::load(dir.join("policy.toml")).unwrap()).unwrap()
}

fn ask(s: &ToolSession, req: Value) -> Value {
    s.handle_line(&req.to_string())
}

const ENABLED: &str = "[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 5000\n";

#[test]
fn exec_disabled_is_refused_before_anything_runs() {
    let dir = case("");
    let a = ask(
        &session(dir.path()),
        json!({"op":"exec","command":"touch ran"}),
    );
    assert_eq!(a["error"]["code"], "E_DENIED", "{a}");
    assert!(!dir.path().join("ws/ran").exists());
}

#[test]
fn exec_runs_in_the_write_root_and_reports_confinement() {
    let dir = case(ENABLED);
    let s = session(dir.path());
    let a = ask(&s, json!({"op":"exec","command":"cat hello.txt; pwd"}));
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(a["exit_code"], 0);
    let out = a["stdout"].as_str().unwrap();
    assert!(
        out.starts_with("hello\n") && out.trim_end().ends_with("/ws"),
        "{out}"
    );
    assert!(a["env_names_digest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    let a = ask(&s, json!({"op":"exec","command":"pwd","cwd":"sub"}));
    assert!(
        a["stdout"]
            .as_str()
            .unwrap()
            .trim_end()
            .ends_with("/ws/sub"),
        "{a}"
    );
    if landlock_abi().is_some() {
        assert_eq!(a["confined"]["fs"], true, "{a}");
        let a = ask(&s, json!({"op":"exec","command":"cat ../outside/secret"}));
        assert_ne!(a["exit_code"], 0, "{a}");
        assert!(!a["stdout"].as_str().unwrap().contains("OUTSIDE"));
        let a = ask(&s, json!({"op":"exec","command":"echo x > ../outside/new"}));
        assert_ne!(a["exit_code"], 0, "{a}");
        assert!(!dir.path().join("outside/new").exists());
    } else {
        eprintln!("note: no Landlock on this kernel; confinement assertions skipped");
    }
}

/// The Landlock ABI a trivial run reports (None without Landlock).
fn landlock_abi() -> Option<u32> {
    let dir = case(ENABLED);
    let a = ask(&session(dir.path()), json!({"op":"exec","command":"true"}));
    a["confined"]["landlock_abi"].as_u64().map(|v| v as u32)
}

#[test]
fn exec_cwd_is_resolved_beneath_the_root() {
    let dir = case(ENABLED);
    let s = session(dir.path());
    for (cwd, code) in [
        ("..", "E_PATH_INVALID"),
        ("/tmp", "E_PATH_INVALID"),
        ("out", "E_PATH_ESCAPE"),
        ("nope", "E_NOT_FOUND"),
        ("hello.txt", "E_NOT_DIR"),
    ] {
        let a = ask(&s, json!({"op":"exec","command":"touch ran","cwd":cwd}));
        assert_eq!(a["error"]["code"], code, "cwd {cwd}: {a}");
    }
    assert!(!dir.path().join("outside/ran").exists());
}

#[test]
fn exec_timeout_and_exit_codes_are_results() {
    let dir = case(ENABLED);
    let s = session(dir.path());
    let a = ask(
        &s,
        json!({"op":"exec","command":"sleep 20","timeout_ms":200}),
    );
    assert_eq!(
        (
            a["ok"].clone(),
            a["exit_code"].clone(),
            a["timed_out"].clone()
        ),
        (json!(true), json!(124), json!(true))
    );
    let a = ask(&s, json!({"op":"exec","command":"exit 7"}));
    assert_eq!(a["exit_code"], 7);
    let a = ask(&s, json!({"op":"exec","command":"no-such-command-sg"}));
    assert_eq!(a["exit_code"], 127);
    let a = ask(&s, json!({"op":"exec","command":"true","timeout_ms":0}));
    assert_eq!(a["error"]["code"], "E_REQUEST");
    let a = ask(
        &s,
        json!({"op":"exec","command":"true","shell":"/bin/bash"}),
    );
    assert_eq!(a["error"]["code"], "E_REQUEST");
}

#[test]
fn exec_budget_is_counted() {
    let dir = case(&format!("{ENABLED}[budgets]\nexec_ops = 2\n"));
    let s = session(dir.path());
    for _ in 0..2 {
        assert_eq!(
            ask(&s, json!({"op":"exec","command":"true"}))["exit_code"],
            0
        );
    }
    assert_eq!(
        ask(&s, json!({"op":"exec","command":"true"}))["error"]["code"],
        "E_DENIED"
    );
}

#[test]
fn exec_output_is_redacted_and_capped() {
    let dir = case(&format!("{ENABLED}max_output_bytes = 1000\n"));
    let s = session(dir.path());
    let a = ask(
        &s,
        json!({"op":"exec","command":"printf 'ghp_'; sleep 0.1; printf 'abcdefghijklmnopqrstuvwxyz0123\\n'"}),
    );
    assert_eq!(a["stdout"], "[REDACTED]\n", "{a}");
    let a = ask(
        &s,
        json!({"op":"exec","command":"head -c 100000 /dev/zero | tr '\\0' x"}),
    );
    assert_eq!(
        (a["truncated"].clone(), a["stdout"].as_str().unwrap().len()),
        (json!(true), 1000),
        "{a}"
    );
}

#[test]
fn sandgate_exec_passes_the_exit_code_and_refuses_with_2() {
    let dir = case(ENABLED);
    let bin = env!("CARGO_BIN_EXE_sandgate");
    let policy = dir.path().join("policy.toml");
    let out = Command::new(bin)
        .args(["exec", "--policy"])
        .arg(&policy)
        .args(["--", "cat", "hello.txt;", "exit", "5"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(out.stdout, b"hello\n");
    let off = case("");
    let out = Command::new(bin)
        .args(["exec", "--policy"])
        .arg(off.path().join("policy.toml"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("E_DENIED"));
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

/// A repository in the write root whose own config would run programs that
/// leave sentinels in the write root itself (so only git's hardening, not
/// Landlock, can stop them).
fn hostile_repo(exec_section: &str) -> Option<tempfile::TempDir> {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("note: git missing; confined git tests skipped");
        return None;
    }
    let dir = case(exec_section);
    let ws = dir.path().join("ws");
    git(&ws, &["init", "-q"]);
    git(
        &ws,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "add",
            "hello.txt",
        ],
    );
    git(
        &ws,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ],
    );
    let evil = |name: &str| format!("sh -c 'touch {}/sentinel-{name}'", ws.display());
    let config = format!(
        "[core]\n\tfsmonitor = \"{}\"\n\tpager = \"{}\"\n[diff]\n\texternal = \"{}\"\n",
        evil("fsmonitor"),
        evil("pager"),
        evil("external")
    );
    let mut c = fs::read_to_string(ws.join(".git/config")).unwrap();
    c.push_str(&config);
    fs::write(ws.join(".git/config"), c).unwrap();
    fs::write(ws.join("hello.txt"), "changed\n").unwrap();
    Some(dir)
}

#[test]
fn confined_git_runs_without_the_shell_and_runs_nothing_from_the_repo() {
    let Some(dir) = hostile_repo("[exec]\nprocess_allow = [\"git:status\", \"git:diff\"]\n") else {
        return;
    };
    let s = session(dir.path());
    let a = ask(&s, json!({"op":"exec","command":"git status --short"}));
    assert_eq!(
        (a["ok"].clone(), a["exit_code"].clone()),
        (json!(true), json!(0)),
        "{a}"
    );
    assert!(a["stdout"].as_str().unwrap().contains("M hello.txt"), "{a}");
    let a = ask(&s, json!({"op":"exec","command":"git diff --stat"}));
    assert_eq!(a["exit_code"], 0, "{a}");
    assert!(a["stdout"].as_str().unwrap().contains("hello.txt"), "{a}");
    let a = ask(&s, json!({"op":"exec","command":"git diff"}));
    assert!(a["stdout"].as_str().unwrap().contains("+changed"), "{a}");
    let sentinels: Vec<_> = fs::read_dir(dir.path().join("ws"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("sentinel"))
        .collect();
    assert!(sentinels.is_empty(), "the repository ran {sentinels:?}");
    for (cmd, code) in [
        ("git log", "E_DENIED"),
        ("git diff --output=/tmp/x", "E_DENIED"),
        ("git -c core.pager=sh status", "E_DENIED"),
        ("git status; touch pwned", "E_REQUEST"),
        ("ls", "E_DENIED"),
    ] {
        let a = ask(&s, json!({"op":"exec","command":cmd}));
        assert_eq!(a["error"]["code"], code, "{cmd}: {a}");
    }
    assert!(!dir.path().join("ws/pwned").exists());
}

/// SIGTERM to `sandgate tool` while an `exec` runs ends the command's
/// whole tree (background and setsid'd children too) before the endpoint
/// exits 143; an idle endpoint exits 143 at once.
#[test]
fn a_signalled_tool_endpoint_ends_the_running_command_and_exits_143() {
    let dir = case(&ENABLED.replace("5000", "60000"));
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_sandgate"))
            .args(["tool", "--policy"])
            .arg(dir.path().join("policy.toml"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let token = format!(
        "78.{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let mut child = spawn();
    let mut stdin = child.stdin.take().unwrap();
    let command = format!(
        "sleep {token} & setsid sleep {token} & trap '' TERM; touch started; sleep {token}"
    );
    writeln!(stdin, "{}", json!({"op": "exec", "command": command})).unwrap();
    stdin.flush().unwrap();
    let t0 = std::time::Instant::now();
    while !dir.path().join("ws/started").exists() || holding(&token).len() < 3 {
        assert!(t0.elapsed().as_secs() < 20, "the command never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kill = |pid: u32| {
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
    };
    assert!(kill(child.id()).success());
    let status = child.wait().unwrap();
    let t0 = std::time::Instant::now();
    while !holding(&token).is_empty() && t0.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left = holding(&token);
    for p in &left {
        let pid = p.split(' ').next().unwrap();
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    assert!(
        left.is_empty(),
        "sandgate tool ended ({status}) and left {left:?}"
    );
    assert_eq!(status.code(), Some(143));

    // Idle, waiting for a request: ends at once.
    let mut idle = spawn();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(kill(idle.id()).success());
    assert_eq!(idle.wait().unwrap().code(), Some(143));
}
