//! `net.allow` at load: each entry parsed by netguard, restricted mode's
//! refusals applied, and the policy's network rules produced for the
//! mechanisms that enforce them.

use std::path::PathBuf;

use sandgate_netguard::{Mode, NetEntry};

use crate::error::PolicyErrorKind;
use crate::SecurityMode;

impl From<SecurityMode> for Mode {
    fn from(mode: SecurityMode) -> Mode {
        match mode {
            SecurityMode::Restricted => Mode::Restricted,
            SecurityMode::TrustedHost => Mode::TrustedHost,
        }
    }
}

/// The gate rule for one `net.allow` entry: well-formed in every mode,
/// and admitted by restricted mode when `mode` says so (`None`: the mode
/// is unknown because its own key was refused; only the form is checked).
pub(crate) fn gate_entry(
    raw: &str,
    mode: Option<SecurityMode>,
) -> Result<NetEntry, (PolicyErrorKind, String)> {
    let quoted = raw.escape_debug();
    let entry = NetEntry::parse(raw).map_err(|why| {
        (
            PolicyErrorKind::NetEntryMalformed,
            format!("\"{quoted}\" is malformed: {why}"),
        )
    })?;
    if mode == Some(SecurityMode::Restricted) {
        entry.check_restricted().map_err(|why| {
            (
                PolicyErrorKind::NetEntryRefused,
                format!("\"{quoted}\": {why}"),
            )
        })?;
    }
    Ok(entry)
}

/// Where a credential's value is read from when the executor starts: never
/// the policy text itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CredentialSource {
    /// A variable of the host process's environment (`env = "GH_TOKEN"`).
    Env(String),
    /// A file the host process can read (`file = "/run/secrets/gh"`); its
    /// content, with one trailing line break removed.
    File(PathBuf),
}

impl std::fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Shown as every name is: a line feed in either (TOML
            // allows one in a string) would split a refusal or the
            // summary, and add a line of its own.
            CredentialSource::Env(name) => write!(f, "env {}", crate::shown(name)),
            CredentialSource::File(path) => write!(f, "file {}", crate::shown(path)),
        }
    }
}

/// How a credential's value is written into its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CredentialScheme {
    /// `Bearer VALUE`.
    Bearer,
    /// `token VALUE` (GitHub's classic form).
    Token,
    /// `Basic base64(user:VALUE)`.
    Basic,
}

/// One `[[net.credentials]]` entry: the proxy sets `header` on the
/// requests to `host` that match `methods` and `path_prefixes`, and
/// removes it from every other request to that host.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetCredential {
    /// The host name (lower case), exactly; no wildcard, no address.
    pub host: String,
    /// The port, or `None` for any port the grant admits.
    pub port: Option<u16>,
    /// The header name as written (`Authorization` by default).
    pub header: String,
    /// Where the value comes from.
    pub source: CredentialSource,
    /// How the value is written, or `None` for the value as it is.
    pub scheme: Option<CredentialScheme>,
    /// The user of the `basic` scheme.
    pub user: Option<String>,
    /// Methods the injected requests must use (upper case); empty: any.
    pub methods: Vec<String>,
    /// Path prefixes the injected requests must fall under; empty: any.
    pub path_prefixes: Vec<String>,
}

impl NetCredential {
    /// The header's value for the secret `value`, as the scheme writes it.
    pub fn header_value(&self, value: &[u8]) -> Vec<u8> {
        match self.scheme {
            None => value.to_vec(),
            Some(CredentialScheme::Bearer) => [b"Bearer ".as_slice(), value].concat(),
            Some(CredentialScheme::Token) => [b"token ".as_slice(), value].concat(),
            Some(CredentialScheme::Basic) => {
                let user = self.user.as_deref().unwrap_or_default();
                let pair = [user.as_bytes(), b":", value].concat();
                [b"Basic ".as_slice(), base64(&pair).as_bytes()].concat()
            }
        }
    }
}

/// Whether a `[[net.rules]]` entry admits or refuses what it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RuleAction {
    /// Admits the matching requests.
    Allow,
    /// Refuses the matching requests.
    Deny,
}

/// One `[[net.rules]]` entry (see [`crate::Policy::net_request_rules`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetRequestRule {
    /// The host name (lower case), exactly.
    pub host: String,
    /// The port, or `None` for any port.
    pub port: Option<u16>,
    /// Methods matched (upper case); empty: any.
    pub methods: Vec<String>,
    /// Path prefixes matched; empty: any.
    pub path_prefixes: Vec<String>,
    /// Allow or deny.
    pub action: RuleAction,
}

/// Standard base64 with padding (for the `basic` scheme).
fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Headers the proxy manages itself: never a credential's header.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "expect",
    "http2-settings",
];

/// An HTTP header name (an RFC 9110 token) the proxy does not manage.
pub(crate) fn check_header(name: &str) -> Result<(), String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(tchar) {
        return Err(format!(
            "\"{}\" is not an HTTP header name",
            name.escape_debug()
        ));
    }
    if RESERVED_HEADERS
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
    {
        return Err(format!(
            "\"{name}\" is managed by the proxy itself and cannot carry a credential"
        ));
    }
    Ok(())
}

/// A method as the rules match it: upper-case letters.
pub(crate) fn check_method(method: &str) -> Result<(), String> {
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!(
            "\"{}\" is not an upper-case HTTP method (GET, POST, …)",
            method.escape_debug()
        ));
    }
    Ok(())
}

/// A path prefix: absolute, with no query, fragment, percent-escape, back
/// slash or dot segment (the proxy refuses requests whose path holds
/// those, so a prefix holding them could never match honestly).
pub(crate) fn check_prefix(prefix: &str) -> Result<(), String> {
    let quoted = prefix.escape_debug();
    if !prefix.starts_with('/') {
        return Err(format!("\"{quoted}\" does not start with `/`"));
    }
    if prefix
        .bytes()
        .any(|b| b <= b' ' || b == 0x7f || b"?#%\\".contains(&b))
    {
        return Err(format!(
            "\"{quoted}\" holds a space, control character, `?`, `#`, `%` or `\\`"
        ));
    }
    if prefix.split('/').any(|s| s == "." || s == "..") {
        return Err(format!("\"{quoted}\" holds a `.` or `..` segment"));
    }
    Ok(())
}

/// A credential or rule host: one DNS name, exactly (no wildcard, no
/// address, no port), lower-cased.
pub(crate) fn check_host(host: &str) -> Result<String, String> {
    let quoted = host.escape_debug();
    let entry = NetEntry::parse(host).map_err(|why| format!("\"{quoted}\" is malformed: {why}"))?;
    match entry.host() {
        sandgate_netguard::NetHost::Name(name) if entry.port().is_none() => Ok(name.clone()),
        _ => Err(format!(
            "\"{quoted}\" must be one host name (no wildcard, address or port; the port is \
             its own key)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_pads() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"user:pass"), "dXNlcjpwYXNz");
    }
}
