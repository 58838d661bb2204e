//! The audit sink as a JSON-lines file: one object per operation, refusals
//! included, never content.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
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
/// the file takes records again. A record the file took only part of is
/// not continued; the next record this sink writes begins with a newline,
/// so it is a line of its own.
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
            format!("the audit file {}: {why}", path.display()),
        )
    };
    if let Some(root) = write_root {
        let lands = where_it_lands(path).map_err(|e| refuse(e.to_string()))?;
        if lands.starts_with(root) || under_by_identity(&lands, root) {
            return Err(refuse(format!(
                "it lies inside the write root {}, where the agent could rewrite or erase its \
                 own audit; choose a file outside it",
                root.display()
            )));
        }
    }
    // Opened without blocking: a FIFO nobody reads is refused at once
    // (`ENXIO`) where a plain open waited for a reader forever, the server
    // serving nothing and saying nothing. A FIFO with a reader (a pipe to
    // a log shipper) is taken, and written to blocking as a file is.
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == rustix::io::Errno::NXIO.raw_os_error() => refuse(
                "it is a FIFO that no process reads; start its reader first, or name a file".into(),
            ),
            _ => refuse(e.to_string()),
        })?;
    let flags = rustix::fs::fcntl_getfl(&file).map_err(|e| refuse(e.to_string()))?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)
        .map_err(|e| refuse(e.to_string()))?;
    let names = file.metadata().map_err(|e| refuse(e.to_string()))?.nlink();
    if write_root.is_some() && names > 1 {
        return Err(refuse(format!(
            "it has {names} names (hard links), and one could lie inside the write root; \
             give it a file with one name"
        )));
    }
    // The file, how many records were lost since the last one it took,
    // and whether it ends in a piece of a record a full disk cut.
    let file = Mutex::new(Tail {
        file,
        lost: 0,
        cut: false,
    });
    let shown = path.display().to_string();
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
        match t.append(&bytes) {
            Ok(()) if t.lost > 0 => {
                eprintln!(
                    "sandgate: the audit file {shown} takes records again; records lost \
                     before this: {}",
                    std::mem::take(&mut t.lost)
                );
            }
            Ok(()) => {}
            Err(err) => {
                if t.lost == 0 {
                    eprintln!(
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
}

impl Tail {
    /// Appends `bytes` (one record's line, after a newline when the last
    /// one was cut) with one `write(2)`: with `O_APPEND` the kernel puts it
    /// at the end in one piece, so another process appending to the same
    /// file cannot splice its records into this one. A short write (the
    /// disk filled, or the file reached the process's file size limit)
    /// is not continued, which could land after another process's record;
    /// the piece is ended before the next record instead.
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
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

/// Whether a directory holding `lands` is `root` itself, compared by
/// device and inode: the root reached under a second path (a bind mount
/// of it, or of a directory above it) has another name but is the same
/// directory.
fn under_by_identity(lands: &Path, root: &Path) -> bool {
    let Ok(root) = std::fs::metadata(root) else {
        return false;
    };
    lands.ancestors().skip(1).any(|dir| {
        std::fs::metadata(dir).is_ok_and(|m| m.dev() == root.dev() && m.ino() == root.ino())
    })
}

/// Where opening `path` for appending would write, with every link
/// followed: the file itself when it exists; when it does not, its
/// resolved directory and its name. A dangling link is followed as far
/// as it goes, since opening it would create its target.
fn where_it_lands(path: &Path) -> std::io::Result<PathBuf> {
    let mut path = std::path::absolute(path)?;
    // Links at the last component, each taken relative to its directory;
    // the kernel stops at 40, and so does this.
    for _ in 0..40 {
        if let Ok(real) = std::fs::canonicalize(&path) {
            return Ok(real);
        }
        match std::fs::read_link(&path) {
            Ok(target) => {
                let dir = path.parent().unwrap_or(Path::new("/"));
                path = dir.join(target);
            }
            Err(_) => {
                let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
                    return Ok(path);
                };
                return Ok(std::fs::canonicalize(dir)?.join(name));
            }
        }
    }
    Err(std::io::Error::other(format!(
        "{}: too many levels of symbolic links",
        path.display()
    )))
}
