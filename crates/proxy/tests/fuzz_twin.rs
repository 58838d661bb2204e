//! Proptest twin of the `proxy_wire` fuzz target: the same invariant checks
//! (shared from `fuzz/src/proxy_wire.rs`) on random byte strings in every
//! `cargo test`, against a real proxy on loopback. See fuzz/README.md for
//! long runs.

#[path = "../../../fuzz/src/bytes.rs"]
mod bytes;
#[path = "../../../fuzz/src/proxy_wire.rs"]
mod proxy_wire;

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn proxy_wire_twin(data in prop::collection::vec(any::<u8>(), 0..64)) {
        proxy_wire::check(&data);
    }
}

/// Inputs that pin the edges, kept as regression cases.
#[test]
fn proxy_wire_regressions() {
    for input in [
        &b""[..],
        b"\x05",
        b"\x05\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb",
        b"\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x01",
        b"CONNECT evil.com:443 HTTP/1.1\r\n\r\n",
        b"GET http://0x7f.1/ HTTP/1.1\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"CONNECT 127.0.0.1:1@example.com:443 HTTP/1.1\r\n\r\n",
    ] {
        proxy_wire::check_bytes(input);
    }
    // The granted port is reached (so the checks above are not vacuous),
    // the sentinel's never.
    let (up, sentinel) = proxy_wire::ports();
    let before = proxy_wire::admitted();
    for text in [
        format!("CONNECT 127.0.0.1:{up} HTTP/1.1\r\n\r\nhello"),
        format!("GET http://127.0.0.1:{up}/ HTTP/1.1\r\n\r\n"),
        format!("CONNECT 127.0.0.1:{sentinel} HTTP/1.1\r\n\r\n"),
        format!("GET http://127.0.0.1:{up}/ HTTP/1.1\r\n\r\nGET http://127.0.0.1:{sentinel}/ HTTP/1.1\r\n\r\n"),
        format!("GET http://127.0.0.1:{up}/ HTTP/1.1\r\nContent-Length: 0\r\n\r\nGET http://localhost:{sentinel}/ HTTP/1.1\r\n\r\n"),
    ] {
        proxy_wire::check_bytes(text.as_bytes());
    }
    let mut socks = vec![5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1];
    socks.extend(up.to_be_bytes());
    socks.extend(b"hello");
    proxy_wire::check_bytes(&socks);
    assert!(
        proxy_wire::admitted() >= before + 3,
        "the granted upstream was never admitted"
    );
}
