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
use std::io::Write;
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
    // Fixed modes, whatever the build's or the checkout's umask left.
    copy_atomic_mode(&release.join("libsandgate.so"), &lib.join(&real), 0o755)?;
    link(&real, &lib.join(v.soname()))?;
    link(&v.soname(), &lib.join("libsandgate.so"))?;
    copy_atomic_mode(
        &release.join("libsandgate.a"),
        &lib.join("libsandgate.a"),
        0o644,
    )?;
    copy_atomic_mode(
        &workspace_root().join("include/sandgate.h"),
        &include.join("sandgate.h"),
        0o644,
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
/// a file, and a failed copy leaves the old one in place. The copy is
/// 0755 when the source is executable by anyone and 0644 otherwise,
/// whatever the source's other bits and the umask.
pub fn copy_atomic(src: &Path, dst: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mut from =
        fs::File::open(src).map_err(|e| format!("cannot copy {}: {e}", src.display()))?;
    let exec = from
        .metadata()
        .map_err(|e| format!("cannot copy {}: {e}", src.display()))?
        .permissions()
        .mode()
        & 0o111
        != 0;
    copy_from(&mut from, src, dst, if exec { 0o755 } else { 0o644 })
}

/// [`copy_atomic`] giving the copy `mode`.
pub fn copy_atomic_mode(src: &Path, dst: &Path, mode: u32) -> Result<(), String> {
    let mut from =
        fs::File::open(src).map_err(|e| format!("cannot copy {}: {e}", src.display()))?;
    copy_from(&mut from, src, dst, mode)
}

fn copy_from(from: &mut fs::File, src: &Path, dst: &Path, mode: u32) -> Result<(), String> {
    replace(dst, mode, |to| {
        std::io::copy(from, to)
            .map(drop)
            .map_err(|e| format!("cannot copy {}: {e}", src.display()))
    })
}

/// Writes through a temporary name and a rename; the file is 0644.
pub fn write_atomic(dst: &Path, text: &str) -> Result<(), String> {
    replace(dst, 0o644, |to| {
        to.write_all(text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", dst.display()))
    })
}

/// Puts a new file with `mode` at `dst`: filled by `fill` under a temporary
/// name beside it, flushed to disk, then renamed over `dst`. The temporary
/// name is created exclusively (whatever was there, a symlink planted
/// there included, is removed first, and one planted again in between
/// makes the creation fail), so nothing is ever written through a link;
/// the rename replaces a symlink at `dst` itself rather than following it.
/// A process killed part way leaves `dst` as it was.
fn replace(
    dst: &Path,
    mode: u32,
    fill: impl FnOnce(&mut fs::File) -> Result<(), String>,
) -> Result<(), String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let tmp = tmp_beside(dst);
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", tmp.display())),
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    let written = fill(&mut file).and_then(|()| {
        // The umask narrowed the mode at creation; set it whole.
        file.set_permissions(fs::Permissions::from_mode(mode))
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
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

    /// A fake release directory: the two libraries with `mode`.
    fn fake_release(base: &Path, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let release = base.join("release");
        fs::create_dir_all(&release).unwrap();
        for (f, text) in [("libsandgate.so", "shared"), ("libsandgate.a", "archive")] {
            fs::write(release.join(f), text).unwrap();
            fs::set_permissions(release.join(f), fs::Permissions::from_mode(mode)).unwrap();
        }
        release
    }

    fn mode_of(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    /// What `install` puts in place has fixed modes (0755 for the shared
    /// library, 0644 for the rest), whatever the modes of what it copies
    /// (a build or a checkout made under a loose umask): no installed file
    /// is group- or world-writable.
    #[test]
    fn install_gives_fixed_modes_whatever_the_sources() {
        let v = Versions::read().unwrap();
        let base = std::env::temp_dir().join(format!("xtask-modes-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let release = fake_release(&base, 0o777);
        let prefix = base.join("prefix");
        install_c(&release, &prefix, prefix.to_str().unwrap()).unwrap();
        let lib = prefix.join("lib");
        for (f, want) in [
            (lib.join(v.real_name()), 0o755),
            (lib.join("libsandgate.a"), 0o644),
            (lib.join("pkgconfig/sandgate.pc"), 0o644),
            (lib.join("pkgconfig/sandgate-static.pc"), 0o644),
            (prefix.join("include/sandgate.h"), 0o644),
        ] {
            assert_eq!(mode_of(&f), want, "{}: mode {:o}", f.display(), mode_of(&f));
        }
        let _ = fs::remove_dir_all(&base);
    }

    /// A symlink planted where `install` writes (its temporary names beside
    /// each file, or the file's own name) is replaced, never written
    /// through: the file it points at is left as it was.
    #[test]
    fn install_never_writes_through_a_planted_symlink() {
        let v = Versions::read().unwrap();
        let base = std::env::temp_dir().join(format!("xtask-plant-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let release = fake_release(&base, 0o755);
        let prefix = base.join("prefix");
        let lib = prefix.join("lib");
        fs::create_dir_all(lib.join("pkgconfig")).unwrap();
        fs::create_dir_all(prefix.join("include")).unwrap();
        let victim = base.join("victim");
        fs::write(&victim, "untouched").unwrap();
        let planted = [
            lib.join(format!(".{}.tmp", v.real_name())),
            lib.join(".libsandgate.a.tmp"),
            lib.join("pkgconfig/.sandgate.pc.tmp"),
            prefix.join("include/.sandgate.h.tmp"),
            lib.join("pkgconfig/sandgate-static.pc"),
        ];
        for p in &planted {
            symlink(&victim, p).unwrap();
        }
        install_c(&release, &prefix, prefix.to_str().unwrap()).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
        assert_eq!(
            fs::read_to_string(lib.join("libsandgate.a")).unwrap(),
            "archive"
        );
        assert_eq!(
            fs::read_to_string(lib.join(v.real_name())).unwrap(),
            "shared"
        );
        let pc = lib.join("pkgconfig/sandgate-static.pc");
        assert!(fs::symlink_metadata(&pc).unwrap().is_file());
        let _ = fs::remove_dir_all(&base);
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
