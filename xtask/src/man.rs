//! `cargo xtask man`: writes the man page, generated from the `sandgate`
//! command's own clap definitions (`sandgate man`), to
//! `dist/man/sandgate.1` (`dist/` being `$SANDGATE_DIST_DIR` when set, as
//! for `cargo xtask dist`, which builds it too). `dist/` is not tracked:
//! the page is built, not committed.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::install::write_atomic;
use crate::{cargo, dist, workspace_root};

pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!("`man` takes no arguments, got `{extra}`"));
    }
    write_page(&dist::dist_dir())
}

/// Writes `<out>/man/sandgate.1`.
pub fn write_page(out_dir: &Path) -> Result<(), String> {
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
    let text = String::from_utf8(out.stdout)
        .map_err(|_| "`sandgate man` printed something that is not UTF-8".to_owned())?;
    let dir = out_dir.join("man");
    fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let page = dir.join("sandgate.1");
    write_atomic(&page, &text)?;
    eprintln!("wrote {}", page.display());
    Ok(())
}
