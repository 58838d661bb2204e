//! Confined git (SPEC §7): `process_allow = ["git:status", "git:diff",
//! "git:log"]` as a boundary, not a prefix match.
//!
//! A subcommand name is not enough to make git safe. The repository's own
//! configuration can name programs that git runs during an ordinary
//! `status` or `diff` (an fsmonitor hook, an external diff, a textconv or
//! clean filter, a pager), and the read-only subcommands take flags that
//! reach outside the clone (`--output`, `--no-index`, `-c`, `--git-dir`,
//! `-C`, `--exec-path`). This module turns a request such as
//! `git diff --stat HEAD~1 -- src/a.rs` into a [`GitInvocation`] that the
//! executor runs without a shell:
//!
//! 1. [`split_words`] splits the request into words. Single and double
//!    quotes group words; every shell metacharacter outside quotes is
//!    refused, so nothing can chain, redirect or substitute.
//! 2. [`plan`] checks the subcommand against `process_allow`, admits only
//!    the flags of that subcommand's schema (below), checks revisions and
//!    pathspecs, inspects the repository at the root and builds the
//!    hardened argv and environment.
//!
//! This module never runs a process itself. The executor runs the
//! invocation from its argv (never re-quoted into a shell string) with
//! [`crate::exec::LocalShellExecutor::exec_program`], confined by the
//! read-only ruleset [`GitInvocation::confine_spec`] describes;
//! [`GitInvocation::command`] is a convenience that builds an unconfined
//! [`std::process::Command`].
//!
//! # The schema
//!
//! A flag is admitted only when it is *exactly* one of these words (git
//! expands unique prefixes of long options, so `--out=x` would mean
//! `--output=x`: a prefix is never accepted). Short flags are not bundled
//! (`-sb` is refused; write `-s -b`). `<n>` is a decimal number without
//! sign.
//!
//! | subcommand | admitted flags |
//! |---|---|
//! | `status` | `-s` `--short` `-b` `--branch` `--long` `--porcelain` `--porcelain=v1` `--porcelain=v2` `-z` `--ignored` `--untracked-files=no\|normal\|all` `-uno` `-unormal` `-uall` `--renames` `--no-renames` `--ahead-behind` `--no-ahead-behind` |
//! | `diff` | `--stat` `--numstat` `--shortstat` `--name-only` `--name-status` `--summary` `--raw` `--cached` `--staged` `-p` `--patch` `-w` `--ignore-all-space` `--ignore-space-change` `--word-diff` `--color=never` `--no-color` `-M` `--find-renames` `--no-renames` `-R` `--minimal` `--patience` `--histogram` `-z` `--exit-code` `--quiet` `-U<n>` `--unified=<n>` (n ≤ 1000) |
//! | `log` | `--oneline` `--stat` `--shortstat` `--numstat` `--name-only` `--name-status` `-p` `--patch` `--reverse` `--first-parent` `--no-merges` `--merges` `--graph` `--decorate` `--no-decorate` `--abbrev-commit` `--topo-order` `--date-order` `--no-color` `--color=never` `--no-renames` `-n <n>` `-n<n>` `-<n>` `--max-count=<n>` `--skip=<n>` (n ≤ 10000) `--format=<f>` `--pretty=<f>` `--date=<d>` `--since=<t>` `--until=<t>` `--after=<t>` `--before=<t>` `--author=<s>` `--committer=<s>` |
//!
//! Values:
//!
//! - `--format`/`--pretty`: a built-in format name (`oneline`, `short`,
//!   `medium`, `full`, `fuller`, `reference`, `email`, `raw`), or a format
//!   string (containing `%`, or prefixed `format:`/`tformat:`) of the
//!   characters `A-Z a-z 0-9 % < > ( ) . _ : , -`, space and `|`, without
//!   `%G` (signature atoms run gpg) and without `%(` (the atoms that call
//!   into other machinery). A bare name that is not built in would be a
//!   `pretty.<name>` alias from the repository config: refused.
//! - `--date`: `relative`, `local`, `iso`, `iso8601`, `iso-strict`,
//!   `iso8601-strict`, `rfc`, `rfc2822`, `short`, `raw`, `unix`, `human`,
//!   `default`.
//! - `--since`/`--until`/`--after`/`--before`: at most 64 of
//!   `A-Z a-z 0-9 : . , / + -` and space.
//! - `--author`/`--committer`: at most 100 of `A-Z a-z 0-9 . _ @ + -` and
//!   space.
//!
//! Other words before `--` are revisions (`status` takes none; `diff` at
//! most two, `log` at most 16): at most 200 characters of the form
//! `^?NAME([~^][0-9]*)*`, or a range `A..B` / `A...B` of such names without
//! `^` (one side may be empty), where `NAME` is `A-Z a-z 0-9 . _ / -`, does
//! not start with `-`, `/` or `.`, and contains no `..` or `//`. So no
//! `HEAD:path` blob names, no `:/text` searches, no `@{…}` reflog
//! selectors, no `^{…}` peeling, and nothing that git could take as an
//! option.
//!
//! Words after `--` are pathspecs (at most 64): relative, not starting with
//! `/`, `-` or `:` (no pathspec magic such as `:(top)` or `:!`), with no
//! `..` component and no control character, so each stays lexically inside
//! the root. The built argv always puts `--` between revisions and
//! pathspecs, so git never guesses which a word is.
//!
//! Everything else is refused with an [`GitError`] that names the word;
//! the known-dangerous flags (`--output`, `--no-index`, `-c`,
//! `--config-env`, `--git-dir`, `--work-tree`, `-C`, `--exec-path`,
//! `--ext-diff`, `--textconv`, `--upload-pack`, `-O`,
//! `--open-files-in-pager`, `--show-signature`, …) with a reason.
//!
//! # The hardened invocation
//!
//! - git by absolute path, the first of `/usr/bin/git`, `/usr/local/bin/git`
//!   and `/bin/git` that is an executable file; never a `PATH` lookup.
//! - The repository is pinned: `GIT_DIR=<root>/.git` (the one that was
//!   vetted) and `GIT_WORK_TREE=<root>` (so a `core.worktree` in the
//!   repository config cannot point git at another directory). git then
//!   never searches from its working directory, so a repository nested
//!   beneath the root is never the one it uses, whatever directory it runs
//!   in. With no `.git` at the root, `GIT_DIR=/dev/null`, which is never a
//!   repository. git runs in the root (canonicalized), or in a directory
//!   beneath it that the caller chose, which then only sets the prefix
//!   relative paths are taken from.
//! - The environment is cleared, then only: `PATH=/usr/bin:/bin`,
//!   `HOME=/nonexistent`, `LANG=C`, `LC_ALL=C`, `GIT_CONFIG_NOSYSTEM=1`,
//!   `GIT_CONFIG_GLOBAL=/dev/null`, `GIT_ATTR_NOSYSTEM=1`,
//!   `GIT_TERMINAL_PROMPT=0`, `GIT_OPTIONAL_LOCKS=0`, `GIT_NO_LAZY_FETCH=1`
//!   (honoured by git ≥ 2.44; see below for older git),
//!   `GIT_CEILING_DIRECTORIES=<root's parent>`, `GIT_DIR`, `GIT_WORK_TREE`
//!   (above), `GIT_PAGER=cat`, `PAGER=cat`. No other `GIT_*` variable
//!   reaches git.
//! - Global options: `--no-pager --no-optional-locks` and these `-c`
//!   overrides (command-line config wins over the repository's):
//!   `core.fsmonitor=false`, `core.hooksPath=/dev/null`, `core.pager=cat`,
//!   `pager.status=false`, `pager.diff=false`, `pager.log=false`,
//!   `diff.external=`, `safe.bareRepository=explicit`,
//!   `protocol.allow=never`, `core.attributesFile=/dev/null`,
//!   `log.showSignature=false`, `gpg.program=/bin/false`,
//!   `gpg.ssh.program=/bin/false`, `gpg.x509.program=/bin/false`,
//!   `credential.helper=`, `core.askPass=`, `diff.submodule=short`, and for
//!   every filter driver `<d>` defined in the repository config:
//!   `filter.<d>.clean=`, `filter.<d>.smudge=`, `filter.<d>.process=`,
//!   `filter.<d>.required=false` (an empty command disables the driver;
//!   git then uses the file's bytes as they are). `<d>` is the name's
//!   bytes exactly as the config holds them, invalid UTF-8 included: git
//!   matches the `filter` attribute against them byte for byte, and the
//!   arguments are passed as bytes.
//! - `diff` and `log` get `--no-ext-diff --no-textconv` (which disable every
//!   `diff.<driver>.command` and `diff.<driver>.textconv`); `status` and
//!   `diff` get `--ignore-submodules=all` (no recursion into a submodule,
//!   whose config was not vetted).
//!
//! # The repository at the root
//!
//! [`plan`] reads the repository's config files (`.git/config`,
//! `.git/config.worktree`) as bytes, with a parser that follows git's own
//! syntax, to learn the filter drivers' names. Filters are chosen by `.gitattributes`
//! inside the tree, and `git status` and `git diff` run a clean filter on
//! modified files; no single switch turns filters off in git 2.39, so each
//! driver is neutralized by name. For the same reason `plan` refuses (fail
//! closed) a repository whose config it cannot fully vet:
//!
//! - `include.path` / `includeIf.*.path` (config from elsewhere);
//! - a partial clone (`extensions.partialClone`, `remote.*.promisor`): a
//!   missing object would make git fetch lazily, which older git cannot
//!   be told not to do;
//! - a driver name git's `-c` cannot express byte for byte (empty, or
//!   containing `=`, NUL or a newline);
//! - a config file that does not parse, or is over 1 MiB;
//! - a config file that is not a regular file: a symbolic link (git would
//!   read whatever it leads to when git runs), a FIFO or a device (which
//!   could answer the vetting and git differently, or never answer);
//! - a `.git` that is a symbolic link or a `gitdir:` file (the indirection
//!   can name any repository on the host, and only `<root>/.git` itself is
//!   vetted), or a `.git/commondir` (a linked worktree's repository lives
//!   elsewhere).
//!
//! With no `.git` at the root, `status` and `log` run and git answers "not
//! a git repository" (`GIT_DIR=/dev/null`): neither an enclosing
//! repository nor one nested beneath the root is ever read. `diff` is refused outright
//! there, since outside a repository `git diff a b` compares two arbitrary
//! files.
//!
//! # Limits (honest)
//!
//! - The parse of the repository config is this module's, not git's; the
//!   two agree on the syntax git 2.39 accepts, and a file this module does
//!   not understand is refused.
//! - Config keys that only matter to other subcommands (`core.editor`,
//!   `sequence.editor`, `interactive.diffFilter`, `uploadpack.*`,
//!   `core.alternateRefsCommand`, `core.sshCommand`) are not overridden:
//!   status, diff and log with the admitted flags do not consult them.
//! - Keys that make git *read* another file on the host (`diff.orderFile`,
//!   `mailmap.file`, `core.excludesFile`, `objects/info/alternates`) are not
//!   overridden: they run nothing, but the repository's `.git/` must be
//!   trusted (the launcher's clone, read-only to the agent; SPEC §7).
//! - The vetting and git's own read of the config are two reads: a command
//!   that can write `.git/` (a shell exec granted the write root) can
//!   rewrite the config between them, and a `.git` planted at the root
//!   controls the repository. The write guard must keep `.git/` read-only;
//!   what the rewritten config could start still runs under git's
//!   read-only ruleset ([`GitInvocation::confine_spec`]): it reads the
//!   root, writes no file and opens no TCP connection, but its output
//!   reaches the caller.
//! - `safe.directory` still applies: a root owned by another user is
//!   refused by git itself.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use sandgate_codes::ErrorCode;

use crate::confine::ConfineSpec;

/// Where git is looked for, in order. Never `PATH`.
pub const GIT_CANDIDATES: [&str; 3] = ["/usr/bin/git", "/usr/local/bin/git", "/bin/git"];

/// The largest repository config file [`plan`] reads.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The longest request word [`split_words`] accepts, and the most words.
const MAX_WORD: usize = 4096;
const MAX_WORDS: usize = 256;

/// The longest revision.
const MAX_REVISION: usize = 200;

/// The most pathspecs.
const MAX_PATHSPECS: usize = 64;

/// A confined git subcommand (a `process_allow` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GitSubcommand {
    /// `git status` (`git:status`).
    Status,
    /// `git diff` (`git:diff`).
    Diff,
    /// `git log` (`git:log`).
    Log,
}

impl GitSubcommand {
    /// Every confined subcommand.
    pub const ALL: [GitSubcommand; 3] = [
        GitSubcommand::Status,
        GitSubcommand::Diff,
        GitSubcommand::Log,
    ];

    /// The subcommand named by a `process_allow` entry: exactly
    /// `git:status`, `git:diff` or `git:log`; anything else is `None`.
    pub fn from_allow_entry(entry: &str) -> Option<GitSubcommand> {
        match entry {
            "git:status" => Some(GitSubcommand::Status),
            "git:diff" => Some(GitSubcommand::Diff),
            "git:log" => Some(GitSubcommand::Log),
            _ => None,
        }
    }

    /// The subcommand named by git's own word (`status`, `diff`, `log`).
    pub fn from_word(word: &str) -> Option<GitSubcommand> {
        match word {
            "status" => Some(GitSubcommand::Status),
            "diff" => Some(GitSubcommand::Diff),
            "log" => Some(GitSubcommand::Log),
            _ => None,
        }
    }

    /// Git's word for the subcommand.
    pub fn as_str(self) -> &'static str {
        match self {
            GitSubcommand::Status => "status",
            GitSubcommand::Diff => "diff",
            GitSubcommand::Log => "log",
        }
    }

    /// The `process_allow` entry (`git:status`, …).
    pub fn allow_entry(self) -> &'static str {
        match self {
            GitSubcommand::Status => "git:status",
            GitSubcommand::Diff => "git:diff",
            GitSubcommand::Log => "git:log",
        }
    }
}

impl fmt::Display for GitSubcommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.allow_entry())
    }
}

/// What kind of refusal or failure a [`GitError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitErrorKind {
    /// The request does not split into words (a shell metacharacter, an
    /// unterminated quote, a control character).
    Syntax,
    /// A word is not admitted (not `git`, not a confined subcommand, a flag
    /// outside the schema, a bad revision or pathspec).
    Refused,
    /// The subcommand is confined git but not in `process_allow`.
    NotAllowed,
    /// The repository at the root cannot be used safely (not a repository
    /// for `diff`, `.git` indirection, config that cannot be vetted).
    Repository,
    /// No git executable in the fixed locations.
    NoGit,
    /// The root could not be inspected.
    Io,
}

/// A refusal or failure from [`split_words`] or [`plan`]. The message names
/// the refused word; it never contains a host path outside the root.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct GitError {
    kind: GitErrorKind,
    message: String,
    #[source]
    source: Option<io::Error>,
}

impl GitError {
    fn new(kind: GitErrorKind, message: impl Into<String>) -> GitError {
        GitError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    fn syntax(message: impl Into<String>) -> GitError {
        GitError::new(GitErrorKind::Syntax, message)
    }

    fn refused(word: &str, why: impl fmt::Display) -> GitError {
        GitError::new(
            GitErrorKind::Refused,
            format!("confined git refuses `{}`: {why}", shown(word)),
        )
    }

    fn repository(message: impl Into<String>) -> GitError {
        GitError::new(GitErrorKind::Repository, message)
    }

    fn io(what: &str, err: io::Error) -> GitError {
        GitError {
            kind: GitErrorKind::Io,
            message: format!("confined git: {what}: {err}"),
            source: Some(err),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> GitErrorKind {
        self.kind
    }

    /// The message (also the `Display` form).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The SPEC §8 code: a malformed request is `E_REQUEST`, a refusal
    /// `E_DENIED`, a missing git `E_NOT_STARTED`, an OS failure `E_IO`.
    pub fn code(&self) -> ErrorCode {
        match self.kind {
            GitErrorKind::Syntax => ErrorCode::Request,
            GitErrorKind::Refused | GitErrorKind::NotAllowed | GitErrorKind::Repository => {
                ErrorCode::Denied
            }
            GitErrorKind::NoGit => ErrorCode::NotStarted,
            GitErrorKind::Io => ErrorCode::Io,
        }
    }

    /// The OS error number, where there is one.
    pub fn errno(&self) -> Option<i32> {
        self.source.as_ref().and_then(io::Error::raw_os_error)
    }
}

/// A word as shown in a message: control characters escaped, long words
/// cut.
fn shown(word: &str) -> String {
    let mut out = String::new();
    for (i, c) in word.chars().enumerate() {
        if i == 120 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Bytes as shown in a message: UTF-8 as [`shown`] shows it, every invalid
/// byte as `\xNN`.
fn shown_bytes(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(&shown(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Word splitting
// ---------------------------------------------------------------------------

/// Characters refused outside quotes: everything a POSIX shell (or bash)
/// would give a meaning to.
const METACHARS: &str = ";|&$`<>(){}*?[]!#\\\"'";

/// Splits a request into words, strictly.
///
/// Words are separated by spaces and tabs. A single-quoted part is taken
/// literally; a double-quoted part too, but `$`, `` ` ``, `\` and `!` are
/// refused inside it (a shell would expand them, so the request would not
/// mean what it says). Outside quotes every shell metacharacter
/// (`; | & $ ` < > ( ) { } * ? [ ] ! # \`) is refused, and so is `~` at the
/// start of a word or right after `=` (tilde expansion); `~` elsewhere
/// (`HEAD~1`) is plain. Control characters (newline included) are refused
/// everywhere. So no request can chain, redirect, substitute or glob.
pub fn split_words(command: &str) -> Result<Vec<String>, GitError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ' ' || c == '\t' {
            if in_word {
                push_word(&mut words, &mut word)?;
                in_word = false;
            }
            continue;
        }
        if c.is_control() {
            return Err(GitError::syntax(format!(
                "confined git refuses the control character {:?} in the request",
                c
            )));
        }
        match c {
            '\'' | '"' => {
                let quote = c;
                let mut closed = false;
                for q in chars.by_ref() {
                    if q == quote {
                        closed = true;
                        break;
                    }
                    if q.is_control() {
                        return Err(GitError::syntax(format!(
                            "confined git refuses the control character {:?} in the request",
                            q
                        )));
                    }
                    if quote == '"' && matches!(q, '$' | '`' | '\\' | '!') {
                        return Err(GitError::syntax(format!(
                            "confined git refuses `{q}` inside double quotes (a shell would \
                             expand it); use single quotes"
                        )));
                    }
                    word.push(q);
                }
                if !closed {
                    return Err(GitError::syntax(format!(
                        "confined git refuses an unterminated {quote} quote"
                    )));
                }
                in_word = true;
            }
            '~' if !in_word || word.ends_with('=') => {
                return Err(GitError::syntax(
                    "confined git refuses `~` at the start of a word (tilde expansion)",
                ));
            }
            _ if METACHARS.contains(c) => {
                let rest: String = chars.clone().take_while(|x| *x != ' ').collect();
                return Err(GitError::syntax(format!(
                    "confined git refuses the shell metacharacter `{c}` in `{}{c}{}`: nothing \
                     may chain, redirect, substitute or glob (quote it if it is literal)",
                    shown(&word),
                    shown(&rest)
                )));
            }
            _ => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        push_word(&mut words, &mut word)?;
    }
    Ok(words)
}

fn push_word(words: &mut Vec<String>, word: &mut String) -> Result<(), GitError> {
    if word.len() > MAX_WORD {
        return Err(GitError::syntax(format!(
            "confined git refuses a word longer than {MAX_WORD} bytes"
        )));
    }
    if words.len() == MAX_WORDS {
        return Err(GitError::syntax(format!(
            "confined git refuses more than {MAX_WORDS} words"
        )));
    }
    words.push(std::mem::take(word));
    Ok(())
}

// ---------------------------------------------------------------------------
// The schema
// ---------------------------------------------------------------------------

const STATUS_FLAGS: &[&str] = &[
    "-s",
    "--short",
    "-b",
    "--branch",
    "--long",
    "--porcelain",
    "--porcelain=v1",
    "--porcelain=v2",
    "-z",
    "--ignored",
    "--untracked-files=no",
    "--untracked-files=normal",
    "--untracked-files=all",
    "-uno",
    "-unormal",
    "-uall",
    "--renames",
    "--no-renames",
    "--ahead-behind",
    "--no-ahead-behind",
];

const DIFF_FLAGS: &[&str] = &[
    "--stat",
    "--numstat",
    "--shortstat",
    "--name-only",
    "--name-status",
    "--summary",
    "--raw",
    "--cached",
    "--staged",
    "-p",
    "--patch",
    "-w",
    "--ignore-all-space",
    "--ignore-space-change",
    "--word-diff",
    "--color=never",
    "--no-color",
    "-M",
    "--find-renames",
    "--no-renames",
    "-R",
    "--minimal",
    "--patience",
    "--histogram",
    "-z",
    "--exit-code",
    "--quiet",
];

const LOG_FLAGS: &[&str] = &[
    "--oneline",
    "--stat",
    "--shortstat",
    "--numstat",
    "--name-only",
    "--name-status",
    "-p",
    "--patch",
    "--reverse",
    "--first-parent",
    "--no-merges",
    "--merges",
    "--graph",
    "--decorate",
    "--no-decorate",
    "--abbrev-commit",
    "--topo-order",
    "--date-order",
    "--no-color",
    "--color=never",
    "--no-renames",
];

const BUILTIN_FORMATS: &[&str] = &[
    "oneline",
    "short",
    "medium",
    "full",
    "fuller",
    "reference",
    "email",
    "raw",
];

const DATE_FORMATS: &[&str] = &[
    "relative",
    "local",
    "iso",
    "iso8601",
    "iso-strict",
    "iso8601-strict",
    "rfc",
    "rfc2822",
    "short",
    "raw",
    "unix",
    "human",
    "default",
];

/// Flags refused with a specific reason (prefixes of the word; a word is
/// matched when it equals the flag or starts with it followed by `=`, and
/// for short flags when it starts with the flag).
const DANGEROUS_LONG: &[(&str, &str)] = &[
    ("--output", "it writes a file outside the repository"),
    (
        "--no-index",
        "it compares arbitrary paths outside the repository",
    ),
    ("--git-dir", "it selects another repository"),
    ("--work-tree", "it selects another work tree"),
    ("--namespace", "it changes the ref namespace"),
    ("--exec-path", "it selects the programs git runs"),
    ("--ext-diff", "it runs an external diff program"),
    ("--textconv", "it runs textconv filter programs"),
    ("--upload-pack", "it runs a program"),
    ("--config-env", "it overrides configuration"),
    ("--open-files-in-pager", "it runs a pager"),
    ("--paginate", "it runs a pager"),
    ("--show-signature", "it runs gpg"),
    ("--super-prefix", "it is internal to git"),
    ("--attr-source", "it changes where attributes come from"),
    (
        "--all",
        "it is not a revision the confined schema admits; name the revisions",
    ),
];

const DANGEROUS_SHORT: &[(&str, &str)] = &[
    ("-c", "it overrides configuration"),
    ("-C", "it changes the directory git runs in"),
    ("-O", "it reads an order file from an arbitrary path"),
    ("-P", "it runs a pager"),
];

fn refuse_flag(sub: GitSubcommand, word: &str) -> GitError {
    for (flag, why) in DANGEROUS_LONG {
        if word == *flag
            || word
                .strip_prefix(flag)
                .is_some_and(|rest| rest.starts_with('='))
        {
            return GitError::refused(word, why);
        }
    }
    if !word.starts_with("--") {
        for (flag, why) in DANGEROUS_SHORT {
            if word.starts_with(flag) {
                return GitError::refused(word, why);
            }
        }
    }
    GitError::refused(
        word,
        format_args!(
            "not a flag the git {} schema admits (only exact flags are admitted: git would \
             expand an abbreviation)",
            sub.as_str()
        ),
    )
}

/// A decimal number in `0..=max`, no sign, at most 6 digits.
fn number(s: &str, max: u32) -> Option<u32> {
    if s.is_empty() || s.len() > 6 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u32>().ok().filter(|n| *n <= max)
}

fn charset_ok(s: &str, max_len: usize, extra: &str) -> bool {
    !s.is_empty()
        && s.len() <= max_len
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

fn format_ok(fmt: &str) -> bool {
    if BUILTIN_FORMATS.contains(&fmt) {
        return true;
    }
    let is_custom = fmt.contains('%') || fmt.starts_with("format:") || fmt.starts_with("tformat:");
    is_custom && charset_ok(fmt, 500, "%<>()._:,- |") && !fmt.contains("%G") && !fmt.contains("%(")
}

/// What a flag word did, if the schema admits it.
enum Flag {
    /// Admitted as it is.
    Plain,
    /// `-n`: the next word is the count.
    TakesCount,
    /// Not admitted.
    No,
}

fn check_flag(sub: GitSubcommand, word: &str) -> Flag {
    let table = match sub {
        GitSubcommand::Status => STATUS_FLAGS,
        GitSubcommand::Diff => DIFF_FLAGS,
        GitSubcommand::Log => LOG_FLAGS,
    };
    if table.contains(&word) {
        return Flag::Plain;
    }
    let ok = match sub {
        GitSubcommand::Status => false,
        GitSubcommand::Diff => {
            let n = word
                .strip_prefix("--unified=")
                .or_else(|| word.strip_prefix("-U"));
            n.is_some_and(|n| number(n, 1000).is_some())
        }
        GitSubcommand::Log => {
            if word == "-n" {
                return Flag::TakesCount;
            }
            if let Some(n) = word
                .strip_prefix("--max-count=")
                .or_else(|| word.strip_prefix("--skip="))
                .or_else(|| word.strip_prefix("-n"))
            {
                number(n, 10000).is_some()
            } else if let Some(n) = word.strip_prefix('-').filter(|n| !n.starts_with('-')) {
                number(n, 10000).is_some()
            } else if let Some(f) = word
                .strip_prefix("--format=")
                .or_else(|| word.strip_prefix("--pretty="))
            {
                format_ok(f)
            } else if let Some(d) = word.strip_prefix("--date=") {
                DATE_FORMATS.contains(&d)
            } else if let Some(t) = ["--since=", "--until=", "--after=", "--before="]
                .iter()
                .find_map(|p| word.strip_prefix(p))
            {
                charset_ok(t, 64, ":.,/+- ")
            } else if let Some(a) = word
                .strip_prefix("--author=")
                .or_else(|| word.strip_prefix("--committer="))
            {
                charset_ok(a, 100, "._@+- ")
            } else {
                false
            }
        }
    };
    if ok {
        Flag::Plain
    } else {
        Flag::No
    }
}

/// `NAME([~^][0-9]*)*`.
fn single_revision(s: &str) -> bool {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._/-".contains(c)))
        .unwrap_or(s.len());
    let (name, suffix) = s.split_at(end);
    if name.is_empty()
        || name.starts_with(['-', '/', '.'])
        || name.contains("..")
        || name.contains("//")
    {
        return false;
    }
    let mut rest = suffix;
    while let Some(c) = rest.chars().next() {
        if c != '~' && c != '^' {
            return false;
        }
        rest = rest[1..].trim_start_matches(|d: char| d.is_ascii_digit());
    }
    true
}

/// Whether `word` looks like a revision or a range of revisions.
pub fn is_revision(word: &str) -> bool {
    if word.is_empty() || word.len() > MAX_REVISION || word.starts_with('-') {
        return false;
    }
    let range = word.split_once("...").or_else(|| word.split_once(".."));
    match range {
        Some((a, b)) => {
            (!a.is_empty() || !b.is_empty())
                && (a.is_empty() || single_revision(a))
                && (b.is_empty() || single_revision(b))
        }
        None => single_revision(word.strip_prefix('^').unwrap_or(word)),
    }
}

/// Why `spec` is not an admitted pathspec, if it is not.
fn pathspec_problem(spec: &str) -> Option<&'static str> {
    if spec.is_empty() {
        return Some("an empty pathspec");
    }
    if spec.len() > MAX_WORD {
        return Some("too long");
    }
    if spec.starts_with('/') {
        return Some("an absolute path; pathspecs are relative to the root");
    }
    if spec.starts_with(':') {
        return Some("pathspec magic (`:(top)`, `:!`, …) is not admitted");
    }
    if spec.starts_with('-') {
        return Some("a pathspec may not start with `-`");
    }
    if spec.chars().any(char::is_control) {
        return Some("a control character in a pathspec");
    }
    if Path::new(spec)
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        || spec.split('/').any(|c| c == "..")
    {
        return Some("a `..` component would leave the root");
    }
    None
}

/// The words after `git <subcommand>`, checked and split.
struct Checked {
    flags: Vec<String>,
    revisions: Vec<String>,
    pathspecs: Vec<String>,
}

fn check_args(sub: GitSubcommand, args: &[String]) -> Result<Checked, GitError> {
    let mut checked = Checked {
        flags: Vec::new(),
        revisions: Vec::new(),
        pathspecs: Vec::new(),
    };
    let mut iter = args.iter();
    let mut after_dashdash = false;
    while let Some(word) = iter.next() {
        if after_dashdash {
            if let Some(why) = pathspec_problem(word) {
                return Err(GitError::refused(word, why));
            }
            if checked.pathspecs.len() == MAX_PATHSPECS {
                return Err(GitError::refused(
                    word,
                    format_args!("more than {MAX_PATHSPECS} pathspecs"),
                ));
            }
            checked.pathspecs.push(word.clone());
            continue;
        }
        if word == "--" {
            after_dashdash = true;
            continue;
        }
        if word.starts_with('-') {
            match check_flag(sub, word) {
                Flag::Plain => checked.flags.push(word.clone()),
                Flag::TakesCount => {
                    let Some(n) = iter.next() else {
                        return Err(GitError::refused(word, "`-n` needs a count"));
                    };
                    if number(n, 10000).is_none() {
                        return Err(GitError::refused(
                            n,
                            "not a count for `-n` (a number up to 10000)",
                        ));
                    }
                    checked.flags.push(format!("--max-count={n}"));
                }
                Flag::No => return Err(refuse_flag(sub, word)),
            }
            continue;
        }
        let limit = match sub {
            GitSubcommand::Status => {
                return Err(GitError::refused(
                    word,
                    "git status takes no revisions; put paths after `--`",
                ))
            }
            GitSubcommand::Diff => 2,
            GitSubcommand::Log => 16,
        };
        if !is_revision(word) {
            return Err(GitError::refused(
                word,
                "not a revision (names of `A-Z a-z 0-9 . _ / -` with `~n`/`^n` suffixes, \
                 or ranges `A..B`/`A...B`); paths go after `--`",
            ));
        }
        if checked.revisions.len() == limit {
            return Err(GitError::refused(
                word,
                format_args!("git {} takes at most {limit} revisions", sub.as_str()),
            ));
        }
        checked.revisions.push(word.clone());
    }
    Ok(checked)
}

// ---------------------------------------------------------------------------
// The repository config
// ---------------------------------------------------------------------------

/// What [`plan`] learned from the repository config.
#[derive(Debug, Default)]
struct RepoConfig {
    /// Subsection names of `filter` sections, as the bytes git reads
    /// (neither decoded nor re-encoded: git compares them byte for byte
    /// with the `filter` attribute).
    filters: BTreeSet<Vec<u8>>,
}

/// One config entry: the section (lower case), the subsection (the bytes
/// of the file, unchanged) and the key (lower case; empty for a header).
type Entry = (String, Option<Vec<u8>>, String);

/// A reader of git config syntax (git 2.39 `config.c`), enough to learn
/// section names and keys; values are parsed only to find where they end.
struct ConfigParser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl ConfigParser<'_> {
    /// The next character, with `\r\n` read as `\n`; `None` at the end.
    fn next(&mut self) -> Option<u8> {
        let c = *self.bytes.get(self.pos)?;
        self.pos += 1;
        if c == b'\r' && self.bytes.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            return Some(b'\n');
        }
        Some(c)
    }

    fn is_keychar(c: u8) -> bool {
        c.is_ascii_alphanumeric() || c == b'-'
    }

    /// After `[`: the section (lowercased) and subsection, split as git
    /// splits the variable name: the section up to the first dot, the
    /// subsection after it (`[filter.A "B"]` is filter `a.B`; the legacy
    /// `[filter.A]` is filter `a`).
    fn header(&mut self) -> Option<(String, Option<Vec<u8>>)> {
        let mut base = Vec::new();
        let mut extended = None;
        loop {
            let c = self.next()?;
            if c == b']' {
                break;
            }
            if c == b' ' || c == b'\t' {
                // `[section "subsection"]`
                let mut c = self.next()?;
                while c == b' ' || c == b'\t' {
                    c = self.next()?;
                }
                if c != b'"' {
                    return None;
                }
                let mut sub = Vec::new();
                loop {
                    let mut c = self.next()?;
                    if c == b'\n' {
                        return None;
                    }
                    if c == b'"' {
                        break;
                    }
                    if c == b'\\' {
                        c = self.next()?;
                        if c == b'\n' {
                            return None;
                        }
                    }
                    sub.push(c);
                }
                if self.next()? != b']' {
                    return None;
                }
                extended = Some(sub);
                break;
            }
            if !Self::is_keychar(c) && c != b'.' {
                return None;
            }
            base.push(c.to_ascii_lowercase());
        }
        let base = String::from_utf8(base).ok()?;
        if base.is_empty() {
            return None;
        }
        let (section, rest) = match base.split_once('.') {
            Some((section, rest)) => (section.to_string(), Some(rest.to_string())),
            None => (base, None),
        };
        let sub = match (rest, extended) {
            (Some(rest), Some(ext)) => {
                let mut sub = rest.into_bytes();
                sub.push(b'.');
                sub.extend_from_slice(&ext);
                Some(sub)
            }
            (Some(rest), None) => Some(rest.into_bytes()),
            (None, ext) => ext,
        };
        Some((section, sub))
    }

    /// After a key's first character: the rest of the key (lowercased) and
    /// the value's end; `None` on a syntax error.
    fn key_value(&mut self, first: u8) -> Option<String> {
        let mut key = vec![first.to_ascii_lowercase()];
        let mut c;
        loop {
            c = self.next();
            match c {
                Some(k) if Self::is_keychar(k) => key.push(k.to_ascii_lowercase()),
                _ => break,
            }
        }
        while matches!(c, Some(b' ' | b'\t')) {
            c = self.next();
        }
        match c {
            None | Some(b'\n') => {}
            Some(b'=') => self.value()?,
            Some(_) => return None,
        }
        String::from_utf8(key).ok()
    }

    /// After `=`: skips the value (quotes, comments, escapes,
    /// continuations) through its end of line.
    fn value(&mut self) -> Option<()> {
        let mut quote = false;
        let mut comment = false;
        loop {
            let Some(c) = self.next() else {
                return if quote { None } else { Some(()) };
            };
            if c == b'\n' {
                return if quote { None } else { Some(()) };
            }
            if comment {
                continue;
            }
            if !quote && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            match c {
                b'\\' => match self.next() {
                    Some(b'\n' | b'\\' | b'"' | b'n' | b't' | b'b') => {}
                    _ => return None,
                },
                b'"' => quote = !quote,
                _ => {}
            }
        }
    }

    /// Every `(section, subsection, key)`, or `None` if the file does not
    /// parse.
    fn entries(bytes: &[u8]) -> Option<Vec<Entry>> {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let mut p = ConfigParser { bytes, pos: 0 };
        let mut section: Option<(String, Option<Vec<u8>>)> = None;
        let mut out = Vec::new();
        let mut comment = false;
        while let Some(c) = p.next() {
            if c == b'\n' {
                comment = false;
                continue;
            }
            if comment || matches!(c, b' ' | b'\t' | b'\r' | 0x0b | 0x0c) {
                continue;
            }
            if c == b'#' || c == b';' {
                comment = true;
                continue;
            }
            if c == b'[' {
                let (name, sub) = p.header()?;
                // A section header alone is recorded too: an empty
                // `[include]` is as suspicious as a full one.
                out.push((name.clone(), sub.clone(), String::new()));
                section = Some((name, sub));
                continue;
            }
            if !c.is_ascii_alphabetic() {
                return None;
            }
            let (name, sub) = section.clone()?;
            let key = p.key_value(c)?;
            out.push((name, sub, key));
        }
        Some(out)
    }
}

/// Why `-c filter.<name>.clean=` cannot name the driver `name` exactly, if
/// it cannot. git splits a `-c` argument at its first `=` and refuses a
/// key with a newline; an argument cannot hold NUL. Every other byte,
/// invalid UTF-8 included, reaches git unchanged, since the argument is
/// passed as bytes.
fn unoverridable(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        Some("an empty name")
    } else if name.contains(&b'=') {
        Some("`=` would end the key")
    } else if name.contains(&0) {
        Some("a NUL byte")
    } else if name.contains(&b'\n') {
        Some("a newline")
    } else {
        None
    }
}

fn scan_config(bytes: &[u8], into: &mut RepoConfig) -> Result<(), GitError> {
    let entries = ConfigParser::entries(bytes).ok_or_else(|| {
        GitError::repository(
            "confined git refuses the repository: its config does not parse (as git 2.39 reads it)",
        )
    })?;
    for (section, sub, key) in entries {
        match section.as_str() {
            "include" | "includeif" => {
                return Err(GitError::repository(
                    "confined git refuses the repository: its config includes other files \
                     (include/includeIf), which cannot be vetted",
                ))
            }
            "extensions" if key == "partialclone" => {
                return Err(GitError::repository(
                    "confined git refuses the repository: it is a partial clone, and a missing \
                     object would make git fetch",
                ))
            }
            "remote" if key == "promisor" => {
                return Err(GitError::repository(
                    "confined git refuses the repository: a promisor remote would make git fetch",
                ))
            }
            "filter" => {
                if let Some(name) = sub {
                    if let Some(why) = unoverridable(&name) {
                        return Err(GitError::repository(format!(
                            "confined git refuses the repository: filter driver `{}` cannot be \
                             neutralized byte for byte on git's command line ({why})",
                            shown_bytes(&name)
                        )));
                    }
                    into.filters.insert(name);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Inspects `<root>/.git`: `Ok(None)` when there is none, the vetted config
/// when it is a plain directory.
fn inspect_repository(root: &Path) -> Result<Option<RepoConfig>, GitError> {
    let dot_git = root.join(".git");
    let meta = match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(GitError::io("cannot inspect the root's .git", e)),
    };
    if meta.file_type().is_symlink() {
        return Err(GitError::repository(
            "confined git refuses the repository: the root's .git is a symbolic link",
        ));
    }
    if meta.is_file() {
        return Err(GitError::repository(
            "confined git refuses the repository: the root's .git is a `gitdir:` file, which \
             names a git directory elsewhere (a linked worktree or a submodule), and only \
             <root>/.git itself is vetted",
        ));
    }
    if !meta.is_dir() {
        return Err(GitError::repository(
            "confined git refuses the repository: the root's .git is not a directory",
        ));
    }
    match std::fs::symlink_metadata(dot_git.join("commondir")) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        _ => {
            return Err(GitError::repository(
                "confined git refuses the repository: .git/commondir names a repository \
                 elsewhere (linked worktree)",
            ))
        }
    }
    let mut config = RepoConfig::default();
    for name in ["config", "config.worktree"] {
        if let Some(bytes) = read_config_file(&dot_git, name)? {
            scan_config(&bytes, &mut config)?;
        }
    }
    Ok(Some(config))
}

/// The bytes of `.git/<name>`, `None` when it does not exist. The file must
/// be a regular file, not a symbolic link (git would follow one to a file
/// that is not vetted when it changes) and not a FIFO or device (which
/// could answer the vetting and git differently, or never answer); it is
/// opened without following links and without blocking, and checked on
/// the open descriptor.
fn read_config_file(dot_git: &Path, name: &str) -> Result<Option<Vec<u8>>, GitError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let refused = |what: &str| {
        GitError::repository(format!(
            "confined git refuses the repository: .git/{name} is {what}; only a regular file \
             can be vetted"
        ))
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(dot_git.join(name))
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(refused("a symbolic link")),
        Err(e) => return Err(GitError::io(&format!("cannot read .git/{name}"), e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| GitError::io(&format!("cannot read .git/{name}"), e))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(refused(if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        }));
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| GitError::io(&format!("cannot read .git/{name}"), e))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(GitError::repository(format!(
            "confined git refuses the repository: .git/{name} is over {MAX_CONFIG_BYTES} bytes"
        )));
    }
    Ok(Some(bytes))
}

// ---------------------------------------------------------------------------
// The invocation
// ---------------------------------------------------------------------------

/// A vetted git run: program, argv, environment and directory. Run it
/// without a shell, confined by [`GitInvocation::confine_spec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitInvocation {
    /// Git, by absolute path.
    pub program: PathBuf,
    /// The arguments after the program name.
    pub args: Vec<OsString>,
    /// The complete environment (the child gets nothing else).
    pub env: Vec<(OsString, OsString)>,
    /// The canonical root: git's work tree, and the directory it runs in
    /// unless the caller picks one beneath it (the repository is pinned by
    /// `GIT_DIR` and `GIT_WORK_TREE`, so the directory only sets the prefix
    /// that relative paths are taken from).
    pub cwd: PathBuf,
    /// The subcommand.
    pub subcommand: GitSubcommand,
}

impl GitInvocation {
    /// A [`std::process::Command`] for the invocation: program, args, a
    /// cleared environment with exactly [`GitInvocation::env`], and
    /// [`GitInvocation::cwd`]. Stdio is left to the caller.
    pub fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd);
        cmd
    }

    /// What git may touch when confined (a ruleset of its own, not the
    /// shell's): read and execute beneath the root and the system
    /// directories, write nothing (no write directory at all; `/dev/null`
    /// only), connect to and bind no TCP port, and `RLIMIT_FSIZE` 0 so that
    /// even without Landlock no regular file gains a byte. git needs no more
    /// for `status`, `diff` and `log` with `--no-optional-locks`: it writes
    /// no index, lock or temporary file. A driver the vetting missed, or a
    /// config rewritten between the vetting and git's own read, runs under
    /// the same ruleset. Prepare it with [`crate::confine::prepare`].
    pub fn confine_spec(&self) -> ConfineSpec {
        ConfineSpec {
            read_dirs: vec![self.cwd.clone()],
            write_dirs: Vec::new(),
            connect_ports: Vec::new(),
            max_file_size: Some(0),
            ..ConfineSpec::default()
        }
    }
}

/// The first of [`GIT_CANDIDATES`] that is an executable regular file.
pub fn find_git() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    GIT_CANDIDATES.iter().map(PathBuf::from).find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The fixed `-c` overrides every invocation gets (before the per-driver
/// ones).
pub const CONFIG_OVERRIDES: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "pager.status=false",
    "pager.diff=false",
    "pager.log=false",
    "diff.external=",
    "safe.bareRepository=explicit",
    "protocol.allow=never",
    "core.attributesFile=/dev/null",
    "log.showSignature=false",
    "gpg.program=/bin/false",
    "gpg.ssh.program=/bin/false",
    "gpg.x509.program=/bin/false",
    "credential.helper=",
    "core.askPass=",
    "diff.submodule=short",
];

/// Plans a confined git run from a request split by [`split_words`].
///
/// `words[0]` must be `git`, `words[1]` a confined subcommand that is in
/// `allowed`; the rest must fit the subcommand's schema (see the module
/// documentation). `root` is the directory git runs in (the policy's root);
/// its repository is inspected (`.git` must be a plain directory whose
/// config can be vetted, or absent). Refusals name the refused word.
pub fn plan(
    words: &[String],
    allowed: &[GitSubcommand],
    root: &Path,
) -> Result<GitInvocation, GitError> {
    match words.first() {
        Some(w) if w == "git" => {}
        Some(w) => {
            return Err(GitError::refused(
                w,
                "only `git` runs under confined git (process_allow git:status, git:diff, git:log)",
            ))
        }
        None => return Err(GitError::syntax("confined git refuses an empty request")),
    }
    let Some(word) = words.get(1) else {
        return Err(GitError::refused("git", "a subcommand is required"));
    };
    if word.starts_with('-') {
        let known = DANGEROUS_LONG
            .iter()
            .chain(DANGEROUS_SHORT)
            .any(|(f, _)| word == f || word.starts_with(&format!("{f}=")));
        return Err(if known {
            refuse_flag(GitSubcommand::Status, word)
        } else {
            GitError::refused(word, "git's global options are not admitted")
        });
    }
    let Some(sub) = GitSubcommand::from_word(word) else {
        return Err(GitError::refused(
            word,
            format_args!(
                "`git {}` is not a confined git subcommand (only status, diff and log)",
                shown(word)
            ),
        ));
    };
    if !allowed.contains(&sub) {
        return Err(GitError::new(
            GitErrorKind::NotAllowed,
            format!(
                "confined git refuses `git {}`: {} is not in process_allow",
                sub.as_str(),
                sub.allow_entry()
            ),
        ));
    }
    let checked = check_args(sub, &words[2..])?;

    let program = find_git().ok_or_else(|| {
        GitError::new(
            GitErrorKind::NoGit,
            "confined git: no git executable at /usr/bin/git, /usr/local/bin/git or /bin/git",
        )
    })?;
    let root =
        std::fs::canonicalize(root).map_err(|e| GitError::io("cannot resolve the root", e))?;
    let parent = match root.parent() {
        Some(p) if root != Path::new("/") => p.to_path_buf(),
        _ => {
            return Err(GitError::repository(
                "confined git refuses to run with the filesystem root as its root",
            ))
        }
    };
    if parent.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(GitError::repository(
            "confined git refuses a root whose parent path contains `:` (it cannot be a \
             GIT_CEILING_DIRECTORIES entry)",
        ));
    }
    let repo = inspect_repository(&root)?;
    if repo.is_none() && sub == GitSubcommand::Diff {
        return Err(GitError::repository(
            "confined git refuses `git diff`: the root is not a git repository (no .git), and \
             outside one git diff compares arbitrary paths",
        ));
    }
    // git is pinned to the vetted repository: with GIT_DIR set it never
    // searches from its working directory, so a repository nested beneath
    // the root (or planted there after this check) is never the one it
    // uses. Without a repository at the root, GIT_DIR names /dev/null,
    // which is never one: git answers "not a git repository".
    let git_dir = match &repo {
        Some(_) => root.join(".git").into_os_string(),
        None => OsString::from("/dev/null"),
    };
    let repo = repo.unwrap_or_default();

    let mut args: Vec<OsString> = Vec::new();
    for kv in CONFIG_OVERRIDES {
        args.push("-c".into());
        args.push((*kv).into());
    }
    for name in &repo.filters {
        for kv in ["clean=", "smudge=", "process=", "required=false"] {
            // `filter.<name>.<kv>`, the name's bytes exactly as the config
            // holds them.
            let mut arg = b"filter.".to_vec();
            arg.extend_from_slice(name);
            arg.push(b'.');
            arg.extend_from_slice(kv.as_bytes());
            args.push("-c".into());
            args.push(OsString::from_vec(arg));
        }
    }
    args.push("--no-pager".into());
    args.push("--no-optional-locks".into());
    args.push(sub.as_str().into());
    match sub {
        GitSubcommand::Status => args.push("--ignore-submodules=all".into()),
        GitSubcommand::Diff => {
            args.push("--no-ext-diff".into());
            args.push("--no-textconv".into());
            args.push("--ignore-submodules=all".into());
        }
        GitSubcommand::Log => {
            args.push("--no-ext-diff".into());
            args.push("--no-textconv".into());
        }
    }
    args.extend(checked.flags.into_iter().map(OsString::from));
    args.extend(checked.revisions.into_iter().map(OsString::from));
    args.push("--".into());
    args.extend(checked.pathspecs.into_iter().map(OsString::from));

    let env: Vec<(OsString, OsString)> = [
        ("PATH", OsString::from("/usr/bin:/bin")),
        ("HOME", "/nonexistent".into()),
        ("LANG", "C".into()),
        ("LC_ALL", "C".into()),
        ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ("GIT_CONFIG_GLOBAL", "/dev/null".into()),
        ("GIT_ATTR_NOSYSTEM", "1".into()),
        ("GIT_TERMINAL_PROMPT", "0".into()),
        ("GIT_OPTIONAL_LOCKS", "0".into()),
        ("GIT_NO_LAZY_FETCH", "1".into()),
        ("GIT_CEILING_DIRECTORIES", parent.into_os_string()),
        ("GIT_DIR", git_dir),
        ("GIT_WORK_TREE", root.clone().into_os_string()),
        ("GIT_PAGER", "cat".into()),
        ("PAGER", "cat".into()),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), v))
    .collect();

    Ok(GitInvocation {
        program,
        args,
        env,
        cwd: root,
        subcommand: sub,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(s: &str) -> Option<Vec<Entry>> {
        ConfigParser::entries(s.as_bytes())
    }

    #[test]
    fn config_parser_reads_git_syntax() {
        let e = entries(
            "[core]\n\tbare = false # c \\\n[filter \"Ev\\\"il\"] clean = \"a;b\" \\\n  more\n\
             [Filter.LEGACY]\nsmudge\n; [include]\n",
        )
        .unwrap();
        let filters: Vec<_> = e
            .iter()
            .filter(|(s, _, _)| s == "filter")
            .filter_map(|(_, sub, _)| sub.clone())
            .collect();
        assert!(filters.contains(&b"Ev\"il".to_vec()));
        assert!(filters.contains(&b"legacy".to_vec()));
        let e = entries("[filter.A \"B\"]\n\tclean = x\n").unwrap();
        assert!(e.contains(&("filter".into(), Some(b"a.B".to_vec()), "clean".into())));
        assert!(!e.iter().any(|(s, _, _)| s == "include"));
        // A continued value hides a would-be header.
        let e = entries("[core]\n x = a \\\n[include]\n").unwrap();
        assert!(!e.iter().any(|(s, _, _)| s == "include"));
        // Two headers on one line.
        let e = entries("[core] [include] path = x\n").unwrap();
        assert!(e.iter().any(|(s, _, _)| s == "include"));
        assert!(entries("[core\n").is_none());
        assert!(entries("[core]\n x = \"open\n").is_none());
        assert!(entries("x = 1\n").is_none());
    }

    #[test]
    fn subsections_keep_their_bytes() {
        let e = ConfigParser::entries(b"[filter \"\xff\\\xfe\"]\n\tclean = x\n").unwrap();
        assert_eq!(
            e[1],
            ("filter".into(), Some(b"\xff\xfe".to_vec()), "clean".into())
        );
        let mut config = RepoConfig::default();
        scan_config(b"[filter \"\xff\"]\n\tclean = x\n", &mut config).unwrap();
        assert!(config.filters.contains(b"\xff".as_slice()));
        for bad in [&b"[filter \"a=\xff\"]\n"[..], b"[filter \"\"]\n"] {
            let err = scan_config(bad, &mut RepoConfig::default()).unwrap_err();
            assert!(err.message().contains("byte for byte"), "{err}");
        }
        let err = scan_config(b"[filter \"a=\xff\"]\n", &mut RepoConfig::default()).unwrap_err();
        assert!(err.message().contains("`a=\\xff`"), "{err}");
    }

    #[test]
    fn revisions() {
        for ok in [
            "HEAD",
            "HEAD~1",
            "HEAD^",
            "HEAD^2~3",
            "main..HEAD",
            "a...b",
            "v1.0",
            "^main",
            "origin/main",
            "HEAD~3..",
            "..HEAD",
            "abc123",
        ] {
            assert!(is_revision(ok), "{ok}");
        }
        for bad in [
            "--all",
            "-x",
            "HEAD:file",
            "@{1}",
            "HEAD@{1}",
            "HEAD^{tree}",
            ":/msg",
            "/etc",
            "..",
            "...",
            ".hidden",
            "a..b..c",
            "^a..b",
            "a//b",
            "",
        ] {
            assert!(!is_revision(bad), "{bad}");
        }
    }
}
