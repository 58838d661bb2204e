//! cargo-fuzz target `net_hosts`: the checks live in `src/net_hosts.rs`, shared with
//! the proptest twin that runs in `cargo test` (see README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sandgate_fuzz::net_hosts::check(data);
});
