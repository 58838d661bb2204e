//! Confined git: `process_allow = ["git:status", "git:diff",
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
//! 2. [`plan()`] checks the subcommand against `process_allow`, admits only
//!    the flags of that subcommand's schema (below), checks revisions and
//!    pathspecs, inspects the repository at the root and builds the
//!    hardened argv and environment.
//!
//! This module never runs a process itself. The executor runs the
//! invocation from its argv (never re-quoted into a shell string) with
//! [`crate::exec::LocalShellExecutor::exec_program`], confined by the
//! read-only ruleset [`GitInvocation::confine_spec`] describes. There is no
//! other way to run it: the tests go through the same entry point.
//!
//! The module is admission policy, in five parts: `words` (the splitter),
//! `schema` (each subcommand's flags, revisions and pathspecs), `config`
//! (the vetting reader of the repository config, on bytes), `index` (the
//! vetting reader of the repository's index) and `plan` (the argv, the
//! environment and the read-only ruleset). What is public is
//! re-exported here.
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
//!   into other machinery), also behind one of the modifiers git reads
//!   between `%` and a placeholder (`%-(describe)`, `% GG`). A bare name that is not built in would be a
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
//! - The repository is pinned: `GIT_DIR` names a private copy of what
//!   the vetting read of `<root>/.git` ([`GitInvocation::git_dir`]) and
//!   `GIT_WORK_TREE=<root>` (so a `core.worktree` in the repository
//!   config cannot point git at another directory). The copy is a
//!   directory of its own in the temporary directory (mode 0700, removed
//!   with the invocation; its name carries the owner process, as the
//!   executor's session directories do, and a copy whose owner was killed
//!   before it could remove it is removed by the next process to plan a
//!   run): the config files, the index, `HEAD`,
//!   `packed-refs`, `info/*` and every other file git may read in `.git`
//!   but `refs`, `logs`, `objects` and what the vetting passes over (the
//!   hooks and the like), as the very bytes that were read and vetted;
//!   `refs` and `logs` are links to the repository's, `objects` a
//!   directory of links to its object directories and packs, with an
//!   empty `info` (so no `alternates`). What git reads of the control
//!   files is what was vetted, whatever a concurrent command writes in
//!   `.git` meanwhile. git then
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
//!   `core.excludesFile=/dev/null`, `diff.orderFile=/dev/null`,
//!   `mailmap.file=/dev/null` (files named by the repository config,
//!   which would show what a host file holds through the answer: a
//!   mailmap's names, the ignored files, the order of a diff; the
//!   in-tree `.mailmap` and `.gitignore` still apply),
//!   `log.showSignature=false`, `gpg.program=/bin/false`,
//!   `gpg.ssh.program=/bin/false`, `gpg.x509.program=/bin/false`,
//!   `credential.helper=`, `core.askPass=`, `diff.submodule=short`,
//!   `index.threads=1` (the index is read entry after entry, as the vetting
//!   read it, never from offsets an `IEOT` extension gives),
//!   `color.ui=never`, `color.diff=never`, `color.status=never`,
//!   `color.advice=never` (the repository cannot colour the answer: no
//!   escape sequence of git's own, `--format`'s `%C(…)` included),
//!   `core.quotePath=true` (git quotes a file name with a control
//!   character, C1 ones such as U+009B included, whatever the repository
//!   says),
//!   `format.pretty=medium` (a `format.pretty` in the repository would be
//!   `git log`'s default format, with the `%(…)` and `%G` atoms the
//!   schema refuses in `--format`), and for
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
//! - `diff` gets `--no-walk`: git diff ignores it, but when `GIT_DIR` is
//!   not a repository git accepts (an empty `.git`, an unknown format
//!   version or extension, a `.git` removed after the vetting) git diff
//!   silently falls back to `--no-index`, where `git diff a b` compares two
//!   arbitrary paths (through symbolic links, to what git's ruleset may
//!   read); that mode refuses `--no-walk`, so git stops with a usage error.
//!
//! # The repository at the root
//!
//! [`plan()`] reads the repository's config files (`.git/config`,
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
//! - a file it copies (the config files, the index and the rest above)
//!   that is not a regular file: a symbolic link (below), a FIFO or a
//!   device (which could answer the vetting and git differently, or hold
//!   git until the timeout), or more than 64 MiB of them besides the
//!   config files and the index (a huge `packed-refs`);
//! - a symbolic link in `refs`, `logs` or a directory of `objects` that
//!   leads out of `.git` (absolute, or climbing out; each link on the way
//!   resolved beneath `.git` with `openat2(RESOLVE_BENEATH)`, every such
//!   link refused where the kernel has no `openat2`): git follows it, and
//!   a pack, loose objects and a ref linked to another repository made
//!   `git log -p` print that repository's commit, as `alternates` would. A
//!   link to a file that stays inside `.git` (an old-style symbolic ref) is
//!   admitted; a link there to a directory is not (git never makes one):
//!   git would read the refs beneath it from a directory the vetting does
//!   not look into (`hooks`, `objects/info`), whose entries may lead
//!   anywhere, so that a file beside the root was read as a branch and a
//!   FIFO held git until the timeout;
//! - a FIFO, socket or device in `refs`, `logs` or `objects` (git reads
//!   them through links to the repository's), or a link there to one: git
//!   opens a loose ref, a reflog, a pack or a loose object blocking, and a
//!   FIFO held it until the timeout. More than 1,000,000 entries there are
//!   refused;
//! - an index (`.git/index`, read as the config files are) with an entry
//!   whose name git's own `verify_path` would refuse: absolute, or with a
//!   `..`, `.`, `.git` or empty component. git takes the names as they are
//!   when it reads the index, so `../../etc/passwd` there would make
//!   `git diff` print that file. Also an entry whose directory in the work
//!   tree leads out of the root through a symbolic link (`lnk/f` with
//!   `lnk -> /etc`; resolved with `openat2(RESOLVE_BENEATH)`, any link on
//!   the way refused where the kernel has no `openat2`): git mostly passes
//!   such an entry over, but `git diff --cached` reads a staged blob from
//!   the work tree, through `lstat`, which follows the link, when the
//!   entry's stat data matches the file there (with the repository's
//!   `core.checkStat = minimal` and `core.fileMode = false`, only its
//!   mtime and size: a file a package installs has the same on every
//!   host). Also a split index (its shared index is not vetted) and an
//!   index that does not parse;
//! - a symbolic link anywhere in `.git` where git reads (all of it but
//!   `hooks`, `lfs`, `modules`, `worktrees`, `annex`, `svn`, `rr-cache`,
//!   the contents of `refs` and `logs`, what the directories in `objects`
//!   hold, and `objects/info` but `alternates`, which git never reads: it
//!   gets an empty `objects/info` of its own): git follows it, and
//!   files such as `objects/info/alternates`, `packed-refs`, `shallow`,
//!   `info/attributes` or `rebase-merge/done` are echoed in its messages
//!   when they do not parse, so a link to a host file would show it. More
//!   than 10,000 entries to look at are refused too;
//! - an `objects/info/alternates` that names a directory (a shared or
//!   referenced clone): git reads the objects there as its own, wherever
//!   they are, and `git log -p <id>` prints a commit of another
//!   repository on the host;
//! - a `.git` that is a symbolic link or a `gitdir:` file (the indirection
//!   can name any repository on the host, and only `<root>/.git` itself is
//!   vetted), or a `.git/commondir` (a linked worktree's repository lives
//!   elsewhere);
//! - a repository in the work tree that git reads and that does not vet:
//!   for every index entry whose path is a directory (a checked-out
//!   submodule, or a tracked file turned into a directory), reached without
//!   a symbolic link, git resolves the `HEAD` of `<path>/.git` (a directory,
//!   or a `gitdir:` file naming one) whatever `--ignore-submodules` says,
//!   and prints the first line of its `packed-refs` that does not parse. So
//!   that `.git` may not be a symbolic link, a `gitdir:` file must name a
//!   directory beneath the root (resolved with `openat2(RESOLVE_BENEATH)`;
//!   refused where the kernel has no `openat2`; its path read as git reads
//!   it: up to the first NUL byte, so `gitdir: fake\0` names `fake` and
//!   `gitdir: \0` the directory holding the file, and the root's own
//!   absolute path names the root), and the git directory may
//!   hold no `commondir`, its `HEAD`, `config`, `config.worktree` and
//!   `packed-refs` must be regular files (or absent) and its `refs` as
//!   above for the root's (no link leading out or to a directory, no
//!   FIFO). A `packed-refs` there linked to `/etc/passwd` was printed by
//!   `git status`, under git's ruleset too.
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
//! - Of the config keys that make git *read* another file on the host,
//!   those status, diff and log consult are overridden (above).
//! - git reads only the copy of the control files, but the loose refs,
//!   the reflogs and the objects through links to the repository's: a
//!   command that can write `.git/` can still change which commits a ref
//!   names, or swap the root's `.git` for another repository whose refs
//!   and objects git then reads (under git's read-only ruleset
//!   ([`GitInvocation::confine_spec`]), which reads the root and the
//!   system directories but `/etc`, of which only the dynamic linker's
//!   cache and the time zone: a host file git was led to echo is never
//!   one of `/etc`). A driver git would start is only ever named by
//!   the copied config, so none the vetting did not neutralize runs; the
//!   ruleset holds anything git starts regardless: it writes no file and
//!   opens no TCP connection, but its output reaches the caller.
//!   The write guard should still keep `.git/` read-only, and a `.git`
//!   planted at the root controls the repository.
//! - The answer is git's output, not escaped: terminal escape sequences
//!   in commit messages, names or file content reach the caller as they
//!   are (git quotes control characters in file names, C1 ones included,
//!   except under `-z`). Only git's own colour is switched off.
//! - git's `safe.directory` check does not apply: with `GIT_DIR` named,
//!   git never asks who owns the repository, so one owned by another user
//!   is used as vetted (plain git, discovering it, refuses it as of
//!   "dubious ownership"). The vetting, not the owner, is what makes a
//!   hostile repository harmless here.

use std::fmt;
use std::io;

use sandgate_codes::ErrorCode;

mod config;
mod index;
mod plan;
mod schema;
mod words;

pub use plan::{
    find_git, plan, vet, GitInvocation, CONFIG_OVERRIDES, GIT_CANDIDATES, GIT_ETC_FILES,
};
pub use schema::is_revision;
pub use words::split_words;

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

/// A refusal or failure from [`split_words`] or [`plan()`]. The message names
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
            message: format!("confined git: {what}"),
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

    /// The error code for the caller: a malformed request is `E_REQUEST`, a refusal
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

/// A word as shown in a message: spelt as every sandgate message spells a
/// name ([`sandgate_codes::shown`]: a backslash doubled, controls and
/// bidirectional controls as `\u{…}`, so that the text `\xff` or `\u{1b}`
/// in a word never reads like the byte or the control), long words cut
/// after 120 characters and marked `…`.
fn shown(word: &str) -> String {
    match word.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", sandgate_codes::shown(&word[..cut])),
        None => sandgate_codes::shown(word),
    }
}

/// Bytes (a name git reads: a file in the work tree, an index entry, a
/// config subsection) as shown in a message: as [`sandgate_codes::shown`]
/// shows a name, every byte that is not part of valid UTF-8 as `\xNN`.
fn shown_bytes(bytes: &[u8]) -> String {
    use std::os::unix::ffi::OsStrExt;
    sandgate_codes::shown(std::ffi::OsStr::from_bytes(bytes))
}
