//! The vetting reader of the repository at the root: `.git` must be a plain
//! directory, and its config files, read as bytes with a parser that
//! follows git's own syntax, must hold nothing git could be led by that the
//! invocation cannot neutralize.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::{shown_bytes, GitError};

/// The largest repository config file [`super::plan()`] reads.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// What [`super::plan()`] learned from the repository config.
#[derive(Debug, Default)]
pub(super) struct RepoConfig {
    /// Subsection names of `filter` sections, as the bytes git reads
    /// (neither decoded nor re-encoded: git compares them byte for byte
    /// with the `filter` attribute).
    pub(super) filters: BTreeSet<Vec<u8>>,
}

/// One config entry: the section (lower case), the subsection (the bytes
/// of the file, unchanged) and the key (lower case; empty for a header).
type Entry = (String, Option<Vec<u8>>, String);

/// A config value: `None` for a key without `=` (git's boolean true).
type Value = Option<Vec<u8>>;

/// A reader of git config syntax (git 2.39 `config.c`), enough to learn
/// section names and keys; values are parsed only to find where they end.
struct ConfigParser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl ConfigParser<'_> {
    /// The next character, with `\r\n` read as `\n`; `None` at the end.
    fn next(&mut self) -> Option<u8> {
        let c = *self.bytes.get(self.pos)?;
        self.pos += 1;
        if c == b'\r' && self.bytes.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            return Some(b'\n');
        }
        Some(c)
    }

    fn is_keychar(c: u8) -> bool {
        c.is_ascii_alphanumeric() || c == b'-'
    }

    /// After `[`: the section (lowercased) and subsection, split as git
    /// splits the variable name: the section up to the first dot, the
    /// subsection after it (`[filter.A "B"]` is filter `a.B`; the legacy
    /// `[filter.A]` is filter `a`).
    fn header(&mut self) -> Option<(String, Option<Vec<u8>>)> {
        let mut base = Vec::new();
        let mut extended = None;
        loop {
            let c = self.next()?;
            if c == b']' {
                break;
            }
            if c == b' ' || c == b'\t' {
                // `[section "subsection"]`
                let mut c = self.next()?;
                while c == b' ' || c == b'\t' {
                    c = self.next()?;
                }
                if c != b'"' {
                    return None;
                }
                let mut sub = Vec::new();
                loop {
                    let mut c = self.next()?;
                    if c == b'\n' {
                        return None;
                    }
                    if c == b'"' {
                        break;
                    }
                    if c == b'\\' {
                        c = self.next()?;
                        if c == b'\n' {
                            return None;
                        }
                    }
                    sub.push(c);
                }
                if self.next()? != b']' {
                    return None;
                }
                extended = Some(sub);
                break;
            }
            if !Self::is_keychar(c) && c != b'.' {
                return None;
            }
            base.push(c.to_ascii_lowercase());
        }
        let base = String::from_utf8(base).ok()?;
        if base.is_empty() {
            return None;
        }
        let (section, rest) = match base.split_once('.') {
            Some((section, rest)) => (section.to_string(), Some(rest.to_string())),
            None => (base, None),
        };
        let sub = match (rest, extended) {
            (Some(rest), Some(ext)) => {
                let mut sub = rest.into_bytes();
                sub.push(b'.');
                sub.extend_from_slice(&ext);
                Some(sub)
            }
            (Some(rest), None) => Some(rest.into_bytes()),
            (None, ext) => ext,
        };
        Some((section, sub))
    }

    /// After a key's first character: the rest of the key (lowercased) and
    /// its value (`None` for a key without `=`); `None` on a syntax error.
    fn key_value(&mut self, first: u8) -> Option<(String, Value)> {
        let mut key = vec![first.to_ascii_lowercase()];
        let mut c;
        loop {
            c = self.next();
            match c {
                Some(k) if Self::is_keychar(k) => key.push(k.to_ascii_lowercase()),
                _ => break,
            }
        }
        while matches!(c, Some(b' ' | b'\t')) {
            c = self.next();
        }
        let value = match c {
            None | Some(b'\n') => None,
            Some(b'=') => Some(self.value()?),
            Some(_) => return None,
        };
        Some((String::from_utf8(key).ok()?, value))
    }

    /// After `=`: the value through its end of line, decoded as git decodes
    /// it (quotes removed, escapes and continuations resolved, comments
    /// dropped, blanks outside quotes trimmed at the ends and each one
    /// inside the value kept as a space).
    fn value(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut quote = false;
        let mut comment = false;
        let mut space = 0usize;
        loop {
            let Some(c) = self.next() else {
                return if quote { None } else { Some(out) };
            };
            if c == b'\n' {
                return if quote { None } else { Some(out) };
            }
            if comment {
                continue;
            }
            if !quote && matches!(c, b' ' | b'\t' | b'\r') {
                if !out.is_empty() {
                    space += 1;
                }
                continue;
            }
            if !quote && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            out.extend(std::iter::repeat_n(b' ', std::mem::take(&mut space)));
            match c {
                b'\\' => match self.next() {
                    Some(b'\n') => {}
                    Some(b't') => out.push(b'\t'),
                    Some(b'b') => out.push(0x08),
                    Some(b'n') => out.push(b'\n'),
                    Some(e @ (b'\\' | b'"')) => out.push(e),
                    _ => return None,
                },
                b'"' => quote = !quote,
                _ => out.push(c),
            }
        }
    }

    /// Every `(section, subsection, key)`, or `None` if the file does not
    /// parse.
    #[cfg(test)]
    fn entries(bytes: &[u8]) -> Option<Vec<Entry>> {
        Self::parse(bytes).map(|(entries, _)| entries)
    }

    /// Every `(section, subsection, key)` and the last value of
    /// `extensions.objectFormat` (`Some(None)` for one without `=`), or
    /// `None` if the file does not parse.
    fn parse(bytes: &[u8]) -> Option<(Vec<Entry>, Option<Value>)> {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let mut p = ConfigParser { bytes, pos: 0 };
        let mut section: Option<(String, Option<Vec<u8>>)> = None;
        let mut out = Vec::new();
        let mut object_format = None;
        let mut comment = false;
        while let Some(c) = p.next() {
            if c == b'\n' {
                comment = false;
                continue;
            }
            if comment || matches!(c, b' ' | b'\t' | b'\r' | 0x0b | 0x0c) {
                continue;
            }
            if c == b'#' || c == b';' {
                comment = true;
                continue;
            }
            if c == b'[' {
                let (name, sub) = p.header()?;
                // A section header alone is recorded too: an empty
                // `[include]` is as suspicious as a full one.
                out.push((name.clone(), sub.clone(), String::new()));
                section = Some((name, sub));
                continue;
            }
            if !c.is_ascii_alphabetic() {
                return None;
            }
            let (name, sub) = section.clone()?;
            let (key, value) = p.key_value(c)?;
            if name == "extensions" && sub.is_none() && key == "objectformat" {
                object_format = Some(value);
            }
            out.push((name, sub, key));
        }
        Some((out, object_format))
    }
}

/// Why `-c filter.<name>.clean=` cannot name the driver `name` exactly, if
/// it cannot. git splits a `-c` argument at its first `=` and refuses a
/// key with a newline; an argument cannot hold NUL. Every other byte,
/// invalid UTF-8 included, reaches git unchanged, since the argument is
/// passed as bytes.
fn unoverridable(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        Some("an empty name")
    } else if name.contains(&b'=') {
        Some("`=` would end the key")
    } else if name.contains(&0) {
        Some("a NUL byte")
    } else if name.contains(&b'\n') {
        Some("a newline")
    } else {
        None
    }
}

/// Vets one config file into `into`; returns the last value of
/// `extensions.objectFormat` it holds, if any.
fn scan_config(bytes: &[u8], into: &mut RepoConfig) -> Result<Option<Value>, GitError> {
    let (entries, object_format) = ConfigParser::parse(bytes).ok_or_else(|| {
        GitError::repository(
            "confined git refuses the repository: its config does not parse (as git 2.39 reads it)",
        )
    })?;
    for (section, sub, key) in entries {
        match section.as_str() {
            "include" | "includeif" => {
                return Err(GitError::repository(
                    "confined git refuses the repository: its config includes other files \
                     (include/includeIf), which cannot be vetted",
                ))
            }
            "extensions" if key == "partialclone" => {
                return Err(GitError::repository(
                    "confined git refuses the repository: it is a partial clone, and a missing \
                     object would make git fetch",
                ))
            }
            "remote" if key == "promisor" => {
                return Err(GitError::repository(
                    "confined git refuses the repository: a promisor remote would make git fetch",
                ))
            }
            "filter" => {
                if let Some(name) = sub {
                    if let Some(why) = unoverridable(&name) {
                        return Err(GitError::repository(format!(
                            "confined git refuses the repository: filter driver `{}` cannot be \
                             neutralized byte for byte on git's command line ({why})",
                            shown_bytes(&name)
                        )));
                    }
                    into.filters.insert(name);
                }
            }
            _ => {}
        }
    }
    Ok(object_format)
}

/// What git reads of the repository, as it was vetted: the small control
/// files copied (their bytes, read once), the object store and the refs
/// named for linking. [`super::plan()`] builds git's private git directory
/// from it, so that what git reads of the control files is what was
/// vetted, whatever changes in `.git` after.
#[derive(Debug, Default)]
pub(super) struct Snapshot {
    /// What the config files hold.
    pub(super) config: RepoConfig,
    /// Directories to make, relative to the git directory, parents first.
    pub(super) dirs: Vec<PathBuf>,
    /// Regular files to copy, relative to the git directory, with the
    /// bytes read (and vetted, for the config files and the index) and
    /// their modification time (git compares the index's with the work
    /// tree's to tell a racily clean entry: a copy made now would make a
    /// file changed in the second it was staged look unchanged).
    pub(super) files: Vec<(PathBuf, Vec<u8>, std::time::SystemTime)>,
    /// Top-level directories linked, not copied (`refs`, `logs`): many
    /// small files, read without being echoed.
    pub(super) linked: Vec<PathBuf>,
    /// Entries of `objects` but `info`, linked (`pack` and the loose
    /// object directories). `objects/info` is not: it holds what makes git
    /// read elsewhere (`alternates`), and the rest (a commit graph) only
    /// speeds git up.
    pub(super) objects: Vec<PathBuf>,
}

/// The most bytes of control files (all but the config files and the
/// index) [`inspect_repository`] copies: `packed-refs`, `HEAD`, `info/*`,
/// `shallow`, the state of a rebase or a merge.
const MAX_COPY_BYTES: u64 = 64 * 1024 * 1024;

/// Inspects `<root>/.git`: `Ok(None)` when there is none, the vetted
/// snapshot when it is a plain directory.
///
/// Each entry is opened relative to its directory's descriptor without
/// following a link, and each file read once: a link or a FIFO swapped in
/// after the directory was listed is refused, and the bytes vetted are the
/// bytes git gets.
pub(super) fn inspect_repository(root: &Path) -> Result<Option<Snapshot>, GitError> {
    let dot_git = root.join(".git");
    let meta = match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(GitError::io("cannot inspect the root's .git", e)),
    };
    if meta.file_type().is_symlink() {
        return Err(GitError::repository(
            "confined git refuses the repository: the root's .git is a symbolic link",
        ));
    }
    if meta.is_file() {
        return Err(GitError::repository(
            "confined git refuses the repository: the root's .git is a `gitdir:` file, which \
             names a git directory elsewhere (a linked worktree or a submodule), and only \
             <root>/.git itself is vetted",
        ));
    }
    if !meta.is_dir() {
        return Err(GitError::repository(
            "confined git refuses the repository: the root's .git is not a directory",
        ));
    }
    let dir = open_dir(rustix::fs::CWD, &dot_git, Path::new(""))?;
    let mut snapshot = Snapshot::default();
    walk(dir, &mut snapshot)?;
    let file = |name: &str| {
        snapshot
            .files
            .iter()
            .find(|(p, _, _)| p == Path::new(name))
            .map(|(_, b, _)| b.as_slice())
    };
    if file("commondir").is_some() {
        return Err(GitError::repository(
            "confined git refuses the repository: .git/commondir names a repository \
             elsewhere (linked worktree)",
        ));
    }
    let mut config = RepoConfig::default();
    let mut sha256 = false;
    for name in ["config", "config.worktree"] {
        if let Some(bytes) = file(name) {
            let object_format = scan_config(bytes, &mut config)?;
            // git takes the object format from .git/config alone.
            if name == "config" {
                sha256 = object_format.is_some_and(|v| v.as_deref() == Some(b"sha256"));
            }
        }
    }
    if let Some(bytes) = file("index") {
        let names = super::index::vet_index(bytes, if sha256 { 32 } else { 20 })?;
        vet_work_tree_repositories(root, &names)?;
    }
    snapshot.config = config;
    Ok(Some(snapshot))
}

/// Refuses an index entry whose directory in the work tree leads out of
/// the root through a symbolic link (`lnk/secret` with `lnk -> /etc`).
/// git mostly passes such an entry over (it looks for a link on the way
/// first), but `git diff --cached` shows a staged blob from the work tree
/// instead of the object store when the entry's stat data matches the
/// file there (`reuse_worktree_file`), and it finds that file with
/// `lstat`, which follows the link: with `core.checkStat = minimal` and
/// `core.fileMode = false` in the repository config, an entry carrying the
/// mtime and size of a host file (the same on every host for one a package
/// installs) made git print that file. Each directory is resolved beneath
/// the root with `openat2(RESOLVE_BENEATH)`: one that leads out (or an
/// absolute link, wherever it leads) is refused; one that does not exist,
/// or is not a directory, is harmless (git finds no file there). Where the
/// kernel has no `openat2`, any link on the way is refused.
fn refuse_entries_beyond_links_out(root_fd: &OwnedFd, names: &[Vec<u8>]) -> Result<(), GitError> {
    use rustix::fs::{AtFlags, FileType, OFlags, ResolveFlags};
    use rustix::io::Errno;
    use std::os::unix::ffi::OsStrExt;
    let refused = |name: &[u8], how: &str| {
        GitError::repository(format!(
            "confined git refuses the repository: its index names `{}`, whose directory in \
             the work tree goes through a symbolic link that leads out of the root (absolute, \
             or climbing out){how}, and git diff --cached would read the file there as the \
             staged one",
            shown_bytes(name)
        ))
    };
    let mut looked: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    for name in names {
        let path = name.strip_suffix(b"/").unwrap_or(name);
        let Some(slash) = path.iter().rposition(|b| *b == b'/') else {
            continue;
        };
        let dir = &path[..slash];
        if !looked.insert(dir) {
            continue;
        }
        let dir_path = Path::new(std::ffi::OsStr::from_bytes(dir));
        match openat2_beneath(
            root_fd,
            dir_path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            ResolveFlags::empty(),
        ) {
            // git, running as this process's user with paths relative to
            // the root, reaches no file there either.
            Ok(_)
            | Err(
                Errno::NOENT | Errno::NOTDIR | Errno::LOOP | Errno::ACCESS | Errno::NAMETOOLONG,
            ) => {}
            Err(Errno::XDEV) => return Err(refused(name, "")),
            Err(Errno::NOSYS) => {
                // One component at a time: any link on the way is refused.
                let mut walked = Vec::new();
                for part in dir.split(|b| *b == b'/') {
                    if !walked.is_empty() {
                        walked.push(b'/');
                    }
                    walked.extend_from_slice(part);
                    let at = std::ffi::OsStr::from_bytes(&walked);
                    match rustix::fs::statat(root_fd, at, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                            return Err(refused(
                                name,
                                " (or may: this kernel has no openat2 to tell)",
                            ))
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            }
            Err(e) => {
                return Err(GitError::io(
                    &format!("cannot look at {} in the work tree", shown_bytes(dir)),
                    e.into(),
                ))
            }
        }
    }
    Ok(())
}

/// The message for the repository of a submodule at `<name>/.git` in the
/// work tree, refused for `why`.
fn submodule_refused(name: &[u8], why: impl std::fmt::Display) -> GitError {
    GitError::repository(format!(
        "confined git refuses the repository: {}/.git in the work tree is the repository of \
         a submodule (or of a tracked path turned into a directory), which git status and git \
         diff read (its HEAD, refs and packed-refs, whatever --ignore-submodules says), and {why}",
        super::shown_bytes(name)
    ))
}

/// Vets the repositories git reads in the work tree: for every index
/// entry whose path is a directory (a gitlink's checked-out submodule, or
/// a tracked file turned into a directory), git looks for `<path>/.git`
/// (a directory, or a `gitdir:` file naming one) and resolves that
/// repository's `HEAD`, whatever `--ignore-submodules` says: reading its
/// `HEAD`, `commondir`, `config`, loose refs and `packed-refs`, whose
/// first line that does not parse it prints. So that repository must lie
/// beneath the root and hold none of what [`walk`] refuses where git reads:
/// a symbolic link at one of those files (a `packed-refs` linked to a host
/// file was printed), a FIFO, a `commondir`, a link beneath `refs` that
/// leads out of it or to a directory. Entries whose path is not a
/// directory, or is reached through a symbolic link (git never looks
/// through one), are passed over, as git passes them over.
fn vet_work_tree_repositories(root: &Path, names: &[Vec<u8>]) -> Result<(), GitError> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use rustix::io::Errno;
    use std::os::unix::ffi::OsStrExt;
    let root_fd = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| GitError::io("cannot open the root", e.into()))?;
    refuse_entries_beyond_links_out(&root_fd, names)?;
    let mut seen = 0usize;
    for name in names {
        if name.ends_with(b"/") {
            // A sparse directory entry: skip-worktree, never looked at.
            continue;
        }
        let path = std::ffi::OsStr::from_bytes(name);
        // Most entries are files: one look, then the careful walk for the
        // few directories.
        match rustix::fs::statat(&root_fd, path, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {}
            _ => continue,
        }
        // Component by component, never through a link (git's
        // has_symlink_leading_path and lstat pass such a path over).
        let mut dir: Option<OwnedFd> = None;
        let mut reached = true;
        for part in name.split(|b| *b == b'/') {
            let at = match &dir {
                Some(fd) => rustix::fs::openat(
                    fd,
                    std::ffi::OsStr::from_bytes(part),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ),
                None => rustix::fs::openat(
                    &root_fd,
                    std::ffi::OsStr::from_bytes(part),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ),
            };
            match at {
                Ok(fd) => dir = Some(fd),
                Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP | Errno::ACCESS) => {
                    reached = false;
                    break;
                }
                Err(e) => {
                    return Err(GitError::io(
                        &format!(
                            "cannot look at {} in the work tree",
                            super::shown_bytes(name)
                        ),
                        e.into(),
                    ))
                }
            }
        }
        let Some(dir) = dir.filter(|_| reached) else {
            continue;
        };
        let dot_git = Path::new(".git");
        let kind = match rustix::fs::statat(&dir, dot_git, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => FileType::from_raw_mode(st.st_mode),
            Err(Errno::NOENT) => continue,
            Err(e) => {
                return Err(GitError::io(
                    &format!("cannot look at {}/.git", super::shown_bytes(name)),
                    e.into(),
                ))
            }
        };
        let gitdir = match kind {
            FileType::Symlink => {
                return Err(submodule_refused(
                    name,
                    "it is a symbolic link, which git would follow anywhere",
                ))
            }
            FileType::Directory => open_dir(&dir, dot_git, dot_git)?,
            FileType::RegularFile => match gitfile_target(&root_fd, root, &dir, name)? {
                Some(fd) => fd,
                None => continue,
            },
            // git finds no repository there.
            _ => continue,
        };
        vet_gitdir(&gitdir, &mut seen).map_err(|e| submodule_refused(name, e))?;
    }
    Ok(())
}

/// The git directory the `gitdir:` file `<name>/.git` (in `dir`) names,
/// read as git reads it, opened beneath the root; `None` where git would
/// find no repository (not a `gitdir:` file, nothing there).
fn gitfile_target(
    root_fd: &OwnedFd,
    root: &Path,
    dir: &OwnedFd,
    name: &[u8],
) -> Result<Option<OwnedFd>, GitError> {
    use rustix::fs::OFlags;
    use rustix::io::Errno;
    use std::os::unix::ffi::OsStrExt;
    let Some((bytes, _)) = read_at(dir, Path::new(".git"), 64 * 1024)
        .map_err(|e| submodule_refused(name, e.message().to_owned()))?
    else {
        return Ok(None);
    };
    let Some(rest) = bytes.strip_prefix(b"gitdir: ") else {
        return Ok(None);
    };
    // git (`read_gitfile_gently`) strips the line breaks at the end of the
    // whole file, finds no path when nothing is left after `gitdir: `,
    // and then takes the path as a C string: it ends at the first NUL.
    // So `gitdir: fake\0` names `fake`, and `gitdir: \0` the directory
    // holding the `.git` file (before, such a file was passed over as
    // naming nothing, and git read the unvetted git directory it named).
    let mut end = rest.len();
    while end > 0 && matches!(rest[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let target = &rest[..end];
    if target.is_empty() {
        return Ok(None);
    }
    let target = match target.iter().position(|b| *b == 0) {
        Some(nul) => &target[..nul],
        None => target,
    };
    let target = Path::new(std::ffi::OsStr::from_bytes(target));
    let rel = if target.is_absolute() {
        match target.strip_prefix(root) {
            // The root itself: `openat2` would find no entry named "".
            Ok(rel) if rel.as_os_str().is_empty() => PathBuf::from("."),
            Ok(rel) => rel.to_path_buf(),
            Err(_) => {
                return Err(submodule_refused(
                    name,
                    "its `gitdir:` names a git directory outside the root, which is not vetted",
                ))
            }
        }
    } else {
        Path::new(std::ffi::OsStr::from_bytes(name)).join(target)
    };
    match openat2_beneath(
        root_fd,
        &rel,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        rustix::fs::ResolveFlags::empty(),
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
        Err(Errno::XDEV | Errno::LOOP) => Err(submodule_refused(
            name,
            "its `gitdir:` leads out of the root, to a git directory that is not vetted",
        )),
        Err(Errno::NOSYS) => Err(submodule_refused(
            name,
            "its `gitdir:` may lead out of the root (this kernel has no openat2 to tell)",
        )),
        Err(e) => Err(GitError::io(
            &format!(
                "cannot open the git directory {}/.git names",
                super::shown_bytes(name)
            ),
            e.into(),
        )),
    }
}

/// Vets a submodule's git directory (open as `gitdir`) for what git reads
/// of it to resolve its `HEAD`: `HEAD`, `config`, `config.worktree` and
/// `packed-refs` regular files (or absent), no `commondir`, and `refs` a
/// directory whose entries [`store`] admits. The reason, if refused.
fn vet_gitdir(gitdir: &OwnedFd, seen: &mut usize) -> Result<(), String> {
    use rustix::fs::{AtFlags, FileType};
    use rustix::io::Errno;
    let kind = |name: &str| match rustix::fs::statat(gitdir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(FileType::from_raw_mode(st.st_mode))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(format!("its {name} cannot be looked at ({e})")),
    };
    if kind("commondir")?.is_some() {
        return Err("it holds a commondir, which names a repository elsewhere".to_owned());
    }
    for name in ["HEAD", "config", "config.worktree", "packed-refs"] {
        match kind(name)? {
            None | Some(FileType::RegularFile) => {}
            Some(FileType::Symlink) => {
                return Err(format!(
                    "its {name} is a symbolic link, which git would follow (it prints the first \
                     line of a packed-refs that does not parse)"
                ))
            }
            Some(_) => return Err(format!("its {name} is not a regular file")),
        }
    }
    match kind("refs")? {
        None => Ok(()),
        Some(FileType::Directory) => {
            let refs = open_dir(gitdir, Path::new("refs"), Path::new("refs"))
                .map_err(|e| e.message().to_owned())?;
            store(gitdir, refs, Path::new("refs"), seen).map_err(|e| {
                let m = e.message();
                m.strip_prefix("confined git refuses the repository: ")
                    .unwrap_or(m)
                    .replacen(".git/", "", 1)
            })
        }
        Some(_) => Err("its refs is not a directory".to_owned()),
    }
}

/// Refuses a repository that borrows objects: `objects/info/alternates`
/// names object directories git reads as its own, anywhere on the host
/// (relative ones from `objects`), and each may name more in turn. A
/// commit there is one `git log -p <id>` away, so the repository is not
/// vetted by looking at `<root>/.git` alone. Blank lines and `#` comments,
/// which git skips, are admitted. (git never reads this file itself: its
/// private `objects/info` is empty; the refusal says why the repository
/// cannot be used as it is.)
fn refuse_alternates(info: &OwnedFd) -> Result<(), GitError> {
    let rel = Path::new("objects/info/alternates");
    let Some((bytes, _)) = read_at(info, rel, MAX_CONFIG_BYTES)? else {
        return Ok(());
    };
    if bytes
        .split(|&b| b == b'\n')
        .any(|line| !line.is_empty() && line[0] != b'#')
    {
        return Err(GitError::repository(
            "confined git refuses the repository: .git/objects/info/alternates borrows objects \
             from other directories (a shared or referenced clone), which are not vetted and \
             may lie outside the root",
        ));
    }
    Ok(())
}

/// What [`walk`] passes over in `.git`: never read by status, diff
/// or log through `GIT_DIR`, and some of it large (`lfs`, `annex`, `svn`,
/// `rr-cache`). (`modules` holds the submodules' repositories, which git
/// reaches through the work tree's `<path>/.git`: those it reads are
/// vetted by [`vet_work_tree_repositories`].)
const NOT_READ: &[&str] = &[
    "hooks",
    "lfs",
    "modules",
    "worktrees",
    "annex",
    "svn",
    "rr-cache",
];

/// The most entries of `.git` [`walk`] looks at.
const MAX_DOT_GIT_ENTRIES: usize = 10_000;

/// The message for `.git/<rel>`, a symbolic link where git reads.
fn link_refused(rel: &Path) -> GitError {
    GitError::repository(format!(
        "confined git refuses the repository: .git/{} is a symbolic link, and git \
         would read what it leads to (links are admitted only where status, diff and log \
         never read: hooks, lfs, modules, worktrees and the like, and beneath refs, logs \
         and objects but objects/info)",
        sandgate_codes::shown(rel)
    ))
}

/// The message for `.git/<rel>`, which is not a regular file.
fn kind_refused(rel: &Path, kind: rustix::fs::FileType) -> GitError {
    use rustix::fs::FileType;
    let what = match kind {
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Directory => "a directory",
        FileType::Socket => "a socket",
        _ => "not a regular file",
    };
    GitError::repository(format!(
        "confined git refuses the repository: .git/{} is {what}; only a regular file \
         can be vetted",
        sandgate_codes::shown(rel)
    ))
}

/// Walks `.git` (open as `dot_git`) into `snapshot`: every regular file
/// where git reads is read (the config files and the index up to their
/// own limits, the rest up to [`MAX_COPY_BYTES`] in all), `refs` and `logs`
/// and the entries of `objects` are named for linking.
///
/// Refused: a symbolic link where git reads (git follows it, and several
/// files it reads echo what they hold when they do not parse: every line of
/// `objects/info/alternates`, the first of `packed-refs` or `shallow`, the
/// words of `info/attributes`, the lines of `rebase-merge/done` in `git
/// status`: a link to a host file would show it to the caller), and any
/// entry that is neither a directory nor a regular file (a FIFO would hold
/// git until the timeout). Not looked into: [`NOT_READ`] (the hooks are
/// never run, and often linked; the rest is not read by status, diff or
/// log); `refs` and `logs` (git reads a linked loose ref without echoing
/// it) and `objects` (binary) must not be links themselves, nor the
/// entries of `objects`. A `.git` with more than [`MAX_DOT_GIT_ENTRIES`]
/// entries to look at is refused.
fn walk(dot_git: OwnedFd, snapshot: &mut Snapshot) -> Result<(), GitError> {
    use rustix::fs::FileType;
    let mut seen = 0usize;
    let mut stored = 0usize;
    let mut copied = 0u64;
    let git_fd = dot_git
        .try_clone()
        .map_err(|e| GitError::io("cannot read .git", e))?;
    let mut pending = Pending::new(dot_git, PathBuf::new());
    while let Some((dir, rel)) = pending.pop(&git_fd)? {
        for (name, kind) in list(&dir, &rel)? {
            seen += 1;
            if seen > MAX_DOT_GIT_ENTRIES {
                return Err(GitError::repository(format!(
                    "confined git refuses the repository: .git holds more than \
                     {MAX_DOT_GIT_ENTRIES} entries outside objects, refs, logs and hooks, too \
                     many to vet"
                )));
            }
            let top = rel.as_os_str().is_empty();
            let path = rel.join(&name);
            // Matched as text, but opened by its own bytes: the lossy
            // spelling of a name that is not UTF-8 is another entry's
            // name (or none), which was looked into in its stead.
            let text = name.to_str().unwrap_or_default();
            if top && NOT_READ.contains(&text) {
                continue;
            }
            if kind == FileType::Symlink {
                return Err(link_refused(&path));
            }
            if kind == FileType::Directory {
                match (top, text) {
                    (true, "refs" | "logs") => {
                        let sub = open_dir(&dir, Path::new(&name), &path)?;
                        store(&git_fd, sub, &path, &mut stored)?;
                        snapshot.linked.push(path);
                    }
                    (true, "objects") => {
                        let sub = open_dir(&dir, Path::new(&name), &path)?;
                        objects(&git_fd, sub, snapshot, &mut stored)?
                    }
                    _ => {
                        snapshot.dirs.push(path.clone());
                        pending.push(&dir, Path::new(&name), path)?;
                    }
                }
                continue;
            }
            let (max, counted) = match path.to_str() {
                Some("config" | "config.worktree") => (MAX_CONFIG_BYTES, false),
                Some("index") => (super::index::MAX_INDEX_BYTES, false),
                _ => (MAX_COPY_BYTES, true),
            };
            let Some((bytes, mtime)) = read_at(&dir, &path, max)? else {
                continue;
            };
            if counted {
                copied += bytes.len() as u64;
                if copied > MAX_COPY_BYTES {
                    return Err(GitError::repository(format!(
                        "confined git refuses the repository: the files git reads in .git \
                         (packed-refs, HEAD, info and the like, but the config and the index) \
                         hold over {MAX_COPY_BYTES} bytes, too many to copy"
                    )));
                }
            }
            snapshot.files.push((path, bytes, mtime));
        }
    }
    Ok(())
}

/// The entries of `objects` (open as `dir`): `info` is vetted for
/// alternates, every other entry named for linking and looked into by
/// [`store`]; none may be a link.
fn objects(
    git: &OwnedFd,
    dir: OwnedFd,
    snapshot: &mut Snapshot,
    stored: &mut usize,
) -> Result<(), GitError> {
    use rustix::fs::FileType;
    let rel = Path::new("objects");
    for (name, kind) in list(&dir, rel)? {
        let path = rel.join(&name);
        match kind {
            FileType::Symlink => return Err(link_refused(&path)),
            FileType::Directory if name == "info" => {
                refuse_alternates(&open_dir(&dir, Path::new("info"), &path)?)?;
                continue;
            }
            FileType::Directory => {
                store(git, open_dir(&dir, Path::new(&name), &path)?, &path, stored)?
            }
            FileType::RegularFile => {}
            kind => return Err(special_refused(&path, kind)),
        }
        snapshot.objects.push(PathBuf::from(name));
    }
    Ok(())
}

/// The most entries of `refs`, `logs` and the directories in `objects`
/// [`store`] looks at (their names and kinds, as the directories list
/// them: loose refs and objects are many, and cheap to list).
const MAX_STORE_ENTRIES: usize = 1_000_000;

/// The message for `.git/<rel>`, a FIFO, socket or device where git reads
/// (through a link, if `rel` is one).
fn special_refused(rel: &Path, kind: rustix::fs::FileType) -> GitError {
    let what = match kind {
        rustix::fs::FileType::Fifo => "a FIFO",
        rustix::fs::FileType::Socket => "a socket",
        _ => "a device",
    };
    GitError::repository(format!(
        "confined git refuses the repository: .git/{} is {what} (or a link to one), which \
         would hold git until the timeout (git opens what it reads blocking) or answer it \
         anything; only regular files and directories are read",
        sandgate_codes::shown(rel)
    ))
}

/// The message for `.git/<rel>`, a symbolic link beneath `refs`, `logs` or
/// a directory of `objects` that leads to a directory.
fn dir_link_refused(rel: &Path) -> GitError {
    GitError::repository(format!(
        "confined git refuses the repository: .git/{} is a symbolic link to a directory, and \
         git would read the refs, reflogs or objects beneath it from a directory that is not \
         vetted (such as hooks or objects/info, whose entries may lead anywhere); git never \
         makes such a link, only links to a file (old-style symbolic refs) are admitted there",
        sandgate_codes::shown(rel)
    ))
}

/// Looks through `dir` (`.git/<rel>`: `refs`, `logs`, a directory in
/// `objects`), which git reads through a link to it, for what would hold
/// git: a FIFO, socket or device, or a link to one (links to a file are
/// admitted there: git reads a linked loose ref without echoing it; a
/// link to a directory is refused, since git would read what lies beneath
/// it, which this look does not go into). git opens a
/// loose ref, a reflog, a pack or a loose object blocking, and a FIFO
/// held it until the timeout. More than [`MAX_STORE_ENTRIES`] entries in
/// all are refused. (One put there after this look still holds git until
/// the timeout.)
fn store(git: &OwnedFd, dir: OwnedFd, rel: &Path, seen: &mut usize) -> Result<(), GitError> {
    use rustix::fs::FileType;
    let mut pending = Pending::new(dir, rel.to_path_buf());
    while let Some((dir, rel)) = pending.pop(git)? {
        for (name, kind) in list(&dir, &rel)? {
            *seen += 1;
            if *seen > MAX_STORE_ENTRIES {
                return Err(GitError::repository(format!(
                    "confined git refuses the repository: .git/refs, logs and objects hold \
                     more than {MAX_STORE_ENTRIES} entries, too many to vet"
                )));
            }
            let path = rel.join(&name);
            let kind = match kind {
                // Judged by what it leads to; a dangling link is harmless.
                FileType::Symlink => {
                    stays_in_dot_git(git, &path)?;
                    match rustix::fs::statat(&dir, name.as_os_str(), rustix::fs::AtFlags::empty()) {
                        // git reads the loose refs (reflogs) beneath it, in a
                        // directory this look never goes into: `hooks` or
                        // `objects/info`, whose entries may be links to
                        // anywhere or FIFOs.
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                            return Err(dir_link_refused(&path))
                        }
                        Ok(st) => FileType::from_raw_mode(st.st_mode),
                        Err(_) => FileType::RegularFile,
                    }
                }
                kind => kind,
            };
            match kind {
                FileType::Directory => pending.push(&dir, Path::new(&name), path)?,
                FileType::RegularFile => {}
                kind => return Err(special_refused(&path, kind)),
            }
        }
    }
    Ok(())
}

/// The most directories [`walk`] and [`store`] hold open while they wait
/// to be looked into.
const HELD: usize = 64;

/// The directories [`walk`] or [`store`] has yet to look into, last found
/// first: the first [`HELD`] of them open, the rest named by their path
/// beneath `.git` and opened when their turn comes. A descriptor for each
/// (a `refs/heads` of a thousand `user/topic` directories, or a chain with
/// a sibling at each level) exhausted the process's descriptors, which
/// failed the vetting with EMFILE and, meanwhile, every other open of the
/// host.
struct Pending {
    dirs: Vec<(Option<OwnedFd>, PathBuf)>,
    held: usize,
}

impl Pending {
    fn new(dir: OwnedFd, rel: PathBuf) -> Pending {
        Pending {
            dirs: vec![(Some(dir), rel)],
            held: 1,
        }
    }

    /// Adds the directory `name` of `dir`, `.git/<rel>`.
    fn push(&mut self, dir: &OwnedFd, name: &Path, rel: PathBuf) -> Result<(), GitError> {
        if self.held < HELD {
            self.dirs.push((Some(open_dir(dir, name, &rel)?), rel));
            self.held += 1;
        } else {
            self.dirs.push((None, rel));
        }
        Ok(())
    }

    /// The next directory, open; one not held is opened beneath `git`
    /// (`.git`) through its path, no link followed.
    fn pop(&mut self, git: &OwnedFd) -> Result<Option<(OwnedFd, PathBuf)>, GitError> {
        let Some((dir, rel)) = self.dirs.pop() else {
            return Ok(None);
        };
        let dir = match dir {
            Some(dir) => {
                self.held -= 1;
                dir
            }
            None => reopen(git, &rel)?,
        };
        Ok(Some((dir, rel)))
    }
}

/// The directory `.git/<rel>` opened beneath `git` with no link followed
/// on the way: in one `openat2` where the kernel has it, else (and for a
/// path too long for it) one component at a time.
fn reopen(git: &OwnedFd, rel: &Path) -> Result<OwnedFd, GitError> {
    use rustix::fs::{OFlags, ResolveFlags};
    use rustix::io::Errno;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match openat2_beneath(git, rel, flags, ResolveFlags::NO_SYMLINKS) {
        Ok(fd) => return Ok(fd),
        // No `openat2`, a path too long for it, or renames racing it past
        // the tries: one component at a time.
        Err(Errno::NOSYS | Errno::PERM | Errno::NAMETOOLONG | Errno::AGAIN) => {}
        Err(e) => return Err(open_dir_failed(rel, e)),
    }
    let mut dir = git
        .try_clone()
        .map_err(|e| GitError::io("cannot read .git", e))?;
    let mut walked = PathBuf::new();
    for part in rel.iter() {
        walked.push(part);
        dir = open_dir(&dir, Path::new(part), &walked)?;
    }
    Ok(dir)
}

/// Refuses the link `.git/<rel>` (beneath `refs`, `logs` or a directory
/// of `objects`) unless it leads to something inside `.git` (open as
/// `git`), every link on the way resolved beneath it: git follows such a
/// link, and one to another repository's pack, loose object or ref had
/// git read that repository as its own (a commit of it one `git log -p`
/// away, as through `objects/info/alternates`). An absolute link, or one
/// that climbs out, is refused, wherever it leads; a dangling link that
/// would stay inside is harmless. Where the kernel has no `openat2`, every
/// such link is refused.
fn stays_in_dot_git(git: &OwnedFd, rel: &Path) -> Result<(), GitError> {
    use rustix::fs::OFlags;
    use rustix::io::Errno;
    let resolved = openat2_beneath(
        git,
        rel,
        OFlags::PATH | OFlags::CLOEXEC,
        rustix::fs::ResolveFlags::empty(),
    );
    match resolved {
        Ok(_) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(GitError::repository(format!(
            "confined git refuses the repository: .git/{} is a symbolic link that leads out \
             of .git{}, and git would read what it leads to as this repository's own (another \
             repository's objects or refs); only links that stay inside .git are admitted there",
            sandgate_codes::shown(rel),
            match e {
                Errno::XDEV | Errno::LOOP => String::new(),
                Errno::NOSYS => " (or may: this kernel has no openat2 to tell)".to_owned(),
                e => format!(" (or may: it could not be resolved, {e})"),
            }
        ))),
    }
}

/// How many times a resolution that raced with a rename is tried.
const EAGAIN_RETRIES: usize = 64;

/// `path` opened beneath `dir` (`RESOLVE_BENEATH`, no magic links, and
/// the `extra` resolve flags). The kernel answers `EAGAIN` when a rename
/// or mount anywhere on the host raced with a `..` step; that says
/// nothing of where the path leads, so the resolution is tried again (a
/// host renaming without pause could still exhaust the tries: then the
/// caller refuses, as for any error).
fn openat2_beneath(
    dir: &OwnedFd,
    path: &Path,
    flags: rustix::fs::OFlags,
    extra: rustix::fs::ResolveFlags,
) -> rustix::io::Result<OwnedFd> {
    use rustix::fs::{Mode, ResolveFlags};
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(
            dir,
            path,
            flags,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | extra,
        ) {
            Err(rustix::io::Errno::AGAIN) if tries < EAGAIN_RETRIES => tries += 1,
            other => return other,
        }
    }
}

/// The entries of `dir` (`.git/<rel>`), but `.` and `..`, with their kinds
/// (a link not followed).
fn list(dir: &OwnedFd, rel: &Path) -> Result<Vec<(OsString, rustix::fs::FileType)>, GitError> {
    use std::os::unix::ffi::OsStrExt;
    let failed = |e: rustix::io::Errno| {
        GitError::io(
            &format!("cannot read .git/{}", sandgate_codes::shown(rel)),
            e.into(),
        )
    };
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let mut kind = entry.file_type();
        if kind == rustix::fs::FileType::Unknown {
            let st = rustix::fs::statat(
                dir,
                entry.file_name(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(failed)?;
            kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
        }
        out.push((std::ffi::OsStr::from_bytes(name).to_owned(), kind));
    }
    Ok(out)
}

/// Opens the directory `name` beneath `dir` without following a link;
/// `rel` names it in messages.
fn open_dir<Fd: std::os::fd::AsFd>(dir: Fd, name: &Path, rel: &Path) -> Result<OwnedFd, GitError> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| open_dir_failed(rel, e))
}

/// The error of a directory `.git/<rel>` that could not be opened.
fn open_dir_failed(rel: &Path, e: rustix::io::Errno) -> GitError {
    match e {
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR | rustix::io::Errno::XDEV => {
            GitError::repository(format!(
                "confined git refuses the repository: .git/{} changed while it was vetted",
                sandgate_codes::shown(rel)
            ))
        }
        e => GitError::io(
            &format!("cannot read .git/{}", sandgate_codes::shown(rel)),
            e.into(),
        ),
    }
}

/// The bytes of the file named by `rel`'s last component in `dir` (at most
/// `max`), `None` when it does not exist. The file must be a regular file,
/// not a symbolic link and not a FIFO or device (which could answer the
/// vetting and git differently, or never answer); it is opened without
/// following links and without blocking, and checked on the open
/// descriptor. With the bytes, the file's modification time.
fn read_at(
    dir: &OwnedFd,
    rel: &Path,
    max: u64,
) -> Result<Option<(Vec<u8>, std::time::SystemTime)>, GitError> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::io::Read;
    let name = rel.file_name().unwrap_or(rel.as_os_str());
    let shown = || sandgate_codes::shown(rel);
    let fd = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => return Err(kind_refused(rel, FileType::Symlink)),
        Err(e) => {
            return Err(GitError::io(
                &format!("cannot read .git/{}", shown()),
                e.into(),
            ))
        }
    };
    let st = rustix::fs::fstat(&fd)
        .map_err(|e| GitError::io(&format!("cannot read .git/{}", shown()), e.into()))?;
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind != FileType::RegularFile {
        return Err(kind_refused(rel, kind));
    }
    let file = std::fs::File::from(fd);
    let mtime = file
        .metadata()
        .and_then(|m| m.modified())
        .map_err(|e| GitError::io(&format!("cannot read .git/{}", shown()), e))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| GitError::io(&format!("cannot read .git/{}", shown()), e))?;
    if bytes.len() as u64 > max {
        return Err(GitError::repository(format!(
            "confined git refuses the repository: .git/{} is over {max} bytes",
            shown()
        )));
    }
    Ok(Some((bytes, mtime)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(s: &str) -> Option<Vec<Entry>> {
        ConfigParser::entries(s.as_bytes())
    }

    #[test]
    fn config_parser_reads_git_syntax() {
        let e = entries(
            "[core]\n\tbare = false # c \\\n[filter \"Ev\\\"il\"] clean = \"a;b\" \\\n  more\n\
             [Filter.LEGACY]\nsmudge\n; [include]\n",
        )
        .unwrap();
        let filters: Vec<_> = e
            .iter()
            .filter(|(s, _, _)| s == "filter")
            .filter_map(|(_, sub, _)| sub.clone())
            .collect();
        assert!(filters.contains(&b"Ev\"il".to_vec()));
        assert!(filters.contains(&b"legacy".to_vec()));
        let e = entries("[filter.A \"B\"]\n\tclean = x\n").unwrap();
        assert!(e.contains(&("filter".into(), Some(b"a.B".to_vec()), "clean".into())));
        assert!(!e.iter().any(|(s, _, _)| s == "include"));
        // A continued value hides a would-be header.
        let e = entries("[core]\n x = a \\\n[include]\n").unwrap();
        assert!(!e.iter().any(|(s, _, _)| s == "include"));
        // Two headers on one line.
        let e = entries("[core] [include] path = x\n").unwrap();
        assert!(e.iter().any(|(s, _, _)| s == "include"));
        assert!(entries("[core\n").is_none());
        assert!(entries("[core]\n x = \"open\n").is_none());
        assert!(entries("x = 1\n").is_none());
    }

    #[test]
    fn the_object_format_is_read_as_git_decodes_it() {
        let format = |s: &[u8]| ConfigParser::parse(s).unwrap().1;
        assert_eq!(
            format(b"[extensions]\n\tobjectFormat = \"sha\\\n256\" ; c\n"),
            Some(Some(b"sha256".to_vec()))
        );
        assert_eq!(
            format(b"[Extensions]\nobjectformat = sha1\nobjectformat=  sha256 \t\n"),
            Some(Some(b"sha256".to_vec()))
        );
        assert_eq!(
            format(b"[extensions]\nobjectformat = a \tb # c\n"),
            Some(Some(b"a  b".to_vec()))
        );
        assert_eq!(format(b"[extensions]\nobjectformat\n"), Some(None));
        assert_eq!(format(b"[extensions \"x\"]\nobjectformat = sha256\n"), None);
    }

    #[test]
    fn subsections_keep_their_bytes() {
        let e = ConfigParser::entries(b"[filter \"\xff\\\xfe\"]\n\tclean = x\n").unwrap();
        assert_eq!(
            e[1],
            ("filter".into(), Some(b"\xff\xfe".to_vec()), "clean".into())
        );
        let mut config = RepoConfig::default();
        scan_config(b"[filter \"\xff\"]\n\tclean = x\n", &mut config).unwrap();
        assert!(config.filters.contains(b"\xff".as_slice()));
        for bad in [&b"[filter \"a=\xff\"]\n"[..], b"[filter \"\"]\n"] {
            let err = scan_config(bad, &mut RepoConfig::default()).unwrap_err();
            assert!(err.message().contains("byte for byte"), "{err}");
        }
        let err = scan_config(b"[filter \"a=\xff\"]\n", &mut RepoConfig::default()).unwrap_err();
        assert!(err.message().contains("`a=\\xff`"), "{err}");
    }
}
