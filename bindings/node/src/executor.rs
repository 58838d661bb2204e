//! `Executor`: the shell executor a policy grants (docs/reference/executor.md), shaped like
//! open-multi-agent's `ShellExecutor` (`start()`, `exec(command, {cwd,
//! timeoutMs, abortSignal})`, `dispose()`, all returning promises).

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};

use napi::bindgen_prelude::{AsyncTask, Object, ObjectRef, Unknown, Utf16String};
use napi::Env;
use napi::JsDeferred;
use napi_derive::napi;
use sandgate::exec::{AbortSignal, ExecResult};

use crate::abort::{connect, Connection};
use crate::policy::Policy;
use crate::sandbox::{audit_sink, AuditFn};
use crate::{class_arg, js_error, options_of, same, to_count, utf8, wide_arg, Job, OrThrow};

/// Options of `new Executor(policy, options)` and `Executor.fromOptions`.
#[napi(object, object_to_js = false)]
pub struct ExecutorOptions {
    /// Called with an `AuditEvent` after every `exec`, refused ones too:
    /// `op` `'exec'`, the working directory as asked, the output's size,
    /// `exitCode` and `limit`; never the command's text or output.
    #[napi(ts_type = "(event: AuditEvent) => void")]
    pub audit: Option<AuditFn>,
}

/// The keys of [`ExecutorOptions`] as JavaScript spells them.
const EXECUTOR_OPTIONS: &[&str] = &["audit"];

/// An executor with `options` applied.
fn executor_with(inner: sandgate::Executor, options: Option<ExecutorOptions>) -> Executor {
    if let Some(f) = options.and_then(|o| o.audit) {
        inner.set_audit_sink(Some(Arc::new(audit_sink(f))));
    }
    Executor {
        inner: Arc::new(inner),
    }
}

/// Options of `exec`.
#[napi(object, object_to_js = false)]
pub struct ExecOptions {
    /// Working directory: a name beneath the write root (else the first read
    /// root), or an absolute host path inside that root, resolved through
    /// the root; default: that root itself.
    pub cwd: Option<Utf16String>,
    /// Timeout in milliseconds (never more than the policy's `timeout_ms`,
    /// which is also the default). On timeout the result has exit code 124.
    pub timeout_ms: Option<f64>,
    /// Aborting it ends the command (exit code 130) and everything it
    /// started.
    #[napi(ts_type = "AbortSignal")]
    pub abort_signal: Option<ObjectRef<false>>,
}

/// The result of one command. Failures, timeouts (124), aborts (130) and
/// commands that could not start (127) are results, not rejections.
#[napi(object)]
pub struct ExecOutput {
    /// The exit code (`128 + n` for signal `n`; 124 timeout, 130 abort, 127
    /// could not start).
    pub exit_code: i32,
    /// Standard output, redacted (decoded as UTF-8, invalid sequences as
    /// U+FFFD).
    pub stdout: String,
    /// Standard error, redacted (decoded like `stdout`).
    pub stderr: String,
    /// Output was dropped past `max_output_bytes`.
    pub truncated: bool,
    /// The timeout ended the command.
    pub timed_out: bool,
    /// The abort signal ended the command.
    pub aborted: bool,
    /// What confinement was in force (snake_case keys, as in the JSON
    /// endpoint's `confined`).
    #[napi(ts_type = "Record<string, unknown>")]
    pub confined: serde_json::Value,
    /// sha256 of the sorted environment names passed to the command.
    pub env_names_digest: String,
    /// Wall-clock time of the call in milliseconds.
    pub duration_ms: f64,
    /// The limit that ended the command, when known: `memory`, `tasks`,
    /// `cpu`, `output`, `timeout` or `file_size`.
    pub limit: Option<String>,
    /// What the command did to protected paths and what was done about
    /// it: `{ path, pattern, action }` each, `action` being `restored`,
    /// `quarantined` or `reported`.
    pub protected_changes: Vec<ProtectedChange>,
}

/// One protected entry a command changed, and what was done about it.
#[napi(object)]
pub struct ProtectedChange {
    /// The entry's path beneath the write root.
    pub path: String,
    /// The deny-write pattern that protects it, as written.
    pub pattern: String,
    /// `restored`, `quarantined` or `reported`.
    pub action: String,
}

fn output(r: ExecResult) -> ExecOutput {
    ExecOutput {
        exit_code: r.exit_code,
        stdout: String::from_utf8_lossy(&r.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
        truncated: r.truncated,
        timed_out: r.timed_out,
        aborted: r.aborted,
        confined: serde_json::to_value(&r.confined).unwrap_or(serde_json::Value::Null),
        env_names_digest: r.env_names_digest,
        duration_ms: r.duration.as_secs_f64() * 1000.0,
        limit: r.limit.map(|l| l.as_str().to_owned()),
        protected_changes: r
            .protected_changes
            .into_iter()
            .map(|c| ProtectedChange {
                path: c.path,
                pattern: c.pattern,
                action: c.action.as_str().to_owned(),
            })
            .collect(),
    }
}

/// Every executor with a command in flight, in any thread's environment
/// (the main thread's and each worker's), with the count of its commands:
/// what `Executor.disposeRunning()` ends.
static RUNNING: Mutex<Vec<(Weak<sandgate::Executor>, usize)>> = Mutex::new(Vec::new());

/// Holds `executor` in [`RUNNING`] while one command of it runs.
struct Running(Arc<sandgate::Executor>);

impl Running {
    fn new(executor: &Arc<sandgate::Executor>) -> Running {
        let mut all = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|(w, _)| w.strong_count() > 0);
        match all
            .iter_mut()
            .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(executor)))
        {
            Some((_, n)) => *n += 1,
            None => all.push((Arc::downgrade(executor), 1)),
        }
        Running(Arc::clone(executor))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut all = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = all
            .iter()
            .position(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&self.0)))
        {
            all[i].1 -= 1;
            if all[i].1 == 0 {
                all.swap_remove(i);
            }
        }
    }
}

/// What settles one `exec`'s Promise, on its environment's thread.
type Settle = Box<dyn FnOnce(Env) -> napi::Result<ExecOutput> + Send>;

/// What one `exec` undoes on its environment's thread when it settles:
/// its teardown hook and its `abort` listener.
struct Finish {
    teardown: Arc<Teardown>,
    listener: Option<Connection>,
}

impl Finish {
    /// On the environment's thread, the environment alive.
    fn run(mut self, env: &Env) -> napi::Result<()> {
        self.teardown.unregister(env);
        match self.listener.take() {
            Some(c) => c.disconnect(env),
            None => Ok(()),
        }
    }
}

impl Drop for Finish {
    /// Not run: the environment went away first, and this is dropped on
    /// the command's thread. The listener's references into the freed
    /// environment are let go without a call into it.
    fn drop(&mut self) {
        if let Some(c) = self.listener.take() {
            c.abandon();
        }
    }
}

/// On the command's thread: runs `call`, then hands its result to the
/// environment's thread to settle the Promise with (`finish` first).
fn run_and_settle(call: ExecCall, deferred: JsDeferred<ExecOutput, Settle>, finish: Finish) {
    let out = catch_unwind(AssertUnwindSafe(|| call.run())).unwrap_or_else(|_| {
        Err(sandgate::Error::new(
            sandgate::ErrorCode::Internal,
            "a panic in the native operation (a bug)",
        ))
    });
    deferred.resolve(Box::new(move |env: Env| {
        finish.run(&env)?;
        out.map(output).map_err(|e| js_error(&env, &e))
    }));
}

/// One `exec`, run on a thread of its own ([`Executor::exec`]).
struct ExecCall {
    executor: Arc<sandgate::Executor>,
    /// The command and working directory as JavaScript gave them, made
    /// UTF-8 on the command's thread (a lone surrogate rejects with
    /// `E_REQUEST`).
    command: Utf16String,
    cwd: Option<Utf16String>,
    timeout_ms: Option<u64>,
    abort: AbortSignal,
}

impl ExecCall {
    fn run(self) -> Result<ExecResult, sandgate::Error> {
        // A command or working directory refused here (a lone surrogate)
        // is reported as the executor reports its own refusals, as C
        // reports what it cannot take as text: every call, refused ones
        // included, leaves a record, its working directory as given (what
        // is not text replaced).
        let args = utf8(&self.command, "command").and_then(|command| {
            let cwd = self.cwd.as_ref().map(|c| utf8(c, "cwd")).transpose()?;
            Ok((command, cwd))
        });
        let (command, cwd) = match args {
            Ok(args) => args,
            Err(e) => {
                let shown = self
                    .cwd
                    .as_ref()
                    .map_or(String::new(), |c| String::from_utf16_lossy(c));
                return Err(self.executor.audit_refusal(&shown, e));
            }
        };
        let _running = Running::new(&self.executor);
        self.executor.exec(
            &command,
            sandgate::ExecOptions {
                cwd,
                timeout_ms: self.timeout_ms,
                abort: Some(self.abort),
                ..Default::default()
            },
        )
    }
}

/// Ends one `exec`'s command when its environment goes away first: a
/// worker thread ended by `worker.terminate()` (or stopped as the process
/// exits) runs its environment's cleanup hooks, and none of its
/// JavaScript, before it is freed.
///
/// The hook holds one strong count of this, given back exactly once, on
/// the environment's thread: by the hook when it runs, or by
/// [`Teardown::unregister`] when the call settles first.
struct Teardown {
    executor: Arc<sandgate::Executor>,
    abort: AbortSignal,
    /// The hook is registered and has not run.
    registered: AtomicBool,
}

unsafe extern "C" fn on_teardown(data: *mut c_void) {
    // SAFETY: the count `Teardown::register` leaked for the hook; the hook
    // runs once, and only while `registered` (cleared here, or by
    // `unregister`, which removes the hook first: both on this thread).
    let teardown = unsafe { Arc::from_raw(data.cast::<Teardown>().cast_const()) };
    teardown.registered.store(false, Ordering::SeqCst);
    // The abort ends the command and everything it started, one that is
    // only starting too (an aborted signal runs nothing); `dispose` kills
    // what is left of the session and removes its private TMPDIR.
    teardown.abort.abort();
    teardown.executor.dispose();
}

impl Teardown {
    fn register(
        env: &Env,
        executor: &Arc<sandgate::Executor>,
        abort: &AbortSignal,
    ) -> napi::Result<Arc<Teardown>> {
        let teardown = Arc::new(Teardown {
            executor: Arc::clone(executor),
            abort: abort.clone(),
            registered: AtomicBool::new(true),
        });
        let data = Arc::into_raw(Arc::clone(&teardown));
        // SAFETY: a live environment, on its thread; `data` is unique to
        // this call, so the pair is registered once.
        let status = unsafe {
            napi::sys::napi_add_env_cleanup_hook(
                env.raw(),
                Some(on_teardown),
                data.cast_mut().cast(),
            )
        };
        if status != napi::sys::Status::napi_ok {
            // SAFETY: not registered: the count is still ours.
            drop(unsafe { Arc::from_raw(data) });
            return Err(napi::Error::from_reason(
                "cannot register the command's environment cleanup hook",
            ));
        }
        Ok(teardown)
    }

    /// The call settled while its environment is alive: the hook is
    /// removed and its count given back. On the environment's thread.
    fn unregister(&self, env: &Env) {
        if self.registered.swap(false, Ordering::SeqCst) {
            let data = std::ptr::from_ref(self);
            // SAFETY: a live environment, on its thread; the pair was
            // registered and has not run (`registered`), so its count is
            // given back here, once.
            unsafe {
                napi::sys::napi_remove_env_cleanup_hook(
                    env.raw(),
                    Some(on_teardown),
                    data.cast_mut().cast(),
                );
                drop(Arc::from_raw(data));
            }
        }
    }
}

/// The shell executor a policy grants: `[exec]` settings, confinement to
/// the policy's roots, the `exec_ops` budget and confined git.
///
/// `exec` may be called concurrently; each call runs on a thread of its
/// own, not on the libuv pool (so `UV_THREADPOOL_SIZE` does not bound how
/// many run at once, and they do not queue behind the sandbox's `…Async`
/// calls). When the calling thread's environment goes away with a command
/// running (a worker ended by `worker.terminate()`), the command and
/// everything it started are ended and its Promise is never settled.
#[napi]
pub struct Executor {
    inner: Arc<sandgate::Executor>,
}

impl Executor {
    /// A call `exec` refuses before the executor sees it (a command that
    /// is not a string, malformed options, an `abortSignal` that is not
    /// one), reported as the executor reports its own refusals
    /// ([`sandgate::Executor::audit_refusal`], which C's boundary uses
    /// too): one audit event `exec` on `cwd` as given (a lone surrogate
    /// shown as U+FFFD; `''` when absent or when the options could not be
    /// read), outcome the refusal's code, no budget spent. Answers the
    /// error to throw.
    fn refused(&self, env: &Env, cwd: Option<&Utf16String>, e: sandgate::Error) -> napi::Error {
        let shown = cwd.map_or_else(String::new, |c| String::from_utf16_lossy(c));
        js_error(env, &self.inner.audit_refusal(&shown, e))
    }
}

#[napi]
impl Executor {
    /// The executor `policy` grants (not started), with an optional audit
    /// callback. With `[exec] enabled = false` and no `process_allow` it
    /// exists but refuses every command with `E_DENIED`.
    #[napi(constructor)]
    pub fn new(
        env: &Env,
        #[napi(ts_arg_type = "Policy")] policy: Unknown<'_>,
        #[napi(ts_arg_type = "ExecutorOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<Self> {
        let policy = class_arg::<Policy>(&policy, "policy", "Policy").or_throw(env)?;
        let options: Option<ExecutorOptions> =
            options_of(env, options, "options", EXECUTOR_OPTIONS)?.or_throw(env)?;
        let inner = sandgate::Executor::from_policy(&policy.inner).or_throw(env)?;
        Ok(executor_with(inner, options))
    }

    /// The executor a policy stated from code grants
    /// (`Policy.fromOptions`): `Executor.fromOptions({ write_root:
    /// '/srv/work', enabled: true, timeout_ms: 30000 })`; `executorOptions`
    /// as for the constructor.
    #[napi(
        factory,
        ts_args_type = "options: { security_mode?: 'restricted' | 'trusted_host'; read_roots?: string[]; write_root?: string; deny_write?: string[]; max_read_bytes?: number; max_write_bytes?: number; allow_overwrite?: boolean; enabled?: boolean; shell?: string; timeout_ms?: number; max_output_bytes?: number; env_inherit?: string[]; confine?: 'off' | 'best_effort' | 'required'; process_allow?: string[]; max_memory_bytes?: number; max_tasks?: number; max_cpu_ms?: number; allow?: string[]; allow_http?: boolean; credentials?: Array<{ host: string; port?: number; header?: string; env?: string; file?: string; scheme?: 'Bearer' | 'token' | 'basic'; user?: string; methods?: string[]; path_prefixes?: string[] }>; rules?: Array<{ host: string; port?: number; methods?: string[]; path_prefixes?: string[]; action: 'allow' | 'deny' }>; fs_ops?: number; exec_ops?: number; net_ops?: number }, baseDir?: string | undefined | null, executorOptions?: ExecutorOptions | undefined | null"
    )]
    pub fn from_options(
        env: &Env,
        options: Unknown<'_>,
        base_dir: Option<Unknown<'_>>,
        executor_options: Option<Unknown<'_>>,
    ) -> napi::Result<Executor> {
        let executor_options: Option<ExecutorOptions> =
            options_of(env, executor_options, "executorOptions", EXECUTOR_OPTIONS)?
                .or_throw(env)?;
        let policy = crate::policy::from_options(env, options, base_dir)?.or_throw(env)?;
        let inner = sandgate::Executor::from_policy(&policy).or_throw(env)?;
        Ok(executor_with(inner, executor_options))
    }

    /// Whether the policy enables the shell.
    #[napi(getter)]
    pub fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    /// Prepares the session (private TMPDIR, confinement). Rejects with
    /// `E_CONFINE_UNAVAILABLE` when `confine = "required"` and the kernel
    /// lacks a part. `exec` also starts on first use.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn start(&self) -> AsyncTask<Job<(), ()>> {
        let ex = Arc::clone(&self.inner);
        AsyncTask::new(Job::new(move || ex.start(), same))
    }

    /// Runs `command` with the policy's shell. Resolves with the result
    /// (whatever the exit code); rejects only when refused before anything
    /// ran (`E_DENIED`, `E_PATH_*`, `E_REQUEST`, `E_CONFINE_UNAVAILABLE`,
    /// a spent budget).
    #[napi(ts_return_type = "Promise<ExecOutput>")]
    pub fn exec<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "string")] command: Unknown<'_>,
        #[napi(ts_arg_type = "ExecOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<Object<'env>> {
        // Thrown at the call, like malformed options; a lone surrogate
        // rejects (`ExecCall::run`). Either way the refusal is reported
        // as the executor reports its own (`refused`).
        let command = wide_arg(command, "command");
        let options: Result<Option<ExecOptions>, _> = options_of(
            env,
            options,
            "options",
            &["cwd", "timeoutMs", "abortSignal"],
        )?;
        let (command, (cwd, timeout_ms, signal)) = match (command, options) {
            (Ok(command), Ok(o)) => (
                command,
                o.map_or((None, None, None), |o| {
                    (o.cwd, o.timeout_ms, o.abort_signal)
                }),
            ),
            (Err(e), Ok(Some(o))) => {
                if let Some(s) = o.abort_signal {
                    s.unref(env)?;
                }
                return Err(self.refused(env, o.cwd.as_ref(), e));
            }
            (Err(e), _) | (Ok(_), Err(e)) => return Err(self.refused(env, None, e)),
        };
        let timeout = match timeout_ms.map(|ms| to_count(ms, "timeoutMs")).transpose() {
            Ok(ms) => ms,
            Err(e) => {
                if let Some(s) = signal {
                    s.unref(env)?;
                }
                return Err(self.refused(env, cwd.as_ref(), e));
            }
        };
        // Every command has a native abort: the caller's `abortSignal`
        // fires it, and so does its environment's teardown (`Teardown`).
        // Its eventfd takes a descriptor: out of them, the call throws
        // naming the shortage rather than panic.
        let abort = match AbortSignal::try_new() {
            Ok(abort) => abort,
            Err(e) => {
                if let Some(s) = signal {
                    s.unref(env)?;
                }
                let e = sandgate::Error::new(
                    sandgate::ErrorCode::Io,
                    format!("cannot make the command's abort signal: {e}"),
                );
                return Err(self.refused(env, cwd.as_ref(), e));
            }
        };
        // The command runs on a thread of its own, not as work on the
        // libuv pool: a worker's teardown waits for the pool work it
        // started (a command for as long as its timeout lets it), and no
        // hook of the worker runs first. The thread waits for its call:
        // when it cannot start (out of threads), nothing has been handed
        // to it and the call throws naming the shortage.
        let (send, receive) = mpsc::channel::<(ExecCall, JsDeferred<ExecOutput, Settle>, Finish)>();
        let started = std::thread::Builder::new()
            .name("sandgate-exec".to_owned())
            .spawn(move || {
                if let Ok((call, deferred, finish)) = receive.recv() {
                    run_and_settle(call, deferred, finish);
                }
            });
        if let Err(e) = started {
            if let Some(s) = signal {
                s.unref(env)?;
            }
            let e = sandgate::Error::new(
                sandgate::ErrorCode::Io,
                format!("cannot start the command's thread: {e}"),
            );
            return Err(self.refused(env, cwd.as_ref(), e));
        }
        // From here an early return drops `send`, and the thread ends
        // without running anything.
        let listener = match signal {
            None => None,
            Some(signal) => {
                let on_abort = abort.clone();
                connect(env, signal, move || on_abort.abort())?
                    .map_err(|e| self.refused(env, cwd.as_ref(), e))?
            }
        };
        let teardown = match Teardown::register(env, &self.inner, &abort) {
            Ok(teardown) => teardown,
            Err(e) => {
                if let Some(c) = listener {
                    c.disconnect(env)?;
                }
                return Err(e);
            }
        };
        let (deferred, promise) = match env.create_deferred::<ExecOutput, Settle>() {
            Ok(created) => created,
            Err(e) => {
                teardown.unregister(env);
                if let Some(c) = listener {
                    c.disconnect(env)?;
                }
                return Err(e);
            }
        };
        let call = ExecCall {
            executor: Arc::clone(&self.inner),
            command,
            cwd,
            timeout_ms: timeout,
            abort,
        };
        // The Promise is settled on this thread, once it takes the result
        // the command's thread hands it. When the environment went away
        // first, napi drops that unrun (on the command's thread): nothing
        // then touches the freed environment, and the hook has already
        // ended the command.
        let finish = Finish { teardown, listener };
        // The thread is waiting for this, and ends only once it has it.
        if let Err(mpsc::SendError((_, deferred, finish))) = send.send((call, deferred, finish)) {
            deferred.resolve(Box::new(move |env: Env| {
                finish.run(&env)?;
                Err(napi::Error::from_reason("the command's thread ended early"))
            }));
        }
        Ok(promise)
    }

    /// `dispose` on the calling thread: for a `process.on('exit')`
    /// handler, where a Promise never settles.
    #[napi]
    pub fn dispose_sync(&self) {
        self.inner.dispose();
    }

    /// `disposeSync` of every executor with a command in flight, in this
    /// thread or any worker thread: what the package runs on the main
    /// thread's `'exit'`. (A worker's commands are also ended when Node
    /// stops the worker as the process exits, by its environment's
    /// teardown.)
    #[napi]
    pub fn dispose_running() {
        let all: Vec<Arc<sandgate::Executor>> = RUNNING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|(w, _)| w.upgrade())
            .collect();
        for executor in all {
            executor.dispose();
        }
    }

    /// Kills anything still running and removes the private TMPDIR.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn dispose(&self) -> AsyncTask<Job<(), ()>> {
        let ex = Arc::clone(&self.inner);
        AsyncTask::new(Job::new(
            move || {
                ex.dispose();
                Ok(())
            },
            same,
        ))
    }
}
