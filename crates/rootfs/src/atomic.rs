//! Atomic, durable replacement of one directory entry.
//!
//! The new bytes are written to an unnamed `O_TMPFILE` in the target's own
//! directory and fsynced, then linked under a temporary name and renamed over
//! the target, and the directory is fsynced. Until the link, a killed process
//! leaves nothing behind (the unnamed file vanishes with its descriptor);
//! between link and rename (two system calls) it leaves the temporary name,
//! which the next replace of the same target reclaims. Filesystems without
//! `O_TMPFILE` get a named temporary file that is removed on every error path.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, RenameFlags, CWD};
use rustix::io::Errno;

/// How often a replace starts over when a concurrent replace of the same
/// target reclaims the temporary name in between.
const RETRIES: usize = 16;

/// The temporary name used for `name`: `.<name>.sandgate-tmp`. A name too
/// long for that to fit NAME_MAX keeps its first bytes and gains a hash of
/// the whole name, `.<start>.<32 hex digits>.sandgate-tmp`: two long names
/// that begin alike must not share a temporary name, or a replace of one
/// could rename the other's new bytes over its own target. The name stays a
/// function of `name` alone, so the next replace still reclaims a leftover.
pub(crate) fn temp_name(name: &[u8]) -> Vec<u8> {
    const SUFFIX: &[u8] = b".sandgate-tmp";
    const NAME_MAX: usize = 255;
    let mut t = Vec::with_capacity(NAME_MAX);
    t.push(b'.');
    if 1 + name.len() + SUFFIX.len() <= NAME_MAX {
        t.extend_from_slice(name);
    } else {
        let hash = format!(".{:032x}", fnv1a_128(name));
        let keep = NAME_MAX - 1 - hash.len() - SUFFIX.len();
        t.extend_from_slice(&name[..keep]);
        t.extend_from_slice(hash.as_bytes());
    }
    t.extend_from_slice(SUFFIX);
    t
}

/// FNV-1a, 128 bits: a stable hash (the same in every build and process)
/// that tells apart names sharing their first bytes.
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;
    bytes
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u128::from(b)).wrapping_mul(PRIME))
}

fn io_errno(e: std::io::Error) -> Errno {
    Errno::from_io_error(&e).unwrap_or(Errno::IO)
}

/// Replaces the entry `name` in `dir` (a readable directory descriptor) with a
/// regular file holding `data`. `mode` is the permission to give it (that of
/// the file being replaced), or `None` for 0o666 less the umask.
pub(crate) fn replace(
    dir: impl AsFd,
    name: &[u8],
    data: &[u8],
    mode: Option<u32>,
) -> Result<(), Errno> {
    write(dir.as_fd(), name, data, mode, Some(Temp::Reclaim))
}

/// As [`replace`], but the new file is linked under a temporary name of its
/// own (the usual one with the process id and a counter added) and nothing
/// already in `dir` is ever removed: for callers to whom the usual
/// temporary name may be someone else's file.
pub(crate) fn replace_unique(
    dir: impl AsFd,
    name: &[u8],
    data: &[u8],
    mode: Option<u32>,
) -> Result<(), Errno> {
    write(dir.as_fd(), name, data, mode, Some(Temp::Unique))
}

/// Which temporary name a replace links its new file under.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Temp {
    /// [`temp_name`], removing a leftover found there.
    Reclaim,
    /// [`unique_name`], never removing anything.
    Unique,
}

/// A temporary name for `name` that no other replace uses:
/// [`temp_name`] cut to leave room for `.<pid>.<counter>` after it.
fn unique_name(name: &[u8]) -> Vec<u8> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut tname = temp_name(name);
    let unique = format!(
        ".{}.{}",
        rustix::process::getpid().as_raw_nonzero(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    tname.truncate(255 - unique.len());
    tname.extend_from_slice(unique.as_bytes());
    tname
}

/// Creates `name` in `dir` holding `data`, atomically and durably, failing
/// with EEXIST if anything has the name. With `O_TMPFILE` the file is linked
/// straight to its name, so no temporary name ever exists.
pub(crate) fn create(dir: impl AsFd, name: &[u8], data: &[u8]) -> Result<(), Errno> {
    write(dir.as_fd(), name, data, None, None)
}

/// Writes `name` through an unnamed file: with `replace` (and the kind of
/// temporary name it uses) over whatever is there, else only where nothing is.
fn write(
    dir: BorrowedFd<'_>,
    name: &[u8],
    data: &[u8],
    mode: Option<u32>,
    replace: Option<Temp>,
) -> Result<(), Errno> {
    within_file_size_limit(data.len())?;
    let keep = mode.map(|mode| kept(dir, name, mode));
    let keep = keep.as_ref();
    let create_mode = Mode::from_bits_truncate(mode.unwrap_or(0o666));
    let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
    // Each attempt uses a fresh unnamed file: once linked and then unlinked
    // by someone else, an O_TMPFILE inode can never be linked again.
    for _ in 0..RETRIES {
        let tmp = match rfs::openat(dir, c".", flags, create_mode) {
            Ok(fd) => File::from(fd),
            // No O_TMPFILE on this kernel or filesystem.
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOSYS) => {
                return write_named(dir, name, data, create_mode, keep, replace.is_some())
            }
            Err(e) => return Err(e),
        };
        fill(&tmp, data, keep)?;
        let Some(temp) = replace else {
            // linkat never replaces: EEXIST if anything has the name.
            link_tmpfile(&tmp, dir, name, false)?;
            return rfs::fsync(dir);
        };
        let tname = match temp {
            Temp::Reclaim => {
                let tname = temp_name(name);
                match link_tmpfile(&tmp, dir, &tname, true) {
                    Ok(()) => tname,
                    // What has the temporary name is no leftover this
                    // replace may reclaim: a directory (no replace leaves
                    // one), or an entry it may not remove (another user's
                    // in a sticky directory, an immutable one). Go through
                    // a name of our own and leave it as it is.
                    Err(Errno::ISDIR | Errno::PERM | Errno::ACCESS) => {
                        link_unique(&tmp, dir, name)?
                    }
                    Err(e) => return Err(e),
                }
            }
            Temp::Unique => link_unique(&tmp, dir, name)?,
        };
        match rfs::renameat(dir, &tname[..], dir, name) {
            Ok(()) => return rfs::fsync(dir),
            // A concurrent replace of the same target reclaimed the temporary
            // name before our rename: start over.
            Err(Errno::NOENT) => continue,
            Err(e) => {
                let _ = rfs::unlinkat(dir, &tname[..], AtFlags::empty());
                return Err(e);
            }
        }
    }
    Err(Errno::AGAIN)
}

/// Refuses with `EFBIG`, before anything is created, a file longer than
/// this process's file size limit (see [`crate::within_file_size_limit`]).
/// The new file is written from offset 0, so its end is `len`.
fn within_file_size_limit(len: usize) -> Result<(), Errno> {
    crate::within_file_size_limit(len as u64)
        .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::FBIG))
}

/// What a replace carries over from the file it replaces.
struct Keep {
    /// The permission bits.
    mode: u32,
    /// The group, where it could be read.
    gid: Option<u32>,
    /// The access ACL (`system.posix_acl_access`).
    acl: Acl,
}

/// The access ACL of a replaced file.
enum Acl {
    /// It has none (or its filesystem has no ACLs).
    None,
    /// This one.
    Some(Vec<u8>),
    /// It could not be read (procfs is not mounted).
    Unknown,
}

const ACL_ACCESS: &str = "system.posix_acl_access";

/// What a replace of the entry `name` in `dir`, whose permission bits are
/// `mode`, keeps: its group and its access ACL. The entry is opened
/// `O_PATH`, which opens nothing: a FIFO or a device swapped in at the name
/// since it was seen to be a regular file is never opened for reading (a
/// writer blocked on that FIFO would go on). Its ACL is read through
/// procfs; where procfs is not mounted, through a descriptor opened for
/// reading by name, used only if it is the same regular file. Where
/// neither can be had, or the entry is no longer a regular file, the ACL
/// is [`Acl::Unknown`].
fn kept(dir: BorrowedFd<'_>, name: &[u8], mode: u32) -> Keep {
    fn acl_of(fd: BorrowedFd<'_>) -> Result<Vec<u8>, Errno> {
        let mut buf = vec![0u8; rfs::fgetxattr_query(fd, ACL_ACCESS)?];
        let n = rfs::fgetxattr(fd, ACL_ACCESS, &mut buf[..])?;
        buf.truncate(n);
        Ok(buf)
    }
    fn acl_by_proc(fd: BorrowedFd<'_>) -> Result<Vec<u8>, Errno> {
        let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let mut buf = vec![0u8; rfs::getxattr_query(proc.as_str(), ACL_ACCESS)?];
        let n = rfs::getxattr(proc.as_str(), ACL_ACCESS, &mut buf[..])?;
        buf.truncate(n);
        Ok(buf)
    }
    let unknown = Keep {
        mode,
        gid: None,
        acl: Acl::Unknown,
    };
    let nofollow = OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rfs::openat(dir, name, OFlags::PATH | nofollow, Mode::empty()) else {
        return unknown;
    };
    let st = match rfs::fstat(&fd) {
        Ok(st) if rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile => st,
        _ => return unknown,
    };
    let read = match acl_by_proc(fd.as_fd()) {
        // No procfs: the name opened for reading, if it is the same file.
        Err(Errno::NOENT | Errno::NOTDIR) => {
            let readable = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | nofollow;
            match rfs::openat(dir, name, readable, Mode::empty()) {
                Ok(again) => match rfs::fstat(&again) {
                    Ok(s) if (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino) => {
                        acl_of(again.as_fd())
                    }
                    _ => Err(Errno::STALE),
                },
                Err(e) => Err(e),
            }
        }
        read => read,
    };
    let acl = match read {
        Ok(v) => Acl::Some(v),
        Err(Errno::NODATA | Errno::OPNOTSUPP) => Acl::None,
        Err(_) => Acl::Unknown,
    };
    Keep {
        mode,
        gid: Some(st.st_gid),
        acl,
    }
}

fn fill(file: &File, data: &[u8], keep: Option<&Keep>) -> Result<(), Errno> {
    let mut f = file;
    f.write_all(data).map_err(io_errno)?;
    if let Some(k) = keep {
        let mut mode = k.mode;
        // Created in the directory, the new file took its default ACL,
        // whose entries (masked by the group bits) could grant users the
        // old file never granted: it gets the old file's ACL, or none.
        // Where the old ACL cannot be read (no procfs) or set (an id a
        // user namespace does not map), the group bits, which may have
        // been its mask, grant nothing: given to the group alone they
        // could grant more than the ACL did.
        let narrow = match &k.acl {
            Acl::Some(acl) => match rfs::fsetxattr(file, ACL_ACCESS, acl, rfs::XattrFlags::empty())
            {
                Ok(()) => false,
                Err(Errno::OPNOTSUPP | Errno::INVAL | Errno::PERM) => true,
                Err(e) => return Err(e),
            },
            Acl::None | Acl::Unknown => match rfs::fremovexattr(file, ACL_ACCESS) {
                Ok(()) | Err(Errno::NODATA | Errno::OPNOTSUPP) => matches!(k.acl, Acl::Unknown),
                Err(e) => return Err(e),
            },
        };
        if narrow {
            mode &= !0o070;
        }
        // Made in the directory, the new file has the caller's group (or
        // a setgid directory's): the old file's group bits must not go to
        // another group. Where the caller may not give it the old group
        // (not a member; a group a user namespace does not map), the new
        // file grants its group nothing.
        if let Some(gid) = k.gid {
            match rfs::fchown(file, None, Some(rfs::Gid::from_raw(gid))) {
                Ok(()) => {}
                Err(Errno::PERM | Errno::INVAL) => mode &= !0o070,
                Err(e) => return Err(e),
            }
        }
        // The creation mode went through the umask; restore the exact bits.
        rfs::fchmod(file, Mode::from_bits_truncate(mode))?;
    }
    file.sync_all().map_err(io_errno)
}

/// Gives the unnamed file `tmp` the name `tname` in `dir`; with `reclaim`, a
/// leftover of an interrupted earlier replace is removed first (a directory
/// there is not removed: `EISDIR`; nor an entry the caller may not remove:
/// `EPERM`, `EACCES`).
fn link_tmpfile(tmp: &File, dir: BorrowedFd<'_>, tname: &[u8], reclaim: bool) -> Result<(), Errno> {
    for _ in 0..RETRIES {
        let r = match rfs::linkat(tmp, c"", dir, tname, AtFlags::EMPTY_PATH) {
            // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH on many kernels; the
            // procfs link of our own descriptor needs nothing.
            Err(Errno::NOENT | Errno::PERM) => {
                let proc = format!("/proc/self/fd/{}", tmp.as_raw_fd());
                rfs::linkat(CWD, proc.as_str(), dir, tname, AtFlags::SYMLINK_FOLLOW)
            }
            r => r,
        };
        match r {
            Ok(()) => return Ok(()),
            Err(Errno::EXIST) if reclaim => match rfs::unlinkat(dir, tname, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => continue,
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
    Err(Errno::AGAIN)
}

/// Links the unnamed file `tmp` under a fresh [`unique_name`] of `name` in
/// `dir`, never removing what is there: a name taken is passed over.
fn link_unique(tmp: &File, dir: BorrowedFd<'_>, name: &[u8]) -> Result<Vec<u8>, Errno> {
    for _ in 0..RETRIES {
        let tname = unique_name(name);
        match link_tmpfile(tmp, dir, &tname, false) {
            Ok(()) => return Ok(tname),
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno::EXIST)
}

/// The fallback for filesystems without `O_TMPFILE`: a uniquely named file,
/// removed on every error path.
fn write_named(
    dir: BorrowedFd<'_>,
    name: &[u8],
    data: &[u8],
    create_mode: Mode,
    keep: Option<&Keep>,
    replace: bool,
) -> Result<(), Errno> {
    let tname = unique_name(name);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // The file has a name while it is written, and a descriptor opened
    // meanwhile keeps its access: for a replace it grants its owner alone
    // until `fill` gives it the old file's group, ACL and bits (made with
    // the old bits, it had the caller's group and the directory's default
    // ACL meanwhile).
    let create_mode = match keep {
        Some(_) => create_mode & Mode::from_bits_truncate(0o600),
        None => create_mode,
    };
    let tmp = File::from(rfs::openat(dir, &tname[..], flags, create_mode)?);
    let rename = if replace {
        RenameFlags::empty()
    } else {
        RenameFlags::NOREPLACE
    };
    let result = fill(&tmp, data, keep)
        .and_then(|()| rfs::renameat_with(dir, &tname[..], dir, name, rename))
        .and_then(|()| rfs::fsync(dir));
    if result.is_err() {
        let _ = rfs::unlinkat(dir, &tname[..], AtFlags::empty());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::temp_name;

    #[test]
    fn temp_name_fits_name_max() {
        assert_eq!(temp_name(b"a.txt"), b".a.txt.sandgate-tmp");
        assert_eq!(temp_name(&[b'x'; 255]).len(), 255);
        // The longest name kept whole, and the shortest that is not.
        let whole = [b'x'; 241];
        assert_eq!(
            temp_name(&whole),
            [&b"."[..], &whole, b".sandgate-tmp"].concat()
        );
        let (a, b) = ([b'x'; 242], [[b'x'; 241].as_slice(), b"y"].concat());
        assert_eq!(temp_name(&a).len(), 255);
        assert_ne!(temp_name(&a), temp_name(&b));
        assert!(temp_name(&b).ends_with(b".sandgate-tmp"));
    }
}
