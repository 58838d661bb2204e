//! The executor inside a host that takes signals without `SA_RESTART`: a
//! thread sends SIGALRM to every other thread of this process (the
//! executor's own included) every millisecond, its handler installed with
//! plain `sigaction`, as an embedding runtime's timers and preemption
//! signals do. What a command sees must not change: no `EINTR` that the
//! command's own threads never received. The storm is process-wide, so
//! these tests live in a binary of their own.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::thread;
use std::time::Duration;

use sandgate_shellexec::confine::{kernel_abi, ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{ExecConfig, ExecOptions, LocalShellExecutor, ShellExecutor};

mod floor_support;
use floor_support::floor_executor;

extern "C" fn on_alarm(_: libc::c_int) {}

fn storm() {
    static START: Once = Once::new();
    START.call_once(|| {
        // SAFETY: a zeroed sigaction filled with a handler that does nothing.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_alarm as *const () as usize;
            sa.sa_flags = 0; // no SA_RESTART
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut()), 0);
        }
        thread::spawn(|| {
            // SAFETY: gettid has no preconditions.
            let me = unsafe { libc::gettid() };
            let pid = std::process::id() as libc::pid_t;
            loop {
                for t in fs::read_dir("/proc/self/task")
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok())
                    else {
                        continue;
                    };
                    if tid != me {
                        // SAFETY: a signal to a thread of this process,
                        // whose handler does nothing.
                        unsafe {
                            libc::syscall(libc::SYS_tgkill, pid, tid as libc::pid_t, libc::SIGALRM)
                        };
                    }
                }
                thread::sleep(Duration::from_millis(1));
            }
        });
    });
}

const PERL: &str = "/usr/bin/perl";

/// A UNIX listener at `path` whose queue holds one connection (backlog 0).
fn tight_listener(path: &Path) -> libc::c_int {
    // SAFETY: a socket and a sockaddr_un filled within its bounds.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = path.as_os_str().as_bytes();
        assert!(bytes.len() < addr.sun_path.len());
        for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
            *d = *s as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, (&addr as *const libc::sockaddr_un).cast(), len),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        let fl = libc::fcntl(fd, libc::F_GETFL);
        assert_eq!(libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK), 0);
        fd
    }
}

/// On the floor where the executor performs a command's connects (before
/// Landlock ABI 9), a blocking connect that waits for a full listener is
/// performed on a thread of the executor. A signal of the host to that
/// thread used to end the wait and hand the command `EINTR` (with the send
/// timeout the executor sets, even a handler with `SA_RESTART` did).
#[test]
fn eintr21_a_judged_connect_that_waits_is_not_interrupted_by_the_hosts_signals() {
    let Some(kernel) = kernel_abi() else {
        eprintln!("no Landlock here; skipped");
        return;
    };
    if !Path::new(PERL).exists() {
        eprintln!("no perl here; skipped");
        return;
    }
    let w = tempfile::tempdir().unwrap();
    let dir: PathBuf = w.path().canonicalize().unwrap();
    let spec = ConfineSpec {
        write_dirs: vec![dir.clone()],
        ..ConfineSpec::default()
    };
    let prepared = sandgate_shellexec::confine::prepare_with_abi(
        &spec,
        ConfineMode::BestEffort,
        Some(kernel.min(8)),
    )
    .unwrap();
    if !prepared
        .report()
        .seccomp_refuses
        .iter()
        .any(|r| r.contains("judged by the executor") && r.starts_with("listen"))
    {
        eprintln!("no seccomp user notification here; skipped");
        return;
    }
    let ex = floor_executor(Duration::from_secs(20));
    storm();

    let sock = dir.join("full.sock");
    // One connect fills the queue without waiting; the next waits until
    // the listener takes the first, 300 ms later.
    let script = format!(
        "use Socket; use Fcntl;\n\
         my $a = pack_sockaddr_un('{p}');\n\
         socket(my $f, PF_UNIX, SOCK_STREAM, 0) or die;\n\
         fcntl($f, F_SETFL, O_NONBLOCK);\n\
         connect($f, $a) or die \"first: $!\\n\";\n\
         socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die;\n\
         connect($s, $a) or die \"second: $!\\n\";\n\
         print \"connected\\n\";\n",
        p = sock.display()
    );
    for round in 0..3 {
        let _ = fs::remove_file(&sock);
        let listener = tight_listener(&sock);
        let taker = thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            // Accepted sockets stay open until the listener closes.
            let mut taken = Vec::new();
            let deadline = std::time::Instant::now() + Duration::from_secs(3);
            while taken.len() < 2 && std::time::Instant::now() < deadline {
                // SAFETY: the listener is this test's; no address asked.
                let c = unsafe {
                    libc::accept4(
                        listener,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        libc::SOCK_NONBLOCK,
                    )
                };
                if c >= 0 {
                    taken.push(c);
                } else {
                    thread::sleep(Duration::from_millis(5));
                }
            }
            thread::sleep(Duration::from_millis(200));
            for c in taken.into_iter().chain([listener]) {
                // SAFETY: descriptors this thread owns, closed once.
                unsafe { libc::close(c) };
            }
        });
        let r = ex
            .exec_program(
                Path::new(PERL),
                &["-e".into(), script.clone().into()],
                &[("PATH".into(), "/usr/bin:/bin".into())],
                &prepared,
                ExecOptions::default(),
            )
            .unwrap();
        taker.join().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&r.stdout),
            "connected\n",
            "round {round}: exit {}, stderr: {}",
            r.exit_code,
            String::from_utf8_lossy(&r.stderr)
        );
    }
}

/// Children of this process that have exited and are not reaped.
fn zombies() -> Vec<i32> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …: the comm may hold blanks, so split after it.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.first() == Some(&"Z") && f.get(1) == Some(&me.as_str()) {
            out.push(pid);
        }
    }
    out
}

/// An executor started while the host's signals interrupt its waits
/// leaves no child of its namespace probes unreaped.
#[test]
fn eintr21_starting_executors_under_a_signal_storm_leaves_no_zombie() {
    storm();
    for _ in 0..20 {
        let ex = LocalShellExecutor::new(ExecConfig {
            shell: PathBuf::from("/bin/sh"),
            default_timeout: Duration::from_secs(20),
            max_output_bytes: 1 << 20,
            env_inherit: Vec::new(),
            confine_mode: ConfineMode::BestEffort,
            confine: ConfineSpec::default(),
            limits: Default::default(),
            grace: Duration::from_millis(500),
            host_env: Some(vec![("PATH".into(), "/usr/bin:/bin".into())]),
            namespaces: true,
            protected: None,
        });
        ex.start().unwrap();
        drop(ex);
    }
    thread::sleep(Duration::from_millis(500));
    let first = zombies();
    thread::sleep(Duration::from_millis(500));
    let left: Vec<i32> = zombies()
        .into_iter()
        .filter(|p| first.contains(p))
        .collect();
    assert!(left.is_empty(), "unreaped children: {left:?}");
}
