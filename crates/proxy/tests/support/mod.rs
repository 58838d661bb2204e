//! Helpers shared by the interception tests: a test CA, loopback TLS
//! upstreams, a proxy set up with injections or rules, and a client that
//! trusts the proxy's CA.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::{PrivateKeyDer, ServerName};
use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{
    roots_from_pem, CertAuthority, Injection, Intercept, Proxy, ProxyConfig, RequestMatch,
    RequestRule, Secret,
};

pub const SECRET: &str = "ghp_realSecretValue0123456789";

pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A test CA and a certificate for `localhost` signed by it.
pub fn test_ca() -> (String, rustls::ServerConfig) {
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
pub struct Upstream {
    pub addr: SocketAddr,
    pub conns: Arc<AtomicUsize>,
    /// Connections whose TLS handshake resumed an earlier session.
    pub resumed: Arc<AtomicUsize>,
    /// Connections that negotiated AES-128-GCM.
    pub aes128: Arc<AtomicUsize>,
    pub heads: Arc<Mutex<Vec<String>>>,
}

pub fn upstream(config: rustls::ServerConfig) -> Upstream {
    upstream_with(config, false)
}

/// `close_after`: the upstream closes each connection after its first
/// answer, without saying so (as a server whose keep-alive timer ran out).
/// The next request head read from `r` into `buf` (without its blank
/// line, which leaves `buf` with it); `None` when the stream ends first.
pub fn next_head<R: Read>(r: &mut R, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
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

/// The TLS stream of one connection to a test upstream.
pub type Tls = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

/// A loopback TLS upstream that counts connections and runs `serve` on
/// each (in a thread of its own, after a 10 s read timeout is set), with
/// an empty read buffer and the list of request heads to keep.
pub fn tls_upstream(
    config: rustls::ServerConfig,
    serve: impl Fn(&mut Tls, &mut Vec<u8>, &Mutex<Vec<String>>) + Send + Sync + 'static,
) -> Upstream {
    let config = Arc::new(config);
    let serve = Arc::new(serve);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let (c, h) = (Arc::clone(&conns), Arc::clone(&heads));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            c.fetch_add(1, Ordering::SeqCst);
            let (config, h, serve) = (Arc::clone(&config), Arc::clone(&h), Arc::clone(&serve));
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                serve(&mut tls, &mut Vec::new(), &h);
            });
        }
    });
    Upstream {
        addr,
        conns,
        resumed: Arc::new(AtomicUsize::new(0)),
        aes128: Arc::new(AtomicUsize::new(0)),
        heads,
    }
}

pub fn upstream_with(config: rustls::ServerConfig, close_after: bool) -> Upstream {
    let resumed = Arc::new(AtomicUsize::new(0));
    let aes128 = Arc::new(AtomicUsize::new(0));
    let (r, a) = (Arc::clone(&resumed), Arc::clone(&aes128));
    let up = tls_upstream(config, move |tls, buf, h| {
        let mut chunk = [0u8; 4096];
        // Whether this connection's first request was seen.
        let mut seen = false;
        loop {
            let Some(head) = next_head(tls, buf) else {
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
    Upstream {
        resumed,
        aes128,
        ..up
    }
}

pub fn target(port: u16, methods: &[&str], prefixes: &[&str]) -> RequestMatch {
    RequestMatch {
        host: "localhost".into(),
        port: Some(port),
        methods: methods.iter().map(|s| (*s).to_owned()).collect(),
        path_prefixes: prefixes.iter().map(|s| (*s).to_owned()).collect(),
    }
}

pub struct Setup {
    pub proxy: Proxy,
    pub addr: SocketAddr,
    /// The proxy CA's PEM, which the client trusts.
    pub ca: String,
}

pub fn setup(test_ca_pem: &str, injections: Vec<Injection>, rules: Vec<RequestRule>) -> Setup {
    setup_http(test_ca_pem, injections, rules, false)
}

pub fn setup_http(
    test_ca_pem: &str,
    injections: Vec<Injection>,
    rules: Vec<RequestRule>,
    allow_http: bool,
) -> Setup {
    setup_tuned(test_ca_pem, injections, rules, allow_http, |_| {})
}

pub fn setup_tuned(
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
/// trusting `ca_pem`. A refused CONNECT fails the test; a failed
/// handshake is answered.
pub fn connect(
    proxy: SocketAddr,
    port: u16,
    ca_pem: &str,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
    let s = tunnel(proxy, "localhost", port).unwrap_or_else(|head| panic!("{head}"));
    tls_over(s, Some("localhost"), ca_pem)
}

/// A stream through the proxy's `CONNECT host:port`, its answer's head
/// read; a refusal is answered with that head.
pub fn tunnel(proxy: SocketAddr, host: &str, port: u16) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).unwrap() == 0 {
            break;
        }
        head.push(b[0]);
    }
    if head.starts_with(b"HTTP/1.1 200") && head.ends_with(b"\r\n\r\n") {
        Ok(s)
    } else {
        Err(String::from_utf8_lossy(&head).into_owned())
    }
}

/// A TLS handshake over `s`, naming `sni` (no SNI when `None`, the
/// certificate then checked for `localhost`), trusting `ca_pem`.
pub fn tls_over(
    mut s: TcpStream,
    sni: Option<&str>,
    ca_pem: &str,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots_from_pem(ca_pem))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.enable_sni = sni.is_some();
    let name = sni.unwrap_or("localhost").to_owned();
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from(name).unwrap())
            .unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut s).map_err(|e| e.to_string())?;
    }
    Ok(rustls::StreamOwned::new(conn, s))
}

/// Sends one request and reads one response (its head and a
/// Content-Length body). Answers the status line, head and body.
pub fn request<S: Read + Write>(s: &mut S, req: &str) -> (String, String) {
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

pub fn injection(port: u16, methods: &[&str], prefixes: &[&str]) -> Injection {
    Injection {
        target: target(port, methods, prefixes),
        header: "Authorization".into(),
        value: Secret::new(format!("Bearer {SECRET}").into_bytes()).unwrap(),
        label: "net.credentials[0]".into(),
    }
}

/// A loopback server that keeps every byte it received and answers each
/// request head with `ok`. Shared by tests/proxy.rs and tests/spell24.rs.
pub struct Server {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicUsize>,
    pub got: Arc<Mutex<Vec<u8>>>,
}

impl Server {
    /// The connections it accepted.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Every byte it received, as text.
    pub fn got(&self) -> String {
        String::from_utf8_lossy(&self.got.lock().unwrap()).into_owned()
    }
}

/// A [`Server`] listening on `ip`, port chosen by the kernel, that
/// answers each request head with `ok`.
pub fn server(ip: &str) -> Server {
    serve(ip, |mut conn, got| {
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let mut chunk = [0u8; 4096];
        let mut mine = Vec::new();
        loop {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    got.lock().unwrap().extend_from_slice(&chunk[..n]);
                    mine.extend_from_slice(&chunk[..n]);
                    if mine.windows(4).any(|w| w == b"\r\n\r\n") {
                        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
                        mine.clear();
                    }
                }
            }
        }
    })
}

/// A [`Server`] listening on `ip`, port chosen by the kernel: each
/// connection it accepts is counted, then handed to `each` on a thread of
/// its own with the buffer that keeps what the server received.
pub fn serve(ip: &str, each: fn(TcpStream, &Mutex<Vec<u8>>)) -> Server {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let got = Arc::new(Mutex::new(Vec::new()));
    let (h, g) = (Arc::clone(&hits), Arc::clone(&got));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            let g = Arc::clone(&g);
            std::thread::spawn(move || each(conn, &g));
        }
    });
    Server { addr, hits, got }
}

/// Sends `bytes` to the proxy at `proxy` and reads until it closes (or
/// 10 s pass).
pub fn exchange(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A SOCKS5 `CONNECT` (no authentication) to `atyp`/`addr`:`port`;
/// answers the reply code and the stream.
pub fn socks(proxy: SocketAddr, atyp: u8, addr: &[u8], port: u16) -> (u8, TcpStream) {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut hello = [0u8; 2];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(hello, [5, 0]);
    let mut req = vec![5, 1, 0, atyp];
    if atyp == 3 {
        req.push(u8::try_from(addr.len()).unwrap());
    }
    req.extend_from_slice(addr);
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).unwrap();
    (reply[1], s)
}

/// Waits (10 s at the most) until `ok` holds; panics naming `what`.
pub fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A loopback TLS upstream that keeps every request head it got (its
/// body is not read: use it for requests without one) and answers each
/// with what `answer` makes of the head (a whole response).
pub fn answering(config: rustls::ServerConfig, answer: fn(&str) -> String) -> Upstream {
    tls_upstream(config, move |tls, buf, h| {
        while let Some(head) = next_head(tls, buf) {
            let head = String::from_utf8_lossy(&head).into_owned();
            let out = answer(&head);
            h.lock().unwrap().push(head);
            let _ = tls.write_all(out.as_bytes());
            let _ = tls.flush();
        }
    })
}
