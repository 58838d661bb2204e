//! Many sandboxes and executors in one process.
//!
//! Run with `cargo bench -p sandgate --bench scale`.
//!
//! - `scale_read/*`: whole-file reads of a 100-byte file while 1,000
//!   sandboxes are alive, each with its own read root and write root.
//!   `one_thread` reads from one thread; `two_threads_own` runs two threads
//!   at once, each on its own sandbox; `two_threads_shared` runs two
//!   threads on the same sandbox. Criterion's time is per read of the whole
//!   batch (wall clock divided by the reads of all threads), so two threads
//!   that do not serialize on a lock show about half the one-thread time.
//!   After criterion, the bench measures the same runs interleaved (one
//!   thread, then two, alternately, 15 rounds) and prints, per two-thread
//!   variant, the median of (time per read with two threads / time per read
//!   with one): the target is a throughput of at least 1.7× one
//!   thread's on two cores, a ratio of at most 1/1.7 = 0.588. The same
//!   ratio for plain `std::fs::read` of the same files
//!   (`std_fs_read_two_threads`) is the control: on a machine whose second
//!   core is busy with other work, neither scales, and the control says so.
//! - `exec_concurrent/*` (informational): 100 executors alive at once,
//!   each built from its own policy with its own write root; `c` threads
//!   (1, 10, 100) each run `true` through their own executor, and the
//!   figure is the mean latency of one exec. Printed as a `RATIO` line
//!   against the latency at 1 concurrent, with descriptor counts before the
//!   executors were built and after they were disposed.

use std::fs;
use std::hint::black_box;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, SamplingMode};
use sandgate::policy::Policy;
use sandgate::{Executor, Sandbox};

/// Sandboxes alive while the reads are measured.
const ALIVE: usize = 1000;
/// Executors alive while commands run.
const EXECUTORS: usize = 100;
/// Reads per thread in one interleaved round.
const ROUND_READS: u64 = 20_000;
/// Interleaved rounds.
const ROUNDS: usize = 15;

fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd").map_or(0, |d| d.count().saturating_sub(1))
}

fn raise_nofile(need: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid rlimit for the calls to read and write.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < need {
            lim.rlim_cur = need.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

struct Fleet {
    dir: tempfile::TempDir,
    boxes: Arc<Vec<Sandbox>>,
}

fn fleet() -> Fleet {
    raise_nofile((ALIVE * 2 + 256) as u64);
    let dir = tempfile::tempdir().unwrap();
    let boxes = (0..ALIVE)
        .map(|i| {
            let r = dir.path().join(format!("r{i}"));
            let w = dir.path().join(format!("w{i}"));
            fs::create_dir_all(&r).unwrap();
            fs::create_dir_all(&w).unwrap();
            fs::write(r.join("f.txt"), [b'x'; 100]).unwrap();
            Sandbox::builder()
                .read_root(&r)
                .write_root(&w)
                .deny_write("*.pem")
                .build()
                .unwrap()
        })
        .collect();
    Fleet {
        dir,
        boxes: Arc::new(boxes),
    }
}

/// Wall time of `threads` threads each doing `reads` reads at once, on
/// sandboxes `picks[t]`.
///
/// With `plain`, the threads read the same files by absolute path with
/// `std::fs::read` instead: the control that shows what the machine itself
/// gives two threads at the moment of the run.
fn run_reads(f: &Fleet, picks: &[usize], reads: u64, plain: bool) -> Duration {
    let start = Arc::new(Barrier::new(picks.len() + 1));
    let workers: Vec<_> = picks
        .iter()
        .map(|&i| {
            let boxes = Arc::clone(&f.boxes);
            let start = Arc::clone(&start);
            let file = f.dir.path().join(format!("r{i}/f.txt"));
            thread::spawn(move || {
                let sb = &boxes[i];
                start.wait();
                if plain {
                    for _ in 0..reads {
                        black_box(fs::read(black_box(&file)).unwrap());
                    }
                } else {
                    for _ in 0..reads {
                        black_box(sb.read(black_box("f.txt")).unwrap());
                    }
                }
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    for w in workers {
        w.join().unwrap();
    }
    t0.elapsed()
}

const VARIANTS: [(&str, &[usize]); 3] = [
    ("one_thread", &[17]),
    ("two_threads_own", &[17, 917]),
    ("two_threads_shared", &[17, 17]),
];

fn reads(c: &mut Criterion) {
    let f = fleet();
    let mut g = c.benchmark_group("scale_read");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .sampling_mode(SamplingMode::Flat);
    for (name, picks) in VARIANTS {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                // Per read of the batch: the wall time of `iters` reads on
                // each thread, divided among the threads.
                run_reads(&f, picks, iters, false) / picks.len() as u32
            })
        });
    }
    g.finish();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The interleaved measurement behind the `RATIO` lines.
fn read_ratios() {
    let f = fleet();
    println!("\nscale_read, interleaved ({ROUNDS} rounds of {ROUND_READS} reads per thread, {ALIVE} sandboxes alive):");
    let variants = [
        ("two_threads_own", VARIANTS[1].1, false),
        ("two_threads_shared", VARIANTS[2].1, false),
        ("std_fs_read_two_threads", VARIANTS[1].1, true),
    ];
    for (name, picks, plain) in variants {
        let mut ratios = Vec::new();
        let (mut one_ns, mut two_ns) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let one = run_reads(&f, VARIANTS[0].1, ROUND_READS, plain).as_nanos() as f64
                / ROUND_READS as f64;
            let two = run_reads(&f, picks, ROUND_READS, plain).as_nanos() as f64
                / (ROUND_READS as f64 * picks.len() as f64);
            ratios.push(two / one);
            one_ns.push(one);
            two_ns.push(two);
        }
        let ratio = median(ratios);
        println!(
            "  {name}: {:.0} ns per read against {:.0} ns with one thread: throughput {:.2}x",
            median(two_ns.clone()),
            median(one_ns.clone()),
            1.0 / ratio
        );
        println!(
            "RATIO\tsandgate\tscale_read/{name}\t{:.1}\t{:.1}\t{ratio:.4}\t{}",
            median(two_ns),
            median(one_ns),
            if plain {
                "std_fs_read_one_thread"
            } else {
                "one_thread"
            }
        );
    }
}

/// Mean latency of one `true` at 1, 10 and 100 concurrent, 100 executors
/// alive.
fn exec_latency() {
    let dir = tempfile::tempdir().unwrap();
    let fds0 = open_fds();
    let executors: Arc<Vec<Executor>> = Arc::new(
        (0..EXECUTORS)
            .map(|i| build_executor(dir.path(), i))
            .collect(),
    );
    let fds_alive = open_fds();
    println!("\nexec_concurrent ({EXECUTORS} executors alive, `true` through `sh -c`):");
    let mut base = None;
    for conc in [1usize, 10, 100] {
        // Each thread runs this many commands; the 1-concurrent figure gets
        // more so that every level runs at least 100 commands.
        let per = (200 / conc).max(3);
        let start = Arc::new(Barrier::new(conc));
        let workers: Vec<_> = (0..conc)
            .map(|t| {
                let ex = Arc::clone(&executors);
                let start = Arc::clone(&start);
                thread::spawn(move || {
                    start.wait();
                    let mut total = Duration::ZERO;
                    for _ in 0..per {
                        let t0 = Instant::now();
                        let r = ex[t].exec("true", Default::default()).unwrap();
                        total += t0.elapsed();
                        assert_eq!(r.exit_code, 0);
                    }
                    total
                })
            })
            .collect();
        let total: Duration = workers.into_iter().map(|w| w.join().unwrap()).sum();
        let mean = total.as_nanos() as f64 / (conc * per) as f64;
        let base_ns = *base.get_or_insert(mean);
        println!(
            "  {conc:>3} concurrent: {:.2} ms per exec ({} execs)",
            mean / 1e6,
            conc * per
        );
        println!(
            "RATIO\tsandgate\texec_concurrent/{conc}\t{mean:.1}\t{base_ns:.1}\t{:.4}\texec_concurrent/1",
            mean / base_ns
        );
    }
    let fds_used = open_fds();
    for ex in executors.iter() {
        ex.dispose();
    }
    drop(executors);
    println!(
        "  descriptors: {fds0} before, {fds_alive} with {EXECUTORS} executors, {fds_used} after the runs, {} after dispose",
        open_fds()
    );
}

fn build_executor(base: &Path, i: usize) -> Executor {
    let d = base.join(format!("t{i}"));
    fs::create_dir_all(d.join("ws")).unwrap();
    let path = d.join("policy.toml");
    fs::write(
        &path,
        "[fs]\nwrite_root = \"ws\"\n[exec]\nenabled = true\ntimeout_ms = 20000\n",
    )
    .unwrap();
    let ex = Executor::from_policy(&Policy::load(&path).unwrap()).unwrap();
    ex.start().unwrap();
    ex
}

criterion_group!(benches, reads);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    read_ratios();
    exec_latency();
    println!("\nTargets: scale_read/two_threads_* <= 0.588 (two threads >= 1.7x one thread's reads); exec_concurrent is informational.");
}
