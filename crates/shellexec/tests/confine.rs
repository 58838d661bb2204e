//! Kernel confinement with real children: each test forks `/bin/sh` (or a
//! tool) confined by `Prepared::apply_in_child` in `pre_exec` and checks what
//! the kernel lets it do. Tests that need a Landlock feature the kernel lacks
//! print a note and return.

use std::fs;
use std::net::TcpListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sandgate_codes::ErrorCode;
use sandgate_shellexec::confine::{
    kernel_abi, prepare, prepare_with_abi, ConfineErrorKind, ConfineMode, ConfinePart, ConfineSpec,
    Prepared,
};

const PYTHON: &str = "/usr/bin/python3";

struct Fixture {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    work: PathBuf,
}

/// `base/root/hello.txt`, `base/work/`, `base/outside/secret`.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_path_buf();
    let root = base.join("root");
    let work = base.join("work");
    fs::create_dir(&root).unwrap();
    fs::create_dir(&work).unwrap();
    fs::create_dir(base.join("outside")).unwrap();
    fs::write(root.join("hello.txt"), "hello from root\n").unwrap();
    fs::write(base.join("outside/secret"), "top secret\n").unwrap();
    Fixture {
        _dir: dir,
        base,
        root,
        work,
    }
}

impl Fixture {
    fn spec(&self) -> ConfineSpec {
        ConfineSpec {
            read_dirs: vec![self.root.clone()],
            write_dirs: vec![self.work.clone()],
            ..ConfineSpec::default()
        }
    }
}

/// Whether the kernel offers Landlock ABI `min`; prints why a test skips.
fn kernel_has(min: u32, test: &str) -> bool {
    match kernel_abi() {
        Some(abi) if abi >= min => true,
        other => {
            eprintln!("note: {test} skipped: needs Landlock ABI {min}, kernel offers {other:?}");
            false
        }
    }
}

fn confined(prepared: &Prepared, program: &str, args: &[&str], cwd: &Path) -> Output {
    let child = prepared.clone();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LC_ALL", "C");
    let hook = move || {
        // SAFETY: std runs this in the child between fork and exec, and
        // `child` was cloned in the parent, so its descriptors are open here.
        unsafe { child.apply_in_child() }
    };
    // SAFETY: the hook only calls apply_in_child, which makes raw
    // async-signal-safe system calls and does not allocate.
    unsafe {
        cmd.pre_exec(hook);
    }
    cmd.output().expect("spawn confined child")
}

fn sh(prepared: &Prepared, script: &str, cwd: &Path) -> Output {
    confined(prepared, "/bin/sh", &["-c", script], cwd)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {:?}\nstdout: {}\nstderr: {}",
        o.status,
        stdout(o),
        stderr(o)
    );
}

fn assert_denied(o: &Output, what: &str) {
    assert!(!o.status.success(), "{what} succeeded: {}", stdout(o));
    assert!(
        stderr(o).contains("Permission denied"),
        "{what}: expected EACCES, got stderr: {}",
        stderr(o)
    );
}

fn best_effort(f: &Fixture) -> Prepared {
    prepare(&f.spec(), ConfineMode::BestEffort).unwrap()
}

#[test]
fn child_reads_root_and_writes_work() {
    if !kernel_has(1, "child_reads_root_and_writes_work") {
        return;
    }
    let f = fixture();
    let p = best_effort(&f);
    let o = sh(
        &p,
        "cat ../root/hello.txt && echo written > out.txt && mkdir d && mv out.txt d/ \
         && cat d/out.txt && rm -r d && echo > /dev/null",
        &f.work,
    );
    assert_ok(&o, "read root, write work");
    assert_eq!(stdout(&o), "hello from root\nwritten\n");
    assert!(!f.work.join("d").exists());
}

#[test]
fn child_cannot_read_outside() {
    if !kernel_has(1, "child_cannot_read_outside") {
        return;
    }
    let f = fixture();
    let p = best_effort(&f);
    let o = confined(&p, "/bin/cat", &["../outside/secret"], &f.work);
    assert_denied(&o, "cat outside/secret");
    assert!(!stdout(&o).contains("top secret"));
    let o = confined(&p, "/bin/ls", &["../outside"], &f.work);
    assert_denied(&o, "ls outside");
    let o = sh(&p, "cat /root/.bashrc /etc/../root/.profile", &f.work);
    assert_denied(&o, "cat under /root");
}

#[test]
fn child_cannot_write_root_outside_or_tmp() {
    if !kernel_has(1, "child_cannot_write_root_outside_or_tmp") {
        return;
    }
    let f = fixture();
    let p = best_effort(&f);
    let tmp_probe = format!("/tmp/sandgate-confine-probe-{}", std::process::id());
    for script in [
        "echo x > ../root/new".to_owned(),
        "echo x >> ../root/hello.txt".to_owned(),
        "rm ../root/hello.txt".to_owned(),
        "mkdir ../root/d".to_owned(),
        "echo x > ../outside/new".to_owned(),
        "mv ../root/hello.txt ./stolen".to_owned(),
        format!("echo x > {tmp_probe}"),
        "echo x > /etc/sandgate-probe".to_owned(),
    ] {
        let o = sh(&p, &script, &f.work);
        assert_denied(&o, &script);
    }
    assert!(!f.root.join("new").exists());
    assert!(!f.root.join("d").exists());
    assert!(!f.base.join("outside/new").exists());
    assert!(!Path::new(&tmp_probe).exists());
    assert_eq!(
        fs::read_to_string(f.root.join("hello.txt")).unwrap(),
        "hello from root\n"
    );
}

#[test]
fn child_cannot_make_device_nodes_in_work() {
    if !kernel_has(1, "child_cannot_make_device_nodes_in_work") {
        return;
    }
    let f = fixture();
    let p = best_effort(&f);
    // As root, mknod would otherwise succeed and give raw access to a device.
    let o = sh(&p, "mknod ./null c 1 3", &f.work);
    assert!(!o.status.success(), "mknod succeeded");
    assert!(!f.work.join("null").exists());
    let o = sh(&p, "mkfifo ./fifo && ln -s ../root/hello.txt link", &f.work);
    assert_ok(&o, "fifo and symlink in work");
}

#[test]
fn ordinary_tools_run_confined() {
    if !kernel_has(1, "ordinary_tools_run_confined") {
        return;
    }
    let f = fixture();
    let p = best_effort(&f);
    let cases: &[(&str, &[&str], &str)] = &[
        ("/bin/ls", &["../root"], "hello.txt\n"),
        ("/bin/cat", &["../root/hello.txt"], "hello from root\n"),
        (
            "/bin/grep",
            &["hello", "../root/hello.txt"],
            "hello from root\n",
        ),
        (
            "/bin/sed",
            &["s/hello/bye/", "../root/hello.txt"],
            "bye from root\n",
        ),
        (
            "/bin/sh",
            &[
                "-c",
                "head -c 4 /dev/urandom | wc -c; head -c 3 /dev/zero | wc -c",
            ],
            "4\n3\n",
        ),
        (
            "/bin/sh",
            &[
                "-c",
                "sed s/hello/hi/ ../root/hello.txt | grep -c hi > n && cat n",
            ],
            "1\n",
        ),
    ];
    for (program, args, want) in cases {
        let o = confined(&p, program, args, &f.work);
        assert_ok(&o, program);
        assert_eq!(&stdout(&o), want, "{program} {args:?}");
    }
    if Path::new(PYTHON).exists() {
        let o = confined(&p, PYTHON, &["-c", "print(1)"], &f.work);
        assert_ok(&o, "python3 -c 'print(1)'");
        assert_eq!(stdout(&o), "1\n");
    } else {
        eprintln!("note: {PYTHON} not found, python part skipped");
    }
}

/// A python script printing, per line, the outcome of connect (`c PORT`) or
/// bind (`b PORT`): `ok` or the errno name.
const NET_PROBE: &str = r#"
import errno, socket, sys
for arg in sys.argv[1:]:
    op, port = arg[0], int(arg[1:])
    s = socket.socket()
    try:
        if op == "c":
            s.connect(("127.0.0.1", port))
        else:
            s.bind(("127.0.0.1", port))
        print("ok")
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno))
    finally:
        s.close()
"#;

fn net_probe(p: &Prepared, cwd: &Path, ops: &[String]) -> Vec<String> {
    let mut args = vec!["-c", NET_PROBE];
    args.extend(ops.iter().map(String::as_str));
    let o = confined(p, PYTHON, &args, cwd);
    assert_ok(&o, "python net probe");
    stdout(&o).lines().map(str::to_owned).collect()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn tcp_connect_only_to_allowed_ports_and_no_bind() {
    if !kernel_has(4, "tcp_connect_only_to_allowed_ports_and_no_bind") {
        return;
    }
    if !Path::new(PYTHON).exists() {
        eprintln!("note: tcp test skipped: {PYTHON} not found");
        return;
    }
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let (a, b) = (
        allowed.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );
    let f = fixture();
    let mut spec = f.spec();
    spec.connect_ports = vec![a];
    let p = prepare(&spec, ConfineMode::BestEffort).unwrap();
    assert!(p.report().net);
    let ops = [
        format!("c{a}"),
        format!("c{b}"),
        "b0".to_owned(),
        format!("b{}", free_port()),
    ];
    // Both listeners accept: a refusal can only come from Landlock.
    assert_eq!(
        net_probe(&p, &f.work, &ops),
        ["ok", "EACCES", "EACCES", "EACCES"]
    );

    // The same probe unconfined connects to both: the EACCES above is ours.
    let off = prepare(&spec, ConfineMode::Off).unwrap();
    let ops = [format!("c{a}"), format!("c{b}")];
    assert_eq!(net_probe(&off, &f.work, &ops), ["ok", "ok"]);
}

#[test]
fn signals_are_scoped_to_the_domain() {
    if !kernel_has(6, "signals_are_scoped_to_the_domain") {
        return;
    }
    let f = fixture();
    let p = best_effort(&f);
    assert!(p.report().scoped);
    let me = std::process::id();
    let o = sh(&p, &format!("kill -0 {me}"), &f.work);
    assert!(!o.status.success(), "signalled the test process");
    assert!(
        stderr(&o).contains("Operation not permitted"),
        "expected EPERM: {}",
        stderr(&o)
    );
    // Its own children are in its domain.
    let o = sh(&p, "sleep 5 & kill $! && wait $!; echo $?", &f.work);
    assert_eq!(stdout(&o), "143\n", "stderr: {}", stderr(&o));
    // Unconfined (as the test's user), signalling ourselves works.
    let off = prepare(&f.spec(), ConfineMode::Off).unwrap();
    assert_ok(
        &sh(&off, &format!("kill -0 {me}"), &f.work),
        "kill -0 unconfined",
    );
}

#[test]
fn required_refuses_without_net() {
    if !kernel_has(1, "required_refuses_without_net") {
        return;
    }
    let f = fixture();
    let e = prepare_with_abi(&f.spec(), ConfineMode::Required, Some(3)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ConfineUnavailable);
    assert_eq!(e.kind(), ConfineErrorKind::Unavailable);
    assert!(e.missing().contains(&ConfinePart::Network));
    assert!(e.missing().contains(&ConfinePart::Scoping));
    assert!(!e.missing().contains(&ConfinePart::Landlock));
    let msg = e.to_string();
    assert!(msg.contains("network"), "{msg}");
    assert!(msg.contains("scoping"), "{msg}");
}

#[test]
fn required_refuses_without_scoping() {
    if !kernel_has(5, "required_refuses_without_scoping") {
        return;
    }
    let f = fixture();
    let e = prepare_with_abi(&f.spec(), ConfineMode::Required, Some(5)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ConfineUnavailable);
    assert_eq!(e.missing(), [ConfinePart::Scoping]);
    let msg = e.to_string();
    assert!(msg.contains("scoping"), "{msg}");
    assert!(!msg.contains("network"), "{msg}");
}

#[test]
fn required_refuses_without_landlock() {
    let f = fixture();
    let e = prepare_with_abi(&f.spec(), ConfineMode::Required, Some(0)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ConfineUnavailable);
    assert!(e.missing().contains(&ConfinePart::Landlock));
    assert!(e.to_string().contains("Landlock"), "{e}");
}

#[test]
fn required_is_met_by_this_kernel() {
    if !kernel_has(6, "required_is_met_by_this_kernel") {
        return;
    }
    let f = fixture();
    let p = prepare(&f.spec(), ConfineMode::Required).unwrap();
    let r = p.report();
    assert_eq!(r.mode, Some(ConfineMode::Required));
    assert!(r.fs && r.net && r.scoped && r.no_new_privs);
    assert_eq!(r.kernel_abi, kernel_abi());
    assert_eq!(r.landlock_abi, kernel_abi().map(|k| k.min(9)));
    assert_denied(
        &confined(&p, "/bin/cat", &["../outside/secret"], &f.work),
        "cat outside/secret",
    );
}

#[test]
fn best_effort_on_older_abi_reports_and_still_confines_fs() {
    if !kernel_has(3, "best_effort_on_older_abi_reports_and_still_confines_fs") {
        return;
    }
    let f = fixture();
    let p = prepare_with_abi(&f.spec(), ConfineMode::BestEffort, Some(3)).unwrap();
    let r = p.report();
    assert_eq!(r.landlock_abi, Some(3));
    assert!(r.fs);
    assert!(!r.net);
    assert!(!r.scoped);
    assert!(r.notes.iter().any(|n| n.contains("limited to ABI 3")));
    assert_denied(
        &confined(&p, "/bin/cat", &["../outside/secret"], &f.work),
        "cat outside/secret",
    );
    assert_ok(&sh(&p, "echo ok > out", &f.work), "write work");
    // What the report says is not enforced is indeed not: the report is honest.
    let me = std::process::id();
    assert_ok(
        &sh(&p, &format!("kill -0 {me}"), &f.work),
        "kill -0 unscoped",
    );
    if Path::new(PYTHON).exists() {
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = other.local_addr().unwrap().port();
        assert_eq!(net_probe(&p, &f.work, &[format!("c{port}")]), ["ok"]);
    }
}

#[test]
fn best_effort_without_landlock_reports_nothing_enforced() {
    let f = fixture();
    let p = prepare_with_abi(&f.spec(), ConfineMode::BestEffort, Some(0)).unwrap();
    let r = p.report();
    assert_eq!(r.landlock_abi, None);
    assert!(!r.fs && !r.net && !r.scoped);
    assert!(r.no_new_privs);
    let o = confined(&p, "/bin/cat", &["../outside/secret"], &f.work);
    assert_ok(&o, "cat outside/secret without Landlock");
}

#[test]
fn off_mode_sets_no_new_privs_and_rlimits_only() {
    let f = fixture();
    let mut spec = f.spec();
    spec.max_file_size = Some(1 << 20);
    let p = prepare(&spec, ConfineMode::Off).unwrap();
    let r = p.report();
    assert_eq!(r.mode, Some(ConfineMode::Off));
    assert_eq!(r.landlock_abi, None);
    assert!(!r.fs && !r.net && !r.scoped);
    assert!(r.no_new_privs);
    assert!(r.rlimits.contains(&("RLIMIT_CORE".to_owned(), 0)));
    assert!(r.rlimits.contains(&("RLIMIT_FSIZE".to_owned(), 1 << 20)));
    let o = sh(
        &p,
        "cat ../outside/secret; grep NoNewPrivs /proc/self/status; ulimit -c; ulimit -f",
        &f.work,
    );
    assert_ok(&o, "off mode");
    // ulimit -f counts 512-byte blocks.
    assert_eq!(stdout(&o), "top secret\nNoNewPrivs:\t1\n0\n2048\n");
}

#[test]
fn file_size_limit_stops_a_large_write() {
    if !kernel_has(1, "file_size_limit_stops_a_large_write") {
        return;
    }
    let f = fixture();
    let mut spec = f.spec();
    spec.max_file_size = Some(4096);
    let p = prepare(&spec, ConfineMode::BestEffort).unwrap();
    assert!(p
        .report()
        .rlimits
        .contains(&("RLIMIT_FSIZE".to_owned(), 4096)));
    // The writer dies of SIGXFSZ (status 128+25 from the shell, or the
    // signal itself if the shell exec'd it in place).
    let o = sh(&p, "head -c 100000 /dev/zero > big", &f.work);
    let by_signal = o.status.signal() == Some(libc::SIGXFSZ);
    let by_status = o.status.code() == Some(128 + libc::SIGXFSZ);
    assert!(by_signal || by_status, "{:?} {}", o.status, stderr(&o));
    assert_eq!(fs::metadata(f.work.join("big")).unwrap().len(), 4096);
    // With SIGXFSZ ignored the write fails with EFBIG instead.
    if Path::new(PYTHON).exists() {
        let script = "import errno, os, signal\n\
                      signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n\
                      fd = os.open('big2', os.O_WRONLY | os.O_CREAT)\n\
                      os.write(fd, b'x' * 4096)\n\
                      try:\n    os.write(fd, b'x')\n    print('wrote')\n\
                      except OSError as e:\n    print(errno.errorcode[e.errno])\n";
        let o = confined(&p, PYTHON, &["-c", script], &f.work);
        assert_ok(&o, "python EFBIG probe");
        assert_eq!(stdout(&o), "EFBIG\n");
    }
}

#[test]
fn no_core_dumps_and_no_new_privs() {
    if !kernel_has(1, "no_core_dumps_and_no_new_privs") {
        return;
    }
    let f = fixture();
    let p = best_effort(&f);
    assert!(p.report().no_new_privs);
    assert!(p.report().rlimits.contains(&("RLIMIT_CORE".to_owned(), 0)));
    // `read` is a builtin: /proc/self is the shell's own directory, granted.
    let o = sh(
        &p,
        "ulimit -c; ulimit -H -c; \
         while read -r k v; do [ \"$k\" = NoNewPrivs: ] && echo \"$k $v\"; done < /proc/self/status; \
         true",
        &f.work,
    );
    assert_ok(&o, "ulimit and NoNewPrivs");
    assert_eq!(stdout(&o), "0\n0\nNoNewPrivs: 1\n");
}

#[test]
fn proc_self_is_granted_to_the_confined_process_only() {
    if !kernel_has(1, "proc_self_is_granted_to_the_confined_process_only") {
        return;
    }
    let f = fixture();
    let p = best_effort(&f);
    // cat exec'd directly: /proc/self is its own directory.
    let o = confined(&p, "/bin/cat", &["/proc/self/stat"], &f.work);
    assert_ok(&o, "cat /proc/self/stat");
    // Another process's /proc/<pid> (the test's) is not granted.
    let me = std::process::id();
    let o = confined(&p, "/bin/cat", &[&format!("/proc/{me}/status")], &f.work);
    assert_denied(&o, "cat /proc/<test pid>/status");
    let o = confined(&p, "/bin/cat", &["/proc/1/cmdline"], &f.work);
    assert_denied(&o, "cat /proc/1/cmdline");
    // Documented limit: a forked descendant's /proc/self is its own pid,
    // which no rule names.
    let o = sh(&p, "cat /proc/self/stat; echo", &f.work);
    assert!(
        stderr(&o).contains("Permission denied"),
        "a forked child read its /proc/self: {}",
        stdout(&o)
    );
}

#[test]
fn nproc_limit_is_reported_honestly() {
    let f = fixture();
    let mut spec = f.spec();
    spec.max_processes = Some(4000);
    let p = prepare(&spec, ConfineMode::Off).unwrap();
    let r = p.report();
    let listed = r.rlimits.iter().any(|(n, _)| n == "RLIMIT_NPROC");
    // SAFETY: getuid has no preconditions and cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    if root {
        assert!(!listed, "RLIMIT_NPROC reported as enforced for root");
        assert!(r.notes.iter().any(|n| n.contains("RLIMIT_NPROC=4000")));
    }
    // The limit is set in the child either way.
    let o = sh(&p, "grep 'Max processes' /proc/self/limits", &f.work);
    assert_ok(&o, "read limits");
    let fields: Vec<String> = stdout(&o).split_whitespace().map(str::to_owned).collect();
    assert_eq!(fields[2..4], ["4000", "4000"], "{}", stdout(&o));
}

#[test]
fn nproc_limit_stops_forks_of_an_unprivileged_child() {
    // SAFETY: getuid has no preconditions and cannot fail.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("note: nproc test skipped: needs root to run the child as nobody");
        return;
    }
    let spec = ConfineSpec {
        max_processes: Some(3),
        ..ConfineSpec::default()
    };
    let p = prepare(&spec, ConfineMode::Off).unwrap();
    let child = p.clone();
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "for i in 1 2 3 4 5 6; do sleep 1 & done; wait"])
        .current_dir("/")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LC_ALL", "C")
        .uid(65534)
        .gid(65534);
    let hook = move || {
        // SAFETY: in the child between fork and exec (std runs it after
        // switching to uid 65534); `child` was cloned in the parent.
        unsafe { child.apply_in_child() }
    };
    // SAFETY: the hook only makes raw async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(hook);
    }
    let o = cmd.output().unwrap();
    let err = stderr(&o);
    if !err.contains("fork") {
        eprintln!("note: no fork failure as uid 65534 (other processes of that uid?): {err}");
    }
    assert!(err.contains("fork"), "no fork failure: {err}");
}

#[test]
fn one_prepared_confines_many_children() {
    if !kernel_has(1, "one_prepared_confines_many_children") {
        return;
    }
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Prepared>();
    let f = fixture();
    let p = best_effort(&f);
    std::thread::scope(|s| {
        for i in 0..8 {
            let (p, f) = (&p, &f);
            s.spawn(move || {
                let o = sh(
                    p,
                    &format!("echo {i} > out{i}; cat ../outside/secret"),
                    &f.work,
                );
                assert_denied(&o, "cat outside/secret");
                assert_eq!(
                    fs::read_to_string(f.work.join(format!("out{i}"))).unwrap(),
                    format!("{i}\n")
                );
            });
        }
    });
}

#[test]
fn missing_read_dir_is_not_found() {
    if !kernel_has(1, "missing_read_dir_is_not_found") {
        return;
    }
    let f = fixture();
    let mut spec = f.spec();
    spec.read_dirs.push(f.base.join("nope"));
    let e = prepare(&spec, ConfineMode::BestEffort).unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotFound);
    assert_eq!(e.errno(), Some(libc::ENOENT));
}

#[test]
fn report_serializes_to_json() {
    let f = fixture();
    let mut spec = f.spec();
    spec.max_file_size = Some(4096);
    let p = prepare(&spec, ConfineMode::BestEffort).unwrap();
    let v = serde_json::to_value(p.report()).unwrap();
    for key in [
        "mode",
        "landlock_abi",
        "kernel_abi",
        "fs",
        "net",
        "scoped",
        "no_new_privs",
        "rlimits",
        "notes",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["mode"], "best_effort");
    assert_eq!(v["no_new_privs"], true);
    assert!(v["rlimits"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!(["RLIMIT_FSIZE", 4096])));
    eprintln!("report on this kernel: {v}");
}

#[test]
fn unix_socket_by_path_is_restricted_only_from_abi_9() {
    if !kernel_has(1, "unix_socket_by_path_is_restricted_only_from_abi_9") {
        return;
    }
    if !Path::new(PYTHON).exists() {
        eprintln!("note: unix socket test skipped: {PYTHON} not found");
        return;
    }
    let f = fixture();
    let path = f.base.join("outside/sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let p = best_effort(&f);
    let script = "import errno, socket, sys\n\
                  s = socket.socket(socket.AF_UNIX)\n\
                  try:\n    s.connect(sys.argv[1])\n    print('ok')\n\
                  except OSError as e:\n    print(errno.errorcode[e.errno])\n";
    let o = confined(&p, PYTHON, &["-c", script, path.to_str().unwrap()], &f.work);
    assert_ok(&o, "unix connect probe");
    let abi = p.report().landlock_abi.unwrap_or(0);
    // Below ABI 9 the kernel does not judge it. A child confined through
    // `apply_in_child` has no supervisor, so nothing does: only the
    // executor's runs are judged (tested in `exec.rs`).
    let want = if abi >= 9 { "EACCES\n" } else { "ok\n" };
    assert_eq!(stdout(&o), want, "ABI {abi}");
    // The report says which: judged by the executor, or a gap its notes
    // state.
    let judged = p
        .report()
        .seccomp_refuses
        .iter()
        .any(|r| r.starts_with("connect to a UNIX socket"));
    assert!(!judged || abi < 9);
    assert_eq!(
        p.report().notes.iter().any(|n| n.contains("UNIX socket")),
        abi < 9 && !judged
    );
}
