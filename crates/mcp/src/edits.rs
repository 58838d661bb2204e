//! `edit_file`'s answer as the reference filesystem server writes it:
//! `Index:`, a rule, `--- PATH\toriginal`, `+++ PATH\tmodified`, hunks with
//! three lines of context whose ranges always carry a count, the text
//! compared with `\n` line breaks, in a fence longer than any run of
//! backticks in the diff, then a blank line. (The edits themselves are the
//! sandbox's: each `oldText` must occur exactly once, as everywhere else.)

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
    use super::{counted, diff_answer};

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
