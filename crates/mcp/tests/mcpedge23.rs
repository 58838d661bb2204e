//! The MCP server as a library serving two transports in one process:
//! each removes its own file (socket, token file) at SIGTERM. The case
//! runs in a child process (this test binary re-executed with
//! `SANDGATE_MCP_EDGE23_CHILD` set to the directory to work in), since the
//! signals' handling is the whole process's.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "SANDGATE_MCP_EDGE23_CHILD";

/// In the child only: serves `--unix` at `a.sock` and `b.sock` and HTTP
/// with its token at `tok`, each on a thread of its own, until a signal
/// ends the process; a transport that fails says so and exits 1.
#[test]
fn mcpedge23_child_two_sockets() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let dir = Path::new(&dir).to_owned();
    let policy = sandgate_mcp::policy_for_dirs(&[dir.join("ws")]).unwrap();
    let listens = [
        sandgate_mcp::Listen::Unix(dir.join("a.sock")),
        sandgate_mcp::Listen::Unix(dir.join("b.sock")),
        sandgate_mcp::Listen::Http("127.0.0.1:0".parse().unwrap(), dir.join("tok")),
    ];
    for listen in listens {
        let server = sandgate_mcp::Server::from_policy(&policy, None, Vec::new()).unwrap();
        std::thread::spawn(move || {
            let e = server.serve_blocking(listen.clone());
            eprintln!("SERVE-ENDED {listen:?}: {e:?}");
            std::process::exit(1);
        });
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(60));
}

/// Two `--unix` sockets and an HTTP token file served by one process are
/// each made, and each removed when SIGTERM ends it with 143 (before, the
/// second transport failed to start: the first had taken the process's
/// signal handling for its own file).
#[test]
fn mcpedge23_two_transports_in_one_process_each_remove_their_file_at_a_signal() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "mcpedge23_child_two_sockets",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let files = ["a.sock", "b.sock", "tok"].map(|f| tmp.path().join(f));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !files.iter().all(|f| f.exists()) {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "not every transport started ({:?}): {}",
                files.iter().map(|f| f.exists()).collect::<Vec<_>>(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(143),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for f in &files {
        assert!(!f.exists(), "{} is left", f.display());
    }
}
