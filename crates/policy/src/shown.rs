//! How a name is shown to a person: one spelling per name, so that two
//! different files are never shown alike.

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `path` as text for a person: each byte that is not part of valid UTF-8
/// written `\xNN`, a backslash written `\\`, the rest as it is. Not
/// [`Path::display`], which replaces the stray bytes with U+FFFD, a
/// character that can be a real name's own; and the backslash is doubled
/// so that a name holding the four characters `\xff` is not shown as one
/// holding the byte 0xFF. A name with neither is shown as it is.
///
/// Control characters are left as they are: a caller that writes to a
/// terminal uses [`shown_on_terminal`], or escapes the whole message.
pub fn shown(path: impl AsRef<Path>) -> String {
    escaped(path.as_ref(), |_| false)
}

/// [`shown`], and also every character a terminal would act on
/// ([`terminal_unsafe`]: controls, line feed and tab included, and the
/// bidirectional controls) written `\u{…}`, so that a name cannot drive
/// the terminal, split the one line a script reads, or pass for another
/// name. Its backslash being doubled, a name holding the text `\u{1b}` is
/// not shown as one holding the escape character.
pub fn shown_on_terminal(path: impl AsRef<Path>) -> String {
    escaped(path.as_ref(), terminal_unsafe)
}

/// Whether a terminal would act on `c` rather than show it: a control
/// character (line feed and tab included) or a bidirectional embedding,
/// override or isolate, which reorders what follows it.
pub fn terminal_unsafe(c: char) -> bool {
    c.is_control()
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

fn escaped(path: &Path, escape: impl Fn(char) -> bool) -> String {
    let bytes = path.as_os_str().as_bytes();
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else if escape(c) {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}
