//! The rootfs suite: the escape corpus and the operation tests, run for each
//! resolver. `fallback` re-runs this same binary under a seccomp filter that
//! takes `openat2` away, so every case here is also checked in fallback mode.

mod common;
mod corpus;
mod fallback;
mod ops;
mod seccomp;
