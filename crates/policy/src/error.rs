//! The one error type of this crate: a refused policy file, with every
//! independent problem found in it.

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use sandgate_codes::shown;
use sandgate_codes::ErrorCode;

/// Why a policy file was refused.
///
/// Every refusal maps to [`ErrorCode::Policy`]; the kind says which rule
/// refused it, for callers and tests that need to tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyErrorKind {
    /// The policy file could not be read.
    Read,
    /// The file is not UTF-8 or not valid TOML.
    Syntax,
    /// A key (or a table) is defined twice.
    DuplicateKey,
    /// A key the policy format does not have.
    UnknownKey,
    /// A value of the wrong TOML type (a string where a number belongs, …).
    WrongType,
    /// A value of the right type that is not one of the admitted values or
    /// is out of its range (an unknown `confine` word, a zero byte cap, a
    /// timeout over 24 h, a relative shell).
    InvalidValue,
    /// A read or write root does not exist (or cannot be resolved).
    RootMissing,
    /// A read or write root exists but is not a directory.
    RootNotDirectory,
    /// The write root contains the policy file's own directory, so an agent
    /// could rewrite the policy that confines it.
    WriteRootContainsPolicy,
    /// A `[budgets]` entry for a capability the policy does not grant.
    BudgetWithoutCapability,
    /// A `process_allow` entry that restricted mode does not admit, or one
    /// that cannot work as configured.
    ProcessNotAllowed,
    /// A `net.allow` entry that is not a well-formed `host`, `host:PORT`,
    /// `*.suffix` or bracketed IPv6 form (refused in every mode).
    NetEntryMalformed,
    /// A well-formed `net.allow` entry that restricted mode refuses: a bare
    /// loopback, a loopback name, or a private, link-local, unspecified,
    /// broadcast or multicast literal.
    NetEntryRefused,
}

/// The most problems a [`PolicyError`] lists; past them one last problem
/// says how many more were found. A file of a megabyte can hold a million
/// mistakes (a line of `}`), and each shown with its line would take
/// memory the host does not have.
pub const MAX_PROBLEMS: usize = 50;

/// The most characters of a line a [`Location`] shows: a longer line is
/// shown as an excerpt around the problem, cut where marked `…`.
pub const MAX_SHOWN_LINE: usize = 160;

/// Where in the policy file a problem sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    line: usize,
    column: usize,
    span: Range<usize>,
    source_line: String,
    /// Characters of `source_line` before the caret.
    caret_at: usize,
    caret_len: usize,
}

impl Location {
    /// Locates the byte range `span` of `text`: 1-based line and column (in
    /// characters), the line's text and how many characters of it the span
    /// covers (at least one; a span running over the line's end is cut
    /// there). A line over [`MAX_SHOWN_LINE`] characters is kept as an
    /// excerpt that starts a little before the span.
    fn of(text: &str, span: Range<usize>) -> Location {
        let start = floor_char(text, span.start.min(text.len()));
        let end = floor_char(text, span.end.clamp(start, text.len()));
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let source_line = text[line_start..line_end].trim_end_matches('\r');
        let column = text[line_start..start].chars().count() + 1;
        let covered = text[start..end.min(line_end)].chars().count().max(1);
        let (source_line, caret_at, caret_len) = excerpt(source_line, column - 1, covered);
        Location {
            line: text[..start].matches('\n').count() + 1,
            column,
            span: start..end,
            source_line,
            caret_at,
            caret_len,
        }
    }

    /// The 1-based line.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The 1-based column, in characters.
    pub fn column(&self) -> usize {
        self.column
    }

    /// The byte range in the file.
    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// The text of the line, without its line break; empty for a problem
    /// in a `[[net.credentials]]` entry. A line over [`MAX_SHOWN_LINE`]
    /// characters is an excerpt of at most that many around the problem,
    /// with `…` where it was cut.
    pub fn source_line(&self) -> &str {
        &self.source_line
    }

    /// Forgets the line's text, keeping where it is. A line of a
    /// `[[net.credentials]]` entry that the policy refuses may hold a
    /// credential written where it does not belong (`value = "ghp_…"`,
    /// the mistake the missing key is there to refuse): an error shown in
    /// a terminal or a log must not carry it.
    fn withhold_text(&mut self) {
        self.source_line.clear();
        self.caret_len = 0;
    }
}

/// `line`, or for a long one the excerpt of at most [`MAX_SHOWN_LINE`]
/// characters shown in its place, with where the caret starts in it and how
/// many characters it covers (`at` and `len` count characters of `line`).
fn excerpt(line: &str, at: usize, len: usize) -> (String, usize, usize) {
    let total = line.chars().count();
    if total <= MAX_SHOWN_LINE {
        return (line.to_owned(), at, len);
    }
    // Some context before the problem, the rest after it; `…` marks a cut
    // (one character of the budget on each side that is cut).
    let before = 40.min(at);
    let from = at - before;
    let mut room = MAX_SHOWN_LINE - usize::from(from > 0);
    let cut_end = from + room < total;
    if cut_end {
        room -= 1;
    }
    let mut shown = String::new();
    if from > 0 {
        shown.push('…');
    }
    shown.extend(line.chars().skip(from).take(room));
    if cut_end {
        shown.push('…');
    }
    let caret_at = before + usize::from(from > 0);
    let caret_len = len.min(room - before).max(1);
    (shown, caret_at, caret_len)
}

fn floor_char(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// One thing wrong with a policy file: which rule, the dotted key where
/// one is to blame, what was refused and why, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    kind: PolicyErrorKind,
    key: Option<String>,
    message: String,
    span: Option<Range<usize>>,
    location: Option<Location>,
    /// For the last problem of a list cut at [`MAX_PROBLEMS`]: how many
    /// were left out (it stands for them all).
    more: usize,
}

impl Problem {
    /// The problem that stands for `count` problems left out, the first of
    /// them of `kind`.
    #[cold]
    pub(crate) fn more(kind: PolicyErrorKind, count: usize) -> Problem {
        Problem {
            more: count,
            ..Problem::new(
                kind,
                None,
                format!(
                    "{count} more problem{} found and not shown; correct the ones above and \
                     check the file again",
                    if count == 1 { " was" } else { "s were" }
                ),
                None,
            )
        }
    }

    #[cold]
    pub(crate) fn new(
        kind: PolicyErrorKind,
        key: Option<String>,
        message: impl Into<String>,
        span: Option<Range<usize>>,
    ) -> Problem {
        Problem {
            kind,
            key,
            message: message.into(),
            span,
            location: None,
            more: 0,
        }
    }

    /// Which rule refused the policy.
    pub fn kind(&self) -> PolicyErrorKind {
        self.kind
    }

    /// The dotted key that was refused (`fs.max_read_bytes`, `exec.bogus`,
    /// `net.allow[2]`), if one is to blame.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// What was refused and why, without the key prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where in the file, when the problem is tied to a place in it.
    pub fn location(&self) -> Option<&Location> {
        self.location.as_ref()
    }

    fn headline(&self) -> String {
        match &self.key {
            Some(key) => format!("policy key `{key}`: {}", self.message),
            None => format!("policy: {}", self.message),
        }
    }
}

/// Keeps the first [`MAX_PROBLEMS`] of `problems`, and in place of the
/// rest one that says how many they were (counting those an earlier cut
/// already stood for).
pub(crate) fn cut(problems: &mut Vec<Problem>) {
    let marked: usize = problems.iter().map(|p| p.more).sum();
    if marked == 0 && problems.len() <= MAX_PROBLEMS {
        return;
    }
    let marker_kind = problems.iter().find(|p| p.more > 0).map(|p| p.kind);
    let mut kept: Vec<Problem> = problems.drain(..).filter(|p| p.more == 0).collect();
    let dropped = kept.split_off(kept.len().min(MAX_PROBLEMS));
    let omitted = marked + dropped.len();
    if omitted > 0 {
        let kind = dropped
            .first()
            .map(|p| p.kind)
            .or(marker_kind)
            .unwrap_or(PolicyErrorKind::Syntax);
        kept.push(Problem::more(kind, omitted));
    }
    *problems = kept;
}

/// A policy file refused at load, with every independent problem found in
/// it, in file order.
///
/// Each problem is displayed as ``policy key `fs.write_root`: <message>``
/// (or `policy: <message>` when no key is to blame), then, when it is tied
/// to a place in the file, the file name (as the caller spelled it), line
/// and column, the line itself and a caret under the offending part (not
/// for a problem in a `[[net.credentials]]` entry: its line may hold a
/// credential, so only the place is shown):
///
/// ```text
/// policy key `fs.read_rots`: unknown key in [fs]; did you mean `read_roots`?
///   --> policy.toml:3:1
///    |
///  3 | read_rots = ["inputs"]
///    | ^^^^^^^^^
/// ```
///
/// A path (the file name, a root) is shown with any bytes that are not
/// UTF-8 written `\xNN`, never replaced by U+FFFD, which can be a real
/// name of its own.
///
/// Problems are separated by a blank line. [`key`](PolicyError::key),
/// [`message`](PolicyError::message) and [`kind`](PolicyError::kind)
/// answer for the first one. Messages never contain a host absolute path
/// other than the policy's own configured roots and the file name the
/// caller gave.
#[derive(Debug)]
pub struct PolicyError {
    problems: Vec<Problem>,
    file: Option<PathBuf>,
    source: Option<io::Error>,
}

impl PolicyError {
    /// One problem with no place in the file.
    #[cold]
    pub(crate) fn new(
        kind: PolicyErrorKind,
        key: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        PolicyError {
            problems: vec![Problem::new(kind, key, message, None)],
            file: None,
            source: None,
        }
    }

    /// The problems found in `text`, sorted into file order (problems with
    /// no place last), each located. `problems` is not empty.
    #[cold]
    pub(crate) fn found(mut problems: Vec<Problem>, text: &str) -> Self {
        debug_assert!(!problems.is_empty());
        // The parser keeps one of a duplicated key's definitions, the
        // later one for a table header: what the later passes say of that
        // key (a wrong type, a missing root) judges a value the file may
        // not mean, so the duplicate alone is reported there.
        let duplicated: Vec<String> = problems
            .iter()
            .filter(|p| p.kind == PolicyErrorKind::DuplicateKey)
            .filter_map(|p| p.key.clone())
            .collect();
        problems.retain(|p| {
            p.kind == PolicyErrorKind::DuplicateKey
                || !p.key.as_deref().is_some_and(|k| {
                    duplicated.iter().any(|d| {
                        k.strip_prefix(d.as_str())
                            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
                    })
                })
        });
        problems.sort_by_key(|p| p.span.as_ref().map_or(usize::MAX, |s| s.start));
        cut(&mut problems);
        for p in &mut problems {
            p.location = p.span.clone().map(|s| Location::of(text, s));
            let credential = p.key.as_deref().is_some_and(|k| {
                k.strip_prefix("net.credentials")
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            });
            if let (true, Some(at)) = (credential, p.location.as_mut()) {
                at.withhold_text();
            }
        }
        PolicyError {
            problems,
            file: None,
            source: None,
        }
    }

    #[cold]
    pub(crate) fn read(file: &Path, err: io::Error) -> Self {
        PolicyError {
            problems: vec![Problem::new(
                PolicyErrorKind::Read,
                None,
                format!("cannot read the policy file `{}`", shown(file)),
                None,
            )],
            file: Some(file.to_path_buf()),
            source: Some(err),
        }
    }

    /// Names the file the problems were found in.
    /// Drops every problem's place: for text that no one wrote (a policy
    /// stated from code), where the dotted key alone says what to change.
    pub(crate) fn without_locations(mut self) -> Self {
        for p in &mut self.problems {
            p.location = None;
            p.span = None;
        }
        self
    }

    pub(crate) fn in_file(mut self, file: &Path) -> Self {
        self.file = Some(file.to_path_buf());
        self
    }

    /// Every problem, in file order (problems with no place in the file
    /// last). Never empty.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    fn first(&self) -> &Problem {
        &self.problems[0]
    }

    /// The dotted key of the first problem (`fs.max_read_bytes`,
    /// `exec.bogus`, `net.allow[2]`), if one is to blame.
    pub fn key(&self) -> Option<&str> {
        self.first().key()
    }

    /// What the first problem refused and why, without the key prefix.
    pub fn message(&self) -> &str {
        self.first().message()
    }

    /// Which rule refused the policy first.
    pub fn kind(&self) -> PolicyErrorKind {
        self.first().kind()
    }

    /// The policy file, as the caller named it, when the policy was loaded
    /// from one.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The error code: always [`ErrorCode::Policy`].
    pub fn code(&self) -> ErrorCode {
        ErrorCode::Policy
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n\n")?;
            }
            f.write_str(&problem.headline())?;
            let Some(at) = &problem.location else {
                continue;
            };
            let number = at.line.to_string();
            let pad = " ".repeat(number.len());
            match &self.file {
                Some(file) => write!(f, "\n{pad}--> {}:{}:{}", shown(file), at.line, at.column)?,
                None => write!(f, "\n{pad}--> line {}, column {}", at.line, at.column)?,
            }
            if at.caret_len == 0 {
                // The line's text is withheld (a credential entry's).
                continue;
            }
            let shown: String = at
                .source_line
                .chars()
                .map(|c| if c == '\t' { ' ' } else { c })
                .collect();
            write!(
                f,
                "\n{pad} |\n{number} | {shown}\n{pad} | {}{}",
                " ".repeat(at.caret_at),
                "^".repeat(at.caret_len)
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for PolicyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
