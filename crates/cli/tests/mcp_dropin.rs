//! `sandgate mcp DIR` as a drop-in for the reference filesystem server:
//! the answers a host or a model acts on are the reference's (edit_file's
//! diff, get_file_info's fields, directory_tree's JSON), each
//! expected text taken from the reference server (2026.8.31) run on the
//! same files. Driven over stdio as a host drives it; the server binary can
//! be replaced with `SANDGATE_MCP_BIN` (to run these against another build).

mod mcp_support;

use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use mcp_support::McpSession;

struct Server(McpSession);

impl Server {
    /// `sandgate mcp DIR`, the reference server's form, initialized.
    fn start(dir: &Path) -> Server {
        Server(McpSession::start([dir], "dropin"))
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.0.request(method, params)
    }

    /// A tool's answer: whether it is an error, and its first text block
    /// (which structuredContent.content repeats when it is not).
    fn call(&mut self, tool: &str, args: Value) -> (bool, String) {
        let v = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let r = &v["result"];
        let text = r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let is_error = r["isError"] == json!(true);
        if !is_error {
            assert_eq!(r["structuredContent"]["content"], json!(text), "{v}");
        }
        (is_error, text)
    }
}

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap().join("proj");
    fs::create_dir(&dir).unwrap();
    (tmp, dir)
}

const RULE: &str = "===================================================================";

/// `edit_file`'s diff is the reference's, with its `Index:` header,
/// tab-labelled file lines and counted ranges, in a fence longer than any
/// run of backticks it holds. The edits are the sandbox's: an `oldText`
/// that occurs only with other whitespace, or with LF where the file has
/// CRLF, is not found (the reference would match it line by line; an edit
/// replaces an exact string), and one found twice is refused.
#[test]
fn edit_file_diffs_as_the_reference_server_and_matches_exactly() {
    let (_tmp, dir) = project();
    let code = "def f():\n    x = 1\n    y = 2\n    return x\n";
    fs::write(dir.join("code.py"), code).unwrap();
    fs::write(dir.join("crlf.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
    let mut s = Server::start(&dir);
    let p = dir.join("code.py").display().to_string();

    let (err, text) = s.call(
        "edit_file",
        json!({"path": p, "dryRun": true,
               "edits": [{"oldText": "    x = 1\n    y = 2", "newText": "    x = 10\n    y = 20"}]}),
    );
    assert!(!err, "{text}");
    assert_eq!(
        text,
        format!(
            "```diff\nIndex: {p}\n{RULE}\n--- {p}\toriginal\n+++ {p}\tmodified\n\
             @@ -1,4 +1,4 @@\n def f():\n-    x = 1\n-    y = 2\n+    x = 10\n+    y = 20\n     return x\n```\n\n"
        )
    );
    assert_eq!(fs::read_to_string(dir.join("code.py")).unwrap(), code);

    // The indentation left out, or LF for the file's CRLF: not found.
    for (path, old) in [("code.py", "x = 1\ny = 2"), ("crlf.txt", "two\nthree")] {
        let (err, text) = s.call(
            "edit_file",
            json!({"path": path, "edits": [{"oldText": old, "newText": "z"}]}),
        );
        assert!(err, "{text}");
        assert!(text.starts_with("E_EDIT_NO_MATCH: edit #1:"), "{text}");
    }
    assert_eq!(fs::read_to_string(dir.join("code.py")).unwrap(), code);

    // A one-line change: ranges carry their count, as the reference's do.
    let c = dir.join("crlf.txt").display().to_string();
    let (err, text) = s.call(
        "edit_file",
        json!({"path": c, "edits": [{"oldText": "two", "newText": "TWO"}]}),
    );
    assert!(!err, "{text}");
    assert_eq!(
        text,
        format!(
            "```diff\nIndex: {c}\n{RULE}\n--- {c}\toriginal\n+++ {c}\tmodified\n\
             @@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n```\n\n"
        )
    );
    assert_eq!(
        fs::read(dir.join("crlf.txt")).unwrap(),
        b"one\r\nTWO\r\nthree\r\n"
    );

    // A diff holding ``` is fenced with more backticks.
    let (err, text) = s.call(
        "edit_file",
        json!({"path": "crlf.txt", "dryRun": true,
               "edits": [{"oldText": "one", "newText": "```x```"}]}),
    );
    assert!(!err, "{text}");
    assert!(text.starts_with("````diff\nIndex: "), "{text}");
    assert!(text.ends_with("\n````\n\n"), "{text}");

    // Found twice: refused, rather than the first one replaced.
    fs::write(dir.join("two.txt"), "a\na\n").unwrap();
    let (err, text) = s.call(
        "edit_file",
        json!({"path": "two.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
    );
    assert!(err, "{text}");
    assert!(text.starts_with("E_EDIT_AMBIGUOUS: edit #1:"), "{text}");
    assert_eq!(fs::read_to_string(dir.join("two.txt")).unwrap(), "a\na\n");
}

/// get_file_info answers the reference's fields in its order, the
/// modification time as the reference writes it (JavaScript's Date in
/// UTC), and the permissions as three octal digits.
#[test]
fn get_file_info_answers_the_reference_fields() {
    let (_tmp, dir) = project();
    let f = dir.join("a.txt");
    fs::write(&f, "hello\n").unwrap();
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    fs::File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_modified(when)
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
    let mut s = Server::start(&dir);
    let (err, text) = s.call("get_file_info", json!({"path": f.display().to_string()}));
    assert!(!err, "{text}");
    assert_eq!(
        text,
        "size: 6\nmodified: Tue Nov 14 2023 22:13:20 GMT+0000 (Coordinated Universal Time)\n\
         isDirectory: false\nisFile: true\npermissions: 640\ntype: file"
    );
}

/// directory_tree's entries have their keys in the reference's order:
/// name, type, then children (JSON.stringify's order, which a model reads).
#[test]
fn directory_tree_keys_are_in_the_reference_order() {
    let (_tmp, dir) = project();
    fs::create_dir_all(dir.join("d/e")).unwrap();
    fs::write(dir.join("d/f.txt"), "x").unwrap();
    let mut s = Server::start(&dir);
    let (err, text) = s.call("directory_tree", json!({"path": "d"}));
    assert!(!err, "{text}");
    assert_eq!(
        text,
        "[\n  {\n    \"name\": \"e\",\n    \"type\": \"directory\",\n    \"children\": []\n  },\n  \
         {\n    \"name\": \"f.txt\",\n    \"type\": \"file\"\n  }\n]"
    );
}

/// A head or tail of 0 is read as absent, as the reference reads it (a
/// model filling optional numbers with 0 gets the file, not an empty
/// answer it would take for an empty file).
#[test]
fn read_text_file_head_or_tail_0_is_the_whole_file() {
    let (_tmp, dir) = project();
    fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let mut s = Server::start(&dir);
    for args in [
        json!({"path": "a.txt", "head": 0}),
        json!({"path": "a.txt", "tail": 0}),
        json!({"path": "a.txt", "head": 0, "tail": 0}),
    ] {
        assert_eq!(
            s.call("read_text_file", args.clone()),
            (false, "one\ntwo\nthree\n".to_owned()),
            "{args}"
        );
    }
    assert_eq!(
        s.call(
            "read_text_file",
            json!({"path": "a.txt", "head": 0, "tail": 1})
        ),
        (false, "three\n".to_owned())
    );
}

/// `search_files` judges its `excludePatterns` against each match's path
/// below `path` however `path` is spelled: `./sub`, `sub/.` and `sub//`
/// leave out what `sub` does. (The matches come back with the name
/// folded, `sub/x/y.env`; the part cut off before the patterns were
/// tried was measured on the name as given, so `./sub` cut two bytes too
/// many and an excluded directory's files were answered.)
#[test]
fn mcp19_search_files_excludes_alike_for_every_spelling_of_the_path() {
    let (_tmp, dir) = project();
    fs::create_dir_all(dir.join("sub/x")).unwrap();
    fs::create_dir_all(dir.join("sub/keep")).unwrap();
    fs::write(dir.join("sub/x/y.env"), "a").unwrap();
    fs::write(dir.join("sub/keep/y.env"), "b").unwrap();
    let mut s = Server::start(&dir);
    let abs = dir.join("sub").display().to_string();
    let dotted = format!("{}/./sub/.", dir.display());
    for path in ["sub", "./sub", "sub/.", "sub//", "./sub/./", &abs, &dotted] {
        for ex in ["x", "x/**", "**/x/**"] {
            let got = s.call(
                "search_files",
                json!({"path": path, "pattern": "**/*.env", "excludePatterns": [ex]}),
            );
            assert_eq!(
                got,
                (false, "sub/keep/y.env".to_owned()),
                "path {path:?}, exclude {ex:?}"
            );
        }
    }
    // The root itself spelled `./`: patterns anchored at the root apply.
    for path in [".", "./", "./.", ".//"] {
        let got = s.call(
            "search_files",
            json!({"path": path, "pattern": "**/*.env", "excludePatterns": ["sub/x/**"]}),
        );
        assert_eq!(got, (false, "sub/keep/y.env".to_owned()), "path {path:?}");
    }
}
