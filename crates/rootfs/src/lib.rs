//! Kernel-confined file operations beneath an opened directory.
//!
//! [`Root`] opens a directory once and resolves every later path relative to
//! that descriptor, so that no path it is given (through `..`, symbolic
//! links, absolute spellings or magic links) reaches anything outside. It is
//! the mechanism layer of sandgate: it knows nothing of policies or deny
//! patterns, and it accepts relative paths with `..` as long as they stay
//! beneath, like Go's `os.Root` and cap-std's `Dir`.
//!
//! Two resolvers implement one rule ([`Resolver`]):
//!
//! - `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` on Linux 5.6 and
//!   later, where the kernel itself refuses every escape;
//! - a descriptor walk everywhere else: one `openat(O_NOFOLLOW)` per
//!   component, `readlinkat` for links, and a stack of directory descriptors
//!   so that `..` never opens anything on disk.
//!
//! The test suite holds them to identical answers, on fixed escape cases, on
//! random trees against a pure model, under rename races, and under a seccomp
//! filter that takes `openat2` away.
//!
//! ```no_run
//! use sandgate_rootfs::{Root, ErrorKind};
//! let root = Root::open("/srv/workspace")?;
//! let bytes = root.read("notes/todo.txt")?;
//! assert_eq!(root.read("../etc/passwd").unwrap_err().kind(), ErrorKind::Escape);
//! root.replace("notes/todo.txt", b"done\n")?;
//! # Ok::<(), sandgate_rootfs::Error>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

// The resolvers stand on Linux facilities (`openat2`, `O_PATH` descriptors,
// `O_TMPFILE`); another system gets one clear message instead of a page of
// unresolved names. The walk resolver is the part a port would start from.
#[cfg(not(target_os = "linux"))]
compile_error!(
    "sandgate-rootfs builds only on Linux for now: it resolves beneath a root with openat2 and \
     O_PATH descriptors. x86_64 Linux with glibc is the platform that is built and tested."
);

#[cfg(target_os = "linux")]
mod atomic;
#[cfg(target_os = "linux")]
mod error;
#[cfg(target_os = "linux")]
mod meta;
#[cfg(target_os = "linux")]
mod path;
#[cfg(target_os = "linux")]
mod root;
#[cfg(target_os = "linux")]
mod walk;

#[cfg(target_os = "linux")]
pub use error::{Error, ErrorKind, Result};
#[cfg(target_os = "linux")]
pub use meta::{DirEntry, FileKind, Metadata};
#[cfg(target_os = "linux")]
pub use root::{temp_name, OpenOptions, RenameMode, Resolver, Root};
#[cfg(target_os = "linux")]
pub use sandgate_codes::ErrorCode;

/// The most symbolic links one resolution follows (Linux's `MAXSYMLINKS`).
#[cfg(target_os = "linux")]
pub const MAX_SYMLINKS: u32 = walk::MAX_SYMLINKS;

/// Refuses with `EFBIG` a write whose end (its offset plus its length,
/// for an append the file's size plus the length) lies past this
/// process's file size limit (`RLIMIT_FSIZE`, soft; `ulimit -f`). A write
/// that starts at or past that limit raises `SIGXFSZ`, whose default
/// action ends the whole process (the program embedding the library, not
/// just the call), and one that crosses it is cut short; `EFBIG` is what
/// the write would have answered were the signal ignored. Called before
/// each write the library makes to a file, so that the limit fails the
/// call instead of the program. Exact for a single writer: the kernel
/// signals exactly when a write would start at the limit or be cut by it.
#[cfg(target_os = "linux")]
pub fn within_file_size_limit(end: u64) -> std::io::Result<()> {
    use rustix::process::{getrlimit, Resource};
    match getrlimit(Resource::Fsize).current {
        Some(max) if end > max => Err(std::io::Error::from_raw_os_error(
            rustix::io::Errno::FBIG.raw_os_error(),
        )),
        _ => Ok(()),
    }
}

/// Whether this build and kernel can resolve with `openat2`.
#[cfg(target_os = "linux")]
pub fn openat2_supported() -> bool {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags, CWD};
    openat2(
        CWD,
        c".",
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH,
    )
    .is_ok()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn root_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<crate::Root>();
        is::<crate::Error>();
    }
}
