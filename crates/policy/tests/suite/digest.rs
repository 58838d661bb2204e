//! The digest is the sha256 of the file's exact bytes.

use proptest::prelude::*;
use sandgate_policy::Policy;

use crate::common::{ok, Fixture};

#[test]
fn digest_is_sha256_of_the_bytes() {
    let p = ok("security_mode = \"restricted\"\n");
    assert_eq!(
        p.digest(),
        "sha256:b6698d79737614902b6dc157804d70e69ba5c9e5b73fb80211f5bfe258c6864c"
    );
    assert_eq!(
        ok("").digest(),
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn digest_is_stable_across_loads() {
    let fx = Fixture::new();
    let text = "[fs]\nread_roots = [\"inputs\"]\n";
    let a = fx.load(text).unwrap();
    let b = fx.load(text).unwrap();
    let c = Policy::from_bytes(text.as_bytes(), &fx.project(), None).unwrap();
    assert_eq!(a.digest(), b.digest());
    assert_eq!(a.digest(), c.digest());
    assert_eq!(a.digest(), a.clone().digest());
}

#[test]
fn changing_one_byte_changes_the_digest() {
    let a = ok("# policy v1\n");
    let b = ok("# policy v2\n");
    assert_ne!(a.digest(), b.digest());
}

#[test]
fn same_meaning_different_bytes_differ() {
    // The digest is over bytes, not meaning: whitespace and comments count.
    let a = ok("[exec]\nenabled = true\n");
    let b = ok("[exec]\nenabled  = true\n");
    let c = ok("[exec]\nenabled = true # on\n");
    assert_ne!(a.digest(), b.digest());
    assert_ne!(a.digest(), c.digest());
    assert_eq!(a.exec(), b.exec());
}

#[test]
fn digest_is_lowercase_hex() {
    let d = ok("").digest().to_owned();
    let hex = d.strip_prefix("sha256:").unwrap();
    assert_eq!(hex.len(), 64);
    assert!(hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn flipping_any_comment_byte_changes_the_digest(
        comment in "[a-z0-9 ]{1,40}",
        index in any::<prop::sample::Index>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("# {comment}\n");
        let mut other = text.clone().into_bytes();
        let i = 2 + index.index(comment.len());
        other[i] = if other[i] == b'x' { b'y' } else { b'x' };
        let a = Policy::from_bytes(text.as_bytes(), dir.path(), None).unwrap();
        let b = Policy::from_bytes(&other, dir.path(), None).unwrap();
        prop_assert_ne!(a.digest(), b.digest());
    }
}
