//! The fallback proof: the corpus and the operation tests run a second time
//! in a child process under a seccomp filter that makes `openat2` fail with
//! ENOSYS (an old kernel), and once more with EPERM (a container's filter),
//! and `Resolver::Auto` must give the same answers there.
//!
//! The parent tests (`suite_under_seccomp_*`) re-execute this binary with
//! `SANDGATE_TEST_SECCOMP` set; in the child `common::setup` installs the
//! filter and `common::resolvers` swaps the forced `Openat2` for `Auto`. The
//! `child_*` tests only act in that child and check that the filter is in
//! force, so that the re-run cannot pass by running with `openat2` after all.

use std::fs;
use std::process::Command;

use sandgate_rootfs::{openat2_supported, ErrorKind, OpenOptions, Resolver, Root};

use crate::common::{setup, Fixture};
use crate::seccomp;

/// The fewest corpus and operation tests the child must pass (the corpus
/// alone has well over this many), so that a filter matching nothing fails.
const MIN_SUITE_PASSED: usize = 50;

/// What the re-executed child reported.
struct ChildRun {
    /// The "N passed" of libtest's summary line.
    passed: usize,
    /// How many of them were corpus and operation tests.
    suite_passed: usize,
    /// How many `fallback::child_` tests passed.
    child_passed: usize,
}

fn run_child(mode: &str) -> ChildRun {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(&exe)
        .args(["--test-threads", "2"])
        // libtest runs every test whose name contains one of these.
        .args(["corpus::", "ops::", "fallback::child_"])
        .args(["--skip", "fallback::suite_"])
        .env(seccomp::ENV, mode)
        .output()
        .expect("re-executing the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = || format!("--- child stdout ---\n{stdout}\n--- child stderr ---\n{stderr}");
    assert!(
        out.status.success(),
        "the suite failed under a seccomp filter making openat2 return {mode} ({})\n{}",
        out.status,
        context()
    );
    let passed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("test result: ok. "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no `test result: ok. N passed` line\n{}", context()));
    let child_passed = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test fallback::child_"))
        .filter(|l| l.ends_with(" ... ok"))
        .count();
    ChildRun {
        passed,
        suite_passed: passed.saturating_sub(child_passed),
        child_passed,
    }
}

fn suite_under_seccomp(mode: &str) {
    if seccomp::active() {
        // Already the child: never recurse.
        return;
    }
    let run = run_child(mode);
    eprintln!(
        "fallback ({mode}): {} passed ({} corpus/ops, {} filter checks)",
        run.passed, run.suite_passed, run.child_passed
    );
    assert!(run.passed > 0, "the child passed no tests");
    assert!(
        run.child_passed >= 1,
        "the child did not run fallback::child_sees_no_openat2, so the filter is unproven"
    );
    assert!(
        run.suite_passed >= MIN_SUITE_PASSED,
        "only {} corpus/ops tests passed under the filter; expected at least {MIN_SUITE_PASSED}",
        run.suite_passed
    );
}

#[test]
fn suite_under_seccomp_enosys() {
    suite_under_seccomp("enosys");
}

#[test]
fn suite_under_seccomp_eperm() {
    suite_under_seccomp("eperm");
}

/// In the child only: the filter is in force, `Auto` falls back to the walk
/// and answers, and a forced `Openat2` reports the filter's errno.
#[test]
fn child_sees_no_openat2() {
    setup();
    let Some(errno) = seccomp::errno() else {
        return;
    };
    assert!(
        !openat2_supported(),
        "openat2 still works under the seccomp filter"
    );

    let fx = Fixture::new();
    fx.file("a/b.txt", "inside").link("up", "../outside/secret");

    let auto = fx.root(Resolver::Auto);
    assert!(!auto.openat2_unavailable(), "nothing has failed yet");
    assert_eq!(auto.read("a/b.txt").unwrap(), b"inside");
    assert!(
        auto.openat2_unavailable(),
        "Auto did not notice that openat2 is filtered"
    );
    // The walk now answers, with the same rules.
    assert_eq!(auto.read("a/../a/b.txt").unwrap(), b"inside");
    assert_eq!(auto.read("up").unwrap_err().kind(), ErrorKind::Escape);
    assert_eq!(
        auto.read("../outside/secret").unwrap_err().kind(),
        ErrorKind::Escape
    );
    assert_eq!(auto.read("a/nope").unwrap_err().kind(), ErrorKind::NotFound);
    auto.replace("a/c.txt", b"new").unwrap();
    assert_eq!(fs::read(fx.p("a/c.txt")).unwrap(), b"new");

    // A fresh Auto root rediscovers the filter on its first call that
    // resolves, whatever the call is. (A stat of a plain name in the root
    // needs no resolution: one fstatat answers it.)
    let auto2 = fx.root(Resolver::Auto);
    assert!(auto2.stat("a").unwrap().is_dir());
    assert!(!auto2.openat2_unavailable());
    assert!(auto2.stat("a/b.txt").unwrap().is_file());
    assert!(auto2.openat2_unavailable());
    let auto3 = fx.root(Resolver::Auto);
    assert_eq!(auto3.read("up").unwrap_err().kind(), ErrorKind::Escape);
    assert!(auto3.openat2_unavailable());

    // Forcing openat2 shows the filter's errno instead of falling back.
    let forced = fx.root(Resolver::Openat2);
    let err = forced.read("a/b.txt").unwrap_err();
    assert_eq!(err.errno(), Some(errno), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Io, "{err:?}");
    assert!(!forced.openat2_unavailable(), "only Auto remembers");

    let walk = fx.root(Resolver::Walk);
    assert_eq!(walk.read("a/b.txt").unwrap(), b"inside");
}

/// In the parent (no filter): where the kernel has openat2, `Auto` uses it
/// and never marks it unavailable, whatever the operations and their errors.
#[test]
fn parent_auto_uses_openat2() {
    setup();
    if seccomp::active() {
        return;
    }
    if !openat2_supported() {
        eprintln!("note: this kernel has no openat2; Auto walks, nothing to check");
        return;
    }
    let fx = Fixture::new();
    fx.file("a/b.txt", "inside")
        .dir("d")
        .link("up", "../outside/secret")
        .link("abs", "/etc/passwd")
        .link("rel", "a/b.txt");
    let root: Root = fx.root(Resolver::Auto);
    assert_eq!(root.read("a/b.txt").unwrap(), b"inside");
    assert_eq!(root.read("rel").unwrap(), b"inside");
    assert!(root.stat("a").unwrap().is_dir());
    assert!(root.lstat("rel").unwrap().is_symlink());
    assert_eq!(root.read("up").unwrap_err().kind(), ErrorKind::Escape);
    assert_eq!(root.read("abs").unwrap_err().kind(), ErrorKind::Escape);
    assert_eq!(root.read("..").unwrap_err().kind(), ErrorKind::Escape);
    assert_eq!(root.read("nope").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(root.read("a/b.txt/").unwrap_err().kind(), ErrorKind::NotDir);
    root.replace("a/c.txt", b"new").unwrap();
    root.mkdir("d/e", 0o755).unwrap();
    root.mkdir_all("x/y/z", 0o755).unwrap();
    drop(root.create_new("d/n").unwrap());
    let mut opts = OpenOptions::new();
    opts.write(true).create(true);
    drop(root.open_with("d/w", &opts).unwrap());
    assert!(!root.read_dir("d").unwrap().is_empty());
    root.rename("d/n", "d/m", sandgate_rootfs::RenameMode::NoReplace)
        .unwrap();
    root.remove("d/m").unwrap();
    assert_eq!(fs::read(fx.p("a/c.txt")).unwrap(), b"new");
    assert!(
        !root.openat2_unavailable(),
        "Auto gave up openat2 although the kernel has it"
    );
}

/// Set, to the root's path, in the child
/// [`the_walk_holds_few_descriptors_however_deep_the_path`] starts with
/// a descriptor limit below the tree's depth.
const NOFILE_ENV: &str = "SANDGATE_TEST_NOFILE_ROOT";
/// How deep the tree goes: past the usual soft limit of 1024 descriptors.
const DEEP: usize = 1500;
/// The descriptor limit the child runs under.
const CHILD_NOFILE: u64 = 1024;

/// The child's part: the walk resolves a path 1,500 directories deep, and
/// one that climbs 1,300 of them back through a link, under a limit of
/// 1,024 descriptors.
#[test]
fn nofile_walk_deeper_than_the_limit() {
    let Some(dir) = std::env::var_os(NOFILE_ENV) else {
        return;
    };
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    assert_eq!(limit.current, Some(CHILD_NOFILE));
    let root = Root::open_with_resolver(&dir, Resolver::Walk).unwrap();
    let deep = vec!["d"; DEEP].join("/");
    assert_eq!(root.read(format!("{deep}/f")).unwrap(), b"bottom");
    assert!(root.stat(&deep).unwrap().is_dir());
    assert_eq!(root.read(format!("{deep}/up")).unwrap(), b"middle");
    assert_eq!(
        root.read(format!("{deep}/out")).unwrap_err().kind(),
        ErrorKind::Escape
    );
    root.replace(format!("{deep}/g"), b"new").unwrap();
    assert_eq!(root.read(format!("{deep}/g")).unwrap(), b"new");
    // openat2 holds no descriptor on the way: the same answers.
    if openat2_supported() {
        let root = Root::open_with_resolver(&dir, Resolver::Openat2).unwrap();
        assert_eq!(root.read(format!("{deep}/f")).unwrap(), b"bottom");
        assert_eq!(root.read(format!("{deep}/up")).unwrap(), b"middle");
        assert_eq!(
            root.read(format!("{deep}/out")).unwrap_err().kind(),
            ErrorKind::Escape
        );
    }
}

/// The walk keeps a descriptor per directory it may climb back to with
/// `..`; it held one for every level of the path, so a path deeper than
/// the process's descriptor limit (a tree an agent can make, 1,024 levels
/// under the usual soft limit) failed with EMFILE where openat2 answers,
/// and while it resolved, every other open of the host failed too.
#[test]
fn the_walk_holds_few_descriptors_however_deep_the_path() {
    use rustix::fs::{mkdirat, openat, Mode, OFlags};
    use std::os::unix::process::CommandExt;
    setup();
    if seccomp::active() || std::env::var_os(NOFILE_ENV).is_some() {
        return;
    }
    let fx = Fixture::new();
    let dirflags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd = openat(rustix::fs::CWD, fx.root_path(), dirflags, Mode::empty()).unwrap();
    for level in 0..DEEP {
        if level == DEEP - 1300 {
            let f = openat(
                &fd,
                "mid",
                OFlags::CREATE | OFlags::WRONLY,
                Mode::from(0o644),
            );
            rustix::io::write(f.unwrap(), b"middle").unwrap();
            let out = format!("{}outside/secret", "../".repeat(level + 1));
            rustix::fs::symlinkat(out.as_str(), &fd, "out").unwrap();
        }
        mkdirat(&fd, "d", Mode::from(0o755)).unwrap();
        fd = openat(&fd, "d", dirflags, Mode::empty()).unwrap();
    }
    let f = openat(&fd, "f", OFlags::CREATE | OFlags::WRONLY, Mode::from(0o644));
    rustix::io::write(f.unwrap(), b"bottom").unwrap();
    let up = format!("{}mid", "../".repeat(1300));
    rustix::fs::symlinkat(up.as_str(), &fd, "up").unwrap();
    let out = format!("{}out", "../".repeat(1300));
    rustix::fs::symlinkat(out.as_str(), &fd, "out").unwrap();
    drop(fd);

    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "fallback::nofile_walk_deeper_than_the_limit"])
        .env(NOFILE_ENV, fx.root_path());
    // SAFETY: setrlimit is async-signal-safe and touches nothing shared.
    unsafe {
        cmd.pre_exec(|| {
            let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
            let limit = rustix::process::Rlimit {
                current: Some(CHILD_NOFILE),
                maximum: hard,
            };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
                .map_err(std::io::Error::from)
        });
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
