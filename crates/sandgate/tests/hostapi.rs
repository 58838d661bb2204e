//! The host-side API: options from code instead of a policy file, absolute
//! host paths inside a granted root, and an executor's per-call options.
//! Real directories, real symlinks, real processes.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sandgate::policy::Confine;
use sandgate::{ErrorCode, ExecOptions, Executor, Sandbox, WriteOptions};

/// `<tmp>/app` (a file and a subdirectory), `<tmp>/app-secrets/key` (a
/// sibling whose name starts with the root's), `<tmp>/link -> app`.
struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let t = Tree { tmp };
        fs::create_dir_all(t.p("app/src")).unwrap();
        fs::write(t.p("app/a.txt"), "inside\n").unwrap();
        fs::create_dir_all(t.p("app-secrets")).unwrap();
        fs::write(t.p("app-secrets/key"), "secret\n").unwrap();
        symlink(t.p("app"), t.p("link")).unwrap();
        t
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
    fn s(&self, rel: &str) -> String {
        self.p(rel).to_str().unwrap().to_owned()
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, sandgate::Error>) -> ErrorCode {
    r.unwrap_err().code()
}

#[test]
fn host_paths_map_by_components_never_by_string_prefix() {
    let t = Tree::new();
    let sb = Sandbox::builder().read_root(t.p("app")).build().unwrap();
    assert_eq!(sb.host_read_name(&t.s("app/a.txt")).unwrap(), "a.txt");
    assert_eq!(sb.host_read_name(&t.s("app")).unwrap(), ".");
    assert_eq!(sb.host_read_name(&t.s("app/src/")).unwrap(), "src/");
    let name = sb.host_read_name(&t.s("app/a.txt")).unwrap();
    assert_eq!(sb.read(&name).unwrap(), b"inside\n");
    // A sibling that shares the root's spelling as a prefix is outside,
    // and the refusal does not repeat the path.
    let e = sb.host_read_name(&t.s("app-secrets/key")).unwrap_err();
    assert_eq!(e.code(), ErrorCode::PathEscape);
    assert!(
        !e.message().contains("secrets") && e.path().is_none(),
        "{e}"
    );
    assert_eq!(
        code(sb.host_read_name("/etc/passwd")),
        ErrorCode::PathEscape
    );
    // `..` survives the mapping, and the name check refuses it.
    let climbed = sb.host_read_name(&t.s("app/../app-secrets/key")).unwrap();
    assert_eq!(code(sb.read(&climbed)), ErrorCode::PathInvalid);
    // A relative name is the operation's to judge.
    assert_eq!(sb.host_read_name("src").unwrap(), "src");
}

#[test]
fn host_paths_match_the_root_as_spelled_and_as_resolved() {
    let t = Tree::new();
    // The root is named through a symlink: both spellings reach it.
    let sb = Sandbox::builder().read_root(t.p("link")).build().unwrap();
    assert_eq!(sb.host_read_name(&t.s("link/a.txt")).unwrap(), "a.txt");
    assert_eq!(sb.host_read_name(&t.s("app/a.txt")).unwrap(), "a.txt");
    assert_eq!(
        code(sb.host_read_name(&t.s("app-secrets/key"))),
        ErrorCode::PathEscape
    );
}

#[test]
fn an_in_root_absolute_symlink_stays_refused_after_mapping() {
    let t = Tree::new();
    symlink(t.p("app-secrets"), t.p("app/out")).unwrap();
    let sb = Sandbox::builder().read_root(t.p("app")).build().unwrap();
    let name = sb.host_read_name(&t.s("app/out/key")).unwrap();
    assert_eq!(name, "out/key");
    assert_eq!(code(sb.read(&name)), ErrorCode::PathEscape);
}

#[test]
fn host_paths_keep_each_root_to_its_grant() {
    let t = Tree::new();
    fs::create_dir_all(t.p("first")).unwrap();
    fs::write(t.p("first/a.txt"), "first\n").unwrap();
    fs::create_dir_all(t.p("work")).unwrap();
    let sb = Sandbox::builder()
        .read_root(t.p("first"))
        .read_root(t.p("app"))
        .write_root(t.p("work"))
        .build()
        .unwrap();
    // `a.txt` in the second read root is hidden by the first one's: the
    // host named one file, and reading the name would serve the other.
    assert_eq!(
        code(sb.host_read_name(&t.s("app/a.txt"))),
        ErrorCode::PathInvalid
    );
    assert_eq!(sb.host_read_name(&t.s("app/src")).unwrap(), "src");
    // The write root is not readable by itself; read roots are not writable.
    assert_eq!(code(sb.host_read_name(&t.s("work/x"))), ErrorCode::Denied);
    assert_eq!(code(sb.host_write_name(&t.s("app/x"))), ErrorCode::Denied);
    let name = sb.host_write_name(&t.s("work/new.txt")).unwrap();
    sb.write(&name, b"hi", WriteOptions::default()).unwrap();
    assert_eq!(fs::read(t.p("work/new.txt")).unwrap(), b"hi");
    assert_eq!(
        code(sb.host_write_name(&t.s("app-secrets/key"))),
        ErrorCode::PathEscape
    );
}

/// A host path holding a NUL byte names no file: it is refused where it
/// comes in, read side and write side, absolute (inside a root or not) and
/// relative, rather than mapped to a name that every operation then
/// refuses. The refusal never repeats the path.
#[test]
fn cabi25_a_host_path_holding_a_nul_is_refused_where_it_comes_in() {
    let t = Tree::new();
    fs::create_dir_all(t.p("work")).unwrap();
    fs::write(t.p("work/a.txt"), "work\n").unwrap();
    let sb = Sandbox::builder()
        .read_root(t.p("app"))
        .write_root(t.p("work"))
        .build()
        .unwrap();
    let tmp = t.tmp.path().to_str().unwrap().to_owned();
    let given = [
        // The bytes before the NUL name a file that exists.
        t.s("app/a.txt\0x"),
        t.s("app\0/a.txt"),
        t.s("app-secrets/key\0"),
        "/etc/passwd\0".to_owned(),
        "a.txt\0x".to_owned(),
        "\0".to_owned(),
    ];
    for (write, sides) in [(false, "read"), (true, "write")] {
        for g in &given {
            let g = if write {
                g.replace("/app", "/work")
            } else {
                g.clone()
            };
            let r = if write {
                sb.host_write_name(&g)
            } else {
                sb.host_read_name(&g)
            };
            let e = r.expect_err(&format!("{sides} {g:?}"));
            assert_eq!(e.code(), ErrorCode::PathInvalid, "{sides} {g:?}: {e}");
            assert!(e.message().contains("NUL"), "{sides} {g:?}: {e}");
            assert!(
                e.path().is_none() && !e.message().contains(&tmp),
                "{sides} {g:?}: {e}"
            );
        }
    }
    // Nothing was written or changed meanwhile.
    assert_eq!(fs::read(t.p("work/a.txt")).unwrap(), b"work\n");
    assert_eq!(fs::read(t.p("app/a.txt")).unwrap(), b"inside\n");
}

fn executor(root: &Path, timeout_ms: u64) -> Executor {
    Executor::builder()
        .write_root(root)
        .enabled(true)
        .confine(Confine::BestEffort)
        .timeout_ms(timeout_ms)
        .build()
        .unwrap()
}

#[test]
fn exec_takes_an_absolute_cwd_inside_the_root() {
    let t = Tree::new();
    let ex = executor(&t.p("app"), 10_000);
    let r = ex
        .exec(
            "pwd; cat ../a.txt",
            ExecOptions {
                cwd: Some(t.s("app/src")),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(out.lines().next().unwrap().ends_with("/src"), "{out}");
    assert!(out.contains("inside"), "{out}");
    // A root named through a symlink: the path as spelled and as resolved
    // both map.
    let ex = executor(&t.p("link"), 10_000);
    for cwd in [t.s("link/src"), t.s("app/src")] {
        let r = ex
            .exec(
                "pwd",
                ExecOptions {
                    cwd: Some(cwd),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(r.exit_code, 0);
    }
}

#[test]
fn exec_refuses_an_absolute_cwd_outside_the_root_before_running() {
    let t = Tree::new();
    symlink(t.p("app-secrets"), t.p("app/out")).unwrap();
    let ex = executor(&t.p("app"), 10_000);
    let marker = t.p("app/ran");
    let run = |cwd: String| {
        ex.exec(
            &format!("touch {}", marker.display()),
            ExecOptions {
                cwd: Some(cwd),
                ..Default::default()
            },
        )
    };
    assert_eq!(code(run(t.s("app-secrets"))), ErrorCode::PathEscape);
    assert_eq!(code(run("/tmp".into())), ErrorCode::PathEscape);
    assert_eq!(code(run(t.s("app/../app-secrets"))), ErrorCode::PathInvalid);
    // Mapped to `out`, then opened beneath the root: the absolute link is
    // refused there.
    assert_eq!(code(run(t.s("app/out"))), ErrorCode::PathEscape);
    assert!(!marker.exists(), "a refused exec ran");
}

#[test]
fn a_longer_call_timeout_runs_under_the_policy_and_says_so() {
    let t = Tree::new();
    let ex = executor(&t.p("app"), 300);
    let started = Instant::now();
    let r = ex
        .exec(
            "sleep 5",
            ExecOptions {
                timeout_ms: Some(60_000),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.exit_code, 124);
    assert!(started.elapsed() < Duration::from_secs(4));
    assert!(
        r.confined
            .notes
            .iter()
            .any(|n| n.contains("60000 ms") && n.contains("exec.timeout_ms (300 ms)")),
        "{:?}",
        r.confined.notes
    );
    // Within the policy's limit: no note.
    let r = ex
        .exec(
            "true",
            ExecOptions {
                timeout_ms: Some(200),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(r.exit_code, 0);
    assert!(
        !r.confined
            .notes
            .iter()
            .any(|n| n.contains("exec.timeout_ms")),
        "{:?}",
        r.confined.notes
    );
}

#[test]
fn the_executor_builder_keeps_the_policy_gate() {
    let t = Tree::new();
    let e = Executor::builder()
        .write_root(t.p("app"))
        .enabled(true)
        .timeout_ms(0)
        .build()
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Policy);
    assert_eq!(e.key(), Some("exec.timeout_ms"));
    let e = Executor::builder()
        .write_root(t.p("app"))
        .process_allow("python")
        .build()
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Policy);
    assert_eq!(e.key(), Some("exec.process_allow[0]"));
    // Nothing enabled: built, and every command is refused.
    let ex = Executor::builder().write_root(t.p("app")).build().unwrap();
    assert_eq!(
        code(ex.exec("true", ExecOptions::default())),
        ErrorCode::Denied
    );
}

#[test]
fn a_policy_keeps_a_symlinked_root_as_named_for_host_paths() {
    let t = Tree::new();
    // The policy file names its roots through the symlink; it resolves
    // them when it loads, and remembers how they were named.
    let policy_dir = t.p("policy");
    fs::create_dir_all(&policy_dir).unwrap();
    let file = policy_dir.join("agent.toml");
    let link = t.s("link");
    fs::write(
        &file,
        format!(
            "[fs]\nread_roots = [\"{link}\"]\nwrite_root = \"{link}\"\nallow_overwrite = true\n\
             [exec]\nenabled = true\nconfine = \"best_effort\"\ntimeout_ms = 10000\n"
        ),
    )
    .unwrap();
    let policy = sandgate::Policy::load(&file).unwrap();
    assert_eq!(policy.write_root_as_named(), Some(t.p("link").as_path()));
    assert_eq!(policy.read_roots_as_named(), [t.p("link")]);
    assert_ne!(policy.write_root(), Some(t.p("link").as_path()));

    let sb = Sandbox::from_policy(&policy).unwrap();
    for root in ["link", "app"] {
        assert_eq!(
            sb.host_read_name(&t.s(&format!("{root}/a.txt"))).unwrap(),
            "a.txt"
        );
        assert_eq!(
            sb.host_write_name(&t.s(&format!("{root}/new.txt")))
                .unwrap(),
            "new.txt"
        );
    }
    assert_eq!(
        code(sb.host_read_name(&t.s("link-secrets/key"))),
        ErrorCode::PathEscape
    );
    assert_eq!(
        code(sb.host_read_name(&t.s("app-secrets/key"))),
        ErrorCode::PathEscape
    );

    let ex = Executor::from_policy(&policy).unwrap();
    for cwd in [t.s("link/src"), t.s("app/src")] {
        let r = ex
            .exec(
                "pwd",
                ExecOptions {
                    cwd: Some(cwd.clone()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(
            r.exit_code,
            0,
            "{cwd}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        assert!(String::from_utf8_lossy(&r.stdout)
            .trim_end()
            .ends_with("/src"));
    }
    assert_eq!(
        code(ex.exec(
            "true",
            ExecOptions {
                cwd: Some(t.s("app-secrets")),
                ..Default::default()
            },
        )),
        ErrorCode::PathEscape
    );
}

/// A working directory in a granted directory where commands do not run
/// (another read root) is refused as MCP refuses it, `E_DENIED` (the
/// directory is granted, just not for commands), not `E_PATH_ESCAPE` (which
/// says the path is outside every root); with or without a write root.
/// Nothing runs, and a path outside every root is still `E_PATH_ESCAPE`.
#[test]
fn bindings6_exec_refuses_a_cwd_in_another_read_root_as_denied() {
    let t = Tree::new();
    fs::create_dir_all(t.p("docs/sub")).unwrap();
    let marker = t.p("app/ran");
    let with_write = Executor::builder()
        .write_root(t.p("app"))
        .read_root(t.p("app"))
        .read_root(t.p("docs"))
        .enabled(true)
        .confine(Confine::BestEffort)
        .build()
        .unwrap();
    let read_only = Executor::builder()
        .read_root(t.p("app"))
        .read_root(t.p("docs"))
        .enabled(true)
        .confine(Confine::BestEffort)
        .build()
        .unwrap();
    for (which, ex) in [("write root", &with_write), ("read roots", &read_only)] {
        let run = |cwd: String| {
            ex.exec(
                &format!("touch {}", marker.display()),
                ExecOptions {
                    cwd: Some(cwd),
                    ..Default::default()
                },
            )
        };
        for cwd in [
            t.s("docs/sub"),
            t.s("docs"),
            format!("{}//sub/.", t.s("docs")),
        ] {
            let e = run(cwd.clone()).unwrap_err();
            assert_eq!(e.code(), ErrorCode::Denied, "{which} {cwd}: {e}");
            assert!(!e.to_string().contains(&t.s("docs")), "{which}: {e}");
        }
        assert_eq!(
            code(run(t.s("app-secrets"))),
            ErrorCode::PathEscape,
            "{which}"
        );
        assert!(!marker.exists(), "{which}: a refused exec ran");
    }
}

/// Options given as JSON (the C ABI's, Python's, Go's and Node's door):
/// a value of the wrong type or out of a number's range was refused
/// without a key ("invalid value: integer `-1`, expected u64 at line 1
/// column 33"), where the file names `exec.timeout_ms`; the refusal names
/// the dotted key, as the file's does, inside sections, lists and entries.
#[test]
fn hostapi18_options_json_refusals_name_the_key() {
    use sandgate::policy::PolicyErrorKind;
    let t = Tree::new();
    let root = serde_json::to_string(&t.s("app")).unwrap();
    for (json, key, kind) in [
        (r#"{"timeout_ms": -1}"#.to_owned(), "exec.timeout_ms", PolicyErrorKind::InvalidValue),
        (r#"{"timeout_ms": 1.5}"#.to_owned(), "exec.timeout_ms", PolicyErrorKind::WrongType),
        (r#"{"timeout_ms": "5"}"#.to_owned(), "exec.timeout_ms", PolicyErrorKind::WrongType),
        (r#"{"exec": {"max_tasks": -3}}"#.to_owned(), "exec.max_tasks", PolicyErrorKind::InvalidValue),
        (format!(r#"{{"write_root": [{root}]}}"#), "fs.write_root", PolicyErrorKind::WrongType),
        (format!(r#"{{"read_roots": [{root}, 5]}}"#), "fs.read_roots[1]", PolicyErrorKind::WrongType),
        (r#"{"fs_ops": 18446744073709551616}"#.to_owned(), "budgets.fs_ops", PolicyErrorKind::WrongType),
        (
            r#"{"allow": ["a.example"], "credentials": [{"host": "a.example", "env": "T"}, {"host": "a.example", "port": 70000, "env": "U"}]}"#.to_owned(),
            "net.credentials[1].port",
            PolicyErrorKind::InvalidValue,
        ),
        (
            r#"{"net": {"rules": [{"host": "a.example", "action": "allow", "methodz": []}]}}"#.to_owned(),
            "net.rules[0].methodz",
            PolicyErrorKind::UnknownKey,
        ),
    ] {
        let e = sandgate::PolicyOptions::from_flat_json(&json).unwrap_err();
        assert_eq!(e.key(), Some(key), "{json}: {e}");
        assert_eq!(e.kind(), kind, "{json}: {e}");
        assert!(!e.message().contains("line 1"), "{json}: {e}");
    }
    let e = sandgate::PolicyOptions::from_json(r#"{"exec": {"timeout_ms": -1}}"#).unwrap_err();
    assert_eq!(e.key(), Some("exec.timeout_ms"), "{e}");
    // Through the executor's door too: `E_POLICY` with the key.
    let e = Executor::from_options(
        &sandgate::PolicyOptions::from_flat_json(r#"{"max_tasks": 0}"#).unwrap(),
        &t.p("app"),
    )
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Policy);
    assert_eq!(e.key(), Some("exec.max_tasks"));
}

/// A key given twice in the options, flat and in its section
/// (`{"write_root": "app", "fs": {"write_root": "/"}}`, which Python's
/// `write_root=..., fs={...}`, Go's `Set` and Node's object all send) or
/// twice in one JSON object, was merged silently, the last one read
/// winning (the write root was "/"); the file refuses a key defined twice,
/// and so do the options now, naming it.
#[test]
fn hostapi18_an_option_given_twice_is_refused_naming_it() {
    use sandgate::policy::PolicyErrorKind;
    let t = Tree::new();
    let app = serde_json::to_string(&t.s("app")).unwrap();
    for (json, key) in [
        (
            format!(r#"{{"write_root": {app}, "fs": {{"write_root": "/"}}}}"#),
            "fs.write_root",
        ),
        (
            format!(r#"{{"fs": {{"write_root": "/"}}, "write_root": {app}}}"#),
            "fs.write_root",
        ),
        (
            r#"{"timeout_ms": 5, "exec": {"timeout_ms": 9, "enabled": true}}"#.to_owned(),
            "exec.timeout_ms",
        ),
        (
            format!(r#"{{"write_root": {app}, "write_root": "/"}}"#),
            "write_root",
        ),
        (
            r#"{"exec": {"enabled": true}, "exec": {"timeout_ms": 1}}"#.to_owned(),
            "exec",
        ),
        (
            r#"{"net": {"rules": [{"host": "a", "host": "b"}]}}"#.to_owned(),
            "net.rules[0].host",
        ),
    ] {
        let e = sandgate::PolicyOptions::from_flat_json(&json).unwrap_err();
        assert_eq!(e.kind(), PolicyErrorKind::DuplicateKey, "{json}: {e}");
        assert_eq!(e.key(), Some(key), "{json}: {e}");
    }
    let e = sandgate::PolicyOptions::from_json(r#"{"exec": {"timeout_ms": 5, "timeout_ms": 6}}"#)
        .unwrap_err();
    assert_eq!(e.kind(), PolicyErrorKind::DuplicateKey, "{e}");
    assert_eq!(e.key(), Some("exec.timeout_ms"), "{e}");
    // A section and other keys of it, each once, still merge.
    let o = sandgate::PolicyOptions::from_flat_json(&format!(
        r#"{{"write_root": {app}, "fs": {{"allow_overwrite": true}}}}"#
    ))
    .unwrap();
    assert!(o.fs.allow_overwrite);
    assert_eq!(o.fs.write_root.as_deref(), Some(t.p("app").as_path()));
}

/// A policy file always lies under `/`, so the file's gate refuses a write
/// root of `/` (it holds the policy's directory); options, which have no
/// file, granted it, handing the agent every file the host user may
/// write. It is refused from options too, however spelled; a read root of
/// `/` stays what it is in a file.
#[test]
fn hostapi18_options_refuse_the_whole_filesystem_as_write_root() {
    use sandgate::policy::PolicyErrorKind;
    let t = Tree::new();
    symlink("/", t.p("slash")).unwrap();
    let up = format!("{}/{}", t.s("app"), "../".repeat(64));
    for root in ["/".to_owned(), "//".to_owned(), up, t.s("slash")] {
        let options = sandgate::PolicyOptions {
            fs: sandgate::policy::FsOptions {
                write_root: Some(root.clone().into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let e = sandgate::Policy::from_options(&options, &t.p("app")).unwrap_err();
        assert_eq!(e.key(), Some("fs.write_root"), "{root}: {e}");
        assert_eq!(e.kind(), PolicyErrorKind::InvalidValue, "{root}: {e}");
        let e = Executor::builder()
            .base_dir(t.p("app"))
            .write_root(&root)
            .enabled(true)
            .build()
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Policy, "{root}");
        assert_eq!(e.key(), Some("fs.write_root"), "{root}");
        // As the flat JSON the bindings send.
        let json = format!(
            r#"{{"write_root": {}}}"#,
            serde_json::to_string(&root).unwrap()
        );
        let o = sandgate::PolicyOptions::from_flat_json(&json).unwrap();
        let e = sandgate::Policy::from_options(&o, &t.p("app")).unwrap_err();
        assert_eq!(e.key(), Some("fs.write_root"), "{root}: {e}");
    }
    let p = sandgate::Policy::from_options(
        &sandgate::PolicyOptions::from_flat_json(r#"{"read_roots": ["/"]}"#).unwrap(),
        &t.p("app"),
    )
    .unwrap();
    assert_eq!(p.read_roots(), [PathBuf::from("/")]);
}
