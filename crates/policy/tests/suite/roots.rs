//! Roots: resolution, canonical form, existence, and the write-root
//! containment gate.

use std::fs;
use std::os::unix::fs::symlink;

use sandgate_policy::{Policy, PolicyErrorKind as K};

use crate::common::{mentions, Fixture};

fn toml_str(path: &std::path::Path) -> String {
    format!("{:?}", path.to_str().expect("utf-8 temp path"))
}

#[test]
fn relative_roots_resolve_against_the_policy_directory() {
    let fx = Fixture::new();
    let p = fx
        .load("[fs]\nread_roots = [\"inputs\", \"./templates\"]\nwrite_root = \"workspace\"\n")
        .unwrap();
    assert_eq!(
        p.read_roots(),
        [fx.canon("project/inputs"), fx.canon("project/templates")]
    );
    assert_eq!(
        p.write_root(),
        Some(fx.canon("project/workspace").as_path())
    );
}

#[test]
fn absolute_roots_are_admitted() {
    let fx = Fixture::new();
    let text = format!("[fs]\nread_roots = [{}]\n", toml_str(&fx.path("elsewhere")));
    let p = fx.load(&text).unwrap();
    assert_eq!(p.read_roots(), [fx.canon("elsewhere")]);
    assert!(p.read_roots()[0].is_absolute());
}

#[test]
fn roots_are_stored_canonical() {
    let fx = Fixture::new();
    symlink(fx.path("elsewhere"), fx.path("project/link")).unwrap();
    let p = fx
        .load("[fs]\nread_roots = [\"inputs/../templates\", \"link\"]\nwrite_root = \"workspace/.\"\n")
        .unwrap();
    assert_eq!(
        p.read_roots(),
        [fx.canon("project/templates"), fx.canon("elsewhere")]
    );
    assert_eq!(
        p.write_root(),
        Some(fx.canon("project/workspace").as_path())
    );
}

#[test]
fn missing_read_root_is_refused() {
    let fx = Fixture::new();
    let err = fx
        .load("[fs]\nread_roots = [\"inputs\", \"nope\"]\n")
        .unwrap_err();
    assert_eq!(err.kind(), K::RootMissing);
    assert_eq!(err.key(), Some("fs.read_roots[1]"));
    assert!(err.message().contains("\"nope\" does not exist"), "{err}");
    // The message says where the root was looked for, and names no other
    // host path (the file name comes from the caller).
    assert!(
        mentions(err.message(), &fx.canon("project").join("nope")),
        "names the resolved root: {err}"
    );
    assert!(!err.message().contains("policy.toml"), "{err}");
}

#[test]
fn read_root_that_is_a_file_is_refused() {
    let fx = Fixture::new();
    let err = fx
        .load("[fs]\nread_roots = [\"a-file.txt\"]\n")
        .unwrap_err();
    assert_eq!(err.kind(), K::RootNotDirectory);
    assert_eq!(err.key(), Some("fs.read_roots[0]"));
}

#[test]
fn missing_write_root_is_refused() {
    let fx = Fixture::new();
    let err = fx.load("[fs]\nwrite_root = \"not-there\"\n").unwrap_err();
    assert_eq!(err.kind(), K::RootMissing);
    assert_eq!(err.key(), Some("fs.write_root"));
}

#[test]
fn write_root_that_is_a_file_is_refused() {
    let fx = Fixture::new();
    let err = fx.load("[fs]\nwrite_root = \"a-file.txt\"\n").unwrap_err();
    assert_eq!(err.kind(), K::RootNotDirectory);
    assert_eq!(err.key(), Some("fs.write_root"));
}

#[test]
fn empty_root_is_refused() {
    let fx = Fixture::new();
    let err = fx.load("[fs]\nwrite_root = \"\"\n").unwrap_err();
    assert_eq!(err.kind(), K::InvalidValue);
    assert_eq!(err.key(), Some("fs.write_root"));
    let err = fx.load("[fs]\nread_roots = [\"\"]\n").unwrap_err();
    assert_eq!(err.key(), Some("fs.read_roots[0]"));
}

#[test]
fn write_root_equal_to_the_policy_directory_is_refused() {
    let fx = Fixture::new();
    let err = fx.load("[fs]\nwrite_root = \".\"\n").unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy);
    assert_eq!(err.key(), Some("fs.write_root"));
    assert!(
        err.to_string().starts_with("policy key `fs.write_root`: "),
        "{err}"
    );
    assert!(!mentions(err.message(), &fx.project()), "{err}");
}

#[test]
fn write_root_above_the_policy_directory_is_refused() {
    let fx = Fixture::new();
    let err = fx.load("[fs]\nwrite_root = \"..\"\n").unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy);
    let text = format!("[fs]\nwrite_root = {}\n", toml_str(fx.tmp.path()));
    assert_eq!(
        fx.load(&text).unwrap_err().kind(),
        K::WriteRootContainsPolicy
    );
}

#[test]
fn write_root_reaching_the_policy_directory_through_a_symlink_is_refused() {
    let fx = Fixture::new();
    symlink(fx.tmp.path(), fx.path("project/workspace/up")).unwrap();
    let err = fx
        .load("[fs]\nwrite_root = \"workspace/up\"\n")
        .unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy);
}

#[test]
fn write_root_holding_the_target_of_a_symlinked_policy_is_refused() {
    let fx = Fixture::new();
    // The real file lives in `elsewhere`; the project holds a link to it.
    let real = fx.path("elsewhere/policy.toml");
    let text = format!("[fs]\nwrite_root = {}\n", toml_str(&fx.path("elsewhere")));
    fs::write(&real, text).unwrap();
    let link = fx.project().join("linked.toml");
    symlink(&real, &link).unwrap();
    let err = Policy::load(&link).unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy);
}

#[test]
fn run17_a_symlink_the_policy_path_goes_through_may_not_lie_in_the_write_root() {
    // `project/linked.toml` -> `elsewhere/hop` -> `real/policy.toml`: the
    // file and the directory it is named from both lie outside the write
    // root `elsewhere`, but the hop between them does not. An agent that
    // replaces `hop` (delete it, write a file there) rewrites the policy
    // the next session loads, so the hop's directory is kept out of the
    // write root as the file's own is.
    let fx = Fixture::new();
    fs::create_dir(fx.path("real")).unwrap();
    let text = format!("[fs]\nwrite_root = {}\n", toml_str(&fx.path("elsewhere")));
    fs::write(fx.path("real/policy.toml"), &text).unwrap();
    symlink(fx.path("real/policy.toml"), fx.path("elsewhere/hop")).unwrap();
    let link = fx.project().join("linked.toml");
    symlink("../elsewhere/hop", &link).unwrap();
    let err = Policy::load(&link).unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy, "{err}");
    assert_eq!(err.key(), Some("fs.write_root"), "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");

    // The same through a directory of the path: `project/cfg` ->
    // `elsewhere/cfg` -> `real`.
    symlink(fx.path("real"), fx.path("elsewhere/cfg")).unwrap();
    symlink(fx.path("elsewhere/cfg"), fx.project().join("cfg")).unwrap();
    let err = Policy::load(fx.project().join("cfg/policy.toml")).unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy, "{err}");

    // Links that stay outside the write root are admitted, as before.
    fs::create_dir(fx.path("links")).unwrap();
    symlink(fx.path("real/policy.toml"), fx.path("links/hop")).unwrap();
    symlink(fx.path("links/hop"), fx.project().join("other.toml")).unwrap();
    assert!(Policy::load(fx.project().join("other.toml")).is_ok());
}

#[test]
fn a_policy_file_with_a_second_name_on_the_write_roots_filesystem_is_refused() {
    // A hard link in the write root would let a command rewrite the policy
    // in place (`>>` keeps the inode), whatever directory it was loaded
    // from.
    let fx = Fixture::new();
    let policy = fx.project().join("policy.toml");
    fs::write(&policy, "[fs]\nwrite_root = \"workspace\"\n").unwrap();
    fs::hard_link(&policy, fx.path("project/workspace/copy.toml")).unwrap();
    let err = Policy::load(&policy).unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy, "{err}");
    assert_eq!(err.key(), Some("fs.write_root"), "{err}");
    // One name: admitted, as before.
    fs::remove_file(fx.path("project/workspace/copy.toml")).unwrap();
    assert!(Policy::load(&policy).is_ok());
}

#[test]
fn write_root_below_the_policy_directory_is_admitted() {
    let fx = Fixture::new();
    fs::create_dir(fx.path("project/workspace/sub")).unwrap();
    assert!(fx.load("[fs]\nwrite_root = \"workspace/sub\"\n").is_ok());
    let text = format!("[fs]\nwrite_root = {}\n", toml_str(&fx.path("elsewhere")));
    assert!(fx.load(&text).is_ok());
}

#[test]
fn from_bytes_protects_the_base_directory_and_the_named_file() {
    let fx = Fixture::new();
    let text = b"[fs]\nwrite_root = \".\"\n";
    let err = Policy::from_bytes(text, &fx.project(), None).unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy);

    // Roots resolve against base_dir, the gate also covers the named file.
    let text = format!("[fs]\nwrite_root = {}\n", toml_str(&fx.path("elsewhere")));
    let notional = fx.path("elsewhere/policy.toml");
    let err = Policy::from_bytes(text.as_bytes(), &fx.project(), Some(&notional)).unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy);
    assert!(Policy::from_bytes(text.as_bytes(), &fx.project(), None).is_ok());
}

#[test]
fn read_root_may_hold_the_policy_directory() {
    let fx = Fixture::new();
    let p = fx.load("[fs]\nread_roots = [\".\"]\n").unwrap();
    assert_eq!(p.read_roots(), [fx.canon("project")]);
}
