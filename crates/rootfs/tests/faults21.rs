//! `Root::replace` on a filesystem without `O_TMPFILE` (NFS, 9p, CIFS, FUSE
//! file systems), where the new content is written to a named temporary
//! file in the target's directory: while it is being written, that file
//! must grant nobody more than the finished file will.
//!
//! The child is this test binary re-executed with `SANDGATE_FAULTS21_CHILD`
//! set to the directory: a seccomp filter makes every `openat` with
//! `O_TMPFILE` fail with `EOPNOTSUPP`, as such a filesystem answers.

use std::fs;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use sandgate_rootfs::Root;

const CHILD: &str = "SANDGATE_FAULTS21_CHILD";
const SIZE: usize = 32 << 20;

/// `openat`'s number and the offset of its third argument (the flags) in
/// `struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }`.
#[cfg(target_arch = "x86_64")]
const NR_OPENAT: u32 = 257;
#[cfg(target_arch = "aarch64")]
const NR_OPENAT: u32 = 56;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
const OFFSET_FLAGS: u32 = 16 + 2 * 8;
/// `__O_TMPFILE`, the bit that tells `O_TMPFILE` from `O_DIRECTORY`.
const O_TMPFILE_BIT: u32 = 0o20000000;

fn no_tmpfile() {
    use libc::{
        BPF_ABS, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W, SECCOMP_RET_ALLOW,
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
        f(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH, 0, 4),
        f(BPF_LD | BPF_W | BPF_ABS, 0, 0, 0),
        f(BPF_JMP | BPF_JEQ | BPF_K, NR_OPENAT, 0, 2),
        f(BPF_LD | BPF_W | BPF_ABS, OFFSET_FLAGS, 0, 0),
        f(BPF_JMP | BPF_JSET | BPF_K, O_TMPFILE_BIT, 1, 0),
        f(BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0),
        f(
            BPF_RET | BPF_K,
            SECCOMP_RET_ERRNO | libc::EOPNOTSUPP as u32,
            0,
            0,
        ),
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

/// In the child only: replaces `secret` (mode 0640) with 32 MiB while a
/// thread watches the directory; prints every sight of a temporary file
/// that granted its group or others anything before holding all the
/// content.
#[test]
fn faults21_child_named_temporary() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let dir = Path::new(&dir);
    no_tmpfile();
    assert_eq!(
        rustix::fs::openat(
            rustix::fs::CWD,
            dir,
            rustix::fs::OFlags::TMPFILE | rustix::fs::OFlags::WRONLY,
            rustix::fs::Mode::from_bits_truncate(0o600),
        )
        .unwrap_err(),
        rustix::io::Errno::OPNOTSUPP
    );
    let root = Root::open(dir).unwrap();
    let data = vec![b'n'; SIZE];
    let stop = AtomicBool::new(false);
    let (seen, wide) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let (mut seen, mut wide) = (0u64, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                for e in fs::read_dir(dir).unwrap().flatten() {
                    let name = e.file_name().into_string().unwrap();
                    if !name.contains("sandgate-tmp") {
                        continue;
                    }
                    let Ok(m) = fs::symlink_metadata(e.path()) else {
                        continue;
                    };
                    seen += 1;
                    if m.mode() & 0o077 != 0 && (m.len() as usize) < SIZE {
                        wide.push(format!("{name}: mode {:o}, {} bytes", m.mode(), m.len()));
                    }
                }
            }
            (seen, wide)
        });
        for _ in 0..4 {
            root.replace("secret", &data).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        watcher.join().unwrap()
    });
    println!("\nSEEN {seen}");
    for w in &wide {
        println!("WIDE {w}");
    }
    println!("NAMED-OK");
}

#[test]
fn faults21_a_named_temporary_file_grants_nothing_while_written() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let secret = dir.join("secret");
    fs::write(&secret, "secret\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o640)).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "faults21_child_named_temporary",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("NAMED-OK"),
        "the child: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SEEN "))
        .unwrap()
        .parse()
        .unwrap();
    let wide: Vec<&str> = stdout.lines().filter(|l| l.starts_with("WIDE")).collect();
    assert!(
        wide.is_empty(),
        "a temporary file granted its group or others access while being written \
         ({} of {seen} sights), first: {}",
        wide.len(),
        wide[0]
    );
    eprintln!("faults21: the watcher saw a temporary file {seen} times");
    assert!(seen > 0, "the watcher never saw the temporary file");
    let m = fs::metadata(&secret).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o640);
    assert_eq!(m.len() as usize, SIZE);
    let names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["secret"]);
}

/// In the child only: without `O_TMPFILE`, replaces `big` with 32 MiB
/// versions until killed.
#[test]
fn faults21_child_named_loop() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    no_tmpfile();
    let root = Root::open(&dir).unwrap();
    println!("\nREADY");
    for k in 0u8.. {
        root.replace("big", &vec![k; SIZE]).unwrap();
    }
}

/// Without `O_TMPFILE`, a writer killed while it writes leaves its named
/// temporary file (`.<name>.sandgate-tmp.<pid>.<n>`, mode 0600, part of
/// the new content), and no later replace removes it: the pid in its name
/// may be another process's by then. The target holds one whole version.
/// This pins what SECURITY.md says of it.
#[test]
fn faults21_a_writer_killed_without_o_tmpfile_leaves_its_named_temporary() {
    use std::io::BufRead;
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = Root::open(dir).unwrap();
    root.replace("big", &vec![b'o'; SIZE]).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "faults21_child_named_loop", "--nocapture"])
        .env(CHILD, dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while line.trim_end() != "READY" {
        line.clear();
        assert_ne!(out.read_line(&mut line).unwrap(), 0, "the child ended");
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    child.kill().unwrap();
    child.wait().unwrap();
    let prefix = format!(".big.sandgate-tmp.{}.", child.id());
    let names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "big")
        .collect();
    assert!(
        names.len() <= 1 && names.iter().all(|n| n.starts_with(&prefix)),
        "left: {names:?}"
    );
    let big = fs::read(dir.join("big")).unwrap();
    assert!(big.len() == SIZE && big.iter().all(|&b| b == big[0]));
    // A later replace leaves the leftover where it is.
    root.replace("big", b"last").unwrap();
    for n in &names {
        let m = fs::metadata(dir.join(n)).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600, "{n}");
    }
    let after = fs::read_dir(dir).unwrap().count();
    assert_eq!(after, 1 + names.len());
    eprintln!("faults21: the kill left {names:?}");
}

/// What a replace keeps of the old file (its group and access ACL) is read
/// from the very entry it saw to be a regular file, opened without read
/// access. Before, the name was opened again for reading: a FIFO swapped
/// in at that name meanwhile was opened, which let a writer blocked on the
/// FIFO go on (a device node would have been opened as well). Here a thread
/// exchanges the target with a FIFO while replaces run, and another counts
/// the times a blocked writer of that FIFO was let through.
#[test]
fn faults21_a_replace_never_opens_what_was_swapped_in_at_its_name() {
    use std::os::unix::ffi::OsStrExt;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    fs::write(dir.join("x"), "old").unwrap();
    let keep = dir.join("keep");
    let c = std::ffi::CString::new(keep.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let fifo_ino = fs::symlink_metadata(&keep).unwrap().ino();
    let root = Root::open(&dir).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let through = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, dir) = (stop.clone(), dir.clone());
        std::thread::spawn(move || {
            let (x, f) = (dir.join("x"), dir.join("f"));
            let cx = std::ffi::CString::new(x.as_os_str().as_bytes()).unwrap();
            let cf = std::ffi::CString::new(f.as_os_str().as_bytes()).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let ino = |p: &Path| fs::symlink_metadata(p).map(|m| m.ino()).ok();
                // A replace over the FIFO took its name: give it one again.
                if ino(&x) != Some(fifo_ino) && ino(&f) != Some(fifo_ino) {
                    let _ = fs::remove_file(&f);
                    fs::hard_link(dir.join("keep"), &f).unwrap();
                }
                // SAFETY: both paths are NUL-terminated and outlive the call.
                unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        cx.as_ptr(),
                        libc::AT_FDCWD,
                        cf.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    );
                }
            }
        })
    };
    let writer = {
        let (stop, through, keep) = (stop.clone(), through.clone(), keep.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Blocks until someone opens the FIFO for reading.
                if fs::OpenOptions::new().write(true).open(&keep).is_ok()
                    && !stop.load(Ordering::Relaxed)
                {
                    through.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let started = std::time::Instant::now();
    let mut replaces = 0;
    while started.elapsed() < std::time::Duration::from_secs(2) {
        // Over a FIFO the replace may fail or replace it; either is fine.
        let _ = root.replace("x", b"new");
        replaces += 1;
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    // Let the writer out of its last open.
    let release = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&keep)
        .unwrap();
    writer.join().unwrap();
    drop(release);
    let n = through.load(Ordering::Relaxed);
    assert_eq!(
        n, 0,
        "in {replaces} replaces, a FIFO swapped in was opened {n} times"
    );
}
