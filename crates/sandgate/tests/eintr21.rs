//! The library under a host that takes signals without `SA_RESTART`: a
//! SIGALRM every millisecond, its handler installed with plain `sigaction`
//! (as Python's `signal.setitimer`, or Go's preemption signals, do), so
//! every blocking system call in this process may answer EINTR. Every
//! operation must still give the answer it gives on a quiet host: output
//! whole, exit codes right, no `Interrupted system call`.
//!
//! The storm is process-wide, so these tests live in a binary of their own.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use sandgate::policy::Policy;
use sandgate::ToolSession;
use serde_json::{json, Value};

extern "C" fn on_alarm(_: libc::c_int) {}

/// Starts the storm once for the whole binary: the handler is installed
/// without `SA_RESTART`, and a thread sends SIGALRM to every other thread
/// of the process (the library's own included) every millisecond. A
/// process-wide timer would not do: the kernel hands its signal to the
/// main thread, which here only waits for the tests.
fn storm() {
    static START: Once = Once::new();
    START.call_once(|| {
        // SAFETY: a zeroed sigaction filled with a handler that does nothing.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_alarm as *const () as usize;
            sa.sa_flags = 0; // no SA_RESTART
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut()), 0);
        }
        std::thread::spawn(|| {
            // SAFETY: gettid has no preconditions.
            let me = unsafe { libc::gettid() };
            let pid = std::process::id() as libc::pid_t;
            loop {
                if let Ok(tasks) = fs::read_dir("/proc/self/task") {
                    for t in tasks.flatten() {
                        let tid: libc::pid_t = t.file_name().to_str().unwrap().parse().unwrap();
                        if tid != me {
                            // SAFETY: a signal to a thread of this process, whose handler does nothing.
                            unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGALRM) };
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    });
}

struct Ws {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
}

fn ws() -> Ws {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    fs::create_dir(&ws).unwrap();
    Ws {
        _tmp: tmp,
        base,
        ws,
    }
}

fn session(w: &Ws, text: &str) -> ToolSession {
    let path = w.base.join("policy.toml");
    fs::write(
        &path,
        format!("[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n{text}"),
    )
    .unwrap();
    ToolSession::from_policy(&Policy::load(&path).unwrap()).unwrap()
}

fn call(s: &ToolSession, request: Value) -> Value {
    s.handle_line(&request.to_string())
}

#[test]
fn eintr21_exec_output_and_exit_code_survive_a_signal_storm() {
    storm();
    let w = ws();
    let s = session(
        &w,
        "[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 20000\n",
    );
    for round in 0..5 {
        let a = call(
            &s,
            json!({"op": "exec", "command":
                "head -c 1048576 /dev/zero | tr '\\0' a; echo err >&2; sleep 0.3; exit 7"}),
        );
        assert_eq!(a["ok"], json!(true), "round {round}: {a:.300}");
        assert_eq!(a["exit_code"], json!(7), "round {round}: {a:.300}");
        let out = a["stdout"].as_str().unwrap_or_default();
        assert_eq!(out.len(), 1 << 20, "round {round}: stdout cut");
        assert!(out.bytes().all(|b| b == b'a'), "round {round}");
        assert_eq!(a["stderr"], json!("err\n"), "round {round}");
    }
}

#[test]
fn eintr21_file_tools_on_big_files_survive_a_signal_storm() {
    storm();
    let w = ws();
    let s = session(&w, "allow_overwrite = true\n");
    let mut big = String::new();
    for i in 0..150_000 {
        big.push_str(&format!("line {i} of the big file\n"));
    }
    for round in 0..5 {
        let a = call(
            &s,
            json!({"op": "write", "path": "big.txt", "content": big, "overwrite": true}),
        );
        assert_eq!(a["ok"], json!(true), "round {round}: {a:.300}");
        assert_eq!(fs::read_to_string(w.ws.join("big.txt")).unwrap(), big);
        let a = call(&s, json!({"op": "read", "path": "big.txt"}));
        assert_eq!(a["ok"], json!(true), "round {round}: {a:.300}");
        assert_eq!(a["content"].as_str().unwrap(), big, "round {round}");
        let a = call(
            &s,
            json!({"op": "edit", "path": "big.txt", "old": "line 149999 of", "new": "LAST of"}),
        );
        assert_eq!(a["replacements"], json!(1), "round {round}: {a:.300}");
        let a = call(
            &s,
            json!({"op": "grep", "pattern": "LAST of|line 123456 ", "mode": "count"}),
        );
        assert_eq!(a["ok"], json!(true), "round {round}: {a:.300}");
        assert!(a.to_string().contains('2'), "round {round}: {a:.300}");
        let a = call(
            &s,
            json!({"op": "read", "path": "big.txt", "offset": 149_990, "limit": 20}),
        );
        assert_eq!(a["total_lines"], json!(150_000), "round {round}: {a:.300}");
    }
}

#[test]
fn eintr21_confined_git_survives_a_signal_storm() {
    if !std::path::Path::new("/usr/bin/git").exists() {
        return;
    }
    storm();
    let w = ws();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("/usr/bin/git")
            .args([
                "-c",
                "user.name=F",
                "-c",
                "user.email=f@example.invalid",
                "-c",
                "commit.gpgSign=false",
            ])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .current_dir(&w.ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&["init", "-q", "."]);
    fs::write(w.ws.join("f.txt"), "one\n").unwrap();
    git(&["add", "f.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    fs::write(w.ws.join("f.txt"), "two\n").unwrap();
    let s = session(
        &w,
        "[exec]\nenabled = false\nprocess_allow = [\"git:status\", \"git:diff\", \"git:log\"]\n",
    );
    for round in 0..5 {
        let a = call(&s, json!({"op": "exec", "command": "git diff"}));
        assert_eq!(a["ok"], json!(true), "round {round}: {a}");
        assert_eq!(a["exit_code"], json!(0), "round {round}: {a}");
        assert!(
            a["stdout"].as_str().unwrap().contains("+two"),
            "round {round}: {a}"
        );
        let a = call(&s, json!({"op": "exec", "command": "git log --oneline"}));
        assert!(
            a["stdout"].as_str().unwrap_or_default().contains("first"),
            "round {round}: {a}"
        );
    }
}

fn serve() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let body = "x".repeat(300_000);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

#[test]
fn eintr21_fetch_survives_a_signal_storm() {
    storm();
    let port = serve();
    let w = ws();
    let s = session(
        &w,
        &format!("[net]\nallow = [\"127.0.0.1:{port}\"]\nallow_http = true\n"),
    );
    for round in 0..5 {
        let a = call(
            &s,
            json!({"op": "fetch", "url": format!("http://127.0.0.1:{port}/"), "max_bytes": 1_000_000}),
        );
        if a.to_string().contains("PROXY") {
            eprintln!("a proxy is set; skipped: {a:.300}");
            return;
        }
        assert_eq!(a["ok"], json!(true), "round {round}: {a:.300}");
        assert_eq!(a["status"], json!(200), "round {round}: {a:.300}");
        assert_eq!(
            a["body"].as_str().map(str::len),
            Some(300_000),
            "round {round}: {a:.300}"
        );
    }
}

#[test]
fn eintr21_a_command_through_the_proxy_survives_a_signal_storm() {
    if !std::path::Path::new("/usr/bin/curl").exists() {
        return;
    }
    storm();
    let port = serve();
    let w = ws();
    let s = session(
        &w,
        &format!(
            "[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 20000\n\
             [net]\nallow = [\"127.0.0.1:{port}\"]\nallow_http = true\n"
        ),
    );
    for round in 0..5 {
        let a = call(
            &s,
            json!({"op": "exec", "command": format!(
                "/usr/bin/curl -sS --max-time 10 http://127.0.0.1:{port}/ | wc -c")}),
        );
        if a["confined"].to_string().contains("namespaces unavailable") {
            eprintln!("no namespaces; skipped");
            return;
        }
        assert_eq!(a["ok"], json!(true), "round {round}: {a}");
        assert_eq!(a["stdout"], json!("300000\n"), "round {round}: {a}");
    }
}

/// Control: the storm does interrupt a blocking call that does not retry,
/// so the tests above can fail.
#[test]
fn eintr21_the_storm_interrupts_a_plain_blocking_read() {
    storm();
    let mut fds = [0; 2];
    // SAFETY: a two-slot array for the pipe's ends.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let mut b = [0u8; 1];
    // SAFETY: one byte into a one-byte buffer.
    let n = unsafe { libc::read(fds[0], b.as_mut_ptr().cast(), 1) };
    let err = std::io::Error::last_os_error();
    // SAFETY: the pipe's ends, closed once.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    assert_eq!(n, -1);
    assert_eq!(err.kind(), std::io::ErrorKind::Interrupted);
}
