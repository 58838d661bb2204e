//! `sg_policy_*`: the policy file (docs/reference/policy.md).

use std::ffi::c_char;
use std::net::IpAddr;
use std::path::Path;

use facade::policy::{Policy, PolicyError, PolicyOptions};
use facade::{Error, ErrorCode};

use crate::error::*;

/// A loaded, checked policy. Immutable and thread-safe. Free with
/// `sg_policy_free`.
pub struct sg_policy {
    pub(crate) policy: Policy,
}

fn policy_error(e: PolicyError) -> Error {
    Error::from(e)
}

/// Loads and checks the policy file at `path` (`E_POLICY` naming the
/// offending key when it is refused). Relative roots resolve against the
/// file's directory.
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new policy that the caller owns and frees
/// with `sg_policy_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `path` points to `path_len` bytes; `out` is valid for writes; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_policy_load(
    path: *const c_char,
    path_len: usize,
    out: *mut *mut sg_policy,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (path, out) = unsafe { (arg_str(path, path_len, "path")?, out_ptr(out, "out")?) };
        let policy = Policy::load(path).map_err(policy_error)?;
        put(out, into_handle(sg_policy { policy }));
        Ok(())
    })
}

/// Checks a policy from its bytes, as if read from a file in `base_dir`
/// (relative roots resolve against it, and the write root may not contain
/// it). The digest is taken over exactly these bytes.
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new policy that the caller owns and frees
/// with `sg_policy_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `text` and `base_dir` point to their lengths in bytes; `out` is valid
/// for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_policy_parse(
    text: *const u8,
    text_len: usize,
    base_dir: *const c_char,
    base_dir_len: usize,
    out: *mut *mut sg_policy,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (text, base, out) = unsafe {
            (
                arg_bytes(text, text_len, "text")?,
                arg_str(base_dir, base_dir_len, "base_dir")?,
                out_ptr(out, "out")?,
            )
        };
        let policy = Policy::from_bytes(text, Path::new(base), None).map_err(policy_error)?;
        put(out, into_handle(sg_policy { policy }));
        Ok(())
    })
}

/// Checks a policy stated as options rather than a file: a JSON object
/// whose keys are the policy file's key names without their section
/// (`{"write_root":"work","enabled":true,"timeout_ms":5000}`; a whole
/// section as a nested object is accepted too). The options take the
/// file's defaults and go through the same gate rules; a refusal
/// (`E_POLICY`) names the dotted key. Relative roots resolve against
/// `base_dir`; no directory is kept out of the write root, since there is
/// no policy file to protect. The digest is taken over the policy text the
/// options stand for.
///
/// # Safety
///
/// `options_json` and `base_dir` point to their lengths in bytes; `out` is
/// valid for writes; `err` is NULL or valid for writes.
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new policy (free it with
/// `sg_policy_free`); `SG_E_POLICY` for refused options (empty text, NULL
/// with length 0 included, is not a JSON object, and an empty `base_dir`
/// cannot be resolved); `SG_E_REQUEST` for a NULL pointer with a length, a
/// NULL `out` or an argument that is not UTF-8. On every code but `SG_OK`,
/// `*err` is set to a new error object (when `err` is not NULL) and `*out`
/// is left as it was.
#[no_mangle]
pub unsafe extern "C" fn sg_policy_from_options(
    options_json: *const c_char,
    options_json_len: usize,
    base_dir: *const c_char,
    base_dir_len: usize,
    out: *mut *mut sg_policy,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (json, base, out) = unsafe {
            (
                arg_str(options_json, options_json_len, "options_json")?,
                arg_str(base_dir, base_dir_len, "base_dir")?,
                out_ptr(out, "out")?,
            )
        };
        let options = PolicyOptions::from_flat_json(json).map_err(policy_error)?;
        let policy = Policy::from_options(&options, Path::new(base)).map_err(policy_error)?;
        put(out, into_handle(sg_policy { policy }));
        Ok(())
    })
}

/// Frees a policy. Sandboxes and executors made from it keep working.
/// NULL is accepted.
///
/// # Return value
///
/// None.
///
/// # Safety
///
/// `policy` is NULL or a policy from this library, freed once, with no
/// call on it in progress (what was made from it does not need it).
#[no_mangle]
pub unsafe extern "C" fn sg_policy_free(policy: *mut sg_policy) {
    // SAFETY: forwarded contract.
    unsafe { free_handle(policy) }
}

/// The policy's digest, `"sha256:<64 hex digits>"` of the file's bytes.
///
/// # Return value
///
/// `SG_OK` with `*out` set to the digest text, owned by the caller and freed
/// with `sg_bytes_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `policy` is NULL or a live policy; `out` is valid for writes; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_policy_digest(
    policy: *const sg_policy,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (p, out) = unsafe { (handle(policy, "policy")?, out_ptr(out, "out")?) };
        put(
            out,
            sg_bytes::from_vec(p.policy.digest().as_bytes().to_vec()),
        );
        Ok(())
    })
}

/// What the policy grants, as JSON (`mode`, `read_roots`, `write_root`,
/// `deny_write`, `limits`, `exec`, `net`, `budgets`, `digest`) when `text`
/// is false, or as text for people when it is true.
///
/// # Return value
///
/// `SG_OK` with `*out` set to the summary as JSON, owned by the caller and
/// freed with `sg_bytes_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `policy` is NULL or a live policy; `out` is valid for writes; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_policy_summary(
    policy: *const sg_policy,
    text: bool,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (p, out) = unsafe { (handle(policy, "policy")?, out_ptr(out, "out")?) };
        let s = p.policy.summary();
        let rendered = if text { s.to_string() } else { s.to_json() };
        put(out, sg_bytes::from_vec(rendered.into_bytes()));
        Ok(())
    })
}

/// Asks the network authorizer (docs/reference/policy.md) whether `scheme://host:port` may
/// be dialled. `port` < 0 means the scheme's default; `ip` (NULL for none)
/// is the address about to be dialled; `redirect` applies the stricter
/// redirect-hop rules. Returns `SG_OK` when allowed, else `SG_E_NET_DENIED`
/// whose message says which rule refused it. `decision` (may be NULL)
/// receives the decision as JSON: `{"allowed", "reason", "rule"}`.
///
/// # Return value
///
/// `SG_OK` when the destination is allowed and `SG_E_NET_DENIED` when it is
/// refused; in both cases `*decision` (when `decision` is not NULL) is set to
/// the decision as JSON, owned by the caller and freed with `sg_bytes_free`.
/// `SG_E_REQUEST` for a NULL handle or a malformed argument, with `*decision`
/// left as it was. On every code but `SG_OK`, `*err` is set to a new error
/// object that the caller frees with `sg_error_free` (when `err` is not
/// NULL).
///
/// # Safety
///
/// `policy` is NULL or a live policy; strings point to their lengths in
/// bytes; `decision` is NULL or valid for writes; `err` is NULL or valid
/// for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_policy_authorize(
    policy: *const sg_policy,
    scheme: *const c_char,
    scheme_len: usize,
    host: *const c_char,
    host_len: usize,
    port: i32,
    ip: *const c_char,
    ip_len: usize,
    redirect: bool,
    decision: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (p, scheme, host, ip) = unsafe {
            (
                handle(policy, "policy")?,
                arg_str(scheme, scheme_len, "scheme")?,
                arg_str(host, host_len, "host")?,
                arg_opt_str(ip, ip_len, "ip")?,
            )
        };
        let port = match port {
            p if p < 0 => None,
            p => Some(u16::try_from(p).map_err(|_| request(format!("port {p} is over 65535")))?),
        };
        let ip = match ip {
            None => None,
            Some(s) => Some(
                s.parse::<IpAddr>()
                    .map_err(|_| request(format!("ip `{s}` is not an IP address")))?,
            ),
        };
        let d = if redirect {
            p.policy.authorize_redirect(scheme, host, port, ip)
        } else {
            p.policy.authorize(scheme, host, port, ip)
        };
        if !decision.is_null() {
            let json =
                serde_json::json!({"allowed": d.allowed, "reason": d.reason, "rule": d.rule});
            // SAFETY: checked non-NULL; the caller's contract makes it writable.
            put(
                unsafe { &mut *decision },
                sg_bytes::from_vec(json.to_string().into_bytes()),
            );
        }
        if d.allowed {
            Ok(())
        } else {
            Err(Error::new(ErrorCode::NetDenied, d.reason))
        }
    })
}
