//! Proptest twin of the `fetch_url` fuzz target: the same invariant checks
//! (shared from `fuzz/src/fetch_url.rs`) on random byte strings in every
//! `cargo test`. See fuzz/README.md for long runs.

#[path = "../../../fuzz/src/bytes.rs"]
mod bytes;
#[path = "../../../fuzz/src/fetch_url.rs"]
mod fetch_url;

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn fetch_url_twin(data in prop::collection::vec(any::<u8>(), 0..48)) {
        fetch_url::check(&data);
    }
}

/// Base URLs and `Location`s that pin the edges, kept as regression cases.
#[test]
fn fetch_url_regressions() {
    let base = "https://a.example.com:8443/dir/page?x=1";
    for (b, loc) in [
        (base, "../../x"),
        (base, "//evil.com/x"),
        (base, "https://evil.com@example.com/"),
        (base, "https://example.com\\@evil.com/"),
        (base, "http:evil.com"),
        (base, "?%2e%2e"),
        (base, "/a/%2e%2e/b"),
        ("https://[::1]:7655/", "x"),
        ("https://0x7f.1/", "/"),
        ("HTTPS://EXAMPLE.com/", "HTTP://EXAMPLE.COM:80/"),
    ] {
        fetch_url::check_pair(b, loc);
    }
}
