//! The one error type of the facade, carrying a SPEC §8 code.

use std::fmt;

pub use sandgate_codes::ErrorCode;

/// A refused or failed operation: the SPEC §8 code, a message naming what
/// was refused and why, and where they apply the root-relative path, the
/// deny pattern that matched, the policy key, and the OS error number.
///
/// No message contains a host absolute path of anything outside the roots:
/// paths are root-relative names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    message: String,
    path: Option<String>,
    pattern: Option<String>,
    key: Option<String>,
    errno: Option<i32>,
}

impl Error {
    /// A new error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
            path: None,
            pattern: None,
            key: None,
            errno: None,
        }
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

    /// The SPEC §8 code.
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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

impl From<sandgate_rootfs::Error> for Error {
    #[cold]
    fn from(e: sandgate_rootfs::Error) -> Error {
        let mut out = Error::new(e.code(), e.reason().to_owned()).with_errno(e.errno());
        if !e.path().is_empty() {
            out = out.with_path(e.path());
        }
        out
    }
}

impl From<crate::relpath::RelPathError> for Error {
    #[cold]
    fn from(e: crate::relpath::RelPathError) -> Error {
        Error::new(ErrorCode::PathInvalid, e.to_string())
    }
}
