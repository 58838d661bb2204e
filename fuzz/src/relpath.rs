//! Agent-facing names (docs/reference/names.md): `RelPath::parse` never panics, accepts
//! exactly what an independent model of the rules accepts, gives the reason
//! the model finds, and yields a normalized name that parses to itself.

use sandgate::{RelPath, RelPathReason};

use crate::bytes::Bytes;

/// Pieces that sit on the edges of the rules.
const ALPHABET: &[&str] = &[
    "a",
    "b",
    "/",
    "/",
    ".",
    "..",
    "...",
    "\\",
    ":",
    "C:",
    "c:",
    "\0",
    " ",
    "con",
    "CON",
    "Nul",
    "aux.txt",
    "com1",
    "COM0",
    "lpt9",
    "LPT¹",
    "com³",
    "com\u{b9}",
    "prn ",
    ".txt",
    "é",
    "e\u{301}",
    "ſ",
    "😀",
    "\u{2215}",
    "\u{ff0f}",
    "\\\\",
    "\\\\?\\",
    "\\\\.\\",
    "x",
];

/// Decodes `data` into a name and checks it.
pub fn check(data: &[u8]) {
    let mut b = Bytes::new(data);
    let name = match b.byte() % 4 {
        0 => String::from_utf8_lossy(b.rest()).into_owned(),
        1 => {
            // Long names: a component repeated to reach the length limits.
            let comp = b.tokens(ALPHABET, 3);
            let reps = 1 + b.below(300);
            let sep = if b.bool() { "/" } else { "" };
            let mut s = b.tokens(ALPHABET, 2);
            for _ in 0..reps {
                s.push_str(&comp);
                s.push_str(sep);
                if s.len() > 5000 {
                    break;
                }
            }
            s
        }
        _ => b.tokens(ALPHABET, 12),
    };
    check_name(&name);
}

/// What the rules of docs/reference/names.md say about `input`, written independently of the
/// parser: `Ok(normalized)` or the reason. The normalized form keeps one
/// trailing `/` after a non-root name that ends in `/` or `/.` (it must be a
/// directory).
pub fn model(input: &str) -> Result<String, RelPathReason> {
    use RelPathReason as R;
    if input.is_empty() {
        return Err(R::Empty);
    }
    if input.contains('\0') {
        return Err(R::Nul);
    }
    if input.len() > 4096 {
        return Err(R::TooLong);
    }
    if input.starts_with("\\\\") {
        return Err(R::Unc);
    }
    if input.starts_with('/') || input.starts_with('\\') {
        return Err(R::Absolute);
    }
    let b = input.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err(R::Drive);
    }
    if input.contains('\\') {
        return Err(R::Backslash);
    }
    let mut kept = Vec::new();
    for c in input.split('/') {
        match c {
            "" | "." => continue,
            ".." => return Err(R::ParentComponent),
            _ if c.len() > 255 => return Err(R::ComponentTooLong),
            _ if c.contains(':') => return Err(R::Colon),
            _ if reserved(c) => return Err(R::ReservedName),
            _ => kept.push(c),
        }
    }
    if kept.is_empty() {
        return Ok(".".to_owned());
    }
    let mut out = kept.join("/");
    if input.ends_with('/') || input.ends_with("/.") {
        out.push('/');
    }
    Ok(out)
}

/// A Windows device name, with or without extension, any ASCII case,
/// trailing spaces of the device part ignored; `COM`/`LPT` take 1-9 and the
/// superscripts ¹²³.
fn reserved(component: &str) -> bool {
    let stem = component.split('.').next().unwrap_or("");
    let stem = stem.trim_end_matches(' ').to_ascii_uppercase();
    if ["CON", "PRN", "AUX", "NUL"].contains(&stem.as_str()) {
        return true;
    }
    for head in ["COM", "LPT"] {
        if let Some(tail) = stem.strip_prefix(head) {
            let mut cs = tail.chars();
            if let (Some(d), None) = (cs.next(), cs.next()) {
                if ('1'..='9').contains(&d) || ['¹', '²', '³'].contains(&d) {
                    return true;
                }
            }
        }
    }
    false
}

/// The invariants for one name.
pub fn check_name(input: &str) {
    let parsed = RelPath::parse(input);
    let expected = model(input);
    match (&parsed, &expected) {
        (Ok(p), Ok(want)) => {
            assert_eq!(p.as_resolved_str(), want, "normalized form of {input:?}");
            assert_eq!(p.must_be_dir(), want.ends_with('/'), "{input:?}");
            check_valid(p);
        }
        (Err(e), Err(reason)) => {
            assert_eq!(e.reason(), *reason, "reason for {input:?}");
            let _ = e.to_string();
            if let Some(c) = e.component() {
                assert!(input.contains(c), "{input:?} does not hold {c:?}");
            }
        }
        _ => panic!("RelPath::parse({input:?}) = {parsed:?}, the rules say {expected:?}"),
    }
}

/// A parsed name is normalized, obeys every rule, and parses to itself.
fn check_valid(p: &RelPath) {
    let s = p.as_str();
    assert!(!s.is_empty());
    assert!(!s.ends_with('/'), "{s:?}");
    assert_eq!(s == ".", p.is_root());
    let spelled = p.as_resolved_str();
    assert_eq!(
        RelPath::parse(spelled).as_ref(),
        Ok(p),
        "re-parse of {spelled:?}"
    );
    assert!(s.len() <= 4096);
    assert!(!s.contains(['\\', '\0', ':']));
    if p.is_root() {
        assert_eq!(p.components().count(), 0);
        assert_eq!(p.parent(), None);
        assert_eq!(p.file_name(), None);
        return;
    }
    let comps: Vec<&str> = p.components().collect();
    assert_eq!(comps.join("/"), s);
    for c in &comps {
        assert!(
            !c.is_empty() && *c != "." && *c != "..",
            "component {c:?} of {s:?}"
        );
        assert!(c.len() <= 255);
        assert!(!reserved(c), "reserved component {c:?}");
    }
    let parent = p.parent().expect("a non-root name has a parent");
    let name = p.file_name().expect("a non-root name has a file name");
    assert_eq!(name, *comps.last().unwrap());
    let joined = parent.join(name).expect("parent+name parses");
    assert_eq!(joined.as_str(), s, "parent+name of {s:?}");
    assert!(!joined.must_be_dir());
}
