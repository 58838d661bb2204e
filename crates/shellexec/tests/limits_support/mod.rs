//! What the limits suites share: an executor with given limits, a run
//! with a timeout, the allocation and fork-bomb commands' helpers, and the
//! mechanism each limit must be held by on this host.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sandgate_shellexec::confine::{ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{
    ExecConfig, ExecOptions, ExecResult, LocalShellExecutor, ShellExecutor,
};
use sandgate_shellexec::limits::{LimitsReport, Mechanism, ResourceLimits};

pub const PYTHON: &str = "/usr/bin/python3";
pub const MIB: u64 = 1 << 20;

pub fn config(limits: ResourceLimits) -> ExecConfig {
    ExecConfig {
        shell: PathBuf::from("/bin/bash"),
        default_timeout: Duration::from_secs(60),
        max_output_bytes: 1 << 20,
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec::default(),
        limits,
        grace: Duration::from_millis(300),
        host_env: Some(vec![("PATH".into(), "/usr/bin:/bin".into())]),
        ..ExecConfig::default()
    }
}

pub fn started(limits: ResourceLimits) -> LocalShellExecutor {
    let ex = LocalShellExecutor::new(config(limits));
    ex.start().unwrap();
    ex
}

pub fn run(ex: &LocalShellExecutor, command: &str, timeout: Duration) -> ExecResult {
    ex.exec(
        command,
        ExecOptions {
            timeout: Some(timeout),
            ..ExecOptions::default()
        },
    )
    .unwrap()
}

pub fn report(r: &ExecResult) -> &LimitsReport {
    r.confined.limits.as_ref().expect("a limits report")
}

pub fn memory(bytes: u64) -> ResourceLimits {
    ResourceLimits {
        max_memory_bytes: Some(bytes),
        ..ResourceLimits::default()
    }
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Whether this host gives root cgroup v1 memory and pids hierarchies.
pub fn cgroup_v1() -> bool {
    Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists()
        && Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists()
}

/// Whether this process's executors get a cgroup v2 cgroup per exec: a
/// delegated parent named by `SANDGATE_CGROUP_PARENT` (as `cargo xtask
/// unprivileged` sets up), or root beneath its own cgroup on a host with a
/// cgroup2 mount.
pub fn cgroup_v2() -> bool {
    let own = fs::read_to_string("/proc/self/cgroup").is_ok_and(|t| t.contains("0::/"));
    let mounted =
        fs::read_to_string("/proc/self/mountinfo").is_ok_and(|t| t.contains(" - cgroup2 "));
    own && mounted && (delegated().is_some() || is_root())
}

/// The delegated cgroup v2 parent, when one is named.
pub fn delegated() -> Option<PathBuf> {
    std::env::var_os("SANDGATE_CGROUP_PARENT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Whether the delegated parent offers `controller` (the executor's own
/// cgroup hands none down unless told to).
pub fn v2_offers(controller: &str) -> bool {
    delegated().is_some_and(|p| {
        fs::read_to_string(p.join("cgroup.controllers"))
            .is_ok_and(|t| t.split_whitespace().any(|c| c == controller))
    })
}

/// What must hold a memory or task limit here: v2 where its controller is
/// offered, v1 as root, else the monitor.
pub fn expected(controller: &str) -> Mechanism {
    if cgroup_v2() && v2_offers(controller) {
        Mechanism::CgroupV2
    } else if is_root() && cgroup_v1() {
        Mechanism::CgroupV1
    } else {
        Mechanism::Monitor
    }
}

/// What must hold the CPU limit here.
pub fn expected_cpu() -> Mechanism {
    if cgroup_v2() {
        Mechanism::CgroupV2
    } else {
        Mechanism::Monitor
    }
}

pub fn python(test: &str) -> bool {
    if Path::new(PYTHON).exists() {
        return true;
    }
    eprintln!("note: {test} skipped: {PYTHON} not found");
    false
}

/// Processes whose command line holds `marker`.
pub fn survivors(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(marker) && entry.file_name() != "self" {
            found.push(format!("{:?}: {text}", entry.file_name()));
        }
    }
    found
}

/// A Python program that allocates (and touches) 16 MiB at a time up to
/// `total` MiB, printing the running total after each step.
pub fn allocate(total_mib: u64, step_ms: u64) -> String {
    format!(
        "{PYTHON} -c 'import sys, time\n\
         chunks = []\n\
         for i in range({n}):\n    \
           chunks.append(bytearray(b\"x\") * (16 << 20))\n    \
           print((i + 1) * 16, flush=True)\n    \
           time.sleep({s})\n'",
        n = total_mib / 16,
        s = step_ms as f64 / 1000.0
    )
}

pub fn last_total(stdout: &[u8]) -> u64 {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .max()
        .unwrap_or(0)
}
