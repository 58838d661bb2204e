//! The check of protected paths in a process out of descriptors: the soft
//! limit lowered to leave 0, 1, 2, … descriptors free while the record is
//! made (`begin`) and while the check runs (`settle`), so that the shortage
//! strikes at each step of each in turn. Either `begin` fails (the command
//! must not run then) or the change the command makes to a protected file
//! deep in the tree is undone or reported: never missed without a word.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

use sandgate_fileguard::GuardBuilder;
use sandgate_protect::{Action, Protector};

struct NofileLimit(Rlimit);

impl NofileLimit {
    /// Lets the process open descriptors below number `limit` only.
    fn lower(limit: u64) -> NofileLimit {
        let old = getrlimit(Resource::Nofile);
        let low = Rlimit {
            current: Some(limit),
            maximum: old.maximum,
        };
        setrlimit(Resource::Nofile, low).unwrap();
        NofileLimit(old)
    }
}

impl Drop for NofileLimit {
    fn drop(&mut self) {
        let _ = setrlimit(Resource::Nofile, self.0);
    }
}

/// Runs `f` with exactly `extra` descriptors free: every number below the
/// highest open one is taken first.
fn with_free<T>(extra: u64, f: impl FnOnce() -> T) -> T {
    let ceiling = fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .map_or(0, |n| n + 1);
    let mut plugs = Vec::new();
    loop {
        let f = fs::File::open("/dev/null").unwrap();
        if std::os::fd::AsRawFd::as_raw_fd(&f) as u64 >= ceiling {
            break;
        }
        plugs.push(f);
    }
    let _low = NofileLimit::lower(ceiling + extra);
    f()
}

fn tree(root: &Path) {
    for d in ["a/b/c/d/e/f/g/h", "i/j/k", "l"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::write(root.join("a/b/c/d/e/f/g/h/deep.lock"), "deep v1\n").unwrap();
    fs::write(root.join("i/j/k/mid.lock"), "mid v1\n").unwrap();
}

/// What a command does: changes both protected files and adds one.
fn command(root: &Path) {
    fs::write(root.join("a/b/c/d/e/f/g/h/deep.lock"), "deep v2\n").unwrap();
    fs::write(root.join("i/j/k/mid.lock"), "mid v2\n").unwrap();
    fs::write(root.join("l/new.lock"), "new\n").unwrap();
}

#[test]
fn out_of_descriptors_the_check_never_misses_a_change_silently() {
    // The first record (a fresh root) and an update of a record made with
    // descriptors to spare.
    for fresh in [true, false] {
        for extra in 0..24u64 {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("w");
            fs::create_dir(&root).unwrap();
            tree(&root);
            let guard = GuardBuilder::new().patterns(["*.lock"]).build().unwrap();
            let p = Arc::new(Protector::new(&root, guard).unwrap());
            if !fresh {
                assert!(p.begin().unwrap().settle().is_empty());
            }
            let cp = match with_free(extra, || p.begin()) {
                Ok(cp) => cp,
                Err(e) => {
                    eprintln!("fresh {fresh}, {extra} free: begin refused: {e}");
                    continue;
                }
            };
            command(&root);
            let changes = with_free(extra, || cp.settle());
            let seen = |path: &str| changes.iter().find(|c| c.path == path).map(|c| c.action);
            eprintln!("fresh {fresh}, {extra} free: {changes:?}");
            for (path, v1) in [
                ("a/b/c/d/e/f/g/h/deep.lock", "deep v1\n"),
                ("i/j/k/mid.lock", "mid v1\n"),
            ] {
                let now = fs::read_to_string(root.join(path)).unwrap();
                match seen(path) {
                    Some(Action::Restored) => assert_eq!(now, v1, "{path} said restored"),
                    Some(Action::Reported) => {}
                    other => panic!(
                        "fresh {fresh}, {extra} descriptors free: the change to {path} was \
                         missed ({other:?}, it holds {now:?}); changes {changes:?}"
                    ),
                }
            }
            match seen("l/new.lock") {
                Some(Action::Quarantined) => assert!(!root.join("l/new.lock").exists()),
                Some(Action::Reported) => {}
                other => panic!(
                    "fresh {fresh}, {extra} descriptors free: the new l/new.lock was missed \
                     ({other:?}); changes {changes:?}"
                ),
            }
        }
    }
}
