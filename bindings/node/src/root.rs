//! `Root`: a directory opened once, beneath which every path is resolved
//! (docs/reference/resolution.md), like Go's `os.Root`.

use std::os::fd::IntoRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::{Arc, RwLock};

use napi::bindgen_prelude::{
    panic_to_error, sys, CallbackInfo, FromNapiValue, JsError, JsObjectValue, JsValue, Object,
    Unknown,
};
use napi::Env;
use napi_derive::napi;
use sandgate::rootfs::{Metadata, OpenOptions, RenameMode};
use sandgate::{ErrorCode, FileKind};

use crate::{opt_bool_arg, opt_num_arg, opt_str_arg, request_error, str_arg, to_mode, OrThrow};

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

/// Modification time in milliseconds since the Unix epoch.
fn mtime_ms(m: &Metadata) -> f64 {
    let (s, ns) = m.mtime();
    s as f64 * 1000.0 + f64::from(ns) / 1e6
}

fn stat_of(m: &Metadata) -> RootStat {
    RootStat {
        kind: m.kind().as_str().to_owned(),
        size: m.len() as f64,
        mode: m.mode(),
        nlink: m.nlink() as f64,
        dev: m.dev() as f64,
        ino: m.ino() as f64,
        uid: m.uid(),
        gid: m.gid(),
        mtime_ms: mtime_ms(m),
    }
}

// The fast `Root#stat` / `Root#lstat`.
//
// Building the 9-property `RootStat` through Node-API (one
// `napi_define_properties` call: a V8 runtime transition and a string
// internalisation per property) cost about 1.4 us a call, half as much as
// the syscalls of the stat itself, and the generic method glue (borrow
// tracking, a `String` per path) more. Node's own `fs.statSync` avoids
// this the same way: the native side fills a
// preallocated `Float64Array` and returns the kind's index, and a small
// JavaScript function (compiled once per environment at module load)
// builds the object as a literal, which V8 optimises. The module-init hook
// below installs that function as `Root.prototype.stat` / `lstat` in place
// of the `#[napi]` methods, which stay as the declared API (and the
// typings) and return the same object.

/// Number of `f64` slots [`fill_stat`] writes (the `RootStat` fields after
/// `kind`, in declaration order).
const STAT_SLOTS: usize = 8;

/// The kinds in the order of the index [`fill_stat`] returns.
const KINDS: [FileKind; 4] = [
    FileKind::File,
    FileKind::Dir,
    FileKind::Symlink,
    FileKind::Other,
];

/// Writes `m`'s numeric fields into `out` (the order of [`INSTALL_STAT`]) and
/// returns the index of its kind in [`KINDS`].
fn fill_stat(m: &Metadata, out: &mut [f64; STAT_SLOTS]) -> u32 {
    // The conversions of `stat_of`.
    *out = [
        m.len() as f64,
        f64::from(m.mode()),
        m.nlink() as f64,
        m.dev() as f64,
        m.ino() as f64,
        f64::from(m.uid()),
        f64::from(m.gid()),
        mtime_ms(m),
    ];
    // The order of `KINDS`.
    match m.kind() {
        FileKind::File => 0,
        FileKind::Dir => 1,
        FileKind::Symlink => 2,
        FileKind::Other => 3,
    }
}

/// Compiled once per environment; called with `Root.prototype`, the two
/// native fillers and the kind names, it replaces `stat` and `lstat`
/// (keeping their property attributes). The literal lists the properties in
/// `RootStat`'s order.
const INSTALL_STAT: &str = r#"(function installStat(proto, statInto, lstatInto, kinds) {
  'use strict'
  const out = new Float64Array(8)
  const build = (kind) => ({
    kind: kinds[kind],
    size: out[0],
    mode: out[1],
    nlink: out[2],
    dev: out[3],
    ino: out[4],
    uid: out[5],
    gid: out[6],
    mtimeMs: out[7],
  })
  const methods = {
    stat(path) {
      return build(statInto.call(this, path, out))
    },
    lstat(path) {
      return build(lstatInto.call(this, path, out))
    },
  }
  for (const name of ['stat', 'lstat']) {
    const d = Object.getOwnPropertyDescriptor(proto, name)
    if (!d) throw new Error(`Root.prototype.${name} is missing`)
    d.value = methods[name]
    Object.defineProperty(proto, name, d)
  }
})"#;

/// Longest path (in UTF-8 bytes) read into the stack buffer; longer ones
/// take the `String` conversion.
const PATH_BUF: usize = 1024;

/// The native half of the fast `stat` (`follow`) and `lstat`: `this` is a
/// `Root`, the arguments are the path and the `Float64Array` to fill; the
/// result is the kind's index.
///
/// # Safety
///
/// `env` and `info` are the arguments of a Node-API callback.
unsafe fn stat_into(
    env: sys::napi_env,
    info: sys::napi_callback_info,
    follow: bool,
) -> napi::Result<sys::napi_value> {
    let mut cb = CallbackInfo::<2>::new(env, info, None, false)?;
    // SAFETY: `unwrap_raw` checks that `this` wraps a `Root` of this addon;
    // the object (so the `Root`) outlives this synchronous call.
    let this: &Root = unsafe { &*cb.unwrap_raw::<Root>()? };

    let mut data = ptr::null_mut();
    let mut len = 0;
    let mut kind = 0;
    // SAFETY: valid env and value; the out-pointers are live locals.
    let status = unsafe {
        sys::napi_get_typedarray_info(
            env,
            cb.get_arg(1),
            &mut kind,
            &mut len,
            &mut data,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    if status != sys::Status::napi_ok
        || kind != sys::TypedarrayType::float64_array
        || len < STAT_SLOTS
        || data.is_null()
    {
        return Err(napi::Error::new(
            napi::Status::InvalidArg,
            "the stat buffer must be a Float64Array of 8",
        ));
    }

    let js_env = Env::from(env);
    let mut buf = [0u8; PATH_BUF];
    let mut n = 0;
    // SAFETY: writes at most `PATH_BUF` bytes (with the NUL) into `buf`.
    let status = unsafe {
        sys::napi_get_value_string_utf8(
            env,
            cb.get_arg(0),
            buf.as_mut_ptr().cast(),
            PATH_BUF,
            &mut n,
        )
    };
    let short = match std::str::from_utf8(&buf[..n.min(PATH_BUF)]) {
        // Node-API writes whole characters only, at most `PATH_BUF - 1`
        // bytes: a path whose next character (up to 4 bytes) did not fit
        // comes back up to 3 bytes short of that, so only `n` below
        // `PATH_BUF - 4` is surely the whole path (before, a path cut
        // before its last character was taken as whole: the stat of
        // another file). U+FFFD may stand for a lone surrogate (Node-API
        // writes one for it). Either way, take the long way.
        Ok(p) if status == sys::Status::napi_ok && n < PATH_BUF - 4 && !p.contains('\u{FFFD}') => {
            Some(p)
        }
        _ => None,
    };
    let long;
    let path = match short {
        Some(p) => p,
        None => {
            // The `#[napi]` method's conversion (and its error for a
            // non-string).
            // SAFETY: valid env and value.
            let arg = unsafe { Unknown::from_napi_value(env, cb.get_arg(0))? };
            long = str_arg(arg, "path").or_throw(&js_env)?;
            long.as_str()
        }
    };

    let m = this.with(
        &js_env,
        |r| if follow { r.stat(path) } else { r.lstat(path) },
    )?;
    // SAFETY: checked above: a live Float64Array of at least 8 elements,
    // not aliased by any Rust reference.
    let out = unsafe { &mut *data.cast::<[f64; STAT_SLOTS]>() };
    let k = fill_stat(&m, out);
    let mut ret = ptr::null_mut();
    // SAFETY: valid env; `ret` is a live local.
    napi::check_status!(unsafe { sys::napi_create_uint32(env, k, &mut ret) })?;
    Ok(ret)
}

/// Runs [`stat_into`] as a Node-API callback: a `napi::Error` (or a panic)
/// is thrown like the generated glue throws it.
///
/// # Safety
///
/// `env` and `info` are the arguments of a Node-API callback.
unsafe fn stat_callback(
    env: sys::napi_env,
    info: sys::napi_callback_info,
    follow: bool,
) -> sys::napi_value {
    // SAFETY: forwarded from the caller.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe { stat_into(env, info, follow) }))
        .map_err(panic_to_error)
        .and_then(|r| r);
    r.unwrap_or_else(|e| {
        // SAFETY: valid env; `stat_into` leaves no exception pending.
        unsafe { JsError::from(e).throw_into(env) };
        ptr::null_mut()
    })
}

/// `statInto` (follows a final symlink).
unsafe extern "C" fn stat_into_cb(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: called by Node-API as a callback.
    unsafe { stat_callback(env, info, true) }
}

/// `lstatInto` (does not follow a final symlink).
unsafe extern "C" fn lstat_into_cb(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: called by Node-API as a callback.
    unsafe { stat_callback(env, info, false) }
}

/// Creates a native function (not exported) from a raw callback.
fn native_function(env: &Env, name: &str, cb: sys::napi_callback) -> napi::Result<sys::napi_value> {
    let mut f = ptr::null_mut();
    // SAFETY: valid env; `name` is passed with its length; `f` is a live local.
    napi::check_status!(unsafe {
        sys::napi_create_function(
            env.raw(),
            name.as_ptr().cast(),
            name.len() as isize,
            cb,
            ptr::null_mut(),
            &mut f,
        )
    })?;
    Ok(f)
}

/// Installs the fast `Root.prototype.stat` / `lstat` (module init, after
/// the classes are registered on `exports`).
pub(crate) fn install_fast_stat(env: &Env, exports: &Object<'_>) -> napi::Result<()> {
    let ctor: Unknown = exports.get_named_property("Root")?;
    let mut proto = ptr::null_mut();
    // SAFETY: valid env and value; `proto` is a live local.
    napi::check_status!(unsafe {
        sys::napi_get_named_property(env.raw(), ctor.raw(), c"prototype".as_ptr(), &mut proto)
    })?;
    let install: Unknown = env.run_script(INSTALL_STAT)?;
    let mut kinds = env.create_array(KINDS.len() as u32)?;
    for (i, k) in KINDS.iter().enumerate() {
        kinds.set(i as u32, k.as_str())?;
    }
    let args = [
        proto,
        native_function(env, "statInto", Some(stat_into_cb))?,
        native_function(env, "lstatInto", Some(lstat_into_cb))?,
        kinds.raw(),
    ];
    let mut undefined = ptr::null_mut();
    let mut ignored = ptr::null_mut();
    // SAFETY: valid env; `undefined` is a live local.
    napi::check_status!(unsafe { sys::napi_get_undefined(env.raw(), &mut undefined) })?;
    // SAFETY: valid env and values; `args` outlives the call.
    napi::check_status!(unsafe {
        sys::napi_call_function(
            env.raw(),
            undefined,
            install.raw(),
            args.len(),
            args.as_ptr(),
            &mut ignored,
        )
    })?;
    Ok(())
}

/// The `mode` argument (an integer from 0 to 0o777), or `default`.
fn mode_or(mode: Option<Unknown<'_>>, default: u32) -> Result<u32, sandgate::Error> {
    opt_num_arg(mode, "mode")?.map_or(Ok(default), |m| to_mode(m, "mode"))
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

/// `name` (an entry's name or a link's target, as stored) as a string, or
/// `E_PATH_INVALID` when it is not UTF-8: no string holds it exactly, and
/// its lossy spelling (U+FFFD for each stray byte) can be a real name of
/// its own, which a caller acting on the answer would reach instead.
/// `what` words the subject of the message from the name with its stray
/// bytes shown as `\xNN`.
fn exact_string(
    name: &std::ffi::OsStr,
    what: impl FnOnce(&str) -> String,
) -> Result<String, sandgate::Error> {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Ok(s.to_owned());
    }
    let mut shown = String::with_capacity(bytes.len() * 2);
    for chunk in bytes.utf8_chunks() {
        shown.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(shown, "\\x{b:02x}");
        }
    }
    Err(sandgate::Error::new(
        ErrorCode::PathInvalid,
        format!(
            "{} is not UTF-8, which no JavaScript string holds exactly; \
             its lossy spelling could name another file",
            what(&shown)
        ),
    ))
}

#[napi]
impl Root {
    /// Opens the directory `dir` as a root.
    #[napi(factory)]
    pub fn open(env: &Env, #[napi(ts_arg_type = "string")] dir: Unknown<'_>) -> napi::Result<Root> {
        let dir = str_arg(dir, "dir").or_throw(env)?;
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
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
        #[napi(ts_arg_type = "string | undefined | null")] flags: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "number | undefined | null")] mode: Option<Unknown<'_>>,
    ) -> napi::Result<i32> {
        let path = str_arg(path, "path").or_throw(env)?;
        let mode = mode_or(mode, 0o666).or_throw(env)?;
        let flags = opt_str_arg(flags, "flags").or_throw(env)?;
        let opts = open_options(flags.as_deref().unwrap_or("r"), mode).or_throw(env)?;
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
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
        #[napi(ts_arg_type = "number | undefined | null")] mode: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "boolean | undefined | null")] recursive: Option<Unknown<'_>>,
    ) -> napi::Result<()> {
        let path = str_arg(path, "path").or_throw(env)?;
        let mode = mode_or(mode, 0o777).or_throw(env)?;
        if opt_bool_arg(recursive, "recursive")
            .or_throw(env)?
            .unwrap_or(false)
        {
            self.with(env, |r| r.mkdir_all(&path, mode))
        } else {
            self.with(env, |r| r.mkdir(&path, mode))
        }
    }

    /// Removes one file, one symlink entry (never its target) or one empty
    /// directory.
    #[napi]
    pub fn remove(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<()> {
        let path = str_arg(path, "path").or_throw(env)?;
        self.with(env, |r| r.remove(&path))
    }

    /// Metadata, following a final symlink beneath the root.
    // Replaced at module load by the fast path (`INSTALL_STAT`), which
    // returns the same object.
    #[napi]
    pub fn stat(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<RootStat> {
        let path = str_arg(path, "path").or_throw(env)?;
        self.with(env, |r| r.stat(&path)).map(|m| stat_of(&m))
    }

    /// Metadata of the entry itself (a final symlink is not followed).
    // Replaced at module load like `stat`.
    #[napi]
    pub fn lstat(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<RootStat> {
        let path = str_arg(path, "path").or_throw(env)?;
        self.with(env, |r| r.lstat(&path)).map(|m| stat_of(&m))
    }

    /// The stored target of a symbolic link (not resolved).
    #[napi]
    pub fn readlink(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<String> {
        let path = str_arg(path, "path").or_throw(env)?;
        let target = self.with(env, |r| r.readlink(&path))?;
        exact_string(target.as_os_str(), |shown| {
            format!("the target of `{path}` (`{shown}`)")
        })
        .or_throw(env)
    }

    /// Renames `from` to `to`, both beneath the root, replacing an existing
    /// destination like `rename(2)`; a final symlink is moved, not followed.
    #[napi]
    pub fn rename(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] from: Unknown<'_>,
        #[napi(ts_arg_type = "string")] to: Unknown<'_>,
    ) -> napi::Result<()> {
        let (from, to) = (
            str_arg(from, "from").or_throw(env)?,
            str_arg(to, "to").or_throw(env)?,
        );
        self.with(env, |r| r.rename(&from, &to, RenameMode::Replace))
    }

    /// The names in a directory (without `.` and `..`), sorted.
    #[napi]
    pub fn readdir(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<Vec<String>> {
        let path = str_arg(path, "path").or_throw(env)?;
        let mut names = self
            .with(env, |r| r.read_dir(&path))?
            .iter()
            .map(|e| {
                exact_string(e.name(), |shown| match path.trim_end_matches('/') {
                    "" | "." => format!("the name `{shown}`"),
                    dir => format!("the name `{dir}/{shown}`"),
                })
            })
            .collect::<Result<Vec<String>, _>>()
            .or_throw(env)?;
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
