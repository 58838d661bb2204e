//! A confined web fetch: every hop authorized by sandgate's network rules
//! ([`sandgate_netguard`]), names resolved by sandgate and connections
//! pinned to the checked addresses, size and time capped.
//!
//! The fetcher takes its rules and caps as plain values; it knows nothing
//! of the policy file (the `sandgate` facade builds a fetcher from one).
//!
//! ```no_run
//! use sandgate_fetch::{Fetcher, FetchOptions};
//! use sandgate_netguard::{Mode, NetEntry, Rules};
//!
//! let allow = vec![NetEntry::parse("api.example.com").unwrap()];
//! let rules = Rules::new(Mode::Restricted, allow, false);
//! let fetcher = Fetcher::builder(rules).net_ops(Some(100)).build();
//! match fetcher.fetch("https://api.example.com/v1/items", &FetchOptions::default()) {
//!     Ok(r) => println!("{} ({} bytes, truncated: {})", r.status, r.body.len(), r.truncated),
//!     Err(e) => eprintln!("{}: {}", e.code(), e.message()),
//! }
//! ```
//!
//! **How a hop is made.**
//!
//! 1. The URL's host is taken as written (never normalized: `0x7f.1`,
//!    `2130706433` and `%31…` stay what they are) and the rules judge
//!    scheme, host and port ([`Rules::admit`], as a first request or as a
//!    redirect hop, which always refuses loopback). Spellings that alias
//!    addresses are refused there.
//! 2. A name is resolved by sandgate through a [`Resolve`] (the system
//!    resolver by default; tests inject their own), within the total
//!    timeout. A literal is its own address.
//! 3. Every address is checked ([`Admitted::check`]), so the address
//!    classes apply (private, link-local and the metadata
//!    service, unspecified, multicast, reserved, loopback unless granted;
//!    IPv4-mapped and NAT64 forms judged by the IPv4 address they carry).
//!    If any address is refused the hop is refused: a name that answers
//!    with an internal address is a rebinding attempt, not a fallback.
//! 4. The checked addresses (the first 16, the most the client keeps, once
//!    all of them passed) are pinned for this thread and the HTTP client
//!    (ureq, rustls with the ring provider) is called. Its resolver does not
//!    resolve: it answers the pinned addresses, and only for the host and
//!    port they were checked for, so nothing between the check and the dial
//!    (a second DNS answer included) can reach another address.
//! 5. The client follows no redirect and uses no proxy. A 301/302/303/307/
//!    308 with a `Location` is resolved against the current URL (as RFC
//!    3986 resolves a reference, dot segments removed) and the new
//!    target goes through steps 1–4 as a redirect hop. When a hop changes
//!    origin (scheme, host or port) it keeps only the caller's headers that
//!    describe the request ([`CROSS_ORIGIN_KEPT`]: `Accept`, `User-Agent`
//!    and the like): a credential can ride in any header (`X-Api-Key`,
//!    `PRIVATE-TOKEN`, …), not only `Authorization` and `Cookie`, and one
//!    meant for the first host must never reach another granted one. 303
//!    (and 301/302 after a POST) turn the request into a GET without a
//!    body.
//! 6. The final response's body is read while streaming, up to
//!    `max_bytes`; one byte more marks it truncated and the connection is
//!    dropped. Over https a body that ends with its connection (no length,
//!    no chunking) is whole only when the server's TLS `close_notify` ends
//!    it; a bare TCP close or reset, which anyone on the path can forge,
//!    fails the fetch with `E_IO` instead. One deadline covers resolution, connection, TLS, every hop
//!    and the body.
//!
//! **Cancelling.** A fetch given a [`CancelFlag`] ([`FetchOptions::cancel`])
//! looks at it before each hop and, while it resolves a name, connects,
//! shakes hands, sends its body or waits for headers or body, every 50 ms;
//! once the flag is set it closes the connection and fails with
//! `E_ABORTED`. A name query or a connect already under way cannot be
//! interrupted: it finishes on a helper thread, within the fetch's
//! remaining time, and its answer is dropped. At most
//! [`MAX_HELPER_THREADS`] such helpers run at once in the process; at that
//! bound a fetch with a flag that needs one fails at once with `E_IO`,
//! saying so (a fetch without a flag needs none).
//!
//! **Proxies.** The client never uses one. A configured proxy (see
//! [`FetcherBuilder::proxy_from_env`]) makes restricted mode refuse every
//! fetch, since behind a proxy the destination address cannot be checked
//! or pinned; trusted_host mode connects directly and ignores it.
//!
//! **Audit.** [`Fetcher::set_audit_sink`] reports every fetch, refused
//! ones included, as an [`AuditEvent`] with `op` `fetch` and `path` the
//! origins of its hops ([`audit_path`]); never the URL's user, password,
//! path or query, nor a header or body.
//!
//! **Budgets.** [`FetcherBuilder::net_ops`] (a policy's `[budgets]
//! net_ops`) counts fetches (a fetch and all its
//! redirect hops are one operation); a refused fetch spends one too, as
//! refused file operations do. A fetch whose [`CancelFlag`] is already set
//! when it is called answers `E_ABORTED` and spends none.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cancel;
mod resolve;
mod tlsend;

use std::fmt;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use sandgate_codes::audit::{AuditEvent, AuditSink};
pub use sandgate_codes::ErrorCode;
#[cfg(doc)]
use sandgate_netguard::Admitted;
use sandgate_netguard::{url_literal, Hop as Leg, Mode, NetDecision, Rules, Target};
use ureq::http;

use cancel::CancelGuard;
pub use cancel::{CancelFlag, MAX_HELPER_THREADS};
use resolve::{Pin, PinGuard, PinnedResolver};
pub use resolve::{Resolve, SystemResolver};

/// The total timeout of a fetch that names none: 30 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest total timeout a fetch may ask for, unless the builder sets
/// another: 5 min.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(300);
/// The body cap of a fetch that names none, and the most one may ask for
/// unless the builder sets another: 10 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// The most redirects one fetch follows.
pub const MAX_REDIRECTS: usize = 10;
/// The environment variables that configure a proxy.
pub const PROXY_VARIABLES: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// The only caller headers a redirect that changes origin keeps: they
/// describe the request, and none carries a credential. Every other one
/// (`Authorization`, `Cookie`, `X-Api-Key`, …) is dropped, since which
/// names hold secrets cannot be known.
pub const CROSS_ORIGIN_KEPT: &[&str] = &[
    "accept",
    "accept-encoding",
    "accept-language",
    "cache-control",
    "content-language",
    "content-type",
    "pragma",
    "user-agent",
];

/// Request headers a caller may not set: the client owns framing and the
/// connection, and `Host` must be the host that was authorized.
const REFUSED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
    // `100-continue` makes the client hold the body for an interim answer;
    // a server that answers at once instead left the fetch waiting.
    "expect",
];

/// What to send. Every field is optional: `GET`, no headers, no body, the
/// fetcher's default timeout and body cap.
///
/// Its `Debug` names the headers but not their values, and gives the
/// body's length only: a header is where a caller puts its credentials,
/// and options are the kind of thing that gets logged.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchOptions {
    /// The method (`GET` when absent), in any case: `GET`, `HEAD`, `POST`,
    /// `PUT`, `DELETE`, `OPTIONS`, `TRACE` or `PATCH`; any other (`CONNECT`,
    /// `PROPFIND`, …) is refused with `E_REQUEST` before anything is dialled.
    pub method: Option<String>,
    /// Request headers, in order.
    pub headers: Vec<(String, String)>,
    /// The request body.
    pub body: Option<Vec<u8>>,
    /// The total timeout (capped at the fetcher's maximum).
    pub timeout: Option<Duration>,
    /// The body cap (capped at the fetcher's maximum).
    pub max_bytes: Option<u64>,
    /// Set from another thread, ends the fetch within 50 ms, its
    /// connection closed, with `E_ABORTED` ([`CancelFlag`]).
    pub cancel: Option<CancelFlag>,
}

impl fmt::Debug for FetchOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, _)| format!("{name}: <withheld>"))
            .collect();
        f.debug_struct("FetchOptions")
            .field("method", &self.method)
            .field("headers", &headers)
            .field(
                "body",
                &self.body.as_ref().map(|b| format!("{} bytes", b.len())),
            )
            .field("timeout", &self.timeout)
            .field("max_bytes", &self.max_bytes)
            .field("cancel", &self.cancel)
            .finish()
    }
}

impl FetchOptions {
    /// The defaults: `GET`, nothing else.
    pub fn new() -> FetchOptions {
        FetchOptions::default()
    }

    /// Sets the method.
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into());
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sets the total timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the body cap.
    pub fn max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// Sets the flag that cancels the fetch.
    pub fn cancel(mut self, flag: CancelFlag) -> Self {
        self.cancel = Some(flag);
        self
    }
}

/// One hop of a fetch: the first request or a redirect target.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hop {
    /// The URL of the hop (host as written, fragment dropped).
    pub url: String,
    /// The method sent (or that would have been).
    pub method: String,
    /// The checked addresses the connection was pinned to (empty when the
    /// hop was refused before resolving).
    pub addresses: Vec<IpAddr>,
    /// The status the hop answered, when it was sent.
    pub status: Option<u16>,
    /// Whether the authorizer admitted the hop.
    pub allowed: bool,
    /// The authorizer's reason: the entry that admitted it, or what refused
    /// it.
    pub reason: String,
    /// The `net.allow` entry that matched, if any.
    pub rule: Option<String>,
}

/// A fetched response.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchResponse {
    /// The final status (a 3xx only when it had no `Location`).
    pub status: u16,
    /// The final response's headers, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body, at most `max_bytes`.
    pub body: Vec<u8>,
    /// Whether the body was cut at `max_bytes`.
    pub truncated: bool,
    /// Every hop taken, the final one included.
    pub hops: Vec<Hop>,
}

/// A refused or failed fetch: the error code (`E_NET_DENIED` for the
/// authorizer, `E_DENIED` for a spent budget, `E_TIMEOUT`, `E_REQUEST`,
/// `E_IO`), a message, the matching `net.allow` entry and the hops taken.
///
/// A failure of the transport (a refused connection, a TLS or protocol
/// error) keeps that error as its `source()`; the message says what failed
/// without repeating it.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct FetchError {
    code: ErrorCode,
    message: String,
    rule: Option<String>,
    hops: Vec<Hop>,
    #[source]
    cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// Equal when code, message, rule and hops are (the cause is not compared).
impl PartialEq for FetchError {
    fn eq(&self, other: &FetchError) -> bool {
        self.code == other.code
            && self.message == other.message
            && self.rule == other.rule
            && self.hops == other.hops
    }
}

impl Eq for FetchError {}

impl FetchError {
    fn new(code: ErrorCode, message: impl Into<String>) -> FetchError {
        FetchError {
            code,
            message: message.into(),
            rule: None,
            hops: Vec::new(),
            cause: None,
        }
    }

    fn caused_by(
        mut self,
        cause: impl Into<Arc<dyn std::error::Error + Send + Sync>>,
    ) -> FetchError {
        self.cause = Some(cause.into());
        self
    }

    fn with_hops(mut self, hops: &[Hop]) -> FetchError {
        self.hops = hops.to_vec();
        self
    }

    /// The error code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// What was refused and why.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `net.allow` entry that matched the refused destination, if one
    /// did (the address was then what was refused).
    pub fn rule(&self) -> Option<&str> {
        self.rule.as_deref()
    }

    /// The hops taken, the refused or failed one last.
    pub fn hops(&self) -> &[Hop] {
        &self.hops
    }
}

/// Configures a [`Fetcher`].
pub struct FetcherBuilder {
    rules: Rules,
    net_ops: Option<u64>,
    resolver: Arc<dyn Resolve>,
    proxy: Option<String>,
    max_timeout: Duration,
    max_bytes: u64,
    max_redirects: usize,
    roots: Option<Vec<ureq::tls::Certificate<'static>>>,
}

impl fmt::Debug for FetcherBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetcherBuilder")
            .field("rules", &self.rules)
            .field("net_ops", &self.net_ops)
            .field("proxy", &self.proxy)
            .field("max_timeout", &self.max_timeout)
            .field("max_bytes", &self.max_bytes)
            .field("max_redirects", &self.max_redirects)
            .finish_non_exhaustive()
    }
}

impl FetcherBuilder {
    /// The most fetches the fetcher makes (`None`, the default: no limit).
    /// A fetch and all its redirect hops are one; a refused fetch counts
    /// too.
    pub fn net_ops(mut self, budget: Option<u64>) -> Self {
        self.net_ops = budget;
        self
    }

    /// The resolver names go through (default [`SystemResolver`]).
    pub fn resolver(mut self, resolver: impl Resolve + 'static) -> Self {
        self.resolver = Arc::new(resolver);
        self
    }

    /// Declares a configured proxy (`what` names where it was configured,
    /// e.g. `HTTPS_PROXY`). Restricted mode then refuses every fetch.
    pub fn proxy(mut self, what: Option<String>) -> Self {
        self.proxy = what;
        self
    }

    /// Declares the proxy the environment configures, if any
    /// ([`PROXY_VARIABLES`], non-empty).
    pub fn proxy_from_env(self) -> Self {
        let found = PROXY_VARIABLES
            .iter()
            .find(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
            .map(|v| (*v).to_owned());
        self.proxy(found)
    }

    /// The longest total timeout a fetch may ask for (default
    /// [`MAX_TIMEOUT`]).
    pub fn max_timeout(mut self, max: Duration) -> Self {
        self.max_timeout = max;
        self
    }

    /// The largest body cap a fetch may ask for, and the cap of one that
    /// names none (default [`DEFAULT_MAX_BYTES`]).
    pub fn max_bytes(mut self, max: u64) -> Self {
        self.max_bytes = max;
        self
    }

    /// The most redirects one fetch follows (default [`MAX_REDIRECTS`]).
    pub fn max_redirects(mut self, max: usize) -> Self {
        self.max_redirects = max;
        self
    }

    /// Trusts the certificates in `pem` (one or more PEM blocks) as the only
    /// roots, instead of the bundled Mozilla roots: a private CA, or a test
    /// server's self-signed certificate.
    pub fn root_certificates_pem(mut self, pem: &[u8]) -> Result<Self, FetchError> {
        let mut certs = Vec::new();
        for item in ureq::tls::parse_pem(pem) {
            match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => certs.push(c),
                Ok(_) => {}
                Err(e) => return Err(request_error(format!("the PEM is not readable: {e}"))),
            }
        }
        if certs.is_empty() {
            return Err(request_error("the PEM holds no certificate"));
        }
        self.roots = Some(certs);
        Ok(self)
    }

    /// The fetcher.
    pub fn build(self) -> Fetcher {
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(roots) = self.roots {
            tls = tls.root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)));
        }
        let agent = ureq::Agent::with_parts(
            client_config(tls.build()),
            ureq::unversioned::transport::Connector::chain(
                ureq::unversioned::transport::Connector::chain(
                    cancel::SlicedTcp,
                    ureq::unversioned::transport::RustlsConnector::default(),
                ),
                tlsend::CloseChecked,
            ),
            PinnedResolver,
        );
        Fetcher {
            net_ops: self.net_ops.map(AtomicU64::new),
            rules: self.rules,
            agent,
            resolver: self.resolver,
            proxy: self.proxy,
            max_timeout: self.max_timeout,
            max_bytes: self.max_bytes,
            max_redirects: self.max_redirects,
            audit: Mutex::new(None),
        }
    }
}

/// What an audit event of a fetch of `url` says as its `path`: the origin
/// (`scheme://host:port`, the host as written, the port always given) of
/// every hop taken, ` -> ` between them; the origin of `url` when no hop
/// was taken (refused before any: the budget, the request); empty when
/// `url` does not parse. Never the URL's user, password, path, query or
/// fragment: secrets travel there.
pub fn audit_path(url: &str, hops: &[Hop]) -> String {
    let origin = |u: &str| {
        Target::parse(u)
            .map(|t| format!("{}://{}:{}", t.scheme(), t.host(), t.effective_port()))
            .ok()
    };
    let mut origins: Vec<String> = hops.iter().filter_map(|h| origin(&h.url)).collect();
    if origins.is_empty() {
        origins.extend(origin(url));
    }
    origins.join(" -> ")
}

/// The client's settings: no redirects, no proxy, statuses are answers.
///
/// Public (hidden) so that the benchmark can build the very same client
/// without the checks.
#[doc(hidden)]
pub fn client_config(tls: ureq::tls::TlsConfig) -> ureq::config::Config {
    ureq::Agent::config_builder()
        .tls_config(tls)
        .proxy(None)
        .max_redirects(0)
        .http_status_as_error(false)
        .user_agent(concat!("sandgate-fetch/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Fetches URLs as its network rules allow. `Send + Sync`; one fetcher serves many
/// threads and shares its connection pool between them.
pub struct Fetcher {
    rules: Rules,
    agent: ureq::Agent,
    resolver: Arc<dyn Resolve>,
    proxy: Option<String>,
    max_timeout: Duration,
    max_bytes: u64,
    max_redirects: usize,
    net_ops: Option<AtomicU64>,
    /// Where each fetch is reported ([`Fetcher::set_audit_sink`]).
    audit: Mutex<Option<AuditSink>>,
}

impl fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fetcher")
            .field("proxy", &self.proxy)
            .field("max_timeout", &self.max_timeout)
            .field("max_bytes", &self.max_bytes)
            .field("net_ops", &self.net_ops)
            .finish_non_exhaustive()
    }
}

/// A hop that passed the authorizer: its addresses and the decision.
struct Checked {
    addrs: Vec<IpAddr>,
    decision: NetDecision,
}

impl Fetcher {
    /// A builder for a fetcher under `rules`, with no `net_ops` budget.
    pub fn builder(rules: Rules) -> FetcherBuilder {
        FetcherBuilder {
            rules,
            net_ops: None,
            resolver: Arc::new(SystemResolver),
            proxy: None,
            max_timeout: MAX_TIMEOUT,
            max_bytes: DEFAULT_MAX_BYTES,
            max_redirects: MAX_REDIRECTS,
            roots: None,
        }
    }

    /// Fetches left in the `net_ops` budget (`None`: unlimited).
    pub fn net_ops_left(&self) -> Option<u64> {
        self.net_ops.as_ref().map(|n| n.load(Ordering::SeqCst))
    }

    /// Sets where each fetch is reported, refused ones included (the
    /// budget spent, a URL that does not parse, a host not granted, a
    /// redirect refused, too many redirects, a timeout, a cancel): an
    /// [`AuditEvent`] with `op` `fetch`, `path` the origin of every hop
    /// taken ([`audit_path`]), `size` the bytes of body returned,
    /// `outcome` `OK` or the refusal's code. Never the URL's user,
    /// password, path or query, nor a header or body. The sink is called
    /// on the thread that fetched, after the fetch ended, with no lock
    /// held: it may call back into this fetcher (its own fetches report
    /// too). A sandbox, an executor and a fetcher of one policy usually
    /// share one sink.
    pub fn set_audit_sink(&self, sink: Option<AuditSink>) {
        *self.audit.lock().unwrap_or_else(|e| e.into_inner()) = sink;
    }

    /// Reports a fetch refused before it reached [`Fetcher::fetch`] (a
    /// request its caller could not read: a JSON request that does not
    /// parse, a header that is not a string) to the audit sink, as
    /// [`Fetcher::fetch`] reports its own: `path` the origin of `url`
    /// when there is one that parses, else empty; `outcome` `code`.
    pub fn audit_refusal(&self, url: Option<&str>, code: ErrorCode) {
        self.report(
            url.map_or_else(String::new, |u| audit_path(u, &[])),
            None,
            code,
        );
    }

    fn report(&self, path: String, size: Option<u64>, outcome: ErrorCode) {
        let sink = self.audit.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(sink) = sink {
            sink(&AuditEvent {
                op: "fetch",
                path,
                size,
                time: std::time::SystemTime::now(),
                outcome,
                exit_code: None,
                limit: None,
            });
        }
    }

    /// Fetches `url`: the authorizer on every hop, pinned connections, the
    /// body cut at `max_bytes`, one deadline for everything. Reported to
    /// the audit sink, if any ([`Fetcher::set_audit_sink`]).
    pub fn fetch(&self, url: &str, opts: &FetchOptions) -> Result<FetchResponse, FetchError> {
        let result = self.fetch_unaudited(url, opts);
        if self
            .audit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            let (hops, size, outcome) = match &result {
                Ok(r) => (&r.hops, Some(r.body.len() as u64), ErrorCode::Ok),
                Err(e) => (&e.hops, None, e.code),
            };
            self.report(audit_path(url, hops), size, outcome);
        }
        result
    }

    fn fetch_unaudited(&self, url: &str, opts: &FetchOptions) -> Result<FetchResponse, FetchError> {
        let start = Instant::now();
        // A fetch cancelled before it starts spends no budget.
        if opts.cancel.as_ref().is_some_and(CancelFlag::is_cancelled) {
            return Err(aborted_error());
        }
        if let Some(left) = &self.net_ops {
            left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .map_err(|_| FetchError::new(ErrorCode::Denied, "the net_ops budget is spent"))?;
        }
        let timeout = opts
            .timeout
            .unwrap_or(DEFAULT_TIMEOUT)
            .min(self.max_timeout);
        if timeout.is_zero() {
            return Err(request_error("timeout_ms must be at least 1"));
        }
        let deadline = start + timeout;
        let max_bytes = opts.max_bytes.unwrap_or(self.max_bytes).min(self.max_bytes);
        let mut method = parse_method(opts.method.as_deref())?;
        let mut headers = check_headers(&opts.headers)?;
        // Borrowed for every hop: a body is never copied (it may be as
        // large as the transport allowed).
        let mut body = opts.body.as_deref();
        let mut target = Target::parse(url)
            .map_err(|m| request_error(format!("`{}` is refused: {m}", quoted(url))))?;
        if let (Some(proxy), Mode::Restricted) = (&self.proxy, self.rules.mode()) {
            return Err(FetchError::new(
                ErrorCode::NetDenied,
                format!(
                    "a proxy is configured ({proxy}); restricted mode connects only to addresses \
                     it checked, and a proxy hides the destination: unset it, or use trusted_host"
                ),
            ));
        }

        // The connections this call uses watch its flag ([`cancel`]).
        let _cancel = CancelGuard::set(opts.cancel.clone());
        let cancelled = || opts.cancel.as_ref().is_some_and(CancelFlag::is_cancelled);
        let mut hops: Vec<Hop> = Vec::new();
        let mut redirects = 0;
        loop {
            if cancelled() {
                return Err(aborted_error().with_hops(&hops));
            }
            let redirect = !hops.is_empty();
            let checked = match self.check(&target, redirect, deadline) {
                Ok(c) => c,
                Err((err, decision)) => {
                    hops.push(Hop {
                        url: target.to_string(),
                        method: method.to_string(),
                        addresses: Vec::new(),
                        status: None,
                        allowed: false,
                        reason: decision.unwrap_or_else(|| err.message.clone()),
                        rule: err.rule.clone(),
                    });
                    return Err(err.with_hops(&hops));
                }
            };
            let url = target.to_string();
            let uri: http::Uri = url.parse().map_err(|e| {
                request_error(format!(
                    "`{}` is not a URL the client takes: {e}",
                    quoted(&url)
                ))
                .with_hops(&hops)
            })?;
            hops.push(Hop {
                url,
                method: method.to_string(),
                addresses: checked.addrs.clone(),
                status: None,
                allowed: true,
                reason: checked.decision.reason,
                rule: checked.decision.rule,
            });
            let response = self
                .send(
                    &target,
                    uri,
                    &method,
                    &headers,
                    body,
                    &checked.addrs,
                    deadline,
                )
                .map_err(|e| if cancelled() { aborted_error() } else { e }.with_hops(&hops))?;
            let status = response.status().as_u16();
            if let Some(hop) = hops.last_mut() {
                hop.status = Some(status);
            }
            let location = response.headers().get(http::header::LOCATION);
            if let (301 | 302 | 303 | 307 | 308, Some(location)) = (status, location) {
                let next = location
                    .to_str()
                    .map_err(|_| "is not ASCII".to_owned())
                    .and_then(|l| target.join(l).map_err(|e| format!("is refused: {e}")))
                    .map_err(|m| {
                        FetchError::new(
                            ErrorCode::NetDenied,
                            format!(
                                "the redirect from {} is refused: its Location {m}",
                                quoted(&target.to_string())
                            ),
                        )
                        .with_hops(&hops)
                    })?;
                if redirects == self.max_redirects {
                    return Err(FetchError::new(
                        ErrorCode::Io,
                        format!("more than {} redirects", self.max_redirects),
                    )
                    .with_hops(&hops));
                }
                redirects += 1;
                drop(response);
                (method, body) = redirect_request(status, method, body, &mut headers);
                if next.origin() != target.origin() {
                    strip_credentials(&mut headers);
                }
                target = next;
                continue;
            }
            let headers_out = response
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let (body, truncated) = read_capped(response.into_body(), max_bytes)
                .map_err(|e| if cancelled() { aborted_error() } else { e }.with_hops(&hops))?;
            return Ok(FetchResponse {
                status,
                headers: headers_out,
                body,
                truncated,
                hops,
            });
        }
    }

    /// Steps 1–3: the authorizer on the name, resolution, the authorizer
    /// on every address.
    fn check(
        &self,
        t: &Target,
        redirect: bool,
        deadline: Instant,
    ) -> Result<Checked, (FetchError, Option<String>)> {
        let denied = |d: NetDecision, what: String| {
            let mut err = FetchError::new(
                ErrorCode::NetDenied,
                format!("{what}{} is refused: {}", quoted(&t.to_string()), d.reason),
            );
            err.rule = d.rule.clone();
            (err, Some(d.reason))
        };
        let hop = if redirect { "the redirect to " } else { "" };
        // A name is judged first as a name, before anything is resolved;
        // for a literal the address rules apply at once, to the literal.
        let leg = if redirect { Leg::Redirect } else { Leg::First };
        let admitted = self
            .rules
            .admit(leg, Some(t.scheme()), t.host(), t.port())
            .map_err(|d| denied(d, hop.to_owned()))?;
        let literal_ip = url_literal(t.host());
        let decision = match literal_ip {
            Some(ip) => admitted.check(ip),
            None => admitted.decision(),
        };
        if !decision.allowed {
            return Err(denied(decision, hop.to_owned()));
        }
        if !matches!(t.scheme(), "http" | "https") {
            return Err((
                request_error(format!("fetch speaks http and https, not {}", t.scheme())),
                None,
            ));
        }
        let port = t.effective_port();
        let mut addrs = match literal_ip {
            Some(ip) => {
                return Ok(Checked {
                    addrs: vec![ip],
                    decision,
                })
            }
            None => {
                let name = t.host().to_ascii_lowercase();
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err((timeout_error(), None));
                }
                let answer = cancel::resolve(&self.resolver, &name, port, left)
                    .ok_or((aborted_error(), None))?;
                let mut addrs = answer.map_err(|e| {
                    if cancel::is_at_cap(&e) {
                        (at_cap_error(&e), None)
                    } else if e.kind() == io::ErrorKind::TimedOut || Instant::now() >= deadline {
                        (timeout_error(), None)
                    } else {
                        (
                            FetchError::new(
                                ErrorCode::Io,
                                format!("could not resolve {name}: {e}"),
                            ),
                            None,
                        )
                    }
                })?;
                if Instant::now() >= deadline {
                    return Err((timeout_error(), None));
                }
                let mut seen = Vec::with_capacity(addrs.len());
                addrs.retain(|a| {
                    let new = !seen.contains(a);
                    seen.push(*a);
                    new
                });
                if addrs.is_empty() {
                    return Err((
                        FetchError::new(ErrorCode::Io, format!("{name} has no address")),
                        None,
                    ));
                }
                addrs
            }
        };
        let mut last = decision;
        for ip in &addrs {
            let d = admitted.check(*ip);
            if !d.allowed {
                return Err(denied(d, format!("{hop}(resolved to {ip}) ")));
            }
            last = d;
        }
        // Only now cut the answer to what the client keeps: every address
        // was checked, so one refused address anywhere in the answer
        // refuses the hop, wherever the resolver put it.
        addrs.truncate(resolve::MAX_PINNED);
        Ok(Checked {
            addrs,
            decision: last,
        })
    }

    /// Step 4: one request through the client, pinned to `addrs`.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        t: &Target,
        uri: http::Uri,
        method: &http::Method,
        headers: &[(String, String)],
        body: Option<&[u8]>,
        addrs: &[IpAddr],
        deadline: Instant,
    ) -> Result<http::Response<ureq::Body>, FetchError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timeout_error());
        }
        let mut builder = http::Request::builder().method(method.clone()).uri(uri);
        for (k, v) in headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        let port = t.effective_port();
        let _pin = PinGuard::set(Pin {
            host: t.host().to_owned(),
            port,
            addrs: addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect(),
        });
        let bad = |e: http::Error| request_error(format!("the request cannot be built: {e}"));
        let result = match body {
            Some(b) => {
                let req = builder.body(b).map_err(bad)?;
                let req = self
                    .agent
                    .configure_request(req)
                    .timeout_global(Some(left))
                    .build();
                self.agent.run(req)
            }
            None => {
                let req = builder.body(()).map_err(bad)?;
                let req = self
                    .agent
                    .configure_request(req)
                    .timeout_global(Some(left))
                    .build();
                self.agent.run(req)
            }
        };
        result.map_err(client_error)
    }
}

/// The method and body of the request that follows a redirect: 303 (but
/// for HEAD), and 301/302 after a POST, become a GET without a body (and
/// without `Content-Type`); 307 and 308 keep both.
fn redirect_request<'b>(
    status: u16,
    method: http::Method,
    body: Option<&'b [u8]>,
    headers: &mut Vec<(String, String)>,
) -> (http::Method, Option<&'b [u8]>) {
    let to_get = (status == 303 && method != http::Method::HEAD)
        || (matches!(status, 301 | 302) && method == http::Method::POST);
    if to_get {
        headers.retain(|(k, _)| k != "content-type");
        (http::Method::GET, None)
    } else {
        (method, body)
    }
}

/// Drops every header a cross-origin hop must not carry: all but
/// [`CROSS_ORIGIN_KEPT`].
fn strip_credentials(headers: &mut Vec<(String, String)>) {
    headers.retain(|(k, _)| CROSS_ORIGIN_KEPT.contains(&k.as_str()));
}

/// What a hop to `next` sends after `from`: the headers, credentials
/// dropped when the origin changes.
#[cfg(test)]
fn headers_for_hop(
    from: &Target,
    next: &Target,
    mut headers: Vec<(String, String)>,
) -> Vec<(String, String)> {
    if next.origin() != from.origin() {
        strip_credentials(&mut headers);
    }
    headers
}

/// Step 6: the body, read while streaming, cut at `max_bytes`.
fn read_capped(body: ureq::Body, max_bytes: u64) -> Result<(Vec<u8>, bool), FetchError> {
    let mut buf = Vec::new();
    body.into_reader()
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(io_error)?;
    let truncated = buf.len() as u64 > max_bytes;
    if truncated {
        buf.truncate(usize::try_from(max_bytes).unwrap_or(usize::MAX));
    }
    Ok((buf, truncated))
}

/// The methods the client sends.
const SENT_METHODS: &[http::Method] = &[
    http::Method::GET,
    http::Method::HEAD,
    http::Method::POST,
    http::Method::PUT,
    http::Method::DELETE,
    http::Method::OPTIONS,
    http::Method::TRACE,
    http::Method::PATCH,
];

/// What a caller or a server gave (a URL, a method, a header name) as a
/// refusal quotes it: escaped, and past 200 bytes cut to its first 100 and
/// `…`, so that a flood is not carried into the message.
fn quoted(text: &str) -> String {
    sandgate_codes::quoted(text, 200)
}

fn parse_method(method: Option<&str>) -> Result<http::Method, FetchError> {
    let Some(m) = method else {
        return Ok(http::Method::GET);
    };
    let m = http::Method::from_bytes(m.to_ascii_uppercase().as_bytes())
        .map_err(|_| request_error(format!("`{}` is not an HTTP method", quoted(m))))?;
    if m == http::Method::CONNECT {
        return Err(request_error("CONNECT is not a method fetch sends"));
    }
    // The client sends the methods HTTP/1.1 defines and no other: refuse
    // the rest here, as the caller's error, before anything is resolved or
    // dialled (the client would fail them only once it came to write).
    if !SENT_METHODS.contains(&m) {
        return Err(request_error(format!(
            "`{}` is not a method fetch sends (GET, HEAD, POST, PUT, DELETE, OPTIONS, TRACE, \
             PATCH)",
            quoted(m.as_str())
        )));
    }
    Ok(m)
}

/// The longest request header line a caller may set (`name: value`), in
/// bytes: 64 KiB, eight times what common servers take in one line, and
/// half of what the client writes of one line at once (its 128 KiB output
/// buffer, which a longer line failed only once the connection was made
/// and the head's first lines sent, as an I/O error).
pub const MAX_HEADER_LINE: usize = 64 * 1024;

fn check_headers(headers: &[(String, String)]) -> Result<Vec<(String, String)>, FetchError> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| request_error(format!("`{}` is not a header name", quoted(k))))?;
            if REFUSED_HEADERS.contains(&name.as_str()) {
                return Err(request_error(format!(
                    "the header `{name}` is set by the client, not the caller"
                )));
            }
            let line = name.as_str().len() + 2 + v.len();
            if line > MAX_HEADER_LINE {
                return Err(request_error(format!(
                    "the header `{}` is {line} bytes long (name and value); a header may take \
                     at most {MAX_HEADER_LINE}",
                    quoted(name.as_str())
                )));
            }
            http::HeaderValue::from_str(v).map_err(|_| {
                request_error(format!(
                    "the value of header `{}` is not a valid value",
                    quoted(name.as_str())
                ))
            })?;
            Ok((name.as_str().to_owned(), v.clone()))
        })
        .collect()
}

#[cold]
fn request_error(message: impl Into<String>) -> FetchError {
    FetchError::new(ErrorCode::Request, message)
}

#[cold]
fn aborted_error() -> FetchError {
    FetchError::new(
        ErrorCode::Aborted,
        "the fetch was cancelled; its connection is closed",
    )
}

#[cold]
fn timeout_error() -> FetchError {
    FetchError::new(ErrorCode::Timeout, "the fetch's total timeout ran out")
}

#[cold]
fn client_error(e: ureq::Error) -> FetchError {
    match e {
        ureq::Error::Timeout(_) => timeout_error(),
        ureq::Error::Io(e) => io_error(e),
        ureq::Error::Other(e) => {
            FetchError::new(ErrorCode::Internal, "the HTTP client failed").caused_by(e)
        }
        e => FetchError::new(ErrorCode::Io, "the request failed")
            .caused_by(Arc::new(e) as Arc<dyn std::error::Error + Send + Sync>),
    }
}

/// No helper thread was free ([`MAX_HELPER_THREADS`]): `e` says so.
#[cold]
fn at_cap_error(e: &io::Error) -> FetchError {
    FetchError::new(ErrorCode::Io, e.to_string())
}

#[cold]
fn io_error(e: io::Error) -> FetchError {
    if cancel::is_at_cap(&e) {
        return at_cap_error(&e);
    }
    let inner_timeout = e
        .get_ref()
        .and_then(|i| i.downcast_ref::<ureq::Error>())
        .is_some_and(|i| matches!(i, ureq::Error::Timeout(_)));
    if inner_timeout
        || matches!(
            e.kind(),
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
        )
    {
        return timeout_error();
    }
    FetchError::new(ErrorCode::Io, "the connection failed")
        .caused_by(Arc::new(e) as Arc<dyn std::error::Error + Send + Sync>)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> Vec<(String, String)> {
        check_headers(&[
            ("Authorization".into(), "Bearer t".into()),
            ("Cookie".into(), "a=b".into()),
            ("Proxy-Authorization".into(), "Basic x".into()),
            ("X-Keep".into(), "1".into()),
            ("X-Api-Key".into(), "k".into()),
            ("Accept".into(), "*/*".into()),
        ])
        .unwrap()
    }

    #[test]
    fn credentials_kept_on_same_origin() {
        let from = Target::parse("https://api.example.com/a").unwrap();
        for next in [
            "/b",
            "https://api.example.com/c",
            "https://API.example.com:443/d",
            "?q",
        ] {
            let next = from.join(next).unwrap();
            assert_eq!(headers_for_hop(&from, &next, creds()), creds(), "{next}");
        }
    }

    #[test]
    fn debug_names_headers_but_never_their_values() {
        let opts = FetchOptions::new()
            .method("POST")
            .header("Authorization", "Bearer sk-debug-secret-0001")
            .header("X-Api-Key", "key-debug-secret-0002")
            .body(b"password=hunter2".to_vec());
        let shown = format!("{opts:?}");
        for secret in ["sk-debug-secret-0001", "key-debug-secret-0002", "hunter2"] {
            assert!(!shown.contains(secret), "Debug shows {secret}: {shown}");
        }
        for name in ["Authorization", "X-Api-Key", "POST", "16 bytes"] {
            assert!(shown.contains(name), "Debug lost {name}: {shown}");
        }
    }

    #[test]
    fn credentials_stripped_across_origins() {
        let from = Target::parse("https://api.example.com/a").unwrap();
        for next in [
            "https://other.example.com/",
            "https://api.example.com:8443/",
            "http://api.example.com/",
            "//evil.example/",
        ] {
            let next = from.join(next).unwrap();
            assert_eq!(
                headers_for_hop(&from, &next, creds()),
                vec![("accept".to_owned(), "*/*".to_owned())],
                "{next}"
            );
        }
    }

    #[test]
    fn redirect_methods() {
        let post = http::Method::POST;
        let mut h = vec![("content-type".to_owned(), "text/plain".to_owned())];
        let (m, b) = redirect_request(307, post.clone(), Some(b"x"), &mut h);
        assert_eq!((m, b, h.len()), (post.clone(), Some(&b"x"[..]), 1));
        let (m, b) = redirect_request(302, post.clone(), Some(b"x"), &mut h);
        assert_eq!((m, b, h.len()), (http::Method::GET, None, 0));
        let (m, _) = redirect_request(303, http::Method::HEAD, None, &mut h);
        assert_eq!(m, http::Method::HEAD);
        let (m, _) = redirect_request(303, http::Method::PUT, None, &mut h);
        assert_eq!(m, http::Method::GET);
        let (m, _) = redirect_request(301, http::Method::DELETE, None, &mut h);
        assert_eq!(m, http::Method::DELETE);
    }

    #[test]
    fn methods_and_headers() {
        assert_eq!(parse_method(None).unwrap(), http::Method::GET);
        assert_eq!(parse_method(Some("post")).unwrap(), http::Method::POST);
        assert!(parse_method(Some("CONNECT")).is_err());
        assert!(parse_method(Some("GE T")).is_err());
        assert!(check_headers(&[("Host".into(), "x".into())]).is_err());
        assert!(check_headers(&[("X-A".into(), "a\nb".into())]).is_err());
        assert_eq!(
            check_headers(&[("X-A".into(), "1".into())]).unwrap(),
            vec![("x-a".to_owned(), "1".to_owned())]
        );
    }
}
