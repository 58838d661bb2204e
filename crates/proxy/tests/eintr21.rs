//! TLS interception under a host that takes signals without
//! `SA_RESTART`: a thread sends SIGALRM to every other thread of this
//! process whose name begins `sandgate-` (the proxy's) every millisecond,
//! so every blocking read of the proxy may answer EINTR (the test's own
//! client and upstream are spared: their reads are not the proxy's). The storm is process-wide, so these
//! tests live in a binary of their own; the helpers are those of
//! `intercept.rs`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::{PrivateKeyDer, ServerName};
use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{
    roots_from_pem, CertAuthority, Injection, Intercept, Proxy, ProxyConfig, RequestMatch,
    RequestRule, Secret,
};

const SECRET: &str = "ghp_realSecretValue0123456789";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A test CA and a certificate for `localhost` signed by it.
fn test_ca() -> (String, rustls::ServerConfig) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (ca_cert.pem(), config)
}

/// A loopback TLS upstream: counts connections, keeps every request head
/// it got, answers each with its path as the body.
struct Upstream {
    addr: SocketAddr,
    conns: Arc<AtomicUsize>,
    /// Connections whose TLS handshake resumed an earlier session.
    resumed: Arc<AtomicUsize>,
    /// Connections that negotiated AES-128-GCM.
    aes128: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

fn upstream(config: rustls::ServerConfig) -> Upstream {
    upstream_with(config, false)
}

/// `close_after`: the upstream closes each connection after its first
/// answer, without saying so (as a server whose keep-alive timer ran out).
/// The next request head read from `r` into `buf` (without its blank
/// line, which leaves `buf` with it); `None` when the stream ends first.
fn next_head<R: Read>(r: &mut R, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = buf[..end].to_vec();
            buf.drain(..end + 4);
            return Some(head);
        }
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn upstream_with(config: rustls::ServerConfig, close_after: bool) -> Upstream {
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let resumed = Arc::new(AtomicUsize::new(0));
    let aes128 = Arc::new(AtomicUsize::new(0));
    let (c, h, r, a) = (
        Arc::clone(&conns),
        Arc::clone(&heads),
        Arc::clone(&resumed),
        Arc::clone(&aes128),
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            c.fetch_add(1, Ordering::SeqCst);
            let (config, h, r, a) = (
                Arc::clone(&config),
                Arc::clone(&h),
                Arc::clone(&r),
                Arc::clone(&a),
            );
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Whether this connection's first request was seen.
                let mut seen = false;
                loop {
                    let Some(head) = next_head(&mut tls, &mut buf) else {
                        return;
                    };
                    let mut head = String::from_utf8_lossy(&head).into_owned();
                    if !seen && tls.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                        r.fetch_add(1, Ordering::SeqCst);
                    }
                    let suite = tls.conn.negotiated_cipher_suite().map(|s| s.suite());
                    if !seen && suite == Some(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256) {
                        a.fetch_add(1, Ordering::SeqCst);
                    }
                    seen = true;
                    if head
                        .to_ascii_lowercase()
                        .contains("transfer-encoding: chunked")
                    {
                        // Keep the chunked body (up to its last chunk) with the head.
                        let end = loop {
                            if let Some(i) = buf.windows(5).position(|w| w == b"0\r\n\r\n") {
                                break i + 5;
                            }
                            match tls.read(&mut chunk) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        head.push_str("\nBODY:");
                        head.push_str(&String::from_utf8_lossy(&buf[..end]));
                        buf.drain(..end);
                    }
                    let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                    let body = if path == "/big" {
                        "x".repeat(1 << 20)
                    } else {
                        format!("path {path}\n")
                    };
                    h.lock().unwrap().push(head);
                    let _ = write!(
                        tls,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.flush();
                    if close_after {
                        return;
                    }
                }
            });
        }
    });
    Upstream {
        addr,
        conns,
        resumed,
        aes128,
        heads,
    }
}

fn target(port: u16, methods: &[&str], prefixes: &[&str]) -> RequestMatch {
    RequestMatch {
        host: "localhost".into(),
        port: Some(port),
        methods: methods.iter().map(|s| (*s).to_owned()).collect(),
        path_prefixes: prefixes.iter().map(|s| (*s).to_owned()).collect(),
    }
}

struct Setup {
    proxy: Proxy,
    addr: SocketAddr,
    /// The proxy CA's PEM, which the client trusts.
    ca: String,
}

fn setup(test_ca_pem: &str, injections: Vec<Injection>, rules: Vec<RequestRule>) -> Setup {
    setup_http(test_ca_pem, injections, rules, false)
}

fn setup_http(
    test_ca_pem: &str,
    injections: Vec<Injection>,
    rules: Vec<RequestRule>,
    allow_http: bool,
) -> Setup {
    setup_tuned(test_ca_pem, injections, rules, allow_http, |_| {})
}

fn setup_tuned(
    test_ca_pem: &str,
    injections: Vec<Injection>,
    rules: Vec<RequestRule>,
    allow_http: bool,
    tune: impl FnOnce(&mut ProxyConfig),
) -> Setup {
    let authority = Arc::new(CertAuthority::generate(&["localhost".to_owned()]).unwrap());
    let ca = authority.certificate_pem().to_owned();
    let intercept = Intercept {
        authority,
        upstream_roots: Arc::new(roots_from_pem(test_ca_pem)),
        injections,
        rules,
    };
    let allow = vec![NetEntry::parse("localhost").unwrap()];
    let mut config = ProxyConfig::new(Rules::new(Mode::TrustedHost, allow, allow_http));
    config.resolver =
        Arc::new(|_: &str, _: u16, _: Duration| Ok(vec!["127.0.0.1".parse().unwrap()]));
    config.intercept = Some(Arc::new(intercept));
    tune(&mut config);
    let proxy = Proxy::new(config);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = proxy.serve(l.into()).unwrap();
    Setup { proxy, addr, ca }
}

/// A TLS connection to `localhost:port` through the proxy's CONNECT,
/// trusting `ca_pem`.
fn connect(
    proxy: SocketAddr,
    port: u16,
    ca_pem: &str,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).unwrap() == 0 {
            return Err(String::from_utf8_lossy(&head).into_owned());
        }
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots_from_pem(ca_pem))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap())
            .unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut s).map_err(|e| e.to_string())?;
    }
    Ok(rustls::StreamOwned::new(conn, s))
}

/// Sends one request and reads one response (its head and a
/// Content-Length body). Answers the status line, head and body.
fn request<S: Read + Write>(s: &mut S, req: &str) -> (String, String) {
    s.write_all(req.as_bytes()).unwrap();
    s.flush().unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return (String::from_utf8_lossy(&head).into_owned(), String::new()),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    // The answer to HEAD has no body, whatever its length says.
    let len: usize = head
        .lines()
        .filter(|_| !req.starts_with("HEAD "))
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    (head, String::from_utf8_lossy(&body).into_owned())
}

fn injection(port: u16, methods: &[&str], prefixes: &[&str]) -> Injection {
    Injection {
        target: target(port, methods, prefixes),
        header: "Authorization".into(),
        value: Secret::new(format!("Bearer {SECRET}").into_bytes()).unwrap(),
        label: "net.credentials[0]".into(),
    }
}

extern "C" fn on_alarm(_: libc::c_int) {}

/// Signals sent to the proxy's threads so far.
static SENT: AtomicUsize = AtomicUsize::new(0);

fn storm() {
    static START: std::sync::Once = std::sync::Once::new();
    START.call_once(|| {
        // SAFETY: a zeroed sigaction filled with a handler that does nothing.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_alarm as *const () as usize;
            sa.sa_flags = 0; // no SA_RESTART
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut()), 0);
        }
        std::thread::spawn(|| {
            // SAFETY: gettid has no preconditions.
            let me = unsafe { libc::gettid() };
            let pid = std::process::id() as libc::pid_t;
            loop {
                for t in std::fs::read_dir("/proc/self/task")
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok())
                    else {
                        continue;
                    };
                    let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                    if tid != me && comm.starts_with("sandgate-") {
                        // SAFETY: a signal to a thread of this process,
                        // whose handler does nothing.
                        unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGALRM) };
                        SENT.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    });
}

/// An intercepted connection whose proxy thread is interrupted while it
/// waits for the client's ClientHello, or for the upstream's handshake or
/// answer, goes on: the client gets its answer and the upstream the
/// credential. Before, an EINTR there ended the connection ("cannot read
/// the TLS ClientHello: Interrupted system call").
#[test]
fn eintr21_an_intercepted_connection_survives_the_hosts_signals() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    storm();
    for round in 0..20 {
        let mut tls = connect(s.addr, port, &s.ca)
            .unwrap_or_else(|e| panic!("round {round}: {e} {:?}", s.proxy.audit()));
        let (head, body) = request(&mut tls, "GET /repos/a HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert!(
            head.starts_with("HTTP/1.1 200"),
            "round {round}: {head:?} {:?}",
            s.proxy.audit()
        );
        assert_eq!(body, "path /repos/a\n", "round {round}");
    }
    assert!(
        SENT.load(Ordering::Relaxed) > 0,
        "the storm reached no thread of the proxy"
    );
}

/// A client transport that sends what it writes a byte at a time, a
/// millisecond apart, while `slow` is set.
struct Dribble {
    s: TcpStream,
    slow: bool,
}

impl Read for Dribble {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.s.read(buf)
    }
}

impl Write for Dribble {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.slow || buf.is_empty() {
            return self.s.write(buf);
        }
        std::thread::sleep(Duration::from_millis(1));
        self.s.write(&buf[..1])
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.s.flush()
    }
}

/// A client that sends its ClientHello a byte at a time: the proxy reads
/// the rest of it after the first byte, while its thread takes the
/// host's signals. Before, the first EINTR of those reads ended the
/// connection ("cannot read the TLS ClientHello: Interrupted system
/// call").
#[test]
fn hard21_a_client_hello_sent_a_byte_at_a_time_survives_the_hosts_signals() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    storm();
    for round in 0..3 {
        let mut sock = TcpStream::connect(s.addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            sock,
            "CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(sock.read(&mut b).unwrap(), 1, "round {round}: {head:?}");
            head.push(b[0]);
        }
        assert!(head.starts_with(b"HTTP/1.1 200"), "round {round}");
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots_from_pem(&s.ca))
            .with_no_client_auth();
        let mut conn = rustls::ClientConnection::new(
            Arc::new(config),
            ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        let mut io = Dribble {
            s: sock,
            slow: true,
        };
        while conn.is_handshaking() {
            if let Err(e) = conn.complete_io(&mut io) {
                panic!("round {round}: {e} {:?}", s.proxy.audit());
            }
            // Only the first flight, the ClientHello, is dribbled.
            io.slow = false;
        }
        let mut tls = rustls::StreamOwned::new(conn, io);
        let (head, body) = request(&mut tls, "GET /repos/a HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert!(
            head.starts_with("HTTP/1.1 200"),
            "round {round}: {head:?} {:?}",
            s.proxy.audit()
        );
        assert_eq!(body, "path /repos/a\n", "round {round}");
    }
}

/// A loopback target that accepts and keeps every connection, never
/// reading nor writing.
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

/// A proxy for plain HTTP and tunnels to `allow`, idling out after 300 ms.
fn plain_proxy(allow: &[String]) -> (Proxy, SocketAddr) {
    let allow = allow.iter().map(|a| NetEntry::parse(a).unwrap()).collect();
    let mut config = ProxyConfig::new(Rules::new(Mode::Restricted, allow, true));
    config.idle_timeout = Duration::from_millis(300);
    let p = Proxy::new(config);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = p.serve(l.into()).unwrap();
    (p, addr)
}

fn wait_for_no_connection(p: &Proxy, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while p.active() != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the connection still holds its place after 10 s {:?}",
            p.audit()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A tunnel on which nothing moves is ended after the idle timeout even
/// while the proxy's threads take the host's signals. The relay retried
/// an interrupted `splice` without looking at the idle clock, and the
/// socket's timeout, restarted by each retry, never ran out: the tunnel
/// and its place under the cap were held for good.
#[test]
fn hard21_an_idle_tunnel_is_closed_under_the_hosts_signals() {
    let (target, _held) = sink();
    let (p, addr) = plain_proxy(&[target.to_string()]);
    storm();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A port other than 80 and 443: an opaque tunnel.
    write!(s, "CONNECT {target} HTTP/1.1\r\n\r\nhello").unwrap();
    let mut head = [0u8; 39];
    s.read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"HTTP/1.1 200"), "{head:?}");
    wait_for_no_connection(&p, "an idle tunnel");
    p.stop();
}

/// A plain request whose target never reads its body meets the idle
/// timeout while the proxy's threads take the host's signals: each
/// interrupted write to the target was retried with the whole timeout
/// again.
#[test]
fn hard21_a_target_that_never_reads_a_body_meets_the_idle_timeout_under_the_hosts_signals() {
    let (target, _held) = sink();
    let (p, addr) = plain_proxy(&[target.to_string()]);
    storm();
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
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while p.active() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    wait_for_no_connection(&p, "a target that never reads");
    writer.join().unwrap();
    p.stop();
}

/// An intercepted host whose server sends everything, its TLS handshake
/// and its answer, a byte at a time a millisecond apart, while the
/// proxy's threads take the host's signals: every one of the proxy's
/// reads of it may be interrupted, and the client still gets the whole
/// answer.
#[test]
fn hard21_an_upstream_that_dribbles_is_relayed_whole_under_the_hosts_signals() {
    let (pem, cfg) = test_ca();
    let config = Arc::new(cfg);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let io = Dribble {
                    s: stream,
                    slow: true,
                };
                let mut tls = rustls::StreamOwned::new(conn, io);
                let mut buf = Vec::new();
                while let Some(head) = next_head(&mut tls, &mut buf) {
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                    let body = format!("path {path}\n");
                    let _ = write!(
                        tls,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.flush();
                }
            });
        }
    });
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    storm();
    let mut tls = connect(s.addr, port, &s.ca).unwrap_or_else(|e| panic!("{e}"));
    for round in 0..2 {
        let (head, body) = request(&mut tls, "GET /repos/a HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert!(
            head.starts_with("HTTP/1.1 200"),
            "round {round}: {head:?} {:?}",
            s.proxy.audit()
        );
        assert_eq!(body, "path /repos/a\n", "round {round}");
    }
}
