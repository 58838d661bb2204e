//! How a destination may be spelled, judged the way the confined fetch
//! (`Target::parse`, then `Rules::admit`) and the egress proxy
//! (`Host::parse` through `Rules::admit`) judge it. Each spelling below is
//! one a URL parser, a resolver or a server could read as another host or
//! port than the plain one: it is either refused, or read as exactly the
//! host and port that the client then connects to.
//!
//! The grants are the loopback literal `127.0.0.1:7655` and the name
//! `granted.example:7655`, as a restricted policy may list them.

use sandgate_netguard::{Hop, Host, Mode, NetEntry, Rules, Target};

const PORT: u16 = 7655;

fn rules(mode: Mode, allow_http: bool) -> Rules {
    let allow = ["127.0.0.1:7655", "granted.example:7655"]
        .iter()
        .map(|raw| {
            let e = NetEntry::parse(raw).unwrap();
            if mode == Mode::Restricted {
                e.check_restricted().unwrap();
            }
            e
        })
        .collect();
    Rules::new(mode, allow, allow_http)
}

/// What the fetch does with `url` before anything is resolved: `Err` with
/// the reason when the URL or the rules refuse it, else the host and port
/// the client is handed (the URL as the client gets it).
fn fetch_judges(rules: &Rules, hop: Hop, url: &str) -> Result<String, String> {
    let t = Target::parse(url).map_err(|e| format!("url: {e}"))?;
    rules
        .admit(hop, Some(t.scheme()), t.host(), t.port())
        .map_err(|d| format!("rules: {}", d.reason))?;
    Ok(t.to_string())
}

/// The URL forms that carry a user or another host before an `@`, or a
/// backslash that WHATWG parsers read as a `/`: each is refused as a URL,
/// so no reading of it reaches the rules.
#[test]
fn spell24_userinfo_and_backslash_spellings_are_refused_as_urls() {
    let r = rules(Mode::Restricted, true);
    for url in [
        "http://evil@127.0.0.1:7655/",
        "http://@127.0.0.1:7655/",
        "http://127.0.0.1:7655@evil.example/",
        "http://127.0.0.1:7655@granted.example:7655/",
        "http://granted.example:7655@127.0.0.1:7655/",
        "http://evil.example\\@127.0.0.1:7655/",
        "http://127.0.0.1:7655\\@evil.example/",
        "http://a%40b@granted.example:7655/",
        "http://a:b@granted.example:7655/",
        "http:\\\\127.0.0.1:7655/",
        "http:/\\127.0.0.1:7655/",
    ] {
        let e = fetch_judges(&r, Hop::First, url).unwrap_err();
        assert!(e.starts_with("url: "), "{url}: {e}");
    }
    // An `@` after the authority is path, not a user: the host stays the
    // one before it.
    assert_eq!(
        fetch_judges(&r, Hop::First, "http://127.0.0.1:7655/@evil.example").unwrap(),
        "http://127.0.0.1:7655/@evil.example"
    );
    assert_eq!(
        fetch_judges(&r, Hop::First, "http://127.0.0.1:7655?@evil.example").unwrap(),
        "http://127.0.0.1:7655/?@evil.example"
    );
}

/// A tab, CR, LF or NUL anywhere in a URL (WHATWG parsers strip tabs and
/// line breaks, so `127.0.0.\t1` would be `127.0.0.1` to them) is refused,
/// and so is any character outside ASCII: full-width digits and dots,
/// which IDNA maps to `127.0.0.1`.
#[test]
fn spell24_controls_and_full_width_characters_are_refused_as_urls() {
    let r = rules(Mode::Restricted, true);
    for c in ['\t', '\r', '\n', '\0', '\u{7f}', ' ', '\u{a0}', '\u{3000}'] {
        for url in [
            format!("http://127.0.0.{c}1:7655/"),
            format!("http://127.0.0.1{c}:7655/"),
            format!("http://127.0.0.1:{c}7655/"),
            format!("http://granted.example{c}:7655/"),
            format!("http://granted.example:7655/{c}"),
            format!("{c}http://granted.example:7655/"),
            format!("ht{c}tp://granted.example:7655/"),
        ] {
            let e = fetch_judges(&r, Hop::First, &url).unwrap_err();
            assert!(e.starts_with("url: "), "{}: {e}", url.escape_debug());
        }
    }
    for url in [
        "http://１２７．０．０．１:7655/",
        "http://127．0．0．1:7655/",
        "http://１２７.0.0.1:7655/",
        "http://127.0.0.1:７６５５/",
        "http://granted.example:７６５５/",
        "http://ｇｒａｎｔｅｄ.example:7655/",
        "http://granted。example:7655/",
    ] {
        let e = fetch_judges(&r, Hop::First, url).unwrap_err();
        assert!(e.starts_with("url: "), "{url}: {e}");
    }
}

/// Percent-encoded hosts and IDNA names are names to the rules, never
/// decoded: `%31%32%37.0.0.1` is no name at all, and an `xn--` label that
/// decodes to full-width `127.0.0.1` is a name that matches no literal
/// grant (it is resolved, and its addresses checked, like any name).
#[test]
fn spell24_percent_encoded_and_idna_hosts_are_not_decoded() {
    let r = rules(Mode::Restricted, true);
    for url in [
        "http://%31%32%37.0.0.1:7655/",
        "http://%31%32%37%2e%30%2e%30%2e%31:7655/",
        "http://127.0.0.%31:7655/",
        "http://granted%2eexample:7655/",
        "http://granted.exampl%65:7655/",
        "http://granted.example%00:7655/",
        "http://granted.example%2e:7655/",
    ] {
        let e = fetch_judges(&r, Hop::First, url).unwrap_err();
        assert!(
            e.starts_with("rules: ") && e.contains("neither a valid DNS name nor an IP literal"),
            "{url}: {e}"
        );
    }
    for host in ["xn--5g7caagbcfc9b", "xn--8g7ccp.0.0.1", "127.0.0.xn--1"] {
        let url = format!("http://{host}:7655/");
        assert!(fetch_judges(&r, Hop::First, &url).is_err(), "{url}");
    }
    // Granted as a name, it is admitted as the name it is, for the
    // resolver (which gets the `xn--` form) and the address check.
    let idna = Rules::new(
        Mode::Restricted,
        vec![NetEntry::parse("xn--5g7caagbcfc9b:7655").unwrap()],
        true,
    );
    let a = idna
        .admit(Hop::First, Some("http"), "xn--5g7caagbcfc9b", Some(PORT))
        .unwrap();
    assert_eq!(a.host(), &Host::Name("xn--5g7caagbcfc9b".into()));
    assert!(!a.check("127.0.0.1".parse().unwrap()).allowed);
}

/// Numeric spellings that `inet_aton` or a WHATWG parser read as
/// `127.0.0.1`, and IPv6 forms that carry it, are not the granted literal:
/// refused before anything is resolved, and a redirect to any of them
/// never reaches loopback, even when that exact spelling is granted.
#[test]
fn spell24_numeric_and_ipv6_spellings_of_loopback_are_not_the_grant() {
    let r = rules(Mode::Restricted, true);
    for host in [
        "2130706433",
        "0x7f.1",
        "0x7f.0.0.1",
        "0177.0.0.1",
        "0177.0.0.01",
        "127.1",
        "127.0.1",
        "0x7f000001",
        "0X7F000001",
        "017700000001",
        "127.0.0.1.",
        "127.000.000.001",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:ffff:127.0.0.1]",
        "[::127.0.0.1]",
        "[::ffff:0:127.0.0.1]",
        "[64:ff9b::127.0.0.1]",
        "[2002:7f00:1::]",
        "[fe80::1%25lo]",
        "[::1%25lo]",
        "[::ffff:127.0.0.1%25lo]",
        "[127.0.0.1]",
        "[v1.127.0.0.1]",
    ] {
        let url = format!("http://{host}:7655/");
        let e = fetch_judges(&r, Hop::First, &url).unwrap_err();
        assert!(e.starts_with("rules: "), "{url}: {e}");
    }
    for host in [
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:ffff:127.0.0.1]",
        "[::127.0.0.1]",
        "[64:ff9b::7f00:1]",
        "[::1]",
    ] {
        let entry = NetEntry::parse(&format!("{host}:7655")).unwrap();
        let granted = Rules::new(Mode::TrustedHost, vec![entry], true);
        let url = format!("http://{host}:7655/");
        assert!(fetch_judges(&granted, Hop::First, &url).is_ok(), "{url}");
        let e = fetch_judges(&granted, Hop::Redirect, &url).unwrap_err();
        assert!(e.contains("redirect to loopback"), "{url}: {e}");
    }
    // The same spellings through the proxy's door: judged as the address
    // they are, never as the granted literal.
    for host in [
        "::ffff:127.0.0.1",
        "::ffff:7f00:1",
        "0:0:0:0:0:ffff:127.0.0.1",
        "::127.0.0.1",
        "[::ffff:127.0.0.1]",
    ] {
        let parsed = Host::parse(host).unwrap_or_else(|| panic!("{host}"));
        assert!(parsed.is_loopback(), "{host}");
        let d = r.authorize(Hop::First, "http", host, Some(PORT), None);
        assert!(!d.allowed, "{host}: {}", d.reason);
    }
}

/// Trailing dots, letter case and `localhost` subdomains: `LOCALHOST.` and
/// `granted.example.` are no names (a resolver would take them as the
/// names without the dot), upper case is the same name, and
/// `foo.localhost` is loopback.
#[test]
fn spell24_trailing_dots_and_case() {
    let r = rules(Mode::Restricted, true);
    for host in [
        "LOCALHOST.",
        "localhost.",
        "granted.example.",
        "GRANTED.EXAMPLE.",
        "granted.example..",
        ".granted.example",
    ] {
        let url = format!("http://{host}:7655/");
        let e = fetch_judges(&r, Hop::First, &url).unwrap_err();
        assert!(e.contains("neither a valid DNS name"), "{url}: {e}");
        assert_eq!(Host::parse(host), None, "{host}");
    }
    for host in ["foo.localhost", "FOO.LocalHost", "localhost", "LOCALHOST"] {
        assert!(Host::parse(host).unwrap().is_loopback(), "{host}");
        let url = format!("http://{host}:7655/");
        assert!(fetch_judges(&r, Hop::First, &url).is_err(), "{url}");
    }
    let a = r
        .admit(Hop::First, Some("http"), "GRANTED.Example", Some(PORT))
        .unwrap();
    assert_eq!(a.host(), &Host::Name("granted.example".into()));
}

/// Ports: 0, past 65535, signed, hex, empty or with a leading zero. A
/// port is either refused or read as the one number the client connects
/// to (`:07655` is 7655, and the client is handed `:7655`).
#[test]
fn spell24_ports() {
    let r = rules(Mode::Restricted, true);
    for url in [
        "http://127.0.0.1:65536/",
        "http://127.0.0.1:72191/",
        "http://127.0.0.1:+7655/",
        "http://127.0.0.1:-1/",
        "http://127.0.0.1:0x1de7/",
        "http://127.0.0.1:/",
        "http://127.0.0.1:7655:7655/",
        "http://127.0.0.1::7655/",
        "http://127.0.0.1:007655/",
        "http://[::1]:/",
        "http://[::1]7655/",
    ] {
        let e = fetch_judges(&r, Hop::First, url).unwrap_err();
        assert!(
            e.starts_with("url: ") || e.starts_with("rules: "),
            "{url}: {e}"
        );
    }
    let e = fetch_judges(&r, Hop::First, "http://127.0.0.1:0/").unwrap_err();
    assert!(e.contains("port 0"), "{e}");
    assert_eq!(
        fetch_judges(&r, Hop::First, "http://127.0.0.1:07655/x").unwrap(),
        "http://127.0.0.1:7655/x"
    );
    // The default port is the scheme's: not the granted one.
    assert!(fetch_judges(&r, Hop::First, "http://127.0.0.1/").is_err());
}

/// The scheme in any case is the scheme: `HTTP://` is plain http, refused
/// without `allow_http`, and an unknown scheme is never taken for https.
#[test]
fn spell24_scheme_case() {
    let no_http = rules(Mode::Restricted, false);
    for url in [
        "HTTP://127.0.0.1:7655/",
        "Http://127.0.0.1:7655/",
        "hTTp://granted.example:7655/",
    ] {
        let e = fetch_judges(&no_http, Hop::First, url).unwrap_err();
        assert!(e.contains("plain text"), "{url}: {e}");
    }
    assert_eq!(
        fetch_judges(&no_http, Hop::First, "HTTPS://127.0.0.1:7655/").unwrap(),
        "https://127.0.0.1:7655/"
    );
    for url in [
        "httpx://127.0.0.1:7655/",
        "https+x://127.0.0.1:7655/",
        "ftp://127.0.0.1:7655/",
    ] {
        let e = fetch_judges(&no_http, Hop::First, url).unwrap_err();
        assert!(e.contains("not admitted"), "{url}: {e}");
    }
}

/// A redirect's `Location` in the spellings above, resolved against a
/// granted URL: each is refused, as a URL or by the rules at the
/// redirect's hop, before anything is resolved.
#[test]
fn spell24_redirect_locations_in_every_spelling_are_refused() {
    let r = rules(Mode::Restricted, true);
    let base = Target::parse("http://granted.example:7655/a/b").unwrap();
    for location in [
        "//127.0.0.1:7655/",
        "//0x7f.1:7655/",
        "///127.0.0.1:7655/",
        "http://127.0.0.1:7655/",
        "HTTP://[::ffff:127.0.0.1]:7655/",
        "http://evil@127.0.0.1:7655/",
        "http://granted.example:7655@127.0.0.1:7655/",
        "http:\\\\127.0.0.1:7655/",
        "\\\\127.0.0.1:7655/",
        "/\\127.0.0.1:7655/",
        "http://127.0.0.1\t:7655/",
        "http://127.0.0.1:7655/\r\nX: y",
        "//localhost:7655/",
        "//foo.localhost:7655/",
        "//granted.example.:7655/",
        "//%31%32%37.0.0.1:7655/",
        "//１２７．０．０．１:7655/",
        "http:127.0.0.1:7655/",
    ] {
        let refused = match base.join(location) {
            Err(_) => true,
            Ok(next) => r
                .admit(Hop::Redirect, Some(next.scheme()), next.host(), next.port())
                .is_err(),
        };
        assert!(refused, "{}", location.escape_debug());
    }
    // A relative reference stays on the granted host.
    let next = base.join("@127.0.0.1:7655/").unwrap();
    assert_eq!(next.host(), "granted.example");
    assert_eq!(next.path(), "/a/@127.0.0.1:7655/");
}
