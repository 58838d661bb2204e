//! `Root`: a directory opened once, beneath which every path is resolved
//! (SPEC §3), like Go's `os.Root`.

use std::os::fd::IntoRawFd;
use std::sync::{Arc, RwLock};

use napi::Env;
use napi_derive::napi;
use sandgate::rootfs::{Metadata, OpenOptions, RenameMode};
use sandgate::ErrorCode;

use crate::{request_error, OrThrow};

/// Metadata of one filesystem object beneath a root.
#[napi(object)]
pub struct RootStat {
    /// `'file'`, `'dir'`, `'symlink'` or `'other'`.
    pub kind: String,
    /// Size in bytes.
    pub size: f64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Hard-link count.
    pub nlink: f64,
    /// Device number.
    pub dev: f64,
    /// Inode number.
    pub ino: f64,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
    /// Modification time, milliseconds since the Unix epoch.
    pub mtime_ms: f64,
}

fn stat_of(m: &Metadata) -> RootStat {
    let (s, ns) = m.mtime();
    RootStat {
        kind: m.kind().as_str().to_owned(),
        size: m.len() as f64,
        mode: m.mode(),
        nlink: m.nlink() as f64,
        dev: m.dev() as f64,
        ino: m.ino() as f64,
        uid: m.uid(),
        gid: m.gid(),
        mtime_ms: s as f64 * 1000.0 + f64::from(ns) / 1e6,
    }
}

/// Maps Node's `fs.open` flag strings to open options.
fn open_options(flags: &str, mode: u32) -> Result<OpenOptions, sandgate::Error> {
    let mut o = OpenOptions::new();
    o.mode(mode);
    match flags {
        "r" | "rs" | "sr" => o.read(true),
        "r+" | "rs+" | "sr+" => o.read(true).write(true),
        "w" => o.write(true).create(true).truncate(true),
        "wx" | "xw" => o.write(true).create_new(true),
        "w+" => o.read(true).write(true).create(true).truncate(true),
        "wx+" | "xw+" => o.read(true).write(true).create_new(true),
        "a" | "as" | "sa" => o.append(true).create(true),
        "ax" | "xa" => o.append(true).create_new(true),
        "a+" | "as+" | "sa+" => o.read(true).append(true).create(true),
        "ax+" | "xa+" => o.read(true).append(true).create_new(true),
        other => {
            return Err(request_error(format!(
                "unsupported open flags `{other}` (use r, r+, w, wx, w+, wx+, a, ax, a+, ax+)"
            )))
        }
    };
    Ok(o)
}

/// A directory opened once (`O_PATH`); every path is resolved beneath it.
///
/// Relative paths may use `..` and symlinks as long as every step stays
/// beneath the root; absolute paths, absolute symlinks and `..` above the
/// root throw `E_PATH_ESCAPE`. Renaming or replacing the directory's own
/// path after opening changes nothing.
#[napi]
pub struct Root {
    inner: RwLock<Option<Arc<sandgate::rootfs::Root>>>,
    name: String,
}

impl Root {
    fn get(&self) -> Result<Arc<sandgate::rootfs::Root>, sandgate::Error> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| sandgate::Error::new(ErrorCode::Closed, "the root was closed"))
    }

    fn with<T>(
        &self,
        env: &Env,
        f: impl FnOnce(&sandgate::rootfs::Root) -> Result<T, sandgate::rootfs::Error>,
    ) -> napi::Result<T> {
        let root = self.get().or_throw(env)?;
        f(&root).map_err(sandgate::Error::from).or_throw(env)
    }
}

#[napi]
impl Root {
    /// Opens the directory `dir` as a root.
    #[napi(factory)]
    pub fn open(env: &Env, dir: String) -> napi::Result<Root> {
        let root = sandgate::rootfs::Root::open(&dir)
            .map_err(sandgate::Error::from)
            .or_throw(env)?;
        Ok(Root {
            inner: RwLock::new(Some(Arc::new(root))),
            name: dir,
        })
    }

    /// The directory name the root was opened with.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// Opens a file beneath the root and returns its file descriptor, usable
    /// with Node's `fs` (`fs.readSync`, `fs.writeSync`, `fs.fstatSync`…).
    /// The caller owns it and closes it with `fs.closeSync(fd)`.
    ///
    /// `flags` are `fs.open` strings: `r` (default), `r+`, `w`, `wx`, `w+`,
    /// `wx+`, `a`, `ax`, `a+`, `ax+`; `mode` (default `0o666`, before the
    /// umask) applies to a created file. Creation never follows a final
    /// symlink.
    #[napi]
    pub fn open_file(
        &self,
        env: &Env,
        path: String,
        flags: Option<String>,
        mode: Option<u32>,
    ) -> napi::Result<i32> {
        let opts =
            open_options(flags.as_deref().unwrap_or("r"), mode.unwrap_or(0o666)).or_throw(env)?;
        let file = self.with(env, |r| r.open_with(&path, &opts))?;
        Ok(file.into_raw_fd())
    }

    /// Creates one directory (the parent must exist); `mode` defaults to
    /// `0o777` before the umask. With `recursive`, creates every missing
    /// parent and succeeds if the directory exists.
    #[napi]
    pub fn mkdir(
        &self,
        env: &Env,
        path: String,
        mode: Option<u32>,
        recursive: Option<bool>,
    ) -> napi::Result<()> {
        let mode = mode.unwrap_or(0o777);
        if recursive.unwrap_or(false) {
            self.with(env, |r| r.mkdir_all(&path, mode))
        } else {
            self.with(env, |r| r.mkdir(&path, mode))
        }
    }

    /// Removes one file, one symlink entry (never its target) or one empty
    /// directory.
    #[napi]
    pub fn remove(&self, env: &Env, path: String) -> napi::Result<()> {
        self.with(env, |r| r.remove(&path))
    }

    /// Metadata, following a final symlink beneath the root.
    #[napi]
    pub fn stat(&self, env: &Env, path: String) -> napi::Result<RootStat> {
        self.with(env, |r| r.stat(&path)).map(|m| stat_of(&m))
    }

    /// Metadata of the entry itself (a final symlink is not followed).
    #[napi]
    pub fn lstat(&self, env: &Env, path: String) -> napi::Result<RootStat> {
        self.with(env, |r| r.lstat(&path)).map(|m| stat_of(&m))
    }

    /// The stored target of a symbolic link (not resolved).
    #[napi]
    pub fn readlink(&self, env: &Env, path: String) -> napi::Result<String> {
        self.with(env, |r| r.readlink(&path))
            .map(|p| p.to_string_lossy().into_owned())
    }

    /// Renames `from` to `to`, both beneath the root, replacing an existing
    /// destination like `rename(2)`; a final symlink is moved, not followed.
    #[napi]
    pub fn rename(&self, env: &Env, from: String, to: String) -> napi::Result<()> {
        self.with(env, |r| r.rename(&from, &to, RenameMode::Replace))
    }

    /// The names in a directory (without `.` and `..`), sorted.
    #[napi]
    pub fn readdir(&self, env: &Env, path: String) -> napi::Result<Vec<String>> {
        let mut names: Vec<String> = self
            .with(env, |r| r.read_dir(&path))?
            .iter()
            .map(|e| e.name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Releases the root's descriptor; later calls throw `E_CLOSED`.
    /// Descriptors returned by `openFile` stay open (the caller owns them).
    #[napi]
    pub fn close(&self) {
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = None;
    }
}
