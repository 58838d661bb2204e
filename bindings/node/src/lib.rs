//! Node.js binding of sandgate (napi-rs), linked straight to the Rust facade.
//!
//! Classes exported to JavaScript:
//!
//! - [`Root`]: the mechanism (docs/reference/resolution.md), beneath semantics, file descriptors
//!   usable with Node's `fs`;
//! - [`Policy`]: a loaded policy file (docs/reference/policy.md), its digest and summary;
//! - [`Sandbox`]: the agent-facing file tools (docs/reference/names.md and docs/reference/sandbox.md), each as a
//!   synchronous method and as an `…Async` twin that runs on the libuv pool
//!   and returns a `Promise`;
//! - [`Executor`]: the shell executor a policy grants (docs/reference/executor.md), in the
//!   `start()` / `exec()` / `dispose()` shape of open-multi-agent's
//!   `ShellExecutor`;
//! - [`Fetcher`]: the confined web fetch a policy grants (docs/reference/policy.md), as
//!   `fetch` and its `fetchAsync` twin.
//!
//! Every refusal is thrown (or rejected) as a JavaScript `Error` whose
//! `code` is the error code string (`'E_PATH_ESCAPE'`), with `path`,
//! `pattern`, `key` and `errno` set where the error carries them.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use napi::bindgen_prelude::{
    FromNapiValue, JsObjectValue, JsValue, Object, ToNapiValue, TypeName, Unknown, Utf16String,
};
use napi::{Env, Task};
use sandgate::ErrorCode;

mod abort;
mod executor;
mod fetch;
mod policy;
mod root;
mod sandbox;

pub use executor::Executor;
pub use fetch::Fetcher;
pub use policy::Policy;
pub use root::Root;
pub use sandbox::Sandbox;

/// Module init, after the classes are registered on `exports`: installs
/// the fast `Root#stat` / `Root#lstat` (see `root.rs`).
#[napi_derive::napi(module_exports)]
pub fn init(exports: Object, env: Env) -> napi::Result<()> {
    root::install_fast_stat(&env, &exports)
}

/// Builds the JavaScript `Error` for a sandgate error: `message` is
/// `"<code>: <message>"`, and `code`, `path`, `pattern`, `key`, `errno`
/// are own properties.
pub(crate) fn js_error(env: &Env, e: &sandgate::Error) -> napi::Error {
    js_error_with(env, e, |_| Ok(()))
}

/// [`js_error`], then `extra` sets more own properties on the `Error`.
pub(crate) fn js_error_with(
    env: &Env,
    e: &sandgate::Error,
    extra: impl FnOnce(&mut Object<'_>) -> napi::Result<()>,
) -> napi::Error {
    build_js_error(env, e, extra).unwrap_or_else(|fallback| fallback)
}

fn build_js_error(
    env: &Env,
    e: &sandgate::Error,
    extra: impl FnOnce(&mut Object<'_>) -> napi::Result<()>,
) -> Result<napi::Error, napi::Error> {
    let mut obj = env.create_error(napi::Error::new(
        napi::Status::GenericFailure,
        // The whole text: an error with a cause displays only its code.
        format!("{}: {}", e.code(), e.message()),
    ))?;
    obj.set_named_property("code", e.code().as_str())?;
    if let Some(p) = e.path() {
        obj.set_named_property("path", p)?;
    }
    if let Some(p) = e.pattern() {
        obj.set_named_property("pattern", p)?;
    }
    if let Some(k) = e.key() {
        obj.set_named_property("key", k)?;
    }
    if let Some(n) = e.errno() {
        obj.set_named_property("errno", n)?;
    }
    extra(&mut obj)?;
    Ok(napi::Error::from(obj.to_unknown()))
}

/// A malformed argument from JavaScript (`E_REQUEST`).
pub(crate) fn request_error(message: impl Into<String>) -> sandgate::Error {
    sandgate::Error::new(ErrorCode::Request, message)
}

/// Converts a JavaScript number argument to a non-negative integer.
pub(crate) fn to_count(v: f64, what: &str) -> Result<u64, sandgate::Error> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_991.0 {
        Ok(v as u64)
    } else {
        Err(request_error(format!(
            "`{what}` must be a non-negative integer"
        )))
    }
}

/// Converts a JavaScript number argument to a count (`to_count`): Node-API's
/// `u32` conversion would take it modulo 2**32 (`2 ** 32 + 3` as 3, `-1`
/// as 4294967295, `NaN` as 0) and drop a fraction, so a caller's mistake
/// would be acted on as another value.
pub(crate) fn to_usize(v: f64, what: &str) -> Result<usize, sandgate::Error> {
    usize::try_from(to_count(v, what)?).map_err(|_| request_error(format!("`{what}` is too large")))
}

/// Converts a JavaScript number argument to permission bits: an integer
/// from 0 to 0o777 (no setuid, setgid or sticky bit), else `E_REQUEST`.
pub(crate) fn to_mode(v: f64, what: &str) -> Result<u32, sandgate::Error> {
    // Permission bits only, as Go's Root allows: the library would set a
    // setuid, setgid or sticky bit asked for, which a host API that
    // creates files has no need of.
    match to_count(v, what)? {
        n @ 0..=0o777 => Ok(n as u32),
        n => Err(request_error(format!(
            "`{what}` {n:#o}: unsupported file mode (only the permission bits 0o777)"
        ))),
    }
}

/// A JavaScript string argument as UTF-8. Node-API's own conversion writes
/// U+FFFD for a lone surrogate (U+D800..U+DFFF outside a pair) without a
/// word, so `'a\uD800b'` would name `'a\uFFFDb'`, which the caller did not
/// write: such a string is `E_REQUEST` naming the argument instead.
pub(crate) fn utf8(s: &[u16], what: &str) -> Result<String, sandgate::Error> {
    String::from_utf16(s).map_err(|_| lone_surrogate(what))
}

/// The `E_REQUEST` for a string argument holding a lone surrogate.
pub(crate) fn lone_surrogate(what: &str) -> sandgate::Error {
    request_error(format!(
        "`{what}` holds a lone surrogate (U+D800..U+DFFF outside a pair), which UTF-8 cannot encode"
    ))
}

/// [`utf8`] of an optional argument.
pub(crate) fn utf8_opt(
    s: Option<Utf16String>,
    what: &str,
) -> Result<Option<String>, sandgate::Error> {
    s.map(|s| utf8(&s, what)).transpose()
}

/// [`utf8`] of each string of an array argument.
pub(crate) fn utf8_vec(v: Vec<Utf16String>, what: &str) -> Result<Vec<String>, sandgate::Error> {
    v.iter().map(|s| utf8(s, what)).collect()
}

/// The JSON value of a JavaScript options object, each value read once.
///
/// napi-rs' own conversion writes U+FFFD for a lone surrogate without a
/// word (a root or a deny pattern the caller did not write would be
/// granted), keeps an integer past 32 bits as a float, and a check that
/// read the value again judged a getter's second answer, not the one used.
/// Here every property is read once, and that read is what is judged and
/// used: a lone surrogate in a string or a key is `E_REQUEST` naming its
/// place (`options.deny_write.0`); so is what JSON cannot hold
/// (`undefined` for a missing argument, a function, a symbol, NaN), named
/// by the argument. Depth and node count are bounded as napi-rs bounds
/// them.
pub(crate) fn json_of(
    env: &Env,
    v: Unknown<'_>,
    what: &str,
) -> napi::Result<Result<serde_json::Value, sandgate::Error>> {
    let mut reader = JsonReader {
        env: env.raw(),
        what,
        nodes: JSON_MAX_NODES,
    };
    // SAFETY: a live value of this environment.
    unsafe { reader.read(v.raw(), JSON_MAX_DEPTH, what) }
}

/// napi-rs' bounds on a conversion to JSON (a cycle, a shared DAG).
const JSON_MAX_DEPTH: u32 = 128;
const JSON_MAX_NODES: usize = 1_000_000;

struct JsonReader<'a> {
    env: napi::sys::napi_env,
    what: &'a str,
    nodes: usize,
}

impl JsonReader<'_> {
    fn cannot(&self, why: &str) -> sandgate::Error {
        request_error(format!("`{}` cannot be read as JSON: {why}", self.what))
    }

    /// # Safety
    ///
    /// `v` is a live value of `self.env`.
    unsafe fn read(
        &mut self,
        v: napi::sys::napi_value,
        depth: u32,
        place: &str,
    ) -> napi::Result<Result<serde_json::Value, sandgate::Error>> {
        use napi::bindgen_prelude::BigInt;
        use napi::{sys, ValueType};
        use serde_json::Value;
        let env = self.env;
        if self.nodes == 0 {
            return Ok(Err(self.cannot("Exceeded maximum JSON value count")));
        }
        self.nodes -= 1;
        let mut ty = 0;
        // SAFETY: a live value; `ty` is a live local.
        napi::check_status!(unsafe { sys::napi_typeof(env, v, &mut ty) })?;
        Ok(Ok(match ValueType::from(ty) {
            ValueType::Null => Value::Null,
            ValueType::Boolean => {
                // SAFETY: a live boolean of this environment.
                Value::Bool(unsafe { bool::from_napi_value(env, v)? })
            }
            ValueType::Number => {
                // SAFETY: live values of this environment (of the type read); live outputs.
                let f = unsafe { f64::from_napi_value(env, v)? };
                match exact_number(f) {
                    Some(n) => Value::Number(n),
                    None => {
                        return Ok(Err(
                            self.cannot("Failed to convert js number to serde_json::Number")
                        ))
                    }
                }
            }
            ValueType::String => {
                // SAFETY: live values of this environment (of the type read); live outputs.
                let wide = unsafe { Utf16String::from_napi_value(env, v)? };
                match String::from_utf16(&wide) {
                    Ok(s) => Value::String(s),
                    Err(_) => return Ok(Err(lone_surrogate(place))),
                }
            }
            ValueType::BigInt => {
                // SAFETY: live values of this environment (of the type read); live outputs.
                let n = unsafe { BigInt::from_napi_value(env, v)? };
                let (exact, number): (bool, serde_json::Number) = if n.sign_bit {
                    let (i, lossless) = n.get_i64();
                    (lossless, i.into())
                } else {
                    let (_, u, lossless) = n.get_u64();
                    (lossless, u.into())
                };
                if exact {
                    Value::Number(number)
                } else {
                    let mut text = std::ptr::null_mut();
                    // SAFETY: live values of this environment (of the type read); live outputs.
                    napi::check_status!(unsafe { sys::napi_coerce_to_string(env, v, &mut text) })?;
                    // SAFETY: live values of this environment (of the type read); live outputs.
                    Value::String(unsafe { String::from_napi_value(env, text)? })
                }
            }
            ValueType::Object => {
                if depth == 0 {
                    return Ok(Err(self.cannot("Exceeded maximum JSON nesting depth")));
                }
                let mut is_array = false;
                // SAFETY: live values of this environment (of the type read); live outputs.
                napi::check_status!(unsafe { sys::napi_is_array(env, v, &mut is_array) })?;
                if is_array {
                    let mut len = 0;
                    // SAFETY: live values of this environment (of the type read); live outputs.
                    napi::check_status!(unsafe { sys::napi_get_array_length(env, v, &mut len) })?;
                    let mut items = Vec::with_capacity(len.min(1024) as usize);
                    for i in 0..len {
                        let mut e = std::ptr::null_mut();
                        // SAFETY: live values of this environment (of the type read); live outputs.
                        napi::check_status!(unsafe { sys::napi_get_element(env, v, i, &mut e) })?;
                        // SAFETY: live values of this environment (of the type read); live outputs.
                        match unsafe { self.read(e, depth - 1, &format!("{place}.{i}"))? } {
                            Ok(item) => items.push(item),
                            Err(e) => return Ok(Err(e)),
                        }
                    }
                    Value::Array(items)
                } else {
                    let mut names = std::ptr::null_mut();
                    // SAFETY: live values of this environment (of the type read); live outputs.
                    napi::check_status!(unsafe {
                        sys::napi_get_property_names(env, v, &mut names)
                    })?;
                    let mut n = 0;
                    // SAFETY: live values of this environment (of the type read); live outputs.
                    napi::check_status!(unsafe { sys::napi_get_array_length(env, names, &mut n) })?;
                    let mut map = serde_json::Map::new();
                    for i in 0..n {
                        let mut name = std::ptr::null_mut();
                        // SAFETY: live values of this environment (of the type read); live outputs.
                        napi::check_status!(unsafe {
                            sys::napi_get_element(env, names, i, &mut name)
                        })?;
                        // A key is a string (numbers are given as strings).
                        // SAFETY: live values of this environment (of the type read); live outputs.
                        let wide = unsafe { Utf16String::from_napi_value(env, name)? };
                        let Ok(key) = String::from_utf16(&wide) else {
                            return Ok(Err(lone_surrogate(&format!("a key of {place}"))));
                        };
                        // The one read of this property: a getter runs once.
                        let mut value = std::ptr::null_mut();
                        // SAFETY: live values of this environment (of the type read); live outputs.
                        napi::check_status!(unsafe {
                            sys::napi_get_property(env, v, name, &mut value)
                        })?;
                        let mut vt = 0;
                        // SAFETY: live values of this environment (of the type read); live outputs.
                        napi::check_status!(unsafe { sys::napi_typeof(env, value, &mut vt) })?;
                        if ValueType::from(vt) == ValueType::Undefined {
                            continue;
                        }
                        let place = format!("{place}.{key}");
                        // SAFETY: live values of this environment (of the type read); live outputs.
                        match unsafe { self.read(value, depth - 1, &place)? } {
                            Ok(item) => {
                                map.insert(key, item);
                            }
                            Err(e) => return Ok(Err(e)),
                        }
                    }
                    Value::Object(map)
                }
            }
            ValueType::Undefined => {
                return Ok(Err(
                    self.cannot("undefined cannot be represented as a serde_json::Value")
                ))
            }
            ValueType::Function => {
                return Ok(Err(self.cannot(
                    "JS functions cannot be represented as a serde_json::Value",
                )))
            }
            ValueType::Symbol => {
                return Ok(Err(self.cannot(
                    "JS symbols cannot be represented as a serde_json::Value",
                )))
            }
            ValueType::External => {
                return Ok(Err(self.cannot(
                    "External JS objects cannot be represented as a serde_json::Value",
                )))
            }
            _ => {
                return Ok(Err(self.cannot(
                    "Unknown JS variables cannot be represented as a serde_json::Value",
                )))
            }
        }))
    }
}

/// A JavaScript number as JSON: an exact integer (at most
/// `Number.MAX_SAFE_INTEGER` from 0) as an integer, past 32 bits too, so
/// that a count or a byte cap takes it (`8 * 2 ** 30` of memory was
/// "floating point `8589934592.0`"); past 2 ** 53 a double may not be the
/// integer written (`2 ** 53 + 1 === 2 ** 53`): it stays a float, refused
/// where an integer is wanted (a BigInt states it exactly). `None` for NaN
/// and the infinities.
fn exact_number(f: f64) -> Option<serde_json::Number> {
    const SAFE: f64 = 9_007_199_254_740_991.0;
    if f.trunc() == f && f.abs() <= SAFE {
        Some(if f < 0.0 {
            (f as i64).into()
        } else {
            (f as u64).into()
        })
    } else {
        serde_json::Number::from_f64(f)
    }
}

/// What a JavaScript value is, for an error naming an argument of the
/// wrong type.
fn kind_of(v: &Unknown<'_>) -> &'static str {
    use napi::bindgen_prelude::ValueType;
    match v.get_type() {
        Ok(ValueType::Undefined) => "undefined",
        Ok(ValueType::Null) => "null",
        Ok(ValueType::Boolean) => "a boolean",
        Ok(ValueType::Number) => "a number",
        Ok(ValueType::BigInt) => "a bigint",
        Ok(ValueType::String) => "a string",
        Ok(ValueType::Symbol) => "a symbol",
        Ok(ValueType::Function) => "a function",
        Ok(ValueType::Object) => "an object",
        _ => "another kind of value",
    }
}

/// The `E_REQUEST` for argument `what`, which is not `expected`. napi-rs'
/// own conversion of a declared argument type throws an error whose code
/// is a Node-API status (`StringExpected`, `InvalidArg`) and whose message
/// names no argument, unlike every other refusal of a malformed call and
/// unlike the other bindings: so the methods take their arguments as
/// JavaScript values and convert them here.
pub(crate) fn wrong_type(v: &Unknown<'_>, what: &str, expected: &str) -> sandgate::Error {
    request_error(format!("`{what}` must be {expected}, not {}", kind_of(v)))
}

/// A Node-API failure while reading argument `what`, as `E_REQUEST`.
fn unreadable(e: napi::Error, what: &str) -> sandgate::Error {
    request_error(format!("`{what}` cannot be read: {}", e.reason))
}

/// Whether `v` is `undefined` or `null` (an optional argument left out).
pub(crate) fn is_nullish(v: &Unknown<'_>) -> bool {
    use napi::bindgen_prelude::ValueType;
    matches!(v.get_type(), Ok(ValueType::Undefined | ValueType::Null))
}

/// A string argument as JavaScript holds it (UTF-16); anything else is
/// `E_REQUEST` naming it ([`wrong_type`]).
pub(crate) fn wide_arg(v: Unknown<'_>, what: &str) -> Result<Utf16String, sandgate::Error> {
    use napi::bindgen_prelude::ValueType;
    if v.get_type().map_err(|e| unreadable(e, what))? != ValueType::String {
        return Err(wrong_type(&v, what, "a string"));
    }
    // SAFETY: a live string of this environment.
    unsafe { Utf16String::from_napi_value(v.value().env, v.raw()) }.map_err(|e| unreadable(e, what))
}

/// A string argument as UTF-8 ([`wide_arg`], then [`utf8`]).
pub(crate) fn str_arg(v: Unknown<'_>, what: &str) -> Result<String, sandgate::Error> {
    utf8(&wide_arg(v, what)?, what)
}

/// [`str_arg`] of an optional argument (`undefined` or `null`: none).
pub(crate) fn opt_str_arg(
    v: Option<Unknown<'_>>,
    what: &str,
) -> Result<Option<String>, sandgate::Error> {
    v.filter(|v| !is_nullish(v))
        .map(|v| str_arg(v, what))
        .transpose()
}

/// An optional number argument (`undefined` or `null`: none); anything
/// else but a number is `E_REQUEST` naming it.
pub(crate) fn opt_num_arg(
    v: Option<Unknown<'_>>,
    what: &str,
) -> Result<Option<f64>, sandgate::Error> {
    use napi::bindgen_prelude::ValueType;
    let Some(v) = v.filter(|v| !is_nullish(v)) else {
        return Ok(None);
    };
    if v.get_type().map_err(|e| unreadable(e, what))? != ValueType::Number {
        return Err(wrong_type(&v, what, "a number"));
    }
    // SAFETY: a live number of this environment.
    unsafe { f64::from_napi_value(v.value().env, v.raw()) }
        .map(Some)
        .map_err(|e| unreadable(e, what))
}

/// An optional boolean argument (`undefined` or `null`: none); anything
/// else but a boolean is `E_REQUEST` naming it.
pub(crate) fn opt_bool_arg(
    v: Option<Unknown<'_>>,
    what: &str,
) -> Result<Option<bool>, sandgate::Error> {
    use napi::bindgen_prelude::ValueType;
    let Some(v) = v.filter(|v| !is_nullish(v)) else {
        return Ok(None);
    };
    if v.get_type().map_err(|e| unreadable(e, what))? != ValueType::Boolean {
        return Err(wrong_type(&v, what, "a boolean"));
    }
    // SAFETY: a live boolean of this environment.
    unsafe { bool::from_napi_value(v.value().env, v.raw()) }
        .map(Some)
        .map_err(|e| unreadable(e, what))
}

/// Content to write: a string (as UTF-8) or a `Buffer` (copied); anything
/// else is `E_REQUEST` naming it. A string holding a lone surrogate is
/// `E_REQUEST` too ([`str_arg`]): Node-API's own conversion would write
/// U+FFFD in its place, bytes the caller did not give; bytes that are not
/// UTF-8 are written from a `Buffer` or `Uint8Array`.
pub(crate) fn data_arg(v: Unknown<'_>, what: &str) -> Result<Vec<u8>, sandgate::Error> {
    use napi::bindgen_prelude::{Buffer, ValidateNapiValue, ValueType};
    let env = v.value().env;
    match v.get_type().map_err(|e| unreadable(e, what))? {
        ValueType::String => str_arg(v, what).map(String::into_bytes),
        // SAFETY: a live object of this environment, checked to be a Buffer.
        ValueType::Object if unsafe { Buffer::validate(env, v.raw()) }.is_ok() => {
            // SAFETY: as above.
            unsafe { Buffer::from_napi_value(env, v.raw()) }
                .map(|b| b.to_vec())
                .map_err(|e| unreadable(e, what))
        }
        _ => Err(wrong_type(&v, what, "a string or a Buffer")),
    }
}

/// An instance of the class `T` (named `class` in JavaScript) as an
/// argument; anything else is `E_REQUEST` naming it.
pub(crate) fn class_arg<'a, T>(
    v: &Unknown<'a>,
    what: &str,
    class: &str,
) -> Result<napi::bindgen_prelude::ClassInstance<'a, T>, sandgate::Error>
where
    T: napi::bindgen_prelude::MaybeTypeTag + 'a,
{
    use napi::bindgen_prelude::ClassInstance;
    // SAFETY: a live value of this environment; the conversion checks that
    // it wraps a `T` (type tag and class identity).
    unsafe { ClassInstance::<T>::from_napi_value(v.value().env, v.raw()) }
        .map_err(|_| wrong_type(v, what, &format!("a {class}")))
}

/// The options object argument `v` (`undefined` or `null`: none) as
/// napi-rs converts it, after refusing what that conversion would ignore
/// without a word: a value that is not an object (read as "no options")
/// and a key not in `known` (a misspelt or snake_case `deny_write` would
/// leave the sandbox with no deny pattern). Both are `E_REQUEST`.
pub(crate) fn options_of<T: FromNapiValue>(
    env: &Env,
    v: Option<Unknown<'_>>,
    what: &str,
    known: &[&str],
) -> napi::Result<Result<Option<T>, sandgate::Error>> {
    use napi::bindgen_prelude::ValueType;
    let Some(v) = v else {
        return Ok(Ok(None));
    };
    match v.get_type()? {
        ValueType::Undefined | ValueType::Null => return Ok(Ok(None)),
        ValueType::Object => {}
        _ => return Ok(Err(request_error(format!("`{what}` must be an object")))),
    }
    // SAFETY: a live object of this environment.
    let obj = unsafe { Object::from_napi_value(env.raw(), v.raw())? };
    for key in Object::keys(&obj)? {
        if !known.contains(&key.as_str()) {
            return Ok(Err(request_error(format!(
                "`{what}` has no option `{key}` (it takes {})",
                known.join(", ")
            ))));
        }
    }
    // SAFETY: as above. A field of the wrong type (`{ all: 'yes' }`) is the
    // caller's mistake like an unknown key: napi-rs names the field.
    Ok(unsafe { T::from_napi_value(env.raw(), v.raw()) }
        .map(Some)
        .map_err(|e| request_error(format!("`{what}`: {}", e.reason))))
}

/// Throws sandgate errors as JavaScript errors carrying their code.
pub(crate) trait OrThrow<T> {
    /// The value, or the error converted by [`js_error`].
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Result<T, sandgate::Error> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|e| js_error(env, &e))
    }
}

type Work<R> = Box<dyn FnOnce() -> Result<R, sandgate::Error> + Send>;

/// One blocking operation run on the libuv thread pool: `work` runs off the
/// main thread; `convert` turns its result into a JavaScript value on the
/// main thread, and a sandgate error becomes the rejection.
pub struct Job<R: Send + 'static, T> {
    work: Option<Work<R>>,
    convert: fn(&Env, R) -> napi::Result<T>,
    /// The `abortSignal` listener to remove when the job ends.
    connection: Option<abort::Connection>,
}

impl<R: Send + 'static, T> Job<R, T> {
    pub(crate) fn new(
        work: impl FnOnce() -> Result<R, sandgate::Error> + Send + 'static,
        convert: fn(&Env, R) -> napi::Result<T>,
    ) -> Self {
        Job {
            work: Some(Box::new(work)),
            convert,
            connection: None,
        }
    }

    /// A job that `abort` (an `abortSignal`) can stop: `work` is handed
    /// its arguments (a malformed one rejects first) and the flag the
    /// signal sets (one never set without a signal). It is not run at
    /// all, nor anything spent, when the signal was aborted before the
    /// job started (`E_ABORTED`) or is not an `AbortSignal`
    /// (`E_REQUEST`). The signal's listener is removed when the job ends,
    /// whichever way.
    ///
    /// A refusal for the signal (arguments well formed) is handed to
    /// `refused` with the arguments, which reports it to the audit
    /// callback; a malformed argument was reported when the call was made.
    pub(crate) fn abortable<A: Send + 'static>(
        mut abort: abort::Abort,
        args: Result<A, sandgate::Error>,
        refused: impl FnOnce(&A, sandgate::Error) -> sandgate::Error + Send + 'static,
        work: impl FnOnce(A, Arc<AtomicBool>) -> Result<R, sandgate::Error> + Send + 'static,
        convert: fn(&Env, R) -> napi::Result<T>,
    ) -> Self {
        let connection = abort.take_connection();
        Job {
            connection,
            ..Job::new(
                move || {
                    let args = args?;
                    match abort.check() {
                        Ok(flag) => work(args, flag.unwrap_or_default()),
                        Err(e) => Err(refused(&args, e)),
                    }
                },
                convert,
            )
        }
    }
}

impl<R: Send + 'static, T: ToNapiValue + TypeName> Task for Job<R, T> {
    type Output = Result<R, sandgate::Error>;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let work = self
            .work
            .take()
            .ok_or_else(|| napi::Error::from_reason("the job already ran"))?;
        Ok(catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| {
            Err(sandgate::Error::new(
                ErrorCode::Internal,
                "a panic in the native operation (a bug)",
            ))
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<T> {
        match output {
            Ok(r) => (self.convert)(&env, r),
            Err(e) => Err(js_error(&env, &e)),
        }
    }

    fn finally(self, env: Env) -> napi::Result<()> {
        match self.connection {
            Some(c) => c.disconnect(&env),
            None => Ok(()),
        }
    }
}

/// `convert` for results that are already JavaScript-ready.
pub(crate) fn same<T>(_: &Env, v: T) -> napi::Result<T> {
    Ok(v)
}
