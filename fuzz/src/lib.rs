//! Invariant checks for sandgate's fuzz targets.
//!
//! Each module exposes `check(data: &[u8])`, which decodes the bytes into an
//! input (mostly through [`bytes::Bytes`], so that random bytes already form
//! structured inputs) and panics when an invariant breaks. The same files
//! are compiled into the proptest twins in the crates' `tests/` directories
//! with `#[path]`, so `cargo test` runs the very same checks. A module
//! refers to the byte reader as `crate::bytes`; a twin declares it at its
//! root under that name.

pub mod bytes;
pub mod fetch_url;
pub mod fileguard;
pub mod net_hosts;
pub mod policy;
pub mod proxy_wire;
pub mod relpath;
pub mod rootfs_ops;
pub mod tool_request;
