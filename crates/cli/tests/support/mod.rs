//! What more than one of the CLI's test suites needs.

// Each suite uses a part of this.
#![allow(dead_code)]

use std::fs;

/// The processes whose command line holds `token`, as `pid cmdline`
/// (sandgate's own, and this test process, aside).
pub fn holding(token: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == std::process::id().to_string() {
            continue;
        }
        if let Ok(cmd) = fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(token) && !cmd.contains("sandgate") {
                found.push(format!("{name} {cmd}"));
            }
        }
    }
    found
}

/// Whether this test process inherited signal `sig` as ignored (a
/// background job of a non-interactive shell ignores SIGINT, `nohup`
/// SIGHUP): the sandgate it starts inherits that too and, as it should,
/// keeps it ignored, so a test sending it would wait for an exit that
/// never comes. Read from `SigIgn` in `/proc/self/status`.
pub fn ignored_here(sig: rustix::process::Signal) -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
        .unwrap();
    mask & (1 << (sig.as_raw() - 1)) != 0
}

/// The signals among `sigs` this process did not inherit as ignored
/// ([`ignored_here`]); each left out is said on stderr.
pub fn sendable(sigs: &[rustix::process::Signal]) -> Vec<rustix::process::Signal> {
    sigs.iter()
        .copied()
        .filter(|&s| {
            let ignored = ignored_here(s);
            if ignored {
                eprintln!(
                    "note: {s:?} is ignored in this test's process, so in the server's too: not sent"
                );
            }
            !ignored
        })
        .collect()
}

/// Whether the signal `kill` calls `name` (`"TERM"`, `"INT"`, `"HUP"`)
/// may be sent to a sandgate this process starts ([`sendable`]).
pub fn sendable_name(name: &str) -> bool {
    use rustix::process::Signal;
    let sig = match name {
        "TERM" => Signal::TERM,
        "INT" => Signal::INT,
        "HUP" => Signal::HUP,
        other => panic!("no signal named {other} in these tests"),
    };
    !sendable(&[sig]).is_empty()
}
