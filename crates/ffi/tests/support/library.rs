//! Finds (building it when missing) the shared library of the profile the
//! running test or bench was built in. Shared by tests/abi.rs and
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
    if !lib.exists() {
        build_library(profile_dir);
    }
    assert!(lib.exists(), "{} was not built", lib.display());
    lib
}

/// Cargo does not build a crate's cdylib for its own integration tests;
/// build it into the same target directory and profile.
fn build_library(profile_dir: &Path) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let target_dir = profile_dir.parent().expect("target dir");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-p", "sandgate-ffi", "--lib"]);
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
