//! Many sandboxes in one process: descriptors bounded per sandbox, nothing
//! left behind when they close, memory flat over thousands of
//! create/use/close rounds.
//!
//! Descriptors and resident memory are process-wide, so the tests of this
//! file take one lock and run one at a time (the test harness runs tests on
//! parallel threads).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;

use sandgate::{ErrorCode, Sandbox, WriteOptions};

/// Sandboxes alive at once.
const ALIVE: usize = 1000;
/// Sandboxes created, used and closed in the churn test.
const CHURN: usize = 10_000;
/// Threads using the sandboxes.
const THREADS: usize = 4;
/// Descriptors a process may open on top of the sandboxes' own while the
/// test runs (the harness, the standard streams, a directory being listed).
const SLACK_FDS: usize = 16;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Descriptors open in this process now.
fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
        // The directory being listed holds one descriptor of its own.
        .saturating_sub(1)
}

/// Resident set size in bytes (second field of /proc/self/statm, in pages).
fn rss_bytes() -> u64 {
    let statm = fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm resident field");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).expect("page size")
}

/// Raises the soft descriptor limit so that `need` descriptors fit; fails
/// the test with the reason when the hard limit is too low.
fn ensure_nofile(need: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid rlimit for the call to fill.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    if lim.rlim_cur >= need {
        return;
    }
    assert!(
        lim.rlim_max >= need,
        "RLIMIT_NOFILE hard limit {} is below the {need} descriptors this test needs",
        lim.rlim_max
    );
    lim.rlim_cur = need;
    // SAFETY: lim holds a soft limit within the hard limit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
}

/// The two roots of sandbox `i` under `base`, created with a file whose
/// content names the sandbox.
fn roots(base: &Path, i: usize) -> (PathBuf, PathBuf) {
    let r = base.join(format!("r{i}"));
    let w = base.join(format!("w{i}"));
    fs::create_dir_all(r.join("sub")).unwrap();
    fs::create_dir_all(&w).unwrap();
    fs::write(r.join("sub/id.txt"), format!("sandbox {i}\n")).unwrap();
    (r, w)
}

fn build(r: &Path, w: &Path) -> Sandbox {
    Sandbox::builder()
        .read_root(r)
        .write_root(w)
        .deny_write("*.pem")
        .build()
        .unwrap()
}

/// One round of use of sandbox `i` by thread `t`: a read that must answer
/// this sandbox's own file, a write, a refused write, a listing.
fn use_once(sb: &Sandbox, i: usize, t: usize) {
    let got = sb.read("sub/id.txt").unwrap();
    assert_eq!(got, format!("sandbox {i}\n").into_bytes(), "sandbox {i}");
    let name = format!("t{t}.txt");
    sb.write(&name, name.as_bytes(), WriteOptions::default())
        .unwrap();
    assert_eq!(
        sb.write("key.pem", b"x", WriteOptions::default())
            .unwrap_err()
            .code(),
        ErrorCode::FsProtected
    );
    assert_eq!(sb.list("sub").unwrap().len(), 1);
    sb.delete(&name).unwrap();
}

/// 1,000 sandboxes alive at once, each with its own read root and write
/// root, used from several threads: at most two descriptors each (one per
/// root), none added by their use, all released by `close`.
#[test]
fn thousand_sandboxes_hold_two_descriptors_each() {
    let _serial = serial();
    ensure_nofile((ALIVE * 2 + 256) as u64);
    let base = tempfile::tempdir().unwrap();
    let dirs: Vec<_> = (0..ALIVE).map(|i| roots(base.path(), i)).collect();

    let before = open_fds();
    let boxes: Arc<Vec<Sandbox>> = Arc::new(dirs.iter().map(|(r, w)| build(r, w)).collect());
    let alive = open_fds();
    let held = alive - before;
    eprintln!("{ALIVE} sandboxes hold {held} descriptors");
    assert!(
        held <= 2 * ALIVE + SLACK_FDS,
        "{ALIVE} sandboxes hold {held} descriptors, more than two each"
    );

    // Every thread uses every sandbox, each starting at another offset so
    // that threads meet on the same sandbox and on different ones.
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let boxes = Arc::clone(&boxes);
            thread::spawn(move || {
                for k in 0..ALIVE {
                    let i = (k + t * ALIVE / THREADS) % ALIVE;
                    use_once(&boxes[i], i, t);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let used = open_fds();
    assert_eq!(used, alive, "using the sandboxes left descriptors open");

    for sb in boxes.iter() {
        sb.close();
    }
    assert_eq!(
        open_fds(),
        before,
        "closed sandboxes still hold descriptors"
    );
    for sb in boxes.iter().take(3) {
        assert_eq!(sb.read("sub/id.txt").unwrap_err().code(), ErrorCode::Closed);
    }
    drop(boxes);
    assert_eq!(open_fds(), before);
}

/// 10,000 sandboxes created, used and closed (from two threads, a window of
/// 100 alive at a time) leave the descriptor count where it was and the
/// resident size flat.
///
/// The memory tolerance: the test first measures what one live sandbox
/// costs in resident memory (1,000 of them alive at once, over the
/// baseline). Losing every sandbox of the churn would cost that times
/// 10,000; losing even one in ten would cost a tenth of it. The allowed
/// growth is a fixed 2 MiB (allocator arenas of the two threads, the
/// harness's output buffers, page-granular accounting) and the test checks
/// that leaking every sandbox would exceed it at least three times over
/// (a sandbox with its guard costs about 1.2 KB, so 10,000 of them about
/// 12 MB), so a leak of the sandbox itself cannot hide under the tolerance. Leaked
/// descriptors are caught exactly, without tolerance.
#[test]
fn churn_of_ten_thousand_sandboxes_leaks_nothing() {
    const WINDOW: usize = 100;
    const TOLERANCE: u64 = 2 << 20;
    let _serial = serial();
    ensure_nofile((ALIVE * 2 + 256) as u64);
    let base = tempfile::tempdir().unwrap();
    let dirs: Arc<Vec<_>> = Arc::new((0..WINDOW * 2).map(|i| roots(base.path(), i)).collect());

    // Cost of one live sandbox, for the tolerance's sanity check.
    let rss0 = rss_bytes();
    let many: Vec<_> = (0..ALIVE)
        .map(|i| {
            let (r, w) = &dirs[i % dirs.len()];
            build(r, w)
        })
        .collect();
    let per_sandbox = rss_bytes().saturating_sub(rss0) / ALIVE as u64;
    drop(many);
    let leak_all = per_sandbox * CHURN as u64;
    eprintln!(
        "one live sandbox: about {per_sandbox} B resident; losing {CHURN} would cost {leak_all} B"
    );
    assert!(
        leak_all >= 3 * TOLERANCE,
        "a sandbox costs {per_sandbox} B: a leak of all {CHURN} ({leak_all} B) would hide under the {TOLERANCE} B tolerance"
    );

    let churn = |rounds: usize| {
        let workers: Vec<_> = (0..2)
            .map(|t| {
                let dirs = Arc::clone(&dirs);
                thread::spawn(move || {
                    for round in 0..rounds / (2 * WINDOW) {
                        let ids: Vec<_> = (0..WINDOW).map(|k| t * WINDOW + k).collect();
                        let boxes: Vec<_> =
                            ids.iter().map(|&i| build(&dirs[i].0, &dirs[i].1)).collect();
                        for (sb, &i) in boxes.iter().zip(&ids) {
                            use_once(sb, i, t + 2 * round);
                        }
                        // Half closed explicitly, half only dropped: both
                        // must release everything.
                        for (k, sb) in boxes.iter().enumerate() {
                            if k % 2 == 0 {
                                sb.close();
                            }
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    };

    churn(2_000); // warm-up: allocator arenas, thread-locals, caches
    let fds = open_fds();
    let rss = rss_bytes();
    churn(CHURN);
    let fds_after = open_fds();
    let rss_after = rss_bytes();
    eprintln!(
        "after {CHURN} sandboxes: descriptors {fds} -> {fds_after}, RSS {rss} -> {rss_after} B"
    );
    assert_eq!(fds_after, fds, "descriptors leaked over {CHURN} sandboxes");
    let grew = rss_after.saturating_sub(rss);
    assert!(
        grew <= TOLERANCE,
        "RSS grew by {grew} B over {CHURN} sandboxes (tolerance {TOLERANCE} B)"
    );
}

/// Processes whose parent is this process (scanning /proc).
fn children() -> Vec<u32> {
    let me = std::process::id().to_string();
    fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // Field 4 of stat is the parent's pid; the name (field 2) may
            // hold spaces, so count from the closing parenthesis.
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

/// Lines of this process's mount table: a mount left in the executor's
/// own namespace adds one.
fn mounts() -> usize {
    fs::read_to_string("/proc/self/mountinfo")
        .expect("/proc/self/mountinfo")
        .lines()
        .count()
}

/// The namespaces this process holds by descriptor (`net:[…]`, `user:[…]`,
/// …), each once per descriptor.
fn held_namespaces() -> Vec<String> {
    let mut held: Vec<String> = fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .map(|t| t.to_string_lossy().into_owned())
        .filter(|t| {
            t.split_once(":[").is_some_and(|(kind, _)| {
                ["cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts"].contains(&kind)
            })
        })
        .collect();
    held.sort();
    held
}

/// 100 executors alive at once, all running short commands at the same
/// time: every command answers its own executor's output, running them
/// opens no descriptor that stays, and disposing of the executors leaves
/// neither a descriptor nor a child process behind. Where the host gives
/// namespaces, each executor's commands run in a network namespace of its
/// own, and neither a mount nor a held namespace outlives the executors.
#[test]
fn hundred_executors_run_at_once_and_leave_nothing() {
    const EXECUTORS: usize = 100;
    let _serial = serial();
    ensure_nofile(4096);
    let base = tempfile::tempdir().unwrap();
    let fds0 = open_fds();
    let children0 = children();
    let (mounts0, held0) = (mounts(), held_namespaces());
    let executors: Arc<Vec<sandgate::Executor>> = Arc::new(
        (0..EXECUTORS)
            .map(|i| {
                let d = base.path().join(format!("x{i}"));
                fs::create_dir_all(d.join("ws")).unwrap();
                fs::write(d.join("ws/id"), format!("{i}\n")).unwrap();
                let path = d.join("policy.toml");
                fs::write(
                    &path,
                    "[fs]\nwrite_root = \"ws\"\n[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 60000\n",
                )
                .unwrap();
                let ex = sandgate::Executor::from_policy(
                    &sandgate::policy::Policy::load(&path).unwrap(),
                )
                .unwrap();
                ex.start().unwrap();
                ex
            })
            .collect(),
    );
    let mut fds_alive = open_fds();
    for round in 0..3 {
        let start = Arc::new(std::sync::Barrier::new(EXECUTORS));
        let workers: Vec<_> = (0..EXECUTORS)
            .map(|i| {
                let ex = Arc::clone(&executors);
                let start = Arc::clone(&start);
                thread::spawn(move || {
                    start.wait();
                    let r = ex[i]
                        .exec("cat id", sandgate::ExecOptions::default())
                        .unwrap();
                    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
                    assert_eq!(r.stdout, format!("{i}\n").into_bytes());
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        if round == 0 {
            // The first command on a protected write root starts its
            // inotify instance, kept for the executor's life: one
            // descriptor per executor at most, and none per command.
            let now = open_fds();
            assert!(
                now <= fds_alive + EXECUTORS,
                "the first commands left {} descriptors for {EXECUTORS} executors",
                now.saturating_sub(fds_alive)
            );
            fds_alive = now;
            continue;
        }
        assert_eq!(
            open_fds(),
            fds_alive,
            "round {round}: running commands left descriptors behind"
        );
    }
    // Each executor's commands run in its own network namespace (where the
    // host gives namespaces at all).
    let mut nets = std::collections::BTreeSet::new();
    let mut in_namespaces = 0;
    for ex in executors.iter() {
        let r = ex
            .exec(
                "readlink /proc/self/ns/net",
                sandgate::ExecOptions::default(),
            )
            .unwrap();
        assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
        if r.confined.namespaces {
            in_namespaces += 1;
            nets.insert(r.stdout);
        }
    }
    eprintln!("{in_namespaces} of {EXECUTORS} executors ran their commands in namespaces");
    assert!(
        in_namespaces == 0 || in_namespaces == EXECUTORS,
        "only {in_namespaces} of {EXECUTORS} executors got namespaces"
    );
    assert_eq!(
        nets.len(),
        in_namespaces,
        "executors shared a network namespace"
    );
    assert_eq!(mounts(), mounts0, "running commands left mounts behind");
    for ex in executors.iter() {
        ex.dispose();
    }
    drop(executors);
    assert_eq!(open_fds(), fds0, "disposed executors left descriptors");
    assert_eq!(mounts(), mounts0, "disposed executors left mounts behind");
    assert_eq!(
        held_namespaces(),
        held0,
        "disposed executors left namespaces held"
    );
    // Reaping may lag dispose by a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while children() != children0 && std::time::Instant::now() < deadline {
        thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(children(), children0, "disposed executors left processes");
}
