//! Host paths to root-relative names.
//!
//! A host (an MCP client, an agent framework passing a working directory)
//! may name a file by its absolute host path. Such a path is compared with each granted
//! directory component by component, against the directory as spelled and
//! as its symlinks resolve; the components after the matching prefix are the
//! root-relative name, which then goes through the same parser and kernel
//! checks as any other name. A string-prefix test would take
//! `/srv/app-secrets` for a path inside `/srv/app`; a component comparison
//! cannot.
//!
//! The components are the pieces between slashes, taken as
//! [`Path::components`] takes them after an absolute path's root: empty
//! pieces (repeated or trailing slashes) and `.` left out, `..` kept. They
//! are split from the bytes directly, since `Path::components` parses
//! every piece for the cases a relative path or a prefix can have; a test
//! compares the two on generated paths.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::{Error, ErrorCode, RelPathReason};

/// One granted directory: how it may be spelled and what it is.
#[derive(Clone, Debug)]
pub struct GrantedDir {
    /// The directory as the operator named it, made absolute (symlinks kept).
    pub spelled: PathBuf,
    /// The directory with every symlink resolved.
    pub resolved: PathBuf,
    /// Its place among the read roots, if it is one.
    pub read_index: Option<usize>,
    /// Whether it is the write root.
    pub is_write: bool,
}

/// A name as a tool will use it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// The root-relative name (`.` for the directory itself).
    pub rel: String,
    /// The granted directory an absolute path was found in (an index into
    /// the list given to [`map`]); `None` for a relative name.
    pub dir: Option<usize>,
}

/// The components of a path after its root: the pieces between slashes,
/// without the empty ones and `.`.
fn pieces(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|b| *b == b'/')
        .filter(|piece| !piece.is_empty() && *piece != b".")
}

/// The components of the absolute path `p` after `prefix`, when
/// `prefix`'s components lead `p`'s. A relative prefix leads no absolute
/// path (its first component is no root); an empty one leads every path.
fn below<'p>(p: &'p str, prefix: &Path) -> Option<impl Iterator<Item = &'p str>> {
    let prefix = prefix.as_os_str().as_bytes();
    if !prefix.is_empty() && !prefix.starts_with(b"/") {
        return None;
    }
    let mut rest = p
        .split('/')
        .filter(|piece| !piece.is_empty() && *piece != ".");
    for want in pieces(prefix) {
        if rest.next()?.as_bytes() != want {
            return None;
        }
    }
    Some(rest)
}

/// Whether `given` ends as a name that must be a directory: a trailing
/// slash, or a last component `.` (`file/.` is `ENOTDIR`, as `file/` is,
/// and [`RelPath`](crate::RelPath) reads both so).
fn must_be_dir(given: &str) -> bool {
    given.ends_with('/') || given.ends_with("/.")
}

/// Maps one client-supplied path. A path holding a NUL byte names no file
/// at all and is refused (`E_PATH_INVALID`) here, where it comes in, so no
/// caller is handed a name that every operation would then refuse. A
/// relative name is otherwise kept as given (the name parser judges it).
/// An absolute path must lie in a granted directory, compared component
/// by component; a path outside all of them is refused without naming it,
/// so a refusal never echoes a host path outside the roots.
pub fn map(dirs: &[GrantedDir], given: &str) -> Result<Mapped, Error> {
    map_where(dirs, given, |_| true)
}

/// Maps one client-supplied path for a write-side operation: as [`map`],
/// except that an absolute path inside the write root is mapped to its
/// name there even when another granted directory listed before it holds
/// the write root (a read root `.` with the write root `./out`): the
/// write root is where writes go, and the name relative to the outer
/// directory (`out/f`) would be refused as a path in a read-only root.
pub fn map_for_write(dirs: &[GrantedDir], given: &str) -> Result<Mapped, Error> {
    match map_where(dirs, given, |d| d.is_write) {
        Ok(m) => Ok(m),
        Err(_) => map(dirs, given),
    }
}

/// [`map`] over the directories `keep` accepts (indices stay those of
/// `dirs`).
fn map_where(
    dirs: &[GrantedDir],
    given: &str,
    keep: impl Fn(&GrantedDir) -> bool,
) -> Result<Mapped, Error> {
    if given.contains('\0') {
        // Not echoed: it may be a host path outside every root.
        return Err(Error::new(
            ErrorCode::PathInvalid,
            RelPathReason::Nul.describe(),
        ));
    }
    if !given.starts_with('/') {
        return Ok(Mapped {
            rel: given.to_owned(),
            dir: None,
        });
    }
    for (i, d) in dirs.iter().enumerate().filter(|(_, d)| keep(d)) {
        for prefix in [&d.spelled, &d.resolved] {
            if let Some(rest) = below(given, prefix) {
                let mut rel = String::with_capacity(given.len());
                for part in rest {
                    if !rel.is_empty() {
                        rel.push('/');
                    }
                    rel.push_str(part);
                }
                if rel.is_empty() {
                    rel.push('.');
                } else if must_be_dir(given) {
                    // A trailing slash (or `/.`) means "must be a
                    // directory", as the name parser reads it; the
                    // component walk drops it, so it is put back.
                    rel.push('/');
                }
                return Ok(Mapped { rel, dir: Some(i) });
            }
        }
    }
    Err(Error::new(
        ErrorCode::PathEscape,
        "an absolute path outside every allowed directory (use a path inside a granted root, or a name relative to the root)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dirs() -> Vec<GrantedDir> {
        vec![GrantedDir {
            spelled: "/srv/app".into(),
            resolved: "/data/app".into(),
            read_index: Some(0),
            is_write: true,
        }]
    }

    fn rel(given: &str) -> Result<String, ErrorCode> {
        map(&dirs(), given).map(|m| m.rel).map_err(|e| e.code())
    }

    #[test]
    fn maps_by_components_never_by_prefix() {
        assert_eq!(rel("/srv/app/src/main.rs").unwrap(), "src/main.rs");
        assert_eq!(rel("/data/app/src/main.rs").unwrap(), "src/main.rs");
        assert_eq!(rel("/srv/app").unwrap(), ".");
        assert_eq!(rel("/srv/app/").unwrap(), ".");
        assert_eq!(rel("/srv//app/./a").unwrap(), "a");
        assert_eq!(rel("/srv/app-secrets/key"), Err(ErrorCode::PathEscape));
        assert_eq!(rel("/srv/ap"), Err(ErrorCode::PathEscape));
        assert_eq!(rel("/srv"), Err(ErrorCode::PathEscape));
        assert_eq!(rel("/etc/passwd"), Err(ErrorCode::PathEscape));
        // `..` is kept for the name parser to refuse.
        assert_eq!(
            rel("/srv/app/../app-secrets/key").unwrap(),
            "../app-secrets/key"
        );
        assert_eq!(rel("src/a").unwrap(), "src/a");
    }

    #[test]
    fn a_trailing_slash_keeps_its_meaning() {
        assert_eq!(rel("/srv/app/src/").unwrap(), "src/");
        assert_eq!(rel("/srv/app/src//").unwrap(), "src/");
        // `src/.` is a directory too: the name parser refuses a file
        // spelled so (`E_NOT_DIR`), and a host path must mean the same.
        assert_eq!(rel("/srv/app/src/.").unwrap(), "src/");
        assert_eq!(rel("/srv/app/src/./").unwrap(), "src/");
        assert_eq!(rel("/srv/app/src//.").unwrap(), "src/");
        assert_eq!(rel("/srv/app/.").unwrap(), ".");
    }

    /// The mapping as `Path::components` gives it: what [`map`] must agree
    /// with on every path.
    fn by_path_components(dirs: &[GrantedDir], given: &str) -> Option<(String, usize)> {
        use std::path::Component;
        let p = Path::new(given);
        for (i, d) in dirs.iter().enumerate() {
            for prefix in [&d.spelled, &d.resolved] {
                let mut pc = p.components();
                if !prefix.components().all(|want| pc.next() == Some(want)) {
                    continue;
                }
                let parts: Vec<&str> = pc
                    .filter_map(|c| match c {
                        Component::Normal(s) => Some(s.to_str().unwrap()),
                        Component::ParentDir => Some(".."),
                        _ => None,
                    })
                    .collect();
                let mut rel = parts.join("/");
                if rel.is_empty() {
                    rel.push('.');
                } else if given.ends_with('/') || given.ends_with("/.") {
                    rel.push('/');
                }
                return Some((rel, i));
            }
        }
        None
    }

    fn spelling() -> impl Strategy<Value = String> {
        let piece = prop::sample::select(vec![
            "",
            ".",
            "..",
            "srv",
            "app",
            "app-secrets",
            "ap",
            "data",
            "\u{e9}",
            "a b",
            "...",
        ]);
        (
            prop::collection::vec(piece, 0..7),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(pieces, absolute, trailing)| {
                let mut s = pieces.join("/");
                if absolute {
                    s.insert(0, '/');
                }
                if trailing {
                    s.push('/');
                }
                s
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Splitting at slashes agrees with `Path::components` for every
        /// spelling of the path and of the granted directories: repeated
        /// and trailing slashes, `.`, `..`, a relative or empty directory.
        #[test]
        fn pieces_agree_with_path_components(
            given in spelling(),
            granted in prop::collection::vec((spelling(), spelling()), 1..3),
        ) {
            let dirs: Vec<GrantedDir> = granted
                .into_iter()
                .map(|(spelled, resolved)| GrantedDir {
                    spelled: spelled.into(),
                    resolved: resolved.into(),
                    read_index: None,
                    is_write: false,
                })
                .collect();
            let ours = map(&dirs, &given);
            if given.starts_with('/') {
                let want = by_path_components(&dirs, &given);
                let got = ours.ok().map(|m| (m.rel, m.dir.unwrap()));
                prop_assert_eq!(got, want);
            } else {
                prop_assert_eq!(ours.unwrap(), Mapped { rel: given.clone(), dir: None });
            }
        }
    }

    #[test]
    fn a_refusal_does_not_name_the_path() {
        let e = map(&dirs(), "/srv/app-secrets/key").unwrap_err();
        assert!(!e.message().contains("secrets"));
        assert_eq!(e.path(), None);
    }
}
