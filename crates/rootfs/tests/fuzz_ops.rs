//! Proptest twin of the `rootfs_ops` fuzz target: random operation plans
//! (shared decoder and checks from `fuzz/src/rootfs_ops.rs`) in a temporary
//! root under both resolvers, checking after every successful operation
//! through `/proc/self/fd` that every descriptor is still beneath the root,
//! and that nothing outside changed. See fuzz/README.md for long runs.

#[path = "../../../fuzz/src/bytes.rs"]
mod bytes;
#[path = "../../../fuzz/src/rootfs_ops.rs"]
mod rootfs_ops;

use proptest::prelude::*;
use rootfs_ops::Op;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn rootfs_ops_twin(data in prop::collection::vec(any::<u8>(), 0..160)) {
        rootfs_ops::check(&data);
    }
}

fn s(x: &str) -> String {
    x.to_owned()
}

/// Plans that aim straight at the escapes, kept as regression cases.
#[test]
fn rootfs_ops_regressions() {
    let plans: Vec<Vec<Op>> = vec![
        // A symlink out of the root, then everything through it.
        vec![
            Op::Symlink(0, s("l"), s("../outside")),
            Op::Open(0, s("l/secret")),
            Op::Create(0, s("l/new"), true, true),
            Op::Mkdir(0, s("l/dir2")),
            Op::Remove(0, s("l/secret")),
            Op::Rename(0, s("l/secret"), 0, s("a"), true),
            Op::OpenDir(0, s("l")),
            Op::Write(0, s("l/secret"), true),
            Op::Inspect(0, s("l")),
        ],
        // Absolute links, to the root itself and outside.
        vec![
            Op::Symlink(0, s("l"), s("$ROOT")),
            Op::Symlink(0, s("a"), s("$OUT/secret")),
            Op::Open(0, s("a")),
            Op::Write(0, s("a"), true),
            Op::Remove(0, s("l/")),
            Op::Inspect(0, s("a")),
        ],
        // A sub-root, then `..` from it, and renames between roots.
        vec![
            Op::Mkdir(0, s("a")),
            Op::OpenDir(0, s("a")),
            Op::Mkdir(1, s("../b")),
            Op::Open(1, s("..")),
            Op::Create(1, s("b"), true, true),
            Op::Rename(1, s("b"), 0, s("b"), false),
            Op::Rename(0, s("a"), 0, s("b/a"), true),
            Op::Remove(0, s("a/..")),
            Op::RemoveDir(1, s(".")),
            Op::Inspect(1, s("..")),
        ],
        // Loops and links through `..`.
        vec![
            Op::Symlink(0, s("l"), s("l")),
            Op::Open(0, s("l")),
            Op::Mkdir(0, s("a")),
            Op::Symlink(0, s("a/l"), s("../..")),
            Op::Resolve(0, s("a/l")),
            Op::MkdirAll(0, s("a/l/x")),
            Op::Symlink(0, s("b"), s("a/..")),
            Op::OpenParent(0, s("b/a/b")),
            Op::Inspect(0, s("b/")),
        ],
        // Magic links.
        vec![
            Op::Symlink(0, s("l"), s("/proc/self/root")),
            Op::Open(0, s("l/etc/passwd")),
            Op::Symlink(0, s("a"), s("/proc/self/fd/0")),
            Op::Open(0, s("a")),
        ],
    ];
    for plan in &plans {
        rootfs_ops::run(plan);
    }
}
