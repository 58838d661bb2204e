//! Allow-list entries: `host`, `host:PORT`, `*.suffix[:PORT]` and IP
//! literals, parsed strictly.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::class::{classify, AddrClass};
use crate::host::{is_dns_name, is_loopback_name, suffix_covers_loopback, Host};
use crate::rules::Mode;

/// One parsed allow-list entry.
///
/// Forms: `host` (any port), `host:PORT` (that port only), `*.suffix` and
/// `*.suffix:PORT` (strict subdomains of `suffix`, at any depth, never the
/// bare suffix itself), an IPv4 literal with or without `:PORT`, a
/// bracketed IPv6 literal `[::1]` or `[::1]:7655`, and an unbracketed IPv6
/// literal without a port (`::1`) when it cannot be misread as one with a
/// port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetEntry {
    raw: String,
    host: NetHost,
    port: Option<u16>,
}

/// The host part of a [`NetEntry`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NetHost {
    /// A DNS name, lowercased (`api.example.com`).
    Name(String),
    /// `*.suffix`: the lowercased suffix without the `*.`; admits names
    /// strictly below it.
    Suffix(String),
    /// An IP literal.
    Ip(IpAddr),
}

/// Why an entry string is not a well-formed entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct MalformedEntry {
    reason: String,
}

/// Why restricted mode refuses a well-formed entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct RefusedEntry {
    reason: String,
}

#[cold]
fn malformed(reason: impl Into<String>) -> MalformedEntry {
    MalformedEntry {
        reason: reason.into(),
    }
}

#[cold]
fn refused(reason: impl Into<String>) -> RefusedEntry {
    RefusedEntry {
        reason: reason.into(),
    }
}

impl NetEntry {
    /// Parses one entry, checking its form only (the rules that hold in
    /// every mode); [`NetEntry::check_restricted`] adds restricted mode's.
    pub fn parse(raw: &str) -> Result<NetEntry, MalformedEntry> {
        if raw.is_empty() {
            return Err(malformed("an empty entry"));
        }
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(malformed("contains whitespace or a control character"));
        }
        if raw.contains("://") {
            return Err(malformed(
                "a URL, not a host: write the host (and port) only; the scheme comes from the \
                 request, and http/ws also need net.allow_http",
            ));
        }
        if raw.contains('/') {
            return Err(malformed("contains a path: write the host (and port) only"));
        }
        if raw.contains(['@', '?', '#', '%', '\\']) {
            return Err(malformed(
                "contains a character that has no place in a host (`@`, `?`, `#`, `%` or `\\`)",
            ));
        }

        let (host_part, port) = split_host_port(raw)?;
        let host = match host_part {
            HostPart::V6(ip) => NetHost::Ip(IpAddr::V6(ip)),
            HostPart::Text(text) => parse_entry_host(text)?,
        };
        Ok(NetEntry {
            raw: raw.to_owned(),
            host,
            port,
        })
    }

    /// The entry as written.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The host part.
    pub fn host(&self) -> &NetHost {
        &self.host
    }

    /// The port, when the entry names one (`None`: any port).
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether this entry names loopback: a loopback literal, a loopback
    /// name (`localhost`, `*.localhost`, …) or a wildcard that covers one.
    pub fn is_loopback(&self) -> bool {
        match &self.host {
            NetHost::Ip(ip) => classify(*ip) == AddrClass::Loopback,
            NetHost::Name(name) => is_loopback_name(name),
            NetHost::Suffix(suffix) => suffix_covers_loopback(suffix),
        }
    }

    /// Restricted mode's refusals of a well-formed entry: a loopback entry
    /// without a port (it would open every local port), a loopback name or
    /// a wildcard covering one (list the literal), and a literal of any
    /// class that restricted mode refuses.
    pub fn check_restricted(&self) -> Result<(), RefusedEntry> {
        match &self.host {
            NetHost::Ip(ip) => match classify(*ip) {
                AddrClass::Public => Ok(()),
                AddrClass::Loopback if self.port.is_some() => Ok(()),
                AddrClass::Loopback => Err(refused(
                    "a bare loopback entry would open every local port: name the port \
                     (`127.0.0.1:7655`, `[::1]:7655`)",
                )),
                class => Err(refused(format!(
                    "{} is refused in restricted mode",
                    class.describe()
                ))),
            },
            NetHost::Name(name) if is_loopback_name(name) => Err(refused(if self.port.is_none() {
                "a bare loopback entry would open every local port: name the literal and \
                 the port (`127.0.0.1:7655`)"
            } else {
                "a loopback name is refused in restricted mode: list the literal \
                 (`127.0.0.1:PORT` or `[::1]:PORT`) instead"
            })),
            NetHost::Suffix(suffix) if suffix_covers_loopback(suffix) => Err(refused(
                "a wildcard that covers loopback names is refused in restricted mode: list \
                 the literal (`127.0.0.1:PORT`) instead",
            )),
            NetHost::Name(_) | NetHost::Suffix(_) => Ok(()),
        }
    }

    /// Whether the entry admits `host` on `port`: names match names
    /// exactly, suffixes match names strictly below them, literals match
    /// the same address; a name never matches a literal.
    pub(crate) fn admits(&self, host: &Host, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, host) {
            (NetHost::Name(entry), Host::Name(name)) => entry == name,
            (NetHost::Suffix(suffix), Host::Name(name)) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (NetHost::Ip(entry), Host::Ip(ip)) => entry == ip,
            _ => false,
        }
    }

    /// Whether a loopback destination reached through this entry is
    /// granted: restricted mode takes only a port-qualified loopback literal
    /// (the request matched it exactly); trusted_host also takes a bare
    /// loopback literal and a loopback name, as the operator's explicit
    /// grant.
    pub(crate) fn grants_loopback(&self, mode: Mode) -> bool {
        match (&self.host, mode) {
            (NetHost::Ip(ip), Mode::Restricted) => {
                classify(*ip) == AddrClass::Loopback && self.port.is_some()
            }
            (NetHost::Ip(ip), Mode::TrustedHost) => classify(*ip) == AddrClass::Loopback,
            (NetHost::Name(name), Mode::TrustedHost) => is_loopback_name(name),
            _ => false,
        }
    }
}

impl fmt::Display for NetEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

enum HostPart<'a> {
    V6(Ipv6Addr),
    Text(&'a str),
}

fn split_host_port(raw: &str) -> Result<(HostPart<'_>, Option<u16>), MalformedEntry> {
    if let Some(rest) = raw.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err(malformed("an opening `[` without a closing `]`"));
        };
        let inner = &rest[..close];
        let ip: Ipv6Addr = inner
            .parse()
            .map_err(|_| malformed("brackets hold something that is not an IPv6 address"))?;
        let after = &rest[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(port) => Some(parse_port(port)?),
            None if after.is_empty() => None,
            None => return Err(malformed("unexpected text after `]`: expected `:PORT`")),
        };
        return Ok((HostPart::V6(ip), port));
    }
    if raw.contains(['[', ']']) {
        return Err(malformed(
            "brackets are only admitted around a whole IPv6 address",
        ));
    }
    if let Ok(ip) = raw.parse::<Ipv6Addr>() {
        if looks_like_v6_with_port(raw) {
            return Err(malformed(
                "an unbracketed IPv6 address whose last group reads as a port: write \
                 `[addr]:PORT` for a port, or `[addr]` for any port",
            ));
        }
        return Ok((HostPart::V6(ip), None));
    }
    match raw.matches(':').count() {
        0 => Ok((HostPart::Text(raw), None)),
        1 => {
            let (host, port) = raw.split_once(':').unwrap_or((raw, ""));
            Ok((HostPart::Text(host), Some(parse_port(port)?)))
        }
        _ => Err(malformed(
            "more than one `:` outside brackets: an IPv6 address with a port is written \
             `[addr]:PORT`",
        )),
    }
}

/// `::1:80` parses as the IPv6 address `::0.1.0.128`, yet most readers
/// mean "::1, port 80": such a spelling is refused as ambiguous.
fn looks_like_v6_with_port(raw: &str) -> bool {
    let Some((head, tail)) = raw.rsplit_once(':') else {
        return false;
    };
    !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) && head.parse::<Ipv6Addr>().is_ok()
}

fn parse_port(text: &str) -> Result<u16, MalformedEntry> {
    if text.is_empty() {
        return Err(malformed("an empty port after `:`"));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed(format!(
            "the port `{text}` is not a decimal number"
        )));
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err(malformed(format!("the port `{text}` has a leading zero")));
    }
    match text.parse::<u32>() {
        Ok(0) => Err(malformed("port 0 is not a port")),
        Ok(port) => {
            u16::try_from(port).map_err(|_| malformed(format!("the port {port} is over 65535")))
        }
        Err(_) => Err(malformed(format!("the port `{text}` is over 65535"))),
    }
}

fn parse_entry_host(text: &str) -> Result<NetHost, MalformedEntry> {
    if text.is_empty() {
        return Err(malformed("an empty host"));
    }
    if let Some(suffix) = text.strip_prefix("*.") {
        let suffix = suffix.to_ascii_lowercase();
        if suffix.contains('*') {
            return Err(malformed(
                "a wildcard is admitted only as the whole first label (`*.example.com`)",
            ));
        }
        if !is_dns_name(&suffix) {
            return Err(malformed(format!(
                "the wildcard suffix `{suffix}` is not a valid DNS name"
            )));
        }
        return Ok(NetHost::Suffix(suffix));
    }
    if text.contains('*') {
        return Err(malformed(
            "a wildcard is admitted only as the whole first label (`*.example.com`)",
        ));
    }
    if let Ok(ip) = text.parse::<Ipv4Addr>() {
        return Ok(NetHost::Ip(IpAddr::V4(ip)));
    }
    let name = text.to_ascii_lowercase();
    if is_dns_name(&name) {
        return Ok(NetHost::Name(name));
    }
    Err(malformed(format!(
        "`{text}` is neither a valid DNS name nor an IP literal (IPv4 as four decimal \
         octets; international names in their xn-- form)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_port_ambiguity() {
        assert!(looks_like_v6_with_port("::1:80"));
        assert!(looks_like_v6_with_port("2001:db8::1:443"));
        assert!(!looks_like_v6_with_port("::1"));
        assert!(!looks_like_v6_with_port("::"));
        assert!(!looks_like_v6_with_port("fe80::1"));
        assert!(!looks_like_v6_with_port("2001:db8::"));
        assert!(!looks_like_v6_with_port("::ffff:1.2.3.4"));
    }
}
