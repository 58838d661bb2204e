//! cargo-fuzz target `fetch_url`: the checks live in `src/fetch_url.rs`, shared with
//! the proptest twin that runs in `cargo test` (see README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sandgate_fuzz::fetch_url::check(data);
});
