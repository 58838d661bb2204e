//! The error type of every `Root` operation.

use std::borrow::Cow;
use std::io;

use rustix::io::Errno;
use sandgate_codes::ErrorCode;

/// What went wrong, in terms a caller can act on.
///
/// Each kind maps to exactly one error code through [`Error::code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The path cannot name anything: a NUL byte, too long, or an operation
    /// that cannot apply to `.`/`..`.
    InvalidPath,
    /// Resolution would leave the root: an absolute path, an absolute symlink,
    /// `..` above the root, or a magic link.
    Escape,
    /// A component does not exist.
    NotFound,
    /// The target already exists.
    Exists,
    /// A directory or special file where a regular file is needed.
    NotFile,
    /// A non-directory where a directory is needed (including a trailing
    /// slash after a file).
    NotDir,
    /// The directory is not empty.
    NotEmpty,
    /// More than 40 symbolic links were followed in one resolution.
    Loop,
    /// The final component is a symbolic link where one is not allowed.
    Symlink,
    /// Larger than the caller's cap ([`Root::read_max`](crate::Root::read_max)).
    TooLarge,
    /// Another operating-system error; [`Error::errno`] says which.
    Io,
}

impl ErrorKind {
    /// The error code of this kind.
    pub const fn code(self) -> ErrorCode {
        match self {
            ErrorKind::InvalidPath => ErrorCode::PathInvalid,
            ErrorKind::Escape => ErrorCode::PathEscape,
            ErrorKind::NotFound => ErrorCode::NotFound,
            ErrorKind::Exists => ErrorCode::Exists,
            ErrorKind::NotFile => ErrorCode::NotFile,
            ErrorKind::NotDir => ErrorCode::NotDir,
            ErrorKind::NotEmpty => ErrorCode::NotEmpty,
            ErrorKind::Loop => ErrorCode::Loop,
            ErrorKind::Symlink => ErrorCode::Symlink,
            ErrorKind::TooLarge => ErrorCode::TooLarge,
            ErrorKind::Io => ErrorCode::Io,
        }
    }
}

/// A failed `Root` operation: its kind, the root-relative path as the caller
/// spelled it, the OS error number where there is one, and a short reason.
///
/// The message never contains a host absolute path: only the name the caller
/// passed, which is relative to the root.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{reason}", display_path(.path))]
pub struct Error {
    kind: ErrorKind,
    path: String,
    errno: Option<i32>,
    reason: Cow<'static, str>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, path: &[u8], reason: impl Into<Cow<'static, str>>) -> Self {
        Error {
            kind,
            path: String::from_utf8_lossy(path).into_owned(),
            errno: None,
            reason: reason.into(),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The error code (docs/reference/errors.md).
    pub fn code(&self) -> ErrorCode {
        self.kind.code()
    }

    /// The root-relative path the operation was given (lossily UTF-8).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The OS error number behind this error, if any.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }

    /// Why the operation was refused or failed, without the path.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    pub(crate) fn with_errno(mut self, errno: Errno) -> Self {
        self.errno = Some(errno.raw_os_error());
        self
    }
}

/// `path: ` before the reason, or nothing when the operation had no path.
fn display_path(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match e.kind {
            ErrorKind::NotFound => io::ErrorKind::NotFound,
            ErrorKind::Exists => io::ErrorKind::AlreadyExists,
            ErrorKind::NotDir => io::ErrorKind::NotADirectory,
            ErrorKind::NotFile => io::ErrorKind::IsADirectory,
            ErrorKind::NotEmpty => io::ErrorKind::DirectoryNotEmpty,
            ErrorKind::Escape => io::ErrorKind::PermissionDenied,
            ErrorKind::InvalidPath => io::ErrorKind::InvalidInput,
            _ => match e.errno {
                Some(n) => io::Error::from_raw_os_error(n).kind(),
                None => io::ErrorKind::Other,
            },
        };
        io::Error::new(kind, e)
    }
}

/// The result type of every `Root` operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

// Small cold constructors keep the hot paths free of formatting code.

#[cold]
pub(crate) fn escape(path: &[u8], reason: &'static str) -> Error {
    Error::new(ErrorKind::Escape, path, reason)
}

#[cold]
pub(crate) fn invalid(path: &[u8], reason: &'static str) -> Error {
    Error::new(ErrorKind::InvalidPath, path, reason)
}

#[cold]
pub(crate) fn loop_error(path: &[u8]) -> Error {
    Error::new(
        ErrorKind::Loop,
        path,
        "too many levels of symbolic links (more than 40)",
    )
    .with_errno(Errno::LOOP)
}

#[cold]
pub(crate) fn not_dir(path: &[u8]) -> Error {
    Error::new(ErrorKind::NotDir, path, "not a directory").with_errno(Errno::NOTDIR)
}

/// Maps an OS error from an operation on `path` to the matching kind.
///
/// `EXDEV` is *not* mapped to an escape here: only `openat2` gives it that
/// meaning, and the caller that ran `openat2` maps it itself.
#[cold]
pub(crate) fn from_errno(path: &[u8], errno: Errno) -> Error {
    let (kind, reason): (ErrorKind, &'static str) = match errno {
        Errno::NOENT => (ErrorKind::NotFound, "no such file or directory"),
        Errno::EXIST => (ErrorKind::Exists, "already exists"),
        Errno::NOTDIR => (ErrorKind::NotDir, "not a directory"),
        Errno::ISDIR => (ErrorKind::NotFile, "is a directory"),
        // What opening a UNIX socket (or a device without its driver)
        // answers: the name is there, and is no regular file.
        Errno::NXIO => (ErrorKind::NotFile, "not a regular file"),
        Errno::NOTEMPTY => (ErrorKind::NotEmpty, "directory not empty"),
        Errno::LOOP => (ErrorKind::Loop, "too many levels of symbolic links"),
        Errno::NAMETOOLONG => (ErrorKind::InvalidPath, "name too long"),
        _ => (ErrorKind::Io, ""),
    };
    let reason: Cow<'static, str> = if reason.is_empty() {
        // std's text for the errno, e.g. "Permission denied (os error 13)".
        Cow::Owned(io::Error::from_raw_os_error(errno.raw_os_error()).to_string())
    } else {
        Cow::Borrowed(reason)
    };
    Error::new(kind, path, reason).with_errno(errno)
}
