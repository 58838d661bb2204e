//! `sandgate mcp --http` against clients that abuse the connection itself:
//! heads sent by anyone who can connect (before the token is checked) and
//! bodies whose stated length the server cannot take.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

mod http_support;
use http_support::{policy_dir, session_id, start_http, Killed};

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}

/// One HTTP/1.1 `POST` of `body` to `port` with `headers`, on a new
/// connection: the status and the whole answer.
fn post(port: u16, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    c.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, out)
}

/// An `initialize` request's body.
fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

/// Anyone who can connect to the port, without the token, can make the
/// server hold a request head for as long as it takes to arrive (10 s):
/// the token is checked only once the head is whole. 400 connections each
/// sending 380 KiB of head (many header lines, never the blank line that
/// ends it) must not make the server hold their heads: before, it read
/// each up to about 400 KiB and its resident memory grew by about 170 MiB
/// (and by 8 GiB with 20,000 such connections, a descriptor limit this
/// machine's shells have). A client's head (a long header within the
/// bound) is still served, with the token, while they are held.
#[test]
fn mcpgone22_unauthenticated_heads_are_not_held_past_a_small_bound() {
    let dir = policy_dir();
    let (server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let (status, out) = post(port, &[("Authorization", &auth)], &initialize());
    assert_eq!(status, 200, "{out}");
    let before = rss_kib(server.0.id());
    let line = format!("X-Pad: {}\r\n", "a".repeat(4000));
    let mut held = Vec::new();
    for _ in 0..400 {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = c.write_all(format!("POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").as_bytes());
        held.push(c);
    }
    for c in &mut held {
        for _ in 0..95 {
            if c.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
    }
    // The server reads what was sent (within a second or two on loopback).
    let mut most = 0;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        most = most.max(rss_kib(server.0.id()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let grown = most.saturating_sub(before);
    assert!(
        grown < 64 * 1024,
        "400 unauthenticated partial heads grew the server by {grown} KiB"
    );
    // A head of 6 KiB (a long header), with the token, is served meanwhile.
    let long = "u".repeat(6000);
    let (status, out) = post(
        port,
        &[("Authorization", &auth), ("User-Agent", &long)],
        &initialize(),
    );
    assert_eq!(status, 200, "{out}");
    drop(held);
}

/// A request whose `Content-Length` says more than the 4 MiB a body may
/// take is answered 413 at once, whatever of it has arrived: before, the
/// server waited for a body it would never take, answered 408 ten seconds
/// later (the client being slow, not too big) and held the session place
/// such a request takes all that time. A body within the cap, its length
/// stated, is still read and served.
#[test]
fn mcpgone22_a_stated_length_over_the_cap_is_answered_413_at_once() {
    let dir = policy_dir();
    let (_server, port, token) = start_http(dir.path());
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{{\"jsonrpc\"",
        5 * 1024 * 1024
    );
    let began = Instant::now();
    c.write_all(head.as_bytes()).unwrap();
    let mut out = vec![0u8; 512];
    let n = c.read(&mut out).unwrap();
    let out = String::from_utf8_lossy(&out[..n]);
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    assert!(out.contains("4194304 bytes"), "{out}");
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "answered after {:?}",
        began.elapsed()
    );
    let (status, out) = post(
        port,
        &[("Authorization", &format!("Bearer {token}"))],
        &initialize(),
    );
    assert_eq!(status, 200, "{out}");
}

/// A request without the token is answered 401 and its connection closed:
/// before, the connection was kept alive, so a client without the token
/// held it (a descriptor and a task of the server) for as long as it liked
/// by sending a request every few seconds, past the 10 s that a connection
/// sending nothing is given, and could try tokens on it without end.
#[test]
fn mcpgone22_a_request_without_the_token_closes_its_connection() {
    let dir = policy_dir();
    let (_server, port, token) = start_http(dir.path());
    for auth in ["", "Authorization: Bearer not-the-token\r\n"] {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let req = format!(
            "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\n\
             Content-Length: 2\r\n\r\n{{}}"
        );
        c.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let began = Instant::now();
        let r = c.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out);
        assert!(
            r.is_ok(),
            "the connection was still open {:?} after its 401 ({r:?}): {out}",
            began.elapsed()
        );
        assert!(out.starts_with("HTTP/1.1 401"), "{out}");
    }
    // The token still opens a session on a kept-alive connection.
    let (status, out) = post(
        port,
        &[("Authorization", &format!("Bearer {token}"))],
        &initialize(),
    );
    assert_eq!(status, 200, "{out}");
}

/// Reads `c` until `needle` has arrived (or the connection ends, or
/// `secs` have passed): everything read.
fn read_until(c: &mut TcpStream, needle: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while !String::from_utf8_lossy(&out).contains(needle) && Instant::now() < deadline {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Connections without the token, as many as the server takes (its
/// descriptors filled), leave a session's `exec` answered: with a refusal
/// naming the shortage when the call cannot get the descriptor its
/// cancel signal needs. Before, making that signal panicked on the
/// protocol's thread, the call was never answered, and its client waited
/// for ever: anyone who could connect to the port could hang every
/// `exec` of the session.
#[test]
fn mcpgone22_an_exec_out_of_descriptors_is_answered() {
    use std::os::unix::process::CommandExt;
    let dir = policy_dir();
    fs::write(
        dir.path().join("policy.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n\
         [exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 20000\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandgate"));
    cmd.env_remove("SANDGATE_MCP_STALL_SECS")
        .args(["mcp", "--policy"])
        .arg(dir.path().join("policy.toml"))
        .args(["--http", "127.0.0.1:0", "--token-file"])
        .arg(dir.path().join("tok"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = rustix::process::Rlimit {
                current: Some(128),
                maximum: Some(128),
            };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, lim)?;
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let server = Killed(child);
    let port: u16 = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let token = fs::read_to_string(dir.path().join("tok")).unwrap();
    // One kept-alive connection carries the session.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let send = |c: &mut TcpStream, body: &str, sid: Option<&str>| {
        let sid = sid.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
        let req = format!(
            "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             {sid}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        c.write_all(req.as_bytes()).unwrap();
    };
    send(&mut c, &initialize(), None);
    let out = read_until(&mut c, "\"id\":1,\"result\"", 20);
    let sid = session_id(&out);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    send(&mut c, &note, Some(&sid));
    let out = read_until(&mut c, "202 Accepted", 20);
    assert!(out.contains("202 Accepted"), "{out}");
    // Connections until the server takes no more.
    let mut flood = Vec::new();
    for _ in 0..300 {
        match TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(1),
        ) {
            Ok(f) => flood.push(f),
            Err(_) => break,
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": "echo hi"}}})
    .to_string();
    send(&mut c, &call, Some(&sid));
    let out = read_until(&mut c, "\"id\":2", 15);
    assert!(
        out.contains("\"id\":2"),
        "the exec was not answered with {} connections held: {out}",
        flood.len()
    );
    assert!(
        out.contains("hi") || out.contains("Too many open files"),
        "{out}"
    );
    drop(flood);
    drop(server);
}
