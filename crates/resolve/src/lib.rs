//! Name resolution for sandgate's two dialers, the confined fetch and the
//! shell's egress proxy.
//!
//! Both resolve names on the host's side (never through the confined
//! command's resolver, never inside the HTTP client), check every address
//! answered against the network rules, and connect only to a checked one.
//! They share this one trait, so a host that injects a resolver (a test
//! answering differently on each call, a resolver that counts queries, a
//! company resolver) implements it once and hands the same value to both.
//!
//! The crate does no checking itself: what an answer may be used for is
//! `sandgate-netguard`'s judgement, applied by the dialer.

use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::time::Duration;

/// Turns a DNS name into addresses. A dialer asks once per connection (the
/// fetch once per hop), only for a destination the rules admitted, checks
/// every address answered and connects only to those.
///
/// Closures `Fn(&str, u16, Duration) -> io::Result<Vec<IpAddr>>` implement
/// it.
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

/// The system resolver (`getaddrinfo`), asked on a helper thread so that
/// the timeout holds while it waits. A query that outlives its timeout
/// finishes on that thread and its answer is dropped.
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
                format!("resolving {host} timed out after {timeout:?}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_resolver_answers_localhost_with_a_loopback_address() {
        let addrs = SystemResolver
            .resolve("localhost", 80, Duration::from_secs(5))
            .expect("localhost resolves");
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(IpAddr::is_loopback), "{addrs:?}");
    }

    #[test]
    fn a_closure_is_a_resolver() {
        let fixed = |host: &str, _port: u16, _t: Duration| -> io::Result<Vec<IpAddr>> {
            assert_eq!(host, "example.test");
            Ok(vec![IpAddr::from([192, 0, 2, 1])])
        };
        let r: &dyn Resolve = &fixed;
        assert_eq!(
            r.resolve("example.test", 443, Duration::from_secs(1))
                .unwrap(),
            vec![IpAddr::from([192, 0, 2, 1])]
        );
    }

    #[test]
    fn an_unresolvable_name_is_an_error_not_an_empty_answer() {
        // `.invalid` is reserved never to resolve.
        let answer = SystemResolver.resolve("nothing.invalid", 80, Duration::from_secs(10));
        assert!(answer.is_err(), "{answer:?}");
    }
}
