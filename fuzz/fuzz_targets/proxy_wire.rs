//! cargo-fuzz target `proxy_wire`: the checks live in `src/proxy_wire.rs`, shared with
//! the proptest twin that runs in `cargo test` (see README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sandgate_fuzz::proxy_wire::check(data);
});
