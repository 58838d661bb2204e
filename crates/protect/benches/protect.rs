//! The cost the shell pays per command for protected paths: `begin` (the
//! record brought up to date) plus `settle` (the check after the command,
//! with one protected file changed and restored), on a write root of
//! 100,000 files in 10,000 directories with `*.lock`, `.github/**` and
//! restricted mode's `.git` protected. The reference, interleaved in the
//! same window, is one `lstat` of every directory: the floor under any
//! check that looks for moved ctimes without help from the kernel.
//!
//! Two rows: the root watched by inotify (the default), and a second,
//! identical tree whose protection is forced onto the ctime walk (the
//! fallback, and what every root did before inotify).
//!
//! Also printed: the first, full walk of each tree.

use std::fs;
use std::hint::black_box;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use sandgate_fileguard::GuardBuilder;
use sandgate_protect::{Detection, Protector, DETECTION_ENV};

#[path = "../../../benches/interleave.rs"]
mod interleave;
use interleave::{paired_self_timed, report};

/// 100 top directories of 100 leaves each, 10 files per leaf.
const TOP: usize = 100;
const LEAVES: usize = 100;
const FILES: usize = 10;

struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dirs: Vec<PathBuf>,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("work");
    let mut dirs = vec![root.clone()];
    for t in 0..TOP {
        let top = root.join(format!("d{t:03}"));
        dirs.push(top.clone());
        for l in 0..LEAVES {
            let leaf = top.join(format!("e{l:03}"));
            fs::create_dir_all(&leaf).expect("mkdir");
            dirs.push(leaf.clone());
            for f in 0..FILES {
                // One leaf in a hundred holds a lock file.
                let name = if f == 0 && l % 100 == 7 {
                    "Cargo.lock".to_owned()
                } else {
                    format!("f{f}.rs")
                };
                fs::write(leaf.join(name), b"fn f() {}\n").expect("write");
            }
        }
    }
    let wf = root.join(".github/workflows");
    fs::create_dir_all(&wf).expect("mkdir");
    for i in 0..5 {
        fs::write(wf.join(format!("ci{i}.yml")), b"on: push\n").expect("write");
    }
    dirs.push(root.join(".github"));
    dirs.push(wf);
    // A small repository: 20 object directories of 50 objects.
    let git = root.join(".git");
    for o in 0..20 {
        let d = git.join(format!("objects/{o:02x}"));
        fs::create_dir_all(&d).expect("mkdir");
        dirs.push(d.clone());
        for i in 0..50 {
            fs::write(d.join(format!("{i:038x}")), [o as u8; 200]).expect("write");
        }
    }
    fs::create_dir_all(git.join("hooks")).expect("mkdir");
    fs::write(git.join("config"), b"[core]\n").expect("write");
    fs::write(git.join("HEAD"), b"ref: refs/heads/main\n").expect("write");
    dirs.extend([git.clone(), git.join("objects"), git.join("hooks")]);
    Tree {
        _tmp: tmp,
        root,
        dirs,
    }
}

/// A protector of `t`, its first record taken (and timed).
fn protector(t: &Tree, what: &str) -> Arc<Protector> {
    let guard = GuardBuilder::new()
        .patterns(["*.lock", ".github/**"])
        .restricted(true)
        .build()
        .expect("guard");
    let p = Arc::new(Protector::new(&t.root, guard).expect("protector"));
    let first = Instant::now();
    p.begin().expect("begin").settle();
    println!(
        "protect: first record of {} dirs and {} files ({what}, {}): {:.1} ms",
        t.dirs.len(),
        TOP * LEAVES * FILES,
        p.detection(),
        first.elapsed().as_secs_f64() * 1e3
    );
    p
}

/// One command's cost on `p`: begin, change `victim`, settle.
fn one_command(p: &Arc<Protector>, victim: &Path, n: &mut u64) -> Duration {
    *n += 1;
    let t0 = Instant::now();
    let cp = p.begin().expect("begin");
    let begun = t0.elapsed();
    // The command: one protected file changed.
    fs::write(victim, format!("changed {n}\n")).expect("write");
    let t1 = Instant::now();
    let changes = cp.settle();
    let settled = t1.elapsed();
    assert_eq!(changes.len(), 1, "{changes:?}");
    black_box(changes);
    begun + settled
}

fn lstat_all(dirs: &[PathBuf]) -> Duration {
    let t0 = Instant::now();
    for d in dirs {
        black_box(fs::symlink_metadata(d).map(|m| m.ctime()).ok());
    }
    t0.elapsed()
}

fn protect(c: &mut Criterion) {
    let t = tree();
    let p = protector(&t, "default");
    assert_eq!(p.detection(), Detection::Inotify, "inotify unavailable");
    // The second tree's protection starts with the ctime walk forced (the
    // variable is read when a root's protection starts).
    let t2 = tree();
    std::env::set_var(DETECTION_ENV, "ctime");
    let p2 = protector(&t2, "forced");
    std::env::remove_var(DETECTION_ENV);
    assert!(matches!(p2.detection(), Detection::CtimeWalk(_)));

    let mut g = c.benchmark_group("protect_100k");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(10));
    let victim = t.root.join("d042/e007/Cargo.lock");
    let mut n = 0u64;
    paired_self_timed(
        &mut g,
        "protect_100k",
        "begin_settle_one_changed",
        "lstat_every_dir",
        &mut || one_command(&p, &victim, &mut n),
        &mut || lstat_all(&t.dirs),
    );
    let victim2 = t2.root.join("d042/e007/Cargo.lock");
    let mut n2 = 0u64;
    paired_self_timed(
        &mut g,
        "protect_100k",
        "begin_settle_one_changed_ctime_walk",
        "lstat_every_dir",
        &mut || one_command(&p2, &victim2, &mut n2),
        &mut || lstat_all(&t2.dirs),
    );
    g.finish();
    // Inotify must still be in use: nothing here may have made it fall back.
    assert_eq!(p.detection(), Detection::Inotify);
}

fn summary(_: &mut Criterion) {
    report();
}

criterion_group!(benches, protect, summary);
criterion_main!(benches);
