//! An adversarial review of how the floor judges signals (no namespaces,
//! Landlock before ABI 6, which does not scope signals): the executor
//! receives `kill`, `tkill`, `tgkill`, `rt_sigqueueinfo`,
//! `rt_tgsigqueueinfo` and `fcntl(F_SETOWN)` by seccomp user notification
//! and lets through only what reaches the command's own processes.
//!
//! The command (python3, raw system calls through `ctypes`) aims every
//! call at the executor (this test process) by its pid and by the ids of
//! threads started for the purpose, at its keeper (its parent), at a
//! process of the same user started by the test, at the executor's
//! process group and session, at every process (`-1`), at `INT_MIN`, and
//! after `setpgid`/`setsid` tricks; it sets a file's signal owner to them
//! and has the kernel signal it (`SIGIO` through `O_ASYNC`, `SIGURG`
//! through out-of-band data on a socket). Each target that must not be
//! reached counts what arrives (a handler here, a flag file in the other
//! process, the keeper's pending set); a signal that would harm a process
//! outside the test if it leaked is one whose default is to be ignored
//! (`SIGWINCH`, `SIGURG`, `SIGCONT`). The command's own processes (a
//! child, a thread, a zombie, a group of its own) are signalled in the
//! same run and must answer as they do unconfined, where every foreign
//! probe (with signal 0) reaches its target.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Once};
use std::thread;
use std::time::{Duration, Instant};

use sandgate_shellexec::confine::{
    kernel_abi, prepare, prepare_with_abi, ConfineMode, ConfineSpec, Prepared,
};
use sandgate_shellexec::exec::{ExecOptions, LocalShellExecutor};

mod floor_support;
use floor_support::{floor_executor, text, PYTHON};

/// Signals that arrived at this process (the executor), by number.
static HITS: [AtomicUsize; 65] = [const { AtomicUsize::new(0) }; 65];

extern "C" fn count(sig: libc::c_int) {
    if let Some(h) = HITS.get(sig as usize) {
        h.fetch_add(1, Ordering::SeqCst);
    }
}

/// Counts, in [`HITS`], each signal a command might aim at the executor:
/// what arrives is seen instead of ending the test.
fn watch() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for sig in [
            libc::SIGUSR1,
            libc::SIGWINCH,
            libc::SIGURG,
            libc::SIGIO,
            libc::SIGCONT,
        ] {
            // SAFETY: a handler that touches atomics only.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = count as extern "C" fn(libc::c_int) as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
            }
        }
    });
}

fn hits(sig: i32) -> usize {
    HITS[sig as usize].load(Ordering::SeqCst)
}

/// The floors where the executor judges signals: Landlock at ABI 5 (the
/// kernel's, at most 5) and no Landlock at all (the seccomp floor alone);
/// empty, with a note, where it cannot (no Landlock or python3 here, or
/// no seccomp user notification). Where there are floors, this process
/// counts the signals that arrive ([`watch`]) from here on.
fn judged_floors(name: &str) -> Vec<Prepared> {
    if !Path::new(PYTHON).exists() {
        eprintln!("note: {name}: no python3 here; skipped");
        return Vec::new();
    }
    let abi = kernel_abi().unwrap_or(0).min(5);
    let mut out = Vec::new();
    for limit in [abi, 0] {
        let prepared = prepare_with_abi(
            &ConfineSpec::default(),
            ConfineMode::BestEffort,
            Some(limit),
        )
        .unwrap();
        let report = prepared.report();
        if report.scoped
            || !report
                .seccomp_refuses
                .iter()
                .any(|r| r.starts_with("signals") && r.contains("judged by the executor"))
        {
            eprintln!(
                "note: {name}: signals are not judged here ({:?}); skipped",
                report.seccomp_refuses
            );
            return Vec::new();
        }
        out.push(prepared);
    }
    watch();
    out
}

fn unconfined() -> Prepared {
    prepare(&ConfineSpec::default(), ConfineMode::Off).unwrap()
}

/// Runs `python3 -c script cfg` under `prepared`: its stdout, stderr.
fn python(
    ex: &LocalShellExecutor,
    prepared: &Prepared,
    script: &str,
    cfg: &str,
) -> (String, String) {
    let argv: Vec<OsString> = vec!["-c".into(), script.into(), cfg.into()];
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    let opts = ExecOptions {
        cwd: Some(OwnedFd::from(fs::File::open("/").unwrap())),
        timeout: Some(Duration::from_secs(60)),
        ..ExecOptions::default()
    };
    let r = ex
        .exec_program(Path::new(PYTHON), &argv, &env, prepared, opts)
        .unwrap();
    (text(&r.stdout), text(&r.stderr))
}

/// The lines `name key=value…` of a probe's output, by name.
fn table(out: &str) -> BTreeMap<String, Vec<(String, String)>> {
    out.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?.to_owned();
            let pairs = words
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            Some((name, pairs))
        })
        .collect()
}

/// The line `name` of a [`table`] as the probe printed it (`k=v k=v`),
/// empty when there is none.
fn pairs(t: &BTreeMap<String, Vec<(String, String)>>, name: &str) -> String {
    t.get(name)
        .map(|v| {
            v.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The system call numbers the probes use, as JSON.
fn numbers() -> String {
    format!(
        "{{\"kill\": {}, \"tkill\": {}, \"tgkill\": {}, \"rt_sigqueueinfo\": {}, \
         \"rt_tgsigqueueinfo\": {}, \"fcntl\": {}, \"ioctl\": {}, \"setpgid\": {}}}",
        libc::SYS_kill,
        libc::SYS_tkill,
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
        libc::SYS_fcntl,
        libc::SYS_ioctl,
        libc::SYS_setpgid,
    )
}

/// What every probe script starts with: raw calls that answer `ok` or the
/// errno's name, a `siginfo_t` for the queueing calls, and a child that
/// acknowledges each signal it catches on a pipe.
const PRELUDE: &str = r#"
import ctypes, errno, json, os, select, signal, socket, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
cfg = json.loads(sys.argv[1])
NR = cfg['nr']
def sc(*a):
    ctypes.set_errno(0)
    r = libc.syscall(*[ctypes.c_long(x) for x in a])
    return 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
INFOS = []
def info(sig):
    b = ctypes.create_string_buffer(128)
    ctypes.memmove(b, (ctypes.c_int * 3)(sig, 0, -1), 12)
    INFOS.append(b)
    return ctypes.addressof(b)
F_SETOWN, F_SETFL, F_SETSIG, F_SETOWN_EX = 8, 4, 10, 15
def setown(fd, who):
    return sc(NR['fcntl'], fd, F_SETOWN, who)
def calls(t, sig, tg=None, then=None):
    """Each call on `t` (with thread group `tg`), `then` run after each."""
    tg = t if tg is None else tg
    out = []
    for name, call in [
            ('kill', lambda: sc(NR['kill'], t, sig)),
            ('tkill', lambda: sc(NR['tkill'], t, sig)),
            ('tgkill', lambda: sc(NR['tgkill'], tg, t, sig)),
            ('rt_sigqueueinfo', lambda: sc(NR['rt_sigqueueinfo'], t, sig, info(sig))),
            ('rt_tgsigqueueinfo', lambda: sc(NR['rt_tgsigqueueinfo'], tg, t, sig, info(sig)))]:
        res = call()
        out.append((name, res if then is None else res + '+' + then()))
    return out
def line(name, pairs):
    print(name, ' '.join('%s=%s' % p for p in pairs), flush=True)
def catcher(sigs, group=False):
    """A child that writes a letter for each signal of `sigs` it catches."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        if group:
            os.setpgid(0, 0)
        for s, letter in sigs.items():
            signal.signal(s, lambda n, f, l=letter: os.write(w, l))
        os.write(w, b'R')
        while True:
            signal.pause()
    os.close(w)
    assert os.read(r, 1) == b'R'
    return pid, r
def acked(r, letter, wait=5.0):
    got = b''
    end = time.time() + wait
    while time.time() < end:
        if select.select([r], [], [], max(0, end - time.time()))[0]:
            got = os.read(r, 1)
            if got == letter:
                return 'arrived'
    return 'none'
"#;

/// Threads of this process that wait until told: their ids.
struct Threads {
    tids: Vec<i32>,
    stop: Vec<mpsc::Sender<()>>,
    handles: Vec<thread::JoinHandle<()>>,
}

impl Threads {
    fn start(n: usize) -> Threads {
        let mut t = Threads {
            tids: Vec::new(),
            stop: Vec::new(),
            handles: Vec::new(),
        };
        for _ in 0..n {
            let (tx, rx) = mpsc::channel();
            let (stop_tx, stop_rx) = mpsc::channel::<()>();
            t.handles.push(thread::spawn(move || {
                tx.send(rustix::thread::gettid().as_raw_nonzero().get())
                    .unwrap();
                let _ = stop_rx.recv();
            }));
            t.tids.push(rx.recv().unwrap());
            t.stop.push(stop_tx);
        }
        t
    }

    /// Ends them: each was alive to the end.
    fn end(self) {
        for s in &self.stop {
            s.send(()).unwrap();
        }
        for h in self.handles {
            h.join().unwrap();
        }
    }
}

/// A process of the same user, started here (outside every command),
/// that appends each signal it catches to `flag`, in a [`tempdir`] of
/// its own (removed after the process is ended).
struct Sibling {
    child: std::process::Child,
    flag: PathBuf,
    _dir: tempfile::TempDir,
}

impl Sibling {
    fn start() -> Sibling {
        let dir = tempdir();
        let flag = dir.path().join("sibling-caught");
        let ready = dir.path().join("sibling-ready");
        let script = "import os, signal, sys, time\n\
            flag = sys.argv[1]\n\
            def caught(n, f):\n\
            \x20   with open(flag, 'a') as o: o.write('%d\\n' % n)\n\
            for s in (signal.SIGUSR1, signal.SIGWINCH, signal.SIGURG, signal.SIGIO, signal.SIGCONT):\n\
            \x20   signal.signal(s, caught)\n\
            open(sys.argv[2], 'w').close()\n\
            end = time.time() + 300\n\
            while time.time() < end: time.sleep(0.05)\n";
        let child = std::process::Command::new(PYTHON)
            .args(["-c", script])
            .arg(&flag)
            .arg(&ready)
            .spawn()
            .unwrap();
        let start = Instant::now();
        while !ready.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "sibling not ready"
            );
            thread::sleep(Duration::from_millis(10));
        }
        Sibling {
            child,
            flag,
            _dir: dir,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// What it caught; it must still run.
    fn caught(&mut self) -> String {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the sibling process ended"
        );
        fs::read_to_string(&self.flag).unwrap_or_default()
    }
}

impl Drop for Sibling {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Watches this process's children (the keepers) while a command runs:
/// the signals each had pending (`SigPnd`, `ShdPnd`) at any look.
struct Watcher {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: thread::JoinHandle<BTreeMap<i32, u64>>,
}

/// What a [`Watcher`] saw.
struct Seen(BTreeMap<i32, u64>);

impl Seen {
    /// The signals `pid` had pending, and whether it was seen at all.
    fn pending_of(&self, pid: i32) -> (u64, bool) {
        self.0.get(&pid).map_or((0, false), |p| (*p, true))
    }
}

impl Watcher {
    fn start() -> Watcher {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let halt = std::sync::Arc::clone(&stop);
        let handle = thread::spawn(move || {
            let mut seen = BTreeMap::new();
            let field = |status: &str, name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                    .unwrap_or(0)
            };
            while !halt.load(Ordering::SeqCst) {
                for task in fs::read_dir("/proc/self/task").unwrap().flatten() {
                    let kids = fs::read_to_string(task.path().join("children")).unwrap_or_default();
                    for pid in kids
                        .split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok())
                    {
                        if let Ok(st) = fs::read_to_string(format!("/proc/{pid}/status")) {
                            let p = field(&st, "SigPnd:") | field(&st, "ShdPnd:");
                            *seen.entry(pid).or_insert(0) |= p;
                        }
                    }
                }
                thread::sleep(Duration::from_millis(2));
            }
            seen
        });
        Watcher { stop, handle }
    }

    fn stop(self) -> Seen {
        self.stop.store(true, Ordering::SeqCst);
        Seen(self.handle.join().unwrap())
    }
}

/// A temporary directory every user may write (the tests also run as an
/// unprivileged user, whose sibling writes its flag there).
fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("floorsig24")
        .tempdir_in(std::env::temp_dir())
        .unwrap()
}

/// Every call aimed at a foreign process (by pid, thread id, or the
/// executor's thread group with a thread's id) with `sig`, and `F_SETOWN`
/// naming it; then the command's own child, thread, self, zombie, a child
/// already reaped, and `INT_MIN`, each with `SIGUSR1` where it can arrive.
const TARGETS: &str = r#"
foreign_sig = cfg['sig']
rd, wr = os.pipe()
got = []
signal.signal(signal.SIGUSR1, lambda n, f: got.append(n))
for name, t, tg in cfg['targets']:
    line(name, calls(t, foreign_sig, tg) + [('setown', setown(rd, t))])
keeper = os.getppid()
line('keeper', calls(keeper, foreign_sig) + [('setown', setown(rd, keeper))])
line('keeper_pid', [('pid', keeper)])
# Controls: the command's own processes.
c, cr = catcher({signal.SIGUSR1: b'u'})
line('own_child', calls(c, signal.SIGUSR1, then=lambda: acked(cr, b'u')) + [('setown', setown(rd, c))])
os.kill(c, signal.SIGKILL); os.waitpid(c, 0)
me = os.getpid()
hold = threading.Event()
th = threading.Thread(target=hold.wait); th.start()
def caught():
    end = time.time() + 5
    while not got and time.time() < end:
        time.sleep(0.01)
    seen = 'arrived' if got else 'none'
    got.clear()
    return seen
line('own_thread', calls(th.native_id, signal.SIGUSR1, me, caught) + [('setown', setown(rd, th.native_id))])
hold.set(); th.join()
line('self', calls(me, signal.SIGUSR1, then=caught) + [('setown', setown(rd, me))])
z = os.fork()
if z == 0:
    os._exit(0)
end = time.time() + 5
while time.time() < end:
    try:
        if os.waitid(os.P_PID, z, os.WEXITED | os.WNOWAIT | os.WNOHANG):
            break
    except ChildProcessError:
        break
    time.sleep(0.01)
line('own_zombie', calls(z, 0) + calls(z, signal.SIGUSR1) + [('setown', setown(rd, z))])
os.waitpid(z, 0)
g = os.fork()
if g == 0:
    os._exit(0)
os.waitpid(g, 0)
line('own_child_gone', calls(g, signal.SIGUSR1) + [('setown', setown(rd, g))])
line('int_min', calls(-2**31, 0) + [('setown', setown(rd, -2**31))])
"#;

/// Every signalling call a floor command can make, aimed by number at the
/// executor's process, at three of its threads (alone and as members of
/// its thread group), at the command's keeper and at a process of the same
/// user outside the command, is refused (`EPERM`) and delivers nothing:
/// `SIGUSR1` never arrives here, at the other process, or pending at the
/// keeper. In the same command its own child, thread, process, zombie and
/// a child already reaped answer as they do unconfined (the child and the
/// threads catch each signal). Unconfined, each foreign probe (signal 0)
/// reaches its target, so the refusals are the judgement's.
#[test]
fn floorsig24_every_call_by_number_misses_the_executor_its_threads_keeper_and_sibling() {
    let floors = judged_floors("floorsig24_every_call_by_number");
    if floors.is_empty() {
        return;
    }
    let mut sibling = Sibling::start();
    let threads = Threads::start(3);
    let host = std::process::id() as i32;
    let mut targets = vec![
        format!("[\"executor\", {host}, {host}]"),
        format!("[\"sibling\", {0}, {0}]", sibling.pid()),
    ];
    for (i, tid) in threads.tids.iter().enumerate() {
        targets.push(format!("[\"executor_thread{i}\", {tid}, {tid}]"));
        targets.push(format!("[\"executor_thread{i}_in_group\", {tid}, {host}]"));
    }
    // The command's own thread group with the executor's thread: the
    // kernel finds no such thread in it.
    targets.push(format!(
        "[\"own_group_executor_thread\", {}, -1]",
        threads.tids[0]
    ));
    let cfg = |sig: i32| {
        format!(
            "{{\"nr\": {}, \"sig\": {sig}, \"targets\": [{}]}}",
            numbers(),
            targets.join(", ")
        )
        // `tg` -1 stands for the command's own pid.
        .replace(", -1]", ", \"me\"]")
    };
    let script = format!(
        "{PRELUDE}\ncfg['targets'] = [(n, t, os.getpid() if tg == 'me' else tg) \
         for n, t, tg in cfg['targets']]\n{TARGETS}"
    );
    let ex = floor_executor(Duration::from_secs(60));
    let before = hits(libc::SIGUSR1);

    let (out, err) = python(&ex, &unconfined(), &script, &cfg(0));
    let open = table(&out);
    let foreign: Vec<String> = open
        .keys()
        .filter(|k| k.starts_with("executor") || *k == "sibling" || *k == "keeper")
        .cloned()
        .collect();
    assert_eq!(foreign.len(), 9, "{out}\n{err}");
    for name in &foreign {
        for (call, res) in &open[name] {
            // A thread's id is no thread group's.
            let alone = name.starts_with("executor_thread") && !name.ends_with("_in_group");
            let want = if alone && (call == "tgkill" || call.starts_with("rt_tg")) {
                "ESRCH"
            } else {
                "ok"
            };
            assert_eq!(res, want, "unconfined {name} {call}: {out}\n{err}");
        }
    }
    // The command's thread group with the executor's thread: tgkill and
    // rt_tgsigqueueinfo find no such thread in it.
    let tg_calls = |pairs: &Vec<(String, String)>| -> Vec<String> {
        pairs
            .iter()
            .filter(|(c, _)| c == "tgkill" || c == "rt_tgsigqueueinfo")
            .map(|(_, r)| r.clone())
            .collect()
    };
    assert_eq!(
        tg_calls(&open["own_group_executor_thread"]),
        ["ESRCH", "ESRCH"],
        "{out}\n{err}"
    );

    for floor in &floors {
        let watcher = Watcher::start();
        let (out, err) = python(&ex, floor, &script, &cfg(libc::SIGUSR1));
        let watcher = watcher.stop();
        let got = table(&out);
        assert_eq!(got.len(), open.len(), "{out}\n{err}");
        for name in &foreign {
            for (call, res) in &got[name] {
                assert_eq!(res, "EPERM", "floor {name} {call}: {out}\n{err}");
            }
        }
        // The keeper holds its signals blocked: one that reached it
        // would wait in its pending set, seen while the command ran.
        let keeper: i32 = got["keeper_pid"][0].1.parse().unwrap();
        let (pending, seen) = watcher.pending_of(keeper);
        assert!(seen, "keeper {keeper} unseen: {out}");
        assert_eq!(pending & (1 << (libc::SIGUSR1 - 1)), 0, "{out}");
        // The command's own processes answer as unconfined.
        // The rest name the executor's thread alone: refused.
        for (call, res) in &got["own_group_executor_thread"] {
            let want = if call == "tgkill" || call == "rt_tgsigqueueinfo" {
                "ESRCH"
            } else {
                "EPERM"
            };
            assert_eq!(res, want, "floor {call}: {out}\n{err}");
        }
        for name in [
            "own_child",
            "own_thread",
            "self",
            "own_zombie",
            "own_child_gone",
            "int_min",
        ] {
            assert_eq!(got[name], open[name], "floor {name}: {out}\n{err}");
        }
        for (call, res) in &got["own_child"] {
            let want = if call == "setown" { "ok" } else { "ok+arrived" };
            assert_eq!(res, want, "own child {call}: {out}");
        }
        for (call, res) in &got["own_thread"] {
            let want = if call == "setown" { "ok" } else { "ok+arrived" };
            assert_eq!(res, want, "own thread {call}: {out}");
        }
        for (call, res) in &got["own_child_gone"] {
            assert_eq!(res, "ESRCH", "a reaped child {call}: {out}");
        }
    }
    assert_eq!(hits(libc::SIGUSR1), before, "SIGUSR1 reached the executor");
    assert_eq!(sibling.caught(), "", "a signal reached the sibling");
    threads.end();
}

/// The command aims `SIGCONT` (whose default is to be ignored, so a
/// stray one harms nobody) at the next few pids the kernel will hand
/// out, learnt from a child it starts, again and again, while this
/// process starts and ends threads: a pid that was nobody's when the
/// executor looked and a new thread of the executor's when the call ran
/// would be reached.
const NEXT_PIDS: &str = r#"
end = time.time() + cfg['secs']
rounds = sent = 0
while time.time() < end:
    c = os.fork()
    if c == 0:
        os._exit(0)
    for n in range(c + 1, c + 9):
        sc(NR['tkill'], n, signal.SIGCONT)
        sc(NR['kill'], n, signal.SIGCONT)
        sent += 2
    os.waitpid(c, 0)
    rounds += 1
line('next_pids', [('rounds', rounds), ('sent', sent)])
"#;

/// A pid the executor finds no process for is answered `ESRCH` by the
/// executor, not left to the kernel: between the look and the call, the
/// kernel may hand the pid to a new thread or process of the executor
/// (which starts threads and keepers while other commands run). The
/// command fires at the next pids while the executor starts threads; not
/// one signal may arrive. Before, the pid was let through and now and
/// then a new thread of the executor caught the signal.
#[test]
fn floorsig24_a_pid_nobody_holds_yet_is_not_let_through() {
    let floors = judged_floors("floorsig24_a_pid_nobody_holds_yet");
    if floors.is_empty() {
        return;
    }
    let ex = floor_executor(Duration::from_secs(60));
    let script = format!("{PRELUDE}\n{NEXT_PIDS}");
    let cfg = format!("{{\"nr\": {}, \"secs\": 4}}", numbers());
    let before = hits(libc::SIGCONT);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let halt = std::sync::Arc::clone(&stop);
    let churn = thread::spawn(move || {
        let mut n = 0u64;
        while !halt.load(Ordering::SeqCst) {
            thread::spawn(|| thread::sleep(Duration::from_micros(200)))
                .join()
                .unwrap();
            n += 1;
        }
        n
    });
    let (out, err) = python(&ex, &floors[0], &script, &cfg);
    stop.store(true, Ordering::SeqCst);
    let threads = churn.join().unwrap();
    let got = table(&out);
    let rounds: u64 = got["next_pids"][0].1.parse().unwrap_or(0);
    assert!(rounds > 50, "{out}\n{err}");
    assert_eq!(
        hits(libc::SIGCONT) - before,
        0,
        "a new thread of the executor was reached ({threads} threads, {out})"
    );
}

/// Groups and sessions: the executor's process group (which holds the
/// sibling too) and session, every process (`-1`), joining the
/// executor's group (`setpgid`) before signalling group 0, a child that
/// leads a group of its own, and a child in a session of its own.
const GROUPS: &str = r#"
sig = cfg['sig']
pg, sid = cfg['pgid'], cfg['sid']
W = signal.SIGWINCH
got = []
signal.signal(W, lambda n, f: got.append(n))
def caught():
    end = time.time() + 5
    while not got and time.time() < end:
        time.sleep(0.01)
    seen = 'arrived' if got else 'none'
    got.clear()
    return seen
rd, wr = os.pipe()
line('executor_group', [('kill', sc(NR['kill'], -pg, sig)), ('setown', setown(rd, -pg)),
                        ('rt_sigqueueinfo', sc(NR['rt_sigqueueinfo'], -pg, sig, info(sig)))])
if sid:
    line('executor_session', [('kill', sc(NR['kill'], -sid, sig)), ('setown', setown(rd, -sid))])
else:
    print('executor_session', 'session=unnamed')
line('everyone', [('kill', sc(NR['kill'], -1, sig)), ('setown', setown(rd, -1)),
                  ('rt_sigqueueinfo', sc(NR['rt_sigqueueinfo'], -1, sig, info(sig))),
                  ('tkill', sc(NR['tkill'], -1, sig))])
line('join_executor_group', [('setpgid', sc(NR['setpgid'], 0, pg))])
c, cr = catcher({W: b'w'})
line('own_group_kill0', [('kill', sc(NR['kill'], 0, W)), ('child', acked(cr, b'w')), ('self', caught())])
l, lr = catcher({W: b'w'}, group=True)
line('own_led_group', [('kill', sc(NR['kill'], -l, W)), ('child', acked(lr, b'w')),
                       ('setown', setown(rd, -l))])
r, w = os.pipe()
s = os.fork()
if s == 0:
    os.setsid()
    res = [('setpgid', sc(NR['setpgid'], 0, pg)), ('kill0', sc(NR['kill'], 0, W)),
           ('kill_executor_group', sc(NR['kill'], -pg, sig)),
           ('kill_first_group', sc(NR['kill'], -os.getpgid(os.getppid()), W))]
    os.write(w, ' '.join('%s=%s' % p for p in res).encode())
    os._exit(0)
os.close(w)
os.waitpid(s, 0)
print('own_session', os.read(r, 4096).decode())
print('own_session_reached', 'self=' + caught())
for p in (c, l):
    os.kill(p, signal.SIGKILL); os.waitpid(p, 0)
"#;

/// Every group the command does not own is refused whatever call names
/// it: the executor's group and session, `-1`, by `kill` and by
/// `F_SETOWN`; `rt_sigqueueinfo` and `tkill` of a group are refused by
/// the kernel as unconfined. The command cannot join the executor's
/// group (the kernel refuses a group of another session), so `kill(0)`
/// reaches its own group: a member and itself catch it. A group led by
/// its child, and a session of its own, are reached as unconfined.
/// `SIGWINCH` (ignored by default) never arrives here or at the sibling,
/// which shares the executor's group.
#[test]
fn floorsig24_groups_sessions_and_everyone_stay_out_of_reach() {
    let floors = judged_floors("floorsig24_groups_sessions_and_everyone");
    if floors.is_empty() {
        return;
    }
    let mut sibling = Sibling::start();
    let pgid = rustix::process::getpgrp().as_raw_nonzero().get();
    // The session as this pid namespace numbers it: 0 where its leader
    // lives outside the namespace (a container's runner), which no call
    // of the command can name.
    let sid: i32 = fs::read_to_string("/proc/self/stat")
        .unwrap()
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(3)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        fs::read_to_string(format!("/proc/{}/stat", sibling.pid()))
            .unwrap()
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .nth(2)
            .unwrap(),
        pgid.to_string(),
        "the sibling shares the executor's group"
    );
    let cfg = |sig: i32| {
        format!(
            "{{\"nr\": {}, \"sig\": {sig}, \"pgid\": {pgid}, \"sid\": {sid}}}",
            numbers()
        )
    };
    let script = format!("{PRELUDE}\n{GROUPS}");
    let ex = floor_executor(Duration::from_secs(60));
    let before = hits(libc::SIGWINCH);
    let (out, err) = python(&ex, &unconfined(), &script, &cfg(0));
    let open = table(&out);
    assert_eq!(
        pairs(&open, "executor_group"),
        "kill=ok setown=ok rt_sigqueueinfo=ESRCH",
        "{out}\n{err}"
    );
    assert_eq!(
        pairs(&open, "everyone"),
        "kill=ok setown=ok rt_sigqueueinfo=ESRCH tkill=EINVAL",
        "{out}\n{err}"
    );
    for floor in &floors {
        let (out, err) = python(&ex, floor, &script, &cfg(libc::SIGWINCH));
        let got = table(&out);
        let want = [
            (
                "executor_group",
                "kill=EPERM setown=EPERM rt_sigqueueinfo=ESRCH",
            ),
            (
                "executor_session",
                if sid == 0 {
                    "session=unnamed"
                } else {
                    "kill=EPERM setown=EPERM"
                },
            ),
            (
                "everyone",
                "kill=EPERM setown=EPERM rt_sigqueueinfo=ESRCH tkill=EINVAL",
            ),
            ("join_executor_group", "setpgid=EPERM"),
            ("own_group_kill0", "kill=ok child=arrived self=arrived"),
            ("own_led_group", "kill=ok child=arrived setown=ok"),
            (
                "own_session",
                "setpgid=EPERM kill0=ok kill_executor_group=EPERM kill_first_group=ok",
            ),
            ("own_session_reached", "self=arrived"),
        ];
        for (name, line) in want {
            assert_eq!(pairs(&got, name), line, "floor {name}: {out}\n{err}");
        }
        // What the command owns answers as unconfined.
        for name in [
            "join_executor_group",
            "own_group_kill0",
            "own_led_group",
            "own_session_reached",
        ] {
            assert_eq!(got[name], open[name], "{name}: {out}\n{err}");
        }
    }
    assert_eq!(
        hits(libc::SIGWINCH),
        before,
        "SIGWINCH reached the executor"
    );
    assert_eq!(sibling.caught(), "", "a signal reached the sibling");
}

/// The kernel's own signals to a file's owner: `SIGIO` through `O_ASYNC`
/// on a pipe and `SIGURG` through out-of-band data on a UNIX stream
/// socket, with the owner set to the command's child, then aimed at the
/// executor's group, the sibling and the executor (last, so that
/// unconfined the executor is the owner), by number and through pointers.
const OWNERS: &str = r#"
host, pg, sib = cfg['host'], cfg['pgid'], cfg['sibling']
FIOASYNC = 0x5452
one = ctypes.c_int(1)
def async_on(fd):
    return [('setfl_async', sc(NR['fcntl'], fd, F_SETFL, os.O_ASYNC)),
            ('fioasync', sc(NR['ioctl'], fd, FIOASYNC, ctypes.addressof(one)))]
def oob(sock):
    try:
        sock.send(b'!', socket.MSG_OOB)
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
c, cr = catcher({signal.SIGIO: b'i', signal.SIGURG: b'g'})
r1, w1 = os.pipe()
res = [('setown', setown(r1, c))] + async_on(r1)
os.write(w1, b'x')
line('own_pipe', res + [('sigio', acked(cr, b'i', 1))])
r2, w2 = os.pipe()
res = [('setown_group', setown(r2, -pg)), ('setown_sibling', setown(r2, sib)),
       ('setown_executor', setown(r2, host))] + async_on(r2)
os.write(w2, b'x')
line('executor_pipe', res)
a, b = socket.socketpair()
res = [('setown', setown(a.fileno(), c)), ('oob', oob(b))]
line('own_socket', res + [('sigurg', acked(cr, b'g', 2))])
a2, b2 = socket.socketpair()
ex_pid = ctypes.c_int(host)
ex_group = ctypes.c_int(-pg)
ex_owner = (ctypes.c_int * 2)(1, host)
res = [('siocspgrp', sc(NR['ioctl'], a2.fileno(), 0x8902, ctypes.addressof(ex_group))),
       ('setown_group', setown(a2.fileno(), -pg)),
       ('setown_sibling', setown(a2.fileno(), sib)),
       ('setown_ex', sc(NR['fcntl'], a2.fileno(), F_SETOWN_EX, ctypes.addressof(ex_owner))),
       ('fiosetown', sc(NR['ioctl'], a2.fileno(), 0x8901, ctypes.addressof(ex_pid))),
       ('setown_executor', setown(a2.fileno(), host)),
       ('oob', oob(b2))]
line('executor_socket', res)
g = os.fork()
if g == 0:
    os._exit(0)
os.waitpid(g, 0)
a3, b3 = socket.socketpair()
line('gone_socket', [('setown', setown(a3.fileno(), g)), ('oob', oob(b3))])
time.sleep(0.5)
os.kill(c, signal.SIGKILL); os.waitpid(c, 0)
"#;

/// A file's signal owner on the floor: the command's child may own a
/// socket and catch `SIGURG` from out-of-band data, as unconfined; no
/// owner outside the command can be set (by number, `F_SETOWN_EX`,
/// `FIOSETOWN` or `SIOCSPGRP`), so neither `SIGURG` nor `SIGIO` arrives
/// here or at the sibling, where unconfined both reach the executor. A
/// child already reaped cannot be made the owner. `O_ASYNC` is refused on
/// the floor for every file, the command's own included (on a terminal
/// it would make another process's group the owner).
#[test]
fn floorsig24_a_files_owner_is_the_commands_or_nobody() {
    let floors = judged_floors("floorsig24_a_files_owner");
    if floors.is_empty() {
        return;
    }
    let mut sibling = Sibling::start();
    let host = std::process::id();
    let pgid = rustix::process::getpgrp().as_raw_nonzero().get();
    let cfg = format!(
        "{{\"nr\": {}, \"host\": {host}, \"pgid\": {pgid}, \"sibling\": {}}}",
        numbers(),
        sibling.pid()
    );
    let script = format!("{PRELUDE}\n{OWNERS}");
    let ex = floor_executor(Duration::from_secs(60));
    let (io, urg) = (hits(libc::SIGIO), hits(libc::SIGURG));
    for floor in &floors {
        let (out, err) = python(&ex, floor, &script, &cfg);
        let got = table(&out);
        let want = [
            (
                "own_pipe",
                "setown=ok setfl_async=EPERM fioasync=EPERM sigio=none",
            ),
            (
                "executor_pipe",
                "setown_group=EPERM setown_sibling=EPERM setown_executor=EPERM \
                 setfl_async=EPERM fioasync=EPERM",
            ),
            ("own_socket", "setown=ok oob=ok sigurg=arrived"),
            (
                "executor_socket",
                "siocspgrp=EPERM setown_group=EPERM setown_sibling=EPERM setown_ex=EPERM \
                 fiosetown=EPERM setown_executor=EPERM oob=ok",
            ),
            ("gone_socket", "setown=ESRCH oob=ok"),
        ];
        for (name, line) in want {
            assert_eq!(pairs(&got, name), line, "floor {name}: {out}\n{err}");
        }
    }
    assert_eq!(hits(libc::SIGIO), io, "SIGIO reached the executor");
    assert_eq!(hits(libc::SIGURG), urg, "SIGURG reached the executor");
    assert_eq!(sibling.caught(), "", "a signal reached the sibling");
    // Unconfined the same command has the kernel signal the executor.
    let (out, err) = python(&ex, &unconfined(), &script, &cfg);
    let got = table(&out);
    assert_eq!(
        pairs(&got, "own_pipe"),
        "setown=ok setfl_async=ok fioasync=ok sigio=arrived",
        "{out}\n{err}"
    );
    assert_eq!(
        pairs(&got, "own_socket"),
        "setown=ok oob=ok sigurg=arrived",
        "{out}\n{err}"
    );
    let start = Instant::now();
    while (hits(libc::SIGIO) == io || hits(libc::SIGURG) == urg)
        && start.elapsed() < Duration::from_secs(5)
    {
        thread::sleep(Duration::from_millis(10));
    }
    assert!(hits(libc::SIGIO) > io, "{out}\n{err}");
    assert!(hits(libc::SIGURG) > urg, "{out}\n{err}");
}
