//! Read-only binds of protected paths in the command's view: attacks fail
//! *while the command runs* (the command sees `EROFS`, `EBUSY` or `EXDEV`),
//! where the floor alone would let them happen and revert them afterwards.
//! Each test also checks the host's files: nothing protected changed.
//!
//! Run as root and as uid 65534 (`cargo xtask unprivileged`). A test skips,
//! saying why, only when the host gives no namespaces;
//! `SANDGATE_REQUIRE_NAMESPACES=1` turns such a skip into a failure.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use sandgate::policy::{Confine, SecurityMode};
use sandgate::{ExecOptions, ExecResult, Executor, ProtectedAction};

const PATTERNS: &[&str] = &["*.lock", ".github/**"];

struct Fx {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

fn write(p: &Path, data: &str) {
    if let Some(d) = p.parent() {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(p, data).unwrap();
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A write root with protected files at two depths, a workflow, a free
/// file, and (with `git`) a repository with a hook.
fn fixture(git: bool) -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let root = tmp.path().join("work");
    fs::create_dir(&root).unwrap();
    write(&root.join("Cargo.lock"), "lock v1\n");
    write(&root.join("pkg/deep/yarn.lock"), "yarn v1\n");
    write(&root.join(".github/workflows/ci.yml"), "on: push\n");
    write(&root.join("free.txt"), "free\n");
    write(&root.join("src/main.rs"), "fn main() {}\n");
    if git {
        let ok = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&root)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        write(&root.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
    }
    Fx { _tmp: tmp, root }
}

fn build(fx: &Fx, restricted: bool, patterns: &[&str], confine: Confine) -> Executor {
    let mut b = Executor::builder();
    b.write_root(&fx.root)
        .enabled(true)
        .timeout_ms(60_000)
        .confine(confine)
        .security_mode(if restricted {
            SecurityMode::Restricted
        } else {
            SecurityMode::TrustedHost
        });
    for p in patterns {
        b.deny_write(*p);
    }
    let ex = b.build().unwrap();
    ex.start().unwrap();
    ex
}

fn run(ex: &Executor, command: &str) -> ExecResult {
    ex.exec(command, ExecOptions::default()).unwrap()
}

/// A started executor whose commands run in the view; `None` (printed)
/// when the host gives no namespaces.
fn in_view(test: &str, fx: &Fx, restricted: bool, patterns: &[&str]) -> Option<Executor> {
    let ex = build(fx, restricted, patterns, Confine::BestEffort);
    let r = run(&ex, "true");
    if r.confined.namespaces {
        return Some(ex);
    }
    let why = r.confined.notes.join("; ");
    assert!(
        std::env::var_os("SANDGATE_REQUIRE_NAMESPACES").is_none(),
        "{test}: no namespaces on this host: {why}"
    );
    eprintln!("{test}: skipped: no namespaces on this host: {why}");
    None
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `command`'s stdout and stderr, after checking it ran in the view with
/// protected entries bound.
fn run_bound(ex: &Executor, command: &str) -> (ExecResult, String, String) {
    let r = run(ex, command);
    let binds = r.confined.protected_binds.expect("no binds reported");
    assert!(binds.bound > 0, "{binds:?}");
    let (out, err) = (text(&r.stdout), text(&r.stderr));
    (r, out, err)
}

#[test]
fn writing_a_bound_file_fails_with_erofs_while_the_command_runs() {
    let fx = fixture(false);
    let Some(ex) = in_view("erofs", &fx, false, PATTERNS) else {
        return;
    };
    let ino = fs::metadata(fx.root.join("Cargo.lock")).unwrap().ino();
    // The command itself sees the error, and reads the old content after
    // it: nothing was written and later reverted.
    let (r, out, err) = run_bound(
        &ex,
        "echo evil > Cargo.lock; echo \"w=$?\"; \
         echo evil >> pkg/deep/yarn.lock; echo \"a=$?\"; \
         echo evil > .github/workflows/ci.yml; echo \"y=$?\"; \
         chmod 600 Cargo.lock; echo \"c=$?\"; \
         cat Cargo.lock; echo ok > free.txt",
    );
    assert_eq!(out, "w=1\na=1\ny=1\nc=1\nlock v1\n", "{err}");
    assert_eq!(err.matches("Read-only file system").count(), 4, "{err}");
    assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
    // The rest of the root stays writable.
    assert_eq!(
        fs::read_to_string(fx.root.join("free.txt")).unwrap(),
        "ok\n"
    );
    let md = fs::metadata(fx.root.join("Cargo.lock")).unwrap();
    assert_eq!((md.ino(), md.mode() & 0o777), (ino, 0o644));
    assert_eq!(
        fs::read_to_string(fx.root.join("Cargo.lock")).unwrap(),
        "lock v1\n"
    );
}

/// The command cannot take a bind away: `umount2` (even detaching) is
/// refused, and the file stays read-only after the attempt.
#[test]
fn a_bind_cannot_be_unmounted_by_the_command() {
    if Command::new("/usr/bin/python3").arg("-V").output().is_err() {
        eprintln!("skipped: no python3");
        return;
    }
    let fx = fixture(false);
    let Some(ex) = in_view("umount", &fx, false, PATTERNS) else {
        return;
    };
    let (_, out, err) = run_bound(
        &ex,
        "/usr/bin/python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); \
         print(l.umount2(b\"Cargo.lock\", 2), l.umount2(b\"pkg/deep\", 2))'; \
         echo evil > Cargo.lock; echo \"w=$?\"",
    );
    assert_eq!(out, "-1 -1\nw=1\n", "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    assert_eq!(
        fs::read_to_string(fx.root.join("Cargo.lock")).unwrap(),
        "lock v1\n"
    );
}

#[test]
fn renaming_or_removing_a_bound_entry_or_its_parent_fails_busy() {
    let fx = fixture(false);
    let Some(ex) = in_view("busy", &fx, false, PATTERNS) else {
        return;
    };
    let (r, out, err) = run_bound(
        &ex,
        "mv Cargo.lock x; echo \"m=$?\"; rm -f Cargo.lock; echo \"r=$?\"; \
         mv pkg pkg2; echo \"p=$?\"; mv pkg/deep pkg/deep2; echo \"d=$?\"; \
         mv free.txt Cargo.lock; echo \"o=$?\"; rm -rf .github; echo \"g=$?\"",
    );
    assert_eq!(out, "m=1\nr=1\np=1\nd=1\no=1\ng=1\n", "{err}");
    assert!(err.contains("Device or resource busy"), "{err}");
    assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
    for p in [
        "Cargo.lock",
        "pkg/deep/yarn.lock",
        ".github/workflows/ci.yml",
    ] {
        assert!(fx.root.join(p).is_file(), "{p}");
    }
    assert!(!fx.root.join("pkg2").exists());
    assert!(fx.root.join("free.txt").is_file());
}

#[test]
fn moving_git_away_fails_in_restricted_mode() {
    if !have("git") {
        eprintln!("skipped: no git");
        return;
    }
    let fx = fixture(true);
    let Some(ex) = in_view("git", &fx, true, PATTERNS) else {
        return;
    };
    let (r, out, err) = run_bound(
        &ex,
        "mv .git .git2; echo \"m=$?\"; echo pwned > .git/hooks/pre-commit; echo \"h=$?\"; \
         rm -rf .git/hooks; echo \"r=$?\"; \
         env GIT_CONFIG_GLOBAL=/dev/null git config core.hooksPath /tmp/h; echo \"c=$?\"",
    );
    // git's own exit code for a config it cannot write varies by version.
    let (fixed, config) = out.split_at(out.find("c=").unwrap());
    assert_eq!(fixed, "m=1\nh=1\nr=1\n", "{err}");
    assert_ne!(config, "c=0\n", "{err}");
    assert!(err.contains("Device or resource busy"), "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
    assert_eq!(
        fs::read_to_string(fx.root.join(".git/hooks/pre-commit")).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    assert!(!fx.root.join(".git2").exists());
}

/// `link` and `rename` into a pinned directory from another directory
/// cross a mount: `EXDEV`. `ln` and `git mv` fail; coreutils `mv` falls
/// back to copy and unlink, so the move succeeds (as a new file).
#[test]
fn links_and_renames_into_a_pinned_directory_answer_exdev() {
    let git = have("git");
    let fx = fixture(git);
    if git {
        let ok = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(["add", "-A"])
            .current_dir(&fx.root)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    let Some(ex) = in_view("exdev", &fx, false, PATTERNS) else {
        return;
    };
    let ino = fs::metadata(fx.root.join("free.txt")).unwrap().ino();
    let (r, out, err) = run_bound(
        &ex,
        "ln src/main.rs pkg/deep/main.rs; echo \"l=$?\"; \
         mv free.txt pkg/deep/free.txt; echo \"m=$?\"; \
         mv pkg/deep/free.txt pkg/deep/free2.txt; echo \"s=$?\"",
    );
    assert_eq!(out, "l=1\nm=0\ns=0\n", "{err}");
    assert!(err.contains("Invalid cross-device link"), "{err}");
    assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
    assert!(!fx.root.join("pkg/deep/main.rs").exists());
    // mv copied it: same content, a new inode, the old name gone.
    let moved = fx.root.join("pkg/deep/free2.txt");
    assert_eq!(fs::read_to_string(&moved).unwrap(), "free\n");
    assert_ne!(fs::metadata(&moved).unwrap().ino(), ino);
    assert!(!fx.root.join("free.txt").exists());
    if git {
        let r = run(
            &ex,
            "env GIT_CONFIG_GLOBAL=/dev/null git mv src/main.rs pkg/deep/main.rs; echo \"g=$?\"",
        );
        assert_ne!(text(&r.stdout), "g=0\n", "{}", text(&r.stderr));
        assert!(
            text(&r.stderr).contains("Invalid cross-device link"),
            "{}",
            text(&r.stderr)
        );
        assert!(fx.root.join("src/main.rs").is_file());
    }
}

#[test]
fn the_floor_still_catches_what_the_binds_do_not() {
    let fx = fixture(false);
    let Some(ex) = in_view("floor", &fx, false, PATTERNS) else {
        return;
    };
    // New protected entries are not bound (they did not exist): the
    // floor quarantines them. `.github/**` covers `.github` itself, bound
    // read-only as a whole, so nothing new appears in it.
    let (r, out, err) = run_bound(
        &ex,
        "touch new.lock && mkdir -p src/x && echo x > src/x/deep.lock && \
         mkdir -p pkg/deep/more && touch pkg/deep/more/z.lock && \
         { echo new > .github/new.yml; echo \"g=$?\"; }",
    );
    assert_eq!((r.exit_code, out.as_str()), (0, "g=1\n"), "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    let mut got: Vec<_> = r
        .protected_changes
        .iter()
        .map(|c| (c.path.as_str(), c.action))
        .collect();
    got.sort_by_key(|(p, _)| *p);
    assert_eq!(
        got,
        [
            ("new.lock", ProtectedAction::Quarantined),
            ("pkg/deep/more/z.lock", ProtectedAction::Quarantined),
            ("src/x/deep.lock", ProtectedAction::Quarantined),
        ]
    );
    assert!(!fx.root.join("new.lock").exists());
    assert!(!fx.root.join(".github/new.yml").exists());
}

#[test]
fn protected_symlinks_and_hard_links_are_left_to_the_floor() {
    let fx = fixture(false);
    std::os::unix::fs::symlink("Cargo.lock", fx.root.join("link.lock")).unwrap();
    fs::create_dir_all(fx.root.join("s/t")).unwrap();
    std::os::unix::fs::symlink("../../Cargo.lock", fx.root.join("s/t/up.lock")).unwrap();
    fs::hard_link(fx.root.join("pkg/deep/yarn.lock"), fx.root.join("other")).unwrap();
    let Some(ex) = in_view("links", &fx, false, PATTERNS) else {
        return;
    };
    let (r, out, err) = run_bound(
        &ex,
        "ln -sfn free.txt link.lock; echo evil > pkg/deep/yarn.lock; echo \"w=$?\"; \
         mv s s2; echo \"s=$?\"",
    );
    // The symlink is not bound, but the directories above it are pinned.
    assert_eq!(out, "w=0\ns=1\n", "{err}");
    assert!(err.contains("Device or resource busy"), "{err}");
    let binds = r.confined.protected_binds.unwrap();
    assert_eq!(binds.floor, 3, "{binds:?}");
    let mut got: Vec<_> = r
        .protected_changes
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    got.sort();
    assert_eq!(got, ["link.lock", "pkg/deep/yarn.lock"]);
    assert_eq!(
        fs::read_link(fx.root.join("link.lock")).unwrap(),
        Path::new("Cargo.lock")
    );
    assert_eq!(
        fs::read_to_string(fx.root.join("pkg/deep/yarn.lock")).unwrap(),
        "yarn v1\n"
    );
}

/// The refusal of a protected file with more than one link names it as
/// every message names a path: a line feed in its name written `\u{a}`
/// (the refusal stays one line), a byte that is not UTF-8 `\xNN`, a
/// backslash `\\`. Before, the name was printed with `Path::display`.
#[test]
fn gitshown23_a_protected_file_with_two_links_is_named_by_its_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fx = fixture(false);
    if in_view("gitshown23", &fx, false, PATTERNS).is_none() {
        return;
    }
    fs::remove_file(fx.root.join("Cargo.lock")).unwrap();
    fs::remove_file(fx.root.join("pkg/deep/yarn.lock")).unwrap();
    let odd = fx
        .root
        .join(OsStr::from_bytes(b"a\xff\\x\nforged: line.lock"));
    write(&odd, "lock\n");
    fs::hard_link(&odd, fx.root.join("second-name")).unwrap();
    let ex = build(&fx, false, PATTERNS, Confine::Required);
    let r = run(&ex, "echo ran > free.txt");
    assert_eq!(r.exit_code, 127);
    let err = text(&r.stderr);
    assert!(
        err.contains(r"a\xff\\x\u{a}forged: line.lock has 2 hard links"),
        "{err:?}"
    );
    assert!(!err.contains("\nforged"), "{err:?}");
}

#[test]
fn required_refuses_a_protected_file_with_more_than_one_link() {
    let fx = fixture(false);
    if in_view("required", &fx, false, PATTERNS).is_none() {
        return;
    }
    let ex = build(&fx, false, PATTERNS, Confine::Required);
    let r = run(&ex, "echo ran > free.txt");
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    fs::hard_link(fx.root.join("Cargo.lock"), fx.root.join("second-name")).unwrap();
    let r = run(&ex, "echo ran2 > free.txt");
    assert_eq!(r.exit_code, 127);
    let err = text(&r.stderr);
    assert!(
        err.contains("Cargo.lock") && err.contains("2 hard links"),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(fx.root.join("free.txt")).unwrap(),
        "ran\n"
    );
    // best_effort runs it, leaving that file to the floor.
    let ex = build(&fx, false, PATTERNS, Confine::BestEffort);
    let r = run(&ex, "echo ran3 > free.txt");
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
}

/// npm writes `package-lock.json` by a rename onto it: with the lock file
/// protected the rename fails (EBUSY) and npm reports the error.
#[test]
fn npm_cannot_replace_a_bound_lock_file() {
    if !have("npm") {
        eprintln!("skipped: no npm");
        return;
    }
    let fx = fixture(false);
    write(
        &fx.root.join("dep/package.json"),
        r#"{"name":"dep","version":"1.0.0"}"#,
    );
    write(
        &fx.root.join("package.json"),
        r#"{"name":"app","version":"1.0.0","dependencies":{"dep":"file:./dep"}}"#,
    );
    write(&fx.root.join("package-lock.json"), "{}\n");
    let patterns = ["package-lock.json"];
    let Some(ex) = in_view("npm", &fx, false, &patterns) else {
        return;
    };
    let (r, out, err) = run_bound(
        &ex,
        "HOME=$TMPDIR npm install --offline --no-audit --no-fund >/dev/null 2>&1; echo \"n=$?\"",
    );
    assert_ne!(out, "n=0\n", "{err}");
    assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
    assert_eq!(
        fs::read_to_string(fx.root.join("package-lock.json")).unwrap(),
        "{}\n"
    );
}

/// A pattern naming `.git` in a spelling the deny-write fold takes for it
/// (`.g\u{200b}it`: the zero-width space is ignorable; `.gıt`: the dotless
/// i folds with `i`) is no placeholder either: the check compared the
/// component with `.git` in ASCII case only, so an empty `.g\u{200b}it` was
/// made in the root, which a volume that folds names looks up as `.git`,
/// changing where git finds its repository. Other non-ASCII names still get
/// theirs.
#[test]
fn links19_no_placeholder_is_made_for_a_git_spelled_another_way() {
    let fx = fixture(false);
    let patterns = &[".g\u{200b}it/hooks/**", ".gıt/**", "cfg.é/**"];
    let Some(ex) = in_view("placeholder", &fx, false, patterns) else {
        return;
    };
    run(&ex, "true");
    for dir in [".g\u{200b}it", ".gıt"] {
        assert!(
            fs::symlink_metadata(fx.root.join(dir)).is_err(),
            "{dir:?} was made"
        );
    }
    assert!(fx.root.join("cfg.é").is_dir());
}

/// A directory a pattern protects whole by name (`.github/**`) that does
/// not exist is made, empty, before the command and bound read-only like
/// any protected directory: creating a workflow fails while the command
/// runs. It is never removed, and is made again when the host removes it.
/// Never a `.git`, never through a symlink, and not without namespaces.
#[test]
fn a_missing_protected_directory_gets_a_read_only_placeholder() {
    let fx = fixture(false);
    fs::remove_dir_all(fx.root.join(".github")).unwrap();
    let patterns = &["*.lock", ".github/**", "ci/workflows/**", ".git/hooks/**"];
    let Some(ex) = in_view("placeholder", &fx, false, patterns) else {
        return;
    };
    for dir in [".github", "ci/workflows"] {
        assert!(fx.root.join(dir).is_dir(), "{dir} was not made");
        assert_eq!(fs::read_dir(fx.root.join(dir)).unwrap().count(), 0);
    }
    // An empty `.git` would change where git finds its repository.
    assert!(!fx.root.join(".git").exists());
    let (r, _, err) = run_bound(
        &ex,
        "echo control > free.txt && mkdir -p .github/workflows; \
         echo evil > ci/workflows/x.yml; rmdir .github; true",
    );
    assert_eq!(r.exit_code, 0, "{err}");
    assert_eq!(err.matches("Read-only file system").count(), 2, "{err}");
    assert!(err.contains("Device or resource busy"), "{err}");
    assert_eq!(
        fs::read_to_string(fx.root.join("free.txt")).unwrap(),
        "control\n"
    );
    assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
    assert_eq!(fs::read_dir(fx.root.join(".github")).unwrap().count(), 0);
    assert!(!fx.root.join("ci/workflows/x.yml").exists());
    // Removed by the host between commands: made again at the next one.
    fs::remove_dir(fx.root.join(".github")).unwrap();
    let (_, _, err) = run_bound(&ex, "mkdir .github/workflows; true");
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(fx.root.join(".github").is_dir());
    assert!(!fx.root.join(".github/workflows").exists());
    drop(ex);
    // The placeholders stay when the executor goes.
    assert!(fx.root.join(".github").is_dir());

    // A symlink where a placeholder would go is not followed.
    let fx = fixture(false);
    fs::remove_dir_all(fx.root.join(".github")).unwrap();
    std::os::unix::fs::symlink("src", fx.root.join("ci")).unwrap();
    let Some(ex) = in_view("placeholder", &fx, false, patterns) else {
        return;
    };
    run(&ex, "true");
    assert!(!fx.root.join("src/workflows").exists());
    assert!(fx.root.join(".github").is_dir());

    // Without namespaces nothing is made.
    let fx = fixture(false);
    fs::remove_dir_all(fx.root.join(".github")).unwrap();
    let ex = build(&fx, false, patterns, Confine::Off);
    let r = run(&ex, "true");
    assert!(!r.confined.namespaces);
    assert!(!fx.root.join(".github").exists());
}
