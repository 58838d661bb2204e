//! `cargo xtask install --prefix DIR`: installs the C library like a system
//! library, release-built:
//!
//! ```text
//! DIR/lib/libsandgate.so.<ABI major>.<ABI minor>.<patch>   the library
//! DIR/lib/libsandgate.so.<ABI major>  -> the library (its SONAME)
//! DIR/lib/libsandgate.so              -> libsandgate.so.<ABI major>
//! DIR/lib/libsandgate.a
//! DIR/include/sandgate.h
//! DIR/lib/pkgconfig/sandgate.pc         -lsandgate (the shared library)
//! DIR/lib/pkgconfig/sandgate-static.pc  libsandgate.a and its system libraries
//! ```
//!
//! `sandgate-static` exists because a linker given `-lsandgate` picks the
//! shared library whenever both are in one directory, and cgo never passes
//! `--static` to pkg-config: the Go binding asks for `sandgate-static`.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::{cargo, codegen, step, target_dir, workspace_root};

/// The system libraries the Rust standard library in libsandgate.a needs
/// (what `rustc --print native-static-libs` lists for this target, less
/// `-lc`, which every C link adds).
pub const STATIC_PRIVATE_LIBS: &str = "-lgcc_s -lutil -lrt -lpthread -lm -ldl";

/// The project's public home, named in the pkg-config files and packages.
pub const HOMEPAGE: &str = "https://github.com/sandgate-dev/sandgate";

pub fn run(args: &[String]) -> Result<(), String> {
    let prefix = match args {
        [flag, dir] if flag == "--prefix" => PathBuf::from(dir),
        [arg] if arg.starts_with("--prefix=") => PathBuf::from(&arg["--prefix=".len()..]),
        _ => return Err("usage: cargo xtask install --prefix DIR".into()),
    };
    let prefix = if prefix.is_absolute() {
        prefix
    } else {
        std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?
            .join(prefix)
    };
    let prefix_s = pc_path(&prefix)?;
    let release = build_release(&["sandgate-ffi"])?;
    install_c(&release, &prefix, &prefix_s)?;
    eprintln!(
        "installed libsandgate under {}; for pkg-config: PKG_CONFIG_PATH={}/lib/pkgconfig",
        prefix.display(),
        prefix.display()
    );
    Ok(())
}

/// Builds `packages` once with the release profile (locked to Cargo.lock)
/// and answers the directory holding the artifacts.
pub fn build_release(packages: &[&str]) -> Result<PathBuf, String> {
    let mut args = vec!["build", "--release", "--locked"];
    for p in packages {
        args.extend(["-p", p]);
    }
    step("release build", &cargo(), &args)?;
    Ok(target_dir().join("release"))
}

/// The versions a library file is named by.
pub struct Versions {
    /// `SANDGATE_ABI_MAJOR`: the SONAME's number.
    pub abi_major: String,
    /// `SANDGATE_ABI_MINOR`.
    pub abi_minor: String,
    /// The workspace's package version (`0.1.0`).
    pub package: String,
}

impl Versions {
    pub fn read() -> Result<Versions, String> {
        let root = workspace_root();
        let header = fs::read_to_string(root.join("include/sandgate.h"))
            .map_err(|e| format!("cannot read include/sandgate.h: {e}"))?;
        let define = |name: &str| {
            codegen::define(&header, name).ok_or(format!("include/sandgate.h has no {name}"))
        };
        Ok(Versions {
            abi_major: define("SANDGATE_ABI_MAJOR")?.to_string(),
            abi_minor: define("SANDGATE_ABI_MINOR")?.to_string(),
            package: package_version()?,
        })
    }

    /// `libsandgate.so.<major>`: the SONAME the build gives the library.
    pub fn soname(&self) -> String {
        format!("libsandgate.so.{}", self.abi_major)
    }

    /// `libsandgate.so.<major>.<minor>.<patch>`: the installed file.
    pub fn real_name(&self) -> String {
        let patch = self.package.rsplit('.').next().unwrap_or("0");
        format!("{}.{}.{patch}", self.soname(), self.abi_minor)
    }
}

/// The `version` of `[workspace.package]` in the root Cargo.toml.
pub fn package_version() -> Result<String, String> {
    let manifest = fs::read_to_string(workspace_root().join("Cargo.toml"))
        .map_err(|e| format!("cannot read Cargo.toml: {e}"))?;
    let mut in_section = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == "[workspace.package]";
        } else if in_section {
            if let Some(v) = line.strip_prefix("version") {
                let v = v.trim_start().strip_prefix('=').map(str::trim);
                if let Some(v) = v.and_then(|v| v.strip_prefix('"')?.strip_suffix('"')) {
                    return Ok(v.to_owned());
                }
            }
        }
    }
    Err("Cargo.toml: no version in [workspace.package]".into())
}

/// Installs the library built in `release` under `prefix`; the pkg-config
/// files say `prefix=<pc_prefix>` (an absolute path, or a path relative to
/// `${pcfiledir}` for a relocatable tree).
pub fn install_c(release: &Path, prefix: &Path, pc_prefix: &str) -> Result<(), String> {
    let v = Versions::read()?;
    let lib = prefix.join("lib");
    let pkgconfig = lib.join("pkgconfig");
    let include = prefix.join("include");
    for d in [&lib, &pkgconfig, &include] {
        fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let real = v.real_name();
    copy_atomic(&release.join("libsandgate.so"), &lib.join(&real))?;
    link(&real, &lib.join(v.soname()))?;
    link(&v.soname(), &lib.join("libsandgate.so"))?;
    copy_atomic(&release.join("libsandgate.a"), &lib.join("libsandgate.a"))?;
    copy_atomic(
        &workspace_root().join("include/sandgate.h"),
        &include.join("sandgate.h"),
    )?;
    write_atomic(&pkgconfig.join("sandgate.pc"), &pc_shared(pc_prefix, &v))?;
    write_atomic(
        &pkgconfig.join("sandgate-static.pc"),
        &pc_static(pc_prefix, &v),
    )?;
    Ok(())
}

/// A directory's name as the text of a pkg-config variable (which
/// [`pc_shared`] and [`pc_static_at`] then escape). A name holding `$` is
/// refused: pkg-config expands `${NAME}` in a value (an unknown one to
/// nothing) and has no escape for it that every implementation reads
/// back, and a consumer that `eval`s the answer expands `$NAME`; either
/// would name another directory. So is a line break, which ends the
/// variable.
pub fn pc_path(path: &Path) -> Result<String, String> {
    let text = path
        .to_str()
        .ok_or_else(|| format!("{}: not UTF-8", path.display()))?;
    if let Some(c) = text.chars().find(|c| matches!(c, '$' | '\n' | '\r')) {
        return Err(format!(
            "{}: the name holds {c:?}, which pkg-config files cannot carry as itself \
             (`$` starts a variable, a line break ends one); use a directory without it",
            path.display()
        ));
    }
    Ok(text.to_owned())
}

/// `path` as a pkg-config variable's value: pkg-config splits the `Libs`
/// and `Cflags` it expands into words as a shell would, so a space, a tab,
/// a quote or a backslash in a directory's name is escaped with a
/// backslash (what pkg-config answers then carries the escape, which cgo,
/// meson and `eval` read back as one word). `${...}` is left to expand:
/// [`pc_path`] keeps `$` out of a directory's name.
fn pc_value(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, ' ' | '\t' | '\'' | '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `sandgate.pc`: the shared library; `--static` adds what the archive needs.
pub fn pc_shared(prefix: &str, v: &Versions) -> String {
    let prefix = pc_value(prefix);
    format!(
        "prefix={prefix}\nlibdir=${{prefix}}/lib\nincludedir=${{prefix}}/include\n\n\
         Name: sandgate\n\
         Description: sandgate's C ABI: confined file tools, policies and a confined shell executor\n\
         URL: {HOMEPAGE}\n\
         Version: {}\n\
         Libs: -L${{libdir}} -lsandgate\n\
         Libs.private: {STATIC_PRIVATE_LIBS}\n\
         Cflags: -I${{includedir}}\n",
        v.package
    )
}

/// `sandgate-static.pc`: the archive by path, so that no linker can pick
/// the shared library instead, and the system libraries it needs.
pub fn pc_static(prefix: &str, v: &Versions) -> String {
    pc_static_at(prefix, "${prefix}/lib", "${prefix}/include", v)
}

/// `sandgate-static.pc` with its directories given apart (the checkout keeps
/// the archive in target/lib and the header in include/).
pub fn pc_static_at(prefix: &str, libdir: &str, includedir: &str, v: &Versions) -> String {
    let (prefix, libdir, includedir) = (pc_value(prefix), pc_value(libdir), pc_value(includedir));
    format!(
        "prefix={prefix}\nlibdir={libdir}\nincludedir={includedir}\n\n\
         Name: sandgate-static\n\
         Description: sandgate's C ABI, linked from libsandgate.a\n\
         URL: {HOMEPAGE}\n\
         Version: {}\n\
         Libs: ${{libdir}}/libsandgate.a {STATIC_PRIVATE_LIBS}\n\
         Cflags: -I${{includedir}}\n",
        v.package
    )
}

/// Copies through a temporary name and a rename: a reader never sees half
/// a file, and a failed copy leaves the old one in place.
pub fn copy_atomic(src: &Path, dst: &Path) -> Result<(), String> {
    let tmp = tmp_beside(dst);
    fs::copy(src, &tmp).map_err(|e| format!("cannot copy {}: {e}", src.display()))?;
    fs::rename(&tmp, dst).map_err(|e| format!("cannot install {}: {e}", dst.display()))
}

/// Writes through a temporary name and a rename.
pub fn write_atomic(dst: &Path, text: &str) -> Result<(), String> {
    let tmp = tmp_beside(dst);
    fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    fs::rename(&tmp, dst).map_err(|e| format!("cannot install {}: {e}", dst.display()))
}

fn tmp_beside(dst: &Path) -> PathBuf {
    let name = dst.file_name().map(|n| n.to_string_lossy().into_owned());
    dst.with_file_name(format!(".{}.tmp", name.unwrap_or_default()))
}

/// Makes `at` a symlink to `target`, replacing what was there.
fn link(target: &str, at: &Path) -> Result<(), String> {
    let tmp = tmp_beside(at);
    let _ = fs::remove_file(&tmp);
    symlink(target, &tmp).map_err(|e| format!("cannot link {}: {e}", tmp.display()))?;
    fs::rename(&tmp, at).map_err(|e| format!("cannot install {}: {e}", at.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words a pkg-config consumer (cgo, meson, `eval`) takes from
    /// `pkg-config ARGS` with `dir` on PKG_CONFIG_PATH.
    fn words(dir: &Path, args: &[&str]) -> Vec<String> {
        let out = std::process::Command::new("pkg-config")
            .args(args)
            .env("PKG_CONFIG_PATH", dir)
            .output()
            .expect("pkg-config runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let split = std::process::Command::new("sh")
            .args(["-c", "eval \"set -- $0\"; printf '%s\\n' \"$@\""])
            .arg(String::from_utf8(out.stdout).unwrap().trim())
            .output()
            .unwrap();
        String::from_utf8(split.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// An install prefix (or a checkout) whose path holds a space, a quote
    /// or a backslash: what pkg-config answers still names its directories
    /// whole, one word each.
    #[test]
    fn pkg_config_names_a_prefix_with_spaces_and_quotes_whole() {
        let v = Versions::read().unwrap();
        let base = std::env::temp_dir().join(format!("xtask-pc-{}", std::process::id()));
        for name in ["with space", "o'brien \"q\"", "back\\slash\ttab"] {
            let prefix = base.join(name);
            let dir = prefix.join("lib/pkgconfig");
            fs::create_dir_all(&dir).unwrap();
            let p = prefix.to_str().unwrap();
            write_atomic(&dir.join("sandgate.pc"), &pc_shared(p, &v)).unwrap();
            write_atomic(&dir.join("sandgate-static.pc"), &pc_static(p, &v)).unwrap();
            let shared = words(&dir, &["--cflags", "--libs", "sandgate"]);
            assert_eq!(
                shared,
                [
                    format!("-I{p}/include"),
                    format!("-L{p}/lib"),
                    "-lsandgate".into()
                ],
                "{name:?}"
            );
            let r#static = words(&dir, &["--libs", "sandgate-static"]);
            assert_eq!(r#static[0], format!("{p}/lib/libsandgate.a"), "{name:?}");
        }
        let _ = fs::remove_dir_all(&base);
    }

    /// A prefix whose name holds `$` (pkg-config expands `${NAME}` in it,
    /// an unknown one to nothing, and a consumer's `eval` expands `$NAME`)
    /// or a line break (which ends the variable) is either named whole by
    /// what pkg-config answers or refused, naming it; it is never turned
    /// into another directory.
    #[test]
    fn pkg_config_prefix_holding_a_dollar_or_a_line_break_is_refused_or_whole() {
        let v = Versions::read().unwrap();
        let base = std::env::temp_dir().join(format!("xtask-pc-dollar-{}", std::process::id()));
        for name in ["cash${HOME}x", "a$HOME", "line\nbreak"] {
            let prefix = base.join(name);
            let dir = prefix.join("lib/pkgconfig");
            fs::create_dir_all(&dir).unwrap();
            let p = match pc_path(&prefix) {
                Ok(p) => p,
                Err(e) => {
                    assert!(e.contains("pkg-config"), "{name:?}: {e}");
                    continue;
                }
            };
            write_atomic(&dir.join("sandgate.pc"), &pc_shared(&p, &v)).unwrap();
            let shared = words(&dir, &["--cflags", "--libs", "sandgate"]);
            assert_eq!(
                shared,
                [
                    format!("-I{p}/include"),
                    format!("-L{p}/lib"),
                    "-lsandgate".into()
                ],
                "{name:?}"
            );
        }
        let _ = fs::remove_dir_all(&base);
    }
}
