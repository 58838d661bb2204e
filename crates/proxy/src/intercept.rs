//! TLS interception for the hosts that carry credentials or request
//! rules: a per-proxy certificate authority whose key never leaves memory,
//! the per-request decision (rules, header set or stripped), and the loop
//! that serves an intercepted connection request by request.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::RootCertStore;

/// A header value that is never printed (`Debug` shows its length only).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a header value. Refused (naming nothing of the value) when it
    /// holds bytes a header value may not: control characters other than
    /// tab, or DEL.
    ///
    /// # Errors
    ///
    /// When the value is empty or holds such a byte.
    pub fn new(value: Vec<u8>) -> Result<Secret, String> {
        if value.is_empty() {
            return Err("the value is empty".into());
        }
        if value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(
                "the value holds a line break or another control character, which a header \
                 cannot carry"
                    .into(),
            );
        }
        String::from_utf8(value)
            .map(Secret)
            .map_err(|_| "the value is not UTF-8".into())
    }

    /// The value, for the header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// Which requests a credential or a rule concerns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestMatch {
    /// The host name, lower case.
    pub host: String,
    /// The port, or `None` for any.
    pub port: Option<u16>,
    /// Methods (exact, upper case); empty: any.
    pub methods: Vec<String>,
    /// Path prefixes, matched against the request's percent-decoded path:
    /// exactly at a `/` boundary for what admits (an allow rule, a
    /// credential), in every reading a server may give it for a deny rule
    /// (other letter cases, and suffixes such as `.json`); empty: any.
    pub path_prefixes: Vec<String>,
}

impl RequestMatch {
    fn host_is(&self, host: &str, port: u16) -> bool {
        self.host.eq_ignore_ascii_case(host) && self.port.is_none_or(|p| p == port)
    }

    /// Whether the request is one this match admits: its path is a prefix
    /// or beneath it, exactly as spelled.
    fn matches(&self, method: &str, path: &str) -> bool {
        self.method_is(method)
            && (self.path_prefixes.is_empty() || self.path_prefixes.iter().any(|p| under(path, p)))
    }

    /// Whether the request is one a deny rule with this match refuses: its
    /// path is covered by a prefix in any reading (see [`covered`]), and
    /// `HEAD` is covered by `GET`, since routers (Rails, Flask, Express,
    /// Django, Go's) run the `GET` handler for it.
    fn covers(&self, method: &str, path: &str) -> bool {
        (self.method_is(method) || (method == "HEAD" && self.method_is("GET")))
            && (self.path_prefixes.is_empty()
                || self.path_prefixes.iter().any(|p| covered(path, p)))
    }

    fn method_is(&self, method: &str) -> bool {
        self.methods.is_empty() || self.methods.iter().any(|m| m == method)
    }
}

/// Whether `path` is `prefix` or beneath it at a `/` boundary.
fn under(path: &str, prefix: &str) -> bool {
    path == prefix
        || (path.starts_with(prefix)
            && (prefix.ends_with('/') || path.as_bytes().get(prefix.len()) == Some(&b'/')))
}

/// Whether a deny rule's `prefix` covers `path` in any reading a server
/// may give it, so that a deny fails closed: letter case ignored (ASP.NET,
/// IIS and Spring match paths case-insensitively, and .NET's invariant
/// upper case makes `ı` an `I` and `ſ` an `S`), a trailing `/` on the
/// prefix ignored (`/admin/` and `/admin` are one route to most routers),
/// and any boundary that is not a word character: `/admin.json` (Rails
/// formats, Spring's suffix patterns), `/admin?` (a decoded `%3F` that a
/// server re-reading the path takes as the query), `/admin ` (IIS trims
/// trailing spaces and dots). `/administrators` and `/admin-x` stay other
/// words. An allow prefix is matched by [`under`], exactly: these
/// readings must never widen what it admits.
fn covered(path: &str, prefix: &str) -> bool {
    fn fold(s: &str) -> String {
        s.chars()
            .flat_map(char::to_uppercase)
            .flat_map(char::to_lowercase)
            .collect()
    }
    let prefix = fold(prefix.strip_suffix('/').unwrap_or(prefix));
    let path = fold(path);
    path.starts_with(&prefix)
        && path[prefix.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'))
}

/// A header the proxy sets on matching requests to a host.
#[derive(Clone, Debug)]
pub struct Injection {
    /// Which requests get it.
    pub target: RequestMatch,
    /// The header name.
    pub header: String,
    /// The whole header value.
    pub value: Secret,
    /// What the audit calls it (`net.credentials[0]`).
    pub label: String,
}

/// A method and path rule of an intercepted host.
#[derive(Clone, Debug)]
pub struct RequestRule {
    /// Which requests it concerns.
    pub target: RequestMatch,
    /// Allow (true) or deny.
    pub allow: bool,
    /// What the audit calls it (`net.rules[1]`).
    pub label: String,
}

/// The proxy's TLS provider: ring's defaults, with AES-128-GCM offered
/// first (as browsers and Go's TLS do) instead of AES-256-GCM. The proxy
/// decrypts and encrypts every intercepted byte once more than a tunnel
/// would; on its upstream connections, where it is the client, this
/// spends about a third less on that (a 1 MB GET went from about 1.30x to
/// 1.20x the opaque tunnel). On the command's side its client's order
/// stands.
fn provider() -> rustls::crypto::CryptoProvider {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites
        .sort_by_key(|c| c.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    p
}

/// The per-proxy certificate authority: made in memory, its key never
/// serialized anywhere but into the signing of leaf certificates.
pub struct CertAuthority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_der: CertificateDer<'static>,
    ca_pem: String,
    leaf_key: rcgen::KeyPair,
    provider: Arc<rustls::crypto::CryptoProvider>,
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl fmt::Debug for CertAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertAuthority").finish_non_exhaustive()
    }
}

impl CertAuthority {
    /// A new authority whose certificates can name only `hosts` (an X.509
    /// name constraint, so a leaked certificate could vouch for nothing
    /// else), valid from now on.
    ///
    /// # Errors
    ///
    /// When a key cannot be generated or a certificate signed.
    pub fn generate(hosts: &[String]) -> Result<CertAuthority, String> {
        let err = |e: rcgen::Error| format!("cannot make the proxy's certificate authority: {e}");
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            "sandgate egress proxy (per executor)",
        );
        let mut names: Vec<String> = hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
        names.sort();
        names.dedup();
        params.name_constraints = Some(rcgen::NameConstraints {
            permitted_subtrees: names
                .into_iter()
                .map(rcgen::GeneralSubtree::DnsName)
                .collect(),
            excluded_subtrees: Vec::new(),
        });
        let cert = params.self_signed(&key).map_err(err)?;
        let ca_der = cert.der().clone();
        let ca_pem = cert.pem();
        let leaf_key = rcgen::KeyPair::generate().map_err(err)?;
        Ok(CertAuthority {
            issuer: rcgen::Issuer::new(params, key),
            ca_der,
            ca_pem,
            leaf_key,
            provider: Arc::new(provider()),
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The authority's certificate, PEM (no key).
    pub fn certificate_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The TLS server configuration for `host` (a leaf certificate made
    /// once per host and kept), offering HTTP/1.1 only.
    fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        let host = host.to_ascii_lowercase();
        let mut leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = leaves.get(&host) {
            return Ok(Arc::clone(c));
        }
        let err = |e: rcgen::Error| format!("cannot make a certificate for {host}: {e}");
        let mut params = rcgen::CertificateParams::new(vec![host.clone()]).map_err(err)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, host.clone());
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        let leaf = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(err)?;
        let key = PrivateKeyDer::Pkcs8(self.leaf_key.serialize_der().into());
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), self.ca_der.clone()], key)
            .map_err(|e| format!("cannot serve a certificate for {host}: {e}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        leaves.insert(host, Arc::clone(&config));
        Ok(config)
    }
}

/// What the proxy intercepts, and how.
#[derive(Clone, Debug)]
pub struct Intercept {
    /// The authority the command's clients trust.
    pub authority: Arc<CertAuthority>,
    /// The roots an upstream's certificate must chain to.
    pub upstream_roots: Arc<RootCertStore>,
    /// Headers set on matching requests.
    pub injections: Vec<Injection>,
    /// Method and path rules.
    pub rules: Vec<RequestRule>,
}

impl Intercept {
    /// Whether connections to `host:port` are intercepted.
    pub fn intercepts(&self, host: &str, port: u16) -> bool {
        self.injections.iter().any(|i| i.target.host_is(host, port))
            || self.rules.iter().any(|r| r.target.host_is(host, port))
    }

    /// A TLS client configuration for upstream connections, trusting the
    /// configured roots. The proxy makes one and keeps it, so that its
    /// session cache (rustls's default, in memory) lets later connections
    /// to an upstream resume instead of repeating the full handshake.
    pub(crate) fn upstream_config(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        let mut config =
            rustls::ClientConfig::builder_with_provider(Arc::clone(&self.authority.provider))
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(Arc::clone(&self.upstream_roots))
                .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// The decision for one request to `host:port`.
    pub(crate) fn decide(&self, host: &str, port: u16, method: &str, target: &str) -> Decision {
        // Methods are case-sensitive (RFC 9110) and rules name them in
        // upper case, but servers such as Django, Werkzeug and cheroot
        // upper-case the one they get: `delete` would be DELETE to them,
        // past a deny rule that names DELETE.
        if method.bytes().any(|b| b.is_ascii_lowercase()) {
            return Decision::Refuse {
                rule: "method".into(),
                why: format!(
                    "the method `{}` is not in upper case",
                    method.escape_debug()
                ),
            };
        }
        let path = match request_path(target) {
            Ok(p) => p,
            Err(why) => {
                return Decision::Refuse {
                    rule: "path".into(),
                    why,
                }
            }
        };
        let rules: Vec<&RequestRule> = self
            .rules
            .iter()
            .filter(|r| r.target.host_is(host, port))
            .collect();
        if let Some(r) = rules
            .iter()
            .find(|r| !r.allow && r.target.covers(method, &path))
        {
            return Decision::Refuse {
                rule: r.label.clone(),
                why: format!("{method} {path} on {host} is refused by {}", r.label),
            };
        }
        let mut rule = String::new();
        if rules.iter().any(|r| r.allow) {
            match rules
                .iter()
                .find(|r| r.allow && r.target.matches(method, &path))
            {
                Some(r) => rule = r.label.clone(),
                None => {
                    return Decision::Refuse {
                        rule: "net.rules".into(),
                        why: format!(
                            "{method} {path} on {host} matches no allow rule in net.rules"
                        ),
                    }
                }
            }
        }
        let mut strip = Vec::new();
        let mut set = Vec::new();
        for i in self
            .injections
            .iter()
            .filter(|i| i.target.host_is(host, port))
        {
            strip.push(i.header.clone());
            if i.target.matches(method, &path) && !REFLECTING.contains(&method) {
                set.push(i.clone());
            }
        }
        Decision::Forward {
            rule,
            path,
            strip,
            set,
        }
    }
}

/// Methods whose answer is the request itself, headers included: TRACE
/// (Apache httpd answers it unless told not to) and IIS's TRACK. A
/// credential is never set on them, whatever its methods say: the server
/// would hand it back to the command (RFC 9110, 9.3.8: a client should
/// not send sensitive fields on TRACE). The command's header is still
/// removed.
const REFLECTING: &[&str] = &["TRACE", "TRACK"];

/// What happens to one request.
pub(crate) enum Decision {
    Refuse {
        rule: String,
        why: String,
    },
    Forward {
        /// The allow rule that admitted it (empty: no rules).
        rule: String,
        /// The decoded path (for the audit).
        path: String,
        /// Headers removed from what the client sent.
        strip: Vec<String>,
        /// Headers set.
        set: Vec<Injection>,
    },
}

impl Decision {
    /// Rewrites the client's headers: every managed header the client sent
    /// is dropped, in any spelling a server may read as it (see
    /// [`cgi_same`]), the injected ones added.
    pub(crate) fn apply(&self, headers: &mut Vec<(String, String)>) {
        if let Decision::Forward { strip, set, .. } = self {
            headers.retain(|(n, _)| !strip.iter().any(|s| cgi_same(s, n)));
            for i in set {
                headers.push((i.header.clone(), i.value.expose().to_owned()));
            }
        }
    }
}

/// Whether two header names are one to a server: case aside, and `_` and
/// `-` alike, since CGI-style servers (CGI, WSGI, Puma before
/// CVE-2024-45614's fix) turn both into the same `HTTP_…` key. A command's
/// `X_Api_Key` would otherwise pass beside (or instead of) a credential
/// set as `X-Api-Key`, or where the credential's header is removed.
pub(crate) fn cgi_same(a: &str, b: &str) -> bool {
    let key = |c: u8| {
        if c == b'_' {
            b'-'
        } else {
            c.to_ascii_lowercase()
        }
    };
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| key(x) == key(y))
}

/// The byte a `%XY` escape at `bytes[i]` (a `%`) stands for: exactly two
/// hex digits, else `None`.
pub(crate) fn escape_at(bytes: &[u8], i: usize) -> Option<u8> {
    let hex = bytes.get(i + 1..i + 3)?;
    if !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}

/// The percent-decoded path of an origin-form target (the query cut off),
/// refused when it could be read two ways: not absolute, a fragment, a
/// malformed or encoded `/` escape, an escape left once decoded, a back
/// slash, a control byte, a `;`, or an empty, `.` or `..` segment.
pub(crate) fn request_path(target: &str) -> Result<String, String> {
    // A request target has no fragment (RFC 9112): a server that does not
    // cut it at `#` reads what follows as path, dot segments included.
    if target.contains('#') {
        return Err(format!(
            "the request target \"{}\" holds a fragment (`#`)",
            target.escape_debug()
        ));
    }
    let raw = target.split('?').next().unwrap_or_default();
    let quoted = raw.escape_debug();
    if !raw.starts_with('/') {
        return Err(format!("the request path \"{quoted}\" is not absolute"));
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            match escape_at(bytes, i) {
                Some(b'/') | None => {
                    return Err(format!(
                        "the request path \"{quoted}\" holds an encoded `/` or a malformed escape"
                    ))
                }
                Some(b) => out.push(b),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    // An escape left once decoded (`%252e` is `%2e`) is another path to a
    // server that decodes twice (an nginx passing on `$uri`, an
    // application decoding what its server already decoded): `..` or a
    // deny-listed name to it, neither to the rules.
    if (0..out.len()).any(|i| out[i] == b'%' && escape_at(&out, i).is_some()) {
        return Err(format!(
            "the request path \"{quoted}\" still holds a percent-escape once decoded (a \
             server that decodes twice would read another path)"
        ));
    }
    let path = String::from_utf8(out)
        .map_err(|_| format!("the request path \"{quoted}\" is not UTF-8 once decoded"))?;
    if path.bytes().any(|b| b < b' ' || b == 0x7f || b == b'\\') {
        return Err(format!(
            "the request path \"{quoted}\" holds a back slash or a control character"
        ));
    }
    // Path parameters: servlet containers (Tomcat, Jetty) cut `;…` from
    // each segment before they resolve dot segments, so `/a/..;/b` is `/b`
    // to them and `/a;x` is `/a`, while other servers take `;` literally.
    // No prefix could be judged for both readings.
    if path.contains(';') {
        return Err(format!(
            "the request path \"{quoted}\" holds a `;` (path parameters, which some servers \
             cut before resolving `..`)"
        ));
    }
    let segments: Vec<&str> = path[1..].split('/').collect();
    let last = segments.len() - 1;
    for (n, s) in segments.iter().enumerate() {
        if *s == "." || *s == ".." || (s.is_empty() && n != last) {
            return Err(format!(
                "the request path \"{quoted}\" holds an empty, `.` or `..` segment"
            ));
        }
    }
    Ok(path)
}

/// One request's audit: host, method, path, the rule that decided, and
/// the verdict — never a header's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// The host.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The method.
    pub method: String,
    /// The path, percent-decoded, without its query (or the target as sent
    /// when it could not be decoded).
    pub path: String,
    /// The rule or credential entry that decided (empty: none applied).
    pub rule: String,
    /// What was done.
    pub verdict: Verdict,
    /// The upstream's status code (0 when nothing was forwarded or no
    /// answer came).
    pub status: u16,
}

/// What the proxy did with an intercepted request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Forwarded with a credential set.
    Injected,
    /// Forwarded with the credential header removed (the request is
    /// outside the credential's methods or paths).
    Stripped,
    /// Forwarded; the host carries rules but no credential.
    Forwarded,
    /// Refused by the rules (or its path); nothing was sent upstream.
    Refused,
}

impl Decision {
    pub(crate) fn record(
        &self,
        host: &str,
        port: u16,
        method: &str,
        target: &str,
    ) -> RequestRecord {
        let (rule, path, verdict) = match self {
            Decision::Refuse { rule, .. } => (
                rule.clone(),
                request_path(target)
                    .unwrap_or_else(|_| target.split('?').next().unwrap_or_default().to_owned()),
                Verdict::Refused,
            ),
            Decision::Forward {
                rule,
                path,
                strip,
                set,
            } => {
                let verdict = if !set.is_empty() {
                    Verdict::Injected
                } else if !strip.is_empty() {
                    Verdict::Stripped
                } else {
                    Verdict::Forwarded
                };
                let mut labels: Vec<String> = set.iter().map(|i| i.label.clone()).collect();
                if !rule.is_empty() {
                    labels.insert(0, rule.clone());
                }
                (labels.join(", "), path.clone(), verdict)
            }
        };
        RequestRecord {
            host: host.to_owned(),
            port,
            method: method.to_owned(),
            path,
            rule,
            verdict,
            status: 0,
        }
    }
}

/// The system's trusted roots: the PEM bundle of the first file found
/// among the usual places (`SSL_CERT_FILE` of the host process first).
/// Answers the store and the bundle's text (for the child's bundle).
///
/// # Errors
///
/// When no bundle is found or none of its certificates can be used.
pub fn system_roots() -> Result<(RootCertStore, String), String> {
    let mut candidates: Vec<std::path::PathBuf> = Vec::new();
    if let Some(f) = std::env::var_os("SSL_CERT_FILE") {
        candidates.push(f.into());
    }
    for p in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem",
        "/etc/pki/tls/cacert.pem",
        "/etc/ssl/cert.pem",
    ] {
        candidates.push(p.into());
    }
    for path in candidates {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let store = roots_from_pem(&text);
        if !store.is_empty() {
            return Ok((store, text));
        }
    }
    Err(
        "no system certificate bundle was found (looked at SSL_CERT_FILE and the usual \
         /etc/ssl and /etc/pki places)"
            .into(),
    )
}

/// The certificates of a PEM bundle that can be trust anchors.
pub fn roots_from_pem(pem: &str) -> RootCertStore {
    use rustls::pki_types::pem::PemObject;
    let mut store = RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(pem.as_bytes()).flatten() {
        let _ = store.add(der);
    }
    store
}

/// How much one read of a socket beneath TLS asks for. rustls reads its
/// transport 4 KiB at a time, so each 16 KiB record cost four or five
/// system calls; reading ahead into a buffer makes that one.
const READ_AHEAD: usize = 64 * 1024;

/// Bytes read from a socket and not yet taken: what rustls's small reads
/// are served from. A read never waits for more than the socket has, so
/// nothing is held back from TLS that it could already use.
/// An interrupted read of the socket (a signal of the host) is retried
/// within the socket's timeout ([`crate::conn::read_once`]): rustls's
/// `Acceptor`, which reads the ClientHello, does not retry one itself.
#[derive(Default)]
pub(crate) struct ReadAhead {
    buf: Vec<u8>,
    pos: usize,
    len: usize,
}

impl ReadAhead {
    /// Starts with `pre`, bytes already read from the socket.
    pub(crate) fn with(pre: Vec<u8>) -> ReadAhead {
        let len = pre.len();
        ReadAhead {
            buf: pre,
            pos: 0,
            len,
        }
    }

    fn read(&mut self, src: &TcpStream, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.len {
            if out.len() >= READ_AHEAD {
                return crate::conn::read_once(src, out);
            }
            if self.buf.len() < READ_AHEAD {
                self.buf.resize(READ_AHEAD, 0);
            }
            self.len = crate::conn::read_once(src, &mut self.buf)?;
            self.pos = 0;
        }
        let n = out.len().min(self.len - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The client side of an intercepted connection: the bytes read before
/// TLS began, then the socket (read ahead).
pub(crate) struct Prefixed<'a> {
    pub(crate) ahead: ReadAhead,
    pub(crate) s: &'a TcpStream,
    /// While set (the TLS handshake), when every read must be done by:
    /// each read's timeout is what remains, so a client trickling its
    /// handshake a byte at a time gets no more than the whole. `None`
    /// afterwards: reads wait as the socket's timeout says.
    pub(crate) deadline: Option<Instant>,
}

impl Read for Prefixed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(deadline) = self.deadline {
            crate::conn::read_by(self.s, deadline)?;
        }
        self.ahead.read(self.s, buf)
    }
}

impl Write for Prefixed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        crate::conn::write_once(self.s, buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Completes the TLS handshake with the client as `host` (its
/// ClientHello must name `host`). Answers the TLS stream.
pub(crate) fn accept<'a>(
    authority: &CertAuthority,
    host: &str,
    mut io: Prefixed<'a>,
) -> Result<rustls::StreamOwned<rustls::ServerConnection, Prefixed<'a>>, String> {
    let mut acceptor = rustls::server::Acceptor::default();
    let accepted = loop {
        match acceptor.read_tls(&mut io) {
            Ok(0) => return Err("the client closed before its TLS ClientHello".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("cannot read the TLS ClientHello: {e}")),
        }
        match acceptor.accept() {
            Ok(Some(a)) => break a,
            Ok(None) => {}
            Err((e, _)) => return Err(format!("the TLS ClientHello is malformed: {e}")),
        }
    };
    match accepted.client_hello().server_name() {
        Some(sni) if sni.eq_ignore_ascii_case(host) => {}
        Some(sni) => {
            return Err(format!(
                "the TLS ClientHello names {} but the tunnel is to {host} (domain fronting)",
                sni.escape_debug()
            ))
        }
        None => {
            return Err(format!(
                "the TLS ClientHello names no server; the tunnel is to {host}"
            ))
        }
    }
    let config = authority.server_config(host)?;
    let mut conn = accepted
        .into_connection(config)
        .map_err(|(e, _)| format!("the TLS handshake with the client failed: {e}"))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut io)
            .map_err(|e| format!("the TLS handshake with the client failed: {e}"))?;
    }
    io.deadline = None;
    Ok(rustls::StreamOwned::new(conn, io))
}

/// Opens a TLS connection to the upstream `host` over `sock` with
/// `config` (from [`Intercept::upstream_config`]).
pub(crate) fn connect(
    config: Arc<rustls::ClientConfig>,
    host: &str,
    sock: &Arc<TcpStream>,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, UpSock>, String> {
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| format!("{host} is not a TLS server name"))?;
    let mut conn = rustls::ClientConnection::new(config, name)
        .map_err(|e| format!("cannot start TLS to {host}: {e}"))?;
    let mut io = UpSock(Arc::clone(sock), ReadAhead::default());
    while conn.is_handshaking() {
        conn.complete_io(&mut io)
            .map_err(|e| format!("the TLS handshake with {host} failed: {e}"))?;
    }
    Ok(rustls::StreamOwned::new(conn, io))
}

/// The upstream socket, shared with the proxy's registry (so `stop` can
/// shut it), read ahead.
pub(crate) struct UpSock(pub(crate) Arc<TcpStream>, ReadAhead);

impl Read for UpSock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.1.read(&self.0, buf)
    }
}

impl Write for UpSock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        crate::conn::write_once(&self.0, buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&*self.0).flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes read before TLS come first, then the socket's, in order,
    /// whatever the sizes of the reads; a read answers what the socket has
    /// without waiting for the buffer to fill.
    #[test]
    fn reading_ahead_keeps_every_byte_in_order() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut w = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (r, _) = l.accept().unwrap();
        // A read that waited for more than was sent fails instead of hanging.
        r.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut ahead = ReadAhead::with(b"pre".to_vec());
        // Less than the buffer: answered at once.
        w.write_all(&data[..10]).unwrap();
        let mut got = Vec::new();
        let mut small = [0u8; 7];
        while got.len() < 13 {
            let n = ahead.read(&r, &mut small).unwrap();
            got.extend_from_slice(&small[..n]);
        }
        let writer = std::thread::spawn(move || w.write_all(&data[10..]).map(|()| data));
        let mut big = vec![0u8; READ_AHEAD + 1];
        let mut sizes = [4096usize, 16_384, READ_AHEAD + 1, 1].into_iter().cycle();
        while got.len() < 200_003 {
            let want = sizes.next().unwrap();
            let n = ahead.read(&r, &mut big[..want]).unwrap();
            assert!(n > 0, "the stream ended early");
            got.extend_from_slice(&big[..n]);
        }
        let data = writer.join().unwrap().unwrap();
        assert_eq!(&got[..3], b"pre");
        assert!(got[3..] == data[..], "the bytes came out of order");
    }

    #[test]
    fn paths_decode_or_are_refused() {
        assert_eq!(request_path("/a/b?x=1").unwrap(), "/a/b");
        assert_eq!(request_path("/a/%62").unwrap(), "/a/b");
        assert_eq!(request_path("/a/").unwrap(), "/a/");
        assert_eq!(request_path("/").unwrap(), "/");
        for bad in [
            "a/b",
            "*",
            "/a/../b",
            "/a/./b",
            "/a//b",
            "/a%2fb",
            "/a%2Fb",
            "/a/%2e%2e/b",
            "/a\\b",
            "/a%",
            "/a%zz",
            "/a%00",
            "/a;b",
            "/a/..;/b",
            "/a/%2e%2e%3b/b",
            "/a#/../b",
            "/a/%252e%252e/b",
            "/a/%25%32%65",
        ] {
            assert!(request_path(bad).is_err(), "{bad}");
        }
        assert_eq!(request_path("/a/100%25").unwrap(), "/a/100%");
        assert_eq!(request_path("/a/%25zz").unwrap(), "/a/%zz");
    }

    #[test]
    fn prefixes_match_at_a_boundary() {
        assert!(under("/repos/org", "/repos/org"));
        assert!(under("/repos/org/x", "/repos/org"));
        assert!(under("/repos/org/x", "/repos/org/"));
        assert!(!under("/repos/organization", "/repos/org"));
        assert!(!under("/repos", "/repos/org"));
        assert!(!under("/repos/org.json", "/repos/org"));
        assert!(!under("/REPOS/org", "/repos/org"));
    }

    #[test]
    fn a_deny_prefix_covers_every_reading() {
        for path in [
            "/admin",
            "/admin/",
            "/admin/x",
            "/admin.json",
            "/admin?",
            "/admin ",
            "/admin.",
            "/ADMIN",
            "/adm\u{131}n",
            "/admin~",
        ] {
            assert!(covered(path, "/admin"), "{path}");
            assert!(covered(path, "/admin/"), "{path}");
            assert!(covered(path, "/"), "{path}");
        }
        for path in [
            "/administrators",
            "/admin-x",
            "/admin_x",
            "/adm",
            "/x/admin",
        ] {
            assert!(!covered(path, "/admin"), "{path}");
            assert!(!covered(path, "/admin/"), "{path}");
        }
        assert!(covered("/\u{17f}ecret", "/Secret"));
    }
}
