//! Confined git through the tool endpoint, as production runs it: a policy
//! with `process_allow` and the shell disabled, `{"op":"exec",…}` requests,
//! a real git, real repositories built here, and the real kernel.
//!
//! Every hostile program below announces itself on stderr (git passes a
//! driver's stderr through) and tries to leave a file behind, so a test
//! tells "never ran" from "ran but was contained". Each hostile fixture is
//! first run by plain git, which does run the program: the fixtures really
//! are hostile.
//!
//! The tests also pass as an unprivileged user: everything they create is
//! under a fresh temporary directory owned by whoever runs them.

use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sandgate::policy::Policy;
use sandgate::ToolSession;
use serde_json::{json, Value};

const GIT: &str = "/usr/bin/git";

fn have_git() -> bool {
    if Path::new(GIT).exists() {
        true
    } else {
        eprintln!("note: no {GIT}; skipped");
        false
    }
}

/// Plain git for building fixtures and for the controls: no host config,
/// a fixed identity, none of the confined hardening.
fn raw_git(dir: &Path, args: &[&str]) -> Output {
    Command::new(GIT)
        .args([
            "-c",
            "user.name=Fixture",
            "-c",
            "user.email=fixture@example.invalid",
            "-c",
            "commit.gpgSign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .current_dir(dir)
        .output()
        .unwrap()
}

fn fixture_git(dir: &Path, args: &[&str]) {
    let out = raw_git(dir, args);
    assert!(
        out.status.success(),
        "fixture git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A temporary directory holding `policy.toml` and the write root `ws`.
struct Workspace {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
}

impl Workspace {
    fn new() -> Workspace {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let ws = base.join("ws");
        fs::create_dir(&ws).unwrap();
        Workspace {
            _tmp: tmp,
            base,
            ws,
        }
    }

    /// A tool session whose policy grants confined git (all three
    /// subcommands) and not the shell; `net` is extra `[net]` text.
    fn session(&self, net: &str) -> ToolSession {
        let path = self.base.join("policy.toml");
        fs::write(
            &path,
            format!(
                "[fs]\nwrite_root = \"ws\"\n[exec]\nenabled = false\n\
                 process_allow = [\"git:status\", \"git:diff\", \"git:log\"]\n{net}"
            ),
        )
        .unwrap();
        ToolSession::from_policy(&Policy::load(&path).unwrap()).unwrap()
    }

    /// A repository at `dir` with `f.txt` committed.
    fn repo(&self, dir: &Path) {
        fs::create_dir_all(dir).unwrap();
        fixture_git(dir, &["init", "-q", "."]);
        fs::write(dir.join("f.txt"), "one\n").unwrap();
        fixture_git(dir, &["add", "f.txt"]);
        fixture_git(dir, &["commit", "-q", "-m", "first"]);
    }
}

/// Sends `request` and returns the answer.
fn call(session: &ToolSession, request: Value) -> Value {
    session.handle_line(&request.to_string())
}

fn stderr_of(answer: &Value) -> &str {
    answer["stderr"].as_str().unwrap_or_default()
}

/// The answer of a run that must have succeeded, with its exit code 0.
fn ran(answer: &Value) -> &Value {
    assert_eq!(answer["ok"], json!(true), "{answer}");
    assert_eq!(answer["exit_code"], json!(0), "{answer}");
    answer
}

/// Appends `[filter "<name>"]` with `clean = <command>` to a config file,
/// the name as raw bytes.
fn append_filter(config: &Path, name: &[u8], command: &str) {
    let mut text = b"[filter \"".to_vec();
    text.extend_from_slice(name);
    text.extend_from_slice(format!("\"]\n\tclean = \"{command}\"\n").as_bytes());
    fs::OpenOptions::new()
        .append(true)
        .open(config)
        .unwrap()
        .write_all(&text)
        .unwrap();
}

/// A filter driver whose name is not UTF-8 is neutralized by its exact
/// bytes: it never runs.
#[test]
fn a_filter_named_by_invalid_utf8_never_runs() {
    if !have_git() {
        return;
    }
    let w = Workspace::new();
    w.repo(&w.ws);
    let ran_file = w.ws.join("filter_ran");
    append_filter(
        &w.ws.join(".git/config"),
        b"\xff",
        &format!("echo FILTER-RAN >&2; id > {}; cat", ran_file.display()),
    );
    fs::write(w.ws.join(".gitattributes"), b"f.txt filter=\xff\n").unwrap();
    fs::write(w.ws.join("f.txt"), "two, longer\n").unwrap();

    // Control: plain git runs the driver.
    raw_git(&w.ws, &["diff", "--stat"]);
    assert!(ran_file.exists(), "the fixture's filter does not run");
    fs::remove_file(&ran_file).unwrap();

    let s = w.session("");
    for command in ["git diff --stat", "git status --short", "git diff"] {
        let answer = call(&s, json!({"op": "exec", "command": command}));
        ran(&answer);
        assert!(
            !stderr_of(&answer).contains("FILTER-RAN"),
            "{command} ran the filter: {answer}"
        );
        assert!(!ran_file.exists(), "{command} ran the filter: {answer}");
        assert!(
            answer["stdout"].as_str().unwrap().contains("f.txt"),
            "{answer}"
        );
    }
}

/// A driver name git's `-c` cannot express byte for byte refuses the
/// repository, naming the driver.
#[test]
fn a_filter_name_that_cannot_be_overridden_refuses_the_repository() {
    if !have_git() {
        return;
    }
    let w = Workspace::new();
    w.repo(&w.ws);
    append_filter(&w.ws.join(".git/config"), b"a=\xff", "cat");
    let answer = call(
        &w.session(""),
        json!({"op": "exec", "command": "git diff --stat"}),
    );
    assert_eq!(answer["ok"], json!(false), "{answer}");
    assert_eq!(answer["error"]["code"], json!("E_DENIED"), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("`a=\\xff`"), "{message}");
    assert!(message.contains("byte for byte"), "{message}");
}

/// A `cwd` inside a nested repository does not make git use that
/// repository: git stays on the vetted one at the root.
#[test]
fn a_nested_repository_is_never_used() {
    if !have_git() {
        return;
    }
    let w = Workspace::new();
    w.repo(&w.ws);
    let sub = w.ws.join("sub");
    w.repo(&sub);
    let ran_file = w.ws.join("nested_ran");
    append_filter(
        &sub.join(".git/config"),
        b"evil",
        &format!("echo FILTER-RAN >&2; id > {}; cat", ran_file.display()),
    );
    fs::create_dir_all(sub.join(".git/info")).unwrap();
    fs::write(sub.join(".git/info/attributes"), "* filter=evil\n").unwrap();
    // Both work trees have a modified f.txt, so whichever index git uses
    // has a file to clean: same size and an old mtime, so that even
    // `git status` must read it (through the clean filter) to compare.
    modify_same_size(&w.ws.join("f.txt"));
    modify_same_size(&sub.join("f.txt"));

    // Control: plain git, started in `sub`, uses the nested repository and
    // runs its filter.
    raw_git(&sub, &["status", "--short"]);
    assert!(
        ran_file.exists(),
        "the nested repository's filter does not run"
    );
    fs::remove_file(&ran_file).unwrap();

    let s = w.session("");
    for command in ["git status", "git status --short", "git diff --stat"] {
        let answer = call(&s, json!({"op": "exec", "command": command, "cwd": "sub"}));
        ran(&answer);
        assert!(
            !stderr_of(&answer).contains("FILTER-RAN"),
            "{command} ran the nested filter: {answer}"
        );
        assert!(!ran_file.exists(), "{command} ran the nested filter");
    }
    // It is the root's repository that answers: its f.txt is modified, and
    // the nested repository is an untracked directory of it.
    let answer = call(
        &s,
        json!({"op": "exec", "command": "git status --short", "cwd": "sub"}),
    );
    let out = ran(&answer)["stdout"].as_str().unwrap();
    assert!(out.contains(" M ../f.txt"), "{out}");
    assert!(out.contains("?? ./"), "{out}");
}

/// Rewrites a committed `one\n` as `two\n` with an mtime in 2001.
fn modify_same_size(path: &Path) {
    fs::write(path, "two\n").unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(old)
        .unwrap();
}

/// Without a repository at the root, a nested one is still not used.
#[test]
fn a_nested_repository_under_a_root_without_one_is_never_used() {
    if !have_git() {
        return;
    }
    let w = Workspace::new();
    let sub = w.ws.join("sub");
    w.repo(&sub);
    let ran_file = w.ws.join("nested_ran");
    append_filter(
        &sub.join(".git/config"),
        b"evil",
        &format!("echo FILTER-RAN >&2; id > {}; cat", ran_file.display()),
    );
    fs::create_dir_all(sub.join(".git/info")).unwrap();
    fs::write(sub.join(".git/info/attributes"), "* filter=evil\n").unwrap();
    modify_same_size(&sub.join("f.txt"));

    let s = w.session("");
    for command in ["git status", "git log --oneline"] {
        let answer = call(&s, json!({"op": "exec", "command": command, "cwd": "sub"}));
        assert_eq!(answer["ok"], json!(true), "{answer}");
        assert_ne!(answer["exit_code"], json!(0), "{answer}");
        assert!(
            stderr_of(&answer).contains("not a git repository"),
            "{answer}"
        );
        assert!(!stderr_of(&answer).contains("FILTER-RAN"), "{answer}");
        assert_eq!(answer["stdout"], json!(""), "{answer}");
    }
    assert!(!ran_file.exists());
    let answer = call(
        &s,
        json!({"op": "exec", "command": "git diff", "cwd": "sub"}),
    );
    assert_eq!(answer["error"]["code"], json!("E_DENIED"), "{answer}");
}

/// A `.git` that is a `gitdir:` file naming a repository outside the root
/// is refused, as is one naming a git directory inside it.
#[test]
fn a_gitfile_at_the_root_is_refused() {
    if !have_git() {
        return;
    }
    let w = Workspace::new();
    let outside = w.base.join("outside");
    w.repo(&outside);
    let ran_file = w.base.join("outside_ran");
    append_filter(
        &outside.join(".git/config"),
        b"evil",
        &format!("id > {}; cat", ran_file.display()),
    );
    fs::write(outside.join(".gitattributes"), "* filter=evil\n").unwrap();
    fs::write(w.ws.join("f.txt"), "two\n").unwrap();
    fs::write(
        w.ws.join(".git"),
        format!("gitdir: {}\n", outside.join(".git").display()),
    )
    .unwrap();
    let s = w.session("");
    for command in ["git status", "git diff", "git log"] {
        let answer = call(&s, json!({"op": "exec", "command": command}));
        assert_eq!(answer["ok"], json!(false), "{answer}");
        assert_eq!(answer["error"]["code"], json!("E_DENIED"), "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("gitdir:"), "{message}");
        assert!(!message.contains(&*w.base.to_string_lossy()), "{message}");
    }
    assert!(!ran_file.exists());

    // Inside the root too: only <root>/.git itself is vetted.
    fs::remove_file(w.ws.join(".git")).unwrap();
    w.repo(&w.ws.join("inner"));
    fs::write(w.ws.join(".git"), "gitdir: inner/.git\n").unwrap();
    let answer = call(&s, json!({"op": "exec", "command": "git status"}));
    assert_eq!(answer["error"]["code"], json!("E_DENIED"), "{answer}");
}

/// A FIFO or a symbolic link as `.git/config` is refused: the vetting would
/// read something other than what git reads (or block).
#[test]
fn a_config_that_is_not_a_regular_file_is_refused() {
    if !have_git() {
        return;
    }
    let w = Workspace::new();
    w.repo(&w.ws);
    let config = w.ws.join(".git/config");
    let real = w.base.join("real-config");
    fs::rename(&config, &real).unwrap();
    std::os::unix::fs::symlink(&real, &config).unwrap();
    let s = w.session("");
    let answer = call(&s, json!({"op": "exec", "command": "git status"}));
    assert_eq!(answer["error"]["code"], json!("E_DENIED"), "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a symbolic link"),
        "{answer}"
    );
    fs::remove_file(&config).unwrap();
    mkfifo(&config);
    let answer = call(&s, json!({"op": "exec", "command": "git status"}));
    assert_eq!(answer["error"]["code"], json!("E_DENIED"), "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a FIFO"),
        "{answer}"
    );
}

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(st.success());
}

/// status, diff and log work under git's read-only ruleset, and the report
/// says which ruleset was in force.
#[test]
fn status_diff_and_log_work_read_only() {
    if !have_git() {
        return;
    }
    let w = Workspace::new();
    w.repo(&w.ws);
    fs::write(w.ws.join("f.txt"), "two\n").unwrap();
    fs::write(w.ws.join("new.txt"), "new\n").unwrap();
    let s = w.session("");
    let index = fs::read(w.ws.join(".git/index")).unwrap();
    let answer = call(&s, json!({"op": "exec", "command": "git status --short"}));
    let out = ran(&answer)["stdout"].as_str().unwrap();
    assert!(
        out.contains(" M f.txt") && out.contains("?? new.txt"),
        "{out}"
    );
    let answer = call(&s, json!({"op": "exec", "command": "git diff"}));
    assert!(ran(&answer)["stdout"].as_str().unwrap().contains("+two"));
    let answer = call(&s, json!({"op": "exec", "command": "git log --oneline"}));
    assert!(ran(&answer)["stdout"].as_str().unwrap().contains("first"));
    let answer = call(&s, json!({"op": "exec", "command": "git log -p -1 --stat"}));
    assert!(ran(&answer)["stdout"].as_str().unwrap().contains("+one"));
    let notes = answer["confined"]["notes"].to_string();
    assert!(notes.contains("ruleset of its own"), "{answer}");
    if answer["confined"]["landlock_abi"].is_null() {
        eprintln!("note: no Landlock here; the read-only ruleset is not in force");
    } else {
        assert_eq!(answer["confined"]["fs"], json!(true), "{answer}");
    }
    // Nothing was written: no lock, no refreshed index.
    assert_eq!(fs::read(w.ws.join(".git/index")).unwrap(), index);
    assert!(!w.ws.join(".git/index.lock").exists());
}

/// Serves `.git/HEAD` from a FIFO: every time git opens it, the thread
/// first (once) swaps in a rewritten config, then answers the ref. So the
/// config git reads is not the one that was vetted — deterministically,
/// since git opens HEAD only after the vetting and before reading config.
struct HeadServer {
    stop: Arc<AtomicBool>,
    head: PathBuf,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl HeadServer {
    fn start(git_dir: &Path, rewritten: Vec<u8>) -> HeadServer {
        let head = git_dir.join("HEAD");
        let content = fs::read(&head).unwrap();
        fs::remove_file(&head).unwrap();
        mkfifo(&head);
        let config = git_dir.join("config");
        let staged = git_dir.join("config.rewritten");
        fs::write(&staged, rewritten).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, head) = (stop.clone(), head.clone());
            std::thread::spawn(move || {
                let mut served = 0;
                loop {
                    // Blocks until a reader opens the FIFO.
                    let Ok(mut fifo) = fs::OpenOptions::new().write(true).open(&head) else {
                        break;
                    };
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if served == 0 {
                        fs::rename(&staged, &config).unwrap();
                    }
                    let _ = fifo.write_all(&content);
                    served += 1;
                }
                served
            })
        };
        HeadServer {
            stop,
            head,
            thread: Some(thread),
        }
    }

    /// Stops the thread; returns how many opens of HEAD it served.
    fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        // A reader that does not block releases the thread's pending open.
        let _unblock = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.head)
            .unwrap();
        self.thread.take().unwrap().join().unwrap()
    }
}

/// The driver script: announces itself, then tries to write into the
/// write root and outside it, and to connect to `port`.
fn driver(w: &Workspace, port: u16) -> PathBuf {
    let script = w.ws.join(".git/driver.sh");
    fs::write(
        &script,
        format!(
            "echo DRIVER-RAN >&2\n\
             if (echo x > '{root}/pwned') 2>/dev/null; then echo WROTE-ROOT >&2; fi\n\
             if (echo x > '{base}/pwned') 2>/dev/null; then echo WROTE-OUTSIDE >&2; fi\n\
             if /bin/bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>/dev/null; \
             then echo CONNECTED >&2; else echo NO-CONNECT >&2; fi\n\
             python3 -c 'import errno, socket, sys\n\
             try:\n    socket.socket().bind((\"127.0.0.1\", 0)); print(\"BOUND\", file=sys.stderr)\n\
             except OSError as e:\n    print(\"NO-BIND\", errno.errorcode[e.errno], file=sys.stderr)'\n\
             cat\n",
            root = w.ws.display(),
            base = w.base.display(),
        ),
    )
    .unwrap();
    script
}

/// A config rewritten between the vetting and git's own read (as a
/// concurrent command could) names a driver the vetting never saw; git
/// reads a private copy of what was vetted, so the driver never runs.
/// Timed by serving `.git/HEAD` from a FIFO (the rewrite happened every
/// time git opened HEAD), the request is now refused: the FIFO cannot be
/// copied. Swapped over and over while requests run, the rewritten config
/// never reaches git. (That git's ruleset holds a driver it was handed
/// anyway is `a_driver_git_is_handed_can_neither_write_nor_connect` in the
/// executor's tests.)
#[test]
fn a_config_rewritten_after_the_vetting_is_never_read() {
    if !have_git() {
        return;
    }
    let w = Workspace::new();
    w.repo(&w.ws);
    fs::write(w.ws.join(".gitattributes"), "f.txt filter=late\n").unwrap();
    fs::write(w.ws.join("f.txt"), "two, longer\n").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = driver(&w, port);
    let git_dir = w.ws.join(".git");
    let mut rewritten = fs::read(git_dir.join("config")).unwrap();
    rewritten.extend_from_slice(
        format!("[filter \"late\"]\n\tclean = sh {}\n", script.display()).as_bytes(),
    );

    // Control: unconfined, the driver writes, connects and binds.
    let out = Command::new("sh").arg(&script).output().unwrap();
    let control = String::from_utf8_lossy(&out.stderr);
    assert!(
        control.contains("WROTE-ROOT")
            && control.contains("CONNECTED")
            && control.contains("BOUND"),
        "{control}"
    );
    assert!(listener.accept().is_ok());
    fs::remove_file(w.ws.join("pwned")).unwrap();
    fs::remove_file(w.base.join("pwned")).unwrap();

    let s = w.session(&format!("[net]\nallow = [\"127.0.0.1:{port}\"]\n"));
    let vetted = fs::read(git_dir.join("config")).unwrap();
    let never_ran = |command: &str, answer: &Value| {
        let stderr = stderr_of(answer);
        assert!(!stderr.contains("DRIVER-RAN"), "{command}: {answer}");
        assert!(!w.ws.join("pwned").exists(), "{command}: {answer}");
        assert!(!w.base.join("pwned").exists(), "{command}: {answer}");
        assert!(listener.accept().is_err(), "{command} connected out");
    };
    for command in ["git diff --stat", "git diff"] {
        let server = HeadServer::start(&git_dir, rewritten.clone());
        let answer = call(
            &s,
            json!({"op": "exec", "command": command, "timeout_ms": 20000}),
        );
        server.finish();
        never_ran(command, &answer);
        assert_eq!(answer["error"]["code"], json!("E_DENIED"), "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains(".git/HEAD is a FIFO"),
            "{answer}"
        );
        // Restore HEAD and the vetted config for the next round.
        fs::remove_file(git_dir.join("HEAD")).unwrap();
        fs::write(git_dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(git_dir.join("config"), &vetted).unwrap();
    }

    // Swapped over and over: before git read a private copy, about one
    // run in five read the rewritten config.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, config) = (stop.clone(), git_dir.join("config"));
        let (vetted, rewritten) = (vetted.clone(), rewritten.clone());
        std::thread::spawn(move || {
            let staged = config.with_extension("swap");
            while !stop.load(Ordering::SeqCst) {
                for bytes in [&vetted, &rewritten] {
                    fs::write(&staged, bytes).unwrap();
                    fs::rename(&staged, &config).unwrap();
                }
            }
        })
    };
    let mut admitted = 0;
    for _ in 0..60 {
        let answer = call(
            &s,
            json!({"op": "exec", "command": "git diff --stat", "timeout_ms": 20000}),
        );
        if answer["ok"] == json!(true) {
            admitted += 1;
        }
        never_ran("git diff --stat", &answer);
    }
    stop.store(true, Ordering::SeqCst);
    swapper.join().unwrap();
    assert!(admitted > 0);
}

/// Confined git narrowed to a client's roots (`ExecOptions::within`, as the
/// MCP server narrows it): with the repository's root among them it runs;
/// narrowed to a subdirectory it could not read the repository, and is
/// refused saying so rather than run into git's "not a git repository".
#[test]
fn narrowed_git_runs_on_the_root_and_is_refused_beneath_it() {
    if !have_git() {
        return;
    }
    let w = Workspace::new();
    w.repo(&w.ws);
    fs::create_dir(w.ws.join("sub")).unwrap();
    let _ = w.session("");
    let policy = Policy::load(w.base.join("policy.toml")).unwrap();
    let ex = sandgate::Executor::from_policy(&policy).unwrap();
    let open = |p: &Path| -> std::os::fd::OwnedFd { fs::File::open(p).unwrap().into() };
    let narrowed = |dir: &Path| sandgate::ExecOptions {
        within: Some(vec![open(dir)].into()),
        ..Default::default()
    };
    let r = ex.exec("git status", narrowed(&w.ws)).unwrap();
    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("nothing to commit"));
    let e = ex
        .exec("git status", narrowed(&w.ws.join("sub")))
        .unwrap_err();
    assert_eq!(e.code(), sandgate::ErrorCode::Denied, "{e}");
    assert!(e.to_string().contains("narrowed"), "{e}");
}

/// Not protected, pinned: git opens the tree's own `.gitattributes`,
/// `.gitignore` and `.mailmap` blocking (git 2.39 has no switch to skip
/// them), and the `HEAD` of a repository nested in an untracked directory
/// (to tell whether it is one), so a FIFO under one of those names in the
/// work tree holds `git status`, `git diff` or `git log` until the call's
/// timeout. The
/// call is bounded by that timeout (the policy's `exec.timeout_ms` at
/// most) and answers that it was ended by it; no FIFO is opened by the
/// vetting.
#[test]
fn git9_a_fifo_in_the_work_tree_holds_git_until_the_timeout() {
    if !have_git() {
        return;
    }
    for (name, command) in [
        (".gitattributes", "git diff"),
        (".gitignore", "git status --short"),
        (".mailmap", "git log -n 1 --format=%aN"),
        ("nested/.git/HEAD", "git status --short"),
    ] {
        let w = Workspace::new();
        w.repo(&w.ws);
        fs::write(w.ws.join("f.txt"), "two\n").unwrap();
        if let Some(git_dir) = name.strip_suffix("/HEAD") {
            for d in ["objects", "refs"] {
                fs::create_dir_all(w.ws.join(git_dir).join(d)).unwrap();
            }
        }
        mkfifo(&w.ws.join(name));
        let s = w.session("");
        let answer = call(
            &s,
            json!({"op": "exec", "command": command, "timeout_ms": 1500}),
        );
        assert_eq!(answer["timed_out"], json!(true), "{name}: {answer}");
        // Without the FIFO, the same call answers.
        fs::remove_file(w.ws.join(name)).unwrap();
        let answer = call(&s, json!({"op": "exec", "command": command}));
        ran(&answer);
    }
}
