//! Property tests: the fold's invariances, and that respelling a path in
//! another case or normalization form never turns a refusal into an allow.

use proptest::prelude::*;
use sandgate_fileguard::{fold, Guard, GuardBuilder, Rule};
use unicode_normalization::UnicodeNormalization;

/// Characters that break naive case-insensitive matching, plus enough plain
/// ones to form names. U+0345 (and precomposed letters holding it) is kept
/// for `ypogegrammeni` below; see the fold's documentation for why.
const TRICKY: &[char] = &[
    'a',
    'e',
    'f',
    'g',
    'i',
    'k',
    's',
    't',
    'x',
    'A',
    'E',
    'F',
    'G',
    'I',
    'K',
    'S',
    'T',
    'X',
    '.',
    '-',
    '_',
    '0',        //
    '\u{17f}',  // ſ long s
    '\u{1e9b}', // ẛ long s with dot above
    '\u{212a}', // Kelvin sign
    '\u{212b}', // Angstrom sign
    '\u{c5}',
    '\u{e5}', // Å å
    '\u{2126}',
    '\u{3c9}', // Ohm sign, ω
    '\u{df}',
    '\u{1e9e}', // ß ẞ
    '\u{130}',
    '\u{131}', // İ ı
    '\u{301}',
    '\u{307}',
    '\u{308}',
    '\u{323}',
    '\u{30c}', // combining marks
    '\u{e9}',
    '\u{c9}', // é É
    '\u{3c3}',
    '\u{3c2}',
    '\u{3a3}', // σ ς Σ
    '\u{390}',
    '\u{3b0}',
    '\u{3ac}', // ΐ ΰ ά
    '\u{3b8}',
    '\u{398}',
    '\u{3d1}',
    '\u{3f4}', // θ Θ ϑ ϴ
    '\u{b5}',
    '\u{3bc}', // µ μ
    '\u{fb01}',
    '\u{fb00}',
    '\u{fb03}',
    '\u{fb06}', // ﬁ ﬀ ﬃ ﬆ
    '\u{149}',
    '\u{1f0}',
    'J',
    'j', // ŉ ǰ
    '\u{1c4}',
    '\u{1c5}',
    '\u{1c6}', // Ǆ ǅ ǆ
    '\u{434}',
    '\u{414}',
    '\u{451}',
    '\u{401}',
    '\u{439}',
    '\u{418}',
    '\u{438}',
    '\u{306}', // Cyrillic
    '\u{587}', // Armenian ech-yiwn ligature
    '\u{24b6}',
    '\u{24d0}', // Ⓐ ⓐ
    '\u{1100}',
    '\u{1161}',
    '\u{ac00}', // Hangul jamo and syllable
    '\u{10400}',
    '\u{10428}', // Deseret Ȁ pair
    '\u{1f4c1}', // 📁
];

fn tricky_string(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TRICKY), 0..max)
        .prop_map(|cs| cs.into_iter().collect())
}

/// Every character with a case mapping or a canonical decomposition (except
/// those holding U+0345), mixed with combining marks: the whole space the
/// fold has to get right, not just the hand-picked cases.
fn every_interesting_char() -> Vec<char> {
    let chars: Vec<char> = (0..=0x10FFFF)
        .filter_map(char::from_u32)
        .filter(|&c| {
            let plain = c.to_uppercase().eq([c]) && c.to_lowercase().eq([c]) && c.nfd().eq([c]);
            !plain && !c.nfd().any(|d| d == '\u{345}')
        })
        .collect();
    chars
}

/// Strings mixing [`every_interesting_char`] with combining marks and the
/// tricky alphabet, so that composition across characters gets exercised.
fn interesting_string(max: usize) -> impl Strategy<Value = String> {
    const MARKS: &[char] = &[
        '\u{301}', '\u{307}', '\u{308}', '\u{323}', '\u{327}', '\u{30c}', '\u{331}', '\u{342}',
    ];
    let ch = prop_oneof![
        2 => prop::sample::select(every_interesting_char()),
        1 => prop::sample::select(MARKS),
        1 => prop::sample::select(TRICKY),
    ];
    prop::collection::vec(ch, 0..max).prop_map(|cs| cs.into_iter().collect())
}

fn tricky_path() -> impl Strategy<Value = String> {
    prop::collection::vec(tricky_string(6), 1..4).prop_map(|cs| cs.join("/"))
}

/// The fold, owned (keeps assertions free of temporaries).
fn f(s: &str) -> String {
    fold(s).into_owned()
}

fn nfd(s: &str) -> String {
    s.nfd().collect()
}

fn nfc(s: &str) -> String {
    s.nfc().collect()
}

/// Applies upper- or lowercase to each character by the mask.
fn mixed_case(s: &str, mask: &[bool]) -> String {
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

/// A plain-ASCII glob component for the globset comparison: no `?` next to
/// letters that some character folds into (`ss`, `fi`, `st`), so the two
/// matchers are meant to agree exactly.
fn ascii_glob_component() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("**".to_owned()),
        6 => prop::collection::vec(prop::sample::select(&["a", "b", "*", "?", "[ab]", "[!a]", "[a-b]"][..]), 1..4)
            .prop_map(|t| t.concat())
            .prop_filter("no `**` inside a component", |c| !c.contains("**")),
    ]
}

fn ascii_name() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(&["a", "b", "c", "A", "B"][..]), 1..4)
        .prop_map(|t| t.concat())
}

/// globset's verdict, adjusted for the two documented differences: `dir/**`
/// also covers `dir`, and case is ignored.
fn globset_oracle(pattern: &str, path: &str) -> bool {
    let path = path.to_ascii_lowercase();
    let is_match = |p: &str, target: &str| {
        globset::GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .unwrap()
            .compile_matcher()
            .is_match(target)
    };
    if !pattern.contains('/') {
        return is_match(pattern, path.rsplit('/').next().unwrap());
    }
    // Anchored: also try each trailing `/**` as matching nothing.
    let mut p = pattern;
    loop {
        if is_match(p, &path) {
            return true;
        }
        match p.strip_suffix("/**") {
            Some(shorter) if shorter.contains('/') || shorter == "**" => p = shorter,
            Some(shorter) => return is_match(shorter, &path),
            None => return false,
        }
    }
}

/// A guard with patterns that cover the tricky alphabet's shapes.
fn guard() -> Guard {
    GuardBuilder::new()
        .patterns([
            "ſecret/**",
            "*.ȿ",
            "\u{212a}ey",
            "straße",
            "caf?",
            "[A-Z]x/*.txt",
            "İ*",
            "ǅ/**/ﬁle",
            "**/ΣΑΣ",
            "Å*",
            "a/b/c",
        ])
        .restricted(true)
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn fold_ignores_uppercasing(s in tricky_string(12)) {
        prop_assert_eq!(f(&s.to_uppercase()), f(&s));
    }

    #[test]
    fn fold_ignores_lowercasing(s in tricky_string(12)) {
        prop_assert_eq!(f(&s.to_lowercase()), f(&s));
    }

    #[test]
    fn fold_ignores_per_char_case(s in tricky_string(12), mask in prop::collection::vec(any::<bool>(), 1..12)) {
        prop_assert_eq!(f(&mixed_case(&s, &mask)), f(&s));
    }

    #[test]
    fn fold_ignores_normalization_form(s in tricky_string(12)) {
        prop_assert_eq!(f(&nfd(&s)), f(&s));
        prop_assert_eq!(f(&nfc(&s)), f(&s));
    }

    #[test]
    fn fold_invariances_over_all_cased_and_decomposable_chars(s in interesting_string(8)) {
        let folded = f(&s);
        prop_assert_eq!(f(&s.to_uppercase()), folded.clone(), "upper");
        prop_assert_eq!(f(&s.to_lowercase()), folded.clone(), "lower");
        prop_assert_eq!(f(&nfd(&s)), folded.clone(), "nfd");
        prop_assert_eq!(f(&nfc(&s)), folded.clone(), "nfc");
        prop_assert_eq!(f(&folded), folded);
    }

    #[test]
    fn fold_is_idempotent(s in tricky_string(12)) {
        let once = fold(&s).into_owned();
        prop_assert_eq!(f(&once), once.as_str());
    }

    #[test]
    fn fold_works_per_component(p in tricky_path()) {
        let whole = fold(&p).into_owned();
        let parts: Vec<String> = p.split('/').map(|c| fold(c).into_owned()).collect();
        prop_assert_eq!(whole, parts.join("/"));
    }

    /// U+0345 uppercases to a base letter, so an accent can land on another
    /// letter when case changes (`"ᾴ\u{301}"` uppercases to `"ΆΙ\u{301}"`,
    /// its NFD to `"Ά\u{301}Ι"`): only normalization invariance and
    /// idempotence are promised there.
    #[test]
    fn ypogegrammeni_keeps_normalization_invariance(s in prop::collection::vec(prop::sample::select(&[
        '\u{3b1}', '\u{391}', '\u{345}', '\u{301}', '\u{313}', '\u{1fb3}', '\u{1fbc}', '\u{1fb4}', '\u{3b9}', 'x',
    ][..]), 0..8).prop_map(|v| v.into_iter().collect::<String>())) {
        prop_assert_eq!(f(&nfd(&s)), f(&s));
        prop_assert_eq!(f(&nfc(&s)), f(&s));
        let once = f(&s);
        prop_assert_eq!(f(&once), once);
    }

    #[test]
    fn respelling_never_turns_refusal_into_allow(p in tricky_path(), mask in prop::collection::vec(any::<bool>(), 1..8)) {
        let g = guard();
        let respelled = [p.to_uppercase(), p.to_lowercase(), mixed_case(&p, &mask), nfd(&p), nfc(&p)];
        for check in [Guard::check_write, Guard::check_rename_or_delete] {
            let verdict = check(&g, &p, None);
            for r in &respelled {
                let again = check(&g, r, None);
                prop_assert_eq!(verdict.is_refused(), again.is_refused(), "{:?} vs {:?}", p, r);
                prop_assert_eq!(
                    verdict.refusal().map(|r| (r.rule(), r.is_ancestor())),
                    again.refusal().map(|r| (r.rule(), r.is_ancestor()))
                );
            }
        }
    }

    /// On plain ASCII globs the matcher agrees with globset.
    #[test]
    fn agrees_with_globset_on_ascii(
        comps in prop::collection::vec(ascii_glob_component(), 1..4),
        names in prop::collection::vec(ascii_name(), 1..5),
    ) {
        let pattern = comps.join("/");
        let path = names.join("/");
        let g = GuardBuilder::new().pattern(&pattern).build().unwrap();
        prop_assert!(g.warnings().is_empty());
        prop_assert_eq!(
            g.check_write(&path, None).is_refused(),
            globset_oracle(&pattern, &path),
            "{:?} vs {:?}", pattern, path
        );
    }

    /// A guard of several patterns answers as the patterns would one by one:
    /// the first written pattern that matches directly, else the `.git`
    /// rule, else the first that matches as an ancestor. (Catches the
    /// guard's prefilter index skipping or misordering a pattern.)
    #[test]
    fn many_patterns_answer_like_each_alone(
        pats in prop::collection::vec(prop_oneof![
            prop::sample::select(&[
                "a", "b", "*.b", "a/**", "a/b", "b/*/a", "**/a", "**/b/**", "a/*", "*", "[ab]", "a?", ".git",
            ][..]).prop_map(str::to_owned),
            prop::collection::vec(prop::sample::select(&["a", "b", "*", "**", "A", "ß", "ss"][..]), 1..4)
                .prop_map(|c| c.join("/")),
        ], 1..6),
        names in prop::collection::vec(prop::sample::select(&["a", "b", "A", "B", ".git", "x.b", "ss", "ß", "ab"][..]), 1..5),
        restricted in any::<bool>(),
    ) {
        let path = names.join("/");
        let Ok(g) = GuardBuilder::new().patterns(&pats).restricted(restricted).build() else { return Ok(()) };
        for check in [Guard::check_write, Guard::check_rename_or_delete] {
            let alone: Vec<Option<bool>> = pats
                .iter()
                .map(|p| {
                    let one = GuardBuilder::new().pattern(p).build().unwrap();
                    check(&one, &path, None).refusal().map(|r| r.is_ancestor())
                })
                .collect();
            let expected = alone
                .iter()
                .position(|r| *r == Some(false))
                .map(|i| (Rule::Pattern(&pats[i]), false))
                .or_else(|| (restricted && path.split('/').any(|n| n == ".git")).then_some((Rule::GitDir, false)))
                .or_else(|| alone.iter().position(|r| *r == Some(true)).map(|i| (Rule::Pattern(&pats[i]), true)));
            let got = check(&g, &path, None);
            prop_assert_eq!(got.refusal().map(|r| (r.rule(), r.is_ancestor())), expected, "{:?} {:?}", pats, path);
        }
    }

    /// `**/name/**` and `**/name` are decided by a shortcut; they must answer
    /// like the same patterns spelled so that the state machine runs.
    #[test]
    fn shortcut_shapes_agree_with_the_state_machine(
        name in prop::sample::select(&["a", "B", "ß", "node_modules"][..]),
        names in prop::collection::vec(prop::sample::select(&["a", "b", "A", "ss", "node_modules", "x"][..]), 1..5),
    ) {
        let path = names.join("/");
        for (short, long) in [(format!("**/{name}/**"), format!("**/**/{name}/**")), (format!("**/{name}"), format!("**/**/{name}"))] {
            let (gs, gl) = (GuardBuilder::new().pattern(&short).build().unwrap(), GuardBuilder::new().pattern(&long).build().unwrap());
            for check in [Guard::check_write, Guard::check_rename_or_delete] {
                let a = check(&gs, &path, None).refusal().map(|r| r.is_ancestor());
                let b = check(&gl, &path, None).refusal().map(|r| r.is_ancestor());
                prop_assert_eq!(a, b, "{} vs {} on {:?}", short, long, path);
            }
        }
    }

    /// The ancestor rule against its definition: a path is refused as an
    /// ancestor exactly when it is not matched itself and some path beneath
    /// it is (found by enumerating every continuation up to four names).
    #[test]
    fn ancestor_rule_matches_its_definition(
        comps in prop::collection::vec(prop::sample::select(&["a", "b", "*", "**", "[!a]"][..]), 2..5),
        dir in prop::collection::vec(prop::sample::select(&["a", "b", "c"][..]), 1..4),
    ) {
        let pattern = comps.join("/");
        let g = GuardBuilder::new().pattern(&pattern).build().unwrap();
        let dir = dir.join("/");
        let direct = |p: &str| g.check_write(p, None).is_refused();
        let mut beneath = vec![dir.clone()];
        let mut witness = false;
        for _ in 0..4 {
            beneath = beneath.iter().flat_map(|p| ["a", "b", "c"].map(|n| format!("{p}/{n}"))).collect();
            witness |= beneath.iter().any(|p| direct(p));
        }
        let verdict = g.check_rename_or_delete(&dir, None);
        let expected = if direct(&dir) { Some(false) } else if witness { Some(true) } else { None };
        prop_assert_eq!(verdict.refusal().map(|r| r.is_ancestor()), expected, "{:?} on {:?}", pattern, dir);
    }

    /// The link rule's definition: a link's name is refused as an ancestor
    /// exactly when some path beneath it matches while the same path
    /// beneath another name (the root itself, or a few others) does not.
    #[test]
    fn links19_link_rule_matches_its_definition(
        comps in prop::collection::vec(prop::sample::select(&["a", "b", "*", "**", "[!a]"][..]), 2..5),
        dir in prop::collection::vec(prop::sample::select(&["a", "b", "c"][..]), 1..4),
    ) {
        let pattern = comps.join("/");
        let g = GuardBuilder::new().pattern(&pattern).build().unwrap();
        let dir = dir.join("/");
        let direct = |p: &str| g.check_write(p, None).is_refused();
        let mut rests: Vec<String> = vec![String::new()];
        let mut witness = false;
        for _ in 0..4 {
            rests = rests
                .iter()
                .flat_map(|r| ["a", "b", "c"].map(|n| if r.is_empty() { n.to_owned() } else { format!("{r}/{n}") }))
                .collect();
            witness |= rests.iter().any(|r| {
                direct(&format!("{dir}/{r}"))
                    && ["", "a", "b", "c", "c/c", "a/b"].iter().any(|t| {
                        !direct(&if t.is_empty() { r.clone() } else { format!("{t}/{r}") })
                    })
            });
        }
        let verdict = g.check_link(&dir, None);
        let expected = if direct(&dir) { Some(false) } else if witness { Some(true) } else { None };
        prop_assert_eq!(verdict.refusal().map(|r| r.is_ancestor()), expected, "{:?} on {:?}", pattern, dir);
    }

    #[test]
    fn no_panic_on_arbitrary_patterns_and_paths(
        pats in prop::collection::vec(".{0,12}", 0..4),
        specials in prop::collection::vec("[\\[\\]!*?{},\\\\/a-c.-]{0,10}", 0..4),
        path in ".{0,24}",
        resolved in proptest::option::of("[a-c/.\\[\\]*?]{0,12}"),
    ) {
        let mut b = GuardBuilder::new();
        b.patterns(pats.iter().chain(&specials)).restricted(true);
        if let Ok(g) = b.build() {
            let _ = g.check_write(&path, resolved.as_deref());
            let _ = g.check_rename_or_delete(&path, resolved.as_deref());
            let _ = g.warnings().iter().map(ToString::to_string).count();
        }
    }

    /// Each pattern alone must still match each pattern-shaped name in any case.
    #[test]
    fn any_case_of_a_pattern_literal_matches(s in tricky_string(8).prop_filter("a name", |s| {
        let f = fold(s);
        !f.is_empty() && f != "." && f != ".." && !s.contains(['/', '\\', '*', '?', '[', '{'])
            && !s.starts_with(|c: char| unicode_normalization::char::is_combining_mark(c))
    })) {
        let g = GuardBuilder::new().pattern(&s).build().unwrap();
        for spelled in [s.to_uppercase(), s.to_lowercase(), nfd(&s), nfc(&s)] {
            prop_assert!(g.check_write(&spelled, None).is_refused(), "{:?} vs {:?}", s, spelled);
            let nested = format!("dir/{spelled}");
            prop_assert!(g.check_write(&nested, None).is_refused(), "{:?}", nested);
        }
    }
}
