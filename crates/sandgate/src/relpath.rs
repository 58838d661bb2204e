//! Agent-facing names (docs/reference/names.md).
//!
//! Every path that an agent, a model or any other untrusted caller supplies
//! is parsed into a [`RelPath`] first. The rules are deliberately stricter
//! than what the filesystem would accept: a name must mean the same thing on
//! every host, so Windows spellings are refused everywhere, and `..` is
//! refused outright even where it would stay inside.

use std::fmt;

/// Longest accepted name, in bytes.
pub const MAX_NAME_BYTES: usize = 4096;
/// Longest accepted component, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 255;

/// A validated, normalized root-relative name.
///
/// Normalized means: no empty or `.` components, no leading or repeated
/// slashes. The root itself is spelled `.`. A trailing slash is kept as one
/// `/` and means "must be a directory" (`a.txt/` names nothing when `a.txt`
/// is a file, as in POSIX): [`as_str`](Self::as_str) spells the name without
/// it, and [`AsRef<Path>`] hands it to resolution with it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath {
    /// Normalized text, ending in `/` when the name must be a directory;
    /// empty for the root.
    text: String,
}

/// Why a name was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RelPathReason {
    /// The empty string.
    Empty,
    /// A NUL byte.
    Nul,
    /// A leading `/`.
    Absolute,
    /// A Windows drive (`C:\x`, `C:x`).
    Drive,
    /// A Windows UNC or device path (`\\server\share`, `\\?\x`, `\\.\x`).
    Unc,
    /// A backslash anywhere.
    Backslash,
    /// A `..` component.
    ParentComponent,
    /// A component that is a Windows reserved device name (`CON`, `NUL.txt`).
    ReservedName,
    /// A `:` in a component (drive or alternate data stream).
    Colon,
    /// Over 4096 bytes.
    TooLong,
    /// A component over 255 bytes.
    ComponentTooLong,
}

impl RelPathReason {
    /// A short sentence a user can act on.
    pub fn describe(self) -> &'static str {
        match self {
            RelPathReason::Empty => "empty path",
            RelPathReason::Nul => "path contains a NUL byte",
            RelPathReason::Absolute => "absolute path; names are relative to the root",
            RelPathReason::Drive => "Windows drive path; names are relative to the root",
            RelPathReason::Unc => "Windows UNC or device path",
            RelPathReason::Backslash => "backslash in path; use '/' as the only separator",
            RelPathReason::ParentComponent => "'..' component; traversal is refused",
            RelPathReason::ReservedName => "Windows reserved device name",
            RelPathReason::Colon => "':' in a component (drive or alternate data stream)",
            RelPathReason::TooLong => "path longer than 4096 bytes",
            RelPathReason::ComponentTooLong => "path component longer than 255 bytes",
        }
    }
}

/// A refused name: the reason and the offending component where there is one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{}", reason.describe(), shown_component(.component))]
pub struct RelPathError {
    reason: RelPathReason,
    component: Option<String>,
}

impl RelPathError {
    /// Why it was refused.
    pub fn reason(&self) -> RelPathReason {
        self.reason
    }
    /// The component that broke the rule, if one did.
    pub fn component(&self) -> Option<&str> {
        self.component.as_deref()
    }
}

/// ` ("component")` after the reason, when a component broke the rule.
fn shown_component(component: &Option<String>) -> String {
    match component {
        Some(c) => format!(" ({c:?})"),
        None => String::new(),
    }
}

fn refuse(reason: RelPathReason, component: Option<&str>) -> RelPathError {
    RelPathError {
        reason,
        component: component.map(str::to_owned),
    }
}

/// Whether `component` is a Windows reserved device name, with or without
/// an extension, in any case (`con`, `Nul.txt`, `COM1.tar.gz`, `lpt9 `).
fn is_reserved(component: &str) -> bool {
    // No allocation: this runs for every component of every name. Every
    // reserved name starts with C, P, A, N or L and has three letters.
    let head = component.as_bytes();
    if head.len() < 3 || !matches!(head[0] | 0x20, b'a' | b'c' | b'l' | b'n' | b'p') {
        return false;
    }
    let stem = component.split('.').next().unwrap_or("");
    // Windows ignores trailing spaces in the device part.
    let b = stem.trim_end_matches(' ').as_bytes();
    let com_or_lpt =
        |head: &[u8]| head.eq_ignore_ascii_case(b"COM") || head.eq_ignore_ascii_case(b"LPT");
    match b.len() {
        3 => [b"CON", b"PRN", b"AUX", b"NUL"]
            .iter()
            .any(|w| b.eq_ignore_ascii_case(*w)),
        4 => com_or_lpt(&b[..3]) && (b'1'..=b'9').contains(&b[3]),
        // COM¹, COM², COM³ (U+00B9, U+00B2, U+00B3 are C2 B9, C2 B2, C2 B3).
        5 => com_or_lpt(&b[..3]) && b[3] == 0xC2 && matches!(b[4], 0xB9 | 0xB2 | 0xB3),
        _ => false,
    }
}

impl RelPath {
    /// Parses an agent-supplied name, or refuses it with the reason.
    pub fn parse(input: &str) -> Result<RelPath, RelPathError> {
        if input.is_empty() {
            return Err(refuse(RelPathReason::Empty, None));
        }
        if input.contains('\0') {
            return Err(refuse(RelPathReason::Nul, None));
        }
        if input.len() > MAX_NAME_BYTES {
            return Err(refuse(RelPathReason::TooLong, None));
        }
        let b = input.as_bytes();
        if b[0] == b'/' {
            return Err(refuse(RelPathReason::Absolute, None));
        }
        if b.starts_with(b"\\\\") {
            return Err(refuse(RelPathReason::Unc, None));
        }
        if b[0] == b'\\' {
            return Err(refuse(RelPathReason::Absolute, None));
        }
        if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
            return Err(refuse(RelPathReason::Drive, None));
        }
        if input.contains('\\') {
            return Err(refuse(RelPathReason::Backslash, None));
        }
        // Every name is parsed on every operation: one pass over the bytes
        // (components split at ASCII '/', so each is still valid UTF-8),
        // and a name already in normal form is copied whole.
        let mut normal = true;
        let mut start = 0;
        // A name that ends in one slash after a component keeps it as is; any
        // other spelling of the end (`a//`, `a/.`, `a/./`) is folded.
        let trailing = b[b.len() - 1] == b'/';
        loop {
            let end = b[start..]
                .iter()
                .position(|&x| x == b'/')
                .map_or(b.len(), |i| start + i);
            let c = &input[start..end];
            if c.is_empty() || c == "." {
                // The one empty component after a final single slash is the
                // kept trailing slash, not something to fold.
                let kept_slash = c.is_empty() && end == b.len() && end >= 2 && b[end - 2] != b'/';
                if !kept_slash {
                    normal = false;
                }
            } else {
                if c == ".." {
                    return Err(refuse(RelPathReason::ParentComponent, Some(c)));
                }
                if c.len() > MAX_COMPONENT_BYTES {
                    return Err(refuse(RelPathReason::ComponentTooLong, Some(c)));
                }
                if c.as_bytes().contains(&b':') {
                    return Err(refuse(RelPathReason::Colon, Some(c)));
                }
                if is_reserved(c) {
                    return Err(refuse(RelPathReason::ReservedName, Some(c)));
                }
            }
            if end == b.len() {
                break;
            }
            start = end + 1;
        }
        if normal {
            return Ok(RelPath {
                text: input.to_owned(),
            });
        }
        let mut text = String::with_capacity(input.len());
        for c in input.split('/').filter(|c| !c.is_empty() && *c != ".") {
            if !text.is_empty() {
                text.push('/');
            }
            text.push_str(c);
        }
        // `a/.` and `a/./` mean a directory as much as `a/` does; the root
        // is a directory anyway.
        let dir = trailing || input.ends_with("/.");
        if dir && !text.is_empty() {
            text.push('/');
        }
        Ok(RelPath { text })
    }

    /// The root itself.
    pub fn root() -> RelPath {
        RelPath {
            text: String::new(),
        }
    }

    /// Whether this names the root itself (`.`).
    pub fn is_root(&self) -> bool {
        self.text.is_empty()
    }

    /// Whether the name was spelled with a trailing slash (`a/`, `a/.`):
    /// what it names must be a directory.
    pub fn must_be_dir(&self) -> bool {
        self.text.ends_with('/')
    }

    /// The name without its trailing slash, empty for the root.
    fn bare(&self) -> &str {
        self.text.strip_suffix('/').unwrap_or(&self.text)
    }

    /// The normalized name: `.` for the root, else `a/b/c`, without a
    /// trailing slash (see [`must_be_dir`](Self::must_be_dir)). This is the
    /// spelling deny patterns and error reports use.
    pub fn as_str(&self) -> &str {
        if self.text.is_empty() {
            "."
        } else {
            self.bare()
        }
    }

    /// The name as resolution takes it: [`as_str`](Self::as_str) followed by
    /// `/` when it must be a directory.
    pub fn as_resolved_str(&self) -> &str {
        if self.text.is_empty() {
            "."
        } else {
            &self.text
        }
    }

    /// The normalized name as an owned string, as [`RelPath::as_str`]
    /// spells it.
    pub fn into_string(mut self) -> String {
        if self.text.is_empty() {
            ".".to_owned()
        } else {
            if self.must_be_dir() {
                self.text.pop();
            }
            self.text
        }
    }

    /// The components, in order (none for the root).
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.text.split('/').filter(|c| !c.is_empty())
    }

    /// The last component, if this is not the root.
    pub fn file_name(&self) -> Option<&str> {
        self.bare().rsplit('/').next().filter(|c| !c.is_empty())
    }

    /// The name of the directory holding this one (`None` for the root).
    pub fn parent(&self) -> Option<RelPath> {
        if self.is_root() {
            return None;
        }
        Some(RelPath {
            text: self
                .bare()
                .rsplit_once('/')
                .map_or("", |(p, _)| p)
                .to_owned(),
        })
    }

    /// This name followed by `child` (a single valid component).
    pub fn join(&self, child: &str) -> Result<RelPath, RelPathError> {
        let joined = if self.is_root() {
            child.to_owned()
        } else {
            format!("{}/{child}", self.bare())
        };
        RelPath::parse(&joined)
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name as resolution takes it, trailing slash included
/// ([`RelPath::as_resolved_str`]).
impl AsRef<std::path::Path> for RelPath {
    fn as_ref(&self) -> &std::path::Path {
        std::path::Path::new(self.as_resolved_str())
    }
}

#[cfg(test)]
mod tests {
    use super::RelPathReason as R;
    use super::*;

    macro_rules! refusals {
        ($($name:ident: $input:expr => $reason:expr;)*) => {$(
            #[test]
            fn $name() {
                let e = RelPath::parse($input).unwrap_err();
                assert_eq!(e.reason(), $reason, "{:?}", $input);
            }
        )*};
    }

    refusals! {
        refuses_empty: "" => R::Empty;
        refuses_nul: "a\0b" => R::Nul;
        refuses_nul_at_end: "a\0" => R::Nul;
        refuses_leading_slash: "/etc/passwd" => R::Absolute;
        refuses_leading_backslash: "\\windows" => R::Absolute;
        refuses_drive_absolute: "C:\\Windows" => R::Drive;
        refuses_drive_forward: "c:/x" => R::Drive;
        refuses_drive_relative: "C:x" => R::Drive;
        refuses_unc: "\\\\server\\share" => R::Unc;
        refuses_device_question: "\\\\?\\C:\\x" => R::Unc;
        refuses_device_dot: "\\\\.\\pipe\\x" => R::Unc;
        refuses_dotdot: ".." => R::ParentComponent;
        refuses_dotdot_inside: "a/../b" => R::ParentComponent;
        refuses_dotdot_trailing: "a/.." => R::ParentComponent;
        refuses_backslash_inside: "a\\b" => R::Backslash;
        refuses_backslash_dotdot: "a\\..\\b" => R::Backslash;
        refuses_con: "CON" => R::ReservedName;
        refuses_con_lower_ext: "dir/con.txt" => R::ReservedName;
        refuses_nul_device: "nul" => R::ReservedName;
        refuses_prn: "Prn.tar.gz" => R::ReservedName;
        refuses_aux: "aux" => R::ReservedName;
        refuses_com1: "com1" => R::ReservedName;
        refuses_com9_ext: "COM9.log" => R::ReservedName;
        refuses_lpt5: "x/lpt5" => R::ReservedName;
        refuses_com_superscript: "COM¹" => R::ReservedName;
        refuses_lpt_superscript_ext: "lpt³.txt" => R::ReservedName;
        refuses_con_trailing_space: "con .txt" => R::ReservedName;
        refuses_colon_stream: "file.txt:secret" => R::Colon;
        refuses_colon_component: "a/b:c" => R::Colon;
        refuses_too_long: &"a/".repeat(2049) => R::TooLong;
        refuses_component_too_long: &"x".repeat(256) => R::ComponentTooLong;
    }

    #[test]
    fn accepts_and_normalizes() {
        for (input, want) in [
            ("a", "a"),
            ("./a", "a"),
            ("a//b/", "a/b"),
            ("a/./b/.", "a/b"),
            (".", "."),
            ("./", "."),
            ("com10", "com10"),
            ("console.log", "console.log"),
            ("nul_device", "nul_device"),
            ("...", "..."),
            ("..a", "..a"),
            ("a..", "a.."),
            ("é/ſ", "é/ſ"),
            ("éé.txt", "éé.txt"),
            ("ééé", "ééé"),
            ("😀.md", "😀.md"),
            ("co😀", "co😀"),
            ("COMé", "COMé"),
            (".github/workflows/ci.yml", ".github/workflows/ci.yml"),
        ] {
            assert_eq!(RelPath::parse(input).unwrap().as_str(), want, "{input:?}");
        }
        assert!(RelPath::parse("./").unwrap().is_root());
        assert!(!RelPath::parse("./").unwrap().must_be_dir());
        assert_eq!(
            RelPath::parse(&"x".repeat(255)).unwrap().as_str().len(),
            255
        );
        assert!(RelPath::parse(&"ab/".repeat(1365)).is_ok());
    }

    #[test]
    fn keeps_the_meaning_of_a_trailing_slash() {
        for (input, bare, resolved) in [
            ("a/", "a", "a/"),
            ("a//", "a", "a/"),
            ("a/.", "a", "a/"),
            ("a/./", "a", "a/"),
            ("./a/b/", "a/b", "a/b/"),
            ("a//b//", "a/b", "a/b/"),
            ("real.txt/", "real.txt", "real.txt/"),
        ] {
            let p = RelPath::parse(input).unwrap();
            assert!(p.must_be_dir(), "{input:?}");
            assert_eq!(p.as_str(), bare, "{input:?}");
            assert_eq!(p.as_resolved_str(), resolved, "{input:?}");
            let as_path: &std::path::Path = p.as_ref();
            assert_eq!(as_path, std::path::Path::new(resolved));
            assert_eq!(p.to_string(), bare);
            assert_eq!(p.clone().into_string(), bare);
        }
        for input in ["a", "a/b", ".", "./", "a/./b"] {
            let p = RelPath::parse(input).unwrap();
            assert!(!p.must_be_dir(), "{input:?}");
            assert_eq!(p.as_resolved_str(), p.as_str(), "{input:?}");
        }
        let p = RelPath::parse("a/b/").unwrap();
        assert_eq!(p.file_name(), Some("b"));
        assert_eq!(p.parent().unwrap().as_str(), "a");
        assert!(!p.parent().unwrap().must_be_dir());
        assert_eq!(p.components().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(p.join("c").unwrap().as_resolved_str(), "a/b/c");
        assert_ne!(p, RelPath::parse("a/b").unwrap());
    }

    #[test]
    fn parent_file_name_join() {
        let p = RelPath::parse("a/b/c.txt").unwrap();
        assert_eq!(p.file_name(), Some("c.txt"));
        assert_eq!(p.parent().unwrap().as_str(), "a/b");
        assert_eq!(
            RelPath::parse("x").unwrap().parent().unwrap(),
            RelPath::root()
        );
        assert_eq!(RelPath::root().parent(), None);
        assert_eq!(RelPath::root().join("z").unwrap().as_str(), "z");
        assert!(p.join("..").is_err());
        assert_eq!(p.components().collect::<Vec<_>>(), ["a", "b", "c.txt"]);
        assert_eq!(p.into_string(), "a/b/c.txt");
        assert_eq!(RelPath::root().into_string(), ".");
    }

    /// The parser as first written: split at '/', check each component in
    /// turn, rebuild the text, and keep a final slash (or a final `/.`) as
    /// one `/` after a non-root name. `parse` must agree with it on every
    /// input, reason and component included.
    fn model(input: &str) -> Result<String, RelPathError> {
        let reserved = |c: &str| {
            let stem = c.split('.').next().unwrap().trim_end_matches(' ');
            let (head, tail) = stem.as_bytes().split_at(stem.len().min(3));
            let is = |w: &str| head.eq_ignore_ascii_case(w.as_bytes());
            (tail.is_empty() && ["CON", "PRN", "AUX", "NUL"].into_iter().any(is))
                || (["COM", "LPT"].into_iter().any(is)
                    && (matches!(tail, [b'1'..=b'9'])
                        || ["¹", "²", "³"].iter().any(|s| s.as_bytes() == tail)))
        };
        match RelPath::parse(input) {
            // The global checks are shared; only the component walk differs.
            Err(e) if e.component().is_none() => return Err(e),
            _ => {}
        }
        let mut text = String::new();
        for c in input.split('/') {
            if c.is_empty() || c == "." {
                continue;
            }
            let reason = if c == ".." {
                Some(R::ParentComponent)
            } else if c.len() > MAX_COMPONENT_BYTES {
                Some(R::ComponentTooLong)
            } else if c.contains(':') {
                Some(R::Colon)
            } else if reserved(c) {
                Some(R::ReservedName)
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(refuse(reason, Some(c)));
            }
            if !text.is_empty() {
                text.push('/');
            }
            text.push_str(c);
        }
        if text.is_empty() {
            return Ok(".".into());
        }
        if input.ends_with('/') || input.ends_with("/.") {
            text.push('/');
        }
        Ok(text)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        #[test]
        fn parse_agrees_with_the_plain_model(
            input in "([/.:a-z ]|con|Nul|lPt|COM|aUx|PRN|1|¹|é|\\.\\.|x{250,256}){0,12}"
        ) {
            let got = RelPath::parse(&input).map(|p| p.as_resolved_str().to_owned());
            proptest::prop_assert_eq!(got, model(&input));
        }
    }
}
