//! `cargo xtask bench-tool [N] [--runs R] [--cpu C] [--keep]`: throughput of
//! the JSON tool endpoint, `sandgate tool`, on small read requests.
//!
//! Target (issue): `sandgate tool` sustains at least 50,000 small read
//! requests per second on one core, measured with a generated session file
//! and reported with the command.
//!
//! What it does:
//!
//! 1. Builds the binary: `cargo build --release -p sandgate-cli` (in the
//!    workspace's target directory, or `$CARGO_TARGET_DIR` when set).
//! 2. Creates a temporary directory holding `policy.toml`
//!    (`[fs] read_roots = ["ws"]`, `write_root = "ws"`, nothing else), a
//!    workspace `ws/` of four small text files (100 to 300 bytes, at depths
//!    1 to 3) and `session.jsonl`: `N` requests (default 200,000), one per
//!    line. Of every 20 requests, 18 are whole-file `read`s cycling over the
//!    four files, one is a `stat` and one is a `list` (of `.` or `src`):
//!    90% reads, 10% stat/list.
//! 3. Runs, `R` times (default 3), in that directory:
//!    `taskset -c C /usr/bin/time -f '%U %S %e %M' -o time.txt
//!    target/release/sandgate tool --policy policy.toml
//!    <session.jsonl >answers.jsonl`. After each run (outside the timing)
//!    this task counts the answer lines and checks that every one is
//!    `"ok":true` (any other answer fails the task). The answers go to a
//!    file rather than a pipe so that this task, a debug build, can never
//!    be the bottleneck. `taskset` pins the server to CPU `C` (default 0:
//!    one core) when it is installed; GNU `/usr/bin/time` reports the
//!    child's user and system CPU time and peak RSS when it is installed
//!    (std has no `getrusage`, and this task stays std-only). Without
//!    either, the output says so and the figures are wall-clock only.
//! 4. Prints, per run and as the median over runs, requests per second of
//!    wall time (spawn to exit, process start and policy load included;
//!    a run over an empty session is timed too, to show that fixed cost),
//!    and requests per CPU-second (user + system) when known, each against
//!    the 50,000/s target. The CPU figure is the capacity of one core and
//!    the more robust of the two: the wall figure also counts time the
//!    pinned server spent waiting for its core while other jobs ran on it,
//!    which the output points out when it is over a third of the wall
//!    time. It prints the exact command it ran, and removes the temporary
//!    directory unless `--keep` is given (then the command can be re-run
//!    by hand).
//!
//! The figure is informational: the task fails only if the build fails, the
//! server fails or an answer is not `ok`, never because the machine is slow.
//! These machines are noisy (2 vCPUs, other jobs running): compare runs made
//! together, and prefer the median.

use std::env;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{target_dir, works};

/// Requests per second the issue asks for.
const TARGET_RPS: f64 = 50_000.0;
/// Default number of requests in the session.
const DEFAULT_REQUESTS: u64 = 200_000;
/// Default number of timed runs.
const DEFAULT_RUNS: u32 = 3;
/// GNU time's format: user s, system s, elapsed s, max RSS KiB.
const TIME_FORMAT: &str = "%U %S %e %M";
/// Least child CPU time (GNU time counts in 10 ms steps) worth a CPU figure.
const MIN_CPU_SECONDS: f64 = 0.5;

/// The files of the generated workspace: name and size in bytes.
const FILES: [(&str, usize); 4] = [
    ("README.md", 300),
    ("notes.txt", 100),
    ("src/main.rs", 200),
    ("src/util/strings.rs", 150),
];
/// Where the server's answers go (in the temporary directory).
const ANSWERS: &str = "answers.jsonl";
/// The directories `list` requests name.
const LIST_DIRS: [&str; 2] = [".", "src"];

struct Options {
    requests: u64,
    runs: u32,
    cpu: u32,
    keep: bool,
}

const USAGE: &str = "usage: cargo xtask bench-tool [N] [--runs R] [--cpu C] [--keep]";

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        requests: DEFAULT_REQUESTS,
        runs: DEFAULT_RUNS,
        cpu: 0,
        keep: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--keep" => o.keep = true,
            "--runs" => {
                let v = it.next().ok_or("--runs needs a number")?;
                o.runs = v
                    .parse()
                    .ok()
                    .filter(|&r| r > 0)
                    .ok_or_else(|| format!("--runs: `{v}` is not a positive number"))?;
            }
            "--cpu" => {
                let v = it.next().ok_or("--cpu needs a CPU number")?;
                o.cpu = v
                    .parse()
                    .map_err(|_| format!("--cpu: `{v}` is not a CPU number"))?;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            n => {
                o.requests = n
                    .replace('_', "")
                    .parse()
                    .map_err(|_| format!("`{n}` is not a request count ({USAGE})"))?
            }
        }
    }
    Ok(o)
}

/// Quotes a word for a POSIX shell when it needs it.
fn sh(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+%@".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Writes the policy, the workspace and the session; returns the number of
/// (read, stat, list) requests.
fn generate(dir: &Path, n: u64) -> Result<(u64, u64, u64), String> {
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let ws = dir.join("ws");
    fs::create_dir_all(ws.join("src/util")).map_err(|e| io("creating the workspace", e))?;
    fs::write(
        dir.join("policy.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n",
    )
    .map_err(|e| io("writing policy.toml", e))?;
    for (name, size) in FILES {
        let line = format!("// {name}: a small text file for the tool benchmark.\n");
        let text: String = line.chars().cycle().take(size).collect();
        fs::write(ws.join(name), text).map_err(|e| io(name, e))?;
    }
    let file = File::create(dir.join("session.jsonl")).map_err(|e| io("session.jsonl", e))?;
    let mut out = BufWriter::new(file);
    let (mut reads, mut stats, mut lists) = (0, 0, 0);
    for i in 0..n {
        let line = match i % 20 {
            0 => {
                stats += 1;
                let (name, _) = FILES[(i / 20) as usize % FILES.len()];
                format!("{{\"op\":\"stat\",\"path\":\"{name}\"}}\n")
            }
            10 => {
                lists += 1;
                let d = LIST_DIRS[(i / 20) as usize % LIST_DIRS.len()];
                format!("{{\"op\":\"list\",\"path\":\"{d}\"}}\n")
            }
            _ => {
                reads += 1;
                let (name, _) = FILES[i as usize % FILES.len()];
                format!("{{\"op\":\"read\",\"path\":\"{name}\"}}\n")
            }
        };
        out.write_all(line.as_bytes())
            .map_err(|e| io("writing session.jsonl", e))?;
    }
    out.flush().map_err(|e| io("writing session.jsonl", e))?;
    Ok((reads, stats, lists))
}

/// The child's CPU times and peak RSS, as GNU time reports them.
struct Usage {
    user: f64,
    sys: f64,
    max_rss_kib: u64,
}

/// One run of the server over `session`.
struct Run {
    wall: Duration,
    answers: u64,
    usage: Option<Usage>,
}

/// How the server is launched.
struct Launch {
    /// The whole command line, program first.
    argv: Vec<String>,
    /// Where GNU time writes its figures, if it is used.
    time_file: Option<PathBuf>,
}

fn run_once(launch: &Launch, session: &Path, dir: &Path) -> Result<Run, String> {
    if let Some(t) = &launch.time_file {
        let _ = fs::remove_file(t);
    }
    let stdin = File::open(session).map_err(|e| format!("{}: {e}", session.display()))?;
    let answers_path = dir.join(ANSWERS);
    let stdout =
        File::create(&answers_path).map_err(|e| format!("{}: {e}", answers_path.display()))?;
    let start = Instant::now();
    let status = Command::new(&launch.argv[0])
        .args(&launch.argv[1..])
        .current_dir(dir)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| format!("cannot run {}: {e}", launch.argv[0]))?;
    let wall = start.elapsed();
    if !status.success() {
        return Err(format!("the server failed ({status})"));
    }
    let answers = check_answers(&answers_path)?;
    let usage = match &launch.time_file {
        None => None,
        Some(t) => {
            let text = fs::read_to_string(t).map_err(|e| format!("{}: {e}", t.display()))?;
            let last = text.lines().last().unwrap_or("");
            let f: Vec<&str> = last.split_whitespace().collect();
            match (
                f.first().and_then(|s| s.parse().ok()),
                f.get(1).and_then(|s| s.parse().ok()),
                f.get(3).and_then(|s| s.parse().ok()),
            ) {
                (Some(user), Some(sys), Some(max_rss_kib)) => Some(Usage {
                    user,
                    sys,
                    max_rss_kib,
                }),
                _ => return Err(format!("cannot read GNU time's output: {last:?}")),
            }
        }
    };
    Ok(Run {
        wall,
        answers,
        usage,
    })
}

/// Counts the answers in `path` and checks that every one is a success.
fn check_answers(path: &Path) -> Result<u64, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let (mut answers, mut line) = (0u64, Vec::with_capacity(1024));
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(answers),
            Ok(_) => answers += 1,
            Err(e) => return Err(format!("reading the answers: {e}")),
        }
        // Answers are compact JSON: a success holds exactly this member.
        if !line.windows(9).any(|w| w == b"\"ok\":true") {
            let bad = String::from_utf8_lossy(&line);
            return Err(format!("answer {answers} is not ok: {}", bad.trim_end()));
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `12345678.9` as `12,345,679`.
pub(crate) fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn describe(run: &Run, n: u64) -> String {
    let wall = run.wall.as_secs_f64();
    let mut s = format!("{:.3} s wall, {} req/s", wall, thousands(n as f64 / wall));
    if let Some(u) = &run.usage {
        let cpu = u.user + u.sys;
        s += &format!("; child CPU user {:.2} s + sys {:.2} s", u.user, u.sys);
        if cpu >= MIN_CPU_SECONDS {
            s += &format!(" = {} req per CPU-second", thousands(n as f64 / cpu));
        }
        s += &format!("; peak RSS {} KiB", u.max_rss_kib);
    }
    s
}

/// The medians of one `bench-tool` run, for `cargo xtask bench`.
pub struct Summary {
    /// Requests per run.
    pub requests: u64,
    /// Timed runs.
    pub runs: u32,
    /// Median requests per second of wall time.
    pub wall_rps: f64,
    /// Median requests per CPU-second, when GNU time measured it.
    pub cpu_rps: Option<f64>,
    /// Whether the server was pinned to one core.
    pub pinned: bool,
}

/// Runs the task (see the module documentation).
pub fn run(args: &[String]) -> Result<(), String> {
    run_summary(args).map(drop)
}

/// Runs the task and returns its medians.
pub fn run_summary(args: &[String]) -> Result<Summary, String> {
    let o = parse(args)?;
    crate::step(
        "build",
        &crate::cargo(),
        &["build", "--release", "-p", "sandgate-cli"],
    )?;
    let bin = target_dir().join("release").join("sandgate");
    if !bin.is_file() {
        return Err(format!("{} was not built", bin.display()));
    }

    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = env::temp_dir().join(format!(
        "sandgate-bench-tool-{}-{stamp}",
        std::process::id()
    ));
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = measure(&o, &bin, &dir);
    if o.keep {
        println!("kept {}", dir.display());
    } else {
        let _ = fs::remove_dir_all(&dir);
        println!(
            "removed {} (pass --keep to re-run the command by hand)",
            dir.display()
        );
    }
    result
}

fn measure(o: &Options, bin: &Path, dir: &Path) -> Result<Summary, String> {
    let (reads, stats, lists) = generate(dir, o.requests)?;
    let empty = dir.join("empty.jsonl");
    fs::write(&empty, "").map_err(|e| format!("{}: {e}", empty.display()))?;
    let session = dir.join("session.jsonl");

    let mut argv: Vec<String> = Vec::new();
    let cpu = o.cpu.to_string();
    let pinned = works("taskset", &["-c", &cpu, "true"]);
    if pinned {
        argv.extend(["taskset".to_owned(), "-c".to_owned(), cpu.clone()]);
    }
    let gnu_time = Path::new("/usr/bin/time");
    let time_file = (gnu_time.is_file()
        && works(
            "/usr/bin/time",
            &["-f", TIME_FORMAT, "-o", "/dev/null", "true"],
        ))
    .then(|| dir.join("time.txt"));
    if let Some(t) = &time_file {
        argv.extend(["/usr/bin/time", "-f", TIME_FORMAT, "-o"].map(String::from));
        argv.push(t.display().to_string());
    }
    argv.push(bin.display().to_string());
    argv.extend(["tool", "--policy"].map(String::from));
    argv.push(dir.join("policy.toml").display().to_string());
    let launch = Launch { argv, time_file };

    let sizes: Vec<String> = FILES.iter().map(|(n, s)| format!("{n} ({s} B)")).collect();
    println!(
        "bench-tool: {} requests: {} read, {} stat, {} list; files {}",
        thousands(o.requests as f64),
        thousands(reads as f64),
        thousands(stats as f64),
        thousands(lists as f64),
        sizes.join(", ")
    );
    let shown: Vec<String> = launch.argv.iter().map(|w| sh(w)).collect();
    println!(
        "command: cd {} && {} < session.jsonl > {ANSWERS}  (then counted and checked by xtask)",
        sh(&dir.display().to_string()),
        shown.join(" ")
    );
    println!(
        "{}",
        if pinned {
            format!("pinned to CPU {cpu} with `taskset -c {cpu}`")
        } else {
            format!("NOT pinned: `taskset -c {cpu}` does not work here; the server may use several cores")
        }
    );
    if launch.time_file.is_none() {
        println!("GNU /usr/bin/time is not available: wall-clock figures only");
    }

    let startup = run_once(&launch, &empty, dir)?;
    println!(
        "startup (empty session): {:.1} ms wall",
        startup.wall.as_secs_f64() * 1e3
    );

    let mut rps = Vec::new();
    let mut cpu_rps = Vec::new();
    for i in 1..=o.runs {
        let run = run_once(&launch, &session, dir)?;
        if run.answers != o.requests {
            return Err(format!(
                "run {i}: {} answers for {} requests",
                run.answers, o.requests
            ));
        }
        println!("run {i}: {}", describe(&run, o.requests));
        rps.push(o.requests as f64 / run.wall.as_secs_f64());
        if let Some(u) = &run.usage {
            let cpu_s = u.user + u.sys;
            if cpu_s < MIN_CPU_SECONDS {
                println!(
                    "       too short for GNU time's 10 ms resolution: use more requests for the CPU figure"
                );
                continue;
            }
            cpu_rps.push(o.requests as f64 / cpu_s);
            let idle = 1.0 - cpu_s / run.wall.as_secs_f64();
            if idle > 1.0 / 3.0 {
                println!(
                    "       the server was off-CPU for {:.0}% of the wall time (busy machine: other \
                     jobs on its core, or the answer reader starved): trust the per-CPU-second figure",
                    idle * 100.0
                );
            }
        }
    }
    let verdict = |x: f64| if x >= TARGET_RPS { "met" } else { "MISSED" };
    let wall_rps = median(rps);
    let med = wall_rps;
    println!(
        "median over {} runs: {} req/s wall ({}); target {} req/s on one core",
        o.runs,
        thousands(med),
        verdict(med),
        thousands(TARGET_RPS)
    );
    let mut cpu = None;
    if !cpu_rps.is_empty() {
        let runs = cpu_rps.len();
        let med = median(cpu_rps);
        println!(
            "median over {runs} runs: {} req per CPU-second ({})",
            thousands(med),
            verdict(med)
        );
        cpu = Some(med);
    }
    Ok(Summary {
        requests: o.requests,
        runs: o.runs,
        wall_rps,
        cpu_rps: cpu,
        pinned,
    })
}
