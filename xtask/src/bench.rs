//! `cargo xtask bench [--quick] [--only GROUP]`: every benchmark of the
//! project in one go, summed up in one table of ratios against the
//! baselines measured in the same run. `--only` runs one group of rows:
//! `criterion` (steps 1 and 2), `tool`, `python`, `go`, `node` or `mcp`.
//!
//! What it runs, in this order:
//!
//! 1. `cargo build --release -p sandgate-ffi` (libsandgate, for the ffi
//!    bench and the bindings; bench-tool builds `sandgate` itself).
//! 2. Every criterion bench of the workspace in one invocation:
//!    `cargo bench --workspace --bench '*' --no-fail-fast -- --noplot`
//!    (`--quick` adds criterion's `--quick`: each function is measured only
//!    until its time is stable to 5%, at most its configured measurement
//!    time). The benches that use `benches/interleave.rs` print one
//!    `RATIO` line per variant measured interleaved with its reference;
//!    fetch and the executor's CPU-time table print the same kind of line.
//!    The deny-write checks (fileguard) are not interleaved: their figures
//!    come from criterion's `estimates.json` (median), against globset in
//!    the same run but another window.
//! 3. `cargo xtask bench-tool` (requests per second of `sandgate tool`, an
//!    absolute figure against the target of 50,000/s).
//! 4. The bindings' stat benches, each against its language's native
//!    `stat` in the same process: Python (`bindings/python/bench_stat.py`,
//!    with `SANDGATE_LIBRARY` set to the release libsandgate), Go
//!    (`go test -bench '^BenchmarkStat$'` in bindings/go, after installing
//!    the release library in target/lib as `cargo xtask bindings --release`
//!    does) and Node (`bindings/node/bench/stat.js`, after
//!    `npx napi build --platform --release` into `<target>/bench/node`,
//!    loaded through `NAPI_RS_NATIVE_LIBRARY_PATH` so that the binding's
//!    own files are left alone). A missing toolchain or bench is a skipped
//!    row, with the reason.
//! 5. `sandgate mcp` against the reference MCP filesystem server, its own
//!    JSON endpoint and ripgrep (see [`mcp`]).
//!
//! Then it prints one table (area, variant, its time, the reference and
//! its time, the ratio, the target docs/BENCHMARKS.md states where there
//! is one, met or missed) under a description of the machine (CPU, cores, memory, kernel,
//! load average at the start and at the end, rustc, openat2 and Landlock),
//! and writes the same markdown to `<target>/bench/table.md`, with every
//! step's output in `<target>/bench/*.log`.
//!
//! The figures are informational: the task fails only when a step fails,
//! never because a target is missed.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

use crate::bench_tool::{self, thousands};
use crate::{bindings, cargo, step, target_dir, works, workspace_root};

mod mcp;

const USAGE: &str = "usage: cargo xtask bench [--quick] [--only criterion|tool|python|go|node|mcp]";

/// The groups `--only` selects.
const GROUPS: [&str; 6] = ["criterion", "tool", "python", "go", "node", "mcp"];

/// Paths per iteration of the fileguard bench (crates/fileguard/benches).
const FILEGUARD_PATHS: f64 = 10_000.0;

/// The order of the table's areas.
const AREAS: [&str; 13] = [
    "rootfs",
    "sandbox",
    "fileguard",
    "exec",
    "protect",
    "fetch",
    "proxy",
    "tool",
    "C ABI",
    "python",
    "go",
    "node",
    "mcp",
];

/// One line of the table.
struct Row {
    area: String,
    variant: String,
    time: String,
    reference: String,
    ref_time: String,
    ratio: String,
    target: String,
    verdict: String,
}

impl Row {
    fn not_run(area: &str, variant: &str, verdict: String) -> Row {
        Row {
            area: area.into(),
            variant: variant.into(),
            time: "—".into(),
            reference: "—".into(),
            ref_time: "—".into(),
            ratio: "—".into(),
            target: "—".into(),
            verdict,
        }
    }
}

/// A variant timed against a reference (times in ns per call).
struct Pair {
    package: String,
    label: String,
    own_ns: f64,
    ref_ns: f64,
    ratio: f64,
    reference: String,
}

/// What a variant is held to.
enum Target {
    /// ratio at most this.
    Ratio(f64),
    /// at most this many ns more per call than the reference.
    ExtraNs(f64),
    /// at least this many bytes per second, for a call moving `bytes`.
    Rate { bytes: f64, per_second: f64 },
    /// at most this many ns per call, whatever the reference.
    AtMostNs(f64),
}

impl Target {
    fn describe(&self) -> String {
        match self {
            Target::Ratio(r) => format!("≤ {r:.2}"),
            Target::ExtraNs(n) => format!("≤ +{n:.0} ns"),
            Target::Rate { per_second, .. } => format!("≥ {:.0} GB/s", per_second / 1e9),
            Target::AtMostNs(n) => format!("≤ {}", human_ns(*n)),
        }
    }

    fn met(&self, p: &Pair) -> bool {
        match self {
            Target::Ratio(r) => p.ratio <= *r,
            Target::ExtraNs(n) => p.own_ns - p.ref_ns <= *n,
            Target::Rate { bytes, per_second } => bytes / (p.own_ns * 1e-9) >= *per_second,
            Target::AtMostNs(n) => p.own_ns <= *n,
        }
    }
}

/// The targets docs/BENCHMARKS.md states, by package and
/// `group/variant`.
fn target_for(package: &str, label: &str) -> Option<Target> {
    if package == "python" {
        // bindings/python/bench_stat.py
        return (label == "stat/Root.stat").then_some(Target::Ratio(2.0));
    }
    let variant = label.rsplit('/').next().unwrap_or(label);
    if label.starts_with("replace_") && variant.starts_with("root_replace_vs_") {
        // Against the faster of the two durable baselines; the row of the
        // slower one is cleared by `durable_baselines`. The row against a
        // plain create + write + fsync (not durable) has no target.
        return Some(Target::Ratio(1.05));
    }
    if label.starts_with("sandbox_read_100B/") {
        return match variant {
            "sandbox_read" => Some(Target::Ratio(1.05)),
            "sandbox_read_audit" => Some(Target::Ratio(1.10)),
            _ => None,
        };
    }
    // Two threads reading through their sandboxes: at least 1.7× the reads
    // of one thread, so at most 1/1.7 of its time per read.
    if label == "scale_read/two_threads_own" || label == "scale_read/two_threads_shared" {
        return Some(Target::Ratio(0.588));
    }
    match label {
        "exec_true/executor_off" => Some(Target::Ratio(1.10)),
        "exec_true/executor_landlock" => Some(Target::Ratio(1.25)),
        "exec_true/executor_namespaces" => Some(Target::Ratio(2.0)),
        // Against the same executor without the limits.
        "exec_true/executor_limits" | "exec_true/executor_limits_cpu" => Some(Target::Ratio(1.10)),
        "capture_100MB/executor_off" => Some(Target::Rate {
            bytes: 1e8,
            per_second: 1e9,
        }),
        "ffi/sg_root_stat_via_c" => Some(Target::ExtraNs(100.0)),
        "fetch_1000_local/checked" => Some(Target::Ratio(1.10)),
        "download_10MB/proxied" => Some(Target::Ratio(1.15)),
        // Against the opaque tunnel.
        "get_1MB_tls/intercepted" => Some(Target::Ratio(1.30)),
        // The record before a command and the check after it, on 100,000
        // files in 10,000 directories.
        "protect_100k/begin_settle_one_changed" => Some(Target::AtMostNs(20e6)),
        _ => None,
    }
}

fn area_of(package: &str) -> &str {
    match package {
        "sandgate-rootfs" => "rootfs",
        "sandgate" => "sandbox",
        "sandgate-shellexec" => "exec",
        "sandgate-ffi" => "C ABI",
        "sandgate-fetch" => "fetch",
        other => other.strip_prefix("sandgate-").unwrap_or(other),
    }
}

/// `1234.5` ns as `1.23 µs`.
fn human_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

fn pair_row(p: &Pair) -> Row {
    let target = target_for(&p.package, &p.label);
    let mut time = human_ns(p.own_ns);
    let mut ref_time = human_ns(p.ref_ns);
    if let Some(Target::Rate { bytes, .. }) = target {
        time += &format!(" ({:.0} MB/s)", bytes / p.own_ns * 1e3);
        ref_time += &format!(" ({:.0} MB/s)", bytes / p.ref_ns * 1e3);
    }
    Row {
        area: area_of(&p.package).to_owned(),
        variant: p.label.clone(),
        time,
        reference: p.reference.clone(),
        ref_time,
        ratio: format!("{:.3}", p.ratio),
        target: target.as_ref().map_or("—".into(), Target::describe),
        verdict: match &target {
            None => "—".into(),
            Some(t) if t.met(p) => "met".into(),
            Some(_) => "MISSED".into(),
        },
    }
}

/// `Root::replace` is held to the faster of its two durable baselines (by
/// hand, and the atomic-write-file crate), each interleaved with it in its
/// own window: in each `replace_*` group, the row against the slower
/// baseline keeps its figures but loses the target.
/// `pairs` holds each pair with the index of its row.
fn durable_baselines(pairs: &[(Pair, usize)], rows: &mut [Row]) {
    // The `replace_*` group of a row against a durable baseline.
    let group = |p: &Pair| {
        let (g, v) = p.label.rsplit_once('/')?;
        (g.starts_with("replace_") && v.starts_with("root_replace_vs_")).then_some(g.to_owned())
    };
    for (p, i) in pairs {
        let Some(mine) = group(p) else {
            continue;
        };
        let slower = pairs
            .iter()
            .any(|(q, _)| group(q).as_ref() == Some(&mine) && q.ref_ns < p.ref_ns);
        if slower {
            rows[*i].target = "— (slower baseline)".into();
            rows[*i].verdict = "—".into();
        }
    }
}

/// Parses `RATIO <package> <label> <own ns> <ref ns> <ratio> <reference>`.
fn parse_ratio(line: &str) -> Option<Pair> {
    let f: Vec<&str> = line.strip_prefix("RATIO\t")?.split('\t').collect();
    let [package, label, own, refd, ratio, reference] = f[..] else {
        return None;
    };
    Some(Pair {
        package: package.into(),
        label: label.into(),
        own_ns: own.parse().ok()?,
        ref_ns: refd.parse().ok()?,
        ratio: ratio.parse().ok()?,
        reference: reference.into(),
    })
}

/// Where this task writes its table and logs.
fn out_dir() -> PathBuf {
    target_dir().join("bench")
}

/// Runs `cmd`, echoing its standard output line by line as it comes and
/// returning it whole (standard error is inherited); both go to
/// `<target>/bench/<log>.log` too, with the status.
fn run_capture(name: &str, log: &str, cmd: &mut Command) -> Result<(bool, String), String> {
    eprintln!("==> {name}: {cmd:?}");
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("{name}: cannot run {:?}: {e}", cmd.get_program()))?;
    let mut text = String::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line.map_err(|e| format!("{name}: reading its output: {e}"))?;
            println!("{line}");
            text.push_str(&line);
            text.push('\n');
        }
    }
    let status = child.wait().map_err(|e| format!("{name}: {e}"))?;
    eprintln!(
        "<== {name}: {status} in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    let path = out_dir().join(format!("{log}.log"));
    let _ = fs::write(&path, format!("$ {cmd:?}\n{text}{status}\n"));
    Ok((status.success(), text))
}

/// The first line of `program args…`'s standard output, if it runs.
fn first_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(|l| l.trim().to_owned())
}

fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// What the header says about the machine, known before the benches run.
struct Machine {
    cpu: String,
    cores: String,
    memory: String,
    kernel: String,
    rustc: String,
    load_start: String,
    lsm_landlock: Option<bool>,
    date: String,
}

fn machine() -> Machine {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map_or("unknown".into(), |(_, v)| v.trim().to_owned());
    let processors = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let usable = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cores = if processors == usable || processors == 0 {
        format!("{usable}")
    } else {
        format!("{processors} ({usable} usable by this process)")
    };
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = |key: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
    };
    let gib = |k: f64| k / (1024.0 * 1024.0);
    let memory = match (kib("MemTotal"), kib("MemAvailable")) {
        (Some(t), Some(a)) => format!("{:.1} GiB ({:.1} GiB available)", gib(t), gib(a)),
        (Some(t), None) => format!("{:.1} GiB", gib(t)),
        _ => "unknown".into(),
    };
    let kernel = first_line("uname", &["-r"]).unwrap_or_else(|| "unknown".into());
    let rustc = first_line("rustc", &["--version"]).unwrap_or_else(|| "unknown".into());
    let lsm_landlock = fs::read_to_string("/sys/kernel/security/lsm")
        .ok()
        .map(|s| s.split(',').any(|m| m.trim() == "landlock"));
    let date = first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| {
        let secs = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("{secs} s since the epoch")
    });
    Machine {
        cpu,
        cores,
        memory,
        kernel,
        rustc,
        load_start: load_average(),
        lsm_landlock,
        date,
    }
}

struct Options {
    quick: bool,
    /// The one group to run (`--only`), or every group.
    only: Option<String>,
}

impl Options {
    /// Whether the group runs.
    fn runs(&self, group: &str) -> bool {
        self.only.as_deref().is_none_or(|g| g == group)
    }
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        only: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--only" => {
                let g = it.next().ok_or(USAGE)?;
                if !GROUPS.contains(&g.as_str()) {
                    return Err(format!("--only: unknown group `{g}` ({USAGE})"));
                }
                o.only = Some(g.clone());
            }
            _ => return Err(USAGE.into()),
        }
    }
    Ok(o)
}

/// Everything collected along the way.
#[derive(Default)]
struct Results {
    rows: Vec<Row>,
    notes: Vec<String>,
    failed: Vec<String>,
    openat2: Option<String>,
    landlock: Option<String>,
}

impl Results {
    fn fail(&mut self, area: &str, variant: &str, why: String) {
        self.rows
            .push(Row::not_run(area, variant, format!("FAILED: {why}")));
        self.failed.push(format!("{area}: {why}"));
    }

    fn skip(&mut self, area: &str, variant: &str, why: &str) {
        self.rows
            .push(Row::not_run(area, variant, format!("skipped: {why}")));
        self.notes.push(format!("{area}: skipped: {why}"));
    }
}

/// Runs the task (see the module documentation).
pub fn run(args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    let start = Instant::now();
    let mut command = String::from("cargo xtask bench");
    if o.quick {
        command += " --quick";
    }
    if let Some(g) = &o.only {
        command += &format!(" --only {g}");
    }
    let command = command.as_str();
    fs::create_dir_all(out_dir()).map_err(|e| format!("{}: {e}", out_dir().display()))?;
    let m = machine();
    eprintln!("{command}: load average at the start {}", m.load_start);

    if o.runs("criterion") || o.runs("python") {
        step(
            "build",
            &cargo(),
            &["build", "--release", "-p", "sandgate-ffi"],
        )?;
    }

    let mut r = Results::default();
    if o.runs("criterion") {
        install_bwrap();
        let benches_start = SystemTime::now();
        criterion_benches(&o, &mut r)?;
        fileguard(&mut r, benches_start);
    }
    if o.runs("tool") {
        tool(&o, &mut r);
    }
    if o.runs("python") {
        python(&o, &mut r);
    }
    if o.runs("go") {
        go(&o, &mut r);
    }
    if o.runs("node") {
        node(&o, &mut r);
    }
    if o.runs("mcp") {
        mcp::run(&o, &mut r);
    }

    r.rows.sort_by_key(|row| {
        AREAS
            .iter()
            .position(|a| *a == row.area)
            .unwrap_or(AREAS.len())
    });
    let load_end = load_average();
    let elapsed = start.elapsed().as_secs_f64();
    let md = render(command, &m, &load_end, elapsed, &r);
    println!("\n{md}");
    let path = out_dir().join("table.md");
    fs::write(&path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("table written to {}", path.display());
    if r.failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", r.failed.join("; ")))
    }
}

/// Installs bubblewrap from the distribution's packages for the exec
/// bench's information row (`bwrap --unshare-all`), where it is missing and
/// this process may: as root with apt-get. Otherwise the row says skipped.
fn install_bwrap() {
    if ["/usr/bin/bwrap", "/bin/bwrap"]
        .iter()
        .any(|p| Path::new(p).exists())
    {
        return;
    }
    if !crate::install_test::is_root() || !works("apt-get", &["--version"]) {
        eprintln!("bubblewrap is missing and cannot be installed here: its row will be skipped");
        return;
    }
    let mut cmd = Command::new("apt-get");
    cmd.args(["install", "-y", "--no-install-recommends", "bubblewrap"])
        .env("DEBIAN_FRONTEND", "noninteractive");
    match run_capture("apt-get install bubblewrap", "apt-bwrap", &mut cmd) {
        Ok((true, _)) => eprintln!("installed bubblewrap for the exec bench's bwrap row"),
        _ => eprintln!("bubblewrap could not be installed: its row will be skipped"),
    }
}

/// Every criterion bench of the workspace, in one `cargo bench`.
fn criterion_benches(o: &Options, r: &mut Results) -> Result<(), String> {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(workspace_root()).args([
        "bench",
        "--workspace",
        "--bench",
        "*",
        "--no-fail-fast",
        "--",
        "--noplot",
    ]);
    if o.quick {
        cmd.arg("--quick");
    }
    let (ok, out) = run_capture("criterion benches", "criterion", &mut cmd)?;
    if !ok {
        r.failed
            .push("cargo bench failed (see its output above)".into());
    }
    let mut seen = Vec::new();
    let mut pairs = Vec::new();
    for line in out.lines() {
        if let Some(p) = parse_ratio(line) {
            seen.push(p.package.clone());
            r.rows.push(pair_row(&p));
            pairs.push((p, r.rows.len() - 1));
        } else if let Some(v) = line.strip_prefix("INFO\topenat2\t") {
            r.openat2 = Some(if v == "true" {
                "available".into()
            } else {
                "not available (the walk resolver is used)".into()
            });
        } else if let Some(v) = line.strip_prefix("executor_landlock: ") {
            // `Landlock fs=true net=true scoped=true abi=Some(7) (kernel Some(7))`
            let v = v.trim();
            r.landlock = Some(format!(
                "{} (what the executor enforces in best-effort mode)",
                v.strip_prefix("Landlock ").unwrap_or(v)
            ));
        } else if let Some(v) = line.trim().strip_prefix("VmHWM delta ") {
            // `VmHWM delta 8.1 MiB; target ≤ cap + 16 MiB = 24.0 MiB: met`
            let grew = v.split_whitespace().next().unwrap_or("?");
            let limit = v
                .split("= ")
                .nth(1)
                .and_then(|s| s.split(':').next())
                .unwrap_or("?");
            r.rows.push(Row {
                area: "exec".into(),
                variant: "flood 1 GB, 8 MiB cap: peak RSS growth".into(),
                time: format!("{grew} MiB"),
                reference: "—".into(),
                ref_time: "—".into(),
                ratio: "—".into(),
                target: format!("≤ {limit}"),
                verdict: if v.ends_with(": met") {
                    "met".into()
                } else {
                    "MISSED".into()
                },
            });
        }
    }
    durable_baselines(&pairs, &mut r.rows);
    for (package, bench) in [
        ("sandgate-rootfs", "rootfs"),
        ("sandgate", "sandbox"),
        ("sandgate-shellexec", "exec"),
        ("sandgate-ffi", "ffi"),
        ("sandgate-fetch", "fetch"),
        ("sandgate-proxy", "proxy"),
        ("sandgate-protect", "protect"),
    ] {
        if !seen.iter().any(|s| s == package) {
            r.fail(
                area_of(package),
                bench,
                format!("the `{bench}` bench printed no ratios"),
            );
        }
    }
    Ok(())
}

/// The median of a criterion `estimates.json`, in ns, if written since
/// `since`.
fn criterion_median(id: &str, since: SystemTime) -> Option<f64> {
    let path = target_dir()
        .join("criterion")
        .join(id)
        .join("new/estimates.json");
    let fresh = fs::metadata(&path).ok()?.modified().ok()? >= since;
    if !fresh {
        return None;
    }
    let text = fs::read_to_string(&path).ok()?;
    let rest = &text[text.find("\"median\"")?..];
    let rest = &rest[rest.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = rest.find([',', '}'])?;
    rest[..end].trim().parse().ok()
}

/// The deny-write checks, from criterion's estimates (not interleaved).
fn fileguard(r: &mut Results, since: SystemTime) {
    let reference = "per_path/baseline_globset_is_match_raw";
    r.notes.push(
        "fileguard: criterion's median time per iteration of 10,000 paths, divided by \
         10,000; the reference ran in the same run but its own time window"
            .into(),
    );
    let Some(base) = criterion_median(reference, since) else {
        r.fail(
            "fileguard",
            "per_path",
            "no fresh criterion estimates".into(),
        );
        return;
    };
    for v in [
        "fileguard_check_write",
        "fileguard_check_rename_or_delete",
        "fileguard_check_write_spelled_and_resolved",
        "fileguard_check_write_prepared_candidate",
        "fold_only",
    ] {
        let id = format!("per_path/{v}");
        match criterion_median(&id, since) {
            Some(own) => r.rows.push(Row {
                area: "fileguard".into(),
                variant: format!("{id} (per path)"),
                time: human_ns(own / FILEGUARD_PATHS),
                reference: "globset is_match (raw)".into(),
                ref_time: human_ns(base / FILEGUARD_PATHS),
                ratio: format!("{:.3}", own / base),
                target: "—".into(),
                verdict: "—".into(),
            }),
            None => r.fail("fileguard", &id, "no fresh criterion estimate".into()),
        }
    }
}

/// Requests per second of `sandgate tool`.
fn tool(o: &Options, r: &mut Results) {
    let args: Vec<String> = if o.quick {
        ["100000", "--runs", "1"].map(String::from).to_vec()
    } else {
        ["200000", "--runs", "3"].map(String::from).to_vec()
    };
    eprintln!("==> bench-tool {}", args.join(" "));
    match bench_tool::run_summary(&args) {
        Ok(s) => {
            let core = if s.pinned { "1 core" } else { "not pinned" };
            let mut add = |what: &str, rps: f64| {
                r.rows.push(Row {
                    area: "tool".into(),
                    variant: format!("sandgate tool, {what} ({core})"),
                    time: format!("{} req/s", thousands(rps)),
                    reference: "—".into(),
                    ref_time: "—".into(),
                    ratio: "—".into(),
                    target: "≥ 50,000 req/s".into(),
                    verdict: if rps >= 50_000.0 { "met" } else { "MISSED" }.into(),
                });
            };
            add("requests per second of wall time", s.wall_rps);
            if let Some(cpu) = s.cpu_rps {
                add("requests per CPU-second", cpu);
            }
            r.notes.push(format!(
                "tool: `cargo xtask bench-tool {} --runs {}`: {} small requests (90% read, \
                 10% stat/list), median of {} runs; an absolute figure (no baseline)",
                s.requests,
                s.runs,
                thousands(s.requests as f64),
                s.runs
            ));
        }
        Err(e) => r.fail("tool", "bench-tool", e),
    }
}

/// `  <name>   <n> ns` lines of bench_stat.py.
fn python_ns(out: &str, name: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        let rest = l.trim().strip_prefix(name)?;
        rest.trim().strip_suffix("ns")?.trim().parse().ok()
    })
}

/// The Python binding: `Root.stat` against `os.stat`.
fn python(o: &Options, r: &mut Results) {
    if !works("python3", &["--version"]) {
        return r.skip("python", "stat", "no python3");
    }
    let script = workspace_root().join("bindings/python/bench_stat.py");
    if !script.is_file() {
        return r.skip("python", "stat", "no bindings/python/bench_stat.py");
    }
    let lib = target_dir().join("release/libsandgate.so");
    let (n, repeats) = if o.quick {
        ("30000", "5")
    } else {
        ("100000", "7")
    };
    let mut cmd = Command::new("python3");
    cmd.current_dir(workspace_root())
        .env("SANDGATE_LIBRARY", &lib)
        .arg(&script)
        .args([n, repeats]);
    let out = match run_capture("python stat", "python", &mut cmd) {
        Ok((true, out)) => out,
        Ok((false, _)) => return r.fail("python", "stat", "bench_stat.py failed".into()),
        Err(e) => return r.fail("python", "stat", e),
    };
    if let Some(v) = first_line("python3", &["--version"]) {
        r.notes.push(format!("python: {v}, release libsandgate"));
    }
    let base = python_ns(&out, "os.stat(abs path)");
    for (name, label) in [
        ("Root.stat(rel)", "stat/Root.stat"),
        ("raw sg_root_stat", "stat/raw sg_root_stat (ctypes)"),
    ] {
        match (python_ns(&out, name), base) {
            (Some(own), Some(base)) => r.rows.push(pair_row(&Pair {
                package: "python".into(),
                label: label.into(),
                own_ns: own,
                ref_ns: base,
                ratio: own / base,
                reference: "os.stat(abs path)".into(),
            })),
            _ => r.fail("python", label, "cannot read bench_stat.py's output".into()),
        }
    }
}

/// The Go binding: `BenchmarkStat`'s sub-benchmarks against `os.Stat`.
fn go(o: &Options, r: &mut Results) {
    let dir = workspace_root().join("bindings/go");
    let has_bench = fs::read_dir(&dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name().to_string_lossy().ends_with("_test.go")
                && fs::read_to_string(e.path()).is_ok_and(|t| t.contains("func BenchmarkStat("))
        })
    });
    if !has_bench {
        return r.skip("go", "stat", "no BenchmarkStat in bindings/go");
    }
    if !works("go", &["version"]) {
        return r.skip("go", "stat", "no go toolchain");
    }
    // cgo links target/lib/libsandgate.a (bindings/go/cgo.go).
    if let Err(e) = bindings::run(&["--release".to_owned()]) {
        return r.fail("go", "stat", e);
    }
    let (count, benchtime) = if o.quick {
        ("3", "50000x")
    } else {
        ("7", "100000x")
    };
    let mut cmd = Command::new("go");
    cmd.current_dir(&dir).args([
        "test",
        "-run",
        "^$",
        "-bench",
        "^BenchmarkStat$",
        "-benchtime",
        benchtime,
        "-count",
        count,
        ".",
    ]);
    let out = match run_capture("go stat", "go", &mut cmd) {
        Ok((true, out)) => out,
        Ok((false, _)) => return r.fail("go", "stat", "go test -bench failed".into()),
        Err(e) => return r.fail("go", "stat", e),
    };
    if let Some(v) = first_line("go", &["version"]) {
        r.notes.push(format!(
            "go: {v}; sub-benchmarks run one after the other, {count} rounds ({benchtime} each), medians"
        ));
    }
    // `BenchmarkStat/os.Stat-2   	  100000	      2345 ns/op`
    let mut times: Vec<(String, Vec<f64>)> = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(ns)) = (
            f.first().and_then(|n| n.strip_prefix("BenchmarkStat/")),
            f.iter()
                .position(|w| *w == "ns/op")
                .and_then(|i| f.get(i.checked_sub(1)?)?.parse::<f64>().ok()),
        ) else {
            continue;
        };
        let name = match name.rsplit_once('-') {
            Some((n, procs)) if procs.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => name,
        };
        match times.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => v.push(ns),
            None => times.push((name.to_owned(), vec![ns])),
        }
    }
    let med = |name: &str| {
        times
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| median(v.clone()))
    };
    let Some(base) = med("os.Stat") else {
        return r.fail("go", "stat", "no os.Stat figure in go test's output".into());
    };
    for name in [
        "sandgate.Root.Stat/auto",
        "sandgate.Sandbox.Stat",
        "os.Root.Stat",
    ] {
        match med(name) {
            Some(own) => r.rows.push(pair_row(&Pair {
                package: "go".into(),
                label: format!("stat/{name}"),
                own_ns: own,
                ref_ns: base,
                ratio: own / base,
                reference: "os.Stat".into(),
            })),
            None => r.skip("go", name, "not in go test's output"),
        }
    }
}

/// The Node binding: `Root#stat` against `fs.statSync`.
fn node(o: &Options, r: &mut Results) {
    if !works("node", &["--version"]) {
        return r.skip("node", "stat", "no node");
    }
    let dir = workspace_root().join("bindings/node");
    if !dir.join("node_modules/.bin/napi").exists() {
        if !works("npm", &["--version"]) {
            return r.skip("node", "stat", "no npm to install the napi CLI");
        }
        let mut cmd = Command::new("npm");
        cmd.current_dir(&dir)
            .args(["ci", "--no-audit", "--no-fund"]);
        if !matches!(run_capture("npm ci", "npm-ci", &mut cmd), Ok((true, _))) {
            return r.fail("node", "stat", "npm ci failed".into());
        }
    }
    // Built apart from bindings/node's own files, loaded by its index.js
    // through NAPI_RS_NATIVE_LIBRARY_PATH.
    let addon_dir = out_dir().join("node");
    let _ = fs::create_dir_all(&addon_dir);
    let mut cmd = Command::new("npx");
    cmd.current_dir(&dir)
        .args(["napi", "build", "--platform", "--release", "--no-js"])
        .arg("--output-dir")
        .arg(&addon_dir);
    if !matches!(
        run_capture("napi build", "napi-build", &mut cmd),
        Ok((true, _))
    ) {
        return r.fail("node", "stat", "napi build failed".into());
    }
    let addon = fs::read_dir(&addon_dir).ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "node"))
    });
    let Some(addon) = addon else {
        return r.fail("node", "stat", "napi build made no .node file".into());
    };
    let (n, rounds) = if o.quick {
        ("30000", "5")
    } else {
        ("100000", "7")
    };
    let mut cmd = Command::new("node");
    cmd.current_dir(&dir)
        .env("NAPI_RS_NATIVE_LIBRARY_PATH", &addon)
        .args(["bench/stat.js", n, rounds]);
    let out = match run_capture("node stat", "node", &mut cmd) {
        Ok((true, out)) => out,
        Ok((false, _)) => return r.fail("node", "stat", "bench/stat.js failed".into()),
        Err(e) => return r.fail("node", "stat", e),
    };
    if let Some(v) = first_line("node", &["--version"]) {
        r.notes.push(format!(
            "node: {v}, release addon built into <target>/bench/node, rounds interleaved"
        ));
    }
    match out.lines().find_map(parse_ratio) {
        Some(p) => r.rows.push(pair_row(&p)),
        None => r.fail("node", "stat", "no RATIO line from bench/stat.js".into()),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The header and the table, in markdown.
fn render(command: &str, m: &Machine, load_end: &str, elapsed: f64, r: &Results) -> String {
    let mut s = String::new();
    let landlock = match (&r.landlock, m.lsm_landlock) {
        (Some(l), _) => l.clone(),
        (None, Some(true)) => "in the active LSMs".into(),
        (None, Some(false)) => "not in the active LSMs".into(),
        (None, None) => "unknown".into(),
    };
    let lines = [
        format!(
            "`{command}`, started {}, {:.0} s in all (builds included).",
            m.date, elapsed
        ),
        String::new(),
        format!("- CPU: {}, {} cores", m.cpu, m.cores),
        format!("- memory: {}", m.memory),
        format!("- kernel: {}", m.kernel),
        format!(
            "- load average (1, 5, 15 min): {} at the start, {load_end} at the end",
            m.load_start
        ),
        format!("- {}", m.rustc),
        format!(
            "- openat2: {}",
            r.openat2
                .as_deref()
                .unwrap_or("unknown (the rootfs bench did not say)")
        ),
        format!("- Landlock: {landlock}"),
        String::new(),
    ];
    for l in lines {
        s.push_str(&l);
        s.push('\n');
    }
    let head = [
        "area",
        "variant",
        "time",
        "reference",
        "ref. time",
        "ratio",
        "target",
        "",
    ];
    let cells: Vec<[&str; 8]> = r
        .rows
        .iter()
        .map(|x| {
            [
                x.area.as_str(),
                x.variant.as_str(),
                x.time.as_str(),
                x.reference.as_str(),
                x.ref_time.as_str(),
                x.ratio.as_str(),
                x.target.as_str(),
                x.verdict.as_str(),
            ]
        })
        .collect();
    let mut width = head.map(|h| h.chars().count());
    for row in &cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |row: &[&str; 8]| {
        let mut l = String::from("|");
        for (i, (c, w)) in row.iter().zip(width).enumerate() {
            let pad = w - c.chars().count();
            // Figures to the right, words to the left.
            if [2, 4, 5].contains(&i) {
                l += &format!(" {}{c} |", " ".repeat(pad));
            } else {
                l += &format!(" {c}{} |", " ".repeat(pad));
            }
        }
        l + "\n"
    };
    s += &line(&head);
    let mut rule = String::from("|");
    for (i, w) in width.iter().enumerate() {
        let dashes = "-".repeat(*w);
        rule += &if [2, 4, 5].contains(&i) {
            format!(" {}: |", &dashes[1..])
        } else {
            format!(" {dashes} |")
        };
    }
    s += &rule;
    s.push('\n');
    for row in &cells {
        s += &line(row);
    }
    s.push('\n');
    s += "Ratios are variant / reference measured in the same run. The Rust benches \
          (except fileguard) interleave each variant with its reference in the same \
          time window (median over samples), Python and Node alternate them by \
          rounds, Go's sub-benchmarks run one after the other. `met`/`MISSED` \
          compare with the target; `—`: no target stated.\n";
    for n in &r.notes {
        s += &format!("\n- {n}");
    }
    if !r.notes.is_empty() {
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_lines() {
        let p = parse_ratio(
            "RATIO\tsandgate-rootfs\tread_1MiB/root_walk\t100.5\t90.0\t1.1167\tstd_fs_read",
        )
        .unwrap();
        assert_eq!(
            (p.package.as_str(), p.label.as_str()),
            ("sandgate-rootfs", "read_1MiB/root_walk")
        );
        assert_eq!((p.own_ns, p.ref_ns, p.ratio), (100.5, 90.0, 1.1167));
        assert!(parse_ratio("RATIO\tx\ty").is_none());
        let row = pair_row(&Pair {
            package: "sandgate".into(),
            label: "sandbox_read_100B/depth1/sandbox_read".into(),
            own_ns: 1060.0,
            ref_ns: 1000.0,
            ratio: 1.06,
            reference: "std_fs_read".into(),
        });
        assert_eq!(
            (row.area.as_str(), row.verdict.as_str()),
            ("sandbox", "MISSED")
        );
        assert_eq!(human_ns(1234.0), "1.23 µs");
    }

    #[test]
    fn replace_is_held_to_the_faster_durable_baseline() {
        let pair = |variant: &str, ref_ns: f64, reference: &str| Pair {
            package: "sandgate-rootfs".into(),
            label: format!("replace_4KiB/{variant}"),
            own_ns: 1000.0,
            ref_ns,
            ratio: 1000.0 / ref_ns,
            reference: reference.into(),
        };
        let pairs = vec![
            (pair("root_replace", 600.0, "plain_create_write_fsync"), 0),
            (
                pair("root_replace_vs_durable_by_hand", 990.0, "durable_by_hand"),
                1,
            ),
            (
                pair(
                    "root_replace_vs_atomic_write_file",
                    1100.0,
                    "atomic_write_file",
                ),
                2,
            ),
        ];
        let mut rows: Vec<Row> = pairs.iter().map(|(p, _)| pair_row(p)).collect();
        durable_baselines(&pairs, &mut rows);
        let got: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.target.as_str(), r.verdict.as_str()))
            .collect();
        assert_eq!(
            got,
            [("—", "—"), ("≤ 1.05", "met"), ("— (slower baseline)", "—")]
        );
    }

    #[test]
    fn python_figures() {
        let out =
            "  os.stat(abs path)               812 ns\n  Root.stat(rel)                 1650 ns\n";
        assert_eq!(python_ns(out, "os.stat(abs path)"), Some(812.0));
        assert_eq!(python_ns(out, "Root.stat(rel)"), Some(1650.0));
    }
}
