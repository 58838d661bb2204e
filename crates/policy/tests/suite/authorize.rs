//! The network authorizer: one test per rule.

use std::net::IpAddr;

use sandgate_codes::ErrorCode;
use sandgate_policy::{NetDecision, Policy};

use crate::common::ok;

fn policy(allow: &[&str], http: bool) -> Policy {
    ok(&format!("[net]\nallow = {allow:?}\nallow_http = {http}\n"))
}

fn trusted(allow: &[&str], http: bool) -> Policy {
    ok(&format!(
        "security_mode = \"trusted_host\"\n[net]\nallow = {allow:?}\nallow_http = {http}\n"
    ))
}

fn ip(s: &str) -> Option<IpAddr> {
    Some(s.parse().unwrap())
}

#[track_caller]
fn allowed(d: NetDecision) -> NetDecision {
    assert!(d.allowed, "expected allowed: {d:?}");
    assert_eq!(d.code(), ErrorCode::Ok);
    assert!(d.rule.is_some());
    d
}

#[track_caller]
fn denied(d: NetDecision) -> NetDecision {
    assert!(!d.allowed, "expected denied: {d:?}");
    assert_eq!(d.code(), ErrorCode::NetDenied);
    assert!(!d.reason.is_empty());
    d
}

// ---- host and port matching ----

#[test]
fn bare_host_entry_admits_any_port() {
    let p = policy(&["api.example.com"], false);
    let d = allowed(p.authorize("https", "api.example.com", None, None));
    assert_eq!(d.rule.as_deref(), Some("api.example.com"));
    allowed(p.authorize("https", "api.example.com", Some(8443), None));
    allowed(p.authorize("https", "api.example.com", Some(1), None));
}

#[test]
fn host_port_entry_admits_only_that_port() {
    let p = policy(&["api.example.com:8443"], false);
    allowed(p.authorize("https", "api.example.com", Some(8443), None));
    denied(p.authorize("https", "api.example.com", Some(443), None));
    denied(p.authorize("https", "api.example.com", None, None));
}

#[test]
fn default_port_is_443_for_https_and_wss() {
    let p = policy(&["api.example.com:443"], false);
    allowed(p.authorize("https", "api.example.com", None, None));
    allowed(p.authorize("wss", "api.example.com", None, None));
    let p = policy(&["api.example.com:80"], false);
    denied(p.authorize("https", "api.example.com", None, None));
}

#[test]
fn default_port_is_80_for_http_and_ws() {
    let p = policy(&["api.example.com:80"], true);
    allowed(p.authorize("http", "api.example.com", None, None));
    allowed(p.authorize("ws", "api.example.com", None, None));
    denied(p.authorize("http", "api.example.com", Some(8080), None));
}

#[test]
fn wildcard_admits_subdomains_at_any_depth() {
    let p = policy(&["*.svc.example"], false);
    allowed(p.authorize("https", "a.svc.example", None, None));
    allowed(p.authorize("https", "b.a.svc.example", None, None));
}

#[test]
fn wildcard_does_not_admit_the_bare_suffix() {
    let p = policy(&["*.svc.example"], false);
    denied(p.authorize("https", "svc.example", None, None));
    let p = policy(&["*.svc.example", "svc.example"], false);
    allowed(p.authorize("https", "svc.example", None, None));
}

#[test]
fn wildcard_does_not_admit_a_lookalike() {
    let p = policy(&["*.svc.example"], false);
    denied(p.authorize("https", "evilsvc.example", None, None));
    denied(p.authorize("https", "svc.example.evil.com", None, None));
    denied(p.authorize("https", ".svc.example", None, None));
}

#[test]
fn wildcard_with_port() {
    let p = policy(&["*.svc.example:9000"], false);
    allowed(p.authorize("https", "a.svc.example", Some(9000), None));
    denied(p.authorize("https", "a.svc.example", None, None));
}

#[test]
fn names_match_case_insensitively() {
    let p = policy(&["API.Example.com"], false);
    let d = allowed(p.authorize("https", "api.EXAMPLE.com", None, None));
    assert_eq!(d.rule.as_deref(), Some("API.Example.com"));
    let p = policy(&["*.Example.COM"], false);
    allowed(p.authorize("HTTPS", "WWW.example.com", None, None));
}

#[test]
fn names_match_exactly() {
    let p = policy(&["example.com"], false);
    denied(p.authorize("https", "www.example.com", None, None));
    denied(p.authorize("https", "example.com.evil.net", None, None));
    denied(p.authorize("https", "xexample.com", None, None));
}

#[test]
fn a_literal_entry_does_not_admit_a_loopback_name() {
    let p = policy(&["127.0.0.1:7655"], true);
    allowed(p.authorize("http", "127.0.0.1", Some(7655), None));
    denied(p.authorize("http", "localhost", Some(7655), None));
    denied(p.authorize("http", "localhost", Some(7655), ip("127.0.0.1")));
}

#[test]
fn a_name_entry_does_not_admit_its_address_as_a_literal() {
    let p = trusted(&["localhost:7655"], true);
    allowed(p.authorize("http", "localhost", Some(7655), ip("127.0.0.1")));
    denied(p.authorize("http", "127.0.0.1", Some(7655), None));
}

#[test]
fn bracketed_ipv6_entry_matches_by_address() {
    let p = policy(&["[::1]:7655"], true);
    allowed(p.authorize("http", "[::1]", Some(7655), None));
    allowed(p.authorize("http", "::1", Some(7655), ip("::1")));
    allowed(p.authorize("http", "[0:0:0:0:0:0:0:1]", Some(7655), None));
    denied(p.authorize("http", "[::1]", Some(7656), None));
    denied(p.authorize("http", "127.0.0.1", Some(7655), None));
}

#[test]
fn first_matching_entry_is_the_rule() {
    let p = policy(&["*.example.com", "api.example.com"], false);
    let d = allowed(p.authorize("https", "api.example.com", None, None));
    assert_eq!(d.rule.as_deref(), Some("*.example.com"));
}

#[test]
fn empty_allow_list_refuses_everything() {
    let p = policy(&[], true);
    let d = denied(p.authorize("https", "example.com", None, None));
    assert!(d.rule.is_none());
    assert!(d.reason.contains("not in net.allow"), "{d:?}");
}

// ---- schemes ----

#[test]
fn http_needs_allow_http() {
    let p = policy(&["api.example.com"], false);
    let d = denied(p.authorize("http", "api.example.com", None, None));
    assert!(d.reason.contains("allow_http"), "{d:?}");
    denied(p.authorize("ws", "api.example.com", None, None));
    allowed(policy(&["api.example.com"], true).authorize("http", "api.example.com", None, None));
}

#[test]
fn other_schemes_are_refused() {
    let p = policy(&["api.example.com"], true);
    for scheme in ["ftp", "file", "gopher", "", "https:", "httpx", "unix"] {
        denied(p.authorize(scheme, "api.example.com", None, None));
    }
}

#[test]
fn scheme_is_case_insensitive() {
    let p = policy(&["api.example.com"], false);
    allowed(p.authorize("HTTPS", "api.example.com", None, None));
    denied(p.authorize("HTTP", "api.example.com", None, None));
}

// ---- request host validity ----

#[test]
fn hosts_that_are_neither_names_nor_literals_are_refused() {
    let p = trusted(&["*.example.com", "127.0.0.1", "example.com"], true);
    for host in [
        "0x7f.1",
        "0x7f000001",
        "2130706433",
        "127.1",
        "0177.0.0.1",
        "",
        "exa mple.com",
        "[::1",
        "example.com.",
        "a_b.example.com",
        "ex%61mple.com",
        "[127.0.0.1]",
        "user@example.com",
    ] {
        let d = denied(p.authorize("https", host, None, None));
        assert!(
            d.reason
                .contains("neither a valid DNS name nor an IP literal"),
            "{host}: {d:?}"
        );
    }
}

#[test]
fn port_zero_is_refused() {
    let p = policy(&["api.example.com"], false);
    denied(p.authorize("https", "api.example.com", Some(0), None));
}

// ---- resolved addresses in restricted mode ----

#[test]
fn resolved_public_address_is_admitted() {
    let p = policy(&["api.example.com"], false);
    allowed(p.authorize("https", "api.example.com", None, ip("93.184.216.34")));
    allowed(p.authorize("https", "api.example.com", None, ip("2606:2800:220:1::1")));
}

#[test]
fn resolved_private_address_is_refused_in_restricted() {
    let p = policy(&["api.example.com"], false);
    for addr in [
        "10.0.0.5",
        "172.20.1.1",
        "192.168.0.10",
        "100.100.100.100",
        "fd00::5",
        "::ffff:192.168.0.1",
        "2002:c0a8:0001::1",
        "2002:7f00:0001::1",
        "64:ff9b:1::a9fe:a9fe",
    ] {
        let d = denied(p.authorize("https", "api.example.com", None, ip(addr)));
        assert!(d.reason.contains("private"), "{addr}: {d:?}");
        assert_eq!(
            d.rule.as_deref(),
            Some("api.example.com"),
            "the entry that matched is named"
        );
    }
}

#[test]
fn resolved_metadata_address_is_refused_in_restricted() {
    let p = policy(&["metadata.example.com"], true);
    let d = denied(p.authorize("http", "metadata.example.com", None, ip("169.254.169.254")));
    assert!(d.reason.contains("link-local"), "{d:?}");
    denied(p.authorize("http", "metadata.example.com", None, ip("fe80::a9fe:a9fe")));
    for carried in [
        "::ffff:a9fe:a9fe",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
    ] {
        let d = denied(p.authorize("http", "metadata.example.com", None, ip(carried)));
        assert!(d.reason.contains("link-local"), "{carried}: {d:?}");
    }
}

#[test]
fn resolved_unspecified_multicast_reserved_are_refused_in_restricted() {
    let p = policy(&["api.example.com"], false);
    for addr in [
        "0.0.0.0",
        "::",
        "224.0.0.251",
        "ff02::fb",
        "255.255.255.255",
        "240.1.2.3",
    ] {
        denied(p.authorize("https", "api.example.com", None, ip(addr)));
    }
}

#[test]
fn resolved_private_address_is_admitted_in_trusted_host() {
    let p = trusted(&["intranet.example.com", "10.1.2.3"], false);
    allowed(p.authorize("https", "intranet.example.com", None, ip("10.0.0.5")));
    allowed(p.authorize("https", "intranet.example.com", None, ip("169.254.169.254")));
    allowed(p.authorize("https", "10.1.2.3", Some(8443), None));
}

#[test]
fn unspecified_address_is_refused_in_every_mode() {
    let p = trusted(&["api.example.com", "0.0.0.0"], false);
    denied(p.authorize("https", "api.example.com", None, ip("0.0.0.0")));
    denied(p.authorize("https", "0.0.0.0", None, None));
}

// ---- loopback ----

#[test]
fn port_qualified_loopback_literal_is_admitted() {
    let p = policy(&["127.0.0.1:7655"], true);
    let d = allowed(p.authorize("http", "127.0.0.1", Some(7655), ip("127.0.0.1")));
    assert_eq!(d.rule.as_deref(), Some("127.0.0.1:7655"));
    denied(p.authorize("http", "127.0.0.1", Some(7656), None));
    denied(p.authorize("http", "127.0.0.2", Some(7655), None));
}

#[test]
fn name_resolving_to_loopback_is_refused() {
    let p = policy(&["api.example.com", "127.0.0.1:7655"], true);
    let d = denied(p.authorize("http", "api.example.com", Some(7655), ip("127.0.0.1")));
    assert!(d.reason.contains("loopback"), "{d:?}");
    denied(p.authorize("https", "api.example.com", None, ip("::1")));
    denied(p.authorize("https", "api.example.com", None, ip("::ffff:127.0.0.1")));
    // DNS rebinding is refused in trusted_host too: only loopback entries
    // reach loopback.
    let p = trusted(&["api.example.com"], true);
    denied(p.authorize("https", "api.example.com", None, ip("127.0.0.1")));
}

#[test]
fn literal_host_dialled_at_another_address_is_refused() {
    let p = policy(&["127.0.0.1:7655", "203.0.113.7"], true);
    denied(p.authorize("http", "127.0.0.1", Some(7655), ip("127.0.0.2")));
    denied(p.authorize("http", "203.0.113.7", None, ip("10.0.0.1")));
}

#[test]
fn trusted_host_bare_loopback_admits_every_loopback_port() {
    let p = trusted(&["127.0.0.1", "localhost"], true);
    allowed(p.authorize("http", "127.0.0.1", Some(1), None));
    allowed(p.authorize("http", "127.0.0.1", Some(65535), ip("127.0.0.1")));
    allowed(p.authorize("http", "localhost", Some(3000), ip("127.0.0.1")));
    allowed(p.authorize("http", "LOCALHOST", Some(3000), ip("::1")));
}

// ---- redirects ----

#[test]
fn redirect_hop_is_checked_again() {
    let p = policy(&["api.example.com"], false);
    allowed(p.authorize_redirect("https", "api.example.com", None, ip("93.184.216.34")));
    denied(p.authorize_redirect("https", "other.example.com", None, None));
    denied(p.authorize_redirect("http", "api.example.com", None, None));
    denied(p.authorize_redirect("https", "api.example.com", None, ip("10.0.0.1")));
}

#[test]
fn redirect_to_granted_loopback_port_is_refused() {
    let p = policy(&["127.0.0.1:7655", "[::1]:7655"], true);
    allowed(p.authorize("http", "127.0.0.1", Some(7655), None));
    let d = denied(p.authorize_redirect("http", "127.0.0.1", Some(7655), None));
    assert!(d.reason.contains("redirect to loopback"), "{d:?}");
    denied(p.authorize_redirect("http", "[::1]", Some(7655), None));
}

#[test]
fn redirect_to_a_name_resolving_to_loopback_is_refused() {
    let p = policy(&["api.example.com"], false);
    denied(p.authorize_redirect("https", "api.example.com", None, ip("127.0.0.1")));
}

#[test]
fn redirect_to_loopback_is_refused_in_trusted_host() {
    let p = trusted(&["127.0.0.1", "localhost"], true);
    denied(p.authorize_redirect("http", "127.0.0.1", Some(80), None));
    denied(p.authorize_redirect("http", "localhost", None, None));
    denied(p.authorize_redirect("http", "app.localhost", None, None));
}

/// The decision carries the fields the C ABI and the bindings render as
/// JSON (`allowed`, `reason`, `rule`).
#[test]
fn decision_names_its_rule() {
    let p = policy(&["api.example.com"], false);
    let d = p.authorize("https", "api.example.com", None, None);
    assert!(d.allowed);
    assert_eq!(d.rule.as_deref(), Some("api.example.com"));
    assert!(!d.reason.is_empty());
}
