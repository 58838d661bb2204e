//! Cancelling a fetch in flight: a flag the caller sets from another
//! thread, and the client's transport that watches it.
//!
//! ureq is synchronous and blocks in one system call for as long as the
//! fetch's deadline allows: a connect to an address that never answers, a
//! TLS handshake or a response that stalls, an upload to a server that
//! does not read. So the client's TCP connections are made here
//! ([`SlicedTcp`], in place of ureq's own TCP connector), and every wait
//! on them lasts at most [`SLICE`] before the flag of the fetch running
//! on this thread is looked at again:
//!
//! - the connect runs on a helper thread (std cannot connect without
//!   blocking, and this crate has no `unsafe`) that the fetch waits on in
//!   slices; a cancelled fetch leaves it, and the thread ends at its own
//!   connect timeout (never past the fetch's deadline), closing whatever it
//!   connected;
//! - reads and writes ([`Sliced`]) use a socket timeout of one slice, and
//!   a write sends what the kernel takes in that slice, so an upload stops
//!   between two slices, not at the deadline. TLS runs over this
//!   transport, so its handshake and records are cut short alike;
//! - name resolution ([`resolve`]) runs on a helper thread when the fetch
//!   has a flag: the resolver cannot be interrupted, so a cancelled fetch
//!   answers at once and the query finishes on its own, within the
//!   timeout the resolver was given (the fetch's remaining time).
//!
//! Helpers are bounded: at most [`MAX_HELPER_THREADS`] run at once in the
//! process, those left by cancelled fetches included. Each holds a thread
//! and, while it connects, a socket, for up to its fetch's timeout (five
//! minutes at most); without a bound, a long-lived server whose client
//! starts and cancels fetches to an address that never answers would pile
//! them up until threads or descriptors ran out for everything else. At
//! the bound a cancellable fetch that needs a helper fails at once with
//! `E_IO`, saying so; a fetch without a flag needs none.
//!
//! Once the flag is set the wait fails, the client drops the connection
//! (closing it: a failed exchange is never pooled), and the fetch answers
//! `E_ABORTED`. The flag is thread-local for the call, as the pin is
//! ([`crate::resolve`]): a pooled connection reused by another fetch
//! watches that fetch's flag.

use std::cell::RefCell;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Weak};
use std::time::{Duration, Instant};

use ureq::unversioned::transport::time::Duration as UDuration;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, ShutdownHandle,
    Transport,
};

use crate::resolve::Resolve;

/// The longest one wait for input lasts before the flag is looked at
/// again: how late a cancelled fetch notices.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// A flag that cancels the fetches it is given to ([`crate::FetchOptions::cancel`]):
/// set it from any thread, and a fetch waiting on the network stops
/// within 50 ms, its connection closed, with `E_ABORTED`.
/// Clones share the flag; two flags are equal when they are the same one.
#[derive(Clone, Debug, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// A flag not set.
    pub fn new() -> CancelFlag {
        CancelFlag::default()
    }

    /// A flag over `flag`, which the caller already sets for other work.
    pub fn from_arc(flag: Arc<AtomicBool>) -> CancelFlag {
        CancelFlag(flag)
    }

    /// Sets the flag: every fetch given it stops.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl PartialEq for CancelFlag {
    fn eq(&self, other: &CancelFlag) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CancelFlag {}

thread_local! {
    static CURRENT: RefCell<Option<CancelFlag>> = const { RefCell::new(None) };
}

/// Sets the flag the connections watch for the duration of one fetch on
/// this thread.
pub(crate) struct CancelGuard(());

impl CancelGuard {
    pub(crate) fn set(flag: Option<CancelFlag>) -> CancelGuard {
        CURRENT.with(|c| *c.borrow_mut() = flag);
        CancelGuard(())
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

fn current() -> Option<CancelFlag> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Not `Interrupted`: a body's reader retries that one.
fn cancelled_error() -> ureq::Error {
    ureq::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "sandgate: the fetch was cancelled",
    ))
}

/// The most helper threads (a connect or a name query of a cancellable
/// fetch, under way or left by a cancelled one) the process runs at once.
pub const MAX_HELPER_THREADS: usize = 128;

/// The helper threads running, process wide.
static HELPERS: AtomicUsize = AtomicUsize::new(0);

/// A place among the [`MAX_HELPER_THREADS`], given back when dropped (by
/// the helper, once its work is done and its answer sent or dropped).
struct Place(());

impl Place {
    fn take() -> Option<Place> {
        HELPERS
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_HELPER_THREADS).then_some(n + 1)
            })
            .ok()
            .map(|_| Place(()))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        HELPERS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why a cancellable fetch got no helper: every place is taken.
#[derive(Debug)]
pub(crate) struct AtCap;

impl fmt::Display for AtCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{MAX_HELPER_THREADS} helper threads are already connecting or resolving names for \
             cancellable fetches (cancelled ones finish within their own timeout); try again \
             once some end"
        )
    }
}

impl std::error::Error for AtCap {}

/// Whether `e` is [`AtCap`].
pub(crate) fn is_at_cap(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<AtCap>())
}

/// Waits for `work`, run on a helper thread named `name`, in slices,
/// watching `flag`: `None` once the flag is set (the thread is left to
/// finish on its own; what it answers then is dropped). An [`AtCap`]
/// error when [`MAX_HELPER_THREADS`] are running.
fn on_helper<T: Send + 'static>(
    name: &str,
    flag: &CancelFlag,
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<Option<T>> {
    let place = Place::take().ok_or_else(|| io::Error::other(AtCap))?;
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = tx.send(work());
            drop(place);
        })?;
    loop {
        if flag.is_cancelled() {
            return Ok(None);
        }
        match rx.recv_timeout(SLICE) {
            Ok(answer) => return Ok(Some(answer)),
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other(format!(
                    "the {name} thread ended without an answer"
                )))
            }
        }
    }
}

/// Resolves `name` through `resolver` within `timeout`; `None` when the
/// fetch running on this thread was cancelled first (the query then
/// finishes on its helper thread, within `timeout`).
pub(crate) fn resolve(
    resolver: &Arc<dyn Resolve>,
    name: &str,
    port: u16,
    timeout: Duration,
) -> Option<io::Result<Vec<IpAddr>>> {
    let Some(flag) = current() else {
        return Some(resolver.resolve(name, port, timeout));
    };
    let (resolver, query) = (resolver.clone(), name.to_owned());
    match on_helper("sandgate-fetch-dns", &flag, move || {
        resolver.resolve(&query, port, timeout)
    }) {
        Ok(answer) => answer,
        Err(e) => Some(Err(e)),
    }
}

/// The time a wait has left: `None` when it has no deadline.
fn exact(d: UDuration) -> Option<Duration> {
    match d {
        UDuration::Exact(d) => Some(d),
        UDuration::NotHappening => None,
    }
}

/// The first connector of the client's chain, in place of ureq's TCP
/// connector: connects to the resolved (pinned) addresses in turn,
/// watching the running fetch's flag, and hands on a [`Sliced`]
/// connection.
#[derive(Debug)]
pub(crate) struct SlicedTcp;

impl<In: Transport> Connector<In> for SlicedTcp {
    type Out = Either<In, Sliced>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        if chained.is_some() {
            return Ok(chained.map(Either::A));
        }
        let stream = connect_any(details)?;
        if details.config.no_delay() {
            stream.set_nodelay(true)?;
        }
        let stream = Arc::new(stream);
        (details.register_shutdown)(Arc::downgrade(&stream) as Weak<dyn ShutdownHandle>)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(Sliced {
            stream,
            buffers,
            read_timeout: None,
            write_timeout: None,
        })))
    }
}

/// The shortest time one address is given.
const MIN_PER_ADDRESS: Duration = Duration::from_millis(10);

/// Tries the addresses in order, each given its share of the time left:
/// weights halving from one address to the next, as ureq does (so if
/// every address hangs, the first has about half the connect's time), but
/// shared out from what is left rather than from the whole, so an address
/// that fails at once leaves its time to the next ones and the last is
/// given all that remains (a connect that answers `E_TIMEOUT` has used
/// the connect's whole time).
fn connect_any(details: &ConnectionDetails) -> Result<TcpStream, ureq::Error> {
    let started = Instant::now();
    let total = exact(details.timeout.after);
    let mut weight = 1.0_f64;
    // The weights of this address and every one after it.
    let count = i32::try_from(details.addrs.len()).unwrap_or(i32::MAX);
    let mut weights_left = 2.0 * (1.0 - 0.5_f64.powi(count));
    let mut last = None;
    for addr in details.addrs.iter() {
        let per = match total {
            Some(t) => {
                let left = t.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return Err(ureq::Error::Timeout(details.timeout.reason));
                }
                Some(
                    left.mul_f64((weight / weights_left).clamp(0.0, 1.0))
                        .max(MIN_PER_ADDRESS)
                        .min(left),
                )
            }
            None => None,
        };
        weights_left -= weight;
        weight /= 2.0;
        match connect_one(*addr, per) {
            Ok(stream) => return Ok(stream),
            Err(e) if current().is_some_and(|f| f.is_cancelled()) => return Err(e),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        ureq::Error::Io(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "no address to connect to",
        ))
    }))
}

/// One connect, within `per`: on a helper thread watched in slices when
/// the running fetch has a flag.
fn connect_one(addr: SocketAddr, per: Option<Duration>) -> Result<TcpStream, ureq::Error> {
    let dial = move || -> Result<TcpStream, ureq::Error> {
        match per {
            Some(t) => TcpStream::connect_timeout(&addr, t),
            None => TcpStream::connect(addr),
        }
        .map_err(|e| match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
                ureq::Error::Timeout(ureq::Timeout::Connect)
            }
            _ => ureq::Error::Io(e),
        })
    };
    let Some(flag) = current() else {
        return dial();
    };
    match on_helper("sandgate-fetch-connect", &flag, dial)? {
        Some(answer) => answer,
        None => Err(cancelled_error()),
    }
}

/// A TCP connection whose every wait lasts at most [`SLICE`] before the
/// running fetch's flag (and the wait's own timeout) is looked at again.
pub(crate) struct Sliced {
    stream: Arc<TcpStream>,
    buffers: LazyBuffers,
    /// The socket's read and write timeouts as last set: a wait sets one
    /// only when it differs (almost always a whole [`SLICE`]), so a
    /// request and its answer cost no `setsockopt` of their own.
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

impl Sliced {
    fn set_read_timeout(&mut self, t: Duration) -> io::Result<()> {
        if self.read_timeout != Some(t) {
            self.stream.set_read_timeout(Some(t))?;
            self.read_timeout = Some(t);
        }
        Ok(())
    }

    fn set_write_timeout(&mut self, t: Duration) -> io::Result<()> {
        if self.write_timeout != Some(t) {
            self.stream.set_write_timeout(Some(t))?;
            self.write_timeout = Some(t);
        }
        Ok(())
    }
}

impl fmt::Debug for Sliced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sliced")
            .field("peer", &self.stream.peer_addr().ok())
            .finish()
    }
}

/// A wait's end, sliced.
struct Wait {
    started: Instant,
    after: Option<Duration>,
    timeout: NextTimeout,
    flag: Option<CancelFlag>,
}

impl Wait {
    fn new(timeout: NextTimeout) -> Wait {
        Wait {
            started: Instant::now(),
            after: exact(timeout.after),
            timeout,
            flag: current(),
        }
    }

    /// The next slice to wait, or why the wait is over.
    fn slice(&self) -> Result<Duration, ureq::Error> {
        if self.flag.as_ref().is_some_and(CancelFlag::is_cancelled) {
            return Err(cancelled_error());
        }
        match self.after {
            None => Ok(SLICE),
            Some(after) => {
                let left = after.saturating_sub(self.started.elapsed());
                if left.is_zero() {
                    Err(ureq::Error::Timeout(self.timeout.reason))
                } else {
                    Ok(left.min(SLICE))
                }
            }
        }
    }
}

/// A socket timeout ran out (or a signal came): wait another slice.
fn again(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

impl Transport for Sliced {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let wait = Wait::new(timeout.for_write());
        let mut sent = 0;
        while sent < amount {
            self.set_write_timeout(wait.slice()?)?;
            let output = &self.buffers.output()[sent..amount];
            match (&*self.stream).write(output) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero).into()),
                Ok(n) => sent += n,
                Err(e) if again(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let wait = Wait::new(timeout.for_read());
        loop {
            self.set_read_timeout(wait.slice()?)?;
            let input = self.buffers.input_append_buf();
            match (&*self.stream).read(input) {
                Ok(n) => {
                    self.buffers.input_appended(n);
                    return Ok(n > 0);
                }
                Err(e) if again(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Open when nothing is waiting to be read and the peer has not
    /// closed (a pooled connection is looked at before it is reused).
    fn is_open(&mut self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut byte = [0];
        let open = matches!(
            (&*self.stream).read(&mut byte),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        );
        open && self.stream.set_nonblocking(false).is_ok()
    }
}
