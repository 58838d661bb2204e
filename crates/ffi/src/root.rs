//! `sg_root_*`: the mechanism layer (docs/reference/resolution.md). Names resolve beneath an
//! opened directory; `..` is allowed while it stays inside; a symlink is
//! followed only while it stays inside. Opened files are descriptors the
//! caller owns.

use std::ffi::{c_char, OsStr};
use std::os::fd::IntoRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use facade::rootfs::{self, Metadata, OpenOptions, RenameMode, Root};
use facade::{Error, FileKind, Resolver};

use crate::error::*;

/// An opened directory that names resolve beneath. Free with
/// `sg_root_free`.
pub struct sg_root {
    pub(crate) root: Root,
}

/// Which resolver a root uses.
pub type sg_resolver = u32;
/// openat2 where the kernel has it, else the descriptor walk (recommended).
pub const SG_RESOLVER_AUTO: sg_resolver = 0;
/// openat2(RESOLVE_BENEATH) only; fails where the kernel lacks it.
pub const SG_RESOLVER_OPENAT2: sg_resolver = 1;
/// The descriptor walk only.
pub const SG_RESOLVER_WALK: sg_resolver = 2;

/// The kind of a file.
pub type sg_kind = u32;
/// A regular file.
pub const SG_KIND_FILE: sg_kind = 1;
/// A directory.
pub const SG_KIND_DIR: sg_kind = 2;
/// A symbolic link (only from calls that do not follow it).
pub const SG_KIND_SYMLINK: sg_kind = 3;
/// A FIFO, socket or device.
pub const SG_KIND_OTHER: sg_kind = 4;

/// What a stat answers. `sg_sandbox_stat` fills `kind`, `mode` and `size`
/// and sets the rest to 0.
#[repr(C)]
pub struct sg_stat {
    /// An `SG_KIND_*` value.
    pub kind: sg_kind,
    /// Permission bits (`st_mode & 07777`).
    pub mode: u32,
    /// Size in bytes.
    pub size: u64,
    /// Number of hard links.
    pub nlink: u64,
    /// Device.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification time, seconds since the epoch.
    pub mtime_sec: i64,
    /// Modification time, nanoseconds.
    pub mtime_nsec: u32,
}

pub(crate) fn kind_value(k: FileKind) -> sg_kind {
    match k {
        FileKind::File => SG_KIND_FILE,
        FileKind::Dir => SG_KIND_DIR,
        FileKind::Symlink => SG_KIND_SYMLINK,
        FileKind::Other => SG_KIND_OTHER,
    }
}

pub(crate) fn resolver_of(r: sg_resolver) -> Result<Resolver, Error> {
    match r {
        SG_RESOLVER_AUTO => Ok(Resolver::Auto),
        SG_RESOLVER_OPENAT2 => Ok(Resolver::Openat2),
        SG_RESOLVER_WALK => Ok(Resolver::Walk),
        other => Err(request(format!("unknown resolver {other}"))),
    }
}

fn stat_of(m: &Metadata) -> sg_stat {
    let (mtime_sec, mtime_nsec) = m.mtime();
    sg_stat {
        kind: kind_value(m.kind()),
        mode: m.mode(),
        size: m.len(),
        nlink: m.nlink(),
        dev: m.dev(),
        ino: m.ino(),
        uid: m.uid(),
        gid: m.gid(),
        mtime_sec,
        mtime_nsec,
    }
}

/// A root-layer name: any bytes (file names need not be UTF-8).
///
/// # Safety
///
/// As [`arg_bytes`].
unsafe fn arg_path<'a>(ptr: *const c_char, len: usize, what: &str) -> Result<&'a Path, Error> {
    // SAFETY: forwarded contract.
    let b = unsafe { arg_bytes(ptr.cast(), len, what)? };
    Ok(Path::new(OsStr::from_bytes(b)))
}

/// Opens the directory `dir` (a host path, resolved normally) as a root.
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new root that the caller owns and frees with
/// `sg_root_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `dir` points to `dir_len` bytes; `out` is valid for writes; `err` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_open(
    dir: *const c_char,
    dir_len: usize,
    resolver: sg_resolver,
    out: *mut *mut sg_root,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (dir, out) = unsafe { (arg_path(dir, dir_len, "dir")?, out_ptr(out, "out")?) };
        let root = Root::open_with_resolver(dir, resolver_of(resolver)?)?;
        put(out, into_handle(sg_root { root }));
        Ok(())
    })
}

/// Opens the directory `path` beneath `root` as a root of its own (Go's
/// `Root.OpenRoot`).
///
/// # Return value
///
/// `SG_OK` with `*out` set to a new root that the caller owns and frees with
/// `sg_root_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `root` is NULL or a live root; `path` points to `path_len` bytes; `out`
/// is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_open_root(
    root: *const sg_root,
    path: *const c_char,
    path_len: usize,
    out: *mut *mut sg_root,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (r, path, out) = unsafe {
            (
                handle(root, "root")?,
                arg_path(path, path_len, "path")?,
                out_ptr(out, "out")?,
            )
        };
        let sub = r.root.open_dir(path)?;
        put(out, into_handle(sg_root { root: sub }));
        Ok(())
    })
}

/// Frees a root (closing its directory). NULL is accepted.
///
/// # Return value
///
/// None.
///
/// # Safety
///
/// `root` is NULL or a root from this library, freed once, not in use.
#[no_mangle]
pub unsafe extern "C" fn sg_root_free(root: *mut sg_root) {
    // SAFETY: forwarded contract.
    unsafe { free_handle(root) }
}

/// The name the root was opened with (for `sg_root_open_root`, the parent's
/// name joined with the path).
///
/// # Return value
///
/// `SG_OK` with `*out` set to the name the root was opened with, owned by the
/// caller and freed with `sg_bytes_free`; otherwise the code of the refusal
/// or failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL) and the outputs
/// left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `root` is NULL or a live root; `out` is valid for writes; `err` is NULL
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_name(
    root: *const sg_root,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (r, out) = unsafe { (handle(root, "root")?, out_ptr(out, "out")?) };
        put(
            out,
            sg_bytes::from_vec(r.root.name().as_os_str().as_bytes().to_vec()),
        );
        Ok(())
    })
}

/// The `O_*` flags `sg_root_open_file` understands.
const KNOWN_FLAGS: i32 = libc::O_ACCMODE
    | libc::O_CREAT
    | libc::O_EXCL
    | libc::O_TRUNC
    | libc::O_APPEND
    | libc::O_NOFOLLOW
    | libc::O_CLOEXEC
    | libc::O_NOCTTY
    | libc::O_LARGEFILE;

fn options_of(flags: i32, mode: u32) -> Result<OpenOptions, Error> {
    let unknown = flags & !KNOWN_FLAGS;
    if unknown != 0 {
        return Err(request(format!(
            "unsupported open flags {unknown:#o} (supported: O_RDONLY, O_WRONLY, O_RDWR, \
             O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_NOFOLLOW, O_CLOEXEC)"
        )));
    }
    if mode & !0o7777 != 0 {
        return Err(request(format!("mode {mode:#o} has bits beyond 07777")));
    }
    let mut o = OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY => o.read(true),
        libc::O_WRONLY => o.write(true),
        libc::O_RDWR => o.read(true).write(true),
        _ => return Err(request("invalid access mode in open flags")),
    };
    let create = flags & libc::O_CREAT != 0;
    o.create(create)
        .create_new(create && flags & libc::O_EXCL != 0)
        .truncate(flags & libc::O_TRUNC != 0)
        .append(flags & libc::O_APPEND != 0)
        .follow(flags & libc::O_NOFOLLOW == 0)
        .mode(mode);
    Ok(o)
}

/// Opens `path` beneath the root with `open(2)`-style `flags` (`O_RDONLY`,
/// `O_WRONLY`, `O_RDWR`, `O_CREAT`, `O_EXCL`, `O_TRUNC`, `O_APPEND`,
/// `O_NOFOLLOW`; the descriptor is always close-on-exec) and `mode` for a
/// created file, like Go's `Root.OpenFile`. `*fd` receives a descriptor the
/// caller owns and closes. A final symlink is followed beneath the root
/// unless `O_NOFOLLOW`; a file is never created through a dangling symlink.
///
/// # Return value
///
/// `SG_OK` with `*fd` set to a new close-on-exec descriptor that the caller
/// owns and closes with `close(2)`; otherwise the code of the refusal or
/// failure (`SG_E_REQUEST` for a NULL handle or a malformed argument,
/// `SG_E_INTERNAL` for a bug), with `*err` set to a new error object that the
/// caller frees with `sg_error_free` (when `err` is not NULL) and the outputs
/// left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `root` is NULL or a live root; `path` points to `path_len` bytes; `fd`
/// is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_open_file(
    root: *const sg_root,
    path: *const c_char,
    path_len: usize,
    flags: i32,
    mode: u32,
    fd: *mut i32,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (r, path, fd) = unsafe {
            (
                handle(root, "root")?,
                arg_path(path, path_len, "path")?,
                out_ptr(fd, "fd")?,
            )
        };
        let options = options_of(flags, mode)?;
        let file = r.root.open_with(path, &options)?;
        put(fd, file.into_raw_fd());
        Ok(())
    })
}

/// Removes the file, symlink or empty directory `path` beneath the root (a
/// final symlink is removed, not followed), like Go's `Root.Remove`.
///
/// # Return value
///
/// `SG_OK` on success; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL). `*err` is set to NULL on
/// success.
///
/// # Safety
///
/// `root` is NULL or a live root; `path` points to `path_len` bytes; `err`
/// is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_remove(
    root: *const sg_root,
    path: *const c_char,
    path_len: usize,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (r, p) = unsafe { (handle(root, "root")?, arg_path(path, path_len, "path")?) };
        r.root.remove(p)?;
        Ok(())
    })
}

/// Creates the directory `path` beneath the root with permission bits
/// `mode` (before the umask), like Go's `Root.Mkdir`.
///
/// # Return value
///
/// `SG_OK` on success; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL). `*err` is set to NULL on
/// success.
///
/// # Safety
///
/// `root` is NULL or a live root; `path` points to `path_len` bytes; `err`
/// is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_mkdir(
    root: *const sg_root,
    path: *const c_char,
    path_len: usize,
    mode: u32,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (r, p) = unsafe { (handle(root, "root")?, arg_path(path, path_len, "path")?) };
        if mode & !0o7777 != 0 {
            return Err(request(format!("mode {mode:#o} has bits beyond 07777")));
        }
        r.root.mkdir(p, mode)?;
        Ok(())
    })
}

/// The body of `sg_root_stat` and `sg_root_lstat`.
///
/// # Safety
///
/// As those functions.
unsafe fn stat_with(
    root: *const sg_root,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_stat,
    err: *mut *mut sg_error,
    f: impl FnOnce(&Root, &Path) -> rootfs::Result<Metadata>,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (r, p, out) = unsafe {
            (
                handle(root, "root")?,
                arg_path(path, path_len, "path")?,
                out_ptr(out, "out")?,
            )
        };
        let m = f(&r.root, p)?;
        put(out, stat_of(&m));
        Ok(())
    })
}

/// Describes `path` beneath the root, following a final symlink beneath the
/// root (Go's `Root.Stat`). An empty `path` names nothing: `SG_E_NOT_FOUND`
/// (errno `ENOENT`, as `open(2)` answers), here and in every `sg_root_*`
/// call, where `sg_sandbox_*` answers `SG_E_PATH_INVALID`.
///
/// # Return value
///
/// `SG_OK` with `*out` filled (plain values, nothing to free); otherwise the
/// code of the refusal or failure (`SG_E_REQUEST` for a NULL handle or a
/// malformed argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new
/// error object that the caller frees with `sg_error_free` (when `err` is not
/// NULL) and the outputs left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `root` is NULL or a live root; `path` points to `path_len` bytes; `out`
/// is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_stat(
    root: *const sg_root,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_stat,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe { stat_with(root, path, path_len, out, err, |r, p| r.stat(p)) }
}

/// Describes `path` beneath the root without following a final symlink
/// (Go's `Root.Lstat`).
///
/// # Return value
///
/// `SG_OK` with `*out` filled (plain values, nothing to free); otherwise the
/// code of the refusal or failure (`SG_E_REQUEST` for a NULL handle or a
/// malformed argument, `SG_E_INTERNAL` for a bug), with `*err` set to a new
/// error object that the caller frees with `sg_error_free` (when `err` is not
/// NULL) and the outputs left as they were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `root` is NULL or a live root; `path` points to `path_len` bytes; `out`
/// is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_lstat(
    root: *const sg_root,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_stat,
    err: *mut *mut sg_error,
) -> sg_status {
    // SAFETY: forwarded contract.
    unsafe { stat_with(root, path, path_len, out, err, |r, p| r.lstat(p)) }
}

/// The stored target of the symlink `path` beneath the root (Go's
/// `Root.Readlink`). The target is returned as stored, never resolved.
///
/// # Return value
///
/// `SG_OK` with `*out` set to the link's target, owned by the caller and
/// freed with `sg_bytes_free`; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL) and the outputs left as they
/// were. `*err` is set to NULL on success.
///
/// # Safety
///
/// `root` is NULL or a live root; `path` points to `path_len` bytes; `out`
/// is valid for writes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_readlink(
    root: *const sg_root,
    path: *const c_char,
    path_len: usize,
    out: *mut sg_bytes,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (r, p, out) = unsafe {
            (
                handle(root, "root")?,
                arg_path(path, path_len, "path")?,
                out_ptr(out, "out")?,
            )
        };
        let target = r.root.readlink(p)?;
        put(out, sg_bytes::from_vec(target.into_os_string().into_vec()));
        Ok(())
    })
}

/// Renames `from` to `to`, both beneath the root, replacing a file at `to`
/// like `rename(2)` and Go's `Root.Rename`.
///
/// # Return value
///
/// `SG_OK` on success; otherwise the code of the refusal or failure
/// (`SG_E_REQUEST` for a NULL handle or a malformed argument, `SG_E_INTERNAL`
/// for a bug), with `*err` set to a new error object that the caller frees
/// with `sg_error_free` (when `err` is not NULL). `*err` is set to NULL on
/// success.
///
/// # Safety
///
/// `root` is NULL or a live root; `from`/`to` point to their lengths in
/// bytes; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn sg_root_rename(
    root: *const sg_root,
    from: *const c_char,
    from_len: usize,
    to: *const c_char,
    to_len: usize,
    err: *mut *mut sg_error,
) -> sg_status {
    boundary(err, || {
        // SAFETY: the caller's contract.
        let (r, from, to) = unsafe {
            (
                handle(root, "root")?,
                arg_path(from, from_len, "from")?,
                arg_path(to, to_len, "to")?,
            )
        };
        r.root.rename(from, to, RenameMode::Replace)?;
        Ok(())
    })
}
