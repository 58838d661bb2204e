//! The proxy served on a host loopback listener, attacked with raw
//! requests: plain-HTTP smuggling (pipelined requests, `Upgrade: h2c`,
//! websocket upgrades), the connection cap and the idle timeout. The same
//! proxy inside a command's network namespace is tested by the facade
//! (crates/sandgate/tests/proxy.rs).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{Protocol, Proxy, ProxyConfig};

mod support;
use support::{exchange, serve, server, socks, wait_until, Server};

fn proxy(allow: &[String], tune: impl FnOnce(&mut ProxyConfig)) -> (Proxy, SocketAddr) {
    let allow = allow.iter().map(|a| NetEntry::parse(a).unwrap()).collect();
    let mut config = ProxyConfig::new(Rules::new(Mode::Restricted, allow, true));
    tune(&mut config);
    let p = Proxy::new(config);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = p.serve(l.into()).unwrap();
    (p, addr)
}

#[test]
fn a_pipelined_request_never_reaches_the_target() {
    let granted = server("127.0.0.2");
    let other = server("127.0.0.3");
    let (p, addr) = proxy(&[granted.addr.to_string()], |_| {});
    let req = format!(
        "POST http://{g}/a HTTP/1.1\r\nHost: {g}\r\nContent-Length: 4\r\n\r\nbody\
         GET http://{o}/b HTTP/1.1\r\nHost: {o}\r\n\r\n\
         GET http://{g}/c HTTP/1.1\r\nHost: {g}\r\n\r\n",
        g = granted.addr,
        o = other.addr
    );
    let answer = exchange(addr, req.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    wait_until("the proxy to end the connection", || p.active() == 0);
    let got = String::from_utf8_lossy(&granted.got.lock().unwrap()).into_owned();
    assert!(got.starts_with("POST /a HTTP/1.1\r\nHost: "), "{got}");
    assert!(got.contains("Connection: close\r\n"), "{got}");
    assert!(got.ends_with("\r\n\r\nbody"), "{got}");
    assert!(!got.contains("/b") && !got.contains("/c"), "{got}");
    assert_eq!(other.hits.load(Ordering::SeqCst), 0);
    let audit = p.audit();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].protocol, Protocol::Http);
    assert!(audit[0].allowed);
    p.stop();
}

#[test]
fn h2c_and_other_upgrades_are_refused_and_websocket_only_to_granted_hosts() {
    let granted = server("127.0.0.2");
    let other = server("127.0.0.3");
    let (p, addr) = proxy(&[granted.addr.to_string()], |_| {});
    let g = granted.addr;
    for (req, want) in [
        (
            format!(
                "GET http://{g}/ HTTP/1.1\r\nHost: {g}\r\nConnection: Upgrade, HTTP2-Settings\r\n\
                 Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"
            ),
            "HTTP/1.1 403",
        ),
        (
            format!("GET http://{g}/ HTTP/1.1\r\nHost: {g}\r\nUpgrade: TLS/1.2\r\n\r\n"),
            "HTTP/1.1 403",
        ),
        (
            format!(
                "GET http://{o}/ HTTP/1.1\r\nHost: {o}\r\nConnection: Upgrade\r\n\
                 Upgrade: websocket\r\n\r\n",
                o = other.addr
            ),
            "HTTP/1.1 403",
        ),
        (
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_owned(),
            "HTTP/1.1 400",
        ),
    ] {
        let answer = exchange(addr, req.as_bytes());
        assert!(answer.starts_with(want), "{req:?}: {answer}");
    }
    assert_eq!(granted.hits.load(Ordering::SeqCst), 0);
    assert_eq!(other.hits.load(Ordering::SeqCst), 0);
    // A websocket upgrade to the granted host is relayed as one.
    let answer = exchange(
        addr,
        format!(
            "GET http://{g}/ws HTTP/1.1\r\nHost: {g}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let got = String::from_utf8_lossy(&granted.got.lock().unwrap()).into_owned();
    assert!(got.contains("Upgrade: websocket\r\n"), "{got}");
    assert_eq!(granted.hits.load(Ordering::SeqCst), 1);
    p.stop();
}

#[test]
fn connections_past_the_cap_are_closed_and_audited() {
    let granted = server("127.0.0.2");
    let (p, addr) = proxy(&[granted.addr.to_string()], |c| c.max_connections = 2);
    // Two clients that say nothing hold both places.
    let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
    wait_until("two connections served", || p.active() == 2);
    let mut third = TcpStream::connect(addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(third.read(&mut buf).unwrap_or(0), 0, "the third was served");
    wait_until("the refusal audited", || {
        p.audit().iter().any(|r| r.reason.contains("cap of 2"))
    });
    for s in &held {
        s.shutdown(Shutdown::Both).unwrap();
    }
    drop(held);
    wait_until("the places freed", || p.active() == 0);
    let answer = exchange(
        addr,
        format!(
            "GET http://{g}/ HTTP/1.1\r\nHost: {g}\r\n\r\n",
            g = granted.addr
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    p.stop();
}

#[test]
fn an_idle_tunnel_is_closed() {
    let granted = server("127.0.0.2");
    let (p, addr) = proxy(&[granted.addr.to_string()], |c| {
        c.idle_timeout = Duration::from_millis(200)
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The entry names a port other than 80 and 443: an opaque tunnel,
    // dialled at once.
    write!(s, "CONNECT {} HTTP/1.1\r\n\r\n", granted.addr).unwrap();
    let mut head = [0u8; 39];
    s.read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"HTTP/1.1 200"));
    // Nothing moves: the proxy ends the tunnel (EOF, not the 10 s
    // timeout of this read).
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    wait_until("the tunnel ended", || p.active() == 0);
    let audit = p.audit();
    assert!(
        audit[0].allowed && audit[0].protocol == Protocol::Connect,
        "{audit:?}"
    );
    p.stop();
}

#[test]
fn stop_ends_every_connection() {
    let granted = server("127.0.0.2");
    let (p, addr) = proxy(&[granted.addr.to_string()], |_| {});
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "CONNECT {} HTTP/1.1\r\n\r\n", granted.addr).unwrap();
    let mut head = [0u8; 39];
    s.read_exact(&mut head).unwrap();
    p.stop();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    wait_until("the connection ended", || p.active() == 0);
    // The listener is closed once stop returns.
    assert!(TcpStream::connect(addr).is_err());
}

/// A server that speaks first (`220 ready`), then keeps what it receives.
fn greeter() -> Server {
    serve("127.0.0.2", |mut conn, got| {
        let _ = conn.write_all(b"220 ready\r\n");
        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = conn.read(&mut chunk) {
            got.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    })
}

/// The first flight of a TLS client naming `name`.
fn client_hello(name: &str) -> Vec<u8> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), name.to_owned().try_into().unwrap())
            .unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

#[test]
fn an_opaque_tunnel_lets_the_server_speak_first_but_judges_a_client_hello() {
    let g = greeter();
    // The entry names a port other than 80 and 443: the protocol is the
    // operator's, dialled at once.
    let (p, addr) = proxy(&[g.addr.to_string()], |_| {});
    let open = || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "CONNECT {} HTTP/1.1\r\n\r\n", g.addr).unwrap();
        let mut head = [0u8; 39];
        s.read_exact(&mut head).unwrap();
        assert!(head.starts_with(b"HTTP/1.1 200"));
        // The server's greeting arrives before the client says anything.
        let mut greeting = [0u8; 11];
        s.read_exact(&mut greeting).unwrap();
        assert_eq!(&greeting, b"220 ready\r\n");
        s
    };
    // Plain bytes pass.
    let mut s = open();
    s.write_all(b"EHLO me\r\n").unwrap();
    wait_until("the bytes relayed", || {
        g.got.lock().unwrap().ends_with(b"EHLO me\r\n")
    });
    drop(s);
    // A ClientHello naming another server than the tunnel's host (an
    // address: no name at all is admitted) is refused; not a byte of it
    // reaches the server.
    let before = g.got.lock().unwrap().len();
    let mut s = open();
    s.write_all(&client_hello("evil.example")).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    wait_until("the tunnel ended", || p.active() == 0);
    assert_eq!(g.got.lock().unwrap().len(), before);
    assert_eq!(g.hits.load(Ordering::SeqCst), 2);
    let audit = p.audit();
    let last = audit.last().unwrap();
    assert!(
        !last.allowed && last.reason.contains("evil.example"),
        "{audit:?}"
    );
    p.stop();
}

#[test]
fn a_client_waiting_for_100_continue_gets_it_and_its_body_is_relayed() {
    let granted = server("127.0.0.2");
    let (p, addr) = proxy(&[granted.addr.to_string()], |_| {});
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "PUT http://{g}/up HTTP/1.1\r\nHost: {g}\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
        g = granted.addr
    )
    .unwrap();
    let mut cont = [0u8; 25];
    s.read_exact(&mut cont).unwrap();
    assert_eq!(&cont, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"hello").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    let got = String::from_utf8_lossy(&granted.got.lock().unwrap()).into_owned();
    assert!(!got.to_ascii_lowercase().contains("expect:"), "{got}");
    assert!(got.ends_with("\r\n\r\nhello"), "{got}");
    p.stop();
}

/// A forwarder to a literal on a web port (an entry without a port, or
/// with 80 or 443) judges the client's first flight as a `CONNECT` to the
/// same literal does: plain text only with `allow_http`, and a TLS
/// ClientHello that names no server. It used to relay whatever came, so a
/// program that ignores proxies could send plain HTTP where the policy
/// refuses it, or a ClientHello fronting another name, by dialling the
/// forwarder instead of the proxy.
#[test]
fn a_forwarder_judges_the_first_flight_as_a_tunnel_does() {
    let target = server("127.0.0.2");
    // trusted_host: a bare loopback literal grants loopback on every port,
    // so the target's (unprivileged) port is a web port here, as 443 is
    // for an entry `203.0.113.7:443`.
    let allow = vec![NetEntry::parse("127.0.0.2").unwrap()];
    let p = Proxy::new(ProxyConfig::new(Rules::new(
        Mode::TrustedHost,
        allow,
        false,
    )));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let fwd = p.forward(l.into(), target.addr).unwrap();
    let send = |bytes: &[u8]| {
        let mut s = TcpStream::connect(fwd).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(bytes).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        wait_until("the connection ended", || p.active() == 0);
        p.audit().pop().unwrap()
    };
    // Plain text, net.allow_http false: refused, nothing dialled.
    let r = send(b"GET /secret HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n");
    assert!(
        !r.allowed && r.protocol == Protocol::Forward && r.reason.contains("allow_http"),
        "{r:?}"
    );
    // A ClientHello naming a server, to a literal: domain fronting.
    let r = send(&client_hello("evil.example"));
    assert!(!r.allowed && r.reason.contains("evil.example"), "{r:?}");
    assert_eq!(target.hits.load(Ordering::SeqCst), 0);
    assert!(target.got.lock().unwrap().is_empty());
    // A ClientHello that names no server (the client dials an address)
    // passes, and reaches the target whole.
    let hello = client_hello("127.0.0.2");
    std::thread::spawn({
        let hello = hello.clone();
        move || {
            let mut s = TcpStream::connect(fwd).unwrap();
            s.write_all(&hello).unwrap();
            std::thread::sleep(Duration::from_secs(3));
        }
    });
    wait_until("the ClientHello relayed", || {
        target.got.lock().unwrap().as_slice() == hello.as_slice()
    });
    p.stop();
}

/// `handshake_timeout` is how long a client has to send its request, and a
/// tunnel its first flight, however it spreads the bytes: it used to bound
/// each read only, so a client sending a byte just inside it held a place
/// of the connection cap for as long as it liked (a 16 KiB head, or a
/// 64 KiB ClientHello, at a byte a timeout).
#[test]
fn a_client_that_trickles_its_handshake_meets_the_handshake_timeout() {
    let allow = vec![NetEntry::parse("a.test").unwrap()];
    let mut config = ProxyConfig::new(Rules::new(Mode::Restricted, allow, false));
    config.handshake_timeout = Duration::from_millis(300);
    // A documentation address: public, and never dialled (no first flight
    // ever completes).
    config.resolver = Arc::new(
        |_: &str, _: u16, _: Duration| -> std::io::Result<Vec<std::net::IpAddr>> {
            Ok(vec!["192.0.2.1".parse().unwrap()])
        },
    );
    let p = Proxy::new(config);
    let addr = p
        .serve(TcpListener::bind("127.0.0.1:0").unwrap().into())
        .unwrap();
    let hello = client_hello("a.test");
    let cases: [(&str, &[u8], &[u8]); 3] = [
        (
            "a CONNECT head",
            b"",
            b"CONNECT a.test:443 HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaa",
        ),
        (
            "a SOCKS5 greeting",
            b"",
            &[5, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
        ),
        (
            "a tunnel's ClientHello",
            b"CONNECT a.test:443 HTTP/1.1\r\n\r\n",
            &hello,
        ),
    ];
    for (what, at_once, trickled) in cases {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(at_once).unwrap();
        let start = Instant::now();
        // A byte every 100 ms for 1.5 s: five timeouts' worth, each read
        // well inside one.
        for b in trickled.iter().take(15) {
            if s.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            p.active(),
            0,
            "{what} trickled for {:?} still holds a connection",
            start.elapsed()
        );
        let audit = p.audit();
        assert!(!audit.last().unwrap().allowed, "{what}: {audit:?}");
    }
    p.stop();
}

/// A server that accepts and then never reads: whatever is sent to it
/// fills the socket buffers and then blocks the sender.
fn sink() -> (SocketAddr, Arc<Mutex<Vec<TcpStream>>>) {
    let listener = TcpListener::bind(("127.0.0.2", 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let h = Arc::clone(&held);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            h.lock().unwrap().push(conn);
        }
    });
    (addr, held)
}

/// A plain request whose target never reads its body: once the socket
/// buffers are full nothing moves, and the idle timeout ends the
/// connection. The proxy's writes to the target used to have no timeout,
/// so such a connection held its place under the cap until the proxy
/// stopped.
#[test]
fn a_target_that_never_reads_a_body_meets_the_idle_timeout() {
    let (target, _held) = sink();
    let (p, addr) = proxy(&[target.to_string()], |c| {
        c.idle_timeout = Duration::from_millis(300)
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "POST http://{target}/up HTTP/1.1\r\nHost: {target}\r\nContent-Length: 1000000000\r\n\r\n"
    )
    .unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        while s.write_all(&chunk).is_ok() {}
    });
    wait_until("the proxy to end the stalled connection", || {
        p.active() == 0
    });
    writer.join().unwrap();
    p.stop();
}

/// A listener at `ip:port` whose accept queue is full: a connection to it
/// is never answered (its SYN is dropped) until the connect times out.
fn unanswering(ip: &str, port: u16) -> (rustix::fd::OwnedFd, Vec<TcpStream>) {
    use rustix::net::{AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    let addr: SocketAddr = format!("{ip}:{port}").parse().unwrap();
    rustix::net::bind(&fd, &addr).unwrap();
    rustix::net::listen(&fd, 0).unwrap();
    let fillers = (0..2)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok())
        .collect();
    (fd, fillers)
}

/// A name that resolves to many addresses, none of which answers, is
/// given up on once the connect timeout has passed, not once per address:
/// the timeout is spread over the addresses. The proxy used to try each
/// for the whole timeout, so twenty dead addresses held the connection
/// (and its place under the cap) twenty times as long, and a resolver
/// answering thousands held it for hours.
#[test]
fn many_dead_addresses_are_given_up_on_within_the_connect_timeout() {
    let first = TcpListener::bind("127.0.0.2:0").unwrap();
    let port = first.local_addr().unwrap().port();
    drop(first);
    let mut held = Vec::new();
    let mut addrs = Vec::new();
    for i in 2..22 {
        let ip = format!("127.0.0.{i}");
        held.push(unanswering(&ip, port));
        addrs.push(ip.parse().unwrap());
    }
    let allow = vec![NetEntry::parse("localhost").unwrap()];
    let mut config = ProxyConfig::new(Rules::new(Mode::TrustedHost, allow, true));
    config.connect_timeout = Duration::from_millis(400);
    config.resolver = Arc::new(move |_: &str, _: u16, _: Duration| Ok(addrs.clone()));
    let p = Proxy::new(config);
    let addr = p
        .serve(TcpListener::bind("127.0.0.1:0").unwrap().into())
        .unwrap();
    let start = Instant::now();
    let answer = exchange(
        addr,
        format!("GET http://localhost:{port}/ HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes(),
    );
    let took = start.elapsed();
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(answer.contains("of 20 addresses"), "{answer}");
    assert!(
        took < Duration::from_millis(2000),
        "the proxy dialled for {took:?} with a connect timeout of 400ms"
    );
    p.stop();
}

/// An accept error the loop did not name as transient ended it: the
/// listener stayed open, so the command's clients connected (the kernel
/// completes the handshake) and then waited forever, and nothing said why.
/// Here the listener is shut down under the blocked `accept` (EINVAL) and
/// listens again: the loop must back off, keep accepting, and audit the
/// error.
#[test]
fn an_unexpected_accept_error_never_ends_the_service() {
    let granted = server("127.0.0.2");
    let allow = vec![NetEntry::parse(&granted.addr.to_string()).unwrap()];
    let p = Proxy::new(ProxyConfig::new(Rules::new(Mode::Restricted, allow, true)));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let ours = listener.try_clone().unwrap();
    p.serve(listener.into()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    rustix::net::shutdown(&ours, rustix::net::Shutdown::Both).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    rustix::net::listen(&ours, 16).unwrap();
    let addr = ours.local_addr().unwrap();
    let req = format!(
        "GET http://{g}/a HTTP/1.1\r\nHost: {g}\r\n\r\n",
        g = granted.addr
    );
    let answer = exchange(addr, req.as_bytes());
    assert!(
        answer.starts_with("HTTP/1.1 200 OK"),
        "the proxy stopped accepting: {answer:?}"
    );
    let audit = p.audit();
    assert!(
        audit
            .iter()
            .any(|r| !r.allowed && r.reason.contains("accepting a connection failed")),
        "{audit:?}"
    );
    p.stop();
}

/// A plain request whose client half-closes once it is sent
/// (`shutdown(SHUT_WR)`, as `nc -N` and scripts reading to EOF do), to a
/// target that answers and then keeps its connection open until it reads
/// the end of the request stream (5 s at most). The proxy passes the
/// client's half close on: the target sees the end while the client still
/// waits, closes, and the client gets its EOF. The proxy used to stop
/// reading the client once the body was in, so it never saw the half
/// close: the target never saw an end and the connection lasted until
/// the target gave up (or the proxy's idle timeout, here a minute).
#[test]
fn proxy9_a_clients_half_close_after_a_plain_request_reaches_the_target() {
    let listener = TcpListener::bind(("127.0.0.2", 0)).unwrap();
    let target = listener.local_addr().unwrap();
    let upstream = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut chunk).unwrap();
            assert!(n > 0, "the request never came whole");
            got.extend_from_slice(&chunk[..n]);
        }
        conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            .unwrap();
        // Ignores `Connection: close`: holds the connection until the
        // request stream ends (a read of 0), 5 s at most.
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let saw_end = matches!(conn.read(&mut chunk), Ok(0));
        (String::from_utf8_lossy(&got).into_owned(), saw_end)
    });
    let (p, addr) = proxy(&[target.to_string()], |c| {
        c.idle_timeout = Duration::from_secs(60)
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET http://{target}/x HTTP/1.1\r\nHost: {target}\r\n\r\n"
    )
    .unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.ends_with("\r\n\r\nok\n"), "{answer}");
    let (request, saw_end) = upstream.join().unwrap();
    assert!(request.starts_with("GET /x HTTP/1.1\r\n"), "{request}");
    assert!(
        saw_end,
        "the target never saw the client's half close: the connection ended only when the \
         target gave up"
    );
    wait_until("the connection ended", || p.active() == 0);
    p.stop();
}

/// Plain-HTTP requests that a server could frame otherwise than the proxy
/// (two lengths, a length and a coding, a folded or space-named header, a
/// line break or other control byte inside a line, a signed or listed
/// length) or whose head is too long are refused with a 4xx naming what,
/// and the granted target behind them is never connected to.
#[test]
fn proxy9_plain_requests_framed_two_ways_reach_no_target() {
    let granted = server("127.0.0.2");
    let (p, addr) = proxy(&[granted.addr.to_string()], |_| {});
    let g = granted.addr;
    let line = format!("POST http://{g}/a HTTP/1.1\r\nHost: {g}\r\n");
    let huge = format!("X-Big: {}\r\n", "a".repeat(20 * 1024));
    for (extra, says) in [
        (
            "Content-Length: 4\r\nContent-Length: 5\r\n",
            "more than one Content-Length",
        ),
        (
            "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
            "Content-Length",
        ),
        ("Transfer-Encoding: chunked\r\n", "chunked uploads"),
        (
            "Transfer-Encoding : chunked\r\nContent-Length: 4\r\n",
            "malformed header name",
        ),
        (
            "Content-Length: 4\r\n Transfer-Encoding: chunked\r\n",
            "folded",
        ),
        (
            "Content-Length: 4\r\nX-A: b\rTransfer-Encoding: chunked\r\n",
            "control character",
        ),
        (
            "Content-Length: 4\r\nX-A: b\nTransfer-Encoding: chunked\r\n",
            "control character",
        ),
        ("Content-Length: 4\r\nX-A: b\0c\r\n", "control character"),
        ("Content Length: 4\r\n", "malformed header name"),
        ("Content-Length: +4\r\n", "malformed Content-Length"),
        ("Content-Length: 4, 4\r\n", "malformed Content-Length"),
        ("Content-Length: 0x4\r\n", "malformed Content-Length"),
        (huge.as_str(), "longer than"),
    ] {
        let answer = exchange(addr, format!("{line}{extra}\r\nbody").as_bytes());
        assert!(
            answer.starts_with("HTTP/1.1 4") && answer.contains(says),
            "{}: {answer}",
            extra.escape_debug()
        );
    }
    for target in [format!("http://{g}/a\nGET"), format!("http://{g}/a\rb")] {
        let answer = exchange(
            addr,
            format!("GET {target} HTTP/1.1\r\nHost: {g}\r\n\r\n").as_bytes(),
        );
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    }
    assert_eq!(granted.hits.load(Ordering::SeqCst), 0);
    // The control: a request framed one way reaches it.
    let answer = exchange(
        addr,
        format!("{line}Content-Length: 4\r\n\r\nbody").as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(granted.hits.load(Ordering::SeqCst), 1);
    p.stop();
}

/// An address of this machine outside loopback that restricted mode
/// admits (the source address towards a public one; a UDP `connect` sends
/// nothing), or `None`.
fn local_public_v4() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9")
        .or_else(|_| s.connect("8.8.8.8:53"))
        .ok()?;
    let ip = s.local_addr().ok()?.ip();
    (sandgate_netguard::classify(ip) == sandgate_netguard::AddrClass::Public).then_some(ip)
}

/// SOCKS5 with remote resolution: the proxy resolves the name once per
/// connection and dials what it checked; an answer that holds one refused
/// address (a private one beside a public one, a loopback one for a name)
/// is refused whole, with no connection anywhere; and literals spelled in
/// the domain-name form or as IPv4-mapped IPv6 are judged as the
/// addresses they are, with no lookup.
#[test]
fn proxy9_socks5_names_are_resolved_once_and_every_address_checked() {
    let Some(ip) = local_public_v4() else {
        eprintln!(
            "skipped: this machine has no address outside loopback that restricted mode admits"
        );
        return;
    };
    let target = server(&ip.to_string());
    let port = target.addr.port();
    let loopback = server("127.0.0.2");
    let answers = Arc::new(Mutex::new(std::collections::VecDeque::from(vec![
        vec![ip],
        vec![ip, "10.0.0.1".parse().unwrap()],
        vec!["127.0.0.2".parse().unwrap()],
    ])));
    let asked = Arc::new(AtomicUsize::new(0));
    let (a, n) = (Arc::clone(&answers), Arc::clone(&asked));
    let resolver =
        move |host: &str, _: u16, _: Duration| -> std::io::Result<Vec<std::net::IpAddr>> {
            assert_eq!(host, "rebind.example");
            n.fetch_add(1, Ordering::SeqCst);
            Ok(a.lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| vec!["0.0.0.0".parse().unwrap()]))
        };
    // The loopback server's port is granted to a name: its literals
    // below are not.
    let lp = loopback.addr.port();
    let grants = [
        format!("rebind.example:{port}"),
        format!("other.example:{lp}"),
    ];
    let (p, addr) = proxy(&grants, |c| c.resolver = Arc::new(resolver));
    let (code, mut s) = socks(addr, 3, b"rebind.example", port);
    assert_eq!(code, 0);
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut answer = [0u8; 15];
    s.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200 OK");
    drop(s);
    for _ in 0..2 {
        let (code, _) = socks(addr, 3, b"rebind.example", port);
        assert_eq!(
            code, 2,
            "a refused address in the answer must refuse the target"
        );
    }
    assert_eq!(asked.load(Ordering::SeqCst), 3, "one lookup per connection");
    // Literals: no lookup, judged as addresses (loopback is not granted).
    let v4 = b"127.0.0.2";
    for (atyp, host) in [
        (3u8, v4.to_vec()),
        (3, b"2130706434".to_vec()),
        (3, b"[::ffff:127.0.0.2]".to_vec()),
        (1, vec![127, 0, 0, 2]),
        (
            4,
            "::ffff:127.0.0.2"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
                .to_vec(),
        ),
    ] {
        let (code, _) = socks(addr, atyp, &host, lp);
        assert_eq!(code, 2, "{atyp} {}", host.escape_ascii());
    }
    assert_eq!(asked.load(Ordering::SeqCst), 3);
    assert_eq!(loopback.hits.load(Ordering::SeqCst), 0);
    wait_until("the connections ended", || p.active() == 0);
    let audit = p.audit();
    let dialled: Vec<_> = audit.iter().filter_map(|r| r.address).collect();
    assert_eq!(dialled, vec![SocketAddr::new(ip, port)], "{audit:?}");
    assert!(
        audit.iter().filter(|r| r.port == lp).count() == 5
            && audit
                .iter()
                .filter(|r| r.port == lp)
                .all(|r| !r.allowed && r.address.is_none()),
        "{audit:?}"
    );
    assert_eq!(target.hits.load(Ordering::SeqCst), 1);
    p.stop();
}

/// A TLS alert record of warning level (`user_canceled`): Go's TLS server
/// (`crypto/tls`, in Caddy, Traefik and most Go services) drops a warning
/// alert that comes before the ClientHello and reads the ClientHello
/// after it, server name and all.
const WARNING_ALERT: &[u8] = &[0x15, 0x03, 0x01, 0x00, 0x02, 0x01, 0x5a];

/// A tunnel's first flight is judged by its first byte: a ClientHello
/// (0x16) must name the tunnel's host. A TLS record of another kind before
/// the ClientHello (a warning alert, which Go's TLS server skips) made the
/// first byte 0x15, and the ClientHello behind it, naming another server,
/// reached the target unjudged: on an opaque port, on a web port where
/// plain text is admitted, and through a forwarder.
#[test]
fn proxy20_a_tls_record_before_the_client_hello_cannot_hide_its_server_name() {
    let mut fronted = WARNING_ALERT.to_vec();
    fronted.extend(client_hello("evil.example"));

    // An opaque port (an entry naming a port other than 80 and 443).
    let g = greeter();
    let (p, addr) = proxy(&[g.addr.to_string()], |_| {});
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "CONNECT {} HTTP/1.1\r\n\r\n", g.addr).unwrap();
    let mut head = [0u8; 39 + 11];
    s.read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"HTTP/1.1 200"));
    s.write_all(&fronted).unwrap();
    // Refused, the tunnel ends at once; relayed, it would last until the
    // server's read timeout: 3 s tell them apart.
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = s.read_to_end(&mut Vec::new());
    let got = g.got.lock().unwrap().clone();
    assert!(
        got.is_empty(),
        "the opaque port's server got {} bytes of a ClientHello naming evil.example",
        got.len()
    );
    wait_until("the tunnel ended", || p.active() == 0);
    let last = p.audit().pop().unwrap();
    assert!(!last.allowed, "{last:?}");
    p.stop();

    // A web port (a bare loopback literal grants every port as one) with
    // plain text admitted, by CONNECT and through a forwarder.
    let target = server("127.0.0.2");
    let allow = vec![NetEntry::parse("127.0.0.2").unwrap()];
    let p = Proxy::new(ProxyConfig::new(Rules::new(Mode::TrustedHost, allow, true)));
    let addr = p
        .serve(TcpListener::bind("127.0.0.1:0").unwrap().into())
        .unwrap();
    let fwd = p
        .forward(
            TcpListener::bind("127.0.0.1:0").unwrap().into(),
            target.addr,
        )
        .unwrap();
    let send = |to: SocketAddr, connect: bool| {
        let mut s = TcpStream::connect(to).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        if connect {
            write!(s, "CONNECT {} HTTP/1.1\r\n\r\n", target.addr).unwrap();
        }
        s.write_all(&fronted).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
        let got = target.got.lock().unwrap().len();
        assert_eq!(
            got, 0,
            "a web port's server got {got} bytes of a ClientHello naming evil.example \
             (connect: {connect})"
        );
        wait_until("the connection ended", || p.active() == 0);
        p.audit().pop().unwrap()
    };
    for (to, connect) in [(addr, true), (fwd, false)] {
        let r = send(to, connect);
        assert!(!r.allowed, "{r:?}");
    }
    // Plain text still passes where it is admitted.
    let mut s = TcpStream::connect(fwd).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n")
        .unwrap();
    let mut answer = [0u8; 12];
    s.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    p.stop();
}

/// A SOCKS5 request whose version byte is not 5 is refused with nothing
/// dialled, and its audit record says so: it used to say that the
/// `CONNECT` command (1) was not supported, naming the command the proxy
/// does support as the reason.
#[test]
fn proxy20_a_socks5_request_of_another_version_is_audited_as_such() {
    let target = server("127.0.0.2");
    let (p, addr) = proxy(&[target.addr.to_string()], |_| {});
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut hello = [0u8; 2];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(hello, [5, 0]);
    let mut req = vec![4, 1, 0, 1, 127, 0, 0, 2];
    req.extend_from_slice(&target.addr.port().to_be_bytes());
    s.write_all(&req).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert_ne!(reply.get(1), Some(&0), "{reply:?}");
    wait_until("the connection ended", || p.active() == 0);
    let r = p.audit().pop().unwrap();
    assert!(!r.allowed && r.protocol == Protocol::Socks5, "{r:?}");
    assert!(
        r.reason.contains("version 4") && !r.reason.contains("command"),
        "{r:?}"
    );
    assert_eq!(target.hits.load(Ordering::SeqCst), 0);
    p.stop();
}

/// On an opaque port the client's first bytes are judged whenever they
/// come, however long the server talks first: the proxy used to wait for
/// them one idle timeout, then relay whatever came after unjudged, so a
/// client that stayed silent while a server sent something now and then
/// (a greeting, a keepalive) got a ClientHello naming another server
/// through.
#[test]
fn proxy20_a_client_silent_while_the_server_talks_is_still_judged() {
    let listener = TcpListener::bind(("127.0.0.2", 0)).unwrap();
    let target = listener.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = Arc::clone(&got);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let g = Arc::clone(&g);
            let talker = conn.try_clone().unwrap();
            // A tick every 200 ms: the connection is never idle.
            std::thread::spawn(move || {
                while (&talker).write_all(b"tick\n").is_ok() {
                    std::thread::sleep(Duration::from_millis(200));
                }
            });
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = (&conn).read(&mut chunk) {
                    g.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            });
        }
    });
    let (p, addr) = proxy(&[target.to_string()], |c| {
        c.idle_timeout = Duration::from_secs(1);
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "CONNECT {target} HTTP/1.1\r\n\r\n").unwrap();
    // Silent for more than the idle timeout, reading the server's ticks.
    let until = Instant::now() + Duration::from_millis(2500);
    let mut tick = [0u8; 64];
    while Instant::now() < until {
        assert!(s.read(&mut tick).unwrap() > 0, "the tunnel ended");
    }
    s.write_all(&client_hello("evil.example")).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let n = got.lock().unwrap().len();
    assert_eq!(
        n, 0,
        "the server got {n} bytes of a ClientHello naming evil.example"
    );
    let _ = s.shutdown(Shutdown::Both);
    wait_until("the tunnel ended", || p.active() == 0);
    let r = p.audit().pop().unwrap();
    assert!(!r.allowed && r.reason.contains("evil.example"), "{r:?}");
    p.stop();
}

/// A target refused as malformed is audited without the user and password
/// it carried (`user:pw@host`): the connection's record, kept and handed to
/// the executor's audit sink, never holds a credential.
#[test]
fn audit20_a_refused_target_s_user_and_password_never_reach_the_audit() {
    let (p, addr) = proxy(&["localhost".to_owned()], |_| {});
    let answer = exchange(
        addr,
        b"CONNECT alice:Pw0rdSecret@localhost:443 HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let answer = exchange(
        addr,
        b"GET http://alice:Pw0rdSecret@localhost/x HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    wait_until("two records", || p.audit().len() == 2);
    let audit = p.audit();
    assert!(audit.iter().all(|r| !r.allowed), "{audit:?}");
    // What was asked for is still named: the host and port after the `@`.
    assert_eq!(
        (audit[0].host.as_str(), audit[0].port),
        ("localhost", 443),
        "{audit:?}"
    );
    assert_eq!(
        (audit[1].host.as_str(), audit[1].port),
        ("localhost", 80),
        "{audit:?}"
    );
    assert!(
        audit.iter().all(|r| r.reason.contains("user or password")),
        "{audit:?}"
    );
    assert!(
        !format!("{audit:?}").contains("Pw0rdSecret"),
        "a credential in the audit: {audit:?}"
    );
    assert!(
        !answer.contains("Pw0rdSecret"),
        "the refusal echoes the credential: {answer}"
    );
}
