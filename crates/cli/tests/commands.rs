//! The `sandgate` command line as a user meets it: one way to name the
//! policy in every subcommand (`--policy`, `SANDGATE_POLICY`, and `check`'s
//! positional form), help that shows the tool ops, generated completions
//! and man page, and refusals that name the file, the line and the key.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const SANDGATE: &str = env!("CARGO_BIN_EXE_sandgate");

const GOOD: &str = "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n";

fn fixture(policy: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("ws")).unwrap();
    fs::write(tmp.path().join("ws/a.txt"), "hello\n").unwrap();
    fs::write(tmp.path().join("policy.toml"), policy).unwrap();
    tmp
}

/// Runs sandgate in `dir` with `args`, `env` set (SANDGATE_POLICY always
/// cleared first) and `input` on stdin.
fn run(dir: &Path, args: &[&str], env: Option<&str>, input: &str) -> Output {
    let mut cmd = Command::new(SANDGATE);
    cmd.args(args)
        .current_dir(dir)
        .env_remove("SANDGATE_POLICY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = env {
        cmd.env("SANDGATE_POLICY", p);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const SUMMARY: &str = "{\"op\":\"summary\"}\n";

#[test]
fn every_subcommand_takes_the_policy_by_flag_and_by_environment() {
    let fx = fixture(GOOD);
    let dir = fx.path();
    let forms: &[(&[&str], Option<&str>)] = &[
        (&["check", "policy.toml"], None),
        (&["check", "--policy", "policy.toml"], None),
        (&["check"], Some("policy.toml")),
        (&["tool", "--policy", "policy.toml"], None),
        (&["tool"], Some("policy.toml")),
        (&["explain", "--as", "read", "policy.toml", "a.txt"], None),
        (
            &[
                "explain",
                "--as",
                "read",
                "--policy",
                "policy.toml",
                "a.txt",
            ],
            None,
        ),
        (&["explain", "--as", "read", "a.txt"], Some("policy.toml")),
        (&["exec", "--policy", "policy.toml", "--", "true"], None),
        (&["exec", "--", "true"], Some("policy.toml")),
        (&["run", "--policy", "policy.toml", "--", "/bin/true"], None),
        (&["run", "--", "/bin/true"], Some("policy.toml")),
    ];
    let mut problems = Vec::new();
    for (args, env) in forms {
        let out = run(dir, args, *env, SUMMARY);
        // exec and run are refused (exit 2) by this policy: exec is off.
        let refused_exec = matches!(args[0], "exec" | "run");
        let ok = if refused_exec {
            out.status.code() == Some(2) && text(&out.stderr).contains("E_DENIED")
        } else {
            out.status.success()
        };
        if !ok {
            problems.push(format!(
                "{args:?} env {env:?}: exit {:?}: {}",
                out.status.code(),
                text(&out.stderr)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_command_line_wins_over_the_environment() {
    let fx = fixture(GOOD);
    fs::write(fx.path().join("bad.toml"), "[fs]\nbogus = 1\n").unwrap();
    let out = run(fx.path(), &["check", "policy.toml"], Some("bad.toml"), "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(
        fx.path(),
        &["check", "--policy", "policy.toml"],
        Some("bad.toml"),
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(fx.path(), &["check"], Some("bad.toml"), "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("bad.toml:2:1"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn no_policy_or_two_policies_are_refused_with_a_clear_message() {
    let fx = fixture(GOOD);
    let out = run(fx.path(), &["check"], None, "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("SANDGATE_POLICY"),
        "{}",
        text(&out.stderr)
    );
    let out = run(
        fx.path(),
        &["check", "policy.toml", "--policy", "policy.toml"],
        None,
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("given twice"),
        "{}",
        text(&out.stderr)
    );
    let out = run(fx.path(), &["tool"], None, SUMMARY);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--policy"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_policy_file_is_named() {
    let fx = fixture(GOOD);
    for args in [
        &["check", "nope.toml"][..],
        &["tool", "--policy", "nope.toml"],
    ] {
        let out = run(fx.path(), args, None, SUMMARY);
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(
            err.contains("E_POLICY") && err.contains("`nope.toml`"),
            "{err}"
        );
    }
}

#[test]
fn check_shows_every_problem_with_file_line_and_caret() {
    let fx = fixture("[fs]\nread_roots = [\"ws\", \"nope\"]\nwrite_rot = \"ws\"\n");
    let out = run(fx.path(), &["check", "policy.toml"], None, "");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    let want = [
        "policy key `fs.read_roots[1]`: the root \"nope\" does not exist",
        " --> policy.toml:2:21",
        "2 | read_roots = [\"ws\", \"nope\"]",
        "  |                     ^^^^^^",
        "policy key `fs.write_rot`: unknown key in [fs]; did you mean `write_root`?",
        " --> policy.toml:3:1",
        "3 | write_rot = \"ws\"",
        "  | ^^^^^^^^^",
    ];
    let mut at = 0;
    for line in want {
        let found = err[at..]
            .find(line)
            .unwrap_or_else(|| panic!("{line:?} not in order in:\n{err}"));
        at += found + line.len();
    }
}

#[test]
fn check_json_is_the_summary() {
    let fx = fixture(GOOD);
    let out = run(fx.path(), &["check", "--json", "policy.toml"], None, "");
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ws = fx.path().canonicalize().unwrap().join("ws");
    assert_eq!(v["write_root"], ws.display().to_string());
    assert_eq!(v["read_roots"][0], ws.display().to_string());
    assert!(v["digest"].as_str().unwrap().starts_with("sha256:"));
    let tool = run(
        fx.path(),
        &["tool", "--policy", "policy.toml"],
        None,
        SUMMARY,
    );
    let answer: Value = serde_json::from_slice(&tool.stdout).unwrap();
    assert_eq!(
        answer["summary"], v,
        "check --json and the summary op agree"
    );
}

#[test]
fn tool_help_lists_every_op_with_a_request() {
    let out = run(Path::new("."), &["tool", "--help"], None, "");
    assert!(out.status.success());
    let help = text(&out.stdout);
    // Every op the endpoint takes, from its own table: an op added there
    // and not to the help fails here (`fetch` once had no line).
    for &op in sandgate::tool::OPS {
        let request = format!("{{\"op\":\"{op}\"");
        let line = help
            .lines()
            .find(|l| l.contains(&request))
            .unwrap_or_else(|| panic!("no example for {op} in:\n{help}"));
        let json = &line[line.find('{').unwrap()..];
        let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{op}: {e}: {json}"));
        assert_eq!(v["op"], op);
    }
    assert!(help.contains("SANDGATE_POLICY"), "{help}");
}

#[test]
fn completions_are_generated_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef sandgate"),
        ("fish", "complete -c sandgate"),
    ] {
        let out = run(Path::new("."), &["completions", shell], None, "");
        assert!(out.status.success(), "{shell}");
        let script = text(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        for sub in ["check", "explain", "tool", "exec", "run", "completions"] {
            assert!(script.contains(sub), "{shell} lacks {sub}");
        }
    }
    let out = run(Path::new("."), &["completions", "tcsh"], None, "");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_man_page_is_roff_and_names_every_subcommand() {
    let out = run(Path::new("."), &["man"], None, "");
    assert!(out.status.success());
    let page = text(&out.stdout);
    assert!(page.contains(".TH sandgate 1"), "{page}");
    for sub in ["check", "explain", "tool", "exec", "run", "completions"] {
        assert!(page.contains(sub), "the man page lacks {sub}");
    }
}

/// `explain POLICY TARGET` with `--policy` too names two policies: refused
/// like `check`'s, never answered for one of them (SANDGATE_POLICY still
/// yields to the word).
#[test]
fn explain_refuses_two_policies() {
    let fx = fixture(GOOD);
    fs::write(fx.path().join("other.toml"), "").unwrap();
    let out = run(
        fx.path(),
        &["explain", "--policy", "policy.toml", "other.toml", "a.txt"],
        None,
        "",
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("given twice"),
        "{}",
        text(&out.stderr)
    );
    let out = run(
        fx.path(),
        &["explain", "other.toml", "a.txt"],
        Some("policy.toml"),
        "",
    );
    assert_ne!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// A pipe whose reading end is already closed: every write to the other
/// end fails with `EPIPE`.
fn closed_pipe() -> Stdio {
    let (read, write) = rustix::pipe::pipe().unwrap();
    drop(read);
    Stdio::from(write)
}

/// `sandgate check P | head -0` and a closed stderr: the text is lost, the
/// exit code is not (a `println!` would panic and exit 101).
#[test]
fn a_closed_stdout_or_stderr_keeps_the_exit_code() {
    let tmp = fixture(GOOD);
    fs::write(tmp.path().join("bad.toml"), "[fs]\nwrite_root = 5\n").unwrap();
    let status = |args: &[&str], closed_out: bool| {
        let mut cmd = Command::new(SANDGATE);
        cmd.args(args)
            .current_dir(tmp.path())
            .env_remove("SANDGATE_POLICY")
            .stdin(Stdio::null());
        let out = if closed_out {
            cmd.stdout(closed_pipe()).stderr(Stdio::piped()).output()
        } else {
            cmd.stdout(Stdio::piped()).stderr(closed_pipe()).output()
        }
        .unwrap();
        assert!(
            !text(&out.stderr).contains("panicked"),
            "{args:?}: {}",
            text(&out.stderr)
        );
        out.status.code()
    };
    assert_eq!(status(&["check", "policy.toml"], true), Some(0));
    assert_eq!(status(&["check", "--json", "policy.toml"], true), Some(0));
    assert_eq!(status(&["check", "bad.toml"], false), Some(2));
    let refused = [
        "explain",
        "--policy",
        "policy.toml",
        "--as",
        "read",
        "/etc/passwd",
    ];
    assert_eq!(status(&refused, true), Some(1));
    assert_eq!(status(&refused, false), Some(1));
    let allowed = [
        "explain",
        "--policy",
        "policy.toml",
        "--as",
        "read",
        "a.txt",
    ];
    assert_eq!(status(&allowed, true), Some(0));
}

/// The policies the project's own pages show a newcomer (README.md and
/// docs/reference/policy.md, every ```toml block): each one, saved beside
/// the directories it names, must load. The key reference's block once
/// failed four ways (credentials and rules for a host `net.allow` did
/// not grant, budgets for exec and network it did not enable).
#[test]
fn every_policy_the_docs_show_loads() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut problems = Vec::new();
    let mut seen = 0;
    for page in ["README.md", "docs/reference/policy.md"] {
        let doc = fs::read_to_string(repo.join(page)).unwrap();
        let mut block: Option<String> = None;
        for line in doc.lines() {
            match &mut block {
                None if line.trim_start() == "```toml" => block = Some(String::new()),
                None => {}
                Some(b) if line.trim_start() == "```" => {
                    seen += 1;
                    let tmp = tempfile::tempdir().unwrap();
                    // Make every directory the block names as a root.
                    for l in b.lines() {
                        let key = l.split('=').next().unwrap_or("").trim();
                        if key == "read_roots" || key == "write_root" {
                            let value = l.split_once('=').unwrap().1;
                            let value = value.split('#').next().unwrap();
                            for (i, part) in value.split('"').enumerate() {
                                if i % 2 == 1 {
                                    fs::create_dir_all(tmp.path().join(part)).unwrap();
                                }
                            }
                        }
                    }
                    fs::write(tmp.path().join("policy.toml"), b.as_str()).unwrap();
                    let out = run(tmp.path(), &["check", "policy.toml"], None, "");
                    if !out.status.success() {
                        problems.push(format!(
                            "{page}, block {seen}: exit {:?}:\n{}",
                            out.status.code(),
                            text(&out.stderr)
                        ));
                    }
                    block = None;
                }
                Some(b) => {
                    b.push_str(line);
                    b.push('\n');
                }
            }
        }
    }
    assert!(seen >= 2, "only {seen} policy blocks found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The examples `sandgate explain --help` gives, run as written beside the
/// project's example policy: a path example must name a file the policy's
/// roots hold (names are relative to a root, not to the current
/// directory; `workspace/notes/todo.md` once answered a read refused with
/// `E_NOT_FOUND` and a write allowed as a new file at
/// `workspace/workspace/notes/todo.md`), and no example may be refused as
/// a command line or a policy (exit 2).
#[test]
fn the_explain_help_examples_run_on_the_example_policy() {
    let help = text(&run(Path::new("."), &["explain", "--help"], None, "").stdout);
    let examples: Vec<&str> = help
        .lines()
        .map(str::trim)
        .filter(|l| {
            l.starts_with("sandgate explain ") || l.contains("=agent-policy.toml sandgate explain ")
        })
        .collect();
    assert!(examples.len() >= 3, "{help}");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin_dir = Path::new(SANDGATE).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut problems = Vec::new();
    for example in examples {
        let json = example.replacen("sandgate explain ", "sandgate explain --json ", 1);
        let out = Command::new("/bin/sh")
            .args(["-c", &json])
            .current_dir(repo.join("examples"))
            .env("PATH", &path)
            .env_remove("SANDGATE_POLICY")
            .output()
            .unwrap();
        let said = text(&out.stdout);
        if out.status.code() == Some(2) || said.contains("E_NOT_FOUND") {
            problems.push(format!(
                "`{example}`: exit {:?}: {said}{}",
                out.status.code(),
                text(&out.stderr)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A name the user passes (a policy file, an audit file, a directory) is
/// shown on stderr with its controls escaped: a policy named with an
/// escape sequence that sets the terminal's title reached the terminal
/// as is in `check`'s, `tool`'s, `exec`'s, `explain`'s and `mcp`'s
/// refusals, and a bidirectional override reordered what followed it.
#[test]
fn cli22_refusals_show_the_names_they_quote_escaped() {
    let fx = fixture(GOOD);
    let evil = "t\u{1b}]0;owned\u{7}\u{202e}x";
    let missing = format!("{evil}.toml");
    let audit_dir = fx.path().join(evil).join("audit.jsonl");
    let cases: Vec<Vec<String>> = vec![
        vec!["check".into(), missing.clone()],
        vec!["tool".into(), "--policy".into(), missing.clone()],
        vec![
            "exec".into(),
            "--policy".into(),
            missing.clone(),
            "--".into(),
            "true".into(),
        ],
        vec!["explain".into(), missing.clone(), "a.txt".into()],
        vec!["mcp".into(), "--policy".into(), missing.clone()],
        vec![
            "mcp".into(),
            "--policy".into(),
            "policy.toml".into(),
            "--audit".into(),
            audit_dir.to_str().unwrap().into(),
        ],
        vec!["mcp".into(), fx.path().join(evil).to_str().unwrap().into()],
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(fx.path(), &args, None, "");
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        let err = &out.stderr;
        assert!(
            !err.contains(&0x1b)
                && !err.contains(&0x07)
                && !err.windows(3).any(|w| w == "\u{202e}".as_bytes()),
            "{args:?}: {:?}",
            text(err)
        );
        let err = text(err);
        assert!(
            err.contains("t\\u{1b}]0;owned\\u{7}\\u{202e}x"),
            "{args:?}: {err}"
        );
    }
}

/// `sandgate check` shows a policy to a person who is deciding whether to
/// trust it: a policy whose deny pattern or root name holds an escape
/// sequence could rewrite what the summary shows (`ESC [1A ESC [2K`
/// erases the line above, so a grant vanishes from the screen), and a
/// bidirectional override reorders it. Before, the summary printed them
/// raw; `explain` likewise echoed its target raw.
#[test]
fn cli22_check_and_explain_show_what_the_policy_names_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let root = "w\u{1b}[1A\u{1b}[2Ks";
    fs::create_dir(tmp.path().join(root)).unwrap();
    let policy = "[fs]\nread_roots = [\"w\\u001b[1A\\u001b[2Ks\"]\n\
                  write_root = \"w\\u001b[1A\\u001b[2Ks\"\n\
                  deny_write = [\"\\u202eabc\"]\n";
    fs::write(tmp.path().join("policy.toml"), policy).unwrap();
    let clean = |what: &str, out: &Output| {
        let bytes = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        assert!(
            !bytes.contains(&0x1b)
                && !bytes.contains(&0x07)
                && !bytes.windows(3).any(|w| w == "\u{202e}".as_bytes()),
            "{what}: {:?}",
            text(&bytes)
        );
        text(&out.stdout)
    };
    let out = run(tmp.path(), &["check", "policy.toml"], None, "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = clean("check", &out);
    for escaped in ["w\\u{1b}[1A\\u{1b}[2Ks", "\\u{202e}abc"] {
        assert!(shown.contains(escaped), "{escaped}: {shown}");
    }
    // A deny pattern holding a control character is refused at load (it
    // would protect only a name holding one), and the refusal shows it
    // escaped too.
    fs::write(
        tmp.path().join("controls.toml"),
        "[fs]\ndeny_write = [\"\\u001b]0;pwned\\u0007x\"]\n",
    )
    .unwrap();
    let out = run(tmp.path(), &["check", "controls.toml"], None, "");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    clean("check of a control character", &out);
    assert!(
        text(&out.stderr).contains("\\u{1b}]0;pwned\\u{7}x"),
        "{}",
        text(&out.stderr)
    );
    // The JSON summary is JSON's own escaping, unchanged.
    let out = run(tmp.path(), &["check", "--json", "policy.toml"], None, "");
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(summary.to_string().contains("[2Ks"), "{summary}");
    let out = run(
        tmp.path(),
        &["explain", "policy.toml", "a\u{1b}]0;t\u{7}b"],
        None,
        "",
    );
    let shown = clean("explain", &out);
    assert!(shown.contains("a\\u{1b}]0;t\\u{7}b"), "{shown}");
}

/// The tool endpoint's exit statuses, as documented: a stdin that is a
/// directory cannot be read (1, naming it); a closed stdin is an empty
/// session (0, nothing answered); a reader gone away ends it quietly (0).
#[test]
fn cli22_tool_exit_statuses_for_a_stdin_it_cannot_use() {
    let fx = fixture(GOOD);
    let policy = fx.path().join("policy.toml");
    let dir = fs::File::open(fx.path().join("ws")).unwrap();
    let out = Command::new(SANDGATE)
        .args(["tool", "--policy"])
        .arg(&policy)
        .stdin(dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(
        err.contains("reading stdin") && err.contains("directory"),
        "{err}"
    );
    // fd 0 closed: `sh -c 'exec <&-'` runs sandgate without a stdin.
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#"exec "$0" tool --policy "$1" <&-"#)
        .arg(SANDGATE)
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    // Its reader gone: the answers have nowhere to go, and the session
    // ends with 0, not killed by SIGPIPE.
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            r#"yes '{"op":"summary"}' | head -n 100000 | "$0" tool --policy "$1" | head -c 1 >/dev/null
               s=("${PIPESTATUS[@]}"); exit "${s[2]}""#,
        )
        .arg(SANDGATE)
        .arg(&policy)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `sandgate check` shows a root or policy file name holding bytes that
/// are not UTF-8 with them as `\xNN`, never as U+FFFD (a real name of its
/// own): the summary's roots, on the page and in `--json`, and a policy
/// file that cannot be read.
#[test]
fn leads22_check_shows_names_not_utf8_as_their_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fx = fixture(GOOD);
    let home = fx.path().join(OsStr::from_bytes(b"d\xfc"));
    fs::create_dir_all(home.join("ws")).unwrap();
    fs::write(home.join("policy.toml"), GOOD).unwrap();
    let check = |args: &[&OsStr]| {
        Command::new(SANDGATE)
            .arg("check")
            .args(args)
            .current_dir(&home)
            .env_remove("SANDGATE_POLICY")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let page = check(&[OsStr::new("policy.toml")]);
    let json = check(&[OsStr::new("--json"), OsStr::new("policy.toml")]);
    let gone = check(&[OsStr::from_bytes(b"gone\xff.toml")]);
    for (out, want) in [(&page, "d\\xfc/ws"), (&json, "d\\\\xfc/ws")] {
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            stdout.contains(want) && !stdout.contains('\u{fffd}'),
            "{stdout}"
        );
    }
    let stderr = text(&gone.stderr);
    assert_eq!(gone.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("gone\\xff.toml") && !stderr.contains('\u{fffd}'),
        "{stderr}"
    );
}

/// `sandgate check` doubles a literal backslash in a name it shows, so
/// that a directory or policy file named with the four characters `\xfc`
/// is not shown as one named with the byte 0xFC: the summary's roots, on
/// the page and in `--json`, and a policy file that cannot be read.
#[test]
fn shown23_check_shows_a_backslash_doubled() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fx = fixture(GOOD);
    let run = |dir: &Path, args: &[&OsStr]| {
        Command::new(SANDGATE)
            .arg("check")
            .args(args)
            .current_dir(dir)
            .env_remove("SANDGATE_POLICY")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let mut seen = Vec::new();
    for name in [&b"d\xfc"[..], &b"d\\xfc"[..]] {
        let home = fx.path().join(OsStr::from_bytes(name));
        fs::create_dir_all(home.join("ws")).unwrap();
        fs::write(home.join("policy.toml"), GOOD).unwrap();
        let page = run(&home, &[OsStr::new("policy.toml")]);
        let json = run(&home, &[OsStr::new("--json"), OsStr::new("policy.toml")]);
        for out in [&page, &json] {
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
        seen.push((text(&page.stdout), text(&json.stdout)));
    }
    assert_ne!(seen[0].0, seen[1].0, "two roots, one page");
    assert_ne!(seen[0].1, seen[1].1, "two roots, one JSON");
    assert!(seen[0].0.contains("/d\\xfc/ws"), "{}", seen[0].0);
    assert!(seen[1].0.contains("/d\\\\xfc/ws"), "{}", seen[1].0);
    assert!(seen[1].1.contains("/d\\\\\\\\xfc/ws"), "{}", seen[1].1);
    let byte = run(fx.path(), &[OsStr::from_bytes(b"gone\xff.toml")]);
    let bytes = run(fx.path(), &[OsStr::from_bytes(b"gone\\xff.toml")]);
    let (byte, bytes) = (text(&byte.stderr), text(&bytes.stderr));
    assert_ne!(byte, bytes, "two files, one refusal");
    assert!(byte.contains("gone\\xff.toml"), "{byte}");
    assert!(bytes.contains("gone\\\\xff.toml"), "{bytes}");
}

/// `sandgate check` shows a root whose path holds a line feed with it as
/// `\u{a}`, so that the name cannot add a line of its own to the summary
/// (a forged `write root` line), and a policy file whose name holds one in
/// its one-line refusal.
#[test]
fn shown23_check_shows_a_line_feed_in_a_name_escaped() {
    let fx = fixture(GOOD);
    let home = fx.path().join("d\n  write root        /");
    fs::create_dir_all(home.join("ws")).unwrap();
    fs::write(home.join("policy.toml"), GOOD).unwrap();
    let run = |dir: &Path, file: &str| {
        Command::new(SANDGATE)
            .args(["check", file])
            .current_dir(dir)
            .env_remove("SANDGATE_POLICY")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let page = run(&home, "policy.toml");
    assert!(page.status.success(), "{}", text(&page.stderr));
    let page = text(&page.stdout);
    let writes: Vec<&str> = page
        .lines()
        .filter(|l| l.trim_start().starts_with("write root"))
        .collect();
    assert_eq!(writes.len(), 1, "{page}");
    assert!(
        writes[0].ends_with("/d\\u{a}  write root        /ws"),
        "{page}"
    );
    let gone = run(fx.path(), "gone\nsandgate: all is well.toml");
    let stderr = text(&gone.stderr);
    assert_eq!(gone.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("gone\\u{a}sandgate: all is well.toml"),
        "{stderr}"
    );
}

/// `sandgate mcp DIR` names a directory it refuses with a byte that is not
/// UTF-8 as `\xNN`, never as U+FFFD (a real name of its own), and with a
/// backslash doubled: one that does not exist, and one whose path is not
/// UTF-8.
#[test]
fn shown23_mcp_dirs_refused_are_named_as_their_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let mcp = |dir: &[u8]| {
        let out = Command::new(SANDGATE)
            .arg("mcp")
            .arg(tmp.path().join(OsStr::from_bytes(dir)))
            .env_remove("SANDGATE_POLICY")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0));
        text(&out.stderr)
    };
    let gone = mcp(b"gone\xff");
    assert!(
        gone.contains("/gone\\xff:") && !gone.contains('\u{fffd}'),
        "{gone}"
    );
    let gone = mcp(b"gone\\xff");
    assert!(gone.contains("/gone\\\\xff:"), "{gone}");
    fs::create_dir(tmp.path().join(OsStr::from_bytes(b"d\xfe"))).unwrap();
    let bytes = mcp(b"d\xfe");
    assert!(
        bytes.contains("/d\\xfe: not UTF-8") && !bytes.contains('\u{fffd}'),
        "{bytes}"
    );
}
