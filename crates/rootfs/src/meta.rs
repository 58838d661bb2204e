//! File metadata and directory entries, as seen beneath a root.

use std::ffi::OsString;

use rustix::fs::{FileType, Stat};

/// The kind of a filesystem object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only from operations that do not follow it).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl FileKind {
    pub(crate) fn from_type(t: FileType) -> FileKind {
        match t {
            FileType::RegularFile => FileKind::File,
            FileType::Directory => FileKind::Dir,
            FileType::Symlink => FileKind::Symlink,
            _ => FileKind::Other,
        }
    }

    /// The lower-case name used on the wire: `file`, `dir`, `symlink`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Dir => "dir",
            FileKind::Symlink => "symlink",
            FileKind::Other => "other",
        }
    }
}

/// Metadata of one filesystem object, like [`std::fs::Metadata`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    kind: FileKind,
    len: u64,
    mode: u32,
    nlink: u64,
    dev: u64,
    ino: u64,
    uid: u32,
    gid: u32,
    mtime: i64,
    mtime_nsec: u32,
}

impl Metadata {
    pub(crate) fn from_stat(st: &Stat) -> Metadata {
        Metadata {
            kind: FileKind::from_type(FileType::from_raw_mode(st.st_mode)),
            len: st.st_size as u64,
            mode: st.st_mode & 0o7777,
            nlink: st.st_nlink,
            dev: st.st_dev,
            ino: st.st_ino,
            uid: st.st_uid,
            gid: st.st_gid,
            mtime: st.st_mtime,
            mtime_nsec: st.st_mtime_nsec as u32,
        }
    }

    /// The kind of object.
    pub fn kind(&self) -> FileKind {
        self.kind
    }
    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        self.kind == FileKind::File
    }
    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }
    /// Whether it is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.kind == FileKind::Symlink
    }
    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Permission bits (`st_mode & 0o7777`).
    pub fn mode(&self) -> u32 {
        self.mode
    }
    /// Number of hard links: more than one means the file has other names
    /// that no walk of this root can see.
    pub fn nlink(&self) -> u64 {
        self.nlink
    }
    /// Device number.
    pub fn dev(&self) -> u64 {
        self.dev
    }
    /// Inode number; with [`dev`](Self::dev), the object's identity.
    pub fn ino(&self) -> u64 {
        self.ino
    }
    /// Owner user id.
    pub fn uid(&self) -> u32 {
        self.uid
    }
    /// Owner group id.
    pub fn gid(&self) -> u32 {
        self.gid
    }
    /// Modification time: seconds and nanoseconds since the Unix epoch.
    pub fn mtime(&self) -> (i64, u32) {
        (self.mtime, self.mtime_nsec)
    }
}

/// One entry of a directory listing (`.` and `..` are never listed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub(crate) name: OsString,
    pub(crate) kind: FileKind,
    pub(crate) ino: u64,
}

impl DirEntry {
    /// The entry's name within its directory.
    pub fn name(&self) -> &std::ffi::OsStr {
        &self.name
    }
    /// The entry's kind, not following symlinks.
    pub fn kind(&self) -> FileKind {
        self.kind
    }
    /// The entry's inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }
}
