//! `cargo xtask install-test`: installs what `cargo xtask dist` built as a
//! user would, away from the checkout, and runs a check against each
//! artifact (tests/install/run.sh says which and how).
//!
//! The test runs in a new temporary directory holding copies of the
//! artifacts and the check programs, with an environment cleared of
//! everything that could lead back: no `cargo` or `rustc` on PATH (a
//! directory holding either is dropped; a tool the test needs from such a
//! directory is linked into a private bin/), no `CARGO*`, `RUST*` or
//! `SANDGATE_*` variables, no `PKG_CONFIG_PATH` or `LD_LIBRARY_PATH`. The
//! checkout itself is hidden under an empty tmpfs in a private mount
//! namespace (`unshare`), so that no path into it resolves.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::dist::{self, c_archive};
use crate::install::{copy_atomic, Versions};
use crate::workspace_root;

/// The tools the checks run.
const TOOLS: &[&str] = &[
    "bash",
    "sh",
    "python3",
    "node",
    "npm",
    "go",
    "gcc",
    "cc",
    "ld",
    "as",
    "pkg-config",
    "tar",
    "gzip",
    "readelf",
    "cat",
    "env",
    "install",
    "man",
];

pub fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask install-test".into());
    }
    let start = Instant::now();
    let root = workspace_root();
    let v = Versions::read()?;
    let dist = dist::dist_dir();
    let artifacts = [
        format!("{}.tar.gz", c_archive(&v)),
        format!("sandgate-{}.tgz", v.package),
        format!("sandgate-linux-x64-gnu-{}.tgz", v.package),
        format!("sandgate-go-{}.tar.gz", v.package),
        "man/sandgate.1".to_owned(),
    ];
    for a in &artifacts {
        if !dist.join(a).is_file() {
            return Err(format!(
                "{} is missing: run `cargo xtask dist` first",
                dist.join(a).display()
            ));
        }
    }
    let wheel = fs::read_dir(&dist)
        .map_err(|e| format!("cannot read {}: {e}", dist.display()))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(&format!("sandgate-{}-", v.package)) && n.ends_with(".whl"))
        .ok_or_else(|| {
            format!(
                "no wheel in {}: run `cargo xtask dist` first",
                dist.display()
            )
        })?;

    let work = new_temp_dir()?;
    if work.starts_with(&root) {
        return Err(format!(
            "the temporary directory {} is inside the checkout: set TMPDIR elsewhere",
            work.display()
        ));
    }
    let result = run_in(&work, &root, &dist, &artifacts, &wheel, &v);
    if result.is_ok() {
        let _ = fs::remove_dir_all(&work);
    } else {
        eprintln!("install-test: left {} for inspection", work.display());
    }
    eprintln!(
        "install-test: {} in {:.1}s",
        if result.is_ok() { "passed" } else { "FAILED" },
        start.elapsed().as_secs_f64()
    );
    result
}

fn run_in(
    work: &Path,
    root: &Path,
    dist: &Path,
    artifacts: &[String],
    wheel: &str,
    v: &Versions,
) -> Result<(), String> {
    let copy_dist = work.join("dist");
    fs::create_dir_all(&copy_dist)
        .map_err(|e| format!("cannot create {}: {e}", copy_dist.display()))?;
    fs::create_dir_all(copy_dist.join("man"))
        .map_err(|e| format!("cannot create {}: {e}", copy_dist.display()))?;
    for a in artifacts.iter().map(String::as_str).chain([wheel]) {
        copy_atomic(&dist.join(a), &copy_dist.join(a))?;
    }
    let checks = root.join("tests/install");
    for f in ["run.sh", "check.c", "check.py", "check.js", "check.go"] {
        copy_atomic(&checks.join(f), &work.join(f))?;
    }

    let path = path_without_rust(work)?;
    let mut cmd = hidden(root);
    cmd.arg("bash").arg(work.join("run.sh")).current_dir(work);
    for (k, _) in env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO")
            || k.starts_with("RUST")
            || k.starts_with("SANDGATE_")
            || k == "PKG_CONFIG_PATH"
            || k == "LD_LIBRARY_PATH"
            || k == "GOFLAGS"
            || k == "OLDPWD"
        {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd.env("PATH", path)
        .env("PWD", work)
        .env("SANDGATE_VERSION", &v.package)
        .env("SANDGATE_CHECKOUT", root);
    eprintln!("==> install-test: {}", work.display());
    let status = cmd
        .status()
        .map_err(|e| format!("install-test: cannot run bash: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("install-test failed ({status})"))
    }
}

/// A command prefix that runs what follows with the checkout hidden: a
/// private mount namespace with an empty, unreadable tmpfs over it. As
/// root a plain mount namespace serves; otherwise a user namespace maps the
/// caller to root for the mount.
fn hidden(root: &Path) -> Command {
    let hide = "mount -t tmpfs -o size=64k,mode=000 sandgate-hidden \"$1\" && shift && exec \"$@\"";
    let as_root = is_root();
    let mut cmd = Command::new("unshare");
    if !as_root {
        cmd.arg("--user").arg("--map-root-user");
    }
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        hide,
        "sh",
    ])
    .arg(root);
    cmd
}

pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// PATH without the directories holding `cargo` or `rustc`; the tools the
/// test needs from those directories get links in `<work>/bin`, first.
fn path_without_rust(work: &Path) -> Result<OsString, String> {
    let old = env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = env::split_paths(&old).collect();
    let has = |d: &Path, tool: &str| d.join(tool).is_file();
    let (dropped, kept): (Vec<PathBuf>, Vec<PathBuf>) = dirs
        .into_iter()
        .partition(|d| has(d, "cargo") || has(d, "rustc"));
    let bin = work.join("bin");
    fs::create_dir_all(&bin).map_err(|e| format!("cannot create {}: {e}", bin.display()))?;
    for tool in TOOLS {
        let in_kept = kept.iter().any(|d| has(d, tool));
        if let Some(d) = dropped.iter().find(|d| has(d, tool)).filter(|_| !in_kept) {
            std::os::unix::fs::symlink(d.join(tool), bin.join(tool))
                .map_err(|e| format!("cannot link {tool}: {e}"))?;
        }
    }
    env::join_paths(std::iter::once(bin).chain(kept)).map_err(|e| format!("cannot build PATH: {e}"))
}

fn new_temp_dir() -> Result<PathBuf, String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = env::temp_dir().join(format!(
        "sandgate-install-test-{}-{nanos}",
        std::process::id()
    ));
    fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}
