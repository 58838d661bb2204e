//! The few URL rules a confined client needs, applied to the text as
//! given.
//!
//! The host is taken verbatim from the URL (never normalized the way a
//! WHATWG parser would turn `0x7f.1` or `2130706433` into `127.0.0.1`), so
//! the authorizer judges the spelling that was written and refuses the
//! ones that alias addresses. The same text is what a client sends and
//! what a pinning resolver compares against, so there is one host, not
//! two parsers' readings of it.

use std::fmt;

/// Why a URL (or a redirect's `Location`) is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct UrlError {
    reason: String,
}

impl From<&str> for UrlError {
    #[cold]
    fn from(reason: &str) -> UrlError {
        UrlError {
            reason: reason.to_owned(),
        }
    }
}

impl From<String> for UrlError {
    #[cold]
    fn from(reason: String) -> UrlError {
        UrlError { reason }
    }
}

/// The longest URL taken, in bytes: 32 KiB. Servers refuse far shorter
/// ones (a request line of 8 or 16 KiB is a common limit), and the HTTP
/// client refuses a URI of 64 KiB; a longer one is a mistake or a flood,
/// and would only be carried into every message.
pub const MAX_URL_BYTES: usize = 32 * 1024;

/// An absolute URL split into the parts a client uses:
/// `scheme://host[:port][/path][?query]`, the fragment dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    scheme: String,
    host: String,
    port: Option<u16>,
    path: String,
}

impl Target {
    /// The scheme, lowercased (`https`).
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The host as written: a name, an IPv4 literal or a bracketed IPv6
    /// literal (or anything else, for the authorizer to refuse).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The explicit port, if the URL names one.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Path and query (at least `/`), without the fragment.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The port the connection goes to: the explicit one, else 80 for
    /// `http` and 443 for anything else.
    pub fn effective_port(&self) -> u16 {
        self.port.unwrap_or(match self.scheme.as_str() {
            "http" => 80,
            _ => 443,
        })
    }

    /// `(scheme, host, port)`, case-folded: what a redirect must keep to be
    /// same-origin.
    pub fn origin(&self) -> (String, String, u16) {
        (
            self.scheme.clone(),
            self.host.to_ascii_lowercase(),
            self.effective_port(),
        )
    }

    fn authority(&self) -> String {
        match self.port {
            Some(port) => format!("{}:{port}", self.host),
            None => self.host.clone(),
        }
    }

    /// Resolves a `Location` header against this URL, as RFC 3986 (5.2)
    /// resolves a reference: the path's `.` and `..` segments removed, so
    /// the next hop asks for the URL any other client would.
    pub fn join(&self, location: &str) -> Result<Target, UrlError> {
        let mut next = self.merge(location)?;
        let (path, query) = match next.path.find('?') {
            Some(i) => next.path.split_at(i),
            None => (next.path.as_str(), ""),
        };
        next.path = format!("{}{query}", remove_dot_segments(path));
        Ok(next)
    }

    /// The reference made absolute against this URL, dot segments kept.
    fn merge(&self, location: &str) -> Result<Target, UrlError> {
        check_chars(location)?;
        if has_scheme(location) {
            return Target::parse(location);
        }
        let absolute = if location.starts_with("//") {
            format!("{}:{location}", self.scheme)
        } else if location.starts_with('/') {
            format!("{}://{}{location}", self.scheme, self.authority())
        } else if location.starts_with('?') {
            let path = self.path.split('?').next().unwrap_or("/");
            format!("{}://{}{path}{location}", self.scheme, self.authority())
        } else if location.is_empty() || location.starts_with('#') {
            self.to_string()
        } else {
            let path = self.path.split('?').next().unwrap_or("/");
            let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
            let dir = if dir.is_empty() { "/" } else { dir };
            format!("{}://{}{dir}{location}", self.scheme, self.authority())
        };
        Target::parse(&absolute)
    }

    /// Parses an absolute `scheme://host[:port][/path][?query][#fragment]`
    /// of at most [`MAX_URL_BYTES`].
    pub fn parse(url: &str) -> Result<Target, UrlError> {
        if url.len() > MAX_URL_BYTES {
            return Err(format!(
                "a URL of {} bytes, over the {MAX_URL_BYTES} a URL may have",
                url.len()
            )
            .into());
        }
        check_chars(url)?;
        if !has_scheme(url) {
            return Err("not an absolute URL (`https://host/path`)".into());
        }
        let (scheme, rest) = url.split_once(':').unwrap_or((url, ""));
        let Some(rest) = rest.strip_prefix("//") else {
            return Err("the scheme must be followed by `//` and a host".into());
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(
                "credentials in the URL are not accepted (send an Authorization header)".into(),
            );
        }
        let (host, port) = split_host_port(authority)?;
        let tail = tail.split('#').next().unwrap_or("");
        let path = if tail.starts_with('/') {
            tail.to_owned()
        } else {
            format!("/{tail}")
        };
        Ok(Target {
            scheme: scheme.to_ascii_lowercase(),
            host: host.to_owned(),
            port,
            path,
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.authority(), self.path)
    }
}

/// RFC 3986's `remove_dot_segments` on an absolute path: `.` segments
/// dropped, each `..` dropping the segment before it (never past the
/// root), a trailing `.` or `..` leaving the path ending in `/`.
fn remove_dot_segments(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (n, segment) in segments.iter().enumerate() {
        let last = n + 1 == segments.len();
        match *segment {
            "." => {}
            ".." => {
                out.pop();
            }
            other => {
                out.push(other);
                continue;
            }
        }
        if last {
            out.push("");
        }
    }
    format!("/{}", out.join("/"))
}

fn check_chars(url: &str) -> Result<(), UrlError> {
    if url
        .bytes()
        .any(|b| b <= b' ' || b == 0x7f || b == b'\\' || !b.is_ascii())
    {
        return Err(
            "the URL holds a space, a control character, a backslash or a non-ASCII \
             character (percent-encode them; international names in their xn-- form)"
                .into(),
        );
    }
    Ok(())
}

/// `scheme:` at the start, as RFC 3986 spells a scheme.
fn has_scheme(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once(':') else {
        return false;
    };
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), UrlError> {
    let (host, port) = if authority.starts_with('[') {
        let close = authority
            .find(']')
            .ok_or("an opening `[` without a closing `]`")?;
        let (host, after) = authority.split_at(close + 1);
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return Err("unexpected text after `]`".into()),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    // Outside brackets a host holds no colon: `::1:80` would otherwise end
    // at the last one, a guess (`::1:80` is an address too), and hand the
    // rules a literal that no client reads as such, and a resolver a
    // "name" that is an address.
    if !host.starts_with('[') && host.contains(':') {
        return Err("an IPv6 address in a URL is written in brackets (`http://[::1]:80/`)".into());
    }
    if host.is_empty() {
        return Err("the URL has no host".into());
    }
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => Some(
            p.parse::<u16>()
                .map_err(|_| UrlError::from(format!("the port `{p}` is over 65535")))?,
        ),
        Some(p) => return Err(format!("the port `{p}` is not a decimal number").into()),
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    #[test]
    fn parses_hosts_verbatim() {
        let a = t("HTTPS://Example.COM:8443/a/b?q=1#frag");
        assert_eq!(a.scheme, "https");
        assert_eq!(a.host, "Example.COM");
        assert_eq!(a.port, Some(8443));
        assert_eq!(a.path, "/a/b?q=1");
        assert_eq!(t("http://0x7f.1/").host, "0x7f.1");
        assert_eq!(t("http://2130706433").host, "2130706433");
        assert_eq!(t("http://2130706433").path, "/");
        let v6 = t("http://[::ffff:127.0.0.1]:80/x");
        assert_eq!(
            (v6.host.as_str(), v6.port),
            ("[::ffff:127.0.0.1]", Some(80))
        );
        assert_eq!(t("https://h?x").path, "/?x");
    }

    #[test]
    fn refuses_malformed() {
        for bad in [
            "example.com/x",
            "https:example.com",
            "https:/example.com",
            "https://user:pw@example.com/",
            "https://good.com@evil.com/",
            "https://exa mple.com/",
            "https://example.com\\@evil.com/",
            "https://ex\u{e4}mple.com/",
            "https://:443/",
            "https://h:/",
            "https://h:99999/",
            "https://h:+1/",
            "https://[::1/",
            "https://[::1]x/",
            "https://::1/",
            "https://::1:443/",
            "https://2001:db8::1:443/",
            "https://::ffff:127.0.0.1:80/",
            "https://h/\n",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn joins_locations() {
        let base = t("https://a.example:8443/dir/page?x=1");
        assert_eq!(
            base.join("/other").unwrap().to_string(),
            "https://a.example:8443/other"
        );
        assert_eq!(
            base.join("next").unwrap().to_string(),
            "https://a.example:8443/dir/next"
        );
        assert_eq!(
            base.join("?y=2").unwrap().to_string(),
            "https://a.example:8443/dir/page?y=2"
        );
        assert_eq!(
            base.join("//b.example/z").unwrap().to_string(),
            "https://b.example/z"
        );
        assert_eq!(
            base.join("http://0x7f.1:80/").unwrap().host,
            "0x7f.1".to_owned()
        );
        assert_eq!(base.join("#f").unwrap(), base);
        for (location, path) in [
            ("../x", "/x"),
            ("./x", "/dir/x"),
            (".", "/dir/"),
            ("..", "/"),
            ("../../../x/./y/../z?q=../a", "/x/z?q=../a"),
            ("/a//../b", "/a/b"),
            ("/a/b/..", "/a/"),
            ("https://b.example/a/%2e%2e/b", "/a/%2e%2e/b"),
        ] {
            assert_eq!(base.join(location).unwrap().path, path, "{location}");
        }
        assert!(base.join("http:evil").is_err());
    }
}
