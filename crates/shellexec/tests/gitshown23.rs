//! Confined git's messages spell a name as every sandgate message does: a
//! backslash doubled, a byte that is not UTF-8 as `\xNN`, a control as
//! `\u{…}`. Before, git's messages had their own spelling: a backslash
//! was left single (so the text `\u{1b}` in a word read like the escape
//! character, and `\xff` like the byte 0xFF), and a name in `.git` that is
//! not UTF-8 was shown with U+FFFD.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

use sandgate_shellexec::git::{find_git, plan, split_words, GitErrorKind, GitSubcommand};

const ALL: [GitSubcommand; 3] = GitSubcommand::ALL;

/// A refused word holding the text `\u{1b}` and one holding the escape
/// character itself are shown apart, and neither reads as the other.
#[test]
fn gitshown23_a_refused_word_with_a_backslash_is_not_shown_as_a_control() {
    let root = Path::new("/nonexistent/root");
    let text = plan(&split_words(r"git '--a\u{1b}'").unwrap(), &ALL, root).unwrap_err();
    // The splitter refuses a control; the planner is handed one directly.
    let words = ["git".to_owned(), "--a\u{1b}".to_owned()];
    let control = plan(&words, &ALL, root).unwrap_err();
    assert_eq!(text.kind(), GitErrorKind::Refused, "{text}");
    assert_eq!(control.kind(), GitErrorKind::Refused, "{control}");
    assert!(
        text.message().contains(r"`--a\\u{1b}`"),
        "the text \\u{{1b}} is shown as {:?}",
        text.message()
    );
    assert!(
        control.message().contains(r"`--a\u{1b}`"),
        "the escape character is shown as {:?}",
        control.message()
    );
    assert_ne!(text.message(), control.message());
    assert!(!control.message().contains('\u{1b}'), "{control}");
    // A long word is still cut, after its 120th character.
    let long = format!("git '--{}'", "\\".repeat(200));
    let err = plan(&split_words(&long).unwrap(), &ALL, root);
    let err = match err {
        Err(e) => e,
        Ok(inv) => panic!("admitted: {inv:?}"),
    };
    assert!(
        err.message()
            .contains(&format!("`--{}…`", r"\\".repeat(118))),
        "{err}"
    );
}

/// A link in `.git` whose name holds a backslash and a byte that is not
/// UTF-8 is refused by a name that tells both apart: the byte 0xFF as
/// `\xff`, the text `\xff` as `\\xff`.
#[test]
fn gitshown23_a_refused_name_in_dot_git_keeps_its_bytes_and_backslashes() {
    let Some(git) = find_git() else {
        eprintln!("note: no git; skipped");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("root");
    fs::create_dir(&root).unwrap();
    let out = Command::new(git)
        .args(["init", "-q", "."])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let name = OsStr::from_bytes(b"a\xffb\\xff");
    std::os::unix::fs::symlink("/etc/passwd", root.join(".git").join(name)).unwrap();
    let err = match plan(&split_words("git status").unwrap(), &ALL, &root) {
        Err(e) => e,
        Ok(inv) => panic!("a link in .git was admitted: {inv:?}"),
    };
    assert_eq!(err.kind(), GitErrorKind::Repository, "{err}");
    assert!(
        err.message()
            .contains(r".git/a\xffb\\xff is a symbolic link"),
        "the name is shown as {:?}",
        err.message()
    );
}

/// A shell metacharacter refused in a word is shown as the word around
/// it is: the refused backslash and those after it doubled, as the
/// planner's refusals double them.
#[test]
fn gitshown23_a_refused_metacharacter_is_shown_as_the_word_around_it() {
    let err = split_words(r"git log a\b\c").unwrap_err();
    assert_eq!(err.kind(), GitErrorKind::Syntax, "{err}");
    assert!(
        err.message().contains(r"metacharacter `\\` in `a\\b\\c`"),
        "{:?}",
        err.message()
    );
}

/// A directory in `.git` whose name is not UTF-8 is vetted under its own
/// name: before, the vetting opened it by its lossy spelling (U+FFFD for
/// the byte), so `git status` in a repository holding `.git/d` + 0xFF was
/// refused with E_IO (no such directory), where plain git answers, and a
/// sibling named with U+FFFD was looked into in its stead.
#[test]
fn gitshown23_a_directory_in_dot_git_not_utf8_is_vetted_by_its_bytes() {
    let Some(git) = find_git() else {
        eprintln!("note: no git; skipped");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("root");
    fs::create_dir(&root).unwrap();
    let out = Command::new(git)
        .args(["init", "-q", "."])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let odd = root.join(".git").join(OsStr::from_bytes(b"d\xff"));
    fs::create_dir(&odd).unwrap();
    fs::write(odd.join("f"), "x\n").unwrap();
    if let Err(e) = plan(&split_words("git status").unwrap(), &ALL, &root) {
        panic!("refused: {:?} {e}", e.kind());
    }
    // With a sibling named with U+FFFD, each is looked into under its own
    // name: a link in the one that is not UTF-8 is still found.
    let lossy = root.join(".git").join("d\u{fffd}");
    fs::create_dir(&lossy).unwrap();
    fs::write(lossy.join("f"), "y\n").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", odd.join("g")).unwrap();
    let err = match plan(&split_words("git status").unwrap(), &ALL, &root) {
        Err(e) => e,
        Ok(inv) => panic!("a link in .git/d\\xff was admitted: {inv:?}"),
    };
    assert_eq!(err.kind(), GitErrorKind::Repository, "{err}");
    assert!(
        err.message().contains(r".git/d\xff/g is a symbolic link"),
        "{err}"
    );
}

const FSIZE_CHILD: &str = "SANDGATE_GITSHOWN23_FSIZE_CHILD";

/// In the child only: under a file size limit of 4096 bytes, planning
/// fails copying `.git/info/d` + 0xFF + `\x` (10,000 bytes), named by its
/// bytes.
#[test]
fn gitshown23_child_copy_refused() {
    let Some(root) = std::env::var_os(FSIZE_CHILD) else {
        return;
    };
    let limit = rustix::process::Rlimit {
        current: Some(4096),
        maximum: None,
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit).unwrap();
    let e = plan(&split_words("git status").unwrap(), &ALL, Path::new(&root)).unwrap_err();
    assert_eq!(e.kind(), GitErrorKind::Io, "{e}");
    assert!(
        e.message()
            .contains(r"cannot copy .git/info/d\xff\\x into git's private git directory"),
        "{:?}",
        e.message()
    );
    println!("COPY-NAMED-OK");
}

/// A file in `.git` that cannot be copied for git (past the file size
/// limit) is named by its bytes, not lossily.
#[test]
fn gitshown23_a_file_in_dot_git_that_cannot_be_copied_is_named_by_its_bytes() {
    if std::env::var_os(FSIZE_CHILD).is_some() {
        return;
    }
    let Some(git) = find_git() else {
        eprintln!("note: no git; skipped");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (root, tmpdir) = (base.join("root"), base.join("tmp"));
    fs::create_dir(&root).unwrap();
    fs::create_dir(&tmpdir).unwrap();
    let out = Command::new(git)
        .args(["init", "-q", "."])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    fs::create_dir_all(root.join(".git/info")).unwrap();
    fs::write(
        root.join(".git/info").join(OsStr::from_bytes(b"d\xff\\x")),
        vec![b'x'; 10_000],
    )
    .unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "gitshown23_child_copy_refused", "--nocapture"])
        .env(FSIZE_CHILD, &root)
        .env("TMPDIR", &tmpdir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("COPY-NAMED-OK"),
        "the child ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A directory the confinement cannot open is named as every message
/// names a path: before, `Path::display` showed the byte 0xFF as U+FFFD
/// and a line feed raw, splitting the refusal.
#[test]
fn gitshown23_a_confined_dir_that_cannot_be_opened_is_named_by_its_bytes() {
    use sandgate_shellexec::confine::{kernel_abi, prepare, ConfineMode, ConfineSpec};
    if kernel_abi().is_none() {
        eprintln!("note: no Landlock; skipped");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join(OsStr::from_bytes(b"d\xff\\x\ny"));
    let spec = ConfineSpec {
        read_dirs: vec![missing],
        ..ConfineSpec::default()
    };
    let e = match prepare(&spec, ConfineMode::BestEffort) {
        Err(e) => e,
        Ok(_) => panic!("a missing read dir was confined to"),
    };
    let msg = e.to_string();
    assert!(
        msg.contains(&format!(
            "read dir {}/d\\xff\\\\x\\u{{a}}y",
            tmp.path().display()
        )),
        "{msg:?}"
    );
    assert!(!msg.contains('\n'), "{msg:?}");
}
