//! Proptest twin of the `policy` fuzz target: the same invariant checks
//! (shared from `fuzz/src/policy.rs`) on random byte strings in every
//! `cargo test`. See fuzz/README.md for long runs.

#[path = "../../../fuzz/src/bytes.rs"]
mod bytes;
#[path = "../../../fuzz/src/policy.rs"]
mod policy;

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn policy_twin(data in prop::collection::vec(any::<u8>(), 0..96)) {
        policy::check(&data);
    }
}

/// Inputs that pin edges of the gate rules, kept as regression cases.
#[test]
fn policy_regressions() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    std::fs::create_dir(base.join("w")).unwrap();
    for text in [
        "",
        "[fs]\nwrite_root = \".\"\n",
        "[fs]\nwrite_root = \"w\"\nwrite_root = \"w\"\n",
        "[net]\nallow = [\"127.0.0.1\"]\n",
        "[net]\nallow = [\"127.0.0.1:7655\"]\n",
        "[budgets]\nfs_ops = 1\n",
        "[exec]\ntimeout_ms = 86400001\n",
        "[fs]\nread_roots = [\"a\\u0000b\"]\n",
    ] {
        policy::check_bytes(text.as_bytes(), &base);
    }
    policy::check_bytes(b"\xff\xfe", &base);
    for fault in [1u8, 2, 3] {
        policy::check(&[1, fault]);
    }
}
