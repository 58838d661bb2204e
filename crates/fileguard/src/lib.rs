//! Deny-write patterns for sandgate (docs/reference/deny-write.md).
//!
//! An operator lists paths inside a sandbox root that an agent may read but
//! not change: the project's own supply chain (`.github/**`, `Makefile`,
//! `*.yml`), which would otherwise run with CI's authority once committed.
//! This crate decides, for a root-relative path, whether such a pattern
//! protects it. It is pure: no file system access, no I/O; the facade
//! (`sandgate`) calls it with the names it has resolved through
//! `sandgate-rootfs` and turns a refusal into `E_FS_PROTECTED`.
//!
//! # Threat model
//!
//! The agent chooses the names. It may spell a protected path in another
//! case (`.GITHUB/workflows/x.yml`), in another Unicode normalization form
//! (`e` + U+0301 for `é`), with look-alike case partners (`ſ` for `s`, the
//! Kelvin sign for `k`), through an in-root symlink, or by moving or
//! deleting a directory above the protected file. Each of these is answered
//! here: case- and normalization-insensitive matching on every platform
//! (a case-insensitive volume would treat those spellings as the same file;
//! on a case-sensitive one refusing them over-denies, the safe direction),
//! checks of both the spelled and the resolved name, and the ancestor rule
//! for renames and deletions. Hard links are the facade's part: no path
//! check sees a file's other names, so it refuses writing a multiply-linked
//! file whenever [`Guard::has_patterns`] is true.
//!
//! # Patterns
//!
//! - A pattern is a glob over `/`-separated components. `*`, `?` and `[...]`
//!   (with `!` or `^` to negate, `a-z` ranges, `\` to escape) match within
//!   one component; a `**` component matches zero or more whole components.
//! - A pattern containing `/` is anchored at the root: `tests/**` does not
//!   cover `cli/tests/x` (write `**/tests/**` for that). A pattern without
//!   `/` is matched against the base name at any depth (`*.yml`,
//!   `Makefile`), which includes the whole path when it has one component.
//! - `dir/**` covers `dir` itself and everything beneath it. A trailing
//!   slash (`dir/`) is read as `dir/**`.
//! - Refused at load ([`PatternError`]): empty, absolute (`/` or `\` first),
//!   holding a `..` component, or holding a NUL byte (no name can).
//!   Leading `./` is dropped (repeatedly), so `./Makefile` becomes the
//!   base-name pattern `Makefile`, which protects more than the root's
//!   `Makefile`, never less.
//! - A malformed component (unclosed `[`, reversed range, dangling `\`, `\`
//!   before a letter or digit as in `.github\workflows\*`, `**` inside a
//!   component, `{a,b}` alternation) fails closed: it matches like
//!   `*`, and [`Guard::warnings`] reports it.
//! - In restricted mode every path with a component that folds to `.git` is
//!   protected (`.gitignore`, `.git.bak` and `a.git` are ordinary names).
//!
//! # Equivalence
//!
//! Both patterns (their literal parts and class members) and paths are
//! compared in [`fold`]ed form: NFC, then a full case fold that merges `ſ`
//! with `s`, the Kelvin sign with `k`, `ß` with `ss`, `ς` with `σ`, and all
//! four Turkish i's (`i`, `I`, `ı`, `İ`). See [`fold`] for the definition
//! and its guarantees. Folding decides only which spellings count as the
//! same protected name; it never widens what a root grants.
//!
//! `?` matches one character as a person sees it: a precomposed or
//! decomposed `é`, a base with combining marks, or the several letters a
//! single character folds to (`stra?e` matches `straße`, hence also
//! `STRASSE`, which is the same name). A class `[...]` matches the same
//! units, restricted to (or, negated, excluding) the folds of its members;
//! `[A-Z]` matches `ſ` and the Kelvin sign. A member written decomposed
//! (`[e\u{301}]`, Hangul jamo) is the character NFC composes it to. A combining mark written right
//! after `*`, `?` or a class is matched as a character of its own.
//!
//! # Example
//!
//! ```
//! use sandgate_fileguard::{GuardBuilder, Matched, Rule};
//!
//! let guard = GuardBuilder::new()
//!     .pattern(".claude/settings.json")
//!     .pattern("*.yml")
//!     .restricted(true)
//!     .build()?;
//!
//! // Ordinary writes check the target only.
//! assert!(guard.check_write(".CLAUDE/Settings.JSON", None).is_refused());
//! assert!(guard.check_write(".claude/notes.md", None).is_allowed());
//!
//! // Renames and deletes also protect the directories above.
//! let verdict = guard.check_rename_or_delete(".claude", None);
//! let refusal = verdict.refusal().unwrap();
//! assert_eq!(refusal.pattern(), Some(".claude/settings.json"));
//! assert!(refusal.is_ancestor());
//!
//! // A symlink to a protected file is refused like its target.
//! let verdict = guard.check_write("link", Some("deploy/ci.yml"));
//! let refusal = verdict.refusal().unwrap();
//! assert_eq!((refusal.path(), refusal.matched()), ("deploy/ci.yml", Matched::Resolved));
//!
//! // Restricted mode protects .git at any depth.
//! assert_eq!(guard.check_write("sub/.Git/config", None).refusal().unwrap().rule(), Rule::GitDir);
//! # Ok::<(), sandgate_fileguard::PatternError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod fold;
mod glob;
mod guard;
mod pattern;

pub use crate::fold::fold;
pub use crate::glob::Malformed;
pub use crate::guard::{
    Candidate, Guard, GuardBuilder, Matched, Refusal, Rule, Verdict, GIT_RULE, TRAVERSAL_RULE,
};
pub use crate::pattern::{Pattern, PatternError, PatternErrorKind, Warning};
