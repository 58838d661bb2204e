//! Resource limits of one exec: memory, tasks (processes and threads) and
//! CPU time of the command's own tree, and what says which limit ended it.
//!
//! Each limit is held by the best mechanism the host offers, chosen once
//! when the executor starts and reported with every result
//! ([`LimitsReport`], the `limits` member of the confinement report):
//!
//! - **cgroup v2**, where the host delegates a cgroup
//!   ([`ResourceLimits::cgroup_parent`]): a parent cgroup per executor and
//!   beneath it a pool of child cgroups, each with the limits written once
//!   and reused by one exec at a time. The shell is started in its cgroup
//!   by `clone3(CLONE_INTO_CGROUP)`, so nothing of the command ever runs
//!   outside it. `memory.max` (no swap, `memory.oom.group`) and
//!   `pids.max` where the parent offers those controllers; CPU time from
//!   `cpu.stat`, which every v2 cgroup has, read every sample: it counts
//!   every process that was ever in the cgroup, ended or not.
//! - **cgroup v1** (`memory` and `pids` controllers), for what v2 does not
//!   hold, when the executor runs as root on a v1 hierarchy: the same
//!   pool beneath the executor's own cgroup of each controller. The shell
//!   places itself into its cgroups before `execve`.
//!
//!   With either, the kernel enforces the limits (the memory controller's
//!   OOM killer, `fork` failing at `pids.max`); the executor reads the
//!   `oom_kill` and `max` events every sample and ends the whole tree at
//!   the first.
//! - **the monitor** otherwise: every 20 ms
//!   the executor walks the command's tree in `/proc` and sums resident
//!   memory, threads and CPU time (the tree's live processes, and what
//!   reaped ones used), and ends the tree past a limit. Per-process
//!   rlimits back it up between samples: `RLIMIT_DATA` (memory;
//!   `RLIMIT_AS` is not used, since runtimes that reserve address space
//!   would break) and `RLIMIT_CPU` (a process past it gets `SIGXCPU`).
//!
//! CPU time is held by a v2 cgroup's `cpu.stat` where there is one, else
//! by the monitor (cgroup v1's `cpuacct` is not used); `RLIMIT_CPU` is
//! the backstop either way.
//!
//! # Limits of the mechanisms
//!
//! - The monitor samples: between two samples a tree may overshoot; the
//!   rlimits bound a single process, not the tree.
//! - Resident memory is summed per process, so pages shared between
//!   processes count more than once: the monitor errs towards stopping.
//! - A process that fails an allocation because of `RLIMIT_DATA` and exits
//!   is not attributed: the result's `limit` stays empty.
//! - `RLIMIT_NPROC` (set by the caller through
//!   [`ConfineSpec::max_processes`](crate::confine::ConfineSpec)) counts
//!   every process of the real user, not the command's tree, and the
//!   kernel does not enforce it for root; `max_tasks` does not change it.

use std::path::PathBuf;

use serde::Serialize;

/// A limit that ended a command, named in the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The tree's memory reached `max_memory_bytes`.
    Memory,
    /// The tree's processes and threads reached `max_tasks`.
    Tasks,
    /// The tree's CPU time reached `max_cpu_ms`.
    Cpu,
    /// The output passed `max_output_bytes` (the rest was dropped).
    Output,
    /// The timeout ended the command.
    Timeout,
    /// A write went past the largest file the command may write
    /// (`RLIMIT_FSIZE`, the policy's `fs.max_write_bytes`), and the
    /// command ended of the `SIGXFSZ` it got.
    FileSize,
}

impl Limit {
    /// The word used in results: `memory`, `tasks`, `cpu`, `output`,
    /// `timeout`, `file_size`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Limit::Memory => "memory",
            Limit::Tasks => "tasks",
            Limit::Cpu => "cpu",
            Limit::Output => "output",
            Limit::Timeout => "timeout",
            Limit::FileSize => "file_size",
        }
    }
}

/// The resource limits of every exec of an executor. `None` leaves a
/// resource unlimited.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Memory of the command's tree, in bytes.
    pub max_memory_bytes: Option<u64>,
    /// Processes and threads of the command's tree.
    pub max_tasks: Option<u64>,
    /// CPU time (user and system) of the command's tree, in milliseconds.
    pub max_cpu_ms: Option<u64>,
    /// The limits that must be held: starting the executor fails with
    /// `E_CONFINE_UNAVAILABLE` when one of them (set above) cannot be.
    pub required: Vec<Limit>,
    /// A cgroup v2 directory the host delegates to the executor's user and
    /// that holds no process (systemd: a unit with `Delegate=yes` and
    /// `DelegateSubgroup=` for its own processes). Each executor makes
    /// `sandgate-<pid>-<n>/` beneath it, enables the `memory` and `pids`
    /// controllers it offers, and starts every command in a cgroup of its
    /// own there. `None`: the `SANDGATE_CGROUP_PARENT` environment
    /// variable, else the executor's own cgroup (where controllers are
    /// usable only if already handed down).
    pub cgroup_parent: Option<PathBuf>,
    /// Where the cgroup hierarchies are mounted (`/sys/fs/cgroup` when
    /// `None`; a cgroup2 mount is looked for at or below it). Only tests
    /// set it, to play a host whose cgroups cannot be created.
    #[doc(hidden)]
    pub cgroup_root: Option<PathBuf>,
}

impl ResourceLimits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.max_memory_bytes.is_some() || self.max_tasks.is_some() || self.max_cpu_ms.is_some()
    }
}

/// What holds a limit. More mechanisms may come: match with a wildcard.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// A cgroup v1 controller (`memory` or `pids`) of the exec's own
    /// cgroup.
    CgroupV1,
    /// The exec's own cgroup v2 cgroup: its `memory` or `pids` controller,
    /// or its `cpu.stat` for CPU time.
    CgroupV2,
    /// The executor's sampling monitor, with rlimit backstops.
    Monitor,
}

/// Which mechanism holds each limit, reported with every result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LimitsReport {
    /// `max_memory_bytes` in force.
    pub max_memory_bytes: Option<u64>,
    /// What holds it.
    pub memory: Option<Mechanism>,
    /// `max_tasks` in force.
    pub max_tasks: Option<u64>,
    /// What holds it.
    pub tasks: Option<Mechanism>,
    /// `max_cpu_ms` in force.
    pub max_cpu_ms: Option<u64>,
    /// What holds it.
    pub cpu: Option<Mechanism>,
    /// Why a better mechanism is not used, and other gaps.
    pub notes: Vec<String>,
}

/// How an executor holds its limits, decided once at start.
#[derive(Debug, Default)]
pub(crate) struct Setup {
    /// The cgroups, when they hold any limit.
    pub pool: Option<crate::cgroup::Pool>,
    /// The limits the monitor checks by walking `/proc`.
    pub walked: crate::monitor::Walked,
    /// RLIMIT_DATA and RLIMIT_CPU (seconds) to set in each child.
    pub data_bytes: Option<u64>,
    pub cpu_secs: Option<u64>,
    pub report: LimitsReport,
}

/// Decides how each limit is held: cgroup v1 as root for memory and
/// tasks, the monitor otherwise (and always for CPU time).
///
/// # Errors
///
/// A limit in `required` that no mechanism can hold, in words.
pub(crate) fn setup(limits: &ResourceLimits) -> Result<Setup, String> {
    let mut setup = Setup::default();
    if !limits.any() {
        return Ok(setup);
    }
    let report = &mut setup.report;
    report.max_memory_bytes = limits.max_memory_bytes;
    report.max_tasks = limits.max_tasks;
    report.max_cpu_ms = limits.max_cpu_ms;

    let root = limits
        .cgroup_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"));
    // A test that plays a host without cgroups (`cgroup_root`) is not
    // handed the environment's delegated parent.
    let parent = limits.cgroup_parent.clone().or_else(|| {
        limits.cgroup_root.is_none().then_some(())?;
        std::env::var_os(crate::cgroup::PARENT_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let (pool, mut notes) = crate::cgroup::Pool::new(&crate::cgroup::Wanted {
        root: &root,
        v2_parent: parent.as_deref(),
        memory: limits.max_memory_bytes,
        tasks: limits.max_tasks,
        cpu_ms: limits.max_cpu_ms,
    });
    setup.pool = pool;
    report.notes.append(&mut notes);
    let by_cgroup = |limit| {
        setup.pool.as_ref().and_then(|p| {
            p.holds(limit).then(|| {
                if p.by_v2(limit) {
                    Mechanism::CgroupV2
                } else {
                    Mechanism::CgroupV1
                }
            })
        })
    };
    let (memory_cgroup, tasks_cgroup, cpu_cgroup) = (
        by_cgroup(Limit::Memory),
        by_cgroup(Limit::Tasks),
        by_cgroup(Limit::Cpu),
    );

    // The monitor needs to read the tree's `/proc/<pid>/stat`.
    let monitor = crate::proctree::stat_of(std::process::id() as i32).is_some();
    if !monitor {
        report
            .notes
            .push("/proc cannot be read: the sampling monitor cannot run".to_owned());
    }
    let mechanism = |set: bool, cgroup: Option<Mechanism>| match (set, cgroup, monitor) {
        (false, _, _) => None,
        (true, Some(m), _) => Some(m),
        (true, None, true) => Some(Mechanism::Monitor),
        (true, None, false) => None,
    };
    report.memory = mechanism(limits.max_memory_bytes.is_some(), memory_cgroup);
    report.tasks = mechanism(limits.max_tasks.is_some(), tasks_cgroup);
    report.cpu = mechanism(limits.max_cpu_ms.is_some(), cpu_cgroup);

    if report.memory == Some(Mechanism::Monitor) {
        setup.walked.memory_bytes = limits.max_memory_bytes;
        setup.data_bytes = limits.max_memory_bytes;
        report.notes.push(
            "memory is sampled every 20 ms (resident pages of each process of the tree), \
             with RLIMIT_DATA on each process between samples"
                .to_owned(),
        );
    }
    if report.tasks == Some(Mechanism::Monitor) {
        setup.walked.tasks = limits.max_tasks;
        report
            .notes
            .push("tasks are sampled every 20 ms: a tree may overshoot between samples".to_owned());
    }
    if let Some(ms) = limits.max_cpu_ms {
        if monitor && cpu_cgroup.is_none() {
            setup.walked.cpu_ms = Some(ms);
        }
        // Whole seconds, rounded up: a backstop for each process.
        setup.cpu_secs = Some(ms.div_ceil(1000).max(1));
    }

    let unheld: Vec<&str> = [
        (
            Limit::Memory,
            limits.max_memory_bytes.is_some(),
            report.memory,
        ),
        (Limit::Tasks, limits.max_tasks.is_some(), report.tasks),
        (Limit::Cpu, limits.max_cpu_ms.is_some(), report.cpu),
    ]
    .into_iter()
    .filter(|(limit, set, by)| *set && by.is_none() && limits.required.contains(limit))
    .map(|(limit, _, _)| limit.as_str())
    .collect();
    if !unheld.is_empty() {
        return Err(format!(
            "resource limits are required but cannot be held: {} ({})",
            unheld.join(", "),
            report.notes.join("; ")
        ));
    }
    Ok(setup)
}
