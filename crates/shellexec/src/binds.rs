//! Read-only binds of protected entries in the view.
//!
//! When a command runs in namespaces of its own and the embedder protects
//! paths beneath the write root ([`crate::protected`]), PID 1 binds, once
//! the view is built and before the shell is started (so before Landlock
//! and seccomp):
//!
//! - every recorded protected regular file with one link, and every
//!   protected directory whose whole content is protected
//!   ([`ProtectedEntry::subtree`]), read-only (and `nosuid`, `nodev`)
//!   over itself: writes, `chmod`, `truncate` answer `EROFS`, and `rename`,
//!   `unlink` or `rmdir` of it `EBUSY`, while the command runs;
//! - every directory between the write root and a protected entry (bound
//!   or not), and every other protected directory, over itself,
//!   read-write: a *pin*. A mount point cannot be renamed or removed
//!   (`EBUSY`), and `rename`/`link` across it answer `EXDEV`.
//!
//! Each entry is opened beneath the view's write root without following
//! any symlink (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`,
//! `O_PATH | O_NOFOLLOW`) and compared with the record (device and inode,
//! type); only then is that very descriptor cloned (`open_tree`), made
//! read-only (`mount_setattr`) and moved over itself (`move_mount` onto the
//! same descriptor). Each entry's path is looked up once, and the checked
//! descriptor is both the source and the target of its bind, so nothing a
//! concurrent command does to the tree can redirect a bind. An entry that
//! is not what the record says (replaced, renamed, gone) is not bound: the
//! after-the-fact check still covers it. So is an entry whose mount calls
//! fail, unless confinement is `required`, where the command does not run.
//!
//! Left to that check: protected symlinks, files with more than one link
//! (their other names are writable), fifos, sockets and devices, entries
//! past [`MAX_MOUNTS`] mounts, new protected entries (`touch x.lock`), and
//! a protected directory's own mode and owner when it is only pinned.
//!
//! The binding runs in PID 1 and follows `spawn.rs`'s rules: raw system
//! calls only, no allocation; the plan is made before the `clone`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use syscalls::{Errno, Sysno};

use crate::protected::{EntryKind, ProtectedEntry};

/// At most this many mounts (binds and pins) per command; the rest of the
/// protected entries are left to the after-the-fact check.
pub const MAX_MOUNTS: usize = 4096;

const OPEN_TREE_CLONE: usize = 1;
const AT_EMPTY_PATH: usize = 0x1000;
const AT_RECURSIVE: usize = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: usize = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: usize = 0x40;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;
const MOUNT_ATTR_RDONLY: u64 = 1;
const MOUNT_ATTR_NOSUID: u64 = 2;
const MOUNT_ATTR_NODEV: u64 = 4;

/// `struct open_how` (openat2(2)).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `struct mount_attr` (mount_setattr(2)).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// How the protected entries were held in one command's view, reported
/// with its result ([`crate::confine::ConfinementReport::protected_binds`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProtectedBinds {
    /// Protected entries bound read-only over themselves.
    pub bound: u32,
    /// Directories bound over themselves so they cannot be renamed or
    /// removed (the ancestors of bound entries, and protected directories
    /// whose content is not all protected).
    pub pinned: u32,
    /// Protected entries left to the after-the-fact check alone: symlinks,
    /// files with more than one link, fifos, sockets and devices, entries
    /// past the bound on mounts, and entries that were not what the
    /// record says when the view was built.
    pub floor: u32,
}

/// What one step expects to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// A directory, the recorded one when known: bound over itself.
    Pin(Option<(u64, u64)>),
    /// The recorded file or directory: bound read-only over itself.
    ReadOnly { dev: u64, ino: u64, dir: bool },
}

#[derive(Debug)]
struct Step {
    rel: CString,
    want: Want,
}

/// The binds of one command, made before the `clone`.
#[derive(Debug)]
pub(crate) struct BindPlan {
    /// The write root's path in the view (its canonical host path).
    root: CString,
    /// The write root's device and inode.
    root_id: (u64, u64),
    /// Parents before children.
    steps: Vec<Step>,
    /// The counts if every step succeeds; `floor` holds what is left to
    /// the check from the start.
    pub planned: ProtectedBinds,
    /// A mount call that fails fails the command (`required`); otherwise
    /// that entry is left to the after-the-fact check.
    strict: bool,
}

/// A relative path of normal components only.
fn plain(p: &Path) -> bool {
    !p.as_os_str().is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

impl BindPlan {
    /// The binds that hold `entries` (recorded beneath `root`, the write
    /// root as the view binds it: its canonical path). `strict`: a failing
    /// mount call fails the command instead of leaving its entry to the
    /// after-the-fact check.
    pub(crate) fn new(
        root: &Path,
        entries: &[ProtectedEntry],
        strict: bool,
    ) -> io::Result<BindPlan> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(root)?;
        let mut sorted: Vec<&ProtectedEntry> = entries.iter().collect();
        sorted.sort_by(|a, b| a.path.cmp(&b.path));
        let mut wanted: std::collections::BTreeMap<PathBuf, Want> = Default::default();
        let mut floor = 0u32;
        let mut covered: Option<&Path> = None;
        for e in sorted {
            if covered.is_some_and(|c| e.path.starts_with(c)) {
                // Beneath a directory bound read-only as a whole.
                continue;
            }
            if !plain(&e.path) {
                floor += 1;
                continue;
            }
            // Every directory above a protected entry is pinned, whether or
            // not the entry itself can be bound.
            let mut at = PathBuf::new();
            let comps: Vec<_> = e.path.components().collect();
            for c in &comps[..comps.len() - 1] {
                at.push(c);
                wanted.entry(at.clone()).or_insert(Want::Pin(None));
            }
            let want = match e.kind {
                EntryKind::File if e.nlink == 1 => Want::ReadOnly {
                    dev: e.dev,
                    ino: e.ino,
                    dir: false,
                },
                EntryKind::Directory if e.subtree => {
                    covered = Some(&e.path);
                    Want::ReadOnly {
                        dev: e.dev,
                        ino: e.ino,
                        dir: true,
                    }
                }
                EntryKind::Directory => Want::Pin(Some((e.dev, e.ino))),
                _ => {
                    floor += 1;
                    continue;
                }
            };
            wanted.insert(e.path.clone(), want);
        }
        let mut planned = ProtectedBinds {
            floor,
            ..ProtectedBinds::default()
        };
        let mut steps = Vec::new();
        for (i, (path, want)) in wanted.into_iter().enumerate() {
            let read_only = matches!(want, Want::ReadOnly { .. });
            if i >= MAX_MOUNTS {
                if read_only || matches!(want, Want::Pin(Some(_))) {
                    planned.floor += 1;
                }
                continue;
            }
            if read_only {
                planned.bound += 1;
            } else {
                planned.pinned += 1;
            }
            let rel = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "a protected path holds a NUL")
            })?;
            steps.push(Step { rel, want });
        }
        let root = CString::new(root.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the root holds a NUL"))?;
        Ok(BindPlan {
            root,
            root_id: (meta.dev(), meta.ino()),
            steps,
            planned,
            strict,
        })
    }

    /// No step at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// What [`apply`] could not bind because the entry was not what the
/// record says: read-only binds and pins, packed as `pins << 16 | binds`
/// for the keeper's start report.
pub(crate) fn pack_skipped(binds: u32, pins: u32) -> u32 {
    (pins.min(0xffff) << 16) | binds.min(0xffff)
}

/// The counts in force, from the plan and [`apply`]'s packed answer.
pub(crate) fn applied(planned: ProtectedBinds, skipped: u32) -> ProtectedBinds {
    let (binds, pins) = (skipped & 0xffff, skipped >> 16);
    ProtectedBinds {
        bound: planned.bound.saturating_sub(binds),
        pinned: planned.pinned.saturating_sub(pins),
        floor: planned.floor + binds,
    }
}

/// Makes the plan's binds in the calling process's view; answers what
/// was skipped (see [`pack_skipped`]): entries that are not what the
/// record says and, unless the plan is strict, entries whose mount calls
/// failed (nothing of a failed step is attached). A strict plan fails on
/// the first failing mount call.
///
/// Raw system calls only (no allocation, no `errno`).
///
/// # Safety
///
/// Only in a process of its own mount namespace, once the view is its
/// root.
///
/// # References
///  - [openat2(2)](https://man7.org/linux/man-pages/man2/openat2.2.html)
///  - [open_tree(2)](https://man7.org/linux/man-pages/man2/open_tree.2.html)
///  - [move_mount(2)](https://man7.org/linux/man-pages/man2/move_mount.2.html)
///  - [mount_setattr(2)](https://man7.org/linux/man-pages/man2/mount_setattr.2.html)
pub(crate) unsafe fn apply(plan: &BindPlan) -> Result<u32, Errno> {
    let (mut binds, mut pins) = (0u32, 0u32);
    // SAFETY: raw calls on NUL-terminated strings the plan owns, literals,
    // descriptors opened here and live locals.
    unsafe {
        let root = syscalls::syscall!(
            Sysno::openat,
            libc::AT_FDCWD,
            plan.root.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0
        )?;
        let mut st: libc::stat = std::mem::zeroed();
        let r = syscalls::syscall!(Sysno::fstat, root, &mut st as *mut libc::stat);
        if r.is_err() || (st.st_dev, st.st_ino) != plan.root_id {
            let _ = syscalls::syscall!(Sysno::close, root);
            return Err(r.err().unwrap_or(Errno::ESTALE));
        }
        for step in &plan.steps {
            match bind_one(root, step) {
                Ok(true) => {}
                Err(e) if plan.strict => {
                    let _ = syscalls::syscall!(Sysno::close, root);
                    return Err(e);
                }
                Ok(false) | Err(_) => match step.want {
                    Want::Pin(_) => pins += 1,
                    Want::ReadOnly { .. } => binds += 1,
                },
            }
        }
        let _ = syscalls::syscall!(Sysno::close, root);
    }
    Ok(pack_skipped(binds, pins))
}

/// One step: false when the entry is not what the plan expects.
///
/// # Safety
///
/// As [`apply`]; `root` is an open directory.
unsafe fn bind_one(root: usize, step: &Step) -> Result<bool, Errno> {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: as in `apply`.
    unsafe {
        let fd = match syscalls::syscall!(
            Sysno::openat2,
            root,
            step.rel.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>()
        ) {
            Ok(fd) => fd,
            // Gone, a symlink on the way, or otherwise not reachable
            // beneath the root: not what the record says.
            Err(_) => return Ok(false),
        };
        let result = (|| {
            let mut st: libc::stat = std::mem::zeroed();
            syscalls::syscall!(Sysno::fstat, fd, &mut st as *mut libc::stat)?;
            let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
            let is_file = st.st_mode & libc::S_IFMT == libc::S_IFREG;
            let id = (st.st_dev, st.st_ino);
            let (matches, read_only) = match step.want {
                Want::Pin(known) => (is_dir && known.is_none_or(|k| k == id), false),
                Want::ReadOnly { dev, ino, dir } => (
                    id == (dev, ino)
                        && if dir {
                            is_dir
                        } else {
                            is_file && st.st_nlink == 1
                        },
                    true,
                ),
            };
            if !matches {
                return Ok(false);
            }
            let tree = syscalls::syscall!(
                Sysno::open_tree,
                fd,
                c"".as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as usize | AT_EMPTY_PATH | AT_RECURSIVE
            )?;
            let r = (|| {
                if read_only {
                    let attr = MountAttr {
                        attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                        attr_clr: 0,
                        propagation: 0,
                        userns_fd: 0,
                    };
                    syscalls::syscall!(
                        Sysno::mount_setattr,
                        tree,
                        c"".as_ptr(),
                        AT_EMPTY_PATH | AT_RECURSIVE,
                        &attr as *const MountAttr,
                        std::mem::size_of::<MountAttr>()
                    )?;
                }
                syscalls::syscall!(
                    Sysno::move_mount,
                    tree,
                    c"".as_ptr(),
                    fd,
                    c"".as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH
                )
                .map(drop)
            })();
            let _ = syscalls::syscall!(Sysno::close, tree);
            r.map(|()| true)
        })();
        let _ = syscalls::syscall!(Sysno::close, fd);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: EntryKind, nlink: u64, subtree: bool) -> ProtectedEntry {
        ProtectedEntry {
            path: PathBuf::from(path),
            dev: 1,
            ino: path.len() as u64,
            kind,
            nlink,
            subtree,
        }
    }

    #[test]
    fn uapi_layouts_match_the_kernel() {
        assert_eq!(std::mem::size_of::<OpenHow>(), 24);
        assert_eq!(std::mem::size_of::<MountAttr>(), 32);
    }

    #[test]
    fn parents_are_pinned_before_children_and_subtrees_cover_their_content() {
        let tmp = tempfile::tempdir().unwrap();
        let plan = BindPlan::new(
            tmp.path(),
            &[
                entry("pkg/deep/yarn.lock", EntryKind::File, 1, false),
                entry(".git", EntryKind::Directory, 1, true),
                entry(".git/config", EntryKind::File, 1, false),
                entry("Cargo.lock", EntryKind::File, 1, false),
                entry("hard.lock", EntryKind::File, 2, false),
                entry("link.lock", EntryKind::Symlink, 1, false),
                entry("pkg.lock", EntryKind::Directory, 1, false),
                entry("sub/dir/link.lock", EntryKind::Symlink, 1, false),
            ],
            false,
        )
        .unwrap();
        let steps: Vec<(String, bool)> = plan
            .steps
            .iter()
            .map(|s| {
                (
                    s.rel.to_string_lossy().into_owned(),
                    matches!(s.want, Want::ReadOnly { .. }),
                )
            })
            .collect();
        let want: Vec<(String, bool)> = [
            (".git", true),
            ("Cargo.lock", true),
            ("pkg", false),
            ("pkg/deep", false),
            ("pkg/deep/yarn.lock", true),
            ("pkg.lock", false),
            ("sub", false),
            ("sub/dir", false),
        ]
        .iter()
        .map(|(p, r)| (p.to_string(), *r))
        .collect();
        assert_eq!(steps, want);
        assert_eq!(
            plan.planned,
            ProtectedBinds {
                bound: 3,
                pinned: 5,
                floor: 3
            }
        );
    }

    #[test]
    fn past_the_bound_entries_go_to_the_floor() {
        let tmp = tempfile::tempdir().unwrap();
        let entries: Vec<_> = (0..MAX_MOUNTS + 10)
            .map(|i| entry(&format!("f{i:05}.lock"), EntryKind::File, 1, false))
            .collect();
        let plan = BindPlan::new(tmp.path(), &entries, false).unwrap();
        assert_eq!(plan.steps.len(), MAX_MOUNTS);
        assert_eq!(plan.planned.bound as usize, MAX_MOUNTS);
        assert_eq!(plan.planned.floor, 10);
    }

    #[test]
    fn skipped_counts_round_trip() {
        let planned = ProtectedBinds {
            bound: 5,
            pinned: 3,
            floor: 1,
        };
        let got = applied(planned, pack_skipped(2, 1));
        assert_eq!(
            got,
            ProtectedBinds {
                bound: 3,
                pinned: 2,
                floor: 3
            }
        );
    }
}
