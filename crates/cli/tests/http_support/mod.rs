//! `sandgate mcp --http` for the CLI's test suites that drive it with raw
//! HTTP/1.1: the server started on a loopback port (killed when dropped),
//! and one request on a connection of its own.

// Each suite uses a part of this.
#![allow(dead_code)]

#[path = "../support/mod.rs"]
mod support;
#[allow(unused_imports)]
pub use support::{ignored_here, sendable};

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Kills the child when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sandgate mcp --http 127.0.0.1:0` on `dir`'s `policy.toml`, its token
/// written to `dir/tok`: the child, its port and its token. The test
/// knobs `SANDGATE_MCP_STALL_SECS` and `SANDGATE_MCP_HTTP_IDLE_SECS` are
/// left at their defaults unless `configure` sets them (it may also set
/// a `pre_exec`).
pub fn start_http_with(dir: &Path, configure: impl FnOnce(&mut Command)) -> (Child, u16, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandgate"));
    cmd.env_remove("SANDGATE_MCP_STALL_SECS")
        .env_remove("SANDGATE_MCP_HTTP_IDLE_SECS")
        .args(["mcp", "--policy"])
        .arg(dir.join("policy.toml"))
        .args(["--http", "127.0.0.1:0", "--token-file"])
        .arg(dir.join("tok"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    configure(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let _ = err.read_line(&mut line);
    let port = http_port(&line);
    let token = fs::read_to_string(dir.join("tok"));
    let (Some(port), Ok(token)) = (port, token) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "no port in {line:?}, or no token in {}",
            dir.join("tok").display()
        );
    };
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (child, port, token)
}

/// [`start_http_with`] as it is, killed when dropped.
pub fn start_http(dir: &Path) -> (Killed, u16, String) {
    let (child, port, token) = start_http_with(dir, |_| {});
    (Killed(child), port, token)
}

/// The port of the URL `--http` prints on its first line to stderr.
pub fn http_port(line: &str) -> Option<u16> {
    line.split("http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
}

/// Sends one HTTP/1.1 request (`Connection: close`) to `port` on a new
/// connection and answers the connection, its answer not yet read.
pub fn send_http(port: u16, method: &str, headers: &[(&str, &str)], body: &str) -> TcpStream {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!(
        "{method} / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    c.write_all(req.as_bytes()).unwrap();
    c
}

/// What is left to read on `c`, as text.
pub fn rest_of(c: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// One HTTP/1.1 request to `port`: the status and the whole answer.
pub fn http(port: u16, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let out = rest_of(&mut send_http(port, method, headers, body));
    let status = out.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, out)
}

/// A policy with one read and write root, `ws`, in a fresh directory.
pub fn policy_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("ws")).unwrap();
    fs::write(
        dir.path().join("policy.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n",
    )
    .unwrap();
    dir
}

/// The `Mcp-Session-Id` an answer's head (the first in `out`) names.
pub fn session_id(out: &str) -> String {
    let head = out.split_once("\r\n\r\n").map_or(out, |(h, _)| h);
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {out}"))
}

/// Opens and initializes an HTTP session with `auth` (the whole
/// `Authorization` value): its id.
pub fn http_session(port: u16, auth: &str) -> String {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let (status, out) = http(port, "POST", &[("Authorization", auth)], &body);
    assert_eq!(status, 200, "{out}");
    let id = session_id(&out);
    let note =
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (status, out) = http(
        port,
        "POST",
        &[("Authorization", auth), ("Mcp-Session-Id", &id)],
        &note,
    );
    assert_eq!(status, 202, "{out}");
    id
}

/// The JSON-RPC message with `id` in `out`, a whole HTTP answer: its body
/// when that is the message as JSON, else the `data:` line of an SSE
/// stream that holds it.
pub fn jsonrpc_answer(out: &str, id: &serde_json::Value) -> Option<serde_json::Value> {
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let whole = serde_json::from_str::<serde_json::Value>(body.trim()).ok();
    whole
        .into_iter()
        .chain(
            body.lines()
                .filter_map(|l| serde_json::from_str(l.strip_prefix("data:")?.trim()).ok()),
        )
        .find(|v| v["id"] == *id)
}
