//! `sandgate init DIR`: a starter policy, so that the first run is one
//! command.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sandgate::policy::PolicyErrorKind;

/// The starter policy for `root` (canonical): read and write root, `.git`
/// (restricted mode) and what `sandgate mcp DIR` protects besides
/// ([`sandgate_mcp::starter::DENY_WRITE`]: `.github`, lockfiles and the
/// project settings of MCP hosts and editors, which name commands the host
/// runs outside any confinement) protected, overwriting allowed, no shell,
/// no network.
fn starter(root: &str) -> String {
    let root = toml_string(root);
    let deny_write = sandgate_mcp::starter::deny_write_toml();
    format!(
        r#"# Starter policy written by `sandgate init`. Check it with
# `sandgate check <this file>`; serve it with `sandgate mcp --policy <this file>`.
security_mode = "restricted"   # also protects every .git component

[fs]
read_roots = [{root}]
write_root = {root}
# .github, lockfiles, and settings that name commands an MCP host or
# editor runs unconfined (.cursor, .vscode, .claude, .mcp.json).
deny_write = {deny_write}
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

/// Puts `text` at `out`, all of it or nothing, never over anything there:
/// written to a new temporary file beside it, flushed to disk and loaded
/// as a policy, then hard-linked to `out` (`link` fails on an existing
/// entry, a symlink included, and follows none). A process killed on the
/// way leaves at most the temporary file, never a half-written policy
/// that would load with a different meaning.
///
/// `beside` says `out` is the default place, beside the directory: a
/// failure there ends with how to choose another.
fn write_new(out: &Path, text: &[u8], root: &Path, beside: bool) -> Result<(), String> {
    let elsewhere = if beside {
        "; choose where it goes with -o FILE"
    } else {
        ""
    };
    if out.file_name().is_none() {
        return Err(format!("{}: not a file name", crate::shown(out)));
    }
    // `-o DIR` or `-o DIR/`: said as such, not as the `File exists` the
    // link would meet (and a trailing slash would put the temporary file
    // beside DIR rather than in it).
    let slash = std::os::unix::ffi::OsStrExt::as_bytes(out.as_os_str()).ends_with(b"/");
    if slash || std::fs::symlink_metadata(out).is_ok_and(|m| m.is_dir()) {
        return Err(format!(
            "{}: a directory; give the policy file's own name (-o DIR/NAME.toml); nothing written",
            crate::shown(out)
        ));
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = out.with_file_name(format!(".sandgate-init.{}-{nanos}.tmp", std::process::id()));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text).and_then(|()| f.sync_all()));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "{}: {e} (nothing written){elsewhere}",
            crate::shown(out)
        ));
    }
    // Checked where it will live (the same directory), before it is there.
    // The refusal is told for `out`, by key: the places it names are in the
    // temporary file, which is gone by the time anyone reads them.
    if let Err(e) = sandgate::policy::Policy::load(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        let problems: Vec<String> = e
            .problems()
            .iter()
            .map(|p| match p.key() {
                Some(key) => format!("policy key `{key}`: {}", p.message()),
                None => p.message().to_owned(),
            })
            .collect();
        let hint = match e.kind() {
            PolicyErrorKind::WriteRootContainsPolicy if root == Path::new("/") => {
                "; every file lies inside /, so grant a narrower directory".to_owned()
            }
            PolicyErrorKind::WriteRootContainsPolicy => {
                format!("; write it outside {} with -o FILE", crate::shown(root))
            }
            _ => String::new(),
        };
        return Err(format!(
            "the starter policy for {} was refused as {} ({}: {}); nothing written{hint}",
            crate::shown(root),
            crate::shown(out),
            e.code(),
            problems.join("; ")
        ));
    }
    let linked = std::fs::hard_link(&tmp, out);
    let _ = std::fs::remove_file(&tmp);
    linked.map_err(|e| format!("{}: {e} (nothing written){elsewhere}", crate::shown(out)))
}

/// Writes the starter policy for `dir` to `output` (default
/// `<dir>.sandgate.toml` beside it), never over an existing file, and
/// checks that it loads. A `dir` inside a directory the starter policy
/// protects (`.git`, `.github`, `.cursor`, `.vscode`, `.claude`) is
/// refused (the list is `sandgate mcp DIR`'s too), and so are `/`, the
/// home directory and one holding it.
pub fn init(dir: &Path, output: Option<PathBuf>) -> ExitCode {
    let root = match std::fs::canonicalize(dir) {
        Ok(r) if r.is_dir() => r,
        Ok(_) => {
            errln!("sandgate: {}: not a directory", crate::shown(dir));
            return ExitCode::from(2);
        }
        Err(e) => {
            errln!("sandgate: {}: {e}", crate::shown(dir));
            return ExitCode::from(2);
        }
    };
    let Some(root_str) = root.to_str() else {
        errln!("sandgate: {}: the path is not UTF-8", crate::shown(&root));
        return ExitCode::from(2);
    };
    if let Some(why) = sandgate_mcp::starter::home_refusal(&root) {
        errln!("sandgate: {why} (or write a policy by hand)");
        return ExitCode::from(2);
    }
    // The starter keeps these directories from the agent: a directory that
    // is one, or lies inside one, would hand it over whole.
    if let Some(name) = sandgate_mcp::starter::kept_component(&root) {
        errln!(
            "sandgate: {}: the directory is or lies inside `{name}`, which the starter \
             policy keeps from the agent; give the work tree around it (or write a \
             policy by hand to grant it)",
            crate::shown(&root)
        );
        return ExitCode::from(2);
    }
    let beside = output.is_none();
    let out = output.unwrap_or_else(|| default_output(&root));
    if let Err(message) = write_new(&out, starter(root_str).as_bytes(), &root, beside) {
        errln!("sandgate: {message}");
        return ExitCode::from(2);
    }
    outln!("{}", crate::shown(&out));
    errln!(
        "sandgate: wrote a starter policy for {}; serve it with `sandgate mcp --policy {}`",
        crate::shown(&root),
        crate::shown(&out)
    );
    ExitCode::SUCCESS
}
