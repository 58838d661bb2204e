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
