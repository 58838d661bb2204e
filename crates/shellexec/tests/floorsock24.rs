//! An adversarial review of the floor's judged `connect` (no namespaces,
//! Landlock before ABI 9): the executor receives every `connect` by
//! seccomp user notification and performs it itself on a copy of the
//! command's socket, with the address copied once from the command's
//! memory. These attacks build the address by hand (`ctypes`): lengths
//! that cut, overrun or fill the path, names through `/proc` and links,
//! families the socket does not have, ports hidden in an IPv4-mapped
//! IPv6 address, and a descriptor or address changed by another thread
//! while the connect is judged. Each probe runs unconfined first (the
//! control: every listener answers) and then on the judged floor, where
//! nothing may reach a UNIX socket outside the write root or a TCP port
//! not granted, and what lies inside answers as the kernel would.

use std::ffi::OsString;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use sandgate_shellexec::confine::ConfineSpec;
use sandgate_shellexec::confine::{kernel_abi, prepare, prepare_with_abi, ConfineMode, Prepared};
use sandgate_shellexec::exec::{ExecOptions, LocalShellExecutor};

mod floor_support;
use floor_support::{floor_executor, text, PYTHON};

/// The kernel's Landlock ABI, where the probes can run (Landlock and
/// python3 here); `None` with a note otherwise.
fn kernel() -> Option<u32> {
    let Some(kernel) = kernel_abi() else {
        eprintln!("no Landlock here: nothing judges paths; skipped");
        return None;
    };
    if !Path::new(PYTHON).exists() {
        eprintln!("no python3 here: skipped");
        return None;
    }
    Some(kernel)
}

/// `spec` prepared for the floor below Landlock ABI 9 (the kernel's ABI,
/// at most 8), where the executor judges connects; `None`, with a note,
/// where it cannot (no seccomp user notification).
fn judged_floor(spec: &ConfineSpec, kernel: u32) -> Option<Prepared> {
    let prepared = prepare_with_abi(spec, ConfineMode::BestEffort, Some(kernel.min(8))).unwrap();
    let judged = prepared
        .report()
        .seccomp_refuses
        .iter()
        .any(|r| r.starts_with("connect to a UNIX socket by path"));
    if judged {
        Some(prepared)
    } else {
        eprintln!("note: no seccomp user notification here: connects are not judged; skipped");
        None
    }
}

/// Runs `python3 -c script args…` under `prepared`, from `cwd`.
fn python(
    ex: &LocalShellExecutor,
    prepared: &Prepared,
    script: &str,
    args: &[String],
    cwd: &Path,
) -> (String, String) {
    let mut argv: Vec<OsString> = vec!["-c".into(), script.into()];
    argv.extend(args.iter().map(OsString::from));
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    let opts = ExecOptions {
        cwd: Some(OwnedFd::from(fs::File::open(cwd).unwrap())),
        timeout: Some(Duration::from_secs(30)),
        ..ExecOptions::default()
    };
    let r = ex
        .exec_program(Path::new(PYTHON), &argv, &env, prepared, opts)
        .unwrap();
    (text(&r.stdout), text(&r.stderr))
}

/// Answers `reply` to the first bytes of every connection `accept` takes,
/// counting them in `count`, for good, on a thread of its own.
fn answer<S: std::io::Read + std::io::Write + ReadTimeout>(
    mut accept: impl FnMut() -> std::io::Result<S> + Send + 'static,
    reply: &'static str,
) -> Arc<AtomicUsize> {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    thread::spawn(move || {
        while let Ok(mut c) = accept() {
            seen.fetch_add(1, Ordering::SeqCst);
            let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 16];
            let _ = c.read(&mut buf);
            let _ = c.write_all(reply.as_bytes());
        }
    });
    count
}

trait ReadTimeout {
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()>;
}
impl ReadTimeout for std::os::unix::net::UnixStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        std::os::unix::net::UnixStream::set_read_timeout(self, t)
    }
}
impl ReadTimeout for std::net::TcpStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        std::net::TcpStream::set_read_timeout(self, t)
    }
}

fn answer_unix(path: &Path, reply: &'static str) -> Arc<AtomicUsize> {
    let l = std::os::unix::net::UnixListener::bind(path).unwrap();
    answer(move || l.accept().map(|(c, _)| c), reply)
}

fn answer_tcp(reply: &'static str) -> (u16, Arc<AtomicUsize>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (port, answer(move || l.accept().map(|(c, _)| c), reply))
}

/// The probes' common part: `connect(2)` through `ctypes` on an address
/// built by hand, one line per attempt, the reply read or the error's
/// name.
const COMMON: &str = r#"
import ctypes, errno, os, select, socket, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
def name(e):
    return errno.errorcode.get(e, str(e))
def attempt(label, fn):
    try:
        print(label, fn(), flush=True)
    except OSError as e:
        print(label, name(e.errno), flush=True)
def talk(s):
    s.settimeout(5)
    s.sendall(b'ping')
    got = s.recv(64).decode() or 'eof'
    s.settimeout(None)
    return got
def raw(s, addr, length):
    buf = ctypes.create_string_buffer(addr.ljust(128, b'\0'), 128)
    if libc.connect(s.fileno(), buf, length):
        raise OSError(ctypes.get_errno(), '')
def unix_addr(path):
    return struct.pack('=H', socket.AF_UNIX) + path
def inet_addr(port):
    return struct.pack('=H', socket.AF_INET) + struct.pack('!H', port) + bytes([127, 0, 0, 1])
def mapped_addr(port):
    return (struct.pack('=H', socket.AF_INET6) + struct.pack('!H', port) + bytes(4)
            + bytes(10) + b'\xff\xff' + bytes([127, 0, 0, 1]) + bytes(4))
def unix(addr, length):
    s = socket.socket(socket.AF_UNIX)
    raw(s, addr, length)
    return talk(s)
"#;

/// The UNIX attacks: arguments `w o r abstract long_in long_out`.
const UNIX_PROBE: &str = r#"
w, o, r, abstract, long_in, long_out = [a.encode() for a in sys.argv[1:]]
def path(p):
    return unix(unix_addr(p), 2 + len(p) + 1)
# sun_path filled, all 108 bytes, no NUL: the kernel reads them all.
assert len(long_in) == 108 and len(long_out) == 108
attempt('full108-in', lambda: unix(unix_addr(long_in), 110))
attempt('full108-out', lambda: unix(unix_addr(long_out), 110))
# A length shorter than the path: only the bytes it covers name it.
attempt('short-in', lambda: unix(unix_addr(w + b'/in.sock.gone\0'), 2 + len(w + b'/in.sock')))
attempt('short-out', lambda: unix(unix_addr(o + b'/s.sock\0'), 2 + len(o + b'/s')))
# Longer than a sockaddr_un, longer than the storage, unnamed.
attempt('over-sun', lambda: unix(unix_addr(w + b'/in.sock\0'), 111))
attempt('over-storage', lambda: unix(unix_addr(w + b'/in.sock\0'), 129))
attempt('negative', lambda: unix(unix_addr(w + b'/in.sock\0'), -1))
attempt('unnamed', lambda: unix(unix_addr(b''), 2))
attempt('abstract', lambda: unix(unix_addr(b'\0' + abstract), 3 + len(abstract)))
# Relative to the command's working directory (not the executor's).
os.chdir(w)
attempt('rel-in', lambda: path(b'in.sock'))
attempt('rel-dotdot', lambda: path(b'../o/s.sock'))
os.chdir(o)
attempt('rel-out', lambda: path(b's.sock'))
os.chdir(w)
# Through /proc: the caller's working directory and descriptors.
attempt('proc-cwd-in', lambda: path(b'/proc/self/cwd/in.sock'))
attempt('proc-cwd-out', lambda: path(b'/proc/thread-self/cwd/../o/s.sock'))
# The same, spelled with doubled slashes and dot components.
attempt('proc-spelled-in', lambda: path(b'//proc/./self//cwd/in.sock'))
attempt('proc-spelled-out', lambda: path(b'/./proc//thread-self/cwd/../o/s.sock'))
sub = os.open(w + b'/sub', os.O_PATH)
attempt('fd-dotdot-in', lambda: path(b'/proc/self/fd/%d/../in.sock' % sub))
attempt('fd-dotdot-out', lambda: path(b'/proc/self/fd/%d/../../o/s.sock' % sub))
attempt('pid-cwd-out', lambda: path(b'/proc/%d/cwd/../o/s.sock' % os.getpid()))
# Links out of the write root, a read root.
attempt('dirlink-out', lambda: path(w + b'/olink/s.sock'))
attempt('read-root', lambda: path(r + b'/r.sock'))
"#;

/// On the floor a command builds its UNIX address by hand: a `sun_path`
/// of 108 bytes with no NUL, a length that cuts the path short (so that
/// what it covers is another name), lengths past a `sockaddr_un`, past
/// the storage and negative, an unnamed address, an abstract name, paths
/// relative to its working directory (which is not the executor's), and
/// through `/proc/self/cwd`, `/proc/thread-self/cwd`, `/proc/<pid>/cwd`,
/// `/proc/self/fd/N/..`, a linked directory and a read root. Unconfined
/// each socket named answers (or the kernel refuses the address); on the
/// judged floor the same names inside the write root answer alike, the
/// kernel's refusals are the same, and every socket outside is refused.
#[test]
fn floorsock24_hand_built_unix_addresses_reach_only_the_write_root() {
    let Some(kernel) = kernel() else { return };
    let base = tempfile::tempdir().unwrap();
    let base_path = fs::canonicalize(base.path()).unwrap();
    let (w, o, r) = (
        base_path.join("w"),
        base_path.join("o"),
        base_path.join("r"),
    );
    for d in [&w, &o, &r, &w.join("sub")] {
        fs::create_dir(d).unwrap();
    }
    let outside = [
        answer_unix(&o.join("s.sock"), "pong-out"),
        answer_unix(&o.join("s"), "pong-short"),
        answer_unix(&r.join("r.sock"), "pong-read"),
    ];
    answer_unix(&w.join("in.sock"), "pong-in");
    std::os::unix::fs::symlink(&o, w.join("olink")).unwrap();
    // Sockets whose absolute path is exactly 108 bytes: bound at a short
    // name, then renamed (the binding follows the inode).
    let long = |dir: &Path, reply: &'static str| {
        let fill = 108 - dir.as_os_str().len() - 1;
        let path = dir.join("L".repeat(fill));
        let short = dir.join("l.sock");
        let count = answer_unix(&short, reply);
        fs::rename(&short, &path).unwrap();
        assert_eq!(path.as_os_str().len(), 108);
        (path, count)
    };
    let (long_in, _) = long(&w, "pong-long-in");
    let (long_out, long_count) = long(&o, "pong-long-out");
    let abstract_name = format!("sandgate-floorsock24-{}", std::process::id());
    let abstract_count = {
        use std::os::linux::net::SocketAddrExt;
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        let l = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        answer(move || l.accept().map(|(c, _)| c), "pong-abstract")
    };
    let spec = ConfineSpec {
        read_dirs: vec![r.clone()],
        write_dirs: vec![w.clone()],
        ..ConfineSpec::default()
    };
    let args: Vec<String> = [&w, &o, &r]
        .iter()
        .map(|p| p.display().to_string())
        .chain([
            abstract_name.clone(),
            long_in.display().to_string(),
            long_out.display().to_string(),
        ])
        .collect();
    let script = format!("{COMMON}{UNIX_PROBE}");
    let ex = floor_executor(Duration::from_secs(30));

    // Unconfined: every socket named answers.
    let off = prepare(&spec, ConfineMode::Off).unwrap();
    let (got, err) = python(&ex, &off, &script, &args, &w);
    let expect = |outside: [&str; 10]| {
        format!(
            "full108-in pong-long-in\nfull108-out {}\nshort-in pong-in\nshort-out {}\n\
             over-sun EINVAL\nover-storage EINVAL\nnegative EINVAL\nunnamed EINVAL\n\
             abstract {}\nrel-in pong-in\nrel-dotdot {}\nrel-out {}\nproc-cwd-in pong-in\n\
             proc-cwd-out {}\nproc-spelled-in pong-in\nproc-spelled-out {}\nfd-dotdot-in pong-in\nfd-dotdot-out {}\npid-cwd-out {}\n\
             dirlink-out {}\nread-root pong-read\n",
            outside[0],
            outside[1],
            outside[2],
            outside[3],
            outside[4],
            outside[5],
            outside[6],
            outside[7],
            outside[8],
            outside[9],
        )
    };
    assert_eq!(
        got,
        expect([
            "pong-long-out",
            "pong-short",
            "pong-abstract",
            "pong-out",
            "pong-out",
            "pong-out",
            "pong-out",
            "pong-out",
            "pong-out",
            "pong-out",
        ]),
        "unconfined: {err}"
    );
    let before: Vec<usize> = outside
        .iter()
        .chain([&long_count, &abstract_count])
        .map(|c| c.load(Ordering::SeqCst))
        .collect();

    // On the judged floor: the same names inside answer alike, every one
    // outside is refused, and no listener outside sees a connection.
    let Some(prepared) = judged_floor(&spec, kernel) else {
        return;
    };
    let (got, err) = python(&ex, &prepared, &script, &args, &w);
    let mut want = expect([
        "EACCES", "EACCES", "EPERM", "EACCES", "EACCES", "EACCES", "EACCES", "EACCES", "EACCES",
        "EACCES",
    ]);
    want = want.replace("read-root pong-read", "read-root EACCES");
    assert_eq!(got, want, "on the floor: {err}");
    let after: Vec<usize> = outside
        .iter()
        .chain([&long_count, &abstract_count])
        .map(|c| c.load(Ordering::SeqCst))
        .collect();
    assert_eq!(before, after, "a listener outside saw a connection");
}

/// The TCP attacks and the calls the kernel refuses whatever the address:
/// arguments `granted other w`.
const INET_PROBE: &str = r#"
p, q = int(sys.argv[1]), int(sys.argv[2])
w = sys.argv[3].encode()
def tcp(addr, length, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    raw(s, addr, length)
    return talk(s)
attempt('v4-short', lambda: tcp(inet_addr(p), 8))
attempt('v4-storage-granted', lambda: tcp(inet_addr(p), 128))
attempt('v4-storage-other', lambda: tcp(inet_addr(q), 128))
attempt('port0', lambda: tcp(inet_addr(0), 16))
attempt('mapped-granted', lambda: tcp(mapped_addr(p), 28, socket.AF_INET6))
attempt('mapped-other', lambda: tcp(mapped_addr(q), 28, socket.AF_INET6))
attempt('v6-sock-v4-addr', lambda: tcp(inet_addr(q), 28, socket.AF_INET6))
attempt('v4-sock-v6-addr', lambda: tcp(mapped_addr(q), 28))
def unspec():
    s = socket.socket()
    raw(s, inet_addr(p), 16)
    first = talk(s)
    raw(s, struct.pack('=H', socket.AF_UNSPEC), 16)
    try:
        raw(s, inet_addr(q), 16)
        return first + ' ' + talk(s)
    except OSError as e:
        return first + ' ' + name(e.errno)
attempt('unspec-then-other', unspec)
def unix_addr_on_tcp():
    return tcp(unix_addr(w + b'/in.sock\0'), 110)
attempt('unix-addr-on-tcp', unix_addr_on_tcp)
def inet_addr_on_unix():
    return unix(inet_addr(p), 16)
attempt('inet-addr-on-unix', inet_addr_on_unix)
def not_a_socket():
    f = os.open('/dev/null', os.O_RDONLY)
    buf = ctypes.create_string_buffer(inet_addr(p).ljust(128, b'\0'), 128)
    if libc.connect(f, buf, 16):
        raise OSError(ctypes.get_errno(), '')
    return 'connected'
attempt('not-a-socket', not_a_socket)
def bad_fd():
    buf = ctypes.create_string_buffer(inet_addr(p).ljust(128, b'\0'), 128)
    if libc.connect(987, buf, 16):
        raise OSError(ctypes.get_errno(), '')
    return 'connected'
attempt('bad-fd', bad_fd)
def bad_pointer():
    s = socket.socket()
    if libc.connect(s.fileno(), ctypes.c_void_p(8), 16):
        raise OSError(ctypes.get_errno(), '')
    return 'connected'
attempt('bad-pointer', bad_pointer)
def listening():
    l = socket.socket(socket.AF_UNIX)
    l.bind(w + b'/listening-%d.sock' % os.getpid())
    l.listen(1)
    raw(l, unix_addr(w + b'/in.sock\0'), 2 + len(w) + 9)
    return 'connected'
attempt('listening', listening)
def connected_again(port):
    s = socket.socket()
    raw(s, inet_addr(p), 16)
    talk(s)
    raw(s, inet_addr(port), 16)
    return 'connected'
attempt('connected-again-granted', lambda: connected_again(p))
attempt('connected-again-other', lambda: connected_again(q))
def nonblocking(port):
    s = socket.socket()
    s.setblocking(False)
    try:
        raw(s, inet_addr(port), 16)
        first = 'done'
    except OSError as e:
        if e.errno != errno.EINPROGRESS:
            raise
        first = 'EINPROGRESS'
    select.select([], [s], [], 5)
    e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if e:
        raise OSError(e, '')
    s.setblocking(True)
    return first + ' ' + talk(s)
attempt('nonblocking-granted', lambda: nonblocking(p))
attempt('nonblocking-other', lambda: nonblocking(q))
"#;

/// On the floor a command's TCP address is judged by the port it holds
/// however it is spelled: a `sockaddr_in` passed with the whole storage's
/// length, an IPv4-mapped IPv6 address, port 0, a family the socket does
/// not have, a connection dropped with `AF_UNSPEC` and made again to a
/// port not granted, a second connect on a connected socket, and a
/// non-blocking connect (`EINPROGRESS`). A port not granted is refused
/// (`EACCES`) and its listener sees nothing; what the kernel refuses
/// whatever the port (a short length, a descriptor that is not a socket
/// or none, a bad pointer, a listening socket) is refused alike.
#[test]
fn floorsock24_hand_built_tcp_addresses_reach_only_granted_ports() {
    let Some(kernel) = kernel() else { return };
    if kernel < 4 {
        eprintln!("Landlock before ABI 4 here: ports are not judged; skipped");
        return;
    }
    let w = tempfile::tempdir().unwrap();
    let w_path = fs::canonicalize(w.path()).unwrap();
    answer_unix(&w_path.join("in.sock"), "pong-in");
    let (p, _) = answer_tcp("pong-tcp");
    let (q, other) = answer_tcp("pong-other");
    let spec = ConfineSpec {
        write_dirs: vec![w_path.clone()],
        connect_ports: vec![p],
        ..ConfineSpec::default()
    };
    let args = vec![p.to_string(), q.to_string(), w_path.display().to_string()];
    let script = format!("{COMMON}{INET_PROBE}");
    let ex = floor_executor(Duration::from_secs(30));
    let expect = |o: [&str; 8]| {
        format!(
            "v4-short EINVAL\nv4-storage-granted pong-tcp\nv4-storage-other {}\nport0 {}\n\
             mapped-granted pong-tcp\nmapped-other {}\nv6-sock-v4-addr {}\nv4-sock-v6-addr {}\n\
             unspec-then-other pong-tcp {}\nunix-addr-on-tcp EAFNOSUPPORT\n\
             inet-addr-on-unix EINVAL\nnot-a-socket ENOTSOCK\nbad-fd EBADF\n\
             bad-pointer EFAULT\nlistening EINVAL\nconnected-again-granted EISCONN\n\
             connected-again-other {}\nnonblocking-granted EINPROGRESS pong-tcp\n\
             nonblocking-other {}\n",
            o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]
        )
    };
    let off = prepare(&spec, ConfineMode::Off).unwrap();
    let (got, err) = python(&ex, &off, &script, &args, &w_path);
    assert_eq!(
        got,
        expect([
            "pong-other",
            "ECONNREFUSED",
            "pong-other",
            "EAFNOSUPPORT",
            "EAFNOSUPPORT",
            "pong-other",
            "EISCONN",
            "EINPROGRESS pong-other",
        ]),
        "unconfined: {err}"
    );
    let before = other.load(Ordering::SeqCst);
    let Some(prepared) = judged_floor(&spec, kernel) else {
        return;
    };
    let (got, err) = python(&ex, &prepared, &script, &args, &w_path);
    assert_eq!(
        got,
        expect(["EACCES", "EACCES", "EACCES", "EACCES", "EACCES", "EACCES", "EACCES", "EACCES",]),
        "on the floor: {err}"
    );
    assert_eq!(
        other.load(Ordering::SeqCst),
        before,
        "the port not granted saw a connection"
    );
}

/// The race: one thread rewrites the whole address (family, port, path)
/// between a granted TCP port, a port not granted, a UNIX socket inside
/// and one outside; another replaces the descriptor the main thread
/// connects (`dup2` over its number) by a new UNIX stream, TCP, UDP or
/// route netlink socket; the main thread connects through that number,
/// for two seconds. Arguments `granted other inside outside`.
const RACE_PROBE: &str = r#"
sys.setswitchinterval(0.0001)
p, q = int(sys.argv[1]), int(sys.argv[2])
inside, outside = sys.argv[3].encode(), sys.argv[4].encode()
addrs = [inet_addr(p), unix_addr(inside + b'\0'), inet_addr(q), unix_addr(outside + b'\0')]
buf = ctypes.create_string_buffer(128)
stop = False
def flip():
    i = 0
    while not stop:
        ctypes.memmove(buf, addrs[i % 4].ljust(128, b'\0'), 128)
        i += 1
kinds = [(socket.AF_UNIX, socket.SOCK_STREAM, 0), (socket.AF_INET, socket.SOCK_STREAM, 0),
         (socket.AF_INET, socket.SOCK_DGRAM, 0), (socket.AF_NETLINK, socket.SOCK_RAW, 0)]
N = os.open('/dev/null', os.O_RDONLY)
def swap():
    i = 0
    while not stop:
        try:
            s = socket.socket(*kinds[i % 4])
            os.dup2(s.fileno(), N)
            s.close()
        except OSError:
            pass
        i += 1
threads = [threading.Thread(target=flip), threading.Thread(target=swap)]
for t in threads:
    t.start()
made = 0
deadline = time.time() + 2
while time.time() < deadline:
    if libc.connect(N, buf, 110) == 0:
        made += 1
        try:
            os.write(N, b'ping')
        except OSError:
            pass
stop = True
for t in threads:
    t.join()
print('made', made > 0)
"#;

/// A command that rewrites its address and swaps the socket behind the
/// descriptor number while the executor judges its connects (another
/// family, another type, a socket the judgement did not see) never
/// reaches the UNIX socket outside its write root or the TCP port not
/// granted, while its connects inside and to the granted port go
/// through. Unconfined, the same race reaches both listeners outside.
#[test]
fn floorsock24_a_racing_address_or_descriptor_never_connects_outside() {
    let Some(kernel) = kernel() else { return };
    if kernel < 4 {
        eprintln!("Landlock before ABI 4 here: ports are not judged; skipped");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let base_path = fs::canonicalize(base.path()).unwrap();
    let (w, o) = (base_path.join("w"), base_path.join("o"));
    fs::create_dir(&w).unwrap();
    fs::create_dir(&o).unwrap();
    let inside = answer_unix(&w.join("in.sock"), "pong-in");
    let outside = answer_unix(&o.join("s.sock"), "pong-out");
    let (p, granted) = answer_tcp("pong-tcp");
    let (q, other) = answer_tcp("pong-other");
    let spec = ConfineSpec {
        write_dirs: vec![w.clone()],
        connect_ports: vec![p],
        udp: true,
        ..ConfineSpec::default()
    };
    let args = vec![
        p.to_string(),
        q.to_string(),
        w.join("in.sock").display().to_string(),
        o.join("s.sock").display().to_string(),
    ];
    let script = format!("{COMMON}{RACE_PROBE}");
    let ex = floor_executor(Duration::from_secs(30));
    let counts = || [&inside, &outside, &granted, &other].map(|c| c.load(Ordering::SeqCst));

    let off = prepare(&spec, ConfineMode::Off).unwrap();
    let (got, err) = python(&ex, &off, &script, &args, &w);
    assert_eq!(got, "made True\n", "unconfined: {err}");
    // Give the listeners a moment to count what was queued.
    thread::sleep(Duration::from_millis(300));
    let [_, out_off, _, other_off] = counts();
    assert!(
        out_off > 0 && other_off > 0,
        "unconfined the race reached neither listener outside: {:?}",
        counts()
    );

    let Some(prepared) = judged_floor(&spec, kernel) else {
        return;
    };
    let before = counts();
    let (got, err) = python(&ex, &prepared, &script, &args, &w);
    assert_eq!(got, "made True\n", "on the floor: {err}");
    thread::sleep(Duration::from_millis(300));
    let after = counts();
    assert!(
        after[0] > before[0] && after[2] > before[2],
        "nothing inside was reached: {before:?} {after:?}"
    );
    assert_eq!(
        (after[1], after[3]),
        (before[1], before[3]),
        "a listener outside saw a connection"
    );
}
