//! `sg_executor_*` and `sg_abort_*`: the shell executor a policy grants
//! (docs/reference/executor.md).

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use facade::shellexec::exec::AbortSignal;
use facade::{AuditEvent, ExecOptions, Executor};

use crate::error::*;
use crate::policy::sg_policy;
use crate::sandbox::{deliver, sg_audit_fn, shown, UserData};

/// The executor a policy grants. Thread-safe: `sg_executor_exec` may run
/// on several threads at once. Free with `sg_executor_free`.
pub struct sg_executor {
    executor: Executor,
}

/// An abort signal: trigger it from any thread to end the commands it was
/// passed to (they answer exit code 130) and the ranged reads, greps, globs
/// and fetches it was passed to (`SG_E_ABORTED`). Free with `sg_abort_free`.
pub struct sg_abort {
    signal: AbortSignal,
    /// Set with `signal`: the flag a ranged read, grep, glob or fetch
    /// looks at (shared, since a grep and a fetch keep their own handle).
    pub(crate) cancel: Arc<std::sync::atomic::AtomicBool>,
}

/// The abort signal a cancellable call was given: `None` for NULL, and
/// `SG_E_ABORTED` when it is already triggered, so that the call neither
/// starts nor spends a budget.
///
/// # Safety
///
/// `signal` is NULL or a live abort signal.
pub(crate) unsafe fn abort_arg<'a>(
    signal: *const sg_abort,
) -> Result<Option<&'a sg_abort>, facade::Error> {
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { signal.as_ref() }) else {
        return Ok(None);
    };
    if a.cancel.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(facade::Error::new(
            facade::ErrorCode::Aborted,
            "the abort signal was triggered before the call started",
        ));
    }
    Ok(Some(a))
}

/// What one command did. Free its buffers with `sg_exec_result_free`.
#[repr(C)]
pub struct sg_exec_result {
    /// The shell's exit code (`128 + n` for signal `n`); 124 on timeout,
    /// 130 on abort, 127 when the shell could not start.
    pub exit_code: i32,
    /// Output was dropped past the policy's `max_output_bytes`.
    pub truncated: bool,
    /// The timeout ended the command.
    pub timed_out: bool,
    /// An abort ended the command.
    pub aborted: bool,
    /// Wall-clock time in milliseconds.
    pub duration_ms: u64,
    /// Standard output, redacted.
    pub stdout_bytes: sg_bytes,
    /// Standard error, redacted.
    pub stderr_bytes: sg_bytes,
    /// The confinement in force, as JSON.
    pub confinement_json: sg_bytes,
    /// sha256 of the sorted names of the child's environment.
    pub env_names_digest: sg_bytes,
    /// The limit that ended the command, when known: `memory`, `tasks`,
    /// `cpu`, `output`, `timeout` or `file_size` (ASCII); empty otherwise.
    pub limit: sg_bytes,
    /// What the command did to protected paths and what was done about
    /// it, as a JSON array of `{"path", "pattern", "action"}` (`action`:
    /// `restored`, `quarantined` or `reported`); `[]` when nothing.
    pub protected_changes_json: sg_bytes,
}

/// The executor `policy` grants (not started). With `exec.enabled = false`
/// and no `process_allow`, every command is refused with `E_DENIED`.
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new executor (not started) that the caller
/// owns and frees with `sg_executor_free`; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL) and the outputs
/// left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `policy` is NULL or a live policy; `out` is valid for writes; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_executor_new(
    policy: *const sg_policy,
    out: *mut *mut sg_executor,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (p, out) = unsafe { (handle(policy, "policy")?, out_ptr(out, "out")?) };
        let executor = Executor::from_policy(&p.policy)?;
        put(out, into_handle(sg_executor { executor }));
        Ok(())
    })
}

/// Sets the executor's audit callback (NULL removes it). Every later
/// `sg_executor_exec` call, refused ones included, reports one event: `op`
/// `"exec"`, `path` the working directory as asked (empty for the root),
/// `size` the bytes of output returned, `outcome`, the exit code when the
/// command ran and the limit that stopped it, if any. The command's text
/// and output are never part of an event. See `sg_audit_fn`. Added in ABI
/// 2.1.
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
/// `executor` is NULL or a live executor; `callback` and `user_data` stay
/// valid until the callback is replaced or removed and no call that could
/// still report to it is in progress, or until the executor is freed;
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_executor_set_audit(
    executor: *const sg_executor,
    callback: sg_audit_fn,
    user_data: *mut c_void,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(executor, "executor")? };
        let user = UserData(user_data);
        e.executor.set_audit_sink(callback.map(|cb| {
            Arc::new(move |ev: &AuditEvent| {
                let user = user;
                deliver(cb, user, ev)
            }) as facade::AuditSink
        }));
        Ok(())
    })
}

/// Disposes of the executor (removing its private temporary directory) and
/// frees it. NULL is accepted.
///
/// # Return value
///
/// None.
///
/// # Safety
///
/// `executor` is NULL or an executor from this library, freed once, with
/// no call on it in progress.
#[no_mangle]
pub unsafe extern "C" fn sg_executor_free(executor: *mut sg_executor) {
    if let Some(e) = {
        // SAFETY: forwarded contract.
        unsafe { executor.as_ref() }
    } {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.executor.dispose()));
    }
    // SAFETY: forwarded contract.
    unsafe { free_handle(executor) }
}

/// Starts the executor (a command also starts it on first use): creates
/// its private temporary directory and prepares confinement (`E_CONFINE_UNAVAILABLE` with `confine =
/// "required"` on a kernel that lacks a part). Starting twice does nothing.
///
/// # Return value
///
/// `SG_OK` on success (also when it was already started); otherwise the code
/// of the refusal or failure (`SG_E_REQUEST` for a NULL handle or a malformed
/// argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new error
/// object that the caller frees with `sg_error_free` (when `err` is not
/// NULL). `*err` is set to NULL on success.
///
/// # Safety
///
/// `executor` is NULL or a live executor; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_executor_start(
    executor: *const sg_executor,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        unsafe { handle(executor, "executor")? }.executor.start()
    })
}

/// Ends the session: ends running commands and removes the private
/// temporary directory. A later command starts a new session.
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
/// `executor` is NULL or a live executor; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_executor_dispose(
    executor: *const sg_executor,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        unsafe { handle(executor, "executor")? }.executor.dispose();
        Ok(())
    })
}

/// Runs `command` with the policy's shell, in `cwd` (a name beneath the
/// write root, or the first read root; NULL: that root), for at most
/// `timeout_ms` (0: the policy's `timeout_ms`, which also caps it), ended
/// early by `signal` (may be NULL). A command that ran answers `SG_OK`,
/// whatever its exit code; refusals before anything runs answer their code.
///
/// # Return value
///
/// `SG_OK` whenever the command was started or the shell reported it could
/// not run it (exit codes 124, 127 and 130 included), with `*out` filled; its
/// buffers are owned by the caller and freed with `sg_exec_result_free`;
/// otherwise the code of the refusal or failure (`SG_E_REQUEST` for a NULL
/// handle or a malformed argument, `SG_E_INTERNAL` for a bug), with `*err`
/// set to a new error object that the caller frees with `sg_error_free` (when
/// `err` is not NULL) and the outputs left as they were. `*err` is set to
/// NULL on success.
///
/// # Safety
///
/// `executor` is NULL or a live executor; strings point to their lengths in
/// bytes (`cwd` may be NULL); `signal` is NULL or a live abort signal; `out`
/// is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_executor_exec(
    executor: *const sg_executor,
    command: *const c_char,
    command_len: usize,
    cwd: *const c_char,
    cwd_len: usize,
    timeout_ms: u64,
    signal: *const sg_abort,
    out: *mut sg_exec_result,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let e = unsafe { handle(executor, "executor")? };
        // The agent's text refused here (not UTF-8, NULL with a length) is
        // reported as the executor reports its own refusals: every call,
        // refused ones included, leaves a record. An out-pointer is the
        // host's own: one that is NULL is refused after, with no record.
        // SAFETY: the caller's contract.
        let (command, cwd) = unsafe {
            (|| {
                Ok((
                    arg_str(command, command_len, "command")?,
                    arg_opt_str(cwd, cwd_len, "cwd")?,
                ))
            })()
            .map_err(|err| e.executor.audit_refusal(&shown(cwd, cwd_len), err))?
        };
        // SAFETY: the caller's contract.
        let (abort, out) = unsafe { (signal.as_ref(), out_ptr(out, "out")?) };
        let r = e.executor.exec(
            command,
            ExecOptions {
                cwd: cwd.map(str::to_owned),
                timeout_ms: (timeout_ms != 0).then_some(timeout_ms),
                abort: abort.map(|a| a.signal.clone()),
                ..Default::default()
            },
        )?;
        let confinement = serde_json::to_vec(&r.confined).unwrap_or_default();
        let protected = serde_json::to_vec(&r.protected_changes).unwrap_or_default();
        put(
            out,
            sg_exec_result {
                exit_code: r.exit_code,
                truncated: r.truncated,
                timed_out: r.timed_out,
                aborted: r.aborted,
                duration_ms: u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX),
                stdout_bytes: sg_bytes::from_vec(r.stdout),
                stderr_bytes: sg_bytes::from_vec(r.stderr),
                confinement_json: sg_bytes::from_vec(confinement),
                env_names_digest: sg_bytes::from_vec(r.env_names_digest.into_bytes()),
                limit: sg_bytes::from_vec(
                    r.limit
                        .map(|l| l.as_str().as_bytes().to_vec())
                        .unwrap_or_default(),
                ),
                protected_changes_json: sg_bytes::from_vec(protected),
            },
        );
        Ok(())
    })
}

/// Frees the buffers of a result filled by `sg_executor_exec` (not the
/// struct itself, which the caller owns) and empties them. NULL is
/// accepted.
///
/// # Return value
///
/// None. NULL is accepted; the result's buffers are left empty.
///
/// # Safety
///
/// `result` is NULL or a result filled by this library (or zeroed).
#[no_mangle]
pub unsafe extern "C" fn sg_exec_result_free(result: *mut sg_exec_result) {
    // SAFETY: forwarded contract.
    if let Some(r) = unsafe { result.as_mut() } {
        // SAFETY: each field is an sg_bytes from this library or empty.
        unsafe {
            sg_bytes_free(&mut r.stdout_bytes);
            sg_bytes_free(&mut r.stderr_bytes);
            sg_bytes_free(&mut r.confinement_json);
            sg_bytes_free(&mut r.env_names_digest);
            sg_bytes_free(&mut r.limit);
            sg_bytes_free(&mut r.protected_changes_json);
        }
    }
}

/// A new, untriggered abort signal.
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new abort signal that the caller owns and
/// frees with `sg_abort_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `out` is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_abort_new(
    out: *mut *mut sg_abort,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let out = unsafe { out_ptr(out, "out")? };
        // Its eventfd takes a descriptor: out of them, the call fails
        // naming the shortage (it panicked, answered as E_INTERNAL).
        let signal = AbortSignal::try_new().map_err(|e| {
            facade::Error::new(
                facade::ErrorCode::Io,
                format!("cannot make the abort signal: {e}"),
            )
        })?;
        put(
            out,
            into_handle(sg_abort {
                signal,
                cancel: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            }),
        );
        Ok(())
    })
}

/// Triggers the signal: every command running with it ends (exit code
/// 130), and later commands given it end at once; so do ranged reads,
/// greps, globs and fetches (`SG_E_ABORTED`; one given an already
/// triggered signal does not start and spends no budget). Idempotent.
///
/// # Return value
///
/// `SG_OK` on success (also when it was already triggered); otherwise the
/// code of the refusal or failure (`SG_E_REQUEST` for a NULL handle or a
/// malformed argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new
/// error object that the caller frees with `sg_error_free` (when `err` is not
/// NULL). `*err` is set to NULL on success.
///
/// # Safety
///
/// `signal` is NULL or a live abort signal; `err` is NULL or valid for
/// writes.
#[no_mangle]
pub unsafe extern "C" fn sg_abort_trigger(
    signal: *const sg_abort,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(signal, "signal")? };
        a.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
        a.signal.abort();
        Ok(())
    })
}

/// Whether the signal was triggered (false for NULL).
///
/// # Return value
///
/// Whether the signal was triggered; false for NULL.
///
/// # Safety
///
/// `signal` is NULL or a live abort signal.
#[no_mangle]
pub unsafe extern "C" fn sg_abort_is_triggered(signal: *const sg_abort) -> bool {
    // SAFETY: the caller's contract.
    unsafe { signal.as_ref() }.is_some_and(|a| a.signal.is_aborted())
}

/// Frees an abort signal. NULL is accepted.
///
/// # Return value
///
/// None.
///
/// # Safety
///
/// `signal` is NULL or an abort signal from this library, freed once, and
/// not passed to a call still in progress on another thread (a command, a
/// ranged read, a grep, a glob or a fetch: some of them read it until they
/// return).
#[no_mangle]
pub unsafe extern "C" fn sg_abort_free(signal: *mut sg_abort) {
    // SAFETY: forwarded contract.
    unsafe { free_handle(signal) }
}
