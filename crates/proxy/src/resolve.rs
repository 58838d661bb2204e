//! Name resolution, done by the proxy on the host's side: the command's
//! resolver is never asked, and the addresses answered are checked before
//! any is dialled.

use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::time::Duration;

/// Turns a DNS name into addresses. The proxy asks once per connection,
/// only for a target the rules admitted, checks every address answered and
/// connects only to those.
///
/// Closures `Fn(&str, u16, Duration) -> io::Result<Vec<IpAddr>>` implement
/// it (tests count queries or answer differently each time).
pub trait Resolve: Send + Sync {
    /// The addresses of `host` (a strict, lowercased DNS name: literals
    /// never reach a resolver) for a connection to `port`, within
    /// `timeout`.
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
/// timeout holds while it waits.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16, timeout: Duration) -> io::Result<Vec<IpAddr>> {
        let (tx, rx) = mpsc::sync_channel(1);
        let query = (host.to_owned(), port);
        std::thread::Builder::new()
            .name("sandgate-proxy-dns".into())
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
