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

/// Where in the policy file a problem sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    line: usize,
    column: usize,
    span: Range<usize>,
    source_line: String,
    caret_len: usize,
}

impl Location {
    /// Locates the byte range `span` of `text`: 1-based line and column (in
    /// characters), the line's text and how many characters of it the span
    /// covers (at least one; a span running over the line's end is cut
    /// there).
    fn of(text: &str, span: Range<usize>) -> Location {
        let start = floor_char(text, span.start.min(text.len()));
        let end = floor_char(text, span.end.clamp(start, text.len()));
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let source_line = text[line_start..line_end].trim_end_matches('\r');
        let column = text[line_start..start].chars().count() + 1;
        let covered = text[start..end.min(line_end)].chars().count();
        Location {
            line: text[..start].matches('\n').count() + 1,
            column,
            span: start..end,
            source_line: source_line.to_owned(),
            caret_len: covered.max(1),
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
    /// in a `[[net.credentials]]` entry.
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
}

impl Problem {
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
        problems.sort_by_key(|p| p.span.as_ref().map_or(usize::MAX, |s| s.start));
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
                " ".repeat(at.column - 1),
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
