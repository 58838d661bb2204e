//! `sandgate tool` told to stop (SIGTERM, SIGINT, SIGHUP) in the middle of
//! a long request, on real processes and files: it ends promptly with
//! `128 + n`, whatever it was doing, and leaves nothing half-written.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

mod support;
use support::{holding, sendable_name};

/// A case directory with `ws/` (the read and write root) and a policy.
fn case(extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("ws")).unwrap();
    let policy = format!("[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n{extra}");
    fs::write(dir.path().join("policy.toml"), policy).unwrap();
    dir
}

fn spawn(dir: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["tool", "--policy"])
        .arg(dir.join("policy.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn signal(pid: u32, name: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{name} {pid}");
}

/// The bytes `pid` has read so far (`rchar` of `/proc/PID/io`).
fn bytes_read(pid: u32) -> u64 {
    let io = fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits up to `bound` for `child` to end; a child still running then is
/// killed (SIGKILL) and the test fails, saying what it was doing.
fn ended_within(child: &mut Child, bound: Duration, what: &str) -> i32 {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if t0.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sandgate tool was still running {bound:?} after the signal, {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A ranged read counts every line of its file, a long read for a file
/// of much data: SIGTERM, SIGINT and SIGHUP cancel it and end the endpoint
/// with `128 + n` (before, it finished the read first, so only SIGKILL
/// ended it). The file is 512 MiB of data without a newline: a sparse
/// one would not do, its holes are passed over unread.
#[test]
fn endpoint8_a_signal_ends_a_ranged_read_of_a_huge_file_in_flight() {
    let dir = case("");
    // Made here, as the host: a confined command could not make it
    // (its file size limit is `fs.max_write_bytes`).
    let mut big = fs::File::create(dir.path().join("ws/big")).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..512 {
        std::io::Write::write_all(&mut big, &chunk).unwrap();
    }
    drop(big);
    for (name, code) in [("TERM", 143), ("INT", 130), ("HUP", 129)] {
        if !sendable_name(name) {
            continue;
        }
        let mut child = spawn(dir.path());
        let mut stdin = child.stdin.take().unwrap();
        let request = json!({"op": "read", "path": "big", "offset": 2, "limit": 1});
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        // The read is under way once the endpoint has read 64 MiB.
        let t0 = Instant::now();
        while bytes_read(child.id()) < 64 << 20 {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the read never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        signal(child.id(), name);
        let status = ended_within(
            &mut child,
            Duration::from_secs(10),
            "in a ranged read of a 512 MiB file",
        );
        assert_eq!(status, code, "SIG{name}");
        drop(stdin);
    }
}

/// An `exec` of a long sleep in flight: SIGINT and SIGHUP end its whole
/// tree, then the endpoint, with `128 + n` (SIGTERM:
/// `a_signalled_tool_endpoint_ends_the_running_command_and_exits_143` in
/// `exec.rs`).
#[test]
fn endpoint8_a_signal_ends_an_exec_in_flight_and_leaves_no_survivor() {
    let dir = case("[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 60000\n");
    for (name, code) in [("INT", 130), ("HUP", 129)] {
        if !sendable_name(name) {
            continue;
        }
        let token = format!(
            "100.{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        let mut child = spawn(dir.path());
        let mut stdin = child.stdin.take().unwrap();
        let request = json!({"op": "exec", "command": format!("sleep {token}")});
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let t0 = Instant::now();
        while holding(&token).is_empty() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the command never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        signal(child.id(), name);
        let status = ended_within(
            &mut child,
            Duration::from_secs(20),
            "in an exec of a long sleep",
        );
        let left = holding(&token);
        for p in &left {
            let pid = p.split(' ').next().unwrap();
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
        assert!(left.is_empty(), "SIG{name} left {left:?}");
        assert_eq!(status, code, "SIG{name}");
        drop(stdin);
    }
}

/// Whether `pid` holds open a file of `dir` that has no name (the
/// `O_TMPFILE`, or a named temporary file already removed, of a write).
fn writing(pid: u32, dir: &Path) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let prefix = format!("{}/", dir.display());
    fds.flatten().any(|fd| {
        fs::read_link(fd.path()).is_ok_and(|t| {
            let t = t.to_string_lossy();
            t.starts_with(&prefix) && (t.ends_with(" (deleted)") || t.contains(".sandgate-tmp"))
        })
    })
}

/// A write in flight when SIGTERM comes either completes or leaves the
/// old file: never a file cut short, never a temporary file left beside
/// it. The signal is sent at several moments of a 32 MiB write, one of
/// them as soon as its temporary file or its result is seen.
#[test]
fn endpoint8_a_signal_never_leaves_a_write_half_done() {
    let dir =
        case("max_write_bytes = 67108864\nmax_read_bytes = 67108864\nallow_overwrite = true\n");
    let old = b"the old content\n";
    let new = "n".repeat(32 << 20);
    let mut outcomes = Vec::new();
    // A delay, or `None`: the first moment the endpoint is seen holding
    // the write's temporary file open, or else the target replaced.
    let moments = [
        Some(0u64),
        Some(5),
        Some(20),
        Some(80),
        None,
        None,
        Some(3000),
    ];
    for moment in moments {
        fs::write(dir.path().join("ws/target"), old).unwrap();
        let mut child = spawn(dir.path());
        let mut stdin = child.stdin.take().unwrap();
        let request = json!({"op": "write", "path": "target", "content": new, "overwrite": true});
        let line = format!("{request}\n");
        // The request goes in from another thread: the signal may come
        // while the endpoint is still reading it.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(line.as_bytes());
            stdin
        });
        match moment {
            Some(ms) => std::thread::sleep(Duration::from_millis(ms)),
            None => {
                let t0 = Instant::now();
                let target = dir.path().join("ws/target");
                while !writing(child.id(), &dir.path().join("ws"))
                    && fs::metadata(&target).unwrap().len() == old.len() as u64
                {
                    assert!(t0.elapsed() < Duration::from_secs(60), "no write began");
                    std::thread::yield_now();
                }
            }
        }
        signal(child.id(), "TERM");
        let status = ended_within(&mut child, Duration::from_secs(30), "in a write");
        drop(writer.join().unwrap());
        assert_eq!(status, 143, "at {moment:?}");
        let now = fs::read(dir.path().join("ws/target")).unwrap();
        let whole = now == old || now == new.as_bytes();
        assert!(whole, "at {moment:?} the file holds {} bytes", now.len());
        outcomes.push(now == old);
        let names: Vec<String> = fs::read_dir(dir.path().join("ws"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["target"], "at {moment:?}");
    }
    eprintln!("kept the old file: {outcomes:?}");
}

/// A `fetch` from a server that accepts and never answers, with a long
/// timeout: SIGTERM cancels it (its connection closed) and ends the
/// endpoint with 143 (before, it waited for the fetch's timeout).
#[test]
fn endpoint8_a_signal_ends_a_fetch_in_flight() {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Holds every connection open, silent.
        let mut held = Vec::new();
        while let Ok((c, _)) = listener.accept() {
            held.push(c);
            let _ = tx.send(());
        }
    });
    let dir = case(&format!(
        "[net]\nallow = [\"127.0.0.1:{port}\"]\nallow_http = true\n"
    ));
    let mut child = spawn(dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let request = json!({"op": "fetch", "url": url, "timeout_ms": 120000});
    writeln!(stdin, "{request}").unwrap();
    stdin.flush().unwrap();
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the fetch never connected");
    std::thread::sleep(Duration::from_millis(200));
    signal(child.id(), "TERM");
    let status = ended_within(
        &mut child,
        Duration::from_secs(10),
        "in a fetch from a silent server",
    );
    assert_eq!(status, 143);
    drop(stdin);
}

/// A session whose cancel flag is set answers a ranged read, a grep, a
/// glob and a fetch with `E_ABORTED`, and still writes whole (a write is
/// never stopped half-way); without the flag set the same requests are
/// answered.
#[test]
fn endpoint8_a_cancelled_session_aborts_long_ops_and_still_writes() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = case("[net]\nallow = [\"127.0.0.1:9\"]\nallow_http = true\n");
    for i in 0..50 {
        fs::write(dir.path().join(format!("ws/f{i}.txt")), "needle\n").unwrap();
    }
    let policy = sandgate::policy::Policy::load(dir.path().join("policy.toml")).unwrap();
    let mut s = sandgate::ToolSession::from_policy(&policy).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    s.set_cancel(Arc::clone(&cancel));
    let ask = |s: &sandgate::ToolSession, req: serde_json::Value| s.handle_line(&req.to_string());
    let long = [
        json!({"op": "read", "path": "f1.txt", "offset": 1, "limit": 1}),
        json!({"op": "grep", "pattern": "needle"}),
        json!({"op": "glob", "pattern": "**/*.txt"}),
    ];
    for req in &long {
        assert_eq!(ask(&s, req.clone())["ok"], true, "{req}");
    }
    cancel.store(true, Ordering::Relaxed);
    for req in &long {
        let a = ask(&s, req.clone());
        assert_eq!(a["error"]["code"], "E_ABORTED", "{req}: {a}");
    }
    let a = ask(&s, json!({"op": "fetch", "url": "http://127.0.0.1:9/"}));
    assert_eq!(a["error"]["code"], "E_ABORTED", "{a}");
    let a = ask(
        &s,
        json!({"op": "write", "path": "new.txt", "content": "whole"}),
    );
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(fs::read(dir.path().join("ws/new.txt")).unwrap(), b"whole");
}

/// A request line of many distinct keys (here 300,000, under 4 MiB; a
/// 16 MiB line holds four times as many) is refused (`E_REQUEST`, an
/// unknown key) in time linear in its length, so SIGTERM sent while it is
/// handled ends the session promptly. Before, each key was compared with
/// every key before it to find a duplicate: the endpoint spent minutes
/// (hours for a full line) on one line while holding off the signal,
/// since a request in flight other than a read, grep, glob, fetch or exec
/// finishes first.
#[test]
fn endpoint19_a_line_of_many_keys_neither_stalls_the_session_nor_a_signal() {
    let dir = case("");
    let mut line = String::from("{\"op\":\"summary\"");
    for i in 0..300_000 {
        line.push_str(&format!(",\"k{i}\":0"));
    }
    line.push_str("}\n");
    let mut child = spawn(dir.path());
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let len = line.len() as u64;
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(line.as_bytes());
        // Kept open: the session must end by the signal, not by EOF.
        std::thread::sleep(Duration::from_secs(600));
        drop(stdin);
    });
    let t0 = Instant::now();
    while bytes_read(pid) < len {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the line was never read"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    signal(pid, "TERM");
    let code = ended_within(
        &mut child,
        Duration::from_secs(10),
        "handling one line of 300,000 distinct keys",
    );
    assert_eq!(code, 128 + 15);
    drop(writer);
}
