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

use std::path::{Component, Path, PathBuf};

use crate::{Error, ErrorCode};

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

/// The normal components of `p` after `prefix`, when `prefix`'s components
/// lead `p`'s.
fn below<'p>(p: &'p Path, prefix: &Path) -> Option<Vec<Component<'p>>> {
    let mut pc = p.components();
    for want in prefix.components() {
        if pc.next()? != want {
            return None;
        }
    }
    Some(pc.collect())
}

/// Maps one client-supplied path. A relative name is kept as given (the
/// name parser judges it). An absolute path must lie in a granted
/// directory, compared component by component; a path outside all of them
/// is refused without naming it, so a refusal never echoes a host path
/// outside the roots.
pub fn map(dirs: &[GrantedDir], given: &str) -> Result<Mapped, Error> {
    if !given.starts_with('/') {
        return Ok(Mapped {
            rel: given.to_owned(),
            dir: None,
        });
    }
    let p = Path::new(given);
    for (i, d) in dirs.iter().enumerate() {
        for prefix in [&d.spelled, &d.resolved] {
            if let Some(rest) = below(p, prefix) {
                let mut rel = String::new();
                for c in rest {
                    let part = match c {
                        Component::Normal(s) => s.to_str().ok_or_else(|| {
                            Error::new(ErrorCode::PathInvalid, "a path component is not UTF-8")
                        })?,
                        Component::ParentDir => "..",
                        // Components after a root prefix are never these.
                        Component::CurDir | Component::RootDir | Component::Prefix(_) => continue,
                    };
                    if !rel.is_empty() {
                        rel.push('/');
                    }
                    rel.push_str(part);
                }
                if rel.is_empty() {
                    rel.push('.');
                } else if given.ends_with('/') {
                    // A trailing slash means "must be a directory"; the
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
        assert_eq!(rel("/srv/app/src/.").unwrap(), "src");
    }

    #[test]
    fn a_refusal_does_not_name_the_path() {
        let e = map(&dirs(), "/srv/app-secrets/key").unwrap_err();
        assert!(!e.message().contains("secrets"));
        assert_eq!(e.path(), None);
    }
}
