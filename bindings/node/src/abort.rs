//! A JavaScript `AbortSignal` connected to a native abort for one call
//! (`Executor.exec`: its native `AbortSignal`).
//!
//! The `abort` listener is added when the call is made and removed when it
//! ends, whichever way ([`Connection::disconnect`], from the task's
//! `finally`): a signal reused for many calls gathers no listeners.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{FnArgs, Function, FunctionRef, JsObjectValue, ObjectRef, Unknown};
use napi::Env;

use crate::request_error;

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
    pub(crate) fn disconnect(self, env: &Env) -> napi::Result<()> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        let removed = remove_listener(env, &self.signal, &self.listener);
        self.signal.unref(env)?;
        removed
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
