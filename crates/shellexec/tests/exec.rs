//! The executor with real processes: exit codes, timeouts, abort, the
//! deadline backstop, killing every descendant, environment, output caps,
//! redaction, concurrency, cwd, and the session's temporary directory.

use std::ffi::OsString;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sandgate_codes::ErrorCode;
use sandgate_shellexec::confine::{kernel_abi, ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{
    AbortSignal, ExecConfig, ExecOptions, ExecResult, LocalShellExecutor, ShellExecutor,
    BACKSTOP_MARGIN,
};

const SECRET: &str = "correct-horse-battery-staple-42";

fn host_env() -> Vec<(OsString, OsString)> {
    [
        ("HOME", "/root"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("LANG", "C.UTF-8"),
        ("USER", "tester"),
        ("OPENAI_API_KEY", SECRET),
        ("MY_PLAIN_VAR", "plain-value"),
        ("EXTRA_ALLOWED", "extra-value"),
        ("TMPDIR", "/host/tmp"),
    ]
    .iter()
    .map(|(k, v)| (OsString::from(k), OsString::from(v)))
    .collect()
}

fn config() -> ExecConfig {
    ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(10),
        max_output_bytes: 1 << 20,
        env_inherit: Vec::new(),
        confine_mode: ConfineMode::Off,
        confine: ConfineSpec::default(),
        limits: Default::default(),
        grace: Duration::from_millis(500),
        host_env: Some(host_env()),
        namespaces: true,
        protected: None,
    }
}

fn started(config: ExecConfig) -> LocalShellExecutor {
    let ex = LocalShellExecutor::new(config);
    ex.start().unwrap();
    ex
}

fn run(ex: &LocalShellExecutor, command: &str) -> ExecResult {
    ex.exec(command, ExecOptions::default()).unwrap()
}

fn with_timeout(ex: &LocalShellExecutor, command: &str, timeout: Duration) -> ExecResult {
    let opts = ExecOptions {
        timeout: Some(timeout),
        ..ExecOptions::default()
    };
    ex.exec(command, opts).unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A marker unique to this test run: a `sleep` argument nothing else uses.
fn marker(tag: u32) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("300.{}{:09}{:05}", tag, nanos, std::process::id() % 100_000)
}

/// Pids of live processes whose command line contains `marker`.
fn survivors(marker: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = text(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            out.push((pid, cmdline));
        }
    }
    out
}

/// Starts every kind of escapee, each with the marker in its command line.
fn escapees(marker: &str) -> String {
    format!(
        "setsid sleep {m} & \
         nohup sleep {m} >/dev/null 2>&1 & \
         ( ( setsid sh -c 'trap \"\" TERM; sleep {m}; : {m}' & ) & ) ; \
         ( trap '' TERM; sleep {m} ) & \
         perl -e 'setpgrp(0,0); sleep 300' {m} 2>/dev/null & \
         setsid sh -c 'kill -STOP $$; sleep 300' {m} & \
         sleep 0.3; ",
        m = marker
    )
}

fn assert_none_survive(marker: &str) {
    let left = survivors(marker);
    assert!(left.is_empty(), "left running: {left:?}");
}

// --- exit codes -----------------------------------------------------------

#[test]
fn exit_code_is_the_shells() {
    let ex = started(config());
    let r = run(&ex, "echo hi; exit 3");
    assert_eq!(r.exit_code, 3);
    assert_eq!(text(&r.stdout), "hi\n");
    assert!(!r.timed_out && !r.aborted && !r.truncated);
    assert_eq!(run(&ex, "true").exit_code, 0);
    let r = run(&ex, "echo oops >&2; false");
    assert_eq!(r.exit_code, 1);
    assert_eq!(text(&r.stderr), "oops\n");
}

#[test]
fn a_signal_gives_128_plus_the_signal() {
    let ex = started(config());
    assert_eq!(run(&ex, "kill -9 $$").exit_code, 137);
    assert_eq!(run(&ex, "kill -TERM $$").exit_code, 143);
    // The shell's convention: a command that exits 137 itself reads the
    // same, and nothing else in the result tells the two apart (the
    // documented limit, pinned here).
    let killed = run(&ex, "kill -9 $$");
    let exited = run(&ex, "exit 137");
    assert_eq!(
        (
            killed.exit_code,
            killed.timed_out,
            killed.aborted,
            killed.limit
        ),
        (
            exited.exit_code,
            exited.timed_out,
            exited.aborted,
            exited.limit
        )
    );
}

#[test]
fn timeout_gives_124_promptly() {
    let ex = started(config());
    let t = Instant::now();
    let r = with_timeout(&ex, "sleep 5", Duration::from_millis(200));
    let took = t.elapsed();
    assert_eq!(r.exit_code, 124);
    assert!(r.timed_out && !r.aborted);
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    eprintln!("timeout 200 ms: returned after {took:?}");
}

#[test]
fn abort_from_another_thread_gives_130() {
    let ex = started(config());
    let signal = AbortSignal::new();
    let remote = signal.clone();
    let aborter = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        remote.abort();
    });
    let t = Instant::now();
    let opts = ExecOptions {
        abort: Some(signal.clone()),
        ..ExecOptions::default()
    };
    let r = ex.exec("sleep 5", opts).unwrap();
    let took = t.elapsed();
    aborter.join().unwrap();
    assert_eq!(r.exit_code, 130);
    assert!(r.aborted && !r.timed_out);
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    eprintln!("abort after 200 ms: returned after {took:?}");
    // An aborted signal ends later execs at once.
    let opts = ExecOptions {
        abort: Some(signal),
        ..ExecOptions::default()
    };
    assert_eq!(ex.exec("sleep 5", opts).unwrap().exit_code, 130);
}

#[test]
fn a_shell_without_a_slash_is_found_on_the_childs_path() {
    // The child's PATH (from the plan) is searched, as `std` did.
    let ex = started(ExecConfig {
        shell: PathBuf::from("sh"),
        ..config()
    });
    let r = run(&ex, "echo found; exit 3");
    assert_eq!(r.exit_code, 3, "{}", text(&r.stderr));
    assert_eq!(text(&r.stdout), "found\n");

    let ex = started(ExecConfig {
        shell: PathBuf::from("sandgate-no-such-shell"),
        ..config()
    });
    let r = run(&ex, "echo hi");
    assert_eq!(r.exit_code, 127);
    assert!(r.stdout.is_empty());
    assert!(
        text(&r.stderr).contains("cannot start"),
        "{}",
        text(&r.stderr)
    );
}

#[test]
fn the_cached_environment_plan_is_per_executor_and_still_redacts() {
    // The plan is cached per executor (and re-planned when the host
    // environment or the temporary directory changes): each executor keeps
    // its own, and the result reports the names passed.
    let a = started(config());
    let first = run(&a, "echo $MY_PLAIN_VAR");
    let again = run(&a, "echo $MY_PLAIN_VAR");
    assert_eq!(first.env_names_digest, again.env_names_digest);
    let b = started(ExecConfig {
        env_inherit: vec!["MY_PLAIN_VAR".into()],
        ..config()
    });
    let r = run(&b, "echo $MY_PLAIN_VAR");
    assert_eq!(text(&r.stdout), "plain-value\n");
    assert_ne!(r.env_names_digest, first.env_names_digest);
    // Redaction still uses the withheld values on every (cached) exec.
    for _ in 0..3 {
        let r = run(&a, &format!("echo {SECRET}"));
        assert!(!text(&r.stdout).contains(SECRET), "{}", text(&r.stdout));
    }
}

/// Where a file size limit is in force, `limit` names it whenever the
/// command ends with 128 + `SIGXFSZ`: a command that exits 153 itself, or
/// sends itself `SIGXFSZ`, reads as stopped by that limit (pinned: the
/// exit status alone cannot tell them apart). Without the limit, neither
/// names it.
#[test]
fn a_command_exiting_153_itself_reads_as_the_file_size_limit() {
    use sandgate_shellexec::limits::Limit;
    let limited = started(ExecConfig {
        confine: ConfineSpec {
            max_file_size: Some(1 << 20),
            ..ConfineSpec::default()
        },
        ..config()
    });
    for cmd in ["exit 153", "kill -XFSZ $$"] {
        let r = run(&limited, cmd);
        assert_eq!(r.exit_code, 153, "{cmd}");
        assert_eq!(r.limit, Some(Limit::FileSize), "{cmd}");
    }
    let free = started(config());
    for cmd in ["exit 153", "kill -XFSZ $$"] {
        let r = run(&free, cmd);
        assert_eq!(r.exit_code, 153, "{cmd}");
        assert_eq!(r.limit, None, "{cmd}");
    }
}

#[test]
fn a_missing_shell_gives_127() {
    let ex = started(ExecConfig {
        shell: PathBuf::from("/nonexistent/shell"),
        ..config()
    });
    let t = Instant::now();
    let r = run(&ex, "echo hi");
    assert_eq!(r.exit_code, 127);
    assert!(r.not_started, "the executor's own failure is marked");
    assert!(r.stdout.is_empty());
    assert!(
        text(&r.stderr).contains("cannot start"),
        "{}",
        text(&r.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(2));
}

/// A handler of the host's, for the test below.
extern "C" fn host_handler(_: libc::c_int) {}

/// A signal mask line (`SigBlk`, `SigIgn`, ...) of `/proc/<pid>/status`.
fn sig_mask(status: &str, field: &str) -> u64 {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(":\t"))
        .unwrap_or_else(|| panic!("no {field} in {status}"));
    u64::from_str_radix(line.trim(), 16).unwrap()
}

#[test]
fn the_shell_starts_with_signals_unblocked_and_at_their_defaults() {
    // The host has a caught signal and an ignored SIGPIPE (as every Rust
    // program does); the keeper starts with every signal blocked. The
    // command gets no signal blocked, and ignores what the host ignores
    // (as `execve` keeps it) but SIGPIPE (as `std` does for its children).
    let handler: extern "C" fn(libc::c_int) = host_handler;
    // SAFETY: installs an empty handler for a signal nothing else uses.
    unsafe { libc::signal(libc::SIGUSR2, handler as libc::sighandler_t) };
    let host = std::fs::read_to_string("/proc/self/status").unwrap();
    let pipe_bit = 1u64 << (libc::SIGPIPE - 1);
    assert_ne!(sig_mask(&host, "SigIgn") & pipe_bit, 0, "{host}");
    assert_ne!(sig_mask(&host, "SigCgt") & (1 << (libc::SIGUSR2 - 1)), 0);

    let ex = started(config());
    // Read by the shell itself with builtins: a forked `cat` could catch
    // the shell in the window where it blocks signals around a fork.
    let r = run(
        &ex,
        "while IFS= read -r l; do echo \"$l\"; done < /proc/self/status",
    );
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    let shell = text(&r.stdout);
    assert_eq!(sig_mask(&shell, "SigBlk"), 0, "{shell}");
    assert_eq!(
        sig_mask(&shell, "SigIgn"),
        sig_mask(&host, "SigIgn") & !pipe_bit,
        "{shell}"
    );
    // A signal the shell sends itself is delivered, with the default
    // action (terminate): 128 + SIGUSR2.
    let r = run(&ex, "kill -USR2 $$; echo survived");
    assert_eq!(r.exit_code, 128 + libc::SIGUSR2, "{}", text(&r.stdout));
    assert!(r.stdout.is_empty());
}

/// The scheduling of the thread that calls `exec`: its policy, real-time
/// priority, nice value and I/O priority (`ioprio_get`), each as the
/// kernel reports it for this thread.
fn thread_scheduling() -> (i32, i32, i32) {
    // SAFETY: plain calls on the calling thread (0 and its tid).
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        (
            libc::sched_getscheduler(0),
            libc::getpriority(libc::PRIO_PROCESS, tid),
            libc::syscall(libc::SYS_ioprio_get, 1, 0) as i32,
        )
    }
}

/// Sets the calling thread's policy (with priority `rt`), nice value and
/// I/O priority; whether each took.
fn set_thread_scheduling(policy: i32, rt: i32, nice: i32, ioprio: i32) -> [bool; 3] {
    // SAFETY: as above; `param` is a live local.
    unsafe {
        let param = libc::sched_param { sched_priority: rt };
        let tid = libc::gettid() as libc::id_t;
        [
            libc::sched_setscheduler(0, policy, &param) == 0,
            libc::setpriority(libc::PRIO_PROCESS, tid, nice) == 0,
            libc::syscall(libc::SYS_ioprio_set, 1, 0, ioprio) == 0,
        ]
    }
}

/// A host thread that runs real-time (`SCHED_RR`), at a raised priority
/// (nice -5) or in the real-time I/O class does not hand that to the
/// commands it runs: the command starts at `SCHED_OTHER`, nice 0 and the
/// best-effort I/O class, and (its `RLIMIT_RTPRIO` and `RLIMIT_NICE`
/// being 0, its `CAP_SYS_NICE` gone) cannot take any of them back.
/// Before, it inherited all three: a real-time busy loop starves the
/// host's work on its CPU, which the zero limits are there to prevent. The
/// host's thread is set so only where the test may (root with
/// `CAP_SYS_NICE`); elsewhere only the command's side is checked.
#[test]
fn env19_the_host_threads_real_time_scheduling_and_priority_are_not_inherited() {
    const IOPRIO_RT: i32 = (1 << 13) | 4;
    let before = thread_scheduling();
    let took = set_thread_scheduling(libc::SCHED_RR, 1, -5, IOPRIO_RT);
    let during = thread_scheduling();
    let modes = [
        (ConfineMode::BestEffort, true),
        (ConfineMode::BestEffort, false),
        (ConfineMode::Off, false),
    ];
    let runs = std::panic::catch_unwind(|| {
        modes.map(|(mode, namespaces)| {
            let ex = started(ExecConfig {
                confine_mode: mode,
                namespaces,
                ..config()
            });
            let cmd = "read -r l < /proc/$$/stat; echo \"$l\"; ionice -p $$; chrt -r -p 1 $$ 2>/dev/null && echo rt; \
                       renice -n -5 -p $$ >/dev/null 2>&1 && echo reniced; \
                       ionice -c 1 -p $$ 2>/dev/null && echo rt-io; exit 0";
            run(&ex, cmd)
        })
    });
    // Back to what the thread had, in an order each step is allowed in.
    let restored = set_thread_scheduling(
        before.0,
        0,
        before.1,
        if before.2 == 0 { 4 << 13 } else { before.2 },
    );
    let runs = runs.unwrap();
    if took != [true; 3] {
        eprintln!(
            "note: the host thread's scheduling could not be raised ({took:?}): only the \
             command is checked"
        );
    } else {
        assert_eq!(
            during,
            (libc::SCHED_RR, -5, IOPRIO_RT),
            "the setup did not take"
        );
        assert!(restored[0] && restored[1], "{restored:?}");
    }
    for ((mode, namespaces), r) in modes.iter().zip(&runs) {
        let out = text(&r.stdout);
        let stat = out.lines().next().unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // The shell's own (read with a builtin: on the floor only the
        // first process's `/proc/<pid>` is granted). After the name: field
        // 3 is the first; nice is 19, rt_priority 40, policy 41.
        let field = |n: usize| fields.get(n - 3).copied().unwrap_or("?");
        let what = format!(
            "{mode:?}, namespaces {namespaces}: {out}{}",
            text(&r.stderr)
        );
        assert_eq!((field(19), field(40), field(41)), ("0", "0", "0"), "{what}");
        let rest: Vec<&str> = out.lines().skip(1).collect();
        assert!(
            rest.first().is_some_and(|l| !l.starts_with("realtime")),
            "I/O class: {what}"
        );
        // Unconfined, root keeps CAP_SYS_NICE and may take them itself.
        if *mode != ConfineMode::Off {
            assert_eq!(rest.len(), 1, "the command took back a priority: {what}");
        }
    }
}

#[test]
fn a_command_not_found_is_the_shells_127() {
    let ex = started(config());
    let r = run(&ex, "/nonexistent/program");
    assert_eq!(r.exit_code, 127);
    assert!(!r.not_started, "the shell ran: its 127 is the command's");
}

// --- backstop and killing ----------------------------------------------------

#[test]
fn the_backstop_holds_against_a_child_ignoring_sigterm() {
    let ex = started(config());
    let timeout = Duration::from_millis(200);
    let t = Instant::now();
    let r = with_timeout(&ex, "trap '' TERM; sleep 30", timeout);
    let took = t.elapsed();
    assert_eq!(r.exit_code, 124);
    assert!(r.timed_out);
    assert!(
        took < timeout + Duration::from_millis(500) + BACKSTOP_MARGIN,
        "took {took:?}"
    );
    // It took the grace period, then SIGKILL.
    assert!(
        took >= timeout + Duration::from_millis(450),
        "took {took:?}"
    );
    eprintln!("SIGTERM ignored: returned after {took:?}");
}

/// The escapees really run while the command does: the tests below are
/// not vacuous.
#[test]
fn the_escapees_do_start() {
    let ex = Arc::new(started(config()));
    let m = marker(0);
    let cmd = format!("{} sleep 30", escapees(&m));
    let runner = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || with_timeout(&ex, &cmd, Duration::from_millis(1500)))
    };
    thread::sleep(Duration::from_millis(800));
    let during = survivors(&m);
    let sessions: std::collections::HashSet<String> = during
        .iter()
        .filter_map(|(pid, _)| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 2..];
            rest.split(' ').nth(3).map(str::to_owned)
        })
        .collect();
    let r = runner.join().unwrap();
    assert_eq!(r.exit_code, 124);
    // The shell, setsid sleep, nohup sleep, the double-forked sh and its
    // sleep, the TERM-proof subshell and its sleep, perl, the stopped sh.
    assert!(during.len() >= 8, "{during:?}");
    assert!(sessions.len() >= 3, "several sessions: {sessions:?}");
    assert_none_survive(&m);
}

#[test]
fn nothing_survives_a_timeout() {
    let ex = started(config());
    let m = marker(1);
    let cmd = format!("{} sleep 30", escapees(&m));
    let t = Instant::now();
    let r = with_timeout(&ex, &cmd, Duration::from_millis(800));
    let took = t.elapsed();
    assert_eq!(r.exit_code, 124);
    assert!(took < Duration::from_millis(800) + Duration::from_millis(500) + BACKSTOP_MARGIN);
    assert_none_survive(&m);
    eprintln!("escapees + timeout: returned after {took:?}");
}

#[test]
fn nothing_survives_an_abort() {
    let ex = started(config());
    let m = marker(2);
    let cmd = format!("{} sleep 30", escapees(&m));
    let signal = AbortSignal::new();
    let remote = signal.clone();
    let aborter = thread::spawn(move || {
        thread::sleep(Duration::from_millis(800));
        remote.abort();
    });
    let opts = ExecOptions {
        abort: Some(signal),
        ..ExecOptions::default()
    };
    let r = ex.exec(&cmd, opts).unwrap();
    aborter.join().unwrap();
    assert_eq!(r.exit_code, 130);
    assert_none_survive(&m);
}

#[test]
fn nothing_survives_a_quick_normal_exit() {
    let ex = started(config());
    let m = marker(3);
    let cmd = format!("{} echo done; exit 0", escapees(&m));
    let t = Instant::now();
    let r = run(&ex, &cmd);
    let took = t.elapsed();
    assert_eq!(r.exit_code, 0);
    assert!(!r.timed_out && !r.aborted);
    assert_eq!(text(&r.stdout), "done\n");
    assert_none_survive(&m);
    eprintln!("escapees + normal exit: returned after {took:?}");
}

/// Set in the copy of this test binary that plays the executor killed
/// while its command runs: `<namespaces 0|1>:<marker>`.
const KILLED_EXECUTOR: &str = "SANDGATE_TEST_KILLED_EXECUTOR";

/// The host process dies (SIGKILL) while a command runs, on the floor and
/// in namespaces: the command and everything it started end with it,
/// escapees included, instead of running on with no timeout.
#[test]
fn nothing_survives_the_executor_killed() {
    if let Ok(spec) = std::env::var(KILLED_EXECUTOR) {
        let (ns, m) = spec.split_once(':').unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ex = started(ExecConfig {
            confine_mode: ConfineMode::BestEffort,
            confine: ConfineSpec {
                write_dirs: vec![dir.path().to_path_buf()],
                ..ConfineSpec::default()
            },
            namespaces: ns == "1",
            default_timeout: Duration::from_secs(120),
            ..config()
        });
        // For the test to remove: this process never gets to dispose.
        println!("{}", ex.tmpdir().unwrap().display());
        run(&ex, &format!("{} sleep {m}; : {m}", escapees(m)));
        return;
    }
    for (tag, ns) in [(7, "0"), (8, "1")] {
        let m = marker(tag);
        let mut victim = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "--nocapture",
                "nothing_survives_the_executor_killed",
            ])
            .env(KILLED_EXECUTOR, format!("{ns}:{m}"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let tmpdir = {
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(victim.stdout.take().unwrap()).lines();
            lines
                .find_map(|l| l.ok().filter(|l| l.contains("sandgate-exec-")))
                .map(PathBuf::from)
        };
        let t = Instant::now();
        while survivors(&m).len() < 6 && t.elapsed() < Duration::from_secs(20) {
            thread::sleep(Duration::from_millis(50));
        }
        thread::sleep(Duration::from_millis(500));
        let started = survivors(&m).len();
        victim.kill().unwrap();
        victim.wait().unwrap();
        if let Some(dir) = &tmpdir {
            let _ = fs::remove_dir_all(dir);
        }
        let t = Instant::now();
        while !survivors(&m).is_empty() && t.elapsed() < Duration::from_secs(5) {
            thread::sleep(Duration::from_millis(50));
        }
        let left = survivors(&m);
        for (pid, _) in &left {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(*pid as i32).unwrap(),
                rustix::process::Signal::KILL,
            );
        }
        assert!(
            started >= 6,
            "namespaces {ns}: only {started} processes started"
        );
        assert!(
            left.is_empty(),
            "namespaces {ns}: left running after the executor was killed: {left:?}"
        );
    }
}

#[test]
fn a_detached_child_with_closed_pipes_is_killed_too() {
    let ex = started(config());
    let m = marker(4);
    let cmd = format!("setsid sleep {m} </dev/null >/dev/null 2>&1 & exit 5");
    let r = run(&ex, &cmd);
    assert_eq!(r.exit_code, 5);
    assert_none_survive(&m);
}

#[test]
fn an_endless_timeout_does_not_overflow() {
    let ex = started(config());
    let r = with_timeout(&ex, "exit 4", Duration::MAX);
    assert_eq!(r.exit_code, 4);
}

#[test]
fn a_command_that_closes_its_output_still_times_out() {
    let ex = started(config());
    let m = marker(6);
    let cmd = format!("exec >&- 2>&-; sleep {m}");
    let t = Instant::now();
    let r = with_timeout(&ex, &cmd, Duration::from_millis(300));
    assert_eq!(r.exit_code, 124);
    assert!(t.elapsed() < Duration::from_millis(1500));
    assert_none_survive(&m);
}

#[test]
fn a_command_that_closes_its_output_and_exits_normally() {
    let ex = started(config());
    let r = run(&ex, "echo before; exec >&- 2>&-; sleep 0.2; exit 9");
    assert_eq!(r.exit_code, 9);
    assert_eq!(text(&r.stdout), "before\n");
}

/// A process whose main thread called `pthread_exit` shows as a zombie in
/// `/proc` while its other threads run and hold the pipes: it is killed
/// too, without waiting for the backstop.
#[test]
fn a_zombie_leader_with_live_threads_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("still-alive");
    // The thread writes its flag once the test makes `go`, after the call
    // has answered: a thread that outlived the call writes within one
    // 10 ms poll of it, and the test looks 500 ms later. Before, it slept
    // 1.5 s and the test waited 1.8 s from the call's start, twice.
    let go = dir.path().join("go");
    let script = format!(
        "import threading, time, ctypes, os\n\
         def late():\n    while not os.path.exists('{}'): time.sleep(0.01)\n    open('{}', 'w').write('x')\n\
         threading.Thread(target=late).start()\n\
         ctypes.CDLL(None).pthread_exit(None)\n",
        go.display(),
        flag.display()
    );
    fs::write(dir.path().join("z.py"), script).unwrap();
    let ex = started(config());
    for (cmd, code) in [
        (
            format!("python3 '{}'; sleep 30", dir.path().join("z.py").display()),
            124,
        ),
        (
            format!(
                "python3 '{}' & sleep 0.1; exit 0",
                dir.path().join("z.py").display()
            ),
            0,
        ),
    ] {
        let t = Instant::now();
        let r = with_timeout(&ex, &cmd, Duration::from_millis(300));
        let took = t.elapsed();
        assert_eq!(r.exit_code, code, "{}", text(&r.stderr));
        assert!(!r.timed_out || code == 124);
        assert!(took < Duration::from_millis(1400), "took {took:?}");
        fs::write(&go, "").unwrap();
        thread::sleep(Duration::from_millis(500));
        assert!(!flag.exists(), "the thread outlived the call");
        fs::remove_file(&go).unwrap();
    }
}

// --- environment --------------------------------------------------------------

#[test]
fn the_child_sees_only_allowlisted_variables() {
    let ex = started(config());
    let r = run(&ex, "env");
    let out = text(&r.stdout);
    let mut names: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n))
        .collect();
    names.sort();
    names.dedup();
    // The shell adds PWD (and may add SHLVL, `_`); nothing of the host's
    // beyond the allowlist.
    let shell_own = ["PWD", "SHLVL", "_", "OLDPWD"];
    let got: Vec<&str> = names
        .into_iter()
        .filter(|n| !shell_own.contains(n))
        .collect();
    assert_eq!(
        got,
        ["HOME", "LANG", "PATH", "TEMP", "TMP", "TMPDIR", "USER"],
        "{out}"
    );
    assert!(!out.contains("OPENAI_API_KEY"));
    assert!(!out.contains("MY_PLAIN_VAR"));
}

#[test]
fn host_variables_that_change_what_the_shell_runs_do_not_reach_it() {
    // Each would run or load something of the host's choosing in bash or
    // in the tools it starts, were it passed.
    let dir = tempfile::tempdir().unwrap();
    let rc = dir.path().join("rc.sh");
    let ran = dir.path().join("ran");
    fs::write(&rc, format!("echo sourced > {}\n", ran.display())).unwrap();
    let rc = rc.to_str().unwrap().to_owned();
    let mut host = host_env();
    for (name, value) in [
        ("LD_PRELOAD", "/nonexistent/preload.so"),
        ("LD_LIBRARY_PATH", "/nonexistent"),
        ("LD_AUDIT", "/nonexistent/audit.so"),
        ("BASH_ENV", rc.as_str()),
        ("ENV", rc.as_str()),
        ("SHELLOPTS", "xtrace"),
        ("BASHOPTS", "extdebug"),
        ("PS4", "$(echo ps4 >&2)"),
        ("PROMPT_COMMAND", "echo prompt"),
        ("BASH_FUNC_echo%%", "() { builtin echo hijacked; }"),
        ("IFS", "e"),
        ("GCONV_PATH", "/nonexistent"),
        ("PYTHONSTARTUP", rc.as_str()),
        ("PYTHONPATH", "/nonexistent"),
        ("NODE_OPTIONS", "--require /nonexistent.js"),
        ("PERL5OPT", "-Mstrict"),
        ("RUBYOPT", "-rnonexistent"),
        ("GIT_SSH_COMMAND", "touch /tmp/pwned"),
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_EXEC_PATH", "/nonexistent"),
    ] {
        host.push((name.into(), value.into()));
    }
    let ex = started(ExecConfig {
        shell: PathBuf::from("/bin/bash"),
        host_env: Some(host),
        ..config()
    });
    let r = run(&ex, "echo plain; env");
    let out = text(&r.stdout);
    assert!(out.starts_with("plain\n"), "{out}");
    assert_eq!(text(&r.stderr), "", "{out}");
    for name in [
        "LD_",
        "BASH_ENV=",
        "ENV=",
        "SHELLOPTS=",
        "BASHOPTS=",
        "PS4=",
        "PROMPT_COMMAND=",
        "BASH_FUNC",
        "IFS=",
        "GCONV_PATH=",
        "PYTHON",
        "NODE_OPTIONS=",
        "PERL5OPT=",
        "RUBYOPT=",
        "GIT_",
    ] {
        assert!(
            !out.lines().any(|l| l.starts_with(name)),
            "{name} reached the shell: {out}"
        );
    }
    assert!(!ran.exists(), "the host's BASH_ENV or ENV was sourced");
}

#[test]
fn a_withheld_value_is_redacted() {
    let ex = started(config());
    let cmd = format!("echo \"key=$OPENAI_API_KEY\"; echo 'leak {SECRET}'; echo '{SECRET}' >&2");
    let r = run(&ex, &cmd);
    assert_eq!(
        text(&r.stdout),
        "key=\n\
         leak [REDACTED:OPENAI_API_KEY]\n"
    );
    assert_eq!(text(&r.stderr), "[REDACTED:OPENAI_API_KEY]\n");
}

/// Passphrases, JSON web tokens and URLs carrying a password are
/// credentials: a command's `env` never shows them, and their values are
/// redacted from its output when it finds them some other way (here,
/// printed from the command's own text, as from a file it read). A plain
/// URL inherited on purpose passes as it is.
#[test]
fn wire23_passphrases_jwts_and_password_urls_are_withheld_and_redacted() {
    const PASSPHRASE: &str = "gpg-passphrase-value-1";
    const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjaSJ9.c2lnbmF0dXJl";
    const DB_PASSWORD: &str = "db-password-value-2";
    let db_url = format!("postgres://app:{DB_PASSWORD}@db.internal:5432/app");
    let mut host = host_env();
    for (k, v) in [
        ("GPG_PASSPHRASE", PASSPHRASE),
        ("CI_JOB_JWT", JWT),
        ("DATABASE_URL", db_url.as_str()),
        ("SERVICE_URL", "https://example.com/plain"),
    ] {
        host.push((OsString::from(k), OsString::from(v)));
    }
    let ex = started(ExecConfig {
        host_env: Some(host),
        env_inherit: vec!["SERVICE_URL".into()],
        ..config()
    });
    let r = run(
        &ex,
        &format!(
            "env; echo 'p {PASSPHRASE}'; echo 'j {JWT}'; echo 'u {db_url}'; echo 'w {DB_PASSWORD}'"
        ),
    );
    let out = text(&r.stdout);
    for name in ["GPG_PASSPHRASE", "CI_JOB_JWT", "DATABASE_URL"] {
        assert!(
            !out.contains(&format!("{name}=")),
            "{name} reached the shell: {out}"
        );
    }
    assert!(
        out.contains("SERVICE_URL=https://example.com/plain\n"),
        "{out}"
    );
    for secret in [PASSPHRASE, JWT, DB_PASSWORD] {
        assert!(!out.contains(secret), "{secret} was shown: {out}");
    }
    assert!(out.contains("p [REDACTED:GPG_PASSPHRASE]\n"), "{out}");
    assert!(out.contains("j [REDACTED:CI_JOB_JWT]\n"), "{out}");
    assert!(out.contains("u [REDACTED:DATABASE_URL]\n"), "{out}");
    assert!(out.contains("w [REDACTED:DATABASE_URL]\n"), "{out}");
}

/// The executor's `Debug` names what it withholds and never prints a
/// value: neither a host variable's nor one the embedder added (the
/// egress proxy's credentials), as text or as bytes, before an exec or
/// after one planned the child's environment.
#[test]
fn debug_prints_no_withheld_value() {
    const ADDED: &str = "ghp_proxyCredential0123456789";
    let ex = started(config());
    ex.set_withheld_values(vec![(
        "net.credentials[0]".into(),
        ADDED.as_bytes().to_vec(),
    )]);
    let bytes = |s: &str| format!("{:?}", s.as_bytes());
    let inner = |s: &str| bytes(s).trim_matches(['[', ']']).to_owned();
    for when in ["before an exec", "after an exec"] {
        let shown = format!("{ex:?}");
        for value in [SECRET, ADDED] {
            assert!(
                !shown.contains(value) && !shown.contains(&inner(value)),
                "{when}, Debug shows a withheld value: {shown}"
            );
        }
        run(&ex, "true");
    }
}

/// What the embedder sets for every command from now on
/// (`set_withheld_values`, `set_child_env`) holds for every command run
/// after the call returns, also when another thread was planning the
/// child's environment meanwhile (an exec, or `redact` for an argv).
/// Before, that thread stored its plan, made from the values before the
/// call, as the cached plan once the call had cleared the cache: every
/// later command ran without the new variables and with output not
/// redacted of the new withheld value (an egress proxy's credential an
/// upstream echoed came back whole). Thousands of withheld host values
/// make a plan take long enough for the calls to land inside it; the
/// calls are made at several points of it.
#[test]
fn env19_a_plan_made_while_the_embedder_changes_the_environment_is_not_kept() {
    const ADDED: &str = "proxy-credential-0123456789";
    let mut host = host_env();
    for i in 0..5000 {
        host.push((
            format!("X{i}_TOKEN").into(),
            format!("host-value-{i:08}-abcdefghijklmnop").into(),
        ));
    }
    let cfg = ExecConfig {
        host_env: Some(host),
        ..config()
    };
    let probe = started(cfg.clone());
    let t = Instant::now();
    probe.redact(b"x");
    let plan = t.elapsed();
    probe.dispose().unwrap();
    let mut seen = Vec::new();
    for tenths in [3, 5, 6, 7, 8, 9] {
        let ex = Arc::new(started(cfg.clone()));
        let planning = {
            let ex = Arc::clone(&ex);
            thread::spawn(move || ex.redact(b"x"))
        };
        thread::sleep(plan * tenths / 10);
        ex.set_withheld_values(vec![(
            "net.credentials[0]".into(),
            ADDED.as_bytes().to_vec(),
        )]);
        ex.set_child_env(vec![("HTTP_PROXY".into(), "http://127.0.0.1:9".into())]);
        planning.join().unwrap();
        let r = run(&ex, &format!("echo \"$HTTP_PROXY {ADDED}\""));
        seen.push((tenths, text(&r.stdout)));
        ex.dispose().unwrap();
    }
    for (tenths, out) in &seen {
        assert_eq!(
            out, "http://127.0.0.1:9 [REDACTED:net.credentials[0]]\n",
            "changed at {tenths}/10 of a {plan:?} plan: {seen:?}"
        );
    }
}

#[test]
fn env_inherit_is_honoured_and_the_digest_is_stable() {
    let plain = started(config());
    let a = run(&plain, "true");
    let b = run(&plain, "true");
    assert_eq!(a.env_names_digest, b.env_names_digest);
    assert!(a.env_names_digest.starts_with("sha256:"));

    let inherit = started(ExecConfig {
        env_inherit: vec!["EXTRA_ALLOWED".into(), "OPENAI_API_KEY".into()],
        ..config()
    });
    let r = run(&inherit, "echo \"$EXTRA_ALLOWED $OPENAI_API_KEY\"");
    // Inherited on purpose: passed, and not redacted.
    assert_eq!(text(&r.stdout), format!("extra-value {SECRET}\n"));
    assert_ne!(r.env_names_digest, a.env_names_digest);
}

#[test]
fn the_host_environment_is_the_default_source() {
    let ex = started(ExecConfig {
        host_env: None,
        ..config()
    });
    let r = run(&ex, "echo \"$TMPDIR\"");
    assert_eq!(
        text(&r.stdout).trim_end(),
        ex.tmpdir().unwrap().to_str().unwrap()
    );
}

// --- output ----------------------------------------------------------------------

fn vm_hwm_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_flood_is_capped_drained_and_bounded_in_memory() {
    let cap = 1 << 20;
    let ex = started(ExecConfig {
        max_output_bytes: cap,
        ..config()
    });
    let before = vm_hwm_kib();
    let t = Instant::now();
    let r = with_timeout(
        &ex,
        "head -c 1000000000 /dev/zero; echo after >&2; exit 7",
        Duration::from_secs(60),
    );
    let took = t.elapsed();
    let after = vm_hwm_kib();
    assert_eq!(r.exit_code, 7, "the child ran to its end");
    assert!(r.truncated);
    assert!(!r.timed_out);
    assert_eq!(r.stdout.len() + r.stderr.len(), cap);
    assert!(r.stdout.iter().all(|&b| b == 0));
    assert!(
        after.saturating_sub(before) < 40 * 1024,
        "VmHWM grew from {before} kB to {after} kB"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    eprintln!("1 GB flood: {took:?}, VmHWM {before} kB -> {after} kB");
}

#[test]
fn an_endless_flood_still_times_out_and_a_background_flood_is_killed() {
    let ex = started(config());
    let t = Instant::now();
    let r = with_timeout(
        &ex,
        "cat /dev/zero & cat /dev/zero >&2",
        Duration::from_millis(400),
    );
    assert_eq!(r.exit_code, 124);
    assert!(r.truncated && r.timed_out);
    assert_eq!(r.stdout.len() + r.stderr.len(), 1 << 20);
    assert!(
        t.elapsed() < Duration::from_millis(2000),
        "{:?}",
        t.elapsed()
    );

    // A byte count no other process uses: the flooding process's marker.
    let m = marker(8).replace('.', "");
    let t = Instant::now();
    let r = run(&ex, &format!("head -c {m} /dev/zero & sleep 0.1; exit 6"));
    assert_eq!(r.exit_code, 6);
    assert!(r.truncated && !r.timed_out);
    assert!(
        t.elapsed() < Duration::from_millis(2000),
        "{:?}",
        t.elapsed()
    );
    assert_none_survive(&m);
}

#[test]
fn both_streams_share_the_cap() {
    let ex = started(ExecConfig {
        max_output_bytes: 10,
        ..config()
    });
    let r = run(&ex, "printf 'abcdef'; printf 'ghijkl' >&2");
    assert!(r.truncated);
    assert_eq!(r.stdout.len() + r.stderr.len(), 10);
    let r = run(&ex, "printf 'abc'");
    assert!(!r.truncated);
    assert_eq!(text(&r.stdout), "abc");
}

/// Redaction can make output longer than what was read: an 8-byte value
/// withheld under a long name becomes a marker five times its size, an
/// `Authorization:` line with a one-byte value gains `[REDACTED]`. The
/// cap is on what the call returns (and holds in memory), so the markers
/// count against it too.
#[test]
fn markers_count_against_the_cap() {
    let name = "A_LONG_NAME_FOR_THE_TOKEN_OF_THE_DEPLOY_PIPELINE";
    let mut env = host_env();
    env.push((name.into(), "tok-1234".into()));
    let ex = started(ExecConfig {
        max_output_bytes: 1000,
        host_env: Some(env),
        ..config()
    });
    for command in [
        "for i in $(seq 500); do echo tok-1234; done".to_owned(),
        "for i in $(seq 500); do echo tok-1234 >&2; echo x; done".to_owned(),
        "for i in $(seq 500); do echo Authorization:a; done".to_owned(),
    ] {
        let r = run(&ex, &command);
        let shown = r.stdout.len() + r.stderr.len();
        assert!(
            shown <= 1000,
            "{command}: {shown} bytes returned under a cap of 1000"
        );
        assert!(r.truncated, "{command}");
        assert!(
            !text(&r.stdout).contains("tok-1234") && !text(&r.stderr).contains("tok-1234"),
            "{command}"
        );
    }
    // What fits is returned whole, markers included.
    let r = run(&ex, "echo tok-1234; echo Authorization:a");
    assert!(!r.truncated);
    assert_eq!(
        text(&r.stdout),
        format!("[REDACTED:{name}]\nAuthorization:[REDACTED]\n")
    );
}

/// Every prefix of `secret` 8 bytes or longer that `out` shows.
fn prefixes_shown(out: &[u8], secret: &str) -> Vec<String> {
    let out = text(out);
    (8..=secret.len())
        .map(|k| &secret[..k])
        .filter(|p| out.contains(p))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_cap_never_returns_a_prefix_of_a_withheld_value() {
    let ex = started(ExecConfig {
        max_output_bytes: 100,
        ..config()
    });
    // The value cut by the cap at every position, in one write and with
    // the rest arriving later; and on stderr, where the cap is shared.
    for pad in 70..100 {
        for command in [
            format!("printf %0{pad}d 0; printf %s {SECRET}; echo after"),
            format!("printf %0{pad}d 0; printf %s {SECRET} | head -c 12; sleep 0.05; printf %s {SECRET} | tail -c +13"),
            format!("printf %0{pad}d 0 >&2; printf %s {SECRET} >&2; echo after >&2"),
        ] {
            let r = run(&ex, &command);
            assert!(r.truncated, "{command}");
            for out in [&r.stdout, &r.stderr] {
                assert_eq!(prefixes_shown(out, SECRET), Vec::<String>::new(), "{command}");
            }
        }
    }
    // A value that fits whole is redacted as before, the marker included.
    let r = run(&ex, &format!("printf %s {SECRET}; printf %0100d 0"));
    assert!(r.truncated);
    assert!(text(&r.stdout).starts_with("[REDACTED:OPENAI_API_KEY]"));
}

/// Whether the last bytes before the cap are shown must not depend on
/// whether they begin a withheld value: otherwise the cap is an oracle
/// that hands a command a value it was never given, a byte at a time
/// (print a guess just before the cap and one byte more, see whether the
/// guess came back). Only a whole value is ever told apart (redacted).
#[test]
fn the_cap_is_no_oracle_for_a_withheld_value() {
    let cap = 100;
    let ex = started(ExecConfig {
        max_output_bytes: cap,
        ..config()
    });
    // What the stream would show were nothing withheld: its first `cap`
    // bytes (the guess is never a whole value).
    let probe = |guess: &str, after: &str, stderr: bool| -> String {
        let pad = cap - guess.len();
        let to = if stderr { " >&2" } else { "" };
        let r = run(
            &ex,
            &format!("{{ printf %0{pad}d 0; printf %s '{guess}'; printf %s '{after}'; }}{to}"),
        );
        assert!(r.truncated, "{guess}");
        text(if stderr { &r.stderr } else { &r.stdout })
    };
    // The attack: grow a guess one byte at a time, keeping a byte when the
    // whole guess vanished at the cap. Guesses a token shape could begin
    // (`s` of `sk-`, `-` of a PEM line) vanish whatever is withheld: skip.
    let shapes = [
        "sk-",
        "ghp_",
        "github_pat_",
        "akia",
        "xoxb-",
        "bearer",
        "authorization",
        "-----begin ",
    ];
    let alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-";
    let mut known = String::new();
    'grow: while known.len() < SECRET.len() {
        for c in alphabet.chars() {
            let guess = format!("{known}{c}");
            let lower = guess.to_ascii_lowercase();
            if shapes.iter().any(|s| s.starts_with(&lower)) {
                continue;
            }
            let shown = probe(&guess, "X", false);
            if shown.len() <= cap - guess.len() {
                known = guess;
                continue 'grow;
            }
        }
        break;
    }
    assert!(known.len() < 2, "recovered the withheld value: {known}");
    // The same, put plainly, on both streams, and with the byte after the
    // guess continuing the value.
    for stderr in [false, true] {
        for (guess, after) in [
            ("c", "X"),
            ("correct-h", "X"),
            ("correct-h", "orse"),
            ("q", "X"),
        ] {
            let shown = probe(guess, after, stderr);
            assert_eq!(
                shown,
                format!("{}{guess}", "0".repeat(cap - guess.len())),
                "{guess}{after}"
            );
        }
    }
}

/// The cap is shared by both streams, and redaction markers count
/// against it: the bytes one stream holds back (a guess that may begin a
/// withheld value) keep their place, so the other stream's output, grown
/// past the cap by markers, cuts the same whether or not they do.
#[test]
fn the_shared_cap_is_no_oracle_across_streams() {
    let cap = 100;
    let ex = started(ExecConfig {
        max_output_bytes: cap,
        ..config()
    });
    // Each 16-byte line becomes 25 bytes: six of them overflow the cap.
    let inflate = "for i in 1 2 3 4 5 6; do printf 'Authorization:a\\n' >&2; done";
    for guess in ["c", "correct-h", "q", "quartz-ab"] {
        let r = run(&ex, &format!("printf %s '{guess}'; sleep 0.2; {inflate}"));
        assert!(r.truncated, "{guess}");
        assert_eq!(text(&r.stdout), guess, "stderr: {:?}", text(&r.stderr));
        assert_eq!(r.stdout.len() + r.stderr.len(), cap, "{guess}");
    }
    // Within one stream: markers push the cap back among the guessed
    // bytes (75 bytes of markers, 20 of padding, then the guess): the
    // first five are shown either way.
    for guess in ["correct-h", "quartz-ab"] {
        let r = run(
            &ex,
            &format!(
                "{{ for i in 1 2 3; do printf 'Authorization:a\\n'; done; \
                 printf %020d 0; printf %s '{guess}'; printf X; }} >&2"
            ),
        );
        assert!(r.truncated, "{guess}");
        assert_eq!(r.stderr.len(), cap, "{:?}", text(&r.stderr));
        assert!(
            text(&r.stderr).ends_with(&format!("0{}", &guess[..5])),
            "{:?}",
            text(&r.stderr)
        );
    }
}

#[test]
fn the_cap_never_returns_a_prefix_of_a_token_shape() {
    let ex = started(ExecConfig {
        max_output_bytes: 100,
        ..config()
    });
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    // The cap falls at every position of the token: from before its first
    // byte (pad 99) to after its last (pad 59).
    for pad in 100 - 1 - token.len()..100 {
        // A space before it: a token shape must not follow a letter or digit.
        let r = run(&ex, &format!("printf %0{pad}d 0; echo ' {token} more'"));
        assert!(r.truncated);
        let shown = prefixes_shown(&r.stdout, token);
        assert_eq!(
            shown,
            Vec::<String>::new(),
            "pad {pad}: {:?}",
            text(&r.stdout)
        );
    }
    // Output that ends at the cap without anything dropped keeps its tail.
    let r = run(&ex, "printf %095d 0; printf ' ghp_'");
    assert!(!r.truncated);
    assert!(text(&r.stdout).ends_with(" ghp_"));
}

#[test]
fn a_token_split_across_writes_is_redacted() {
    let ex = started(config());
    let r = run(
        &ex,
        "printf 'ghp_'; sleep 0.1; printf 'abcdefghijklmnopqrstuvwxyz0123\\n'",
    );
    assert_eq!(text(&r.stdout), "[REDACTED]\n");
}

/// A stream still open when the backstop ends the wait (its pipe held by
/// a process outside the command's tree, which the kill cannot reach) is
/// cut, not ended: what the redactor holds back may be the start of a
/// secret whose rest is still to come, and whether it holds anything back
/// must not show either (it would tell a guess that begins a withheld
/// value from one that does not). Nothing of that stream is returned.
#[test]
fn a_stream_cut_by_the_backstop_returns_no_prefix_of_a_withheld_value() {
    // Prints `printed` on a stdout that a holder outside the executor's tree
    // keeps open (received over a UNIX socket), so the backstop ends the
    // wait; answers what came back, and whether it said truncated.
    let cut = |printed: &str| -> (String, bool) {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("holder.sock");
        let mut holder = std::process::Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import socket, sys, time, os\n\
                 s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)\n\
                 print('ready', flush=True)\n\
                 c, _ = s.accept(); _, fds, _, _ = socket.recv_fds(c, 16, 4)\n\
                 time.sleep(8); os.write(fds[0], sys.argv[2].encode())\n",
                sock.to_str().unwrap(),
                &SECRET[20..],
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = [0u8; 6];
        std::io::Read::read_exact(holder.stdout.as_mut().unwrap(), &mut ready).unwrap();
        assert_eq!(&ready, b"ready\n");
        let ex = started(config());
        let command = format!(
            "/usr/bin/python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); \
             s.connect(sys.argv[1]); socket.send_fds(s, [b\"x\"], [1])' {sock}; \
             printf %s '{printed}'; sleep 30",
            sock = sock.display(),
        );
        let t = Instant::now();
        let r = with_timeout(&ex, &command, Duration::from_millis(300));
        let took = t.elapsed();
        let _ = holder.kill();
        let _ = holder.wait();
        assert_eq!(r.exit_code, 124, "{}", text(&r.stderr));
        // The backstop ended the wait, not the stream's end.
        assert!(
            took >= Duration::from_millis(300 + 500) + BACKSTOP_MARGIN / 2,
            "took {took:?}: {}",
            text(&r.stderr)
        );
        (text(&r.stdout), r.truncated)
    };
    let prefix = cut(&format!("plain {}", &SECRET[..20]));
    assert_eq!(
        prefixes_shown(prefix.0.as_bytes(), SECRET),
        Vec::<String>::new(),
        "{prefix:?}"
    );
    // The same length, beginning no withheld value: the same answer.
    let other = cut("plain quartz-horse-batte");
    assert_eq!(prefix, other);
    assert_eq!(prefix, (String::new(), true));
}

#[test]
fn inheritable_descriptors_of_the_host_do_not_reach_the_command() {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: opens /dev/null without O_CLOEXEC; the descriptor is owned
    // below.
    let raw = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
    assert!(raw >= 0);
    // SAFETY: `raw` was just opened and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let ex = started(config());
    let r = run(
        &ex,
        &format!(
            "[ -e /proc/self/fd/{n} ] && echo leaked || echo closed",
            n = fd.as_raw_fd()
        ),
    );
    assert_eq!(text(&r.stdout), "closed\n");
}

/// Where `close_range` cannot mark descriptors close-on-exec
/// (`CLOSE_RANGE_CLOEXEC` is Linux 5.11: a 5.9 or 5.10 kernel answers
/// `EINVAL`) or is refused altogether (a kernel before 5.9 answers
/// `ENOSYS`; a container runtime's seccomp profile older than the call
/// answers `EPERM` or `ENOSYS`), a descriptor the embedding program left
/// inheritable still does not reach the command: a file outside every
/// root, opened by the host without `O_CLOEXEC` at descriptor 7, was read
/// through `<&7` by the command (on the floor, in namespaces, and
/// unconfined alike), since the shell ignored the failure. Played by a
/// child test process whose seccomp filter gives `close_range` each of
/// those answers.
#[test]
fn leak20_inheritable_descriptors_do_not_reach_the_command_without_close_range_cloexec() {
    for (answer, call) in [("EINVAL", "cloexec"), ("ENOSYS", "all"), ("EPERM", "all")] {
        let out = std::process::Command::new("/proc/self/exe")
            .args([
                "--exact",
                "leak20_close_range_helper",
                "--include-ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                "SANDGATE_TEST_LEAK20_CLOSE_RANGE",
                format!("{answer}:{call}"),
            )
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "close_range answering {answer}: {text}"
        );
        assert!(text.contains("LEAK20-CHECKED"), "{text}");
    }
}

/// The child of the test above: refuses `close_range` as
/// `SANDGATE_TEST_LEAK20_CLOSE_RANGE` says (`<errno>:cloexec` for calls
/// with `CLOSE_RANGE_CLOEXEC`, `<errno>:all` for every call), holds a
/// host file at descriptor 7 without `O_CLOEXEC`, and runs a command that
/// reads descriptor 7 on the floor, in namespaces (where the host gives
/// them) and unconfined.
#[test]
#[ignore = "run by leak20_inheritable_descriptors_do_not_reach_the_command_without_close_range_cloexec"]
fn leak20_close_range_helper() {
    use std::collections::BTreeMap;
    use std::os::fd::{AsRawFd, FromRawFd};
    let Some(how) = std::env::var_os("SANDGATE_TEST_LEAK20_CLOSE_RANGE") else {
        return;
    };
    let how = how.into_string().unwrap();
    let (answer, call) = how.split_once(':').unwrap();
    let errno = match answer {
        "EINVAL" => libc::EINVAL,
        "ENOSYS" => libc::ENOSYS,
        "EPERM" => libc::EPERM,
        other => panic!("unknown answer {other}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("host-secret");
    fs::write(&secret, "leak20-descriptor-secret\n").unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    let file = fs::File::open(&secret).unwrap();
    // SAFETY: dup2 onto descriptor 7, which nothing else of this process
    // uses; the copy is inheritable (dup2 clears close-on-exec) and owned
    // below.
    let seven = unsafe { libc::dup2(file.as_raw_fd(), 7) };
    assert_eq!(seven, 7);
    // SAFETY: descriptor 7 was just made and is owned by nothing else.
    let _seven = unsafe { OwnedFd::from_raw_fd(seven) };
    let rule = match call {
        "cloexec" => vec![
            seccompiler::SeccompRule::new(vec![seccompiler::SeccompCondition::new(
                2,
                seccompiler::SeccompCmpArgLen::Dword,
                seccompiler::SeccompCmpOp::MaskedEq(libc::CLOSE_RANGE_CLOEXEC as u64),
                libc::CLOSE_RANGE_CLOEXEC as u64,
            )
            .unwrap()])
            .unwrap(),
        ],
        _ => Vec::new(),
    };
    let filter = seccompiler::SeccompFilter::new(
        BTreeMap::from([(libc::SYS_close_range, rule)]),
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(errno as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    let prog: seccompiler::BpfProgram = filter.try_into().unwrap();
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers only.
    let nnp = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(nnp, 0);
    // This thread (the one that starts the executors below) and its
    // children run under the filter.
    seccompiler::apply_filter(&prog).unwrap();

    let probe = "if read -r line <&7; then echo \"leaked $line\"; else echo closed; fi";
    for (mode, namespaces) in [
        (ConfineMode::BestEffort, false),
        (ConfineMode::BestEffort, true),
        (ConfineMode::Off, false),
    ] {
        let ex = started(ExecConfig {
            confine_mode: mode,
            confine: ConfineSpec {
                write_dirs: vec![work.clone()],
                ..ConfineSpec::default()
            },
            namespaces,
            ..config()
        });
        let r = run(&ex, probe);
        assert_eq!(
            text(&r.stdout),
            "closed\n",
            "close_range answering {answer} ({call}), {mode:?}, namespaces {}: {}",
            r.confined.namespaces,
            text(&r.stderr)
        );
    }
    println!("LEAK20-CHECKED");
}

// --- concurrency, cwd, session ------------------------------------------------------

#[test]
fn a_large_capture_arrives_whole_and_in_order() {
    // 4.5 MB of numbered lines: the output buffer grows (and is mapped
    // ahead past 1 MiB) several times on the way; every byte must land
    // where it belongs. (Small enough not to disturb the flood test's
    // measure of this process's peak memory.)
    let ex = started(ExecConfig {
        max_output_bytes: 64 << 20,
        ..config()
    });
    let r = run(&ex, "seq 1 600000");
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    assert!(!r.truncated);
    let want: String = (1..=600_000).map(|n| format!("{n}\n")).collect();
    assert!(want.len() > 4_000_000);
    assert_eq!(r.stdout.len(), want.len());
    assert!(r.stdout == want.as_bytes(), "the capture differs");
}

#[test]
fn only_a_busy_stream_gets_a_wider_pipe() {
    // The executor widens a stream's pipe once a megabyte came through it,
    // and leaves quiet streams at the system default. When `head` has
    // written its 2 MB they are in the executor or in a pipe of at most
    // 1 MiB, so the executor has read past the megabyte by then: no wait
    // is needed before asking again.
    let ex = started(ExecConfig {
        max_output_bytes: 8 << 20,
        ..config()
    });
    let sizes = "python3 -c 'import fcntl, sys; \
                 print(*(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) for fd in (1, 2)), file=sys.stderr)'";
    let r = run(&ex, &format!("{sizes}; head -c 2000000 /dev/zero; {sizes}"));
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    assert_eq!(r.stdout.len(), 2_000_000);
    let sizes: Vec<Vec<u64>> = text(&r.stderr)
        .lines()
        .map(|l| l.split(' ').map(|n| n.parse().unwrap()).collect())
        .collect();
    let [before, after] = &sizes[..] else {
        panic!("two lines of sizes: {sizes:?}");
    };
    assert!(before[0] < 1 << 20, "stdout wide from the start: {sizes:?}");
    assert_eq!(after[0], 1 << 20, "stdout not widened: {sizes:?}");
    assert_eq!(after[1], before[1], "quiet stderr was widened: {sizes:?}");
}

#[test]
fn concurrent_execs_from_four_threads() {
    let ex = Arc::new(started(config()));
    let t = Instant::now();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let ex = Arc::clone(&ex);
            thread::spawn(move || {
                let mut out = Vec::new();
                for j in 0..5 {
                    let r = run(&ex, &format!("sleep 0.1; echo {i}-{j}; exit {i}"));
                    assert_eq!(r.exit_code, i);
                    out.push(text(&r.stdout));
                }
                out
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let out = h.join().unwrap();
        let want: Vec<String> = (0..5).map(|j| format!("{i}-{j}\n")).collect();
        assert_eq!(out, want);
    }
    // Four threads of five 100 ms commands each run side by side.
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
}

#[test]
fn quick_execs_in_a_busy_host_leave_its_memory_intact() {
    // The keeper and the shell run in the executor's memory until the
    // shell's execve: while four threads run short commands, two others
    // fill and check heap blocks of every size, so a stray write by either
    // (or a block freed too early and reused) shows as a wrong byte.
    let ex = Arc::new(started(config()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churners: Vec<_> = (0..2u8)
        .map(|k| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut rounds = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 10 {
                    let blocks: Vec<Vec<u8>> = (0..64usize)
                        .map(|n| vec![k.wrapping_add(n as u8); 1 + n * 4099])
                        .collect();
                    for (n, b) in blocks.iter().enumerate() {
                        let want = k.wrapping_add(n as u8);
                        assert!(b.iter().all(|&x| x == want), "heap block {n} changed");
                    }
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    let runners: Vec<_> = (0..4)
        .map(|i| {
            let ex = Arc::clone(&ex);
            thread::spawn(move || {
                for j in 0..40 {
                    let r = run(&ex, &format!("echo {i}-{j}"));
                    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
                    assert_eq!(text(&r.stdout), format!("{i}-{j}\n"));
                }
            })
        })
        .collect();
    for h in runners {
        h.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in churners {
        assert!(h.join().unwrap() >= 10);
    }
}

fn open_dir(path: &Path) -> OwnedFd {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap()
}

#[test]
fn cwd_descriptor_is_where_the_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub dir");
    fs::create_dir(&sub).unwrap();
    let ex = started(config());
    let opts = ExecOptions {
        cwd: Some(open_dir(&sub)),
        ..ExecOptions::default()
    };
    let r = ex.exec("pwd; echo x > made", opts).unwrap();
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    assert_eq!(
        text(&r.stdout).trim_end(),
        sub.canonicalize().unwrap().to_str().unwrap()
    );
    assert!(sub.join("made").exists());
}

#[test]
fn exec_before_start_is_not_started() {
    let ex = LocalShellExecutor::new(config());
    let err = ex.exec("true", ExecOptions::default()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotStarted);
    ex.start().unwrap();
    assert_eq!(run(&ex, "exit 0").exit_code, 0);
    ex.dispose().unwrap();
    let err = ex.exec("true", ExecOptions::default()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotStarted);
}

#[test]
fn the_private_tmpdir_is_the_childs_and_dispose_removes_it() {
    use std::os::unix::fs::PermissionsExt;
    let ex = started(config());
    let tmp = ex.tmpdir().unwrap();
    assert!(tmp.starts_with(std::env::temp_dir()));
    let mode = fs::metadata(&tmp).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let r = run(
        &ex,
        "echo \"$TMPDIR|$TMP|$TEMP\"; echo data > \"$TMPDIR/f\"",
    );
    let t = tmp.to_str().unwrap();
    assert_eq!(text(&r.stdout), format!("{t}|{t}|{t}\n"));
    assert!(tmp.join("f").exists());
    ex.dispose().unwrap();
    assert!(!tmp.exists());
    // Dispose twice is fine.
    ex.dispose().unwrap();
}

const RELATIVE_TMPDIR: &str = "SANDGATE_TEST_RELATIVE_TMPDIR";

/// A host whose `TMPDIR` is a relative name (`TMPDIR=tmp`) still gives
/// each command its private temporary directory, by an absolute path: the
/// command runs in another directory (the write root), where a relative
/// `TMPDIR` would name a directory the executor never made (`mktemp`
/// failed) or one the command made itself in the workspace. Before, the
/// command got the relative name. Run in a child process started in a
/// directory of its own, with the relative `TMPDIR`, on the floor and in
/// namespaces; the child's dispose removes the directory. An empty
/// `TMPDIR` names no directory and is taken as unset (`/tmp`), where
/// before the directory was made in the host's working directory.
#[test]
fn env19_a_relative_host_tmpdir_still_names_the_private_directory() {
    if let Some(given) = std::env::var_os(RELATIVE_TMPDIR) {
        let here = std::env::current_dir().unwrap();
        // An empty TMPDIR is no directory: the default's.
        let base = if given.is_empty() {
            PathBuf::from("/tmp")
        } else {
            here.join(given)
        };
        let work = here.join("work");
        fs::create_dir(&work).unwrap();
        for (mode, ns) in [(ConfineMode::Off, false), (ConfineMode::BestEffort, true)] {
            let ex = started(ExecConfig {
                confine_mode: mode,
                confine: ConfineSpec {
                    write_dirs: vec![work.clone()],
                    ..ConfineSpec::default()
                },
                namespaces: ns,
                ..config()
            });
            let tmp = ex.tmpdir().unwrap();
            let opts = ExecOptions {
                cwd: Some(open_dir(&work)),
                ..ExecOptions::default()
            };
            let r = ex
                .exec("echo \"$TMPDIR|$TMP|$TEMP\"; mktemp", opts)
                .unwrap();
            let out = text(&r.stdout);
            println!(
                "{mode:?}: tmpdir {} out {out:?} err {:?}",
                tmp.display(),
                text(&r.stderr)
            );
            assert!(tmp.is_absolute(), "{mode:?}: {}", tmp.display());
            assert!(tmp.starts_with(&base), "{mode:?}: {}", tmp.display());
            let t = tmp.to_str().unwrap();
            let mut lines = out.lines();
            assert_eq!(
                lines.next(),
                Some(format!("{t}|{t}|{t}").as_str()),
                "{mode:?}: {out}"
            );
            let made = PathBuf::from(lines.next().unwrap_or_default());
            assert!(
                made.starts_with(&tmp) && made.is_file(),
                "{mode:?}: {out} {}",
                text(&r.stderr)
            );
            assert_eq!(r.exit_code, 0, "{mode:?}: {}", text(&r.stderr));
            ex.dispose().unwrap();
            assert!(!tmp.exists(), "{mode:?}: dispose left {}", tmp.display());
        }
        assert_eq!(fs::read_dir(here.join("rel")).unwrap().count(), 0);
        assert_eq!(fs::read_dir(&work).unwrap().count(), 0);
        return;
    }
    for given in ["rel", ""] {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("rel")).unwrap();
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "--nocapture",
                "env19_a_relative_host_tmpdir_still_names_the_private_directory",
            ])
            .current_dir(dir.path())
            .env(RELATIVE_TMPDIR, given)
            .env("TMPDIR", given)
            .output()
            .unwrap();
        assert!(
            child.status.success(),
            "TMPDIR={given:?}: {}\n{}",
            text(&child.stdout),
            text(&child.stderr)
        );
    }
}

/// The command owns its TMPDIR while it runs: it can take the owner's
/// permissions away from it and from what it made in it, and a command
/// run as root on the floor can make entries immutable or append-only.
/// None of that keeps dispose from removing it, on the floor and in
/// namespaces.
#[test]
fn dispose_removes_a_tmpdir_the_command_locked() {
    let is_root = rustix::process::geteuid().is_root();
    for namespaces in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        fs::create_dir(&work).unwrap();
        let ex = started(ExecConfig {
            confine_mode: ConfineMode::BestEffort,
            confine: ConfineSpec {
                write_dirs: vec![work],
                ..ConfineSpec::default()
            },
            namespaces,
            ..config()
        });
        let tmp = ex.tmpdir().unwrap();
        // chattr needs a capability a command in namespaces lacks; it
        // fails there and on a filesystem without inode flags.
        let r = run(
            &ex,
            "set -e; cd \"$TMPDIR\"; mkdir -p a/b c i; echo x > a/b/f; echo y > c/g; \
             echo z > i/h; ln -s / c/up; chmod 000 a/b a c; \
             chattr +i a/b/f 2>/dev/null || true; chattr +a c 2>/dev/null || true; \
             chattr +i i 2>/dev/null || true; chmod 0 \"$TMPDIR\"; echo locked",
        );
        assert_eq!(text(&r.stdout), "locked\n", "{}", text(&r.stderr));
        let locked_as = if is_root { "root" } else { "not root" };
        let disposed = ex.dispose();
        let left = tmp.exists();
        if left && is_root {
            // Do not leave it behind for the next test run.
            let _ = std::process::Command::new("chattr")
                .args(["-R", "-i", "-a"])
                .arg(&tmp)
                .status();
            let _ = fs::remove_dir_all(&tmp);
        }
        assert!(
            disposed.is_ok() && !left,
            "namespaces {namespaces}, {locked_as}: dispose {disposed:?}, tmpdir left: {left}"
        );
    }
}

const DEEP_TREE: &str = "SANDGATE_TEST_DEEP22_TREE";

/// A command can fill its TMPDIR with a chain of directories thousands of
/// levels deep (`mkdir d; cd d` in a loop goes past PATH_MAX). Dispose
/// removed it with the standard library's recursive removal, a stack frame
/// and a descriptor per level: a chain of 15,000 overflowed the 2 MiB
/// stack of the thread that disposed (the host process aborted), and one
/// deeper than the descriptor limit failed dispose with EMFILE and left the
/// directory, with what the command put there, on the host. Run in a child
/// process (an overflow aborts it); the command makes the top of the chain
/// and the test the rest, as the command would, one `mkdirat` below the
/// last. The command can also take the permissions away from a directory
/// deep in the chain (`chmod 000`, or `chmod 500`, no write): that kept
/// the directory from a host not run as root when it lay deeper than 512
/// levels, the most the opening up went.
#[test]
fn deep22_dispose_removes_a_tmpdir_thousands_of_levels_deep() {
    use rustix::fs::{Mode, OFlags};
    if let Some(how) = std::env::var_os(DEEP_TREE) {
        let how = how.into_string().unwrap();
        let parts: Vec<usize> = how.split(',').map(|p| p.parse().unwrap()).collect();
        let (depth, nofile) = (parts[0], parts[1] as u64);
        // Levels locked once made: no permissions, or no write.
        let (shut, read_only) = (parts.get(2).copied(), parts.get(3).copied());
        let mut locked = Vec::new();
        if nofile > 0 {
            use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
            let hard = getrlimit(Resource::Nofile).maximum;
            setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(nofile),
                    maximum: hard,
                },
            )
            .unwrap();
        }
        let ex = started(config());
        let tmp = ex.tmpdir().unwrap();
        println!("tmpdir {}", tmp.display());
        let r = run(
            &ex,
            "cd \"$TMPDIR\" && mkdir d && echo x > d/f && echo made",
        );
        assert_eq!(text(&r.stdout), "made\n", "{}", text(&r.stderr));
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut dir = rustix::fs::open(tmp.join("d"), flags, Mode::empty()).unwrap();
        for level in 0..depth {
            rustix::fs::mkdirat(&dir, "d", Mode::from_raw_mode(0o700)).unwrap();
            if level % 1000 == 0 {
                let f = rustix::fs::openat(
                    &dir,
                    "f",
                    OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .unwrap();
                drop(f);
            }
            dir = rustix::fs::openat(&dir, "d", flags, Mode::empty()).unwrap();
            if Some(level) == shut {
                locked.push((dir.try_clone().unwrap(), 0));
            }
            if Some(level) == read_only {
                locked.push((dir.try_clone().unwrap(), 0o500));
            }
        }
        drop(dir);
        // Root, as a command run as root with confinement off can, pins
        // them too (where the filesystem has inode flags), and a file.
        let pin = |fd: &OwnedFd, flag: rustix::fs::IFlags| {
            if rustix::process::geteuid().is_root() {
                if let Ok(flags) = rustix::fs::ioctl_getflags(fd) {
                    let _ = rustix::fs::ioctl_setflags(fd, flags | flag);
                }
            }
        };
        if !locked.is_empty() {
            let f = rustix::fs::open(tmp.join("d/f"), OFlags::RDONLY, Mode::empty()).unwrap();
            pin(&f, rustix::fs::IFlags::IMMUTABLE);
        }
        for (fd, mode) in locked {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).unwrap();
            pin(&fd, rustix::fs::IFlags::APPEND);
        }
        // A thread's default stack, as a host's worker threads have.
        let disposed = thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || ex.dispose())
            .unwrap()
            .join()
            .unwrap();
        let left = tmp.exists();
        assert!(
            disposed.is_ok() && !left,
            "{depth} levels, descriptor limit {nofile}: dispose {disposed:?}, left: {left}"
        );
        return;
    }
    // The last locks two directories past the depth the opening up went
    // to (512): they kept a command's TMPDIR from a host not run as root.
    for how in ["15000,0", "3000,256", "700,0,650,600"] {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "--nocapture",
                "deep22_dispose_removes_a_tmpdir_thousands_of_levels_deep",
            ])
            .env(DEEP_TREE, how)
            .output()
            .unwrap();
        let out = text(&child.stdout);
        if let Some(tmp) = out.lines().find_map(|l| l.strip_prefix("tmpdir ")) {
            // What a failed dispose left, for the next run's sake.
            if rustix::process::geteuid().is_root() {
                let _ = std::process::Command::new("chattr")
                    .args(["-R", "-i", "-a", tmp])
                    .status();
            }
            let _ = std::process::Command::new("chmod")
                .args(["-R", "u+rwx", tmp])
                .status();
            let _ = std::process::Command::new("rm").args(["-rf", tmp]).status();
        }
        assert!(
            child.status.success(),
            "{how}: {:?}\n{out}\n{}",
            child.status,
            text(&child.stderr)
        );
    }
}

#[test]
fn dispose_ends_running_commands() {
    let ex = Arc::new(started(config()));
    let m = marker(5);
    let runner = {
        let ex = Arc::clone(&ex);
        let cmd = format!("setsid sleep {m} & sleep 30");
        thread::spawn(move || run(&ex, &cmd))
    };
    thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    ex.dispose().unwrap();
    assert!(t.elapsed() < Duration::from_secs(3));
    let r = runner.join().unwrap();
    assert_eq!(r.exit_code, 130);
    assert_none_survive(&m);
}

// --- confinement ---------------------------------------------------------------------

#[test]
fn best_effort_confines_the_shell() {
    if kernel_abi().is_none() {
        eprintln!("no Landlock on this kernel: skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    fs::create_dir(&root).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(root.join("in.txt"), "inside\n").unwrap();
    fs::write(outside.join("secret"), "top secret\n").unwrap();
    let ex = started(ExecConfig {
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec {
            read_dirs: vec![root.clone()],
            ..ConfineSpec::default()
        },
        ..config()
    });
    let cmd = format!(
        "cat '{}'; cat '{}' || echo denied; echo t > \"$TMPDIR/ok\" && echo wrote",
        root.join("in.txt").display(),
        outside.join("secret").display()
    );
    let r = run(&ex, &cmd);
    assert!(r.confined.fs, "{:?}", r.confined);
    assert_eq!(r.confined.mode, Some(ConfineMode::BestEffort));
    assert_eq!(
        text(&r.stdout),
        "inside\ndenied\nwrote\n",
        "{}",
        text(&r.stderr)
    );
    assert!(!text(&r.stdout).contains("top secret"));
}

/// With signal scoping (Landlock ABI 6) the command cannot kill its keeper
/// (the one way past the subreaper for a same-user process).
#[test]
fn a_scoped_command_cannot_kill_its_keeper() {
    if kernel_abi().is_none_or(|a| a < 6) {
        eprintln!("no Landlock scoping on this kernel: skipped");
        return;
    }
    let ex = started(ExecConfig {
        confine_mode: ConfineMode::BestEffort,
        ..config()
    });
    let m = marker(7);
    let cmd = format!("setsid sleep {m} & kill -9 $PPID 2>/dev/null || echo refused; exit 0");
    let r = run(&ex, &cmd);
    assert!(r.confined.scoped);
    assert_eq!(text(&r.stdout), "refused\n");
    assert_eq!(r.exit_code, 0);
    assert_none_survive(&m);
}

/// Without signal scoping (Landlock before ABI 6, played here with ABI 5,
/// and with no Landlock at all) the executor judges a command's signals,
/// as scoping would: it reaches its own processes (a child, an orphan the
/// keeper adopted, a process group of its own), and none of the executor's
/// own process (by its pid or a thread's id), its children (the command's
/// keeper, `$PPID`), its process group, another process of its user, or
/// every process at once. Probed with signal 0, which delivers nothing,
/// but for the command's own child, which is killed; unconfined, every
/// probe reaches its process. Before, every probe succeeded; before this
/// judgement refused other processes of the user, the stranger was
/// reached too.
#[test]
fn without_signal_scoping_a_command_on_the_floor_cannot_signal_the_executor() {
    if kernel_abi().is_none_or(|a| a < 6) {
        eprintln!("no Landlock scoping on this kernel to compare with: skipped");
        return;
    }
    let unscoped = sandgate_shellexec::confine::prepare_with_abi(
        &ConfineSpec::default(),
        ConfineMode::BestEffort,
        Some(5),
    )
    .unwrap();
    let report = unscoped.report();
    assert!(!report.scoped && report.seccomp);
    // The executor judges signals where it judges `listen`: with seccomp
    // user notification.
    if !report
        .seccomp_refuses
        .iter()
        .any(|r| r.contains("judged by the executor") && r.starts_with("listen"))
    {
        eprintln!("note: no seccomp user notification here: signals are not judged; skipped");
        return;
    }
    assert!(
        report
            .seccomp_refuses
            .iter()
            .any(|r| r.starts_with("signals")),
        "{:?}",
        report.seccomp_refuses
    );
    let ex = started(ExecConfig {
        confine_mode: ConfineMode::BestEffort,
        namespaces: false,
        ..config()
    });
    let host = std::process::id();
    let group = rustix::process::getpgrp().as_raw_nonzero().get();
    // A thread of the executor's process: a signal to its id reaches the
    // whole process.
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        tx.send(rustix::thread::gettid().as_raw_nonzero().get())
            .unwrap();
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().unwrap();
    // A process of the same user that is neither the executor nor a child
    // of it: a sleep whose parent has exited.
    let m = marker(11);
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", &format!("sleep {m} >/dev/null 2>&1 & echo $!")])
        .output()
        .unwrap();
    let stranger: u32 = text(&out.stdout).trim().parse().unwrap();
    let probe = format!(
        "for p in {host} {tid} $PPID -{group} -1 {stranger}; do \
           e=$(kill -s 0 -- $p 2>&1) && echo \"reached $p\" || echo \"refused $p: ${{e##*: }}\"; \
         done; \
         sleep 30 & kill $! && wait $!; echo \"own child $?\"; \
         o=$(sh -c 'sleep 30 >/dev/null 2>&1 & echo $!'); \
         kill -s 0 -- $o && echo \"own orphan\"; kill $o; \
         setsid sh -c 'kill -s 0 -- -$$ && echo \"own group\"'; \
         g=$(setsid sh -c 'sleep 30 >/dev/null 2>&1 & echo $$'); \
         kill -s 0 -- -$g && echo \"own group, its leader gone\"; kill -- -$g; \
         kill -s 0 -- $$ && echo self; exit 0"
    );
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    let exec = |ruleset: &sandgate_shellexec::confine::Prepared, script: &str| {
        ex.exec_program(
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            &env,
            ruleset,
            ExecOptions::default(),
        )
        .unwrap()
    };
    // The same without Landlock at all (the seccomp floor alone).
    let no_landlock = sandgate_shellexec::confine::prepare_with_abi(
        &ConfineSpec::default(),
        ConfineMode::BestEffort,
        Some(0),
    )
    .unwrap();
    let keeper_of = |got: &str| {
        got.lines()
            .nth(2)
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("?")
            .trim_end_matches(':')
            .to_owned()
    };
    for ruleset in [&unscoped, &no_landlock] {
        let r = exec(ruleset, &probe);
        let no = "Operation not permitted";
        let want = format!(
            "refused {host}: {no}\nrefused {tid}: {no}\nrefused KEEPER: {no}\n\
             refused -{group}: {no}\nrefused -1: {no}\nrefused {stranger}: {no}\n\
             own child 143\nown orphan\nown group\nown group, its leader gone\nself\n"
        );
        let got = text(&r.stdout);
        let want = want.replace("KEEPER", &keeper_of(&got));
        assert_eq!(got, want, "{}", text(&r.stderr));
    }
    // Unconfined, every probe reaches its process: the refusals above
    // come from the judgement.
    let off =
        sandgate_shellexec::confine::prepare(&ConfineSpec::default(), ConfineMode::Off).unwrap();
    let r = exec(&off, &probe);
    let got = text(&r.stdout);
    let want = format!(
        "reached {host}\nreached {tid}\nreached KEEPER\nreached -{group}\nreached -1\n\
         reached {stranger}\nown child 143\nown orphan\nown group\nown group, its leader gone\nself\n"
    )
    .replace("KEEPER", &keeper_of(&got));
    assert_eq!(got, want, "{}", text(&r.stderr));

    // The calls beside kill: tkill and tgkill on a thread of the
    // executor, fcntl's owner set to the executor (by number, and through
    // a pointer), ioctl's FIOSETOWN on a socket, pidfd_send_signal (which tools
    // replace with kill). Each also on the command itself, which works.
    if Path::new("/usr/bin/python3").exists() {
        let script = format!(
            "import ctypes, errno, fcntl, os, signal, struct, sys\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             def call(*a):\n\
             \x20   r = libc.syscall(*a)\n\
             \x20   return 'ok' if r >= 0 else errno.errorcode[ctypes.get_errno()]\n\
             me, tid = os.getpid(), {tid}\n\
             print('tkill', call({tkill}, tid, 0), call({tkill}, me, 0))\n\
             print('tgkill', call({tgkill}, {host}, tid, 0), call({tgkill}, me, me, 0))\n\
             r, w = os.pipe()\n\
             def own(v):\n\
             \x20   try:\n\
             \x20       fcntl.fcntl(r, fcntl.F_SETOWN, v); return 'ok'\n\
             \x20   except OSError as e: return errno.errorcode[e.errno]\n\
             print('setown', own({host}), own(-{group}), own(me))\n\
             print('setown_ex', call({fcntl_nr}, r, 15, ctypes.c_char_p(struct.pack('ii', 1, me))))\n\
             import socket\n\
             sk, _ = socket.socketpair()\n\
             print('fiosetown', call({ioctl_nr}, sk.fileno(), 0x8901, ctypes.byref(ctypes.c_int(me))))\n\
             try:\n\
             \x20   signal.pidfd_send_signal(os.pidfd_open(me), 0); print('pidfd ok')\n\
             except OSError as e: print('pidfd', errno.errorcode[e.errno])\n",
            tkill = libc::SYS_tkill,
            tgkill = libc::SYS_tgkill,
            fcntl_nr = libc::SYS_fcntl,
            ioctl_nr = libc::SYS_ioctl,
        );
        let run_py = |ruleset| {
            ex.exec_program(
                Path::new("/usr/bin/python3"),
                &["-c".into(), script.clone().into()],
                &env,
                ruleset,
                ExecOptions::default(),
            )
            .unwrap()
        };
        for ruleset in [&unscoped, &no_landlock] {
            let r = run_py(ruleset);
            assert_eq!(
                text(&r.stdout),
                "tkill EPERM ok\ntgkill EPERM ok\nsetown EPERM EPERM ok\nsetown_ex EPERM\n\
                 fiosetown EPERM\npidfd ENOSYS\n",
                "{}",
                text(&r.stderr)
            );
        }
        // Unconfined, the same probes reach the executor: the refusals
        // above come from the judgement.
        let off = sandgate_shellexec::confine::prepare(&ConfineSpec::default(), ConfineMode::Off)
            .unwrap();
        let r = run_py(&off);
        assert_eq!(
            text(&r.stdout),
            "tkill ok ok\ntgkill ok ok\nsetown ok ok ok\nsetown_ex ok\nfiosetown ok\npidfd ok\n",
            "{}",
            text(&r.stderr)
        );
    }

    // With scoping Landlock refuses the executor and its keeper; nothing
    // is handed to the executor.
    // (`kill(-1)` succeeds there, having reached the command's own
    // processes only.)
    let r = run(&ex, &probe);
    assert!(r.confined.scoped);
    let got = text(&r.stdout);
    let no = "Operation not permitted";
    let want = format!(
        "refused {host}: {no}\nrefused {tid}: {no}\nrefused KEEPER: {no}\n\
         refused -{group}: {no}\nreached -1\nrefused {stranger}: {no}\n\
         own child 143\nown orphan\nown group\nown group, its leader gone\nself\n"
    )
    .replace("KEEPER", &keeper_of(&got));
    assert_eq!(got, want, "{}", text(&r.stderr));
    stop_tx.send(()).unwrap();
    t.join().unwrap();
    let _ = std::process::Command::new("kill")
        .arg(stranger.to_string())
        .status();
}

/// A command signalling its own process group whose leader is gone, while
/// one of its processes starts and ends threads: the executor looks for a
/// member of the group below the keeper through each thread's list of
/// children, and a thread that ended between the listing of the threads
/// and the read of its list made the whole process's children unseen, so
/// the command's own group was refused (`EPERM`) now and then.
#[test]
fn hard21_a_commands_group_is_its_own_while_its_threads_come_and_go() {
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("no python3 here; skipped");
        return;
    }
    let unscoped = sandgate_shellexec::confine::prepare_with_abi(
        &ConfineSpec::default(),
        ConfineMode::BestEffort,
        Some(kernel_abi().unwrap_or(0).min(5)),
    )
    .unwrap();
    if !unscoped
        .report()
        .seccomp_refuses
        .iter()
        .any(|r| r.starts_with("signals") && r.contains("judged by the executor"))
    {
        eprintln!(
            "no judged signals here: {:?}; skipped",
            unscoped.report().seccomp_refuses
        );
        return;
    }
    let ex = started(ExecConfig {
        confine_mode: ConfineMode::BestEffort,
        namespaces: false,
        ..config()
    });
    // A process of the command (a child subreaper) makes a group whose
    // leader exits, leaving a member below it, and goes on starting
    // threads that end at once; meanwhile the command asks 2,500 times
    // whether it may signal that group.
    let script = "\
import ctypes, os, threading, time
r, w = os.pipe()
churner = os.fork()
if churner == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0
    leader = os.fork()
    if leader == 0:
        os.setpgid(0, 0)
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        os._exit(0)
    os.waitpid(leader, 0)
    os.write(w, b'%d' % leader)
    def churn():
        while True:
            t = threading.Thread(target=lambda: None)
            t.start()
            t.join()
    for _ in range(3):
        threading.Thread(target=churn, daemon=True).start()
    time.sleep(60)
    os._exit(0)
leader = int(os.read(r, 64))
refused = 0
for i in range(2500):
    try:
        os.killpg(leader, 0)
    except PermissionError:
        refused += 1
os.killpg(leader, 9)
os.kill(churner, 9)
print('refused', refused)
";
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    for round in 0..2 {
        let r = ex
            .exec_program(
                python,
                &["-c".into(), script.into()],
                &env,
                &unscoped,
                ExecOptions {
                    timeout: Some(Duration::from_secs(60)),
                    ..ExecOptions::default()
                },
            )
            .unwrap();
        assert_eq!(
            text(&r.stdout),
            "refused 0\n",
            "round {round}: exit {}, stderr: {}",
            r.exit_code,
            text(&r.stderr)
        );
    }
}

/// The state letter of `/proc/<pid>/stat` (`None`: no such process).
fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

/// Processes whose parent is `pid`, zombies included.
fn children_of(pid: u32) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let mut f = stat[close + 2..].split(' ');
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if f.next().and_then(|s| s.parse::<u32>().ok()) == Some(pid) {
            out.push((p, state));
        }
    }
    out
}

/// Without signal scoping the command can stop its keeper (`kill -STOP
/// $PPID`): a stopped keeper can neither reap nor report. The timeout
/// still ends the call, the tree is killed, and the keeper is continued,
/// so that it reaps what it holds and is itself reaped before exec
/// returns: no stopped keeper, no zombie and no reaper thread are left.
#[test]
fn a_command_that_stops_its_keeper_leaves_nothing_behind() {
    let ex = started(config());
    let m = marker(8);
    let cmd = format!("echo $PPID; sleep {m} & kill -STOP $PPID; wait");
    let r = with_timeout(&ex, &cmd, Duration::from_millis(500));
    assert_eq!(r.exit_code, 124, "{}", text(&r.stderr));
    assert!(r.timed_out);
    let keeper: u32 = text(&r.stdout).trim().parse().expect("the keeper's pid");
    assert_none_survive(&m);
    let left = children_of(keeper);
    let state = proc_state(keeper);
    // Let a leftover keeper go, so the test leaves nothing behind either.
    if state.is_some() {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &keeper.to_string()])
            .status();
    }
    assert_eq!(
        state, None,
        "the keeper {keeper} is still there (state {state:?}), holding {left:?}"
    );
}

/// The shell can stop its keeper before the keeper has even reported that
/// it started the shell, and keep stopping it (`while kill -STOP $PPID`).
/// Each call still returns by its backstop with the timeout, and leaves
/// no keeper behind: where the keeper was held before its report, the
/// command is killed at once (and the report says why), otherwise the
/// timeout ends it. (The race is won only some of the time: hence the
/// rounds.)
#[test]
fn a_keeper_stopped_before_its_start_report_does_not_hang_the_call() {
    let ex = Arc::new(started(config()));
    let timeout = Duration::from_millis(200);
    let mut held_rounds = 0;
    for round in 0..12 {
        let (tx, rx) = std::sync::mpsc::channel();
        let runner = {
            let ex = Arc::clone(&ex);
            thread::spawn(move || {
                let cmd = "echo $PPID; while kill -STOP $PPID; do :; done";
                let _ = tx.send(with_timeout(&ex, cmd, timeout));
            })
        };
        let bound = timeout + Duration::from_millis(500) + BACKSTOP_MARGIN;
        let r = match rx.recv_timeout(bound + Duration::from_secs(10)) {
            Ok(r) => r,
            Err(_) => {
                // Free the hung call's keeper (a child of this process).
                for (pid, state) in children_of(std::process::id()) {
                    if state == 'T' {
                        let _ = std::process::Command::new("kill")
                            .args(["-CONT", &pid.to_string()])
                            .status();
                    }
                }
                panic!("round {round}: the call did not return by its backstop");
            }
        };
        runner.join().unwrap();
        let held = r
            .confined
            .notes
            .iter()
            .any(|n| n.contains("kept its keeper stopped"));
        if held {
            // Stopped before its start report, and again once continued:
            // killed at once (the shell's status says SIGKILL).
            assert_eq!(r.exit_code, 128 + 9, "round {round}: {}", text(&r.stderr));
        } else {
            assert_eq!(r.exit_code, 124, "round {round}: {}", text(&r.stderr));
            assert!(r.timed_out);
        }
        held_rounds += usize::from(held);
        let keeper: u32 = text(&r.stdout).trim().parse().expect("the keeper's pid");
        assert_eq!(
            proc_state(keeper),
            None,
            "round {round}: keeper {keeper} left"
        );
    }
    eprintln!("{held_rounds} of 12 rounds stopped the keeper before its start report");
}

#[test]
fn required_on_a_kernel_without_it_refuses_at_start() {
    // Required needs scoping (ABI 6); only meaningful when it is missing.
    if kernel_abi().is_some_and(|a| a >= 6) {
        // Still check that Required starts and reports everything.
        let ex = started(ExecConfig {
            confine_mode: ConfineMode::Required,
            ..config()
        });
        let r = run(&ex, "true");
        // TCP is held by Landlock's port rules, or by a network namespace
        // that has only loopback.
        assert!(r.confined.fs && (r.confined.net || r.confined.namespaces) && r.confined.scoped);
        assert!(r.confined.missing.is_empty(), "{:?}", r.confined.missing);
        return;
    }
    let ex = LocalShellExecutor::new(ExecConfig {
        confine_mode: ConfineMode::Required,
        ..config()
    });
    let err = ex.start().unwrap_err();
    assert_eq!(err.code(), ErrorCode::ConfineUnavailable);
    assert_eq!(
        ex.exec("true", ExecOptions::default()).unwrap_err().code(),
        ErrorCode::NotStarted
    );
}

#[test]
fn bad_confinement_directories_fail_start_and_leave_no_tmpdir() {
    let ex = LocalShellExecutor::new(ExecConfig {
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec {
            read_dirs: vec![PathBuf::from("/nonexistent/dir")],
            ..ConfineSpec::default()
        },
        ..config()
    });
    if kernel_abi().is_none() {
        return;
    }
    let err = ex.start().unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert!(ex.tmpdir().is_none());
}

/// `exec_program`: the argv reaches the program as bytes, the environment
/// is exactly the one given, host credentials are redacted, and the
/// caller's ruleset (not the session's) confines it.
#[test]
fn exec_program_runs_an_argv_under_the_callers_ruleset() {
    use sandgate_shellexec::confine::prepare;
    use std::os::unix::ffi::OsStringExt;
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let mut cfg = config();
    cfg.confine_mode = ConfineMode::BestEffort;
    cfg.confine.write_dirs = vec![dir.clone()];
    let ex = started(cfg);
    let env = [(OsString::from("ONLY"), OsString::from("this"))];
    let none = prepare(&ConfineSpec::default(), ConfineMode::Off).unwrap();

    let arg = OsString::from_vec(b"a\xffb".to_vec());
    let r = ex
        .exec_program(
            Path::new("/usr/bin/printf"),
            &["%s".into(), arg],
            &env,
            &none,
            ExecOptions::default(),
        )
        .unwrap();
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    assert_eq!(r.stdout, b"a\xffb");

    let r = ex
        .exec_program(
            Path::new("/usr/bin/env"),
            &[],
            &env,
            &none,
            ExecOptions::default(),
        )
        .unwrap();
    assert_eq!(text(&r.stdout), "ONLY=this\n");

    let r = ex
        .exec_program(
            Path::new("/usr/bin/printf"),
            &["%s".into(), SECRET.into()],
            &env,
            &none,
            ExecOptions::default(),
        )
        .unwrap();
    assert!(!text(&r.stdout).contains(SECRET), "{}", text(&r.stdout));

    // The session's ruleset grants `dir`; a read-only one does not.
    if kernel_abi().is_none() {
        eprintln!("note: no Landlock; the ruleset part is skipped");
        return;
    }
    let read_only = prepare(
        &ConfineSpec {
            read_dirs: vec![dir.clone()],
            ..ConfineSpec::default()
        },
        ConfineMode::Required,
    );
    let Ok(read_only) = read_only else {
        eprintln!("note: Landlock lacks a part; the ruleset part is skipped");
        return;
    };
    let target = dir.join("written");
    let r = ex
        .exec_program(
            Path::new("/usr/bin/touch"),
            &[target.as_os_str().to_owned()],
            &env,
            &read_only,
            ExecOptions::default(),
        )
        .unwrap();
    assert_ne!(r.exit_code, 0);
    assert!(!target.exists());
    assert!(r.confined.fs);
    let r = run(&ex, &format!("touch '{}'", target.display()));
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    assert!(target.exists());
    // A NUL byte in an argument is a request error, not a truncated run.
    let err = ex
        .exec_program(
            Path::new("/usr/bin/printf"),
            &[OsString::from_vec(b"a\0b".to_vec())],
            &env,
            &none,
            ExecOptions::default(),
        )
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Request);
}

// --- the keeper's own hazards --------------------------------------------------------

/// This process's children that run this test binary without having
/// exec'd anything else: the keepers (they share the binary's image).
fn keepers() -> Vec<i32> {
    let me = std::process::id() as i32;
    let exe = fs::read_link("/proc/self/exe").unwrap();
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok());
            ppid == Some(me)
                && fs::read_link(format!("/proc/{pid}/exe")).ok().as_ref() == Some(&exe)
        })
        .collect()
}

#[test]
fn the_keeper_blocks_every_signal_glibcs_internal_ones_included() {
    let ex = Arc::new(started(config()));
    let runner = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || run(&ex, "sleep 1"))
    };
    let mut seen = Vec::new();
    for _ in 0..100 {
        for pid in keepers() {
            let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            if let Some(mask) = status.lines().find_map(|l| l.strip_prefix("SigBlk:")) {
                seen.push(u64::from_str_radix(mask.trim(), 16).unwrap());
            }
        }
        if !seen.is_empty() {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    runner.join().unwrap();
    assert!(!seen.is_empty(), "no keeper found");
    // All 64 signals but SIGKILL and SIGSTOP (which cannot be blocked),
    // SIGCANCEL (32) and SIGSETXID (33) included: no handler of the
    // host's can run on the keeper's stack.
    let unblockable = 1u64 << (libc::SIGKILL - 1) | 1u64 << (libc::SIGSTOP - 1);
    for mask in seen {
        assert_eq!(mask, !unblockable, "keeper's blocked mask {mask:#x}");
    }
}

#[test]
fn an_errno_left_by_the_executor_thread_never_shows_in_a_spawn_report() {
    let ex = started(ExecConfig {
        shell: PathBuf::from("/nonexistent/sandgate-shell"),
        ..config()
    });
    for _ in 0..20 {
        // SAFETY: writes this thread's own errno.
        unsafe { *libc::__errno_location() = libc::EXDEV };
        let r = run(&ex, "true");
        assert_eq!(r.exit_code, 127);
        let msg = text(&r.stderr);
        assert!(msg.contains("No such file or directory"), "{msg}");
        assert!(!msg.contains("cross-device"), "{msg}");
    }
}

// --- the protected-paths hook -------------------------------------------------------

/// A protected-paths hook that counts its records and reports nothing: the
/// executor's side of the hook is what is under test here (the record and
/// the check themselves are sandgate-protect's, tested there).
struct CountingHook(Arc<std::sync::atomic::AtomicUsize>);

struct NoChanges;

impl sandgate_shellexec::protected::Checkpoint for NoChanges {
    fn after(self: Box<Self>) -> Vec<sandgate_shellexec::protected::ProtectedChange> {
        Vec::new()
    }
}

impl sandgate_shellexec::protected::ProtectedPaths for CountingHook {
    fn before(&self) -> std::io::Result<Box<dyn sandgate_shellexec::protected::Checkpoint>> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(Box::new(NoChanges))
    }
}

/// The record and check run around every command that could write, and are
/// skipped only for one whose ruleset lets it write nowhere (confined git),
/// which is shown to be unable to write. A kernel playing an ABI without
/// truncate control (2) or without Landlock keeps the hook.
#[test]
fn the_protected_paths_hook_is_skipped_only_where_nothing_can_be_written() {
    use sandgate_shellexec::confine::{prepare, prepare_with_abi};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let victim = dir.join("victim");
    fs::write(&victim, "kept").unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let mut cfg = config();
    cfg.confine_mode = ConfineMode::BestEffort;
    cfg.confine.write_dirs = vec![dir.clone()];
    cfg.protected = Some(Arc::new(CountingHook(Arc::clone(&count))));
    let ex = started(cfg);
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    let truncate = |ruleset: &sandgate_shellexec::confine::Prepared| {
        ex.exec_program(
            Path::new("/usr/bin/truncate"),
            &["-s".into(), "0".into(), victim.as_os_str().to_owned()],
            &env,
            ruleset,
            ExecOptions::default(),
        )
        .unwrap()
    };

    // The session's own ruleset writes the write root: recorded.
    run(&ex, "true");
    assert_eq!(count.load(Ordering::SeqCst), 1);

    let read_only_spec = ConfineSpec {
        read_dirs: vec![dir.clone()],
        ..ConfineSpec::default()
    };
    // No Landlock, or an ABI without truncate control: recorded (whether the
    // write then succeeds depends on the rest: a read-only view refuses it
    // where namespaces exist).
    for abi in [0, 2] {
        let ruleset =
            prepare_with_abi(&read_only_spec, ConfineMode::BestEffort, Some(abi)).unwrap();
        assert!(!ruleset.writes_nothing(), "ABI {abi}");
        let before = count.load(Ordering::SeqCst);
        truncate(&ruleset);
        assert_eq!(count.load(Ordering::SeqCst), before + 1, "ABI {abi}");
        fs::write(&victim, "kept").unwrap();
    }
    let off = prepare(&read_only_spec, ConfineMode::Off).unwrap();
    assert!(!off.writes_nothing());

    if kernel_abi().is_none_or(|a| a < 3) {
        eprintln!("note: no Landlock with truncate control; the skipped case is not shown");
        return;
    }
    let read_only = prepare(&read_only_spec, ConfineMode::BestEffort).unwrap();
    assert!(read_only.writes_nothing());
    let before = count.load(Ordering::SeqCst);
    let r = truncate(&read_only);
    assert_ne!(
        r.exit_code, 0,
        "truncate under a read-only ruleset succeeded"
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "kept");
    assert_eq!(
        count.load(Ordering::SeqCst),
        before,
        "recorded for a command that cannot write"
    );
}

const ABANDONED_TMPDIR: &str = "SANDGATE_TEST_ABANDONED_TMPDIR";

/// A host process killed without disposing leaves its private TMPDIR, with
/// what its commands wrote there, locked up as they left it; the next
/// executor to start removes it. A live executor's directory, this
/// process's own, is left alone, and so is another user's.
#[test]
fn a_killed_executors_tmpdir_is_removed_by_the_next_start() {
    if std::env::var_os(ABANDONED_TMPDIR).is_some() {
        let ex = started(config());
        let tmp = ex.tmpdir().unwrap();
        let r = run(
            &ex,
            "mkdir -p \"$TMPDIR/d\" && echo scratch > \"$TMPDIR/d/f\" && chmod 0 \"$TMPDIR/d\"",
        );
        assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
        println!("{}", tmp.display());
        thread::sleep(Duration::from_secs(600));
        return;
    }
    let live = started(config());
    let live_dir = live.tmpdir().unwrap();
    let mut victim = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "--nocapture",
            "a_killed_executors_tmpdir_is_removed_by_the_next_start",
        ])
        .env(ABANDONED_TMPDIR, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let left = {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(victim.stdout.take().unwrap()).lines();
        lines
            .find_map(|l| l.ok().filter(|l| l.contains("sandgate-exec-")))
            .map(PathBuf::from)
            .expect("the victim's TMPDIR")
    };
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert!(left.join("d").exists(), "{}", left.display());
    // Another executor of the same process while the first one lives: the
    // directory of the killed one goes, the live one stays.
    let next = started(config());
    let gone = !left.exists();
    if !gone {
        let _ = fs::set_permissions(
            left.join("d"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        );
        let _ = fs::remove_dir_all(&left);
    }
    assert!(gone, "{} was left after the next start", left.display());
    assert!(live_dir.is_dir());
    assert!(next.tmpdir().unwrap().is_dir());
    live.dispose().unwrap();
    next.dispose().unwrap();
    assert!(!live_dir.exists());
}

/// A process that forks and exits at once, again and again, is one
/// process at a time under a new pid each time: a scan of `/proc` lists
/// its pid and finds it gone by the time it reads it, and never lists the
/// next. It must still end with the call, on the floor and in
/// namespaces. The walker stops by itself after 15 s, and touches a file
/// every 50 ms while it lives.
#[test]
fn a_process_that_forks_and_exits_at_once_does_not_outlive_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let beat = dir.path().join("beat");
    let script = dir.path().join("walk.pl");
    fs::write(
        &script,
        "use POSIX (); use Time::HiRes qw(time); $SIG{TERM} = 'IGNORE';\n\
         my $f = shift; my $s = time; my $t = 0;\n\
         while (1) {\n\
           POSIX::_exit(0) if time - $s > 15;\n\
           if (time - $t > 0.05) { open(my $h, '>', $f) or die; print $h time; close $h; $t = time }\n\
           my $p = fork; POSIX::_exit(0) if !defined $p || $p;\n\
         }\n",
    )
    .unwrap();
    // With its output elsewhere, and holding the command's pipes.
    let cases = [
        (false, "</dev/null >/dev/null 2>&1"),
        (true, "</dev/null >/dev/null 2>&1"),
        (false, ""),
        (true, ""),
    ];
    for (namespaces, redirect) in cases {
        let ex = started(ExecConfig {
            confine_mode: ConfineMode::BestEffort,
            confine: ConfineSpec {
                write_dirs: vec![dir.path().to_path_buf()],
                ..ConfineSpec::default()
            },
            namespaces,
            ..config()
        });
        let _ = fs::remove_file(&beat);
        let cmd = format!(
            "echo start; perl '{}' '{}' {redirect} & sleep 0.3; echo end; exit 7",
            script.display(),
            beat.display()
        );
        let t = Instant::now();
        let r = with_timeout(&ex, &cmd, Duration::from_secs(5));
        let took = t.elapsed();
        if r.confined.namespaces != namespaces {
            assert!(namespaces, "namespaces where none were asked for");
            eprintln!("skipped in namespaces: none here");
            continue;
        }
        assert_eq!(
            r.exit_code,
            7,
            "namespaces {namespaces}: {}",
            text(&r.stderr)
        );
        assert_eq!(text(&r.stdout), "start\nend\n", "namespaces {namespaces}");
        assert!(
            beat.exists(),
            "namespaces {namespaces}: the walker never ran"
        );
        let first = fs::read(&beat).unwrap();
        thread::sleep(Duration::from_millis(400));
        let second = fs::read(&beat).unwrap();
        let alive = first != second;
        // Let a surviving walker end before the next round.
        if alive {
            thread::sleep(Duration::from_secs(16));
        }
        assert!(
            !alive,
            "namespaces {namespaces} {redirect:?}: the walker outlived the call (returned after {took:?})"
        );
        // It exited by itself: the call ends before its timeout, not at
        // the backstop.
        assert!(
            !r.timed_out && took < Duration::from_secs(5),
            "namespaces {namespaces} {redirect:?}: returned after {took:?}"
        );
    }
}

/// `RLIMIT_NPROC` counts every process of the command's real user: on the
/// floor, processes of that user the command has nothing to do with use up
/// its allowance, so its forks are refused because of them (and it can use
/// up theirs). In namespaces the command's own user namespace is counted
/// (the processes of every command the executor runs at once), and the
/// same outside processes leave its forks alone. Root is exempt from the
/// limit, so the test means something only as another user.
#[test]
fn rlimit_nproc_counts_the_users_other_processes_on_the_floor() {
    // SAFETY: getuid has no preconditions and cannot fail.
    if unsafe { libc::getuid() } == 0 {
        eprintln!("skipped: RLIMIT_NPROC is not enforced for root");
        return;
    }
    const LIMIT: u64 = 64;
    // More processes of this user than the limit, outside any command.
    let mut others: Vec<std::process::Child> = (0..LIMIT)
        .map(|_| {
            std::process::Command::new("/bin/sleep")
                .arg("60")
                .spawn()
                .unwrap()
        })
        .collect();
    let mut seen = Vec::new();
    for namespaces in [false, true] {
        let ex = started(ExecConfig {
            confine_mode: ConfineMode::BestEffort,
            confine: ConfineSpec {
                max_processes: Some(LIMIT),
                ..ConfineSpec::default()
            },
            namespaces,
            ..config()
        });
        let r = run(&ex, "sleep 0.1 & wait; echo forked");
        if r.confined.namespaces != namespaces {
            assert!(namespaces, "namespaces where none were asked for");
            eprintln!("skipped in namespaces: none here");
            continue;
        }
        seen.push((namespaces, r.exit_code, text(&r.stdout), text(&r.stderr)));
    }
    for child in &mut others {
        let _ = child.kill();
        let _ = child.wait();
    }
    for (namespaces, code, out, err) in seen {
        if namespaces {
            assert_eq!(
                (code, out.as_str()),
                (0, "forked\n"),
                "in namespaces: {err}"
            );
        } else {
            assert!(
                code != 0 && out.is_empty() && err.contains("fork"),
                "on the floor: exit {code}, {out:?}, {err:?}"
            );
        }
    }
}

/// Answers `reply` to the first bytes of every connection `accept`
/// takes, for good, on a thread of its own.
fn answer<S: std::io::Read + std::io::Write>(
    mut accept: impl FnMut() -> std::io::Result<S> + Send + 'static,
    reply: &'static str,
) {
    thread::spawn(move || {
        while let Ok(mut c) = accept() {
            let mut buf = [0u8; 16];
            let _ = c.read(&mut buf);
            let _ = c.write_all(reply.as_bytes());
        }
    });
}

/// A UNIX listener bound at `path`, answered by [`answer`].
fn answer_unix(path: &Path, reply: &'static str) {
    let l = std::os::unix::net::UnixListener::bind(path).unwrap();
    answer(move || l.accept().map(|(c, _)| c), reply);
}

/// The kernel's Landlock ABI and an executor that runs commands on the
/// floor, where the connect tests can run (Landlock and python3 here).
fn floor_for_python() -> Option<(u32, LocalShellExecutor)> {
    let Some(kernel) = kernel_abi() else {
        eprintln!("no Landlock here: nothing judges paths; skipped");
        return None;
    };
    if !Path::new(PYTHON).exists() {
        eprintln!("no python3 here: skipped");
        return None;
    }
    let ex = started(ExecConfig {
        confine_mode: ConfineMode::BestEffort,
        namespaces: false,
        ..config()
    });
    Some((kernel, ex))
}

const PYTHON: &str = "/usr/bin/python3";

/// Runs `python3 args…` under `prepared` on `ex`.
fn python(
    ex: &LocalShellExecutor,
    prepared: &sandgate_shellexec::confine::Prepared,
    args: &[OsString],
    opts: ExecOptions,
) -> ExecResult {
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    ex.exec_program(Path::new(PYTHON), args, &env, prepared, opts)
        .unwrap()
}

/// Whether the executor supervises a command run under `prepared` on the
/// floor (seccomp user notification: it performs `listen`).
fn supervises(prepared: &sandgate_shellexec::confine::Prepared) -> bool {
    prepared
        .report()
        .seccomp_refuses
        .iter()
        .any(|r| r.contains("judged by the executor") && r.starts_with("listen"))
}

/// `spec` prepared for the floor below Landlock ABI 9 (the kernel's ABI,
/// at most 8), where the executor judges connects; `None`, with a note,
/// where it cannot (no seccomp user notification).
fn judged_floor(spec: &ConfineSpec, kernel: u32) -> Option<sandgate_shellexec::confine::Prepared> {
    let prepared = sandgate_shellexec::confine::prepare_with_abi(
        spec,
        ConfineMode::BestEffort,
        Some(kernel.min(8)),
    )
    .unwrap();
    if supervises(&prepared) {
        Some(prepared)
    } else {
        eprintln!("note: no seccomp user notification here: connects are not judged; skipped");
        None
    }
}

/// The command's side of the UNIX and TCP probes: one line per attempt,
/// the answer it read or the error's name.
const CONNECT_PROBE: &str = r#"
import errno, os, select, socket, sys, threading
(outside, inside, relative, inread, link, rel_link, dotdot, abstract,
 tcp_ok, tcp_no) = sys.argv[1:]
def attempt(label, fn):
    try:
        print(label, fn())
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
def talk(s):
    s.sendall(b'ping')
    return s.recv(64).decode()
def unix(path, block=True):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if block:
        s.connect(path)
    else:
        s.setblocking(False)
        r = s.connect_ex(path)
        if r:
            raise OSError(r, '')
        s.setblocking(True)
    return talk(s)
def tcp(port, block=True):
    s = socket.socket()
    if block:
        s.connect(('127.0.0.1', int(port)))
    else:
        s.setblocking(False)
        r = s.connect_ex(('127.0.0.1', int(port)))
        if r not in (0, errno.EINPROGRESS):
            raise OSError(r, '')
        select.select([], [s], [], 5)
        e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if e:
            raise OSError(e, '')
        s.setblocking(True)
    return talk(s)
def pair(kind):
    a, b = socket.socketpair(socket.AF_UNIX, kind)
    a.send(b'x')
    return b.recv(1).decode()
attempt('outside', lambda: unix(outside))
attempt('inside', lambda: unix(inside))
attempt('inside-nb', lambda: unix(inside, False))
attempt('relative', lambda: unix(relative))
attempt('read-root', lambda: unix(inread))
attempt('link', lambda: unix(link))
attempt('rel-link', lambda: unix(rel_link))
attempt('dotdot', lambda: unix(dotdot))
attempt('abstract', lambda: unix('\0' + abstract))
def own_abstract():
    l = socket.socket(socket.AF_UNIX)
    l.bind('\0sandgate-own-%d' % os.getpid())
    l.listen(1)
    def serve():
        c, _ = l.accept()
        c.recv(16)
        c.sendall(b'pong-own')
    threading.Thread(target=serve, daemon=True).start()
    return unix(l.getsockname())
attempt('own-abstract', own_abstract)
attempt('fd-inside', lambda: unix('/proc/self/fd/%d' % os.open(inside, os.O_PATH)))
attempt('fd-outside', lambda: unix('/proc/self/fd/%d' % os.open(outside, os.O_PATH)))
attempt('dgram', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) and 'made')
attempt('dgram-pair', lambda: pair(socket.SOCK_DGRAM))
attempt('stream-pair', lambda: pair(socket.SOCK_STREAM))
attempt('seqpacket-pair', lambda: pair(socket.SOCK_SEQPACKET))
attempt('tcp-granted', lambda: tcp(tcp_ok))
attempt('tcp-granted-nb', lambda: tcp(tcp_ok, False))
attempt('tcp-other', lambda: tcp(tcp_no))
attempt('tcp-other-nb', lambda: tcp(tcp_no, False))
"#;

/// Before Landlock ABI 9 the kernel does not judge a connect to a UNIX
/// socket by path: on the floor the executor performs every connect
/// itself. A socket outside the write roots (in the host's temporary
/// directory, in a read root, reached through a link or `..` from inside)
/// and an abstract name are refused, and a UNIX datagram socket cannot be
/// made, while a socket in the write root (by absolute or relative name,
/// blocking or not) answers, and TCP ports are judged as Landlock judges
/// them. Unconfined, the same probes reach every socket: the refusals
/// come from the judgement. Before, the command reached all of them.
#[test]
fn on_the_floor_a_command_connects_to_unix_sockets_beneath_its_write_roots_only() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let (w, r, o) = (
        base.path().join("w"),
        base.path().join("r"),
        base.path().join("o"),
    );
    for d in [&w, &r, &o] {
        fs::create_dir(d).unwrap();
    }
    answer_unix(&o.join("s.sock"), "pong-out");
    answer_unix(&w.join("in.sock"), "pong-in");
    let sub = w.join("sub");
    fs::create_dir(&sub).unwrap();
    answer_unix(&sub.join("sub.sock"), "pong-sub");
    answer_unix(&r.join("r.sock"), "pong-read");
    std::os::unix::fs::symlink(o.join("s.sock"), w.join("link")).unwrap();
    std::os::unix::fs::symlink("../o/s.sock", w.join("rel-link")).unwrap();
    let abstract_name = format!("sandgate-test-{}", marker(12));
    let abstract_addr = {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap()
    };
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&abstract_addr).unwrap();
    answer(
        move || abstract_listener.accept().map(|(c, _)| c),
        "pong-abstract",
    );
    let mut ports = Vec::new();
    for reply in ["pong-tcp", "pong-other"] {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        ports.push(l.local_addr().unwrap().port());
        answer(move || l.accept().map(|(c, _)| c), reply);
    }
    let (p, q) = (ports[0], ports[1]);

    let spec = ConfineSpec {
        read_dirs: vec![r.clone()],
        write_dirs: vec![w.clone()],
        connect_ports: vec![p],
        udp: true,
        ..ConfineSpec::default()
    };
    let args: Vec<OsString> = [
        "-c".to_owned(),
        CONNECT_PROBE.to_owned(),
        o.join("s.sock").display().to_string(),
        w.join("in.sock").display().to_string(),
        "in.sock".to_owned(),
        r.join("r.sock").display().to_string(),
        w.join("link").display().to_string(),
        w.join("rel-link").display().to_string(),
        w.join("../o/s.sock").display().to_string(),
        abstract_name.clone(),
        p.to_string(),
        q.to_string(),
    ]
    .map(OsString::from)
    .into();
    let probe = |prepared: &sandgate_shellexec::confine::Prepared| {
        let cwd = OwnedFd::from(fs::File::open(&w).unwrap());
        let opts = ExecOptions {
            cwd: Some(cwd),
            ..ExecOptions::default()
        };
        let r = python(&ex, prepared, &args, opts);
        (text(&r.stdout), text(&r.stderr), r)
    };

    // Unconfined: every socket answers.
    let off = sandgate_shellexec::confine::prepare(&spec, ConfineMode::Off).unwrap();
    let (got, err, _) = probe(&off);
    assert_eq!(
        got,
        "outside pong-out\ninside pong-in\ninside-nb pong-in\nrelative pong-in\n\
         read-root pong-read\nlink pong-out\nrel-link pong-out\ndotdot pong-out\n\
         abstract pong-abstract\nown-abstract pong-own\nfd-inside pong-in\nfd-outside pong-out\ndgram made\ndgram-pair x\nstream-pair x\nseqpacket-pair x\n\
         tcp-granted pong-tcp\ntcp-granted-nb pong-tcp\ntcp-other pong-other\n\
         tcp-other-nb pong-other\n",
        "{err}"
    );

    // On the floor below ABI 9: the kernel's ABI (at most 8) and ABI 5,
    // where signals are judged by the same filter.
    let mut abis = vec![kernel.min(8)];
    if kernel > 5 {
        abis.push(5);
    }
    for abi in abis {
        let prepared = sandgate_shellexec::confine::prepare_with_abi(
            &spec,
            ConfineMode::BestEffort,
            Some(abi),
        )
        .unwrap();
        // The executor judges connects where it judges `listen`: with
        // seccomp user notification.
        if !supervises(&prepared) {
            eprintln!("note: no seccomp user notification here: connects are not judged; skipped");
            return;
        }
        let (got, err, result) = probe(&prepared);
        // Without Landlock's TCP rules (ABI 3 and before) no port is
        // judged.
        let (other, other_nb) = if abi >= 4 {
            ("EACCES", "EACCES")
        } else {
            ("pong-other", "pong-other")
        };
        assert_eq!(
            got,
            format!(
                "outside EACCES\ninside pong-in\ninside-nb pong-in\nrelative pong-in\n\
                 read-root EACCES\nlink EACCES\nrel-link EACCES\ndotdot EACCES\n\
                 abstract EPERM\nown-abstract pong-own\nfd-inside pong-in\nfd-outside EACCES\ndgram EPERM\ndgram-pair EPERM\nstream-pair x\n\
                 seqpacket-pair x\ntcp-granted pong-tcp\ntcp-granted-nb pong-tcp\n\
                 tcp-other {other}\ntcp-other-nb {other_nb}\n"
            ),
            "ABI {abi}: {err}"
        );
        assert!(
            !result
                .confined
                .notes
                .iter()
                .any(|n| n.starts_with("connecting to a UNIX socket by path is not restricted")),
            "{:?}",
            result.confined.notes
        );

        // Narrowed to a directory of the write root: only sockets beneath
        // it too.
        let narrowed = |dir: &Path, path: &Path| {
            let script = "import errno, socket, sys\n\
                          s = socket.socket(socket.AF_UNIX)\n\
                          try:\n    s.connect(sys.argv[1]); s.sendall(b'x'); print(s.recv(64).decode())\n\
                          except OSError as e:\n    print(errno.errorcode[e.errno])\n";
            let within = vec![OwnedFd::from(fs::File::open(dir).unwrap())];
            let opts = ExecOptions {
                within: Some(within),
                ..ExecOptions::default()
            };
            let r = python(
                &ex,
                &prepared,
                &["-c".into(), script.into(), path.into()],
                opts,
            );
            (text(&r.stdout), text(&r.stderr))
        };
        let (got, err) = narrowed(&sub, &sub.join("sub.sock"));
        assert_eq!(got, "pong-sub\n", "ABI {abi}: {err}");
        let (got, err) = narrowed(&sub, &w.join("in.sock"));
        assert_eq!(got, "EACCES\n", "ABI {abi}: {err}");
    }
}

/// A listener at `path` whose queue holds two connections: the commands
/// that fill it make two judged connects rather than a default backlog's
/// hundreds (each a round trip through the executor, which under a loaded
/// CI host outlasted a 2 s timeout before the command was ready).
fn small_listener(path: &Path) -> std::os::unix::net::UnixListener {
    use rustix::net::{bind, listen, socket, AddressFamily, SocketAddrUnix, SocketType};
    let fd = socket(AddressFamily::UNIX, SocketType::STREAM, None).unwrap();
    bind(&fd, &SocketAddrUnix::new(path).unwrap()).unwrap();
    listen(&fd, 1).unwrap();
    std::os::unix::net::UnixListener::from(fd)
}

/// A connect on a blocking socket waits in a thread of the executor while
/// the listener's queue is full, connects once the listener takes the
/// queued connections, and a command killed while it waits ends on time
/// (the executor's thread ends with it: the run waits for it).
#[test]
fn on_the_floor_a_blocking_unix_connect_waits_for_its_listener_and_ends_with_the_command() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    let ex = Arc::new(ex);
    let w = tempfile::tempdir().unwrap();
    let sock = w.path().join("full.sock");
    let spec = ConfineSpec {
        write_dirs: vec![w.path().to_owned()],
        ..ConfineSpec::default()
    };
    let Some(prepared) = judged_floor(&spec, kernel) else {
        return;
    };
    // Fills the queue with connects that do not wait, then waits in one.
    let script = format!(
        "import socket, sys\n\
         held = []\n\
         while True:\n\
         \x20   s = socket.socket(socket.AF_UNIX)\n\
         \x20   s.setblocking(False)\n\
         \x20   if s.connect_ex({path:?}):\n\
         \x20       break\n\
         \x20   held.append(s)\n\
         print('queued', len(held) > 0, flush=True)\n\
         s = socket.socket(socket.AF_UNIX)\n\
         s.connect({path:?})\n\
         print('connected', flush=True)\n",
        path = sock.display().to_string()
    );
    let exec = |timeout: Duration| {
        let (ex, prepared, script) = (Arc::clone(&ex), prepared.clone(), script.clone());
        thread::spawn(move || {
            let began = Instant::now();
            let opts = ExecOptions {
                timeout: Some(timeout),
                ..ExecOptions::default()
            };
            let r = python(&ex, &prepared, &["-c".into(), script.into()], opts);
            (r, began.elapsed())
        })
    };

    // Killed while it waits: ends at its timeout.
    let listener = small_listener(&sock);
    let (r, took) = exec(Duration::from_secs(2)).join().unwrap();
    assert!(r.timed_out, "{}", text(&r.stderr));
    assert_eq!(text(&r.stdout), "queued True\n", "{}", text(&r.stderr));
    assert!(took < Duration::from_secs(8), "{took:?}");

    // Let through once the listener takes what is queued.
    drop(listener);
    fs::remove_file(&sock).unwrap();
    let listener = small_listener(&sock);
    let waiting = exec(Duration::from_secs(20));
    thread::sleep(Duration::from_millis(1500));
    // The connect waits in a thread of the executor (this process).
    let threads: Vec<String> = fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("comm")).ok())
        .collect();
    assert!(
        threads.iter().any(|c| c.trim() == "sandgate-connec"),
        "{threads:?}"
    );
    listener.set_nonblocking(true).unwrap();
    let mut taken = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !waiting.is_finished() && Instant::now() < deadline {
        while let Ok((c, _)) = listener.accept() {
            taken.push(c);
        }
        thread::sleep(Duration::from_millis(20));
    }
    let (r, _) = waiting.join().unwrap();
    assert!(!r.timed_out, "{}", text(&r.stderr));
    assert_eq!(
        text(&r.stdout),
        "queued True\nconnected\n",
        "{}",
        text(&r.stderr)
    );

    // Made non-blocking by another thread while it waits: answered as it
    // stands, at the next slice (before, the executor's thread tried again
    // at once, for good, and the command waited until its timeout).
    let script = format!(
        "import errno, fcntl, os, socket, threading, time\n\
         held = []\n\
         while True:\n\
         \x20   s = socket.socket(socket.AF_UNIX)\n\
         \x20   s.setblocking(False)\n\
         \x20   if s.connect_ex({path:?}):\n\
         \x20       break\n\
         \x20   held.append(s)\n\
         s = socket.socket(socket.AF_UNIX)\n\
         def later():\n\
         \x20   time.sleep(0.5)\n\
         \x20   fl = fcntl.fcntl(s.fileno(), fcntl.F_GETFL)\n\
         \x20   fcntl.fcntl(s.fileno(), fcntl.F_SETFL, fl | os.O_NONBLOCK)\n\
         threading.Thread(target=later).start()\n\
         try:\n\
         \x20   s.connect({path:?}); print('connected')\n\
         except OSError as e:\n\
         \x20   print(errno.errorcode[e.errno])\n",
        path = sock.display().to_string()
    );
    let opts = ExecOptions {
        timeout: Some(Duration::from_secs(10)),
        ..ExecOptions::default()
    };
    let r = python(&ex, &prepared, &["-c".into(), script.into()], opts);
    assert!(!r.timed_out, "{}", text(&r.stderr));
    assert_eq!(text(&r.stdout), "EAGAIN\n", "{}", text(&r.stderr));
    drop(taken);
}

/// The command's side of the race: one thread flips the address buffer
/// a `connect` reads between a socket inside and one outside, another
/// swaps a link in the write root between the two, while the main thread
/// connects through both for two seconds.
const CONNECT_RACE: &str = r#"
import ctypes, os, socket, sys, threading, time
# Threads take turns often: thousands of attempts, not a hundred.
sys.setswitchinterval(0.0001)
libc = ctypes.CDLL(None, use_errno=True)
inside, outside, swap = sys.argv[1:4]
class Sun(ctypes.Structure):
    _fields_ = [('family', ctypes.c_ushort), ('path', ctypes.c_char * 108)]
buf = Sun(socket.AF_UNIX, inside.encode())
stop = False
def flip():
    paths = [inside.encode(), outside.encode()]
    i = 0
    while not stop:
        buf.path = paths[i & 1]
        i += 1
def relink():
    i, tmp = 0, swap + '.tmp'
    while not stop:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        os.symlink([inside, outside][i & 1], tmp)
        os.rename(tmp, swap)
        i += 1
threads = [threading.Thread(target=flip), threading.Thread(target=relink)]
for t in threads:
    t.start()
seen = {'out': 0, 'in': 0, 'refused': 0}
deadline = time.time() + 2
while time.time() < deadline:
    for how in ('buffer', 'link'):
        s = socket.socket(socket.AF_UNIX)
        try:
            if how == 'buffer':
                if libc.connect(s.fileno(), ctypes.byref(buf), ctypes.sizeof(buf)):
                    raise OSError(ctypes.get_errno(), '')
            else:
                s.connect(swap)
            s.sendall(b'x')
            seen['out' if s.recv(64) == b'pong-out' else 'in'] += 1
        except OSError:
            seen['refused'] += 1
        s.close()
stop = True
for t in threads:
    t.join()
print('outside', seen['out'], 'inside', seen['in'] > 0, 'refused', seen['refused'] > 0)
"#;

/// A command that races the executor's judgement (the address changed in
/// its memory while the connect is judged, a link in the write root
/// swapped between a socket inside and one outside) never reaches the
/// socket outside, while it does reach the one inside. Unconfined, the
/// same race reaches the socket outside.
#[test]
fn a_command_racing_its_address_or_a_link_never_connects_outside() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let (w, o) = (base.path().join("w"), base.path().join("o"));
    fs::create_dir(&w).unwrap();
    fs::create_dir(&o).unwrap();
    answer_unix(&o.join("s.sock"), "pong-out");
    answer_unix(&w.join("in.sock"), "pong-in");
    let spec = ConfineSpec {
        write_dirs: vec![w.clone()],
        ..ConfineSpec::default()
    };
    let args: Vec<OsString> = [
        "-c".to_owned(),
        CONNECT_RACE.to_owned(),
        w.join("in.sock").display().to_string(),
        o.join("s.sock").display().to_string(),
        w.join("swap").display().to_string(),
    ]
    .map(OsString::from)
    .into();
    let race = |prepared: &sandgate_shellexec::confine::Prepared| {
        let r = python(&ex, prepared, &args, ExecOptions::default());
        (text(&r.stdout), text(&r.stderr))
    };
    let off = sandgate_shellexec::confine::prepare(&spec, ConfineMode::Off).unwrap();
    let (got, err) = race(&off);
    let reached: u32 = got
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(reached > 0, "unconfined: {got} {err}");
    let Some(prepared) = judged_floor(&spec, kernel) else {
        return;
    };
    let (got, err) = race(&prepared);
    assert_eq!(got, "outside 0 inside True refused True\n", "{err}");
}

/// The kernel makes `socket(AF_UNIX, SOCK_RAW)` a datagram socket (as BSD
/// did), and a datagram names its receiver in `sendto`'s address, which
/// the executor never sees: on the floor such a socket (and such a pair)
/// is refused as `SOCK_DGRAM` is, so nothing reaches a datagram socket
/// outside the write roots. Unconfined, the datagram arrives. Before, the
/// command made the socket and its datagram reached the socket outside.
#[test]
fn on_the_floor_a_raw_unix_socket_is_refused_as_a_datagram_socket() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let (w, o) = (base.path().join("w"), base.path().join("o"));
    fs::create_dir(&w).unwrap();
    fs::create_dir(&o).unwrap();
    let outside = o.join("d.sock");
    let receiver = std::os::unix::net::UnixDatagram::bind(&outside).unwrap();
    receiver.set_nonblocking(true).unwrap();
    let spec = ConfineSpec {
        write_dirs: vec![w.clone()],
        ..ConfineSpec::default()
    };
    let script = "import errno, socket, sys\n\
                  for kind in (socket.SOCK_RAW, socket.SOCK_RAW | socket.SOCK_NONBLOCK):\n\
                  \x20   try:\n\
                  \x20       s = socket.socket(socket.AF_UNIX, kind)\n\
                  \x20       s.sendto(b'escaped', sys.argv[1]); print('sent')\n\
                  \x20   except OSError as e:\n\
                  \x20       print(errno.errorcode[e.errno])\n\
                  try:\n\
                  \x20   a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_RAW)\n\
                  \x20   a.sendto(b'escaped', sys.argv[1]); print('sent')\n\
                  except OSError as e:\n\
                  \x20   print(errno.errorcode[e.errno])\n";
    let args: Vec<OsString> = vec!["-c".into(), script.into(), outside.clone().into()];
    let received = || {
        let mut n = 0;
        let mut buf = [0u8; 16];
        while let Ok(k) = receiver.recv(&mut buf) {
            assert_eq!(&buf[..k], b"escaped");
            n += 1;
        }
        n
    };
    let off = sandgate_shellexec::confine::prepare(&spec, ConfineMode::Off).unwrap();
    let r = python(&ex, &off, &args, ExecOptions::default());
    assert_eq!(text(&r.stdout), "sent\nsent\nsent\n", "{}", text(&r.stderr));
    assert_eq!(received(), 3);
    let Some(prepared) = judged_floor(&spec, kernel) else {
        return;
    };
    let r = python(&ex, &prepared, &args, ExecOptions::default());
    assert_eq!(
        text(&r.stdout),
        "EPERM\nEPERM\nEPERM\n",
        "{}",
        text(&r.stderr)
    );
    assert_eq!(received(), 0);
}

/// The command's side of the flag race: a listener of its own whose
/// queue is full, a thread flipping `O_NONBLOCK` on the socket the main
/// thread connects to it, attempt after attempt, for four seconds.
const NONBLOCK_RACE: &str = r#"
import ctypes, os, socket, sys, threading, time
sys.setswitchinterval(0.0001)
libc = ctypes.CDLL(None, use_errno=True)
path, pidfile = sys.argv[1:3]
with open(pidfile, 'w') as f:
    f.write(str(os.getpid()))
l = socket.socket(socket.AF_UNIX)
l.bind(path)
l.listen(0)
held = []
while True:
    s = socket.socket(socket.AF_UNIX)
    s.setblocking(False)
    if s.connect_ex(path):
        break
    held.append(s)
class Sun(ctypes.Structure):
    _fields_ = [('family', ctypes.c_ushort), ('path', ctypes.c_char * 108)]
addr = Sun(socket.AF_UNIX, path.encode())
cur = [-1]
stop = False
def toggle():
    while not stop:
        fd = cur[0]
        if fd >= 0:
            libc.fcntl(fd, 4, os.O_NONBLOCK)
            libc.fcntl(fd, 4, 0)
threading.Thread(target=toggle, daemon=True).start()
n = 0
deadline = time.time() + 4
while time.time() < deadline:
    fd = libc.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0)
    libc.fcntl(fd, 4, os.O_NONBLOCK)
    cur[0] = fd
    libc.connect(fd, ctypes.byref(addr), ctypes.sizeof(addr))
    cur[0] = -1
    os.close(fd)
    n += 1
stop = True
time.sleep(0.1)
print('attempts', n > 0, flush=True)
"#;

/// A command that flips `O_NONBLOCK` on a socket while the executor
/// connects it (the flag read as set, then clear when the connect runs)
/// never has the executor wait in that connect: the run still ends by
/// itself, or at its timeout. Before, the executor connected a socket it
/// had read as non-blocking on the thread that runs the command (its
/// timeout, its output, its kill); the connect then waited, without end,
/// for a listener of the command's whose queue the command kept full:
/// the run outlived its timeout until the command was killed from
/// outside.
#[test]
fn a_command_flipping_nonblock_during_its_connect_never_stops_its_run() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    let ex = Arc::new(ex);
    let w = tempfile::tempdir().unwrap();
    let (sock, pidfile) = (w.path().join("full.sock"), w.path().join("pid"));
    let spec = ConfineSpec {
        write_dirs: vec![w.path().to_owned()],
        ..ConfineSpec::default()
    };
    let Some(prepared) = judged_floor(&spec, kernel) else {
        return;
    };
    let args: Vec<OsString> = vec![
        "-c".into(),
        NONBLOCK_RACE.into(),
        sock.clone().into(),
        pidfile.clone().into(),
    ];
    let began = Instant::now();
    let run = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || {
            let opts = ExecOptions {
                timeout: Some(Duration::from_secs(8)),
                ..ExecOptions::default()
            };
            python(&ex, &prepared, &args, opts)
        })
    };
    while !run.is_finished() && began.elapsed() < Duration::from_secs(25) {
        thread::sleep(Duration::from_millis(50));
    }
    let stuck = !run.is_finished();
    if stuck {
        // Ends the listener's holder, which lets the connect end.
        let pid: i32 = fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    let r = run.join().unwrap();
    assert!(
        !stuck,
        "the run outlived its timeout by {:?}",
        began.elapsed()
    );
    assert_eq!(text(&r.stdout), "attempts True\n", "{}", text(&r.stderr));
}

/// The command's side of the self-connect: a listener of its own whose
/// queue is full connects to its own name, on a blocking socket, while a
/// thread clears the socket's send timeout again and again (the slice the
/// executor sets before each try).
const SELF_CONNECT: &str = r#"
import ctypes, os, socket, struct, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
path = sys.argv[1]
l = socket.socket(socket.AF_UNIX)
l.bind(path)
l.listen(0)
held = []
while True:
    s = socket.socket(socket.AF_UNIX)
    s.setblocking(False)
    if s.connect_ex(path):
        break
    held.append(s)
print('socket:[%d]' % os.fstat(l.fileno()).st_ino, flush=True)
def clear():
    zero = struct.pack('ll', 0, 0)
    while True:
        l.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, zero)
threading.Thread(target=clear, daemon=True).start()
class Sun(ctypes.Structure):
    _fields_ = [('family', ctypes.c_ushort), ('path', ctypes.c_char * 108)]
addr = Sun(socket.AF_UNIX, path.encode())
libc.connect(l.fileno(), ctypes.byref(addr), ctypes.sizeof(addr))
"#;

/// A connect the executor performs for a command, whatever the command
/// does to the socket meanwhile, ends once the command is gone: here a
/// listener whose queue is full connects to itself (the kernel waits for
/// room in the queue before it finds the socket is a listener) with its
/// send timeout cleared between two slices. Before, the executor's copy
/// of the socket kept the listener open after the command ended, so the
/// queue never emptied and the executor's thread waited for good,
/// holding the socket: a thread and a descriptor left behind per run.
#[test]
fn a_connect_the_command_left_behind_ends_with_it() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    let w = tempfile::tempdir().unwrap();
    let sock = w.path().join("self.sock");
    let spec = ConfineSpec {
        write_dirs: vec![w.path().to_owned()],
        ..ConfineSpec::default()
    };
    let Some(prepared) = judged_floor(&spec, kernel) else {
        return;
    };
    let opts = ExecOptions {
        timeout: Some(Duration::from_secs(3)),
        ..ExecOptions::default()
    };
    let args: Vec<OsString> = vec!["-c".into(), SELF_CONNECT.into(), sock.into()];
    let r = python(&ex, &prepared, &args, opts);
    assert!(r.timed_out, "{}", text(&r.stderr));
    let name = text(&r.stdout).trim().to_owned();
    assert!(name.starts_with("socket:["), "{name} {}", text(&r.stderr));
    // The executor is this process: the socket is no longer among its
    // descriptors once the run is over (a thread ends within a slice).
    let deadline = Instant::now() + Duration::from_secs(5);
    let held = || {
        fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .any(|e| fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == name.as_str()))
    };
    while held() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert!(!held(), "the executor still holds {name}");
}

/// A process outside every run with a terminal of its own: a `sleep` that
/// leads the session and the foreground group of a new pty. Prints the
/// terminal's name, then on a line `write` types a line into it, and
/// says whether the `sleep` is `alive` or was `killed` (by which signal).
const OUTSIDE_TTY: &str = r#"
import fcntl, os, sys, termios, time
m, s = os.openpty()
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(s, termios.TIOCSCTTY, 0)
    os.execvp('sleep', ['sleep', '60'])
time.sleep(0.2)
print(os.ttyname(s), flush=True)
if sys.stdin.readline().strip() == 'write':
    os.write(m, b'typed\n')
time.sleep(0.5)
p, st = os.waitpid(pid, os.WNOHANG)
if p == 0:
    print('alive', flush=True)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
else:
    print('killed', os.WTERMSIG(st) if os.WIFSIGNALED(st) else -1, flush=True)
"#;

/// The command's side: opens the terminal (read-only, not as its own)
/// and asks for `SIGIO` on it, by `fcntl(F_SETFL, O_ASYNC)` or by
/// `ioctl(FIOASYNC)`: a terminal then signals its foreground group.
const ASYNC_TTY: &str = r#"
import errno, fcntl, os, struct, sys, termios, time
tty, ready, how = sys.argv[1:4]
fd = os.open(tty, os.O_RDONLY | os.O_NOCTTY)
try:
    if how == 'fcntl':
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
    else:
        fcntl.ioctl(fd, termios.FIOASYNC, struct.pack('i', 1))
    print('armed', flush=True)
except OSError as e:
    print(errno.errorcode[e.errno], flush=True)
open(ready, 'w').close()
time.sleep(3)
"#;

/// Without signal scoping, a command that may read a terminal of another
/// process (here every file is readable) cannot have the terminal signal
/// that process: asking for `SIGIO` on a terminal (`O_ASYNC`, `FIOASYNC`)
/// makes the kernel send it to the terminal's foreground process group,
/// whose default action for it ends the process, at the next input.
/// Before, both ways armed the terminal, and a line typed into it killed
/// the outside process with `SIGIO` (29).
#[test]
fn without_signal_scoping_a_command_cannot_have_a_terminal_signal_its_foreground() {
    use std::io::{BufRead, BufReader, Write};
    let Some((_, ex)) = floor_for_python() else {
        return;
    };
    let w = tempfile::tempdir().unwrap();
    let prepared = sandgate_shellexec::confine::prepare_with_abi(
        &ConfineSpec {
            read_dirs: vec![PathBuf::from("/")],
            write_dirs: vec![w.path().to_owned()],
            ..ConfineSpec::default()
        },
        ConfineMode::BestEffort,
        Some(5),
    )
    .unwrap();
    if !supervises(&prepared) {
        eprintln!("note: no seccomp user notification here: signals are not judged; skipped");
        return;
    }
    let ex = Arc::new(ex);
    for how in ["fcntl", "ioctl"] {
        let mut outside = std::process::Command::new(PYTHON)
            .args(["-c", OUTSIDE_TTY])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(outside.stdout.take().unwrap()).lines();
        let tty = lines.next().unwrap().unwrap();
        let ready = w.path().join(format!("ready-{how}"));
        let run = {
            let (ex, prepared) = (Arc::clone(&ex), prepared.clone());
            let args: Vec<OsString> = vec![
                "-c".into(),
                ASYNC_TTY.into(),
                tty.clone().into(),
                ready.clone().into(),
                how.into(),
            ];
            thread::spawn(move || python(&ex, &prepared, &args, ExecOptions::default()))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready.exists() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let mut stdin = outside.stdin.take().unwrap();
        stdin.write_all(b"write\n").unwrap();
        stdin.flush().unwrap();
        let fate = lines.next().unwrap().unwrap();
        outside.wait().unwrap();
        let r = run.join().unwrap();
        assert_eq!(
            (text(&r.stdout).as_str(), fate.as_str()),
            ("EPERM\n", "alive"),
            "{how} on {tty}: {}",
            text(&r.stderr)
        );
    }
}

/// A limitation, pinned: a command that is not dumpable (it asked so, as
/// agents and key holders do, or it runs a binary it may not read) cannot
/// connect on the floor when the executor is not root, even to a UNIX
/// socket in its write root or a granted TCP port (`EACCES`): the
/// executor (of the same user, without `CAP_SYS_PTRACE`) may not read such
/// a process's memory or take its descriptors, which every connect it
/// performs needs, and letting the call run would judge nothing; nor can
/// it `listen`, which the executor performs on a copy of the socket too.
/// Under a root executor all three work.
#[test]
fn on_the_floor_a_command_that_is_not_dumpable_connects_only_under_a_root_executor() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    let w = tempfile::tempdir().unwrap();
    let sock = w.path().join("in.sock");
    answer_unix(&sock, "pong-in");
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    answer(move || l.accept().map(|(c, _)| c), "pong-tcp");
    let spec = ConfineSpec {
        write_dirs: vec![w.path().to_owned()],
        connect_ports: vec![port],
        ..ConfineSpec::default()
    };
    let Some(prepared) = judged_floor(&spec, kernel) else {
        return;
    };
    let script = "import ctypes, errno, socket, sys\n\
                  ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n\
                  for fam, addr in ((socket.AF_UNIX, sys.argv[1]), (socket.AF_INET, ('127.0.0.1', int(sys.argv[2])))):\n\
                  \x20   s = socket.socket(fam)\n\
                  \x20   try:\n\
                  \x20       s.connect(addr); s.sendall(b'x'); print(s.recv(64).decode())\n\
                  \x20   except OSError as e:\n\
                  \x20       print(errno.errorcode[e.errno])\n\
                  l = socket.socket(socket.AF_UNIX)\n\
                  l.bind(sys.argv[3])\n\
                  try:\n\
                  \x20   l.listen(1); print('listening')\n\
                  except OSError as e:\n\
                  \x20   print(errno.errorcode[e.errno])\n";
    let args: Vec<OsString> = vec![
        "-c".into(),
        script.into(),
        sock.into(),
        port.to_string().into(),
        w.path().join("own.sock").into(),
    ];
    let r = python(&ex, &prepared, &args, ExecOptions::default());
    // `listen`, which the executor performs on a copy of the socket, the
    // same.
    let want = if rustix::process::geteuid().is_root() {
        "pong-in\npong-tcp\nlistening\n"
    } else {
        "EACCES\nEACCES\nEACCES\n"
    };
    assert_eq!(text(&r.stdout), want, "{}", text(&r.stderr));
}

/// The command's side: a route netlink socket connected to the link
/// group (sending to a group takes `CAP_NET_ADMIN`, which the command
/// does not hold on the floor), then a message sent to it.
const NETLINK_GROUP: &str = r#"
import errno, socket, struct
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
try:
    s.connect((0, 1))
    body = b'sandgate-spoof'
    s.send(struct.pack('=IHHII', 16 + len(body), 16, 0, 1, 0) + body)
    print('sent', flush=True)
except OSError as e:
    print(errno.errorcode[e.errno], flush=True)
"#;

/// The executor performs a command's connects with its own credentials:
/// one the kernel judges by the caller's capabilities is answered as the
/// command's would be. A route netlink socket connected to a multicast
/// group (which lets it send fake link events to every listener of the
/// group) takes `CAP_NET_ADMIN`, which a command on the floor does not
/// hold: `EPERM`. Before, an executor run as root connected it, and the
/// command's message reached a listener of the group.
#[test]
fn on_the_floor_a_connect_takes_the_commands_privileges_not_the_executors() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: the executor holds no CAP_NET_ADMIN to lend; skipped");
        return;
    }
    let Some(prepared) = judged_floor(&ConfineSpec::default(), kernel) else {
        return;
    };
    // A listener of the link group, as a network daemon has.
    // SAFETY: plain socket calls on a zeroed sockaddr_nl.
    let listener = unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        );
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_nl = std::mem::zeroed();
        addr.nl_family = libc::AF_NETLINK as u16;
        addr.nl_groups = 1;
        let len = std::mem::size_of::<libc::sockaddr_nl>() as u32;
        assert_eq!(
            libc::bind(fd, (&addr as *const libc::sockaddr_nl).cast(), len),
            0
        );
        <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
    };
    let args: Vec<OsString> = vec!["-c".into(), NETLINK_GROUP.into()];
    let r = python(&ex, &prepared, &args, ExecOptions::default());
    thread::sleep(Duration::from_millis(100));
    let mut spoofed = false;
    let mut buf = [0u8; 65536];
    while let Ok(n) = rustix::io::read(&listener, &mut buf) {
        spoofed |= buf[..n].windows(14).any(|w| w == b"sandgate-spoof");
    }
    assert_eq!(
        (text(&r.stdout).as_str(), spoofed),
        ("EPERM\n", false),
        "{}",
        text(&r.stderr)
    );
}

/// Ordinary programs that connect to their own sockets keep working on
/// the floor where the executor judges every connect: Python's
/// multiprocessing with a manager process and a forkserver child (their
/// listeners are bound in the command's private temporary directory, or
/// under abstract names from Python 3.12).
#[test]
fn on_the_floor_pythons_multiprocessing_reaches_its_own_listeners() {
    let Some((_, _)) = floor_for_python() else {
        return;
    };
    let w = tempfile::tempdir().unwrap();
    let ex = started(ExecConfig {
        confine_mode: ConfineMode::BestEffort,
        namespaces: false,
        confine: ConfineSpec {
            write_dirs: vec![w.path().to_owned()],
            ..ConfineSpec::default()
        },
        ..config()
    });
    // (A pool is not tried: its locks are POSIX semaphores in `/dev/shm`,
    // which no rule grants on the floor.)
    let script = "import multiprocessing as mp\n\
                  def child(conn):\n\
                  \x20   conn.send(sum(map(abs, [-1, -2, -3])))\n\
                  if __name__ == '__main__':\n\
                  \x20   with mp.Manager() as m:\n\
                  \x20       d = m.dict(); d['k'] = 41; d['k'] += 1; print('manager', d['k'])\n\
                  \x20   ctx = mp.get_context('forkserver')\n\
                  \x20   a, b = ctx.Pipe()\n\
                  \x20   p = ctx.Process(target=child, args=(b,))\n\
                  \x20   p.start(); print('forkserver', a.recv()); p.join()\n";
    let file = w.path().join("mp.py");
    fs::write(&file, script).unwrap();
    let command = format!("python3 {}", file.display());
    let r = with_timeout(&ex, &command, Duration::from_secs(60));
    assert!(
        r.confined
            .seccomp_refuses
            .iter()
            .any(|s| s.starts_with("connect to a UNIX socket"))
            || !r.confined.seccomp,
        "{:?}",
        r.confined.seccomp_refuses
    );
    assert_eq!(
        text(&r.stdout),
        "manager 42\nforkserver 6\n",
        "{}",
        text(&r.stderr)
    );
}

/// The command's side of [`oldabi17_on_the_floor_no_open_passes_landlock_unjudged`]:
/// one line per attempt, `ok` or the error's name.
const OPEN_PROBE: &str = r#"
import errno, fcntl, os, struct, sys, termios
outside, inread, inwork, tty = sys.argv[1:]
def attempt(label, fn):
    try:
        fn()
        print(label, "ok")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
def opened(path, flags):
    os.close(os.open(path, flags | os.O_NOCTTY))
def winsize():
    fd = os.open(tty, 3 | os.O_NOCTTY)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 11, 22, 0, 0))
attempt("truncate_outside", lambda: os.truncate(outside, 1))
attempt("rdonly_trunc_read_root", lambda: opened(inread, os.O_RDONLY | os.O_TRUNC))
attempt("neither_outside", lambda: opened(outside, 3))
attempt("neither_trunc_read_root", lambda: opened(inread, 3 | os.O_TRUNC))
attempt("tty_winsize", winsize)
attempt("wronly_trunc_write_root", lambda: opened(inwork, os.O_WRONLY | os.O_TRUNC))
"#;

/// Landlock judges an open by the modes the file gets: one for neither
/// reading nor writing (`O_ACCMODE` 3, "ioctl only") passed every rule, at
/// every ABI, and before ABI 3 (no truncate right) `truncate(2)` and an
/// open for reading with `O_TRUNC` passed too. On the floor, where the
/// command sees the host's tree, a command emptied a file outside its
/// write root by path and one in a read root by such an open (as root, a
/// system directory's too) at ABI 1 and 2, opened a host file outside
/// every rule at every ABI (as root it then set the file append-only with
/// `FS_IOC_SETFLAGS`), and, before ABI 5 (device ioctls), opened its
/// user's terminal and changed its size. The filter refuses those opens
/// (`EACCES`) and, before ABI 3, `truncate(2)` and `O_RDONLY | O_TRUNC`;
/// `openat2`, whose flags it cannot read, answers `ENOSYS`. Each probe
/// beside the same one unconfined, which succeeds; an open for writing
/// with `O_TRUNC` in the write root still works.
#[test]
fn oldabi17_on_the_floor_no_open_passes_landlock_unjudged() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (work, read) = (dir.path().join("work"), dir.path().join("read"));
    fs::create_dir(&work).unwrap();
    fs::create_dir(&read).unwrap();
    let (outside, inread, inwork) = (
        dir.path().join("outside"),
        read.join("file"),
        work.join("file"),
    );
    // A terminal of the test's user, outside every rule.
    // SAFETY: plain libc calls on a descriptor this test owns.
    let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
    assert!(master >= 0, "{}", std::io::Error::last_os_error());
    // SAFETY: `master` is open; `name` outlives the call.
    let master = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(master) };
    let mut name = [0u8; 128];
    // SAFETY: as above.
    unsafe {
        use std::os::fd::AsRawFd;
        assert_eq!(libc::grantpt(master.as_raw_fd()), 0);
        assert_eq!(libc::unlockpt(master.as_raw_fd()), 0);
        assert_eq!(
            libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr().cast(), name.len()),
            0
        );
    }
    let tty = std::ffi::CStr::from_bytes_until_nul(&name)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let winsize = || {
        use std::os::fd::AsRawFd;
        let mut ws = libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCGWINSZ writes one `struct winsize`.
        let r = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) };
        assert_eq!(r, 0);
        (ws.ws_row, ws.ws_col)
    };
    let spec = ConfineSpec {
        read_dirs: vec![read.clone()],
        write_dirs: vec![work.clone()],
        ..ConfineSpec::default()
    };
    let args: Vec<OsString> = ["-c", OPEN_PROBE]
        .into_iter()
        .map(OsString::from)
        .chain([&outside, &inread, &inwork].map(|p| p.clone().into_os_string()))
        .chain([OsString::from(&tty)])
        .collect();
    let probe = |prepared: &sandgate_shellexec::confine::Prepared| {
        for file in [&outside, &inread, &inwork] {
            fs::write(file, "host data").unwrap();
        }
        let r = python(&ex, prepared, &args, ExecOptions::default());
        assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
        let sizes: Vec<u64> = [&outside, &inread]
            .map(|f| fs::metadata(f).unwrap().len())
            .into();
        let size = winsize();
        use std::os::fd::AsRawFd;
        let zero = libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one `struct winsize`.
        let set = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &zero) };
        assert_eq!(set, 0);
        (text(&r.stdout), sizes, size)
    };

    let off = sandgate_shellexec::confine::prepare_with_abi(&spec, ConfineMode::Off, None).unwrap();
    assert_eq!(
        probe(&off),
        (
            "truncate_outside ok\nrdonly_trunc_read_root ok\nneither_outside ok\n\
             neither_trunc_read_root ok\ntty_winsize ok\nwronly_trunc_write_root ok\n"
                .to_owned(),
            vec![1, 0],
            (11, 22)
        ),
        "unconfined, every probe succeeds"
    );
    let mut abis: Vec<u32> = vec![1, 2, 3, 4, kernel.min(8)];
    abis.retain(|&a| a <= kernel);
    abis.dedup();
    for abi in abis {
        let prepared = sandgate_shellexec::confine::prepare_with_abi(
            &spec,
            ConfineMode::BestEffort,
            Some(abi),
        )
        .unwrap();
        assert!(prepared.report().seccomp, "ABI {abi}");
        assert_eq!(
            probe(&prepared),
            (
                "truncate_outside EACCES\nrdonly_trunc_read_root EACCES\nneither_outside EACCES\n\
                 neither_trunc_read_root EACCES\ntty_winsize EACCES\nwronly_trunc_write_root ok\n"
                    .to_owned(),
                vec![9, 9],
                (0, 0)
            ),
            "ABI {abi}"
        );
    }
}

/// Sets the append-only flag (`FS_IOC_SETFLAGS`, as `chattr +a` does) on
/// each file named, opened for reading only; one line per file.
const APPEND_ONLY_PROBE: &str = r#"
import errno, fcntl, os, struct, sys
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDONLY)
        flags = struct.unpack("l", fcntl.ioctl(fd, 0x80086601, struct.pack("l", 0)))[0]
        fcntl.ioctl(fd, 0x40086602, struct.pack("l", flags | 0x20))
        print("ok")
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno))
"#;

/// Whether `path` is append-only, and clears the flag (as root).
fn take_append_only(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let file = fs::File::open(path).unwrap();
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS and FS_IOC_SETFLAGS read or write one long.
    unsafe {
        assert_eq!(libc::ioctl(file.as_raw_fd(), 0x8008_6601, &mut flags), 0);
        let was = flags & 0x20 != 0;
        flags &= !0x20;
        assert_eq!(libc::ioctl(file.as_raw_fd(), 0x4008_6602, &flags), 0);
        was
    }
}

/// Landlock does not judge ioctls on regular files, and a command run as
/// root on the floor kept `CAP_LINUX_IMMUTABLE`: it made a file it may
/// only read (a read root's; a system directory's, `/etc`, alike)
/// append-only or immutable with the `chattr` ioctl, at every ABI, which
/// no process of the host could then rewrite. On the floor the command
/// now loses that capability, as a command in the namespaces never holds
/// it (the kernel asks for it in the initial user namespace), so the
/// ioctl answers `EPERM`, in the write root too; unconfined, the same
/// call sets the flag. Root only (an unprivileged command never holds
/// the capability).
#[test]
fn oldabi17_a_command_run_as_root_on_the_floor_makes_no_file_append_only() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    if !rustix::process::geteuid().is_root() {
        eprintln!("note: not root: a command never holds CAP_LINUX_IMMUTABLE; skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (work, read) = (dir.path().join("work"), dir.path().join("read"));
    fs::create_dir(&work).unwrap();
    fs::create_dir(&read).unwrap();
    let files = [read.join("file"), work.join("file")];
    for file in &files {
        fs::write(file, "host data").unwrap();
    }
    let spec = ConfineSpec {
        read_dirs: vec![read.clone()],
        write_dirs: vec![work.clone()],
        ..ConfineSpec::default()
    };
    let args: Vec<OsString> = ["-c", APPEND_ONLY_PROBE]
        .into_iter()
        .map(OsString::from)
        .chain(files.iter().map(|p| p.clone().into_os_string()))
        .collect();
    let off = sandgate_shellexec::confine::prepare_with_abi(&spec, ConfineMode::Off, None).unwrap();
    let r = python(&ex, &off, &args, ExecOptions::default());
    let set: Vec<bool> = files.iter().map(|f| take_append_only(f)).collect();
    if text(&r.stdout) != "ok\nok\n" {
        eprintln!(
            "note: no inode flags here (unconfined: {}); skipped",
            text(&r.stdout)
        );
        return;
    }
    assert_eq!(set, [true, true], "unconfined, the flag is set");
    let mut abis = vec![1, 2, 3, 4, kernel.min(8)];
    abis.retain(|&a| a <= kernel);
    abis.dedup();
    for abi in abis {
        let prepared = sandgate_shellexec::confine::prepare_with_abi(
            &spec,
            ConfineMode::BestEffort,
            Some(abi),
        )
        .unwrap();
        let r = python(&ex, &prepared, &args, ExecOptions::default());
        let set: Vec<bool> = files.iter().map(|f| take_append_only(f)).collect();
        assert_eq!(
            (text(&r.stdout), set),
            ("EPERM\nEPERM\n".to_owned(), vec![false, false]),
            "ABI {abi}: {}",
            text(&r.stderr)
        );
    }
}

/// Below Landlock ABI 4, which judges TCP by port, Landlock lets a command
/// connect anywhere: on the floor, where the executor sees every connect
/// (seccomp user notification), it judges a TCP connect by the granted
/// ports instead, as Landlock would from ABI 4. A granted port answers
/// and another is refused (`EACCES`) at ABI 1 and 3, as at the kernel's;
/// unconfined both answer. Before, at ABI 3 the second port answered too.
#[test]
fn below_landlock_abi_4_the_executor_judges_tcp_by_port_on_the_floor() {
    let Some((kernel, ex)) = floor_for_python() else {
        return;
    };
    let listen = |reply: &'static str| {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        answer(move || l.accept().map(|(c, _)| c), reply);
        port
    };
    let (granted, other) = (listen("pong-granted"), listen("pong-other"));
    let w = tempfile::tempdir().unwrap();
    let spec = ConfineSpec {
        write_dirs: vec![w.path().to_owned()],
        connect_ports: vec![granted],
        ..ConfineSpec::default()
    };
    let script = "import errno, socket, sys\n\
                  for port in sys.argv[1:]:\n\
                  \x20   s = socket.socket()\n\
                  \x20   try:\n\
                  \x20       s.connect(('127.0.0.1', int(port))); s.sendall(b'x'); print(s.recv(64).decode())\n\
                  \x20   except OSError as e:\n\
                  \x20       print(errno.errorcode[e.errno])\n";
    let args: Vec<OsString> = vec![
        "-c".into(),
        script.into(),
        granted.to_string().into(),
        other.to_string().into(),
    ];
    for abi in [1, 3, kernel] {
        let prepared = sandgate_shellexec::confine::prepare_with_abi(
            &spec,
            ConfineMode::BestEffort,
            Some(abi),
        )
        .unwrap();
        if !supervises(&prepared) {
            eprintln!("note: no seccomp user notification here: connects are not judged; skipped");
            return;
        }
        if abi < 4 {
            assert!(
                prepared
                    .report()
                    .notes
                    .iter()
                    .any(|n| n.contains("the executor judges every TCP connect")),
                "{:?}",
                prepared.report().notes
            );
        }
        let r = python(&ex, &prepared, &args, ExecOptions::default());
        assert_eq!(
            text(&r.stdout),
            "pong-granted\nEACCES\n",
            "ABI {abi}: {}",
            text(&r.stderr)
        );
    }
    let off = sandgate_shellexec::confine::prepare(&spec, ConfineMode::Off).unwrap();
    let r = python(&ex, &off, &args, ExecOptions::default());
    assert_eq!(
        text(&r.stdout),
        "pong-granted\npong-other\n",
        "{}",
        text(&r.stderr)
    );
}
