//! Finds (building it first, so that it is never older than the sources)
//! the shared library of the profile the running test or bench was built
//! in. Shared by tests/abi.rs, tests/abuse24.rs, tests/audit.rs and
//! benches/ffi.rs through `#[path]`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared library cargo built next to this test's profile directory.
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/abi-<hash>
    let profile_dir = exe.parent().and_then(Path::parent).expect("profile dir");
    let lib = profile_dir.join("libsandgate.so");
    // Built when missing, and when older than a source of the workspace's
    // crates: a library left from before a change would test the old
    // code, and pass. (Not every time: `cargo build -p sandgate-ffi`
    // unifies features apart from the workspace's build, and would
    // rebuild what that build just made.)
    if !lib.exists() || older_than_the_sources(&lib) {
        build_library(profile_dir);
    }
    assert!(lib.exists(), "{} was not built", lib.display());
    lib
}

/// Whether `lib` was built before the newest `.rs` or `Cargo.toml` under
/// the workspace's `crates/` was written.
fn older_than_the_sources(lib: &Path) -> bool {
    fn newest(dir: &Path, best: &mut Option<std::time::SystemTime>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let (path, Ok(kind)) = (e.path(), e.file_type()) else {
                continue;
            };
            if kind.is_dir() && e.file_name() != "target" {
                newest(&path, best);
            } else if kind.is_file()
                && (path.extension().is_some_and(|x| x == "rs") || e.file_name() == "Cargo.toml")
            {
                if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                    *best = Some(best.map_or(t, |b| b.max(t)));
                }
            }
        }
    }
    let mut best = None;
    newest(&workspace().join("crates"), &mut best);
    let built = std::fs::metadata(lib).and_then(|m| m.modified());
    matches!((best, built), (Some(src), Ok(built)) if src > built)
}

/// Cargo does not build a crate's cdylib for its own integration tests;
/// build it into the same target directory and profile.
fn build_library(profile_dir: &Path) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let target_dir = profile_dir.parent().expect("target dir");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-p", "sandgate-ffi", "--lib"]);
        // Cargo gives this test the variables of its own package
        // (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, ...); passed on, build
        // scripts that watch them (ring's does) see them changed, and the
        // workspace's next build compiled the TLS stack and everything
        // above it again (57 s of a CI run, and more for the doctests).
        // A build from a shell has none of them, and xtask drops those
        // cargo gave it before it builds.
        for (name, _) in std::env::vars_os() {
            let Some(name) = name.to_str() else { continue };
            let cargos_own = [
                "CARGO_PKG_",
                "CARGO_MANIFEST_",
                "CARGO_CRATE_",
                "CARGO_BIN_",
            ]
            .iter()
            .any(|p| name.starts_with(p))
                || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&name);
            if cargos_own {
                cmd.env_remove(name);
            }
        }
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd
            .env("CARGO_TARGET_DIR", target_dir)
            .current_dir(workspace())
            .status()
            .expect("run cargo build");
        assert!(status.success(), "cargo build -p sandgate-ffi failed");
    });
}
