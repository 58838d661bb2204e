//! The one table of sandgate error codes.
//!
//! Every layer of sandgate (the file-access mechanism, the deny-write guard,
//! the policy, the executor, the facade, the C ABI and the JSON endpoint)
//! reports failures with one of these codes. The numbers are the C ABI's
//! `sg_status` values and are never reused; the names are the strings the JSON
//! endpoint and every binding use.
//!
//! This crate has no dependencies so that each layer can share the table
//! without depending on any other layer. For the same reason it also holds
//! the one text form of a SHA-256 digest that layers report
//! ([`sha256_text`]: the policy's digest, the executor's environment names
//! digest), and the one way a name is shown to a person ([`shown`]: the
//! policy's errors, the CLI and confined git's messages spell a name alike).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod audit;
mod shown;

pub use shown::{clipped, quoted, shown, terminal_unsafe};

use core::fmt;
use core::str::FromStr;

macro_rules! codes {
    ($( $variant:ident = $value:literal, $name:literal, $meaning:literal; )*) => {
        /// A stable sandgate status code.
        ///
        /// `#[repr(u32)]` with explicit values: a value, once published, is
        /// never given another meaning.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum ErrorCode {
            $( #[doc = $meaning] $variant = $value, )*
        }

        impl ErrorCode {
            /// Every code, in numeric order.
            pub const ALL: &'static [ErrorCode] = &[ $( ErrorCode::$variant, )* ];

            /// The code's name as used on the wire (`"E_NOT_FOUND"`).
            pub const fn as_str(self) -> &'static str {
                match self { $( ErrorCode::$variant => $name, )* }
            }

            /// The code's name as a NUL-terminated C string, for the C ABI.
            pub const fn as_c_str(self) -> &'static core::ffi::CStr {
                match self {
                    $( ErrorCode::$variant => match core::ffi::CStr::from_bytes_with_nul(
                        concat!($name, "\0").as_bytes(),
                    ) {
                        Ok(name) => name,
                        Err(_) => panic!("a code name holds a NUL byte"),
                    }, )*
                }
            }

            /// What the code means, in one sentence (the table's text, also
            /// carried into the generated C, Python and Go tables).
            pub const fn meaning(self) -> &'static str {
                match self { $( ErrorCode::$variant => $meaning, )* }
            }

            /// The code's numeric value (the C ABI's `sg_status`).
            pub const fn value(self) -> u32 {
                self as u32
            }

            /// The code with this numeric value, if there is one.
            pub const fn from_value(value: u32) -> Option<ErrorCode> {
                match value { $( $value => Some(ErrorCode::$variant), )* _ => None }
            }
        }

        impl FromStr for ErrorCode {
            type Err = UnknownCode;
            fn from_str(s: &str) -> Result<Self, UnknownCode> {
                match s { $( $name => Ok(ErrorCode::$variant), )* _ => Err(UnknownCode) }
            }
        }
    };
}

codes! {
    Ok = 0, "OK",
        "Success.";
    PathInvalid = 1, "E_PATH_INVALID",
        "The name breaks the agent-facing name rules (reason attached).";
    PathEscape = 2, "E_PATH_ESCAPE",
        "Resolution would leave the root.";
    NotFound = 3, "E_NOT_FOUND",
        "No such file or directory.";
    Exists = 4, "E_EXISTS",
        "The target exists and overwriting it was not granted.";
    NotFile = 5, "E_NOT_FILE",
        "A directory or special file where a regular file is needed.";
    NotDir = 6, "E_NOT_DIR",
        "Not a directory where a directory is needed.";
    NotEmpty = 7, "E_NOT_EMPTY",
        "The directory is not empty.";
    Denied = 8, "E_DENIED",
        "The capability is not granted (no root, exec off, budget spent).";
    FsProtected = 9, "E_FS_PROTECTED",
        "A deny-write pattern matched (pattern attached).";
    TooLarge = 10, "E_TOO_LARGE",
        "Over a byte cap.";
    Symlink = 11, "E_SYMLINK",
        "A final symlink where a write needs a regular file.";
    Hardlink = 12, "E_HARDLINK",
        "A multiply-linked file under write protection.";
    Loop = 13, "E_LOOP",
        "Too many symbolic links in one resolution.";
    EditNoMatch = 14, "E_EDIT_NO_MATCH",
        "The edit's old text does not occur.";
    EditAmbiguous = 15, "E_EDIT_AMBIGUOUS",
        "The edit's old text occurs more than once.";
    Policy = 16, "E_POLICY",
        "The policy file is refused (key attached).";
    Timeout = 17, "E_TIMEOUT",
        "A time limit was reached.";
    Aborted = 18, "E_ABORTED",
        "The operation was aborted.";
    NotStarted = 19, "E_NOT_STARTED",
        "The executor was not started.";
    ConfineUnavailable = 20, "E_CONFINE_UNAVAILABLE",
        "Kernel confinement was required and the kernel lacks a part of it.";
    NetDenied = 21, "E_NET_DENIED",
        "The network authorizer refused the destination.";
    Closed = 22, "E_CLOSED",
        "The handle was closed.";
    Request = 23, "E_REQUEST",
        "A malformed request (JSON endpoint, C arguments).";
    Io = 24, "E_IO",
        "Another operating-system error (errno attached).";
    Internal = 25, "E_INTERNAL",
        "A bug in sandgate.";
}

/// The string named no sandgate error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownCode;

impl fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a sandgate error code")
    }
}

impl std::error::Error for UnknownCode {}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A SHA-256 digest as sandgate reports it: `sha256:` followed by 64
/// lower-case hex digits.
pub fn sha256_text(digest: &[u8; 32]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text at the bound is whole; one byte past it is cut to `keep`
    /// bytes, never inside a character; the quoted form escapes controls
    /// and marks the cut.
    #[test]
    fn clipped_cuts_past_the_bound_at_a_character() {
        let at = "a".repeat(200);
        assert_eq!(clipped(&at, 200, 100), (at.as_str(), false));
        let past = "a".repeat(201);
        assert_eq!(clipped(&past, 200, 100), (&past[..100], true));
        // `é` is two bytes: 99 `a`s then `é` straddles byte 100.
        let straddle = format!("{}é{}", "a".repeat(99), "b".repeat(200));
        assert_eq!(clipped(&straddle, 200, 100), (&straddle[..99], true));
        assert_eq!(quoted("a\u{1b}b", 200), "a\\u{1b}b");
        assert_eq!(quoted("a\nb", 200), "a\\nb");
        assert_eq!(quoted(&past, 200), format!("{}…", "a".repeat(100)));
    }

    #[test]
    fn sha256_text_is_prefixed_lower_hex() {
        let mut digest = [0u8; 32];
        digest[0] = 0x0f;
        digest[1] = 0xa0;
        digest[31] = 0xff;
        let text = sha256_text(&digest);
        assert_eq!(text.len(), 7 + 64);
        assert!(text.starts_with("sha256:0fa00000"), "{text}");
        assert!(text.ends_with("00ff"), "{text}");
    }

    #[test]
    fn values_are_dense_and_round_trip() {
        for (i, code) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(code.value() as usize, i, "{code} is out of order");
            assert_eq!(ErrorCode::from_value(code.value()), Some(*code));
            assert_eq!(code.as_str().parse::<ErrorCode>(), Ok(*code));
            assert_eq!(code.as_c_str().to_str(), Ok(code.as_str()));
        }
        assert_eq!(ErrorCode::ALL.len(), 26);
        assert_eq!(ErrorCode::from_value(26), None);
        assert_eq!("E_NOPE".parse::<ErrorCode>(), Err(UnknownCode));
    }

    #[test]
    fn spec_numbers_are_fixed() {
        assert_eq!(ErrorCode::PathEscape.value(), 2);
        assert_eq!(ErrorCode::FsProtected.value(), 9);
        assert_eq!(ErrorCode::Loop.value(), 13);
        assert_eq!(ErrorCode::Internal.value(), 25);
        assert_eq!(ErrorCode::Ok.as_str(), "OK");
    }
}
