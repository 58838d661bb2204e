//! Host spellings: strict DNS names, loopback names, and the hosts of
//! requests.
//!
//! Resolvers built on `inet_aton` read `127.1`, `2130706433` or `0x7f.1` as
//! IPv4 addresses, so a name whose last label is all digits or `0x…` would
//! alias a literal: such names are refused, never guessed at.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::class::{classify, AddrClass};

/// A strict, lowercased hostname: dot-separated labels of 1..=63 ASCII
/// letters, digits and inner hyphens, 253 bytes at most, no trailing dot.
/// The last label may not be all digits nor `0x…`: resolvers built on
/// `inet_aton` read `127.1`, `2130706433` or `0x7f.1` as IPv4 addresses,
/// so such "names" would alias literals.
pub fn is_dns_name(name: &str) -> bool {
    if name.is_empty() || name.len() > 253 {
        return false;
    }
    let labels_ok = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    });
    if !labels_ok {
        return false;
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    let numeric = last.bytes().all(|b| b.is_ascii_digit());
    let hex = last
        .strip_prefix("0x")
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    !numeric && !hex
}

const LOOPBACK_NAMES: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "ip6-localhost",
    "ip6-loopback",
];

/// `localhost`, its subdomains (RFC 6761 reserves them for loopback) and the
/// loopback aliases common in `/etc/hosts`. `name` is lowercased.
pub fn is_loopback_name(name: &str) -> bool {
    LOOPBACK_NAMES.contains(&name) || name.ends_with(".localhost")
}

/// Whether `*.suffix` covers a loopback name.
pub(crate) fn suffix_covers_loopback(suffix: &str) -> bool {
    is_loopback_name(suffix)
        || is_loopback_name(&format!("x.{suffix}"))
        || LOOPBACK_NAMES.iter().any(|name| {
            name.strip_suffix(suffix)
                .is_some_and(|head| head.ends_with('.'))
        })
}

/// An IP literal as a URL writes it: a dotted-quad IPv4 address or a
/// bracketed IPv6 address (`1.2.3.4`, `[::1]`). Any other spelling of an
/// address (`0x7f.1`, `2130706433`, `0127.0.0.1`) is not a literal.
pub fn url_literal(host: &str) -> Option<IpAddr> {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

/// The host of a request, parsed: a strict lowercased DNS name or an IP
/// literal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Host {
    /// A DNS name, lowercased.
    Name(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl Host {
    /// Parses a request host as a URL or a proxy's `CONNECT` gives it: a
    /// bracketed IPv6 literal (or a bare one, since the port travels
    /// separately), a dotted-quad IPv4 literal, or a strict DNS name
    /// ([`is_dns_name`] after lowercasing). `None` for anything else, zone
    /// identifiers and alternate spellings of addresses included.
    pub fn parse(host: &str) -> Option<Host> {
        if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .ok()
                .map(|ip| Host::Ip(IpAddr::V6(ip)));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(Host::Ip(ip));
        }
        let name = host.to_ascii_lowercase();
        is_dns_name(&name).then_some(Host::Name(name))
    }

    /// The literal's address, or `None` for a name (which must be
    /// resolved).
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Host::Ip(ip) => Some(*ip),
            Host::Name(_) => None,
        }
    }

    /// Whether the host names loopback: a loopback literal or a loopback
    /// name.
    pub fn is_loopback(&self) -> bool {
        match self {
            Host::Name(name) => is_loopback_name(name),
            Host::Ip(ip) => classify(*ip) == AddrClass::Loopback,
        }
    }
}

impl fmt::Display for Host {
    /// A name as is, an IPv4 literal as a dotted quad, an IPv6 literal in
    /// brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        for good in [
            "a",
            "example.com",
            "a-b.c",
            "xn--bcher-kva.de",
            "1a.com",
            "a.b1",
            "0x.com",
        ] {
            assert!(is_dns_name(good), "{good}");
        }
        for bad in [
            "", ".", "a.", ".a", "a..b", "A.com", "a_b.com", "-a", "a-", "127.1", "1.2.3.4",
            "0x7f", "a.0x1f", "a b", "ü.de",
        ] {
            assert!(!is_dns_name(bad), "{bad}");
        }
        assert!(is_dns_name(&"a".repeat(63)));
        assert!(!is_dns_name(&"a".repeat(64)));
        let long = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert_eq!(long.len(), 253);
        assert!(is_dns_name(&long));
        assert!(!is_dns_name(&format!("{long}e")));
    }

    #[test]
    fn loopback_names() {
        for name in [
            "localhost",
            "a.localhost",
            "localhost.localdomain",
            "ip6-localhost",
            "ip6-loopback",
        ] {
            assert!(is_loopback_name(name), "{name}");
        }
        assert!(!is_loopback_name("localhost.example.com"));
        assert!(!is_loopback_name("mylocalhost"));
        assert!(suffix_covers_loopback("localhost"));
        assert!(suffix_covers_loopback("localdomain"));
        assert!(!suffix_covers_loopback("example.com"));
    }

    #[test]
    fn request_hosts() {
        assert_eq!(Host::parse("[::1]"), Some(Host::Ip("::1".parse().unwrap())));
        assert_eq!(Host::parse("::1"), Some(Host::Ip("::1".parse().unwrap())));
        assert_eq!(
            Host::parse("Example.COM"),
            Some(Host::Name("example.com".into()))
        );
        assert_eq!(Host::parse("[fe80::1%eth0]"), None);
        assert_eq!(Host::parse("[1.2.3.4]"), None);
        assert_eq!(Host::parse("0x7f.1"), None);
    }

    #[test]
    fn literals() {
        assert_eq!(url_literal("127.0.0.1"), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(url_literal("[::1]"), Some("::1".parse().unwrap()));
        assert_eq!(url_literal("::1"), None);
        assert_eq!(url_literal("0x7f.1"), None);
        assert_eq!(url_literal("2130706433"), None);
        assert_eq!(url_literal("0127.0.0.1"), None);
    }
}
