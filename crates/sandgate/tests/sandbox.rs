//! The Sandbox on real files: every rule of docs/reference/sandbox.md and docs/reference/deny-write.md that the facade
//! enforces, with the exact code asserted.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sandgate::{
    AuditEvent, EditOptions, ErrorCode, FileKind, Resolver, Sandbox, SandboxBuilder, WriteOptions,
};

struct Fx {
    tmp: tempfile::TempDir,
}

impl Fx {
    fn new() -> Fx {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["in", "ws", "outside"] {
            fs::create_dir(tmp.path().join(d)).unwrap();
        }
        fs::write(tmp.path().join("outside/secret"), "OUTSIDE").unwrap();
        Fx { tmp }
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
    fn put(&self, rel: &str, content: &str) -> &Self {
        let p = self.p(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
        self
    }
    fn link(&self, rel: &str, target: &str) -> &Self {
        symlink(target, self.p(rel)).unwrap();
        self
    }
    /// Reads from `in` then `ws`; writes to `ws`.
    fn builder(&self) -> SandboxBuilder {
        let mut b = Sandbox::builder();
        b.read_root(self.p("in"))
            .read_root(self.p("ws"))
            .write_root(self.p("ws"));
        b
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, sandgate::Error>) -> ErrorCode {
    r.unwrap_err().code()
}

#[test]
fn nothing_is_granted_by_default() {
    let sb = Sandbox::builder().build().unwrap();
    assert_eq!(code(sb.read("a")), ErrorCode::Denied);
    assert_eq!(
        code(sb.write("a", b"x", WriteOptions::default())),
        ErrorCode::Denied
    );
    assert_eq!(code(sb.list(".")), ErrorCode::Denied);
    assert_eq!(code(sb.mkdir("d")), ErrorCode::Denied);
    assert_eq!(code(sb.glob("*", None)), ErrorCode::Denied);
}

#[test]
fn write_root_does_not_grant_reads() {
    let fx = Fx::new();
    fx.put("ws/a.txt", "a");
    let sb = Sandbox::builder().write_root(fx.p("ws")).build().unwrap();
    assert_eq!(code(sb.read("a.txt")), ErrorCode::Denied);
    sb.write("b.txt", b"b", WriteOptions::default()).unwrap();
}

#[test]
fn read_roots_are_searched_in_order() {
    let fx = Fx::new();
    fx.put("in/both.txt", "from in")
        .put("ws/both.txt", "from ws")
        .put("ws/only.txt", "ws");
    let sb = fx.builder().build().unwrap();
    assert_eq!(sb.read("both.txt").unwrap(), b"from in");
    assert_eq!(sb.read("only.txt").unwrap(), b"ws");
    assert_eq!(code(sb.read("none.txt")), ErrorCode::NotFound);
}

#[test]
fn names_are_parsed_before_anything_else() {
    let fx = Fx::new();
    let sb = fx.builder().build().unwrap();
    for bad in [
        "",
        "/etc/passwd",
        "../outside/secret",
        "a/../b",
        "C:\\x",
        "a\\b",
        "con.txt",
        "f:stream",
        "a\0b",
    ] {
        assert_eq!(code(sb.read(bad)), ErrorCode::PathInvalid, "{bad:?}");
        assert_eq!(
            code(sb.write(bad, b"x", WriteOptions::default())),
            ErrorCode::PathInvalid,
            "{bad:?}"
        );
    }
    assert_eq!(
        code(sb.write(".", b"x", WriteOptions::default())),
        ErrorCode::PathInvalid
    );
    assert_eq!(code(sb.delete(".")), ErrorCode::PathInvalid);
    assert_eq!(code(sb.rename(".", "x")), ErrorCode::PathInvalid);
    assert!(sb.list(".").is_ok());
    assert!(sb.stat(".").is_ok());
}

#[test]
fn symlink_escapes_are_refused() {
    let fx = Fx::new();
    let out = fx.p("outside");
    fx.link("ws/abs", &format!("{}/secret", out.display()))
        .link("ws/rel", "../outside/secret")
        .link("ws/dir", "../outside");
    let sb = fx.builder().build().unwrap();
    for p in ["abs", "rel", "dir/secret"] {
        assert_eq!(code(sb.read(p)), ErrorCode::PathEscape, "{p}");
    }
    assert_eq!(
        code(sb.write("dir/new", b"x", WriteOptions::default())),
        ErrorCode::PathEscape
    );
    assert!(!out.join("new").exists());
    let e = sb.read("rel").unwrap_err();
    assert!(
        !e.to_string().contains(&*fx.tmp.path().to_string_lossy()),
        "{e}"
    );
}

#[test]
fn write_is_exclusive_and_overwrite_needs_both_switches() {
    let fx = Fx::new();
    fx.put("ws/a.txt", "old");
    let strict = fx.builder().build().unwrap();
    assert_eq!(
        code(strict.write("a.txt", b"new", WriteOptions::default())),
        ErrorCode::Exists
    );
    assert_eq!(
        code(strict.write("a.txt", b"new", WriteOptions::default().overwrite(true))),
        ErrorCode::Exists
    );
    let open = fx.builder().allow_overwrite(true).build().unwrap();
    assert_eq!(
        code(open.write("a.txt", b"new", WriteOptions::default())),
        ErrorCode::Exists
    );
    assert_eq!(fs::read(fx.p("ws/a.txt")).unwrap(), b"old");
    assert_eq!(
        open.write("a.txt", b"new", WriteOptions::default().overwrite(true))
            .unwrap(),
        3
    );
    assert_eq!(fs::read(fx.p("ws/a.txt")).unwrap(), b"new");
    assert_eq!(
        open.write("deep/er/b.txt", b"b", WriteOptions::default())
            .unwrap(),
        1
    );
    assert_eq!(fs::read(fx.p("ws/deep/er/b.txt")).unwrap(), b"b");
}

/// A host that means "no cap" passes the largest value (`u64::MAX`
/// through the C ABI's `sg_sandbox_options_set_max_read_bytes`, or
/// `max_read_bytes` of a binding): every read still answers the file, none
/// overflows its arithmetic on the cap (a panic, `E_INTERNAL` at the C
/// boundary, or with wrapping arithmetic an empty range and a missed edit).
#[test]
fn a_read_cap_of_u64_max_reads_whole_files() {
    let fx = Fx::new();
    fx.put("ws/t.txt", "one\ntwo\nthree\n");
    let sb = fx
        .builder()
        .allow_overwrite(true)
        .max_read_bytes(u64::MAX)
        .max_write_bytes(u64::MAX)
        .build()
        .unwrap();
    assert_eq!(sb.read("t.txt").unwrap(), b"one\ntwo\nthree\n");
    let r = sb.read_lines("t.txt", 2, 10).unwrap();
    assert_eq!(
        (r.content.as_slice(), r.lines, r.total_lines),
        (&b"two\nthree\n"[..], 2, 3)
    );
    assert_eq!(
        sb.edit("t.txt", "two", "TWO", EditOptions::default())
            .unwrap(),
        1
    );
    assert_eq!(fs::read(fx.p("ws/t.txt")).unwrap(), b"one\nTWO\nthree\n");
    let hits = sb.grep("TWO", None, None).unwrap();
    assert_eq!(hits.len(), 1);
}

#[test]
fn write_refuses_final_symlinks_directories_and_caps() {
    let fx = Fx::new();
    fx.put("ws/t.txt", "t").link("ws/l", "t.txt");
    fs::create_dir(fx.p("ws/d")).unwrap();
    let sb = fx
        .builder()
        .allow_overwrite(true)
        .max_write_bytes(4)
        .build()
        .unwrap();
    assert_eq!(
        code(sb.write("l", b"x", WriteOptions::default().overwrite(true))),
        ErrorCode::Symlink
    );
    assert_eq!(
        code(sb.write("d", b"x", WriteOptions::default().overwrite(true))),
        ErrorCode::NotFile
    );
    assert_eq!(
        code(sb.write("big", b"12345", WriteOptions::default())),
        ErrorCode::TooLarge
    );
    assert_eq!(fs::read(fx.p("ws/t.txt")).unwrap(), b"t");
    assert!(!fx.p("ws/big").exists());
}

#[test]
fn deny_patterns_apply_to_spelled_and_resolved_names() {
    let fx = Fx::new();
    fx.put("ws/.github/workflows/ci.yml", "ci")
        .put("ws/src/main.rs", "fn main(){}");
    fx.link("ws/gh", ".github")
        .link("ws/ci", ".github/workflows/ci.yml");
    let sb = fx
        .builder()
        .allow_overwrite(true)
        .deny_write(".github/**")
        .build()
        .unwrap();
    let e = sb
        .write(
            ".github/workflows/ci.yml",
            b"x",
            WriteOptions::default().overwrite(true),
        )
        .unwrap_err();
    assert_eq!(
        (e.code(), e.pattern()),
        (ErrorCode::FsProtected, Some(".github/**"))
    );
    let e = sb
        .write(
            "gh/workflows/ci.yml",
            b"x",
            WriteOptions::default().overwrite(true),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::FsProtected);
    assert_eq!(
        e.path(),
        Some(".github/workflows/ci.yml"),
        "the refusal names the resolved path"
    );
    assert_eq!(
        code(sb.write("gh/new.yml", b"x", WriteOptions::default())),
        ErrorCode::FsProtected
    );
    assert_eq!(
        code(sb.write("gh/newdir/x", b"x", WriteOptions::default())),
        ErrorCode::FsProtected
    );
    assert!(
        !fx.p("ws/.github/newdir").exists(),
        "no directory created inside a protected area"
    );
    assert_eq!(
        code(sb.delete("gh/workflows/ci.yml")),
        ErrorCode::FsProtected
    );
    assert_eq!(code(sb.mkdir("gh/x")), ErrorCode::FsProtected);
    // Case and normalization do not help.
    assert_eq!(
        code(sb.write(".GitHub/workflows/x.yml", b"x", WriteOptions::default())),
        ErrorCode::FsProtected
    );
    assert_eq!(
        fs::read(fx.p("ws/.github/workflows/ci.yml")).unwrap(),
        b"ci"
    );
    sb.write(
        "src/main.rs",
        b"fn main() {}",
        WriteOptions::default().overwrite(true),
    )
    .unwrap();
}

#[test]
fn ancestors_are_protected_on_rename_and_delete() {
    let fx = Fx::new();
    fx.put("ws/.claude/settings.json", "{}")
        .put("ws/a/b/c.txt", "c");
    fs::create_dir(fx.p("ws/empty")).unwrap();
    let sb = fx
        .builder()
        .deny_write(".claude/settings.json")
        .deny_write("a/b/**")
        .build()
        .unwrap();
    assert_eq!(
        code(sb.rename(".claude", "elsewhere")),
        ErrorCode::FsProtected
    );
    assert_eq!(code(sb.rename("a", "z")), ErrorCode::FsProtected);
    assert_eq!(code(sb.rename("empty", ".claude")), ErrorCode::FsProtected);
    assert_eq!(code(sb.delete("a/b/c.txt")), ErrorCode::FsProtected);
    sb.rename("empty", "moved").unwrap();
    sb.delete("moved").unwrap();
}

/// A directory whose name is only ignorable code points (a zero-width
/// space) is a real directory that `*` matches; before, folding emptied the
/// name, the path lost a component, and `packages/*/package.json` let a
/// new workspace package be written under `packages/\u{200b}/`.
#[test]
fn policy19_a_name_of_only_ignorable_code_points_is_a_component_a_star_matches() {
    let fx = Fx::new();
    fx.put("ws/packages/app/package.json", "{}");
    let sb = fx
        .builder()
        .deny_write("packages/*/package.json")
        .build()
        .unwrap();
    sb.mkdir("packages/\u{200b}").unwrap();
    for name in [
        "packages/\u{200b}/package.json",
        "packages/\u{200b}/./package.json",
    ] {
        let err = sb
            .write(name, b"{\"scripts\":{}}", WriteOptions::default())
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::FsProtected, "{name:?}: {err}");
        assert_eq!(err.pattern(), Some("packages/*/package.json"));
    }
    assert!(!fx.p("ws/packages/\u{200b}/package.json").exists());
    // A name of them and a dot, which a volume that folds names may look
    // up as `.`, is not judged either way: refused.
    let e = sb
        .write(
            "packages/\u{feff}./package.json",
            b"{}",
            WriteOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::FsProtected, "{e}");
    assert!(!fx.p("ws/packages/\u{feff}.").exists());
    // Renaming a package in under that name is refused as well.
    sb.mkdir("staging").unwrap();
    sb.write("staging/package.json", b"{}", WriteOptions::default())
        .unwrap();
    assert_eq!(
        code(sb.rename("staging", "packages/\u{feff}")),
        ErrorCode::FsProtected
    );
    assert!(!fx.p("ws/packages/\u{feff}").exists());
    // The name is not skipped either: `a/<zwsp>/b` is not `a/b`.
    let sb = fx.builder().deny_write("a/b").build().unwrap();
    sb.write("a/\u{200b}/b", b"x", WriteOptions::default())
        .unwrap();
    assert_eq!(fs::read(fx.p("ws/a/\u{200b}/b")).unwrap(), b"x");
}

#[test]
fn restricted_mode_protects_git_components() {
    let fx = Fx::new();
    fx.put("ws/repo/.git/config", "[core]");
    let sb = fx.builder().allow_overwrite(true).build().unwrap();
    let e = sb
        .write(
            "repo/.git/config",
            b"x",
            WriteOptions::default().overwrite(true),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::FsProtected);
    assert_eq!(
        code(sb.write("repo/.GIT/hooks/post-commit", b"x", WriteOptions::default())),
        ErrorCode::FsProtected
    );
    sb.write("repo/.gitignore", b"target\n", WriteOptions::default())
        .unwrap();
    let trusted = fx
        .builder()
        .restricted(false)
        .allow_overwrite(true)
        .build()
        .unwrap();
    trusted
        .write(
            "repo/.git/config",
            b"[core]\n",
            WriteOptions::default().overwrite(true),
        )
        .unwrap();
}

/// Protecting git's hooks protects the file that can move them: a write to
/// `.git/config` could set `core.hooksPath` to a directory no pattern
/// covers. A control without the hooks pattern writes it.
#[test]
fn protecting_git_hooks_protects_git_config_too() {
    let fx = Fx::new();
    fx.put("ws/repo/.git/config", "[core]\n");
    fx.put("ws/repo/.git/hooks/keep", "");
    let control = fx
        .builder()
        .restricted(false)
        .allow_overwrite(true)
        .deny_write(".github/**")
        .build()
        .unwrap();
    control
        .write(
            "repo/.git/config",
            b"[core]\n",
            WriteOptions::default().overwrite(true),
        )
        .unwrap();
    let sb = fx
        .builder()
        .restricted(false)
        .allow_overwrite(true)
        .deny_write("**/.git/hooks/**")
        .build()
        .unwrap();
    for name in ["repo/.git/config", "repo/.GIT/Config"] {
        let e = sb
            .write(
                name,
                b"[core]\n\thooksPath = /tmp/elsewhere\n",
                WriteOptions::default().overwrite(true),
            )
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::FsProtected, "{name}: {e}");
    }
    assert_eq!(
        fs::read_to_string(fx.p("ws/repo/.git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        code(sb.edit(
            "repo/.git/config",
            "[core]",
            "[core]\n\thooksPath = x",
            EditOptions::default()
        )),
        ErrorCode::FsProtected
    );
}

#[test]
fn hard_links_are_refused_when_any_rule_exists() {
    let fx = Fx::new();
    fx.put("ws/protected.txt", "p");
    fs::hard_link(fx.p("ws/protected.txt"), fx.p("ws/alias.txt")).unwrap();
    let sb = fx
        .builder()
        .allow_overwrite(true)
        .deny_write("protected.txt")
        .build()
        .unwrap();
    assert_eq!(
        code(sb.write("alias.txt", b"x", WriteOptions::default().overwrite(true))),
        ErrorCode::Hardlink
    );
    assert_eq!(
        code(sb.edit("alias.txt", "p", "q", EditOptions::default())),
        ErrorCode::Hardlink
    );
    assert_eq!(fs::read(fx.p("ws/protected.txt")).unwrap(), b"p");
}

/// SECURITY.md, "Bind mounts and hard links already inside a root": with
/// no deny rule (trusted mode, no pattern), a hard link in the write root
/// to a file outside it is written and edited by replacing the directory
/// entry, never through the shared inode: the outside file keeps its
/// content, and the name in the root no longer leads to it.
#[test]
fn claims17_without_deny_rules_a_write_to_a_hard_link_replaces_the_entry_not_the_file() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fs::hard_link(fx.p("outside/secret"), fx.p("ws/alias")).unwrap();
        fs::hard_link(fx.p("outside/secret"), fx.p("ws/alias2")).unwrap();
        let sb = fx
            .builder()
            .restricted(false)
            .allow_overwrite(true)
            .resolver(resolver)
            .build()
            .unwrap();
        sb.write("alias", b"NEW", WriteOptions::default().overwrite(true))
            .unwrap();
        assert_eq!(
            sb.edit("alias2", "OUTSIDE", "EDITED", EditOptions::default())
                .unwrap(),
            1
        );
        assert_eq!(
            fs::read_to_string(fx.p("outside/secret")).unwrap(),
            "OUTSIDE",
            "{resolver:?}"
        );
        assert_eq!(fs::read_to_string(fx.p("ws/alias")).unwrap(), "NEW");
        assert_eq!(fs::read_to_string(fx.p("ws/alias2")).unwrap(), "EDITED");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(fs::metadata(fx.p("outside/secret")).unwrap().nlink(), 1);
    }
}

#[test]
fn edit_exactly_once_or_all() {
    let fx = Fx::new();
    fx.put("ws/f.txt", "a b a");
    let sb = fx.builder().allow_overwrite(true).build().unwrap();
    assert_eq!(
        code(sb.edit("f.txt", "a", "x", EditOptions::default())),
        ErrorCode::EditAmbiguous
    );
    assert_eq!(
        code(sb.edit("f.txt", "zzz", "x", EditOptions::default())),
        ErrorCode::EditNoMatch
    );
    assert_eq!(
        code(sb.edit("f.txt", "", "x", EditOptions::default())),
        ErrorCode::Request
    );
    assert_eq!(
        sb.edit("f.txt", "b", "B", EditOptions::default()).unwrap(),
        1
    );
    assert_eq!(
        sb.edit("f.txt", "a", "A", EditOptions::default().replace_all(true))
            .unwrap(),
        2
    );
    assert_eq!(fs::read(fx.p("ws/f.txt")).unwrap(), b"A B A");
    let strict = fx.builder().build().unwrap();
    assert_eq!(
        code(strict.edit("f.txt", "A", "a", EditOptions::default().replace_all(true))),
        ErrorCode::Denied
    );
}

#[test]
fn ranged_reads_cut_at_whole_lines() {
    let fx = Fx::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    fx.put("in/t.txt", &text);
    let sb = fx.builder().max_read_bytes(20).build().unwrap();
    assert_eq!(code(sb.read("t.txt")), ErrorCode::TooLarge);
    let r = sb.read_lines("t.txt", 2, 3).unwrap();
    assert_eq!(
        (r.content.as_slice(), r.lines, r.total_lines, r.truncated),
        (&b"line 2\nline 3\n"[..], 2, 10, true)
    );
    let r = sb.read_lines("t.txt", 9, 5).unwrap();
    assert_eq!(
        (r.content.as_slice(), r.lines, r.truncated),
        (&b"line 9\nline 10\n"[..], 2, false)
    );
    assert_eq!(code(sb.read_lines("t.txt", 0, 1)), ErrorCode::Request);
    assert_eq!(code(sb.read_lines("t.txt", 1, 2001)), ErrorCode::Request);
}

#[test]
fn mcp6_the_last_lines_are_one_read() {
    let fx = Fx::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    fx.put("in/t.txt", &text);
    let sb = fx
        .builder()
        .max_read_bytes(20)
        .fs_ops_budget(Some(4))
        .build()
        .unwrap();
    let r = sb.read_last_lines("t.txt", 2).unwrap();
    assert_eq!(
        (
            r.content.as_slice(),
            r.offset,
            r.lines,
            r.total_lines,
            r.truncated
        ),
        (&b"line 9\nline 10\n"[..], 9, 2, 10, false)
    );
    // Cut at max_read_bytes, from where the tail starts.
    let r = sb.read_last_lines("t.txt", 4).unwrap();
    assert_eq!(
        (r.content.as_slice(), r.offset, r.lines, r.truncated),
        (&b"line 7\nline 8\n"[..], 7, 2, true)
    );
    let r = sb.read_last_lines("t.txt", 2000).unwrap();
    assert_eq!((r.offset, r.lines, r.truncated), (1, 2, true));
    // Each read spent one fs_ops (a refused one too): four spend the budget.
    assert_eq!(code(sb.read_last_lines("t.txt", 0)), ErrorCode::Request);
    assert_eq!(code(sb.read_last_lines("t.txt", 1)), ErrorCode::Denied);
}

#[test]
fn list_stat_mkdir_delete_rename() {
    let fx = Fx::new();
    fx.put("ws/b.txt", "bb")
        .put("ws/a/x", "")
        .link("ws/l", "b.txt");
    // `.` exists in every root: the first read root answers, so read ws only.
    let sb = Sandbox::builder()
        .read_root(fx.p("ws"))
        .write_root(fx.p("ws"))
        .build()
        .unwrap();
    let names: Vec<(String, FileKind, u64)> = sb
        .list(".")
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind, e.size))
        .collect();
    assert_eq!(names[0], ("a".into(), FileKind::Dir, names[0].2));
    assert_eq!(names[1], ("b.txt".into(), FileKind::File, 2));
    assert_eq!(names[2].1, FileKind::Symlink);
    assert_eq!(sb.stat("l").unwrap().kind, FileKind::File);
    sb.mkdir("n/m").unwrap();
    sb.mkdir("n/m").unwrap();
    assert_eq!(code(sb.mkdir("b.txt")), ErrorCode::Exists);
    assert_eq!(code(sb.delete("a")), ErrorCode::NotEmpty);
    sb.delete("l").unwrap();
    assert!(fx.p("ws/b.txt").exists());
    assert_eq!(code(sb.rename("b.txt", "a/x")), ErrorCode::Exists);
    sb.rename("b.txt", "n/m/b.txt").unwrap();
    assert_eq!(fs::read(fx.p("ws/n/m/b.txt")).unwrap(), b"bb");
}

#[test]
fn glob_and_grep_stay_inside_and_do_not_follow_links() {
    let fx = Fx::new();
    fx.put("in/src/a.rs", "fn alpha() {}\n")
        .put("in/src/deep/b.rs", "fn beta() {}\nalpha\n");
    fx.put("outside/c.rs", "fn alpha() {}\n")
        .link("in/src/out", "../../outside");
    let sb = fx.builder().build().unwrap();
    assert_eq!(
        sb.glob("**/*.rs", None).unwrap(),
        ["src/a.rs", "src/deep/b.rs"]
    );
    assert_eq!(sb.glob("*.rs", Some("src")).unwrap(), ["src/a.rs"]);
    let hits = sb.grep("alpha", None, None).unwrap();
    let got: Vec<(&str, usize)> = hits.iter().map(|m| (m.path.as_str(), m.line)).collect();
    assert_eq!(got, [("src/a.rs", 1), ("src/deep/b.rs", 2)]);
    assert_eq!(sb.grep("alpha", None, Some(1)).unwrap().len(), 1);
    assert_eq!(code(sb.grep("(", None, None)), ErrorCode::Request);
    assert_eq!(
        code(sb.grep("x", Some("src/out"), None)),
        ErrorCode::PathEscape
    );
}

/// A file named as grep's path through an in-root link is searched, as
/// read serves it and as a directory named through a link is walked: the
/// agent named it. It was counted `unreadable` and answered no match.
/// A link out of the root stays E_PATH_ESCAPE. Under both resolvers.
#[test]
fn grep_of_a_file_named_through_a_link_searches_it() {
    use sandgate::search::GrepOptions;
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put(
            "ws/d/real.txt",
            "needle
hay
",
        )
        .link("ws/alias", "d/real.txt")
        .link("ws/d/up", "../d/./real.txt")
        .link("ws/out", "../outside/secret");
        let sb = fx.builder().resolver(resolver).build().unwrap();
        for name in ["alias", "d/up"] {
            let found = sb
                .grep_found("needle", Some(name), &GrepOptions::default())
                .unwrap();
            let sandgate::search::GrepOutput::Lines(hits) = &found.results else {
                panic!("{found:?}");
            };
            let got: Vec<(&str, usize)> = hits.iter().map(|m| (m.path.as_str(), m.line)).collect();
            assert_eq!(
                (got, found.unreadable),
                (vec![(name, 1)], 0),
                "{resolver:?} {name}"
            );
        }
        assert_eq!(
            code(sb.grep_found("OUTSIDE", Some("out"), &GrepOptions::default())),
            ErrorCode::PathEscape
        );
    }
}

#[test]
fn grep_with_modes_gitignore_and_cancel() {
    use sandgate::search::{GrepMode, GrepOptions, GrepOutput};
    use std::sync::atomic::AtomicBool;
    let fx = Fx::new();
    fx.put("in/.gitignore", "target/\n")
        .put("in/src/a.rs", "Alpha\nalpha\n")
        .put("in/target/gen.rs", "alpha\n");
    let sb = fx.builder().build().unwrap();
    let mut opts = GrepOptions::default();
    opts.mode = GrepMode::Count;
    opts.case_insensitive = true;
    assert_eq!(
        sb.grep_with("alpha", None, &opts).unwrap(),
        GrepOutput::Counts(vec![("src/a.rs".into(), 2), ("target/gen.rs".into(), 1)])
    );
    opts.gitignore = true;
    assert_eq!(
        sb.grep_with("alpha", None, &opts).unwrap(),
        GrepOutput::Counts(vec![("src/a.rs".into(), 2)])
    );
    // A search cancelled from elsewhere answers E_ABORTED.
    let flag = Arc::new(AtomicBool::new(true));
    opts.cancel = Some(flag);
    assert_eq!(code(sb.grep_with("alpha", None, &opts)), ErrorCode::Aborted);
}

#[test]
fn edit_many_is_all_or_nothing_and_dry_run_checks_first() {
    let fx = Fx::new();
    fx.put("ws/a.txt", "one two three\n");
    let sb = {
        let mut b = fx.builder();
        b.allow_overwrite(true).restricted(true);
        b.build().unwrap()
    };
    // The second edit does not match: nothing is written.
    assert_eq!(
        code(sb.edit_many("a.txt", &[("one", "1"), ("four", "4")], false)),
        ErrorCode::EditNoMatch
    );
    assert_eq!(
        fs::read_to_string(fx.p("ws/a.txt")).unwrap(),
        "one two three\n"
    );
    // Edits apply in order, each to what the previous left.
    let p = sb
        .edit_many("a.txt", &[("one", "1 two"), ("1 two two", "x")], true)
        .unwrap();
    assert_eq!(p.after.as_deref(), Some(&b"x three\n"[..]));
    assert_eq!(
        fs::read_to_string(fx.p("ws/a.txt")).unwrap(),
        "one two three\n"
    );
    sb.edit_many("a.txt", &[("three", "3")], false).unwrap();
    assert_eq!(fs::read_to_string(fx.p("ws/a.txt")).unwrap(), "one two 3\n");
    // A hard link to a file outside: refused before its content is read,
    // dry run included.
    fs::hard_link(fx.p("outside/secret"), fx.p("ws/alias")).unwrap();
    let e = sb.edit_many("alias", &[("OUT", "IN")], true).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Hardlink);
    assert!(!e.message().contains("OUTSIDE"));
    assert_eq!(
        fs::read_to_string(fx.p("outside/secret")).unwrap(),
        "OUTSIDE"
    );
}

/// An edit shows no content the file tools could not read: where a read of
/// the name would not serve the very file the edit opened (the write root
/// is no read root, an earlier read root answers for the name, or the read
/// root holding the write root sees another file by that name),
/// `edit_many`'s answer holds neither the file before nor after, dry run or
/// not; where the read would serve it, both are answered.
#[test]
fn edit_many_shows_no_content_of_a_file_no_read_serves() {
    let body = "above SECRET-1\nTARGET\nbelow SECRET-2\n";
    let fx = Fx::new();
    fx.put("in/e.txt", "the read root's copy\n");
    let mut write_only = Sandbox::builder();
    write_only.write_root(fx.p("ws")).allow_overwrite(true);
    let mut with_other_root = Sandbox::builder();
    with_other_root
        .read_root(fx.p("outside"))
        .write_root(fx.p("ws"))
        .allow_overwrite(true);
    let mut shadowed = fx.builder();
    shadowed.allow_overwrite(true);
    let mut above = Sandbox::builder();
    above
        .read_root(fx.tmp.path())
        .write_root(fx.p("ws"))
        .allow_overwrite(true);
    for (what, b) in [
        ("write-only", write_only),
        ("write root no read root", with_other_root),
        ("an earlier read root answers", shadowed),
        ("the read root holds the write root", above),
    ] {
        let sb = b.build().unwrap();
        for dry in [true, false] {
            fx.put("ws/e.txt", body);
            let p = sb.edit_many("e.txt", &[("TARGET", "DONE")], dry).unwrap();
            assert!(
                p.before.is_none() && p.after.is_none(),
                "{what}, dry run {dry}: {p:?}"
            );
            let want = if dry {
                body.to_owned()
            } else {
                body.replace("TARGET", "DONE")
            };
            assert_eq!(
                fs::read_to_string(fx.p("ws/e.txt")).unwrap(),
                want,
                "{what}"
            );
        }
    }
    // Readable by the same name: before and after are answered.
    fs::remove_file(fx.p("in/e.txt")).unwrap();
    fx.put("ws/e.txt", body);
    let sb = {
        let mut b = fx.builder();
        b.allow_overwrite(true);
        b.build().unwrap()
    };
    let p = sb.edit_many("e.txt", &[("TARGET", "DONE")], true).unwrap();
    assert_eq!(p.before.as_deref(), Some(body.as_bytes()));
    assert_eq!(
        p.after.as_deref(),
        Some(body.replace("TARGET", "DONE").as_bytes())
    );
}

/// A rename does not carry what the file tools may not read into a read
/// root: with a write root that is not a read root and a read root inside
/// it, a file or a directory moved from the write-only part into the read
/// root is refused (`E_DENIED`) and stays where it was, so a read by its new
/// name finds nothing. Moves within the read root, within the write-only
/// part, and out of the read root are renames like any other.
#[test]
fn a_rename_does_not_move_write_only_files_where_a_read_root_serves_them() {
    let fx = Fx::new();
    fx.put("ws/secret", "SECRET")
        .put("ws/d/inner", "SECRET TOO")
        .put("ws/pub/shown", "public");
    let sb = Sandbox::builder()
        .read_root(fx.p("ws/pub"))
        .write_root(fx.p("ws"))
        .build()
        .unwrap();
    assert_eq!(code(sb.read("../secret")), ErrorCode::PathInvalid);
    for (from, to, read) in [
        ("secret", "pub/secret", "secret"),
        ("d", "pub/d", "d/inner"),
        ("d/inner", "pub/inner", "inner"),
    ] {
        let e = sb.rename(from, to).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Denied, "{from} -> {to}: {e}");
        assert!(!e.message().contains("SECRET"), "{e}");
        assert_eq!(code(sb.read(read)), ErrorCode::NotFound, "{from} -> {to}");
        assert!(fx.p(&format!("ws/{from}")).exists(), "{from} was moved");
    }
    // Renames that show nothing new.
    sb.rename("pub/shown", "pub/moved").unwrap();
    assert_eq!(sb.read("moved").unwrap(), b"public");
    sb.rename("secret", "d/secret").unwrap();
    sb.rename("pub/moved", "out").unwrap();
    assert_eq!(code(sb.read("moved")), ErrorCode::NotFound);
    // With the write root a read root too, every file there is readable
    // already, and a rename into the nested root is allowed.
    let sb = Sandbox::builder()
        .read_root(fx.p("ws/pub"))
        .read_root(fx.p("ws"))
        .write_root(fx.p("ws"))
        .build()
        .unwrap();
    sb.rename("d/secret", "pub/secret").unwrap();
    assert_eq!(sb.read("secret").unwrap(), b"SECRET");
}

/// What an edit of a write-only file tells, exactly: its refusals quote
/// none of the file, but whether the old text occurs (not at all, once, or
/// how many times) is the edit's answer, and a dry run asks it without
/// changing anything. So an agent that may edit a file can recover it by
/// guessing, a character at a time, as done here (the whole file);
/// SECURITY.md says so.
#[test]
fn an_edit_of_a_write_only_file_tells_whether_a_text_occurs() {
    let fx = Fx::new();
    fx.put("ws/e.txt", "key=s3cr\nkey=s3cr\nend\n");
    let sb = Sandbox::builder()
        .write_root(fx.p("ws"))
        .allow_overwrite(true)
        .build()
        .unwrap();
    assert_eq!(code(sb.read("e.txt")), ErrorCode::Denied);
    let e = sb
        .edit("e.txt", "nowhere", "x", EditOptions::default())
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message(), e.path()),
        (
            ErrorCode::EditNoMatch,
            "the old text does not occur in the file",
            Some("e.txt")
        )
    );
    let e = sb
        .edit("e.txt", "key=", "x", EditOptions::default())
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            ErrorCode::EditAmbiguous,
            "the old text occurs 2 times; pass all=true or give more context"
        )
    );
    // The oracle: extend a known end one character at a time, back to the
    // start of the file.
    let mut known = String::from("s3cr\nend");
    while let Some(c) = (b' '..=b'~').map(char::from).chain(['\n']).find(|c| {
        let guess = format!("{c}{known}");
        sb.edit_many("e.txt", &[(&guess, &guess)], true).is_ok()
    }) {
        known.insert(0, c);
    }
    assert_eq!(known, "key=s3cr\nkey=s3cr\nend");
    assert_eq!(
        fs::read_to_string(fx.p("ws/e.txt")).unwrap(),
        "key=s3cr\nkey=s3cr\nend\n"
    );
}

#[test]
fn close_answers_closed() {
    let fx = Fx::new();
    fx.put("in/a", "a");
    let sb = fx.builder().build().unwrap();
    sb.read("a").unwrap();
    sb.close();
    assert!(sb.is_closed());
    assert_eq!(code(sb.read("a")), ErrorCode::Closed);
    assert_eq!(
        code(sb.write("b", b"b", WriteOptions::default())),
        ErrorCode::Closed
    );
}

#[test]
fn audit_sees_every_operation_and_no_content() {
    let fx = Fx::new();
    fx.put("in/a.txt", "SECRET-CONTENT");
    let events: Arc<Mutex<Vec<AuditEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    let sb = fx
        .builder()
        .audit(move |e| sink.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    sb.read("a.txt").unwrap();
    let _ = sb.read("../x");
    sb.write("new.txt", b"hello", WriteOptions::default())
        .unwrap();
    let _ = sb.write("new.txt", b"again", WriteOptions::default());
    let ev = events.lock().unwrap();
    let got: Vec<(&str, &str, Option<u64>, ErrorCode)> = ev
        .iter()
        .map(|e| (e.op, e.path.as_str(), e.size, e.outcome))
        .collect();
    assert_eq!(
        got,
        [
            ("read", "a.txt", Some(14), ErrorCode::Ok),
            ("read", "../x", None, ErrorCode::PathInvalid),
            ("write", "new.txt", Some(5), ErrorCode::Ok),
            ("write", "new.txt", None, ErrorCode::Exists),
        ]
    );
    assert!(!format!("{ev:?}").contains("SECRET-CONTENT"));
}

/// A dry run changes nothing, and its record must not say a file was
/// edited: an operator reading `edit`/`OK` after an incident takes the
/// file for changed. It is recorded as `edit_dry_run`, with no size
/// (nothing was written); a real edit stays `edit` with the bytes
/// written.
#[test]
fn audit20_an_edit_dry_run_is_not_recorded_as_an_edit() {
    let fx = Fx::new();
    fx.put("ws/e.txt", "one two\n");
    let events: Arc<Mutex<Vec<AuditEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    let sb = fx
        .builder()
        .allow_overwrite(true)
        .audit(move |e| sink.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    sb.edit_many("e.txt", &[("one", "three")], true).unwrap();
    assert_eq!(fs::read_to_string(fx.p("ws/e.txt")).unwrap(), "one two\n");
    let _ = sb.edit_many("e.txt", &[("absent", "x")], true);
    sb.edit_many("e.txt", &[("one", "three")], false).unwrap();
    assert_eq!(fs::read_to_string(fx.p("ws/e.txt")).unwrap(), "three two\n");
    let ev = events.lock().unwrap();
    let got: Vec<(&str, &str, Option<u64>, ErrorCode)> = ev
        .iter()
        .map(|e| (e.op, e.path.as_str(), e.size, e.outcome))
        .collect();
    assert_eq!(
        got,
        [
            ("edit_dry_run", "e.txt", None, ErrorCode::Ok),
            ("edit_dry_run", "e.txt", None, ErrorCode::EditNoMatch),
            ("edit", "e.txt", Some(10), ErrorCode::Ok),
        ]
    );
}

#[test]
fn budget_is_exact_under_concurrency() {
    let fx = Fx::new();
    fx.put("in/a", "a");
    let sb = Arc::new(fx.builder().fs_ops_budget(Some(1000)).build().unwrap());
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let sb = Arc::clone(&sb);
            std::thread::spawn(move || {
                let (mut ok, mut denied) = (0, 0);
                for _ in 0..250 {
                    match sb.read("a") {
                        Ok(_) => ok += 1,
                        Err(e) if e.code() == ErrorCode::Denied => denied += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
                (ok, denied)
            })
        })
        .collect();
    let (ok, denied) = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert_eq!((ok, denied), (1000, 1000));
    assert_eq!(sb.fs_ops_remaining(), Some(0));
    let none = fx.builder().fs_ops_budget(Some(0)).build().unwrap();
    assert_eq!(code(none.read("a")), ErrorCode::Denied);
}

#[test]
fn many_threads_many_operations_keep_the_tree_consistent() {
    let fx = Fx::new();
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        if resolver == Resolver::Openat2 && !sandgate::rootfs::openat2_supported() {
            continue;
        }
        let ws = fx.p(&format!("ws/{resolver:?}"));
        fs::create_dir_all(&ws).unwrap();
        let sb = Arc::new(
            Sandbox::builder()
                .read_root(&ws)
                .write_root(&ws)
                .allow_overwrite(true)
                .deny_write("protected/**")
                .resolver(resolver)
                .build()
                .unwrap(),
        );
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let sb = Arc::clone(&sb);
                std::thread::spawn(move || {
                    for i in 0..10_000 {
                        let p = format!("t{t}/f{}", i % 16);
                        let r = match i % 5 {
                            0 => sb
                                .write(&p, p.as_bytes(), WriteOptions::default().overwrite(true))
                                .map(drop),
                            1 => sb.read(&p).map(|b| assert_eq!(b, p.as_bytes())),
                            2 => sb.stat(&p).map(drop),
                            3 => sb
                                .write("protected/x", b"x", WriteOptions::default().overwrite(true))
                                .map(drop),
                            _ => sb.list(&format!("t{t}")).map(drop),
                        };
                        if let Err(e) = r {
                            assert!(
                                matches!(e.code(), ErrorCode::NotFound | ErrorCode::FsProtected),
                                "unexpected {e}"
                            );
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for t in 0..8 {
            for i in 0..16 {
                let p = format!("t{t}/f{i}");
                assert_eq!(fs::read(ws.join(&p)).unwrap(), p.as_bytes());
            }
            assert_eq!(
                fs::read_dir(ws.join(format!("t{t}"))).unwrap().count(),
                16,
                "no temporaries left"
            );
        }
        assert!(!Path::new(&ws.join("protected")).exists());
    }
}

/// The resolvers a test runs under (openat2 only where the kernel has it).
fn resolvers() -> Vec<Resolver> {
    let mut v = vec![Resolver::Walk];
    if sandgate::rootfs::openat2_supported() {
        v.push(Resolver::Openat2);
    }
    v
}

/// Every operation, the later ones included (the tail of a file, grep with
/// a named file or directory, edit's dry run, a rename's destination),
/// refuses a name that leaves the root through an in-root link, with or
/// without a guard, under both resolvers; nothing outside is read or
/// changed. Without this, the facade's tests passed with a walk that let
/// the kernel follow links in the middle of a path.
#[test]
fn every_operation_refuses_an_escape_through_a_link_under_both_resolvers() {
    use sandgate::search::GrepOptions;
    for resolver in resolvers() {
        for guarded in [false, true] {
            let fx = Fx::new();
            fx.put("ws/a.txt", "inside\n")
                .link("ws/out", "../outside")
                .link("ws/sec", "../outside/secret");
            fs::create_dir(fx.p("ws/d")).unwrap();
            fx.link("ws/d/up", "../../outside/secret")
                .link("ws/d/upd", "../../outside");
            let mut b = fx.builder();
            b.allow_overwrite(true).resolver(resolver);
            if guarded {
                b.deny_write("*.lock");
            }
            let sb = b.build().unwrap();
            let grep = |p: &str| sb.grep_found("OUTSIDE", Some(p), &GrepOptions::default());
            // A link as the final name is read through; written, edited,
            // deleted or moved, it is the link itself that is acted on.
            for name in ["sec", "d/up"] {
                let got = [
                    ("read", code(sb.read(name))),
                    ("read_lines", code(sb.read_lines(name, 1, 1))),
                    ("read_last_lines", code(sb.read_last_lines(name, 1))),
                    ("stat", code(sb.stat(name))),
                    ("grep file", code(grep(name))),
                ];
                for (op, c) in got {
                    assert_eq!(
                        c,
                        ErrorCode::PathEscape,
                        "{resolver:?} guarded={guarded} {op} {name}"
                    );
                }
            }
            // A link in the middle of the name is followed by every
            // operation.
            for (name, dir) in [("out/secret", "out"), ("d/upd/secret", "d/upd")] {
                let got = [
                    ("read", code(sb.read(name))),
                    ("read_lines", code(sb.read_lines(name, 1, 1))),
                    ("read_last_lines", code(sb.read_last_lines(name, 1))),
                    ("stat", code(sb.stat(name))),
                    ("list", code(sb.list(dir))),
                    ("glob", code(sb.glob_found("*", Some(dir)))),
                    ("grep file", code(grep(name))),
                    ("grep dir", code(grep(dir))),
                    ("edit dry", code(sb.edit_many(name, &[("OUT", "IN")], true))),
                    ("edit", code(sb.edit_many(name, &[("OUT", "IN")], false))),
                    (
                        "write",
                        code(sb.write(name, b"x", WriteOptions::default().overwrite(true))),
                    ),
                    (
                        "write beneath",
                        code(sb.write(&format!("{dir}/new"), b"x", WriteOptions::default())),
                    ),
                    ("mkdir", code(sb.mkdir(&format!("{dir}/nd")))),
                    ("delete", code(sb.delete(name))),
                    ("rename from", code(sb.rename(name, "stolen"))),
                    (
                        "rename to",
                        code(sb.rename("a.txt", &format!("{dir}/moved"))),
                    ),
                ];
                for (op, c) in got {
                    assert_eq!(
                        c,
                        ErrorCode::PathEscape,
                        "{resolver:?} guarded={guarded} {op} {name} / {dir}"
                    );
                }
            }
            let outside: Vec<_> = fs::read_dir(fx.p("outside"))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(outside, ["secret"]);
            assert_eq!(
                fs::read_to_string(fx.p("outside/secret")).unwrap(),
                "OUTSIDE"
            );
            assert_eq!(fs::read_to_string(fx.p("ws/a.txt")).unwrap(), "inside\n");
        }
    }
}

/// Set, to the write root, in the child that
/// [`a_deep_directory_is_renamed_under_a_low_descriptor_limit`] starts
/// with a limit of 1,024 descriptors.
const NOFILE_ENV: &str = "SANDGATE_TEST_RENAME_NOFILE_ROOT";

/// The child's part: two chains of 1,100 directories four levels under the
/// top, a protected file at the bottom of the one the walk visits second.
#[test]
fn nofile_rename_of_a_deep_directory() {
    let Some(ws) = std::env::var_os(NOFILE_ENV) else {
        return;
    };
    let ws = PathBuf::from(ws);
    for resolver in resolvers() {
        let sb = Sandbox::builder()
            .read_root(&ws)
            .write_root(&ws)
            .deny_write("*.lock")
            .resolver(resolver)
            .build()
            .unwrap();
        let e = sb.rename("top", "moved").unwrap_err();
        assert_eq!(e.code(), ErrorCode::FsProtected, "{resolver:?}: {e}");
        assert!(e.to_string().contains("p.lock"), "{e}");
        let clean = Sandbox::builder()
            .read_root(&ws)
            .write_root(&ws)
            .deny_write("*.secret")
            .resolver(resolver)
            .build()
            .unwrap();
        clean.rename("top", "moved").unwrap();
        clean.rename("moved", "top").unwrap();
    }
}

/// A directory rename under a guard walks the tree it moves. It held a
/// descriptor for every level, so a tree deeper than the descriptor limit
/// (1,100 levels under the usual 1,024) was refused with E_IO "Too many
/// open files", and every other open of the host failed while it ran.
#[test]
fn a_deep_directory_is_renamed_under_a_low_descriptor_limit() {
    use std::os::unix::process::CommandExt;
    if std::env::var_os(NOFILE_ENV).is_some() {
        return;
    }
    let fx = Fx::new();
    let ws = fx.p("ws");
    // Under the top, the chains go beneath the directory visited first, so
    // that the walk comes back to the top for the others.
    for d in ["p", "q", "r"] {
        fs::create_dir_all(ws.join("top").join(d)).unwrap();
    }
    let last = fs::read_dir(ws.join("top"))
        .unwrap()
        .last()
        .unwrap()
        .unwrap();
    let mid = last.path().join("x/x/x");
    fs::create_dir_all(mid.join("a")).unwrap();
    fs::create_dir_all(mid.join("b")).unwrap();
    let root = sandgate::rootfs::Root::open(&mid).unwrap();
    for chain in ["a", "b"] {
        // About 2,300 bytes, within PATH_MAX: made by the kernel's own
        // walk (through the root, each mkdir walked the whole chain in
        // this test's debug build: 8 s).
        fs::create_dir_all(mid.join(chain).join("d/".repeat(1100))).unwrap();
    }
    // Entries are listed in directory order and visited from the last.
    let first = fs::read_dir(&mid)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let mut bottom = first.to_str().unwrap().to_owned();
    bottom.push_str(&"/d".repeat(1100));
    bottom.push_str("/p.lock");
    drop(root.create_new(&bottom).unwrap());

    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "nofile_rename_of_a_deep_directory"])
        .env(NOFILE_ENV, &ws);
    // SAFETY: getrlimit and setrlimit are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let mut l: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
            l.rlim_cur = 1024;
            match libc::setrlimit(libc::RLIMIT_NOFILE, &l) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A trailing slash demands a directory: `file/` and `link/` (a link to a
/// file) answer E_NOT_DIR for every operation, change nothing, and never
/// serve the file's content.
#[test]
fn trailing_slash_on_a_file_is_not_dir_for_every_operation() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/real.txt", "REAL CONTENT\n")
            .put("ws/d/x.txt", "x");
        fx.link("ws/file_link", "real.txt");
        let sb = fx
            .builder()
            .allow_overwrite(true)
            .resolver(resolver)
            .build()
            .unwrap();
        for p in [
            "real.txt/",
            "file_link/",
            "real.txt//",
            "real.txt/.",
            "./file_link/",
        ] {
            let mut got = vec![
                ("read", code(sb.read(p))),
                ("read_lines", code(sb.read_lines(p, 1, 10))),
                ("stat", code(sb.stat(p))),
                ("list", code(sb.list(p))),
                ("write", code(sb.write(p, b"new", WriteOptions::default()))),
                (
                    "write overwrite",
                    code(sb.write(p, b"new", WriteOptions::default().overwrite(true))),
                ),
                (
                    "edit",
                    code(sb.edit(p, "REAL", "FAKE", EditOptions::default())),
                ),
                ("mkdir", code(sb.mkdir(p))),
                ("delete", code(sb.delete(p))),
                ("rename from", code(sb.rename(p, "moved"))),
                ("glob", code(sb.glob("*", Some(p)))),
                ("grep", code(sb.grep("REAL", Some(p), None))),
            ];
            got.retain(|(_, c)| *c != ErrorCode::NotDir);
            assert!(got.is_empty(), "{p:?} under {resolver:?}: {got:?}");
        }
        // A file moved onto a name that demands a directory.
        assert_eq!(code(sb.rename("d/x.txt", "newdir/")), ErrorCode::NotDir);
        assert_eq!(
            fs::read_to_string(fx.p("ws/real.txt")).unwrap(),
            "REAL CONTENT\n"
        );
        assert_eq!(
            fs::read_link(fx.p("ws/file_link")).unwrap(),
            Path::new("real.txt")
        );
        assert!(fx.p("ws/d/x.txt").is_file());
        assert!(!fx.p("ws/moved").exists() && !fx.p("ws/newdir").exists());
    }
}

/// On a directory a trailing slash is an ordinary spelling; a new name with
/// one is a directory to make, never a file to write.
#[test]
fn trailing_slash_on_a_directory_works_and_never_makes_a_file() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/d/x.txt", "x");
        fx.link("ws/dir_link", "d");
        let sb = fx.builder().resolver(resolver).build().unwrap();
        assert_eq!(sb.stat("d/").unwrap().kind, FileKind::Dir);
        assert_eq!(sb.stat("dir_link/").unwrap().kind, FileKind::Dir);
        assert_eq!(sb.list("dir_link/").unwrap().len(), 1);
        assert_eq!(sb.glob("*.txt", Some("d/")).unwrap(), ["d/x.txt"]);
        assert_eq!(code(sb.read("d/")), ErrorCode::NotFile);
        assert_eq!(
            code(sb.write("new.txt/", b"x", WriteOptions::default())),
            ErrorCode::NotFile
        );
        assert_eq!(
            code(sb.write("d/", b"x", WriteOptions::default())),
            ErrorCode::NotFile
        );
        assert!(!fx.p("ws/new.txt").exists(), "{resolver:?}");
        sb.mkdir("made/").unwrap();
        assert!(fx.p("ws/made").is_dir());
        sb.rename("made/", "renamed/").unwrap();
        assert!(fx.p("ws/renamed").is_dir());
        sb.delete("renamed/").unwrap();
        assert!(!fx.p("ws/renamed").exists());
        // The link is not a directory entry: rmdir through it fails and
        // neither the link nor its target goes.
        assert_eq!(code(sb.delete("dir_link/")), ErrorCode::NotDir);
        assert!(fx.p("ws/d/x.txt").is_file());
    }
}

/// A directory rename carries everything beneath it: it is refused, naming
/// the entry and the pattern, when anything beneath is protected, whatever
/// the spelling of the protected name (case, Unicode normalization).
#[test]
fn directory_rename_is_refused_when_it_holds_a_protected_entry() {
    for resolver in resolvers() {
        for lock in ["Cargo.lock", "CARGO.LOCK", "deep/er/Cargo.LocK"] {
            let fx = Fx::new();
            fx.put("ws/pkg/src/main.rs", "fn main() {}")
                .put(&format!("ws/pkg/{lock}"), "# lock");
            let sb = fx
                .builder()
                .deny_write("*.lock")
                .resolver(resolver)
                .build()
                .unwrap();
            let e = sb.rename("pkg", "pkg_moved").unwrap_err();
            assert_eq!(e.code(), ErrorCode::FsProtected, "{lock} {resolver:?}: {e}");
            assert_eq!(e.path(), Some(format!("pkg/{lock}").as_str()));
            assert_eq!(e.pattern(), Some("*.lock"));
            assert!(e.message().contains(&format!("pkg/{lock}")), "{e}");
            assert!(fx.p(&format!("ws/pkg/{lock}")).is_file());
            assert!(!fx.p("ws/pkg_moved").exists());
            // Delete removes only empty directories: it needs no walk.
            assert_eq!(code(sb.delete("pkg")), ErrorCode::NotEmpty);
            assert!(fx.p(&format!("ws/pkg/{lock}")).is_file());
        }
        // NFD spelling of a protected NFC pattern, beneath the moved dir.
        let fx = Fx::new();
        fx.put("ws/docs/cafe\u{301}.md", "nfd");
        let sb = fx
            .builder()
            .deny_write("caf\u{e9}.md")
            .resolver(resolver)
            .build()
            .unwrap();
        assert_eq!(code(sb.rename("docs", "docs2")), ErrorCode::FsProtected);
        assert!(fx.p("ws/docs/cafe\u{301}.md").is_file());
    }
}

/// A case-insensitive directory on Linux (ext4 or f2fs `casefold`, `chattr
/// +F`) drops every Default_Ignorable_Code_Point from a name before it
/// compares, so `.g<U+200B>it` there *is* `.git`, and `.git<U+00AD>hub` is
/// `.github`. The guard drops the same code points: writing, making,
/// renaming onto or editing such a spelling is refused and leaves nothing on
/// disk.
#[test]
fn default_ignorable_spellings_of_protected_names_are_refused() {
    let ignorables = [
        '\u{ad}',
        '\u{34f}',
        '\u{61c}',
        '\u{115f}',
        '\u{17b4}',
        '\u{180e}',
        '\u{200b}',
        '\u{2060}',
        '\u{2064}',
        '\u{3164}',
        '\u{fe00}',
        '\u{fe0f}',
        '\u{ffa0}',
        '\u{1bca0}',
        '\u{1d173}',
        '\u{e0001}',
        '\u{e0fff}',
    ];
    for resolver in resolvers() {
        for c in ignorables {
            let fx = Fx::new();
            fx.put("ws/src/a.txt", "a");
            fs::create_dir(fx.p("ws/empty")).unwrap();
            let sb = fx
                .builder()
                .deny_write(".github/**")
                .resolver(resolver)
                .build()
                .unwrap();
            let git = format!(".g{c}it");
            let hub = format!(".git{c}hub");
            let what = format!("U+{:04X} {resolver:?}", c as u32);
            for name in [
                format!("{git}/config"),
                format!("sub/{git}/hooks/pre-commit"),
                format!("{hub}/workflows/ci.yml"),
            ] {
                let e = sb.write(&name, b"x", WriteOptions::default()).unwrap_err();
                assert_eq!(
                    e.code(),
                    ErrorCode::FsProtected,
                    "{what} write {name:?}: {e}"
                );
            }
            assert_eq!(code(sb.mkdir(&git)), ErrorCode::FsProtected, "{what}");
            assert_eq!(code(sb.mkdir(&hub)), ErrorCode::FsProtected, "{what}");
            assert_eq!(
                code(sb.rename("empty", &git)),
                ErrorCode::FsProtected,
                "{what}"
            );
            assert_eq!(
                code(sb.rename("src/a.txt", &format!("{hub}/x.yml"))),
                ErrorCode::FsProtected,
                "{what}"
            );
            assert!(!fx.p(&format!("ws/{git}")).exists(), "{what}");
            assert!(!fx.p(&format!("ws/sub/{git}")).exists(), "{what}");
            assert!(!fx.p(&format!("ws/{hub}")).exists(), "{what}");
            assert!(
                fx.p("ws/empty").is_dir() && fx.p("ws/src/a.txt").is_file(),
                "{what}"
            );
            // The control: a name that merely holds the character is written.
            sb.write(&format!("notes{c}.txt"), b"ok", WriteOptions::default())
                .unwrap();
        }
    }
}

/// In restricted mode a nested `.git` (any spelling that folds to it) is
/// protected: the directory holding it is not moved; in trusted_host mode
/// without patterns it is.
#[test]
fn directory_rename_is_refused_when_it_holds_a_nested_git_dir() {
    for resolver in resolvers() {
        for git in [".git", ".GIT", ".Git"] {
            let fx = Fx::new();
            fx.put(&format!("ws/vendor/lib/{git}/config"), "[core]")
                .put("ws/vendor/lib/src.c", "int x;");
            let sb = fx.builder().resolver(resolver).build().unwrap();
            let e = sb.rename("vendor", "vendor2").unwrap_err();
            assert_eq!(e.code(), ErrorCode::FsProtected, "{git} {resolver:?}: {e}");
            assert_eq!(e.path(), Some(format!("vendor/lib/{git}").as_str()));
            assert_eq!(e.pattern(), Some(sandgate::fileguard::GIT_RULE));
            assert!(fx.p(&format!("ws/vendor/lib/{git}/config")).is_file());
            assert!(!fx.p("ws/vendor2").exists());
            let trusted = fx
                .builder()
                .restricted(false)
                .resolver(resolver)
                .build()
                .unwrap();
            trusted.rename("vendor", "vendor2").unwrap();
            assert!(fx.p(&format!("ws/vendor2/lib/{git}/config")).is_file());
        }
    }
}

/// Links inside the moved directory are entries, never followed: a link to
/// a protected file elsewhere does not hold the move back, and the file it
/// points at stays where it is.
#[test]
fn directory_rename_does_not_follow_links_inside() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/Cargo.lock", "# lock")
            .put("ws/.git/config", "[core]")
            .put("ws/pkg/a.txt", "a");
        fx.link("ws/pkg/lock_link", "../Cargo.lock");
        fx.link("ws/pkg/git_link", "../.git");
        fs::create_dir(fx.p("ws/pkg/sub")).unwrap();
        fx.link("ws/pkg/sub/up", "../..");
        let sb = fx
            .builder()
            .deny_write("*.lock")
            .resolver(resolver)
            .build()
            .unwrap();
        sb.rename("pkg", "pkg_moved").unwrap();
        assert!(fx.p("ws/pkg_moved/a.txt").is_file());
        assert_eq!(fs::read_to_string(fx.p("ws/Cargo.lock")).unwrap(), "# lock");
        assert!(fx.p("ws/.git/config").is_file());
        // A link whose own name is protected is an entry that matches.
        fx.link("ws/pkg_moved/named.lock", "a.txt");
        assert_eq!(
            code(sb.rename("pkg_moved", "pkg_again")),
            ErrorCode::FsProtected
        );
    }
}

/// A directory with more entries than the walk looks through is not moved:
/// what was not checked is refused.
#[test]
fn directory_rename_over_the_walk_bound_is_refused() {
    let fx = Fx::new();
    let sb = fx.builder().deny_write("*.lock").build().unwrap();
    // Exactly at the bound (`sub` and 9,999 files beneath `big`): moved.
    fs::create_dir_all(fx.p("ws/big/sub")).unwrap();
    for i in 0..sandgate::MAX_RENAME_WALK_ENTRIES - 1 {
        let dir = if i % 2 == 0 { "ws/big" } else { "ws/big/sub" };
        fs::write(fx.p(&format!("{dir}/f{i}")), "").unwrap();
    }
    sb.rename("big", "big2").unwrap();
    // One more entry, anywhere beneath: refused, and nothing moved.
    fs::write(fx.p("ws/big2/sub/one_more"), "").unwrap();
    let e = sb.rename("big2", "big3").unwrap_err();
    assert_eq!(e.code(), ErrorCode::FsProtected, "{e}");
    assert_eq!(e.path(), Some("big2"));
    assert!(e.message().contains("10000"), "{e}");
    assert!(fx.p("ws/big2/sub/one_more").is_file());
    assert!(!fx.p("ws/big3").exists());
}

/// A symbolic link renamed to a name above protected paths would put
/// those paths wherever the link leads: renaming an in-root link to a
/// directory the agent writes (a workspace package linked from
/// `node_modules`, say) to `.claude` made `.claude/settings.json` read the
/// agent's own file, and `.github/workflows/*.yml` was grafted the same way
/// once `.github` existed. The destination of a link gets the ancestor
/// rule, as a directory's does; a link still moves to an ordinary name.
#[test]
fn policy19_a_link_is_not_renamed_to_a_name_above_protected_paths() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/packages/pkg/index.js", "")
            .put("ws/.github/README.md", "");
        fx.link("ws/pkg_link", "packages/pkg")
            .link("ws/file_link", "packages/pkg/index.js");
        let sb = fx
            .builder()
            .deny_write(".claude/settings.json")
            .deny_write(".github/workflows/*.yml")
            .resolver(resolver)
            .build()
            .unwrap();
        for (from, to, pattern) in [
            ("pkg_link", ".claude", ".claude/settings.json"),
            ("pkg_link", ".github/workflows", ".github/workflows/*.yml"),
            ("file_link", ".claude", ".claude/settings.json"),
        ] {
            let e = sb.rename(from, to).unwrap_err();
            assert_eq!(e.code(), ErrorCode::FsProtected, "{from} -> {to}: {e}");
            assert_eq!(e.pattern(), Some(pattern), "{from} -> {to}");
            assert!(fs::symlink_metadata(fx.p(&format!("ws/{from}")))
                .unwrap()
                .is_symlink());
            assert!(fs::symlink_metadata(fx.p(&format!("ws/{to}"))).is_err());
        }
        sb.write(
            "packages/pkg/settings.json",
            b"{\"hooks\":{}}",
            WriteOptions::default(),
        )
        .unwrap();
        assert!(!fx.p("ws/.claude/settings.json").exists());
        // A link still moves to, and from, an ordinary name.
        sb.rename("pkg_link", "pkg_link2").unwrap();
        sb.rename("pkg_link2", "pkg_link").unwrap();
    }
}

/// Under a pattern with a leading `**` (`**/secrets/*.json`), the rename
/// rule for a link's destination took every name for one above protected
/// paths, so a link could not be renamed at all; a link still may not take
/// a name whose paths beneath would match only there (`secrets`, which
/// would make `secrets/a.json` read the agent's `mine/a.json`), but moves
/// to any other name: what lies beneath it there matches beneath its
/// target too.
#[test]
fn links19_a_link_moves_to_an_ordinary_name_under_a_leading_double_star() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/mine/a.json", "{}").put("ws/sub/keep.txt", "");
        fx.link("ws/mine_link", "mine");
        let sb = fx
            .builder()
            .deny_write("**/secrets/*.json")
            .deny_write("**/.github/workflows/*")
            .resolver(resolver)
            .build()
            .unwrap();
        for (to, pattern) in [
            ("secrets", "**/secrets/*.json"),
            ("sub/secrets", "**/secrets/*.json"),
            (".github", "**/.github/workflows/*"),
        ] {
            let e = sb.rename("mine_link", to).unwrap_err();
            assert_eq!(e.code(), ErrorCode::FsProtected, "-> {to}: {e}");
            assert_eq!(e.pattern(), Some(pattern), "-> {to}");
            assert!(fs::symlink_metadata(fx.p(&format!("ws/{to}"))).is_err());
        }
        sb.rename("mine_link", "sub/other").unwrap();
        assert_eq!(
            fs::read_link(fx.p("ws/sub/other")).unwrap(),
            Path::new("mine")
        );
        sb.rename("sub/other", "mine_link").unwrap();
        sb.delete("mine_link").unwrap();
        assert!(fs::symlink_metadata(fx.p("ws/mine_link")).is_err());
    }
}

/// A link the host keeps at a name above protected paths (`.claude ->
/// conf/claude`, with `conf/claude/settings.json`) carries those paths: the
/// file tools deleted it, or renamed it away, as any link, and
/// `.claude/settings.json` was gone. The link's name gets the link rule at
/// both ends of a rename and on deletion, as the shell's check treats it.
#[test]
fn links19_a_link_above_protected_paths_is_not_deleted_or_renamed_away() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/conf/claude/settings.json", "{}");
        fx.link("ws/.claude", "conf/claude");
        let sb = fx
            .builder()
            .deny_write(".claude/settings.json")
            .resolver(resolver)
            .build()
            .unwrap();
        let e = sb.delete(".claude").unwrap_err();
        assert_eq!(e.code(), ErrorCode::FsProtected, "{e}");
        assert_eq!(e.pattern(), Some(".claude/settings.json"));
        assert_eq!(e.path(), Some(".claude"));
        let e = sb.rename(".claude", "elsewhere").unwrap_err();
        assert_eq!(e.code(), ErrorCode::FsProtected, "{e}");
        assert_eq!(e.pattern(), Some(".claude/settings.json"));
        assert_eq!(
            fs::read_link(fx.p("ws/.claude")).unwrap(),
            Path::new("conf/claude")
        );
        assert!(fs::symlink_metadata(fx.p("ws/elsewhere")).is_err());
        assert_eq!(
            fs::read_to_string(fx.p("ws/.claude/settings.json")).unwrap(),
            "{}"
        );
    }
}

/// Pins a limit (SECURITY.md, "What sandgate does not protect"): a
/// protected name that is itself a link the host made (`.claude ->
/// conf/claude`) is protected in that spelling, and the link with it, but
/// the file it leads to is not protected under its own name: patterns
/// judge names, and `conf/claude/settings.json` matches none.
#[test]
fn links19_a_protected_name_that_is_a_host_link_protects_that_spelling_only() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/conf/claude/settings.json", "{}");
        fx.link("ws/.claude", "conf/claude");
        let sb = fx
            .builder()
            .deny_write(".claude/settings.json")
            .allow_overwrite(true)
            .resolver(resolver)
            .build()
            .unwrap();
        let e = sb
            .write(
                ".claude/settings.json",
                b"evil",
                WriteOptions::default().overwrite(true),
            )
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::FsProtected, "{e}");
        assert_eq!(e.pattern(), Some(".claude/settings.json"));
        sb.write(
            "conf/claude/settings.json",
            b"evil",
            WriteOptions::default().overwrite(true),
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(fx.p("ws/.claude/settings.json")).unwrap(),
            "evil"
        );
    }
}

/// `link/` where the link leads to a directory names that directory, but
/// rename and delete act on entries: the link entry is no directory.
#[test]
fn rename_and_delete_of_a_link_with_a_trailing_slash_are_not_dir() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/d/x.txt", "x");
        fs::create_dir(fx.p("ws/empty")).unwrap();
        fx.link("ws/dir_link", "d").link("ws/empty_link", "empty");
        let sb = fx
            .builder()
            .restricted(false)
            .resolver(resolver)
            .build()
            .unwrap();
        assert_eq!(code(sb.rename("dir_link/", "moved")), ErrorCode::NotDir);
        assert_eq!(code(sb.delete("empty_link/")), ErrorCode::NotDir);
        assert!(fs::symlink_metadata(fx.p("ws/dir_link"))
            .unwrap()
            .is_symlink());
        assert!(fs::symlink_metadata(fx.p("ws/empty_link"))
            .unwrap()
            .is_symlink());
        assert!(fx.p("ws/empty").is_dir() && !fx.p("ws/moved").exists());
    }
}

#[test]
fn a_directory_moved_inside_itself_is_refused_saying_so() {
    // rename(2) answers EINVAL, which said nothing a model could act on.
    // Spelled directly, through a link to the directory, under both
    // resolvers, with and without a guard (which resolves names itself).
    let mut resolvers = vec![Resolver::Walk];
    if sandgate::rootfs::openat2_supported() {
        resolvers.push(Resolver::Openat2);
    }
    for resolver in resolvers {
        for guarded in [false, true] {
            let fx = Fx::new();
            fx.put("ws/d/e/f.txt", "x").link("ws/to-d", "d");
            let mut b = fx.builder();
            b.resolver(resolver);
            if guarded {
                b.deny_write("*.lock");
            }
            let sb = b.build().unwrap();
            for to in ["d/inner", "d/e/inner", "to-d/inner", "to-d/e/x"] {
                let e = sb.rename("d", to).unwrap_err();
                assert_eq!(e.code(), ErrorCode::Io, "{resolver:?} {to}: {e}");
                assert_eq!(e.errno(), Some(22), "EINVAL kept: {e}");
                assert!(e.to_string().contains("inside itself"), "{e}");
            }
            let e = sb.rename("d/e", "to-d/e/y").unwrap_err();
            assert!(e.to_string().contains("inside itself"), "{e}");
            // Nothing moved, and a move beside it still works.
            assert_eq!(fs::read_to_string(fx.p("ws/d/e/f.txt")).unwrap(), "x");
            sb.rename("d/e", "e2").unwrap();
            sb.rename("e2", "d/e").unwrap();
        }
    }
}

/// The config goes with the hooks whichever hook a pattern names and
/// wherever the repository is: a pattern for one hook other than
/// `pre-commit`, or for the hooks of one nested repository named in the
/// pattern, protects that repository's `config` too.
#[test]
fn protecting_any_git_hook_protects_its_repositorys_config() {
    let mut open = Vec::new();
    for (pattern, config) in [
        (".git/hooks/post-checkout", "repo/.git/config"),
        ("repo/.git/hooks/post-checkout", "repo/.git/config"),
        ("**/.git/hooks/pre-push", "repo/.git/config"),
        ("repo/.git/hooks/**", "repo/.git/config"),
        ("repo/.GIT/Hooks/*", "repo/.git/config"),
        ("./repo/.git/hooks/", "repo/.git/config"),
        ("*/.git/hooks/**", "repo/.git/config"),
    ] {
        let fx = Fx::new();
        fx.put("ws/repo/.git/config", "[core]\n");
        fx.put("ws/repo/.git/hooks/keep", "");
        let sb = fx
            .builder()
            .restricted(false)
            .allow_overwrite(true)
            .deny_write(pattern)
            .build()
            .unwrap();
        // The pattern is anchored at the write root `ws`; `repo` is the
        // repository unless the pattern names `.git` at the root.
        let config = if pattern.starts_with(".git/") {
            fx.put("ws/.git/config", "[core]\n");
            ".git/config"
        } else {
            config
        };
        let written = sb.write(
            config,
            b"[core]\n\thooksPath = /tmp/elsewhere\n",
            WriteOptions::default().overwrite(true),
        );
        if !matches!(&written, Err(e) if e.code() == ErrorCode::FsProtected) {
            open.push(format!("{pattern}: {config} {written:?}"));
        }
    }
    assert!(open.is_empty(), "config left writable: {open:#?}");
}

/// The same when the pattern reaches the repository's `.git` through a
/// wildcard rather than spelling it: `repo/**/hooks/**` protects the hooks
/// of `repo/.git`, so it protects `repo/.git/config` too. Before, only a
/// literal `.git` component (or a pattern covering the hooks at the root
/// or under any directory) brought the config along, and `core.hooksPath`
/// set there pointed those hooks anywhere.
#[test]
fn policy19_a_wildcard_in_place_of_dot_git_still_brings_the_config() {
    let mut open = Vec::new();
    for pattern in [
        "repo/**/hooks/**",
        "repo/*/hooks/**",
        "repo/.gi?/hooks/*",
        "repo/[.]git/hooks/pre-commit",
        "**/repo/**/hooks/*",
        "repo/*/*/post-checkout",
        "repo/**",
    ] {
        let fx = Fx::new();
        fx.put("ws/repo/.git/config", "[core]\n");
        fx.put("ws/repo/.git/hooks/keep", "");
        let sb = fx
            .builder()
            .restricted(false)
            .allow_overwrite(true)
            .deny_write(pattern)
            .build()
            .unwrap();
        let written = sb.write(
            "repo/.git/config",
            b"[core]\n\thooksPath = /tmp/elsewhere\n",
            WriteOptions::default().overwrite(true),
        );
        if !matches!(&written, Err(e) if e.code() == ErrorCode::FsProtected) {
            open.push(format!("{pattern}: {written:?}"));
        }
        if fs::read_to_string(fx.p("ws/repo/.git/config")).unwrap() != "[core]\n" {
            open.push(format!("{pattern}: the config was rewritten"));
        }
    }
    assert!(open.is_empty(), "config left writable: {open:#?}");
    // A pattern that covers no hook adds nothing: `repo/*` holds only
    // entries directly in `repo`.
    let fx = Fx::new();
    fx.put("ws/repo/.git/config", "[core]\n");
    let sb = fx
        .builder()
        .restricted(false)
        .allow_overwrite(true)
        .deny_write("repo/*")
        .deny_write("repo/.git/*/x")
        .build()
        .unwrap();
    sb.write(
        "repo/.git/config",
        b"[user]\n",
        WriteOptions::default().overwrite(true),
    )
    .unwrap();
}

/// An edit reads at most `max_read_bytes + 1` bytes: when the file swapped in
/// between its size check and its read is larger than the cap, the edit must
/// be refused, never applied to (and written back as) the first bytes alone.
#[test]
fn an_edit_never_writes_back_a_file_cut_at_the_read_cap() {
    const CAP: u64 = 4096;
    let fx = Fx::new();
    let small = [&b"old "[..], &[b's'; 60][..]].concat();
    let large = [&b"old "[..], &vec![b'L'; 4 * CAP as usize][..]].concat();
    fs::write(fx.p("ws/f.txt"), &small).unwrap();
    let sb = fx
        .builder()
        .allow_overwrite(true)
        .max_read_bytes(CAP)
        .build()
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, dir) = (Arc::clone(&stop), fx.p("ws"));
        let (small, large) = (small.clone(), large.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let data = if i % 2 == 0 { &large } else { &small };
                fs::write(dir.join(".swap"), data).unwrap();
                fs::rename(dir.join(".swap"), dir.join("f.txt")).unwrap();
                i += 1;
            }
        })
    };
    let mut cut = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
    while std::time::Instant::now() < deadline && cut.is_empty() {
        if let Ok(p) = sb.edit_many("f.txt", &[("old ", "new ")], false) {
            let after = p
                .after
                .expect("the write root is a read root: the edit is shown");
            if after.len() != small.len() {
                cut.push(after.len());
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        cut.is_empty(),
        "an edit under a {CAP}-byte read cap wrote back a file of {cut:?} bytes (the whole is {} or {})",
        small.len(),
        large.len()
    );
}

/// An edit checks the file it reads, not only the name it looked at: a
/// regular file swapped for a FIFO between the check and the open must be
/// refused, not read (which waits forever while a writer holds the FIFO).
#[test]
fn an_edit_never_reads_a_fifo_swapped_in_after_its_check() {
    let fx = Fx::new();
    fx.put("ws/f.txt", "old text");
    let fifo = fx.p("ws/.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // A writer that never writes: a reader of the FIFO waits for it.
    let writer = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let sb = fx.builder().allow_overwrite(true).build().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, ws) = (Arc::clone(&stop), fx.p("ws"));
        std::thread::spawn(move || {
            use std::os::unix::ffi::OsStrExt;
            let c = |n: &str| std::ffi::CString::new(ws.join(n).as_os_str().as_bytes()).unwrap();
            let (a, b) = (c("f.txt"), c(".fifo"));
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // f.txt is the FIFO, then the file again, and always there.
                // SAFETY: two NUL-terminated paths that outlive the call.
                let r = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
            }
        })
    };
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let editor = {
        let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Never matches: the file is never replaced, so the FIFO stays.
                let _ = sb.edit("f.txt", "absent", "x", EditOptions::default());
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    let mut hung = false;
    let (mut last, mut since) = (0, std::time::Instant::now());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = done.load(std::sync::atomic::Ordering::Relaxed);
        if now != last {
            (last, since) = (now, std::time::Instant::now());
        } else if since.elapsed() > std::time::Duration::from_secs(2) {
            hung = true;
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    // Closing the only writer ends any read that waits on the FIFO.
    drop(writer);
    editor.join().unwrap();
    assert!(
        !hung,
        "an edit read a FIFO swapped in after its check and waited on it (after {last} edits)"
    );
}

/// An edit checks the link count of the file it opens, not only of the
/// name it looked at: a file with a second name swapped in between the
/// check and the open is refused (`E_HARDLINK`), never edited.
#[test]
fn an_edit_never_applies_to_a_hard_linked_file_swapped_in_after_its_check() {
    let fx = Fx::new();
    fx.put("ws/f.txt", "old single");
    fx.put("ws/.linked", "old linked");
    fs::hard_link(fx.p("ws/.linked"), fx.p("ws/other-name")).unwrap();
    let mut b = fx.builder();
    b.allow_overwrite(true).deny_write("*.lock");
    let sb = b.build().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, ws) = (Arc::clone(&stop), fx.p("ws"));
        std::thread::spawn(move || {
            use std::os::unix::ffi::OsStrExt;
            let c = |n: &str| std::ffi::CString::new(ws.join(n).as_os_str().as_bytes()).unwrap();
            let (a, b) = (c("f.txt"), c(".linked"));
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // SAFETY: two NUL-terminated paths that outlive the call.
                let r = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
            }
        })
    };
    let (mut edited, mut refused, mut wrong) = (0u32, 0u32, Vec::new());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while std::time::Instant::now() < deadline && wrong.is_empty() {
        // A dry run: it reads and judges like an edit, and changes nothing,
        // so both files keep their content for the next round.
        match sb.edit_many("f.txt", &[("old ", "new ")], true) {
            Ok(p) if p.after.as_deref() == Some(&b"new single"[..]) => edited += 1,
            Ok(p) => wrong.push(format!("{:?}", p.after.map(String::from_utf8))),
            Err(e) if e.code() == ErrorCode::Hardlink => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    eprintln!("edits: {edited} of the single file, {refused} refused as hard-linked");
    assert!(
        wrong.is_empty(),
        "an edit applied to the hard-linked file: {wrong:?}"
    );
    assert_eq!(
        fs::read_to_string(fx.p("ws/other-name")).unwrap(),
        "old linked"
    );
}

/// A rename decides "directory" (and so walks what it holds) from the very
/// entry it moves: a directory holding a protected file, swapped in at the
/// source name after the check looked at a plain file there, is never moved
/// to the destination.
#[test]
fn a_directory_swapped_in_at_a_rename_source_is_never_moved_unchecked() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/src", "a plain file")
            .put("ws/.other/Cargo.lock", "# lock");
        let sb = fx
            .builder()
            .deny_write("*.lock")
            .resolver(resolver)
            .build()
            .unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (stop, ws) = (Arc::clone(&stop), fx.p("ws"));
            std::thread::spawn(move || {
                use std::os::unix::ffi::OsStrExt;
                let c =
                    |n: &str| std::ffi::CString::new(ws.join(n).as_os_str().as_bytes()).unwrap();
                let (a, b) = (c("src"), c(".other"));
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // src is the file, then the directory; ENOENT while a
                    // rename has moved it away.
                    // SAFETY: two NUL-terminated paths that outlive the call.
                    unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            a.as_ptr(),
                            libc::AT_FDCWD,
                            b.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                }
            })
        };
        let (mut moved, mut refused, mut leaked) = (0u64, 0u64, false);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while std::time::Instant::now() < deadline {
            match sb.rename("src", "dst") {
                Ok(()) => {
                    moved += 1;
                    if fx.p("ws/dst/Cargo.lock").exists() {
                        leaked = true;
                        break;
                    }
                    fs::rename(fx.p("ws/dst"), fx.p("ws/src")).unwrap();
                }
                Err(_) => refused += 1,
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(
            !leaked,
            "{resolver:?}: a rename moved a directory holding Cargo.lock (after {moved} moves, {refused} refusals)"
        );
        assert!(
            moved > 0 && refused > 0,
            "{resolver:?}: no race: {moved} moves, {refused} refusals"
        );
        // Whatever the interleaving, the protected file is still in the tree.
        assert!(fx.p("ws/src/Cargo.lock").is_file() || fx.p("ws/.other/Cargo.lock").is_file());
    }
}

/// Replacing `x` goes through the temporary name `.x.sandgate-tmp`, and a
/// leftover there is normally reclaimed; but where a deny pattern protects
/// that name, the entry is someone's protected file: write and edit
/// replace `x` and leave it as it is.
#[test]
fn replacing_a_file_never_removes_a_protected_entry_at_its_temporary_name() {
    for resolver in resolvers() {
        for pattern in [".x.sandgate-tmp", "*.sandgate-tmp", ".*"] {
            let fx = Fx::new();
            fx.put("ws/x", "old x\n")
                .put("ws/.x.sandgate-tmp", "PROTECTED");
            let sb = fx
                .builder()
                .allow_overwrite(true)
                .deny_write(pattern)
                .resolver(resolver)
                .build()
                .unwrap();
            assert_eq!(
                code(sb.write(
                    ".x.sandgate-tmp",
                    b"y",
                    WriteOptions::default().overwrite(true)
                )),
                ErrorCode::FsProtected
            );
            sb.write("x", b"new x\n", WriteOptions::default().overwrite(true))
                .unwrap();
            assert_eq!(fs::read(fx.p("ws/x")).unwrap(), b"new x\n");
            sb.edit("x", "new", "edited", EditOptions::default())
                .unwrap();
            assert_eq!(fs::read(fx.p("ws/x")).unwrap(), b"edited x\n");
            assert_eq!(
                fs::read(fx.p("ws/.x.sandgate-tmp")).ok().as_deref(),
                Some(&b"PROTECTED"[..]),
                "{resolver:?} {pattern}: the protected .x.sandgate-tmp was removed"
            );
            // Nothing else is left behind.
            let mut names: Vec<_> = fs::read_dir(fx.p("ws"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(names, [".x.sandgate-tmp", "x"], "{resolver:?} {pattern}");
        }
    }
}

/// A name that is not UTF-8 never aliases a real one: `list` shows it with
/// its stray bytes escaped (`\xff`), a spelling the name parser refuses, so
/// acting on what was shown can never reach another file; glob and grep
/// (which could not be asked about it either) pass it over instead of
/// reaching the file whose name its lossy spelling is, and count it as
/// unreadable, so that their answer says something was not searched
/// (before, grep answered as if the tree held nothing more).
#[test]
fn a_name_that_is_not_utf8_is_never_shown_as_another_file() {
    use std::os::unix::ffi::OsStrExt;
    for resolver in resolvers() {
        let fx = Fx::new();
        let raw = std::ffi::OsStr::from_bytes(b"a\xff.txt");
        fs::write(fx.p("ws").join(raw), "HIDDEN needle\n").unwrap();
        fx.put("ws/a\u{FFFD}.txt", "REAL needle\n");
        let sb = Sandbox::builder()
            .read_root(fx.p("ws"))
            .resolver(resolver)
            .build()
            .unwrap();
        let names: Vec<String> = sb.list(".").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["a\\xff.txt", "a\u{FFFD}.txt"], "{resolver:?}");
        assert_eq!(code(sb.read("a\\xff.txt")), ErrorCode::PathInvalid);
        assert_eq!(sb.read("a\u{FFFD}.txt").unwrap(), b"REAL needle\n");
        assert_eq!(
            sb.glob("*.txt", None).unwrap(),
            ["a\u{FFFD}.txt"],
            "{resolver:?}"
        );
        let hits = sb.grep("needle", None, None).unwrap();
        let hits: Vec<(&str, &str)> = hits
            .iter()
            .map(|m| (m.path.as_str(), m.text.as_str()))
            .collect();
        assert_eq!(hits, [("a\u{FFFD}.txt", "REAL needle")], "{resolver:?}");
        assert_eq!(
            sb.glob_found("*.txt", None).unwrap().unreadable,
            1,
            "{resolver:?}"
        );
        let found = sb.grep_found("needle", None, &Default::default()).unwrap();
        assert_eq!(found.unreadable, 1, "{resolver:?}");
        // A directory so named is passed over whole, counted once.
        fs::create_dir(fx.p("ws").join(std::ffi::OsStr::from_bytes(b"d\xfe"))).unwrap();
        fs::write(
            fx.p("ws")
                .join(std::ffi::OsStr::from_bytes(b"d\xfe"))
                .join("inner.txt"),
            "HIDDEN needle\n",
        )
        .unwrap();
        let found = sb.grep_found("needle", None, &Default::default()).unwrap();
        assert_eq!(found.unreadable, 2, "{resolver:?}");
    }
}

/// A replace is a new file owned by whoever runs the sandbox: it keeps the
/// old file's permission bits but never its setuid or setgid bit, which on
/// new content (and, run as root, a new owner) would hand that content the
/// old file's privileges. A write in place by anyone without CAP_FSETID
/// clears them too.
#[test]
fn replacing_a_setuid_or_setgid_file_drops_those_bits() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for resolver in resolvers() {
        let fx = Fx::new();
        for (name, mode) in [("suid", 0o4755), ("sgid", 0o2750), ("both", 0o6711)] {
            fx.put(&format!("ws/{name}"), "#!/bin/sh\nold\n");
            let p = fx.p(&format!("ws/{name}"));
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                fs::metadata(&p).unwrap().mode() & 0o7777,
                mode,
                "set up {name}"
            );
        }
        let sb = fx
            .builder()
            .allow_overwrite(true)
            .resolver(resolver)
            .build()
            .unwrap();
        sb.write(
            "suid",
            b"#!/bin/sh\nnew\n",
            WriteOptions::default().overwrite(true),
        )
        .unwrap();
        sb.edit("sgid", "old", "new", EditOptions::default())
            .unwrap();
        sb.edit_many("both", &[("old", "new")], false).unwrap();
        for (name, mode) in [("suid", 0o755), ("sgid", 0o750), ("both", 0o711)] {
            let m = fs::metadata(fx.p(&format!("ws/{name}"))).unwrap();
            assert_eq!(
                m.mode() & 0o7777,
                mode,
                "{resolver:?}: {name} was replaced with mode {:o}",
                m.mode() & 0o7777
            );
            assert_eq!(
                fs::read(fx.p(&format!("ws/{name}"))).unwrap(),
                b"#!/bin/sh\nnew\n"
            );
        }
    }
}

/// "Exactly once" means one place: old text that occurs at two places
/// which overlap (`}\n}` in `}\n}\n}`) is ambiguous, not one occurrence
/// replaced at whichever place comes first; `all` still replaces the
/// occurrences that do not overlap, left to right.
#[test]
fn an_edit_of_text_found_at_overlapping_places_is_ambiguous() {
    let fx = Fx::new();
    let src = "mod m {\nfn a() {\nif x {\n}\n}\n}\n";
    fx.put("ws/f.rs", src).put("ws/g.txt", "aaa");
    let sb = fx.builder().allow_overwrite(true).build().unwrap();
    let e = sb
        .edit("f.rs", "}\n}", "}", EditOptions::default())
        .map(|n| {
            (
                n,
                String::from_utf8(fs::read(fx.p("ws/f.rs")).unwrap()).unwrap(),
            )
        });
    assert_eq!(e.map_err(|e| e.code()), Err(ErrorCode::EditAmbiguous));
    let e = sb.edit_many("g.txt", &[("aa", "X")], true);
    assert_eq!(e.map_err(|e| e.code()), Err(ErrorCode::EditAmbiguous));
    assert_eq!(fs::read(fx.p("ws/f.rs")).unwrap(), src.as_bytes());
    assert_eq!(
        sb.edit("g.txt", "aa", "X", EditOptions::default().replace_all(true))
            .unwrap(),
        1
    );
    assert_eq!(fs::read(fx.p("ws/g.txt")).unwrap(), b"Xa");
    // One place, even where the new text holds the old.
    sb.edit("g.txt", "Xa", "XaXa", EditOptions::default())
        .unwrap();
    assert_eq!(fs::read(fx.p("ws/g.txt")).unwrap(), b"XaXa");
}

/// A write or mkdir refused because the host path it would make is longer
/// than the kernel can name (the root's own path plus the name passes
/// 4096 bytes, where a deny rule needs each directory's resolved name)
/// changes nothing: no parent directory it made is left behind.
#[test]
fn a_refused_long_path_leaves_no_parent_directories_behind() {
    for resolver in resolvers() {
        let fx = Fx::new();
        let sb = fx
            .builder()
            .deny_write("*.lock")
            .resolver(resolver)
            .build()
            .unwrap();
        // 16 components of 254 bytes: under 4096 as a name, over it on the
        // host once the root's own path is in front.
        let dirs: Vec<String> = (0..16)
            .map(|i| format!("{i:x}{}", "d".repeat(253)))
            .collect();
        let dir = dirs.join("/");
        let file = format!("{dir}/f");
        assert!(file.len() < 4096);
        let refused = [
            (
                "write",
                sb.write(&file, b"x", WriteOptions::default()).map(drop),
            ),
            ("mkdir", sb.mkdir(&file)),
        ];
        for (op, r) in refused {
            assert_eq!(code(r), ErrorCode::PathInvalid, "{op}");
            let left = fs::read_dir(fx.p("ws")).unwrap().count();
            assert_eq!(
                left, 0,
                "{resolver:?}: a refused {op} left parent directories behind"
            );
        }
    }
}

/// A directory whose name ends in ` (deleted)` (the suffix the kernel
/// gives the name of an unlinked file in /proc) is an ordinary directory:
/// with deny rules, where each target's resolved name is read from /proc,
/// a write, an edit, a mkdir, a rename and a delete in it work as anywhere
/// else. Both resolvers.
#[test]
fn a_directory_named_like_a_deleted_file_is_an_ordinary_directory() {
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/a (deleted)/old.txt", "old\n");
        let sb = fx
            .builder()
            .deny_write("*.lock")
            .allow_overwrite(true)
            .resolver(resolver)
            .build()
            .unwrap();
        let d = "a (deleted)";
        sb.write(&format!("{d}/new.txt"), b"new\n", WriteOptions::default())
            .unwrap_or_else(|e| panic!("{resolver:?}: write: {e}"));
        sb.edit(
            &format!("{d}/old.txt"),
            "old",
            "edited",
            EditOptions::default(),
        )
        .unwrap();
        sb.mkdir(&format!("{d}/sub")).unwrap();
        sb.rename(&format!("{d}/new.txt"), &format!("{d}/sub/moved.txt"))
            .unwrap();
        sb.delete(&format!("{d}/sub/moved.txt")).unwrap();
        assert_eq!(
            fs::read_to_string(fx.p("ws/a (deleted)/old.txt")).unwrap(),
            "edited\n"
        );
        // A protected name there is still refused.
        assert_eq!(
            code(sb.write(&format!("{d}/x.lock"), b"x", WriteOptions::default())),
            ErrorCode::FsProtected
        );
    }
}

/// Where procfs is not mounted (a tmpfs over /proc, in a user and mount
/// namespace of its own): a read still judges the kind before opening and
/// serves a regular file, and a write or edit that needs a deny rule's
/// resolved name (restricted mode) is refused saying why (`E_IO`, naming
/// procfs), never `E_NOT_FOUND` for a file that is there, and creates
/// nothing. Both resolvers. Skipped where user namespaces are refused.
#[test]
fn without_procfs_reads_work_and_checked_writes_say_why_they_cannot() {
    const INSIDE: &str = "SANDGATE_TEST_NO_PROCFS";
    if std::env::var_os(INSIDE).is_none() {
        let exe = std::env::current_exe().unwrap();
        let name = "without_procfs_reads_work_and_checked_writes_say_why_they_cannot";
        let out = std::process::Command::new("unshare")
            .args(["-rm", "sh", "-c"])
            .arg("mount -t tmpfs none /proc || exit 77; exec \"$0\" --exact \"$1\" --nocapture")
            .arg(&exe)
            .arg(name)
            .env(INSIDE, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(77)
            || (!out.status.success() && !text.contains("running 1 test"))
        {
            eprintln!("skipped: no user and mount namespace here: {text}");
            return;
        }
        assert!(out.status.success(), "{text}");
        assert!(text.contains("test result: ok. 1 passed"), "{text}");
        return;
    }
    assert!(
        !Path::new("/proc/self/fd").exists(),
        "procfs is still mounted"
    );
    for resolver in resolvers() {
        let fx = Fx::new();
        fx.put("ws/f.txt", "a b\n");
        let made = std::process::Command::new("mkfifo")
            .arg(fx.p("ws/pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        let sb = fx
            .builder()
            .allow_overwrite(true)
            .resolver(resolver)
            .build()
            .unwrap();
        assert_eq!(sb.read("f.txt").unwrap(), b"a b\n", "{resolver:?}");
        assert_eq!(sb.read_lines("f.txt", 1, 1).unwrap().lines, 1);
        assert_eq!(code(sb.read("pipe")), ErrorCode::NotFile);
        let e = sb
            .edit("f.txt", "a", "x", EditOptions::default())
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Io, "{resolver:?}: edit: {e}");
        assert!(e.message().contains("procfs"), "{}", e.message());
        let e = sb
            .write("d/new.txt", b"x", WriteOptions::default())
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Io, "{resolver:?}: write: {e}");
        assert!(!fx.p("ws/d").exists(), "a refused write made a directory");
        assert_eq!(fs::read_to_string(fx.p("ws/f.txt")).unwrap(), "a b\n");
        // mkdir, rename and delete are checked too (deny-write.md says
        // so): each says procfs, and nothing changes.
        let e = sb.mkdir("m").unwrap_err();
        assert_eq!(e.code(), ErrorCode::Io, "{resolver:?}: mkdir: {e}");
        assert!(e.message().contains("procfs"), "{}", e.message());
        assert!(!fx.p("ws/m").exists(), "a refused mkdir made a directory");
        let e = sb.rename("f.txt", "g.txt").unwrap_err();
        assert_eq!(e.code(), ErrorCode::Io, "{resolver:?}: rename: {e}");
        assert!(e.message().contains("procfs"), "{}", e.message());
        let e = sb.delete("f.txt").unwrap_err();
        assert_eq!(e.code(), ErrorCode::Io, "{resolver:?}: delete: {e}");
        assert!(e.message().contains("procfs"), "{}", e.message());
        assert_eq!(fs::read_to_string(fx.p("ws/f.txt")).unwrap(), "a b\n");
        assert!(
            !fx.p("ws/g.txt").exists(),
            "a refused rename moved the file"
        );
        // With no deny rule, nothing needs procfs: writes, replaces and
        // edits work.
        let sb = fx
            .builder()
            .restricted(false)
            .allow_overwrite(true)
            .resolver(resolver)
            .build()
            .unwrap();
        sb.write("d/new.txt", b"new\n", WriteOptions::default())
            .unwrap_or_else(|e| panic!("{resolver:?}: write: {e} {}", e.message()));
        sb.write("f.txt", b"a b c\n", WriteOptions::default().overwrite(true))
            .unwrap_or_else(|e| panic!("{resolver:?}: replace: {e} {}", e.message()));
        sb.edit("f.txt", "c", "d", EditOptions::default()).unwrap();
        assert_eq!(fs::read_to_string(fx.p("ws/d/new.txt")).unwrap(), "new\n");
        assert_eq!(fs::read_to_string(fx.p("ws/f.txt")).unwrap(), "a b d\n");
    }
}

/// A mutating operation refused where its name resolved (through an
/// in-root symlink to a protected directory) is audited with that resolved
/// name, the one the refusal names: the spelling alone (`g/config`) is
/// matched by no deny pattern and hides what was aimed at.
#[test]
fn audit_names_where_a_refused_mutation_resolved() {
    let fx = Fx::new();
    fx.put("ws/.git/config", "c").put("ws/real/x", "x");
    fx.link("ws/g", ".git");
    let events: Arc<Mutex<Vec<AuditEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    let sb = fx
        .builder()
        .allow_overwrite(true)
        .deny_write(".git/**")
        .audit(move |e| sink.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let protected = |r: Result<(), sandgate::Error>| assert_eq!(code(r), ErrorCode::FsProtected);
    protected(sb.write("g/new", b"x", WriteOptions::default()).map(drop));
    protected(
        sb.write("g/config", b"x", WriteOptions::default().overwrite(true))
            .map(drop),
    );
    protected(
        sb.edit("g/config", "c", "d", EditOptions::default())
            .map(drop),
    );
    protected(sb.delete("g/config"));
    protected(sb.mkdir("g/sub"));
    protected(sb.rename("real/x", "g/x"));
    let got: Vec<(&str, String, ErrorCode)> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| (e.op, e.path.clone(), e.outcome))
        .collect();
    let want = [
        ("write", ".git/new"),
        ("write", ".git/config"),
        ("edit", ".git/config"),
        ("delete", ".git/config"),
        ("mkdir", ".git/sub"),
        ("rename", "real/x -> .git/x"),
    ]
    .map(|(op, path)| (op, path.to_owned(), ErrorCode::FsProtected));
    assert_eq!(got, want);
    assert_eq!(fs::read(fx.p("ws/.git/config")).unwrap(), b"c");
}

/// The sink of a call refused after close runs with no lock of the sandbox
/// held, as every other event does: a slow sink (one that forwards events
/// over the network, or waits for a language runtime's lock) holds up
/// only its own call, not `close` or other threads' calls; and a sink that
/// closes the sandbox itself does not deadlock.
#[test]
fn a_slow_sink_after_close_holds_no_lock() {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    let fx = Fx::new();
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let me: Arc<std::sync::OnceLock<Sandbox>> = Arc::default();
    let weak = Arc::downgrade(&me);
    let sb = fx
        .builder()
        .audit(move |e| {
            if e.outcome == ErrorCode::Closed && e.path == "slow" {
                entered_tx.lock().unwrap().send(()).unwrap();
                std::thread::sleep(Duration::from_secs(3));
            }
            if e.outcome == ErrorCode::Closed && e.path == "reenter" {
                // Re-entry: close the (already closed) sandbox again.
                if let Some(me) = weak.upgrade() {
                    me.get().unwrap().close();
                }
            }
        })
        .build()
        .unwrap();
    assert!(me.set(sb).is_ok());
    let sb = me.get().unwrap();
    sb.close();
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(code(sb.read("slow")), ErrorCode::Closed));
        entered_rx.recv().unwrap();
        let start = Instant::now();
        sb.close();
        assert_eq!(code(sb.stat("other")), ErrorCode::Closed);
        let took = start.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "close and another call waited {took:?} for a slow sink"
        );
    });
    // Not scoped: a deadlocked thread is left behind, not joined.
    let (done_tx, done_rx) = mpsc::channel();
    let held = Arc::clone(&me);
    std::thread::spawn(move || {
        let _ = held.get().unwrap().read("reenter");
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(5)).is_ok(),
        "a sink that closed its own sandbox deadlocked"
    );
}

/// A call refused because the sandbox was closed is an operation refused
/// like any other: the sink hears of it.
#[test]
fn audit_sees_calls_refused_after_close() {
    let fx = Fx::new();
    fx.put("in/a.txt", "a");
    let events: Arc<Mutex<Vec<AuditEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    let sb = fx
        .builder()
        .audit(move |e| sink.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    sb.read("a.txt").unwrap();
    sb.close();
    assert_eq!(code(sb.read("a.txt")), ErrorCode::Closed);
    assert_eq!(
        code(sb.write("b", b"b", WriteOptions::default())),
        ErrorCode::Closed
    );
    let got: Vec<(&str, String, ErrorCode)> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| (e.op, e.path.clone(), e.outcome))
        .collect();
    let want = [
        ("read", "a.txt", ErrorCode::Ok),
        ("read", "a.txt", ErrorCode::Closed),
        ("write", "b", ErrorCode::Closed),
    ]
    .map(|(op, p, c)| (op, p.to_owned(), c));
    assert_eq!(got, want);
}

/// One JSON-endpoint answer of a session over `sb`.
fn endpoint(sb: Sandbox, requests: &[serde_json::Value]) -> Vec<serde_json::Value> {
    let session = sandgate::ToolSession::new(sb, serde_json::json!({}));
    requests.iter().map(|r| session.handle_value(r)).collect()
}

/// A JSON-endpoint file request whose fields do not fit (a name that is
/// not a string, an unknown key, a missing name) is refused before the
/// sandbox sees it, and is audited: one record per request, with the
/// name it gave. Like every malformed request it spends no budget.
#[test]
fn audit20_an_endpoint_request_with_bad_fields_is_audited() {
    use serde_json::json;
    let fx = Fx::new();
    fx.put("in/a.txt", "x");
    let events: Arc<Mutex<Vec<AuditEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    let sb = fx
        .builder()
        .fs_ops_budget(Some(2))
        .audit(move |e| sink.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let answers = endpoint(
        sb,
        &[
            json!({"op": "read", "path": "a.txt", "bogus": 1}),
            json!({"op": "write", "path": 7, "content": "x"}),
            json!({"op": "rename", "from": "a.txt"}),
            json!({"op": "grep", "pattern": "x", "mode": "files", "before": 1}),
            json!({"op": "stat", "path": "a.txt"}),
            json!({"op": "read", "path": "a.txt"}),
            json!({"op": "read", "path": "a.txt"}),
        ],
    );
    let codes: Vec<&str> = answers
        .iter()
        .map(|a| a["error"]["code"].as_str().unwrap_or("OK"))
        .collect();
    assert_eq!(
        codes,
        [
            "E_REQUEST",
            "E_REQUEST",
            "E_REQUEST",
            "E_REQUEST",
            "OK",
            "OK",
            "E_DENIED"
        ],
        "{answers:?}"
    );
    let got: Vec<(&str, String, ErrorCode)> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| (e.op, e.path.clone(), e.outcome))
        .collect();
    let want = [
        ("read", "a.txt", ErrorCode::Request),
        ("write", "", ErrorCode::Request),
        ("rename", "a.txt -> ", ErrorCode::Request),
        ("grep", ".", ErrorCode::Request),
        ("stat", "a.txt", ErrorCode::Ok),
        ("read", "a.txt", ErrorCode::Ok),
        ("read", "a.txt", ErrorCode::Denied),
    ]
    .map(|(op, p, c)| (op, p.to_owned(), c));
    assert_eq!(got, want);
}

/// A grep that stops at its `max_results` says so (`truncated`, and
/// `limit: "max_results"`), in every mode; one whose matches are exactly
/// `max_results` is whole and says that.
#[test]
fn mcp6_a_grep_line_cut_at_1000_bytes_says_so() {
    use serde_json::json;
    let fx = Fx::new();
    let long = format!("hit{}", "x".repeat(1200));
    fx.put("in/a.txt", &format!("{long}\nhit short\n"));
    let sb = fx.builder().build().unwrap();
    let ms = sb.grep("hit", None, None).unwrap();
    assert_eq!(
        ms.iter()
            .map(|m| (m.text.len(), m.text_cut))
            .collect::<Vec<_>>(),
        vec![(1000, true), (9, false)]
    );
    let answers = endpoint(sb, &[json!({"op": "grep", "pattern": "hit"})]);
    let m = &answers[0]["matches"];
    assert_eq!(m[0]["line_truncated"], json!(true), "{}", answers[0]);
    // A whole line has no such field: the answer reads as before.
    assert!(m[1].get("line_truncated").is_none(), "{}", answers[0]);
    assert!(answers[0].get("unreadable").is_none(), "{}", answers[0]);
}

/// A match that ends past the line's first 1,000 bytes is shown: `text`
/// is the 1,000 bytes of the line from 200 bytes before the match (moved
/// back to the first byte of a character, never by more than three),
/// `text_start` says where they start, and `text_cut` whether the line
/// goes on after them. A match within the first 1,000 bytes of a long line
/// keeps the line's start. Before, a match past the cut was answered with
/// the line's first 1,000 bytes, which did not hold it.
#[test]
fn ranged9_a_match_past_the_line_cut_is_shown_with_where_it_starts() {
    use serde_json::json;
    let fx = Fx::new();
    let mut content = Vec::new();
    // 1: ASCII; the window ends inside the line.
    content.extend(format!("{}needle{}\n", "a".repeat(1500), "b".repeat(2000)).bytes());
    // 2: the window would start on the second byte of a two-byte
    // character: it starts on the first.
    content.extend(format!("{}zneedle{}\n", "é".repeat(650), "b".repeat(2000)).bytes());
    // 3: a match straddling byte 1,000; the window reaches the line's end
    // (a CRLF ending is not part of it).
    content.extend(format!("{}needle{}\r\n", "x".repeat(995), "y".repeat(500)).bytes());
    // 4: bytes that are no character (continuation bytes alone) before the
    // match: the window moves back three at most, and they read as U+FFFD.
    content.extend([b'c'; 1100]);
    content.extend([0x80u8; 300]);
    content.extend(b"NEEDLE tail\n");
    // 5: a long line whose match is within its first 1,000 bytes.
    content.extend(format!("{}needle{}\n", "d".repeat(900), "e".repeat(900)).bytes());
    fs::write(fx.p("in/late.txt"), &content).unwrap();
    let sb = fx.builder().build().unwrap();
    let mut opts = sandgate::search::GrepOptions::default();
    opts.case_insensitive = true;
    let sandgate::search::GrepOutput::Lines(ms) = sb.grep_with("needle", None, &opts).unwrap()
    else {
        panic!("lines")
    };
    let got: Vec<_> = ms
        .iter()
        .map(|m| (m.line, m.text_start, m.text.len(), m.text_cut))
        .collect();
    // Line 4: 1100 + 300 - 200 = 1200, back three continuation bytes to
    // 1197; 203 of them (each U+FFFD, three bytes) and 'NEEDLE tail' (11
    // bytes) to the line's end.
    assert_eq!(
        got,
        [
            (1, 1300, 1000, true),
            (2, 1100, 1000, true),
            (3, 795, 706, false),
            (4, 1197, 203 * 3 + 11, false),
            (5, 0, 1000, true),
        ]
    );
    assert_eq!(
        ms[0].text,
        format!("{}needle{}", "a".repeat(200), "b".repeat(794))
    );
    assert!(ms[1]
        .text
        .starts_with(&format!("{}zneedle", "é".repeat(100))));
    assert_eq!(
        ms[2].text,
        format!("{}needle{}", "x".repeat(200), "y".repeat(500))
    );
    assert_eq!(ms[3].text, format!("{}NEEDLE tail", "\u{fffd}".repeat(203)));
    assert!(ms[4].text.starts_with('d') && ms[4].text.contains("needle"));
    // The endpoint says where the text starts, and that the line is not
    // whole, for each window; a match shown from the line's start has no
    // `text_start`.
    let answers = endpoint(
        sb,
        &[json!({"op": "grep", "pattern": "needle", "case_insensitive": true})],
    );
    let m = answers[0]["matches"].as_array().unwrap();
    let fields: Vec<_> = m
        .iter()
        .map(|m| (m["text_start"].clone(), m["line_truncated"].clone()))
        .collect();
    assert_eq!(
        fields,
        [
            (json!(1300), json!(true)),
            (json!(1100), json!(true)),
            (json!(795), json!(true)),
            (json!(1197), json!(true)),
            (json!(null), json!(true)),
        ],
        "{}",
        answers[0]
    );
}

/// Context lines cut at 1,000 bytes are marked as the matching line is:
/// the endpoint names the cut ones by index (`before_truncated`,
/// `after_truncated`), and an answer whose context is whole has no such
/// field.
#[test]
fn grep7_context_lines_cut_at_1000_bytes_say_so() {
    use serde_json::json;
    let fx = Fx::new();
    let long = "y".repeat(1500);
    fx.put(
        "in/a.txt",
        &format!("{long}\nshort before\nhit\n{long}\nshort after\n"),
    );
    let sb = fx.builder().build().unwrap();
    let mut opts = sandgate::search::GrepOptions::default();
    (opts.before, opts.after) = (2, 2);
    let ms = sb.grep_with("hit", None, &opts).unwrap();
    let sandgate::search::GrepOutput::Lines(ms) = ms else {
        panic!("{ms:?}")
    };
    assert_eq!(
        (ms[0].before_cut.clone(), ms[0].after_cut.clone()),
        (vec![0], vec![0])
    );
    let answers = endpoint(
        sb,
        &[
            json!({"op": "grep", "pattern": "hit", "before": 2, "after": 2}),
            json!({"op": "grep", "pattern": "hit", "before": 1, "after": 0}),
        ],
    );
    let m = &answers[0]["matches"][0];
    assert_eq!(m["before"][0].as_str().unwrap().len(), 1000);
    assert_eq!(m["before_truncated"], json!([0]));
    assert_eq!(m["after_truncated"], json!([0]));
    assert!(m.get("line_truncated").is_none());
    let m = &answers[1]["matches"][0];
    assert!(m.get("before_truncated").is_none(), "{m}");
    assert!(m.get("after_truncated").is_none(), "{m}");
}

/// A subdirectory the process may not list (mode 000, as a non-root
/// uid) does not refuse the whole grep: it is passed over, counted in
/// `unreadable`, and the rest of the tree is searched. As root, whom the
/// mode does not stop, the test has nothing to show and says so.
#[test]
fn grep7_an_unlistable_subdirectory_is_counted_not_fatal() {
    use serde_json::json;
    let fx = Fx::new();
    fx.put("ws/t/a.txt", "hit a\n")
        .put("ws/t/locked/b.txt", "hit b\n");
    fx.put("ws/t/z.txt", "hit z\n");
    let Some(locked) = Unlistable::make(&fx.p("ws/t/locked")) else {
        return;
    };
    let sb = fx.builder().build().unwrap();
    let found = sb
        .grep_found("hit", Some("t"), &Default::default())
        .map(|f| (f.results, f.unreadable));
    let answers = endpoint(sb, &[json!({"op": "grep", "pattern": "hit", "path": "t"})]);
    drop(locked);
    let (results, unreadable) = found.unwrap();
    let sandgate::search::GrepOutput::Lines(ms) = results else {
        panic!("{results:?}")
    };
    let paths: Vec<&str> = ms.iter().map(|m| m.path.as_str()).collect();
    assert_eq!((paths, unreadable), (vec!["t/a.txt", "t/z.txt"], 1));
    assert_eq!(answers[0]["unreadable"], json!(1), "{}", answers[0]);
}

/// A directory made mode 000 for the test's life (0755 again when
/// dropped, so that it can be removed).
struct Unlistable(std::path::PathBuf);

impl Unlistable {
    /// `None`, with a note, where this uid lists a mode-000 directory
    /// anyway (root).
    fn make(dir: &Path) -> Option<Unlistable> {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o000)).unwrap();
        let locked = Unlistable(dir.to_owned());
        if fs::read_dir(dir).is_ok() {
            eprintln!("skipped: this uid lists a mode-000 directory");
            return None;
        }
        Some(locked)
    }
}

impl Drop for Unlistable {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = fs::set_permissions(&self.0, fs::Permissions::from_mode(0o755));
    }
}

/// glob passes over a subdirectory it cannot list, as grep does, and
/// counts it (before, one such directory failed the whole glob with
/// `E_IO`). Root lists a mode-000 directory, so this runs unprivileged
/// (the MCP test drops the override and runs as root too).
#[test]
fn an_unlistable_subdirectory_does_not_fail_a_glob() {
    use serde_json::json;
    let fx = Fx::new();
    fx.put("ws/t/a.txt", "a\n").put("ws/t/locked/b.txt", "b\n");
    let Some(locked) = Unlistable::make(&fx.p("ws/t/locked")) else {
        return;
    };
    let sb = fx.builder().build().unwrap();
    let found = sb
        .glob_found("**/*.txt", Some("t"))
        .map(|f| (f.results, f.unreadable));
    let answers = endpoint(
        sb,
        &[json!({"op": "glob", "pattern": "**/*.txt", "path": "t"})],
    );
    drop(locked);
    assert_eq!(found.unwrap(), (vec!["t/a.txt".to_owned()], 1));
    assert_eq!(answers[0]["unreadable"], json!(1), "{}", answers[0]);
}

/// An ext4 image on a loop device, mounted while the guard lives.
struct LoopFs {
    dir: tempfile::TempDir,
}

impl LoopFs {
    /// A 64 MiB ext4 image mounted read-write at `dir/mnt`, or `None`
    /// where this process cannot make one (not root, no loop device, no
    /// mkfs.ext4).
    fn new() -> Option<LoopFs> {
        use std::process::Command;
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        fs::File::create(&img).unwrap().set_len(64 << 20).unwrap();
        fs::create_dir(dir.path().join("mnt")).unwrap();
        let ok = |c: &mut Command| c.output().is_ok_and(|o| o.status.success());
        (ok(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096"])
            .arg(&img))
            && ok(Command::new("mount")
                .arg("-o")
                .arg("loop")
                .arg(&img)
                .arg(dir.path().join("mnt"))))
        .then_some(LoopFs { dir })
    }
    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
    fn umount(&self) {
        let _ = std::process::Command::new("umount")
            .arg(self.mnt())
            .status();
    }
    /// Remounts the image after zeroing the last leaf block of `name`'s
    /// extent tree, so that reading the file fails with an I/O error once
    /// it reaches the extents that leaf held, and not before.
    fn break_last_leaf(&self, name: &str) {
        use std::process::Command;
        self.umount();
        let img = self.dir.path().join("img");
        let out = Command::new("debugfs")
            .arg("-R")
            .arg(format!("ex {name}"))
            .arg(&img)
            .output()
            .unwrap();
        // Level-1 rows: "1/ 2   5/  5  2720 -  3071  6166   352".
        let leaf: u64 = String::from_utf8_lossy(&out.stdout)
            .lines()
            .rfind(|l| l.split_whitespace().next() == Some("1/"))
            .and_then(|l| l.split_whitespace().nth(7)?.parse().ok())
            .expect("the file has a two-level extent tree");
        let f = fs::OpenOptions::new().write(true).open(&img).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &[0u8; 4096], leaf * 4096).unwrap();
        drop(f);
        let st = Command::new("mount")
            .arg("-o")
            .arg("loop,ro")
            .arg(&img)
            .arg(self.mnt())
            .status()
            .unwrap();
        assert!(st.success());
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        self.umount();
    }
}

/// A file whose read fails part way (an I/O error from a damaged disk,
/// here an ext4 extent leaf zeroed under a 12 MiB file, which grep reads
/// line by line) is counted in `unreadable`: its matches before the error
/// are answered, but the answer does not pass for the whole file's. Needs
/// root and a loop device; skips otherwise.
#[test]
fn grep7_a_read_error_mid_file_is_counted() {
    use std::io::Write;
    let Some(lfs) = LoopFs::new() else {
        eprintln!("skipped: no loop-mounted ext4 here (needs root)");
        return;
    };
    let mnt = lfs.mnt();
    // 4 KiB of text every 8 KiB, holes between: some 1,500 extents, a
    // two-level tree whose last leaf maps the file's end.
    let mut f = fs::File::create(mnt.join("big.txt")).unwrap();
    let chunk = format!("{}\n", "x".repeat(63)).repeat(64);
    // The first 8 KiB whole text, so the file is not taken for binary.
    f.write_all(format!("hit first\n{chunk}{chunk}").as_bytes())
        .unwrap();
    for off in (16384..12 << 20).step_by(8192) {
        std::os::unix::fs::FileExt::write_all_at(&f, chunk.as_bytes(), off).unwrap();
    }
    std::os::unix::fs::FileExt::write_all_at(&f, b"hit last\n", 12 << 20).unwrap();
    drop(f);
    lfs.break_last_leaf("big.txt");
    let mut b = Sandbox::builder();
    b.read_root(&mnt).max_read_bytes(16 << 20);
    let sb = b.build().unwrap();
    let found = sb.grep_found("hit", None, &Default::default()).unwrap();
    let sandgate::search::GrepOutput::Lines(ms) = &found.results else {
        panic!("{found:?}")
    };
    let lines: Vec<usize> = ms.iter().map(|m| m.line).collect();
    assert_eq!((lines, found.unreadable), (vec![1], 1));
}

#[test]
fn a_grep_stopped_at_max_results_says_so() {
    use serde_json::json;
    let fx = Fx::new();
    fx.put("in/a.txt", "hit\nhit\n")
        .put("in/b.txt", "miss\nhit\n");
    let answers = endpoint(
        fx.builder().build().unwrap(),
        &[
            json!({"op": "grep", "pattern": "hit", "max_results": 2}),
            json!({"op": "grep", "pattern": "hit", "max_results": 3}),
            json!({"op": "grep", "pattern": "hit", "max_results": 1, "mode": "files"}),
            json!({"op": "grep", "pattern": "hit", "max_results": 2, "mode": "files"}),
            json!({"op": "grep", "pattern": "hit", "max_results": 1, "mode": "count"}),
            json!({"op": "grep", "pattern": "hit", "max_results": 2, "after": 1}),
        ],
    );
    let cut = |a: &serde_json::Value| (a["truncated"].clone(), a["limit"].clone());
    let said = (json!(true), json!("max_results"));
    let whole = (json!(false), serde_json::Value::Null);
    assert_eq!(
        answers[0]["matches"].as_array().unwrap().len(),
        2,
        "{}",
        answers[0]
    );
    assert_eq!(
        cut(&answers[0]),
        said,
        "a grep cut at 2 of 3 matches: {}",
        answers[0]
    );
    assert_eq!(cut(&answers[1]), whole, "{}", answers[1]);
    assert_eq!(answers[2]["files"], json!(["a.txt"]));
    assert_eq!(cut(&answers[2]), said, "{}", answers[2]);
    assert_eq!(cut(&answers[3]), whole, "{}", answers[3]);
    assert_eq!(answers[4]["counts"], json!([{"path": "a.txt", "count": 2}]));
    assert_eq!(cut(&answers[4]), said, "{}", answers[4]);
    // Trailing context is still answered for the last match kept.
    assert_eq!(
        answers[5]["matches"][1]["after"],
        json!([]),
        "{}",
        answers[5]
    );
    assert_eq!(cut(&answers[5]), said, "{}", answers[5]);
}

/// A glob over two roots holds at most `MAX_GLOB_RESULTS` paths, and one
/// stopped there says so (`truncated`, `limit: "max_results"`); a glob of
/// exactly that many is whole.
#[test]
fn a_glob_stopped_at_its_cap_holds_no_more_and_says_so() {
    use sandgate::search::MAX_GLOB_RESULTS;
    use serde_json::json;
    let fx = Fx::new();
    for i in 0..MAX_GLOB_RESULTS {
        fx.put(&format!("in/d/f{i:04}.txt"), "");
    }
    fx.put("ws/d/z.txt", "");
    let sb = fx.builder().build().unwrap();
    // The second root's first entry matches: it must not be one more.
    let found = sb.glob("*.txt", Some("d")).unwrap();
    assert!(
        found.len() <= MAX_GLOB_RESULTS,
        "a glob over two roots answered {} paths, over its cap of {MAX_GLOB_RESULTS}",
        found.len()
    );
    let answers = endpoint(
        sb,
        &[
            json!({"op": "glob", "pattern": "*.txt", "path": "d"}),
            json!({"op": "glob", "pattern": "f*.txt", "path": "d"}),
        ],
    );
    assert_eq!(
        answers[0]["paths"].as_array().unwrap().len(),
        MAX_GLOB_RESULTS
    );
    assert_eq!(
        (answers[0]["truncated"].clone(), answers[0]["limit"].clone()),
        (json!(true), json!("max_results")),
        "a glob cut at its cap"
    );
    assert_eq!(
        answers[1]["paths"].as_array().unwrap().len(),
        MAX_GLOB_RESULTS
    );
    assert_eq!(
        answers[1]["truncated"],
        json!(false),
        "exactly the cap is whole"
    );
}

/// A grep or glob whose walk stops at `MAX_WALK_ENTRIES` entries says so
/// (`limit: "walk_entries"`): what lies past them was not searched.
#[test]
fn a_search_stopped_at_the_walk_cap_says_so() {
    use sandgate::search::MAX_WALK_ENTRIES;
    use serde_json::json;
    let fx = Fx::new();
    let many = fx.p("in/a");
    fs::create_dir(&many).unwrap();
    // Every entry counts, whatever it names: links to one file are made
    // in a fraction of the time new files take on a loaded disk (20,000
    // in 0.5 s against 15 s on the CI host's ext4), a new file every
    // 50,000 (ext4 allows 65,000 links to one).
    for i in 0..MAX_WALK_ENTRIES {
        let first = i - i % 50_000;
        match i == first {
            true => drop(fs::File::create(many.join(format!("{i}"))).unwrap()),
            false => {
                fs::hard_link(many.join(format!("{first}")), many.join(format!("{i}"))).unwrap()
            }
        }
    }
    // Past the cap: `b` is never entered.
    fx.put("in/b/needle.txt", "needle\n");
    let answers = endpoint(
        fx.builder().build().unwrap(),
        &[
            json!({"op": "grep", "pattern": "needle"}),
            json!({"op": "glob", "pattern": "**/needle.txt"}),
            json!({"op": "grep", "pattern": "needle", "path": "b"}),
        ],
    );
    for a in &answers[..2] {
        assert_eq!(
            (a["truncated"].clone(), a["limit"].clone()),
            (json!(true), json!("walk_entries")),
            "a search whose walk stopped at {MAX_WALK_ENTRIES} entries: {a}"
        );
    }
    assert_eq!(answers[2]["matches"][0]["path"], "b/needle.txt");
    assert_eq!(answers[2]["truncated"], json!(false));
}

/// A grep that passed over a file larger than `max_read_bytes` says so
/// (`limit: "max_read_bytes"`): a match in it is not in the answer.
#[test]
fn a_grep_that_skipped_a_file_over_the_read_cap_says_so() {
    use serde_json::json;
    let fx = Fx::new();
    fx.put("in/small.txt", "needle\n")
        .put("in/big.txt", &"needle\n".repeat(10));
    let sb = {
        let mut b = fx.builder();
        b.max_read_bytes(20);
        b.build().unwrap()
    };
    let answers = endpoint(
        sb,
        &[
            json!({"op": "grep", "pattern": "needle"}),
            json!({"op": "grep", "pattern": "needle", "path": "big.txt"}),
            json!({"op": "grep", "pattern": "needle", "path": "small.txt"}),
        ],
    );
    assert_eq!(
        answers[0]["matches"][0]["path"], "small.txt",
        "{}",
        answers[0]
    );
    for a in &answers[..2] {
        assert_eq!(
            (a["truncated"].clone(), a["limit"].clone()),
            (json!(true), json!("max_read_bytes")),
            "a grep that did not search big.txt: {a}"
        );
    }
    assert_eq!(answers[2]["truncated"], json!(false), "{}", answers[2]);
}

/// A directory whose root-relative path passes the kernel's 4,096 bytes
/// (made one level at a time) is not entered by grep or glob, which search
/// the rest and say they were cut (`limit: "path_length"`): it failed the
/// whole search with `E_PATH_INVALID` before, so one such directory in a
/// tree blinded every search of it.
#[test]
fn floods7_a_directory_too_deep_to_name_does_not_fail_a_search() {
    use serde_json::json;
    use std::os::fd::{AsRawFd, FromRawFd};
    let fx = Fx::new();
    fx.put("in/a/needle.txt", "needle\n");
    fs::create_dir_all(fx.p("in/z")).unwrap();
    let name = std::ffi::CString::new("n".repeat(255)).unwrap();
    let mut at = fs::File::open(fx.p("in/z")).unwrap();
    for _ in 0..20 {
        // SAFETY: plain system calls on a descriptor this test owns; the
        // new one is owned by the `File` made of it.
        unsafe {
            assert_eq!(libc::mkdirat(at.as_raw_fd(), name.as_ptr(), 0o755), 0);
            let fd = libc::openat(
                at.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY,
            );
            assert!(fd >= 0);
            at = fs::File::from_raw_fd(fd);
        }
    }
    fs::write(fx.p("in/z/x"), "needle\n").unwrap();
    let answers = endpoint(
        fx.builder().build().unwrap(),
        &[
            json!({"op": "grep", "pattern": "needle"}),
            json!({"op": "glob", "pattern": "**/needle.txt"}),
        ],
    );
    for a in &answers {
        assert_eq!(a["ok"], json!(true), "{a}");
        assert_eq!(
            (a["truncated"].clone(), a["limit"].clone()),
            (json!(true), json!("path_length")),
            "{a}"
        );
    }
    assert_eq!(answers[0]["matches"][0]["path"], "a/needle.txt");
    assert_eq!(answers[0]["matches"][1]["path"], "z/x");
    assert_eq!(answers[1]["paths"], json!(["a/needle.txt"]));
}

/// A binary file (a NUL in its first 8 KiB) that holds the pattern after
/// the NUL is passed over, and the answer says how many such files it
/// passed over (`binary`), in every mode and for a file named as the path:
/// before, it was passed over in silence, and an agent could not tell "no
/// match" from "not searched". A search that met none leaves `binary` out.
/// Both sizes of file are counted: one read whole and one over 8 MiB read
/// line by line.
#[test]
fn grep8_binary_files_passed_over_are_counted() {
    use sandgate::search::{GrepMode, GrepOptions};
    use serde_json::json;
    let fx = Fx::new();
    fx.put("ws/b/text.txt", "needle in text\n")
        .put("ws/b/blob.bin", "head\0needle after the NUL\n")
        .put("ws/c/plain.txt", "needle\n");
    let mut big = vec![0u8; 16];
    big.extend_from_slice(b"needle\n");
    big.resize(9 << 20, b'x');
    fs::write(fx.p("ws/b/big.bin"), &big).unwrap();
    let sb = fx.builder().max_read_bytes(16 << 20).build().unwrap();
    for mode in [GrepMode::Lines, GrepMode::Files, GrepMode::Count] {
        let mut opts = GrepOptions::default();
        opts.mode = mode;
        let found = sb.grep_found("needle", Some("b"), &opts).unwrap();
        assert_eq!(
            (found.binary, found.unreadable),
            (2, 0),
            "{mode:?} {found:?}"
        );
    }
    let named = sb
        .grep_found("needle", Some("b/blob.bin"), &GrepOptions::default())
        .unwrap();
    assert_eq!(named.binary, 1, "{named:?}");
    let none = sb
        .grep_found("needle", Some("c"), &GrepOptions::default())
        .unwrap();
    assert_eq!(none.binary, 0, "{none:?}");
    let answers = endpoint(
        sb,
        &[
            json!({"op": "grep", "pattern": "needle", "path": "b"}),
            json!({"op": "grep", "pattern": "needle", "path": "b", "mode": "files"}),
            json!({"op": "grep", "pattern": "needle", "path": "b/blob.bin"}),
            json!({"op": "grep", "pattern": "needle", "path": "c"}),
        ],
    );
    assert_eq!(
        answers[0]["matches"][0]["path"],
        json!("b/text.txt"),
        "{}",
        answers[0]
    );
    assert_eq!(answers[0]["binary"], json!(2), "{}", answers[0]);
    assert_eq!(answers[1]["binary"], json!(2), "{}", answers[1]);
    assert_eq!(answers[2]["binary"], json!(1), "{}", answers[2]);
    assert!(answers[3].get("binary").is_none(), "{}", answers[3]);
}

/// grep takes a regular file as its path; one naming a FIFO, a Unix
/// socket or (where this uid may make one) a character device is refused
/// as not a regular file (E_NOT_FILE), not as not a directory, and
/// nothing is opened (a FIFO nobody writes would otherwise block an
/// open). glob, which takes only a directory, still answers E_NOT_DIR.
#[test]
fn grep8_a_special_file_as_path_is_not_a_regular_file() {
    use sandgate::search::GrepOptions;
    use serde_json::json;
    let fx = Fx::new();
    fx.put("ws/keep.txt", "x\n");
    let mut names = vec!["fifo", "sock"];
    let mknod = |rel: &str, mode: libc::mode_t, dev: libc::dev_t| {
        let c = std::ffi::CString::new(fx.p(rel).into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        unsafe { libc::mknod(c.as_ptr(), mode, dev) == 0 }
    };
    assert!(mknod("ws/fifo", libc::S_IFIFO | 0o644, 0));
    let _sock = std::os::unix::net::UnixListener::bind(fx.p("ws/sock")).unwrap();
    if mknod("ws/null", libc::S_IFCHR | 0o666, libc::makedev(1, 3)) {
        names.push("null");
    } else {
        eprintln!("note: this uid cannot make a device; FIFO and socket only");
    }
    fx.link("ws/to_fifo", "fifo");
    names.push("to_fifo");
    for resolver in resolvers() {
        let sb = fx.builder().resolver(resolver).build().unwrap();
        for name in &names {
            let err = sb
                .grep_found("x", Some(name), &GrepOptions::default())
                .unwrap_err();
            assert_eq!(
                (err.code(), err.to_string().contains("not a regular file")),
                (ErrorCode::NotFile, true),
                "{resolver:?} {name}: {err}"
            );
            assert_eq!(code(sb.glob("*", Some(name))), ErrorCode::NotDir, "{name}");
        }
    }
    let sb = fx.builder().build().unwrap();
    let answers = endpoint(sb, &[json!({"op": "grep", "pattern": "x", "path": "fifo"})]);
    assert_eq!(
        answers[0]["error"]["code"],
        json!("E_NOT_FILE"),
        "{}",
        answers[0]
    );
}

/// A glob pattern whose regular expression is over the matcher's size
/// limit (100,000 `*`) is refused with `E_REQUEST`, as glob and as grep's
/// `glob` filter, rather than panicking in the matcher's compiler (which
/// ended a `sandgate tool` session and answered `E_INTERNAL`, "a bug in
/// sandgate", through the C ABI); the message names the pattern's size,
/// not the half-megabyte expression built from it. Such a pattern is now
/// over the 64 KiB cap on a pattern's length, which refuses it before it
/// is compiled (no single glob within the cap was found to pass the size
/// limit: 65,536 `*` or `?` compile); a set of exclude patterns can still
/// pass it together, and is refused the same way (crates/mcp).
#[test]
fn ffi17_a_glob_too_large_to_compile_is_refused_not_a_panic() {
    use sandgate::search::GrepOptions;
    use serde_json::json;
    let fx = Fx::new();
    fx.put("in/a.txt", "hit\n");
    let sb = fx.builder().build().unwrap();
    let huge = "*".repeat(100_000);
    let e = sb.glob(&huge, None).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Request, "{}", e.message());
    assert!(
        e.message().contains("a pattern of 100000 bytes") && e.message().len() < 300,
        "{}",
        &e.message()[..e.message().len().min(300)]
    );
    let mut opts = GrepOptions::default();
    opts.glob = Some(huge.clone());
    assert_eq!(code(sb.grep_found("hit", None, &opts)), ErrorCode::Request);
    // The endpoint answers it, and the next request in the session.
    let answers = endpoint(
        sb,
        &[
            json!({"op": "glob", "pattern": huge}),
            json!({"op": "grep", "pattern": "hit", "glob": huge}),
            json!({"op": "glob", "pattern": "*.txt"}),
        ],
    );
    assert_eq!(answers[0]["error"]["code"], json!("E_REQUEST"));
    assert_eq!(answers[1]["error"]["code"], json!("E_REQUEST"));
    assert_eq!(answers[2]["paths"], json!(["a.txt"]), "{}", answers[2]);
}

/// A root that cannot be opened is named in the refusal's path as every
/// message names one: a byte that is not UTF-8 as `\xNN`, a backslash
/// doubled, a line feed as `\u{a}`; before, lossily (U+FFFD, the name of
/// another directory) and with the line feed raw.
#[test]
fn gitshown23_a_root_that_cannot_be_opened_is_named_by_its_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join(OsStr::from_bytes(b"d\xff\\x\ny"));
    for write in [false, true] {
        let mut b = Sandbox::builder();
        if write {
            b.write_root(&missing);
        } else {
            b.read_root(&missing);
        }
        let e = match b.build() {
            Err(e) => e,
            Ok(_) => panic!("a missing root was opened"),
        };
        let want = format!("{}/d\\xff\\\\x\\u{{a}}y", tmp.path().display());
        assert_eq!(e.path(), Some(want.as_str()), "{e}");
        assert!(!e.to_string().contains('\n'), "{e:?}");
    }
}

/// A grep or glob pattern over `MAX_PATTERN_BYTES` is refused before it
/// is parsed, naming its length and the cap (a grep pattern of 100 MB was
/// parsed for minutes before the compiled size limit refused it); one at
/// the cap is parsed.
#[test]
fn pattern25_a_pattern_past_the_cap_is_refused_before_it_is_parsed() {
    use sandgate::search::{GrepOptions, MAX_PATTERN_BYTES};
    let fx = Fx::new();
    fx.put("in/a.txt", "hit\n");
    let sb = fx.builder().build().unwrap();
    let opts = GrepOptions::default();
    for len in [MAX_PATTERN_BYTES + 1, 100 << 20] {
        let e = sb.grep_found(&"a".repeat(len), None, &opts).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Request);
        assert_eq!(
            e.message(),
            format!(
                "invalid regular expression: a pattern of {len} bytes, over the \
                 {MAX_PATTERN_BYTES} a pattern may have"
            )
        );
        let e = sb.glob(&"a".repeat(len), None).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Request);
        assert!(
            e.message()
                .contains(&format!("a pattern of {len} bytes, over the")),
            "{}",
            e.message()
        );
    }
    // At the cap, the pattern is parsed and judged by what it is.
    let at = "a".repeat(MAX_PATTERN_BYTES);
    if let Err(e) = sb.grep_found(&at, None, &opts) {
        assert!(!e.message().contains("over the"), "{}", e.message());
    }
    if let Err(e) = sb.glob(&at, None) {
        assert!(!e.message().contains("over the"), "{}", e.message());
    }
    assert!(matches!(
        sb.grep_found("hit", None, &opts).unwrap().results,
        sandgate::search::GrepOutput::Lines(l) if l.len() == 1
    ));
}
