//! Two processes protecting one write root (two `sandgate tool` calls, two
//! MCP servers, two hosts' Sandboxes on one directory). Their protectors
//! share no memory, so each keeps a record of its own: a record taken in
//! one process while a command of the other runs would take that
//! command's change to a protected file for the host's, and the settle
//! against it would put the change back after the other process undid it.
//! Each test runs with inotify and with the ctime walk forced.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandgate_fileguard::GuardBuilder;
use sandgate_protect::{Action, Change, Protector, DETECTION_ENV};

/// Set in the child that plays the other process: the write root.
const PEER_ENV: &str = "SANDGATE_TEST_PEER_ROOT";

fn protector(root: &Path, patterns: &[&str]) -> Arc<Protector> {
    let guard = GuardBuilder::new().patterns(patterns).build().unwrap();
    Arc::new(Protector::new(root, guard).unwrap())
}

/// A write root `w` in a temporary directory, holding `a.lock` ("v1").
fn write_root() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("a.lock"), "v1\n").unwrap();
    (tmp, root)
}

/// The other process's part: `begin` and `settle` read from stdin, each
/// answered on stdout with a line starting `PEER `.
#[test]
fn peer_process() {
    let Some(root) = std::env::var_os(PEER_ENV) else {
        return;
    };
    let p = protector(Path::new(&root), &["*.lock"]);
    let mut cp = None;
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        match line.unwrap().as_str() {
            "begin" => {
                cp = Some(p.begin().unwrap());
                writeln!(out, "PEER begun").unwrap();
            }
            "settle" => {
                let changes = cp.take().unwrap().settle();
                writeln!(out, "PEER settled {changes:?}").unwrap();
            }
            _ => break,
        }
        out.flush().unwrap();
    }
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Peer {
    fn start(root: &Path) -> Peer {
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new(exe)
            .args(["--exact", "peer_process", "--nocapture", "--test-threads=1"])
            .env(PEER_ENV, root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // libtest may print the test's name on the same line first.
                if let Some((_, rest)) = line.split_once("PEER ") {
                    if tx.send(rest.to_owned()).is_err() {
                        break;
                    }
                }
            }
        });
        Peer {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, what: &str) {
        writeln!(self.stdin, "{what}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn answer(&self, wait: Duration) -> Option<String> {
        self.lines.recv_timeout(wait).ok()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A command of this process changes a protected file; the other process
/// begins a command meanwhile, this one's is settled (the file restored),
/// then the other's. The other process's record must not have taken the
/// change for the host's: before, it did, and its settle put the
/// command's content back (`a.lock` read "by the first command").
#[test]
fn protect8_a_record_in_another_process_never_takes_a_running_commands_change() {
    if std::env::var_os(PEER_ENV).is_some() {
        return;
    }
    let (_tmp, root) = write_root();
    let p = protector(&root, &["*.lock"]);
    let mut peer = Peer::start(&root);

    let first = p.begin().unwrap();
    fs::write(root.join("a.lock"), "by the first command\n").unwrap();
    peer.send("begin");
    // The other process may begin only once this one's command is
    // settled; give it time to show that it does not begin before.
    let early = peer.answer(Duration::from_secs(3));
    assert_eq!(
        first.settle(),
        [Change {
            path: "a.lock".into(),
            pattern: "*.lock".into(),
            action: Action::Restored,
        }]
    );
    assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "v1\n");
    let begun = early.or_else(|| peer.answer(Duration::from_secs(60)));
    assert_eq!(begun.as_deref(), Some("begun"));
    peer.send("settle");
    let settled = peer.answer(Duration::from_secs(60));
    assert_eq!(
        fs::read_to_string(root.join("a.lock")).unwrap(),
        "v1\n",
        "the other process's settle answered {settled:?}"
    );
    assert_eq!(settled.as_deref(), Some("settled []"));
}

/// With nothing running in the other process, a command here begins at
/// once, and the other's command, begun after it ended, is checked
/// against what this one left: its own change is undone.
#[test]
fn protect8_commands_of_two_processes_one_after_the_other_are_each_checked() {
    if std::env::var_os(PEER_ENV).is_some() {
        return;
    }
    let (_tmp, root) = write_root();
    let p = protector(&root, &["*.lock"]);
    let mut peer = Peer::start(&root);
    peer.send("begin");
    assert_eq!(
        peer.answer(Duration::from_secs(60)).as_deref(),
        Some("begun")
    );
    fs::write(root.join("b.lock"), "by the other's command\n").unwrap();
    peer.send("settle");
    assert_eq!(
        peer.answer(Duration::from_secs(60)).as_deref(),
        Some(r#"settled [Change { path: "b.lock", pattern: "*.lock", action: Quarantined }]"#)
    );
    let cp = p.begin().unwrap();
    fs::write(root.join("a.lock"), "by this command\n").unwrap();
    assert_eq!(
        cp.settle(),
        [Change {
            path: "a.lock".into(),
            pattern: "*.lock".into(),
            action: Action::Restored,
        }]
    );
    assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "v1\n");
    assert!(!root.join("b.lock").exists());
}

/// A turn on the root that another process holds is waited for no later
/// than the deadline, and no longer than the caller's stop allows; once
/// the holder lets go, the turn comes. (Before the deadline existed, the
/// wait was unbounded: a call waited through its own timeout and an abort
/// did not end it.) The holder here is a second open of the root in this
/// process, which `flock` treats as another holder.
#[test]
fn a_turn_on_the_root_ends_at_its_deadline_or_its_stop() {
    if std::env::var_os(PEER_ENV).is_some() {
        return;
    }
    let (_tmp, root) = write_root();
    let p = protector(&root, &["*.lock"]);
    let holder = fs::File::open(&root).unwrap();
    rustix::fs::flock(&holder, rustix::fs::FlockOperation::LockExclusive).unwrap();

    let started = Instant::now();
    let Err(err) = p.begin_until(Some(Instant::now() + Duration::from_millis(300)), &|| false)
    else {
        panic!("the turn came while another holder held the root");
    };
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
    assert!(err.to_string().contains("held the write root"), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(started.elapsed() < Duration::from_secs(30));

    let stop = Arc::new(AtomicBool::new(false));
    let setter = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::SeqCst);
        })
    };
    let Err(err) = p.begin_until(None, &|| stop.load(Ordering::SeqCst)) else {
        panic!("the turn came while another holder held the root");
    };
    setter.join().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "{err}");

    // Neither failed wait left this process holding the root or counted
    // as a running command: the next turn comes once the holder lets go,
    // and a command's change is checked as ever.
    drop(holder);
    let cp = p
        .begin_until(Some(Instant::now() + Duration::from_secs(30)), &|| false)
        .unwrap();
    fs::write(root.join("a.lock"), "by the command\n").unwrap();
    assert_eq!(
        cp.settle(),
        [Change {
            path: "a.lock".into(),
            pattern: "*.lock".into(),
            action: Action::Restored,
        }]
    );
    let probe = fs::File::open(&root).unwrap();
    rustix::fs::flock(&probe, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .expect("the settled protector still holds the root");
}

/// Runs this file's tests again with the ctime walk forced.
#[test]
fn protect8_every_test_here_also_holds_with_the_ctime_walk_forced() {
    if std::env::var_os(PEER_ENV).is_some()
        || std::env::var_os(DETECTION_ENV).is_some_and(|v| v == "ctime")
    {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--skip",
            "protect8_every_test_here_also_holds_with_the_ctime_walk_forced",
            "--skip",
            "peer_process",
        ])
        .env(DETECTION_ENV, "ctime")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 3 passed"),
        "with the ctime walk forced:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
