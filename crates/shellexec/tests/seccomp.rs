//! The seccomp filter under the executor, with real sockets and system
//! calls: protocols and families Landlock cannot judge, `listen` judged by
//! the executor, and the calls no command needs. Each refusal is checked
//! against a control run without confinement that succeeds (or, for a
//! call no test may let succeed, such as `reboot`, that the kernel
//! answers with another error for the same arguments), so that the
//! refusal can only come from the filter; where the kernel would answer
//! as the filter does, the test says so.
//!
//! Run as root and as an unprivileged user (`cargo xtask test` does both).

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

mod seccomp_support;
use seccomp_support::{capability_checked_calls, NAMED_SYSCALL_PROBE};

use sandgate_shellexec::confine::{self, ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{ExecConfig, ExecOptions, LocalShellExecutor, ShellExecutor};

mod reach_support;

const PYTHON: &str = "/usr/bin/python3";

struct Fixture {
    _dir: tempfile::TempDir,
    work: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    Fixture { _dir: dir, work }
}

fn executor(f: &Fixture, mode: ConfineMode, ports: &[u16], udp: bool) -> LocalShellExecutor {
    let config = ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(20),
        max_output_bytes: 1 << 20,
        confine_mode: mode,
        confine: ConfineSpec {
            write_dirs: vec![f.work.clone()],
            connect_ports: ports.to_vec(),
            udp,
            ..ConfineSpec::default()
        },
        grace: Duration::from_millis(300),
        // The floor's filter: `listen` judged by the executor, TCP by
        // Landlock's ports (tests/namespaces.rs covers the namespaces).
        namespaces: false,
        ..ExecConfig::default()
    };
    let ex = LocalShellExecutor::new(config);
    ex.start().unwrap();
    ex
}

/// What a command prints on stdout, run by a fresh executor in `mode`.
fn stdout_of(f: &Fixture, mode: ConfineMode, probe: &str) -> String {
    let r = executor(f, mode, &[], false)
        .exec(probe, ExecOptions::default())
        .unwrap();
    String::from_utf8_lossy(&r.stdout).into_owned()
}

/// Whether the program a test drives is installed; says so when not.
fn has(test: &str, program: &str) -> bool {
    let there = Path::new(program).exists();
    if !there {
        eprintln!("note: {test} skipped: no {program}");
    }
    there
}

/// Whether the filter is there to test; prints why a test skips.
fn usable(test: &str) -> bool {
    if !Path::new(PYTHON).exists() {
        eprintln!("note: {test} skipped: {PYTHON} not found");
        return false;
    }
    let p = confine::prepare(&ConfineSpec::default(), ConfineMode::BestEffort).unwrap();
    if !p.report().seccomp {
        eprintln!("note: {test} skipped: this kernel has no seccomp filters");
        return false;
    }
    true
}

/// Runs a Python script in the executor; answers its stdout lines.
fn python(ex: &LocalShellExecutor, script: &str, args: &[String]) -> Vec<String> {
    run_python(ex, "", script, args)
}

/// Runs `script` inline (the confined child may not read /tmp) after
/// `prefix` (`exec ` to take over the shell's process), with `args`;
/// answers its stdout lines, asserting it exited 0.
fn run_python(ex: &LocalShellExecutor, prefix: &str, script: &str, args: &[String]) -> Vec<String> {
    let quoted = script.replace('\'', r"'\''");
    let mut command = format!("{prefix}{PYTHON} -c '{quoted}'");
    for a in args {
        command.push(' ');
        command.push_str(a);
    }
    let r = ex.exec(&command, ExecOptions::default()).unwrap();
    assert_eq!(
        r.exit_code,
        0,
        "script failed: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    String::from_utf8(r.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A listener that greets every connection with `banner` (for a while).
fn banner_server(banner: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut s in l.incoming().take(16).flatten() {
            let _ = s.write_all(banner.as_bytes());
        }
    });
    port
}

/// Opens sockets as asked (`family:type:proto[:port]`) and prints `ok`
/// or the errno name for each; with a port, connects to 127.0.0.1:port
/// and prints what it read.
const SOCKET_PROBE: &str = r#"
import errno, socket, sys
for spec in sys.argv[1:]:
    parts = spec.split(":")
    fam, typ, proto = (int(x) for x in parts[:3])
    try:
        s = socket.socket(fam, typ, proto)
        if len(parts) > 3:
            s.settimeout(5)
            s.connect(("127.0.0.1", int(parts[3])))
            print("read:" + s.recv(64).decode())
        else:
            print("ok")
        s.close()
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))
"#;

const AF_INET: i32 = 2;
const AF_INET6: i32 = 10;
const SOCK_STREAM: i32 = 1;
const SOCK_DGRAM: i32 = 2;
const SOCK_RAW: i32 = 3;
const SOCK_SEQPACKET: i32 = 5;
const IPPROTO_TCP: i32 = 6;
const IPPROTO_UDP: i32 = 17;
const IPPROTO_SCTP: i32 = 132;
const IPPROTO_MPTCP: i32 = 262;

fn mptcp_enabled() -> bool {
    fs::read_to_string("/proc/sys/net/mptcp/enabled").is_ok_and(|v| v.trim() == "1")
}

#[test]
fn mptcp_cannot_pass_the_tcp_port_rules() {
    if !usable("mptcp_cannot_pass_the_tcp_port_rules") {
        return;
    }
    let allowed = banner_server("allowed");
    let other = banner_server("other-banner");
    let f = fixture();
    let probe = |ex: &LocalShellExecutor, proto: i32| {
        python(
            ex,
            SOCKET_PROBE,
            &[format!("{AF_INET}:{SOCK_STREAM}:{proto}:{other}")],
        )
    };
    if mptcp_enabled() {
        // The attack works without confinement: MPTCP reaches the other
        // port (falling back to TCP with a plain listener).
        let off = executor(&f, ConfineMode::Off, &[allowed], false);
        assert_eq!(probe(&off, IPPROTO_MPTCP), ["read:other-banner"]);
    } else {
        eprintln!("note: MPTCP is disabled in this kernel: the control run is skipped");
    }
    let ex = executor(&f, ConfineMode::BestEffort, &[allowed], false);
    assert!(ex.start().is_ok());
    assert_eq!(probe(&ex, IPPROTO_MPTCP), ["EPROTONOSUPPORT"]);
    // TCP itself still gets as far as Landlock (where Landlock judges
    // ports, the other port is refused; the allowed one is reached).
    let tcp = python(
        &ex,
        SOCKET_PROBE,
        &[format!("{AF_INET}:{SOCK_STREAM}:{IPPROTO_TCP}:{allowed}")],
    );
    assert_eq!(tcp, ["read:allowed"]);
    if confine::kernel_abi().is_some_and(|a| a >= 4) {
        for proto in [0, IPPROTO_TCP] {
            assert_eq!(probe(&ex, proto), ["EACCES"]);
        }
    }
}

#[test]
fn only_tcp_unix_and_route_netlink_sockets_are_made() {
    if !usable("only_tcp_unix_and_route_netlink_sockets_are_made") {
        return;
    }
    let f = fixture();
    let specs: Vec<String> = [
        (AF_INET, SOCK_STREAM, 0),
        (AF_INET6, SOCK_STREAM, IPPROTO_TCP),
        (AF_INET, SOCK_STREAM | 0o4000, 0), // SOCK_NONBLOCK
        (AF_INET, SOCK_DGRAM, 0),
        (AF_INET6, SOCK_DGRAM, IPPROTO_UDP),
        (AF_INET, SOCK_DGRAM, 1), // ICMP "ping" socket
        (AF_INET, SOCK_STREAM, IPPROTO_SCTP),
        (AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP),
        (AF_INET, SOCK_RAW, 1),
        (17, SOCK_RAW, 0),    // AF_PACKET
        (40, SOCK_STREAM, 0), // AF_VSOCK
        (16, SOCK_RAW, 0),    // AF_NETLINK, NETLINK_ROUTE
        (16, SOCK_RAW, 9),    // AF_NETLINK, NETLINK_AUDIT
        (1, SOCK_STREAM, 0),  // AF_UNIX
    ]
    .iter()
    .map(|(a, b, c)| format!("{a}:{b}:{c}"))
    .collect();
    let no_udp = executor(&f, ConfineMode::BestEffort, &[], false);
    let got = python(&no_udp, SOCKET_PROBE, &specs);
    assert_eq!(
        got,
        [
            "ok",
            "ok",
            "ok",
            "EPROTONOSUPPORT",
            "EPROTONOSUPPORT",
            "EPROTONOSUPPORT",
            "EPROTONOSUPPORT",
            "EPROTONOSUPPORT",
            "EPROTONOSUPPORT",
            "EAFNOSUPPORT",
            "EAFNOSUPPORT",
            "ok",
            "EAFNOSUPPORT",
            "ok",
        ]
    );
    // With network access granted, UDP (protocol 0 or UDP only) is made.
    let udp = executor(&f, ConfineMode::BestEffort, &[443], true);
    let got = python(&udp, SOCKET_PROBE, &specs[3..6]);
    assert_eq!(got, ["ok", "ok", "EPROTONOSUPPORT"]);
    // socketpair: UNIX only.
    let pair = r#"
import socket
for fam in (socket.AF_UNIX, socket.AF_INET):
    try:
        a, b = socket.socketpair(fam, socket.SOCK_STREAM)
        print("ok")
    except OSError as e:
        import errno
        print(errno.errorcode[e.errno])
"#;
    assert_eq!(python(&no_udp, pair, &[]), ["ok", "EAFNOSUPPORT"]);
}

/// Listens on a fresh socket of `family` without binding it (TCP) or on a
/// path in the working directory (UNIX), prints the outcome and the port
/// or path, then accepts one connection and echoes a line to it.
const LISTEN_PROBE: &str = r#"
import errno, os, socket, sys
fam = sys.argv[1]
if fam == "unix":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("sock")
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, int(sys.argv[2]))
try:
    s.listen(5)
except OSError as e:
    print(errno.errorcode[e.errno], flush=True)
    sys.exit(0)
print("listening " + str(s.getsockname()[1] if fam != "unix" else "sock"), flush=True)
s.settimeout(10)
c, _ = s.accept()
c.sendall(b"hello from the command\n")
c.close()
"#;

#[test]
fn listen_without_bind_opens_no_port() {
    if !usable("listen_without_bind_opens_no_port") {
        return;
    }
    let f = fixture();
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    for proto in [0, IPPROTO_TCP] {
        let got = python(&ex, LISTEN_PROBE, &["tcp".into(), proto.to_string()]);
        assert_eq!(got, ["EACCES"], "listen on TCP (protocol {proto})");
    }

    // Control: without confinement the same script opens a port the host
    // reaches.
    let port = control_listen_port(&f);
    assert!(port.is_some(), "the control listener was not reachable");
}

/// Runs the listen probe unconfined in the background and connects to the
/// port it prints: `Some(port)` when the host reached it.
fn control_listen_port(f: &Fixture) -> Option<u16> {
    let off = executor(f, ConfineMode::Off, &[], false);
    let out = f.work.join("port.txt");
    let command = format!(
        "{PYTHON} -c '{}' tcp 0 > port.txt",
        LISTEN_PROBE.replace('\'', r"'\''")
    );
    let cwd = rustix::fs::open(
        &f.work,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let handle = thread::spawn(move || {
        off.exec(
            &command,
            ExecOptions {
                cwd: Some(cwd),
                ..ExecOptions::default()
            },
        )
        .unwrap()
    });
    let mut port = None;
    for _ in 0..200 {
        if let Ok(text) = fs::read_to_string(&out) {
            if let Some(p) = text.strip_prefix("listening ") {
                port = p.trim().parse::<u16>().ok();
                break;
            }
        }
        thread::sleep(Duration::from_millis(25));
    }
    let reached = port.and_then(|p| {
        let mut s = TcpStream::connect(("127.0.0.1", p)).ok()?;
        let mut line = String::new();
        s.read_to_string(&mut line).ok()?;
        (line == "hello from the command\n").then_some(p)
    });
    handle.join().unwrap();
    reached
}

#[test]
fn a_unix_socket_still_listens_and_is_reached() {
    if !usable("a_unix_socket_still_listens_and_is_reached") {
        return;
    }
    let f = fixture();
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let command = format!(
        "{PYTHON} -c '{}' unix > out.txt",
        LISTEN_PROBE.replace('\'', r"'\''")
    );
    let cwd = rustix::fs::open(
        &f.work,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let work = f.work.clone();
    let handle = thread::spawn(move || {
        ex.exec(
            &command,
            ExecOptions {
                cwd: Some(cwd),
                ..ExecOptions::default()
            },
        )
        .unwrap()
    });
    let mut line = String::new();
    for _ in 0..200 {
        if fs::read_to_string(work.join("out.txt")).is_ok_and(|t| t.starts_with("listening")) {
            let mut s = UnixStream::connect(work.join("sock")).unwrap();
            s.read_to_string(&mut line).unwrap();
            break;
        }
        thread::sleep(Duration::from_millis(25));
    }
    let r = handle.join().unwrap();
    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(line, "hello from the command\n");
}

/// Listens from a thread other than the main one: on a UNIX socket
/// (then reached from the main thread) and on a TCP one.
const THREAD_LISTEN_PROBE: &str = r#"
import errno, os, socket, threading
out = []
def work():
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.bind(os.environ["TMPDIR"] + "/thread.sock")
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    for s in (u, t):
        try:
            s.listen(5)
            out.append("listening")
        except OSError as e:
            out.append(errno.errorcode[e.errno])
    out.append(u)
th = threading.Thread(target=work)
th.start()
th.join()
print(out[0], out[1], flush=True)
if out[0] == "listening":
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(os.environ["TMPDIR"] + "/thread.sock")
    a, _ = out[2].accept()
    a.sendall(b"reached")
    print(c.recv(16).decode(), flush=True)
"#;

/// Go's runtime, Java and any threaded server call `listen` from
/// whichever thread runs the code, not the main one. The executor judges
/// the call by the thread that made it: a UNIX socket listens from any
/// thread (before, every thread but the main one got `EACCES`, since a
/// pidfd cannot be opened on a thread id), and TCP stays refused there.
#[test]
fn a_unix_socket_listens_from_any_thread() {
    if !usable("a_unix_socket_listens_from_any_thread") {
        return;
    }
    let f = fixture();
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let got = python(&ex, THREAD_LISTEN_PROBE, &[]);
    assert_eq!(got, ["listening EACCES", "reached"], "listen from a thread");
}

/// Makes raw system calls through ctypes and prints each errno name (or
/// `ok`).
const SYSCALL_PROBE: &str = r#"
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for spec in sys.argv[1:]:
    nums = [int(x, 0) for x in spec.split(",")]
    r = libc.syscall(*[ctypes.c_long(n) for n in nums])
    e = ctypes.get_errno()
    print("ok" if r >= 0 else errno.errorcode.get(e, str(e)), flush=True)
"#;

#[test]
fn calls_no_command_needs_are_refused() {
    if !usable("calls_no_command_needs_are_refused") {
        return;
    }
    let f = fixture();
    let calls = [
        format!("{}", libc::SYS_getpid),             // control
        format!("{},0,0", libc::SYS_io_uring_setup), // io_uring
        format!("{},0,1,0,0", libc::SYS_ptrace),     // PTRACE_TRACEME... (0)
        format!("{},{}", libc::SYS_unshare, libc::CLONE_NEWUSER),
        format!("{},0,0", libc::SYS_setns),
        format!("{},0,0", libc::SYS_clone3),
        format!("{},0,0,0,0", libc::SYS_bpf),
        format!("{},0", libc::SYS_userfaultfd),
        format!("{},0,0,0", libc::SYS_keyctl),
        format!("{},0,0,0,0,0", libc::SYS_mount),
        format!("{},0,0", libc::SYS_fsopen),
        format!("{},0,0,0", libc::SYS_open_tree),
        format!("{},{}", 0x4000_0000 + libc::SYS_getpid, 0), // x32 getpid
        format!(
            "{},{},0,0,0,0",
            libc::SYS_clone,
            libc::CLONE_NEWNET | libc::SIGCHLD
        ),
    ];
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let got = python(&ex, SYSCALL_PROBE, &calls);
    assert_eq!(
        got,
        [
            "ok", "EPERM", "EPERM", "EPERM", "EPERM", "ENOSYS", "EPERM", "EPERM", "EPERM", "EPERM",
            "EPERM", "EPERM", "ENOSYS", "EPERM",
        ]
    );
    // Ordinary work still runs under the filter: threads, forks, pipes.
    let r = ex
        .exec(
            "echo a | tr a b; (sleep 0 &); wait; python3 -c 'import threading; t=threading.Thread(target=print, args=(\"t\",)); t.start(); t.join()'",
            ExecOptions::default(),
        )
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&r.stdout), "b\nt\n");
}

/// `open_tree` and `open_tree_attr` (Linux 6.15) on `/`, as anyone may
/// call them (no clone, no attributes): prints each errno name (or `ok`).
const OPEN_TREE_PROBE: &str = r#"
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for nr, args in ((428, ()), (467, (ctypes.c_void_p(0), ctypes.c_long(0)))):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(-100), ctypes.c_char_p(b"/"), ctypes.c_long(0), *args)
    e = ctypes.get_errno()
    print("ok" if r >= 0 else errno.errorcode.get(e, str(e)), flush=True)
"#;

/// `open_tree_attr` is `open_tree` with `mount_setattr` on the clone: as
/// root on the floor (which keeps `CAP_SYS_ADMIN`) it made detached
/// copies of any mount with their attributes changed while `open_tree`
/// was refused. Refused like the rest of the mount family; the control
/// without the filter shows the kernel has it.
#[test]
fn open_tree_attr_is_refused_like_open_tree() {
    if !usable("open_tree_attr_is_refused_like_open_tree") {
        return;
    }
    let f = fixture();
    let off = executor(&f, ConfineMode::Off, &[], false);
    let control = python(&off, OPEN_TREE_PROBE, &[]);
    if control != ["ok", "ok"] {
        eprintln!("note: open_tree_attr_is_refused_like_open_tree skipped: {control:?} unconfined");
        return;
    }
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let got = python(&ex, OPEN_TREE_PROBE, &[]);
    assert_eq!(got, ["EPERM", "EPERM"], "open_tree, open_tree_attr");
}

/// Calls that change (or, for the kernel log, read) what the whole host
/// shares, each with arguments that change nothing where it is allowed:
/// the host's own names again, `settimeofday(NULL, NULL)`, a read of the
/// clock's adjustment state. Prints each errno name (or `ok`).
const HOST_WIDE_PROBE: &str = r#"
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *args)
    e = ctypes.get_errno()
    print("ok" if r >= 0 else errno.errorcode.get(e, str(e)), flush=True)
host, dom = sys.argv[1].encode(), sys.argv[2].encode()
timex = ctypes.create_string_buffer(512)
ts = (ctypes.c_long * 2)(0, 0)
call(int(sys.argv[3]), ctypes.c_char_p(host), ctypes.c_long(len(host)))
call(int(sys.argv[4]), ctypes.c_char_p(dom), ctypes.c_long(len(dom)))
call(int(sys.argv[5]), ctypes.c_void_p(0), ctypes.c_void_p(0))
call(int(sys.argv[6]), ctypes.c_long(1), ts)
call(int(sys.argv[7]), timex)
call(int(sys.argv[8]), ctypes.c_long(0), timex)
call(int(sys.argv[9]), ctypes.c_long(10), ctypes.c_void_p(0), ctypes.c_long(0))
"#;

/// `file_getattr` and `file_setattr` (Linux 6.17) on the path `argv[1]`:
/// adds the flags `argv[2]` to its `fsx_xflags`; prints each answer's
/// errno name (or `ok`).
const FILE_SETATTR_PROBE: &str = r#"
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class FileAttr(ctypes.Structure):
    _fields_ = [("xflags", ctypes.c_uint64), ("extsize", ctypes.c_uint32),
                ("nextents", ctypes.c_uint32), ("projid", ctypes.c_uint32),
                ("cowextsize", ctypes.c_uint32)]
attr = FileAttr()
path = ctypes.c_char_p(sys.argv[1].encode())
for nr in (468, 469):
    if nr == 469:
        attr.xflags |= int(sys.argv[2], 0)
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(-100), path, ctypes.byref(attr),
                     ctypes.c_long(ctypes.sizeof(attr)), ctypes.c_long(0))
    e = ctypes.get_errno()
    print("ok" if r >= 0 else errno.errorcode.get(e, str(e)), flush=True)
"#;

/// `file_setattr` changes a file's inode flags by path, without the open
/// Landlock judges (`chattr`'s ioctl needs one): a command set flags on a
/// host file outside its roots, and run as root on the floor made one
/// append-only (`FS_XFLAG_APPEND`; immutable works the same), which no
/// process of the host could then rewrite. It answers `ENOSYS`, so that
/// tools fall back to the ioctl on a file they may open; the flag is
/// checked on the file afterwards (`FS_XFLAG_NODUMP`, which its owner may
/// set, so the control works as any user).
#[test]
fn file_setattr_cannot_reach_past_the_roots() {
    if !usable("file_setattr_cannot_reach_past_the_roots") {
        return;
    }
    const NODUMP: u32 = 0x80;
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    let flagged = |name: &str| {
        let file = outside.path().join(name);
        fs::write(&file, "host data").unwrap();
        file
    };
    let nodump = |file: &Path| {
        let out = std::process::Command::new("lsattr").arg(file).output();
        out.ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .and_then(|t| t.split_whitespace().next().map(|a| a.contains('d')))
    };
    let control_file = flagged("control");
    let control = python(
        &executor(&f, ConfineMode::Off, &[], false),
        FILE_SETATTR_PROBE,
        &[control_file.display().to_string(), format!("{NODUMP:#x}")],
    );
    if control != ["ok", "ok"] || nodump(&control_file) != Some(true) {
        eprintln!(
            "note: file_setattr_cannot_reach_past_the_roots skipped: unconfined {control:?} \
             (a kernel before 6.17, or a file system without inode flags)"
        );
        return;
    }
    let file = flagged("confined");
    let confined = python(
        &executor(&f, ConfineMode::BestEffort, &[], false),
        FILE_SETATTR_PROBE,
        &[file.display().to_string(), format!("{NODUMP:#x}")],
    );
    assert_eq!(nodump(&file), Some(false), "the flag was set: {confined:?}");
    assert_eq!(confined, ["ok", "ENOSYS"]);
}

/// Asks fanotify for open permission events on the file named by
/// `argv[1]`, then answers none of them for `argv[2]` seconds; writes
/// `marked` or `refused <errno>` to `status`.
const FANOTIFY_PROBE: &str = r#"
import ctypes, errno, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def status(text):
    with open("status.tmp", "w") as f:
        f.write(text)
    os.rename("status.tmp", "status")
# FAN_CLASS_CONTENT | FAN_CLOEXEC (root), else FAN_CLASS_NOTIF | FAN_REPORT_FID
flags = 0x5 if os.geteuid() == 0 else 0x201
fd = libc.fanotify_init(flags, os.O_RDONLY)
if fd < 0:
    status("refused " + errno.errorcode[ctypes.get_errno()])
    sys.exit(0)
# FAN_MARK_ADD, FAN_OPEN_PERM (root) or FAN_OPEN
mask = 0x10000 if os.geteuid() == 0 else 0x20
r = libc.fanotify_mark(fd, 1, ctypes.c_uint64(mask), -100, sys.argv[1].encode())
status("marked" if r == 0 else "mark refused " + errno.errorcode[ctypes.get_errno()])
time.sleep(float(sys.argv[2]))
"#;

/// fanotify judges no Landlock rule: a command run as root on the floor
/// marked a host file outside its roots (or, with a filesystem mark, every
/// file of the host's file system) for open permission events and answered
/// none, and the host's own `open` of that file failed with `EPERM` while
/// the command ran. `fanotify_init` is refused; unconfined, the same call
/// works (for any user, in its unprivileged form).
#[test]
fn a_command_cannot_hold_the_hosts_opens_with_fanotify() {
    if !usable("a_command_cannot_hold_the_hosts_opens_with_fanotify") {
        return;
    }
    let f = fixture();
    let outside = tempfile::NamedTempFile::new().unwrap();
    fs::write(outside.path(), "host data").unwrap();
    // Readable to anyone: an unprivileged mark needs read permission.
    fs::set_permissions(outside.path(), fs::Permissions::from_mode(0o644)).unwrap();
    let cwd = || {
        rustix::fs::open(
            &f.work,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .unwrap()
    };
    let command = |secs: &str| {
        format!(
            "{PYTHON} -c '{}' '{}' {secs}",
            FANOTIFY_PROBE.replace('\'', r"'\''"),
            outside.path().display()
        )
    };
    let status = f.work.join("status");
    // Control: unconfined, the mark is made.
    let off = executor(&f, ConfineMode::Off, &[], false);
    let opts = ExecOptions {
        cwd: Some(cwd()),
        ..ExecOptions::default()
    };
    let r = off.exec(&command("0"), opts).unwrap();
    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    let control = fs::read_to_string(&status).unwrap();
    if control != "marked" {
        eprintln!("note: fanotify unavailable here unconfined ({control}): nothing to refuse");
        return;
    }
    fs::remove_file(&status).unwrap();

    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let (command, opts) = (
        command("3"),
        ExecOptions {
            cwd: Some(cwd()),
            ..ExecOptions::default()
        },
    );
    let run = thread::spawn(move || ex.exec(&command, opts).unwrap());
    let mut seen = String::new();
    for _ in 0..400 {
        if let Ok(s) = fs::read_to_string(&status) {
            seen = s;
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    // The host opens the file while the command runs (and holds any
    // permission event it got for 3 s).
    let began = std::time::Instant::now();
    let host_read = fs::read_to_string(outside.path());
    let took = began.elapsed();
    let r = run.join().unwrap();
    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    assert!(
        took < Duration::from_millis(1500) && host_read.is_ok(),
        "the host's read took {took:?} while the command ran: {host_read:?}"
    );
    assert_eq!(seen, "refused EPERM", "fanotify in the command");
}

/// A lease (`fcntl(F_SETLEASE)`) judges no Landlock rule: a command that
/// may only read a file it owns (a read root's, or as root any file it may
/// read, `/etc/passwd` too) took a write lease on it, ignored the
/// `SIGIO` that asks it to give the lease back, and every host process's
/// open of the file, for reading as for writing, waited for it (up to the
/// kernel's `lease-break-time`, 45 s by default, or until the command
/// ended), while an open that does not block, as the file tools open,
/// failed with `EWOULDBLOCK`. `F_SETLEASE` is refused; unconfined, the
/// same call takes the lease.
#[test]
fn leak20_a_command_on_the_floor_cannot_hold_the_hosts_opens_with_a_lease() {
    if !usable("leak20_a_command_on_the_floor_cannot_hold_the_hosts_opens_with_a_lease") {
        return;
    }
    let f = fixture();
    let read = f._dir.path().join("read");
    fs::create_dir(&read).unwrap();
    let file = read.join("shared.txt");
    fs::write(&file, "host data").unwrap();
    let executor = |mode| {
        let ex = LocalShellExecutor::new(ExecConfig {
            shell: PathBuf::from("/bin/sh"),
            default_timeout: Duration::from_secs(20),
            confine_mode: mode,
            confine: ConfineSpec {
                read_dirs: vec![read.clone()],
                write_dirs: vec![f.work.clone()],
                ..ConfineSpec::default()
            },
            grace: Duration::from_millis(300),
            namespaces: false,
            ..ExecConfig::default()
        });
        ex.start().unwrap();
        ex
    };
    // Control: unconfined, the lease is taken and holds the host's opens.
    let (got, nonblocking, _) =
        reach_support::lease_probe(&executor(ConfineMode::Off), &file, &f.work, 2);
    if !got.starts_with("leased") {
        eprintln!("note: leases unavailable here unconfined ({got}): nothing to refuse");
        return;
    }
    assert_eq!(nonblocking, "EWOULDBLOCK", "unconfined ({got})");

    let (got, nonblocking, took) =
        reach_support::lease_probe(&executor(ConfineMode::BestEffort), &file, &f.work, 3);
    assert!(
        took < Duration::from_millis(1500) && nonblocking == "ok",
        "the host's open took {took:?} (without blocking: {nonblocking}) while the command held {got}"
    );
    assert_eq!(got, "refused EPERM", "a lease in the command");
}

/// A command run as root on the floor kept `CAP_SYS_NICE`: the filter
/// lets a process set its own scheduling (pid 0), so it could make itself
/// real-time (`SCHED_FIFO`), where a busy loop on every CPU leaves the
/// host (the executor's timeout and monitor included) only what real-time
/// throttling spares. Lowering its own priority still works for anyone.
#[test]
fn a_command_run_as_root_cannot_make_itself_real_time() {
    if !usable("a_command_run_as_root_cannot_make_itself_real_time") {
        return;
    }
    if !has(
        "a_command_run_as_root_cannot_make_itself_real_time",
        "/usr/bin/chrt",
    ) {
        return;
    }
    let f = fixture();
    let probe = "nice -n 5 true && echo nice; chrt -f 1 true 2>/dev/null && echo real-time";
    let run = |mode| stdout_of(&f, mode, probe);
    let control = run(ConfineMode::Off);
    if control != "nice\nreal-time\n" {
        eprintln!("note: not root (or no CAP_SYS_NICE): the control is refused: {control:?}");
    }
    assert_eq!(run(ConfineMode::BestEffort), "nice\n");
}

/// A command run as root on the floor keeps `CAP_SYS_ADMIN`, which lets a
/// process put itself in the real-time I/O class (`ionice -c 1`), whose
/// requests the I/O scheduler serves before every other process's. The
/// best-effort and idle classes still work for anyone.
#[test]
fn a_command_run_as_root_cannot_take_the_real_time_io_class() {
    if !usable("a_command_run_as_root_cannot_take_the_real_time_io_class") {
        return;
    }
    if !has(
        "a_command_run_as_root_cannot_take_the_real_time_io_class",
        "/usr/bin/ionice",
    ) {
        return;
    }
    let f = fixture();
    let probe = "ionice -c 2 -n 7 true && echo best-effort; ionice -c 3 true && echo idle; \
                 ionice -c 1 -n 0 true 2>/dev/null && echo real-time";
    let run = |mode| stdout_of(&f, mode, probe);
    let control = run(ConfineMode::Off);
    if control != "best-effort\nidle\nreal-time\n" {
        eprintln!("note: not root (or no CAP_SYS_ADMIN): the control is refused: {control:?}");
    }
    assert_eq!(run(ConfineMode::BestEffort), "best-effort\nidle\n");
}

/// A command run as root on the floor kept `CAP_NET_ADMIN` in the host's
/// network namespace, and the filter allows route netlink (name lookups
/// read addresses through it): `ip addr add`, `ip route del default` or a
/// `tc` rule changed the host's network for every process. Every change
/// through route netlink needs that capability, so setting `lo` up (a
/// change that changes nothing) shows it; reading the links still works.
#[test]
fn a_command_run_as_root_cannot_change_the_hosts_network() {
    if !usable("a_command_run_as_root_cannot_change_the_hosts_network") {
        return;
    }
    if !has(
        "a_command_run_as_root_cannot_change_the_hosts_network",
        "/bin/ip",
    ) {
        return;
    }
    let f = fixture();
    let probe = "ip link show dev lo >/dev/null && echo read; \
                 ip link set dev lo up 2>&1 && echo changed";
    let run = |mode| stdout_of(&f, mode, probe);
    let control = run(ConfineMode::Off);
    if !rustix::process::geteuid().is_root() || control != "read\nchanged\n" {
        eprintln!("note: not root (or no CAP_NET_ADMIN): the control is refused: {control:?}");
        return;
    }
    let confined = run(ConfineMode::BestEffort);
    assert!(
        confined.starts_with("read\n") && !confined.contains("changed"),
        "confined: {confined:?}"
    );
    assert!(confined.contains("Operation not permitted"), "{confined:?}");
}

/// The capabilities a command run as root on the floor holds, read by the
/// shell itself from its own status (a child could not read it there):
/// the effective and bounding sets, as masks.
fn floor_caps(f: &Fixture, mode: ConfineMode) -> Option<(u64, u64)> {
    let probe = r#"while IFS= read -r l; do case "$l" in CapEff*|CapBnd*) echo "$l";; esac; done < /proc/$$/status"#;
    let out = stdout_of(f, mode, probe);
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    Some((field("CapEff:")?, field("CapBnd:")?))
}

/// A command run as root on the floor loses what a command in the
/// namespaces loses: `CAP_NET_*`, every `CAP_SYS_*` (`CAP_SYS_ADMIN`,
/// `CAP_SYS_RESOURCE`, which would let it raise its own hard limits,
/// `CAP_SYS_RAWIO`, `CAP_SYS_PTRACE`, …) and `CAP_MKNOD`, from its
/// effective set and its bounding set. Before, it lost only `CAP_NET_*`
/// and `CAP_SYS_NICE`.
#[test]
fn a_command_run_as_root_on_the_floor_holds_no_system_capability() {
    if !usable("a_command_run_as_root_on_the_floor_holds_no_system_capability") {
        return;
    }
    let f = fixture();
    // CAP_NET_* (10-13), CAP_SYS_* (16-26), CAP_MKNOD (27).
    let system: u64 = (10..=13).chain(16..=27).fold(0, |m, c| m | 1 << c);
    let Some((control, _)) = floor_caps(&f, ConfineMode::Off) else {
        panic!("the status could not be read unconfined");
    };
    if control & system == 0 {
        eprintln!("note: not root (or no system capability): nothing to take away: {control:#x}");
        return;
    }
    let (eff, bnd) = floor_caps(&f, ConfineMode::BestEffort).expect("the status, confined");
    assert_eq!(
        eff & system,
        0,
        "effective {eff:#x} keeps {:#x} (unconfined {control:#x})",
        eff & system
    );
    assert_eq!(
        bnd & system,
        0,
        "bounding {bnd:#x} keeps {:#x}",
        bnd & system
    );
    // What the write root needs stays: CAP_CHOWN (0), CAP_DAC_OVERRIDE
    // (1), CAP_FOWNER (3) where the caller had them.
    let kept: u64 = 1 | 1 << 1 | 1 << 3;
    assert_eq!(eff & kept, control & kept, "effective {eff:#x}");
}

/// A command run as root on the floor keeps root's capabilities: without
/// the filter it could rename the host (`sethostname`), set or slew its
/// clock, and read or clear the kernel log. Refused like `reboot`; in
/// namespaces the kernel refuses them already (the capabilities are not
/// the initial namespace's).
#[test]
fn a_command_cannot_change_the_hosts_name_clock_or_kernel_log() {
    if !usable("a_command_cannot_change_the_hosts_name_clock_or_kernel_log") {
        return;
    }
    let f = fixture();
    let read = |p: &str| {
        fs::read_to_string(p)
            .unwrap()
            .trim_end_matches('\n')
            .to_owned()
    };
    let host = read("/proc/sys/kernel/hostname");
    let dom = read("/proc/sys/kernel/domainname");
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut args = vec![quote(&host), quote(&dom)];
    for nr in [
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_adjtimex,
        libc::SYS_clock_adjtime,
        libc::SYS_syslog,
    ] {
        args.push(nr.to_string());
    }
    let control = python(
        &executor(&f, ConfineMode::Off, &[], false),
        HOST_WIDE_PROBE,
        &args,
    );
    // CLOCK_MONOTONIC cannot be set: EINVAL, unless the filter answers
    // first. The reads succeed for anyone; the rest only for root.
    assert_eq!(
        control[3..6],
        ["EINVAL", "ok", "ok"],
        "control: {control:?}"
    );
    if rustix::process::geteuid().is_root() {
        assert_eq!(control, ["ok", "ok", "ok", "EINVAL", "ok", "ok", "ok"]);
    } else {
        eprintln!("note: not root: the control of the setters is refused by the kernel");
    }
    let confined = python(
        &executor(&f, ConfineMode::BestEffort, &[], false),
        HOST_WIDE_PROBE,
        &args,
    );
    assert_eq!(confined, ["EPERM"; 7], "confined: {confined:?}");
    assert_eq!(read("/proc/sys/kernel/hostname"), host);
    assert_eq!(read("/proc/sys/kernel/domainname"), dom);
}

#[test]
fn the_report_names_what_the_filter_refuses() {
    if !usable("the_report_names_what_the_filter_refuses") {
        return;
    }
    let f = fixture();
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let r = ex.exec("true", ExecOptions::default()).unwrap();
    assert!(r.confined.seccomp);
    let all = r.confined.seccomp_refuses.join("\n");
    for word in [
        "MPTCP", "UDP", "listen", "clone3", "io_uring", "ptrace", "unshare",
    ] {
        assert!(all.contains(word), "{word} missing from {all}");
    }
    let off = executor(&f, ConfineMode::Off, &[], false);
    let r = off.exec("true", ExecOptions::default()).unwrap();
    assert!(!r.confined.seccomp && r.confined.seccomp_refuses.is_empty());
}

#[test]
fn a_child_confined_without_the_executor_cannot_listen_at_all() {
    if !usable("a_child_confined_without_the_executor_cannot_listen_at_all") {
        return;
    }
    use std::os::unix::process::CommandExt;
    let f = fixture();
    let p = confine::prepare(
        &ConfineSpec {
            write_dirs: vec![f.work.clone()],
            ..ConfineSpec::default()
        },
        ConfineMode::BestEffort,
    )
    .unwrap();
    let mut cmd = std::process::Command::new(PYTHON);
    cmd.args(["-c", LISTEN_PROBE, "unix"]).current_dir(&f.work);
    let child = p.clone();
    // SAFETY: apply_in_child makes only raw system calls.
    unsafe { cmd.pre_exec(move || child.apply_in_child()) };
    let o = cmd.output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ENOSYS\n");
}

/// Connects with TCP Fast Open (`sendto` with `MSG_FASTOPEN`, which
/// connects without `connect(2)`) and prints what it read or the errno.
const FASTOPEN_PROBE: &str = r#"
import errno, socket, sys
import signal
signal.alarm(5)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", int(sys.argv[1])))
    print("read:" + s.recv(64).decode())
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
"#;

#[test]
fn tcp_fast_open_cannot_pass_the_port_rules() {
    if !usable("tcp_fast_open_cannot_pass_the_port_rules")
        || confine::kernel_abi().is_none_or(|a| a < 4)
    {
        return;
    }
    let allowed = banner_server("allowed");
    let other = banner_server("other-banner");
    let f = fixture();
    let off = executor(&f, ConfineMode::Off, &[allowed], false);
    // The control reaches the other port where the kernel's client side of
    // Fast Open is on (net.ipv4.tcp_fastopen bit 1, the default).
    let control = python(&off, FASTOPEN_PROBE, &[other.to_string()]);
    if control != ["read:other-banner"] {
        eprintln!("note: TCP Fast Open unavailable here ({control:?}); checking the refusal only");
    }
    let ex = executor(&f, ConfineMode::BestEffort, &[allowed], false);
    assert_eq!(python(&ex, FASTOPEN_PROBE, &[other.to_string()]), ["EPERM"]);
    // An allowed port is refused the same way: Fast Open is off entirely.
    assert_eq!(
        python(&ex, FASTOPEN_PROBE, &[allowed.to_string()]),
        ["EPERM"]
    );
}

/// Lowers the open-file limit of another process (`prlimit64` with a pid,
/// as `prlimit --pid` does) and prints `ok` or the errno name; with `0`,
/// of itself.
const PRLIMIT_PROBE: &str = r#"
import errno, resource, sys
try:
    resource.prlimit(int(sys.argv[1]), resource.RLIMIT_NOFILE, (16, 16))
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
"#;

/// The soft open-file limit of `pid`, from `/proc/<pid>/limits`.
/// A process outside every sandbox for a command to aim at.
fn sleeper() -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap()
}

fn open_file_limit(pid: u32) -> String {
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().to_owned()
}

#[test]
fn a_command_cannot_change_the_limits_of_a_process_outside_it() {
    if !usable("a_command_cannot_change_the_limits_of_a_process_outside_it") {
        return;
    }
    // Landlock does not scope prlimit(2): a command of the executor's user
    // could set the executor's RLIMIT_CPU (SIGKILL), RLIMIT_NOFILE or
    // RLIMIT_AS, or its keeper's; root could set any process's.
    let f = fixture();
    let off = executor(&f, ConfineMode::Off, &[], false);
    let mut control = sleeper();
    let before = open_file_limit(control.id());
    assert_ne!(before, "16");
    assert_eq!(
        python(&off, PRLIMIT_PROBE, &[control.id().to_string()]),
        ["ok"]
    );
    assert_eq!(open_file_limit(control.id()), "16");
    let _ = control.kill();
    let _ = control.wait();

    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let mut target = sleeper();
    let got = python(&ex, PRLIMIT_PROBE, &[target.id().to_string()]);
    let after = open_file_limit(target.id());
    let _ = target.kill();
    let _ = target.wait();
    assert_eq!(got, ["EPERM"]);
    assert_eq!(after, before);
    // The executor itself, named by its pid, the same.
    let me = std::process::id().to_string();
    assert_eq!(python(&ex, PRLIMIT_PROBE, &[me]), ["EPERM"]);
    // A command still sets its own limits (`ulimit`, `prlimit64(0, …)`).
    assert_eq!(python(&ex, PRLIMIT_PROBE, &["0".into()]), ["ok"]);
    let r = ex
        .exec("ulimit -n 32 && ulimit -n", ExecOptions::default())
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&r.stdout), "32\n");
}

/// Attaches the System V shared memory segment `argv[1]` and prints what
/// it holds (or the errno name), then makes a segment, a message queue and
/// a semaphore set of its own and prints their ids (or the errno names),
/// and a POSIX message queue (`mq`, removed again, or the errno name).
const SYSV_PROBE: &str = r#"
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
def err():
    e = ctypes.get_errno()
    return errno.errorcode.get(e, str(e))
a = libc.shmat(int(sys.argv[1]), None, 0o10000)
print(err() if a is None or a == 2**64 - 1 else "read:" + ctypes.string_at(a).decode())
for made in (libc.shmget(0, 1 << 20, 0o1600), libc.msgget(0, 0o1600), libc.semget(0, 1, 0o1600)):
    print(made if made >= 0 else err())
name = ("/sandgate-probe-%d" % libc.getpid()).encode()
q = libc.mq_open(name, 0o102, 0o600, None)
print(err() if q < 0 else "mq")
if q >= 0:
    libc.mq_unlink(name)
"#;

/// Removes what [`SYSV_PROBE`] made (the ids it printed).
fn remove_sysv(lines: &[String]) {
    for (i, line) in lines.iter().skip(1).enumerate() {
        let Ok(id) = line.parse::<i32>() else {
            continue;
        };
        // SAFETY: IPC_RMID with a null buffer on an id of our user.
        unsafe {
            match i {
                0 => libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                1 => libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                _ => libc::semctl(id, 0, libc::IPC_RMID),
            };
        }
    }
}

/// The System V objects of this user in the host's IPC namespace: the
/// (key, id) lines of `/proc/sysvipc/{shm,msg,sem}`.
fn host_sysv() -> Vec<String> {
    let uid = rustix::process::getuid().as_raw().to_string();
    ["shm", "msg", "sem"]
        .iter()
        .flat_map(|kind| {
            let text = fs::read_to_string(format!("/proc/sysvipc/{kind}")).unwrap_or_default();
            let uid = uid.clone();
            // Only the key and id: the rest of a line (the last pid to
            // attach, the attach count) moves whenever a process of the
            // test forks while the test's own segment is attached.
            text.lines()
                .skip(1)
                .filter(|l| {
                    l.split_whitespace().nth(if *kind == "shm" { 7 } else { 6 }) == Some(&uid)
                })
                .map(|l| {
                    let f: Vec<&str> = l.split_whitespace().take(2).collect();
                    format!("{kind} {}", f.join(" "))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_command_cannot_reach_the_hosts_system_v_ipc() {
    if !usable("a_command_cannot_reach_the_hosts_system_v_ipc") {
        return;
    }
    // On the floor System V IPC lives in the host's IPC namespace, which
    // Landlock does not judge: a command could read and write the segments
    // of the executor's user (any, as root), and leave segments behind that
    // no limit counts; so it is refused. In namespaces the command has an
    // IPC namespace of its own: it may make its own objects, sees none of
    // the host's, and leaves nothing behind.
    // SAFETY: a new private segment, attached and filled below.
    let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600) };
    assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
    // SAFETY: the segment is ours and 4096 bytes long.
    let at = unsafe { libc::shmat(id, std::ptr::null(), 0) };
    assert_ne!(at as isize, -1);
    // SAFETY: as above.
    unsafe {
        {
            let secret = c"host-secret".to_bytes_with_nul();
            std::ptr::copy_nonoverlapping(secret.as_ptr(), at.cast(), secret.len())
        }
    };
    let f = fixture();
    let off = executor(&f, ConfineMode::Off, &[], false);
    let control = python(&off, SYSV_PROBE, &[id.to_string()]);
    remove_sysv(&control);
    let floor_ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let in_ns = LocalShellExecutor::new(ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(20),
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec {
            write_dirs: vec![f.work.clone()],
            ..ConfineSpec::default()
        },
        namespaces: true,
        ..ExecConfig::default()
    });
    in_ns.start().unwrap();
    let before = host_sysv();
    let floor = python(&floor_ex, SYSV_PROBE, &[id.to_string()]);
    remove_sysv(&floor);
    let namespaced = in_ns
        .in_namespaces()
        .then(|| python(&in_ns, SYSV_PROBE, &[id.to_string()]));
    // The namespace's ids are its own: nothing to remove on the host.
    let after = host_sysv();
    // SAFETY: detaches and removes the segment made above.
    unsafe {
        libc::shmdt(at);
        libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
    }
    assert_eq!(control[0], "read:host-secret");
    assert!(
        control[1..4].iter().all(|l| l.parse::<i32>().is_ok()),
        "{control:?}"
    );
    assert_eq!(control[4], "mq");
    assert_eq!(
        floor,
        ["EPERM", "EPERM", "EPERM", "EPERM", "EPERM"],
        "on the floor"
    );
    match namespaced {
        Some(lines) => {
            // The host's segment does not exist there; its own objects do.
            assert_eq!(lines[0], "EINVAL", "in namespaces: {lines:?}");
            assert!(
                lines[1..4].iter().all(|l| l.parse::<i32>().is_ok()),
                "in namespaces: {lines:?}"
            );
            // POSIX message queues open on the IPC namespace's internal
            // mount, beneath no path Landlock grants: refused there.
            let mq = if sandgate_shellexec::confine::kernel_abi().is_some() {
                "EACCES"
            } else {
                "mq"
            };
            assert_eq!(lines[4], mq, "in namespaces: {lines:?}");
            // And they ended with the command's namespace.
            assert_eq!(before, after, "left in the host's IPC namespace");
        }
        None => eprintln!("note: namespaces unavailable here: only the floor was checked"),
    }
}

/// Changes the scheduling of process `argv[1]` (nice, policy, I/O
/// priority, CPUs, then its parameters by `sched_setparam` and its policy
/// again by `sched_setattr`), of the processes of user 4242 (who has none:
/// nothing changes even where allowed), and of itself (pid 0); prints `ok`
/// or the errno name for each.
const SCHEDULING_PROBE: &str = r#"
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def e(r):
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
class Param(ctypes.Structure):
    _fields_ = [("priority", ctypes.c_int)]
class Attr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                ("nice", ctypes.c_int32), ("priority", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64)]
mask = ctypes.c_ulong(1)
SYS_ioprio_set, SYS_sched_setattr = 251, 314
for pid in (int(sys.argv[1]), 0):
    print(e(libc.setpriority(0, pid, 15)))
    print(e(libc.sched_setscheduler(pid, 5, ctypes.byref(Param(0)))))
    print(e(libc.syscall(SYS_ioprio_set, 1, pid, 3 << 13)))
    print(e(libc.sched_setaffinity(pid, ctypes.sizeof(mask), ctypes.byref(mask))))
    print(e(libc.sched_setparam(pid, ctypes.byref(Param(0)))))
    attr = Attr(size=ctypes.sizeof(Attr), policy=5, nice=15)
    print(e(libc.syscall(SYS_sched_setattr, pid, ctypes.byref(attr), 0)))
print(e(libc.setpriority(2, 4242, 15)))
print(e(libc.syscall(251, 3, 4242, 3 << 13)))
"#;

/// The nice value and scheduling policy of `pid` (`/proc/<pid>/stat`).
fn nice_and_policy(pid: u32) -> (String, String) {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    (fields[16].to_owned(), fields[38].to_owned())
}

#[test]
fn a_command_cannot_change_the_scheduling_of_a_process_outside_it() {
    if !usable("a_command_cannot_change_the_scheduling_of_a_process_outside_it") {
        return;
    }
    // Landlock does not scope setpriority, sched_setscheduler, ioprio_set
    // or sched_setaffinity: a command of the executor's user could put the
    // executor (its limits monitor and timeout) at SCHED_IDLE on one CPU,
    // or renice every process of its user at once (PRIO_USER).
    let f = fixture();
    let off = executor(&f, ConfineMode::Off, &[], false);
    let mut control = sleeper();
    let before = nice_and_policy(control.id());
    let got = python(&off, SCHEDULING_PROBE, &[control.id().to_string()]);
    let changed = nice_and_policy(control.id());
    let _ = control.kill();
    let _ = control.wait();
    assert_eq!(&got[..6], ["ok", "ok", "ok", "ok", "ok", "ok"]);
    assert_eq!(changed, ("15".to_owned(), "5".to_owned()));
    assert_ne!(before, changed);

    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let mut target = sleeper();
    let before = nice_and_policy(target.id());
    let got = python(&ex, SCHEDULING_PROBE, &[target.id().to_string()]);
    let after = nice_and_policy(target.id());
    let _ = target.kill();
    let _ = target.wait();
    assert_eq!(
        got,
        [
            "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", // another process
            "ok", "ok", "ok", "ok", "ok", "ok", // itself
            "EPERM", "EPERM", // every process of a user
        ]
    );
    assert_eq!(after, before);

    // The rule is by pid, not by whose process it is: the command's own
    // shell named by its pid is refused too (SECURITY.md says so), while
    // unconfined the same tools succeed.
    let own = "renice -n 5 -p $$ >/dev/null 2>&1 && echo renice-ok || echo renice-refused; \
               taskset -p 1 $$ >/dev/null 2>&1 && echo taskset-ok || echo taskset-refused";
    let text = |ex: &LocalShellExecutor| {
        let r = ex.exec(own, ExecOptions::default()).unwrap();
        String::from_utf8_lossy(&r.stdout).into_owned()
    };
    assert_eq!(text(&off), "renice-ok\ntaskset-ok\n");
    assert_eq!(text(&ex), "renice-refused\ntaskset-refused\n");
}

/// The variable that makes [`beneath_a_supervisor_helper`] do its work.
const UNDER_LISTENER: &str = "SANDGATE_TEST_UNDER_LISTENER";

/// A host whose container runtime already supervises the executor through
/// seccomp user notification (sysbox, LXD's system call interception, a
/// sandgate command that runs sandgate): the kernel lets a process sit
/// beneath one filter with a listener only (`EBUSY` for a second), so
/// `listen` cannot be handed to the executor. The command must still run,
/// with `listen` refused, and the report must say so.
#[test]
fn a_command_runs_beneath_a_supervisor_the_host_already_has() {
    if !usable("a_command_runs_beneath_a_supervisor_the_host_already_has") {
        return;
    }
    // By /proc/self/exe: the binary's own path may lie in a directory the
    // unprivileged user cannot search.
    let out = std::process::Command::new("/proc/self/exe")
        .args([
            "--exact",
            "beneath_a_supervisor_helper",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(UNDER_LISTENER, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("SUPERVISED-CHECKED"), "{text}");
}

#[test]
#[ignore = "run in a child process by a_command_runs_beneath_a_supervisor_the_host_already_has"]
fn beneath_a_supervisor_helper() {
    if std::env::var_os(UNDER_LISTENER).is_none() {
        return;
    }
    // A filter that allows everything, with a listener this process keeps
    // open (as the runtime's supervisor would), on this thread: the one
    // that starts the executor below.
    let allow = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: allow.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers only.
    let nnp = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(nnp, 0);
    // SAFETY: `prog` points at a live one-instruction program; the kernel
    // copies it.
    let listener = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    assert!(listener >= 0, "{}", std::io::Error::last_os_error());

    let f = fixture();
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    // A UNIX socket in the write root: not even it may listen.
    let command = format!(
        "echo ran; {PYTHON} -c '{}' unix",
        LISTEN_PROBE.replace('\'', r"'\''")
    );
    let cwd = rustix::fs::open(
        &f.work,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let r = ex
        .exec(
            &command,
            ExecOptions {
                cwd: Some(cwd),
                ..ExecOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        (r.exit_code, String::from_utf8_lossy(&r.stdout).as_ref()),
        (0, "ran\nENOSYS\n"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(r.confined.seccomp, "{:?}", r.confined);
    let all = r.confined.seccomp_refuses.join("\n");
    assert!(all.contains("listen on any socket"), "{all}");
    // SAFETY: the listener is ours.
    unsafe { libc::close(listener as i32) };
    println!("SUPERVISED-CHECKED");
}

/// Calls `fallocate(2)` on a fresh file `f<n>` in the directory `argv[1]`
/// for each `mode:offset:length` argument after it (after writing 4 KiB to it) and
/// prints, per call, `ok <size> <allocated bytes>` or the errno name.
/// SIGXFSZ is ignored, so the file size limit answers `EFBIG`.
const FALLOCATE_PROBE: &str = r#"
import ctypes, errno, os, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
for n, spec in enumerate(sys.argv[2:]):
    mode, off, length = (int(x, 0) for x in spec.split(":"))
    name = os.path.join(sys.argv[1], "f%d" % n)
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"x" * 4096)
    os.fsync(fd)
    if libc.fallocate(fd, mode, off, length) == 0:
        st = os.fstat(fd)
        print("ok %d %d" % (st.st_size, st.st_blocks * 512))
    else:
        e = ctypes.get_errno()
        # EOPNOTSUPP and ENOTSUP are one number on Linux.
        print("EOPNOTSUPP" if e == errno.EOPNOTSUPP else errno.errorcode.get(e, str(e)))
    os.close(fd)
    os.unlink(name)
"#;

#[test]
fn fallocate_cannot_pass_the_file_size_limit() {
    if !usable("fallocate_cannot_pass_the_file_size_limit") {
        return;
    }
    // RLIMIT_FSIZE (`fs.max_write_bytes`) bounds a file's size, and the
    // kernel checks it where a call changes the size: but
    // `FALLOC_FL_KEEP_SIZE` allocates blocks past the end without changing
    // it, and `FALLOC_FL_INSERT_RANGE` grows the file without asking
    // (ext4), so one call took any amount of disk.
    const KEEP_SIZE: u32 = 0x01;
    const PUNCH_HOLE: u32 = 0x02;
    const ZERO_RANGE: u32 = 0x10;
    const INSERT_RANGE: u32 = 0x20;
    let limited = |mode| {
        let f = fixture();
        let config = ExecConfig {
            shell: PathBuf::from("/bin/sh"),
            default_timeout: Duration::from_secs(20),
            confine_mode: mode,
            confine: ConfineSpec {
                write_dirs: vec![f.work.clone()],
                max_file_size: Some(64 << 10),
                ..ConfineSpec::default()
            },
            namespaces: false,
            ..ExecConfig::default()
        };
        let ex = LocalShellExecutor::new(config);
        ex.start().unwrap();
        (f, ex)
    };
    let big = 64 << 20;
    let (f_off, off) = limited(ConfineMode::Off);
    let (f, ex) = limited(ConfineMode::BestEffort);
    let dir = |f: &Fixture| f.work.display().to_string();
    let escapes = |f: &Fixture| {
        vec![
            dir(f),
            format!("{KEEP_SIZE}:0:{big}"),
            format!("{}:4096:{big}", ZERO_RANGE | KEEP_SIZE),
            format!("{INSERT_RANGE}:0:{big}"),
        ]
    };
    // The control: no filter (`confine = "off"`), the same rlimit.
    let control = python(&off, FALLOCATE_PROBE, &escapes(&f_off));
    let passed = control.iter().filter(|l| l.starts_with("ok")).count();
    if passed == 0 {
        eprintln!("note: this file system holds fallocate to the size limit itself: {control:?}");
    }
    for (line, spec) in control.iter().zip(&escapes(&f_off)[1..]) {
        if let Some(rest) = line.strip_prefix("ok ") {
            let (size, blocks) = rest.split_once(' ').unwrap();
            let (size, blocks): (u64, u64) = (size.parse().unwrap(), blocks.parse().unwrap());
            assert!(size.max(blocks) >= big, "{spec}: {line}");
        }
    }
    assert_eq!(
        python(&ex, FALLOCATE_PROBE, &escapes(&f)),
        ["EOPNOTSUPP", "EOPNOTSUPP", "EOPNOTSUPP"]
    );
    // What stays: allocating within the limit, the limit answering past
    // it, and punching a hole (which frees).
    let kept = python(
        &ex,
        FALLOCATE_PROBE,
        &[
            dir(&f),
            format!("0:0:{}", 32 << 10),
            format!("0:0:{big}"),
            format!("{}:0:4096", PUNCH_HOLE | KEEP_SIZE),
        ],
    );
    assert_eq!(kept[0], format!("ok {} {}", 32 << 10, 32 << 10), "{kept:?}");
    assert_eq!(kept[1], "EFBIG", "{kept:?}");
    assert!(kept[2].starts_with("ok 4096 "), "{kept:?}");
    // What the limit does not bound: the number of files, so the bytes a
    // command writes in all (SECURITY.md says so).
    let r = ex
        .exec(
            &format!(
                "for i in 1 2 3 4; do head -c 65536 /dev/zero > {}/many$i || exit 1; done",
                f.work.display()
            ),
            ExecOptions::default(),
        )
        .unwrap();
    assert_eq!(r.exit_code, 0, "{r:?}");
    let total: u64 = (1..=4)
        .map(|i| fs::metadata(f.work.join(format!("many{i}"))).unwrap().len())
        .sum();
    assert_eq!(total, 4 << 16);
}

/// Runs `probe` (a Python script) as the shell's own process (`exec`, so
/// that its parent is the keeper); answers its stdout lines.
fn exec_python(ex: &LocalShellExecutor, probe: &str, args: &[String]) -> Vec<String> {
    run_python(ex, "exec ", probe, args)
}

/// The keeper runs in the executor's memory (`clone(CLONE_VM)`): a
/// command that reached the keeper's or the executor's memory could read
/// the host process's secrets and write into it. Every way is tried on
/// both (the keeper is the parent of the shell's process): `ptrace` and
/// `process_vm_*` are refused by the filter (`EPERM`), `/proc/<pid>/mem`
/// and `/proc/<pid>/environ` by Landlock (no rule grants another
/// process's `/proc/<pid>` on the floor: `EACCES`; `oom_score_adj` too,
/// whose value the kernel would give every process sharing the target's
/// memory, the executor included), `pidfd_getfd` by the filter (`EPERM`;
/// Landlock's ptrace rule would refuse it too, the target being outside
/// the command's domain), and `process_madvise` answers `EPERM` as root
/// (the floor takes `CAP_SYS_NICE`), `EACCES` otherwise (Landlock).
/// Unconfined, the same command reads
/// the secret from the executor's memory (and, as root, every other way
/// succeeds but `process_vm_writev` into read-only memory), so each
/// refusal is the confinement's.
#[test]
fn a_command_on_the_floor_cannot_reach_the_keepers_or_the_executors_memory() {
    if !usable("a_command_on_the_floor_cannot_reach_the_keepers_or_the_executors_memory") {
        return;
    }
    let f = fixture();
    let me = std::process::id();
    let mut args = reach_support::memory_args();
    args.push(format!("{me}:0"));
    let off = executor(&f, ConfineMode::Off, &[], false);
    let control = exec_python(&off, reach_support::MEMORY_PROBE, &args);
    assert!(
        control[0].contains("vm_readv=read")
            && control[0].contains("mem=read")
            && control[0].contains("mem_rw=ok")
            && control[0].contains("oom_adj=ok"),
        "unconfined, the secret is read: {control:?}"
    );
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    // The keeper is the parent of the shell, whose process the probe
    // takes over (`exec`): named by the shell's `$PPID`.
    let keeper = "$PPID:1".to_string();
    args.pop();
    args.push(keeper);
    args.push(format!("{me}:0"));
    let got = exec_python(&ex, reach_support::MEMORY_PROBE, &args);
    // process_madvise: EPERM as root, EACCES otherwise (refused either
    // way; unconfined, root's succeeds).
    let madvise = if rustix::process::geteuid().is_root() {
        "EPERM"
    } else {
        "EACCES"
    };
    let refused = |attach| reach_support::all_refused(attach, "EPERM", "EACCES", "EPERM", madvise);
    assert_eq!(got, [refused(true), refused(false)]);
}

/// `pidfd_getfd` is refused by the filter, not only by Landlock's ptrace
/// rule, which lets a command reach its own children (one domain) and is
/// missing from kernels that have seccomp without Landlock: here the
/// command takes its own child's stdin, which unconfined it does.
#[test]
fn a_command_cannot_take_its_own_childs_descriptors() {
    if !usable("a_command_cannot_take_its_own_childs_descriptors") {
        return;
    }
    let f = fixture();
    let args = [
        libc::SYS_pidfd_open.to_string(),
        libc::SYS_pidfd_getfd.to_string(),
    ];
    let off = executor(&f, ConfineMode::Off, &[], false);
    assert_eq!(
        exec_python(&off, reach_support::CHILD_PROBE, &args),
        ["getfd=ok"],
        "unconfined, the child is reached"
    );
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    assert_eq!(
        exec_python(&ex, reach_support::CHILD_PROBE, &args),
        ["getfd=EPERM"]
    );
}

/// Landlock has no right for a file's mode, owner, times or extended
/// attributes (the kernel's Landlock documentation: chmod, chown,
/// setxattr and utime are not restricted), and the filter sees paths only
/// as pointers: on the floor a command changes the metadata of a host file
/// its user may change, outside every root and in a read-only root alike.
/// This pins that limit (SECURITY.md); in namespaces the same changes are
/// refused (tests/namespaces.rs).
#[test]
fn the_floor_does_not_stop_metadata_changes_outside_the_write_root() {
    if !usable("the_floor_does_not_stop_metadata_changes_outside_the_write_root") {
        return;
    }
    let f = fixture();
    let read_root = f._dir.path().join("read");
    fs::create_dir(&read_root).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let config = ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(20),
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec {
            read_dirs: vec![read_root.clone()],
            write_dirs: vec![f.work.clone()],
            ..ConfineSpec::default()
        },
        namespaces: false,
        ..ExecConfig::default()
    };
    let ex = LocalShellExecutor::new(config);
    ex.start().unwrap();
    let uid = rustix::process::geteuid().as_raw();
    for file in [outside.path().join("host-file"), read_root.join("file")] {
        fs::write(&file, "host data").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        let before = reach_support::metadata(&file);
        let got = python(
            &ex,
            reach_support::METADATA_PROBE,
            &[file.display().to_string()],
        );
        assert_eq!(got, [reach_support::metadata_answers("ok")], "{file:?}");
        assert_ne!(reach_support::metadata(&file), before);
        assert_eq!(
            reach_support::metadata(&file),
            reach_support::changed(uid),
            "{file:?}"
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), "host data");
    }
}

/// What a command could do to the host user's session or the process that
/// runs it, past files: `prctl(PR_SET_MM)` needs `CAP_SYS_RESOURCE`, which
/// the floor takes from root too (`EPERM`); `personality` changes only
/// the command's own process (allowed); stdin is `/dev/null`, never a
/// terminal, and `/dev/tty` and the virtual consoles are granted by no
/// rule (`TIOCSTI`, `TIOCLINUX`); the keyring calls are refused by the
/// filter, and `/proc/keys` (the descriptions of the host user's keys) by
/// Landlock. The key made here is in the host's `/proc/keys`.
#[test]
fn a_command_cannot_reach_the_host_users_keys_or_a_terminal() {
    if !usable("a_command_cannot_reach_the_host_users_keys_or_a_terminal") {
        return;
    }
    let f = fixture();
    let _key = reach_support::HostKey::add();
    let ex = executor(&f, ConfineMode::BestEffort, &[], false);
    let got = exec_python(
        &ex,
        reach_support::SESSION_PROBE,
        &reach_support::session_args(),
    );
    let tty0 = if Path::new("/dev/tty0").exists() {
        "EACCES"
    } else {
        "ENOENT"
    };
    assert_eq!(
        got,
        [format!(
            "set_mm=EPERM personality=ok stdin_tty=False tiocsti_stdin=ENOTTY \
             tiocsti_tty=open:EACCES tioclinux=open:{tty0} keyctl=EPERM add_key=EPERM \
             request_key=EPERM proc_keys=EACCES"
        )]
    );
}

/// Calls the filter refuses whatever their arguments, each with arguments
/// the kernel rejects before it checks any capability (bad flags, a NULL
/// pointer, an out-of-range level): unconfined they change nothing, for
/// root as for anyone, and answer `EINVAL`, `EFAULT` or (a kernel built
/// without the call) `ENOSYS`, never the filter's `EPERM`.
fn argument_checked_calls() -> Vec<String> {
    let mut calls = vec![
        // flags must be 0
        format!(
            "process_vm_readv={},0,0,0,0,0,1",
            libc::SYS_process_vm_readv
        ),
        format!(
            "process_vm_writev={},0,0,0,0,0,1",
            libc::SYS_process_vm_writev
        ),
        // unknown flags
        format!(
            "perf_event_open={},0,0,-1,-1,0xffffffff",
            libc::SYS_perf_event_open
        ),
        // the key type at NULL
        format!("add_key={},0,0,0,0,0", libc::SYS_add_key),
        format!("request_key={},0,0,0,0", libc::SYS_request_key),
        // unknown flags, on a path that does not exist
        format!(
            "umount2={},s:/nonexistent-sandgate,0x100",
            libc::SYS_umount2
        ),
        // FSCONFIG_SET_FLAG without a key
        format!("fsconfig={},-1,0,0,0,0", libc::SYS_fsconfig),
        // unknown flags
        format!(
            "mount_setattr={},-1,0,0xffffffff,0,0",
            libc::SYS_mount_setattr
        ),
        // unknown swap flags, the path at NULL
        format!("swapon={},0,0xffffffff", libc::SYS_swapon),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        // levels go up to 3
        format!("iopl={},4", libc::SYS_iopl),
        // an empty range
        format!("ioperm={},0,0,1", libc::SYS_ioperm),
    ]);
    calls
}

/// The entries of the filter's list no other test here makes: the rest of
/// the mount family, `process_vm_*` with no process to reach,
/// `perf_event_open`, `add_key`/`request_key`, module and kexec loading,
/// `open_by_handle_at`, `iopl`/`ioperm`, swap, `reboot` and `acct`. Each
/// is made unconfined (the control) and confined, with arguments the
/// kernel rejects, so that even as root the control changes nothing.
///
/// Where the kernel checks the arguments before any capability
/// ([`argument_checked_calls`]), the control answers something other than
/// `EPERM` for every user, and the confined `EPERM` can only be the
/// filter's. Where it checks a capability first
/// ([`capability_checked_calls`]), an unprivileged control answers
/// `EPERM` already, and a command run as root on the floor has lost
/// `CAP_SYS_*` (so the kernel would answer `EPERM` there too): this test
/// cannot tell the filter from the kernel for those, unless the kernel is
/// built without the call (`ENOSYS` unconfined: kexec and modules on a
/// kernel without them). The unit test
/// `the_program_alone_refuses_what_root_could_otherwise_do` runs them as
/// root under the program alone, with every capability kept.
#[test]
fn the_rest_of_the_listed_calls_are_refused() {
    if !usable("the_rest_of_the_listed_calls_are_refused") {
        return;
    }
    let f = fixture();
    let first = argument_checked_calls();
    let second = capability_checked_calls();
    let calls: Vec<String> = first.iter().chain(&second).cloned().collect();
    let names: Vec<&str> = calls.iter().map(|c| c.split('=').next().unwrap()).collect();
    let control = python(
        &executor(&f, ConfineMode::Off, &[], false),
        NAMED_SYSCALL_PROBE,
        &calls,
    );
    let confined = python(
        &executor(&f, ConfineMode::BestEffort, &[], false),
        NAMED_SYSCALL_PROBE,
        &calls,
    );
    let refused: Vec<String> = names.iter().map(|n| format!("{n}=EPERM")).collect();
    assert_eq!(confined, refused, "confined");
    for (i, answer) in control.iter().enumerate() {
        assert!(answer.starts_with(&format!("{}=", names[i])), "{control:?}");
        let kernel_refuses = answer.ends_with("=EPERM");
        if i < first.len() {
            assert!(
                !kernel_refuses && !answer.ends_with("=ok"),
                "control {answer}: the kernel must reject these arguments itself"
            );
        } else if kernel_refuses {
            eprintln!(
                "note: {answer} unconfined (no capability): the filter cannot be told from the kernel"
            );
        } else {
            assert!(
                !answer.ends_with("=ok"),
                "control {answer}: changed something"
            );
        }
    }
    if rustix::process::geteuid().is_root() {
        // Root holds every capability the calls check: each reaches the
        // argument check (or the kernel does not have it).
        assert!(
            control.iter().all(|a| !a.ends_with("=EPERM")),
            "control as root: {control:?}"
        );
    }
}

/// `int 0x80` from a 64-bit process makes a 32-bit system call (i386
/// `getpid`, 20, here): its numbers are another table, where the
/// filter's own mean other calls, so the filter kills the process
/// (`SIGSYS`) for any call of another architecture. Unconfined the same
/// code answers the process's pid.
#[cfg(target_arch = "x86_64")]
const INT80_PROBE: &str = r#"
import ctypes, mmap, os
code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"  # mov eax, 20; int 0x80; ret
m = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print("called", flush=True)
print("getpid=" + ("same" if call() == os.getpid() else "other"), flush=True)
"#;

#[cfg(target_arch = "x86_64")]
#[test]
fn a_call_of_another_architecture_kills_the_command() {
    if !usable("a_call_of_another_architecture_kills_the_command") {
        return;
    }
    let f = fixture();
    let quoted = INT80_PROBE.replace('\'', r"'\''");
    let command = format!("{PYTHON} -c '{quoted}'; echo \"status $?\"");
    let control = stdout_of(&f, ConfineMode::Off, &command);
    if control != "called\ngetpid=same\nstatus 0\n" {
        eprintln!(
            "note: a_call_of_another_architecture_kills_the_command skipped: \
             this kernel runs no 32-bit call ({control:?} unconfined)"
        );
        return;
    }
    // 128 + SIGSYS (31), as the shell reports a child a signal ended.
    let confined = stdout_of(&f, ConfineMode::BestEffort, &command);
    assert_eq!(confined, "called\nstatus 159\n");
}

/// An x32 system call number (`__X32_SYSCALL_BIT` | 39, x32 `getpid`)
/// answers `ENOSYS` confined. Most kernels are built without the x32 ABI
/// and answer `ENOSYS` unconfined as well: there the answer cannot tell
/// the filter from the kernel (the unit tests check that the program
/// answers the range itself); where the kernel runs x32 calls, the
/// control answers `ok` and the refusal is the filter's.
#[cfg(target_arch = "x86_64")]
#[test]
fn an_x32_call_answers_enosys() {
    if !usable("an_x32_call_answers_enosys") {
        return;
    }
    let f = fixture();
    let call = [format!("x32_getpid={}", 0x4000_0000 | libc::SYS_getpid)];
    let control = python(
        &executor(&f, ConfineMode::Off, &[], false),
        NAMED_SYSCALL_PROBE,
        &call,
    );
    if control == ["x32_getpid=ENOSYS"] {
        eprintln!("note: this kernel has no x32 calls: the filter cannot be told from it");
    } else {
        assert_eq!(control, ["x32_getpid=ok"]);
    }
    let confined = python(
        &executor(&f, ConfineMode::BestEffort, &[], false),
        NAMED_SYSCALL_PROBE,
        &call,
    );
    assert_eq!(confined, ["x32_getpid=ENOSYS"]);
}

/// What `path` holds, read by the shell itself (a redirection, no child
/// process): the shell's own `/proc/self` is granted; a program it starts
/// reads its own, not the shell's.
const SHELL_READS: &str = "while IFS= read -r l; do printf '%s\\n' \"$l\"; done <";

/// Pinned, documented under "What sandgate does not protect": on the floor
/// (no network namespace) the shell reads the host network namespace's
/// socket table through its own `/proc/self/net`, so a command learns
/// which ports the host listens on (here a listener of the test's own),
/// though it may connect to none that is not granted. In namespaces it
/// sees only its own (tests/namespaces.rs).
#[test]
fn on_the_floor_a_command_sees_the_hosts_socket_table() {
    let f = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let table = stdout_of(
        &f,
        ConfineMode::BestEffort,
        &format!("{SHELL_READS} /proc/self/net/tcp"),
    );
    assert!(
        table.contains(&format!(":{port:04X} ")),
        "the host's listener on {port} is not in the command's socket table: {table}"
    );
}
