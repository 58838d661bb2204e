//! `cargo xtask man`: writes the man page, generated from the `sandgate`
//! command's own clap definitions (`sandgate man`), to
//! `dist/man/sandgate.1`. `dist/` is not tracked: the page is built, not
//! committed.

use std::fs;
use std::process::Command;

use crate::{cargo, workspace_root};

pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!("`man` takes no arguments, got `{extra}`"));
    }
    let out = Command::new(cargo())
        .args([
            "run",
            "--quiet",
            "--package",
            "sandgate-cli",
            "--bin",
            "sandgate",
            "--",
            "man",
        ])
        .current_dir(workspace_root())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`sandgate man` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if !out.stdout.starts_with(b".ie") && !out.stdout.windows(4).any(|w| w == b".TH ") {
        return Err("`sandgate man` printed something that is not a man page".to_owned());
    }
    let dir = workspace_root().join("dist/man");
    fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let page = dir.join("sandgate.1");
    fs::write(&page, &out.stdout).map_err(|e| format!("writing {}: {e}", page.display()))?;
    eprintln!("wrote {}", page.display());
    Ok(())
}
