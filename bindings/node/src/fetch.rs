//! `Fetcher`: the confined web fetch a policy grants (docs/reference/policy.md): its
//! `net.allow` entries, `allow_http`, security mode and `[budgets] net_ops`.
//! Every hop, redirects included, goes through the policy's authorizer;
//! names are resolved by sandgate and connections pinned to the checked
//! addresses.
//!
//! `fetch(…)` runs on the calling (main) thread; `fetchAsync(…)` runs on
//! the libuv thread pool and returns a `Promise`. A refusal is an `Error`
//! with `code` (`'E_NET_DENIED'`, …), `hops` (what each hop asked and what
//! the authorizer decided) and, when a `net.allow` entry matched, `rule`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{
    AsyncTask, Buffer, Either, FromNapiValue, JsObjectValue, TypeName, Unknown, Utf16String,
    ValidateNapiValue, ValueType,
};
use napi::{Env, Task};
use napi_derive::napi;
use sandgate::fetch::{CancelFlag, FetchError, FetchOptions as NativeOptions, FetchResponse, Hop};
use sandgate::ErrorCode;

use crate::abort::{Abort, Connection, ABORT_SIGNAL};
use crate::policy::Policy;
use crate::sandbox::{audit_sink, AuditFn};
use crate::{
    class_arg, js_error_with, json_of, options_of, request_error, str_arg, to_count, utf8, utf8_opt,
};

/// Options of `new Fetcher(policy, options)`.
#[napi(object, object_to_js = false)]
pub struct FetcherOptions {
    /// Called with an `AuditEvent` after every `fetch` and `fetchAsync`,
    /// refused ones too: `op` `'fetch'`, `path` the origin
    /// (`scheme://host:port`) of every hop taken, `' -> '` between them
    /// (`''` for a URL that does not parse), `size` the body's bytes;
    /// never the URL's user, password, path or query, nor a header or
    /// body.
    #[napi(ts_type = "(event: AuditEvent) => void")]
    pub audit: Option<AuditFn>,
}

/// The keys of [`FetcherOptions`] as JavaScript spells them.
const FETCHER_OPTIONS: &[&str] = &["audit"];

/// `fetch`'s `headers` as JSON, or the `E_REQUEST` naming what in them
/// JSON or UTF-8 cannot hold ([`json_of`]: a lone surrogate in a name or a
/// value). Read by the options' own conversion, once: a check reading
/// `headers` again, apart from napi-rs' conversion (which writes U+FFFD
/// for a lone surrogate in a value and drops a name holding one), judged a
/// getter's second answer, not the one sent.
pub struct Headers(Result<serde_json::Value, sandgate::Error>);

impl TypeName for Headers {
    fn type_name() -> &'static str {
        "Record<string, string>"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ValidateNapiValue for Headers {}

impl FromNapiValue for Headers {
    unsafe fn from_napi_value(
        env: napi::sys::napi_env,
        v: napi::sys::napi_value,
    ) -> napi::Result<Self> {
        // SAFETY: a live value of this environment, as the caller's.
        let value = unsafe { Unknown::from_napi_value(env, v)? };
        Ok(Headers(json_of(&Env::from_raw(env), value, "headers")?))
    }
}

/// Options of `fetch`. An absent option means the library's default.
#[napi(object, object_to_js = false)]
pub struct FetchOptions {
    /// The HTTP method (default `'GET'`; `CONNECT` is refused; one holding
    /// a lone surrogate is `E_REQUEST`).
    pub method: Option<Utf16String>,
    /// Request headers. `Host`, `Content-Length`, `Transfer-Encoding` and
    /// `Connection` belong to the client and are refused (`E_REQUEST`), as
    /// is a name or value holding a lone surrogate.
    #[napi(ts_type = "Record<string, string>")]
    pub headers: Option<Headers>,
    /// The request body: a string (sent as UTF-8; one holding a lone
    /// surrogate is `E_REQUEST`, not sent with U+FFFD in its place) or a
    /// Buffer (sent as given).
    pub body: Option<Either<Utf16String, Buffer>>,
    /// One deadline for the whole fetch, redirects included, in
    /// milliseconds (at least 1; capped by the library, default 30 s).
    pub timeout_ms: Option<f64>,
    /// Cap of the body kept, in bytes (the rest is dropped and `truncated`
    /// set; capped by the library's maximum, which is also the default).
    pub max_bytes: Option<f64>,
}

/// One hop of a fetch: a request the authorizer judged, and its answer.
#[napi(object)]
pub struct FetchHop {
    /// The URL asked for at this hop.
    pub url: String,
    /// The method used at this hop.
    pub method: String,
    /// The addresses the host resolved to (and that were checked).
    pub addresses: Vec<String>,
    /// The HTTP status this hop answered (absent when none arrived).
    pub status: Option<u32>,
    /// Whether the authorizer allowed the hop.
    pub allowed: bool,
    /// Why the authorizer decided so.
    pub reason: String,
    /// The `net.allow` entry that matched, if any.
    pub rule: Option<String>,
}

/// A response (whatever its HTTP status).
#[napi(object)]
pub struct FetchResult {
    /// The final HTTP status.
    pub status: u32,
    /// Response headers by name; repeated names joined with `', '`.
    #[napi(ts_type = "Record<string, string>")]
    pub headers: serde_json::Value,
    /// The body, cut at `maxBytes`.
    pub body: Buffer,
    /// Whether the body was cut at `maxBytes`.
    pub truncated: bool,
    /// Every hop, redirects included, in order.
    pub hops: Vec<FetchHop>,
}

fn hops_of(hops: &[Hop]) -> Vec<FetchHop> {
    hops.iter()
        .map(|h| FetchHop {
            url: h.url.clone(),
            method: h.method.clone(),
            addresses: h.addresses.iter().map(|a| a.to_string()).collect(),
            status: h.status.map(u32::from),
            allowed: h.allowed,
            reason: h.reason.clone(),
            rule: h.rule.clone(),
        })
        .collect()
}

fn result_of(r: FetchResponse) -> FetchResult {
    let mut headers = serde_json::Map::new();
    for (k, v) in r.headers {
        match headers.get_mut(&k) {
            Some(serde_json::Value::String(prev)) => {
                prev.push_str(", ");
                prev.push_str(&v);
            }
            _ => {
                headers.insert(k, serde_json::Value::String(v));
            }
        }
    }
    FetchResult {
        status: u32::from(r.status),
        headers: serde_json::Value::Object(headers),
        body: r.body.into(),
        truncated: r.truncated,
        hops: hops_of(&r.hops),
    }
}

/// Why a fetch failed: refused or failed by the fetcher, or an argument
/// refused before anything was asked (no hops, no budget spent).
pub enum Failure {
    /// The fetcher's refusal or failure, with its hops and rule.
    Fetch(FetchError),
    /// An argument refused by the binding, or a panic.
    Other(sandgate::Error),
}

/// The JavaScript `Error` of a failed fetch: `code`, `message`, `hops`
/// (always an array) and, when a `net.allow` entry matched, `rule`.
fn failure_error(env: &Env, f: &Failure) -> napi::Error {
    match f {
        Failure::Fetch(e) => {
            let base = sandgate::Error::from(e.clone());
            js_error_with(env, &base, |obj| {
                obj.set_named_property("hops", hops_of(e.hops()))?;
                if let Some(rule) = e.rule() {
                    obj.set_named_property("rule", rule)?;
                }
                Ok(())
            })
        }
        Failure::Other(e) => js_error_with(env, e, |obj| {
            obj.set_named_property("hops", Vec::<FetchHop>::new())
        }),
    }
}

fn bad(message: impl Into<String>) -> sandgate::Error {
    request_error(message)
}

/// The keys of `fetch`'s options as JavaScript spells them.
const FETCH_OPTIONS: &[&str] = &["method", "headers", "body", "timeoutMs", "maxBytes"];

/// [`FETCH_OPTIONS`] and `fetchAsync`'s `abortSignal`.
const FETCH_ASYNC_OPTIONS: &[&str] = &[
    "method",
    "headers",
    "body",
    "timeoutMs",
    "maxBytes",
    ABORT_SIGNAL,
];

/// The `options` argument (`known`: its keys): the generated glue's
/// conversion of `FetchOptions` (and its errors), after refusing an
/// unknown key or a value that is not an object ([`options_of`]); a lone
/// surrogate in `headers` is refused from the one read of them
/// ([`Headers`]), in `native_options`.
fn options_arg(
    env: &Env,
    options: Option<Unknown<'_>>,
    known: &[&str],
) -> napi::Result<Result<Option<FetchOptions>, sandgate::Error>> {
    options_of(env, options, "options", known)
}

fn native_options(o: Option<FetchOptions>) -> Result<NativeOptions, sandgate::Error> {
    let mut out = NativeOptions::new();
    let Some(o) = o else {
        return Ok(out);
    };
    out.method = utf8_opt(o.method, "method")?;
    match o.headers.map(|h| h.0).transpose()? {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(m)) => {
            for (k, v) in m {
                match v {
                    serde_json::Value::String(s) => out.headers.push((k, s)),
                    _ => return Err(bad(format!("the header `{k}` must be a string"))),
                }
            }
        }
        Some(_) => return Err(bad("`headers` must be an object of strings")),
    }
    out.body = match o.body {
        None => None,
        Some(Either::A(s)) => Some(utf8(&s, "body")?.into_bytes()),
        Some(Either::B(b)) => Some(b.to_vec()),
    };
    if let Some(ms) = o.timeout_ms {
        let ms = to_count(ms, "timeoutMs")?;
        if ms == 0 {
            return Err(bad("`timeoutMs` must be at least 1"));
        }
        out.timeout = Some(Duration::from_millis(ms));
    }
    if let Some(n) = o.max_bytes {
        out.max_bytes = Some(to_count(n, "maxBytes")?);
    }
    Ok(out)
}

/// One `fetchAsync` on the libuv pool; removes its abort listener when
/// done.
pub struct FetchJob {
    fetcher: Arc<sandgate::fetch::Fetcher>,
    url: String,
    options: Option<Result<NativeOptions, sandgate::Error>>,
    abort: Abort,
    connection: Option<Connection>,
}

impl Task for FetchJob {
    type Output = Result<FetchResponse, Failure>;
    type JsValue = FetchResult;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        // A malformed option or signal, or a signal aborted before the
        // fetch started, is refused before the fetcher sees the call (no
        // `net_ops` spent) and reported as its own.
        let opts = match self.options.take() {
            Some(Ok(mut opts)) => self.abort.check().map(|flag| {
                opts.cancel = flag.map(CancelFlag::from_arc);
                opts
            }),
            Some(Err(e)) => Err(e),
            None => return Err(napi::Error::from_reason("the job already ran")),
        };
        let opts = match opts {
            Ok(opts) => opts,
            Err(e) => {
                self.fetcher.audit_refusal(Some(&self.url), e.code());
                return Ok(Err(Failure::Other(e)));
            }
        };
        let (fetcher, url) = (&self.fetcher, &self.url);
        Ok(
            match catch_unwind(AssertUnwindSafe(|| fetcher.fetch(url, &opts))) {
                Ok(r) => r.map_err(Failure::Fetch),
                Err(_) => Err(Failure::Other(sandgate::Error::new(
                    ErrorCode::Internal,
                    "a panic in the native operation (a bug)",
                ))),
            },
        )
    }

    fn resolve(&mut self, env: Env, out: Self::Output) -> napi::Result<FetchResult> {
        out.map(result_of).map_err(|e| failure_error(&env, &e))
    }

    fn finally(self, env: Env) -> napi::Result<()> {
        match self.connection {
            Some(c) => c.disconnect(&env),
            None => Ok(()),
        }
    }
}

/// The confined web fetch a policy grants. A proxy set in the environment
/// (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`) makes restricted mode refuse
/// every fetch with `E_NET_DENIED`.
///
/// `fetchAsync` calls may run concurrently on the libuv thread pool (shared
/// with the sandbox's `…Async` calls and `Executor.exec`).
#[napi]
pub struct Fetcher {
    inner: Arc<sandgate::fetch::Fetcher>,
}

#[napi]
impl Fetcher {
    /// The fetcher `policy` grants (`[net]`, `[budgets] net_ops`), with an
    /// optional audit callback.
    #[napi(constructor)]
    pub fn new(
        env: &Env,
        #[napi(ts_arg_type = "Policy")] policy: Unknown<'_>,
        #[napi(ts_arg_type = "FetcherOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<Self> {
        let policy = class_arg::<Policy>(&policy, "policy", "Policy")
            .map_err(|e| failure_error(env, &Failure::Other(e)))?;
        let options: Option<FetcherOptions> = options_of(env, options, "options", FETCHER_OPTIONS)?
            .map_err(|e| failure_error(env, &Failure::Other(e)))?;
        let inner = sandgate::fetch::from_policy(&policy.inner);
        if let Some(f) = options.and_then(|o| o.audit) {
            inner.set_audit_sink(Some(Arc::new(audit_sink(f))));
        }
        Ok(Fetcher {
            inner: Arc::new(inner),
        })
    }

    /// Fetches `url` on the calling thread (blocking it). Returns the
    /// response whatever its HTTP status; throws when refused (`E_NET_DENIED`
    /// for a destination the policy refuses, at any hop; `E_DENIED` for a
    /// spent `net_ops` budget; `E_REQUEST` for a malformed request;
    /// `E_TIMEOUT`, `E_IO`), the error carrying `hops` and `rule`.
    #[napi]
    pub fn fetch(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] url: Unknown<'_>,
        #[napi(ts_arg_type = "FetchOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<FetchResult> {
        // A refusal before the fetcher sees the call is reported as its own.
        let refused = |e: sandgate::Error, url: Option<&str>| {
            self.inner.audit_refusal(url, e.code());
            failure_error(env, &Failure::Other(e))
        };
        let url = str_arg(url, "url").map_err(|e| refused(e, None))?;
        let opts = options_arg(env, options, FETCH_OPTIONS)?
            .and_then(native_options)
            .map_err(|e| refused(e, Some(&url)))?;
        self.inner
            .fetch(&url, &opts)
            .map(result_of)
            .map_err(|e| failure_error(env, &Failure::Fetch(e)))
    }

    /// `fetch` on the libuv thread pool: a Promise resolving the same
    /// result or rejecting with the same error (malformed options too).
    /// Aborting `options.abortSignal` stops the fetch, which rejects with
    /// `E_ABORTED` (within about 50 ms; at once, spending no `net_ops`,
    /// when the signal is already aborted).
    #[napi(ts_return_type = "Promise<FetchResult>")]
    pub fn fetch_async(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] url: Unknown<'_>,
        #[napi(ts_arg_type = "(FetchOptions & AbortOptions) | undefined | null")] options: Option<
            Unknown<'_>,
        >,
    ) -> napi::Result<AsyncTask<FetchJob>> {
        // A malformed url rejects like malformed options.
        let url = str_arg(url, "url");
        let native = options_arg(env, options, FETCH_ASYNC_OPTIONS)?.and_then(native_options);
        let (url, native) = match url {
            Ok(url) => (url, native),
            Err(e) => (String::new(), Err(e)),
        };
        let mut abort = Abort::of_options(env, options)?;
        Ok(AsyncTask::new(FetchJob {
            fetcher: Arc::clone(&self.inner),
            url,
            options: Some(native),
            connection: abort.take_connection(),
            abort,
        }))
    }

    /// Fetches left in the `net_ops` budget (`null`: unlimited).
    #[napi(getter)]
    pub fn net_ops_remaining(&self) -> Option<f64> {
        self.inner.net_ops_left().map(|n| n as f64)
    }
}
