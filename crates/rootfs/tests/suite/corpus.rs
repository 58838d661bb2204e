//! The escape corpus: named attempts to read, write or reach something
//! outside the root by every spelling, each run under every resolver with the
//! exact outcome asserted, and the outside sibling checked byte for byte
//! afterwards.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use sandgate_rootfs::{ErrorKind, FileKind, OpenOptions, RenameMode, Resolver, Root, MAX_SYMLINKS};

use crate::common::{resolvers, setup, Fixture};

#[derive(Clone, Copy, Debug)]
enum Op {
    Read,
    Stat,
    Lstat,
    Readlink,
    ReadDir,
    CreateNew,
    OpenCreate,
    Mkdir,
    MkdirAll,
    Remove,
    Replace,
    Rename(&'static str),
    RenameNoReplace(&'static str),
    RenameFrom(&'static str),
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    Ok,
    Content(&'static str),
    Kind(FileKind),
    Target(&'static str),
    Err(ErrorKind),
}

use ErrorKind::*;
use Expect::*;
use Op::*;

/// The standard tree every corpus case runs against.
fn standard(f: &Fixture) {
    let out = f.outside_path();
    let out = out.to_str().unwrap();
    let root = f.root_path();
    let root = root.to_str().unwrap();
    f.file("file.txt", "inside")
        .file("dir/inner.txt", "inner")
        .file("dir/sub/deep.txt", "deep")
        .link("l_abs_out", &format!("{out}/secret"))
        .link("l_abs_in", &format!("{root}/file.txt"))
        .link("l_abs_slash", "//etc")
        .link("l_rel_out", "../outside/secret")
        .link("l_rel_in", "file.txt")
        .link("l_dir", "dir")
        .link("l_trailing", "dir/")
        .link("l_file_slash", "file.txt/")
        .link("l_dotdot_in", "dir/../file.txt")
        .link("dir/l_up", "../file.txt")
        .link("dir/l_up2", "../../outside/secret")
        .link("dir/l_to_l_dir", "../l_dir")
        .link("dir/sub/l_top", "../..")
        .link("dir/sub/l_esc", "../../..")
        .link("l_mid", "dir/sub/..")
        .link("l_root", "/")
        .link("l_dot", ".")
        .link("l_dotdot", "..")
        .link("loop_a", "loop_b")
        .link("loop_b", "loop_a")
        .link("self_loop", "self_loop")
        .link("chain1", "chain2")
        .link("chain2", "chain3")
        .link("chain3", "file.txt")
        .link("chain_out1", "chain_out2")
        .link("chain_out2", "../outside/secret")
        .link("dangling", "nothing")
        .link("dangling_out", "../outside/nothing")
        .link("l_outdir", "../outside/dir")
        .link("l_tricky", "dir/sub/../../../outside/secret")
        .link("l_proc_self", "/proc/self")
        .link("l_proc_fd", "/proc/self/fd/0")
        .link("l_proc_root", "/proc/self/root")
        .link("l_proc_cwd", "/proc/self/cwd");
    // Chains of exactly MAX_SYMLINKS and MAX_SYMLINKS + 1 links.
    for (prefix, n) in [("c40_", MAX_SYMLINKS), ("c41_", MAX_SYMLINKS + 1)] {
        for i in 1..n {
            f.link(&format!("{prefix}{i}"), &format!("{prefix}{}", i + 1));
        }
        f.link(&format!("{prefix}{n}"), "file.txt");
    }
}

/// Every file, directory and link under `dir`, with contents and targets.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let t = e.file_type().unwrap();
            let v = if t.is_symlink() {
                format!("link:{}", fs::read_link(&p).unwrap().display())
            } else if t.is_dir() {
                stack.push(p);
                "dir".to_string()
            } else {
                format!("file:{}", String::from_utf8_lossy(&fs::read(&p).unwrap()))
            };
            out.insert(rel, v);
        }
    }
    out
}

fn expand(f: &Fixture, path: &str) -> String {
    path.replace("{root}", f.root_path().to_str().unwrap())
        .replace("{out}", f.outside_path().to_str().unwrap())
        .replace("{long}", &"a/".repeat(2048))
}

/// Runs `op` on `path`. `host` is the fixture's own directory, which holds
/// the root and the outside tree: an error's message may echo the caller's
/// path, and must name nothing else beneath it (wherever the temporary
/// directory is).
fn run_op(root: &Root, op: Op, path: &str, host: &str) -> Result<Option<String>, ErrorKind> {
    let e = |e: sandgate_rootfs::Error| {
        assert_eq!(e.code(), e.kind().code());
        // The message may echo the caller's own path, never another host path.
        let msg = e.to_string().replace(path, "");
        assert!(
            !msg.contains(host) && !msg.contains("/tmp/"),
            "message leaks a host path: {e}"
        );
        e.kind()
    };
    let kind_name = |k: FileKind| Some(format!("kind:{}", k.as_str()));
    match op {
        Read => root
            .read(path)
            .map(|b| Some(String::from_utf8_lossy(&b).into_owned()))
            .map_err(e),
        Stat => root.stat(path).map(|m| kind_name(m.kind())).map_err(e),
        Lstat => root.lstat(path).map(|m| kind_name(m.kind())).map_err(e),
        Readlink => root
            .readlink(path)
            .map(|t| Some(format!("target:{}", t.display())))
            .map_err(e),
        ReadDir => root.read_dir(path).map(|_| None).map_err(e),
        CreateNew => root.create_new(path).map(|_| None).map_err(e),
        OpenCreate => root
            .open_with(path, OpenOptions::new().write(true).create(true))
            .map(|_| None)
            .map_err(e),
        Mkdir => root.mkdir(path, 0o755).map(|_| None).map_err(e),
        MkdirAll => root.mkdir_all(path, 0o755).map(|_| None).map_err(e),
        Remove => root.remove(path).map(|_| None).map_err(e),
        Replace => root.replace(path, b"NEW").map(|_| None).map_err(e),
        Rename(to) => root
            .rename(path, to, RenameMode::Replace)
            .map(|_| None)
            .map_err(e),
        RenameNoReplace(to) => root
            .rename(path, to, RenameMode::NoReplace)
            .map(|_| None)
            .map_err(e),
        RenameFrom(from) => root
            .rename(from, path, RenameMode::Replace)
            .map(|_| None)
            .map_err(e),
    }
}

fn check(name: &str, resolver: Resolver, got: &Result<Option<String>, ErrorKind>, want: Expect) {
    let ok = match (want, got) {
        (Ok, Result::Ok(_)) => true,
        (Content(c), Result::Ok(Some(s))) => s == c,
        (Kind(k), Result::Ok(Some(s))) => *s == format!("kind:{}", k.as_str()),
        (Target(t), Result::Ok(Some(s))) => *s == format!("target:{t}"),
        (Err(k), Result::Err(g)) => k == *g,
        _ => false,
    };
    assert!(
        ok,
        "{name} under {resolver:?}: expected {want:?}, got {got:?}"
    );
    if let Result::Ok(Some(s)) = got {
        assert!(
            !s.contains("OUTSIDE-SECRET"),
            "{name} under {resolver:?} returned outside content"
        );
    }
}

fn run_case(name: &str, op: Op, path: &str, want: Expect) {
    setup();
    for resolver in resolvers() {
        let f = Fixture::new();
        standard(&f);
        let before = snapshot(&f.outside_path());
        let root = f.root(resolver);
        let path = expand(&f, path);
        let host = f.tmp.path().to_str().unwrap().to_owned();
        let got = run_op(&root, op, &path, &host);
        check(name, resolver, &got, want);
        assert_eq!(
            before,
            snapshot(&f.outside_path()),
            "{name} under {resolver:?} changed the outside"
        );
    }
}

macro_rules! corpus {
    ($( $name:ident: $op:expr, $path:expr => $want:expr; )*) => {
        $(
            #[test]
            fn $name() {
                run_case(stringify!($name), $op, $path, $want);
            }
        )*
        /// Every case name, so the count is checked.
        const CASES: &[&str] = &[$(stringify!($name)),*];
    };
}

corpus! {
    // Plain names and lexical `..` that stays inside.
    read_plain_file: Read, "file.txt" => Content("inside");
    read_dot_prefix: Read, "./file.txt" => Content("inside");
    read_dotdot_inside: Read, "dir/../file.txt" => Content("inside");
    read_dotdot_twice_inside: Read, "dir/sub/../../file.txt" => Content("inside");
    read_repeated_slashes: Read, "dir//sub///deep.txt" => Content("deep");
    stat_dot_components: Stat, "dir/./sub/./deep.txt" => Kind(FileKind::File);
    stat_root_dot: Stat, "." => Kind(FileKind::Dir);
    stat_dir_trailing_slash: Stat, "dir/" => Kind(FileKind::Dir);

    // Lexical escapes.
    read_dotdot_out: Read, "../outside/secret" => Err(Escape);
    read_dotdot_after_dir: Read, "dir/../../outside/secret" => Err(Escape);
    stat_dotdot_alone: Stat, ".." => Err(Escape);
    stat_dotdot_slash: Stat, "../" => Err(Escape);
    stat_dir_dotdot_dotdot: Stat, "dir/../.." => Err(Escape);
    stat_dir_dotdot_dotdot_slash: Stat, "dir/../../" => Err(Escape);
    stat_deep_climb: Stat, "dir/sub/../../../outside" => Err(Escape);
    stat_nonexistent_dotdot: Stat, "nonexistent/.." => Err(NotFound);
    stat_dot_then_dotdot: Stat, "./.." => Err(Escape);

    // Absolute spellings.
    read_absolute_etc: Read, "/etc/passwd" => Err(Escape);
    read_absolute_inside: Read, "{root}/file.txt" => Err(Escape);
    read_double_slash_abs: Read, "//file.txt" => Err(Escape);
    stat_slash_alone: Stat, "/" => Err(Escape);
    read_absolute_outside: Read, "{out}/secret" => Err(Escape);

    // Absolute symlinks, out and even back in.
    read_abs_link_out: Read, "l_abs_out" => Err(Escape);
    read_abs_link_in: Read, "l_abs_in" => Err(Escape);
    stat_abs_link_double_slash: Stat, "l_abs_slash" => Err(Escape);
    stat_link_to_slash: Stat, "l_root" => Err(Escape);
    read_through_link_to_slash: Read, "l_root/etc/passwd" => Err(Escape);
    read_dir_link_to_slash: ReadDir, "l_root" => Err(Escape);

    // Relative symlinks.
    read_rel_link_out: Read, "l_rel_out" => Err(Escape);
    read_rel_link_in: Read, "l_rel_in" => Content("inside");
    read_through_dir_link: Read, "l_dir/inner.txt" => Content("inner");
    read_link_with_dotdot_inside: Read, "l_dotdot_in" => Content("inside");
    read_link_up_one_inside: Read, "dir/l_up" => Content("inside");
    read_link_up_two_out: Read, "dir/l_up2" => Err(Escape);
    read_link_to_link_dir: Read, "dir/l_to_l_dir/inner.txt" => Content("inner");
    stat_link_to_root_from_sub: Stat, "dir/sub/l_top" => Kind(FileKind::Dir);
    read_via_link_to_root_from_sub: Read, "dir/sub/l_top/file.txt" => Content("inside");
    stat_link_escaping_by_one: Stat, "dir/sub/l_esc" => Err(Escape);
    read_link_tricky_climb: Read, "l_tricky" => Err(Escape);
    read_link_mid_dotdot: Read, "l_mid/inner.txt" => Content("inner");
    stat_link_dot: Stat, "l_dot" => Kind(FileKind::Dir);
    read_through_link_dot: Read, "l_dot/file.txt" => Content("inside");
    read_through_link_dot_twice: Read, "l_dot/l_dot/l_dot/file.txt" => Content("inside");
    stat_link_dotdot: Stat, "l_dotdot" => Err(Escape);
    read_through_link_dotdot: Read, "l_dotdot/outside/secret" => Err(Escape);
    read_dotdot_after_dir_link: Read, "l_dir/../file.txt" => Content("inside");
    stat_dotdot_after_dir_link_out: Stat, "l_dir/../../outside" => Err(Escape);
    read_dot_dotdot_after_link: Read, "l_dir/./../file.txt" => Content("inside");
    read_outside_dir_link_then_dotdot: Read, "l_outdir/../secret" => Err(Escape);
    read_dir_outside_dir_link: ReadDir, "l_outdir" => Err(Escape);
    stat_outside_dir_link: Stat, "l_outdir" => Err(Escape);

    // Chains and loops.
    read_chain_in: Read, "chain1" => Content("inside");
    read_chain_out: Read, "chain_out1" => Err(Escape);
    stat_two_cycle: Stat, "loop_a" => Err(Loop);
    stat_self_loop: Stat, "self_loop" => Err(Loop);
    lstat_self_loop_is_link: Lstat, "self_loop" => Kind(FileKind::Symlink);
    stat_through_loop_dir: Stat, "loop_a/x" => Err(Loop);
    stat_chain_of_40: Stat, "c40_1" => Kind(FileKind::File);
    stat_chain_of_41: Stat, "c41_1" => Err(Loop);
    lstat_chain_of_41_head: Lstat, "c41_1" => Kind(FileKind::Symlink);

    // Trailing slashes and non-directories used as directories.
    stat_file_link_trailing_slash: Stat, "l_rel_in/" => Err(NotDir);
    stat_link_target_trailing_slash_to_file: Stat, "l_file_slash" => Err(NotDir);
    read_file_trailing_slash: Read, "file.txt/" => Err(NotDir);
    stat_file_dot: Stat, "file.txt/." => Err(NotDir);
    stat_file_dotdot: Stat, "file.txt/.." => Err(NotDir);
    stat_file_dotdot_dir: Stat, "file.txt/../dir" => Err(NotDir);
    stat_deep_file_trailing_slash: Stat, "dir/sub/deep.txt/" => Err(NotDir);
    lstat_dir_link_trailing_slash_follows: Lstat, "l_dir/" => Kind(FileKind::Dir);
    lstat_dir_link_no_slash: Lstat, "l_dir" => Kind(FileKind::Symlink);
    stat_link_target_with_trailing_slash: Stat, "l_trailing/sub" => Kind(FileKind::Dir);

    // Dangling links.
    stat_dangling: Stat, "dangling" => Err(NotFound);
    lstat_dangling: Lstat, "dangling" => Kind(FileKind::Symlink);
    create_new_on_dangling: CreateNew, "dangling" => Err(Exists);
    create_new_on_dangling_out: CreateNew, "dangling_out" => Err(Exists);
    open_create_through_dangling: OpenCreate, "dangling" => Err(Symlink);
    open_create_through_dangling_out: OpenCreate, "dangling_out" => Err(Escape);
    create_new_on_link_out: CreateNew, "dir/l_up2" => Err(Exists);
    replace_through_outside_dir_link: Replace, "l_outdir/x" => Err(Escape);

    // procfs links, magic and not.
    stat_link_to_proc_self: Stat, "l_proc_self" => Err(Escape);
    read_through_link_to_proc_self: Read, "l_proc_self/status" => Err(Escape);
    stat_link_to_proc_fd: Stat, "l_proc_fd" => Err(Escape);
    stat_link_to_proc_root: Stat, "l_proc_root/etc" => Err(Escape);
    stat_link_to_proc_cwd: Stat, "l_proc_cwd" => Err(Escape);

    // Readlink does not resolve; it acts on the final entry.
    readlink_abs_out_gives_text: Readlink, "l_abs_out/" => Err(Io);
    readlink_rel_out_text: Readlink, "l_rel_out" => Target("../outside/secret");
    readlink_not_a_link: Readlink, "file.txt" => Err(Io);
    readlink_through_escape: Readlink, "l_dotdot/x" => Err(Escape);

    // Writes and tree changes aimed outside.
    create_new_dotdot: CreateNew, "../outside/new" => Err(Escape);
    create_new_via_dotdot_link: CreateNew, "l_dotdot/outside/new" => Err(Escape);
    create_new_via_outside_dir_link: CreateNew, "l_outdir/new" => Err(Escape);
    create_new_absolute: CreateNew, "{out}/new" => Err(Escape);
    create_new_trailing_slash: CreateNew, "newfile/" => Err(NotFile);
    create_new_existing: CreateNew, "file.txt" => Err(Exists);
    create_new_existing_dir: CreateNew, "dir" => Err(Exists);
    mkdir_dotdot: Mkdir, "../outside/newdir" => Err(Escape);
    mkdir_via_dotdot_link: Mkdir, "l_dotdot/newdir" => Err(Escape);
    mkdir_existing_file: Mkdir, "file.txt" => Err(Exists);
    mkdir_under_file: Mkdir, "file.txt/sub" => Err(NotDir);
    mkdir_dot: Mkdir, "." => Err(Exists);
    mkdir_all_via_outside_link: MkdirAll, "l_outdir/x/y" => Err(Escape);
    mkdir_all_climbing: MkdirAll, "a/../../x" => Err(Escape);
    mkdir_all_through_inside_link: MkdirAll, "l_dir/new/deeper" => Ok;
    replace_dotdot: Replace, "../x" => Err(Escape);
    replace_dir: Replace, "dir" => Err(NotFile);
    replace_abs_link_replaces_entry_only: Replace, "l_abs_out" => Ok;
    remove_abs_link_removes_entry_only: Remove, "l_abs_out" => Ok;
    remove_dir_link_removes_entry_only: Remove, "l_dir" => Ok;
    remove_dir_link_with_slash: Remove, "l_dir/" => Err(NotDir);
    remove_nonempty_dir: Remove, "dir" => Err(NotEmpty);
    remove_dot: Remove, "." => Err(InvalidPath);
    remove_dotdot: Remove, ".." => Err(Escape);
    remove_dir_dotdot: Remove, "dir/.." => Err(InvalidPath);
    remove_outside_via_link: Remove, "l_outdir/../secret" => Err(Escape);
    rename_link_out_moves_link: Rename("moved"), "l_rel_out" => Ok;
    rename_to_outside: Rename("../outside/stolen"), "file.txt" => Err(Escape);
    rename_from_outside: RenameFrom("../outside/secret"), "stolen" => Err(Escape);
    rename_into_outside_dir_link: Rename("l_outdir/stolen"), "file.txt" => Err(Escape);
    rename_no_replace_existing: RenameNoReplace("dir/inner.txt"), "file.txt" => Err(Exists);
    read_dir_dotdot: ReadDir, ".." => Err(Escape);
    read_dir_link_dot: ReadDir, "l_dot" => Ok;

    // Malformed input.
    stat_empty: Stat, "" => Err(NotFound);
    read_nul_byte: Read, "file.txt\0x" => Err(InvalidPath);
    stat_too_long: Stat, "{long}" => Err(InvalidPath);
}

#[test]
fn corpus_has_at_least_80_cases() {
    assert!(CASES.len() >= 80, "only {} cases", CASES.len());
}

/// Magic links proper: a root inside procfs, where `fd/N`, `cwd`, `root`,
/// `exe` and `ns/*` are magic. They are refused; ordinary files and procfs's
/// ordinary links (`self`, `thread-self`) still resolve.
#[test]
fn magic_links_in_procfs_are_never_followed() {
    setup();
    let (r, _w) = std::io::pipe().unwrap();
    let pipe_fd = std::os::fd::AsRawFd::as_raw_fd(&r);
    for resolver in resolvers() {
        let own = Root::open_with_resolver("/proc/self", resolver).unwrap();
        for p in [
            "root",
            "cwd",
            "exe",
            "root/etc/passwd",
            "cwd/.",
            "fd/0",
            "ns/net",
            "ns/mnt",
        ] {
            let e = own.stat(p).unwrap_err();
            assert_eq!(e.kind(), Escape, "/proc/self/{p} under {resolver:?}: {e}");
        }
        let e = own.stat(format!("fd/{pipe_fd}")).unwrap_err();
        assert_eq!(e.kind(), Escape, "pipe fd under {resolver:?}: {e}");
        assert!(own.read("status").unwrap().starts_with(b"Name:"));

        let proc = Root::open_with_resolver("/proc", resolver).unwrap();
        assert!(
            proc.read("self/status").unwrap().starts_with(b"Name:"),
            "{resolver:?}"
        );
        assert!(
            proc.stat("thread-self/status").unwrap().is_file(),
            "{resolver:?}"
        );
        for p in ["self/root", "self/cwd/x", "self/fd/0", "thread-self/root"] {
            let e = proc.stat(p).unwrap_err();
            assert_eq!(e.kind(), Escape, "/proc/{p} under {resolver:?}: {e}");
        }
    }
}

/// A root opened on a subdirectory is its own boundary: `..` from it is an
/// escape even though the parent is inside the first root.
#[test]
fn sub_root_is_its_own_boundary() {
    setup();
    for resolver in resolvers() {
        let f = Fixture::new();
        standard(&f);
        let root = f.root(resolver);
        let sub = root.open_dir("l_dir").unwrap();
        assert_eq!(sub.read("inner.txt").unwrap(), b"inner");
        assert_eq!(
            sub.read("../file.txt").unwrap_err().kind(),
            Escape,
            "{resolver:?}"
        );
        assert_eq!(sub.read("l_up").unwrap_err().kind(), Escape, "{resolver:?}");
    }
}

/// Renaming the root's own path after opening changes nothing: the
/// descriptor still names the same directory.
#[test]
fn renaming_the_root_path_changes_nothing() {
    setup();
    for resolver in resolvers() {
        let f = Fixture::new();
        standard(&f);
        let root = f.root(resolver);
        fs::rename(f.root_path(), f.tmp.path().join("moved")).unwrap();
        fs::create_dir(f.root_path()).unwrap();
        fs::write(f.p("file.txt"), "impostor").unwrap();
        assert_eq!(root.read("file.txt").unwrap(), b"inside", "{resolver:?}");
    }
}
