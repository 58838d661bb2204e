//! The one error type of the facade, carrying a code from the one table
//! (see `docs/reference/errors.md`), and its conversions from every lower
//! layer's error so that `?` works across them.

use std::fmt;

pub use sandgate_codes::ErrorCode;
use sandgate_fileguard::PatternError;
use sandgate_policy::PolicyError;
use sandgate_shellexec::confine::ConfineError;
use sandgate_shellexec::exec::ExecError;
use sandgate_shellexec::git::GitError;

use crate::relpath::RelPathError;

/// A refused or failed operation: the code, a message naming what was
/// refused and why, and where they apply the root-relative path, the deny
/// pattern that matched, the policy key, the OS error number and the lower
/// layer's error that caused it.
///
/// No message contains a host absolute path of anything outside the roots:
/// paths are root-relative names.
///
/// # Display and causes
///
/// An error made from a lower layer's error (a [`PolicyError`], a
/// [`rootfs::Error`](sandgate_rootfs::Error), an executor or git error, …)
/// keeps that error as its [`source`](std::error::Error::source), so a
/// caller can downcast to it and walk the whole chain. Its `Display` is then
/// only the code (`E_POLICY`), so that a chain printed cause by cause (as
/// `anyhow` or `eyre` do) shows each cause once. An error sandgate raised
/// itself has no source and displays as `E_CODE: message`.
///
/// [`message`](Error::message) is the whole text for a user in either case:
/// the facade's own words, or the cause's text with each of its own causes
/// after it. The CLI, the JSON endpoint, the C ABI and the bindings show it.
#[derive(Debug, thiserror::Error)]
pub struct Error {
    code: ErrorCode,
    // Boxed rather than a String: keeps `Result<T, Error>` small.
    message: Box<str>,
    path: Option<String>,
    pattern: Option<String>,
    key: Option<String>,
    errno: Option<i32>,
    #[source]
    cause: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// The text of `e` followed by the text of each of its causes, joined by
/// `": "`: how a cause chain reads as one message.
pub fn chain_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

impl Error {
    /// A new error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into().into_boxed_str(),
            path: None,
            pattern: None,
            key: None,
            errno: None,
            cause: None,
        }
    }

    /// An error caused by a lower layer's error `cause`, which
    /// [`source`](std::error::Error::source) answers. `message` is the
    /// whole text for a user (it usually repeats the cause's words).
    #[cold]
    pub fn caused_by(
        code: ErrorCode,
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        let mut error = Error::new(code, message);
        error.cause = Some(Box::new(cause));
        error
    }

    /// Attaches the root-relative path the error is about.
    pub fn with_path(mut self, path: impl Into<String>) -> Error {
        self.path = Some(path.into());
        self
    }

    /// Attaches the deny-write pattern that matched.
    pub fn with_pattern(mut self, pattern: impl Into<String>) -> Error {
        self.pattern = Some(pattern.into());
        self
    }

    /// Attaches the policy key that was refused.
    pub fn with_key(mut self, key: impl Into<String>) -> Error {
        self.key = Some(key.into());
        self
    }

    /// Attaches an OS error number.
    pub fn with_errno(mut self, errno: Option<i32>) -> Error {
        self.errno = errno;
        self
    }

    /// The error code (docs/reference/errors.md).
    pub fn code(&self) -> ErrorCode {
        self.code
    }
    /// What was refused and why.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The root-relative path, where there is one.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
    /// The deny-write pattern that matched (`E_FS_PROTECTED`).
    pub fn pattern(&self) -> Option<&str> {
        self.pattern.as_deref()
    }
    /// The policy key that was refused (`E_POLICY`).
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }
    /// The OS error number, where there is one.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }

    #[cold]
    pub(crate) fn denied(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Denied, message)
    }

    #[cold]
    pub(crate) fn request(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Request, message)
    }
}

impl fmt::Display for Error {
    /// `E_CODE: message`, or only `E_CODE` when a cause holds the words
    /// (see [`Error`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.cause.is_some() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

/// `head`, then the text of each cause below `e`, joined by `": "`.
pub(crate) fn with_causes(head: &str, e: &(dyn std::error::Error + 'static)) -> String {
    match e.source() {
        Some(cause) => format!("{head}: {}", chain_message(cause)),
        None => head.to_owned(),
    }
}

impl From<sandgate_rootfs::Error> for Error {
    #[cold]
    fn from(e: sandgate_rootfs::Error) -> Error {
        // The path travels in its own field, so the message is the reason
        // alone.
        let path = (!e.path().is_empty()).then(|| e.path().to_owned());
        let mut out =
            Error::caused_by(e.code(), e.reason().to_owned(), e.clone()).with_errno(e.errno());
        out.path = path;
        out
    }
}

impl From<RelPathError> for Error {
    #[cold]
    fn from(e: RelPathError) -> Error {
        Error::caused_by(ErrorCode::PathInvalid, e.to_string(), e)
    }
}

impl From<PolicyError> for Error {
    /// `E_POLICY`, naming the first refused key; the message is every
    /// problem found, with the file's read error where there is one.
    #[cold]
    fn from(e: PolicyError) -> Error {
        let key = e.key().map(str::to_owned);
        let mut out = Error::caused_by(e.code(), chain_message(&e), e);
        out.key = key;
        out
    }
}

impl From<PatternError> for Error {
    #[cold]
    fn from(e: PatternError) -> Error {
        let out = Error::caused_by(ErrorCode::Policy, e.to_string(), e.clone());
        out.with_pattern(e.pattern())
    }
}

impl From<ExecError> for Error {
    #[cold]
    fn from(e: ExecError) -> Error {
        let errno = e.errno();
        Error::caused_by(e.code(), chain_message(&e), e).with_errno(errno)
    }
}

impl From<ConfineError> for Error {
    #[cold]
    fn from(e: ConfineError) -> Error {
        let errno = e.errno();
        Error::caused_by(e.code(), chain_message(&e), e).with_errno(errno)
    }
}

impl From<GitError> for Error {
    #[cold]
    fn from(e: GitError) -> Error {
        let errno = e.errno();
        Error::caused_by(e.code(), chain_message(&e), e).with_errno(errno)
    }
}

impl From<std::io::Error> for Error {
    /// `E_IO` with the OS error number.
    #[cold]
    fn from(e: std::io::Error) -> Error {
        let errno = e.raw_os_error();
        Error::caused_by(ErrorCode::Io, e.to_string(), e).with_errno(errno)
    }
}
