//! The one error type of this crate: a refused policy file.

use std::io;

use sandgate_codes::ErrorCode;

/// Why a policy file was refused.
///
/// Every refusal maps to [`ErrorCode::Policy`]; the kind says which rule
/// refused it, for callers and tests that need to tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyErrorKind {
    /// The policy file could not be read.
    Read,
    /// The file is not UTF-8 or not valid TOML.
    Syntax,
    /// A key (or a table) is defined twice.
    DuplicateKey,
    /// A key the policy format does not have.
    UnknownKey,
    /// A value of the wrong TOML type (a string where a number belongs, …).
    WrongType,
    /// A value of the right type that is not one of the admitted values or
    /// is out of its range (an unknown `confine` word, a zero byte cap, a
    /// timeout over 24 h, a relative shell).
    InvalidValue,
    /// A read or write root does not exist (or cannot be resolved).
    RootMissing,
    /// A read or write root exists but is not a directory.
    RootNotDirectory,
    /// The write root contains the policy file's own directory, so an agent
    /// could rewrite the policy that confines it.
    WriteRootContainsPolicy,
    /// A `[budgets]` entry for a capability the policy does not grant.
    BudgetWithoutCapability,
    /// A `process_allow` entry that restricted mode does not admit, or one
    /// that cannot work as configured.
    ProcessNotAllowed,
    /// A `net.allow` entry that is not a well-formed `host`, `host:PORT`,
    /// `*.suffix` or bracketed IPv6 form (refused in every mode).
    NetEntryMalformed,
    /// A well-formed `net.allow` entry that restricted mode refuses: a bare
    /// loopback, a loopback name, or a private, link-local, unspecified,
    /// broadcast or multicast literal.
    NetEntryRefused,
}

/// A policy file refused at load, naming the key where there is one.
///
/// Displayed as ``policy key `fs.write_root`: <message>`` or, when no key
/// is to blame (an unreadable file, a syntax error outside any key),
/// `policy: <message>`. Messages never contain a host absolute path other
/// than the policy's own configured roots.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", prefix(.key))]
pub struct PolicyError {
    key: Option<String>,
    message: String,
    kind: PolicyErrorKind,
    #[source]
    source: Option<io::Error>,
}

fn prefix(key: &Option<String>) -> String {
    match key {
        Some(key) => format!("policy key `{key}`"),
        None => "policy".to_owned(),
    }
}

impl PolicyError {
    #[cold]
    pub(crate) fn new(
        kind: PolicyErrorKind,
        key: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        PolicyError {
            key,
            message: message.into(),
            kind,
            source: None,
        }
    }

    #[cold]
    pub(crate) fn at(
        kind: PolicyErrorKind,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(kind, Some(key.into()), message)
    }

    #[cold]
    pub(crate) fn read(err: io::Error) -> Self {
        PolicyError {
            key: None,
            message: format!("cannot read the policy file: {err}"),
            kind: PolicyErrorKind::Read,
            source: Some(err),
        }
    }

    /// The dotted key that was refused (`fs.max_read_bytes`, `exec.bogus`,
    /// `net.allow[2]`), if one is to blame.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// What was refused and why, without the key prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Which rule refused the policy.
    pub fn kind(&self) -> PolicyErrorKind {
        self.kind
    }

    /// The SPEC §8 code: always [`ErrorCode::Policy`].
    pub fn code(&self) -> ErrorCode {
        ErrorCode::Policy
    }
}
