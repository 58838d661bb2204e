//! Case and normalization folding: the equivalence under which deny-write
//! patterns and paths are compared. The definition is on [`fold`]; this
//! module documentation covers how it is computed fast.
//!
//! # Speed
//!
//! ASCII is folded by ASCII lowercasing. Other text is folded piecewise: it
//! is cut before every *inert* character (a starter that is NFC by itself,
//! so nothing composes with it from the left or reorders across it), which
//! is where NFC and the per-character case mappings can be applied to each
//! piece separately. A piece that is one inert character is folded through a
//! lazily built table; most letters of most scripts are there, and so are
//! the folds of `ß`, ligatures and the like. A longer piece (a letter with
//! combining marks, as in NFD text) is first composed, which usually yields
//! one tabled letter; only what remains takes the rounds above. The tests
//! check the table and the piecewise fold against the rounds.

use std::borrow::Cow;
use std::iter;
use std::sync::{LazyLock, OnceLock};

use unicode_normalization::char::canonical_combining_class;
use unicode_normalization::{is_nfc, is_nfc_quick, IsNormalized, UnicodeNormalization};

/// Folds `s` to the representative of its equivalence class: the form in
/// which deny-write patterns and paths are compared (docs/reference/deny-write.md). Two strings
/// name the same protected thing exactly when their folds are equal.
///
/// Borrows `s` when it is already folded (lowercase ASCII, most lowercase
/// text in other scripts), so the common case allocates nothing.
///
/// ```
/// use sandgate_fileguard::fold;
///
/// assert_eq!(fold("Makefile"), "makefile");
/// assert_eq!(fold("\u{17f}ecret"), "secret"); // long s
/// assert_eq!(fold("\u{212a}ey"), "key"); // Kelvin sign
/// assert_eq!(fold("cafe\u{301}"), fold("CAFÉ")); // NFD vs NFC, any case
/// assert_eq!(fold("STRASSE"), fold("straße"));
/// assert_eq!(fold(".GİT"), fold(".gıt")); // both are `.git`
/// ```
///
/// # Definition
///
/// One folding round `R` is
///
/// ```text
/// R(s) = NFC(drop_dot_after_i(NFC(lower(NFC(upper(NFC(s)))))))
/// ```
///
/// where `upper` and `lower` are the full, context-free per-character
/// Unicode mappings (`char::to_uppercase`, `char::to_lowercase`) and
/// `drop_dot_after_i` removes U+0307 COMBINING DOT ABOVE where it directly
/// follows `i` (see "Turkish i" below). `fold` applies `R` until the string
/// stops changing (a fixed point; two rounds for almost every input).
///
/// Going up before coming down is what catches the characters that plain
/// lowercasing misses: `ſ` (U+017F) is already lowercase, so lowercasing
/// keeps it, but its uppercase is `S`, so `upper` then `lower` lands it on
/// `s` (the Kelvin sign lowercases to `k` either way). Iterating to a fixed
/// point closes chains longer than one step: `ẞ` lowers to `ß`, whose
/// uppercase is `SS`, so `ẞ`, `ß`, `ss` and `SS` all fold to `ss`. Per-character
/// mappings fold the final `ς` like `σ`, wherever it stands.
///
/// # Guarantees
///
/// For every string `s` in which U+0345 does not occur, not even inside a
/// precomposed letter (checked by property tests over every character that
/// has a case mapping or a decomposition, mixed with combining marks):
///
/// - `fold(s.to_uppercase()) == fold(s)` and `fold(s.to_lowercase()) == fold(s)`,
///   also with upper- and lowercase applied to single characters;
/// - `fold(nfd(s)) == fold(s)` and `fold(nfc(s)) == fold(s)` (for all `s`);
/// - `fold(fold(s)) == fold(s)`.
///
/// U+0345 COMBINING GREEK YPOGEGRAMMENI is the exception no fold can meet: it
/// is a combining mark whose uppercase is the base letter `Ι`, so changing
/// case can move an accent onto a different letter (`"ᾴ\u{301}"`, which is
/// NFC, uppercases to `"ΆΙ\u{301}"`, while its NFD uppercases to
/// `"Ά\u{301}Ι"`); the two results are different names under any fold that
/// keeps accents. For strings holding U+0345 the normalization invariances
/// and idempotence still hold.
///
/// # Over-denying by design
///
/// The classes this fold makes are at least as wide as what a
/// case-insensitive volume treats as one name, which is the safe direction
/// for a deny list:
///
/// - `ß` and `ss` are one name (full case mapping), as are the `ﬁ`/`ﬂ`/`ﬆ`
///   ligatures and their letters;
/// - Greek `σ`, `ς` and `Σ` are one letter;
/// - **Turkish i**: `i`, `I`, dotless `ı` (U+0131) and dotted `İ` (U+0130)
///   are all one letter. `ı` joins because its uppercase is `I`; `İ` lowers
///   to `i` + U+0307, and the dot above an `i` is dropped so that `İ` joins
///   too (as Unicode's *simple* lowercase mapping of `İ` does). A
///   case-insensitive volume may keep `.gİt` apart from `.git`; denying both
///   is the safe choice, and it makes the rule easy to state.
///
/// Only canonical equivalence is folded (NFC), not compatibility: full-width
/// `ｇ` and `g` stay distinct, as they are distinct names on every volume.
///
/// - **Ignorable code points** are dropped before folding: Unicode's
///   Default_Ignorable_Code_Point set (the soft hyphen U+00AD, zero-width
///   space, joiners and direction marks U+200B to U+200F, U+202A to U+202E,
///   U+2060 to U+206F, variation selectors, Hangul fillers, tags U+E0000 to
///   U+E0FFF and the rest). A case-insensitive directory on Linux (ext4 or
///   f2fs `casefold`) decomposes each of them to nothing before comparing
///   names, so there `.g\u{200b}it` *is* `.git`; the set holds the smaller
///   one HFS+ leaves out of names (and git's own `.git` check skips). A `?`
///   never matches a dropped character. (A path component made only of
///   such characters is still a name of its own when a guard checks a
///   path; see [`Candidate::folded`](crate::Candidate::folded).)
pub fn fold(s: &str) -> Cow<'_, str> {
    if s.is_ascii() {
        return if s.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(s.to_ascii_lowercase())
        } else {
            Cow::Borrowed(s)
        };
    }
    if s.chars().any(is_ignorable) {
        let kept: String = s.chars().filter(|&c| !is_ignorable(c)).collect();
        return Cow::Owned(fold(&kept).into_owned());
    }
    // `out` stays `None` while the folded text equals `s[..at]`.
    let mut out: Option<String> = None;
    fn owned<'o>(out: &'o mut Option<String>, s: &str, at: usize) -> &'o mut String {
        out.get_or_insert_with(|| {
            let mut o = String::with_capacity(s.len() + 8);
            o.push_str(&s[..at]);
            o
        })
    }
    let mut table = Cursor::default();
    let mut at = 0;
    let mut cur = table.code_at(s, 0);
    while let Some((c, code)) = cur {
        let mut end = at + c.len_utf8();
        let mut next = table.code_at(s, end);
        let alone = !matches!(next, Some((_, ATTACHING)));
        if alone && code < LONE {
            // Simple: the code is the folded character.
            if code != c as u32 || out.is_some() {
                let f = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
                owned(&mut out, s, at).push(f);
            }
        } else if alone && code != ATTACHING {
            owned(&mut out, s, at).push_str(table.lone(c, code));
        } else {
            // A cluster: this character and the ones that attach to it.
            while let Some((c, ATTACHING)) = next {
                end += c.len_utf8();
                next = table.code_at(s, end);
            }
            fold_cluster(&s[at..end], owned(&mut out, s, at));
        }
        at = end;
        cur = next;
    }
    out.map_or(Cow::Borrowed(s), Cow::Owned)
}

/// A code point some file system leaves out of names ([`fold`] drops it):
/// Unicode's Default_Ignorable_Code_Point set (DerivedCoreProperties.txt),
/// which Linux's casefolding (ext4, f2fs, tmpfs `casefold`) decomposes to
/// nothing before it compares names. It holds the smaller set HFS+ ignores
/// (U+200C to U+200F, U+202A to U+202E, U+206A to U+206F, U+FEFF).
pub(crate) fn is_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{34f}'
            | '\u{61c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fff8}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// Folds one cluster (a character followed by characters that attach to it)
/// onto `out`. An NFD letter with its accents usually composes to one simple
/// character, which the table folds; anything else takes the general path.
fn fold_cluster(cluster: &str, out: &mut String) {
    let mut nfc = cluster.nfc();
    if let (Some(x), None) = (nfc.next(), nfc.next()) {
        if let Entry::Simple(f) = lookup(x) {
            out.push(f);
            return;
        }
    }
    out.push_str(&fold_general(cluster));
}

/// Rounds after which [`fold_general`] gives up looking for a fixed point.
/// Real chains end after two rounds; the bound only guards against a future
/// Unicode table with a cycle.
const MAX_ROUNDS: usize = 8;

/// The general fold: rounds until a fixed point.
pub(crate) fn fold_general(s: &str) -> String {
    let mut cur = round(s);
    for _ in 0..MAX_ROUNDS {
        let next = round(&cur);
        if next == cur {
            break;
        }
        cur = next;
    }
    cur
}

/// One folding round (see the module documentation).
fn round(s: &str) -> String {
    let out: String = s
        .nfc()
        .flat_map(char::to_uppercase)
        .nfc()
        .flat_map(char::to_lowercase)
        .nfc()
        .collect();
    if out.contains('\u{307}') {
        drop_dot_after_i(&out).nfc().collect()
    } else {
        out
    }
}

/// Removes U+0307 COMBINING DOT ABOVE (and further ones) directly after `i`,
/// which is what merges `İ` (lowercase `i` + U+0307) with `i`.
fn drop_dot_after_i(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut after_i = false;
    for c in s.chars() {
        if c == '\u{307}' && after_i {
            continue;
        }
        after_i = c == 'i';
        out.push(c);
    }
    out
}

/// What the table knows about one character.
#[derive(Clone, Copy)]
enum Entry {
    /// Inert, and its fold is this one inert character wherever it stands.
    Simple(char),
    /// Inert; when no attaching character follows, its fold is this text.
    Lone(&'static str),
    /// Not inert: it may compose with or reorder around what precedes it, so
    /// it belongs to the preceding character's cluster.
    Attaching,
}

/// One 256-character block of the table. `codes` hold the simple fold, or
/// [`LONE`] + an index into `lone`, or [`ATTACHING`].
struct Block {
    codes: [u32; 256],
    lone: Vec<Box<str>>,
}

const LONE: u32 = 0x8000_0000;
const ATTACHING: u32 = u32::MAX;

/// Number of 256-character blocks covering all of Unicode.
const BLOCKS: usize = 0x110000 >> 8;

/// The per-character table, in blocks built on first use so that a process
/// pays only for the scripts it meets (a block costs microseconds to tens of
/// microseconds).
static TABLE: [OnceLock<Block>; BLOCKS] = [const { OnceLock::new() }; BLOCKS];

fn lookup(c: char) -> Entry {
    Cursor::default().entry(c)
}

/// Looks characters up in the table, remembering the last block used:
/// consecutive characters of one script share a block.
#[derive(Default)]
struct Cursor {
    block: Option<(u32, &'static Block)>,
}

impl Cursor {
    /// The character starting at byte `at` of `s` and its table code.
    #[inline]
    fn code_at(&mut self, s: &str, at: usize) -> Option<(char, u32)> {
        let b = *s.as_bytes().get(at)?;
        if b < 0x80 {
            return Some((b as char, u32::from(b.to_ascii_lowercase())));
        }
        let c = s.get(at..)?.chars().next()?;
        Some((c, self.code(c)))
    }

    #[inline]
    fn block(&mut self, cp: u32) -> &'static Block {
        let index = cp >> 8;
        match self.block {
            Some((i, block)) if i == index => block,
            _ => {
                let block = TABLE[index as usize].get_or_init(|| build_block(index));
                self.block = Some((index, block));
                block
            }
        }
    }

    #[inline]
    fn code(&mut self, c: char) -> u32 {
        let cp = c as u32;
        if cp < 0x80 {
            return u32::from(c.to_ascii_lowercase());
        }
        self.block(cp).codes[(cp & 0xff) as usize]
    }

    /// The text of `c`'s [`LONE`] code.
    fn lone(&mut self, c: char, code: u32) -> &'static str {
        self.block(c as u32)
            .lone
            .get((code & !LONE) as usize)
            .map_or("", |lone| lone)
    }

    fn entry(&mut self, c: char) -> Entry {
        match self.code(c) {
            ATTACHING => Entry::Attaching,
            code if code & LONE != 0 => Entry::Lone(self.lone(c, code)),
            // Codes below `LONE` were made from chars.
            code => char::from_u32(code).map_or(Entry::Attaching, Entry::Simple),
        }
    }
}

/// The fold of `c` when `c` is simple (see the module documentation), else
/// `None`.
#[cfg(test)]
fn simple_fold_char(c: char) -> Option<char> {
    match lookup(c) {
        Entry::Simple(f) => Some(f),
        _ => None,
    }
}

fn build_block(block: u32) -> Block {
    let mut codes = [ATTACHING; 256];
    let mut lone = Vec::new();
    for (i, code) in codes.iter_mut().enumerate() {
        let Some(c) = char::from_u32((block << 8) | i as u32) else {
            continue;
        };
        if let Some(f) = compute_simple_fold(c) {
            *code = f as u32;
        } else if is_inert(c) {
            *code = LONE | lone.len() as u32;
            lone.push(fold_general(c.encode_utf8(&mut [0; 4])).into_boxed_str());
        }
    }
    Block { codes, lone }
}

/// A starter that is NFC by itself: next to other such characters it neither
/// composes, decomposes nor reorders, so NFC leaves it alone, and text can be
/// normalized piecewise by splitting before it.
fn is_inert(c: char) -> bool {
    canonical_combining_class(c) == 0 && is_nfc_quick(iter::once(c)) == IsNormalized::Yes
}

fn single(mut it: impl Iterator<Item = char>) -> Option<char> {
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

/// Follows `c`'s case chain (upper, then lower, repeated) while every step is
/// one inert character; returns the fixed point, or `None` if the chain
/// leaves the simple world.
fn compute_simple_fold(c: char) -> Option<char> {
    if !is_inert(c) {
        return None;
    }
    let mut cur = c;
    for _ in 0..MAX_ROUNDS {
        let up = single(cur.to_uppercase()).filter(|&u| is_inert(u))?;
        let low = single(up.to_lowercase()).filter(|&l| is_inert(l))?;
        if low == cur {
            return Some(cur);
        }
        cur = low;
    }
    None
}

/// True when `c` folds to itself for the plain reason: no case mapping and
/// already NFC. Cheap enough to scan a whole plane with.
fn is_plainly_fixed(c: char) -> bool {
    single(c.to_uppercase()) == Some(c) && single(c.to_lowercase()) == Some(c) && {
        let mut buf = [0u8; 4];
        is_nfc(c.encode_utf8(&mut buf))
    }
}

/// Inverse views of the fold, needed to fold character classes and to let
/// `?` match a character whose fold is several characters. Built on first
/// use from a scan of the Basic Multilingual Plane, where every multi-character
/// case mapping lives (the tests check the other planes).
pub(crate) struct CaseTables {
    /// `(fold(y), y)` for every BMP `y` whose fold is one character other
    /// than `y`, sorted.
    inverse: Vec<(char, char)>,
    /// `(y, fold(y))` for every BMP `y` whose fold is more than one
    /// character, sorted by `y`.
    multi: Vec<(char, Box<str>)>,
    /// The distinct multi-character folds, sorted (so grouped by first char).
    expansions: Vec<Box<str>>,
}

static CASE_TABLES: LazyLock<CaseTables> = LazyLock::new(build_case_tables);

pub(crate) fn case_tables() -> &'static CaseTables {
    &CASE_TABLES
}

fn build_case_tables() -> CaseTables {
    let mut inverse = Vec::new();
    let mut multi = Vec::new();
    for cp in 0x80..0x10000 {
        let Some(y) = char::from_u32(cp) else {
            continue;
        };
        if is_plainly_fixed(y) {
            continue;
        }
        let f = match lookup(y) {
            Entry::Simple(f) => f.to_string(),
            Entry::Lone(f) => f.to_owned(),
            Entry::Attaching => fold_general(y.encode_utf8(&mut [0; 4])),
        };
        let mut chars = f.chars();
        match (chars.next(), chars.next()) {
            (Some(x), None) if x != y => inverse.push((x, y)),
            (Some(_), None) | (None, _) => {}
            (Some(_), Some(_)) => multi.push((y, f.into_boxed_str())),
        }
    }
    inverse.sort_unstable();
    let mut expansions: Vec<Box<str>> = multi.iter().map(|(_, f)| f.clone()).collect();
    expansions.sort_unstable();
    expansions.dedup();
    CaseTables {
        inverse,
        multi,
        expansions,
    }
}

impl CaseTables {
    /// The BMP characters other than `x` that fold to `x`.
    pub(crate) fn preimages(&self, x: char) -> impl Iterator<Item = char> + '_ {
        let start = self.inverse.partition_point(|&(f, _)| f < x);
        self.inverse[start..]
            .iter()
            .take_while(move |&&(f, _)| f == x)
            .map(|&(_, y)| y)
    }

    /// The characters whose fold is more than one character, with that fold.
    pub(crate) fn multi(&self) -> &[(char, Box<str>)] {
        &self.multi
    }

    /// The multi-character folds that begin with `first`.
    pub(crate) fn expansions_from(&self, first: char) -> &[Box<str>] {
        let key = |e: &str| e.chars().next().unwrap_or('\0');
        let start = self.expansions.partition_point(|e| key(e) < first);
        let len = self.expansions[start..]
            .iter()
            .take_while(|e| key(e) == first)
            .count();
        &self.expansions[start..start + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ascii_borrows_when_already_folded() {
        assert!(matches!(fold("src/main.rs"), Cow::Borrowed(_)));
        assert!(matches!(fold("документы/файл"), Cow::Borrowed(_)));
        assert_eq!(fold("SRC/Main.RS"), "src/main.rs");
    }

    #[test]
    fn orbit_examples() {
        assert_eq!(fold("\u{17f}"), "s");
        assert_eq!(fold("\u{212a}"), "k");
        assert_eq!(fold("\u{212b}"), fold("å"));
        assert_eq!(fold("ẞ"), "ss");
        assert_eq!(fold("ß"), "ss");
        assert_eq!(fold("ﬁ"), "fi");
        assert_eq!(fold("ς"), "σ");
        assert_eq!(fold("Σ"), "σ");
        for i in ["i", "I", "ı", "İ", "i\u{307}", "I\u{307}"] {
            assert_eq!(fold(i), "i", "{i:?}");
        }
        assert_eq!(fold("İ\u{301}"), "í");
    }

    /// Every character the table calls simple folds, on its own, exactly as
    /// the general path folds it; and the general path is a fixed point.
    #[test]
    fn table_agrees_with_general_fold_for_every_char() {
        let mut buf = [0u8; 4];
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            if let Some(f) = simple_fold_char(c) {
                if f == c && is_plainly_fixed(c) {
                    // No case mapping and NFC: folds to itself by definition.
                    continue;
                }
                let general = fold_general(c.encode_utf8(&mut buf));
                assert_eq!(general, f.to_string(), "U+{:04X}", c as u32);
                assert!(is_inert(f), "U+{:04X}", c as u32);
            }
        }
    }

    /// Multi-character folds exist only in the BMP (outside it, a fold is one
    /// character or a base with combining marks), so scanning the BMP alone
    /// for expansions is enough.
    #[test]
    fn no_astral_char_expands_into_letters() {
        use unicode_normalization::char::is_combining_mark;
        let mut buf = [0u8; 4];
        for c in (0x10000..=0x10FFFF).filter_map(char::from_u32) {
            if is_plainly_fixed(c) {
                continue;
            }
            let f = fold_general(c.encode_utf8(&mut buf));
            let non_marks = f.chars().filter(|&m| !is_combining_mark(m)).count();
            assert!(non_marks <= 1, "U+{:04X} folds to {f:?}", c as u32);
        }
    }

    /// Characters with a case mapping or a decomposition, and characters
    /// that attach to their left neighbour (combining marks, Hangul vowels
    /// and trailing consonants, …): what the piecewise fold has to cut right.
    fn interesting_chars() -> Vec<char> {
        let mut v: Vec<char> = (0x80..=0x10FFFF)
            .filter_map(char::from_u32)
            .filter(|&c| !is_plainly_fixed(c) || !is_inert(c))
            .collect();
        v.extend(['a', 'e', 'i', 'k', 's', 'I', 'K', 'S', '/']);
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The piecewise fast path agrees with the general fold on whole
        /// strings, including mixes of simple and non-simple characters.
        #[test]
        fn fast_path_agrees_with_general_fold(s in "[a-zA-Z/._ſßẞİıéÉ\u{212a}\u{301}\u{308}\u{345}σςΣжЖё日本📁\u{10400}\u{10428}\u{1100}\u{1161}\u{11a8}가]{0,16}") {
            prop_assert_eq!(fold(&s), fold_general(&s));
        }

        #[test]
        fn fast_path_agrees_over_all_interesting_chars(
            s in prop::collection::vec(prop::sample::select(interesting_chars()), 0..10)
                .prop_map(|v| v.into_iter().collect::<String>())
        ) {
            prop_assert_eq!(fold(&s), fold_general(&s));
        }
    }

    #[test]
    fn case_tables_know_the_classics() {
        let t = case_tables();
        // ASCII partners are left to ASCII lowercasing; the table holds the
        // rest of the orbit.
        let pre: Vec<char> = t.preimages('k').collect();
        assert_eq!(pre, ['\u{212a}']);
        let pre: Vec<char> = t.preimages('s').collect();
        assert!(pre.contains(&'\u{17f}'), "{pre:?}");
        assert!(t.multi().iter().any(|(y, f)| *y == 'ß' && &**f == "ss"));
        let ss: Vec<&str> = t.expansions_from('s').iter().map(|e| &**e).collect();
        assert!(ss.contains(&"ss") && ss.contains(&"st"), "{ss:?}");
    }
}
