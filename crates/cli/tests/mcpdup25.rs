//! `sandgate mcp` refuses a JSON-RPC message that gives a key twice in one
//! object, at any depth, on stdio and over HTTP: the SDK kept the last
//! value (`{"path":"a.txt","path":"../x"}` ran on `../x`), so a gateway or
//! a log in front of the server that kept the first saw another call than
//! the one that ran. The refusal names the key (its path in the message),
//! carries the request's id when the id is unambiguous, runs nothing, and
//! the server serves on. Keys are compared once their escapes are read;
//! keys that differ only in case are different keys.

mod http_support;
mod mcp_support;

use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use http_support::{http, http_session, jsonrpc_answer, policy_dir, start_http};
use mcp_support::McpSession;

/// A stdio session on `dir`'s `policy.toml`, its `ws/a.txt` holding
/// `hello`.
fn stdio_session(dir: &Path) -> McpSession {
    fs::write(dir.join("ws/a.txt"), "hello\n").unwrap();
    let policy = dir.join("policy.toml");
    McpSession::start(
        [std::ffi::OsStr::new("--policy"), policy.as_os_str()],
        "dup25",
    )
}

/// A `tools/call` line with `id`, calling `tool` with `arguments` (raw
/// JSON text, which may give a key twice).
fn call_line(id: u64, tool: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
    )
}

/// Asserts that `answer` is the refusal of a key given twice: a JSON-RPC
/// error with `code` and `id`, naming `key` (as the user is shown it,
/// between backticks), and no result.
fn assert_refused(what: &str, answer: &Value, code: i64, id: &Value, key: &str) {
    assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
    assert_eq!(answer["id"], *id, "{what}: {answer}");
    assert_eq!(answer["error"]["code"], json!(code), "{what}: {answer}");
    assert!(answer.get("result").is_none(), "{what}: {answer}");
    let msg = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!("duplicated key `{key}`")),
        "{what}: the refusal does not name `{key}`: {answer}"
    );
}

/// The messages refused for a key given twice, on either transport: the
/// line, the code and id of its answer, and the key it names.
fn refused_cases() -> Vec<(&'static str, String, i64, Value, &'static str)> {
    vec![
        (
            "the method, at the top level",
            r#"{"jsonrpc":"2.0","id":11,"method":"ping","method":"tools/call","params":{"name":"list_allowed_directories","arguments":{}}}"#.into(),
            -32600,
            json!(11),
            "method",
        ),
        (
            "the id itself: no id is answered",
            r#"{"jsonrpc":"2.0","id":12,"id":13,"method":"ping"}"#.into(),
            -32600,
            Value::Null,
            "id",
        ),
        (
            "a path in the arguments",
            call_line(14, "read_text_file", r#"{"path":"a.txt","path":"../x"}"#),
            -32602,
            json!(14),
            "params.arguments.path",
        ),
        (
            "a path spelled with an escape",
            call_line(15, "read_text_file", r#"{"path":"a.txt","p\u0061th":"../x"}"#),
            -32602,
            json!(15),
            "params.arguments.path",
        ),
        (
            "a key inside an edit",
            call_line(
                16,
                "edit_file",
                r#"{"path":"a.txt","edits":[{"oldText":"hello","newText":"HELLO"},{"oldText":"x","oldText":"hello","newText":"bye"}]}"#,
            ),
            -32602,
            json!(16),
            "params.arguments.edits[1].oldText",
        ),
        (
            "a key of _meta",
            r#"{"jsonrpc":"2.0","id":"s17","method":"tools/call","params":{"_meta":{"progressToken":1,"progressToken":2},"name":"read_text_file","arguments":{"path":"a.txt"}}}"#.into(),
            -32602,
            json!("s17"),
            "params._meta.progressToken",
        ),
        (
            "a key holding a control character, shown escaped",
            call_line(18, "read_text_file", r#"{"path":"a.txt","a\u001bb":1,"a\u001bb":2}"#),
            -32602,
            json!(18),
            r"params.arguments.a\u{1b}b",
        ),
    ]
}

/// Arguments that differ only in case are not a key given twice: served.
const CASE_ONLY: &str = r#"{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"_meta":{"trace":1,"Trace":2},"name":"read_text_file","arguments":{"path":"a.txt"}}}"#;

/// `write_file`s giving `path` twice, each naming a file that would be
/// written (or one outside): none may run.
fn duplicate_writes(first: u64) -> Vec<String> {
    [
        r#"{"path":"one.txt","path":"two.txt","content":"WRITTEN"}"#,
        r#"{"path":"one.txt","content":"WRITTEN","path":"../out.txt"}"#,
        r#"{"p\u0061th":"one.txt","path":"two.txt","content":"WRITTEN"}"#,
        r#"{"path":"one.txt","content":"WRITTEN","content":"OTHER"}"#,
    ]
    .iter()
    .enumerate()
    .map(|(i, args)| call_line(first + i as u64, "write_file", args))
    .collect()
}

/// Asserts that no `write_file` of [`duplicate_writes`] ran in `dir`.
fn assert_nothing_written(dir: &Path) {
    for name in ["ws/one.txt", "ws/two.txt", "out.txt"] {
        assert!(
            !dir.join(name).exists(),
            "{name} was written by a refused call"
        );
    }
    assert_eq!(fs::read_to_string(dir.join("ws/a.txt")).unwrap(), "hello\n");
}

/// A `read_text_file` of `a.txt` nested `depth` levels deep in an extra
/// argument, as objects or as arrays, with `path` given twice at the
/// bottom.
fn deep_line(id: u64, depth: usize, arrays: bool) -> String {
    let (open, close) = if arrays {
        ("[", "]")
    } else {
        (r#"{"a":"#, "}")
    };
    let mut args = String::from(r#"{"path":"a.txt","x":"#);
    args.push_str(&open.repeat(depth));
    args.push_str(r#"{"path":"a.txt","path":"../x"}"#);
    args.push_str(&close.repeat(depth));
    args.push('}');
    call_line(id, "read_text_file", &args)
}

#[test]
fn mcpdup25_stdio_a_key_given_twice_is_refused_at_any_depth_and_the_server_serves_on() {
    let dir = policy_dir();
    let mut m = stdio_session(dir.path());
    for (what, line, code, id, key) in refused_cases() {
        m.send_line(&line);
        let a = m.next_message();
        assert_refused(what, &a, code, &id, key);
        // Served on: the next call is answered.
        let r = m.request(
            "tools/call",
            json!({"name": "read_text_file", "arguments": {"path": "a.txt"}}),
        );
        assert_eq!(r["result"]["content"][0]["text"], "hello\n", "{what}: {r}");
    }
    // The edit was refused whole: not even its first edit ran.
    assert_eq!(
        fs::read_to_string(dir.path().join("ws/a.txt")).unwrap(),
        "hello\n"
    );
    // A notification giving a key twice is not run, and, as any
    // notification, not answered: the next message is the ping's answer.
    m.send_line(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}"#,
    );
    m.send_line(r#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#);
    let a = m.next_message();
    assert_eq!(a["id"], "after", "{a}");
    assert_eq!(a["result"], json!({}), "{a}");
}

#[test]
fn mcpdup25_stdio_keys_differing_only_in_case_are_served() {
    let dir = policy_dir();
    let mut m = stdio_session(dir.path());
    m.send_line(CASE_ONLY);
    let a = m.next_message();
    assert_eq!(a["id"], 30, "{a}");
    assert_eq!(a["result"]["content"][0]["text"], "hello\n", "{a}");
    // In the arguments too: `Path` is not `path` (the tool refuses it as
    // an unknown argument, not as a key given twice).
    m.send_line(&call_line(
        31,
        "read_text_file",
        r#"{"path":"a.txt","Path":"../x"}"#,
    ));
    let a = m.next_message();
    assert_eq!(a["id"], 31, "{a}");
    let msg = a["error"]["message"].as_str().unwrap_or_default();
    assert!(!msg.contains("duplicated"), "{a}");
    assert!(msg.contains("Path"), "{a}");
}

#[test]
fn mcpdup25_stdio_a_write_giving_its_path_twice_writes_nothing() {
    let dir = policy_dir();
    let mut m = stdio_session(dir.path());
    for (i, line) in duplicate_writes(40).iter().enumerate() {
        m.send_line(line);
        let a = m.next_message();
        let key = if i == 3 {
            "params.arguments.content"
        } else {
            "params.arguments.path"
        };
        assert_refused(line, &a, -32602, &json!(40 + i as u64), key);
    }
    // The server still writes a well-formed call (so nothing above was
    // refused for another reason).
    let w = m.request(
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": "three.txt", "content": "ok"}}),
    );
    assert_eq!(w["result"]["isError"], false, "{w}");
    assert_eq!(
        fs::read_to_string(dir.path().join("ws/three.txt")).unwrap(),
        "ok"
    );
    assert_nothing_written(dir.path());
}

#[test]
fn mcpdup25_stdio_a_message_nested_100000_levels_deep_is_refused_without_overflowing() {
    let dir = policy_dir();
    let mut m = stdio_session(dir.path());
    for (id, arrays) in [(50, false), (51, true)] {
        m.send_line(&deep_line(id, 100_000, arrays));
        let a = m.next_message();
        // Deeper than any JSON the server reads: a parse error, whose id
        // cannot be read.
        assert_eq!(a["id"], Value::Null, "{a}");
        assert_eq!(a["error"]["code"], -32700, "{a}");
        let r = m.request(
            "tools/call",
            json!({"name": "read_text_file", "arguments": {"path": "a.txt"}}),
        );
        assert_eq!(r["result"]["content"][0]["text"], "hello\n", "{r}");
    }
    // Shallow enough to be read, the key given twice at the bottom is
    // found and named.
    m.send_line(&deep_line(52, 100, false));
    let a = m.next_message();
    let key = format!("params.arguments.x{}.path", ".a".repeat(100));
    assert_refused("100 deep", &a, -32602, &json!(52), &key);
}

#[test]
fn mcpdup25_http_a_key_given_twice_is_refused_and_runs_nothing() {
    let dir = policy_dir();
    fs::write(dir.path().join("ws/a.txt"), "hello\n").unwrap();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let sid = http_session(port, &auth);
    let headers = [("Authorization", auth.as_str()), ("Mcp-Session-Id", &sid)];
    let serving = |what: &str| {
        let read = json!({"jsonrpc": "2.0", "id": 90, "method": "tools/call",
            "params": {"name": "read_text_file", "arguments": {"path": "a.txt"}}});
        let (status, out) = http(port, "POST", &headers, &read.to_string());
        assert_eq!(status, 200, "{what}: {out}");
        let a = jsonrpc_answer(&out, &json!(90)).unwrap_or_else(|| panic!("{what}: {out}"));
        assert_eq!(a["result"]["content"][0]["text"], "hello\n", "{what}: {a}");
    };
    for (what, line, code, id, key) in refused_cases() {
        let (status, out) = http(port, "POST", &headers, &line);
        // A request's refusal is its answer; without an id to answer, 400.
        let want = if id.is_null() { 400 } else { 200 };
        assert_eq!(status, want, "{what}: {out}");
        let a = jsonrpc_answer(&out, &id).unwrap_or_else(|| panic!("{what}: {out}"));
        assert_refused(what, &a, code, &id, key);
        serving(what);
    }
    for (i, line) in duplicate_writes(40).iter().enumerate() {
        let (status, out) = http(port, "POST", &headers, line);
        assert_eq!(status, 200, "{line}: {out}");
        let id = json!(40 + i as u64);
        let a = jsonrpc_answer(&out, &id).unwrap_or_else(|| panic!("{line}: {out}"));
        assert_eq!(a["error"]["code"], -32602, "{a}");
    }
    assert_nothing_written(dir.path());
    // A notification giving a key twice: 400, with the error as the body.
    let note = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}"#;
    let (status, out) = http(port, "POST", &headers, note);
    assert_eq!(status, 400, "{out}");
    let a = jsonrpc_answer(&out, &Value::Null).unwrap_or_else(|| panic!("{out}"));
    assert!(
        a["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("`params.requestId`"),
        "{a}"
    );
    // Keys differing only in case are served.
    let (status, out) = http(port, "POST", &headers, CASE_ONLY);
    assert_eq!(status, 200, "{out}");
    let a = jsonrpc_answer(&out, &json!(30)).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(a["result"]["content"][0]["text"], "hello\n", "{a}");
    // A message 100,000 levels deep is refused and the server serves on.
    for arrays in [false, true] {
        let (status, out) = http(port, "POST", &headers, &deep_line(60, 100_000, arrays));
        assert!((400..500).contains(&status), "{status}: {out}");
        serving("after the deep message");
    }
    // An initialize giving a key twice opens no session.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (status, out) = http(port, "POST", &[("Authorization", auth.as_str())], init);
    assert_eq!(status, 200, "{out}");
    assert!(
        !out.to_ascii_lowercase().contains("mcp-session-id"),
        "a session was opened: {out}"
    );
    let a = jsonrpc_answer(&out, &json!(1)).unwrap_or_else(|| panic!("{out}"));
    assert_refused("initialize", &a, -32602, &json!(1), "params.capabilities");
}
