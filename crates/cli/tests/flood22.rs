//! `sandgate mcp --http` under a flood of connections that never show the
//! token: anyone who can connect to the loopback port could fill the
//! server's descriptor table with them, so that the calls of a session
//! holding the token failed for want of a descriptor. And `sandgate mcp
//! --unix` under a low descriptor limit, whose sessions each hold one.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

mod http_support;
use http_support::{session_id, start_http_with, Killed};

/// `sandgate mcp --http 127.0.0.1:0` on `dir`'s policy, its descriptor
/// limit set to `nofile`: the child, its port and its token.
fn start_http(dir: &Path, nofile: u64) -> (Killed, u16, String) {
    let (child, port, token) = start_http_with(dir, |cmd| {
        // SAFETY: only setrlimit between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = rustix::process::Rlimit {
                    current: Some(nofile),
                    maximum: Some(nofile),
                };
                rustix::process::setrlimit(rustix::process::Resource::Nofile, lim)?;
                Ok(())
            });
        }
    });
    (Killed(child), port, token)
}

/// A policy with one read and write root holding `a.txt`, and `exec`.
fn policy_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("ws")).unwrap();
    fs::write(dir.path().join("ws/a.txt"), "flood22 content\n").unwrap();
    fs::write(
        dir.path().join("policy.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n\
         [exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 20000\n",
    )
    .unwrap();
    dir
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

/// Sends a `POST` of `body` with the token (and the session id, if any)
/// on `c`, kept alive.
fn send(c: &mut TcpStream, port: u16, token: &str, body: &str, sid: Option<&str>) {
    let sid = sid.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
    let req = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         {sid}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.write_all(req.as_bytes()).unwrap();
}

/// An `initialize` request's body.
fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

/// An initialized session on the kept-alive connection `c`: its id.
fn session(c: &mut TcpStream, port: u16, token: &str) -> String {
    send(c, port, token, &initialize(), None);
    let out = read_until(c, "\"id\":1,\"result\"", 20);
    let sid = session_id(&out);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    send(c, port, token, &note, Some(&sid));
    let out = read_until(c, "202 Accepted", 20);
    assert!(out.contains("202 Accepted"), "{out}");
    sid
}

/// Calls tool `name` with `args` as request `id` on the session: the
/// answer's text as read.
fn call(
    c: &mut TcpStream,
    port: u16,
    token: &str,
    sid: &str,
    id: u64,
    name: &str,
    args: serde_json::Value,
) -> String {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": args}})
    .to_string();
    send(c, port, token, &body, Some(sid));
    read_until(c, &format!("\"id\":{id}"), 15)
}

/// Whether a new connection's `initialize` with the token is answered 200
/// within `secs`.
fn initialize_answers(port: u16, token: &str, secs: u64) -> Result<(), String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(Duration::from_secs(secs))).unwrap();
    let body = initialize();
    let req = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    c.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    c.read_exact(&mut head).map_err(|e| e.to_string())?;
    if head.starts_with(b"HTTP/1.1 200") {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&head).into_owned())
    }
}

/// Whether the server has closed `c` (end of input or a reset), waiting
/// at most `within`.
fn closed(mut c: &TcpStream, within: Duration) -> bool {
    c.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

/// 400 connections that never show the token (half sending nothing, half
/// a request head that never ends), against a server whose descriptor
/// limit is 128, leave a session holding the token able to read a file
/// and run a command, and a new client with the token able to connect;
/// the flood's connections beyond the bound are closed at once. Before,
/// the server took connections until its descriptor table was full, so
/// the session's `read_text_file` and `exec` failed with "Too many open
/// files" and a new client was not served until the flood's connections
/// had stalled out (10 s).
#[test]
fn flood22_connections_without_the_token_leave_descriptors_for_sessions() {
    let dir = policy_dir();
    let (server, port, token) = start_http(dir.path(), 128);
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let sid = session(&mut c, port, &token);
    let mut flood = Vec::new();
    let mut failed = 0;
    for i in 0..400 {
        let Ok(mut f) = TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(1),
        ) else {
            failed += 1;
            if failed == 3 {
                break;
            }
            continue;
        };
        if i % 2 == 1 {
            let _ =
                f.write_all(format!("POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").as_bytes());
        }
        flood.push(f);
    }
    // More than the server has descriptors for (those it has not taken
    // wait in the listener's backlog).
    assert!(flood.len() >= 128, "only {} connections made", flood.len());
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        server.0.id() > 0 && fs::metadata(format!("/proc/{}", server.0.id())).is_ok(),
        "the server ended"
    );
    let out = call(
        &mut c,
        port,
        &token,
        &sid,
        2,
        "read_text_file",
        json!({"path": "a.txt"}),
    );
    assert!(
        out.contains("flood22 content") && !out.contains("\"isError\":true"),
        "read_text_file during the flood: {out}"
    );
    let out = call(
        &mut c,
        port,
        &token,
        &sid,
        3,
        "exec",
        json!({"command": "echo flood22-ran"}),
    );
    assert!(
        out.contains("flood22-ran") && !out.contains("\"isError\":true"),
        "exec during the flood: {out}"
    );
    // A new client with the token is served while the flood is held.
    initialize_answers(port, &token, 3)
        .unwrap_or_else(|e| panic!("a new client with the token during the flood: {e}"));
    // The flood's connections are closed but for a bound (a quarter of
    // the descriptor limit), well before the 10 s a head may take.
    let began = Instant::now();
    let shut = flood
        .iter()
        .filter(|f| closed(f, Duration::from_millis(20)))
        .count();
    assert!(
        shut >= flood.len() - 32,
        "only {shut} of {} connections without the token were closed after {:?}",
        flood.len(),
        began.elapsed()
    );
    drop(flood);
    drop(server);
}

/// `sandgate mcp --unix` at `dir/mcp.sock` on `dir`'s policy, its
/// descriptor limit set to `nofile`: the child and the socket's path.
fn start_unix(dir: &Path, nofile: u64) -> (Killed, std::path::PathBuf) {
    let sock = dir.join("mcp.sock");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandgate"));
    cmd.env_remove("SANDGATE_MCP_STALL_SECS")
        .args(["mcp", "--policy"])
        .arg(dir.join("policy.toml"))
        .arg("--unix")
        .arg(&sock)
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = rustix::process::Rlimit {
                current: Some(nofile),
                maximum: Some(nofile),
            };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, lim)?;
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("UNIX socket"), "{line}");
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (Killed(child), sock)
}

/// A connection to `sock` that sent `initialize`: it and the first line
/// answered (empty if the connection was closed first).
fn unix_open(sock: &Path) -> (std::os::unix::net::UnixStream, String) {
    let s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A connection over the cap is answered and closed at once, so this
    // write may meet a closed socket: the answer tells what happened.
    let _ = writeln!(&s, "{}", initialize());
    let mut line = String::new();
    let _ = BufReader::new(&s).read_line(&mut line);
    (s, line)
}

/// Under a descriptor limit of 96, the UNIX socket holds at most a
/// quarter of it in sessions (24), refusing the next naming that cap, so
/// that sessions holding every place and a flood of connections beyond
/// them leave a session's `exec` served. Before, it held 64 whatever the
/// limit, and `exec` failed with `E_NOT_STARTED` "Too many open files".
#[test]
fn leads22_unix_sessions_scale_with_the_descriptor_limit() {
    let dir = policy_dir();
    let (server, sock) = start_unix(dir.path(), 96);
    let (a, line) = unix_open(&sock);
    assert!(line.contains("protocolVersion"), "{line}");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    writeln!(&a, "{note}").unwrap();
    // Sessions until one is refused.
    let mut held = Vec::new();
    let refused = loop {
        let (s, line) = unix_open(&sock);
        if !line.contains("protocolVersion") {
            break line;
        }
        held.push(s);
        assert!(
            held.len() < 64,
            "64 more sessions opened under a limit of 96"
        );
    };
    // A flood of connections beyond the cap, held open by their client.
    let flood: Vec<_> = (0..200)
        .filter_map(|_| std::os::unix::net::UnixStream::connect(&sock).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": "echo leads22-ran"}}});
    writeln!(&a, "{call}").unwrap();
    let mut r = BufReader::new(&a);
    let mut out = String::new();
    while !out.contains("\"id\":2") {
        out.clear();
        if r.read_line(&mut out).unwrap_or(0) == 0 {
            break;
        }
    }
    let sessions = held.len() + 1;
    drop(flood);
    drop(held);
    drop(server);
    assert!(
        out.contains("leads22-ran") && !out.contains("\"isError\":true"),
        "exec with every session place held and a flood: {out}"
    );
    assert!(
        refused.contains("\"error\"") && refused.contains("at most 24"),
        "session {} refused with: {refused}",
        sessions + 1
    );
    assert_eq!(sessions, 24, "sessions held under a limit of 96");
}
