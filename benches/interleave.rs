//! Interleaved measurement for criterion benchmarks, shared by the
//! workspace's benches (included with `#[path]`).
//!
//! These machines are noisy: a reference measured in another time window
//! says little. Each variant is timed alternately with its reference in the
//! same window, and `report` prints the median ratio of the two.

#![allow(dead_code)] // each bench uses part of it

use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::BenchmarkGroup;

/// A criterion benchmark group measured in wall time.
pub type Group<'c> = BenchmarkGroup<'c, criterion::measurement::WallTime>;

/// One interleaved measurement: total time of the variant and of the
/// reference over the same number of iterations, in the same window.
struct Pair {
    label: String,
    reference: &'static str,
    iters: u64,
    own: Duration,
    refd: Duration,
}

static PAIRS: Mutex<Vec<Pair>> = Mutex::new(Vec::new());

fn record(label: &str, reference: &'static str, iters: u64, own: Duration, refd: Duration) {
    PAIRS.lock().unwrap().push(Pair {
        label: label.to_owned(),
        reference,
        iters,
        own,
        refd,
    });
}

/// Times `k` calls of `f`.
pub fn time<F: FnMut()>(k: u64, f: &mut F) -> Duration {
    let t = Instant::now();
    for _ in 0..k {
        f();
    }
    t.elapsed()
}

/// Measures `own` for criterion while interleaving `reference` in chunks of
/// `chunk` iterations (alternating which goes first), recording both.
pub fn paired<A: FnMut(), B: FnMut()>(
    g: &mut Group<'_>,
    group: &str,
    name: &str,
    reference: &'static str,
    chunk: u64,
    mut own: A,
    mut refr: B,
) {
    let label = format!("{group}/{name}");
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let (mut t_own, mut t_ref) = (Duration::ZERO, Duration::ZERO);
            let (mut done, mut own_first) = (0, true);
            while done < iters {
                let k = chunk.min(iters - done);
                if own_first {
                    t_own += time(k, &mut own);
                    t_ref += time(k, &mut refr);
                } else {
                    t_ref += time(k, &mut refr);
                    t_own += time(k, &mut own);
                }
                own_first = !own_first;
                done += k;
            }
            record(&label, reference, iters, t_own, t_ref);
            t_own
        })
    });
}

/// Like [`paired`], for closures that time themselves (so that cleanup can
/// stay out of the measurement); alternates every iteration.
pub fn paired_self_timed<A: FnMut() -> Duration, B: FnMut() -> Duration>(
    g: &mut Group<'_>,
    group: &str,
    name: &str,
    reference: &'static str,
    mut own: A,
    mut refr: B,
) {
    let label = format!("{group}/{name}");
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let (mut t_own, mut t_ref) = (Duration::ZERO, Duration::ZERO);
            for i in 0..iters {
                if i % 2 == 0 {
                    t_own += own();
                    t_ref += refr();
                } else {
                    t_ref += refr();
                    t_own += own();
                }
            }
            record(&label, reference, iters, t_own, t_ref);
            t_own
        })
    });
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Prints, per interleaved variant, the medians over criterion's calls of
/// the variant's and the reference's time per iteration and of their ratio:
/// a table for people, then the same figures as one tab-separated line per
/// variant for `cargo xtask bench`:
/// `RATIO <package> <group/variant> <variant ns> <reference ns> <ratio> <reference>`.
pub fn report() {
    let pairs = PAIRS.lock().unwrap();
    let mut labels: Vec<(&str, &str)> = Vec::new();
    for p in pairs.iter() {
        if !labels.iter().any(|(l, _)| *l == p.label) {
            labels.push((&p.label, p.reference));
        }
    }
    if labels.is_empty() {
        return;
    }
    println!("\nInterleaved ratios (median over samples, variant / reference in the same window):");
    println!(
        "{:<46} {:>12} {:>12} {:>8}  reference",
        "variant", "variant", "reference", "ratio"
    );
    let mut machine = Vec::new();
    for (label, reference) in labels {
        // Warm-up calls (few iterations) are left out when there is enough else.
        let mine: Vec<&Pair> = pairs.iter().filter(|p| p.label == label).collect();
        let max_iters = mine.iter().map(|p| p.iters).max().unwrap_or(0);
        let kept: Vec<&&Pair> = mine.iter().filter(|p| p.iters * 8 >= max_iters).collect();
        let per = |d: Duration, n: u64| d.as_secs_f64() * 1e9 / n as f64;
        let mut own: Vec<f64> = kept.iter().map(|p| per(p.own, p.iters)).collect();
        let mut refd: Vec<f64> = kept.iter().map(|p| per(p.refd, p.iters)).collect();
        let mut ratio: Vec<f64> = kept
            .iter()
            .map(|p| p.own.as_secs_f64() / p.refd.as_secs_f64())
            .collect();
        let (own, refd, ratio) = (median(&mut own), median(&mut refd), median(&mut ratio));
        println!("{label:<46} {own:>9.0} ns {refd:>9.0} ns {ratio:>8.3}  {reference}");
        machine.push(format!(
            "RATIO\t{}\t{label}\t{own:.1}\t{refd:.1}\t{ratio:.4}\t{reference}",
            env!("CARGO_PKG_NAME")
        ));
    }
    println!();
    for line in machine {
        println!("{line}");
    }
}
