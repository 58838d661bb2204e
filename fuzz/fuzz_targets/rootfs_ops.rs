//! cargo-fuzz target `rootfs_ops`: the checks live in `src/rootfs_ops.rs`, shared with
//! the proptest twin that runs in `cargo test` (see README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sandgate_fuzz::rootfs_ops::check(data);
});
