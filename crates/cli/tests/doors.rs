//! One policy, every door: the same policy is stated once and each rule it
//! states is attacked through every door that reaches files or runs a
//! program — the Rust `Sandbox`, the JSON endpoint (`sandgate tool`), the
//! MCP server (`sandgate mcp`), the shell on the floor (Landlock, seccomp
//! and the after-the-fact check, no namespaces) and the shell in
//! namespaces of its own, and confined git. Every cell is a real attempt
//! whose outcome is checked on disk afterwards: the protected entries
//! beneath the write root, the read-only root and the directory outside
//! every root are compared with a snapshot taken before (kind, bytes or
//! link target, mode), and the file-tool doors must refuse with the same
//! code.
//!
//! The matrix lives with the CLI because two of its doors are the
//! `sandgate` binary itself; the library doors are reached through the
//! `sandgate` crate the binary is built on.

mod mcp_support;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use sandgate::fileguard::{Guard, GuardBuilder};
use sandgate::policy::SecurityMode;
use sandgate::{ExecOptions, Executor, Policy, PolicyOptions, Sandbox, WriteOptions};
use serde_json::{json, Value};

use mcp_support::{tool_session, McpSession};

const DENY: &[&str] = &[
    "Makefile",
    "*.lock",
    ".github/**",
    "conf/settings.json",
    "café.txt",
    "Dockerfile",
];
const MAX_WRITE: u64 = 4096;

/// A tree and the one policy every door gets: `ws` (read and write root),
/// `ro` (a read-only root) and `outside` (granted to nothing), with
/// protected entries in `ws`, a hard link to one made earlier, an in-root
/// symlink to one, and a symlink leading out.
struct Fixture {
    dir: tempfile::TempDir,
    options: PolicyOptions,
}

impl Fixture {
    fn new(edit: impl FnOnce(&mut PolicyOptions)) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        let ws = base.join("ws");
        for d in [
            "ws/.github/workflows",
            "ws/conf",
            "ws/sub",
            "ro/rsub",
            "outside",
        ] {
            fs::create_dir_all(base.join(d)).unwrap();
        }
        fs::write(ws.join("Makefile"), "MK\n").unwrap();
        fs::write(ws.join("a.lock"), "LOCK\n").unwrap();
        fs::write(ws.join(".github/workflows/ci.yml"), "on: push\n").unwrap();
        fs::write(ws.join("conf/settings.json"), "{}\n").unwrap();
        fs::write(ws.join("café.txt"), "CAFE\n").unwrap();
        fs::write(ws.join("free.txt"), "free\n").unwrap();
        fs::hard_link(ws.join("Makefile"), ws.join("sub/hl")).unwrap();
        std::os::unix::fs::symlink("Makefile", ws.join("link")).unwrap();
        std::os::unix::fs::symlink("../outside", ws.join("out")).unwrap();
        std::os::unix::fs::symlink(".github/workflows", ws.join("wf")).unwrap();
        fs::write(base.join("ro/ro.txt"), "RO\n").unwrap();
        fs::write(base.join("outside/secret.txt"), "SECRET-OUTSIDE\n").unwrap();
        // Tests may run as an unprivileged user over a tree root made.
        for entry in walk(base) {
            let _ = fs::set_permissions(&entry, fs::Permissions::from_mode(0o755));
        }

        let mut options = PolicyOptions {
            security_mode: Some(SecurityMode::Restricted),
            ..PolicyOptions::default()
        };
        options.fs.read_roots = vec![ws.clone(), base.join("ro")];
        options.fs.write_root = Some(ws);
        options.fs.deny_write = DENY.iter().map(|s| s.to_string()).collect();
        options.fs.max_write_bytes = Some(MAX_WRITE);
        options.fs.allow_overwrite = true;
        options.exec.enabled = true;
        options.exec.timeout_ms = Some(20_000);
        edit(&mut options);
        fs::write(base.join("policy.toml"), options.to_toml().unwrap()).unwrap();
        Fixture { dir, options }
    }

    fn base(&self) -> &Path {
        self.dir.path()
    }

    fn ws(&self) -> PathBuf {
        self.base().join("ws")
    }

    fn policy_file(&self) -> PathBuf {
        self.base().join("policy.toml")
    }

    fn policy(&self) -> Policy {
        Policy::load(self.policy_file()).unwrap()
    }

    fn guard(&self) -> Guard {
        GuardBuilder::new()
            .patterns(&self.options.fs.deny_write)
            .restricted(true)
            .build()
            .unwrap()
    }

    /// What no door may change: every entry of `ro` and `outside`, and
    /// every entry beneath the write root that the policy's guard protects
    /// (so a new protected entry, in any spelling the guard folds, shows).
    fn snapshot(&self) -> BTreeMap<String, String> {
        let guard = self.guard();
        let mut out = BTreeMap::new();
        for top in ["ro", "outside", "ws"] {
            for p in walk(&self.base().join(top)) {
                let rel = p.strip_prefix(self.base().join(top)).unwrap();
                let rel = rel.to_string_lossy().into_owned();
                if top == "ws"
                    && (rel.is_empty()
                        || rel.starts_with(".sandgate-quarantine")
                        || guard.check_write(&rel, None).is_allowed())
                {
                    continue;
                }
                out.insert(format!("{top}/{rel}"), describe(&p));
            }
        }
        out
    }
}

/// Every entry beneath `dir` (itself included), links not followed.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        i += 1;
        if fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
            if let Ok(rd) = fs::read_dir(&p) {
                let mut names: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
                names.sort();
                out.extend(names);
            }
        }
    }
    out
}

fn describe(p: &Path) -> String {
    let m = fs::symlink_metadata(p).unwrap();
    let mode = m.mode() & 0o7777;
    if m.file_type().is_symlink() {
        format!("link->{}", fs::read_link(p).unwrap().display())
    } else if m.is_dir() {
        format!("dir {mode:o}")
    } else {
        format!(
            "file {mode:o} {:?}",
            String::from_utf8_lossy(&fs::read(p).unwrap())
        )
    }
}

/// One file-tool request, as each door spells it.
#[derive(Clone, Debug)]
enum Op {
    Write(&'static str, String),
    Edit(&'static str, &'static str, &'static str),
    Mkdir(&'static str),
    Rename(&'static str, &'static str),
    Delete(&'static str),
    Read(&'static str),
}

/// A door's answer: `Ok(())` or the refusal's code.
type Outcome = Result<(), String>;

fn rust_door(fx: &Fixture, ops: &[Op]) -> Vec<Outcome> {
    let sb = Sandbox::from_policy(&fx.policy()).unwrap();
    ops.iter()
        .map(|op| {
            let r = match op {
                Op::Write(p, c) => sb
                    .write(p, c.as_bytes(), WriteOptions::default().overwrite(true))
                    .map(drop),
                Op::Edit(p, old, new) => sb.edit(p, old, new, Default::default()).map(drop),
                Op::Mkdir(p) => sb.mkdir(p),
                Op::Rename(a, b) => sb.rename(a, b),
                Op::Delete(p) => sb.delete(p),
                Op::Read(p) => sb.read(p).map(drop),
            };
            r.map_err(|e| e.code().as_str().to_owned())
        })
        .collect()
}

fn tool_door(fx: &Fixture, ops: &[Op]) -> Vec<Outcome> {
    let reqs: Vec<Value> = ops
        .iter()
        .map(|op| match op {
            Op::Write(p, c) => json!({"op":"write","path":p,"content":c,"overwrite":true}),
            Op::Edit(p, o, n) => json!({"op":"edit","path":p,"old":o,"new":n}),
            Op::Mkdir(p) => json!({"op":"mkdir","path":p}),
            Op::Rename(a, b) => json!({"op":"rename","from":a,"to":b}),
            Op::Delete(p) => json!({"op":"delete","path":p}),
            Op::Read(p) => json!({"op":"read","path":p}),
        })
        .collect();
    tool_session(&fx.policy_file(), &reqs)
        .into_iter()
        .map(|a| {
            if a["ok"] == json!(true) {
                Ok(())
            } else {
                Err(a["error"]["code"].as_str().unwrap().to_owned())
            }
        })
        .collect()
}

/// A `sandgate mcp` session over the fixture's policy.
struct Mcp(McpSession);

impl Mcp {
    fn start(fx: &Fixture) -> Mcp {
        Mcp(McpSession::start(
            [OsStr::new("--policy"), fx.policy_file().as_os_str()],
            "doors",
        ))
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.0.request(method, params)
    }

    fn tools(&mut self) -> Vec<String> {
        self.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// A tool call's outcome: `Ok(text)` (its text blocks joined by
    /// newlines: `exec` answers the exit code, stdout and stderr apart),
    /// or `Err` with the refusal's code (a tool error) or `RPC` (a
    /// protocol error: unknown tool).
    fn call(&mut self, name: &str, args: Value) -> Result<String, String> {
        let v = self.request("tools/call", json!({"name":name,"arguments":args}));
        if v.get("error").is_some() {
            return Err("RPC".into());
        }
        let text = v["result"]["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        if v["result"]["isError"] == json!(true) {
            Err(text.split(':').next().unwrap().to_owned())
        } else {
            Ok(text)
        }
    }
}

fn mcp_door(fx: &Fixture, ops: &[Op]) -> Vec<Outcome> {
    let mut m = Mcp::start(fx);
    ops.iter()
        .map(|op| {
            let r = match op {
                Op::Write(p, c) => m.call("write_file", json!({"path":p,"content":c})),
                Op::Edit(p, o, n) => m.call(
                    "edit_file",
                    json!({"path":p,"edits":[{"oldText":o,"newText":n}]}),
                ),
                Op::Mkdir(p) => m.call("create_directory", json!({"path":p})),
                Op::Rename(a, b) => m.call("move_file", json!({"source":a,"destination":b})),
                // The reference server has no delete tool; neither has this one.
                Op::Delete(_) => Err("no delete tool".into()),
                Op::Read(p) => m.call("read_text_file", json!({"path":p})),
            };
            r.map(drop)
        })
        .collect()
}

type FileDoor = fn(&Fixture, &[Op]) -> Vec<Outcome>;
const FILE_DOORS: &[(&str, FileDoor)] =
    &[("rust", rust_door), ("tool", tool_door), ("mcp", mcp_door)];

/// Each attack, on a fresh tree through each file-tool door: refused with
/// `code` by every door (MCP has no delete), nothing guarded changed.
fn file_cells() -> Vec<(&'static str, Op, &'static str)> {
    let big = "x".repeat(MAX_WRITE as usize + 1);
    vec![
        (
            "overwrite a protected file",
            Op::Write("Makefile", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            "case spelling",
            Op::Write("MAKEFILE", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            "Kelvin sign for k",
            Op::Write("x.loc\u{212a}", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            "NFD spelling",
            Op::Write("cafe\u{301}.txt", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            "default-ignorable",
            Op::Write("Make\u{200d}file", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            "fresh protected name",
            Op::Write("deep/new.lock", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            "fresh in a protected dir",
            Op::Write(".github/workflows/x.yml", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            ".GIT spelling",
            Op::Write(".GIT/config", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            ".git with a zero-width space",
            Op::Write(".g\u{200b}it/config", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            ".git made as a directory",
            Op::Mkdir("sub/.Git"),
            "E_FS_PROTECTED",
        ),
        (
            "nested .git",
            Op::Write("sub/.git/HEAD", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            "dir where a file is protected",
            Op::Mkdir("Dockerfile"),
            "E_FS_PROTECTED",
        ),
        (
            "dir beneath a protected file",
            Op::Mkdir("conf/settings.json/x"),
            "E_NOT_DIR",
        ),
        (
            "dir beneath a protected name",
            Op::Mkdir("deep/Dockerfile/x"),
            "E_FS_PROTECTED",
        ),
        (
            "rename into place",
            Op::Rename("free.txt", "b.lock"),
            "E_FS_PROTECTED",
        ),
        (
            "rename a protected file away",
            Op::Rename("Makefile", "M2"),
            "E_FS_PROTECTED",
        ),
        (
            "rename a dir holding one away",
            Op::Rename("conf", "conf2"),
            "E_FS_PROTECTED",
        ),
        (
            "delete a protected file",
            Op::Delete("Makefile"),
            "E_FS_PROTECTED",
        ),
        (
            "edit a protected file",
            Op::Edit("Makefile", "MK", "PWN"),
            "E_FS_PROTECTED",
        ),
        (
            "edit a final symlink",
            Op::Edit("link", "MK", "PWN"),
            "E_SYMLINK",
        ),
        (
            "write through a dir link",
            Op::Write("wf/new.yml", "w".into()),
            "E_FS_PROTECTED",
        ),
        (
            "mkdir through a dir link",
            Op::Mkdir("wf/d"),
            "E_FS_PROTECTED",
        ),
        (
            "rename through a dir link",
            Op::Rename("free.txt", "wf/f.txt"),
            "E_FS_PROTECTED",
        ),
        (
            "write a final symlink",
            Op::Write("link", "w".into()),
            "E_SYMLINK",
        ),
        (
            "write a hard link made earlier",
            Op::Write("sub/hl", "w".into()),
            "E_HARDLINK",
        ),
        (
            "edit a hard link made earlier",
            Op::Edit("sub/hl", "MK", "PWN"),
            "E_HARDLINK",
        ),
        (
            "over max_write_bytes",
            Op::Write("big.txt", big),
            "E_TOO_LARGE",
        ),
        (
            "write by ..",
            Op::Write("../outside/secret.txt", "w".into()),
            "E_PATH_INVALID",
        ),
        (
            "read by ..",
            Op::Read("../outside/secret.txt"),
            "E_PATH_INVALID",
        ),
        (
            "read through a link out",
            Op::Read("out/secret.txt"),
            "E_PATH_ESCAPE",
        ),
        (
            "write through a link out",
            Op::Write("out/new.txt", "w".into()),
            "E_PATH_ESCAPE",
        ),
        (
            "mkdir through a link out",
            Op::Mkdir("out/newdir"),
            "E_PATH_ESCAPE",
        ),
        ("absolute name", Op::Read("/etc/passwd"), "E_PATH_INVALID"),
    ]
}

#[test]
fn every_file_door_refuses_the_same_attack_with_the_same_code() {
    let mut cells = 0;
    let mut failures = Vec::new();
    for (what, op, code) in file_cells() {
        for (door, run) in FILE_DOORS {
            if *door == "mcp" && matches!(op, Op::Delete(_)) {
                continue;
            }
            // MCP takes absolute host paths inside a granted root; one
            // outside them is refused as a path outside the roots.
            let want = if *door == "mcp" && what == "absolute name" {
                "E_PATH_ESCAPE"
            } else {
                code
            };
            let fx = Fixture::new(|_| {});
            let before = fx.snapshot();
            let got = run(&fx, std::slice::from_ref(&op)).remove(0);
            cells += 1;
            if got != Err(want.to_owned()) {
                failures.push(format!("{door}: {what} ({op:?}): {got:?}, want {want}"));
            }
            let after = fx.snapshot();
            if before != after {
                failures.push(format!(
                    "{door}: {what}: guarded state changed: {}",
                    diff(&before, &after)
                ));
            }
            if fx.base().join("ws/deep").exists()
                || fx.base().join("ws/sub/.git").exists()
                || fx.base().join("ws/conf/settings.json").is_dir()
            {
                failures.push(format!("{door}: {what}: a refused call left directories"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{cells} cells:\n{}",
        failures.join("\n")
    );
}

/// Spellings the guard does not fold (Win32's trailing dot and space) are
/// names of their own on Linux: every door writes them alike.
#[test]
fn every_file_door_writes_the_names_the_guard_leaves_alike() {
    for (door, run) in FILE_DOORS {
        let fx = Fixture::new(|_| {});
        let got = run(
            &fx,
            &[
                Op::Write("Makefile.", "a".into()),
                Op::Write("Makefile ", "b".into()),
                Op::Mkdir("x/y/z"),
                Op::Mkdir("x/y/z"),
                Op::Rename("free.txt", "sub/free2.txt"),
            ],
        );
        assert_eq!(got, vec![Ok(()); 5], "{door}");
        assert_eq!(fs::read(fx.ws().join("Makefile.")).unwrap(), b"a");
        assert!(fx.ws().join("x/y/z").is_dir());
        assert!(fx.ws().join("sub/free2.txt").is_file());
    }
}

fn diff(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> String {
    let mut out = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            None => out.push(format!("-{k}")),
            Some(w) if w != v => out.push(format!("~{k}: {v} -> {w}")),
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        out.push(format!("+{k} {}", b[k]));
    }
    out.join(", ")
}

/// The shell, built from the same policy: on the floor and (where the host
/// allows it) in namespaces of its own.
fn executor(fx: &Fixture, namespaces: bool) -> Executor {
    Executor::builder()
        .options(fx.options.clone())
        .base_dir(fx.base())
        .namespaces(namespaces)
        .build()
        .unwrap()
}

fn run(ex: &Executor, command: &str) -> sandgate::ExecResult {
    ex.exec(command, ExecOptions::default())
        .unwrap_or_else(|e| panic!("{command}: {e}"))
}

/// Shell attacks on every rule the file tools refuse above, plus the ones
/// only a shell can try. `{ro}` and `{out}` are the read-only root and the
/// directory outside every root.
const SHELL_CELLS: &[&str] = &[
    "echo PWN > Makefile",
    "echo PWN >> a.lock",
    "truncate -s 0 Makefile",
    "chmod 600 Makefile",
    "touch -d 2001-01-01 Makefile",
    "mv Makefile M2",
    "rm -f Makefile",
    "ln -f free.txt Makefile",
    "ln -sf free.txt conf/settings.json",
    "cp --reflink=auto --remove-destination free.txt Makefile",
    "echo PWN > sub/hl",
    "touch MAKEFILE x.loc\u{212a} 'cafe\u{301}.txt' 'Make\u{200d}file' deep.lock",
    "mkdir -p .github/workflows && echo x > .github/workflows/pwn.yml",
    "mkdir Dockerfile",
    "mkdir -p .GIT && echo x > .GIT/config",
    "mv free.txt b.lock",
    "mv conf conf2",
    "mkdir -p d/e && echo x > d/e/new.lock && mv d d2",
    "python3 -c 'import os; os.replace(\"free.txt\", \"Makefile\")'",
    "echo PWN > {ro}/ro.txt",
    "truncate -s 0 {ro}/ro.txt",
    "rm -f {ro}/ro.txt",
    "touch {ro}/new.txt",
    "mkdir {ro}/newdir",
    "mv {ro}/ro.txt moved.txt",
    "mv free.txt {ro}/free.txt",
    "ln {ro}/ro.txt rolink && echo PWN > rolink",
    "cp --reflink=always {ro}/ro.txt {ro}/copy.txt",
    "echo PWN > {out}/secret.txt",
    "touch {out}/new.txt",
    "ln -s {out}/secret.txt s && echo PWN > s",
    "head -c 8192 /dev/zero > big.txt",
    "echo x > $TMPDIR/n.lock && mv $TMPDIR/n.lock .",
    "echo x > $TMPDIR/f && ln $TMPDIR/f new.lock",
    "git init -q nested",
    "mkdir -p '.g\u{200b}it/hooks' 'sub/.Git' && echo x > '.g\u{200b}it/hooks/pre-commit'",
    "ln -s /etc/passwd Dockerfile",
    "mkfifo x.lock",
    "mv conf conf.bak && ln -s /tmp conf",
    "mv .github gh && mkdir -p .github/workflows && echo x > .github/workflows/ci.yml",
    "python3 -c 'import os; os.link(\"Makefile\", \"sub/hl2\"); open(\"sub/hl2\", \"w\").write(\"PWN\")'",
    "echo x > conf/settings.json.tmp && mv conf/settings.json.tmp conf/settings.json",
    "chmod 000 conf",
    "mv {ro}/rsub {ro}/rsub2",
    "rmdir {ro}/rsub",
    "ln -s x {ro}/l",
    "mkfifo {ro}/f",
    "python3 -c 'import os; os.rename(\"{ro}/ro.txt\", \"stolen.txt\")'",
];

/// Attacks on the read-only root that Landlock does not judge (file mode,
/// timestamps): refused where the view binds the root read-only; on the
/// floor they pass (SECURITY.md says so).
const SHELL_CELLS_NS_ONLY: &[&str] = &["chmod 600 {ro}/ro.txt", "touch -d 2001-01-01 {ro}/ro.txt"];

#[test]
fn every_shell_door_leaves_what_the_policy_guards_as_it_was() {
    let mut cells = 0;
    let mut failures = Vec::new();
    for namespaces in [false, true] {
        let list: Vec<&str> = if namespaces {
            SHELL_CELLS
                .iter()
                .chain(SHELL_CELLS_NS_ONLY)
                .copied()
                .collect()
        } else {
            SHELL_CELLS.to_vec()
        };
        for cell in list {
            let fx = Fixture::new(|_| {});
            let ex = executor(&fx, namespaces);
            let command = cell
                .replace("{ro}", &fx.base().join("ro").display().to_string())
                .replace("{out}", &fx.base().join("outside").display().to_string());
            let before = fx.snapshot();
            let r = run(&ex, &command);
            ex.dispose();
            cells += 1;
            assert_eq!(
                r.confined.namespaces,
                namespaces && namespaces_here(),
                "{cell}"
            );
            let after = fx.snapshot();
            if before != after {
                failures.push(format!(
                    "namespaces={namespaces}: `{cell}` (exit {}, {}): {}",
                    r.exit_code,
                    String::from_utf8_lossy(&r.stderr).trim(),
                    diff(&before, &after)
                ));
            }
            if let Ok(m) = fs::metadata(fx.ws().join("big.txt")) {
                if m.len() > MAX_WRITE {
                    failures.push(format!("namespaces={namespaces}: big.txt is {}", m.len()));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{cells} cells:\n{}",
        failures.join("\n")
    );
}

/// Whether this host gives the executor namespaces (probed by a run).
fn namespaces_here() -> bool {
    static HERE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HERE.get_or_init(|| {
        let fx = Fixture::new(|_| {});
        let ex = executor(&fx, true);
        let here = run(&ex, "true").confined.namespaces;
        ex.dispose();
        if !here {
            eprintln!("no namespaces on this host: the namespace cells ran on the floor");
        }
        here
    })
}

/// Reads: the shell reads what the read roots hold and nothing outside.
#[test]
fn no_shell_door_reads_outside_the_roots() {
    for namespaces in [false, true] {
        let fx = Fixture::new(|_| {});
        let ex = executor(&fx, namespaces);
        let outside = fx.base().join("outside");
        let r = run(
            &ex,
            &format!(
                "cat {o}/secret.txt; cat out/secret.txt; ls {o}; cat {ro}/ro.txt; \
                 cp {o}/secret.txt mine.txt; ln {o}/secret.txt hl.txt; ln -s {o}/secret.txt sl.txt",
                o = outside.display(),
                ro = fx.base().join("ro").display()
            ),
        );
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert!(!stdout.contains("SECRET-OUTSIDE"), "{stdout}");
        assert!(!stdout.contains("secret.txt"), "{stdout}");
        assert!(stdout.contains("RO"), "{stdout}");
        ex.dispose();
        // Nothing it made in the write root holds the outside file.
        for p in walk(&fx.ws()) {
            if fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                let bytes = fs::read(&p).unwrap_or_default();
                assert!(
                    !bytes.windows(7).any(|w| w == b"SECRET-"),
                    "{}",
                    p.display()
                );
            }
        }
        // And the file tools do not read it through what the command left.
        let got = rust_door(&fx, &[Op::Read("sl.txt"), Op::Read("hl.txt")]);
        assert!(got.iter().all(|g| g.is_err()), "{got:?}");
    }
}

/// `budgets.fs_ops` is one count of file operations whichever door spends
/// it: four calls pass, the fifth is refused, and a refused call leaves
/// nothing behind.
#[test]
fn every_file_door_spends_the_fs_ops_budget_alike() {
    let ops = [
        Op::Mkdir("a/b/c"),
        Op::Mkdir("d/e/f"),
        Op::Write("g/h/i.txt", "x".into()),
        Op::Mkdir("j/k/l"),
        Op::Mkdir("m/n/o"),
    ];
    let mut failures = Vec::new();
    for (door, run) in FILE_DOORS {
        let fx = Fixture::new(|o| o.budgets.fs_ops = Some(4));
        let got = run(&fx, &ops);
        let want: Vec<Outcome> = vec![Ok(()), Ok(()), Ok(()), Ok(()), Err("E_DENIED".into())];
        if got != want {
            failures.push(format!("{door}: {got:?}"));
        }
        if fx.ws().join("m").exists() {
            failures.push(format!("{door}: the refused call made `m`"));
        }
        // Another session (another sandbox of the same policy) counts
        // afresh, as policy.md says: a budget belongs to the sandbox.
        if *door != "rust" && run(&fx, &[Op::Mkdir("p")]) != vec![Ok(())] {
            failures.push(format!("{door}: a new session found the budget spent"));
        }
    }
    // Commands are counted by exec_ops, not fs_ops: a command's file
    // operations leave the file tools' budget whole.
    let fx = Fixture::new(|o| o.budgets.fs_ops = Some(1));
    let ex = executor(&fx, false);
    run(
        &ex,
        "for i in 1 2 3 4 5; do mkdir d$i; echo x > d$i/f; done",
    );
    ex.dispose();
    let a = tool_session(
        &fx.policy_file(),
        &[
            json!({"op":"exec","command":"mkdir e; echo x > e/f"}),
            json!({"op":"mkdir","path":"q"}),
        ],
    );
    if a[1]["ok"] != json!(true) {
        failures.push(format!("tool: the command spent fs_ops: {}", a[1]));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A refused directory leaves none of the parents it would have made.
#[test]
fn no_file_door_leaves_parents_of_a_refused_directory() {
    for (door, run) in FILE_DOORS {
        let fx = Fixture::new(|_| {});
        let got = run(&fx, &[Op::Mkdir("newdir/deeper/Dockerfile")]);
        assert_eq!(got, vec![Err("E_FS_PROTECTED".to_owned())], "{door}");
        assert!(!fx.ws().join("newdir").exists(), "{door}: left `newdir`");
    }
}

/// `budgets.exec_ops` is one count whichever door runs the command.
#[test]
fn every_exec_door_spends_the_exec_ops_budget_alike() {
    let fx = Fixture::new(|o| o.budgets.exec_ops = Some(2));
    let ex = Executor::from_policy(&fx.policy()).unwrap();
    let got: Vec<bool> = (0..3)
        .map(|_| ex.exec("true", ExecOptions::default()).is_ok())
        .collect();
    assert_eq!(got, [true, true, false], "rust");
    let r = ex.exec("true", ExecOptions::default()).unwrap_err();
    assert_eq!(r.code().as_str(), "E_DENIED");
    ex.dispose();

    let answers = tool_session(
        &fx.policy_file(),
        &vec![json!({"op":"exec","command":"true"}); 3],
    );
    let codes: Vec<&str> = answers
        .iter()
        .map(|a| a["error"]["code"].as_str().unwrap_or("OK"))
        .collect();
    assert_eq!(codes, ["OK", "OK", "E_DENIED"], "tool");

    let mut m = Mcp::start(&fx);
    let got: Vec<Result<(), String>> = (0..3)
        .map(|_| m.call("exec", json!({"command":"true"})).map(drop))
        .collect();
    assert_eq!(got, [Ok(()), Ok(()), Err("E_DENIED".to_owned())], "mcp");
}

/// A working directory refused before anything runs (outside the root,
/// missing, a file, a link out) spends no `exec_ops`, at any door: with a
/// budget of one, the command after those refusals still runs.
#[test]
fn a_refused_cwd_spends_no_exec_ops_at_any_door() {
    let fx = Fixture::new(|o| o.budgets.exec_ops = Some(1));
    fs::write(fx.ws().join("plain.txt"), "x").unwrap();
    let refused = ["..", "missing", "plain.txt", "out", "/etc"];

    let ex = Executor::from_policy(&fx.policy()).unwrap();
    for cwd in refused {
        let opts = ExecOptions {
            cwd: Some(cwd.to_owned()),
            ..ExecOptions::default()
        };
        assert!(ex.exec("touch ran", opts).is_err(), "rust: {cwd} ran");
    }
    let r = ex.exec("true", ExecOptions::default());
    assert!(
        r.is_ok(),
        "rust: the refusals spent the budget: {:?}",
        r.err()
    );
    ex.dispose();

    let mut reqs: Vec<Value> = refused
        .iter()
        .map(|c| json!({"op":"exec","command":"touch ran","cwd":c}))
        .collect();
    reqs.push(json!({"op":"exec","command":"true"}));
    let answers = tool_session(&fx.policy_file(), &reqs);
    for (i, cwd) in refused.iter().enumerate() {
        assert_eq!(
            answers[i]["ok"],
            json!(false),
            "tool: {cwd}: {}",
            answers[i]
        );
    }
    assert_eq!(
        answers[refused.len()]["ok"],
        json!(true),
        "tool: the refusals spent the budget: {}",
        answers[refused.len()]
    );

    let mut m = Mcp::start(&fx);
    for cwd in refused {
        let got = m.call("exec", json!({"command":"touch ran","cwd":cwd}));
        assert!(got.is_err(), "mcp: {cwd} ran: {got:?}");
    }
    let got = m.call("exec", json!({"command":"true"}));
    assert!(got.is_ok(), "mcp: the refusals spent the budget: {got:?}");
    assert!(!fx.ws().join("ran").exists() && !fx.base().join("ran").exists());
}

/// With `[exec]` off and nothing in `process_allow`, no door runs a
/// program: the library and the JSON endpoint refuse with `E_DENIED`, the
/// MCP server lists no `exec` and answers a call to it as an unknown tool;
/// the marker the command would make is nowhere.
#[test]
fn with_exec_off_no_door_runs_a_program() {
    let fx = Fixture::new(|o| o.exec.enabled = false);
    let marker = fx.base().join("outside/ran");
    let command = format!("touch {}", marker.display());
    let ex = Executor::from_policy(&fx.policy()).unwrap();
    let e = ex.exec(&command, ExecOptions::default()).unwrap_err();
    assert_eq!(e.code().as_str(), "E_DENIED");
    let argv = ["touch".into(), marker.clone().into_os_string()];
    let e = ex.exec_argv(&argv, ExecOptions::default()).unwrap_err();
    assert_eq!(e.code().as_str(), "E_DENIED");

    let a = tool_session(&fx.policy_file(), &[json!({"op":"exec","command":command})]);
    assert_eq!(a[0]["error"]["code"], "E_DENIED", "{}", a[0]);

    let mut m = Mcp::start(&fx);
    assert!(!m.tools().iter().any(|t| t == "exec"));
    assert_eq!(
        m.call("exec", json!({"command":command})),
        Err("RPC".into())
    );
    assert!(!marker.exists());
}

/// With `[exec]` off and confined git granted, git runs through every
/// door, but none of the programs a hostile repository names: a hook git
/// runs on an index write, `core.fsmonitor`, `core.sshCommand`, a pager,
/// clean and process filters and textconv drivers named in
/// `.gitattributes`, an external diff, gpg for signatures. Confinement is
/// off here so that a program that did run could leave its marker.
#[test]
fn with_exec_off_confined_git_runs_no_program_through_any_door() {
    let fx = Fixture::new(|o| {
        o.exec.enabled = false;
        o.exec.process_allow = vec!["git:status".into(), "git:diff".into(), "git:log".into()];
        o.exec.confine = Some(sandgate::policy::Confine::Off);
    });
    let ws = fx.ws();
    let git = |args: &[&str]| {
        let s = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(&ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", fx.base())
            .output()
            .unwrap();
        assert!(
            s.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&s.stderr)
        );
    };
    git(&["init", "-q"]);
    fs::write(ws.join(".gitattributes"), "*.txt filter=f diff=d\n").unwrap();
    git(&["add", "free.txt", ".gitattributes"]);
    git(&["commit", "-qm", "one"]);
    fs::write(ws.join("free.txt"), "changed\n").unwrap();
    let out = fx.base().join("outside");
    let mark = |name: &str| format!("touch {}/{name}", out.display());
    let mut config = fs::read_to_string(ws.join(".git/config")).unwrap();
    config.push_str(&format!(
        "[core]\n\tfsmonitor = \"{}\"\n\tsshCommand = \"{}\"\n\tpager = \"{}; cat\"\n\
         [filter \"f\"]\n\tclean = \"{}; cat\"\n\tsmudge = \"{}; cat\"\n\tprocess = \"{}\"\n\
         [diff \"d\"]\n\ttextconv = \"{}; cat\"\n\tcommand = \"{}\"\n\
         [diff]\n\texternal = \"{}\"\n[log]\n\tshowSignature = true\n[gpg]\n\tprogram = \"{}\"\n",
        mark("fsmonitor"),
        mark("ssh"),
        mark("pager"),
        mark("clean"),
        mark("smudge"),
        mark("process"),
        mark("textconv"),
        mark("diffcmd"),
        mark("external"),
        mark("gpg"),
    ));
    fs::write(ws.join(".git/config"), config).unwrap();
    for hook in ["post-index-change", "pre-commit", "post-checkout"] {
        let p = ws.join(".git/hooks").join(hook);
        fs::write(&p, format!("#!/bin/sh\n{}\n", mark(hook))).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let commands = ["git status", "git diff", "git log -p", "git diff HEAD"];
    let ex = Executor::from_policy(&fx.policy()).unwrap();
    for c in commands {
        let r = run(&ex, c);
        assert_eq!(
            r.exit_code,
            0,
            "rust {c}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    ex.dispose();
    let reqs: Vec<Value> = commands
        .iter()
        .map(|c| json!({"op":"exec","command":c}))
        .collect();
    for a in tool_session(&fx.policy_file(), &reqs) {
        assert_eq!(a["exit_code"], 0, "tool: {a}");
    }
    let mut m = Mcp::start(&fx);
    assert!(m.tools().iter().any(|t| t == "exec"));
    for c in commands {
        let text = m.call("exec", json!({"command":c})).unwrap();
        assert!(text.starts_with("exit code: 0"), "mcp {c}: {text}");
    }
    // The shell itself stays refused through each door.
    assert_eq!(
        m.call("exec", json!({"command":"echo hi"})),
        Err("E_DENIED".into())
    );
    let left: Vec<_> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "secret.txt")
        .collect();
    assert!(left.is_empty(), "programs ran: {left:?}");
}

/// With no `net.allow`, no door reaches the network: the fetch is refused
/// (and not listed by MCP), a command's connection to a host listener never
/// arrives (floor and namespaces), and confined git has no remote
/// subcommand.
#[test]
fn with_network_off_no_door_reaches_a_listener() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/");
    let fx = Fixture::new(|o| {
        o.exec.process_allow = vec!["git:status".into()];
    });
    let a = tool_session(&fx.policy_file(), &[json!({"op":"fetch","url":url})]);
    assert_eq!(a[0]["ok"], false, "{}", a[0]);
    let mut m = Mcp::start(&fx);
    assert!(!m.tools().iter().any(|t| t == "fetch"));
    assert_eq!(m.call("fetch", json!({"url":url})), Err("RPC".into()));
    for c in ["git fetch", "git push", "git ls-remote", "git clone x y"] {
        assert!(m.call("exec", json!({"command":c})).is_err(), "{c}");
    }
    drop(m);
    let probe = format!(
        "curl -s -m 3 {url}; python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3)'; true"
    );
    for namespaces in [false, true] {
        let ex = executor(&fx, namespaces);
        run(&ex, &probe);
        ex.dispose();
    }
    let a = tool_session(&fx.policy_file(), &[json!({"op":"exec","command":probe})]);
    assert_eq!(a[0]["ok"], true, "{}", a[0]);
    let mut m = Mcp::start(&fx);
    assert!(m.call("exec", json!({"command":probe})).is_ok());
    drop(m);
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
}

/// Without a write root, commands run in the first read root, and a
/// working directory there may be named by its root-relative name or its
/// absolute host path through every door that takes host paths (the
/// library and MCP; the JSON endpoint takes names only).
#[test]
fn every_exec_door_takes_a_working_directory_in_the_first_read_root() {
    let fx = Fixture::new(|o| {
        o.fs.read_roots.reverse();
        o.fs.write_root = None;
        o.fs.deny_write.clear();
        o.fs.allow_overwrite = false;
    });
    let sub = fx.base().join("ro/rsub");
    let abs = sub.display().to_string();
    let ex = Executor::from_policy(&fx.policy()).unwrap();
    for cwd in ["rsub", abs.as_str()] {
        let r = ex
            .exec(
                "pwd",
                ExecOptions {
                    cwd: Some(cwd.into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&r.stdout).trim(), abs, "rust {cwd}");
    }
    ex.dispose();
    let a = tool_session(
        &fx.policy_file(),
        &[json!({"op":"exec","command":"pwd","cwd":"rsub"})],
    );
    assert_eq!(
        a[0]["stdout"].as_str().unwrap().trim(),
        abs,
        "tool: {}",
        a[0]
    );
    let mut m = Mcp::start(&fx);
    for cwd in ["rsub", abs.as_str()] {
        let text = m.call("exec", json!({"command":"pwd","cwd":cwd}));
        assert!(
            text.as_ref().is_ok_and(|t| t.contains(&format!("{abs}\n"))),
            "mcp {cwd}: {text:?}"
        );
    }
    // Another read root is no place for a command: refused, not run in
    // the first root under the same name.
    let other = fx.base().join("ws/sub").display().to_string();
    assert_eq!(
        m.call("exec", json!({"command":"pwd","cwd":other})),
        Err("E_DENIED".into())
    );
    // The library (and the C ABI and bindings over it) answers the same.
    let ex = Executor::from_policy(&fx.policy()).unwrap();
    let r = ex.exec(
        "pwd",
        ExecOptions {
            cwd: Some(other.clone()),
            ..Default::default()
        },
    );
    assert_eq!(
        r.as_ref().map_err(|e| e.code()).err(),
        Some(sandgate::ErrorCode::Denied),
        "rust {other}: {r:?}"
    );
    ex.dispose();
}

/// A name ending in `/` or `/.` reaches only a directory, whichever door
/// it comes through and however it is spelled: a root-relative name, or
/// (through MCP) the absolute host path. The file is neither served nor
/// changed.
#[test]
fn every_door_takes_a_trailing_dot_as_a_directory() {
    let mut failures = Vec::new();
    for name in [
        "free.txt/",
        "free.txt/.",
        "free.txt/./",
        "sub/../free.txt/.",
    ] {
        let want = if name.contains("..") {
            "E_PATH_INVALID"
        } else {
            "E_NOT_DIR"
        };
        let ops = [
            Op::Read(name),
            Op::Write(name, "CHANGED".into()),
            Op::Edit(name, "free", "EDITED"),
        ];
        for (door, run) in FILE_DOORS {
            let fx = Fixture::new(|_| {});
            for (op, got) in ops.iter().zip(run(&fx, &ops)) {
                if got != Err(want.to_owned()) {
                    failures.push(format!("{door}: {op:?}: {got:?}"));
                }
            }
            assert_eq!(fs::read(fx.ws().join("free.txt")).unwrap(), b"free\n");
        }
    }
    for name in ["free.txt/", "free.txt/.", "free.txt/./", "free.txt//."] {
        let fx = Fixture::new(|_| {});
        let abs = format!("{}/{name}", fx.ws().display());
        let mut m = Mcp::start(&fx);
        for (tool, args) in [
            ("read_text_file", json!({"path":abs})),
            ("get_file_info", json!({"path":abs})),
            ("write_file", json!({"path":abs,"content":"CHANGED"})),
            (
                "edit_file",
                json!({"path":abs,"edits":[{"oldText":"free","newText":"EDITED"}]}),
            ),
        ] {
            let got = m.call(tool, args).map(drop);
            if got != Err("E_NOT_DIR".into()) {
                failures.push(format!("mcp: {tool} {abs}: {got:?}"));
            }
        }
        assert_eq!(
            fs::read(fx.ws().join("free.txt")).unwrap(),
            b"free\n",
            "{abs}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The write root grants the file tools no reads unless it is also a read
/// root, but a command (and confined git) reads it: it is the command's
/// working directory. The docs say so; this holds them to it, on the floor
/// and in namespaces.
#[test]
fn the_shell_reads_the_write_root_the_file_tools_do_not() {
    let fx = Fixture::new(|o| {
        o.fs.read_roots.retain(|r| !r.ends_with("ws"));
    });
    for (door, run) in FILE_DOORS {
        let got = run(&fx, &[Op::Read("free.txt")]).remove(0);
        assert!(got.is_err(), "{door}: {got:?}");
    }
    for namespaces in [false, true] {
        let ex = executor(&fx, namespaces);
        let r = run(&ex, "cat free.txt");
        assert_eq!(r.stdout, b"free\n", "namespaces={namespaces}");
        ex.dispose();
    }
}

/// The shell as the JSON endpoint and the MCP server run it (their own
/// executor, built from the policy file): a sample of the attacks above,
/// each checked on disk afterwards, and each reported back to the caller.
#[test]
fn the_endpoints_shells_leave_what_the_policy_guards_as_it_was() {
    let cells = [
        "echo PWN > Makefile; touch MAKEFILE x.loc\u{212a} 'Make\u{200d}file'",
        "echo PWN > sub/hl; mkdir Dockerfile; mkdir -p .GIT && echo x > .GIT/config",
        "mv conf conf2; echo PWN > {ro}/ro.txt; touch {out}/new.txt",
    ];
    let mut failures = Vec::new();
    for cell in cells {
        for door in ["tool", "mcp"] {
            let fx = Fixture::new(|_| {});
            let command = cell
                .replace("{ro}", &fx.base().join("ro").display().to_string())
                .replace("{out}", &fx.base().join("outside").display().to_string());
            let before = fx.snapshot();
            let reported = if door == "tool" {
                let a = tool_session(&fx.policy_file(), &[json!({"op":"exec","command":command})]);
                a[0]["protected_changes"].as_array().map_or(0, Vec::len)
            } else {
                let mut m = Mcp::start(&fx);
                let text = m.call("exec", json!({"command":command})).unwrap();
                text.matches("protected path ").count()
            };
            let after = fx.snapshot();
            if before != after {
                failures.push(format!("{door}: `{cell}`: {}", diff(&before, &after)));
            }
            if reported == 0 && !cell.starts_with("mv conf") {
                failures.push(format!("{door}: `{cell}`: no protected change reported"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What the file tools may not read, an edit does not show either: with a
/// write root that is not a read root (or a name an earlier read root
/// answers for), MCP's `edit_file` answer holds none of the file's lines,
/// dry run or not, while `read_text_file` is refused; where the name is
/// readable, the diff is answered as before.
#[test]
fn an_edit_shows_nothing_the_file_tools_may_not_read() {
    let body = "above-1\nabove-2\nTARGET\nbelow-1\nbelow-2\n";
    let edit = |path: &str, dry: bool| json!({"path":path,"dryRun":dry,"edits":[{"oldText":"TARGET","newText":"DONE"}]});
    // The write root is no read root.
    let fx = Fixture::new(|o| o.fs.read_roots.retain(|r| !r.ends_with("ws")));
    fs::write(fx.ws().join("e.txt"), body).unwrap();
    let abs = fx.ws().join("e.txt").display().to_string();
    let mut m = Mcp::start(&fx);
    assert!(m.call("read_text_file", json!({"path":"e.txt"})).is_err());
    assert!(m.call("read_text_file", json!({"path":abs})).is_err());
    for (path, dry) in [("e.txt", true), (abs.as_str(), true), ("e.txt", false)] {
        let text = m.call("edit_file", edit(path, dry)).unwrap();
        assert!(
            !text.contains("above-") && !text.contains("below-"),
            "{path} dry={dry}: {text}"
        );
    }
    assert_eq!(
        fs::read_to_string(fx.ws().join("e.txt")).unwrap(),
        body.replace("TARGET", "DONE")
    );
    drop(m);

    // An earlier read root answers for the name: the write root's copy is
    // not readable by it.
    let fx = Fixture::new(|o| o.fs.read_roots.reverse());
    fs::write(fx.base().join("ro/e.txt"), "the read root's copy\n").unwrap();
    fs::write(fx.ws().join("e.txt"), body).unwrap();
    let mut m = Mcp::start(&fx);
    let read = m.call("read_text_file", json!({"path":"e.txt"})).unwrap();
    assert!(read.contains("the read root's copy"), "{read}");
    let text = m.call("edit_file", edit("e.txt", true)).unwrap();
    assert!(
        !text.contains("above-") && !text.contains("below-"),
        "{text}"
    );

    // Readable: the diff, context and all.
    let fx = Fixture::new(|_| {});
    fs::write(fx.ws().join("e.txt"), body).unwrap();
    let mut m = Mcp::start(&fx);
    let text = m.call("edit_file", edit("e.txt", true)).unwrap();
    assert!(
        text.contains(" above-2\n-TARGET\n+DONE\n below-1"),
        "{text}"
    );
}

/// `fs.allow_overwrite = false` binds the file tools through every door;
/// a command replaces a file all the same (policy.md says so: only
/// `deny_write` binds the shell).
#[test]
fn allow_overwrite_binds_the_file_tools_not_the_shell() {
    let fx = Fixture::new(|o| o.fs.allow_overwrite = false);
    for (door, run) in FILE_DOORS {
        let got = run(
            &fx,
            &[
                Op::Write("free.txt", "CHANGED".into()),
                Op::Edit("free.txt", "free", "EDITED"),
            ],
        );
        // Replacing is refused as such; editing, which only replaces, is
        // a capability the sandbox lacks.
        assert_eq!(
            got,
            vec![Err("E_EXISTS".into()), Err("E_DENIED".into())],
            "{door}"
        );
        assert_eq!(fs::read(fx.ws().join("free.txt")).unwrap(), b"free\n");
    }
    let ex = executor(&fx, true);
    run(&ex, "echo CHANGED > free.txt");
    ex.dispose();
    assert_eq!(fs::read(fx.ws().join("free.txt")).unwrap(), b"CHANGED\n");
}

/// A read root inside the write root takes no write away: the file tools
/// write there, and so does a command, on the floor and in namespaces.
#[test]
fn a_read_root_inside_the_write_root_stays_writable_through_every_door() {
    let fx = Fixture::new(|o| {
        let ws = o.fs.write_root.clone().unwrap();
        o.fs.read_roots = vec![ws.join("sub"), o.fs.read_roots[1].clone()];
    });
    for (door, run) in FILE_DOORS {
        let name: &'static str = match *door {
            "rust" => "sub/by-rust",
            "tool" => "sub/by-tool",
            _ => "sub/by-mcp",
        };
        assert_eq!(
            run(&fx, &[Op::Write(name, "x".into())]),
            vec![Ok(())],
            "{door}"
        );
    }
    for namespaces in [false, true] {
        let ex = executor(&fx, namespaces);
        let r = run(&ex, &format!("echo x > sub/by-shell-{namespaces}"));
        ex.dispose();
        assert!(
            fx.ws().join(format!("sub/by-shell-{namespaces}")).is_file(),
            "namespaces={namespaces}: {}",
            String::from_utf8_lossy(&r.stderr).trim()
        );
    }
}

/// A write root that is not a read root shows nothing of its files through
/// any door: with a read root inside it, a file moved from the write-only
/// part into the read root is refused alike (`E_DENIED`) and a read by its
/// new name finds nothing; the endpoint's ranged read, stat, list, glob,
/// grep and edit, and MCP's info, listing, tree, search, grep and edit
/// answer none of its text, while the edit does apply.
#[test]
fn no_door_shows_a_write_only_file() {
    const TEXT: &str = "WRITE-ONLY-CONTENT\n";
    let fx = Fixture::new(|o| {
        let ws = o.fs.write_root.clone().unwrap();
        o.fs.read_roots = vec![ws.join("sub"), o.fs.read_roots[1].clone()];
    });
    for (door, run) in FILE_DOORS {
        fs::write(fx.ws().join("wo.txt"), TEXT).unwrap();
        fs::create_dir_all(fx.ws().join("wd")).unwrap();
        fs::write(fx.ws().join("wd/inner.txt"), TEXT).unwrap();
        let got = run(
            &fx,
            &[
                Op::Rename("wo.txt", "sub/wo.txt"),
                Op::Read("wo.txt"),
                Op::Rename("wd", "sub/wd"),
                Op::Read("wd/inner.txt"),
            ],
        );
        assert!(
            got[0] == Err("E_DENIED".into())
                && got[2] == Err("E_DENIED".into())
                && got[1].is_err()
                && got[3].is_err(),
            "{door}: {got:?}"
        );
        assert!(fx.ws().join("wo.txt").is_file() && !fx.ws().join("sub/wo.txt").exists());
        assert!(fx.ws().join("wd/inner.txt").is_file() && !fx.ws().join("sub/wd").exists());
    }

    let answers = tool_session(
        &fx.policy_file(),
        &[
            json!({"op":"read","path":"wo.txt","offset":1,"limit":5}),
            json!({"op":"stat","path":"wo.txt"}),
            json!({"op":"list","path":"."}),
            json!({"op":"glob","pattern":"**"}),
            json!({"op":"grep","pattern":"WRITE-ONLY"}),
            json!({"op":"edit","path":"wo.txt","old":"CONTENT","new":"TEXT"}),
        ],
    );
    let shown = answers
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!shown.contains("WRITE-ONLY"), "{shown}");
    assert!(
        answers[2..5]
            .iter()
            .all(|a| !a.to_string().contains("wo.txt")),
        "{shown}"
    );
    assert!(
        answers[0]["ok"] == json!(false) && answers[1]["ok"] == json!(false),
        "{shown}"
    );
    assert_eq!(answers[5], json!({"ok":true,"replacements":1}));
    assert_eq!(
        fs::read_to_string(fx.ws().join("wo.txt")).unwrap(),
        "WRITE-ONLY-TEXT\n"
    );

    let ws = fx.ws().display().to_string();
    let abs = format!("{ws}/wo.txt");
    let mut m = Mcp::start(&fx);
    let calls = [
        ("read_text_file", json!({"path":abs, "head": 1})),
        ("get_file_info", json!({"path":abs})),
        ("list_directory", json!({"path":ws})),
        ("directory_tree", json!({"path":ws})),
        ("search_files", json!({"path":ws,"pattern":"**/*.txt"})),
        ("grep", json!({"pattern":"WRITE-ONLY"})),
        (
            "edit_file",
            json!({"path":abs,"dryRun":true,"edits":[{"oldText":"TEXT","newText":"X"}]}),
        ),
    ];
    for (tool, args) in calls {
        let got = m.call(tool, args);
        let text = match &got {
            Ok(t) | Err(t) => t,
        };
        assert!(!text.contains("WRITE-ONLY"), "{tool}: {got:?}");
        // What reads the write root's path is refused as a read of it.
        if !matches!(tool, "grep" | "edit_file") {
            assert_eq!(got, Err("E_DENIED".into()), "{tool}");
        }
    }
}
