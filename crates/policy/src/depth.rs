//! How deep a policy nests, measured before the text reaches the parser.
//!
//! The TOML parser recurses once per level of arrays and inline tables and
//! stops only at 80 levels; each dotted key or table path adds levels of
//! tables that the later passes walk recursively too. In a debug build a
//! load takes about 40 KiB of stack and 5 KiB more per level, so some 16
//! levels fill a 128 KiB thread stack (musl's default), and a stack
//! overflow aborts the whole host process, which loads a policy on
//! whatever thread it calls from (C, Python, Go, Node). So a policy nested
//! more than [`MAX_DEPTH`] levels is refused here, by a single pass that
//! recurses nowhere. No key of the format lies deeper than 4 levels
//! (`[[net.credentials]]` then `methods = [...]`): the bound refuses
//! nothing a policy can mean, and leaves half of such a stack to the host.
//!
//! The pass skips strings and comments as the parser's lexer does (which
//! sees the whole text before any parsing): `"…"` ends at an unescaped `"`
//! or before a line break, `\` escaping only `\` and `"`; `'…'` at `'` or
//! before a line break; `"""…"""` and `'''…'''` at the delimiter (with up to
//! two more quotes of the same kind); `#` runs to the end of the line. Of
//! the rest it counts every `[` and `{` as a level, until its `]` or `}`,
//! and every `.` as one more, until the next `,` of the enclosing array or
//! inline table, or the end of a line outside them (a float's `.` is
//! counted too: harmless, it cannot be deep). A table header `[a.b]` is a
//! line of its own: its levels hold while it is read, and the table it
//! names is as deep as they went (`[[a.b]]`: 3) for the lines that follow.

use crate::error::{PolicyErrorKind, Problem};

/// The deepest nesting a policy may have: arrays, inline tables and the
/// tables a dotted key or a table header names, counted together.
pub const MAX_DEPTH: usize = 8;

/// The problem for `text` nested deeper than [`MAX_DEPTH`], placed at the
/// character that passed it; `None` when it is not.
pub(crate) fn check(text: &str) -> Option<Problem> {
    let at = too_deep(text.as_bytes())?;
    Some(Problem::new(
        PolicyErrorKind::Syntax,
        None,
        format!(
            "nested more than {MAX_DEPTH} levels deep (arrays, inline tables and the tables \
             of dotted keys and headers, counted together); a policy needs at most 4"
        ),
        Some(at..at + 1),
    ))
}

/// The byte offset where `text` first goes deeper than [`MAX_DEPTH`].
fn too_deep(text: &[u8]) -> Option<usize> {
    // The depth of each open `[` or `{` before it was opened.
    let mut open: Vec<usize> = Vec::new();
    // The depth here, and of the table the last header named.
    let mut depth = 0;
    let mut table = 0;
    // Reading a table header; only blanks so far on this line.
    let mut header = false;
    let mut line_start = true;
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        let first = line_start;
        line_start = false;
        match c {
            b'"' | b'\'' => {
                i = skip_string(text, i);
                continue;
            }
            b'#' => {
                i += text[i..]
                    .iter()
                    .position(|&b| b == b'\n' || b == b'\r')
                    .unwrap_or(text.len() - i);
                continue;
            }
            b'\n' => {
                line_start = true;
                if header {
                    // A header is one line: an unclosed one ends here.
                    header = false;
                    open.clear();
                }
                if open.is_empty() {
                    depth = table;
                }
            }
            b' ' | b'\t' | b'\r' => line_start = first,
            b'[' | b'{' => {
                if c == b'[' && first && open.is_empty() {
                    header = true;
                    depth = 0;
                    table = 0;
                }
                open.push(depth);
                depth += 1;
            }
            b']' | b'}' => {
                if let Some(before) = open.pop() {
                    depth = before;
                }
            }
            b',' => {
                if let Some(&before) = open.last() {
                    depth = before + 1;
                }
            }
            b'.' => depth += 1,
            _ => {}
        }
        if depth > MAX_DEPTH {
            return Some(i);
        }
        if header {
            table = table.max(depth);
        }
        i += 1;
    }
    None
}

/// The offset just past the string that starts at `text[at]` (a `"` or a
/// `'`), as the parser's lexer ends it.
fn skip_string(text: &[u8], at: usize) -> usize {
    let quote = text[at];
    let basic = quote == b'"';
    let triple = text[at..].starts_with(&[quote; 3]);
    let mut i = at + if triple { 3 } else { 1 };
    while i < text.len() {
        let c = text[i];
        if basic && c == b'\\' {
            i += 1;
            if matches!(text.get(i), Some(b'\\' | b'"')) {
                i += 1;
            }
            continue;
        }
        if !triple && c == b'\n' {
            return i;
        }
        if c == quote {
            if !triple {
                return i + 1;
            }
            if text[i..].starts_with(&[quote; 3]) {
                // Up to two quotes before the delimiter belong to the string.
                let mut end = i + 3;
                for _ in 0..2 {
                    if text.get(end) == Some(&quote) {
                        end += 1;
                    }
                }
                return end;
            }
        }
        i += 1;
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_comments_do_not_count() {
        for text in [
            "a = \"[[[[[[[[[[[[[[[[[[\"\n",
            "a = '{{{{{{{{{{{{{{{{{{{'\n",
            "a = \"\\\"[[[[[[[[[[[[[[[[[[\"\n",
            "a = \"\\\\\" # [[[[[[[[[[[[[[[[[[\n",
            "a = \"\"\"\n[[[[[[[[[[[[[[[[[[\n\"\"\"\n",
            "a = '''\n{{{{{{{{{{{{{{{{{{{\n'''\n",
            "a = \"\"\"x\"\"\"\"\" # \"\"\"[[[[[[[[[[[[[[[[[[\n",
            "\"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q\" = 1\n",
        ] {
            assert_eq!(too_deep(text.as_bytes()), None, "{text}");
        }
    }

    #[test]
    fn each_kind_of_level_counts() {
        let deep = |open: &str| format!("a = {}", open.repeat(MAX_DEPTH + 1));
        assert_eq!(too_deep(deep("[").as_bytes()), Some(4 + MAX_DEPTH));
        assert_eq!(too_deep(deep("{b=").as_bytes()), Some(4 + 3 * MAX_DEPTH));
        let dotted = format!("{} = 1\n", ["a"; MAX_DEPTH + 2].join("."));
        assert_eq!(too_deep(dotted.as_bytes()), Some(2 * MAX_DEPTH + 1));
        // A header's depth holds for the lines under it, until the next.
        let text = "[a.a.a.a]\nb.c.d.e.f.g = 1\n";
        assert_eq!(too_deep(text.as_bytes()), Some(19));
        let text = "[a.a.a.a]\nb.c.d.e.f = 1\n";
        assert_eq!(too_deep(text.as_bytes()), None);
        let text = "[a.a.a.a]\n[b]\nb.c.d.e.f.g = 1\n";
        assert_eq!(too_deep(text.as_bytes()), None);
        // Siblings do not add up.
        let text = format!("a = [{}]\n", vec!["[1.5, {b.c = 1}]"; 40].join(", "));
        assert_eq!(too_deep(text.as_bytes()), None);
    }
}
