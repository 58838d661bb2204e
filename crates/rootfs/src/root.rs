//! `Root`: a directory descriptor and every operation beneath it.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::{self, Error, ErrorKind, Result};
use crate::meta::{DirEntry, FileKind, Metadata};
use crate::path::{self, Split};
use crate::walk::{self, Final, Resolved};

/// Which resolution mechanism a [`Root`] uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Resolver {
    /// `openat2` while the kernel offers it; the walk for any call that finds
    /// it missing (ENOSYS) or filtered (EPERM), remembered from then on.
    /// Success is never cached: a seccomp filter can arrive later.
    #[default]
    Auto,
    /// Only `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; an error where
    /// the kernel lacks it. For tests and benchmarks.
    Openat2,
    /// Only the descriptor walk. For tests, benchmarks and kernels before 5.6.
    Walk,
}

/// How [`Root::rename`] treats an existing destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenameMode {
    /// Replace the destination atomically, like `rename(2)`.
    Replace,
    /// Fail with [`ErrorKind::Exists`] if the destination exists
    /// (`RENAME_NOREPLACE`).
    NoReplace,
}

/// Options for [`Root::open_with`], like [`std::fs::OpenOptions`].
#[derive(Clone, Copy, Debug)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    follow: bool,
    mode: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Nothing set: read-only once [`read`](Self::read) is, following a
    /// final symlink beneath the root, new files mode 0o666 before umask.
    pub fn new() -> Self {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            follow: true,
            mode: 0o666,
        }
    }
    /// Open for reading.
    pub fn read(&mut self, on: bool) -> &mut Self {
        self.read = on;
        self
    }
    /// Open for writing.
    pub fn write(&mut self, on: bool) -> &mut Self {
        self.write = on;
        self
    }
    /// Open for appending (implies writing).
    pub fn append(&mut self, on: bool) -> &mut Self {
        self.append = on;
        self
    }
    /// Truncate an existing file.
    pub fn truncate(&mut self, on: bool) -> &mut Self {
        self.truncate = on;
        self
    }
    /// Create the file if it does not exist.
    pub fn create(&mut self, on: bool) -> &mut Self {
        self.create = on;
        self
    }
    /// Create the file, failing if anything (even a dangling symlink) has the
    /// name (`O_CREAT | O_EXCL`).
    pub fn create_new(&mut self, on: bool) -> &mut Self {
        self.create_new = on;
        self
    }
    /// Whether a final symlink is followed (beneath the root); when off, a
    /// final symlink fails with [`ErrorKind::Symlink`].
    pub fn follow(&mut self, on: bool) -> &mut Self {
        self.follow = on;
        self
    }
    /// Permission bits for a created file (before umask).
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    fn access_flags(&self) -> OFlags {
        let write = self.write || self.append;
        let mut f = match (self.read, write) {
            (true, true) => OFlags::RDWR,
            (false, true) => OFlags::WRONLY,
            _ => OFlags::RDONLY,
        };
        if self.append {
            f |= OFlags::APPEND;
        }
        if self.truncate {
            f |= OFlags::TRUNC;
        }
        f
    }
}

/// A directory opened once, beneath which every path is resolved.
///
/// Like Go's `os.Root` and cap-std's `Dir`: a `Root` holds an `O_PATH`
/// descriptor of its directory, and every operation names things relative to
/// that descriptor. Relative paths may use `..` and symlinks as long as every
/// step stays beneath the root; absolute paths, absolute symlinks, `..` above
/// the root and procfs magic links fail with [`ErrorKind::Escape`]. Renaming
/// or replacing the root's own path after opening changes nothing.
///
/// Every check is made by the kernel call that performs the operation on a
/// descriptor; nothing is checked by pathname and then reopened by pathname.
///
/// A `Root` is `Send + Sync`; operations from many threads are independent.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    resolver: Resolver,
    openat2_unavailable: AtomicBool,
    name: PathBuf,
}

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// Added to every open of an existing entry for reading or writing: a FIFO
/// cannot hold up the open (`O_NONBLOCK`, cleared again where the caller
/// gets the file to use), and a terminal never becomes the caller's
/// controlling terminal (`O_NOCTTY`), which a session leader without one
/// (a daemon, a service) would otherwise take on, with that terminal's
/// SIGHUP and SIGINT.
const OPEN_EXISTING: OFlags = OFlags::NONBLOCK.union(OFlags::NOCTTY);

/// How many times an `openat2` that raced with a rename (EAGAIN) is retried
/// before the walk answers instead.
const EAGAIN_RETRIES: usize = 16;

/// Where the final entry of a path lives: the root itself, or a directory
/// beneath it.
enum Parent<'r> {
    Root(BorrowedFd<'r>),
    Dir(OwnedFd),
}

impl AsFd for Parent<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Parent::Root(fd) => *fd,
            Parent::Dir(fd) => fd.as_fd(),
        }
    }
}

fn bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

impl Root {
    /// Opens `dir` as a root with [`Resolver::Auto`].
    ///
    /// The directory's own path is resolved normally (it is the operator's
    /// choice); only what is opened beneath it is confined.
    pub fn open(dir: impl AsRef<Path>) -> Result<Root> {
        Root::open_with_resolver(dir, Resolver::Auto)
    }

    /// Opens `dir` as a root with the given resolver.
    pub fn open_with_resolver(dir: impl AsRef<Path>, resolver: Resolver) -> Result<Root> {
        let dir = dir.as_ref();
        if bytes(dir).contains(&0) {
            // No directory's path holds one; the kernel would answer a bare
            // EINVAL (an I/O error) for it.
            return Err(error::invalid(bytes(dir), "path contains a NUL byte"));
        }
        let fd = rfs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| error::from_errno(bytes(dir), e))?;
        Ok(Root::from_fd(fd, resolver, dir.to_path_buf()))
    }

    /// Wraps an already-open directory descriptor (ideally `O_PATH`).
    /// `name` is only reported by [`name`](Self::name).
    pub fn from_fd(fd: OwnedFd, resolver: Resolver, name: PathBuf) -> Root {
        Root {
            fd,
            resolver,
            openat2_unavailable: AtomicBool::new(false),
            name,
        }
    }

    /// The name the root was opened with, like Go's `Root.Name`.
    pub fn name(&self) -> &Path {
        &self.name
    }

    /// The resolver in use.
    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    /// The same root with another resolver (the descriptor is kept).
    pub fn with_resolver(mut self, resolver: Resolver) -> Root {
        self.resolver = resolver;
        self
    }

    /// Whether [`Resolver::Auto`] found `openat2` unavailable and now walks.
    pub fn openat2_unavailable(&self) -> bool {
        self.openat2_unavailable.load(Ordering::Relaxed)
    }

    /// Another `Root` for the same directory (the descriptor is duplicated).
    pub fn try_clone(&self) -> Result<Root> {
        let fd =
            rustix::io::fcntl_dupfd_cloexec(&self.fd, 0).map_err(|e| error::from_errno(b".", e))?;
        Ok(Root::from_fd(fd, self.resolver, self.name.clone()))
    }

    /// The root's own descriptor (`O_PATH`), for example as a child's
    /// working directory (`fchdir` accepts it).
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    // ----- resolution -----

    /// Resolves `path` with the configured resolver.
    fn resolve(&self, path: &[u8], fin: Final) -> Result<Resolved> {
        path::check(path)?;
        match self.resolver {
            Resolver::Walk => walk::resolve(self.fd.as_fd(), path, fin),
            Resolver::Openat2 => match self.openat2(path, fin) {
                Ok(r) => Ok(r),
                Err(Openat2Error::Unavailable(e)) => Err(error::from_errno(path, e)),
                Err(Openat2Error::Fallback) => walk::resolve(self.fd.as_fd(), path, fin),
                Err(Openat2Error::Err(e)) => Err(e),
            },
            Resolver::Auto => {
                if self.openat2_unavailable() {
                    return walk::resolve(self.fd.as_fd(), path, fin);
                }
                match self.openat2(path, fin) {
                    Ok(r) => Ok(r),
                    Err(Openat2Error::Unavailable(_)) => {
                        self.openat2_unavailable.store(true, Ordering::Relaxed);
                        walk::resolve(self.fd.as_fd(), path, fin)
                    }
                    Err(Openat2Error::Fallback) => walk::resolve(self.fd.as_fd(), path, fin),
                    Err(Openat2Error::Err(e)) => Err(e),
                }
            }
        }
    }

    fn openat2(&self, path: &[u8], fin: Final) -> std::result::Result<Resolved, Openat2Error> {
        let flags = match fin {
            Final::Dir(f) => f | OFlags::DIRECTORY,
            Final::Open {
                flags,
                follow: true,
            } => flags,
            Final::Open {
                flags,
                follow: false,
            } => flags | OFlags::NOFOLLOW,
        } | OFlags::CLOEXEC;
        for _ in 0..EAGAIN_RETRIES {
            match rfs::openat2(&self.fd, path, flags, Mode::empty(), RESOLVE) {
                Ok(fd) => return Ok(Resolved { fd, stat: None }),
                // A rename or mount raced with a ".." step: try again.
                Err(Errno::AGAIN) => continue,
                Err(Errno::XDEV) => {
                    return Err(Openat2Error::Err(error::escape(
                        path,
                        "path escapes the root",
                    )))
                }
                // ELOOP is either more than 40 links, a magic link, or (with
                // O_NOFOLLOW) a final symlink. Rare, so let the walk say which:
                // it classifies each exactly. It must not succeed where the
                // kernel refused; if it does, the kernel's refusal stands,
                // unless the kernel's own restart explains it. The kernel's
                // lookup starts in RCU mode and, when it cannot finish there
                // (a mount or unmount anywhere on the host changed the count
                // it checks), starts again keeping the links the first pass
                // counted: a path of 21 to 40 links can then fail with ELOOP
                // although it resolves. When the walk resolved it through
                // more than 20 links, its answer is the one the rules give.
                Err(Errno::LOOP) => {
                    let (walked, links) = walk::resolve_counting(self.fd.as_fd(), path, fin);
                    return match walked {
                        Err(e) => Err(Openat2Error::Err(e)),
                        Ok(r) if 2 * links > walk::MAX_SYMLINKS => Ok(r),
                        Ok(_) => Err(Openat2Error::Err(error::loop_error(path))),
                    };
                }
                Err(e @ (Errno::NOSYS | Errno::PERM)) => {
                    // EPERM is also a real answer (e.g. an immutable file):
                    // only a trivially valid openat2 failing the same way
                    // shows that a filter or an old kernel refuses openat2.
                    let probe = rfs::openat2(
                        &self.fd,
                        c".",
                        OFlags::PATH | OFlags::CLOEXEC,
                        Mode::empty(),
                        RESOLVE,
                    );
                    return Err(match probe {
                        Err(Errno::NOSYS | Errno::PERM) => Openat2Error::Unavailable(e),
                        _ => Openat2Error::Err(error::from_errno(path, e)),
                    });
                }
                Err(e) => return Err(Openat2Error::Err(error::from_errno(path, e))),
            }
        }
        Err(Openat2Error::Fallback)
    }

    /// Resolves the directory holding the final entry of `split`.
    fn parent(&self, full: &[u8], split: &Split<'_>, flags: OFlags) -> Result<Parent<'_>> {
        if split.parent.is_empty() {
            if flags == OFlags::PATH {
                return Ok(Parent::Root(self.fd.as_fd()));
            }
            // A readable descriptor of the root itself (for fsync).
            let flags = flags | OFlags::DIRECTORY | OFlags::CLOEXEC;
            return rfs::openat(&self.fd, c".", flags, Mode::empty())
                .map(Parent::Dir)
                .map_err(|e| error::from_errno(full, e));
        }
        match self.resolve(split.parent, Final::Dir(flags)) {
            Ok(r) => Ok(Parent::Dir(r.fd)),
            // Report the error against the whole path the caller gave.
            Err(e) => {
                Err(Error::new(e.kind(), full, e.reason().to_owned()).with_errno_opt(e.errno()))
            }
        }
    }

    /// A name that ends in `/` must be a directory: when what it names
    /// (following links beneath the root) exists and is not one, that is the
    /// answer ([`ErrorKind::NotDir`]), whatever the operation. Anything else
    /// (a directory, nothing, another error) is left to the operation.
    fn demand_dir(&self, p: &[u8]) -> Result<()> {
        match self.resolve(p, Final::Dir(OFlags::PATH)) {
            Err(e) if e.kind() == ErrorKind::NotDir => Err(e),
            _ => Ok(()),
        }
    }

    /// A file cannot be created or written under a name ending in `/`:
    /// [`ErrorKind::NotDir`] when the name holds a non-directory, else
    /// [`ErrorKind::NotFile`] (the kernel's EISDIR).
    #[cold]
    fn file_name_with_slash(&self, p: &[u8]) -> Error {
        match self.demand_dir(p) {
            Err(e) => e,
            Ok(()) => Error::new(ErrorKind::NotFile, p, "a file name cannot end in '/'")
                .with_errno(Errno::ISDIR),
        }
    }

    /// Checks `path` and splits it for an operation on its final entry.
    fn split_checked<'p>(&self, path: &'p [u8], op: &'static str) -> Result<Split<'p>> {
        path::check(path)?;
        let s = path::split(path);
        if s.name_is_dot() {
            // Resolve first so that an escaping ".." still reports the escape.
            self.resolve(path, Final::Dir(OFlags::PATH))?;
            return Err(error::invalid(path, op));
        }
        Ok(s)
    }

    // ----- opening and reading -----

    /// Opens a file (or directory) for reading, like [`std::fs::File::open`]
    /// but only reaching paths beneath the root. A final symlink is followed
    /// beneath the root. The file is opened `O_NONBLOCK` so that a FIFO in the
    /// tree cannot hang the caller; that flag has no effect on regular files.
    pub fn open_file(&self, path: impl AsRef<Path>) -> Result<File> {
        self.open_read(path.as_ref(), true)
    }

    /// Opens a file (or directory) for reading like
    /// [`open_file`](Self::open_file), but a final symlink is not followed:
    /// the open fails. The file stays `O_NONBLOCK` (no effect on a regular
    /// file), which spares a search the two `fcntl` calls per file that
    /// [`open_with`](Self::open_with) makes to clear it.
    pub fn open_file_nofollow(&self, path: impl AsRef<Path>) -> Result<File> {
        self.open_read(path.as_ref(), false)
    }

    fn open_read(&self, path: &Path, follow: bool) -> Result<File> {
        let flags = OFlags::RDONLY | OPEN_EXISTING;
        Ok(self
            .resolve(bytes(path), Final::Open { flags, follow })?
            .fd
            .into())
    }

    /// Opens a file with `options`, like [`std::fs::OpenOptions::open`] but
    /// only beneath the root. Creation happens in the resolved parent
    /// directory with `O_NOFOLLOW`: a dangling final symlink is never
    /// followed to create its target ([`ErrorKind::Symlink`]).
    pub fn open_with(&self, path: impl AsRef<Path>, options: &OpenOptions) -> Result<File> {
        let p = bytes(path.as_ref());
        let access = options.access_flags();
        if options.create_new {
            return self.create_at(p, access, options.mode);
        }
        let fin = Final::Open {
            flags: access | OPEN_EXISTING,
            follow: options.follow,
        };
        match self.resolve(p, fin) {
            Ok(r) => {
                let file = File::from(r.fd);
                clear_nonblock(&file, p)?;
                Ok(file)
            }
            Err(e) if e.kind() == ErrorKind::NotFound && options.create => {
                match self.create_at(p, access, options.mode) {
                    // Lost a race with another creator (open what is there),
                    // or the name is a dangling symlink (never created through).
                    Err(e) if e.kind() == ErrorKind::Exists => match self.resolve(p, fin) {
                        Ok(r) => {
                            let file = File::from(r.fd);
                            clear_nonblock(&file, p)?;
                            Ok(file)
                        }
                        Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::new(
                            ErrorKind::Symlink,
                            p,
                            "dangling symbolic link: not created through",
                        )),
                        Err(e) => Err(e),
                    },
                    other => other,
                }
            }
            Err(e) => Err(e),
        }
    }

    fn create_at(&self, p: &[u8], access: OFlags, mode: u32) -> Result<File> {
        let s = self.split_checked(p, "cannot create '.' or '..'")?;
        if s.trailing_slash {
            return Err(self.file_name_with_slash(p));
        }
        let dir = self.parent(p, &s, OFlags::PATH)?;
        let flags = access | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rfs::openat(&dir, s.name, flags, Mode::from_bits_truncate(mode))
            .map(File::from)
            .map_err(|e| error::from_errno(p, e))
    }

    /// Creates a new file exclusively and opens it for writing: fails with
    /// [`ErrorKind::Exists`] if anything has the name, a dangling symlink
    /// included.
    pub fn create_new(&self, path: impl AsRef<Path>) -> Result<File> {
        self.create_at(bytes(path.as_ref()), OFlags::WRONLY, 0o666)
    }

    /// Reads a whole file, like [`std::fs::read`] beneath the root.
    pub fn read(&self, path: impl AsRef<Path>) -> Result<Vec<u8>> {
        self.read_max(path, u64::MAX)
    }

    /// Reads a whole regular file of at most `max` bytes, with the system
    /// calls of [`std::fs::read`] and no more: a larger file fails with
    /// [`ErrorKind::TooLarge`] before any byte is read, and a file that grows
    /// past `max` while being read fails the same way, never returning more.
    pub fn read_max(&self, path: impl AsRef<Path>, max: u64) -> Result<Vec<u8>> {
        let p = bytes(path.as_ref());
        let flags = OFlags::RDONLY | OPEN_EXISTING;
        let file = File::from(
            self.resolve(
                p,
                Final::Open {
                    flags,
                    follow: true,
                },
            )?
            .fd,
        );
        let st = rfs::fstat(&file).map_err(|e| error::from_errno(p, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(not_file(p, st.st_mode));
        }
        let size = st.st_size as u64;
        if size > max {
            return Err(too_large(p, size, max));
        }
        let buf = read_sized(&file, size as usize, max).map_err(|e| error::from_errno(p, e))?;
        if buf.len() as u64 > max {
            return Err(too_large(p, buf.len() as u64, max));
        }
        Ok(buf)
    }

    /// Resolves `path` (following a final symlink) to an `O_PATH` descriptor
    /// of what it names. For identity checks and `/proc/self/fd` audits.
    pub fn resolve_path(&self, path: impl AsRef<Path>) -> Result<OwnedFd> {
        Ok(self
            .resolve(
                bytes(path.as_ref()),
                Final::Open {
                    flags: OFlags::PATH,
                    follow: true,
                },
            )?
            .fd)
    }

    /// Opens the directory `path` as a new root with the same resolver.
    pub fn open_dir(&self, path: impl AsRef<Path>) -> Result<Root> {
        let r = self.resolve(bytes(path.as_ref()), Final::Dir(OFlags::PATH))?;
        Ok(Root::from_fd(r.fd, self.resolver, self.name.join(path)))
    }

    /// Opens `name`, an entry of this root's own directory, as a new root,
    /// never following a symbolic link: `openat(O_PATH | O_DIRECTORY |
    /// O_NOFOLLOW)` on this root's descriptor. A symlink (even one to a
    /// directory), a file or any other entry fails with
    /// [`ErrorKind::NotDir`]; a name that is not one plain component (empty,
    /// `.`, `..`, holding `/`) with [`ErrorKind::InvalidPath`].
    ///
    /// With [`read_dir`](Self::read_dir) of `"."`, this is a walk through
    /// descriptors that can never leave a subtree through a link, for
    /// callers that must see every entry a directory really holds.
    ///
    /// # References
    ///
    /// - [`openat(2)`](https://man7.org/linux/man-pages/man2/openat.2.html)
    pub fn open_child_dir(&self, name: impl AsRef<Path>) -> Result<Root> {
        let n = bytes(name.as_ref());
        if !is_plain_name(n) {
            return Err(error::invalid(n, "not a single entry name"));
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd =
            rfs::openat(&self.fd, n, flags, Mode::empty()).map_err(|e| error::from_errno(n, e))?;
        Ok(Root::from_fd(fd, self.resolver, self.name.join(name)))
    }

    // ----- metadata -----

    /// Metadata of what `path` names, following a final symlink beneath the
    /// root, like [`std::fs::metadata`].
    pub fn stat(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        self.stat_impl(bytes(path.as_ref()), true)
    }

    /// Metadata of `path` itself, not following a final symlink, like
    /// [`std::fs::symlink_metadata`]. A trailing slash demands a directory
    /// and so follows, as in the kernel.
    pub fn lstat(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        self.stat_impl(bytes(path.as_ref()), false)
    }

    fn stat_impl(&self, p: &[u8], follow: bool) -> Result<Metadata> {
        // A plain name directly in the root cannot leave it unless it is a
        // symlink: one fstatat without following answers it. A symlink to
        // follow, and every error, go through the full resolution, so the
        // answers (and error reports) are the resolver's.
        if is_plain_name(p) {
            if let Ok(st) = rfs::statat(&self.fd, p, AtFlags::SYMLINK_NOFOLLOW) {
                if !follow || FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
                    return Ok(Metadata::from_stat(&st));
                }
            }
        }
        let r = self.resolve(
            p,
            Final::Open {
                flags: OFlags::PATH,
                follow,
            },
        )?;
        let st = match r.stat {
            Some(st) => st,
            None => rfs::fstat(&r.fd).map_err(|e| error::from_errno(p, e))?,
        };
        Ok(Metadata::from_stat(&st))
    }

    /// The hard-link count of `path` itself (not following a final symlink).
    pub fn link_count(&self, path: impl AsRef<Path>) -> Result<u64> {
        Ok(self.lstat(path)?.nlink())
    }

    /// The target of the symbolic link `path`, like [`std::fs::read_link`].
    /// The target is returned as stored; it is not resolved.
    pub fn readlink(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        let p = bytes(path.as_ref());
        let s = self.split_checked(p, "'.' and '..' are not symbolic links")?;
        if s.trailing_slash {
            // "link/" names what the link leads to, which must be a directory.
            self.demand_dir(p)?;
            return Err(
                Error::new(ErrorKind::Io, p, "not a symbolic link (trailing slash)")
                    .with_errno(Errno::INVAL),
            );
        }
        let dir = self.parent(p, &s, OFlags::PATH)?;
        match rfs::readlinkat(&dir, s.name, Vec::new()) {
            Ok(t) => Ok(PathBuf::from(OsString::from_vec(t.into_bytes()))),
            Err(Errno::INVAL) => {
                Err(Error::new(ErrorKind::Io, p, "not a symbolic link").with_errno(Errno::INVAL))
            }
            Err(e) => Err(error::from_errno(p, e)),
        }
    }

    /// Lists a directory, like [`std::fs::read_dir`], without `.` and `..`,
    /// in the order the filesystem gives.
    pub fn read_dir(&self, path: impl AsRef<Path>) -> Result<Vec<DirEntry>> {
        self.read_dir_max(path, usize::MAX)
            .map(|(entries, _)| entries)
    }

    /// Lists at most `max` entries of a directory, like
    /// [`read_dir`](Self::read_dir), and says whether it holds more (which
    /// ones are listed is then the filesystem's order, not a choice). For
    /// callers bounded by an entry count: a huge directory costs memory
    /// for `max` entries only, never for all it holds.
    pub fn read_dir_max(
        &self,
        path: impl AsRef<Path>,
        max: usize,
    ) -> Result<(Vec<DirEntry>, bool)> {
        let p = bytes(path.as_ref());
        let r = self.resolve(p, Final::Dir(OFlags::RDONLY))?;
        let dir = rfs::Dir::read_from(&r.fd).map_err(|e| error::from_errno(p, e))?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| error::from_errno(p, e))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if out.len() == max {
                return Ok((out, true));
            }
            let kind = match entry.file_type() {
                FileType::Unknown => rfs::statat(&r.fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| FileKind::from_type(FileType::from_raw_mode(st.st_mode)))
                    .unwrap_or(FileKind::Other),
                t => FileKind::from_type(t),
            };
            out.push(DirEntry {
                name: OsString::from_vec(name.to_vec()),
                kind,
                ino: entry.ino(),
            });
        }
        Ok((out, false))
    }

    // ----- changing the tree -----

    /// Creates one directory, like [`std::fs::DirBuilder::create`] (mode
    /// before umask). The parent must exist.
    pub fn mkdir(&self, path: impl AsRef<Path>, mode: u32) -> Result<()> {
        let p = bytes(path.as_ref());
        path::check(p)?;
        let s = path::split(p);
        if s.name_is_dot() {
            self.resolve(p, Final::Dir(OFlags::PATH))?;
            return Err(error::from_errno(p, Errno::EXIST));
        }
        let dir = self.parent(p, &s, OFlags::PATH)?;
        match rfs::mkdirat(&dir, s.name, Mode::from_bits_truncate(mode)) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) if s.trailing_slash => {
                self.demand_dir(p)?;
                Err(error::from_errno(p, Errno::EXIST))
            }
            Err(e) => Err(error::from_errno(p, e)),
        }
    }

    /// Creates a directory and every missing parent, like
    /// [`std::fs::create_dir_all`]. Existing components may be symlinks to
    /// directories beneath the root. Succeeds if the directory exists.
    pub fn mkdir_all(&self, path: impl AsRef<Path>, mode: u32) -> Result<()> {
        let p = bytes(path.as_ref());
        path::check(p)?;
        self.mkdir_all_impl(p, mode)
    }

    /// Finds the deepest directory of `p` that exists, with a few
    /// resolutions from the root (from the end back, then halving), then
    /// makes each missing level in the one before, through that level's
    /// descriptor: `mkdirat` of one plain name, then `openat` of that name
    /// with `O_NOFOLLOW | O_DIRECTORY`, so a link or a swap raced in at a
    /// name just made is refused, never followed. A path can hold 2,047
    /// components: a resolution from the root per level (as it was) cost
    /// about two million lookups for the deepest one, and a call per level
    /// (as it was before that) overflowed a thread's 2 MiB stack; this is
    /// a loop over the components, two system calls for each level made.
    fn mkdir_all_impl(&self, p: &[u8], mode: u32) -> Result<()> {
        // There already (the usual case): one resolution.
        match self.resolve(p, Final::Dir(OFlags::PATH)) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // Where each component starts and ends: prefix i is
        // `p[..comps[i - 1].1]`.
        let mut comps: Vec<(usize, usize)> = Vec::new();
        let mut start = 0;
        for (i, &b) in p.iter().chain(std::iter::once(&b'/')).enumerate() {
            if b == b'/' {
                if i > start {
                    comps.push((start, i));
                }
                start = i + 1;
            }
        }
        // Prefix i resolves only if every shorter one does (resolving it
        // resolves them on the way), so the deepest existing one is found
        // by search: `lo` resolves (0, the root, always does), `hi` does
        // not (the whole path, just seen).
        let probe = |i: usize| -> Result<Option<OwnedFd>> {
            match self.resolve(&p[..comps[i - 1].1], Final::Dir(OFlags::PATH)) {
                Ok(r) => Ok(Some(r.fd)),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        };
        let (mut lo, mut hi) = (0usize, comps.len());
        let mut base: Option<OwnedFd> = None;
        // From the end back in growing steps (one or two levels missing is
        // the usual case), then halving what is left.
        let mut step = 1;
        while hi - lo > 1 {
            let i = if step == 0 {
                lo + (hi - lo) / 2
            } else {
                hi.saturating_sub(step).max(lo + 1)
            };
            match probe(i)? {
                Some(fd) => {
                    (lo, base) = (i, Some(fd));
                    step = 0;
                }
                None => {
                    hi = i;
                    if step != 0 {
                        step *= 2;
                    }
                }
            }
        }
        // Made one level at a time from there. The descriptors of the last
        // levels made are held for a `..` after them; one above those is
        // resolved again from the root, as is a name found taken by an
        // entry that is not a directory (a link beneath the root is
        // followed there, as any existing component is).
        const HELD: usize = 64;
        let mut base = base.map_or(Parent::Root(self.fd.as_fd()), Parent::Dir);
        let mut held: std::collections::VecDeque<OwnedFd> = std::collections::VecDeque::new();
        let mut let_go = false;
        let step_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mode = Mode::from_bits_truncate(mode);
        for &(start, end) in &comps[lo..] {
            let name = &p[start..end];
            let upto = &p[..end];
            if name == b"." {
                continue;
            }
            if name == b".." {
                if held.len() > 1 || (held.len() == 1 && !let_go) {
                    held.pop_back();
                } else {
                    base = Parent::Dir(self.resolve(upto, Final::Dir(OFlags::PATH))?.fd);
                    held.clear();
                    let_go = false;
                }
                continue;
            }
            let cur = held.back().map_or(base.as_fd(), |fd| fd.as_fd());
            let made = match rfs::mkdirat(cur, name, mode) {
                Ok(()) => true,
                Err(Errno::EXIST) => false,
                Err(e) => return Err(error::from_errno(upto, e)),
            };
            let fd = match rfs::openat(cur, name, step_flags, Mode::empty()) {
                Ok(fd) => fd,
                // Just made, and already gone or replaced: refused.
                Err(e) if made => {
                    return Err(Error::new(
                        error::from_errno(upto, e).kind(),
                        upto,
                        "the directory just made was replaced or removed before it was entered",
                    )
                    .with_errno(e))
                }
                // Taken by something else than a directory (a link, a file),
                // or made by another and gone again: the name is judged as
                // any existing component, from the root.
                Err(_) => {
                    base = Parent::Dir(self.resolve(upto, Final::Dir(OFlags::PATH))?.fd);
                    held.clear();
                    let_go = false;
                    continue;
                }
            };
            if held.len() == HELD {
                held.pop_front();
                let_go = true;
            }
            held.push_back(fd);
        }
        Ok(())
    }

    /// Removes one file, one symlink entry (never its target) or one empty
    /// directory. With a trailing slash the entry must be a directory.
    pub fn remove(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = bytes(path.as_ref());
        let s = self.split_checked(p, "cannot remove '.' or '..'")?;
        let dir = self.parent(p, &s, OFlags::PATH)?;
        if !s.trailing_slash {
            match rfs::unlinkat(&dir, s.name, AtFlags::empty()) {
                Ok(()) => return Ok(()),
                Err(Errno::ISDIR) => {}
                Err(e) => return Err(error::from_errno(p, e)),
            }
        }
        rfs::unlinkat(&dir, s.name, AtFlags::REMOVEDIR).map_err(|e| error::from_errno(p, e))
    }

    /// Removes a file or a symlink entry, never a directory
    /// (`unlinkat` without `AT_REMOVEDIR`: a directory fails with
    /// [`ErrorKind::NotFile`]).
    pub fn remove_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = bytes(path.as_ref());
        let s = self.split_checked(p, "cannot remove '.' or '..'")?;
        if s.trailing_slash {
            return Err(error::not_dir(p));
        }
        let dir = self.parent(p, &s, OFlags::PATH)?;
        rfs::unlinkat(&dir, s.name, AtFlags::empty()).map_err(|e| error::from_errno(p, e))
    }

    /// Removes an empty directory, never a file or a symlink
    /// ([`ErrorKind::NotDir`]).
    pub fn remove_dir(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = bytes(path.as_ref());
        let s = self.split_checked(p, "cannot remove '.' or '..'")?;
        let dir = self.parent(p, &s, OFlags::PATH)?;
        rfs::unlinkat(&dir, s.name, AtFlags::REMOVEDIR).map_err(|e| error::from_errno(p, e))
    }

    /// Renames `from` to `to`, both beneath the root, like
    /// [`std::fs::rename`]; a final symlink is moved, not followed. With
    /// [`RenameMode::NoReplace`] an existing destination fails with
    /// [`ErrorKind::Exists`].
    pub fn rename(
        &self,
        from: impl AsRef<Path>,
        to: impl AsRef<Path>,
        mode: RenameMode,
    ) -> Result<()> {
        self.rename_to(from, self, to, mode)
    }

    /// Renames `from` (beneath this root) to `to` (beneath `to_root`), both
    /// resolved beneath their own root, with one `renameat2` between the two
    /// directory descriptors. With roots from [`open_parent`](Self::open_parent)
    /// and single-component names, this acts on exactly the directories the
    /// caller checked.
    pub fn rename_to(
        &self,
        from: impl AsRef<Path>,
        to_root: &Root,
        to: impl AsRef<Path>,
        mode: RenameMode,
    ) -> Result<()> {
        let (fp, tp) = (bytes(from.as_ref()), bytes(to.as_ref()));
        let fs = self.split_checked(fp, "cannot rename '.' or '..'")?;
        let ts = to_root.split_checked(tp, "cannot rename onto '.' or '..'")?;
        let fdir = self.parent(fp, &fs, OFlags::PATH)?;
        let tdir = to_root.parent(tp, &ts, OFlags::PATH)?;
        rename_entries((&fdir, fp, &fs), (&tdir, tp, &ts), mode)
    }

    /// Writes `data` to `path` atomically and durably: the bytes go to an
    /// unnamed temporary file in the same directory (`O_TMPFILE`), which is
    /// fsynced, given a temporary name, renamed over `path`, and the
    /// directory fsynced. Readers see the old content or the new, never a
    /// mix; a crash leaves one or the other.
    ///
    /// An existing regular file keeps its permission bits, less setuid and
    /// setgid (the new content is a new file of the caller's), its group
    /// (where the caller may not give it that group, the new file's group
    /// gets no permission bits), and its
    /// access ACL, or none: never the directory's default ACL, which the
    /// new file takes where it is made and whose entries would grant users
    /// the old file did not (an ACL that cannot be read, by a caller that
    /// may not read the file where procfs is not mounted, is not carried
    /// over, and the new file's group bits, its mask, then grant nothing);
    /// a final symlink
    /// is replaced as an entry (its target is not written). The temporary
    /// name is `.<name>.sandgate-tmp` (for a name of more than 241 bytes,
    /// its first bytes and a hash of the whole name, so that no two names
    /// share one): a process killed in the instant between link and rename
    /// leaves it, and the next replace of the same file reclaims it. A
    /// directory at that name, or an entry the caller may not remove, is no
    /// leftover: it is left as it is, and the
    /// replace goes through a name of its own, as
    /// [`replace_unique`](Self::replace_unique) does.
    pub fn replace(&self, path: impl AsRef<Path>, data: &[u8]) -> Result<()> {
        self.write_atomic(path, data, RenameMode::Replace)
    }

    /// Replaces `path` as [`replace`](Self::replace) does, but never removes
    /// anything already in the directory: the new file is linked under a
    /// temporary name of its own (the usual one, cut where needed, with
    /// `.<pid>.<counter>` added) that no other replace reclaims. For callers
    /// to whom an entry at the usual temporary name ([`temp_name`]) may be
    /// someone's file, not a leftover. A process killed between link and
    /// rename leaves that unique name behind.
    pub fn replace_unique(&self, path: impl AsRef<Path>, data: &[u8]) -> Result<()> {
        let p = bytes(path.as_ref());
        let s = self.split_checked(p, "cannot write '.' or '..'")?;
        if s.trailing_slash {
            return Err(self.file_name_with_slash(p));
        }
        let dir = self.parent(p, &s, OFlags::RDONLY)?;
        let perm = self.replaced_perm(&dir, p, s.name)?;
        crate::atomic::replace_unique(&dir, s.name, data, perm).map_err(|e| error::from_errno(p, e))
    }

    /// The permission bits a replace of `name` in `dir` keeps: those of the
    /// regular file there, less setuid and setgid; none for a new name or
    /// another kind of entry; a directory is refused. The new content is a
    /// new file, owned by the caller: carried over, those two bits would
    /// give that content the old file's privileges (a write in place by
    /// anyone without `CAP_FSETID` clears them as well).
    fn replaced_perm(&self, dir: &Parent<'_>, p: &[u8], name: &[u8]) -> Result<Option<u32>> {
        match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => Err(not_file(p, st.st_mode)),
                FileType::RegularFile => Ok(Some(st.st_mode & 0o1777)),
                _ => Ok(None),
            },
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(error::from_errno(p, e)),
        }
    }

    /// Writes `data` to `path` atomically and durably, as
    /// [`replace`](Self::replace) does; with [`RenameMode::NoReplace`] the
    /// file must not exist yet ([`ErrorKind::Exists`], a dangling symlink
    /// included), and the new file is linked straight to its name, so no
    /// temporary name is ever used.
    pub fn write_atomic(
        &self,
        path: impl AsRef<Path>,
        data: &[u8],
        mode: RenameMode,
    ) -> Result<()> {
        let p = bytes(path.as_ref());
        let s = self.split_checked(p, "cannot write '.' or '..'")?;
        if s.trailing_slash {
            return Err(self.file_name_with_slash(p));
        }
        // A readable directory descriptor: fsync needs one (O_PATH will not do).
        let dir = self.parent(p, &s, OFlags::RDONLY)?;
        match mode {
            RenameMode::Replace => {
                let perm = self.replaced_perm(&dir, p, s.name)?;
                crate::atomic::replace(&dir, s.name, data, perm)
            }
            RenameMode::NoReplace => match rfs::statat(&dir, s.name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(_) => Err(Errno::EXIST),
                Err(Errno::NOENT) => crate::atomic::create(&dir, s.name, data),
                Err(e) => Err(e),
            },
        }
        .map_err(|e| error::from_errno(p, e))
    }

    /// The root-relative path that `path` resolves to now, following every
    /// symlink beneath the root: `docs/a.md` for `link/a.md` when
    /// `link -> docs`; `.` for the root itself.
    ///
    /// The answer is the kernel's name for the resolved descriptor
    /// (`/proc/self/fd`) relative to its name for the root descriptor. It is
    /// meant for checks such as deny patterns, made on the descriptor that
    /// the caller then acts through ([`open_parent`](Self::open_parent)).
    /// Fails with [`ErrorKind::Escape`] if the object is no longer beneath
    /// the root (moved out meanwhile), with [`ErrorKind::NotFound`] if it
    /// was removed, and with [`ErrorKind::Io`] where procfs is not mounted.
    /// procfs names a removed object `<name> (deleted)`: a directory that
    /// is merely called so is told apart by its link count, but a file
    /// whose name ends so is taken for a removed one.
    pub fn resolved_path(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        let p = bytes(path.as_ref());
        let r = self.resolve(
            p,
            Final::Open {
                flags: OFlags::PATH,
                follow: true,
            },
        )?;
        self.locate(p, r.fd.as_fd())
    }

    /// Where this root's directory is, relative to `outer`'s (for a root
    /// made by [`open_dir`](Self::open_dir) or
    /// [`open_parent`](Self::open_parent)); as [`resolved_path`](Self::resolved_path).
    pub fn path_within(&self, outer: &Root) -> Result<PathBuf> {
        outer.locate(b".", self.fd.as_fd())
    }

    fn locate(&self, p: &[u8], fd: BorrowedFd<'_>) -> Result<PathBuf> {
        let name_of = |fd: BorrowedFd<'_>| -> Result<Vec<u8>> {
            let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
            rfs::readlink(link.as_str(), Vec::new())
                .map(|c| c.into_bytes())
                .map_err(|e| match e {
                    // The descriptor is open: its link is missing only
                    // where procfs is not mounted. Not the path's absence.
                    Errno::NOENT => Error::new(
                        ErrorKind::Io,
                        p,
                        "procfs is not mounted (/proc/self/fd): where the path resolves cannot be told",
                    )
                    .with_errno(e),
                    e => error::from_errno(p, e),
                })
        };
        let root = name_of(self.fd.as_fd())?;
        let target = name_of(fd)?;
        // The kernel names an unlinked object `<name> (deleted)`; an entry
        // may also just be called that. For a directory the link count
        // tells them apart (none is left on one that was removed); a file
        // may keep other links after the name it was opened by is gone, so
        // for a file the suffix stays a refusal.
        if target.ends_with(b" (deleted)")
            && rfs::fstat(fd).map_or(true, |st| {
                st.st_nlink == 0 || FileType::from_raw_mode(st.st_mode) != FileType::Directory
            })
        {
            return Err(error::from_errno(p, Errno::NOENT));
        }
        if target == root {
            return Ok(PathBuf::from("."));
        }
        let rel = if root == b"/" {
            target.strip_prefix(b"/")
        } else {
            target
                .strip_prefix(root.as_slice())
                .and_then(|rest| rest.strip_prefix(b"/"))
        };
        match rel {
            Some(rel) if !rel.is_empty() => Ok(PathBuf::from(OsString::from_vec(rel.to_vec()))),
            _ => Err(error::escape(
                p,
                "resolved object is no longer beneath the root",
            )),
        }
    }

    /// Opens the directory holding the final entry of `path` as a new root
    /// and returns it with the entry's name, for callers that check the
    /// directory's resolved location and then act on the entry through the
    /// very descriptor they checked.
    ///
    /// A name ending in `/` whose entry exists and is not a directory (a
    /// link to one included) fails with [`ErrorKind::NotDir`]; the entry's
    /// name is returned without the slash.
    pub fn open_parent<'p>(&self, path: &'p Path) -> Result<(Root, &'p Path)> {
        let p = bytes(path);
        let s = self.split_checked(p, "'.' and '..' name no entry")?;
        if s.trailing_slash {
            self.demand_dir(p)?;
        }
        let fd = match self.parent(p, &s, OFlags::PATH)? {
            Parent::Root(fd) => {
                rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(|e| error::from_errno(p, e))?
            }
            Parent::Dir(fd) => fd,
        };
        let name = Path::new(std::ffi::OsStr::from_bytes(s.name));
        let sub_name = self.name.join(std::ffi::OsStr::from_bytes(s.parent));
        Ok((Root::from_fd(fd, self.resolver, sub_name), name))
    }
}

fn rename_entries(
    (fdir, fp, fs): (&Parent<'_>, &[u8], &Split<'_>),
    (tdir, tp, ts): (&Parent<'_>, &[u8], &Split<'_>),
    mode: RenameMode,
) -> Result<()> {
    if fs.trailing_slash || ts.trailing_slash {
        // rename(2) accepts trailing slashes only on directories.
        let st = rfs::statat(fdir, fs.name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| error::from_errno(fp, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(error::not_dir(fp));
        }
    }
    let flags = match mode {
        RenameMode::Replace => RenameFlags::empty(),
        RenameMode::NoReplace => RenameFlags::NOREPLACE,
    };
    rfs::renameat_with(fdir, fs.name, tdir, ts.name, flags).map_err(|e| match e {
        // The destination or the source, whichever the kernel means.
        Errno::EXIST | Errno::NOTEMPTY | Errno::ISDIR | Errno::NOTDIR => error::from_errno(tp, e),
        _ => error::from_errno(fp, e),
    })
}

impl AsFd for Root {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

enum Openat2Error {
    /// openat2 is missing or filtered (the errno it gave).
    Unavailable(Errno),
    /// Retries ran out; let the walk answer.
    Fallback,
    /// A real answer.
    Err(Error),
}

impl Error {
    fn with_errno_opt(self, errno: Option<i32>) -> Error {
        match errno {
            Some(n) => self.with_errno(Errno::from_raw_os_error(n)),
            None => self,
        }
    }
}

#[cold]
fn too_large(p: &[u8], size: u64, max: u64) -> Error {
    Error::new(
        ErrorKind::TooLarge,
        p,
        format!("{size} bytes is over the cap of {max} bytes"),
    )
}

#[cold]
fn not_file(p: &[u8], mode: u32) -> Error {
    let what = match FileType::from_raw_mode(mode) {
        FileType::Directory => "is a directory",
        _ => "not a regular file",
    };
    Error::new(ErrorKind::NotFile, p, what)
}

/// Reads a file whose size is known, with the system calls of
/// `std::fs::read` and no more: `read_to_end` on a `File` would stat and
/// seek again to size its buffer, which is what `size` already says.
///
/// Memory that cannot be had (a sparse file of terabytes under a large
/// cap) is `ENOMEM`: a failed allocation would abort the whole process.
fn read_sized(file: &File, size: usize, max: u64) -> std::result::Result<Vec<u8>, Errno> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(size).map_err(|_| Errno::NOMEM)?;
    loop {
        if buf.len() as u64 > max {
            // Grew past the cap while being read: stop; the caller refuses.
            return Ok(buf);
        }
        if buf.len() == buf.capacity() {
            // Probe for end of file (or growth since the stat) with a small
            // stack buffer before growing the vector.
            let mut probe = [0u8; 32];
            match rustix::io::read(file, &mut probe) {
                Ok(0) => return Ok(buf),
                Ok(n) => {
                    buf.try_reserve(n).map_err(|_| Errno::NOMEM)?;
                    buf.extend_from_slice(&probe[..n]);
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        match rustix::io::read(file, rustix::buffer::spare_capacity(&mut buf)) {
            Ok(0) => return Ok(buf),
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
}

fn clear_nonblock(file: &File, p: &[u8]) -> Result<()> {
    let fl = rustix::fs::fcntl_getfl(file).map_err(|e| error::from_errno(p, e))?;
    if fl.contains(OFlags::NONBLOCK) {
        rustix::fs::fcntl_setfl(file, fl - OFlags::NONBLOCK)
            .map_err(|e| error::from_errno(p, e))?;
    }
    Ok(())
}

/// The temporary name a [`Root::replace`] of the entry `name` links its new
/// content under before renaming it over `name`: `.<name>.sandgate-tmp`, or
/// for a name of more than 241 bytes its first bytes and a hash of the
/// whole name. An entry found there is taken for a leftover and removed,
/// but for a directory or an entry the caller may not remove, which is left
/// (the replace then uses a name of its own).
pub fn temp_name(name: &std::ffi::OsStr) -> OsString {
    OsString::from_vec(crate::atomic::temp_name(name.as_bytes()))
}

/// One component that names an entry of the directory itself: not empty,
/// not `.` or `..`, no `/` and no NUL.
fn is_plain_name(p: &[u8]) -> bool {
    !p.is_empty()
        && p != b"."
        && p != b".."
        && p.len() <= 255
        && !p.iter().any(|&b| b == b'/' || b == 0)
}
