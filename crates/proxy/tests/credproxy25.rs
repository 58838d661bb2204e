//! The egress proxy where it holds a credential, attacked by the command
//! it serves: a client on the host loopback that wants the credential's
//! value, the credential sent to a host or path the policy did not attach
//! it to, or a request the rules refuse to reach the upstream. Each test
//! asserts what reached the (loopback, test-CA) upstream: the credential
//! only where it belongs, and nothing the proxy did not judge.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;

use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{Injection, RequestRule, Secret, Verdict};

mod support;
use support::*;

/// `GET` under `/org/` admitted, anything under `/org/secret` refused; the
/// credential on every admitted request.
fn org_but_secret(port: u16, pem: &str) -> Setup {
    let rules = vec![
        RequestRule {
            target: target(port, &["GET", "POST"], &["/org/"]),
            allow: true,
            label: "net.rules[0]".into(),
        },
        RequestRule {
            target: target(port, &[], &["/org/secret"]),
            allow: false,
            label: "net.rules[1]".into(),
        },
    ];
    setup(pem, vec![injection(port, &[], &[])], rules)
}

/// Sends `req` on a fresh intercepted connection and answers the response
/// (head and body).
fn once(s: &Setup, port: u16, req: &str) -> (String, String) {
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    request(&mut tls, req)
}

/// Asserts that `req`, on a fresh intercepted connection, is answered with
/// `status` by the proxy and that the connection then ends.
fn refused(s: &Setup, port: u16, req: &str, status: &str) {
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, body) = request(&mut tls, req);
    assert!(
        head.starts_with(&format!("HTTP/1.1 {status}")) && body.starts_with("sandgate: "),
        "{req:?} got {head:?} {body:?}"
    );
    let mut rest = Vec::new();
    let _ = tls.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

/// The `Authorization` lines of a head the upstream got.
fn auth_lines(head: &str) -> Vec<String> {
    head.lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("authorization"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn credproxy25_the_host_header_cannot_take_the_credential_to_another_host() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    // A Host naming another host, then (kept alive) two of them, then one
    // spelled in upper case with a port: the upstream is told the
    // tunnel's host each time, once.
    for host in [
        "Host: evil.example",
        "Host: evil.example\r\nHost: other.example",
        "HOST: evil.example:443",
    ] {
        let (head, body) = request(&mut tls, &format!("GET /a HTTP/1.1\r\n{host}\r\n\r\n"));
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body, "path /a\n");
    }
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 3, "{heads:?}");
    for h in &heads {
        let hosts: Vec<&str> = h
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("host"))
            .collect();
        assert_eq!(hosts, [format!("Host: localhost:{port}")], "{h}");
        assert!(!h.contains("example"), "{h}");
        assert_eq!(auth_lines(h), [format!("Authorization: Bearer {SECRET}")]);
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 1);
}

#[test]
fn credproxy25_an_absolute_target_in_a_tunnel_names_no_other_host() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    for target in [
        "https://evil.example/a",
        "http://evil.example/a",
        &format!("https://localhost:{port}/a"),
        "//evil.example/a",
        "evil.example:443",
        "*",
    ] {
        refused(
            &s,
            port,
            &format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
            "403",
        );
    }
    // `OPTIONS *` too: it names no path the rules could judge.
    refused(
        &s,
        port,
        "OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "403",
    );
    // A second request on a kept-alive connection, to another host.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    let (head, _) = request(&mut tls, "GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _) = request(
        &mut tls,
        "GET https://evil.example/b HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(heads[0].starts_with("GET /a HTTP/1.1\r\n"), "{heads:?}");
    let refusals = s
        .proxy
        .requests()
        .iter()
        .filter(|r| r.verdict == Verdict::Refused)
        .count();
    assert_eq!(refusals, 8);
}

#[test]
fn credproxy25_header_names_in_odd_spellings_never_pass_beside_the_credential() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    // Spellings a server reads as `Authorization`: replaced, one header
    // reaches the upstream, with the credential.
    for forged in [
        "authorization: Bearer mine",
        "AUTHORIZATION: Bearer mine",
        "Authorization: Bearer mine\r\nAuthorization: Bearer mine2",
        "Authorization:Bearer mine",
        "Authorization: Bearer mine\r\nauthorization: Basic bWluZTptaW5l",
        "Proxy-Authorization: Bearer mine",
    ] {
        let (head, body) = once(
            &s,
            port,
            &format!("GET /a HTTP/1.1\r\nHost: localhost\r\n{forged}\r\n\r\n"),
        );
        assert!(head.starts_with("HTTP/1.1 200"), "{forged:?}: {head}");
        assert!(!body.contains(SECRET));
    }
    // Spellings the proxy cannot read one way: refused, nothing sent.
    for forged in [
        "Authorization : Bearer mine",
        "Authorization\t: Bearer mine",
        " Authorization: Bearer mine",
        "X-Other: a\r\n Authorization: Bearer mine",
        "X-Other: a\r\n\tAuthorization: Bearer mine",
        "Authorization: Bearer\r\n mine",
        "Authorization",
        ": Bearer mine",
    ] {
        refused(
            &s,
            port,
            &format!("GET /a HTTP/1.1\r\nHost: localhost\r\n{forged}\r\n\r\n"),
            "400",
        );
    }
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 6, "{heads:?}");
    for h in &heads {
        assert_eq!(
            auth_lines(h),
            [format!("Authorization: Bearer {SECRET}")],
            "{h}"
        );
        assert!(!h.contains("mine"), "{h}");
        assert!(
            !h.to_ascii_lowercase().contains("proxy-authorization"),
            "{h}"
        );
    }
}

#[test]
fn credproxy25_a_cookie_credential_replaces_every_cookie_the_command_sends() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let cookie = Injection {
        target: target(port, &[], &["/org/"]),
        header: "Cookie".into(),
        value: Secret::new(format!("session={SECRET}").into_bytes()).unwrap(),
        label: "net.credentials[0]".into(),
    };
    let s = setup(&pem, vec![cookie], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    for (path, cookies) in [
        ("/org/a", "Cookie: session=mine"),
        ("/org/a", "cookie: a=1\r\nCOOKIE: b=2"),
        ("/other", "Cookie: session=mine; x=1"),
    ] {
        let (head, _) = request(
            &mut tls,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{cookies}\r\n\r\n"),
        );
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 3, "{heads:?}");
    let cookies = |h: &str| -> Vec<String> {
        h.lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("cookie"))
            .map(str::to_owned)
            .collect()
    };
    for h in &heads[..2] {
        assert_eq!(cookies(h), [format!("Cookie: session={SECRET}")], "{h}");
    }
    // Outside the credential's paths the command's cookies are removed.
    assert!(cookies(&heads[2]).is_empty(), "{}", heads[2]);
    let v: Vec<Verdict> = s.proxy.requests().iter().map(|r| r.verdict).collect();
    assert_eq!(v, [Verdict::Injected, Verdict::Injected, Verdict::Stripped]);
}

/// A redirect is the command's to follow: the proxy passes it on and goes
/// nowhere itself, and the request that follows it is judged on its own
/// (on `http://`, the credential's host gets no credential and nothing is
/// sent).
#[test]
fn credproxy25_a_redirect_is_never_followed_with_the_credential() {
    let (pem, cfg) = test_ca();
    fn redirect(head: &str) -> String {
        let path = head.split(' ').nth(1).unwrap_or_default();
        let (code, to) = match path {
            "/301" => (301, "https://evil.example/x"),
            "/307" => (307, "https://other.localhost/x"),
            _ => (308, "http://localhost/x"),
        };
        format!("HTTP/1.1 {code} Moved\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n")
    }
    let up = answering(cfg, redirect);
    let port = up.addr.port();
    let s = setup_http(&pem, vec![injection(port, &[], &[])], vec![], true);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    for (code, path) in [("301", "/301"), ("307", "/307"), ("308", "/308")] {
        let (head, _) = request(
            &mut tls,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        );
        assert!(head.starts_with(&format!("HTTP/1.1 {code}")), "{head}");
        assert!(head.contains("Location: "), "{head}");
    }
    drop(tls);
    // The 308 followed to plain http on the same host and port.
    let out = exchange(
        s.addr,
        format!("GET http://localhost:{port}/x HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n")
            .as_bytes(),
    );
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("only over TLS"), "{out}");
    assert!(!out.contains(SECRET));
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 3, "{heads:?}");
    assert_eq!(up.conns.load(Ordering::SeqCst), 1);
    // The proxy made no connection of its own to anywhere else.
    let audit = s.proxy.audit();
    assert!(audit.iter().all(|r| r.host == "localhost"), "{audit:?}");
}

/// Bodies framed so that the proxy and a server could read them
/// differently (CL.TE, TE.CL, a coding list, an obsolete spelling of the
/// header) are refused before anything reaches the upstream: the
/// credential is never put on bytes the proxy did not read as a request.
#[test]
fn credproxy25_smuggling_framings_reach_no_upstream() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    let hidden = "GET /org/secret HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let len = hidden.len();
    for (framing, body) in [
        // CL.TE
        (
            format!("Content-Length: {}\r\nTransfer-Encoding: chunked", len + 5),
            format!("0\r\n\r\n{hidden}"),
        ),
        // TE.CL
        (
            "Transfer-Encoding: chunked\r\nContent-Length: 4".to_owned(),
            format!("{len:x}\r\n{hidden}\r\n0\r\n\r\n"),
        ),
        (
            "Transfer-Encoding: chunked, identity".to_owned(),
            format!("0\r\n\r\n{hidden}"),
        ),
        (
            "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked".to_owned(),
            format!("0\r\n\r\n{hidden}"),
        ),
        (
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked".to_owned(),
            format!("0\r\n\r\n{hidden}"),
        ),
        (
            "Transfer-Encoding: xchunked".to_owned(),
            format!("0\r\n\r\n{hidden}"),
        ),
        (
            format!("Content-Length: {len}\r\nContent-Length: 0"),
            hidden.to_owned(),
        ),
        (format!("Content-Length: {len}, {len}"), hidden.to_owned()),
    ] {
        refused(
            &s,
            port,
            &format!("POST /org/a HTTP/1.1\r\nHost: localhost\r\n{framing}\r\n\r\n{body}"),
            "400",
        );
    }
    // A space before the colon, and a bare LF that would start a header
    // (or a request) of its own to a server that takes it as a line end.
    for head in [
        "POST /org/a HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding : chunked\r\n\r\n",
        "POST /org/a HTTP/1.1\r\nHost: localhost\r\nX: a\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /org/a HTTP/1.1\r\nHost: localhost\nContent-Length: 5\r\n\r\n",
        "GET /org/a HTTP/1.1\r\nX: a\n\nGET /org/secret HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ] {
        refused(&s, port, head, "400");
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    assert!(up.heads.lock().unwrap().is_empty());
}

/// A request line whose version is not `HTTP/1.0` or `HTTP/1.1` exactly
/// (a bare LF and a header after it, another minor version) is refused:
/// a server that takes a bare LF as a line end would read the header the
/// proxy took for part of the version.
#[test]
fn credproxy25_a_request_line_with_anything_after_its_version_is_refused() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    for line in [
        "GET /org/a HTTP/1.1\nContent-Length:40",
        "GET /org/a HTTP/1.1\nX-HTTP-Method-Override:DELETE",
        "GET /org/a HTTP/1.1x",
        "GET /org/a HTTP/1.9",
        "GET /org/a HTTP/1.",
    ] {
        refused(
            &s,
            port,
            &format!("{line}\r\nHost: localhost\r\n\r\n"),
            "400",
        );
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    // In plain http too, where the version is not passed on either.
    let plain = server("127.0.0.1");
    let s = setup_http(&pem, vec![], vec![], true);
    for line in [
        "GET http://localhost:{port}/a HTTP/1.1\nContent-Length:40",
        "GET http://localhost:{port}/a HTTP/1.1x",
    ] {
        let line = line.replace("{port}", &plain.addr.port().to_string());
        let out = exchange(
            s.addr,
            format!("{line}\r\nHost: localhost\r\n\r\n").as_bytes(),
        );
        assert!(out.starts_with("HTTP/1.1 400"), "{line:?}: {out}");
    }
    assert_eq!(plain.hits(), 0, "{}", plain.got());
}

#[test]
fn credproxy25_http_1_0_pipelined_and_expect_continue_are_judged_one_by_one() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    // HTTP/1.0: judged and injected like any other.
    let (head, body) = once(&s, port, "GET /org/a HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "path /org/a\n");
    // Pipelined in one write: an admitted request, a refused one, and one
    // after it that is never read.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.write_all(
        b"GET /org/b HTTP/1.0\r\nHost: localhost\r\n\r\n\
          GET /org/secret HTTP/1.1\r\nHost: localhost\r\n\r\n\
          GET /org/c HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .unwrap();
    let (head, _) = request(&mut tls, "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _) = request(&mut tls, "");
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let mut rest = Vec::new();
    let _ = tls.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    // `Expect: 100-continue` on a refused request: no `100 Continue`, the
    // refusal, and the body never sent anywhere.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.write_all(
        b"POST /org/secret HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n\
          Content-Length: 5\r\n\r\n",
    )
    .unwrap();
    tls.flush().unwrap();
    let (head, _) = request(&mut tls, "");
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    // On an admitted one, the `100 Continue` comes from the proxy and the
    // header is not passed on.
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.write_all(
        b"POST /org/d HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n\
          Content-Length: 5\r\n\r\n",
    )
    .unwrap();
    tls.flush().unwrap();
    let (head, _) = request(&mut tls, "");
    assert!(head.starts_with("HTTP/1.1 100"), "{head}");
    let (head, body) = request(&mut tls, "hello");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "path /org/d\n");
    let heads = up.heads.lock().unwrap().clone();
    let lines: Vec<&str> = heads.iter().map(|h| h.lines().next().unwrap()).collect();
    assert_eq!(
        lines,
        [
            "GET /org/a HTTP/1.1",
            "GET /org/b HTTP/1.1",
            "POST /org/d HTTP/1.1"
        ]
    );
    for h in &heads {
        assert!(h.contains(SECRET), "{h}");
        assert!(!h.to_ascii_lowercase().contains("expect"), "{h}");
    }
}

#[test]
fn credproxy25_paths_that_normalise_to_a_refused_prefix_reach_no_upstream() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    let s = org_but_secret(port, &pem);
    for path in [
        "/org/a/../secret",
        "/org/%2e%2e/org/secret",
        "/org/%2E%2E/org/secret",
        "/org/.%2e/org/secret",
        "/org//secret",
        "/org/secret;x",
        "/org/a;/../secret",
        "/org%2fsecret",
        "/org/a%2F..%2Fsecret",
        "/org/SECRET",
        "/org/Secret.json",
        "/org/%73ecret",
        "/org/%2573ecret",
        "/org/secret%3F",
        "/org/secret%20",
        "/org/./secret",
        "/org/secret#x",
        "/org\\secret",
        "/org/secret/",
    ] {
        let (head, body) = once(
            &s,
            port,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        );
        assert!(
            head.starts_with("HTTP/1.1 403") || head.starts_with("HTTP/1.1 400"),
            "{path}: {head}"
        );
        assert!(body.starts_with("sandgate: "), "{path}: {body}");
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    // The control: an admitted path reaches it.
    let (head, _) = once(
        &s,
        port,
        "GET /org/public HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(up.heads.lock().unwrap().len(), 1);
}

/// A TLS handshake through a `CONNECT` to `connect_host:port`, naming
/// `sni` (none when `None`); a refused CONNECT is answered as a failure.
fn handshake(
    proxy: SocketAddr,
    connect_host: &str,
    port: u16,
    sni: Option<&str>,
    ca_pem: &str,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
    tls_over(tunnel(proxy, connect_host, port)?, sni, ca_pem)
}

#[test]
fn credproxy25_a_hello_without_sni_or_naming_another_host_gets_no_credential() {
    let (pem, cfg) = test_ca();
    let up = upstream(cfg);
    let port = up.addr.port();
    // Two granted names, both loopback: `localhost` holds the credential,
    // `other.localhost` none.
    let s = setup_tuned(&pem, vec![injection(port, &[], &[])], vec![], false, |c| {
        c.rules = Rules::new(
            Mode::TrustedHost,
            vec![
                NetEntry::parse("localhost").unwrap(),
                NetEntry::parse("other.localhost").unwrap(),
            ],
            false,
        );
    });
    // No SNI into the credential's host.
    assert!(handshake(s.addr, "localhost", port, None, &s.ca).is_err());
    // The other host's name into the credential's host's tunnel.
    assert!(handshake(s.addr, "localhost", port, Some("other.localhost"), &s.ca).is_err());
    // The credential's host's name into a tunnel to the other host
    // (trusting either CA): refused, so it never meets the upstream.
    for ca in [&s.ca, &pem] {
        assert!(handshake(s.addr, "other.localhost", port, Some("localhost"), ca).is_err());
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 0);
    assert!(up.heads.lock().unwrap().is_empty());
    assert!(s.proxy.requests().is_empty());
    // The control: the credential's host, named.
    let mut tls = handshake(s.addr, "localhost", port, Some("localhost"), &s.ca).unwrap();
    let (head, _) = request(&mut tls, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(up.heads.lock().unwrap()[0].contains(SECRET));
}

/// An upstream that reflects the request's headers in a body it frames
/// wrongly (says chunked, sends the headers as they are): the relay stops
/// at the first line that is no chunk size, and that line, the
/// credential's header, is not quoted in the refusal the audit keeps (an
/// embedder shows or logs the audit; the command never had the value).
#[test]
fn credproxy25_a_reflected_header_in_a_misframed_answer_is_not_quoted_in_the_audit() {
    let (pem, cfg) = test_ca();
    fn reflect(head: &str) -> String {
        let auth = head
            .lines()
            .find(|l| l.starts_with("Authorization"))
            .unwrap_or("none");
        format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{auth}\r\n")
    }
    let up = answering(cfg, reflect);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &[], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    tls.write_all(b"GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    tls.flush().unwrap();
    let mut got = Vec::new();
    let _ = tls.read_to_end(&mut got);
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(!got.contains(SECRET), "{got}");
    assert!(up.heads.lock().unwrap()[0].contains(SECRET));
    wait_until("the tunnel is audited", || {
        s.proxy.audit().iter().any(|r| r.reason.contains("chunk"))
    });
    let audit = format!("{:?}{:?}", s.proxy.audit(), s.proxy.requests());
    assert!(audit.contains("malformed chunk line"), "{audit}");
    assert!(
        !audit.contains(SECRET),
        "the audit quotes the credential: {audit}"
    );
}

/// TRACE answers with the request, headers included: the credential is
/// never set on it, even when the entry's methods name it, nor on a
/// spelling of it a server would take for TRACE.
#[test]
fn credproxy25_trace_gets_no_credential_even_when_the_entry_names_it() {
    let (pem, cfg) = test_ca();
    fn echo(head: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: message/http\r\nContent-Length: {}\r\n\r\n{head}",
            head.len()
        )
    }
    let up = answering(cfg, echo);
    let port = up.addr.port();
    let s = setup(&pem, vec![injection(port, &["TRACE", "GET"], &[])], vec![]);
    let mut tls = connect(s.addr, port, &s.ca).unwrap();
    for req in [
        "TRACE / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "TRACE /a HTTP/1.1\r\nHost: localhost\r\nMax-Forwards: 0\r\n\r\n",
        "TRACK / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer mine\r\n\r\n",
    ] {
        let (head, body) = request(&mut tls, req);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(!body.contains(SECRET) && !body.contains("mine"), "{body}");
    }
    refused(
        &s,
        port,
        "trace / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "403",
    );
    refused(
        &s,
        port,
        "GET / HTTP/1.1\r\nHost: localhost\r\nX-HTTP-Method-Override: TRACE\r\n\r\n",
        "403",
    );
    let heads = up.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 3, "{heads:?}");
    assert!(heads.iter().all(|h| !h.contains(SECRET)), "{heads:?}");
    // The control: GET gets it.
    let (_, body) = request(&mut tls, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(body.contains(SECRET), "{body}");
}
