//! `sandgate mcp` at the edges of its transports: HTTP requests naming a
//! session the server does not hold, a standard input that cannot be read
//! as a stream, and the `--unix` socket file at a signal.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::{json, Value};

mod http_support;
use http_support::{http_session, ignored_here, policy_dir, sendable, start_http, Killed};

/// Waits (up to `secs`) until `cond` holds; answers whether it did.
fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// One HTTP/1.1 request to `port` on a new connection: the status, the
/// head and the body.
fn http(port: u16, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let (status, out) = http_support::http(port, method, headers, body);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (status, head.to_owned(), body.to_owned())
}

/// Asserts that an answer is the 404 refusing session `id`: a JSON-RPC
/// error, as JSON, naming the session and that it is not held.
fn assert_session_not_found(what: &str, id: &str, (status, head, body): (u16, String, String)) {
    assert_eq!(status, 404, "{what}: {head}\n{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{what}: not JSON: {head}"
    );
    let v: Value = serde_json::from_str(body.trim())
        .unwrap_or_else(|e| panic!("{what}: the body is not JSON ({e}): {body:?}"));
    assert_eq!(v["jsonrpc"], "2.0", "{what}: {v}");
    assert_eq!(v["id"], Value::Null, "{what}: {v}");
    assert_eq!(v["error"]["code"], -32001, "{what}: {v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(id) && msg.contains("session"),
        "{what}: the refusal does not name the session: {v}"
    );
}

/// A request naming a session this server never opened is answered 404
/// with a JSON-RPC error naming it, whatever its method: `DELETE`, a
/// `POST` of a call, a `GET` of the session's stream. (Before, `DELETE`
/// was answered 202 as though it had ended something, and `POST` and `GET`
/// 404 in plain text.)
#[test]
fn mcpedge23_a_request_naming_an_unknown_session_is_answered_404() {
    let dir = policy_dir();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let made_up = "0123456789abcdef0123456789abcdef";
    let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}).to_string();
    for (method, body) in [("DELETE", ""), ("POST", ping.as_str()), ("GET", "")] {
        let answer = http(
            port,
            method,
            &[("Authorization", &auth), ("Mcp-Session-Id", made_up)],
            body,
        );
        assert_session_not_found(method, made_up, answer);
    }
    // The server serves on: a real session opens and answers.
    let id = http_session(port, &auth);
    let (status, head, out) = http(
        port,
        "POST",
        &[("Authorization", &auth), ("Mcp-Session-Id", &id)],
        &ping,
    );
    assert_eq!(status, 200, "{head}\n{out}");
}

/// A session ended with `DELETE` is gone: a second `DELETE`, a `POST` and
/// a `GET` naming it are answered 404 with the JSON-RPC error, and only
/// the first `DELETE` is 2xx.
#[test]
fn mcpedge23_a_request_naming_an_ended_session_is_answered_404() {
    let dir = policy_dir();
    let (_server, port, token) = start_http(dir.path());
    let auth = format!("Bearer {token}");
    let id = http_session(port, &auth);
    let (status, head, out) = http(
        port,
        "DELETE",
        &[("Authorization", &auth), ("Mcp-Session-Id", &id)],
        "",
    );
    assert!((200..300).contains(&status), "{head}\n{out}");
    let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}).to_string();
    for (method, body) in [("DELETE", ""), ("POST", ping.as_str()), ("GET", "")] {
        let answer = http(
            port,
            method,
            &[("Authorization", &auth), ("Mcp-Session-Id", &id)],
            body,
        );
        assert_session_not_found(method, &id, answer);
    }
}

/// Without the token, a request naming an unknown session is still
/// answered 401: the token is judged first, so nobody without it learns
/// which sessions exist.
#[test]
fn mcpedge23_an_unknown_session_without_the_token_is_answered_401() {
    let dir = policy_dir();
    let (_server, port, _token) = start_http(dir.path());
    for method in ["DELETE", "POST", "GET"] {
        let (status, head, _) = http(port, method, &[("Mcp-Session-Id", "nope")], "");
        assert_eq!(status, 401, "{method}: {head}");
    }
}

/// `sandgate mcp` whose standard input is a directory (`< /`) says that
/// its input cannot be read as a stream and why (the system's words),
/// and exits non-zero (before, it said only "connection closed").
#[test]
fn mcpedge23_stdin_a_directory_is_named_as_the_failure() {
    let dir = policy_dir();
    let out = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["mcp", "--policy"])
        .arg(dir.path().join("policy.toml"))
        .stdin(fs::File::open("/").unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("standard input") && err.contains("Is a directory"),
        "the failure is not named: {err}"
    );
    assert!(out.stdout.is_empty(), "wrote {:?}", out.stdout);
}

/// `sandgate mcp --unix` on `dir`'s policy at `dir/mcp.sock`.
fn start_unix(dir: &Path) -> (Killed, std::path::PathBuf) {
    let sock = dir.join("mcp.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["mcp", "--policy"])
        .arg(dir.join("policy.toml"))
        .arg("--unix")
        .arg(&sock)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child = Killed(child);
    assert!(
        eventually(10, || std::os::unix::net::UnixStream::connect(&sock)
            .is_ok()),
        "no socket"
    );
    (child, sock)
}

/// Sends `sig` to `child` and waits for it to exit: its status.
fn signal_and_wait(child: &mut Killed, sig: Signal) -> std::process::ExitStatus {
    let pid = rustix::process::Pid::from_raw(child.0.id() as i32).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.0.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM and SIGINT end `--unix` with 128 + n and remove its socket
/// file, as no server listens on it any more (before, the file stayed
/// until the next start replaced it).
#[test]
fn mcpedge23_unix_socket_is_removed_at_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    for sig in sendable(&[Signal::TERM, Signal::INT]) {
        let dir = policy_dir();
        let (mut server, sock) = start_unix(dir.path());
        let st = signal_and_wait(&mut server, sig);
        assert_eq!(st.code(), Some(128 + sig.as_raw()), "{sig:?}: {st:?}");
        assert_eq!(st.signal(), None);
        assert!(
            fs::symlink_metadata(&sock).is_err(),
            "{sig:?}: the socket file is left"
        );
        // Nothing else is left beside it (the private staging directory).
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "{sig:?}: {left:?}");
    }
}

/// A file put at the socket's path while the server ran (the socket
/// removed, another file written there) is not the server's: a signal
/// leaves it as it is.
#[test]
fn mcpedge23_unix_a_file_swapped_in_at_the_path_survives_a_signal() {
    let dir = policy_dir();
    let (mut server, sock) = start_unix(dir.path());
    fs::remove_file(&sock).unwrap();
    fs::write(&sock, "someone else's\n").unwrap();
    let st = signal_and_wait(&mut server, Signal::TERM);
    assert_eq!(st.code(), Some(128 + Signal::TERM.as_raw()), "{st:?}");
    assert_eq!(fs::read_to_string(&sock).unwrap(), "someone else's\n");
    // A socket swapped in (another listener's) survives too.
    let (mut server, sock2) = {
        let d2 = policy_dir();
        let (s, p) = start_unix(d2.path());
        (s, (p, d2))
    };
    let (sock2, _d2) = sock2;
    fs::remove_file(&sock2).unwrap();
    let other = std::os::unix::net::UnixListener::bind(&sock2).unwrap();
    let sig = sendable(&[Signal::INT, Signal::TERM])[0];
    let st = signal_and_wait(&mut server, sig);
    assert_eq!(st.code(), Some(128 + sig.as_raw()), "{st:?}");
    assert!(
        std::os::unix::net::UnixStream::connect(&sock2).is_ok(),
        "the other listener's socket was removed"
    );
    drop(other);
}

/// Starts `sandgate mcp` with `args` on `dir`'s policy and sends `sig` the
/// moment `file` appears (looked for without a pause), then waits for it
/// to exit: its status.
fn signal_when_it_appears(
    dir: &Path,
    args: &[&std::ffi::OsStr],
    file: &Path,
    sig: Signal,
) -> std::process::ExitStatus {
    let mut server = Killed(
        Command::new(env!("CARGO_BIN_EXE_sandgate"))
            .args(["mcp", "--policy"])
            .arg(dir.join("policy.toml"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while fs::symlink_metadata(file).is_err() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            file.display()
        );
        if let Some(st) = server.0.try_wait().unwrap() {
            panic!(
                "the server exited before {} appeared: {st:?}",
                file.display()
            );
        }
        std::hint::spin_loop();
    }
    signal_and_wait(&mut server, sig)
}

/// A signal that comes as soon as the socket or the token file is at its
/// path still removes it and ends the server with 128 + n. Before, the
/// socket was put at its path before the signals were handled (and the
/// token file made before it was registered): a SIGTERM between the two
/// ended the server by the signal itself and left the file.
#[test]
fn mcpedge24_a_signal_the_moment_the_file_appears_removes_it() {
    use std::os::unix::process::ExitStatusExt;
    let sigs = sendable(&[Signal::TERM, Signal::INT, Signal::HUP]);
    for round in 0..12 {
        let sig = sigs[round % sigs.len()];
        let dir = policy_dir();
        let sock = dir.path().join("mcp.sock");
        let st = signal_when_it_appears(
            dir.path(),
            &["--unix".as_ref(), sock.as_os_str()],
            &sock,
            sig,
        );
        assert_eq!(
            st.signal(),
            None,
            "round {round}, socket: ended by {sig:?} itself"
        );
        assert_eq!(st.code(), Some(128 + sig.as_raw()), "round {round}: {st:?}");
        assert!(
            fs::symlink_metadata(&sock).is_err(),
            "round {round}: {sig:?} left the socket file"
        );
        let dir = policy_dir();
        let tok = dir.path().join("tok");
        let st = signal_when_it_appears(
            dir.path(),
            &[
                "--http".as_ref(),
                "127.0.0.1:0".as_ref(),
                "--token-file".as_ref(),
                tok.as_os_str(),
            ],
            &tok,
            sig,
        );
        assert_eq!(
            st.signal(),
            None,
            "round {round}, token: ended by {sig:?} itself"
        );
        assert_eq!(st.code(), Some(128 + sig.as_raw()), "round {round}: {st:?}");
        assert!(
            fs::symlink_metadata(&tok).is_err(),
            "round {round}: {sig:?} left the token file"
        );
    }
}

/// A signal the server inherited as ignored (`env --ignore-signal`, as a
/// background job of a script inherits SIGINT) stays ignored: the server
/// serves on and keeps its token file; SIGTERM then ends it with 143 and
/// removes the file.
#[test]
fn mcpedge25_a_signal_inherited_as_ignored_stays_ignored() {
    let probe = Command::new("env")
        .args(["--ignore-signal=INT", "true"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("note: skipped: this env cannot start a program with a signal ignored");
        return;
    }
    if ignored_here(Signal::TERM) {
        eprintln!("note: skipped: SIGTERM is ignored in this test's process");
        return;
    }
    for (sig, name) in [(Signal::INT, "INT"), (Signal::HUP, "HUP")] {
        let dir = policy_dir();
        let tok = dir.path().join("tok");
        let mut server = Killed(
            Command::new("env")
                .arg(format!("--ignore-signal={name}"))
                .arg(env!("CARGO_BIN_EXE_sandgate"))
                .args(["mcp", "--policy"])
                .arg(dir.path().join("policy.toml"))
                .args(["--http", "127.0.0.1:0", "--token-file"])
                .arg(&tok)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut err = std::io::BufReader::new(server.0.stderr.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut err, &mut line).unwrap();
        let port = http_support::http_port(&line).expect("a port on stderr");
        let token = fs::read_to_string(&tok).unwrap();
        let pid = rustix::process::Pid::from_raw(server.0.id() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            server.0.try_wait().unwrap(),
            None,
            "{name} ended the server"
        );
        // It opens a session (asserting the answers) as a live server does.
        http_session(port, &format!("Bearer {}", token.trim()));
        assert_eq!(fs::read_to_string(&tok).unwrap(), token, "{name}");
        let st = signal_and_wait(&mut server, Signal::TERM);
        assert_eq!(
            st.code(),
            Some(128 + Signal::TERM.as_raw()),
            "{name}: {st:?}"
        );
        assert!(
            fs::symlink_metadata(&tok).is_err(),
            "{name}: the token file was left"
        );
    }
}
