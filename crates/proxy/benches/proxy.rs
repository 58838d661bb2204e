//! The egress proxy's cost against a direct connection, on host loopback:
//!
//! - `download_10MB`: a client reads 10 MB from a server, directly and
//!   through a `CONNECT` tunnel of the proxy (relayed with `splice`). Runs
//!   alternate, the median of each is printed as a `RATIO` line (target
//!   ≤ 1.15, docs/BENCHMARKS.md);
//! - `connect_setup`: from `connect` to the first byte of the server's
//!   answer, directly and through the tunnel (reported, no target).
//!
//! - `get_1MB_tls`: a 1 MB HTTPS GET (a new connection each: CONNECT,
//!   TLS handshake, request, body) through the opaque tunnel and through
//!   the intercepting proxy (TLS ended at the proxy, a credential set, a
//!   second TLS connection upstream), alternating; the median ratio is
//!   printed (target ≤ 1.3);
//! - `request_overhead`: a small GET on a kept-alive connection, opaque
//!   against intercepted: what interception adds to each request once
//!   both connections are open.
//!
//! The client runs on CPU 0 and the server on CPU 1 where the machine has
//! two; the proxy's threads are left to the scheduler.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use std::sync::Arc;

use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{
    roots_from_pem, CertAuthority, Injection, Intercept, Proxy, ProxyConfig, RequestMatch, Secret,
};

const SIZE: usize = 10 * 1024 * 1024;

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if rustix::thread::sched_setaffinity(None, &set).is_err() {
        eprintln!("note: could not pin a thread to CPU {cpu}");
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Each connection: one byte right away (for the setup figure), then
/// reads a byte saying how much to send (0: nothing, 1: 10 MB).
fn server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        if cpus() > 1 {
            pin(1);
        }
        let data = vec![7u8; SIZE];
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let _ = c.set_nodelay(true);
            let _ = c.write_all(b"!");
            let mut what = [0u8; 1];
            if c.read_exact(&mut what).is_ok() && what[0] == 1 {
                let _ = c.write_all(&data);
            }
        }
    });
    addr
}

/// Opens a connection (through the proxy when `proxy` is given) and reads
/// the server's first byte.
fn open(server: SocketAddr, proxy: Option<SocketAddr>) -> TcpStream {
    let mut s = TcpStream::connect(proxy.unwrap_or(server)).unwrap();
    s.set_nodelay(true).unwrap();
    if proxy.is_some() {
        write!(s, "CONNECT {server} HTTP/1.1\r\n\r\n").unwrap();
        let mut head = [0u8; 39];
        s.read_exact(&mut head).unwrap();
        assert!(
            head.starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&head)
        );
    }
    let mut first = [0u8; 1];
    s.read_exact(&mut first).unwrap();
    s
}

fn download(server: SocketAddr, proxy: Option<SocketAddr>, buf: &mut [u8]) -> Duration {
    let t = Instant::now();
    let mut s = open(server, proxy);
    s.write_all(&[1]).unwrap();
    let mut got = 0;
    while got < SIZE {
        let n = s.read(buf).unwrap();
        assert!(n > 0, "the download ended early");
        got += n;
    }
    t.elapsed()
}

fn setup(server: SocketAddr, proxy: Option<SocketAddr>) -> Duration {
    let t = Instant::now();
    let mut s = open(server, proxy);
    let d = t.elapsed();
    s.write_all(&[0]).unwrap();
    d
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_nanos() as f64
}

const BIG: usize = 1024 * 1024;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS server for `localhost` (a test CA's certificate, its PEM
/// answered) on loopback: every request on a kept-alive connection gets
/// 1 MB, or 2 bytes for `/small`.
fn tls_server() -> (SocketAddr, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "bench CA");
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap(),
    );
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        if cpus() > 1 {
            pin(1);
        }
        let big = vec![b'x'; BIG];
        for c in l.incoming() {
            let Ok(c) = c else { continue };
            let _ = c.set_nodelay(true);
            let (config, big) = (Arc::clone(&config), big.clone());
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, c);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match tls.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let small = buf.starts_with(b"GET /small ");
                    buf.drain(..end + 4);
                    let body: &[u8] = if small { b"ok" } else { &big };
                    let _ = write!(
                        tls,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    let _ = tls.write_all(body);
                    let _ = tls.flush();
                }
            });
        }
    });
    (addr, ca_pem)
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// CONNECT `localhost:port` through `proxy`, then TLS trusting `roots`.
fn tls_open(proxy: SocketAddr, port: u16, roots: &Arc<rustls::RootCertStore>) -> Tls {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_nodelay(true).unwrap();
    write!(s, "CONNECT localhost:{port} HTTP/1.1\r\n\r\n").unwrap();
    let mut head = [0u8; 39];
    s.read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"HTTP/1.1 200"));
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(Arc::clone(roots))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let conn = rustls::ClientConnection::new(
        Arc::new(config),
        rustls::pki_types::ServerName::try_from("localhost").unwrap(),
    )
    .unwrap();
    rustls::StreamOwned::new(conn, s)
}

/// One GET on `tls`, its body read whole (by its Content-Length).
fn get(tls: &mut Tls, path: &str, buf: &mut [u8]) -> usize {
    write!(tls, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    tls.flush().unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tls.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut got = 0;
    let cap = buf.len();
    while got < len {
        let n = tls.read(&mut buf[..(len - got).min(cap)]).unwrap();
        assert!(n > 0);
        got += n;
    }
    got
}

fn tls_proxy(server: SocketAddr, intercept: Option<Intercept>) -> (Proxy, SocketAddr) {
    let mut config = ProxyConfig::new(Rules::new(
        Mode::TrustedHost,
        vec![NetEntry::parse("localhost").unwrap()],
        false,
    ));
    let ip = server.ip();
    config.resolver = Arc::new(move |_: &str, _: u16, _: Duration| Ok(vec![ip]));
    config.intercept = intercept.map(Arc::new);
    let p = Proxy::new(config);
    let a = p
        .serve(TcpListener::bind("127.0.0.1:0").unwrap().into())
        .unwrap();
    (p, a)
}

fn tls_bench(runs: usize) {
    let (server, server_ca) = tls_server();
    let port = server.port();
    let authority = Arc::new(CertAuthority::generate(&["localhost".to_owned()]).unwrap());
    let proxy_roots = Arc::new(roots_from_pem(authority.certificate_pem()));
    let server_roots = Arc::new(roots_from_pem(&server_ca));
    let intercept = Intercept {
        authority,
        upstream_roots: Arc::clone(&server_roots),
        injections: vec![Injection {
            target: RequestMatch {
                host: "localhost".into(),
                port: Some(port),
                ..RequestMatch::default()
            },
            header: "Authorization".into(),
            value: Secret::new(b"Bearer bench-token-0123456789".to_vec()).unwrap(),
            label: "net.credentials[0]".into(),
        }],
        rules: Vec::new(),
    };
    let (opaque, opaque_addr) = tls_proxy(server, None);
    let (inter, inter_addr) = tls_proxy(server, Some(intercept));
    let mut buf = vec![0u8; 256 * 1024];
    let mut one = |proxy: SocketAddr, roots: &Arc<rustls::RootCertStore>| {
        let t = Instant::now();
        let mut tls = tls_open(proxy, port, roots);
        assert_eq!(get(&mut tls, "/", &mut buf), BIG);
        t.elapsed()
    };
    one(opaque_addr, &server_roots);
    one(inter_addr, &proxy_roots);
    let (mut o, mut i) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        o.push(one(opaque_addr, &server_roots));
        i.push(one(inter_addr, &proxy_roots));
    }
    let (o, i) = (median(o), median(i));
    println!(
        "GET 1 MB over TLS (new connection each): opaque tunnel {:.2} ms, intercepted {:.2} ms",
        o / 1e6,
        i / 1e6
    );
    println!(
        "RATIO\tsandgate-proxy\tget_1MB_tls/intercepted\t{i:.1}\t{o:.1}\t{:.4}\topaque",
        i / o
    );
    // Per request, on one kept-alive connection each.
    let mut small = [0u8; 16];
    let mut to = tls_open(opaque_addr, port, &server_roots);
    let mut ti = tls_open(inter_addr, port, &proxy_roots);
    get(&mut to, "/small", &mut small);
    get(&mut ti, "/small", &mut small);
    let (mut o, mut i) = (Vec::new(), Vec::new());
    for _ in 0..runs * 4 {
        let t = Instant::now();
        get(&mut to, "/small", &mut small);
        o.push(t.elapsed());
        let t = Instant::now();
        get(&mut ti, "/small", &mut small);
        i.push(t.elapsed());
    }
    let (o, i) = (median(o), median(i));
    println!(
        "small GET on a kept-alive connection: opaque {:.1} µs, intercepted {:.1} µs \
         (+{:.1} µs per request)",
        o / 1e3,
        i / 1e3,
        (i - o) / 1e3
    );
    println!(
        "RATIO\tsandgate-proxy\trequest_overhead/intercepted\t{i:.1}\t{o:.1}\t{:.4}\topaque",
        i / o
    );
    opaque.stop();
    inter.stop();
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 7 } else { 31 };
    let server = server();
    let entry = NetEntry::parse(&server.to_string()).unwrap();
    let proxy = Proxy::new(ProxyConfig::new(Rules::new(
        Mode::Restricted,
        vec![entry],
        false,
    )));
    let proxy_addr = proxy
        .serve(TcpListener::bind("127.0.0.1:0").unwrap().into())
        .unwrap();
    if cpus() > 1 {
        pin(0);
    }
    let mut buf = vec![0u8; 256 * 1024];
    // Warm up both paths.
    download(server, None, &mut buf);
    download(server, Some(proxy_addr), &mut buf);
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        direct.push(download(server, None, &mut buf));
        proxied.push(download(server, Some(proxy_addr), &mut buf));
    }
    let (d, p) = (median(direct), median(proxied));
    println!(
        "download 10 MB: direct {:.2} ms, through the proxy {:.2} ms ({:.0} MB/s)",
        d / 1e6,
        p / 1e6,
        SIZE as f64 / (p * 1e-9) / 1e6
    );
    println!(
        "RATIO\tsandgate-proxy\tdownload_10MB/proxied\t{p:.1}\t{d:.1}\t{:.4}\tdirect",
        p / d
    );
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..runs * 4 {
        direct.push(setup(server, None));
        proxied.push(setup(server, Some(proxy_addr)));
    }
    let (d, p) = (median(direct), median(proxied));
    println!(
        "connection setup: direct {:.1} µs, through the proxy {:.1} µs",
        d / 1e3,
        p / 1e3
    );
    println!(
        "RATIO\tsandgate-proxy\tconnect_setup/proxied\t{p:.1}\t{d:.1}\t{:.4}\tdirect",
        p / d
    );
    proxy.stop();
    tls_bench(runs);
}
