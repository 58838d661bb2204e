//! Confined git against a real git and a hostile repository: every program
//! the repository config names (fsmonitor, external diff, pager, textconv,
//! diff command, hooks, clean/smudge/process filters, gpg) writes its own
//! sentinel file, and no confined run may create one. Plus the refusals of
//! the word splitter and the schema, and bounded repository discovery.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sandgate_codes::ErrorCode;
use sandgate_shellexec::confine::{prepare, ConfineMode, ConfineSpec, Prepared};
use sandgate_shellexec::exec::{
    ExecConfig, ExecOptions, ExecResult, LocalShellExecutor, ShellExecutor,
};
use sandgate_shellexec::git::{
    find_git, plan, split_words, GitErrorKind, GitInvocation, GitSubcommand,
};
use sha2::{Digest, Sha256};

const ALL: [GitSubcommand; 3] = GitSubcommand::ALL;

fn have_git() -> bool {
    if find_git().is_some() {
        true
    } else {
        eprintln!("note: no git at /usr/bin/git, /usr/local/bin/git or /bin/git; skipped");
        false
    }
}

/// Plain git for building fixtures: no host config, fixed identity.
fn raw_git(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(find_git().unwrap())
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
        .unwrap();
    assert!(
        out.status.success(),
        "fixture git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    sentinels: PathBuf,
}

impl Fixture {
    fn sentinels(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.sentinels)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn clear_sentinels(&self) {
        for e in fs::read_dir(&self.sentinels).unwrap() {
            fs::remove_file(e.unwrap().path()).unwrap();
        }
    }

    fn config(&self, key: &str, value: &str) {
        raw_git(&self.root, &["config", key, value]);
    }

    /// Plans a request and runs it as the executor does, from its argv,
    /// but with no kernel confinement: what keeps the repository's
    /// programs from running here is the plan alone.
    fn run(&self, request: &str) -> ExecResult {
        let words = split_words(request).unwrap();
        let inv = plan(&words, &ALL, &self.root).unwrap_or_else(|e| panic!("{request}: {e}"));
        exec_unconfined(&inv)
    }

    /// Runs a request, asserts exit 0 and no sentinel; returns stdout.
    /// Then runs it again as the executor does, under git's read-only
    /// ruleset, and asserts the same answer: git needs no more.
    fn run_clean(&self, request: &str) -> String {
        let out = self.run(request);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.exit_code == 0,
            "{request}: exit {}\nstdout: {stdout}\nstderr: {}",
            out.exit_code,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            self.sentinels(),
            Vec::<String>::new(),
            "{request} ran a program named by the repository config"
        );
        let confined = self.run_confined(request);
        assert_eq!(
            (confined.exit_code, &confined.stdout),
            (0, &out.stdout),
            "{request} under git's ruleset: {}",
            String::from_utf8_lossy(&confined.stderr)
        );
        stdout
    }

    /// Plans and runs a request through the executor, confined by git's
    /// own ruleset.
    fn run_confined(&self, request: &str) -> ExecResult {
        let words = split_words(request).unwrap();
        let inv = plan(&words, &ALL, &self.root).unwrap();
        let prepared = prepare(&inv.confine_spec(), ConfineMode::BestEffort).unwrap();
        exec_planned(&inv, &prepared)
    }
}

/// Runs a planned invocation the way the facade's confined git does: the
/// executor's argv entry point, git's program, argv and complete
/// environment, in the invocation's directory (by descriptor).
fn exec_planned(inv: &GitInvocation, prepared: &Prepared) -> ExecResult {
    exec_planned_within(inv, prepared, None)
}

/// [`exec_planned`] ended after `timeout` when given.
fn exec_planned_within(
    inv: &GitInvocation,
    prepared: &Prepared,
    timeout: Option<std::time::Duration>,
) -> ExecResult {
    let ex = LocalShellExecutor::new(ExecConfig::default());
    ex.start().unwrap();
    let cwd = fs::File::open(&inv.cwd).unwrap();
    let opts = ExecOptions {
        cwd: Some(cwd.into()),
        timeout,
        ..ExecOptions::default()
    };
    ex.exec_program(&inv.program, &inv.args, &inv.env, prepared, opts)
        .unwrap()
}

/// [`exec_planned`] with confinement off and no file-size limit, so that
/// nothing but the plan stands between git and the repository's programs.
fn exec_unconfined(inv: &GitInvocation) -> ExecResult {
    let prepared = prepare(&ConfineSpec::default(), ConfineMode::Off).unwrap();
    exec_planned(inv, &prepared)
}

fn script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A repository at `<tmp>/root` with three commits, whose config names a
/// sentinel-writing program at every place git might run one, and whose
/// tracked files are modified (same size and old mtime for the filtered
/// ones, so git must read them through the clean filter to compare).
fn hostile() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("root");
    let sentinels = base.join("sentinels");
    let scripts = base.join("scripts");
    let hooks = scripts.join("hooks");
    for d in [&root, &sentinels, &scripts, &hooks] {
        fs::create_dir_all(d).unwrap();
    }
    raw_git(&root, &["init", "-q", "."]);
    fs::write(root.join("a.rs"), "fn main() {}\n").unwrap();
    fs::write(root.join("notes.txt"), "one\n").unwrap();
    fs::write(root.join("data.dat"), "aaaa\n").unwrap();
    fs::write(root.join("blob.bin"), "bbbb\n").unwrap();
    raw_git(&root, &["add", "."]);
    raw_git(&root, &["commit", "-q", "-m", "first"]);
    fs::write(root.join("a.rs"), "fn main() { println!(); }\n").unwrap();
    raw_git(&root, &["commit", "-q", "-a", "-m", "second"]);
    fs::write(
        root.join(".gitattributes"),
        "*.txt diff=evil\n*.dat filter=evil\n*.bin filter=evil2\n*.rs diff=evil\n",
    )
    .unwrap();
    fs::write(root.join("notes.txt"), "two\n").unwrap();
    raw_git(&root, &["add", "."]);
    raw_git(&root, &["commit", "-q", "-m", "third"]);
    // Re-create the third commit with a (bogus) PGP signature, so that
    // `log.showSignature` has something to hand to `gpg.program`.
    let head = raw_git(&root, &["cat-file", "commit", "HEAD"]).stdout;
    let head = String::from_utf8(head).unwrap();
    let (headers, message) = head.split_once("\n\n").unwrap();
    let signed = format!(
        "{headers}\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n =abcd\n \
         -----END PGP SIGNATURE-----\n\n{message}"
    );
    let object = base.join("signed-commit");
    fs::write(&object, signed).unwrap();
    let oid = raw_git(
        &root,
        &[
            "hash-object",
            "-t",
            "commit",
            "-w",
            object.to_str().unwrap(),
        ],
    )
    .stdout;
    let oid = String::from_utf8(oid).unwrap();
    raw_git(&root, &["update-ref", "HEAD", oid.trim()]);

    let s = |name: &str| format!("touch '{}'", sentinels.join(name).display());
    script(&scripts.join("fsmonitor"), &s("fsmonitor"));
    script(&scripts.join("external"), &s("diff-external"));
    script(&scripts.join("pager"), &format!("{}\ncat", s("core-pager")));
    script(
        &scripts.join("pager-cmd"),
        &format!("{}\ncat", s("pager-cmd")),
    );
    script(
        &scripts.join("textconv"),
        &format!("{}\ncat \"$1\"", s("textconv")),
    );
    script(&scripts.join("diffcmd"), &s("diff-command"));
    script(
        &scripts.join("clean"),
        &format!("{}\ncat", s("filter-clean")),
    );
    script(
        &scripts.join("smudge"),
        &format!("{}\ncat", s("filter-smudge")),
    );
    script(
        &scripts.join("process"),
        &format!("{}\nexit 1", s("filter-process")),
    );
    script(
        &scripts.join("clean2"),
        &format!("{}\ncat", s("filter2-clean")),
    );
    script(&scripts.join("gpg"), &s("gpg"));
    script(&scripts.join("askpass"), &s("askpass"));
    for hook in sandgate_shellexec::GIT_HOOKS {
        script(&hooks.join(hook), &s(&format!("hooks-path-{hook}")));
        script(
            &root.join(".git/hooks").join(hook),
            &s(&format!("git-hooks-{hook}")),
        );
    }

    let f = Fixture {
        _tmp: tmp,
        root,
        sentinels,
    };
    let p = |name: &str| scripts.join(name).display().to_string();
    f.config("core.fsmonitor", &p("fsmonitor"));
    f.config("diff.external", &p("external"));
    f.config("core.pager", &p("pager"));
    for cmd in ["status", "diff", "log"] {
        f.config(&format!("pager.{cmd}"), &p("pager-cmd"));
    }
    f.config("diff.evil.textconv", &p("textconv"));
    f.config("diff.evil.command", &p("diffcmd"));
    f.config("core.hooksPath", &hooks.display().to_string());
    f.config("filter.evil.clean", &p("clean"));
    f.config("filter.evil.smudge", &p("smudge"));
    f.config("filter.evil.required", "true");
    f.config("filter.evil2.process", &p("process"));
    f.config("filter.evil2.clean", &p("clean2"));
    f.config("log.showSignature", "true");
    f.config("gpg.program", &p("gpg"));
    f.config("core.askPass", &p("askpass"));
    f.config("credential.helper", &p("askpass"));
    f.config("pretty.evil", "%GS %h");
    f.config("alias.status", "!touch /nonexistent-alias");

    // Work for status and diff: same size, old mtime for filtered files.
    fs::write(f.root.join("data.dat"), "AAAA\n").unwrap();
    fs::write(f.root.join("blob.bin"), "BBBB\n").unwrap();
    fs::write(f.root.join("notes.txt"), "three\n").unwrap();
    fs::write(f.root.join("a.rs"), "fn main() { println!(\"x\"); }\n").unwrap();
    fs::write(f.root.join("untracked.txt"), "new\n").unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    for name in ["data.dat", "blob.bin"] {
        fs::File::options()
            .write(true)
            .open(f.root.join(name))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    f.clear_sentinels();
    f
}

/// The fixture really is hostile: plain git (same clean environment, but
/// none of the confined overrides) runs its programs.
#[test]
fn control_unconfined_git_runs_the_hostile_programs() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let unconfined = |args: &[&str]| {
        Command::new(find_git().unwrap())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/nonexistent")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .current_dir(&f.root)
            .output()
            .unwrap()
    };
    unconfined(&["status", "--short"]);
    let after_status = f.sentinels();
    eprintln!("unconfined status ran: {after_status:?}");
    assert!(
        after_status.contains(&"fsmonitor".to_string()),
        "{after_status:?}"
    );
    assert!(
        after_status.contains(&"filter-process".to_string()),
        "{after_status:?}"
    );
    // The failing process filter stops git; without it the clean filter
    // and the external diff run.
    raw_git(&f.root, &["config", "--unset", "filter.evil2.process"]);
    f.clear_sentinels();
    unconfined(&["status", "--short"]);
    let after_status = f.sentinels();
    eprintln!("unconfined status ran: {after_status:?}");
    assert!(
        after_status.contains(&"filter-clean".to_string()),
        "{after_status:?}"
    );
    assert!(
        after_status.contains(&"hooks-path-post-index-change".to_string()),
        "{after_status:?}"
    );
    f.clear_sentinels();
    unconfined(&["diff"]);
    let after_diff = f.sentinels();
    eprintln!("unconfined diff ran: {after_diff:?}");
    assert!(
        after_diff.contains(&"diff-external".to_string()),
        "{after_diff:?}"
    );
    assert!(
        after_diff.contains(&"diff-command".to_string()),
        "{after_diff:?}"
    );
    f.clear_sentinels();
    unconfined(&["diff", "--no-ext-diff", "--", "notes.txt"]);
    assert!(f.sentinels().contains(&"textconv".to_string()));
    f.clear_sentinels();
    unconfined(&["log", "-1"]);
    assert!(f.sentinels().contains(&"gpg".to_string()));
}

#[test]
fn status_runs_nothing_from_the_repository() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let out = f.run_clean("git status");
    assert!(out.contains("modified:"), "{out}");
    let out = f.run_clean("git status --short");
    for name in ["a.rs", "notes.txt", "data.dat", "blob.bin"] {
        assert!(out.contains(&format!(" M {name}")), "{name}: {out}");
    }
    assert!(out.contains("?? untracked.txt"), "{out}");
    let out = f.run_clean("git status --porcelain=v2 -b");
    assert!(out.contains("# branch.head main"), "{out}");
    f.run_clean("git status -s -- data.dat");
    f.run_clean("git status --untracked-files=all --ignored");
}

#[test]
fn diff_runs_nothing_from_the_repository() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let out = f.run_clean("git diff");
    assert!(out.contains("diff --git a/data.dat b/data.dat"), "{out}");
    assert!(out.contains("+AAAA"), "{out}");
    assert!(out.contains("+three"), "{out}");
    let out = f.run_clean("git diff --stat");
    assert!(out.contains("4 files changed"), "{out}");
    let out = f.run_clean("git diff --stat HEAD~1 -- notes.txt");
    assert!(out.contains("notes.txt"), "{out}");
    f.run_clean("git diff --cached");
    f.run_clean("git diff HEAD~2..HEAD");
    f.run_clean("git diff -U5 --word-diff HEAD -- a.rs");
    f.run_clean("git diff --name-status HEAD~2 HEAD");
}

#[test]
fn log_runs_nothing_from_the_repository() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let out = f.run_clean("git log -n 3 --stat");
    assert!(out.contains("third") && out.contains("first"), "{out}");
    assert!(out.contains("notes.txt"), "{out}");
    let out = f.run_clean("git log --oneline");
    assert_eq!(out.lines().count(), 3, "{out}");
    let out = f.run_clean("git log -p -1");
    assert!(out.contains("+two"), "{out}");
    let out = f.run_clean("git log --format='%h %an: %s' HEAD~2..HEAD");
    assert!(out.contains("Fixture: third"), "{out}");
    f.run_clean("git log --pretty=fuller --date=iso -2 -- a.rs");
    f.run_clean("git log --max-count=2 --author=Fixture --since='2000-01-01'");
}

/// The repository config cannot colour confined git's output: with every
/// colour switch git consults set to `always` there, no answer holds an
/// escape sequence git added (`git status -s` stays `?? name`, the diff
/// and the log plain text).
#[test]
fn repository_colour_settings_never_reach_the_output() {
    if !have_git() {
        return;
    }
    let f = hostile();
    for key in [
        "color.ui",
        "color.diff",
        "color.status",
        "color.branch",
        "color.decorate",
        "color.advice",
        "color.grep",
    ] {
        f.config(key, "always");
    }
    for request in [
        "git status",
        "git status -s -b",
        "git diff",
        "git diff --stat",
        "git log -n 2 -p --decorate --graph",
        "git log --oneline --decorate",
        "git log --format='%h %C(red)%s%Creset'",
    ] {
        let out = f.run(request);
        assert!(
            !out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b),
            "{request} printed escape sequences the repository config asked for: {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        let confined = f.run_confined(request);
        assert_eq!(
            (confined.exit_code, &confined.stdout),
            (out.exit_code, &out.stdout),
            "{request} under git's ruleset: {}",
            String::from_utf8_lossy(&confined.stderr)
        );
    }
    let out = f.run_clean("git status -s");
    assert!(out.contains("?? untracked.txt"), "{out}");
}

/// The repository config cannot choose the log format the request did not
/// name: `format.pretty` there would bring back what `--format` refuses,
/// `%(describe)` (git starts `git describe` for every commit) and `%G`
/// (signature atoms). A plain `git log` shows git's default format.
#[test]
fn the_repository_cannot_choose_the_log_format() {
    if !have_git() {
        return;
    }
    let f = hostile();
    raw_git(
        &f.root,
        &["tag", "-a", "v7-from-describe", "-m", "t", "HEAD~1"],
    );
    // The fixture's own git ran the repository's hooks.
    f.clear_sentinels();
    f.config("format.pretty", "format:described=%(describe) sig=%G? %h");
    let out = f.run_clean("git log -n 2");
    assert!(
        !out.contains("described=") && !out.contains("sig="),
        "git log used the repository's format.pretty: {out}"
    );
    assert!(
        out.starts_with("commit ") && out.contains("Author: Fixture"),
        "{out}"
    );
    // What the request names still applies.
    let out = f.run_clean("git log --oneline -n 1");
    assert!(
        out.contains("third") && !out.contains("described="),
        "{out}"
    );
}

/// What the repository holds reaches the caller as git prints it, escape
/// sequences included (documented: the answer is not escaped): a commit
/// message with a terminal escape and an OSC sequence comes back byte for
/// byte, and so does file content in a diff; git itself quotes a file
/// name holding a control character (`"n\033[2Jx"`), except with `-z`.
#[test]
fn escape_sequences_in_the_repository_reach_the_caller_raw() {
    if !have_git() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (root, sentinels) = (base.join("root"), base.join("sentinels"));
    fs::create_dir(&root).unwrap();
    fs::create_dir(&sentinels).unwrap();
    raw_git(&root, &["init", "-q", "."]);
    fs::write(root.join("a.rs"), "fn main() {}\n").unwrap();
    raw_git(&root, &["add", "."]);
    let message = "hostile \x1b[2J\x1b]52;c;aGk=\x07 end";
    raw_git(&root, &["commit", "-q", "-m", message]);
    fs::write(root.join("a.rs"), "fn main() {} // \x1b[31mred\n").unwrap();
    fs::write(root.join("n\x1b[2Jx"), "x\n").unwrap();
    let f = Fixture {
        _tmp: tmp,
        root,
        sentinels,
    };
    let out = f.run_clean("git log -n 1 --format=%s");
    assert_eq!(out, format!("{message}\n"));
    let out = f.run_clean("git diff -- a.rs");
    assert!(out.contains("+fn main() {} // \x1b[31mred"), "{out:?}");
    let out = f.run_clean("git status -s");
    assert!(out.contains("?? \"n\\033[2Jx\""), "{out:?}");
    let out = f.run_clean("git status -s -z");
    assert!(out.contains("?? n\x1b[2Jx\0"), "{out:?}");
}

/// `core.worktree` in the repository config cannot point git elsewhere.
#[test]
fn core_worktree_is_overridden() {
    if !have_git() {
        return;
    }
    let f = hostile();
    f.config("core.worktree", "/etc");
    let out = f.run_clean("git status --short");
    assert!(out.contains(" M a.rs"), "{out}");
    assert!(!out.contains("passwd") && !out.contains(" D "), "{out}");
}

/// Config keys that make git read another file are overridden
/// (`mailmap.file`, `core.excludesFile`, `diff.orderFile`): a repository
/// config naming a file outside the root never shapes the answer (the
/// mailmap's names, the ignore patterns and the order would each show what
/// that file holds), and one naming a FIFO never holds git until the
/// timeout. The in-tree `.mailmap` and `.gitignore` still apply.
#[test]
fn files_the_repository_config_names_are_never_read() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let outside = f.root.parent().unwrap().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(
        outside.join("mailmap"),
        "Secret Name <fixture@example.invalid>\n",
    )
    .unwrap();
    fs::write(outside.join("ignore"), "untracked.txt\n").unwrap();
    fs::write(outside.join("order"), "notes.txt\n*\n").unwrap();
    let p = |name: &str| outside.join(name).display().to_string();
    f.config("mailmap.file", &p("mailmap"));
    f.config("core.excludesFile", &p("ignore"));
    f.config("diff.orderFile", &p("order"));
    let out = f.run_clean("git log -n 1 --format=%aN");
    assert_eq!(out, "Fixture\n", "mailmap.file was read");
    let out = f.run_clean("git status --short --ignored");
    assert!(
        out.contains("?? untracked.txt"),
        "core.excludesFile was read: {out}"
    );
    let out = f.run_clean("git diff --name-only");
    assert_eq!(
        out, "a.rs\nblob.bin\ndata.dat\nnotes.txt\n",
        "diff.orderFile was read"
    );

    // What the tree itself holds still counts.
    fs::write(
        f.root.join(".mailmap"),
        "Tree Name <fixture@example.invalid>\n",
    )
    .unwrap();
    fs::write(f.root.join(".gitignore"), "untracked.txt\n").unwrap();
    assert_eq!(f.run_clean("git log -n 1 --format=%aN"), "Tree Name\n");
    let out = f.run_clean("git status --short --ignored");
    assert!(out.contains("!! untracked.txt"), "{out}");

    // A FIFO in the root (which git's ruleset may read) as the order file.
    let fifo = f.root.join("order.fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    f.config("diff.orderFile", &fifo.display().to_string());
    let inv = plan(&split_words("git diff --name-only").unwrap(), &ALL, &f.root).unwrap();
    let out = run_with_timeout(&inv, 5);
    assert_eq!(
        (out.exit_code, out.limit),
        (0, None),
        "a FIFO as diff.orderFile held git: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// git quotes a file name holding a control character, the C1 ones
/// included (U+009B is a one-character CSI, `\u{9b}2J` clears some
/// terminals), whatever the repository's `core.quotePath` says: with
/// `false` there, git printed every non-ASCII byte as it is.
#[test]
fn file_names_are_quoted_whatever_the_repository_says() {
    if !have_git() {
        return;
    }
    let f = hostile();
    f.config("core.quotePath", "false");
    let name = "n\u{9b}2Jx";
    fs::write(f.root.join(name), "x\n").unwrap();
    fs::write(f.root.join("m\u{9b}2Jy"), "y\n").unwrap();
    raw_git(&f.root, &["add", "--", name]);
    f.clear_sentinels();
    for request in [
        "git status --short",
        "git status --porcelain=v2",
        "git diff --cached --stat",
        "git diff --cached --name-status",
    ] {
        let out = f.run_clean(request);
        assert!(
            !out.contains('\u{9b}'),
            "{request} printed a C1 control character raw: {out:?}"
        );
        assert!(out.contains("\"n\\302\\2332Jx\""), "{request}: {out:?}");
    }
}

/// `objects/info/alternates` names object directories that git reads as
/// its own: one outside the root made `git log -p <id>` print a commit of
/// another repository on the host (and under git's ruleset, one in the
/// system directories, such as an `/etc/.git`). A repository that
/// borrows objects is refused, naming the file; one whose alternates file
/// holds only comments is not.
#[test]
fn borrowed_objects_are_refused() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let other = f.root.parent().unwrap().join("other");
    fs::create_dir(&other).unwrap();
    raw_git(&other, &["init", "-q", "."]);
    fs::write(other.join("s"), "TOP SECRET\n").unwrap();
    raw_git(&other, &["add", "."]);
    raw_git(&other, &["commit", "-q", "-m", "elsewhere"]);
    let id = raw_git(&other, &["rev-parse", "HEAD"]).stdout;
    let id = String::from_utf8(id).unwrap().trim().to_string();
    let alternates = f.root.join(".git/objects/info/alternates");
    fs::create_dir_all(alternates.parent().unwrap()).unwrap();
    let request = format!("git log -p -n 1 {id}");
    for line in [
        other.join(".git/objects").display().to_string(),
        "../../../other/.git/objects".to_string(),
    ] {
        fs::write(&alternates, format!("# borrowed\n{line}\n")).unwrap();
        match plan(&split_words(&request).unwrap(), &ALL, &f.root) {
            Ok(inv) => {
                let out = exec_unconfined(&inv);
                panic!(
                    "borrowed objects were admitted ({line}): exit {}, {:?}",
                    out.exit_code,
                    String::from_utf8_lossy(&out.stdout)
                );
            }
            Err(e) => {
                assert_eq!(e.kind(), GitErrorKind::Repository, "{e}");
                assert!(e.message().contains("objects/info/alternates"), "{e}");
                assert!(!e.message().contains(&*other.to_string_lossy()), "{e}");
            }
        }
    }
    fs::write(&alternates, "# nothing borrowed\n\n").unwrap();
    let out = f.run_clean("git log --oneline -n 1");
    assert!(out.contains("third"), "{out}");
    // Written after the vetting: git reads its own, empty, objects/info.
    let inv = plan(&split_words(&request).unwrap(), &ALL, &f.root).unwrap();
    fs::write(
        &alternates,
        format!("{}\n", other.join(".git/objects").display()),
    )
    .unwrap();
    let out = exec_unconfined(&inv);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.exit_code != 0 && !stdout.contains("TOP SECRET"),
        "alternates written after the vetting were followed: {stdout}"
    );
}

/// A root that is a subdirectory of an enclosing repository (no .git of its
/// own): git stops at the root and does not read the enclosing repository.
#[test]
fn discovery_stops_at_the_root() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let sub = f.root.join("subdir");
    fs::create_dir(&sub).unwrap();
    fs::write(sub.join("x.rs"), "x\n").unwrap();
    for request in ["git status", "git log --oneline"] {
        let inv = plan(&split_words(request).unwrap(), &ALL, &sub).unwrap();
        let out = exec_unconfined(&inv);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.exit_code != 0, "{request}");
        assert!(
            stderr.contains("not a git repository"),
            "{request}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{request}");
    }
    let err = plan(&split_words("git diff").unwrap(), &ALL, &sub).unwrap_err();
    assert!(err.message().contains("not a git repository"), "{err}");
    assert_eq!(err.code(), ErrorCode::Denied);
    assert_eq!(f.sentinels(), Vec::<String>::new());
}

/// A `.git` that git will not take as a repository (an empty directory, a
/// format version from the future, an unknown extension) makes git diff
/// fall back to its no-index mode, where `git diff a b` compares two
/// arbitrary paths, through symbolic links too: here `/etc/passwd`, which
/// git's own ruleset may read. The request never reaches that mode.
#[test]
fn diff_never_falls_back_to_no_index() {
    if !have_git() {
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let root = empty.path().canonicalize().unwrap();
    fs::create_dir(root.join(".git")).unwrap();
    let future = hostile();
    let cfg = future.root.join(".git/config");
    let text = fs::read_to_string(&cfg).unwrap();
    fs::write(
        &cfg,
        text.replace(
            "repositoryformatversion = 0",
            "repositoryformatversion = 99",
        ),
    )
    .unwrap();
    let unknown = hostile();
    unknown.config("core.repositoryformatversion", "1");
    unknown.config("extensions.unheardOf", "true");
    for root in [&root, &future.root, &unknown.root] {
        fs::write(root.join("a.rs"), "mine\n").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
        for request in [
            "git diff etc/passwd a.rs",
            "git diff --stat etc/passwd a.rs",
        ] {
            let inv = plan(&split_words(request).unwrap(), &ALL, root).unwrap();
            let prepared = prepare(&inv.confine_spec(), ConfineMode::BestEffort).unwrap();
            for out in [exec_planned(&inv, &prepared), exec_unconfined(&inv)] {
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.exit_code != 0 && out.stdout.is_empty(),
                    "{request} compared two paths: exit {}\n{stdout}",
                    out.exit_code
                );
            }
        }
    }
}

/// The index names the files git compares with the work tree, and git
/// takes those names as they are when it reads the index: an entry
/// `../../…/etc/passwd`, planted by hand (git itself would never write
/// one), makes `git diff` read and print `/etc/passwd`, which git's own
/// ruleset may read. Such a repository is refused.
#[test]
fn an_index_entry_outside_the_root_is_never_read() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let outside = "../../../../../../../../../../etc/passwd";
    let placeholder: String = outside
        .chars()
        .map(|c| if c == '/' { '_' } else { 'x' })
        .collect();
    fs::write(f.root.join(&placeholder), "mine\n").unwrap();
    raw_git(&f.root, &["add", "--", &placeholder]);
    // git does not check the index checksum when it reads the index
    // (only fsck does), so the name is replaced in place.
    let index = f.root.join(".git/index");
    let mut bytes = fs::read(&index).unwrap();
    let at = bytes
        .windows(placeholder.len())
        .position(|w| w == placeholder.as_bytes())
        .unwrap();
    bytes[at..at + outside.len()].copy_from_slice(outside.as_bytes());
    fs::write(&index, bytes).unwrap();
    for request in ["git diff", "git diff --stat", "git status --short"] {
        // Refused before git runs: git itself would read the name as it is.
        let e = plan(&split_words(request).unwrap(), &ALL, &f.root)
            .err()
            .unwrap_or_else(|| panic!("{request}: the index entry outside the root was admitted"));
        assert_eq!(e.kind(), GitErrorKind::Repository, "{request}: {e}");
        assert!(e.message().contains("index"), "{request}: {e}");
    }
}

/// The indexes git itself writes pass the vetting: versions 2, 3 (an
/// intent-to-add entry) and 4 (prefix compressed), SHA-256 object names,
/// an untracked cache; a split index is refused, naming why.
#[test]
fn indexes_git_writes_are_admitted() {
    if !have_git() {
        return;
    }
    let repo = |init: &[&str]| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap().join("root");
        fs::create_dir_all(root.join("src/deep/er")).unwrap();
        raw_git(&root, init);
        for name in [
            "a.rs",
            "src/a.rs",
            "src/ab.rs",
            "src/deep/er/x.rs",
            "src/deep/y.rs",
        ] {
            fs::write(root.join(name), name).unwrap();
        }
        raw_git(&root, &["add", "."]);
        raw_git(&root, &["commit", "-q", "-m", "one"]);
        fs::write(root.join("src/ab.rs"), "changed\n").unwrap();
        (tmp, root)
    };
    let check = |root: &Path, what: &str| {
        for request in ["git status --short", "git diff --stat"] {
            let inv = plan(&split_words(request).unwrap(), &ALL, root)
                .unwrap_or_else(|e| panic!("{what}: {request}: {e}"));
            let out = exec_unconfined(&inv);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.exit_code, 0, "{what}: {request}: {stdout}");
            assert!(stdout.contains("src/ab.rs"), "{what}: {request}: {stdout}");
        }
    };
    let (_t, root) = repo(&["init", "-q", "."]);
    check(&root, "version 2");
    raw_git(&root, &["update-index", "--index-version", "4"]);
    check(&root, "version 4");
    fs::write(root.join("src/new.rs"), "new\n").unwrap();
    raw_git(&root, &["add", "-N", "src/new.rs"]);
    raw_git(&root, &["update-index", "--index-version", "3"]);
    check(&root, "version 3");
    raw_git(&root, &["update-index", "--untracked-cache"]);
    raw_git(&root, &["-c", "core.untrackedCache=true", "status"]);
    check(&root, "untracked cache");
    let (_t, root) = repo(&["init", "-q", "--object-format=sha256", "."]);
    raw_git(&root, &["update-index", "--index-version", "4"]);
    check(&root, "sha256");
    raw_git(&root, &["update-index", "--split-index"]);
    let err = plan(&split_words("git status").unwrap(), &ALL, &root).unwrap_err();
    assert!(err.message().contains("split"), "{err}");
}

/// git reads many files in `.git` besides the config, and several of them
/// echo what they hold when it does not parse: the lines of
/// `objects/info/alternates`, the first line of `packed-refs` or `shallow`,
/// the words of `info/attributes`. A symbolic link there to a host file
/// (here `/etc/passwd`, which git's own ruleset may read) would show that
/// file to the caller. Symbolic links in `.git` are refused where git
/// reads; the hooks (never run) may still be links.
#[test]
fn a_symlink_in_dot_git_never_shows_a_host_file() {
    if !have_git() {
        return;
    }
    for place in [
        "packed-refs",
        "shallow",
        "objects/info/alternates",
        "info/attributes",
        "rebase-merge",
    ] {
        let f = hostile();
        let at = f.root.join(".git").join(place);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        let _ = fs::remove_file(&at);
        if place == "rebase-merge" {
            // A directory git reads for status ("rebase in progress").
            let elsewhere = f.sentinels.parent().unwrap().join("rebase");
            fs::create_dir(&elsewhere).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", elsewhere.join("done")).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", elsewhere.join("git-rebase-todo")).unwrap();
            fs::write(elsewhere.join("head-name"), "refs/heads/main\n").unwrap();
            fs::write(
                elsewhere.join("onto"),
                "0000000000000000000000000000000000000000\n",
            )
            .unwrap();
            fs::write(elsewhere.join("interactive"), "").unwrap();
            std::os::unix::fs::symlink(&elsewhere, &at).unwrap();
        } else {
            std::os::unix::fs::symlink("/etc/passwd", &at).unwrap();
        }
        for request in ["git status", "git log --oneline -1", "git diff --stat"] {
            // Refused before git runs: git would follow the link.
            let e = plan(&split_words(request).unwrap(), &ALL, &f.root)
                .err()
                .unwrap_or_else(|| panic!("{request}: .git/{place}, a link, was admitted"));
            assert_eq!(e.kind(), GitErrorKind::Repository, "{place}: {e}");
            assert!(e.message().contains("symbolic link"), "{place}: {e}");
        }
    }
    // Linked hooks are common and never run: still admitted.
    let f = hostile();
    let hooks = f.root.join(".git/hooks");
    fs::remove_dir_all(&hooks).unwrap();
    std::os::unix::fs::symlink(f.sentinels.parent().unwrap().join("scripts/hooks"), &hooks)
        .unwrap();
    f.run_clean("git status --short");
}

/// (request, allowed, a substring the refusal must contain)
const REFUSED: &[(&str, &[GitSubcommand], &str)] = &[
    ("git diff --output=/tmp/x", &ALL, "`--output=/tmp/x`"),
    ("git diff --out=x", &ALL, "`--out=x`"),
    ("git diff --out=x", &ALL, "abbreviation"),
    ("git diff --no-index a b", &ALL, "`--no-index`"),
    ("git -c core.pager=sh status", &ALL, "`-c`"),
    ("git diff -c core.pager=sh", &ALL, "`-c`"),
    ("git --git-dir=/ status", &ALL, "`--git-dir=/`"),
    ("git log --git-dir=/", &ALL, "`--git-dir=/`"),
    ("git status --work-tree=/", &ALL, "`--work-tree=/`"),
    ("git --work-tree=/ status", &ALL, "`--work-tree=/`"),
    ("git -C / status", &ALL, "`-C`"),
    ("git --exec-path=/tmp status", &ALL, "`--exec-path=/tmp`"),
    ("git diff --ext-diff", &ALL, "`--ext-diff`"),
    ("git diff --textconv", &ALL, "`--textconv`"),
    ("git log --textconv", &ALL, "`--textconv`"),
    ("git log --show-signature", &ALL, "`--show-signature`"),
    ("git diff -O/etc/passwd", &ALL, "`-O/etc/passwd`"),
    (
        "git diff --open-files-in-pager",
        &ALL,
        "`--open-files-in-pager`",
    ),
    ("git diff --config-env=core.pager=X", &ALL, "`--config-env"),
    ("git log --all", &ALL, "`--all`"),
    ("git diff -- ../outside", &ALL, "`../outside`"),
    ("git diff -- src/../../outside", &ALL, "`src/../../outside`"),
    ("git diff -- /etc/passwd", &ALL, "`/etc/passwd`"),
    ("git diff -- ':(top)x'", &ALL, "`:(top)x`"),
    ("git diff -- ':!x'", &ALL, "`:!x`"),
    ("git log -- -x", &ALL, "`-x`"),
    ("git diff HEAD:a.rs", &ALL, "`HEAD:a.rs`"),
    ("git log HEAD@{1}", &ALL, "`HEAD@{1}`"),
    ("git status HEAD", &ALL, "`HEAD`"),
    ("git diff a b c", &ALL, "`c`"),
    ("git push", &ALL, "`push`"),
    ("git clone x", &ALL, "`clone`"),
    ("git status", &[GitSubcommand::Diff], "git:status"),
    (
        "git log",
        &[GitSubcommand::Status, GitSubcommand::Diff],
        "git:log",
    ),
    ("ls -la", &ALL, "`ls`"),
    ("git", &ALL, "subcommand"),
    ("git status -sb", &ALL, "`-sb`"),
    ("git status --porcelain=v3", &ALL, "`--porcelain=v3`"),
    ("git diff -U1001", &ALL, "`-U1001`"),
    ("git diff --unified=-1", &ALL, "`--unified=-1`"),
    ("git log -n 99999", &ALL, "`99999`"),
    ("git log -n", &ALL, "`-n`"),
    ("git log --format=evil", &ALL, "`--format=evil`"),
    ("git log --format=%GS", &ALL, "`--format=%GS`"),
    (
        "git log --pretty='%(describe)'",
        &ALL,
        "`--pretty=%(describe)`",
    ),
    ("git log --author='x\\|y'", &ALL, "\\"),
    ("git log --stat=1000", &ALL, "`--stat=1000`"),
    ("git diff --stat=1000", &ALL, "`--stat=1000`"),
    ("git log --follow", &ALL, "`--follow`"),
    ("git log --grep=x", &ALL, "`--grep=x`"),
    ("git diff --color=always", &ALL, "`--color=always`"),
];

#[test]
fn injections_are_refused_by_name() {
    let root = Path::new("/nonexistent/root");
    for (request, allowed, needle) in REFUSED {
        let result = split_words(request).and_then(|w| plan(&w, allowed, root));
        let err = match result {
            Ok(inv) => panic!("{request} admitted: {inv:?}"),
            Err(e) => e,
        };
        assert!(
            err.message().contains(needle),
            "{request}: message {:?} does not name {needle:?}",
            err.message()
        );
        assert!(
            matches!(
                err.kind(),
                GitErrorKind::Refused | GitErrorKind::NotAllowed | GitErrorKind::Syntax
            ),
            "{request}: {:?}",
            err.kind()
        );
        assert_ne!(err.code(), ErrorCode::Io, "{request}");
    }
}

#[test]
fn shell_syntax_is_refused_by_the_splitter() {
    for (request, needle) in [
        ("git status; rm -rf /", "`;`"),
        ("git diff HEAD; rm -rf /", "`;`"),
        ("git log $(id)", "`$`"),
        ("git log `id`", "metacharacter ```"),
        ("git status | sh", "`|`"),
        ("git status && id", "`&`"),
        ("git status > /tmp/x", "`>`"),
        ("git status < /etc/passwd", "`<`"),
        ("git log -- *.rs", "`*`"),
        ("git log -- a?", "`?`"),
        ("git log -- [ab]", "`[`"),
        ("git log -- ~/x", "`~`"),
        ("git log --since=~x", "`~`"),
        ("git log !1", "`!`"),
        ("git log # x", "`#`"),
        // A backslash shown as every name shows one: doubled.
        ("git log a\\ b", "`\\\\`"),
        ("git log {a,b}", "`{`"),
        ("git log (x)", "`(`"),
        ("git status\nid", "control character"),
        ("git status\rid", "control character"),
        ("git log 'unterminated", "unterminated"),
        ("git log \"$(id)\"", "`$`"),
        ("git log \"`id`\"", "refuses ``` inside"),
    ] {
        let err = split_words(request).unwrap_err();
        assert_eq!(err.kind(), GitErrorKind::Syntax, "{request}");
        assert_eq!(err.code(), ErrorCode::Request, "{request}");
        assert!(
            err.message().contains(needle),
            "{request:?}: {:?} lacks {needle:?}",
            err.message()
        );
    }
}

#[test]
fn the_splitter_keeps_quoted_words_and_revisions() {
    let w = split_words("git diff --stat HEAD~1 -- src/a.rs").unwrap();
    assert_eq!(w, ["git", "diff", "--stat", "HEAD~1", "--", "src/a.rs"]);
    let w = split_words("  git\tlog --format='%h %s' \"--author=A B\" HEAD^2 ").unwrap();
    assert_eq!(
        w,
        ["git", "log", "--format=%h %s", "--author=A B", "HEAD^2"]
    );
    let w = split_words("git log -- 'a b.rs' '*.rs' \"x;y\"").unwrap();
    assert_eq!(w, ["git", "log", "--", "a b.rs", "*.rs", "x;y"]);
    assert_eq!(split_words("").unwrap(), Vec::<String>::new());
}

#[test]
fn allow_entries() {
    assert_eq!(
        GitSubcommand::from_allow_entry("git:status"),
        Some(GitSubcommand::Status)
    );
    assert_eq!(
        GitSubcommand::from_allow_entry("git:diff"),
        Some(GitSubcommand::Diff)
    );
    assert_eq!(
        GitSubcommand::from_allow_entry("git:log"),
        Some(GitSubcommand::Log)
    );
    for bad in [
        "git:push",
        "git:*",
        "git",
        "sh",
        "git:Status",
        "git:status ",
        "gh:pr",
    ] {
        assert_eq!(GitSubcommand::from_allow_entry(bad), None, "{bad}");
    }
    for sub in GitSubcommand::ALL {
        assert_eq!(
            GitSubcommand::from_allow_entry(sub.allow_entry()),
            Some(sub)
        );
    }
}

/// The invocation's shape: absolute git, exact environment, hardened argv,
/// `--` between revisions and paths.
#[test]
fn invocation_shape() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let words = split_words("git diff --stat HEAD~1 -- a.rs").unwrap();
    let inv: GitInvocation = plan(&words, &[GitSubcommand::Diff], &f.root).unwrap();
    assert!(inv.program.is_absolute());
    assert_eq!(inv.cwd, f.root);
    let env: Vec<(String, String)> = inv
        .env
        .iter()
        .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
        .collect();
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "PATH",
            "HOME",
            "LANG",
            "LC_ALL",
            "GIT_CONFIG_NOSYSTEM",
            "GIT_CONFIG_GLOBAL",
            "GIT_ATTR_NOSYSTEM",
            "GIT_TERMINAL_PROMPT",
            "GIT_OPTIONAL_LOCKS",
            "GIT_NO_LAZY_FETCH",
            "GIT_CEILING_DIRECTORIES",
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_PAGER",
            "PAGER"
        ]
    );
    let ceiling = &env
        .iter()
        .find(|(k, _)| k == "GIT_CEILING_DIRECTORIES")
        .unwrap()
        .1;
    assert_eq!(Path::new(ceiling), f.root.parent().unwrap());
    let value = |name: &str| &env.iter().find(|(k, _)| k == name).unwrap().1;
    // GIT_DIR is git's private copy of what was vetted, outside the root,
    // readable under git's ruleset, and gone with the invocation.
    let git_dir = inv.git_dir().unwrap().to_path_buf();
    assert_eq!(Path::new(value("GIT_DIR")), git_dir);
    assert!(!git_dir.starts_with(&f.root));
    assert_eq!(
        fs::read(git_dir.join("config")).unwrap(),
        fs::read(f.root.join(".git/config")).unwrap()
    );
    assert_eq!(
        fs::read_link(git_dir.join("refs")).unwrap(),
        f.root.join(".git/refs")
    );
    assert!(inv.confine_spec().read_dirs.contains(&git_dir));
    assert_eq!(Path::new(value("GIT_WORK_TREE")), f.root);
    // Without a repository at the root, GIT_DIR names one that never is.
    let bare = tempfile::tempdir().unwrap();
    let inv_bare = plan(&split_words("git status").unwrap(), &ALL, bare.path()).unwrap();
    assert!(inv_bare
        .env
        .contains(&("GIT_DIR".into(), "/dev/null".into())));
    let args: Vec<String> = inv
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let joined = args.join(" ");
    for needed in [
        "-c core.fsmonitor=false",
        "-c core.hooksPath=/dev/null",
        "-c core.pager=cat",
        "-c diff.external=",
        "-c safe.bareRepository=explicit",
        "-c protocol.allow=never",
        "-c filter.evil.clean=",
        "-c filter.evil.process=",
        "-c filter.evil2.process=",
        "-c filter.evil2.required=false",
        "--no-optional-locks",
    ] {
        assert!(joined.contains(needed), "{needed} missing: {joined}");
    }
    let tail: Vec<&str> = args
        .iter()
        .skip_while(|a| *a != "diff")
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--ignore-submodules=all",
            "--no-walk",
            "--stat",
            "HEAD~1",
            "--",
            "a.rs"
        ]
    );
    // Run as production runs it: git's program and argv, in the root, with
    // exactly the planned environment (the digest covers every name the
    // child got).
    let out = exec_unconfined(&inv);
    assert_eq!(out.exit_code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("a.rs"));
    let mut planned: Vec<&[u8]> = inv.env.iter().map(|(k, _)| k.as_bytes()).collect();
    planned.sort_unstable();
    planned.dedup();
    assert_eq!(planned.len(), inv.env.len());
    let digest = Sha256::digest(planned.join(&b"\n"[..]));
    assert_eq!(
        out.env_names_digest,
        sandgate_codes::sha256_text(&digest.into())
    );
    let git_dir = inv.git_dir().unwrap().to_path_buf();
    let clone = inv.clone();
    drop(inv);
    assert!(git_dir.exists(), "removed while a clone lives");
    drop(clone);
    assert!(
        !git_dir.exists(),
        "the private git directory outlived the invocation"
    );
}

/// Repositories whose config or layout cannot be vetted are refused.
#[test]
fn unvettable_repositories_are_refused() {
    if !have_git() {
        return;
    }
    let status = split_words("git status").unwrap();

    let f = hostile();
    f.config("include.path", "/nonexistent/other.gitconfig");
    let err = plan(&status, &ALL, &f.root).unwrap_err();
    assert!(err.message().contains("include"), "{err}");

    let f = hostile();
    f.config("includeIf.gitdir:/x/.path", "/nonexistent/other.gitconfig");
    let err = plan(&status, &ALL, &f.root).unwrap_err();
    assert!(err.message().contains("include"), "{err}");

    let f = hostile();
    f.config("remote.origin.promisor", "true");
    let err = plan(&status, &ALL, &f.root).unwrap_err();
    assert!(err.message().contains("promisor"), "{err}");

    let f = hostile();
    fs::write(
        f.root.join(".git/config.worktree"),
        "[filter \"a=b\"]\n\tclean = x\n",
    )
    .unwrap();
    let err = plan(&status, &ALL, &f.root).unwrap_err();
    assert!(err.message().contains("a=b"), "{err}");

    let f = hostile();
    let cfg = f.root.join(".git/config");
    let mut text = fs::read_to_string(&cfg).unwrap();
    text.push_str("[broken\n");
    fs::write(&cfg, text).unwrap();
    let err = plan(&status, &ALL, &f.root).unwrap_err();
    assert!(err.message().contains("does not parse"), "{err}");

    // A `.git` file or symlink could name any repository on the host.
    let f = hostile();
    let other = f.root.join("sub");
    fs::create_dir(&other).unwrap();
    fs::write(
        other.join(".git"),
        format!("gitdir: {}\n", f.root.join(".git").display()),
    )
    .unwrap();
    let err = plan(&status, &ALL, &other).unwrap_err();
    assert!(err.message().contains("`gitdir:` file"), "{err}");
    let linked = f.root.join("linked");
    fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(f.root.join(".git"), linked.join(".git")).unwrap();
    let err = plan(&status, &ALL, &linked).unwrap_err();
    assert!(err.message().contains("symbolic link"), "{err}");
    assert_eq!(err.code(), ErrorCode::Denied);
    // No error message carries a host path.
    assert!(!err.message().contains(&*f.root.to_string_lossy()));
}

/// A driver whose name is not UTF-8 is overridden by its exact bytes.
#[test]
fn filter_names_reach_git_as_bytes() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let cfg = f.root.join(".git/config");
    let mut text = fs::read(&cfg).unwrap();
    text.extend_from_slice(b"[filter \"\xff\xfe\"]\n\tclean = cat\n");
    fs::write(&cfg, text).unwrap();
    let inv = plan(&split_words("git status").unwrap(), &ALL, &f.root).unwrap();
    let wanted: &[u8] = b"filter.\xff\xfe.clean=";
    assert!(
        inv.args.iter().any(|a| a.as_bytes() == wanted),
        "{:?}",
        inv.args
    );
    // Nothing was decoded lossily on the way.
    let replacement = "\u{fffd}".as_bytes();
    assert!(!inv
        .args
        .iter()
        .any(|a| a.as_bytes().windows(3).any(|w| w == replacement)));
}

/// A filter driver defined in a legacy `[filter.name]` section or with odd
/// characters is neutralized too.
#[test]
fn unusual_filter_names_are_neutralized() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let cfg = f.root.join(".git/config");
    let mut text = fs::read_to_string(&cfg).unwrap();
    let touch = format!("touch {}", f.sentinels.join("odd-filter").display());
    text.push_str(&format!(
        "[filter \"we\\\"ird\"]\n\tclean = {touch}; cat\n[filter.LeGaCy]\n\tclean = {touch}; cat\n[filter.Dot \"Ted\"]\n\tclean = {touch}; cat\n"
    ));
    fs::write(&cfg, text).unwrap();
    fs::write(
        f.root.join(".gitattributes"),
        "*.dat filter=we\"ird\n*.bin filter=legacy\n*.rs filter=dot.Ted\n",
    )
    .unwrap();
    f.run_clean("git status --short");
    f.run_clean("git diff --stat");
    // Control: unconfined, git does run those drivers.
    Command::new(find_git().unwrap())
        .args(["-c", "core.fsmonitor=false", "status", "--short"])
        .env_clear()
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .current_dir(&f.root)
        .output()
        .unwrap();
    assert!(f.sentinels().contains(&"odd-filter".to_string()));
}

/// Swaps `path` between `a` and `b` (each written beside it, then renamed
/// over it, so every open sees one whole file) until `stop` is set.
fn swapper(
    path: PathBuf,
    a: Vec<u8>,
    b: Vec<u8>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let staged = path.with_extension("swap");
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            for bytes in [&a, &b] {
                fs::write(&staged, bytes).unwrap();
                fs::rename(&staged, &path).unwrap();
            }
        }
    })
}

/// The vetting and git read the repository apart: a concurrent writer
/// (a command granted the write root) that swaps `.git/config` or
/// `.git/index` between a vetted version and a hostile one, over and over,
/// must never get the hostile one to git after the vetting passed the
/// other. git reads a private copy of what was vetted.
#[test]
fn git7_a_repository_swapped_after_the_vetting_is_never_what_git_reads() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    if !have_git() {
        return;
    }
    const ROUNDS: usize = 150;
    let f = hostile();
    // The config: a filter driver the vetted version does not define.
    fs::write(f.root.join(".gitattributes"), "*.dat filter=late\n").unwrap();
    let cfg = f.root.join(".git/config");
    let vetted = fs::read(&cfg).unwrap();
    let mut hostile_cfg = vetted.clone();
    let late = f.sentinels.parent().unwrap().join("scripts/late");
    script(
        &late,
        &format!("touch '{}'\ncat", f.sentinels.join("late-clean").display()),
    );
    hostile_cfg
        .extend_from_slice(format!("[filter \"late\"]\n\tclean = {}\n", late.display()).as_bytes());
    let stop = Arc::new(AtomicBool::new(false));
    let t = swapper(cfg.clone(), vetted.clone(), hostile_cfg, stop.clone());
    let (mut ran, mut admitted) = (0, 0);
    for _ in 0..ROUNDS {
        let Ok(inv) = plan(&split_words("git status --short").unwrap(), &ALL, &f.root) else {
            continue;
        };
        admitted += 1;
        exec_unconfined(&inv);
        if f.sentinels.join("late-clean").exists() {
            ran += 1;
            fs::remove_file(f.sentinels.join("late-clean")).unwrap();
        }
    }
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap();
    fs::write(&cfg, &vetted).unwrap();
    eprintln!("config swap: {ran} of {admitted} admitted runs started the late driver");
    assert!(admitted > 0);
    assert_eq!(
        ran, 0,
        "a config swapped in after the vetting started a driver in {ran} of {admitted} runs"
    );

    // The index: an entry naming a file outside the root.
    let outside = f.root.parent().unwrap().join("secret.txt");
    fs::write(&outside, "TOP-SECRET-LINE\n").unwrap();
    let name = "../secret.txt";
    let placeholder = "___secret.txt";
    fs::write(f.root.join(placeholder), "mine\n").unwrap();
    raw_git(&f.root, &["add", "--", placeholder]);
    let index = f.root.join(".git/index");
    let clean = fs::read(&index).unwrap();
    let mut bad = clean.clone();
    let at = bad
        .windows(placeholder.len())
        .position(|w| w == placeholder.as_bytes())
        .unwrap();
    bad[at..at + name.len()].copy_from_slice(name.as_bytes());
    let stop = Arc::new(AtomicBool::new(false));
    let t = swapper(index.clone(), clean, bad, stop.clone());
    let (mut shown, mut admitted) = (0, 0);
    for _ in 0..ROUNDS {
        let Ok(inv) = plan(&split_words("git diff").unwrap(), &ALL, &f.root) else {
            continue;
        };
        admitted += 1;
        let out = exec_unconfined(&inv);
        if String::from_utf8_lossy(&out.stdout).contains("TOP-SECRET-LINE") {
            shown += 1;
        }
    }
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap();
    eprintln!("index swap: {shown} of {admitted} admitted runs printed a file outside the root");
    assert!(admitted > 0);
    assert_eq!(shown, 0, "an index swapped in after the vetting showed a file outside the root in {shown} of {admitted} runs");
}

/// git's ruleset holds whatever git starts, should a driver ever reach it
/// (the plan neutralizes every driver of the vetted config, and git reads
/// only that config: so here one is handed to git on its command line,
/// after the plan). Run through the executor, in its namespaces where the
/// host offers them: the driver runs, but writes nothing (in the root or
/// beside it), and with Landlock's TCP rules neither connects to a port
/// nor binds one.
#[test]
fn a_driver_git_is_handed_can_neither_write_nor_connect() {
    if !have_git() {
        return;
    }
    let f = hostile();
    fs::write(f.root.join(".gitattributes"), "*.dat filter=late\n").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = f.root.parent().unwrap().to_path_buf();
    let driver = f.root.join(".git/driver.sh");
    script(
        &driver,
        &format!(
            "echo DRIVER-RAN >&2\n\
             if (echo x > '{root}/pwned') 2>/dev/null; then echo WROTE-ROOT >&2; fi\n\
             if (echo x > '{base}/pwned') 2>/dev/null; then echo WROTE-OUTSIDE >&2; fi\n\
             python3 -c 'import errno, socket, sys\n\
             try:\n    socket.create_connection((\"127.0.0.1\", {port})); print(\"CONNECTED\", file=sys.stderr)\n\
             except OSError as e:\n    print(\"NO-CONNECT\", errno.errorcode[e.errno], file=sys.stderr)\n\
             try:\n    socket.socket().bind((\"127.0.0.1\", 0)); print(\"BOUND\", file=sys.stderr)\n\
             except OSError as e:\n    print(\"NO-BIND\", errno.errorcode[e.errno], file=sys.stderr)'\n\
             cat",
            root = f.root.display(),
            base = base.display(),
        ),
    );
    let mut inv = plan(&split_words("git status --short").unwrap(), &ALL, &f.root).unwrap();
    let handed = format!("filter.late.clean={}", driver.display());
    inv.args.splice(0..0, ["-c".into(), handed.into()]);
    // Control: with no ruleset the driver writes and connects.
    let out = exec_unconfined(&inv);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stderr.contains("DRIVER-RAN")
            && stderr.contains("WROTE-ROOT")
            && stderr.contains("CONNECTED\n")
            && stderr.contains("BOUND"),
        "{stderr}"
    );
    fs::remove_file(f.root.join("pwned")).unwrap();
    fs::remove_file(base.join("pwned")).unwrap();
    while listener.accept().is_ok() {}

    let out = run_with_timeout(&inv, 20);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("stderr {stderr:?}, confined {:?}", out.confined);
    assert!(stderr.contains("DRIVER-RAN"), "{stderr}");
    assert!(!stderr.contains("WROTE"), "{stderr}");
    assert!(!f.root.join("pwned").exists());
    assert!(!base.join("pwned").exists());
    if out.confined.landlock_abi >= Some(4) {
        // Refused by the ruleset (not merely unanswered), in the
        // executor's network namespace too.
        assert!(stderr.contains("NO-CONNECT EACCES"), "{stderr}");
        assert!(listener.accept().is_err(), "the driver connected out");
        assert!(stderr.contains("NO-BIND EACCES"), "{stderr}");
        assert!(out.confined.net, "{:?}", out.confined);
    } else {
        eprintln!("note: Landlock TCP rules unavailable; connect not checked");
    }
}

/// Runs a planned invocation as the executor does, under git's ruleset,
/// with a timeout.
fn run_with_timeout(inv: &GitInvocation, secs: u64) -> ExecResult {
    let prepared = prepare(&inv.confine_spec(), ConfineMode::BestEffort).unwrap();
    exec_planned_within(inv, &prepared, Some(std::time::Duration::from_secs(secs)))
}

/// git tells a racily clean index entry (a file changed in the second it
/// was staged, same size) by the index file's own time: git's private
/// copy of the index keeps it, so such a change still shows.
#[test]
fn a_racily_clean_entry_still_shows_through_the_copied_index() {
    if !have_git() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    raw_git(&root, &["init", "-q", "."]);
    // Only the time and size of a file count (not its ctime or inode), as
    // on a filesystem where they say nothing.
    raw_git(&root, &["config", "core.checkStat", "minimal"]);
    let staged = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_500_000_000);
    let set = |path: &Path| {
        fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(staged)
            .unwrap()
    };
    fs::write(root.join("a.txt"), "one\n").unwrap();
    set(&root.join("a.txt"));
    raw_git(&root, &["add", "a.txt"]);
    raw_git(&root, &["commit", "-q", "-m", "first"]);
    fs::write(root.join("a.txt"), "two\n").unwrap();
    set(&root.join("a.txt"));
    set(&root.join(".git/index"));
    let inv = plan(&split_words("git diff").unwrap(), &ALL, &root).unwrap();
    let out = exec_unconfined(&inv);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("+two"),
        "a racily clean change was hidden: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// git's private copy is bounded: more than 64 MiB of control files
/// besides the config and the index (a huge `packed-refs`) is refused,
/// naming why; a large one below the bound is copied and read.
#[test]
fn a_huge_packed_refs_is_refused_by_size() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let head = raw_git(&f.root, &["rev-parse", "HEAD"]).stdout;
    let head = String::from_utf8(head).unwrap();
    let head = head.trim();
    let mut refs = String::from("# pack-refs with: peeled fully-peeled sorted \n");
    let mut n = 0;
    while refs.len() < 8 * 1024 * 1024 {
        refs.push_str(&format!("{head} refs/tags/t{n:08}\n"));
        n += 1;
    }
    let packed = f.root.join(".git/packed-refs");
    fs::write(&packed, &refs).unwrap();
    let out = f.run_clean("git log --oneline -n 1 refs/tags/t00000007");
    assert!(out.contains("third"), "{out}");
    let mut huge = refs.into_bytes();
    huge.resize(64 * 1024 * 1024 + 1, b'\n');
    fs::write(&packed, &huge).unwrap();
    let e = plan(&split_words("git status").unwrap(), &ALL, &f.root).unwrap_err();
    assert_eq!(e.kind(), GitErrorKind::Repository, "{e}");
    assert!(e.message().contains("packed-refs"), "{e}");
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A FIFO (or socket, or device) where git reads in `.git` would hold git
/// until the timeout (git opens it blocking and waits for a writer): the
/// repository is refused before git starts, wherever git reads, the loose
/// refs, the reflogs and the objects included, and so is a link there to
/// a FIFO.
#[test]
fn a_fifo_in_dot_git_never_holds_git() {
    if !have_git() {
        return;
    }
    for place in [
        "packed-refs",
        "info/exclude",
        "MERGE_HEAD",
        "refs/heads/main",
        "refs/tags/v1",
        "logs/HEAD",
        "objects/info/commit-graph",
        "objects/pack/pack-0.pack",
        "objects/ab/cdef",
    ] {
        let f = hostile();
        let at = f.root.join(".git").join(place);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        let _ = fs::remove_file(&at);
        mkfifo(&at);
        for request in ["git status", "git log --oneline -1", "git diff --stat"] {
            match plan(&split_words(request).unwrap(), &ALL, &f.root) {
                Err(e) => {
                    assert_eq!(e.kind(), GitErrorKind::Repository, "{place}: {e}");
                    assert!(e.message().contains("FIFO"), "{place}: {e}");
                    assert!(e.message().contains(place), "{place}: {e}");
                }
                Ok(inv) => {
                    let out = run_with_timeout(&inv, 3);
                    assert!(
                        out.limit.is_none(),
                        "{request}: a FIFO at .git/{place} held git until the timeout"
                    );
                }
            }
        }
    }
    // A loose ref may be a link (admitted beneath refs), but not to a FIFO.
    let f = hostile();
    mkfifo(&f.root.join("fifo"));
    fs::remove_file(f.root.join(".git/refs/heads/main")).unwrap();
    std::os::unix::fs::symlink(f.root.join("fifo"), f.root.join(".git/refs/heads/main")).unwrap();
    for request in ["git status", "git log --oneline -1"] {
        match plan(&split_words(request).unwrap(), &ALL, &f.root) {
            Err(e) => assert!(e.message().contains("refs/heads/main"), "{e}"),
            Ok(inv) => {
                let out = run_with_timeout(&inv, 3);
                assert!(
                    out.limit.is_none(),
                    "{request}: a link to a FIFO at .git/refs/heads/main held git"
                );
            }
        }
    }
}

/// git's `safe.directory` check does not apply with `GIT_DIR` pinned: a
/// repository owned by another user is used as vetted (plain git, which
/// discovers the repository, refuses it as of "dubious ownership"). What
/// makes a hostile repository harmless is the vetting, not its owner.
/// Needs root (to give the repository away); skipped otherwise.
#[test]
fn a_repository_owned_by_another_user_is_used_as_vetted() {
    if !have_git() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("note: not root; a repository cannot be given away here, skipped");
        return;
    }
    let f = hostile();
    let st = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&f.root)
        .status()
        .unwrap();
    assert!(st.success());
    // Control: plain git, discovering the repository, refuses it.
    let out = Command::new(find_git().unwrap())
        .args(["log", "--oneline", "-n", "1"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .current_dir(&f.root)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("dubious ownership"),
        "{out:?}"
    );
    let out = f.run_clean("git log --oneline -n 1");
    assert!(out.contains("third"), "{out}");
}

/// A link beneath `.git/refs`, `.git/logs` or a directory of
/// `.git/objects` that leads out of `.git` would have git read another
/// repository as its own, as `objects/info/alternates` would (refused
/// above): a pack and a ref linked to a repository beside the root made
/// `git log -p` print its commit. Such a link is refused before git
/// starts, naming it; a link that stays inside `.git` (an old-style
/// symbolic ref) is still admitted.
#[test]
fn git9_links_out_of_dot_git_are_refused() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let base = f.root.parent().unwrap().to_path_buf();
    let other = base.join("other");
    fs::create_dir(&other).unwrap();
    raw_git(&other, &["init", "-q", "."]);
    fs::write(other.join("s"), "TOP SECRET\n").unwrap();
    raw_git(&other, &["add", "."]);
    raw_git(&other, &["commit", "-q", "-m", "elsewhere"]);
    let loose = |git: &Path| -> Vec<PathBuf> {
        let mut out = Vec::new();
        for d in fs::read_dir(git.join("objects")).unwrap() {
            let d = d.unwrap().path();
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            if name.len() == 2 {
                for o in fs::read_dir(&d).unwrap() {
                    out.push(o.unwrap().path());
                }
            }
        }
        out
    };
    let other_loose = loose(&other.join(".git"));
    let other_git = other.join(".git");
    for relative in [false, true] {
        let what = if relative {
            "loose objects and a ref, relative links"
        } else {
            "loose objects and a ref, absolute links"
        };
        let target = |rel: &Path| {
            if relative {
                Path::new("../../../../other/.git").join(rel)
            } else {
                other_git.join(rel)
            }
        };
        for o in &other_loose {
            let rel = o.strip_prefix(&other_git).unwrap();
            let at = f.root.join(".git").join(rel);
            fs::create_dir_all(at.parent().unwrap()).unwrap();
            let _ = std::os::unix::fs::symlink(target(rel), &at);
        }
        std::os::unix::fs::symlink(
            if relative {
                PathBuf::from("../../../../other/.git/refs/heads/main")
            } else {
                other_git.join("refs/heads/main")
            },
            f.root.join(".git/refs/heads/stolen"),
        )
        .unwrap();
        let request = "git log -p -n 1 stolen";
        match plan(&split_words(request).unwrap(), &ALL, &f.root) {
            Ok(inv) => {
                let out = exec_unconfined(&inv);
                panic!(
                    "{what}: links out of .git were admitted: exit {}, {:?}",
                    out.exit_code,
                    String::from_utf8_lossy(&out.stdout)
                );
            }
            Err(e) => {
                assert_eq!(e.kind(), GitErrorKind::Repository, "{what}: {e}");
                assert!(e.message().contains("out of .git"), "{what}: {e}");
                assert!(!e.message().contains(&*other.to_string_lossy()), "{e}");
            }
        }
        // Undo: every link made beneath the root's .git.
        fs::remove_file(f.root.join(".git/refs/heads/stolen")).unwrap();
        for o in &other_loose {
            let rel = o.strip_prefix(&other_git).unwrap();
            let at = f.root.join(".git").join(rel);
            if fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                fs::remove_file(&at).unwrap();
            }
        }
    }
    // A pack linked from the other repository.
    raw_git(&other, &["gc", "-q"]);
    for p in fs::read_dir(other_git.join("objects/pack")).unwrap() {
        let p = p.unwrap().path();
        std::os::unix::fs::symlink(
            &p,
            f.root
                .join(".git/objects/pack")
                .join(p.file_name().unwrap()),
        )
        .unwrap();
    }
    let id = raw_git(&other, &["rev-parse", "HEAD"]).stdout;
    let id = String::from_utf8(id).unwrap().trim().to_string();
    let request = format!("git log -p -n 1 {id}");
    match plan(&split_words(&request).unwrap(), &ALL, &f.root) {
        Ok(inv) => {
            let out = exec_unconfined(&inv);
            panic!(
                "a pack linked out of .git was admitted: exit {}, {:?}",
                out.exit_code,
                String::from_utf8_lossy(&out.stdout)
            );
        }
        Err(e) => {
            assert_eq!(e.kind(), GitErrorKind::Repository, "{e}");
            assert!(e.message().contains("objects/pack/pack-"), "{e}");
            assert!(e.message().contains("out of .git"), "{e}");
        }
    }
    for p in fs::read_dir(f.root.join(".git/objects/pack")).unwrap() {
        let p = p.unwrap().path();
        if fs::symlink_metadata(&p).unwrap().file_type().is_symlink() {
            fs::remove_file(p).unwrap();
        }
    }
    // Control: an old-style symbolic ref, a link inside .git, still runs.
    std::os::unix::fs::symlink("main", f.root.join(".git/refs/heads/alias")).unwrap();
    let out = f.run_clean("git log --oneline -n 1 alias");
    assert!(out.contains("third"), "{out}");
}

const GIT9_PRIVATE: &str = "SANDGATE_TEST_GIT9_PRIVATE";

/// git's private copy of the repository (config, index and the rest,
/// which may hold a remote's credentials) is removed when the invocation
/// is dropped; a host process killed before that (SIGKILL) used to leave
/// it in the temporary directory for good. The next process to plan a
/// confined git run removes the copies whose owner is gone; a live
/// process's copy stays.
#[test]
fn git9_a_killed_processs_private_copy_is_removed_by_the_next() {
    if !have_git() {
        return;
    }
    if let Some(root) = std::env::var_os(GIT9_PRIVATE) {
        let inv = plan(&split_words("git status").unwrap(), &ALL, Path::new(&root)).unwrap();
        println!("{}", inv.git_dir().unwrap().display());
        if std::env::var_os("SANDGATE_TEST_GIT9_HOLD").is_some() {
            std::thread::sleep(std::time::Duration::from_secs(600));
        }
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("root");
    let scratch = base.join("tmp");
    fs::create_dir(&root).unwrap();
    fs::create_dir(&scratch).unwrap();
    raw_git(&root, &["init", "-q", "."]);
    let spawn = |hold: bool| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "--nocapture",
            "git9_a_killed_processs_private_copy_is_removed_by_the_next",
        ])
        .env(GIT9_PRIVATE, &root)
        .env("TMPDIR", &scratch)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
        if hold {
            cmd.env("SANDGATE_TEST_GIT9_HOLD", "1");
        }
        let mut child = cmd.spawn().unwrap();
        use std::io::BufRead;
        let dir = std::io::BufReader::new(child.stdout.take().unwrap())
            .lines()
            .find_map(|l| l.ok().filter(|l| l.contains("sandgate-git-")))
            .map(PathBuf::from)
            .expect("the helper's private git directory");
        (child, dir)
    };
    let (mut killed, left) = spawn(true);
    let (mut live, live_dir) = spawn(true);
    assert!(left.join("config").is_file(), "{}", left.display());
    assert_eq!(
        fs::metadata(&left).unwrap().permissions().mode() & 0o777,
        0o700
    );
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(left.join("config").is_file(), "{}", left.display());
    let (mut next, next_dir) = spawn(false);
    next.wait().unwrap();
    let gone = !left.exists();
    let live_kept = live_dir.join("config").is_file();
    live.kill().unwrap();
    live.wait().unwrap();
    assert!(gone, "{} was left after the next plan", left.display());
    assert!(live_kept, "a live process's copy was removed");
    assert!(!next_dir.exists(), "a dropped invocation's copy stayed");
}

/// A link beneath `refs` (or `logs`, or a directory of `objects`) that
/// stays inside `.git` but leads to a directory: git reads the loose refs
/// beneath it, and that directory (`hooks`, `objects/info`, which the
/// vetting passes over) may hold links to anywhere and FIFOs. Before,
/// `refs/heads/evil -> ../../hooks` with `hooks/main` a link to a file
/// beside the root had `git log evil/main` take that file's commit id as
/// the branch (a file outside the repository read as its own ref), and a
/// FIFO in `objects/info` reached the same way held git until the
/// timeout. A link to a directory is refused: git never makes one there.
#[test]
fn git18_a_link_to_a_directory_in_refs_is_refused() {
    if !have_git() {
        return;
    }
    let f = hostile();
    let base = f.root.parent().unwrap().to_path_buf();
    let first = raw_git(&f.root, &["rev-parse", "HEAD~2"]).stdout;
    // A file outside the repository whose first line is a commit id.
    fs::write(base.join("outside-ref"), &first).unwrap();
    let dot_git = f.root.join(".git");
    std::os::unix::fs::symlink(base.join("outside-ref"), dot_git.join("hooks/main")).unwrap();
    std::os::unix::fs::symlink("../../hooks", dot_git.join("refs/heads/evil")).unwrap();
    let request = "git log --format=%s -n 1 evil/main";
    match plan(&split_words(request).unwrap(), &ALL, &f.root) {
        Ok(inv) => {
            let out = exec_unconfined(&inv);
            panic!(
                "a link to .git/hooks beneath refs was admitted: exit {}, stdout {:?}, \
                 stderr {:?}",
                out.exit_code,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Err(e) => {
            assert_eq!(e.kind(), GitErrorKind::Repository, "{e}");
            assert!(e.message().contains("refs/heads/evil"), "{e}");
            assert!(e.message().contains("directory"), "{e}");
        }
    }
    fs::remove_file(dot_git.join("refs/heads/evil")).unwrap();
    // The same through logs, and through a directory of objects, to a
    // FIFO in objects/info.
    mkfifo(&dot_git.join("objects/info/fifo"));
    for (link, target) in [
        ("refs/tags/evil", "../../objects/info"),
        ("logs/evil", "../objects/info"),
        ("objects/pack/evil", "../info"),
    ] {
        std::os::unix::fs::symlink(target, dot_git.join(link)).unwrap();
        for request in ["git log --oneline --decorate -n 1", "git status"] {
            match plan(&split_words(request).unwrap(), &ALL, &f.root) {
                Ok(inv) => {
                    let out = run_with_timeout(&inv, 3);
                    panic!(
                        "{request}: a link to a directory at .git/{link} was admitted (held \
                         until the timeout: {})",
                        out.limit.is_some()
                    );
                }
                Err(e) => {
                    assert_eq!(e.kind(), GitErrorKind::Repository, "{link}: {e}");
                    assert!(e.message().contains(link), "{link}: {e}");
                }
            }
        }
        fs::remove_file(dot_git.join(link)).unwrap();
    }
    // Control: the repository without those links runs, and a link to a
    // file inside .git (an old-style symbolic ref) still does.
    fs::remove_file(dot_git.join("objects/info/fifo")).unwrap();
    std::os::unix::fs::symlink("main", dot_git.join("refs/heads/alias")).unwrap();
    let out = f.run_clean("git log --format=%s -n 1 alias");
    assert!(out.contains("third"), "{out}");
}

/// `git status` and `git diff` read the repository of a submodule in the
/// work tree (`<path>/.git`, a directory or a `gitdir:` file) whatever
/// `--ignore-submodules` says: to compare a gitlink with the submodule's
/// `HEAD`, and to tell a tracked file turned into a directory from a
/// removed one. That repository was not vetted, and git echoes the first
/// line of its `packed-refs` when it does not parse: before, a
/// `packed-refs` there linked to a file beside the root (unconfined) or to
/// `/etc/passwd` (under git's ruleset too) was printed by `git status`.
/// Now that repository is vetted as the root's is, or refused.
#[test]
fn git18_a_submodule_repository_in_the_work_tree_is_vetted() {
    if !have_git() {
        return;
    }
    let secret_line = "SECRET-LINE token=git18";
    let check = |f: &Fixture, what: &str, place: &str| {
        for request in ["git status", "git diff --stat", "git diff --stat HEAD"] {
            match plan(&split_words(request).unwrap(), &ALL, &f.root) {
                Ok(inv) => {
                    let out = exec_unconfined(&inv);
                    let confined = {
                        let prepared =
                            prepare(&inv.confine_spec(), ConfineMode::BestEffort).unwrap();
                        exec_planned(&inv, &prepared)
                    };
                    panic!(
                        "{what}: {request} was admitted: unconfined stderr {:?}, under git's \
                         ruleset stderr {:?}",
                        String::from_utf8_lossy(&out.stderr),
                        String::from_utf8_lossy(&confined.stderr)
                    );
                }
                Err(e) => {
                    assert_eq!(e.kind(), GitErrorKind::Repository, "{what}: {e}");
                    assert!(e.message().contains(place), "{what}: {e}");
                    assert!(!e.message().contains(secret_line), "{what}: {e}");
                }
            }
        }
    };
    // A tracked file turned into a directory holding a `gitdir:` file.
    for target in ["outside", "/etc/passwd"] {
        let f = hostile();
        let base = f.root.parent().unwrap().to_path_buf();
        fs::write(base.join("outside"), format!("{secret_line}\n")).unwrap();
        let target = if target == "outside" {
            base.join("outside")
        } else {
            PathBuf::from(target)
        };
        fs::remove_file(f.root.join("notes.txt")).unwrap();
        let fake = f.root.join("notes.txt/fake");
        fs::create_dir_all(fake.join("refs")).unwrap();
        fs::create_dir_all(fake.join("objects")).unwrap();
        fs::write(fake.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::os::unix::fs::symlink(&target, fake.join("packed-refs")).unwrap();
        fs::write(f.root.join("notes.txt/.git"), "gitdir: fake\n").unwrap();
        check(
            &f,
            &format!("a directory for a tracked file, linked to {target:?}"),
            "notes.txt/.git",
        );
    }
    // A submodule laid out as git makes one (`gitdir:` into
    // `.git/modules`), whose packed-refs is then linked out.
    let f = hostile();
    let base = f.root.parent().unwrap().to_path_buf();
    fs::write(base.join("outside"), format!("{secret_line}\n")).unwrap();
    let modules = f.root.join(".git/modules/sub");
    fs::create_dir_all(f.root.join(".git/modules")).unwrap();
    raw_git(
        &f.root,
        &[
            "init",
            "-q",
            &format!("--separate-git-dir={}", modules.display()),
            "sub",
        ],
    );
    fs::write(f.root.join("sub/s"), "s\n").unwrap();
    raw_git(&f.root.join("sub"), &["add", "s"]);
    raw_git(&f.root.join("sub"), &["commit", "-q", "-m", "sub"]);
    raw_git(&f.root.join("sub"), &["pack-refs", "--all"]);
    raw_git(&f.root, &["add", "sub"]);
    // (Plain git ran the hostile config's programs just now.)
    f.clear_sentinels();
    // Control: the submodule as git made it is admitted, and status runs.
    let out = f.run_clean("git status --porcelain");
    assert!(out.contains(" M a.rs"), "{out}");
    // The relative form `git submodule add` writes is admitted too.
    fs::write(f.root.join("sub/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
    let out = f.run_clean("git diff --stat");
    assert!(out.contains("a.rs"), "{out}");
    fs::remove_file(modules.join("packed-refs")).unwrap();
    std::os::unix::fs::symlink(base.join("outside"), modules.join("packed-refs")).unwrap();
    check(&f, "a submodule's packed-refs linked out", "sub/.git");
    // A `gitdir:` file naming a repository outside the root.
    fs::remove_file(modules.join("packed-refs")).unwrap();
    let other = base.join("other");
    fs::create_dir(&other).unwrap();
    raw_git(&other, &["init", "-q", "."]);
    fs::write(
        f.root.join("sub/.git"),
        format!("gitdir: {}\n", other.join(".git").display()),
    )
    .unwrap();
    check(
        &f,
        "a gitdir: file naming a repository outside the root",
        "sub/.git",
    );
}

/// A `gitdir:` file in the work tree is read as git reads it: git drops
/// the line breaks at the end of the file, then takes the path as a C
/// string, which ends at the first NUL. Before, the vetting passed over a
/// file whose path held a NUL (`gitdir: fake\0`) as naming nothing, and
/// one naming the root by its absolute path (no entry is named ""), while
/// git read the git directory each named, unvetted: `git status` printed
/// the first line of its `packed-refs`, linked to a file beside the root
/// or to `/etc/hostname`, under git's ruleset too. Now each names the
/// directory git reads, which is vetted (and refused here).
#[test]
fn git27_a_gitdir_file_is_read_up_to_its_nul_as_git_reads_it() {
    if !have_git() {
        return;
    }
    // Where the directory git reads lies, and the `.git` file's bytes.
    type GitFileAt = fn(&Path) -> (PathBuf, Vec<u8>);
    let secret_line = "SECRET-LINE token=git27";
    // `dir` made a git directory git accepts, its `packed-refs` linked to
    // `target`.
    let fake_git_dir = |dir: &Path, target: &Path| {
        fs::create_dir_all(dir.join("refs")).unwrap();
        fs::create_dir_all(dir.join("objects")).unwrap();
        fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::os::unix::fs::symlink(target, dir.join("packed-refs")).unwrap();
    };
    let check = |f: &Fixture, what: &str, leaked: &str| {
        for request in ["git status", "git diff --stat", "git diff --stat HEAD"] {
            match plan(&split_words(request).unwrap(), &ALL, &f.root) {
                Ok(inv) => {
                    let out = exec_unconfined(&inv);
                    let confined = {
                        let prepared =
                            prepare(&inv.confine_spec(), ConfineMode::BestEffort).unwrap();
                        exec_planned(&inv, &prepared)
                    };
                    let (out, confined) = (
                        String::from_utf8_lossy(&out.stderr).into_owned(),
                        String::from_utf8_lossy(&confined.stderr).into_owned(),
                    );
                    panic!(
                        "{what}: {request} was admitted (the file's first line shown: \
                         unconfined {}, under git's ruleset {}): unconfined stderr {out:?}, \
                         under git's ruleset stderr {confined:?}",
                        out.contains(leaked),
                        confined.contains(leaked),
                    );
                }
                Err(e) => {
                    assert_eq!(e.kind(), GitErrorKind::Repository, "{what}: {e}");
                    assert!(e.message().contains("notes.txt/.git"), "{what}: {e}");
                    assert!(e.message().contains("packed-refs"), "{what}: {e}");
                    assert!(!e.message().contains(leaked), "{what}: {e}");
                }
            }
        }
    };
    let hostname = fs::read_to_string("/etc/hostname").unwrap_or_default();
    let hostname_line = hostname.lines().next().unwrap_or_default().to_owned();
    for (target, leaked) in [("outside", secret_line), ("/etc/hostname", &*hostname_line)] {
        if leaked.is_empty() {
            eprintln!("note: no /etc/hostname line; that target skipped");
            continue;
        }
        // The forms git reads as a git directory in the work tree: the
        // path before a NUL (relative, empty: the directory of the `.git`
        // file itself, absolute), and the root by its absolute path.
        let forms: [(&str, GitFileAt); 4] = [
            ("`gitdir: fake\\0`", |root| {
                (root.join("notes.txt/fake"), b"gitdir: fake\0\n".to_vec())
            }),
            ("`gitdir: \\0`", |root| {
                (root.join("notes.txt"), b"gitdir: \0\n".to_vec())
            }),
            ("`gitdir: <absolute>\\0junk`", |root| {
                let dir = root.join("notes.txt/fake");
                let mut bytes = b"gitdir: ".to_vec();
                bytes.extend_from_slice(dir.as_os_str().as_bytes());
                bytes.extend_from_slice(b"\0junk\n");
                (dir, bytes)
            }),
            ("`gitdir: <the root>`", |root| {
                let mut bytes = b"gitdir: ".to_vec();
                bytes.extend_from_slice(root.as_os_str().as_bytes());
                bytes.push(b'\n');
                (root.to_path_buf(), bytes)
            }),
        ];
        for (form, make) in forms {
            let f = hostile();
            let base = f.root.parent().unwrap().to_path_buf();
            fs::write(base.join("outside"), format!("{secret_line}\n")).unwrap();
            let target = if target == "outside" {
                base.join("outside")
            } else {
                PathBuf::from(target)
            };
            // A tracked file turned into a directory holding the `gitdir:`
            // file.
            fs::remove_file(f.root.join("notes.txt")).unwrap();
            fs::create_dir(f.root.join("notes.txt")).unwrap();
            let (dir, bytes) = make(&f.root);
            fake_git_dir(&dir, &target);
            fs::write(f.root.join("notes.txt/.git"), bytes).unwrap();
            check(
                &f,
                &format!("{form}, packed-refs linked to {target:?}"),
                leaked,
            );
        }
    }
}

/// `git diff --cached` shows a staged blob from the work tree instead of
/// the object store when the index entry's stat data still matches the
/// file there (git's `reuse_worktree_file`), and it finds that file with
/// `lstat`, which follows a symbolic link on the way. So an index entry
/// `lnk/<name>`, with `lnk` a link out of the root and the entry's stat
/// data that of the file it leads to (with `core.checkStat = minimal` and
/// `core.fileMode = false` in the repository config, its mtime in seconds
/// and its size: the same on every host for a file a package installs),
/// made `git diff --cached` print that file: one beside the root, and
/// `/etc/hostname` under git's ruleset too. Now an index entry whose
/// directory in the work tree leads out of the root refuses the
/// repository, naming the entry.
#[test]
fn git27_an_index_entry_beyond_a_link_out_of_the_root_is_refused() {
    if !have_git() {
        return;
    }
    let secret_line = "SECRET-LINE token=git27b";
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    let hostname = fs::read_to_string("/etc/hostname").unwrap_or_default();
    for target in ["outside", "/etc/hostname"] {
        if target == "/etc/hostname" && hostname.trim().is_empty() {
            eprintln!("note: no /etc/hostname to read; that target skipped");
            continue;
        }
        let f = hostile();
        let base = f.root.parent().unwrap().to_path_buf();
        let (target, leaked) = if target == "outside" {
            let dir = base.join("outside");
            fs::create_dir(&dir).unwrap();
            let file = dir.join("secret.txt");
            fs::write(&file, format!("{secret_line}\n")).unwrap();
            // Old, so that the index written now does not make the entry
            // racily clean (git would compare the contents then).
            fs::File::options()
                .write(true)
                .open(&file)
                .unwrap()
                .set_modified(old)
                .unwrap();
            (file, secret_line.to_owned())
        } else {
            (
                PathBuf::from(target),
                hostname.lines().next().unwrap().to_owned(),
            )
        };
        let name = target.file_name().unwrap().to_str().unwrap().to_owned();
        let meta = fs::metadata(&target).unwrap();
        // Staged: a blob of the target's size, with the target's mtime.
        let staged = f.root.join("lnk").join(&name);
        fs::create_dir(f.root.join("lnk")).unwrap();
        fs::write(&staged, "Z".repeat(meta.len() as usize)).unwrap();
        fs::File::options()
            .write(true)
            .open(&staged)
            .unwrap()
            .set_modified(meta.modified().unwrap())
            .unwrap();
        raw_git(&f.root, &["add", &format!("lnk/{name}")]);
        f.config("core.checkStat", "minimal");
        f.config("core.fileMode", "false");
        fs::remove_dir_all(f.root.join("lnk")).unwrap();
        std::os::unix::fs::symlink(target.parent().unwrap(), f.root.join("lnk")).unwrap();
        f.clear_sentinels();
        for request in [
            "git diff --cached",
            "git diff --staged --stat",
            "git diff --cached HEAD",
            "git status",
        ] {
            match plan(&split_words(request).unwrap(), &ALL, &f.root) {
                Ok(inv) => {
                    let out = exec_unconfined(&inv);
                    let confined = {
                        let prepared =
                            prepare(&inv.confine_spec(), ConfineMode::BestEffort).unwrap();
                        exec_planned(&inv, &prepared)
                    };
                    let (out, confined) = (
                        String::from_utf8_lossy(&out.stdout).into_owned(),
                        String::from_utf8_lossy(&confined.stdout).into_owned(),
                    );
                    panic!(
                        "lnk -> {:?}: {request} was admitted (the file shown: unconfined {}, \
                         under git's ruleset {}): unconfined stdout {out:?}, under git's \
                         ruleset stdout {confined:?}",
                        target.parent().unwrap(),
                        out.contains(&leaked),
                        confined.contains(&leaked),
                    );
                }
                Err(e) => {
                    assert_eq!(e.kind(), GitErrorKind::Repository, "{request}: {e}");
                    assert!(
                        e.message().contains(&format!("lnk/{name}")),
                        "{request}: {e}"
                    );
                    assert!(!e.message().contains(&leaked), "{request}: {e}");
                }
            }
        }
        // Control: a link that stays inside the root is admitted, and
        // git shows what the root holds.
        fs::remove_file(f.root.join("lnk")).unwrap();
        fs::create_dir(f.root.join("inside")).unwrap();
        fs::write(f.root.join("inside").join(&name), "inside\n").unwrap();
        std::os::unix::fs::symlink("inside", f.root.join("lnk")).unwrap();
        let out = f.run_clean("git diff --cached --stat");
        assert!(out.contains(&format!("lnk/{name}")), "{out}");
    }
}

/// git's ruleset grants the system directories but `/etc`, of which it
/// grants only what git reads (`ld.so.cache`, `localtime`): every leak a
/// vetting miss opened (a `packed-refs` line, a staged file read from the
/// work tree) reached `/etc/hostname` or `/etc/passwd` through git's
/// messages or output, under the ruleset too. A driver git is handed
/// reads neither; git still runs, with the host's time zone.
#[test]
fn git27_git_reads_no_host_file_in_etc() {
    if !have_git() {
        return;
    }
    let f = hostile();
    fs::write(f.root.join(".gitattributes"), "*.dat filter=late\n").unwrap();
    let driver = f.root.join(".git/driver.sh");
    script(
        &driver,
        "echo DRIVER-RAN >&2\n\
         for file in /etc/hostname /etc/passwd /etc/ld.so.cache; do\n\
         if head -c 1 \"$file\" >/dev/null 2>&1; then echo \"READ $file\" >&2; \
         else echo \"NOT-READ $file\" >&2; fi\n\
         done\n\
         cat",
    );
    let mut inv = plan(&split_words("git status --short").unwrap(), &ALL, &f.root).unwrap();
    let handed = format!("filter.late.clean={}", driver.display());
    inv.args.splice(0..0, ["-c".into(), handed.into()]);
    let present: Vec<&str> = ["/etc/hostname", "/etc/passwd"]
        .into_iter()
        .filter(|p| fs::File::open(p).is_ok())
        .collect();
    // Control: with no ruleset the driver reads them.
    let out = exec_unconfined(&inv);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains("DRIVER-RAN"), "{stderr}");
    for file in &present {
        assert!(stderr.contains(&format!("READ {file}\n")), "{stderr}");
    }
    let out = run_with_timeout(&inv, 20);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains("DRIVER-RAN"), "{stderr}");
    if out.confined.landlock_abi.is_none() {
        eprintln!("note: no Landlock; /etc not checked");
        return;
    }
    for file in &present {
        assert!(
            stderr.contains(&format!("NOT-READ {file}\n")),
            "under git's ruleset: {stderr:?} {:?}",
            out.confined
        );
    }
    // git itself still runs as it did, in the host's time zone.
    for request in [
        "git log -n 1 --date=local --format=%ad",
        "git diff --stat HEAD~1",
        "git status --short",
    ] {
        let inv = plan(&split_words(request).unwrap(), &ALL, &f.root).unwrap();
        let plain = exec_unconfined(&inv);
        let confined = run_with_timeout(&inv, 20);
        assert_eq!(
            (confined.exit_code, &confined.stdout, &confined.stderr),
            (0, &plain.stdout, &plain.stderr),
            "{request} under git's ruleset: {}",
            String::from_utf8_lossy(&confined.stderr)
        );
    }
}

/// git's format placeholders take one modifier between `%` and the
/// placeholder (`%-x` drops the line feeds before an empty expansion, `% x`
/// adds a space before a non-empty one, `%+x` a line feed). The schema
/// refused `%(` and `%G` as written, so `%-(describe)` (which starts `git
/// describe` for every commit) and `%-GG` (which has git verify the
/// signature: it made a temporary file for gpg, refused only by git's
/// ruleset) were admitted. Now a modifier before `(` or `G` is refused
/// too, while one before any other placeholder still works.
#[test]
fn git27_a_format_modifier_never_reaches_describe_or_gpg() {
    if !have_git() {
        return;
    }
    let f = hostile();
    raw_git(
        &f.root,
        &["tag", "-a", "v27-from-describe", "-m", "t", "HEAD~1"],
    );
    f.clear_sentinels();
    for format in [
        "%-(describe)",
        "% (describe)",
        "x%-(describe)y",
        "%-(trailers)",
        "%-GG",
        "% GK",
        "%-G?",
        "%h%-GS",
    ] {
        for flag in ["--format", "--pretty"] {
            let request = format!("git log -n 1 '{flag}={format}'");
            match plan(&split_words(&request).unwrap(), &ALL, &f.root) {
                Ok(inv) => {
                    let out = exec_unconfined(&inv);
                    panic!(
                        "{request} was admitted: stdout {:?}, stderr {:?}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                Err(e) => {
                    assert_eq!(e.kind(), GitErrorKind::Refused, "{request}: {e}");
                    assert!(e.message().contains(format), "{request}: {e}");
                }
            }
        }
    }
    // A modifier before any other placeholder is git's own formatting.
    let out = f.run_clean("git log -n 2 '--format=%h%-s% an%n'");
    assert!(out.contains("third") && out.contains("Fixture"), "{out}");
    assert!(!out.contains("v27-from-describe"), "{out}");
}

const RELATIVE_TMPDIR: &str = "SANDGATE_TEST_RELATIVE_TMPDIR";

/// A host whose `TMPDIR` is a relative name still gets a working confined
/// git: git's private git directory is made under the absolute form of
/// that name, and `GIT_DIR` names it absolutely. Before, `GIT_DIR` was the
/// relative name, which git (running in the repository's directory) took
/// from there: a directory in the workspace, never the one made, so every
/// request failed ("not a git repository"). Run in a child process
/// started in a directory of its own with the relative `TMPDIR`, and with
/// an empty one, taken as unset (`/tmp`).
#[test]
fn env19_a_relative_host_tmpdir_still_gives_git_its_private_directory() {
    if !have_git() {
        return;
    }
    if let Some(given) = std::env::var_os(RELATIVE_TMPDIR) {
        let here = std::env::current_dir().unwrap();
        // An empty TMPDIR is no directory: the default's.
        let base = if given.is_empty() {
            PathBuf::from("/tmp")
        } else {
            here.join(given)
        };
        let root = here.join("repo");
        fs::create_dir(&root).unwrap();
        raw_git(&root, &["init", "-q"]);
        fs::write(root.join("a.txt"), "one\n").unwrap();
        raw_git(&root, &["add", "a.txt"]);
        raw_git(&root, &["commit", "-q", "-m", "one"]);
        fs::write(root.join("a.txt"), "two\n").unwrap();
        let words = split_words("git status --short").unwrap();
        let inv = plan(&words, &ALL, &root).unwrap();
        let git_dir = inv
            .env
            .iter()
            .find(|(n, _)| n == "GIT_DIR")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap();
        assert!(git_dir.is_absolute(), "GIT_DIR {}", git_dir.display());
        assert!(git_dir.starts_with(&base), "GIT_DIR {}", git_dir.display());
        let prepared = prepare(&inv.confine_spec(), ConfineMode::BestEffort).unwrap();
        let r = exec_planned(&inv, &prepared);
        assert_eq!(
            (r.exit_code, String::from_utf8_lossy(&r.stdout).into_owned()),
            (0, " M a.txt\n".to_owned()),
            "{}",
            String::from_utf8_lossy(&r.stderr)
        );
        return;
    }
    for given in ["rel", ""] {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("rel")).unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "--nocapture",
                "env19_a_relative_host_tmpdir_still_gives_git_its_private_directory",
            ])
            .current_dir(dir.path())
            .env(RELATIVE_TMPDIR, given)
            .env("TMPDIR", given)
            .output()
            .unwrap();
        assert!(
            child.status.success(),
            "TMPDIR={given:?}: {}\n{}",
            String::from_utf8_lossy(&child.stdout),
            String::from_utf8_lossy(&child.stderr)
        );
    }
}

/// The links vetting admits inside `.git` (a ref linked to `../heads/main`,
/// a submodule's `gitdir: ../.git/modules/sub`) are resolved with
/// `openat2(RESOLVE_BENEATH)`, which answers `EAGAIN` when any rename on
/// the host races with a `..` step. Before, that one answer refused the
/// repository as if the link led out: CI saw `git log` refused while other
/// tests renamed files. Now a raced resolution is tried again. A thread
/// renames a file to and fro for the whole test.
#[test]
fn ci21_a_rename_elsewhere_on_the_host_does_not_refuse_a_link_inside_dot_git() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    if !have_git() {
        return;
    }
    let f = hostile();
    let dot_git = f.root.join(".git");
    std::os::unix::fs::symlink("../heads/main", dot_git.join("refs/heads/alias")).unwrap();
    let modules = f.root.join(".git/modules/sub");
    fs::create_dir_all(f.root.join(".git/modules")).unwrap();
    raw_git(
        &f.root,
        &[
            "init",
            "-q",
            &format!("--separate-git-dir={}", modules.display()),
            "sub",
        ],
    );
    fs::write(f.root.join("sub/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let renamer = {
        let stop = stop.clone();
        let dir = tempfile::tempdir().unwrap();
        std::thread::spawn(move || {
            let (a, b) = (dir.path().join("a"), dir.path().join("b"));
            fs::write(&a, "x").unwrap();
            while !stop.load(Ordering::Relaxed) {
                fs::rename(&a, &b).unwrap();
                fs::rename(&b, &a).unwrap();
            }
        })
    };
    let started = std::time::Instant::now();
    let mut refused = Vec::new();
    let mut rounds = 0;
    while started.elapsed() < std::time::Duration::from_secs(3) {
        for request in ["git log --format=%s -n 1 alias", "git status"] {
            if let Err(e) = plan(&split_words(request).unwrap(), &ALL, &f.root) {
                refused.push(format!("{request}: {e}"));
            }
        }
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    renamer.join().unwrap();
    assert!(
        refused.is_empty(),
        "{} of {rounds} rounds refused, first: {}",
        refused.len(),
        refused[0]
    );
}

const FSIZE21_CHILD: &str = "SANDGATE_GIT_FSIZE21_CHILD";

/// In the child only (its `TMPDIR` the fixture's `tmp`): under a file size
/// limit of 16 bytes, shorter than `.git/HEAD` and the other control
/// files, planning a run fails with an I/O error naming the copy, instead of the `SIGXFSZ` that copying the
/// control files into git's private git directory raised.
#[test]
fn fsize21_child_git_plan() {
    let Some(root) = std::env::var_os(FSIZE21_CHILD) else {
        return;
    };
    let limit = rustix::process::Rlimit {
        current: Some(16),
        maximum: None,
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit).unwrap();
    let words = split_words("git status").unwrap();
    let e = plan(&words, &ALL, Path::new(&root)).unwrap_err();
    assert_eq!(e.kind(), GitErrorKind::Io, "{e}");
    let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(
        source.and_then(|s| s.raw_os_error()),
        Some(libc::EFBIG),
        "{e:?}"
    );
    assert!(e.to_string().contains("cannot copy .git/"), "{e}");
    println!("FSIZE-OK");
}

/// The executor's own copies of git's control files keep to the file size
/// limit of the program that embeds it: past it, the plan fails with
/// `EFBIG` and leaves no private git directory, and the program lives on.
#[test]
fn fsize21_a_file_size_limit_does_not_kill_the_embedder_planning_git() {
    use std::os::unix::process::ExitStatusExt;
    if !have_git() || std::env::var_os(FSIZE21_CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (root, tmpdir) = (base.join("root"), base.join("tmp"));
    fs::create_dir(&root).unwrap();
    fs::create_dir(&tmpdir).unwrap();
    raw_git(&root, &["init", "-q", "."]);
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fsize21_child_git_plan", "--nocapture"])
        .env(FSIZE21_CHILD, &root)
        .env("TMPDIR", &tmpdir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("FSIZE-OK"),
        "the child (signal {:?}): {}\n{stdout}\n{}",
        out.status.signal(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read_dir(&tmpdir).unwrap().count(), 0);
}

const FEW_DESCRIPTORS: &str = "SANDGATE_TEST_DEEP22_REFS";

/// The vetting of `.git` looks through `refs`, `logs` and `objects` (up to
/// a million entries) and the rest of `.git`; it held a descriptor for
/// every directory it had yet to look into. A `refs/heads` of 1,000
/// branch directories (`user/topic` names, or `mkdir` by anyone who can
/// write the repository), or a chain 400 deep with a sibling at each
/// level, took 1,000 or 400 descriptors at once: with a descriptor limit
/// of 256, planning failed with E_IO ("Too many open files") where plain
/// git answers, and meanwhile every other open of the host failed too.
/// Run in a child process whose soft descriptor limit is 256; the
/// confined run must answer as plain git does.
#[test]
fn deep22_vetting_a_dot_git_of_many_directories_holds_few_descriptors() {
    if !have_git() {
        return;
    }
    if let Some(shape) = std::env::var_os(FEW_DESCRIPTORS) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs::create_dir(&root).unwrap();
        raw_git(&root, &["init", "-q"]);
        fs::write(root.join("a"), "a\n").unwrap();
        raw_git(&root, &["add", "a"]);
        raw_git(&root, &["commit", "-q", "-m", "one"]);
        let head = fs::read(root.join(".git/refs/heads/main")).unwrap();
        let (top, wide) = match shape.to_str().unwrap() {
            "refs" => (root.join(".git/refs/heads"), true),
            "logs" => (root.join(".git/logs/refs/heads"), true),
            "info" => (root.join(".git/info"), true),
            "chain" => (root.join(".git/refs/heads"), false),
            other => panic!("{other}"),
        };
        if wide {
            for i in 0..1000 {
                let d = top.join(format!("user{i}"));
                fs::create_dir_all(&d).unwrap();
                if top.starts_with(root.join(".git/refs")) {
                    fs::write(d.join("topic"), &head).unwrap();
                }
            }
        } else {
            // Siblings of other names at each level, so that some come
            // before the chain in the listing, whatever its order.
            let mut d = top.join("c");
            for level in 0..400 {
                for s in ["a", "b", "s"] {
                    fs::create_dir_all(d.join(format!("{s}{level}"))).unwrap();
                }
                d = d.join("c");
            }
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("deepest"), &head).unwrap();
        }
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let hard = getrlimit(Resource::Nofile).maximum;
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(256),
                maximum: hard,
            },
        )
        .unwrap();
        let words = split_words("git log --oneline").unwrap();
        let inv = plan(&words, &ALL, &root).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        let out = exec_unconfined(&inv);
        assert_eq!(
            out.exit_code,
            0,
            "{shape:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(" one"),
            "{shape:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        return;
    }
    for shape in ["refs", "logs", "info", "chain"] {
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "--nocapture",
                "deep22_vetting_a_dot_git_of_many_directories_holds_few_descriptors",
            ])
            .env(FEW_DESCRIPTORS, shape)
            .output()
            .unwrap();
        assert!(
            child.status.success(),
            "{shape}: {}\n{}",
            String::from_utf8_lossy(&child.stdout),
            String::from_utf8_lossy(&child.stderr)
        );
    }
}
