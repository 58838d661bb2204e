//! Checks on the built shared library and the committed header: the library
//! exports `sg_*` symbols only, the header declares exactly what the library
//! exports, the SONAME carries the ABI major, and the C test program calls
//! every function.

use std::collections::BTreeSet;
use std::process::Command;

#[path = "support/library.rs"]
mod library;
use library::{library, workspace};

fn tool_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    assert!(out.status.success(), "{program} {args:?} failed: {out:?}");
    Some(String::from_utf8(out.stdout).expect("UTF-8 output"))
}

fn exported() -> Option<BTreeSet<String>> {
    let lib = library();
    let text = tool_output("nm", &["-D", "--defined-only", lib.to_str()?])?;
    Some(
        text.lines()
            .filter_map(|l| l.split_whitespace().nth(2))
            .map(str::to_owned)
            .collect(),
    )
}

/// Function names declared in the header: `sg_name(` outside comments.
fn declared(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(i) = rest.find("sg_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            if tail[end..].starts_with('(') {
                names.insert(tail[..end].to_owned());
            }
            rest = &tail[end..];
        }
    }
    names
}

#[test]
fn the_library_exports_sg_symbols_only() {
    let Some(symbols) = exported() else {
        eprintln!("skipped: nm is not installed");
        return;
    };
    assert!(symbols.len() > 50, "too few symbols: {symbols:?}");
    let foreign: Vec<_> = symbols.iter().filter(|s| !s.starts_with("sg_")).collect();
    assert!(
        foreign.is_empty(),
        "exported symbols without the sg_ prefix: {foreign:?}"
    );
}

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    let Some(symbols) = exported() else {
        eprintln!("skipped: nm is not installed");
        return;
    };
    let header = std::fs::read_to_string(workspace().join("include/sandgate.h")).unwrap();
    let decls = declared(&header);
    let missing: Vec<_> = symbols.difference(&decls).collect();
    let extra: Vec<_> = decls.difference(&symbols).collect();
    assert!(
        missing.is_empty(),
        "exported but not in the header: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "in the header but not exported: {extra:?}"
    );
}

#[test]
fn the_c_test_calls_every_function() {
    let header = std::fs::read_to_string(workspace().join("include/sandgate.h")).unwrap();
    let c_test = std::fs::read_to_string(workspace().join("tests/c/test_sandgate.c")).unwrap();
    let called = declared(&c_test);
    let uncalled: Vec<_> = declared(&header).difference(&called).cloned().collect();
    assert!(
        uncalled.is_empty(),
        "tests/c/test_sandgate.c never calls {uncalled:?}"
    );
}

#[test]
fn the_soname_carries_the_abi_major() {
    let lib = library();
    let Some(text) = tool_output("readelf", &["-d", lib.to_str().unwrap()]) else {
        eprintln!("skipped: readelf is not installed");
        return;
    };
    let header = std::fs::read_to_string(workspace().join("include/sandgate.h")).unwrap();
    let major = header
        .lines()
        .find_map(|l| l.strip_prefix("#define SANDGATE_ABI_MAJOR "))
        .expect("SANDGATE_ABI_MAJOR in the header")
        .trim();
    let want = format!("[libsandgate.so.{major}]");
    assert!(
        text.lines()
            .any(|l| l.contains("SONAME") && l.contains(&want)),
        "no SONAME {want} in:\n{text}"
    );
}
