//! A JavaScript `AbortSignal` connected to a native abort for one call:
//! `Executor.exec` (its native `AbortSignal`), `Fetcher.fetchAsync` and the
//! sandbox's searches and ranged reads (a flag the operation looks at).
//!
//! The `abort` listener is added when the call is made and removed when it
//! ends, whichever way ([`Connection::disconnect`], from the task's
//! `finally`): a signal reused for many calls gathers no listeners.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{
    FnArgs, FromNapiValue, Function, FunctionRef, JsObjectValue, JsValue, Object, ObjectRef,
    Unknown, ValueType,
};
use napi::Env;
use napi_derive::napi;
use sandgate::ErrorCode;

use crate::{options_of, request_error, wrong_type};

/// Options of the `…Async` calls that an `AbortSignal` can stop.
// The calls' types name it; the key itself is read by `Abort::of_options`,
// which refuses a value that is not an object by name.
#[allow(dead_code)]
#[napi(object, object_to_js = false)]
pub struct AbortOptions {
    /// Aborting it stops the call: its Promise rejects with `E_ABORTED`
    /// (at once when the signal is already aborted).
    #[napi(ts_type = "AbortSignal")]
    pub abort_signal: Option<ObjectRef<false>>,
}

/// The option's name as JavaScript spells it.
pub(crate) const ABORT_SIGNAL: &str = "abortSignal";

type Listener = FunctionRef<(), ()>;

/// What the listener does on `abort`.
type OnAbort = Box<dyn Fn() + Send>;

/// What the JavaScript `abort` listener calls; emptied when the call is
/// done, so what it holds (an executor's eventfd) is released at once
/// rather than when the garbage collector finalizes the listener.
type Slot = Arc<Mutex<Option<OnAbort>>>;

/// An `abort` listener added to a JavaScript `AbortSignal` for one call.
pub(crate) struct Connection {
    signal: ObjectRef<false>,
    listener: Listener,
    slot: Slot,
}

impl Connection {
    /// Ends the connection: the listener no longer aborts anything, is
    /// removed from the signal, and the signal is no longer held.
    ///
    /// A signal whose `removeEventListener` throws (or is not a function)
    /// keeps the listener, which does nothing any more (its slot is
    /// emptied first): the exception is dropped. Raised here, from the
    /// call's completion rather than from anything the caller called, it
    /// was an uncaught exception that ended the process, and the call's
    /// Promise never settled.
    pub(crate) fn disconnect(self, env: &Env) -> napi::Result<()> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        if remove_listener(env, &self.signal, &self.listener).is_err() {
            clear_exception(env);
        }
        self.signal.unref(env)
    }
}

impl Connection {
    /// Ends the connection without its environment, which went away
    /// first: what the listener would call is dropped (an executor's
    /// eventfd closed), and the references into the freed environment are
    /// let go without a call into it (its teardown reclaimed them).
    pub(crate) fn abandon(self) {
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        std::mem::forget(self.listener);
        std::mem::forget(self.signal);
    }
}

/// Drops the JavaScript exception pending in `env`, if any.
fn clear_exception(env: &Env) {
    let mut pending = false;
    // SAFETY: a live environment, on its thread; a live output.
    let status = unsafe { napi::sys::napi_is_exception_pending(env.raw(), &mut pending) };
    if status == napi::sys::Status::napi_ok && pending {
        let mut exception = std::ptr::null_mut();
        // SAFETY: as above.
        unsafe { napi::sys::napi_get_and_clear_last_exception(env.raw(), &mut exception) };
    }
}

type ListenerArgs<'a> = FnArgs<(String, Function<'a, (), ()>)>;

fn remove_listener(env: &Env, signal: &ObjectRef<false>, listener: &Listener) -> napi::Result<()> {
    let obj = signal.get_value(env)?;
    let remove: Function<ListenerArgs<'_>, Unknown<'_>> =
        obj.get_named_property("removeEventListener")?;
    remove.apply(
        obj,
        FnArgs::from(("abort".to_owned(), listener.borrow_back(env)?)),
    )?;
    Ok(())
}

/// Connects a JavaScript `AbortSignal` to `on_abort`: called at once when
/// the signal is already aborted (no connection then), else from an
/// `abort` listener until the connection is ended. A value that is not an
/// `AbortSignal` (no `aborted`, no `addEventListener`) is the inner
/// `E_REQUEST`. The reference to `signal` is kept by the connection or
/// released here.
pub(crate) fn connect(
    env: &Env,
    signal: ObjectRef<false>,
    on_abort: impl Fn() + Send + 'static,
) -> napi::Result<Result<Option<Connection>, sandgate::Error>> {
    match listen(env, &signal, Box::new(on_abort)) {
        Ok(Ok(Some((listener, slot)))) => Ok(Ok(Some(Connection {
            signal,
            listener,
            slot,
        }))),
        other => {
            signal.unref(env)?;
            other.map(|r| r.map(|_| None))
        }
    }
}

fn listen(
    env: &Env,
    signal: &ObjectRef<false>,
    on_abort: OnAbort,
) -> napi::Result<Result<Option<(Listener, Slot)>, sandgate::Error>> {
    let obj = signal.get_value(env)?;
    let aborted: Option<bool> = obj.get_named_property("aborted").ok();
    let add: Option<Function<ListenerArgs<'_>, Unknown<'_>>> =
        obj.get_named_property("addEventListener").ok();
    let (Some(aborted), Some(add)) = (aborted, add) else {
        return Ok(Err(request_error(format!(
            "`{ABORT_SIGNAL}` must be an AbortSignal"
        ))));
    };
    if aborted {
        on_abort();
        return Ok(Ok(None));
    }
    let slot: Slot = Arc::new(Mutex::new(Some(on_abort)));
    let for_listener = Arc::clone(&slot);
    let listener = env.create_function_from_closure::<(), (), _>("onabort", move |_| {
        if let Some(f) = for_listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            f();
        }
        Ok(())
    })?;
    let kept = listener.create_ref()?;
    add.apply(obj, FnArgs::from(("abort".to_owned(), listener)))?;
    Ok(Ok(Some((kept, slot))))
}

/// An `…Async` call's `abortSignal` as the operation sees it: the flag the
/// signal sets (none without a signal), the listener to remove when the
/// call ends, or the `E_REQUEST` for a value that is not an `AbortSignal`
/// (the call then rejects with it).
#[derive(Default)]
pub(crate) struct Abort {
    flag: Option<Arc<AtomicBool>>,
    connection: Option<Connection>,
    error: Option<sandgate::Error>,
}

impl Abort {
    /// The `Abort` of an optional `abortSignal`.
    pub(crate) fn of(env: &Env, signal: Option<ObjectRef<false>>) -> napi::Result<Abort> {
        let Some(signal) = signal else {
            return Ok(Abort::default());
        };
        let flag = Arc::new(AtomicBool::new(false));
        let set = Arc::clone(&flag);
        Ok(
            match connect(env, signal, move || set.store(true, Ordering::SeqCst))? {
                Ok(connection) => Abort {
                    flag: Some(flag),
                    connection,
                    error: None,
                },
                Err(e) => Abort::refused(e),
            },
        )
    }

    /// The `Abort` of the `abortSignal` key of an options object whose
    /// other keys are read (and checked) elsewhere; `v` not an object: no
    /// signal. A value that is neither `undefined`, `null` nor an object
    /// is the `E_REQUEST` naming `abortSignal`.
    pub(crate) fn of_options(env: &Env, v: Option<Unknown<'_>>) -> napi::Result<Abort> {
        let Some(v) = v.filter(|v| v.get_type().ok() == Some(ValueType::Object)) else {
            return Ok(Abort::default());
        };
        // SAFETY: a live object of this environment.
        let obj = unsafe { Object::from_napi_value(env.raw(), v.raw())? };
        let signal: Unknown<'_> = obj.get_named_property(ABORT_SIGNAL)?;
        match signal.get_type()? {
            ValueType::Undefined | ValueType::Null => Ok(Abort::default()),
            ValueType::Object | ValueType::Function => {
                // SAFETY: a live object of this environment.
                let signal = unsafe { ObjectRef::from_napi_value(env.raw(), signal.raw())? };
                Abort::of(env, Some(signal))
            }
            _ => Ok(Abort::refused(wrong_type(
                &signal,
                ABORT_SIGNAL,
                "an AbortSignal",
            ))),
        }
    }

    /// The `Abort` of a call refused with `e` before it starts.
    pub(crate) fn refused(e: sandgate::Error) -> Abort {
        Abort {
            error: Some(e),
            ..Abort::default()
        }
    }

    /// The listener to remove when the call ends (the task keeps it).
    pub(crate) fn take_connection(&mut self) -> Option<Connection> {
        self.connection.take()
    }

    /// Before the operation starts: the `E_REQUEST` of a malformed signal,
    /// or `E_ABORTED` when the signal was aborted already (so nothing is
    /// spent on it); else the flag to hand the operation.
    pub(crate) fn check(&mut self) -> Result<Option<Arc<AtomicBool>>, sandgate::Error> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match &self.flag {
            Some(f) if f.load(Ordering::SeqCst) => Err(aborted()),
            flag => Ok(flag.clone()),
        }
    }
}

/// The `options` argument of an `…Async` call that takes only
/// `abortSignal` ([`AbortOptions`]): another key, or options that are not
/// an object, are the `E_REQUEST` the call rejects with.
pub(crate) fn abort_arg(env: &Env, options: Option<Unknown<'_>>) -> napi::Result<Abort> {
    match options_of::<Object<'_>>(env, options, "options", &[ABORT_SIGNAL])? {
        Ok(_) => Abort::of_options(env, options),
        Err(e) => Ok(Abort::refused(e)),
    }
}

/// The `E_ABORTED` of a call whose signal was aborted before it started.
pub(crate) fn aborted() -> sandgate::Error {
    sandgate::Error::new(ErrorCode::Aborted, "the call was aborted")
}
