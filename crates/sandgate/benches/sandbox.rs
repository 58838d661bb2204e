//! Benchmarks of the facade's confined operations against plain `std::fs`.
//!
//! Run with `cargo bench -p sandgate --bench sandbox`.
//!
//! Targets (issue): a confined read through [`Sandbox`] (name parsed, guard
//! and caps checked, audit off) at most 1.05× `std::fs::read` of the same
//! file; with an audit sink appending to a `Vec`, at most 1.10×. They are
//! reported as ratios, never asserted: these machines are too noisy for
//! timed tests.
//!
//! Groups:
//!
//! - `sandbox_read_100B/depth1`, `sandbox_read_100B/depth3`: one whole-file
//!   read of a 100-byte file by `std::fs::read` of the absolute path (the
//!   reference), by [`Sandbox::read`] on a sandbox with a read root, a write
//!   root and 20 deny-write patterns (`sandbox_read`), by the same with an
//!   audit sink that clones every event into a `Vec` behind a mutex, cleared
//!   every 1024 events so memory stays bounded (`sandbox_read_audit`), and,
//!   to split the cost between the layers, by the bare
//!   [`sandgate::rootfs::Root::read`] of the same root (`root_read`). Depth
//!   counts components, the file included: `f.txt` and `a/b/f.txt`.
//! - `sandbox_write_4KiB` (informational): [`Sandbox::write`] of a new file
//!   (exclusive create, atomic and durable: `O_TMPFILE`, fsync, link, fsync
//!   of the directory, with the deny-pattern checks on the resolved name)
//!   against a plain `create_new` + `write_all` + `sync_all` of the same
//!   bytes to another name in the same directory. Only the write is timed:
//!   each file is removed again outside the timed region, so both variants
//!   re-create the same two names and ext4 is not churned by thousands of
//!   distinct creates.
//!
//! These machines are noisy, so every variant other than a group's
//! reference is measured *interleaved* with the reference (the approach of
//! `crates/rootfs/benches/rootfs.rs`): chunks of the variant (the time
//! criterion sees) alternate with chunks of the reference (timed on the
//! side). After criterion's own report, a table gives for each variant the
//! median over criterion's samples of (variant time / reference time) in
//! the same window: the ratios to compare.

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, SamplingMode};
use sandgate::rootfs::Root;
use sandgate::{AuditEvent, Sandbox, SandboxBuilder, WriteOptions};

/// Iterations of one read variant timed back to back before switching to
/// the other (writes alternate every iteration).
const READ_CHUNK: u64 = 32;

/// Audit events kept before the bench's sink clears its `Vec`.
const AUDIT_KEEP: usize = 1024;

/// 20 realistic deny-write patterns (those of the fileguard bench).
const PATTERNS: [&str; 20] = [
    ".github/**",
    ".claude/**",
    ".claude/settings.json",
    ".pi/**",
    "Makefile",
    "Dockerfile",
    "*.yml",
    "*.yaml",
    "*.pem",
    ".env",
    "Cargo.lock",
    "package-lock.json",
    "secrets/**",
    "docs/*.md",
    "scripts/*.sh",
    "crates/*/Cargo.toml",
    ".vscode/settings.json",
    "**/node_modules/**",
    "**/.husky/**",
    "документы/**",
];

#[path = "../../../benches/interleave.rs"]
mod interleave;
use interleave::{paired, paired_self_timed, report, Group};

/// The tree every benchmark works in.
struct Tree {
    _tmp: tempfile::TempDir,
    /// The root directory (absolute).
    dir: PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::Builder::new()
        .prefix("sandgate-sbench")
        .tempdir()
        .expect("tempdir");
    let dir = tmp.path().join("root");
    std::fs::create_dir_all(dir.join("a/b")).unwrap();
    std::fs::create_dir_all(dir.join("w")).unwrap();
    let small: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
    std::fs::write(dir.join("f.txt"), &small).unwrap();
    std::fs::write(dir.join("a/b/f.txt"), &small).unwrap();
    Tree { _tmp: tmp, dir }
}

/// What the issue describes: one read root, the same write root, 20
/// deny-write patterns (restricted mode, the default).
fn builder(t: &Tree) -> SandboxBuilder {
    let mut b = Sandbox::builder();
    b.read_root(&t.dir)
        .write_root(&t.dir)
        .deny_write_patterns(PATTERNS);
    b
}

/// The same with an audit sink that keeps a clone of every event.
fn audited(t: &Tree) -> (Sandbox, Arc<Mutex<Vec<AuditEvent>>>) {
    let log: Arc<Mutex<Vec<AuditEvent>>> = Arc::new(Mutex::new(Vec::with_capacity(AUDIT_KEEP)));
    let sink = Arc::clone(&log);
    let sb = builder(t)
        .audit(move |e| {
            let mut v = sink.lock().unwrap();
            if v.len() >= AUDIT_KEEP {
                v.clear();
            }
            v.push(e.clone());
        })
        .build()
        .unwrap();
    (sb, log)
}

fn configure_reads(g: &mut Group<'_>) {
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40);
}

fn bench_read_group(c: &mut Criterion, t: &Tree, name: &str, rel: &str) {
    let abs = t.dir.join(rel);
    let sb = builder(t).build().unwrap();
    let (sba, log) = audited(t);
    let root = Root::open(&t.dir).unwrap();

    // Every variant must read the same bytes, and the sink must see them.
    let want = std::fs::read(&abs).unwrap();
    assert_eq!(want.len(), 100);
    assert_eq!(sb.read(rel).unwrap(), want);
    assert_eq!(sba.read(rel).unwrap(), want);
    assert_eq!(root.read(rel).unwrap(), want);
    {
        let v = log.lock().unwrap();
        let e = v.last().expect("an audit event");
        assert_eq!((e.op, e.path.as_str(), e.size), ("read", rel, Some(100)));
    }

    let std_read = || {
        black_box(std::fs::read(black_box(&abs)).unwrap());
    };
    let mut g = c.benchmark_group(name);
    configure_reads(&mut g);
    g.bench_function("std_fs_read", |b| b.iter(std_read));
    paired(
        &mut g,
        name,
        "sandbox_read",
        "std_fs_read",
        READ_CHUNK,
        || {
            black_box(sb.read(black_box(rel)).unwrap());
        },
        std_read,
    );
    paired(
        &mut g,
        name,
        "sandbox_read_audit",
        "std_fs_read",
        READ_CHUNK,
        || {
            black_box(sba.read(black_box(rel)).unwrap());
        },
        std_read,
    );
    paired(
        &mut g,
        name,
        "root_read",
        "std_fs_read",
        READ_CHUNK,
        || {
            black_box(root.read(black_box(rel)).unwrap());
        },
        std_read,
    );
    g.finish();
}

fn reads(c: &mut Criterion) {
    let t = tree();
    bench_read_group(c, &t, "sandbox_read_100B/depth1", "f.txt");
    bench_read_group(c, &t, "sandbox_read_100B/depth3", "a/b/f.txt");
}

fn writes(c: &mut Criterion) {
    let name = "sandbox_write_4KiB";
    let t = tree();
    let sb = builder(&t).build().unwrap();
    let data: Vec<u8> = (0..4096usize).map(|i| (i % 253) as u8).collect();
    let sb_abs = t.dir.join("w/sandboxed.bin");
    let plain_abs = t.dir.join("w/plain.bin");
    let sandboxed = || {
        let start = Instant::now();
        sb.write(black_box("w/sandboxed.bin"), &data, WriteOptions::default())
            .unwrap();
        let took = start.elapsed();
        std::fs::remove_file(&sb_abs).unwrap();
        took
    };
    let plain = || {
        let start = Instant::now();
        let mut f = File::options()
            .write(true)
            .create_new(true)
            .open(black_box(&plain_abs))
            .unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        drop(f);
        let took = start.elapsed();
        std::fs::remove_file(&plain_abs).unwrap();
        took
    };
    // Both leave nothing behind; check the sandbox wrote the bytes.
    sb.write("w/check.bin", &data, WriteOptions::default())
        .unwrap();
    assert_eq!(std::fs::read(t.dir.join("w/check.bin")).unwrap(), data);

    let mut g = c.benchmark_group(name);
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(30)
        .sampling_mode(SamplingMode::Flat);
    g.bench_function("plain_create_new_write_fsync", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| plain()).sum())
    });
    paired_self_timed(
        &mut g,
        name,
        "sandbox_write",
        "plain_create_new_write_fsync",
        sandboxed,
        plain,
    );
    g.finish();
}

criterion_group!(benches, reads, writes);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    report();
    println!("\nTargets: sandbox_read <= 1.05, sandbox_read_audit <= 1.10 (sandbox_write is informational).");
}
