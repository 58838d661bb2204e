//! How a name is shown to a person: one spelling per name, so that two
//! different files are never shown alike.

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `path` as text for a person, one spelling per name: each byte that is
/// not part of valid UTF-8 written `\xNN`, a backslash written `\\`, and
/// every character a terminal would act on ([`terminal_unsafe`]: controls,
/// line feed and tab included, and the bidirectional controls) written
/// `\u{…}`; the rest as it is. Not [`Path::display`], which replaces the
/// stray bytes with U+FFFD, a character that can be a real name's own. The
/// backslash is doubled so that a name holding the four characters `\xff`
/// is not shown as one holding the byte 0xFF (nor the text `\u{1b}` as the
/// escape character), and the controls escaped so that a name cannot add a
/// line of its own to a message, drive a terminal or reorder what follows
/// it. A name with none of these is shown as it is.
pub fn shown(path: impl AsRef<Path>) -> String {
    let bytes = path.as_ref().as_os_str().as_bytes();
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else if terminal_unsafe(c) {
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

/// Whether a terminal would act on `c` rather than show it: a control
/// character (line feed and tab included) or a bidirectional embedding,
/// override or isolate, which reorders what follows it.
pub fn terminal_unsafe(c: char) -> bool {
    c.is_control()
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `text` cut for a message that quotes it: `(text, false)` when it is at
/// most `whole` bytes long, else its first `keep` bytes (fewer when a
/// character would be split there) and `true`, for the caller to escape
/// its own way and follow with `…`. So a megabyte of caller input is not
/// carried into a refusal that names it.
pub fn clipped(text: &str, whole: usize, keep: usize) -> (&str, bool) {
    if text.len() <= whole {
        return (text, false);
    }
    let mut cut = keep.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    (&text[..cut], true)
}

/// `text` as a refusal quotes what a caller or a server gave (a URL, a
/// method, a host): escaped as Rust's `escape_debug` does, and past
/// `whole` bytes cut to its first 100 and `…` ([`clipped`]).
pub fn quoted(text: &str, whole: usize) -> String {
    let (head, cut) = clipped(text, whole, 100);
    let mut out = head.escape_debug().to_string();
    if cut {
        out.push('…');
    }
    out
}
