//! `sandgate init DIR`: a starter policy, so that the first run is one
//! command.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The starter policy for `root` (canonical): read and write root, `.git`
/// (restricted mode), `.github` and lockfiles protected, overwriting
/// allowed, no shell, no network.
fn starter(root: &str) -> String {
    let root = toml_string(root);
    format!(
        r#"# Starter policy written by `sandgate init`. Check it with
# `sandgate check <this file>`; serve it with `sandgate mcp --policy <this file>`.
security_mode = "restricted"   # also protects every .git component

[fs]
read_roots = [{root}]
write_root = {root}
deny_write = [
  ".github/**",
  "*.lock",
  "package-lock.json",
  "pnpm-lock.yaml",
  "go.sum",
]
allow_overwrite = true

[exec]
enabled = false
"#
    )
}

/// `text` as a TOML basic string: `"` and `\` escaped, and every control
/// character (DEL included, which TOML forbids raw and JSON's escaping
/// leaves raw) written as `\uXXXX`, so any UTF-8 name reads back as
/// itself.
fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Where the policy goes by default: beside the directory, since a write
/// root may not hold its own policy.
fn default_output(root: &Path) -> PathBuf {
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_owned());
    root.parent()
        .unwrap_or(Path::new("/"))
        .join(format!("{name}.sandgate.toml"))
}

/// Writes the starter policy for `dir` to `output` (default
/// `<dir>.sandgate.toml` beside it), never over an existing file, and
/// checks that it loads.
pub fn init(dir: &Path, output: Option<PathBuf>) -> ExitCode {
    let root = match std::fs::canonicalize(dir) {
        Ok(r) if r.is_dir() => r,
        Ok(_) => {
            eprintln!("sandgate: {}: not a directory", dir.display());
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("sandgate: {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    let Some(root_str) = root.to_str() else {
        eprintln!("sandgate: {}: the path is not UTF-8", root.display());
        return ExitCode::from(2);
    };
    let out = output.unwrap_or_else(|| default_output(&root));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&out);
    let mut file = match file {
        Ok(f) => f,
        Err(e) => {
            eprintln!("sandgate: {}: {e} (nothing written)", out.display());
            return ExitCode::from(2);
        }
    };
    if let Err(e) = file.write_all(starter(root_str).as_bytes()) {
        let _ = std::fs::remove_file(&out);
        eprintln!("sandgate: {}: {e} (nothing written)", out.display());
        return ExitCode::from(2);
    }
    drop(file);
    if let Err(e) = sandgate::policy::Policy::load(&out) {
        let _ = std::fs::remove_file(&out);
        eprintln!(
            "sandgate: the starter policy for {} was refused ({}: {}); nothing written",
            root.display(),
            e.code(),
            sandgate::chain_message(&e)
        );
        return ExitCode::from(2);
    }
    println!("{}", out.display());
    eprintln!(
        "sandgate: wrote a starter policy for {}; serve it with `sandgate mcp --policy {}`",
        root.display(),
        out.display()
    );
    ExitCode::SUCCESS
}
