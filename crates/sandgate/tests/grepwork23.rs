//! grep with `gitignore` on: the ignore files decide as git decides them
//! (checked against git itself), and a tree built so that every entry must
//! be checked against a thousand ignore files answers a cut search instead
//! of spending minutes of CPU.

use std::fs;
use std::path::Path;
use std::process::Command;

use sandgate::search::{Cut, GrepMode, GrepOptions, GrepOutput};
use sandgate::Sandbox;

fn put(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn files_opts(gitignore: bool) -> GrepOptions {
    let mut o = GrepOptions::default();
    o.mode = GrepMode::Files;
    o.max_results = Some(1000);
    o.gitignore = gitignore;
    o
}

fn files(out: GrepOutput) -> Vec<String> {
    match out {
        GrepOutput::Files(mut f) => {
            f.sort();
            f
        }
        other => panic!("not files: {other:?}"),
    }
}

/// What git itself leaves unignored in `dir` (untracked files, with only
/// the tree's own `.gitignore` files in force).
fn git_unignored(dir: &Path) -> Vec<String> {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q"]);
    let mut v: Vec<String> = git(&["ls-files", "--others", "--exclude-standard"])
        .lines()
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}

/// Negations across levels: the nearest `.gitignore` with a matching rule
/// decides (a deeper `!` re-includes what a shallower file excludes, a
/// deeper plain rule excludes again), a rule with a slash is anchored to
/// its own file's directory, and nothing below an excluded directory comes
/// back. The same tree is asked of git, and grep must answer exactly what
/// git leaves.
#[test]
fn grepwork23_gitignore_negations_across_levels_match_git() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path();
    put(
        r,
        ".gitignore",
        "*.log\n/build/\nsecret*\nvendor/\nlogs/\n**/cache/*.bin\n",
    );
    put(
        r,
        "a/.gitignore",
        "!important.log\nb/c/gen.txt\nb/c/gen2.txt\n!logs/\n",
    );
    put(r, "a/b/.gitignore", "important.log\n");
    put(r, "a/b/c/.gitignore", "!*.log\n!gen.txt\n");
    put(r, "vendor/.gitignore", "!*\n");
    for f in [
        "top.log",
        "top.txt",
        "build/x.txt",
        "secret.txt",
        "vendor/x.txt",
        "logs/x.txt",
        "a/important.log",
        "a/other.log",
        "a/build/x.txt",
        "a/secret.txt",
        "a/logs/x.txt",
        "a/b/important.log",
        "a/b/other.log",
        "a/b/cache/z.bin",
        "a/b/cache/z.txt",
        "a/b/c/x.log",
        "a/b/c/important.log",
        "a/b/c/gen.txt",
        "a/b/c/gen2.txt",
        "a/b/c/d/deep.log",
        "a/b/c/d/secret.log",
        "a/b/c/d/plain.txt",
    ] {
        put(r, f, "x\n");
    }
    let want = git_unignored(r);
    // The oracle itself says what the rules mean.
    for (path, kept) in [
        ("top.log", false),
        ("a/important.log", true),
        ("a/b/important.log", false),
        ("a/b/c/important.log", true),
        ("a/b/c/d/deep.log", true),
        ("a/b/c/gen.txt", true),
        ("a/b/c/gen2.txt", false),
        ("build/x.txt", false),
        ("a/build/x.txt", true),
        ("vendor/x.txt", false),
        ("logs/x.txt", false),
        ("a/logs/x.txt", true),
        ("a/b/cache/z.bin", false),
    ] {
        assert_eq!(
            want.contains(&path.to_owned()),
            kept,
            "git on {path}: {want:?}"
        );
    }
    let mut b = Sandbox::builder();
    b.read_root(r);
    let sb = b.build().unwrap();
    let found = sb.grep_found(".", None, &files_opts(true)).unwrap();
    assert_eq!(found.cut, None);
    assert_eq!(files(found.results), want);
    // Asked from below, the ignore files above the path still apply.
    let found = sb.grep_found(".", Some("a/b"), &files_opts(true)).unwrap();
    let below: Vec<String> = want
        .iter()
        .filter(|p| p.starts_with("a/b/"))
        .cloned()
        .collect();
    assert_eq!(files(found.results), below);
}

/// A chain `d/d/…/d` `DEPTH` deep with a `.gitignore` (`*.log`) at every
/// level and `FILES` files at the bottom: each file would be checked
/// against all `DEPTH` ignore files, some millions of rule checks for one
/// call (it took tens of seconds). The search stops at its budget of
/// checks and says it was cut (`walk_entries`: what lies past was not
/// searched); what it answers is still right. Without `gitignore` the same
/// tree answers whole, and a tree with ignore files at a few levels only
/// is not cut.
#[test]
fn grepwork23_deep_gitignore_chain_is_cut_at_the_check_budget() {
    const DEPTH: usize = 1000;
    const FILES: usize = 5000;
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path();
    let mut dir = r.to_path_buf();
    for _ in 0..DEPTH {
        dir.push("d");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join(".gitignore"), "*.log\n").unwrap();
    }
    for i in 0..FILES {
        fs::write(dir.join(format!("f{i:05}.txt")), "").unwrap();
    }
    fs::write(dir.join("hit.txt"), "needle\n").unwrap();
    fs::write(dir.join("hit.log"), "needle\n").unwrap();
    let mut b = Sandbox::builder();
    b.read_root(r);
    let sb = b.build().unwrap();
    let whole = sb.grep_found("needle", None, &files_opts(false)).unwrap();
    assert_eq!(whole.cut, None);
    assert_eq!(files(whole.results).len(), 2);
    let found = sb.grep_found("needle", None, &files_opts(true)).unwrap();
    assert_eq!(found.cut, Some(Cut::WalkEntries), "{found:?}");
    assert!(
        files(found.results).iter().all(|p| !p.ends_with(".log")),
        "an ignored file was answered"
    );

    // Ignore files at a few levels of an ordinary tree: not cut.
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path();
    put(r, ".gitignore", "*.log\n");
    for i in 0..20 {
        let d = format!("p{i}/q/r/s");
        put(r, &format!("p{i}/.gitignore"), "tmp/\n");
        put(r, &format!("p{i}/q/r/.gitignore"), "!keep.log\n");
        for j in 0..500 {
            put(r, &format!("{d}/f{j}.txt"), "");
        }
        put(r, &format!("{d}/hit.txt"), "needle\n");
        put(r, &format!("{d}/hit.log"), "needle\n");
    }
    let mut b = Sandbox::builder();
    b.read_root(r);
    let sb = b.build().unwrap();
    let found = sb.grep_found("needle", None, &files_opts(true)).unwrap();
    assert_eq!(found.cut, None);
    assert_eq!(files(found.results).len(), 20);
}

/// Every ignore file a walk reads is compiled into a matcher, at a cost
/// that grows with its rules (a 1 MiB `.gitignore` of 80,000 rules like
/// `a*b*c1*d` took 23 s and 560 MB to compile, debug), and one file
/// hard-linked into many directories costs that in each (1,000 such rules
/// in 300 directories: 71 s for one grep). A walk compiles at most
/// `MAX_IGNORE_RULES` rules: past them it stops and says it was cut
/// (`walk_entries`), rather than search on with rules it did not read.
#[test]
fn grepwork23_ignore_rules_one_walk_compiles_are_bounded() {
    use sandgate::search::MAX_IGNORE_RULES;
    let per_file = MAX_IGNORE_RULES / 4;
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path();
    let mut text = String::from("# comments and blank lines are no rules\n\n");
    for i in 0..per_file {
        text.push_str(&format!("name{i}.txt\n"));
    }
    put(r, "s0/.gitignore", &text);
    put(r, "s0/hit.txt", "needle\n");
    put(r, "s0/name7.txt", "needle\n");
    for k in 1..6 {
        fs::create_dir(r.join(format!("s{k}"))).unwrap();
        fs::hard_link(r.join("s0/.gitignore"), r.join(format!("s{k}/.gitignore"))).unwrap();
        put(r, &format!("s{k}/hit.txt"), "needle\n");
    }
    let mut b = Sandbox::builder();
    b.read_root(r);
    let sb = b.build().unwrap();
    let found = sb.grep_found("needle", None, &files_opts(true)).unwrap();
    assert_eq!(found.cut, Some(Cut::WalkEntries), "{found:?}");
    let got = files(found.results);
    assert!(got.contains(&"s0/hit.txt".to_owned()), "{got:?}");
    assert!(!got.contains(&"s0/name7.txt".to_owned()), "{got:?}");
    // Four such files are within the bound: the answer is whole.
    for k in 4..6 {
        fs::remove_file(r.join(format!("s{k}/.gitignore"))).unwrap();
    }
    let found = sb.grep_found("needle", None, &files_opts(true)).unwrap();
    assert_eq!(found.cut, None);
    assert_eq!(files(found.results).len(), 6);
}
