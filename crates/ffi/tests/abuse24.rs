//! The C ABI as a hostile or careless host uses it: every entry point given
//! NULLs, NULL with a length, bytes that are not UTF-8 and strings holding
//! a NUL (a C program, compiled against the header and run under valgrind
//! when it is installed), and handles shared between threads, closed or
//! disposed while other threads use them, and audit callbacks that block,
//! call back in or close their own sandbox.
//!
//! The shared library is loaded with `dlopen`, as a C host loads it.

use std::ffi::{c_void, CString};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use facade::ErrorCode;

#[path = "support/cabi.rs"]
mod cabi;
#[path = "support/library.rs"]
mod library;

use cabi::{sym, AuditEvent, AuditFn, Status};

type Handle = *mut c_void;
type Err = *mut *mut c_void;
type Bytes = [usize; 2];

const OK: Status = 0;

fn code(c: ErrorCode) -> Status {
    c.value()
}

/// The functions of include/sandgate.h these tests call, with their types.
#[derive(Clone, Copy)]
struct Lib {
    policy_parse:
        unsafe extern "C" fn(*const u8, usize, *const u8, usize, *mut Handle, Err) -> Status,
    policy_free: unsafe extern "C" fn(Handle),
    options_new: unsafe extern "C" fn() -> Handle,
    options_from_policy: unsafe extern "C" fn(Handle, *mut Handle, Err) -> Status,
    options_add_read_root: unsafe extern "C" fn(Handle, *const u8, usize, Err) -> Status,
    options_set_write_root: unsafe extern "C" fn(Handle, *const u8, usize, Err) -> Status,
    options_set_audit: unsafe extern "C" fn(Handle, Option<AuditFn>, *mut c_void, Err) -> Status,
    options_free: unsafe extern "C" fn(Handle),
    sandbox_new: unsafe extern "C" fn(Handle, *mut Handle, Err) -> Status,
    sandbox_close: unsafe extern "C" fn(Handle, Err) -> Status,
    sandbox_free: unsafe extern "C" fn(Handle),
    sandbox_read: unsafe extern "C" fn(Handle, *const u8, usize, *mut Bytes, Err) -> Status,
    sandbox_write: unsafe extern "C" fn(
        Handle,
        *const u8,
        usize,
        *const u8,
        usize,
        bool,
        *mut u64,
        Err,
    ) -> Status,
    sandbox_list: unsafe extern "C" fn(Handle, *const u8, usize, *mut Bytes, Err) -> Status,
    bytes_free: unsafe extern "C" fn(*mut Bytes),
    error_free: unsafe extern "C" fn(Handle),
    error_code: unsafe extern "C" fn(Handle) -> Status,
    executor_new: unsafe extern "C" fn(Handle, *mut Handle, Err) -> Status,
    executor_exec: unsafe extern "C" fn(
        Handle,
        *const u8,
        usize,
        *const u8,
        usize,
        u64,
        Handle,
        *mut [u64; 32],
        Err,
    ) -> Status,
    executor_dispose: unsafe extern "C" fn(Handle, Err) -> Status,
    executor_free: unsafe extern "C" fn(Handle),
    exec_result_free: unsafe extern "C" fn(*mut [u64; 32]),
    fetcher_new: unsafe extern "C" fn(Handle, *mut Handle, Err) -> Status,
    fetcher_fetch: unsafe extern "C" fn(Handle, *const u8, usize, *mut Bytes, Err) -> Status,
    fetcher_free: unsafe extern "C" fn(Handle),
    abort_new: unsafe extern "C" fn(*mut Handle, Err) -> Status,
    abort_free: unsafe extern "C" fn(Handle),
}

// SAFETY: plain function pointers into a library that stays loaded.
unsafe impl Send for Lib {}
// SAFETY: as above.
unsafe impl Sync for Lib {}

fn lib() -> Lib {
    let path = CString::new(library::library().to_str().unwrap()).unwrap();
    // SAFETY: loading the library under test; it is never unloaded, and the
    // types are those of include/sandgate.h.
    unsafe {
        let l = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!l.is_null(), "cannot load {path:?}");
        Lib {
            policy_parse: sym(l, "sg_policy_parse"),
            policy_free: sym(l, "sg_policy_free"),
            options_new: sym(l, "sg_sandbox_options_new"),
            options_from_policy: sym(l, "sg_sandbox_options_from_policy"),
            options_add_read_root: sym(l, "sg_sandbox_options_add_read_root"),
            options_set_write_root: sym(l, "sg_sandbox_options_set_write_root"),
            options_set_audit: sym(l, "sg_sandbox_options_set_audit"),
            options_free: sym(l, "sg_sandbox_options_free"),
            sandbox_new: sym(l, "sg_sandbox_new"),
            sandbox_close: sym(l, "sg_sandbox_close"),
            sandbox_free: sym(l, "sg_sandbox_free"),
            sandbox_read: sym(l, "sg_sandbox_read"),
            sandbox_write: sym(l, "sg_sandbox_write"),
            sandbox_list: sym(l, "sg_sandbox_list"),
            bytes_free: sym(l, "sg_bytes_free"),
            error_free: sym(l, "sg_error_free"),
            error_code: sym(l, "sg_error_code"),
            executor_new: sym(l, "sg_executor_new"),
            executor_exec: sym(l, "sg_executor_exec"),
            executor_dispose: sym(l, "sg_executor_dispose"),
            executor_free: sym(l, "sg_executor_free"),
            exec_result_free: sym(l, "sg_exec_result_free"),
            fetcher_new: sym(l, "sg_fetcher_new"),
            fetcher_fetch: sym(l, "sg_fetcher_fetch"),
            fetcher_free: sym(l, "sg_fetcher_free"),
            abort_new: sym(l, "sg_abort_new"),
            abort_free: sym(l, "sg_abort_free"),
        }
    }
}

/// A handle shared between the test's threads.
#[derive(Clone, Copy)]
struct Shared(Handle);
// SAFETY: the library's handles are thread-safe (the header says so for
// every handle these tests share).
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

const NULL_ERR: Err = std::ptr::null_mut();

impl Lib {
    /// A sandbox reading and writing `dir`, reporting to `audit`.
    unsafe fn sandbox(&self, dir: &Path, audit: Option<(AuditFn, *mut c_void)>) -> Handle {
        let dir = dir.to_str().unwrap();
        // SAFETY: the contracts of include/sandgate.h.
        unsafe {
            let o = (self.options_new)();
            assert_eq!(
                (self.options_add_read_root)(o, dir.as_ptr(), dir.len(), NULL_ERR),
                OK
            );
            assert_eq!(
                (self.options_set_write_root)(o, dir.as_ptr(), dir.len(), NULL_ERR),
                OK
            );
            if let Some((cb, user)) = audit {
                assert_eq!((self.options_set_audit)(o, Some(cb), user, NULL_ERR), OK);
            }
            let mut sb = std::ptr::null_mut();
            assert_eq!((self.sandbox_new)(o, &mut sb, NULL_ERR), OK);
            (self.options_free)(o);
            sb
        }
    }

    /// The policy `text` parsed with `base` as its directory; it must
    /// parse.
    unsafe fn policy(&self, text: &str, base: &str) -> Handle {
        let mut p = std::ptr::null_mut();
        // SAFETY: the contracts of include/sandgate.h.
        let st = unsafe {
            (self.policy_parse)(
                text.as_ptr(),
                text.len(),
                base.as_ptr(),
                base.len(),
                &mut p,
                NULL_ERR,
            )
        };
        assert_eq!(st, OK, "the policy does not parse: {text}");
        p
    }

    /// Runs `cmd` on executor `ex` (no working directory, no timeout of its
    /// own, no abort signal, no error object) into `r`: the status.
    unsafe fn exec(&self, ex: Handle, cmd: &[u8], r: &mut [u64; 32]) -> Status {
        // SAFETY: the contracts of include/sandgate.h.
        unsafe {
            (self.executor_exec)(
                ex,
                cmd.as_ptr(),
                cmd.len(),
                std::ptr::null(),
                0,
                0,
                std::ptr::null_mut(),
                r,
                NULL_ERR,
            )
        }
    }

    /// Reads `name`, answering the status and, on success, the content.
    unsafe fn read(&self, sb: Handle, name: &str) -> (Status, Vec<u8>) {
        let mut out: Bytes = [0, 0];
        let mut err: Handle = std::ptr::null_mut();
        // SAFETY: the contracts of include/sandgate.h.
        unsafe {
            let st = (self.sandbox_read)(sb, name.as_ptr(), name.len(), &mut out, &mut err);
            let content = if st == OK {
                assert!(err.is_null(), "success left *err set");
                let v = match out[1] {
                    0 => Vec::new(),
                    n => std::slice::from_raw_parts(out[0] as *const u8, n).to_vec(),
                };
                (self.bytes_free)(&mut out);
                v
            } else {
                assert!(!err.is_null(), "a refusal left no error object");
                assert_eq!((self.error_code)(err), st);
                (self.error_free)(err);
                Vec::new()
            };
            (st, content)
        }
    }
}

/// The directory holding the library under the name its SONAME gives
/// (`libsandgate.so.<major>`), for a C program to link and load.
fn soname_dir(tmp: &Path) -> std::path::PathBuf {
    let lib = library::library();
    let header = std::fs::read_to_string(library::workspace().join("include/sandgate.h")).unwrap();
    let major = header
        .lines()
        .find_map(|l| l.strip_prefix("#define SANDGATE_ABI_MAJOR "))
        .expect("SANDGATE_ABI_MAJOR")
        .trim()
        .to_owned();
    let d = tmp.join("lib");
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(&lib, d.join("libsandgate.so")).unwrap();
    std::os::unix::fs::symlink(&lib, d.join(format!("libsandgate.so.{major}"))).unwrap();
    d
}

fn works(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn abuse24_every_entry_point_refuses_malformed_arguments_from_c() {
    if !works("gcc", "--version") {
        eprintln!("skipped: gcc is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let libdir = soname_dir(tmp.path());
    let exe = tmp.path().join("abuse24");
    let ws = library::workspace();
    let out = Command::new("gcc")
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-g",
            "-I",
        ])
        .arg(ws.join("include"))
        .arg(ws.join("crates/ffi/tests/abuse24.c"))
        .arg("-L")
        .arg(&libdir)
        .arg(format!("-Wl,-rpath,{}", libdir.display()))
        .args(["-lsandgate", "-o"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let mut cmd = if works("valgrind", "--version") {
        let mut c = Command::new("valgrind");
        c.args([
            "-q",
            "--child-silent-after-fork=yes",
            "--error-exitcode=99",
            "--leak-check=full",
            "--show-leak-kinds=definite,indirect,possible",
            "--errors-for-leak-kinds=definite,indirect,possible",
        ])
        .arg(&exe);
        c
    } else {
        eprintln!("valgrind is not installed: running without it");
        Command::new(&exe)
    };
    let out = cmd.arg(&work).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the abuse program failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains(", 0 failed"), "{stdout}");
}

/// What a counting callback heard: events by outcome.
#[derive(Default)]
struct Counted {
    events: AtomicUsize,
    ok: AtomicUsize,
    closed: AtomicUsize,
    /// Set once the sandbox was freed: an event after it is a bug.
    freed: AtomicBool,
    late: AtomicUsize,
}

unsafe extern "C" fn on_count(user: *mut c_void, e: *const AuditEvent) {
    // SAFETY: `user` is the test's `Counted`, alive for the whole test;
    // the event is valid for the call.
    let (c, e) = unsafe { (&*user.cast::<Counted>(), &*e) };
    if c.freed.load(Ordering::SeqCst) {
        c.late.fetch_add(1, Ordering::SeqCst);
    }
    c.events.fetch_add(1, Ordering::SeqCst);
    if e.outcome == OK {
        c.ok.fetch_add(1, Ordering::SeqCst);
    } else if e.outcome == code(ErrorCode::Closed) {
        c.closed.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn abuse24_a_sandbox_closed_while_threads_use_it_answers_ok_or_closed_and_reports_each_call() {
    let l = lib();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "content").unwrap();
    let counted = Counted::default();
    let user = std::ptr::from_ref(&counted).cast_mut().cast::<c_void>();
    // SAFETY: the contracts of include/sandgate.h: the sandbox is freed
    // only once every thread using it was joined.
    unsafe {
        let sb = Shared(l.sandbox(dir.path(), Some((on_count, user))));
        let calls = AtomicUsize::new(0);
        let (answered_ok, answered_closed) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let started = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (calls, ok, closed, started) =
                    (&calls, &answered_ok, &answered_closed, &started);
                s.spawn(move || {
                    let sb = sb;
                    started.fetch_add(1, Ordering::SeqCst);
                    let mut seen_closed = false;
                    for i in 0..400 {
                        let st = match i % 3 {
                            0 => l.read(sb.0, "a").0,
                            1 => {
                                let name = format!("t{t}-{i}");
                                let mut err: Handle = std::ptr::null_mut();
                                let st = (l.sandbox_write)(
                                    sb.0,
                                    name.as_ptr(),
                                    name.len(),
                                    b"x".as_ptr(),
                                    1,
                                    false,
                                    std::ptr::null_mut(),
                                    &mut err,
                                );
                                (l.error_free)(err);
                                st
                            }
                            _ => {
                                let mut out: Bytes = [0, 0];
                                let st =
                                    (l.sandbox_list)(sb.0, b".".as_ptr(), 1, &mut out, NULL_ERR);
                                (l.bytes_free)(&mut out);
                                st
                            }
                        };
                        calls.fetch_add(1, Ordering::SeqCst);
                        if st == OK {
                            assert!(!seen_closed, "a call after E_CLOSED succeeded");
                            ok.fetch_add(1, Ordering::SeqCst);
                        } else {
                            assert_eq!(st, code(ErrorCode::Closed), "only OK or E_CLOSED");
                            seen_closed = true;
                            closed.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
            let deadline = Instant::now() + Duration::from_secs(60);
            while (started.load(Ordering::SeqCst) < 4 || calls.load(Ordering::SeqCst) < 40)
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!((l.sandbox_close)(sb.0, NULL_ERR), OK);
        });
        // Once closed, closed for good.
        assert_eq!(l.read(sb.0, "a").0, code(ErrorCode::Closed));
        (l.sandbox_free)(sb.0);
        counted.freed.store(true, Ordering::SeqCst);
        let n = calls.load(Ordering::SeqCst) + 1;
        assert_eq!(n, 1601);
        assert!(answered_ok.load(Ordering::SeqCst) >= 40);
        assert!(
            answered_closed.load(Ordering::SeqCst) > 0,
            "close came after every call"
        );
        assert_eq!(
            counted.events.load(Ordering::SeqCst),
            n,
            "every call reported once"
        );
        assert_eq!(
            counted.ok.load(Ordering::SeqCst),
            answered_ok.load(Ordering::SeqCst)
        );
        assert_eq!(
            counted.closed.load(Ordering::SeqCst),
            answered_closed.load(Ordering::SeqCst) + 1
        );
    }
    assert_eq!(
        counted.late.load(Ordering::SeqCst),
        0,
        "an event after free"
    );
}

/// A callback that blocks on the event for `block` until released, and
/// closes its sandbox on the event for `close`.
struct Blocking {
    lib: Lib,
    sandbox: Mutex<Shared>,
    entered: AtomicBool,
    release: AtomicBool,
    close_status: Mutex<Option<Status>>,
}

impl Blocking {
    /// No sandbox yet; a `block` event waits unless `released`.
    fn new(lib: Lib, released: bool) -> Blocking {
        Blocking {
            lib,
            sandbox: Mutex::new(Shared(std::ptr::null_mut())),
            entered: AtomicBool::new(false),
            release: AtomicBool::new(released),
            close_status: Mutex::new(None),
        }
    }
}

unsafe extern "C" fn on_block(user: *mut c_void, e: *const AuditEvent) {
    // SAFETY: `user` is the test's `Blocking`, alive for the whole test;
    // the event and its path are valid for the call.
    let (b, path) = unsafe {
        let e = &*e;
        (
            &*user.cast::<Blocking>(),
            std::slice::from_raw_parts(e.path.cast::<u8>(), e.path_len),
        )
    };
    match path {
        b"block" => {
            b.entered.store(true, Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(30);
            while !b.release.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        b"close" => {
            let sb = *b.sandbox.lock().unwrap();
            // SAFETY: the header allows a callback to close its sandbox.
            let st = unsafe { (b.lib.sandbox_close)(sb.0, NULL_ERR) };
            *b.close_status.lock().unwrap() = Some(st);
        }
        _ => {}
    }
}

#[test]
fn abuse24_a_blocked_callback_holds_up_neither_other_threads_nor_close() {
    let l = lib();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "content").unwrap();
    let b = Blocking::new(l, false);
    let user = std::ptr::from_ref(&b).cast_mut().cast::<c_void>();
    // SAFETY: the contracts of include/sandgate.h.
    unsafe {
        let sb = Shared(l.sandbox(dir.path(), Some((on_block, user))));
        std::thread::scope(|s| {
            let blocked = s.spawn(move || {
                let sb = sb;
                l.read(sb.0, "block").0
            });
            let deadline = Instant::now() + Duration::from_secs(60);
            while !b.entered.load(Ordering::SeqCst) && !blocked.is_finished() {
                assert!(Instant::now() < deadline, "the callback was never called");
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(
                b.entered.load(Ordering::SeqCst),
                "the callback was never called"
            );
            // Another thread's calls, and close, go through meanwhile.
            let t = Instant::now();
            assert_eq!(l.read(sb.0, "a"), (OK, b"content".to_vec()));
            assert_eq!((l.sandbox_close)(sb.0, NULL_ERR), OK);
            assert_eq!(l.read(sb.0, "a").0, code(ErrorCode::Closed));
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "held up by a blocked callback"
            );
            assert!(!blocked.is_finished());
            b.release.store(true, Ordering::SeqCst);
            assert_eq!(blocked.join().unwrap(), code(ErrorCode::NotFound));
        });
        (l.sandbox_free)(sb.0);
    }
}

#[test]
fn abuse24_a_callback_may_close_the_sandbox_it_reports_on() {
    let l = lib();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("close"), "last").unwrap();
    let b = Blocking::new(l, true);
    let user = std::ptr::from_ref(&b).cast_mut().cast::<c_void>();
    // SAFETY: the contracts of include/sandgate.h.
    unsafe {
        let sb = l.sandbox(dir.path(), Some((on_block, user)));
        *b.sandbox.lock().unwrap() = Shared(sb);
        // The call reported on completes; the close inside it holds.
        assert_eq!(l.read(sb, "close"), (OK, b"last".to_vec()));
        assert_eq!(*b.close_status.lock().unwrap(), Some(OK));
        assert_eq!(l.read(sb, "close").0, code(ErrorCode::Closed));
        (l.sandbox_free)(sb);
    }
}

#[test]
fn abuse24_what_a_policy_made_outlives_it_on_many_threads() {
    let l = lib();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    std::fs::write(dir.path().join("ws/a"), "content").unwrap();
    let text = "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n";
    let base = dir.path().to_str().unwrap();
    // SAFETY: the contracts of include/sandgate.h; every handle is freed
    // once, after the threads using it were joined.
    unsafe {
        let p = l.policy(text, base);
        let mut options = Vec::new();
        for _ in 0..4 {
            let mut o = std::ptr::null_mut();
            assert_eq!((l.options_from_policy)(p, &mut o, NULL_ERR), OK);
            options.push(Shared(o));
        }
        let (mut ex, mut f) = (std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!((l.executor_new)(p, &mut ex, NULL_ERR), OK);
        assert_eq!((l.fetcher_new)(p, &mut f, NULL_ERR), OK);
        (l.policy_free)(p);
        let (ex, f) = (Shared(ex), Shared(f));
        std::thread::scope(|s| {
            for o in &options {
                let o = *o;
                s.spawn(move || {
                    let (o, ex, f) = (o, ex, f);
                    let mut sb = std::ptr::null_mut();
                    assert_eq!((l.sandbox_new)(o.0, &mut sb, NULL_ERR), OK);
                    for _ in 0..50 {
                        assert_eq!(l.read(sb, "a"), (OK, b"content".to_vec()));
                    }
                    (l.sandbox_free)(sb);
                    // The executor and fetcher, shared: refused as the policy
                    // grants neither, never a crash.
                    let mut r = [0u64; 32];
                    let st = l.exec(ex.0, b"true", &mut r);
                    assert_eq!(st, code(ErrorCode::Denied));
                    let req = br#"{"url":"https://example.com/"}"#;
                    let mut answer: Bytes = [0, 0];
                    let st = (l.fetcher_fetch)(f.0, req.as_ptr(), req.len(), &mut answer, NULL_ERR);
                    assert_eq!(st, code(ErrorCode::NetDenied));
                    assert!(answer[1] > 0, "a refused fetch answers JSON");
                    (l.bytes_free)(&mut answer);
                });
            }
        });
        for o in options {
            (l.options_free)(o.0);
        }
        (l.executor_free)(ex.0);
        (l.fetcher_free)(f.0);
    }
}

/// The process's open descriptors.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn abuse24_dispose_on_one_thread_ends_the_commands_of_others() {
    let l = lib();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let text = "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n\n[exec]\nenabled = true\nconfine = \"off\"\ntimeout_ms = 60000\n";
    let base = dir.path().to_str().unwrap();
    // SAFETY: the contracts of include/sandgate.h; the executor is freed
    // once every thread using it was joined.
    unsafe {
        let p = l.policy(text, base);
        let mut ex = std::ptr::null_mut();
        assert_eq!((l.executor_new)(p, &mut ex, NULL_ERR), OK);
        (l.policy_free)(p);
        let ex = Shared(ex);
        let t = Instant::now();
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(move || {
                        let ex = ex;
                        let mut r = [0u64; 32];
                        let mut err: Handle = std::ptr::null_mut();
                        let cmd = b"sleep 30";
                        let st = (l.executor_exec)(
                            ex.0,
                            cmd.as_ptr(),
                            cmd.len(),
                            std::ptr::null(),
                            0,
                            0,
                            std::ptr::null_mut(),
                            &mut r,
                            &mut err,
                        );
                        let exit = r[0] as u32 as i32;
                        if st == OK {
                            assert!(err.is_null());
                            (l.exec_result_free)(&mut r);
                        } else {
                            (l.error_free)(err);
                        }
                        (st, exit)
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(1500));
            assert_eq!((l.executor_dispose)(ex.0, NULL_ERR), OK);
            for run in runs {
                let (st, exit) = run.join().unwrap();
                assert_eq!(
                    st, OK,
                    "a command ended by dispose still answers its result"
                );
                assert_ne!(exit, 0, "the command was ended, not run to its end");
            }
        });
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "dispose did not end the running commands ({:?})",
            t.elapsed()
        );
        // A later command starts a new session.
        let mut r = [0u64; 32];
        let st = l.exec(ex.0, b"echo again", &mut r);
        assert_eq!(st, OK);
        assert_eq!(r[0] as u32 as i32, 0);
        (l.exec_result_free)(&mut r);
        assert_eq!((l.executor_dispose)(ex.0, NULL_ERR), OK);
        // A command or working directory holding a NUL byte is refused,
        // never cut at it (`echo a` would run) and never a crash.
        for (cmd, cwd, want) in [
            (&b"echo a\0b"[..], &b""[..], ErrorCode::Request),
            (&b"echo a"[..], &b"a\0b"[..], ErrorCode::PathInvalid),
        ] {
            let mut r = [0xa5a5_a5a5_a5a5_a5a5u64; 32];
            let mut err: Handle = std::ptr::null_mut();
            let st = (l.executor_exec)(
                ex.0,
                cmd.as_ptr(),
                cmd.len(),
                if cwd.is_empty() {
                    std::ptr::null()
                } else {
                    cwd.as_ptr()
                },
                cwd.len(),
                0,
                std::ptr::null_mut(),
                &mut r,
                &mut err,
            );
            assert_eq!(st, code(want), "{cmd:?} in {cwd:?}");
            assert_eq!((l.error_code)(err), st);
            (l.error_free)(err);
            assert!(
                r.iter().all(|w| *w == 0xa5a5_a5a5_a5a5_a5a5),
                "a refusal wrote the result"
            );
        }
        // Sessions started and disposed again keep no descriptor (the
        // first may open what the process keeps, such as /dev/null).
        let fds = open_fds();
        for _ in 0..5 {
            let mut r = [0u64; 32];
            let st = l.exec(ex.0, b"true", &mut r);
            assert_eq!(st, OK);
            (l.exec_result_free)(&mut r);
            assert_eq!((l.executor_dispose)(ex.0, NULL_ERR), OK);
        }
        assert!(open_fds() <= fds, "dispose left descriptors open");
        (l.executor_free)(ex.0);
    }
}

#[test]
fn abuse24_handles_made_and_freed_many_times_keep_no_descriptor() {
    let l = lib();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "content").unwrap();
    // SAFETY: the contracts of include/sandgate.h.
    unsafe {
        // Once first, so that what the library makes once is made.
        let mut a = std::ptr::null_mut();
        assert_eq!((l.abort_new)(&mut a, NULL_ERR), OK);
        (l.abort_free)(a);
        let sb = l.sandbox(dir.path(), None);
        (l.sandbox_free)(sb);
        let before = open_fds();
        for _ in 0..300 {
            let mut a = std::ptr::null_mut();
            let mut err: Handle = std::ptr::null_mut();
            assert_eq!((l.abort_new)(&mut a, &mut err), OK);
            (l.abort_free)(a);
            let sb = l.sandbox(dir.path(), None);
            assert_eq!(l.read(sb, "a").0, OK);
            assert_eq!(l.read(sb, "missing").0, code(ErrorCode::NotFound));
            assert_eq!((l.sandbox_close)(sb, NULL_ERR), OK);
            (l.sandbox_free)(sb);
        }
        let after = open_fds();
        assert!(
            after <= before + 2,
            "descriptors leaked: {before} before, {after} after"
        );
    }
}
