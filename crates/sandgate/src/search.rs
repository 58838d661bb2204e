//! `glob` and `grep` below the read roots: bounded walks that list symlinks
//! as entries and never follow them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use sandgate_codes::ErrorCode;
use sandgate_rootfs::{ErrorKind, FileKind, Root};

use crate::error::Error;
use crate::relpath::RelPath;

/// Most paths one glob answers.
pub const MAX_GLOB_RESULTS: usize = 1000;
/// Matches one grep answers unless asked otherwise.
pub const DEFAULT_GREP_RESULTS: usize = 100;
/// Most matches one grep answers.
pub const MAX_GREP_RESULTS: usize = 1000;
/// Most directory entries one walk visits, so a flood of files cannot make a
/// search unbounded.
pub const MAX_WALK_ENTRIES: usize = 200_000;
/// Longest matched line text returned, in bytes.
pub const MAX_LINE_TEXT: usize = 1000;

/// One grep hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepMatch {
    /// Root-relative path of the file.
    pub path: String,
    /// 1-based line number.
    pub line: usize,
    /// The line (lossy UTF-8, without its line ending, cut at 1000 bytes).
    pub text: String,
}

/// Walks below `base` in `root` depth-first in name order, calling `visit`
/// with each entry's root-relative path and kind; directories reached
/// through a symlink are never entered. `visit` returns false to stop.
fn walk(
    root: &Root,
    base: &RelPath,
    mut visit: impl FnMut(&str, FileKind) -> bool,
) -> Result<(), Error> {
    let mut stack = vec![base.as_str().to_owned()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let entries = match root.read_dir(&dir) {
            Ok(e) => e,
            // Removed meanwhile: nothing to list.
            Err(e) if e.kind() == ErrorKind::NotFound && dir != base.as_str() => continue,
            Err(e) => return Err(Error::from(e).with_path(dir)),
        };
        let mut names: Vec<(String, FileKind)> = entries
            .into_iter()
            .map(|e| (e.name().to_string_lossy().into_owned(), e.kind()))
            .collect();
        names.sort();
        let mut subdirs = Vec::new();
        for (name, kind) in names {
            seen += 1;
            if seen > MAX_WALK_ENTRIES {
                return Ok(());
            }
            let path = if dir == "." {
                name
            } else {
                format!("{dir}/{name}")
            };
            if !visit(&path, kind) {
                return Ok(());
            }
            if kind == FileKind::Dir {
                subdirs.push(path);
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// Roots that hold `base` as a directory, in order; a root where it is
/// missing is skipped.
fn roots_holding<'r>(roots: &'r [Root], base: &RelPath) -> Result<Vec<&'r Root>, Error> {
    let mut out = Vec::new();
    let mut last = None;
    for root in roots {
        match root.stat(base) {
            Ok(m) if m.is_dir() => out.push(root),
            Ok(_) => {
                last =
                    Some(Error::new(ErrorCode::NotDir, "not a directory").with_path(base.as_str()))
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(Error::from(e).with_path(base.as_str())),
        }
    }
    if out.is_empty() {
        return Err(last.unwrap_or_else(|| {
            Error::new(ErrorCode::NotFound, "no such directory in any read root")
                .with_path(base.as_str())
        }));
    }
    Ok(out)
}

pub(crate) fn glob(roots: &[Root], base: &RelPath, pattern: &str) -> Result<Vec<String>, Error> {
    let glob = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| Error::request(format!("invalid glob pattern: {e}")))?
        .compile_matcher();
    let prefix_len = if base.is_root() {
        0
    } else {
        base.as_str().len() + 1
    };
    let mut found = BTreeMap::new();
    for root in roots_holding(roots, base)? {
        walk(root, base, |path, _| {
            if glob.is_match(Path::new(&path[prefix_len..])) {
                found.entry(path.to_owned()).or_insert(());
            }
            found.len() < MAX_GLOB_RESULTS
        })?;
    }
    Ok(found.into_keys().collect())
}

pub(crate) fn grep(
    roots: &[Root],
    base: &RelPath,
    pattern: &str,
    max: usize,
    max_file_bytes: u64,
) -> Result<Vec<GrepMatch>, Error> {
    let re = regex::bytes::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| Error::request(format!("invalid regular expression: {e}")))?;
    let mut out = Vec::new();
    let mut searched = std::collections::HashSet::new();
    // A single file may be named directly.
    let files: Vec<(&Root, Vec<String>)> =
        match roots.iter().find_map(|r| r.stat(base).ok().map(|m| (r, m))) {
            Some((root, m)) if m.is_file() => vec![(root, vec![base.as_str().to_owned()])],
            _ => {
                let mut v = Vec::new();
                for root in roots_holding(roots, base)? {
                    let mut paths = Vec::new();
                    walk(root, base, |p, k| {
                        if k == FileKind::File {
                            paths.push(p.to_owned());
                        }
                        true
                    })?;
                    v.push((root, paths));
                }
                v
            }
        };
    for (root, paths) in files {
        for path in paths {
            if !searched.insert(path.clone()) {
                continue;
            }
            // Read through a no-follow open: a file swapped for a symlink
            // after the listing is skipped, not followed.
            let file = match root.open_with(
                &path,
                sandgate_rootfs::OpenOptions::new().read(true).follow(false),
            ) {
                Ok(f) => f,
                Err(_) => continue,
            };
            let Ok(meta) = file.metadata() else { continue };
            if !meta.is_file() || meta.len() > max_file_bytes {
                continue;
            }
            let mut reader = BufReader::new(file.take(max_file_bytes));
            if reader
                .fill_buf()
                .map(|b| b[..b.len().min(8192)].contains(&0))
                .unwrap_or(true)
            {
                continue; // binary
            }
            let mut line = Vec::new();
            let mut n = 0usize;
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                n += 1;
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                let text = text.strip_suffix(b"\r").unwrap_or(text);
                if re.is_match(text) {
                    let cut = &text[..text.len().min(MAX_LINE_TEXT)];
                    out.push(GrepMatch {
                        path: path.clone(),
                        line: n,
                        text: String::from_utf8_lossy(cut).into_owned(),
                    });
                    if out.len() >= max {
                        return Ok(out);
                    }
                }
            }
        }
    }
    Ok(out)
}
