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
