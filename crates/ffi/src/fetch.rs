//! `sg_fetcher_*`: the confined web fetch a policy grants (issue 7): the
//! network authorizer on the first request and every redirect hop, names
//! resolved by sandgate and every connection pinned to a checked address.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use facade::fetch::Fetcher;
use facade::AuditEvent;

use crate::error::*;
use crate::exec::sg_abort;
use crate::policy::sg_policy;
use crate::sandbox::{deliver, sg_audit_fn, UserData};

/// The fetcher a policy grants (its `[net]` section, `[budgets] net_ops`,
/// and a proxy set in the environment, which restricted mode refuses).
/// Thread-safe. Free with `sg_fetcher_free`.
pub struct sg_fetcher {
    fetcher: Fetcher,
}

/// The fetcher `policy` grants.
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new fetcher that the caller owns and frees
/// with `sg_fetcher_free`; otherwise the code of the refusal or failure
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
pub unsafe extern "C" fn sg_fetcher_new(
    policy: *const sg_policy,
    out: *mut *mut sg_fetcher,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (p, out) = unsafe { (handle(policy, "policy")?, out_ptr(out, "out")?) };
        let fetcher = facade::fetch::from_policy(&p.policy);
        put(out, into_handle(sg_fetcher { fetcher }));
        Ok(())
    })
}

/// Sets the fetcher's audit callback (NULL removes it). Every later
/// `sg_fetcher_fetch` call, refused ones included (a request that does not
/// parse, a URL that does not, a host the policy does not grant, a
/// redirect refused, the `net_ops` budget spent, a timeout), reports one
/// event: `op` `"fetch"`, `path` the origin (`scheme://host:port`) of
/// every hop taken, `" -> "` between them (the origin of the URL asked
/// for when no hop was taken; empty when it does not parse), `size` the
/// bytes of body returned, `outcome`. The URL's user, password, path and
/// query, the headers and the bodies are never part of an event. See
/// `sg_audit_fn`. Added in ABI 2.3.
///
/// # Return value
///
/// `SG_OK` on success, the callback replaced; otherwise the code of the
/// refusal or failure (`SG_E_REQUEST` for a NULL handle or a malformed
/// argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new error
/// object that the caller frees with `sg_error_free` (when `err` is not
/// NULL). `*err` is set to NULL on success.
///
/// # Safety
///
/// `fetcher` is NULL or a live fetcher; `callback` and `user_data` stay
/// valid until the callback is replaced or removed and no call that could
/// still report to it is in progress, or until the fetcher is freed;
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_fetcher_set_audit(
    fetcher: *const sg_fetcher,
    callback: sg_audit_fn,
    user_data: *mut c_void,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let f = unsafe { handle(fetcher, "fetcher")? };
        let user = UserData(user_data);
        f.fetcher.set_audit_sink(callback.map(|cb| {
            Arc::new(move |ev: &AuditEvent| {
                let user = user;
                deliver(cb, user, ev)
            }) as facade::AuditSink
        }));
        Ok(())
    })
}

/// Frees a fetcher. NULL is accepted.
///
/// # Return value
///
/// None.
///
/// # Safety
///
/// `fetcher` is NULL or a fetcher from this library, freed once, with no
/// call on it in progress.
#[no_mangle]
pub unsafe extern "C" fn sg_fetcher_free(fetcher: *mut sg_fetcher) {
    // SAFETY: forwarded contract.
    unsafe { free_handle(fetcher) }
}

/// Fetches a URL. `request` is a JSON object: `url`, and optionally
/// `method`, `headers` (an object of strings), `body` (text) or
/// `body_base64`, `timeout_ms`, `max_bytes`; unknown or duplicate keys are
/// `E_REQUEST`. `answer` receives JSON in the shape of `sandgate tool`'s
/// `fetch` op, whatever the outcome: `{"ok": true, "status", "headers",
/// "body" | "body_base64", "truncated", "hops"}` or `{"ok": false,
/// "error": {"code", "message", "rule"?, "hops"}}`. Returns `SG_OK` when a
/// response arrived (whatever its HTTP status), else the refusal's code
/// (`E_NET_DENIED` for a destination the policy refuses, at any hop).
///
/// # Return value
///
/// `SG_OK` when a response arrived, whatever its HTTP status; otherwise the
/// refusal's or failure's code, with `*err` set to a new error object that
/// the caller frees with `sg_error_free` (when `err` is not NULL). In both
/// cases `*answer` is set to the JSON answer, owned by the caller and freed
/// with `sg_bytes_free`; only when an argument is refused before the request
/// is read (a NULL handle or `answer`, a request that is not UTF-8) is
/// `*answer` left as it was, with `SG_E_REQUEST`.
///
/// # Safety
///
/// `fetcher` is NULL or a live fetcher; `request` points to `request_len`
/// bytes; `answer` is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_fetcher_fetch(
    fetcher: *const sg_fetcher,
    request: *const c_char,
    request_len: usize,
    answer: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: the caller's contract, which is the cancellable form's with
    // no signal.
    unsafe {
        sg_fetcher_fetch_cancellable(fetcher, request, request_len, std::ptr::null(), answer, err)
    }
}

/// `sg_fetcher_fetch`, ended once `signal` is triggered
/// (`sg_abort_trigger`, from any thread): a fetch waiting on the network
/// (name resolution, connect, TLS handshake, upload or download) stops
/// within about 50 ms, its connection closed, and answers `E_ABORTED`.
/// A signal already triggered when the call is made answers `E_ABORTED`
/// at once, spending no `net_ops` budget. `signal` NULL is
/// `sg_fetcher_fetch` (a cancellable fetch runs its connect and name
/// resolution on helper threads, so NULL is the cheaper form).
///
/// # Return value
///
/// As for `sg_fetcher_fetch`: `*answer` is set to the JSON answer whatever
/// the outcome (an abort's answer included), except when an argument is
/// refused before the request is read.
///
/// # Safety
///
/// As for `sg_fetcher_fetch`; `signal` is NULL or a live abort signal.
#[no_mangle]
pub unsafe extern "C" fn sg_fetcher_fetch_cancellable(
    fetcher: *const sg_fetcher,
    request: *const c_char,
    request_len: usize,
    signal: *const sg_abort,
    answer: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let f = unsafe { handle(fetcher, "fetcher")? };
        // A request refused here (not UTF-8, NULL with a length) is
        // reported as one the fetcher's reader refuses, by the origin of a
        // `url` it could read: every fetch call, refused ones included,
        // leaves a record. An out-pointer is the host's own: one that is
        // NULL is refused after, with no record.
        let (given, given_len) = (request, request_len);
        // SAFETY: the caller's contract.
        let request = unsafe { arg_str(given, given_len, "request") }.inspect_err(|e| {
            // SAFETY: the caller's contract.
            let text = unsafe { arg_bytes(given.cast(), given_len, "request") }
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let url = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("url")?.as_str().map(str::to_owned));
            f.fetcher.audit_refusal(url.as_deref(), e.code());
        })?;
        // SAFETY: the caller's contract.
        let answer = unsafe { out_ptr(answer, "answer")? };
        // SAFETY: `signal` is NULL or a live abort signal (the caller's
        // contract). A triggered one is handed to the fetcher, which
        // answers it (and audits it) as every other abort.
        let cancel = unsafe { signal.as_ref() }
            .map(|a| facade::fetch::CancelFlag::from_arc(Arc::clone(&a.cancel)));
        let (value, refusal) = facade::tool::fetch_json_cancellable(&f.fetcher, request, cancel);
        put(answer, sg_bytes::from_vec(value.to_string().into_bytes()));
        refusal.map_or(Ok(()), Err)
    })
}
