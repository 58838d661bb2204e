//! Status codes, error objects, byte buffers, and the boundary every entry
//! point goes through.

use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use facade::{Error, ErrorCode};

use crate::codes::{SG_E_REQUEST, SG_OK};

/// A status: `SG_OK` (0) or one of the `SG_E_*` codes (the table is in
/// `docs/reference/errors.md`).
pub type sg_status = u32;

/// An error object: code, message and, when known, the root-relative path,
/// the deny pattern, the policy key and the OS error number. Free it with
/// `sg_error_free`.
pub struct sg_error {
    code: ErrorCode,
    message: CString,
    path: Option<CString>,
    pattern: Option<CString>,
    key: Option<CString>,
    errno: i32,
}

/// Owned bytes handed to the caller: free them with `sg_bytes_free`. An
/// empty result may have a NULL `ptr`.
#[repr(C)]
pub struct sg_bytes {
    /// The first byte (NULL when `len` is 0).
    pub ptr: *mut u8,
    /// How many bytes.
    pub len: usize,
}

impl sg_bytes {
    pub(crate) fn empty() -> sg_bytes {
        sg_bytes {
            ptr: ptr::null_mut(),
            len: 0,
        }
    }

    pub(crate) fn from_vec(v: Vec<u8>) -> sg_bytes {
        if v.is_empty() {
            return sg_bytes::empty();
        }
        let boxed = v.into_boxed_slice();
        let len = boxed.len();
        let ptr = Box::into_raw(boxed).cast::<u8>();
        sg_bytes { ptr, len }
    }
}

/// Releases bytes returned by the library and sets `*bytes` to empty, so a
/// second call does nothing. NULL is accepted.
///
/// # Return value
///
/// None. NULL, an empty buffer and an already freed one are accepted; the
/// buffer is left empty.
///
/// # Safety
///
/// `bytes` is NULL or points to an `sg_bytes` filled by this library (or
/// zeroed).
#[no_mangle]
pub unsafe extern "C" fn sg_bytes_free(bytes: *mut sg_bytes) {
    let _ = catch_unwind(|| {
        if bytes.is_null() {
            return;
        }
        // SAFETY: the caller passes a valid sg_bytes (see the contract).
        let b = unsafe { &mut *bytes };
        if !b.ptr.is_null() && b.len != 0 {
            let slice = ptr::slice_from_raw_parts_mut(b.ptr, b.len);
            // SAFETY: ptr/len came from Box::into_raw of a boxed slice of
            // exactly this length in `sg_bytes::from_vec`.
            drop(unsafe { Box::from_raw(slice) });
        }
        *b = sg_bytes::empty();
    });
}

fn c_string(s: &str) -> CString {
    // Interior NULs cannot be represented; messages never need them.
    CString::new(s.replace('\0', "\u{FFFD}")).unwrap_or_default()
}

impl sg_error {
    fn from_error(e: &Error) -> sg_error {
        sg_error {
            code: e.code(),
            message: c_string(e.message()),
            path: e.path().map(c_string),
            pattern: e.pattern().map(c_string),
            key: e.key().map(c_string),
            errno: e.errno().unwrap_or(0),
        }
    }
}

/// The error's code (an `SG_E_*` value); `SG_E_REQUEST` for NULL.
///
/// # Return value
///
/// The error's code, or `SG_E_REQUEST` when `err` is NULL.
///
/// # Safety
///
/// `err` is NULL or an error object from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sg_error_code(err: *const sg_error) -> sg_status {
    // SAFETY: per the contract, a non-NULL `err` is a live error object.
    match unsafe { err.as_ref() } {
        Some(e) => e.code.value(),
        None => SG_E_REQUEST,
    }
}

/// The name of a status code (`"E_NOT_FOUND"`, `"OK"` for 0), a static
/// NUL-terminated string, or NULL for a number that is not a code.
///
/// # Return value
///
/// A static NUL-terminated name that is never freed, or NULL when `code` is
/// not a code.
///
/// # Safety
///
/// None: every argument value is accepted.
#[no_mangle]
pub extern "C" fn sg_code_name(code: sg_status) -> *const c_char {
    match ErrorCode::from_value(code) {
        Some(c) => code_name_ptr(c),
        None => ptr::null(),
    }
}

fn code_name_ptr(c: ErrorCode) -> *const c_char {
    c.as_c_str().as_ptr()
}

/// The error's code name (`"E_PATH_ESCAPE"`), static and NUL-terminated;
/// NULL for a NULL error.
///
/// # Return value
///
/// A static NUL-terminated name that is never freed; NULL when `err` is NULL.
///
/// # Safety
///
/// `err` is NULL or a live error object from this library.
#[no_mangle]
pub unsafe extern "C" fn sg_error_code_name(err: *const sg_error) -> *const c_char {
    // SAFETY: per the contract, a non-NULL `err` is a live error object.
    match unsafe { err.as_ref() } {
        Some(e) => code_name_ptr(e.code),
        None => ptr::null(),
    }
}

/// The error's message (UTF-8, NUL-terminated), valid until the error is
/// freed; NULL for a NULL error. Paths in it are root-relative.
///
/// # Return value
///
/// A NUL-terminated string owned by the error object, valid until
/// `sg_error_free`; NULL when `err` is NULL.
///
/// # Safety
///
/// `err` is NULL or a live error object from this library.
#[no_mangle]
pub unsafe extern "C" fn sg_error_message(err: *const sg_error) -> *const c_char {
    // SAFETY: per the contract, a non-NULL `err` is a live error object.
    match unsafe { err.as_ref() } {
        Some(e) => e.message.as_ptr(),
        None => ptr::null(),
    }
}

fn opt_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |s| s.as_ptr())
}

/// The root-relative path the error is about, or NULL when it names none.
/// Valid until the error is freed.
///
/// # Return value
///
/// A NUL-terminated string owned by the error object, valid until
/// `sg_error_free`; NULL when the error names no path or `err` is NULL.
///
/// # Safety
///
/// `err` is NULL or a live error object from this library.
#[no_mangle]
pub unsafe extern "C" fn sg_error_path(err: *const sg_error) -> *const c_char {
    // SAFETY: per the contract, a non-NULL `err` is a live error object.
    unsafe { err.as_ref() }.map_or(ptr::null(), |e| opt_ptr(&e.path))
}

/// The deny-write pattern that refused the operation (`E_FS_PROTECTED`,
/// `E_HARDLINK`), or NULL. Valid until the error is freed.
///
/// # Return value
///
/// A NUL-terminated string owned by the error object, valid until
/// `sg_error_free`; NULL when no pattern matched or `err` is NULL.
///
/// # Safety
///
/// `err` is NULL or a live error object from this library.
#[no_mangle]
pub unsafe extern "C" fn sg_error_pattern(err: *const sg_error) -> *const c_char {
    // SAFETY: per the contract, a non-NULL `err` is a live error object.
    unsafe { err.as_ref() }.map_or(ptr::null(), |e| opt_ptr(&e.pattern))
}

/// The dotted policy key an `E_POLICY` error names (`"fs.write_root"`), or
/// NULL. Valid until the error is freed.
///
/// # Return value
///
/// A NUL-terminated string owned by the error object, valid until
/// `sg_error_free`; NULL when no key is to blame or `err` is NULL.
///
/// # Safety
///
/// `err` is NULL or a live error object from this library.
#[no_mangle]
pub unsafe extern "C" fn sg_error_key(err: *const sg_error) -> *const c_char {
    // SAFETY: per the contract, a non-NULL `err` is a live error object.
    unsafe { err.as_ref() }.map_or(ptr::null(), |e| opt_ptr(&e.key))
}

/// The OS error number behind the error, or 0 when there is none.
///
/// # Return value
///
/// The OS error number, or 0 when there is none or `err` is NULL.
///
/// # Safety
///
/// `err` is NULL or a live error object from this library.
#[no_mangle]
pub unsafe extern "C" fn sg_error_errno(err: *const sg_error) -> i32 {
    // SAFETY: per the contract, a non-NULL `err` is a live error object.
    unsafe { err.as_ref() }.map_or(0, |e| e.errno)
}

/// Frees an error object. NULL is accepted.
///
/// # Return value
///
/// None.
///
/// # Safety
///
/// `err` is NULL or an error object from this library, freed only once.
#[no_mangle]
pub unsafe extern "C" fn sg_error_free(err: *mut sg_error) {
    if !err.is_null() {
        // SAFETY: `err` came from Box::into_raw in `fail` (the contract).
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(err) })));
    }
}

// ----- the boundary -----

pub(crate) fn request(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::Request, message)
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    format!("internal error (a bug in sandgate): {what}")
}

/// Stores `e` in `*err` (when `err` is not NULL) and returns its code.
fn fail(err: *mut *mut sg_error, e: &Error) -> sg_status {
    if !err.is_null() {
        let obj = Box::into_raw(Box::new(sg_error::from_error(e)));
        // SAFETY: the caller's `err` is NULL or a valid out-pointer (every
        // entry point's contract).
        unsafe { *err = obj };
    }
    e.code().value()
}

/// Runs an entry point's body: a returned error is stored in `*err`, a
/// panic becomes `E_INTERNAL`; nothing unwinds into the caller.
pub(crate) fn boundary(
    err: *mut *mut sg_error,
    body: impl FnOnce() -> Result<(), Error>,
) -> sg_status {
    if !err.is_null() {
        // SAFETY: `err` is a valid out-pointer by contract; clearing it
        // means a caller never reads a stale error after success.
        unsafe { *err = ptr::null_mut() };
    }
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SG_OK,
        Ok(Err(e)) => fail(err, &e),
        Err(payload) => fail(
            err,
            &Error::new(ErrorCode::Internal, panic_message(payload.as_ref())),
        ),
    }
}

// ----- arguments -----

/// The bytes of a `(ptr, len)` argument. NULL with length 0 is empty.
///
/// # Safety
///
/// A non-NULL `ptr` points to `len` readable bytes that stay valid and
/// unchanged for `'a`.
pub(crate) unsafe fn arg_bytes<'a>(
    ptr: *const u8,
    len: usize,
    what: &str,
) -> Result<&'a [u8], Error> {
    if ptr.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(request(format!("{what}: NULL pointer with length {len}")))
        };
    }
    if len > isize::MAX as usize {
        return Err(request(format!("{what}: length {len} is too large")));
    }
    // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A `(ptr, len)` UTF-8 argument.
///
/// # Safety
///
/// As [`arg_bytes`].
pub(crate) unsafe fn arg_str<'a>(
    ptr: *const c_char,
    len: usize,
    what: &str,
) -> Result<&'a str, Error> {
    // SAFETY: forwarded contract.
    let b = unsafe { arg_bytes(ptr.cast(), len, what)? };
    std::str::from_utf8(b).map_err(|e| {
        request(format!(
            "{what} is not UTF-8 (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })
}

/// An optional `(ptr, len)` UTF-8 argument: NULL with length 0 means
/// absent; NULL with any other length is malformed, as for [`arg_bytes`]
/// (the caller meant to pass something, and reading it as absent would act
/// on a default it did not ask for, such as the root as the working
/// directory).
///
/// # Safety
///
/// As [`arg_bytes`].
pub(crate) unsafe fn arg_opt_str<'a>(
    ptr: *const c_char,
    len: usize,
    what: &str,
) -> Result<Option<&'a str>, Error> {
    if ptr.is_null() {
        return if len == 0 {
            Ok(None)
        } else {
            Err(request(format!("{what}: NULL pointer with length {len}")))
        };
    }
    // SAFETY: forwarded contract.
    unsafe { arg_str(ptr, len, what) }.map(Some)
}

/// A handle argument: NULL is `E_REQUEST`.
///
/// # Safety
///
/// A non-NULL `h` points to a live handle of type `T` made by this library.
pub(crate) unsafe fn handle<'a, T>(h: *const T, what: &str) -> Result<&'a T, Error> {
    // SAFETY: per the contract, non-NULL means a live handle.
    unsafe { h.as_ref() }.ok_or_else(|| request(format!("{what} is NULL")))
}

/// An out-pointer argument: NULL is `E_REQUEST`.
///
/// # Safety
///
/// A non-NULL `p` is valid for writes of `T`.
pub(crate) unsafe fn out_ptr<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Error> {
    // SAFETY: per the contract, non-NULL means writable.
    unsafe { p.as_mut() }.ok_or_else(|| request(format!("{what} (an out-pointer) is NULL")))
}

/// Writes `value` into a checked out-pointer without reading or dropping
/// what was there (the caller's memory may be uninitialized).
pub(crate) fn put<T>(slot: &mut T, value: T) {
    // SAFETY: `slot` is a valid, writable, aligned `T`; ptr::write does not
    // drop the previous (possibly uninitialized) contents.
    unsafe { ptr::write(slot, value) };
}

/// Boxes a handle for the caller.
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Frees a handle made by [`into_handle`]; NULL is accepted.
///
/// # Safety
///
/// `h` is NULL or came from [`into_handle`] with the same `T` and is freed
/// once.
pub(crate) unsafe fn free_handle<T>(h: *mut T) {
    if !h.is_null() {
        // SAFETY: forwarded contract.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(h) })));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_are_the_tables() {
        for code in ErrorCode::ALL {
            let name = sg_code_name(code.value());
            assert!(!name.is_null());
            // SAFETY: a static NUL-terminated string.
            let name = unsafe { std::ffi::CStr::from_ptr(name) };
            assert_eq!(name.to_str().unwrap(), code.as_str());
        }
        assert!(sg_code_name(999).is_null());
    }
}
