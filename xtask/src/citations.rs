//! `cargo xtask citations`: every test and file SECURITY.md, README.md and
//! docs/reference/*.md cite exists.
//!
//! A claim there is only as strong as the test named beside it, so a test
//! renamed or removed must not leave its claim citing nothing. Each
//! backquoted span on one line is looked at:
//!
//! - a path beneath one of the workspace's top directories (`crates/…`,
//!   `tests/…`, `bindings/…`; `*` matches within one component) must name
//!   a file or directory of the workspace;
//! - a name shaped as a test (four or more words joined by `_`, `test_…`
//!   or `Test…`; a trailing `*` stands for any ending, after three words
//!   or more) must occur as a whole word in one of the workspace's source
//!   files.
//!
//! Names of system calls and C types have fewer words and are not looked
//! at. The check reads the sources once and takes well under a second.

use std::fs;
use std::path::{Path, PathBuf};

use crate::workspace_root;

/// The top directories a cited path may start with.
const TOPS: &[&str] = &[
    "crates", "tests", "bindings", "fuzz", "docs", "xtask", "include", "examples", "benches",
    "scripts",
];

/// The extensions of the files a cited test name is looked for in.
const SOURCES: &[&str] = &["rs", "py", "go", "js", "ts", "c", "h", "sh", "json", "toml"];

/// Directories never walked: build output, installed packages, VCS data.
const SKIP: &[&str] = &["target", "node_modules", ".git", "dist", "__pycache__"];

pub fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask citations".into());
    }
    let root = workspace_root();
    let mut files = Vec::new();
    walk(&root, &root, &mut files)?;
    let mut sources = String::new();
    for f in &files {
        if f.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SOURCES.contains(&e))
        {
            if let Ok(text) = fs::read(root.join(f)) {
                sources.push_str(&String::from_utf8_lossy(&text));
                sources.push('\n');
            }
        }
    }
    let rel: Vec<String> = files
        .iter()
        .filter_map(|f| f.to_str().map(str::to_owned))
        .collect();
    let mut docs = vec![PathBuf::from("SECURITY.md"), PathBuf::from("README.md")];
    let reference = root.join("docs/reference");
    let mut refs: Vec<PathBuf> = fs::read_dir(&reference)
        .map_err(|e| format!("citations: {}: {e}", reference.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter_map(|p| p.strip_prefix(&root).ok().map(Path::to_path_buf))
        .collect();
    refs.sort();
    docs.extend(refs);

    let (mut checked, mut dangling) = (0usize, Vec::new());
    for doc in &docs {
        let text = fs::read_to_string(root.join(doc))
            .map_err(|e| format!("citations: {}: {e}", doc.display()))?;
        for (n, line) in text.lines().enumerate() {
            for span in line.split('`').skip(1).step_by(2) {
                let found = if is_path(span) {
                    path_exists(span, &rel)
                } else if is_test_name(span) {
                    name_occurs(span, &sources)
                } else {
                    continue;
                };
                checked += 1;
                if !found {
                    dangling.push(format!("{}:{}: `{span}`", doc.display(), n + 1));
                }
            }
        }
    }
    if dangling.is_empty() {
        eprintln!("citations: {checked} tests and files cited by the docs all exist");
        Ok(())
    } else {
        Err(format!(
            "citations: {} of {checked} cited tests or files do not exist:\n  {}",
            dangling.len(),
            dangling.join("\n  ")
        ))
    }
}

/// Every file and directory beneath `dir`, relative to `root`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("citations: {}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let name = e.file_name();
        if SKIP.iter().any(|s| name == *s) {
            continue;
        }
        let path = e.path();
        if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_path_buf());
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk(root, &path, out)?;
        }
    }
    Ok(())
}

fn is_path(s: &str) -> bool {
    let Some((top, rest)) = s.split_once('/') else {
        return false;
    };
    TOPS.contains(&top)
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-*/".contains(c))
}

fn is_test_name(s: &str) -> bool {
    let (name, prefix) = match s.strip_suffix('*') {
        Some(n) => (n.strip_suffix('_').unwrap_or(n), true),
        None => (s, false),
    };
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if name.is_empty() || !name.chars().all(word) {
        return false;
    }
    if name.starts_with("test_") || (name.starts_with("Test") && name.len() > 4) {
        return true;
    }
    let parts: Vec<&str> = name.split('_').collect();
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && parts.len() >= if prefix { 3 } else { 4 }
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// Whether a workspace path matches `cited` (a trailing `/` ignored, `*`
/// within one component), or lies beneath what it names.
fn path_exists(cited: &str, files: &[String]) -> bool {
    let want: Vec<&str> = cited.trim_end_matches('/').split('/').collect();
    files.iter().any(|f| {
        let have: Vec<&str> = f.split('/').collect();
        have.len() >= want.len() && want.iter().zip(&have).all(|(w, h)| glob(w, h))
    })
}

/// `pattern` with `*` for any run of characters, against `name` whole.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (head.len()..=name.len())
                    .any(|i| name.is_char_boundary(i) && glob(tail, &name[i..]))
        }
    }
}

/// Whether `cited` occurs in `sources` as a whole word (a trailing `*`: as
/// the start of one).
fn name_occurs(cited: &str, sources: &str) -> bool {
    let (name, prefix) = match cited.strip_suffix('*') {
        Some(n) => (n, true),
        None => (cited, false),
    };
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    sources.match_indices(name).any(|(at, _)| {
        !word(sources[..at].chars().next_back())
            && (prefix || !word(sources[at + name.len()..].chars().next()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_counts_as_a_citation() {
        assert!(is_path("crates/rootfs/tests/suite/corpus.rs"));
        assert!(is_path("crates/*/tests/fuzz_*.rs"));
        assert!(is_path("tests/vectors/"));
        assert!(!is_path("/etc/passwd"));
        assert!(!is_path("a/b"));
        assert!(is_test_name("a_narrowed_call_*"));
        assert!(is_test_name("run17_an_id_is_echoed_exactly_or_refused"));
        assert!(is_test_name("test_fetch"));
        assert!(is_test_name("TestFetchCancelledDuringTheCallEndsIt"));
        assert!(!is_test_name("process_vm_readv"));
        assert!(!is_test_name("fs.max_write_bytes"));
        assert!(!is_test_name("E_NOT_DIR"));
    }

    #[test]
    fn paths_and_names_are_found_only_when_there() {
        let files = [
            "crates/a/tests/fuzz_x.rs".to_owned(),
            "tests/v/t.json".to_owned(),
        ];
        assert!(path_exists("crates/*/tests/fuzz_*.rs", &files));
        assert!(path_exists("tests/v/", &files));
        assert!(!path_exists("tests/w/", &files));
        assert!(!path_exists("crates/a/tests/fuzz.rs", &files));
        let src = "fn a_b_c_d() {}\nfn a_b_c_de_f() {}\n";
        assert!(name_occurs("a_b_c_d", src));
        assert!(name_occurs("a_b_c_*", src));
        assert!(!name_occurs("b_c_d", src));
        assert!(!name_occurs("a_b_c_de", src));
    }
}
