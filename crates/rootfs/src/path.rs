//! Lexical handling of the paths a `Root` is given.
//!
//! Nothing here touches the filesystem: these helpers only validate bytes and
//! split them. Resolution, which is where safety lives, is in `walk` and in
//! the `openat2` call of `root`.

use crate::error::{self, Result};

/// Linux's PATH_MAX, counting the terminating NUL.
const PATH_MAX: usize = 4096;

/// Refuses what can never name anything beneath a root, the same way for
/// both resolvers, before any system call.
pub(crate) fn check(path: &[u8]) -> Result<()> {
    if path.is_empty() {
        return Err(error::Error::new(
            error::ErrorKind::NotFound,
            path,
            "empty path names nothing",
        )
        .with_errno(rustix::io::Errno::NOENT));
    }
    if path.contains(&0) {
        return Err(error::invalid(path, "path contains a NUL byte"));
    }
    if path.len() >= PATH_MAX {
        return Err(error::invalid(path, "path is 4096 bytes or longer"));
    }
    if path[0] == b'/' {
        return Err(error::escape(path, "absolute path"));
    }
    Ok(())
}

/// A path split into the directory that holds its final entry and that
/// entry's name.
pub(crate) struct Split<'a> {
    /// Everything before the final component ("" for the root itself).
    pub parent: &'a [u8],
    /// The final component, never empty.
    pub name: &'a [u8],
    /// The path ended in one or more slashes: the entry must be a directory.
    pub trailing_slash: bool,
}

impl Split<'_> {
    /// The final component is `.` or `..`: it names a directory reached by
    /// resolution, not an entry that can be created, removed or renamed.
    pub fn name_is_dot(&self) -> bool {
        self.name == b"." || self.name == b".."
    }
}

/// Splits a checked, non-empty, relative path at its last component.
pub(crate) fn split(path: &[u8]) -> Split<'_> {
    let mut end = path.len();
    while end > 0 && path[end - 1] == b'/' {
        end -= 1;
    }
    let trailing_slash = end < path.len();
    let trimmed = &path[..end];
    match trimmed.iter().rposition(|&b| b == b'/') {
        Some(i) => {
            let mut pend = i;
            while pend > 0 && path[pend - 1] == b'/' {
                pend -= 1;
            }
            Split {
                parent: &path[..pend],
                name: &trimmed[i + 1..],
                trailing_slash,
            }
        }
        None => Split {
            parent: b"",
            name: trimmed,
            trailing_slash,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_cases() {
        let s = split(b"a/b/c");
        assert_eq!(
            (s.parent, s.name, s.trailing_slash),
            (&b"a/b"[..], &b"c"[..], false)
        );
        let s = split(b"c//");
        assert_eq!(
            (s.parent, s.name, s.trailing_slash),
            (&b""[..], &b"c"[..], true)
        );
        let s = split(b"a//c");
        assert_eq!((s.parent, s.name), (&b"a"[..], &b"c"[..]));
        let s = split(b"a/..");
        assert!(s.name_is_dot());
    }

    #[test]
    fn check_refuses() {
        assert_eq!(check(b"").unwrap_err().kind(), error::ErrorKind::NotFound);
        assert_eq!(check(b"/etc").unwrap_err().kind(), error::ErrorKind::Escape);
        assert_eq!(
            check(b"a\0b").unwrap_err().kind(),
            error::ErrorKind::InvalidPath
        );
        assert_eq!(
            check(&[b'a'; 4096]).unwrap_err().kind(),
            error::ErrorKind::InvalidPath
        );
        assert!(check(b"a/../b").is_ok());
    }
}
