//! Sessions of sandgate's doors for the CLI's test suites that drive
//! them with raw JSON: a `sandgate mcp` session over stdio (started,
//! initialized, asked one request at a time, killed when dropped), and one
//! `sandgate tool` session given every request at once.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

/// An initialized `sandgate mcp` session.
pub struct McpSession {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl McpSession {
    /// Starts `sandgate mcp ARGS…` (the binary under test, or
    /// `SANDGATE_MCP_BIN` to run a suite against another build) and
    /// initializes it as the client `client`.
    pub fn start<I, S>(args: I, client: &str) -> McpSession
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let bin = std::env::var_os("SANDGATE_MCP_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_sandgate").into());
        let mut child = Command::new(bin)
            .arg("mcp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut m = McpSession {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next: 1,
        };
        m.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": client, "version": "1"}}),
        );
        writeln!(
            m.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        m
    }

    /// Sends one request and answers the response with its id (passing
    /// over notifications).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server ended"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }
}

#[allow(dead_code)] // Not every suite sends raw lines.
impl McpSession {
    /// Sends `line` as it is (it may be JSON no `json!` value can be,
    /// such as an object giving a key twice), with a newline.
    pub fn send_line(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message the server writes, whatever it is.
    pub fn next_message(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "the server ended"
        );
        serde_json::from_str(&line).unwrap()
    }
}

impl Drop for McpSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The answers of one `sandgate tool --policy POLICY` session to `reqs`,
/// sent at once; one answer per request.
#[allow(dead_code)] // Not every suite drives the JSON endpoint.
pub fn tool_session(policy: &Path, reqs: &[Value]) -> Vec<Value> {
    let mut input = String::new();
    for r in reqs {
        input.push_str(&r.to_string());
        input.push('\n');
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["tool", "--policy"])
        .arg(policy)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        answers.len(),
        reqs.len(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    answers
}
