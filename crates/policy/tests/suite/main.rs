//! Integration tests for sandgate-policy: one binary, one module per area.

mod authorize;
mod common;
mod credentials;
mod digest;
mod errors;
mod gate;
mod net_entries;
mod options;
mod props;
mod roots;
mod strict;
mod summary;
