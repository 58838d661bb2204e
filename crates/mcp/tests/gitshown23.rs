//! The roots the MCP server tells the agent of (its instructions at
//! `initialize`, and `list_allowed_directories`) are spelled as every
//! sandgate message spells a name: a byte that is not UTF-8 as `\xNN`, a
//! backslash doubled. Before, both were lossy: a root in a directory named
//! with the byte 0xFF was listed with U+FFFD, the name of another
//! directory, which the agent then used.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Sends one JSON-RPC message.
fn send(s: &mut UnixStream, v: Value) {
    let mut line = serde_json::to_vec(&v).unwrap();
    line.push(b'\n');
    s.write_all(&line).unwrap();
}

/// The answer to request `id` (other messages skipped).
fn answer(r: &mut BufReader<UnixStream>, id: u64) -> Value {
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "the server closed");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == json!(id) {
            return v;
        }
    }
}

#[test]
fn gitshown23_roots_not_utf8_are_told_to_the_agent_as_their_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    // A directory named `d`, the byte 0xFF, a backslash, `xfe`, a line
    // feed and `x`; beside it, one whose name is the lossy spelling of the
    // first.
    let odd = tmp.path().join(OsStr::from_bytes(b"d\xff\\xfe\nx"));
    let lossy = tmp.path().join("d\u{fffd}\\xfe\nx");
    for d in [&odd, &lossy] {
        std::fs::create_dir_all(d.join("ws")).unwrap();
    }
    std::fs::write(
        odd.join("policy.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n",
    )
    .unwrap();
    let policy = sandgate::policy::Policy::load(odd.join("policy.toml")).unwrap();
    let server = sandgate_mcp::Server::from_policy(&policy, None, Vec::new()).unwrap();
    let sock = tmp.path().join("s.sock");
    let listen = sandgate_mcp::Listen::Unix(sock.clone());
    std::thread::spawn(move || server.serve_blocking(listen));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut s = loop {
        match UnixStream::connect(&sock) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("no socket at {}: {e}", sock.display()),
        }
    };
    let mut r = BufReader::new(s.try_clone().unwrap());
    send(
        &mut s,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "gitshown23", "version": "0"}}}),
    );
    let init = answer(&mut r, 1);
    send(
        &mut s,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let shown = |p: &Path| format!("{}/ws", sandgate::policy::shown(p));
    let want = shown(&odd);
    assert!(want.ends_with(r"/d\xff\\xfe\u{a}x/ws"), "{want}");
    let instructions = init["result"]["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains(&format!("confined by sandgate to {want} (")),
        "the instructions name the root as {instructions:?}"
    );
    assert!(!instructions.contains('\u{fffd}'), "{instructions:?}");
    send(
        &mut s,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "list_allowed_directories", "arguments": {}}}),
    );
    let listed = answer(&mut r, 2);
    let text = listed["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains(&format!("\n{want} (read, write)\n")),
        "list_allowed_directories answers {text:?}"
    );
    assert!(!text.contains('\u{fffd}'), "{text:?}");
    assert!(!text.contains(&shown(&lossy)), "{text:?}");
    // One line per root: the line feed in the name adds none.
    assert_eq!(text.lines().count(), 3, "{text:?}");
}
