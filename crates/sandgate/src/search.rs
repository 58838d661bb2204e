//! `glob` and `grep` below the read roots: bounded walks over directory
//! descriptors that list symlinks as entries and never follow them.
//!
//! grep can honour `.gitignore` and `.ignore` files. They are read through
//! the same confined opens as everything else and matched with the `ignore`
//! crate's gitignore matcher while the walk goes; nothing here ever walks
//! host paths.
//!
//! Most files of a tree hold no match. grep first runs a screen (the
//! pattern in multi-line mode) over a file's whole bytes, and splits into
//! lines, running the pattern on each, only the files the screen finds
//! something in.
//!
//! An answer cut at a cap says so ([`Found::cut`]): an agent that takes a
//! cut answer for the whole would conclude that nothing else matches. A
//! search stopped at its result cap goes on until it meets one match more,
//! so that a cut answer is known to leave something out and one of exactly
//! the cap is not called cut; a walk stopped at [`MAX_WALK_ENTRIES`] has
//! not seen what lies past them, and a grep that passed over a file larger
//! than the read cap has not searched it, so there may be more.

use std::collections::{BTreeSet, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use sandgate_codes::ErrorCode;
use sandgate_rootfs::{ErrorKind, FileKind, OpenOptions, Root};

use crate::error::Error;
use crate::relpath::RelPath;

/// Whether `e` says the process is out of descriptors or memory rather
/// than anything about the entry: a search that met it must fail, not
/// count the entry as unreadable and answer without it.
fn starved(e: &sandgate_rootfs::Error) -> bool {
    use rustix::io::Errno;
    [Errno::MFILE, Errno::NFILE, Errno::NOMEM]
        .iter()
        .any(|n| e.errno() == Some(n.raw_os_error()))
}

/// Most paths one glob answers.
pub const MAX_GLOB_RESULTS: usize = 1000;
/// Matches one grep answers unless asked otherwise.
pub const DEFAULT_GREP_RESULTS: usize = 100;
/// Most matches one grep answers.
pub const MAX_GREP_RESULTS: usize = 1000;
/// Most directory entries one walk visits, so a flood of files cannot make a
/// search unbounded.
pub const MAX_WALK_ENTRIES: usize = 200_000;
/// Most checks of an entry against one ignore file that one walk makes
/// (with `gitignore`). Each entry is checked against the ignore files of
/// its directory and of every directory above it, nearest first, until
/// one has a rule for it, as git checks it: a tree a thousand directories
/// deep with an ignore file at each level costs a thousand checks per
/// entry below them. Past this many the walk stops, as at
/// [`MAX_WALK_ENTRIES`], and the answer is cut ([`Cut::WalkEntries`]).
/// An ordinary tree needs a few checks per entry, far under it even at
/// [`MAX_WALK_ENTRIES`] entries.
pub const MAX_IGNORE_CHECKS: usize = 4_000_000;
/// Most rules of ignore files one walk compiles (with `gitignore`; blank
/// lines and comments are no rules). Compiling costs in proportion to the
/// rules, and one ignore file may be hard-linked into every directory:
/// past this many the walk stops, as at [`MAX_WALK_ENTRIES`], and the
/// answer is cut ([`Cut::WalkEntries`]) rather than searched with rules
/// left unread.
pub const MAX_IGNORE_RULES: usize = 20_000;
/// Longest matched line text returned, in bytes.
pub const MAX_LINE_TEXT: usize = 1000;
/// Bytes of a long line shown before its first match, when that match ends
/// past the line's first [`MAX_LINE_TEXT`] bytes (see
/// [`GrepMatch::text_start`]).
pub const MATCH_LEAD: usize = 200;
/// Most context lines asked for before or after a match.
pub const MAX_CONTEXT_LINES: usize = 100;
/// Largest file read whole and screened before it is split into lines; a
/// larger one is read through a small buffer, line by line.
const WHOLE_FILE: u64 = 8 << 20;
/// Largest ignore file read; a longer one is read up to this size.
const MAX_IGNORE_FILE: u64 = 1 << 20;

/// Why a search's answer is not all it would have found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cut {
    /// More matched than the answer holds: it stopped at its result cap
    /// (`max_results` for grep, [`MAX_GLOB_RESULTS`] for glob).
    MaxResults,
    /// The walk stopped at [`MAX_WALK_ENTRIES`] entries, or (grep with
    /// `gitignore`) at [`MAX_IGNORE_CHECKS`] checks against ignore files
    /// or [`MAX_IGNORE_RULES`] rules read from them: what lies past was
    /// not searched, so there may be more.
    WalkEntries,
    /// A grep passed over a file larger than `max_read_bytes` without
    /// searching it, so there may be more.
    MaxReadBytes,
    /// The walk met a directory whose root-relative path is too long for
    /// the operating system (4,096 bytes) and did not enter it, so there
    /// may be more.
    PathLength,
    /// A grep's matches and context lines reached `max_read_bytes` of
    /// text (each line counted with its file's path, as it is answered),
    /// what one read may give: it stopped there (every match
    /// carries its own context, so without this a file whose every line
    /// matches would be answered some 200 times over), so there may be
    /// more.
    AnswerBytes,
}

impl Cut {
    /// The cut's wire name: `max_results`, `walk_entries`,
    /// `max_read_bytes`, `path_length` or `answer_bytes`.
    pub fn as_str(self) -> &'static str {
        match self {
            Cut::MaxResults => "max_results",
            Cut::WalkEntries => "walk_entries",
            Cut::MaxReadBytes => "max_read_bytes",
            Cut::PathLength => "path_length",
            Cut::AnswerBytes => "answer_bytes",
        }
    }
}

/// A search's answer, and why it was cut when it was.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Found<T> {
    /// What the search answers.
    pub results: T,
    /// `None` when `results` is everything the search found; otherwise
    /// which cap stopped it.
    pub cut: Option<Cut>,
    /// How many files the search listed but could not open or read to
    /// their end (a read error part way keeps the matches before it),
    /// subdirectories it could not list, and entries whose names are not
    /// UTF-8 (no answer could name them), and so passed over (glob counts
    /// only those subdirectories and names).
    pub unreadable: usize,
    /// How many files grep passed over unsearched as binary (a NUL in
    /// their first 8 KiB): a match in one of them is not answered. Always
    /// 0 for glob.
    pub binary: usize,
}

/// One grep hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepMatch {
    /// Root-relative path of the file.
    pub path: String,
    /// 1-based line number.
    pub line: usize,
    /// The line (lossy UTF-8, without its line ending), at most
    /// [`MAX_LINE_TEXT`] bytes of it: its start, or, when the line's first
    /// match ends past its first [`MAX_LINE_TEXT`] bytes, the bytes from
    /// [`text_start`](Self::text_start) on, so that the match is shown.
    pub text: String,
    /// The byte offset in the line at which `text` starts: 0, or, for a
    /// match that ends past the line's first [`MAX_LINE_TEXT`] bytes, up to
    /// [`MATCH_LEAD`] bytes before the match (at the start of a UTF-8
    /// character).
    pub text_start: usize,
    /// Whether the line goes on past the end of `text` (cut at
    /// [`MAX_LINE_TEXT`] bytes from `text_start`). With `text_start` above
    /// 0, `text` is not the whole line either.
    pub text_cut: bool,
    /// Up to [`GrepOptions::before`] lines just before the match, oldest
    /// first, in the same form as `text`.
    pub before: Vec<String>,
    /// Up to [`GrepOptions::after`] lines just after the match.
    pub after: Vec<String>,
    /// The indices into `before` of the lines cut at [`MAX_LINE_TEXT`]
    /// bytes, in order (empty when every one is whole).
    pub before_cut: Vec<usize>,
    /// The indices into `after` of the lines cut at [`MAX_LINE_TEXT`]
    /// bytes, in order.
    pub after_cut: Vec<usize>,
}

impl GrepMatch {
    /// Whether `text` is not the whole line: cut at its end, or starting
    /// past the line's first byte (what the endpoint, the C ABI and the
    /// bindings answer as `line_truncated`).
    pub fn line_truncated(&self) -> bool {
        self.text_cut || self.text_start > 0
    }
}

/// What a grep answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrepMode {
    /// Each matching line ([`GrepOutput::Lines`]).
    #[default]
    Lines,
    /// The paths of files with at least one match ([`GrepOutput::Files`]).
    Files,
    /// How many lines match in each file that has any
    /// ([`GrepOutput::Counts`]).
    Count,
}

impl GrepMode {
    /// The mode's wire name: `lines`, `files` or `count`.
    pub fn as_str(self) -> &'static str {
        match self {
            GrepMode::Lines => "lines",
            GrepMode::Files => "files",
            GrepMode::Count => "count",
        }
    }
}

impl std::str::FromStr for GrepMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<GrepMode, Error> {
        match s {
            "lines" => Ok(GrepMode::Lines),
            "files" => Ok(GrepMode::Files),
            "count" => Ok(GrepMode::Count),
            other => Err(Error::request(format!(
                "unknown grep mode `{other}` (modes: lines, files, count)"
            ))),
        }
    }
}

/// How a grep searches, beyond its pattern and base path. Start from
/// `GrepOptions::default()` and set the fields you need.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct GrepOptions {
    /// Only files matching this glob are searched. A pattern without `/`
    /// is matched against the file's name (`*.rs`), one with `/` against
    /// its path below the search base (`src/**/*.rs`).
    pub glob: Option<String>,
    /// Matches letters case-insensitively (Unicode simple case folding).
    pub case_insensitive: bool,
    /// Context lines answered before each match (at most
    /// [`MAX_CONTEXT_LINES`]); `Lines` mode only.
    pub before: usize,
    /// Context lines answered after each match (at most
    /// [`MAX_CONTEXT_LINES`]); `Lines` mode only.
    pub after: usize,
    /// What the grep answers.
    pub mode: GrepMode,
    /// The most results answered (lines, files or counts by mode; default
    /// [`DEFAULT_GREP_RESULTS`], at most [`MAX_GREP_RESULTS`]).
    pub max_results: Option<usize>,
    /// Skips what `.gitignore` and `.ignore` files inside the root exclude
    /// (and the `.git` directory), as git and ripgrep read them: a file's
    /// patterns apply below its directory, deeper files and `.ignore` over
    /// `.gitignore` win, `!` re-includes. Files outside the root (global
    /// excludes, `.git/info/exclude`) are not read.
    pub gitignore: bool,
    /// Set to true from another thread to stop the search: it then answers
    /// `E_ABORTED`.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// A grep's answer, by [`GrepMode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrepOutput {
    /// Matching lines, in walk order.
    Lines(Vec<GrepMatch>),
    /// Root-relative paths of files with matches, in walk order.
    Files(Vec<String>),
    /// `(path, matching lines)` of files with matches, in walk order.
    Counts(Vec<(String, usize)>),
}

impl GrepOptions {
    /// Checks the limits, answering the effective result cap.
    pub(crate) fn checked_max(&self) -> Result<usize, Error> {
        let max = self.max_results.unwrap_or(DEFAULT_GREP_RESULTS);
        if max == 0 || max > MAX_GREP_RESULTS {
            return Err(Error::request(format!(
                "max_results must be between 1 and {MAX_GREP_RESULTS}"
            )));
        }
        for (name, n) in [("before", self.before), ("after", self.after)] {
            if n > MAX_CONTEXT_LINES {
                return Err(Error::request(format!(
                    "`{name}` must be at most {MAX_CONTEXT_LINES} lines"
                )));
            }
        }
        Ok(max)
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// The ignore files in force for one directory: its own matchers (`.ignore`
/// first, then `.gitignore`) and its parent's chain.
struct IgnoreChain {
    parent: Option<Arc<IgnoreChain>>,
    matchers: Vec<Gitignore>,
}

impl IgnoreChain {
    /// Whether `path` (root-relative) is excluded: the deepest matcher with
    /// an opinion decides. Each matcher asked counts one in `checks`;
    /// `None` when that would pass [`MAX_IGNORE_CHECKS`].
    fn excluded(&self, path: &str, is_dir: bool, spent: &mut Spent) -> Option<bool> {
        let virt = virtual_path(path);
        let mut chain = Some(self);
        while let Some(c) = chain {
            for m in &c.matchers {
                spent.checks += 1;
                if spent.checks > MAX_IGNORE_CHECKS {
                    return None;
                }
                let r = m.matched(&virt, is_dir);
                if r.is_ignore() {
                    return Some(true);
                }
                if r.is_whitelist() {
                    return Some(false);
                }
            }
            chain = c.parent.as_deref();
        }
        Some(false)
    }
}

/// A root-relative name as an absolute-looking path, so that the matcher
/// (which strips its base directory) sees names below a virtual `/`. It is
/// never used to touch the filesystem.
fn virtual_path(rel: &str) -> PathBuf {
    if rel == "." {
        PathBuf::from("/")
    } else {
        Path::new("/").join(rel)
    }
}

/// What one walk has spent on ignore files: checks of an entry against one
/// (at most [`MAX_IGNORE_CHECKS`]) and rules compiled (at most
/// [`MAX_IGNORE_RULES`]).
#[derive(Default)]
struct Spent {
    checks: usize,
    rules: usize,
}

/// Reads `.ignore` and `.gitignore` of directory `dir` in `root` through
/// no-follow opens, and chains them onto `parent`. `None` when their rules
/// would take the walk past [`MAX_IGNORE_RULES`].
fn load_ignores(
    root: &Root,
    dir: &str,
    parent: Option<Arc<IgnoreChain>>,
    spent: &mut Spent,
) -> Option<Arc<IgnoreChain>> {
    let mut matchers = Vec::new();
    for name in [".ignore", ".gitignore"] {
        let path = if dir == "." {
            name.to_owned()
        } else {
            format!("{dir}/{name}")
        };
        let Ok(file) = root.open_with(&path, OpenOptions::new().read(true).follow(false)) else {
            continue;
        };
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        let mut text = Vec::new();
        if file.take(MAX_IGNORE_FILE).read_to_end(&mut text).is_err() {
            continue;
        }
        let text = String::from_utf8_lossy(&text);
        spent.rules += text
            .lines()
            .filter(|l| !l.trim_end().is_empty() && !l.starts_with('#'))
            .count();
        if spent.rules > MAX_IGNORE_RULES {
            return None;
        }
        let mut b = GitignoreBuilder::new(virtual_path(dir));
        for line in text.lines() {
            // A malformed line is skipped, as git does.
            let _ = b.add_line(None, line);
        }
        // A file without rules (empty, comments only) has no opinion on
        // anything: it is not asked.
        if let Some(m) = b.build().ok().filter(|m| !m.is_empty()) {
            matchers.push(m);
        }
    }
    Some(match parent {
        Some(parent) if matchers.is_empty() => parent,
        parent => Arc::new(IgnoreChain { parent, matchers }),
    })
}

/// The chain in force just above `base`: the ignore files of the root and
/// of every directory down to `base`'s parent (`base`'s own are read when
/// the walk lists it). `None` past [`MAX_IGNORE_RULES`].
fn ignores_above(root: &Root, base: &RelPath, spent: &mut Spent) -> Option<Arc<IgnoreChain>> {
    let mut chain = Arc::new(IgnoreChain {
        parent: None,
        matchers: Vec::new(),
    });
    if base.is_root() {
        return Some(chain);
    }
    chain = load_ignores(root, ".", Some(chain), spent)?;
    let parts: Vec<&str> = base.as_str().split('/').collect();
    let mut dir = String::new();
    for part in &parts[..parts.len() - 1] {
        if !dir.is_empty() {
            dir.push('/');
        }
        dir.push_str(part);
        chain = load_ignores(root, &dir, Some(chain), spent)?;
    }
    Some(chain)
}

/// Walks below `base` in `root` depth-first in name order, calling `visit`
/// with each entry's root-relative path and kind: a directory's entries in
/// name order, then each of its subdirectories in turn. Directories
/// reached through a symlink are never entered. With `gitignore`, entries
/// the ignore files exclude (and `.git`) are neither visited nor entered.
/// `visit` returns false to stop. Answers whether the walk stopped at
/// [`MAX_WALK_ENTRIES`] (or, with `gitignore`, at [`MAX_IGNORE_CHECKS`] or
/// [`MAX_IGNORE_RULES`]) with entries left unvisited. A directory whose path
/// is too long for the operating system is visited but not entered (it
/// cannot be opened by name, and failing would fail the whole search):
/// `long` is then set.
///
/// A subdirectory that cannot be listed (its permissions refuse the
/// process, an I/O error) is passed over and counted in `unlistable` when
/// that is given (grep, which says how many it passed over); without it,
/// or for `base` itself, it is the walk's error. An entry whose name is
/// not UTF-8 is passed over and counted there too.
fn walk(
    root: &Root,
    base: &RelPath,
    gitignore: bool,
    mut unlistable: Option<&mut usize>,
    long: &mut bool,
    mut visit: impl FnMut(&str, FileKind) -> bool,
) -> Result<bool, Error> {
    let mut spent = Spent::default();
    let start = match gitignore {
        true => match ignores_above(root, base, &mut spent) {
            Some(chain) => Some(chain),
            // Past the budget of rules: stopped, as at the entry cap.
            None => return Ok(true),
        },
        false => None,
    };
    let mut stack = vec![(base.as_str().to_owned(), start)];
    let mut seen = 0usize;
    while let Some((dir, above)) = stack.pop() {
        // Never more than the walk may still visit, and one over to tell
        // that the bound is reached: a huge directory is not read whole.
        let entries = match root
            .read_dir_max(&dir, MAX_WALK_ENTRIES - seen + 1)
            .map(|(e, _)| e)
        {
            Ok(e) => e,
            // Removed meanwhile: nothing to list.
            Err(e) if e.kind() == ErrorKind::NotFound && dir != base.as_str() => continue,
            Err(e) if e.kind() == ErrorKind::Io && dir != base.as_str() && !starved(&e) => {
                match &mut unlistable {
                    Some(n) => {
                        **n += 1;
                        continue;
                    }
                    None => return Err(Error::from(e).with_path(dir)),
                }
            }
            Err(e) => return Err(Error::from(e).with_path(dir)),
        };
        // A name that is not UTF-8 is passed over: no agent-facing name can
        // reach it, and its lossy spelling could name another entry, which
        // the walk would then open or enter in its place. It is counted
        // with the unlistable, so that an answer without it says that
        // something was not searched.
        let mut names: Vec<(String, FileKind)> = Vec::with_capacity(entries.len());
        for e in entries {
            match e.name().to_str() {
                Some(name) => names.push((name.to_owned(), e.kind())),
                None => {
                    if let Some(n) = &mut unlistable {
                        **n += 1;
                    }
                }
            }
        }
        names.sort();
        // This directory's own ignore files, read only where the listing
        // shows one.
        let ignores = match above {
            Some(chain)
                if names.iter().any(|(n, k)| {
                    *k == FileKind::File && (n == ".ignore" || n == ".gitignore")
                }) =>
            {
                match load_ignores(root, &dir, Some(chain), &mut spent) {
                    Some(chain) => Some(chain),
                    // Past the budget of rules: stopped, as at the
                    // entry cap.
                    None => return Ok(true),
                }
            }
            above => above,
        };
        let mut subdirs = Vec::new();
        for (name, kind) in names {
            seen += 1;
            if seen > MAX_WALK_ENTRIES {
                return Ok(true);
            }
            if ignores.is_some() && kind == FileKind::Dir && name == ".git" {
                continue;
            }
            let path = if dir == "." {
                name
            } else {
                format!("{dir}/{name}")
            };
            if let Some(chain) = &ignores {
                match chain.excluded(&path, kind == FileKind::Dir, &mut spent) {
                    Some(true) => continue,
                    Some(false) => {}
                    // Past the budget of checks: stopped, as at the
                    // entry cap.
                    None => return Ok(true),
                }
            }
            if !visit(&path, kind) {
                return Ok(false);
            }
            if kind == FileKind::Dir {
                if path.len() >= crate::relpath::MAX_NAME_BYTES {
                    *long = true;
                } else {
                    subdirs.push((path, ignores.clone()));
                }
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(false)
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

/// The part of a root-relative `path` below `base`.
fn below<'p>(base: &RelPath, path: &'p str) -> &'p str {
    if base.is_root() {
        path
    } else {
        &path[base.as_str().len() + 1..]
    }
}

/// The longest grep or glob pattern taken, in bytes. Longer ones are
/// refused before they are parsed: an agent's patterns run to a few
/// hundred bytes, and parsing one of 100 MB held a core for minutes before
/// the compiled size limit refused it.
pub const MAX_PATTERN_BYTES: usize = 64 * 1024;

/// Refuses a `pattern` longer than [`MAX_PATTERN_BYTES`] as an invalid
/// `what` ("glob pattern", "regular expression", "exclude pattern"),
/// naming its length and the cap, before anything parses it.
pub fn pattern_fits(pattern: &str, what: &str) -> Result<(), Error> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(Error::request(format!(
            "invalid {what}: a pattern of {} bytes, over the {MAX_PATTERN_BYTES} a pattern \
             may have",
            pattern.len()
        )));
    }
    Ok(())
}

/// The matcher of a glob `pattern`, as a set of that one glob (see
/// [`glob_set`]). The set matches as the one glob's matcher does, but for
/// a path whose last component is `..` (`?.` matches `..` alone), which no
/// walked name has.
fn compile_glob(pattern: &str) -> Result<globset::GlobSet, Error> {
    pattern_fits(pattern, "glob pattern")?;
    let glob = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| Error::request(format!("invalid glob pattern: {e}")))?;
    glob_set(
        [glob],
        "glob pattern",
        &format!("a pattern of {} bytes", pattern.len()),
    )
}

/// `globs` built into one set. globset's single-glob matcher
/// (`Glob::compile_matcher`) panics when the regular expression it builds
/// is over its size limit (a pattern of 100,000 `*`), where a set's build
/// answers the error, which is the patterns' fault: `E_REQUEST`, "invalid
/// {what}: too complex to compile ({size})", never the expression itself,
/// which the error's text holds whole.
pub fn glob_set(
    globs: impl IntoIterator<Item = globset::Glob>,
    what: &str,
    size: &str,
) -> Result<globset::GlobSet, Error> {
    let mut set = globset::GlobSetBuilder::new();
    for g in globs {
        set.add(g);
    }
    set.build().map_err(|e| match e.kind() {
        globset::ErrorKind::Regex(_) => {
            Error::request(format!("invalid {what}: too complex to compile ({size})"))
        }
        _ => Error::request(format!("invalid {what}: {e}")),
    })
}

/// The paths below `base` matching `pattern`, sorted by name: at most
/// [`MAX_GLOB_RESULTS`], the first the walks meet (roots in order, each in
/// [`walk`] order), which for a cut answer are not the first by name, but
/// the same ones for the same tree.
pub(crate) fn glob(
    roots: &[Root],
    base: &RelPath,
    pattern: &str,
    cancel: &AtomicBool,
) -> Result<Found<Vec<String>>, Error> {
    let glob = compile_glob(pattern)?;
    let mut found = BTreeSet::new();
    let (mut more, mut walk_cut, mut long, mut unreadable) = (false, false, false, 0usize);
    for root in roots_holding(roots, base)? {
        // A subdirectory this process cannot list is passed over and
        // counted, as grep does: one of them does not fail the search.
        walk_cut |= walk(
            root,
            base,
            false,
            Some(&mut unreadable),
            &mut long,
            |path, _| {
                if cancel.load(Ordering::Relaxed) {
                    // Stops the walk; answered as cancelled below.
                    more = true;
                    return false;
                }
                if glob.is_match(Path::new(below(base, path))) {
                    // A path an earlier root already gave is not a new match.
                    if found.len() < MAX_GLOB_RESULTS {
                        found.insert(path.to_owned());
                    } else if !found.contains(path) {
                        more = true;
                    }
                }
                !more
            },
        )?;
        if more {
            break;
        }
    }
    if cancel.load(Ordering::Relaxed) {
        return Err(Error::new(ErrorCode::Aborted, "the search was cancelled"));
    }
    Ok(Found {
        results: found.into_iter().collect(),
        cut: cut_by(more, walk_cut, false, long),
        unreadable,
        binary: 0,
    })
}

/// The cut of a search that met a match past its cap (`more`), whose walk
/// stopped at its entry cap, that passed over a file over the read cap
/// (`skipped`), or whose walk left a directory with too long a path
/// (`long`), in that order.
fn cut_by(more: bool, walk_cut: bool, skipped: bool, long: bool) -> Option<Cut> {
    cut_by_size(false, more, walk_cut, skipped, long)
}

/// [`cut_by`], with `over`: a grep stopped at its answer's size.
fn cut_by_size(over: bool, more: bool, walk_cut: bool, skipped: bool, long: bool) -> Option<Cut> {
    if over {
        Some(Cut::AnswerBytes)
    } else if more {
        Some(Cut::MaxResults)
    } else if walk_cut {
        Some(Cut::WalkEntries)
    } else if skipped {
        Some(Cut::MaxReadBytes)
    } else if long {
        Some(Cut::PathLength)
    } else {
        None
    }
}

/// The include filter of a grep: a name glob or a path glob.
struct Include {
    matcher: globset::GlobSet,
    by_name: bool,
}

impl Include {
    fn new(pattern: &str) -> Result<Include, Error> {
        Ok(Include {
            matcher: compile_glob(pattern)?,
            by_name: !pattern.contains('/'),
        })
    }

    fn admits(&self, base: &RelPath, path: &str) -> bool {
        let rel = below(base, path);
        let subject = if self.by_name {
            rel.rsplit('/').next().unwrap_or(rel)
        } else {
            rel
        };
        self.matcher.is_match(Path::new(subject))
    }
}

/// A screen for `pattern` over a file's whole bytes, for a file with no
/// `\r` in it: a regex that finds a match in the file whenever some line
/// of it, on its own and without its `\n`, matches `pattern`. It may find
/// more (a match across lines), never less, so a file it finds nothing in
/// has no matching line.
///
/// The screen is `pattern` in multi-line mode: `^` and `$` match at the
/// ends of every line, where a line alone sees the ends of its haystack.
/// Every other byte of a line is the same in the file, and the byte just
/// outside a line (`\n`) is not a word character, as the edges of a
/// haystack are not, so word boundaries agree; `.` matches no `\n` in
/// either. A pattern that asks for the haystack's own ends (`\A`, `\z`,
/// or `^`/`$` with multi-line mode turned off) has no screen, nor has one
/// this parse cannot read. A file with a `\r` is not screened: grep takes
/// a line's `\r\n` off, and CRLF mode, which would see the same ends,
/// also keeps `.` from matching a lone `\r` that a line alone matches.
/// Files without a screen are searched line by line.
fn screen(pattern: &str, case_insensitive: bool) -> Option<regex::bytes::Regex> {
    use regex_syntax::hir::Look;
    let hir = regex_syntax::ParserBuilder::new()
        .multi_line(true)
        .utf8(false)
        .case_insensitive(case_insensitive)
        .build()
        .parse(pattern)
        .ok()?;
    let looks = hir.properties().look_set();
    if looks.contains(Look::Start) || looks.contains(Look::End) {
        return None;
    }
    regex::bytes::RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .multi_line(true)
        .size_limit(1 << 20)
        .build()
        .ok()
}

/// A grep's pattern: compiled for single lines, and its screen for whole
/// files where there is one.
struct Pattern {
    line: regex::bytes::Regex,
    screen: Option<regex::bytes::Regex>,
}

impl Pattern {
    fn new(pattern: &str, case_insensitive: bool) -> Result<Pattern, Error> {
        pattern_fits(pattern, "regular expression")?;
        let line = regex::bytes::RegexBuilder::new(pattern)
            .case_insensitive(case_insensitive)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| Error::request(format!("invalid regular expression: {e}")))?;
        Ok(Pattern {
            line,
            screen: screen(pattern, case_insensitive),
        })
    }

    /// Whether the screen shows that no line of `content` can match: there
    /// is a screen, `content` has no `\r`, and the screen finds nothing.
    fn screened_out(&self, content: &[u8]) -> bool {
        self.screen
            .as_ref()
            .is_some_and(|s| !content.contains(&b'\r') && !s.is_match(content))
    }
}

/// Whether a file is binary: a NUL in its first 8 KiB (of `head`).
fn is_binary(head: &[u8]) -> bool {
    head[..head.len().min(8192)].contains(&0)
}

/// A line as answered: without its ending, cut, lossy UTF-8; and whether
/// it was cut.
fn line_text(raw: &[u8]) -> (String, bool) {
    let text = line_bytes(raw);
    (
        String::from_utf8_lossy(&text[..text.len().min(MAX_LINE_TEXT)]).into_owned(),
        text.len() > MAX_LINE_TEXT,
    )
}

/// A matching line as answered: where its text starts (see
/// [`GrepMatch::text_start`]), the text, and whether the line goes on past
/// it.
fn match_text(re: &regex::bytes::Regex, raw: &[u8]) -> (usize, String, bool) {
    let text = line_bytes(raw);
    // A line that fits is answered whole, without looking for the match.
    let found = (text.len() > MAX_LINE_TEXT)
        .then(|| re.find(text))
        .flatten();
    let start = match found {
        Some(m) if m.end() > MAX_LINE_TEXT => {
            let mut start = m.start().saturating_sub(MATCH_LEAD);
            // Not in the middle of a character: back to its first byte
            // (a continuation byte is 0b10xx_xxxx; a character has at most
            // three).
            for _ in 0..3 {
                if start > 0 && text[start] & 0xc0 == 0x80 {
                    start -= 1;
                }
            }
            start
        }
        _ => 0,
    };
    let end = text.len().min(start + MAX_LINE_TEXT);
    (
        start,
        String::from_utf8_lossy(&text[start..end]).into_owned(),
        end < text.len(),
    )
}

/// A line without its ending.
fn line_bytes(raw: &[u8]) -> &[u8] {
    let text = raw.strip_suffix(b"\n").unwrap_or(raw);
    text.strip_suffix(b"\r").unwrap_or(text)
}

/// Collects a grep's results in any mode, up to the cap.
struct Collector {
    mode: GrepMode,
    max: usize,
    before: usize,
    after: usize,
    lines: Vec<GrepMatch>,
    files: Vec<String>,
    counts: Vec<(String, usize)>,
    /// Whether a match was met once the answer was full: it is cut.
    more: bool,
    /// The file being searched, its capacity kept from file to file.
    content: Vec<u8>,
    /// How many files were passed over as binary.
    binary: usize,
    /// The most bytes of line text (matches and context, each line with
    /// its file's path, as it is answered) the answer holds, and how many
    /// it holds.
    max_bytes: u64,
    held: u64,
    /// Whether a line did not fit in `max_bytes`: the search stopped.
    over: bool,
}

impl Collector {
    fn full(&self) -> bool {
        let n = match self.mode {
            GrepMode::Lines => self.lines.len(),
            GrepMode::Files => self.files.len(),
            GrepMode::Count => self.counts.len(),
        };
        n >= self.max
    }

    /// Takes room for `n` bytes of line text; when there is none, the
    /// answer is over its size and the search stops (`more` set).
    fn room(&mut self, n: usize) -> bool {
        let n = n as u64;
        if self.held.saturating_add(n) > self.max_bytes {
            self.over = true;
            self.more = true;
            return false;
        }
        self.held += n;
        true
    }

    fn finish(self) -> GrepOutput {
        match self.mode {
            GrepMode::Lines => GrepOutput::Lines(self.lines),
            GrepMode::Files => GrepOutput::Files(self.files),
            GrepMode::Count => GrepOutput::Counts(self.counts),
        }
    }

    /// Searches one open file of `len` bytes: its first `max_file_bytes`
    /// bytes; one with a NUL in its first 8 KiB is binary, skipped and
    /// counted in `binary`.
    /// `Ok(false)` when the file could not be read, or not whole (an I/O
    /// error part way: the matches before it are kept).
    fn search(
        &mut self,
        pattern: &Pattern,
        path: &str,
        file: std::fs::File,
        len: u64,
        max_file_bytes: u64,
        opts: &GrepOptions,
    ) -> Result<bool, Error> {
        if len > WHOLE_FILE {
            let mut reader = BufReader::new(file.take(max_file_bytes));
            match reader.fill_buf() {
                Err(_) => return Ok(false),
                Ok(head) if is_binary(head) => {
                    self.binary += 1;
                    return Ok(true);
                }
                Ok(_) => {}
            }
            return self.search_lines(&pattern.line, path, reader, opts);
        }
        let mut content = std::mem::take(&mut self.content);
        content.clear();
        let read = file.take(max_file_bytes).read_to_end(&mut content);
        let found = match read {
            Ok(_) if !is_binary(&content) => {
                if pattern.screened_out(&content) {
                    Ok(true)
                } else {
                    self.search_lines(&pattern.line, path, &content[..], opts)
                }
            }
            Ok(_) => {
                self.binary += 1;
                Ok(true)
            }
            Err(_) => Ok(false),
        };
        self.content = content;
        found
    }

    /// Runs `re` on each line `reader` gives. `Ok(false)` when a read
    /// failed part way (an I/O error): the matches before it are kept, but
    /// the file was not searched whole.
    fn search_lines(
        &mut self,
        re: &regex::bytes::Regex,
        path: &str,
        mut reader: impl BufRead,
        opts: &GrepOptions,
    ) -> Result<bool, Error> {
        let mut line = Vec::new();
        let mut n = 0usize;
        let mut count = 0usize;
        let mut recent: std::collections::VecDeque<(String, bool)> =
            std::collections::VecDeque::with_capacity(self.before);
        // Matches of this file still collecting `after` lines.
        let mut open_from = self.lines.len();
        loop {
            if n % 4096 == 0 && opts.cancelled() {
                return Err(Error::new(ErrorCode::Aborted, "the search was cancelled"));
            }
            line.clear();
            // Grown fallibly: a line memory cannot hold (a sparse file
            // under a cap larger than memory) fails the file's read, as an
            // I/O error does, rather than abort the process.
            match crate::bytes::read_line_capped(&mut reader, u64::MAX, &mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => {
                    self.count_into(path, count);
                    return Ok(false);
                }
            }
            n += 1;
            let stripped = line.strip_suffix(b"\n").unwrap_or(&line);
            let stripped = stripped.strip_suffix(b"\r").unwrap_or(stripped);
            let full = self.full();
            if self.mode == GrepMode::Lines && self.after > 0 {
                let (text, cut) = line_text(&line);
                while open_from < self.lines.len()
                    && self.lines[open_from].after.len() >= self.after
                {
                    open_from += 1;
                }
                let wanting = (self.lines[open_from..].iter())
                    .filter(|m| m.after.len() < self.after)
                    .count();
                // Each line is answered under its file's path.
                if !self.room(wanting.saturating_mul(path.len() + text.len())) {
                    return Ok(true);
                }
                for m in &mut self.lines[open_from..] {
                    if m.after.len() < self.after {
                        if cut {
                            m.after_cut.push(m.after.len());
                        }
                        m.after.push(text.clone());
                    }
                }
            }
            if full {
                // Only trailing context is still wanted, and one match
                // more, which says the answer is cut.
                if !self.more && re.is_match(stripped) {
                    self.more = true;
                }
                if !self.more
                    || self.mode == GrepMode::Lines
                        && open_from < self.lines.len()
                        && self
                            .lines
                            .last()
                            .is_some_and(|m| m.after.len() < self.after)
                {
                    continue;
                }
                break;
            }
            if re.is_match(stripped) {
                match self.mode {
                    GrepMode::Lines => {
                        let (text_start, text, text_cut) = match_text(re, &line);
                        let size = (recent.iter())
                            .map(|(t, _)| path.len() + t.len())
                            .sum::<usize>();
                        if !self.room(size.saturating_add(path.len() + text.len())) {
                            return Ok(true);
                        }
                        self.lines.push(GrepMatch {
                            path: path.to_owned(),
                            line: n,
                            text,
                            text_start,
                            text_cut,
                            before: recent.iter().map(|(t, _)| t.clone()).collect(),
                            after: Vec::new(),
                            before_cut: (recent.iter().enumerate())
                                .filter_map(|(i, (_, cut))| cut.then_some(i))
                                .collect(),
                            after_cut: Vec::new(),
                        })
                    }
                    GrepMode::Files => {
                        self.files.push(path.to_owned());
                        return Ok(true);
                    }
                    GrepMode::Count => count += 1,
                }
            }
            if self.before > 0 {
                if recent.len() == self.before {
                    recent.pop_front();
                }
                recent.push_back(line_text(&line));
            }
        }
        self.count_into(path, count);
        Ok(true)
    }

    /// Records a file's count of matching lines (mode `count`), if any.
    fn count_into(&mut self, path: &str, count: usize) {
        if count > 0 {
            self.counts.push((path.to_owned(), count));
        }
    }
}

pub(crate) fn grep(
    roots: &[Root],
    base: &RelPath,
    pattern: &str,
    opts: &GrepOptions,
    max_file_bytes: u64,
) -> Result<Found<GrepOutput>, Error> {
    let max = opts.checked_max()?;
    let pattern = Pattern::new(pattern, opts.case_insensitive)?;
    let include = opts.glob.as_deref().map(Include::new).transpose()?;
    let mut out = Collector {
        mode: opts.mode,
        max,
        before: opts.before,
        after: opts.after,
        lines: Vec::new(),
        files: Vec::new(),
        counts: Vec::new(),
        more: false,
        content: Vec::new(),
        binary: 0,
        max_bytes: max_file_bytes,
        held: 0,
        over: false,
    };
    let (mut walk_cut, mut skipped, mut long, mut unreadable) = (false, false, false, 0usize);
    let mut searched = HashSet::new();
    // A single file may be named directly; the include glob and the ignore
    // files do not apply to it, and a final link beneath the root is
    // followed, as a read of the name follows it (the agent named it).
    let mut named = false;
    let first = roots.iter().find_map(|r| r.stat(base).ok().map(|m| (r, m)));
    let files: Vec<(&Root, Vec<String>)> = match first {
        Some((root, m)) if m.is_file() => {
            named = true;
            vec![(root, vec![base.as_str().to_owned()])]
        }
        _ => {
            // grep takes a regular file as its path: one that names a
            // FIFO, socket or device, and no directory in any root, is
            // not a regular file rather than not a directory.
            let holding = roots_holding(roots, base).map_err(|e| match first {
                Some((_, m)) if e.code() == ErrorCode::NotDir && !m.is_dir() => {
                    Error::new(ErrorCode::NotFile, "not a regular file").with_path(base.as_str())
                }
                _ => e,
            })?;
            let mut v = Vec::new();
            for root in holding {
                let mut paths = Vec::new();
                walk_cut |= walk(
                    root,
                    base,
                    opts.gitignore,
                    Some(&mut unreadable),
                    &mut long,
                    |p, k| {
                        if k == FileKind::File && include.as_ref().is_none_or(|i| i.admits(base, p))
                        {
                            paths.push(p.to_owned());
                        }
                        !opts.cancelled()
                    },
                )?;
                v.push((root, paths));
            }
            v
        }
    };
    // A path is searched once, in the first root that lists it.
    let overlap = files.len() > 1;
    for (root, paths) in files {
        for path in paths {
            if opts.cancelled() {
                return Err(Error::new(ErrorCode::Aborted, "the search was cancelled"));
            }
            if overlap && !searched.insert(path.clone()) {
                continue;
            }
            // A listed file is read through a no-follow open: one swapped
            // for a symlink after the listing is skipped, not followed.
            let opened = match named {
                true => root.open_file(&path),
                false => root.open_file_nofollow(&path),
            };
            let file = match opened {
                Ok(f) => f,
                // The file is not at fault: the process is out of
                // descriptors or memory, and the answer would leave it out.
                Err(e) if starved(&e) => return Err(Error::from(e).with_path(path)),
                Err(_) => {
                    unreadable += 1;
                    continue;
                }
            };
            let Ok(meta) = file.metadata() else {
                unreadable += 1;
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            if meta.len() > max_file_bytes {
                skipped = true;
                continue;
            }
            if !out.search(&pattern, &path, file, meta.len(), max_file_bytes, opts)? {
                unreadable += 1;
            }
            if out.more {
                break;
            }
        }
        if out.more {
            break;
        }
    }
    let cut = cut_by_size(out.over, out.more, walk_cut, skipped, long);
    let binary = out.binary;
    Ok(Found {
        results: out.finish(),
        cut,
        unreadable,
        binary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Whether some line of `content`, split and stripped as grep splits
    /// it, matches `pattern`.
    fn some_line_matches(pattern: &str, ci: bool, content: &[u8]) -> bool {
        let re = regex::bytes::RegexBuilder::new(pattern)
            .case_insensitive(ci)
            .build()
            .unwrap();
        let mut reader = content;
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).unwrap() == 0 {
                return false;
            }
            let l = line.strip_suffix(b"\n").unwrap_or(&line);
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            if re.is_match(l) {
                return true;
            }
        }
    }

    const PIECES: &[&str] = &[
        "a",
        "b",
        "ab",
        "^",
        "$",
        r"\b",
        r"\B",
        r"\s",
        "[^a]",
        ".",
        r"\A",
        r"\z",
        "(?-m)^",
        "(?-m)$",
        "(?m-R)$",
        "(?m-R)^",
        "a+",
        r"\w",
        "(?i)A",
        "é",
        r"\r",
        r"\n",
        "(?s:.)",
        r"(?-u:\xff)",
        r"\b{start}",
        r"\b{end}",
        "x?",
        r"(?-u:\b)",
        r"\W",
    ];
    const BYTES: &[&[u8]] = &[
        b"a",
        b"b",
        b" ",
        b"\n",
        "é".as_bytes(),
        b"_",
        b"1",
        b"\xff",
        b"A",
        b"\r",
        b"\r\n",
        b"\t",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// The screen never misses a file with a matching line.
        #[test]
        fn the_screen_finds_every_file_with_a_matching_line(
            pieces in prop::collection::vec(0..PIECES.len(), 1..5),
            bytes in prop::collection::vec(0..BYTES.len(), 0..24),
            ci in any::<bool>(),
        ) {
            let pattern: String = pieces.iter().map(|i| PIECES[*i]).collect();
            let content: Vec<u8> = bytes.iter().flat_map(|i| BYTES[*i].iter().copied()).collect();
            prop_assume!(Pattern::new(&pattern, ci).is_ok());
            if some_line_matches(&pattern, ci, &content) {
                prop_assert!(
                    !Pattern::new(&pattern, ci).unwrap().screened_out(&content),
                    "pattern {:?} matches a line of {:?}; the screen missed it",
                    pattern,
                    String::from_utf8_lossy(&content)
                );
            }
        }
    }

    #[test]
    fn patterns_that_ask_for_a_haystacks_own_ends_have_no_screen() {
        for p in [
            "NEEDLE_[0-9]{5}",
            "^fn ",
            "x$",
            r"\bword\b",
            "(?i)todo",
            "a.b",
        ] {
            assert!(screen(p, false).is_some(), "{p}");
        }
        for p in [r"\Ax", r"x\z", "(?-m)^x", "(?-m)x$", "(?-u:\\xff"] {
            assert!(screen(p, false).is_none(), "{p}");
        }
    }
}
