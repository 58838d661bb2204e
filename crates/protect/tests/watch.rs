//! Finding changes with inotify, and falling back to the ctime walk: what a
//! command would do is done here between `begin` and `settle`, on real
//! files, with the root's watches as the kernel keeps them. Every test
//! here also runs with the ctime walk forced
//! (`every_test_here_also_holds_with_the_ctime_walk_forced`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use sandgate_fileguard::GuardBuilder;
use sandgate_protect::{Action, Change, Detection, Protector, DETECTION_ENV};

fn forced() -> bool {
    std::env::var_os(DETECTION_ENV).is_some_and(|v| v == "ctime")
}

fn protector(root: &Path, patterns: &[&str]) -> Arc<Protector> {
    let guard = GuardBuilder::new().patterns(patterns).build().unwrap();
    Arc::new(Protector::new(root, guard).unwrap())
}

/// The detection in use is the one this run asked for: inotify, unless the
/// ctime walk was forced.
fn assert_detection(p: &Protector) {
    let d = p.detection();
    if forced() {
        assert!(matches!(d, Detection::CtimeWalk(_)), "{d}");
    } else {
        assert_eq!(d, Detection::Inotify);
    }
}

fn change(path: &str, action: Action) -> Change {
    Change {
        path: path.into(),
        pattern: "*.lock".into(),
        action,
    }
}

fn write(p: &Path, data: &str) {
    if let Some(d) = p.parent() {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(p, data).unwrap();
}

struct Fx {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

fn fixture() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().to_path_buf();
    let root = base.join("w");
    fs::create_dir(&root).unwrap();
    write(&root.join("a.lock"), "a v1\n");
    write(&root.join("pkg/deep/yarn.lock"), "yarn v1\n");
    fs::create_dir(root.join("src")).unwrap();
    Fx {
        _tmp: tmp,
        base,
        root,
    }
}

/// A tree the command makes, many levels deep, is searched whole; once the
/// record takes it in (the next `begin`), its directories are watched, so
/// a protected file made deep inside it by a later command is seen too, and
/// so is a change to one the host made there between commands.
#[test]
fn a_deep_tree_the_command_makes_is_searched_then_watched() {
    let fx = fixture();
    let r = &fx.root;
    let p = protector(r, &["*.lock"]);

    let cp = p.begin().unwrap();
    assert_detection(&p);
    write(&r.join("n/1/2/3/4/5/6/7/deep.lock"), "new\n");
    write(&r.join("n/1/2/3/free.txt"), "free\n");
    assert_eq!(
        cp.settle(),
        [change("n/1/2/3/4/5/6/7/deep.lock", Action::Quarantined)]
    );
    assert!(!r.join("n/1/2/3/4/5/6/7/deep.lock").exists());
    assert_eq!(
        fs::read_to_string(r.join("n/1/2/3/free.txt")).unwrap(),
        "free\n"
    );

    let cp = p.begin().unwrap();
    write(&r.join("n/1/2/3/4/5/6/7/again.lock"), "new\n");
    write(&r.join("n/1/2/3/4/5/6/7/8/9/deeper.lock"), "new\n");
    assert_eq!(
        cp.settle(),
        [
            change("n/1/2/3/4/5/6/7/8/9/deeper.lock", Action::Quarantined),
            change("n/1/2/3/4/5/6/7/again.lock", Action::Quarantined),
        ]
    );

    // The host makes a tree with a protected file between commands: it
    // becomes the record, and a command's change to it is undone.
    write(&r.join("h/a/b/c/host.lock"), "by the host\n");
    let cp = p.begin().unwrap();
    write(&r.join("h/a/b/c/host.lock"), "by the command\n");
    write(&r.join("h/a/b/c/d/e/new.lock"), "new\n");
    assert_eq!(
        cp.settle(),
        [
            change("h/a/b/c/d/e/new.lock", Action::Quarantined),
            change("h/a/b/c/host.lock", Action::Restored),
        ]
    );
    assert_eq!(
        fs::read_to_string(r.join("h/a/b/c/host.lock")).unwrap(),
        "by the host\n"
    );
    assert!(p.begin().unwrap().settle().is_empty());
    assert_detection(&p);
}

/// Directories renamed between watched directories, into the root from
/// outside it, and out of it: each is found, and the watches left on a
/// directory moved out of the root do not disturb later checks.
#[test]
fn directories_renamed_into_out_of_and_between_watched_directories() {
    let fx = fixture();
    let r = &fx.root;
    let p = protector(r, &["*.lock"]);

    // Between watched directories: renamed back, and what was made inside
    // it meanwhile is found at its restored place.
    let cp = p.begin().unwrap();
    fs::rename(r.join("pkg"), r.join("src/pkg2")).unwrap();
    write(&r.join("src/pkg2/deep/new.lock"), "new\n");
    write(&r.join("src/pkg2/deep/yarn.lock"), "yarn v2\n");
    assert_eq!(
        cp.settle(),
        [
            change("pkg", Action::Restored),
            change("pkg/deep/new.lock", Action::Quarantined),
            change("pkg/deep/yarn.lock", Action::Restored),
        ]
    );
    assert!(!r.join("src/pkg2").exists());
    assert_eq!(
        fs::read_to_string(r.join("pkg/deep/yarn.lock")).unwrap(),
        "yarn v1\n"
    );

    // Into the root from outside it: a tree holding a protected file.
    write(&fx.base.join("outside/inside/more/x.lock"), "x\n");
    let cp = p.begin().unwrap();
    fs::rename(fx.base.join("outside/inside"), r.join("src/inside")).unwrap();
    assert_eq!(
        cp.settle(),
        [change("src/inside/more/x.lock", Action::Quarantined)]
    );
    assert!(r.join("src/inside/more").is_dir());
    assert!(!r.join("src/inside/more/x.lock").exists());

    // Out of the root: the protected file is made again from the record.
    let cp = p.begin().unwrap();
    fs::rename(r.join("pkg"), fx.base.join("away")).unwrap();
    assert_eq!(
        cp.settle(),
        [change("pkg/deep/yarn.lock", Action::Restored)]
    );
    assert_eq!(
        fs::read_to_string(r.join("pkg/deep/yarn.lock")).unwrap(),
        "yarn v1\n"
    );

    // Events from the directory now outside the root name where it was;
    // they cost a look and change nothing, and the new `pkg` is watched.
    let cp = p.begin().unwrap();
    write(&fx.base.join("away/deep/yarn.lock"), "outside\n");
    write(&fx.base.join("away/deep/other.lock"), "outside\n");
    fs::create_dir(fx.base.join("away/deep/sub")).unwrap();
    write(&r.join("pkg/deep/z.lock"), "z\n");
    assert_eq!(
        cp.settle(),
        [change("pkg/deep/z.lock", Action::Quarantined)]
    );
    assert_eq!(
        fs::read_to_string(r.join("pkg/deep/yarn.lock")).unwrap(),
        "yarn v1\n"
    );
    assert_eq!(
        fs::read_to_string(fx.base.join("away/deep/yarn.lock")).unwrap(),
        "outside\n"
    );
    assert!(p.begin().unwrap().settle().is_empty());
    assert_detection(&p);
}

/// A write through a hard link in another directory changes a protected
/// file without an event on the protected file's directory; the protected
/// entries are compared one by one anyway. Both a link the host made
/// before and one the command makes.
#[test]
fn a_write_through_a_hard_link_in_another_directory_is_undone() {
    let fx = fixture();
    let r = &fx.root;
    fs::create_dir(r.join("other")).unwrap();
    fs::hard_link(r.join("a.lock"), r.join("other/alias")).unwrap();
    let p = protector(r, &["*.lock"]);

    let cp = p.begin().unwrap();
    // Same size, so only content and ctime tell.
    fs::write(r.join("other/alias"), "a v2\n").unwrap();
    assert_eq!(cp.settle(), [change("a.lock", Action::Restored)]);
    assert_eq!(fs::read_to_string(r.join("a.lock")).unwrap(), "a v1\n");

    let cp = p.begin().unwrap();
    fs::hard_link(r.join("pkg/deep/yarn.lock"), r.join("src/l2")).unwrap();
    fs::write(r.join("src/l2"), "yarn v2\n").unwrap();
    assert_eq!(
        cp.settle(),
        [change("pkg/deep/yarn.lock", Action::Restored)]
    );
    assert_eq!(
        fs::read_to_string(r.join("pkg/deep/yarn.lock")).unwrap(),
        "yarn v1\n"
    );
    assert_detection(&p);
}

/// A directory deleted and made again (the filesystem may give it the same
/// inode number) between commands is watched again.
#[test]
fn a_directory_deleted_and_made_again_is_watched_again() {
    let fx = fixture();
    let r = &fx.root;
    let p = protector(r, &["*.lock"]);
    for i in 0..5 {
        fs::create_dir_all(r.join("d/e")).unwrap();
        assert!(p.begin().unwrap().settle().is_empty());
        fs::remove_dir_all(r.join("d")).unwrap();
        fs::create_dir_all(r.join("d/e")).unwrap();
        let cp = p.begin().unwrap();
        write(&r.join(format!("d/e/x{i}.lock")), "x\n");
        assert_eq!(
            cp.settle(),
            [change(&format!("d/e/x{i}.lock"), Action::Quarantined)]
        );
        fs::remove_dir_all(r.join("d")).unwrap();
    }
    assert_detection(&p);
}

fn max_queued_events() -> usize {
    fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384)
}

/// A command that makes more events than the queue holds (in a directory
/// already watched) overflows it: the
/// events after the overflow are lost, among them the one for a protected
/// file made last. The root falls back to the ctime walk, which finds it,
/// and stays on it for later commands.
#[test]
fn a_flood_that_overflows_the_queue_falls_back_to_the_ctime_walk() {
    let max = max_queued_events();
    if max > 1 << 20 {
        eprintln!("note: max_queued_events is {max}: too many files to flood; skipped");
        return;
    }
    let fx = fixture();
    let r = &fx.root;
    let p = protector(r, &["*.lock"]);
    assert!(p.begin().unwrap().settle().is_empty());
    assert_detection(&p);

    // Into a watched directory (one the command made would not be).
    let cp = p.begin().unwrap();
    for i in 0..max + 1000 {
        fs::File::create(r.join(format!("src/f{i}"))).unwrap();
    }
    write(&r.join("late/a/new.lock"), "new\n");
    write(&r.join("a.lock"), "a v2\n");
    assert_eq!(
        cp.settle(),
        [
            change("a.lock", Action::Restored),
            change("late/a/new.lock", Action::Quarantined),
        ]
    );
    let d = p.detection();
    if forced() {
        assert!(matches!(d, Detection::CtimeWalk(_)), "{d}");
    } else {
        assert_eq!(
            d,
            Detection::CtimeWalk("the inotify queue overflowed"),
            "{d}"
        );
    }

    // Later commands are checked by the ctime walk.
    let cp = p.begin().unwrap();
    write(&r.join("late/b/c/other.lock"), "new\n");
    assert_eq!(
        cp.settle(),
        [change("late/b/c/other.lock", Action::Quarantined)]
    );
    assert_eq!(fs::read_to_string(r.join("a.lock")).unwrap(), "a v1\n");
}

/// A filesystem mounted beneath the root and unmounted by the command: the
/// kernel drops the watches on it (`IN_UNMOUNT`), so the root falls back to
/// the ctime walk, which sees the directory now at that name and the
/// protected file made in it. Needs root to mount; skipped otherwise.
#[test]
fn an_unmount_beneath_the_root_falls_back_to_the_ctime_walk() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("note: not root, cannot mount; skipped");
        return;
    }
    let fx = fixture();
    let r = &fx.root;
    let m = r.join("m");
    fs::create_dir(&m).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&m)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("note: cannot mount a tmpfs here; skipped");
        return;
    }
    fs::create_dir(m.join("inside")).unwrap();
    // Past the clock allowance, so that the root's own ctime (moved by the
    // mkdir above) does not get it read again anyway.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let p = protector(r, &["*.lock"]);
    assert!(p.begin().unwrap().settle().is_empty());
    assert_detection(&p);

    let cp = p.begin().unwrap();
    let unmounted = Command::new("umount")
        .arg(&m)
        .status()
        .is_ok_and(|s| s.success());
    assert!(unmounted);
    // Beneath what was the mount: a directory no watch was ever on.
    write(&m.join("x.lock"), "x\n");
    assert_eq!(cp.settle(), [change("m/x.lock", Action::Quarantined)]);
    let d = p.detection();
    if forced() {
        assert!(matches!(d, Detection::CtimeWalk(_)), "{d}");
    } else {
        assert_eq!(
            d,
            Detection::CtimeWalk("a watched filesystem was unmounted"),
            "{d}"
        );
    }
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
    assert!(stdout.contains("test result: ok. 10 passed"), "{stdout}");
}

/// Set in the child [`inotify_limits_reached_fall_back_to_the_ctime_walk`]
/// starts in a user namespace of its own whose inotify limit is lowered:
/// `watches` or `instances`.
const LIMIT_ENV: &str = "SANDGATE_TEST_INOTIFY_LIMIT";

/// The child's part: with at most 4 watches (a tree of more directories)
/// or no inotify instance at all, the root says it uses the ctime walk and
/// why, and a command's changes in directories never watched are undone.
#[test]
fn child_with_an_inotify_limit_reached() {
    let Some(limit) = std::env::var_os(LIMIT_ENV) else {
        return;
    };
    let max = |name: &str| {
        fs::read_to_string(format!("/proc/sys/user/max_inotify_{name}"))
            .unwrap()
            .trim()
            .to_owned()
    };
    let fx = fixture();
    let r = &fx.root;
    for d in ["b/c/d/e", "f/g/h", "i/j"] {
        fs::create_dir_all(r.join(d)).unwrap();
    }
    write(&r.join("f/g/h/deep.lock"), "deep v1\n");
    let p = protector(r, &["*.lock"]);
    assert!(p.begin().unwrap().settle().is_empty());
    let why = if limit == "watches" {
        assert_eq!(max("watches"), "4");
        "inotify watches exhausted (max_user_watches)"
    } else {
        assert_eq!(max("instances"), "0");
        "no inotify instance left (max_user_instances or descriptors)"
    };
    assert_eq!(p.detection(), Detection::CtimeWalk(why));

    let cp = p.begin().unwrap();
    write(&r.join("b/c/d/e/new.lock"), "new\n");
    write(&r.join("i/j/k/l/other.lock"), "new\n");
    write(&r.join("f/g/h/deep.lock"), "deep v2\n");
    assert_eq!(
        cp.settle(),
        [
            change("b/c/d/e/new.lock", Action::Quarantined),
            change("f/g/h/deep.lock", Action::Restored),
            change("i/j/k/l/other.lock", Action::Quarantined),
        ]
    );
    assert_eq!(
        fs::read_to_string(r.join("f/g/h/deep.lock")).unwrap(),
        "deep v1\n"
    );
    assert_eq!(p.detection(), Detection::CtimeWalk(why));
}

/// `fs.inotify.max_user_watches` reached while the root is recorded, or
/// `max_user_instances` reached before: the root falls back to the ctime
/// walk, says so, and misses nothing. Each runs in a child in a user
/// namespace of its own (`unshare -Ur`), whose `/proc/sys/user` limits
/// hold for it alone; skipped where user namespaces are unavailable.
#[test]
fn inotify_limits_reached_fall_back_to_the_ctime_walk() {
    if std::env::var_os(LIMIT_ENV).is_some() || forced() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for (limit, file, value) in [
        ("watches", "max_inotify_watches", 4),
        ("instances", "max_inotify_instances", 0),
    ] {
        let script = format!("echo {value} > /proc/sys/user/{file} || exit 77; exec \"$0\" \"$@\"");
        let out = Command::new("unshare")
            .args(["-Ur", "sh", "-c", &script])
            .arg(&exe)
            .args(["--exact", "child_with_an_inotify_limit_reached"])
            .env(LIMIT_ENV, limit)
            .output();
        let out = match out {
            // unshare or the limit's write failed: nothing ran.
            Ok(out) if !out.status.success() && out.stdout.is_empty() => {
                eprintln!(
                    "note: no user namespace with inotify limits of its own here; skipped: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                return;
            }
            Ok(out) => out,
            Err(e) => {
                eprintln!("note: unshare unavailable ({e}); skipped");
                return;
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("test result: ok. 1 passed"),
            "{limit}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Set (to `1`) for the child of
/// [`one_roots_directories_can_take_the_watches_another_root_needs`].
const SHARE_ENV: &str = "SANDGATE_TEST_INOTIFY_SHARE";

/// The child's part, with at most 64 watches for the user: root `b`,
/// watched first, and root `a`, whose commands made 60 directories, share
/// them; `b`'s next directories find none left and `b` falls back to the
/// ctime walk for as long as it is protected, though `a` is gone since.
#[test]
fn child_whose_watches_another_root_took() {
    if std::env::var_os(SHARE_ENV).is_none() {
        return;
    }
    let max = fs::read_to_string("/proc/sys/user/max_inotify_watches").unwrap();
    assert_eq!(max.trim(), "64");
    let (fa, fb) = (fixture(), fixture());
    let b = protector(&fb.root, &["*.lock"]);
    assert!(b.begin().unwrap().settle().is_empty());
    assert_eq!(b.detection(), Detection::Inotify);
    let a = protector(&fa.root, &["*.lock"]);
    assert!(a.begin().unwrap().settle().is_empty());
    // A command of `a` makes 56 directories; its next record watches them.
    let cp = a.begin().unwrap();
    for i in 0..56 {
        fs::create_dir(fa.root.join(format!("d{i}"))).unwrap();
    }
    assert!(cp.settle().is_empty());
    assert!(a.begin().unwrap().settle().is_empty());
    assert_eq!(a.detection(), Detection::Inotify);
    // `b`'s command makes two directories: no watch is left for them.
    let cp = b.begin().unwrap();
    fs::create_dir_all(fb.root.join("x/y")).unwrap();
    assert!(cp.settle().is_empty());
    assert!(b.begin().unwrap().settle().is_empty());
    let why = "inotify watches exhausted (max_user_watches)";
    assert_eq!(b.detection(), Detection::CtimeWalk(why));
    drop(a);
    assert!(b.begin().unwrap().settle().is_empty());
    assert_eq!(b.detection(), Detection::CtimeWalk(why));
    // Still as strict: a change in a directory never watched is undone.
    let cp = b.begin().unwrap();
    write(&fb.root.join("x/y/new.lock"), "new\n");
    assert_eq!(cp.settle(), [change("x/y/new.lock", Action::Quarantined)]);
}

/// The inotify watches are the user's, not a root's: one write root whose
/// commands make many directories takes as many watches, and another root
/// that finds none left uses the ctime walk from then on (as strict, only
/// slower) even once the first is gone. Pinned in a user namespace of its
/// own with 64 watches (`unshare -Ur`).
#[test]
fn one_roots_directories_can_take_the_watches_another_root_needs() {
    if std::env::var_os(SHARE_ENV).is_some() || std::env::var_os(LIMIT_ENV).is_some() || forced() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args([
            "-Ur",
            "sh",
            "-c",
            "echo 64 > /proc/sys/user/max_inotify_watches && exec \"$0\" \"$@\"",
        ])
        .arg(&exe)
        .args(["--exact", "child_whose_watches_another_root_took"])
        .env(SHARE_ENV, "1")
        .output()
        .expect("unshare (util-linux) runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
