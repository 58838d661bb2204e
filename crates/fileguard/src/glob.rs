//! One pattern component, compiled, and its matcher.
//!
//! Matching happens on folded text (see [`crate::fold`]) one path component
//! at a time. globset is not used here: it matches bytes outside ASCII, so
//! its `?` would need rewriting anyway, and a component is short enough
//! (at most 255 bytes on disk) that a direct matcher beats building and
//! running a regex. The path-level `**` is handled by the guard.
//!
//! # What a wildcard matches
//!
//! `*` matches any run of characters within a component. `?` matches one
//! *character as a person sees it*, which on folded text means any of:
//!
//! - one character;
//! - one character followed by combining marks (`x̂` has no precomposed form
//!   and stays two characters after NFC);
//! - the fold of a single character that folds to several (`ß` folds to
//!   `ss`, `ﬁ` to `fi`), so `stra?e` matches `straße` and therefore also
//!   `STRASSE`, which is the same name under the fold.
//!
//! A class `[...]` matches the same kinds of unit as `?`, restricted to units
//! that are the fold of some member (or, negated, of no member). Members and
//! ranges are folded too: `[A-Z]` matches `k`, the Kelvin sign and `ſ`.

use std::fmt;

use crate::fold::{case_tables, fold};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// Why a pattern component could not be compiled. The component then
/// matches like `*` (docs/reference/deny-write.md: a malformed pattern fails closed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Malformed {
    /// A `[` without its closing `]`.
    UnclosedClass,
    /// A range such as `[z-a]` whose end comes before its start.
    InvalidRange,
    /// A `\` with nothing after it to escape.
    DanglingEscape,
    /// `**` inside a component (`a**`, `**b`); `**` is special only as a
    /// whole component.
    MisplacedRecursive,
    /// Brace alternation (`{yml,yaml}`), which these patterns do not have;
    /// write one pattern per alternative.
    Alternation,
    /// A `\` before a letter or a digit (`.github\workflows\*`), which
    /// needs no escape: the pattern was almost certainly written with
    /// Windows separators, and read literally it would protect only an odd
    /// name. Separators are `/`.
    BackslashBeforeLetter,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

impl Malformed {
    /// A short description, for warnings.
    pub fn describe(self) -> &'static str {
        match self {
            Malformed::UnclosedClass => "`[` is never closed by `]`",
            Malformed::InvalidRange => "a character range ends before it starts",
            Malformed::DanglingEscape => "`\\` at the end escapes nothing",
            Malformed::MisplacedRecursive => "`**` is only special as a whole component",
            Malformed::Alternation => "brace alternation `{a,b}` is not supported",
            Malformed::BackslashBeforeLetter => {
                "`\\` before a letter or digit escapes nothing; separate directories with `/`"
            }
        }
    }
}

/// Put before the fold of a name that folding emptied or left as `.` or
/// `..` (a name made of ignorable code points, and dots): such a name is a
/// real entry of its own, never the directory itself, its parent or no
/// component at all. Folding drops this code point from every name, so no
/// other name's fold can hold it.
pub(crate) const EMPTIED: char = '\u{200b}';

/// A compiled pattern component.
#[derive(Clone, Debug)]
pub(crate) enum Comp {
    /// `**`: zero or more whole components (handled by the caller).
    Recursive,
    /// Any one component: `*`, and every malformed component.
    Star,
    /// A folded literal name.
    Literal(Lit),
    /// Folded literals separated by `*` (`*.yml`, `a*b*c`): no `?` or class.
    Stars(Stars),
    /// Anything else.
    General(Vec<Tok>),
}

#[derive(Clone, Debug)]
pub(crate) struct Stars {
    prefix: Box<str>,
    middle: Vec<Box<str>>,
    suffix: Box<str>,
    /// `suffix` as a word when it is 1 to 8 bytes (`*.yml`), for a compare
    /// without `memcmp`.
    suffix_word: Option<u64>,
}

#[derive(Clone, Debug)]
pub(crate) enum Tok {
    Lit(Box<str>),
    Star,
    Unit(Unit),
}

#[derive(Clone, Debug)]
pub(crate) enum Unit {
    /// `?`
    Any,
    /// `[...]`
    Class(Class),
}

#[derive(Clone, Debug)]
pub(crate) struct Class {
    negated: bool,
    /// Members as written plus the single-character folds of members.
    ranges: Vec<(char, char)>,
    /// Multi-character folds of members.
    multi: Vec<Box<str>>,
}

impl Comp {
    /// Compiles one component of a pattern (never empty, `.` or `..`).
    pub(crate) fn compile(raw: &str) -> Result<Comp, Malformed> {
        if raw == "**" {
            return Ok(Comp::Recursive);
        }
        let toks = lex(raw)?;
        Ok(match toks.as_slice() {
            [] => Comp::Literal(Lit::new("")),
            [Tok::Lit(l)] if matches!(&**l, "" | "." | "..") => {
                Comp::Literal(Lit::new(&format!("{EMPTIED}{l}")))
            }
            [Tok::Lit(l)] => Comp::Literal(Lit::new(l)),
            [Tok::Star] => Comp::Star,
            _ if toks.iter().all(|t| !matches!(t, Tok::Unit(_))) => Comp::Stars(stars(&toks)),
            _ => Comp::General(toks),
        })
    }

    /// The folded literal, when the component is one.
    pub(crate) fn literal(&self) -> Option<&Lit> {
        match self {
            Comp::Literal(l) => Some(l),
            _ => None,
        }
    }

    /// Whether this component matches the folded path component `name`.
    /// [`Comp::Recursive`] matches any one name here.
    #[inline]
    pub(crate) fn matches(&self, name: &Name<'_>) -> bool {
        match self {
            Comp::Recursive | Comp::Star => true,
            Comp::Literal(l) => l.eq(name),
            Comp::Stars(s) => s.matches(name.text),
            Comp::General(toks) => match_general(toks, name.text),
        }
    }
}

/// A folded path component with its length and first seven bytes packed
/// into one word, so that comparing it with a literal that differs (nearly
/// every comparison a check makes) costs one integer comparison instead of a
/// `memcmp` call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Name<'a> {
    pub(crate) text: &'a str,
    head: u64,
}

impl<'a> Name<'a> {
    #[inline]
    pub(crate) fn new(text: &'a str) -> Name<'a> {
        Name {
            text,
            head: head(text),
        }
    }
}

/// A folded literal component, compared like [`Name`].
#[derive(Clone, Debug)]
pub(crate) struct Lit {
    text: Box<str>,
    head: u64,
}

impl Lit {
    fn new(text: &str) -> Lit {
        Lit {
            text: text.into(),
            head: head(text),
        }
    }

    #[inline]
    pub(crate) fn eq(&self, name: &Name<'_>) -> bool {
        self.head == name.head
            && self.text.len() == name.text.len()
            && (self.text.len() <= 7 || self.text.as_bytes()[7..] == name.text.as_bytes()[7..])
    }
}

/// Length in the top byte, then up to seven leading bytes. Built in a
/// register: copying into a stack array and reading it back as a word stalls
/// store forwarding.
#[inline]
fn head(text: &str) -> u64 {
    let b = text.as_bytes();
    let len = (b.len().min(255) as u64) << 56;
    if let Some(first) = b.first_chunk::<8>() {
        return u64::from_le_bytes(*first) & 0x00FF_FFFF_FFFF_FFFF | len;
    }
    b.iter()
        .enumerate()
        .fold(len, |w, (i, &x)| w | u64::from(x) << (8 * i))
}

/// The last `k` (1 to 8) bytes of `b` as a little-endian word, if `b` has
/// that many.
#[inline]
fn tail(b: &[u8], k: usize) -> Option<u64> {
    let start = b.len().checked_sub(k)?;
    if let Some(last) = b.last_chunk::<8>() {
        return Some(u64::from_le_bytes(*last) >> (8 * (8 - k)));
    }
    Some(
        b[start..]
            .iter()
            .enumerate()
            .fold(0, |w, (i, &x)| w | u64::from(x) << (8 * i)),
    )
}

/// Splits a component into tokens, folding literal runs.
fn lex(raw: &str) -> Result<Vec<Tok>, Malformed> {
    let mut toks = Vec::new();
    let mut lit = String::new();
    let flush = |lit: &mut String, toks: &mut Vec<Tok>| {
        if !lit.is_empty() {
            toks.push(Tok::Lit(fold(lit).into()));
            lit.clear();
        }
    };
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next().ok_or(Malformed::DanglingEscape)? {
                c if c.is_alphanumeric() => return Err(Malformed::BackslashBeforeLetter),
                c => lit.push(c),
            },
            '*' => {
                if chars.peek() == Some(&'*') {
                    return Err(Malformed::MisplacedRecursive);
                }
                flush(&mut lit, &mut toks);
                toks.push(Tok::Star);
            }
            '?' => {
                flush(&mut lit, &mut toks);
                toks.push(Tok::Unit(Unit::Any));
            }
            '[' => {
                flush(&mut lit, &mut toks);
                toks.push(Tok::Unit(Unit::Class(Class::parse(&mut chars)?)));
            }
            '{' if looks_like_alternation(chars.clone()) => return Err(Malformed::Alternation),
            _ => lit.push(c),
        }
    }
    flush(&mut lit, &mut toks);
    Ok(toks)
}

/// After a `{`: is there an unescaped `,` and then a `}`? Such a component
/// was almost certainly meant as `{a,b}` alternation; taking the braces
/// literally would silently protect nothing, so it is reported instead.
fn looks_like_alternation(mut rest: impl Iterator<Item = char>) -> bool {
    let mut comma = false;
    while let Some(c) = rest.next() {
        match c {
            '\\' => {
                rest.next();
            }
            ',' => comma = true,
            '}' => return comma,
            _ => {}
        }
    }
    false
}

fn stars(toks: &[Tok]) -> Stars {
    let lit = |t: &Tok| match t {
        Tok::Lit(l) => Some(l.clone()),
        _ => None,
    };
    let mut toks = toks;
    let prefix = toks.first().and_then(lit).unwrap_or_default();
    if !prefix.is_empty() {
        toks = &toks[1..];
    }
    let suffix = toks.last().and_then(lit).unwrap_or_default();
    if !suffix.is_empty() {
        toks = &toks[..toks.len() - 1];
    }
    let middle = toks.iter().filter_map(lit).collect();
    let suffix_word = (1..=8)
        .contains(&suffix.len())
        .then(|| tail(suffix.as_bytes(), suffix.len()))
        .flatten();
    Stars {
        prefix,
        middle,
        suffix,
        suffix_word,
    }
}

impl Stars {
    /// `prefix*m1*m2*…*suffix`: literals separated by at least one `*`, so
    /// taking each middle literal at its leftmost place is never wrong.
    #[inline]
    fn matches(&self, name: &str) -> bool {
        if let Some(word) = self.suffix_word {
            if tail(name.as_bytes(), self.suffix.len()) != Some(word) {
                return false;
            }
        }
        if name.len() < self.prefix.len() + self.suffix.len()
            || !name.starts_with(&*self.prefix)
            || !name.ends_with(&*self.suffix)
        {
            return false;
        }
        let end = name.len() - self.suffix.len();
        if !name.is_char_boundary(end) || end < self.prefix.len() {
            return false;
        }
        let mut rest = &name[self.prefix.len()..end];
        for m in &self.middle {
            match rest.find(&**m) {
                Some(at) => rest = &rest[at + m.len()..],
                None => return false,
            }
        }
        true
    }
}

impl Class {
    /// Parses after the opening `[`, consuming the closing `]`.
    fn parse(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<Class, Malformed> {
        let negated = matches!(chars.peek(), Some('!' | '^'));
        if negated {
            chars.next();
        }
        let mut members: Vec<(char, char)> = Vec::new();
        let mut first = true;
        loop {
            let mut c = chars.next().ok_or(Malformed::UnclosedClass)?;
            if c == ']' && !first {
                break;
            }
            first = false;
            if c == '\\' {
                c = chars.next().ok_or(Malformed::UnclosedClass)?;
            }
            c = compose_member(c, chars);
            let mut hi = c;
            if chars.peek() == Some(&'-') {
                let mut ahead = chars.clone();
                ahead.next();
                match ahead.next() {
                    // `[a-]`: the `-` is a member.
                    Some(']') | None => {}
                    Some(mut end) => {
                        chars.next();
                        chars.next();
                        if end == '\\' {
                            end = chars.next().ok_or(Malformed::UnclosedClass)?;
                        }
                        end = compose_member(end, chars);
                        if end < c {
                            return Err(Malformed::InvalidRange);
                        }
                        hi = end;
                    }
                }
            }
            members.push((c, hi));
        }
        Ok(Class::fold_members(negated, members))
    }

    fn fold_members(negated: bool, members: Vec<(char, char)>) -> Class {
        let tables = case_tables();
        let mut ranges = members.clone();
        let mut multi: Vec<Box<str>> = Vec::new();
        let mut add_fold = |f: &str, ranges: &mut Vec<(char, char)>| {
            let mut it = f.chars();
            match (it.next(), it.next()) {
                (Some(x), None) => ranges.push((x, x)),
                (Some(_), Some(_)) => multi.push(f.into()),
                (None, _) => {}
            }
        };
        for &(lo, hi) in &members {
            // Small ranges are folded member by member, which also covers
            // characters outside the BMP; every range additionally gets the
            // multi-character folds of its BMP members and, at match time,
            // the preimages of the candidate character.
            if (hi as u32) - (lo as u32) < 512 {
                for c in (lo..=hi).filter(|c| !c.is_ascii()) {
                    add_fold(&fold(c.encode_utf8(&mut [0; 4])), &mut ranges);
                }
            }
            for (y, f) in tables.multi() {
                if (lo..=hi).contains(y) {
                    add_fold(f, &mut ranges);
                }
            }
        }
        // ASCII members fold to ASCII; add their lowercase forms directly.
        for &(lo, hi) in &members {
            let (lo, hi) = (lo.max('A'), hi.min('Z'));
            if lo <= hi {
                ranges.push((lo.to_ascii_lowercase(), hi.to_ascii_lowercase()));
            }
        }
        ranges.sort_unstable();
        multi.sort_unstable();
        multi.dedup();
        Class {
            negated,
            ranges,
            multi,
        }
    }

    /// Whether the single folded character `x` is a member (before negation).
    fn contains_char(&self, x: char) -> bool {
        let within = |c: char| self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
        within(x)
            || case_tables().preimages(x).any(within)
            // Outside the BMP the preimage table is silent; the case pair is
            // the uppercase form.
            || (!x.is_ascii() && single_upper(x).is_some_and(within))
    }
}

/// A class member followed by characters that compose with it (a letter
/// and its combining marks written decomposed, as NFD text has them; Hangul
/// jamo) is the one character NFC makes of them: the member is compared in
/// folded form like a literal, and a folded name holds only that character.
/// Takes the longest run that composes to one character; what follows is
/// read as members of their own. `]`, `-` and `\` end the run.
fn compose_member(c: char, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> char {
    let mut run = String::from(c);
    let (mut member, mut taken) = (c, 0);
    let mut ahead = chars.clone();
    while let Some(m) = ahead.next().filter(|m| !matches!(m, ']' | '-' | '\\')) {
        run.push(m);
        let mut nfc = run.nfc();
        match (nfc.next(), nfc.next()) {
            (Some(x), None) => member = x,
            _ => break,
        }
        taken = run.chars().count() - 1;
    }
    for _ in 0..taken {
        chars.next();
    }
    member
}

fn single_upper(x: char) -> Option<char> {
    let mut it = x.to_uppercase();
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

/// Calls `end` with every byte offset at which a unit (`?` or a class)
/// starting at `at` in `name` can end.
fn unit_ends(unit: &Unit, name: &str, at: usize, mut end: impl FnMut(usize)) {
    let rest = &name[at..];
    let Some(x) = rest.chars().next() else { return };
    let (single_ok, class) = match unit {
        Unit::Any => (true, None),
        Unit::Class(c) => (c.contains_char(x) != c.negated, Some(c)),
    };
    if single_ok {
        let mut pos = at + x.len_utf8();
        end(pos);
        if !rest.is_ascii() {
            for m in name[pos..].chars().take_while(|&m| is_combining_mark(m)) {
                pos += m.len_utf8();
                end(pos);
            }
        }
    }
    // Multi-character folds of a single character.
    match class {
        Some(c) if !c.negated => {
            for m in c.multi.iter().filter(|m| rest.starts_with(&***m)) {
                end(at + m.len());
            }
        }
        _ => {
            let excluded = class.map_or(&[][..], |c| &c.multi[..]);
            for e in case_tables().expansions_from(x) {
                if rest.starts_with(&**e) && !excluded.contains(e) {
                    end(at + e.len());
                }
            }
        }
    }
}

/// Set-of-positions simulation: after each token, the byte offsets in
/// `name` at which the tokens so far can have ended. Linear in tokens times
/// name length, with no backtracking blow-up.
fn match_general(toks: &[Tok], name: &str) -> bool {
    let mut small = [[0u64; 4]; 2];
    let mut large;
    let words = (name.len() + 1).div_ceil(64);
    let (cur, next): (&mut [u64], &mut [u64]) = if words <= 4 {
        let [a, b] = &mut small;
        (&mut a[..words], &mut b[..words])
    } else {
        large = vec![0u64; 2 * words];
        large.split_at_mut(words)
    };
    let set = |s: &mut [u64], i: usize| s[i / 64] |= 1 << (i % 64);
    let get = |s: &[u64], i: usize| s[i / 64] & (1 << (i % 64)) != 0;
    set(cur, 0);
    for tok in toks {
        next.fill(0);
        match tok {
            Tok::Star => {
                if let Some(min) = (0..=name.len()).find(|&i| get(cur, i)) {
                    for i in (min..=name.len()).filter(|&i| name.is_char_boundary(i)) {
                        set(next, i);
                    }
                }
            }
            Tok::Lit(l) => {
                for i in (0..=name.len()).filter(|&i| get(cur, i)) {
                    if name[i..].starts_with(&**l) {
                        set(next, i + l.len());
                    }
                }
            }
            Tok::Unit(u) => {
                for i in (0..name.len()).filter(|&i| get(cur, i)) {
                    unit_ends(u, name, i, |e| set(next, e));
                }
            }
        }
        cur.copy_from_slice(next);
        if cur.iter().all(|&w| w == 0) {
            return false;
        }
    }
    get(cur, name.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pat: &str, name: &str) -> bool {
        Comp::compile(pat).unwrap().matches(&Name::new(&fold(name)))
    }

    #[test]
    fn tails_are_the_last_bytes() {
        assert_eq!(tail(b"abc", 4), None);
        assert_eq!(tail(b"abc", 2), tail(b"bc", 2));
        assert_eq!(tail(b"0123456789", 3), tail(b"789", 3));
        assert_eq!(tail(b"01234567", 8), Some(u64::from_le_bytes(*b"01234567")));
        assert_ne!(tail(b"xx.yml", 4), tail(b"xx.yaml", 4));
        assert!(m("*.yml", "a-long-file-name.yml"));
        assert!(!m("*.yml", "a-long-file-name.yaml"));
        assert!(m("*.md", ".md"));
        assert!(!m("*.md", "md"));
    }

    #[test]
    fn names_compare_by_whole_text() {
        for (a, b, same) in [
            ("", "", true),
            ("abc", "abc", true),
            ("abc", "abd", false),
            ("abcdefgh", "abcdefgh", true),
            ("abcdefgh", "abcdefgi", false),
            ("abcdefg_long_1", "abcdefg_long_2", false),
            ("abcdefg", "abcdefg\0", false),
            ("abcdefgh", "abcdefg", false),
            ("a\0", "a", false),
        ] {
            assert_eq!(Lit::new(a).eq(&Name::new(b)), same, "{a:?} {b:?}");
        }
    }

    #[test]
    fn stars_and_literals() {
        assert!(m("*.yml", "ci.yml"));
        assert!(m("*.yml", ".yml"));
        assert!(!m("*.yml", "ci.yaml"));
        assert!(m("a*b*c", "abc"));
        assert!(m("a*b*c", "axxbyyc"));
        assert!(!m("a*b*c", "acb"));
        assert!(!m("ab*ba", "aba"));
        assert!(m("*", "anything"));
        assert!(m("Makefile", "MAKEFILE"));
    }

    #[test]
    fn units() {
        assert!(m("a?c", "abc"));
        assert!(!m("a?c", "ac"));
        assert!(m("a?c", "aжc"));
        assert!(m("caf?", "café"));
        assert!(m("caf?", "cafe\u{301}"));
        assert!(m("?", "x\u{302}"));
        assert!(m("??", "x\u{302}"));
        assert!(m("stra?e", "straße"));
        assert!(m("stra?e", "STRASSE"));
        assert!(m("stra??e", "straße"));
        assert!(m("[a-c]x", "Bx"));
        assert!(!m("[!a-c]x", "Bx"));
        assert!(m("[A-Z]", "\u{212a}"));
        assert!(m("[a-z]", "\u{17f}"));
        assert!(m("[ß]", "ss"));
        assert!(m("[!a]", "ß"));
        assert!(m("[]]", "]"));
        assert!(m("[a-]", "-"));
        assert!(m("[!]a]", "b"));
    }

    #[test]
    fn malformed() {
        for (pat, kind) in [
            ("[ab", Malformed::UnclosedClass),
            ("[z-a]", Malformed::InvalidRange),
            ("a\\", Malformed::DanglingEscape),
            ("a**", Malformed::MisplacedRecursive),
            ("*.{yml,yaml}", Malformed::Alternation),
            ("a\\b", Malformed::BackslashBeforeLetter),
        ] {
            assert_eq!(Comp::compile(pat).unwrap_err(), kind, "{pat}");
        }
        assert!(m("{{name}}", "{{name}}"));
    }
}
