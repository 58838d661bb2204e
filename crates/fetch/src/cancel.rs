//! Cancelling a fetch in flight: a flag the caller sets from another
//! thread, and the client's transport that watches it.
//!
//! ureq is synchronous and blocks in one read for as long as the fetch's
//! deadline allows (a server that stalls before its headers, or drips its
//! body, holds the calling thread that long). Every connection the client
//! makes is wrapped in [`Watched`], which waits for input in slices of at
//! most [`SLICE`] and checks the flag of the fetch running on this thread
//! between them; once it is set the wait fails, the client drops the
//! connection (closing it: a failed exchange is never pooled), and the
//! fetch answers `E_ABORTED`. The flag is thread-local for the call, as
//! the pin is ([`crate::resolve`]): a pooled connection reused by another
//! fetch watches that fetch's flag.

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ureq::unversioned::transport::time::Duration as UDuration;
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};

/// The longest one wait for input lasts before the flag is looked at
/// again: how late a cancelled fetch notices.
pub(crate) const SLICE: std::time::Duration = std::time::Duration::from_millis(50);

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

/// The last connector of the client's chain: wraps every connection in
/// [`Watched`].
#[derive(Debug)]
pub(crate) struct Watch;

impl Connector<Box<dyn Transport>> for Watch {
    type Out = Watched;

    fn connect(
        &self,
        _details: &ConnectionDetails,
        chained: Option<Box<dyn Transport>>,
    ) -> Result<Option<Watched>, ureq::Error> {
        Ok(chained.map(Watched))
    }
}

/// A connection whose waits the running fetch's flag can end.
pub(crate) struct Watched(Box<dyn Transport>);

impl fmt::Debug for Watched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Watched").field(&self.0).finish()
    }
}

impl Transport for Watched {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.0.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        if current().is_some_and(|f| f.is_cancelled()) {
            return Err(cancelled_error());
        }
        self.0.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        // A per-read timeout would fail a slice as its own: not sliced
        // (the fetcher sets none).
        let Some(flag) = current().filter(|_| timeout.per_read.is_none()) else {
            return self.0.await_input(timeout);
        };
        let start = std::time::Instant::now();
        loop {
            if flag.is_cancelled() {
                return Err(cancelled_error());
            }
            let left = match timeout.after {
                UDuration::Exact(d) => d.saturating_sub(start.elapsed()),
                UDuration::NotHappening => std::time::Duration::MAX,
            };
            if left <= SLICE {
                let last = NextTimeout {
                    after: UDuration::Exact(left),
                    ..timeout
                };
                return self.0.await_input(last);
            }
            let slice = NextTimeout {
                after: UDuration::Exact(SLICE),
                ..timeout
            };
            match self.0.await_input(slice) {
                Err(ureq::Error::Timeout(_)) => continue,
                other => return other,
            }
        }
    }

    fn is_open(&mut self) -> bool {
        self.0.is_open()
    }

    fn is_tls(&self) -> bool {
        self.0.is_tls()
    }
}
