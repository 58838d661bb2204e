//! The binds of protected entries in the view check each entry against
//! the record before binding it: an entry swapped between the record and
//! the bind (for a symlink, or through a parent swapped for a symlink) is
//! not bound, is reported as left to the after-the-fact check, and the
//! bind never lands on what the swap points at.
//!
//! The hook here records real entries of a real directory and then swaps
//! some of them on disk, as a concurrent command could between the record
//! and the bind. Run as root and as uid 65534 (`cargo xtask
//! unprivileged`); skips, saying why, only without namespaces
//! (`SANDGATE_REQUIRE_NAMESPACES=1` makes that a failure).

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sandgate_shellexec::binds::ProtectedBinds;
use sandgate_shellexec::confine::{ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{
    ExecConfig, ExecOptions, ExecResult, LocalShellExecutor, ShellExecutor,
};
use sandgate_shellexec::protected::{
    Checkpoint, EntryKind, ProtectedChange, ProtectedEntry, ProtectedPaths,
};

/// Records `names` beneath `root`, then swaps: `a.lock` for a symlink to
/// `free.txt`, and the directory `p` for a symlink to `q`.
struct Swapping {
    root: PathBuf,
    names: Vec<&'static str>,
    swap: bool,
}

struct Recorded(Vec<ProtectedEntry>);

impl Checkpoint for Recorded {
    fn after(self: Box<Self>) -> Vec<ProtectedChange> {
        Vec::new()
    }

    fn entries(&self) -> Vec<ProtectedEntry> {
        self.0.clone()
    }
}

impl ProtectedPaths for Swapping {
    fn before(&self) -> io::Result<Box<dyn Checkpoint>> {
        let mut entries = Vec::new();
        for name in &self.names {
            let md = fs::symlink_metadata(self.root.join(name))?;
            entries.push(ProtectedEntry {
                path: PathBuf::from(name),
                dev: md.dev(),
                ino: md.ino(),
                kind: EntryKind::File,
                nlink: md.nlink(),
                subtree: false,
            });
        }
        if self.swap {
            fs::remove_file(self.root.join("a.lock"))?;
            std::os::unix::fs::symlink("free.txt", self.root.join("a.lock"))?;
            fs::rename(self.root.join("p"), self.root.join("p-old"))?;
            std::os::unix::fs::symlink("q", self.root.join("p"))?;
        }
        Ok(Box::new(Recorded(entries)))
    }

    fn root(&self) -> Option<&Path> {
        Some(&self.root)
    }
}

fn write(p: &Path, data: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, data).unwrap();
}

fn executor(work: &Path, swap: bool) -> LocalShellExecutor {
    let config = ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(20),
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec {
            write_dirs: vec![work.to_path_buf()],
            ..ConfineSpec::default()
        },
        grace: Duration::from_millis(200),
        protected: Some(Arc::new(Swapping {
            root: work.to_path_buf(),
            names: vec!["a.lock", "b.lock", "p/c.lock"],
            swap,
        })),
        ..ExecConfig::default()
    };
    let ex = LocalShellExecutor::new(config);
    ex.start().unwrap();
    ex
}

fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let work = dir.path().join("work");
    write(&work.join("a.lock"), "a\n");
    write(&work.join("b.lock"), "b\n");
    write(&work.join("p/c.lock"), "c\n");
    write(&work.join("q/c.lock"), "q\n");
    write(&work.join("free.txt"), "free\n");
    (dir, work)
}

/// Runs `command` in `work`.
fn exec(ex: &LocalShellExecutor, work: &Path, command: &str) -> ExecResult {
    let fd = rustix::fs::open(
        work,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let opts = ExecOptions {
        cwd: Some(fd),
        ..ExecOptions::default()
    };
    ex.exec(command, opts).unwrap()
}

const ATTACK: &str = "echo x > a.lock; echo \"a=$?\"; echo x > b.lock; echo \"b=$?\"; \
                      echo x > p/c.lock; echo \"c=$?\"";

#[test]
fn entries_swapped_between_the_record_and_the_bind_are_left_to_the_floor() {
    // The control: nothing swapped, all three bound.
    let (_d, work) = fixture();
    let ex = executor(&work, false);
    let r = exec(&ex, &work, ATTACK);
    if !r.confined.namespaces {
        let why = r.confined.notes.join("; ");
        assert!(
            std::env::var_os("SANDGATE_REQUIRE_NAMESPACES").is_none(),
            "no namespaces: {why}"
        );
        eprintln!("skipped: no namespaces here: {why}");
        return;
    }
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "a=2\nb=2\nc=2\n",
        "{err}"
    );
    assert_eq!(err.matches("Read-only file system").count(), 3, "{err}");
    assert_eq!(
        r.confined.protected_binds,
        Some(ProtectedBinds {
            bound: 3,
            pinned: 1,
            floor: 0
        })
    );

    // Swapped after the record: a.lock is now a symlink to free.txt and
    // p a symlink to q. Neither is bound (nor what they point at), and the
    // report says so.
    let (_d, work) = fixture();
    let ex = executor(&work, true);
    let r = exec(&ex, &work, ATTACK);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "a=0\nb=2\nc=0\n",
        "{err}"
    );
    assert_eq!(
        r.confined.protected_binds,
        Some(ProtectedBinds {
            bound: 1,
            pinned: 0,
            floor: 2
        })
    );
    assert!(
        r.confined
            .notes
            .iter()
            .any(|n| n.starts_with("2 protected entries were not bound in the view")),
        "{:?}",
        r.confined.notes
    );
    // The writes went where the symlinks point: no bind was redirected
    // onto free.txt or q/c.lock.
    assert_eq!(fs::read_to_string(work.join("free.txt")).unwrap(), "x\n");
    assert_eq!(fs::read_to_string(work.join("q/c.lock")).unwrap(), "x\n");
    assert_eq!(fs::read_to_string(work.join("b.lock")).unwrap(), "b\n");
}
