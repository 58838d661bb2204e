//! The executor's lifecycle under races: `start`, `exec` and `dispose`
//! called from several threads at once.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sandgate_codes::ErrorCode;
use sandgate_shellexec::confine::{ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{
    ExecConfig, ExecOptions, ExecResult, LocalShellExecutor, ShellExecutor,
};

fn host_env() -> Vec<(OsString, OsString)> {
    [
        ("HOME", "/root"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("LANG", "C.UTF-8"),
        ("USER", "tester"),
    ]
    .iter()
    .map(|(k, v)| (OsString::from(k), OsString::from(v)))
    .collect()
}

fn config() -> ExecConfig {
    ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(20),
        max_output_bytes: 1 << 20,
        env_inherit: Vec::new(),
        confine_mode: ConfineMode::Off,
        confine: ConfineSpec::default(),
        limits: Default::default(),
        grace: Duration::from_millis(500),
        host_env: Some(host_env()),
        namespaces: true,
        protected: None,
    }
}

fn started(config: ExecConfig) -> LocalShellExecutor {
    let ex = LocalShellExecutor::new(config);
    ex.start().unwrap();
    ex
}

fn run(ex: &LocalShellExecutor, command: &str) -> ExecResult {
    ex.exec(command, ExecOptions::default()).unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Waits until `f` holds, at most `limit`.
fn until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    f()
}

/// A dispose waits (the lock released) for the commands it aborted to
/// end. A session started meanwhile, from another thread, is a new one:
/// what the embedder adds for it is its own, and its commands are not the
/// dispose's to wait for.
#[test]
fn dispose22_a_session_started_while_dispose_waits_is_left_alone() {
    let ex = Arc::new(started(ExecConfig {
        grace: Duration::from_millis(1500),
        ..config()
    }));
    let old_tmp = ex.tmpdir().unwrap();
    // A command that ignores SIGTERM holds the dispose for the grace.
    let stubborn = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || run(&ex, "trap '' TERM; echo up; sleep 30"))
    };
    thread::sleep(Duration::from_millis(300));
    let began = Instant::now();
    let disposer = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || {
            ex.dispose().unwrap();
            began.elapsed()
        })
    };
    // The dispose has taken the session: a start now makes a new one.
    assert!(
        until(Duration::from_secs(1), || ex.tmpdir().is_none()),
        "the dispose never took the session"
    );
    ex.start().unwrap();
    ex.set_child_env(vec![("DISPOSE22_ADDED".into(), "kept".into())]);
    let new_tmp = ex.tmpdir().unwrap();
    assert_ne!(new_tmp, old_tmp);
    let newcomer = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || run(&ex, "sleep 5; echo \"new:$DISPOSE22_ADDED\""))
    };
    assert!(
        !disposer.is_finished(),
        "the dispose did not wait for its stubborn command: the race was not set up"
    );
    let took = disposer.join().unwrap();
    let r = stubborn.join().unwrap();
    assert!(r.aborted, "{r:?}");
    assert!(!old_tmp.exists(), "the disposed session's TMPDIR is left");
    assert!(new_tmp.is_dir(), "the new session's TMPDIR was removed");
    let r = newcomer.join().unwrap();
    assert!(!r.aborted, "{r:?}");
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    assert_eq!(text(&r.stdout), "new:kept\n");
    // The variable set for the new session outlives the earlier dispose.
    let r = run(&ex, "echo \"$DISPOSE22_ADDED\"");
    assert_eq!(
        text(&r.stdout),
        "kept\n",
        "the dispose of the earlier session cleared what was set for the new one"
    );
    // The dispose waited for the command it aborted (killed after the
    // grace), not for the new session's command.
    assert!(
        took < Duration::from_secs(4),
        "the dispose waited {took:?}, for a command of the session started after it"
    );
    ex.dispose().unwrap();
    assert!(!new_tmp.exists());
    let err = ex.exec("true", ExecOptions::default()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotStarted);
}

/// Two disposes at once, with a command running that ignores SIGTERM and
/// leaves many files in the private TMPDIR: neither returns before the
/// command has ended and the TMPDIR is gone.
#[test]
fn dispose22_two_disposes_at_once_both_return_after_the_cleanup() {
    let ex = Arc::new(started(ExecConfig {
        grace: Duration::from_millis(300),
        ..config()
    }));
    let tmp = ex.tmpdir().unwrap();
    let runner = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || {
            run(
                &ex,
                "trap '' TERM; cd \"$TMPDIR\" && seq 30000 | xargs touch; sleep 30",
            )
        })
    };
    assert!(
        until(Duration::from_secs(60), || tmp.join("30000").exists()),
        "the command never made its files"
    );
    let disposers: Vec<_> = (0..2)
        .map(|_| {
            let (ex, tmp) = (Arc::clone(&ex), tmp.clone());
            thread::spawn(move || {
                ex.dispose().unwrap();
                // Right as this dispose returns.
                tmp.exists()
            })
        })
        .collect();
    let left: Vec<bool> = disposers.into_iter().map(|d| d.join().unwrap()).collect();
    let r = runner.join().unwrap();
    assert!(r.aborted, "{r:?}");
    assert_eq!(
        left,
        [false, false],
        "a dispose returned while the other was still removing the TMPDIR"
    );
}
