//! The descriptor walk: resolution beneath a root one component at a time.
//!
//! Used where `openat2` is missing (ENOSYS), refused by a seccomp filter
//! (EPERM), or forced with [`Resolver::Walk`](crate::Resolver::Walk). Every
//! step is `openat(dir_fd, component, O_NOFOLLOW)` relative to a descriptor
//! already known to lie beneath the root; symbolic links are read with
//! `readlinkat` and their targets spliced into the remaining components; `..`
//! pops a stack of directory descriptors and never opens `..` on disk, so it
//! can never climb above the root's descriptor.
//!
//! The stack holds the name of every directory entered but a descriptor of
//! the last [`HELD`] only: a path can be thousands of directories deep (a
//! tree anyone with write access can make, and links splice in more), and a
//! descriptor for each would exhaust the process's limit, failing this
//! resolution with EMFILE where `openat2` answers, and every other open of
//! the host while it runs. A `..` that climbs past the descriptors held
//! opens the chain again from the root, one recorded name at a time with
//! `O_NOFOLLOW`, so it still never leaves the root: a directory of the
//! chain moved meanwhile makes that open fail, and the resolution with it,
//! or (another directory now has its name) the chain goes on from there.
//!
//! The rules are those of `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`,
//! and the tests hold the two to identical answers on every input.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{self as rfs, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::error::{self, Result};

/// Linux's MAXSYMLINKS: the 41st link in one resolution fails with ELOOP.
pub(crate) const MAX_SYMLINKS: u32 = 40;

/// How often a step is retried when the entry changes kind between the open
/// and the `readlinkat` (a concurrent rename swapping a link and a directory).
const SWAP_RETRIES: u32 = 8;

/// The most directory descriptors one resolution holds at a time.
const HELD: usize = 64;

/// How a directory of the path is entered: never through a final link.
const DIR_STEP: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// procfs's `statfs` magic: its symbolic links may be magic links.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// What the last component of a resolution must become.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Final {
    /// A directory, opened with these flags (`O_DIRECTORY` is added).
    Dir(OFlags),
    /// The entry itself, opened with these flags; a final symlink is
    /// followed when `follow` is set, else opened (`O_PATH`) or refused.
    Open { flags: OFlags, follow: bool },
}

/// A resolved descriptor, with its metadata when resolving needed it anyway.
pub(crate) struct Resolved {
    pub fd: OwnedFd,
    pub stat: Option<Stat>,
}

/// A component still to resolve: a byte range of the input path (`buf ==
/// INPUT`) or of one of the symlink targets read so far.
#[derive(Clone, Copy)]
struct Comp {
    buf: u32,
    start: u32,
    end: u32,
}

const INPUT: u32 = u32::MAX;

struct Walker<'a> {
    root: BorrowedFd<'a>,
    path: &'a [u8],
    targets: Vec<Vec<u8>>,
    pending: Vec<Comp>,
    /// The directories entered, from the root down: each one's name in
    /// its parent.
    stack: Vec<Comp>,
    /// Descriptors of the last (at most [`HELD`]) directories of `stack`,
    /// never empty while `stack` is not.
    held: VecDeque<OwnedFd>,
    links: u32,
    retries: u32,
}

/// Resolves `path` (already checked: relative, non-empty, no NUL) beneath
/// `root` by walking descriptors.
pub(crate) fn resolve(root: BorrowedFd<'_>, path: &[u8], fin: Final) -> Result<Resolved> {
    resolve_counting(root, path, fin).0
}

/// [`resolve`], with the number of symbolic links it followed.
pub(crate) fn resolve_counting(
    root: BorrowedFd<'_>,
    path: &[u8],
    fin: Final,
) -> (Result<Resolved>, u32) {
    let mut w = Walker {
        root,
        path,
        targets: Vec::new(),
        pending: Vec::with_capacity(16),
        stack: Vec::with_capacity(8),
        held: VecDeque::with_capacity(8),
        links: 0,
        retries: 0,
    };
    w.push_components(INPUT, path);
    let answer = w.run(fin);
    (answer, w.links)
}

impl<'a> Walker<'a> {
    fn bytes(&self, c: Comp) -> &[u8] {
        let buf = if c.buf == INPUT {
            self.path
        } else {
            &self.targets[c.buf as usize]
        };
        &buf[c.start as usize..c.end as usize]
    }

    fn cur(&self) -> BorrowedFd<'_> {
        self.held.back().map_or(self.root, |fd| fd.as_fd())
    }

    /// Enters the directory `c`, open as `fd`, letting go of the
    /// descriptor of the highest directory held past [`HELD`].
    fn enter(&mut self, c: Comp, fd: OwnedFd) {
        if self.held.len() == HELD {
            self.held.pop_front();
        }
        self.held.push_back(fd);
        self.stack.push(c);
    }

    /// Leaves the current directory for its parent (`..`); false at the
    /// root. The parent's descriptor, when no longer held, is opened again
    /// from the root through the recorded names (and the [`HELD`] above
    /// it with it).
    fn leave(&mut self) -> Result<bool> {
        if self.stack.pop().is_none() {
            return Ok(false);
        }
        self.held.pop_back();
        if self.held.is_empty() && !self.stack.is_empty() {
            let mut held = VecDeque::with_capacity(HELD);
            for &c in &self.stack {
                let dir = held.back().map_or(self.root, |fd: &OwnedFd| fd.as_fd());
                let fd = rfs::openat(dir, self.bytes(c), DIR_STEP, Mode::empty())
                    .map_err(|e| error::from_errno(self.path, e))?;
                if held.len() == HELD {
                    held.pop_front();
                }
                held.push_back(fd);
            }
            self.held = held;
        }
        Ok(true)
    }

    /// Queues the components of `bytes` so that the first is resolved next.
    /// A trailing slash becomes an empty component after the last name,
    /// which makes that name a directory to open.
    fn push_components(&mut self, buf: u32, bytes: &[u8]) {
        let at = self.pending.len();
        let mut start = 0usize;
        for (i, &b) in bytes
            .iter()
            .enumerate()
            .chain(std::iter::once((bytes.len(), &b'/')))
        {
            if b == b'/' {
                if i > start {
                    self.pending.push(Comp {
                        buf,
                        start: start as u32,
                        end: i as u32,
                    });
                }
                start = i + 1;
            }
        }
        // The stack pops from the end: put the first component there.
        self.pending[at..].reverse();
        if bytes.last() == Some(&b'/') {
            // "x/": x must be a directory (a symlink x is followed), but
            // unlike "x/." it is not searched. The empty component marks
            // that and goes below the new ones, so it is resolved after them.
            self.pending.insert(
                at,
                Comp {
                    buf: INPUT,
                    start: 0,
                    end: 0,
                },
            );
        }
    }

    fn run(&mut self, fin: Final) -> Result<Resolved> {
        while let Some(c) = self.pending.pop() {
            let last = self.pending.is_empty();
            let name = self.bytes(c);
            if name.is_empty() || name == b"." {
                continue;
            }
            if name == b".." {
                // The kernel looks `..` up in the current directory like any
                // name, which takes permission to search it: "d/.." fails
                // where "d" may not be searched, even though the walk never
                // opens `..`. Looking "." up there asks the same of it.
                rfs::statat(self.cur(), c".", rfs::AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(|e| error::from_errno(self.path, e))?;
                if !self.leave()? {
                    return Err(error::escape(
                        self.path,
                        "path escapes the root through '..'",
                    ));
                }
                continue;
            }
            match fin {
                Final::Open { flags, follow } if last => {
                    if let Some(done) = self.open_final(c, flags, follow)? {
                        return Ok(done);
                    }
                }
                // The last name, a directory (asked for, or by a trailing
                // slash): opened from its parent with the final flags, as
                // the kernel does. Entering it and opening "." there would
                // take permission to search it, which neither "d" nor "d/"
                // needs.
                Final::Dir(flags) | Final::Open { flags, .. } if self.only_slashes_left() => {
                    if let Some(fd) = self.open_dir(c, flags)? {
                        return Ok(Resolved { fd, stat: None });
                    }
                }
                _ => {
                    if let Some(fd) = self.open_dir(c, DIR_STEP)? {
                        self.enter(c, fd);
                    }
                }
            }
        }
        // Every component consumed and the last one was "." or ".." (or there
        // was none): the answer is the current directory, which the kernel
        // too would have had to search for that "." or "..".
        let flags = match fin {
            Final::Dir(flags) => flags | OFlags::DIRECTORY,
            Final::Open { flags, .. } => flags,
        };
        let fd = rfs::openat(self.cur(), c".", flags | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| error::from_errno(self.path, e))?;
        Ok(Resolved { fd, stat: None })
    }

    /// Nothing but the marks of a trailing slash is left to resolve.
    fn only_slashes_left(&self) -> bool {
        self.pending.iter().all(|p| p.start == p.end)
    }

    /// Opens the directory named by `c` with `flags` (`O_DIRECTORY`,
    /// `O_NOFOLLOW` added); `None` when it is a symlink, whose target is
    /// then queued.
    fn open_dir(&mut self, c: Comp, flags: OFlags) -> Result<Option<OwnedFd>> {
        let flags = flags | DIR_STEP.difference(OFlags::PATH);
        for _ in 0..SWAP_RETRIES {
            match rfs::openat(self.cur(), self.bytes(c), flags, Mode::empty()) {
                Ok(fd) => return Ok(Some(fd)),
                // A symlink opened O_NOFOLLOW|O_DIRECTORY answers ENOTDIR, as
                // does a regular file: readlinkat tells them apart.
                Err(Errno::NOTDIR) => match self.read_link_at(c) {
                    Ok(target) => return self.splice(target).map(|()| None),
                    // Not a link: a file, or swapped for a directory since
                    // the open by a concurrent rename; look once more.
                    Err(Errno::INVAL) => {
                        let st =
                            rfs::statat(self.cur(), self.bytes(c), rfs::AtFlags::SYMLINK_NOFOLLOW);
                        match st.map(|st| FileType::from_raw_mode(st.st_mode)) {
                            Ok(FileType::Directory | FileType::Symlink) => continue,
                            _ => return Err(error::not_dir(self.path)),
                        }
                    }
                    Err(e) => return Err(error::from_errno(self.path, e)),
                },
                Err(e) => return Err(error::from_errno(self.path, e)),
            }
        }
        // A concurrent rename swapped the name between a link and a
        // directory at each of the tries: it is under attack, or
        // changing; what it leads to is not judged.
        Err(error::Error::new(
            error::ErrorKind::Io,
            self.path,
            "a directory of the path kept changing between a symbolic link and a \
             directory while it was resolved; try again",
        )
        .with_errno(Errno::AGAIN))
    }

    /// Opens the final component. Returns `None` when it was a symlink that
    /// was followed, so resolution goes on with the link's target.
    fn open_final(&mut self, c: Comp, flags: OFlags, follow: bool) -> Result<Option<Resolved>> {
        let o = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let r = rfs::openat(self.cur(), self.bytes(c), o, Mode::empty());
        match r {
            Ok(fd) if flags.contains(OFlags::PATH) => {
                // O_PATH|O_NOFOLLOW opens a symlink itself; look at what we got.
                let st = rfs::fstat(&fd).map_err(|e| error::from_errno(self.path, e))?;
                if follow && FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
                    let target = rfs::readlinkat(&fd, c"", Vec::new())
                        .map_err(|e| error::from_errno(self.path, e))?;
                    self.splice(target.into_bytes())?;
                    return Ok(None);
                }
                Ok(Some(Resolved { fd, stat: Some(st) }))
            }
            Ok(fd) => Ok(Some(Resolved { fd, stat: None })),
            // O_NOFOLLOW on a symlink without O_PATH: ELOOP.
            Err(Errno::LOOP) => {
                if !follow {
                    return Err(error::Error::new(
                        error::ErrorKind::Symlink,
                        self.path,
                        "final component is a symbolic link",
                    )
                    .with_errno(Errno::LOOP));
                }
                match self.read_link_at(c) {
                    Ok(target) => {
                        self.splice(target)?;
                        Ok(None)
                    }
                    // Swapped for a non-link since the open: open it again
                    // (`run` goes on while `pending` holds `c` once more).
                    Err(Errno::INVAL) if self.retries < SWAP_RETRIES => {
                        self.retries += 1;
                        self.pending.push(c);
                        Ok(None)
                    }
                    Err(e) => Err(error::from_errno(self.path, e)),
                }
            }
            Err(e) => Err(error::from_errno(self.path, e)),
        }
    }

    fn read_link_at(&self, c: Comp) -> std::result::Result<Vec<u8>, Errno> {
        rfs::readlinkat(self.cur(), self.bytes(c), Vec::new()).map(|t| t.into_bytes())
    }

    /// Counts one followed link and queues its target, refusing absolute
    /// targets and magic links exactly where `RESOLVE_BENEATH |
    /// RESOLVE_NO_MAGICLINKS` does.
    fn splice(&mut self, target: Vec<u8>) -> Result<()> {
        self.links += 1;
        if self.links > MAX_SYMLINKS {
            return Err(error::loop_error(self.path));
        }
        if target.first() == Some(&b'/') {
            return Err(error::escape(
                self.path,
                "symbolic link with an absolute target",
            ));
        }
        if self.is_magic_link(&target) {
            return Err(error::escape(
                self.path,
                "magic link (procfs) is never followed",
            ));
        }
        let idx = self.targets.len() as u32;
        self.targets.push(target);
        let t = std::mem::take(&mut self.targets[idx as usize]);
        self.push_components(idx, &t);
        self.targets[idx as usize] = t;
        Ok(())
    }

    /// procfs's magic links (`/proc/<pid>/fd/N`, `cwd`, `root`, `exe`,
    /// `ns/*`, ...) read as absolute paths or as `type:[inode]`. The absolute
    /// ones are refused as absolute links already; the others are recognised
    /// by the colon, which procfs's ordinary links (`self`, `thread-self`,
    /// `mounts`, `net`) never contain. Only checked for links on procfs.
    fn is_magic_link(&self, target: &[u8]) -> bool {
        if !target.contains(&b':') {
            return false;
        }
        match rfs::fstatfs(self.cur()) {
            #[allow(clippy::unnecessary_cast)] // f_type is not i64 on every target
            Ok(st) => st.f_type as i64 == PROC_SUPER_MAGIC,
            // Cannot tell: fail closed.
            Err(_) => true,
        }
    }
}
