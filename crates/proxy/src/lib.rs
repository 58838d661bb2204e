//! The egress proxy of a confined shell.
//!
//! A command that runs in a network namespace of its own has no route out:
//! its only interface is its own loopback. Where the policy grants network
//! access, the executor creates listeners inside that namespace and hands
//! them to a [`Proxy`], which serves them from the host's side. The proxy
//! speaks
//!
//! - HTTP `CONNECT` (`HTTPS_PROXY`),
//! - plain HTTP in absolute form (`HTTP_PROXY`),
//! - SOCKS5 with remote name resolution (`ALL_PROXY=socks5h://…`),
//!
//! on one listener (the first byte tells SOCKS5 from HTTP), and forwards
//! literal-address grants on listeners of their own ([`Proxy::forward`]) for
//! programs that ignore proxies.
//!
//! Every target goes through sandgate's network rules as the confined fetch
//! does: the host and port are judged before anything is resolved (a refused
//! target causes no DNS query), names are resolved by the proxy (never by
//! the command), every address is checked (private, link-local, metadata,
//! loopback without an explicit grant) and the connection goes to a checked
//! address, never to a second lookup. A tunnel to a web port must start
//! with a TLS ClientHello naming the `CONNECT` host (no domain fronting), or
//! with plain text only where the policy admits plain HTTP. Connections are
//! capped per proxy and idle ones closed; each is audited
//! ([`Proxy::audit`]). Bytes are relayed with `splice`, kernel to kernel.
//!
//! ```no_run
//! use std::sync::Arc;
//! use sandgate_netguard::{Mode, NetEntry, Rules};
//! use sandgate_proxy::{Proxy, ProxyConfig};
//!
//! let rules = Rules::new(Mode::Restricted, vec![NetEntry::parse("example.com").unwrap()], false);
//! let proxy = Proxy::new(ProxyConfig::new(rules));
//! let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
//! let addr = proxy.serve(listener.into()).unwrap();
//! println!("HTTPS_PROXY=http://{addr}");
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!("sandgate-proxy builds only on Linux: it relays with splice(2).");

mod conn;
mod intercept;
mod relay;
mod resolve;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sandgate_netguard::Rules;

pub use intercept::{
    roots_from_pem, system_roots, CertAuthority, Injection, Intercept, RequestMatch, RequestRecord,
    RequestRule, Secret, Verdict,
};
pub use resolve::{Resolve, SystemResolver};

/// How a [`Proxy`] judges, resolves and bounds connections.
#[derive(Clone)]
pub struct ProxyConfig {
    /// The network rules every target is judged by.
    pub rules: Rules,
    /// Turns names into addresses (the system resolver by default; tests
    /// inject their own).
    pub resolver: Arc<dyn Resolve>,
    /// The most connections served at once; more are closed as they
    /// arrive (and audited as refused).
    pub max_connections: usize,
    /// A connection on which nothing moved in either direction for this
    /// long is closed.
    pub idle_timeout: Duration,
    /// How long the client has to send its whole request, and a tunnel
    /// its whole first flight (a TLS ClientHello), however it spreads the
    /// bytes (one deadline, not a timeout per read); and how long name
    /// resolution may take.
    pub handshake_timeout: Duration,
    /// How long a connection to a target may take to open, over all the
    /// addresses its name resolved to: each that does not answer gets a
    /// share of what is left (at least 2 s while that much is left).
    pub connect_timeout: Duration,
    /// How many audit records are kept (the oldest are dropped first),
    /// of connections and, separately, of intercepted requests.
    pub audit_capacity: usize,
    /// The hosts whose TLS the proxy terminates to apply request rules and
    /// set credentials (`None`: every tunnel is opaque).
    pub intercept: Option<Arc<Intercept>>,
    /// Told of each connection's record as it is kept (`None`: kept
    /// only), on the thread that served the connection: for an audit
    /// that outlives the bounded log of [`Proxy::audit`].
    pub on_record: Option<RecordSink>,
}

/// A callback told of each connection's [`AuditRecord`].
pub type RecordSink = Arc<dyn Fn(&AuditRecord) + Send + Sync>;

impl ProxyConfig {
    /// The defaults around `rules`: the system resolver, 64 connections,
    /// 5 minutes idle, 10 s handshake and connect, 4,096 audit records.
    pub fn new(rules: Rules) -> ProxyConfig {
        ProxyConfig {
            rules,
            resolver: Arc::new(SystemResolver),
            max_connections: 64,
            idle_timeout: Duration::from_secs(300),
            handshake_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            audit_capacity: 4096,
            intercept: None,
            on_record: None,
        }
    }
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("rules", &self.rules)
            .field("max_connections", &self.max_connections)
            .field("idle_timeout", &self.idle_timeout)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("audit_capacity", &self.audit_capacity)
            .field("intercept", &self.intercept.is_some())
            .field("on_record", &self.on_record.is_some())
            .finish_non_exhaustive()
    }
}

/// How a connection reached the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// HTTP `CONNECT host:port`.
    Connect,
    /// A plain HTTP request in absolute form (`GET http://host/path`).
    Http,
    /// SOCKS5 `CONNECT`.
    Socks5,
    /// A literal-address forwarder ([`Proxy::forward`]).
    Forward,
    /// Nothing recognisable, or refused before the protocol was known (the
    /// connection cap).
    Unknown,
}

/// What happened to one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    /// How the client asked.
    pub protocol: Protocol,
    /// The host the client asked for, as it spelled it (empty when it
    /// never said).
    pub host: String,
    /// The port it asked for (0 when it never said).
    pub port: u16,
    /// The address connected to (or that was about to be, when the
    /// connection failed); `None` when nothing was dialled.
    pub address: Option<SocketAddr>,
    /// Whether the target was admitted and connected to. For an
    /// intercepted host: whether requests reached it and none was refused
    /// (a connection that ended on a refused request, or reached no
    /// upstream, is not).
    pub allowed: bool,
    /// Why: the entry that admitted it, or what refused it.
    pub reason: String,
    /// Bytes from the client to the target.
    pub bytes_up: u64,
    /// Bytes from the target to the client.
    pub bytes_down: u64,
}

impl AuditRecord {
    /// A connection refused (or ended) before the client said where to:
    /// no protocol, host or address, nothing relayed.
    fn unattributed(reason: String) -> AuditRecord {
        AuditRecord {
            reason,
            ..conn::record(Protocol::Unknown, "", 0)
        }
    }
}

/// The proxy: serves listeners on threads of its own until
/// [`Proxy::stop`] (or drop).
#[derive(Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("config", &self.inner.config)
            .field("active", &self.active())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) config: ProxyConfig,
    active: AtomicUsize,
    audit: Mutex<VecDeque<AuditRecord>>,
    requests: Mutex<VecDeque<RequestRecord>>,
    listeners: Mutex<Vec<Arc<OwnedFd>>>,
    /// The sockets of every live connection, shut down by `stop`.
    conns: Mutex<HashMap<u64, Vec<Arc<TcpStream>>>>,
    next: AtomicU64,
    stopped: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The TLS client configuration for intercepted hosts' upstreams, made
    /// on first use and kept (see [`Inner::upstream_tls`]).
    upstream_tls: Mutex<Option<Arc<rustls::ClientConfig>>>,
}

impl Inner {
    /// The one TLS client configuration of this proxy's upstream
    /// connections, so that they share its session cache.
    pub(crate) fn upstream_tls(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        let mut kept = self.upstream_tls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(config) = kept.as_ref() {
            return Ok(Arc::clone(config));
        }
        let config = self
            .config
            .intercept
            .as_ref()
            .ok_or("the proxy intercepts no host")?
            .upstream_config()?;
        *kept = Some(Arc::clone(&config));
        Ok(config)
    }

    pub(crate) fn record(&self, r: AuditRecord) {
        // Told before the record is kept, and with no lock held: the sink
        // may write a file, and must not stall other connections' records.
        if let Some(sink) = &self.config.on_record {
            sink(&r);
        }
        let mut audit = self.audit.lock().unwrap_or_else(|e| e.into_inner());
        if self.config.audit_capacity == 0 {
            return;
        }
        while audit.len() >= self.config.audit_capacity {
            audit.pop_front();
        }
        audit.push_back(r);
    }

    pub(crate) fn record_request(&self, r: RequestRecord) {
        let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        if self.config.audit_capacity == 0 {
            return;
        }
        while requests.len() >= self.config.audit_capacity {
            requests.pop_front();
        }
        requests.push_back(r);
    }

    /// Forgets a socket of connection `id` (closed by its user).
    pub(crate) fn untrack(&self, id: u64, s: &Arc<TcpStream>) {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = conns.get_mut(&id) {
            v.retain(|x| !Arc::ptr_eq(x, s));
        }
    }

    /// Registers a socket of connection `id` so that `stop` can shut it.
    pub(crate) fn track(&self, id: u64, s: &Arc<TcpStream>) {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.entry(id).or_default().push(Arc::clone(s));
        if self.stopped.load(Ordering::SeqCst) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// A connection's place under the cap, given back when its thread ends,
/// however it ends: its sockets are closed (the registry holds the last
/// `Arc` of each) and the count goes down. A panic in the handling of one
/// connection (a bug) would otherwise keep its sockets open and its place
/// taken until the proxy stops; it is recorded as such.
struct Slot<'a> {
    inner: &'a Inner,
    id: u64,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.inner.record(AuditRecord::unattributed(
                "the proxy failed while serving this connection (a bug) and closed it".into(),
            ));
        }
        self.inner
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        self.inner.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a listener serves.
#[derive(Clone, Copy, Debug)]
enum Serve {
    Proxy,
    Forward(SocketAddr),
}

impl Proxy {
    /// A proxy with `config`, serving nothing yet.
    pub fn new(config: ProxyConfig) -> Proxy {
        Proxy {
            inner: Arc::new(Inner {
                config,
                active: AtomicUsize::new(0),
                audit: Mutex::new(VecDeque::new()),
                requests: Mutex::new(VecDeque::new()),
                listeners: Mutex::new(Vec::new()),
                conns: Mutex::new(HashMap::new()),
                next: AtomicU64::new(0),
                stopped: AtomicBool::new(false),
                threads: Mutex::new(Vec::new()),
                upstream_tls: Mutex::new(None),
            }),
        }
    }

    /// Serves `listener` (a listening TCP socket, wherever it was made) as
    /// the proxy: CONNECT, absolute-form HTTP and SOCKS5. Returns its
    /// local address.
    ///
    /// # Errors
    ///
    /// When the socket's address cannot be read or the thread cannot start.
    pub fn serve(&self, listener: OwnedFd) -> io::Result<SocketAddr> {
        self.listen(listener, Serve::Proxy)
    }

    /// Serves `listener` as a forwarder to the literal address `target`:
    /// each connection is judged by the rules as a tunnel to `target`
    /// would be and relayed to it. No protocol is spoken, but the client's
    /// first flight is inspected as a tunnel's: on a web port (an entry
    /// without a port, or with 80 or 443) it must be a TLS ClientHello
    /// naming no server, or plain text where the rules admit plain HTTP;
    /// on another port the server may speak first and only a ClientHello
    /// is judged (it must name no server). Meant for
    /// a listener at `target`'s own address inside the command's network
    /// namespace, so that programs that ignore proxies reach a granted
    /// literal address as if directly.
    ///
    /// # Errors
    ///
    /// As [`Proxy::serve`].
    pub fn forward(&self, listener: OwnedFd, target: SocketAddr) -> io::Result<SocketAddr> {
        self.listen(listener, Serve::Forward(target))
    }

    fn listen(&self, listener: OwnedFd, what: Serve) -> io::Result<SocketAddr> {
        let local = rustix::net::getsockname(&listener)?;
        let local = SocketAddr::try_from(local)
            .map_err(|_| io::Error::other("the listener is not an inet socket"))?;
        let listener = Arc::new(listener);
        self.inner
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&listener));
        let inner = Arc::clone(&self.inner);
        let handle = std::thread::Builder::new()
            .name("sandgate-proxy".into())
            .spawn(move || accept_loop(&inner, &listener, what))?;
        self.inner
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(handle);
        Ok(local)
    }

    /// The connections being served now.
    pub fn active(&self) -> usize {
        self.inner.active.load(Ordering::SeqCst)
    }

    /// The audit records kept, oldest first.
    pub fn audit(&self) -> Vec<AuditRecord> {
        self.inner
            .audit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// The requests to intercepted hosts, oldest first: host, method, path,
    /// the rule that decided and the verdict (never a header's value).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Stops serving: the listeners stop accepting and are closed, every
    /// live connection is shut down. Returns once the accept threads have
    /// ended (connection threads end on their own as their sockets fail),
    /// but the one it is called from: an accept thread reports a refused
    /// connection (over the cap) to [`ProxyConfig::on_record`] itself, and
    /// a sink may stop the proxy there; that thread ends once its report
    /// returns. Stopping twice does nothing.
    pub fn stop(&self) {
        if self.inner.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        for l in self
            .inner
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            // Wakes a blocked accept (it fails with EINVAL).
            let _ = rustix::net::shutdown(&*l, rustix::net::Shutdown::Both);
        }
        for socks in self
            .inner
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            for s in socks {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
        let threads: Vec<_> = self
            .inner
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        let me = std::thread::current().id();
        for t in threads {
            // Joining itself would fail (EDEADLK), which std turns into a
            // panic: in the sink that stopped the proxy, mid-stop.
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

/// Accepts connections on `listener` until the proxy stops. An accept
/// error never ends it: the listener stays open whatever happens, so a
/// loop that ended would leave the command's clients connected (the
/// kernel completes their handshake) and waiting forever. Out of
/// descriptors or buffers, or any error it does not know (Linux hands on
/// a pending network error of the new connection, `ENOMEM`, a firewall's
/// `EPERM`, a listener shut down under it), it backs off, longer each time
/// up to 200 ms, and tries again; an unknown error is audited once per
/// run of failures.
fn accept_loop(inner: &Arc<Inner>, listener: &Arc<OwnedFd>, what: Serve) {
    const FIRST_BACKOFF: Duration = Duration::from_millis(10);
    // Short enough that `stop`, which joins this thread, is not held up.
    const MAX_BACKOFF: Duration = Duration::from_millis(200);
    let mut backoff = FIRST_BACKOFF;
    let mut failing = false;
    loop {
        let accepted =
            rustix::net::accept_with(listener.as_fd(), rustix::net::SocketFlags::CLOEXEC);
        if inner.stopped.load(Ordering::SeqCst) {
            return;
        }
        let fd = match accepted {
            Ok(fd) => fd,
            Err(rustix::io::Errno::INTR | rustix::io::Errno::CONNABORTED) => continue,
            Err(e) => {
                let known = matches!(
                    e,
                    rustix::io::Errno::MFILE | rustix::io::Errno::NFILE | rustix::io::Errno::NOBUFS
                );
                if !known && !failing {
                    inner.record(AuditRecord::unattributed(format!(
                        "accepting a connection failed ({e}); the proxy keeps trying"
                    )));
                    failing = true;
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = FIRST_BACKOFF;
        failing = false;
        let stream = TcpStream::from(fd);
        let cap = inner.config.max_connections;
        if inner.active.fetch_add(1, Ordering::SeqCst) >= cap {
            inner.active.fetch_sub(1, Ordering::SeqCst);
            drop(stream);
            inner.record(AuditRecord::unattributed(format!(
                "the proxy's cap of {cap} connections at once was reached"
            )));
            continue;
        }
        let id = inner.next.fetch_add(1, Ordering::SeqCst);
        let conn_inner = Arc::clone(inner);
        let spawned = std::thread::Builder::new()
            .name("sandgate-proxy-conn".into())
            .spawn(move || {
                let inner = conn_inner;
                let _slot = Slot { inner: &inner, id };
                let client = Arc::new(stream);
                inner.track(id, &client);
                let record = match what {
                    Serve::Proxy => conn::serve(&inner, id, &client),
                    Serve::Forward(target) => conn::forward(&inner, id, &client, target),
                };
                inner.record(record);
            });
        if spawned.is_err() {
            inner.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_that_panics_gives_its_place_and_sockets_back() {
        let rules = Rules::new(sandgate_netguard::Mode::Restricted, Vec::new(), false);
        let proxy = Proxy::new(ProxyConfig::new(rules));
        let inner = &proxy.inner;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        inner.active.fetch_add(1, Ordering::SeqCst);
        let conn = Arc::new(server);
        let caught = std::thread::scope(|s| {
            s.spawn(|| {
                let _slot = Slot { inner, id: 7 };
                inner.track(7, &conn);
                panic!("a bug in one connection's handling");
            })
            .join()
        });
        assert!(caught.is_err());
        assert_eq!(proxy.active(), 0);
        assert!(inner.conns.lock().unwrap().is_empty());
        // The registry's reference is gone: ours is the last, and dropping
        // it closes the socket, which the peer sees as the end.
        assert_eq!(Arc::strong_count(&conn), 1);
        drop(conn);
        let mut byte = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut &client, &mut byte).unwrap(), 0);
        let audit = proxy.audit();
        assert!(
            audit
                .iter()
                .any(|r| r.reason.contains("failed while serving")),
            "{audit:?}"
        );
    }
}
