//! The executor stays bounded: a hundred commands at once, each stopped at
//! its memory or task limit, leave the host's task count and the memory
//! held by processes and the kernel where they were, and nothing they
//! started survives.
//!
//! Alone in its test binary, so that no other test's processes or threads
//! count. Each attack has a guard of its own (an address-space `ulimit`, a
//! fork bomb of bounded depth, a timeout), as in the limits suite.

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use sandgate_shellexec::exec::ExecResult;
use sandgate_shellexec::limits::{Limit, Mechanism, ResourceLimits};

// Not every suite uses every helper.
#[allow(dead_code)]
mod limits_support;

use limits_support::*;

/// Every task (process or thread) on the host: the second number of the
/// fourth field of `/proc/loadavg`.
fn host_tasks() -> u64 {
    let text = fs::read_to_string("/proc/loadavg").unwrap();
    let field = text.split_whitespace().nth(3).unwrap();
    field.split('/').nth(1).unwrap().parse().unwrap()
}

/// The host's memory held by processes and the kernel on their behalf,
/// in bytes: anonymous pages, shared memory (tmpfs), unreclaimable slab,
/// kernel stacks and page tables, from `/proc/meminfo`: what a command
/// left running, a tmpfs left mounted or kernel objects left behind would
/// keep. Not `MemFree` or `MemAvailable`: on a virtual machine that
/// reports free pages to its host (virtio-balloon), pages freed in bulk
/// leave the free count for tens of seconds while they are reported, which
/// here looked like 200-400 MiB gone after a run that left nothing.
fn mem_in_use() -> u64 {
    let text = fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| {
            [
                "AnonPages",
                "Shmem",
                "SUnreclaim",
                "KernelStack",
                "PageTables",
            ]
            .contains(k)
        })
        .map(|(_, v)| v.split_whitespace().next().unwrap().parse::<u64>().unwrap())
        .sum();
    kib * 1024
}

/// Hands the test process's free heap back to the kernel. The hundred
/// threads that ran the commands leave their allocator arenas holding
/// freed memory (19-57 MiB here, more on a host with more CPUs); it is
/// free, but counts as anonymous pages until it is returned. What the
/// commands, the executor or the kernel still hold is not touched.
fn return_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free pages of the allocator's own
    // arenas; it takes no pointer and leaves every live allocation alone.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn counts() -> (u64, u64) {
    return_free_heap();
    (host_tasks(), mem_in_use())
}

const EXECS: usize = 100;

#[test]
fn a_hundred_execs_stopped_at_their_limits_leave_the_host_as_it_was() {
    if !python("a_hundred_execs_stopped_at_their_limits_leave_the_host_as_it_was") {
        return;
    }
    let ex = started(ResourceLimits {
        max_memory_bytes: Some(64 * MIB),
        max_tasks: Some(16),
        ..ResourceLimits::default()
    });
    // The executor's own lasting state (its cgroups, its first command's
    // plan) is made before the counts are taken.
    let warm = run(&ex, "true", Duration::from_secs(30));
    assert_eq!(warm.exit_code, 0, "{warm:?}");
    let (tasks_before, mem_before) = counts();

    let marker = format!("sgbounded{}", std::process::id());
    // Half allocate: 16 MiB at a time up to 160 MiB under a 512 MiB
    // address-space guard (50 × 160 MiB at most if the limit failed).
    let hog = format!("ulimit -v 524288; {} {marker}", allocate(160, 5));
    // Half fork: at most 2^6 processes each if the limit failed.
    let bomb = format!(
        "f() {{ if [ $1 -gt 0 ]; then f $(($1 - 1)) & f $(($1 - 1)) & fi; \
         exec -a {marker} sleep 30; }}; f 5; wait"
    );
    let results: Vec<(bool, ExecResult)> = thread::scope(|s| {
        let runs: Vec<_> = (0..EXECS)
            .map(|i| {
                let (ex, hog, bomb) = (&ex, &hog, &bomb);
                s.spawn(move || {
                    let memory = i % 2 == 0;
                    let cmd = if memory { hog } else { bomb };
                    (memory, run(ex, cmd, Duration::from_secs(60)))
                })
            })
            .collect();
        runs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (memory, r) in &results {
        assert!(!r.timed_out, "{r:?}");
        if *memory {
            let got = last_total(&r.stdout);
            assert!(got < 64, "a command got {got} MiB: {r:?}");
            assert_ne!(r.exit_code, 0, "{r:?}");
            // Under the monitor RLIMIT_DATA may refuse the allocation first
            // (MemoryError, not attributed), as in the limits suite.
            let refused = r.limit.is_none()
                && report(r).memory == Some(Mechanism::Monitor)
                && String::from_utf8_lossy(&r.stderr).contains("MemoryError");
            assert!(r.limit == Some(Limit::Memory) || refused, "{r:?}");
        } else {
            assert_eq!(r.limit, Some(Limit::Tasks), "{r:?}");
        }
    }
    assert!(survivors(&marker).is_empty(), "{:?}", survivors(&marker));

    // What the commands held is given back: the tasks at once once they
    // are reaped, the memory once the kernel has freed it.
    let slack_tasks = 8;
    // Kernel slab and the test's own live heap move by a few MiB between
    // counts (7-17 MiB here); one command's hog left running would hold
    // 64 MiB, a hundred commands' leftovers far more.
    let slack_mem = 32 * MIB;
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut tasks, mut mem) = counts();
    while (tasks > tasks_before + slack_tasks || mem > mem_before + slack_mem)
        && Instant::now() < deadline
    {
        thread::sleep(Duration::from_millis(100));
        (tasks, mem) = counts();
    }
    eprintln!(
        "memory held by {:?}, tasks by {:?}: host tasks {tasks_before} -> {tasks}, \
         memory in use {} -> {} MiB",
        report(&results[0].1).memory,
        report(&results[1].1).tasks,
        mem_before / MIB,
        mem / MIB
    );
    assert!(
        tasks <= tasks_before + slack_tasks,
        "host tasks went from {tasks_before} to {tasks}"
    );
    assert!(
        mem <= mem_before + slack_mem,
        "the host's memory in use went from {} to {} MiB",
        mem_before / MIB,
        mem / MIB
    );
}
