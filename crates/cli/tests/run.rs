//! `sandgate run`: the supervisor's contract lines and exit codes, on real
//! processes.

use std::fs;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod support;
use support::{holding, sendable_name};

fn policy(exec: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("ws")).unwrap();
    let text = format!("[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n{exec}");
    fs::write(dir.path().join("policy.toml"), text).unwrap();
    dir
}

const ENABLED: &str =
    "[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 3000\nmax_output_bytes = 100000\n";

fn run(dir: &tempfile::TempDir, program: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .arg("run")
        .arg("--policy")
        .arg(dir.path().join("policy.toml"))
        .arg("--")
        .args(program)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The supervisor's unprefixed contract lines on stderr (split on LF only).
fn contract(out: &Output, token: &str) -> Vec<Value> {
    String::from_utf8_lossy(&out.stderr)
        .split('\n')
        .filter_map(|l| l.strip_prefix(&format!("{token}: ")))
        .map(|j| serde_json::from_str(j).unwrap_or_else(|e| panic!("bad {token} line {j:?}: {e}")))
        .collect()
}

#[test]
fn admission_first_then_the_programs_own_exit_code() {
    let dir = policy(ENABLED);
    let out = run(&dir, &["/bin/sh", "-c", "echo out; echo err >&2; exit 5"]);
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(out.stdout, b"out\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("policy: {"), "{stderr}");
    let adm = &contract(&out, "policy")[0];
    assert_eq!(adm["ok"], true);
    assert!(adm["policy_digest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert!(contract(&out, "policy-result").is_empty(), "{stderr}");
}

/// The program runs in the write root: a relative name with a `/` is
/// taken from there, not from the directory `sandgate run` was started
/// in, and a bare name is searched in the command's `PATH` (README).
#[test]
fn a_relative_program_is_taken_from_the_write_root() {
    use std::os::unix::fs::PermissionsExt;
    let dir = policy(ENABLED);
    let caller = tempfile::tempdir().unwrap();
    for (at, says) in [
        (dir.path().join("ws"), "write root"),
        (caller.path().to_path_buf(), "caller"),
    ] {
        let worker = at.join("worker");
        fs::write(&worker, format!("#!/bin/sh\necho {says}; pwd\n")).unwrap();
        fs::set_permissions(&worker, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .current_dir(caller.path())
        .arg("run")
        .arg("--policy")
        .arg(dir.path().join("policy.toml"))
        .args(["--", "./worker"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let root = fs::canonicalize(dir.path().join("ws")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("write root\n{}\n", root.display()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0));
    let out = run(&dir, &["true"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn arguments_reach_the_program_verbatim() {
    let dir = policy(ENABLED);
    let out = run(&dir, &["/usr/bin/printf", "%s|", "a b", "it's", "$(id)"]);
    assert_eq!(out.stdout, b"a b|it's|$(id)|");
}

#[test]
fn a_non_utf8_argument_reaches_the_program_byte_for_byte() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = policy(ENABLED);
    let word = OsStr::from_bytes(b"caf\xe9 \xff'\"$x");
    let out = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .arg("run")
        .arg("--policy")
        .arg(dir.path().join("policy.toml"))
        .arg("--")
        .args([OsStr::new("/usr/bin/printf"), OsStr::new("%s|"), word])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"caf\xe9 \xff'\"$x|");
    // The program is found in the child's PATH when it names no directory.
    let out = run(&dir, &["printf", "%s", "found"]);
    assert_eq!(out.stdout, b"found");
}

#[test]
fn a_refused_run_exits_2_with_the_decision() {
    let dir = policy("");
    let out = run(&dir, &["/bin/true"]);
    assert_eq!(out.status.code(), Some(2));
    let d = &contract(&out, "policy")[0];
    assert_eq!(
        (d["ok"].clone(), d["code"].as_str()),
        (Value::Bool(false), Some("E_DENIED"))
    );
    let broken = tempfile::tempdir().unwrap();
    fs::write(
        broken.path().join("policy.toml"),
        "[fs]\nwrite_root = \".\"\n",
    )
    .unwrap();
    let out = run(&broken, &["/bin/true"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(contract(&out, "policy")[0]["code"], "E_POLICY");
}

#[test]
fn run17_a_budget_of_zero_is_refused_before_the_admission() {
    // With `budgets.exec_ops = 0` the supervisor wrote `policy: {"ok":true…}`
    // and then a second `policy: {"ok":false…}`: a host that read the first
    // line took the run for admitted. The one decision is the refusal.
    let dir = policy(&format!("{ENABLED}[budgets]\nexec_ops = 0\n"));
    let out = run(&dir, &["/bin/sh", "-c", "echo ran"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let decisions = contract(&out, "policy");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(decisions.len(), 1, "{stderr}");
    assert_eq!(decisions[0]["ok"], false, "{stderr}");
    assert_eq!(decisions[0]["code"], "E_DENIED", "{stderr}");
    assert!(
        decisions[0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("[budgets] exec_ops = 0"),
        "{stderr}"
    );
    // One command is one: a budget of 1 runs it.
    let dir = policy(&format!("{ENABLED}[budgets]\nexec_ops = 1\n"));
    let out = run(&dir, &["/bin/sh", "-c", "echo ran"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"ran\n");
}

#[test]
fn a_timeout_exits_3_with_the_result_on_a_fresh_line() {
    let dir = policy(&ENABLED.replace("3000", "300"));
    let out = run(
        &dir,
        &["/bin/sh", "-c", "printf 'no newline' >&2; sleep 20"],
    );
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no newline\npolicy-result: {"), "{stderr}");
    let r = &contract(&out, "policy-result")[0];
    assert_eq!(
        (
            r["version"].clone(),
            r["stage"].as_str(),
            r["reason"].as_str()
        ),
        (Value::from(1), Some("execute"), Some("timeout"))
    );
}

#[test]
fn the_output_limit_exits_3() {
    let dir = policy(ENABLED);
    let out = run(&dir, &["/bin/sh", "-c", "head -c 1000000 /dev/zero"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(contract(&out, "policy-result")[0]["reason"], "output_limit");
}

#[test]
fn a_program_exiting_3_is_reported_as_worker_reserved_exit() {
    let dir = policy(ENABLED);
    let out = run(&dir, &["/bin/sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        contract(&out, "policy-result")[0]["reason"],
        "worker_reserved_exit"
    );
}

/// Exit 3 is the supervisor's own: a program cannot have it by dying of
/// `SIGXCPU`, or by exiting with the code that stands for it (152), where
/// no CPU limit is in force.
#[test]
fn a_program_cannot_fake_a_cpu_limit_the_policy_does_not_set() {
    let dir = policy(ENABLED);
    for script in ["kill -XCPU $$", "exit 152"] {
        let out = run(&dir, &["/bin/sh", "-c", script]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(152), "{script}: {stderr}");
        assert!(
            contract(&out, "policy-result").is_empty(),
            "{script}: {stderr}"
        );
    }
}

/// A program that cannot start exits 127 with a message naming it and
/// why; for a script whose `#!` interpreter is missing the message says
/// so (`execve` answers `ENOENT`, which alone reads as if the script
/// itself were missing).
#[test]
fn a_program_that_cannot_start_is_named_with_the_reason() {
    let dir = policy(ENABLED);
    let ws = dir.path().join("ws");
    let script = ws.join("script");
    fs::write(&script, "#!/nonexistent/interpreter\necho hi\n").unwrap();
    let plain = ws.join("plain");
    fs::write(&plain, "echo hi\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let missing = ws.join("missing");
    let cases = [
        (&script, "the interpreter its `#!` line names"),
        (&plain, "Permission denied"),
        (&missing, "No such file or directory"),
    ];
    for (program, why) in cases {
        let out = run(&dir, &[program.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(127), "{stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with("sandgate: cannot start"))
            .unwrap_or_else(|| panic!("{stderr}"));
        assert!(line.contains(program.to_str().unwrap()), "{line}");
        assert!(line.contains(why), "{line}");
    }
}

#[test]
fn forged_contract_lines_are_marked_after_every_break() {
    let dir = policy(ENABLED);
    // LF, CR, VT, FF, FS, GS, RS, NEL, LS, PS; NEL and LS split across writes.
    let script = r#"
        printf 'policy-result: {"forged":0}\n' >&2
        printf 'a\rpolicy-result: {"forged":1}\n' >&2
        printf 'a\013policy: {"forged":2}\n' >&2
        printf 'a\014policy: {"forged":3}\n' >&2
        printf 'a\034policy: x\n' >&2
        printf 'a\035policy: x\n' >&2
        printf 'a\036policy: x\n' >&2
        printf 'a\302' >&2; sleep 0.05; printf '\205policy: x\n' >&2
        printf 'a\342\200' >&2; sleep 0.05; printf '\250policy: x\n' >&2
        printf 'a\342\200\251policy: x\n' >&2
        printf 'policy: on stdout\n'
        printf 'say policy: in the middle\n' >&2
    "#;
    let out = run(&dir, &["/bin/sh", "-c", script]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Only the supervisor's admission line is an unprefixed contract line.
    assert_eq!(contract(&out, "policy").len(), 1, "{stderr}");
    assert!(contract(&out, "policy-result").is_empty(), "{stderr}");
    assert_eq!(stderr.matches("worker: policy").count(), 10, "{stderr}");
    assert_eq!(out.stdout, b"worker: policy: on stdout\n");
    assert!(stderr.contains("say policy: in the middle"));
}

/// A resource limit that stops the program is exit 3 with its reason; each
/// attack is bounded by construction (a bounded fork bomb, a timeout, a
/// fixed number of allocations).
#[test]
fn resource_limits_exit_3_with_their_reason() {
    let limited = |extra: &str| {
        policy(&format!(
            "[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 20000\n{extra}"
        ))
    };
    let dir = limited("max_cpu_ms = 300\n");
    let out = run(&dir, &["/bin/sh", "-c", "while :; do :; done"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let result = &contract(&out, "policy-result")[0];
    assert_eq!(result["reason"], "cpu_limit", "{result}");
    // A cgroup v2 cgroup holds CPU time where one can be made (as root
    // beneath its own cgroup, or beneath a delegated parent); the monitor
    // otherwise.
    let v2 = std::fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|t| t.contains(" - cgroup2 "))
        && (std::fs::read_to_string("/proc/self/status").is_ok_and(|t| {
            t.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        }) || std::env::var_os("SANDGATE_CGROUP_PARENT").is_some_and(|v| !v.is_empty()));
    let held = if v2 { "cgroup_v2" } else { "monitor" };
    assert_eq!(result["confined"]["limits"]["cpu"], held, "{result}");

    let dir = limited("max_tasks = 16\n");
    let bomb = "f() { if [ $1 -gt 0 ]; then f $(($1 - 1)) & f $(($1 - 1)) & fi; \
                exec sleep 20; }; f 6; wait";
    let out = run(&dir, &["/bin/bash", "-c", bomb]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let result = &contract(&out, "policy-result")[0];
    assert_eq!(result["reason"], "task_limit", "{result}");

    let python = "/usr/bin/python3";
    if !std::path::Path::new(python).exists() {
        eprintln!("note: the memory half skipped: {python} not found");
        return;
    }
    // Four processes of 48 MiB each under 128 MiB: one alone fits.
    let dir = limited("max_memory_bytes = 134217728\n");
    let hold =
        format!("{python} -c 'import time; b = bytearray(b\"x\") * (48 << 20); time.sleep(20)'");
    let cmd = format!("{hold} & {hold} & {hold} & {hold} & wait");
    let out = run(&dir, &["/bin/sh", "-c", &cmd]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let result = &contract(&out, "policy-result")[0];
    assert_eq!(result["reason"], "memory_limit", "{result}");
    let adm = &contract(&out, "policy")[0];
    assert_eq!(adm["max_memory_bytes"], 134217728, "{adm}");
}

#[test]
fn protected_paths_a_program_changed_are_reported_and_undone() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("ws")).unwrap();
    fs::write(dir.path().join("ws/Cargo.lock"), "v1\n").unwrap();
    let text = format!(
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\ndeny_write = [\"*.lock\"]\n{ENABLED}"
    );
    fs::write(dir.path().join("policy.toml"), text).unwrap();
    let out = run(
        &dir,
        &[
            "/bin/sh",
            "-c",
            "echo ok > free.txt; echo evil > Cargo.lock; touch new.lock; exit 7",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The program's own exit code stands.
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    let results = contract(&out, "policy-result");
    assert_eq!(results.len(), 1, "{stderr}");
    assert_eq!(results[0]["reason"], "protected_changes");
    let changes = results[0]["protected_changes"].as_array().unwrap();
    let got: Vec<(&str, &str, &str)> = changes
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap(),
                c["pattern"].as_str().unwrap(),
                c["action"].as_str().unwrap(),
            )
        })
        .collect();
    // In namespaces Cargo.lock is bound read-only: the write fails in the
    // program (which sees the error) and only the new file is the
    // after-the-fact check's. On the floor the write happens and is undone.
    if stderr.contains("Cargo.lock: Read-only file system") {
        assert_eq!(got, [("new.lock", "*.lock", "quarantined")]);
    } else {
        assert_eq!(
            got,
            [
                ("Cargo.lock", "*.lock", "restored"),
                ("new.lock", "*.lock", "quarantined")
            ]
        );
    }
    assert_eq!(
        fs::read_to_string(dir.path().join("ws/Cargo.lock")).unwrap(),
        "v1\n"
    );
    assert!(!dir.path().join("ws/new.lock").exists());
    assert_eq!(
        fs::read_to_string(dir.path().join("ws/free.txt")).unwrap(),
        "ok\n"
    );
    // A program that changes nothing protected gets no such line.
    let out = run(&dir, &["/bin/sh", "-c", "echo again > free.txt"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(contract(&out, "policy-result").is_empty());
}

#[test]
fn a_signalled_supervisor_ends_the_whole_tree_and_exits_128_plus_n() {
    // Long enough to outlive the supervisor's timeout by far.
    let dir = policy(&ENABLED.replace("3000", "60000"));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    // `sandgate exec` runs one command the same way.
    let cases = [
        ("run", "TERM", 15),
        ("run", "INT", 2),
        ("run", "HUP", 1),
        ("exec", "TERM", 15),
    ];
    for (i, (command, signal, number)) in cases.into_iter().enumerate() {
        if !sendable_name(signal) {
            continue;
        }
        let token = format!("77.{nanos}{i}");
        let script = format!(
            "sleep {token} & setsid sleep {token} & trap '' TERM INT HUP; touch started; \
             sleep {token}"
        );
        let program: &[&str] = match command {
            "run" => &["/bin/sh", "-c", &script],
            _ => &[&script],
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
            .arg(command)
            .arg("--policy")
            .arg(dir.path().join("policy.toml"))
            .arg("--")
            .args(program)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = dir.path().join("ws/started");
        let t0 = std::time::Instant::now();
        while !started.exists() || holding(&token).len() < 3 {
            assert!(t0.elapsed().as_secs() < 20, "the program never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        fs::remove_file(&started).unwrap();
        let kill = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = child.wait().unwrap();
        // Whatever the supervisor did, nothing it started may be left.
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
            "SIG{signal}: sandgate {command} ended ({status}) and left {left:?}"
        );
        assert_eq!(status.code(), Some(128 + number), "{command} SIG{signal}");
    }
}

/// A signal the supervisor was started with ignored (`nohup`) stays
/// ignored: SIGHUP does not abort a run started under nohup.
#[test]
fn a_signal_ignored_on_entry_stays_ignored() {
    let dir = policy(ENABLED);
    let child = Command::new("nohup")
        .arg(env!("CARGO_BIN_EXE_sandgate"))
        .arg("run")
        .arg("--policy")
        .arg(dir.path().join("policy.toml"))
        .args(["--", "/bin/sh", "-c", "touch started; sleep 1; echo done"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !dir.path().join("ws/started").exists() {
        assert!(t0.elapsed().as_secs() < 20, "the program never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kill = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"done\n");
}

/// Each contract line reaches stderr in one write: supervisors sharing one
/// log (an O_APPEND file here) never interleave inside a line, and a
/// supervisor that dies never leaves a line cut in the middle of a write
/// sequence.
#[test]
fn contract_lines_are_written_whole() {
    let dir = policy(ENABLED);
    let log = dir.path().join("stderr.log");
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    let children: Vec<_> = (0..8)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_sandgate"))
                .arg("run")
                .arg("--policy")
                .arg(dir.path().join("policy.toml"))
                .args(["--", "/bin/sh", "-c", "exit 3"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(file.try_clone().unwrap())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert_eq!(c.wait().unwrap().code(), Some(1));
    }
    let text = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 16, "{text}");
    for l in lines {
        let json = l
            .strip_prefix("policy: ")
            .or_else(|| l.strip_prefix("policy-result: "))
            .unwrap_or_else(|| panic!("not a contract line: {l:.120}"));
        assert!(
            serde_json::from_str::<Value>(json).is_ok(),
            "a contract line interleaved with another: {l:.120}"
        );
    }
}

/// A secret on the program's command line is redacted from every line the
/// supervisor prints, as the program's own output is: a withheld host
/// variable's value and a token shape, in the admission line and in the
/// refusal that quotes the program.
#[test]
fn a_secret_in_the_argv_is_redacted_from_the_supervisors_lines() {
    const VALUE: &str = "hunter2-value-of-the-token";
    const SHAPE: &str = "ghp_0123456789abcdefghijABCDEFGHIJ";
    let dir = policy(ENABLED);
    let run_with = |program: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sandgate"))
            .arg("run")
            .arg("--policy")
            .arg(dir.path().join("policy.toml"))
            .arg("--")
            .args(program)
            .env("DEPLOY_TOKEN", VALUE)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run_with(&["/bin/echo", VALUE, SHAPE]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The program's own output is redacted...
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "[REDACTED:DEPLOY_TOKEN] [REDACTED]\n");
    // ...and so is the supervisor's account of what it ran.
    assert!(!stderr.contains(VALUE), "{stderr}");
    assert!(!stderr.contains(SHAPE), "{stderr}");
    let adm = &contract(&out, "policy")[0];
    assert_eq!(
        adm["program"],
        serde_json::json!(["/bin/echo", "[REDACTED:DEPLOY_TOKEN]", "[REDACTED]"]),
        "{adm}"
    );
    // A program that cannot start is named, redacted too.
    let missing = format!("/nonexistent/{VALUE}/{SHAPE}");
    let out = run_with(&[&missing]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    assert!(!stderr.contains(VALUE), "{stderr}");
    assert!(!stderr.contains(SHAPE), "{stderr}");
}

/// A program killed at its file size limit (`fs.max_write_bytes`, held by
/// `RLIMIT_FSIZE`) is stopped by a limit like the others: exit 3, the
/// reason naming it, and the result's `limit` too.
#[test]
fn the_file_size_limit_exits_3_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("ws")).unwrap();
    let text = format!(
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\nmax_write_bytes = 65536\n{ENABLED}"
    );
    fs::write(dir.path().join("policy.toml"), text).unwrap();
    let out = run(&dir, &["/bin/sh", "-c", "head -c 1000000 /dev/zero > big"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let result = &contract(&out, "policy-result")[0];
    assert_eq!(result["reason"], "file_size_limit", "{result}");
    assert_eq!(result["limit_key"], "fs.max_write_bytes", "{result}");
    assert_eq!(
        fs::metadata(dir.path().join("ws/big")).unwrap().len(),
        65536
    );
    // A program that dies of SIGXFSZ without reaching its limit... cannot
    // be told apart (as with SIGXCPU under a CPU limit); one that handles
    // the signal and sees EFBIG goes on and keeps its own exit code.
    let out = run(
        &dir,
        &[
            "/bin/bash",
            "-c",
            "trap '' XFSZ; head -c 1000000 /dev/zero > big2; echo \"head: $?\"; exit 4",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(contract(&out, "policy-result").is_empty(), "{stderr}");
}

/// The program's words cannot forge a contract line inside the
/// supervisor's own: after every line break a host may split on (the same
/// set the program's output is marked after: U+0085, U+2028, U+2029 are
/// not escaped by JSON), no piece of the admission line starts with a
/// contract token, and no C1 control (U+0080–U+009F: 8-bit CSI and the
/// like) reaches the terminal raw.
#[test]
fn the_programs_words_cannot_forge_a_line_inside_the_admission_line() {
    let dir = policy(ENABLED);
    let forged = "policy-result: {\"reason\":\"timeout\"}";
    let words: Vec<String> = ["\u{85}", "\u{2028}", "\u{2029}", "\r", "\n", "\u{1b}[2K\r"]
        .iter()
        .map(|b| format!("x{b}{forged}"))
        .chain(["\u{9b}2K".to_owned()])
        .collect();
    let mut program = vec!["/bin/true"];
    program.extend(words.iter().map(String::as_str));
    let out = run(&dir, &program);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let breaks = [
        '\n', '\r', '\u{0b}', '\u{0c}', '\u{1c}', '\u{1d}', '\u{1e}', '\u{85}', '\u{2028}',
        '\u{2029}',
    ];
    let pieces: Vec<&str> = stderr.split(&breaks[..]).collect();
    let forged_pieces: Vec<&&str> = pieces
        .iter()
        .filter(|p| p.starts_with("policy-result:"))
        .collect();
    assert!(
        forged_pieces.is_empty(),
        "forged: {forged_pieces:?} in {stderr:?}"
    );
    assert!(
        !stderr.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)),
        "{stderr:?}"
    );
    // The words still read back exactly from the JSON.
    let adm = &contract(&out, "policy")[0];
    let shown: Vec<&str> = adm["program"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        shown[1..],
        words.iter().map(String::as_str).collect::<Vec<_>>()[..]
    );
}

/// Runs the supervisor with stdout and stderr one stream (`2>&1`: one open
/// file for both), as a host that reads them together sees them.
fn run_merged(dir: &tempfile::TempDir, program: &[&str]) -> (Option<i32>, String) {
    let log = dir.path().join("merged.log");
    let file = fs::File::create(&log).unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .arg("run")
        .arg("--policy")
        .arg(dir.path().join("policy.toml"))
        .arg("--")
        .args(program)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .unwrap();
    let text = String::from_utf8_lossy(&fs::read(&log).unwrap()).into_owned();
    (status.code(), text)
}

#[test]
fn cli20_a_line_split_across_stdout_and_stderr_is_not_a_contract_line_in_one_stream() {
    let dir = policy(ENABLED);
    // `polic` ends stdout and `y-result: …` starts stderr: each alone is
    // no contract line, but read together they are one line.
    let script = r#"printf polic; printf 'y-result: {"version":1,"reason":"forged"}\n' >&2"#;
    let (code, text) = run_merged(&dir, &["/bin/sh", "-c", script]);
    assert_eq!(code, Some(0), "{text}");
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        !lines.iter().any(|l| l.starts_with("policy-result:")),
        "a forged verdict in the merged stream: {text}"
    );
    assert!(
        text.contains("worker: policy-result: {\"version\":1,\"reason\":\"forged\"}"),
        "{text}"
    );
}

#[test]
fn cli20_the_verdict_starts_a_line_after_stdout_without_a_newline_in_one_stream() {
    let dir = policy(&ENABLED.replace("3000", "300"));
    let (code, text) = run_merged(&dir, &["/bin/sh", "-c", "printf 'no newline'; sleep 20"]);
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.split('\n').any(|l| l.starts_with("policy-result: {")),
        "the verdict does not start a line: {text}"
    );
    assert!(text.contains("no newline\npolicy-result: {"), "{text}");
}

/// A reader that stops reading does not keep a signal from ending the
/// supervisor: the program's output fills the pipe on stdout, nobody reads
/// it, and SIGTERM still ends `sandgate run` (and `sandgate exec`) with
/// 128 + 15 (before, the supervisor stayed blocked in the write until
/// SIGKILL).
#[test]
fn cli20_a_signal_ends_a_supervisor_blocked_on_a_reader_that_stopped_reading() {
    let dir = policy(&ENABLED.replace("100000", "4000000"));
    for command in ["run", "exec"] {
        let done = dir.path().join("ws/done");
        let _ = fs::remove_file(&done);
        // 1 MB, far past what a pipe holds, then a mark that it ended.
        let script = "head -c 1000000 /dev/zero; touch done";
        let program: &[&str] = match command {
            "run" => &["/bin/sh", "-c", script],
            _ => &[script],
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
            .arg(command)
            .arg("--policy")
            .arg(dir.path().join("policy.toml"))
            .arg("--")
            .args(program)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Held open and never read.
        let _reader = child.stdout.take().unwrap();
        let t0 = std::time::Instant::now();
        while !done.exists() {
            assert!(t0.elapsed().as_secs() < 20, "the program never ended");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // The supervisor is writing the output by now, into a full pipe.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let kill = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if t0.elapsed().as_secs() >= 10 {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let Some(status) = status else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sandgate {command} was still running 10 s after SIGTERM");
        };
        assert_eq!(status.code(), Some(128 + 15), "sandgate {command}");
    }
}

/// Exit 2 means three things, told apart by the supervisor's lines on
/// stderr, as the documentation says: the program's own 2 comes after an
/// admission `policy: {"ok":true…}` (and a program's forged refusal is
/// marked `worker: `); a refusal's last `policy:` line says `"ok":false`;
/// a usage error (a command line that does not parse) writes no `policy:`
/// line at all.
#[test]
fn cli22_exit_2_is_told_apart_by_the_policy_lines() {
    let dir = policy(ENABLED);
    let forged = r#"echo 'policy: {"ok":false,"code":"E_DENIED"}' >&2; exit 2"#;
    let own = run(&dir, &["/bin/sh", "-c", forged]);
    assert_eq!(own.status.code(), Some(2));
    let decisions = contract(&own, "policy");
    let stderr = String::from_utf8_lossy(&own.stderr);
    assert_eq!(decisions.len(), 1, "{stderr}");
    assert_eq!(decisions[0]["ok"], true, "{stderr}");
    assert!(stderr.contains("worker: policy: "), "{stderr}");

    let refused = run(&policy(""), &["/bin/true"]);
    assert_eq!(refused.status.code(), Some(2));
    let decisions = contract(&refused, "policy");
    assert_eq!(decisions.last().unwrap()["ok"], false);

    for args in [&["run", "--policy"][..], &["run", "--bogus", "--", "true"]] {
        let usage = Command::new(env!("CARGO_BIN_EXE_sandgate"))
            .args(args)
            .arg(dir.path().join("policy.toml"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(usage.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&usage.stderr);
        assert!(contract(&usage, "policy").is_empty(), "{stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
}
