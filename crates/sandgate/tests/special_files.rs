//! Special files inside a root (UNIX sockets, FIFOs, device nodes) at
//! every file tool that opens a name: each is refused as not a regular
//! file (`E_NOT_FILE`), at once, under both resolvers.

use std::fs;
use std::os::unix::net::UnixListener;
use std::path::Path;

use sandgate::{EditOptions, ErrorCode, Resolver, Sandbox, WriteOptions};

fn sandbox(dir: &Path, resolver: Resolver) -> Sandbox {
    Sandbox::builder()
        .read_root(dir)
        .write_root(dir)
        .allow_overwrite(true)
        .resolver(resolver)
        .build()
        .unwrap()
}

/// Every opening tool on `name` answers `E_NOT_FILE` naming it.
fn refused_everywhere(sb: &Sandbox, name: &str) {
    let all = [
        ("read", sb.read(name).map(drop)),
        ("read_lines", sb.read_lines(name, 1, 5).map(drop)),
        ("read_last_lines", sb.read_last_lines(name, 5).map(drop)),
        (
            "edit",
            sb.edit(name, "a", "b", EditOptions::default()).map(drop),
        ),
        (
            "edit_many dry run",
            sb.edit_many(name, &[("a", "b")], true).map(drop),
        ),
        (
            "write",
            sb.write(name, b"x", WriteOptions::default().overwrite(true))
                .map(drop),
        ),
    ];
    for (op, r) in all {
        let e = r.expect_err(op);
        assert_eq!(e.code(), ErrorCode::NotFile, "{op} of {name}: {e}");
        assert_eq!(e.path(), Some(name), "{op} of {name}: {e}");
    }
}

/// A UNIX socket was answered `E_IO` "No such device or address (os error
/// 6)" by a read (the kernel's ENXIO for opening a socket), where every
/// other special file is `E_NOT_FILE`.
#[test]
fn special8_a_unix_socket_is_not_a_regular_file_at_every_tool() {
    for resolver in [Resolver::Auto, Resolver::Walk] {
        let tmp = tempfile::tempdir().unwrap();
        let _l = UnixListener::bind(tmp.path().join("sock")).unwrap();
        let sb = sandbox(tmp.path(), resolver);
        refused_everywhere(&sb, "sock");
        // A grep that walks past it answers the rest.
        fs::write(tmp.path().join("a.txt"), "needle\n").unwrap();
        let m = sb.grep("needle", None, None).unwrap();
        assert_eq!(m.len(), 1, "{resolver:?}");
    }
}

/// A FIFO with a writer attached that never writes, and (as root) a copy
/// of `/dev/zero` and `/dev/urandom` made with `mknod`: refused at once,
/// never read (a read of the device would be unbounded, of the FIFO a
/// wait for ever), and passed over by a grep that walks past them.
#[test]
fn special8_fifos_and_devices_are_refused_at_once_at_every_tool() {
    use std::os::unix::fs::OpenOptionsExt;
    for resolver in [Resolver::Auto, Resolver::Walk] {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        // SAFETY: a NUL-terminated path; mkfifo touches nothing else.
        assert_eq!(unsafe { libc::mkfifo(c(&fifo).as_ptr(), 0o644) }, 0);
        // A writer that holds the FIFO open and never writes.
        let _writer = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let mut names = vec!["fifo"];
        for (name, minor) in [("zero", 5), ("urandom", 9)] {
            let path = c(&tmp.path().join(name));
            // SAFETY: a NUL-terminated path; mknod touches nothing else.
            // Only root may make a device node: elsewhere none is made.
            if unsafe {
                libc::mknod(
                    path.as_ptr(),
                    libc::S_IFCHR | 0o666,
                    libc::makedev(1, minor),
                )
            } == 0
            {
                names.push(name);
            }
        }
        let sb = sandbox(tmp.path(), resolver);
        for name in &names {
            refused_everywhere(&sb, name);
        }
        fs::write(tmp.path().join("a.txt"), "needle\n").unwrap();
        let m = sb.grep("needle", None, None).unwrap();
        assert_eq!(m.len(), 1, "{resolver:?} {names:?}");
    }
}

fn c(p: &Path) -> std::ffi::CString {
    std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
}
