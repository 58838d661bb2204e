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

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
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

/// Lowers the soft descriptor limit for as long as it lives, and puts it
/// back when dropped (a failing assertion included), so that the other
/// tests of this file, which wait on the same lock, get theirs back.
struct NofileLimit(Rlimit);

impl NofileLimit {
    /// Lets the process open descriptors below number `limit` only.
    fn lower(limit: u64) -> NofileLimit {
        let old = getrlimit(Resource::Nofile);
        let low = Rlimit {
            current: Some(limit),
            maximum: old.maximum,
        };
        setrlimit(Resource::Nofile, low).unwrap();
        NofileLimit(old)
    }
}

impl Drop for NofileLimit {
    fn drop(&mut self) {
        let _ = setrlimit(Resource::Nofile, self.0);
    }
}

/// The cgroups the executors of this process made for their commands
/// (beneath a `sandgate-<pid>-<n>` cgroup, in any hierarchy), by path.
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

/// Each descriptor of this process with what it names.
fn fd_links() -> Vec<(String, String)> {
    fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| {
            let e = e.ok()?;
            let target = fs::read_link(e.path()).ok()?;
            let target = target.to_string_lossy().into_owned();
            // The listing's own descriptor.
            (!target.ends_with("/fd"))
                .then(|| (e.file_name().to_string_lossy().into_owned(), target))
        })
        .collect()
}

/// The highest descriptor number open in this process, plus one.
fn fd_ceiling() -> u64 {
    fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .map_or(0, |n| n + 1)
}

/// Runs `f` with exactly `extra` descriptors free: every number below the
/// highest one open is taken (by `/dev/null`) and the soft limit set
/// `extra` past it; the numbers and the limit are given back when `f`
/// returns.
fn with_free_descriptors<T>(extra: u64, f: impl FnOnce() -> T) -> T {
    let ceiling = fd_ceiling();
    let mut plugs = Vec::new();
    loop {
        let plug = fs::File::open("/dev/null").unwrap();
        if std::os::fd::AsRawFd::as_raw_fd(&plug) as u64 >= ceiling {
            break;
        }
        plugs.push(plug);
    }
    let _low = NofileLimit::lower(ceiling + extra);
    f()
}

/// Names in `dir` and beneath it, sorted, with each file's content.
fn tree(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p.clone());
                out.push((name, None));
            } else {
                out.push((name, Some(fs::read(&p).unwrap())));
            }
        }
    }
    out.sort();
    out
}

/// Every operation run with the process out of descriptors at each step it
/// takes (the soft limit raised one descriptor at a time from none free to
/// enough): each answers or fails with an error naming the shortage, gives
/// back every descriptor, and leaves the write root as before (a failed
/// write, edit or rename) or as the call says (one that answered), never a
/// temporary file or a file half written.
#[test]
fn out_of_descriptors_at_each_step_every_operation_fails_cleanly() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let (r, w) = roots(base.path(), 0);
    for i in 0..6 {
        let d = r.join(format!("g{i}/h{i}"));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("f.txt"), format!("needle {i}\n")).unwrap();
    }
    // The write root's content before each try (the directory itself
    // stays: the sandbox holds it open).
    let fill = |w: &Path| {
        for e in fs::read_dir(w).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                fs::remove_dir_all(&p).unwrap();
            } else {
                fs::remove_file(&p).unwrap();
            }
        }
        for i in 0..6 {
            let d = w.join(format!("d{i}/e{i}"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("f.txt"), format!("needle {i}\n")).unwrap();
        }
        fs::write(w.join("old.txt"), "old text\n").unwrap();
    };
    let sb = Sandbox::builder()
        .read_root(&r)
        .write_root(&w)
        .allow_overwrite(true)
        .deny_write("*.pem")
        .build()
        .unwrap();
    type Op<'a> = (
        &'a str,
        Box<dyn Fn(&Sandbox) -> Result<String, sandgate::Error> + 'a>,
    );
    let ops: Vec<Op> = vec![
        (
            "read",
            Box::new(|sb| sb.read("sub/id.txt").map(|b| b.len().to_string())),
        ),
        (
            "write",
            Box::new(|sb| {
                sb.write("new.txt", &vec![b'n'; 300_000], WriteOptions::default())
                    .map(|n| n.to_string())
            }),
        ),
        (
            "overwrite",
            Box::new(|sb| {
                sb.write(
                    "old.txt",
                    &vec![b'o'; 300_000],
                    WriteOptions::default().overwrite(true),
                )
                .map(|n| n.to_string())
            }),
        ),
        (
            "edit",
            Box::new(|sb| {
                sb.edit("old.txt", "old", "edited", sandgate::EditOptions::default())
                    .map(|n| n.to_string())
            }),
        ),
        (
            "mkdir",
            Box::new(|sb| sb.mkdir("made/deeper").map(|()| String::new())),
        ),
        (
            "rename",
            Box::new(|sb| sb.rename("d0", "moved").map(|()| String::new())),
        ),
        (
            "delete",
            Box::new(|sb| sb.delete("d5/e5/f.txt").map(|()| String::new())),
        ),
        (
            "list",
            Box::new(|sb| sb.list("g1").map(|l| l.len().to_string())),
        ),
        (
            "glob",
            Box::new(|sb| sb.glob("**/*.txt", None).map(|l| l.len().to_string())),
        ),
        (
            "grep",
            Box::new(|sb| {
                sb.grep_found("needle", None, &sandgate::search::GrepOptions::default())
                    .map(|f| {
                        let n = match f.results {
                            sandgate::search::GrepOutput::Lines(m) => m.len(),
                            _ => unreachable!(),
                        };
                        format!("{n} matches, {} unreadable", f.unreadable)
                    })
            }),
        ),
    ];
    for (name, op) in &ops {
        let mut ok_at = None;
        for extra in 0..40u64 {
            fill(&w);
            let before_fds = open_fds();
            let before = tree(&w);
            let answer = with_free_descriptors(extra, || op(&sb));
            assert_eq!(
                open_fds(),
                before_fds,
                "{name} with {extra} descriptors free left descriptors open ({answer:?})"
            );
            let after = tree(&w);
            let leftovers: Vec<_> = after
                .iter()
                .filter(|(n, _)| n.contains("sandgate-tmp") || n.contains(".tmp"))
                .collect();
            assert!(
                leftovers.is_empty(),
                "{name} with {extra} descriptors free left {leftovers:?}"
            );
            match &answer {
                Err(e) => {
                    eprintln!("{name}: {e}: {} with {extra} descriptors free", e.message());
                    assert_eq!(
                        after, before,
                        "{name} failed with {extra} descriptors free ({e}) but changed the write root"
                    );
                    let text = format!("{e}: {}", e.message());
                    assert!(
                        text.contains("open files") || text.contains("descriptor"),
                        "{name} with {extra} descriptors free: an error that does not name the shortage: {text} ({:?})",
                        e.code()
                    );
                }
                Ok(a) => {
                    eprintln!("{name}: answers {a:?} with {extra} descriptors free");
                    ok_at = Some(extra);
                    break;
                }
            }
        }
        assert!(ok_at.is_some(), "{name} never succeeded");
    }
}

/// A command run with the process out of descriptors at each step the
/// executor takes to start it (pipes, the keeper, the namespaces, the
/// proxy): each call answers the command's output or an error naming the
/// shortage, and gives back every descriptor and every process.
#[test]
fn out_of_descriptors_at_each_step_an_exec_fails_cleanly() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    fs::create_dir_all(base.path().join("ws")).unwrap();
    let path = base.path().join("policy.toml");
    fs::write(
        &path,
        "[fs]\nwrite_root = \"ws\"\ndeny_write = [\"*.pem\"]\n[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 60000\n[net]\nallow = [\"example.test:443\"]\n",
    )
    .unwrap();
    let ex =
        sandgate::Executor::from_policy(&sandgate::policy::Policy::load(&path).unwrap()).unwrap();
    ex.start().unwrap();
    // The executor's own lasting descriptors (the protected-path watch)
    // are made by a first command.
    let r = ex
        .exec("echo warm", sandgate::ExecOptions::default())
        .unwrap();
    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    let children0 = children();
    let slots0 = cgroup_slots();
    let mut ok_at = None;
    let fds_warm = open_fds();
    for extra in 0..200u64 {
        let before_links = fd_links();
        let answer = with_free_descriptors(extra, || {
            ex.exec("echo ran", sandgate::ExecOptions::default())
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while children() != children0 && std::time::Instant::now() < deadline {
            thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(
            children(),
            children0,
            "an exec with {extra} descriptors free left processes ({answer:?})"
        );
        // A cgroup slot the exec could not check may be closed and removed,
        // and the next exec makes a fresh one, whose files the executor
        // keeps open (the slots are counted below): no other descriptor may
        // come, and none at all on the whole.
        let left: Vec<_> = fd_links()
            .into_iter()
            .filter(|l| !before_links.contains(l) && !l.1.starts_with("/sys/fs/cgroup/"))
            .collect();
        assert!(
            left.is_empty(),
            "an exec with {extra} descriptors free left descriptors open: {left:?} ({})",
            match &answer {
                Ok(r) => String::from_utf8_lossy(&r.stderr).into_owned(),
                Err(e) => e.message().to_owned(),
            }
        );
        match answer {
            Ok(r) if r.exit_code == 0 && r.stdout == b"ran\n" => {
                eprintln!("exec: runs with {extra} descriptors free");
                ok_at = Some(extra);
                break;
            }
            Ok(r) => {
                let err = String::from_utf8_lossy(&r.stderr).into_owned();
                eprintln!(
                    "exec: exit {} with {extra} descriptors free: {err}",
                    r.exit_code
                );
                assert!(
                    err.contains("open files") || err.contains("descriptor"),
                    "an exec with {extra} descriptors free failed without naming the shortage: \
                     exit {}, stdout {:?}, stderr {err}",
                    r.exit_code,
                    String::from_utf8_lossy(&r.stdout)
                );
            }
            Err(e) => {
                eprintln!("exec: {e}: {} with {extra} descriptors free", e.message());
                let text = format!("{e}: {}", e.message());
                assert!(
                    text.contains("open files") || text.contains("descriptor"),
                    "an exec with {extra} descriptors free: an error that does not name the \
                     shortage: {text} ({:?})",
                    e.code()
                );
            }
        }
    }
    assert!(ok_at.is_some(), "exec never ran");
    // No cgroup was lost on the way: each exec that could not start gave
    // its slot back or removed it.
    let slots = cgroup_slots();
    eprintln!("cgroup slots of this process: {slots:?}");
    assert!(
        slots.len() <= slots0.len(),
        "execs out of descriptors left cgroups behind: {slots0:?} before, {slots:?} after"
    );
    // And it still runs commands with the limit back, holding what it held
    // before.
    let r = ex
        .exec("echo after", sandgate::ExecOptions::default())
        .unwrap();
    assert_eq!(
        r.stdout,
        b"after\n",
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(
        open_fds(),
        fds_warm,
        "the executor holds other descriptors than before"
    );
    ex.dispose();
}

/// A command sees only its own three standard streams, whatever the rest
/// of the process holds: other sandboxes' roots, other executors (their
/// proxies, watches and cgroups), and descriptors other threads open and
/// close without `O_CLOEXEC` while the command is being started.
#[test]
fn a_command_inherits_no_descriptor_of_the_host() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let boxes: Vec<_> = (0..20)
        .map(|i| {
            let (r, w) = roots(base.path(), i);
            build(&r, &w)
        })
        .collect();
    let executors: Vec<_> = (0..3)
        .map(|i| {
            let d = base.path().join(format!("x{i}"));
            fs::create_dir_all(d.join("ws")).unwrap();
            let path = d.join("policy.toml");
            fs::write(
                &path,
                "[fs]\nwrite_root = \"ws\"\ndeny_write = [\"*.pem\"]\n[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 60000\n[net]\nallow = [\"example.test:443\"]\n",
            )
            .unwrap();
            let ex = sandgate::Executor::from_policy(
                &sandgate::policy::Policy::load(&path).unwrap(),
            )
            .unwrap();
            ex.start().unwrap();
            ex
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    // Threads opening inheritable descriptors all the while.
    let churn: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    // SAFETY: opens /dev/null without O_CLOEXEC and closes it.
                    unsafe {
                        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                        if fd >= 0 {
                            libc::close(fd);
                        }
                    }
                }
            })
        })
        .collect();
    // A command of another executor running meanwhile.
    let long = thread::scope(|s| {
        let other = s.spawn(|| {
            executors[1]
                .exec("sleep 2; echo slept", sandgate::ExecOptions::default())
                .unwrap()
        });
        let mut seen = Vec::new();
        for round in 0..20 {
            let ex = &executors[round % 2 * 2];
            let r = ex
                .exec(
                    // The shell's descriptors, listed by a child while
                    // the shell waits for it.
                    "ls -l /proc/$$/fd",
                    sandgate::ExecOptions::default(),
                )
                .unwrap();
            assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
            seen.push(String::from_utf8_lossy(&r.stdout).into_owned());
        }
        (other.join().unwrap(), seen)
    });
    stop.store(true, Ordering::SeqCst);
    for t in churn {
        t.join().unwrap();
    }
    let (other, seen) = long;
    assert_eq!(other.stdout, b"slept\n");
    for listing in &seen {
        let fds: Vec<&str> = listing
            .lines()
            .filter_map(|l| l.split(" -> ").next()?.rsplit(' ').next())
            .filter(|n| !["0", "1", "2", "total"].contains(n))
            .collect();
        assert!(
            fds.is_empty(),
            "the command held more than its streams:\n{listing}"
        );
    }
    eprintln!("a command's descriptors:\n{}", seen[0]);
    drop(boxes);
}

/// Threads of this process now.
fn threads() -> usize {
    fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

/// The executors' private temporary directories in the host's.
/// This process's session directories (`sandgate-exec-<pidns>-<pid>-…`):
/// other processes' executors come and go in the same temporary directory
/// (a CI run beside other test runs), and are none of this test's doing.
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

/// Executors made, started, used (a command that leaves a file in its
/// `TMPDIR` and a process behind it) and disposed of, one after another
/// and two at a time, some with a command still running when disposed of
/// from another thread: neither a thread, a descriptor, a process, a
/// mount, a temporary directory nor a cgroup is left behind.
#[test]
fn executors_made_and_disposed_of_leave_nothing() {
    // 400 cycles, of which 100 dispose of a running command: a leak of one
    // thing per cycle, or per racing dispose, shows as plainly as in 1,000
    // (which took 80 s of a CI run).
    const CYCLES: usize = 400;
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    fs::create_dir_all(base.path().join("ws")).unwrap();
    let path = base.path().join("policy.toml");
    fs::write(
        &path,
        "[fs]\nwrite_root = \"ws\"\ndeny_write = [\"*.pem\"]\n[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 60000\n[net]\nallow = [\"example.test:443\"]\n",
    )
    .unwrap();
    let policy = sandgate::policy::Policy::load(&path).unwrap();
    let make = || {
        let ex = sandgate::Executor::from_policy(&policy).unwrap();
        ex.start().unwrap();
        ex
    };
    // Warm-up: the process-wide parts (a signal handler's thread, caches).
    make().dispose();
    let (threads0, fds0, children0, mounts0) = (threads(), open_fds(), children(), mounts());
    let (tmp0, slots0) = (tmpdirs(), cgroup_slots());
    for i in 0..CYCLES {
        let a = Arc::new(make());
        let r = a
            .exec(
                "echo x > \"$TMPDIR/f\"; (sleep 30 &) ; echo ok",
                sandgate::ExecOptions::default(),
            )
            .unwrap();
        assert_eq!(r.stdout, b"ok\n", "{}", String::from_utf8_lossy(&r.stderr));
        if i % 4 == 0 {
            // Disposed of from another thread while a command runs: once
            // the command has written its marker in the write root, so
            // that the dispose meets a running command every time without
            // a fixed pause (100 ms each, 10 s of the test's time, where a
            // command starts in about 35 ms).
            let b = Arc::clone(&a);
            let marker = base.path().join("ws/running");
            let running = thread::spawn(move || {
                b.exec(
                    "touch running && sleep 30",
                    sandgate::ExecOptions::default(),
                )
            });
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while !marker.exists() && !running.is_finished() && std::time::Instant::now() < deadline
            {
                thread::sleep(std::time::Duration::from_millis(1));
            }
            let started = marker.exists();
            a.dispose();
            let r = running.join().unwrap();
            assert!(started, "cycle {i}: the command never started ({r:?})");
            fs::remove_file(&marker).unwrap();
            match r {
                Ok(r) => assert_ne!(r.exit_code, 0, "a command outlived its executor's dispose"),
                // The dispose took the session between the call's start
                // and its run: nothing ran (docs/reference/executor.md).
                Err(e) => assert_eq!(e.code(), ErrorCode::NotStarted, "{e}"),
            }
        } else {
            drop(a);
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while (threads() > threads0 || children() != children0) && std::time::Instant::now() < deadline
    {
        thread::sleep(std::time::Duration::from_millis(50));
    }
    eprintln!(
        "after {CYCLES} executors: threads {threads0} -> {}, descriptors {fds0} -> {}",
        threads(),
        open_fds()
    );
    assert_eq!(children(), children0, "disposed executors left processes");
    assert!(
        threads() <= threads0,
        "disposed executors left threads: {threads0} -> {}",
        threads()
    );
    assert_eq!(open_fds(), fds0, "disposed executors left descriptors");
    assert_eq!(mounts(), mounts0, "disposed executors left mounts");
    assert_eq!(
        tmpdirs(),
        tmp0,
        "disposed executors left temporary directories"
    );
    assert_eq!(cgroup_slots(), slots0, "disposed executors left cgroups");
}

/// Two executors over one write root (sharing its protected-path watch)
/// and a third over another, each with a command running: disposing of
/// one ends neither of the others' commands nor disturbs their check of
/// the protected paths, and no command reads another's `TMPDIR`.
#[test]
fn one_executors_dispose_leaves_the_others_commands_alone() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let policy = |dir: &str| {
        let d = base.path().join(dir);
        fs::create_dir_all(d.join("ws")).unwrap();
        let path = d.join("policy.toml");
        fs::write(
            &path,
            "[fs]\nwrite_root = \"ws\"\ndeny_write = [\"*.pem\"]\n[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 60000\n",
        )
        .unwrap();
        sandgate::policy::Policy::load(&path).unwrap()
    };
    let shared = policy("a");
    let other = policy("b");
    let make = |p: &sandgate::policy::Policy| {
        let ex = sandgate::Executor::from_policy(p).unwrap();
        ex.start().unwrap();
        Arc::new(ex)
    };
    let (x, y, z) = (make(&shared), make(&shared), make(&other));
    // Each writes a secret in its TMPDIR and says where it is.
    let where_ = |ex: &sandgate::Executor, tag: &str| {
        let r = ex
            .exec(
                &format!("echo {tag} > \"$TMPDIR/secret\"; printf %s \"$TMPDIR\""),
                sandgate::ExecOptions::default(),
            )
            .unwrap();
        assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
        String::from_utf8(r.stdout).unwrap()
    };
    let (tx, ty, tz) = (where_(&x, "x"), where_(&y, "y"), where_(&z, "z"));
    eprintln!("TMPDIRs: {tx} {ty} {tz}");
    let run = |ex: &Arc<sandgate::Executor>, cmd: String| {
        let ex = Arc::clone(ex);
        thread::spawn(move || ex.exec(&cmd, sandgate::ExecOptions::default()))
    };
    // y and z run while x is disposed of, and go on after it (y writing a
    // protected file its check must undo). Each command marks in its write
    // root that it runs and waits for a `go` the test makes once x is
    // disposed of: the order is certain, not left to fixed pauses.
    let ry = run(
        &y,
        "touch y-up; while [ ! -e go ]; do sleep 0.01; done; echo k > key.pem; \
         cat secret 2>/dev/null; echo y-done"
            .into(),
    );
    let rz = run(
        &z,
        "touch z-up; while [ ! -e go ]; do sleep 0.01; done; echo z-done".into(),
    );
    let rx = run(&x, "touch x-up; sleep 30".into());
    let up = ["a/ws/y-up", "b/ws/z-up", "a/ws/x-up"].map(|p| base.path().join(p));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !up.iter().all(|p| p.exists()) && std::time::Instant::now() < deadline {
        thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(
        up.iter().all(|p| p.exists()),
        "the commands never started: {up:?}"
    );
    x.dispose();
    for d in ["a", "b"] {
        fs::write(base.path().join(d).join("ws/go"), "").unwrap();
    }
    let rx = rx.join().unwrap();
    let ry = ry.join().unwrap().unwrap();
    let rz = rz.join().unwrap().unwrap();
    match rx {
        Ok(r) => assert_ne!(r.exit_code, 0),
        Err(e) => assert_eq!(e.code(), ErrorCode::Closed, "{e}"),
    }
    assert_eq!(ry.exit_code, 0, "{}", String::from_utf8_lossy(&ry.stderr));
    assert_eq!(
        ry.stdout,
        b"y-done\n",
        "{}",
        String::from_utf8_lossy(&ry.stderr)
    );
    assert!(
        ry.protected_changes
            .iter()
            .any(|c| format!("{c:?}").contains("key.pem")),
        "y's protected-path check missed its own change: {:?}",
        ry.protected_changes
    );
    assert!(
        !base.path().join("a/ws/key.pem").exists(),
        "the protected file y wrote was not undone"
    );
    assert_eq!(
        rz.stdout,
        b"z-done\n",
        "{}",
        String::from_utf8_lossy(&rz.stderr)
    );
    // No command reads another executor's TMPDIR (nor lists it).
    for (ex, own, others) in [(&y, &ty, [&tx, &tz]), (&z, &tz, [&tx, &ty])] {
        for t in others {
            let r = ex
                .exec(
                    &format!("cat '{t}/secret' || ls '{t}' || echo refused"),
                    sandgate::ExecOptions::default(),
                )
                .unwrap();
            let out = String::from_utf8_lossy(&r.stdout);
            assert_eq!(out, "refused\n", "{own} read {t}: {out}");
        }
    }
    y.dispose();
    z.dispose();
}

/// A fetch with the process out of descriptors at each step (its socket,
/// the name service's, a cancellable fetch's helper): each answers the
/// body or an error naming the shortage, and gives back every descriptor.
#[test]
fn out_of_descriptors_at_each_step_a_fetch_fails_cleanly() {
    use std::io::Write;
    let _serial = serial();
    // The server is another process: the lowered limit, which is this
    // process's, must not stop it accepting.
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let mut server = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "http_server_of_the_fetch_test", "--nocapture"])
        .env(SERVER_ENV, &port_file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let port: u16 = loop {
        if let Some(p) = fs::read_to_string(&port_file)
            .ok()
            .and_then(|s| s.strip_suffix('\n')?.parse().ok())
        {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server never started"
        );
        thread::sleep(std::time::Duration::from_millis(20));
    };
    let path = dir.path().join("policy.toml");
    fs::write(
        &path,
        format!("[net]\nallow = [\"127.0.0.1:{port}\"]\nallow_http = true\n"),
    )
    .unwrap();
    let fetcher = sandgate::fetch::from_policy(&sandgate::policy::Policy::load(&path).unwrap());
    let url = format!("http://127.0.0.1:{port}/");
    for cancellable in [false, true] {
        let mut ok_at = None;
        for extra in 0..40u64 {
            let before = fd_links();
            let mut opts = sandgate::fetch::FetchOptions::new();
            if cancellable {
                opts = opts.cancel(sandgate::fetch::CancelFlag::new());
            }
            let answer = with_free_descriptors(extra, || fetcher.fetch(&url, &opts));
            // The server's end of a connection may still be open a moment.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let left = loop {
                let left: Vec<_> = fd_links()
                    .into_iter()
                    .filter(|l| !before.contains(l))
                    .collect();
                if left.is_empty() || std::time::Instant::now() > deadline {
                    break left;
                }
                thread::sleep(std::time::Duration::from_millis(10));
            };
            assert!(
                left.is_empty(),
                "a fetch with {extra} descriptors free left {left:?} ({answer:?})"
            );
            match answer {
                Ok(r) => {
                    assert_eq!(r.body, b"hello");
                    eprintln!("fetch (cancellable {cancellable}): answers with {extra} free");
                    ok_at = Some(extra);
                    break;
                }
                Err(e) => {
                    // What the caller sees: the message with its causes.
                    let text = sandgate::Error::from(e).message().to_owned();
                    eprintln!("fetch (cancellable {cancellable}): {text} with {extra} free");
                    assert!(
                        text.contains("open files") || text.contains("descriptor"),
                        "a fetch with {extra} descriptors free: an error that does not name \
                         the shortage: {text}"
                    );
                }
            }
        }
        assert!(ok_at.is_some(), "the fetch never answered");
    }
    let mut quit = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    quit.write_all(b"QUIT").unwrap();
    assert!(server.wait().unwrap().success());
}

/// Where the fetch test's server, run as a child of the test, writes its
/// port.
const SERVER_ENV: &str = "SANDGATE_SCALE_TEST_SERVER_PORT_FILE";

/// The fetch test's server, in a process of its own: answers `hello` to
/// every request until one says `QUIT`. Does nothing unless run so.
#[test]
fn http_server_of_the_fetch_test() {
    use std::io::{Read, Write};
    let Some(port_file) = std::env::var_os(SERVER_ENV) else {
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let tmp = PathBuf::from(&port_file).with_extension("tmp");
    fs::write(&tmp, format!("{port}\n")).unwrap();
    fs::rename(&tmp, &port_file).unwrap();
    for conn in listener.incoming() {
        let Ok(mut c) = conn else { continue };
        let mut buf = [0u8; 4096];
        let _ = c.read(&mut buf);
        if buf.starts_with(b"QUIT") {
            return;
        }
        let _ =
            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    }
}

/// The names of this process's threads.
fn thread_names() -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim_end().to_owned())
        .collect();
    v.sort();
    v
}

/// An executor disposed of from another thread while its proxy relays
/// twenty connections to a target that never answers: its proxy's threads
/// end and its descriptors are given back (where the host gives
/// namespaces: elsewhere there is no proxy).
#[test]
fn an_executor_disposed_of_while_its_proxy_relays_leaves_no_thread() {
    let _serial = serial();
    let listener = std::net::TcpListener::bind(("127.0.0.2", 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted_tx, accepted) = std::sync::mpsc::channel();
    // The target's ends of the connections, closed by the test once the
    // proxy's are (they are the test's descriptors, not the executor's).
    let held: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
    let hold = Arc::clone(&held);
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            hold.lock().unwrap().push(conn);
            let _ = accepted_tx.send(());
        }
    });
    let base = tempfile::tempdir().unwrap();
    fs::create_dir_all(base.path().join("ws")).unwrap();
    let path = base.path().join("policy.toml");
    fs::write(
        &path,
        format!("[fs]\nwrite_root = \"ws\"\n[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 60000\n[net]\nallow = [\"{addr}\"]\nallow_http = true\n"),
    )
    .unwrap();
    let policy = sandgate::policy::Policy::load(&path).unwrap();
    // Warm-up of process-wide parts.
    {
        let ex = sandgate::Executor::from_policy(&policy).unwrap();
        ex.start().unwrap();
        ex.exec("true", sandgate::ExecOptions::default()).unwrap();
        ex.dispose();
    }
    let (names0, fds0) = (thread_names(), open_fds());
    let ex = Arc::new(sandgate::Executor::from_policy(&policy).unwrap());
    ex.start().unwrap();
    let probe = ex.exec("true", sandgate::ExecOptions::default()).unwrap();
    if !probe.confined.namespaces {
        eprintln!("no namespaces on this host: no proxy to test");
        ex.dispose();
        return;
    }
    let runner = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || {
            ex.exec(
                &format!(
                    "for i in $(seq 20); do /usr/bin/curl -sS --max-time 50 http://{addr}/ & done; wait"
                ),
                sandgate::ExecOptions::default(),
            )
        })
    };
    for _ in 0..20 {
        accepted
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a connection never reached the target");
    }
    let busy = thread_names();
    eprintln!(
        "relaying 20 connections: {} threads (before {})",
        busy.len(),
        names0.len()
    );
    let disposer = {
        let ex = Arc::clone(&ex);
        thread::spawn(move || ex.dispose())
    };
    disposer.join().unwrap();
    let _ = runner.join().unwrap();
    drop(ex);
    held.lock().unwrap().clear();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while (thread_names() != names0 || open_fds() != fds0) && std::time::Instant::now() < deadline {
        thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(thread_names(), names0, "threads left after dispose");
    assert_eq!(open_fds(), fds0, "descriptors left after dispose");
}

/// Runs `f` on a thread and answers its result, or fails naming `what` if
/// it has not answered after 60 s (a lock held by another sandbox's
/// stalled call would hold it for good).
fn unblocked<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} waited for another sandbox's stalled call"))
}

/// One sandbox's, executor's and fetcher's call stalled in the middle (its
/// audit sink never returns until the test lets it, as a host's slow log
/// would hold it) holds up no call of another sandbox, executor or
/// fetcher, whether of the same kind or another, on the same roots or
/// others.
#[test]
fn a_stalled_call_holds_up_no_other_sandbox() {
    use std::sync::mpsc;
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let (r, w) = roots(base.path(), 0);
    let (r2, w2) = roots(base.path(), 1);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        use std::io::{Read, Write};
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let _ =
                c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    let policy = |dir: &Path| {
        let path = dir.join("policy.toml");
        fs::write(
            &path,
            format!(
                "[fs]\nread_roots = [\"{}\"]\nwrite_root = \"{}\"\ndeny_write = [\"*.pem\"]\n[exec]\nenabled = true\nshell = \"/bin/sh\"\ntimeout_ms = 60000\n[net]\nallow = [\"127.0.0.1:{port}\"]\nallow_http = true\n",
                r.display(),
                w.display()
            ),
        )
        .unwrap();
        sandgate::policy::Policy::load(&path).unwrap()
    };
    let pa = policy(base.path());
    // The stalled party: every sink waits for the release.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release = Arc::new(Mutex::new(release_rx));
    let (entered_tx, entered) = mpsc::channel::<&'static str>();
    let stall = |what: &'static str| {
        let (release, entered_tx) = (Arc::clone(&release), Mutex::new(entered_tx.clone()));
        Arc::new(move |_: &sandgate::AuditEvent| {
            let _ = entered_tx.lock().unwrap().send(what);
            let _ = release.lock().unwrap().recv();
        }) as sandgate::AuditSink
    };
    let sb_a = Arc::new(
        Sandbox::builder()
            .read_root(&r)
            .write_root(&w)
            .audit_sink(stall("sandbox"))
            .build()
            .unwrap(),
    );
    let ex_a = Arc::new(sandgate::Executor::from_policy(&pa).unwrap());
    ex_a.start().unwrap();
    ex_a.set_audit_sink(Some(stall("executor")));
    let fe_a = Arc::new(sandgate::fetch::from_policy(&pa));
    fe_a.set_audit_sink(Some(stall("fetcher")));
    let url = format!("http://127.0.0.1:{port}/");
    let stalled: Vec<thread::JoinHandle<()>> = vec![
        {
            let sb = Arc::clone(&sb_a);
            thread::spawn(move || {
                let _ = sb.write("stalled.txt", b"x", WriteOptions::default());
            })
        },
        {
            let ex = Arc::clone(&ex_a);
            thread::spawn(move || {
                let _ = ex.exec("echo stalled", sandgate::ExecOptions::default());
            })
        },
        {
            let (fe, url) = (Arc::clone(&fe_a), url.clone());
            thread::spawn(move || {
                let _ = fe.fetch(&url, &sandgate::fetch::FetchOptions::new());
            })
        },
    ];
    let mut seen: Vec<&str> = (0..3)
        .map(|_| {
            entered
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("a stalled call never reached its sink")
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, ["executor", "fetcher", "sandbox"]);

    // Others, on the same roots and on others, meanwhile.
    let same = Arc::new(build(&r, &w));
    let other = Arc::new(build(&r2, &w2));
    for sb in [same, other] {
        let got = unblocked("a read", {
            let sb = Arc::clone(&sb);
            move || sb.read("sub/id.txt").map(|b| b.len())
        });
        assert!(got.is_ok(), "{got:?}");
        let got = unblocked("a write", {
            let sb = Arc::clone(&sb);
            move || sb.write("other.txt", b"y", WriteOptions::default().overwrite(true))
        });
        assert!(got.is_ok(), "{got:?}");
        let got = unblocked("a grep", {
            let sb = Arc::clone(&sb);
            move || sb.grep("sandbox", None, None).map(|m| m.len())
        });
        assert_eq!(got.unwrap(), 1);
    }
    let ex_b = Arc::new(sandgate::Executor::from_policy(&pa).unwrap());
    ex_b.start().unwrap();
    let got = unblocked("an exec", {
        let ex = Arc::clone(&ex_b);
        move || ex.exec("echo other", sandgate::ExecOptions::default())
    })
    .unwrap();
    assert_eq!(
        got.stdout,
        b"other\n",
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let fe_b = Arc::new(sandgate::fetch::from_policy(&pa));
    let got = unblocked("a fetch", {
        let (fe, url) = (Arc::clone(&fe_b), url.clone());
        move || fe.fetch(&url, &sandgate::fetch::FetchOptions::new())
    })
    .unwrap();
    assert_eq!(got.body, b"ok");
    // The stalled ones end once let go.
    for _ in 0..3 {
        let _ = release_tx.send(());
    }
    drop(release_tx);
    for t in stalled {
        t.join().unwrap();
    }
    ex_a.dispose();
    ex_b.dispose();
}

/// A grep or glob whose walk meets the shortage part way (the descriptor
/// walk holds one descriptor per directory level of a deep path, up to 64,
/// so a file 40 levels down needs more than one at the top) fails naming
/// it, rather than answering what it found with the deep file counted as
/// unreadable: the file is readable, the process was out of descriptors.
#[test]
fn out_of_descriptors_part_way_a_search_fails_naming_the_shortage() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let (r, w) = roots(base.path(), 0);
    let mut deep = r.clone();
    for i in 0..40 {
        deep = deep.join(format!("d{i}"));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("f.txt"), "needle deep\n").unwrap();
    fs::write(r.join("f.txt"), "needle top\n").unwrap();
    let sb = Sandbox::builder()
        .read_root(&r)
        .write_root(&w)
        .resolver(sandgate::Resolver::Walk)
        .build()
        .unwrap();
    let grep = |sb: &Sandbox| {
        sb.grep_found("needle", None, &sandgate::search::GrepOptions::default())
            .map(|f| {
                let n = match f.results {
                    sandgate::search::GrepOutput::Lines(m) => m.len(),
                    _ => unreachable!(),
                };
                (n, f.unreadable)
            })
    };
    let glob = |sb: &Sandbox| {
        sb.glob_found("**/f.txt", None)
            .map(|f| (f.results.len(), f.unreadable))
    };
    let mut whole = 0;
    for extra in 0..60u64 {
        let (g, l) = with_free_descriptors(extra, || (grep(&sb), glob(&sb)));
        for (what, got) in [("grep", g), ("glob", l)] {
            match got {
                Ok((2, 0)) => whole += 1,
                Ok(other) => panic!(
                    "a {what} with {extra} descriptors free answered (found, unreadable) = \
                     {other:?} for a tree whose every file is readable"
                ),
                Err(e) => {
                    let text = format!("{e}: {}", e.message());
                    assert!(
                        text.contains("open files"),
                        "a {what} with {extra} descriptors free: {text}"
                    );
                }
            }
        }
    }
    assert!(whole > 0, "no search answered whole");
    let _ = fs::remove_dir_all(base.path());
}
