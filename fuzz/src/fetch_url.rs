//! The confined fetch's URLs and redirects (docs/reference/fetch.md):
//! `Target::parse` and `Target::join` (netguard's URL rules, which the
//! fetch applies to the URL it is given and to every `Location`) never
//! panic, and what they accept is what the HTTP client then reads:
//!
//! - an accepted URL's text (`to_string`) parses back to the same target;
//!   it holds no space, control character, backslash or non-ASCII byte;
//!   its host holds none of `@ / ? # \`; its path starts with `/` and holds
//!   no fragment;
//! - the client's parser (`http::Uri`, the one the fetch hands the URL
//!   to) reads the same scheme, host, port and path and query from that
//!   text, or refuses it (then nothing is sent): the host the rules judged
//!   and the resolver is pinned to is the host the client asks for;
//! - a joined `Location` is such a target too, with no `.` or `..` path
//!   segment; a reference without a scheme keeps the base's scheme, and one
//!   without an authority keeps the base's origin;
//! - the rules (restricted mode) admit a joined target only when its host
//!   is one of the allow-list's.
//!
//! Inputs: a base URL and a `Location` made of URL tokens (schemes,
//! userinfo, hosts in many spellings, ports, dot segments, escapes,
//! separators), or raw text.

use sandgate_netguard::{Hop, Mode, NetEntry, Rules, Target};
use ureq::http;

use crate::bytes::Bytes;

const SCHEMES: &[&str] = &[
    "https", "http", "HTTPS", "Http", "ws", "wss", "ftp", "file", "h+t", "1http", "",
];
const SEPS: &[&str] = &["://", ":/", ":", ":///", "://", ":\\\\", "://"];
const USERINFO: &[&str] = &["", "", "", "user@", "a:b@", "@", "evil.com@", "%40@"];
const HOSTS: &[&str] = &[
    "example.com",
    "EXAMPLE.com",
    "a.example.com",
    "evil.com",
    "127.0.0.1",
    "0x7f.1",
    "2130706433",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[fe80::1%25eth0]",
    "[::1",
    "::1",
    "169.254.169.254",
    "localhost",
    "exa%6dple.com",
    "example.com.",
    "",
    "[",
    "]",
    "a]b",
    "[::1]x",
    "example.com\\@evil.com",
];
const PORTS: &[&str] = &[
    "",
    "",
    "",
    ":443",
    ":80",
    ":",
    ":0",
    ":65535",
    ":65536",
    ":8443",
    ":+1",
    ":00080",
    ":1:2",
    ":99999999999",
];
const PATH: &[&str] = &[
    "/", "/", "a", "b", "..", ".", "%2e", "%2E%2e", "?", "#", "&", "=", "@", ":", "//", "%", "%2f",
    ";", " ", "\t", "\n", "\u{fc}", "\\", "[", "]", "evil.com", "~",
];

fn url(b: &mut Bytes<'_>) -> String {
    format!(
        "{}{}{}{}{}{}",
        b.pick(SCHEMES),
        b.pick(SEPS),
        b.pick(USERINFO),
        b.pick(HOSTS),
        b.pick(PORTS),
        b.tokens(PATH, 8)
    )
}

fn location(b: &mut Bytes<'_>) -> String {
    match b.below(6) {
        0 => url(b),
        1 => format!("//{}{}{}", b.pick(HOSTS), b.pick(PORTS), b.tokens(PATH, 6)),
        2 => format!("/{}", b.tokens(PATH, 8)),
        3 => format!("?{}", b.tokens(PATH, 4)),
        4 => b.tokens(PATH, 8),
        _ => b.text(48),
    }
}

/// Checks one fuzz input.
pub fn check(data: &[u8]) {
    let mut b = Bytes::new(data);
    let (base, loc) = if b.byte() % 8 == 0 {
        let base = b.text(64);
        (base, b.text(64))
    } else {
        let base = url(&mut b);
        (base, location(&mut b))
    };
    check_pair(&base, &loc);
}

/// The invariants for a base URL and a `Location` joined to it.
pub fn check_pair(base: &str, loc: &str) {
    let Ok(t) = Target::parse(base) else {
        // A URL refused as a base is refused as an absolute Location too.
        let any = Target::parse("https://example.com/").expect("fixed URL");
        let absolute = base.split_once(':').is_some_and(|(s, _)| has_scheme(s));
        if let (true, Ok(n)) = (absolute, any.join(base)) {
            panic!("{base:?} is refused as a URL but taken as a Location ({n})");
        }
        return;
    };
    check_target(&t, base);
    match t.join(loc) {
        Ok(n) => {
            check_target(&n, loc);
            let path = n.path().split('?').next().unwrap_or("");
            assert!(
                !path.split('/').any(|seg| seg == "." || seg == ".."),
                "{loc:?} joined to {t} keeps a dot segment: {n}"
            );
            let scheme = loc
                .split_once(':')
                .map(|(s, _)| s)
                .filter(|s| has_scheme(s));
            if scheme.is_none() {
                assert_eq!(n.scheme(), t.scheme(), "{loc:?} joined to {t}: {n}");
                if !loc.starts_with("//") {
                    assert_eq!(n.origin(), t.origin(), "{loc:?} joined to {t}: {n}");
                }
            }
            check_rules(&n);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

fn has_scheme(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

fn check_target(t: &Target, from: &str) {
    let text = t.to_string();
    assert_eq!(
        Target::parse(&text).as_ref(),
        Ok(t),
        "{from:?} gives {text:?}, which parses to another target"
    );
    assert!(
        !text
            .bytes()
            .any(|b| b <= b' ' || b == 0x7f || b == b'\\' || !b.is_ascii()),
        "{from:?} gives {text:?}"
    );
    assert!(
        !t.host().contains(['@', '/', '?', '#', '\\']),
        "{from:?} has the host {:?}",
        t.host()
    );
    assert!(!t.host().is_empty(), "{from:?} has an empty host");
    assert!(
        t.path().starts_with('/') && !t.path().contains('#'),
        "{text:?}"
    );
    assert_eq!(t.scheme(), t.scheme().to_ascii_lowercase(), "{text:?}");
    let Ok(uri) = text.parse::<http::Uri>() else {
        return;
    };
    assert_eq!(
        uri.scheme_str().map(str::to_ascii_lowercase).as_deref(),
        Some(t.scheme()),
        "{text:?}: the client reads another scheme"
    );
    assert_eq!(
        uri.host(),
        Some(t.host()),
        "{text:?}: the client reads another host"
    );
    assert_eq!(
        uri.port_u16(),
        t.port(),
        "{text:?}: the client reads another port"
    );
    assert_eq!(
        uri.path_and_query().map(|p| p.as_str()),
        Some(t.path()),
        "{text:?}: the client reads another path"
    );
}

fn check_rules(t: &Target) {
    let allow = ["example.com", "*.example.com", "127.0.0.1:7655"]
        .iter()
        .map(|e| NetEntry::parse(e).expect("fixed entry"))
        .collect();
    let rules = Rules::new(Mode::Restricted, allow, true);
    for hop in [Hop::First, Hop::Redirect] {
        if let Ok(a) = rules.admit(hop, Some(t.scheme()), t.host(), t.port()) {
            let host = t.host().to_ascii_lowercase();
            assert!(
                host == "example.com"
                    || host.ends_with(".example.com")
                    || (host == "127.0.0.1" && t.effective_port() == 7655 && hop == Hop::First),
                "{t} admitted by {}",
                a.entry()
            );
        }
    }
}
