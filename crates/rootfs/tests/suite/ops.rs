//! What each operation does on real files, under every resolver.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Arc;

use sandgate_rootfs::{ErrorCode, ErrorKind, FileKind, OpenOptions, RenameMode, Root};

use crate::common::{resolvers, setup, Fixture};

fn each(test: impl Fn(&Fixture, &Root)) {
    setup();
    for resolver in resolvers() {
        let f = Fixture::new();
        let root = f.root(resolver);
        test(&f, &root);
    }
}

fn names(f: &Fixture, rel: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(f.p(rel))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Makes a FIFO at `rel` in the fixture.
fn fifo(f: &Fixture, rel: &str) {
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        f.p(rel).as_path(),
        rustix::fs::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
}

#[test]
fn replace_creates_then_replaces_and_leaves_no_temporary() {
    each(|f, root| {
        f.dir("d");
        root.replace("d/a.txt", b"one").unwrap();
        assert_eq!(fs::read(f.p("d/a.txt")).unwrap(), b"one");
        root.replace("d/a.txt", b"two, longer").unwrap();
        assert_eq!(fs::read(f.p("d/a.txt")).unwrap(), b"two, longer");
        root.replace("top.txt", b"at the root").unwrap();
        assert_eq!(fs::read(f.p("top.txt")).unwrap(), b"at the root");
        assert_eq!(names(f, "d"), ["a.txt"]);
    });
}

#[test]
fn replace_keeps_permission_bits_of_the_replaced_file() {
    each(|f, root| {
        f.file("x.sh", "old");
        fs::set_permissions(f.p("x.sh"), fs::Permissions::from_mode(0o750)).unwrap();
        root.replace("x.sh", b"new").unwrap();
        assert_eq!(
            fs::metadata(f.p("x.sh")).unwrap().permissions().mode() & 0o7777,
            0o750
        );
        // Never setuid or setgid: the new content is a new file.
        fs::set_permissions(f.p("x.sh"), fs::Permissions::from_mode(0o6750)).unwrap();
        root.replace("x.sh", b"newer").unwrap();
        assert_eq!(
            fs::metadata(f.p("x.sh")).unwrap().permissions().mode() & 0o7777,
            0o750
        );
    });
}

#[test]
fn replace_reclaims_a_leftover_temporary_name() {
    each(|f, root| {
        f.file("a.txt", "old")
            .file(".a.txt.sandgate-tmp", "leftover of a killed writer");
        root.replace("a.txt", b"new").unwrap();
        assert_eq!(fs::read(f.p("a.txt")).unwrap(), b"new");
        assert_eq!(names(f, "."), ["a.txt"]);
    });
}

#[test]
fn replace_unique_never_removes_the_entry_at_the_temporary_name() {
    each(|f, root| {
        f.dir("d")
            .file("d/a.txt", "old")
            .file("d/.a.txt.sandgate-tmp", "someone's file");
        fs::set_permissions(f.p("d/a.txt"), fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(
            sandgate_rootfs::temp_name("a.txt".as_ref()),
            ".a.txt.sandgate-tmp"
        );
        root.replace_unique("d/a.txt", b"new").unwrap();
        root.replace_unique("d/new.txt", b"created").unwrap();
        assert_eq!(fs::read(f.p("d/a.txt")).unwrap(), b"new");
        assert_eq!(fs::read(f.p("d/new.txt")).unwrap(), b"created");
        assert_eq!(
            fs::metadata(f.p("d/a.txt")).unwrap().permissions().mode() & 0o7777,
            0o640
        );
        assert_eq!(
            fs::read(f.p("d/.a.txt.sandgate-tmp")).unwrap(),
            b"someone's file"
        );
        assert_eq!(names(f, "d"), [".a.txt.sandgate-tmp", "a.txt", "new.txt"]);
        let long = "x".repeat(255);
        root.replace_unique(&long, b"long").unwrap();
        assert_eq!(fs::read(f.p(&long)).unwrap(), b"long");
        f.dir("sub");
        assert_eq!(
            root.replace_unique("sub", b"x").unwrap_err().kind(),
            ErrorKind::NotFile
        );
    });
}

#[test]
fn read_dir_max_lists_at_most_max_and_says_whether_more_remain() {
    each(|f, root| {
        f.dir("d").dir("empty");
        for i in 0..5 {
            f.file(&format!("d/f{i}"), "x");
        }
        let all: Vec<_> = root.read_dir("d").unwrap();
        assert_eq!(all.len(), 5);
        for (max, more) in [(0, true), (3, true), (4, true), (5, false), (9, false)] {
            let (got, rest) = root.read_dir_max("d", max).unwrap();
            assert_eq!((got.len(), rest), (max.min(5), more), "max {max}");
            assert!(got.iter().all(|e| e.name() != "." && e.name() != ".."));
        }
        assert!(!root.read_dir_max("empty", 0).unwrap().1);
        assert_eq!(
            root.read_dir_max("d/f0", 1).unwrap_err().kind(),
            ErrorKind::NotDir
        );
    });
}

#[test]
fn replace_gives_a_new_inode_and_never_writes_through_a_link() {
    each(|f, root| {
        f.file("target.txt", "target").link("l", "target.txt");
        root.replace("l", b"entry").unwrap();
        assert_eq!(fs::read(f.p("target.txt")).unwrap(), b"target");
        assert!(fs::symlink_metadata(f.p("l")).unwrap().is_file());
    });
}

#[test]
fn replace_in_missing_directory_is_not_found() {
    each(|_, root| {
        assert_eq!(
            root.replace("nope/a.txt", b"x").unwrap_err().kind(),
            ErrorKind::NotFound
        );
    });
}

#[test]
fn create_new_is_exclusive() {
    each(|f, root| {
        let mut file = root.create_new("n.txt").unwrap();
        file.write_all(b"hello").unwrap();
        drop(file);
        assert_eq!(fs::read(f.p("n.txt")).unwrap(), b"hello");
        let e = root.create_new("n.txt").unwrap_err();
        assert_eq!(
            (e.kind(), e.code(), e.errno()),
            (ErrorKind::Exists, ErrorCode::Exists, Some(libc::EEXIST))
        );
        assert_eq!(e.path(), "n.txt");
    });
}

#[test]
fn open_with_create_truncate_append() {
    each(|f, root| {
        let mut o = OpenOptions::new();
        o.write(true).create(true);
        root.open_with("c.txt", &o)
            .unwrap()
            .write_all(b"abc")
            .unwrap();
        root.open_with("c.txt", OpenOptions::new().append(true))
            .unwrap()
            .write_all(b"def")
            .unwrap();
        assert_eq!(fs::read(f.p("c.txt")).unwrap(), b"abcdef");
        root.open_with("c.txt", OpenOptions::new().write(true).truncate(true))
            .unwrap()
            .write_all(b"z")
            .unwrap();
        assert_eq!(fs::read(f.p("c.txt")).unwrap(), b"z");
        let mut s = String::new();
        root.open_with("c.txt", OpenOptions::new().read(true))
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "z");
        f.link("lc", "c.txt");
        let e = root
            .open_with("lc", OpenOptions::new().read(true).follow(false))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Symlink);
    });
}

#[test]
fn read_refuses_directories_and_fifos_without_hanging() {
    each(|f, root| {
        f.dir("d");
        assert_eq!(root.read("d").unwrap_err().kind(), ErrorKind::NotFile);
        fifo(f, "fifo");
        assert_eq!(root.read("fifo").unwrap_err().kind(), ErrorKind::NotFile);
        assert_eq!(root.stat("fifo").unwrap().kind(), FileKind::Other);
    });
}

#[test]
fn open_file_nofollow_reads_files_refuses_links_and_never_waits_on_a_fifo() {
    each(|f, root| {
        f.file("d/a.txt", "inside")
            .link("d/la", "a.txt")
            .link("lo", "..");
        let mut text = String::new();
        root.open_file_nofollow("d/a.txt")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "inside");
        // A final link is refused, even one that stays inside.
        for p in ["d/la", "lo"] {
            assert_eq!(
                root.open_file_nofollow(p).unwrap_err().kind(),
                ErrorKind::Symlink,
                "{p}"
            );
        }
        assert!(root.open_file_nofollow("../x").is_err());
        fifo(f, "fifo");
        // Opened without a writer on the other end, and read without
        // waiting for one.
        let mut fifo = root.open_file_nofollow("fifo").unwrap();
        assert!(fifo.read(&mut [0u8; 8]).map_or(true, |n| n == 0));
    });
}

#[test]
fn mkdir_and_mkdir_all() {
    each(|f, root| {
        root.mkdir("a", 0o755).unwrap();
        assert_eq!(
            root.mkdir("a", 0o755).unwrap_err().kind(),
            ErrorKind::Exists
        );
        assert_eq!(
            root.mkdir("x/y", 0o755).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        root.mkdir_all("a/b/c/d", 0o700).unwrap();
        root.mkdir_all("a/b/c/d", 0o700).unwrap();
        root.mkdir_all("p/../q/r/", 0o755).unwrap();
        assert!(f.p("a/b/c/d").is_dir());
        assert!(f.p("q/r").is_dir());
        assert!(f.p("p").is_dir());
        f.file("file", "x");
        assert_eq!(
            root.mkdir_all("file/sub", 0o755).unwrap_err().kind(),
            ErrorKind::NotDir
        );
        assert_eq!(
            root.mkdir_all("file", 0o755).unwrap_err().kind(),
            ErrorKind::NotDir
        );
    });
}

/// The process's umask, from procfs.
fn mkdir23_umask() -> u32 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
}

/// What `mkdir_all` makes of `.`, `..`, links and files in the path, and
/// the modes it gives, under every resolver: the levels it makes are made
/// one in the other, each found again by its descriptor.
#[test]
fn mkdir23_mkdir_all_components_links_and_modes() {
    each(|f, root| {
        // "." and ".." among the levels made.
        root.mkdir_all("x/./y/../z/", 0o755).unwrap();
        assert!(f.p("x/y").is_dir() && f.p("x/z").is_dir());
        // A ".." above the deepest directory that existed.
        f.dir("e");
        root.mkdir_all("e/n/../../w", 0o755).unwrap();
        assert!(f.p("e/n").is_dir() && f.p("w").is_dir());
        // Down 70 levels, back up all of them, and one more made beside.
        let down: Vec<String> = (1..=70).map(|i| format!("a{i}")).collect();
        let deep = format!("{}/{}z", down.join("/"), "../".repeat(70));
        root.mkdir_all(&deep, 0o755).unwrap();
        assert!(f.p(&down.join("/")).is_dir());
        assert!(f.p("z").is_dir());
        // Through a link to a directory beneath the root.
        f.dir("real").link("ld", "real");
        root.mkdir_all("ld/n/m", 0o755).unwrap();
        assert!(f.p("real/n/m").is_dir());
        assert!(fs::symlink_metadata(f.p("ld")).unwrap().is_symlink());
        // A dangling link is not made through: its target is not created.
        f.link("dl", "nowhere");
        assert_eq!(
            root.mkdir_all("dl/x", 0o755).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        assert!(!f.p("nowhere").exists());
        // A link out, met after levels were made.
        f.link("out", "../outside");
        let e = root.mkdir_all("m/../out/new", 0o755).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Escape, "{e}");
        assert!(!f.outside_path().join("new").exists());
        let e = root.mkdir_all("k/../../outside/new", 0o755).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Escape, "{e}");
        assert!(!f.outside_path().join("new").exists());
        // A file: in the middle, at the end.
        f.file("d/file", "x");
        for p in ["d/file/sub/deeper", "d/file", "d/file/"] {
            let e = root.mkdir_all(p, 0o755).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotDir, "{p}: {e}");
        }
        assert!(f.p("d/file").is_file());
        // An existing directory: nothing to do.
        root.mkdir_all("x/y", 0o755).unwrap();
        root.mkdir_all("x/y/", 0o755).unwrap();
        // Every level made takes the mode, less the umask; one that was
        // there keeps its own.
        let umask = mkdir23_umask();
        f.dir("keep");
        fs::set_permissions(f.p("keep"), fs::Permissions::from_mode(0o755)).unwrap();
        root.mkdir_all("keep/p1/p2/p3", 0o710).unwrap();
        for p in ["keep/p1", "keep/p1/p2", "keep/p1/p2/p3"] {
            let mode = fs::metadata(f.p(p)).unwrap().mode() & 0o7777;
            assert_eq!(mode, 0o710 & !umask, "{p}");
        }
        assert_eq!(fs::metadata(f.p("keep")).unwrap().mode() & 0o7777, 0o755);
    });
}

/// Threads that make the same deep path at once all succeed: a level
/// another made first (EEXIST on a directory) is entered, not an error.
#[test]
fn mkdir23_concurrent_mkdir_all_of_one_path_all_succeed() {
    each(|f, root| {
        let path: String = (0..40)
            .map(|i| format!("c{i}"))
            .collect::<Vec<_>>()
            .join("/");
        for round in 0..20 {
            let p = format!("r{round}/{path}");
            let barrier = std::sync::Barrier::new(4);
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        barrier.wait();
                        root.mkdir_all(&p, 0o755).unwrap();
                    });
                }
            });
            assert!(f.p(&p).is_dir());
        }
    });
}

#[test]
fn remove_file_link_and_empty_dir_only() {
    each(|f, root| {
        f.file("t.txt", "t")
            .link("l", "t.txt")
            .dir("empty")
            .file("full/x", "x");
        root.remove("l").unwrap();
        assert!(f.p("t.txt").exists(), "the link's target must survive");
        root.remove("t.txt").unwrap();
        root.remove("empty/").unwrap();
        assert_eq!(root.remove("full").unwrap_err().kind(), ErrorKind::NotEmpty);
        assert_eq!(root.remove("gone").unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(names(f, "."), ["full"]);
    });
}

#[test]
fn rename_replace_and_no_replace() {
    each(|f, root| {
        f.file("a", "A").file("b", "B").dir("d");
        assert_eq!(
            root.rename("a", "b", RenameMode::NoReplace)
                .unwrap_err()
                .kind(),
            ErrorKind::Exists
        );
        root.rename("a", "b", RenameMode::Replace).unwrap();
        assert_eq!(fs::read(f.p("b")).unwrap(), b"A");
        root.rename("b", "d/moved", RenameMode::NoReplace).unwrap();
        root.rename("d", "e/", RenameMode::NoReplace).unwrap();
        assert_eq!(fs::read(f.p("e/moved")).unwrap(), b"A");
        assert_eq!(
            root.rename("gone", "x", RenameMode::Replace)
                .unwrap_err()
                .kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            root.rename("e/moved/", "y", RenameMode::Replace)
                .unwrap_err()
                .kind(),
            ErrorKind::NotDir
        );
    });
}

#[test]
fn stat_lstat_readlink_link_count() {
    each(|f, root| {
        f.file("f", "12345").link("l", "f");
        fs::hard_link(f.p("f"), f.p("h")).unwrap();
        let m = root.stat("l").unwrap();
        let std_m = fs::metadata(f.p("f")).unwrap();
        assert_eq!(
            (m.kind(), m.len(), m.ino(), m.dev()),
            (FileKind::File, 5, std_m.ino(), std_m.dev())
        );
        assert_eq!(m.mode(), std_m.mode() & 0o7777);
        assert_eq!(root.lstat("l").unwrap().kind(), FileKind::Symlink);
        assert_eq!(root.link_count("f").unwrap(), 2);
        assert_eq!(root.link_count("l").unwrap(), 1);
        assert_eq!(root.readlink("l").unwrap().to_str(), Some("f"));
    });
}

#[test]
fn read_dir_lists_entries_with_kinds() {
    each(|f, root| {
        f.file("d/a", "").dir("d/b").link("d/c", "a");
        let mut got: Vec<(String, FileKind)> = root
            .read_dir("d")
            .unwrap()
            .into_iter()
            .map(|e| (e.name().to_string_lossy().into_owned(), e.kind()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("a".into(), FileKind::File),
                ("b".into(), FileKind::Dir),
                ("c".into(), FileKind::Symlink)
            ]
        );
        assert_eq!(root.read_dir(".").unwrap().len(), 1);
        assert_eq!(root.read_dir("d/a").unwrap_err().kind(), ErrorKind::NotDir);
    });
}

#[test]
fn one_root_from_many_threads() {
    each(|f, root| {
        f.dir("t");
        let root = Arc::new(root.try_clone().unwrap());
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let root = Arc::clone(&root);
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let p = format!("t/{t}-{i}");
                        root.replace(&p, p.as_bytes()).unwrap();
                        assert_eq!(root.read(&p).unwrap(), p.as_bytes());
                        root.remove(&p).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(names(f, "t").is_empty());
    });
}

#[test]
fn errors_convert_to_io_errors() {
    each(|_, root| {
        let e: std::io::Error = root.read("missing").unwrap_err().into();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        let e: std::io::Error = root.read("../x").unwrap_err().into();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    });
}

#[test]
fn write_atomic_no_replace_creates_exclusively_without_a_temporary_name() {
    each(|f, root| {
        f.dir("d").link("d/dangling", "nowhere");
        root.write_atomic("d/new.txt", b"fresh", RenameMode::NoReplace)
            .unwrap();
        assert_eq!(fs::read(f.p("d/new.txt")).unwrap(), b"fresh");
        let e = root
            .write_atomic("d/new.txt", b"again", RenameMode::NoReplace)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Exists);
        let e = root
            .write_atomic("d/dangling", b"x", RenameMode::NoReplace)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Exists);
        assert!(!f.p("d/nowhere").exists());
        assert_eq!(fs::read(f.p("d/new.txt")).unwrap(), b"fresh");
        assert_eq!(names(f, "d"), ["dangling", "new.txt"]);
    });
}

#[test]
fn resolved_path_names_where_links_lead() {
    each(|f, root| {
        f.file("docs/a.md", "a")
            .link("l", "docs")
            .link("docs/self", "../docs");
        assert_eq!(
            root.resolved_path("l/a.md").unwrap().to_str(),
            Some("docs/a.md")
        );
        assert_eq!(
            root.resolved_path("l/self/self").unwrap().to_str(),
            Some("docs")
        );
        assert_eq!(root.resolved_path(".").unwrap().to_str(), Some("."));
        assert_eq!(root.resolved_path("l/../l").unwrap().to_str(), Some("docs"));
        assert_eq!(
            root.resolved_path("l/nope").unwrap_err().kind(),
            ErrorKind::NotFound
        );
    });
}

#[test]
fn open_parent_acts_through_the_checked_directory() {
    each(|f, root| {
        f.file("docs/a.md", "a").link("l", "docs");
        let (dir, name) = root.open_parent(std::path::Path::new("l/b.md")).unwrap();
        assert_eq!(name.to_str(), Some("b.md"));
        assert_eq!(dir.path_within(root).unwrap().to_str(), Some("docs"));
        dir.write_atomic(name, b"b", RenameMode::NoReplace).unwrap();
        assert_eq!(fs::read(f.p("docs/b.md")).unwrap(), b"b");
        let (top, name) = root.open_parent(std::path::Path::new("top.txt")).unwrap();
        assert_eq!(
            (top.path_within(root).unwrap().to_str(), name.to_str()),
            (Some("."), Some("top.txt"))
        );
        assert_eq!(
            root.open_parent(std::path::Path::new("../x"))
                .unwrap_err()
                .kind(),
            ErrorKind::Escape
        );
        // A directory moved out of the root after opening is detected.
        let (moved, _) = root.open_parent(std::path::Path::new("docs/x")).unwrap();
        fs::rename(f.p("docs"), f.outside_path().join("docs")).unwrap();
        assert_eq!(
            moved.path_within(root).unwrap_err().kind(),
            ErrorKind::Escape
        );
    });
}

#[test]
fn remove_file_and_remove_dir_remove_only_their_kind() {
    each(|f, root| {
        f.file("f", "x").dir("d").link("l", "d");
        assert_eq!(
            root.remove_file("d").unwrap_err().kind(),
            ErrorKind::NotFile
        );
        assert_eq!(root.remove_dir("f").unwrap_err().kind(), ErrorKind::NotDir);
        assert_eq!(root.remove_dir("l").unwrap_err().kind(), ErrorKind::NotDir);
        root.remove_file("l").unwrap();
        assert!(f.p("d").is_dir(), "a symlink entry goes, never its target");
        root.remove_file("f").unwrap();
        root.remove_dir("d").unwrap();
        assert!(names(f, ".").is_empty());
    });
}

#[test]
fn read_max_refuses_larger_files_before_reading() {
    each(|f, root| {
        f.file("small", "12345").dir("d");
        assert_eq!(root.read_max("small", 5).unwrap(), b"12345");
        let e = root.read_max("small", 4).unwrap_err();
        assert_eq!(
            (e.kind(), e.code()),
            (ErrorKind::TooLarge, ErrorCode::TooLarge)
        );
        assert_eq!(
            root.read_max("d", 10).unwrap_err().kind(),
            ErrorKind::NotFile
        );
        assert_eq!(root.read("small").unwrap(), b"12345");
    });
}

/// `file/` and `link/` (a link to a file) demand a directory: every
/// operation answers `NotDir`, as POSIX answers ENOTDIR, and nothing changes.
#[test]
fn trailing_slash_on_a_file_is_not_dir_for_every_operation() {
    each(|f, root| {
        f.file("real.txt", "content")
            .link("file_link", "real.txt")
            .dir("d");
        let wrong = std::cell::RefCell::new(Vec::new());
        for p in ["real.txt/", "file_link/", "real.txt//", "d/../real.txt/"] {
            let not_dir = |what: &str, r: Result<(), sandgate_rootfs::Error>| match r {
                Err(e) if (e.kind(), e.code()) == (ErrorKind::NotDir, ErrorCode::NotDir) => {}
                Err(e) => wrong
                    .borrow_mut()
                    .push(format!("{what} {p:?}: {:?} ({e})", e.kind())),
                Ok(()) => wrong.borrow_mut().push(format!("{what} {p:?} succeeded")),
            };
            not_dir("read", root.read(p).map(drop));
            not_dir("read_max", root.read_max(p, 100).map(drop));
            not_dir("open_file", root.open_file(p).map(drop));
            not_dir(
                "open_with(write)",
                root.open_with(p, OpenOptions::new().write(true)).map(drop),
            );
            not_dir(
                "open_with(create)",
                root.open_with(p, OpenOptions::new().write(true).create(true))
                    .map(drop),
            );
            not_dir("create_new", root.create_new(p).map(drop));
            not_dir("stat", root.stat(p).map(drop));
            not_dir("lstat", root.lstat(p).map(drop));
            not_dir("link_count", root.link_count(p).map(drop));
            not_dir("readlink", root.readlink(p).map(drop));
            not_dir("read_dir", root.read_dir(p).map(drop));
            not_dir("open_dir", root.open_dir(p).map(drop));
            not_dir("resolve_path", root.resolve_path(p).map(drop));
            not_dir("resolved_path", root.resolved_path(p).map(drop));
            not_dir(
                "open_parent",
                root.open_parent(std::path::Path::new(p)).map(drop),
            );
            not_dir("mkdir", root.mkdir(p, 0o755));
            not_dir("mkdir_all", root.mkdir_all(p, 0o755));
            not_dir("replace", root.replace(p, b"new"));
            not_dir(
                "write_atomic",
                root.write_atomic(p, b"new", RenameMode::NoReplace),
            );
            not_dir("remove", root.remove(p));
            not_dir("remove_file", root.remove_file(p));
            not_dir("remove_dir", root.remove_dir(p));
            not_dir(
                "rename from",
                root.rename(p, "moved", RenameMode::NoReplace),
            );
            not_dir(
                "rename onto",
                root.rename("real.txt", p, RenameMode::Replace),
            );
        }
        let wrong = wrong.into_inner();
        assert!(
            wrong.is_empty(),
            "under {:?}:\n{}",
            root.resolver(),
            wrong.join("\n")
        );
        assert_eq!(fs::read(f.p("real.txt")).unwrap(), b"content");
        assert_eq!(
            fs::read_link(f.p("file_link")).unwrap(),
            std::path::Path::new("real.txt")
        );
        assert_eq!(names(f, "."), ["d", "file_link", "real.txt"]);
    });
}

/// A trailing slash on a directory, or on a link to one, is an ordinary
/// directory name; `dir/../` is the root itself and never its parent.
#[test]
fn trailing_slash_on_a_directory_and_dotdot_slash_stay_beneath() {
    each(|f, root| {
        f.file("d/inner.txt", "in").link("dir_link", "d");
        assert!(root.stat("d/").unwrap().is_dir());
        assert!(root.stat("dir_link/").unwrap().is_dir());
        assert!(root.lstat("dir_link/").unwrap().is_dir());
        assert_eq!(root.read("d/inner.txt").unwrap(), b"in");
        assert_eq!(
            root.read("d/").unwrap_err().kind(),
            ErrorKind::NotFile,
            "a directory is no file to read"
        );
        let mut listed: Vec<String> = root
            .read_dir("d/../")
            .unwrap()
            .iter()
            .map(|e| e.name().to_string_lossy().into_owned())
            .collect();
        listed.sort();
        assert_eq!(listed, ["d", "dir_link"], "d/../ lists the root itself");
        assert_eq!(
            root.resolved_path("d/../").unwrap(),
            std::path::Path::new(".")
        );
        assert_eq!(
            root.stat("d/../").unwrap().ino(),
            root.stat(".").unwrap().ino()
        );
        for p in ["d/../../", "d/../..", "dir_link/../../", "../"] {
            assert_eq!(
                root.stat(p).unwrap_err().kind(),
                ErrorKind::Escape,
                "{p:?} under {:?}",
                root.resolver()
            );
            assert_eq!(root.read_dir(p).unwrap_err().kind(), ErrorKind::Escape);
        }
        assert_eq!(
            root.mkdir("d/../", 0o755).unwrap_err().kind(),
            ErrorKind::Exists
        );
        assert_eq!(
            root.remove("d/../").unwrap_err().kind(),
            ErrorKind::InvalidPath
        );
        root.mkdir("new/", 0o755).unwrap();
        assert!(f.p("new").is_dir());
        root.rename("new/", "renamed/", RenameMode::NoReplace)
            .unwrap();
        assert!(f.p("renamed").is_dir());
        root.remove("renamed/").unwrap();
        assert!(!f.p("renamed").exists());
        assert_eq!(
            fs::read(f.outside_path().join("secret")).unwrap(),
            b"OUTSIDE-SECRET"
        );
    });
}

/// `open_child_dir` opens one real directory entry and never follows a link,
/// so a walk built on it stays inside the subtree it started in.
#[test]
fn open_child_dir_opens_only_real_directory_entries() {
    each(|f, root| {
        f.file("d/inner.txt", "in")
            .dir("d/sub")
            .link("dir_link", "d")
            .link("d/out", "../../outside/dir")
            .file("f", "x");
        let d = root.open_child_dir("d").unwrap();
        let mut listed: Vec<(String, FileKind)> = d
            .read_dir(".")
            .unwrap()
            .iter()
            .map(|e| (e.name().to_string_lossy().into_owned(), e.kind()))
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            [
                ("inner.txt".to_owned(), FileKind::File),
                ("out".to_owned(), FileKind::Symlink),
                ("sub".to_owned(), FileKind::Dir),
            ]
        );
        assert!(d
            .open_child_dir("sub")
            .unwrap()
            .read_dir(".")
            .unwrap()
            .is_empty());
        for (name, kind) in [
            ("dir_link", ErrorKind::NotDir),
            ("f", ErrorKind::NotDir),
            ("missing", ErrorKind::NotFound),
            ("d/sub", ErrorKind::InvalidPath),
            ("..", ErrorKind::InvalidPath),
            (".", ErrorKind::InvalidPath),
            ("", ErrorKind::InvalidPath),
        ] {
            assert_eq!(
                root.open_child_dir(name).unwrap_err().kind(),
                kind,
                "{name:?} under {:?}",
                root.resolver()
            );
        }
        assert_eq!(
            d.open_child_dir("out").unwrap_err().kind(),
            ErrorKind::NotDir
        );
    });
}

/// Set in the child of `opening_a_terminal_never_makes_it_the_controlling_terminal`:
/// the terminal to open.
const TTY_CHILD: &str = "SANDGATE_TEST_TTY_CHILD";

/// Opening a terminal beneath a root never makes it the caller's
/// controlling terminal (`O_NOCTTY`): a host that is a session leader
/// without one (a daemon, a service) would otherwise take on whatever
/// terminal a read names, and with it that terminal's SIGHUP and SIGINT.
/// The reads refuse the terminal as not a regular file, but open it first.
#[test]
fn opening_a_terminal_never_makes_it_the_controlling_terminal() {
    use std::os::unix::ffi::OsStrExt;
    if let Some(tty) = std::env::var_os(TTY_CHILD) {
        // The child: a new session's leader, with no controlling terminal.
        setup();
        let tty = std::path::PathBuf::from(tty);
        let (dir, name) = (tty.parent().unwrap(), tty.file_name().unwrap());
        for resolver in resolvers() {
            let root = Root::open_with_resolver(dir, resolver).unwrap();
            let _ = root.read_max(name, 1024);
            let _ = root.open_file(name);
            let _ = root.open_file_nofollow(name);
            let _ = root.open_with(name, OpenOptions::new().read(true).write(true));
            let _ = root.open_with(name, OpenOptions::new().append(true));
        }
        let stat = fs::read_to_string("/proc/self/stat").unwrap();
        // pid (comm) state ppid pgrp session tty_nr ...
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let tty_nr = after.split(' ').nth(4).unwrap();
        println!("TTY_NR={tty_nr}");
        return;
    }
    // SAFETY: plain libc calls on a descriptor this test owns; ptsname_r
    // writes at most the buffer's length.
    let pts = unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(master >= 0, "{}", std::io::Error::last_os_error());
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut buf = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, buf.as_mut_ptr(), buf.len()), 0);
        // The master stays open (leaked) until the test process ends.
        std::ffi::CStr::from_ptr(buf.as_ptr()).to_owned()
    };
    let pts = std::ffi::OsStr::from_bytes(pts.to_bytes()).to_owned();
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("setsid")
        .arg("-w")
        .arg(&exe)
        .args([
            "--exact",
            "ops::opening_a_terminal_never_makes_it_the_controlling_terminal",
            "--nocapture",
        ])
        .env(TTY_CHILD, &pts)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("setsid runs the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tty_nr = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TTY_NR="))
        .unwrap_or_else(|| panic!("the child did not report: {stdout}"));
    assert_eq!(
        tty_nr, "0",
        "opening {pts:?} beneath a root made it the controlling terminal of a session leader"
    );
}
