//! `sandgate run` against a command that wants to outlive its supervisor
//! or escape its accounting: daemons that double-fork, `setsid`, close
//! their descriptors, ignore and block signals and take the supervisor's
//! name; a subreaper of the command's own; a tree frozen with SIGSTOP; a
//! fork bomb; a grandchild holding the output pipe; new namespaces and
//! `ptrace` where the confinement allows them; and the supervisor's own
//! signals (SIGINT, SIGTERM, SIGHUP, SIGKILL) and a stdout reader that
//! goes away. Every case polls `/proc` to show that nothing of the tree is
//! left once `sandgate run` has returned.
//!
//! A process is counted as the command's when its command line or its
//! environment holds the case's token (each script exports it), so that
//! one renaming itself (`$0`, `PR_SET_NAME`) to look like the supervisor
//! is still found; the supervisor itself is set aside by its pid.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A policy in a directory whose name holds `token`, so that every process
/// of the command (its working directory is the write root) is found by
/// its working directory and open files too.
fn policy(token: &str, exec: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix(token).tempdir().unwrap();
    fs::create_dir(dir.path().join("ws")).unwrap();
    let text = format!(
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n\
         [exec]\nenabled = true\nshell = \"/bin/sh\"\nmax_output_bytes = 1000000\n{exec}"
    );
    fs::write(dir.path().join("policy.toml"), text).unwrap();
    dir
}

/// A token no other test's process holds.
fn token(case: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("runsup25{case}{nanos}")
}

/// `sandgate run` of `/bin/sh -c SCRIPT` with `RUNSUP25=token` exported
/// first, stdin from /dev/null and stdout, stderr piped.
fn start(dir: &tempfile::TempDir, token: &str, script: &str) -> Child {
    let script = format!("export RUNSUP25={token}; {script}");
    Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .arg("run")
        .arg("--policy")
        .arg(dir.path().join("policy.toml"))
        .args(["--", "/bin/sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The processes (`pid comm [state]`) whose command line, environment,
/// working directory or an open file's name holds `token`, this test
/// process and `except` aside. (Perl's `$0` takes over the environment's
/// memory, so a renamed process may show neither.)
fn holding(token: &str, except: u32) -> Vec<String> {
    let mut found = Vec::new();
    let me = std::process::id();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<u32>() else {
            continue;
        };
        if pid == me || pid == except {
            continue;
        }
        let has = |file: &str| {
            fs::read(entry.path().join(file))
                .is_ok_and(|b| b.windows(token.len()).any(|w| w == token.as_bytes()))
        };
        let linked =
            |link: &Path| fs::read_link(link).is_ok_and(|l| l.to_string_lossy().contains(token));
        let fds = || {
            fs::read_dir(entry.path().join("fd"))
                .map(|d| d.flatten().any(|fd| linked(&fd.path())))
                .unwrap_or(false)
        };
        if has("cmdline") || has("environ") || linked(&entry.path().join("cwd")) || fds() {
            let comm = fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            let state = fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, r)| r.split_whitespace().next().unwrap_or("").to_owned())
                })
                .unwrap_or_default();
            found.push(format!("{pid} {} [{state}]", comm.trim()));
        }
    }
    found
}

/// Waits (bounded) until `path` exists.
fn await_file(path: &Path, what: &str) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "{what} never came");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for the supervisor at most `limit`; kills it and fails past that.
fn await_exit(child: &mut Child, limit: Duration, what: &str) -> (ExitStatus, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, t0.elapsed());
        }
        if t0.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: sandgate run was still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Both streams, read whole (the supervisor has exited).
fn streams(child: &mut Child) -> (String, String) {
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    (out, err)
}

/// Asserts that nothing holding `token` is left, `grace` after the
/// supervisor's exit at most (killing what is, so that a failure leaves
/// nothing running either).
fn nothing_left(token: &str, supervisor: u32, grace: Duration, what: &str) {
    let t0 = Instant::now();
    let mut left = holding(token, supervisor);
    while !left.is_empty() && t0.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(10));
        left = holding(token, supervisor);
    }
    for p in &left {
        let pid = p.split(' ').next().unwrap();
        let _ = Command::new("kill").args(["-CONT", pid]).status();
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    assert!(left.is_empty(), "{what}: left behind {left:?}");
}

fn verdict(err: &str) -> Option<Value> {
    err.lines()
        .filter_map(|l| l.strip_prefix("policy-result: "))
        .map(|j| serde_json::from_str(j).unwrap())
        .next_back()
}

/// A daemon in the classic shape: double fork with `setsid` between,
/// every descriptor closed (the output pipe included) and /dev/null
/// reopened, SIGTERM, SIGHUP and SIGINT ignored and every signal blocked,
/// and its name and argv made the supervisor's. Its starter exits at once;
/// the command's own process exits 0 once the daemon is up. `run` returns
/// with the command's code (not at its timeout), and the daemon is gone by
/// then.
const DAEMON: &str = r#"perl -e '
use POSIX ();
exit 0 if fork;                      # the starter returns at once
POSIX::setsid();
exit 0 if fork;                      # the session leader goes too
$SIG{$_} = "IGNORE" for qw(TERM HUP INT QUIT USR1 USR2 PIPE);
POSIX::sigprocmask(POSIX::SIG_BLOCK(), POSIX::SigSet->new(1..31));
POSIX::close($_) for 0..255;
open STDIN, "<", "/dev/null"; open STDOUT, ">", "/dev/null"; open STDERR, ">", "/dev/null";
$0 = "sandgate run --policy policy.toml -- worker";
my $name = "sandgate\0"; syscall(157, 15, $name, 0, 0, 0);   # prctl(PR_SET_NAME)
open my $up, ">", "daemon_up";            # held open
sleep 1 while 1;
' &"#;

#[test]
fn runsup25_a_daemon_that_double_forks_and_ignores_signals_ends_with_the_run() {
    let token = token("daemon");
    let dir = policy(&token, "timeout_ms = 60000\n");
    let script =
        format!("{DAEMON} while [ ! -e daemon_up ]; do sleep 0.01; done; echo main done; exit 0");
    let mut child = start(&dir, &token, &script);
    let supervisor = child.id();
    let (status, took) = await_exit(&mut child, Duration::from_secs(30), "daemon");
    let (out, err) = streams(&mut child);
    nothing_left(&token, supervisor, Duration::ZERO, "daemon");
    assert!(dir.path().join("ws/daemon_up").exists(), "{err}");
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(out, "main done\n");
    assert!(verdict(&err).is_none(), "{err}");
    // Ended as the command exited, not at the 60 s timeout.
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

/// A grandchild that keeps the output pipe open (and ignores SIGTERM)
/// after the command's own process exits does not hold the run: `run`
/// returns with the command's code and output once the grace period has
/// ended the grandchild, far before the timeout.
#[test]
fn runsup25_a_grandchild_holding_the_output_pipe_does_not_hold_the_run() {
    let token = token("pipe");
    let dir = policy(&token, "timeout_ms = 60000\n");
    let script = "(trap '' TERM HUP INT; touch held; while :; do sleep 1; echo tick; done) & \
                  while [ ! -e held ]; do sleep 0.01; done; echo main; exit 7";
    let mut child = start(&dir, &token, script);
    let supervisor = child.id();
    let (status, took) = await_exit(&mut child, Duration::from_secs(30), "pipe");
    let (out, err) = streams(&mut child);
    nothing_left(&token, supervisor, Duration::ZERO, "pipe");
    assert_eq!(status.code(), Some(7), "{err}");
    assert!(out.starts_with("main\n"), "{out:?}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

/// A process of the command that makes itself a child subreaper and
/// adopts double-forked orphans of its own, then exits: the orphans go up
/// to the executor's keeper, and nothing is left after the run.
#[test]
fn runsup25_a_subreaper_inside_the_command_keeps_nothing_past_the_call() {
    let token = token("subreaper");
    let dir = policy(&token, "timeout_ms = 60000\n");
    let script = r#"perl -e '
use POSIX ();
syscall(157, 36, 1, 0, 0, 0) == 0 or die "PR_SET_CHILD_SUBREAPER: $!";
for my $i (1..4) {
    my $p = fork;
    if (!$p) { exit 0 if fork; $SIG{TERM} = "IGNORE"; POSIX::setsid(); sleep 1 while 1 }
    waitpid($p, 0);
}
my $n = 0;
for (1..1000) {
    $n = () = map { split } map { local $/; open my $h, "<", $_; <$h> } glob("/proc/self/task/*/children");
    last if $n >= 4;
    select undef, undef, undef, 0.01;
}
open my $f, ">", "adopted"; print $f $n; close $f;
exit 0;
'; echo exited $?"#;
    let mut child = start(&dir, &token, script);
    let supervisor = child.id();
    let (status, _) = await_exit(&mut child, Duration::from_secs(30), "subreaper");
    let (out, err) = streams(&mut child);
    nothing_left(&token, supervisor, Duration::ZERO, "subreaper");
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(out, "exited 0\n", "{err}");
    // The subreaper really adopted its four orphans.
    let adopted = fs::read_to_string(dir.path().join("ws/adopted")).unwrap();
    assert_eq!(adopted, "4", "{err}");
}

/// A tree frozen with SIGSTOP (every process of it, the shell last) when
/// the timeout comes is ended: exit 3 with reason `timeout`, nothing left.
#[test]
fn runsup25_a_tree_stopped_with_sigstop_is_ended_at_the_timeout() {
    let token = token("stopped");
    let dir = policy(&token, "timeout_ms = 1500\n");
    let script = "(trap '' TERM; sleep 100) & (setsid sleep 100) & \
                  (trap '' TERM; sleep 100 & wait) & sleep 0.2; \
                  for p in $(cat /proc/$$/task/*/children); do kill -STOP $p; done; \
                  kill -STOP $$; echo never";
    let mut child = start(&dir, &token, script);
    let supervisor = child.id();
    let (status, took) = await_exit(&mut child, Duration::from_secs(20), "stopped");
    let (out, err) = streams(&mut child);
    nothing_left(&token, supervisor, Duration::ZERO, "stopped");
    assert_eq!(status.code(), Some(3), "{err}");
    assert_eq!(verdict(&err).unwrap()["reason"], "timeout", "{err}");
    assert!(!out.contains("never"), "{out:?}");
    assert!(took < Duration::from_secs(12), "took {took:?}");
}

/// SIGTERM to the supervisor while the whole tree is stopped (and ignores
/// SIGTERM once continued) ends the tree and exits 143.
#[test]
fn runsup25_a_signal_to_the_supervisor_ends_a_stopped_tree() {
    let token = token("sigstopped");
    let dir = policy(&token, "timeout_ms = 60000\n");
    let script = "(trap '' TERM; sleep 100) & (setsid sh -c 'trap \"\" TERM; sleep 100') & \
                  sleep 0.2; touch frozen; \
                  for p in $(cat /proc/$$/task/*/children); do kill -STOP $p; done; \
                  kill -STOP $$";
    let mut child = start(&dir, &token, script);
    let supervisor = child.id();
    await_file(&dir.path().join("ws/frozen"), "the frozen tree");
    // The shell and its two children stopped.
    let t0 = Instant::now();
    while holding(&token, supervisor)
        .iter()
        .filter(|p| p.ends_with("[T]"))
        .count()
        < 3
    {
        assert!(t0.elapsed() < Duration::from_secs(20), "never stopped");
        std::thread::sleep(Duration::from_millis(10));
    }
    let kill = Command::new("kill")
        .args(["-TERM", &supervisor.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let (status, _) = await_exit(&mut child, Duration::from_secs(20), "sigstopped");
    let (_, err) = streams(&mut child);
    nothing_left(&token, supervisor, Duration::ZERO, "sigstopped");
    assert_eq!(status.code(), Some(128 + 15), "{err}");
}

/// A fork bomb (processes that each start two more and sleep) is bounded
/// by `max_tasks`: exit 3 with reason `task_limit`, nothing left.
#[test]
fn runsup25_a_fork_bomb_is_bounded_by_the_task_limit_and_ended() {
    let token = token("bomb");
    let dir = policy(&token, "timeout_ms = 20000\nmax_tasks = 32\n");
    // Depth 8: at most 511 processes where nothing bounds it.
    let script = r#"perl -e '
$SIG{TERM} = "IGNORE";
my $d = 8;
while ($d-- > 0) { my $p = fork; last unless defined $p; if (!$p) { next } my $q = fork; last unless defined $q; last if $q; }
sleep 1 while 1;
'"#;
    let mut child = start(&dir, &token, script);
    let supervisor = child.id();
    let (status, _) = await_exit(&mut child, Duration::from_secs(40), "bomb");
    let (_, err) = streams(&mut child);
    nothing_left(&token, supervisor, Duration::ZERO, "bomb");
    assert_eq!(status.code(), Some(3), "{err}");
    assert_eq!(verdict(&err).unwrap()["reason"], "task_limit", "{err}");
}

/// A process that forks and exits at once, again and again (ignoring
/// SIGTERM): its pid changes faster than a scan of `/proc` reads it, and
/// every new one is re-parented to the executor's keeper.
const RUNNER: &str = r#"perl -e '
$SIG{TERM} = "IGNORE";
open my $f, ">", "running"; close $f;
while (1) { my $p = fork; exit 0 if $p; select undef, undef, undef, 0.001 unless defined $p }
' &"#;

/// SIGKILL to the supervisor, which cannot catch it: the executor's keeper
/// learns of its death (a parent-death signal) and ends the command's
/// tree: a `setsid` daemon that ignores SIGTERM and blocks signals, a
/// process that forks and exits at once without end, and a subreaper of
/// the command's own holding orphans. Nothing is left within moments, in
/// namespaces (PID 1's death ends them) and on the floor (`confine =
/// "off"`, where the keeper kills what it has until nothing is left). By
/// default the command's `kill -STOP $PPID` is refused, so it cannot
/// freeze the keeper beforehand.
#[test]
fn runsup25_sigkill_to_the_supervisor_leaves_nothing_behind() {
    for confine in ["", "confine = \"off\"\n"] {
        let token = token("sigkill");
        let dir = policy(&token, &format!("timeout_ms = 60000\n{confine}"));
        // Where signals are judged (scoping, by default), the command
        // cannot stop its keeper first: a stopped keeper could not end the
        // tree (see SECURITY.md for where nothing judges signals).
        let stop = if confine.is_empty() {
            "kill -STOP $PPID 2>/dev/null && touch keeper_stopped; "
        } else {
            ""
        };
        let script = format!(
            "{stop}{DAEMON} {RUNNER} (trap '' TERM HUP INT; sleep 100) & \
             perl -e 'syscall(157, 36, 1, 0, 0, 0); \
             for (1..3) {{ my $p = fork; if (!$p) {{ exit 0 if fork; $SIG{{TERM}} = \"IGNORE\"; \
             sleep 1 while 1 }} waitpid($p, 0) }} sleep 1 while 1' & \
             sleep 100"
        );
        let mut child = start(&dir, &token, &script);
        let supervisor = child.id();
        await_file(&dir.path().join("ws/daemon_up"), "the daemon");
        await_file(&dir.path().join("ws/running"), "the runner");
        let t0 = Instant::now();
        while holding(&token, supervisor).len() < 9 {
            assert!(t0.elapsed() < Duration::from_secs(20), "never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        // The daemon, named as the supervisor, is among them.
        assert!(
            holding(&token, supervisor)
                .iter()
                .any(|p| p.contains(" sandgate [")),
            "{:?}",
            holding(&token, supervisor)
        );
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        nothing_left(
            &token,
            supervisor,
            Duration::from_secs(5),
            &format!("SIGKILL {confine}"),
        );
        assert!(!dir.path().join("ws/keeper_stopped").exists());
    }
}

/// A process that forks and exits at once without end, left behind by a
/// command that exits: `run` returns with the command's code, and the
/// runner is gone by then (on the floor and in namespaces).
#[test]
fn runsup25_a_process_that_forks_and_exits_without_end_ends_with_the_run() {
    for confine in ["", "confine = \"off\"\n"] {
        let token = token("runner");
        let dir = policy(&token, &format!("timeout_ms = 60000\n{confine}"));
        let script = format!("{RUNNER} while [ ! -e running ]; do sleep 0.01; done; exit 4");
        let mut child = start(&dir, &token, &script);
        let supervisor = child.id();
        let (status, took) = await_exit(&mut child, Duration::from_secs(30), "runner");
        let (_, err) = streams(&mut child);
        nothing_left(&token, supervisor, Duration::ZERO, "runner");
        assert_eq!(status.code(), Some(4), "{confine}: {err}");
        assert!(took < Duration::from_secs(15), "took {took:?}");
    }
}

/// SIGINT, SIGTERM and SIGHUP to the supervisor end a tree that holds a
/// daemon and a stopped process; exit 128 + n and nothing left.
#[test]
fn runsup25_each_aborting_signal_ends_a_daemon_tree_and_exits_128_plus_n() {
    for (name, n) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let token = token(name);
        let dir = policy(&token, "timeout_ms = 60000\n");
        let script = format!("{DAEMON} sleep 100 & kill -STOP $!; trap '' INT TERM HUP; sleep 100");
        let mut child = start(&dir, &token, &script);
        let supervisor = child.id();
        await_file(&dir.path().join("ws/daemon_up"), "the daemon");
        let kill = Command::new("kill")
            .args([format!("-{name}"), supervisor.to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let (status, _) = await_exit(&mut child, Duration::from_secs(20), name);
        nothing_left(&token, supervisor, Duration::ZERO, name);
        assert_eq!(status.code(), Some(128 + n), "SIG{name}");
    }
}

/// A supervisor whose stdout reader has gone: its write fails (`EPIPE`,
/// SIGPIPE not ending it), the verdict still reaches stderr, the exit code
/// is the command's, and nothing is left.
#[test]
fn runsup25_a_stdout_reader_that_goes_away_does_not_kill_the_supervisor() {
    let token = token("sigpipe");
    let dir = policy(&token, "timeout_ms = 60000\n");
    let script = "head -c 300000 /dev/zero; exit 3";
    let mut child = start(&dir, &token, script);
    let supervisor = child.id();
    drop(child.stdout.take());
    let (status, _) = await_exit(&mut child, Duration::from_secs(30), "sigpipe");
    let (_, err) = streams(&mut child);
    nothing_left(&token, supervisor, Duration::ZERO, "sigpipe");
    assert_eq!(status.code(), Some(1), "{status:?} {err}");
    assert_eq!(
        verdict(&err).unwrap()["reason"],
        "worker_reserved_exit",
        "{err}"
    );
}

/// A command that closes its standard streams and reopens them, and one
/// that tries its terminal: stdin is /dev/null, `/dev/tty` cannot be
/// opened (no controlling terminal, the command is in a session of its
/// own), and the output written after reopening is the program's.
#[test]
fn runsup25_closed_and_reopened_streams_and_no_terminal() {
    let token = token("streams");
    let dir = policy(&token, "timeout_ms = 60000\n");
    let script = "echo before; exec 0<&- 1>&- 2>&-; \
                  exec 1>/dev/null 2>/dev/null; \
                  if echo tty > /dev/tty; then touch had_tty; fi; \
                  exec 0</dev/null; sleep 100 & exit 5";
    let mut child = start(&dir, &token, script);
    let supervisor = child.id();
    let (status, took) = await_exit(&mut child, Duration::from_secs(30), "streams");
    let (out, err) = streams(&mut child);
    nothing_left(&token, supervisor, Duration::ZERO, "streams");
    assert_eq!(status.code(), Some(5), "{err}");
    assert_eq!(out, "before\n");
    assert!(!dir.path().join("ws/had_tty").exists());
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

/// Where the confinement is off (so no filter refuses `unshare` or
/// `ptrace`), a command that starts a process in new user and PID
/// namespaces (where the host allows them), and one that attaches to its
/// sibling with `ptrace` and leaves it traced and stopped, still leaves
/// nothing once it exits: the processes are found by their host pids.
#[test]
fn runsup25_new_namespaces_and_a_traced_sibling_are_still_ended() {
    let token = token("unshare");
    let dir = policy(&token, "timeout_ms = 60000\nconfine = \"off\"\n");
    let script = "(unshare --user --pid --fork --map-root-user sh -c \
                   'trap \"\" TERM; touch in_ns; sleep 100' || touch no_ns) & \
                  sleep 100 & victim=$!; \
                  perl -e 'if (syscall(101, 16, $ARGV[0] + 0, 0, 0) != 0) { open my $f, \">\", \"untraced\"; exit 0 } \
                   waitpid($ARGV[0] + 0, 0); open my $f, \">\", \"traced\"; close $f; \
                   $SIG{TERM} = \"IGNORE\"; sleep 1 while 1' $victim & \
                  while { [ ! -e traced ] && [ ! -e untraced ]; } || { [ ! -e in_ns ] && [ ! -e no_ns ]; }; do sleep 0.01; done; \
                  exit 0";
    let mut child = start(&dir, &token, script);
    let supervisor = child.id();
    let (status, took) = await_exit(&mut child, Duration::from_secs(30), "unshare");
    let (_, err) = streams(&mut child);
    nothing_left(&token, supervisor, Duration::ZERO, "unshare");
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        dir.path().join("ws/traced").exists(),
        "the sibling could not be traced: {err}"
    );
    if dir.path().join("ws/no_ns").exists() {
        eprintln!("note: the host refused new namespaces here; the ptrace half ran");
    }
    assert!(took < Duration::from_secs(15), "took {took:?}");
}
