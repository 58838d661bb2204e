//! A file its owner may not write (`chmod a-w`) is not replaced through the
//! binary's doors either: `sandgate tool` (write with overwrite, edit) and
//! `sandgate mcp` (`write_file`, which always replaces, and `edit_file`,
//! a dry run included) refuse it to an unprivileged caller with `E_IO`
//! naming the file, and leave it as it was; root, whom the kernel lets
//! write a 0444 file, replaces it. A writable file is replaced either way,
//! and `move_file` onto a read-only file is `E_EXISTS` as onto any file.

mod mcp_support;

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{json, Value};

use mcp_support::{tool_session, McpSession};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn setup() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    fs::create_dir(&ws).unwrap();
    for (name, text, mode) in [
        ("ro.txt", "KEEP alpha\n", 0o444),
        ("ro2.txt", "KEEP alpha\n", 0o444),
        ("rw.txt", "old alpha\n", 0o644),
        ("src.txt", "src\n", 0o644),
    ] {
        fs::write(ws.join(name), text).unwrap();
        fs::set_permissions(ws.join(name), fs::Permissions::from_mode(mode)).unwrap();
    }
    fs::write(
        tmp.path().join("policy.toml"),
        "[fs]\nread_roots = [\"ws\"]\nwrite_root = \"ws\"\nallow_overwrite = true\n",
    )
    .unwrap();
    tmp
}

fn listing(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

fn names() -> BTreeSet<String> {
    ["ro.txt", "ro2.txt", "rw.txt", "src.txt"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn read(ws: &Path, name: &str) -> String {
    fs::read_to_string(ws.join(name)).unwrap()
}

fn assert_refused_answer(a: &Value, path: &str) {
    assert_eq!(a["ok"], json!(false), "{a}");
    assert_eq!(a["error"]["code"], json!("E_IO"), "{a}");
    assert_eq!(a["error"]["path"], json!(path), "{a}");
    let msg = a["error"]["message"].as_str().unwrap();
    assert!(msg.contains("may not write the file"), "{a}");
}

#[test]
fn readonly23_the_json_endpoint_does_not_replace_a_read_only_file() {
    let tmp = setup();
    let ws = tmp.path().join("ws");
    let answers = tool_session(
        &tmp.path().join("policy.toml"),
        &[
            json!({"op":"write","path":"ro.txt","content":"REPLACED\n","overwrite":true}),
            json!({"op":"edit","path":"ro2.txt","old":"alpha","new":"ALPHA"}),
            json!({"op":"write","path":"rw.txt","content":"new\n","overwrite":true}),
            json!({"op":"rename","from":"src.txt","to":"ro.txt"}),
        ],
    );
    if is_root() {
        assert_eq!(answers[0]["ok"], json!(true), "{}", answers[0]);
        assert_eq!(answers[1]["ok"], json!(true), "{}", answers[1]);
        assert_eq!(read(&ws, "ro.txt"), "REPLACED\n");
        assert_eq!(read(&ws, "ro2.txt"), "KEEP ALPHA\n");
    } else {
        assert_refused_answer(&answers[0], "ro.txt");
        assert_refused_answer(&answers[1], "ro2.txt");
        assert_eq!(read(&ws, "ro.txt"), "KEEP alpha\n");
        assert_eq!(read(&ws, "ro2.txt"), "KEEP alpha\n");
    }
    assert_eq!(answers[2]["ok"], json!(true), "{}", answers[2]);
    assert_eq!(read(&ws, "rw.txt"), "new\n");
    assert_eq!(
        answers[3]["error"]["code"],
        json!("E_EXISTS"),
        "{}",
        answers[3]
    );
    assert_eq!(read(&ws, "src.txt"), "src\n");
    assert_eq!(listing(&ws), names());
}

/// A tool call's outcome: `Ok(text)` or `Err(text)` of a tool error.
fn call(m: &mut McpSession, name: &str, args: Value) -> Result<String, String> {
    let v = m.request("tools/call", json!({"name":name,"arguments":args}));
    assert!(v.get("error").is_none(), "{v}");
    let text = v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match v["result"]["isError"] == json!(true) {
        true => Err(text),
        false => Ok(text),
    }
}

#[test]
fn readonly23_the_mcp_server_does_not_replace_a_read_only_file() {
    let tmp = setup();
    let ws = tmp.path().join("ws");
    let policy = tmp.path().join("policy.toml");
    let mut m = McpSession::start(
        [std::ffi::OsStr::new("--policy"), policy.as_os_str()],
        "ro23",
    );
    let w = call(
        &mut m,
        "write_file",
        json!({"path":"ro.txt","content":"REPLACED\n"}),
    );
    let edit = |dry: bool| json!({"path":"ro2.txt","edits":[{"oldText":"alpha","newText":"ALPHA"}],"dryRun":dry});
    let d = call(&mut m, "edit_file", edit(true));
    let e = call(&mut m, "edit_file", edit(false));
    if is_root() {
        assert!(w.is_ok(), "{w:?}");
        assert!(d.is_ok(), "{d:?}");
        assert!(e.is_ok(), "{e:?}");
        assert_eq!(read(&ws, "ro.txt"), "REPLACED\n");
        assert_eq!(read(&ws, "ro2.txt"), "KEEP ALPHA\n");
    } else {
        for (r, name) in [(&w, "ro.txt"), (&d, "ro2.txt"), (&e, "ro2.txt")] {
            let text = r.clone().unwrap_err();
            assert!(text.starts_with("E_IO"), "{text}");
            assert!(text.contains(name), "{text}");
            assert!(text.contains("may not write the file"), "{text}");
        }
        assert_eq!(read(&ws, "ro.txt"), "KEEP alpha\n");
        assert_eq!(read(&ws, "ro2.txt"), "KEEP alpha\n");
    }
    let r = call(
        &mut m,
        "write_file",
        json!({"path":"rw.txt","content":"new\n"}),
    );
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(read(&ws, "rw.txt"), "new\n");
    let mv = call(
        &mut m,
        "move_file",
        json!({"source":"src.txt","destination":"ro.txt"}),
    );
    assert!(mv.clone().unwrap_err().starts_with("E_EXISTS"), "{mv:?}");
    assert_eq!(listing(&ws), names());
}
