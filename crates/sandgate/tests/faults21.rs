//! The file tools under real faults: a file size limit, a full filesystem,
//! an immutable file, a directory the caller cannot write. Each failed call
//! answers a clear error naming the path and leaves the write root as it
//! was: the old file byte for byte, and no temporary file (dotfiles
//! included).
//!
//! Some cases run in a child process (this test binary re-executed with
//! `SANDGATE_FAULTS21_CHILD` set to the directory to work in): a resource
//! limit or a mount namespace of its own must not reach the other tests.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output};

use sandgate::{EditOptions, ErrorCode, Sandbox, WriteOptions};

const CHILD: &str = "SANDGATE_FAULTS21_CHILD";

fn listing(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn sandbox(w: &Path) -> Sandbox {
    Sandbox::builder()
        .read_root(w)
        .write_root(w)
        .allow_overwrite(true)
        .build()
        .unwrap()
}

fn child(test: &str, dir: &Path, wrap: &[&str]) -> Output {
    let exe = std::env::current_exe().unwrap();
    let (prog, args) = match wrap.split_first() {
        Some((p, rest)) => (p.to_string(), rest.iter().map(|s| s.to_string()).collect()),
        None => (exe.display().to_string(), Vec::new()),
    };
    let mut c = Command::new(prog);
    c.args(args);
    if !wrap.is_empty() {
        c.arg(&exe);
    }
    c.args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD, dir)
        .output()
        .unwrap()
}

/// An error of the OS kind (`E_IO`) with `errno`, naming `path`.
fn assert_io(e: &sandgate::Error, errno: i32, path: &str) {
    assert_eq!(e.code(), ErrorCode::Io, "{e:?}");
    assert_eq!(e.errno(), Some(errno), "{e:?}");
    assert_eq!(e.path(), Some(path), "{e:?}");
}

// ----- a file size limit -----

/// In the child only: under a file size limit of 64 KiB, and with the
/// default disposition of `SIGXFSZ` (which ends the process), a write, an
/// overwrite and an edit past the limit fail with `E_IO` (`EFBIG`); the
/// process lives on and a write within the limit still works.
#[test]
fn faults21_child_fsize() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let dir = Path::new(&dir);
    let limit = rustix::process::Rlimit {
        current: Some(64 << 10),
        maximum: Some(64 << 10),
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit).unwrap();
    let sb = sandbox(dir);
    let big = vec![b'x'; 128 << 10];
    let e = sb
        .write("new.txt", &big, WriteOptions::default())
        .unwrap_err();
    assert_io(&e, libc::EFBIG, "new.txt");
    let e = sb
        .write("old.txt", &big, WriteOptions::default().overwrite(true))
        .unwrap_err();
    assert_io(&e, libc::EFBIG, "old.txt");
    let e = sb
        .edit(
            "old.txt",
            "old",
            &"y".repeat(128 << 10),
            EditOptions::default(),
        )
        .unwrap_err();
    assert_io(&e, libc::EFBIG, "old.txt");
    // Exactly the limit is within it.
    sb.write("small.txt", &vec![b's'; 64 << 10], WriteOptions::default())
        .unwrap();
    println!("FSIZE-OK");
}

#[test]
fn faults21_a_file_size_limit_does_not_kill_the_embedder() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("old.txt"), "old text\n").unwrap();
    let out = child("faults21_child_fsize", dir, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("FSIZE-OK"),
        "the child (signal {:?}): {}\n{stdout}\n{}",
        out.status.signal(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(listing(dir), names(&["old.txt", "small.txt"]));
    assert_eq!(fs::read(dir.join("old.txt")).unwrap(), b"old text\n");
}

// ----- a full filesystem -----

/// Fills the filesystem of `dir` with `dir/filler` until it takes no more.
fn fill_up(dir: &Path) {
    use std::io::Write;
    let mut f = fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![b'f'; 4096];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling: {e}"),
        }
    }
}

/// In the child only, in a mount namespace of its own: a 256 KiB tmpfs
/// mounted on the directory, filled up, then every call that needs room
/// fails with `E_IO` (`ENOSPC`) naming its path, and leaves the old file
/// byte for byte, no temporary file and no directory it made.
#[test]
fn faults21_child_full() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let dir = Path::new(&dir);
    println!("CHILD-STARTED");
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(dir)
        .status()
        .unwrap();
    if !st.success() {
        println!("SKIP: mounting a tmpfs is not permitted here ({st})");
        return;
    }
    let old = "old text\n".repeat(500);
    fs::write(dir.join("old.txt"), &old).unwrap();
    fs::create_dir(dir.join("d")).unwrap();
    fill_up(dir);
    let before = names(&["d", "filler", "old.txt"]);
    assert_eq!(listing(dir), before);

    let sb = sandbox(dir);
    let data = vec![b'n'; 64 << 10];
    let e = sb
        .write("new.txt", &data, WriteOptions::default())
        .unwrap_err();
    assert_io(&e, libc::ENOSPC, "new.txt");
    let e = sb
        .write("a/b/new.txt", &data, WriteOptions::default())
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e:?}");
    assert_eq!(e.errno(), Some(libc::ENOSPC), "{e:?}");
    let e = sb
        .write("old.txt", &data, WriteOptions::default().overwrite(true))
        .unwrap_err();
    assert_io(&e, libc::ENOSPC, "old.txt");
    let e = sb
        .write("d/new.txt", b"small", WriteOptions::default())
        .unwrap_err();
    assert_io(&e, libc::ENOSPC, "d/new.txt");
    let e = sb
        .edit(
            "old.txt",
            "old",
            &"grown ".repeat(20_000),
            EditOptions::default().replace_all(false),
        )
        .unwrap_err();
    assert!(
        e.code() == ErrorCode::EditAmbiguous,
        "the edit is ambiguous before it is written: {e:?}"
    );
    let e = sb
        .edit("old.txt", &old, &old.repeat(4), EditOptions::default())
        .unwrap_err();
    assert_io(&e, libc::ENOSPC, "old.txt");
    assert_eq!(listing(dir), before, "after the failed writes and edits");
    assert_eq!(listing(&dir.join("d")), names(&[]));
    assert_eq!(fs::read_to_string(dir.join("old.txt")).unwrap(), old);

    // Calls that need no data blocks on tmpfs work, and change only their
    // own entry.
    sb.rename("old.txt", "moved.txt").unwrap();
    sb.rename("moved.txt", "old.txt").unwrap();
    assert_eq!(listing(dir), before);
    assert_eq!(fs::read_to_string(dir.join("old.txt")).unwrap(), old);

    // With room again, the same write works: the failures were the room.
    fs::remove_file(dir.join("filler")).unwrap();
    sb.write("old.txt", &data, WriteOptions::default().overwrite(true))
        .unwrap();
    assert_eq!(listing(dir), names(&["d", "old.txt"]));

    // Out of inodes: one left, which the parent a write creates takes; the
    // write then fails, and the directory it made is removed again.
    let ino = dir.join("i");
    fs::create_dir(&ino).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m,nr_inodes=8", "tmpfs"])
        .arg(&ino)
        .status()
        .unwrap();
    assert!(st.success());
    fs::write(ino.join("old"), "old\n").unwrap();
    let mut n = 0;
    while fs::write(ino.join(format!("f{n}")), "").is_ok() {
        n += 1;
    }
    fs::remove_file(ino.join("f0")).unwrap();
    let before = listing(&ino);
    let e = sb
        .write("i/a/new.txt", b"new", WriteOptions::default())
        .unwrap_err();
    assert_eq!(e.errno(), Some(libc::ENOSPC), "{e:?}");
    assert_eq!(listing(&ino), before, "after a write out of inodes");
    fs::write(ino.join("f0"), "").unwrap();
    let e = sb
        .write("i/old", b"new", WriteOptions::default().overwrite(true))
        .unwrap_err();
    assert_io(&e, libc::ENOSPC, "i/old");
    let e = sb.mkdir("i/m").unwrap_err();
    assert_io(&e, libc::ENOSPC, "i/m");
    // One inode free: the first of two directories takes it, the second
    // fails, and the first is removed again.
    fs::remove_file(ino.join("f0")).unwrap();
    let e = sb.mkdir("i/p/q").unwrap_err();
    assert_eq!(e.errno(), Some(libc::ENOSPC), "{e:?}");
    assert_eq!(listing(&ino), before, "after a mkdir out of inodes");
    fs::write(ino.join("f0"), "").unwrap();
    assert_eq!(listing(&ino).len(), before.len() + 1);
    assert_eq!(fs::read(ino.join("old")).unwrap(), b"old\n");
    println!("FULL-OK");
}

#[test]
fn faults21_a_full_filesystem_changes_nothing() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mnt");
    fs::create_dir(&dir).unwrap();
    in_mount_namespace("faults21_child_full", &dir, "FULL-OK");
    // The tmpfs went with the child's namespace.
    assert!(listing(&dir).is_empty());
}

/// Runs the child `test` in a mount namespace of its own (the mounts go
/// with it; as an unprivileged user, in a user namespace of its own too)
/// and checks it printed `ok`; skips, saying why, where none can be had.
fn in_mount_namespace(test: &str, dir: &Path, ok: &str) {
    let wrap: &[&str] = if rustix::process::geteuid().is_root() {
        &["unshare", "-m", "--propagation", "private"]
    } else {
        &["unshare", "-Urm"]
    };
    let out = child(test, dir, wrap);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stdout.contains("CHILD-STARTED") {
        eprintln!("SKIP: no mount namespace here ({}): {stderr}", out.status);
        return;
    }
    if let Some(line) = stdout.lines().find(|l| l.starts_with("SKIP")) {
        eprintln!("{line}");
        return;
    }
    assert!(
        out.status.success() && stdout.contains(ok),
        "the child: {}\n{stdout}\n{stderr}",
        out.status
    );
}

// ----- read-only places -----

/// In the child only, in a mount namespace of its own: `ro`, a read-only
/// bind mount inside the write root, refuses every change with `E_IO`
/// (`EROFS`) naming the path, and nothing in it changes.
#[test]
fn faults21_child_readonly_bind() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let dir = Path::new(&dir);
    println!("CHILD-STARTED");
    let ro = dir.join("ro");
    fs::create_dir_all(ro.join("sub")).unwrap();
    fs::write(ro.join("old.txt"), "old text\n").unwrap();
    for args in [&["--bind"][..], &["-o", "remount,bind,ro"]] {
        let st = Command::new("mount")
            .args(args)
            .arg(&ro)
            .arg(&ro)
            .status()
            .unwrap();
        if !st.success() {
            println!("SKIP: a read-only bind mount is not permitted here ({st})");
            return;
        }
    }
    let before = listing(&ro);
    let sb = sandbox(dir);
    let e = sb
        .write("ro/new.txt", b"new", WriteOptions::default())
        .unwrap_err();
    assert_io(&e, libc::EROFS, "ro/new.txt");
    let e = sb
        .write("ro/a/new.txt", b"new", WriteOptions::default())
        .unwrap_err();
    assert_eq!(e.errno(), Some(libc::EROFS), "{e:?}");
    let e = sb
        .write(
            "ro/old.txt",
            b"new",
            WriteOptions::default().overwrite(true),
        )
        .unwrap_err();
    assert_io(&e, libc::EROFS, "ro/old.txt");
    let e = sb
        .edit("ro/old.txt", "old", "new", EditOptions::default())
        .unwrap_err();
    assert_io(&e, libc::EROFS, "ro/old.txt");
    let e = sb.mkdir("ro/m").unwrap_err();
    assert_io(&e, libc::EROFS, "ro/m");
    let e = sb.rename("ro/old.txt", "ro/moved.txt").unwrap_err();
    assert_eq!(e.errno(), Some(libc::EROFS), "{e:?}");
    let e = sb.delete("ro/old.txt").unwrap_err();
    assert_io(&e, libc::EROFS, "ro/old.txt");
    assert_eq!(listing(&ro), before);
    assert_eq!(fs::read(ro.join("old.txt")).unwrap(), b"old text\n");
    println!("READONLY-OK");
}

#[test]
fn faults21_a_read_only_bind_mount_changes_nothing() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    in_mount_namespace("faults21_child_readonly_bind", tmp.path(), "READONLY-OK");
}

/// Clears the inode flags it set when the test ends, failed or not.
struct Chattr(Vec<std::path::PathBuf>);

impl Drop for Chattr {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = Command::new("chattr").arg("-ia").arg(p).status();
        }
    }
}

/// An immutable or append-only file (and an immutable directory) in the
/// write root: every change is refused with `E_IO` (`EPERM`) naming the
/// path, the file is left byte for byte, and no temporary file remains.
/// Root only (`CAP_LINUX_IMMUTABLE`); skipped otherwise.
#[test]
fn faults21_immutable_and_append_only_files_are_left_as_they_were() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: setting the immutable flag needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::create_dir(dir.join("frozen")).unwrap();
    fs::write(dir.join("frozen/in.txt"), "in\n").unwrap();
    fs::write(dir.join("imm.txt"), "immutable\n").unwrap();
    fs::write(dir.join("app.txt"), "append only\n").unwrap();
    let mut guard = Chattr(Vec::new());
    for (flag, p) in [("+i", "imm.txt"), ("+a", "app.txt"), ("+i", "frozen")] {
        let st = Command::new("chattr").arg(flag).arg(dir.join(p)).status();
        if !st.is_ok_and(|s| s.success()) {
            eprintln!("SKIP: chattr {flag} is not supported here");
            return;
        }
        guard.0.push(dir.join(p));
    }
    let before = listing(dir);
    let sb = sandbox(dir);
    for (p, old) in [
        ("imm.txt", "immutable"),
        ("app.txt", "append only"),
        ("frozen/in.txt", "in"),
    ] {
        let e = sb
            .write(p, b"new", WriteOptions::default().overwrite(true))
            .unwrap_err();
        assert_io(&e, libc::EPERM, p);
        let e = sb.edit(p, old, "new", EditOptions::default()).unwrap_err();
        assert_io(&e, libc::EPERM, p);
    }
    let e = sb
        .write("frozen/new.txt", b"new", WriteOptions::default())
        .unwrap_err();
    assert_io(&e, libc::EPERM, "frozen/new.txt");
    assert_eq!(listing(dir), before);
    assert_eq!(listing(&dir.join("frozen")), names(&["in.txt"]));
    assert_eq!(fs::read(dir.join("imm.txt")).unwrap(), b"immutable\n");
    assert_eq!(fs::read(dir.join("app.txt")).unwrap(), b"append only\n");
    assert_eq!(fs::read(dir.join("frozen/in.txt")).unwrap(), b"in\n");
}

// ----- permissions -----

/// A directory of the write root its user cannot write (mode 0555): a
/// write, overwrite or edit in it fails with `E_IO` (`EACCES`) naming the
/// path, and no temporary file is made there or anywhere else. Root
/// passes every permission check, so this runs unprivileged only.
#[test]
fn faults21_a_directory_its_user_cannot_write_changes_nothing() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if rustix::process::geteuid().is_root() {
        eprintln!("SKIP: root writes a directory of mode 0555 all the same");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let locked = dir.join("locked");
    fs::create_dir(&locked).unwrap();
    fs::write(locked.join("old.txt"), "old text\n").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o555)).unwrap();
    let sb = sandbox(dir);
    let e = sb
        .write("locked/new.txt", b"new", WriteOptions::default())
        .unwrap_err();
    assert_io(&e, libc::EACCES, "locked/new.txt");
    let e = sb
        .write(
            "locked/old.txt",
            b"new",
            WriteOptions::default().overwrite(true),
        )
        .unwrap_err();
    assert_io(&e, libc::EACCES, "locked/old.txt");
    let e = sb
        .edit("locked/old.txt", "old", "new", EditOptions::default())
        .unwrap_err();
    assert_io(&e, libc::EACCES, "locked/old.txt");
    assert_eq!(listing(dir), names(&["locked"]));
    assert_eq!(listing(&locked), names(&["old.txt"]));
    assert_eq!(fs::read(locked.join("old.txt")).unwrap(), b"old text\n");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
}

/// An overwrite keeps the replaced file's permission bits exactly, under
/// any umask (a 0600 secret is not widened to 0644), the sticky bit too,
/// but never setuid or setgid. (A 0400 file is replaced by root only.)
#[test]
fn faults21_an_overwrite_keeps_the_mode_but_not_setuid() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sb = sandbox(dir);
    for (mode, kept) in [
        (0o600, 0o600),
        (0o640, 0o640),
        (0o755, 0o755),
        (0o400, 0o400),
        (0o1644, 0o1644),
        (0o4755, 0o755),
        (0o2755, 0o755),
        (0o6777, 0o777),
    ] {
        let name = format!("f{mode:o}");
        let path = dir.join(&name);
        fs::write(&path, "old\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        let r = sb.write(&name, b"new\n", WriteOptions::default().overwrite(true));
        if mode & 0o200 == 0 && !rustix::process::geteuid().is_root() {
            // A file its owner may not write is not replaced but by root
            // (readonly23).
            assert_io(&r.unwrap_err(), libc::EACCES, &name);
            assert_eq!(fs::read(&path).unwrap(), b"old\n");
            continue;
        }
        r.unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new\n");
        let got = fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(got, kept, "{name}: mode {got:o}");
        sb.edit(&name, "new", "newer", EditOptions::default())
            .unwrap();
        let got = fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(got, kept, "{name} after an edit: mode {got:o}");
    }
    assert!(listing(dir).iter().all(|n| !n.contains("sandgate-tmp")));
}

/// A directory (or anything but a leftover file) at the temporary name of
/// a replace is no leftover of an earlier replace: the overwrite goes
/// through a name of its own and the directory stays as it was.
#[test]
fn faults21_a_directory_at_the_temporary_name_does_not_block_an_overwrite() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("old.txt"), "old text\n").unwrap();
    fs::create_dir(dir.join(".old.txt.sandgate-tmp")).unwrap();
    fs::write(dir.join(".old.txt.sandgate-tmp/keep"), "keep").unwrap();
    let sb = sandbox(dir);
    sb.write("old.txt", b"new\n", WriteOptions::default().overwrite(true))
        .unwrap();
    assert_eq!(fs::read(dir.join("old.txt")).unwrap(), b"new\n");
    sb.edit("old.txt", "new", "newer", EditOptions::default())
        .unwrap();
    assert_eq!(fs::read(dir.join("old.txt")).unwrap(), b"newer\n");
    assert_eq!(listing(dir), names(&[".old.txt.sandgate-tmp", "old.txt"]));
    assert_eq!(
        fs::read(dir.join(".old.txt.sandgate-tmp/keep")).unwrap(),
        b"keep"
    );
}

// ----- access control lists -----

const ACL_ACCESS: &str = "system.posix_acl_access";
const ACL_DEFAULT: &str = "system.posix_acl_default";
/// A user no file here belongs to.
const STRANGER: u32 = 12345;

/// A POSIX ACL in the kernel's extended attribute form: version 2, then
/// (tag, permission, id) for each entry.
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(tag, perm, id) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

fn access_acl(path: &Path) -> Option<Vec<u8>> {
    let mut buf = [0u8; 1024];
    match rustix::fs::getxattr(path, ACL_ACCESS, &mut buf[..]) {
        Ok(n) => Some(buf[..n].to_vec()),
        Err(rustix::io::Errno::NODATA) => None,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// Whether `STRANGER` can read `path` (root only: as that user).
fn stranger_reads(path: &Path) -> bool {
    Command::new("setpriv")
        .args([
            &format!("--reuid={STRANGER}"),
            "--regid=12345",
            "--clear-groups",
            "cat",
        ])
        .arg(path)
        .output()
        .unwrap()
        .status
        .success()
}

/// A directory whose default ACL grants a user everything, holding a file
/// of mode 0640 that user may not read: an overwrite or edit keeps the
/// file's permission bits and grants that user nothing. The new file is
/// created in the directory, where it took the default ACL, whose entry
/// for the user (masked by the group bits) let them read the new content.
/// A file with an access ACL of its own keeps it.
#[test]
fn faults21_an_overwrite_takes_no_access_from_the_directory_default_acl() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    const U: u32 = u32::MAX;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let shared = dir.join("shared");
    fs::create_dir(&shared).unwrap();
    let secret = shared.join("secret");
    fs::write(&secret, "secret\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o640)).unwrap();
    let own = shared.join("own");
    fs::write(&own, "own\n").unwrap();
    let own_acl = acl(&[
        (1, 6, U),
        (2, 4, STRANGER),
        (4, 4, U),
        (0x10, 4, U),
        (0x20, 0, U),
    ]);
    let default = acl(&[
        (1, 7, U),
        (2, 7, STRANGER),
        (4, 5, U),
        (0x10, 7, U),
        (0x20, 0, U),
    ]);
    let set = rustix::fs::setxattr(&own, ACL_ACCESS, &own_acl, rustix::fs::XattrFlags::empty())
        .and_then(|()| {
            rustix::fs::setxattr(
                &shared,
                ACL_DEFAULT,
                &default,
                rustix::fs::XattrFlags::empty(),
            )
        });
    if let Err(e) = set {
        eprintln!("SKIP: no POSIX ACLs here ({e})");
        return;
    }
    assert_eq!(access_acl(&secret), None);
    let root = rustix::process::geteuid().is_root();
    if root {
        assert!(!stranger_reads(&secret), "the stranger reads the old file");
    }
    let sb = sandbox(dir);
    sb.write(
        "shared/secret",
        b"new secret\n",
        WriteOptions::default().overwrite(true),
    )
    .unwrap();
    assert_eq!(
        fs::metadata(&secret).unwrap().permissions().mode() & 0o7777,
        0o640
    );
    if root {
        assert!(
            !stranger_reads(&secret),
            "the stranger reads the new content"
        );
    }
    assert_eq!(
        access_acl(&secret),
        None,
        "the overwritten file gained an ACL"
    );
    sb.edit("shared/secret", "new", "newer", EditOptions::default())
        .unwrap();
    assert_eq!(access_acl(&secret), None, "the edited file gained an ACL");

    sb.write(
        "shared/own",
        b"new own\n",
        WriteOptions::default().overwrite(true),
    )
    .unwrap();
    assert_eq!(
        access_acl(&own),
        Some(own_acl),
        "the file's own ACL was lost"
    );
    assert_eq!(
        fs::metadata(&own).unwrap().permissions().mode() & 0o777,
        0o640
    );
    if root {
        assert!(stranger_reads(&own), "the file's own ACL no longer holds");
    }
    // A new file takes the default ACL, as any file made there does.
    sb.write("shared/new", b"new\n", WriteOptions::default())
        .unwrap();
    assert!(access_acl(&shared.join("new")).is_some());
    assert!(listing(&shared).iter().all(|n| !n.contains("sandgate-tmp")));
}

/// An entry at the temporary name that cannot be removed (immutable here;
/// in a sticky directory, another user's) is no leftover this replace may
/// reclaim: the overwrite goes through a name of its own and leaves it.
/// Root only (the immutable flag); skipped otherwise.
#[test]
fn faults21_an_entry_at_the_temporary_name_that_cannot_be_removed_is_gone_around() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: setting the immutable flag needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("old.txt"), "old text\n").unwrap();
    let temp = dir.join(".old.txt.sandgate-tmp");
    fs::write(&temp, "someone's\n").unwrap();
    let st = Command::new("chattr").arg("+i").arg(&temp).status();
    if !st.is_ok_and(|s| s.success()) {
        eprintln!("SKIP: chattr +i is not supported here");
        return;
    }
    let _guard = Chattr(vec![temp.clone()]);
    let sb = sandbox(dir);
    sb.write("old.txt", b"new\n", WriteOptions::default().overwrite(true))
        .unwrap();
    assert_eq!(fs::read(dir.join("old.txt")).unwrap(), b"new\n");
    assert_eq!(listing(dir), names(&[".old.txt.sandgate-tmp", "old.txt"]));
    assert_eq!(fs::read(&temp).unwrap(), b"someone's\n");
}

/// An overwrite or edit keeps the replaced file's group. The new file is
/// made in the directory, where it takes the caller's group, or the
/// directory's where that is setgid: a file of mode 0640 whose group was
/// chosen to keep others out became readable by the directory's group.
/// Root only (a file of another group than the caller's needs it).
#[test]
fn faults21_an_overwrite_keeps_the_group() {
    use std::os::unix::fs::MetadataExt;
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: a file of a group its user is not in needs root");
        return;
    }
    const DIR_GROUP: u32 = 12347;
    const FILE_GROUP: u32 = 12346;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let shared = dir.join("shared");
    fs::create_dir(&shared).unwrap();
    std::os::unix::fs::chown(&shared, None, Some(DIR_GROUP)).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o2755)).unwrap();
    let secret = shared.join("secret");
    fs::write(&secret, "secret\n").unwrap();
    std::os::unix::fs::chown(&secret, None, Some(FILE_GROUP)).unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o640)).unwrap();
    // A member of the directory's group, not of the file's.
    let member_reads = || {
        Command::new("setpriv")
            .args([
                &format!("--reuid={STRANGER}"),
                &format!("--regid={DIR_GROUP}"),
                "--clear-groups",
                "cat",
            ])
            .arg(&secret)
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(!member_reads(), "the directory's group reads the old file");
    let sb = sandbox(dir);
    sb.write(
        "shared/secret",
        b"new secret\n",
        WriteOptions::default().overwrite(true),
    )
    .unwrap();
    assert!(
        !member_reads(),
        "the directory's group reads the new content"
    );
    assert_eq!(fs::metadata(&secret).unwrap().gid(), FILE_GROUP);
    sb.edit("shared/secret", "new", "newer", EditOptions::default())
        .unwrap();
    assert_eq!(fs::metadata(&secret).unwrap().gid(), FILE_GROUP);
    assert_eq!(fs::metadata(&secret).unwrap().mode() & 0o7777, 0o640);
    // A new file takes the directory's group, as any file made there does.
    sb.write("shared/new", b"new\n", WriteOptions::default())
        .unwrap();
    assert_eq!(fs::metadata(shared.join("new")).unwrap().gid(), DIR_GROUP);
}

/// In the child only, as a user not in the replaced file's group.
#[test]
fn faults21_child_foreign_group() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let sb = sandbox(Path::new(&dir));
    sb.write(
        "secret",
        b"new secret\n",
        WriteOptions::default().overwrite(true),
    )
    .unwrap();
    println!("FOREIGN-OK");
}

/// A file of a group its replacer is not in cannot keep that group: the
/// new file has the replacer's group and grants it nothing (mode 0640
/// becomes 0600), never the old group's access. Root only (to make such a
/// file and run the replace as another user).
#[test]
fn faults21_an_overwrite_by_a_user_outside_the_group_grants_its_group_nothing() {
    use std::os::unix::fs::MetadataExt;
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: a file of a group its user is not in needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    let secret = dir.join("secret");
    fs::write(&secret, "secret\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    std::os::unix::fs::chown(&secret, Some(65534), Some(12346)).unwrap();
    let out = child(
        "faults21_child_foreign_group",
        dir,
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("Permission denied") {
        eprintln!("SKIP: uid 65534 cannot run this test binary here");
        return;
    }
    assert!(
        out.status.success() && stdout.contains("FOREIGN-OK"),
        "the child: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = fs::metadata(&secret).unwrap();
    assert_eq!(fs::read(&secret).unwrap(), b"new secret\n");
    assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    assert_eq!(meta.mode() & 0o7777, 0o600);
}

/// In a user namespace where the replaced file's group has no id (a
/// rootless container), the overwrite still works: the group cannot be
/// named, so the new file grants its group nothing. Root only (to make a
/// file of a group the namespace does not map).
#[test]
fn faults21_an_overwrite_in_a_user_namespace_of_a_file_of_an_unmapped_group() {
    use std::os::unix::fs::MetadataExt;
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: a file of another group than its user's needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let secret = dir.join("secret");
    fs::write(&secret, "secret\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&secret, None, Some(12346)).unwrap();
    let out = child("faults21_child_foreign_group", dir, &["unshare", "-Ur"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.starts_with("unshare:") {
        eprintln!("SKIP: no user namespace here: {stderr}");
        return;
    }
    assert!(
        out.status.success() && stdout.contains("FOREIGN-OK"),
        "the child: {}\n{stdout}\n{stderr}",
        out.status
    );
    let meta = fs::metadata(&secret).unwrap();
    assert_eq!(fs::read(&secret).unwrap(), b"new secret\n");
    assert_eq!(meta.mode() & 0o7777, 0o600);
    assert_ne!(meta.gid(), 12346);
}

/// In a user namespace that does not map the users a file's ACL names, the
/// ACL cannot be set on the new file: the overwrite still works, and the
/// new file's group bits (the ACL's mask) grant nothing, so the users the
/// directory's default ACL names get nothing either. Root only.
#[test]
fn faults21_an_overwrite_in_a_user_namespace_of_a_file_with_an_unmapped_acl() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: running the overwrite in a user namespace of root's needs root");
        return;
    }
    const U: u32 = u32::MAX;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let secret = dir.join("secret");
    fs::write(&secret, "secret\n").unwrap();
    let own = acl(&[
        (1, 6, U),
        (2, 4, 54321),
        (4, 0, U),
        (0x10, 4, U),
        (0x20, 0, U),
    ]);
    let default = acl(&[
        (1, 7, U),
        (2, 7, STRANGER),
        (4, 5, U),
        (0x10, 7, U),
        (0x20, 0, U),
    ]);
    let set = rustix::fs::setxattr(&secret, ACL_ACCESS, &own, rustix::fs::XattrFlags::empty())
        .and_then(|()| {
            rustix::fs::setxattr(dir, ACL_DEFAULT, &default, rustix::fs::XattrFlags::empty())
        });
    if let Err(e) = set {
        eprintln!("SKIP: no POSIX ACLs here ({e})");
        return;
    }
    let out = child("faults21_child_foreign_group", dir, &["unshare", "-Ur"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.starts_with("unshare:") {
        eprintln!("SKIP: no user namespace here: {stderr}");
        return;
    }
    assert!(
        out.status.success() && stdout.contains("FOREIGN-OK"),
        "the child: {}\n{stdout}\n{stderr}",
        out.status
    );
    assert_eq!(fs::read(&secret).unwrap(), b"new secret\n");
    assert_eq!(
        fs::metadata(&secret).unwrap().permissions().mode() & 0o070,
        0
    );
    assert!(
        !stranger_reads(&secret),
        "the default ACL's user reads the new content"
    );
}

/// In the child only: the replace of the file layer itself, which does
/// not need procfs as the sandbox's checks do.
#[test]
fn faults21_child_root_replace() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let root = sandgate_rootfs::Root::open(&dir).unwrap();
    root.replace("secret", b"new secret\n").unwrap();
    println!("FOREIGN-OK");
}

/// Where the replaced file's ACL cannot be read (its user may not read the
/// file and procfs is not mounted), the new file's group bits, which were
/// the ACL's mask, grant nothing: without the ACL they would go to the
/// group, which the ACL gave nothing (`group::---`, mask `rw-`: mode 0060).
/// Root only (a mount namespace without procfs, then uid 65534).
#[test]
fn faults21_an_acl_that_cannot_be_read_is_not_widened_to_the_group() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: hiding procfs from the replace needs root");
        return;
    }
    const U: u32 = u32::MAX;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let secret = dir.join("secret");
    fs::write(&secret, "secret\n").unwrap();
    std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    std::os::unix::fs::chown(&secret, Some(65534), Some(65534)).unwrap();
    let own = acl(&[
        (1, 0, U),
        (2, 6, STRANGER),
        (4, 0, U),
        (0x10, 6, U),
        (0x20, 0, U),
    ]);
    if let Err(e) = rustix::fs::setxattr(&secret, ACL_ACCESS, &own, rustix::fs::XattrFlags::empty())
    {
        eprintln!("SKIP: no POSIX ACLs here ({e})");
        return;
    }
    assert_eq!(
        fs::metadata(&secret).unwrap().permissions().mode() & 0o777,
        0o060
    );
    let script = "mount -t tmpfs none /proc && exec setpriv --reuid=65534 --regid=65534 \
                  --clear-groups \"$0\" \"$@\"";
    let out = child(
        "faults21_child_root_replace",
        dir,
        &[
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("Permission denied") {
        eprintln!("SKIP: uid 65534 cannot run this test binary here: {stderr}");
        return;
    }
    assert!(
        out.status.success() && stdout.contains("FOREIGN-OK"),
        "the child: {}\n{stdout}\n{stderr}",
        out.status
    );
    assert_eq!(fs::read(&secret).unwrap(), b"new secret\n");
    let mode = fs::metadata(&secret).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode & 0o070,
        0,
        "mode {mode:o}: the group gained what the ACL denied it"
    );
}
