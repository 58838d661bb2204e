//! The executor's namespaces and the allowlist view, on the real kernel:
//! what the command can no longer see or reach, the keeper as PID 1, the
//! end of everything the command started, no leaks over many execs, and
//! the fallback to the floor when the host refuses a step of the probe.
//!
//! Run as root and as an unprivileged user (`cargo xtask unprivileged`).
//! A test skips, saying why, only when the probe finds namespaces
//! unavailable on this host; `SANDGATE_REQUIRE_NAMESPACES=1` turns such a
//! skip into a failure.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sandgate_shellexec::confine::{ConfineMode, ConfinePart, ConfineSpec};
use sandgate_shellexec::exec::{
    ExecConfig, ExecOptions, ExecResult, LocalShellExecutor, ShellExecutor,
};

const PYTHON: &str = "/usr/bin/python3";

mod reach_support;

struct Fixture {
    dir: tempfile::TempDir,
    work: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    Fixture { dir, work }
}

fn config(f: &Fixture, mode: ConfineMode) -> ExecConfig {
    ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(20),
        confine_mode: mode,
        confine: ConfineSpec {
            write_dirs: vec![f.work.clone()],
            ..ConfineSpec::default()
        },
        grace: Duration::from_millis(200),
        ..ExecConfig::default()
    }
}

/// A started executor whose commands run in namespaces; `None` (printed)
/// when this host cannot give them.
fn in_namespaces(test: &str, config: ExecConfig) -> Option<LocalShellExecutor> {
    let ex = LocalShellExecutor::new(config);
    ex.start().unwrap();
    let r = exec(&ex, "true");
    if r.confined.namespaces {
        return Some(ex);
    }
    let why = r.confined.notes.join("; ");
    assert!(
        std::env::var_os("SANDGATE_REQUIRE_NAMESPACES").is_none(),
        "{test}: namespaces unavailable: {why}"
    );
    eprintln!("note: {test} skipped: namespaces unavailable here: {why}");
    None
}

fn exec(ex: &LocalShellExecutor, command: &str) -> ExecResult {
    ex.exec(command, ExecOptions::default()).unwrap()
}

fn exec_in(ex: &LocalShellExecutor, command: &str, cwd: &Path) -> ExecResult {
    let fd = rustix::fs::open(
        cwd,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let opts = ExecOptions {
        cwd: Some(fd),
        ..ExecOptions::default()
    };
    ex.exec(command, opts).unwrap()
}

fn out(r: &ExecResult) -> String {
    String::from_utf8_lossy(&r.stdout).into_owned()
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn the_view_hides_the_hosts_tmp_run_home_and_sockets() {
    let f = fixture();
    // The host's /tmp: a marker file and a listening UNIX socket.
    let marker = tempfile::NamedTempFile::new_in(std::env::temp_dir()).unwrap();
    let sock_dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let sock = sock_dir.path().join("agent.sock");
    let _listener = UnixListener::bind(&sock).unwrap();
    // A home directory with a file in it, outside every root.
    let home = f.dir.path().join("home");
    fs::create_dir(&home).unwrap();
    fs::write(home.join(".netrc"), "machine example.com password x").unwrap();
    let mut c = config(&f, ConfineMode::BestEffort);
    c.host_env = Some(vec![
        ("HOME".into(), home.clone().into_os_string()),
        ("PATH".into(), "/usr/bin:/bin".into()),
    ]);
    let Some(ex) = in_namespaces("view", c) else {
        return;
    };
    // A marker under the host's /run, where root may write.
    let run_marker = if is_root() {
        let p = PathBuf::from(format!("/run/sandgate-test-{}", std::process::id()));
        fs::write(&p, "host").unwrap();
        Some(p)
    } else {
        eprintln!("note: the /run marker needs root; the command's /run is checked to be empty");
        None
    };
    assert!(fs::read_dir("/run").unwrap().next().is_some());

    let check = |path: &Path| {
        let r = exec(
            &ex,
            &format!(
                "test -e '{}' && echo present || echo absent",
                path.display()
            ),
        );
        assert_eq!(out(&r).trim(), "absent", "{} is visible", path.display());
        assert!(path.exists(), "{} is there on the host", path.display());
    };
    check(marker.path());
    check(&sock);
    check(&home);
    if let Some(p) = &run_marker {
        check(p);
    }
    let r = exec(&ex, "ls -A /run | wc -l; echo \"$HOME\"; ls -A /tmp");
    let text = out(&r);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    assert_eq!(lines[0], "0", "the command's /run is its own, empty tmpfs");
    assert_eq!(lines[1], home.display().to_string());
    // The command's /tmp holds only the mount points of what it was
    // given: the private TMPDIR and, when the write root is under /tmp,
    // the way to it.
    let tmp = fs::canonicalize(std::env::temp_dir()).unwrap();
    let mut given = vec![ex.tmpdir().unwrap()];
    given.push(fs::canonicalize(&f.work).unwrap());
    let expected: std::collections::BTreeSet<String> = given
        .iter()
        .filter_map(|p| p.strip_prefix(&tmp).ok())
        .filter_map(|p| p.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let seen: std::collections::BTreeSet<String> =
        lines[2..].iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(seen, expected);

    if Path::new(PYTHON).exists() {
        let script = format!(
            "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('{}')\n    print('connected')\nexcept OSError as e:\n    print('refused', e.errno)",
            sock.display()
        );
        let r = exec(&ex, &format!("{PYTHON} -c \"{script}\""));
        assert!(out(&r).starts_with("refused"), "{}", out(&r));
    }
    // The write root and the private TMPDIR work as before.
    let r = exec_in(
        &ex,
        "echo data > file && cat file && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && pwd",
        &f.work,
    );
    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        out(&r),
        format!(
            "data\nt\n{}\n",
            fs::canonicalize(&f.work).unwrap().display()
        )
    );
    if let Some(p) = run_marker {
        fs::remove_file(p).unwrap();
    }
}

#[test]
fn mounts_and_namespace_changes_are_refused() {
    let f = fixture();
    let Some(ex) = in_namespaces("mounts", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    // mount(8) and umount(8) refuse anyone but root before asking the
    // kernel, so the kernel is asked directly.
    #[cfg(target_arch = "x86_64")]
    const MOUNT_UMOUNT2: (u32, u32) = (165, 166);
    #[cfg(target_arch = "aarch64")]
    const MOUNT_UMOUNT2: (u32, u32) = (40, 39);
    let (mount, umount2) = MOUNT_UMOUNT2;
    let call = |what: &str, args: &str| {
        format!(
            "perl -e 'my ($s, $t, $y) = (\"none\", \"/usr\", \"tmpfs\"); my ($p, $m) = (\"/proc\", \"/tmp\"); \
             syscall({args}) == 0 and exit 0; print STDERR \"{what}: $!\\n\"; exit 1'"
        )
    };
    const MS_REMOUNT_BIND: u32 = 32 | 4096;
    let calls = [
        // Remount the read-only /usr writable.
        call(
            "remount",
            &format!("{mount}, $s, $t, 0, {MS_REMOUNT_BIND}, 0"),
        ),
        // Mount a tmpfs over /tmp.
        call("mount", &format!("{mount}, $s, $m, $y, 0, 0")),
        // Unmount /usr, and /proc lazily (MNT_DETACH).
        call("umount", &format!("{umount2}, $t, 0")),
        call("umount", &format!("{umount2}, $p, 2")),
    ];
    for cmd in [
        &calls[0][..],
        &calls[1],
        &calls[2],
        &calls[3],
        "unshare -m true",
        "unshare -U true",
        "nsenter -t 1 -m true",
        "nsenter -t 1 -U true",
    ] {
        let r = exec(&ex, cmd);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_ne!(r.exit_code, 0, "`{cmd}` succeeded");
        // Refused by the kernel, not failed for want of the program.
        assert_ne!(r.exit_code, 127, "`{cmd}` did not run: {err}");
        assert!(
            err.contains("not permitted") || err.contains("ermission denied"),
            "`{cmd}` failed for another reason: {err}"
        );
    }
    // Still read-only, still mounted.
    let r = exec(
        &ex,
        "touch /usr/sandgate-x 2>/dev/null && echo wrote; test -e /usr/bin/env && echo ok",
    );
    assert_eq!(out(&r), "ok\n");
}

/// In the view, /proc is the command's own PID namespace: every process of
/// the tree reads its own /proc/self and the system-wide files programs
/// read (meminfo, cpuinfo), and sees no process but the command's.
#[test]
fn every_process_of_the_tree_reads_its_own_proc() {
    let f = fixture();
    let Some(ex) = in_namespaces("proc", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    // `head` and `cat` are children of the shell, not the first process.
    let r = exec(
        &ex,
        "head -1 /proc/self/status && cat /proc/self/environ | tr '\\0' '\\n' | grep -c '^PATH=' \
         && grep -c '^MemTotal:' /proc/meminfo && sh -c 'head -c 4 /proc/self/maps >/dev/null && echo maps' \
         && ls /proc | grep -c '^[0-9]'",
    );
    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    let o = out(&r);
    let lines: Vec<&str> = o.lines().collect();
    assert!(lines[0].starts_with("Name:\thead"), "{o}");
    assert_eq!(&lines[1..4], ["1", "1", "maps"], "{o}");
    // PID 1 (the keeper), the shell and `ls`: a handful, never the host's.
    let pids: usize = lines[4].parse().unwrap();
    assert!(
        pids <= 6,
        "{pids} processes visible in the view's /proc: {o}"
    );
}

#[test]
fn a_root_caller_loses_the_dropped_capabilities() {
    let f = fixture();
    let Some(ex) = in_namespaces("caps", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    // The shell reads its own status.
    let r = exec(
        &ex,
        "while read k v; do case $k in CapBnd:|CapEff:|CapAmb:) echo $k $v;; esac; done < /proc/self/status",
    );
    let caps: BTreeMap<String, u64> = out(&r)
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_owned(), u64::from_str_radix(v, 16).unwrap())
        })
        .collect();
    let dropped: u64 = (10..=13).chain(16..=27).map(|c| 1u64 << c).sum();
    assert_eq!(caps["CapBnd:"] & dropped, 0, "{caps:?}");
    assert_eq!(caps["CapEff:"] & dropped, 0, "{caps:?}");
    if is_root() {
        // CAP_DAC_OVERRIDE (1) stays, so root keeps working on files of
        // other users in the roots.
        assert_ne!(caps["CapEff:"] & 1 << 1, 0, "{caps:?}");
    } else {
        assert_eq!(caps["CapEff:"], 0, "{caps:?}");
    }
}

#[test]
fn the_keeper_is_pid_1_and_the_shell_is_not() {
    let f = fixture();
    let Some(ex) = in_namespaces("pid1", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    let r = exec(&ex, "echo $$ $PPID");
    let o = out(&r);
    let (me, parent) = o.trim().split_once(' ').unwrap();
    assert_ne!(me, "1");
    assert_eq!(parent, "1");
}

#[test]
fn kill_minus_one_ends_only_the_commands_tree() {
    let f = fixture();
    let Some(ex) = in_namespaces("kill -1", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    // A process of the same user outside the command.
    let mut bystander = Command::new("sleep").arg("30").spawn().unwrap();
    let r = exec(&ex, "sleep 30 & kill -9 -1; wait; echo survived");
    assert_eq!(out(&r), "survived\n");
    assert!(r.duration < Duration::from_secs(10));
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "the bystander was killed"
    );
    let r = exec(&ex, "echo again");
    assert_eq!(out(&r), "again\n");
    bystander.kill().unwrap();
    bystander.wait().unwrap();
}

#[test]
fn a_double_forked_daemon_dies_with_the_exec() {
    let f = fixture();
    let Some(ex) = in_namespaces("daemon", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    let beat = f.work.join("beat");
    let r = exec_in(
        &ex,
        "(setsid sh -c 'while :; do date +%s%N > beat; sleep 0.02; done' &) ; sleep 0.1; echo started",
        &f.work,
    );
    assert_eq!(out(&r), "started\n");
    let first = fs::read_to_string(&beat).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        fs::read_to_string(&beat).unwrap(),
        first,
        "the daemon still runs"
    );
}

#[test]
fn the_namespace_loopback_serves_the_command_and_nothing_else() {
    let f = fixture();
    if !Path::new(PYTHON).exists() {
        eprintln!("note: loopback test skipped: {PYTHON} not found");
        return;
    }
    let Some(ex) = in_namespaces("loopback", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    // A server and a client inside.
    let script = "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nc = socket.create_connection(s.getsockname())\na, _ = s.accept()\nc.send(b'ok')\nprint(a.recv(2).decode())";
    let r = exec(&ex, &format!("{PYTHON} -c \"{script}\""));
    assert_eq!(out(&r), "ok\n", "{}", String::from_utf8_lossy(&r.stderr));

    // The host's loopback listener is unreachable from inside.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let script = format!("import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('connected')\nexcept OSError as e:\n    print('refused')");
    let r = exec(&ex, &format!("{PYTHON} -c \"{script}\""));
    assert_eq!(out(&r), "refused\n");

    // A server inside is unreachable from the host.
    let port_file = f.work.join("port");
    let script = "import socket, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nopen('port.tmp', 'w').write(str(s.getsockname()[1]))\nimport os\nos.rename('port.tmp', 'port')\ntime.sleep(3)";
    std::thread::scope(|scope| {
        let runner = scope.spawn(|| exec_in(&ex, &format!("{PYTHON} -c \"{script}\""), &f.work));
        let mut port = None;
        for _ in 0..200 {
            if let Ok(p) = fs::read_to_string(&port_file) {
                port = Some(p.parse::<u16>().unwrap());
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let port = port.expect("the server inside started");
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
        assert_eq!(runner.join().unwrap().exit_code, 0);
    });
}

fn fd_count() -> usize {
    fs::read_dir("/proc/self/fd").unwrap().count()
}

fn mount_count() -> usize {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .count()
}

fn child_count() -> usize {
    let me = std::process::id().to_string();
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(|p| p == me))
                    .unwrap_or(false)
            })
        })
        .count()
}

/// The host's shared memory (tmpfs pages among it), in KiB.
fn shmem_kib() -> u64 {
    fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Shmem:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("Shmem in /proc/meminfo")
}

#[test]
fn two_hundred_execs_leak_no_descriptor_mount_or_process() {
    // Descriptors and children are counted for the whole process: the
    // count runs in a process of its own, where no other test runs.
    const ALONE: &str = "SANDGATE_TEST_ALONE";
    if std::env::var_os(ALONE).is_none() {
        // By /proc/self/exe: the binary's own path may lie in a directory
        // the unprivileged user cannot search.
        let out = Command::new("/proc/self/exe")
            .args([
                "--exact",
                "two_hundred_execs_leak_no_descriptor_mount_or_process",
                "--nocapture",
            ])
            .env(ALONE, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "{text}");
        return;
    }
    let f = fixture();
    let Some(ex) = in_namespaces("leaks", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    // Each exec fills 1 MiB of its private /tmp: were the tmpfs kept after
    // the exec, 200 MiB of shared memory would stay behind.
    let fill = "head -c 1048576 /dev/zero > /tmp/fill";
    exec(&ex, fill);
    let (fds, mounts, children) = (fd_count(), mount_count(), child_count());
    let shmem = shmem_kib();
    for i in 0..200 {
        let r = exec(&ex, fill);
        assert_eq!(
            r.exit_code,
            0,
            "exec {i}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        assert!(r.confined.namespaces);
    }
    let grown = shmem_kib().saturating_sub(shmem);
    assert!(
        grown < 100 * 1024,
        "shared memory grew by {grown} KiB over 200 execs: their tmpfs stayed"
    );
    assert_eq!(
        mount_count(),
        mounts,
        "a mount leaked into the host's table"
    );
    assert_eq!(child_count(), children, "a process outlived its exec");
    assert_eq!(fd_count(), fds, "a descriptor leaked");
}

#[test]
fn concurrent_execs_keep_their_own_directories() {
    let f = fixture();
    let Some(ex) = in_namespaces("concurrent", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    let dirs: Vec<PathBuf> = (0..4)
        .map(|i| {
            let d = f.work.join(format!("d{i}"));
            fs::create_dir(&d).unwrap();
            fs::canonicalize(d).unwrap()
        })
        .collect();
    std::thread::scope(|scope| {
        for d in &dirs {
            let ex = &ex;
            scope.spawn(move || {
                for _ in 0..10 {
                    let r = exec_in(ex, "pwd; echo x > here; sleep 0.01", d);
                    assert_eq!(out(&r), format!("{}\n", d.display()));
                }
            });
        }
    });
    for d in &dirs {
        assert!(d.join("here").exists());
    }
}

/// Re-runs `helper` in a child process of this test binary with
/// `SANDGATE_TEST_REFUSE=call`, where it installs a seccomp filter that
/// refuses `call` before anything else happens.
fn run_refusing(call: &str) {
    // By /proc/self/exe: the binary's own path may lie in a directory the
    // unprivileged user cannot search.
    let out = Command::new("/proc/self/exe")
        .args([
            "--exact",
            "fallback_helper",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SANDGATE_TEST_REFUSE", call)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("FALLBACK-CHECKED"), "{text}");
}

#[test]
fn a_host_that_refuses_mount_gets_the_floor_or_a_refusal() {
    let f = fixture();
    if in_namespaces("fallback (mount)", config(&f, ConfineMode::BestEffort)).is_none() {
        return;
    }
    run_refusing("mount");
}

#[test]
fn a_host_that_refuses_unshare_gets_the_floor_or_a_refusal() {
    let f = fixture();
    if in_namespaces("fallback (unshare)", config(&f, ConfineMode::BestEffort)).is_none() {
        return;
    }
    run_refusing("unshare");
}

/// A host that allows user, network and mount namespaces but no PID
/// namespace (`user.max_pid_namespaces = 0` answers `ENOSPC` to
/// `clone` and `unshare` with `CLONE_NEWPID`, in a user namespace too).
#[test]
fn a_host_without_pid_namespaces_gets_the_floor_or_a_refusal() {
    let f = fixture();
    if in_namespaces("fallback (newpid)", config(&f, ConfineMode::BestEffort)).is_none() {
        return;
    }
    run_refusing("newpid");
}

/// A host whose `/proc` has entries covered by other mounts (a container
/// runtime masks `/proc/kcore`, `/proc/timer_list` and others with
/// `/dev/null`): the kernel refuses a fresh `proc` mount in a user
/// namespace there (`EPERM`: it would reveal what is covered), and each
/// command's view mounts one. Played by a child test process in a mount
/// namespace of its own (in a user namespace of its own when not root)
/// where `/dev/null` is bound over `/proc/version`.
#[test]
fn a_host_whose_proc_is_covered_gets_the_floor_or_a_refusal() {
    use std::os::unix::process::CommandExt;
    let f = fixture();
    if in_namespaces("fallback (proc)", config(&f, ConfineMode::BestEffort)).is_none() {
        return;
    }
    let root = is_root();
    let (uid, gid) = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    let maps = [
        (c"/proc/self/setgroups", "deny".to_owned()),
        (c"/proc/self/uid_map", format!("{uid} {uid} 1")),
        (c"/proc/self/gid_map", format!("{gid} {gid} 1")),
    ];
    let mut cmd = Command::new("/proc/self/exe");
    cmd.args([
        "--exact",
        "fallback_helper",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("SANDGATE_TEST_REFUSE", "proc");
    // SAFETY: the child is single-threaded between fork and exec; only
    // system calls on what was built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let check = |r: libc::c_int| {
                if r < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(())
                }
            };
            if root {
                check(libc::unshare(libc::CLONE_NEWNS))?;
            } else {
                check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS))?;
                for (path, text) in &maps {
                    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    check(fd)?;
                    let n = libc::write(fd, text.as_ptr().cast(), text.len());
                    libc::close(fd);
                    check(n as libc::c_int)?;
                }
            }
            let null = std::ptr::null();
            check(libc::mount(
                null,
                c"/".as_ptr(),
                null,
                libc::MS_REC | libc::MS_PRIVATE,
                null.cast(),
            ))?;
            check(libc::mount(
                c"/dev/null".as_ptr(),
                c"/proc/version".as_ptr(),
                null,
                libc::MS_BIND,
                null.cast(),
            ))
        })
    };
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("FALLBACK-CHECKED"), "{text}");
}

#[test]
#[ignore = "run in a child process by the fallback tests"]
fn fallback_helper() {
    let Some(call) = std::env::var_os("SANDGATE_TEST_REFUSE") else {
        return;
    };
    let newpid = || {
        vec![
            seccompiler::SeccompRule::new(vec![seccompiler::SeccompCondition::new(
                0,
                seccompiler::SeccompCmpArgLen::Qword,
                seccompiler::SeccompCmpOp::MaskedEq(libc::CLONE_NEWPID as u64),
                libc::CLONE_NEWPID as u64,
            )
            .unwrap()])
            .unwrap(),
        ]
    };
    let (rules, errno) = match call.to_str() {
        Some("mount") => (BTreeMap::from([(libc::SYS_mount, Vec::new())]), libc::EPERM),
        Some("unshare") => (
            BTreeMap::from([(libc::SYS_unshare, Vec::new())]),
            libc::EPERM,
        ),
        Some("newpid") => (
            BTreeMap::from([(libc::SYS_clone, newpid()), (libc::SYS_unshare, newpid())]),
            libc::ENOSPC,
        ),
        // Nothing refused: the covered /proc is set up by the parent.
        Some("proc") => (BTreeMap::from([(libc::SYS_acct, Vec::new())]), libc::EPERM),
        other => panic!("unknown call {other:?}"),
    };
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(errno as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    let prog: seccompiler::BpfProgram = filter.try_into().unwrap();
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers only.
    let nnp = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(nnp, 0);
    // This thread (the one that starts the executors below) and its
    // children run under the filter.
    seccompiler::apply_filter(&prog).unwrap();

    let f = fixture();
    let ex = LocalShellExecutor::new(config(&f, ConfineMode::BestEffort));
    ex.start().unwrap();
    let r = exec_in(&ex, "echo floor > f && cat f", &f.work);
    assert_eq!(out(&r), "floor\n", "{}", String::from_utf8_lossy(&r.stderr));
    assert!(!r.confined.namespaces && !r.confined.view);
    assert!(r.confined.missing.contains(&ConfinePart::Namespaces));
    assert!(r.confined.missing.contains(&ConfinePart::View));
    assert!(
        r.confined.notes.iter().any(|n| n.contains("no namespaces")),
        "{:?}",
        r.confined.notes
    );
    // The floor still confines: Landlock and seccomp are in force.
    assert!(r.confined.fs && r.confined.seccomp);

    let ex = LocalShellExecutor::new(config(&f, ConfineMode::Required));
    let e = ex.start().unwrap_err();
    assert_eq!(e.code(), sandgate_codes::ErrorCode::ConfineUnavailable);
    assert!(e.to_string().contains("namespaces"), "{e}");
    // The step the host refused is named.
    if call == "newpid" {
        assert!(e.to_string().contains("PID namespace"), "{e}");
    }
    if call == "proc" {
        assert!(e.to_string().contains("proc mount"), "{e}");
    }
    // Nothing runs.
    assert!(ex.exec("true", ExecOptions::default()).is_err());
    println!("FALLBACK-CHECKED");
}

/// Opens `dir` as the executor's callers do (`O_PATH`).
fn open_dir(dir: &Path) -> std::os::fd::OwnedFd {
    rustix::fs::open(
        dir,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap()
}

/// A call narrowed to some directories (`within`, as the MCP server
/// narrows a session to its client's roots) reaches, of what the executor
/// grants, only what lies beneath them, with the rights it had there; a
/// directory the executor does not grant gives nothing; an empty list
/// leaves no granted directory; the system directories stay readable. On
/// the floor and in namespaces alike; a call without `within` is as
/// before.
#[test]
fn a_narrowed_call_reaches_only_what_lies_beneath_its_directories() {
    for namespaces in [false, true] {
        let f = fixture();
        let read = f.dir.path().join("read");
        let outside = f.dir.path().join("outside");
        for d in [
            f.work.join("a"),
            f.work.join("b"),
            read.join("r1"),
            read.join("r2"),
            outside.clone(),
        ] {
            fs::create_dir_all(&d).unwrap();
        }
        fs::write(f.work.join("b/old"), "b\n").unwrap();
        fs::write(read.join("r1/x"), "r1\n").unwrap();
        fs::write(read.join("r2/x"), "r2\n").unwrap();
        // Readable and writable by the unprivileged user the suite also
        // runs as (the fixture's directories are its own then).
        let mut config = config(&f, ConfineMode::BestEffort);
        config.confine.read_dirs = vec![read.clone()];
        config.namespaces = namespaces;
        let ex = if namespaces {
            match in_namespaces("narrowed call", config) {
                Some(ex) => ex,
                None => continue,
            }
        } else {
            let ex = LocalShellExecutor::new(config);
            ex.start().unwrap();
            ex
        };
        let w = f.work.display();
        let r = read.display();
        let o = outside.display();
        let script = format!(
            "for t in {w}/a/new {w}/b/new {w}/new {o}/new; do \
               if echo x > $t 2>/dev/null; then echo wrote $t; else echo refused $t; fi; \
             done; \
             for t in {r}/r1/x {r}/r2/x {w}/b/old; do \
               if cat $t >/dev/null 2>&1; then echo read $t; else echo unread $t; fi; \
             done; \
             echo t > \"$TMPDIR/t\" && rm \"$TMPDIR/t\" && \
             test -x /bin/sh && echo system",
        );
        let narrowed = |within: Vec<&Path>| {
            let opts = ExecOptions {
                within: Some(within.into_iter().map(open_dir).collect()),
                ..ExecOptions::default()
            };
            let r = ex.exec(&script, opts).unwrap();
            assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
            assert!(
                r.confined.notes.iter().any(|n| n.contains("narrowed")),
                "{:?}",
                r.confined.notes
            );
            assert_eq!(r.confined.namespaces, namespaces);
            out(&r)
        };
        let mode = if namespaces { "namespaces" } else { "floor" };
        let want = |lines: &[String]| lines.join("\n") + "\n";

        let got = narrowed(vec![&f.work.join("a"), &read.join("r1"), &outside]);
        assert_eq!(
            got,
            want(&[
                format!("wrote {w}/a/new"),
                format!("refused {w}/b/new"),
                format!("refused {w}/new"),
                format!("refused {o}/new"),
                format!("read {r}/r1/x"),
                format!("unread {r}/r2/x"),
                format!("unread {w}/b/old"),
                "system".into(),
            ]),
            "{mode}"
        );
        assert!(!f.work.join("b/new").exists() && !outside.join("new").exists());

        // A read-only directory stays read-only when narrowed to.
        let got = narrowed(vec![&read]);
        assert!(got.contains(&format!("refused {w}/a/new")), "{mode}: {got}");
        assert!(got.contains(&format!("read {r}/r2/x")), "{mode}: {got}");
        assert!(!read.join("r1/new").exists());

        let got = narrowed(Vec::new());
        assert!(
            !got.lines()
                .any(|l| l.starts_with("wrote") || l.starts_with("read "))
                && got.ends_with("system\n"),
            "{mode}: {got}"
        );

        let whole = exec(&ex, &script);
        assert!(out(&whole).contains(&format!("wrote {w}/b/new")), "{mode}");
        assert!(!whole.confined.notes.iter().any(|n| n.contains("narrowed")));
    }
}

/// Where no Landlock layer is enforced nothing could narrow the command:
/// a narrowed call is refused and runs nothing.
#[test]
fn a_narrowed_call_is_refused_where_landlock_is_not_enforced() {
    let f = fixture();
    let mut config = config(&f, ConfineMode::Off);
    config.namespaces = false;
    let ex = LocalShellExecutor::new(config);
    ex.start().unwrap();
    let marker = f.work.join("ran");
    let opts = ExecOptions {
        within: Some(vec![open_dir(&f.work)]),
        ..ExecOptions::default()
    };
    let e = ex
        .exec(&format!("touch {}", marker.display()), opts)
        .unwrap_err();
    assert_eq!(
        e.code(),
        sandgate_codes::ErrorCode::ConfineUnavailable,
        "{e}"
    );
    assert!(e.to_string().contains("narrow"), "{e}");
    assert!(!marker.exists());
}

/// PID 1 of the view shares the executor's memory, so procfs would show
/// the host process's command line (secrets passed as arguments included)
/// as PID 1's: the command reads nothing there, by either name, and its
/// own command line is still its own.
#[test]
fn pid_1_shows_nothing_of_the_hosts_command_line() {
    let f = fixture();
    let Some(ex) = in_namespaces("pid 1 command line", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    let host: Vec<u8> = fs::read("/proc/self/cmdline").unwrap();
    assert!(!host.is_empty());
    let r = exec(
        &ex,
        "for p in /proc/1/cmdline /proc/1/task/1/cmdline; do \
           printf '%s:' $p; wc -c < $p; \
         done; tr '\\0' ' ' < /proc/self/cmdline",
    );
    assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    let got = out(&r);
    assert!(
        got.starts_with("/proc/1/cmdline:0\n/proc/1/task/1/cmdline:0\n"),
        "{got} {}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(got.contains("tr "), "{got}");
    let argv0 = String::from_utf8_lossy(host.split(|&b| b == 0).next().unwrap()).into_owned();
    assert!(!got.contains(&argv0), "{got}");
}

/// A policy directory beneath a system directory (`/usr/src/app`, as
/// container images lay workspaces out): a narrowed call reads the system
/// directory, the rest of it included, but of the policy directory only
/// what lies beneath its own directories; the system paths every command
/// needs stay readable. On the floor and in namespaces. Needs root to make
/// a directory beneath `/usr` (skipped, saying so, otherwise).
#[test]
fn a_narrowed_call_reads_no_more_of_a_policy_dir_beneath_a_system_dir() {
    let usr_src = Path::new("/usr/src");
    if fs::create_dir_all(usr_src).is_err() {
        eprintln!("note: skipped: cannot make /usr/src here (not root)");
        return;
    }
    for namespaces in [false, true] {
        let Ok(dir) = tempfile::tempdir_in(usr_src) else {
            eprintln!("note: skipped: cannot make a directory beneath /usr/src (not root)");
            return;
        };
        let f = Fixture {
            work: dir.path().join("app"),
            dir,
        };
        fs::create_dir_all(f.work.join("a")).unwrap();
        fs::create_dir_all(f.work.join("b")).unwrap();
        fs::write(f.work.join("top"), "top\n").unwrap();
        fs::write(f.work.join("b/sec"), "sec\n").unwrap();
        fs::write(f.dir.path().join("beside"), "beside\n").unwrap();
        let mut config = config(&f, ConfineMode::BestEffort);
        config.namespaces = namespaces;
        let ex = if namespaces {
            match in_namespaces("policy dir beneath a system dir", config) {
                Some(ex) => ex,
                None => continue,
            }
        } else {
            let ex = LocalShellExecutor::new(config);
            ex.start().unwrap();
            ex
        };
        let w = f.work.display();
        let d = f.dir.path().display();
        let script = format!(
            "for t in {w}/top {w}/b/sec {w}/a/in {d}/beside /etc/passwd; do \
               if cat $t >/dev/null 2>&1; then echo read $t; else echo unread $t; fi; \
             done; \
             if ls {w} >/dev/null 2>&1; then echo listed; else echo unlisted; fi; \
             echo x > {w}/b/new 2>/dev/null || echo refused; \
             ls /usr/bin >/dev/null && echo system",
        );
        fs::write(f.work.join("a/in"), "in\n").unwrap();
        let opts = ExecOptions {
            within: Some(vec![open_dir(&f.work.join("a"))]),
            ..ExecOptions::default()
        };
        let r = ex.exec(&script, opts).unwrap();
        let mode = if namespaces { "namespaces" } else { "floor" };
        assert_eq!(r.confined.namespaces, namespaces);
        assert_eq!(
            out(&r),
            format!(
                "unread {w}/top\nunread {w}/b/sec\nread {w}/a/in\nread {d}/beside\n\
                 read /etc/passwd\nunlisted\nrefused\nsystem\n"
            ),
            "{mode}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        let whole = exec(&ex, &format!("cat {w}/top {w}/b/sec"));
        assert_eq!(out(&whole), "top\nsec\n", "{mode}");
    }
}

/// A file among the directories a call is narrowed to grants that file
/// (what the kernel allows on a file), not a failed start.
#[test]
fn a_call_narrowed_to_a_file_reaches_that_file() {
    for namespaces in [false, true] {
        let f = fixture();
        fs::write(f.work.join("file"), "in file\n").unwrap();
        fs::write(f.work.join("other"), "other\n").unwrap();
        let mut config = config(&f, ConfineMode::BestEffort);
        config.namespaces = namespaces;
        let ex = LocalShellExecutor::new(config);
        ex.start().unwrap();
        let file = rustix::fs::open(
            f.work.join("file").as_path(),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let w = f.work.display();
        let opts = ExecOptions {
            within: Some(vec![file]),
            ..ExecOptions::default()
        };
        let r = ex
            .exec(
                &format!("cat {w}/file; echo more >> {w}/file; cat {w}/other || echo refused"),
                opts,
            )
            .unwrap();
        assert_eq!(
            (r.exit_code, out(&r).as_str()),
            (0, "in file\nrefused\n"),
            "namespaces {namespaces}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        assert_eq!(
            fs::read_to_string(f.work.join("file")).unwrap(),
            "in file\nmore\n"
        );
    }
}

/// Runs `probe` (a Python script) as the shell's own process (`exec`, so
/// that its parent is PID 1); answers its stdout lines.
fn exec_python(ex: &LocalShellExecutor, probe: &str, args: &[String]) -> Vec<String> {
    let quoted = probe.replace('\'', r"'\''");
    let r = exec(
        ex,
        &format!("exec {PYTHON} -c '{quoted}' {}", args.join(" ")),
    );
    assert_eq!(
        r.exit_code,
        0,
        "probe failed: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    out(&r).lines().map(str::to_owned).collect()
}

/// PID 1 of the command's PID namespace runs in the executor's memory
/// (`clone(CLONE_VM)`, like the keeper), and the whole of the view's
/// `/proc` is granted: a command that reached PID 1's memory would read
/// and write the host process. `ptrace` and `process_vm_*` are refused by
/// the filter (`EPERM`); `/proc/1/mem` and `/proc/1/environ` (the
/// executor's environment) by Landlock's ptrace rule, PID 1 being outside
/// the command's domain (`EACCES`), `pidfd_getfd` (`EPERM`) and
/// `process_madvise` (`EACCES`) by the same rule, and `/proc/1/oom_score_adj`
/// (whose value would reach the executor, which shares PID 1's memory),
/// like `/proc/1/mem` opened for writing, by the view's `/proc` being
/// mounted read-only (`EROFS`), as Landlock's file rules grant it. Then
/// the same without Landlock. The keeper and the executor are outside the
/// PID namespace.
#[test]
fn a_command_in_namespaces_cannot_reach_pid_1s_memory() {
    if !Path::new(PYTHON).exists() {
        eprintln!("note: pid 1 memory skipped: no {PYTHON}");
        return;
    }
    let f = fixture();
    let Some(ex) = in_namespaces("pid 1 memory", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    let mut args = reach_support::memory_args();
    args.push("$PPID:1".into());
    let got = exec_python(&ex, reach_support::MEMORY_PROBE, &args);
    // The view's /proc is read-only: opened for writing, `EROFS` comes
    // before Landlock's answer.
    let refused = reach_support::all_refused(true, "EPERM", "EACCES", "EPERM", "EACCES")
        .replace("mem_rw=EACCES", "mem_rw=EROFS")
        .replace("oom_adj=EACCES", "oom_adj=EROFS");
    assert_eq!(got, std::slice::from_ref(&refused));
    assert_eq!(out(&exec(&ex, "echo $PPID")), "1\n");

    // Without Landlock (a kernel that lacks it, played), in the same
    // namespaces: PID 1 keeps every capability of the user namespace and
    // the command does not, so the kernel's own ptrace check refuses its
    // memory and environment; the view's /proc is mounted read-only, so
    // its per-process files refuse writing as Landlock's file rules
    // would. Before, `/proc/1/oom_score_adj` opened for writing (a value
    // written there reaches the executor's process, which shares PID 1's
    // memory), as did `coredump_filter` and `clear_refs`, which act on
    // that memory.
    let no_landlock = sandgate_shellexec::confine::prepare_with_abi(
        &ConfineSpec {
            write_dirs: vec![f.work.clone()],
            ..ConfineSpec::default()
        },
        ConfineMode::BestEffort,
        Some(0),
    )
    .unwrap();
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    let run = |program: &str, args: Vec<OsString>| {
        let r = ex
            .exec_program(
                Path::new(program),
                &args,
                &env,
                &no_landlock,
                ExecOptions::default(),
            )
            .unwrap();
        assert!(r.confined.namespaces, "{:?}", r.confined.notes);
        assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
        String::from_utf8_lossy(&r.stdout).into_owned()
    };
    let mut probe: Vec<OsString> = vec!["-c".into(), reach_support::MEMORY_PROBE.into()];
    probe.extend(reach_support::memory_args().into_iter().map(OsString::from));
    probe.push("1:1".into());
    assert_eq!(run(PYTHON, probe), refused + "\n");
    let writes = "for f in oom_score_adj coredump_filter clear_refs; do \
                    ( echo 1 > /proc/1/$f ) 2>/dev/null && echo \"wrote $f\" || echo \"refused $f\"; \
                  done; echo through > /proc/self/fd/1; echo through > /dev/stdout";
    assert_eq!(
        run("/bin/sh", vec!["-c".into(), writes.into()]),
        "refused oom_score_adj\nrefused coredump_filter\nrefused clear_refs\nthrough\nthrough\n"
    );
}

/// In namespaces the metadata of a host file outside the roots cannot be
/// changed (the file is not in the view: `ENOENT`), nor that of a file in
/// a read-only root (a read-only bind: `EROFS`): mode, owner (as root),
/// times and extended attributes, each checked on the file afterwards.
/// On the floor the same changes pass (tests/seccomp.rs).
#[test]
fn a_command_in_namespaces_cannot_change_host_files_metadata() {
    if !Path::new(PYTHON).exists() {
        eprintln!("note: metadata skipped: no {PYTHON}");
        return;
    }
    let f = fixture();
    let read_root = f.dir.path().join("read");
    fs::create_dir(&read_root).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut c = config(&f, ConfineMode::BestEffort);
    c.confine.read_dirs = vec![read_root.clone()];
    let Some(ex) = in_namespaces("metadata", c) else {
        return;
    };
    for (file, answer) in [
        (outside.path().join("host-file"), "ENOENT"),
        (read_root.join("file"), "EROFS"),
    ] {
        fs::write(&file, "host data").unwrap();
        let before = reach_support::metadata(&file);
        let got = exec_python(
            &ex,
            reach_support::METADATA_PROBE,
            &[file.display().to_string()],
        );
        assert_eq!(got, [reach_support::metadata_answers(answer)], "{file:?}");
        assert_eq!(reach_support::metadata(&file), before, "{file:?}");
    }
}

/// In namespaces the whole of the view's `/proc` is granted, and
/// `/proc/keys` lists every key the caller may view, in the host user's
/// keyrings too (the file is not per namespace): the command read the
/// descriptions of the host user's keys there, although every keyring
/// call is refused. It reads as empty now. The rest as on the floor:
/// `prctl(PR_SET_MM)` refused, `personality` allowed (its own process),
/// stdin not a terminal, `/dev/tty` granted by no rule, no virtual
/// console in the view, the keyring calls refused.
#[test]
fn a_command_in_namespaces_reads_none_of_the_host_users_keys() {
    if !Path::new(PYTHON).exists() {
        eprintln!("note: host keys skipped: no {PYTHON}");
        return;
    }
    let f = fixture();
    let Some(ex) = in_namespaces("host keys", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    let key = reach_support::HostKey::add();
    let host_keys = fs::read_to_string("/proc/keys").unwrap_or_default();
    let listed = key
        .as_ref()
        .is_some_and(|k| host_keys.contains(&k.description));
    if !listed {
        eprintln!("note: host keys skipped: no key listed in this host's /proc/keys");
    }
    let got = exec_python(
        &ex,
        reach_support::SESSION_PROBE,
        &reach_support::session_args(),
    );
    assert_eq!(
        got,
        [
            "set_mm=EPERM personality=ok stdin_tty=False tiocsti_stdin=ENOTTY \
          tiocsti_tty=open:EACCES tioclinux=open:ENOENT keyctl=EPERM add_key=EPERM \
          request_key=EPERM proc_keys="
        ]
    );
    let r = exec(&ex, "cat /proc/keys /proc/key-users");
    if let Some(k) = &key {
        assert!(!out(&r).contains(&k.description), "{}", out(&r));
    }
}

/// A lease (`fcntl(F_SETLEASE)`) on a file in a read root, which the
/// view binds read-only: the file is the host's own inode, and a command
/// that owns it (its user's file; root's user namespace maps root to
/// root, so as root any file of the view) took a write lease on it,
/// ignored the `SIGIO` asking for it back, and the host's opens of the
/// file waited until the command ended (up to the kernel's
/// `lease-break-time`), or failed with `EWOULDBLOCK` without blocking.
/// `F_SETLEASE` is refused, as on the floor.
#[test]
fn leak20_a_command_in_namespaces_cannot_hold_the_hosts_opens_with_a_lease() {
    if !Path::new(PYTHON).exists() {
        eprintln!("note: leases skipped: no {PYTHON}");
        return;
    }
    let f = fixture();
    let read = f.dir.path().join("read");
    fs::create_dir(&read).unwrap();
    let file = read.join("shared.txt");
    fs::write(&file, "host data").unwrap();
    let mut c = config(&f, ConfineMode::BestEffort);
    c.confine.read_dirs = vec![read.clone()];
    let Some(ex) = in_namespaces("leases", c) else {
        return;
    };
    let (got, nonblocking, took) = reach_support::lease_probe(&ex, &file, &f.work, 3);
    assert!(
        took < Duration::from_millis(1500) && nonblocking == "ok",
        "the host's open took {took:?} (without blocking: {nonblocking}) while the command held {got}"
    );
    assert_eq!(got, "refused EPERM", "a lease in the command");
}

/// Commands of one executor share its network namespace, and with it the
/// abstract UNIX socket names: where Landlock scopes abstract sockets
/// (ABI 6) a command reaches only its own listeners, but before that (an
/// old kernel, played here at ABI 5 and without Landlock) a command
/// connects to another command's abstract listener while both run. This
/// pins that documented gap, beside the scoped answer (`EPERM`) where the
/// kernel has scoping.
#[test]
fn oldabi17_before_scoping_concurrent_commands_share_abstract_sockets() {
    if !Path::new(PYTHON).exists() {
        eprintln!("note: abstract sockets skipped: no {PYTHON}");
        return;
    }
    let f = fixture();
    let Some(ex) = in_namespaces("abstract sockets", config(&f, ConfineMode::BestEffort)) else {
        return;
    };
    const LISTEN: &str = r#"
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind("\0" + sys.argv[1])
s.listen(1)
open(sys.argv[2], "w").close()
s.settimeout(0.05)
for _ in range(200):
    try:
        c, _ = s.accept()
        c.sendall(b"from-a")
        break
    except OSError:
        if os.path.exists(sys.argv[2] + ".done"):
            break
"#;
    const CONNECT: &str = r#"
import errno, os, socket, sys, time
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0" + sys.argv[1])
    print(s.recv(16).decode())
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
open(sys.argv[2] + ".done", "w").close()
"#;
    let env = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
    let kernel = sandgate_shellexec::confine::kernel_abi().unwrap_or(0);
    let mut cases = vec![(0, "from-a"), (5.min(kernel), "from-a")];
    if kernel >= 6 {
        cases.push((kernel, "EPERM"));
    }
    for (n, (abi, want)) in cases.into_iter().enumerate() {
        let prepared = sandgate_shellexec::confine::prepare_with_abi(
            &ConfineSpec {
                write_dirs: vec![f.work.clone()],
                ..ConfineSpec::default()
            },
            ConfineMode::BestEffort,
            Some(abi),
        )
        .unwrap();
        let name = format!("sandgate-oldabi17-{}-{n}", std::process::id());
        let ready = f.work.join(format!("ready-{n}"));
        let args = |probe: &str| -> Vec<OsString> {
            vec![
                "-c".into(),
                probe.into(),
                name.clone().into(),
                ready.clone().into(),
            ]
        };
        let got = std::thread::scope(|s| {
            let a = s.spawn(|| {
                ex.exec_program(
                    Path::new(PYTHON),
                    &args(LISTEN),
                    &env,
                    &prepared,
                    ExecOptions::default(),
                )
                .unwrap()
            });
            let b = ex
                .exec_program(
                    Path::new(PYTHON),
                    &args(CONNECT),
                    &env,
                    &prepared,
                    ExecOptions::default(),
                )
                .unwrap();
            let a = a.join().unwrap();
            assert!(a.confined.namespaces && b.confined.namespaces);
            assert_eq!(a.exit_code, 0, "{}", String::from_utf8_lossy(&a.stderr));
            assert_eq!(b.exit_code, 0, "{}", String::from_utf8_lossy(&b.stderr));
            out(&b)
        });
        assert_eq!(got, format!("{want}\n"), "ABI {abi}");
    }
}

/// In namespaces a command's `/proc/self/net` is its own network
/// namespace's: the host's listeners are not in its socket table (on the
/// floor they are: tests/seccomp.rs).
#[test]
fn in_namespaces_a_command_does_not_see_the_hosts_socket_table() {
    let f = fixture();
    let Some(ex) = in_namespaces(
        "in_namespaces_a_command_does_not_see_the_hosts_socket_table",
        config(&f, ConfineMode::BestEffort),
    ) else {
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Read by the shell itself (a program it starts reads its own
    // `/proc/self`, not the shell's).
    let r = exec(
        &ex,
        "while IFS= read -r l; do printf '%s\\n' \"$l\"; done < /proc/self/net/tcp",
    );
    let table = String::from_utf8_lossy(&r.stdout);
    assert!(
        table.lines().count() >= 1,
        "no socket table: {table} {}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(
        !table.contains(&format!(":{port:04X} ")),
        "the host's listener on {port} is in the command's socket table: {table}"
    );
}
