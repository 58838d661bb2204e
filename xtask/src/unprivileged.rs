//! `cargo xtask unprivileged`: runs the confinement tests again as an
//! unprivileged user (uid and gid 65534, no supplementary groups), since
//! agents run unprivileged and root hides bugs (root passes permission
//! checks, ignores `RLIMIT_NPROC`, and may read what the tests mean to be
//! unreadable).
//!
//! The test binaries are built by the caller's `cargo test` (this task
//! asks cargo for their paths without building anything new) and run with
//! `setpriv --reuid=65534 --regid=65534 --clear-groups` from `/tmp`, so
//! every file a test makes is the unprivileged user's. Needs root; a
//! developer who is not root gets a note and nothing runs.

use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{cargo, workspace_root};

/// `(crate directory under crates/, test target)` pairs whose subject is
/// confinement.
const SUITES: &[(&str, &str)] = &[
    ("shellexec", "seccomp"),
    ("shellexec", "confine"),
    ("shellexec", "exec"),
    ("shellexec", "namespaces"),
    ("shellexec", "limits"),
    ("shellexec", "git"),
    ("shellexec", "binds"),
    ("sandgate", "git"),
    ("sandgate", "proxy"),
    ("sandgate", "credentials"),
    ("sandgate", "protect"),
    ("sandgate", "binds"),
    ("protect", "settle"),
    ("protect", "watch"),
    ("cli", "run"),
    ("cli", "exec"),
];

const NOBODY: &str = "65534";

pub fn run(_args: &[String]) -> Result<(), String> {
    if !is_root() {
        eprintln!("note: unprivileged: not root, so the tests cannot switch user; skipped");
        return Ok(());
    }
    let plan = build_plan()?;
    for (package, test) in SUITES {
        let exe = find_test(&plan, package, test)?;
        eprintln!("==> unprivileged: {package} --test {test} as uid {NOBODY}");
        let start = Instant::now();
        let status = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--reset-env",
            ])
            .arg(&exe)
            .current_dir("/tmp")
            .env("RUST_BACKTRACE", "1")
            .status()
            .map_err(|e| format!("unprivileged: cannot run setpriv: {e}"))?;
        eprintln!(
            "<== unprivileged {test}: {status} in {:.1}s",
            start.elapsed().as_secs_f64()
        );
        if !status.success() {
            return Err(format!(
                "unprivileged: {package} --test {test} failed as uid {NOBODY}"
            ));
        }
    }
    Ok(())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// cargo's JSON messages for the workspace's tests, as `cargo test
/// --workspace --all-targets` builds them (the same features, so nothing
/// is rebuilt after that command).
fn build_plan() -> Result<String, String> {
    let out = Command::new(cargo())
        .args([
            "test",
            "--workspace",
            "--all-targets",
            "--no-run",
            "--message-format=json",
        ])
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("unprivileged: cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err("unprivileged: cannot build the tests".to_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The path of the integration test `test` of the crate in
/// `crates/<package>` in the build plan (found by the test's source path:
/// cargo spells a package id without the name when the name is the
/// directory's).
fn find_test(plan: &str, package: &str, test: &str) -> Result<String, String> {
    let pkg = format!("/crates/{package}/tests/{test}.rs\"");
    let name = format!("\"name\":\"{test}\"");
    plan.lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        // The test itself, not a binary target built for it.
        .filter(|l| l.contains("\"kind\":[\"test\"]"))
        .filter(|l| l.contains(&pkg) && l.contains(&name))
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = l[at..].find('"')?;
            Some(l[at..at + end].to_owned())
        })
        .ok_or_else(|| format!("unprivileged: no test binary for {package} --test {test}"))
}
