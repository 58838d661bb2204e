//! `sandgate mcp` over `--http`, `--unix` and stdio: what becomes of a
//! long call when its client goes away, and what the HTTP transport makes
//! of sessions and tokens.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod http_support;
use http_support::{http, http_session, send_http, start_http, start_http_with, Killed};

/// A policy granting `exec` (a long timeout, so only a cancel ends a
/// command early) in a fresh directory.
fn exec_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("ws")).unwrap();
    fs::write(dir.path().join("ws/a.txt"), "hello\n").unwrap();
    fs::write(
        dir.path().join("policy.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n\
         [exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 600000\n",
    )
    .unwrap();
    dir
}

/// Whether a process runs with `token` as one of its arguments.
fn running_with(token: &str) -> bool {
    fs::read_dir("/proc").unwrap().flatten().any(|e| {
        fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == token.as_bytes()))
    })
}

/// Waits (up to `secs`) until `cond` holds; answers whether it did.
fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// A sleep argument no other process runs (found by it), unique per test.
fn sleep_token(n: u32) -> String {
    format!("7{n}{}.25", std::process::id())
}

/// An `exec` call of `sleep TOKEN` as a JSON-RPC request with `id`.
fn exec_sleep(id: u64, token: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": format!("sleep {token}")}}})
}

/// [`http_support::start_http`], idle HTTP sessions closed after `idle` seconds where
/// given (`SANDGATE_MCP_HTTP_IDLE_SECS`), else the default five minutes.
fn start_http_idle(dir: &Path, idle: Option<u64>) -> (Killed, u16, String) {
    let (child, port, token) = start_http_with(dir, |cmd| {
        if let Some(secs) = idle {
            cmd.env("SANDGATE_MCP_HTTP_IDLE_SECS", secs.to_string());
        }
    });
    (Killed(child), port, token)
}

/// Starts `exec` of `sleep TOKEN` in session `id` over HTTP and waits for
/// the command to run: the connection its answer would come on.
fn http_exec(port: u16, auth: &str, id: &str, token: &str) -> TcpStream {
    let call = exec_sleep(2, token).to_string();
    let c = send_http(
        port,
        "POST",
        &[("Authorization", auth), ("Mcp-Session-Id", id)],
        &call,
    );
    assert!(
        eventually(30, || running_with(token)),
        "the command never started"
    );
    c
}

/// A session ended with `DELETE` while its `exec` runs has the command
/// ended, its whole process tree, as a cancel would: nobody can take its
/// answer any more.
#[test]
fn mcphttp20_an_http_session_deleted_mid_exec_ends_its_command() {
    let dir = exec_dir();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let id = http_session(port, &auth);
    let tok = sleep_token(1);
    let _call = http_exec(port, &auth, &id, &tok);
    let (status, out) = http(
        port,
        "DELETE",
        &[("Authorization", &auth), ("Mcp-Session-Id", &id)],
        "",
    );
    assert!((200..300).contains(&status), "{out}");
    assert!(
        eventually(15, || !running_with(&tok)),
        "the command of a deleted session still runs"
    );
}

/// `sandgate mcp --unix` on `dir`'s policy at `dir/mcp.sock`.
fn start_unix(dir: &Path) -> (Killed, PathBuf) {
    let sock = dir.join("mcp.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["mcp", "--policy"])
        .arg(dir.join("policy.toml"))
        .arg("--unix")
        .arg(&sock)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child = Killed(child);
    assert!(eventually(10, || sock.exists()), "no socket");
    (child, sock)
}

/// Writes the initialize handshake on `w` and reads its answer from `r`.
fn handshake(mut w: impl Write, r: &mut impl BufRead) {
    writeln!(
        w,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    )
    .unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("protocolVersion"), "{line}");
    writeln!(
        w,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
}

/// A UNIX-socket client that closes its connection while its `exec` runs
/// has the command ended: its session is over.
#[test]
fn mcphttp20_a_unix_connection_closed_mid_exec_ends_its_command() {
    let dir = exec_dir();
    let (_server, sock) = start_unix(dir.path());
    let stream = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    handshake(&stream, &mut r);
    let tok = sleep_token(2);
    writeln!(&stream, "{}", exec_sleep(1, &tok)).unwrap();
    assert!(
        eventually(30, || running_with(&tok)),
        "the command never started"
    );
    drop(r);
    drop(stream);
    assert!(
        eventually(15, || !running_with(&tok)),
        "the command of a closed connection still runs"
    );
}

/// A stdio client that closes the server's input while its `exec` runs
/// has the command ended and the server exit. It still holds the reading
/// end of the output, so it may still take answers: the command is given
/// the few seconds the server waits for the last answers.
#[test]
fn mcphttp20_stdin_closed_mid_exec_ends_its_command() {
    let dir = exec_dir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["mcp", "--policy"])
        .arg(dir.path().join("policy.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut child = Killed(child);
    handshake(&stdin, &mut r);
    let tok = sleep_token(3);
    writeln!(&stdin, "{}", exec_sleep(1, &tok)).unwrap();
    assert!(
        eventually(30, || running_with(&tok)),
        "the command never started"
    );
    drop(stdin);
    assert!(
        eventually(15, || !running_with(&tok)),
        "the command still runs after stdin closed"
    );
    assert!(
        eventually(15, || child.0.try_wait().unwrap().is_some()),
        "the server did not exit"
    );
}

/// `sandgate mcp --unix` on `dir`'s policy, writing its audit to
/// `dir/audit.jsonl`.
fn start_unix_audited(dir: &Path) -> (Killed, PathBuf) {
    let sock = dir.join("mcp.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["mcp", "--policy"])
        .arg(dir.join("policy.toml"))
        .arg("--audit")
        .arg(dir.join("audit.jsonl"))
        .arg("--unix")
        .arg(&sock)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child = Killed(child);
    assert!(eventually(10, || sock.exists()), "no socket");
    (child, sock)
}

/// Waits (up to 15 s) for the command running with `tok` to end: how long
/// it took.
fn ended_within(tok: &str) -> Duration {
    let t0 = Instant::now();
    assert!(
        eventually(15, || !running_with(tok)),
        "the command of a client that is gone still runs"
    );
    t0.elapsed()
}

/// Whether `dir/audit.jsonl` records an `exec` that ended `E_ABORTED`.
fn audited_aborted(dir: &Path) -> bool {
    fs::read_to_string(dir.join("audit.jsonl")).is_ok_and(|text| {
        text.lines().any(|l| {
            serde_json::from_str::<Value>(l)
                .is_ok_and(|v| v["op"] == "exec" && v["outcome"] == "E_ABORTED")
        })
    })
}

/// A UNIX-socket client that is wholly gone (its connection closed, or
/// shut down both ways) while its `exec` runs cannot take any answer: the
/// command is ended at once, as a cancel would end it, not after the
/// seconds a client that still reads is given for its last answers.
/// `gone` ends the client's part, answering the connection where it is
/// still open on the client's side (kept open until the command ended).
fn unix_client_gone_mid_exec(
    n: u32,
    gone: impl FnOnce(std::os::unix::net::UnixStream) -> Option<std::os::unix::net::UnixStream>,
) {
    let dir = exec_dir();
    let (_server, sock) = start_unix_audited(dir.path());
    let stream = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    handshake(&stream, &mut r);
    let tok = sleep_token(n);
    writeln!(&stream, "{}", exec_sleep(1, &tok)).unwrap();
    assert!(
        eventually(30, || running_with(&tok)),
        "the command never started"
    );
    drop(r);
    let _kept = gone(stream);
    let took = ended_within(&tok);
    assert!(
        took < Duration::from_millis(1500),
        "the command of a client that is gone ran on for {took:?}"
    );
    assert!(
        eventually(10, || audited_aborted(dir.path())),
        "no exec audited E_ABORTED: {:?}",
        fs::read_to_string(dir.path().join("audit.jsonl"))
    );
}

#[test]
fn early22_a_unix_connection_closed_mid_exec_ends_its_command_at_once() {
    unix_client_gone_mid_exec(4, |s| {
        drop(s);
        None
    });
}

#[test]
fn early22_a_unix_connection_shut_down_mid_exec_ends_its_command_at_once() {
    unix_client_gone_mid_exec(5, |s| {
        s.shutdown(std::net::Shutdown::Both).unwrap();
        // Still open on this side: only the shutdown says it is gone.
        Some(s)
    });
}

/// `exec` of `sleep 0.5; echo TOKEN`, as a JSON-RPC request with `id`.
fn exec_echo(id: u64, token: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": format!("sleep 0.5; echo {token}")}}})
}

/// A UNIX-socket client that shuts down only its sending side while its
/// `exec` runs still reads: it gets the answer.
#[test]
fn early22_a_half_closed_unix_client_still_gets_its_answer() {
    let dir = exec_dir();
    let (_server, sock) = start_unix_audited(dir.path());
    let stream = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    handshake(&stream, &mut r);
    writeln!(&stream, "{}", exec_echo(1, "half-closed-unix")).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("half-closed-unix"), "{line:?}");
}

/// A stdio client that closes the server's input and stops reading its
/// output (both pipes closed) while its `exec` runs has the command ended
/// at once, and the server exits.
#[test]
fn early22_a_stdio_client_gone_mid_exec_ends_its_command_at_once() {
    let dir = exec_dir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["mcp", "--policy"])
        .arg(dir.path().join("policy.toml"))
        .arg("--audit")
        .arg(dir.path().join("audit.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut child = Killed(child);
    handshake(&stdin, &mut r);
    let tok = sleep_token(6);
    writeln!(&stdin, "{}", exec_sleep(1, &tok)).unwrap();
    assert!(
        eventually(30, || running_with(&tok)),
        "the command never started"
    );
    drop(r);
    drop(stdin);
    let took = ended_within(&tok);
    assert!(
        took < Duration::from_millis(1500),
        "the command of a client that is gone ran on for {took:?}"
    );
    assert!(
        eventually(10, || audited_aborted(dir.path())),
        "no exec audited E_ABORTED: {:?}",
        fs::read_to_string(dir.path().join("audit.jsonl"))
    );
    assert!(
        eventually(15, || child.0.try_wait().unwrap().is_some()),
        "the server did not exit"
    );
}

/// A stdio client whose reading end of the output is gone while its
/// input stays open (a host that died while another process still holds
/// the pipe it wrote to) can take no answer: the command is ended at once.
#[test]
fn early22_a_stdio_output_nobody_reads_ends_the_command_at_once() {
    let dir = exec_dir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["mcp", "--policy"])
        .arg(dir.path().join("policy.toml"))
        .arg("--audit")
        .arg(dir.path().join("audit.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut child = Killed(child);
    handshake(&stdin, &mut r);
    let tok = sleep_token(7);
    writeln!(&stdin, "{}", exec_sleep(1, &tok)).unwrap();
    assert!(
        eventually(30, || running_with(&tok)),
        "the command never started"
    );
    drop(r);
    let took = ended_within(&tok);
    assert!(
        took < Duration::from_millis(1500),
        "the command of a client that reads nothing any more ran on for {took:?}"
    );
    assert!(
        eventually(10, || audited_aborted(dir.path())),
        "no exec audited E_ABORTED: {:?}",
        fs::read_to_string(dir.path().join("audit.jsonl"))
    );
    // Its input still open, the server ends all the same.
    assert!(
        eventually(10, || child.0.try_wait().unwrap().is_some()),
        "the server still runs for a client that reads nothing any more"
    );
    drop(stdin);
}

/// A stdio client that closes the server's input but still reads its
/// output (`printf ... | sandgate mcp`) gets the answers of the calls it
/// sent.
#[test]
fn early22_a_half_closed_stdio_client_still_gets_its_answers() {
    let dir = exec_dir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["mcp", "--policy"])
        .arg(dir.path().join("policy.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let _child = Killed(child);
    handshake(&stdin, &mut r);
    writeln!(&stdin, "{}", exec_echo(1, "half-closed-stdio")).unwrap();
    writeln!(
        &stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "read_text_file", "arguments": {"path": "a.txt"}}})
    )
    .unwrap();
    drop(stdin);
    let mut all = String::new();
    r.read_to_string(&mut all).unwrap();
    assert!(all.contains("half-closed-stdio"), "{all}");
    assert!(all.contains("hello"), "{all}");
}

/// A stdio client that closes the server's input but still reads its
/// output gets the answer of a call that asked for progress
/// notifications and runs past its first one.
#[test]
fn early22_a_half_closed_stdio_client_gets_the_answer_of_a_call_with_progress() {
    let dir = exec_dir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["mcp", "--policy"])
        .arg(dir.path().join("policy.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let _child = Killed(child);
    handshake(&stdin, &mut r);
    writeln!(
        &stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "exec", "_meta": {"progressToken": "p1"},
                "arguments": {"command": "sleep 1.5; echo progressed-answer"}}})
    )
    .unwrap();
    drop(stdin);
    let t0 = Instant::now();
    let mut all = String::new();
    r.read_to_string(&mut all).unwrap();
    assert!(
        all.lines()
            .any(|l| l.contains("\"id\":1") && l.contains("progressed-answer")),
        "no answer after {:?}: {all}",
        t0.elapsed()
    );
}

/// Reads `c` (an SSE answer) until a `data:` line holds a JSON-RPC message
/// with `id`, or the stream ends: that message, or everything read.
fn sse_answer(c: &mut TcpStream, id: u64) -> Result<Value, String> {
    let mut r = BufReader::new(c);
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return Err(seen),
            Ok(_) => {}
        }
        seen.push_str(&line);
        if let Some(data) = line.strip_prefix("data:") {
            if let Ok(v) = serde_json::from_str::<Value>(data.trim()) {
                if v["id"] == json!(id) {
                    return Ok(v);
                }
            }
        }
    }
}

/// A client that drops the stream its `exec` answers on, mid-call, may
/// come back for the answer (a `GET` with `Last-Event-ID`, as MCP's
/// streamable HTTP lets it): a dropped stream is not a cancel, so the
/// command runs on and its answer arrives on the resumed stream.
#[test]
fn mcphttp20_an_http_stream_dropped_mid_exec_is_resumed_with_its_answer() {
    let dir = exec_dir();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let id = http_session(port, &auth);
    // A sleep of 3 s no other process runs, found by its argument.
    let tok = format!("3.{}4", std::process::id());
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": format!("sleep {tok}; echo done")}}})
    .to_string();
    let c = send_http(
        port,
        "POST",
        &[("Authorization", &auth), ("Mcp-Session-Id", &id)],
        &call,
    );
    // The priming event's id, then the stream is dropped.
    let mut r = BufReader::new(c);
    let mut event = None;
    while event.is_none() {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "no priming event");
        event = line.strip_prefix("id:").map(|e| e.trim().to_owned());
    }
    assert!(
        eventually(30, || running_with(&tok)),
        "the command never started"
    );
    drop(r);
    std::thread::sleep(Duration::from_millis(500));
    assert!(running_with(&tok), "a dropped stream ended the command");
    let event = event.unwrap();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        c,
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\
         Authorization: {auth}\r\nMcp-Session-Id: {id}\r\nLast-Event-ID: {event}\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let a = sse_answer(&mut c, 7).unwrap_or_else(|s| panic!("no answer on resume: {s}"));
    assert_eq!(a["result"]["structuredContent"]["stdout"], "done\n", "{a}");
}

/// The idle time the two tests below give the server (the default is
/// five minutes, the SDK's own, which these tests found too short for a
/// call: with it, the first test failed after 300 s).
const IDLE: u64 = 3;

/// An `exec` that runs longer than the sessions' idle time, its client
/// waiting on the call's stream all along, gets its answer: a session with
/// a call running is not idle.
#[test]
fn mcphttp20_an_http_exec_longer_than_the_idle_time_is_answered() {
    let dir = exec_dir();
    let (_server, port, token) = start_http_idle(dir.path(), Some(IDLE));
    let auth = format!("Bearer {token}");
    let id = http_session(port, &auth);
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": format!("sleep {}; echo done", 3 * IDLE)}}})
    .to_string();
    let mut c = send_http(
        port,
        "POST",
        &[("Authorization", &auth), ("Mcp-Session-Id", &id)],
        &call,
    );
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let started = Instant::now();
    let a = sse_answer(&mut c, 3)
        .unwrap_or_else(|s| panic!("no answer after {} s: {s}", started.elapsed().as_secs()));
    assert_eq!(a["result"]["structuredContent"]["stdout"], "done\n", "{a}");
    assert!(started.elapsed() >= Duration::from_secs(3 * IDLE));
}

/// A session with no request open or made for the idle time is still
/// closed, its place freed: a later request naming it finds no session;
/// one used within it is kept.
#[test]
fn mcphttp20_an_idle_http_session_is_still_closed() {
    let dir = exec_dir();
    let (_server, port, token) = start_http_idle(dir.path(), Some(IDLE));
    let auth = format!("Bearer {token}");
    let id = http_session(port, &auth);
    let ping = |n: u64| {
        http(
            port,
            "POST",
            &[("Authorization", &auth), ("Mcp-Session-Id", &id)],
            &json!({"jsonrpc": "2.0", "id": n, "method": "ping"}).to_string(),
        )
    };
    let (status, out) = ping(2);
    assert_eq!(status, 200, "{out}");
    // Used more often than the idle time: kept.
    for n in 0..4 {
        std::thread::sleep(Duration::from_millis(IDLE * 1000 / 2));
        let (status, out) = ping(10 + n);
        assert_eq!(status, 200, "a session in use was closed: {out}");
    }
    std::thread::sleep(Duration::from_secs(2 * IDLE + 1));
    let (status, out) = ping(3);
    assert_eq!(status, 404, "an idle session still answers: {out}");
}

/// A value of the idle time that is not a whole number of seconds from 1
/// up is refused, naming the variable, before anything is bound.
#[test]
fn mcphttp20_a_bad_idle_time_is_refused_by_name() {
    let dir = exec_dir();
    for bad in ["0", "-1", "1.5", "five", ""] {
        let out = Command::new(env!("CARGO_BIN_EXE_sandgate"))
            .env("SANDGATE_MCP_HTTP_IDLE_SECS", bad)
            .args(["mcp", "--policy"])
            .arg(dir.path().join("policy.toml"))
            .args(["--http", "127.0.0.1:0", "--token-file"])
            .arg(dir.path().join("tok"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?} was taken");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("SANDGATE_MCP_HTTP_IDLE_SECS"),
            "{bad:?}: {err}"
        );
        assert!(
            !dir.path().join("tok").exists(),
            "{bad:?}: a token was written"
        );
    }
}
