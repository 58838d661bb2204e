//! depth24: a policy nested deeply is refused before it reaches the
//! parser, cleanly, on a thread with a small stack (musl's default is
//! 128 KiB and a host loads its policy on whatever thread it likes), naming
//! the line and column where the bound was passed; brackets, quotes and
//! dots inside strings and comments never count.

use std::fs;

use sandgate_policy::{Policy, PolicyError, PolicyErrorKind, MAX_DEPTH};

const SMALL_STACK: usize = 128 * 1024;

/// `<tmp>/project/policy.toml` holding `text`, with `inputs` and
/// `workspace` beside it, loaded on a thread with a 128 KiB stack.
fn load_small(text: String) -> Result<Policy, PolicyError> {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(move || {
            let tmp = tempfile::tempdir().expect("tempdir");
            let project = tmp.path().join("project");
            for dir in ["inputs", "workspace"] {
                fs::create_dir_all(project.join(dir)).expect("mkdir");
            }
            let path = project.join("policy.toml");
            fs::write(&path, text).expect("write policy");
            Policy::load(&path)
        })
        .expect("spawn")
        .join()
        .expect("the load returned (no stack overflow, no panic)")
}

/// Refused as too deep, at `line`:`column`.
#[track_caller]
fn too_deep(text: String, line: usize, column: usize) {
    let shown = text.chars().take(80).collect::<String>();
    let err = load_small(text).expect_err("refused");
    assert_eq!(err.problems().len(), 1, "{err}");
    assert_eq!(err.kind(), PolicyErrorKind::Syntax, "{err}");
    assert_eq!(err.key(), None, "{err}");
    let headline = format!("policy: nested more than {MAX_DEPTH} levels deep");
    assert!(err.to_string().starts_with(&headline), "{err}");
    let at = err.problems()[0].location().expect("a place");
    assert_eq!(
        (at.line(), at.column()),
        (line, column),
        "{err}\n---\n{shown}"
    );
}

#[test]
fn depth24_deep_arrays_are_refused_on_a_small_stack_naming_the_place() {
    let n = MAX_DEPTH + 1;
    // `read_roots = ` is 13 characters: the first `[` is column 14.
    for deep in [n, 40, 100, 100_000] {
        let text = format!(
            "[fs]\nread_roots = {}{}\n",
            "[".repeat(deep),
            "]".repeat(deep)
        );
        // Under `[fs]`, itself a level.
        too_deep(text, 2, 13 + MAX_DEPTH);
    }
}

#[test]
fn depth24_deep_inline_tables_are_refused_on_a_small_stack_naming_the_place() {
    for deep in [MAX_DEPTH + 1, 40, 100, 50_000] {
        let text = format!("x = {}1{}\n", "{a=".repeat(deep), "}".repeat(deep));
        too_deep(text, 1, 5 + 3 * MAX_DEPTH);
    }
}

#[test]
fn depth24_mixed_nesting_is_refused_on_a_small_stack_naming_the_place() {
    // `[{a=` is two levels: the bound is passed at the 9th `[`.
    for deep in [MAX_DEPTH / 2 + 1, 16, 40, 50_000] {
        let text = format!(
            "# a comment\nx = {}{}\n",
            "[{a=".repeat(deep),
            "}]".repeat(deep)
        );
        too_deep(text, 2, 5 + 4 * (MAX_DEPTH / 2));
    }
    // Spread over lines, with blanks and comments between the levels.
    let text = format!("x = [ # {{{{{{\n{}", "  [ # a level\n".repeat(MAX_DEPTH));
    too_deep(text, 1 + MAX_DEPTH, 3);
}

#[test]
fn depth24_unclosed_nesting_is_refused_on_a_small_stack_naming_the_place() {
    for text in [
        format!("x = {}\n", "[".repeat(100_000)),
        format!("x = {}", "[".repeat(MAX_DEPTH + 1)),
    ] {
        too_deep(text, 1, 5 + MAX_DEPTH);
    }
    too_deep(
        format!("x = {}\n", "{a=".repeat(100_000)),
        1,
        5 + 3 * MAX_DEPTH,
    );
    // One level per line, never closed.
    too_deep("x = [\n".repeat(MAX_DEPTH + 1), MAX_DEPTH + 1, 5);
}

#[test]
fn depth24_dotted_keys_and_headers_count_with_the_brackets() {
    // Each key of 79 segments is within the parser's own limit, and two
    // of them nested already overflowed a 128 KiB stack.
    let path = vec!["a"; 79].join(".");
    let text = format!("x = {{{path} = {{{path} = 1}}}}\n");
    too_deep(text, 1, 5 + 2 * MAX_DEPTH);
    let text = format!("[{path}]\n{path} = {{{path} = 1}}\n");
    too_deep(text, 1, 2 * MAX_DEPTH + 1);
    let text = format!("[[{path}]]\n");
    too_deep(text, 1, 2 * MAX_DEPTH);
    // A table four deep, then a key path that takes it past the bound.
    let keys = ["b"; MAX_DEPTH - 2].join(".");
    let text = format!("[a.a.a.a]\nok = 1\n{keys} = 1\n");
    too_deep(text, 3, 2 * (MAX_DEPTH - 3));
    // A new header starts again from the top.
    let text = format!("[a.a.a.a]\nok = 1\n[fs]\n{keys} = 1\n");
    let err = load_small(text).expect_err("refused");
    assert_eq!(err.kind(), PolicyErrorKind::UnknownKey, "{err}");
}

#[test]
fn depth24_nesting_at_the_bound_is_judged_by_the_parser_on_a_small_stack() {
    // The deepest text the scan lets through, of every shape, reaches the
    // parser and the later passes and is refused by them (these keys are
    // not policy keys), on the small stack.
    let half = MAX_DEPTH / 2;
    let path = ["a"; MAX_DEPTH - 1].join(".");
    for text in [
        format!("x = {}{}\n", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH)),
        format!(
            "x = {}1{}\n",
            "{a=".repeat(MAX_DEPTH),
            "}".repeat(MAX_DEPTH)
        ),
        format!("x = {}{}\n", "[{a=".repeat(half), "}]".repeat(half)),
        format!("x = {}{}\n", "{a=[".repeat(half), "]}".repeat(half)),
        format!("x = {}\n", "[".repeat(MAX_DEPTH)),
        format!("x = {}\n", "{a=".repeat(MAX_DEPTH)),
        format!("{path}.b = 1\n"),
        format!("[{path}]\nb = 1\n"),
        format!(
            "{} = {}1{}\n",
            ["x"; MAX_DEPTH / 2 + 1].join("."),
            "{a=".repeat(half),
            "}".repeat(half)
        ),
        format!(
            "[fs]\nread_roots = {}\"inputs\"{}\n",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        ),
    ] {
        let err = load_small(text.clone()).expect_err("refused");
        assert!(
            !err.message().starts_with("nested more than"),
            "{err}\n---\n{text}"
        );
    }
}

/// A valid policy whose strings and comments are full of brackets, quotes,
/// escapes and dots, with what it should load as.
fn bracket_heavy() -> (String, Vec<&'static str>) {
    let brackets = "[[[[[[[[[[[[[[[[[[[[{{{{{{{{{{{{{{{{{{{{";
    let text = format!(
        r####"# {brackets} a comment holding brackets, "quotes" and 'apostrophes
security_mode = "restricted" # {brackets}

[fs] # {brackets}
read_roots = [ # {brackets}
  "inputs", # ]]]]] "
  'inputs/../inputs', # '
]
write_root = 'workspace' # {brackets}
deny_write = [
  "{brackets}",
  '{brackets}',
  "\"{brackets}\\",
  "\\\\[{brackets}",
  """
{brackets}
"{brackets}"
""{brackets}""
"""",
  '''{brackets}
'{brackets}'
''{brackets}''''',
  "#[{brackets}",
  "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t",
  '\',
  """\
     {brackets}\
  """,
]

[exec] # [[[[[[[[[[[[[[[[[[[
enabled = true
shell = "/bin/sh"
env_inherit = ["A_{brackets}"] # ]
"####
    );
    let brackets: &'static str = brackets;
    let expected = vec![
        brackets,
        brackets,
        Box::leak(format!("\"{brackets}\\").into_boxed_str()),
        Box::leak(format!("\\\\[{brackets}").into_boxed_str()),
        Box::leak(format!("{brackets}\n\"{brackets}\"\n\"\"{brackets}\"\"\n\"").into_boxed_str()),
        Box::leak(format!("{brackets}\n'{brackets}'\n''{brackets}''").into_boxed_str()),
        Box::leak(format!("#[{brackets}").into_boxed_str()),
        "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t",
        "\\",
        brackets,
    ];
    (text, expected)
}

#[test]
fn depth24_brackets_in_strings_and_comments_never_count() {
    let (text, expected) = bracket_heavy();
    let policy = load_small(text.clone()).unwrap_or_else(|e| panic!("{e}\n---\n{text}"));
    assert_eq!(policy.deny_write(), expected.as_slice());
    assert_eq!(policy.read_roots().len(), 2);
    assert!(policy.write_root().is_some());
    assert!(policy.exec().enabled);
    // The same text as bytes, from code, loads the same policy.
    let tmp = tempfile::tempdir().expect("tempdir");
    for dir in ["inputs", "workspace"] {
        fs::create_dir_all(tmp.path().join(dir)).expect("mkdir");
    }
    let again = Policy::from_bytes(text.as_bytes(), tmp.path(), None).expect("loads");
    assert_eq!(again.deny_write(), policy.deny_write());
    assert_eq!(again.digest(), policy.digest());
}

#[test]
fn depth24_the_deepest_real_policy_loads_on_a_small_stack() {
    // `[[net.credentials]]` then `methods = [...]`: four levels, the
    // deepest the format has; and the same in inline form.
    for text in [
        "[net]\nallow = [\"api.example.com\"]\n\n[[net.credentials]]\nhost = \
         \"api.example.com\"\nenv = \"API_TOKEN\"\nmethods = [\"GET\"]\npath_prefixes = \
         [\"/v1/\"]\n",
        "net = { allow = [\"api.example.com\"], credentials = [{ host = \"api.example.com\", \
         env = \"API_TOKEN\", methods = [\"GET\"], path_prefixes = [\"/v1/\"] }] }\n",
        "net.allow = [\"api.example.com\"]\nnet.rules = [{ host = \"api.example.com\", methods \
         = [\"DELETE\"], action = \"deny\" }]\n",
    ] {
        let policy = load_small(text.to_owned()).unwrap_or_else(|e| panic!("{e}\n---\n{text}"));
        assert_eq!(
            policy.net_credentials().len() + policy.net_request_rules().len(),
            1
        );
    }
}
