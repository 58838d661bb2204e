//! `net.allow` entries at load: malformed ones in every mode, and what
//! restricted mode refuses.

use std::net::IpAddr;

use sandgate_policy::{NetEntry, NetHost, PolicyErrorKind as K};

use crate::common::{load, ok, refused};

fn restricted(entry: &str) -> String {
    format!("[net]\nallow = [\"api.example.com\", {entry:?}]\n")
}

fn trusted(entry: &str) -> String {
    format!("security_mode = \"trusted_host\"\n[net]\nallow = [\"api.example.com\", {entry:?}]\n")
}

#[track_caller]
fn refused_in_restricted_only(entry: &str, needle: &str) {
    let err = refused(&restricted(entry), K::NetEntryRefused, "net.allow[1]");
    assert!(err.message().contains(needle), "{entry}: {err}");
    let p = ok(&trusted(entry));
    assert_eq!(p.net_allow()[1].raw(), entry);
}

#[track_caller]
fn malformed_in_every_mode(entry: &str) {
    refused(&restricted(entry), K::NetEntryMalformed, "net.allow[1]");
    refused(&trusted(entry), K::NetEntryMalformed, "net.allow[1]");
}

// ---- well-formed entries ----

#[test]
fn entry_forms_parse() {
    let p = ok(r#"[net]
allow = ["API.Example.com", "api.example.com:8443", "*.svc.example", "*.svc.example:9000",
         "203.0.113.7", "203.0.113.7:443", "[2001:db8::1]", "[2001:db8::1]:443", "2001:db8::1",
         "127.0.0.1:7655", "[::1]:7655"]
"#);
    let entries = p.net_allow();
    let hp = |e: &NetEntry| (e.host().clone(), e.port());
    assert_eq!(
        hp(&entries[0]),
        (NetHost::Name("api.example.com".into()), None)
    );
    assert_eq!(
        entries[0].raw(),
        "API.Example.com",
        "raw is kept as written"
    );
    assert_eq!(
        hp(&entries[1]),
        (NetHost::Name("api.example.com".into()), Some(8443))
    );
    assert_eq!(
        hp(&entries[2]),
        (NetHost::Suffix("svc.example".into()), None)
    );
    assert_eq!(
        hp(&entries[3]),
        (NetHost::Suffix("svc.example".into()), Some(9000))
    );
    let v4: IpAddr = "203.0.113.7".parse().unwrap();
    let v6: IpAddr = "2001:db8::1".parse().unwrap();
    assert_eq!(hp(&entries[4]), (NetHost::Ip(v4), None));
    assert_eq!(hp(&entries[5]), (NetHost::Ip(v4), Some(443)));
    assert_eq!(hp(&entries[6]), (NetHost::Ip(v6), None));
    assert_eq!(hp(&entries[7]), (NetHost::Ip(v6), Some(443)));
    assert_eq!(hp(&entries[8]), (NetHost::Ip(v6), None));
    assert!(entries[9].is_loopback() && entries[10].is_loopback());
    assert!(!entries[0].is_loopback());
}

// ---- restricted mode refusals ----

#[test]
fn bare_loopback_v4_is_refused_in_restricted() {
    refused_in_restricted_only("127.0.0.1", "every local port");
    refused_in_restricted_only("127.8.9.10", "every local port");
}

#[test]
fn bare_loopback_v6_is_refused_in_restricted() {
    refused_in_restricted_only("::1", "every local port");
    refused_in_restricted_only("[::1]", "every local port");
}

#[test]
fn bare_localhost_is_refused_in_restricted() {
    refused_in_restricted_only("localhost", "every local port");
}

#[test]
fn loopback_name_with_port_is_refused_in_restricted() {
    refused_in_restricted_only("localhost:7655", "list the literal");
    refused_in_restricted_only("LocalHost:7655", "list the literal");
    refused_in_restricted_only("app.localhost:7655", "list the literal");
    refused_in_restricted_only("ip6-localhost:80", "list the literal");
    refused_in_restricted_only("*.localhost:80", "list the literal");
}

#[test]
fn port_qualified_loopback_literal_is_admitted_in_restricted() {
    ok(&restricted("127.0.0.1:7655"));
    ok(&restricted("[::1]:7655"));
    ok(&restricted("[::ffff:127.0.0.1]:7655"));
}

#[test]
fn private_literals_are_refused_in_restricted() {
    for entry in [
        "10.0.0.1",
        "10.1.2.3:443",
        "172.16.0.1",
        "172.31.255.255:80",
        "192.168.1.1",
        "100.64.0.1",
        "[fc00::1]",
        "[fd12:3456::1]:443",
        "fd00::1",
        "[::ffff:10.0.0.1]:443",
        "[64:ff9b::a00:1]",
    ] {
        refused_in_restricted_only(entry, "private");
    }
}

#[test]
fn link_local_and_metadata_literals_are_refused_in_restricted() {
    for entry in [
        "169.254.169.254",
        "169.254.169.254:80",
        "169.254.1.1",
        "[fe80::1]:80",
        "fe80::1",
    ] {
        refused_in_restricted_only(entry, "link-local");
    }
}

#[test]
fn unspecified_literals_are_refused_in_restricted() {
    for entry in ["0.0.0.0", "0.0.0.0:80", "[::]", "[::]:443", "0.1.2.3"] {
        refused_in_restricted_only(entry, "unspecified");
    }
}

#[test]
fn multicast_and_reserved_literals_are_refused_in_restricted() {
    for entry in ["224.0.0.1", "239.255.255.250:1900", "[ff02::1]:80"] {
        refused_in_restricted_only(entry, "multicast");
    }
    refused_in_restricted_only("255.255.255.255", "broadcast");
    refused_in_restricted_only("240.0.0.1:80", "reserved");
}

#[test]
fn public_names_and_literals_are_admitted_in_restricted() {
    for entry in [
        "example.com",
        "8.8.8.8:53",
        "[2606:4700::1111]:443",
        "172.32.0.1",
        "*.example.com",
    ] {
        ok(&restricted(entry));
    }
}

// ---- malformed in every mode ----

#[test]
fn port_zero_is_malformed() {
    malformed_in_every_mode("127.0.0.1:0");
    malformed_in_every_mode("example.com:0");
    malformed_in_every_mode("[::1]:0");
}

#[test]
fn url_is_malformed() {
    let err = refused(
        &restricted("http://host"),
        K::NetEntryMalformed,
        "net.allow[1]",
    );
    assert!(err.message().contains("URL"), "{err}");
    malformed_in_every_mode("https://api.example.com");
    malformed_in_every_mode("https://api.example.com:443/");
}

#[test]
fn unbracketed_ipv6_with_a_port_is_malformed() {
    let err = refused(&trusted("::1:80"), K::NetEntryMalformed, "net.allow[1]");
    assert!(err.message().contains("[addr]:PORT"), "{err}");
    malformed_in_every_mode("::1:80");
    malformed_in_every_mode("2001:db8::1:443");
    malformed_in_every_mode("fe80:::80");
}

#[test]
fn empty_entry_is_malformed() {
    malformed_in_every_mode("");
}

#[test]
fn port_over_65535_is_malformed() {
    malformed_in_every_mode("example.com:65536");
    malformed_in_every_mode("example.com:99999999999999999999");
    malformed_in_every_mode("[::1]:70000");
    ok(&restricted("example.com:65535"));
}

#[test]
fn bad_ports_are_malformed() {
    for entry in [
        "example.com:",
        "example.com:http",
        "example.com:+80",
        "example.com:080",
        "example.com:-1",
    ] {
        malformed_in_every_mode(entry);
    }
}

#[test]
fn spaces_and_controls_are_malformed() {
    for entry in [
        " example.com",
        "example.com ",
        "exa mple.com",
        "example.com:\t80",
        "a\nb",
    ] {
        malformed_in_every_mode(entry);
    }
}

#[test]
fn path_is_malformed() {
    malformed_in_every_mode("example.com/api");
    malformed_in_every_mode("example.com:443/");
}

#[test]
fn userinfo_query_and_zone_are_malformed() {
    for entry in [
        "user@example.com",
        "example.com?x",
        "example.com#x",
        "[fe80::1%eth0]:80",
        "a\\b",
    ] {
        malformed_in_every_mode(entry);
    }
}

#[test]
fn bad_brackets_are_malformed() {
    for entry in [
        "[::1",
        "::1]",
        "[10.0.0.1]:80",
        "[example.com]",
        "[::1]x",
        "[::1]:",
        "[[::1]]",
    ] {
        malformed_in_every_mode(entry);
    }
}

#[test]
fn too_many_colons_are_malformed() {
    malformed_in_every_mode("example.com:80:90");
    malformed_in_every_mode("1.2.3.4:80:90");
}

#[test]
fn names_that_alias_addresses_are_malformed() {
    for entry in [
        "0x7f.1",
        "0x7f000001",
        "2130706433",
        "127.1",
        "127.0.1",
        "0177.0.0.1",
        "127.000.000.001",
        "10.0.0.1.2",
    ] {
        malformed_in_every_mode(entry);
    }
}

#[test]
fn invalid_dns_names_are_malformed() {
    for entry in [
        "exa_mple.com",
        "-a.com",
        "a-.com",
        "a..com",
        ".com",
        "example.com.",
        "bücher.de",
        &format!("{}.com", "a".repeat(64)),
    ] {
        malformed_in_every_mode(entry);
    }
    ok(&restricted("xn--bcher-kva.de"));
    ok(&restricted(&format!("{}.com", "a".repeat(63))));
}

#[test]
fn misplaced_wildcards_are_malformed() {
    for entry in [
        "*",
        "*.",
        "*example.com",
        "a.*.com",
        "*.*.com",
        "**.com",
        "*.com*",
        "*.127.0.0.1",
    ] {
        malformed_in_every_mode(entry);
    }
}

#[test]
fn first_malformed_entry_is_named_by_index() {
    let err =
        load("[net]\nallow = [\"a.com\", \"b.com\", \"c.com:0\", \"d.com:0\"]\n").unwrap_err();
    assert_eq!(err.key(), Some("net.allow[2]"));
}

#[test]
fn net_entry_parse_is_public() {
    assert!(NetEntry::parse("api.example.com:443").is_ok());
    let err = NetEntry::parse("http://x").unwrap_err();
    assert!(err.to_string().contains("URL"));
}
