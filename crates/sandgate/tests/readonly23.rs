//! A file its owner may not write (`chmod a-w`, 0444: the usual way to say
//! "do not touch") is not replaced by the file tools of a process the
//! kernel would not let open it for writing. A replace is a rename over
//! the target, which needs only the directory's write permission, so
//! before, `write` with overwrite and `edit` replaced such a file where
//! `open(O_WRONLY)` (`echo > f`) answers `EACCES`. The kernel decides, for
//! the sandbox's own credentials: root (`CAP_DAC_OVERRIDE`) may replace a
//! 0444 file as it may write it; an unprivileged owner may not, even where
//! the group or others may (the owner's bits are the ones that apply).
//!
//! `rename` onto an existing file is refused whatever its mode (the
//! destination must not exist); a read-only file is moved as `rename(2)`
//! moves it, by the directory's write permission alone, and `delete`
//! removes it as `rm -f` does.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sandgate::{ErrorCode, Sandbox, WriteOptions};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn sandbox(w: &Path) -> Sandbox {
    Sandbox::builder()
        .read_root(w)
        .write_root(w)
        .allow_overwrite(true)
        .build()
        .unwrap()
}

fn listing(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn file(dir: &Path, name: &str, content: &str, mode: u32) {
    let p = dir.join(name);
    fs::write(&p, content).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The refusal of a file the caller may not write: `E_IO` with `EACCES`,
/// naming the file, saying why.
fn assert_refused(e: &sandgate::Error, path: &str) {
    assert_eq!(e.code(), ErrorCode::Io, "{e:?}");
    assert_eq!(e.errno(), Some(libc::EACCES), "{e:?}");
    assert_eq!(e.path(), Some(path), "{e:?}");
    assert!(e.message().contains("may not write the file"), "{e:?}");
}

/// Write with overwrite of a 0444 file (and of a 0466 one, whose group and
/// others may write but its owner may not): refused for an unprivileged
/// owner, content, mode and directory unchanged, no temporary file left;
/// replaced for root, keeping its mode. A 0644 file is replaced either way.
#[test]
fn readonly23_an_overwrite_of_a_file_its_owner_may_not_write_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    file(w, "ro.txt", "KEEP\n", 0o444);
    file(w, "owner-ro.txt", "KEEP\n", 0o466);
    file(w, "rw.txt", "old\n", 0o644);
    fs::create_dir(w.join("sub")).unwrap();
    file(&w.join("sub"), "deep.txt", "KEEP\n", 0o444);
    let sb = sandbox(w);
    let over = WriteOptions::default().overwrite(true);

    for name in ["ro.txt", "owner-ro.txt", "sub/deep.txt"] {
        let r = sb.write(name, b"REPLACED\n", over);
        if is_root() {
            assert_eq!(r.unwrap(), 9, "{name}");
            assert_eq!(fs::read_to_string(w.join(name)).unwrap(), "REPLACED\n");
        } else {
            assert_refused(&r.unwrap_err(), name);
            assert_eq!(fs::read_to_string(w.join(name)).unwrap(), "KEEP\n");
        }
    }
    assert_eq!(mode(&w.join("ro.txt")), 0o444);
    assert_eq!(mode(&w.join("owner-ro.txt")), 0o466);
    assert_eq!(mode(&w.join("sub/deep.txt")), 0o444);
    assert_eq!(
        listing(w),
        names(&["ro.txt", "owner-ro.txt", "rw.txt", "sub"])
    );
    assert_eq!(listing(&w.join("sub")), names(&["deep.txt"]));

    assert_eq!(sb.write("rw.txt", b"new\n", over).unwrap(), 4);
    assert_eq!(fs::read_to_string(w.join("rw.txt")).unwrap(), "new\n");
    assert_eq!(mode(&w.join("rw.txt")), 0o644);
    // Without overwrite the answer stays E_EXISTS, whatever the mode.
    let e = sb
        .write("ro.txt", b"x", WriteOptions::default())
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Exists, "{e:?}");
    assert_eq!(
        listing(w),
        names(&["ro.txt", "owner-ro.txt", "rw.txt", "sub"])
    );
}

/// Edit (one and many, a dry run included, which checks what a real edit
/// checks) of a 0444 file: refused for an unprivileged owner with nothing
/// written; done for root. A 0644 file is edited either way.
#[test]
fn readonly23_an_edit_of_a_file_its_owner_may_not_write_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    file(w, "ro.txt", "alpha beta\n", 0o444);
    file(w, "rw.txt", "alpha beta\n", 0o644);
    let sb = sandbox(w);

    let dry = sb.edit_many("ro.txt", &[("alpha", "ALPHA")], true);
    let one = sb.edit("ro.txt", "alpha", "ALPHA", Default::default());
    if is_root() {
        assert!(dry.is_ok(), "{dry:?}");
        assert_eq!(one.unwrap(), 1);
        assert_eq!(
            fs::read_to_string(w.join("ro.txt")).unwrap(),
            "ALPHA beta\n"
        );
        let many = sb.edit_many("ro.txt", &[("beta", "BETA")], false);
        assert!(many.is_ok(), "{many:?}");
        assert_eq!(
            fs::read_to_string(w.join("ro.txt")).unwrap(),
            "ALPHA BETA\n"
        );
    } else {
        assert_refused(&dry.unwrap_err(), "ro.txt");
        assert_refused(&one.unwrap_err(), "ro.txt");
        let many = sb.edit_many("ro.txt", &[("beta", "BETA")], false);
        assert_refused(&many.unwrap_err(), "ro.txt");
        assert_eq!(
            fs::read_to_string(w.join("ro.txt")).unwrap(),
            "alpha beta\n"
        );
    }
    assert_eq!(mode(&w.join("ro.txt")), 0o444);
    assert_eq!(
        sb.edit("rw.txt", "alpha", "ALPHA", Default::default())
            .unwrap(),
        1
    );
    assert_eq!(
        fs::read_to_string(w.join("rw.txt")).unwrap(),
        "ALPHA beta\n"
    );
    assert_eq!(listing(w), names(&["ro.txt", "rw.txt"]));
}

/// Rename onto an existing read-only file is `E_EXISTS` as onto any
/// existing file; a read-only file is moved to a free name (as `rename(2)`
/// does: it asks for the directory's write permission only) and deleted
/// (as `rm -f` does), keeping its mode and content.
#[test]
fn readonly23_rename_and_delete_judge_a_read_only_file_as_the_kernel_does() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    file(w, "ro.txt", "KEEP\n", 0o444);
    file(w, "src.txt", "src\n", 0o644);
    let sb = sandbox(w);

    let e = sb.rename("src.txt", "ro.txt").unwrap_err();
    assert_eq!(e.code(), ErrorCode::Exists, "{e:?}");
    assert_eq!(fs::read_to_string(w.join("ro.txt")).unwrap(), "KEEP\n");
    assert_eq!(fs::read_to_string(w.join("src.txt")).unwrap(), "src\n");

    sb.rename("ro.txt", "moved.txt").unwrap();
    assert_eq!(fs::read_to_string(w.join("moved.txt")).unwrap(), "KEEP\n");
    assert_eq!(mode(&w.join("moved.txt")), 0o444);
    sb.delete("moved.txt").unwrap();
    assert_eq!(listing(w), names(&["src.txt"]));
}

/// A file in a directory the caller may not write stays refused as before
/// (the temporary file cannot be made): `E_IO` with `EACCES`, for an
/// unprivileged caller; and a writable file in it too.
#[test]
fn readonly23_a_read_only_directory_still_refuses_for_an_unprivileged_caller() {
    if is_root() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    fs::create_dir(w.join("d")).unwrap();
    file(&w.join("d"), "rw.txt", "old\n", 0o644);
    fs::set_permissions(w.join("d"), fs::Permissions::from_mode(0o555)).unwrap();
    let sb = sandbox(w);
    let e = sb
        .write(
            "d/rw.txt",
            b"new\n",
            WriteOptions::default().overwrite(true),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Io, "{e:?}");
    assert_eq!(e.errno(), Some(libc::EACCES), "{e:?}");
    assert_eq!(fs::read_to_string(w.join("d/rw.txt")).unwrap(), "old\n");
    fs::set_permissions(w.join("d"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(listing(&w.join("d")), names(&["rw.txt"]));
}

// ----- without faccessat2 -----

const CHILD: &str = "SANDGATE_READONLY23_CHILD";
/// `faccessat2`'s number, the same on every architecture.
const NR_FACCESSAT2: u32 = 439;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// A seccomp filter that makes every `faccessat2` fail with `errno`, as a
/// kernel before 5.8 (`ENOSYS`) or a container runtime's filter that does
/// not know the call (`EPERM`, older Docker profiles) answers.
fn no_faccessat2(errno: i32) {
    use libc::{
        BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W, SECCOMP_RET_ALLOW,
        SECCOMP_RET_ERRNO,
    };
    let f = |code: u32, k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let filter = [
        f(BPF_LD | BPF_W | BPF_ABS, 4, 0, 0),
        f(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH, 0, 3),
        f(BPF_LD | BPF_W | BPF_ABS, 0, 0, 0),
        f(BPF_JMP | BPF_JEQ | BPF_K, NR_FACCESSAT2, 0, 1),
        f(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | errno as u32, 0, 0),
        f(BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: integer arguments only; required before an unprivileged
    // process may install a filter.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(r, 0);
    // SAFETY: `prog` points at `filter`, live for the call; the kernel
    // copies the program.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &prog as *const libc::sock_fprog,
        )
    };
    assert_eq!(r, 0, "seccomp: {}", std::io::Error::last_os_error());
}

/// In the child only (`CHILD` is `errno:dir`): with `faccessat2` refused,
/// a 0444 file is still refused to an unprivileged owner (and replaced by
/// root), a 0644 one replaced.
#[test]
fn readonly23_child_no_faccessat2() {
    let Some(arg) = std::env::var_os(CHILD) else {
        return;
    };
    let arg = arg.into_string().unwrap();
    let (errno, dir) = arg.split_once(':').unwrap();
    let w = Path::new(dir);
    no_faccessat2(errno.parse().unwrap());
    let probe = rustix::fs::accessat(
        rustix::fs::CWD,
        w,
        rustix::fs::Access::WRITE_OK,
        rustix::fs::AtFlags::EACCESS | rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    );
    assert!(probe.is_err(), "the filter holds: {probe:?}");
    let sb = sandbox(w);
    let over = WriteOptions::default().overwrite(true);
    let r = sb.write("ro.txt", b"REPLACED\n", over);
    let e = sb.edit("ro2.txt", "KEEP", "EDITED", Default::default());
    if is_root() {
        assert_eq!(r.unwrap(), 9);
        assert_eq!(e.unwrap(), 1);
    } else {
        assert_refused(&r.unwrap_err(), "ro.txt");
        assert_refused(&e.unwrap_err(), "ro2.txt");
    }
    assert_eq!(sb.write("rw.txt", b"new\n", over).unwrap(), 4);
    println!("CHILD-OK");
}

/// Where `faccessat2` is missing (`ENOSYS`) or refused (`EPERM`), opening
/// the file for writing (not truncating it) answers instead: a read-only
/// file stays refused, nothing written, nothing left beside it.
#[test]
fn readonly23_without_faccessat2_a_read_only_file_is_still_refused() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    for errno in [libc::ENOSYS, libc::EPERM] {
        let tmp = tempfile::tempdir().unwrap();
        let w = tmp.path();
        file(w, "ro.txt", "KEEP\n", 0o444);
        file(w, "ro2.txt", "KEEP\n", 0o444);
        file(w, "rw.txt", "old\n", 0o644);
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "readonly23_child_no_faccessat2",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD, format!("{errno}:{}", w.display()))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("CHILD-OK"),
            "errno {errno}: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let (ro, ro2) = match is_root() {
            true => ("REPLACED\n", "EDITED\n"),
            false => ("KEEP\n", "KEEP\n"),
        };
        assert_eq!(fs::read_to_string(w.join("ro.txt")).unwrap(), ro);
        assert_eq!(fs::read_to_string(w.join("ro2.txt")).unwrap(), ro2);
        assert_eq!(fs::read_to_string(w.join("rw.txt")).unwrap(), "new\n");
        assert_eq!(listing(w), names(&["ro.txt", "ro2.txt", "rw.txt"]));
    }
}
