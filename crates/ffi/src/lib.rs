//! The C ABI of sandgate (docs/reference/c-abi.md): `libsandgate`, as a shared and a static
//! library, described by `include/sandgate.h`.
//!
//! # Conventions
//!
//! - Every exported name starts with `sg_`. Handles (`sg_root`,
//!   `sg_sandbox`, `sg_sandbox_options`, `sg_policy`, `sg_executor`,
//!   `sg_abort`, `sg_fetcher`) are opaque; each is made by a `_new`/`_open`/`_load`
//!   function and released by its `_free`, which accepts NULL.
//! - A fallible function returns an `sg_status` (`SG_OK` or an `SG_E_*`
//!   code, the same numbers as the Rust `ErrorCode`) and takes a last
//!   argument `sg_error **err`. When it fails and `err` is not NULL, `*err`
//!   receives an error object the caller frees with `sg_error_free`. There is
//!   no thread-local "last error".
//! - Strings in are `(pointer, length)` pairs of UTF-8, not NUL-terminated
//!   (the `sg_root_*` names may be any bytes, as file names may). A NULL
//!   pointer with length 0 is the empty string, or, for an argument that
//!   may be NULL, absent; a NULL pointer with any other length is
//!   `SG_E_REQUEST`.
//! - Bytes out are `sg_bytes`, released with `sg_bytes_free`. Structured
//!   results (listings, search results, summaries) are JSON in `sg_bytes`.
//! - A panic never crosses the boundary: it becomes `SG_E_INTERNAL`. A NULL
//!   handle or out-pointer is answered with `SG_E_REQUEST`, never a crash.
//! - Handles are thread-safe: `sg_root`, `sg_sandbox`, `sg_policy`,
//!   `sg_executor`, `sg_abort` and `sg_fetcher` may be used from many
//!   threads at once.
//!   An `sg_sandbox_options` is a builder: use it from one thread at a time.
//!
//! Generate the header with `cargo xtask codegen`.
#![deny(missing_docs)]
#![allow(non_camel_case_types)]

mod abi;
mod codes;
mod error;
mod exec;
mod fetch;
mod policy;
mod root;
mod sandbox;

pub use abi::{SANDGATE_ABI_MAJOR, SANDGATE_ABI_MINOR};
pub use codes::*;
pub use error::*;
pub use exec::*;
pub use fetch::*;
pub use policy::*;
pub use root::*;
pub use sandbox::*;

use std::ffi::c_char;

/// The library's version, `"MAJOR.MINOR.PATCH"`, NUL-terminated.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// `(SANDGATE_ABI_MAJOR << 16) | SANDGATE_ABI_MINOR` of the loaded library.
/// A caller built against a header compares the major with its own
/// `SANDGATE_ABI_MAJOR` and needs a minor at least its own.
///
/// # Return value
///
/// `(SANDGATE_ABI_MAJOR << 16) | SANDGATE_ABI_MINOR` of the loaded library.
///
/// # Safety
///
/// None: every argument value is accepted.
#[no_mangle]
pub extern "C" fn sg_abi_version() -> u32 {
    (SANDGATE_ABI_MAJOR << 16) | SANDGATE_ABI_MINOR
}

/// The library's version (`"0.1.0"`), a static NUL-terminated string.
///
/// # Return value
///
/// The library's version (`"0.1.0"`), a static NUL-terminated string that is
/// never freed.
///
/// # Safety
///
/// None: every argument value is accepted.
#[no_mangle]
pub extern "C" fn sg_version() -> *const c_char {
    VERSION.as_ptr().cast()
}
