//! The child's environment: a fixed allowlist, minus everything
//! credential-shaped, plus what the operator chose to inherit.
//!
//! The threat is accidental exfiltration: an agent's shell command printing
//! `env`, or a tool it runs forwarding the parent's provider keys. So the
//! child starts from nothing and gets only the variables a shell needs to
//! behave (`HOME`, `PATH`, locale, …), and even those are dropped when their
//! name looks like a credential. The operator can forward more names with
//! `env_inherit` — credentials included, since that is an explicit choice.
//!
//! [`EnvPlan`] also remembers every credential-shaped host variable the
//! child did *not* get, with its value, so that output redaction
//! ([`crate::redact`]) can hide those values if the child finds them some
//! other way (a config file, `/proc`).
//!
//! This is defence in depth, not a boundary: the child runs as the same user
//! and can read whatever that user can read.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;

use sha2::{Digest, Sha256};

use crate::redact::Redactor;

/// The host variables a child may receive by default, unless their name is
/// credential-shaped (none of these is, but the rule is applied anyway).
pub const BASE_ALLOWLIST: [&str; 11] = [
    "HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TEMP", "TERM", "TMP", "TMPDIR", "USER",
];

/// Whole `_`/`-`-separated segments that make a name credential-shaped.
const SEGMENTS: [&str; 23] = [
    "KEY",
    "KEYS",
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "APIKEY",
    "PAT",
    "DSN",
    "WEBHOOK",
    "COOKIE",
    "PRIVATE",
    "AUTH",
    "BEARER",
    "SESSION",
    "PASSPHRASE",
    "JWT",
];

/// Substrings that make a name credential-shaped wherever they occur, so
/// that camelCase names (`clientSecret`, `accessKeyId`) are caught too.
/// Upper case: names are compared after folding.
const SUBSTRINGS: [&str; 16] = [
    "APIKEY",
    "API_KEY",
    "ACCESSKEY",
    "ACCESS_KEY",
    "PRIVATEKEY",
    "PRIVATE_KEY",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTHTOKEN",
    "AUTH_TOKEN",
    "ACCESSTOKEN",
    "REFRESHTOKEN",
    "IDTOKEN",
];

/// Whole names that point at credentials without looking like one.
const EXACT: [&str; 6] = [
    "SSH_AUTH_SOCK",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "KUBECONFIG",
    "DOCKER_CONFIG",
    "NETRC",
];

/// Cloud-provider prefixes: everything under them is withheld.
const PREFIXES: [&str; 5] = ["AWS_", "AZURE_", "GOOGLE_", "GCP_", "ARM_CLIENT"];

/// Names the shell sets itself that would otherwise hit the `PWD` segment.
/// Matched case-sensitively: only the spelling the shell uses is exempt.
const NOT_CREDENTIALS: [&str; 2] = ["PWD", "OLDPWD"];

/// Whether `name` is credential-shaped.
///
/// Case-insensitively, a name is credential-shaped when any of its `_`/`-`
/// separated segments is one of KEY, KEYS, TOKEN, TOKENS, SECRET, SECRETS,
/// PASSWORD, PASSWD, PASS, PWD, CREDENTIAL, CREDENTIALS, APIKEY, PAT, DSN,
/// WEBHOOK, COOKIE, PRIVATE, AUTH, BEARER, SESSION, PASSPHRASE, JWT; or it
/// contains apikey, api_key, accesskey, access_key, privatekey,
/// private_key, secret, password, passwd, passphrase, credential,
/// authtoken, auth_token, accesstoken, refreshtoken or idtoken; or it is
/// SSH_AUTH_SOCK, GIT_ASKPASS,
/// SSH_ASKPASS, KUBECONFIG, DOCKER_CONFIG or NETRC; or it starts with AWS_,
/// AZURE_, GOOGLE_, GCP_ or ARM_CLIENT. The exact names `PWD` and `OLDPWD`
/// (in that case) are not credentials.
///
/// Segments are split at `_` and `-`, and the words of a camelCase name
/// (split where an ASCII lower-case letter meets an upper-case one) are
/// segments too: `githubToken` is credential-shaped (its word `Token`),
/// and so is `MAX_OUTPUT_TOKENS` (fail closed), while `TOKENIZER` is not.
///
/// Case folding: the rules are checked against the ASCII upper-case form of
/// the name and, when different, against its full Unicode folding
/// (lower-case, then upper-case), so that look-alikes such as `ſecret`
/// (long s) or the Kelvin sign are caught too; either match is enough.
pub fn is_credential_name(name: &str) -> bool {
    if NOT_CREDENTIALS.contains(&name) {
        return false;
    }
    let ascii = name.to_ascii_uppercase();
    if shaped(&ascii) {
        return true;
    }
    // camelCase words are segments too (`githubToken`, `sessionToken`):
    // a credential named in camelCase is still a credential, and failing
    // closed on a name like `passEnv` is the safe direction.
    if camel_segments(name).any(|seg| SEGMENTS.contains(&seg.to_ascii_uppercase().as_str())) {
        return true;
    }
    let folded = name.to_lowercase().to_uppercase();
    folded != ascii && shaped(&folded)
}

/// The words of a name split at `_`, `-` and lower-to-upper case changes
/// (`githubToken` gives `github`, `Token`).
fn camel_segments(name: &str) -> impl Iterator<Item = &str> {
    name.split(['_', '-']).flat_map(|part| {
        let mut cuts = vec![0];
        let b = part.as_bytes();
        for i in 1..b.len() {
            if b[i - 1].is_ascii_lowercase() && b[i].is_ascii_uppercase() {
                cuts.push(i);
            }
        }
        cuts.push(b.len());
        cuts.windows(2)
            .map(move |w| &part[w[0]..w[1]])
            .collect::<Vec<_>>()
    })
}

/// The rules, on an upper-cased name.
fn shaped(upper: &str) -> bool {
    upper.split(['_', '-']).any(|seg| SEGMENTS.contains(&seg))
        || SUBSTRINGS.iter().any(|sub| upper.contains(sub))
        || EXACT.contains(&upper)
        || PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
}

/// The password of `value` when it is a URL carrying one
/// (`postgres://app:pw@db/app`, `http://user:pw@proxy:3128`): after
/// `scheme://`, a user part (no `/`, `?` or `#` in it) and a `:`, the bytes
/// up to the last `@` of the URL, which ends where output redaction ends
/// one (a space, a control byte, `"`, `<`, `>`). A person writes `/`, `?`,
/// `#` and `@` unencoded in a password (`postgres://app:pa/ss@db/x`,
/// `https://u:p@ss@host/`), so the last `@` ends it, not the first `/`: no
/// part of it is left out, even if a path holding an `@` makes more of the
/// URL a password. `None` for a URL without a password
/// (`https://user@host/`, `http://host:8080/x`) and for what is no URL.
pub fn url_password(value: &[u8]) -> Option<&[u8]> {
    let sep = value.windows(3).position(|w| w == b"://")?;
    let scheme = &value[..sep];
    if !scheme.first()?.is_ascii_alphabetic()
        || !scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    {
        return None;
    }
    let rest = &value[sep + 3..];
    let url = &rest[..rest
        .iter()
        .position(|&b| crate::redact::url_end(b))
        .unwrap_or(rest.len())];
    let colon = url
        .iter()
        .position(|&b| matches!(b, b':' | b'/' | b'?' | b'#'))?;
    if url[colon] != b':' {
        return None;
    }
    let after = &url[colon + 1..];
    let at = after.iter().rposition(|&b| b == b'@')?;
    let password = &after[..at];
    (!password.is_empty()).then_some(password)
}

/// `bytes` with its `%XX` escapes decoded (a `%` not followed by two hex
/// digits is kept as it is).
fn percent_decoded(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// Whether the host entry `name`=`value` is a credential: its name is
/// credential-shaped ([`is_credential_name`]), or its value is a URL
/// carrying a password ([`url_password`]), whatever the name
/// (`DATABASE_URL`, `REDIS_URI`, `HTTP_PROXY`).
pub fn is_credential(name: &str, value: &OsStr) -> bool {
    is_credential_name(name) || url_password(value.as_encoded_bytes()).is_some()
}

/// Whether `name` can be set in a child's environment at all.
fn settable_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

/// The environment a child gets, and what it was denied.
///
/// Built once per exec from the host environment ([`EnvPlan::build`]).
///
/// `Debug` prints names only, never values.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvPlan {
    /// What the child receives, sorted by name, one entry per name.
    vars: Vec<(String, OsString)>,
    /// Credential-shaped host variables the child does not receive, sorted
    /// by name then value, without duplicates.
    withheld: Vec<(String, OsString)>,
}

impl EnvPlan {
    /// Plans the child environment from `host_env` (typically
    /// [`std::env::vars_os`]) with the default [`BASE_ALLOWLIST`].
    ///
    /// The child receives:
    ///
    /// 1. each [`BASE_ALLOWLIST`] name present in the host, unless
    ///    [`is_credential`] says it is a credential (its name is
    ///    credential-shaped, or its value is a URL carrying a password);
    /// 2. each `env_inherit` name present in the host, credential-shaped or
    ///    not (the operator chose it); names match case-sensitively;
    /// 3. each `extra` pair, set by the executor itself (say a private
    ///    `TMPDIR`), overriding the host value; with a repeated name the
    ///    last pair wins.
    ///
    /// Host entries: when a name occurs more than once the first occurrence
    /// is the one passed (what `getenv(3)` would return). Names that are
    /// not UTF-8 are never passed; values are passed as they are
    /// ([`OsString`], no UTF-8 requirement). Names that cannot be set
    /// (empty, or containing `=` or NUL) and `extra` values containing NUL
    /// are ignored.
    ///
    /// Withheld: every host entry that is a credential ([`is_credential`])
    /// and which the child does not receive with that same value — dropped,
    /// not inherited, overridden by `extra`, or a later duplicate — and,
    /// for a URL carrying a password, that password under the same name,
    /// as written and percent-decoded. A non-UTF-8
    /// name is judged (and reported) by its lossy UTF-8 form, so a
    /// credential under a mangled name is still redacted.
    pub fn build(
        host_env: impl IntoIterator<Item = (OsString, OsString)>,
        env_inherit: &[String],
        extra: &[(String, String)],
    ) -> EnvPlan {
        Self::build_with_base(&BASE_ALLOWLIST, host_env, env_inherit, extra)
    }

    /// Like [`EnvPlan::build`], with `base` in place of [`BASE_ALLOWLIST`].
    ///
    /// Credential-shaped names in `base` are dropped, as in the default
    /// list; only `env_inherit` can forward a credential.
    pub fn build_with_base(
        base: &[&str],
        host_env: impl IntoIterator<Item = (OsString, OsString)>,
        env_inherit: &[String],
        extra: &[(String, String)],
    ) -> EnvPlan {
        // Every credential-shaped host entry, duplicates included: each of
        // their values must be redacted unless passed.
        let mut credentials: Vec<(String, OsString)> = Vec::new();
        // The first occurrence of each UTF-8, settable host name.
        let mut host: BTreeMap<String, OsString> = BTreeMap::new();
        for (name, value) in host_env {
            let name = match name.into_string() {
                Ok(name) => name,
                Err(raw) => {
                    let lossy = raw.to_string_lossy().into_owned();
                    if is_credential(&lossy, &value) {
                        credentials.push((lossy, value));
                    }
                    continue;
                }
            };
            if is_credential(&name, &value) {
                credentials.push((name.clone(), value.clone()));
            }
            if settable_name(&name) {
                host.entry(name).or_insert(value);
            }
        }

        let mut vars: BTreeMap<String, OsString> = BTreeMap::new();
        for &name in base {
            if is_credential_name(name) {
                continue;
            }
            if let Some(value) = host.get(name) {
                if !is_credential(name, value) {
                    vars.insert(name.to_owned(), value.clone());
                }
            }
        }
        for name in env_inherit {
            if let Some(value) = host.get(name.as_str()) {
                vars.insert(name.clone(), value.clone());
            }
        }
        for (name, value) in extra {
            if settable_name(name) && !value.contains('\0') {
                vars.insert(name.clone(), OsString::from(value));
            }
        }

        let mut withheld: Vec<(String, OsString)> = credentials
            .into_iter()
            .filter(|(name, value)| vars.get(name) != Some(value))
            .collect();
        // A URL's password is also redacted on its own, as written and
        // decoded: a command may find it apart from its URL (a `.pgpass`,
        // a config file).
        let passwords: Vec<(String, OsString)> = withheld
            .iter()
            .filter_map(|(name, value)| {
                let password = url_password(value.as_encoded_bytes())?;
                Some((name, password))
            })
            .flat_map(|(name, password)| {
                let decoded = percent_decoded(password);
                [password.to_vec(), decoded]
                    .into_iter()
                    .map(move |bytes| (name.clone(), os_from_bytes(bytes)))
            })
            .collect();
        withheld.extend(passwords);
        withheld.sort();
        withheld.dedup();

        EnvPlan {
            vars: vars.into_iter().collect(),
            withheld,
        }
    }

    /// The variables to set in the child (after clearing its environment),
    /// sorted by name, one entry per name.
    pub fn vars(&self) -> &[(String, OsString)] {
        &self.vars
    }

    /// The value the child receives for `name`, if any.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.vars[i].1.as_os_str())
    }

    /// The names the child receives, sorted (bytewise).
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.vars.iter().map(|(name, _)| name.as_str())
    }

    /// The digest of the names the child receives, reported with each
    /// result so that a change in what a lane inherits is visible.
    ///
    /// Encoding: the names, sorted bytewise, joined by a single `"\n"` (no
    /// trailing newline; no names at all is the empty string), hashed with
    /// SHA-256, written as `"sha256:"` followed by 64 lower-case hex
    /// digits. Values are not part of it.
    pub fn names_digest(&self) -> String {
        names_digest(self.names().map(str::as_bytes))
    }

    /// The credential-shaped host variables the child does not receive,
    /// with their values, sorted by name then value. A name can occur more
    /// than once (duplicate host entries with different values).
    ///
    /// These values are secrets: feed them to a [`Redactor`], never to a
    /// log. For a log, use [`EnvPlan::withheld_names`].
    pub fn withheld(&self) -> &[(String, OsString)] {
        &self.withheld
    }

    /// The names of [`EnvPlan::withheld`], sorted, each once: safe to log.
    pub fn withheld_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.withheld.iter().map(|(n, _)| n.as_str()).collect();
        names.dedup();
        names
    }

    /// A [`Redactor`] for the withheld values (as their raw bytes) and the
    /// well-known token shapes. Use one per output stream.
    pub fn redactor(&self) -> Redactor {
        Redactor::new(
            self.withheld
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_encoded_bytes())),
        )
    }
}

/// Bytes taken as an [`OsString`] (on Unix, any bytes are one).
fn os_from_bytes(bytes: Vec<u8>) -> OsString {
    use std::os::unix::ffi::OsStringExt;
    OsString::from_vec(bytes)
}

/// [`EnvPlan::names_digest`] of `names`, which the caller has sorted
/// bytewise and freed of duplicates.
pub(crate) fn names_digest<'a>(names: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hasher = Sha256::new();
    for (i, name) in names.into_iter().enumerate() {
        if i > 0 {
            hasher.update(b"\n");
        }
        hasher.update(name);
    }
    sandgate_codes::sha256_text(&hasher.finalize().into())
}

impl fmt::Debug for EnvPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvPlan")
            .field("names", &self.names().collect::<Vec<_>>())
            .field("withheld", &self.withheld_names())
            .finish()
    }
}
