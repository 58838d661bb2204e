//! The executor's audit events: one per call, refused ones included, with
//! the exit code and the limit that stopped the command, never the
//! command's text or output. Real commands, real git, the real kernel; the
//! tests pass as an unprivileged user too.

use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sandgate::policy::Policy;
use sandgate::{AuditEvent, ErrorCode, ExecOptions, Executor};

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    op: &'static str,
    path: String,
    size: Option<u64>,
    outcome: ErrorCode,
    exit_code: Option<i32>,
    limit: Option<&'static str>,
}

fn executor(dir: &Path, exec_extra: &str) -> (Executor, Arc<Mutex<Vec<Seen>>>) {
    fs::create_dir_all(dir.join("ws/sub")).unwrap();
    let toml = format!(
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n\
         [exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 20000\n\
         process_allow = [\"git:status\"]\n{exec_extra}\n\
         [budgets]\nexec_ops = 5\n"
    );
    let policy = Policy::from_bytes(toml.as_bytes(), dir, None).unwrap();
    let ex = Executor::from_policy(&policy).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = Arc::clone(&seen);
    ex.set_audit_sink(Some(Arc::new(move |e: &AuditEvent| {
        sink_seen.lock().unwrap().push(Seen {
            op: e.op,
            path: e.path.clone(),
            size: e.size,
            outcome: e.outcome,
            exit_code: e.exit_code,
            limit: e.limit,
        });
    })));
    (ex, seen)
}

const SECRET_WORD: &str = "never-in-the-audit-7f3a";

#[test]
fn every_exec_is_audited_with_its_exit_code_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let (ex, seen) = executor(&dir, "max_cpu_ms = 300");

    let r = ex
        .exec(&format!("echo {SECRET_WORD}"), ExecOptions::default())
        .unwrap();
    assert_eq!(r.exit_code, 0);
    let r = ex
        .exec(
            "exit 3",
            ExecOptions {
                cwd: Some("sub".into()),
                ..ExecOptions::default()
            },
        )
        .unwrap();
    assert_eq!(r.exit_code, 3);
    // A busy loop ends at its CPU limit.
    let r = ex
        .exec("while :; do :; done", ExecOptions::default())
        .unwrap();
    assert_eq!(r.limit.map(|l| l.as_str()), Some("cpu"), "{r:?}");
    // Refused before anything runs: a cwd outside the root.
    let e = ex
        .exec(
            "true",
            ExecOptions {
                cwd: Some("../elsewhere".into()),
                ..ExecOptions::default()
            },
        )
        .unwrap_err();
    // An argv, then confined git (not a repository: git answers non-zero).
    ex.exec_argv(&["true".into()], ExecOptions::default())
        .unwrap();
    let git = ex.exec("git status", ExecOptions::default());
    // The budget (5: the refused cwd spent none) is spent now: refused.
    let spent = ex.exec("true", ExecOptions::default()).unwrap_err();
    assert_eq!(spent.code(), ErrorCode::Denied);

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 7, "{seen:#?}");
    assert_eq!(
        seen[0],
        Seen {
            op: "exec",
            path: String::new(),
            size: Some(SECRET_WORD.len() as u64 + 1),
            outcome: ErrorCode::Ok,
            exit_code: Some(0),
            limit: None,
        }
    );
    assert_eq!((seen[1].path.as_str(), seen[1].exit_code), ("sub", Some(3)));
    assert_eq!(seen[2].limit, Some("cpu"), "{:?}", seen[2]);
    assert_eq!(seen[3].outcome, e.code());
    assert_ne!(seen[3].outcome, ErrorCode::Ok);
    assert_eq!((seen[3].exit_code, seen[3].size), (None, None));
    assert_eq!((seen[4].op, seen[4].exit_code), ("exec", Some(0)));
    assert_eq!(seen[5].op, "git");
    match git {
        Ok(r) => assert_eq!(seen[5].exit_code, Some(r.exit_code)),
        Err(e) => assert_eq!(seen[5].outcome, e.code()),
    }
    assert_eq!(
        (seen[6].op, seen[6].outcome, seen[6].exit_code),
        ("exec", ErrorCode::Denied, None)
    );
    // Never the command's text or its output.
    assert!(!format!("{seen:?}").contains(SECRET_WORD));
}

#[test]
fn a_timeout_is_audited_as_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let (ex, seen) = executor(&dir, "");
    let r = ex
        .exec(
            "sleep 30",
            ExecOptions {
                timeout_ms: Some(200),
                ..ExecOptions::default()
            },
        )
        .unwrap();
    assert!(r.timed_out);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].limit, Some("timeout"), "{:?}", seen[0]);
}
