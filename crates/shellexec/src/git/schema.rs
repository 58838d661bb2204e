//! The per-subcommand schema: the flags, revisions and pathspecs each
//! confined subcommand admits (the table is in the module documentation of
//! `git`).

use std::path::{Component, Path};

use super::words::MAX_WORD;
use super::{GitError, GitSubcommand};

/// The longest revision.
const MAX_REVISION: usize = 200;

/// The most pathspecs.
const MAX_PATH_ARGS: usize = 64;

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
pub(super) const DANGEROUS_LONG: &[(&str, &str)] = &[
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

pub(super) const DANGEROUS_SHORT: &[(&str, &str)] = &[
    ("-c", "it overrides configuration"),
    ("-C", "it changes the directory git runs in"),
    ("-O", "it reads an order file from an arbitrary path"),
    ("-P", "it runs a pager"),
];

pub(super) fn refuse_flag(sub: GitSubcommand, word: &str) -> GitError {
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
    is_custom
        && charset_ok(fmt, 500, "%<>()._:,- |")
        && !fmt.contains("%G")
        && !fmt.contains("%(")
        && !refused_placeholder(fmt)
}

/// Whether `fmt` holds a `%G…` placeholder (signature atoms: git verifies
/// the signature, with gpg) or a `%(…)` one (atoms that call into other
/// machinery: `%(describe)` starts `git describe` for every commit), also
/// behind the one modifier git reads between `%` and the placeholder
/// (`%-x`, `%+x`, `% x`): `%-(describe)` and `%-GG` are those atoms. `%%`
/// is a literal `%`.
fn refused_placeholder(fmt: &str) -> bool {
    let b = fmt.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        let mut at = i + 1;
        if b.get(at) == Some(&b'%') {
            i = at + 1;
            continue;
        }
        if matches!(b.get(at), Some(b'+' | b'-' | b' ')) {
            at += 1;
        }
        if matches!(b.get(at), Some(b'G' | b'(')) {
            return true;
        }
        i = at;
    }
    false
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
pub(super) struct Checked {
    pub(super) flags: Vec<String>,
    pub(super) revisions: Vec<String>,
    pub(super) pathspecs: Vec<String>,
}

pub(super) fn check_args(sub: GitSubcommand, args: &[String]) -> Result<Checked, GitError> {
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
            if checked.pathspecs.len() == MAX_PATH_ARGS {
                return Err(GitError::refused(
                    word,
                    format_args!("more than {MAX_PATH_ARGS} pathspecs"),
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

#[cfg(test)]
mod tests {
    use super::*;

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
