//! The audit sink as a JSON-lines file: one object per operation, refusals
//! included, never content.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use sandgate::{AuditEvent, AuditSink};

/// The most bytes of an event's `path` a record keeps; a longer one is cut
/// at a character boundary, and the record's `path_bytes` says its length.
pub const MAX_PATH_RECORDED: usize = 8192;

/// Appends each event to `path` as a JSON line (`time` in milliseconds since
/// the epoch, `op`, `path`, `size`, `outcome`, and for `exec` and `git`
/// `exit_code` when the command ran and `limit` when one stopped it;
/// `path_bytes` when the path was cut at [`MAX_PATH_RECORDED`]). The file is created with
/// mode 0600 when missing. Each line is written with one `write(2)` on a
/// file opened `O_APPEND`, so several servers may share one file: their
/// lines follow each other whole. A record the file does not take (a full
/// disk, the file size limit) does not fail the operation, which already
/// ran; the first lost record is said on stderr, and so is the count once
/// the file takes records again. A record that would pass the file size
/// limit (`ulimit -f`) is not written at all: one written past it would
/// end the program with `SIGXFSZ`. A record the file took only part of
/// (a full disk) is not continued; the next record this sink writes
/// begins with a newline, so it is a line of its own.
///
/// A file inside `write_root` is refused, however it is named (through a
/// link, a second name made by a hard link, or a second mount of the
/// root), and nothing is created:
/// there the agent could erase or forge its own audit with `write_file` or
/// a shell command.
pub fn json_lines_file(path: &Path, write_root: Option<&Path>) -> std::io::Result<AuditSink> {
    let refuse = |why: String| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the audit file {}: {why}", sandgate::policy::shown(path)),
        )
    };
    let root = match write_root {
        Some(root) => {
            let m = std::fs::metadata(root)
                .map_err(|e| refuse(format!("{}: {e}", sandgate::policy::shown(root))))?;
            Some((m.dev(), m.ino(), root))
        }
        None => None,
    };
    let file = open_outside(path, root).map_err(|e| refuse(e.to_string()))?;
    let flags = rustix::fs::fcntl_getfl(&file).map_err(|e| refuse(e.to_string()))?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)
        .map_err(|e| refuse(e.to_string()))?;
    let opened = file.metadata().map_err(|e| refuse(e.to_string()))?;
    let names = opened.nlink();
    if write_root.is_some() && names > 1 {
        return Err(refuse(format!(
            "it has {names} names (hard links), and one could lie inside the write root; \
             give it a file with one name"
        )));
    }
    // A regular file is watched for being deleted or renamed while the
    // server runs (see `Watch`).
    let watch = opened.file_type().is_file().then(|| Watch {
        path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        dev: opened.dev(),
        ino: opened.ino(),
        said: false,
    });
    // The file, how many records were lost since the last one it took,
    // and whether it ends in a piece of a record a full disk cut.
    let file = Mutex::new(Tail {
        file,
        lost: 0,
        cut: false,
        watch,
    });
    let shown = sandgate::policy::shown(path);
    Ok(Arc::new(move |e: &AuditEvent| {
        // A name is at most 4,096 bytes, a rename's two 8,196; what is
        // longer was never a file's name, and is cut so that no call can
        // make a record of megabytes (and fill the audit's disk).
        let mut keep = e.path.len().min(MAX_PATH_RECORDED);
        while !e.path.is_char_boundary(keep) {
            keep -= 1;
        }
        let mut line = serde_json::json!({
            "time_ms": e.time.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
            "op": e.op,
            "path": &e.path[..keep],
            "size": e.size,
            "outcome": e.outcome.as_str(),
        });
        if keep < e.path.len() {
            line["path_bytes"] = e.path.len().into();
        }
        if let Some(code) = e.exit_code {
            line["exit_code"] = code.into();
        }
        if let Some(limit) = e.limit {
            line["limit"] = limit.into();
        }
        let mut t = file.lock().unwrap_or_else(|p| p.into_inner());
        // After a cut record the line is ended first, so this record is
        // not glued to the piece, where no reader would find it.
        let mut bytes = if t.cut { vec![b'\n'] } else { Vec::new() };
        // JSON leaves U+0085, U+2028 and U+2029 raw, and some readers
        // (Python's `str.splitlines`) end a line at each: escaped, a name
        // holding them cannot split its record into pieces, one of which
        // could parse on its own. They only occur inside strings, where
        // the escape means the same character.
        let mut json = line.to_string();
        for (raw, escaped) in [
            ('\u{85}', "\\u0085"),
            ('\u{2028}', "\\u2028"),
            ('\u{2029}', "\\u2029"),
        ] {
            if json.contains(raw) {
                json = json.replace(raw, escaped);
            }
        }
        bytes.extend_from_slice(json.as_bytes());
        bytes.push(b'\n');
        // A full disk must not fail the operation itself (it already ran),
        // but the operator is told that the audit is missing records: at
        // the first lost one, and how many once the file takes them again.
        t.notice_gone(&shown);
        match t.append(&bytes) {
            Ok(()) if t.lost > 0 => {
                say!(
                    "sandgate: the audit file {shown} takes records again; records lost \
                     before this: {}",
                    std::mem::take(&mut t.lost)
                );
            }
            Ok(()) => {}
            Err(err) => {
                if t.lost == 0 {
                    say!(
                        "sandgate: the audit file {shown}: a record was lost ({err}); the \
                         operations still run, and records are lost until it takes them again"
                    );
                }
                t.lost += 1;
            }
        }
    }))
}

/// The audit file and what the records written to it so far left.
struct Tail {
    file: std::fs::File,
    lost: u64,
    cut: bool,
    watch: Option<Watch>,
}

/// What the audit file was when it was opened, to notice that it was
/// deleted or renamed while the server runs: its records would then go
/// on into a file nobody finds under the name the operator gave.
struct Watch {
    /// The name given, made absolute at open.
    path: PathBuf,
    dev: u64,
    ino: u64,
    /// Whether that was said (once per server).
    said: bool,
}

impl Tail {
    /// Says on stderr, once, that the audit file was deleted (no name
    /// left: `fstat` on the descriptor) or that its name now leads to
    /// another file or none (renamed or replaced: one `stat` of the name).
    /// Records go on to the file as opened, as they do through a full
    /// disk: the operations are not failed for it.
    fn notice_gone(&mut self, shown: &str) {
        let Some(w) = self.watch.as_mut().filter(|w| !w.said) else {
            return;
        };
        let why = match self.file.metadata() {
            Ok(m) if m.nlink() == 0 => "was deleted",
            Ok(_) => match std::fs::metadata(&w.path) {
                Ok(m) if m.dev() == w.dev && m.ino() == w.ino => return,
                Ok(_) => "was replaced by another file (renamed or rotated)",
                Err(_) => "was renamed (its name leads nowhere)",
            },
            Err(_) => return,
        };
        w.said = true;
        say!(
            "sandgate: the audit file {shown} {why} while the server runs; records go on \
             to the file it opened, which that name no longer reaches: restart the server \
             to audit to the name again"
        );
    }

    /// Appends `bytes` (one record's line, after a newline when the last
    /// one was cut) with one `write(2)`: with `O_APPEND` the kernel puts it
    /// at the end in one piece, so another process appending to the same
    /// file cannot splice its records into this one. A short write (the
    /// disk filled, or the file reached the process's file size limit)
    /// is not continued, which could land after another process's record;
    /// the piece is ended before the next record instead.
    ///
    /// A record whose end would pass the process's file size limit
    /// (`ulimit -f`) is not written (`EFBIG`): one that starts past it
    /// raises `SIGXFSZ`, whose default action ends the program embedding
    /// the library, and one that crosses it is cut. The end is the file's
    /// size now, where `O_APPEND` puts the record. The limit bounds
    /// regular files only: a terminal, a pipe or a device is not checked.
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let m = self.file.metadata()?;
        if m.file_type().is_file() {
            sandgate::rootfs::within_file_size_limit(m.len().saturating_add(bytes.len() as u64))?;
        }
        let n = loop {
            match self.file.write(bytes) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        if n == bytes.len() {
            self.cut = false;
            return Ok(());
        }
        if n > 0 {
            // The file now ends in the piece written, unless that was just
            // the newline ending an earlier piece.
            self.cut = bytes[n - 1] != b'\n';
        }
        if n + 1 == bytes.len() {
            // All of it but its newline: the record is whole.
            return Ok(());
        }
        Err(std::io::Error::other(format!(
            "the file took {n} of its {} bytes (a full disk or the file size limit); \
             the piece is ended before the next record",
            bytes.len()
        )))
    }
}

/// Opens `path` for appending, created with mode 0600 when missing, in
/// one step per name: each directory is opened (`O_PATH`) and judged by
/// its descriptor, then the last name is opened in it with `O_NOFOLLOW`,
/// so nothing is judged by a path that could be swapped before the open.
/// A link at the last name is followed by hand (at most 40), each target
/// judged the same way, and nothing is created before its directory was
/// judged outside `root` (device, inode and the root's path). A magic
/// link of `/proc` (`/dev/stderr`) is opened as the kernel follows it,
/// without creating, and a regular file reached that way is judged by
/// where its descriptor says it lies. Opened without blocking: a FIFO
/// nobody reads is refused at once (`ENXIO`) where a plain open waited
/// for a reader forever, the server serving nothing and saying nothing.
fn open_outside(path: &Path, root: Option<(u64, u64, &Path)>) -> std::io::Result<std::fs::File> {
    use rustix::fs::{openat, readlinkat, Mode, OFlags, CWD};
    use rustix::io::Errno;
    let inside = |root: &Path| {
        std::io::Error::other(format!(
            "it lies inside the write root {}, where the agent could rewrite or erase its own \
             audit; choose a file outside it",
            sandgate::policy::shown(root)
        ))
    };
    let fifo = |e: Errno| {
        if e == Errno::NXIO {
            std::io::Error::other(
                "it is a FIFO that no process reads; start its reader first, or name a file",
            )
        } else {
            std::io::Error::from(e)
        }
    };
    let write = OFlags::WRONLY | OFlags::APPEND | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let mut base: Option<OwnedFd> = None;
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        let (Some(name), parent) = (path.file_name(), path.parent()) else {
            return Err(std::io::Error::other("it names a directory, not a file"));
        };
        let parent = match parent {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir = match &base {
            Some(b) => openat(
                b,
                parent,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            ),
            None => openat(
                CWD,
                parent,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            ),
        }
        .map_err(|e| std::io::Error::other(format!("{}: {e}", sandgate::policy::shown(parent))))?;
        if let Some((dev, ino, root)) = root {
            if within(&dir, (dev, ino))? {
                return Err(inside(root));
            }
        }
        match openat(
            &dir,
            name,
            write | OFlags::CREATE | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => return Ok(fd.into()),
            Err(Errno::LOOP) => {}
            Err(e) => return Err(fifo(e)),
        }
        // A link at the last name.
        if rustix::fs::fstatfs(&dir)?.f_type as i64 == 0x9fa0 {
            // procfs: a magic link to an open file, opened as the kernel
            // follows it; nothing can be created there.
            let fd = openat(&dir, name, write, Mode::empty()).map_err(fifo)?;
            let file = std::fs::File::from(fd);
            if let Some((dev, ino, root)) = root {
                if file.metadata()?.file_type().is_file() && file_within(&file, (dev, ino))? {
                    return Err(inside(root));
                }
            }
            return Ok(file);
        }
        let target = readlinkat(&dir, name, Vec::new())?;
        path = PathBuf::from(std::ffi::OsStr::from_bytes(target.as_bytes()));
        base = Some(dir);
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// Whether the directory `dir` is the directory `root` (device, inode) or
/// lies below it, judged by walking `..` from the descriptor: a root
/// reached under a second path (a bind mount of it, or of a directory
/// above it) has another name but is the same directory.
fn within(dir: &OwnedFd, root: (u64, u64)) -> std::io::Result<bool> {
    use rustix::fs::{fstat, openat, Mode, OFlags};
    let mut here = fstat(dir)?;
    let mut up = openat(
        dir,
        "..",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // A path is at most 4,096 bytes, so at most 2,048 directories deep.
    for _ in 0..4096 {
        if (here.st_dev, here.st_ino) == root {
            return Ok(true);
        }
        let above = fstat(&up)?;
        if (above.st_dev, above.st_ino) == (here.st_dev, here.st_ino) {
            return Ok(false);
        }
        here = above;
        up = openat(
            &up,
            "..",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
    }
    Err(std::io::Error::other(
        "the directory lies too deep to tell where",
    ))
}

/// Whether the regular file open as `file` lies in a directory
/// [`within`] `root`: its directory is found from the name the kernel
/// gives its descriptor, and must hold that very file, or where it lies
/// cannot be told and it is refused.
fn file_within(file: &std::fs::File, root: (u64, u64)) -> std::io::Result<bool> {
    use rustix::fs::{openat, statat, AtFlags, Mode, OFlags, CWD};
    let unknown = || std::io::Error::other("where the file it leads to lies cannot be told");
    let named = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let (Some(parent), Some(name)) = (named.parent(), named.file_name()) else {
        return Err(unknown());
    };
    let dir = openat(
        CWD,
        parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|_| unknown())?;
    let m = file.metadata()?;
    match statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if (st.st_dev, st.st_ino) == (m.dev(), m.ino()) => within(&dir, root),
        _ => Err(unknown()),
    }
}
