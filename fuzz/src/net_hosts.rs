//! netguard's host spellings (docs/reference/network.md): an IPv4 address
//! is respelled as a resolver built on `inet_aton` or a URL parser would
//! read it (one to four parts, each decimal, octal or hex, leading zeros,
//! a trailing dot, upper case) and in every IPv6 form that carries it
//! (IPv4-mapped, dotted or in hex groups, IPv4-compatible,
//! IPv4-translated, NAT64, 6to4, fully expanded, bare or bracketed, with a
//! zone identifier). For each spelling, bare and as the host of an
//! `https://` URL and of an allow-list entry:
//!
//! - no spelling of an address is ever taken for a DNS name (by
//!   `Host::parse`, `NetEntry::parse` or `Target::parse` then the rules);
//! - a spelling taken as a literal is judged by the address it carries: an
//!   address that is not public (private, loopback, link-local, metadata,
//!   unspecified, multicast, reserved) is not public in any spelling;
//! - restricted mode admits a literal only when it is public or loopback
//!   through a port-qualified loopback entry; an entry of a non-public
//!   spelling is refused by `check_restricted` (loopback with a port
//!   excepted); a redirect never reaches loopback; trusted_host never
//!   reaches an unspecified address;
//! - a name (any text `Host::parse` takes as one) is not an address in
//!   `inet_aton`'s reading, and its `Display` parses back to itself.
//!
//! The raw mode feeds text made of address-like tokens through the same
//! checks, with no address to compare against.

use std::net::{IpAddr, Ipv4Addr};

use sandgate_netguard::{classify, AddrClass, Hop, Host, Mode, NetEntry, NetHost, Rules, Target};

use crate::bytes::Bytes;

/// Addresses worth respelling; other ones come from the bytes.
const ADDRS: &[[u8; 4]] = &[
    [127, 0, 0, 1],
    [127, 1, 2, 3],
    [10, 0, 0, 1],
    [169, 254, 169, 254],
    [0, 0, 0, 0],
    [0, 0, 0, 1],
    [192, 168, 1, 1],
    [172, 16, 0, 1],
    [100, 64, 0, 1],
    [255, 255, 255, 255],
    [224, 0, 0, 1],
    [240, 0, 0, 1],
    [93, 184, 216, 34],
    [8, 8, 8, 8],
];

/// Tokens of the raw mode.
const RAW: &[&str] = &[
    "0",
    "1",
    "7",
    "8",
    "9",
    "f",
    "F",
    "x",
    "X",
    "0x",
    "0X",
    "00",
    "017",
    "0177",
    "127",
    "255",
    "256",
    "4294967295",
    "4294967296",
    ".",
    ".",
    ":",
    "::",
    "[",
    "]",
    "%",
    "%25",
    "ffff",
    "FFFF",
    "64:ff9b",
    "2002",
    "fe80",
    "localhost",
    "a",
    "-",
    "example",
    "com",
    "xn--",
    "169",
    "254",
    "e",
];

/// Checks one fuzz input.
pub fn check(data: &[u8]) {
    let mut b = Bytes::new(data);
    match b.byte() % 8 {
        0 => {
            let text = b.tokens(RAW, 12);
            check_spelling(&text, None);
        }
        1 => {
            let text = b.text(64);
            check_spelling(&text, None);
        }
        _ => {
            let v4 = if b.bool() {
                Ipv4Addr::from(b.pick(ADDRS))
            } else {
                Ipv4Addr::new(b.byte(), b.byte(), b.byte(), b.byte())
            };
            let text = spell(&mut b, v4);
            check_spelling(&text, Some(v4));
        }
    }
}

/// One spelling of `v4`.
pub fn spell(b: &mut Bytes<'_>, v4: Ipv4Addr) -> String {
    let mut s = if b.below(3) == 0 {
        spell_v6(b, v4)
    } else {
        spell_v4(b, v4)
    };
    if b.below(4) == 0 {
        s.push('.');
    }
    if b.below(3) == 0 {
        s = s.to_ascii_uppercase();
    }
    s
}

fn radix(b: &mut Bytes<'_>, n: u32) -> String {
    let zeros = "0".repeat(b.below(3));
    match b.below(3) {
        0 => format!("{zeros}{n}"),
        1 => format!("0{zeros}{n:o}"),
        _ => {
            let x = if b.bool() { "0x" } else { "0X" };
            format!("{x}{zeros}{n:x}")
        }
    }
}

fn spell_v4(b: &mut Bytes<'_>, v4: Ipv4Addr) -> String {
    let n = u32::from(v4);
    let [a, bb, c, d] = v4.octets().map(u32::from);
    let parts: Vec<u32> = match b.below(4) {
        0 => vec![n],
        1 => vec![a, n & 0xff_ffff],
        2 => vec![a, bb, n & 0xffff],
        _ => vec![a, bb, c, d],
    };
    if b.bool() {
        // Plain decimal, as a resolver prints it.
        return parts
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(".");
    }
    parts
        .iter()
        .map(|&p| radix(b, p))
        .collect::<Vec<_>>()
        .join(".")
}

fn spell_v6(b: &mut Bytes<'_>, v4: Ipv4Addr) -> String {
    let [o0, o1, o2, o3] = v4.octets();
    let hi = u16::from_be_bytes([o0, o1]);
    let lo = u16::from_be_bytes([o2, o3]);
    let inner = match b.below(9) {
        0 => format!("::ffff:{v4}"),
        1 => format!("::ffff:{hi:x}:{lo:x}"),
        2 => format!("0:0:0:0:0:ffff:{hi:04x}:{lo:04x}"),
        3 => format!("::{v4}"),
        4 => format!("::ffff:0:{v4}"),
        5 => format!("64:ff9b::{v4}"),
        6 => format!("2002:{hi:x}:{lo:x}::{:x}", b.byte()),
        7 => format!("0000:0000:0000:0000:0000:FFFF:{v4}"),
        _ => v4.to_ipv6_mapped().to_string(),
    };
    let zone = match b.below(6) {
        0 => "%eth0",
        1 => "%25lo",
        _ => "",
    };
    if b.below(4) == 0 {
        format!("{inner}{zone}")
    } else {
        format!("[{inner}{zone}]")
    }
}

/// Whether a resolver built on `inet_aton` reads `s` (with or without one
/// trailing dot) as an IPv4 address: one to four parts, each decimal,
/// octal (leading `0`) or hex (`0x`), the last filling what is left.
pub fn inet_aton(s: &str) -> Option<u32> {
    let s = s.strip_suffix('.').unwrap_or(s);
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(4);
    for p in &parts {
        let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or(p.strip_prefix("0X")) {
            (h, 16)
        } else if p.len() > 1 && p.starts_with('0') {
            (&p[1..], 8)
        } else {
            (*p, 10)
        };
        if p.is_empty() || (digits.is_empty() && radix != 16) {
            return None;
        }
        let v = if digits.is_empty() {
            0
        } else {
            u64::from_str_radix(digits, radix).ok()?
        };
        values.push(v);
    }
    let last = *values.last()?;
    let head = &values[..values.len() - 1];
    if head.iter().any(|&v| v > 255) {
        return None;
    }
    let room = 8 * (4 - head.len() as u32);
    if room < 64 && last >= 1u64 << room {
        return None;
    }
    let mut n: u64 = 0;
    for (i, &v) in head.iter().enumerate() {
        n |= v << (24 - 8 * i as u32);
    }
    u32::try_from(n | last).ok()
}

fn public(ip: IpAddr) -> bool {
    classify(ip) == AddrClass::Public
}

/// The invariants for one spelling; `v4` is the address it spells, if it
/// was made from one.
pub fn check_spelling(s: &str, v4: Option<Ipv4Addr>) {
    let carried_public = v4.map(|a| public(IpAddr::V4(a)));
    // The host parser.
    match Host::parse(s) {
        Some(Host::Name(name)) => {
            assert!(
                v4.is_none(),
                "the spelling {s:?} of {v4:?} is taken for the name {name:?}"
            );
            check_name(s, &name);
        }
        Some(Host::Ip(ip)) => {
            if carried_public == Some(false) {
                assert!(
                    !public(ip),
                    "{s:?} spells {v4:?} (not public) but reads as the public {ip}"
                );
            }
            let shown = Host::Ip(ip).to_string();
            assert_eq!(Host::parse(&shown), Some(Host::Ip(ip)), "{shown}");
        }
        Some(_) | None => {}
    }
    // The entry parser, bare and with a port.
    for raw in [s.to_owned(), format!("{s}:8443"), format!("[{s}]:8443")] {
        let Ok(entry) = NetEntry::parse(&raw) else {
            continue;
        };
        match entry.host() {
            NetHost::Name(name) | NetHost::Suffix(name) => {
                assert!(
                    v4.is_none(),
                    "the entry {raw:?} spelling {v4:?} is taken for the name {name:?}"
                );
                assert!(
                    inet_aton(name).is_none(),
                    "the entry {raw:?} is a name that inet_aton reads as an address"
                );
            }
            NetHost::Ip(ip) => {
                let ip = *ip;
                if carried_public == Some(false) {
                    assert!(!public(ip), "entry {raw:?} spells {v4:?} as public {ip}");
                }
                let class = classify(ip);
                let ok = entry.check_restricted().is_ok();
                let expect = class == AddrClass::Public
                    || (class == AddrClass::Loopback && entry.port().is_some());
                assert_eq!(ok, expect, "check_restricted of {raw:?} ({class:?})");
            }
            _ => {}
        }
    }
    // The rules, on the spelling and on the host of a URL holding it.
    let mut hosts = vec![s.to_owned()];
    for url in [format!("https://{s}/"), format!("https://{s}:7655/x")] {
        if let Ok(t) = Target::parse(&url) {
            if let Some(v4) = v4 {
                assert!(
                    Host::parse(t.host()).is_none_or(|h| h.ip().is_some()),
                    "the URL {url:?} spelling {v4} has the name {:?}",
                    t.host()
                );
            }
            hosts.push(t.host().to_owned());
        }
    }
    for host in &hosts {
        check_rules(host, v4);
    }
}

fn check_name(s: &str, name: &str) {
    assert!(
        inet_aton(name).is_none(),
        "{s:?} is taken for the name {name:?}, which inet_aton reads as an address"
    );
    assert!(
        name.parse::<IpAddr>().is_err(),
        "{s:?} is taken for the name {name:?}, an address"
    );
    assert!(
        !name.contains([':', '[', ']', '%', '/', '@']),
        "the name {name:?} holds a character no DNS name holds"
    );
    assert_eq!(
        Host::parse(&Host::Name(name.to_owned()).to_string()),
        Some(Host::Name(name.to_owned()))
    );
}

fn rules(mode: Mode, extra: Option<&str>) -> Rules {
    let mut allow: Vec<NetEntry> = [
        "127.0.0.1:7655",
        "[::1]:7655",
        "example.com",
        "*.example.com",
    ]
    .iter()
    .map(|e| NetEntry::parse(e).expect("fixed entry"))
    .collect();
    if let Some(e) = extra.and_then(|e| NetEntry::parse(e).ok()) {
        if mode == Mode::TrustedHost || e.check_restricted().is_ok() {
            allow.push(e);
        }
    }
    Rules::new(mode, allow, true)
}

fn check_rules(host: &str, v4: Option<Ipv4Addr>) {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    for mode in [Mode::Restricted, Mode::TrustedHost] {
        for extra in [None, Some(host), Some(bare)] {
            let r = rules(mode, extra);
            for hop in [Hop::First, Hop::Redirect] {
                for port in [443u16, 7655] {
                    let Ok(admitted) = r.admit(hop, Some("https"), host, Some(port)) else {
                        continue;
                    };
                    let judged = admitted.host().clone();
                    if let (Some(v4), Host::Name(name)) = (v4, &judged) {
                        panic!("{host:?} (spelling {v4}) admitted as the name {name:?}");
                    }
                    // The addresses the connection could use: the literal
                    // itself, or whatever a name resolved to.
                    let addrs: Vec<IpAddr> = match judged.ip() {
                        Some(ip) => vec![ip],
                        None => ADDRS
                            .iter()
                            .map(|o| IpAddr::V4(Ipv4Addr::from(*o)))
                            .chain(
                                ["::1", "::ffff:10.0.0.1", "fe80::1", "::"]
                                    .map(|a| a.parse::<IpAddr>().expect("fixed address")),
                            )
                            .collect(),
                    };
                    for ip in addrs {
                        let d = admitted.check(ip);
                        if !d.allowed {
                            continue;
                        }
                        let class = classify(ip);
                        if let Some(v4) = v4 {
                            if !public(IpAddr::V4(v4)) && class == AddrClass::Public {
                                panic!("{host:?} spells {v4} (not public) and reaches {ip}");
                            }
                        }
                        assert_ne!(
                            class,
                            AddrClass::Unspecified,
                            "{host:?} reaches the unspecified {ip} ({mode:?})"
                        );
                        if class == AddrClass::Loopback {
                            assert_eq!(hop, Hop::First, "a redirect to {host:?} reaches {ip}");
                            assert!(
                                judged.ip().is_some() || mode == Mode::TrustedHost,
                                "the name {host:?} reaches loopback {ip} in restricted mode"
                            );
                            if mode == Mode::Restricted {
                                assert_eq!(port, 7655, "{host:?} reaches loopback port {port}");
                            }
                        }
                        if mode == Mode::Restricted {
                            assert!(
                                matches!(class, AddrClass::Public | AddrClass::Loopback),
                                "restricted mode lets {host:?} reach {ip} ({class:?})"
                            );
                        }
                    }
                }
            }
        }
    }
}
