//! The `sandgate` binary as a program: the JSON-lines protocol of
//! `sandgate tool` (docs/reference/json-endpoint.md), `sandgate check` on good and refused
//! policies (docs/reference/policy.md), and the example session under `--pretty`.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

const SANDGATE: &str = env!("CARGO_BIN_EXE_sandgate");

/// A policy directory: `ws/` is the read and write root, `outside/` holds
/// what must never leak, `policy.toml` sits beside them.
struct Fx {
    tmp: tempfile::TempDir,
}

impl Fx {
    fn new(policy: &str) -> Fx {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("ws/sub")).unwrap();
        fs::create_dir_all(tmp.path().join("outside")).unwrap();
        fs::write(tmp.path().join("ws/a.txt"), "hello\n").unwrap();
        fs::write(tmp.path().join("outside/secret.txt"), "TOP SECRET\n").unwrap();
        fs::write(tmp.path().join("policy.toml"), policy).unwrap();
        Fx { tmp }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn policy(&self) -> PathBuf {
        self.path("policy.toml")
    }

    /// Runs `sandgate tool` over `input` and answers its output.
    fn tool(&self, input: impl AsRef<[u8]>) -> Output {
        run(&["tool", "--policy"], &self.policy(), input)
    }

    /// Runs `sandgate tool` over `lines` and answers the parsed answers,
    /// after checking the exit status and that each answer is one line.
    fn session(&self, lines: &[String]) -> Vec<Value> {
        let mut input = lines.join("\n");
        input.push('\n');
        let out = self.tool(&input);
        assert!(
            out.status.success(),
            "exit {}: {}",
            out.status,
            stderr(&out)
        );
        let text = String::from_utf8(out.stdout).expect("answers are UTF-8");
        let answers: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(answers.len(), lines.len(), "one answer line per request");
        answers
    }
}

const RW: &str = "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\nallow_overwrite = true\n";

fn run(args: &[&str], policy: &Path, input: impl AsRef<[u8]>) -> Output {
    let mut child = Command::new(SANDGATE)
        .args(args)
        .arg(policy)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sandgate");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.as_ref().to_vec();
    // Write from another thread so a large session cannot deadlock on
    // full pipes; a process that exits early makes this fail: fine.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn check(policy: &Path, extra: &[&str]) -> Output {
    Command::new(SANDGATE)
        .arg("check")
        .args(extra)
        .arg(policy)
        .output()
        .expect("run sandgate check")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn code(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or("OK")
}

fn line(v: Value) -> String {
    v.to_string()
}

/// Every malformed request of docs/reference/json-endpoint.md, as raw lines.
const BAD_LINES: &[&str] = &[
    // unknown op
    r#"{"op":"remove","path":"a.txt"}"#,
    // no op
    r#"{"path":"a.txt"}"#,
    // unknown key
    r#"{"op":"read","path":"a.txt","bogus":1}"#,
    // duplicated key (also when the values agree)
    r#"{"op":"read","path":"a.txt","path":"../outside/secret.txt"}"#,
    r#"{"op":"read","path":"a.txt","path":"a.txt"}"#,
    // wrong types
    r#"{"op":"write","path":"a.txt","content":"x","overwrite":"yes"}"#,
    r#"{"op":"read","path":"a.txt","offset":-1}"#,
    r#"{"op":"read","path":"a.txt","offset":1.5}"#,
    r#"{"op":"read","path":7}"#,
    // missing required key
    r#"{"op":"read"}"#,
    r#"{"op":"rename","from":"a.txt"}"#,
    // not an object
    r#"["read","a.txt"]"#,
    r#""read""#,
    "null",
    // not JSON
    "read a.txt",
    r#"{"op":"read","path":"a.txt""#,
];

#[test]
fn each_protocol_error_is_answered_in_place_and_the_session_goes_on() {
    let fx = Fx::new(RW);
    let good = line(json!({"op": "read", "path": "a.txt"}));
    let mut lines = Vec::new();
    for bad in BAD_LINES {
        lines.push((*bad).to_owned());
        lines.push(good.clone());
    }
    let answers = fx.session(&lines);
    for (i, bad) in BAD_LINES.iter().enumerate() {
        let refused = &answers[2 * i];
        assert_eq!(refused["ok"], false, "{bad:?} -> {refused}");
        assert_eq!(code(refused), "E_REQUEST", "{bad:?} -> {refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{bad:?}: the refusal explains itself: {refused}"
        );
        let after = &answers[2 * i + 1];
        assert_eq!(
            *after,
            json!({"ok": true, "content": "hello\n", "size": 6}),
            "after {bad:?}"
        );
    }
    // Nothing the malformed writes asked for happened.
    assert_eq!(fs::read(fx.path("ws/a.txt")).unwrap(), b"hello\n");
    assert_eq!(
        fs::read(fx.path("outside/secret.txt")).unwrap(),
        b"TOP SECRET\n"
    );
}

#[test]
fn a_session_of_only_bad_lines_ends_cleanly() {
    let fx = Fx::new(RW);
    let lines: Vec<String> = BAD_LINES.iter().map(|l| (*l).to_owned()).collect();
    let answers = fx.session(&lines);
    assert!(answers.iter().all(|a| code(a) == "E_REQUEST"));
    // No trailing newline on the last request: still answered.
    let out = fx.tool(r#"{"op":"read","path":"a.txt"}"#);
    assert!(out.status.success());
    assert_eq!(
        stdout(&out),
        "{\"content\":\"hello\\n\",\"ok\":true,\"size\":6}\n"
    );
    // No input at all: no output, success.
    let out = fx.tool("");
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

/// Runs `sandgate tool` over raw bytes and answers the parsed answer lines,
/// after checking that the session ended well.
fn answers_of(fx: &Fx, args: &[&str], input: &[u8]) -> Vec<Value> {
    let out = run(args, &fx.policy(), input);
    assert!(
        out.status.success(),
        "exit {}: {}",
        out.status,
        stderr(&out)
    );
    String::from_utf8(out.stdout)
        .expect("answers are UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_line_that_is_not_utf8_is_answered_and_the_session_goes_on() {
    let fx = Fx::new(RW);
    // The very exchange that used to end the session unanswered.
    let answers = answers_of(
        &fx,
        &["tool", "--policy"],
        b"{\"op\":\"stat\",\"path\":\"\xff\"}\n{\"op\":\"summary\"}\n",
    );
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(code(&answers[0]), "E_REQUEST", "{}", answers[0]);
    assert!(answers[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("UTF-8"));
    assert_eq!(answers[1]["ok"], true);
    assert!(answers[1]["summary"]["digest"].is_string());
    // Stray, truncated, overlong and surrogate sequences; a write among them
    // creates nothing; the id is echoed where it reads exactly.
    let bad: &[&[u8]] = &[
        b"\xff",
        b"{\"op\":\"read\",\"path\":\"a.txt\xc3\"}",
        b"{\"op\":\"read\",\"path\":\"\xc0\xae\xc0\xae/outside/secret.txt\"}",
        b"{\"op\":\"read\",\"path\":\"\xed\xa0\x80\"}",
        b"{\"op\":\"write\",\"path\":\"new\xfe.txt\",\"content\":\"x\"}",
        b"{\"id\":41,\"op\":\"read\",\"path\":\"a\xff.txt\"}",
        b"{\"id\":\"q\xff\",\"op\":\"read\",\"path\":\"a.txt\"}",
    ];
    let mut input = Vec::new();
    for b in bad {
        input.extend_from_slice(b);
        input.extend_from_slice(b"\n{\"op\":\"read\",\"path\":\"a.txt\"}\n");
    }
    let answers = answers_of(&fx, &["tool", "--policy"], &input);
    assert_eq!(answers.len(), 2 * bad.len(), "{answers:?}");
    for (i, b) in bad.iter().enumerate() {
        let refused = &answers[2 * i];
        assert_eq!(
            code(refused),
            "E_REQUEST",
            "{:?}: {refused}",
            String::from_utf8_lossy(b)
        );
        assert_eq!(answers[2 * i + 1]["content"], "hello\n");
    }
    assert_eq!(answers[10]["id"], 41);
    assert!(answers[12].get("id").is_none(), "{}", answers[12]);
    assert_eq!(
        fs::read_dir(fx.path("ws")).unwrap().count(),
        2,
        "nothing was created"
    );
    // Under --pretty too.
    let out = run(
        &["tool", "--pretty", "--policy"],
        &fx.policy(),
        b"{\"op\":\"stat\",\"path\":\"\xff\"}\n{\"op\":\"stat\",\"path\":\"a.txt\"}\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("REFUSED E_REQUEST"), "{text}");
    assert_eq!(text.matches("-> ").count(), 2, "{text}");
}

#[test]
fn blank_and_comment_lines_are_skipped_without_an_answer() {
    let fx = Fx::new(RW);
    let input = concat!(
        "\n",
        "   \n",
        "\t\n",
        "\r\n",
        "# a comment\n",
        "   # an indented comment\n",
        "#{\"op\":\"write\",\"path\":\"commented.txt\",\"content\":\"x\"}\n",
        "{\"op\":\"read\",\"path\":\"a.txt\"}\n",
        "#\n",
        "\n",
        "{\"op\":\"stat\",\"path\":\"sub\"}\r\n",
    );
    let mut bytes = input.as_bytes().to_vec();
    bytes.extend_from_slice(b"# not UTF-8 in a comment: \xff\n");
    let answers = answers_of(&fx, &["tool", "--policy"], &bytes);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["content"], "hello\n");
    assert_eq!(answers[1]["kind"], "dir");
    assert!(!fx.path("ws/commented.txt").exists());
    // --pretty shows a comment as a heading and answers neither kind.
    let out = run(&["tool", "--pretty", "--policy"], &fx.policy(), &bytes);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.matches("-> ").count(), 2, "{text}");
    assert!(!text.contains("REFUSED"), "{text}");
    assert!(text.contains("# a comment"), "{text}");
    assert!(!fx.path("ws/commented.txt").exists());
}

#[test]
fn answers_carry_the_request_id() {
    let fx = Fx::new(RW);
    let lines: Vec<String> = [
        r#"{"id":1,"op":"read","path":"a.txt"}"#,
        r#"{"op":"stat","path":"sub","id":"two"}"#,
        r#"{"id":3,"op":"read","path":"../outside/secret.txt"}"#,
        r#"{"id":"4","op":"read","path":"missing"}"#,
        r#"{"id":5,"op":"nope"}"#,
        r#"{"id":6,"op":"read","path":"a.txt","path":"a.txt"}"#,
        r#"{"id":-7.5,"op":"summary"}"#,
        r#"{"id":true,"op":"summary"}"#,
        r#"{"id":null,"op":"summary"}"#,
        r#"{"id":1,"id":1,"op":"summary"}"#,
        r#"{"op":"stat","path":"sub"}"#,
    ]
    .iter()
    .map(|l| (*l).to_owned())
    .collect();
    let answers = fx.session(&lines);
    let want: [(Value, &str); 11] = [
        (json!(1), "OK"),
        (json!("two"), "OK"),
        (json!(3), "E_PATH_INVALID"),
        (json!("4"), "E_NOT_FOUND"),
        (json!(5), "E_REQUEST"),
        (json!(6), "E_REQUEST"),
        (json!(-7.5), "OK"),
        (Value::Null, "E_REQUEST"),
        (Value::Null, "E_REQUEST"),
        (Value::Null, "E_REQUEST"),
        (Value::Null, "OK"),
    ];
    for (i, ((id, c), answer)) in want.iter().zip(&answers).enumerate() {
        assert_eq!(code(answer), *c, "{}: {answer}", lines[i]);
        assert_eq!(
            answer.get("id").unwrap_or(&Value::Null),
            id,
            "{}: {answer}",
            lines[i]
        );
    }
    assert_eq!(answers[0]["content"], "hello\n");
}

#[test]
fn run17_an_id_is_echoed_exactly_or_refused() {
    // An integer id past 64 bits was read as a float and came back as
    // another number (`100000000000000000000001` as `1e+23`): a client
    // matching answers by id (Python's ints, Go's json.Number) never found
    // its answer. Such an id is refused now; 64-bit integers and the
    // fractions that were echoed before are echoed as sent.
    let fx = Fx::new(RW);
    let lines: Vec<String> = [
        r#"{"id":100000000000000000000001,"op":"stat","path":"sub"}"#,
        r#"{"id":18446744073709551617,"op":"stat","path":"sub"}"#,
        r#"{"id":-9223372036854775809,"op":"stat","path":"sub"}"#,
        r#"{"id":18446744073709551615,"op":"stat","path":"sub"}"#,
        r#"{"id":-9223372036854775808,"op":"stat","path":"sub"}"#,
        r#"{"id":2.5,"op":"stat","path":"sub"}"#,
    ]
    .iter()
    .map(|l| (*l).to_owned())
    .collect();
    let mut input = lines.join("\n");
    input.push('\n');
    let out = fx.tool(&input);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let answers: Vec<&str> = text.lines().collect();
    assert_eq!(answers.len(), lines.len(), "{text}");
    for (line, answer) in lines.iter().zip(&answers).take(3) {
        let v: Value = serde_json::from_str(answer).unwrap();
        assert_eq!(code(&v), "E_REQUEST", "{line}: {answer}");
        assert!(v.get("id").is_none(), "{line}: {answer}");
        let message = v["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains("`id`"), "{line}: {answer}");
    }
    for (id, answer) in ["18446744073709551615", "-9223372036854775808", "2.5"]
        .iter()
        .zip(&answers[3..])
    {
        let v: Value = serde_json::from_str(answer).unwrap();
        assert_eq!(code(&v), "OK", "{answer}");
        assert!(answer.contains(&format!("\"id\":{id},")), "{id}: {answer}");
    }
}

#[test]
fn a_long_session_is_answered_in_order() {
    const N: usize = 2000;
    let fx = Fx::new(RW);
    let mut lines = Vec::with_capacity(N);
    // Five kinds of request, interleaved; each answer is predictable from
    // its position alone.
    for i in 0..N {
        let k = i / 5;
        lines.push(match i % 5 {
            0 => line(
                json!({"op": "write", "path": format!("f/{k}.txt"), "content": "x".repeat(k % 50)}),
            ),
            1 => line(json!({"op": "read", "path": format!("f/{k}.txt")})),
            2 => format!("not json {i}"),
            3 => line(json!({"op": "stat", "path": format!("f/{k}.txt")})),
            _ => line(json!({"op": "write", "path": format!("f/{k}.txt"), "content": "again"})),
        });
    }
    let answers = fx.session(&lines);
    for (i, a) in answers.iter().enumerate() {
        let k = i / 5;
        let size = k % 50;
        match i % 5 {
            0 => assert_eq!(*a, json!({"ok": true, "size": size}), "request {i}"),
            1 => assert_eq!(
                *a,
                json!({"ok": true, "size": size, "content": "x".repeat(size)}),
                "request {i}"
            ),
            2 => assert_eq!(code(a), "E_REQUEST", "request {i}"),
            3 => {
                assert_eq!(a["kind"], "file", "request {i}: {a}");
                assert_eq!(a["size"], size, "request {i}: {a}");
            }
            _ => {
                assert_eq!(code(a), "E_EXISTS", "request {i}: {a}");
                assert_eq!(a["error"]["path"], format!("f/{k}.txt"), "request {i}");
            }
        }
    }
    assert_eq!(fs::read_dir(fx.path("ws/f")).unwrap().count(), N / 5);
}

#[test]
fn answers_come_while_the_session_is_open() {
    // An agent waits for each answer before it sends the next request: the
    // tool must not hold answers back until stdin closes.
    let fx = Fx::new(RW);
    let mut child: Child = Command::new(SANDGATE)
        .args(["tool", "--policy"])
        .arg(fx.policy())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            if tx.send(l.unwrap()).is_err() {
                break;
            }
        }
    });
    let wait = Duration::from_secs(20);
    for (request, want) in [
        (
            json!({"op": "write", "path": "i.txt", "content": "one"}),
            json!({"ok": true, "size": 3}),
        ),
        (
            json!({"op": "read", "path": "i.txt"}),
            json!({"ok": true, "size": 3, "content": "one"}),
        ),
        (
            json!({"op": "read", "path": "../outside/secret.txt"}),
            json!("E_PATH_INVALID"),
        ),
    ] {
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let got: Value = serde_json::from_str(
            &rx.recv_timeout(wait)
                .expect("an answer before the next request"),
        )
        .unwrap();
        if want.is_string() {
            assert_eq!(code(&got), want.as_str().unwrap(), "{got}");
        } else {
            assert_eq!(got, want);
        }
    }
    writeln!(stdin, "garbage").unwrap();
    stdin.flush().unwrap();
    let got: Value = serde_json::from_str(&rx.recv_timeout(wait).unwrap()).unwrap();
    assert_eq!(code(&got), "E_REQUEST");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
}

#[test]
fn content_is_utf8_text_or_base64() {
    let fx = Fx::new(RW);
    fs::write(fx.path("ws/latin1.txt"), b"caf\xe9\n").unwrap();
    let raw: &[u8] = b"\x00\xff\xfe\x80binary\n";
    let text = "h\u{e9}llo \u{1F600}\n";
    let answers = fx.session(&[
        line(json!({"op": "write", "path": "t.txt", "content": text})),
        line(json!({"op": "read", "path": "t.txt"})),
        line(json!({"op": "write", "path": "b.bin", "content_base64": "AP/+gGJpbmFyeQo="})),
        line(json!({"op": "read", "path": "b.bin"})),
        line(json!({"op": "read", "path": "b.bin", "offset": 1, "limit": 1})),
        line(json!({"op": "read", "path": "latin1.txt"})),
        line(json!({"op": "write", "path": "u.txt", "content_base64": "aMOp"})),
        line(json!({"op": "read", "path": "u.txt"})),
    ]);
    // size counts bytes, not characters.
    assert_eq!(answers[0], json!({"ok": true, "size": 12}));
    assert_eq!(answers[1], json!({"ok": true, "size": 12, "content": text}));
    assert_eq!(answers[2], json!({"ok": true, "size": raw.len()}));
    assert_eq!(fs::read(fx.path("ws/b.bin")).unwrap(), raw);
    for a in &answers[3..5] {
        assert_eq!(a["content_base64"], "AP/+gGJpbmFyeQo=", "{a}");
        assert!(
            a.get("content").is_none(),
            "one of the two, never both: {a}"
        );
    }
    assert_eq!(answers[5]["content_base64"], "Y2Fm6Qo=");
    assert!(answers[5].get("content").is_none());
    // Valid UTF-8 written as base64 reads back as text.
    assert_eq!(answers[7]["content"], "h\u{e9}");
    assert!(answers[7].get("content_base64").is_none());
}

/// A text of several MiB, with every kind of escape and characters of up
/// to four bytes throughout, comes back whole (it is escaped in pieces),
/// and the session answers on after it.
#[test]
fn a_long_text_is_answered_whole_and_the_session_goes_on() {
    let fx = Fx::new(RW);
    let unit = "line \"quoted\" \\ tab\t \u{1} \u{e9}\u{2028}\u{1F600}\r\n";
    let mut text = String::new();
    while text.len() < 3 * 1024 * 1024 {
        text.push_str(unit);
    }
    fs::write(fx.path("ws/long.txt"), &text).unwrap();
    let answers = fx.session(&[
        line(json!({"op": "read", "path": "long.txt"})),
        line(json!({"op": "read", "path": "a.txt"})),
        line(json!({"op": "read", "path": "long.txt"})),
    ]);
    assert_eq!(answers.len(), 3);
    assert!(answers[0]["content"] == text, "the first read differs");
    assert_eq!(answers[1]["content"], "hello\n");
    assert!(answers[2]["content"] == text, "the second read differs");
}

// ---------------------------------------------------------------------------
// sandgate check

const GOOD: &str = "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\ndeny_write = [\"*.yml\"]\n";
/// sha256 of GOOD's bytes.
const GOOD_DIGEST: &str = "sha256:4eec47320e4ada01e7dd59389acbf5ea7fb97b76c4e4a4f1817cc69cc3a2b90f";

#[test]
fn check_prints_the_summary_of_a_good_policy() {
    let fx = Fx::new(GOOD);
    let out = check(&fx.policy(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(GOOD_DIGEST), "{text}");
    assert!(text.contains("restricted"), "{text}");
    assert!(text.contains("*.yml"), "{text}");
    assert!(
        text.contains(".git"),
        "restricted mode says it guards .git: {text}"
    );

    let out = check(&fx.policy(), &["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let summary: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(summary["digest"], GOOD_DIGEST);
    assert_eq!(summary["mode"], "restricted");
    assert_eq!(summary["deny_write"], json!(["*.yml"]));
    let ws = fx.path("ws").canonicalize().unwrap();
    assert_eq!(summary["write_root"], ws.to_str().unwrap());
    assert_eq!(summary["read_roots"], json!([ws.to_str().unwrap()]));

    // The digest is over the exact bytes: one more newline changes it.
    fs::write(fx.policy(), format!("{GOOD}\n")).unwrap();
    let out = check(&fx.policy(), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!stdout(&out).contains(GOOD_DIGEST));
}

/// Representative refusals: (what, policy text, the key the refusal names).
const REFUSED: &[(&str, &str, &str)] = &[
    (
        "write root holds the policy",
        "[fs]\nwrite_root = \".\"\n",
        "fs.write_root",
    ),
    (
        "missing root",
        "[fs]\nread_roots = [\"ws\", \"nope\"]\n",
        "fs.read_roots[1]",
    ),
    ("unknown key", "[fs]\nwrite_roots = \"ws\"\n", "fs.write_roots"),
    ("unknown table", "[filesystem]\nx = 1\n", "filesystem"),
    (
        "duplicated key",
        "[fs]\nwrite_root = \"ws\"\nwrite_root = \"ws\"\n",
        "fs.write_root",
    ),
    (
        "wrong type",
        "[fs]\nread_roots = \"ws\"\n",
        "fs.read_roots",
    ),
    (
        "boolean as a string",
        "[fs]\nwrite_root = \"ws\"\nallow_overwrite = \"true\"\n",
        "fs.allow_overwrite",
    ),
    (
        "zero byte cap",
        "[fs]\nwrite_root = \"ws\"\nmax_write_bytes = 0\n",
        "fs.max_write_bytes",
    ),
    (
        "budget without the capability",
        "[exec]\nenabled = false\n\n[budgets]\nexec_ops = 3\n",
        "budgets.exec_ops",
    ),
    (
        "timeout over 24 h",
        "[exec]\nenabled = true\ntimeout_ms = 86400001\n",
        "exec.timeout_ms",
    ),
    (
        "restricted process_allow",
        "[fs]\nwrite_root = \"ws\"\n\n[exec]\nenabled = true\nprocess_allow = [\"git:status\", \"curl\"]\n",
        "exec.process_allow[1]",
    ),
    (
        "loopback name in restricted mode",
        "[net]\nallow = [\"localhost:7655\"]\n",
        "net.allow[0]",
    ),
    (
        "metadata address in restricted mode",
        "[net]\nallow = [\"169.254.169.254\"]\n",
        "net.allow[0]",
    ),
    (
        "malformed net entry",
        "security_mode = \"trusted_host\"\n\n[net]\nallow = [\"127.0.0.1:0\"]\n",
        "net.allow[0]",
    ),
    (
        "absolute deny pattern",
        "[fs]\nwrite_root = \"ws\"\ndeny_write = [\"/etc/**\"]\n",
        "fs.deny_write",
    ),
    (
        // No name holds a NUL byte: the pattern would protect nothing.
        "NUL in a deny pattern",
        "[fs]\nwrite_root = \"ws\"\ndeny_write = [\"secret\\u0000.txt\"]\n",
        "fs.deny_write",
    ),
];

#[test]
fn check_refuses_bad_policies_naming_the_key() {
    let mut problems = Vec::new();
    for (what, policy, key) in REFUSED {
        let fx = Fx::new(policy);
        let out = check(&fx.policy(), &[]);
        let err = stderr(&out);
        if out.status.code() != Some(2) {
            problems.push(format!("{what}: exit {}, want 2", out.status));
        }
        if !err.contains("E_POLICY") || !err.contains(key) {
            problems.push(format!(
                "{what}: stderr does not name E_POLICY and `{key}`: {err:?}"
            ));
        }
        if !out.stdout.is_empty() {
            problems.push(format!("{what}: a refused policy printed a summary"));
        }
        let host = fx.tmp.path().join("outside").to_string_lossy().into_owned();
        if err.contains(&host) {
            problems.push(format!(
                "{what}: the refusal names a host path outside the roots"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn tool_with_a_refused_policy_exits_2_without_answering() {
    for (what, policy, _) in REFUSED {
        let fx = Fx::new(policy);
        let out = fx.tool("{\"op\":\"summary\"}\n");
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{what}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("E_POLICY"),
            "{what}: {}",
            stderr(&out)
        );
    }
    // A policy file that does not exist.
    let fx = Fx::new(RW);
    let out = run(
        &["tool", "--policy"],
        &fx.path("missing.toml"),
        "{\"op\":\"summary\"}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("E_POLICY"), "{}", stderr(&out));
}

// ---------------------------------------------------------------------------
// The example session

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Copies a tree, keeping symlinks as symlinks.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if kind.is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Every file below `dir` with its content (symlinks as their target).
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let kind = entry.file_type().unwrap();
            if kind.is_symlink() {
                let t = fs::read_link(&path).unwrap();
                out.push((rel, t.to_string_lossy().as_bytes().to_vec()));
            } else if kind.is_dir() {
                out.push((format!("{rel}/"), Vec::new()));
                walk(base, &path, out);
            } else {
                out.push((rel, fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn pretty_session(dir: &Path) -> String {
    let mut input = String::new();
    fs::File::open(dir.join("session.jsonl"))
        .unwrap()
        .read_to_string(&mut input)
        .unwrap();
    let out = run(
        &["tool", "--pretty", "--policy"],
        &dir.join("agent-policy.toml"),
        &input,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn the_example_session_narrates_and_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("examples");
    copy_tree(&examples_dir(), &dir);
    let text = pretty_session(&dir);
    for want in [
        "# The agent asks what it may do.",
        "# Attempts to leave the workspace, by name and through a planted symlink.",
        "sandgate policy",
        "-> read path=\"notes/todo.md\"",
        "REFUSED E_EXISTS [notes/plan.md]",
        "REFUSED E_PATH_INVALID",
        "REFUSED E_PATH_ESCAPE [shared-notes/secret.txt]",
        "REFUSED E_FS_PROTECTED [.github/workflows/ci.yml]",
        "REFUSED E_FS_PROTECTED [.git/hooks/pre-commit]",
        "REFUSED E_FS_PROTECTED [.github]",
        "# The shell runs in the workspace, confined by the kernel to the same roots.",
        "confined: ",
        "exit_code=124",
        "REFUSED E_REQUEST",
        "replacements=1",
        "paths: notes/todo.md  release-notes.md",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // Narration lines are shown, never answered as requests.
    assert!(!text.contains("-> #"), "{text}");
    // Nothing of the secret outside the roots is shown.
    assert!(!text.contains("outside every root"), "{text}");
}

#[test]
fn the_example_session_restores_its_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("examples");
    copy_tree(&examples_dir(), &dir);
    let before = snapshot(&dir);
    let first = pretty_session(&dir);
    assert_eq!(
        snapshot(&dir),
        before,
        "the session leaves the tree as it found it"
    );
    let second = pretty_session(&dir);
    assert_eq!(first, second, "a replay prints the very same exchange");
    assert_eq!(snapshot(&dir), before);
}

/// A line longer than any request the policy admits (a write of
/// `max_write_bytes` escaped six times over, and the like) is answered
/// with `E_REQUEST` and skipped to its end without being held: a client
/// that sends gigabytes without a newline cannot make the endpoint grow
/// without bound. The session goes on.
#[test]
fn an_overlong_line_is_answered_without_being_held() {
    let fx = Fx::new(
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\nmax_read_bytes = 4096\n\
         max_write_bytes = 4096\n",
    );
    let mut child: Child = Command::new(SANDGATE)
        .args(["tool", "--policy"])
        .arg(fx.policy())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            if tx.send(l.unwrap()).is_err() {
                break;
            }
        }
    });
    // 96 MiB of one JSON string, in 1 MiB writes.
    stdin
        .write_all(br#"{"id":1,"op":"write","path":"big.txt","content":""#)
        .unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..96 {
        stdin.write_all(&chunk).unwrap();
    }
    stdin
        .write_all(b"\"}\n{\"id\":2,\"op\":\"read\",\"path\":\"a.txt\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    let wait = Duration::from_secs(60);
    let first: Value = serde_json::from_str(&rx.recv_timeout(wait).unwrap()).unwrap();
    let second: Value = serde_json::from_str(&rx.recv_timeout(wait).unwrap()).unwrap();
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    assert!(
        peak_kib < 48 * 1024,
        "a 96 MiB line made the endpoint peak at {} MiB",
        peak_kib / 1024
    );
    assert_eq!(code(&first), "E_REQUEST", "{first}");
    assert_eq!(second["content"], "hello\n", "{second}");
}

/// grep's `before` and `after` take at most 100 lines each (as
/// json-endpoint.md says): 100 is served, 101 is `E_REQUEST` naming the
/// key, and the session goes on.
#[test]
fn grep_context_is_capped_at_100_lines() {
    let fx = Fx::new(RW);
    let answers = fx.session(&[
        line(json!({"op": "grep", "pattern": "hello", "before": 100, "after": 100})),
        line(json!({"op": "grep", "pattern": "hello", "before": 101})),
        line(json!({"op": "grep", "pattern": "hello", "after": 101})),
        line(json!({"op": "read", "path": "a.txt"})),
    ]);
    assert_eq!(answers[0]["ok"], true, "{}", answers[0]);
    assert_eq!(answers[0]["matches"][0]["path"], "a.txt", "{}", answers[0]);
    for (a, key) in [(&answers[1], "`before`"), (&answers[2], "`after`")] {
        assert_eq!(code(a), "E_REQUEST", "{a}");
        assert!(a["error"]["message"].as_str().unwrap().contains(key), "{a}");
    }
    assert_eq!(answers[3]["content"], "hello\n");
}

/// An edit with `all: true` whose result would be over
/// `fs.max_write_bytes` is refused (`E_TOO_LARGE`) before the result is
/// built: a 1 MiB file of `a` with each `a` replaced by 64 KiB would be
/// 64 GiB. Before, the whole result was built in memory and only then
/// measured against the cap, so one request made the endpoint allocate
/// until it was killed. Run under a 1 GiB address-space limit so that the
/// old behaviour ends in an allocation failure, not in the host's OOM
/// killer.
#[test]
fn endpoint19_an_edit_whose_result_is_over_the_write_cap_is_refused_before_it_is_built() {
    let fx = Fx::new(RW);
    fs::write(fx.path("ws/big.txt"), vec![b'a'; 1 << 20]).unwrap();
    let edit =
        line(json!({"op":"edit","path":"big.txt","old":"a","new":"x".repeat(64 << 10),"all":true}));
    let input = format!("{edit}\n{}\n", line(json!({"op":"stat","path":"big.txt"})));
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" tool --policy \"$1\"")
        .arg(SANDGATE)
        .arg(fx.policy())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 2, "exit {}: {}", out.status, stderr(&out));
    assert_eq!(code(&answers[0]), "E_TOO_LARGE", "{}", answers[0]);
    assert_eq!(answers[0]["error"]["path"], "big.txt");
    assert_eq!(answers[1]["size"], 1 << 20, "the file is as it was");
    assert_eq!(
        fs::read(fx.path("ws/big.txt")).unwrap(),
        vec![b'a'; 1 << 20]
    );
}

/// An edit's search for `old` takes time linear in the file and `old`:
/// a 4 MiB file of `a` and an `old` of 2 MiB of `a` and one `b` is
/// answered `E_EDIT_NO_MATCH` at once. Before, each of the file's 2 million
/// places was compared with the whole of `old` (4 * 10^12 byte
/// comparisons), and the session, and a signal, waited for minutes (hours
/// at the default caps).
#[test]
fn endpoint19_an_edit_search_is_linear_in_the_file_and_the_old_text() {
    let fx = Fx::new(RW);
    fs::write(fx.path("ws/big.txt"), vec![b'a'; 4 << 20]).unwrap();
    let old = format!("{}b", "a".repeat(2 << 20));
    let edit = line(json!({"op":"edit","path":"big.txt","old":old,"new":"x"}));
    let mut child = Command::new(SANDGATE)
        .args(["tool", "--policy"])
        .arg(fx.policy())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{edit}\n").as_bytes()).unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut first = String::new();
        let _ = BufReader::new(stdout).read_line(&mut first);
        let _ = tx.send(first);
    });
    let answer = rx.recv_timeout(Duration::from_secs(20));
    let _ = child.kill();
    let _ = child.wait();
    let answer = answer.expect("the edit was not answered within 20 s");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(code(&answer), "E_EDIT_NO_MATCH", "{answer}");
    drop(stdin);
}

/// `--pretty` is for a person at a terminal: a file's content, a listed
/// name, a command's output or a refusal's message that holds terminal
/// controls (an escape sequence that sets the clipboard or the title,
/// hides or rewrites what is shown, or reorders it with bidirectional
/// overrides) is shown escaped, never passed to the terminal.
#[test]
fn pretty_output_shows_terminal_controls_escaped() {
    let fx = Fx::new(RW);
    let nasty = "title\u{1b}]0;owned\u{7}clip\u{1b}]52;c;ZXZpbA==\u{7}\r\
                 hidden\u{1b}[8mcsi\u{9b}31mc1\u{202e}txt.exe\u{2066}\u{7f}\n";
    fs::write(fx.path("ws/nasty.txt"), nasty).unwrap();
    fs::write(fx.path("ws/n\u{1b}[2Jame"), "x").unwrap();
    let input = concat!(
        "# heading \u{1b}[2J\n",
        "{\"op\":\"read\",\"path\":\"nasty.txt\"}\n",
        "{\"op\":\"list\",\"path\":\".\"}\n",
        "{\"op\":\"read\",\"path\":\"missing\u{1b}[2J\"}\n",
    );
    let out = run(&["tool", "--pretty", "--policy"], &fx.policy(), input);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for c in text.chars() {
        assert!(
            c == '\n'
                || c == '\t'
                || !(c.is_control()
                    || ('\u{202a}'..='\u{202e}').contains(&c)
                    || ('\u{2066}'..='\u{2069}').contains(&c)),
            "a control {:?} reached the terminal: {text:?}",
            c
        );
    }
    // Shown, escaped, rather than dropped.
    assert!(text.contains("title\\u{1b}]0;owned\\u{7}clip"), "{text}");
    assert!(text.contains("\\u{202e}txt.exe\\u{2066}\\u{7f}"), "{text}");
    assert!(text.contains("n\\u{1b}[2Jame"), "{text}");
    assert!(text.contains("REFUSED E_"), "{text}");
    assert_eq!(text.matches("-> ").count(), 3, "{text}");
}
