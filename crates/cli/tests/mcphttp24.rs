//! `sandgate mcp --http` attacked by a local process: the bearer token
//! spelled every other way, `Host` and `Origin` forged, one session's
//! requests sent in another's name, and HTTP framing that two parsers
//! could read two ways. Each attack is refused with a clear status, runs
//! no tool (a `write_file` call whose file must not appear), and leaves
//! the server serving the next client.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

mod http_support;
use http_support::{http, http_session, policy_dir, rest_of, start_http};

/// The head and the body of a raw answer.
fn split(out: &str) -> (&str, &str) {
    out.split_once("\r\n\r\n").unwrap_or((out, ""))
}

/// The status of a raw answer (0 when there is none).
fn status_of(out: &str) -> u16 {
    out.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The value of header `name` in a raw answer's head.
fn header<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    split(out).0.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A `tools/call` of `write_file`, making `path` hold `content`.
fn write_call(id: u64, path: &Path, content: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "write_file",
        "arguments": {"path": path.display().to_string(), "content": content}}})
    .to_string()
}

/// A `tools/call` of `read_text_file` of `path`.
fn read_call(id: u64, path: &Path) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "read_text_file", "arguments": {"path": path.display().to_string()}}})
    .to_string()
}

/// Sends `bytes` on a new connection: all that comes back.
fn raw(port: u16, bytes: &[u8]) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer and close before all is sent.
    let _ = c.write_all(bytes);
    rest_of(&mut c)
}

/// A POST of `body` with these head lines besides the media types, its
/// length and `Connection: close`.
fn post(lines: &[String], body: &str) -> Vec<u8> {
    let mut req = String::from("POST / HTTP/1.1\r\n");
    for l in lines {
        req.push_str(l);
        req.push_str("\r\n");
    }
    req.push_str(&format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    req.into_bytes()
}

/// What the server says when it is still serving: a `ping` in session
/// `id` is answered 200.
fn assert_serving(port: u16, auth: &str, id: &str) {
    let ping = json!({"jsonrpc": "2.0", "id": 99, "method": "ping"}).to_string();
    let (status, out) = http(
        port,
        "POST",
        &[("Authorization", auth), ("Mcp-Session-Id", id)],
        &ping,
    );
    assert_eq!(status, 200, "the server no longer serves: {out}");
}

/// The bearer token in every spelling but the one it was given is 401
/// with `WWW-Authenticate: Bearer`, and the `write_file` it carries does
/// not run: the token uppercased, one character short (the right prefix),
/// one too many, its last character changed, after a tab or a colon, in
/// another scheme, in the query string (`?access_token=`, as RFC 6750
/// allows a server to take it, and this one does not), in a cookie, and
/// beside a wrong one in a second `Authorization` header, in either order
/// (before, the right token first was served: only the first header was
/// read). The token as given still writes the file.
#[test]
fn mcphttp24_the_token_in_any_other_spelling_is_401_and_runs_nothing() {
    let dir = policy_dir();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let id = http_session(port, &auth);
    let host = format!("Host: 127.0.0.1:{port}");
    let sid = format!("Mcp-Session-Id: {id}");
    let mut last = token.clone();
    let flipped = if last.pop() == Some('0') { '1' } else { '0' };
    last.push(flipped);
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        (
            "uppercased",
            vec![format!("Authorization: Bearer {}", token.to_uppercase())],
            "/",
        ),
        (
            "one short",
            vec![format!(
                "Authorization: Bearer {}",
                &token[..token.len() - 1]
            )],
            "/",
        ),
        (
            "one too many",
            vec![format!("Authorization: Bearer {token}0")],
            "/",
        ),
        (
            "the last character changed",
            vec![format!("Authorization: Bearer {last}")],
            "/",
        ),
        (
            "after a tab",
            vec![format!("Authorization: Bearer\t{token}")],
            "/",
        ),
        (
            "after a colon",
            vec![format!("Authorization: Bearer:{token}")],
            "/",
        ),
        (
            "in another scheme",
            vec![format!("Authorization: Token {token}")],
            "/",
        ),
        ("in the query", vec![], "QUERY"),
        ("in a cookie", vec![format!("Cookie: token={token}")], "/"),
        (
            "right, then wrong",
            vec![
                format!("Authorization: {auth}"),
                "Authorization: Bearer nope".into(),
            ],
            "/",
        ),
        (
            "wrong, then right",
            vec![
                "Authorization: Bearer nope".into(),
                format!("Authorization: {auth}"),
            ],
            "/",
        ),
        (
            "twice",
            vec![
                format!("Authorization: {auth}"),
                format!("Authorization: {auth}"),
            ],
            "/",
        ),
    ];
    for (n, (what, extra, target)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("ws/t{n}.txt"));
        let mut lines = vec![host.clone(), sid.clone()];
        lines.extend(extra.iter().cloned());
        let mut req = post(&lines, &write_call(10 + n as u64, &file, "x"));
        if *target == "QUERY" {
            let q = format!("POST /?access_token={token}&token={token} HTTP/1.1");
            req = [q.as_bytes(), &req["POST / HTTP/1.1".len()..]].concat();
        }
        let out = raw(port, &req);
        assert_eq!(status_of(&out), 401, "the token {what}: {out}");
        assert_eq!(
            header(&out, "www-authenticate"),
            Some("Bearer"),
            "the token {what}: {out}"
        );
        assert!(!file.exists(), "the token {what} ran write_file");
    }
    // The token as given writes.
    let file = dir.path().join("ws/ok.txt");
    let out = raw(
        port,
        &post(
            &[host, sid, format!("Authorization: {auth}")],
            &write_call(9, &file, "ok"),
        ),
    );
    assert_eq!(status_of(&out), 200, "{out}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "ok", "{out}");
}

/// With the right token, a forged `Host` or `Origin` is refused and its
/// `write_file` does not run: another name (DNS rebinding), `[::1]` for a
/// server on 127.0.0.1, no port, a trailing dot, `Origin: null`; and what
/// the SDK read as this server's own address though it is not a host and
/// port or an origin: a user before the address (`Host:
/// evil.example@127.0.0.1:PORT`, and the same in `Origin`), an `Origin`
/// with a path or a query, a request target in absolute form naming
/// another host than `Host` (before, each of these was served), and
/// HTTP/1.0 without `Host`.
#[test]
fn mcphttp24_a_forged_host_or_origin_runs_no_tool() {
    let dir = policy_dir();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let id = http_session(port, &auth);
    let p = port;
    let ours = format!("Host: 127.0.0.1:{p}");
    // (what, request line, head lines, expected status)
    let line = "POST / HTTP/1.1".to_owned();
    let cases: Vec<(&str, String, Vec<String>, u16)> = vec![
        (
            "another name",
            line.clone(),
            vec![format!("Host: evil.example:{p}")],
            403,
        ),
        ("[::1]", line.clone(), vec![format!("Host: [::1]:{p}")], 403),
        ("no port", line.clone(), vec!["Host: 127.0.0.1".into()], 403),
        (
            "a trailing dot",
            line.clone(),
            vec![format!("Host: localhost.:{p}")],
            403,
        ),
        (
            "a user in Host",
            line.clone(),
            vec![format!("Host: evil.example@127.0.0.1:{p}")],
            400,
        ),
        (
            "Origin: null",
            line.clone(),
            vec![ours.clone(), "Origin: null".into()],
            403,
        ),
        (
            "an Origin with a path",
            line.clone(),
            vec![ours.clone(), format!("Origin: http://127.0.0.1:{p}/evil")],
            403,
        ),
        (
            "an Origin with a query",
            line.clone(),
            vec![ours.clone(), format!("Origin: http://127.0.0.1:{p}?evil")],
            403,
        ),
        (
            "a user in Origin",
            line.clone(),
            vec![
                ours.clone(),
                format!("Origin: http://evil.example@127.0.0.1:{p}"),
            ],
            403,
        ),
        (
            "an absolute target naming another host",
            format!("POST http://evil.example:{p}/ HTTP/1.1"),
            vec![ours.clone()],
            400,
        ),
        (
            "HTTP/1.0 without Host",
            "POST / HTTP/1.0".into(),
            vec![],
            400,
        ),
    ];
    for (n, (what, first, extra, want)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("ws/h{n}.txt"));
        let mut lines = vec![
            format!("Authorization: {auth}"),
            format!("Mcp-Session-Id: {id}"),
        ];
        lines.extend(extra.iter().cloned());
        let req = post(&lines, &write_call(10 + n as u64, &file, "x"));
        let req = [first.as_bytes(), &req["POST / HTTP/1.1".len()..]].concat();
        let out = raw(port, &req);
        assert_eq!(status_of(&out), *want, "{what}: {out}");
        assert!(!file.exists(), "{what} ran write_file: {out}");
        if *want == 400 && what.contains("user") {
            assert!(
                split(&out).1.contains("Host"),
                "{what}: the refusal does not name the header: {out}"
            );
        }
    }
    // Each of the good forms still writes: the absolute target naming
    // this server, `localhost` with its origin.
    for (n, (first, host, origin)) in [
        (
            format!("POST http://127.0.0.1:{p}/ HTTP/1.1"),
            ours.clone(),
            None,
        ),
        (
            line.clone(),
            format!("Host: LOCALHOST:{p}"),
            Some(format!("Origin: http://localhost:{p}")),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let file = dir.path().join(format!("ws/good{n}.txt"));
        let mut lines = vec![
            host,
            format!("Authorization: {auth}"),
            format!("Mcp-Session-Id: {id}"),
        ];
        lines.extend(origin);
        let req = post(&lines, &write_call(50 + n as u64, &file, "ok"));
        let req = [first.as_bytes(), &req["POST / HTTP/1.1".len()..]].concat();
        let out = raw(port, &req);
        assert_eq!(status_of(&out), 200, "{first}: {out}");
        assert!(file.exists(), "{first}: {out}");
    }
    assert_serving(port, &auth, &id);
}

/// Of `DELETE`s of one session sent at once, exactly one is answered 2xx
/// and the others 404 naming the session (before, all were answered 202:
/// each found the session held before the first had ended it). Each of
/// eight `DELETE`s sends its head, stating a body of one byte, and only
/// once all eight heads are in sends that byte, so that all are judged
/// while the session is still held; three sessions so, and the server
/// then serves on.
#[test]
fn mcphttp24_of_deletes_at_once_exactly_one_ends_the_session() {
    let dir = policy_dir();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    for round in 0..3 {
        let id = http_session(port, &auth);
        let head = format!(
            "DELETE / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {auth}\r\n\
             Mcp-Session-Id: {id}\r\nContent-Length: 1\r\nConnection: close\r\n\r\n"
        );
        let mut conns: Vec<TcpStream> = (0..8)
            .map(|_| {
                let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                c.write_all(head.as_bytes()).unwrap();
                c
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        for c in &mut conns {
            // One refused already may have closed its connection.
            let _ = c.write_all(b"x");
        }
        let answers: Vec<String> = conns.iter_mut().map(rest_of).collect();
        let ended = answers
            .iter()
            .filter(|a| (200..300).contains(&status_of(a)))
            .count();
        assert_eq!(ended, 1, "round {round}: {answers:#?}");
        for a in answers
            .iter()
            .filter(|a| !(200..300).contains(&status_of(a)))
        {
            assert_eq!(status_of(a), 404, "round {round}: {a}");
            assert!(split(a).1.contains(&id), "round {round}: {a}");
        }
    }
    let id = http_session(port, &auth);
    assert_serving(port, &auth, &id);
}

/// Reads what `c` sends within `secs` (it may stay open): as text.
fn read_for(c: &mut TcpStream, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One session's answers reach it alone: with session A's stream open
/// (`GET`, twice), B's call reading a file answers on B's request only,
/// nothing of it on A's streams; a `GET` of B with the `Last-Event-ID`
/// of A's answer replays nothing of A's; a call naming an id no session
/// has is 404. (The session id, 128 random bits, is what tells sessions
/// apart: a client holding the token and another's id is that session.)
#[test]
fn mcphttp24_one_sessions_answers_never_reach_another() {
    let dir = policy_dir();
    fs::write(dir.path().join("ws/a.txt"), "secret-of-a\n").unwrap();
    fs::write(dir.path().join("ws/b.txt"), "secret-of-b\n").unwrap();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let a = http_session(port, &auth);
    let b = http_session(port, &auth);
    assert_ne!(a, b);
    let get = |id: &str, last: Option<&str>| {
        let mut req = format!(
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {auth}\r\n\
             Accept: text/event-stream\r\nMcp-Session-Id: {id}\r\n"
        );
        if let Some(l) = last {
            req.push_str(&format!("Last-Event-ID: {l}\r\n"));
        }
        req.push_str("\r\n");
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        c
    };
    // A's call, its answer's event id kept.
    let (status, out_a) = http(
        port,
        "POST",
        &[("Authorization", &auth), ("Mcp-Session-Id", &a)],
        &read_call(5, &dir.path().join("ws/a.txt")),
    );
    assert_eq!(status, 200, "{out_a}");
    assert!(out_a.contains("secret-of-a"), "{out_a}");
    let event = split(&out_a)
        .1
        .lines()
        .find_map(|l| l.strip_prefix("id:").map(|v| v.trim().to_owned()));
    let mut stream1 = get(&a, None);
    let mut stream2 = get(&a, None);
    let (status, out_b) = http(
        port,
        "POST",
        &[("Authorization", &auth), ("Mcp-Session-Id", &b)],
        &read_call(5, &dir.path().join("ws/b.txt")),
    );
    assert_eq!(status, 200, "{out_b}");
    assert!(out_b.contains("secret-of-b"), "{out_b}");
    assert!(!out_b.contains("secret-of-a"), "{out_b}");
    let seen1 = read_for(&mut stream1, 2);
    let seen2 = read_for(&mut stream2, 1);
    for seen in [&seen1, &seen2] {
        assert!(status_of(seen) == 200, "A's stream: {seen}");
        assert!(
            !seen.contains("secret-of-b"),
            "B's answer on A's stream: {seen}"
        );
        assert!(
            !seen.contains("\"id\":5"),
            "a call's answer on A's stream: {seen}"
        );
    }
    if let Some(event) = event {
        let mut resumed = get(&b, Some(&event));
        let seen = read_for(&mut resumed, 2);
        assert!(
            !seen.contains("secret-of-a"),
            "A's answer replayed to B: {seen}"
        );
    }
    let (status, out) = http(
        port,
        "POST",
        &[
            ("Authorization", &auth),
            ("Mcp-Session-Id", "00000000-0000-4000-8000-000000000000"),
        ],
        &read_call(6, &dir.path().join("ws/a.txt")),
    );
    assert_eq!(status, 404, "{out}");
    assert!(!out.contains("secret-of-a"), "{out}");
    assert_serving(port, &auth, &a);
    assert_serving(port, &auth, &b);
}

/// HTTP framing that two parsers could read two ways is refused or read
/// one safe way, runs no tool that a request without the token carries,
/// and leaves the server serving:
/// - `Content-Length` and `Transfer-Encoding: chunked` both: read as
///   chunked and the connection closed after the answer, so bytes after
///   the chunked body (a request without the token) are never read as a
///   request;
/// - two different `Content-Length`s: 400;
/// - a chunk size past what 64 bits hold: 400 (a chunked body past 4 MiB
///   is 413: `http_a_body_over_the_cap_is_answered_413`);
/// - a body longer than its `Content-Length`: the rest is read as the
///   next request, which without the token is 401 and runs nothing;
/// - pipelined requests with the token: each answered, in order; one
///   without the token behind them: 401, nothing run;
/// - a NUL in the request line, a line feed inside the target: 400;
/// - `Expect: 100-continue` without the token: 401 at once, no `100
///   Continue`, the body never asked for; with it: `100 Continue`, then
///   the answer.
#[test]
fn mcphttp24_framing_tricks_are_refused_and_run_nothing() {
    let dir = policy_dir();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let id = http_session(port, &auth);
    let host = format!("Host: 127.0.0.1:{port}");
    let auth_l = format!("Authorization: {auth}");
    let sid = format!("Mcp-Session-Id: {id}");
    let media = "Content-Type: application/json\r\nAccept: application/json, text/event-stream";
    let ws = dir.path().join("ws");
    let smuggled = |name: &str| {
        let file = ws.join(name);
        let body = write_call(77, &file, "x");
        let req = format!(
            "POST / HTTP/1.1\r\n{host}\r\n{sid}\r\n{media}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        (file, req)
    };

    // Content-Length and Transfer-Encoding both.
    let (file, next) = smuggled("cl-te.txt");
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string();
    let chunked = format!("{:x}\r\n{ping}\r\n0\r\n\r\n", ping.len());
    for order in [
        format!(
            "Content-Length: {}\r\nTransfer-Encoding: chunked",
            chunked.len() + next.len()
        ),
        format!(
            "Transfer-Encoding: chunked\r\nContent-Length: {}",
            chunked.len() + next.len()
        ),
    ] {
        let req = format!(
            "POST / HTTP/1.1\r\n{host}\r\n{auth_l}\r\n{sid}\r\n{media}\r\n{order}\r\n\r\n{chunked}{next}"
        );
        let out = raw(port, req.as_bytes());
        assert_eq!(status_of(&out), 200, "{order}: {out}");
        assert_eq!(out.matches("HTTP/1.1 ").count(), 1, "{order}: {out}");
        assert!(
            !file.exists(),
            "{order}: the bytes after the chunked body ran"
        );
    }

    // Two different Content-Lengths.
    let file = ws.join("two-cl.txt");
    let body = write_call(4, &file, "x");
    let req = format!(
        "POST / HTTP/1.1\r\n{host}\r\n{auth_l}\r\n{sid}\r\n{media}\r\nContent-Length: {}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len(),
        body.len() - 1
    );
    let out = raw(port, req.as_bytes());
    assert_eq!(status_of(&out), 400, "two Content-Lengths: {out}");
    assert!(!file.exists(), "two Content-Lengths ran write_file");

    // A chunk size past 64 bits.
    let req = format!(
        "POST / HTTP/1.1\r\n{host}\r\n{auth_l}\r\n{sid}\r\n{media}\r\n\
         Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n{{}}\r\n0\r\n\r\n"
    );
    let out = raw(port, req.as_bytes());
    assert_eq!(status_of(&out), 400, "a chunk size past 64 bits: {out}");

    // A body longer than its length: the rest is a request of its own.
    let (file, next) = smuggled("longer.txt");
    let req = format!(
        "POST / HTTP/1.1\r\n{host}\r\n{auth_l}\r\n{sid}\r\n{media}\r\nContent-Length: {}\r\n\r\n{ping}{next}",
        ping.len()
    );
    let out = raw(port, req.as_bytes());
    assert_eq!(status_of(&out), 200, "{out}");
    assert!(
        out.contains("HTTP/1.1 401"),
        "the rest was not refused: {out}"
    );
    assert!(!file.exists(), "the bytes past the length ran write_file");

    // Pipelined: two with the token answered in order, one without: 401.
    let (file, next) = smuggled("pipelined.txt");
    let one = |n: u64| {
        let ping = json!({"jsonrpc": "2.0", "id": n, "method": "ping"}).to_string();
        format!(
            "POST / HTTP/1.1\r\n{host}\r\n{auth_l}\r\n{sid}\r\n{media}\r\nContent-Length: {}\r\n\r\n{ping}",
            ping.len()
        )
    };
    let out = raw(port, format!("{}{}{next}", one(41), one(42)).as_bytes());
    let (i41, i42) = (out.find("\"id\":41"), out.find("\"id\":42"));
    assert!(
        i41.is_some() && i42.is_some() && i41 < i42,
        "pipelined answers: {out}"
    );
    assert_eq!(out.matches("HTTP/1.1 200").count(), 2, "{out}");
    assert!(out.contains("HTTP/1.1 401"), "{out}");
    assert!(!file.exists(), "a pipelined request without the token ran");

    // A NUL in the request line, a line feed inside the target.
    let file = ws.join("nul.txt");
    for first in ["POST /\0 HTTP/1.1", "POST /\nx HTTP/1.1"] {
        let body = write_call(5, &file, "x");
        let req = format!(
            "{first}\r\n{host}\r\n{auth_l}\r\n{sid}\r\n{media}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let out = raw(port, req.as_bytes());
        assert_eq!(status_of(&out), 400, "{first:?}: {out}");
        assert!(!file.exists(), "{first:?} ran write_file");
    }

    // Expect: 100-continue, without and with the token.
    let file = ws.join("expect.txt");
    let body = write_call(6, &file, "x");
    let head = |auth: &str| {
        format!(
            "POST / HTTP/1.1\r\n{host}\r\n{auth}{sid}\r\n{media}\r\nContent-Length: {}\r\n\
             Expect: 100-continue\r\nConnection: close\r\n\r\n",
            body.len()
        )
    };
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(head("").as_bytes()).unwrap();
    let out = read_for(&mut c, 2);
    assert_eq!(status_of(&out), 401, "{out}");
    assert!(!out.contains("100 Continue"), "{out}");
    let _ = c.write_all(body.as_bytes());
    assert!(!file.exists(), "a body sent after the 401 ran write_file");
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(head(&format!("{auth_l}\r\n")).as_bytes())
        .unwrap();
    let first = read_for(&mut c, 1);
    assert!(first.starts_with("HTTP/1.1 100"), "{first}");
    c.write_all(body.as_bytes()).unwrap();
    let out = read_for(&mut c, 3);
    assert_eq!(status_of(&out), 200, "{out}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "x");

    assert_serving(port, &auth, &id);
}
