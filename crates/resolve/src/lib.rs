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
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
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

/// The most queries of the [`SystemResolver`] that outlived their timeout
/// and still run, process wide. Each holds a thread (and what the name
/// service holds for it) until `getaddrinfo` returns, which a name service
/// that never answers (a stalled NSS source, a hung file in its path)
/// makes never. A query asked while this many linger is refused at once.
pub const MAX_LINGERING_QUERIES: usize = 64;

/// The [`SystemResolver`]'s queries that outlived their timeout and still
/// run.
static LINGERING: AtomicUsize = AtomicUsize::new(0);

/// Where one query stands: running with its asker waiting, abandoned by
/// its asker (counted in [`LINGERING`] until it ends), or done.
const RUNNING: u8 = 0;
const ABANDONED: u8 = 1;
const DONE: u8 = 2;

/// The system resolver (`getaddrinfo`), asked on a helper thread so that
/// the timeout holds while it waits. A query that outlives its timeout
/// finishes on that thread and its answer is dropped; at most
/// [`MAX_LINGERING_QUERIES`] such threads run at once in the process, and
/// while that many do a query is refused at once (an error naming the
/// bound), so a name service that stalls cannot make the process run out
/// of threads however often a name is asked for.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16, timeout: Duration) -> io::Result<Vec<IpAddr>> {
        let lingering = LINGERING.load(Ordering::SeqCst);
        if lingering >= MAX_LINGERING_QUERIES {
            return Err(io::Error::other(format!(
                "resolving {host} refused: {lingering} name queries outlived their timeout and \
                 are still running (at most {MAX_LINGERING_QUERIES}); the name service is not \
                 answering"
            )));
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let query = (host.to_owned(), port);
        let state = Arc::new(AtomicU8::new(RUNNING));
        let theirs = Arc::clone(&state);
        std::thread::Builder::new()
            .name("sandgate-dns".into())
            .spawn(move || {
                let answer = query
                    .to_socket_addrs()
                    .map(|addrs| addrs.map(|a| a.ip()).collect::<Vec<_>>());
                let _ = tx.send(answer);
                if theirs.swap(DONE, Ordering::SeqCst) == ABANDONED {
                    LINGERING.fetch_sub(1, Ordering::SeqCst);
                }
            })?;
        match rx.recv_timeout(timeout) {
            Ok(answer) => answer,
            Err(_) => {
                if state
                    .compare_exchange(RUNNING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    LINGERING.fetch_add(1, Ordering::SeqCst);
                } else if let Ok(answer) = rx.try_recv() {
                    // It answered between the timeout and now.
                    return answer;
                }
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("resolving {host} timed out after {timeout:?}"),
                ))
            }
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
