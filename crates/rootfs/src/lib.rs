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

mod atomic;
mod error;
mod meta;
mod path;
mod root;
mod walk;

pub use error::{Error, ErrorKind, Result};
pub use meta::{DirEntry, FileKind, Metadata};
pub use root::{OpenOptions, RenameMode, Resolver, Root};
pub use sandgate_codes::ErrorCode;

/// The most symbolic links one resolution follows (Linux's `MAXSYMLINKS`).
pub const MAX_SYMLINKS: u32 = walk::MAX_SYMLINKS;

/// Whether this build and kernel can resolve with `openat2`.
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

#[cfg(test)]
mod tests {
    #[test]
    fn root_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<crate::Root>();
        is::<crate::Error>();
    }
}
