//! The rename race: one thread swaps (`RENAME_EXCHANGE`) a directory inside
//! the root with a symlink to a directory outside, over and over, while
//! worker threads read and write through that name. Whatever the
//! interleaving, the outside directory stays byte-for-byte untouched and no
//! outside content is ever returned, for both resolvers.
//!
//! Layout, in a fresh temporary directory:
//!
//! ```text
//! root/d/f        "INSIDE"                 (the directory under attack)
//! root/l       -> <tmp>/outside or ../outside
//! outside/f       "OUTSIDE" (and g<w>, w<w>: names the workers write; sub/f)
//! ```
//!
//! Every operation either succeeds on the inside directory or fails with an
//! error kind that one of the two states of the tree explains. The test
//! counts both and requires both, so it cannot pass without a race.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::fs::{renameat_with, RenameFlags};
use sandgate_rootfs::{openat2_supported, Error, ErrorKind, OpenOptions, Resolver, Root};

/// Operations per resolver and link variant, over all workers.
const OPS: usize = 12_000;
const WORKERS: usize = 3;
/// The content of every file inside; outside files all start with OUTSIDE.
const INSIDE: &[u8] = b"INSIDE";
const OUTSIDE: &[u8] = b"OUTSIDE";

/// One entry of the outside tree: everything but the access time.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    kind: &'static str,
    mode: u32,
    ino: u64,
    nlink: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// File bytes, link target, or the sorted names of a directory.
    content: Vec<u8>,
}

/// Every entry beneath `dir` (itself included, as ""), recursively, without
/// following symlinks.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Entry> {
    fn walk(base: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
        let path = base.join(rel);
        let md = fs::symlink_metadata(&path).unwrap();
        let ft = md.file_type();
        let (kind, content) = if ft.is_symlink() {
            let t = fs::read_link(&path).unwrap();
            ("symlink", t.into_os_string().into_encoded_bytes())
        } else if ft.is_dir() {
            let mut names: Vec<_> = fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            names.sort();
            let mut listing = Vec::new();
            for n in &names {
                listing.extend_from_slice(n.as_encoded_bytes());
                listing.push(b'\n');
                walk(base, &rel.join(n), out);
            }
            ("dir", listing)
        } else {
            ("file", fs::read(&path).unwrap())
        };
        out.insert(
            rel.to_path_buf(),
            Entry {
                kind,
                mode: md.mode(),
                ino: md.ino(),
                nlink: md.nlink(),
                size: md.size(),
                mtime: (md.mtime(), md.mtime_nsec()),
                ctime: (md.ctime(), md.ctime_nsec()),
                content,
            },
        );
    }
    let mut out = BTreeMap::new();
    walk(dir, Path::new(""), &mut out);
    out
}

/// How the operations ended, per operation and outcome.
#[derive(Default)]
struct Tally {
    ok: u64,
    escape: u64,
    by_outcome: BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, op: &str, r: &Result<(), Error>) {
        let outcome = match r {
            Ok(()) => {
                self.ok += 1;
                "ok".to_string()
            }
            Err(e) => {
                if e.kind() == ErrorKind::Escape {
                    self.escape += 1;
                }
                format!("{:?}", e.kind())
            }
        };
        *self
            .by_outcome
            .entry(format!("{op}: {outcome}"))
            .or_default() += 1;
    }
}

struct Inside {
    dev: u64,
    dir_ino: u64,
    f_ino: u64,
}

/// Checks content read through the swapped name: it is inside content.
fn inside_bytes(op: &str, bytes: &[u8]) -> Result<(), Error> {
    assert!(
        !bytes.starts_with(OUTSIDE),
        "{op} returned outside content {:?}",
        String::from_utf8_lossy(bytes)
    );
    assert!(
        bytes.starts_with(INSIDE),
        "{op} returned unexpected content {:?}",
        String::from_utf8_lossy(bytes)
    );
    Ok(())
}

/// The error kinds allowed for an operation through the swapped name:
/// Escape (the name was the symlink when resolution met it) and NotDir, a
/// walk artifact: `d` was the symlink when `openat(O_NOFOLLOW|O_DIRECTORY)`
/// met it and the directory again when `readlinkat` asked for its target
/// (EINVAL). No single state of the tree gives NotDir, but it reaches
/// nothing, so it is tolerated and counted; the summary shows it (the
/// `Openat2` resolver can meet it only through its walk fallback after
/// repeated EAGAIN). So is `Io` with EAGAIN: the walk found `d` swapped
/// between the link and the directory at each of its tries, and gave up
/// without entering either (seen once in a CI run as uid 65534).
fn expected(op: &str, r: Result<(), Error>, extra: &[ErrorKind]) -> Result<(), Error> {
    if let Err(e) = &r {
        let k = e.kind();
        let gave_up = k == ErrorKind::Io && e.errno() == Some(libc::EAGAIN);
        assert!(
            k == ErrorKind::Escape || k == ErrorKind::NotDir || gave_up || extra.contains(&k),
            "{op}: unexpected error {e:?} ({e})"
        );
    }
    r
}

/// One operation through the name under attack. `name` is `d` or `l` (the
/// two names swap roles), `i` makes created names unique, and each worker
/// `w` writes files of its own (`g<w>`, `w<w>`): concurrent replaces of one
/// target are a different matter, not this test's.
fn one_op(root: &Root, inside: &Inside, name: &str, w: usize, i: usize, tally: &mut Tally) {
    let op = i % 9;
    let (label, r): (&str, Result<(), Error>) = match op {
        0 => ("read f", {
            let r = root.read(format!("{name}/f"));
            expected("read", r.and_then(|b| inside_bytes("read", &b)), &[])
        }),
        1 => ("open_file f", {
            let r = root.open_file(format!("{name}/f")).map(|mut f| {
                let md = f.metadata().unwrap();
                assert_eq!((md.dev(), md.ino()), (inside.dev, inside.f_ino));
                let mut b = Vec::new();
                f.read_to_end(&mut b).unwrap();
                b
            });
            expected(
                "open_file",
                r.and_then(|b| inside_bytes("open_file", &b)),
                &[],
            )
        }),
        2 => ("open_with w", {
            let mut o = OpenOptions::new();
            o.write(true).create(true).truncate(true);
            let r = root.open_with(format!("{name}/w{w}"), &o).map(|mut f| {
                f.write_all(b"INSIDE-w").unwrap();
            });
            expected("open_with", r, &[])
        }),
        3 => ("replace g", {
            let r = root.replace(format!("{name}/g{w}"), b"INSIDE-g");
            expected("replace", r, &[])
        }),
        4 => ("create_new n", {
            let r = root
                .create_new(format!("{name}/n{i}"))
                .map(|mut f| f.write_all(INSIDE).unwrap());
            expected("create_new", r, &[])
        }),
        5 => ("stat f", {
            let r = root.stat(format!("{name}/f")).map(|m| {
                assert_eq!((m.dev(), m.ino()), (inside.dev, inside.f_ino));
                assert_eq!(m.len(), INSIDE.len() as u64);
            });
            expected("stat", r, &[])
        }),
        6 => ("mkdir m", {
            let r = root.mkdir(format!("{name}/m{i}"), 0o755);
            expected("mkdir", r, &[])
        }),
        7 => ("read g", {
            // g<w> may not exist yet.
            let r = root.read(format!("{name}/g{w}"));
            expected(
                "read g",
                r.and_then(|b| inside_bytes("read g", &b)),
                &[ErrorKind::NotFound],
            )
        }),
        _ => ("read_dir", {
            // The name itself: a directory (inside) or the symlink, followed.
            let r = root.read_dir(name).map(|entries| {
                assert!(entries.iter().any(|e| e.name() == "f"));
                assert!(
                    !entries.iter().any(|e| e.name() == "sub"),
                    "read_dir listed the outside directory"
                );
            });
            let r = r.and_then(|()| {
                let m = root.stat(format!("{name}/")).map_err(|e| {
                    // Swapped between the two calls: same rules apply.
                    assert!(
                        matches!(e.kind(), ErrorKind::Escape | ErrorKind::NotDir),
                        "stat {name}/: {e:?}"
                    );
                    e
                })?;
                assert_eq!((m.dev(), m.ino()), (inside.dev, inside.dir_ino));
                Ok(())
            });
            expected("read_dir", r, &[])
        }),
    };
    tally.add(label, &r);
}

fn race(resolver: Resolver, absolute_link: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let root_path = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(root_path.join("d")).unwrap();
    fs::write(root_path.join("d/f"), INSIDE).unwrap();
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("f"), OUTSIDE).unwrap();
    for w in 0..WORKERS {
        fs::write(outside.join(format!("g{w}")), b"OUTSIDE-g").unwrap();
        fs::write(outside.join(format!("w{w}")), b"OUTSIDE-w").unwrap();
    }
    fs::write(outside.join("sub/f"), b"OUTSIDE-sub").unwrap();
    let target = if absolute_link {
        outside.clone()
    } else {
        PathBuf::from("../outside")
    };
    symlink(&target, root_path.join("l")).unwrap();
    // The link really reaches outside, so that following it would show.
    assert_eq!(fs::read(root_path.join("l/f")).unwrap(), OUTSIDE);

    let before = snapshot(&outside);
    let md_d = fs::metadata(root_path.join("d")).unwrap();
    let inside = Inside {
        dev: md_d.dev(),
        dir_ino: md_d.ino(),
        f_ino: fs::metadata(root_path.join("d/f")).unwrap().ino(),
    };
    let root = Root::open_with_resolver(&root_path, resolver).unwrap();
    let dirfd = fs::File::open(&root_path).unwrap();

    let stop = AtomicBool::new(false);
    let swaps = AtomicU64::new(0);
    let next = AtomicU64::new(0);
    let total = Mutex::new(Tally::default());
    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                renameat_with(&dirfd, "d", &dirfd, "l", RenameFlags::EXCHANGE)
                    .expect("renameat2(RENAME_EXCHANGE)");
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        });
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (root, inside, next, total) = (&root, &inside, &next, &total);
                s.spawn(move || {
                    let mut tally = Tally::default();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                        if i >= OPS {
                            break;
                        }
                        let name = if (i / 9) % 2 == 0 { "d" } else { "l" };
                        one_op(root, inside, name, w, i, &mut tally);
                    }
                    let mut t = total.lock().unwrap();
                    t.ok += tally.ok;
                    t.escape += tally.escape;
                    for (k, v) in tally.by_outcome {
                        *t.by_outcome.entry(k).or_default() += v;
                    }
                })
            })
            .collect();
        for w in workers {
            if let Err(p) = w.join() {
                stop.store(true, Ordering::Relaxed);
                std::panic::resume_unwind(p);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = started.elapsed();
    let tally = total.into_inner().unwrap();

    let after = snapshot(&outside);
    assert!(
        before == after,
        "the outside directory changed:\nbefore {before:#?}\nafter {after:#?}"
    );
    // Nothing inside reads as outside content either.
    let dir = if fs::symlink_metadata(root_path.join("d")).unwrap().is_dir() {
        root_path.join("d")
    } else {
        root_path.join("l")
    };
    let (mut files_n, mut dirs_m) = (0u64, 0u64);
    for e in fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if e.file_type().unwrap().is_file() {
            let b = fs::read(e.path()).unwrap();
            assert!(b.is_empty() || b.starts_with(INSIDE), "{name}");
            files_n += u64::from(name.starts_with('n'));
        } else {
            assert!(name.starts_with('m'), "{name}");
            dirs_m += 1;
        }
    }
    // Every successful creation landed in the inside directory.
    let ok = |label: &str| tally.by_outcome.get(label).copied().unwrap_or(0);
    assert_eq!(files_n, ok("create_new n: ok"));
    assert_eq!(dirs_m, ok("mkdir m: ok"));

    eprintln!(
        "{resolver:?}, {} link: {OPS} ops in {elapsed:?}, {} swaps, {} ok, {} escapes",
        if absolute_link {
            "absolute"
        } else {
            "relative"
        },
        swaps.load(Ordering::Relaxed),
        tally.ok,
        tally.escape
    );
    for (k, v) in &tally.by_outcome {
        eprintln!("    {k}: {v}");
    }
    let counted: u64 = tally.by_outcome.values().sum();
    assert_eq!(counted, OPS as u64);
    assert!(tally.ok > 0, "no operation succeeded: no race was tested");
    assert!(
        tally.escape > 0,
        "no operation met the link: no race was tested"
    );
    assert!(
        elapsed < Duration::from_secs(120),
        "the race took {elapsed:?}"
    );
}

fn openat2_or_note() -> bool {
    if openat2_supported() {
        true
    } else {
        eprintln!("note: this kernel has no openat2; the Openat2 race is skipped");
        false
    }
}

#[test]
fn exchange_race_openat2_absolute_link() {
    if openat2_or_note() {
        race(Resolver::Openat2, true);
    }
}

#[test]
fn exchange_race_openat2_relative_link() {
    if openat2_or_note() {
        race(Resolver::Openat2, false);
    }
}

#[test]
fn exchange_race_walk_absolute_link() {
    race(Resolver::Walk, true);
}

#[test]
fn exchange_race_walk_relative_link() {
    race(Resolver::Walk, false);
}

/// A chain of 30 symbolic links resolves while mounts change elsewhere on
/// the host. The kernel's lookup starts in RCU mode and, when a mount or
/// unmount anywhere changed the count it checks, starts again keeping the
/// links the first pass counted, so a bare `openat2` of a path of 21 to
/// 40 links sometimes answers ELOOP although it resolves (seen in CI,
/// while other suites made mount namespaces). `Root` must still answer.
/// The mounts come from `unshare -rm` in a loop; the test runs until the
/// bare `openat2` has said ELOOP at least 3 times (or 20 s, then it says it
/// could not show the quirk here) and asserts `Root` never did.
#[test]
fn a_long_link_chain_resolves_while_the_hosts_mounts_change() {
    if !openat2_or_note() {
        return;
    }
    let probe = std::process::Command::new("unshare")
        .args(["-rm", "true"])
        .stderr(std::process::Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("note: no mount namespace here: the mount churn cannot be made");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f"), b"end").unwrap();
    const LINKS: usize = 30;
    for i in 0..LINKS {
        let target = if i + 1 == LINKS {
            "f".to_owned()
        } else {
            format!("c{}", i + 1)
        };
        symlink(target, dir.path().join(format!("c{i}"))).unwrap();
    }
    let root = Root::open(dir.path())
        .unwrap()
        .with_resolver(Resolver::Openat2);
    let churn = std::process::Command::new("sh")
        .args([
            "-c",
            "while :; do unshare -rm sh -c 'mount -t tmpfs none /mnt'; done",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _churn = Kill(churn);
    let dirfd = fs::File::open(dir.path()).unwrap();
    let (mut bare_loops, mut calls) = (0u32, 0u64);
    let started = Instant::now();
    while bare_loops < 3 && started.elapsed() < Duration::from_secs(20) {
        calls += 1;
        let bare = rustix::fs::openat2(
            &dirfd,
            "c0",
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
            rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_MAGICLINKS,
        );
        match bare {
            Ok(_) => {}
            Err(rustix::io::Errno::LOOP) => bare_loops += 1,
            Err(e) => panic!("bare openat2: {e}"),
        }
        let md = root
            .stat("c0")
            .unwrap_or_else(|e| panic!("call {calls}: {e} (bare ELOOP {bare_loops} times)"));
        assert_eq!(md.len(), 3);
    }
    eprintln!(
        "{calls} resolutions of {LINKS} links; the bare openat2 said ELOOP {bare_loops} times"
    );
    if bare_loops == 0 {
        eprintln!("note: the kernel's ELOOP after a restarted lookup was not seen here in 20 s");
    }
}

/// Levels a `mkdir_all` of the swap test makes.
const MKDIR23_DEPTH: usize = 10;

/// The directory `levels` levels below `top`, reached through directories
/// only (`O_NOFOLLOW` at each step); `None` where a level is missing or a
/// link.
fn real_dir(top: &Path, levels: usize) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{open, openat, Mode, OFlags};
    let step = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = open(top, step, Mode::empty()).ok()?;
    for k in 1..=levels {
        fd = openat(&fd, format!("d{k}").as_str(), step, Mode::empty()).ok()?;
    }
    Some(fd)
}

/// `mkdir_all` of a 10-level path, 300 times over, while another thread
/// attacks each level as it appears: it exchanges the level (`RENAME_EXCHANGE`)
/// for a symbolic link out of the root, absolute or climbing with `..` just
/// past the root, or plants such a link at a level's name before it is
/// made. Whatever the interleaving, nothing is created or changed outside,
/// and each call either succeeds or is refused as a name swapped for a link
/// would be (Escape, NotDir, or the walk's EAGAIN). The test requires
/// refusals, so that it cannot pass without a race.
fn mkdir23_swap_race(resolver: Resolver) {
    const CALLS: usize = 300;
    let tmp = tempfile::tempdir().unwrap();
    let root_path = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(&root_path).unwrap();
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("f"), OUTSIDE).unwrap();
    let before = snapshot(&outside);
    let root = Root::open_with_resolver(&root_path, resolver).unwrap();
    // The call under way: its number, CALLS when done.
    let current = AtomicU64::new(u64::MAX);
    let done = AtomicBool::new(false);
    let swaps = AtomicU64::new(0);
    let level = |i: u64, j: usize| -> PathBuf {
        let mut p = root_path.join(format!("t{i}"));
        for k in 1..=j {
            p.push(format!("d{k}"));
        }
        p
    };
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0u64;
            while !done.load(Ordering::Relaxed) {
                let i = current.load(Ordering::Relaxed);
                if i == u64::MAX {
                    std::hint::spin_loop();
                    continue;
                }
                n += 1;
                let j = (n as usize % MKDIR23_DEPTH) + 1;
                // The link lives where level j is: j + 1 steps up from
                // there is the temporary directory, beside the root.
                let target = match n % 3 {
                    0 => outside.clone(),
                    _ => PathBuf::from(format!("{}outside", "../".repeat(j + 1))),
                };
                // The attacker never follows a link itself: it reaches
                // level j's parent through real directories only.
                let Some(parent) = real_dir(&level(i, 0), j - 1) else {
                    continue;
                };
                let name = format!("d{j}");
                if n % 2 == 0 {
                    // Plant a link where the level is about to be made.
                    if rustix::fs::symlinkat(&target, &parent, name.as_str()).is_ok() {
                        swaps.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    let spare = format!("l{n}");
                    if rustix::fs::symlinkat(&target, &parent, spare.as_str()).is_err() {
                        continue;
                    }
                    let exchanged = renameat_with(
                        &parent,
                        name.as_str(),
                        &parent,
                        spare.as_str(),
                        RenameFlags::EXCHANGE,
                    );
                    if exchanged.is_ok() {
                        swaps.fetch_add(1, Ordering::Relaxed);
                    } else {
                        let _ = rustix::fs::unlinkat(
                            &parent,
                            spare.as_str(),
                            rustix::fs::AtFlags::empty(),
                        );
                    }
                }
            }
        });
        for i in 0..CALLS as u64 {
            fs::create_dir(root_path.join(format!("t{i}"))).unwrap();
            let path = format!(
                "t{i}/{}",
                (1..=MKDIR23_DEPTH)
                    .map(|k| format!("d{k}"))
                    .collect::<Vec<_>>()
                    .join("/")
            );
            current.store(i, Ordering::Relaxed);
            let r = root.mkdir_all(&path, 0o755);
            current.store(u64::MAX, Ordering::Relaxed);
            let outcome = match &r {
                Ok(()) => "ok".to_owned(),
                Err(e) => {
                    let gave_up = e.kind() == ErrorKind::Io && e.errno() == Some(libc::EAGAIN);
                    assert!(
                        matches!(e.kind(), ErrorKind::Escape | ErrorKind::NotDir) || gave_up,
                        "{resolver:?} mkdir_all {path}: unexpected error {e:?} ({e})"
                    );
                    format!("{:?}", e.kind())
                }
            };
            *outcomes.entry(outcome).or_default() += 1;
        }
        done.store(true, Ordering::Relaxed);
    });
    let after = snapshot(&outside);
    assert!(
        before == after,
        "{resolver:?}: mkdir_all changed the outside directory:\nbefore {before:#?}\nafter {after:#?}"
    );
    eprintln!(
        "{resolver:?}: {CALLS} calls, {} swaps or plants: {outcomes:?}",
        swaps.load(Ordering::Relaxed)
    );
    let refused: u64 = outcomes
        .iter()
        .filter(|(k, _)| k.as_str() != "ok")
        .map(|(_, v)| v)
        .sum();
    assert!(refused > 0, "no call met a link: no race was tested");
}

#[test]
fn mkdir23_a_level_swapped_for_a_link_out_is_never_followed_openat2() {
    if openat2_or_note() {
        mkdir23_swap_race(Resolver::Openat2);
    }
}

#[test]
fn mkdir23_a_level_swapped_for_a_link_out_is_never_followed_walk() {
    mkdir23_swap_race(Resolver::Walk);
}
