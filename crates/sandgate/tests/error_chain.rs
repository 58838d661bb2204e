//! Every error type's cause chain, for one error of each kind, made by real
//! operations on real files: each level's text says something, no level
//! repeats the text of a cause below it (each cause is printed once), and
//! the facade's `Error` keeps the lower layer's error as its `source()` so
//! that a caller can downcast to it, while its `message()` still reads as
//! the whole story.

use std::error::Error as StdError;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use sandgate::fileguard::{GuardBuilder, PatternErrorKind};
use sandgate::policy::{Policy, PolicyError, PolicyErrorKind};
use sandgate::rootfs::{ErrorKind, Root};
use sandgate::shellexec::confine::{prepare_with_abi, ConfineErrorKind, ConfineMode, ConfineSpec};
use sandgate::shellexec::exec::{ExecConfig, ExecOptions, LocalShellExecutor, ShellExecutor};
use sandgate::shellexec::git::{self, GitErrorKind, GitSubcommand};
use sandgate::{
    chain_message, EditOptions, Error, ErrorCode, RelPath, RelPathReason, Sandbox, WriteOptions,
};

/// The texts of `e` and of every cause below it, outermost first.
fn texts(e: &(dyn StdError + 'static)) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut next = e.source();
    while let Some(cause) = next {
        out.push(cause.to_string());
        next = cause.source();
    }
    out
}

/// Asserts the chain below `e` prints each cause once; answers its depth.
fn check_chain(what: &str, e: &(dyn StdError + 'static)) -> usize {
    let texts = texts(e);
    for (i, outer) in texts.iter().enumerate() {
        assert!(!outer.trim().is_empty(), "{what}: level {i} says nothing");
        for inner in &texts[i + 1..] {
            assert!(
                !outer.contains(inner.as_str()),
                "{what}: `{outer}` prints its cause `{inner}` again"
            );
        }
    }
    assert_eq!(chain_message(e), texts.join(": "), "{what}");
    texts.len()
}

/// Checks a facade error made from `cause_text`'s error: the source is the
/// lower error (downcastable to `T`), the message is the whole story, and
/// the chain prints each cause once.
fn check_facade<T: StdError + 'static>(what: &str, e: &Error) {
    let source = e
        .source()
        .unwrap_or_else(|| panic!("{what}: the facade error has no source: {e:?}"));
    assert!(
        source.downcast_ref::<T>().is_some(),
        "{what}: the source is not a {}",
        std::any::type_name::<T>()
    );
    assert!(!e.message().is_empty(), "{what}");
    assert_eq!(e.to_string(), e.code().as_str(), "{what}");
    let depth = check_chain(what, e);
    assert!(depth >= 2, "{what}");
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn rootfs_errors_of_every_kind() {
    let dir = tmp();
    fs::write(dir.path().join("file"), "x").unwrap();
    fs::create_dir(dir.path().join("full")).unwrap();
    fs::write(dir.path().join("full/inner"), "y").unwrap();
    symlink("loop2", dir.path().join("loop1")).unwrap();
    symlink("loop1", dir.path().join("loop2")).unwrap();
    symlink("/etc/passwd", dir.path().join("abs")).unwrap();
    fs::write(dir.path().join("big"), vec![b'z'; 100]).unwrap();
    let root = Root::open(dir.path()).unwrap();

    let cases: Vec<(ErrorKind, sandgate::rootfs::Error)> = vec![
        (ErrorKind::InvalidPath, root.stat("a\0b").unwrap_err()),
        (ErrorKind::Escape, root.stat("../outside").unwrap_err()),
        (ErrorKind::Escape, root.read("abs").unwrap_err()),
        (ErrorKind::NotFound, root.stat("missing").unwrap_err()),
        (ErrorKind::Exists, root.mkdir("full", 0o755).unwrap_err()),
        (ErrorKind::NotFile, root.read("full").unwrap_err()),
        (ErrorKind::NotDir, root.stat("file/").unwrap_err()),
        (ErrorKind::NotEmpty, root.remove_dir("full").unwrap_err()),
        (ErrorKind::Loop, root.read("loop1").unwrap_err()),
        (ErrorKind::TooLarge, root.read_max("big", 10).unwrap_err()),
    ];
    for (kind, e) in cases {
        assert_eq!(e.kind(), kind, "{e}");
        let what = format!("rootfs {kind:?}");
        check_chain(&what, &e);
        let facade = Error::from(e.clone());
        assert_eq!(facade.code(), e.code());
        assert_eq!(facade.message(), e.reason(), "{what}");
        check_facade::<sandgate::rootfs::Error>(&what, &facade);
    }
}

#[test]
fn relpath_errors_of_every_reason() {
    let long_component = "a".repeat(256);
    let long_name = "a/".repeat(2100);
    let cases = [
        ("", RelPathReason::Empty),
        ("a\0b", RelPathReason::Nul),
        ("/etc", RelPathReason::Absolute),
        ("C:x", RelPathReason::Drive),
        ("\\\\server\\share", RelPathReason::Unc),
        ("a\\b", RelPathReason::Backslash),
        ("a/../b", RelPathReason::ParentComponent),
        ("dir/CON.txt", RelPathReason::ReservedName),
        ("dir/ab:c", RelPathReason::Colon),
        (long_name.as_str(), RelPathReason::TooLong),
        (long_component.as_str(), RelPathReason::ComponentTooLong),
    ];
    for (name, reason) in cases {
        let e = RelPath::parse(name).unwrap_err();
        assert_eq!(e.reason(), reason, "{name:?}: {e}");
        let what = format!("relpath {reason:?}");
        check_chain(&what, &e);
        let facade = Error::from(e.clone());
        assert_eq!(facade.code(), ErrorCode::PathInvalid);
        assert_eq!(facade.message(), e.to_string());
        check_facade::<sandgate::RelPathError>(&what, &facade);
    }
}

/// `?` carries a policy refusal into the facade's error.
fn load_into_facade(path: &Path) -> Result<Policy, Error> {
    Ok(Policy::load(path)?)
}

#[test]
fn policy_errors_of_every_kind() {
    let dir = tmp();
    let base = dir.path();
    fs::create_dir(base.join("ro")).unwrap();
    fs::create_dir(base.join("work")).unwrap();
    fs::write(base.join("plain"), "").unwrap();
    let cases: &[(PolicyErrorKind, &str)] = &[
        (PolicyErrorKind::Syntax, "[fs\n"),
        (
            PolicyErrorKind::DuplicateKey,
            "[fs]\nallow_overwrite = true\nallow_overwrite = false\n",
        ),
        (PolicyErrorKind::UnknownKey, "[fs]\nread_rots = [\"ro\"]\n"),
        (
            PolicyErrorKind::WrongType,
            "[fs]\nmax_read_bytes = \"big\"\n",
        ),
        (PolicyErrorKind::InvalidValue, "[exec]\ntimeout_ms = 0\n"),
        (
            PolicyErrorKind::RootMissing,
            "[fs]\nread_roots = [\"nowhere\"]\n",
        ),
        (
            PolicyErrorKind::RootNotDirectory,
            "[fs]\nread_roots = [\"plain\"]\n",
        ),
        (
            PolicyErrorKind::WriteRootContainsPolicy,
            "[fs]\nwrite_root = \".\"\n",
        ),
        (
            PolicyErrorKind::BudgetWithoutCapability,
            "[budgets]\nexec_ops = 3\n",
        ),
        (
            PolicyErrorKind::ProcessNotAllowed,
            "[exec]\nenabled = true\nprocess_allow = [\"rm\"]\n",
        ),
        (
            PolicyErrorKind::NetEntryMalformed,
            "[net]\nallow = [\"http://host\"]\n",
        ),
        (
            PolicyErrorKind::NetEntryRefused,
            "[net]\nallow = [\"10.0.0.5:22\"]\n",
        ),
    ];
    for (kind, text) in cases {
        let path = base.join("policy.toml");
        fs::write(&path, text).unwrap();
        let e: PolicyError = Policy::load(&path).unwrap_err();
        assert_eq!(e.kind(), *kind, "{text}: {e}");
        let what = format!("policy {kind:?}");
        check_chain(&what, &e);
        let facade = load_into_facade(&path).unwrap_err();
        assert_eq!(facade.code(), ErrorCode::Policy);
        assert_eq!(facade.key(), e.key(), "{what}");
        assert_eq!(facade.message(), e.to_string(), "{what}");
        check_facade::<PolicyError>(&what, &facade);
    }

    // A file that cannot be read: the OS error is the policy error's
    // source, printed once, and the facade's message still names it.
    let missing = base.join("absent.toml");
    let e = Policy::load(&missing).unwrap_err();
    assert_eq!(e.kind(), PolicyErrorKind::Read);
    let io = e.source().expect("the read error is the source");
    assert!(io.downcast_ref::<std::io::Error>().is_some());
    assert_eq!(check_chain("policy Read", &e), 2);
    let facade = load_into_facade(&missing).unwrap_err();
    check_facade::<PolicyError>("policy Read", &facade);
    assert!(
        facade.message().contains("absent.toml") && facade.message().contains(&io.to_string()),
        "{}",
        facade.message()
    );
}

#[test]
fn pattern_errors_of_every_kind() {
    for (pattern, kind) in [
        ("", PatternErrorKind::Empty),
        ("/etc/**", PatternErrorKind::Absolute),
        ("a/../b", PatternErrorKind::ParentComponent),
    ] {
        let e = GuardBuilder::new().pattern(pattern).build().unwrap_err();
        assert_eq!(e.kind(), kind);
        let what = format!("pattern {kind:?}");
        check_chain(&what, &e);
        // The sandbox refuses it as a policy problem, naming the setting.
        let dir = tmp();
        let facade = Sandbox::builder()
            .write_root(dir.path())
            .deny_write(pattern)
            .build()
            .err()
            .expect("the pattern is refused");
        assert_eq!(facade.code(), ErrorCode::Policy);
        assert_eq!(facade.key(), Some("fs.deny_write"));
        assert_eq!(facade.pattern(), Some(pattern));
        check_facade::<sandgate::fileguard::PatternError>(&what, &facade);
    }
}

#[test]
fn confine_errors_unavailable_and_path() {
    // Playing a kernel without Landlock (`Some(0)`) makes `required` fail
    // on any host.
    let Err(e) = prepare_with_abi(&ConfineSpec::default(), ConfineMode::Required, Some(0)) else {
        panic!("required confinement without Landlock is refused");
    };
    assert_eq!(e.kind(), ConfineErrorKind::Unavailable);
    check_chain("confine Unavailable", &e);
    let facade = Error::from(e);
    assert_eq!(facade.code(), ErrorCode::ConfineUnavailable);
    check_facade::<sandgate::shellexec::confine::ConfineError>("confine Unavailable", &facade);

    // A directory to grant that does not exist: the OS error is the source.
    let dir = tmp();
    let spec = ConfineSpec {
        read_dirs: vec![dir.path().join("gone")],
        ..ConfineSpec::default()
    };
    match prepare_with_abi(&spec, ConfineMode::BestEffort, None) {
        Ok(_) => eprintln!(
            "SKIP confine Path: this kernel offers no Landlock, so no directory is opened"
        ),
        Err(e) => {
            assert_eq!(e.kind(), ConfineErrorKind::Path, "{e}");
            assert_eq!(e.errno(), Some(libc::ENOENT));
            assert_eq!(check_chain("confine Path", &e), 2);
            let facade = Error::from(e);
            assert_eq!(facade.code(), ErrorCode::NotFound);
            assert_eq!(facade.errno(), Some(libc::ENOENT));
            check_facade::<sandgate::shellexec::confine::ConfineError>("confine Path", &facade);
            assert!(
                facade.message().contains("No such file"),
                "{}",
                facade.message()
            );
        }
    }
}

#[test]
fn exec_errors_not_started_and_io() {
    let executor = LocalShellExecutor::new(ExecConfig::default());
    let e = executor
        .exec("true", ExecOptions::default())
        .expect_err("exec before start is refused");
    assert_eq!(e.code(), ErrorCode::NotStarted);
    check_chain("exec NotStarted", &e);
    let facade = Error::from(e);
    check_facade::<sandgate::shellexec::exec::ExecError>("exec NotStarted", &facade);

    // Starting fails when a directory to grant is missing: the OS error is
    // the source, printed once.
    let dir = tmp();
    let config = ExecConfig {
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec {
            read_dirs: vec![dir.path().join("gone")],
            ..ConfineSpec::default()
        },
        ..ExecConfig::default()
    };
    match LocalShellExecutor::new(config).start() {
        Ok(()) => eprintln!("SKIP exec start: no Landlock here, so no directory is opened"),
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::NotFound, "{e}");
            assert_eq!(check_chain("exec start", &e), 2);
            let facade = Error::from(e);
            assert_eq!(facade.errno(), Some(libc::ENOENT));
            check_facade::<sandgate::shellexec::exec::ExecError>("exec start", &facade);
        }
    }
}

#[test]
fn git_errors_of_every_kind() {
    let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let all = [
        GitSubcommand::Status,
        GitSubcommand::Diff,
        GitSubcommand::Log,
    ];
    let dir = tmp();

    let syntax = git::split_words("git status; rm -rf x").unwrap_err();
    assert_eq!(syntax.kind(), GitErrorKind::Syntax);
    let not_allowed =
        git::plan(&words("git log"), &[GitSubcommand::Status], dir.path()).unwrap_err();
    assert_eq!(
        not_allowed.kind(),
        GitErrorKind::NotAllowed,
        "{not_allowed}"
    );
    let refused = git::plan(&words("git diff --output=x"), &all, dir.path()).unwrap_err();
    assert_eq!(refused.kind(), GitErrorKind::Refused, "{refused}");
    let io = git::plan(&words("git status"), &all, &dir.path().join("gone")).unwrap_err();

    let mut cases = vec![("git Syntax", syntax), ("git NotAllowed", not_allowed)];
    cases.push(("git Refused", refused));
    match io.kind() {
        GitErrorKind::NoGit => eprintln!("SKIP git Io: no git executable on this host"),
        kind => {
            assert_eq!(kind, GitErrorKind::Io, "{io}");
            assert!(io.errno().is_some());
            cases.push(("git Io", io));
        }
    }
    // A root that is no repository at all.
    match git::plan(&words("git status"), &all, dir.path()) {
        Err(e) if e.kind() == GitErrorKind::Repository => cases.push(("git Repository", e)),
        Err(e) if e.kind() == GitErrorKind::NoGit => cases.push(("git NoGit", e)),
        other => eprintln!("SKIP git Repository: planning answered {other:?}"),
    }
    for (what, e) in cases {
        check_chain(what, &e);
        let code = e.code();
        let facade = Error::from(e);
        assert_eq!(facade.code(), code);
        check_facade::<sandgate::shellexec::git::GitError>(what, &facade);
    }
}

#[test]
fn fetch_error_keeps_its_message() {
    let dir = tmp();
    let policy = Policy::from_bytes(b"[net]\nallow = [\"example.com\"]\n", dir.path(), None)
        .expect("policy");
    let fetcher = sandgate::fetch::from_policy(&policy);
    let e = fetcher
        .fetch(
            "https://not-granted.invalid/",
            &sandgate::fetch::FetchOptions::new(),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NetDenied, "{e}");
    check_chain("fetch NetDenied", &e);
    let facade = Error::from(e.clone());
    assert_eq!(facade.message(), e.message());
    check_facade::<sandgate::fetch::FetchError>("fetch NetDenied", &facade);
}

#[test]
fn facade_errors_from_the_sandbox() {
    let dir = tmp();
    fs::write(dir.path().join("kept"), "old").unwrap();
    fs::create_dir(dir.path().join("d")).unwrap();
    let sandbox = Sandbox::builder()
        .read_root(dir.path())
        .write_root(dir.path())
        .deny_write("*.lock")
        .build()
        .unwrap();

    // Caused by a lower layer: the source is that layer's error.
    let e = sandbox.stat("kept/").unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotDir);
    assert_eq!(e.path(), Some("kept"));
    check_facade::<sandgate::rootfs::Error>("sandbox stat kept/", &e);
    let e = sandbox.read("d").unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotFile);
    check_facade::<sandgate::rootfs::Error>("sandbox read d", &e);
    let e = sandbox.read("../x").unwrap_err();
    assert_eq!(e.code(), ErrorCode::PathInvalid);
    check_facade::<sandgate::RelPathError>("sandbox read ../x", &e);

    // Raised by the facade itself: no source, and the text is all in
    // Display.
    for (what, e) in [
        (
            "exists",
            sandbox
                .write("kept", b"new", WriteOptions::default())
                .unwrap_err(),
        ),
        (
            "protected",
            sandbox
                .write("Cargo.lock", b"x", WriteOptions::default())
                .unwrap_err(),
        ),
        (
            "edit no match",
            sandbox
                .edit("kept", "absent", "x", EditOptions::default())
                .unwrap_err(),
        ),
    ] {
        assert!(e.source().is_none(), "{what}: {e:?}");
        assert_eq!(e.to_string(), format!("{}: {}", e.code(), e.message()));
        check_chain(what, &e);
    }
    sandbox.close();
    let e = sandbox.read("kept").unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed);
    check_chain("closed", &e);
}
