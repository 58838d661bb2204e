//! The guard: a set of compiled patterns and the checks run against it.

use std::borrow::Cow;
use std::fmt;

use crate::fold::{fold, is_ignorable};
use crate::glob::{Comp, Lit, Name, EMPTIED};
use crate::pattern::{Pattern, PatternError, Shape, Warning};

/// Builds a [`Guard`] from deny-write patterns, in the style of globset's
/// `GlobSetBuilder`.
///
/// ```
/// use sandgate_fileguard::GuardBuilder;
///
/// let guard = GuardBuilder::new()
///     .pattern(".github/**")
///     .pattern("*.yml")
///     .restricted(true)
///     .build()?;
/// assert!(guard.check_write("ci/deploy.YML", None).is_refused());
/// assert!(guard.check_write("src/main.rs", None).is_allowed());
/// # Ok::<(), sandgate_fileguard::PatternError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct GuardBuilder {
    patterns: Vec<String>,
    restricted: bool,
}

impl GuardBuilder {
    /// An empty builder: no patterns, not restricted.
    pub fn new() -> GuardBuilder {
        GuardBuilder::default()
    }

    /// Adds a deny-write pattern. It is checked when [`build`](Self::build)
    /// runs; patterns are reported in the order added.
    pub fn pattern(&mut self, pattern: &str) -> &mut GuardBuilder {
        self.patterns.push(pattern.to_owned());
        self
    }

    /// Adds several deny-write patterns.
    pub fn patterns<I, S>(&mut self, patterns: I) -> &mut GuardBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.patterns
            .extend(patterns.into_iter().map(|p| p.as_ref().to_owned()));
        self
    }

    /// Restricted mode: additionally protect every path with a component
    /// that folds to `.git`, at any depth (docs/reference/deny-write.md).
    pub fn restricted(&mut self, yes: bool) -> &mut GuardBuilder {
        self.restricted = yes;
        self
    }

    /// Compiles the patterns. Fails on the first pattern that is empty,
    /// absolute or has a `..` component (docs/reference/deny-write.md); a malformed component
    /// does not fail the build but is reported by [`Guard::warnings`].
    pub fn build(&self) -> Result<Guard, PatternError> {
        let mut warnings = Vec::new();
        let patterns = self
            .patterns
            .iter()
            .map(|p| Pattern::parse(p, &mut warnings))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Guard {
            index: Index::new(&patterns),
            patterns,
            restricted: self.restricted,
            warnings,
        })
    }
}

/// Compiled deny-write protection (docs/reference/deny-write.md): the operator's patterns plus,
/// in restricted mode, the `.git` rule. Pure: it judges path strings and
/// touches no file system.
///
/// Build it once per policy with [`GuardBuilder`] and share it by reference
/// (it is `Send + Sync`). A check folds the path once and allocates nothing
/// when the path is already in folded form (lowercase ASCII, most lowercase
/// text in other scripts).
///
/// # Paths
///
/// Checks take root-relative, `/`-separated names that the caller has
/// already validated (docs/reference/names.md). Empty and `.` components are skipped, so
/// `a//b/./c` is `a/b/c`. The root itself (`""` or `.`) is always allowed:
/// it is never a valid target of a mutation, and the caller refuses it with
/// `E_PATH_INVALID` before asking. A name that still has a `..` component
/// cannot be judged and is refused ([`Rule::Traversal`]) whenever the guard
/// protects anything.
///
/// # Three flavours of check
///
/// - [`check_write`](Guard::check_write), for writing a file and making a
///   directory: refused when the target matches.
/// - [`check_rename_or_delete`](Guard::check_rename_or_delete), for both
///   ends of a rename and for deletion: refused also when the target is an
///   ancestor of something a pattern could match, since moving or removing
///   the directory would move or remove that too.
/// - [`check_link`](Guard::check_link), for a symbolic link's name (made,
///   renamed or deleted there): refused also when a pattern could match a
///   path beneath it that it would not match beneath the link's target.
///
/// # The ancestor rule
///
/// An anchored pattern protects a directory `d` when some path strictly
/// beneath `d` could match it: `.claude/settings.json` protects `.claude`;
/// `a/b/**` protects `a` and `a/b`; `a/*/x.txt` protects `a` and every
/// `a/<name>`; `**/x` protects every directory. It is decided by running the
/// pattern over `d`'s components and asking whether the pattern can still
/// continue: a state short of the end is alive.
///
/// Unanchored (base-name) patterns such as `*.yml` or `Makefile` protect no
/// ancestors: they follow files wherever they go rather than freezing the
/// directories that happen to hold them. The restricted-mode `.git` rule is
/// base-name-like in the same way: it protects `.git` and everything in it,
/// but not `sub` in `sub/.git`. A caller deleting a tree recursively must
/// check each entry.
///
/// The rule concerns directories, and the guard cannot tell a directory from
/// a file: [`check_rename_or_delete`](Guard::check_rename_or_delete) treats
/// every target as a possible directory. For a target known not to be one
/// (a regular file or a symlink being removed or renamed), nothing lies
/// beneath it, so [`check_write`](Guard::check_write) gives the answer;
/// asking `check_rename_or_delete` about it is safe but over-denies (with
/// `**/node_modules/**` configured, every name could be a directory that
/// holds a `node_modules`).
#[derive(Clone, Default)]
pub struct Guard {
    patterns: Vec<Pattern>,
    index: Index,
    restricted: bool,
    warnings: Vec<Warning>,
}

/// Pattern numbers sorted by the cheapest test that can rule a pattern out,
/// so a check spends one integer comparison on most patterns. Every list is
/// in pattern order.
#[derive(Clone, Default)]
struct Index {
    /// Unanchored patterns that are a literal name: refuse when the base
    /// name equals it.
    base_literals: Vec<(Lit, u32)>,
    /// Anchored patterns whose first component is a literal: worth running
    /// only when the path's first name equals it.
    first_literals: Vec<(Lit, u32)>,
    /// The rest, run every time.
    others: Vec<u32>,
}

impl Index {
    fn new(patterns: &[Pattern]) -> Index {
        let mut index = Index::default();
        for (i, p) in patterns.iter().enumerate() {
            let i = i as u32;
            match (p.is_anchored(), p.comps[0].literal()) {
                (false, Some(lit)) => index.base_literals.push((lit.clone(), i)),
                (true, Some(lit)) => index.first_literals.push((lit.clone(), i)),
                _ => index.others.push(i),
            }
        }
        index
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field(
                "patterns",
                &self
                    .patterns
                    .iter()
                    .map(Pattern::as_str)
                    .collect::<Vec<_>>(),
            )
            .field("restricted", &self.restricted)
            .field("warnings", &self.warnings.len())
            .finish()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    RenameOrDelete,
    Link,
}

impl Guard {
    /// Whether any protection is in force: a written pattern, or restricted
    /// mode (whose `.git` rule acts as the pattern `**/.git/**`).
    ///
    /// The facade refuses to write a regular file with more than one hard
    /// link (`E_HARDLINK`) whenever this is true, because no path check sees
    /// a file's other names: in restricted mode, a hard link to
    /// `.git/config` would otherwise be writable through its second name.
    pub fn has_patterns(&self) -> bool {
        !self.patterns.is_empty() || self.restricted
    }

    /// The patterns as written, in order.
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    /// Whether restricted mode (the `.git` rule) is on.
    pub fn is_restricted(&self) -> bool {
        self.restricted
    }

    /// Malformed pattern components found at build, each treated as `*`.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Checks an ordinary write or mkdir of `spelled` (docs/reference/deny-write.md): refused when
    /// the target itself is protected. No ancestor rule.
    ///
    /// `resolved` is the same target after in-root symlinks were followed,
    /// when it differs; a refusal of it names it (an in-root symlink to a
    /// protected file is refused like its target).
    pub fn check_write<'a>(&'a self, spelled: &'a str, resolved: Option<&'a str>) -> Verdict<'a> {
        self.check_str(Op::Write, spelled, resolved)
    }

    /// Checks one end of a rename, or a deletion, of `spelled` (docs/reference/deny-write.md):
    /// refused when the target is protected or is an ancestor of something
    /// an anchored pattern protects (see "The ancestor rule" on [`Guard`]).
    /// `resolved` as for [`check_write`](Self::check_write).
    ///
    /// Meant for targets that are, or after the rename will be, directories;
    /// for any other target [`check_write`](Self::check_write) answers the
    /// same question without the over-denial of treating it as a directory.
    pub fn check_rename_or_delete<'a>(
        &'a self,
        spelled: &'a str,
        resolved: Option<&'a str>,
    ) -> Verdict<'a> {
        self.check_str(Op::RenameOrDelete, spelled, resolved)
    }

    /// Checks a symbolic link entry at `spelled`: made there, renamed or
    /// moved there, or removed or renamed away from there
    /// (docs/reference/deny-write.md). Refused when the name is protected,
    /// or when a pattern could match a path strictly beneath it that it
    /// would not match beneath every other name: the paths beneath a link
    /// lead wherever it leads, so `ln -s mine .claude` makes
    /// `.claude/settings.json` read `mine/settings.json`, and `ln -s mine
    /// secrets` under `**/secrets/*.json` makes `secrets/a.json` read
    /// `mine/a.json`.
    ///
    /// Unlike [`check_rename_or_delete`](Self::check_rename_or_delete), a
    /// `**` at the start of a pattern is taken to stand for any prefix, the
    /// link's target included: under `**/.github/workflows/*` a link named
    /// `node_modules/pkg` is not refused, since `node_modules/pkg/.github/
    /// workflows/x` matches exactly where `<target>/.github/workflows/x`
    /// does. Base-name patterns (`*.lock`) and the restricted-mode `.git`
    /// rule refuse only a link whose own name they match, for the same
    /// reason. `resolved` as for [`check_write`](Self::check_write).
    pub fn check_link<'a>(&'a self, spelled: &'a str, resolved: Option<&'a str>) -> Verdict<'a> {
        self.check_str(Op::Link, spelled, resolved)
    }

    /// [`check_write`](Self::check_write) for prepared candidates.
    pub fn check_write_candidate<'a>(
        &'a self,
        spelled: &Candidate<'a>,
        resolved: Option<&Candidate<'a>>,
    ) -> Verdict<'a> {
        self.check(Op::Write, spelled, resolved)
    }

    /// [`check_rename_or_delete`](Self::check_rename_or_delete) for prepared
    /// candidates.
    pub fn check_rename_or_delete_candidate<'a>(
        &'a self,
        spelled: &Candidate<'a>,
        resolved: Option<&Candidate<'a>>,
    ) -> Verdict<'a> {
        self.check(Op::RenameOrDelete, spelled, resolved)
    }

    fn check_str<'a>(&'a self, op: Op, spelled: &'a str, resolved: Option<&'a str>) -> Verdict<'a> {
        if !self.has_patterns() {
            return Verdict::Allow;
        }
        let spelled = Candidate::new(spelled);
        let resolved = resolved.map(Candidate::new);
        self.check(op, &spelled, resolved.as_ref())
    }

    fn check<'a>(
        &'a self,
        op: Op,
        spelled: &Candidate<'a>,
        resolved: Option<&Candidate<'a>>,
    ) -> Verdict<'a> {
        if !self.has_patterns() {
            return Verdict::Allow;
        }
        // The resolved path goes first so that, when both match, the refusal
        // names where the write would really land.
        let resolved = resolved.filter(|r| r.folded != spelled.folded);
        for (cand, matched) in [
            (resolved, Matched::Resolved),
            (Some(spelled), Matched::Spelled),
        ] {
            let Some(cand) = cand else { continue };
            let judged = with_components(&cand.folded, |path| self.judge(op, path));
            if let Some((rule, ancestor)) = judged {
                return Verdict::Refuse(Refusal {
                    rule,
                    path: cand.path,
                    matched,
                    ancestor,
                });
            }
        }
        Verdict::Allow
    }

    /// The rule that refuses the folded, split path, if any, and whether it
    /// refused it as an ancestor. Direct matches outrank ancestor matches;
    /// among equals the first pattern written wins.
    fn judge(&self, op: Op, path: &Split<'_, '_>) -> Option<(Rule<'_>, bool)> {
        let names = path.names;
        let (first, last) = (names.first()?, names.last()?);
        if path.has_parent {
            return Some((Rule::Traversal, false));
        }
        let want_ancestor = op != Op::Write;
        let any_prefix = op == Op::Link;
        // The lowest-numbered pattern matching directly, and as an ancestor.
        let (mut direct, mut ancestor) = (u32::MAX, u32::MAX);
        let mut run = |i: u32| {
            if i > direct {
                return;
            }
            let p = &self.patterns[i as usize];
            let (d, a) = if p.is_anchored() {
                anchored_match(p, names, want_ancestor && i < ancestor, any_prefix)
            } else {
                (p.comps[0].matches(last), false)
            };
            if d {
                direct = direct.min(i);
            } else if a {
                ancestor = ancestor.min(i);
            }
        };
        for (lit, i) in &self.index.base_literals {
            if lit.eq(last) {
                run(*i);
                break;
            }
        }
        for (lit, i) in &self.index.first_literals {
            if lit.eq(first) {
                run(*i);
            }
        }
        for &i in &self.index.others {
            run(i);
        }
        let pattern = |i: u32| Rule::Pattern(self.patterns[i as usize].as_str());
        if direct != u32::MAX {
            return Some((pattern(direct), false));
        }
        if self.restricted && path.has_git {
            return Some((Rule::GitDir, false));
        }
        (ancestor != u32::MAX).then(|| (pattern(ancestor), true))
    }
}

/// Matches an anchored pattern against path components. Returns whether the
/// path matches, and (when asked) whether something strictly beneath it
/// could. With `any_prefix`, a match beneath it counts only when it does
/// not come from a leading `**` standing for the whole path: the states a
/// leading `**` reaches before any name are alive after every path, so a
/// path beneath any other name matches from them alike.
fn anchored_match(
    p: &Pattern,
    path: &[Name<'_>],
    want_ancestor: bool,
    any_prefix: bool,
) -> (bool, bool) {
    // Two common shapes, decided without the state machine. A leading `**`
    // keeps the first state alive, so every directory is an ancestor; what
    // it alone keeps alive is alive beneath any name.
    match p.shape() {
        Shape::AnyName(lit) => {
            return (path.iter().any(|n| lit.eq(n)), want_ancestor && !any_prefix)
        }
        Shape::LastName(lit) => {
            return (
                path.last().is_some_and(|n| lit.eq(n)),
                want_ancestor && !any_prefix,
            )
        }
        Shape::General => {}
    }
    let comps = &p.comps;
    if !p.has_recursive() {
        // Each pattern component takes exactly one path component.
        if path.len() > comps.len() || (!want_ancestor && path.len() < comps.len()) {
            return (false, false);
        }
        if !comps.iter().zip(path).all(|(c, name)| c.matches(name)) {
            return (false, false);
        }
        return (path.len() == comps.len(), path.len() < comps.len());
    }
    let ignore_leading = any_prefix && matches!(comps.first(), Some(Comp::Recursive));
    let (end, alive_short_of_end) = match p.recursive_mask() {
        Some(rec) => run_bits(comps, rec, path, ignore_leading),
        None => run_states(comps, path, ignore_leading),
    };
    (end, want_ancestor && alive_short_of_end)
}

/// The component-level NFA for patterns of fewer than 64 components, on a
/// bit set. Bit `j` means "the path so far matches the first `j` pattern
/// components"; a `**` at `j` (bit `j` of `rec`) may stay at `j` while
/// consuming a name, or step to `j + 1` without one. Returns whether the end
/// state is reached, and whether any earlier state is (then a longer path
/// beneath could still match, since every component can match some name),
/// leaving out, with `ignore_start`, the states alive before any name.
fn run_bits(comps: &[Comp], rec: u64, path: &[Name<'_>], ignore_start: bool) -> (bool, bool) {
    let n = comps.len();
    let close = |mut s: u64| loop {
        let t = s | ((s & rec) << 1);
        if t == s {
            return s;
        }
        s = t;
    };
    let mut cur = close(1);
    let start = if ignore_start { cur } else { 0 };
    for name in path {
        let mut next = cur & rec;
        let mut single = cur & !rec & !(1 << n);
        while single != 0 {
            let j = single.trailing_zeros() as usize;
            single &= single - 1;
            if comps[j].matches(name) {
                next |= 1 << (j + 1);
            }
        }
        cur = close(next);
        if cur == 0 {
            return (false, false);
        }
    }
    (cur & (1 << n) != 0, cur & !(1 << n) & !start != 0)
}

/// [`run_bits`] for patterns too long for one word.
fn run_states(comps: &[Comp], path: &[Name<'_>], ignore_start: bool) -> (bool, bool) {
    let n = comps.len();
    let close = |s: &mut Vec<bool>| {
        for (j, c) in comps.iter().enumerate() {
            if matches!(c, Comp::Recursive) && s[j] {
                s[j + 1] = true;
            }
        }
    };
    let mut cur = vec![false; n + 1];
    cur[0] = true;
    close(&mut cur);
    let start = if ignore_start {
        cur.clone()
    } else {
        vec![false; n + 1]
    };
    for name in path {
        let mut next = vec![false; n + 1];
        for (j, c) in comps.iter().enumerate() {
            if !cur[j] {
                continue;
            }
            match c {
                Comp::Recursive => next[j] = true,
                c if c.matches(name) => next[j + 1] = true,
                _ => {}
            }
        }
        close(&mut next);
        if !next.contains(&true) {
            return (false, false);
        }
        cur = next;
    }
    (cur[n], (0..n).any(|j| cur[j] && !start[j]))
}

/// A folded path split into names, with what the special rules need to know.
struct Split<'a, 'b> {
    names: &'b [Name<'a>],
    /// A `..` component is present, or one that folds to `.` or `..`.
    has_parent: bool,
    /// A component is exactly `.git` (the path is folded already).
    has_git: bool,
}

/// Splits a folded path into its components, skipping empty and `.` ones,
/// without allocating for paths of up to 32 components.
fn with_components<R>(path: &str, f: impl FnOnce(&Split<'_, '_>) -> R) -> R {
    // Deeper paths are rare; they spill to the heap.
    const INLINE: usize = 16;
    let mut buf = [Name::new(""); INLINE];
    let mut spill: Vec<Name<'_>> = Vec::new();
    let (mut n, mut has_parent, mut has_git) = (0, false, false);
    let mut start = 0;
    for end in slashes(path.as_bytes()).chain([path.len()]) {
        let c = path.get(start..end).unwrap_or("");
        start = end + 1;
        match c {
            "" | "." => continue,
            ".." => has_parent = true,
            ".git" => has_git = true,
            // Folds to `.` or `..` (see `fold_path`): on a volume that folds
            // names, a lookup may take it for the directory or its parent,
            // so it is no more judged than `..`.
            _ if c.starts_with(EMPTIED) && c.len() > EMPTIED.len_utf8() => has_parent = true,
            _ => {}
        }
        let name = Name::new(c);
        if n < INLINE {
            buf[n] = name;
        } else {
            if spill.is_empty() {
                spill.extend_from_slice(&buf);
            }
            spill.push(name);
        }
        n += 1;
    }
    let names = if n <= INLINE { &buf[..n] } else { &spill[..] };
    f(&Split {
        names,
        has_parent,
        has_git,
    })
}

/// Byte offsets of the `/` in `b`, found eight bytes at a time: path names
/// are short, and a `memchr` call per name costs more than the scan.
fn slashes(b: &[u8]) -> impl Iterator<Item = usize> + '_ {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const SLASHES: u64 = 0x2F2F_2F2F_2F2F_2F2F;
    let chunks = b.chunks_exact(8);
    let rest = chunks.remainder();
    let whole = chunks.enumerate().flat_map(|(i, chunk)| {
        let x = chunk
            .first_chunk::<8>()
            .map_or(0, |c| u64::from_le_bytes(*c))
            ^ SLASHES;
        // High bit set exactly in the bytes of `x` that are zero.
        let mut zeros = !(((x & LOW7) + LOW7) | x | LOW7);
        std::iter::from_fn(move || {
            (zeros != 0).then(|| {
                let at = i * 8 + (zeros.trailing_zeros() / 8) as usize;
                zeros &= zeros - 1;
                at
            })
        })
    });
    let base = b.len() - rest.len();
    whole.chain(
        rest.iter()
            .enumerate()
            .filter(|(_, &c)| c == b'/')
            .map(move |(i, _)| base + i),
    )
}

/// A path prepared for checking: folded once, checked many times (like
/// globset's `Candidate`).
///
/// Useful when one path is checked against several guards, or as both the
/// spelled and the resolved name. Folding borrows when the path is already
/// in folded form.
#[derive(Clone, Debug)]
pub struct Candidate<'a> {
    path: &'a str,
    folded: Cow<'a, str>,
}

impl<'a> Candidate<'a> {
    /// Prepares a root-relative, `/`-separated path.
    pub fn new(path: &'a str) -> Candidate<'a> {
        Candidate {
            path,
            folded: fold_path(path),
        }
    }

    /// The path as given.
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// The path in folded form (see [`fold`](crate::fold())), component by
    /// component: a component that folding would empty or turn into `.` or
    /// `..` (it is made of ignorable code points, and dots) is kept as a
    /// name of its own, marked with U+200B ZERO WIDTH SPACE, which no
    /// other fold holds.
    pub fn folded(&self) -> &str {
        &self.folded
    }
}

/// Folds a root-relative path for matching. A component made only of
/// ignorable code points (and dots) names a real entry, yet folds to
/// nothing, `.` or `..`; judged so, `packages/\u{200b}/package.json` would
/// lose a component and escape `packages/*/package.json`. Such a component
/// keeps a place of its own, marked with [`EMPTIED`]. One that folds to
/// `.` or `..` (`\u{200b}.`) is a name of its own on most volumes, but a
/// volume that folds names may look it up as `.` or `..`; the guard
/// refuses it like `..` ([`Rule::Traversal`]) rather than guess.
fn fold_path(path: &str) -> Cow<'_, str> {
    if path.is_ascii() || !path.chars().any(is_ignorable) {
        return fold(path);
    }
    let mut out = String::with_capacity(path.len() + 8);
    for (i, comp) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        let folded = fold(comp);
        if matches!(&*folded, "" | "." | "..") && comp != folded {
            out.push(EMPTIED);
        }
        out.push_str(&folded);
    }
    Cow::Owned(out)
}

/// The answer of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Verdict<'a> {
    /// No rule protects the path.
    Allow,
    /// A rule protects the path; the facade reports `E_FS_PROTECTED`.
    Refuse(Refusal<'a>),
}

impl<'a> Verdict<'a> {
    /// True for [`Verdict::Allow`].
    pub fn is_allowed(&self) -> bool {
        matches!(self, Verdict::Allow)
    }

    /// True for [`Verdict::Refuse`].
    pub fn is_refused(&self) -> bool {
        !self.is_allowed()
    }

    /// The refusal, if refused.
    pub fn refusal(&self) -> Option<&Refusal<'a>> {
        match self {
            Verdict::Allow => None,
            Verdict::Refuse(r) => Some(r),
        }
    }
}

/// Why a path is protected: which rule, which path, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal<'a> {
    rule: Rule<'a>,
    path: &'a str,
    matched: Matched,
    ancestor: bool,
}

impl<'a> Refusal<'a> {
    /// The rule that matched.
    pub fn rule(&self) -> Rule<'a> {
        self.rule
    }

    /// The pattern exactly as the operator wrote it, when a written pattern
    /// matched (the text to attach to `E_FS_PROTECTED`).
    pub fn pattern(&self) -> Option<&'a str> {
        match self.rule {
            Rule::Pattern(p) => Some(p),
            _ => None,
        }
    }

    /// The path that matched, as the caller passed it: the resolved path
    /// when that is what matched.
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// Whether the spelled or the resolved path matched.
    pub fn matched(&self) -> Matched {
        self.matched
    }

    /// Whether the path was refused as an ancestor of protected paths rather
    /// than as a match itself (rename and delete only).
    pub fn is_ancestor(&self) -> bool {
        self.ancestor
    }
}

impl fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.path)?;
        if self.matched == Matched::Resolved {
            f.write_str(" (where the path resolves)")?;
        }
        match (self.rule, self.ancestor) {
            (Rule::Pattern(p), false) => write!(f, " is protected by deny-write pattern `{p}`"),
            (Rule::Pattern(p), true) => write!(
                f,
                " is above paths protected by deny-write pattern `{p}`, so it cannot be renamed or deleted"
            ),
            (Rule::GitDir, _) => {
                f.write_str(" is a .git directory or inside one, which restricted mode protects")
            }
            (Rule::Traversal, _) => {
                f.write_str(
                    " has a `..` component (or one that folds to `.` or `..`), which deny-write \
                     protection cannot judge",
                )
            }
        }
    }
}

/// The rule behind a [`Refusal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule<'a> {
    /// A written pattern, exactly as written.
    Pattern(&'a str),
    /// Restricted mode's rule: a path component folds to `.git`.
    GitDir,
    /// The path still has a `..` component (it should have been resolved or
    /// refused before the check), or a component that folds to `.` or `..`
    /// (`\u{200b}.`, which a volume that folds names may look up as such);
    /// refused because it cannot be judged.
    Traversal,
}

impl<'a> Rule<'a> {
    /// Text naming the rule: the pattern as written, [`GIT_RULE`] or
    /// [`TRAVERSAL_RULE`].
    pub fn as_str(&self) -> &'a str {
        match self {
            Rule::Pattern(p) => p,
            Rule::GitDir => GIT_RULE,
            Rule::Traversal => TRAVERSAL_RULE,
        }
    }
}

impl fmt::Display for Rule<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// [`Rule::as_str`] of [`Rule::GitDir`]: the marker reported in place of a
/// pattern for the restricted-mode `.git` rule. It starts with `/`, so no
/// accepted pattern can be spelled the same.
pub const GIT_RULE: &str = "/(restricted mode: .git)";

/// [`Rule::as_str`] of [`Rule::Traversal`].
pub const TRAVERSAL_RULE: &str = "/(unresolved ..)";

/// Which of the two names of a target matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Matched {
    /// The path as spelled by the caller.
    Spelled,
    /// The path after in-root symlinks were resolved.
    Resolved,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync_clone_debug<T: Send + Sync + Clone + fmt::Debug>() {}

    #[test]
    fn guard_is_send_sync_clone_debug() {
        assert_send_sync_clone_debug::<Guard>();
        assert_send_sync_clone_debug::<Candidate<'static>>();
    }

    fn split(path: &str) -> (String, bool, bool) {
        with_components(path, |s| {
            let names: Vec<&str> = s.names.iter().map(|n| n.text).collect();
            (names.join("|"), s.has_parent, s.has_git)
        })
    }

    #[test]
    fn slashes_are_found_like_split_finds_them() {
        for path in [
            "",
            "/",
            "a",
            "a/b",
            "//a//",
            "0123456/89/",
            "a/b/c/d/e/f/g/h/i/j",
            "ж/日本/x/",
        ] {
            let expected: Vec<usize> = path.match_indices('/').map(|(i, _)| i).collect();
            assert_eq!(
                slashes(path.as_bytes()).collect::<Vec<_>>(),
                expected,
                "{path:?}"
            );
        }
        let all: String = (0u8..=255)
            .map(|b| if b == b'/' { '/' } else { 'x' })
            .collect();
        assert_eq!(slashes(all.as_bytes()).count(), 1);
    }

    #[test]
    fn components_skip_empty_and_dot() {
        assert_eq!(split("a//b/./c/"), ("a|b|c".into(), false, false));
        assert_eq!(split("."), ("".into(), false, false));
        assert_eq!(split("a/../.git"), ("a|..|.git".into(), true, true));
        let long = vec!["x"; 40].join("/") + "/.git";
        let (joined, _, git) = split(&long);
        assert_eq!((joined.split('|').count(), git), (41, true));
    }
}
