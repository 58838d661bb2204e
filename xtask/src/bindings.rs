//! `cargo xtask bindings [--release]`: builds libsandgate (crates/ffi) once
//! and puts it where the bindings look for it: `target/lib/` of the
//! workspace (or `$SANDGATE_LIB_DIR`), as `libsandgate.a` (linked by the Go
//! binding) and `libsandgate.so` (loaded by the Python binding).

use std::env;
use std::fs;
use std::path::PathBuf;

use crate::{cargo, step, target_dir, workspace_root};

/// Runs every binding's tests against the installed library: Python
/// (pytest), Node (napi build + `node --test`), Go (`go vet`, `go test
/// -race`).
pub fn test() -> Result<(), String> {
    let lib = lib_dir();
    if !lib.join("libsandgate.so").exists() {
        run(&[])?;
    }
    let so = lib.join("libsandgate.so");
    // xtask runs its steps one at a time; the variable is for the children.
    env::set_var("SANDGATE_LIBRARY", &so);
    step(
        "python binding",
        "python3",
        &[
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "bindings/python/tests",
        ],
    )?;
    step("node binding", "bash", &["bindings/node/ci.sh"])?;
    // cgo links target/lib/libsandgate.a (see bindings/go/cgo.go).
    step("go vet", "go", &["-C", "bindings/go", "vet", "./..."])?;
    step(
        "go binding",
        "go",
        &["-C", "bindings/go", "test", "-race", "-count=1", "./..."],
    )
}

/// The directory the bindings load the library from.
pub fn lib_dir() -> PathBuf {
    env::var_os("SANDGATE_LIB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/lib"))
}

pub fn run(args: &[String]) -> Result<(), String> {
    let release = match args {
        [] => false,
        [a] if a == "--release" => true,
        _ => return Err("usage: cargo xtask bindings [--release]".into()),
    };
    let mut build = vec!["build", "-p", "sandgate-ffi"];
    if release {
        build.push("--release");
    }
    step("build libsandgate", &cargo(), &build)?;
    let from = target_dir().join(if release { "release" } else { "debug" });
    let to = lib_dir();
    fs::create_dir_all(&to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    for name in ["libsandgate.a", "libsandgate.so"] {
        let (src, dst) = (from.join(name), to.join(name));
        // Copy to a temporary name and rename, so a process loading the
        // library never sees a half-written file.
        let tmp = to.join(format!(".{name}.tmp"));
        fs::copy(&src, &tmp).map_err(|e| format!("cannot copy {}: {e}", src.display()))?;
        fs::rename(&tmp, &dst).map_err(|e| format!("cannot install {}: {e}", dst.display()))?;
    }
    eprintln!("libsandgate installed in {}", to.display());
    Ok(())
}
