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

// -------------------------------------------------------------------
// Races: the tree changes under the walk, thousands of times.
// -------------------------------------------------------------------

use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sandgate_rootfs::ErrorKind;

const INSIDE: &[u8] = b"INSIDE";
const OUTSIDE: &[u8] = b"OUTSIDE";
const WORKERS: usize = 3;

/// The names and contents beneath `dir` (recursively, links not followed).
fn listing(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let ft = e.file_type().unwrap();
            let content = if ft.is_symlink() {
                fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if ft.is_dir() {
                todo.push(p.clone());
                b"<dir>".to_vec()
            } else {
                fs::read(&p).unwrap()
            };
            out.push((p.strip_prefix(dir).unwrap().to_path_buf(), content));
        }
    }
    out.sort();
    out
}

/// A directory of the path is moved out of the root and back, over and
/// over, while paths that enter it and climb out again with `..` are
/// resolved: the `..` must land in the root (the walk pops its stack),
/// never in the directory the moved one now sits in, which holds a file of
/// the same name. Paths deeper than the walk's descriptor window (64) make
/// it reopen the chain from the root by name while the chain moves.
#[test]
fn walk19_dotdot_out_of_a_directory_moved_out_of_the_root_stays_in() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("root");
    let out = tmp.path().join("outside");
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("f"), OUTSIDE).unwrap();
    fs::write(out.join("OUT-MARK"), OUTSIDE).unwrap();
    let mut deep = base.join("a/d/e");
    for _ in 0..70 {
        deep.push("x");
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(base.join("a/f"), INSIDE).unwrap();
    let inside_ino = fs::metadata(base.join("a/f")).unwrap().ino();
    let root = Root::open_with_resolver(&base, Resolver::Walk).unwrap();

    let shallow = "a/d/e/../../f".to_string();
    let deep_path = format!("a/d/e/{}{}f", "x/".repeat(70), "../".repeat(72));
    let up = "a/d/e/../..".to_string();

    let stop = AtomicBool::new(false);
    let (from, to) = (base.join("a/d"), out.join("d"));
    let (mut oks, mut gone) = (0usize, 0usize);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                fs::rename(&from, &to).unwrap();
                std::hint::spin_loop();
                fs::rename(&to, &from).unwrap();
                n += 1;
                std::thread::sleep(Duration::from_micros(30));
            }
            assert!(n > 100, "the mover ran {n} times only");
        });
        // Stops the mover however the workers end, a failed assertion
        // included (the scope would wait for it forever).
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (root, shallow, deep_path, up, base) =
                    (&root, &shallow, &deep_path, &up, &base);
                s.spawn(move || {
                    let (mut oks, mut gone) = (0usize, 0usize);
                    let deadline = Instant::now() + Duration::from_secs(4);
                    let mut i = 0usize;
                    while i < 3000 || (Instant::now() < deadline && (oks == 0 || gone == 0)) {
                        let p = if i % 5 == 4 { deep_path } else { shallow };
                        let r: Result<(), Error> = match i % 4 {
                            0 => root.read(p).map(|b| assert_eq!(b, INSIDE, "read {p}")),
                            1 => root
                                .stat(p)
                                .map(|m| assert_eq!(m.ino(), inside_ino, "stat {p}")),
                            2 => root.read_dir(up).map(|v| {
                                assert!(v.iter().any(|e| e.name() == "f"));
                                assert!(
                                    !v.iter().any(|e| e.name() == "OUT-MARK"),
                                    "listed the outside directory"
                                );
                            }),
                            _ => {
                                let name = format!("{up}/n{w}-{i}");
                                root.create_new(&name).map(drop).and_then(|()| {
                                    assert!(base.join(format!("a/n{w}-{i}")).exists());
                                    root.remove_file(&name)
                                })
                            }
                        };
                        match r {
                            Ok(()) => oks += 1,
                            Err(e) if e.kind() == ErrorKind::NotFound => gone += 1,
                            Err(e) => panic!("op {} on {p}: {e:?}", i % 4),
                        }
                        i += 1;
                    }
                    (oks, gone)
                })
            })
            .collect();
        for h in handles {
            let (o, g) = h.join().unwrap();
            oks += o;
            gone += g;
        }
    });
    eprintln!("moved-out race: {oks} answered inside, {gone} found the directory gone");
    assert!(oks > 0 && gone > 0, "no race: {oks} ok, {gone} gone");
    assert_eq!(
        listing(&out),
        vec![
            (PathBuf::from("OUT-MARK"), OUTSIDE.to_vec()),
            (PathBuf::from("f"), OUTSIDE.to_vec())
        ],
        "the outside directory changed"
    );
}

/// A middle component, `a/mid`, is swapped (`RENAME_EXCHANGE`) in turn with
/// a link out of the root (relative, climbing past it), a link with an
/// absolute target, and a link to another directory inside (link ↔ link
/// once `mid` is a link), while workers remove, rename (both ends through
/// `mid`), readlink, lstat, open as a root and locate entries through it.
/// The outside directory, which holds every name the workers use, must
/// stay exactly as it was, and every answer must be an inside one.
#[test]
fn walk19_a_middle_component_swapped_with_links_out_for_every_op() {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("root");
    let out = tmp.path().join("outside");
    for d in [base.join("a/mid"), base.join("real"), out.clone()] {
        fs::create_dir_all(&d).unwrap();
        let bytes = if d == out { OUTSIDE } else { INSIDE };
        fs::write(d.join("f"), bytes).unwrap();
        symlink(std::str::from_utf8(bytes).unwrap(), d.join("lnk")).unwrap();
        for w in 0..WORKERS {
            fs::write(d.join(format!("r{w}")), bytes).unwrap();
            fs::write(d.join(format!("v{w}")), bytes).unwrap();
        }
    }
    symlink("../../outside", base.join("a/s_rel")).unwrap();
    symlink(&out, base.join("a/s_abs")).unwrap();
    symlink("../real", base.join("a/s_in")).unwrap();
    let before = listing(&out);
    let root = Root::open_with_resolver(&base, Resolver::Walk).unwrap();

    let stop = AtomicBool::new(false);
    let (mut oks, mut refused) = (0usize, 0usize);
    std::thread::scope(|s| {
        let base_ref = &base;
        let stop_ref = &stop;
        s.spawn(move || {
            let (base, stop) = (base_ref, stop_ref);
            let mid = base.join("a/mid");
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let other = base.join(["a/s_rel", "a/s_abs", "a/s_in"][i % 3]);
                renameat_with(CWD, &mid, CWD, &other, RenameFlags::EXCHANGE).unwrap();
                i += 1;
            }
        });
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let root = &root;
                s.spawn(move || {
                    let (mut oks, mut refused) = (0usize, 0usize);
                    for i in 0..4000usize {
                        let r: Result<(), Error> = match i % 7 {
                            0 => root.lstat("a/mid/f").map(|m| assert_eq!(m.len(), 6)),
                            1 => root
                                .readlink("a/mid/lnk")
                                .map(|t| assert_eq!(t.as_os_str().as_encoded_bytes(), INSIDE)),
                            2 => root
                                .rename(
                                    format!("a/mid/r{w}"),
                                    format!("a/mid/r{w}x"),
                                    sandgate_rootfs::RenameMode::NoReplace,
                                )
                                .and_then(|()| {
                                    root.rename(
                                        format!("a/mid/r{w}x"),
                                        format!("a/mid/r{w}"),
                                        sandgate_rootfs::RenameMode::NoReplace,
                                    )
                                }),
                            // Removed, then made again through the root,
                            // which must never make it outside either.
                            3 => root
                                .remove(format!("a/mid/v{w}"))
                                .and_then(|()| root.create_new(format!("a/mid/v{w}")).map(drop)),
                            4 => root
                                .open_dir("a/mid")
                                .and_then(|sub| sub.read("f").map(|b| assert_eq!(b, INSIDE))),
                            5 => root.resolved_path("a/mid/f").map(|p| {
                                // Where the inside directory is now.
                                assert!(
                                    p == std::path::Path::new("real/f") || p.starts_with("a/"),
                                    "{p:?}"
                                )
                            }),
                            _ => root.read("a/mid/../mid/f").map(|b| assert_eq!(b, INSIDE)),
                        };
                        match r {
                            Ok(()) => oks += 1,
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    ErrorKind::Escape | ErrorKind::NotFound | ErrorKind::NotDir
                                ) || e.errno() == Some(11)
                                    // The two calls of a rename or of a
                                    // remove-then-create resolved `mid`
                                    // in different states: both inside,
                                    // one holding the name already.
                                    || (matches!(i % 7, 2 | 3) && e.kind() == ErrorKind::Exists) =>
                            {
                                refused += 1
                            }
                            Err(e) => panic!("op {}: {e:?}", i % 7),
                        }
                    }
                    (oks, refused)
                })
            })
            .collect();
        for h in handles {
            let (o, r) = h.join().unwrap();
            oks += o;
            refused += r;
        }
    });
    eprintln!("middle swap race: {oks} inside answers, {refused} refusals");
    assert!(
        oks > 0 && refused > 0,
        "no race: {oks} ok, {refused} refused"
    );
    assert_eq!(listing(&out), before, "the outside directory changed");
}

/// procfs beneath a root (here the host's `/`): its ordinary links (`self`,
/// `thread-self`, `mounts`) are followed and its magic links (`fd/N` of a
/// pipe, a file, a directory; `cwd`, `root`, `exe`, `ns/*`) never are,
/// alike through both resolvers, for every operation that resolves.
#[test]
fn walk19_procfs_links_beneath_a_root_answer_alike() {
    if !openat2_supported() || !std::path::Path::new("/proc/self/fd").exists() {
        eprintln!("needs openat2 and procfs");
        return;
    }
    let kernel = Root::open_with_resolver("/", Resolver::Openat2).unwrap();
    let walk = Root::open_with_resolver("/", Resolver::Walk).unwrap();
    let (rd, _wr) = rustix::pipe::pipe().unwrap();
    let dir = fs::File::open("/").unwrap();
    use std::os::fd::AsRawFd;
    let mut paths: Vec<String> = [
        "proc/self",
        "proc/self/",
        "proc/self/comm",
        "proc/self/status",
        "proc/thread-self/comm",
        "proc/mounts",
        "proc/self/cwd",
        "proc/self/cwd/",
        "proc/self/root",
        "proc/self/root/etc",
        "proc/self/exe",
        "proc/self/ns/net",
        "proc/self/ns/",
        "proc/self/fd",
        "proc/self/fd/",
        "proc/self/../self/comm",
        "proc/self/fd/../comm",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for fd in [rd.as_raw_fd(), dir.as_raw_fd()] {
        paths.push(format!("proc/self/fd/{fd}"));
        paths.push(format!("proc/self/fd/{fd}/"));
        paths.push(format!("proc/self/fd/{fd}/etc"));
    }
    let ops = ["stat", "lstat", "read_dir", "open_dir", "resolve_path"];
    let mut mismatches = Vec::new();
    let mut escapes = 0;
    for p in &paths {
        for op in ops {
            if op == "read_dir" && p.trim_end_matches('/').ends_with("/fd") {
                // Lists the descriptors the resolution itself holds.
                continue;
            }
            let want = run(&kernel, op, p);
            let got = run(&walk, op, p);
            if matches!(want, Answer::Err(sandgate_rootfs::ErrorKind::Escape, _)) {
                escapes += 1;
            }
            if op == "stat" {
                // The `Openat2` resolver asks the walk what an ELOOP was:
                // hold the walk to the bare kernel call as well.
                use rustix::fs::{Mode, OFlags, ResolveFlags};
                let bare = rustix::fs::openat2(
                    &dir,
                    p.as_str(),
                    OFlags::PATH | OFlags::CLOEXEC,
                    Mode::empty(),
                    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
                );
                let ok = match (&bare, &got) {
                    (Ok(_), Answer::Ok(_)) => true,
                    (Err(rustix::io::Errno::LOOP), Answer::Err(k, _)) => {
                        *k == sandgate_rootfs::ErrorKind::Escape
                    }
                    (Err(e), Answer::Err(_, n)) => Some(e.raw_os_error()) == *n,
                    _ => false,
                };
                if !ok {
                    mismatches.push(format!("stat({p:?}): bare openat2 {bare:?}, walk {got:?}"));
                }
            }
            // Answers that name an inode of the procfs of this very thread
            // are equal: both calls are made from it.
            if want != got {
                mismatches.push(format!("{op}({p:?}): openat2 {want:?}, walk {got:?}"));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "the walk answers otherwise than openat2:\n{}",
        mismatches.join("\n")
    );
    assert!(escapes > 10, "only {escapes} magic links refused");
}
