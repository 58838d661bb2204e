//! The MCP server as a library under a file size limit (`ulimit -f`): a
//! write past it raises `SIGXFSZ`, whose default action ends the program
//! embedding the library. Each case runs in a child process (this test
//! binary re-executed with `SANDGATE_MCP_FSIZE21_CHILD` set to the
//! directory to work in) whose limit and signal disposition are the
//! default's but for the limit.

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::SystemTime;

use sandgate::{AuditEvent, ErrorCode};

const CHILD: &str = "SANDGATE_MCP_FSIZE21_CHILD";
const LIMIT: u64 = 4096;

fn set_limit() {
    let limit = rustix::process::Rlimit {
        current: Some(LIMIT),
        maximum: Some(LIMIT),
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit).unwrap();
}

fn child(test: &str, dir: &Path) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD, dir)
        .output()
        .unwrap()
}

fn assert_lived(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("FSIZE-OK"),
        "the child (signal {:?}): {}\n{stdout}\n{}",
        out.status.signal(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn event() -> AuditEvent {
    AuditEvent {
        op: "read",
        path: "a.txt".into(),
        size: Some(3),
        time: SystemTime::now(),
        outcome: ErrorCode::Ok,
        exit_code: None,
        limit: None,
    }
}

/// In the child only: an audit file already at the limit takes no more
/// records; each is lost (said on stderr), and the process lives on.
#[test]
fn fsize21_child_audit() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let path = Path::new(&dir).join("audit.jsonl");
    let sink = sandgate_mcp::audit::json_lines_file(&path, None).unwrap();
    set_limit();
    sink(&event());
    sink(&event());
    println!("FSIZE-OK");
}

/// A record that would pass the file size limit is lost, reported as the
/// audit file's other lost records are, instead of ending the program with
/// `SIGXFSZ`; the file is left as it was.
#[test]
fn fsize21_an_audit_record_past_the_file_size_limit_does_not_kill_the_embedder() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let full = vec![b'\n'; LIMIT as usize - 10];
    fs::write(tmp.path().join("audit.jsonl"), &full).unwrap();
    let out = child("fsize21_child_audit", tmp.path());
    assert_lived(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a record was lost"), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    assert_eq!(fs::read(tmp.path().join("audit.jsonl")).unwrap(), full);
}

/// In the child only: under a file size limit of 0 (`ulimit -f 0`), the
/// HTTP server cannot write its token file: it fails naming the file, and
/// leaves none behind.
#[test]
fn fsize21_child_token() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let dir = Path::new(&dir);
    let policy = sandgate_mcp::policy_for_dirs(&[dir.join("ws")]).unwrap();
    let server = sandgate_mcp::Server::from_policy(&policy, None, Vec::new()).unwrap();
    let limit = rustix::process::Rlimit {
        current: Some(0),
        maximum: Some(LIMIT),
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit).unwrap();
    let token = dir.join("token");
    let listen = sandgate_mcp::Listen::Http("127.0.0.1:0".parse().unwrap(), token.clone());
    let e = server.serve_blocking(listen).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge, "{e}");
    assert!(e.to_string().contains(&token.display().to_string()), "{e}");
    assert!(!token.exists());
    println!("FSIZE-OK");
}

/// The HTTP server's token file under a file size limit too small for the
/// token fails the start with `EFBIG` naming the file, instead of ending
/// the program with `SIGXFSZ`.
#[test]
fn fsize21_a_token_file_past_the_file_size_limit_does_not_kill_the_embedder() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("ws")).unwrap();
    assert_lived(&child("fsize21_child_token", tmp.path()));
    assert!(!tmp.path().join("token").exists());
}

/// In the child only: under a file size limit of 0, an audit sink that is
/// not a regular file (`/dev/null` here; a terminal, a pipe), which the
/// limit does not bound, still takes every record.
#[test]
fn fsize21_child_audit_device() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let sink = sandgate_mcp::audit::json_lines_file(Path::new("/dev/null"), None).unwrap();
    let limit = rustix::process::Rlimit {
        current: Some(0),
        maximum: Some(LIMIT),
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit).unwrap();
    sink(&event());
    println!("FSIZE-OK");
}

/// The limit bounds regular files only: an audit to a device is not
/// refused records for it.
#[test]
fn fsize21_an_audit_device_is_not_bound_by_the_file_size_limit() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = child("fsize21_child_audit_device", tmp.path());
    assert_lived(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("lost"), "{stderr}");
}

/// In the child only (its stdout a regular file, its stdin a pipe holding
/// one request): with the file size limit at what the file already holds
/// plus 10 bytes, the stdio server's answer does not fit; serving ends
/// without the process being ended by `SIGXFSZ`.
#[test]
fn fsize21_child_stdio() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let dir = std::env::var_os(CHILD).unwrap();
    let dir = Path::new(&dir);
    let policy = sandgate_mcp::policy_for_dirs(&[dir.join("ws")]).unwrap();
    let server = sandgate_mcp::Server::from_policy(&policy, None, Vec::new()).unwrap();
    let at = fs::metadata("/proc/self/fd/1").unwrap().len();
    let limit = |current| rustix::process::Rlimit {
        current,
        maximum: None,
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit(Some(at + 10))).unwrap();
    let _ = server.serve_blocking(sandgate_mcp::Listen::Stdio);
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit(None)).unwrap();
    eprintln!("FSIZE-OK");
}

/// The stdio server whose standard output is a regular file (a transcript)
/// keeps to the file size limit: an answer past it is a failed write, not
/// a `SIGXFSZ` that ends the program.
#[test]
fn fsize21_a_stdio_answer_past_the_file_size_limit_does_not_kill_the_embedder() {
    use std::io::Write;
    use std::process::Stdio;
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("ws")).unwrap();
    let transcript = fs::File::create(tmp.path().join("out")).unwrap();
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fsize21_child_stdio", "--nocapture"])
        .env(CHILD, tmp.path())
        .stdin(Stdio::piped())
        .stdout(transcript)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let mut stdin = c.stdin.take().unwrap();
    stdin.write_all(format!("{init}\n").as_bytes()).unwrap();
    drop(stdin);
    let out = c.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("FSIZE-OK"),
        "the child (signal {:?}): {}\n{stderr}",
        out.status.signal(),
        out.status,
    );
}

/// In the child only (its stderr a regular file): with the limit at what
/// stderr already holds, the audit's record is lost, and the message
/// saying so cannot be written either; the process lives on.
#[test]
fn fsize21_child_stderr() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let path = Path::new(&dir).join("audit.jsonl");
    let sink = sandgate_mcp::audit::json_lines_file(&path, None).unwrap();
    let at = fs::metadata("/proc/self/fd/2").unwrap().len();
    let limit = |current| rustix::process::Rlimit {
        current,
        maximum: None,
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit(Some(at))).unwrap();
    sink(&event());
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit(None)).unwrap();
    println!("FSIZE-OK");
}

/// The server's messages on stderr keep to the file size limit where
/// stderr is a regular file (a log): one that does not fit is not
/// written, rather than ending the program with `SIGXFSZ`.
#[test]
fn fsize21_a_message_past_the_file_size_limit_does_not_kill_the_embedder() {
    use std::process::Stdio;
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("audit.jsonl"), vec![b'\n'; LIMIT as usize]).unwrap();
    let log = fs::File::create(tmp.path().join("log")).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fsize21_child_stderr", "--nocapture"])
        .env(CHILD, tmp.path())
        .stderr(log)
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_lived(&out);
    let log = fs::read_to_string(tmp.path().join("log")).unwrap();
    assert!(!log.contains("lost"), "{log}");
}
