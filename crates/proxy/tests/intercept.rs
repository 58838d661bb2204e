//! TLS interception for hosts with credentials or request rules, attacked
//! from a client on the host loopback: the upstream sees the real
//! credential and the client never does; a forged header is replaced; a
//! request outside the rules reaches no upstream; an upstream the roots do
//! not trust is refused; kept-alive connections are judged per request;
//! other tunnels stay opaque.
//!
//! The upstreams are loopback TLS servers with certificates of a test CA
//! (the proxy's upstream roots hold that CA only). Every name resolves to
//! loopback through a test resolver, so the rules are trusted-host mode
//! with `localhost`; the hosts are told apart by port.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::ServerName;
use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{
    roots_from_pem, CertAuthority, Intercept, Proxy, ProxyConfig, RequestRule, Secret, Verdict,
};

mod support;
use support::*;

#[test]
fn the_upstream_sees_the_credential_and_a_forged_one_is_replaced_on_each_kept_alive_request() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    // HTTP/2 is not offered: the client falls back to HTTP/1.1.
    assert_eq!(tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (head, body) = request(
        &mut tls,
        "GET /repos/a HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer placeholder\r\n\r\n",
    );
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "{head:?} {:?}",
        s.proxy.requests()
    );
    assert_eq!(body, "path /repos/a\n");
    assert!(!head.contains(SECRET) && !body.contains(SECRET));
    // The same connection, a forged value in another spelling.
    let (head, body) = request(
        &mut tls,
        "POST /x HTTP/1.1\r\nHost: localhost\r\nauthorization: token forged\r\nContent-Length: 2\r\n\r\nhi",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "path /x\n");
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    for h in &heads {
        let auth: Vec<&str> = h
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("authorization:"))
            .collect();
        assert_eq!(auth, [format!("Authorization: Bearer {SECRET}")], "{h}");
        assert!(!h.contains("placeholder") && !h.contains("forged"), "{h}");
    }
    let reqs = s.proxy.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert!(reqs
        .iter()
        .all(|r| r.verdict == Verdict::Injected && r.status == 200));
    assert_eq!(reqs[0].path, "/repos/a");
    assert_eq!(reqs[1].method, "POST");
    assert!(!format!("{reqs:?}{:?}", s.proxy.audit()).contains(SECRET));
}

#[test]
fn the_upstream_connection_is_kept_alive_and_reopened_when_it_was_closed() {
    for close_after in [false, true] {
        let (pem, cfg) = test_ca();
        let up = upstream_with(cfg, close_after);
        let port = up.addr.port();
        let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        for path in ["/a", "/b", "/c"] {
            let (head, body) = request(
                &mut tls,
                &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
            );
            assert!(head.starts_with("HTTP/1.1 200"), "{close_after}: {head}");
            assert_eq!(body, format!("path {path}\n"));
        }
        let heads = up.heads.lock().unwrap().clone();
        assert_eq!(heads.len(), 3, "{heads:?}");
        assert!(heads.iter().all(|h| h.contains(SECRET)));
        assert!(heads
            .iter()
            .all(|h| !h.to_ascii_lowercase().contains("connection: close")));
        let want = if close_after { 3 } else { 1 };
        assert_eq!(
            up.conns.load(Ordering::SeqCst),
            want,
            "close_after {close_after}"
        );
        // Every upstream connection after the first resumes its TLS
        // session instead of repeating the full handshake.
        assert_eq!(
            up.resumed.load(Ordering::SeqCst),
            want - 1,
            "close_after {close_after}"
        );
        // The proxy offers AES-128-GCM first where it is the client.
        assert_eq!(up.aes128.load(Ordering::SeqCst), want);
    }
}

#[test]
fn a_chunked_upload_is_relayed_exactly_and_the_next_request_follows() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    // The chunked body and the next request in one write: the body ends at
    // its last chunk, and the next request is judged on its own.
    tls.write_all(
        b"POST /up HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n",
    )
    .unwrap();
    let (head, body) = request(&mut tls, "GET /after HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "path /up\n");
    let (head, body) = request(&mut tls, "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "path /after\n");
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert!(
        heads[0].ends_with("BODY:5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"),
        "{:?}",
        heads[0]
    );
    assert!(heads.iter().all(|h| h.contains(SECRET)));
    // Two framings at once are refused, with nothing sent upstream.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert_eq!(up.heads.lock().unwrap().len(), 2);
}

#[test]
fn outside_the_credential_s_paths_the_header_is_stripped() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = setup(
        &pem,
        vec![injection(port, &["GET"], &["/repos/org"])],
        vec![],
    );
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    for req in [
        "GET /repos/organization HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer mine\r\n\r\n",
        "DELETE /repos/org/x HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer mine\r\n\r\n",
        "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ] {
        let (head, _) = request(&mut tls, req);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 3);
    assert!(
        !heads[0].to_ascii_lowercase().contains("authorization"),
        "{}",
        heads[0]
    );
    assert!(
        !heads[1].to_ascii_lowercase().contains("authorization"),
        "{}",
        heads[1]
    );
    assert!(heads[2].contains(SECRET), "{}", heads[2]);
    let v: Vec<Verdict> = s.proxy.requests().iter().map(|r| r.verdict).collect();
    assert_eq!(v, [Verdict::Stripped, Verdict::Stripped, Verdict::Injected]);
}

/// The command's own header in the spelling a CGI-style server (WSGI,
/// CGI, Puma before CVE-2024-45614's fix) reads as the credential's
/// header, `_` for `-` (`X_Api_Key` is `HTTP_X_API_KEY` like
/// `X-Api-Key`), is removed as the header itself is: outside the
/// credential's paths it would be the header the server takes, and on an
/// injected request it would stand beside the real one.
#[test]
fn a_credential_header_spelled_with_underscores_is_removed_too() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let mut api_key = injection(port, &["GET"], &["/repos/org"]);
    api_key.header = "X-Api-Key".into();
    api_key.value = Secret::new(SECRET.as_bytes().to_vec()).unwrap();
    let s = setup(&pem, vec![api_key], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    for req in [
        "GET /other HTTP/1.1\r\nHost: localhost\r\nX_Api_Key: forged-by-the-command\r\n\r\n",
        "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\nx_api_key: forged-by-the-command\r\nX-API_KEY: forged-by-the-command\r\n\r\n",
    ] {
        let (head, _) = request(&mut tls, req);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2);
    for head in &heads {
        assert!(
            !head.contains("forged-by-the-command"),
            "the command's own credential header reached the upstream: {head}"
        );
    }
    assert!(heads[1].contains(SECRET), "{}", heads[1]);
    let v: Vec<Verdict> = s.proxy.requests().iter().map(|r| r.verdict).collect();
    assert_eq!(v, [Verdict::Stripped, Verdict::Injected]);
}

/// A proxy injecting the credential on every request to `port`, whose
/// rules allow GET under `/repos/org/` and deny `/repos/org/secret`.
fn org_but_secret(port: u16, pem: &str) -> Setup {
    let rules = vec![
        RequestRule {
            target: target(port, &["GET"], &["/repos/org/"]),
            allow: true,
            label: "net.rules[0]".into(),
        },
        RequestRule {
            target: target(port, &[], &["/repos/org/secret"]),
            allow: false,
            label: "net.rules[1]".into(),
        },
    ];
    setup(pem, vec![injection(port, &[], &[])], rules)
}

#[test]
fn a_request_outside_the_rules_reaches_no_upstream() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    for req in [
        "POST /repos/org/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n",
        "GET /repos/other/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "GET /repos/org/secret/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "GET /repos/org/../other/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "GET /repos/org/%2e%2e/other HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "GET /repos/org//secret/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "GET /repos/org/%73ecret/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, body) = request(&mut tls, req);
        assert!(head.starts_with("HTTP/1.1 403"), "{req}: {head}");
        assert!(body.starts_with("sandgate: "), "{body}");
    }
    assert_eq!(
        up.conns.load(Ordering::SeqCst),
        0,
        "a refused request reached the upstream"
    );
    let reqs = s.proxy.requests();
    assert_eq!(reqs.len(), 7);
    assert!(
        reqs.iter().all(|r| r.verdict == Verdict::Refused),
        "{reqs:?}"
    );
    assert_eq!(reqs[0].rule, "net.rules");
    assert_eq!(reqs[2].rule, "net.rules[1]");
    assert_eq!(reqs[6].rule, "net.rules[1]", "the decoded path is judged");
    // Inside the rules: through, with the credential.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(up.conns.load(Ordering::SeqCst), 1);
    let last = s.proxy.requests().pop().unwrap();
    assert_eq!(last.verdict, Verdict::Injected);
    assert_eq!(last.rule, "net.rules[0], net.credentials[0]");
}

#[test]
fn an_upstream_the_roots_do_not_trust_is_refused() {
    let (pem, _) = test_ca();
    let (_, other_cfg) = test_ca();
    let up = upstream(other_cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, body) = request(&mut tls, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    assert!(body.contains("certificate"), "{body}");
    assert!(up.heads.lock().unwrap().is_empty(), "a request reached it");
}

#[test]
fn other_tunnels_stay_opaque_and_a_fronted_hello_is_refused() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    // Credentials for another port: this one is not intercepted, so the
    // client must trust the upstream's own CA, and the proxy's is useless.
    let s = setup(&pem, vec![injection(port + 1, &[], &[])], vec![]);
    assert!(connect(s.addr, port, &s.ca).is_err());
    let mut tls = connect(s.addr, port, &pem).unwrap();
    let (head, _) = request(
        &mut tls,
        "GET / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer mine\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(up.heads.lock().unwrap()[0].contains("Bearer mine"));
    assert!(s.proxy.requests().is_empty());
}

/// A TLS session over a SOCKS5 tunnel to `localhost:port`.
fn socks_connect(
    proxy: SocketAddr,
    port: u16,
    ca_pem: &str,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut greet = [0u8; 2];
    s.read_exact(&mut greet).unwrap();
    assert_eq!(greet, [5, 0]);
    let mut req = vec![5, 1, 0, 3, 9];
    req.extend_from_slice(b"localhost");
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).unwrap();
    let mut answer = [0u8; 10];
    s.read_exact(&mut answer).unwrap();
    assert_eq!(answer[1], 0, "{answer:?}");
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots_from_pem(ca_pem))
        .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap())
            .unwrap();
    rustls::StreamOwned::new(conn, s)
}

#[test]
fn a_socks5_tunnel_to_an_intercepted_host_is_judged_too() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let rules = vec![RequestRule {
        target: target(port, &["GET"], &[]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![injection(port, &[], &[])], rules);
    let mut tls = socks_connect(s.addr, port, &s.ca);
    let (head, _) = request(&mut tls, "GET /s HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut tls = socks_connect(s.addr, port, &s.ca);
    let (head, _) = request(&mut tls, "DELETE /s HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(heads[0].contains(SECRET));
}

/// A plain-HTTP upstream that keeps each request head and answers `ok`.
fn plain_upstream() -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let (c, h) = (Arc::clone(&conns), Arc::clone(&heads));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            c.fetch_add(1, Ordering::SeqCst);
            let h = Arc::clone(&h);
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                h.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf).into_owned());
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
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

/// A proxy that speaks plain HTTP to hosts with rules, whose one rule
/// allows `methods` (all when empty) under `/ok` on `port`.
fn ok_only_http(port: u16, methods: &[&str], pem: &str) -> Setup {
    let rules = vec![RequestRule {
        target: target(port, methods, &["/ok"]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    setup_http(pem, Vec::new(), rules, true)
}

/// Sends `req` to the proxy at `addr` as a plain-HTTP client and answers
/// everything it got back before the connection ended.
fn exchange(addr: SocketAddr, req: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Asserts that `req`, sent in plain HTTP to the proxy at `addr`, is
/// answered `status` and that `up` got no connection.
fn refused_in_plain(addr: SocketAddr, req: &str, status: &str, up: &Upstream) {
    let a = exchange(addr, req);
    assert!(
        a.starts_with(status),
        "{a}, the upstream got {:?}",
        up.heads.lock().unwrap()
    );
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
}

#[test]
fn plain_http_to_an_intercepted_host_is_judged_and_never_carries_a_credential() {
    let (pem, _) = test_ca();
    let up = plain_upstream();
    let port = up.addr.port();
    let rules = || {
        vec![RequestRule {
            target: target(port, &[], &["/ok"]),
            allow: true,
            label: "net.rules[0]".into(),
        }]
    };
    // A host with a credential: plain text is refused, nothing is sent
    // (the credential would cross the network readable).
    let s = setup_http(&pem, vec![injection(port, &[], &[])], rules(), true);
    let a = exchange(
        s.addr,
        &format!(
            "GET http://localhost:{port}/ok/1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer forged\r\n\r\n"
        ),
    );
    assert!(a.starts_with("HTTP/1.1 403"), "{a}");
    assert!(a.contains("only over TLS"), "{a}");
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    let v: Vec<Verdict> = s.proxy.requests().iter().map(|r| r.verdict).collect();
    assert_eq!(v, [Verdict::Refused]);
    // A host with rules only: judged by them in plain text too.
    let s = ok_only_http(port, &[], &pem);
    let a = exchange(
        s.addr,
        &format!("GET http://localhost:{port}/ok/1 HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    );
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    let a = exchange(
        s.addr,
        &format!("GET http://localhost:{port}/other HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    );
    assert!(a.starts_with("HTTP/1.1 403"), "{a}");
    assert_eq!(up.conns.load(Ordering::SeqCst), 1);
    let heads = up.heads.lock().unwrap().clone();
    assert!(!heads[0].contains(SECRET), "{}", heads[0]);
    let v: Vec<Verdict> = s.proxy.requests().iter().map(|r| r.verdict).collect();
    assert_eq!(v, [Verdict::Forwarded, Verdict::Refused]);
}

#[test]
fn the_authority_s_pem_holds_no_key() {
    let a = CertAuthority::generate(&["api.example.com".to_owned()]).unwrap();
    let pem = a.certificate_pem();
    assert!(pem.contains("BEGIN CERTIFICATE"));
    assert!(!pem.contains("PRIVATE KEY"));
    assert!(!format!("{a:?}").contains("PRIVATE"));
}

#[test]
fn a_value_with_a_line_break_is_refused() {
    assert!(Secret::new(b"a\r\nX-Evil: 1".to_vec()).is_err());
    assert!(Secret::new(Vec::new()).is_err());
    assert!(!format!("{:?}", Secret::new(b"tok".to_vec()).unwrap()).contains("tok"));
}

/// Rules that admit GET under `/repos/org/` only, and a credential.
fn org_only(port: u16, pem: &str) -> Setup {
    let rules = vec![RequestRule {
        target: target(port, &["GET"], &["/repos/org/"]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    setup(pem, vec![injection(port, &[], &[])], rules)
}

/// A bare LF is a line end to many servers (RFC 9112 lets a recipient
/// take it as one): inside a header value or the request target it would
/// end the head early and start a request the proxy never judged, with
/// the credential the proxy appends. A lone CR or a NUL is refused as
/// well; nothing reaches the upstream.
#[test]
fn a_line_break_or_control_byte_inside_a_header_or_the_target_is_refused() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_only(port, &pem);
    for req in [
        "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\nX-A: a\n\nDELETE /repos/other HTTP/1.1\nHost: localhost\r\n\r\n",
        "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\nX-A: a\rContent-Length: 40\r\n\r\n",
        "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\nX-A: a\0b\r\n\r\n",
        "GET /repos/org/x?a\n\nDELETE\t/repos/other HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(&mut tls, req);
        assert!(
            head.starts_with("HTTP/1.1 400"),
            "{req:?}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
}

/// The same smuggling in plain HTTP to a host with rules: the second
/// request would reach the upstream without being judged.
#[test]
fn a_line_break_inside_a_plain_http_header_is_refused() {
    let (pem, _) = test_ca();
    let up = plain_upstream();
    let port = up.addr.port();
    let s = ok_only_http(port, &[], &pem);
    refused_in_plain(
        s.addr,
        &format!(
            "GET http://localhost:{port}/ok/1 HTTP/1.1\r\nHost: localhost\r\n\
             X-A: a\n\nGET /other HTTP/1.1\nHost: localhost\r\n\r\n"
        ),
        "HTTP/1.1 400",
        &up,
    );
}

/// A loopback TLS upstream that keeps every byte it got, whatever the
/// framing, and answers `200` with an empty body to each `\r\n\r\n`.
struct Raw {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<u8>>>,
}

fn raw_upstream(config: rustls::ServerConfig) -> Raw {
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = Arc::clone(&got);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (config, g) = (Arc::clone(&config), Arc::clone(&g));
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut mine = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    match tls.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            g.lock().unwrap().extend_from_slice(&chunk[..n]);
                            mine.extend_from_slice(&chunk[..n]);
                        }
                    }
                    while let Some(i) = mine.windows(4).position(|w| w == b"\r\n\r\n") {
                        mine.drain(..i + 4);
                        let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                        let _ = tls.flush();
                    }
                }
            });
        }
    });
    Raw { addr, got }
}

/// A chunk size past what 64 bits hold with its CRLF once crashed the
/// connection's thread (an arithmetic overflow), which left its slot of
/// the connection cap taken and the client's socket open for ever. It is
/// refused; the connection ends.
#[test]
fn a_huge_chunk_size_is_refused_and_the_connection_ends() {
    let (pem, cfg) = test_ca();
    let up = raw_upstream(cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (head, _) = request(
        &mut tls,
        "POST /up HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
         ffffffffffffffff\r\nx\r\n0\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 4"), "{head:?}");
    drop(tls);
    // The head, judged and allowed, has gone out; nothing of the body from
    // the bad chunk line on does (the upstream is given time to log what
    // it may have been sent).
    std::thread::sleep(Duration::from_millis(100));
    let got = String::from_utf8_lossy(&up.got.lock().unwrap()).into_owned();
    assert!(got.ends_with("\r\n\r\n"), "the upstream got {got:?}");
    assert!(!got.contains("ffff"), "the upstream got {got:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while s.proxy.active() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the connection's slot was never given back"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A chunked request body is relayed as it came, so its framing must be
/// what every server reads the same way (RFC 9112 section 7.1): a chunk
/// size of hex digits only, an extension and a trailer without control
/// bytes, a CRLF after each chunk's data. A bare LF in an extension or a
/// trailer would end the body early for a server that takes it as a line
/// end, and the rest would be a request the rules never judged. Each is
/// refused (400) before its line reaches the upstream.
#[test]
fn a_chunked_body_framed_two_ways_never_reaches_the_upstream() {
    let (pem, cfg) = test_ca();
    let up = raw_upstream(cfg);
    let port = up.addr.port();
    let rules = vec![RequestRule {
        target: target(port, &["GET", "POST"], &["/repos/org/"]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![injection(port, &[], &[])], rules);
    let smuggled = "DELETE /repos/other HTTP/1.1\nHost: localhost\n";
    for (body, never) in [
        (format!("0;x\n\n{smuggled}\n\r\n\r\n"), "DELETE"),
        (format!("0\r\nX-T: a\n\n{smuggled}\r\n\r\n"), "DELETE"),
        ("5\r\nhelloXY0\r\n\r\n".to_owned(), "helloXY"),
        ("+5\r\nhello\r\n0\r\n\r\n".to_owned(), "+5"),
        ("5 \r\nhello\r\n0\r\n\r\n".to_owned(), "5 \r\n"),
        ("5\r\nhello\r\n0\r\nX T: a\r\n\r\n".to_owned(), "X T"),
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        tls.sock
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let (head, _) = request(
            &mut tls,
            &format!(
                "POST /repos/org/x HTTP/1.1\r\nHost: localhost\r\n\
                 Transfer-Encoding: chunked\r\n\r\n{body}"
            ),
        );
        drop(tls);
        std::thread::sleep(Duration::from_millis(100));
        let got = String::from_utf8_lossy(&up.got.lock().unwrap()).into_owned();
        assert!(
            head.starts_with("HTTP/1.1 400") && !got.contains(never),
            "{body:?}: {head:?}, the upstream got {got:?}"
        );
    }
}

/// Trailer fields of a chunked request are header fields a server may
/// merge into the head (Apache's `MergeTrailers`, on by default before
/// 2.4.11: CVE-2013-5704; Tomcat's `allowedTrailerHeaders`), where the
/// proxy never judged them: a forged credential header the proxy removes
/// from the head, a method override it refuses there. They are refused
/// (400) before any reaches the upstream; a chunked body without them
/// still goes through.
#[test]
fn trailer_fields_cannot_carry_what_the_head_may_not() {
    let (pem, cfg) = test_ca();
    let up = raw_upstream(cfg);
    let port = up.addr.port();
    let rules = vec![RequestRule {
        target: target(port, &["GET", "POST"], &["/repos/org/"]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![injection(port, &["GET"], &[])], rules);
    for trailer in [
        "Authorization: Bearer forged-by-the-command",
        "X-HTTP-Method-Override: DELETE",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        tls.sock
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let (head, body) = request(
            &mut tls,
            &format!(
                "POST /repos/org/x HTTP/1.1\r\nHost: localhost\r\n\
                 Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n{trailer}\r\n\r\n"
            ),
        );
        drop(tls);
        std::thread::sleep(Duration::from_millis(100));
        let got = String::from_utf8_lossy(&up.got.lock().unwrap()).into_owned();
        let name = trailer.split(':').next().unwrap();
        assert!(
            !got.contains(name),
            "a trailer field the proxy never judged reached the upstream: {got:?}"
        );
        assert!(head.starts_with("HTTP/1.1 400"), "{head:?}");
        assert!(body.contains("trailer"), "{body:?}");
    }
    // Without trailer fields the chunked body goes through.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "POST /repos/org/x HTTP/1.1\r\nHost: localhost\r\n\
         Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head:?}");
}

/// `Content-Length` is digits only (RFC 9112): a sign was read by the
/// proxy as a length and forwarded as it came, where a server that
/// refuses the value, or takes it as no length at all, reads the body as
/// the next request, one the rules never judged. It is refused, through a
/// tunnel and in plain HTTP.
#[test]
fn a_content_length_with_a_sign_is_refused() {
    let (pem, cfg) = test_ca();
    let up = raw_upstream(cfg);
    let port = up.addr.port();
    let s = org_only(port, &pem);
    let smuggled = "DELETE /repos/other HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (head, _) = request(
        &mut tls,
        &format!(
            "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: +{}\r\n\r\n{smuggled}",
            smuggled.len()
        ),
    );
    let got = String::from_utf8_lossy(&up.got.lock().unwrap()).into_owned();
    assert!(
        head.starts_with("HTTP/1.1 400") && got.is_empty(),
        "{head:?}, the upstream got {got:?}"
    );
    let plain = plain_upstream();
    let port = plain.addr.port();
    let s = ok_only_http(port, &[], &pem);
    refused_in_plain(
        s.addr,
        &format!(
            "POST http://localhost:{port}/ok/1 HTTP/1.1\r\nHost: localhost\r\n\
             Content-Length: +{}\r\n\r\n{smuggled}",
            smuggled.len()
        ),
        "HTTP/1.1 400",
        &plain,
    );
}

/// Path parameters and fragments: servlet containers (Tomcat, Jetty,
/// Spring) cut `;…` from each segment before they resolve dot segments, so
/// `/repos/org/..;/other` is `/repos/other` to them, outside an allow list
/// the proxy judged it inside of, and `/repos/org/secret;x` is the
/// deny-listed `/repos/org/secret`. A `#` never belongs in a request
/// target: a server that does not cut it there reads the dot segments
/// after it. Each is refused with nothing sent.
#[test]
fn path_parameters_and_fragments_cannot_escape_the_rules() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    for path in [
        "/repos/org/..;/other",
        "/repos/org/%2e%2e;/other",
        "/repos/org/x/..%3b/..;x/other",
        "/repos/org/secret;x",
        "/repos/org/secret;/x",
        "/repos/org/x#/../../other",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(
            &mut tls,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        );
        assert!(
            head.starts_with("HTTP/1.1 403"),
            "{path}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    assert!(s
        .proxy
        .requests()
        .iter()
        .all(|r| r.verdict == Verdict::Refused));
}

/// Methods are matched exactly, in upper case; Django and Werkzeug (Flask)
/// upper-case the method they are given, so `delete` is DELETE to them
/// and a deny rule on DELETE must not let it through. A method with a
/// lower-case letter is refused with nothing sent.
#[test]
fn a_method_in_lower_case_cannot_escape_a_deny_rule() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let rules = vec![RequestRule {
        target: target(port, &["DELETE"], &[]),
        allow: false,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![injection(port, &[], &[])], rules);
    for method in ["delete", "Delete"] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(
            &mut tls,
            &format!("{method} /repos/org/x HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        );
        assert!(
            head.starts_with("HTTP/1.1 403"),
            "{method}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    // Upper case goes through.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

/// A plain-HTTP websocket upgrade to a host with rules: once relayed, the
/// connection is a byte pipe, so when the server does not switch
/// protocols (it answers 200 and keeps the connection), the next request
/// on it reaches the server without being judged. An upgrade is refused
/// on such a host, as through TLS.
#[test]
fn a_websocket_upgrade_in_plain_http_cannot_carry_unjudged_requests() {
    let (pem, _) = test_ca();
    // A plain server that keeps every byte and answers each head with 200,
    // keeping the connection.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = Arc::clone(&got);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let g = Arc::clone(&g);
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut mine = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            g.lock().unwrap().extend_from_slice(&chunk[..n]);
                            mine.extend_from_slice(&chunk[..n]);
                        }
                    }
                    while let Some(i) = mine.windows(4).position(|w| w == b"\r\n\r\n") {
                        mine.drain(..i + 4);
                        let _ =
                            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
                    }
                }
            });
        }
    });
    let s = ok_only_http(port, &["GET"], &pem);
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        c,
        "GET http://localhost:{port}/ok/ws HTTP/1.1\r\nHost: localhost\r\n\
         Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    .unwrap();
    let mut first = [0u8; 12];
    c.read_exact(&mut first).unwrap();
    // The refused request is answered and the connection closed; a relayed
    // one gets the server's 200 and stays open for the next request.
    let _ = c.write_all(b"DELETE /other HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    let got = String::from_utf8_lossy(&got.lock().unwrap()).into_owned();
    assert!(
        first.starts_with(b"HTTP/1.1 403") && got.is_empty(),
        "{:?}, the server got {got:?}",
        String::from_utf8_lossy(&first)
    );
}

/// TRACE (and IIS's TRACK) makes a server answer with the request it got,
/// headers included (Apache httpd's `TraceEnable` is on by default): a
/// credential set on it would come back to the command whole. RFC 9110
/// (9.3.8) says a client should not send sensitive fields on TRACE, so
/// the proxy never sets one there; the command's own header is removed as
/// on any request outside the credential's methods.
#[test]
fn a_trace_request_never_carries_the_credential() {
    let (pem, cfg) = test_ca();
    // An upstream that answers every request with its head, as TRACE does.
    let config = Arc::new(cfg);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut buf = Vec::new();
                loop {
                    let Some(mut head) = next_head(&mut tls, &mut buf) else {
                        return;
                    };
                    head.extend_from_slice(b"\r\n\r\n");
                    let _ = write!(
                        tls,
                        "HTTP/1.1 200 OK\r\nContent-Type: message/http\r\nContent-Length: {}\r\n\r\n",
                        head.len()
                    );
                    let _ = tls.write_all(&head);
                    let _ = tls.flush();
                }
            });
        }
    });
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    for method in ["TRACE", "TRACK"] {
        let (head, body) = request(
            &mut tls,
            &format!(
                "{method} / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer mine\r\n\r\n"
            ),
        );
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            !body.contains(SECRET) && !body.contains("mine"),
            "{method} echoed {body:?}"
        );
    }
    // Any other method gets it.
    let (_, body) = request(&mut tls, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(body.contains(SECRET), "{body}");
    let v: Vec<Verdict> = s.proxy.requests().iter().map(|r| r.verdict).collect();
    assert_eq!(v, [Verdict::Stripped, Verdict::Stripped, Verdict::Injected]);
}

/// A server that ignores the body of a GET (a "CL.0" server: many do on
/// some paths) reads that body as the next request. When the body opens a
/// request whose own body is still to come, the next request the proxy
/// sends on that connection, with the credential in its head, becomes
/// that body, and an endpoint that echoes or stores it hands the secret
/// to the command. A connection that carried a body is therefore never
/// used again.
#[test]
fn a_body_the_upstream_ignores_cannot_swallow_the_next_request() {
    let (pem, cfg) = test_ca();
    let config = Arc::new(cfg);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let mut fill = |tls: &mut rustls::StreamOwned<_, _>, buf: &mut Vec<u8>| match tls
                    .read(&mut chunk)
                {
                    Ok(0) | Err(_) => false,
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        true
                    }
                };
                loop {
                    let Some(head) = next_head(&mut tls, &mut buf) else {
                        return;
                    };
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    // GET bodies are ignored (left for the next request);
                    // a POST's body is echoed.
                    let body = if head.starts_with("POST") {
                        while buf.len() < len {
                            if !fill(&mut tls, &mut buf) {
                                return;
                            }
                        }
                        buf.drain(..len).collect()
                    } else {
                        b"plain".to_vec()
                    };
                    let _ = write!(
                        tls,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    let _ = tls.write_all(&body);
                    let _ = tls.flush();
                }
            });
        }
    });
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let smuggled = "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 90\r\n\r\n";
    let (head, _) = request(
        &mut tls,
        &format!(
            "GET /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{smuggled}",
            smuggled.len()
        ),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, body) = request(&mut tls, "GET /b HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(
        !body.contains("ghp_") && !head.contains("ghp_"),
        "the command read {body:?}"
    );
    assert_eq!(body, "plain");
}

/// A method override header (`X-HTTP-Method-Override` and its kin) makes
/// Rails (Rack::MethodOverride, on by default), Express's method-override
/// and Google's APIs act on the method it names, not the one the rules
/// judged: a POST the rules admit would be a DELETE they refuse. Such a
/// request is refused on an intercepted host, through TLS and in plain
/// HTTP.
#[test]
fn a_method_override_header_cannot_escape_the_method_rules() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let rules = vec![RequestRule {
        target: target(port, &["GET", "POST"], &["/repos/org/"]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![injection(port, &[], &[])], rules);
    for header in [
        "X-HTTP-Method-Override",
        "x-http-method",
        "X-Method-Override",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(
            &mut tls,
            &format!(
                "POST /repos/org/x HTTP/1.1\r\nHost: localhost\r\n{header}: DELETE\r\n\
                 Content-Length: 0\r\n\r\n"
            ),
        );
        assert!(
            head.starts_with("HTTP/1.1 403"),
            "{header}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    // In plain HTTP to a host with rules.
    let plain = plain_upstream();
    let port = plain.addr.port();
    let s = ok_only_http(port, &["POST"], &pem);
    refused_in_plain(
        s.addr,
        &format!(
            "POST http://localhost:{port}/ok/1 HTTP/1.1\r\nHost: localhost\r\n\
             X-HTTP-Method-Override: DELETE\r\nContent-Length: 0\r\n\r\n"
        ),
        "HTTP/1.1 403",
        &plain,
    );
}

/// Requests pipelined in one write are judged one by one: the allowed one
/// gets the credential, the refused one is answered 403 and ends the
/// connection, and nothing after it reaches the upstream.
#[test]
fn pipelined_requests_in_one_write_are_judged_one_by_one() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_only(port, &pem);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.write_all(
        b"GET /repos/org/a HTTP/1.1\r\nHost: localhost\r\n\r\n\
          GET /repos/other HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer mine\r\n\r\n\
          GET /repos/org/b HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .unwrap();
    let (head, body) = request(&mut tls, "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "path /repos/org/a\n");
    let (head, _) = request(&mut tls, "");
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let mut rest = Vec::new();
    let _ = tls.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(heads[0].starts_with("GET /repos/org/a ") && heads[0].contains(SECRET));
    let v: Vec<Verdict> = s.proxy.requests().iter().map(|r| r.verdict).collect();
    assert_eq!(v, [Verdict::Injected, Verdict::Refused]);
}

/// The TLS handshake with a client of an intercepted host is read by the
/// proxy's own TLS server, and it too meets the handshake timeout as one
/// deadline: it bounded each read, so a client sending its ClientHello a
/// byte at a time, each just inside the timeout, held its place of the
/// connection cap for as long as it liked.
#[test]
fn a_client_that_trickles_its_hello_to_an_intercepted_host_meets_the_handshake_timeout() {
    let (pem, _) = test_ca();
    // Never dialled: no request ever comes.
    let port = 9;
    let authority = Arc::new(CertAuthority::generate(&["localhost".to_owned()]).unwrap());
    let intercept = Intercept {
        authority,
        upstream_roots: Arc::new(roots_from_pem(&pem)),
        injections: vec![injection(port, &[], &[])],
        rules: vec![],
    };
    let allow = vec![NetEntry::parse("localhost").unwrap()];
    let mut config = ProxyConfig::new(Rules::new(Mode::TrustedHost, allow, false));
    config.resolver =
        Arc::new(|_: &str, _: u16, _: Duration| Ok(vec!["127.0.0.1".parse().unwrap()]));
    config.intercept = Some(Arc::new(intercept));
    config.handshake_timeout = Duration::from_millis(300);
    let proxy = Proxy::new(config);
    let addr = proxy
        .serve(TcpListener::bind("127.0.0.1:0").unwrap().into())
        .unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "CONNECT localhost:{port} HTTP/1.1\r\n\r\n").unwrap();
    let mut head = [0u8; 39];
    s.read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"HTTP/1.1 200"));
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap())
            .unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    // A byte every 100 ms for 1.5 s: five timeouts' worth, each read well
    // inside one.
    let start = std::time::Instant::now();
    for b in hello.iter().take(15) {
        if s.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        proxy.active(),
        0,
        "a ClientHello trickled for {:?} still holds a connection",
        start.elapsed()
    );
    proxy.stop();
}

/// A method override in the query: Symfony and Laravel read `_method` from
/// the query of a POST (PHP turns `.method`, ` _method` and `_method[…]`
/// into that name too), Express's method-override reads it there when told
/// to, as do others: `POST /x?_method=DELETE` would be a DELETE the rules
/// refuse. Such a request is refused on an intercepted host, through TLS
/// and in plain HTTP; `_method` as a value, or another name, is not.
#[test]
fn a_method_override_in_the_query_cannot_escape_the_method_rules() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let rules = vec![RequestRule {
        target: target(port, &["GET", "POST"], &["/repos/org/"]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![injection(port, &[], &[])], rules);
    for query in [
        "_method=DELETE",
        "a=1&_method=DELETE",
        "a=1;_method=DELETE",
        "%5Fmethod=DELETE",
        "_METHOD=delete",
        ".method=DELETE",
        "+_method=DELETE",
        "_method[]=DELETE",
        "_method%00x=DELETE",
        "_method",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(
            &mut tls,
            &format!(
                "POST /repos/org/x?{query} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"
            ),
        );
        assert!(
            head.starts_with("HTTP/1.1 403"),
            "{query}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    for query in ["q=_method", "_methods=1", "method=DELETE"] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(
            &mut tls,
            &format!(
                "POST /repos/org/x?{query} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"
            ),
        );
        assert!(head.starts_with("HTTP/1.1 200"), "{query}: {head:?}");
    }
    // In plain HTTP to a host with rules.
    let plain = plain_upstream();
    let port = plain.addr.port();
    let s = ok_only_http(port, &["POST"], &pem);
    refused_in_plain(
        s.addr,
        &format!(
            "POST http://localhost:{port}/ok/1?_method=DELETE HTTP/1.1\r\nHost: localhost\r\n\
             Content-Length: 0\r\n\r\n"
        ),
        "HTTP/1.1 403",
        &plain,
    );
}

/// A loopback TLS upstream that reads the second request of each
/// connection and closes it without an answer (as a server that acted on
/// it and then failed, or a keep-alive timer that ran out as it arrived):
/// answers every other request. Keeps every request head it read.
fn upstream_dropping_second(config: rustls::ServerConfig) -> Upstream {
    tls_upstream(config, |tls, buf, h| {
        for n in 1.. {
            let Some(head) = next_head(tls, buf) else {
                return;
            };
            h.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            if n == 2 {
                tls.conn.send_close_notify();
                let _ = tls.flush();
                return;
            }
            let _ = write!(tls, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
            let _ = tls.flush();
        }
    })
}

/// A request whose method is not idempotent (a POST or PATCH without a
/// body) is sent once, whatever becomes of the kept-alive upstream
/// connection: the proxy used to send it on that connection and, when the
/// connection closed without an answer, send it again on a fresh one, so a
/// server that had acted on it acted twice (RFC 9112, 9.3.1: a proxy must
/// not retry a non-idempotent request). A GET is still sent again.
#[test]
fn a_request_that_is_not_idempotent_is_never_sent_twice() {
    let (pem, cfg) = test_ca();
    let up = upstream_dropping_second(cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    for (i, method) in ["GET", "POST", "GET", "PATCH", "GET"]
        .into_iter()
        .enumerate()
    {
        let path = format!("/{i}");
        let (head, _) = request(
            &mut tls,
            &format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"),
        );
        assert!(head.starts_with("HTTP/1.1 200"), "{method} {path}: {head}");
        let heads = up.heads.lock().unwrap().clone();
        let sent = heads
            .iter()
            .filter(|h| h.starts_with(&format!("{method} {path} ")))
            .count();
        assert!(
            sent == 1 || (method == "GET" && sent == 2),
            "{method} {path} reached the upstream {sent} times: {heads:?}"
        );
    }
    let heads = up.heads.lock().unwrap().clone();
    for m in ["POST", "PATCH"] {
        assert_eq!(
            heads.iter().filter(|h| h.starts_with(m)).count(),
            1,
            "{heads:?}"
        );
    }
}

/// A kept-alive connection to an intercepted host on which the client
/// sends nothing more is closed once idle, silently: the proxy used to
/// answer the timeout of its read with a `400 Bad Request` that no request
/// asked for, which a client sending its next request just then would
/// take for that request's answer.
#[test]
fn an_idle_kept_alive_connection_is_closed_without_an_answer_nobody_asked_for() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = setup_tuned(&pem, vec![injection(port, &[], &[])], vec![], false, |c| {
        c.idle_timeout = Duration::from_millis(300)
    });
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(&mut tls, "GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Nothing more is sent: the proxy closes the connection once idle.
    let mut rest = Vec::new();
    let _ = tls.read_to_end(&mut rest);
    assert!(
        rest.is_empty(),
        "the idle connection got {:?}",
        String::from_utf8_lossy(&rest)
    );
    assert_eq!(s.proxy.requests().len(), 1);
}

/// An upstream that completes TLS, reads a request and never answers.
fn silent_upstream(config: rustls::ServerConfig) -> (SocketAddr, Arc<Mutex<Vec<TcpStream>>>) {
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let h = Arc::clone(&held);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (config, h) = (Arc::clone(&config), Arc::clone(&h));
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut buf = Vec::new();
                if next_head(&mut tls, &mut buf).is_some() {
                    h.lock().unwrap().push(tls.sock);
                }
            });
        }
    });
    (addr, held)
}

/// An upstream that never answers is given up on after the idle timeout,
/// and the `502` says so in words (it used to say "Resource temporarily
/// unavailable (os error 11)", the read's raw error).
#[test]
fn an_upstream_that_never_answers_is_named_as_such() {
    let (pem, cfg) = test_ca();
    let (addr, _held) = silent_upstream(cfg);
    let port = addr.port();
    let s = setup_tuned(&pem, vec![injection(port, &[], &[])], vec![], false, |c| {
        c.idle_timeout = Duration::from_millis(300)
    });
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, body) = request(&mut tls, "GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    assert!(
        body.contains("localhost sent nothing for 300ms (the idle timeout)"),
        "{body}"
    );
}

/// A deny prefix covers the spellings servers route to the same action:
/// `/admin.json` (Rails formats, Spring's suffix patterns), `/admin%3F`
/// (decoded to `/admin?`, which a server re-reading the path takes as
/// `/admin` and a query), and other letter cases (ASP.NET, Spring with
/// case-insensitive matching, IIS), ASCII or not (`ı` and `ſ` upper-case
/// to `I` and `S`). An allow prefix stays exact: it admits none of these.
#[test]
fn a_deny_prefix_covers_suffixes_and_letter_cases_an_allow_prefix_does_not() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let rules = vec![
        RequestRule {
            target: target(port, &[], &["/admin"]),
            allow: false,
            label: "net.rules[0]".into(),
        },
        RequestRule {
            target: target(port, &[], &["/private/"]),
            allow: false,
            label: "net.rules[1]".into(),
        },
    ];
    let s = setup(&pem, vec![injection(port, &[], &[])], rules);
    for path in [
        "/admin",
        "/admin/x",
        "/admin.json",
        "/admin%2Ejson",
        "/admin%3F",
        "/admin%3Fx=1",
        "/admin%23",
        "/admin%20",
        "/admin.",
        "/ADMIN",
        "/Admin/x",
        "/%41dmin.json",
        "/admin;x",
        "/adm%C4%B1n.json",
        "/private",
        "/PRIVATE/x",
        "/private.json",
        "/pr%C4%B1vate/x",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(
            &mut tls,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        );
        assert!(
            head.starts_with("HTTP/1.1 403"),
            "{path}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    // Another word that starts with the prefix is not the prefix.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "GET /administrators HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    // The same spellings under an allow prefix are refused: it admits the
    // path it names and what lies beneath it, nothing else.
    let rules = vec![RequestRule {
        target: target(port, &[], &["/public"]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![injection(port, &[], &[])], rules);
    for path in ["/public.json", "/PUBLIC", "/public%3F", "/publi%C5%BF"] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(
            &mut tls,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        );
        assert!(head.starts_with("HTTP/1.1 403"), "{path}: {head:?}");
    }
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "GET /public/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

/// A path that still holds an escape once decoded (`%252e` is `%2e` to
/// the proxy) reads as another path to a server that decodes twice (an
/// nginx passing on `$uri`, an application decoding a path its server
/// already decoded): `/repos/org/%252e%252e/other` is under the allow
/// prefix to the proxy and `/repos/other` to that server, and
/// `/repos/org/%2573ecret` escapes the deny rule. No prefix could be
/// judged for both readings, so such a path is refused.
#[test]
fn a_path_that_decodes_twice_cannot_escape_the_rules() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    for path in [
        "/repos/org/%252e%252e/other",
        "/repos/org/%252E%252E/%252E%252E/admin",
        "/repos/org/x%252f..%252f..%252fother",
        "/repos/org/%2573ecret",
        "/repos/org/%25%37%33ecret",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, body) = request(
            &mut tls,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        );
        assert!(
            head.starts_with("HTTP/1.1 403"),
            "{path}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
        assert!(body.contains("escape"), "{path}: {body}");
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    // A `%` that starts no escape once decoded is only a `%`.
    for path in [
        "/repos/org/100%25",
        "/repos/org/100%25-off",
        "/repos/org/%25zz",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(
            &mut tls,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        );
        assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head:?}");
    }
}

/// Symfony (before 2.7.49, 2.8.44, 3.3.18, 3.4.14, 4.0.14 and 4.1.3;
/// CVE-2018-14773), Zend Framework and Laminas route by an
/// `X-Original-URL` or `X-Rewrite-URL` header instead of the request
/// line's path: a request for an allowed path naming a refused one there
/// would reach the refused action with the credential. Such a request is
/// refused on an intercepted host, through TLS and in plain HTTP.
#[test]
fn a_path_override_header_cannot_escape_the_path_rules() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    for header in ["X-Original-URL", "x-rewrite-url"] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, body) = request(
            &mut tls,
            &format!(
                "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\n{header}: /repos/org/secret\r\n\r\n"
            ),
        );
        assert!(
            head.starts_with("HTTP/1.1 403"),
            "{header}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
        assert!(
            body.to_ascii_lowercase()
                .contains(&header.to_ascii_lowercase()),
            "{body}"
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    let plain = plain_upstream();
    let port = plain.addr.port();
    let s = ok_only_http(port, &[], &pem);
    refused_in_plain(
        s.addr,
        &format!(
            "GET http://localhost:{port}/ok/1 HTTP/1.1\r\nHost: localhost\r\n\
             X-Original-URL: /admin\r\n\r\n"
        ),
        "HTTP/1.1 403",
        &plain,
    );
}

/// A server behind a shared front (a CDN, a multi-tenant reverse proxy, a
/// framework trusting forwarded headers) may route by `X-Forwarded-Host`,
/// `Forwarded: host=` and their kin rather than by the connection's own
/// host: a request to the granted host naming another there would carry
/// the credential to whatever that front serves under the other name.
/// Such a request is refused on an intercepted host, in any spelling the
/// CGI convention joins (`X_Forwarded_Host`), with nothing sent.
#[test]
fn a_host_override_header_is_refused_on_an_intercepted_host() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    for (header, value) in [
        ("X-Forwarded-Host", "evil.example"),
        ("x_forwarded_host", "evil.example"),
        ("Forwarded", "for=10.0.0.1;host=evil.example"),
        ("X-Host", "evil.example"),
        ("X-Forwarded-Server", "evil.example"),
        ("X-HTTP-Host-Override", "evil.example"),
        ("X-Original-Host", "evil.example"),
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, body) = request(
            &mut tls,
            &format!("GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\n{header}: {value}\r\n\r\n"),
        );
        assert!(
            head.starts_with("HTTP/1.1 403"),
            "{header}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
        assert!(
            body.to_ascii_lowercase()
                .contains(&header.to_ascii_lowercase().replace('_', "-")),
            "{body}"
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    // The request without one goes through.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head:?}");
}

/// Rails, Flask, Express, Django and Go's routers answer `HEAD` with the
/// `GET` handler: the action runs (and its headers come back), so a deny
/// rule that names `GET` covers `HEAD` too. An allow rule naming `GET`
/// still admits only `GET`.
#[test]
fn a_deny_rule_on_get_covers_head() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let rules = vec![RequestRule {
        target: target(port, &["GET"], &["/admin"]),
        allow: false,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![injection(port, &[], &[])], rules);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "HEAD /admin/delete-all HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(
        head.starts_with("HTTP/1.1 403"),
        "{head:?}, the upstream got {:?}",
        up.heads.lock().unwrap()
    );
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    assert_eq!(s.proxy.requests()[0].rule, "net.rules[0]");
    // Another method the rule does not name passes.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "OPTIONS /admin HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head:?}");
    // An allow rule naming GET does not admit HEAD.
    let rules = vec![RequestRule {
        target: target(port, &["GET"], &["/public"]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![injection(port, &[], &[])], rules);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(&mut tls, "HEAD /public HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 403"), "{head:?}");
}

/// CGI-style servers map header names to `HTTP_…` keys with `-` turned
/// into `_`, so `X_HTTP_Method_Override` and `X-HTTP-Method-Override` are
/// one header to them (Puma before 6.4.3 and 5.6.9, CVE-2024-45614, and
/// any WSGI or CGI server that keeps underscored names). An override
/// header spelled with underscores is refused as the dashed one is.
#[test]
fn an_override_header_spelled_with_underscores_is_refused_too() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    for header in [
        "X_HTTP_Method_Override: DELETE",
        "x_http_method: DELETE",
        "X-Method_Override: DELETE",
        "X_Original_URL: /repos/org/secret",
        "X_Rewrite-Url: /repos/org/secret",
    ] {
        let mut tls = connect(s.addr, port, &s.ca).unwrap();
        let (head, _) = request(
            &mut tls,
            &format!("GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\n{header}\r\n\r\n"),
        );
        assert!(
            head.starts_with("HTTP/1.1 403"),
            "{header}: {head:?}, the upstream got {:?}",
            up.heads.lock().unwrap()
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
}

/// A server that ignores the body of a request it does not expect one on
/// (a GET: the "CL.0" desync, seen on static files and redirects) reads
/// that body as the next request on the connection: a request the rules
/// never judged (a method or path they refuse, another `Host` for a
/// shared front). The proxy never sends another request on a connection
/// that carried a body, and now says so to the server with
/// `Connection: close` on that request, after which a server processes no
/// further request on it (RFC 9112, 9.6): the hidden request used to be
/// acted on.
#[test]
fn proxy20_a_request_hidden_in_an_ignored_body_is_not_acted_on() {
    let (pem, cfg) = test_ca();
    let config = Arc::new(cfg);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let acted = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&acted);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (config, seen) = (Arc::clone(&config), Arc::clone(&seen));
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut buf = Vec::new();
                // Every request's body is ignored (left on the
                // connection), and `Connection: close` honoured.
                while let Some(head) = next_head(&mut tls, &mut buf) {
                    let head = String::from_utf8_lossy(&head).into_owned();
                    seen.lock()
                        .unwrap()
                        .push(head.lines().next().unwrap_or_default().to_owned());
                    let close = head.lines().any(|l| {
                        let l = l.to_ascii_lowercase();
                        l.starts_with("connection:") && l.contains("close")
                    });
                    let _ = write!(tls, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                    let _ = tls.flush();
                    if close {
                        tls.conn.send_close_notify();
                        let _ = tls.flush();
                        // A lingering close, as servers make it: closed
                        // with the ignored body still unread, the socket
                        // would send a reset, which can reach the proxy
                        // before it has read the answer, and lose it.
                        let _ = tls.sock.shutdown(std::net::Shutdown::Write);
                        let mut rest = [0u8; 4096];
                        while matches!(tls.sock.read(&mut rest), Ok(n) if n > 0) {}
                        return;
                    }
                }
            });
        }
    });
    // Only GET /a is admitted.
    let rules = vec![RequestRule {
        target: target(port, &["GET"], &["/a"]),
        allow: true,
        label: "net.rules[0]".into(),
    }];
    let s = setup(&pem, vec![], rules);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // Refused when asked for directly.
    let (head, _) = request(
        &mut tls,
        "DELETE /admin HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let hidden = "DELETE /admin HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let (head, body) = request(
        &mut tls,
        &format!(
            "GET /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{hidden}",
            hidden.len()
        ),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}{body}");
    // The next request on the client's connection is still served.
    let (head, body) = request(&mut tls, "GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200") && body == "ok", "{head}");
    std::thread::sleep(Duration::from_millis(300));
    let acted = acted.lock().unwrap().clone();
    assert!(
        !acted.iter().any(|l| l.starts_with("DELETE")),
        "the server acted on a request the rules refuse: {acted:?}"
    );
    assert_eq!(acted, ["GET /a HTTP/1.1", "GET /a HTTP/1.1"]);
}

/// The connection records, once `n` of them are kept (a record is made as
/// its connection's thread ends, after the client saw the answer).
fn audit20_records(proxy: &Proxy, n: usize) -> Vec<sandgate_proxy::AuditRecord> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let audit = proxy.audit();
        if audit.len() >= n || std::time::Instant::now() > deadline {
            return audit;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn audit20_an_intercepted_connection_that_reached_no_upstream_is_not_audited_as_admitted() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    // Every request of the connection refused by the rules.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "GET /repos/org/secret/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    drop(tls);
    let audit = audit20_records(&s.proxy, 1);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    assert!(
        !audit[0].allowed,
        "a connection whose only request was refused is audited as admitted: {audit:?}"
    );
    assert!(audit[0].reason.contains("net.rules[1]"), "{audit:?}");
    assert_eq!(audit[0].address, None, "nothing was dialled: {audit:?}");

    // An upstream the roots do not trust: nothing was sent to it.
    let (_, other_cfg) = test_ca();
    let untrusted = upstream(other_cfg);
    let port = untrusted.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(&mut tls, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    drop(tls);
    let audit = audit20_records(&s.proxy, 1);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert!(
        !audit[0].allowed,
        "a connection to an untrusted upstream is audited as admitted: {audit:?}"
    );
    assert!(audit[0].reason.contains("certificate"), "{audit:?}");
    assert_eq!(audit[0].bytes_up, 0, "{audit:?}");

    // One request forwarded, then one refused: the refusal is what the
    // connection's record says, with the bytes that did move.
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(
        &mut tls,
        "GET /repos/org/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _) = request(
        &mut tls,
        "GET /repos/org/secret/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    drop(tls);
    let audit = audit20_records(&s.proxy, 1);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(up.conns.load(Ordering::SeqCst), 1);
    assert!(
        !audit[0].allowed && audit[0].reason.contains("net.rules[1]"),
        "a connection that ended on a refused request is audited as admitted: {audit:?}"
    );
    assert!(audit[0].address.is_some(), "{audit:?}");
    assert!(
        audit[0].bytes_up > 0 && audit[0].bytes_down > 0,
        "{audit:?}"
    );
}

/// A connection's bytes are what moved, also when a body broke off: the
/// part of a request body written to the upstream before the client went
/// away, and the part of an answer passed to the client before the
/// upstream went away, are counted (they reached the other side).
#[test]
fn audit20_the_bytes_of_a_body_that_broke_off_are_counted() {
    // A request body cut short by the client: the upstream got its head
    // and the body's first 40,000 bytes.
    let (pem, cfg) = test_ca();
    let raw = raw_upstream(cfg);
    let port = raw.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.write_all(b"PUT /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n")
        .unwrap();
    tls.write_all(&[b'a'; 40_000]).unwrap();
    tls.flush().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while raw.got.lock().unwrap().len() < 40_000 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    tls.conn.send_close_notify();
    let _ = tls.flush();
    drop(tls);
    let audit = audit20_records(&s.proxy, 1);
    let got = raw.got.lock().unwrap().len() as u64;
    assert!(got > 40_000, "{got}");
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(
        audit[0].bytes_up, got,
        "the upstream got {got} bytes, the audit says {}: {audit:?}",
        audit[0].bytes_up
    );

    // An answer cut short by the upstream: the client got its head and
    // the body's first 60,000 bytes.
    let (pem, cfg) = test_ca();
    let config = Arc::new(cfg);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        let conn = rustls::ServerConnection::new(config).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, stream);
        let mut buf = Vec::new();
        if next_head(&mut tls, &mut buf).is_none() {
            return;
        }
        let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
        let _ = tls.write_all(&[b'b'; 60_000]);
        tls.conn.send_close_notify();
        let _ = tls.flush();
    });
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.write_all(b"GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    tls.flush().unwrap();
    let mut back = Vec::new();
    let _ = tls.read_to_end(&mut back);
    assert!(back.len() > 60_000, "{}", back.len());
    let audit = audit20_records(&s.proxy, 1);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(
        audit[0].bytes_down,
        back.len() as u64,
        "the client got {} bytes, the audit says {}: {audit:?}",
        back.len(),
        audit[0].bytes_down
    );
}
