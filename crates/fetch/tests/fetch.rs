//! The confined fetch against real local servers, on loopback only.
//!
//! Every server here listens on 127.0.0.0/8 (or `[::1]`); names are
//! answered by injected resolvers, and every address outside loopback that
//! appears below is one the fetcher must refuse before dialling.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use sandgate_fetch::{ErrorCode, FetchError, FetchOptions, FetchResponse, Fetcher};
use sandgate_netguard::Mode;

mod support;
use support::{full_listener, get, http_rules, local_public_v4, rules};

// ---------------------------------------------------------------------------
// Local servers

enum Reply {
    Raw(Vec<u8>),
    /// A 200 whose body never ends.
    Endless,
    /// Never answers.
    Silent,
    /// Headers and a part of the body, then nothing.
    Stall,
}

fn ok(body: &str) -> Reply {
    Reply::Raw(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

fn redirect(status: u16, location: &str) -> Reply {
    Reply::Raw(
        format!(
            "HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .into_bytes(),
    )
}

type Handler = dyn Fn(&str) -> Reply + Send + Sync;

struct Server {
    port: u16,
    /// Connections accepted.
    hits: Arc<AtomicUsize>,
    /// Request heads (and bodies) received, in order.
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(ip: &str, handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Server {
    serve_on(
        TcpListener::bind((ip, 0)).expect("bind a loopback port"),
        handler,
    )
}

fn serve_on(
    listener: TcpListener,
    handler: impl Fn(&str) -> Reply + Send + Sync + 'static,
) -> Server {
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let handler: Arc<Handler> = Arc::new(handler);
    let (h, r) = (hits.clone(), requests.clone());
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            h.fetch_add(1, Ordering::SeqCst);
            let (handler, r) = (handler.clone(), r.clone());
            thread::spawn(move || {
                let _ = answer(stream, &*handler, &r);
            });
        }
    });
    Server {
        port,
        hits,
        requests,
    }
}

fn read_request(stream: &mut impl Read) -> io::Result<String> {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    head.push_str(&String::from_utf8_lossy(&body));
    Ok(head)
}

fn answer(mut stream: TcpStream, handler: &Handler, log: &Mutex<Vec<String>>) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let request = read_request(&mut stream)?;
    let reply = handler(&request);
    log.lock().unwrap().push(request);
    write_reply(&mut stream, reply)
}

fn write_reply(stream: &mut impl Write, reply: Reply) -> io::Result<()> {
    match reply {
        Reply::Raw(bytes) => stream.write_all(&bytes),
        Reply::Endless => {
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n")?;
            let chunk = vec![b'x'; 64 * 1024];
            let stop = Instant::now() + Duration::from_secs(20);
            while Instant::now() < stop {
                stream.write_all(&chunk)?;
            }
            Ok(())
        }
        Reply::Silent => {
            thread::sleep(Duration::from_secs(10));
            Ok(())
        }
        Reply::Stall => {
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")?;
            stream.flush()?;
            thread::sleep(Duration::from_secs(10));
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------
// Rules and fetchers

/// A resolver that must not be asked.
fn no_dns(host: &str, _: u16, _: Duration) -> io::Result<Vec<IpAddr>> {
    panic!("the resolver was asked for {host}")
}

/// A resolver answering `ips` for every name, counting its calls.
fn fixed(ips: &[&str], calls: Arc<AtomicUsize>) -> impl sandgate_fetch::Resolve {
    let ips: Vec<IpAddr> = ips.iter().map(|s| s.parse().unwrap()).collect();
    move |_: &str, _: u16, _: Duration| {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(ips.clone())
    }
}

fn denied(r: Result<FetchResponse, FetchError>) -> FetchError {
    match r {
        Ok(r) => panic!("expected a refusal, got status {}", r.status),
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::NetDenied, "{e}");
            e
        }
    }
}

// ---------------------------------------------------------------------------
// Grants

#[test]
fn granted_port_works() {
    let s = serve("127.0.0.1", |_| ok("hello"));
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)]))
        .resolver(no_dns)
        .build();
    let r = get(&f, &format!("http://127.0.0.1:{}/path?q=1", s.port)).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello");
    assert!(!r.truncated);
    assert!(r
        .headers
        .iter()
        .any(|(k, v)| k == "content-type" && v == "text/plain"));
    assert_eq!(r.hops.len(), 1);
    assert_eq!(
        r.hops[0].addresses,
        vec!["127.0.0.1".parse::<IpAddr>().unwrap()]
    );
    assert_eq!(r.hops[0].status, Some(200));
    assert_eq!(
        r.hops[0].rule.as_deref(),
        Some(format!("127.0.0.1:{}", s.port).as_str())
    );
    assert!(s.requests()[0].starts_with("GET /path?q=1 HTTP/1.1\r\n"));
}

#[test]
fn method_headers_and_body_are_sent() {
    let s = serve("127.0.0.1", |_| ok("done"));
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
    let opts = FetchOptions::new()
        .method("PUT")
        .header("X-Token", "abc")
        .body("payload");
    let r = f
        .fetch(&format!("http://127.0.0.1:{}/u", s.port), &opts)
        .unwrap();
    assert_eq!(r.status, 200);
    let req = &s.requests()[0];
    assert!(req.starts_with("PUT /u HTTP/1.1\r\n"), "{req}");
    assert!(req.to_ascii_lowercase().contains("x-token: abc"), "{req}");
    assert!(req.ends_with("payload"), "{req}");
}

#[test]
fn ipv6_loopback_literal_works_when_granted() {
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        eprintln!("no IPv6 loopback here; skipped");
        return;
    };
    let s = serve_on(listener, |_| ok("six"));
    let f = Fetcher::builder(http_rules(&[format!("[::1]:{}", s.port)])).build();
    let r = get(&f, &format!("http://[::1]:{}/", s.port)).unwrap();
    assert_eq!(r.body, b"six");
}

#[test]
fn ungranted_port_is_refused_before_connecting() {
    let granted = serve("127.0.0.1", |_| ok("a"));
    let other = serve("127.0.0.1", |_| ok("b"));
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", granted.port)])).build();
    let e = denied(get(&f, &format!("http://127.0.0.1:{}/", other.port)));
    assert!(e.message().contains("not in net.allow"), "{e}");
    assert_eq!(e.hops().len(), 1);
    assert!(!e.hops()[0].allowed);
    assert_eq!(other.hits(), 0);
}

#[test]
fn localhost_is_not_granted_by_the_literal() {
    let s = serve("127.0.0.1", |_| ok("a"));
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)]))
        .resolver(no_dns)
        .build();
    let e = denied(get(&f, &format!("http://localhost:{}/", s.port)));
    assert!(e.message().contains("not in net.allow"), "{e}");
    assert_eq!(s.hits(), 0);
}

#[test]
fn https_only_unless_allow_http() {
    let s = serve("127.0.0.1", |_| ok("a"));
    let p = rules(Mode::Restricted, &[format!("127.0.0.1:{}", s.port)], false);
    let f = Fetcher::builder(p.clone()).build();
    let e = denied(get(&f, &format!("http://127.0.0.1:{}/", s.port)));
    assert!(e.message().contains("allow_http"), "{e}");
    assert_eq!(s.hits(), 0);
}

// ---------------------------------------------------------------------------
// Redirects

/// A granted server that redirects `/go` to `location` and answers
/// everything else.
fn redirector(location: String) -> Server {
    serve("127.0.0.1", move |req| {
        if req.starts_with("GET /go ") {
            redirect(302, &location)
        } else {
            ok("landed")
        }
    })
}

fn assert_refused_at_second_hop(e: &FetchError, url: &str) {
    let hops = e.hops();
    assert_eq!(hops.len(), 2, "{hops:?}");
    assert!(hops[0].allowed);
    assert!(
        matches!(hops[0].status, Some(301 | 302 | 307 | 308)),
        "{hops:?}"
    );
    assert!(!hops[1].allowed);
    assert_eq!(hops[1].url, url);
    assert_eq!(hops[1].status, None);
    assert!(hops[1].addresses.is_empty());
}

#[test]
fn redirect_to_an_ungranted_port_is_refused_at_the_hop() {
    let calls = Arc::new(AtomicUsize::new(0));
    let s = redirector("http://api.example.com:8080/x".into());
    let p = http_rules(&[format!("127.0.0.1:{}", s.port), "api.example.com:80".into()]);
    let f = Fetcher::builder(p.clone())
        .resolver(fixed(&["10.0.0.1"], calls.clone()))
        .build();
    let e = denied(get(&f, &format!("http://127.0.0.1:{}/go", s.port)));
    assert!(e.message().contains("port 8080 is not in net.allow"), "{e}");
    assert_refused_at_second_hop(&e, "http://api.example.com:8080/x");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "refused before resolving");
}

#[test]
fn redirect_to_loopback_is_refused_even_to_the_granted_port() {
    for location in [
        "/landing",
        "http://127.0.0.1:{port}/landing",
        "//localhost:{port}/",
    ] {
        let holder = Arc::new(Mutex::new(String::new()));
        let h = holder.clone();
        let s = serve("127.0.0.1", move |req| {
            if req.starts_with("GET /go ") {
                redirect(307, &h.lock().unwrap())
            } else {
                ok("landed")
            }
        });
        *holder.lock().unwrap() = location.replace("{port}", &s.port.to_string());
        let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)]))
            .resolver(no_dns)
            .build();
        let e = denied(get(&f, &format!("http://127.0.0.1:{}/go", s.port)));
        assert_eq!(e.hops().len(), 2, "{location}: {e}");
        assert!(
            e.message().contains("loopback"),
            "{location}: {}",
            e.message()
        );
        assert_eq!(
            s.requests().len(),
            1,
            "{location}: only the first hop was sent"
        );
    }
}

#[test]
fn redirect_to_the_metadata_service_is_refused() {
    let s = redirector("http://169.254.169.254/latest/meta-data/".into());
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)]))
        .resolver(no_dns)
        .build();
    let e = denied(get(&f, &format!("http://127.0.0.1:{}/go", s.port)));
    assert_refused_at_second_hop(&e, "http://169.254.169.254/latest/meta-data/");

    // A granted name that resolves there is refused by the address class.
    let calls = Arc::new(AtomicUsize::new(0));
    let s = redirector("http://meta.example.com/".into());
    let p = http_rules(&[format!("127.0.0.1:{}", s.port), "meta.example.com".into()]);
    let f = Fetcher::builder(p.clone())
        .resolver(fixed(&["169.254.169.254"], calls.clone()))
        .build();
    let e = denied(get(&f, &format!("http://127.0.0.1:{}/go", s.port)));
    assert!(e.message().contains("link-local"), "{e}");
    assert_eq!(e.rule(), Some("meta.example.com"));
    assert_refused_at_second_hop(&e, "http://meta.example.com/");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn redirect_reports_every_hop_when_it_succeeds_and_caps_the_count() {
    // A chain that keeps redirecting to loopback is refused at hop 2; the
    // count cap itself is checked with max_redirects(0).
    let s = redirector("http://api.example.com/".into());
    let p = http_rules(&[format!("127.0.0.1:{}", s.port), "api.example.com".into()]);
    let f = Fetcher::builder(p.clone())
        .resolver(no_dns)
        .max_redirects(0)
        .build();
    let e = get(&f, &format!("http://127.0.0.1:{}/go", s.port)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e}");
    assert!(e.message().contains("redirects"), "{e}");
    assert_eq!(e.hops().len(), 1);
}

/// A redirect to another granted host carries none of the caller's
/// headers that could hold a credential: not only `Authorization` and
/// `Cookie` but custom ones (`X-Api-Key`, `PRIVATE-TOKEN`, anything the
/// client does not know the meaning of). What describes the request
/// (`Accept`, `User-Agent`) still goes. The second host is a real server
/// on this machine's own non-loopback address, since a redirect to
/// loopback is always refused.
#[test]
fn a_redirect_to_another_host_carries_no_credential_header() {
    let Some(ip) = local_public_v4() else {
        eprintln!(
            "skipped: this machine has no address outside loopback that restricted mode admits"
        );
        return;
    };
    let b = serve(&ip.to_string(), |_| ok("landed on b"));
    let a = redirector(format!("http://b.example:{}/landed", b.port));
    let calls = Arc::new(AtomicUsize::new(0));
    let p = http_rules(&[
        format!("127.0.0.1:{}", a.port),
        format!("b.example:{}", b.port),
    ]);
    let f = Fetcher::builder(p)
        .resolver(fixed(&[&ip.to_string()], calls.clone()))
        .build();
    let opts = FetchOptions::new()
        .timeout(Duration::from_secs(10))
        .header("X-Api-Key", "key-bound-to-a-0001")
        .header("PRIVATE-TOKEN", "token-bound-to-a-0002")
        .header("X-Custom-Auth", "custom-bound-to-a-0003")
        .header("Authorization", "Bearer bound-to-a-0004")
        .header("Accept", "application/json")
        .header("User-Agent", "agent/1");
    let r = f
        .fetch(&format!("http://127.0.0.1:{}/go", a.port), &opts)
        .unwrap();
    assert_eq!(r.body, b"landed on b");
    assert_eq!(r.hops.len(), 2);
    let sent_a = a.requests().join("\n");
    assert!(sent_a.contains("key-bound-to-a-0001"), "{sent_a}");
    let sent_b = b.requests().join("\n");
    for secret in [
        "bound-to-a-0001",
        "bound-to-a-0002",
        "bound-to-a-0003",
        "bound-to-a-0004",
    ] {
        assert!(
            !sent_b.contains(secret),
            "a header bound to 127.0.0.1:{} followed the redirect to b.example: {sent_b}",
            a.port
        );
    }
    let lower = sent_b.to_ascii_lowercase();
    assert!(lower.contains("accept: application/json"), "{sent_b}");
    assert!(lower.contains("user-agent: agent/1"), "{sent_b}");
}

/// A `Location` is resolved as RFC 3986 resolves a reference, dot
/// segments removed: `../up` from `/a/b/go` is `/a/up`, never the
/// `/a/b/../up` a browser, curl or any other client would not ask for. The
/// hop is reported (and refused, being loopback) as the URL the fetch
/// would have asked for.
#[test]
fn a_relative_location_with_dot_segments_is_resolved_as_rfc_3986_says() {
    for (location, landed) in [
        ("../up", "/a/up"),
        ("./here", "/a/b/here"),
        ("../../../../top?q=1", "/top?q=1"),
        ("/x/./y/../z", "/x/z"),
        ("..", "/a/"),
        ("http://127.0.0.1:{port}/p/q/../r/.", "/p/r/"),
    ] {
        let holder = Arc::new(Mutex::new(String::new()));
        let h = holder.clone();
        let s = serve("127.0.0.1", move |_| redirect(302, &h.lock().unwrap()));
        *holder.lock().unwrap() = location.replace("{port}", &s.port.to_string());
        let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)]))
            .resolver(no_dns)
            .build();
        let e = denied(get(&f, &format!("http://127.0.0.1:{}/a/b/go", s.port)));
        assert_eq!(
            e.hops()[1].url,
            format!("http://127.0.0.1:{}{landed}", s.port),
            "{location}"
        );
    }
}

/// A `Location` that cannot be followed refuses the fetch with a message
/// that says what is wrong with it, in a sentence.
#[test]
fn an_unusable_location_is_named_in_the_refusal() {
    for (location, says) in [
        (&b"/caf\xc3\xa9"[..], "its Location is not ASCII"),
        (
            &b"http://a b/"[..],
            "its Location is refused: the URL holds a space",
        ),
        (
            &b"http://u:p@a.example/"[..],
            "its Location is refused: credentials",
        ),
    ] {
        let mut reply = b"HTTP/1.1 302 Found\r\nLocation: ".to_vec();
        reply.extend_from_slice(location);
        reply.extend_from_slice(b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let s = serve("127.0.0.1", move |_| Reply::Raw(reply.clone()));
        let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)]))
            .resolver(no_dns)
            .build();
        let e = denied(get(&f, &format!("http://127.0.0.1:{}/go", s.port)));
        assert!(e.message().contains(says), "{says}: {}", e.message());
        assert_eq!(e.hops().len(), 1);
    }
}

#[test]
fn a_redirect_without_location_is_the_answer() {
    let s = serve("127.0.0.1", |_| {
        Reply::Raw(
            b"HTTP/1.1 302 Found\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno".to_vec(),
        )
    });
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
    let r = get(&f, &format!("http://127.0.0.1:{}/", s.port)).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (302, &b"no"[..]));
}

// ---------------------------------------------------------------------------
// Resolution and pinning

#[test]
fn a_public_name_resolving_to_a_refused_address_is_refused() {
    for answer in [
        &["10.0.0.1"][..],
        &["192.168.1.10"],
        &["169.254.169.254"],
        &["100.64.0.1"],
        &["0.0.0.0"],
        &["224.0.0.1"],
        &["::ffff:10.0.0.1"],
        &["fd00::1"],
        &["fe80::1"],
        &["127.0.0.1"],
        &["::ffff:127.0.0.1"],
        &["::1"],
    ] {
        let calls = Arc::new(AtomicUsize::new(0));
        let p = rules(Mode::Restricted, &["api.example.com"], false);
        let f = Fetcher::builder(p.clone())
            .resolver(fixed(answer, calls.clone()))
            .build();
        let e = denied(get(&f, "https://api.example.com/v1"));
        assert_eq!(e.rule(), Some("api.example.com"), "{answer:?}");
        assert!(e.message().contains("resolved to"), "{answer:?}: {e}");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(e.hops().len(), 1);
    }
}

/// Every address a name answers is checked, not only the ones the client
/// is handed: a refused address past the sixteenth (the most the client
/// keeps) used to be cut off unchecked, and the hop went ahead to the
/// first sixteen, so an answer carrying an internal address was not
/// treated as the rebinding attempt it is.
#[test]
fn a_refused_address_past_the_sixteenth_still_refuses_the_hop() {
    let s = serve("127.0.0.1", |_| ok("reached"));
    // trusted_host grants a loopback name; 0.0.0.0 is refused in every
    // mode.
    let mut answer: Vec<String> = (1..=16).map(|i| format!("127.0.0.{i}")).collect();
    answer.push("0.0.0.0".into());
    let answer: Vec<&str> = answer.iter().map(String::as_str).collect();
    let calls = Arc::new(AtomicUsize::new(0));
    let f = Fetcher::builder(rules(Mode::TrustedHost, &["app.localhost"], true))
        .resolver(fixed(&answer, calls.clone()))
        .build();
    let e = denied(get(&f, &format!("http://app.localhost:{}/", s.port)));
    assert!(e.message().contains("0.0.0.0"), "{e}");
    assert_eq!(e.hops().len(), 1);
    assert!(e.hops()[0].addresses.is_empty());
    assert_eq!(s.hits(), 0, "nothing was dialled");
}

/// An IPv6 address in a URL is written in brackets. Unbracketed, the
/// host ended at the last colon (`http://::1:PORT/` read as `::1`, port
/// PORT, though `::1:PORT` is an address too): the rules admitted it as
/// the literal `::1`, and the resolver was then asked for it as a name
/// (a resolver is promised names only) before the client refused the URL.
/// Now it is refused as malformed, before the rules and the resolver.
#[test]
fn an_unbracketed_ipv6_host_is_refused_before_anything_is_asked() {
    let l = TcpListener::bind("[::1]:0").expect("bind [::1]");
    let s = serve_on(l, |_| ok("reached"));
    let f = Fetcher::builder(rules(
        Mode::Restricted,
        &[format!("[::1]:{}", s.port)],
        true,
    ))
    .resolver(no_dns)
    .build();
    for url in [
        format!("http://::1:{}/", s.port),
        format!("http://0:0:0:0:0:0:0:1:{}/", s.port),
    ] {
        let e = get(&f, &url).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Request, "{url}: {e}");
        assert!(e.message().contains("brackets"), "{url}: {e}");
    }
    // Bracketed, it is the granted literal.
    let r = get(&f, &format!("http://[::1]:{}/", s.port)).unwrap();
    assert_eq!(r.body, b"reached");
    assert_eq!(s.hits(), 1);
}

#[test]
fn a_changing_answer_cannot_move_the_connection() {
    // trusted_host lets the operator grant a loopback name; the resolver
    // answers 127.0.0.1 first and 127.0.0.2 on any later call. The fetch
    // resolves once, checks that answer, and the client connects only
    // there: the server on 127.0.0.2 sees nothing.
    let first = serve("127.0.0.1", |_| ok("checked"));
    let Ok(other_listener) = TcpListener::bind(("127.0.0.2", first.port)) else {
        eprintln!("127.0.0.2:{} is taken; skipped", first.port);
        return;
    };
    let other = serve_on(other_listener, |_| ok("rebound"));
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let resolver = move |_: &str, _: u16, _: Duration| {
        let n = c.fetch_add(1, Ordering::SeqCst);
        let ip = if n == 0 { "127.0.0.1" } else { "127.0.0.2" };
        Ok(vec![ip.parse().unwrap()])
    };
    let p = rules(
        Mode::TrustedHost,
        &[format!("rebind.localhost:{}", first.port)],
        true,
    );
    let f = Fetcher::builder(p.clone()).resolver(resolver).build();
    let r = get(&f, &format!("http://rebind.localhost:{}/", first.port)).unwrap();
    assert_eq!(r.body, b"checked");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(other.hits(), 0);
    assert_eq!(first.hits(), 1);
    assert_eq!(
        r.hops[0].addresses,
        vec!["127.0.0.1".parse::<IpAddr>().unwrap()]
    );
    // The Host header is the name that was authorized.
    assert!(first.requests()[0]
        .to_ascii_lowercase()
        .contains(&format!("host: rebind.localhost:{}", first.port)));
}

#[test]
fn a_name_resolving_to_loopback_is_refused_in_restricted_mode() {
    let s = serve("127.0.0.1", |_| ok("a"));
    let calls = Arc::new(AtomicUsize::new(0));
    let p = http_rules(&[format!("127.0.0.1:{}", s.port), "api.example.com".into()]);
    let f = Fetcher::builder(p.clone())
        .resolver(fixed(&["127.0.0.1"], calls))
        .build();
    denied(get(&f, &format!("http://api.example.com:{}/", s.port)));
    assert_eq!(s.hits(), 0);
}

#[test]
fn a_resolver_failure_is_an_io_error() {
    let p = rules(Mode::Restricted, &["api.example.com"], false);
    let f = Fetcher::builder(p.clone())
        .resolver(|_: &str, _: u16, _: Duration| Err(io::Error::other("NXDOMAIN")))
        .build();
    let e = get(&f, "https://api.example.com/").unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e}");
}

// ---------------------------------------------------------------------------
// Alternate spellings

#[test]
fn alternate_spellings_of_refused_addresses_are_refused() {
    let s = serve("127.0.0.1", |_| ok("must not be reached"));
    let p = s.port;
    let rules = http_rules(&[
        format!("127.0.0.1:{p}"),
        format!("[::1]:{p}"),
        "*.example.com".into(),
    ]);
    let f = Fetcher::builder(rules).resolver(no_dns).build();
    for host in [
        "0x7f.1",
        "0x7f.0.0.1",
        "0x7f000001",
        "2130706433",
        "017700000001",
        "0177.0.0.1",
        "0127.0.0.1",
        "127.1",
        "127.0.1",
        "127.0.0.1.",
        "%31%32%37.0.0.1",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:ffff:127.0.0.1]",
        "[::127.0.0.1]",
        "[64:ff9b::127.0.0.1]",
        "[::ffff:127.0.0.1%25lo]",
        "LOCALHOST",
        "localhost.",
        "127.0.0.1.example.com.",
    ] {
        let e = get(&f, &format!("http://{host}:{p}/")).unwrap_err();
        assert!(
            matches!(e.code(), ErrorCode::NetDenied | ErrorCode::Request),
            "{host}: {e}"
        );
    }
    for host in [
        "169.254.169.254",
        "0xa9fea9fe",
        "2852039166",
        "0251.0376.0251.0376",
        "[::ffff:169.254.169.254]",
        "[::ffff:a9fe:a9fe]",
        "0.0.0.0",
        "0",
        "[::]",
    ] {
        let e = get(&f, &format!("http://{host}/latest/meta-data/")).unwrap_err();
        assert!(
            matches!(e.code(), ErrorCode::NetDenied | ErrorCode::Request),
            "{host}: {e}"
        );
    }
    assert_eq!(s.hits(), 0);
    // The canonical spellings that are granted do work.
    assert_eq!(
        get(&f, &format!("http://127.0.0.1:{p}/")).unwrap().status,
        200
    );
}

#[test]
fn credentials_in_the_url_are_refused() {
    let s = serve("127.0.0.1", |_| ok("a"));
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
    for url in [
        format!("http://user:pw@127.0.0.1:{}/", s.port),
        format!("http://127.0.0.1:{}@evil.example/", s.port),
        format!("http://127.0.0.1:{}\\@evil.example/", s.port),
    ] {
        let e = get(&f, &url).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Request, "{url}: {e}");
    }
    assert_eq!(s.hits(), 0);
}

// ---------------------------------------------------------------------------
// Caps and timeouts

/// A URL over `MAX_URL_BYTES` is refused before it is parsed, its message
/// naming its length and quoting only its start (a 100 MB URL was parsed
/// and carried whole into the message); one at the cap is fetched.
#[test]
fn url26_a_url_past_the_cap_is_refused_and_not_quoted_whole() {
    use sandgate_netguard::MAX_URL_BYTES;
    let s = serve("127.0.0.1", |_| ok("a"));
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
    let base = format!("http://127.0.0.1:{}/", s.port);
    for len in [MAX_URL_BYTES + 1, 100 << 20] {
        let url = format!("{base}{}", "a".repeat(len - base.len()));
        let m = match get(&f, &url) {
            Ok(r) => panic!("a URL of {len} bytes was fetched: {}", r.status),
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::Request);
                e.to_string()
            }
        };
        assert!(
            m.contains(&format!(
                "a URL of {len} bytes, over the {MAX_URL_BYTES} a URL may have"
            )),
            "{}",
            &m[..m.len().min(400)]
        );
        assert!(m.len() < 400, "{}", &m[..400]);
    }
    assert_eq!(s.hits(), 0);
    let url = format!("{base}{}", "a".repeat(MAX_URL_BYTES - base.len()));
    match get(&f, &url) {
        Ok(r) => assert_eq!(r.status, 200),
        Err(e) => panic!("a URL at the cap was refused: {}", &e.to_string()[..300]),
    }
    assert_eq!(s.hits(), 1);
}

#[test]
fn an_endless_body_stops_at_max_bytes() {
    let s = serve("127.0.0.1", |_| Reply::Endless);
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
    let started = Instant::now();
    let r = f
        .fetch(
            &format!("http://127.0.0.1:{}/", s.port),
            &FetchOptions::new()
                .max_bytes(100_000)
                .timeout(Duration::from_secs(10)),
        )
        .unwrap();
    assert_eq!(r.body.len(), 100_000);
    assert!(r.truncated);
    assert!(r.body.capacity() < 1024 * 1024, "{}", r.body.capacity());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn the_fetcher_cap_bounds_what_a_request_asks_for() {
    let s = serve("127.0.0.1", |_| Reply::Endless);
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)]))
        .max_bytes(4096)
        .build();
    let r = f
        .fetch(
            &format!("http://127.0.0.1:{}/", s.port),
            &FetchOptions::new().max_bytes(u64::MAX),
        )
        .unwrap();
    assert_eq!((r.body.len(), r.truncated), (4096, true));
}

#[test]
fn a_silent_server_meets_the_total_timeout() {
    let s = serve("127.0.0.1", |_| Reply::Silent);
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
    let started = Instant::now();
    let e = f
        .fetch(
            &format!("http://127.0.0.1:{}/", s.port),
            &FetchOptions::new().timeout(Duration::from_millis(300)),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(250), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn a_body_that_stalls_meets_the_total_timeout() {
    let s = serve("127.0.0.1", |_| Reply::Stall);
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
    let started = Instant::now();
    let e = f
        .fetch(
            &format!("http://127.0.0.1:{}/", s.port),
            &FetchOptions::new().timeout(Duration::from_millis(400)),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(e.hops().len(), 1);
    assert_eq!(e.hops()[0].status, Some(200));
}

#[test]
fn a_slow_resolver_meets_the_total_timeout() {
    let p = rules(Mode::Restricted, &["api.example.com"], false);
    let f = Fetcher::builder(p.clone())
        .resolver(|_: &str, _: u16, _: Duration| {
            thread::sleep(Duration::from_millis(600));
            Ok(vec!["10.0.0.1".parse().unwrap()])
        })
        .build();
    let e = f
        .fetch(
            "https://api.example.com/",
            &FetchOptions::new().timeout(Duration::from_millis(200)),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
}

// ---------------------------------------------------------------------------
// Budgets and proxies

#[test]
fn net_ops_budget_counts_fetches_refused_ones_included() {
    let s = serve("127.0.0.1", |_| ok("a"));
    let p = http_rules(&[format!("127.0.0.1:{}", s.port)]);
    let f = Fetcher::builder(p).net_ops(Some(2)).build();
    assert_eq!(f.net_ops_left(), Some(2));
    denied(get(&f, "http://127.0.0.1:1/"));
    assert_eq!(
        get(&f, &format!("http://127.0.0.1:{}/", s.port))
            .unwrap()
            .status,
        200
    );
    let e = get(&f, &format!("http://127.0.0.1:{}/", s.port)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Denied);
    assert_eq!(s.hits(), 1);
}

#[test]
fn a_fetch_cancelled_before_it_starts_spends_no_budget_and_connects_nowhere() {
    let s = serve("127.0.0.1", |_| ok("a"));
    let p = http_rules(&[format!("127.0.0.1:{}", s.port)]);
    let f = Fetcher::builder(p).net_ops(Some(1)).build();
    let flag = sandgate_fetch::CancelFlag::new();
    flag.cancel();
    let url = format!("http://127.0.0.1:{}/", s.port);
    let e = f
        .fetch(&url, &FetchOptions::new().cancel(flag))
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Aborted, "{e}");
    assert_eq!(f.net_ops_left(), Some(1));
    assert_eq!(s.hits(), 0);
    // The budget it kept still pays for a fetch.
    assert_eq!(get(&f, &url).unwrap().status, 200);
    assert_eq!(f.net_ops_left(), Some(0));
}

#[test]
fn restricted_mode_refuses_a_configured_proxy() {
    let s = serve("127.0.0.1", |_| ok("direct"));
    let entry = format!("127.0.0.1:{}", s.port);
    let f = Fetcher::builder(http_rules(std::slice::from_ref(&entry)))
        .proxy(Some("HTTPS_PROXY".into()))
        .build();
    let e = denied(get(&f, &format!("http://{entry}/")));
    assert!(e.message().contains("proxy"), "{e}");
    assert_eq!(s.hits(), 0);

    let trusted = rules(Mode::TrustedHost, &[entry.as_str()], true);
    let f = Fetcher::builder(trusted)
        .proxy(Some("HTTPS_PROXY".into()))
        .build();
    assert_eq!(
        get(&f, &format!("http://{entry}/")).unwrap().body,
        b"direct"
    );
}

#[test]
fn malformed_requests() {
    let f = Fetcher::builder(http_rules(&["127.0.0.1:9"])).build();
    for (url, opts) in [
        ("not a url", FetchOptions::new()),
        ("http://127.0.0.1:9/", FetchOptions::new().method("CONNECT")),
        (
            "http://127.0.0.1:9/",
            FetchOptions::new().header("Host", "evil"),
        ),
        (
            "http://127.0.0.1:9/",
            FetchOptions::new().timeout(Duration::ZERO),
        ),
    ] {
        let e = f.fetch(url, &opts).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Request, "{url}: {e}");
    }
}

// ---------------------------------------------------------------------------
// TLS: a loopback https server with a self-signed certificate

fn tls_server(handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> (Server, String) {
    tls_server_ending(true, handler)
}

/// A loopback https server that, after its reply, ends TLS with a
/// `close_notify` alert (`close_notify`) or only closes the TCP connection
/// (as an attacker on the path who cuts it would).
fn tls_server_ending(
    close_notify: bool,
    handler: impl Fn(&str) -> Reply + Send + Sync + 'static,
) -> (Server, String) {
    let key = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let pem = key.cert.pem();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![key.cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.signing_key.serialize_der().into()),
    )
    .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let handler: Arc<Handler> = Arc::new(handler);
    let (h, r) = (hits.clone(), requests.clone());
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            h.fetch_add(1, Ordering::SeqCst);
            let (handler, r, config) = (handler.clone(), r.clone(), config.clone());
            thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let Ok(request) = read_request(&mut tls) else {
                    return;
                };
                let reply = handler(&request);
                r.lock().unwrap().push(request);
                let _ = write_reply(&mut tls, reply);
                if close_notify {
                    tls.conn.send_close_notify();
                }
                let _ = tls.flush();
                let _ = tls.sock.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    (
        Server {
            port,
            hits,
            requests,
        },
        pem,
    )
}

#[test]
fn https_to_a_granted_loopback_port_works() {
    let (s, pem) = tls_server(|_| ok("secure"));
    let p = rules(Mode::Restricted, &[format!("127.0.0.1:{}", s.port)], false);
    let f = Fetcher::builder(p.clone())
        .root_certificates_pem(pem.as_bytes())
        .unwrap()
        .build();
    let r = get(&f, &format!("https://127.0.0.1:{}/", s.port)).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"secure"[..]));

    // Without the test root the certificate is not trusted.
    let f = Fetcher::builder(p.clone()).build();
    let e = get(&f, &format!("https://127.0.0.1:{}/", s.port)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e}");
}

#[test]
fn redirect_to_http_is_refused_when_only_https_is_allowed() {
    let (s, pem) = tls_server(|req| {
        if req.starts_with("GET /go ") {
            redirect(301, "http://api.example.com/plain")
        } else {
            ok("x")
        }
    });
    let p = rules(
        Mode::Restricted,
        &[format!("127.0.0.1:{}", s.port), "api.example.com".into()],
        false,
    );
    let f = Fetcher::builder(p.clone())
        .root_certificates_pem(pem.as_bytes())
        .unwrap()
        .resolver(no_dns)
        .build();
    let e = denied(get(&f, &format!("https://127.0.0.1:{}/go", s.port)));
    assert!(e.message().contains("allow_http"), "{e}");
    assert_refused_at_second_hop(&e, "http://api.example.com/plain");
    assert_eq!(s.requests().len(), 1);
}

/// A redirect from https to http is judged as a first request to that URL
/// would be: with `net.allow_http` it is followed (to a granted host that
/// is not loopback, which a redirect never reaches), so a policy that
/// allows plain http allows the downgrade too.
#[test]
fn claims17_a_redirect_from_https_to_http_is_followed_where_allow_http_grants_it() {
    let Some(ip) = local_public_v4() else {
        eprintln!(
            "skipped: this machine has no address outside loopback that restricted mode admits"
        );
        return;
    };
    let b = serve(&ip.to_string(), |_| ok("plain"));
    let location = format!("http://b.example:{}/plain", b.port);
    let (s, pem) = tls_server(move |req| {
        if req.starts_with("GET /go ") {
            redirect(301, &location)
        } else {
            ok("x")
        }
    });
    let p = http_rules(&[
        format!("127.0.0.1:{}", s.port),
        format!("b.example:{}", b.port),
    ]);
    let calls = Arc::new(AtomicUsize::new(0));
    let f = Fetcher::builder(p)
        .root_certificates_pem(pem.as_bytes())
        .unwrap()
        .resolver(fixed(&[&ip.to_string()], calls))
        .build();
    let r = get(&f, &format!("https://127.0.0.1:{}/go", s.port)).unwrap();
    assert_eq!(r.body, b"plain");
    assert_eq!(r.hops.len(), 2, "{:?}", r.hops);
    assert_eq!(b.requests().len(), 1);
}

#[test]
fn one_fetcher_serves_many_threads_each_pinned_to_its_own_hop() {
    let a = serve("127.0.0.1", |_| ok("a"));
    let b = serve("127.0.0.1", |_| ok("b"));
    let f = Arc::new(
        Fetcher::builder(http_rules(&[
            format!("127.0.0.1:{}", a.port),
            format!("127.0.0.1:{}", b.port),
        ]))
        .resolver(no_dns)
        .build(),
    );
    let workers: Vec<_> = [(a.port, "a"), (b.port, "b")]
        .into_iter()
        .map(|(port, want)| {
            let f = f.clone();
            thread::spawn(move || {
                for _ in 0..20 {
                    let r = get(&f, &format!("http://127.0.0.1:{port}/")).unwrap();
                    assert_eq!(r.body, want.as_bytes());
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!((a.requests().len(), b.requests().len()), (20, 20));
}

#[test]
fn a_transport_failure_keeps_its_cause_as_the_source_and_prints_it_once() {
    // A port that was just free: nothing listens, the connection is refused.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{port}")])).build();
    let e = get(&f, &format!("http://127.0.0.1:{port}/")).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e}");
    let source = std::error::Error::source(&e).expect("the transport error is the source");
    let cause = source.to_string();
    assert!(!cause.is_empty());
    assert!(
        !e.to_string().contains(&cause),
        "the cause is printed by the source, not again by `{e}`"
    );
}

// ---------------------------------------------------------------------------
// Cancelling: every wait of a fetch ends within a few slices of the flag

/// Fetches `url` with a 6 s deadline and a flag set 300 ms after `armed`
/// returns (on another thread); asserts the fetch ended with `E_ABORTED`
/// within a second of the flag.
fn assert_cancelled_promptly(
    f: &Fetcher,
    url: &str,
    opts: FetchOptions,
    armed: impl FnOnce() + Send + 'static,
) {
    let flag = sandgate_fetch::CancelFlag::new();
    let set_at = Arc::new(Mutex::new(None));
    let (flag2, set2) = (flag.clone(), set_at.clone());
    thread::spawn(move || {
        armed();
        thread::sleep(Duration::from_millis(300));
        // Noted before the flag is set: a fetch that ends on the flag
        // must find it noted (set after, it raced the fetch's end).
        *set2.lock().unwrap() = Some(Instant::now());
        flag2.cancel();
    });
    let r = f.fetch(
        url,
        &opts.timeout(Duration::from_secs(6)).cancel(flag.clone()),
    );
    let ended = Instant::now();
    let set = set_at
        .lock()
        .unwrap()
        .expect("the fetch ended before its flag was set");
    let late = ended.duration_since(set);
    let e = r.expect_err("the fetch was cancelled, not answered");
    assert_eq!(
        e.code(),
        ErrorCode::Aborted,
        "{e} ({late:?} after the flag)"
    );
    assert!(
        late < Duration::from_secs(1),
        "cancelled only {late:?} after the flag"
    );
}

/// A loopback listener that accepts connections and holds them, reading
/// nothing; `accepted` hears of each.
fn holding_listener() -> (u16, std::sync::mpsc::Receiver<()>) {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
            let _ = tx.send(());
        }
    });
    (port, rx)
}

#[test]
fn mcp6_a_cancel_during_connect_ends_the_fetch_promptly() {
    let (listener, _held) = full_listener();
    let port = listener.local_addr().unwrap().port();
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{port}")])).build();
    assert_cancelled_promptly(
        &f,
        &format!("http://127.0.0.1:{port}/"),
        FetchOptions::new(),
        || (),
    );
}

#[test]
fn mcp6_a_cancel_during_an_upload_to_a_server_that_does_not_read_ends_it_promptly() {
    let (port, accepted) = holding_listener();
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{port}")])).build();
    assert_cancelled_promptly(
        &f,
        &format!("http://127.0.0.1:{port}/upload"),
        FetchOptions::new()
            .method("POST")
            .body(vec![b'x'; 128 * 1024 * 1024]),
        move || {
            // The upload fills the buffers within a moment of the accept.
            accepted.recv().unwrap();
            thread::sleep(Duration::from_millis(700));
        },
    );
}

#[test]
fn mcp6_a_cancel_during_a_tls_handshake_ends_the_fetch_promptly() {
    // The server takes the connection and never answers the ClientHello.
    let (port, accepted) = holding_listener();
    let f = Fetcher::builder(rules(
        Mode::Restricted,
        &[format!("127.0.0.1:{port}")],
        false,
    ))
    .build();
    assert_cancelled_promptly(
        &f,
        &format!("https://127.0.0.1:{port}/"),
        FetchOptions::new(),
        move || accepted.recv().unwrap(),
    );
}

#[test]
fn mcp6_a_cancel_during_name_resolution_answers_at_once() {
    let p = rules(Mode::Restricted, &["api.example.com"], false);
    let f = Fetcher::builder(p)
        .resolver(|_: &str, _: u16, _: Duration| {
            thread::sleep(Duration::from_secs(4));
            // Refused once it answers: nothing leaves the machine.
            Ok(vec!["10.0.0.1".parse().unwrap()])
        })
        .build();
    assert_cancelled_promptly(&f, "https://api.example.com/", FetchOptions::new(), || ());
}

#[test]
fn fetch7_an_address_refused_at_once_leaves_the_next_one_the_time_left() {
    // 127.0.0.2 refuses at once (nothing listens there); 127.0.0.1 is a
    // listener whose queue is full, drained after 300 ms: the connect's
    // SYN is dropped, and its retransmission a second later is taken.
    let (listener, held) = full_listener();
    let port = listener.local_addr().unwrap().port();
    let calls = Arc::new(AtomicUsize::new(0));
    let f = Fetcher::builder(rules(
        Mode::TrustedHost,
        &[format!("localhost:{port}")],
        true,
    ))
    .resolver(fixed(&["127.0.0.2", "127.0.0.1"], calls))
    .build();
    let server = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        (serve_on(listener, |_| ok("hi")), held)
    });
    let started = Instant::now();
    let r = f.fetch(
        &format!("http://localhost:{port}/"),
        &FetchOptions::new().timeout(Duration::from_millis(2100)),
    );
    let took = started.elapsed();
    let _server = server.join().unwrap();
    match r {
        Ok(r) => assert_eq!(r.body, b"hi"),
        Err(e) => panic!("{e} after {took:?} of the fetch's 2.1 s"),
    }
}

/// A 307 or 308 keeps the method and the body (as the Fetch standard and
/// curl do), so where a redirect to another origin leads decides where a
/// body goes: to a granted host it goes without the caller's credential
/// headers, and to a host the rules refuse nothing goes at all: the hop
/// is refused before its name is resolved or anything dialled.
#[test]
fn proxy9_a_307_or_308_body_reaches_only_a_granted_host_and_no_credential_with_it() {
    let Some(ip) = local_public_v4() else {
        eprintln!(
            "skipped: this machine has no address outside loopback that restricted mode admits"
        );
        return;
    };
    let b = serve(&ip.to_string(), |_| ok("landed on b"));
    let c = serve(&ip.to_string(), |_| ok("landed on c"));
    let (bp, cp) = (b.port, c.port);
    let a = serve("127.0.0.1", move |req| {
        if req.starts_with("POST /granted ") {
            redirect(307, &format!("http://b.example:{bp}/in"))
        } else if req.starts_with("POST /refused ") {
            redirect(308, &format!("http://c.example:{cp}/in"))
        } else {
            ok("a")
        }
    });
    let calls = Arc::new(AtomicUsize::new(0));
    let p = http_rules(&[format!("127.0.0.1:{}", a.port), format!("b.example:{bp}")]);
    let f = Fetcher::builder(p)
        .resolver(fixed(&[&ip.to_string()], calls.clone()))
        .build();
    let opts = FetchOptions::new()
        .timeout(Duration::from_secs(10))
        .method("POST")
        .header("Authorization", "Bearer bound-to-a-0005")
        .header("Cookie", "session=bound-to-a-0006")
        .header("Content-Type", "application/json")
        .body(&b"{\"secret-body\":7}"[..]);

    let r = f
        .fetch(&format!("http://127.0.0.1:{}/granted", a.port), &opts)
        .unwrap();
    assert_eq!(r.body, b"landed on b");
    assert_eq!(r.hops.len(), 2);
    assert_eq!(r.hops[1].method, "POST");
    let sent_b = b.requests().join("\n");
    assert!(sent_b.starts_with("POST /in HTTP/1.1\r\n"), "{sent_b}");
    assert!(sent_b.ends_with("{\"secret-body\":7}"), "{sent_b}");
    assert!(!sent_b.contains("bound-to-a"), "{sent_b}");
    assert!(
        sent_b
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{sent_b}"
    );

    let before = calls.load(Ordering::SeqCst);
    let e = denied(f.fetch(&format!("http://127.0.0.1:{}/refused", a.port), &opts));
    assert_refused_at_second_hop(&e, &format!("http://c.example:{cp}/in"));
    assert_eq!(e.hops()[0].status, Some(308));
    assert_eq!(c.hits(), 0, "the refused host was connected to");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before,
        "refused before resolving"
    );
}

#[test]
fn fetch18_an_https_body_cut_before_close_notify_is_an_error_not_a_whole_body() {
    // A body without Content-Length or chunking ends when the connection
    // does; over TLS only the close_notify alert says the server ended it.
    // A bare TCP close (or reset) is what an attacker on the path can
    // forge to cut the body anywhere.
    let reply = || {
        Reply::Raw(
            b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nrm -rf /tmp/build # cut".to_vec(),
        )
    };
    for close_notify in [true, false] {
        let (s, pem) = tls_server_ending(close_notify, move |_| reply());
        let p = rules(Mode::Restricted, &[format!("127.0.0.1:{}", s.port)], false);
        let f = Fetcher::builder(p)
            .root_certificates_pem(pem.as_bytes())
            .unwrap()
            .build();
        let r = get(&f, &format!("https://127.0.0.1:{}/", s.port));
        if close_notify {
            let r = r.unwrap();
            assert_eq!(r.body, b"rm -rf /tmp/build # cut");
            assert!(!r.truncated);
        } else {
            let e = match r {
                Ok(r) => panic!(
                    "a body ended without close_notify was taken as whole: {:?} (truncated: {})",
                    String::from_utf8_lossy(&r.body),
                    r.truncated
                ),
                Err(e) => e,
            };
            assert_eq!(e.code(), ErrorCode::Io, "{e}");
            let cause = std::error::Error::source(&e).map(|c| c.to_string());
            assert!(
                cause.as_deref().is_some_and(|c| c.contains("close_notify")),
                "{e}: {cause:?}"
            );
        }
    }
    // A body with a length is read to its end before the connection's
    // end is seen: a server that never sends close_notify still answers.
    let (s, pem) = tls_server_ending(false, |_| ok("measured"));
    let p = rules(Mode::Restricted, &[format!("127.0.0.1:{}", s.port)], false);
    let f = Fetcher::builder(p)
        .root_certificates_pem(pem.as_bytes())
        .unwrap()
        .build();
    let r = get(&f, &format!("https://127.0.0.1:{}/", s.port)).unwrap();
    assert_eq!((r.body.as_slice(), r.truncated), (&b"measured"[..], false));
}

#[test]
fn fetch18_a_method_the_client_cannot_send_is_refused_before_connecting() {
    let s = serve("127.0.0.1", |_| ok("a"));
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
    let url = format!("http://127.0.0.1:{}/", s.port);
    for m in ["PROPFIND", "FOO", "QUERY"] {
        let e = f
            .fetch(
                &url,
                &FetchOptions::new()
                    .method(m)
                    .timeout(Duration::from_secs(5)),
            )
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Request, "{m}: {e}");
        assert!(e.message().contains(m), "{m}: {e}");
    }
    assert_eq!(s.hits(), 0, "a connection was made for a method never sent");
    for m in [
        "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "patch",
    ] {
        let r = f
            .fetch(
                &url,
                &FetchOptions::new()
                    .method(m)
                    .timeout(Duration::from_secs(5)),
            )
            .unwrap();
        assert_eq!(r.status, 200, "{m}");
    }
}

#[test]
fn fetch18_an_expect_header_is_the_clients_not_the_callers() {
    // `Expect: 100-continue` changes how the upload is timed: the client
    // waits for a 100, and a server that answers at once (a 401, a 413)
    // without reading the body left the fetch waiting to its timeout. It is
    // refused as the other framing headers are, before anything is dialled.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            h.fetch_add(1, Ordering::SeqCst);
            thread::spawn(move || {
                // The head only, then the answer at once; the connection
                // stays open.
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                let _ =
                    stream.write_all(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 4\r\n\r\nnope");
                thread::sleep(Duration::from_secs(10));
            });
        }
    });
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{port}")])).build();
    let url = format!("http://127.0.0.1:{port}/");
    let opts = FetchOptions::new()
        .method("POST")
        .header("Expect", "100-continue")
        .body("upload")
        .timeout(Duration::from_secs(3));
    let e = f.fetch(&url, &opts).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Request, "{e}");
    assert!(e.message().contains("expect"), "{e}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    // Without it the same server's answer arrives.
    let opts = FetchOptions::new()
        .method("POST")
        .body("upload")
        .timeout(Duration::from_secs(3));
    let r = f.fetch(&url, &opts).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (401, &b"nope"[..]));
}

/// A header line longer than the client writes (a value of 1 MB) is the
/// caller's error, `E_REQUEST` naming the header, refused before anything
/// is dialled: before, the client connected, sent the head's first lines
/// and failed on the long one with `E_IO` ("output too small"), a broken
/// request left on the server. A long header within the cap is sent whole.
#[test]
fn mcphttp20_a_header_over_the_cap_is_refused_before_connecting() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(0usize));
    let (h, s) = (hits.clone(), seen.clone());
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            h.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let mut head = 0;
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                head += line.len();
                line.clear();
            }
            *s.lock().unwrap() = head;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{port}")])).build();
    let url = format!("http://127.0.0.1:{port}/");
    let opts = FetchOptions::new()
        .header("X-Small", "1")
        .header("X-Big", "a".repeat(1 << 20))
        .timeout(Duration::from_secs(5));
    let e = f.fetch(&url, &opts).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Request, "{e}");
    assert!(e.message().contains("x-big"), "{e}");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a connection was made");
    // Under the cap, a long header reaches the server whole.
    let opts = FetchOptions::new()
        .header("X-Big", "a".repeat(60 * 1024))
        .timeout(Duration::from_secs(5));
    let r = f.fetch(&url, &opts).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
    assert!(*seen.lock().unwrap() > 60 * 1024);
}
