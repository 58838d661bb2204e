//! TLS interception under a host that takes signals without
//! `SA_RESTART`: a thread sends SIGALRM to every other thread of this
//! process whose name begins `sandgate-` (the proxy's) every millisecond,
//! so every blocking read of the proxy may answer EINTR (the test's own
//! client and upstream are spared: their reads are not the proxy's). The
//! storm is process-wide, so these tests live in a binary of their own;
//! the helpers are shared with `intercept.rs` (`support/`).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::ServerName;
use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{roots_from_pem, Proxy, ProxyConfig};

mod support;
use support::*;

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
