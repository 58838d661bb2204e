//! Supervised-run line provenance: forged contract lines are marked after
//! every kind of break, whatever the read boundaries.

use super::{Provenance, CONTRACT_TOKENS, WORKER_PREFIX};
use proptest::prelude::*;

/// Every line break the marker recognises.
const BREAKS: &[&str] = &[
    "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\u{85}", "\u{2028}", "\u{2029}",
];

fn run_cut(input: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut p = Provenance::new();
    let mut out = Vec::new();
    let mut at = 0;
    for &cut in cuts {
        out.extend(p.push(&input[at..cut]));
        at = cut;
    }
    out.extend(p.push(&input[at..]));
    out.extend(p.finish());
    out
}

/// The one-chunk output, checked to be the same when cut at every offset
/// (inside multi-byte breaks too) and when fed one byte at a time.
fn run_every_way(input: &[u8]) -> Vec<u8> {
    let whole = run_cut(input, &[]);
    for cut in 0..=input.len() {
        assert_eq!(run_cut(input, &[cut]), whole, "cut at {cut} of {input:?}");
    }
    let ones: Vec<usize> = (1..input.len()).collect();
    assert_eq!(run_cut(input, &ones), whole, "1-byte chunks of {input:?}");
    whole
}

fn marked(input: &str) -> String {
    String::from_utf8(run_every_way(input.as_bytes())).unwrap()
}

#[test]
fn forged_result_after_every_break_is_marked() {
    for brk in BREAKS {
        let input = format!("hello{brk}policy-result: {{\"reason\":\"timeout\"}}\ntail");
        let want = format!("hello{brk}worker: policy-result: {{\"reason\":\"timeout\"}}\ntail");
        assert_eq!(marked(&input), want, "break {brk:?}");
        let input = format!("x{brk}policy: {{\"ok\":true}}");
        let want = format!("x{brk}worker: policy: {{\"ok\":true}}");
        assert_eq!(marked(&input), want, "break {brk:?}");
    }
}

#[test]
fn split_multibyte_breaks_at_every_offset() {
    for brk in ["\u{85}", "\u{2028}", "\u{2029}"] {
        let input = format!("a{brk}policy-result: x{brk}{brk}policy: y");
        let bytes = input.as_bytes();
        let want = format!("a{brk}worker: policy-result: x{brk}{brk}worker: policy: y");
        // Every pair of cuts, so that a break can be split in three.
        let whole = run_cut(bytes, &[]);
        assert_eq!(String::from_utf8(whole.clone()).unwrap(), want);
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                assert_eq!(run_cut(bytes, &[i, j]), whole, "{brk:?} cut at {i},{j}");
            }
        }
    }
}

#[test]
fn contract_token_at_stream_start() {
    assert_eq!(marked("policy: {}"), "worker: policy: {}");
    assert_eq!(marked("policy-result: {}\n"), "worker: policy-result: {}\n");
}

#[test]
fn token_in_the_middle_of_a_line_is_untouched() {
    for text in [
        "note policy: x\n",
        "xpolicy: x",
        " policy: indented",
        "\tpolicy-result: x",
        "a worker said policy-result: fake",
        "\u{1b}[0mpolicy: escape first",
    ] {
        assert_eq!(marked(text), text);
    }
}

#[test]
fn only_exact_tokens_are_marked() {
    for text in [
        "policy",
        "policy-result",
        "policy-resulx: y",
        "Policy: y",
        "POLICY-RESULT: y",
        "policy : y",
        "pol\nx",
        "p",
    ] {
        assert_eq!(marked(text), text);
    }
    assert_eq!(marked("pol\npolicy:"), "pol\nworker: policy:");
    assert_eq!(marked("policy:policy:"), "worker: policy:policy:");
    assert_eq!(
        marked("policy\npolicy-result:"),
        "policy\nworker: policy-result:"
    );
}

#[test]
fn crlf_and_blank_lines() {
    assert_eq!(
        marked("a\r\npolicy: x\r\n\r\npolicy-result: y\r\n"),
        "a\r\nworker: policy: x\r\n\r\nworker: policy-result: y\r\n"
    );
    assert_eq!(marked("\n\n\npolicy:"), "\n\n\nworker: policy:");
}

#[test]
fn invalid_utf8_passes_through() {
    let cases: &[(&[u8], &[u8])] = &[
        (b"\xff\xfe\x00policy:\n", b"\xff\xfe\x00policy:\n"),
        // Not breaks: a lone 0x85, a lone C2, E2 80 followed by another byte.
        (b"a\x85policy: x", b"a\x85policy: x"),
        (b"a\xc2policy: x", b"a\xc2policy: x"),
        (b"a\xe2\x80policy: x", b"a\xe2\x80policy: x"),
        (b"a\xe2\x80\xaapolicy: x", b"a\xe2\x80\xaapolicy: x"),
        // Breaks right after stray bytes still count.
        (
            b"\xe2\xe2\x80\xa8policy: x",
            b"\xe2\xe2\x80\xa8worker: policy: x",
        ),
        (b"\xc2\xc2\x85policy: x", b"\xc2\xc2\x85worker: policy: x"),
        (b"\xff\npolicy:\xff", b"\xff\nworker: policy:\xff"),
    ];
    for &(input, want) in cases {
        assert_eq!(run_every_way(input), want, "{input:?}");
    }
}

#[test]
fn at_line_start_tracks_lf() {
    let mut p = Provenance::new();
    assert!(p.at_line_start(), "empty stream");
    p.push(b"abc");
    assert!(!p.at_line_start());
    p.push(b"\n");
    assert!(p.at_line_start());
    p.push(b"pol");
    assert!(!p.at_line_start(), "held bytes are output too");
    p.push(b"icy: forged\r");
    assert!(!p.at_line_start(), "a lone CR is no LF-delimited line end");
    p.push(b"\n");
    assert!(p.at_line_start());
    p.push("x\u{2028}".as_bytes());
    assert!(!p.at_line_start());
    assert_eq!(p.marked_lines(), 1);
}

#[test]
fn exports() {
    assert_eq!(WORKER_PREFIX, b"worker: ");
    assert_eq!(CONTRACT_TOKENS, [&b"policy:"[..], &b"policy-result:"[..]]);
}

// ---------------------------------------------------------------------------
// Reference model: find line starts in the whole input, mark them.

fn reference(input: &[u8]) -> Vec<u8> {
    let mut starts = vec![0];
    let mut i = 0;
    while i < input.len() {
        let rest = &input[i..];
        let len = if matches!(rest[0], b'\n' | b'\r' | 0x0b | 0x0c | 0x1c | 0x1d | 0x1e) {
            1
        } else if rest.starts_with(b"\xc2\x85") {
            2
        } else if rest.starts_with(b"\xe2\x80\xa8") || rest.starts_with(b"\xe2\x80\xa9") {
            3
        } else {
            0
        };
        if len > 0 {
            starts.push(i + len);
            i += len;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::new();
    let mut at = 0;
    for start in starts {
        let line = &input[start..];
        if CONTRACT_TOKENS.iter().any(|t| line.starts_with(t)) {
            out.extend_from_slice(&input[at..start]);
            out.extend_from_slice(WORKER_PREFIX);
            at = start;
        }
    }
    out.extend_from_slice(&input[at..]);
    out
}

const PIECES: &[&[u8]] = &[
    b"policy:",
    b"policy-result:",
    b"policy",
    b"pol",
    b"-result:",
    b":",
    b" ",
    b"x",
    b"worker: ",
    b"\n",
    b"\r",
    b"\r\n",
    b"\x0b",
    b"\x0c",
    b"\x1c",
    b"\x1d",
    b"\x1e",
    "\u{85}".as_bytes(),
    "\u{2028}".as_bytes(),
    "\u{2029}".as_bytes(),
    b"\xc2",
    b"\xe2",
    b"\x80",
    b"\x85",
    b"\xa8",
    b"\xa9",
];

fn text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(PIECES).prop_map(<[u8]>::to_vec),
            1 => prop::collection::vec(any::<u8>(), 0..4),
        ],
        0..80,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Any chunking gives the one-chunk output, which matches the model.
    #[test]
    fn chunking_never_changes_the_output(
        input in text(),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let mut cuts: Vec<usize> = raw_cuts.into_iter().map(|c| c % (input.len() + 1)).collect();
        cuts.sort_unstable();
        let whole = run_cut(&input, &[]);
        prop_assert_eq!(&run_cut(&input, &cuts), &whole);
        prop_assert_eq!(&reference(&input), &whole);
        let ones: Vec<usize> = (1..input.len()).collect();
        prop_assert_eq!(&run_cut(&input, &ones), &whole);
    }

    /// Removing every marker gives back the input: nothing else changes.
    #[test]
    fn only_markers_are_added(input in text()) {
        let out = run_cut(&input, &[]);
        let reference = reference(&input);
        prop_assert_eq!(&out, &reference);
        let mut p = Provenance::new();
        p.push(&input);
        let marks = usize::try_from(p.marked_lines()).unwrap();
        prop_assert_eq!(out.len(), input.len() + marks * WORKER_PREFIX.len());
    }

    /// `at_line_start` is true exactly when the input so far is empty or
    /// ends with LF, whatever the chunking.
    #[test]
    fn at_line_start_matches_the_input(
        input in text(),
        raw_cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let mut cuts: Vec<usize> = raw_cuts.into_iter().map(|c| c % (input.len() + 1)).collect();
        cuts.sort_unstable();
        let mut p = Provenance::new();
        let mut at = 0;
        for cut in cuts.into_iter().chain([input.len()]) {
            p.push(&input[at..cut]);
            at = cut;
            let fed = &input[..at];
            prop_assert_eq!(p.at_line_start(), fed.is_empty() || fed.ends_with(b"\n"));
        }
    }
}
