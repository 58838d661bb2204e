//! Name resolution, done by sandgate (never by the HTTP client), and the
//! pin that hands the client only the addresses the authorizer checked.

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::time::Duration;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// Turns a DNS name into addresses. The fetcher calls it once per hop,
/// checks every address it answers, and connects only to those.
///
/// Tests inject their own (a fixed answer, or one that changes between
/// calls); closures `Fn(&str, u16, Duration) -> io::Result<Vec<IpAddr>>`
/// implement it.
pub trait Resolve: Send + Sync {
    /// The addresses of `host` (a strict, lowercased DNS name: literals never
    /// reach a resolver) for a connection to `port`, within `timeout`.
    fn resolve(&self, host: &str, port: u16, timeout: Duration) -> io::Result<Vec<IpAddr>>;
}

impl<F> Resolve for F
where
    F: Fn(&str, u16, Duration) -> io::Result<Vec<IpAddr>> + Send + Sync,
{
    fn resolve(&self, host: &str, port: u16, timeout: Duration) -> io::Result<Vec<IpAddr>> {
        self(host, port, timeout)
    }
}

/// The system resolver (`getaddrinfo`), on a helper thread so that the
/// total timeout holds while it waits.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16, timeout: Duration) -> io::Result<Vec<IpAddr>> {
        let (tx, rx) = mpsc::sync_channel(1);
        let query = (host.to_owned(), port);
        std::thread::Builder::new()
            .name("sandgate-dns".into())
            .spawn(move || {
                let answer = query
                    .to_socket_addrs()
                    .map(|addrs| addrs.map(|a| a.ip()).collect::<Vec<_>>());
                let _ = tx.send(answer);
            })?;
        match rx.recv_timeout(timeout) {
            Ok(answer) => answer,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "name resolution timed out",
            )),
        }
    }
}

/// The addresses checked for the hop being sent on this thread.
#[derive(Debug)]
pub(crate) struct Pin {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) addrs: Vec<SocketAddr>,
}

/// ureq keeps at most 16 addresses per name.
pub(crate) const MAX_PINNED: usize = 16;

thread_local! {
    static PIN: RefCell<Option<Pin>> = const { RefCell::new(None) };
}

/// Sets the pin for the duration of one client call on this thread.
pub(crate) struct PinGuard(());

impl PinGuard {
    pub(crate) fn set(pin: Pin) -> PinGuard {
        PIN.with(|p| *p.borrow_mut() = Some(pin));
        PinGuard(())
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        PIN.with(|p| *p.borrow_mut() = None);
    }
}

/// The client's resolver: it resolves nothing. It answers the addresses
/// pinned for this thread's current hop, and only for the host and port
/// they were checked for; anything else is an error (fail closed).
///
/// ureq is synchronous: the resolver runs on the thread that called it,
/// inside the call that the pin guards.
pub(crate) struct PinnedResolver;

impl fmt::Debug for PinnedResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PinnedResolver")
    }
}

impl Resolver for PinnedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        _config: &Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.host().unwrap_or_default();
        let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
            Some("http") => 80,
            _ => 443,
        });
        PIN.with(|p| {
            let pin = p.borrow();
            match pin.as_ref() {
                Some(pin) if pin.host == host && pin.port == port && !pin.addrs.is_empty() => {
                    let mut out = self.empty();
                    for addr in pin.addrs.iter().take(MAX_PINNED) {
                        out.push(*addr);
                    }
                    Ok(out)
                }
                _ => Err(ureq::Error::Other(
                    format!(
                        "sandgate: no checked address for {host}:{port} (the client asked to \
                         connect somewhere the authorizer did not check)"
                    )
                    .into(),
                )),
            }
        })
    }
}
