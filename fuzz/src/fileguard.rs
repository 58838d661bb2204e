//! Deny-write patterns (docs/reference/deny-write.md): compiling and matching never panic; a
//! respelling of the candidate in another case or normalization form never
//! changes the verdict (so a refusal never becomes an allow); the same holds
//! for respelling a pattern's literal text; rename/delete refuse at least
//! what write refuses; a check with a resolved name refuses exactly when the
//! spelled or the resolved name alone is refused; the fold is idempotent and
//! blind to case and normalization.

use sandgate_fileguard::{fold, Guard, GuardBuilder, Matched};
use unicode_normalization::UnicodeNormalization;

use crate::bytes::Bytes;

/// Pattern pieces: glob syntax (well-formed and not), separators, and
/// characters that fold in surprising ways.
const PATTERN_TOKENS: &[&str] = &[
    "a", "b", "*", "**", "?", "/", "/", ".", "..", "./", "[a-z]", "[!a]", "[^b]", "[", "]", "\\",
    "{a,b}", "-", ".git", ".GIT", "ſ", "S", "s", "K", "\u{212a}", "é", "e\u{301}", "ß", "SS", "İ",
    "ı", "i", "Σ", "ς", "ﬁ", "Å", "\u{212b}", "\u{345}", "ᾴ", "x", ".yml",
];

/// Candidate-name pieces: the same letters without glob syntax.
const PATH_TOKENS: &[&str] = &[
    "a", "b", "/", "/", ".", "..", "-", ".git", ".Git", "ſ", "s", "S", "k", "\u{212a}", "é",
    "e\u{301}", "E\u{301}", "ß", "ss", "İ", "ı", "i", "I", "σ", "ς", "fi", "ﬁ", "å", "\u{212b}",
    "\u{345}", "ᾴ", "x", ".yml", "*", "?", "[",
];

/// Decodes `data` into patterns, a mode, a spelled and a resolved name, and
/// checks them.
pub fn check(data: &[u8]) {
    let mut b = Bytes::new(data);
    let raw = b.below(5) == 0;
    let n = b.below(4);
    let mut patterns = Vec::new();
    for _ in 0..n {
        patterns.push(if raw {
            b.text(16)
        } else {
            b.tokens(PATTERN_TOKENS, 6)
        });
    }
    let restricted = b.bool();
    let spelled = if raw {
        b.text(24)
    } else {
        b.tokens(PATH_TOKENS, 8)
    };
    let resolved = b.bool().then(|| b.tokens(PATH_TOKENS, 6));
    let mask: Vec<bool> = (0..4).map(|_| b.bool()).collect();
    check_case(&patterns, restricted, &spelled, resolved.as_deref(), &mask);
}

/// Whether case changes are promised to be folded away: every string but
/// those holding U+0345 (see `fold`'s documentation).
fn case_invariant(s: &str) -> bool {
    !s.nfd().any(|c| c == '\u{345}')
}

fn upper(s: &str) -> String {
    s.to_uppercase()
}
fn lower(s: &str) -> String {
    s.to_lowercase()
}
fn nfd(s: &str) -> String {
    s.nfd().collect()
}
fn nfc(s: &str) -> String {
    s.nfc().collect()
}
/// Upper- or lowercases each character by the mask.
fn mixed(s: &str, mask: &[bool]) -> String {
    s.chars()
        .zip(mask.iter().cycle())
        .map(|(c, &up)| {
            if up {
                c.to_uppercase().collect::<String>()
            } else {
                c.to_lowercase().collect()
            }
        })
        .collect()
}

/// The respellings of `s` that must not change a verdict.
fn respellings(s: &str, mask: &[bool]) -> Vec<String> {
    let mut out = vec![nfd(s), nfc(s)];
    if case_invariant(s) {
        out.extend([upper(s), lower(s), mixed(s, mask), fold(s).into_owned()]);
    }
    out
}

/// A verdict reduced to what must agree: refused or not, by which rule text,
/// as an ancestor or not.
fn key(g: &Guard, write: bool, spelled: &str, resolved: Option<&str>) -> Option<(String, bool)> {
    let v = if write {
        g.check_write(spelled, resolved)
    } else {
        g.check_rename_or_delete(spelled, resolved)
    };
    v.refusal()
        .map(|r| (r.rule().as_str().to_owned(), r.is_ancestor()))
}

/// The invariants for one guard configuration and candidate.
pub fn check_case(
    patterns: &[String],
    restricted: bool,
    spelled: &str,
    resolved: Option<&str>,
    mask: &[bool],
) {
    // Fold: idempotent, blind to normalization, and to case where promised.
    let folded = fold(spelled).into_owned();
    assert_eq!(
        fold(&folded),
        folded.as_str(),
        "fold not idempotent on {spelled:?}"
    );
    assert_eq!(
        fold(&nfd(spelled)),
        folded.as_str(),
        "fold(nfd) on {spelled:?}"
    );
    assert_eq!(
        fold(&nfc(spelled)),
        folded.as_str(),
        "fold(nfc) on {spelled:?}"
    );
    if case_invariant(spelled) {
        assert_eq!(
            fold(&upper(spelled)),
            folded.as_str(),
            "fold(upper) on {spelled:?}"
        );
        assert_eq!(
            fold(&lower(spelled)),
            folded.as_str(),
            "fold(lower) on {spelled:?}"
        );
    }

    let built = GuardBuilder::new()
        .patterns(patterns)
        .restricted(restricted)
        .build();
    let g = match built {
        Ok(g) => g,
        Err(e) => {
            // Refused only for the load rules: empty (nothing but `.`
            // components and slashes), absolute, `..`, a NUL byte or
            // another control character, white space at either end.
            let p = e.pattern();
            assert!(
                p.split('/').all(|c| c.is_empty() || c == ".")
                    || p.starts_with('/')
                    || p.starts_with('\\')
                    || p.split('/').any(|c| c == "..")
                    || p.chars().any(char::is_control)
                    || p.starts_with(char::is_whitespace)
                    || p.ends_with(char::is_whitespace),
                "pattern {p:?} refused: {e}"
            );
            let _ = e.to_string();
            return;
        }
    };
    for p in patterns {
        assert!(!p.is_empty() && !p.starts_with('/') && !p.starts_with('\\'));
        assert!(!p.split('/').any(|c| c == ".."), "pattern {p:?} accepted");
        assert!(!p.contains('\0'), "pattern {p:?} with a NUL accepted");
        assert!(
            !p.chars().any(char::is_control),
            "pattern {p:?} with a control character accepted"
        );
        assert!(
            !p.starts_with(char::is_whitespace) && !p.ends_with(char::is_whitespace),
            "pattern {p:?} with white space at an end accepted"
        );
    }
    for w in g.warnings() {
        let _ = w.to_string();
    }

    for write in [true, false] {
        let alone = key(&g, write, spelled, None);
        // Respelling the candidate never changes the verdict.
        for r in respellings(spelled, mask) {
            assert_eq!(
                key(&g, write, &r, None),
                alone,
                "write={write} {patterns:?}: {spelled:?} vs {r:?}"
            );
        }
        if let Some(res) = resolved {
            let both = if write {
                g.check_write(spelled, Some(res))
            } else {
                g.check_rename_or_delete(spelled, Some(res))
            };
            let res_alone = key(&g, write, res, None);
            assert_eq!(
                both.is_refused(),
                alone.is_some() || res_alone.is_some(),
                "write={write} {patterns:?}: {spelled:?} resolved to {res:?}"
            );
            if let Some(r) = both.refusal() {
                if r.matched() == Matched::Resolved {
                    assert_eq!(r.path(), res);
                }
            }
            for rr in respellings(res, mask) {
                let again = if write {
                    g.check_write(spelled, Some(&rr))
                } else {
                    g.check_rename_or_delete(spelled, Some(&rr))
                };
                assert_eq!(again.is_refused(), both.is_refused(), "{res:?} vs {rr:?}");
            }
        }
    }
    // Rename/delete refuse whatever write refuses.
    if g.check_write(spelled, None).is_refused() {
        assert!(
            g.check_rename_or_delete(spelled, None).is_refused(),
            "{patterns:?}: {spelled:?} refused for write but not for rename/delete"
        );
    }

    // Respelling a pattern's literal text (no classes or escapes, whose
    // ranges are code-point ranges) changes no verdict either.
    if patterns
        .iter()
        .all(|p| !p.contains(['[', '\\']) && case_invariant(p))
    {
        let base: Vec<_> = [true, false]
            .map(|w| key(&g, w, spelled, None).map(|(_, a)| a))
            .into();
        for respell in [upper, lower, nfd, nfc] {
            let ps: Vec<String> = patterns.iter().map(|p| respell(p)).collect();
            let Ok(g2) = GuardBuilder::new()
                .patterns(&ps)
                .restricted(restricted)
                .build()
            else {
                panic!("{patterns:?} loads but {ps:?} does not")
            };
            let got: Vec<_> = [true, false]
                .map(|w| key(&g2, w, spelled, None).map(|(_, a)| a))
                .into();
            assert_eq!(got, base, "{patterns:?} vs {ps:?} on {spelled:?}");
        }
    }
}
