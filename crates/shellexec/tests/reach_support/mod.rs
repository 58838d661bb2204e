//! Probes shared by the floor's tests (seccomp.rs) and the namespaces'
//! (namespaces.rs): what a command can do to the memory of the process
//! that runs it, and to the metadata of host files.

#![allow(dead_code)]

/// Bytes the executor (the test process) holds in memory; the probes try
/// to read them from the command.
pub static SECRET: [u8; 24] = *b"sandgate-keeper-secret!!";

/// The arguments [`MEMORY_PROBE`] takes before its targets.
pub fn memory_args() -> Vec<String> {
    let secret = std::hint::black_box(&SECRET);
    vec![
        libc::SYS_ptrace.to_string(),
        libc::SYS_pidfd_open.to_string(),
        libc::SYS_pidfd_getfd.to_string(),
        libc::SYS_process_madvise.to_string(),
        (secret.as_ptr() as usize).to_string(),
        String::from_utf8(secret.to_vec()).unwrap(),
    ]
}

/// For each target `pid:attach` (after [`memory_args`]), tries every way
/// to another process's memory and prints one line of `way=answer`:
/// `PTRACE_ATTACH` (only with `attach` 1: it stops the target),
/// `PTRACE_SEIZE`, `process_vm_readv` of the secret's address,
/// `process_vm_writev` there (read-only memory: `EFAULT` when allowed),
/// `/proc/<pid>/mem` opened and read there, opened for writing (never
/// written), `/proc/<pid>/environ`, `/proc/<pid>/oom_score_adj` opened
/// for writing (never written: the kernel gives every process sharing the
/// target's memory the value written, the executor too), and
/// `pidfd_getfd` of its stdin, and `process_madvise` (`MADV_COLD`) of the
/// secret's page. An
/// answer is `read` (the secret came back), `other` (something else came
/// back), `ok`, or the errno name.
pub const MEMORY_PROBE: &str = r#"
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def name(e):
    return errno.errorcode.get(e, str(e))
def call(*args):
    ctypes.set_errno(0)
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    return r, ("ok" if r >= 0 else name(ctypes.get_errno()))
nr_ptrace, nr_pidfd_open, nr_pidfd_getfd, nr_process_madvise, addr = (int(a) for a in sys.argv[1:6])
secret = sys.argv[6].encode()
n = len(secret)
class Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
def got(data):
    return "read" if data == secret else "other"
for spec in sys.argv[7:]:
    pid, attach = (int(x) for x in spec.split(":"))
    out = []
    if attach:
        out.append("attach=" + call(nr_ptrace, 16, pid, 0, 0)[1])
    out.append("seize=" + call(nr_ptrace, 0x4206, pid, 0, 0)[1])
    buf = ctypes.create_string_buffer(n)
    local, remote = Iov(ctypes.cast(buf, ctypes.c_void_p), n), Iov(addr, n)
    for way, f in (("vm_readv", libc.process_vm_readv), ("vm_writev", libc.process_vm_writev)):
        ctypes.set_errno(0)
        r = f(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        e = ctypes.get_errno()
        out.append(way + "=" + ((got(buf.raw) if way == "vm_readv" else "ok") if r >= 0 else name(e)))
    try:
        fd = os.open("/proc/%d/mem" % pid, os.O_RDONLY)
        try:
            out.append("mem=" + got(os.pread(fd, n, addr)))
        except OSError as e:
            out.append("mem=opened:" + name(e.errno))
        os.close(fd)
    except OSError as e:
        out.append("mem=" + name(e.errno))
    try:
        os.close(os.open("/proc/%d/mem" % pid, os.O_RDWR))
        out.append("mem_rw=ok")
    except OSError as e:
        out.append("mem_rw=" + name(e.errno))
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            out.append("environ=" + ("read" if f.read() else "empty"))
    except OSError as e:
        out.append("environ=" + name(e.errno))
    try:
        os.close(os.open("/proc/%d/oom_score_adj" % pid, os.O_WRONLY))
        out.append("oom_adj=ok")
    except OSError as e:
        out.append("oom_adj=" + name(e.errno))
    r, how = call(nr_pidfd_open, pid, 0)
    madvise = how
    if r >= 0:
        r2, how = call(nr_pidfd_getfd, r, 0, 0)
        if r2 >= 0:
            os.close(r2)
        # MADV_COLD of the secret's page: a hint, nothing is lost
        page = Iov(addr & ~4095, 4096)
        ctypes.set_errno(0)
        r3 = libc.syscall(ctypes.c_long(nr_process_madvise), ctypes.c_long(r), ctypes.byref(page),
                          ctypes.c_long(1), ctypes.c_long(20), ctypes.c_long(0))
        madvise = "ok" if r3 >= 0 else name(ctypes.get_errno())
        os.close(r)
    out.append("getfd=" + how)
    out.append("madvise=" + madvise)
    print(" ".join(out), flush=True)
"#;

/// Starts a child (`sleep`) and tries `pidfd_getfd` of its stdin, after
/// the system call numbers of `pidfd_open` and `pidfd_getfd`. Prints
/// `getfd=answer` (`ok` or the errno name).
pub const CHILD_PROBE: &str = r#"
import ctypes, errno, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(*args):
    ctypes.set_errno(0)
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    return r, ("ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
nr_pidfd_open, nr_pidfd_getfd = (int(a) for a in sys.argv[1:3])
child = subprocess.Popen(["sleep", "30"], stdin=subprocess.DEVNULL)
try:
    pidfd, how = call(nr_pidfd_open, child.pid, 0)
    if pidfd < 0:
        print("pidfd_open=" + how, flush=True)
        sys.exit(0)
    fd, getfd = call(nr_pidfd_getfd, pidfd, 0, 0)
    if fd >= 0:
        os.close(fd)
    print("getfd=" + getfd, flush=True)
finally:
    child.kill()
    child.wait()
"#;

/// Every way [`MEMORY_PROBE`] tries, refused: by the filter as `seccomp`,
/// through `/proc` as `proc`, `pidfd_getfd` as `getfd`, `process_madvise`
/// as `madvise` (`attach` only when asked).
pub fn all_refused(attach: bool, seccomp: &str, proc: &str, getfd: &str, madvise: &str) -> String {
    let mut out = Vec::new();
    if attach {
        out.push(format!("attach={seccomp}"));
    }
    out.push(format!("seize={seccomp}"));
    out.push(format!("vm_readv={seccomp}"));
    out.push(format!("vm_writev={seccomp}"));
    out.push(format!("mem={proc}"));
    out.push(format!("mem_rw={proc}"));
    out.push(format!("environ={proc}"));
    out.push(format!("oom_adj={proc}"));
    out.push(format!("getfd={getfd}"));
    out.push(format!("madvise={madvise}"));
    out.join(" ")
}

/// Changes the metadata of the file `argv[1]`: mode 0606, owner 4242:4242
/// (as root only), times 1 s after the epoch, the extended attribute
/// `user.sandgate`. Prints `way=ok` or the errno name for each.
pub const METADATA_PROBE: &str = r#"
import errno, os, sys
path = sys.argv[1]
out = []
def attempt(way, f):
    try:
        f()
        out.append(way + "=ok")
    except OSError as e:
        out.append(way + "=" + errno.errorcode.get(e.errno, str(e.errno)))
attempt("chmod", lambda: os.chmod(path, 0o606))
if os.geteuid() == 0:
    attempt("chown", lambda: os.chown(path, 4242, 4242))
attempt("utime", lambda: os.utime(path, (1, 1)))
attempt("xattr", lambda: os.setxattr(path, "user.sandgate", b"1"))
print(" ".join(out), flush=True)
"#;

/// What [`METADATA_PROBE`] prints when every change answers `answer`.
pub fn metadata_answers(answer: &str) -> String {
    let mut out = vec![format!("chmod={answer}")];
    if rustix::process::geteuid().is_root() {
        out.push(format!("chown={answer}"));
    }
    out.push(format!("utime={answer}"));
    out.push(format!("xattr={answer}"));
    out.join(" ")
}

/// A file's metadata as the probe would change it: mode bits, owner,
/// mtime in seconds, and whether it has `user.sandgate`.
pub fn metadata(path: &std::path::Path) -> (u32, u32, i64, bool) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    let mut buf = [0u8; 8];
    let xattr = rustix::fs::getxattr(path, "user.sandgate", &mut buf).is_ok();
    (m.mode() & 0o7777, m.uid(), m.mtime(), xattr)
}

/// The same file after [`METADATA_PROBE`] changed everything it tried.
pub fn changed(uid: u32) -> (u32, u32, i64, bool) {
    let uid = if rustix::process::geteuid().is_root() {
        4242
    } else {
        uid
    };
    (0o606, uid, 1, true)
}

/// The rest of what a command could do to the process that runs it or to
/// the host user's session (after the system call numbers of `keyctl`,
/// `add_key` and `request_key`): `prctl(PR_SET_MM)` of a field of its own
/// memory map, `personality` (`ADDR_NO_RANDOMIZE | READ_IMPLIES_EXEC`),
/// whether stdin is a terminal, `TIOCSTI` on stdin, opening `/dev/tty`
/// and `/dev/tty0` (for `TIOCSTI` and `TIOCLINUX`), the session keyring's
/// id, a key added to it, a key requested, and the descriptions of the
/// keys `/proc/keys` shows (comma-separated). Prints `way=answer` for
/// each.
pub const SESSION_PROBE: &str = r#"
import ctypes, errno, fcntl, os, sys, termios
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.restype = ctypes.c_int
def name(e):
    return errno.errorcode.get(e, str(e))
nr_keyctl, nr_add_key, nr_request_key = (int(a) for a in sys.argv[1:4])
out = []
def ret(way, r):
    out.append(way + "=" + ("ok" if r >= 0 else name(ctypes.get_errno())))
ctypes.set_errno(0)
# PR_SET_MM, PR_SET_MM_ARG_START
ret("set_mm", libc.prctl(35, 8, ctypes.c_ulong(0x10000), 0, 0))
ctypes.set_errno(0)
ret("personality", libc.personality(ctypes.c_ulong(0x0040000 | 0x0400000)))
out.append("stdin_tty=" + str(os.isatty(0)))
def tty_ioctl(way, fd, req, arg):
    try:
        fcntl.ioctl(fd, req, arg)
        out.append(way + "=ok")
    except OSError as e:
        out.append(way + "=" + name(e.errno))
tty_ioctl("tiocsti_stdin", 0, termios.TIOCSTI, b"x")
for path, way, req, arg in (("/dev/tty", "tiocsti_tty", termios.TIOCSTI, b"x"),
                            ("/dev/tty0", "tioclinux", 0x541C, b"\x07")):
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    except OSError as e:
        out.append(way + "=open:" + name(e.errno))
        continue
    tty_ioctl(way, fd, req, arg)
    os.close(fd)
def call(way, *args):
    ctypes.set_errno(0)
    ret(way, libc.syscall(*args))
# KEYCTL_GET_KEYRING_ID of KEY_SPEC_SESSION_KEYRING, not created
call("keyctl", ctypes.c_long(nr_keyctl), ctypes.c_long(0), ctypes.c_long(-3), ctypes.c_long(0))
call("add_key", ctypes.c_long(nr_add_key), b"user", b"sandgate-probe", b"x", ctypes.c_long(1), ctypes.c_long(-3))
call("request_key", ctypes.c_long(nr_request_key), b"user", b"sandgate-probe", None, ctypes.c_long(0))
try:
    with open("/proc/keys") as f:
        out.append("proc_keys=" + ",".join(l.split()[8].rstrip(":") for l in f))
except OSError as e:
    out.append("proc_keys=" + name(e.errno))
print(" ".join(out), flush=True)
"#;

/// The arguments [`SESSION_PROBE`] takes.
pub fn session_args() -> Vec<String> {
    vec![
        libc::SYS_keyctl.to_string(),
        libc::SYS_add_key.to_string(),
        libc::SYS_request_key.to_string(),
    ]
}

/// A `user` key in the calling user's keyring (`KEY_SPEC_USER_KEYRING`),
/// invalidated when dropped: what a host user keeps there.
pub struct HostKey {
    pub serial: i64,
    pub description: String,
}

impl HostKey {
    /// `None` when the kernel has no keyrings (or refuses one here).
    pub fn add() -> Option<HostKey> {
        let description = format!("sandgate-host-key-{}", std::process::id());
        let desc = std::ffi::CString::new(description.clone()).unwrap();
        let payload = b"host-secret";
        // SAFETY: add_key reads the strings and the payload it is given.
        let serial = unsafe {
            libc::syscall(
                libc::SYS_add_key,
                c"user".as_ptr(),
                desc.as_ptr(),
                payload.as_ptr(),
                payload.len(),
                -4 as libc::c_long,
            )
        };
        (serial > 0).then_some(HostKey {
            serial,
            description,
        })
    }
}

impl Drop for HostKey {
    fn drop(&mut self) {
        // SAFETY: KEYCTL_INVALIDATE (21) of a key this test made.
        unsafe { libc::syscall(libc::SYS_keyctl, 21 as libc::c_long, self.serial) };
    }
}

/// Opens the file named by `argv[1]` for reading, ignores `SIGIO` (which
/// the kernel sends a lease holder when another process opens the file),
/// asks for a write lease (`F_SETLEASE` with `F_WRLCK`), else a read lease
/// (`F_RDLCK`), writes `leased wr`, `leased rd` or `refused <errno>` (the
/// read lease's answer) to `status` in its directory, then holds whatever
/// it got for `argv[2]` seconds.
pub const LEASE_PROBE: &str = r#"
import errno, fcntl, os, signal, sys, time
signal.signal(signal.SIGIO, signal.SIG_IGN)
F_SETLEASE = 1024
def status(text):
    with open("status.tmp", "w") as f:
        f.write(text)
    os.rename("status.tmp", "status")
fd = os.open(sys.argv[1], os.O_RDONLY)
got = None
for kind, name in ((fcntl.F_WRLCK, "wr"), (fcntl.F_RDLCK, "rd")):
    try:
        fcntl.fcntl(fd, F_SETLEASE, kind)
        got = "leased " + name
        break
    except OSError as e:
        got = "refused " + errno.errorcode.get(e.errno, str(e.errno))
status(got)
time.sleep(float(sys.argv[2]))
"#;

/// Runs [`LEASE_PROBE`] in `ex` on `file` (which the command may read)
/// from `work` (its write root), holding for `secs`; once it said what it
/// got, the host opens `file` for reading twice, without blocking
/// (`O_NONBLOCK`: `EWOULDBLOCK` while a lease is held, where the file
/// tools open that way) and blocking (timed). Answers what the command
/// got, the non-blocking open's answer (`ok` or the errno name) and how
/// long the blocking open took.
pub fn lease_probe(
    ex: &sandgate_shellexec::exec::LocalShellExecutor,
    file: &std::path::Path,
    work: &std::path::Path,
    secs: u32,
) -> (String, String, std::time::Duration) {
    use sandgate_shellexec::exec::{ExecOptions, ShellExecutor};
    use std::os::unix::fs::OpenOptionsExt;
    let status = work.join("status");
    let _ = std::fs::remove_file(&status);
    let command = format!(
        "/usr/bin/python3 -c '{}' '{}' {secs}",
        LEASE_PROBE.replace('\'', r"'\''"),
        file.display()
    );
    let cwd = rustix::fs::open(
        work,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let opts = ExecOptions {
        cwd: Some(cwd),
        ..ExecOptions::default()
    };
    std::thread::scope(|s| {
        let run = s.spawn(|| ex.exec(&command, opts).unwrap());
        let mut seen = String::new();
        for _ in 0..1000 {
            if let Ok(text) = std::fs::read_to_string(&status) {
                seen = text;
                break;
            }
            if run.is_finished() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let nonblocking = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(file)
        {
            Ok(_) => "ok".to_owned(),
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => "EWOULDBLOCK".to_owned(),
            Err(e) => e.to_string(),
        };
        let began = std::time::Instant::now();
        let read = std::fs::read_to_string(file);
        let took = began.elapsed();
        assert!(read.is_ok(), "the host's read: {read:?}");
        let r = run.join().unwrap();
        assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
        (seen, nonblocking, took)
    })
}
