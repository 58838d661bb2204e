//! `edit_file`'s matching and its diff, as the reference filesystem server
//! does them, within sandgate's rule that an edit names one place.
//!
//! Each edit, in order, on the text the previous ones left:
//!
//! 1. line breaks are compared as `\n`: `\r\n` in `oldText` and `newText`
//!    is read as `\n`, and a file whose every line break is `\r\n` is
//!    matched as if it had `\n` and keeps `\r\n` (the reference rewrites
//!    such a file with `\n`);
//! 2. `oldText` found exactly, once, is replaced (found more than once, the
//!    edit is refused as ambiguous, where the reference replaces the first);
//! 3. otherwise the file's lines are compared with `oldText`'s lines with
//!    leading and trailing whitespace ignored; one run of lines that match
//!    is replaced by `newText`'s lines, re-indented as the reference does:
//!    the first takes the indentation of the first line replaced, each
//!    later one with indentation keeps its indentation relative to the
//!    matching line of `oldText` (when that line has indentation too),
//!    and the rest are kept as given. Two such runs refuse the edit as
//!    ambiguous; none refuses it as not found.
//!
//! The diff is the reference's: `Index:`, a rule, `--- PATH\toriginal`,
//! `+++ PATH\tmodified`, hunks with three lines of context whose ranges
//! always carry a count, the text compared with `\n` line breaks, in a
//! fence longer than any run of backticks in the diff, then a blank line.

use sandgate::{Error, ErrorCode};

/// Applies `edits` to `text` (see the module's rules); `resolved` names the
/// file in refusals.
pub(crate) fn apply(text: &[u8], edits: &[(&str, &str)], resolved: &str) -> Result<Vec<u8>, Error> {
    // A file whose every line break is CRLF is matched with LF breaks and
    // written back with CRLF; any other file is matched as it is.
    let crlf = is_crlf(text);
    let mut cur: Vec<u8> = if crlf {
        lf(text).into_owned()
    } else {
        text.to_vec()
    };
    for (i, (old, new)) in edits.iter().enumerate() {
        let old = lf(old.as_bytes());
        let new = lf(new.as_bytes());
        let no_match = || {
            Error::new(
                ErrorCode::EditNoMatch,
                format!(
                    "edit #{}: the old text does not occur in the file, even with leading and \
                     trailing whitespace of each line ignored",
                    i + 1
                ),
            )
            .with_path(resolved)
        };
        let ambiguous = |n: usize| {
            Error::new(
                ErrorCode::EditAmbiguous,
                format!(
                    "edit #{}: the old text occurs {n} times; give more context",
                    i + 1
                ),
            )
            .with_path(resolved)
        };
        let ambiguous_ws = || {
            Error::new(
                ErrorCode::EditAmbiguous,
                format!(
                    "edit #{}: the old text occurs more than once with whitespace ignored; give \
                     more context",
                    i + 1
                ),
            )
            .with_path(resolved)
        };
        match count_places(&cur, &old) {
            1 => {
                let at = memchr::memmem::find(&cur, &old).unwrap_or(0);
                cur.splice(at..at + old.len(), new.iter().copied());
                continue;
            }
            0 => {}
            n => return Err(ambiguous(n)),
        }
        // Whitespace-tolerant matching is by lines of text.
        let (Ok(content), Ok(old), Ok(new)) = (
            std::str::from_utf8(&cur),
            std::str::from_utf8(&old),
            std::str::from_utf8(&new),
        ) else {
            return Err(no_match());
        };
        let lines: Vec<&str> = content.split('\n').collect();
        let old_lines: Vec<&str> = old.split('\n').collect();
        // Each line trimmed once; the comparisons are bounded, since
        // a file of many like lines costs lines x old lines of them.
        let trimmed: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
        let old_trimmed: Vec<&str> = old_lines.iter().map(|l| l.trim()).collect();
        let mut spent = 0usize;
        let mut starts = Vec::new();
        for at in 0..=lines.len().saturating_sub(old_lines.len()) {
            if at + old_lines.len() > lines.len() {
                break;
            }
            let same = old_trimmed
                .iter()
                .zip(&trimmed[at..])
                .take_while(|(o, l)| o == l)
                .count();
            spent += same + 1;
            if spent > MAX_LINE_COMPARISONS {
                return Err(Error::new(
                    ErrorCode::TooLarge,
                    format!(
                        "edit #{}: the old text does not occur exactly, and matching it with                          whitespace ignored would compare more than {MAX_LINE_COMPARISONS}                          lines; give the old text exactly as the file has it",
                        i + 1
                    ),
                )
                .with_path(resolved));
            }
            if same == old_lines.len() {
                starts.push(at);
                if starts.len() > 1 {
                    break;
                }
            }
        }
        let at = match starts[..] {
            [at] => at,
            [] => return Err(no_match()),
            _ => return Err(ambiguous_ws()),
        };
        let indent = leading(lines[at]);
        let replaced: Vec<String> = new
            .split('\n')
            .enumerate()
            .map(|(j, line)| {
                if j == 0 {
                    return format!("{indent}{}", line.trim_start());
                }
                let old_indent = old_lines.get(j).map_or("", |o| leading(o));
                let new_indent = leading(line);
                if !old_indent.is_empty() && !new_indent.is_empty() {
                    // Lengths as the reference counts them: UTF-16 units.
                    let more = units(new_indent).saturating_sub(units(old_indent));
                    format!("{indent}{}{}", " ".repeat(more), line.trim_start())
                } else {
                    line.to_owned()
                }
            })
            .collect();
        let mut out: Vec<&str> = Vec::with_capacity(lines.len());
        out.extend_from_slice(&lines[..at]);
        out.extend(replaced.iter().map(String::as_str));
        out.extend_from_slice(&lines[at + old_lines.len()..]);
        cur = out.join("\n").into_bytes();
    }
    Ok(if crlf { crlf_of(&cur) } else { cur })
}

/// The most line comparisons whitespace-tolerant matching makes for one
/// edit (a fraction of a second).
const MAX_LINE_COMPARISONS: usize = 20_000_000;

/// Places `needle` occurs at in `hay`, overlapping ones counted (as the
/// sandbox's exact edit counts them).
fn count_places(hay: &[u8], needle: &[u8]) -> usize {
    if needle.is_empty() {
        return 0;
    }
    let mut n = 0;
    let mut from = 0;
    while let Some(at) = memchr::memmem::find(&hay[from..], needle) {
        n += 1;
        from += at + 1;
        if n > 1 {
            // Two are enough to refuse; the count is for the message.
            n += memchr::memmem::find_iter(&hay[from..], needle).count();
            break;
        }
    }
    n
}

/// The leading whitespace of `line`.
fn leading(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// `s`'s length in UTF-16 code units.
fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Whether `text` has line breaks and every one is `\r\n`.
fn is_crlf(text: &[u8]) -> bool {
    let mut any = false;
    for at in memchr::memchr_iter(b'\n', text) {
        if at == 0 || text[at - 1] != b'\r' {
            return false;
        }
        any = true;
    }
    any
}

/// `text` with `\r\n` read as `\n`.
fn lf(text: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if memchr::memmem::find(text, b"\r\n").is_none() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\r' && text.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(text[i]);
        i += 1;
    }
    std::borrow::Cow::Owned(out)
}

/// `text` with every `\n` written `\r\n`.
fn crlf_of(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + text.len() / 16);
    for &b in text {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

/// How long `edit_file` looks for the smallest diff before it answers a
/// larger one.
const DIFF_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// The reference server's answer for an edit of `path` (the file's host
/// path) from `before` to `after`: its unified diff in a Markdown fence.
pub(crate) fn diff_answer(path: &str, before: &str, after: &str) -> String {
    let before = before.replace("\r\n", "\n");
    let after = after.replace("\r\n", "\n");
    // Bounded in time: the diff of two texts that share few lines is
    // quadratic in their lines (hours for a file of max_read_bytes), and
    // past the deadline `similar` answers a correct diff that is not the
    // smallest (the rest as deleted, then inserted).
    let diff = similar::TextDiff::configure()
        .timeout(DIFF_TIME)
        .diff_lines(&before, &after);
    let mut out = format!(
        "Index: {path}\n{}\n--- {path}\toriginal\n+++ {path}\tmodified\n",
        "=".repeat(67)
    );
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        let body = hunk.to_string();
        // `similar` writes a range of one line without its count; the
        // reference always writes the count.
        let (head, rest) = body.split_once('\n').unwrap_or((&body, ""));
        out.push_str(&counted(head));
        out.push('\n');
        out.push_str(rest);
    }
    let mut fence = 3;
    while out.contains(&"`".repeat(fence)) {
        fence += 1;
    }
    let fence = "`".repeat(fence);
    format!("{fence}diff\n{out}{fence}\n\n")
}

/// A hunk header `@@ -A +B @@` with every range as `start,count`.
fn counted(head: &str) -> String {
    let Some(inner) = head.strip_prefix("@@ ").and_then(|h| h.strip_suffix(" @@")) else {
        return head.to_owned();
    };
    let ranges: Vec<String> = inner
        .split(' ')
        .map(|r| match r.contains(',') {
            true => r.to_owned(),
            false => format!("{r},1"),
        })
        .collect();
    format!("@@ {} @@", ranges.join(" "))
}

#[cfg(test)]
mod tests {
    use super::{apply, counted, diff_answer};

    fn ed(text: &str, edits: &[(&str, &str)]) -> Result<String, String> {
        apply(text.as_bytes(), edits, "f")
            .map(|b| String::from_utf8(b).unwrap())
            .map_err(|e| format!("{}: {}", e.code().as_str(), e.message()))
    }

    #[test]
    fn matches_as_the_reference_does() {
        let code = "def f():\n    x = 1\n    y = 2\n    return x\n";
        // Unindented old text: the first line takes the file's indentation,
        // a later line without indentation in oldText is kept as given.
        assert_eq!(
            ed(code, &[("x = 1\ny = 2", "x = 10\ny = 20")]).unwrap(),
            "def f():\n    x = 10\ny = 20\n    return x\n"
        );
        // Relative indentation kept.
        assert_eq!(
            ed(code, &[("  x = 1\n  y = 2", "x = 1\n    if x:")]).unwrap(),
            "def f():\n    x = 1\n      if x:\n    return x\n"
        );
        // Trailing whitespace ignored.
        assert_eq!(
            ed(code, &[("def f():   \n    x = 1", "def g():\n    x = 1")]).unwrap(),
            "def g():\nx = 1\n    y = 2\n    return x\n"
        );
        // CRLF kept; LF or CRLF old text matches either.
        assert_eq!(
            ed("a\r\nb\r\nc\r\n", &[("b\nc", "B\nC")]).unwrap(),
            "a\r\nB\r\nC\r\n"
        );
        assert_eq!(
            ed("a\nb\nc\n", &[("b\r\nc", "B\r\nC")]).unwrap(),
            "a\nB\nC\n"
        );
        // A later edit matches what an earlier one made.
        assert_eq!(ed("a\nb\n", &[("b", "c"), ("a\nc", "d")]).unwrap(), "d\n");
        assert!(ed("foo\nfoo\n", &[("foo", "x")])
            .unwrap_err()
            .starts_with("E_EDIT_AMBIGUOUS"));
        assert!(ed(" x\n\tx\n", &[("x ", "y")])
            .unwrap_err()
            .starts_with("E_EDIT_AMBIGUOUS"));
        assert!(ed("a\n", &[("b", "c")])
            .unwrap_err()
            .starts_with("E_EDIT_NO_MATCH"));
    }

    #[test]
    fn diffs_as_the_reference_does() {
        assert_eq!(counted("@@ -1 +1 @@"), "@@ -1,1 +1,1 @@");
        assert_eq!(counted("@@ -0,0 +1 @@"), "@@ -0,0 +1,1 @@");
        let rule = "=".repeat(67);
        assert_eq!(
            diff_answer("/p/F", "a\n", "b\n"),
            format!("```diff\nIndex: /p/F\n{rule}\n--- /p/F\toriginal\n+++ /p/F\tmodified\n@@ -1,1 +1,1 @@\n-a\n+b\n```\n\n")
        );
        assert_eq!(
            diff_answer("F", "a\n", "a\n"),
            format!("```diff\nIndex: F\n{rule}\n--- F\toriginal\n+++ F\tmodified\n```\n\n")
        );
        assert!(diff_answer("F", "a\n", "```\n").starts_with("````diff\n"));
    }
}
