//! The C ABI's sandbox calls are audited as the Rust API's are, a call
//! refused at the boundary included: an agent's path that is not UTF-8
//! reaches the audit callback, as a path holding a NUL byte (which the
//! boundary passes on) does through both. The first spends no budget, as
//! no request refused as malformed before the sandbox sees it does.
//!
//! The shared library is loaded with `dlopen`, as a C host loads it.

use std::ffi::{c_char, c_void, CString};
use std::sync::Mutex;

use facade::ErrorCode;

#[path = "support/cabi.rs"]
mod cabi;
#[path = "support/library.rs"]
mod library;

use cabi::{sym, AuditEvent, AuditFn, Status};

/// What the callback heard: op, path, outcome.
static HEARD: Mutex<Vec<(String, String, Status)>> = Mutex::new(Vec::new());

unsafe extern "C" fn on_audit(_user: *mut c_void, e: *const AuditEvent) {
    // SAFETY: the library passes a valid event for the call's duration.
    let e = unsafe { &*e };
    // SAFETY: `op` is NUL-terminated, `path` is `path_len` bytes.
    let (op, path) = unsafe {
        (
            std::ffi::CStr::from_ptr(e.op)
                .to_string_lossy()
                .into_owned(),
            std::slice::from_raw_parts(e.path.cast::<u8>(), e.path_len),
        )
    };
    let path = std::str::from_utf8(path)
        .expect("an audit event's path is UTF-8")
        .to_owned();
    HEARD.lock().unwrap().push((op, path, e.outcome));
}

#[test]
fn audit20_a_path_refused_at_the_boundary_is_audited_without_spending_the_budget() {
    let lib_path = CString::new(library::library().to_str().unwrap()).unwrap();
    // SAFETY: loading the library under test.
    let lib = unsafe { libc::dlopen(lib_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "cannot load {lib_path:?}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "content").unwrap();
    let root = dir.path().to_str().unwrap();
    type Opts = *mut c_void;
    type Err = *mut *mut c_void;
    // SAFETY: the signatures of include/sandgate.h.
    unsafe {
        let options_new: unsafe extern "C" fn() -> Opts = sym(lib, "sg_sandbox_options_new");
        let add_read_root: unsafe extern "C" fn(Opts, *const c_char, usize, Err) -> Status =
            sym(lib, "sg_sandbox_options_add_read_root");
        let set_budget: unsafe extern "C" fn(Opts, u64, Err) -> Status =
            sym(lib, "sg_sandbox_options_set_fs_ops_budget");
        let set_audit: unsafe extern "C" fn(Opts, Option<AuditFn>, *mut c_void, Err) -> Status =
            sym(lib, "sg_sandbox_options_set_audit");
        let options_free: unsafe extern "C" fn(Opts) = sym(lib, "sg_sandbox_options_free");
        let sandbox_new: unsafe extern "C" fn(Opts, *mut *mut c_void, Err) -> Status =
            sym(lib, "sg_sandbox_new");
        let sandbox_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_sandbox_free");
        let read: unsafe extern "C" fn(
            *mut c_void,
            *const u8,
            usize,
            *mut [usize; 2],
            Err,
        ) -> Status = sym(lib, "sg_sandbox_read");
        let rename: unsafe extern "C" fn(
            *mut c_void,
            *const u8,
            usize,
            *const u8,
            usize,
            Err,
        ) -> Status = sym(lib, "sg_sandbox_rename");
        let bytes_free: unsafe extern "C" fn(*mut [usize; 2]) = sym(lib, "sg_bytes_free");
        let stat: unsafe extern "C" fn(*mut c_void, *const u8, usize, *mut c_void, Err) -> Status =
            sym(lib, "sg_sandbox_stat");

        let o = options_new();
        let null = std::ptr::null_mut();
        assert_eq!(add_read_root(o, root.as_ptr().cast(), root.len(), null), 0);
        assert_eq!(set_budget(o, 2, null), 0);
        assert_eq!(set_audit(o, Some(on_audit), std::ptr::null_mut(), null), 0);
        let mut sb = std::ptr::null_mut();
        assert_eq!(sandbox_new(o, &mut sb, null), 0);
        options_free(o);

        let mut out = [0usize; 2];
        // Not UTF-8: refused at the boundary.
        let bad = b"a\xffb";
        let st = read(sb, bad.as_ptr(), bad.len(), &mut out, null);
        assert_eq!(st, ErrorCode::Request.value());
        // A NUL byte: passed on, refused by the sandbox.
        let nul = b"a\0b";
        let st = read(sb, nul.as_ptr(), nul.len(), &mut out, null);
        assert_eq!(st, ErrorCode::PathInvalid.value());
        // A rename whose source is not UTF-8.
        let st = rename(sb, bad.as_ptr(), bad.len(), b"c".as_ptr(), 1, null);
        assert_eq!(st, ErrorCode::Request.value());
        // A NULL out-pointer is the host's own bug, not an agent's bytes:
        // refused with no record and nothing spent.
        let st = stat(sb, b"a".as_ptr(), 1, std::ptr::null_mut(), null);
        assert_eq!(st, ErrorCode::Request.value());
        // Only the NUL read reached the sandbox and spent: one of two is
        // left.
        let st = read(sb, b"a".as_ptr(), 1, &mut out, null);
        assert_eq!(st, 0, "a refusal at the boundary spent the budget");
        bytes_free(&mut out);
        let st = read(sb, b"a".as_ptr(), 1, &mut out, null);
        sandbox_free(sb);
        let heard = HEARD.lock().unwrap().clone();
        assert_eq!(
            heard,
            [
                (
                    "read".into(),
                    "a\u{fffd}b".into(),
                    ErrorCode::Request.value()
                ),
                ("read".into(), "a\0b".into(), ErrorCode::PathInvalid.value()),
                (
                    "rename".into(),
                    "a\u{fffd}b -> c".into(),
                    ErrorCode::Request.value()
                ),
                ("read".into(), "a".into(), ErrorCode::Ok.value()),
                ("read".into(), "a".into(), ErrorCode::Denied.value()),
            ],
            "a call refused at the boundary is audited as the sandbox audits its own"
        );
        assert_eq!(st, ErrorCode::Denied.value(), "the budget was not spent");
    }
}

/// What one callback heard (op, path, outcome), kept where its user data
/// points, so that tests running at once do not mix their records.
type Heard = Mutex<Vec<(String, String, Status)>>;

unsafe extern "C" fn on_audit_into(user: *mut c_void, e: *const AuditEvent) {
    // SAFETY: the library passes a valid event for the call's duration.
    let e = unsafe { &*e };
    // SAFETY: `op` is NUL-terminated, `path` is `path_len` bytes.
    let (op, path) = unsafe {
        (
            std::ffi::CStr::from_ptr(e.op)
                .to_string_lossy()
                .into_owned(),
            std::slice::from_raw_parts(e.path.cast::<u8>(), e.path_len),
        )
    };
    let path = std::str::from_utf8(path)
        .expect("an audit event's path is UTF-8")
        .to_owned();
    // SAFETY: `user` is the test's `Heard`, alive for the whole test.
    let heard = unsafe { &*user.cast::<Heard>() };
    heard.lock().unwrap().push((op, path, e.outcome));
}

/// The library, loaded, and a policy parsed from `text` in `dir`.
unsafe fn policy(text: &str, dir: &std::path::Path) -> (*mut c_void, *mut c_void) {
    let lib_path = CString::new(library::library().to_str().unwrap()).unwrap();
    // SAFETY: loading the library under test.
    let lib = unsafe { libc::dlopen(lib_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "cannot load {lib_path:?}");
    let dir = dir.to_str().unwrap();
    // SAFETY: the signature of include/sandgate.h.
    unsafe {
        let parse: unsafe extern "C" fn(
            *const u8,
            usize,
            *const u8,
            usize,
            *mut *mut c_void,
            *mut *mut c_void,
        ) -> Status = sym(lib, "sg_policy_parse");
        let mut p = std::ptr::null_mut();
        let st = parse(
            text.as_ptr(),
            text.len(),
            dir.as_ptr(),
            dir.len(),
            &mut p,
            std::ptr::null_mut(),
        );
        assert_eq!(st, 0, "the policy does not parse");
        (lib, p)
    }
}

#[test]
fn cabi22_an_exec_refused_at_the_boundary_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let heard: Heard = Mutex::new(Vec::new());
    let user = std::ptr::from_ref(&heard).cast_mut().cast::<c_void>();
    type Err = *mut *mut c_void;
    // SAFETY: the signatures of include/sandgate.h.
    unsafe {
        let (lib, p) = policy("[fs]\nread_roots = [\"ws\"]\n", dir.path());
        let executor_new: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, Err) -> Status =
            sym(lib, "sg_executor_new");
        let set_audit: unsafe extern "C" fn(
            *mut c_void,
            Option<AuditFn>,
            *mut c_void,
            Err,
        ) -> Status = sym(lib, "sg_executor_set_audit");
        let exec: unsafe extern "C" fn(
            *mut c_void,
            *const u8,
            usize,
            *const u8,
            usize,
            u64,
            *mut c_void,
            *mut [u64; 32],
            Err,
        ) -> Status = sym(lib, "sg_executor_exec");
        let executor_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_executor_free");
        let policy_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_policy_free");
        let null: Err = std::ptr::null_mut();
        let mut ex: *mut c_void = std::ptr::null_mut();
        assert_eq!(executor_new(p, &mut ex, null), 0);
        assert_eq!(set_audit(ex, Some(on_audit_into), user, null), 0);
        let mut out = [0u64; 32];
        let bad = b"tru\xffe";
        // A command that is not UTF-8.
        let st = exec(
            ex,
            bad.as_ptr(),
            bad.len(),
            null.cast(),
            0,
            0,
            std::ptr::null_mut(),
            &mut out,
            null,
        );
        assert_eq!(st, ErrorCode::Request.value());
        // A working directory that is not UTF-8.
        let st = exec(
            ex,
            b"true".as_ptr(),
            4,
            bad.as_ptr(),
            bad.len(),
            0,
            std::ptr::null_mut(),
            &mut out,
            null,
        );
        assert_eq!(st, ErrorCode::Request.value());
        // A NULL command with a length.
        let st = exec(
            ex,
            std::ptr::null(),
            3,
            b"sub".as_ptr(),
            3,
            0,
            std::ptr::null_mut(),
            &mut out,
            null,
        );
        assert_eq!(st, ErrorCode::Request.value());
        // The executor's own refusal (exec is not enabled), for comparison.
        let st = exec(
            ex,
            b"true".as_ptr(),
            4,
            null.cast(),
            0,
            0,
            std::ptr::null_mut(),
            &mut out,
            null,
        );
        assert_eq!(st, ErrorCode::Denied.value());
        executor_free(ex);
        policy_free(p);
    }
    let heard = heard.into_inner().unwrap();
    assert_eq!(
        heard,
        [
            ("exec".into(), "".into(), ErrorCode::Request.value()),
            (
                "exec".into(),
                "tru\u{fffd}e".into(),
                ErrorCode::Request.value()
            ),
            ("exec".into(), "sub".into(), ErrorCode::Request.value()),
            ("exec".into(), "".into(), ErrorCode::Denied.value()),
        ],
        "every exec call, refused ones included, reports one event"
    );
}

#[test]
fn cabi22_a_fetch_refused_at_the_boundary_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let heard: Heard = Mutex::new(Vec::new());
    let user = std::ptr::from_ref(&heard).cast_mut().cast::<c_void>();
    type Err = *mut *mut c_void;
    // SAFETY: the signatures of include/sandgate.h.
    unsafe {
        let (lib, p) = policy("[fs]\nread_roots = [\"ws\"]\n", dir.path());
        let fetcher_new: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, Err) -> Status =
            sym(lib, "sg_fetcher_new");
        let set_audit: unsafe extern "C" fn(
            *mut c_void,
            Option<AuditFn>,
            *mut c_void,
            Err,
        ) -> Status = sym(lib, "sg_fetcher_set_audit");
        let fetch: unsafe extern "C" fn(
            *mut c_void,
            *const u8,
            usize,
            *mut [usize; 2],
            Err,
        ) -> Status = sym(lib, "sg_fetcher_fetch");
        let fetcher_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_fetcher_free");
        let bytes_free: unsafe extern "C" fn(*mut [usize; 2]) = sym(lib, "sg_bytes_free");
        let policy_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_policy_free");
        let null: Err = std::ptr::null_mut();
        let mut f: *mut c_void = std::ptr::null_mut();
        assert_eq!(fetcher_new(p, &mut f, null), 0);
        assert_eq!(set_audit(f, Some(on_audit_into), user, null), 0);
        let mut answer = [0usize; 2];
        // A request that is not UTF-8 (in its body): recorded by the
        // origin of its URL, as a request the reader refuses is.
        let bad = b"{\"url\": \"http://a.test/\", \"body\": \"\xff\"}";
        let st = fetch(f, bad.as_ptr(), bad.len(), &mut answer, null);
        assert_eq!(st, ErrorCode::Request.value());
        // A NULL request with a length.
        let st = fetch(f, std::ptr::null(), 5, &mut answer, null);
        assert_eq!(st, ErrorCode::Request.value());
        // A request that is not JSON: refused by the library's reader,
        // which reports it, for comparison.
        let st = fetch(f, b"{".as_ptr(), 1, &mut answer, null);
        assert_eq!(st, ErrorCode::Request.value());
        bytes_free(&mut answer);
        fetcher_free(f);
        policy_free(p);
    }
    let heard = heard.into_inner().unwrap();
    assert_eq!(
        heard,
        [
            (
                "fetch".into(),
                "http://a.test:80".into(),
                ErrorCode::Request.value()
            ),
            ("fetch".into(), "".into(), ErrorCode::Request.value()),
            ("fetch".into(), "".into(), ErrorCode::Request.value()),
        ],
        "every fetch call, refused ones included, reports one event"
    );
}

#[test]
fn cabi22_a_malformed_call_after_close_answers_closed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "content").unwrap();
    let root = dir.path().to_str().unwrap();
    let heard: Heard = Mutex::new(Vec::new());
    let user = std::ptr::from_ref(&heard).cast_mut().cast::<c_void>();
    let lib_path = CString::new(library::library().to_str().unwrap()).unwrap();
    type Opts = *mut c_void;
    type Err = *mut *mut c_void;
    // SAFETY: loading the library under test, and the signatures of
    // include/sandgate.h.
    unsafe {
        let lib = libc::dlopen(lib_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!lib.is_null(), "cannot load {lib_path:?}");
        let options_new: unsafe extern "C" fn() -> Opts = sym(lib, "sg_sandbox_options_new");
        let add_read_root: unsafe extern "C" fn(Opts, *const c_char, usize, Err) -> Status =
            sym(lib, "sg_sandbox_options_add_read_root");
        let set_audit: unsafe extern "C" fn(Opts, Option<AuditFn>, *mut c_void, Err) -> Status =
            sym(lib, "sg_sandbox_options_set_audit");
        let options_free: unsafe extern "C" fn(Opts) = sym(lib, "sg_sandbox_options_free");
        let sandbox_new: unsafe extern "C" fn(Opts, *mut *mut c_void, Err) -> Status =
            sym(lib, "sg_sandbox_new");
        let close: unsafe extern "C" fn(*mut c_void, Err) -> Status = sym(lib, "sg_sandbox_close");
        let sandbox_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_sandbox_free");
        let read: unsafe extern "C" fn(
            *mut c_void,
            *const u8,
            usize,
            *mut [usize; 2],
            Err,
        ) -> Status = sym(lib, "sg_sandbox_read");
        let grep_with: unsafe extern "C" fn(
            *mut c_void,
            *const u8,
            usize,
            *const u8,
            usize,
            *const u8,
            usize,
            *mut [usize; 2],
            Err,
        ) -> Status = sym(lib, "sg_sandbox_grep_with");

        let o = options_new();
        let null: Err = std::ptr::null_mut();
        assert_eq!(add_read_root(o, root.as_ptr().cast(), root.len(), null), 0);
        assert_eq!(set_audit(o, Some(on_audit_into), user, null), 0);
        let mut sb: *mut c_void = std::ptr::null_mut();
        assert_eq!(sandbox_new(o, &mut sb, null), 0);
        options_free(o);
        assert_eq!(close(sb, null), 0);
        let mut out = [0usize; 2];
        // A well-formed call after close, for comparison.
        let st = read(sb, b"a".as_ptr(), 1, &mut out, null);
        assert_eq!(st, ErrorCode::Closed.value());
        // A name that is not UTF-8, after close.
        let bad = b"a\xffb";
        let st = read(sb, bad.as_ptr(), bad.len(), &mut out, null);
        assert_eq!(
            st,
            ErrorCode::Closed.value(),
            "every call after close answers E_CLOSED"
        );
        // Search options that are not JSON, after close.
        let st = grep_with(
            sb,
            b"x".as_ptr(),
            1,
            std::ptr::null(),
            0,
            b"{".as_ptr(),
            1,
            &mut out,
            null,
        );
        assert_eq!(
            st,
            ErrorCode::Closed.value(),
            "every call after close answers E_CLOSED"
        );
        sandbox_free(sb);
    }
    let heard = heard.into_inner().unwrap();
    assert_eq!(
        heard,
        [
            ("read".into(), "a".into(), ErrorCode::Closed.value()),
            (
                "read".into(),
                "a\u{fffd}b".into(),
                ErrorCode::Closed.value()
            ),
            ("grep".into(), ".".into(), ErrorCode::Closed.value()),
        ],
        "a call after close is recorded as refused for the close"
    );
}

#[test]
fn cabi22_a_call_refused_for_a_triggered_signal_is_audited() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "content\n").unwrap();
    let root = dir.path().to_str().unwrap();
    let heard: Heard = Mutex::new(Vec::new());
    let user = std::ptr::from_ref(&heard).cast_mut().cast::<c_void>();
    let lib_path = CString::new(library::library().to_str().unwrap()).unwrap();
    type Opts = *mut c_void;
    type Err = *mut *mut c_void;
    type P = *mut c_void;
    // SAFETY: loading the library under test, and the signatures of
    // include/sandgate.h.
    unsafe {
        let lib = libc::dlopen(lib_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!lib.is_null(), "cannot load {lib_path:?}");
        let options_new: unsafe extern "C" fn() -> Opts = sym(lib, "sg_sandbox_options_new");
        let add_read_root: unsafe extern "C" fn(Opts, *const c_char, usize, Err) -> Status =
            sym(lib, "sg_sandbox_options_add_read_root");
        let set_budget: unsafe extern "C" fn(Opts, u64, Err) -> Status =
            sym(lib, "sg_sandbox_options_set_fs_ops_budget");
        let set_audit: unsafe extern "C" fn(Opts, Option<AuditFn>, *mut c_void, Err) -> Status =
            sym(lib, "sg_sandbox_options_set_audit");
        let options_free: unsafe extern "C" fn(Opts) = sym(lib, "sg_sandbox_options_free");
        let sandbox_new: unsafe extern "C" fn(Opts, *mut P, Err) -> Status =
            sym(lib, "sg_sandbox_new");
        let sandbox_free: unsafe extern "C" fn(P) = sym(lib, "sg_sandbox_free");
        let abort_new: unsafe extern "C" fn(*mut P, Err) -> Status = sym(lib, "sg_abort_new");
        let abort_trigger: unsafe extern "C" fn(P, Err) -> Status = sym(lib, "sg_abort_trigger");
        let abort_free: unsafe extern "C" fn(P) = sym(lib, "sg_abort_free");
        let bytes_free: unsafe extern "C" fn(*mut [usize; 2]) = sym(lib, "sg_bytes_free");
        let read: unsafe extern "C" fn(P, *const u8, usize, *mut [usize; 2], Err) -> Status =
            sym(lib, "sg_sandbox_read");
        let read_lines: unsafe extern "C" fn(
            P,
            *const u8,
            usize,
            u64,
            u64,
            P,
            *mut [usize; 2],
            *mut [u64; 4],
            Err,
        ) -> Status = sym(lib, "sg_sandbox_read_lines_cancellable");
        let glob_found: unsafe extern "C" fn(
            P,
            *const u8,
            usize,
            *const u8,
            usize,
            P,
            *mut [usize; 2],
            Err,
        ) -> Status = sym(lib, "sg_sandbox_glob_found_cancellable");
        let grep_found: unsafe extern "C" fn(
            P,
            *const u8,
            usize,
            *const u8,
            usize,
            *const u8,
            usize,
            P,
            *mut [usize; 2],
            Err,
        ) -> Status = sym(lib, "sg_sandbox_grep_found_cancellable");

        let o = options_new();
        let null: Err = std::ptr::null_mut();
        assert_eq!(add_read_root(o, root.as_ptr().cast(), root.len(), null), 0);
        assert_eq!(set_budget(o, 1, null), 0);
        assert_eq!(set_audit(o, Some(on_audit_into), user, null), 0);
        let mut sb: P = std::ptr::null_mut();
        assert_eq!(sandbox_new(o, &mut sb, null), 0);
        options_free(o);
        let mut signal: P = std::ptr::null_mut();
        assert_eq!(abort_new(&mut signal, null), 0);
        assert_eq!(abort_trigger(signal, null), 0);
        let mut out = [0usize; 2];
        let mut info = [0u64; 4];
        let st = read_lines(
            sb,
            b"a".as_ptr(),
            1,
            0,
            0,
            signal,
            &mut out,
            &mut info,
            null,
        );
        assert_eq!(st, ErrorCode::Aborted.value());
        let st = glob_found(
            sb,
            b"*".as_ptr(),
            1,
            std::ptr::null(),
            0,
            signal,
            &mut out,
            null,
        );
        assert_eq!(st, ErrorCode::Aborted.value());
        let st = grep_found(
            sb,
            b"x".as_ptr(),
            1,
            b"sub".as_ptr(),
            3,
            std::ptr::null(),
            0,
            signal,
            &mut out,
            null,
        );
        assert_eq!(st, ErrorCode::Aborted.value());
        // None of them started, so none spent the one operation.
        let st = read(sb, b"a".as_ptr(), 1, &mut out, null);
        assert_eq!(st, 0, "a call refused for its signal spent the budget");
        bytes_free(&mut out);
        abort_free(signal);
        sandbox_free(sb);
    }
    let heard = heard.into_inner().unwrap();
    assert_eq!(
        heard,
        [
            ("read".into(), "a".into(), ErrorCode::Aborted.value()),
            ("glob".into(), ".".into(), ErrorCode::Aborted.value()),
            ("grep".into(), "sub".into(), ErrorCode::Aborted.value()),
            ("read".into(), "a".into(), ErrorCode::Ok.value()),
        ],
        "a call refused for a triggered signal is audited as the sandbox audits its own"
    );
}

/// What the re-entering executor callback needs: the library's calls and
/// the executor, and how deep it is.
struct Reenter {
    exec: unsafe extern "C" fn(
        *mut c_void,
        *const u8,
        usize,
        *const u8,
        usize,
        u64,
        *mut c_void,
        *mut [u64; 32],
        *mut *mut c_void,
    ) -> Status,
    set_audit:
        unsafe extern "C" fn(*mut c_void, Option<AuditFn>, *mut c_void, *mut *mut c_void) -> Status,
    dispose: unsafe extern "C" fn(*mut c_void, *mut *mut c_void) -> Status,
    result_free: unsafe extern "C" fn(*mut [u64; 32]),
    executor: *mut c_void,
    depth: std::sync::atomic::AtomicUsize,
    heard: Heard,
    nested: Mutex<Vec<Status>>,
}

unsafe extern "C" fn on_audit_reenter(user: *mut c_void, e: *const AuditEvent) {
    use std::sync::atomic::Ordering;
    // SAFETY: `user` is the test's `Reenter`, alive for the whole test.
    let r = unsafe { &*user.cast::<Reenter>() };
    // SAFETY: the library passes a valid event for the call's duration.
    let outcome = unsafe { (*e).outcome };
    r.heard
        .lock()
        .unwrap()
        .push(("exec".into(), String::new(), outcome));
    if r.depth.fetch_add(1, Ordering::SeqCst) > 0 {
        return;
    }
    let null: *mut *mut c_void = std::ptr::null_mut();
    let mut out = [0u64; 32];
    // SAFETY: the signatures of include/sandgate.h; the executor is live.
    unsafe {
        let st = (r.exec)(
            r.executor,
            b"echo nested".as_ptr(),
            11,
            std::ptr::null(),
            0,
            0,
            std::ptr::null_mut(),
            &mut out,
            null,
        );
        if st == 0 {
            (r.result_free)(&mut out);
        }
        let replaced = (r.set_audit)(r.executor, Some(on_audit_reenter), user, null);
        let disposed = (r.dispose)(r.executor, null);
        r.nested.lock().unwrap().extend([st, replaced, disposed]);
    }
}

#[test]
fn cabi22_an_executor_callback_may_call_back_into_its_executor() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let path = dir.path().to_owned();
    std::thread::spawn(move || {
        type Err = *mut *mut c_void;
        // SAFETY: the signatures of include/sandgate.h.
        unsafe {
            let (lib, p) = policy(
                "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n\n[exec]\nenabled = true\nconfine = \"off\"\ntimeout_ms = 5000\n",
                &path,
            );
            let executor_new: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, Err) -> Status =
                sym(lib, "sg_executor_new");
            let executor_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_executor_free");
            let policy_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_policy_free");
            let mut ex: *mut c_void = std::ptr::null_mut();
            assert_eq!(executor_new(p, &mut ex, std::ptr::null_mut()), 0);
            let r = Reenter {
                exec: sym(lib, "sg_executor_exec"),
                set_audit: sym(lib, "sg_executor_set_audit"),
                dispose: sym(lib, "sg_executor_dispose"),
                result_free: sym(lib, "sg_exec_result_free"),
                executor: ex,
                depth: 0.into(),
                heard: Mutex::new(Vec::new()),
                nested: Mutex::new(Vec::new()),
            };
            let user = std::ptr::from_ref(&r).cast_mut().cast::<c_void>();
            assert_eq!(
                (r.set_audit)(ex, Some(on_audit_reenter), user, std::ptr::null_mut()),
                0
            );
            let mut out = [0u64; 32];
            let st = (r.exec)(
                ex,
                b"echo outer".as_ptr(),
                10,
                std::ptr::null(),
                0,
                0,
                std::ptr::null_mut(),
                &mut out,
                std::ptr::null_mut(),
            );
            if st == 0 {
                (r.result_free)(&mut out);
            }
            executor_free(ex);
            policy_free(p);
            let heard = r.heard.into_inner().unwrap();
            let nested = r.nested.into_inner().unwrap();
            tx.send((st, heard, nested)).unwrap();
        }
    });
    let (st, heard, nested) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("a callback calling back into its executor deadlocked");
    assert_eq!(st, 0, "the outer command");
    assert_eq!(nested, [0, 0, 0], "the nested exec, set_audit and dispose");
    assert_eq!(
        heard.len(),
        2,
        "one event each for the outer and nested exec: {heard:?}"
    );
}

#[test]
fn cabi22_a_search_base_given_as_null_with_a_length_is_not_recorded_as_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let heard: Heard = Mutex::new(Vec::new());
    let user = std::ptr::from_ref(&heard).cast_mut().cast::<c_void>();
    let lib_path = CString::new(library::library().to_str().unwrap()).unwrap();
    type Opts = *mut c_void;
    type Err = *mut *mut c_void;
    type P = *mut c_void;
    // SAFETY: loading the library under test, and the signatures of
    // include/sandgate.h.
    unsafe {
        let lib = libc::dlopen(lib_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!lib.is_null(), "cannot load {lib_path:?}");
        let options_new: unsafe extern "C" fn() -> Opts = sym(lib, "sg_sandbox_options_new");
        let add_read_root: unsafe extern "C" fn(Opts, *const c_char, usize, Err) -> Status =
            sym(lib, "sg_sandbox_options_add_read_root");
        let set_audit: unsafe extern "C" fn(Opts, Option<AuditFn>, *mut c_void, Err) -> Status =
            sym(lib, "sg_sandbox_options_set_audit");
        let options_free: unsafe extern "C" fn(Opts) = sym(lib, "sg_sandbox_options_free");
        let sandbox_new: unsafe extern "C" fn(Opts, *mut P, Err) -> Status =
            sym(lib, "sg_sandbox_new");
        let sandbox_free: unsafe extern "C" fn(P) = sym(lib, "sg_sandbox_free");
        let glob: unsafe extern "C" fn(
            P,
            *const u8,
            usize,
            *const u8,
            usize,
            *mut [usize; 2],
            Err,
        ) -> Status = sym(lib, "sg_sandbox_glob");
        let o = options_new();
        let null: Err = std::ptr::null_mut();
        assert_eq!(add_read_root(o, root.as_ptr().cast(), root.len(), null), 0);
        assert_eq!(set_audit(o, Some(on_audit_into), user, null), 0);
        let mut sb: P = std::ptr::null_mut();
        assert_eq!(sandbox_new(o, &mut sb, null), 0);
        options_free(o);
        let mut out = [0usize; 2];
        let st = glob(sb, b"*".as_ptr(), 1, std::ptr::null(), 5, &mut out, null);
        assert_eq!(st, ErrorCode::Request.value());
        sandbox_free(sb);
    }
    let heard = heard.into_inner().unwrap();
    assert_eq!(
        heard,
        [("glob".into(), "".into(), ErrorCode::Request.value())],
        "a base the library could not read is recorded as empty, not as the root"
    );
}

/// The address of each event's `path`, with its length.
static PATHS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

unsafe extern "C" fn on_audit_path(_user: *mut c_void, e: *const AuditEvent) {
    // SAFETY: the library passes a valid event for the call's duration.
    let e = unsafe { &*e };
    PATHS.lock().unwrap().push((e.path as usize, e.path_len));
}

#[test]
fn cabi22_an_empty_audit_path_points_to_memory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    type Err = *mut *mut c_void;
    // SAFETY: the signatures of include/sandgate.h.
    unsafe {
        let (lib, p) = policy("[fs]\nread_roots = [\"ws\"]\n", dir.path());
        let executor_new: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, Err) -> Status =
            sym(lib, "sg_executor_new");
        let set_audit: unsafe extern "C" fn(
            *mut c_void,
            Option<AuditFn>,
            *mut c_void,
            Err,
        ) -> Status = sym(lib, "sg_executor_set_audit");
        let exec: unsafe extern "C" fn(
            *mut c_void,
            *const u8,
            usize,
            *const u8,
            usize,
            u64,
            *mut c_void,
            *mut [u64; 32],
            Err,
        ) -> Status = sym(lib, "sg_executor_exec");
        let executor_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_executor_free");
        let policy_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_policy_free");
        let null: Err = std::ptr::null_mut();
        let mut ex: *mut c_void = std::ptr::null_mut();
        assert_eq!(executor_new(p, &mut ex, null), 0);
        assert_eq!(
            set_audit(ex, Some(on_audit_path), std::ptr::null_mut(), null),
            0
        );
        let mut out = [0u64; 32];
        // Refused (exec is not enabled) in the root: an empty path.
        let st = exec(
            ex,
            b"true".as_ptr(),
            4,
            std::ptr::null(),
            0,
            0,
            std::ptr::null_mut(),
            &mut out,
            null,
        );
        assert_eq!(st, ErrorCode::Denied.value());
        executor_free(ex);
        policy_free(p);
    }
    let paths = PATHS.lock().unwrap().clone();
    assert_eq!(paths.len(), 1);
    let (addr, len) = paths[0];
    assert_eq!(len, 0);
    // No mapping is ever at the first page: a pointer there (Rust's
    // dangling pointer of an empty string is 0x1) points to nothing a C
    // host may pass to memcpy or fwrite, even with a length of 0.
    assert!(
        addr >= 4096,
        "an empty path points to {addr:#x}, not to memory"
    );
}

/// Set in the child process of
/// [`an_abort_signal_out_of_descriptors_is_an_io_error`].
const NOFILE_CHILD: &str = "SANDGATE_TEST_ABORT_NOFILE_CHILD";

/// `sg_abort_new` with the process out of descriptors (its eventfd takes
/// one) answers `E_IO` naming the shortage; it panicked, which the
/// boundary turned into `E_INTERNAL`, a bug's code. Run in a child
/// process: the descriptor table is the process's.
#[test]
fn an_abort_signal_out_of_descriptors_is_an_io_error() {
    if std::env::var_os(NOFILE_CHILD).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "an_abort_signal_out_of_descriptors_is_an_io_error",
                "--nocapture",
            ])
            .env(NOFILE_CHILD, "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let lib_path = CString::new(library::library().to_str().unwrap()).unwrap();
    // SAFETY: loading the library under test.
    let lib = unsafe { libc::dlopen(lib_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "cannot load {lib_path:?}");
    type Err = *mut *mut c_void;
    // SAFETY: the signatures of include/sandgate.h.
    unsafe {
        let abort_new: unsafe extern "C" fn(*mut *mut c_void, Err) -> Status =
            sym(lib, "sg_abort_new");
        let abort_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_abort_free");
        let error_message: unsafe extern "C" fn(*const c_void) -> *const c_char =
            sym(lib, "sg_error_message");
        let error_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_error_free");
        // Made once with descriptors to spare: the call itself works.
        let mut signal = std::ptr::null_mut();
        let mut err = std::ptr::null_mut();
        assert_eq!(abort_new(&mut signal, &mut err), 0);
        abort_free(signal);
        // Every descriptor under a low limit taken.
        let limit = libc::rlimit {
            rlim_cur: 64,
            rlim_max: 64,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        let mut held = Vec::new();
        loop {
            let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                break;
            }
            held.push(fd);
        }
        let mut signal = std::ptr::null_mut();
        let status = abort_new(&mut signal, &mut err);
        let message = match err.is_null() {
            true => String::new(),
            false => std::ffi::CStr::from_ptr(error_message(err))
                .to_string_lossy()
                .into_owned(),
        };
        for fd in held {
            libc::close(fd);
        }
        assert_eq!(
            status,
            ErrorCode::Io as Status,
            "sg_abort_new out of descriptors: {message}"
        );
        assert!(signal.is_null());
        assert!(
            message.contains("abort signal") && message.contains("Too many open files"),
            "{message}"
        );
        error_free(err);
    }
}

#[test]
fn wire23_a_fetch_request_naming_a_header_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    type Err = *mut *mut c_void;
    // SAFETY: the signatures of include/sandgate.h.
    unsafe {
        // No network grant: a request the reader takes is refused by the
        // policy (`E_NET_DENIED`), one it refuses is `E_REQUEST`.
        let (lib, p) = policy("[fs]\nread_roots = [\"ws\"]\n", dir.path());
        let fetcher_new: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, Err) -> Status =
            sym(lib, "sg_fetcher_new");
        let fetch: unsafe extern "C" fn(
            *mut c_void,
            *const u8,
            usize,
            *mut [usize; 2],
            Err,
        ) -> Status = sym(lib, "sg_fetcher_fetch");
        let fetcher_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_fetcher_free");
        let bytes_free: unsafe extern "C" fn(*mut [usize; 2]) = sym(lib, "sg_bytes_free");
        let policy_free: unsafe extern "C" fn(*mut c_void) = sym(lib, "sg_policy_free");
        let null: Err = std::ptr::null_mut();
        let mut f: *mut c_void = std::ptr::null_mut();
        assert_eq!(fetcher_new(p, &mut f, null), 0);
        let call = |request: &str| -> (Status, String) {
            let mut answer = [0usize; 2];
            let st = fetch(f, request.as_ptr(), request.len(), &mut answer, null);
            let text = String::from_utf8(
                std::slice::from_raw_parts(answer[0] as *const u8, answer[1]).to_vec(),
            )
            .unwrap();
            bytes_free(&mut answer);
            (st, text)
        };
        for (headers, named) in [
            // The same name twice: JSON leaves which one counts open.
            (r#"{"X-A": "1", "X-A": "2"}"#, "headers.X-A"),
            // The same header in two spellings: HTTP names are one header
            // whatever their case.
            (r#"{"X-A": "1", "x-a": "2"}"#, "x-a"),
        ] {
            let request = format!(r#"{{"url": "http://a.test/", "headers": {headers}}}"#);
            let (st, answer) = call(&request);
            assert_eq!(st, ErrorCode::Request.value(), "{request}: {answer}");
            assert!(answer.contains(named), "{request}: {answer}");
        }
        // Two distinct headers are read, and refused by the policy.
        let (st, answer) =
            call(r#"{"url": "http://a.test/", "headers": {"X-A": "1", "X-B": "2"}}"#);
        assert_eq!(st, ErrorCode::NetDenied.value(), "{answer}");
        fetcher_free(f);
        policy_free(p);
    }
}
