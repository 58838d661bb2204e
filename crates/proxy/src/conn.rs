//! One client connection: the protocol (SOCKS5 or HTTP, told apart by the
//! first byte), the authorization of its target, the first flight of a
//! tunnel, and the relay.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandgate_netguard::{Hop, Host};

use crate::intercept::{self, Decision, Intercept, Prefixed};
use crate::{relay, AuditRecord, Inner, Protocol};

/// The most bytes of a request head (request line and headers) read.
const MAX_HEAD: usize = 16 * 1024;
/// The most bytes of a TLS first flight buffered while looking for the SNI.
const MAX_HELLO: usize = 64 * 1024;

/// The client socket with what was read from it and not yet used.
struct Client<'a> {
    s: &'a TcpStream,
    buf: Vec<u8>,
    pos: usize,
    /// When the bytes being waited for must have come (the request, or a
    /// tunnel's first flight): one deadline for all the reads, not a
    /// timeout for each, or a client sending a byte just inside the
    /// timeout would hold its place of the connection cap indefinitely.
    /// `None`: each read waits as long as the socket's own timeout says.
    deadline: Option<Instant>,
}

/// Gives the next read on `s` what is left until `deadline` as its
/// timeout (one deadline for a run of reads, not a timeout for each);
/// `TimedOut` once it has passed.
pub(crate) fn read_by(s: &TcpStream, deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the handshake timeout has passed",
        ));
    }
    s.set_read_timeout(Some(left))
}

/// One read of `s` into `buf`, waiting as the socket's read timeout says
/// however often the thread is interrupted. A signal of the host to this
/// thread (EINTR, which a socket with a timeout answers even under
/// `SA_RESTART`) is retried with what is left of the timeout, so that
/// neither does a signal end the read nor does a storm of them, each
/// restarting the timeout, keep the read waiting for good. Once the
/// timeout has passed it answers `EAGAIN`, as the socket does.
pub(crate) fn read_once(s: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    patiently(s, false, |s| s.read(buf))
}

/// One write of `buf` to `s`, as [`read_once`] is one read (the write
/// timeout is the one kept).
pub(crate) fn write_once(s: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    patiently(s, true, |s| s.write(buf))
}

/// Writes all of `bytes` to `s` with [`write_once`]: the write timeout
/// holds for each write however often the thread is interrupted.
pub(crate) fn write_all(s: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match write_once(s, bytes)? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => bytes = &bytes[n..],
        }
    }
    Ok(())
}

fn patiently<T>(
    s: &TcpStream,
    write: bool,
    mut op: impl FnMut(&mut &TcpStream) -> io::Result<T>,
) -> io::Result<T> {
    let start = Instant::now();
    // The socket's timeout, looked up at the first interruption and put
    // back once done.
    let mut timeout: Option<Option<Duration>> = None;
    let set = |t: Option<Duration>| {
        if write {
            s.set_write_timeout(t)
        } else {
            s.set_read_timeout(t)
        }
    };
    let out = loop {
        match op(&mut &*s) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => break other,
        }
        let whole = match timeout {
            Some(t) => t,
            None => {
                let t = if write {
                    s.write_timeout()
                } else {
                    s.read_timeout()
                };
                match t {
                    Ok(t) => *timeout.insert(t),
                    Err(e) => break Err(e),
                }
            }
        };
        if let Some(whole) = whole {
            let left = whole.saturating_sub(start.elapsed());
            if left.is_zero() {
                break Err(io::Error::from_raw_os_error(
                    rustix::io::Errno::AGAIN.raw_os_error(),
                ));
            }
            if let Err(e) = set(Some(left)) {
                break Err(e);
            }
        }
    };
    if let Some(Some(whole)) = timeout {
        let _ = set(Some(whole));
    }
    out
}

impl Client<'_> {
    fn available(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Reads once more; `false` at EOF or on an error (the timeout and
    /// the deadline among them).
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        loop {
            if self.deadline.is_some_and(|d| read_by(self.s, d).is_err()) {
                return false;
            }
            match read_once(self.s, &mut chunk) {
                Ok(0) => return false,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// Ensures `n` unread bytes.
    fn need(&mut self, n: usize) -> bool {
        while self.available().len() < n {
            if !self.fill() {
                return false;
            }
        }
        true
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let out = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        out
    }

    /// The unread bytes, consumed.
    fn rest(&mut self) -> Vec<u8> {
        let out = self.buf[self.pos..].to_vec();
        self.pos = self.buf.len();
        out
    }

    fn send(&self, bytes: &[u8]) {
        let _ = write_all(self.s, bytes);
    }
}

/// A target that passed the rules: the addresses checked, in the order to
/// try, and whether its tunnel is opaque.
struct Cleared {
    host: Host,
    port: u16,
    addrs: Vec<IpAddr>,
    /// The admitting entry names a port other than 80 and 443: a protocol
    /// of the operator's choosing, relayed without looking at it.
    opaque: bool,
    reason: String,
}

pub(crate) fn record(protocol: Protocol, host: &str, port: u16) -> AuditRecord {
    AuditRecord {
        protocol,
        host: host.to_owned(),
        port,
        address: None,
        allowed: false,
        reason: String::new(),
        bytes_up: 0,
        bytes_down: 0,
    }
}

/// Judges `host:port` before resolving it, then resolves a name and checks
/// every address. A refusal is the reason, in words.
fn clear(inner: &Inner, scheme: Option<&str>, host: &str, port: u16) -> Result<Cleared, String> {
    let rules = &inner.config.rules;
    let admitted = rules
        .admit(Hop::First, scheme, host, Some(port))
        .map_err(|d| d.reason)?;
    let addrs = match admitted.host() {
        Host::Ip(ip) => vec![*ip],
        Host::Name(name) => inner
            .config
            .resolver
            .resolve(name, port, inner.config.handshake_timeout)
            .map_err(|e| format!("cannot resolve {name}: {e}"))?,
        other => return Err(format!("{other} is of an unknown kind of host")),
    };
    if addrs.is_empty() {
        return Err(format!("{} resolved to no address", admitted.host()));
    }
    // Every address is checked before any is dialled: one refused address
    // is a rebinding attempt, not a fallback.
    for ip in &addrs {
        let d = admitted.check(*ip);
        if !d.allowed {
            return Err(d.reason);
        }
    }
    let opaque = admitted.entry().port().is_some_and(|p| p != 80 && p != 443);
    Ok(Cleared {
        host: admitted.host().clone(),
        port: admitted.port(),
        addrs,
        opaque,
        reason: admitted.decision().reason,
    })
}

/// The least time one address of several is given to answer while that
/// much of the connect timeout is left (as Go's dialer does).
const MIN_ATTEMPT: Duration = Duration::from_secs(2);

/// Connects to the first checked address that answers, within the connect
/// timeout over all of them: each address gets its share of what is left
/// (at least [`MIN_ATTEMPT`] while that much is left), so a name that
/// resolves to many dead addresses cannot hold the connection, and its
/// place under the cap, for the timeout once per address. Writes to it
/// time out after the idle timeout: a target that never reads (while a
/// request body or a first flight is written to it) would otherwise block
/// the connection's thread, and hold its place under the cap, for good.
fn dial(inner: &Inner, c: &Cleared) -> Result<TcpStream, (SocketAddr, String)> {
    let timeout = inner.config.connect_timeout;
    let deadline = Instant::now() + timeout;
    let mut last = None;
    for (tried, ip) in c.addrs.iter().enumerate() {
        let addr = SocketAddr::new(*ip, c.port);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let (addr, why) = last.unwrap_or((addr, String::new()));
            last = Some((
                addr,
                format!(
                    "{why} (the connect timeout of {timeout:?} passed after {tried} of {} \
                     addresses)",
                    c.addrs.len()
                ),
            ));
            break;
        }
        let remaining = u32::try_from(c.addrs.len() - tried).unwrap_or(u32::MAX);
        let attempt = (left / remaining).max(left.min(MIN_ATTEMPT));
        match TcpStream::connect_timeout(&addr, attempt) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                let _ = s.set_write_timeout(Some(inner.config.idle_timeout));
                return Ok(s);
            }
            Err(e) => last = Some((addr, format!("cannot connect to {addr}: {e}"))),
        }
    }
    Err(last.unwrap_or_else(|| {
        (
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            "no address".to_owned(),
        )
    }))
}

/// Serves one connection on the proxy listener.
pub(crate) fn serve(inner: &Inner, id: u64, client: &Arc<TcpStream>) -> AuditRecord {
    let _ = client.set_read_timeout(Some(inner.config.handshake_timeout));
    let _ = client.set_write_timeout(Some(inner.config.handshake_timeout));
    let _ = client.set_nodelay(true);
    let mut c = Client {
        s: client,
        buf: Vec::new(),
        pos: 0,
        deadline: Some(Instant::now() + inner.config.handshake_timeout),
    };
    if !c.need(1) {
        return AuditRecord::unattributed("the client sent nothing".into());
    }
    if c.available()[0] == 5 {
        socks5(inner, id, client, c)
    } else {
        http(inner, id, client, c)
    }
}

/// A literal-address forwarder's connection: a tunnel to `target` as a
/// `CONNECT` to the same literal would be, with no protocol to answer in.
/// Its first flight is judged the same way (on a web port, plain text only
/// with `net.allow_http` and a ClientHello naming no server; on another
/// port, a ClientHello naming no server), so that dialling the forwarder
/// instead of the proxy reaches nothing the proxy would refuse.
pub(crate) fn forward(
    inner: &Inner,
    id: u64,
    client: &Arc<TcpStream>,
    target: SocketAddr,
) -> AuditRecord {
    let _ = client.set_read_timeout(Some(inner.config.handshake_timeout));
    let _ = client.set_write_timeout(Some(inner.config.handshake_timeout));
    let _ = client.set_nodelay(true);
    let c = Client {
        s: client,
        buf: Vec::new(),
        pos: 0,
        deadline: None,
    };
    let r = record(Protocol::Forward, &target.ip().to_string(), target.port());
    tunnel(inner, id, client, c, r, &ForwardReply)
}

/// How a tunnel answers the client, by protocol.
trait Reply {
    fn ok(&self, c: &Client<'_>);
    fn refused(&self, c: &Client<'_>, why: &str);
    fn failed(&self, c: &Client<'_>, why: &str);
}

struct ConnectReply;

impl Reply for ConnectReply {
    fn ok(&self, c: &Client<'_>) {
        c.send(b"HTTP/1.1 200 Connection established\r\n\r\n");
    }
    fn refused(&self, c: &Client<'_>, why: &str) {
        c.send(&status(403, "Forbidden", why));
    }
    fn failed(&self, c: &Client<'_>, why: &str) {
        c.send(&status(502, "Bad Gateway", why));
    }
}

struct SocksReply;

impl SocksReply {
    fn code(c: &Client<'_>, code: u8) {
        c.send(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
    }
}

impl Reply for SocksReply {
    fn ok(&self, c: &Client<'_>) {
        Self::code(c, 0);
    }
    fn refused(&self, c: &Client<'_>, _why: &str) {
        // 2: connection not allowed by ruleset.
        Self::code(c, 2);
    }
    fn failed(&self, c: &Client<'_>, _why: &str) {
        // 5: connection refused.
        Self::code(c, 5);
    }
}

/// A forwarder's client asked nothing: it is told nothing either, and a
/// refused or failed connection is simply closed.
struct ForwardReply;

impl Reply for ForwardReply {
    fn ok(&self, _c: &Client<'_>) {}
    fn refused(&self, _c: &Client<'_>, _why: &str) {}
    fn failed(&self, _c: &Client<'_>, _why: &str) {}
}

fn status(code: u16, text: &str, why: &str) -> Vec<u8> {
    let body = format!("sandgate: {why}\n");
    format!(
        "HTTP/1.1 {code} {text}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A tunnel (CONNECT, SOCKS5 or a forwarder's connection) to `host:port`:
/// authorized, its first flight inspected unless opaque, then relayed.
fn tunnel(
    inner: &Inner,
    id: u64,
    client: &Arc<TcpStream>,
    mut c: Client<'_>,
    mut r: AuditRecord,
    reply: &dyn Reply,
) -> AuditRecord {
    let cleared = match clear(inner, None, &r.host, r.port) {
        Ok(cl) => cl,
        Err(why) => {
            reply.refused(&c, &why);
            r.reason = why;
            return r;
        }
    };
    // The request is in: the tunnel's first flight gets a handshake
    // timeout of its own, counted from now (resolution took its share).
    c.deadline = Some(Instant::now() + inner.config.handshake_timeout);
    if let (Some(ic), Host::Name(name)) = (&inner.config.intercept, &cleared.host) {
        if ic.intercepts(name, cleared.port) {
            reply.ok(&c);
            let name = name.clone();
            return intercepted(inner, id, client, c, r, &cleared, ic, &name);
        }
    }
    if cleared.opaque {
        // The operator granted this port for a protocol of its own (ssh,
        // a database): the server may speak first, so it is dialled now and
        // its bytes flow at once; the client's first bytes are still held
        // back until judged (a TLS ClientHello must name the host).
        let up = match dial(inner, &cleared) {
            Ok(up) => up,
            Err((addr, why)) => {
                reply.failed(&c, &why);
                r.address = Some(addr);
                r.reason = why;
                return r;
            }
        };
        reply.ok(&c);
        r.address = up.peer_addr().ok();
        r.allowed = true;
        r.reason = cleared.reason.clone();
        let up = Arc::new(up);
        inner.track(id, &up);
        let pending = c.rest();
        let (cl, host) = (Arc::clone(client), cleared.host.clone());
        let (handshake, idle) = (inner.config.handshake_timeout, inner.config.idle_timeout);
        let prelude: relay::Prelude =
            Box::new(move |activity| opaque_first(&cl, pending, &host, handshake, idle, activity));
        let (u, d, refused) = relay::both_after(client, &up, idle, prelude);
        (r.bytes_up, r.bytes_down) = (u, d);
        if let Some(why) = refused {
            r.allowed = false;
            r.reason = why;
        }
        return r;
    }
    let (up, first) = {
        // A web port: the client speaks first. Look at its first flight
        // before anything is dialled.
        reply.ok(&c);
        if let Err(why) = first_flight(inner, &mut c, &cleared) {
            r.reason = why;
            return r;
        }
        match dial(inner, &cleared) {
            Ok(up) => (up, c.rest()),
            Err((addr, why)) => {
                r.address = Some(addr);
                r.reason = why;
                return r;
            }
        }
    };
    r.address = up.peer_addr().ok();
    r.allowed = true;
    r.reason = cleared.reason;
    let up = Arc::new(up);
    inner.track(id, &up);
    if !first.is_empty() && write_all(&up, &first).is_err() {
        return r;
    }
    let (u, d) = relay::both(client, &up, inner.config.idle_timeout);
    r.bytes_up = first.len() as u64 + u;
    r.bytes_down = d;
    r
}

/// Reads the tunnel's first flight: a TLS ClientHello whose server name is
/// the tunnel's host, or plain text where the rules admit plain HTTP.
fn first_flight(inner: &Inner, c: &mut Client<'_>, cleared: &Cleared) -> Result<(), String> {
    if !c.need(1) {
        return Err("the tunnel carried nothing before the timeout".into());
    }
    no_other_tls_record_first(c)?;
    if c.available()[0] != 0x16 {
        if inner.config.rules.allow_http() {
            return Ok(());
        }
        return Err(
            "the tunnel does not start with TLS and net.allow_http is false (plain text is \
             not admitted)"
                .into(),
        );
    }
    check_sni(&cleared.host, hello_sni(c)?.as_deref())
}

/// The first bytes of an opaque tunnel: nothing to judge unless they start
/// a TLS handshake, whose ClientHello must then name the tunnel's host.
/// Waits for them as long as the connection lives (the server may speak
/// first, and go on speaking): they are judged whenever they come. Once
/// nothing has moved either way for `idle`, the client is shut and nothing
/// of it is relayed (it used to be waited for one `idle`, after which its
/// bytes were relayed unjudged even while the server kept the connection
/// alive).
fn opaque_first(
    client: &TcpStream,
    pending: Vec<u8>,
    host: &Host,
    handshake: Duration,
    idle: Duration,
    activity: &relay::Activity,
) -> Result<Vec<u8>, String> {
    let mut c = Client {
        s: client,
        buf: pending,
        pos: 0,
        deadline: None,
    };
    if c.buf.is_empty() {
        let _ = client.set_read_timeout(Some(relay::tick(idle)));
        let mut chunk = [0u8; 4096];
        loop {
            match read_once(client, &mut chunk) {
                Ok(0) => return Ok(Vec::new()),
                Ok(n) => {
                    c.buf.extend_from_slice(&chunk[..n]);
                    break;
                }
                Err(e) if nothing_yet(&e) => {
                    if activity.idle_for() >= idle {
                        // Idle: the connection ends, and whatever the
                        // client sends from now on goes nowhere.
                        let _ = client.shutdown(Shutdown::Both);
                        return Ok(Vec::new());
                    }
                }
                Err(_) => {
                    let _ = client.shutdown(Shutdown::Both);
                    return Ok(Vec::new());
                }
            }
        }
    }
    c.deadline = Some(Instant::now() + handshake);
    no_other_tls_record_first(&mut c)?;
    if c.buf[0] == 0x16 {
        check_sni(host, hello_sni(&mut c)?.as_deref())?;
    }
    Ok(c.buf)
}

/// TLS record types other than a handshake's: change_cipher_spec, alert,
/// application_data, heartbeat.
const OTHER_TLS_RECORDS: [u8; 4] = [0x14, 0x15, 0x17, 0x18];

/// Refuses a first flight that begins with a TLS record other than a
/// handshake (its type, then a major version of 3). The first byte is what
/// tells a ClientHello, which is judged, from anything else, which is not:
/// a server that skips such a record before the ClientHello (Go's TLS
/// server drops a warning alert there) would read a ClientHello behind it
/// that names another server, never judged.
fn no_other_tls_record_first(c: &mut Client<'_>) -> Result<(), String> {
    let first = c.available()[0];
    if !OTHER_TLS_RECORDS.contains(&first) {
        return Ok(());
    }
    if !c.need(2) {
        return Err(format!(
            "the tunnel's first flight stops after a byte that may begin a TLS record (type \
             {first})"
        ));
    }
    if c.available()[1] == 3 {
        return Err(format!(
            "the tunnel starts with a TLS record of type {first}, not a ClientHello (a server \
             may skip it and read a ClientHello behind it that nothing judged)"
        ));
    }
    Ok(())
}

/// Reads a TLS ClientHello from `c` (from its unread bytes on, reading
/// more as needed, consuming nothing) and answers its server name.
fn hello_sni(c: &mut Client<'_>) -> Result<Option<String>, String> {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut fed = c.pos;
    loop {
        let mut chunk = &c.buf[fed..];
        let before = chunk.len();
        if before > 0 {
            match acceptor.read_tls(&mut chunk) {
                Ok(n) => fed += n,
                Err(e) => return Err(format!("the TLS ClientHello is malformed: {e}")),
            }
        }
        match acceptor.accept() {
            Ok(Some(accepted)) => {
                return Ok(accepted.client_hello().server_name().map(str::to_owned));
            }
            Ok(None) => {}
            Err((e, _)) => return Err(format!("the TLS ClientHello is malformed: {e}")),
        }
        if fed < c.buf.len() {
            continue;
        }
        if c.buf.len() - c.pos > MAX_HELLO || !c.fill() {
            return Err("the TLS ClientHello is incomplete or too large".into());
        }
    }
}

/// The ClientHello's server name must be the tunnel's host (domain
/// fronting otherwise). A literal host takes no server name.
fn check_sni(host: &Host, sni: Option<&str>) -> Result<(), String> {
    match (host, sni) {
        (Host::Name(name), Some(sni)) if sni.eq_ignore_ascii_case(name) => Ok(()),
        (Host::Name(name), Some(sni)) => Err(format!(
            "the TLS ClientHello names {} but the tunnel is to {name} (domain fronting)",
            sni.escape_debug()
        )),
        (Host::Name(name), None) => Err(format!(
            "the TLS ClientHello names no server; the tunnel is to {name}"
        )),
        (Host::Ip(_), None) => Ok(()),
        (Host::Ip(ip), Some(sni)) => Err(format!(
            "the TLS ClientHello names {} but the tunnel is to the address {ip}",
            sni.escape_debug()
        )),
        (_, _) => Err("the tunnel's host is of an unknown kind".into()),
    }
}

/// SOCKS5 (RFC 1928): no authentication, `CONNECT` only, names resolved
/// by the proxy.
fn socks5(inner: &Inner, id: u64, client: &Arc<TcpStream>, mut c: Client<'_>) -> AuditRecord {
    let mut r = record(Protocol::Socks5, "", 0);
    if !c.need(2) {
        r.reason = "an incomplete SOCKS5 greeting".into();
        return r;
    }
    let n = c.available()[1] as usize;
    if !c.need(2 + n) {
        r.reason = "an incomplete SOCKS5 greeting".into();
        return r;
    }
    let greeting = c.take(2 + n);
    if !greeting[2..].contains(&0) {
        c.send(&[5, 0xff]);
        r.reason = "the SOCKS5 client offers no method without authentication".into();
        return r;
    }
    c.send(&[5, 0]);
    if !c.need(4) {
        r.reason = "an incomplete SOCKS5 request".into();
        return r;
    }
    let head = c.take(4);
    let (ver, cmd, atyp) = (head[0], head[1], head[3]);
    let host = match atyp {
        1 => {
            if !c.need(4) {
                r.reason = "an incomplete SOCKS5 request".into();
                return r;
            }
            let b = c.take(4);
            Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string()
        }
        3 => {
            if !c.need(1) {
                r.reason = "an incomplete SOCKS5 request".into();
                return r;
            }
            let len = c.take(1)[0] as usize;
            if !c.need(len) {
                r.reason = "an incomplete SOCKS5 request".into();
                return r;
            }
            match String::from_utf8(c.take(len)) {
                Ok(name) => name,
                Err(_) => {
                    SocksReply.refused(&c, "");
                    r.reason = "the SOCKS5 host name is not UTF-8".into();
                    return r;
                }
            }
        }
        4 => {
            if !c.need(16) {
                r.reason = "an incomplete SOCKS5 request".into();
                return r;
            }
            let b: [u8; 16] = c.take(16).try_into().unwrap_or([0; 16]);
            Ipv6Addr::from(b).to_string()
        }
        _ => {
            SocksReply::code(&c, 8);
            r.reason = format!("SOCKS5 address type {atyp} is not supported");
            return r;
        }
    };
    if !c.need(2) {
        r.reason = "an incomplete SOCKS5 request".into();
        return r;
    }
    let p = c.take(2);
    r.host = host;
    r.port = u16::from_be_bytes([p[0], p[1]]);
    if ver != 5 {
        // 1: general failure (RFC 1928 has no code for a bad version).
        SocksReply::code(&c, 1);
        r.reason = format!("a SOCKS5 request of version {ver} (not 5)");
        return r;
    }
    if cmd != 1 {
        SocksReply::code(&c, 7);
        r.reason = format!("SOCKS5 command {cmd} is not supported (CONNECT only)");
        return r;
    }
    tunnel(inner, id, client, c, r, &SocksReply)
}

/// A parsed request head.
struct Head {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether a header of `name` was sent in any spelling a CGI-style
    /// server reads as it: case aside, `_` and `-` are one to servers that
    /// turn names into `HTTP_…` keys (Puma before CVE-2024-45614's fix,
    /// WSGI and CGI servers that keep underscored names).
    fn has_cgi_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| crate::intercept::cgi_same(n, name))
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.header(name)
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }
}

/// Reads and parses a request head; consumes it from `c`.
fn read_head(c: &mut Client<'_>) -> Result<Head, String> {
    let end = loop {
        if let Some(i) = find(c.available(), b"\r\n\r\n") {
            break i;
        }
        if c.available().len() > MAX_HEAD {
            return Err(format!("the request head is longer than {MAX_HEAD} bytes"));
        }
        if !c.fill() {
            return Err("an incomplete request head".into());
        }
    };
    let raw = c.take(end + 4);
    parse_head(&raw[..end])
}

/// Reads a request head from `r` into `buf` (which keeps what follows
/// it); `Ok(None)` when the stream ends, or a read fails (the idle timeout
/// among them), before any byte of a head: the connection then ends
/// without an answer, since no request asked for one (a client sending
/// its next request just then would take it for that request's).
fn read_head_from<R: Read>(
    r: &mut R,
    buf: &mut Vec<u8>,
    idle: Duration,
) -> Result<Option<Head>, String> {
    let end = match read_until_head_end(r, buf, "the client", idle) {
        Ok(end) => end,
        Err(_) if buf.is_empty() => None,
        Err(why) => return Err(why),
    };
    let Some(end) = end else { return Ok(None) };
    let head = parse_head(&buf[..end]);
    buf.drain(..end + 4);
    head.map(Some)
}

/// Reads from `r` (`who`, whose reads time out after `idle`) into `buf`
/// until it holds `\r\n\r\n`; answers where it starts, or `None` at end
/// of stream with `buf` empty.
fn read_until_head_end<R: Read>(
    r: &mut R,
    buf: &mut Vec<u8>,
    who: &str,
    idle: Duration,
) -> Result<Option<usize>, String> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            return Ok(Some(i));
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("the head is longer than {MAX_HEAD} bytes"));
        }
        match r.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => return Err("an incomplete head".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if buf.is_empty() && e.kind() == io::ErrorKind::UnexpectedEof => {
                return Ok(None)
            }
            Err(e) => return Err(read_failure(who, "a head", &e, idle)),
        }
    }
}

/// Parses a request head (without its closing blank line).
fn parse_head(raw: &[u8]) -> Result<Head, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "the request head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("a malformed request line".into());
    };
    // The version exactly: the proxy writes its own, so anything after
    // `HTTP/1.1` (a bare LF and a header, to a server that takes a lone LF
    // as a line end) would be read by a lenient reader of the client's
    // bytes and never judged.
    if !(version == "HTTP/1.1" || version == "HTTP/1.0")
        || method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_alphabetic())
    {
        return Err("a malformed request line".into());
    }
    // The target is forwarded as it came: a bare LF in it (or another
    // control byte) would end the request line early for a server that
    // takes a lone LF as a line end, and what follows would be read as
    // headers or a request the proxy never judged.
    if target.bytes().any(is_ctl) {
        return Err("the request target holds a control character".into());
    }
    let headers = parse_headers(lines)?;
    Ok(Head {
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
    })
}

fn parse_headers<'a>(
    lines: impl Iterator<Item = &'a str>,
) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    for l in lines {
        if l.starts_with([' ', '\t']) {
            return Err("folded header lines are refused".into());
        }
        let Some((n, v)) = l.split_once(':') else {
            return Err("a malformed header line".into());
        };
        if n.is_empty() || n.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err("a malformed header name".into());
        }
        // Values are forwarded as they came. A bare LF is a line end to
        // many servers (RFC 9112 lets a recipient take it as one), so
        // inside a value it would start a header, or after an empty line a
        // whole request, that the proxy never saw, a lone CR likewise for
        // some; RFC 9110 makes CR, LF and NUL invalid in a value. Every
        // control byte but the tab is refused.
        if v.bytes().any(|b| is_ctl(b) && b != b'\t') {
            return Err("a header value holds a line break or another control character".into());
        }
        headers.push((n.to_owned(), v.trim().to_owned()));
    }
    Ok(headers)
}

/// A `Content-Length` value: digits only (RFC 9112), at most 19 of them
/// (so it fits in 64 bits). `str::parse` would also take a leading `+`,
/// which the value is forwarded with: a server that refuses it, or reads
/// it as no length, would take the body for the next request.
fn content_length(v: &str) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// Why a read of `what` from `who` failed, in words: a timeout (the
/// socket's, the idle timeout once a request is being served) says that
/// nothing came, not "Resource temporarily unavailable".
fn read_failure(who: &str, what: &str, e: &io::Error, idle: Duration) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("{who} sent nothing for {idle:?} (the idle timeout)")
        }
        _ => format!("cannot read {what} from {who}: {e}"),
    }
}

/// An ASCII control byte (DEL included).
fn is_ctl(b: u8) -> bool {
    b < b' ' || b == 0x7f
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `host:port` or `[v6]:port`, the port required when `default` is None.
/// The refusal of an authority that carries a user or password
/// (`user:password@host`): the host and port after it (empty and 0 when
/// they do not parse) and the reason, neither of which shows what came
/// before the `@`, since the record goes to the audit and a refusal's text
/// to logs. `None` when `auth` holds no `@`.
fn userinfo_refused(auth: &str, default: Option<u16>) -> Option<(String, u16, String)> {
    let (_, after) = auth.rsplit_once('@')?;
    let (host, port) = split_authority(after, default).unwrap_or_default();
    let why = format!(
        "`…@{}` carries a user or password, which is refused",
        after.escape_debug()
    );
    Some((host, port, why))
}

fn split_authority(auth: &str, default: Option<u16>) -> Option<(String, u16)> {
    if auth.is_empty() || auth.contains('@') {
        return None;
    }
    let (host, port) = if let Some(rest) = auth.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return None,
        };
        (format!("[{h}]"), port)
    } else {
        match auth.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (auth.to_owned(), None),
        }
    };
    let port = match port {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.len() <= 5 => {
            p.parse().ok()?
        }
        Some(_) => return None,
        None => default?,
    };
    if host.is_empty() {
        return None;
    }
    Some((host, port))
}

/// Plain HTTP: `CONNECT` or an absolute-form request.
fn http(inner: &Inner, id: u64, client: &Arc<TcpStream>, mut c: Client<'_>) -> AuditRecord {
    let head = match read_head(&mut c) {
        Ok(h) => h,
        Err(why) => {
            c.send(&status(400, "Bad Request", &why));
            return AuditRecord::unattributed(why);
        }
    };
    if head.method.eq_ignore_ascii_case("CONNECT") {
        let mut r = record(Protocol::Connect, &head.target, 0);
        let Some((host, port)) = split_authority(&head.target, None) else {
            let why = match userinfo_refused(&head.target, None) {
                Some((host, port, why)) => {
                    (r.host, r.port) = (host, port);
                    why
                }
                None => format!("`{}` is not a host:port", head.target.escape_debug()),
            };
            c.send(&status(400, "Bad Request", &why));
            r.reason = why;
            return r;
        };
        r.host = host;
        r.port = port;
        return tunnel(inner, id, client, c, r, &ConnectReply);
    }
    plain(inner, id, client, c, head)
}

/// One absolute-form request, forwarded with `Connection: close`; the
/// client connection ends with the response, so that every request is
/// authorized on a connection of its own.
fn plain(
    inner: &Inner,
    id: u64,
    client: &Arc<TcpStream>,
    mut c: Client<'_>,
    mut head: Head,
) -> AuditRecord {
    let mut r = record(Protocol::Http, "", 0);
    let refuse = |c: &Client<'_>, r: &mut AuditRecord, code: u16, text: &str, why: String| {
        c.send(&status(code, text, &why));
        r.reason = why;
    };
    let lower = head.target.to_ascii_lowercase();
    let Some(rest) = lower
        .starts_with("http://")
        .then(|| &head.target["http://".len()..])
    else {
        let why = format!(
            "`{}` is not an absolute http:// URL (send https through CONNECT)",
            head.target.escape_debug()
        );
        refuse(&c, &mut r, 400, "Bad Request", why);
        return r;
    };
    let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(cut);
    let path = path.split('#').next().unwrap_or_default();
    let path = if path.is_empty() {
        "/".to_owned()
    } else if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let Some((host, port)) = split_authority(auth, Some(80)) else {
        let why = match userinfo_refused(auth, Some(80)) {
            Some((host, port, why)) => {
                (r.host, r.port) = (host, port);
                why
            }
            None => format!("`{}` is not a host[:port]", auth.escape_debug()),
        };
        refuse(&c, &mut r, 400, "Bad Request", why);
        return r;
    };
    r.host = host.clone();
    r.port = port;
    if head.has_token("upgrade", "h2c") || head.header("http2-settings").next().is_some() {
        refuse(
            &c,
            &mut r,
            403,
            "Forbidden",
            "Upgrade: h2c is refused".into(),
        );
        return r;
    }
    let websocket = head.has_token("upgrade", "websocket");
    if head.header("upgrade").next().is_some() && !websocket {
        refuse(
            &c,
            &mut r,
            403,
            "Forbidden",
            "only websocket upgrades are relayed".into(),
        );
        return r;
    }
    if head.header("transfer-encoding").next().is_some() {
        refuse(
            &c,
            &mut r,
            411,
            "Length Required",
            "request bodies must have a Content-Length (chunked uploads are not relayed)".into(),
        );
        return r;
    }
    let lengths: Vec<&str> = head.header("content-length").collect();
    let body: u64 = match lengths.as_slice() {
        [] => 0,
        [one] => match content_length(one) {
            Some(n) => n,
            None => {
                refuse(
                    &c,
                    &mut r,
                    400,
                    "Bad Request",
                    "a malformed Content-Length".into(),
                );
                return r;
            }
        },
        _ => {
            refuse(
                &c,
                &mut r,
                400,
                "Bad Request",
                "more than one Content-Length".into(),
            );
            return r;
        }
    };
    let scheme = if websocket { "ws" } else { "http" };
    let cleared = match clear(inner, Some(scheme), &host, port) {
        Ok(cl) => cl,
        Err(why) => {
            refuse(&c, &mut r, 403, "Forbidden", why);
            return r;
        }
    };
    // An intercepted host's requests are judged in plain text as through
    // TLS: its rules, its credential headers stripped. A credential is
    // never set on a plain-text request: anyone on the path would read it.
    let mut request = None;
    if let (Some(ic), Host::Name(name)) = (&inner.config.intercept, &cleared.host) {
        if ic.intercepts(name, port) {
            let d = ic.decide(name, port, &head.method, &path);
            let mut rec = d.record(name, port, &head.method, &path);
            // What refuses a request through TLS refuses it here too: an
            // upgrade (once relayed, the connection is a byte pipe whose
            // later requests nobody judges), a method override.
            let why = match &d {
                Decision::Refuse { why, .. } => Some((403, "Forbidden", why.clone())),
                Decision::Forward { set, .. } => match request_refusal(&head) {
                    Some(refusal) => {
                        rec.rule = "request".into();
                        Some(refusal)
                    }
                    None if !set.is_empty() => Some((
                        403,
                        "Forbidden",
                        format!(
                            "{name} gets a credential, which is sent only over TLS: use https://"
                        ),
                    )),
                    None => None,
                },
            };
            if let Some((code, text, why)) = why {
                if !matches!(d, Decision::Refuse { .. }) {
                    rec.verdict = intercept::Verdict::Refused;
                }
                inner.record_request(rec);
                refuse(&c, &mut r, code, text, why);
                return r;
            }
            d.apply(&mut head.headers);
            request = Some(rec);
        }
    }
    let up = match dial(inner, &cleared) {
        Ok(up) => up,
        Err((addr, why)) => {
            r.address = Some(addr);
            refuse(&c, &mut r, 502, "Bad Gateway", why);
            return r;
        }
    };
    if let Some(rec) = request {
        inner.record_request(rec);
    }
    r.address = up.peer_addr().ok();
    r.allowed = true;
    r.reason = cleared.reason.clone();
    let up = Arc::new(up);
    inner.track(id, &up);
    let authority = if port == 80 {
        cleared.host.to_string()
    } else {
        format!("{}:{port}", cleared.host)
    };
    let mut out = format!("{} {path} HTTP/1.1\r\nHost: {authority}\r\n", head.method);
    for (n, v) in &head.headers {
        if !HOP.iter().any(|h| n.eq_ignore_ascii_case(h)) {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
    }
    if websocket {
        out.push_str("Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    } else {
        out.push_str("Connection: close\r\n\r\n");
    }
    let mut sent = out.len() as u64;
    if write_all(&up, out.as_bytes()).is_err() {
        r.bytes_up = 0;
        return r;
    }
    if websocket {
        let early = c.rest();
        if !early.is_empty() && write_all(&up, &early).is_err() {
            return r;
        }
        let (u, d) = relay::both(client, &up, inner.config.idle_timeout);
        r.bytes_up = sent + early.len() as u64 + u;
        r.bytes_down = d;
        return r;
    }
    // A client that waits for `100 Continue` before its body gets it from
    // the proxy, now that the target is dialled (the header is not
    // forwarded, so the target answers only once).
    if body > 0 && head.has_token("expect", "100-continue") && c.available().is_empty() {
        c.send(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    // Exactly the body: bytes past it (a pipelined request) are never
    // relayed.
    let mut left = body;
    let have = c.available().len() as u64;
    let now = have.min(left) as usize;
    let first = c.take(now);
    if write_all(&up, &first).is_err() {
        return r;
    }
    left -= now as u64;
    sent += now as u64;
    let _ = client.set_read_timeout(Some(inner.config.idle_timeout));
    let mut chunk = vec![0u8; 64 * 1024];
    let mut ended = false;
    while left > 0 {
        let want = left.min(chunk.len() as u64) as usize;
        match read_once(client, &mut chunk[..want]) {
            Ok(0) => {
                ended = true;
                break;
            }
            Ok(n) => {
                if write_all(&up, &chunk[..n]).is_err() {
                    break;
                }
                left -= n as u64;
                sent += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    r.bytes_up = sent;
    // The client's end of its request stream is passed on to the target,
    // which may hold the connection open until it reads that end whatever
    // `Connection: close` said: with its request whole, the client is
    // watched for it while the answer is relayed.
    if ended {
        let _ = up.shutdown(Shutdown::Write);
    }
    r.bytes_down = std::thread::scope(|s| {
        if left == 0 {
            let _ = std::thread::Builder::new()
                .name("sandgate-proxy-end".into())
                .spawn_scoped(s, || pass_half_close(client, &up));
        }
        let down = relay::down_only(&up, client, inner.config.idle_timeout);
        // Also wakes the watcher.
        let _ = client.shutdown(Shutdown::Both);
        down
    });
    r
}

/// Reads the client of a plain request whose request was sent whole, until
/// its stream ends, and passes that end on to the target as a half close.
/// Bytes past the request would be a pipelined request, which is never
/// relayed: they are read and dropped.
fn pass_half_close(client: &TcpStream, up: &TcpStream) {
    let mut sink = [0u8; 4096];
    loop {
        match read_once(client, &mut sink) {
            Ok(0) => {
                let _ = up.shutdown(Shutdown::Write);
                return;
            }
            Ok(_) => {}
            Err(e) if nothing_yet(&e) => {}
            Err(_) => return,
        }
    }
}

/// Whether a read failed only because nothing came yet (interrupted, or
/// the socket's read timeout), so that it may be tried again.
fn nothing_yet(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Headers never forwarded as the client sent them.
const HOP: &[&str] = &[
    "host",
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "expect",
];

/// A tunnel (CONNECT or SOCKS5) to an intercepted host: TLS terminated
/// with a certificate of the proxy's authority, then each request of the
/// kept-alive connection judged, its credential set or stripped, and
/// forwarded over a kept-alive TLS connection to the upstream (opened on
/// the first admitted request), verified against the configured roots. A
/// refused request reaches no upstream.
#[allow(clippy::too_many_arguments)]
fn intercepted(
    inner: &Inner,
    id: u64,
    client: &Arc<TcpStream>,
    mut c: Client<'_>,
    mut r: AuditRecord,
    cleared: &Cleared,
    ic: &Intercept,
    name: &str,
) -> AuditRecord {
    if !c.need(1) {
        r.reason = "the tunnel carried nothing before the timeout".into();
        return r;
    }
    if c.available()[0] != 0x16 {
        r.reason = format!("{name} is intercepted and takes TLS only");
        return r;
    }
    // The TLS handshake is the tunnel's first flight: it shares its
    // deadline.
    let io = Prefixed {
        ahead: intercept::ReadAhead::with(c.rest()),
        s: client,
        deadline: c.deadline,
    };
    let mut tls = match intercept::accept(&ic.authority, name, io) {
        Ok(t) => t,
        Err(why) => {
            r.reason = why;
            return r;
        }
    };
    let admitted = format!("{} (intercepted: TLS ended at the proxy)", cleared.reason);
    // What ended the connection short of the upstream: a refused request,
    // or a failure before any request reached it (an upstream the roots
    // do not trust, one that does not answer). The connection counts as
    // admitted only when requests reached the upstream and none was
    // refused: its record must not say `OK` where the request log says
    // refused.
    let mut refused: Option<String> = None;
    let mut failed: Option<String> = None;
    let idle = inner.config.idle_timeout;
    let _ = client.set_read_timeout(Some(idle));
    let _ = client.set_write_timeout(Some(idle));
    let port = cleared.port;
    let mut buf = Vec::new();
    let mut upstream: Option<Upstream> = None;
    loop {
        let head = match read_head_from(&mut tls, &mut buf, idle) {
            Ok(Some(h)) => h,
            Ok(None) => break,
            Err(why) => {
                let _ = tls.write_all(&status(400, "Bad Request", &why));
                refused = Some(why);
                break;
            }
        };
        let d = ic.decide(name, port, &head.method, &head.target);
        let mut rec = d.record(name, port, &head.method, &head.target);
        let refusal = match &d {
            Decision::Refuse { why, .. } => Some((403, "Forbidden", why.clone())),
            Decision::Forward { .. } => request_refusal(&head),
        };
        if let Some((code, text, why)) = refusal {
            if !matches!(d, Decision::Refuse { .. }) {
                rec.verdict = intercept::Verdict::Refused;
                rec.rule = "request".into();
            }
            inner.record_request(rec);
            let _ = tls.write_all(&status(code, text, &why));
            let _ = tls.flush();
            refused = Some(why);
            break;
        }
        let mut rec = Some(rec);
        let answered = r.bytes_down;
        let done = forward_one(
            inner,
            id,
            cleared,
            name,
            head,
            &d,
            &mut tls,
            &mut buf,
            &mut r,
            &mut rec,
            &mut upstream,
        );
        if let Some(rec) = rec.take() {
            inner.record_request(rec);
        }
        match done {
            Ok(keep) => {
                if !keep {
                    break;
                }
            }
            Err(why) => {
                // A 502 only while nothing of an answer went out: after
                // that, closing the connection is what tells the client.
                if r.bytes_down == answered {
                    let _ = tls.write_all(&status(502, "Bad Gateway", &why));
                    let _ = tls.flush();
                }
                failed = Some(why);
                break;
            }
        }
    }
    drop_upstream(inner, id, &mut upstream);
    tls.conn.send_close_notify();
    let _ = tls.flush();
    // Bytes up are counted once written to the upstream: none, and no
    // request reached it.
    let reached = r.bytes_up > 0;
    (r.allowed, r.reason) = match (refused, failed) {
        (Some(why), _) => (false, why),
        (None, Some(why)) if !reached => (false, why),
        (None, Some(why)) => (true, format!("{admitted}; then: {why}")),
        (None, None) if !reached => (
            false,
            format!("{admitted}; the client sent no request, nothing reached {name}"),
        ),
        (None, None) => (true, admitted),
    };
    r
}

/// Headers that make a server act on another method than the request
/// line's: Rack::MethodOverride (in every Rails application), Express's
/// method-override, Google's APIs and many PHP frameworks read them.
const METHOD_OVERRIDES: &[&str] = &[
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Headers that make a server route by another path than the request
/// line's: Symfony before CVE-2018-14773's fix, Zend Framework and Laminas
/// read them (IIS's URL Rewrite sets the first for its backend).
const PATH_OVERRIDES: &[&str] = &["x-original-url", "x-rewrite-url"];

/// Headers that make a server, or a shared front before it (a CDN, a
/// multi-tenant reverse proxy, a framework that trusts forwarded headers:
/// Express's `trust proxy`, Django's `USE_X_FORWARDED_HOST`, Symfony's
/// trusted headers), take another host than the connection's: the
/// credential would go with the request to whatever answers under that
/// name. `forwarded` (RFC 7239) is refused whole, its `host=` being one of
/// its parameters.
const HOST_OVERRIDES: &[&str] = &[
    "x-forwarded-host",
    "forwarded",
    "x-host",
    "x-forwarded-server",
    "x-http-host-override",
    "x-original-host",
];

/// Why a request that names another method in a header or its query is
/// refused on an intercepted host (`None` when it names none): the rules
/// and the credential's methods judge the request line's.
fn method_override(head: &Head) -> Option<String> {
    let name = METHOD_OVERRIDES
        .iter()
        .find(|h| head.has_cgi_header(h))
        .map(|h| format!("`{h}`"))
        .or_else(|| query_override(&head.target).then(|| "a `_method` query parameter".into()))?;
    Some(format!(
        "{name} is refused on an intercepted host: the server would act on a method the \
         rules did not judge"
    ))
}

/// Whether the query of `target` has a `_method` parameter: Symfony and
/// Laravel take it as the method of a POST, as Express's method-override
/// does when told to read the query. The name is read as the most lenient
/// of them would: percent-decoded, `+` a space, cut at a NUL or a `[`
/// (PHP's array keys), leading spaces dropped, `.` and spaces as `_`
/// (PHP's names), in any case; pairs split at `&` and `;`. A `_method` in
/// a form body is not seen (the body is relayed as it streams).
fn query_override(target: &str) -> bool {
    let Some((_, query)) = target.split_once('?') else {
        return false;
    };
    let query = query.split('#').next().unwrap_or_default();
    query.split(['&', ';']).any(|pair| {
        let raw = pair.split('=').next().unwrap_or_default().as_bytes();
        let mut name = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            let escaped = (raw[i] == b'%')
                .then(|| crate::intercept::escape_at(raw, i))
                .flatten();
            match escaped {
                Some(b) => {
                    name.push(b);
                    i += 3;
                }
                None => {
                    name.push(if raw[i] == b'+' { b' ' } else { raw[i] });
                    i += 1;
                }
            }
        }
        let end = name.iter().position(|&b| b == 0 || b == b'[');
        let name = &name[..end.unwrap_or(name.len())];
        let start = name.iter().take_while(|&&b| b == b' ').count();
        let name: Vec<u8> = name[start..]
            .iter()
            .map(|&b| if b == b'.' || b == b' ' { b'_' } else { b })
            .collect();
        name.eq_ignore_ascii_case(b"_method")
    })
}

/// What refuses a request to an intercepted host whatever the rules say:
/// upgrades (h2c, websocket), a method override (a header or a `_method`
/// query parameter), a path or host override header, a body framed two
/// ways, a malformed length.
fn request_refusal(head: &Head) -> Option<(u16, &'static str, String)> {
    if head.header("upgrade").next().is_some() || head.header("http2-settings").next().is_some() {
        return Some((
            403,
            "Forbidden",
            "upgrades are refused on an intercepted host (HTTP/1.1 requests only)".into(),
        ));
    }
    if let Some(why) = method_override(head) {
        return Some((403, "Forbidden", why));
    }
    let routed_by = [
        (
            PATH_OVERRIDES,
            "the server would route by a path the rules did not judge",
        ),
        (
            HOST_OVERRIDES,
            "a server or a front before it would route by a host the rules did not judge, \
             with the credential",
        ),
    ];
    for (headers, why) in routed_by {
        if let Some(h) = headers.iter().find(|h| head.has_cgi_header(h)) {
            return Some((
                403,
                "Forbidden",
                format!("`{h}` is refused on an intercepted host: {why}"),
            ));
        }
    }
    let codings: Vec<&str> = head.header("transfer-encoding").collect();
    let lengths: Vec<&str> = head.header("content-length").collect();
    if !codings.is_empty() {
        // Exactly `chunked`, alone: anything else could be framed two ways.
        return match (codings.as_slice(), lengths.is_empty()) {
            ([one], true) if one.trim().eq_ignore_ascii_case("chunked") => None,
            _ => Some((
                400,
                "Bad Request",
                "a request body must be framed by one Content-Length or by \
                 `Transfer-Encoding: chunked` alone"
                    .into(),
            )),
        };
    }
    match lengths.as_slice() {
        [] => None,
        [one] if content_length(one).is_some() => None,
        _ => Some((
            400,
            "Bad Request",
            "a malformed or repeated Content-Length".into(),
        )),
    }
}

/// Forwards one admitted request on a new upstream TLS connection and
/// relays its response. Answers whether the client connection can carry
/// another request. `rec` is recorded (with the status) as soon as the
/// response's head is relayed.
#[allow(clippy::too_many_arguments)]
fn forward_one<S: Read + Write>(
    inner: &Inner,
    id: u64,
    cleared: &Cleared,
    name: &str,
    mut head: Head,
    d: &Decision,
    tls: &mut S,
    buf: &mut Vec<u8>,
    r: &mut AuditRecord,
    rec: &mut Option<intercept::RequestRecord>,
    upstream: &mut Option<Upstream>,
) -> Result<bool, String> {
    let body: u64 = head
        .header("content-length")
        .next()
        .and_then(content_length)
        .unwrap_or(0);
    let chunked = head.header("transfer-encoding").next().is_some();
    let carries_body = body > 0 || chunked;
    let client_close = head.has_token("connection", "close");
    let idle = inner.config.idle_timeout;
    let expect = head.has_token("expect", "100-continue");
    d.apply(&mut head.headers);
    let authority = if cleared.port == 443 {
        name.to_owned()
    } else {
        format!("{name}:{}", cleared.port)
    };
    let mut out = format!(
        "{} {} HTTP/1.1\r\nHost: {authority}\r\n",
        head.method, head.target
    );
    for (n, v) in &head.headers {
        if !HOP.iter().any(|h| n.eq_ignore_ascii_case(h)) {
            out.push_str(n);
            out.push_str(": ");
            out.push_str(v);
            out.push_str("\r\n");
        }
    }
    if carries_body {
        // The connection is not used again (see below), and the server is
        // told: one that ignores this body (a GET's, on an endpoint that
        // expects none) would otherwise read it as the next request, one
        // the rules never judged; after `Connection: close` it processes
        // no further request on the connection (RFC 9112, 9.6).
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    let up_err = |e: io::Error| format!("cannot write to {name}: {e}");
    // A request with a body, or whose method is not idempotent, goes on a
    // fresh connection: it is never sent twice (a server may have acted on
    // it before the connection closed without an answer, and a proxy must
    // not retry it: RFC 9112, 9.3.1). Another reuses the kept-alive
    // upstream connection, and is sent once more on a fresh one if that
    // connection turns out to have been closed before any answer.
    if carries_body || !IDEMPOTENT.contains(&head.method.as_str()) {
        drop_upstream(inner, id, upstream);
    }
    let mut rbuf = Vec::new();
    let mut first_end = None;
    while first_end.is_none() {
        let fresh = upstream.is_none();
        if fresh {
            *upstream = Some(open_upstream(inner, id, cleared, name, r)?);
        }
        let Some(up) = upstream.as_mut() else {
            return Err(format!("no connection to {name}"));
        };
        let utls = &mut up.tls;
        let sent = utls.write_all(out.as_bytes()).and_then(|()| utls.flush());
        if let Err(e) = sent {
            drop_upstream(inner, id, upstream);
            if fresh {
                return Err(up_err(e));
            }
            continue;
        }
        r.bytes_up += out.len() as u64;
        if body > 0 {
            if expect && buf.is_empty() {
                let _ = tls.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
                let _ = tls.flush();
            }
            // Counted as it reaches the upstream: a body that breaks off
            // is audited with what of it went.
            let mut left = body;
            let now = (buf.len() as u64).min(left) as usize;
            utls.write_all(&buf[..now]).map_err(up_err)?;
            r.bytes_up += now as u64;
            buf.drain(..now);
            left -= now as u64;
            let mut chunk = vec![0u8; 64 * 1024];
            while left > 0 {
                let want = left.min(chunk.len() as u64) as usize;
                match tls.read(&mut chunk[..want]) {
                    Ok(0) => return Err("the client closed inside its request body".into()),
                    Ok(n) => {
                        utls.write_all(&chunk[..n]).map_err(up_err)?;
                        r.bytes_up += n as u64;
                        left -= n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(read_failure("the client", "the request body", &e, idle)),
                }
            }
            utls.flush().map_err(up_err)?;
        } else if chunked {
            if expect && buf.is_empty() {
                let _ = tls.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
                let _ = tls.flush();
            }
            // Exactly the chunked body; what follows it (a pipelined
            // request) stays for the next turn.
            let mut src = Src {
                r: &mut *tls,
                buf: std::mem::take(buf),
                who: "the client",
                idle,
                from_upstream: false,
            };
            let sent = src.relay(Body::Chunked, utls, "the client", &mut r.bytes_up);
            *buf = src.buf;
            match sent {
                Ok(()) => {}
                Err(BodyError::Framing(why)) => {
                    // The client's framing is at fault, not the upstream:
                    // it is told so, and the upstream connection (holding
                    // an unfinished body) is dropped by the caller.
                    let answer = status(400, "Bad Request", &why);
                    let _ = tls.write_all(&answer);
                    let _ = tls.flush();
                    r.bytes_down += answer.len() as u64;
                    return Err(why);
                }
                Err(BodyError::Io(why)) => return Err(why),
            }
            utls.flush().map_err(up_err)?;
        }
        match read_until_head_end(utls, &mut rbuf, name, idle) {
            Ok(Some(end)) => first_end = Some(end),
            Ok(None) | Err(_) if !fresh && rbuf.is_empty() => {
                drop_upstream(inner, id, upstream);
            }
            Ok(None) => return Err(format!("{name} closed without an answer")),
            Err(why) => return Err(why),
        }
    }
    let Some(up) = upstream.as_mut() else {
        return Err(format!("no connection to {name}"));
    };
    let utls = &mut up.tls;
    let mut up_close = false;
    // The response: its head (interim 1xx ones passed on), then its body
    // as framed.
    let (code, framing) = loop {
        let end = match first_end.take() {
            Some(end) => end,
            None => read_until_head_end(utls, &mut rbuf, name, idle)?
                .ok_or_else(|| format!("{name} closed without an answer"))?,
        };
        let text = std::str::from_utf8(&rbuf[..end])
            .map_err(|_| format!("{name} answered a head that is not UTF-8"))?
            .to_owned();
        rbuf.drain(..end + 4);
        let mut lines = text.split("\r\n");
        let line = lines.next().unwrap_or_default();
        let code: u16 = line
            .strip_prefix("HTTP/1.")
            .and_then(|l| l.get(2..5))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("{name} answered a malformed status line"))?;
        let headers = parse_headers(lines).map_err(|why| format!("{name} answered {why}"))?;
        up_close |= headers.iter().any(|(h, v)| {
            h.eq_ignore_ascii_case("connection")
                && v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))
        });
        let chunked = headers.iter().any(|(h, v)| {
            h.eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().trim_end().ends_with("chunked")
        });
        let length = headers
            .iter()
            .find(|(h, _)| h.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| content_length(v))
            .map(|n| n.ok_or_else(|| format!("{name} answered a malformed Content-Length")))
            .transpose()?;
        let framing =
            if head.method == "HEAD" || code == 204 || code == 304 || (100..200).contains(&code) {
                Body::Empty
            } else if chunked {
                Body::Chunked
            } else if let Some(n) = length {
                Body::Length(n)
            } else {
                Body::UntilEof
            };
        let mut back = format!("{line}\r\n");
        for (n, v) in &headers {
            if !["connection", "keep-alive", "proxy-connection"]
                .iter()
                .any(|h| n.eq_ignore_ascii_case(h))
            {
                back.push_str(&format!("{n}: {v}\r\n"));
            }
        }
        let interim = (100..200).contains(&code) && code != 101;
        let framed = framing != Body::UntilEof;
        if !interim && (!framed || client_close) {
            back.push_str("Connection: close\r\n");
        }
        back.push_str("\r\n");
        tls.write_all(back.as_bytes())
            .map_err(|e| format!("cannot answer the client: {e}"))?;
        r.bytes_down += back.len() as u64;
        if code == 101 {
            return Err(format!("{name} switched protocols, which is not relayed"));
        }
        if !interim {
            break (code, framing);
        }
    };
    if let Some(mut done) = rec.take() {
        done.status = code;
        inner.record_request(done);
    }
    let mut src = Src {
        r: utls,
        buf: rbuf,
        who: name,
        idle,
        from_upstream: true,
    };
    src.relay(framing, tls, name, &mut r.bytes_down)?;
    let framed = framing != Body::UntilEof;
    // Bytes past the answer would be a second answer nobody asked for. A
    // connection that carried a body is not used again either: a server
    // that did not take it as a body (some ignore it on a GET) reads it as
    // requests, and one whose own body is still to come would swallow the
    // next request the proxy sends, credential and all, for an endpoint
    // that may echo or keep it.
    if !framed || up_close || !src.buf.is_empty() || carries_body {
        drop_upstream(inner, id, upstream);
    }
    tls.flush()
        .map_err(|e| format!("cannot answer the client: {e}"))?;
    Ok(framed && !client_close)
}

/// The idempotent methods (RFC 9110, 9.2.2): a request sent twice has
/// the effect of one, so one the upstream closed on without an answer may
/// be sent again.
const IDEMPOTENT: &[&str] = &["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"];

/// A kept-alive TLS connection to an intercepted host.
pub(crate) struct Upstream {
    sock: Arc<TcpStream>,
    tls: rustls::StreamOwned<rustls::ClientConnection, intercept::UpSock>,
}

/// Dials an intercepted host's checked address and completes TLS,
/// verified against the configured roots.
fn open_upstream(
    inner: &Inner,
    id: u64,
    cleared: &Cleared,
    name: &str,
    r: &mut AuditRecord,
) -> Result<Upstream, String> {
    let up = dial(inner, cleared).map_err(|(_, why)| why)?;
    r.address = up.peer_addr().ok();
    let up = Arc::new(up);
    inner.track(id, &up);
    // `dial` set the write timeout.
    let _ = up.set_read_timeout(Some(inner.config.idle_timeout));
    let connected = inner
        .upstream_tls()
        .and_then(|config| intercept::connect(config, name, &up));
    match connected {
        Ok(tls) => Ok(Upstream { sock: up, tls }),
        Err(why) => {
            inner.untrack(id, &up);
            Err(why)
        }
    }
}

/// Closes the kept-alive upstream connection, if any.
fn drop_upstream(inner: &Inner, id: u64, upstream: &mut Option<Upstream>) {
    if let Some(mut up) = upstream.take() {
        up.tls.conn.send_close_notify();
        let _ = up.tls.flush();
        inner.untrack(id, &up.sock);
        let _ = up.sock.shutdown(Shutdown::Both);
    }
}

/// How a response's body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    Empty,
    Length(u64),
    Chunked,
    UntilEof,
}

/// The size of a chunk line (without its CRLF): 1 to 15 hex digits
/// (under 2^60, so no sum with it overflows), then nothing or an extension:
/// `;` after optional blanks, with no control byte but the tab. Anything
/// else (a sign, blanks and no extension, a bare LF or a CR, more digits)
/// is `None`: another parser could read it otherwise.
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 15 {
        return None;
    }
    let (size, rest) = line.split_at(digits);
    let blanks = rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    match rest.get(blanks) {
        None if blanks == 0 => {}
        Some(b';') if !rest.iter().any(|&b| is_ctl(b) && b != b'\t') => {}
        _ => return None,
    }
    u64::from_str_radix(std::str::from_utf8(size).ok()?, 16).ok()
}

/// Why a body could not be relayed.
enum BodyError {
    /// The sender framed it wrongly.
    Framing(String),
    /// A read or write failed, or the stream ended inside the body.
    Io(String),
}

impl From<BodyError> for String {
    fn from(e: BodyError) -> String {
        match e {
            BodyError::Framing(why) | BodyError::Io(why) => why,
        }
    }
}

/// A body being read: what was read past its head, then the stream of
/// `who`, whose reads time out after `idle`.
struct Src<'a, R> {
    r: &'a mut R,
    buf: Vec<u8>,
    who: &'a str,
    idle: Duration,
    /// Whether the body is an upstream's answer. Its chunked body may end
    /// with trailer fields, a request's may not: they are header fields
    /// that some servers merge into the head (Apache's `MergeTrailers`, on
    /// by default before 2.4.11, CVE-2013-5704; Tomcat's
    /// `allowedTrailerHeaders`), where the proxy never judged them (a
    /// credential's header it removes, a method override it refuses). And
    /// its lines are never quoted in an error: they may be the request's
    /// headers reflected, the credential among them, and errors go to the
    /// audit.
    from_upstream: bool,
}

impl<R: Read> Src<'_, R> {
    /// Reads more; false at the end of the stream (a TLS peer that closes
    /// without close_notify ends it too).
    fn fill(&mut self, chunk: &mut [u8]) -> Result<bool, BodyError> {
        loop {
            match self.r.read(chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
                Err(e) => {
                    return Err(BodyError::Io(read_failure(
                        self.who, "a body", &e, self.idle,
                    )))
                }
            }
        }
    }

    /// Copies the body to `out`, exactly as framed, adding to `sent` the
    /// bytes passed on as they go (so that a body that breaks off is
    /// counted with what of it went).
    fn relay<W: Write>(
        &mut self,
        body: Body,
        out: &mut W,
        name: &str,
        sent: &mut u64,
    ) -> Result<(), BodyError> {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut put = |out: &mut W, bytes: &[u8]| -> Result<(), BodyError> {
            out.write_all(bytes)
                .map_err(|e| BodyError::Io(format!("cannot pass a body on: {e}")))?;
            *sent += bytes.len() as u64;
            Ok(())
        };
        match body {
            Body::Empty => {}
            Body::UntilEof => loop {
                put(out, &self.buf)?;
                self.buf.clear();
                if !self.fill(&mut chunk)? {
                    break;
                }
            },
            Body::Length(n) => self.exact(n, out, &mut chunk, &mut put, name)?,
            // Each line is checked before it is passed on: the body goes
            // on as it came, so it must be framed the one way every reader
            // takes it (RFC 9112 section 7.1).
            Body::Chunked => loop {
                let line = self.line(&mut chunk, name)?;
                // The line is quoted for the client's own bytes only: an
                // upstream's may be the request's headers reflected, the
                // credential among them, and the error goes to the audit.
                let size = chunk_size(&line[..line.len() - 2]).ok_or_else(|| {
                    BodyError::Framing(if self.from_upstream {
                        format!("{name} sent a malformed chunk line")
                    } else {
                        format!(
                            "{name} sent a malformed chunk line \"{}\"",
                            String::from_utf8_lossy(&line).escape_debug()
                        )
                    })
                })?;
                put(out, &line)?;
                if size == 0 {
                    // Trailer fields, up to the blank line.
                    loop {
                        let l = self.line(&mut chunk, name)?;
                        if l == b"\r\n" {
                            put(out, &l)?;
                            break;
                        }
                        if !self.from_upstream {
                            return Err(BodyError::Framing(format!(
                                "{name} sent a trailer field, which is refused on an \
                                 intercepted host: a server may merge it into the request's \
                                 headers, which the proxy judged without it"
                            )));
                        }
                        let field = std::str::from_utf8(&l[..l.len() - 2])
                            .ok()
                            .filter(|f| parse_headers(std::iter::once(*f)).is_ok());
                        if field.is_none() {
                            return Err(BodyError::Framing(format!(
                                "{name} sent a malformed trailer field"
                            )));
                        }
                        put(out, &l)?;
                    }
                    break;
                }
                self.exact(size, out, &mut chunk, &mut put, name)?;
                // The data must end where its size says: with a CRLF.
                while self.buf.len() < 2 {
                    if !self.fill(&mut chunk)? {
                        return Err(BodyError::Io(format!("{name} closed inside a body")));
                    }
                }
                if self.buf[..2] != *b"\r\n" {
                    return Err(BodyError::Framing(format!(
                        "{name} sent a chunk longer than its size"
                    )));
                }
                self.buf.drain(..2);
                put(out, b"\r\n")?;
            },
        }
        Ok(())
    }

    fn exact<W: Write>(
        &mut self,
        mut n: u64,
        out: &mut W,
        chunk: &mut [u8],
        put: &mut impl FnMut(&mut W, &[u8]) -> Result<(), BodyError>,
        name: &str,
    ) -> Result<(), BodyError> {
        loop {
            let now = (self.buf.len() as u64).min(n) as usize;
            put(out, &self.buf[..now])?;
            self.buf.drain(..now);
            n -= now as u64;
            if n == 0 {
                return Ok(());
            }
            if !self.fill(chunk)? {
                return Err(BodyError::Io(format!("{name} closed inside a body")));
            }
        }
    }

    /// One line, with its CRLF.
    fn line(&mut self, chunk: &mut [u8], name: &str) -> Result<Vec<u8>, BodyError> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                return Ok(self.buf.drain(..i + 2).collect());
            }
            if self.buf.len() > MAX_HEAD {
                return Err(BodyError::Framing(format!(
                    "{name} sent a chunk line that is too long"
                )));
            }
            if !self.fill(chunk)? {
                return Err(BodyError::Io(format!("{name} closed inside a body")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        assert_eq!(
            split_authority("example.com:443", None),
            Some(("example.com".into(), 443))
        );
        assert_eq!(
            split_authority("[::1]:22", None),
            Some(("[::1]".into(), 22))
        );
        assert_eq!(split_authority("example.com", None), None);
        assert_eq!(
            split_authority("example.com", Some(80)),
            Some(("example.com".into(), 80))
        );
        assert_eq!(split_authority("user@example.com:443", None), None);
        assert_eq!(split_authority("example.com:+443", None), None);
        assert_eq!(split_authority("example.com:99999", None), None);
        assert_eq!(split_authority(":443", None), None);
        assert_eq!(split_authority("[::1]x", None), None);
    }

    #[test]
    fn chunk_sizes_are_hex_digits_and_a_clean_extension() {
        assert_eq!(chunk_size(b"1a"), Some(26));
        assert_eq!(chunk_size(b"5;ext=1"), Some(5));
        assert_eq!(chunk_size(b"5 ;a=\"b c\""), Some(5));
        assert_eq!(chunk_size(b"fffffffffffffff"), Some((1 << 60) - 1));
        for bad in [
            &b""[..],
            b"+5",
            b"-5",
            b"0x5",
            b"5 ",
            b" 5",
            b"5;\n",
            b"5;a\rb",
            b"5\0",
            b"ffffffffffffffff",
        ] {
            assert_eq!(chunk_size(bad), None, "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn sni_must_name_the_host() {
        let name = Host::Name("a.example".into());
        assert!(check_sni(&name, Some("A.example")).is_ok());
        assert!(check_sni(&name, Some("b.example")).is_err());
        assert!(check_sni(&name, None).is_err());
        let ip = Host::Ip("127.0.0.1".parse().unwrap());
        assert!(check_sni(&ip, None).is_ok());
        assert!(check_sni(&ip, Some("a.example")).is_err());
    }
}
