//! A policy directory with the usual roots, and helpers to load from it.

use std::fs;
use std::path::{Path, PathBuf};

use sandgate_policy::{Policy, PolicyError, PolicyErrorKind};
use tempfile::TempDir;

/// `<tmp>/project/` holds the policy file and the directories `inputs`,
/// `templates` and `workspace`; `<tmp>/elsewhere` is a sibling directory.
pub struct Fixture {
    pub tmp: TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        for dir in [
            "project/inputs",
            "project/templates",
            "project/workspace",
            "elsewhere",
        ] {
            fs::create_dir_all(tmp.path().join(dir)).expect("mkdir");
        }
        fs::write(tmp.path().join("project/a-file.txt"), "x").expect("write");
        Fixture { tmp }
    }

    /// The directory that holds the policy file.
    pub fn project(&self) -> PathBuf {
        self.tmp.path().join("project")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// The canonical form of `<tmp>/<rel>`.
    pub fn canon(&self, rel: &str) -> PathBuf {
        self.path(rel).canonicalize().expect("canonicalize")
    }

    /// Writes `text` as `project/policy.toml` and loads it.
    pub fn load(&self, text: &str) -> Result<Policy, PolicyError> {
        let path = self.project().join("policy.toml");
        fs::write(&path, text).expect("write policy");
        Policy::load(&path)
    }
}

/// Loads `text` in a fresh fixture.
pub fn load(text: &str) -> Result<Policy, PolicyError> {
    Fixture::new().load(text)
}

/// Loads `text`, expecting success.
#[track_caller]
pub fn ok(text: &str) -> Policy {
    match load(text) {
        Ok(policy) => policy,
        Err(err) => panic!("expected the policy to load, got: {err}\n---\n{text}"),
    }
}

/// Loads `text`, expecting a refusal of `kind` naming `key`.
#[track_caller]
pub fn refused(text: &str, kind: PolicyErrorKind, key: &str) -> PolicyError {
    match load(text) {
        Ok(_) => panic!("expected a refusal naming `{key}`, the policy loaded\n---\n{text}"),
        Err(err) => {
            assert_eq!(err.kind(), kind, "kind for `{key}`: {err}");
            assert_eq!(err.key(), Some(key), "key: {err}");
            assert!(
                err.to_string()
                    .starts_with(&format!("policy key `{key}`: ")),
                "{err}"
            );
            assert_eq!(err.code(), sandgate_codes::ErrorCode::Policy);
            err
        }
    }
}

/// Whether `path` appears in `message`.
pub fn mentions(message: &str, path: &Path) -> bool {
    message.contains(&*path.to_string_lossy())
}
