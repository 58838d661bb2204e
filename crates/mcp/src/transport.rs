//! The transports beside stdio: streamable HTTP on a loopback address with
//! a bearer token, and a UNIX socket.
//!
//! Every session on either transport shares the one [`Server`]: one
//! sandbox, so budgets last for the process's lifetime whatever the number
//! of clients.
//!
//! Each transport holds at most [`MAX_SESSIONS`] sessions at once (the
//! UNIX socket at most a quarter of the descriptor limit when that is
//! lower: `unix_session_cap`), since
//! each holds memory (about 50 KiB on HTTP, with its tasks and channels)
//! for as long as it lasts: on HTTP until the client ends it (`DELETE`)
//! or it has been idle for five minutes (no request of it open, none
//! made: a client waiting on a long call's answer keeps it), on the UNIX socket
//! until the connection closes or it has sent nothing within 10 s of
//! connecting. (A session that has spoken is never closed for being
//! idle: a host keeps its session open between a model's turns, and a
//! command may run for as long as the policy's timeout allows.)
//! One more is refused, naming the cap: on
//! HTTP a request that would open a session (a `POST` without
//! `Mcp-Session-Id`) is answered 503 (one whose `Mcp-Session-Id` is not
//! text, which the SDK would read as none, is answered 400 whatever the
//! count); on the socket the connection gets a JSON-RPC error line and is
//! closed. Requests without the token are answered 401 before any of this,
//! take no place, and end their connection. A request with the token whose
//! `Mcp-Session-Id` names a session not held (ended, expired, never opened)
//! is answered 404 with a JSON-RPC error naming it, whatever its method
//! ([`SESSION_NOT_FOUND`]); the SDK answered `DELETE` of one 202.
//!
//! Neither transport ends because of what one connection does: a failed
//! accept (the descriptor table full, a connection reset before it was
//! taken) is waited out and the listener kept, since anyone who can
//! connect (any local user, on the HTTP port, before the token is
//! checked) could otherwise end the server. On HTTP the connections that
//! have not yet sent a request with the token hold at most
//! a quarter of the descriptor limit's places, at most [`MAX_UNPROVEN`];
//! one more closes the oldest of them (`Unproven` says why the oldest),
//! so that they cannot take the descriptors the sessions' calls need.
//! On HTTP a connection that
//! sends no request head within `HEADER_TIMEOUT` (10 s) is closed, so idle
//! connections cannot hold the server's descriptors; a request whose body
//! has not arrived whole within `BODY_TIMEOUT` (10 s after its head) is
//! answered 408 and its connection closed, so a stalled client cannot hold
//! a session place (taken before the body is read) or a task forever. A
//! connection whose answer has waited `WRITE_TIMEOUT` (10 s) to be written,
//! its client taking none of it, is closed too: else a client that sends
//! requests (with or without the token) and never reads the answers would
//! hold a descriptor and a task for as long as it likes. A UNIX socket
//! session whose answer has waited `WRITE_TIMEOUT` is closed the same way.
//! These four waits (the socket's first bytes wait as long as a request
//! head) are one: [`STALL_VAR`] sets another length for all of them.

use std::convert::Infallible;
use std::fs::OpenOptions;
use std::future::Future as _;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tower_service::Service as _;

use crate::Server;

/// The most sessions one server holds at once on either transport.
pub const MAX_SESSIONS: usize = 64;

/// Why a session beyond `cap` (the transport's cap) is refused.
fn too_many_sessions(cap: usize) -> String {
    format!(
        "too many MCP sessions: this server holds at most {cap} at once; \
         end one (DELETE on HTTP, closing the connection on the socket) or wait for an idle one to expire"
    )
}

/// A place among the [`MAX_SESSIONS`] that an HTTP request which may
/// open a session holds until the SDK has put the session in its map
/// (which then counts it), given back when dropped.
struct Place(Arc<AtomicUsize>);

impl Place {
    /// Takes a place when `held` (besides `open`, those counted
    /// elsewhere) leaves one.
    fn take(held: &Arc<AtomicUsize>, open: usize) -> Option<Place> {
        held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n + open < MAX_SESSIONS).then_some(n + 1)
        })
        .ok()
        .map(|_| Place(Arc::clone(held)))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long an HTTP session may go without a request open or made before
/// it is closed, by default: the SDK's own five minutes.
const HTTP_IDLE: Duration = Duration::from_secs(300);

/// The variable that sets how long an idle HTTP session is kept, in whole
/// seconds (at least 1; five minutes when it is unset).
pub const HTTP_IDLE_VAR: &str = "SANDGATE_MCP_HTTP_IDLE_SECS";

/// How long an idle HTTP session is kept: [`HTTP_IDLE_VAR`] when set, else
/// [`HTTP_IDLE`]. A value that is not a whole number of seconds from 1 up
/// is refused, naming the variable, rather than read as the default.
fn http_idle() -> std::io::Result<Duration> {
    secs_var(HTTP_IDLE_VAR, HTTP_IDLE)
}

/// The variable that sets, in whole seconds (at least 1; 10 when it is
/// unset), how long a connection may stall before it is closed: an HTTP
/// connection that sends no request head, a request whose body has not
/// arrived whole after its head (answered 408), a connection on either
/// transport whose answer waits to be written, and a UNIX socket
/// connection that sends nothing after connecting.
pub const STALL_VAR: &str = "SANDGATE_MCP_STALL_SECS";

/// How long a connection may stall: [`STALL_VAR`] when set, else
/// [`STALL_TIMEOUT`]. A malformed value is refused, naming the variable.
fn stall() -> std::io::Result<Duration> {
    secs_var(STALL_VAR, STALL_TIMEOUT)
}

/// The whole number of seconds, at least 1, that `var` holds, or `default`
/// when it is unset; any other value is refused, naming `var`.
fn secs_var(var: &str, default: Duration) -> std::io::Result<Duration> {
    match std::env::var_os(var) {
        None => Ok(default),
        Some(v) => match v.to_str().and_then(|s| s.parse::<u64>().ok()) {
            Some(secs @ 1..) => Ok(Duration::from_secs(secs)),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{var} is {v:?}: it must be a whole number of seconds, at least 1"),
            )),
        },
    }
}

/// How often the HTTP sessions are looked over for idle ones: every 10 s,
/// or a tenth of a shorter idle time (at least 100 ms).
fn idle_sweep(idle: Duration) -> Duration {
    (idle / 10).clamp(Duration::from_millis(100), Duration::from_secs(10))
}

/// What each HTTP session's requests did: how many are open (their
/// answer, an SSE stream for a call, not yet ended) and when one last
/// opened or ended. A session is idle when none is open and none opened
/// or ended for [`HTTP_IDLE`]. The SDK's own idle timer counts only the
/// messages that pass, so a session whose client waited on one long call
/// (an `exec` of six minutes, without progress notifications) was closed
/// after five, its command cancelled and its answer lost.
struct Requests {
    seen: std::sync::Mutex<std::collections::HashMap<String, Seen>>,
    /// How long a session may be idle.
    idle: Duration,
}

struct Seen {
    open: usize,
    last: tokio::time::Instant,
}

impl Requests {
    fn new(idle: Duration) -> Requests {
        Requests {
            seen: std::sync::Mutex::default(),
            idle,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Seen>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A request of session `id` opens: it counts until the guard drops.
    fn open(self: &Arc<Self>, id: &str) -> OpenRequest {
        let mut seen = self.lock();
        let s = seen.entry(id.to_owned()).or_insert(Seen {
            open: 0,
            last: tokio::time::Instant::now(),
        });
        s.open += 1;
        s.last = tokio::time::Instant::now();
        OpenRequest(Arc::clone(self), id.to_owned())
    }

    /// The sessions of `ids` (those the SDK holds) that are idle; entries
    /// of sessions it no longer holds are forgotten once nothing is open.
    fn idle(&self, ids: &[String]) -> Vec<String> {
        let now = tokio::time::Instant::now();
        let mut seen = self.lock();
        seen.retain(|id, s| s.open > 0 || ids.contains(id));
        ids.iter()
            .filter(|id| {
                let s = seen
                    .entry((*id).clone())
                    .or_insert(Seen { open: 0, last: now });
                s.open == 0 && now.duration_since(s.last) >= self.idle
            })
            .cloned()
            .collect()
    }
}

/// An open request of one HTTP session, counted until dropped (its answer
/// ended or dropped).
struct OpenRequest(Arc<Requests>, String);

impl Drop for OpenRequest {
    fn drop(&mut self) {
        if let Some(s) = self.0.lock().get_mut(&self.1) {
            s.open -= 1;
            s.last = tokio::time::Instant::now();
        }
    }
}

/// Closes the HTTP sessions that are idle ([`Requests::idle`]), looking
/// every [`idle_sweep`], for as long as the server runs.
async fn close_idle(sessions: Arc<LocalSessionManager>, requests: Arc<Requests>) {
    use rmcp::transport::streamable_http_server::session::SessionManager as _;
    let mut tick = tokio::time::interval(idle_sweep(requests.idle));
    loop {
        tick.tick().await;
        let ids: Vec<String> = sessions
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        for id in requests.idle(&ids) {
            let _ = sessions.close_session(&id.as_str().into()).await;
        }
    }
}

/// How long a connection may stall before it is closed, unless
/// [`STALL_VAR`] sets another length. Each of these waits is this long:
/// - `HEADER_TIMEOUT`: an HTTP connection sending a request's head (the
///   first, or the next on a kept-alive connection);
/// - `BODY_TIMEOUT`: a request's body arriving whole once its head was
///   read (a JSON-RPC message, at most [`MAX_BODY`], takes milliseconds
///   on loopback);
/// - `WRITE_TIMEOUT`: a connection, on either transport, leaving a write
///   waiting (its client taking nothing of the answer; a client that
///   reads takes an answer or an SSE event on loopback within
///   milliseconds);
/// - `FIRST_BYTES_TIMEOUT`: a UNIX socket connection sending its first
///   bytes (each holds one of the [`MAX_SESSIONS`] places from the moment
///   it is taken).
const STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection whose writes fail (`TimedOut`) once one has waited
/// the stall time ([`STALL_TIMEOUT`] or what [`STALL_VAR`] sets) without any progress;
/// hyper then closes it.
struct Stalls<S> {
    inner: S,
    /// How long a write may wait.
    after: Duration,
    /// When the write waiting now fails, if one is waiting.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Stalls<S> {
    fn new(inner: S, after: Duration) -> Self {
        Stalls {
            inner,
            after,
            deadline: None,
        }
    }

    /// Polls a write with `op`: its answer once ready (then the next wait
    /// starts afresh), `TimedOut` once it has waited the stall time.
    fn timed<T>(
        &mut self,
        cx: &mut Context<'_>,
        op: impl FnOnce(&mut S, &mut Context<'_>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if let Poll::Ready(r) = op(&mut self.inner, cx) {
            self.deadline = None;
            return Poll::Ready(r);
        }
        let after = self.after;
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(after)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "the client took nothing of its answer for {} s",
                    after.as_secs()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Stalls<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Stalls<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut()
            .timed(cx, |s, cx| Pin::new(s).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut()
            .timed(cx, |s, cx| Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().timed(cx, |s, cx| Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut()
            .timed(cx, |s, cx| Pin::new(s).poll_shutdown(cx))
    }
}

/// The largest request body read: the SDK's own cap (4 MiB), checked here
/// too since the body is read here, so no body is held beyond it.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// The most a connection's read buffer holds, and so the longest request
/// head read (a longer one is answered 431 and its connection closed):
/// 16 KiB, twice what a common server takes in one header line, and far
/// more than an MCP client's head (its token, session id, host and a few
/// more). The head is read whole before the token can be checked, so this
/// bounds what anyone who can connect makes the server hold: hyper's own
/// bound, about 400 KiB a connection, let 400 connections dripping heads
/// without the token grow the server by 160 MiB for the 10 s a head may
/// take. A body is read through the same buffer, 16 KiB at a time.
const MAX_HEAD: usize = 16 * 1024;

/// A plain-text answer with `status`.
fn plain(status: StatusCode, text: String) -> Response<BoxBody<Bytes, Infallible>> {
    let mut resp = Response::new(Full::new(Bytes::from(text)).boxed());
    *resp.status_mut() = status;
    resp
}

/// The JSON-RPC error code (-32001) answering a request that names a
/// session this server does not hold.
pub const SESSION_NOT_FOUND: i64 = -32001;

/// The answer to a request naming session `id`, which this server does
/// not hold (ended, closed for being idle, or never opened): 404 with a
/// JSON-RPC error naming it, so that the client opens a new session.
fn session_not_found(id: &str) -> Response<BoxBody<Bytes, Infallible>> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
    "code": SESSION_NOT_FOUND,
    "message": format!(
        "Not Found: this server holds no MCP session {id} (it was ended, closed \
         for being idle, or never opened); open a new one with initialize"
    )}});
    let mut resp = plain(StatusCode::NOT_FOUND, format!("{body}\n"));
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

/// The answer refusing a message that gives a key twice: its JSON-RPC
/// error, as JSON. A request's refusal is its answer (200, as the SDK
/// answers an invalid call in a session); a notification or a response,
/// which has none, is answered 400, as streamable HTTP asks for input the
/// server cannot accept, with the error (its id `null`) as the body.
fn duplicate_refused(d: crate::lines::Duplicate) -> Response<BoxBody<Bytes, Infallible>> {
    let status = if d.notification || d.error["id"].is_null() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut resp = plain(status, format!("{}\n", d.error));
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

/// Reads `body` whole, at most [`MAX_BODY`] bytes within `within`
/// (the stall time, [`STALL_TIMEOUT`] unless [`STALL_VAR`] sets another); else the answer
/// that refuses it: 413 over the cap (at once when its stated length is), 408 when it is late (the connection
/// is then closed, as hyper does after an answer given before the body
/// was read), 400 when it cannot be read.
async fn read_body(
    body: Incoming,
    within: Duration,
) -> Result<Bytes, Response<BoxBody<Bytes, Infallible>>> {
    let too_large = || {
        plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: request body exceeds {MAX_BODY} bytes\n"),
        )
    };
    // A `Content-Length` past the cap is refused before any of the body is
    // waited for: else a client stating more than it sends waited the
    // stall time for a 408, holding its place.
    if usize::try_from(hyper::body::Body::size_hint(&body).lower()).map_or(true, |n| n > MAX_BODY) {
        return Err(too_large());
    }
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    match tokio::time::timeout(within, limited.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => Err(plain(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}\n"),
        )),
        Err(_) => Err(plain(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive whole within {} s of its head\n",
                within.as_secs()
            ),
        )),
    }
}

/// Accepts the next connection, waiting out failures: each is said once
/// on stderr until an accept succeeds again, and the next try comes after
/// a pause, so a full descriptor table neither ends the server nor spins.
async fn accept_next<S>(accept: impl AsyncFn() -> std::io::Result<S>) -> S {
    let mut failing = false;
    loop {
        match accept().await {
            Ok(s) => return s,
            Err(e) => {
                if !failing {
                    say!("sandgate: mcp: cannot accept a connection (will keep trying): {e}");
                    failing = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The most HTTP connections that have not yet shown the token held at
/// once (a quarter of the descriptor limit when that is lower).
pub const MAX_UNPROVEN: usize = 256;

/// How many HTTP connections that have not yet shown the token are held
/// at once: a quarter of the process's descriptor limit (`RLIMIT_NOFILE`,
/// its soft value), at least 1 and at most [`MAX_UNPROVEN`], so that the
/// other three quarters stay for the sessions holding the token: their
/// connections, the files their tools open, the pipes and signals of
/// their commands.
fn unproven_cap() -> usize {
    quarter_of_the_descriptors(MAX_UNPROVEN)
}

/// A quarter of the process's descriptor limit (`RLIMIT_NOFILE`, its soft
/// value), at least 1 and at most `most`.
fn quarter_of_the_descriptors(most: usize) -> usize {
    let cur = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    usize::try_from(cur / 4)
        .unwrap_or(usize::MAX)
        .clamp(1, most)
}

/// How many sessions the UNIX socket holds at once: [`MAX_SESSIONS`], or
/// a quarter of the process's descriptor limit (`RLIMIT_NOFILE`, its soft
/// value) when that is lower, at least 1. Each session holds its
/// connection's descriptor for as long as it lasts, so that under a low
/// limit the other three quarters stay for what the sessions' calls open
/// (files, a command's pipes and signals) and for connections refused
/// beyond the cap.
fn unix_session_cap() -> usize {
    quarter_of_the_descriptors(MAX_SESSIONS)
}

/// The HTTP connections that have not yet shown the token: each holds one
/// of [`unproven_cap`] places from the moment it is taken until a request
/// of it carries the token or it ends. A connection taken when all are
/// held closes the oldest of them to take its place. Oldest first rather
/// than refusing the newest: refused, anyone who can connect (before the
/// token is checked) could hold every place, reopening each connection as
/// it stalls out, and no client with the token could connect again;
/// evicted, a client's connection is lost only if that many others arrive
/// between its connect and its request head (a fraction of a millisecond
/// on loopback), and the flood holds none of its connections for long.
struct Unproven {
    places: Arc<tokio::sync::Semaphore>,
    /// The connections holding a place, oldest first, with the sender
    /// that closes each (`send`); dropped unsent, it tells the connection
    /// it showed the token.
    waiting: std::sync::Mutex<(
        u64,
        std::collections::BTreeMap<u64, tokio::sync::oneshot::Sender<()>>,
    )>,
}

/// One HTTP connection's place among the [`Unproven`], until it shows
/// the token ([`Unproved::proven`]) or ends (dropped, after its
/// descriptor is closed).
struct Unproved {
    of: Arc<Unproven>,
    id: u64,
    place: std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
}

impl Unproven {
    fn new(cap: usize) -> Unproven {
        Unproven {
            places: Arc::new(tokio::sync::Semaphore::new(cap)),
            waiting: std::sync::Mutex::default(),
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        (
            u64,
            std::collections::BTreeMap<u64, tokio::sync::oneshot::Sender<()>>,
        ),
    > {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a connection just taken, closing the oldest without
    /// the token when all are held (its place is given back once its
    /// descriptor is closed, within milliseconds), and what tells the
    /// connection to close: a message, or the sender dropped once it
    /// showed the token.
    async fn admit(self: &Arc<Self>) -> (Arc<Unproved>, tokio::sync::oneshot::Receiver<()>) {
        let place = loop {
            if let Ok(p) = Arc::clone(&self.places).try_acquire_owned() {
                break p;
            }
            if let Some((_, close)) = self.lock().1.pop_first() {
                let _ = close.send(());
            }
            let next = Arc::clone(&self.places).acquire_owned();
            if let Ok(Ok(p)) = tokio::time::timeout(Duration::from_millis(100), next).await {
                break p;
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let id = {
            let mut w = self.lock();
            w.0 += 1;
            let id = w.0;
            w.1.insert(id, tx);
            id
        };
        let me = Unproved {
            of: Arc::clone(self),
            id,
            place: std::sync::Mutex::new(Some(place)),
        };
        (Arc::new(me), rx)
    }
}

impl Unproved {
    /// The connection showed the token: its place is given back and it is
    /// never closed for the others.
    fn proven(&self) {
        self.place.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.of.lock().1.remove(&self.id);
    }

    /// Whether the connection has shown the token.
    fn is_proven(&self) -> bool {
        self.place
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }
}

impl Drop for Unproved {
    fn drop(&mut self) {
        self.of.lock().1.remove(&self.id);
    }
}

/// The sessions a `DELETE` is ending now.
type EndingNow = Arc<std::sync::Mutex<std::collections::HashSet<String>>>;

/// A `DELETE`'s claim on the session it ends, until its answer is made
/// (the SDK has taken the session out of its map by then).
struct Ending(EndingNow, String);

impl Ending {
    /// Claims session `id`, unless another `DELETE` is ending it.
    fn claim(now: &EndingNow, id: &str) -> Option<Ending> {
        let mut set = now.lock().unwrap_or_else(|p| p.into_inner());
        set.insert(id.to_owned())
            .then(|| Ending(Arc::clone(now), id.to_owned()))
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.1);
    }
}

/// A fresh bearer token: 32 bytes from the kernel's random source, as hex.
fn new_token() -> std::io::Result<String> {
    random_hex::<32>()
}

/// `N` bytes from the kernel's random source, as hex.
fn random_hex<const N: usize>() -> std::io::Result<String> {
    let mut bytes = [0u8; N];
    random_bytes(&mut bytes)?;
    Ok(hex(&bytes))
}

/// `bytes` as lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fills `buf` from the kernel's random source (`getrandom(2)`, which
/// needs no `/dev/urandom` in the file system: a container or chroot may
/// have none).
pub(crate) fn random_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Makes a private directory (mode 0700) in `parent` to stage the socket
/// in, under a random name: the socket's directory may be one every user
/// writes (`/tmp`), where a name anyone can guess (the process id) could
/// be taken first and stop the server from starting. A name already taken
/// is never used (`mkdir` fails rather than reuse it); another is tried.
fn private_dir(parent: &Path) -> std::io::Result<std::path::PathBuf> {
    let mut tries = 0;
    loop {
        let private = parent.join(format!(".sandgate-mcp-{}", random_hex::<8>()?));
        match std::fs::DirBuilder::new().mode(0o700).create(&private) {
            Ok(()) => return Ok(private),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 16 => tries += 1,
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot make the private directory {}: {e}",
                        sandgate::policy::shown(&private)
                    ),
                ))
            }
        }
    }
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell how much of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Whether `req` carries `token` as `Authorization: Bearer …`: the scheme
/// word in any case (HTTP's schemes are case-insensitive, RFC 9110 §11.1)
/// and one or more spaces before the token, as RFC 6750 writes it. A
/// request with more than one `Authorization` header is not: which one a
/// server reads is its own choice, so the right token beside a wrong one
/// proves nothing about the request.
fn authorized<B>(req: &Request<B>, token: &str) -> bool {
    let mut given = req.headers().get_all(hyper::header::AUTHORIZATION).iter();
    let (first, second) = (given.next(), given.next());
    if second.is_some() {
        return false;
    }
    first
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .is_some_and(|(_, t)| same(t.trim_start_matches(' ').as_bytes(), token.as_bytes()))
}

/// The answer refusing `req` when it carries more than one `Host` header
/// (400, which RFC 9112 §3.2 asks of a server) or more than one `Origin`
/// header (403, as a disallowed origin is answered), a `Host` that is not
/// a host and port (400), an `Origin` that is not an origin (403), or a
/// request target naming another host than `Host` (400); `None` when it
/// is none of these (the SDK then judges what they name).
fn bad_host_or_origin<B>(req: &Request<B>) -> Option<Response<BoxBody<Bytes, Infallible>>> {
    let many = |name| req.headers().get_all(name).iter().nth(1).is_some();
    if many(hyper::header::HOST) {
        return Some(plain(
            StatusCode::BAD_REQUEST,
            "Bad Request: more than one Host header\n".into(),
        ));
    }
    if many(hyper::header::ORIGIN) {
        return Some(plain(
            StatusCode::FORBIDDEN,
            "Forbidden: more than one Origin header\n".into(),
        ));
    }
    // The SDK reads `Host` and `Origin` as URI authorities and judges
    // only the host and port they name, so `evil.example@127.0.0.1:PORT`
    // passed as this server's address, and an `Origin` with a path or a
    // user in it as its origin: neither is what a client sends (RFC 9112
    // §3.2, RFC 6454 §6.2), so each is refused, naming what is wrong.
    // Read in place: a copy is made only where a value is not UTF-8.
    let text = |name| {
        req.headers()
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()))
    };
    let host = text(hyper::header::HOST);
    if let Some(host) = &host {
        if host.contains(['@', '/', '?', '#']) {
            return Some(plain(
                StatusCode::BAD_REQUEST,
                format!(
                    "Bad Request: the Host header {host:?} is not a host and port \
                     (it holds a user, a path or a query)\n"
                ),
            ));
        }
    }
    if let Some(origin) = text(hyper::header::ORIGIN) {
        let rest = origin.split_once("://").map_or("", |(_, r)| r);
        if rest.contains(['@', '/', '?', '#']) {
            return Some(plain(
                StatusCode::FORBIDDEN,
                format!(
                    "Forbidden: the Origin header {origin:?} is not an origin \
                     (scheme://host:port, without a user, a path or a query)\n"
                ),
            ));
        }
    }
    // A request target in absolute form (`POST http://host:port/`) names
    // the host the request is for, before `Host` (RFC 9112 §3.2.2); the
    // SDK judges `Host` only, so one naming another host is refused.
    if let Some(target) = req.uri().authority() {
        let host = host.unwrap_or_default();
        if !target.as_str().eq_ignore_ascii_case(host.trim()) {
            return Some(plain(
                StatusCode::BAD_REQUEST,
                format!(
                    "Bad Request: the request target names {:?}, the Host header {host:?}\n",
                    target.as_str()
                ),
            ));
        }
    }
    None
}

/// A file this process made: its path and the identity (device, inode)
/// of what it made there, so that only that is ever removed: the token
/// file, or the `--unix` socket. The inode number cannot be given to
/// another file while this process runs (a file put at the path after
/// this one was removed could otherwise have the same one): the token
/// file is held open, and the socket's inode is held by its listener.
struct OwnFile {
    path: std::path::PathBuf,
    dev: u64,
    ino: u64,
    /// A socket (else a regular file).
    socket: bool,
    _held: Option<std::fs::File>,
}

impl OwnFile {
    /// The token file `f`, just created at `path`.
    fn created(path: &Path, f: &std::fs::File) -> std::io::Result<OwnFile> {
        use std::os::unix::fs::MetadataExt;
        let m = f.metadata()?;
        Ok(OwnFile {
            path: path.to_owned(),
            dev: m.dev(),
            ino: m.ino(),
            socket: false,
            _held: Some(f.try_clone()?),
        })
    }

    /// The socket bound at `staged` (in this process's private
    /// directory, where nobody else can replace it), to be linked at
    /// `path`.
    fn bound(staged: &Path, path: &Path) -> std::io::Result<OwnFile> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(staged)?;
        Ok(OwnFile {
            path: path.to_owned(),
            dev: m.dev(),
            ino: m.ino(),
            socket: true,
            _held: None,
        })
    }

    /// Removes the file at the path when it is still the one this process
    /// made (not a link, nor a file put there since).
    fn remove(&self) {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            let kind = m.file_type();
            let same_kind = if self.socket {
                kind.is_socket()
            } else {
                kind.is_file()
            };
            if same_kind && m.dev() == self.dev && m.ino() == self.ino {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// The files this process made that a signal removes ([`OwnFile`]: every
/// transport's token file or socket, however many the process serves),
/// and whether the signals' handling was installed.
struct AtSignal {
    installed: bool,
    next: u64,
    files: std::collections::BTreeMap<u64, Arc<OwnFile>>,
}

static AT_SIGNAL: std::sync::Mutex<AtSignal> = std::sync::Mutex::new(AtSignal {
    installed: false,
    next: 0,
    files: std::collections::BTreeMap::new(),
});

fn at_signal() -> std::sync::MutexGuard<'static, AtSignal> {
    AT_SIGNAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A file removed at a signal until dropped (the server returning), when
/// it is removed too and no signal looks at it any more (its inode
/// number may then pass to another file).
struct Removed(u64, Arc<OwnFile>);

impl Drop for Removed {
    fn drop(&mut self) {
        at_signal().files.remove(&self.0);
        self.1.remove();
    }
}

/// The files removed at a signal, locked, with the signals' handling
/// installed: SIGTERM, SIGINT and SIGHUP remove each file registered
/// ([`register`]: the token file, the socket) before they end the
/// process. A thread, made the first time, waits for one, removes every
/// file registered then, and ends the process with `128 + n` for signal
/// `n`, as `sandgate run` does (any command running is ended as a killed
/// server's are). A signal the process inherited as ignored stays
/// ignored. Several transports in one process each register their own
/// file. When the signals cannot be handled (the embedding program
/// handles them itself), the error is answered.
///
/// A file made while this is held and registered before it is let go is
/// removed by a signal however soon the signal comes: the thread that
/// handles it waits for the lock. Before, a socket was put at its path
/// first and registered after, and a SIGTERM between the two ended the
/// process by the signal's default action, leaving the socket file.
fn signals_handled() -> std::io::Result<std::sync::MutexGuard<'static, AtSignal>> {
    let mut at = at_signal();
    if !at.installed {
        let caught = sandgate::exec::AbortSignal::new();
        caught.on_signals(&[libc::SIGHUP, libc::SIGINT, libc::SIGTERM])?;
        std::thread::Builder::new()
            .name("remove-at-signal".into())
            .spawn(move || {
                caught.wait();
                for f in at_signal().files.values() {
                    f.remove();
                }
                let sig = sandgate::exec::AbortSignal::caught_signal().unwrap_or(libc::SIGTERM);
                std::process::exit(128 + sig);
            })?;
        at.installed = true;
    }
    Ok(at)
}

/// Registers `own` to be removed at a signal until the answer is dropped.
fn register(at: &mut AtSignal, own: Arc<OwnFile>) -> Removed {
    at.next += 1;
    let id = at.next;
    at.files.insert(id, Arc::clone(&own));
    Removed(id, own)
}

/// Checks that `addr` is a loopback address: any other would hand the
/// policy's authority to the network.
pub fn check_loopback(addr: &SocketAddr) -> Result<(), String> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(format!(
            "--http serves loopback addresses only (127.0.0.1 or [::1]), not {}",
            addr.ip()
        ))
    }
}

/// Serves streamable HTTP on `addr` (loopback only) until the process ends.
/// A token is generated, written to `token_file` (created, mode 0600; an
/// existing file is refused) and printed once to stderr; every request must
/// carry it as `Authorization: Bearer …`, a `Host` naming this address, and
/// no `Origin` other than this address.
pub async fn serve_http(
    server: Server,
    addr: SocketAddr,
    token_file: &Path,
) -> std::io::Result<()> {
    check_loopback(&addr).map_err(std::io::Error::other)?;
    // Read before anything is bound or written.
    let idle = http_idle()?;
    let stall = stall()?;
    outside_the_policy(
        &server,
        token_file,
        "the token file's directory",
        "where the agent's tools and commands could read the token and open a session of their own",
    )?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let token = new_token()?;
    // A token past the file size limit (`ulimit -f 0`) would raise
    // `SIGXFSZ`, which ends the program: refused before the file is made.
    sandgate::rootfs::within_file_size_limit(token.len() as u64).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "the token file {}: {e} (the file size limit, ulimit -f, is below {} bytes)",
                sandgate::policy::shown(token_file),
                token.len()
            ),
        )
    })?;
    // Removed at every exit this process makes in order: an error return
    // (the guard) and SIGTERM, SIGINT or SIGHUP (a thread). The lock is
    // held from before the file is made until it is registered, so that
    // no signal in between leaves it.
    let (mut f, _removed) = {
        let mut at = signals_handled()?;
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(token_file)
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "the token file {}: {e} (remove it first)",
                        sandgate::policy::shown(token_file)
                    ),
                )
            })?;
        let own = Arc::new(OwnFile::created(token_file, &f)?);
        let removed = register(&mut at, own);
        (f, removed)
    };
    f.write_all(token.as_bytes())?;
    drop(f);
    let port = addr.port();
    let host = match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    let mut hosts = vec![format!("{host}:{port}")];
    let mut origins = vec![format!("http://{host}:{port}")];
    if addr.ip().is_loopback() {
        hosts.push(format!("localhost:{port}"));
        origins.push(format!("http://localhost:{port}"));
    }
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    // Sessions are closed for being idle here ([`close_idle`]), not by
    // the SDK, whose timer does not see a call waiting on its command.
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let sessions = Arc::new(manager);
    let requests = Arc::new(Requests::new(idle));
    tokio::spawn(close_idle(Arc::clone(&sessions), Arc::clone(&requests)));
    let mcp = StreamableHttpService::new(
        move || Ok(server.new_session()),
        Arc::clone(&sessions),
        config,
    );
    // Requests opening a session that have not yet put it in `sessions`.
    let opening = Arc::new(AtomicUsize::new(0));
    say!(
        "sandgate: serving MCP on http://{host}:{port}/ (token written to {})",
        sandgate::policy::shown(token_file)
    );
    say!("sandgate: bearer token: {token}");
    let token = Arc::new(token);
    let unproven = Arc::new(Unproven::new(unproven_cap()));
    let ending: EndingNow = Arc::default();
    loop {
        let (stream, _) = accept_next(async || listener.accept().await).await;
        let (me, closed) = unproven.admit().await;
        let mcp = mcp.clone();
        let token = Arc::clone(&token);
        let sessions = Arc::clone(&sessions);
        let opening = Arc::clone(&opening);
        let requests = Arc::clone(&requests);
        let ending = Arc::clone(&ending);
        tokio::spawn(async move {
            // Dropped last, after the connection: its place is given back
            // once its descriptor is closed.
            let me = me;
            let proof = Arc::clone(&me);
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let mut mcp = mcp.clone();
                let token = Arc::clone(&token);
                let proof = Arc::clone(&proof);
                let sessions = Arc::clone(&sessions);
                let opening = Arc::clone(&opening);
                let requests = Arc::clone(&requests);
                let ending = Arc::clone(&ending);
                async move {
                    if !authorized(&req, &token) {
                        let mut resp = plain(
                            StatusCode::UNAUTHORIZED,
                            "a bearer token is required\n".into(),
                        );
                        resp.headers_mut().insert(
                            hyper::header::WWW_AUTHENTICATE,
                            hyper::header::HeaderValue::from_static("Bearer"),
                        );
                        // The connection ends with this answer: kept
                        // alive, a client without the token held it (a
                        // descriptor, a task) as long as it liked by
                        // sending a request every few seconds, and tried
                        // tokens on it without end.
                        resp.headers_mut().insert(
                            hyper::header::CONNECTION,
                            hyper::header::HeaderValue::from_static("close"),
                        );
                        return Ok::<_, Infallible>(resp);
                    }
                    proof.proven();
                    // The SDK judges the first `Host` and the first
                    // `Origin` only, so a second one naming another place
                    // would ride along on a request it serves: refused
                    // here, `Host` as HTTP/1.1 says (400), `Origin` as
                    // the SDK refuses one it does not allow (403).
                    if let Some(resp) = bad_host_or_origin(&req) {
                        return Ok(resp);
                    }
                    // The SDK reads an id that is not text as no id (and
                    // opens a session for it), so the count below would
                    // miss it: refused here, so that a present id is
                    // one the SDK looks up.
                    let id = req.headers().get("mcp-session-id");
                    if id.is_some_and(|v| v.to_str().is_err()) {
                        return Ok(plain(
                            StatusCode::BAD_REQUEST,
                            "Bad Request: the Mcp-Session-Id header is not text (visible ASCII)\n"
                                .into(),
                        ));
                    }
                    // Whether the session a request names is held before
                    // the SDK sees it: the SDK answers `DELETE` of one it
                    // does not hold 202, as though it ended something.
                    let named = id.and_then(|v| v.to_str().ok()).map(str::to_owned);
                    let method = req.method().clone();
                    // A `DELETE` claims its session first, so that of two
                    // at once only one ends it: both found it held before
                    // either had ended it, and both were answered 2xx. The
                    // other is answered 404 as for an ended session (it
                    // is being ended); looked up only after the claim, so
                    // one that comes once the first is done finds none.
                    let _ending = match &named {
                        Some(id) if method == hyper::Method::DELETE => {
                            match Ending::claim(&ending, id) {
                                Some(e) => Some(e),
                                None => return Ok(session_not_found(id)),
                            }
                        }
                        _ => None,
                    };
                    let held = match &named {
                        Some(id) => sessions.sessions.read().await.contains_key(id.as_str()),
                        None => true,
                    };
                    // A POST without a session id may open one: it holds
                    // a place until its session is in `sessions` (the
                    // call returns after the SDK put it there).
                    let opens = req.method() == hyper::Method::POST
                        && !req.headers().contains_key("mcp-session-id");
                    let _place = if opens {
                        let open = sessions.sessions.read().await.len();
                        match Place::take(&opening, open) {
                            Some(p) => Some(p),
                            None => {
                                return Ok(plain(
                                    StatusCode::SERVICE_UNAVAILABLE,
                                    format!("{}\n", too_many_sessions(MAX_SESSIONS)),
                                ))
                            }
                        }
                    } else {
                        None
                    };
                    // The body is read here, in bounded time, so a
                    // stalled one ends with its place given back.
                    let (parts, body) = req.into_parts();
                    let body = match read_body(body, stall).await {
                        Ok(b) => b,
                        Err(resp) => return Ok(resp),
                    };
                    // A message giving a key twice is refused before the
                    // SDK reads it (last value kept) or opens a session.
                    if method == hyper::Method::POST {
                        let text = std::str::from_utf8(&body).ok();
                        if let Some(d) = text.and_then(crate::lines::duplicate_refusal) {
                            return Ok(duplicate_refused(d));
                        }
                    }
                    // A request of a session keeps it from being idle
                    // until its answer (a call's stream) ends.
                    let open = parts
                        .headers
                        .get("mcp-session-id")
                        .and_then(|v| v.to_str().ok())
                        .map(|id| requests.open(id));
                    let resp = mcp
                        .call(Request::from_parts(parts, Full::new(body)))
                        .await?;
                    // The SDK's own checks (the Host, the Origin, the
                    // protocol version, the media types) come first; then
                    // a session not held is answered 404, as streamable
                    // HTTP asks, so the client knows to open a new one.
                    if let Some(id) = &named {
                        let unknown = match resp.status() {
                            StatusCode::ACCEPTED => method == hyper::Method::DELETE && !held,
                            StatusCode::NOT_FOUND => {
                                !sessions.sessions.read().await.contains_key(id.as_str())
                            }
                            _ => false,
                        };
                        if unknown {
                            return Ok(session_not_found(id));
                        }
                    }
                    Ok(match open {
                        Some(open) => resp.map(|b| {
                            b.map_frame(move |f| {
                                let _ = &open;
                                f
                            })
                            .boxed()
                        }),
                        None => resp,
                    })
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(stall)
                .max_buf_size(MAX_HEAD)
                .serve_connection(TokioIo::new(Stalls::new(stream, stall)), svc);
            // Closed (dropped) when a newer connection takes its place
            // before it showed the token; once it has, never (also when
            // it showed it after the oldest place was taken from it: its
            // place was given back then; the request that showed it runs
            // in this same task, so never half way).
            let gone = Arc::clone(&me);
            let evicted = async move {
                if closed.await.is_err() || gone.is_proven() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = conn => {}
                () = evicted => {}
            }
            drop(me);
        });
    }
}

/// Serves MCP (newline-delimited JSON-RPC, as on stdio) on a UNIX socket at
/// `path`, one session per connection, until the process ends. The socket
/// is made in a private directory (made new, under a random name, beside
/// `path`), set to mode 0600 and only then linked at `path`, so no other
/// user can connect in between. Nothing already at
/// `path` is replaced but a socket no server listens on (one left by a
/// server that was killed): not a file, a link or a live server's socket.
/// A `path` inside one of the policy's directories is refused. The
/// socket file is removed when this returns and when SIGTERM, SIGINT or
/// SIGHUP ends the process (exit `128 + n`), while what is at `path` is
/// still the socket bound here (a file or another server's socket put
/// there since is left).
pub async fn serve_unix(server: Server, path: &Path) -> std::io::Result<()> {
    // Read before anything is made.
    let stall = stall()?;
    let parent = outside_the_policy(
        &server,
        path,
        "the socket's directory",
        "where commands could connect to it and open a session of their own",
    )?;
    let private = private_dir(parent)?;
    let staged = private.join("sock");
    // Removed at every exit this process makes in order, as the token
    // file is: an error return or the future dropped (the guard, dropped
    // before the listener, which holds the socket's inode meanwhile) and
    // SIGTERM, SIGINT or SIGHUP (a thread). Only while it is still this
    // server's socket: a file or another server's socket put at the path
    // since is left. The lock is held from before the socket is put at its
    // path until it is registered, so that no signal in between leaves it.
    let (listener, _removed) = {
        let at = signals_handled();
        let bound = (|| {
            let at = at?;
            let l = tokio::net::UnixListener::bind(&staged)?;
            std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
            let own = OwnFile::bound(&staged, path)?;
            place_socket(&staged, path)?;
            Ok::<_, std::io::Error>((l, own, at))
        })();
        let _ = std::fs::remove_file(&staged);
        let _ = std::fs::remove_dir(&private);
        let (listener, own, mut at) = bound?;
        (listener, register(&mut at, Arc::new(own)))
    };
    say!(
        "sandgate: serving MCP on the UNIX socket {}",
        sandgate::policy::shown(path)
    );
    let cap = unix_session_cap();
    let places = Arc::new(tokio::sync::Semaphore::new(cap));
    loop {
        let (stream, _) = accept_next(async || listener.accept().await).await;
        let Ok(place) = Arc::clone(&places).try_acquire_owned() else {
            tokio::spawn(async move {
                let line = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
                    "code": -32000, "message": too_many_sessions(cap)}});
                let mut stream = stream;
                let _ = tokio::time::timeout(
                    stall,
                    tokio::io::AsyncWriteExt::write_all(
                        &mut stream,
                        format!("{line}\n").as_bytes(),
                    ),
                )
                .await;
            });
            continue;
        };
        let server = server.new_session();
        tokio::spawn(async move {
            let _place = place;
            // Watched once the input ends: a client that shut down both
            // ways, or closed, has its running calls stopped at once.
            let watched = std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned();
            let (r, w) = stream.into_split();
            let activity = Arc::new(Activity::new(stall));
            let r = Quiet::new(r, Arc::clone(&activity));
            let w = Heard(Stalls::new(w, stall), activity);
            let inline: Arc<dyn crate::lines::Inline> = Arc::new(server.clone());
            let t = match watched {
                Ok(fd) => crate::lines::LineTransport::with_inline_watching(r, w, inline, fd),
                Err(_) => crate::lines::LineTransport::with_inline(r, w, inline),
            };
            server.watch_output(&t);
            if let Ok(running) = server.serve(t).await {
                let _ = running.waiting().await;
            }
        });
    }
}

/// What a UNIX socket connection did, shared by its two halves: whether
/// its client has sent anything yet, and whether its output failed (then
/// its input ends too).
struct Activity {
    /// When the input is ended unless the client speaks before.
    first_due: tokio::time::Instant,
    heard: std::sync::atomic::AtomicBool,
    broken: std::sync::atomic::AtomicBool,
    /// The reader waiting for input, woken when the output fails.
    reader: std::sync::Mutex<Option<std::task::Waker>>,
}

impl Activity {
    /// A connection taken now, given `first` to send its first bytes.
    fn new(first: Duration) -> Activity {
        Activity {
            first_due: tokio::time::Instant::now() + first,
            heard: std::sync::atomic::AtomicBool::new(false),
            broken: std::sync::atomic::AtomicBool::new(false),
            reader: std::sync::Mutex::new(None),
        }
    }

    /// When the input is ended unless the client speaks before: only
    /// until its first bytes (never once it has spoken).
    fn due(&self) -> Option<tokio::time::Instant> {
        (!self.heard.load(Ordering::Acquire)).then_some(self.first_due)
    }

    /// The output failed: the input ends, so the session does.
    fn break_off(&self) {
        self.broken.store(true, Ordering::Release);
        let waker = self.reader.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A UNIX socket connection's input, ended (read as end of input, so the
/// session ends and gives back its place) when its client has sent nothing
/// within the stall time of connecting, or when its output failed.
struct Quiet<R> {
    inner: R,
    activity: Arc<Activity>,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl<R> Quiet<R> {
    fn new(inner: R, activity: Arc<Activity>) -> Self {
        let timer = Box::pin(tokio::time::sleep_until(activity.first_due));
        Quiet {
            inner,
            activity,
            timer,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Quiet<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.activity.broken.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.activity.heard.store(true, Ordering::Release);
                }
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
        *this
            .activity
            .reader
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(cx.waker().clone());
        if this.activity.broken.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        loop {
            let Some(due) = this.activity.due() else {
                return Poll::Pending;
            };
            if tokio::time::Instant::now() >= due {
                return Poll::Ready(Ok(()));
            }
            this.timer.as_mut().reset(due);
            if this.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

/// A UNIX socket connection's output: one that fails (after
/// the stall time without progress, through [`Stalls`]) ends the input
/// too.
struct Heard<W>(Stalls<W>, Arc<Activity>);

impl<W> Heard<W> {
    fn seen<T>(&self, r: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if let Poll::Ready(Err(_)) = &r {
            self.1.break_off();
        }
        r
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Heard<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.0).poll_write(cx, buf);
        this.seen(r)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.0).poll_flush(cx);
        this.seen(r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.0).poll_shutdown(cx);
        this.seen(r)
    }
}

/// Refuses `file` when its directory, `what` (the socket's or the token
/// file's), lies inside one of the policy's directories, saying `why`:
/// every command reaches a socket there (connecting to a UNIX socket by
/// path is restricted only from Landlock ABI 9), and the file tools and
/// commands read a token file there; either way one narrowed to its
/// client's roots could open a session of its own without them. Answers
/// the directory.
fn outside_the_policy<'a>(
    server: &Server,
    file: &'a Path,
    what: &str,
    why: &str,
) -> std::io::Result<&'a Path> {
    let parent = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let real = std::fs::canonicalize(parent).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("{what} {}: {e}", sandgate::policy::shown(parent)),
        )
    })?;
    match server
        .shared
        .dirs
        .iter()
        .find(|d| real.starts_with(&d.resolved))
    {
        Some(d) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{what} {} lies inside {}, a directory of the policy, {why}; put it elsewhere",
                sandgate::policy::shown(parent),
                sandgate::policy::shown(&d.resolved)
            ),
        )),
        None => Ok(parent),
    }
}

/// Gives the bound socket at `staged` the name `path`. A hard link, since
/// `link(2)` never replaces an existing name (on every filesystem, where
/// `rename(2)` would silently replace a file). What is already at `path`
/// is removed only when it is a socket that refuses connections, so no
/// server listens on it any more; then the link is tried once more, and
/// anything that took the name in between is left alone.
fn place_socket(staged: &Path, path: &Path) -> std::io::Result<()> {
    use std::io::ErrorKind;
    use std::os::unix::fs::FileTypeExt;
    let exists = |what: &str| {
        std::io::Error::new(
            ErrorKind::AlreadyExists,
            format!(
                "{} exists and is {what}; sandgate replaces only a socket no server listens on",
                sandgate::policy::shown(path)
            ),
        )
    };
    match std::fs::hard_link(staged, path) {
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        other => return other,
    }
    let kind = std::fs::symlink_metadata(path)?.file_type();
    if kind.is_symlink() {
        return Err(exists("a symbolic link"));
    }
    if !kind.is_socket() {
        return Err(exists(if kind.is_dir() {
            "a directory"
        } else {
            "not a socket"
        }));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
        Ok(_) => {
            return Err(std::io::Error::new(
                ErrorKind::AddrInUse,
                format!(
                    "a server already listens on {}",
                    sandgate::policy::shown(path)
                ),
            ))
        }
        Err(e) => {
            return Err(exists(&format!(
                "a socket that cannot be judged stale ({e})"
            )))
        }
    }
    std::fs::remove_file(path)?;
    std::fs::hard_link(staged, path)
}
