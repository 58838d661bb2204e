//! What a policy made from directories named on the command line keeps
//! from the agent. `sandgate init DIR` writes it into its starter policy
//! and `sandgate mcp DIR…` (the reference server's form) serves it, from
//! this one list, so the two first-run forms protect the same things.
//!
//! Besides every `.git` (restricted mode), these name what runs outside
//! any confinement once written: `.github`'s workflows, lockfiles (which
//! name the code the next install fetches and runs), and the project
//! settings of MCP hosts and editors, which name commands the host starts
//! unconfined (`.cursor/mcp.json`, `.mcp.json`, `.vscode/tasks.json`,
//! `.claude/settings.json` hooks). A user who wants any of them writable
//! writes a policy by hand and serves it with `--policy`.

use std::path::Path;

/// The `deny_write` patterns of the first-run policies.
pub const DENY_WRITE: [&str; 9] = [
    ".github/**",
    ".cursor/**",
    ".vscode/**",
    ".claude/**",
    ".mcp.json",
    "*.lock",
    "package-lock.json",
    "pnpm-lock.yaml",
    "go.sum",
];

/// The directories the first-run policies keep from the agent whole:
/// `.git` (restricted mode) and those [`DENY_WRITE`] names with `/**`.
pub const KEPT_DIRS: [&str; 5] = [".git", ".github", ".cursor", ".vscode", ".claude"];

/// [`DENY_WRITE`] as a TOML array, one pattern a line.
pub fn deny_write_toml() -> String {
    let mut out = String::from("[\n");
    for p in DENY_WRITE {
        out.push_str(&format!("  \"{p}\",\n"));
    }
    out.push(']');
    out
}

/// The component of `root` (canonical) that is one of [`KEPT_DIRS`]
/// (matched as the guard matches names, case and normal form folded), if
/// any: a write root that is one, or lies inside one, would hand it over
/// whole (`hooks/pre-commit` writable under `repo/.git`), since the
/// patterns match names beneath the root.
pub fn kept_component(root: &Path) -> Option<&str> {
    let fold = sandgate::fileguard::fold;
    root.components().find_map(|c| {
        let name = c.as_os_str().to_str()?;
        let folded = fold(name);
        KEPT_DIRS.iter().any(|k| fold(k) == folded).then_some(name)
    })
}

/// Why `root` (canonical) may not be granted for writing by a first-run
/// form, if it may not: it is `/`, the home directory (`$HOME`, or the
/// user database's entry for this user when `HOME` is unset or empty), or
/// a directory holding it. The agent could then plant code in
/// `~/.bashrc`, `~/.profile`, `~/.config/…` or `~/.local/bin`, or a key in
/// `~/.ssh/authorized_keys`, which the user's own shell and tools run (or
/// let in) unconfined; no list of names covers every such file, so the
/// home is refused whole and the project inside it is what to grant.
pub fn home_refusal(root: &Path) -> Option<String> {
    // `home_dir` answers `$HOME` when it is set and not empty, else the
    // user database's home (`getpwuid_r`): without `HOME` in the
    // environment the home is still the one refused.
    let home = std::env::home_dir()
        .filter(|h| !h.as_os_str().is_empty())
        .and_then(|h| std::fs::canonicalize(h).ok());
    let what = if root == Path::new("/") {
        "is `/`, which holds every home directory"
    } else if home.as_deref() == Some(root) {
        "is your home directory"
    } else if home.as_deref().is_some_and(|h| h.starts_with(root)) {
        "holds your home directory"
    } else {
        return None;
    };
    Some(format!(
        "{}: the directory {what}: the agent could write `~/.bashrc`, `~/.profile`, \
         `~/.ssh/` or `~/.config/`, which run unconfined; grant a narrower directory, \
         the project inside it",
        sandgate::policy::shown(root)
    ))
}
