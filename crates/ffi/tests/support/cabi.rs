//! What the tests that load the shared library with `dlopen` share of
//! include/sandgate.h: the status type, the audit event and callback as C
//! sees them, and a typed symbol lookup. Shared by tests/abuse24.rs and
//! tests/audit.rs through `#[path]`.

use std::ffi::{c_char, c_void, CString};

/// `sg_status`.
pub type Status = u32;

/// `sg_audit_event`.
#[repr(C)]
pub struct AuditEvent {
    pub op: *const c_char,
    pub path: *const c_char,
    pub path_len: usize,
    pub size: u64,
    pub has_size: bool,
    pub outcome: Status,
    pub time_sec: i64,
    pub time_nsec: u32,
    pub has_exit_code: bool,
    pub exit_code: i32,
    pub limit: *const c_char,
}

/// `sg_audit_fn`.
pub type AuditFn = unsafe extern "C" fn(*mut c_void, *const AuditEvent);

/// The library's function `name`, as type `T` (a function pointer).
///
/// # Safety
/// `lib` is a live handle from `dlopen` and `T` is the function's true
/// type.
pub unsafe fn sym<T: Copy>(lib: *mut c_void, name: &str) -> T {
    let c = CString::new(name).unwrap();
    // SAFETY: `lib` is a live handle from dlopen.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    assert!(!p.is_null(), "{name} is not exported");
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: the caller names the function's true type.
    unsafe { std::mem::transmute_copy(&p) }
}
