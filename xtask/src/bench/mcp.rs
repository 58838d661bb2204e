//! The MCP rows of `cargo xtask bench` (`--only mcp` runs just these):
//! `sandgate mcp` against the reference filesystem server
//! (`@modelcontextprotocol/server-filesystem`, pinned in
//! `benches/mcp/package-lock.json`), against its own JSON endpoint, and its
//! `grep` against ripgrep, all in one run on the same generated directory.
//!
//! One client, here, drives every server over stdio: newline-delimited
//! JSON-RPC (`initialize`, `notifications/initialized`, `ping`, then
//! `tools/call`). A thread reads the server's lines and hands them over a
//! channel; answers are checked only after the timing (the client is a
//! debug build, so it keeps the timed path to writing and reading lines).
//! Both servers get the same command-line form, `… DIR`, on the same
//! directory, and the same absolute paths.
//!
//! What it measures:
//!
//! 1. `read_text_file` of a 4 KiB file with a pipelining client (a window
//!    of [`WINDOW`] requests in flight): sandgate's time per call against
//!    the JSON endpoint's `read` of the same file (`sandgate tool`, same
//!    client, same window), in alternating rounds. Two figures, each the
//!    median of the rounds: the server's own CPU time per call (the run
//!    time of its threads, from `/proc/PID/task/*/schedstat`, far less
//!    swayed by other jobs than the wall time; one VM hiccup in one round
//!    does not move a median as it moved the sum over all rounds) and the
//!    wall time per call.
//! 2. The same call with one request in flight: calls per second, median
//!    and p99 round trip, and the server's CPU time per call, sandgate
//!    against the reference server, in alternating rounds after a warm-up
//!    (the reference runs on a JIT).
//! 3. `search_files` (`**/*.md`) over a tree of [`TREE_FILES`] files, both
//!    servers, alternating; and sandgate's `grep` (files mode, a pattern
//!    found in 50 files) against `rg -j1 -l` on the same tree: sandgate's
//!    grep walks and searches on one thread, so ripgrep gets one too.
//! 4. VmRSS of each server after `initialize` and a `ping`, before any
//!    call.
//!
//! The reference server is installed with `npm ci` into
//! `<target>/bench/mcp-reference`; ripgrep is `rg` on the PATH, else
//! `cargo install --locked ripgrep --version` [`RG_VERSION`] into
//! `<target>/bench/rg`. Whatever cannot be had is a skipped row naming why.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{human_ns, median, out_dir, run_capture, Options, Results, Row};
use crate::bench_tool::thousands;
use crate::{cargo, step, target_dir, works, workspace_root};

/// The reference server's version, as pinned in benches/mcp.
pub const REFERENCE_VERSION: &str = "2026.8.31";
/// The package.
const REFERENCE_PACKAGE: &str = "@modelcontextprotocol/server-filesystem";
/// ripgrep's version when this task installs it.
pub const RG_VERSION: &str = "15.2.0";
/// Requests in flight in the pipelined measurement.
pub const WINDOW: usize = 32;
/// Files in the generated tree.
pub const TREE_FILES: usize = 20_000;
/// The protocol revision the client asks for (both servers speak it).
const PROTOCOL: &str = "2025-06-18";
/// The longest wait for one line from a server.
const LINE_TIMEOUT: Duration = Duration::from_secs(300);
/// Size of the file `read_text_file` reads.
const READ_BYTES: usize = 4096;
/// Files in the tree with the grep needle, and `.md` files.
const NEEDLE_EVERY: usize = 400;
const MD_EVERY: usize = 200;

const AREA: &str = "mcp";

/// How much of each measurement to do.
struct Sizes {
    /// Calls per pipelined round, and rounds.
    piped: usize,
    piped_rounds: usize,
    /// Sequential calls per round for sandgate and the reference, rounds,
    /// and warm-up calls for each.
    seq_own: usize,
    seq_ref: usize,
    seq_rounds: usize,
    seq_warm: usize,
    /// Rounds of search_files and grep (after one warm-up call each).
    search_rounds: usize,
}

fn sizes(quick: bool) -> Sizes {
    if quick {
        Sizes {
            piped: 5_000,
            piped_rounds: 3,
            seq_own: 1_000,
            seq_ref: 300,
            seq_rounds: 3,
            seq_warm: 200,
            search_rounds: 3,
        }
    } else {
        Sizes {
            piped: 20_000,
            piped_rounds: 9,
            seq_own: 3_000,
            seq_ref: 600,
            seq_rounds: 3,
            seq_warm: 500,
            search_rounds: 5,
        }
    }
}

/// A server on the other end of two pipes.
struct Server {
    name: &'static str,
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    lines: Receiver<Vec<u8>>,
    next_id: u64,
}

impl Server {
    /// Starts `argv` in `dir`, its standard error going to `log`.
    fn spawn(
        name: &'static str,
        argv: &[OsString],
        dir: &Path,
        log: &Path,
    ) -> Result<Server, String> {
        let err = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{name}: cannot run {:?}: {e}", argv[0]))?;
        let stdin = child
            .stdin
            .take()
            .map(|s| BufWriter::with_capacity(1 << 16, s));
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            let mut r = BufReader::with_capacity(1 << 20, stdout);
            loop {
                let mut line = Vec::with_capacity(READ_BYTES * 3);
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Server {
            name,
            child,
            stdin,
            lines,
            next_id: 1,
        })
    }

    fn write(&mut self, line: &[u8]) -> Result<(), String> {
        let w = self.stdin.as_mut().ok_or("stdin closed")?;
        w.write_all(line)
            .map_err(|e| format!("{}: writing a request: {e}", self.name))
    }

    fn flush(&mut self) -> Result<(), String> {
        let w = self.stdin.as_mut().ok_or("stdin closed")?;
        w.flush()
            .map_err(|e| format!("{}: writing a request: {e}", self.name))
    }

    fn recv(&mut self) -> Result<Vec<u8>, String> {
        match self.lines.recv_timeout(LINE_TIMEOUT) {
            Ok(l) => Ok(l),
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "{}: no answer in {} s",
                self.name,
                LINE_TIMEOUT.as_secs()
            )),
            Err(RecvTimeoutError::Disconnected) => {
                Err(format!("{}: the server closed its output", self.name))
            }
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// One request and its answer's `result` (other lines in between, such
    /// as notifications, are passed over).
    fn rpc(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.id();
        let mut line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
            .to_string()
            .into_bytes();
        line.push(b'\n');
        self.write(&line)?;
        self.flush()?;
        loop {
            let answer = self.recv()?;
            let v: Value = serde_json::from_slice(&answer).map_err(|e| {
                format!(
                    "{}: an answer is not JSON ({e}): {}",
                    self.name,
                    String::from_utf8_lossy(&answer)
                )
            })?;
            if v.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(err) = v.get("error") {
                return Err(format!("{}: {method} failed: {err}", self.name));
            }
            return v
                .get("result")
                .cloned()
                .ok_or_else(|| format!("{}: {method}: an answer without a result", self.name));
        }
    }

    /// The MCP handshake, then a `ping` so that the server has handled the
    /// notification too.
    fn initialize(&mut self) -> Result<(), String> {
        let params = json!({
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "sandgate-xtask-bench", "version": "0"}
        });
        self.rpc("initialize", params)?;
        self.write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")?;
        self.rpc("ping", json!({}))?;
        Ok(())
    }

    /// A tool call's text, or the refusal as an error.
    fn call(&mut self, tool: &str, args: Value) -> Result<String, String> {
        let r = self.rpc("tools/call", json!({"name": tool, "arguments": args}))?;
        tool_text(&r).map_err(|e| format!("{}: {tool}: {e}", self.name))
    }

    /// CPU time (user + system, every thread's, those ended included) the
    /// server process has used so far, in ns, at the clock tick's
    /// resolution.
    fn cpu_ns(&self) -> Result<f64, String> {
        self.user_system_ns().map(|(u, s)| u + s)
    }

    /// The user and the system part of [`Server::cpu_ns`], in ns.
    fn user_system_ns(&self) -> Result<(f64, f64), String> {
        let path = format!("/proc/{}/stat", self.child.id());
        let stat = fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        let (u, s) = user_system_ticks(&stat)
            .ok_or_else(|| format!("{path}: cannot read utime and stime"))?;
        Ok((u * 1e9 / clock_ticks(), s * 1e9 / clock_ticks()))
    }

    /// CPU time the server's threads have used so far, in ns: the sum of
    /// their scheduler run times (`/proc/PID/task/*/schedstat`), precise
    /// enough to time one round. A thread that ends meanwhile is left out,
    /// as are threads that ended before (the pipelined rounds start and
    /// end none); `None` where the kernel keeps no such figures.
    fn run_ns(&self) -> Option<f64> {
        let tasks = fs::read_dir(format!("/proc/{}/task", self.child.id())).ok()?;
        let times: Vec<f64> = tasks
            .flatten()
            .filter_map(|t| fs::read_to_string(t.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next()?.parse().ok())
            .collect();
        (!times.is_empty()).then(|| times.iter().sum())
    }

    /// CPU time so far, in ns: [`Server::run_ns`] when `fine`, else
    /// [`Server::cpu_ns`] (one measure for a whole series, never mixed).
    fn cpu_ns_by(&self, fine: bool) -> Result<f64, String> {
        if fine {
            self.run_ns()
                .ok_or_else(|| format!("{}: its schedstat can no longer be read", self.name))
        } else {
            self.cpu_ns()
        }
    }

    /// VmRSS of the server process, in KiB.
    fn rss_kib(&self) -> Option<u64> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
    }
}

impl Drop for Server {
    /// Closes the server's input (which ends it), then kills it if it has
    /// not ended within five seconds.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// utime and stime, in clock ticks, from the text of `/proc/PID/stat`.
/// The command's name, in parentheses, may hold spaces and parentheses of
/// its own, so the fields are counted from the last `)`: the third field
/// follows it, and utime and stime are the 14th and 15th.
fn user_system_ticks(stat: &str) -> Option<(f64, f64)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut f = rest.split_whitespace().skip(11);
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`; 100,
/// the value of Linux's ABI, when getconf cannot say).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        crate::bench::first_line("getconf", &["CLK_TCK"])
            .and_then(|t| t.parse().ok())
            .filter(|t: &f64| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// The text of a `tools/call` result, or why it is not a success.
fn tool_text(result: &Value) -> Result<String, String> {
    let text = result
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(format!("refused: {text}"));
    }
    if result.pointer("/content/0/text").is_none() {
        return Err(format!("no text in the result: {result}"));
    }
    Ok(text)
}

/// `n` requests, one line each, made by `make(id)`, ids from `first`.
fn requests(first: u64, n: usize, make: impl Fn(u64) -> Value) -> Vec<Vec<u8>> {
    (0..n as u64)
        .map(|i| {
            let mut l = make(first + i).to_string().into_bytes();
            l.push(b'\n');
            l
        })
        .collect()
}

/// Sends `reqs` keeping at most `window` unanswered; answers one line per
/// request. Returns the wall time and the answer lines (unchecked).
fn pipelined(
    s: &mut Server,
    reqs: &[Vec<u8>],
    window: usize,
) -> Result<(Duration, Vec<Vec<u8>>), String> {
    let n = reqs.len();
    let mut answers = Vec::with_capacity(n);
    let mut sent = 0;
    let start = Instant::now();
    while answers.len() < n {
        while sent < n && sent - answers.len() < window {
            s.write(&reqs[sent])?;
            sent += 1;
        }
        s.flush()?;
        answers.push(s.recv()?);
        while let Ok(l) = s.lines.try_recv() {
            answers.push(l);
        }
    }
    Ok((start.elapsed(), answers))
}

/// One series of pipelined rounds: per round, each server's CPU and wall
/// time per call, in ns; and over all the timed rounds, where each
/// server's CPU time went and what it wrote.
struct Piped {
    own_cpu: Vec<f64>,
    ep_cpu: Vec<f64>,
    own_wall: Vec<f64>,
    ep_wall: Vec<f64>,
    own_split: Split,
    ep_split: Split,
}

/// One server's totals over a series' timed rounds: user and system time
/// (ns, from `/proc/PID/stat`, in clock ticks), answers and their bytes.
#[derive(Default)]
struct Split {
    user: f64,
    system: f64,
    calls: usize,
    bytes: usize,
}

impl Split {
    /// Adds one round: the times before and after it, and its answers.
    fn add(&mut self, before: (f64, f64), after: (f64, f64), answers: &[Vec<u8>]) {
        self.user += after.0 - before.0;
        self.system += after.1 - before.1;
        self.calls += answers.len();
        self.bytes += answers.iter().map(Vec::len).sum::<usize>();
    }

    /// Per call: user µs, system µs and answer bytes (newline included).
    fn per_call(&self) -> (f64, f64, f64) {
        let n = self.calls.max(1) as f64;
        (
            self.user / n / 1e3,
            self.system / n / 1e3,
            self.bytes as f64 / n,
        )
    }

    /// What a note says of it.
    fn describe(&self, name: &str) -> String {
        let (u, s, b) = self.per_call();
        format!(
            "{name} {u:.2} µs user + {s:.2} µs system per call, answers of {} bytes",
            thousands(b)
        )
    }
}

impl Piped {
    /// The lowest and highest of the rounds' own CPU ratios.
    fn ratio_range(&self) -> (f64, f64) {
        let ratios: Vec<f64> = self
            .own_cpu
            .iter()
            .zip(&self.ep_cpu)
            .map(|(a, b)| a / b)
            .collect();
        (quantile(&ratios, 0.0), quantile(&ratios, 1.0))
    }

    /// Where both servers' CPU time went over the timed rounds, and the
    /// size of their answers: the system time follows the bytes written
    /// into the pipe, which differ between the two by protocol.
    fn split_note(&self) -> String {
        format!(
            "over the timed rounds (user and system time from /proc/PID/stat, in clock \
             ticks): {}; {}",
            self.own_split.describe("sandgate mcp"),
            self.ep_split.describe("the endpoint")
        )
    }
}

/// A warm-up round, then `z.piped_rounds` rounds of `z.piped` pipelined
/// reads, `sandgate mcp` and then the endpoint in each round.
fn piped_rounds(
    own: &mut Server,
    endpoint: &mut Server,
    z: &Sizes,
    fine: bool,
    read_call: &dyn Fn(u64) -> Value,
    endpoint_req: &[Vec<u8>],
) -> Result<Piped, String> {
    let mut p = Piped {
        own_cpu: Vec::new(),
        ep_cpu: Vec::new(),
        own_wall: Vec::new(),
        ep_wall: Vec::new(),
        own_split: Split::default(),
        ep_split: Split::default(),
    };
    for round in 0..=z.piped_rounds {
        let first = own.next_id + 1;
        let reqs = requests(first, z.piped, read_call);
        own.next_id += z.piped as u64;
        let split = own.user_system_ns()?;
        let c = own.cpu_ns_by(fine)?;
        let (t, answers) = pipelined(own, &reqs, WINDOW)?;
        let c = own.cpu_ns_by(fine)? - c;
        // Round 0 warms up.
        if round > 0 {
            p.own_split.add(split, own.user_system_ns()?, &answers);
        }
        check_mcp(own.name, &answers, first, READ_BYTES)?;
        let split = endpoint.user_system_ns()?;
        let ce = endpoint.cpu_ns_by(fine)?;
        let (te, answers) = pipelined(endpoint, endpoint_req, WINDOW)?;
        let ce = endpoint.cpu_ns_by(fine)? - ce;
        if round > 0 {
            p.ep_split.add(split, endpoint.user_system_ns()?, &answers);
        }
        check_endpoint(&answers)?;
        if round > 0 {
            p.own_wall.push(t.as_nanos() as f64 / z.piped as f64);
            p.ep_wall.push(te.as_nanos() as f64 / z.piped as f64);
            p.own_cpu.push(c / z.piped as f64);
            p.ep_cpu.push(ce / z.piped as f64);
        }
    }
    Ok(p)
}

/// Two CPUs to pin to, and the affinity each process had before.
struct PinPlan {
    a: u32,
    b: u32,
    before: Vec<(u32, String)>,
}

/// The first two CPUs this process may run on, and the current affinity
/// of `pids`, so that they can be put back; an error says why the rounds
/// cannot be pinned here (one CPU, or no working `taskset`).
fn pin_plan(pids: &[u32]) -> Result<PinPlan, String> {
    let mut before = Vec::new();
    for &pid in pids {
        before.push((pid, affinity(pid)?));
    }
    let list = before.first().map_or("", |(_, l)| l.as_str());
    let cpus = cpu_list(list).ok_or_else(|| format!("cannot read the CPU list {list:?}"))?;
    match cpus[..] {
        [a, b, ..] => Ok(PinPlan { a, b, before }),
        _ => Err(format!("this process may run on one CPU only ({list})")),
    }
}

impl PinPlan {
    /// Pins every thread of `pid` to `cpu`.
    fn pin(&self, pid: u32, cpu: u32) -> Result<(), String> {
        taskset(&["-a", "-c", "-p", &cpu.to_string(), &pid.to_string()]).map(drop)
    }

    /// Puts every process's threads back on the CPUs they had.
    fn restore(&self) -> Result<(), String> {
        for (pid, list) in &self.before {
            taskset(&["-a", "-c", "-p", list, &pid.to_string()])?;
        }
        Ok(())
    }
}

/// The CPU list `pid` may run on, as `taskset -c -p` prints it.
fn affinity(pid: u32) -> Result<String, String> {
    let out = taskset(&["-c", "-p", &pid.to_string()])?;
    out.rsplit_once(": ")
        .map(|(_, list)| list.trim().to_owned())
        .ok_or_else(|| format!("taskset printed no CPU list: {out:?}"))
}

/// Runs `taskset ARGS`, answering what it printed.
fn taskset(args: &[&str]) -> Result<String, String> {
    let out = Command::new("taskset")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run taskset: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "taskset {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The CPUs of a list such as `0-3,6`, in order.
fn cpu_list(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((lo, hi)) => cpus.extend(lo.trim().parse::<u32>().ok()?..=hi.trim().parse().ok()?),
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    Some(cpus)
}

/// Round trips in ns, the wall time, and the answer lines (unchecked).
type Timed = (Vec<f64>, Duration, Vec<Vec<u8>>);

/// Sends `reqs` one at a time, each after the answer to the one before.
fn sequential(s: &mut Server, reqs: &[Vec<u8>]) -> Result<Timed, String> {
    let mut lat = Vec::with_capacity(reqs.len());
    let mut answers = Vec::with_capacity(reqs.len());
    let start = Instant::now();
    for r in reqs {
        let t = Instant::now();
        s.write(r)?;
        s.flush()?;
        let a = s.recv()?;
        lat.push(t.elapsed().as_nanos() as f64);
        answers.push(a);
    }
    Ok((lat, start.elapsed(), answers))
}

/// Checks MCP answers to `tools/call` requests with ids `first..first+n`:
/// every one a success whose text is `expect_len` bytes long.
fn check_mcp(name: &str, answers: &[Vec<u8>], first: u64, expect_len: usize) -> Result<(), String> {
    let mut ids = BTreeSet::new();
    for a in answers {
        let v: Value = serde_json::from_slice(a)
            .map_err(|e| format!("{name}: an answer is not JSON ({e})"))?;
        let id = v.get("id").and_then(Value::as_u64).ok_or_else(|| {
            format!(
                "{name}: a line that is no answer: {}",
                String::from_utf8_lossy(a)
            )
        })?;
        let result = v
            .get("result")
            .ok_or_else(|| format!("{name}: answer {id} is an error: {v}"))?;
        let text = tool_text(result).map_err(|e| format!("{name}: answer {id}: {e}"))?;
        if text.len() != expect_len {
            return Err(format!(
                "{name}: answer {id} holds {} bytes, not {expect_len}",
                text.len()
            ));
        }
        ids.insert(id);
    }
    let want: BTreeSet<u64> = (first..first + answers.len() as u64).collect();
    if ids != want {
        return Err(format!("{name}: the answers' ids are not the requests'"));
    }
    Ok(())
}

/// Checks the JSON endpoint's answers: every one `"ok":true`.
fn check_endpoint(answers: &[Vec<u8>]) -> Result<(), String> {
    for (i, a) in answers.iter().enumerate() {
        let v: Value = serde_json::from_slice(a)
            .map_err(|e| format!("sandgate tool: answer {i} is not JSON ({e})"))?;
        if v.get("ok").and_then(Value::as_bool) != Some(true) {
            return Err(format!("sandgate tool: answer {i} is not ok: {v}"));
        }
    }
    Ok(())
}

/// The `q` quantile of `v` (nearest rank).
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// Writes the workspace: `ws/read4k.txt` and the tree `ws/tree` of
/// [`TREE_FILES`] files (20 directories of 10 of 100 files, about 1 KiB
/// each); every [`NEEDLE_EVERY`]th file holds the grep needle and every
/// [`MD_EVERY`]th is a `.md`. Returns (needle files, `.md` files).
fn generate(ws: &Path) -> Result<(usize, usize), String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    fs::create_dir_all(ws).map_err(|e| io(ws, e))?;
    let line = "a line of text for the MCP benchmark, 4 KiB in all.\n";
    let text: String = line.chars().cycle().take(READ_BYTES).collect();
    let p = ws.join("read4k.txt");
    fs::write(&p, text).map_err(|e| io(&p, e))?;
    let (mut needles, mut mds) = (0, 0);
    for k in 0..TREE_FILES {
        let dir = ws.join(format!("tree/d{:02}/s{}", k / 1000, (k / 100) % 10));
        if k % 100 == 0 {
            fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        }
        let ext = if k % MD_EVERY == 3 {
            mds += 1;
            "md"
        } else {
            "txt"
        };
        let mut body = String::with_capacity(1100);
        for i in 0..16 {
            body += &format!("line {i} of file {k}: lorem ipsum dolor sit amet, consectetur\n");
            if i == 9 && k % NEEDLE_EVERY == 7 {
                needles += 1;
                body += &format!("the NEEDLE_{k:05} is here\n");
            }
        }
        let p = dir.join(format!("f{:03}.{ext}", k % 100));
        fs::write(&p, body).map_err(|e| io(&p, e))?;
    }
    Ok((needles, mds))
}

/// Installs the reference server into `<target>/bench/mcp-reference` with
/// `npm ci` when it is not there at the pinned version; answers its entry
/// point, or why it cannot be had.
fn install_reference() -> Result<PathBuf, String> {
    if !works("node", &["--version"]) {
        return Err("no node".into());
    }
    let src = workspace_root().join("benches/mcp");
    let dir = out_dir().join("mcp-reference");
    let installed = dir.join("node_modules").join(REFERENCE_PACKAGE);
    let entry = installed.join("dist/index.js");
    let lock = fs::read(src.join("package-lock.json"))
        .map_err(|e| format!("benches/mcp/package-lock.json: {e}"))?;
    let current = fs::read(dir.join("package-lock.json")).ok() == Some(lock.clone())
        && fs::read_to_string(installed.join("package.json"))
            .is_ok_and(|t| t.contains(&format!("\"version\": \"{REFERENCE_VERSION}\"")))
        && entry.is_file();
    if current {
        return Ok(entry);
    }
    if !works("npm", &["--version"]) {
        return Err("no npm to install it".into());
    }
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for f in ["package.json", "package-lock.json"] {
        fs::copy(src.join(f), dir.join(f)).map_err(|e| format!("benches/mcp/{f}: {e}"))?;
    }
    let mut cmd = Command::new("npm");
    cmd.current_dir(&dir)
        .args(["ci", "--no-audit", "--no-fund"]);
    match run_capture("npm ci (reference MCP server)", "mcp-npm-ci", &mut cmd) {
        Ok((true, _)) if entry.is_file() => Ok(entry),
        Ok((true, _)) => Err(format!("npm ci made no {}", entry.display())),
        Ok((false, _)) => Err("npm ci failed (see <target>/bench/mcp-npm-ci.log)".into()),
        Err(e) => Err(e),
    }
}

/// ripgrep: `rg` on the PATH, else installed by cargo into
/// `<target>/bench/rg`; or why there is none.
fn ripgrep() -> Result<PathBuf, String> {
    if works("rg", &["--version"]) {
        return Ok(PathBuf::from("rg"));
    }
    let root = out_dir().join("rg");
    let bin = root.join("bin/rg");
    if !bin.is_file() {
        let mut cmd = Command::new(cargo());
        cmd.args([
            "install",
            "--locked",
            "ripgrep",
            "--version",
            RG_VERSION,
            "--root",
        ])
        .arg(&root);
        match run_capture("cargo install ripgrep", "mcp-rg-install", &mut cmd) {
            Ok((true, _)) => {}
            Ok((false, _)) => {
                return Err("no rg on the PATH, and `cargo install ripgrep` failed".into())
            }
            Err(e) => return Err(format!("no rg on the PATH, and {e}")),
        }
    }
    if bin.is_file() {
        Ok(bin)
    } else {
        Err("no rg on the PATH, and cargo installed none".into())
    }
}

/// A row with a figure against a reference.
#[allow(clippy::too_many_arguments)]
fn row(
    variant: &str,
    time: String,
    reference: &str,
    ref_time: String,
    ratio: f64,
    target: &str,
    met: Option<bool>,
) -> Row {
    Row {
        area: AREA.into(),
        variant: variant.into(),
        time,
        reference: reference.into(),
        ref_time,
        ratio: format!("{ratio:.3}"),
        target: target.into(),
        verdict: match met {
            None => "—".into(),
            Some(true) => "met".into(),
            Some(false) => "MISSED".into(),
        },
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Runs the MCP rows into `r`.
pub(super) fn run(o: &Options, r: &mut Results) {
    if let Err(e) = step(
        "build sandgate",
        &cargo(),
        &["build", "--release", "-p", "sandgate-cli"],
    ) {
        return r.fail(AREA, "build", e);
    }
    let bin = target_dir().join("release/sandgate");
    let reference = install_reference();
    let rg = ripgrep();
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir =
        std::env::temp_dir().join(format!("sandgate-bench-mcp-{}-{stamp}", std::process::id()));
    let result = measure(o, &bin, reference, rg, &dir, r);
    let _ = fs::remove_dir_all(&dir);
    if let Err(e) = result {
        r.fail(AREA, "bench", e);
    }
}

fn measure(
    o: &Options,
    bin: &Path,
    reference: Result<PathBuf, String>,
    rg: Result<PathBuf, String>,
    dir: &Path,
    r: &mut Results,
) -> Result<(), String> {
    let z = sizes(o.quick);
    let ws = dir.join("ws");
    eprintln!(
        "==> mcp: generating {} files in {}",
        thousands(TREE_FILES as f64),
        ws.display()
    );
    let (needles, mds) = generate(&ws)?;
    let ws_str = ws
        .to_str()
        .ok_or("the temporary directory's path is not UTF-8")?
        .to_owned();
    let read_path = format!("{ws_str}/read4k.txt");
    let tree_path = format!("{ws_str}/tree");
    let policy = dir.join("policy.toml");
    // The policy `sandgate mcp DIR` makes for itself, for the endpoint.
    fs::write(
        &policy,
        format!(
            "security_mode = \"restricted\"\n\n[fs]\nread_roots = [{ws:?}]\nwrite_root = {ws:?}\nallow_overwrite = true\n",
            ws = ws_str
        ),
    )
    .map_err(|e| format!("{}: {e}", policy.display()))?;

    let log = |n: &str| out_dir().join(format!("mcp-{n}.stderr.log"));
    let own_argv: Vec<OsString> = vec![bin.into(), "mcp".into(), ws.clone().into()];
    let mut own = Server::spawn("sandgate mcp", &own_argv, &ws, &log("sandgate"))?;
    own.initialize()?;
    let own_rss = own.rss_kib();
    let mut theirs = match &reference {
        Ok(entry) => {
            let argv: Vec<OsString> = vec!["node".into(), entry.into(), ws.clone().into()];
            let mut s = Server::spawn("reference server", &argv, &ws, &log("reference"))?;
            s.initialize()?;
            Some(s)
        }
        Err(_) => None,
    };
    let their_rss = theirs.as_ref().and_then(Server::rss_kib);
    let endpoint_argv: Vec<OsString> =
        vec![bin.into(), "tool".into(), "--policy".into(), policy.into()];
    let mut endpoint = Server::spawn("sandgate tool", &endpoint_argv, &ws, &log("tool"))?;

    let read_call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "read_text_file", "arguments": {"path": read_path}}})
    };

    // 1. Pipelined: sandgate mcp against the endpoint, alternating rounds,
    // first where the scheduler puts them, then pinned both ways.
    let endpoint_req = requests(0, z.piped, |_| json!({"op": "read", "path": "read4k.txt"}));
    let fine = endpoint.run_ns().is_some() && own.run_ns().is_some();
    let piped = |own: &mut Server, endpoint: &mut Server| {
        piped_rounds(own, endpoint, &z, fine, &read_call, &endpoint_req)
    };
    let free = piped(&mut own, &mut endpoint)?;
    let piped_variant = format!("read_text_file 4 KiB, pipelined ({WINDOW} in flight)");
    let endpoint_name = "sandgate tool `read`, same client";
    let (own_cpu, ep_cpu) = (median(free.own_cpu.clone()), median(free.ep_cpu.clone()));
    r.rows.push(row(
        &format!("{piped_variant}: server CPU per call"),
        human_ns(own_cpu),
        endpoint_name,
        human_ns(ep_cpu),
        own_cpu / ep_cpu,
        "≤ 1.30",
        Some(own_cpu / ep_cpu <= 1.30),
    ));
    let (own_ns, ep_ns) = (median(free.own_wall.clone()), median(free.ep_wall.clone()));
    r.rows.push(row(
        &format!("{piped_variant}: wall time per call"),
        human_ns(own_ns),
        endpoint_name,
        human_ns(ep_ns),
        own_ns / ep_ns,
        "≤ 1.30",
        Some(own_ns / ep_ns <= 1.30),
    ));
    let (lowest, highest) = free.ratio_range();
    r.notes.push(format!(
        "mcp: pipelined: {} rounds of {} calls each after a warm-up round, the two servers \
         alternating; wall time: median of the rounds' time per call; server CPU: median of \
         the rounds' CPU time per call ({}): the server's own time, far less swayed by the \
         machine's load than the wall time; the rounds' own CPU ratios ranged from {:.3} to \
         {:.3}; {}",
        z.piped_rounds,
        thousands(z.piped as f64),
        if fine {
            "the run time of every thread, from /proc/PID/task/*/schedstat"
        } else {
            "user + system time from /proc/PID/stat, in clock ticks"
        },
        lowest,
        highest,
        free.split_note()
    ));
    // The same rounds with the client's threads and the servers' threads
    // pinned: on one CPU, and on two. Both servers cost far more per call
    // when their answers go to a reader on another CPU (the pipe's pages
    // are allocated on one CPU and freed on the other), and the MCP answer
    // carries twice the bytes, so each placement's ratio is shown on its
    // own, without a target.
    match pin_plan(&[std::process::id(), own.child.id(), endpoint.child.id()]) {
        Ok(plan) => {
            for (label, client, servers) in [
                ("client and server on one CPU", plan.a, plan.a),
                ("client and server on two CPUs", plan.a, plan.b),
            ] {
                // A placement that cannot be had is a note; a server that
                // fails its rounds fails the bench, as unpinned.
                let pinned = plan
                    .pin(std::process::id(), client)
                    .and_then(|()| plan.pin(own.child.id(), servers))
                    .and_then(|()| plan.pin(endpoint.child.id(), servers))
                    .map(|()| piped(&mut own, &mut endpoint));
                plan.restore()?;
                let p = match pinned {
                    Ok(p) => p?,
                    Err(why) => {
                        r.notes
                            .push(format!("mcp: pipelined rounds not pinned ({label}): {why}"));
                        continue;
                    }
                };
                let (own_cpu, ep_cpu) = (median(p.own_cpu.clone()), median(p.ep_cpu.clone()));
                let (lowest, highest) = p.ratio_range();
                r.rows.push(row(
                    &format!("{piped_variant}, {label}: server CPU per call"),
                    human_ns(own_cpu),
                    endpoint_name,
                    human_ns(ep_cpu),
                    own_cpu / ep_cpu,
                    "—",
                    None,
                ));
                r.notes.push(format!(
                    "mcp: pipelined, {label} (`taskset`, client on CPU {client}, servers on CPU \
                     {servers}): the same rounds; their own CPU ratios ranged from {lowest:.3} \
                     to {highest:.3}; {}",
                    p.split_note()
                ));
            }
        }
        Err(why) => r
            .notes
            .push(format!("mcp: pipelined rounds not pinned: {why}")),
    }
    drop(endpoint);

    // 2. Sequential: sandgate against the reference, alternating rounds.
    let seq = |s: &mut Server, n: usize| -> Result<(Vec<f64>, Duration), String> {
        let first = s.next_id + 1;
        let reqs = requests(first, n, read_call);
        s.next_id += n as u64;
        let (lat, wall, answers) = sequential(s, &reqs)?;
        check_mcp(s.name, &answers, first, READ_BYTES)?;
        Ok((lat, wall))
    };
    seq(&mut own, z.seq_warm)?;
    if let Some(t) = theirs.as_mut() {
        seq(t, z.seq_warm)?;
    }
    let (mut own_lat, mut own_wall, mut own_cpu) = (Vec::new(), Duration::ZERO, 0.0);
    let (mut their_lat, mut their_wall, mut their_cpu) = (Vec::new(), Duration::ZERO, 0.0);
    for _ in 0..z.seq_rounds {
        let c = own.cpu_ns()?;
        let (l, w) = seq(&mut own, z.seq_own)?;
        own_cpu += own.cpu_ns()? - c;
        own_lat.extend(l);
        own_wall += w;
        if let Some(t) = theirs.as_mut() {
            let c = t.cpu_ns()?;
            let (l, w) = seq(t, z.seq_ref)?;
            their_cpu += t.cpu_ns()? - c;
            their_lat.extend(l);
            their_wall += w;
        }
    }
    let own_cpu = own_cpu / own_lat.len() as f64;
    let own_cps = own_lat.len() as f64 / own_wall.as_secs_f64();
    let (own_med, own_p99) = (quantile(&own_lat, 0.5), quantile(&own_lat, 0.99));
    let seq_variant = "read_text_file 4 KiB, sequential";
    match &reference {
        Ok(_) => {
            let their_cps = their_lat.len() as f64 / their_wall.as_secs_f64();
            let (their_med, their_p99) = (quantile(&their_lat, 0.5), quantile(&their_lat, 0.99));
            let ratio = own_cps / their_cps;
            r.rows.push(row(
                &format!("{seq_variant}: calls per second"),
                format!("{} calls/s", thousands(own_cps)),
                "reference server",
                format!("{} calls/s", thousands(their_cps)),
                ratio,
                "≥ 5.00",
                Some(ratio >= 5.0),
            ));
            r.rows.push(row(
                &format!("{seq_variant}: median round trip"),
                human_ns(own_med),
                "reference server, median",
                human_ns(their_med),
                own_med / their_med,
                "—",
                None,
            ));
            r.rows.push(row(
                &format!("{seq_variant}: p99 round trip"),
                human_ns(own_p99),
                "reference server, median",
                human_ns(their_med),
                own_p99 / their_med,
                "< 1.00",
                Some(own_p99 < their_med),
            ));
            let their_cpu = their_cpu / their_lat.len() as f64;
            r.rows.push(row(
                &format!("{seq_variant}: server CPU per call"),
                human_ns(own_cpu),
                "reference server",
                human_ns(their_cpu),
                own_cpu / their_cpu,
                "—",
                None,
            ));
            r.rows.push(row(
                &format!("{seq_variant}: p99 round trip"),
                human_ns(own_p99),
                "reference server, p99",
                human_ns(their_p99),
                own_p99 / their_p99,
                "—",
                None,
            ));
            r.notes.push(format!(
                "mcp: sequential: one call in flight; {} rounds of {} calls (sandgate) and {} \
                 (reference) alternating, after {} warm-up calls each; calls/s = calls / their \
                 summed wall time, its ratio sandgate's / the reference's (higher is faster); \
                 median and p99 over every timed round trip",
                z.seq_rounds,
                thousands(z.seq_own as f64),
                thousands(z.seq_ref as f64),
                z.seq_warm
            ));
        }
        Err(why) => {
            r.rows.push(Row {
                area: AREA.into(),
                variant: format!("{seq_variant}: calls/s, median, p99"),
                time: format!(
                    "{} calls/s, {}, {}",
                    thousands(own_cps),
                    human_ns(own_med),
                    human_ns(own_p99)
                ),
                reference: "—".into(),
                ref_time: "—".into(),
                ratio: "—".into(),
                target: "—".into(),
                verdict: format!("reference skipped: {why}"),
            });
            r.notes
                .push(format!("{AREA}: reference server skipped: {why}"));
        }
    }

    // 3. search_files over the tree, both servers alternating.
    let search = json!({"path": tree_path, "pattern": "**/*.md"});
    let timed_search = |s: &mut Server| -> Result<f64, String> {
        let t = Instant::now();
        let text = s.call("search_files", search.clone())?;
        let ns = t.elapsed().as_nanos() as f64;
        let n = text.lines().filter(|l| l.ends_with(".md")).count();
        if n != mds {
            return Err(format!(
                "{}: search_files found {n} files, not {mds}",
                s.name
            ));
        }
        Ok(ns)
    };
    let (mut own_search, mut their_search) = (Vec::new(), Vec::new());
    for round in 0..=z.search_rounds {
        let a = timed_search(&mut own)?;
        let b = match theirs.as_mut() {
            Some(t) => Some(timed_search(t)?),
            None => None,
        };
        if round > 0 {
            own_search.push(a);
            their_search.extend(b);
        }
    }
    let own_s = median(own_search);
    let search_variant = format!(
        "search_files `**/*.md`, {} files",
        thousands(TREE_FILES as f64)
    );
    match &reference {
        Ok(_) => {
            let their_s = median(their_search);
            r.rows.push(row(
                &search_variant,
                human_ns(own_s),
                "reference server",
                human_ns(their_s),
                own_s / their_s,
                "≤ 0.50",
                Some(own_s / their_s <= 0.5),
            ));
        }
        Err(why) => r.skip(AREA, &search_variant, &format!("reference server: {why}")),
    }

    // sandgate's grep against ripgrep on one thread.
    let grep_variant = format!(
        "grep, files mode, {} files, 1 thread",
        thousands(TREE_FILES as f64)
    );
    match &rg {
        Ok(rg) => {
            let pattern = "NEEDLE_[0-9]{5}";
            let grep = json!({"pattern": pattern, "path": tree_path, "mode": "files", "max_results": 1000});
            let mut own_grep = Vec::new();
            let mut rg_times = Vec::new();
            for round in 0..=z.search_rounds {
                let t = Instant::now();
                let text = own.call("grep", grep.clone())?;
                let a = t.elapsed().as_nanos() as f64;
                let n = text.lines().count();
                if n != needles {
                    return Err(format!("sandgate grep found {n} files, not {needles}"));
                }
                let t = Instant::now();
                let out = Command::new(rg)
                    .args(["--no-config", "-j1", "--files-with-matches", "-e", pattern])
                    .arg(&tree_path)
                    .stdin(Stdio::null())
                    .stderr(Stdio::inherit())
                    .output()
                    .map_err(|e| format!("cannot run {}: {e}", rg.display()))?;
                let b = t.elapsed().as_nanos() as f64;
                let n = out
                    .stdout
                    .split(|c| *c == b'\n')
                    .filter(|l| !l.is_empty())
                    .count();
                if n != needles {
                    return Err(format!("rg found {n} files, not {needles}"));
                }
                if round > 0 {
                    own_grep.push(a);
                    rg_times.push(b);
                }
            }
            let (own_g, rg_g) = (median(own_grep), median(rg_times));
            r.rows.push(row(
                &grep_variant,
                human_ns(own_g),
                "rg -j1 -l (process)",
                human_ns(rg_g),
                own_g / rg_g,
                "≤ 1.20",
                Some(own_g / rg_g <= 1.2),
            ));
            let version = Command::new(rg)
                .arg("--version")
                .output()
                .ok()
                .and_then(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .next()
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            r.notes.push(format!(
                "mcp: search_files and grep: {} rounds after a warm-up round, alternating, \
                 medians; the tree: {} files of about 1 KiB in 200 directories, {mds} `.md`, \
                 the needle in {needles}; sandgate's grep (one MCP call) walks and reads on \
                 one thread, so ripgrep ({version}) runs with -j1, timed from spawn to exit",
                z.search_rounds,
                thousands(TREE_FILES as f64),
            ));
        }
        Err(why) => r.skip(AREA, &grep_variant, why),
    }

    // 4. Resident memory after initialize.
    let rss_variant = "idle server after initialize: VmRSS";
    match (own_rss, their_rss, &reference) {
        (Some(a), Some(b), _) => r.rows.push(row(
            rss_variant,
            mib(a),
            "reference server",
            mib(b),
            a as f64 / b as f64,
            "—",
            None,
        )),
        (Some(a), None, Err(why)) => r.rows.push(Row {
            area: AREA.into(),
            variant: rss_variant.into(),
            time: mib(a),
            reference: "—".into(),
            ref_time: "—".into(),
            ratio: "—".into(),
            target: "—".into(),
            verdict: format!("reference skipped: {why}"),
        }),
        _ => r.fail(AREA, rss_variant, "cannot read VmRSS from /proc".into()),
    }
    if let Ok(entry) = &reference {
        r.notes.push(format!(
            "mcp: both servers started as `… {{dir}}` on the same directory, answering \
             absolute paths: `sandgate mcp DIR` (release build) and `node {} DIR` ({REFERENCE_PACKAGE} \
             {REFERENCE_VERSION}, {}); one Rust client over stdio, protocol {PROTOCOL}",
            entry
                .strip_prefix(target_dir())
                .map_or_else(|_| entry.display().to_string(), |p| format!("<target>/{}", p.display())),
            crate::bench::first_line("node", &["--version"]).unwrap_or_default()
        ));
    }
    drop(theirs);
    drop(own);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[3.0], 0.99), 3.0);
    }

    #[test]
    fn tool_results() {
        let ok = json!({"content": [{"type": "text", "text": "abc"}]});
        assert_eq!(tool_text(&ok).unwrap(), "abc");
        let refused = json!({"content": [{"type": "text", "text": "E_DENIED"}], "isError": true});
        assert!(tool_text(&refused).unwrap_err().contains("E_DENIED"));
        assert!(tool_text(&json!({})).is_err());
    }

    #[test]
    fn user_and_system_ticks_are_read_after_the_name() {
        // A name with spaces and parentheses of its own.
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194304 10 0 0 0 37 5 0 0 20 0 1 0 9 0 0";
        assert_eq!(user_system_ticks(stat), Some((37.0, 5.0)));
        assert_eq!(user_system_ticks("42 (x) S 1 2 3"), None);
        assert_eq!(user_system_ticks("no parenthesis"), None);
        let own = fs::read_to_string("/proc/self/stat").unwrap();
        assert!(user_system_ticks(&own).is_some(), "{own}");
    }

    #[test]
    fn splits_are_per_call() {
        let mut s = Split::default();
        s.add((0.0, 0.0), (3_000.0, 9_000.0), &[vec![0; 10], vec![0; 20]]);
        s.add((5_000.0, 9_000.0), (6_000.0, 12_000.0), &[vec![0; 30]]);
        assert_eq!(s.per_call(), (4.0 / 3.0, 4.0, 20.0));
        assert!(s.describe("x").contains("1.33 µs user + 4.00 µs system"));
    }

    #[test]
    fn cpu_lists_as_taskset_prints_them() {
        assert_eq!(cpu_list("0,1"), Some(vec![0, 1]));
        assert_eq!(cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(cpu_list("5"), Some(vec![5]));
        assert_eq!(cpu_list(""), None);
        assert_eq!(cpu_list("0-x"), None);
    }

    #[test]
    fn answers_are_checked() {
        let line = |id: u64, text: &str| {
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
                .to_string()
                .into_bytes()
        };
        assert!(check_mcp("s", &[line(5, "ab"), line(6, "cd")], 5, 2).is_ok());
        // A short text, a missing id, an id answered twice.
        assert!(check_mcp("s", &[line(5, "a"), line(6, "cd")], 5, 2).is_err());
        assert!(check_mcp("s", &[line(5, "ab"), line(5, "cd")], 5, 2).is_err());
        assert!(check_endpoint(&[b"{\"ok\":true}".to_vec()]).is_ok());
        assert!(check_endpoint(&[b"{\"ok\":false}".to_vec()]).is_err());
    }
}
