//! policy24: attacks on the strict TOML loader. A key spelled so that it
//! reads as another, or holding a line break, is shown quoted; a file full
//! of mistakes is refused in bounded time and memory, its long lines shown
//! as excerpts; and the refusals that already held stay (duplicates across
//! TOML's spellings, unknown keys at every depth, wrong types, integer
//! bounds, deep nesting, odd paths).

use std::fs;
use std::time::{Duration, Instant};

use sandgate_policy::{Policy, PolicyError, PolicyErrorKind, MAX_PROBLEMS, MAX_SHOWN_LINE};

/// `<tmp>/project/policy.toml` holding `text`, with `inputs` and
/// `workspace` beside it, loaded.
fn load(text: &str) -> Result<Policy, PolicyError> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = tmp.path().join("project");
    for dir in ["inputs", "workspace"] {
        fs::create_dir_all(project.join(dir)).expect("mkdir");
    }
    fs::write(project.join("a-file.txt"), "x").expect("write");
    let path = project.join("policy.toml");
    fs::write(&path, text).expect("write policy");
    Policy::load(&path)
}

#[track_caller]
fn refused(text: &str, kind: PolicyErrorKind, key: &str) -> PolicyError {
    match load(text) {
        Ok(_) => panic!("expected a refusal naming `{key}`, the policy loaded\n---\n{text}"),
        Err(err) => {
            assert_eq!(err.kind(), kind, "kind for `{key}`: {err}\n---\n{text}");
            assert_eq!(err.key(), Some(key), "key: {err}\n---\n{text}");
            assert!(
                err.to_string()
                    .starts_with(&format!("policy key `{key}`: ")),
                "{err}"
            );
            err
        }
    }
}

#[test]
fn policy24_a_quoted_key_holding_a_dot_is_not_shown_as_the_key_it_spells() {
    // `"fs.write_root"` is one top-level key, not `write_root` in [fs]:
    // named bare, the refusal read as if the known key were unknown.
    refused(
        "\"fs.write_root\" = \"workspace\"\n",
        PolicyErrorKind::UnknownKey,
        "\"fs.write_root\"",
    );
    refused(
        "[fs]\n'read_roots.0' = \"inputs\"\n",
        PolicyErrorKind::UnknownKey,
        "fs.\"read_roots.0\"",
    );
    // Lookalikes and the empty key are quoted too, so they stand out.
    refused("\"ｆs\" = {}\n", PolicyErrorKind::UnknownKey, "\"ｆs\"");
    refused("[fs]\n\"\" = 1\n", PolicyErrorKind::UnknownKey, "fs.\"\"");
    // A duplicate of such a key is named the same way.
    let err = load("[exec]\n\"a.b\" = 1\n'a.b' = 2\n").expect_err("refused");
    let dup = err
        .problems()
        .iter()
        .find(|p| p.kind() == PolicyErrorKind::DuplicateKey)
        .expect("a duplicate");
    assert_eq!(dup.key(), Some("exec.\"a.b\""), "{err}");
}

#[test]
fn policy24_a_key_holding_a_line_break_or_control_cannot_redraw_its_refusal() {
    let err = refused(
        "\"a\\nb\" = 1\n",
        PolicyErrorKind::UnknownKey,
        "\"a\\u000Ab\"",
    );
    let headline = err.to_string();
    let headline = headline.lines().next().unwrap();
    assert!(headline.contains("unknown key at the top level"), "{err}");
    let err = refused(
        "[net]\n\"\\u001b]0;ok\\u0007\\u202e\" = 1\n",
        PolicyErrorKind::UnknownKey,
        "net.\"\\u001B]0;ok\\u0007\\u202E\"",
    );
    assert!(
        !err.to_string()
            .chars()
            .any(|c| c == '\u{1b}' || c == '\u{202e}'),
        "{err}"
    );
}

#[test]
fn policy24_a_line_of_parse_errors_is_refused_in_bounded_memory() {
    // Each `}` is a parse error of its own; every one shown with its
    // 20 KB line took 400 MB (a 1 MiB file: terabytes, the host aborts).
    let text = format!("a = [{}\n", "}".repeat(20_000));
    let err = load(&text).expect_err("refused");
    assert_eq!(
        err.problems().len(),
        MAX_PROBLEMS + 1,
        "{}",
        err.problems().len()
    );
    let last = err.problems().last().unwrap();
    assert_eq!(last.key(), None);
    assert!(last.location().is_none());
    assert!(
        last.message().starts_with(&format!(
            "{} more problems were found",
            20_000 * 2 - MAX_PROBLEMS
        )),
        "{}",
        last.message()
    );
    let shown = err.to_string();
    assert!(shown.len() < 64 * 1024, "{} bytes shown", shown.len());
    assert_eq!(err.kind(), PolicyErrorKind::Syntax);
}

#[test]
fn policy24_many_keys_then_a_syntax_error_is_refused_promptly() {
    // Naming the key of a parse error looked up the line of every key by
    // counting from the file's start: a 1 MiB file of keys ending in a
    // broken one took minutes.
    let mut text: String = (0..200_000).map(|i| format!("k{i}=1\n")).collect();
    text.truncate(sandgate_policy::MAX_POLICY_BYTES as usize - 8);
    text.push_str("\nbroken\n");
    let started = Instant::now();
    let err = load(&text).expect_err("refused");
    assert_eq!(err.kind(), PolicyErrorKind::Syntax, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn policy24_many_unknown_keys_are_cut_at_the_most_shown() {
    let text: String = (0..5_000).map(|i| format!("k{i} = 1\n")).collect();
    let err = load(&text).expect_err("refused");
    assert_eq!(err.problems().len(), MAX_PROBLEMS + 1);
    assert_eq!(err.key(), Some("k0"));
    assert_eq!(
        err.problems()[MAX_PROBLEMS - 1].key(),
        Some(&*format!("k{}", MAX_PROBLEMS - 1))
    );
    let last = err.problems().last().unwrap();
    assert_eq!(last.kind(), PolicyErrorKind::UnknownKey);
    assert!(
        last.message()
            .starts_with(&format!("{} more problems", 5_000 - MAX_PROBLEMS)),
        "{}",
        last.message()
    );
    // Just at the limit nothing is cut.
    let text: String = (0..MAX_PROBLEMS).map(|i| format!("k{i} = 1\n")).collect();
    let err = load(&text).expect_err("refused");
    assert_eq!(err.problems().len(), MAX_PROBLEMS);
    assert!(err.problems().iter().all(|p| p.key().is_some()));
}

#[test]
fn policy24_a_long_line_is_shown_as_an_excerpt_with_the_caret_under_the_problem() {
    // Five thousand missing roots on one line: each problem kept the whole
    // line (copies of 50 KB each).
    let roots = vec!["\"nope\""; 5_000].join(", ");
    let text = format!("[fs]\nread_roots = [\"inputs\", {roots}]\n");
    let err = load(&text).expect_err("refused");
    assert_eq!(err.problems().len(), MAX_PROBLEMS + 1);
    assert!(err.to_string().len() < 64 * 1024);
    // The wrong type at the line's end (a shape problem comes in file order
    // with the gate's): found in the problems past the cut, so load it alone.
    let text = format!(
        "[fs]\nread_roots = [{}, 7]\n",
        vec!["\"inputs\""; 2_000].join(", ")
    );
    let err = refused(&text, PolicyErrorKind::WrongType, "fs.read_roots[2000]");
    let at = err.problems()[0].location().expect("a place");
    assert_eq!(at.line(), 2);
    let line = text.lines().nth(1).unwrap();
    assert_eq!(at.column(), line.chars().count() - 1);
    let excerpt = at.source_line();
    assert!(excerpt.chars().count() <= MAX_SHOWN_LINE, "{excerpt}");
    assert!(
        excerpt.starts_with('…') && excerpt.ends_with("7]"),
        "{excerpt}"
    );
    // The caret stands under the `7`.
    let shown = err.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    let code = lines
        .iter()
        .position(|l| l.starts_with("2 | "))
        .expect("the line");
    let caret = lines[code + 1].find('^').expect("a caret");
    // The caret line is ASCII: its byte offset counts characters.
    let under = lines[code].chars().nth(caret).unwrap();
    assert_eq!(under, '7', "{shown}");
    // A short line is shown whole, as before.
    let err = refused(
        "[fs]\nread_roots = [7]\n",
        PolicyErrorKind::WrongType,
        "fs.read_roots[0]",
    );
    let at = err.problems()[0].location().unwrap();
    assert_eq!(at.source_line(), "read_roots = [7]");
}

/// What held already, kept: each refused naming the key.
#[test]
fn policy24_duplicates_across_toml_spellings_are_refused() {
    use PolicyErrorKind::*;
    for (text, kind, key) in [
        // dotted key, then the table it made
        (
            "fs.write_root = \"workspace\"\n[fs]\nread_roots = []\n",
            DuplicateKey,
            "fs",
        ),
        // quoted and bare table names
        (
            "[fs]\nwrite_root = \"workspace\"\n[\"fs\"]\nread_roots = []\n",
            DuplicateKey,
            "fs",
        ),
        // quoted and bare keys
        (
            "[fs]\nwrite_root = \"workspace\"\n'write_root' = \"inputs\"\n",
            DuplicateKey,
            "fs.write_root",
        ),
        // an inline table extended by a later table
        (
            "fs = { write_root = \"workspace\" }\n[fs]\nread_roots = []\n",
            DuplicateKey,
            "fs",
        ),
        // an array, then an array of tables of the same name
        (
            "[net]\ncredentials = []\n[[net.credentials]]\nhost = \"a.com\"\nenv = \"X\"\n",
            DuplicateKey,
            "net.credentials",
        ),
        // a key, then a table of its name: the table the parser kept is
        // not also judged as the key's value ("found a table")
        (
            "[exec]\nenabled = true\n[exec.enabled]\n",
            DuplicateKey,
            "exec.enabled",
        ),
        (
            "security_mode = \"restricted\"\n[security_mode]\n",
            DuplicateKey,
            "security_mode",
        ),
    ] {
        refused(text, kind, key);
    }
    // An inline table extended by a dotted key is a syntax error.
    let err =
        load("fs = { write_root = \"workspace\" }\nfs.read_roots = []\n").expect_err("refused");
    assert_eq!(err.kind(), PolicyErrorKind::Syntax, "{err}");
}

#[test]
fn policy24_unknown_keys_are_named_at_every_depth() {
    use PolicyErrorKind::*;
    for (text, key) in [
        ("[FS]\n", "FS"),
        ("[fs]\nWrite_Root = \"workspace\"\n", "fs.Write_Root"),
        ("net = { allow = [], extra = { deep = [1] } }\n", "net.extra"),
        ("[net]\nallow=[\"a.com\"]\n[[net.rules]]\nhost = \"a.com\"\naction = \"allow\"\nbogus = 1\n", "net.rules[0].bogus"),
        ("[net]\nallow=[\"a.com\"]\nrules = [{host = \"a.com\", action = \"allow\", bogus = 1}]\n", "net.rules[0].bogus"),
        ("[fs.sub]\n", "fs.sub"),
        ("[fs]\nsecurity_mode = \"trusted_host\"\n", "fs.security_mode"),
    ] {
        refused(text, UnknownKey, key);
    }
}

#[test]
fn policy24_values_of_the_wrong_type_or_out_of_range_are_refused() {
    use PolicyErrorKind::*;
    for (text, kind, key, says) in [
        (
            "[fs]\nmax_read_bytes = 1.0\n",
            WrongType,
            "fs.max_read_bytes",
            "found a float",
        ),
        (
            "[fs]\nmax_read_bytes = 1e3\n",
            WrongType,
            "fs.max_read_bytes",
            "found a float",
        ),
        (
            "[fs]\nmax_read_bytes = inf\n",
            WrongType,
            "fs.max_read_bytes",
            "found a float",
        ),
        (
            "[exec]\ntimeout_ms = nan\n",
            WrongType,
            "exec.timeout_ms",
            "found a float",
        ),
        (
            "[fs]\nmax_read_bytes = \"10MB\"\n",
            WrongType,
            "fs.max_read_bytes",
            "found a string",
        ),
        (
            "[exec]\nenabled = \"true\"\n",
            WrongType,
            "exec.enabled",
            "found a string",
        ),
        (
            "[exec]\nshell = 1979-05-27\n",
            WrongType,
            "exec.shell",
            "found a datetime",
        ),
        (
            "[fs]\nread_roots = [[\"inputs\"]]\n",
            WrongType,
            "fs.read_roots[0]",
            "found an array",
        ),
        ("[[fs]]\n", WrongType, "fs", "found an array of tables"),
        (
            "[net.credentials]\nhost = \"a\"\n",
            WrongType,
            "net.credentials",
            "expected an array of tables",
        ),
        (
            "[fs]\nmax_read_bytes = -9223372036854775808\n",
            InvalidValue,
            "fs.max_read_bytes",
            "positive",
        ),
        (
            "[fs]\nmax_read_bytes = -9223372036854775809\n",
            InvalidValue,
            "fs.max_read_bytes",
            "does not fit",
        ),
        (
            "[fs]\nmax_write_bytes = 0x8000000000000000\n",
            InvalidValue,
            "fs.max_write_bytes",
            "0x8000000000000000 does not fit",
        ),
        (
            "[exec]\ntimeout_ms = -0\n",
            InvalidValue,
            "exec.timeout_ms",
            "found 0",
        ),
        (
            "[exec]\nmax_tasks = -1\n",
            InvalidValue,
            "exec.max_tasks",
            "found -1",
        ),
        (
            "[fs]\nread_roots = [\"inputs\"]\n[budgets]\nfs_ops = -1\n",
            InvalidValue,
            "budgets.fs_ops",
            "found -1",
        ),
        (
            "[exec]\nshell = \"\"\n",
            InvalidValue,
            "exec.shell",
            "absolute path",
        ),
        (
            "[exec]\nenv_inherit = [\"\"]\n",
            InvalidValue,
            "exec.env_inherit[0]",
            "not an environment variable name",
        ),
    ] {
        let err = refused(text, kind, key);
        assert!(err.message().contains(says), "{err}");
    }
    // The largest values are read as written.
    let p = load("[fs]\nread_roots = [\"inputs\"]\nmax_read_bytes = 9223372036854775807\n[budgets]\nfs_ops = 0x7fffffffffffffff\n").expect("loads");
    assert_eq!(p.limits().max_read_bytes, i64::MAX as u64);
    assert_eq!(p.budgets().fs_ops, Some(i64::MAX as u64));
}

#[test]
fn policy24_deep_nesting_is_refused_without_exhausting_the_stack() {
    // Run on a thread of the size Rust gives a spawned thread (2 MiB).
    let cases = [
        format!(
            "[fs]\nread_roots = {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
        format!("x = {}1{}\n", "{a=".repeat(50_000), "}".repeat(50_000)),
        format!("{} = 1\n", vec!["a"; 100_000].join(".")),
        format!("[{}]\n", vec!["a"; 100_000].join(".")),
        format!("x = {}{}\n", "[{a=".repeat(50_000), "}]".repeat(50_000)),
    ];
    for text in cases {
        let err = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || {
                load(&text)
                    .map(|_| ())
                    .map_err(|e| (e.kind(), e.to_string().len()))
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        let (kind, shown) = err.expect_err("refused");
        assert_eq!(kind, PolicyErrorKind::Syntax);
        assert!(shown < 64 * 1024, "{shown} bytes shown");
    }
}

#[test]
fn policy24_paths_are_refused_naming_the_root() {
    use PolicyErrorKind::*;
    for (text, kind, key) in [
        (
            "[fs]\nread_roots = [\"\"]\n",
            InvalidValue,
            "fs.read_roots[0]",
        ),
        (
            "[fs]\nwrite_root = \"work\\u0000space\"\n",
            InvalidValue,
            "fs.write_root",
        ),
        (
            "[fs]\nread_roots = [\"~\"]\n",
            RootMissing,
            "fs.read_roots[0]",
        ),
        (
            "[fs]\nwrite_root = \"a-file.txt\"\n",
            RootNotDirectory,
            "fs.write_root",
        ),
        (
            "[fs]\nwrite_root = \"workspace/..\"\n",
            WriteRootContainsPolicy,
            "fs.write_root",
        ),
        (
            "[fs]\nwrite_root = \"/\"\n",
            WriteRootContainsPolicy,
            "fs.write_root",
        ),
    ] {
        refused(text, kind, key);
    }
    // `~` is not the home directory: it is looked for beside the policy.
    let err = load("[fs]\nread_roots = [\"~/x\"]\n").expect_err("refused");
    assert!(err.message().contains("project/~/x"), "{err}");
}
