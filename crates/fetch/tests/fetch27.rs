//! The confined fetch against hostile servers and hostile URLs, on
//! loopback (and this machine's own address outside it) only: what a
//! refusal quotes, and what a server can make the client do.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use sandgate_fetch::{ErrorCode, FetchError, FetchOptions, Fetcher};
use sandgate_netguard::{Mode, NetEntry, Rules, MAX_URL_BYTES};

mod support;
use support::{get, http_rules, local_public_v4};

// ---------------------------------------------------------------------------
// A scripted server: reads each request's head, then runs its script on
// the connection.

type Script = dyn Fn(&str, &mut TcpStream) + Send + Sync;

struct Server {
    port: u16,
    /// Request lines (`GET /x HTTP/1.1`) received, in order.
    requests: Arc<Mutex<Vec<String>>>,
}

fn serve_at(ip: IpAddr, script: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static) -> Server {
    let listener = TcpListener::bind((ip, 0)).expect("bind a local port");
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let script: Arc<Script> = Arc::new(script);
    let log = requests.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (script, log) = (script.clone(), log.clone());
            thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).unwrap_or(0) == 0 {
                    return;
                }
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let first = first.trim_end().to_owned();
                log.lock().unwrap().push(first.clone());
                script(&first, &mut stream);
            });
        }
    });
    Server { port, requests }
}

fn serve(script: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static) -> Server {
    serve_at("127.0.0.1".parse().unwrap(), script)
}

fn reply(bytes: impl AsRef<[u8]>) -> impl Fn(&str, &mut TcpStream) + Send + Sync + 'static {
    let bytes = bytes.as_ref().to_vec();
    move |_, s| {
        let _ = s.write_all(&bytes);
    }
}

/// Writes `bytes` one at a time, `gap` apart, until done or the client
/// goes.
fn drip(s: &mut TcpStream, bytes: &[u8], gap: Duration) {
    for b in bytes {
        if s.write_all(std::slice::from_ref(b)).is_err() {
            return;
        }
        thread::sleep(gap);
    }
}

// ---------------------------------------------------------------------------
// What a refusal quotes

/// The longest message a refusal of a long URL may have: the cut URL
/// (100 bytes and `…`), a reason naming a host of at most 253 bytes or a
/// cut one, and the words around them.
const SHORT: usize = 1024;

fn assert_short(e: &FetchError, says: &str) {
    let m = e.message();
    assert!(
        m.len() < SHORT,
        "a refusal of {} bytes: {}…",
        m.len(),
        sandgate_codes::clipped(m, 400, 400).0
    );
    assert!(m.contains(says), "{says:?} not in {m}");
    for hop in e.hops() {
        assert!(
            hop.reason.len() < SHORT,
            "a hop's reason of {} bytes: {}…",
            hop.reason.len(),
            sandgate_codes::clipped(&hop.reason, 400, 400).0
        );
    }
}

/// A URL under the 32 KiB cap but long (a path, a host, a scheme of
/// 30,000 bytes) is quoted by its first 100 bytes and `…` when it is
/// refused, as the first URL past the cap is: on the first hop, on a
/// redirect hop, and as the URL a refused `Location` came from. Before,
/// the hop's URL went into the message whole (and a long host or scheme
/// into its reason), a 30 KB message for a model to read.
#[test]
fn fetch27_a_long_url_refused_at_any_hop_is_quoted_by_its_start() {
    let long = "a".repeat(30_000);
    const { assert!(30_000 < MAX_URL_BYTES) };
    let s = serve(|_, _| ());
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();

    // The first hop: an ungranted host, an invalid host, a scheme.
    for (url, says) in [
        (
            format!("http://203.0.113.9/{long}"),
            "`203.0.113.9` port 80 is not in net.allow",
        ),
        (
            format!("http://{long}.example/"),
            "is neither a valid DNS name nor an IP literal",
        ),
        (
            format!("{long}://203.0.113.9/"),
            "is not admitted (https, wss; http and ws with net.allow_http)",
        ),
    ] {
        let e = get(&f, &url).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::NetDenied, "{}", &e.message()[..200]);
        assert_short(&e, says);
        assert!(e.message().contains('…'), "{}", e.message());
        // The hop itself keeps the URL whole: it is data, not a message.
        assert_eq!(e.hops()[0].url.len(), url.len());
    }
    assert!(s.requests.lock().unwrap().is_empty());

    // A redirect hop: a Location to an ungranted host, to an invalid host,
    // and an unusable Location from a long URL.
    for (location, path, says) in [
        (
            format!("http://203.0.113.9/{long}"),
            "/go".to_owned(),
            "the redirect to http://203.0.113.9/aaaa",
        ),
        (
            format!("http://{long}.example/"),
            "/go".to_owned(),
            "is neither a valid DNS name nor an IP literal",
        ),
        (
            "http://u:p@203.0.113.9/".to_owned(),
            format!("/{long}"),
            "its Location is refused: credentials",
        ),
    ] {
        let head = format!(
            "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: \
             close\r\n\r\n"
        );
        let s = serve(reply(head));
        let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
        let e = get(&f, &format!("http://127.0.0.1:{}{path}", s.port)).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::NetDenied, "{}", &e.message()[..200]);
        assert_short(&e, says);
        assert_eq!(s.requests.lock().unwrap().len(), 1);
    }
}

// ---------------------------------------------------------------------------
// What a server can make the client do

/// A response head built to exhaust the client fails the fetch at once
/// with `E_IO`, its cause naming the bound: 10,000 header lines (the
/// client parses at most 128), one header line of 10 MB (the head may
/// take 64 KiB); nothing past the bound is buffered.
#[test]
fn fetch27_a_response_head_flood_fails_the_fetch_at_its_bound() {
    let many = {
        let mut h = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..10_000 {
            h.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        h.extend_from_slice(b"Content-Length: 2\r\nConnection: close\r\n\r\nhi");
        h
    };
    let flood = serve(reply(many));
    let long = serve(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nX-Big: ");
        let chunk = vec![b'a'; 64 * 1024];
        for _ in 0..160 {
            if s.write_all(&chunk).is_err() {
                return;
            }
        }
        let _ = s.write_all(b"\r\nContent-Length: 2\r\n\r\nhi");
    });
    for (s, cause) in [(flood, "too many headers"), (long, "too big")] {
        let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
        let started = Instant::now();
        let e = get(&f, &format!("http://127.0.0.1:{}/", s.port)).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::Io, "{e}");
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert!(
            source.as_deref().is_some_and(|m| m.contains(cause)),
            "{e}: {source:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

/// The total timeout holds over the whole call, not per read: a server
/// that sends its head, or its body, one byte every 100 ms (each read
/// makes progress) is cut at the deadline with `E_TIMEOUT`, and so is a
/// chain of redirects each answered just inside it.
#[test]
fn fetch27_a_server_dripping_bytes_meets_the_total_timeout() {
    let head = serve(|_, s| {
        drip(
            s,
            format!("HTTP/1.1 200 OK\r\nX-Slow: {}\r\n\r\n", "a".repeat(100)).as_bytes(),
            Duration::from_millis(100),
        )
    });
    let body = serve(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
        drip(s, &[b'x'; 100], Duration::from_millis(100));
    });
    for (s, status) in [(head, None), (body, Some(200))] {
        let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
        let started = Instant::now();
        let e = f
            .fetch(
                &format!("http://127.0.0.1:{}/", s.port),
                &FetchOptions::new().timeout(Duration::from_millis(1500)),
            )
            .expect_err("the drip outlasts the timeout");
        let took = started.elapsed();
        assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
        assert!(took >= Duration::from_millis(1400), "{took:?}");
        assert!(took < Duration::from_millis(3000), "{took:?}");
        assert_eq!(e.hops()[0].status, status);
    }

    let Some(ip) = local_public_v4() else {
        eprintln!("skipped the redirect chain: no address outside loopback");
        return;
    };
    let s = serve_at(ip, |_, s| {
        thread::sleep(Duration::from_millis(400));
        let _ = s.write_all(
            b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    });
    let f = Fetcher::builder(http_rules(&[format!("b.example:{}", s.port)]))
        .resolver(move |_: &str, _: u16, _: Duration| Ok(vec![ip]))
        .build();
    let started = Instant::now();
    let e = f
        .fetch(
            &format!("http://b.example:{}/", s.port),
            &FetchOptions::new().timeout(Duration::from_millis(1500)),
        )
        .expect_err("the chain outlasts the timeout");
    let took = started.elapsed();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    assert!(took < Duration::from_millis(3000), "{took:?}");
    assert!(e.hops().len() >= 3, "{:?}", e.hops());
}

/// The client decodes no content coding: a gzip bomb (1 MiB of zeros in
/// 1,051 bytes) is answered as the 1,051 bytes sent, never inflated, so
/// no `Content-Encoding` can make it hold more than `max_bytes`.
#[test]
fn fetch27_a_compressed_body_is_answered_as_sent_never_inflated() {
    let mut bomb = vec![
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xed, 0xc1, 0x31, 0x01, 0x00,
        0x00, 0x00, 0xc2, 0xa0, 0xf5, 0x4f, 0x6d, 0x08, 0x5f, 0xa0,
    ];
    bomb.extend_from_slice(&[0; 1016]);
    bomb.extend_from_slice(&[0x3e, 0x03, 0x1c, 0xea, 0x38, 0xa7, 0x00, 0x00, 0x10, 0x00]);
    assert_eq!(bomb.len(), 1051);
    for coding in ["gzip", "x-gzip"] {
        let mut head = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\nContent-Length: {}\r\nConnection: \
             close\r\n\r\n",
            bomb.len()
        )
        .into_bytes();
        head.extend_from_slice(&bomb);
        let s = serve(reply(head));
        let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
        let r = f
            .fetch(
                &format!("http://127.0.0.1:{}/", s.port),
                &FetchOptions::new()
                    .header("Accept-Encoding", "gzip")
                    .max_bytes(100_000)
                    .timeout(Duration::from_secs(10)),
            )
            .unwrap();
        assert_eq!((r.body.len(), r.truncated), (bomb.len(), false));
        assert_eq!(r.body, bomb);
    }
}

/// Chunk sizes a server cannot back: `ffffffffffffffff` with an endless
/// body is cut at `max_bytes` (memory bounded by it, not by the size), a
/// size past 64 bits fails with `E_IO`; an interim `100` or `103` answer
/// is passed over to the final one.
#[test]
fn fetch27_chunk_sizes_and_interim_answers() {
    let huge = serve(|_, s| {
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
        );
        let chunk = vec![b'x'; 64 * 1024];
        let stop = Instant::now() + Duration::from_secs(10);
        while Instant::now() < stop && s.write_all(&chunk).is_ok() {}
    });
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", huge.port)])).build();
    let r = f
        .fetch(
            &format!("http://127.0.0.1:{}/", huge.port),
            &FetchOptions::new()
                .max_bytes(100_000)
                .timeout(Duration::from_secs(10)),
        )
        .unwrap();
    assert_eq!((r.body.len(), r.truncated), (100_000, true));
    assert!(r.body.capacity() < 1024 * 1024, "{}", r.body.capacity());

    let over = serve(reply(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n1ffffffffffffffff\r\nabc",
    ));
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", over.port)])).build();
    let e = get(&f, &format!("http://127.0.0.1:{}/", over.port)).expect_err("refused");
    assert_eq!(e.code(), ErrorCode::Io, "{e}");

    for interim in [
        "100 Continue\r\n",
        "103 Early Hints\r\nLink: </a>; rel=preload\r\n",
    ] {
        let s = serve(reply(format!(
            "HTTP/1.1 {interim}\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nfinal"
        )));
        let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
        let r = get(&f, &format!("http://127.0.0.1:{}/", s.port)).unwrap();
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"final"[..]),
            "{interim}"
        );
    }
}

/// A certificate the fetcher trusts, but issued for another name, fails
/// the handshake with `E_IO` naming the mismatch: the server never reads
/// a byte of the request.
#[test]
fn fetch27_a_trusted_certificate_for_another_name_is_refused_before_the_request() {
    let key = rcgen::generate_simple_self_signed(vec!["other.example".to_owned()]).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![key.cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.signing_key.serialize_der().into()),
        )
        .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let read = Arc::new(AtomicUsize::new(0));
    let read2 = read.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (config, read) = (config.clone(), read2.clone());
            thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut buf = [0u8; 4096];
                if let Ok(n) = std::io::Read::read(&mut tls, &mut buf) {
                    read.fetch_add(n, Ordering::SeqCst);
                }
            });
        }
    });
    let f = Fetcher::builder(Rules::new(
        Mode::Restricted,
        vec![NetEntry::parse(&format!("127.0.0.1:{port}")).unwrap()],
        false,
    ))
    .root_certificates_pem(key.cert.pem().as_bytes())
    .unwrap()
    .build();
    let e = get(&f, &format!("https://127.0.0.1:{port}/")).expect_err("refused");
    assert_eq!(e.code(), ErrorCode::Io, "{e}");
    let source = std::error::Error::source(&e).map(ToString::to_string);
    assert!(
        source
            .as_deref()
            .is_some_and(|m| m.contains("not valid for name")),
        "{e}: {source:?}"
    );
    thread::sleep(Duration::from_millis(100));
    assert_eq!(read.load(Ordering::SeqCst), 0);
}

/// A fetch cancelled while its body drips in ends with `E_ABORTED` within
/// a second of the flag, and its connection is closed (the server sees
/// it end), not left open or pooled.
#[test]
fn fetch27_a_cancel_mid_body_ends_the_fetch_and_closes_its_connection() {
    let (closed_tx, closed_rx) = std::sync::mpsc::channel();
    let closed_tx = Mutex::new(closed_tx);
    let s = serve(move |_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
        let started = Instant::now();
        for _ in 0..1000 {
            if s.write_all(b"x").is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = closed_tx.lock().unwrap().send(started.elapsed());
    });
    let f = Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build();
    let flag = sandgate_fetch::CancelFlag::new();
    let setter = flag.clone();
    let set_at = Arc::new(Mutex::new(None));
    let set_at2 = set_at.clone();
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(500));
        *set_at2.lock().unwrap() = Some(Instant::now());
        setter.cancel();
    });
    let e = f
        .fetch(
            &format!("http://127.0.0.1:{}/", s.port),
            &FetchOptions::new()
                .timeout(Duration::from_secs(30))
                .cancel(flag),
        )
        .expect_err("cancelled");
    let late = set_at.lock().unwrap().expect("the flag was set").elapsed();
    assert_eq!(e.code(), ErrorCode::Aborted, "{e}");
    assert_eq!(e.hops()[0].status, Some(200));
    assert!(late < Duration::from_secs(1), "{late:?}");
    // The server's next writes fail: the connection was closed, long
    // before its 20 s of body would have ended.
    let served = closed_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the connection was left open");
    assert!(served < Duration::from_secs(5), "{served:?}");
}

/// Many fetches at once leave no connection behind past the pool's bound
/// (ureq keeps at most 3 idle connections a host), and dropping the
/// fetcher closes those: the server sees every connection end.
#[test]
fn fetch27_concurrent_fetches_leave_at_most_the_pool_open_and_none_once_dropped() {
    let open = Arc::new(AtomicUsize::new(0));
    let open2 = open.clone();
    let s = serve(move |_, s| {
        open2.fetch_add(1, Ordering::SeqCst);
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
        // Keep-alive: answer every further request until the client ends
        // the connection.
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if line == "\r\n" => {
                    if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
                        .is_err()
                    {
                        break;
                    }
                }
                Ok(_) => {}
            }
        }
        open2.fetch_sub(1, Ordering::SeqCst);
    });
    let f = Arc::new(Fetcher::builder(http_rules(&[format!("127.0.0.1:{}", s.port)])).build());
    let url = format!("http://127.0.0.1:{}/", s.port);
    let threads: Vec<_> = (0..64)
        .map(|_| {
            let (f, url) = (f.clone(), url.clone());
            thread::spawn(move || get(&f, &url).map(|r| r.body))
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().unwrap(), b"hi");
    }
    let settle = |most: usize| {
        let stop = Instant::now() + Duration::from_secs(5);
        while open.load(Ordering::SeqCst) > most && Instant::now() < stop {
            thread::sleep(Duration::from_millis(20));
        }
        open.load(Ordering::SeqCst)
    };
    let left = settle(3);
    assert!(left <= 3, "{left} connections left open");
    drop(f);
    assert_eq!(settle(0), 0, "connections left open after the fetcher went");
}

const PROXY27_CHILD: &str = "SANDGATE_FETCH27_PROXY_CHILD";

/// In the child only, whose environment names a proxy in every variable:
/// fetchers built without `proxy_from_env` connect directly in both
/// modes; with it, restricted mode refuses naming the variable and
/// trusted_host connects directly.
#[test]
fn fetch27_child_environment_proxy() {
    if std::env::var_os(PROXY27_CHILD).is_none() {
        return;
    }
    let s = serve(reply(
        b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\ndirect",
    ));
    let url = format!("http://127.0.0.1:{}/", s.port);
    let entry = NetEntry::parse(&format!("127.0.0.1:{}", s.port)).unwrap();
    for mode in [Mode::Restricted, Mode::TrustedHost] {
        let f = Fetcher::builder(Rules::new(mode, vec![entry.clone()], true)).build();
        assert_eq!(get(&f, &url).unwrap().body, b"direct", "{mode:?}");
    }
    let f = Fetcher::builder(Rules::new(Mode::TrustedHost, vec![entry.clone()], true))
        .proxy_from_env()
        .build();
    assert_eq!(get(&f, &url).unwrap().body, b"direct");
    let f = Fetcher::builder(Rules::new(Mode::Restricted, vec![entry], true))
        .proxy_from_env()
        .build();
    let e = get(&f, &url).expect_err("refused");
    assert_eq!(e.code(), ErrorCode::NetDenied, "{e}");
    assert!(e.message().contains("_PROXY"), "{e}");
    assert_eq!(s.requests.lock().unwrap().len(), 3);
    println!("PROXY27-OK");
}

/// A proxy named by the host's environment (`HTTP_PROXY` and the rest,
/// pointing at a listener here) is never dialled by the fetch, whatever
/// the mode: the client is built with no proxy, so the environment
/// cannot send the request elsewhere (restricted mode refuses it outright
/// when the fetcher is built from the environment, as the facade does).
#[test]
fn fetch27_an_environment_proxy_is_never_dialled() {
    if std::env::var_os(PROXY27_CHILD).is_some() {
        return;
    }
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_url = format!("http://127.0.0.1:{}", proxy.local_addr().unwrap().port());
    let dialled = Arc::new(AtomicUsize::new(0));
    let dialled2 = dialled.clone();
    thread::spawn(move || {
        for stream in proxy.incoming() {
            dialled2.fetch_add(1, Ordering::SeqCst);
            if let Ok(mut s) = stream {
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nproxy",
                );
            }
        }
    });
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", "fetch27_child_environment_proxy", "--nocapture"])
        .env(PROXY27_CHILD, "1")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    for var in sandgate_fetch::PROXY_VARIABLES {
        child.env(var, &proxy_url);
    }
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("PROXY27-OK"),
        "the child: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(dialled.load(Ordering::SeqCst), 0);
}

/// A caller's method or header name that is refused is quoted escaped and,
/// past 200 bytes, by its first 100 and `…`: before, a method or header
/// name of a megabyte (one the HTTP grammar refuses, or a valid token of
/// 60,000 bytes) came back whole in the message.
#[test]
fn fetch27_a_long_method_or_header_name_is_quoted_by_its_start() {
    let f = Fetcher::builder(http_rules(&["127.0.0.1:9"])).build();
    let big = "a".repeat(1_000_000);
    for (opts, says) in [
        (
            FetchOptions::new().method(format!("{big} x")),
            "is not an HTTP method",
        ),
        (
            FetchOptions::new().method(big.clone()),
            "is not a method fetch sends",
        ),
        (
            FetchOptions::new().header(format!("{big} x"), "v"),
            "is not a header name",
        ),
        (
            FetchOptions::new().header("x".repeat(60_000), "v".repeat(10_000)),
            "bytes long (name and value)",
        ),
        (
            FetchOptions::new().header("x".repeat(60_000), "v\n"),
            "is not a valid value",
        ),
    ] {
        let e = f.fetch("http://127.0.0.1:9/", &opts).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::Request, "{}", &e.message()[..200]);
        assert_short(&e, says);
        assert!(e.message().contains('…'), "{}", e.message());
    }
    // Short ones are quoted whole, their controls escaped.
    let e = f
        .fetch(
            "http://127.0.0.1:9/",
            &FetchOptions::new().header("X\u{1b}[31m", "v"),
        )
        .expect_err("refused");
    assert_eq!(e.message(), "`X\\u{1b}[31m` is not a header name");
}

/// A server that takes the connection and never answers the TLS
/// ClientHello meets the fetch's total timeout (`E_TIMEOUT`), not a
/// handshake of its own choosing.
#[test]
fn fetch27_a_server_that_never_answers_tls_meets_the_total_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let f = Fetcher::builder(Rules::new(
        Mode::Restricted,
        vec![NetEntry::parse(&format!("127.0.0.1:{port}")).unwrap()],
        false,
    ))
    .build();
    let started = Instant::now();
    let e = f
        .fetch(
            &format!("https://127.0.0.1:{port}/"),
            &FetchOptions::new().timeout(Duration::from_millis(800)),
        )
        .expect_err("never answered");
    let took = started.elapsed();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}
