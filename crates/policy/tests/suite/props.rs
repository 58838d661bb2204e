//! Property tests: parsers and the authorizer never panic, and never admit
//! what no entry names.

use std::net::IpAddr;
use std::sync::LazyLock;

use proptest::prelude::*;
use sandgate_policy::{NetEntry, Policy};

fn policy(text: &str) -> Policy {
    let dir = tempfile::tempdir().unwrap();
    Policy::from_bytes(text.as_bytes(), dir.path(), None).unwrap()
}

static ONE_HOST: LazyLock<Policy> =
    LazyLock::new(|| policy("[net]\nallow = [\"api.example.com\"]\n"));
static MIXED: LazyLock<Policy> = LazyLock::new(|| {
    policy(
        "[net]\nallow = [\"*.example.com\", \"127.0.0.1:8080\", \"[::1]:9\"]\nallow_http = true\n",
    )
});

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn entry_parse_never_panics(raw in "\\PC{0,40}") {
        if let Ok(entry) = NetEntry::parse(&raw) {
            prop_assert_eq!(entry.raw(), raw.as_str());
            prop_assert!(entry.port() != Some(0));
        }
    }

    #[test]
    fn entry_parse_on_host_like_text(raw in "[a-zA-Z0-9.:\\[\\]*_-]{0,30}") {
        let _ = NetEntry::parse(&raw);
    }

    #[test]
    fn toml_input_never_panics(text in "\\PC{0,80}") {
        let dir = tempfile::tempdir().unwrap();
        let _ = Policy::from_bytes(text.as_bytes(), dir.path(), None);
    }

    #[test]
    fn only_the_listed_host_is_admitted(
        host in "[a-z0-9.-]{1,20}",
        port in proptest::option::of(1u16..),
        v4 in any::<[u8; 4]>(),
    ) {
        let p = &*ONE_HOST;
        let ip = IpAddr::from(v4);
        let d = p.authorize("https", &host, port, Some(ip));
        if d.allowed {
            prop_assert_eq!(host.as_str(), "api.example.com");
            prop_assert!(!sandgate_policy::classify(ip).refused_in_restricted());
        }
        prop_assert!(!p.authorize_redirect("https", &host, port, Some(ip)).allowed || host == "api.example.com");
    }

    #[test]
    fn a_port_entry_admits_exactly_its_port(entry_port in 1u16.., port in 1u16..) {
        let p = policy(&format!("[net]\nallow = [\"api.example.com:{entry_port}\"]\n"));
        let d = p.authorize("https", "api.example.com", Some(port), None);
        prop_assert_eq!(d.allowed, port == entry_port);
    }

    #[test]
    fn authorize_never_panics(scheme in "\\PC{0,8}", host in "\\PC{0,30}", port in any::<Option<u16>>()) {
        let p = &*MIXED;
        let d = p.authorize(&scheme, &host, port, None);
        prop_assert!(!d.reason.is_empty());
    }
}

/// The name `shown` spells, read back: `\\` a backslash, `\xNN` a byte,
/// `\u{…}` a character; `None` where the spelling is not one `shown` makes.
fn shown23_read_back(shown: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = shown;
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        if c != '\\' {
            if sandgate_policy::terminal_unsafe(c) {
                return None;
            }
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
            continue;
        }
        if let Some(r) = rest.strip_prefix('\\') {
            out.push(b'\\');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('x') {
            out.push(u8::from_str_radix(r.get(..2)?, 16).ok()?);
            rest = &r[2..];
        } else {
            let r = rest.strip_prefix("u{")?;
            let end = r.find('}')?;
            let c = char::from_u32(u32::from_str_radix(&r[..end], 16).ok()?)?;
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
            rest = &r[end + 1..];
        }
    }
    Some(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// `shown` spells every name one way only: its spelling reads back to
    /// the very bytes, so no two names are shown alike (the four
    /// characters `\xff` and the byte 0xFF among them), and it holds no
    /// character a terminal would act on.
    #[test]
    fn shown23_a_shown_name_reads_back_to_its_bytes(
        parts in proptest::collection::vec(
            prop_oneof![
                Just(b"\\".to_vec()),
                Just(b"\\xff".to_vec()),
                Just(b"\\u{1b}".to_vec()),
                Just(vec![0xff]),
                Just(vec![0x1b]),
                Just(b"\n".to_vec()),
                Just("\u{202e}".as_bytes().to_vec()),
                proptest::collection::vec(any::<u8>(), 0..6),
                "\\PC{0,6}".prop_map(String::into_bytes),
            ],
            0..8,
        )
    ) {
        use std::os::unix::ffi::OsStrExt;
        let name: Vec<u8> = parts.concat();
        let shown = sandgate_policy::shown(std::path::Path::new(std::ffi::OsStr::from_bytes(&name)));
        prop_assert_eq!(shown23_read_back(&shown), Some(name), "{}", shown);
    }
}
