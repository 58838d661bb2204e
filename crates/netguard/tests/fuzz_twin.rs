//! Proptest twin of the `net_hosts` fuzz target: the same invariant checks
//! (shared from `fuzz/src/net_hosts.rs`) on random byte strings in every
//! `cargo test`. See fuzz/README.md for long runs.

#[path = "../../../fuzz/src/bytes.rs"]
mod bytes;
#[path = "../../../fuzz/src/net_hosts.rs"]
mod net_hosts;

use std::net::Ipv4Addr;

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn net_hosts_twin(data in prop::collection::vec(any::<u8>(), 0..48)) {
        net_hosts::check(&data);
    }
}

/// Spellings that pin the edges, kept as regression cases.
#[test]
fn net_hosts_regressions() {
    let lo = Ipv4Addr::new(127, 0, 0, 1);
    let meta = Ipv4Addr::new(169, 254, 169, 254);
    for (s, v4) in [
        ("127.0.0.1", lo),
        ("2130706433", lo),
        ("0x7f000001", lo),
        ("0x7f.1", lo),
        ("0177.0.0.1", lo),
        ("127.1", lo),
        ("127.0.0.1.", lo),
        ("[::ffff:127.0.0.1]", lo),
        ("[::ffff:7f00:1]", lo),
        ("::ffff:7f00:1", lo),
        ("[::127.0.0.1]", lo),
        ("[::ffff:0:127.0.0.1]", lo),
        ("[64:ff9b::127.0.0.1]", lo),
        ("[2002:7f00:1::]", lo),
        ("[::ffff:127.0.0.1%25lo]", lo),
        ("169.254.169.254", meta),
        ("0xa9fea9fe", meta),
        ("2852039166", meta),
        ("[::ffff:a9fe:a9fe]", meta),
        ("[64:ff9b::a9fe:a9fe]", meta),
        ("[2002:a9fe:a9fe::1]", meta),
        ("0", Ipv4Addr::UNSPECIFIED),
        ("[::]", Ipv4Addr::UNSPECIFIED),
        ("[::ffff:0.0.0.0]", Ipv4Addr::UNSPECIFIED),
    ] {
        net_hosts::check_spelling(s, Some(v4));
    }
    for s in [
        "",
        "localhost",
        "a.localhost",
        "0x.com",
        "1a.com",
        "ex%61mple.com",
        "[",
        "]:1",
    ] {
        net_hosts::check_spelling(s, None);
    }
    assert_eq!(net_hosts::inet_aton("0x7f.1"), Some(0x7f00_0001));
    assert_eq!(net_hosts::inet_aton("127.1."), Some(0x7f00_0001));
    assert_eq!(net_hosts::inet_aton("0177.0.0.01"), Some(0x7f00_0001));
    assert_eq!(net_hosts::inet_aton("256.1"), None);
    assert_eq!(net_hosts::inet_aton("1.2.3.4.5"), None);
}
