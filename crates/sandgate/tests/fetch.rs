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

/// A fetcher's audit sink records every fetch, made or refused (the
/// budget spent, a URL that does not parse, credentials in the URL, a host
/// not granted before any name is resolved, a redirect hop refused, a
/// cancel, a request the endpoint could not read), by the origin of each
/// hop, and never a secret of the URL, a header or the body.
#[test]
fn the_fetchers_audit_sink_records_every_fetch_without_its_secrets() {
    use sandgate::fetch::{CancelFlag, FetchOptions};
    use sandgate::AuditEvent;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    fn answer(path: &str, _port: u16) -> Vec<u8> {
        if path.starts_with("/meta") {
            return b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/SECRET7?k=SECRET8\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec();
        }
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_vec()
    }
    let port = serve(answer);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(
        &path,
        format!("[net]\nallow = [\"127.0.0.1:{port}\"]\nallow_http = true\n"),
    )
    .unwrap();
    let policy = Policy::load(&path).unwrap();
    let resolved = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&resolved);
    let fetcher = sandgate::fetch::builder(&policy)
        .resolver(move |_: &str, _: u16, _: Duration| {
            counted.fetch_add(1, Ordering::SeqCst);
            Err(std::io::Error::other("no names here"))
        })
        .build();
    let events: Arc<Mutex<Vec<AuditEvent>>> = Arc::default();
    let log = Arc::clone(&events);
    fetcher.set_audit_sink(Some(Arc::new(move |e: &AuditEvent| {
        log.lock().unwrap().push(e.clone())
    })));
    let secret = FetchOptions::new().header("Authorization", "Bearer SECRET1");
    let here = format!("http://127.0.0.1:{port}");

    let made = fetcher.fetch(&format!("{here}/p/SECRET2?token=SECRET3"), &secret);
    if made.as_ref().is_err_and(|e| e.message().contains("proxy")) {
        eprintln!("a proxy is set: restricted mode refuses fetches; skipped");
        return;
    }
    assert_eq!(made.unwrap().body, b"hello");
    let _ = fetcher.fetch("not a url SECRET4", &secret);
    let _ = fetcher.fetch(&format!("http://me:SECRET5@127.0.0.1:{port}/"), &secret);
    let _ = fetcher.fetch("http://not-granted.invalid/x?token=SECRET6", &secret);
    let _ = fetcher.fetch(&format!("{here}/meta?token=SECRET9"), &secret);
    let cancel = CancelFlag::new();
    cancel.cancel();
    let _ = fetcher.fetch(
        &format!("{here}/?token=SECRET10"),
        &secret.clone().cancel(cancel),
    );
    let (_, err) = sandgate::tool::fetch_json(
        &fetcher,
        &json!({"url": format!("{here}/?token=SECRET11"), "headers": {"Authorization": 5}})
            .to_string(),
    );
    assert_eq!(err.unwrap().code(), sandgate::ErrorCode::Request);
    let (_, err) = sandgate::tool::fetch_json(&fetcher, "{\"url\": \"SECRET12");
    assert_eq!(err.unwrap().code(), sandgate::ErrorCode::Request);
    assert_eq!(resolved.load(Ordering::SeqCst), 0, "a name was resolved");

    let spent = sandgate::fetch::builder(&policy).net_ops(Some(0)).build();
    spent.set_audit_sink(fetcher_sink(&events));
    let _ = spent.fetch(&format!("{here}/?token=SECRET13"), &secret);

    let events = events.lock().unwrap().clone();
    let text = format!("{events:?}");
    assert!(
        !text.contains("SECRET"),
        "a secret reached the sink: {text}"
    );
    let got: Vec<(&str, &str, Option<u64>, &str)> = events
        .iter()
        .map(|e| (e.op, e.path.as_str(), e.size, e.outcome.as_str()))
        .collect();
    let meta = format!("{here} -> http://169.254.169.254:80");
    assert_eq!(
        got,
        [
            ("fetch", here.as_str(), Some(5), "OK"),
            ("fetch", "", None, "E_REQUEST"),
            ("fetch", "", None, "E_REQUEST"),
            (
                "fetch",
                "http://not-granted.invalid:80",
                None,
                "E_NET_DENIED"
            ),
            ("fetch", meta.as_str(), None, "E_NET_DENIED"),
            ("fetch", here.as_str(), None, "E_ABORTED"),
            ("fetch", here.as_str(), None, "E_REQUEST"),
            ("fetch", "", None, "E_REQUEST"),
            ("fetch", here.as_str(), None, "E_DENIED"),
        ],
        "{text}"
    );
}

fn fetcher_sink(
    events: &std::sync::Arc<std::sync::Mutex<Vec<sandgate::AuditEvent>>>,
) -> Option<sandgate::AuditSink> {
    let log = std::sync::Arc::clone(events);
    Some(std::sync::Arc::new(move |e: &sandgate::AuditEvent| {
        log.lock().unwrap().push(e.clone())
    }))
}

/// The sink is called with no lock held: it may call back into its
/// fetcher, removing itself included, and the fetch it reports on ends.
#[test]
fn a_fetchers_audit_sink_may_call_back_into_its_fetcher() {
    use std::sync::{Arc, Mutex, OnceLock};
    let port = serve(reply);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(
        &path,
        format!("[net]\nallow = [\"127.0.0.1:{port}\"]\nallow_http = true\n"),
    )
    .unwrap();
    let policy = Policy::load(&path).unwrap();
    let fetcher = Arc::new(sandgate::fetch::from_policy(&policy));
    let weak: Arc<OnceLock<std::sync::Weak<sandgate::fetch::Fetcher>>> = Arc::default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (w, log) = (Arc::clone(&weak), Arc::clone(&seen));
    let once = std::sync::atomic::AtomicBool::new(false);
    fetcher.set_audit_sink(Some(Arc::new(move |e: &sandgate::AuditEvent| {
        log.lock().unwrap().push(e.outcome.as_str());
        if once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Some(f) = w.get().and_then(std::sync::Weak::upgrade) {
            // A fetch of its own (refused: no URL), then the sink removed.
            let _ = f.fetch("", &sandgate::fetch::FetchOptions::new());
            f.set_audit_sink(None);
        }
    })));
    weak.set(Arc::downgrade(&fetcher)).unwrap();
    let _ = fetcher.fetch(&format!("http://127.0.0.1:{port}/"), &Default::default());
    let _ = fetcher.fetch(&format!("http://127.0.0.1:{port}/"), &Default::default());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1], "E_REQUEST", "{seen:?}");
}

#[test]
fn wire23_a_header_given_twice_is_refused_naming_it() {
    let port = serve(reply);
    let (_dir, s) = session(port, "");
    if proxied(&s) {
        return;
    }
    let url = format!("http://127.0.0.1:{port}/");
    // The same name twice (last-wins would send `2`), and the same header
    // in two spellings (HTTP names are one header whatever their case):
    // both refused before anything is sent, the id still echoed.
    for (headers, named) in [
        (r#"{"X-A": "1", "X-A": "2"}"#, "`headers.X-A`"),
        (r#"{"X-A": "1", "x-a": "2"}"#, "`x-a`"),
    ] {
        let line = format!(r#"{{"id": 7, "op": "fetch", "url": "{url}", "headers": {headers}}}"#);
        let a = s.handle_line(&line);
        assert_eq!(a["error"]["code"], "E_REQUEST", "{line}: {a}");
        assert_eq!(a["id"], 7, "{a}");
        let message = a["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{line}: {a}");
        // The host API's form reads the same request the same way.
        let (a, err) = sandgate::tool::fetch_json(
            &s_fetcher(port),
            &format!(r#"{{"url": "{url}", "headers": {headers}}}"#),
        );
        assert_eq!(a["error"]["code"], "E_REQUEST", "{a}");
        assert!(err.is_some());
    }
    // Distinct headers are sent.
    let line =
        format!(r#"{{"op": "fetch", "url": "{url}", "headers": {{"X-A": "1", "X-B": "2"}}}}"#);
    let a = s.handle_line(&line);
    assert_eq!(a["ok"], true, "{a}");
}

/// A fetcher for the local server on `port`.
fn s_fetcher(port: u16) -> sandgate::fetch::Fetcher {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(
        &path,
        format!("[net]\nallow = [\"127.0.0.1:{port}\"]\nallow_http = true\n"),
    )
    .unwrap();
    let policy = Policy::load(&path).unwrap();
    sandgate::fetch::builder(&policy).build()
}

/// A `fetch` request's key that is refused (a header whose value is not a
/// string, a header given in two letter cases, a key the op does not take)
/// is shown as names are, its controls escaped, and past 200 bytes by its
/// first 100 and `…`: before, a key holding a terminal's escape came back
/// raw in the message, and one of a megabyte came back whole.
#[test]
fn fetch27_a_refused_key_is_shown_escaped_and_cut() {
    let port = serve(reply);
    let (_dir, s) = session(port, "");
    let url = format!("http://127.0.0.1:{port}/");
    let long = "k".repeat(1_000_000);
    for (key, shown) in [
        ("x-\u{1b}[2j".to_owned(), "x-\\u{1b}[2j".to_owned()),
        (long.clone(), format!("{}…", "k".repeat(100))),
    ] {
        let upper = key.to_ascii_uppercase();
        for (req, says) in [
            (
                json!({"op": "fetch", "url": url, "headers": {key.clone(): 1}}),
                "must be a string",
            ),
            (
                json!({"op": "fetch", "url": url, "headers": {key.clone(): "1", upper.clone(): "2"}}),
                "twice",
            ),
            (
                json!({"op": "fetch", "url": url, key.clone(): 1}),
                "unknown key",
            ),
            (json!({"op": key.clone(), "url": url}), "unknown op"),
        ] {
            let a = call(&s, req);
            assert_eq!(a["error"]["code"], "E_REQUEST", "{}", &a.to_string()[..300]);
            let m = a["error"]["message"].as_str().unwrap();
            assert!(
                m.len() < 600,
                "a message of {} bytes: {}…",
                m.len(),
                &m[..300]
            );
            assert!(m.contains(says), "{m}");
            assert!(m.contains(&shown), "{shown} not in {m}");
            assert!(!m.contains('\u{1b}'), "{m:?}");
        }
    }
}
