//! The authorizer: an allow-list, a security mode and the plain-text
//! switch, judging a destination before its name is resolved and then
//! each address it resolves to.

use std::net::IpAddr;

use sandgate_codes::ErrorCode;

use crate::class::{classify, AddrClass};
use crate::entry::NetEntry;
use crate::host::Host;

/// How far the rules may reach beyond public addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The default: private, link-local, unspecified, reserved and
    /// multicast addresses are refused whatever name led there; loopback
    /// only through a port-qualified loopback literal.
    #[default]
    Restricted,
    /// The operator's host integrations: every address class but
    /// unspecified, loopback also through a bare loopback literal or a
    /// loopback name.
    TrustedHost,
}

impl Mode {
    /// The mode's name (`"restricted"`, `"trusted_host"`), as messages and
    /// the policy file spell it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Restricted => "restricted",
            Mode::TrustedHost => "trusted_host",
        }
    }
}

/// Which request of a fetch a destination is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hop {
    /// The request the caller asked for (a proxy's every connection).
    First,
    /// The target of a redirect the caller is following: never loopback.
    Redirect,
}

/// The authorizer's answer for one destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetDecision {
    /// Whether the destination may be dialled.
    pub allowed: bool,
    /// Why, in words for a user: which entry admitted it, or what refused it.
    pub reason: String,
    /// The allow-list entry (as written) that matched the host and port.
    /// It is set on a refusal too when an entry matched but the address
    /// was refused; `allowed` alone is the decision.
    pub rule: Option<String>,
}

impl NetDecision {
    fn allow(entry: &NetEntry) -> Self {
        NetDecision {
            allowed: true,
            reason: format!("admitted by net.allow entry `{}`", entry.raw()),
            rule: Some(entry.raw().to_owned()),
        }
    }

    #[cold]
    fn deny(reason: impl Into<String>, rule: Option<&NetEntry>) -> Self {
        NetDecision {
            allowed: false,
            reason: reason.into(),
            rule: rule.map(|e| e.raw().to_owned()),
        }
    }

    /// `OK` when allowed, else `E_NET_DENIED`.
    pub fn code(&self) -> ErrorCode {
        if self.allowed {
            ErrorCode::Ok
        } else {
            ErrorCode::NetDenied
        }
    }
}

/// The network rules: which destinations may be reached, in which mode.
///
/// Build them with [`Rules::new`] (the policy crate produces them from a
/// policy file). They are plain data: cloning is cheap enough for a
/// builder, and judging allocates only the decision's words.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    mode: Mode,
    allow: Vec<NetEntry>,
    allow_http: bool,
}

/// A destination that passed the rules before resolution: the entry that
/// admitted it, and the host and port it was judged as. Check every address
/// the name resolves to with [`Admitted::check`] before connecting to it.
#[derive(Clone, Debug)]
pub struct Admitted<'r> {
    rules: &'r Rules,
    entry: &'r NetEntry,
    host: Host,
    port: u16,
    hop: Hop,
}

impl Rules {
    /// Rules from their parts. `allow` is taken as given, in order (the
    /// first matching entry decides); restricted mode's refusals of
    /// entries ([`NetEntry::check_restricted`]) are the caller's to apply
    /// at load, where they can name the entry. The judging itself never
    /// depends on them: an entry restricted mode would refuse admits
    /// nothing restricted mode refuses.
    pub fn new(mode: Mode, allow: Vec<NetEntry>, allow_http: bool) -> Rules {
        Rules {
            mode,
            allow,
            allow_http,
        }
    }

    /// The security mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The allow-list, in order.
    pub fn allow(&self) -> &[NetEntry] {
        &self.allow
    }

    /// Whether plain-text `http` and `ws` are admitted.
    pub fn allow_http(&self) -> bool {
        self.allow_http
    }

    /// Judges a destination before anything is resolved.
    ///
    /// - `hop`: a first request, or the target of a redirect (loopback is
    ///   then always refused: a loopback literal, a loopback name, or later
    ///   a loopback address, the granted port included, in every mode).
    /// - `scheme`: `https` and `wss` (default port 443); `http` and `ws`
    ///   (default port 80) only with `allow_http`; any other is refused.
    ///   `None` when the protocol is unknown (a `CONNECT` tunnel): `port`
    ///   must then be given, and only the host, port and address rules
    ///   apply, since nothing says whether the tunnel carries plain text.
    /// - `host`: as [`Host::parse`] takes it. Alternate spellings of
    ///   addresses (`0x7f.1`, `2130706433`) are refused.
    /// - `port`: the explicit port, or `None` for the scheme's default.
    ///
    /// For a literal host the address rules apply here too, since the
    /// literal is the address; a name gets them from [`Admitted::check`],
    /// once per resolved address.
    pub fn admit(
        &self,
        hop: Hop,
        scheme: Option<&str>,
        host: &str,
        port: Option<u16>,
    ) -> Result<Admitted<'_>, NetDecision> {
        self.judge(scheme, host, port, None, hop)
    }

    /// Decides in one call whether a request to `scheme://host:port` may be
    /// made, with `resolved_ip` the address about to be dialled (`None`
    /// before resolution): [`Rules::admit`] and then [`Admitted::check`].
    pub fn authorize(
        &self,
        hop: Hop,
        scheme: &str,
        host: &str,
        port: Option<u16>,
        resolved_ip: Option<IpAddr>,
    ) -> NetDecision {
        match self.judge(Some(scheme), host, port, resolved_ip, hop) {
            Ok(admitted) => admitted.decision(),
            Err(denied) => denied,
        }
    }

    /// The scheme, host and port rules, then [`Rules::judge_parsed`].
    fn judge(
        &self,
        scheme: Option<&str>,
        host: &str,
        port: Option<u16>,
        resolved_ip: Option<IpAddr>,
        hop: Hop,
    ) -> Result<Admitted<'_>, NetDecision> {
        let default_port = match scheme.map(str::to_ascii_lowercase).as_deref() {
            None => None,
            Some("https" | "wss") => Some(443),
            Some("http" | "ws") if self.allow_http => Some(80),
            Some("http" | "ws") => {
                return Err(NetDecision::deny(
                    format!(
                        "{} is plain text and net.allow_http is false",
                        quoted(scheme.unwrap_or_default())
                    ),
                    None,
                ))
            }
            Some(_) => {
                return Err(NetDecision::deny(
                    format!(
                        "the scheme \"{}\" is not admitted (https, wss; http and ws with \
                         net.allow_http)",
                        quoted(scheme.unwrap_or_default())
                    ),
                    None,
                ))
            }
        };
        let Some(req) = Host::parse(host) else {
            return Err(NetDecision::deny(
                format!(
                    "\"{}\" is neither a valid DNS name nor an IP literal",
                    quoted(host)
                ),
                None,
            ));
        };
        let Some(port) = port.or(default_port) else {
            return Err(NetDecision::deny(
                "a destination without a scheme must name its port",
                None,
            ));
        };
        if port == 0 {
            return Err(NetDecision::deny("port 0 is not a destination", None));
        }
        let entry = self.judge_parsed(&req, port, resolved_ip, hop)?;
        Ok(Admitted {
            rules: self,
            entry,
            host: req,
            port,
            hop,
        })
    }

    /// The rules that need the host parsed and the port known: loopback
    /// on a redirect, a literal dialled as another address, the allow-list,
    /// and the address classes. Returns the entry that admitted the
    /// destination.
    fn judge_parsed(
        &self,
        req: &Host,
        port: u16,
        resolved_ip: Option<IpAddr>,
        hop: Hop,
    ) -> Result<&NetEntry, NetDecision> {
        let resolved_loopback = resolved_ip.is_some_and(|ip| classify(ip) == AddrClass::Loopback);
        if hop == Hop::Redirect && (req.is_loopback() || resolved_loopback) {
            return Err(NetDecision::deny(
                "a redirect to loopback is always refused, the granted port included",
                None,
            ));
        }
        if let (Host::Ip(literal), Some(resolved)) = (req, resolved_ip) {
            if *literal != resolved {
                return Err(NetDecision::deny(
                    format!("the literal host {literal} was dialled as {resolved}"),
                    None,
                ));
            }
        }
        let Some(entry) = self.allow.iter().find(|e| e.admits(req, port)) else {
            return Err(NetDecision::deny(
                format!("`{req}` port {port} is not in net.allow"),
                None,
            ));
        };
        if let Some(ip) = resolved_ip.or(req.ip()) {
            let class = classify(ip);
            if class == AddrClass::Loopback {
                if !entry.grants_loopback(self.mode) {
                    return Err(NetDecision::deny(
                        format!(
                            "{ip} is a loopback address; only a port-qualified loopback literal in \
                             net.allow (`127.0.0.1:PORT`, `[::1]:PORT`) reaches loopback"
                        ),
                        Some(entry),
                    ));
                }
            } else if class == AddrClass::Unspecified
                || (self.mode == Mode::Restricted && class.refused_in_restricted())
            {
                return Err(NetDecision::deny(
                    format!(
                        "{ip} is {}, refused in {} mode whatever the name",
                        class.describe(),
                        self.mode.as_str()
                    ),
                    Some(entry),
                ));
            }
        }
        Ok(entry)
    }
}

impl Admitted<'_> {
    /// The host as judged: a lowercased name to resolve, or a literal.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The port, the scheme's default filled in.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The entry that admitted the destination.
    pub fn entry(&self) -> &NetEntry {
        self.entry
    }

    /// The decision that admitted the destination (as yet without a
    /// resolved address).
    pub fn decision(&self) -> NetDecision {
        NetDecision::allow(self.entry)
    }

    /// Judges one address the host resolved to (for a literal, the address
    /// the connection is about to use): the address classes, loopback
    /// through an entry that grants it, never loopback on a redirect, and a
    /// literal only as itself. Check every address before dialling any: a
    /// name that answers with an internal address is a rebinding attempt,
    /// not a fallback.
    pub fn check(&self, ip: IpAddr) -> NetDecision {
        match self
            .rules
            .judge_parsed(&self.host, self.port, Some(ip), self.hop)
        {
            Ok(entry) => NetDecision::allow(entry),
            Err(denied) => denied,
        }
    }
}

/// The longest host or scheme a reason quotes whole: a DNS name is at
/// most 253 bytes, so every valid one is shown as it is.
const QUOTED_WHOLE: usize = 255;

/// `text` as a reason quotes it: escaped, and past [`QUOTED_WHOLE`] bytes
/// cut to its first 100 and `…`, so that a host or scheme of a long URL
/// (or a proxy's request line) is not carried into every message whole.
fn quoted(text: &str) -> String {
    sandgate_codes::quoted(text, QUOTED_WHOLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(mode: Mode, allow: &[&str], allow_http: bool) -> Rules {
        let allow = allow.iter().map(|e| NetEntry::parse(e).unwrap()).collect();
        Rules::new(mode, allow, allow_http)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn admit_then_check_each_address() {
        let r = rules(Mode::Restricted, &["api.example.com"], false);
        let a = r
            .admit(Hop::First, Some("https"), "API.example.com", None)
            .unwrap();
        assert_eq!(a.host(), &Host::Name("api.example.com".into()));
        assert_eq!(a.port(), 443);
        assert!(a.decision().allowed);
        assert!(a.check(ip("93.184.216.34")).allowed);
        let d = a.check(ip("169.254.169.254"));
        assert!(!d.allowed);
        assert!(d.reason.contains("link-local"), "{}", d.reason);
        assert_eq!(d.rule.as_deref(), Some("api.example.com"));
        assert!(!a.check(ip("127.0.0.1")).allowed);
        assert!(!a.check(ip("::ffff:10.0.0.1")).allowed);
    }

    #[test]
    fn admit_refuses_before_resolution() {
        let r = rules(Mode::Restricted, &["api.example.com:443"], false);
        assert!(r
            .admit(Hop::First, Some("https"), "api.example.com", Some(8443))
            .is_err());
        assert!(r.admit(Hop::First, Some("https"), "0x7f.1", None).is_err());
        assert!(r
            .admit(Hop::First, Some("http"), "api.example.com", None)
            .is_err());
        assert!(r
            .admit(Hop::First, Some("gopher"), "api.example.com", None)
            .is_err());
        assert!(r
            .admit(Hop::First, Some("https"), "other.example.com", None)
            .is_err());
    }

    #[test]
    fn tunnel_without_scheme_needs_a_port() {
        let r = rules(
            Mode::Restricted,
            &["api.example.com:443", "10.0.0.1:22"],
            false,
        );
        let d = r
            .admit(Hop::First, None, "api.example.com", None)
            .unwrap_err();
        assert!(d.reason.contains("port"), "{}", d.reason);
        assert!(r
            .admit(Hop::First, None, "api.example.com", Some(443))
            .is_ok());
        assert!(r
            .admit(Hop::First, None, "api.example.com", Some(80))
            .is_err());
        // A private literal is refused at admission: it is its own address.
        let d = r.admit(Hop::First, None, "10.0.0.1", Some(22)).unwrap_err();
        assert_eq!(d.rule.as_deref(), Some("10.0.0.1:22"));
    }

    #[test]
    fn literal_is_only_itself() {
        let r = rules(Mode::TrustedHost, &["203.0.113.7"], false);
        let a = r
            .admit(Hop::First, Some("https"), "203.0.113.7", None)
            .unwrap();
        assert!(a.check(ip("203.0.113.7")).allowed);
        assert!(!a.check(ip("203.0.113.8")).allowed);
    }

    #[test]
    fn redirect_admission_never_reaches_loopback() {
        let r = rules(Mode::TrustedHost, &["localhost", "api.example.com"], true);
        assert!(r
            .admit(Hop::First, Some("http"), "localhost", Some(80))
            .is_ok());
        assert!(r
            .admit(Hop::Redirect, Some("http"), "localhost", Some(80))
            .is_err());
        let a = r
            .admit(Hop::Redirect, Some("https"), "api.example.com", None)
            .unwrap();
        assert!(!a.check(ip("127.0.0.1")).allowed);
        assert!(a.check(ip("93.184.216.34")).allowed);
    }

    #[test]
    fn two_steps_agree_with_one_call() {
        let r = rules(
            Mode::Restricted,
            &["api.example.com", "127.0.0.1:7655", "*.svc.example"],
            true,
        );
        let hosts = ["api.example.com", "127.0.0.1", "a.svc.example", "localhost"];
        let addrs = ["93.184.216.34", "127.0.0.1", "10.0.0.1", "::1", "0.0.0.0"];
        for hop in [Hop::First, Hop::Redirect] {
            for host in hosts {
                for port in [None, Some(7655)] {
                    for addr in addrs {
                        let one = r.authorize(hop, "http", host, port, Some(ip(addr)));
                        let admitted = r.admit(hop, Some("http"), host, port);
                        if let Ok(a) = admitted {
                            assert_eq!(a.check(ip(addr)), one, "{host} {port:?} {addr}");
                        } else {
                            assert!(!one.allowed, "{host} {port:?} {addr}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fetch27_a_long_host_or_scheme_is_quoted_by_its_start() {
        let rules = Rules::new(Mode::Restricted, Vec::new(), false);
        let long = "a".repeat(30_000);
        for (scheme, host, says) in [
            (
                "https",
                format!("{long}.example"),
                "is neither a valid DNS name",
            ),
            (long.as_str(), "a.example".to_owned(), "is not admitted"),
        ] {
            let d = rules.authorize(Hop::First, scheme, &host, None, None);
            assert!(!d.allowed);
            assert!(d.reason.contains(says), "{}", &d.reason[..200]);
            assert!(d.reason.len() < 300, "{} bytes", d.reason.len());
            assert!(d.reason.contains(&format!("\"{}…\"", "a".repeat(100))));
        }
        // A name of the longest a name may be is quoted whole; controls
        // are escaped.
        let name = format!("{}.x", "b".repeat(251));
        let d = rules.authorize(Hop::First, "https", &format!("{name}!"), None, None);
        assert!(d.reason.contains(&format!("\"{name}!\"")), "{}", d.reason);
        let d = rules.authorize(Hop::First, "https", "a\u{1b}[31m", None, None);
        assert!(d.reason.contains("\"a\\u{1b}[31m\""), "{}", d.reason);
    }
}
