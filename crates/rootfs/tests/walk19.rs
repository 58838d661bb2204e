//! The descriptor walk held to `openat2`'s answers where the kernel's own
//! lookup rules (search permission) or concurrent renames decide them.
//!
//! Every case is run through `Resolver::Openat2` (one kernel call, the
//! reference) and `Resolver::Walk`, and the two must answer alike: the same
//! success, or the same error kind and errno. Run as root (which searches
//! every directory) and as an unprivileged user (which cannot search a
//! directory without its `x` bit).

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::PathBuf;

use sandgate_rootfs::{openat2_supported, Error, Resolver, Root};

/// What an operation answered, comparable across resolvers.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Ok(String),
    Err(sandgate_rootfs::ErrorKind, Option<i32>),
}

fn answer<T>(r: Result<T, Error>, show: impl Fn(T) -> String) -> Answer {
    match r {
        Ok(v) => Answer::Ok(show(v)),
        Err(e) => Answer::Err(e.kind(), e.errno()),
    }
}

/// Puts the modes back so that the temporary tree can be removed.
struct Modes(Vec<PathBuf>);

impl Drop for Modes {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o755));
        }
    }
}

fn privileged() -> bool {
    rustix::process::geteuid().is_root()
}

/// One operation under test, by name.
fn run(root: &Root, op: &str, p: &str) -> Answer {
    match op {
        "stat" => answer(root.stat(p), |m| format!("ino {}", m.ino())),
        "lstat" => answer(root.lstat(p), |m| format!("ino {}", m.ino())),
        "read_dir" => answer(root.read_dir(p), |mut v| {
            v.sort_by(|a, b| a.name().cmp(b.name()));
            format!("{:?}", v.iter().map(|e| e.name()).collect::<Vec<_>>())
        }),
        "open_dir" => answer(root.open_dir(p), |_| "dir".into()),
        "read" => answer(root.read(p), |b| String::from_utf8_lossy(&b).into()),
        "resolve_path" => answer(root.resolve_path(p), |_| "fd".into()),
        _ => unreachable!(),
    }
}

/// A directory that may be read but not searched (`r--`), one that may be
/// neither (`---`), and one that may only be searched (`--x`): the kernel
/// checks search permission on every directory a lookup takes a name in,
/// `..` and `.` included, and on no other.
#[test]
fn walk19_search_permission_is_checked_where_openat2_checks_it() {
    if !openat2_supported() {
        eprintln!("openat2 unavailable: nothing to compare the walk with");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("root");
    fs::create_dir(&base).unwrap();
    fs::write(base.join("top"), b"TOP").unwrap();
    for d in ["r", "none", "x"] {
        fs::create_dir_all(base.join(d).join("sub")).unwrap();
        fs::write(base.join(d).join("f"), b"F").unwrap();
        symlink("..", base.join(d).join("up")).unwrap();
    }
    symlink("r", base.join("lr")).unwrap();
    symlink("none/..", base.join("lnone")).unwrap();
    let modes = Modes(vec![base.join("r"), base.join("none"), base.join("x")]);
    fs::set_permissions(base.join("r"), fs::Permissions::from_mode(0o444)).unwrap();
    fs::set_permissions(base.join("none"), fs::Permissions::from_mode(0o000)).unwrap();
    fs::set_permissions(base.join("x"), fs::Permissions::from_mode(0o111)).unwrap();

    let kernel = Root::open_with_resolver(&base, Resolver::Openat2).unwrap();
    let walk = Root::open_with_resolver(&base, Resolver::Walk).unwrap();
    let ops = [
        "stat",
        "lstat",
        "read_dir",
        "open_dir",
        "read",
        "resolve_path",
    ];
    let mut paths = Vec::new();
    for d in ["r", "none", "x", "lr"] {
        for tail in [
            "",
            "/",
            "/.",
            "/./",
            "/..",
            "/../",
            "/../top",
            "/f",
            "/sub",
            "/sub/..",
            "/up",
            "/up/top",
            "//",
            "/sub/../..",
        ] {
            paths.push(format!("{d}{tail}"));
        }
    }
    paths.push("lnone".into());
    paths.push("lnone/top".into());
    paths.push("x/sub/../../top".into());

    let mut mismatches = Vec::new();
    let mut denied = 0;
    for p in &paths {
        for op in ops {
            let want = run(&kernel, op, p);
            let got = run(&walk, op, p);
            if matches!(want, Answer::Err(_, Some(13))) {
                denied += 1;
            }
            if want != got {
                mismatches.push(format!("{op}({p:?}): openat2 {want:?}, walk {got:?}"));
            }
        }
    }
    drop(modes);
    assert!(
        mismatches.is_empty(),
        "the walk answers otherwise than openat2:\n{}",
        mismatches.join("\n")
    );
    // Unprivileged, the kernel refuses some of these: the comparison did
    // cover refusals, not only successes.
    if !privileged() {
        assert!(
            denied > 20,
            "only {denied} refusals: the tree lost its modes"
        );
    }
}
