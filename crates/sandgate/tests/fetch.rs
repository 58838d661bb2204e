//! The `fetch` op of the JSON tool endpoint against a local server on
//! 127.0.0.1 (the only address these tests ever reach).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use sandgate::policy::Policy;
use sandgate::ToolSession;
use serde_json::{json, Value};

/// A server answering each connection with `reply(path)`.
fn serve(reply: fn(&str, u16) -> Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let path = first.split(' ').nth(1).unwrap_or("/").to_owned();
            let _ = stream.write_all(&reply(&path, port));
        }
    });
    port
}

fn session(port: u16, extra: &str) -> (tempfile::TempDir, ToolSession) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(
        &path,
        format!("[net]\nallow = [\"127.0.0.1:{port}\"]\nallow_http = true\n{extra}"),
    )
    .unwrap();
    let policy = Policy::load(&path).unwrap();
    let session = ToolSession::from_policy(&policy).unwrap();
    (dir, session)
}

fn reply(path: &str, port: u16) -> Vec<u8> {
    match path {
        "/bin" => {
            let mut r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n".to_vec();
            r.extend_from_slice(&[0xff, 0x00]);
            r
        }
        "/go" => format!(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{port}/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .into_bytes(),
        _ => b"HTTP/1.1 200 OK\r\nX-A: 1\r\nX-A: 2\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
            .to_vec(),
    }
}

/// A proxy in the environment makes restricted mode refuse every fetch:
/// these tests then check that refusal and stop.
fn proxied(s: &ToolSession) -> bool {
    let Some(var) = sandgate::fetch::PROXY_VARIABLES
        .iter()
        .find(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
    else {
        return false;
    };
    let a = call(s, json!({"op": "fetch", "url": "https://127.0.0.1:1/"}));
    assert_eq!(a["error"]["code"], "E_NET_DENIED", "{var}: {a}");
    eprintln!("{var} is set: restricted mode refuses fetches; skipped");
    true
}

fn call(s: &ToolSession, req: Value) -> Value {
    s.handle_line(&req.to_string())
}

#[test]
fn fetch_answers_status_headers_body_and_hops() {
    let port = serve(reply);
    let (_dir, s) = session(port, "");
    if proxied(&s) {
        return;
    }
    let url = format!("http://127.0.0.1:{port}/");
    let a = call(&s, json!({"op": "fetch", "url": url, "max_bytes": 100}));
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(a["status"], 200);
    assert_eq!(a["body"], "hello");
    assert_eq!(a["truncated"], false);
    assert_eq!(a["headers"]["x-a"], "1, 2");
    assert_eq!(a["hops"][0]["addresses"], json!(["127.0.0.1"]));
    assert_eq!(a["hops"][0]["rule"], format!("127.0.0.1:{port}"));

    let a = call(&s, json!({"op": "fetch", "url": url, "max_bytes": 3}));
    assert_eq!(
        (a["body"].as_str(), a["truncated"].as_bool()),
        (Some("hel"), Some(true))
    );

    let a = call(&s, json!({"op": "fetch", "url": format!("{url}bin")}));
    assert_eq!(a["body_base64"], "/wA=", "{a}");
}

#[test]
fn fetch_refusals_name_the_rule_and_the_hops() {
    let port = serve(reply);
    let (_dir, s) = session(port, "");
    if proxied(&s) {
        return;
    }
    let a = call(
        &s,
        json!({"op": "fetch", "url": format!("http://127.0.0.1:{port}/go")}),
    );
    assert_eq!(a["ok"], false, "{a}");
    assert_eq!(a["error"]["code"], "E_NET_DENIED");
    let hops = a["error"]["hops"].as_array().unwrap();
    assert_eq!(hops.len(), 2);
    assert_eq!(hops[0]["status"], 302);
    assert_eq!(hops[1]["allowed"], false);
    assert!(hops[1]["reason"].as_str().unwrap().contains("loopback"));
}

#[test]
fn fetch_budget_and_a_session_without_fetcher() {
    let port = serve(reply);
    let (_dir, s) = session(port, "[budgets]\nnet_ops = 1\n");
    if proxied(&s) {
        return;
    }
    let url = format!("http://127.0.0.1:{port}/");
    assert_eq!(call(&s, json!({"op": "fetch", "url": url}))["ok"], true);
    let a = call(&s, json!({"op": "fetch", "url": url}));
    assert_eq!(a["error"]["code"], "E_DENIED", "{a}");

    let bare = ToolSession::new(sandgate::Sandbox::builder().build().unwrap(), json!({}));
    let a = call(&bare, json!({"op": "fetch", "url": url}));
    assert_eq!(a["error"]["code"], "E_DENIED", "{a}");
}
