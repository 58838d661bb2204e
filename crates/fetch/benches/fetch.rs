//! The cost of the checks: 1,000 requests to a local keep-alive server
//! through [`Fetcher::fetch`] (authorizer on the name and on the address,
//! pinning, manual redirect handling, capped body read) against the very
//! same ureq client configuration without them: the same agent settings
//! and connector, a plain synchronous resolver (`ToSocketAddrs`, which
//! parses the literal), a plain `run`, the same capped body read.
//!
//! (ureq's own `DefaultResolver` is not the baseline: with a timeout set it
//! resolves on a new thread per request, which costs more than all the
//! checks together and would flatter them.)
//!
//! Run with `cargo bench -p sandgate-fetch --bench fetch`.
//!
//! Target (issue 7): checked / unchecked ≤ 1.10 for 1,000 requests in one
//! run. Criterion reports each variant's time per 1,000 requests; after it,
//! a table compares the two over 5 × 1,000 requests each, timed in
//! interleaved chunks of 50 (unchecked then checked, then the other way
//! round, so another process's burst hits both): the median and 10th
//! percentile chunk times and their ratios. It is reported, never asserted:
//! these machines are too noisy for timed tests.
//!
//! The server listens on 127.0.0.1 only and answers `200 OK` with a
//! two-byte body on persistent connections. The whole process runs on one
//! CPU (see `pin_to_this_cpu`).

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use sandgate_fetch::{FetchOptions, Fetcher};
use sandgate_netguard::{Mode, NetEntry, Rules};

/// The baseline's resolver: what a client without sandgate does, with no
/// thread per lookup.
#[derive(Debug)]
struct PlainResolver;

impl ureq::unversioned::resolver::Resolver for PlainResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        _: &ureq::config::Config,
        _: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let host = uri.host().unwrap_or_default();
        let port = uri.port_u16().unwrap_or(80);
        let mut out = self.empty();
        for addr in (host, port).to_socket_addrs()?.take(16) {
            out.push(addr);
        }
        Ok(out)
    }
}

const REQUESTS: usize = 1000;
const ROUNDS: usize = 5;
const CHUNK: usize = 50;
const MAX_BYTES: u64 = 10 * 1024 * 1024;

/// A keep-alive server on 127.0.0.1; every request gets `200 ok`.
static CONNECTIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn serve() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            CONNECTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    let mut any = false;
                    loop {
                        line.clear();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => any = true,
                        }
                    }
                    if !any {
                        return;
                    }
                    if stream
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

struct Bench {
    url: String,
    fetcher: Fetcher,
    baseline: ureq::Agent,
}

impl Bench {
    fn new() -> Bench {
        let port = serve();
        let entry = NetEntry::parse(&format!("127.0.0.1:{port}")).expect("the bench entry parses");
        let rules = Rules::new(Mode::Restricted, vec![entry], true);
        let tls = ureq::tls::TlsConfig::builder().build();
        Bench {
            url: format!("http://127.0.0.1:{port}/item"),
            fetcher: Fetcher::builder(rules).build(),
            baseline: ureq::Agent::with_parts(
                sandgate_fetch::client_config(tls),
                ureq::unversioned::transport::DefaultConnector::default(),
                PlainResolver,
            ),
        }
    }

    fn checked(&self, n: usize) {
        let opts = FetchOptions::new().max_bytes(MAX_BYTES);
        for _ in 0..n {
            let r = self.fetcher.fetch(&self.url, &opts).expect("fetch");
            black_box(r.body);
        }
    }

    fn unchecked(&self, n: usize) {
        for _ in 0..n {
            let req = ureq::http::Request::builder()
                .method("GET")
                .uri(self.url.as_str())
                .body(())
                .unwrap();
            let req = self
                .baseline
                .configure_request(req)
                .timeout_global(Some(Duration::from_secs(30)))
                .build();
            let r = self.baseline.run(req).expect("baseline");
            let mut buf = Vec::new();
            r.into_body()
                .into_reader()
                .take(MAX_BYTES + 1)
                .read_to_end(&mut buf)
                .expect("body");
            black_box(buf);
        }
    }
}

fn fetch_1000(c: &mut Criterion) {
    let b = Bench::new();
    b.checked(REQUESTS);
    b.unchecked(REQUESTS);
    let mut g = c.benchmark_group("fetch_1000_local");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    g.bench_function("unchecked", |it| it.iter(|| b.unchecked(REQUESTS)));
    g.bench_function("checked", |it| it.iter(|| b.checked(REQUESTS)));
    g.finish();
}

fn ratio_table() {
    let b = Bench::new();
    b.checked(CHUNK);
    b.unchecked(CHUNK);
    let time = |f: &dyn Fn()| {
        let t = Instant::now();
        f();
        t.elapsed().as_secs_f64()
    };
    // Chunks of CHUNK requests, alternating variant and order, so that
    // another process's burst lands on both; noise only ever adds time, so
    // medians and low percentiles of the chunk times are what compare.
    let (mut base, mut checked) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS * REQUESTS / CHUNK {
        if i % 2 == 0 {
            base.push(time(&|| b.unchecked(CHUNK)));
            checked.push(time(&|| b.checked(CHUNK)));
        } else {
            checked.push(time(&|| b.checked(CHUNK)));
            base.push(time(&|| b.unchecked(CHUNK)));
        }
    }
    base.sort_by(f64::total_cmp);
    checked.sort_by(f64::total_cmp);
    let at = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    let us = |t: f64| t * 1e6 / CHUNK as f64;
    println!();
    println!(
        "fetch overhead: {ROUNDS} x {REQUESTS} requests per variant, in interleaved chunks of {CHUNK}:"
    );
    for (name, q) in [("p10", 0.1), ("median", 0.5)] {
        println!(
            "  {name:>6}: unchecked {:.1} µs/request, checked {:.1} µs/request, \
             checked / unchecked {:.3} (target <= 1.10)",
            us(at(&base, q)),
            us(at(&checked, q)),
            at(&checked, q) / at(&base, q)
        );
    }
    // The median line again, tab-separated, for `cargo xtask bench`.
    println!(
        "RATIO\tsandgate-fetch\tfetch_1000_local/checked\t{:.1}\t{:.1}\t{:.4}\tunchecked",
        us(at(&checked, 0.5)) * 1e3,
        us(at(&base, 0.5)) * 1e3,
        at(&checked, 0.5) / at(&base, 0.5)
    );
    println!(
        "  connections opened: {} for {} requests",
        CONNECTIONS.load(std::sync::atomic::Ordering::Relaxed),
        2 * (ROUNDS * REQUESTS + CHUNK)
    );
    println!(
        "  per {REQUESTS} requests (median): unchecked {:.1} ms, checked {:.1} ms",
        at(&base, 0.5) * 1e3 * (REQUESTS / CHUNK) as f64,
        at(&checked, 0.5) * 1e3 * (REQUESTS / CHUNK) as f64
    );
}

criterion_group!(benches, fetch_1000);

/// Pins the process (so every thread it starts: the client and the
/// server's) to the CPU it runs on. Across two CPUs each request wakes the
/// server's thread on the other one; on an otherwise idle VM that wake-up
/// took about 70 µs and landed on whichever variant's server thread the
/// scheduler had placed there (4× one way, parity the other), which says
/// nothing of the checks. `cargo xtask bench-tool` pins for the same reason.
fn pin_to_this_cpu() {
    // SAFETY: sched_getcpu takes no arguments; the set is plain data,
    // initialised by CPU_ZERO and CPU_SET before sched_setaffinity reads it.
    unsafe {
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 {
            println!("fetch bench: pinned to CPU {cpu} (client and server threads)");
        }
    }
}

fn main() {
    pin_to_this_cpu();
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo test --all-targets` runs this binary once without `--bench`:
    // criterion then runs each function once, and the table is skipped.
    if std::env::args().any(|a| a == "--bench") {
        ratio_table();
    }
}
