//! Removing the session's private temporary directory at dispose, and
//! the ones a killed host process left.
//!
//! A host process that is killed never disposes: its directory, with what
//! its commands put there, would stay. So each directory's name carries
//! its owner ([`owner_tag`]: the PID namespace, pid and start time of the
//! process that made it), and an executor starting removes those of its
//! own PID namespace and user whose owner is gone ([`sweep`]). A live
//! owner's pid and start time still match; a reused pid has another start
//! time.
//!
//! The command had the directory writable, and Landlock does not restrict
//! `chmod` or inode flags: it can take the owner's permissions away from
//! the directory itself and from what it made there (`chmod 000`), and a
//! command run as root with `confine = "off"` can make entries immutable
//! or append-only (`chattr +i`, `+a`; a confined one holds no
//! `CAP_LINUX_IMMUTABLE`). Either would make a plain removal fail and
//! leave the directory, with whatever the command put in it, on the host
//! after dispose. So the removal opens up what it meets locked, at any
//! depth: a directory it cannot open or remove from gets the owner's read,
//! write and search permission and loses those two flags, a regular file
//! it cannot remove loses them, each through a descriptor opened without
//! following a symlink (a symlink is removed, never followed); then the
//! step is tried again.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{self as rfs, AtFlags, FileType, IFlags, Mode, OFlags};

/// How every session directory's name begins.
pub(crate) const PREFIX: &str = "sandgate-exec-";

/// Where private directories are made: the host's temporary directory
/// ([`std::env::temp_dir`], so `TMPDIR` where it is set and not empty,
/// else `/tmp`) as an absolute path. A relative `TMPDIR` is taken from the
/// host process's working directory now: commands run in another
/// directory, where the relative name would name a different one (in
/// their workspace), and the host may change directory before it removes
/// what it made.
pub(crate) fn base() -> io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir();
    if dir.as_os_str().is_empty() {
        return Ok(std::path::PathBuf::from("/tmp"));
    }
    std::path::absolute(dir)
}

/// `<pidns>-<pid>-<start>` for this process: the inode of its PID
/// namespace (hex), its pid, and its start time in clock ticks since
/// boot (field 22 of `/proc/self/stat`). `None` without `/proc`: such
/// directories are never swept.
pub(crate) fn owner_tag() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let ns = fs::metadata("/proc/self/ns/pid").ok()?.ino();
    let pid = std::process::id();
    Some(format!("{ns:x}-{pid}-{}", start_time(pid)?))
}

/// Field 22 of `/proc/<pid>/stat` (after the parenthesized name, which
/// may hold anything, field 3 comes first).
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// How the name of confined git's private copy of a repository begins
/// (`sandgate-git-<owner>-<random>`, swept as session directories are).
pub(crate) const GIT_PREFIX: &str = "sandgate-git-";

/// Removes, in `base`, every session directory of this user whose owner
/// (in the PID namespace of `owner`, this process's tag) is gone. Best
/// effort: what cannot be read or removed is left.
pub(crate) fn sweep(base: &Path, owner: &str) {
    sweep_named(base, PREFIX, owner);
}

/// [`sweep`] for the directories whose names begin with `prefix` and go
/// on `<owner>-<random>`.
pub(crate) fn sweep_named(base: &Path, prefix: &str, owner: &str) {
    let Some((ns, _)) = owner.split_once('-') else {
        return;
    };
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    let uid = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let mut parts = rest.split('-');
        let (Some(their_ns), Some(pid), Some(start), Some(_), None) = (
            parts.next(),
            parts.next().and_then(|p| p.parse::<u32>().ok()),
            parts.next().and_then(|s| s.parse::<u64>().ok()),
            parts.next(),
            parts.next(),
        ) else {
            continue;
        };
        if their_ns != ns || start_time(pid) == Some(start) {
            continue;
        }
        let path = entry.path();
        // Its own directory, not a link, made by this user.
        use std::os::unix::fs::MetadataExt;
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() && m.uid() == uid => {
                let _ = remove(&path);
            }
            _ => {}
        }
    }
}

/// The inode flags that keep entries from being removed, even by root.
const PINNED: IFlags = IFlags::IMMUTABLE.union(IFlags::APPEND);

/// How a regular file is opened to take its pinning flags off.
const FILE_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

const PATH_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::NOFOLLOW)
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);

/// Removes the directory `path` and everything beneath it; a missing
/// directory is not an error.
pub(crate) fn remove(path: &Path) -> io::Result<()> {
    match remove_tree(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    // The top itself, locked: what lies beneath is opened up as the
    // removal meets it.
    let top = rfs::open(path, PATH_FLAGS, Mode::empty())?;
    drop(open_up(top.as_fd()));
    match remove_tree(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

/// The most directory descriptors [`remove_tree`] holds at a time.
const HELD: usize = 64;

/// How often [`remove_tree`] lists one directory again when it is still
/// not empty at the end of its listing (entries made meanwhile).
const RELISTS: u32 = 8;

/// A directory [`remove_tree`] is in: its listing while it is one of the
/// last [`HELD`] entered, its identity, and its name in the one above.
struct Level {
    dir: Option<rfs::Dir>,
    dev: u64,
    ino: u64,
    name: CString,
    relists: u32,
}

const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);

/// Removes the directory `path` and everything beneath it, symlinks
/// removed and never followed, in a loop rather than by recursion, holding
/// the descriptors of the last [`HELD`] directories only. The command
/// owned the directory and can make a chain of directories tens of
/// thousands of levels deep in it (`mkdir d; cd d` in a loop goes past
/// PATH_MAX): the standard library's recursive removal, a stack frame and
/// a descriptor per level, overflowed the stack of the thread that
/// disposed (ending the host process) or failed with EMFILE and left the
/// directory. A directory whose descriptor was let go is opened again as
/// `..` of the one below it, and used only when it is the very directory
/// entered on the way down (same device and inode): one moved meanwhile
/// fails the removal rather than have entries removed elsewhere.
fn remove_tree(path: &Path) -> io::Result<()> {
    let top = match rfs::open(path, READ_FLAGS, Mode::empty()) {
        Ok(top) => top,
        // A link in its place is removed, never followed (as the
        // standard library's removal does).
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR)
            if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            return fs::remove_file(path);
        }
        Err(e) => return Err(e.into()),
    };
    let st = rfs::fstat(&top)?;
    let mut levels = vec![Level {
        dir: Some(rfs::Dir::new(top)?),
        dev: st.st_dev,
        ino: st.st_ino,
        name: CString::default(),
        relists: 0,
    }];
    loop {
        let cur = levels.last_mut().expect("the top is never left");
        let dir = cur.dir.as_mut().expect("the deepest level is held");
        // Everything but a directory is unlinked on the way; the first
        // subdirectory is entered.
        let mut sub = None;
        while let Some(entry) = dir.read() {
            let entry = entry?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            let fd = dir.fd()?;
            let kind = match entry.file_type() {
                FileType::Unknown => match rfs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => FileType::from_raw_mode(st.st_mode),
                    Err(rustix::io::Errno::NOENT) => continue,
                    Err(e) => return Err(e.into()),
                },
                kind => kind,
            };
            if kind == FileType::Directory {
                sub = Some(name.to_owned());
                break;
            }
            match rfs::unlinkat(fd, name, AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                // No write permission on the directory, or the directory
                // or the file pinned: opened up, then tried again.
                Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) => {
                    loosen(fd);
                    if kind == FileType::RegularFile {
                        if let Ok(file) = rfs::openat(fd, name, FILE_FLAGS, Mode::empty()) {
                            unpin(&file);
                        }
                    }
                    match rfs::unlinkat(fd, name, AtFlags::empty()) {
                        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(name) = sub {
            let child = match rfs::openat(dir.fd()?, &name, READ_FLAGS, Mode::empty()) {
                Ok(child) => child,
                // Its permissions taken away: given back, and its pinning
                // flags taken off.
                Err(rustix::io::Errno::ACCESS) => {
                    let at = rfs::openat(dir.fd()?, &name, PATH_FLAGS, Mode::empty())?;
                    open_up(at.as_fd()).ok_or_else(|| io::Error::from(rustix::io::Errno::ACCESS))?
                }
                // Gone, or no longer a directory: listed again.
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => continue,
                Err(e) => return Err(e.into()),
            };
            let st = rfs::fstat(&child)?;
            levels.push(Level {
                dir: Some(rfs::Dir::new(child)?),
                dev: st.st_dev,
                ino: st.st_ino,
                name,
                relists: 0,
            });
            if levels.len() > HELD {
                let n = levels.len() - HELD - 1;
                levels[n].dir = None;
            }
            continue;
        }
        // Listed to its end: empty, but for what was made meanwhile.
        let Some(done) = levels.pop() else {
            unreachable!("the top is never left");
        };
        let Some(parent) = levels.last_mut() else {
            drop(done);
            return fs::remove_dir(path);
        };
        if parent.dir.is_none() {
            let fd = done.dir.as_ref().expect("held").fd()?;
            let up = rfs::openat(fd, c"..", READ_FLAGS, Mode::empty())?;
            let st = rfs::fstat(&up)?;
            if (st.st_dev, st.st_ino) != (parent.dev, parent.ino) {
                return Err(io::Error::other(
                    "a directory being removed was moved meanwhile",
                ));
            }
            parent.dir = Some(rfs::Dir::new(up)?);
        }
        let pfd = parent.dir.as_ref().expect("held").fd()?;
        let mut removed = rfs::unlinkat(pfd, &done.name, AtFlags::REMOVEDIR);
        if let Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) = removed {
            // The directory above without write permission, or either
            // pinned: opened up, then tried again.
            loosen(pfd);
            if let Some(d) = done.dir.as_ref() {
                unpin(d.fd()?);
            }
            removed = rfs::unlinkat(pfd, &done.name, AtFlags::REMOVEDIR);
        }
        match removed {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(rustix::io::Errno::NOTEMPTY) if done.relists < RELISTS => {
                // Something was made in it meanwhile: listed again.
                let mut again = done;
                again.relists += 1;
                if let Some(d) = again.dir.as_mut() {
                    d.rewind();
                }
                levels.push(again);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Gives the directory open as `path` (an `O_PATH` descriptor) the
/// owner's permissions, takes the pinning flags off it, and opens it for
/// reading. `None` when it cannot be opened.
fn open_up(path: BorrowedFd<'_>) -> Option<OwnedFd> {
    if let Ok(st) = rfs::fstat(path) {
        let mode = st.st_mode & 0o7777;
        if mode & 0o700 != 0o700 {
            // fchmod refuses an `O_PATH` descriptor; its /proc link does
            // not, and leads to that very directory.
            let link = format!("/proc/self/fd/{}", path.as_raw_fd());
            let _ = rfs::chmodat(
                rfs::CWD,
                link.as_str(),
                Mode::from_raw_mode(mode | 0o700),
                AtFlags::empty(),
            );
        }
    }
    let dir = rfs::openat(
        path,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    unpin(&dir);
    Some(dir)
}

/// Gives the open directory `dir` the owner's permissions and takes the
/// pinning flags off it (best effort).
fn loosen(dir: BorrowedFd<'_>) {
    if let Ok(st) = rfs::fstat(dir) {
        let mode = st.st_mode & 0o7777;
        if mode & 0o700 != 0o700 {
            let _ = rfs::fchmod(dir, Mode::from_raw_mode(mode | 0o700));
        }
    }
    unpin(dir);
}

/// Takes the immutable and append-only flags off the open file or
/// directory `fd` (best effort: only root can have set them).
fn unpin(fd: impl AsFd) {
    let fd = fd.as_fd();
    if let Ok(flags) = rfs::ioctl_getflags(fd) {
        if flags.intersects(PINNED) {
            let _ = rfs::ioctl_setflags(fd, flags - PINNED);
        }
    }
}
