//! `net.allow` entries, address classes and the network authorizer.
//!
//! The threat model: an agent asks for a URL, and everything between the
//! name it gives and the socket that connects is adversarial. Names can be
//! spelled to alias addresses (`0x7f.1`, `2130706433`), DNS can answer with
//! a private or loopback address for a public-looking name (rebinding), and
//! a permitted server can redirect to the cloud metadata service. So:
//!
//! - entries and request hosts must be a strict DNS name or an IP literal
//!   that `std::net` parses; anything else is refused, never guessed at;
//! - names match exactly (case-insensitively), literals match by address,
//!   and a name never matches a literal or the other way round;
//! - the caller passes the address it is about to dial, and in restricted
//!   mode private, link-local (metadata), unspecified, reserved and
//!   multicast addresses are refused whatever name led there;
//! - loopback is reached only through an entry that grants it explicitly,
//!   and never through a redirect.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use sandgate_codes::ErrorCode;

use crate::error::PolicyErrorKind;
use crate::SecurityMode;

/// One parsed `net.allow` entry.
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

/// The class of an IP address, as the authorizer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddrClass {
    /// A globally routable address (anything not below).
    Public,
    /// 127.0.0.0/8, `::1` (and their IPv4-mapped forms).
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, 100.64/10 (shared address space),
    /// fc00::/7 (unique local), fec0::/10 (deprecated site-local), the
    /// local-use NAT64 prefix 64:ff9b:1::/48, and 6to4 addresses of
    /// loopback or unspecified IPv4 addresses.
    Private,
    /// 169.254/16 (the cloud metadata service 169.254.169.254 included) and
    /// fe80::/10.
    LinkLocal,
    /// 0.0.0.0/8 and `::` (on Linux a connect to 0.0.0.0 reaches the local
    /// host).
    Unspecified,
    /// 224/4 and ff00::/8.
    Multicast,
    /// 240/4, including the broadcast address 255.255.255.255.
    Reserved,
}

impl AddrClass {
    /// Whether restricted mode refuses this class outright (everything but
    /// public and loopback; loopback has its own rule).
    pub fn refused_in_restricted(self) -> bool {
        !matches!(self, AddrClass::Public | AddrClass::Loopback)
    }

    fn describe(self) -> &'static str {
        match self {
            AddrClass::Public => "a public address",
            AddrClass::Loopback => "a loopback address",
            AddrClass::Private => "a private address",
            AddrClass::LinkLocal => "a link-local address (the cloud metadata service lives there)",
            AddrClass::Unspecified => "an unspecified address",
            AddrClass::Multicast => "a multicast address",
            AddrClass::Reserved => "a reserved or broadcast address",
        }
    }
}

/// Classifies an address; IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) and 6to4 (`2002:AABB:CCDD::`)
/// IPv6 addresses are classified by the IPv4 address they carry, since that
/// is where they lead.
pub fn classify(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    let [a, b, ..] = ip.octets();
    match (a, b) {
        (0, _) => AddrClass::Unspecified,
        (127, _) => AddrClass::Loopback,
        (10, _) | (192, 168) => AddrClass::Private,
        (172, 16..=31) | (100, 64..=127) => AddrClass::Private,
        (169, 254) => AddrClass::LinkLocal,
        (224..=239, _) => AddrClass::Multicast,
        (240..=255, _) => AddrClass::Reserved,
        _ => AddrClass::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    if ip.is_unspecified() {
        return AddrClass::Unspecified;
    }
    if ip.is_loopback() {
        return AddrClass::Loopback;
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let s = ip.segments();
    let embedded = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    // IPv4-compatible ::a.b.c.d (deprecated) and the NAT64 prefix.
    if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(embedded);
    }
    // 6to4 (2002:AABB:CCDD::/48) leads, through a relay, to the IPv4
    // address it carries.
    if s[0] == 0x2002 {
        let carried = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return match classify_v4(carried) {
            AddrClass::Public => AddrClass::Public,
            // A 6to4 address of a loopback or unspecified IPv4 address is
            // not that host's loopback: refuse it as private, never grant it.
            AddrClass::Loopback | AddrClass::Unspecified => AddrClass::Private,
            class => class,
        };
    }
    // The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) translates to
    // whatever IPv4 the site chooses, at a prefix length the site chooses:
    // local by definition.
    if s[..3] == [0x64, 0xff9b, 1] {
        return AddrClass::Private;
    }
    match s[0] {
        0xfc00..=0xfdff | 0xfec0..=0xfeff => AddrClass::Private,
        0xfe80..=0xfebf => AddrClass::LinkLocal,
        0xff00..=0xffff => AddrClass::Multicast,
        _ => AddrClass::Public,
    }
}

/// Why an entry string is not a well-formed `net.allow` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MalformedEntry(String);

impl fmt::Display for MalformedEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MalformedEntry {}

fn malformed(reason: impl Into<String>) -> MalformedEntry {
    MalformedEntry(reason.into())
}

impl NetEntry {
    /// Parses one entry, checking its form only (the rules that hold in
    /// every mode). Restricted mode's extra refusals are applied at policy
    /// load.
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

    /// The entry as written in the policy file.
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

    /// The reason restricted mode refuses this (well-formed) entry, if it
    /// does.
    pub(crate) fn restricted_refusal(&self) -> Option<String> {
        match &self.host {
            NetHost::Ip(ip) => match classify(*ip) {
                AddrClass::Public => None,
                AddrClass::Loopback if self.port.is_some() => None,
                AddrClass::Loopback => Some(
                    "a bare loopback entry would open every local port: name the port \
                     (`127.0.0.1:7655`, `[::1]:7655`)"
                        .to_owned(),
                ),
                class => Some(format!(
                    "{} is refused in restricted mode",
                    class.describe()
                )),
            },
            NetHost::Name(name) if is_loopback_name(name) => Some(if self.port.is_none() {
                "a bare loopback entry would open every local port: name the literal and \
                 the port (`127.0.0.1:7655`)"
                    .to_owned()
            } else {
                "a loopback name is refused in restricted mode: list the literal \
                 (`127.0.0.1:PORT` or `[::1]:PORT`) instead"
                    .to_owned()
            }),
            NetHost::Suffix(suffix) if suffix_covers_loopback(suffix) => Some(
                "a wildcard that covers loopback names is refused in restricted mode: list \
                 the literal (`127.0.0.1:PORT`) instead"
                    .to_owned(),
            ),
            NetHost::Name(_) | NetHost::Suffix(_) => None,
        }
    }

    fn admits(&self, host: &ReqHost, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, host) {
            (NetHost::Name(entry), ReqHost::Name(name)) => entry == name,
            (NetHost::Suffix(suffix), ReqHost::Name(name)) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (NetHost::Ip(entry), ReqHost::Ip(ip)) => entry == ip,
            _ => false,
        }
    }

    /// Whether a loopback destination reached through this entry is
    /// granted: restricted mode takes only a port-qualified loopback literal
    /// (the request matched it exactly); trusted_host also takes a bare
    /// loopback literal and a loopback name, as the operator's explicit
    /// grant.
    fn grants_loopback(&self, mode: SecurityMode) -> bool {
        match (&self.host, mode) {
            (NetHost::Ip(ip), SecurityMode::Restricted) => {
                classify(*ip) == AddrClass::Loopback && self.port.is_some()
            }
            (NetHost::Ip(ip), SecurityMode::TrustedHost) => classify(*ip) == AddrClass::Loopback,
            (NetHost::Name(name), SecurityMode::TrustedHost) => is_loopback_name(name),
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

/// A strict, lowercased hostname: dot-separated labels of 1..=63 ASCII
/// letters, digits and inner hyphens, 253 bytes at most, no trailing dot.
/// The last label may not be all digits nor `0x…`: resolvers built on
/// `inet_aton` read `127.1`, `2130706433` or `0x7f.1` as IPv4 addresses,
/// so such "names" would alias literals.
pub(crate) fn is_dns_name(name: &str) -> bool {
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
/// loopback aliases common in `/etc/hosts`.
pub(crate) fn is_loopback_name(name: &str) -> bool {
    LOOPBACK_NAMES.contains(&name) || name.ends_with(".localhost")
}

fn suffix_covers_loopback(suffix: &str) -> bool {
    is_loopback_name(suffix)
        || is_loopback_name(&format!("x.{suffix}"))
        || LOOPBACK_NAMES.iter().any(|name| {
            name.strip_suffix(suffix)
                .is_some_and(|head| head.ends_with('.'))
        })
}

/// A request host, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ReqHost {
    Name(String),
    Ip(IpAddr),
}

impl ReqHost {
    /// Request hosts come from URLs: `[v6]` bracketed (or bare, since the
    /// port travels separately), IPv4 dotted quads, or a strict DNS name.
    fn parse(host: &str) -> Option<ReqHost> {
        if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .ok()
                .map(|ip| ReqHost::Ip(IpAddr::V6(ip)));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(ReqHost::Ip(ip));
        }
        let name = host.to_ascii_lowercase();
        is_dns_name(&name).then_some(ReqHost::Name(name))
    }

    fn is_loopback(&self) -> bool {
        match self {
            ReqHost::Name(name) => is_loopback_name(name),
            ReqHost::Ip(ip) => classify(*ip) == AddrClass::Loopback,
        }
    }
}

/// The authorizer's answer for one destination.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetDecision {
    /// Whether the destination may be dialled.
    pub allowed: bool,
    /// Why, in words for a user: which entry admitted it, or what refused it.
    pub reason: String,
    /// The `net.allow` entry (as written) that matched the host and port.
    /// It is set on a refusal too when an entry matched but the address
    /// was refused; `allowed` alone is the decision.
    pub rule: Option<String>,
}

impl NetDecision {
    fn allow(entry: &NetEntry) -> Self {
        NetDecision {
            allowed: true,
            reason: format!("admitted by net.allow entry `{}`", entry.raw),
            rule: Some(entry.raw.clone()),
        }
    }

    fn deny(reason: impl Into<String>, rule: Option<&NetEntry>) -> Self {
        NetDecision {
            allowed: false,
            reason: reason.into(),
            rule: rule.map(|e| e.raw.clone()),
        }
    }

    /// `OK` when allowed, else `E_NET_DENIED`.
    pub fn code(&self) -> ErrorCode {
        if self.allowed {
            ErrorCode::Ok
        } else {
            ErrorCode::NetDenied
        }
    }
}

/// The gate rule for one `net.allow` entry: well-formed in every mode,
/// and admitted by restricted mode when `mode` says so (`None`: the mode
/// is unknown because its own key was refused; only the form is checked).
pub(crate) fn gate_entry(
    raw: &str,
    mode: Option<SecurityMode>,
) -> Result<NetEntry, (PolicyErrorKind, String)> {
    let quoted = raw.escape_debug();
    let entry = NetEntry::parse(raw).map_err(|why| {
        (
            PolicyErrorKind::NetEntryMalformed,
            format!("\"{quoted}\" is malformed: {why}"),
        )
    })?;
    if mode == Some(SecurityMode::Restricted) {
        if let Some(why) = entry.restricted_refusal() {
            return Err((
                PolicyErrorKind::NetEntryRefused,
                format!("\"{quoted}\": {why}"),
            ));
        }
    }
    Ok(entry)
}

/// The network half of a resolved policy.
#[derive(Clone, Debug)]
pub(crate) struct NetRules {
    pub(crate) mode: SecurityMode,
    pub(crate) allow: Vec<NetEntry>,
    pub(crate) allow_http: bool,
}

impl NetRules {
    pub(crate) fn authorize(
        &self,
        scheme: &str,
        host: &str,
        port: Option<u16>,
        resolved_ip: Option<IpAddr>,
        redirect: bool,
    ) -> NetDecision {
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "https" | "wss" => 443,
            "http" | "ws" if self.allow_http => 80,
            "http" | "ws" => {
                return NetDecision::deny(
                    format!(
                        "{} is plain text and net.allow_http is false",
                        scheme.escape_debug()
                    ),
                    None,
                )
            }
            _ => {
                return NetDecision::deny(
                    format!(
                        "the scheme \"{}\" is not admitted (https, wss; http and ws with \
                         net.allow_http)",
                        scheme.escape_debug()
                    ),
                    None,
                )
            }
        };
        let Some(req) = ReqHost::parse(host) else {
            return NetDecision::deny(
                format!(
                    "\"{}\" is neither a valid DNS name nor an IP literal",
                    host.escape_debug()
                ),
                None,
            );
        };
        let port = port.unwrap_or(default_port);
        if port == 0 {
            return NetDecision::deny("port 0 is not a destination", None);
        }
        let resolved_loopback = resolved_ip.is_some_and(|ip| classify(ip) == AddrClass::Loopback);
        if redirect && (req.is_loopback() || resolved_loopback) {
            return NetDecision::deny(
                "a redirect to loopback is always refused, the granted port included",
                None,
            );
        }
        if let (ReqHost::Ip(literal), Some(resolved)) = (&req, resolved_ip) {
            if *literal != resolved {
                return NetDecision::deny(
                    format!("the literal host {literal} was dialled as {resolved}"),
                    None,
                );
            }
        }
        let Some(entry) = self.allow.iter().find(|e| e.admits(&req, port)) else {
            return NetDecision::deny(
                format!("`{}` port {port} is not in net.allow", display_host(&req)),
                None,
            );
        };
        let address = resolved_ip.or(match req {
            ReqHost::Ip(ip) => Some(ip),
            ReqHost::Name(_) => None,
        });
        if let Some(ip) = address {
            let class = classify(ip);
            if class == AddrClass::Loopback {
                if !entry.grants_loopback(self.mode) {
                    return NetDecision::deny(
                        format!(
                            "{ip} is a loopback address; only a port-qualified loopback literal in \
                             net.allow (`127.0.0.1:PORT`, `[::1]:PORT`) reaches loopback"
                        ),
                        Some(entry),
                    );
                }
            } else if class == AddrClass::Unspecified
                || (self.mode == SecurityMode::Restricted && class.refused_in_restricted())
            {
                return NetDecision::deny(
                    format!(
                        "{ip} is {}, refused in {} mode whatever the name",
                        class.describe(),
                        self.mode.as_str()
                    ),
                    Some(entry),
                );
            }
        }
        NetDecision::allow(entry)
    }
}

fn display_host(host: &ReqHost) -> String {
    match host {
        ReqHost::Name(name) => name.clone(),
        ReqHost::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
        ReqHost::Ip(ip) => ip.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> AddrClass {
        classify(s.parse().unwrap())
    }

    #[test]
    fn classify_v4_ranges() {
        use AddrClass::*;
        for (addr, want) in [
            ("0.0.0.0", Unspecified),
            ("0.255.0.1", Unspecified),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("10.0.0.0", Private),
            ("172.15.255.255", Public),
            ("172.16.0.0", Private),
            ("172.31.255.255", Private),
            ("172.32.0.0", Public),
            ("192.168.0.1", Private),
            ("192.169.0.1", Public),
            ("100.63.255.255", Public),
            ("100.64.0.0", Private),
            ("100.127.255.255", Private),
            ("100.128.0.0", Public),
            ("169.254.169.254", LinkLocal),
            ("169.255.0.1", Public),
            ("223.255.255.255", Public),
            ("224.0.0.1", Multicast),
            ("239.255.255.255", Multicast),
            ("240.0.0.1", Reserved),
            ("255.255.255.255", Reserved),
            ("8.8.8.8", Public),
        ] {
            assert_eq!(class(addr), want, "{addr}");
        }
    }

    #[test]
    fn classify_v6_ranges() {
        use AddrClass::*;
        for (addr, want) in [
            ("::", Unspecified),
            ("::1", Loopback),
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:10.1.1.1", Private),
            ("::ffff:169.254.169.254", LinkLocal),
            ("::ffff:8.8.8.8", Public),
            ("::10.0.0.1", Private),
            ("64:ff9b::a9fe:a9fe", LinkLocal),
            ("64:ff9b::808:808", Public),
            ("64:ff9b:1::a9fe:a9fe", Private),
            ("64:ff9b:1:ffff::808:808", Private),
            ("2002:a9fe:a9fe::1", LinkLocal),
            ("2002:0a00:0001::1", Private),
            ("2002:7f00:0001::1", Private),
            ("2002:e000:0001::1", Multicast),
            ("2002:0808:0808::1", Public),
            ("2003::1", Public),
            ("fc00::1", Private),
            ("fdff:ffff::1", Private),
            ("fd00:ec2::254", Private),
            ("fec0::1", Private),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("ff02::1", Multicast),
            ("2001:db8::1", Public),
            ("2606:4700::1111", Public),
        ] {
            assert_eq!(class(addr), want, "{addr}");
        }
    }

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
    fn ipv6_port_ambiguity() {
        assert!(looks_like_v6_with_port("::1:80"));
        assert!(looks_like_v6_with_port("2001:db8::1:443"));
        assert!(!looks_like_v6_with_port("::1"));
        assert!(!looks_like_v6_with_port("::"));
        assert!(!looks_like_v6_with_port("fe80::1"));
        assert!(!looks_like_v6_with_port("2001:db8::"));
        assert!(!looks_like_v6_with_port("::ffff:1.2.3.4"));
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
        assert_eq!(
            ReqHost::parse("[::1]"),
            Some(ReqHost::Ip("::1".parse().unwrap()))
        );
        assert_eq!(
            ReqHost::parse("::1"),
            Some(ReqHost::Ip("::1".parse().unwrap()))
        );
        assert_eq!(
            ReqHost::parse("Example.COM"),
            Some(ReqHost::Name("example.com".into()))
        );
        assert_eq!(ReqHost::parse("[fe80::1%eth0]"), None);
        assert_eq!(ReqHost::parse("[1.2.3.4]"), None);
        assert_eq!(ReqHost::parse("0x7f.1"), None);
    }
}
