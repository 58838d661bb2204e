//! How a destination may be spelled to the egress proxy: `CONNECT`
//! authorities, absolute-form requests (and a `Host` header naming another
//! host), and SOCKS5 requests with a domain name that is an address, holds
//! a NUL, ends in a dot or is empty, or an IPv6 address that carries an
//! IPv4 one. On host loopback only: the server a spelling aims at listens
//! on 127.0.0.2, granted as the literal `127.0.0.2:PORT`, and the name
//! `granted.example` is granted on the same port, answered by a resolver
//! that counts its calls. Every spelling refused must be refused with
//! nothing dialled (zero connections at the server, no address in the
//! audit) and, for a name, with no lookup.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{Proxy, ProxyConfig};

mod support;
use support::{exchange, server, socks, wait_until};

/// The proxy granting `127.0.0.2:PORT` and `granted.example:PORT` in
/// restricted mode with `allow_http`; its resolver answers 127.0.0.2 for
/// any name and counts the names it was asked.
fn proxy(port: u16) -> (Proxy, SocketAddr, Arc<Mutex<Vec<String>>>) {
    let allow = [
        format!("127.0.0.2:{port}"),
        format!("granted.example:{port}"),
    ]
    .iter()
    .map(|a| {
        let e = NetEntry::parse(a).unwrap();
        e.check_restricted().unwrap();
        e
    })
    .collect();
    let mut config = ProxyConfig::new(Rules::new(Mode::Restricted, allow, true));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let a = Arc::clone(&asked);
    config.resolver = Arc::new(
        move |host: &str, _: u16, _: Duration| -> std::io::Result<Vec<IpAddr>> {
            a.lock().unwrap().push(host.to_owned());
            Ok(vec!["127.0.0.2".parse().unwrap()])
        },
    );
    let p = Proxy::new(config);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = p.serve(l.into()).unwrap();
    (p, addr, asked)
}

/// No name was looked up (`asked`, from [`proxy`], is empty) and every
/// refused record of the audit dialled nothing.
fn assert_nothing_looked_up_or_dialled(p: &Proxy, asked: &Mutex<Vec<String>>) {
    let names = asked.lock().unwrap().clone();
    assert!(names.is_empty(), "{names:?}");
    wait_until("the connections ended", || p.active() == 0);
    for r in p.audit() {
        if !r.allowed {
            assert!(r.address.is_none(), "{r:?}");
        }
    }
}

/// `CONNECT` authorities that spell 127.0.0.2 (or the granted name)
/// another way, carry a user, a port that is not the granted one or no
/// port: each is refused with a 4xx, nothing dialled, no name looked up.
/// The granted literal itself reaches the server.
#[test]
fn spell24_connect_authorities_spelled_another_way_reach_nothing() {
    let s = server("127.0.0.2");
    let p_ = s.addr.port();
    let (p, addr, asked) = proxy(p_);
    for target in [
        format!("2130706434:{p_}"),
        format!("0x7f.0.0.2:{p_}"),
        format!("0x7f000002:{p_}"),
        format!("0177.0.0.2:{p_}"),
        format!("127.2:{p_}"),
        format!("127.0.0.2.:{p_}"),
        format!("127.000.000.002:{p_}"),
        format!("[::ffff:127.0.0.2]:{p_}"),
        format!("[::ffff:7f00:2]:{p_}"),
        format!("[0:0:0:0:0:ffff:127.0.0.2]:{p_}"),
        format!("[::127.0.0.2]:{p_}"),
        format!("[64:ff9b::7f00:2]:{p_}"),
        format!("::ffff:127.0.0.2:{p_}"),
        format!("[fe80::1%25lo]:{p_}"),
        format!("[fe80::1%lo]:{p_}"),
        format!("[127.0.0.2]:{p_}"),
        format!("%31%32%37.0.0.2:{p_}"),
        format!("１２７．０．０．２:{p_}"),
        format!("127.0.0.2:{}", "７"),
        format!("evil@127.0.0.2:{p_}"),
        format!("127.0.0.2:{p_}@evil.example:{p_}"),
        format!("evil.example\\@127.0.0.2:{p_}"),
        format!("127.0.0.2\\@evil.example:{p_}"),
        "127.0.0.2:0".to_owned(),
        "127.0.0.2:65536".to_owned(),
        format!("127.0.0.2:{}", u32::from(p_) + 65536),
        "127.0.0.2:".to_owned(),
        format!("127.0.0.2:+{p_}"),
        format!("127.0.0.2:{p_}/"),
        format!("127.0.0.2:{p_}:{p_}"),
        "127.0.0.2".to_owned(),
        format!("LOCALHOST:{p_}"),
        format!("localhost.:{p_}"),
        format!("foo.localhost:{p_}"),
        format!("granted.example.:{p_}"),
        format!("GRANTED.EXAMPLE.:{p_}"),
        format!("[granted.example]:{p_}"),
        format!("granted.example%2e:{p_}"),
        format!("xn--5g7caagbcfc9b:{p_}"),
    ] {
        let answer = exchange(
            addr,
            format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert!(
            answer.starts_with("HTTP/1.1 400") || answer.starts_with("HTTP/1.1 403"),
            "{target}: {answer}"
        );
    }
    assert_eq!(s.hits(), 0);
    assert_nothing_looked_up_or_dialled(&p, &asked);
    // The granted name in upper case is that name: looked up (as the name,
    // lower case), then refused for the loopback address it resolved to.
    let answer = exchange(
        addr,
        format!("CONNECT GRANTED.Example:{p_} HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("loopback"), "{answer}");
    assert_eq!(*asked.lock().unwrap(), vec!["granted.example".to_owned()]);
    assert_eq!(s.hits(), 0);
    // The literal as granted reaches the server, at the port judged.
    {
        let target = format!("127.0.0.2:{p_}");
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
            .unwrap();
        let mut head = [0u8; 39];
        c.read_exact(&mut head).unwrap();
        assert!(head.starts_with(b"HTTP/1.1 200"), "{target}");
        c.write_all(b"GET /through HTTP/1.1\r\n\r\n").unwrap();
        let mut ok = [0u8; 15];
        c.read_exact(&mut ok).unwrap();
        assert_eq!(&ok, b"HTTP/1.1 200 OK");
    }
    assert_eq!(s.hits(), 1);
    wait_until("the connections ended", || p.active() == 0);
    for r in p.audit().iter().filter(|r| r.allowed) {
        assert_eq!(r.address, Some(s.addr), "{r:?}");
        assert_eq!(r.port, p_, "{r:?}");
    }
    p.stop();
}

/// An absolute-form request goes to the host its URL names, never to the
/// one its `Host` header names: the header is replaced by the URL's
/// authority (a server behind the granted address that routes by `Host`
/// sees the granted host), a request whose URL names a host not granted
/// is refused whatever its `Host` header says, with no lookup, and an
/// origin-form request (a `Host` header alone) is refused.
#[test]
fn spell24_an_absolute_form_request_goes_where_its_url_says_not_its_host_header() {
    let s = server("127.0.0.2");
    let p_ = s.addr.port();
    let g = s.addr;
    let (p, addr, asked) = proxy(p_);
    let answer = exchange(
        addr,
        format!(
            "GET http://{g}/x HTTP/1.1\r\nHost: evil.example\r\nhost: evil.example:{p_}\r\n\r\n"
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    let got = s.got();
    assert!(
        got.starts_with(&format!("GET /x HTTP/1.1\r\nHost: {g}\r\n")),
        "{got}"
    );
    assert!(!got.to_ascii_lowercase().contains("evil"), "{got}");
    assert_eq!(
        got.to_ascii_lowercase().matches("host:").count(),
        1,
        "{got}"
    );
    // The scheme in upper case is http; a fragment is cut, never read as
    // a user.
    for (target, path) in [
        (format!("HTTP://{g}/y"), "/y"),
        (format!("http://{g}#@evil.example/z"), "/"),
        (format!("http://{g}?@evil.example"), "/?@evil.example"),
    ] {
        let before = s.got().len();
        let answer = exchange(addr, format!("GET {target} HTTP/1.1\r\n\r\n").as_bytes());
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{target}: {answer}");
        let got = s.got()[before..].to_owned();
        assert!(
            got.starts_with(&format!("GET {path} HTTP/1.1\r\nHost: {g}\r\n")),
            "{target}: {got}"
        );
    }
    let hits = s.hits();
    for (target, host) in [
        ("http://evil.example/".to_owned(), g.to_string()),
        (format!("http://evil.example:{p_}/"), g.to_string()),
        (format!("http://2130706434:{p_}/"), g.to_string()),
        (format!("http://[::ffff:127.0.0.2]:{p_}/"), g.to_string()),
        (format!("http://127.0.0.2.:{p_}/"), g.to_string()),
        (format!("http://evil@{g}/"), g.to_string()),
        (format!("http://{g}@evil.example/"), g.to_string()),
        (format!("http://evil.example\\@{g}/"), g.to_string()),
        (format!("http://{g}\\@evil.example/"), g.to_string()),
        (format!("http:/\\{g}/"), g.to_string()),
        (format!("http:{g}/"), g.to_string()),
        (format!("//{g}/"), g.to_string()),
        ("/".to_owned(), g.to_string()),
        (g.to_string(), g.to_string()),
        (format!("ws://{g}/"), g.to_string()),
        (format!("https://{g}/"), g.to_string()),
        (format!("http://granted.example.:{p_}/"), g.to_string()),
        (format!("http://%31%32%37.0.0.2:{p_}/"), g.to_string()),
        (format!("http://１２７．０．０．２:{p_}/"), g.to_string()),
        ("http://127.0.0.2:0/".to_owned(), g.to_string()),
        ("http://127.0.0.2:/".to_owned(), g.to_string()),
        ("http://127.0.0.2/".to_owned(), g.to_string()),
    ] {
        let answer = exchange(
            addr,
            format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes(),
        );
        assert!(
            answer.starts_with("HTTP/1.1 400") || answer.starts_with("HTTP/1.1 403"),
            "{target}: {answer}"
        );
    }
    assert_eq!(s.hits(), hits);
    assert_nothing_looked_up_or_dialled(&p, &asked);
    p.stop();
}

/// SOCKS5 with a domain name (ATYP 3) that spells an address, holds a NUL,
/// a port or a user, ends in a dot, is empty or is not UTF-8, and IPv6
/// addresses (ATYP 4) that carry 127.0.0.2: each is refused (reply 2),
/// nothing dialled, no name looked up. The literal as granted, given as
/// ATYP 1 or as a domain name, reaches the server.
#[test]
fn spell24_socks5_names_and_addresses_spelled_another_way_reach_nothing() {
    let s = server("127.0.0.2");
    let p_ = s.addr.port();
    let (p, addr, asked) = proxy(p_);
    let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap().octets().to_vec();
    let mut cases: Vec<(u8, Vec<u8>, u16)> = Vec::new();
    for name in [
        &b"127.0.0.2\0"[..],
        b"127.0.0.2\0.evil.example",
        b"granted.example\0",
        b"granted.example\0.evil.example",
        b"\0granted.example",
        b"granted.example.",
        b"GRANTED.EXAMPLE.",
        b"granted.example..",
        b".granted.example",
        b"",
        b".",
        "１２７．０．０．２".as_bytes(),
        "granted。example".as_bytes(),
        b"\xffgranted.example",
        b"0x7f.0.0.2",
        b"0x7f000002",
        b"0177.0.0.2",
        b"127.2",
        b"127.0.0.2.",
        b"127.0.0.2:80",
        b"[::ffff:127.0.0.2]",
        b"::ffff:127.0.0.2",
        b"::ffff:7f00:2",
        b"[::127.0.0.2]",
        b"[fe80::1%lo]",
        b"fe80::1%25lo",
        b"[127.0.0.2]",
        b"evil@127.0.0.2",
        b"127.0.0.2@evil.example",
        b"%31%32%37.0.0.2",
        b"granted.example%00",
        b"localhost",
        b"LOCALHOST.",
        b"foo.localhost",
        b"granted.example\t",
        b" granted.example",
    ] {
        cases.push((3, name.to_vec(), p_));
    }
    for ip in [
        "::ffff:127.0.0.2",
        "::ffff:7f00:2",
        "::127.0.0.2",
        "::ffff:0:127.0.0.2",
        "64:ff9b::7f00:2",
        "2002:7f00:2::",
    ] {
        cases.push((4, v6(ip), p_));
    }
    cases.push((1, vec![127, 0, 0, 2], 0));
    cases.push((3, b"127.0.0.2".to_vec(), 0));
    cases.push((3, b"granted.example".to_vec(), 0));
    cases.push((1, vec![127, 0, 0, 2], p_.wrapping_add(1)));
    for (atyp, host, port) in &cases {
        let (code, _) = socks(addr, *atyp, host, *port);
        assert_eq!(code, 2, "{atyp} {} :{port}", host.escape_ascii());
    }
    assert_eq!(s.hits(), 0);
    assert_nothing_looked_up_or_dialled(&p, &asked);
    for (atyp, host) in [(1u8, vec![127, 0, 0, 2]), (3, b"127.0.0.2".to_vec())] {
        let (code, mut c) = socks(addr, atyp, &host, p_);
        assert_eq!(code, 0, "{atyp} {}", host.escape_ascii());
        c.write_all(b"GET /s HTTP/1.1\r\n\r\n").unwrap();
        let mut ok = [0u8; 15];
        c.read_exact(&mut ok).unwrap();
        assert_eq!(&ok, b"HTTP/1.1 200 OK");
    }
    assert_eq!(s.hits(), 2);
    assert!(asked.lock().unwrap().is_empty());
    p.stop();
}
