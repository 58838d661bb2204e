//! `cargo xtask bindings [--release]`: builds libsandgate (crates/ffi) once
//! and puts it where the bindings look for it: `target/lib/` of the
//! workspace (or `$SANDGATE_LIB_DIR`), as `libsandgate.a` (linked by the Go
//! binding) and `libsandgate.so` (loaded by the Python binding), with
//! `pkgconfig/sandgate-static.pc` naming that archive and the checkout's
//! include/: the Go binding finds the library through pkg-config, and
//! xtask points `PKG_CONFIG_PATH` there for its own steps.

use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::install::{pc_path, pc_static_at, write_atomic, Versions};
use crate::{cargo, step, step_logged, target_dir, workspace_root};

/// Names the library the bindings load for every step after this one
/// (`SANDGATE_LIBRARY`, and `PKG_CONFIG_PATH` for Go; [`start`] builds and
/// installs it): called while xtask has one thread, since it sets its own
/// environment.
pub fn prepare() -> Result<(), String> {
    use_pkg_config()?;
    // xtask has one thread here; the variable is for the children.
    env::set_var("SANDGATE_LIBRARY", lib_dir().join("libsandgate.so"));
    Ok(())
}

/// The bindings' steps that need nothing the Rust tests make, run on a
/// thread of their own beside them: the library's build and install
/// ([`prepare`] named it), the Node addon's build (its tests
/// come later, [`node_tests`]), the Python binding's tests and Go's (`go
/// vet`, `go test -race`), each step's output kept in a file under `logs`
/// (see [`step_logged`]). [`prepare`] first. `stop` set makes the lane
/// start no further step.
pub fn start(logs: PathBuf, stop: Arc<AtomicBool>) -> JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        fs::create_dir_all(&logs)
            .map_err(|e| format!("bindings: cannot make {}: {e}", logs.display()))?;
        install(false, Some(&logs))?;
        let steps: [(&str, &str, &[&str]); 4] = [
            ("node addon", "bash", &["bindings/node/ci.sh", "build"]),
            ("python binding", "python3", PYTEST),
            // cgo links target/lib/libsandgate.a, named by sandgate-static.pc.
            ("go vet", "go", &["-C", "bindings/go", "vet", "./..."]),
            ("go binding", "go", GO_TEST),
        ];
        for (name, program, args) in steps {
            if stop.load(Ordering::Relaxed) {
                return Err(format!("{name}: not started, a step beside it failed"));
            }
            let mut cmd = Command::new(program);
            cmd.args(args);
            step_logged(name, &mut cmd, &logs.join(format!("{name}.log")))?;
        }
        Ok(())
    })
}

/// The Node binding's tests, against the addon [`start`] built.
pub fn node_tests() -> Result<(), String> {
    step("node binding", "bash", &["bindings/node/ci.sh", "test"])
}

/// The Python binding's tests: `python3`'s arguments (the checkout is read,
/// never written).
pub(crate) const PYTEST: &[&str] = &[
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "bindings/python/tests",
];

/// The Go binding's tests, with the race detector: `go`'s arguments.
pub(crate) const GO_TEST: &[&str] = &["-C", "bindings/go", "test", "-race", "-count=1", "./..."];

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
    install(release, None)?;
    use_pkg_config()?;
    eprintln!("libsandgate installed in {}", lib_dir().display());
    Ok(())
}

/// Builds libsandgate and copies it to the lib dir; the build's output
/// shown, or kept in a file under `logs` ([`step_logged`]).
fn install(release: bool, logs: Option<&std::path::Path>) -> Result<(), String> {
    let mut build = vec!["build", "-p", "sandgate-ffi"];
    if release {
        build.push("--release");
    }
    match logs {
        None => step("build libsandgate", &cargo(), &build)?,
        Some(logs) => step_logged(
            "build libsandgate",
            Command::new(cargo()).args(&build),
            &logs.join("build libsandgate.log"),
        )?,
    }
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
    Ok(())
}

/// Writes `<lib dir>/pkgconfig/sandgate-static.pc` for the library in the
/// lib dir and the checkout's header, and puts that directory first on
/// `PKG_CONFIG_PATH` for the steps xtask runs after this.
pub fn use_pkg_config() -> Result<(), String> {
    let lib = lib_dir();
    let dir = lib.join("pkgconfig");
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (lib_s, inc_s) = (pc_path(&lib)?, pc_path(&workspace_root().join("include"))?);
    let pc = pc_static_at(&lib_s, &lib_s, &inc_s, &Versions::read()?);
    write_atomic(&dir.join("sandgate-static.pc"), &pc)?;
    let mut path = dir
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: not UTF-8", dir.display()))?;
    let old = env::var_os("PKG_CONFIG_PATH").unwrap_or_default();
    if env::split_paths(&old).next().as_deref() == Some(dir.as_path()) {
        return Ok(());
    }
    if !old.is_empty() {
        path.push(':');
        path.push_str(&old.to_string_lossy());
    }
    // xtask is single-threaded here; the variable is for the children.
    env::set_var("PKG_CONFIG_PATH", path);
    Ok(())
}
