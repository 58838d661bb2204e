//! `cargo xtask fuzz [target] [--seconds N]`: runs the cargo-fuzz targets in
//! fuzz/ (its own workspace) for N seconds each (default 60), one after the
//! other, or only the named one. Needs the nightly toolchain and cargo-fuzz;
//! fails with the command that installs whichever is missing.
//!
//! Not part of `ci`: CI runs each target's proptest twin in `cargo test`
//! (fuzz/README.md). Crashes land in `fuzz/artifacts/<target>/`; the corpus
//! grows in `fuzz/corpus/<target>/` and is reused by the next run.

use std::process::{Command, Stdio};
use std::time::Instant;

/// The targets in fuzz/fuzz_targets/, in the order they run.
pub const TARGETS: &[&str] = &[
    "relpath",
    "fileguard",
    "policy",
    "tool_request",
    "rootfs_ops",
    "net_hosts",
    "fetch_url",
    "proxy_wire",
];

fn usage() -> String {
    format!(
        "usage: cargo xtask fuzz [{}] [--seconds N]",
        TARGETS.join("|")
    )
}

/// Whether `cargo +nightly <args>` runs and succeeds (output discarded).
fn nightly_ok(args: &[&str]) -> bool {
    Command::new("cargo")
        .arg("+nightly")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn run(args: &[String]) -> Result<(), String> {
    let mut seconds: u64 = 60;
    let mut only: Option<&str> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => {
                let v = it.next().ok_or_else(usage)?;
                seconds = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--seconds takes a positive number, not `{v}`"))?;
            }
            "-h" | "--help" => {
                println!("{}", usage());
                return Ok(());
            }
            t if only.is_none() && TARGETS.contains(&t) => {
                only = TARGETS.iter().copied().find(|x| *x == t)
            }
            other => return Err(format!("unknown fuzz argument `{other}`; {}", usage())),
        }
    }
    if !nightly_ok(&["--version"]) {
        return Err(
            "the nightly toolchain is missing (cargo-fuzz needs it): rustup toolchain install nightly"
                .into(),
        );
    }
    if !nightly_ok(&["fuzz", "--version"]) {
        return Err("cargo-fuzz is missing: cargo install cargo-fuzz --locked".into());
    }
    let dir = crate::workspace_root().join("fuzz");
    let targets: Vec<&str> = match only {
        Some(t) => vec![t],
        None => TARGETS.to_vec(),
    };
    let max_time = format!("-max_total_time={seconds}");
    for t in targets {
        // proxy_wire's threads outlive each input: LeakSanitizer would take
        // their thread-local registrations for leaks (fuzz/README.md).
        let extra: &[&str] = if t == "proxy_wire" {
            &["-detect_leaks=0"]
        } else {
            &[]
        };
        eprintln!(
            "==> fuzz {t}: cargo +nightly fuzz run {t} -- {max_time} {}",
            extra.join(" ")
        );
        let start = Instant::now();
        let status = Command::new("cargo")
            .args(["+nightly", "fuzz", "run", t, "--", &max_time])
            .args(extra)
            .current_dir(&dir)
            .status()
            .map_err(|e| format!("fuzz {t}: cannot run cargo: {e}"))?;
        eprintln!(
            "<== fuzz {t}: {status} in {:.1}s",
            start.elapsed().as_secs_f64()
        );
        if !status.success() {
            return Err(format!(
                "fuzz target `{t}` failed ({status}); the input is in fuzz/artifacts/{t}/ \
                 (reproduce: cd fuzz && cargo +nightly fuzz run {t} <file>)"
            ));
        }
    }
    Ok(())
}
