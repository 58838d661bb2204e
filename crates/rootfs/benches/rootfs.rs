//! Benchmarks of confined reads and atomic replaces against their peers.
//!
//! Run with `cargo bench -p sandgate-rootfs --bench rootfs`.
//!
//! Groups:
//!
//! - `read_100B/depth1`, `read_100B/depth8`, `read_1MiB`: one whole-file
//!   read by `std::fs::read` of the absolute path (the reference), by a
//!   [`Root`] with each resolver, by cap-std's `Dir::read`, and by the naive
//!   `canonicalize` + `starts_with` check followed by `std::fs::read`.
//!   Depth counts path components, the file included: depth 1 is a file in
//!   the root, depth 8 is `d1/d2/d3/d4/d5/d6/d7/f.txt`. The 1 MiB file is at
//!   depth 1.
//! - `walk_floor/depth1`, `walk_floor/depth8`: the least a descriptor walk
//!   can do (one `openat(O_PATH|O_DIRECTORY|O_NOFOLLOW)` per directory and
//!   the close of the previous one, then the open and std-like read of the
//!   file) against `Root` with [`Resolver::Walk`].
//! - `replace_4KiB`, `replace_100B`: [`Root::replace`] (atomic and durable)
//!   against two durable baselines, each interleaved with it: the sequence
//!   done by hand (temporary file, write, fsync, rename, fsync of the
//!   directory) and the `atomic-write-file` crate; and, for information
//!   only, against a plain create + write + fsync, which is not durable
//!   across a crash of a rename. All write the same bytes to other names in
//!   the same directory. The same names are overwritten on every iteration,
//!   so that ext4 is not churned by thousands of creates.
//!
//! These machines are noisy, so every variant other than a group's reference
//! is measured *interleaved* with the reference: chunks of the variant (the
//! time criterion sees) alternate with chunks of the reference (timed on the
//! side). After criterion's own report, a table gives for each variant the
//! median over criterion's samples of (variant time / reference time) in
//! the same window: the ratios to compare.

use std::ffi::CString;
use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, Criterion, SamplingMode};
use rustix::fs::{Mode, OFlags};
use sandgate_rootfs::{Resolver, Root};

/// Iterations of one variant timed back to back before switching to the
/// other (reads only; writes alternate every iteration).
const READ_CHUNK: u64 = 32;

#[path = "../../../benches/interleave.rs"]
mod interleave;
use interleave::{paired, report, Group};

/// The tree every read benchmark works in.
struct Tree {
    _tmp: tempfile::TempDir,
    /// The root directory (absolute).
    dir: PathBuf,
}

const DEEP_DIRS: &str = "d1/d2/d3/d4/d5/d6/d7";

fn tree() -> Tree {
    let tmp = tempfile::Builder::new()
        .prefix("sandgate-bench")
        .tempdir()
        .expect("tempdir");
    let dir = tmp.path().join("root");
    std::fs::create_dir_all(dir.join(DEEP_DIRS)).unwrap();
    let small: Vec<u8> = (0..100u8).collect();
    std::fs::write(dir.join("f.txt"), &small).unwrap();
    std::fs::write(dir.join(DEEP_DIRS).join("f.txt"), &small).unwrap();
    let big: Vec<u8> = (0..1usize << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.join("big.bin"), &big).unwrap();
    Tree { _tmp: tmp, dir }
}

/// Reads an open file the way `std::fs::read` does after its open: one
/// stat for the size, reads into exactly that capacity, one probe for EOF.
fn read_like_std(fd: OwnedFd) -> Vec<u8> {
    let st = rustix::fs::fstat(&fd).unwrap();
    let mut buf = Vec::with_capacity(st.st_size as usize);
    loop {
        if buf.len() == buf.capacity() {
            let mut probe = [0u8; 32];
            match rustix::io::read(&fd, &mut probe).unwrap() {
                0 => break,
                n => buf.extend_from_slice(&probe[..n]),
            }
            // The file grew: read on only into spare capacity.
            continue;
        }
        if rustix::io::read(&fd, rustix::buffer::spare_capacity(&mut buf)).unwrap() == 0 {
            break;
        }
    }
    buf
}

/// The floor of a descriptor walk: one `O_PATH|O_DIRECTORY|O_NOFOLLOW` open
/// per directory component, closing the previous, then the file.
fn walk_floor(root: &OwnedFd, dirs: &[CString], file: &CString) -> Vec<u8> {
    let dflags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut cur: Option<OwnedFd> = None;
    for comp in dirs {
        let next = match &cur {
            Some(fd) => rustix::fs::openat(fd, comp.as_c_str(), dflags, Mode::empty()),
            None => rustix::fs::openat(root, comp.as_c_str(), dflags, Mode::empty()),
        }
        .unwrap();
        // Dropping the previous descriptor closes it.
        cur = Some(next);
    }
    let fflags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match &cur {
        Some(fd) => rustix::fs::openat(fd, file.as_c_str(), fflags, Mode::empty()),
        None => rustix::fs::openat(root, file.as_c_str(), fflags, Mode::empty()),
    }
    .unwrap();
    drop(cur);
    read_like_std(fd)
}

fn naive_read(root_dir: &Path, canon_root: &Path, rel: &str) -> Vec<u8> {
    let p = std::fs::canonicalize(root_dir.join(rel)).unwrap();
    assert!(p.starts_with(canon_root), "escape");
    std::fs::read(p).unwrap()
}

fn configure_reads(g: &mut Group<'_>) {
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40);
}

fn bench_read_group(c: &mut Criterion, t: &Tree, name: &str, rel: &str, expect_len: usize) {
    let abs = t.dir.join(rel);
    let canon_root = std::fs::canonicalize(&t.dir).unwrap();
    let o2 = Root::open_with_resolver(&t.dir, Resolver::Openat2).unwrap();
    let walk = Root::open_with_resolver(&t.dir, Resolver::Walk).unwrap();
    let cap = cap_std::fs::Dir::open_ambient_dir(&t.dir, cap_std::ambient_authority()).unwrap();

    // Every variant must read the same bytes.
    let want = std::fs::read(&abs).unwrap();
    assert_eq!(want.len(), expect_len);
    assert_eq!(o2.read(rel).unwrap(), want);
    assert_eq!(walk.read(rel).unwrap(), want);
    assert_eq!(cap.read(rel).unwrap(), want);
    assert_eq!(naive_read(&t.dir, &canon_root, rel), want);

    let std_read = || {
        black_box(std::fs::read(black_box(&abs)).unwrap());
    };
    let mut g = c.benchmark_group(name);
    configure_reads(&mut g);
    g.bench_function("std_fs_read", |b| b.iter(std_read));
    paired(
        &mut g,
        name,
        "root_openat2",
        "std_fs_read",
        READ_CHUNK,
        || {
            black_box(o2.read(black_box(rel)).unwrap());
        },
        std_read,
    );
    paired(
        &mut g,
        name,
        "root_walk",
        "std_fs_read",
        READ_CHUNK,
        || {
            black_box(walk.read(black_box(rel)).unwrap());
        },
        std_read,
    );
    paired(
        &mut g,
        name,
        "cap_std_dir_read",
        "std_fs_read",
        READ_CHUNK,
        || {
            black_box(cap.read(black_box(rel)).unwrap());
        },
        std_read,
    );
    paired(
        &mut g,
        name,
        "naive_canonicalize",
        "std_fs_read",
        READ_CHUNK,
        || {
            black_box(naive_read(&t.dir, &canon_root, black_box(rel)));
        },
        std_read,
    );
    g.finish();
}

fn reads(c: &mut Criterion) {
    let t = tree();
    bench_read_group(c, &t, "read_100B/depth1", "f.txt", 100);
    let deep = format!("{DEEP_DIRS}/f.txt");
    bench_read_group(c, &t, "read_100B/depth8", &deep, 100);
    bench_read_group(c, &t, "read_1MiB", "big.bin", 1 << 20);
}

fn bench_floor_group(c: &mut Criterion, t: &Tree, name: &str, rel: &str) {
    let walk = Root::open_with_resolver(&t.dir, Resolver::Walk).unwrap();
    let root_fd = rustix::fs::open(
        &t.dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    let mut comps: Vec<CString> = rel.split('/').map(|s| CString::new(s).unwrap()).collect();
    let file = comps.pop().unwrap();
    assert_eq!(walk_floor(&root_fd, &comps, &file), walk.read(rel).unwrap());

    let floor = || {
        black_box(walk_floor(&root_fd, black_box(&comps), &file));
    };
    let mut g = c.benchmark_group(name);
    configure_reads(&mut g);
    g.bench_function("walk_floor", |b| b.iter(floor));
    paired(
        &mut g,
        name,
        "root_walk",
        "walk_floor",
        READ_CHUNK,
        || {
            black_box(walk.read(black_box(rel)).unwrap());
        },
        floor,
    );
    g.finish();
}

fn floors(c: &mut Criterion) {
    let t = tree();
    bench_floor_group(c, &t, "walk_floor/depth1", "f.txt");
    let deep = format!("{DEEP_DIRS}/f.txt");
    bench_floor_group(c, &t, "walk_floor/depth8", &deep);
}

/// The durable atomic replace done by hand, the baseline `Root::replace`
/// must match: a named temporary file in the same directory, write, fsync,
/// rename over the target, fsync of the directory (held open across
/// iterations, which is the cheapest a caller can do).
fn by_hand_replace(dir: &File, tmp: &Path, target: &Path, data: &[u8]) {
    let mut f = File::create(tmp).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
    drop(f);
    std::fs::rename(tmp, target).unwrap();
    dir.sync_all().unwrap();
}

/// The same sequence through the `atomic-write-file` crate, whose commit
/// fsyncs the file, renames it over the target and fsyncs the directory.
fn crate_replace(target: &Path, data: &[u8]) {
    let mut f = atomic_write_file::AtomicWriteFile::open(target).unwrap();
    f.write_all(data).unwrap();
    f.commit().unwrap();
}

fn bench_replace_group(c: &mut Criterion, name: &str, len: usize) {
    let t = tree();
    let root = Root::open(&t.dir).unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
    let plain_path = t.dir.join("plain.bin");
    let mut plain = || {
        let mut f = File::create(black_box(&plain_path)).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
    };
    let dir = File::open(&t.dir).unwrap();
    let hand_tmp = t.dir.join(".by_hand.bin.tmp");
    let hand_path = t.dir.join("by_hand.bin");
    let mut by_hand = || by_hand_replace(&dir, &hand_tmp, black_box(&hand_path), &data);
    let crate_path = t.dir.join("atomic_write_file.bin");
    let mut with_crate = || crate_replace(black_box(&crate_path), &data);
    let replace = || {
        root.replace(black_box("replaced.bin"), &data).unwrap();
    };
    // Every name exists from the start: every iteration overwrites.
    plain();
    by_hand();
    with_crate();
    replace();
    for f in [
        "replaced.bin",
        "plain.bin",
        "by_hand.bin",
        "atomic_write_file.bin",
    ] {
        assert_eq!(std::fs::read(t.dir.join(f)).unwrap(), data, "{f}");
    }

    let mut g = c.benchmark_group(name);
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(30)
        .sampling_mode(SamplingMode::Flat);
    g.bench_function("plain_create_write_fsync", |b| b.iter(&mut plain));
    // For information: the plain write is not durable across a crash of a
    // rename, so it is no target.
    paired(
        &mut g,
        name,
        "root_replace",
        "plain_create_write_fsync",
        1,
        replace,
        &mut plain,
    );
    // The two durable baselines; the target is against the faster.
    paired(
        &mut g,
        name,
        "root_replace_vs_durable_by_hand",
        "durable_by_hand",
        1,
        replace,
        &mut by_hand,
    );
    paired(
        &mut g,
        name,
        "root_replace_vs_atomic_write_file",
        "atomic_write_file",
        1,
        replace,
        &mut with_crate,
    );
    g.finish();
}

fn replaces(c: &mut Criterion) {
    bench_replace_group(c, "replace_4KiB", 4096);
    bench_replace_group(c, "replace_100B", 100);
}

criterion_group!(benches, reads, floors, replaces);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    report();
    println!("INFO\topenat2\t{}", sandgate_rootfs::openat2_supported());
}
