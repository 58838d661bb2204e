//! `sg_sandbox_*`: the agent-facing sandbox (docs/reference/names.md and docs/reference/sandbox.md). Names are
//! agent-facing: root-relative, `/`-separated, never absolute or `..`.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use facade::{AuditEvent, EditOptions, Error, ErrorCode, Sandbox, SandboxBuilder, WriteOptions};
use serde_json::json;

use crate::error::*;
use crate::exec::{abort_arg, sg_abort};
use crate::policy::sg_policy;
use crate::root::{kind_value, resolver_of, sg_resolver, sg_stat};

/// A sandbox: read roots, a write root, caps, deny patterns, budget and
/// audit. Thread-safe. Free with `sg_sandbox_free`.
pub struct sg_sandbox {
    sandbox: Sandbox,
}

/// A sandbox under construction. Use from one thread at a time. Free with
/// `sg_sandbox_options_free` (building does not consume it).
pub struct sg_sandbox_options {
    builder: SandboxBuilder,
}

/// One audit event, valid only during the callback. The library allocates
/// it and passes it by const pointer, so fields are only ever appended at
/// its end: a caller built against an older header reads the fields it
/// knows and keeps working (`has_exit_code`, `exit_code` and `limit` came
/// with ABI 2.1).
#[repr(C)]
pub struct sg_audit_event {
    /// The operation (`"read"`, `"write"`, …), NUL-terminated.
    pub op: *const c_char,
    /// The root-relative path (for `rename`, `"from -> to"`), UTF-8, not
    /// NUL-terminated; never NULL (an empty one points to a NUL byte).
    pub path: *const c_char,
    /// Length of `path` in bytes.
    pub path_len: usize,
    /// Bytes read or written, when `has_size`.
    pub size: u64,
    /// Whether `size` is meaningful.
    pub has_size: bool,
    /// `SG_OK` or the refusal's code.
    pub outcome: sg_status,
    /// When the operation finished: seconds since the epoch.
    pub time_sec: i64,
    /// When the operation finished: nanoseconds.
    pub time_nsec: u32,
    /// Whether `exit_code` is meaningful: an executor's `exec` or `git`
    /// call whose command ran.
    pub has_exit_code: bool,
    /// The command's exit code, when `has_exit_code`.
    pub exit_code: i32,
    /// The limit that stopped the command (`"memory"`, `"tasks"`, `"cpu"`,
    /// `"output"`, `"timeout"` or `"file_size"`), NUL-terminated; NULL when none did or
    /// sandgate did not see it, and for every file operation.
    pub limit: *const c_char,
}

/// An audit callback. It is called on the thread that ran the operation,
/// possibly from several threads at once (so it must be thread-safe), with
/// the `user_data` given to `sg_sandbox_options_set_audit`,
/// `sg_executor_set_audit` or `sg_fetcher_set_audit`, and no lock of the
/// library held. It may call back into the same sandbox, executor or
/// fetcher (each call it makes reports an event of its own, so it must not
/// recurse without end), `sg_sandbox_close` included, but never free it:
/// the call it reports on is still in progress. A sandbox's callback may be called until `sg_sandbox_free`
/// returns (calls refused after `sg_sandbox_close` are reported too), never
/// after. It must return normally: leaving it otherwise (a C++ exception,
/// a `longjmp`, a Rust panic unwinding out of it) crosses the library's
/// frames and is undefined behaviour.
pub type sg_audit_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const sg_audit_event)>;

/// The callback's user data, handed back untouched.
#[derive(Clone, Copy)]
pub(crate) struct UserData(pub(crate) *mut c_void);
// SAFETY: the pointer is never dereferenced here, only passed back to the
// caller's callback; the header documents that the callback may run on any
// thread, so thread-safety of what it points to is the caller's contract.
unsafe impl Send for UserData {}
// SAFETY: as above.
unsafe impl Sync for UserData {}

pub(crate) fn deliver(
    cb: unsafe extern "C" fn(*mut c_void, *const sg_audit_event),
    user: UserData,
    e: &AuditEvent,
) {
    let op = format!("{}\0", e.op);
    let limit = e.limit.map(|l| format!("{l}\0"));
    let (time_sec, time_nsec) = match e.time.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(_) => (0, 0),
    };
    // An empty String's pointer is dangling (0x1): a C host may not pass
    // it even to `memcpy(dst, path, 0)`. An empty path points to a NUL.
    let path: &[u8] = match e.path.is_empty() {
        true => b"\0",
        false => e.path.as_bytes(),
    };
    let ev = sg_audit_event {
        op: op.as_ptr().cast(),
        path: path.as_ptr().cast(),
        path_len: e.path.len(),
        size: e.size.unwrap_or(0),
        has_size: e.size.is_some(),
        outcome: e.outcome.value(),
        time_sec,
        time_nsec,
        has_exit_code: e.exit_code.is_some(),
        exit_code: e.exit_code.unwrap_or(0),
        limit: limit
            .as_ref()
            .map_or(std::ptr::null(), |l| l.as_ptr().cast()),
    };
    // SAFETY: the caller registered `cb` for exactly this call shape; `ev`
    // and the strings it points to live until the call returns.
    unsafe { cb(user.0, &ev) };
}

/// New options with nothing granted. Never NULL.
///
/// # Return value
///
/// New options that the caller owns and frees with `sg_sandbox_options_free`
/// (or passes to `sg_sandbox_new`, which does not take them). Never NULL.
///
/// # Safety
///
/// None: every argument value is accepted.
#[no_mangle]
pub extern "C" fn sg_sandbox_options_new() -> *mut sg_sandbox_options {
    into_handle(sg_sandbox_options {
        builder: SandboxBuilder::new(),
    })
}

/// Options prefilled with what `policy` grants (roots, caps, overwrite
/// switch, deny patterns, restricted mode, `fs_ops` budget); add an audit
/// callback, then `sg_sandbox_new`.
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new set of options that the caller owns and
/// frees with `sg_sandbox_options_free`; otherwise the code of the refusal or
/// failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL) and the outputs
/// left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `policy` is NULL or a live policy; `out` is valid for writes; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_from_policy(
    policy: *const sg_policy,
    out: *mut *mut sg_sandbox_options,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (p, out) = unsafe { (handle(policy, "policy")?, out_ptr(out, "out")?) };
        put(
            out,
            into_handle(sg_sandbox_options {
                builder: SandboxBuilder::from_policy(&p.policy),
            }),
        );
        Ok(())
    })
}

/// Frees options. NULL is accepted.
///
/// # Return value
///
/// None.
///
/// # Safety
///
/// `options` is NULL or options from this library, freed once, with no
/// call on them in progress (a sandbox built from them does not need them).
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_free(options: *mut sg_sandbox_options) {
    // SAFETY: forwarded contract.
    unsafe { free_handle(options) }
}

/// Mutable access to options for a setter.
///
/// # Safety
///
/// `o` is NULL or live options not used by another thread meanwhile.
unsafe fn options<'a>(o: *mut sg_sandbox_options) -> Result<&'a mut SandboxBuilder, Error> {
    // SAFETY: forwarded contract.
    unsafe { o.as_mut() }
        .map(|o| &mut o.builder)
        .ok_or_else(|| request("options is NULL"))
}

/// The body of an options setter.
///
/// # Safety
///
/// `o` is NULL or live options used by this thread only; `err` is NULL or
/// valid for writes.
unsafe fn set(
    o: *mut sg_sandbox_options,
    err: *mut *mut sg_error,
    f: impl FnOnce(&mut SandboxBuilder) -> Result<(), Error>,
) -> sg_status {
    boundary(err, || {
        // SAFETY: forwarded contract.
        f(unsafe { options(o)? })
    })
}

/// The body of an options setter taking a string.
///
/// # Safety
///
/// As [`set`]; `value` points to `value_len` bytes.
unsafe fn set_str(
    o: *mut sg_sandbox_options,
    value: *const c_char,
    value_len: usize,
    what: &str,
    err: *mut *mut sg_error,
    f: impl FnOnce(&mut SandboxBuilder, &str),
) -> sg_status {
    boundary(err, || {
        // SAFETY: forwarded contract.
        let (b, s) = unsafe { (options(o)?, arg_str(value, value_len, what)?) };
        f(b, s);
        Ok(())
    })
}

/// Adds a read root (a host directory; the first root holding a name wins).
/// The write root grants no reads by itself: add it here too to read it.
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; the string
/// points to its length in bytes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_add_read_root(
    options: *mut sg_sandbox_options,
    value: *const c_char,
    value_len: usize,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe {
        set_str(options, value, value_len, "read root", err, |b, s| {
            b.read_root(s);
        })
    }
}

/// Sets the write root (a host directory).
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; the string
/// points to its length in bytes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_set_write_root(
    options: *mut sg_sandbox_options,
    value: *const c_char,
    value_len: usize,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe {
        set_str(options, value, value_len, "write root", err, |b, s| {
            b.write_root(s);
        })
    }
}

/// Adds a deny-write pattern (docs/reference/deny-write.md); checked when the sandbox is built.
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; the string
/// points to its length in bytes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_add_deny_write(
    options: *mut sg_sandbox_options,
    value: *const c_char,
    value_len: usize,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe {
        set_str(
            options,
            value,
            value_len,
            "deny-write pattern",
            err,
            |b, s| {
                b.deny_write(s);
            },
        )
    }
}

/// Sets the read cap in bytes.
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_set_max_read_bytes(
    options: *mut sg_sandbox_options,
    n: u64,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe {
        set(options, err, |b| {
            b.max_read_bytes(n);
            Ok(())
        })
    }
}

/// Sets the write cap in bytes.
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_set_max_write_bytes(
    options: *mut sg_sandbox_options,
    n: u64,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe {
        set(options, err, |b| {
            b.max_write_bytes(n);
            Ok(())
        })
    }
}

/// The host's half of the overwrite rule: whether existing files may be
/// replaced at all (each write must still ask).
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_set_allow_overwrite(
    options: *mut sg_sandbox_options,
    on: bool,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe {
        set(options, err, |b| {
            b.allow_overwrite(on);
            Ok(())
        })
    }
}

/// Restricted mode: `.git` is protected and hard links are refused.
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_set_restricted(
    options: *mut sg_sandbox_options,
    on: bool,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe {
        set(options, err, |b| {
            b.restricted(on);
            Ok(())
        })
    }
}

/// The resolver the roots use (`SG_RESOLVER_*`).
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_set_resolver(
    options: *mut sg_sandbox_options,
    resolver: sg_resolver,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe {
        set(options, err, |b| {
            b.resolver(resolver_of(resolver)?);
            Ok(())
        })
    }
}

/// Limits the number of file operations (every call counts, refused ones
/// included).
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_set_fs_ops_budget(
    options: *mut sg_sandbox_options,
    n: u64,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe {
        set(options, err, |b| {
            b.fs_ops_budget(Some(n));
            Ok(())
        })
    }
}

/// Sets the audit callback (NULL removes it). See `sg_audit_fn`.
///
/// # Return value
///
/// `SG_OK` on success, the options changed; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL). `*err` is set
/// to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options used by this thread only; `callback`
/// and `user_data` stay valid for as long as any sandbox built from these
/// options lives; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_options_set_audit(
    options: *mut sg_sandbox_options,
    callback: sg_audit_fn,
    user_data: *mut c_void,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let b = unsafe { self::options(options)? };
        let user = UserData(user_data);
        match callback {
            Some(cb) => b.audit_sink(Arc::new(move |e: &AuditEvent| {
                let user = user;
                deliver(cb, user, e)
            })),
            None => b.audit_sink(Arc::new(|_: &AuditEvent| {})),
        };
        Ok(())
    })
}

/// Builds a sandbox from `options` (which stay usable and must still be
/// freed). Refuses missing roots, bad deny patterns, and a write root that
/// is not a directory.
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new sandbox that the caller owns and frees
/// with `sg_sandbox_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `options` is NULL or live options; `out` is valid for writes; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_new(
    options: *const sg_sandbox_options,
    out: *mut *mut sg_sandbox,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (o, out) = unsafe { (handle(options, "options")?, out_ptr(out, "out")?) };
        let sandbox = o.builder.build()?;
        put(out, into_handle(sg_sandbox { sandbox }));
        Ok(())
    })
}

/// Frees a sandbox. NULL is accepted.
///
/// # Return value
///
/// None.
///
/// # Safety
///
/// `sandbox` is NULL or a sandbox from this library, freed once, with no
/// call on it in progress.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_free(sandbox: *mut sg_sandbox) {
    // SAFETY: forwarded contract.
    unsafe { free_handle(sandbox) }
}

/// Closes a sandbox: every later call answers `E_CLOSED`. Closing twice is
/// fine.
///
/// # Return value
///
/// `SG_OK` on success (also when it was already closed); otherwise the code
/// of the refusal or failure (`SG_E_REQUEST` for a NULL handle or a malformed
/// argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new error
/// object that the caller frees with `sg_error_free` (when `err` is not
/// NULL). `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_close(
    sandbox: *const sg_sandbox,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        unsafe { handle(sandbox, "sandbox")? }.sandbox.close();
        Ok(())
    })
}

fn json_bytes(v: serde_json::Value) -> sg_bytes {
    sg_bytes::from_vec(v.to_string().into_bytes())
}

/// Deny-pattern components that were malformed and treated as `*` (fail
/// closed), one message each, as a JSON array of strings.
///
/// # Return value
///
/// `SG_OK` with `*out` set to the warnings as a JSON array of strings, owned
/// by the caller and freed with `sg_bytes_free`; otherwise the code of the
/// refusal or failure (`SG_E_REQUEST` for a NULL handle or a malformed
/// argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new error
/// object that the caller frees with `sg_error_free` (when `err` is not NULL)
/// and the outputs left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `out` is valid for writes; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_warnings(
    sandbox: *const sg_sandbox,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (s, out) = unsafe { (handle(sandbox, "sandbox")?, out_ptr(out, "out")?) };
        let warnings = s.sandbox.warnings();
        // `Sandbox::warnings` answers an empty list once closed; the C ABI
        // promises E_CLOSED for every call after `sg_sandbox_close`. Asked
        // after the list, so a close before or during the call is seen.
        if s.sandbox.is_closed() {
            return Err(Error::new(ErrorCode::Closed, "the sandbox was closed"));
        }
        put(out, json_bytes(json!(warnings)));
        Ok(())
    })
}

/// The root-relative name of a path the host gives (not one an agent
/// gives): an absolute host path inside a read root (with `write`: inside
/// the write root) is compared with the root component by component, as
/// the root was spelled and as its symlinks resolve, never by string prefix
/// (`/srv/app-secrets` is not inside `/srv/app`); a relative name comes back
/// as given, for the operation's own name check to judge. A path holding a
/// NUL byte names no file and is refused here, never mapped.
///
/// # Return value
///
/// `SG_OK` with `*out` set to the name (UTF-8, not NUL-terminated), owned by
/// the caller and freed with `sg_bytes_free`; otherwise the code of the
/// refusal (`SG_E_PATH_INVALID` for a path holding a NUL byte, absolute or
/// relative, `SG_E_PATH_ESCAPE` for an absolute path outside every root,
/// `SG_E_DENIED` for one in a root of the other kind, `SG_E_PATH_INVALID`
/// for one in a later read root whose name an earlier root holds,
/// `SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `path` points to `path_len` bytes;
/// `out` is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_host_name(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    write: bool,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (s, path, out) = unsafe {
            (
                handle(sandbox, "sandbox")?,
                arg_str(path, path_len, "path")?,
                out_ptr(out, "out")?,
            )
        };
        let name = if write {
            s.sandbox.host_write_name(path)?
        } else {
            s.sandbox.host_read_name(path)?
        };
        put(out, sg_bytes::from_vec(name.into_bytes()));
        Ok(())
    })
}

/// Reads the whole file `path` (at most the read cap).
///
/// # Return value
///
/// `SG_OK` with `*out` set to the file's content, owned by the caller and
/// freed with `sg_bytes_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `path` points to `path_len` bytes;
/// `out` is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_read(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(sandbox, "sandbox")? };
        // SAFETY: the caller's contract.
        let path = unsafe { audited_path(s, "read", path, path_len)? };
        // SAFETY: the caller's contract.
        let out = unsafe { out_ptr(out, "out")? };
        put(out, sg_bytes::from_vec(s.sandbox.read(path)?));
        Ok(())
    })
}

/// What a ranged read served besides its content.
#[repr(C)]
pub struct sg_lines {
    /// The first line served (1-based).
    pub offset: u64,
    /// How many lines were served.
    pub lines: u64,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Whether the read cap cut the range short.
    pub truncated: bool,
}

/// Reads `limit` lines of `path` from line `offset` (1-based); `offset` 0
/// means 1 and `limit` 0 means the most a range may hold, 2,000 lines (a
/// larger `limit` is `SG_E_REQUEST`). `content` receives the lines with
/// their endings.
///
/// # Return value
///
/// `SG_OK` with `*content` set to the lines served, owned by the caller and
/// freed with `sg_bytes_free`, and `*info` filled (plain values); otherwise
/// the code of the refusal or failure (`SG_E_REQUEST` for a NULL handle or a
/// malformed argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new
/// error object that the caller frees with `sg_error_free` (when `err` is not
/// NULL) and the outputs left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `path` points to `path_len` bytes;
/// `content` and `info` are valid for writes; `err` is NULL or valid for
/// writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_read_lines(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    offset: u64,
    limit: u64,
    content: *mut sg_bytes,
    info: *mut sg_lines,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: the caller's contract, which is the cancellable form's with
    // no signal.
    unsafe {
        sg_sandbox_read_lines_cancellable(
            sandbox,
            path,
            path_len,
            offset,
            limit,
            std::ptr::null(),
            content,
            info,
            err,
        )
    }
}

/// `sg_sandbox_read_lines`, stopped with `SG_E_ABORTED` once `signal` is
/// triggered (`sg_abort_trigger`, from any thread). A ranged read counts
/// every line of the file, so its time grows with the file's data, not
/// with the range; the signal is looked at every 64 KiB read. `signal`
/// NULL is `sg_sandbox_read_lines`.
///
/// # Return value
///
/// `SG_OK` with `*content` set to the lines served, owned by the caller and
/// freed with `sg_bytes_free`, and `*info` filled (plain values); otherwise
/// the code of the refusal or failure (`SG_E_REQUEST` for a NULL handle or a
/// malformed argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new
/// error object that the caller frees with `sg_error_free` (when `err` is not
/// NULL) and the outputs left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `path` points to `path_len` bytes;
/// `signal` is NULL or a live abort signal; `content` and `info` are valid
/// for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_read_lines_cancellable(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    offset: u64,
    limit: u64,
    signal: *const sg_abort,
    content: *mut sg_bytes,
    info: *mut sg_lines,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(sandbox, "sandbox")? };
        // SAFETY: the caller's contract.
        let path = unsafe { audited_path(s, "read", path, path_len)? };
        // SAFETY: the caller's contract.
        let (content, info) = unsafe { (out_ptr(content, "content")?, out_ptr(info, "info")?) };
        let offset = if offset == 0 {
            1
        } else {
            usize::try_from(offset).unwrap_or(usize::MAX)
        };
        let limit = if limit == 0 {
            facade::MAX_RANGE_LINES
        } else {
            usize::try_from(limit).unwrap_or(usize::MAX)
        };
        let never = std::sync::atomic::AtomicBool::new(false);
        // SAFETY: `signal` is NULL or a live abort signal (the caller's
        // contract).
        let cancel = match unsafe { abort_arg(signal) }
            .map_err(|e| s.sandbox.audit_refusal("read", path, e.with_path(path)))?
        {
            Some(a) => &*a.cancel,
            None => &never,
        };
        let r = s
            .sandbox
            .read_lines_cancellable(path, offset, limit, cancel)?;
        put(
            info,
            sg_lines {
                offset: r.offset as u64,
                lines: r.lines as u64,
                total_lines: r.total_lines as u64,
                truncated: r.truncated,
            },
        );
        put(content, sg_bytes::from_vec(r.content));
        Ok(())
    })
}

/// Writes `data` to `path` atomically and durably: a new file, or, when
/// `overwrite` is true and the sandbox allows overwriting, a replacement.
/// Missing parent directories are created. `size` (may be NULL) receives
/// the bytes written.
///
/// # Return value
///
/// `SG_OK` with `*size` (when `size` is not NULL) set to the bytes written;
/// otherwise the code of the refusal or failure (`SG_E_REQUEST` for a NULL
/// handle or a malformed argument, `SG_E_INTERNAL` for a bug), with `*err`
/// set to a new error object that the caller frees with `sg_error_free` (when
/// `err` is not NULL) and the outputs left as they were. `*err` is set to
/// NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `path` and `data` point to their
/// lengths in bytes; `size` is NULL or valid for writes; `err` is NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_write(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    data: *const u8,
    data_len: usize,
    overwrite: bool,
    size: *mut u64,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(sandbox, "sandbox")? };
        let (path, data) = audited_args(
            s,
            "write",
            // SAFETY: the caller's contract.
            || unsafe { shown(path, path_len) },
            // SAFETY: the caller's contract.
            || unsafe {
                Ok((
                    arg_str(path, path_len, "path")?,
                    arg_bytes(data, data_len, "data")?,
                ))
            },
        )?;
        let n = s
            .sandbox
            .write(path, data, WriteOptions::default().overwrite(overwrite))?;
        if !size.is_null() {
            // SAFETY: checked non-NULL; writable by the caller's contract.
            unsafe { *size = n };
        }
        Ok(())
    })
}

/// Replaces `old` with `new` in `path` (UTF-8 text): exactly one occurrence
/// unless `all`. `replacements` (may be NULL) receives how many were made.
///
/// # Return value
///
/// `SG_OK` with `*replacements` (when not NULL) set to how many were made;
/// otherwise the code of the refusal or failure (`SG_E_REQUEST` for a NULL
/// handle or a malformed argument, `SG_E_INTERNAL` for a bug), with `*err`
/// set to a new error object that the caller frees with `sg_error_free` (when
/// `err` is not NULL) and the outputs left as they were. `*err` is set to
/// NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; strings point to their lengths in
/// bytes; `replacements` is NULL or valid for writes; `err` is NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_edit(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    old: *const c_char,
    old_len: usize,
    new: *const c_char,
    new_len: usize,
    all: bool,
    replacements: *mut u64,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(sandbox, "sandbox")? };
        let (path, old, new) = audited_args(
            s,
            "edit",
            // SAFETY: the caller's contract.
            || unsafe { shown(path, path_len) },
            // SAFETY: the caller's contract.
            || unsafe {
                Ok((
                    arg_str(path, path_len, "path")?,
                    arg_str(old, old_len, "old")?,
                    arg_str(new, new_len, "new")?,
                ))
            },
        )?;
        let n = s
            .sandbox
            .edit(path, old, new, EditOptions::default().replace_all(all))?;
        if !replacements.is_null() {
            // SAFETY: checked non-NULL; writable by the caller's contract.
            unsafe { *replacements = n as u64 };
        }
        Ok(())
    })
}

/// Lists the directory `path` as JSON: `[{"name","kind","size"}]`, sorted
/// by name, kinds `file`/`dir`/`symlink`/`other`.
///
/// # Return value
///
/// `SG_OK` with `*out` set to the entries as JSON, owned by the caller and
/// freed with `sg_bytes_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `path` points to `path_len` bytes;
/// `out` is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_list(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(sandbox, "sandbox")? };
        // SAFETY: the caller's contract.
        let path = unsafe { audited_path(s, "list", path, path_len)? };
        // SAFETY: the caller's contract.
        let out = unsafe { out_ptr(out, "out")? };
        let entries: Vec<_> = s
            .sandbox
            .list(path)?
            .into_iter()
            .map(|e| json!({"name": e.name, "kind": e.kind.as_str(), "size": e.size}))
            .collect();
        put(out, json_bytes(json!(entries)));
        Ok(())
    })
}

/// Describes `path` (following a final symlink beneath the root): fills
/// `kind`, `mode` and `size`; the other fields are 0.
///
/// # Return value
///
/// `SG_OK` with `*out` filled (plain values, nothing to free); otherwise the
/// code of the refusal or failure (`SG_E_REQUEST` for a NULL handle or a
/// malformed argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new
/// error object that the caller frees with `sg_error_free` (when `err` is not
/// NULL) and the outputs left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `path` points to `path_len` bytes;
/// `out` is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_stat(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_stat,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(sandbox, "sandbox")? };
        // SAFETY: the caller's contract.
        let path = unsafe { audited_path(s, "stat", path, path_len)? };
        // SAFETY: the caller's contract.
        let out = unsafe { out_ptr(out, "out")? };
        let st = s.sandbox.stat(path)?;
        put(
            out,
            sg_stat {
                kind: kind_value(st.kind),
                mode: st.mode,
                size: st.size,
                nlink: 0,
                dev: 0,
                ino: 0,
                uid: 0,
                gid: 0,
                mtime_sec: 0,
                mtime_nsec: 0,
            },
        );
        Ok(())
    })
}

/// Creates the directory `path` and any missing parents beneath the write
/// root.
///
/// # Return value
///
/// `SG_OK` on success; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL). `*err` is set to NULL on
/// success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `path` points to `path_len` bytes;
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_mkdir(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(sandbox, "sandbox")? };
        // SAFETY: the caller's contract.
        let path = unsafe { audited_path(s, "mkdir", path, path_len)? };
        s.sandbox.mkdir(path)
    })
}

/// Deletes the file, symlink or empty directory `path` beneath the write
/// root.
///
/// # Return value
///
/// `SG_OK` on success; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL). `*err` is set to NULL on
/// success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; `path` points to `path_len` bytes;
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_delete(
    sandbox: *const sg_sandbox,
    path: *const c_char,
    path_len: usize,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(sandbox, "sandbox")? };
        // SAFETY: the caller's contract.
        let path = unsafe { audited_path(s, "delete", path, path_len)? };
        s.sandbox.delete(path)
    })
}

/// Renames `from` to `to` beneath the write root; `to` must not exist.
///
/// # Return value
///
/// `SG_OK` on success; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL). `*err` is set to NULL on
/// success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; strings point to their lengths in
/// bytes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_rename(
    sandbox: *const sg_sandbox,
    from: *const c_char,
    from_len: usize,
    to: *const c_char,
    to_len: usize,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let s = unsafe { handle(sandbox, "sandbox")? };
        let (from, to) = audited_args(
            s,
            "rename",
            // SAFETY: the caller's contract.
            || unsafe { format!("{} -> {}", shown(from, from_len), shown(to, to_len)) },
            // SAFETY: the caller's contract.
            || unsafe { Ok((arg_str(from, from_len, "from")?, arg_str(to, to_len, "to")?)) },
        )?;
        s.sandbox.rename(from, to)
    })
}

/// The bytes of a `(ptr, len)` argument as an audit record shows them:
/// what is not UTF-8 replaced (U+FFFD); empty when they cannot be read
/// (NULL with a length).
///
/// # Safety
///
/// As [`arg_bytes`].
pub(crate) unsafe fn shown(ptr: *const c_char, len: usize) -> String {
    // SAFETY: forwarded contract.
    match unsafe { arg_bytes(ptr.cast(), len, "") } {
        Ok(b) => String::from_utf8_lossy(b).into_owned(),
        Err(_) => String::new(),
    }
}

/// The text arguments of a call on a live sandbox (its names, pattern,
/// old and new text, search options), read by `args`: what the agent
/// asked for. A refusal of them here (text that is not UTF-8, a NULL
/// pointer with a length) is reported as the sandbox reports its own
/// refusal of a malformed name (`Sandbox::audit_refusal`): the audit
/// callback hears of it as `op` on `shown`, so an agent's bytes refused at
/// this boundary leave the record; like any request refused as malformed
/// before it reaches the sandbox, it spends no budget (a name holding a
/// NUL byte is passed on, refused by the sandbox itself, and spends one).
/// An out-pointer is the host's own: one that is NULL is refused after,
/// with no record.
fn audited_args<T>(
    s: &sg_sandbox,
    op: &'static str,
    shown: impl FnOnce() -> String,
    args: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    args().map_err(|e| s.sandbox.audit_refusal(op, &shown(), e))
}

/// [`audited_args`] for a call whose one text argument is `path`.
///
/// # Safety
///
/// As [`arg_str`].
unsafe fn audited_path<'a>(
    s: &sg_sandbox,
    op: &'static str,
    path: *const c_char,
    path_len: usize,
) -> Result<&'a str, Error> {
    audited_args(
        s,
        op,
        // SAFETY: forwarded contract.
        || unsafe { shown(path, path_len) },
        // SAFETY: forwarded contract.
        || unsafe { arg_str(path, path_len, "path") },
    )
}

/// A search refused because its abort signal was triggered before it
/// started: it neither starts nor spends the budget, but is reported as the
/// sandbox reports a cancelled search (`op` on its base path, `E_ABORTED`),
/// so that every call leaves a record.
fn refused_for_signal(s: &sg_sandbox, op: &'static str, path: Option<&str>, e: Error) -> Error {
    let path = path.unwrap_or(".");
    s.sandbox.audit_refusal(op, path, e.with_path(path))
}

/// The arguments the search entry points share (`sg_sandbox_glob`,
/// `sg_sandbox_glob_found`, `sg_sandbox_grep`), checked in their order:
/// the sandbox, the pattern, the optional base path, the out-pointer.
///
/// # Safety
///
/// As for those functions.
unsafe fn search_args<'a>(
    sandbox: *const sg_sandbox,
    op: &'static str,
    pattern: *const c_char,
    pattern_len: usize,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_bytes,
) -> Result<(&'a sg_sandbox, &'a str, Option<&'a str>, &'a mut sg_bytes), Error> {
    // SAFETY: forwarded contract.
    let s = unsafe { handle(sandbox, "sandbox")? };
    let (pattern, path) = audited_args(
        s,
        op,
        // SAFETY: forwarded contract.
        || unsafe { shown_base(path, path_len) },
        // SAFETY: forwarded contract.
        || unsafe {
            Ok((
                arg_str(pattern, pattern_len, "pattern")?,
                arg_opt_str(path, path_len, "path")?,
            ))
        },
    )?;
    // SAFETY: forwarded contract.
    Ok((s, pattern, path, unsafe { out_ptr(out, "out")? }))
}

/// A search's base path as an audit record shows it: `.` when absent
/// (NULL with length 0), as the sandbox records a search of the root; a
/// NULL pointer with a length is no base at all, and shows as empty.
///
/// # Safety
///
/// As [`arg_bytes`].
unsafe fn shown_base(ptr: *const c_char, len: usize) -> String {
    match ptr.is_null() && len == 0 {
        true => ".".into(),
        // SAFETY: forwarded contract.
        false => unsafe { shown(ptr, len) },
    }
}

/// The arguments `sg_sandbox_grep_with` and `sg_sandbox_grep_found`
/// share, checked in their order (the sandbox, the pattern, the optional
/// base path, the optional options, the out-pointer), with the options
/// read ([`grep_options`]).
///
/// # Safety
///
/// As for those functions: each string `(ptr, len)` points to `len` bytes
/// (the path and options may be NULL with length 0).
unsafe fn grep_args<'a>(
    sandbox: *const sg_sandbox,
    pattern: (*const c_char, usize),
    path: (*const c_char, usize),
    options: (*const c_char, usize),
    out: *mut sg_bytes,
) -> Result<
    (
        &'a sg_sandbox,
        &'a str,
        Option<&'a str>,
        facade::search::GrepOptions,
        &'a mut sg_bytes,
    ),
    Error,
> {
    // SAFETY: forwarded contract.
    let s = unsafe { handle(sandbox, "sandbox")? };
    let (pattern, base, options) = audited_args(
        s,
        "grep",
        // SAFETY: forwarded contract.
        || unsafe { shown_base(path.0, path.1) },
        // SAFETY: forwarded contract.
        || unsafe {
            let (pattern, base, options) = (
                arg_str(pattern.0, pattern.1, "pattern")?,
                arg_opt_str(path.0, path.1, "path")?,
                arg_opt_str(options.0, options.1, "options")?,
            );
            Ok((pattern, base, grep_options(options)?))
        },
    )?;
    // SAFETY: forwarded contract.
    Ok((s, pattern, base, options, unsafe { out_ptr(out, "out")? }))
}

/// Paths matching the glob `pattern` below `path` (NULL: the root) in every
/// read root, as a JSON array of root-relative names. Symlinks are never
/// followed.
///
/// # Return value
///
/// `SG_OK` with `*out` set to the matching names as JSON, owned by the caller
/// and freed with `sg_bytes_free`; otherwise the code of the refusal or
/// failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL) and the outputs
/// left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; strings point to their lengths in
/// bytes (`path` may be NULL); `out` is valid for writes; `err` is NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_glob(
    sandbox: *const sg_sandbox,
    pattern: *const c_char,
    pattern_len: usize,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (s, pattern, path, out) =
            unsafe { search_args(sandbox, "glob", pattern, pattern_len, path, path_len, out)? };
        put(out, json_bytes(json!(s.sandbox.glob(pattern, path)?)));
        Ok(())
    })
}

/// `truncated` and `limit` of a search's answer: whether it was cut, and
/// by which cap (`"max_results"`, `"walk_entries"`, `"max_read_bytes"`,
/// `"path_length"` or `"answer_bytes"`; null when whole).
fn with_cut(mut answer: serde_json::Value, cut: Option<facade::search::Cut>) -> serde_json::Value {
    answer["truncated"] = json!(cut.is_some());
    answer["limit"] = json!(cut.map(|c| c.as_str()));
    answer
}

/// `sg_sandbox_glob` saying whether its answer was cut: a JSON object
/// `{"paths": [..], "truncated": bool, "limit": "max_results" |
/// "walk_entries" | "path_length" | null}`. `max_results`: more paths
/// match than the 1,000 answered (those are the first the walk met, sorted
/// by name); `walk_entries`: the walk stopped at its 200,000 entries, and
/// what lies past them was not searched; `path_length`: a directory whose
/// path is 4,096 bytes or longer was not entered. `unreadable` (absent
/// when none) counts the subdirectories the walk could not list and the
/// entries whose names are not UTF-8, and passed over.
///
/// # Return value
///
/// `SG_OK` with `*out` set to the JSON, owned by the caller and freed with
/// `sg_bytes_free`; otherwise the code of the refusal or failure, with
/// `*err` set as for `sg_sandbox_glob`.
///
/// # Safety
///
/// As for `sg_sandbox_glob`.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_glob_found(
    sandbox: *const sg_sandbox,
    pattern: *const c_char,
    pattern_len: usize,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: the caller's contract, which is the cancellable form's with
    // no signal.
    unsafe {
        sg_sandbox_glob_found_cancellable(
            sandbox,
            pattern,
            pattern_len,
            path,
            path_len,
            std::ptr::null(),
            out,
            err,
        )
    }
}

/// `sg_sandbox_glob_found`, stopped with `SG_E_ABORTED` once `signal` is
/// triggered (`sg_abort_trigger`, from any thread); a signal already
/// triggered refuses the call before it starts. `signal` NULL is
/// `sg_sandbox_glob_found`.
///
/// # Return value
///
/// `SG_OK` with the JSON in `*out`, or the error's status, as for
/// `sg_sandbox_glob_found`.
///
/// # Safety
///
/// As for `sg_sandbox_glob_found`; `signal` is NULL or a live abort signal.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_glob_found_cancellable(
    sandbox: *const sg_sandbox,
    pattern: *const c_char,
    pattern_len: usize,
    path: *const c_char,
    path_len: usize,
    signal: *const sg_abort,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (s, pattern, path, out) =
            unsafe { search_args(sandbox, "glob", pattern, pattern_len, path, path_len, out)? };
        let never = std::sync::atomic::AtomicBool::new(false);
        // SAFETY: `signal` is NULL or a live abort signal (the caller's
        // contract).
        let cancel = match unsafe { abort_arg(signal) }
            .map_err(|e| refused_for_signal(s, "glob", path, e))?
        {
            Some(a) => &*a.cancel,
            None => &never,
        };
        let found = s.sandbox.glob_found_cancellable(pattern, path, cancel)?;
        let mut answer = json!({"paths": found.results});
        if found.unreadable > 0 {
            answer["unreadable"] = json!(found.unreadable);
        }
        put(out, json_bytes(with_cut(answer, found.cut)));
        Ok(())
    })
}

/// Lines matching the regular expression `pattern` in files below `path`
/// (NULL: the root), at most `max_results` (0: the default of 100; more
/// than 1,000 is `SG_E_REQUEST`), as
/// JSON: `[{"path","line","text"}]`, a line not answered whole carrying
/// `"line_truncated": true`, and `"text_start"`, the byte offset of `text`
/// in the line, when the line's first match ends past its first 1000
/// bytes (the text is then the 1000 bytes from shortly before the match).
///
/// # Return value
///
/// `SG_OK` with `*out` set to the matches as JSON, owned by the caller and
/// freed with `sg_bytes_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; strings point to their lengths in
/// bytes (`path` may be NULL); `out` is valid for writes; `err` is NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_grep(
    sandbox: *const sg_sandbox,
    pattern: *const c_char,
    pattern_len: usize,
    path: *const c_char,
    path_len: usize,
    max_results: u32,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (s, pattern, path, out) =
            unsafe { search_args(sandbox, "grep", pattern, pattern_len, path, path_len, out)? };
        let max = (max_results != 0).then_some(max_results as usize);
        let matches: Vec<_> = s
            .sandbox
            .grep(pattern, path, max)?
            .into_iter()
            .map(|m| {
                let mut o = json!({"path": m.path, "line": m.line, "text": m.text});
                if m.line_truncated() {
                    o["line_truncated"] = json!(true);
                }
                if m.text_start > 0 {
                    o["text_start"] = json!(m.text_start);
                }
                o
            })
            .collect();
        put(out, json_bytes(json!(matches)));
        Ok(())
    })
}

/// Reads grep options from a JSON object: `glob` (string),
/// `case_insensitive` (bool), `before` and `after` (context line counts),
/// `mode` (`"lines"`, `"files"` or `"count"`), `max_results` (count) and
/// `gitignore` (bool). Any other key, a key given twice, or a value of the
/// wrong type, is refused by name.
fn grep_options(json: Option<&str>) -> Result<facade::search::GrepOptions, Error> {
    let mut opts = facade::search::GrepOptions::default();
    let Some(json) = json.filter(|j| !j.trim().is_empty()) else {
        return Ok(opts);
    };
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| request(format!("options: not JSON ({e})")))?;
    let serde_json::Value::Object(map) = v else {
        return Err(request("options: must be a JSON object"));
    };
    // A JSON object would keep the last of a key given twice: refused, as
    // the JSON endpoint and `sg_fetcher_fetch` refuse it.
    if let Some(key) = facade::tool::duplicated_key(json) {
        return Err(request(format!(
            "options: the key `{}` is given twice",
            facade::policy::shown(&key)
        )));
    }
    let count = |k: &str, v: &serde_json::Value| {
        v.as_u64()
            .map(|n| n as usize)
            .ok_or_else(|| request(format!("options: `{k}` must be a whole number")))
    };
    let flag = |k: &str, v: &serde_json::Value| {
        v.as_bool()
            .ok_or_else(|| request(format!("options: `{k}` must be true or false")))
    };
    for (k, v) in &map {
        match k.as_str() {
            "glob" => {
                opts.glob = Some(
                    v.as_str()
                        .ok_or_else(|| request("options: `glob` must be a string"))?
                        .to_owned(),
                )
            }
            "case_insensitive" => opts.case_insensitive = flag(k, v)?,
            "before" => opts.before = count(k, v)?,
            "after" => opts.after = count(k, v)?,
            "max_results" => opts.max_results = Some(count(k, v)?),
            "gitignore" => opts.gitignore = flag(k, v)?,
            "mode" => {
                opts.mode = v
                    .as_str()
                    .ok_or_else(|| request("options: `mode` must be a string"))?
                    .parse()?
            }
            other => {
                return Err(request(format!(
                    "options: unknown key `{other}` (keys: glob, case_insensitive, before, after, mode, max_results, gitignore)"
                )))
            }
        }
    }
    if opts.mode != facade::search::GrepMode::Lines && (opts.before > 0 || opts.after > 0) {
        return Err(request(
            "options: `before` and `after` apply to mode `lines` only",
        ));
    }
    Ok(opts)
}

/// `sg_sandbox_grep` with the full set of options, given as a JSON object
/// in `options` (NULL or empty: the defaults): `glob` (only files whose
/// name, or path below `path` when the glob has a `/`, matches),
/// `case_insensitive`, `before`/`after` (context lines, mode `lines` only),
/// `mode` (`"lines"`, `"files"` or `"count"`), `max_results` (default 100,
/// from 1 to 1,000)
/// and `gitignore` (skip what `.gitignore`/`.ignore` files inside the root
/// exclude). Answers JSON by mode: `lines`,
/// `[{"path","line","text","before":[..],"after":[..]}]` (plus
/// `line_truncated: true` on a line not answered whole, `text_start` as
/// for `sg_sandbox_grep`, and `before_truncated`/`after_truncated`, the
/// indices of context lines cut at 1000 bytes, each only when there is
/// one); `files`, an array
/// of paths; `count`, `[{"path","count"}]`. An unknown key, a key given
/// twice or a value of the wrong type is refused with `SG_E_REQUEST`
/// naming it.
///
/// # Safety
///
/// `sandbox` is NULL or a live sandbox; strings point to their lengths in
/// bytes (`path` and `options` may be NULL); `out` is valid for writes;
/// `err` is NULL or valid for writes.
///
/// # Return value
///
/// `SG_OK` with the JSON in `*out`, or the error's status.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_grep_with(
    sandbox: *const sg_sandbox,
    pattern: *const c_char,
    pattern_len: usize,
    path: *const c_char,
    path_len: usize,
    options: *const c_char,
    options_len: usize,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (s, pattern, path, opts, out) = unsafe {
            grep_args(
                sandbox,
                (pattern, pattern_len),
                (path, path_len),
                (options, options_len),
                out,
            )?
        };
        let answer = grep_json(s.sandbox.grep_with(pattern, path, &opts)?);
        put(out, json_bytes(answer));
        Ok(())
    })
}

/// A grep's results as `sg_sandbox_grep_with` answers them: a line not
/// answered whole carries `line_truncated: true` (and `text_start` when its
/// text starts past byte 0), and `before_truncated` and `after_truncated`
/// list the indices of context lines cut at 1000 bytes, each only when
/// there is one (as the JSON endpoint answers them).
fn grep_json(found: facade::search::GrepOutput) -> serde_json::Value {
    match found {
        facade::search::GrepOutput::Lines(ms) => json!(ms
            .into_iter()
            .map(|m| {
                let mut o = json!({"path": m.path, "line": m.line, "text": m.text,
                                   "before": m.before, "after": m.after});
                if m.line_truncated() {
                    o["line_truncated"] = json!(true);
                }
                if m.text_start > 0 {
                    o["text_start"] = json!(m.text_start);
                }
                if !m.before_cut.is_empty() {
                    o["before_truncated"] = json!(m.before_cut);
                }
                if !m.after_cut.is_empty() {
                    o["after_truncated"] = json!(m.after_cut);
                }
                o
            })
            .collect::<Vec<_>>()),
        facade::search::GrepOutput::Files(files) => json!(files),
        facade::search::GrepOutput::Counts(counts) => json!(counts
            .into_iter()
            .map(|(path, count)| json!({"path": path, "count": count}))
            .collect::<Vec<_>>()),
    }
}

/// `sg_sandbox_grep_with` saying whether its answer was cut: a JSON object
/// holding the results under `matches`, `files` or `counts` by mode (each
/// as `sg_sandbox_grep_with` answers it), `truncated` (bool) and `limit`
/// (`"max_results"` when more matched than `max_results`, an answer of
/// exactly `max_results` being whole; `"walk_entries"` when the walk
/// stopped at its 200,000 entries; `"max_read_bytes"` when a file larger
/// than `max_read_bytes` was passed over without being searched;
/// `"path_length"` when a directory whose path is 4,096 bytes or longer
/// was not entered; `"answer_bytes"` when the matches and their context
/// lines, each with its path, reached `max_read_bytes`; null when whole), and `unreadable` (how many files
/// grep could not open or read to the end, subdirectories it could not
/// list and entries whose names are not UTF-8; absent when none) and `binary` (how many files grep passed
/// over unsearched as binary, a NUL in their first 8 KiB; absent when
/// none).
///
/// # Safety
///
/// As for `sg_sandbox_grep_with`.
///
/// # Return value
///
/// `SG_OK` with the JSON in `*out`, or the error's status.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_grep_found(
    sandbox: *const sg_sandbox,
    pattern: *const c_char,
    pattern_len: usize,
    path: *const c_char,
    path_len: usize,
    options: *const c_char,
    options_len: usize,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: the caller's contract, which is the cancellable form's with
    // no signal.
    unsafe {
        sg_sandbox_grep_found_cancellable(
            sandbox,
            pattern,
            pattern_len,
            path,
            path_len,
            options,
            options_len,
            std::ptr::null(),
            out,
            err,
        )
    }
}

/// `sg_sandbox_grep_found`, stopped with `SG_E_ABORTED` once `signal` is
/// triggered (`sg_abort_trigger`, from any thread): the walk looks at it
/// between entries, and the search every 4,096 lines of a file. A signal already
/// triggered refuses the call before it starts. `signal` NULL is
/// `sg_sandbox_grep_found`.
///
/// # Return value
///
/// `SG_OK` with the JSON in `*out`, or the error's status, as for
/// `sg_sandbox_grep_found`.
///
/// # Safety
///
/// As for `sg_sandbox_grep_found`; `signal` is NULL or a live abort
/// signal.
#[no_mangle]
pub unsafe extern "C" fn sg_sandbox_grep_found_cancellable(
    sandbox: *const sg_sandbox,
    pattern: *const c_char,
    pattern_len: usize,
    path: *const c_char,
    path_len: usize,
    options: *const c_char,
    options_len: usize,
    signal: *const sg_abort,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (s, pattern, path, mut opts, out) = unsafe {
            grep_args(
                sandbox,
                (pattern, pattern_len),
                (path, path_len),
                (options, options_len),
                out,
            )?
        };
        // SAFETY: `signal` is NULL or a live abort signal (the caller's
        // contract).
        opts.cancel = unsafe { abort_arg(signal) }
            .map_err(|e| refused_for_signal(s, "grep", path, e))?
            .map(|a| Arc::clone(&a.cancel));
        let found = s.sandbox.grep_found(pattern, path, &opts)?;
        let key = match opts.mode {
            facade::search::GrepMode::Files => "files",
            facade::search::GrepMode::Count => "counts",
            _ => "matches",
        };
        let mut answer = serde_json::Map::new();
        answer.insert(key.into(), grep_json(found.results));
        if found.unreadable > 0 {
            answer.insert("unreadable".into(), json!(found.unreadable));
        }
        if found.binary > 0 {
            answer.insert("binary".into(), json!(found.binary));
        }
        put(
            out,
            json_bytes(with_cut(serde_json::Value::Object(answer), found.cut)),
        );
        Ok(())
    })
}
