//! The facade's executor under races: `exec` from many threads while
//! another disposes of it again and again, the audit sink replaced while
//! commands run, and dispose called from inside an audit callback.
//!
//! Descriptors, threads and children are process-wide, so the tests of
//! this file take one lock and run one at a time.

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use sandgate::{AuditEvent, AuditSink, ErrorCode, ExecOptions, Executor};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
        .saturating_sub(1)
}

fn threads() -> usize {
    fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

/// Processes whose parent is this process.
fn children() -> Vec<u32> {
    let me = std::process::id().to_string();
    fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = &s[s.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1).map(|p| p == me)
                })
                .unwrap_or(false)
        })
        .collect()
}

fn mounts() -> usize {
    fs::read_to_string("/proc/self/mountinfo")
        .expect("/proc/self/mountinfo")
        .lines()
        .count()
}

/// This process's session directories.
fn tmpdirs() -> Vec<String> {
    let pid = std::process::id().to_string();
    let mut v: Vec<String> = fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("sandgate-exec-") && n.split('-').nth(3) == Some(pid.as_str()))
        .collect();
    v.sort();
    v
}

/// The cgroups the executors of this process made for their commands.
fn cgroup_slots() -> Vec<PathBuf> {
    let prefix = format!("sandgate-{}-", std::process::id());
    let mut found = Vec::new();
    let mut stack = vec![(PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                found.extend(
                    fs::read_dir(&p)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .filter(|s| s.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|s| s.path()),
                );
            } else if depth < 8 {
                stack.push((p, depth + 1));
            }
        }
    }
    found.sort();
    found
}

/// Pids of live processes whose command line holds `marker`.
fn survivors(marker: &str) -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .split('\0')
                    .any(|a| a.contains(marker))
            })
        })
        .collect()
}

fn marker() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("400.22{nanos:09}{:05}", std::process::id() % 100_000)
}

/// An executor of a policy with a write root, a deny-write pattern and a
/// network grant (so, where the host gives namespaces, an egress proxy).
fn policy(base: &std::path::Path) -> sandgate::policy::Policy {
    fs::create_dir_all(base.join("ws")).unwrap();
    let path = base.join("policy.toml");
    fs::write(
        &path,
        "[fs]\nwrite_root = \"ws\"\ndeny_write = [\"*.pem\"]\n[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 60000\n[net]\nallow = [\"example.test:443\"]\n",
    )
    .unwrap();
    sandgate::policy::Policy::load(&path).unwrap()
}

/// Four threads run commands (some leaving a daemon behind, some still
/// running) while another disposes of the executor every few
/// milliseconds. Each call answers once: its command's own result, one
/// aborted by the dispose (130), or `E_NOT_STARTED` when the dispose took
/// the session between the call's start and its run; each is reported to
/// the audit sink exactly once with that outcome; and once everything is
/// disposed of, no process the commands started is alive, and neither a
/// thread, a descriptor, a child, a mount, a temporary directory nor a
/// cgroup is left.
#[test]
fn dispose22_execs_racing_dispose_each_answer_once_and_leave_nothing() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let policy = policy(base.path());
    // Warm-up: the process-wide parts (a signal handler's thread, caches).
    {
        let ex = Executor::from_policy(&policy).unwrap();
        ex.start().unwrap();
        ex.exec("true", ExecOptions::default()).unwrap();
        ex.dispose();
    }
    let (threads0, fds0, children0, mounts0) = (threads(), open_fds(), children(), mounts());
    let (tmp0, slots0) = (tmpdirs(), cgroup_slots());
    let m = marker();
    {
        let ex = Arc::new(Executor::from_policy(&policy).unwrap());
        let reported: Arc<Mutex<HashMap<String, Vec<ErrorCode>>>> = Arc::default();
        let sink: AuditSink = {
            let reported = Arc::clone(&reported);
            Arc::new(move |e: &AuditEvent| {
                if e.op == "exec" {
                    reported
                        .lock()
                        .unwrap()
                        .entry(e.path.clone())
                        .or_default()
                        .push(e.outcome);
                }
            })
        };
        ex.set_audit_sink(Some(sink));
        ex.start().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let (ex, stop, m) = (Arc::clone(&ex), Arc::clone(&stop), m.clone());
                let ws = base.path().join("ws");
                thread::spawn(move || {
                    let mut answers = Vec::new();
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let cwd = format!("d{t}-{i}");
                        fs::create_dir_all(ws.join(&cwd)).unwrap();
                        let command = match i % 3 {
                            0 => "echo ok".to_owned(),
                            1 => format!("(setsid sleep {m} &); echo ok"),
                            _ => format!("sleep {m} & echo ok; wait"),
                        };
                        let r = ex.exec(
                            &command,
                            ExecOptions {
                                cwd: Some(cwd.clone()),
                                ..ExecOptions::default()
                            },
                        );
                        let code = match &r {
                            Ok(r) if r.aborted => {
                                assert_eq!(r.exit_code, 130, "{r:?}");
                                ErrorCode::Aborted
                            }
                            Ok(r) if i % 3 == 2 => {
                                panic!("a command that waits forever ended on its own: {r:?}")
                            }
                            Ok(r) => {
                                assert_eq!(
                                    (r.exit_code, r.stdout.as_slice()),
                                    (0, &b"ok\n"[..]),
                                    "{}",
                                    String::from_utf8_lossy(&r.stderr)
                                );
                                ErrorCode::Ok
                            }
                            Err(e) => {
                                assert_eq!(e.code(), ErrorCode::NotStarted, "{e}");
                                ErrorCode::NotStarted
                            }
                        };
                        answers.push((cwd, code));
                        i += 1;
                    }
                    answers
                })
            })
            .collect();
        let began = Instant::now();
        let mut disposals = 0;
        while began.elapsed() < Duration::from_secs(6) {
            thread::sleep(Duration::from_millis(5 + (disposals % 7) * 10));
            ex.dispose();
            disposals += 1;
        }
        stop.store(true, Ordering::Relaxed);
        // A call made after the last dispose waits for the next.
        while !workers.iter().all(|w| w.is_finished()) {
            thread::sleep(Duration::from_millis(20));
            ex.dispose();
        }
        let mut answers = Vec::new();
        for w in workers {
            answers.extend(w.join().unwrap());
        }
        ex.dispose();
        let reported = reported.lock().unwrap().clone();
        let mut kinds: HashMap<ErrorCode, usize> = HashMap::new();
        for (cwd, code) in &answers {
            *kinds.entry(*code).or_default() += 1;
            assert_eq!(
                reported.get(cwd).map(Vec::as_slice),
                Some(&[*code][..]),
                "the call in {cwd} was not reported exactly once with its outcome"
            );
        }
        assert_eq!(reported.len(), answers.len(), "reports of calls never made");
        eprintln!("{disposals} disposals, {} calls: {kinds:?}", answers.len());
        assert!(kinds.get(&ErrorCode::Aborted).is_some_and(|n| *n > 0));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while (threads() > threads0 || children() != children0 || !survivors(&m).is_empty())
        && Instant::now() < deadline
    {
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        survivors(&m),
        Vec::<u32>::new(),
        "a command's process survived"
    );
    assert_eq!(children(), children0, "processes left");
    assert!(
        threads() <= threads0,
        "threads left: {threads0} -> {}",
        threads()
    );
    assert_eq!(open_fds(), fds0, "descriptors left");
    assert_eq!(mounts(), mounts0, "mounts left");
    assert_eq!(tmpdirs(), tmp0, "temporary directories left");
    assert_eq!(cgroup_slots(), slots0, "cgroups left");
}

/// The names of this process's threads that are sandgate's (the test
/// harness starts and ends threads of its own meanwhile).
fn thread_names() -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim_end().to_owned())
        .filter(|s| s.starts_with("sandgate"))
        .collect();
    v.sort();
    v
}

/// A command that opens more connections to the egress proxy than it
/// serves at once (64): the one over the cap is refused by the proxy's
/// accepting thread, which reports it to the audit sink. A sink that
/// disposes of the executor there (the report says the command is up to
/// no good) is told it may: the dispose returns, ends the command and
/// the proxy, and leaves no proxy thread.
#[test]
fn dispose22_dispose_from_the_report_of_a_connection_over_the_cap() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let policy = policy(base.path());
    let names0 = thread_names();
    let ex: &'static Executor = Box::leak(Box::new(Executor::from_policy(&policy).unwrap()));
    ex.start().unwrap();
    if ex.proxy_address().is_none() {
        assert!(
            std::env::var_os("SANDGATE_REQUIRE_NAMESPACES").is_none(),
            "no egress proxy: namespaces unavailable"
        );
        eprintln!("note: no egress proxy here (namespaces unavailable): skipped");
        ex.dispose();
        return;
    }
    let (done_tx, done) = std::sync::mpsc::channel::<Duration>();
    let done_tx = Mutex::new(Some(done_tx));
    ex.set_audit_sink(Some(Arc::new(move |e: &AuditEvent| {
        if e.op != "connect" {
            return;
        }
        let Some(tx) = done_tx.lock().unwrap().take() else {
            return;
        };
        let t = Instant::now();
        ex.dispose();
        let _ = tx.send(t.elapsed());
    })));
    let runner = thread::spawn(move || {
        ex.exec(
            "/usr/bin/python3 -c \"
import os, socket, time
h, p = os.environ['HTTP_PROXY'].rsplit('/', 1)[1].rsplit(':', 1)
held = [socket.create_connection((h, int(p))) for _ in range(80)]
print('held', flush=True)
time.sleep(30)
\"",
            ExecOptions::default(),
        )
    });
    let took = done
        .recv_timeout(Duration::from_secs(30))
        .expect("a dispose called from the report of a refused connection never returned");
    let r = runner.join().unwrap().unwrap();
    assert!(r.aborted, "{r:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(ex.proxy_address().is_none());
    let deadline = Instant::now() + Duration::from_secs(10);
    while thread_names() != names0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(thread_names(), names0, "threads left");
}

/// Two disposes at once while the audit sink is told of a connection: a
/// dispose returns only once no report is under way, whichever of the two
/// stopped the proxy (the caller may free what the sink uses then).
#[test]
fn dispose22_two_disposes_at_once_neither_returns_during_a_report() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let policy = policy(base.path());
    let ex = Arc::new(Executor::from_policy(&policy).unwrap());
    ex.start().unwrap();
    if ex.proxy_address().is_none() {
        assert!(
            std::env::var_os("SANDGATE_REQUIRE_NAMESPACES").is_none(),
            "no egress proxy: namespaces unavailable"
        );
        eprintln!("note: no egress proxy here (namespaces unavailable): skipped");
        ex.dispose();
        return;
    }
    let in_sink = Arc::new(AtomicBool::new(false));
    let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
    let entered_tx = Mutex::new(Some(entered_tx));
    {
        let in_sink = Arc::clone(&in_sink);
        ex.set_audit_sink(Some(Arc::new(move |e: &AuditEvent| {
            if e.op != "connect" {
                return;
            }
            let Some(tx) = entered_tx.lock().unwrap().take() else {
                return;
            };
            in_sink.store(true, Ordering::SeqCst);
            let _ = tx.send(());
            thread::sleep(Duration::from_millis(1500));
            in_sink.store(false, Ordering::SeqCst);
        })));
    }
    let runner = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || {
            // A refused target: the connection ends, and is reported, at once.
            ex.exec(
                "/usr/bin/curl -sS --max-time 5 -x \"$HTTP_PROXY\" http://refused.test/; sleep 30",
                ExecOptions::default(),
            )
        })
    };
    entered
        .recv_timeout(Duration::from_secs(30))
        .expect("the connection was never reported");
    let dispose = || {
        let (ex, in_sink) = (Arc::clone(&ex), Arc::clone(&in_sink));
        thread::spawn(move || {
            ex.dispose();
            in_sink.load(Ordering::SeqCst)
        })
    };
    let first = dispose();
    thread::sleep(Duration::from_millis(200));
    let second = dispose();
    let during = [first.join().unwrap(), second.join().unwrap()];
    assert_eq!(
        during,
        [false, false],
        "a dispose returned while a connection's report was under way"
    );
    let r = runner.join().unwrap().unwrap();
    assert!(r.aborted, "{r:?}");
}

/// The audit sink replaced again and again while four threads run
/// commands: each call reaches exactly one of the sinks, once.
#[test]
fn dispose22_a_sink_replaced_while_commands_run_hears_each_call_once() {
    use std::sync::atomic::AtomicUsize;
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let policy = policy(base.path());
    let ex = Arc::new(Executor::from_policy(&policy).unwrap());
    ex.start().unwrap();
    let counts: Vec<Arc<AtomicUsize>> = (0..2).map(|_| Arc::default()).collect();
    let sinks: Vec<AuditSink> = counts
        .iter()
        .map(|n| {
            let n = Arc::clone(n);
            Arc::new(move |e: &AuditEvent| {
                if e.op == "exec" {
                    n.fetch_add(1, Ordering::SeqCst);
                }
            }) as AuditSink
        })
        .collect();
    ex.set_audit_sink(Some(Arc::clone(&sinks[0])));
    const CALLS: usize = 40;
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let ex = Arc::clone(&ex);
            thread::spawn(move || {
                for _ in 0..CALLS {
                    let r = ex.exec("true", ExecOptions::default()).unwrap();
                    assert_eq!(r.exit_code, 0);
                }
            })
        })
        .collect();
    let mut i = 0;
    while !workers.iter().all(|w| w.is_finished()) {
        i += 1;
        ex.set_audit_sink(Some(Arc::clone(&sinks[i % 2])));
        thread::sleep(Duration::from_millis(1));
    }
    for w in workers {
        w.join().unwrap();
    }
    let heard: usize = counts.iter().map(|n| n.load(Ordering::SeqCst)).sum();
    assert_eq!(heard, 4 * CALLS, "after {i} replacements");
    assert!(counts.iter().all(|n| n.load(Ordering::SeqCst) > 0));
    ex.dispose();
}
