//! The egress proxy a command in namespaces of its own reaches the network
//! through, attacked from inside the namespace with real clients (curl,
//! python) against loopback servers this test starts on the host.
//!
//! Run as root and as an unprivileged user (`cargo xtask unprivileged`).
//! A test skips, saying why, only when namespaces are unavailable here;
//! `SANDGATE_REQUIRE_NAMESPACES=1` turns such a skip into a failure.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandgate::policy::SecurityMode;
use sandgate::{ExecOptions, ExecResult, Executor, NetProtocol};

const PYTHON: &str = "/usr/bin/python3";
const CURL: &str = "/usr/bin/curl";

/// A loopback HTTP server on the host that counts the connections it got.
struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl Server {
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Serves `HTTP/1.1 200` with a body naming `tag` to every connection on
/// `ip:port` (port 0: any).
fn server(ip: &str, port: u16, tag: &'static str) -> Server {
    let listener = TcpListener::bind((ip, port)).unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&hits);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(3)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let body = format!("hello from {tag}\n");
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    Server { addr, hits }
}

struct Fixture {
    _dir: tempfile::TempDir,
    ex: Executor,
}

/// The executor's network audit once it holds `n` records, or as it is
/// after 20 s: a connection is recorded as its relay ends, which can be
/// just after the client has read the last of its data.
fn audit_of(f: &Fixture, n: usize) -> Vec<sandgate::NetAuditRecord> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let audit = f.ex.net_audit();
        if audit.len() >= n || Instant::now() > deadline {
            return audit;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A started executor granted `allow`, or `None` (printed) where the
/// commands cannot run in namespaces of their own.
fn executor(
    test: &str,
    allow: &[String],
    allow_http: bool,
    mode: SecurityMode,
    resolver: Option<Arc<dyn sandgate::NetResolve>>,
) -> Option<Fixture> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    let mut b = Executor::builder();
    b.base_dir(dir.path())
        .write_root("work")
        .enabled(true)
        .timeout_ms(60_000)
        .security_mode(mode)
        .allow_http(allow_http);
    for a in allow {
        b.net_allow(a.clone());
    }
    let ex = b.build().unwrap();
    if let Some(r) = resolver {
        ex.set_net_resolver(r);
    }
    ex.start().unwrap();
    if ex.proxy_address().is_some() {
        return Some(Fixture { _dir: dir, ex });
    }
    let r = ex.exec("true", ExecOptions::default()).unwrap();
    let why = r.confined.notes.join("; ");
    assert!(
        std::env::var_os("SANDGATE_REQUIRE_NAMESPACES").is_none(),
        "{test}: namespaces unavailable: {why}"
    );
    eprintln!("note: {test} skipped: namespaces unavailable here: {why}");
    None
}

fn run(f: &Fixture, command: &str) -> ExecResult {
    f.ex.exec(command, ExecOptions::default()).unwrap()
}

fn text(r: &ExecResult) -> String {
    format!(
        "exit {}\nstdout: {}\nstderr: {}",
        r.exit_code,
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    )
}

/// A python one-off inside the namespace, run from a file in the write
/// root (no quoting through the shell).
fn python(f: &Fixture, script: &str) -> ExecResult {
    let path = f._dir.path().join("work").join("t.py");
    std::fs::write(&path, script).unwrap();
    run(f, &format!("{PYTHON} t.py"))
}

/// Python that sends `request` to the proxy (from `$HTTP_PROXY`) and
/// prints the first line of the answer.
fn raw_proxy_request(request: &str) -> String {
    format!(
        r#"
import os, socket
host, port = os.environ["HTTP_PROXY"][len("http://"):].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall({request:?}.encode())
data = b""
while b"\r\n" not in data:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
print(data.split(b"\r\n")[0].decode())
"#
    )
}

fn lit(a: SocketAddr) -> String {
    a.to_string()
}

#[test]
fn proxy_aware_clients_reach_a_granted_target_through_the_proxy() {
    let a = server("127.0.0.2", 0, "granted");
    let Some(f) = executor(
        "granted",
        &[lit(a.addr)],
        true,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    let r = run(
        &f,
        "env | sort | grep -i -E '^(https?|all|no)_proxy=|^NODE_USE_ENV_PROXY='",
    );
    let env = String::from_utf8_lossy(&r.stdout).into_owned();
    for name in [
        "HTTP_PROXY=http://127.0.0.1:",
        "http_proxy=http://127.0.0.1:",
        "HTTPS_PROXY=http://127.0.0.1:",
        "https_proxy=http://127.0.0.1:",
        "ALL_PROXY=socks5h://127.0.0.1:",
        "all_proxy=socks5h://127.0.0.1:",
        "NO_PROXY=localhost,127.0.0.1,::1",
        "no_proxy=localhost,127.0.0.1,::1",
        "NODE_USE_ENV_PROXY=1",
    ] {
        assert!(env.contains(name), "{name} missing from\n{env}");
    }
    // curl through HTTP_PROXY (plain http, absolute form).
    let r = run(&f, &format!("{CURL} -sS --max-time 20 http://{}/x", a.addr));
    assert_eq!(r.exit_code, 0, "{}", text(&r));
    assert_eq!(String::from_utf8_lossy(&r.stdout), "hello from granted\n");
    // curl through a CONNECT tunnel (plain text inside: allow_http).
    let r = run(
        &f,
        &format!("{CURL} -sS --max-time 20 --proxytunnel http://{}/y", a.addr),
    );
    assert_eq!(r.exit_code, 0, "{}", text(&r));
    assert_eq!(String::from_utf8_lossy(&r.stdout), "hello from granted\n");
    // curl through SOCKS5 (ALL_PROXY).
    let r = run(
        &f,
        &format!(
            "unset HTTP_PROXY http_proxy; {CURL} -sS --max-time 20 http://{}/z",
            a.addr
        ),
    );
    assert_eq!(r.exit_code, 0, "{}", text(&r));
    assert_eq!(String::from_utf8_lossy(&r.stdout), "hello from granted\n");
    // python urllib, which reads http_proxy.
    let r = python(
        &f,
        &format!(
            "import urllib.request\nprint(urllib.request.urlopen('http://{}/p', timeout=20).read().decode(), end='')\n",
            a.addr
        ),
    );
    assert_eq!(r.exit_code, 0, "{}", text(&r));
    assert_eq!(String::from_utf8_lossy(&r.stdout), "hello from granted\n");
    assert_eq!(a.hits(), 4);
    // Four connections, each recorded as its relay ends.
    let audit = audit_of(&f, 4);
    let protocols: Vec<NetProtocol> = audit
        .iter()
        .filter(|r| r.allowed)
        .map(|r| r.protocol)
        .collect();
    assert!(protocols.contains(&NetProtocol::Http), "{audit:?}");
    assert!(protocols.contains(&NetProtocol::Connect), "{audit:?}");
    assert!(protocols.contains(&NetProtocol::Socks5), "{audit:?}");
    for rec in audit.iter().filter(|r| r.allowed) {
        assert_eq!(rec.address, Some(a.addr), "{rec:?}");
        assert!(rec.bytes_down > 0 && rec.bytes_up > 0, "{rec:?}");
    }
}

#[test]
fn a_host_not_granted_is_refused_with_no_connection_at_it() {
    let a = server("127.0.0.2", 0, "granted");
    // Another host on the same port.
    let b = server("127.0.0.3", a.addr.port(), "other");
    let Some(f) = executor(
        "not granted",
        &[lit(a.addr)],
        true,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    let url = format!("http://{}/", b.addr);
    let r = run(
        &f,
        &format!("{CURL} -sS --max-time 20 -o /dev/null -w '%{{http_code}}' {url}"),
    );
    assert_eq!(String::from_utf8_lossy(&r.stdout), "403", "{}", text(&r));
    let r = run(&f, &format!("{CURL} -sS --max-time 20 --proxytunnel {url}"));
    assert_ne!(r.exit_code, 0, "{}", text(&r));
    let r = run(
        &f,
        &format!("unset HTTP_PROXY http_proxy; {CURL} -sS --max-time 20 {url}"),
    );
    assert_ne!(r.exit_code, 0, "{}", text(&r));
    // A direct connection, ignoring the proxy, reaches nothing either.
    let r = python(
        &f,
        &format!(
            "import socket\ntry:\n    socket.create_connection(('127.0.0.3', {}), timeout=5)\n    print('CONNECTED')\nexcept OSError as e:\n    print('refused', e)\n",
            b.addr.port()
        ),
    );
    assert!(
        String::from_utf8_lossy(&r.stdout).starts_with("refused"),
        "{}",
        text(&r)
    );
    let r = python(
        &f,
        "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), timeout=5)\n    print('CONNECTED')\nexcept OSError as e:\n    print('refused', e)\n",
    );
    assert!(
        String::from_utf8_lossy(&r.stdout).starts_with("refused"),
        "{}",
        text(&r)
    );
    assert_eq!(b.hits(), 0);
    assert_eq!(a.hits(), 0);
    let refused: Vec<_> =
        f.ex.net_audit()
            .into_iter()
            .filter(|r| !r.allowed)
            .collect();
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(refused.iter().all(|r| r.address.is_none()), "{refused:?}");
}

#[test]
fn private_metadata_and_alternate_spellings_are_refused_before_any_connect() {
    let a = server("127.0.0.2", 0, "granted");
    let port = a.addr.port();
    let Some(f) = executor(
        "private",
        &[lit(a.addr), "example.com".into()],
        true,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    for target in [
        "169.254.169.254:80".to_owned(),
        "10.0.0.1:443".to_owned(),
        "192.168.1.1:443".to_owned(),
        "[fd00::1]:443".to_owned(),
        "[::ffff:127.0.0.2]:".to_owned() + &port.to_string(),
        format!("2130706434:{port}"),
        format!("0x7f.0.0.2:{port}"),
        format!("0177.0.0.2:{port}"),
        format!("127.1:{port}"),
        format!("localhost:{port}"),
    ] {
        let r = python(
            &f,
            &raw_proxy_request(&format!(
                "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
            )),
        );
        let line = String::from_utf8_lossy(&r.stdout).into_owned();
        assert!(line.starts_with("HTTP/1.1 403"), "{target}: {}", text(&r));
    }
    assert_eq!(a.hits(), 0);
    let audit = f.ex.net_audit();
    assert_eq!(audit.len(), 10, "{audit:?}");
    assert!(
        audit.iter().all(|r| !r.allowed && r.address.is_none()),
        "{audit:?}"
    );
}

/// A resolver that counts its queries and answers from a script.
fn counting(
    answers: Vec<Vec<&'static str>>,
) -> (Arc<dyn sandgate::NetResolve>, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let a = Arc::clone(&asked);
    let resolver = move |host: &str, _port: u16, _t: Duration| {
        let mut asked = a.lock().unwrap();
        let n = asked.len();
        asked.push(host.to_owned());
        let answer = answers
            .get(n)
            .or(answers.last())
            .cloned()
            .unwrap_or_default();
        Ok(answer.iter().map(|s| s.parse().unwrap()).collect())
    };
    (Arc::new(resolver), asked)
}

#[test]
fn a_refused_name_causes_no_dns_query_and_names_never_reach_loopback() {
    let a = server("127.0.0.2", 0, "granted");
    let (resolver, asked) = counting(vec![vec!["127.0.0.2"]]);
    let Some(f) = executor(
        "dns",
        &[lit(a.addr), format!("granted.example:{}", a.addr.port())],
        true,
        SecurityMode::Restricted,
        Some(resolver),
    ) else {
        return;
    };
    let port = a.addr.port();
    for req in [
        format!("CONNECT refused.example:{port} HTTP/1.1\r\n\r\n"),
        format!("GET http://refused.example:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n"),
        "CONNECT granted.example:1 HTTP/1.1\r\n\r\n".to_owned(),
    ] {
        let r = python(&f, &raw_proxy_request(&req));
        assert!(
            String::from_utf8_lossy(&r.stdout).starts_with("HTTP/1.1 403"),
            "{}",
            text(&r)
        );
    }
    // SOCKS5 with a name the rules refuse: no query either.
    let r = run(
        &f,
        &format!(
            "unset HTTP_PROXY http_proxy; {CURL} -sS --max-time 20 http://refused.example:{port}/"
        ),
    );
    assert_ne!(r.exit_code, 0, "{}", text(&r));
    assert!(
        asked.lock().unwrap().is_empty(),
        "{:?}",
        asked.lock().unwrap()
    );
    // A granted name is resolved by the proxy, once; it answers the host's
    // loopback, which a name never reaches.
    let r = python(
        &f,
        &raw_proxy_request(&format!("CONNECT granted.example:{port} HTTP/1.1\r\n\r\n")),
    );
    assert!(
        String::from_utf8_lossy(&r.stdout).starts_with("HTTP/1.1 403"),
        "{}",
        text(&r)
    );
    assert_eq!(*asked.lock().unwrap(), vec!["granted.example".to_owned()]);
    assert_eq!(a.hits(), 0);
}

#[test]
fn each_connection_dials_the_address_it_checked() {
    let a = server("127.0.0.2", 0, "first");
    let port = a.addr.port();
    // The first answer is granted loopback (a loopback name in trusted-host
    // mode); every later one is the unspecified address, refused in every
    // mode.
    let (resolver, asked) = counting(vec![vec!["127.0.0.2"], vec!["0.0.0.0"]]);
    let Some(f) = executor(
        "pinning",
        &[format!("localhost:{port}")],
        true,
        SecurityMode::TrustedHost,
        Some(resolver),
    ) else {
        return;
    };
    let curl =
        format!("{CURL} --noproxy '' -sS --max-time 20 --proxytunnel http://localhost:{port}/");
    let r = run(&f, &curl);
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "hello from first\n",
        "{}",
        text(&r)
    );
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert_eq!(a.hits(), 1);
    let r = run(&f, &curl);
    assert_ne!(r.exit_code, 0, "{}", text(&r));
    assert_eq!(asked.lock().unwrap().len(), 2);
    assert_eq!(a.hits(), 1);
    let audit = audit_of(&f, 2);
    assert_eq!(audit[0].address, Some(a.addr), "{audit:?}");
    assert!(!audit[1].allowed && audit[1].address.is_none(), "{audit:?}");
}

#[test]
fn a_client_hello_naming_another_server_is_refused() {
    let a = server("127.0.0.2", 0, "tls");
    let port = a.addr.port();
    let (resolver, _) = counting(vec![vec!["127.0.0.2"]]);
    // Plain text is refused in tunnels (allow_http false): only TLS with
    // the tunnel's own name passes. (An entry naming a port other than 80
    // and 443 would make the tunnel opaque: the operator's own protocol.)
    let Some(f) = executor(
        "sni",
        &["localhost".to_owned()],
        false,
        SecurityMode::TrustedHost,
        Some(resolver),
    ) else {
        return;
    };
    let script = |sni: &str| {
        format!(
            r#"
import os, socket, ssl
host, port = os.environ["HTTP_PROXY"][len("http://"):].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"CONNECT localhost:{port} HTTP/1.1\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode())
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname={sni:?})
except Exception as e:
    print("handshake failed", type(e).__name__)
"#
        )
    };
    let r = python(&f, &script("evil.example"));
    assert!(
        String::from_utf8_lossy(&r.stdout).contains("handshake failed"),
        "{}",
        text(&r)
    );
    assert_eq!(a.hits(), 0, "a fronted tunnel reached the server");
    // The same tunnel in plain text: refused, nothing dialled.
    let r = python(
        &f,
        &raw_proxy_request(&format!(
            "CONNECT localhost:{port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
        )),
    );
    assert!(
        String::from_utf8_lossy(&r.stdout).starts_with("HTTP/1.1 200"),
        "{}",
        text(&r)
    );
    assert_eq!(a.hits(), 0, "a plain-text tunnel reached the server");
    // The tunnel's own name: dialled (the server speaks no TLS, so the
    // handshake fails there, after the proxy connected).
    let r = python(&f, &script("localhost"));
    assert!(
        String::from_utf8_lossy(&r.stdout).contains("handshake failed"),
        "{}",
        text(&r)
    );
    assert_eq!(a.hits(), 1);
    // The dialled tunnel is recorded as its relay ends, which can be just
    // after the server saw the connection.
    let audit = audit_of(&f, 3);
    assert!(audit[0].reason.contains("domain fronting"), "{audit:?}");
    assert!(
        audit[1].reason.contains("does not start with TLS"),
        "{audit:?}"
    );
    assert!(audit[2].allowed, "{audit:?}");
}

#[test]
fn udp_reaches_nothing() {
    let a = server("127.0.0.2", 0, "granted");
    let udp = UdpSocket::bind("127.0.0.2:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let Some(f) = executor(
        "udp",
        &[lit(a.addr), "example.com".into()],
        true,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    let r = python(
        &f,
        &format!(
            "import socket\ntry:\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    s.sendto(b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01', ('{}', {}))\n    print('SENT')\nexcept OSError as e:\n    print('refused', e)\n",
            udp.local_addr().unwrap().ip(),
            udp.local_addr().unwrap().port()
        ),
    );
    assert!(
        String::from_utf8_lossy(&r.stdout).starts_with("refused"),
        "{}",
        text(&r)
    );
    // The command's own resolver finds nothing either.
    let r = run(&f, "getent hosts example.com; echo rc=$?");
    assert!(
        String::from_utf8_lossy(&r.stdout).contains("rc=2"),
        "{}",
        text(&r)
    );
    std::thread::sleep(Duration::from_millis(100));
    let mut buf = [0u8; 512];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "a datagram reached the host"
    );
}

#[test]
fn a_literal_grant_is_reachable_by_a_plain_tcp_client() {
    let a = server("127.0.0.2", 0, "literal");
    let Some(f) = executor(
        "literal",
        &[lit(a.addr)],
        false,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    let r = python(
        &f,
        &format!(
            "import socket\ns = socket.create_connection(('127.0.0.2', {}), timeout=10)\ns.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\ndata = b''\nwhile True:\n    c = s.recv(4096)\n    if not c: break\n    data += c\nprint(data.split(b'\\r\\n\\r\\n', 1)[1].decode(), end='')\n",
            a.addr.port()
        ),
    );
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "hello from literal\n",
        "{}",
        text(&r)
    );
    assert_eq!(a.hits(), 1);
    let audit = audit_of(&f, 1);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].protocol, NetProtocol::Forward);
    assert_eq!(audit[0].address, Some(a.addr));
    // Another port of the same address is not forwarded.
    let r = python(
        &f,
        &format!(
            "import socket\ntry:\n    socket.create_connection(('127.0.0.2', {}), timeout=5)\n    print('CONNECTED')\nexcept OSError as e:\n    print('refused', e)\n",
            a.addr.port().wrapping_add(1).max(1)
        ),
    );
    assert!(
        String::from_utf8_lossy(&r.stdout).starts_with("refused"),
        "{}",
        text(&r)
    );
}

#[test]
fn the_host_loopback_is_reached_only_where_granted() {
    let a = server("127.0.0.2", 0, "granted");
    let secret = server("127.0.0.1", 0, "secret");
    let Some(f) = executor(
        "host loopback",
        &[lit(a.addr), "example.com".into()],
        true,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    let sp = secret.addr.port();
    for (what, cmd) in [
        ("http", format!("{CURL} --noproxy '' -x $HTTP_PROXY -sS --max-time 10 http://127.0.0.1:{sp}/")),
        ("connect", format!("{CURL} --noproxy '' -x $HTTP_PROXY -p -sS --max-time 10 http://127.0.0.1:{sp}/")),
        ("socks", format!("{CURL} --noproxy '' -x $ALL_PROXY -sS --max-time 10 http://127.0.0.1:{sp}/")),
        ("socks v6", format!("{CURL} --noproxy '' -x $ALL_PROXY -sS --max-time 10 http://[::ffff:127.0.0.1]:{sp}/")),
        ("direct", format!("{CURL} --noproxy '*' -sS --max-time 10 http://127.0.0.1:{sp}/")),
    ] {
        let r = run(&f, &cmd);
        assert!(
            !String::from_utf8_lossy(&r.stdout).contains("secret"),
            "{what}: {}",
            text(&r)
        );
    }
    assert_eq!(secret.hits(), 0);
}

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn two_hundred_proxied_connections_leave_no_descriptor_behind() {
    // Descriptors are counted for the whole process: the count runs in a
    // process of its own, where no other test runs.
    const ALONE: &str = "SANDGATE_TEST_ALONE";
    if std::env::var_os(ALONE).is_none() {
        let out = Command::new("/proc/self/exe")
            .args([
                "--exact",
                "two_hundred_proxied_connections_leave_no_descriptor_behind",
                "--nocapture",
            ])
            .env(ALONE, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "{text}");
        return;
    }
    let a = server("127.0.0.2", 0, "many");
    let Some(f) = executor("fds", &[lit(a.addr)], true, SecurityMode::Restricted, None) else {
        return;
    };
    let script = format!(
        "import urllib.request\nfor i in range(200):\n    assert urllib.request.urlopen('http://{}/', timeout=20).read() == b'hello from many\\n'\nprint('done')\n",
        a.addr
    );
    // One run first, so that everything made once (threads' stacks, the
    // first pipe) exists before counting.
    let r = python(&f, &script);
    assert_eq!(String::from_utf8_lossy(&r.stdout), "done\n", "{}", text(&r));
    let server_settle = |want: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while a.hits() < want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    server_settle(200);
    let wait_for = |limit: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let n = fd_count();
            if n <= limit || Instant::now() >= deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Every connection audited (its thread is ending), then a stable count.
    audit_of(&f, 200);
    let mut before = fd_count();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let n = fd_count();
        if n == before {
            break;
        }
        before = n;
    }
    let r = python(&f, &script);
    assert_eq!(String::from_utf8_lossy(&r.stdout), "done\n", "{}", text(&r));
    server_settle(400);
    let after = wait_for(before);
    assert!(
        after <= before,
        "{before} descriptors before, {after} after"
    );
    assert_eq!(a.hits(), 400);
    let audit = audit_of(&f, 400);
    assert_eq!(audit.iter().filter(|r| r.allowed).count(), 400);
}

#[test]
fn a_policy_without_network_gets_no_proxy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    let ex = Executor::builder()
        .base_dir(dir.path())
        .write_root("work")
        .enabled(true)
        .build()
        .unwrap();
    ex.start().unwrap();
    assert!(ex.proxy_address().is_none());
    let r = ex.exec("env", ExecOptions::default()).unwrap();
    let env = String::from_utf8_lossy(&r.stdout).to_ascii_lowercase();
    assert!(!env.contains("proxy"), "{env}");
}

/// The host's own address on its default route (no packet is sent), or
/// `None` where it has none.
fn host_address() -> Option<std::net::IpAddr> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.200:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn a_literal_grant_outside_loopback_is_forwarded_at_its_own_address() {
    let Some(ip) = host_address() else {
        eprintln!("note: literal outside loopback skipped: this host has no address but loopback");
        return;
    };
    let a = server(&ip.to_string(), 0, "outside");
    let other = server(&ip.to_string(), 0, "other port");
    // Trusted-host mode: the host's address may be private.
    let Some(f) = executor(
        "literal outside loopback",
        &[lit(a.addr)],
        false,
        SecurityMode::TrustedHost,
        None,
    ) else {
        return;
    };
    let connect = |port: u16| {
        format!(
            "import socket\ntry:\n    s = socket.create_connection(('{ip}', {port}), timeout=10)\n    s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n    data = b''\n    while True:\n        c = s.recv(4096)\n        if not c: break\n        data += c\n    print(data.split(b'\\r\\n\\r\\n', 1)[1].decode(), end='')\nexcept OSError as e:\n    print('refused', e)\n"
        )
    };
    let r = python(&f, &connect(a.addr.port()));
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "hello from outside\n",
        "{}",
        text(&r)
    );
    // Only the granted port of that address is there.
    let r = python(&f, &connect(other.addr.port()));
    assert!(
        String::from_utf8_lossy(&r.stdout).starts_with("refused"),
        "{}",
        text(&r)
    );
    assert_eq!((a.hits(), other.hits()), (1, 0));
    let audit = audit_of(&f, 1);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].protocol, NetProtocol::Forward);
    assert_eq!(audit[0].address, Some(a.addr));
}

/// A loopback https server (a self-signed certificate for `localhost`)
/// that answers every request; returns it and the certificate's PEM.
fn tls_server(ip: &str) -> (Server, String) {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
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
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let body = "hello over tls\n";
                let _ = write!(
                    tls,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    (Server { addr, hits }, pem)
}

#[test]
fn https_through_the_tunnel_reaches_a_granted_name() {
    let (s, pem) = tls_server("127.0.0.2");
    let port = s.addr.port();
    let (resolver, asked) = counting(vec![vec!["127.0.0.2"]]);
    // A loopback name reaches loopback only in trusted-host mode; plain
    // text is refused, so only TLS naming `localhost` passes the tunnel.
    let Some(f) = executor(
        "https",
        &["localhost".to_owned()],
        false,
        SecurityMode::TrustedHost,
        Some(resolver),
    ) else {
        return;
    };
    std::fs::write(f._dir.path().join("work").join("ca.pem"), pem).unwrap();
    let r = run(
        &f,
        &format!("{CURL} --noproxy '' -sS --max-time 20 --cacert ca.pem https://localhost:{port}/"),
    );
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "hello over tls\n",
        "{}",
        text(&r)
    );
    let r = python(
        &f,
        &format!(
            "import os, ssl, urllib.request\nos.environ['no_proxy'] = os.environ['NO_PROXY'] = ''\nctx = ssl.create_default_context(cafile='ca.pem')\nprint(urllib.request.urlopen('https://localhost:{port}/', timeout=20, context=ctx).read().decode(), end='')\n"
        ),
    );
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "hello over tls\n",
        "{}",
        text(&r)
    );
    assert_eq!(s.hits(), 2);
    assert_eq!(asked.lock().unwrap().len(), 2);
    let audit = f.ex.net_audit();
    assert!(
        audit
            .iter()
            .all(|r| r.allowed && r.protocol == NetProtocol::Connect),
        "{audit:?}"
    );
}

/// Every connection the proxy admits or refuses reaches the executor's
/// audit sink (the one `sandgate mcp --audit` writes), not only the
/// in-memory log: host and port as asked, bytes relayed, the outcome,
/// and never the request's path or query.
#[test]
fn the_audit_sink_hears_of_each_proxied_connection() {
    let a = server("127.0.0.2", 0, "granted");
    let b = server("127.0.0.3", a.addr.port(), "other");
    let Some(f) = executor(
        "connection audit",
        &[lit(a.addr)],
        true,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    let events: Arc<Mutex<Vec<sandgate::AuditEvent>>> = Arc::default();
    let seen = Arc::clone(&events);
    f.ex.set_audit_sink(Some(Arc::new(move |e: &sandgate::AuditEvent| {
        seen.lock().unwrap().push(e.clone());
    })));
    let r = run(
        &f,
        &format!(
            "{CURL} -sS --max-time 20 'http://{}/x?token=SECRET1'",
            a.addr
        ),
    );
    assert_eq!(r.exit_code, 0, "{}", text(&r));
    let r = run(
        &f,
        &format!(
            "{CURL} -sS --max-time 20 -o /dev/null -w '%{{http_code}}' 'http://{}/y?token=SECRET2'",
            b.addr
        ),
    );
    assert_eq!(String::from_utf8_lossy(&r.stdout), "403", "{}", text(&r));
    assert_eq!(b.hits(), 0);
    // A connection is recorded as its relay ends.
    let deadline = Instant::now() + Duration::from_secs(20);
    let connects = loop {
        let connects: Vec<sandgate::AuditEvent> = events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.op == "connect")
            .cloned()
            .collect();
        if connects.len() >= 2 || Instant::now() > deadline {
            break connects;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let all = format!("{:?}", events.lock().unwrap());
    assert!(
        connects.iter().any(|e| e.path == a.addr.to_string()
            && e.outcome == sandgate::ErrorCode::Ok
            && e.size.is_some_and(|n| n > 0)),
        "no admitted connection to {} in {all}",
        a.addr
    );
    assert!(
        connects
            .iter()
            .any(|e| e.path == b.addr.to_string() && e.outcome == sandgate::ErrorCode::NetDenied),
        "no refused connection to {} in {all}",
        b.addr
    );
    assert!(!all.contains("SECRET"), "{all}");
}

/// The proxy's connection threads outlive `stop` by a moment, and each
/// reports its connection as it ends: once `dispose` (and so `Drop`, and
/// the C ABI's `sg_executor_free`) has returned, no report may reach the
/// audit sink, whose callback and user data the caller may free then.
#[test]
fn no_connection_is_reported_after_the_executor_is_disposed() {
    // A target that accepts and never answers: the relay is under way
    // when the executor is disposed.
    let listener = TcpListener::bind(("127.0.0.2", 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted_tx, accepted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            held.push(conn);
            let _ = accepted_tx.send(());
        }
    });
    let Some(f) = executor(
        "no report after dispose",
        &[lit(addr)],
        true,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let late: Arc<Mutex<Vec<sandgate::AuditEvent>>> = Arc::default();
    let (g, l) = (Arc::clone(&gone), Arc::clone(&late));
    f.ex.set_audit_sink(Some(Arc::new(move |e: &sandgate::AuditEvent| {
        // The exec itself, still in its call on the other thread, ends
        // after dispose as any call in flight does.
        if g.load(Ordering::SeqCst) && e.op == "connect" {
            l.lock().unwrap().push(e.clone());
        }
    })));
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ = f.ex.exec(
                &format!("{CURL} -sS --max-time 30 http://{addr}/"),
                ExecOptions::default(),
            );
        });
        accepted
            .recv_timeout(Duration::from_secs(20))
            .expect("the command's connection never reached the target");
        f.ex.dispose();
        gone.store(true, Ordering::SeqCst);
    });
    // The connection's thread ends once its sockets are shut; give a late
    // report time to arrive.
    std::thread::sleep(Duration::from_millis(500));
    let late = late.lock().unwrap();
    assert!(late.is_empty(), "reported after dispose returned: {late:?}");
}

/// A sink told of a connection may call back into its executor, as the C
/// ABI's contract allows: run a command (whose own report goes to the
/// sink) and change the sink. Before, the connection's report held the
/// executor's audit lock while the sink ran, and either call waited for
/// it forever on the proxy's thread.
#[test]
fn a_connection_report_may_call_back_into_its_executor() {
    let a = server("127.0.0.2", 0, "granted");
    let Some(Fixture { _dir, ex }) = executor(
        "connection report calls back",
        &[lit(a.addr)],
        true,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    // The sink needs the executor; it outlives the test's threads.
    let ex: &'static Executor = Box::leak(Box::new(ex));
    let (done_tx, done) = std::sync::mpsc::channel();
    let done_tx = Mutex::new(Some(done_tx));
    ex.set_audit_sink(Some(Arc::new(move |e: &sandgate::AuditEvent| {
        if e.op != "connect" {
            return;
        }
        let Some(tx) = done_tx.lock().unwrap().take() else {
            return;
        };
        let inner = ex.exec("echo inner", ExecOptions::default());
        ex.set_audit_sink(None);
        let _ = tx.send(inner.map(|r| r.stdout));
    })));
    // On a thread of its own: a sink that never returns may hold it too.
    let url = format!("http://{}/x", a.addr);
    let outer = std::thread::spawn(move || {
        ex.exec(
            &format!("{CURL} -sS --max-time 20 {url}"),
            ExecOptions::default(),
        )
    });
    let inner = done
        .recv_timeout(Duration::from_secs(60))
        .expect("the sink that called back into its executor never returned");
    assert_eq!(inner.unwrap(), b"inner\n");
    let r = outer.join().unwrap().unwrap();
    assert_eq!(r.exit_code, 0, "{}", text(&r));
    ex.dispose();
}

/// The executor's audit sink names a refused CONNECT target as it was
/// given when it does not parse (`evil.example:abc`, which the proxy
/// records whole with port 0), not bracketed as if it were an IPv6
/// address (it read `[evil.example:abc]:0`); an IPv6 address is still
/// bracketed.
#[test]
fn a_malformed_connect_target_is_audited_as_given() {
    let a = server("127.0.0.2", 0, "granted");
    let Some(f) = executor(
        "malformed target audit",
        &[lit(a.addr)],
        true,
        SecurityMode::Restricted,
        None,
    ) else {
        return;
    };
    let events: Arc<Mutex<Vec<sandgate::AuditEvent>>> = Arc::default();
    let seen = Arc::clone(&events);
    f.ex.set_audit_sink(Some(Arc::new(move |e: &sandgate::AuditEvent| {
        seen.lock().unwrap().push(e.clone());
    })));
    for target in ["evil.example:abc", "[fd00::1]:443"] {
        let r = python(
            &f,
            &raw_proxy_request(&format!(
                "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
            )),
        );
        let line = String::from_utf8_lossy(&r.stdout).into_owned();
        assert!(line.starts_with("HTTP/1.1 4"), "{target}: {}", text(&r));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let paths = loop {
        let paths: Vec<String> = events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.op == "connect")
            .map(|e| e.path.clone())
            .collect();
        if paths.len() >= 2 || Instant::now() > deadline {
            break paths;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(paths.contains(&"evil.example:abc".to_owned()), "{paths:?}");
    assert!(paths.contains(&"[fd00::1]:443".to_owned()), "{paths:?}");
    assert_eq!(a.hits(), 0);
}
