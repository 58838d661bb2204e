//! Name resolution, done by sandgate (never by the HTTP client), and the
//! pin that hands the client only the addresses the authorizer checked.

use std::cell::RefCell;
use std::fmt;
use std::net::SocketAddr;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// The trait and the system resolver are shared with the shell's egress
/// proxy, so a host injects one resolver for both.
pub use sandgate_resolve::{Resolve, SystemResolver};

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
