//! The `sandgate` command line given an output it cannot write: a full
//! disk (`/dev/full`) is an error the exit code says, where a reader that
//! went away (`| head -c1`) is not.

use std::fs;
use std::process::{Command, Output, Stdio};

const SANDGATE: &str = env!("CARGO_BIN_EXE_sandgate");

fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("ws")).unwrap();
    fs::write(tmp.path().join("ws/a.txt"), "hello\n").unwrap();
    fs::write(
        tmp.path().join("policy.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n",
    )
    .unwrap();
    tmp
}

fn run(dir: &std::path::Path, args: &[&str], stdout: Stdio) -> Output {
    Command::new(SANDGATE)
        .args(args)
        .current_dir(dir)
        .env_remove("SANDGATE_POLICY")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn dev_full() -> Stdio {
    Stdio::from(
        fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    )
}

fn closed_pipe() -> Stdio {
    let (read, write) = rustix::pipe::pipe().unwrap();
    drop(read);
    Stdio::from(write)
}

/// Every command that prints an answer, and the exit code that says its
/// answer was lost on a full disk: explain's 0 and 1 are its answers, so
/// it says 2 (it could not answer), the rest 1.
const PRINTERS: &[(&[&str], i32)] = &[
    (&["check", "policy.toml"], 1),
    (&["check", "--json", "policy.toml"], 1),
    (&["explain", "policy.toml", "a.txt"], 2),
    (&["explain", "--json", "policy.toml", "a.txt"], 2),
    (&["explain", "policy.toml", "../a.txt"], 2),
    (&["--help"], 1),
    (&["--version"], 1),
    (&["check", "--help"], 1),
    (&["help", "explain"], 1),
    (&["init", "ws", "-o", "new.toml"], 1),
];

/// `sandgate check P > /dev/full` exited 0 with the summary lost, and so
/// did `explain` (0: "allowed", with no answer written), `--help`,
/// `--version` and `init` (its path never printed); `completions` and `man`
/// already said `writing stdout` and exited 1.
#[test]
fn cli26_a_full_stdout_is_an_error_naming_it() {
    let fx = fixture();
    let mut problems = Vec::new();
    for (args, code) in PRINTERS {
        let _ = fs::remove_file(fx.path().join("new.toml"));
        let out = run(fx.path(), args, dev_full());
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(*code)
            || !err.contains("sandgate: writing stdout: No space left on device")
            || err.contains("panicked")
        {
            problems.push(format!("{args:?}: exit {:?}: {err}", out.status.code()));
        }
    }
    // init's policy was written whole even so, and stderr says where.
    assert!(fs::read_to_string(fx.path().join("new.toml"))
        .unwrap()
        .contains("write_root"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A reader that went away (`sandgate … | head -c1`) is not an error: the
/// answer's own exit code stands, nothing panics and nothing is said.
#[test]
fn cli26_a_closed_stdout_keeps_the_answers_exit_code() {
    let fx = fixture();
    let mut problems = Vec::new();
    let answers: &[(&[&str], i32)] = &[
        (&["check", "policy.toml"], 0),
        (&["explain", "--as", "read", "policy.toml", "a.txt"], 0),
        (&["explain", "policy.toml", "../a.txt"], 1),
        (&["--help"], 0),
        (&["--version"], 0),
        (&["help", "explain"], 0),
        (&["init", "ws", "-o", "new.toml"], 0),
    ];
    for (args, code) in answers {
        let _ = fs::remove_file(fx.path().join("new.toml"));
        let out = run(fx.path(), args, closed_pipe());
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(*code) || err.contains("panicked") || err.contains("writing") {
            problems.push(format!("{args:?}: exit {:?}: {err}", out.status.code()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `explain`'s POLICY, given before the target, may be any file name, as
/// `--policy` and `check`'s POLICY may (before, a name that is not UTF-8
/// was refused by the argument parser: "invalid UTF-8 was detected in one
/// or more arguments", not saying which); a target that is not UTF-8,
/// which no agent can name, is refused naming it as its bytes.
#[test]
fn cli26_explain_takes_any_policy_name_and_names_a_target_not_utf8() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fx = fixture();
    let odd = OsStr::from_bytes(b"p\xff.toml");
    fs::copy(fx.path().join("policy.toml"), fx.path().join(odd)).unwrap();
    let explain = |words: &[&OsStr]| {
        Command::new(SANDGATE)
            .arg("explain")
            .args(["--as", "read"])
            .args(words)
            .current_dir(fx.path())
            .env_remove("SANDGATE_POLICY")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = explain(&[odd, OsStr::new("a.txt")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("read a.txt: allowed"));

    let out = explain(&[OsStr::new("policy.toml"), OsStr::from_bytes(b"a\xff.txt")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(r"the target a\xff.txt is not UTF-8"), "{err}");
    assert!(out.stdout.is_empty());
}

/// `mcp` does not read SANDGATE_POLICY (a variable left in an MCP host's
/// environment must not pick what is served), and says so when it was
/// the only policy given, where before the refusal left a user of the
/// other subcommands guessing why the variable went unread.
#[test]
fn cli26_mcp_says_it_does_not_read_sandgate_policy() {
    let fx = fixture();
    let out = Command::new(SANDGATE)
        .arg("mcp")
        .current_dir(fx.path())
        .env("SANDGATE_POLICY", "policy.toml")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("mcp takes either --policy FILE or one or more directories")
            && err.contains("mcp does not read SANDGATE_POLICY"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // The help says which subcommands read it.
    let help = Command::new(SANDGATE).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("mcp only as --policy POLICY"), "{help}");
}

/// `init -o DIR` and `init -o DIR/` are refused as a directory, naming
/// it, and write nothing anywhere (before, both said `File exists`, and
/// the trailing slash made the temporary file beside DIR, not in it).
#[test]
fn cli26_init_output_naming_a_directory_is_refused_as_one() {
    let fx = fixture();
    fs::create_dir(fx.path().join("out")).unwrap();
    let before: Vec<_> = fs::read_dir(fx.path()).unwrap().collect();
    for o in ["out", "out/", "ws/"] {
        let out = Command::new(SANDGATE)
            .args(["init", "ws", "-o", o])
            .current_dir(fx.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{o}: {err}");
        assert!(
            err.contains(&format!(
                "sandgate: {o}: a directory; give the policy file's own name"
            )),
            "{o}: {err}"
        );
        assert!(out.stdout.is_empty(), "{o}");
    }
    assert_eq!(fs::read_dir(fx.path()).unwrap().count(), before.len());
    assert_eq!(fs::read_dir(fx.path().join("out")).unwrap().count(), 0);
    assert_eq!(fs::read_dir(fx.path().join("ws")).unwrap().count(), 1);
}

/// A policy file over the size cap is refused naming it, as a missing,
/// unreadable or irregular one is (before: "the policy file is over
/// 1048576 bytes", naming no file, the one refusal of the policy file's
/// that did not).
#[test]
fn cli26_a_huge_policy_is_refused_naming_it() {
    let fx = fixture();
    let mut huge = b"[fs]\nread_roots = [\"ws\"]\n".to_vec();
    huge.resize(2 * 1024 * 1024, b'#');
    fs::write(fx.path().join("huge.toml"), &huge).unwrap();
    for args in [
        &["check", "huge.toml"][..],
        &["explain", "huge.toml", "a.txt"],
    ] {
        let out = run(fx.path(), args, Stdio::piped());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("the policy file `huge.toml` is over 1048576 bytes"),
            "{args:?}: {err}"
        );
    }
}

/// `sandgate exec -- CMD > /dev/full` lost the command's output with no
/// word of it; it now says so on stderr and keeps the command's exit code
/// (its own 1 or 2 could not be told from sandgate's). A reader that went
/// away is said nothing of.
#[test]
fn cli26_exec_says_a_lost_output_and_keeps_the_commands_code() {
    let fx = fixture();
    fs::write(
        fx.path().join("exec.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\n[exec]\nenabled = true\nconfine = \"off\"\n",
    )
    .unwrap();
    let args = ["exec", "--policy", "exec.toml", "--", "echo hi; exit 3"];
    let out = run(fx.path(), &args, dev_full());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("sandgate: writing stdout: No space left on device")
            && err.contains("the command's output is lost"),
        "{err}"
    );
    let out = run(fx.path(), &args, closed_pipe());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(!err.contains("writing stdout"), "{err}");
}
