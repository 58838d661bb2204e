//! The record and the check on real files, without a shell: what a
//! command would do is done here between `begin` and `settle`. Every test
//! here also runs with the ctime walk forced
//! (`every_test_here_also_holds_with_the_ctime_walk_forced`).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use sandgate_fileguard::GuardBuilder;
use sandgate_protect::{
    Action, Change, Checkpoint, Detection, Protector, DETECTION_ENV, MAX_COPY_BYTES,
};

fn forced() -> bool {
    std::env::var_os(DETECTION_ENV).is_some_and(|v| v == "ctime")
}

fn protector(root: &Path, patterns: &[&str]) -> Arc<Protector> {
    let guard = GuardBuilder::new().patterns(patterns).build().unwrap();
    Arc::new(Protector::new(root, guard).unwrap())
}

/// The detection in use is the one this run asked for: inotify, unless
/// the ctime walk was forced (so the forced run cannot pass on inotify).
#[test]
fn the_detection_is_the_one_this_run_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let p = protector(tmp.path(), &["*.lock"]);
    let cp = p.begin().unwrap();
    let d = p.detection();
    if forced() {
        assert!(matches!(d, Detection::CtimeWalk(_)), "{d}");
    } else {
        assert_eq!(d, Detection::Inotify);
    }
    assert!(cp.settle().is_empty());
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

/// Pins a limit ("What sandgate does not protect"): a protected file too
/// large to copy is recorded by identity only, so once it is moved out of
/// the write root (or removed) nothing beneath the root holds it, and the
/// check can only say so. Within the root it comes back by its inode
/// (`a_file_too_large_to_copy_renamed_away_is_renamed_back`).
#[test]
fn protect18_a_file_too_large_to_copy_moved_out_of_the_root_is_only_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    let big = root.join("big.lock");
    fs::write(&big, vec![b'a'; MAX_COPY_BYTES as usize + 1]).unwrap();
    let p = protector(&root, &["*.lock"]);
    let cp = p.begin().unwrap();
    let away = tmp.path().join("away");
    fs::rename(&big, &away).unwrap();
    assert_eq!(
        cp.settle(),
        [change("big.lock", "*.lock", Action::Reported)]
    );
    assert!(fs::symlink_metadata(&big).is_err());
    assert_eq!(fs::metadata(&away).unwrap().len(), MAX_COPY_BYTES + 1);
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

/// A command that takes read, search or write permission away from a
/// directory (`chmod 000`, `chmod 555`) after changing what it holds must
/// not hide the change from a host that is not root: the directory gets its
/// recorded permissions back, so that a new protected entry in it is
/// quarantined and a changed one restored, instead of being left in place
/// and taken into the record by the next `begin` as the host's own doing.
/// (Root reads and writes regardless of permissions; the test holds there
/// too.)
#[test]
fn a_directory_made_unreadable_or_unwritable_still_has_its_changes_undone() {
    for mode in [0o000, 0o100, 0o300, 0o500, 0o555] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("w");
        fs::create_dir_all(root.join(".github/workflows")).unwrap();
        fs::write(root.join(".github/workflows/ci.yml"), "ci v1\n").unwrap();
        fs::create_dir_all(root.join("pkg/deep")).unwrap();
        fs::write(root.join("pkg/deep/a.lock"), "a v1\n").unwrap();
        let p = protector(&root, &[".github/**", "*.lock"]);
        let cp = p.begin().unwrap();
        fs::write(root.join(".github/workflows/evil.yml"), "evil\n").unwrap();
        fs::write(root.join("pkg/deep/a.lock"), "evil\n").unwrap();
        fs::write(root.join("pkg/deep/b.lock"), "evil\n").unwrap();
        for dir in [".github/workflows", "pkg/deep", "pkg"] {
            fs::set_permissions(root.join(dir), fs::Permissions::from_mode(mode)).unwrap();
        }
        let changes = cp.settle();
        let restore = |dir: &str| {
            // Whatever happened, let the test clean up and look.
            let _ = fs::set_permissions(root.join(dir), fs::Permissions::from_mode(0o755));
        };
        for dir in ["pkg", "pkg/deep", ".github/workflows"] {
            restore(dir);
        }
        assert_eq!(
            changes,
            [
                change(".github/workflows", ".github/**", Action::Restored),
                change(
                    ".github/workflows/evil.yml",
                    ".github/**",
                    Action::Quarantined
                ),
                change("pkg/deep/a.lock", "*.lock", Action::Restored),
                change("pkg/deep/b.lock", "*.lock", Action::Quarantined),
            ],
            "mode {mode:o}"
        );
        assert!(!root.join(".github/workflows/evil.yml").exists());
        assert!(!root.join("pkg/deep/b.lock").exists());
        assert_eq!(
            fs::read_to_string(root.join("pkg/deep/a.lock")).unwrap(),
            "a v1\n"
        );
        // Nothing is left for the next record to take as the host's.
        assert!(p.begin().unwrap().settle().is_empty());
    }
}

/// A protected file too large to copy (the same holds for a fifo) is
/// recorded by identity only; when a command renames it away beneath the
/// root (or links it elsewhere and removes it), it is found again by its
/// inode and renamed back, as the crate documents, instead of being
/// reported lost.
#[test]
fn a_file_too_large_to_copy_renamed_away_is_renamed_back() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join("sub")).unwrap();
    let big = root.join("big.lock");
    fs::write(&big, vec![b'a'; MAX_COPY_BYTES as usize + 1]).unwrap();
    let ino = fs::metadata(&big).unwrap().ino();
    let p = protector(&root, &["*.lock"]);

    let cp = p.begin().unwrap();
    fs::rename(&big, root.join("sub/moved")).unwrap();
    assert_eq!(
        cp.settle(),
        [change("big.lock", "*.lock", Action::Restored)]
    );
    assert_eq!(fs::metadata(&big).unwrap().ino(), ino);
    assert!(!root.join("sub/moved").exists());

    // Linked elsewhere, then removed, and something else put at its name.
    let cp = p.begin().unwrap();
    fs::hard_link(&big, root.join("keep")).unwrap();
    fs::remove_file(&big).unwrap();
    fs::write(&big, "impostor\n").unwrap();
    assert_eq!(
        cp.settle(),
        [change("big.lock", "*.lock", Action::Restored)]
    );
    assert_eq!(fs::metadata(&big).unwrap().ino(), ino);
    assert_eq!(fs::metadata(&big).unwrap().len(), MAX_COPY_BYTES + 1);

    // Renamed away and changed: put back, but reported, since it is not
    // what was recorded.
    let cp = p.begin().unwrap();
    fs::rename(&big, root.join("sub/moved")).unwrap();
    fs::write(root.join("sub/moved"), "short\n").unwrap();
    assert_eq!(
        cp.settle(),
        [change("big.lock", "*.lock", Action::Reported)]
    );
    assert_eq!(fs::metadata(&big).unwrap().ino(), ino);
}

/// A directory the host keeps read-only (`chmod a-w .github/workflows`, a
/// common extra guard) does not stop the restore: a command that makes it
/// writable, changes a protected file, adds another and makes it read-only
/// again has both undone by a host that is not root, and the directory
/// keeps its read-only mode.
#[test]
fn a_read_only_directory_does_not_stop_the_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    let wf = root.join(".github/workflows");
    fs::create_dir_all(&wf).unwrap();
    fs::write(wf.join("ci.yml"), "ci v1\n").unwrap();
    fs::create_dir_all(root.join("pkg")).unwrap();
    fs::write(root.join("pkg/a.lock"), "a v1\n").unwrap();
    for dir in [&wf, &root.join("pkg")] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
    }
    let p = protector(&root, &[".github/**", "*.lock"]);
    let cp = p.begin().unwrap();
    for dir in [&wf, &root.join("pkg")] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::write(wf.join("ci.yml"), "evil\n").unwrap();
    fs::write(wf.join("evil.yml"), "evil\n").unwrap();
    fs::remove_file(root.join("pkg/a.lock")).unwrap();
    fs::write(root.join("pkg/b.lock"), "evil\n").unwrap();
    for dir in [&wf, &root.join("pkg")] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
    }
    let changes = cp.settle();
    let modes: Vec<u32> = [&wf, &root.join("pkg")]
        .iter()
        .map(|d| fs::metadata(d).unwrap().mode() & 0o7777)
        .collect();
    let ci = fs::read_to_string(wf.join("ci.yml")).unwrap();
    let a = fs::read_to_string(root.join("pkg/a.lock"));
    let left = (
        wf.join("evil.yml").exists(),
        root.join("pkg/b.lock").exists(),
    );
    for dir in [&wf, &root.join("pkg")] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    assert_eq!(
        changes,
        [
            change(".github/workflows/ci.yml", ".github/**", Action::Restored),
            change(
                ".github/workflows/evil.yml",
                ".github/**",
                Action::Quarantined
            ),
            change("pkg/a.lock", "*.lock", Action::Restored),
            change("pkg/b.lock", "*.lock", Action::Quarantined),
        ]
    );
    assert_eq!(ci, "ci v1\n");
    assert_eq!(a.unwrap(), "a v1\n");
    assert_eq!(left, (false, false));
    assert_eq!(modes, [0o555, 0o555]);
}

/// A directory the command makes and leaves unreadable (`mkdir d; touch
/// d/x.lock; chmod 000 d`), at any depth of a new tree, is still searched
/// by a host that is not root: it is given the owner's permissions, and the
/// protected entry in it goes to the quarantine.
#[test]
fn a_new_directory_left_unreadable_is_searched_anyway() {
    for mode in [0o000, 0o100, 0o300, 0o500] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("w");
        fs::create_dir(&root).unwrap();
        let p = protector(&root, &["*.lock"]);
        let cp = p.begin().unwrap();
        fs::create_dir_all(root.join("d/e")).unwrap();
        fs::write(root.join("d/x.lock"), "evil\n").unwrap();
        fs::write(root.join("d/e/y.lock"), "evil\n").unwrap();
        for dir in ["d/e", "d"] {
            fs::set_permissions(root.join(dir), fs::Permissions::from_mode(mode)).unwrap();
        }
        let changes = cp.settle();
        for dir in ["d", "d/e"] {
            let _ = fs::set_permissions(root.join(dir), fs::Permissions::from_mode(0o755));
        }
        assert_eq!(
            changes,
            [
                change("d/e/y.lock", "*.lock", Action::Quarantined),
                change("d/x.lock", "*.lock", Action::Quarantined),
            ],
            "mode {mode:o}"
        );
        assert!(!root.join("d/x.lock").exists());
        assert!(!root.join("d/e/y.lock").exists());
    }
}

/// The quarantine beside the root, in a parent others may write (a write
/// root directly in `/tmp`), made there before by someone else: a
/// directory of another user (as root here: uid 65534's), one anyone may
/// write, or a symlink to one. The command's versions of protected files
/// must not be moved there, out of a write root only its owner may read:
/// whoever holds that directory could read, move or swap them. Before,
/// they were: the quarantine went into whatever stood at that name. Now
/// such a directory is passed over and the quarantine made inside the
/// root.
#[test]
fn protect18_a_quarantine_directory_someone_else_holds_is_not_used() {
    let me = rustix::process::geteuid().as_raw();
    for planted in ["other-writable", "foreign-owner", "symlink"] {
        if planted == "foreign-owner" && me != 0 {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("shared");
        fs::create_dir(&base).unwrap();
        // A shared directory like /tmp.
        fs::set_permissions(&base, fs::Permissions::from_mode(0o1777)).unwrap();
        let root = base.join("w");
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
        fs::write(root.join("a.lock"), "v1\n").unwrap();
        let held = base.join("held");
        fs::create_dir(&held).unwrap();
        fs::set_permissions(&held, fs::Permissions::from_mode(0o777)).unwrap();
        let q = base.join(".w.sandgate-quarantine");
        match planted {
            "symlink" => std::os::unix::fs::symlink(&held, &q).unwrap(),
            _ => {
                fs::create_dir(&q).unwrap();
                fs::set_permissions(&q, fs::Permissions::from_mode(0o777)).unwrap();
                if planted == "foreign-owner" {
                    fs::set_permissions(&q, fs::Permissions::from_mode(0o755)).unwrap();
                    std::os::unix::fs::chown(&q, Some(65534), Some(65534)).unwrap();
                }
            }
        }
        let p = protector(&root, &["*.lock"]);
        let cp = p.begin().unwrap();
        fs::write(root.join("a.lock"), "private\n").unwrap();
        assert_eq!(
            cp.settle(),
            [change("a.lock", "*.lock", Action::Restored)],
            "{planted}"
        );
        assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "v1\n");
        let outside: Vec<_> = fs::read_dir(&q).unwrap().collect();
        assert!(
            outside.is_empty(),
            "{planted}: the quarantine went into {}",
            q.display()
        );
        assert_eq!(fs::read_dir(&held).unwrap().count(), 0, "{planted}");
        // It is inside the root instead.
        let inside = root.join(".sandgate-quarantine");
        let stamp = fs::read_dir(&inside)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        assert_eq!(
            fs::read_to_string(stamp.join("a.lock")).unwrap(),
            "private\n"
        );
    }
}

/// When the quarantine cannot be made beside the root (its parent is not
/// writable, or the root is a mount point of its own) it is made inside
/// the root, where the command can write too. Whatever the command put at
/// `.sandgate-quarantine` (a file, a symlink to a protected directory)
/// must neither stop the restore nor make it put the quarantine inside a
/// protected directory. (As root the quarantine is made beside the root
/// regardless; the test holds there too.)
#[test]
fn a_planted_quarantine_name_inside_the_root_does_not_stop_the_restore() {
    for planted in ["file", "symlink", "unreadable"] {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("base");
        let root = base.join("w");
        fs::create_dir_all(root.join(".github")).unwrap();
        fs::write(root.join("a.lock"), "a v1\n").unwrap();
        let p = protector(&root, &["*.lock", ".github/**"]);
        // The parent refuses the quarantine beside the root.
        fs::set_permissions(&base, fs::Permissions::from_mode(0o555)).unwrap();
        let cp = p.begin().unwrap();
        fs::write(root.join("a.lock"), "evil\n").unwrap();
        fs::write(root.join("b.lock"), "evil\n").unwrap();
        let q = root.join(".sandgate-quarantine");
        match planted {
            "file" => fs::write(&q, "").unwrap(),
            "symlink" => std::os::unix::fs::symlink(".github", &q).unwrap(),
            _ => {
                fs::create_dir(&q).unwrap();
                fs::set_permissions(&q, fs::Permissions::from_mode(0o000)).unwrap();
            }
        }
        let changes = cp.settle();
        fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).unwrap();
        if planted == "unreadable" {
            fs::set_permissions(&q, fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert_eq!(
            changes,
            [
                change("a.lock", "*.lock", Action::Restored),
                change("b.lock", "*.lock", Action::Quarantined),
            ],
            "{planted}"
        );
        assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "a v1\n");
        assert!(!root.join("b.lock").exists());
        assert_eq!(
            fs::read_dir(root.join(".github")).unwrap().count(),
            0,
            "{planted}: nothing is put in the protected directory"
        );
    }
}

/// A large protected file with another name the host made before the
/// record is linked back to its protected name when the command removes
/// that name: the host's other name stays where it was.
#[test]
fn a_file_too_large_to_copy_keeps_the_hosts_other_names() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join("other")).unwrap();
    let big = root.join("big.lock");
    fs::write(&big, vec![b'a'; MAX_COPY_BYTES as usize + 1]).unwrap();
    fs::hard_link(&big, root.join("other/alias")).unwrap();
    let ino = fs::metadata(&big).unwrap().ino();
    let p = protector(&root, &["*.lock"]);
    let cp = p.begin().unwrap();
    fs::remove_file(&big).unwrap();
    fs::write(root.join("other/new"), "unrelated\n").unwrap();
    assert_eq!(
        cp.settle(),
        [change("big.lock", "*.lock", Action::Restored)]
    );
    assert_eq!(fs::metadata(&big).unwrap().ino(), ino);
    assert_eq!(fs::metadata(root.join("other/alias")).unwrap().ino(), ino);
    assert_eq!(fs::metadata(&big).unwrap().nlink(), 2);
}

/// A protected directory whose mode and owner the command changed (as
/// root) is given both back and reported once.
#[test]
fn a_directory_given_back_mode_and_owner_is_reported_once() {
    if rustix::process::geteuid().as_raw() != 0 {
        return; // chown to another user needs root
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join(".github")).unwrap();
    let p = protector(&root, &[".github/**"]);
    let cp = p.begin().unwrap();
    std::os::unix::fs::chown(root.join(".github"), Some(65534), Some(65534)).unwrap();
    fs::set_permissions(root.join(".github"), fs::Permissions::from_mode(0o000)).unwrap();
    assert_eq!(
        cp.settle(),
        [change(".github", ".github/**", Action::Restored)]
    );
    let m = fs::metadata(root.join(".github")).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o755));
}

/// The write root itself made unreadable or unsearchable by the command
/// (`chmod 000 .`) gets its recorded permissions back too: even `.` cannot
/// be looked up in a directory without search permission, so the root's
/// own descriptor is used.
#[test]
fn the_write_root_made_unreadable_still_has_its_changes_undone() {
    for mode in [0o000, 0o100, 0o500] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("w");
        fs::create_dir(&root).unwrap();
        fs::write(root.join("a.lock"), "a v1\n").unwrap();
        let p = protector(&root, &["*.lock"]);
        let cp = p.begin().unwrap();
        fs::write(root.join("a.lock"), "evil\n").unwrap();
        fs::write(root.join("b.lock"), "evil\n").unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(mode)).unwrap();
        let changes = cp.settle();
        let now = fs::metadata(&root).unwrap().mode() & 0o7777;
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            changes,
            [
                change("a.lock", "*.lock", Action::Restored),
                change("b.lock", "*.lock", Action::Quarantined),
            ],
            "mode {mode:o}"
        );
        assert_eq!(now, 0o755);
        assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "a v1\n");
        assert!(!root.join("b.lock").exists());
    }
}

/// The shell's check and the file tools' guard agree on every spelling:
/// for names made on disk in many case, normalization and look-alike
/// forms, a command's new entry is quarantined exactly when the guard
/// refuses writing that name, and left alone otherwise.
#[test]
fn new_entries_are_quarantined_exactly_where_the_guard_refuses_a_write() {
    let patterns = [
        "*.lock",
        ".github/**",
        "stra\u{df}e",
        "key.pem",
        "caf[e\u{301}]",
        "\u{3c3}\u{3c2}",
        "**/.git/config",
    ];
    let names = [
        "A.LOCK",
        "a.loc\u{212a}",
        "a.lo\u{107}k",
        "x.\u{13b}OCK",
        ".GITHUB",
        ".git\u{1e96}ub",
        ".Github",
        "STRASSE",
        "strasse",
        "stra\u{1e9e}e",
        "stras\u{17f}e",
        "straise",
        "\u{212a}EY.PEM",
        "key.pe\u{1e3f}",
        "caf\u{e9}",
        "CAFE\u{301}",
        "cafe",
        "\u{3a3}\u{3a3}",
        "\u{3c2}\u{3c3}",
        "\u{3c3}s",
        "sub",
        "ﬁle.lock",
        "ﬁle.txt",
        ".git\u{200c}hub",
        "stra\u{feff}sse",
        "a.lo\u{200b}ck",
        ".git\u{ad}hub",
    ];
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join("r/.GIT")).unwrap();
    let p = protector(&root, &patterns);
    let guard = GuardBuilder::new().patterns(patterns).build().unwrap();
    let cp = p.begin().unwrap();
    let mut made = vec!["r/.GIT/Config".to_owned(), "r/.GIT/other".to_owned()];
    for n in names {
        made.push(n.to_owned());
    }
    for m in &made {
        fs::write(root.join(m), "new\n").unwrap();
    }
    let quarantined: Vec<String> = cp
        .settle()
        .into_iter()
        .inspect(|c| assert_eq!(c.action, Action::Quarantined, "{c:?}"))
        .map(|c| c.path)
        .collect();
    let mut refused: Vec<String> = made
        .iter()
        .filter(|m| guard.check_write(m, None).is_refused())
        .cloned()
        .collect();
    refused.sort();
    assert_eq!(quarantined, refused);
    for m in &made {
        assert_eq!(root.join(m).exists(), !refused.contains(m), "{m}");
    }
    // Sanity: the spellings that fold to a pattern are among them.
    for m in [
        "A.LOCK",
        "a.loc\u{212a}",
        ".GITHUB",
        "STRASSE",
        "stras\u{17f}e",
        "CAFE\u{301}",
        "r/.GIT/Config",
        ".git\u{200c}hub",
        "stra\u{feff}sse",
        "a.lo\u{200b}ck",
        ".git\u{ad}hub",
    ] {
        assert!(refused.iter().any(|r| r == m), "{m}");
    }
    for m in ["cafe", "straise", "ﬁle.txt", "r/.GIT/other", "sub"] {
        assert!(!refused.iter().any(|r| r == m), "{m}");
    }
}

/// A command run as root keeps `CAP_LINUX_IMMUTABLE`: it can mark what it
/// leaves immutable or append-only (`chattr +i`, `chattr +a`). Neither may
/// keep the change: the flags come off what goes to the quarantine, and a
/// directory's flags come off only while an entry is moved out of it or
/// into it. Only root can set these flags; elsewhere there is nothing to
/// test. Skipped where the filesystem has no such flags.
#[test]
fn immutable_or_append_only_flags_do_not_keep_a_change() {
    use rustix::fs::{ioctl_getflags, ioctl_setflags, IFlags};
    if rustix::process::geteuid().as_raw() != 0 {
        return;
    }
    let set = |p: &Path, f: IFlags| -> bool {
        let Ok(file) = fs::File::open(p) else {
            return false;
        };
        let Ok(old) = ioctl_getflags(&file) else {
            return false;
        };
        ioctl_setflags(&file, (old - (IFlags::IMMUTABLE | IFlags::APPEND)) | f).is_ok()
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    let wf = root.join(".github/workflows");
    fs::create_dir_all(&wf).unwrap();
    fs::write(wf.join("ci.yml"), "ci v1\n").unwrap();
    fs::write(root.join("a.lock"), "a v1\n").unwrap();
    if !set(&root.join("a.lock"), IFlags::empty()) {
        return; // no inode flags on this filesystem
    }
    let p = protector(&root, &[".github/**", "*.lock"]);
    let cp = p.begin().unwrap();
    fs::write(root.join("a.lock"), "evil\n").unwrap();
    fs::write(root.join("b.lock"), "evil\n").unwrap();
    fs::write(wf.join("ci.yml"), "evil\n").unwrap();
    fs::write(wf.join("evil.yml"), "evil\n").unwrap();
    assert!(set(&root.join("a.lock"), IFlags::IMMUTABLE));
    assert!(set(&root.join("b.lock"), IFlags::APPEND));
    assert!(set(&wf.join("evil.yml"), IFlags::IMMUTABLE));
    assert!(set(&wf, IFlags::IMMUTABLE));
    let changes = cp.settle();
    let wf_flags = fs::File::open(&wf)
        .map(|f| ioctl_getflags(&f).unwrap())
        .unwrap();
    // Let the temporary directory go, whatever happened.
    for f in [
        root.join("a.lock"),
        root.join("b.lock"),
        wf.join("evil.yml"),
        wf.clone(),
    ] {
        set(&f, IFlags::empty());
    }
    assert_eq!(
        changes,
        [
            change(".github/workflows/ci.yml", ".github/**", Action::Restored),
            change(
                ".github/workflows/evil.yml",
                ".github/**",
                Action::Quarantined
            ),
            change("a.lock", "*.lock", Action::Restored),
            change("b.lock", "*.lock", Action::Quarantined),
        ]
    );
    assert!(
        wf_flags.contains(IFlags::IMMUTABLE),
        "the directory keeps its flag"
    );
    assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "a v1\n");
    assert_eq!(fs::read_to_string(wf.join("ci.yml")).unwrap(), "ci v1\n");
    assert!(!root.join("b.lock").exists() && !wf.join("evil.yml").exists());
}

/// Runs this file's other tests again in a child with the ctime walk
/// forced through the environment.
#[test]
fn every_test_here_also_holds_with_the_ctime_walk_forced() {
    if forced() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--skip",
            "every_test_here_also_holds_with_the_ctime_walk_forced",
        ])
        .env(DETECTION_ENV, "ctime")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "with the ctime walk forced:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("test result: ok. 34 passed"), "{stdout}");
}

/// A new protected entry deeper than the kernel can name in one path
/// (the command made it one directory at a time) is quarantined like any
/// other, never left in place: the quarantine makes its parents one
/// component at a time too.
#[test]
fn a_new_protected_entry_deeper_than_a_path_can_name_is_quarantined() {
    use rustix::fs::{mkdirat, openat, Mode, OFlags};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    let p = protector(&root, &["*.lock"]);
    let cp = p.begin().unwrap();
    // 1,000 levels of `dddd/`: 5,000 bytes, past PATH_MAX (4096), made
    // one directory at a time.
    let dirf = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let descend = |make: bool| {
        let mut fd = openat(rustix::fs::CWD, &root, dirf, Mode::empty()).unwrap();
        for _ in 0..1000 {
            if make {
                mkdirat(&fd, "dddd", Mode::from_raw_mode(0o755)).unwrap();
            }
            fd = openat(&fd, "dddd", dirf, Mode::empty()).unwrap();
        }
        fd
    };
    let bottom = descend(true);
    let f = openat(
        &bottom,
        "x.lock",
        OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    drop((f, bottom));
    let deep = format!("{}x.lock", "dddd/".repeat(1000));
    let changes = cp.settle();
    let left = rustix::fs::statat(
        descend(false),
        "x.lock",
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    );
    let actions: Vec<_> = changes.iter().map(|c| c.action).collect();
    assert!(
        left.is_err(),
        "the deep x.lock was left in place: {actions:?}"
    );
    assert_eq!(changes, [change(&deep, "*.lock", Action::Quarantined)]);
    // One the host made is recorded, and an unchanged one reported as
    // nothing.
    let f = openat(
        descend(false),
        "y.lock",
        OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    drop(f);
    let cp = p.begin().unwrap();
    assert_eq!(cp.settle(), []);
}

/// The process's peak resident set (`VmHWM`), in KiB.
fn peak_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A command that fills a directory the record holds with more entries
/// than one settle reads (the bound is lowered for the test: a command
/// could make millions) gets a settle that stops there and says so, never
/// one that reads without end nor one that reports success: the recorded
/// entries are still compared and restored, and the report names the
/// bound.
#[test]
fn a_settle_reads_a_bounded_number_of_entries_and_says_where_it_stopped() {
    // SETTLE_CAP and SETTLE_FLOOD measure other sizes by hand.
    let from_env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let cap = from_env("SETTLE_CAP", 1_000);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join("d")).unwrap();
    fs::write(root.join("d/keep.lock"), "v1\n").unwrap();
    let guard = GuardBuilder::new().patterns(["*.lock"]).build().unwrap();
    let p = Arc::new(Protector::new(&root, guard).unwrap().with_entry_cap(cap));
    let n = from_env("SETTLE_FLOOD", 3 * cap);
    let cp = p.begin().unwrap();
    // The command: the recorded file rewritten, the recorded directory
    // flooded with long names.
    fs::write(root.join("d/keep.lock"), "v2\n").unwrap();
    for i in 0..n {
        std::os::unix::fs::symlink("x", root.join(format!("d/{i:0>200}"))).unwrap();
    }
    let (t0, peak0) = (std::time::Instant::now(), peak_kib());
    let changes = cp.settle();
    eprintln!(
        "settle of {n} entries: {:?}, peak resident set +{} KiB",
        t0.elapsed(),
        peak_kib().saturating_sub(peak0)
    );
    assert_eq!(fs::read(root.join("d/keep.lock")).unwrap(), b"v1\n");
    assert!(
        changes.contains(&change("d/keep.lock", "*.lock", Action::Restored)),
        "{changes:?}"
    );
    let stop = changes
        .iter()
        .find(|c| c.path == "." && c.action == Action::Reported)
        .unwrap_or_else(|| panic!("no report of the bound: {changes:?}"));
    assert!(stop.pattern.contains(&cap.to_string()), "{stop:?}");
}

/// Runs the test `name` in a child of its own limited to 64 descriptors,
/// whose limit touches no other test: in the parent, starts the child,
/// asserts that the test passed there and answers false (the parent is
/// done); in the child, sets the limit and answers true (run the test).
fn with_few_descriptors(name: &str) -> bool {
    const CHILD: &str = "SANDGATE_TEST_FEW_DESCRIPTORS";
    if std::env::var_os(CHILD).is_none() {
        let exe = std::env::current_exe().unwrap();
        let out = Command::new(exe)
            .args(["--exact", name, "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return false;
    }
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let hard = getrlimit(Resource::Nofile).maximum;
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(64),
            maximum: hard,
        },
    )
    .unwrap();
    true
}

/// A tree wider than the process has descriptors (a directory of 200
/// directories, the process limited to 64 descriptors here; hosts commonly
/// give 1,024) is recorded and checked whole: every protected file in it is
/// restored, and every new protected entry in a wide directory the command
/// made is quarantined. Run in a child of its own, whose descriptor limit
/// touches no other test.
#[test]
fn a_tree_wider_than_the_descriptor_limit_is_recorded_and_checked_whole() {
    if !with_few_descriptors("a_tree_wider_than_the_descriptor_limit_is_recorded_and_checked_whole")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    for i in 0..200 {
        fs::create_dir_all(root.join(format!("a/d{i}"))).unwrap();
        fs::write(root.join(format!("a/d{i}/x.lock")), "v1\n").unwrap();
    }
    let p = protector(&root, &["*.lock"]);
    let cp = p.begin().unwrap();
    for i in 0..200 {
        fs::write(root.join(format!("a/d{i}/x.lock")), "v2\n").unwrap();
        fs::create_dir_all(root.join(format!("n/e{i}"))).unwrap();
        fs::write(root.join(format!("n/e{i}/y.lock")), "new\n").unwrap();
    }
    let changes = cp.settle();
    let kept: Vec<_> = (0..200)
        .filter(|i| fs::read(root.join(format!("a/d{i}/x.lock"))).unwrap() != b"v1\n")
        .collect();
    assert!(kept.is_empty(), "changes kept in a/d{kept:?}: {changes:?}");
    let left: Vec<_> = (0..200)
        .filter(|i| root.join(format!("n/e{i}/y.lock")).exists())
        .collect();
    assert!(
        left.is_empty(),
        "new entries left in n/e{left:?}: {changes:?}"
    );
    assert_eq!(changes.len(), 400, "{changes:?}");
}

/// A tree wide at every level (200 directories, each holding a directory
/// that holds a protected file; the process limited to 64 descriptors) is
/// recorded whole: the record's walk holds only a few of the directories
/// still to be walked open, and opens the others again by path, so every
/// protected file is restored. Run in a child of its own, whose descriptor
/// limit touches no other test.
#[test]
fn a_tree_of_many_directories_with_subdirectories_is_recorded_within_the_descriptor_limit() {
    if !with_few_descriptors(
        "a_tree_of_many_directories_with_subdirectories_is_recorded_within_the_descriptor_limit",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    for i in 0..200 {
        fs::create_dir_all(root.join(format!("d{i}/s/t"))).unwrap();
        fs::write(root.join(format!("d{i}/s/x.lock")), "v1\n").unwrap();
        fs::write(root.join(format!("d{i}/s/t/y.lock")), "v1\n").unwrap();
    }
    let p = protector(&root, &["*.lock"]);
    let cp = p.begin().unwrap();
    for i in 0..200 {
        fs::write(root.join(format!("d{i}/s/x.lock")), "v2\n").unwrap();
        fs::write(root.join(format!("d{i}/s/t/y.lock")), "v2\n").unwrap();
    }
    let changes = cp.settle();
    let kept: Vec<_> = (0..200)
        .flat_map(|i| [format!("d{i}/s/x.lock"), format!("d{i}/s/t/y.lock")])
        .filter(|f| fs::read(root.join(f)).unwrap() != b"v1\n")
        .collect();
    assert!(kept.is_empty(), "changes kept in {kept:?}: {changes:?}");
    assert_eq!(changes.len(), 400, "{changes:?}");
}

/// A command that floods a directory with more entries than one settle
/// reads leaves the rest to the next command's record update, which reads
/// no more than the settle does (the bound lowered for the test) and says
/// what it did not record: it neither reads the flood whole (time without
/// bound before the next command starts) nor takes every protected entry
/// of the flood into the record unsaid.
#[test]
fn protect6_the_record_update_after_a_flood_reads_a_bounded_number_of_entries() {
    let cap = 200;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join("d")).unwrap();
    fs::write(root.join("keep.lock"), "v1\n").unwrap();
    let guard = GuardBuilder::new().patterns(["*.lock"]).build().unwrap();
    let p = Arc::new(Protector::new(&root, guard).unwrap().with_entry_cap(cap));
    let cp = p.begin().unwrap();
    for i in 0..10 * cap {
        fs::write(root.join(format!("d/f{i}.lock")), "").unwrap();
        fs::create_dir(root.join(format!("d/s{i}"))).unwrap();
    }
    let changes = cp.settle();
    assert!(changes.iter().any(|c| c.path == "."), "{changes:?}");
    // The next command's record update.
    let cp = p.begin().unwrap();
    let recorded = cp.protected_entries().len();
    fs::write(root.join("keep.lock"), "v2\n").unwrap();
    let changes = cp.settle();
    assert!(
        recorded <= cap + 1,
        "the update recorded {recorded} protected entries, past the bound of {cap} entries read"
    );
    let told = changes
        .iter()
        .find(|c| c.path == "." && c.pattern.contains("the record before this command"))
        .unwrap_or_else(|| panic!("the update's bound is not reported: {changes:?}"));
    assert_eq!(told.action, Action::Reported);
    assert!(told.pattern.contains(&cap.to_string()), "{told:?}");
    assert_eq!(fs::read(root.join("keep.lock")).unwrap(), b"v1\n");
    // The flood gone, the record is whole again and says nothing more.
    fs::remove_dir_all(root.join("d")).unwrap();
    let cp = p.begin().unwrap();
    assert_eq!(cp.protected_entries().len(), 1);
    assert_eq!(cp.settle(), []);
}

/// A bind mount beneath the root (root only), unmounted when dropped.
struct Bind(std::path::PathBuf);

impl Bind {
    /// Binds `from` at `at`; `None` when this process cannot mount.
    fn new(from: &Path, at: &Path) -> Option<Bind> {
        let ok = Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Bind(at.to_path_buf()))
    }
}

impl Drop for Bind {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A directory reached under two names beneath the root (the root bound
/// inside itself, a directory bound beside itself: the host's doing, as
/// root) is recorded without the walk looping (the kernel shows, beneath
/// a bind mount, the directory under the mount point, not the mount
/// again), and a new protected entry made through its first name is
/// quarantined like any other: the one watch the directory has (one inode)
/// names both of its names, not the last listed only.
#[test]
fn protect6_a_directory_bound_beneath_the_root_is_checked_under_every_name() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    for d in ["sub", "a", "b"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::write(root.join("x.lock"), "v1\n").unwrap();
    let Some(_itself) = Bind::new(&root, &root.join("sub")) else {
        eprintln!("skipped: this process cannot bind-mount (not root)");
        return;
    };
    let _beside = Bind::new(&root.join("a"), &root.join("b")).unwrap();
    let p = protector(&root, &["*.lock"]);
    let (tx, rx) = std::sync::mpsc::channel();
    let p2 = p.clone();
    std::thread::spawn(move || tx.send(p2.begin().unwrap()).unwrap());
    let cp = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the record's walk did not stop");
    fs::write(root.join("x.lock"), "v2\n").unwrap();
    fs::write(root.join("new.lock"), "").unwrap();
    fs::write(root.join("a/new.lock"), "").unwrap();
    let changes = cp.settle();
    assert_eq!(fs::read(root.join("x.lock")).unwrap(), b"v1\n");
    for left in ["new.lock", "a/new.lock"] {
        assert!(
            !root.join(left).exists(),
            "{left} was left in place: {changes:?}"
        );
    }
}

/// The check reopens by path the directories a command made past the 32 it
/// holds open. A process still running on the root (a second command)
/// swapping such a directory for a symlink to a directory outside the root,
/// over and over while the check runs, never has the check read through
/// it: the reopen follows no symlink, one component at a time from the
/// root, and takes the directory only if it is the one listed.
#[test]
fn protect6_a_directory_reopened_by_the_check_is_never_one_swapped_for_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    let out = tmp.path().join("out");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("evil.lock"), "outside\n").unwrap();
    let p = protector(&root, &["*.lock"]);
    let rounds = 60;
    let wide = 48;
    for round in 0..rounds {
        let cp = p.begin().unwrap();
        let n = root.join(format!("n{round}"));
        for k in 0..wide {
            fs::create_dir_all(n.join(format!("d{k}"))).unwrap();
            fs::write(n.join(format!("d{k}/x.lock")), "").unwrap();
        }
        let name = {
            let n = n.clone();
            move |k: usize, aside: bool| n.join(format!("{}d{k}", if aside { "." } else { "" }))
        };
        // Half of the time each directory is a symlink out.
        let changes = settle_racing(cp, {
            let (name, out) = (name.clone(), out.clone());
            move || {
                for k in 0..wide {
                    if fs::rename(name(k, false), name(k, true)).is_ok() {
                        let _ = std::os::unix::fs::symlink(&out, name(k, false));
                    }
                }
                for k in 0..wide {
                    if fs::remove_file(name(k, false)).is_ok() {
                        let _ = fs::rename(name(k, true), name(k, false));
                    }
                }
            }
        });
        // The racer stopped: each directory back under its own name.
        for k in 0..wide {
            if fs::symlink_metadata(name(k, true)).is_ok() {
                let _ = fs::remove_file(name(k, false));
                let _ = fs::rename(name(k, true), name(k, false));
            }
        }
        assert!(
            !changes.iter().any(|c| c.path.contains("evil.lock")),
            "the check read through a symlink out of the root: {changes:?}"
        );
        assert_eq!(fs::read(out.join("evil.lock")).unwrap(), b"outside\n");
        assert!(fs::read_dir(&out).unwrap().count() == 1);
    }
}

/// What the host changes while no command runs on the root is the host's
/// for every set of patterns: a record of other patterns, last brought up
/// to date before that change, must not put it back when its command
/// starts while another set's command runs.
#[test]
fn conc8_a_hosts_change_between_commands_stands_for_every_set_of_patterns() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("a.lock"), "v1\n").unwrap();
    let p1 = protector(&root, &["*.lock"]);
    let p2 = protector(&root, &["*.lock", "*.key"]);
    assert!(p2.begin().unwrap().settle().is_empty());
    fs::write(root.join("a.lock"), "v2 by the host\n").unwrap();
    let first = p1.begin().unwrap();
    let second = p2.begin().unwrap();
    let earlier = first.settle();
    let changes = second.settle();
    assert_eq!(
        fs::read_to_string(root.join("a.lock")).unwrap(),
        "v2 by the host\n",
        "the second settle answered {changes:?}"
    );
    assert!(earlier.is_empty(), "{earlier:?}");
    assert!(changes.is_empty(), "{changes:?}");
}

/// Two protectors of one root with different patterns (two executors of
/// different policies on one write root) each keep a record of their own.
/// One made while the other's command runs took that command's change to
/// a file both protect as the host's: the second command's check then put
/// the first command's version back after the first check had undone it.
/// So the first command under a set of patterns that has no record yet
/// waits until no command on the root runs, and its record is made then.
#[test]
fn conc8_a_first_command_under_new_patterns_waits_for_the_root_to_be_idle() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("a.lock"), "v1\n").unwrap();
    let p1 = protector(&root, &["*.lock"]);
    let p2 = protector(&root, &["*.lock", "*.key"]);
    let first = p1.begin().unwrap();
    fs::write(root.join("a.lock"), "by the first command\n").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let second = p2.begin().unwrap();
        tx.send(()).unwrap();
        second
    });
    // The second has not begun while the first command runs (not a
    // claim on speed: it must not begin at all before the first settles).
    let early = rx
        .recv_timeout(std::time::Duration::from_millis(300))
        .is_ok();
    assert_eq!(
        first.settle(),
        [change("a.lock", "*.lock", Action::Restored)]
    );
    let second = waiter.join().unwrap();
    let changes = second.settle();
    assert_eq!(
        fs::read_to_string(root.join("a.lock")).unwrap(),
        "v1\n",
        "the second settle answered {changes:?}"
    );
    assert!(!early, "the second command began while the first ran");
    assert!(changes.is_empty(), "{changes:?}");
}

/// A POSIX ACL as the kernel stores it in `system.posix_acl_*`: the
/// owner, the named user `uid`, the owning group, the mask and others.
fn acl_granting(uid: u32, perm: u16) -> Vec<u8> {
    const UNDEF: u32 = u32::MAX;
    let mut a = 2u32.to_le_bytes().to_vec();
    for (tag, p, id) in [
        (0x01u16, 7u16, UNDEF),
        (0x02, perm, uid),
        (0x04, 5, UNDEF),
        (0x10, 7, UNDEF),
        (0x20, 5, UNDEF),
    ] {
        a.extend_from_slice(&tag.to_le_bytes());
        a.extend_from_slice(&p.to_le_bytes());
        a.extend_from_slice(&id.to_le_bytes());
    }
    a
}

fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    let n = rustix::fs::lgetxattr(path, name, &mut buf[..]).ok()?;
    buf.truncate(n);
    Some(buf)
}

fn set(path: &Path, name: &str, value: &[u8]) {
    rustix::fs::lsetxattr(path, name, value, rustix::fs::XattrFlags::empty())
        .unwrap_or_else(|e| panic!("setxattr {name} on {}: {e}", path.display()));
}

/// A command can grant another user write to a protected directory, and
/// to every file made in it later, by an ACL: a named user in the access
/// ACL (with group write already in the mode, the mode does not move)
/// and in the default ACL, which the files the restore makes there take
/// too. Before, the check compared a directory's mode and owner only: the
/// ACLs and a `user.*` attribute stayed, unreported, and the restored
/// workflow came back carrying the command's default ACL; a restored
/// file also lost the host's own attributes. Now a protected entry's
/// extended attributes are recorded and given back.
#[test]
fn protect18_extended_attributes_and_acls_of_protected_entries_come_back() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join(".github/workflows")).unwrap();
    fs::write(root.join(".github/workflows/ci.yml"), "on: push\n").unwrap();
    fs::write(root.join("a.lock"), "v1\n").unwrap();
    for d in [".github", ".github/workflows"] {
        fs::set_permissions(root.join(d), fs::Permissions::from_mode(0o775)).unwrap();
    }
    for f in [".github/workflows/ci.yml", "a.lock"] {
        fs::set_permissions(root.join(f), fs::Permissions::from_mode(0o664)).unwrap();
    }
    // The host's own attributes, which stay.
    set(&root.join(".github"), "user.host", b"kept");
    set(&root.join("a.lock"), "user.host", b"kept");
    let p = protector(&root, &[".github/**", "*.lock"]);
    let cp = p.begin().unwrap();
    // Control: an unprotected directory keeps what the command set.
    fs::create_dir(root.join("src")).unwrap();
    set(&root.join("src"), "user.cmd", b"mine");
    let acl = acl_granting(12345, 7);
    for d in [".github", ".github/workflows", "."] {
        set(&root.join(d), "system.posix_acl_access", &acl);
        set(&root.join(d), "system.posix_acl_default", &acl);
    }
    set(&root.join(".github"), "user.cmd", b"x");
    set(&root.join(".github"), "user.host", b"changed");
    assert_eq!(
        fs::metadata(root.join(".github")).unwrap().mode() & 0o7777,
        0o775
    );
    fs::write(root.join(".github/workflows/ci.yml"), "on: evil\n").unwrap();
    fs::write(root.join("a.lock"), "v2\n").unwrap();
    assert_eq!(
        cp.settle(),
        [
            change(".github", ".github/**", Action::Restored),
            change(".github/workflows", ".github/**", Action::Restored),
            change(".github/workflows/ci.yml", ".github/**", Action::Restored),
            change("a.lock", "*.lock", Action::Restored),
        ]
    );
    for f in [
        ".github",
        ".github/workflows",
        ".github/workflows/ci.yml",
        "a.lock",
    ] {
        let path = root.join(f);
        assert_eq!(xattr(&path, "system.posix_acl_access"), None, "{f}");
        assert_eq!(xattr(&path, "system.posix_acl_default"), None, "{f}");
        assert_eq!(xattr(&path, "user.cmd"), None, "{f}");
        let want = if path.is_dir() { 0o775 } else { 0o664 };
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o7777, want, "{f}");
    }
    assert_eq!(
        xattr(&root.join(".github"), "user.host").as_deref(),
        Some(&b"kept"[..])
    );
    assert_eq!(
        xattr(&root.join("a.lock"), "user.host").as_deref(),
        Some(&b"kept"[..])
    );
    assert_eq!(
        fs::read_to_string(root.join(".github/workflows/ci.yml")).unwrap(),
        "on: push\n"
    );
    // The control stays, and the write root's own default ACL too.
    assert_eq!(
        xattr(&root.join("src"), "user.cmd").as_deref(),
        Some(&b"mine"[..])
    );
    assert!(xattr(&root, "system.posix_acl_default").is_some());
    assert!(p.begin().unwrap().settle().is_empty());
    // The host's own change between commands is the record from then on:
    // the next command's check keeps it.
    set(&root.join(".github"), "system.posix_acl_access", &acl);
    set(&root.join(".github"), "user.host", b"changed by the host");
    let cp = p.begin().unwrap();
    fs::write(root.join(".github/new.yml"), "x").unwrap();
    assert_eq!(
        cp.settle(),
        [change(".github/new.yml", ".github/**", Action::Quarantined)]
    );
    assert_eq!(
        xattr(&root.join(".github"), "system.posix_acl_access"),
        Some(acl)
    );
    assert_eq!(
        xattr(&root.join(".github"), "user.host").as_deref(),
        Some(&b"changed by the host"[..])
    );
}

/// Unmounts on the way out, a failed assertion included.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Pins a limit ("What sandgate does not protect"): undoing a change
/// takes room on the write root's filesystem (a quarantine directory, a
/// new inode and the recorded content for each entry put back). A command
/// that leaves that filesystem full, of blocks and inodes, leaves its
/// changes to protected files in place: the check can only report them.
/// Needs a small filesystem of its own: a tmpfs, which only root mounts
/// here (skipped otherwise).
#[test]
fn protect18_a_write_root_left_full_keeps_the_change_and_reports_it() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("m");
    fs::create_dir(&base).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k,nr_inodes=64", "protect18"])
        .arg(&base)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (not root)");
        return;
    }
    let _mounted = Mounted(base.clone());
    let root = base.join("w");
    fs::create_dir_all(root.join(".github/workflows")).unwrap();
    fs::write(root.join(".github/workflows/ci.yml"), "on: push\n").unwrap();
    fs::write(root.join("a.lock"), "v1\n").unwrap();
    let p = protector(&root, &[".github/**", "*.lock"]);
    let cp = p.begin().unwrap();
    fs::write(root.join("a.lock"), "evil\n").unwrap();
    fs::write(root.join(".github/workflows/ci.yml"), "on: evil\n").unwrap();
    // Every inode and block taken.
    let mut i = 0;
    while fs::write(root.join(format!("fill{i}")), vec![b'x'; 4096]).is_ok() {
        i += 1;
    }
    assert!(fs::create_dir(root.join("one-more")).is_err());
    assert_eq!(
        cp.settle(),
        [
            change(".github/workflows/ci.yml", ".github/**", Action::Reported),
            change("a.lock", "*.lock", Action::Reported),
        ]
    );
    assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "evil\n");
}

const FSIZE21_CHILD: &str = "SANDGATE_PROTECT_FSIZE21_CHILD";

/// In the child only: under a file size limit of 64 KiB, and with the
/// default disposition of `SIGXFSZ` (which ends the process), a protected
/// file of 128 KiB the command shortened cannot be written back: the
/// change is reported, not undone, and the process lives on.
#[test]
fn fsize21_child_restore() {
    let Some(root) = std::env::var_os(FSIZE21_CHILD) else {
        return;
    };
    let root = Path::new(&root);
    let limit = rustix::process::Rlimit {
        current: Some(64 << 10),
        maximum: Some(64 << 10),
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit).unwrap();
    let p = protector(root, &["*.lock"]);
    let cp = p.begin().unwrap();
    fs::write(root.join("a.lock"), "short\n").unwrap();
    assert_eq!(cp.settle(), [change("a.lock", "*.lock", Action::Reported)]);
    println!("FSIZE-OK");
}

/// A protected file's saved content longer than the process's file size
/// limit is not written back: a write past that limit raises `SIGXFSZ`,
/// which would end the program embedding the library. The change is
/// reported, and what the command left is still there.
#[test]
fn fsize21_a_file_size_limit_does_not_kill_the_embedder_on_restore() {
    use std::os::unix::process::ExitStatusExt;
    if std::env::var_os(FSIZE21_CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("a.lock"), vec![b'x'; 128 << 10]).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fsize21_child_restore", "--nocapture"])
        .env(FSIZE21_CHILD, &root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("FSIZE-OK"),
        "the child (signal {:?}): {}\n{stdout}\n{}",
        out.status.signal(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "short\n");
    let left: Vec<_> = fs::read_dir(&root).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// A protected file whose directory the command removed comes back in a
/// directory made again with the recorded mode. A process still running
/// on the root (a second command) that swaps that new directory for a
/// symlink to a file outside the root, over and over while the check
/// runs, never has the recorded mode set on the file the link leads to:
/// the mode is set on the directory made, through a descriptor, never by
/// a name the kernel resolves (before, `chmodat` followed the link and
/// gave the outside file the directory's mode).
#[test]
fn protect26_a_directory_made_again_is_never_chmodded_through_a_swapped_link() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    let out = tmp.path().join("outside.txt");
    fs::create_dir_all(root.join("d")).unwrap();
    fs::write(&out, "outside\n").unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o600)).unwrap();
    let p = protector(&root, &["*.lock"]);
    let rounds = 300;
    for round in 0..rounds {
        fs::write(root.join("d/x.lock"), "x v1\n").unwrap();
        fs::set_permissions(root.join("d"), fs::Permissions::from_mode(0o751)).unwrap();
        let cp = p.begin().unwrap();
        fs::remove_dir_all(root.join("d")).unwrap();
        let (d, outside) = (root.join("d"), out.clone());
        let _ = settle_racing(cp, move || {
            if fs::remove_dir(&d).is_ok() {
                let _ = std::os::unix::fs::symlink(&outside, &d);
            }
        });
        let mode = fs::metadata(&out).unwrap().mode() & 0o7777;
        assert_eq!(
            mode, 0o600,
            "round {round}: the restore set a mode through a link out of the root"
        );
        assert_eq!(fs::read(&out).unwrap(), b"outside\n");
        // The next round starts from the recorded tree again.
        let d = root.join("d");
        if fs::symlink_metadata(&d).is_ok_and(|m| !m.is_dir()) {
            fs::remove_file(&d).unwrap();
        }
        fs::create_dir_all(&d).unwrap();
    }
}

/// `cp` settled while a second command on the root, a thread, runs
/// `step` over and over until the settle returns; the changes it made.
fn settle_racing(cp: Checkpoint, mut step: impl FnMut() + Send + 'static) -> Vec<Change> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                step();
            }
        })
    };
    let changes = cp.settle();
    stop.store(true, Ordering::SeqCst);
    racer.join().unwrap();
    changes
}

/// `cp` settled while a second command on the root watches `dir` and
/// renames an entry of its own over every name of a restore's temporary
/// it sees there: `evil1`, `evil2`, … in `dir`, each made by `make` (given
/// its path and number). The changes, and how many of its entries took a
/// temporary's name.
fn settle_swapping_restore_temporaries(
    cp: Checkpoint,
    dir: PathBuf,
    make: impl Fn(&Path, usize) -> std::io::Result<()> + Send + 'static,
) -> (Vec<Change>, usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let swapped = Arc::new(AtomicUsize::new(0));
    let mut n = 0;
    let changes = settle_racing(cp, {
        let swapped = swapped.clone();
        move || {
            let Ok(entries) = fs::read_dir(&dir) else {
                return;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                if name.to_string_lossy().contains("sandgate-restore") {
                    n += 1;
                    let evil = dir.join(format!("evil{n}"));
                    if make(&evil, n).is_ok() && fs::rename(&evil, dir.join(&name)).is_ok() {
                        swapped.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
    });
    (changes, swapped.load(Ordering::SeqCst))
}

/// Removes every entry of `dir` but `keep`, for the next round.
fn remove_all_but(dir: &Path, keep: &str) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        if e.file_name() != keep {
            fs::remove_file(e.path()).unwrap();
        }
    }
}

/// The files under `dir`, by path relative to it, with their content.
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push((rel, fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A protected directory renamed away, a lookalike put in its place (the
/// same names, the host's content) and the host's file written at its new
/// place (`mv .github gh && cp -r gh .github && echo evil >
/// gh/workflows/ci.yml`): the host's directory is renamed back and its
/// file restored, and both the lookalike and the command's version are
/// kept in the quarantine. Before, the lookalike went to the quarantine
/// first, the command's version of `.github/workflows/ci.yml` could not
/// go to the same place beside the lookalike's, and it stayed: the host's
/// file read `evil`, only reported.
#[test]
fn protect26_a_lookalike_of_a_renamed_protected_directory_does_not_keep_a_write() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join(".github/workflows")).unwrap();
    fs::write(root.join(".github/workflows/ci.yml"), "ci v1\n").unwrap();
    let p = protector(&root, &[".github/**"]);
    let cp = p.begin().unwrap();
    // A control: an ordinary file the command writes is kept.
    fs::write(root.join("notes.txt"), "mine\n").unwrap();
    fs::rename(root.join(".github"), root.join("gh")).unwrap();
    fs::create_dir_all(root.join(".github/workflows")).unwrap();
    fs::write(root.join(".github/workflows/ci.yml"), "ci v1\n").unwrap();
    fs::write(root.join("gh/workflows/ci.yml"), "evil\n").unwrap();
    let changes = cp.settle();
    assert_eq!(
        fs::read_to_string(root.join("notes.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(
        fs::read_to_string(root.join(".github/workflows/ci.yml")).unwrap(),
        "ci v1\n",
        "{changes:?}"
    );
    assert!(!root.join("gh").exists());
    assert_eq!(
        changes,
        [
            change(".github", ".github/**", Action::Restored),
            change(".github/workflows/ci.yml", ".github/**", Action::Restored),
        ]
    );
    // Nothing is lost: the lookalike and the command's version are both
    // in the quarantine beside the root.
    let kept = files_under(&tmp.path().join(".w.sandgate-quarantine"));
    let mut contents: Vec<&str> = kept.iter().map(|(_, c)| c.as_str()).collect();
    contents.sort();
    assert_eq!(contents, ["ci v1\n", "evil\n"], "{kept:?}");
    assert!(kept
        .iter()
        .all(|(p, _)| p.ends_with(".github/workflows/ci.yml")));
}

/// A protected file put back is made without a name and linked in whole:
/// a process still running on the root (a second command) that watches
/// the directory and renames a file of its own over every temporary name
/// it sees there never has its file put at the protected name. Before,
/// the content was written and synced under a temporary name, and the
/// rename that followed moved the other process's file into place,
/// reported as restored.
#[test]
fn protect26_a_file_swapped_in_at_the_restores_temporary_name_is_never_put_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join("d")).unwrap();
    fs::write(root.join("d/a.lock"), "v1\n").unwrap();
    let p = protector(&root, &["*.lock"]);
    for round in 0..200 {
        let cp = p.begin().unwrap();
        fs::write(root.join("d/a.lock"), "changed\n").unwrap();
        let (changes, _) = settle_swapping_restore_temporaries(cp, root.join("d"), |evil, _| {
            fs::write(evil, "evil\n").unwrap();
            Ok(())
        });
        let now = fs::read_to_string(root.join("d/a.lock")).unwrap();
        assert_eq!(now, "v1\n", "round {round}: {changes:?}");
        assert_eq!(
            changes,
            [change("d/a.lock", "*.lock", Action::Restored)],
            "round {round}"
        );
        remove_all_but(&root.join("d"), "a.lock");
    }
}

/// The same for a protected symlink, which cannot be made without a name:
/// a process still running on the root (a second command) that renames
/// its own entry over the restore's temporary name never has it put at
/// the protected name and reported restored, and never has its entry's
/// owner changed. Half of the time the racer's entry is a symlink out of
/// the root, half of the time a hard link to a file outside it; as root,
/// the recorded link is owned by another user, so a `chown` by the
/// temporary name would have given that file its owner. A restore that
/// lost the race says so (`reported`); one that says `restored` put the
/// recorded link there, with the recorded owner.
#[test]
fn protect26b_a_link_swapped_in_at_the_restores_temporary_name_is_never_put_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir_all(root.join("d")).unwrap();
    let host = tmp.path().join("host");
    fs::write(&host, "host\n").unwrap();
    fs::set_permissions(&host, fs::Permissions::from_mode(0o644)).unwrap();
    let was = fs::metadata(&host).unwrap();
    let link = root.join("d/a.lock");
    std::os::unix::fs::symlink("good", &link).unwrap();
    let root_user = rustix::process::geteuid().is_root();
    if root_user {
        std::os::unix::fs::lchown(&link, Some(4321), Some(4321)).unwrap();
    }
    let owner = fs::symlink_metadata(&link).unwrap();
    let (uid, gid) = (owner.uid(), owner.gid());
    let p = protector(&root, &["*.lock"]);
    let (mut restored, mut reported, mut swapped) = (0, 0, 0);
    for round in 0..200 {
        // What the next record takes as the host's: the recorded link.
        let want = fs::symlink_metadata(&link).unwrap();
        let cp = p.begin().unwrap();
        fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("changed", &link).unwrap();
        let outside = host.clone();
        let (changes, took) =
            settle_swapping_restore_temporaries(cp, root.join("d"), move |evil, n| {
                if n % 2 == 0 {
                    std::os::unix::fs::symlink("/etc/passwd", evil)
                } else {
                    fs::hard_link(&outside, evil)
                }
            });
        swapped += took;
        let now = fs::symlink_metadata(&link);
        let host_now = fs::metadata(&host).unwrap();
        assert_eq!(
            (host_now.uid(), host_now.gid(), host_now.mode()),
            (was.uid(), was.gid(), was.mode()),
            "round {round}: the file outside the root was changed: {changes:?}"
        );
        if changes == [change("d/a.lock", "*.lock", Action::Restored)] {
            restored += 1;
            let now = now.unwrap();
            assert!(now.file_type().is_symlink(), "round {round}: {now:?}");
            assert_eq!(
                fs::read_link(&link).unwrap(),
                Path::new("good"),
                "round {round}: said restored, holds another link"
            );
            assert_eq!(
                (now.uid(), now.gid(), now.mtime(), now.mtime_nsec()),
                (uid, gid, want.mtime(), want.mtime_nsec()),
                "round {round}: owner and times of the restored link"
            );
        } else {
            assert_eq!(
                changes,
                [change("d/a.lock", "*.lock", Action::Reported)],
                "round {round}"
            );
            reported += 1;
            // Not undone, as reported: the next record would take what is
            // there as the host's, so the recorded link is put back here.
            if now.is_ok() {
                fs::remove_file(&link).unwrap();
            }
            std::os::unix::fs::symlink("good", &link).unwrap();
            if root_user {
                std::os::unix::fs::lchown(&link, Some(uid), Some(gid)).unwrap();
            }
        }
        remove_all_but(&root.join("d"), "a.lock");
    }
    assert!(
        swapped > 0,
        "the racer never swapped: {restored} restored, {reported} reported"
    );
    eprintln!("{restored} restored, {reported} reported, {swapped} swapped");
}
