//! Benchmarks of the shell executor against `std::process::Command`.
//!
//! Run with `cargo bench -p sandgate-shellexec --bench exec`.
//!
//! Groups:
//!
//! - `exec_true`: `true` run by `/bin/bash -c` through
//!   `std::process::Command::output` (the reference, `command_bash_c_true`)
//!   and through [`LocalShellExecutor::exec`] with the same shell, without
//!   kernel confinement (`executor_off`) and with Landlock in best-effort
//!   mode (`executor_landlock`: a temporary read dir and another write dir).
//!   Targets: ≤ 1.10× the reference without confinement, ≤ 1.25× with
//!   Landlock. `executor_limits` adds the policy's default resource limits
//!   (memory and tasks: cgroups as root on a cgroup v1 host, the monitor
//!   otherwise) to `executor_landlock`, and `executor_limits_cpu` a CPU
//!   limit too (the monitor); both are paired with `executor_landlock`.
//!   Target: ≤ 1.10× `executor_landlock`.
//!   `executor_namespaces_binds` runs in namespaces over a write directory
//!   with protected entries (a `.git` and a `.github` bound whole, two
//!   lock files: 4 binds and 1 pin) and `executor_namespaces_binds_200`
//!   over one with 100 lock files in 100 directories (100 binds, 100
//!   pins), each paired with `executor_namespaces`: the cost of the binds
//!   (the record is made once; the after-the-fact check is the protect
//!   crate's bench).
//! - `capture_100MB`: `head -c 100000000 /dev/zero` through `bash -c`,
//!   captured whole by `Command::output` (the reference, `command_output`)
//!   and by the executor (`executor_off`, `max_output_bytes` 128 MiB).
//!   Target: the executor captures ≥ 1 GB/s.
//!
//! Every variant is measured *interleaved* with its group's reference (see
//! `benches/interleave.rs`); the table printed after criterion's report gives
//! the median ratios, and a second table the capture rates in MB/s.
//!
//! After criterion, a CPU-time table: user + system time per call (this
//! process and its reaped descendants, from `getrusage`) of the three
//! `exec_true` variants, interleaved in chunks. Unlike wall time it hardly
//! depends on what else the machine runs, so it shows the executor's own
//! cost even when the wall-time ratios are swamped by load.
//!
//! Then the bench re-executes itself with `SANDGATE_BENCH_FLOOD=1`
//! in a fresh process, which only runs a 1 GB flood (`head -c 1000000000
//! /dev/zero`) through an executor capped at 8 MiB and prints its peak RSS
//! (`VmHWM`) before and after. Target: growth ≤ cap + 16 MiB. It is a
//! measurement, printed, never asserted.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, SamplingMode, Throughput};
use sandgate_shellexec::confine::{ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{ExecConfig, ExecOptions, LocalShellExecutor, ShellExecutor};
use sandgate_shellexec::limits::ResourceLimits;
use sandgate_shellexec::protected::{
    Checkpoint, EntryKind, ProtectedChange, ProtectedEntry, ProtectedPaths,
};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

#[path = "../../../benches/interleave.rs"]
mod interleave;
use interleave::{median, paired, report};

const SHELL: &str = "/bin/bash";

/// Bytes of the captured stream.
const CAPTURE_BYTES: usize = 100_000_000;
/// Bytes of the flood whose peak RSS is measured.
const FLOOD_BYTES: usize = 1_000_000_000;
/// The executor's output cap during the flood.
const FLOOD_CAP: usize = 8 << 20;
/// The allowed RSS growth above the cap during the flood.
const FLOOD_SLACK: usize = 16 << 20;
/// Set in the child process that runs the flood.
const FLOOD_ENV: &str = "SANDGATE_BENCH_FLOOD";

fn config(mode: ConfineMode, confine: ConfineSpec, max_output_bytes: usize) -> ExecConfig {
    ExecConfig {
        shell: PathBuf::from(SHELL),
        default_timeout: Duration::from_secs(120),
        max_output_bytes,
        confine_mode: mode,
        confine,
        ..ExecConfig::default()
    }
}

fn started(config: ExecConfig) -> LocalShellExecutor {
    let ex = LocalShellExecutor::new(config);
    ex.start().expect("start the executor");
    ex
}

fn exec(ex: &LocalShellExecutor, command: &str) -> sandgate_shellexec::exec::ExecResult {
    ex.exec(command, ExecOptions::default()).expect("exec")
}

fn std_bash(command: &str) -> std::process::Output {
    Command::new(SHELL)
        .args(["-c", command])
        .output()
        .expect("spawn bash")
}

/// The executors `exec true` is measured with: without confinement, on
/// the floor (Landlock and seccomp, best effort, no namespaces) and in
/// namespaces with the view, over a private read and write directory
/// returned first so that, bound first, they are dropped last.
fn true_executors() -> (
    [tempfile::TempDir; 2],
    LocalShellExecutor,
    LocalShellExecutor,
    LocalShellExecutor,
) {
    let read_dir = tempfile::tempdir().expect("tempdir");
    let write_dir = tempfile::tempdir().expect("tempdir");
    let off = started(config(ConfineMode::Off, ConfineSpec::default(), 1 << 20));
    let spec = ConfineSpec {
        read_dirs: vec![read_dir.path().to_owned()],
        write_dirs: vec![write_dir.path().to_owned()],
        ..ConfineSpec::default()
    };
    let landlock = started(ExecConfig {
        namespaces: false,
        ..config(ConfineMode::BestEffort, spec.clone(), 1 << 20)
    });
    let namespaces = started(config(ConfineMode::BestEffort, spec, 1 << 20));
    ([read_dir, write_dir], off, landlock, namespaces)
}

/// Protected entries recorded once; every command gets the same record
/// and nothing is checked afterwards: only the binds are measured.
struct Recorded {
    root: PathBuf,
    entries: Vec<ProtectedEntry>,
}

struct Same(Vec<ProtectedEntry>);

impl Checkpoint for Same {
    fn after(self: Box<Self>) -> Vec<ProtectedChange> {
        Vec::new()
    }
    fn entries(&self) -> Vec<ProtectedEntry> {
        self.0.clone()
    }
}

impl ProtectedPaths for Recorded {
    fn before(&self) -> std::io::Result<Box<dyn Checkpoint>> {
        Ok(Box::new(Same(self.entries.clone())))
    }
    fn root(&self) -> Option<&Path> {
        Some(&self.root)
    }
}

/// Makes `files` (and their directories) beneath `root` and records them
/// and `dirs` (protected as a whole) as protected.
fn protected_root(root: &Path, files: &[String], dirs: &[&str]) -> Arc<Recorded> {
    let mut entries = Vec::new();
    for f in files {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x\n").unwrap();
    }
    for d in dirs {
        std::fs::create_dir_all(root.join(d).join("inner")).unwrap();
        std::fs::write(root.join(d).join("inner/file"), "x\n").unwrap();
    }
    let kinds = files
        .iter()
        .map(|f| (f.as_str(), EntryKind::File))
        .chain(dirs.iter().map(|d| (*d, EntryKind::Directory)));
    for (rel, kind) in kinds {
        let md = std::fs::symlink_metadata(root.join(rel)).unwrap();
        entries.push(ProtectedEntry {
            path: PathBuf::from(rel),
            dev: md.dev(),
            ino: md.ino(),
            kind,
            nlink: md.nlink(),
            subtree: kind == EntryKind::Directory,
        });
    }
    Arc::new(Recorded {
        root: root.to_owned(),
        entries,
    })
}

/// Executors in namespaces whose write directory holds protected entries:
/// a small project, and one with 100 lock files in 100 directories.
fn binds_executors() -> (
    [tempfile::TempDir; 2],
    LocalShellExecutor,
    LocalShellExecutor,
) {
    let small = tempfile::tempdir().expect("tempdir");
    let many = tempfile::tempdir().expect("tempdir");
    let with = |dir: &Path, hook: Arc<Recorded>| {
        started(ExecConfig {
            protected: Some(hook),
            ..config(
                ConfineMode::BestEffort,
                ConfineSpec {
                    write_dirs: vec![dir.to_owned()],
                    ..ConfineSpec::default()
                },
                1 << 20,
            )
        })
    };
    let small_hook = protected_root(
        small.path(),
        &["Cargo.lock".to_owned(), "web/yarn.lock".to_owned()],
        &[".git", ".github"],
    );
    let many_files: Vec<String> = (0..100).map(|i| format!("d{i:03}/pkg.lock")).collect();
    let many_hook = protected_root(many.path(), &many_files, &[]);
    let a = with(small.path(), small_hook);
    let b = with(many.path(), many_hook);
    ([small, many], a, b)
}

/// Where bubblewrap is installed, for the information row.
fn bwrap() -> Option<PathBuf> {
    ["/usr/bin/bwrap", "/bin/bwrap"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn exec_true(c: &mut Criterion) {
    let (_dirs, off, landlock, namespaces) = true_executors();

    // Every variant must succeed; say what Landlock enforces.
    assert!(std_bash("true").status.success());
    assert_eq!(exec(&off, "true").exit_code, 0);
    let r = exec(&landlock, "true");
    assert_eq!(r.exit_code, 0);
    println!(
        "executor_landlock: Landlock fs={} net={} scoped={} abi={:?} (kernel {:?})",
        r.confined.fs,
        r.confined.net,
        r.confined.scoped,
        r.confined.landlock_abi,
        r.confined.kernel_abi
    );

    let r = exec(&namespaces, "true");
    assert_eq!(r.exit_code, 0);
    println!(
        "executor_namespaces: namespaces={} view={} missing={:?}",
        r.confined.namespaces, r.confined.view, r.confined.missing
    );
    let bwrap = bwrap();
    if bwrap.is_none() {
        println!("bwrap_unshare_all: skipped: bubblewrap is not installed");
    }

    let reference = || {
        black_box(std_bash(black_box("true")));
    };
    let mut g = c.benchmark_group("exec_true");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6))
        .sample_size(20)
        .sampling_mode(SamplingMode::Flat);
    g.bench_function("command_bash_c_true", |b| b.iter(reference));
    paired(
        &mut g,
        "exec_true",
        "executor_off",
        "command_bash_c_true",
        1,
        || {
            black_box(exec(&off, black_box("true")));
        },
        reference,
    );
    paired(
        &mut g,
        "exec_true",
        "executor_landlock",
        "command_bash_c_true",
        1,
        || {
            black_box(exec(&landlock, black_box("true")));
        },
        reference,
    );
    if r.confined.namespaces {
        paired(
            &mut g,
            "exec_true",
            "executor_namespaces",
            "command_bash_c_true",
            1,
            || {
                black_box(exec(&namespaces, black_box("true")));
            },
            reference,
        );
        let (_protected, small, many) = binds_executors();
        for (name, ex) in [
            ("executor_namespaces_binds", &small),
            ("executor_namespaces_binds_200", &many),
        ] {
            let r = exec(ex, "true");
            assert_eq!(r.exit_code, 0);
            println!("{name}: {:?}", r.confined.protected_binds);
            paired(
                &mut g,
                "exec_true",
                name,
                "executor_namespaces",
                1,
                || {
                    black_box(exec(ex, black_box("true")));
                },
                || {
                    black_box(exec(&namespaces, black_box("true")));
                },
            );
        }
    } else {
        println!(
            "executor_namespaces: skipped: {:?}",
            r.confined.notes.last()
        );
    }
    if let Some(bwrap) = bwrap {
        paired(
            &mut g,
            "exec_true",
            "bwrap_unshare_all",
            "command_bash_c_true",
            1,
            || {
                let out = Command::new(&bwrap)
                    .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
                    .output()
                    .expect("spawn bwrap");
                black_box(out);
            },
            reference,
        );
    }
    // The same Landlock executor with the policy's default limits (memory
    // and tasks: cgroup placement and reuse as root), then with a CPU
    // limit as well (the monitor's walk of /proc every 20 ms).
    let limited = |cpu: Option<u64>| {
        let mut cfg = config(
            ConfineMode::BestEffort,
            ConfineSpec {
                read_dirs: vec![_dirs[0].path().to_owned()],
                write_dirs: vec![_dirs[1].path().to_owned()],
                ..ConfineSpec::default()
            },
            1 << 20,
        );
        cfg.limits = ResourceLimits {
            max_memory_bytes: Some(2 << 30),
            max_tasks: Some(4096),
            max_cpu_ms: cpu,
            ..ResourceLimits::default()
        };
        // Compared with the floor executor above, so the same layers.
        cfg.namespaces = false;
        started(cfg)
    };
    for (name, ex) in [
        ("executor_limits", limited(None)),
        ("executor_limits_cpu", limited(Some(30_000))),
    ] {
        let r = exec(&ex, "true");
        assert_eq!(r.exit_code, 0);
        println!(
            "{name}: {:?}",
            r.confined
                .limits
                .as_ref()
                .map(|l| (l.memory, l.tasks, l.cpu))
        );
        paired(
            &mut g,
            "exec_true",
            name,
            "executor_landlock",
            1,
            || {
                black_box(exec(&ex, black_box("true")));
            },
            || {
                black_box(exec(&landlock, black_box("true")));
            },
        );
    }
    g.finish();
}

/// Per-call capture times, by variant, for the MB/s table.
static CAPTURES: Mutex<Vec<(&'static str, Duration)>> = Mutex::new(Vec::new());

fn timed<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    let d = t.elapsed();
    CAPTURES.lock().unwrap().push((name, d));
    out
}

fn capture(c: &mut Criterion) {
    let command = format!("head -c {CAPTURE_BYTES} /dev/zero");
    let ex = started(config(ConfineMode::Off, ConfineSpec::default(), 128 << 20));

    // Both capture the whole stream.
    let r = exec(&ex, &command);
    assert_eq!(r.exit_code, 0);
    assert!(!r.truncated);
    assert_eq!(r.stdout.len(), CAPTURE_BYTES);
    assert_eq!(std_bash(&command).stdout.len(), CAPTURE_BYTES);

    let reference = || {
        let out = timed("command_output", || std_bash(black_box(&command)));
        assert_eq!(out.stdout.len(), CAPTURE_BYTES);
        drop(black_box(out));
    };
    let mut g = c.benchmark_group("capture_100MB");
    g.throughput(Throughput::Bytes(CAPTURE_BYTES as u64))
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
    g.bench_function("command_output", |b| b.iter(reference));
    paired(
        &mut g,
        "capture_100MB",
        "executor_off",
        "command_output",
        1,
        || {
            let r = timed("executor_off", || exec(&ex, black_box(&command)));
            assert_eq!(r.stdout.len(), CAPTURE_BYTES);
            drop(black_box(r));
        },
        reference,
    );
    g.finish();
}

fn capture_report() {
    let all = CAPTURES.lock().unwrap();
    if all.is_empty() {
        return;
    }
    println!("\nCapture of {CAPTURE_BYTES} bytes (every timed call, warm-up included):");
    println!(
        "{:<30} {:>6} {:>12} {:>12} {:>12}",
        "variant", "calls", "median MB/s", "min MB/s", "max MB/s"
    );
    for name in ["command_output", "executor_off"] {
        let mut rates: Vec<f64> = all
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, d)| CAPTURE_BYTES as f64 / 1e6 / d.as_secs_f64())
            .collect();
        if rates.is_empty() {
            continue;
        }
        let n = rates.len();
        let med = median(&mut rates);
        println!(
            "{:<30} {:>6} {:>12.0} {:>12.0} {:>12.0}",
            format!("capture_100MB/{name}"),
            n,
            med,
            rates[0],
            rates[n - 1]
        );
    }
}

/// A `kB` field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .expect("status field")
}

/// The flood, in the fresh child process: prints one `key=value` line.
fn flood_child() {
    let ex = started(config(ConfineMode::Off, ConfineSpec::default(), FLOOD_CAP));
    // Start the peak from the current RSS (writing 5 to clear_refs resets
    // VmHWM; best effort).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let rss_before = status_bytes("VmRSS");
    let hwm_before = status_bytes("VmHWM");
    let t = Instant::now();
    let r = exec(&ex, &format!("head -c {FLOOD_BYTES} /dev/zero"));
    let took = t.elapsed();
    let hwm_after = status_bytes("VmHWM");
    println!(
        "FLOOD exit={} truncated={} captured={} hwm_reset={} rss_before={} hwm_before={} \
         hwm_after={} secs={:.3}",
        r.exit_code,
        r.truncated,
        r.stdout.len(),
        reset,
        rss_before,
        hwm_before,
        hwm_after,
        took.as_secs_f64()
    );
}

/// Runs the flood in a fresh copy of this binary and prints its figures.
fn flood_report() {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .env(FLOOD_ENV, "1")
        .output()
        .expect("re-exec the bench for the flood");
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(line) = text.lines().find(|l| l.starts_with("FLOOD ")) else {
        println!(
            "\nflood: the child printed no figures ({}); stderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    };
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or("?")
            .to_owned()
    };
    let num = |k: &str| field(k).parse::<u64>().unwrap_or(0);
    let (before, after) = (num("hwm_before"), num("hwm_after"));
    let delta = after.saturating_sub(before);
    let limit = (FLOOD_CAP + FLOOD_SLACK) as u64;
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    println!("\nPeak RSS under a {FLOOD_BYTES}-byte flood (fresh process, executor only):");
    println!(
        "  exit={} truncated={} captured={} B in {} s (VmHWM reset: {})",
        field("exit"),
        field("truncated"),
        field("captured"),
        field("secs"),
        field("hwm_reset")
    );
    println!(
        "  cap {:.1} MiB; VmRSS before {:.1} MiB; VmHWM before {:.1} MiB, after {:.1} MiB",
        mib(FLOOD_CAP as u64),
        mib(num("rss_before")),
        mib(before),
        mib(after)
    );
    println!(
        "  VmHWM delta {:.1} MiB; target ≤ cap + 16 MiB = {:.1} MiB: {}",
        mib(delta),
        mib(limit),
        if delta <= limit { "met" } else { "MISSED" }
    );
}

/// User + system time of this process and of its reaped descendants.
fn cpu_time() -> Duration {
    let get = |who: libc::c_int| {
        // SAFETY: `getrusage` fills the zeroed struct it is given.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `who` is RUSAGE_SELF or RUSAGE_CHILDREN.
        unsafe { libc::getrusage(who, &mut r) };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        tv(r.ru_utime) + tv(r.ru_stime)
    };
    get(libc::RUSAGE_SELF) + get(libc::RUSAGE_CHILDREN)
}

/// A named call and the CPU time its calls took.
type Variant<'a> = (&'static str, Box<dyn Fn() + 'a>, Duration);

/// CPU time per call of `exec true`, executor against `Command`, measured
/// in alternating chunks of 10 calls.
fn cpu_report() {
    const CALLS: u32 = 300;
    const CHUNK: u32 = 10;
    let (_dirs, off, landlock, namespaces) = true_executors();
    let mut run: [Variant<'_>; 4] = [
        (
            "command_bash_c_true",
            Box::new(|| drop(black_box(std_bash("true")))),
            Duration::ZERO,
        ),
        (
            "executor_off",
            Box::new(|| drop(black_box(exec(&off, "true")))),
            Duration::ZERO,
        ),
        (
            "executor_landlock",
            Box::new(|| drop(black_box(exec(&landlock, "true")))),
            Duration::ZERO,
        ),
        (
            "executor_namespaces",
            Box::new(|| drop(black_box(exec(&namespaces, "true")))),
            Duration::ZERO,
        ),
    ];
    for (_, f, _) in &run {
        f();
    }
    for _ in 0..CALLS / CHUNK {
        for (_, f, total) in &mut run {
            let t = cpu_time();
            for _ in 0..CHUNK {
                f();
            }
            *total += cpu_time().saturating_sub(t);
        }
    }
    let reference = run[0].2;
    println!("\nCPU time (user + system, this process and its reaped descendants) per exec of `true`, {CALLS} calls each, interleaved:");
    println!("{:<30} {:>10} {:>8}", "variant", "µs/call", "ratio");
    for (name, _, total) in &run {
        println!(
            "{:<30} {:>10.0} {:>8.3}",
            format!("exec_true/{name}"),
            total.as_secs_f64() * 1e6 / f64::from(CALLS),
            total.as_secs_f64() / reference.as_secs_f64()
        );
    }
    // The same, tab-separated, for `cargo xtask bench`.
    let per_call = |t: Duration| t.as_secs_f64() * 1e9 / f64::from(CALLS);
    for (name, _, total) in &run[1..] {
        println!(
            "RATIO\tsandgate-shellexec\texec_true_cpu/{name}\t{:.1}\t{:.1}\t{:.4}\tcommand_bash_c_true (CPU time)",
            per_call(*total),
            per_call(reference),
            total.as_secs_f64() / reference.as_secs_f64()
        );
    }
}

/// The command's side of [`connect_report`]: per connect, in µs, for
/// each family (UNIX beneath the write root, TCP on a granted loopback
/// port) and mode (non-blocking, blocking).
const CONNECT_LOOP: &str = r#"
import socket, sys, time
n = int(sys.argv[3])
for fam, addr in (('unix', sys.argv[1]), ('tcp', ('127.0.0.1', int(sys.argv[2])))):
    for mode in ('nonblocking', 'blocking'):
        kind = socket.AF_UNIX if fam == 'unix' else socket.AF_INET
        t = time.perf_counter()
        for i in range(n):
            s = socket.socket(kind)
            if mode == 'nonblocking':
                s.setblocking(False)
                try:
                    s.connect(addr)
                except BlockingIOError:
                    pass
            else:
                s.connect(addr)
            s.close()
        print(fam + '_' + mode, (time.perf_counter() - t) / n * 1e9)
"#;

/// What a `connect` costs a command on the floor where the executor
/// performs it (before Landlock ABI 9), against the same connects
/// unconfined, timed inside the command (a Python loop).
fn connect_report() {
    const CONNECTS: u32 = 3000;
    let Some(kernel) = sandgate_shellexec::confine::kernel_abi() else {
        println!("\nconnect: no Landlock here, nothing judged; skipped");
        return;
    };
    if !Path::new("/usr/bin/python3").exists() {
        println!("\nconnect: no python3 here; skipped");
        return;
    }
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketType};
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s.sock");
    // Queues long enough that no connect waits for the accepting thread.
    let listener = |family, addr: &dyn Fn(&std::os::fd::OwnedFd)| {
        let fd = rustix::net::socket(family, SocketType::STREAM, None).expect("socket");
        addr(&fd);
        rustix::net::listen(&fd, 4096).expect("listen");
        fd
    };
    let unix = std::os::unix::net::UnixListener::from(listener(AddressFamily::UNIX, &|fd| {
        let at = SocketAddrUnix::new(sock.as_path()).expect("address");
        rustix::net::bind(fd, &at).expect("bind");
    }));
    std::thread::spawn(move || unix.incoming().for_each(drop));
    let tcp = std::net::TcpListener::from(listener(AddressFamily::INET, &|fd| {
        let at = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        rustix::net::bind(fd, &at).expect("bind");
    }));
    let port = tcp.local_addr().expect("port").port();
    std::thread::spawn(move || tcp.incoming().for_each(drop));
    let spec = ConfineSpec {
        write_dirs: vec![dir.path().to_owned()],
        connect_ports: vec![port],
        ..ConfineSpec::default()
    };
    let ex = started(ExecConfig {
        namespaces: false,
        ..config(ConfineMode::BestEffort, ConfineSpec::default(), 1 << 20)
    });
    let judged = sandgate_shellexec::confine::prepare_with_abi(
        &spec,
        ConfineMode::BestEffort,
        Some(kernel.min(8)),
    )
    .expect("prepare");
    if !judged
        .report()
        .seccomp_refuses
        .iter()
        .any(|r| r.starts_with("connect to a UNIX socket"))
    {
        println!("\nconnect: no seccomp user notification here, nothing judged; skipped");
        return;
    }
    let off = sandgate_shellexec::confine::prepare(&spec, ConfineMode::Off).expect("prepare");
    let env = [(
        std::ffi::OsString::from("PATH"),
        std::ffi::OsString::from("/usr/bin:/bin"),
    )];
    let args: Vec<std::ffi::OsString> = vec![
        "-c".into(),
        CONNECT_LOOP.into(),
        sock.clone().into(),
        port.to_string().into(),
        CONNECTS.to_string().into(),
    ];
    let times = |prepared| {
        let r = ex
            .exec_program(
                Path::new("/usr/bin/python3"),
                &args,
                &env,
                prepared,
                ExecOptions::default(),
            )
            .expect("exec");
        let out = String::from_utf8_lossy(&r.stdout).into_owned();
        out.lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(' ')?;
                Some((k.to_owned(), v.parse::<f64>().ok()?))
            })
            .collect::<Vec<_>>()
    };
    let (unconfined, performed) = (times(&off), times(&judged));
    println!("\nconnect on the floor, performed by the executor (Landlock ABI {}), {CONNECTS} connects each:", kernel.min(8));
    println!(
        "{:<32} {:>10} {:>12} {:>8}",
        "variant", "µs/call", "unconfined", "ratio"
    );
    for ((name, own), (_, reference)) in performed.iter().zip(&unconfined) {
        println!(
            "{:<32} {:>10.1} {:>12.1} {:>8.2}",
            format!("connect/{name}"),
            own / 1e3,
            reference / 1e3,
            own / reference
        );
        println!(
            "RATIO\tsandgate-shellexec\tconnect_judged/{name}\t{own:.1}\t{reference:.1}\t{:.4}\tthe same connect unconfined",
            own / reference
        );
    }
}

/// What a signal costs a command on the floor where the executor judges
/// it (Landlock before ABI 6, played here with ABI 5), against the same
/// loop where Landlock scopes signals, timed around the whole command.
fn signal_report() {
    const KILLS: u32 = 5000;
    let Some(kernel) = sandgate_shellexec::confine::kernel_abi().filter(|&k| k >= 6) else {
        println!("\nsignals: no Landlock scoping here to compare with; skipped");
        return;
    };
    let ex = started(ExecConfig {
        namespaces: false,
        ..config(ConfineMode::BestEffort, ConfineSpec::default(), 1 << 20)
    });
    let script = format!("i=0; while [ $i -lt {KILLS} ]; do kill -0 $$; i=$((i+1)); done");
    let env = [(
        std::ffi::OsString::from("PATH"),
        std::ffi::OsString::from("/usr/bin:/bin"),
    )];
    let prepared = |abi| {
        sandgate_shellexec::confine::prepare_with_abi(
            &ConfineSpec::default(),
            ConfineMode::BestEffort,
            Some(abi),
        )
        .expect("prepare")
    };
    let (scoped, judged) = (prepared(kernel.min(8)), prepared(5));
    let mut total = [Duration::ZERO; 2];
    for _ in 0..3 {
        for (i, p) in [&scoped, &judged].into_iter().enumerate() {
            let t = Instant::now();
            let r = ex
                .exec_program(
                    Path::new("/bin/sh"),
                    &["-c".into(), script.clone().into()],
                    &env,
                    p,
                    ExecOptions::default(),
                )
                .expect("exec");
            assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
            total[i] += t.elapsed();
        }
    }
    let per_kill = |t: Duration| t.as_secs_f64() * 1e9 / f64::from(3 * KILLS);
    let (own, reference) = (per_kill(total[1]), per_kill(total[0]));
    println!(
        "\nsignals on the floor, `kill -0 $$` in a shell loop, {KILLS} × 3 alternating: \
         {:.1} µs judged (ABI 5), {:.1} µs scoped (ABI {}), ratio {:.2}",
        own / 1e3,
        reference / 1e3,
        kernel.min(8),
        own / reference
    );
    println!(
        "RATIO\tsandgate-shellexec\tsignal_judged/kill_0\t{own:.1}\t{reference:.1}\t{:.4}\tthe same loop scoped by Landlock",
        own / reference
    );
}

criterion_group!(benches, exec_true, capture);

fn main() {
    if std::env::var_os(FLOOD_ENV).is_some() {
        flood_child();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
    report();
    capture_report();
    cpu_report();
    flood_report();
    connect_report();
    signal_report();
}
