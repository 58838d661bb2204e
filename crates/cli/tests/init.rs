//! `sandgate init DIR`: a starter policy that loads and protects what it says.

use std::fs;
use std::process::Command;

fn sandgate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sandgate"))
}

#[test]
fn init_writes_a_policy_beside_the_directory_and_never_replaces_one() {
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    fs::create_dir(&proj).unwrap();
    let out = sandgate().arg("init").arg(&proj).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = tmp.path().join("proj.sandgate.toml");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        written.canonicalize().unwrap().to_str().unwrap()
    );
    let check = sandgate()
        .arg("check")
        .arg("--json")
        .arg(&written)
        .output()
        .unwrap();
    assert!(check.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(summary["mode"], "restricted");
    assert_eq!(summary["exec"]["enabled"], false);
    // The policy protects what it says, through the tool endpoint.
    let mut tool = sandgate()
        .args(["tool", "--policy"])
        .arg(&written)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let stdin = tool.stdin.as_mut().unwrap();
        for p in [
            ".github/workflows/ci.yml",
            "Cargo.lock",
            ".git/config",
            "package-lock.json",
        ] {
            writeln!(stdin, r#"{{"op":"write","path":"{p}","content":"x"}}"#).unwrap();
        }
        writeln!(stdin, r#"{{"op":"write","path":"ok.txt","content":"x"}}"#).unwrap();
    }
    let answers = tool.wait_with_output().unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&answers.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    for a in &lines[..4] {
        assert_eq!(a["error"]["code"], "E_FS_PROTECTED", "{a}");
    }
    assert_eq!(lines[4]["ok"], true);
    // A second init leaves the first policy alone.
    let before = fs::read(&written).unwrap();
    let again = sandgate().arg("init").arg(&proj).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(fs::read(&written).unwrap(), before);
    // Not a directory: refused, nothing written.
    let file = proj.join("ok.txt");
    let bad = sandgate().arg("init").arg(&file).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(!proj.join("ok.txt.sandgate.toml").exists());
}

/// Any UTF-8 directory name is written as a TOML string that reads back
/// as the same path: quotes, backslashes, tabs, line breaks and DEL
/// (which TOML forbids raw in a string, and JSON's escaping leaves raw).
#[test]
fn init_writes_any_utf8_directory_name_as_the_same_root() {
    for name in [
        "del\u{7f}dir",
        "q\"uote\\back",
        "tab\tnl\ncr\r",
        "\u{1}\u{1f}x",
        "é\u{2028}",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let proj = tmp.path().join(name);
        fs::create_dir(&proj).unwrap();
        let out = sandgate()
            .arg("init")
            .arg(&proj)
            .arg("-o")
            .arg(tmp.path().join("p.toml"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let policy = sandgate::policy::Policy::load(tmp.path().join("p.toml")).unwrap();
        let root = proj.canonicalize().unwrap();
        assert_eq!(policy.write_root(), Some(root.as_path()), "{name:?}");
        assert_eq!(policy.read_roots(), [root], "{name:?}");
    }
}

/// A policy is never left half-written at its path: `init` killed while
/// writing (here by SIGXFSZ, past a 1-block file size limit) leaves either
/// no policy there or one that loads whole, and a second `init` works.
#[test]
fn init_killed_while_writing_leaves_no_half_written_policy() {
    let tmp = tempfile::tempdir().unwrap();
    // A long root, written twice: the policy is far over one block.
    let proj = tmp.path().join("a".repeat(200)).join("b".repeat(200));
    fs::create_dir_all(&proj).unwrap();
    let written = tmp
        .path()
        .join("a".repeat(200))
        .join(format!("{}.sandgate.toml", "b".repeat(200)));
    let out = Command::new("/bin/sh")
        .args(["-c", "ulimit -f 1; exec \"$0\" init \"$1\""])
        .arg(env!("CARGO_BIN_EXE_sandgate"))
        .arg(&proj)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the file size limit did not bite");
    if written.exists() {
        let text = fs::read_to_string(&written).unwrap();
        assert!(
            sandgate::policy::Policy::load(&written).is_ok(),
            "a half-written policy of {} bytes was left: {:?}",
            text.len(),
            &text[text.len().saturating_sub(60)..]
        );
    }
    let again = sandgate().arg("init").arg(&proj).output().unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(sandgate::policy::Policy::load(&written).is_ok());
}

/// A starter policy the loader refuses (its directory inside the root, or
/// the root `/`) is reported for the file asked for, with what to change:
/// never the temporary file it was checked in, which is gone by then.
#[test]
fn init_refused_names_the_policy_asked_for_not_its_temporary_file() {
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    fs::create_dir(&proj).unwrap();
    let inside = proj.join("p.toml");
    let out = sandgate()
        .arg("init")
        .arg(&proj)
        .arg("-o")
        .arg(&inside)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains(".sandgate-init."), "{err}");
    assert!(
        err.contains("E_POLICY") && err.contains("fs.write_root"),
        "{err}"
    );
    assert!(err.contains(inside.to_str().unwrap()), "{err}");
    assert!(err.contains("-o FILE"), "{err}");
    assert!(!inside.exists());
    assert_eq!(fs::read_dir(&proj).unwrap().count(), 0, "a file was left");
    // `/` holds every file: no -o could help, and none is suggested.
    let root = sandgate()
        .args(["init", "/", "-o"])
        .arg(tmp.path().join("root.toml"))
        .output()
        .unwrap();
    assert_eq!(root.status.code(), Some(2));
    let err = String::from_utf8_lossy(&root.stderr);
    assert!(
        !err.contains(".sandgate-init.") && !err.contains("-o FILE"),
        "{err}"
    );
    assert!(err.contains("narrower directory"), "{err}");
    assert!(!tmp.path().join("root.toml").exists());
}

/// The starter policy keeps `.git`, `.github` and the host and editor
/// settings directories from the agent; a directory that is one (or lies
/// inside one, in any case) would hand it over whole (`hooks/pre-commit`
/// writable under `sandgate init repo/.git`), so init refuses it, naming
/// the component, and writes nothing.
#[test]
fn init_refuses_a_directory_inside_git_or_github() {
    for inner in [
        ".git",
        ".git/hooks",
        ".GIT",
        ".github",
        ".GitHub/workflows",
        ".vscode",
        ".cursor/rules",
        ".claude",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo").join(inner);
        fs::create_dir_all(&dir).unwrap();
        let policy = tmp.path().join("p.toml");
        let out = sandgate()
            .arg("init")
            .arg(&dir)
            .arg("-o")
            .arg(&policy)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{inner}: {err}");
        let first = inner.split('/').next().unwrap();
        assert!(err.contains(&format!("`{first}`")), "{inner}: {err}");
        assert!(!policy.exists(), "{inner}: a policy was written");
    }
    // A name that only starts like one is an ordinary directory.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".github-templates");
    fs::create_dir(&dir).unwrap();
    let out = sandgate().arg("init").arg(&dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An MCP host's or an editor's project settings name commands the host
/// runs unconfined (`.cursor/mcp.json`, `.mcp.json`, `.vscode/tasks.json`,
/// `.claude/settings.json` hooks): under the starter policy the agent can
/// neither write them nor make them, nor move their directories away.
#[test]
fn init_policy_keeps_host_and_editor_settings_from_the_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    fs::create_dir_all(proj.join(".cursor")).unwrap();
    fs::write(proj.join(".cursor/mcp.json"), "{}").unwrap();
    let out = sandgate().arg("init").arg(&proj).output().unwrap();
    assert!(out.status.success());
    let policy = tmp.path().join("proj.sandgate.toml");
    let mut tool = sandgate()
        .args(["tool", "--policy"])
        .arg(&policy)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let refused = [
        r#"{"op":"write","path":".cursor/mcp.json","content":"x","overwrite":true}"#,
        r#"{"op":"write","path":".mcp.json","content":"x"}"#,
        r#"{"op":"mkdir","path":".vscode"}"#,
        r#"{"op":"write","path":".vscode/tasks.json","content":"x"}"#,
        r#"{"op":"write","path":".claude/settings.json","content":"x"}"#,
        r#"{"op":"write","path":".claude/settings.local.json","content":"x"}"#,
        r#"{"op":"rename","from":".cursor","to":"c"}"#,
    ];
    {
        use std::io::Write;
        let stdin = tool.stdin.as_mut().unwrap();
        for r in refused {
            writeln!(stdin, "{r}").unwrap();
        }
        writeln!(
            stdin,
            r#"{{"op":"write","path":"notes.json","content":"x"}}"#
        )
        .unwrap();
    }
    let answers = tool.wait_with_output().unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&answers.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), refused.len() + 1);
    for (r, a) in refused.iter().zip(&lines) {
        assert_eq!(a["error"]["code"], "E_FS_PROTECTED", "{r}: {a}");
    }
    assert_eq!(lines[refused.len()]["ok"], true, "{}", lines[refused.len()]);
    assert_eq!(fs::read(proj.join(".cursor/mcp.json")).unwrap(), b"{}");
}

/// When the policy cannot go beside the directory (here its name is too
/// long once `.sandgate.toml` is added), the refusal says where it tried and how to choose another
/// place, and that place works.
#[test]
fn init_that_cannot_write_beside_the_directory_says_to_choose_with_o() {
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("n".repeat(250));
    fs::create_dir(&proj).unwrap();
    let out = sandgate().arg("init").arg(&proj).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(".sandgate.toml") && err.contains("-o FILE"),
        "{err}"
    );
    let elsewhere = tmp.path().join("p.toml");
    let out = sandgate()
        .arg("init")
        .arg(&proj)
        .arg("-o")
        .arg(&elsewhere)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(sandgate::policy::Policy::load(&elsewhere).is_ok());
}

/// Without `HOME` in the environment the home is still known (the user
/// database's entry for this user) and still refused.
#[test]
fn init_refuses_the_home_directory_when_home_is_unset() {
    let uid = rustix::process::geteuid().as_raw().to_string();
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    let Some(home) = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 5 && f[2] == uid).then(|| std::path::PathBuf::from(f[5]))
    }) else {
        eprintln!("note: skipped: no /etc/passwd entry for uid {uid}");
        return;
    };
    if !home.is_dir() || home == std::path::Path::new("/") {
        eprintln!(
            "note: skipped: the home {} is not a directory of its own",
            home.display()
        );
        return;
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let policy = elsewhere.path().join("p.toml");
    let out = sandgate()
        .arg("init")
        .arg(&home)
        .arg("-o")
        .arg(&policy)
        .env_remove("HOME")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}: {err}", home.display());
    assert!(err.contains("home directory"), "{err}");
    assert!(
        !policy.exists(),
        "a policy was written for {}",
        home.display()
    );
}

/// A home directory (or one holding it, or `/`) as the root would hand the
/// agent `~/.bashrc`, `~/.profile`, `~/.ssh/` and `~/.config/`, which the
/// user's own shell and tools run unconfined: init refuses it, saying to
/// grant the project directory instead, and writes nothing. A directory
/// inside the home is granted as before.
#[test]
fn init_refuses_the_home_directory_and_what_holds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("users/me");
    fs::create_dir_all(home.join("project")).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    for (i, dir) in [
        home.clone(),
        home.join("project/.."),
        tmp.path().join("users"),
        std::path::PathBuf::from("/"),
    ]
    .iter()
    .enumerate()
    {
        let policy = elsewhere.path().join(format!("p{i}.toml"));
        let out = sandgate()
            .arg("init")
            .arg(dir)
            .arg("-o")
            .arg(&policy)
            .env("HOME", &home)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", dir.display());
        assert!(err.contains("home directory"), "{}: {err}", dir.display());
        assert!(!policy.exists(), "{}: a policy was written", dir.display());
    }
    let out = sandgate()
        .arg("init")
        .arg(home.join("project"))
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The path `init` prints (on stdout, and in its message on stderr) is
/// shown escaped: a directory or output name holding a line break, an
/// escape sequence or bytes that are not UTF-8 never reaches the terminal
/// (or a script reading the one line) as is. Before, `init` printed
/// `out.display()` raw: ESC `]0;…BEL` set the terminal's title, a line
/// feed split the one path into two lines, and a stray byte was shown as
/// U+FFFD, a real name of its own.
#[test]
fn cli22_init_prints_the_path_it_wrote_escaped() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&[u8], &[u8]); 3] = [
        (b"a\nb", b"a\\u{a}b"),
        (b"e\x1b]0;owned\x07x", b"e\\u{1b}]0;owned\\u{7}x"),
        (b"bidi\xe2\x80\xaeevil", b"bidi\\u{202e}evil"),
    ];
    for (name, escaped) in cases {
        let proj = tmp.path().join(std::ffi::OsStr::from_bytes(name));
        fs::create_dir(&proj).unwrap();
        let out = sandgate().arg("init").arg(&proj).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let written = tmp.path().canonicalize().unwrap();
        let mut expect = written.as_os_str().as_bytes().to_vec();
        expect.push(b'/');
        expect.extend_from_slice(escaped);
        expect.extend_from_slice(b".sandgate.toml\n");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&expect)
        );
        for stream in [&out.stdout, &out.stderr] {
            assert!(
                !stream.iter().any(|b| *b == 0x1b || *b == 0x07)
                    && !stream.windows(3).any(|w| w == b"\xe2\x80\xae"),
                "{}",
                String::from_utf8_lossy(stream)
            );
        }
        // The policy itself is where the name says, unescaped.
        let mut policy = proj.as_os_str().as_bytes().to_vec();
        policy.extend_from_slice(b".sandgate.toml");
        assert!(std::path::Path::new(std::ffi::OsStr::from_bytes(&policy)).is_file());
    }
    // An output name that is not UTF-8: each stray byte as `\xNN`.
    let proj = tmp.path().join("plain");
    fs::create_dir(&proj).unwrap();
    let target = tmp.path().join(std::ffi::OsStr::from_bytes(b"p\xff.toml"));
    let out = sandgate()
        .arg("init")
        .arg(&proj)
        .arg("-o")
        .arg(&target)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.ends_with("/p\\xff.toml\n"), "{stdout}");
    assert!(target.is_file());
    // Refusals name the path escaped too.
    let again = sandgate()
        .arg("init")
        .arg(&proj)
        .arg("-o")
        .arg(&target)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8(again.stderr).unwrap();
    assert!(
        err.contains("p\\xff.toml") && err.contains("exists"),
        "{err}"
    );
}

/// `init` doubles a literal backslash in the path it prints and names in
/// its refusals, so that an output file named with the four characters
/// `\xff` is not shown as one named with the byte 0xFF, nor one named with
/// the text `\u{1b}` as one holding the escape character.
#[test]
fn shown23_init_shows_a_backslash_doubled() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("plain");
    fs::create_dir(&proj).unwrap();
    let init = |name: &[u8]| {
        let target = tmp.path().join(std::ffi::OsStr::from_bytes(name));
        let out = sandgate()
            .arg("init")
            .arg(&proj)
            .arg("-o")
            .arg(&target)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(target.is_file());
        // Again: refused, the file exists.
        let again = sandgate()
            .arg("init")
            .arg(&proj)
            .arg("-o")
            .arg(&target)
            .output()
            .unwrap();
        assert_eq!(again.status.code(), Some(2));
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(again.stderr).unwrap(),
        )
    };
    for (byte, text, shown_byte, shown_text) in [
        (
            &b"p\xff.toml"[..],
            &b"p\\xff.toml"[..],
            "/p\\xff.toml",
            "/p\\\\xff.toml",
        ),
        (
            &b"q\x1b.toml"[..],
            &b"q\\u{1b}.toml"[..],
            "/q\\u{1b}.toml",
            "/q\\\\u{1b}.toml",
        ),
    ] {
        let (byte, text) = (init(byte), init(text));
        assert_ne!(byte.0, text.0, "two files, one name");
        assert_ne!(byte.1, text.1, "two files, one refusal");
        assert!(byte.0.ends_with(&format!("{shown_byte}\n")), "{}", byte.0);
        assert!(text.0.ends_with(&format!("{shown_text}\n")), "{}", text.0);
        assert!(
            byte.1.contains(shown_byte) && byte.1.contains("exists"),
            "{}",
            byte.1
        );
        assert!(
            text.1.contains(shown_text) && text.1.contains("exists"),
            "{}",
            text.1
        );
    }
}
