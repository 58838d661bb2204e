//! The egress proxy's wire (docs/reference/proxy.md): one client
//! connection to a real proxy on loopback sends the fuzzed bytes (an HTTP
//! request head — `CONNECT`, absolute-form or anything else, with headers,
//! bodies and pipelined requests —, a SOCKS5 greeting and request, or raw
//! bytes), then shuts its write side and reads the answer to its end.
//!
//! The proxy runs in restricted mode with `net.allow_http`; its allow-list
//! grants one loopback port (an upstream that answers every request) and
//! `example.com`, `*.example.com`; its resolver answers loopback for every
//! name (a rebinding resolver). A second listener, the sentinel, is granted
//! nothing. Invariants, after every input:
//!
//! - the sentinel is never connected to;
//! - every audit record that says allowed names the granted port and the
//!   granted upstream address, and no record tells of a panic;
//! - the answer ends (the proxy closes the connection) and is empty, an
//!   HTTP/1.1 status line (from the proxy or the upstream), a SOCKS5 method
//!   choice (`05 00` / `05 ff`) optionally followed by a SOCKS5 reply, or
//!   what the upstream sent through a granted tunnel;
//! - no connection keeps its place: the proxy's active count returns to 0.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{Proxy, ProxyConfig};

use crate::bytes::Bytes;

/// What the upstream answers every request or tunnel with.
pub const UPSTREAM_ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

struct Fixture {
    proxy: Proxy,
    addr: SocketAddr,
    upstream: SocketAddr,
    sentinel: SocketAddr,
    sentinel_hits: Arc<AtomicUsize>,
    /// Serializes the inputs (the twin runs on test threads).
    lock: Mutex<()>,
}

fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("bind")
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let up = listener();
        let upstream = up.local_addr().expect("addr");
        std::thread::spawn(move || {
            for s in up.incoming().flatten() {
                std::thread::spawn(move || upstream_conn(s));
            }
        });
        let sent = listener();
        let sentinel = sent.local_addr().expect("addr");
        let sentinel_hits = Arc::new(AtomicUsize::new(0));
        let hits = Arc::clone(&sentinel_hits);
        std::thread::spawn(move || {
            for s in sent.incoming().flatten() {
                hits.fetch_add(1, Ordering::SeqCst);
                drop(s);
            }
        });
        let allow = [
            format!("127.0.0.1:{}", upstream.port()),
            "example.com".to_owned(),
            "*.example.com".to_owned(),
        ]
        .iter()
        .map(|e| NetEntry::parse(e).expect("entry"))
        .collect();
        let mut config = ProxyConfig::new(Rules::new(Mode::Restricted, allow, true));
        config.resolver =
            Arc::new(|_: &str, _: u16, _: Duration| Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]));
        config.handshake_timeout = Duration::from_millis(500);
        config.connect_timeout = Duration::from_secs(2);
        config.idle_timeout = Duration::from_millis(500);
        config.audit_capacity = 64;
        let proxy = Proxy::new(config);
        let addr = proxy.serve(listener().into()).expect("serve");
        Fixture {
            proxy,
            addr,
            upstream,
            sentinel,
            sentinel_hits,
            lock: Mutex::new(()),
        }
    })
}

/// The upstream: answers the first bytes it reads, then closes (so that
/// a connection ends without waiting for the idle timeout).
fn upstream_conn(mut s: TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = [0u8; 8192];
    if let Ok(1..) = s.read(&mut buf) {
        let _ = s.write_all(UPSTREAM_ANSWER);
    }
}

const METHODS: &[&str] = &[
    "CONNECT", "GET", "POST", "HEAD", "connect", "PUT", "TRACE", "OPTIONS", "G3T", "", "GET ",
];
const SCHEMES: &[&str] = &[
    "http://", "https://", "HTTP://", "", "ftp://", "//", "http:/",
];
const VERSIONS: &[&str] = &[
    "HTTP/1.1",
    "HTTP/1.0",
    "HTTP/2",
    "HTTP/1.1 ",
    "http/1.1",
    "HTTP/1.1\n",
    "",
];
const HEADER_NAMES: &[&str] = &[
    "Host",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
    "Proxy-Connection",
    "X-HTTP-Method-Override",
    "Upgrade",
    "Expect",
    "Proxy-Authorization",
    "X_Forwarded_For",
    " Host",
    "Host ",
    "",
];
const HEADER_VALUES: &[&str] = &[
    "0",
    "5",
    "-1",
    "+5",
    "18446744073709551616",
    "chunked",
    "chunked, identity",
    "identity",
    "close",
    "keep-alive",
    "upgrade",
    "websocket",
    "100-continue",
    "DELETE",
    "example.com",
    "evil.com",
    "127.0.0.1",
    "a\nb",
    "a\rb",
    "\t",
    "",
];
const BODIES: &[&str] = &[
    "",
    "hello",
    "0\r\n\r\n",
    "5\r\nhello\r\n0\r\n\r\n",
    "ffffffffffffffffff\r\n",
    "5;x=y\r\nhello\r\n0\r\n\r\n",
    "5\nhello\n0\n\n",
    "\u{16}\u{3}\u{1}",
];

/// The hosts a request may name (the granted upstream and the sentinel are
/// filled in by port).
fn hosts(f: &Fixture) -> Vec<String> {
    let up = f.upstream.port();
    let sent = f.sentinel.port();
    vec![
        format!("127.0.0.1:{up}"),
        format!("127.0.0.1:{sent}"),
        format!("[::ffff:127.0.0.1]:{up}"),
        format!("localhost:{up}"),
        format!("0x7f.1:{up}"),
        format!("2130706433:{sent}"),
        format!("example.com:{sent}"),
        "example.com".to_owned(),
        "a.example.com:443".to_owned(),
        "evil.com:443".to_owned(),
        format!("127.0.0.1:{up}@127.0.0.1:{sent}"),
        format!("127.0.0.1:0{up}"),
        format!("127.0.0.1:{}", u32::from(up) + 65536),
        "[::1]:443".to_owned(),
        "10.0.0.1:80".to_owned(),
        String::new(),
    ]
}

fn http_input(b: &mut Bytes<'_>, f: &Fixture) -> Vec<u8> {
    let hosts = hosts(f);
    let mut out = String::new();
    let n = 1 + b.below(3);
    for _ in 0..n {
        let method = b.pick(METHODS);
        let host = &hosts[b.below(hosts.len())];
        let target = if method.eq_ignore_ascii_case("CONNECT") && b.below(4) != 0 {
            host.clone()
        } else {
            format!(
                "{}{host}{}",
                b.pick(SCHEMES),
                b.pick(&["/", "/x?y", "", "/../a"])
            )
        };
        out.push_str(&format!("{method} {target} {}\r\n", b.pick(VERSIONS)));
        for _ in 0..b.below(5) {
            let name = b.pick(HEADER_NAMES);
            let value = if b.below(4) == 0 {
                hosts[b.below(hosts.len())].clone()
            } else {
                b.pick(HEADER_VALUES).to_owned()
            };
            let sep = b.pick(&[": ", ":", " : ", ":\t"]);
            let end = b.pick(&["\r\n", "\r\n", "\n", "\r\n "]);
            out.push_str(&format!("{name}{sep}{value}{end}"));
        }
        out.push_str(b.pick(&["\r\n", "\r\n", "\n", ""]));
        out.push_str(b.pick(BODIES));
    }
    out.into_bytes()
}

fn socks_input(b: &mut Bytes<'_>, f: &Fixture) -> Vec<u8> {
    let mut out = vec![5];
    let methods: Vec<u8> = (0..b.below(4))
        .map(|_| b.pick(&[0u8, 1, 2, 0xff]))
        .collect();
    out.push(methods.len() as u8 + u8::from(b.below(8) == 0));
    out.extend(&methods);
    out.extend([b.pick(&[5u8, 5, 4]), b.pick(&[1u8, 1, 2, 3]), 0]);
    let port = match b.below(4) {
        0 => f.sentinel.port(),
        1 => b.byte().into(),
        _ => f.upstream.port(),
    };
    match b.below(4) {
        0 => {
            out.push(1);
            out.extend(b.pick(&[
                [127u8, 0, 0, 1],
                [0, 0, 0, 0],
                [10, 0, 0, 1],
                [93, 184, 216, 34],
            ]));
        }
        1 => {
            out.push(4);
            out.extend(Ipv4Addr::LOCALHOST.to_ipv6_mapped().octets());
        }
        2 => {
            let name = b.pick(&[
                "example.com",
                "127.0.0.1",
                "0x7f.1",
                "localhost",
                "a.example.com",
                "[::1]",
                "",
                "example.com\0",
            ]);
            out.push(3);
            out.push(name.len() as u8 + u8::from(b.below(8) == 0));
            out.extend(name.as_bytes());
        }
        _ => out.push(b.byte()),
    }
    out.extend(port.to_be_bytes());
    out.extend(b.take(32));
    out
}

/// The granted upstream's port and the sentinel's.
pub fn ports() -> (u16, u16) {
    let f = fixture();
    (f.upstream.port(), f.sentinel.port())
}

/// How many connections the proxy's audit says it admitted.
pub fn admitted() -> usize {
    fixture().proxy.audit().iter().filter(|r| r.allowed).count()
}

/// Checks one fuzz input.
pub fn check(data: &[u8]) {
    let f = fixture();
    let mut b = Bytes::new(data);
    let input = match b.byte() % 8 {
        0 => b.rest().to_vec(),
        1..=2 => socks_input(&mut b, f),
        _ => http_input(&mut b, f),
    };
    check_bytes(&input);
}

/// Sends `input` to the proxy and checks the invariants.
pub fn check_bytes(input: &[u8]) {
    let f = fixture();
    let _one = f.lock.lock().unwrap_or_else(|e| e.into_inner());
    let before = f.proxy.audit().len();
    let mut s = TcpStream::connect(f.addr).expect("connect to the proxy");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    // The proxy may close before it read everything: a failed write is
    // part of what is tested, not a failure.
    let _ = s.write_all(input);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut answer = Vec::new();
    if let Err(e) = s.read_to_end(&mut answer) {
        assert!(
            !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "the proxy did not end the connection for {:?}",
            String::from_utf8_lossy(input)
        );
    }
    drop(s);
    let shown = || {
        format!(
            "input {:?} answer {:?}",
            String::from_utf8_lossy(input),
            String::from_utf8_lossy(&answer)
        )
    };
    check_answer(input, &answer).unwrap_or_else(|why| panic!("{why}: {}", shown()));
    // The connection's thread ends after its socket closed: wait for it.
    let start = Instant::now();
    while f.proxy.active() != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "a connection keeps its place: {}",
            shown()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        f.sentinel_hits.load(Ordering::SeqCst),
        0,
        "the sentinel was reached: {}",
        shown()
    );
    let audit = f.proxy.audit();
    let fresh = audit.len().saturating_sub(before.min(audit.len()));
    for r in &audit[audit.len() - fresh..] {
        assert!(
            !r.reason.to_ascii_lowercase().contains("panic"),
            "{r:?}: {}",
            shown()
        );
        if r.allowed {
            assert_eq!(r.address, Some(f.upstream), "{r:?}: {}", shown());
            assert_eq!(r.port, f.upstream.port(), "{r:?}: {}", shown());
        }
    }
}

fn check_answer(input: &[u8], answer: &[u8]) -> Result<(), String> {
    if answer.is_empty() {
        return Ok(());
    }
    if input.first() == Some(&5) {
        let rest = match answer {
            [5, 0, rest @ ..] => rest,
            [5, 0xff] => return Ok(()),
            _ => return Err("not a SOCKS5 method choice".into()),
        };
        if rest.is_empty() {
            return Ok(());
        }
        if rest.len() < 10 || rest[0] != 5 || rest[2] != 0 || rest[3] != 1 {
            return Err("not a SOCKS5 reply".into());
        }
        if rest[1] == 0 {
            let relayed = &rest[10..];
            if !UPSTREAM_ANSWER.starts_with(relayed) {
                return Err("a granted SOCKS5 tunnel relayed what the upstream never sent".into());
            }
        } else if rest.len() != 10 {
            return Err("bytes after a SOCKS5 refusal".into());
        }
        return Ok(());
    }
    if !answer.starts_with(b"HTTP/1.1 ") || answer.len() < 12 {
        return Err("not an HTTP/1.1 status line".into());
    }
    if !answer[9..12].iter().all(u8::is_ascii_digit) {
        return Err("a status line without a code".into());
    }
    Ok(())
}
