//! Memory, task and CPU limits with real processes: each attack is bounded
//! by a guard of its own (an address-space `ulimit` well above the limit,
//! a fork bomb of bounded depth, a timeout) so that a limit that fails
//! shows as a failed assertion, never as a host in trouble.
//!
//! As root on a cgroup v1 host the executor holds memory and tasks with
//! cgroups; otherwise (and under `cargo xtask unprivileged`) with the
//! sampling monitor. Each test asserts what the mechanism in force must
//! give, and says which it saw.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use sandgate_shellexec::confine::ConfineSpec;
use sandgate_shellexec::exec::{ExecResult, LocalShellExecutor, ShellExecutor};
use sandgate_shellexec::limits::{Limit, Mechanism, ResourceLimits};

// Not every suite uses every helper.
#[allow(dead_code)]
mod limits_support;

use limits_support::*;

#[test]
fn a_gradual_3_gib_allocation_is_stopped_at_256_mib() {
    if !python("a_gradual_3_gib_allocation_is_stopped_at_256_mib") {
        return;
    }
    let ex = started(memory(256 * MIB));
    // The guard: 1.5 GiB of address space. A limit that fails shows as a
    // running total past 256 MiB (up to the guard), never as a host out of
    // memory.
    let cmd = format!("ulimit -v 1572864; {}", allocate(3072, 5));
    let r = run(&ex, &cmd, Duration::from_secs(60));
    let got = last_total(&r.stdout);
    let by = report(&r).memory;
    eprintln!(
        "memory held by {by:?}: exit {}, limit {:?}, reached {got} MiB",
        r.exit_code, r.limit
    );
    assert!(got < 256, "the command got {got} MiB: {r:?}");
    assert_ne!(r.exit_code, 0, "{r:?}");
    assert!(!r.timed_out, "{r:?}");
    match by {
        Some(Mechanism::CgroupV1 | Mechanism::CgroupV2) => {
            assert_eq!(r.limit, Some(Limit::Memory), "{r:?}")
        }
        // RLIMIT_DATA may refuse the allocation before a sample sees it:
        // then the process exits with MemoryError and nothing is
        // attributed.
        Some(Mechanism::Monitor) => assert!(
            r.limit == Some(Limit::Memory)
                || (r.limit.is_none()
                    && String::from_utf8_lossy(&r.stderr).contains("MemoryError")),
            "{r:?}"
        ),
        None => panic!("memory is not held: {:?}", report(&r)),
        Some(other) => panic!("memory held by {other:?}"),
    }
    assert_eq!(by, Some(expected("memory")), "{:?}", report(&r));
}

#[test]
fn the_memory_of_the_whole_tree_is_limited() {
    if !python("the_memory_of_the_whole_tree_is_limited") {
        return;
    }
    let ex = started(memory(256 * MIB));
    // Four processes of 96 MiB each (bounded: 384 MiB in all), each under
    // any per-process limit; one of them in a session of its own.
    let marker = format!("sgtree{}", std::process::id());
    let hold = format!(
        "{PYTHON} -c 'import time; b = bytearray(b\"x\") * (96 << 20); time.sleep(30)' {marker}"
    );
    let cmd = format!("{hold} & {hold} & setsid {hold} & {hold} & wait");
    let began = Instant::now();
    let r = run(&ex, &cmd, Duration::from_secs(30));
    eprintln!(
        "memory held by {:?}: exit {}, limit {:?} after {:?}",
        report(&r).memory,
        r.exit_code,
        r.limit,
        began.elapsed()
    );
    assert_eq!(r.limit, Some(Limit::Memory), "{r:?}");
    assert!(!r.timed_out, "{r:?}");
    assert!(began.elapsed() < Duration::from_secs(15), "{r:?}");
    assert!(survivors(&marker).is_empty(), "{:?}", survivors(&marker));
}

/// In namespaces, what a command writes to its private tmpfs is memory
/// and counts against its limit: the kernel charges it to the command's
/// cgroup, and the monitor adds what the view's tmpfs mounts hold.
#[test]
fn what_the_private_tmpfs_holds_counts_against_the_memory_limit() {
    let ex = started(memory(128 * MIB));
    let first = run(&ex, "true", Duration::from_secs(30));
    if !first.confined.namespaces {
        eprintln!("note: private tmpfs test skipped: no namespaces here");
        return;
    }
    // The control: 64 MiB in /tmp fits under 128 MiB.
    let fits = run(
        &ex,
        "head -c 67108864 /dev/zero > /tmp/x && echo written",
        Duration::from_secs(30),
    );
    assert_eq!(fits.exit_code, 0, "{fits:?}");
    assert_eq!(fits.stdout, b"written\n");
    assert_eq!(fits.limit, None, "{fits:?}");
    // 200 MiB does not (the guard: /tmp's own 256 MiB size).
    let r = run(
        &ex,
        "head -c 209715200 /dev/zero > /tmp/x; sleep 2; echo survived",
        Duration::from_secs(30),
    );
    eprintln!(
        "memory held by {:?}: exit {}, limit {:?}",
        report(&r).memory,
        r.exit_code,
        r.limit
    );
    assert_eq!(r.limit, Some(Limit::Memory), "{r:?}");
    assert!(
        !String::from_utf8_lossy(&r.stdout).contains("survived"),
        "{r:?}"
    );
}

/// A python command creating up to `n` empty files in `dir`: prints how
/// many it made, and the error that stopped it if one did.
fn empty_files(dir: &str, n: u32) -> String {
    format!(
        "{PYTHON} -c 'import os, sys\nn = 0\ntry:\n    for i in range({n}):\n        \
         os.close(os.open(\"{dir}/e%d\" % i, os.O_CREAT | os.O_WRONLY)); n += 1\n\
         except OSError as e:\n    print(\"error\", os.strerror(e.errno))\nprint(\"made\", n)\n\
         sys.stdout.flush()'"
    )
}

/// An empty file on a tmpfs holds no block, so `statfs`'s used blocks
/// miss it, but its inode and dentry are kernel memory (about 1 KiB on
/// Linux 6.18): 150,000 of them are some 145 MiB. In namespaces they count
/// against the memory limit like the files' contents.
#[test]
fn empty_files_on_the_private_tmpfs_count_against_the_memory_limit() {
    if !python("empty_files_on_the_private_tmpfs_count_against_the_memory_limit") {
        return;
    }
    let ex = started(memory(64 * MIB));
    let first = run(&ex, "true", Duration::from_secs(30));
    if !first.confined.namespaces {
        eprintln!("note: private tmpfs test skipped: no namespaces here");
        return;
    }
    // The guard: 150,000 files at most.
    let cmd = format!("{}; sleep 2; echo survived", empty_files("/tmp", 150_000));
    let r = run(&ex, &cmd, Duration::from_secs(60));
    eprintln!(
        "memory held by {:?}: exit {}, limit {:?}, stdout {:?}",
        report(&r).memory,
        r.exit_code,
        r.limit,
        String::from_utf8_lossy(&r.stdout)
    );
    assert_eq!(r.limit, Some(Limit::Memory), "{r:?}");
    assert!(
        !String::from_utf8_lossy(&r.stdout).contains("survived"),
        "{r:?}"
    );
}

/// Each private tmpfs holds a bounded number of files, whatever the
/// memory limit (here none): `/dev/shm` (64 MiB) takes at most 65,536
/// inodes, so its kernel memory is bounded like its contents.
#[test]
fn a_private_tmpfs_holds_a_bounded_number_of_files() {
    if !python("a_private_tmpfs_holds_a_bounded_number_of_files") {
        return;
    }
    let ex = started(ResourceLimits::default());
    let first = run(&ex, "true", Duration::from_secs(30));
    if !first.confined.namespaces {
        eprintln!("note: private tmpfs test skipped: no namespaces here");
        return;
    }
    // The guard: 70,000 files at most.
    let r = run(
        &ex,
        &empty_files("/dev/shm", 70_000),
        Duration::from_secs(60),
    );
    let out = String::from_utf8_lossy(&r.stdout).into_owned();
    eprintln!("exit {}, stdout {out:?}", r.exit_code);
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert!(out.contains("error No space left on device"), "{r:?}");
    let made: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("made "))
        .and_then(|n| n.parse().ok())
        .expect("a count");
    assert!(made < 65_536, "{made} files on /dev/shm");
}

#[test]
fn a_fork_bomb_is_stopped_and_a_concurrent_exec_runs_normally() {
    let ex = started(ResourceLimits {
        max_tasks: Some(64),
        ..ResourceLimits::default()
    });
    let marker = format!("sgbomb{}", std::process::id());
    // Bounded by its depth: at most 2^8 processes if the limit fails (four
    // times the limit, and few enough not to starve the other tests).
    let bomb = format!(
        "f() {{ if [ $1 -gt 0 ]; then f $(($1 - 1)) & f $(($1 - 1)) & fi; \
         exec -a {marker} sleep 30; }}; f 7; wait"
    );
    thread::scope(|s| {
        let bombing = s.spawn(|| run(&ex, &bomb, Duration::from_secs(30)));
        thread::sleep(Duration::from_millis(50));
        let other = run(
            &ex,
            "echo fine; sleep 0.2; echo done",
            Duration::from_secs(20),
        );
        assert_eq!(other.exit_code, 0, "{other:?}");
        assert_eq!(other.stdout, b"fine\ndone\n");
        assert_eq!(other.limit, None, "{other:?}");
        let r = bombing.join().unwrap();
        eprintln!(
            "tasks held by {:?}: exit {}, limit {:?}",
            report(&r).tasks,
            r.exit_code,
            r.limit
        );
        assert_eq!(r.limit, Some(Limit::Tasks), "{r:?}");
        assert!(!r.timed_out, "{r:?}");
        assert_eq!(report(&r).tasks, Some(expected("pids")), "{:?}", report(&r));
    });
    assert!(survivors(&marker).is_empty(), "{:?}", survivors(&marker));
}

fn cpu(ms: u64) -> ResourceLimits {
    ResourceLimits {
        max_cpu_ms: Some(ms),
        ..ResourceLimits::default()
    }
}

#[test]
fn a_busy_loop_ends_at_its_cpu_limit() {
    let ex = started(cpu(500));
    let began = Instant::now();
    let r = run(&ex, "while :; do :; done", Duration::from_secs(10));
    let took = began.elapsed();
    eprintln!(
        "busy loop: exit {}, limit {:?} after {took:?}",
        r.exit_code, r.limit
    );
    assert_eq!(r.limit, Some(Limit::Cpu), "{r:?}");
    assert!(!r.timed_out, "{r:?}");
    assert_eq!(report(&r).cpu, Some(expected_cpu()), "{:?}", report(&r));
    // 500 ms of CPU and a sample; a loaded machine gives less than a core.
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn cpu_time_counts_the_whole_tree_and_processes_that_ended() {
    let ex = started(cpu(500));
    let marker = format!("sgcpu{}", std::process::id());
    // Four loops in the background (one in a session of its own) while
    // the shell waits: each stays under the per-process RLIMIT_CPU of one
    // second until the tree together passes 500 ms.
    let cmd = format!(
        "for i in 1 2 3; do bash -c 'while :; do :; done' {marker} & done; \
         setsid bash -c 'while :; do :; done' {marker} & wait"
    );
    let began = Instant::now();
    let r = run(&ex, &cmd, Duration::from_secs(10));
    eprintln!(
        "tree: exit {}, limit {:?} after {:?}",
        r.exit_code,
        r.limit,
        began.elapsed()
    );
    // Per-process rlimits alone would end each loop after a second of its
    // own and name nothing (the shell's `wait` returns 0). Well inside the
    // timeout even on a loaded machine.
    assert_eq!(r.limit, Some(Limit::Cpu), "{r:?}");
    assert!(began.elapsed() < Duration::from_secs(6), "{r:?}");
    assert!(survivors(&marker).is_empty(), "{:?}", survivors(&marker));

    // A re-forker: each generation spins a little, forks the next and
    // exits, faster than a scan; the time of those that ended still
    // counts (the keeper reaps them).
    let reforker = "f() { i=0; while [ $i -lt 2000 ]; do i=$((i + 1)); done; f & exit 0; }; \
                    f & wait; sleep 20";
    let began = Instant::now();
    let r = run(&ex, reforker, Duration::from_secs(10));
    eprintln!(
        "re-forker: exit {}, limit {:?} after {:?}",
        r.exit_code,
        r.limit,
        began.elapsed()
    );
    assert_eq!(r.limit, Some(Limit::Cpu), "{r:?}");
    assert!(began.elapsed() < Duration::from_secs(6), "{r:?}");
}

#[test]
fn timeout_and_output_name_their_limit() {
    let ex = started(ResourceLimits::default());
    let r = run(&ex, "sleep 5", Duration::from_millis(200));
    assert_eq!(r.limit, Some(Limit::Timeout), "{r:?}");
    let r = run(&ex, "head -c 3000000 /dev/zero", Duration::from_secs(10));
    assert!(r.truncated);
    assert_eq!(r.limit, Some(Limit::Output), "{r:?}");
    let r = run(&ex, "exit 3", Duration::from_secs(10));
    assert_eq!(r.limit, None, "{r:?}");
    assert!(r.confined.limits.is_none(), "no limits, no report: {r:?}");
}

/// Cgroups are reused: many execs leave one pool, and dropping the
/// executor removes every cgroup it made.
#[test]
fn cgroups_are_pooled_and_removed() {
    if !(is_root() && cgroup_v1()) {
        eprintln!("note: cgroups_are_pooled_and_removed skipped: needs root and cgroup v1");
        return;
    }
    let own = fs::read_to_string("/proc/self/cgroup").unwrap();
    let path = own
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_owned()))
        .unwrap();
    let base = Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
    let prefix = format!("sandgate-{}-", std::process::id());
    let ex = started(ResourceLimits {
        max_memory_bytes: Some(256 * MIB),
        max_tasks: Some(64),
        ..ResourceLimits::default()
    });
    // Other tests of this process run executors at the same time under the
    // same prefix, so this one finds its own executor's cgroup from where
    // its commands ran.
    let mut ran_in = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let r = run(&ex, "cat /proc/self/cgroup", Duration::from_secs(10));
        let text = String::from_utf8_lossy(&r.stdout);
        let line = text
            .lines()
            .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_owned()))
            .unwrap_or_else(|| panic!("no memory cgroup in {text}"));
        ran_in.insert(line);
    }
    assert_eq!(
        ran_in.len(),
        1,
        "sequential execs reuse one cgroup: {ran_in:?}"
    );
    let child = base.join(
        Path::new(ran_in.first().unwrap())
            .strip_prefix(&path)
            .unwrap_or_else(|_| panic!("{ran_in:?} is not beneath {path}")),
    );
    let executors = child.parent().unwrap().to_path_buf();
    let name = executors
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with(&prefix),
        "{} is not the executor's",
        executors.display()
    );
    let children = fs::read_dir(&executors)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .count();
    assert_eq!(
        children,
        1,
        "one pooled cgroup under {}",
        executors.display()
    );
    drop(ex);
    assert!(
        !executors.exists(),
        "{} is removed with the executor",
        executors.display()
    );
}

/// A slot that still holds a process when its exec is over is not leased
/// again: here a process of the test's own, moved into the slot's memory
/// cgroup between two commands (a command cannot leave one behind: the
/// keeper ends its whole tree).
#[test]
fn a_cgroup_that_still_holds_a_process_is_not_reused() {
    if !(is_root() && cgroup_v1()) {
        eprintln!("note: a_cgroup_that_still_holds_a_process skipped: needs root and cgroup v1");
        return;
    }
    let ex = started(ResourceLimits {
        max_memory_bytes: Some(256 * MIB),
        ..ResourceLimits::default()
    });
    let memory_cgroup = |ex: &LocalShellExecutor| {
        let r = run(ex, "cat /proc/self/cgroup", Duration::from_secs(10));
        let text = String::from_utf8_lossy(&r.stdout).into_owned();
        text.lines()
            .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_owned()))
            .unwrap_or_else(|| panic!("no memory cgroup in {text}"))
    };
    let first = memory_cgroup(&ex);
    assert_eq!(first, memory_cgroup(&ex), "sequential execs reuse a slot");
    let mut squatter = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let procs = Path::new("/sys/fs/cgroup/memory")
        .join(first.trim_start_matches('/'))
        .join("cgroup.procs");
    fs::write(&procs, squatter.id().to_string()).unwrap();
    // The next exec gets the slot and, when it is over, finds the
    // squatter in it: the slot is kept aside, and the one after that runs
    // in another.
    let second = memory_cgroup(&ex);
    let third = memory_cgroup(&ex);
    squatter.kill().unwrap();
    squatter.wait().unwrap();
    assert_eq!(second, first, "the free slot is leased");
    assert_ne!(third, first, "a slot holding a process was leased again");
    assert_eq!(third, memory_cgroup(&ex), "the new slot is reused");
}

/// A host process that ends without dropping its executor (killed, or a
/// binding whose objects are never finalized) leaves its cgroups behind;
/// the next executor removes those of processes that are gone, and leaves
/// a live process's cgroups and any cgroup that still holds a process.
#[test]
fn cgroups_left_by_a_process_that_is_gone_are_removed() {
    if !(is_root() && cgroup_v1()) {
        eprintln!("note: cgroups_left_by_a_process_that_is_gone skipped: needs root and cgroup v1");
        return;
    }
    let own = fs::read_to_string("/proc/self/cgroup").unwrap();
    let path = own
        .lines()
        .find_map(|l| l.split_once(":pids:").map(|(_, p)| p.to_owned()))
        .unwrap();
    let base = Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/'));
    // A pid that was and is no longer; a pid that lives.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let mut alive = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let stale = base.join(format!("sandgate-{gone_pid}-0"));
    let live = base.join(format!("sandgate-{}-0", alive.id()));
    let busy = base.join(format!("sandgate-{gone_pid}-1"));
    for dir in [&stale, &live, &busy] {
        fs::create_dir_all(dir.join("0")).unwrap();
    }
    // A process still in a leftover cgroup keeps it.
    let mut held = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    fs::write(busy.join("0/cgroup.procs"), held.id().to_string()).unwrap();

    let ex = started(ResourceLimits {
        max_tasks: Some(64),
        ..ResourceLimits::default()
    });
    let r = run(&ex, "true", Duration::from_secs(10));
    assert_eq!(
        report(&r).tasks,
        Some(Mechanism::CgroupV1),
        "{:?}",
        report(&r)
    );
    let (stale_gone, live_kept, busy_kept) = (!stale.exists(), live.exists(), busy.exists());

    // Clean up before asserting: move the held process back, remove ours.
    let _ = fs::write(base.join("cgroup.procs"), held.id().to_string());
    let _ = held.kill();
    let _ = held.wait();
    let _ = alive.kill();
    let _ = alive.wait();
    for dir in [&stale, &live, &busy] {
        let _ = fs::remove_dir(dir.join("0"));
        let _ = fs::remove_dir(dir);
    }
    assert!(
        stale_gone,
        "{} of a process that is gone was left",
        stale.display()
    );
    assert!(
        live_kept,
        "{} of a live process was removed",
        live.display()
    );
    assert!(
        busy_kept,
        "{} holding a process was removed",
        busy.display()
    );
}

/// The report is truthful where cgroups cannot be made: pointed at a place
/// that is not a cgroup hierarchy, the executor says so and the monitor
/// holds the limits.
#[test]
fn without_cgroups_the_monitor_holds_and_the_report_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let ex = started(ResourceLimits {
        max_memory_bytes: Some(256 * MIB),
        max_tasks: Some(64),
        cgroup_root: Some(dir.path().to_path_buf()),
        ..ResourceLimits::default()
    });
    let r = run(&ex, "true", Duration::from_secs(10));
    let rep = report(&r);
    assert_eq!(rep.memory, Some(Mechanism::Monitor), "{rep:?}");
    assert_eq!(rep.tasks, Some(Mechanism::Monitor), "{rep:?}");
    let notes = rep.notes.join("\n");
    if is_root() {
        assert!(notes.contains("cannot create a cgroup v1"), "{notes}");
    } else {
        assert!(
            notes.contains("only when the executor runs as root"),
            "{notes}"
        );
    }
    assert!(r
        .confined
        .rlimits
        .iter()
        .any(|(n, v)| n == "RLIMIT_DATA" && *v == 256 * MIB));
    assert!(fs::read_dir(dir.path()).unwrap().next().is_none());
}

/// Set (to a directory) in the re-executed test process that sees a
/// read-only cgroup hierarchy.
const RO_ROOT: &str = "SANDGATE_TEST_READ_ONLY_CGROUP_ROOT";

/// A real cgroup v1 hierarchy mounted read-only (in a mount namespace of
/// the test's own): the executor cannot create its cgroups, says so, and
/// the monitor still stops a fork bomb.
#[test]
fn a_read_only_cgroup_hierarchy_is_reported_and_the_monitor_holds() {
    if let Some(root) = std::env::var_os(RO_ROOT) {
        let ex = started(ResourceLimits {
            max_memory_bytes: Some(256 * MIB),
            max_tasks: Some(64),
            cgroup_root: Some(PathBuf::from(root)),
            ..ResourceLimits::default()
        });
        let bomb = "f() { if [ $1 -gt 0 ]; then f $(($1 - 1)) & f $(($1 - 1)) & fi; \
                    exec sleep 30; }; f 7; wait";
        let r = run(&ex, bomb, Duration::from_secs(30));
        let rep = report(&r);
        let notes = rep.notes.join("\n");
        assert_eq!(rep.tasks, Some(Mechanism::Monitor), "{rep:?}");
        assert!(notes.contains("Read-only file system"), "{notes}");
        assert_eq!(r.limit, Some(Limit::Tasks), "{r:?}");
        return;
    }
    if !(is_root() && cgroup_v1() && Path::new("/usr/bin/unshare").exists()) {
        eprintln!("note: read-only cgroup test skipped: needs root, cgroup v1 and unshare");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for c in ["memory", "pids"] {
        fs::create_dir(root.join(c)).unwrap();
    }
    let script = format!(
        "set -e; for c in memory pids; do mount --bind /sys/fs/cgroup/$c {r}/$c; \
         mount -o remount,bind,ro {r}/$c; done; exec \"$0\" --exact --nocapture \
         a_read_only_cgroup_hierarchy_is_reported_and_the_monitor_holds",
        r = root.display()
    );
    let out = std::process::Command::new("/usr/bin/unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .arg(std::env::current_exe().unwrap())
        .env(RO_ROOT, root)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}

/// Many execs hitting their limit at once are each stopped, and nothing of
/// any of them survives: the executor stays bounded however many run.
#[test]
fn concurrent_execs_each_stopped_at_their_limit() {
    let ex = started(ResourceLimits {
        max_tasks: Some(8),
        ..ResourceLimits::default()
    });
    let marker = format!("sgmany{}", std::process::id());
    // At most 2^5 processes each if the limit fails.
    let bomb = format!(
        "f() {{ if [ $1 -gt 0 ]; then f $(($1 - 1)) & f $(($1 - 1)) & fi; \
         exec -a {marker} sleep 30; }}; f 4; wait"
    );
    let results: Vec<ExecResult> = thread::scope(|s| {
        let runs: Vec<_> = (0..16)
            .map(|_| s.spawn(|| run(&ex, &bomb, Duration::from_secs(30))))
            .collect();
        runs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &results {
        assert_eq!(r.limit, Some(Limit::Tasks), "{r:?}");
        assert!(!r.timed_out, "{r:?}");
    }
    assert!(survivors(&marker).is_empty(), "{:?}", survivors(&marker));
}

/// The cgroup2 mount that shows the whole hierarchy.
fn v2_mount() -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (fields, after) = l.split_once(" - ")?;
        let f: Vec<&str> = fields.split(' ').collect();
        (after.starts_with("cgroup2 ") && f.get(3) == Some(&"/")).then(|| PathBuf::from(f[4]))
    })
}

/// The cgroup v2 path in a `/proc/<pid>/cgroup` text.
fn v2_path(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

/// Every command starts in a cgroup v2 cgroup of its executor's pool (it
/// reads its own `/proc/self/cgroup`: it was never anywhere else), the
/// cgroup is reused by sequential execs, CPU time is read from it, and
/// dropping the executor removes what it made.
#[test]
fn every_command_is_born_in_a_pooled_cgroup_v2_cgroup() {
    if !cgroup_v2() {
        eprintln!("note: cgroup v2 pool test skipped: no cgroup v2 cgroup can be made here");
        return;
    }
    let mount = v2_mount().expect("a cgroup2 mount");
    let ex = started(ResourceLimits {
        max_tasks: Some(64),
        max_cpu_ms: Some(60_000),
        ..ResourceLimits::default()
    });
    let mut ran_in = std::collections::BTreeSet::new();
    let mut last = None;
    for _ in 0..20 {
        let r = run(&ex, "cat /proc/self/cgroup", Duration::from_secs(10));
        assert_eq!(r.exit_code, 0, "{r:?}");
        let text = String::from_utf8_lossy(&r.stdout).into_owned();
        ran_in.insert(v2_path(&text).unwrap_or_else(|| panic!("no v2 line in {text}")));
        last = Some(r);
    }
    let r = last.unwrap();
    assert_eq!(
        report(&r).cpu,
        Some(Mechanism::CgroupV2),
        "{:?}",
        report(&r)
    );
    assert_eq!(report(&r).tasks, Some(expected("pids")), "{:?}", report(&r));
    assert_eq!(
        ran_in.len(),
        1,
        "sequential execs reuse one cgroup: {ran_in:?}"
    );
    let path = ran_in.first().unwrap();
    let slot = mount.join(path.trim_start_matches('/'));
    let executors = slot.parent().unwrap().to_path_buf();
    let name = executors
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with(&format!("sandgate-{}-", std::process::id())),
        "{} is not the executor's",
        executors.display()
    );
    if let Some(parent) = delegated() {
        assert_eq!(executors.parent(), Some(parent.as_path()), "{path}");
    }
    assert!(slot.join("cgroup.procs").exists(), "{}", slot.display());
    // The executor itself was never moved.
    let own = v2_path(&fs::read_to_string("/proc/self/cgroup").unwrap()).unwrap();
    let pool = Path::new(path).parent().unwrap();
    assert!(
        !Path::new(&own).starts_with(pool),
        "the host process was moved into {own}"
    );
    drop(ex);
    assert!(
        !executors.exists(),
        "{} is removed with the executor",
        executors.display()
    );
}

/// A CPU limit held by the cgroup counts what left the tree by `setsid`
/// and what re-forks faster than a sample, and the time is the cgroup's:
/// a process that ended still counts.
#[test]
fn cgroup_v2_cpu_time_counts_every_process_that_was_in_the_cgroup() {
    if !cgroup_v2() {
        eprintln!("note: cgroup v2 CPU test skipped: no cgroup v2 cgroup can be made here");
        return;
    }
    let ex = started(cpu(400));
    // Loops that each end after 150 ms of CPU, one after another: at no
    // sample does a live process hold much, but together they pass 400.
    let cmd =
        "for i in 1 2 3 4 5 6 7 8; do timeout -s KILL 0.15 bash -c 'while :; do :; done'; done; \
               setsid bash -c 'while :; do :; done' & wait";
    let began = Instant::now();
    let r = run(&ex, cmd, Duration::from_secs(20));
    eprintln!(
        "serial loops: exit {}, limit {:?} after {:?}",
        r.exit_code,
        r.limit,
        began.elapsed()
    );
    assert_eq!(
        report(&r).cpu,
        Some(Mechanism::CgroupV2),
        "{:?}",
        report(&r)
    );
    assert_eq!(r.limit, Some(Limit::Cpu), "{r:?}");
    assert!(began.elapsed() < Duration::from_secs(10), "{r:?}");
}

/// A delegated parent named by the host is used (as root here: made for
/// the test beneath the v2 mount, holding no process), and one that is
/// not a cgroup v2 directory is refused with a note while the limits are
/// still held.
#[test]
fn a_named_cgroup_v2_parent_is_used_and_a_wrong_one_reported() {
    let dir = tempfile::tempdir().unwrap();
    let ex = started(ResourceLimits {
        max_cpu_ms: Some(60_000),
        cgroup_parent: Some(dir.path().to_path_buf()),
        ..ResourceLimits::default()
    });
    let r = run(&ex, "true", Duration::from_secs(10));
    let rep = report(&r);
    assert!(
        rep.notes
            .join("\n")
            .contains("is not a cgroup v2 directory"),
        "{rep:?}"
    );
    assert_eq!(rep.cpu, Some(Mechanism::Monitor), "{rep:?}");
    drop(ex);

    let Some(mount) = v2_mount().filter(|_| is_root()) else {
        eprintln!("note: named parent half skipped: needs root and a cgroup2 mount");
        return;
    };
    let parent = mount.join(format!("sandgate-test-{}", std::process::id()));
    fs::create_dir(&parent).unwrap();
    let ex = started(ResourceLimits {
        max_cpu_ms: Some(60_000),
        cgroup_parent: Some(parent.clone()),
        ..ResourceLimits::default()
    });
    let r = run(&ex, "cat /proc/self/cgroup", Duration::from_secs(10));
    let text = String::from_utf8_lossy(&r.stdout).into_owned();
    let ran_in = v2_path(&text);
    let rep = report(&r).clone();
    drop(ex);
    let left: Vec<_> = fs::read_dir(&parent)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    let _ = fs::remove_dir(&parent);
    assert_eq!(rep.cpu, Some(Mechanism::CgroupV2), "{rep:?}");
    let want = format!("/{}/", parent.strip_prefix(&mount).unwrap().display());
    assert!(
        ran_in.as_deref().is_some_and(|p| p.starts_with(&want)),
        "ran in {ran_in:?}, not beneath {want}"
    );
    assert!(left.is_empty(), "left beneath the parent: {left:?}");
}

/// A memfd's pages that no process maps are in no process's resident
/// set: a cgroup charges them to the command, the monitor cannot see them
/// (SECURITY.md lists the gap).
#[test]
fn what_a_memfd_holds_counts_where_a_cgroup_holds_memory() {
    if !python("what_a_memfd_holds_counts_where_a_cgroup_holds_memory") {
        return;
    }
    let ex = started(memory(128 * MIB));
    // The guard: 300 MiB, written and never mapped.
    let cmd = format!(
        "{PYTHON} -c 'import os, time
fd = os.memfd_create(\"held\")
for i in range(300): os.write(fd, b\"x\" * (1 << 20))
print(\"written\", flush=True)
time.sleep(2)
print(\"survived\")'"
    );
    let r = run(&ex, &cmd, Duration::from_secs(30));
    let by = report(&r).memory;
    eprintln!(
        "memfd: memory held by {by:?}: exit {}, limit {:?}",
        r.exit_code, r.limit
    );
    if by == Some(Mechanism::Monitor) {
        eprintln!("note: the monitor does not count a memfd's unmapped pages (SECURITY.md)");
        return;
    }
    assert_eq!(r.limit, Some(Limit::Memory), "{r:?}");
    assert!(
        !String::from_utf8_lossy(&r.stdout).contains("survived"),
        "{r:?}"
    );
}

/// Memory a command holds in the kernel rather than in a process: System
/// V shared memory no process attaches (in namespaces, where the command
/// has an IPC namespace of its own; on the floor `shmget` is refused),
/// pipes and UNIX socket pairs full of data nobody reads. A cgroup charges
/// each to the command; the monitor, which sums resident sets, sees none
/// of them, and a command holds 128 MiB in each under a 64 MiB limit
/// until its timeout (SECURITY.md lists the gap): this test pins that.
#[test]
fn kernel_memory_counts_where_a_cgroup_holds_memory_and_escapes_the_monitor() {
    if !python("kernel_memory_counts_where_a_cgroup_holds_memory_and_escapes_the_monitor") {
        return;
    }
    let ex = started(memory(64 * MIB));
    let first = run(&ex, "true", Duration::from_secs(30));
    // Each holder's guard: 128 MiB, then a pause the limit must not see
    // the end of.
    let shm = "import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
for i in range(8):
    sid = libc.shmget(0, 16 << 20, 0o1600)
    assert sid >= 0, ctypes.get_errno()
    p = libc.shmat(sid, None, 0)
    ctypes.memset(p, 1, 16 << 20)
    libc.shmdt(ctypes.c_void_p(p))";
    let pipes = "import os, fcntl
total = 0; held = []
while total < 128 << 20:
    r, w = os.pipe()
    try: fcntl.fcntl(w, 1031, 1 << 20)
    except OSError: pass
    os.set_blocking(w, False)
    try:
        while total < 128 << 20: total += os.write(w, b\"x\" * 65536)
    except BlockingIOError: pass
    held.append((r, w))";
    let sockets = "import socket
total = 0; held = []
while total < 128 << 20:
    a, b = socket.socketpair(); a.setblocking(False)
    try:
        while total < 128 << 20: total += a.send(b\"x\" * 65536)
    except BlockingIOError: pass
    held.append((a, b))";
    let mut holders = vec![("pipes", pipes), ("sockets", sockets)];
    if first.confined.namespaces {
        holders.push(("shm", shm));
    }
    for (name, code) in holders {
        let cmd = format!(
            "{PYTHON} -c '{code}
import time
print(\"held\", flush=True)
time.sleep(2)
print(\"survived\")'"
        );
        let r = run(&ex, &cmd, Duration::from_secs(30));
        let by = report(&r).memory;
        let out = String::from_utf8_lossy(&r.stdout).into_owned();
        eprintln!(
            "{name}: memory held by {by:?}: exit {}, limit {:?}, stdout {out:?}",
            r.exit_code, r.limit
        );
        assert!(!r.timed_out, "{name}: {r:?}");
        if by == Some(Mechanism::Monitor) {
            assert_eq!(out, "held\nsurvived\n", "{name}: {r:?}");
            assert_eq!(r.limit, None, "{name}: {r:?}");
        } else {
            assert_eq!(r.limit, Some(Limit::Memory), "{name}: {r:?}");
            assert!(!out.contains("survived"), "{name}: {r:?}");
        }
    }
}

/// Whatever the host grants, the command's `RLIMIT_RTPRIO` and
/// `RLIMIT_NICE` are 0, hard and soft, and the report says so (the test
/// below shows what they would let it do).
#[test]
fn the_commands_rtprio_and_nice_limits_are_zero() {
    let ex = started(cpu(2000));
    let r = run(
        &ex,
        "grep -E \"^Max (realtime|nice) priority\" /proc/self/limits",
        Duration::from_secs(30),
    );
    let out = String::from_utf8_lossy(&r.stdout).into_owned();
    let limits = &r.confined.rlimits;
    eprintln!("exit {}, stdout {out:?}, rlimits {limits:?}", r.exit_code);
    assert_eq!(r.exit_code, 0, "{r:?}");
    let fields: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(fields.len(), 2, "{out:?}");
    for f in fields {
        assert_eq!(f[3..5], ["0", "0"], "{out:?}");
    }
    assert!(
        limits.contains(&("RLIMIT_RTPRIO".to_owned(), 0)),
        "{limits:?}"
    );
    assert!(
        limits.contains(&("RLIMIT_NICE".to_owned(), 0)),
        "{limits:?}"
    );
}

/// A host may grant its user real-time scheduling or a higher priority
/// through `RLIMIT_RTPRIO` and `RLIMIT_NICE` (audio groups, services with
/// `LimitRTPRIO=`); without `CAP_SYS_NICE` those are what let a process
/// make itself `SCHED_FIFO` or lower its nice value. A command does not
/// inherit them: a real-time busy loop would starve the host's own work
/// on its CPUs, whatever its CPU limit.
#[test]
fn a_command_cannot_take_real_time_scheduling_or_a_higher_priority_from_the_hosts_rlimits() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    if !python(
        "a_command_cannot_take_real_time_scheduling_or_a_higher_priority_from_the_hosts_rlimits",
    ) {
        return;
    }
    for (resource, value) in [(Resource::Rtprio, 10), (Resource::Nice, 30)] {
        let now = getrlimit(resource);
        if now.current.is_some_and(|v| v >= value) {
            continue;
        }
        let raised = Rlimit {
            current: Some(value),
            maximum: now.maximum.map(|m| m.max(value)),
        };
        if let Err(e) = setrlimit(resource, raised) {
            eprintln!(
                "note: skipped: the host grants this user no {resource:?} of {value} ({e}); \
                 run it under `prlimit --rtprio=10 --nice=30`"
            );
            return;
        }
    }
    let probe = "import os
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)); print(\"fifo granted\")
except OSError as e:
    print(\"fifo\", os.strerror(e.errno))
try:
    os.setpriority(os.PRIO_PROCESS, 0, -5); print(\"nice granted\")
except OSError as e:
    print(\"nice\", os.strerror(e.errno))";
    // The control: the host's own processes may.
    let control = std::process::Command::new(PYTHON)
        .args(["-c", probe])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&control.stdout),
        "fifo granted\nnice granted\n",
        "{control:?}"
    );
    let ex = started(cpu(2000));
    let r = run(
        &ex,
        &format!("{PYTHON} -c '{probe}'"),
        Duration::from_secs(30),
    );
    let limits = &r.confined.rlimits;
    assert!(
        limits.contains(&("RLIMIT_RTPRIO".to_owned(), 0)),
        "{limits:?}"
    );
    assert!(
        limits.contains(&("RLIMIT_NICE".to_owned(), 0)),
        "{limits:?}"
    );
    let out = String::from_utf8_lossy(&r.stdout).into_owned();
    eprintln!("exit {}, stdout {out:?}", r.exit_code);
    assert_eq!(r.exit_code, 0, "{r:?}");
    assert!(out.starts_with("fifo Operation not permitted\n"), "{r:?}");
    assert!(out.ends_with("nice Permission denied\n"), "{r:?}");
}

/// A child whose parent ignores SIGCHLD is reaped by the kernel, and its
/// CPU time is added to no process: a cgroup counts it, the monitor does
/// not see children shorter than a sample (SECURITY.md lists the gap).
#[test]
fn the_cpu_time_of_children_reaped_by_the_kernel_counts_where_a_cgroup_holds_it() {
    let ex = started(cpu(500));
    // Children of 10 ms of CPU each, for 4 s (the guard: the timeout).
    let cmd = format!(
        "{PYTHON} -c 'import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
end = time.time() + 4
while time.time() < end:
    if os.fork() == 0:
        t = time.process_time()
        while time.process_time() - t < 0.01: pass
        os._exit(0)
    time.sleep(0.004)
print(\"done\")'"
    );
    let began = Instant::now();
    let r = run(&ex, &cmd, Duration::from_secs(10));
    let by = report(&r).cpu;
    eprintln!(
        "autoreaped: cpu held by {by:?}: exit {}, limit {:?} after {:?}",
        r.exit_code,
        r.limit,
        began.elapsed()
    );
    if by == Some(Mechanism::Monitor) {
        eprintln!("note: the monitor does not count children the kernel reaps (SECURITY.md)");
        return;
    }
    assert_eq!(r.limit, Some(Limit::Cpu), "{r:?}");
    assert!(began.elapsed() < Duration::from_secs(3), "{r:?}");
}

/// What a command leaves on a tmpfs (a write root or `TMPDIR` there,
/// on the floor) stays charged to the cgroup it ran in after it ends.
/// A later command of the same executor must not inherit that charge as
/// if it were its own memory: with a pooled cgroup reused as it was, the
/// next command was ended at a fraction of its limit.
#[test]
fn what_an_earlier_command_left_on_a_tmpfs_does_not_count_for_the_next() {
    if !python("what_an_earlier_command_left_on_a_tmpfs_does_not_count_for_the_next") {
        return;
    }
    let shm = Path::new("/dev/shm");
    if expected("memory") == Mechanism::Monitor || !shm.is_dir() {
        eprintln!("note: tmpfs charge test skipped: no cgroup holds memory here");
        return;
    }
    let root = shm.join(format!("sgcharge{}", std::process::id()));
    fs::create_dir_all(&root).unwrap();
    let mut c = config(memory(128 * MIB));
    c.namespaces = false;
    c.confine = ConfineSpec {
        write_dirs: vec![root.clone()],
        ..ConfineSpec::default()
    };
    let ex = LocalShellExecutor::new(c);
    ex.start().unwrap();
    // 96 MiB left on the tmpfs: under the limit while it was written.
    let left = run(
        &ex,
        &format!(
            "head -c 100663296 /dev/zero > {}/kept && echo written",
            root.display()
        ),
        Duration::from_secs(30),
    );
    assert_eq!(left.stdout, b"written\n", "{left:?}");
    assert_eq!(left.limit, None, "{left:?}");
    // The next command allocates 64 MiB of its own: well under 128 MiB.
    let next = run(&ex, &allocate(64, 0), Duration::from_secs(30));
    let _ = fs::remove_dir_all(&root);
    eprintln!(
        "memory held by {:?}: exit {}, limit {:?}, reached {} MiB",
        report(&next).memory,
        next.exit_code,
        next.limit,
        last_total(&next.stdout)
    );
    assert_eq!(next.limit, None, "{next:?}");
    assert_eq!(next.exit_code, 0, "{next:?}");
    assert_eq!(last_total(&next.stdout), 64);
}

/// Set for the child test process that holds memory of its own.
const HOST_HOLDS: &str = "SANDGATE_TEST_HOST_HOLDS";

/// In namespaces the keeper's child is the namespace's PID 1: sandgate's
/// own process, which shares the executor's memory (`clone(CLONE_VM)`).
/// Where the monitor holds the limits it is neither a task of the command
/// nor its memory: a command of two tasks runs under `max_tasks = 2`, and
/// a host process that holds 192 MiB itself still runs a command under
/// `max_memory_bytes = 128 MiB`.
#[test]
fn the_namespace_pid_1_and_the_host_memory_are_not_the_commands() {
    let ex = started(ResourceLimits {
        max_tasks: Some(2),
        ..ResourceLimits::default()
    });
    let first = run(&ex, "true", Duration::from_secs(30));
    if !first.confined.namespaces || expected("pids") != Mechanism::Monitor {
        eprintln!("note: PID 1 test skipped: no namespaces, or a cgroup holds the limits");
        return;
    }
    // The shell and one child: two tasks.
    let r = run(
        &ex,
        "sleep 0.3 & wait; echo survived",
        Duration::from_secs(30),
    );
    assert_eq!(r.limit, None, "{r:?}");
    assert_eq!(r.stdout, b"survived\n", "{r:?}");

    // Memory, in a child test process (the memory it holds would count
    // for no other test's executor there).
    let out = std::process::Command::new("/proc/self/exe")
        .args([
            "--exact",
            "a_host_holding_memory_helper",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOST_HOLDS, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("HELPER: limit None, said ran"), "{text}");
}

#[test]
#[ignore = "run by the_namespace_pid_1_and_the_host_memory_are_not_the_commands"]
fn a_host_holding_memory_helper() {
    if std::env::var_os(HOST_HOLDS).is_none() {
        return;
    }
    // 192 MiB resident in this process (every page written).
    let held = vec![1u8; 192 << 20];
    let ex = started(memory(128 * MIB));
    let r = run(&ex, "sleep 0.3; echo ran", Duration::from_secs(30));
    println!(
        "HELPER: limit {:?}, said {}",
        r.limit,
        String::from_utf8_lossy(&r.stdout).trim()
    );
    std::hint::black_box(&held);
}

/// A task limit above what the kernel's `pids.max` takes (4,194,304, the
/// most pids a system can have) is one no tree can reach: it must not
/// cost the command its cgroup, for tasks nor for memory.
#[test]
fn a_task_limit_beyond_every_pid_keeps_the_cgroup() {
    let ex = started(ResourceLimits {
        max_memory_bytes: Some(128 * MIB),
        max_tasks: Some(5_000_000),
        ..ResourceLimits::default()
    });
    let r = run(&ex, "echo ran", Duration::from_secs(30));
    assert_eq!(r.stdout, b"ran\n", "{r:?}");
    assert_eq!(
        report(&r).memory,
        Some(expected("memory")),
        "{:?}",
        report(&r)
    );
    assert_eq!(report(&r).tasks, Some(expected("pids")), "{:?}", report(&r));
}
