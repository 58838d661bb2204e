//! Proptest twins of the `relpath` and `tool_request` fuzz targets: the same
//! invariant checks (shared from `fuzz/src/`), run on a few hundred random
//! byte strings in every `cargo test`. Run the fuzz targets for longer
//! (`cargo xtask fuzz`, see fuzz/README.md) to search deeper.

#[path = "../../../fuzz/src/bytes.rs"]
mod bytes;
#[path = "../../../fuzz/src/relpath.rs"]
mod relpath;
#[path = "../../../fuzz/src/tool_request.rs"]
mod tool_request;

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn relpath_twin(data in prop::collection::vec(any::<u8>(), 0..64)) {
        relpath::check(&data);
    }

    #[test]
    fn relpath_twin_text(s in "\\PC{0,40}") {
        relpath::check_name(&s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn tool_request_twin(data in prop::collection::vec(any::<u8>(), 0..48)) {
        tool_request::check(&data);
    }
}

/// Inputs that once broke an invariant or that pin an edge: kept as
/// regression cases (fuzz/README.md says how to add one).
#[test]
fn relpath_regressions() {
    for name in [
        "COM¹/x",
        "con .txt",
        "a/./../b",
        "\\\\?\\C:\\x",
        "C:",
        "./",
        ".//./",
        "a:b",
        "ﬁ/COM\u{b3}.tar.gz",
    ] {
        relpath::check_name(name);
    }
    relpath::check_name(&"ab/".repeat(1365));
    relpath::check_name(&"x".repeat(256));
    relpath::check_name(&format!("{}/", "x".repeat(255)));
}

#[test]
fn tool_request_regressions() {
    for data in [
        &b"\x00{\"op\":\"read\",\"path\":\"a.txt\",\"path\":\"a.txt\"}"[..],
        &b"\x00[1,2]"[..],
        &b"\x00{\"op\":\"list\",\"path\":\"../outside.txt\"}"[..],
        &b"\x00{\"op\":\"read\",\"path\":\"escape\"}"[..],
        &b"\x00{\"op\":\"read\",\"path\":\"a.txt\",\"limit\":1.0}"[..],
    ] {
        tool_request::check(data);
    }
}
