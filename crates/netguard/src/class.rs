//! Address classes: what kind of destination an IP address is.
//!
//! Where `std` has a stable method that draws the same line, the class
//! comes from it: [`Ipv4Addr::is_loopback`], [`Ipv4Addr::is_private`],
//! [`Ipv4Addr::is_link_local`], [`Ipv4Addr::is_multicast`],
//! [`Ipv6Addr::is_unspecified`], [`Ipv6Addr::is_loopback`],
//! [`Ipv6Addr::is_unique_local`], [`Ipv6Addr::is_unicast_link_local`],
//! [`Ipv6Addr::is_multicast`] and [`Ipv6Addr::to_ipv4_mapped`].
//!
//! The rest is a table, because `std` has no stable method for it or its
//! method draws a different line:
//!
//! - 0.0.0.0/8 as unspecified (`Ipv4Addr::is_unspecified` is true for
//!   0.0.0.0 alone, yet Linux routes the whole block to the local host);
//! - 100.64.0.0/10, the shared address space of carrier-grade NAT, as
//!   private (`is_shared` is not stable);
//! - 240.0.0.0/4 with the broadcast address as reserved (`is_reserved` is
//!   not stable);
//! - fec0::/10, the deprecated site-local block, as private;
//! - the IPv6 forms that carry an IPv4 address — IPv4-compatible
//!   `::a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64
//!   `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::/48` —
//!   judged by the address they carry, and the local-use NAT64 prefix
//!   64:ff9b:1::/48 as private.
//!
//! Ranges that are not routed on the internet but reach nothing local are
//! left public: the documentation blocks (192.0.2.0/24, 198.51.100.0/24,
//! 203.0.113.0/24, 2001:db8::/32) and the benchmarking block 198.18.0.0/15.
//! Teredo addresses (2001::/32) are public too; the IPv4 address they carry
//! is obfuscated and names a relay, not the destination.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

    /// The class in words, with its article (`"a private address"`).
    pub fn describe(self) -> &'static str {
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
/// (`::a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) and 6to4 (`2002:AABB:CCDD::`)
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
    if a == 0 {
        AddrClass::Unspecified
    } else if ip.is_loopback() {
        AddrClass::Loopback
    } else if ip.is_private() || (a == 100 && (64..=127).contains(&b)) {
        AddrClass::Private
    } else if ip.is_link_local() {
        AddrClass::LinkLocal
    } else if ip.is_multicast() {
        AddrClass::Multicast
    } else if a >= 240 {
        AddrClass::Reserved
    } else {
        AddrClass::Public
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
    // IPv4-compatible ::a.b.c.d (deprecated), IPv4-translated
    // ::ffff:0:a.b.c.d (SIIT, RFC 2765) and the NAT64 prefix carry the IPv4
    // address in their last 32 bits.
    if s[..6] == [0; 6] || s[..6] == [0, 0, 0, 0, 0xffff, 0] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
    {
        return classify_v4(v4_of(s[6], s[7]));
    }
    // 6to4 (2002:AABB:CCDD::/48) leads, through a relay, to the IPv4
    // address it carries.
    if s[0] == 0x2002 {
        return match classify_v4(v4_of(s[1], s[2])) {
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
    if ip.is_unique_local() || (0xfec0..=0xfeff).contains(&s[0]) {
        AddrClass::Private
    } else if ip.is_unicast_link_local() {
        AddrClass::LinkLocal
    } else if ip.is_multicast() {
        AddrClass::Multicast
    } else {
        AddrClass::Public
    }
}

/// The IPv4 address held in two IPv6 segments.
fn v4_of(high: u16, low: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))
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
            ("::ffff:0:127.0.0.1", Loopback),
            ("::ffff:0:10.0.0.1", Private),
            ("::ffff:0:169.254.169.254", LinkLocal),
            ("::ffff:0:8.8.8.8", Public),
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

    /// The hand-written table this module replaced, kept as the oracle:
    /// std's methods must draw exactly its lines on every IPv4 address
    /// boundary and on a spread of IPv6 prefixes.
    fn table_v4(ip: Ipv4Addr) -> AddrClass {
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

    #[test]
    fn std_methods_agree_with_the_table_on_every_v4_prefix() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                for (c, d) in [(0, 0), (0, 1), (255, 255), (169, 254)] {
                    let ip = Ipv4Addr::new(a, b, c, d);
                    assert_eq!(classify_v4(ip), table_v4(ip), "{ip}");
                }
            }
        }
    }

    #[test]
    fn std_methods_agree_with_the_table_on_v6_first_segments() {
        for first in 0..=0xffffu16 {
            let ip = Ipv6Addr::new(first, 0x1234, 0, 0, 0, 0, 0, 1);
            let want = match first {
                0xfc00..=0xfdff | 0xfec0..=0xfeff => AddrClass::Private,
                0xfe80..=0xfebf => AddrClass::LinkLocal,
                0xff00..=0xffff => AddrClass::Multicast,
                0x2002 => classify_v4(Ipv4Addr::new(0x12, 0x34, 0, 0)),
                _ => AddrClass::Public,
            };
            assert_eq!(classify_v6(ip), want, "{ip}");
        }
    }
}
