//! Tree building for tests: real files, directories and links in a temporary
//! directory, with an "outside" sibling that must never be reached.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use sandgate_rootfs::{Resolver, Root};

/// Called first by every test in this binary: under the fallback run it
/// installs the seccomp filter that takes openat2 away.
pub fn setup() {
    crate::seccomp::install_from_env();
}

/// The resolvers every case runs under. Under the seccomp fallback run,
/// forcing `Openat2` would only test the filter, so `Auto` stands in.
pub fn resolvers() -> Vec<Resolver> {
    setup();
    if crate::seccomp::active() {
        vec![Resolver::Auto, Resolver::Walk]
    } else {
        vec![Resolver::Openat2, Resolver::Walk, Resolver::Auto]
    }
}

/// A temporary directory holding `root/` (the root under test) and
/// `outside/` (a sibling with a secret file that must stay unreachable).
pub struct Fixture {
    pub tmp: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("root")).unwrap();
        fs::create_dir(tmp.path().join("outside")).unwrap();
        fs::write(tmp.path().join("outside/secret"), b"OUTSIDE-SECRET").unwrap();
        fs::create_dir(tmp.path().join("outside/dir")).unwrap();
        Fixture { tmp }
    }

    pub fn root_path(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    pub fn outside_path(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.root_path().join(rel)
    }

    pub fn dir(&self, rel: &str) -> &Self {
        fs::create_dir_all(self.p(rel)).unwrap();
        self
    }

    pub fn file(&self, rel: &str, content: &str) -> &Self {
        if let Some(parent) = Path::new(rel).parent() {
            fs::create_dir_all(self.p(&parent.to_string_lossy())).unwrap();
        }
        fs::write(self.p(rel), content).unwrap();
        self
    }

    pub fn link(&self, rel: &str, target: &str) -> &Self {
        if let Some(parent) = Path::new(rel).parent() {
            fs::create_dir_all(self.p(&parent.to_string_lossy())).unwrap();
        }
        symlink(target, self.p(rel)).unwrap();
        self
    }

    pub fn root(&self, resolver: Resolver) -> Root {
        Root::open_with_resolver(self.root_path(), resolver).unwrap()
    }
}
