//! The record and the check on real files, without a shell: what a
//! command would do is done here between `begin` and `settle`.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use sandgate_fileguard::GuardBuilder;
use sandgate_protect::{Action, Change, Protector, MAX_COPY_BYTES};

fn protector(root: &Path, patterns: &[&str]) -> Arc<Protector> {
    let guard = GuardBuilder::new().patterns(patterns).build().unwrap();
    Arc::new(Protector::new(root, guard).unwrap())
}

fn change(path: &str, pattern: &str, action: Action) -> Change {
    Change {
        path: path.into(),
        pattern: pattern.into(),
        action,
    }
}

#[test]
fn a_restored_file_gets_back_its_content_mode_and_times() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    let f = root.join("a.lock");
    fs::write(&f, "v1\n").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o604)).unwrap();
    let before = fs::metadata(&f).unwrap();
    let p = protector(&root, &["*.lock"]);
    let cp = p.begin().unwrap();
    fs::write(&f, "v2 longer\n").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(cp.settle(), [change("a.lock", "*.lock", Action::Restored)]);
    let after = fs::metadata(&f).unwrap();
    assert_eq!(fs::read_to_string(&f).unwrap(), "v1\n");
    assert_eq!(after.mode(), before.mode());
    assert_eq!(
        (after.mtime(), after.mtime_nsec()),
        (before.mtime(), before.mtime_nsec())
    );
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
    // The changed version went to the quarantine, not away.
    let q = tmp.path().join(".w.sandgate-quarantine");
    let stamp = fs::read_dir(&q).unwrap().next().unwrap().unwrap().path();
    assert_eq!(
        fs::read_to_string(stamp.join("a.lock")).unwrap(),
        "v2 longer\n"
    );
    // Nothing changed since: nothing to report.
    assert!(p.begin().unwrap().settle().is_empty());
}

#[test]
fn a_file_too_large_to_copy_is_reported_not_undone() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    let big = root.join("big.lock");
    fs::write(&big, vec![b'a'; MAX_COPY_BYTES as usize + 1]).unwrap();
    let p = protector(&root, &["*.lock"]);
    let cp = p.begin().unwrap();
    fs::write(&big, "short\n").unwrap();
    assert_eq!(
        cp.settle(),
        [change("big.lock", "*.lock", Action::Reported)]
    );
    assert_eq!(fs::read_to_string(&big).unwrap(), "short\n");
}

#[test]
fn a_protected_symlink_gets_back_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink("one", root.join("l.lock")).unwrap();
    let p = protector(&root, &["*.lock"]);
    let cp = p.begin().unwrap();
    fs::remove_file(root.join("l.lock")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("l.lock")).unwrap();
    assert_eq!(cp.settle(), [change("l.lock", "*.lock", Action::Restored)]);
    assert_eq!(
        fs::read_link(root.join("l.lock")).unwrap(),
        Path::new("one")
    );
}

/// Protectors of one root directory share a count of running commands:
/// while one runs, another's record is not brought up to date, so the
/// first command's change is not taken for the host's.
#[test]
fn protectors_of_one_root_share_the_record_while_a_command_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("a.lock"), "v1\n").unwrap();
    let p1 = protector(&root, &["*.lock"]);
    let p2 = protector(&root, &["*.lock"]);
    let first = p1.begin().unwrap();
    fs::write(root.join("a.lock"), "by the first command\n").unwrap();
    let second = p2.begin().unwrap();
    assert_eq!(
        second.settle(),
        [change("a.lock", "*.lock", Action::Restored)]
    );
    assert!(first.settle().is_empty());
    assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "v1\n");
}
