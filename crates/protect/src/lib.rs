//! Deny-write patterns for a shell, enforced after the fact.
//!
//! A shell command cannot be asked before each write whether a path is
//! protected, so this crate checks afterwards. Before a command,
//! [`Protector::begin`] records every *protected entry* beneath the write
//! root — every entry a deny-write pattern matches, every symbolic link at
//! a name beneath which a pattern could match what it would not match
//! beneath the link's target (`.claude` under `.claude/settings.json`,
//! `secrets` under `**/secrets/*.json`), or, in restricted mode,
//! every `.git` component and what is beneath it — with its identity
//! (device and inode), metadata (type, mode, owner, link count, size,
//! times), a copy of its content when it is a small file, and its target
//! when it is a symlink. It also records every directory beneath the root,
//! with its ctime. After the command, with every process it started dead,
//! [`Checkpoint::settle`] finds what changed and undoes it:
//!
//! - a protected entry that was changed, replaced or removed is restored
//!   from the record: what the command left at its name is moved to the
//!   quarantine first (nothing is deleted), then the recorded file, symlink
//!   or directory is created under a temporary name, given its mode, owner
//!   and times, and renamed into place;
//! - a protected directory, or a directory that holds protected entries,
//!   that was renamed elsewhere beneath the root is renamed back (found by
//!   its inode);
//! - a new protected entry (`touch x.lock`, `mkdir .github`, a nested
//!   `git init` in restricted mode, or a symbolic link at such a name,
//!   `ln -s mine .claude`) is moved
//!   into the quarantine;
//! - a directory the command made and left without read or search
//!   permission for the host (`chmod 000 d`) gets the owner's permissions,
//!   so that it is searched like any other it made;
//! - a directory without write permission for the host (kept read-only
//!   by the host, or made so by the command) is given the owner's write
//!   permission for the time it takes to move an entry out of it or into
//!   it, then its mode back;
//! - immutable and append-only flags (`chattr +i`, `+a`, which a command
//!   run as root with `confine = "off"`, or another process, can set) come off what goes to the quarantine, and off a
//!   directory only while an entry is moved out of it or into it;
//! - a recorded directory that lost a read, search or write permission it
//!   had (`chmod 000 pkg`) gets its recorded permissions back first:
//!   otherwise a host that is not root could neither list it nor move
//!   entries out of it, and what the command left in it would be taken
//!   into the next record;
//! - each of these is reported as a [`Change`].
//!
//! # Finding what changed
//!
//! Only directories that may have changed are read again, both when the
//! record is brought up to date and when a command is checked. Which ones,
//! the kernel says ([`Detection::Inotify`]): each root has one inotify
//! instance, shared by all its protectors, with a watch on every directory
//! beneath the root, added before the directory is listed (through
//! `/proc/self/fd`, so on the very directory opened, never on a path a
//! symlink could redirect). Events are read without blocking, under the
//! root's lock, and name the directories to read again; a directory the
//! record takes in gets its watch then (one a command made is searched
//! whole by the check that follows that command). Writes to files are not
//! watched: protected entries are compared one by one every time, since a
//! write through a hard link in another directory, or through a shared
//! mapping, changes a protected file without an event on its directory.
//!
//! When inotify cannot be trusted, the root falls back, for as long as its
//! protectors live, to the ctime walk ([`Detection::CtimeWalk`]): every
//! recorded directory's ctime is compared with the record, and those whose
//! ctime moved are read again, with an allowance for the filesystem's
//! timestamp granularity. That happens when the instance cannot be made
//! (`max_user_instances`, descriptors), a watch cannot be added
//! (`max_user_watches`, no `/proc`), the event queue overflows
//! (`max_queued_events`: the events after the overflow are lost), the
//! kernel drops a watch for another reason than its directory's deletion,
//! or a watched filesystem is unmounted. The ctime walk is as strict (every
//! change since the record began moved a ctime), only slower: one `lstat`
//! of every directory per check. [`DETECTION_ENV`] forces it, for tests.
//!
//! ctime cannot be set by a process (`touch -d` sets mtime and atime, and
//! moves ctime to now); protected entries are compared one by one on it,
//! and a small file whose ctime falls within the granularity allowance of
//! the record has its content compared too.
//!
//! The host process's descriptor budget: one inotify descriptor per
//! protected write root (close-on-exec, so no command inherits it), and
//! one watch per directory beneath it, counted against the user's
//! `fs.inotify.max_user_watches`.
//!
//! Every directory is opened beneath the root one component at a time
//! without following symlinks (`O_NOFOLLOW | O_DIRECTORY`), and every
//! rename goes through [`sandgate_rootfs::Root`] between those
//! descriptors, so a symlink the command planted cannot redirect a
//! restore.
//!
//! # The quarantine
//!
//! `<parent>/.<rootname>.sandgate-quarantine/<time>-<pid>/<path>` beside
//! the write root, or, when that directory cannot be made there (no
//! permission, another filesystem), `.sandgate-quarantine/<time>-<pid>/`
//! inside the root, made without following symlinks; when a command left
//! something there that cannot be used as that directory,
//! `.sandgate-quarantine-<time>-<pid>/` inside the root.
//!
//! # Serialization and attribution
//!
//! All protectors of one write root in a process share one lock and one
//! count of running commands. The record is brought up to date (accepting
//! whatever changed since, as the host's own doing) only when no command
//! on that root is running; a settle reverts every change since the record.
//! So a change the host makes to a protected entry *while* a command runs
//! on that root cannot be told from the command's and is undone, and with
//! two commands running on one root, the first to end reports (and undoes)
//! the changes of both.
//!
//! Records are kept per process, so processes take turns on a root: from
//! the first `begin` of a process on it to the settle of its last running
//! command, the root directory is held with an exclusive `flock` (on a
//! descriptor of its own, close-on-exec), and another process's `begin`
//! waits for it. Otherwise a record taken in one process while another's
//! command ran would take that command's changes for the host's, and the
//! settle against it would put them back after the other process undid
//! them.
//!
//! # Limits
//!
//! - One settle reads at most [`MAX_SETTLE_ENTRIES`] directory entries,
//!   one at a time (memory does not grow with them); past it, it stops
//!   and reports so (a [`Change`] at `.`, [`Action::Reported`]): new
//!   protected entries and renames among the entries not read are not
//!   found, while the recorded protected entries are still compared and
//!   restored.
//! - The record's update before the next command reads at most as many
//!   (a command that left millions of entries would otherwise hold up the
//!   next one); past it, the entries not read are not recorded, a change
//!   to a protected entry among them is not undone, and every settle
//!   against that record says so (a [`Change`] at `.`,
//!   [`Action::Reported`]). The directories it did not finish are read
//!   again by the next update.
//! - A regular file larger than [`MAX_COPY_BYTES`], or past
//!   [`MAX_TOTAL_COPY_BYTES`] of copies per root, is recorded by identity
//!   and metadata only: a change to it is reported
//!   ([`Action::Reported`]), and it is restored only when renamed away
//!   and found again by its inode. The same holds for protected fifos,
//!   sockets and devices.
//! - A saved copy longer than the process's file size limit (`ulimit -f`)
//!   is not written back (the write would raise `SIGXFSZ`, which ends the
//!   program embedding the library): the change is reported
//!   ([`Action::Reported`]) and what the command left stays in place.
//! - A change made within one timestamp tick of the record to a large file
//!   that keeps its size, ctime and mtime is not seen (small files are
//!   compared by content).
//! - A protected file's other hard links (made before the record) are
//!   outside the walk; writes through them change the recorded file and
//!   are undone, but the other names keep the new content.
//! - Watches see what this kernel does to the root's directories. A change
//!   that does not pass through it (another machine writing to a network
//!   filesystem the root is on) makes no event, and is not seen while the
//!   root is watched.

#![cfg(target_os = "linux")]

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{self as rfs, AtFlags, Dir, FileType, Mode, OFlags, Stat, Timestamps};
use rustix::io::Errno;
use sandgate_fileguard::Guard;
use sandgate_rootfs::{RenameMode, Resolver, Root};

/// How a root's protection finds the directories a command changed
/// ([`Protector::detection`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detection {
    /// Not decided yet: no command has begun on this root.
    Pending,
    /// An inotify instance watches every directory beneath the root; only
    /// directories with events are read again.
    Inotify,
    /// Every recorded directory's ctime is compared, and those whose ctime
    /// moved are read again; the reason inotify is not used is given.
    CtimeWalk(&'static str),
}

impl fmt::Display for Detection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Detection::Pending => f.write_str("pending"),
            Detection::Inotify => f.write_str("inotify"),
            Detection::CtimeWalk(why) => write!(f, "ctime walk ({why})"),
        }
    }
}

/// The environment variable that, set to `ctime` when a root's protection
/// starts, makes it use the ctime walk instead of inotify. Meant for tests
/// of the fallback; the ctime walk is as strict, only slower.
pub const DETECTION_ENV: &str = "SANDGATE_PROTECT_DETECTION";

/// The most events one drain reads before it stops trusting the queue (a
/// producer outpacing the reader).
const MAX_DRAIN_EVENTS: usize = 1 << 20;

/// Events that change a directory's listing or its own metadata. Writes to
/// files (`IN_MODIFY`, `IN_CLOSE_WRITE`) are left out: they do not change a
/// listing, protected entries are compared one by one anyway, and they
/// would fill the queue fastest.
const WATCH_FLAGS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR);

/// The inotify instance of one root, shared by all its records.
struct Watcher {
    fd: OwnedFd,
    /// Where each watched directory was listed beneath the root: one name,
    /// or several when one directory is reached under more than one (a bind
    /// mount of it beneath the root: one inode, one watch). An event names
    /// them all, so that a change made through one name is not looked for
    /// under another only.
    paths: HashMap<i32, Vec<Vec<u8>>>,
    /// Watches whose directory was deleted: their `IN_IGNORED` is expected.
    deleted: HashSet<i32>,
}

enum WatchState {
    /// Not tried yet.
    Unset,
    On(Watcher),
    Off(&'static str),
}

impl WatchState {
    fn start(&mut self) {
        if !matches!(self, WatchState::Unset) {
            return;
        }
        if std::env::var_os(DETECTION_ENV).is_some_and(|v| v == "ctime") {
            *self = WatchState::Off("forced by SANDGATE_PROTECT_DETECTION");
            return;
        }
        *self = match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
            Ok(fd) => WatchState::On(Watcher {
                fd,
                paths: HashMap::new(),
                deleted: HashSet::new(),
            }),
            Err(Errno::MFILE) | Err(Errno::NFILE) => {
                WatchState::Off("no inotify instance left (max_user_instances or descriptors)")
            }
            Err(_) => WatchState::Off("inotify unavailable"),
        };
    }

    fn is_on(&self) -> bool {
        matches!(self, WatchState::On(_))
    }

    fn detection(&self) -> Detection {
        match self {
            WatchState::Unset => Detection::Pending,
            WatchState::On(_) => Detection::Inotify,
            WatchState::Off(why) => Detection::CtimeWalk(why),
        }
    }

    /// Watches the directory open as `fd`, listed as `rel` beneath `root`,
    /// before it is listed. The watch is added through `/proc/self/fd`, so
    /// it is on the very directory open (a path could be redirected
    /// meanwhile). A name the directory was listed under before stays with
    /// the watch only while it still names that directory (a bind mount);
    /// one it was renamed from goes. A failure ends watching for the root.
    fn watch(&mut self, root: BorrowedFd<'_>, fd: &OwnedFd, rel: &[u8]) {
        let WatchState::On(w) = self else { return };
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match inotify::add_watch(&w.fd, path.as_str(), WATCH_FLAGS) {
            Ok(wd) => {
                w.deleted.remove(&wd);
                let names = w.paths.entry(wd).or_default();
                if !names.iter().any(|p| p.as_slice() == rel) {
                    let id = rfs::fstat(fd).ok().map(|s| (s.st_dev, s.st_ino));
                    names.retain(|p| lstat(root, p).ok().map(|s| (s.st_dev, s.st_ino)) == id);
                    names.push(rel.to_vec());
                }
            }
            Err(Errno::NOSPC) => {
                *self = WatchState::Off("inotify watches exhausted (max_user_watches)")
            }
            Err(Errno::NOENT) => *self = WatchState::Off("/proc/self/fd unavailable"),
            Err(_) => *self = WatchState::Off("an inotify watch could not be added"),
        }
    }

    /// Reads every queued event without blocking; answers the directories
    /// they concern (where each was last listed). An overflowed queue, a
    /// watch the kernel dropped for another reason than its directory's
    /// deletion, or an unmount ends watching for the root: the caller then
    /// uses the ctime walk.
    fn drain(&mut self) -> BTreeSet<Vec<u8>> {
        let mut dirty = BTreeSet::new();
        let WatchState::On(w) = self else {
            return dirty;
        };
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16384];
        let mut reader = inotify::Reader::new(&w.fd, &mut buf);
        let mut n = 0usize;
        let mut broken = None;
        loop {
            let ev = match reader.next() {
                Ok(ev) => ev,
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(_) => {
                    broken = Some("the inotify queue could not be read");
                    break;
                }
            };
            n += 1;
            if n > MAX_DRAIN_EVENTS {
                broken = Some("too many inotify events to read");
                break;
            }
            let flags = ev.events();
            let wd = ev.wd();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                broken = Some("the inotify queue overflowed");
                break;
            }
            if flags.contains(ReadFlags::UNMOUNT) {
                broken = Some("a watched filesystem was unmounted");
                break;
            }
            if flags.contains(ReadFlags::IGNORED) {
                if w.deleted.remove(&wd) {
                    w.paths.remove(&wd);
                    continue;
                }
                broken = Some("the kernel dropped an inotify watch");
                break;
            }
            if flags.contains(ReadFlags::DELETE_SELF) {
                w.deleted.insert(wd);
            }
            for p in w.paths.get(&wd).into_iter().flatten() {
                if !dirty.contains(p) {
                    dirty.insert(p.clone());
                }
            }
        }
        if let Some(why) = broken {
            *self = WatchState::Off(why);
            dirty.clear();
        }
        dirty
    }
}

/// The largest regular file whose content is copied into the record.
pub const MAX_COPY_BYTES: u64 = 1 << 20;

/// The most bytes of content copied for one write root, all files together.
pub const MAX_TOTAL_COPY_BYTES: u64 = 64 << 20;

/// How far before the record began a ctime still counts as "moved since":
/// the coarse clock inode times are stamped from may lag by a tick.
pub const GRANULARITY_NS: i128 = 20_000_000;

/// The most directory entries one settle reads, in the directories it
/// reads again and in those the command made, all together. Past it the
/// settle stops looking (a command can make millions of entries, which
/// would make the check's time without bound) and says so with a
/// [`Change`] at `.`, [`Action::Reported`], whose `pattern` names the
/// bound: changes among the entries not read are neither undone nor
/// reported one by one. The recorded protected entries are still compared
/// and restored (that does not read directories). The record's update
/// before the next command reads at most as many, in the directories that
/// changed since.
pub const MAX_SETTLE_ENTRIES: usize = 1_000_000;

/// What was done about one protected entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Put back as recorded (content, mode, owner, times, or a directory
    /// renamed back); what the command left there is in the quarantine.
    Restored,
    /// A new protected entry, moved into the quarantine.
    Quarantined,
    /// Changed, and could not be undone (see the crate's limits).
    Reported,
}

impl Action {
    /// `restored`, `quarantined` or `reported`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Restored => "restored",
            Action::Quarantined => "quarantined",
            Action::Reported => "reported",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One protected entry a command changed, and what was done about it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Change {
    /// The entry's path beneath the write root.
    pub path: String,
    /// The pattern that protects it, as written (restricted mode's `.git`
    /// rule is [`sandgate_fileguard::GIT_RULE`]).
    pub pattern: String,
    /// What was done.
    pub action: Action,
}

/// The protection of one write root under one set of patterns. Cheap to
/// share; every protector of the same root directory (by device and
/// inode) in this process shares one lock.
pub struct Protector {
    root: Root,
    guard: Guard,
    guard_key: String,
    /// The root's device and inode: its key in the registry.
    key: (u64, u64),
    shared: Arc<Common>,
    quarantine: Quarantine,
    /// Directories kept in existence beneath the root
    /// ([`set_placeholders`](Protector::set_placeholders)).
    placeholders: Mutex<Vec<PathBuf>>,
    /// The most entries one settle reads ([`MAX_SETTLE_ENTRIES`]).
    entry_cap: usize,
}

impl Drop for Protector {
    /// The last protector of a root takes its entry out of the registry
    /// (and the registry's table goes once it is empty), so that opening
    /// and dropping protectors of many roots leaves nothing behind.
    fn drop(&mut self) {
        {
            // The last protector of a set of patterns takes its record
            // along: no begin refreshes it any more.
            let mut shared = lock(&self.shared.state);
            let gone = shared
                .guards
                .get_mut(&self.guard_key)
                .is_some_and(|(_, holders)| {
                    *holders -= 1;
                    *holders == 0
                });
            if gone {
                shared.guards.remove(&self.guard_key);
                shared.records.remove(&self.guard_key);
            }
        }
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        // Under the registry's lock no other strong reference can appear:
        // new ones are made only by upgrading the registry's entry.
        if Arc::strong_count(&self.shared) == 1 {
            let ours = reg
                .get(&self.key)
                .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&self.shared)));
            if ours {
                reg.remove(&self.key);
            }
        }
        reg.retain(|_, w| w.strong_count() > 0);
        if reg.is_empty() {
            reg.shrink_to_fit();
        }
    }
}

impl fmt::Debug for Protector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Protector")
            .field("root", &self.root.name())
            .field("guard", &self.guard)
            .finish()
    }
}

/// What all protectors of one root share: the state, and the condition a
/// first command under a set of patterns without a record waits on (no
/// command running on the root).
#[derive(Default)]
struct Common {
    state: Mutex<Shared>,
    idle: Condvar,
}

/// What all protectors of one root share, under their lock.
struct Shared {
    /// Commands on this root between `begin` and `settle`.
    active: usize,
    /// One record per set of patterns.
    records: HashMap<String, Record>,
    /// Each set of patterns of a live protector of this root, and how many
    /// protectors hold it: every record is brought up to date whenever
    /// one is (while no command runs), with its own patterns.
    guards: HashMap<String, (Guard, usize)>,
    /// The root's inotify instance, or why there is none.
    watch: WatchState,
    /// The root directory opened anew and locked (`flock`, exclusive)
    /// while a command of this process runs on it: another process's
    /// protection of the same root waits for it before it brings its
    /// record up to date ([`Protector::begin`]).
    held: Option<OwnedFd>,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            active: 0,
            records: HashMap::new(),
            guards: HashMap::new(),
            watch: WatchState::Unset,
            held: None,
        }
    }
}

impl Shared {
    /// One command of this process on the root fewer; with the last, the
    /// other processes' protection of the root may begin.
    fn end_one(&mut self) {
        self.active = self.active.saturating_sub(1);
        self.let_go_if_idle();
    }

    /// Lets go of the root's `flock` once no command of this process runs
    /// on it or is being checked.
    fn let_go_if_idle(&mut self) {
        if self.active == 0 {
            self.held = None;
        }
    }

    /// Reads the queued events into every record's set of changed
    /// directories.
    fn absorb(&mut self) {
        let dirty = self.watch.drain();
        if dirty.is_empty() {
            return;
        }
        for r in self.records.values_mut() {
            r.dirty.extend(dirty.iter().cloned());
        }
    }
}

type Registry = Mutex<HashMap<(u64, u64), Weak<Common>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Protector {
    /// Protects the directory `root` (opened beneath nothing: it is the
    /// write root itself) with `guard`'s patterns and restricted mode.
    ///
    /// # Errors
    ///
    /// When `root` cannot be opened or is not a directory.
    pub fn new(root: &Path, guard: Guard) -> io::Result<Protector> {
        let root = Root::open(root).map_err(io::Error::other)?;
        Protector::with_root(root, guard)
    }

    /// As [`new`](Self::new), from a root already open. Its
    /// [`name`](Root::name) is the host path the quarantine is made beside.
    ///
    /// # Errors
    ///
    /// When the root cannot be examined.
    pub fn with_root(root: Root, guard: Guard) -> io::Result<Protector> {
        let st = rfs::fstat(&root)?;
        let key = (st.st_dev, st.st_ino);
        let shared = {
            let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
            reg.retain(|_, w| w.strong_count() > 0);
            match reg.get(&key).and_then(Weak::upgrade) {
                Some(s) => s,
                None => {
                    let s = Arc::new(Common::default());
                    reg.insert(key, Arc::downgrade(&s));
                    s
                }
            }
        };
        let guard_key = format!(
            "{}\0{}",
            guard.is_restricted(),
            guard
                .patterns()
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join("\0")
        );
        lock(&shared.state)
            .guards
            .entry(guard_key.clone())
            .or_insert_with(|| (guard.clone(), 0))
            .1 += 1;
        let quarantine = Quarantine::new(root.name());
        Ok(Protector {
            root,
            guard,
            guard_key,
            key,
            shared,
            quarantine,
            placeholders: Mutex::new(Vec::new()),
            entry_cap: MAX_SETTLE_ENTRIES,
        })
    }

    /// For tests: this protector with another bound than
    /// [`MAX_SETTLE_ENTRIES`] on the entries one settle reads, so that a test
    /// can pass it without making a million files.
    #[doc(hidden)]
    pub fn with_entry_cap(mut self, cap: usize) -> Protector {
        self.entry_cap = cap;
        self
    }

    /// Directories (root-relative, one plain name per component) that
    /// [`begin`](Self::begin) creates, empty, when they are missing and no
    /// command on the root is running, so that they are recorded as
    /// protected entries like any other: where commands run in a view that
    /// binds protected directories read-only, nothing can then be created
    /// in them while a command runs. They are never removed. A component
    /// that exists as anything but a directory (a symlink included) leaves
    /// that placeholder out, and the after-the-fact check covers it.
    pub fn set_placeholders(&self, dirs: Vec<PathBuf>) {
        *lock(&self.placeholders) = dirs;
    }

    /// Creates the missing placeholder directories, one component at a
    /// time, beneath the root, never through a symlink. Answers how many
    /// directories were made.
    fn make_placeholders(&self) -> usize {
        let mut made = 0;
        for dir in lock(&self.placeholders).iter() {
            let Ok(mut cur) = self.root.try_clone() else {
                continue;
            };
            for comp in dir.components() {
                let std::path::Component::Normal(name) = comp else {
                    break;
                };
                let next = match cur.open_child_dir(name) {
                    Ok(next) => next,
                    Err(e) if e.kind() == sandgate_rootfs::ErrorKind::NotFound => {
                        if cur.mkdir(name, 0o755).is_err() {
                            break;
                        }
                        made += 1;
                        match cur.open_child_dir(name) {
                            Ok(next) => next,
                            Err(_) => break,
                        }
                    }
                    // A symlink, a file or an unreadable entry: left to the
                    // check after the command.
                    Err(_) => break,
                };
                cur = next;
            }
        }
        made
    }

    /// The guard whose patterns are enforced.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// Records the protected state before a command. The record is brought
    /// up to date only when no other command on this root is running
    /// (otherwise the one they share is kept, so their changes are not
    /// taken for the host's); then every set of patterns' record on this
    /// root is. The first command under patterns this root has no record
    /// for yet waits until no command on the root runs (a record made
    /// meanwhile would take their changes for the host's). The returned
    /// checkpoint must be
    /// [settled](Checkpoint::settle) once the command and everything it
    /// started are dead; dropping it unsettled only ends its registration.
    ///
    /// # Errors
    ///
    /// When the root itself cannot be read; the command must not run then.
    pub fn begin(self: &Arc<Self>) -> io::Result<Checkpoint> {
        self.begin_until(None, &|| false)
    }

    /// [`begin`](Self::begin), waiting for its turn on the root (another
    /// process's command, or a command of this process under other
    /// deny-write patterns, see there) no later than `deadline` and only
    /// while `stop` answers `false`; `stop` is asked every few
    /// milliseconds while it waits.
    ///
    /// # Errors
    ///
    /// As [`begin`](Self::begin); and [`io::ErrorKind::TimedOut`] when the
    /// deadline passed, [`io::ErrorKind::Interrupted`] when `stop`
    /// answered `true`, before the turn came. The command must not run
    /// then.
    pub fn begin_until(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        stop: &dyn Fn() -> bool,
    ) -> io::Result<Checkpoint> {
        let mut shared = lock(&self.shared.state);
        // A record is made only while no command on the root runs: made
        // while another set of patterns' command runs, it would take that
        // command's changes to what both protect as the host's, and this
        // command's check would put them back after the other's undid
        // them. So the first command under these patterns waits for the
        // root to be idle.
        while shared.active > 0 && !shared.records.contains_key(&self.guard_key) {
            let step = turn_step(deadline, stop, "commands under other deny-write patterns")?;
            shared = self
                .shared
                .idle
                .wait_timeout(shared, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if shared.active == 0 {
            shared.held = Some(self.hold_root(deadline, stop)?);
        }
        shared.watch.start();
        // Placeholders are made while no command runs on the root, before
        // the events are read: the record takes them as the host's.
        if shared.active == 0 {
            self.make_placeholders();
        }
        shared.absorb();
        if shared.active == 0 {
            // Every set of patterns' record is brought up to date now, this
            // one's first: one brought up to date only at its own next
            // idle begin would, were that begin made while another
            // command runs, put back what the host changed meanwhile.
            let sh = &mut *shared;
            let others = sh.guards.keys().filter(|k| **k != self.guard_key).cloned();
            let keys: Vec<String> = std::iter::once(self.guard_key.clone())
                .chain(others)
                .collect();
            for key in keys {
                let guard = match sh.guards.get(&key) {
                    _ if key == self.guard_key => &self.guard,
                    Some((guard, _)) => guard,
                    None => continue,
                };
                let ctx = Ctx {
                    root: self.root.as_fd(),
                    guard,
                };
                let record = match sh.records.remove(&key) {
                    Some(mut record) => record
                        .refresh(&ctx, &mut sh.watch, self.entry_cap)
                        .map(|()| record),
                    None if key == self.guard_key => Record::take(&ctx, &mut sh.watch),
                    None => continue,
                };
                match record {
                    Ok(record) => {
                        sh.records.insert(key, record);
                    }
                    Err(e) => {
                        // Nothing of this process runs on the root: the
                        // other processes may go on.
                        sh.held = None;
                        return Err(e);
                    }
                }
            }
        }
        shared.active += 1;
        Ok(Checkpoint {
            protector: Some(self.clone()),
        })
    }

    /// Opens the root directory anew and takes an exclusive `flock` on it,
    /// waiting while another process holds it (a command of its own on
    /// this root runs), no later than `deadline` and while `stop` answers
    /// `false`. Records are kept per process: one brought up to
    /// date while another process's command runs would take that
    /// command's changes for the host's, and its settle would put them
    /// back after that process undid them. A filesystem that refuses the
    /// lock (`EOPNOTSUPP`, `ENOLCK`) is protected as before, without it.
    fn hold_root(&self, deadline: Option<Instant>, stop: &dyn Fn() -> bool) -> io::Result<OwnedFd> {
        let fd = rfs::openat(&self.root, c".", DIR_FLAGS, Mode::empty())?;
        loop {
            match rfs::flock(&fd, rfs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) | Err(Errno::OPNOTSUPP) | Err(Errno::NOLCK) => return Ok(fd),
                Err(Errno::INTR) => continue,
                Err(Errno::WOULDBLOCK) => {
                    std::thread::sleep(turn_step(deadline, stop, "another process's command")?);
                }
                Err(e) => {
                    return Err(io::Error::other(format!(
                        "cannot lock the write root against other processes' commands: {e}"
                    )))
                }
            }
        }
    }

    /// How changes beneath this protector's root are found: by inotify,
    /// or by the ctime walk (and why). Decided at the first
    /// [`begin`](Self::begin) on the root; inotify, once it cannot be
    /// trusted (its queue overflowed, a watch could not be added or was
    /// dropped), gives way to the ctime walk for as long as the root's
    /// protectors live.
    pub fn detection(&self) -> Detection {
        lock(&self.shared.state).watch.detection()
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            root: self.root.as_fd(),
            guard: &self.guard,
        }
    }
}

/// One command's registration with its root's protection
/// ([`Protector::begin`]).
#[derive(Debug)]
pub struct Checkpoint {
    protector: Option<Arc<Protector>>,
}

impl Checkpoint {
    /// Finds every change to the protected state since the record and
    /// undoes it; answers what was found and done, in path order. Call it
    /// once every process the command started is dead.
    pub fn settle(mut self) -> Vec<Change> {
        let Some(p) = self.protector.take() else {
            return Vec::new();
        };
        let mut shared = lock(&p.shared.state);
        shared.active = shared.active.saturating_sub(1);
        if shared.active == 0 {
            p.shared.idle.notify_all();
        }
        shared.absorb();
        let ctx = p.ctx();
        let sh = &mut *shared;
        let Some(mut record) = sh.records.remove(&p.guard_key) else {
            sh.let_go_if_idle();
            return Vec::new();
        };
        let mut settle = Settle {
            ctx,
            entry_cap: p.entry_cap,
            left: Cell::new(p.entry_cap),
            stopped: Cell::new(false),
            unchecked: RefCell::new(Vec::new()),
            starved: Cell::new(None),
            root: &p.root,
            quarantine: &p.quarantine,
            changes: Vec::new(),
            watch: &mut sh.watch,
            others: &mut sh.records,
        };
        settle.run(&mut record);
        let changes = std::mem::take(&mut settle.changes);
        drop(settle);
        sh.records.insert(p.guard_key.clone(), record);
        // The lock is let go only now: another process's record is not
        // brought up to date while this settle restores.
        sh.let_go_if_idle();
        changes
    }
}

/// How long one wait for a turn on the root may sleep before `stop` and
/// the deadline are asked again; the error that ends the wait when either
/// says so. `who` names what holds the root.
fn turn_step(
    deadline: Option<Instant>,
    stop: &dyn Fn() -> bool,
    who: &str,
) -> io::Result<Duration> {
    const STEP: Duration = Duration::from_millis(10);
    if stop() {
        return Err(io::Error::new(
            io::ErrorKind::Interrupted,
            format!("stopped while {who} held the write root"),
        ));
    }
    match deadline {
        None => Ok(STEP),
        Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(left.min(STEP)),
            _ => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the call's timeout ran out while {who} held the write root"),
            )),
        },
    }
}

/// One recorded protected entry ([`Checkpoint::protected_entries`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedEntry {
    /// Its path beneath the write root.
    pub path: PathBuf,
    /// Its device and inode when recorded.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// Its `st_mode` when recorded (type and permissions).
    pub mode: u32,
    /// Its link count when recorded.
    pub nlink: u64,
}

impl Checkpoint {
    /// The protected entries of the record this command will be settled
    /// against, in path order.
    pub fn protected_entries(&self) -> Vec<RecordedEntry> {
        let Some(p) = self.protector.as_ref() else {
            return Vec::new();
        };
        let shared = lock(&p.shared.state);
        let Some(record) = shared.records.get(&p.guard_key) else {
            return Vec::new();
        };
        record
            .entries
            .iter()
            .map(|(rel, e)| RecordedEntry {
                path: bytes_path(rel).to_path_buf(),
                dev: e.meta.dev,
                ino: e.meta.ino,
                mode: e.meta.mode,
                nlink: e.meta.nlink,
            })
            .collect()
    }
}

impl Drop for Checkpoint {
    fn drop(&mut self) {
        if let Some(p) = self.protector.take() {
            let mut shared = lock(&p.shared.state);
            shared.end_one();
            if shared.active == 0 {
                p.shared.idle.notify_all();
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Ctx<'a> {
    root: BorrowedFd<'a>,
    guard: &'a Guard,
}

impl Ctx<'_> {
    /// The rule protecting `rel`, an entry of type `kind`, if any: a match
    /// of a pattern, or, for a symbolic link, a name beneath which a
    /// pattern could match what it would not match beneath the link's
    /// target ([`Guard::check_link`](sandgate_fileguard::Guard::check_link)):
    /// the paths beneath it lead wherever it leads, so `ln -s mine .claude`
    /// would make `.claude/settings.json` a file the command wrote, and
    /// `ln -s mine secrets` would do the same to `secrets/a.json` under
    /// `**/secrets/*.json`, while `ln -s mine kept` is an ordinary link.
    fn protects(&self, rel: &[u8], kind: FileType) -> Option<String> {
        let text = String::from_utf8_lossy(rel);
        let verdict = if kind == FileType::Symlink {
            self.guard.check_link(&text, None)
        } else {
            self.guard.check_write(&text, None)
        };
        verdict.refusal().map(|r| r.rule().as_str().to_owned())
    }
}

/// Identity and metadata of one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Meta {
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u64,
    size: u64,
    dev: u64,
    ino: u64,
    ctime: i128,
    mtime: (i64, i64),
    atime: (i64, i64),
}

impl Meta {
    fn of(st: &Stat) -> Meta {
        Meta {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            nlink: st.st_nlink,
            size: st.st_size as u64,
            dev: st.st_dev,
            ino: st.st_ino,
            ctime: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
            mtime: (st.st_mtime, st.st_mtime_nsec as i64),
            atime: (st.st_atime, st.st_atime_nsec as i64),
        }
    }

    fn kind(&self) -> FileType {
        FileType::from_raw_mode(self.mode)
    }

    /// Equal in everything but the access time (which reading the file
    /// for the record moves).
    fn same_as(&self, other: &Meta) -> bool {
        Meta {
            atime: other.atime,
            ..*self
        } == *other
    }

    fn perm(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// A protected entry as recorded.
#[derive(Clone, Debug)]
struct Entry {
    pattern: String,
    meta: Meta,
    data: Data,
    /// The extended attributes of a regular file or directory (ACLs among
    /// them), when they could be read: `None` for other types, or when
    /// they could not.
    xattrs: Option<Xattrs>,
}

/// Extended attributes, name and value, in name order.
type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Clone, Debug)]
enum Data {
    /// A directory, or a file recorded by identity and metadata only.
    None,
    /// A regular file's content.
    Copy(Arc<[u8]>),
    /// A symlink's target.
    Link(Vec<u8>),
}

/// A directory beneath the root, as recorded.
#[derive(Clone, Debug)]
struct DirRec {
    meta: Meta,
    /// Names of its subdirectories.
    subdirs: BTreeSet<Vec<u8>>,
    /// Names of its protected entries (any type).
    protected: BTreeSet<Vec<u8>>,
}

/// A listed directory whose subdirectories the record's walk has still
/// to take in.
struct Pending {
    rel: Vec<u8>,
    /// Its device and inode, as listed.
    id: (u64, u64),
    /// Held open while few enough are ([`HELD_DIRS`]); otherwise it is
    /// opened again by path when its subdirectories' turn comes.
    fd: Option<OwnedFd>,
    /// Its subdirectories' names, in listing order.
    subdirs: Vec<Vec<u8>>,
}

/// The protected state of one root under one set of patterns.
struct Record {
    /// When the record was last brought up to date (ns since the epoch).
    t0: i128,
    dirs: BTreeMap<Vec<u8>, DirRec>,
    entries: BTreeMap<Vec<u8>, Entry>,
    copied: u64,
    /// Directories with inotify events since the record was last brought
    /// up to date (meaningful while the root is watched).
    dirty: BTreeSet<Vec<u8>>,
    /// Directory entries the walk under way may still read: unbounded for
    /// the first record, [`MAX_SETTLE_ENTRIES`] for each update after.
    left: usize,
    /// The last update stopped at that bound: what it did not read is not
    /// recorded (each settle says so).
    short: bool,
    /// The walk under way failed to open or list something for want of
    /// descriptors or memory: what it did not read would go unrecorded,
    /// so the record is not used (see [`starved`]).
    starved: Option<Errno>,
}

/// Whether `e` says the process is out of a resource (descriptors, kernel
/// memory) rather than anything about the entry: a walk that met it did
/// not see what it should have, and must not be taken for a whole one.
fn starved(e: Errno) -> bool {
    matches!(e, Errno::MFILE | Errno::NFILE | Errno::NOMEM)
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    if rel.is_empty() {
        name.to_vec()
    } else {
        let mut v = Vec::with_capacity(rel.len() + 1 + name.len());
        v.extend_from_slice(rel);
        v.push(b'/');
        v.extend_from_slice(name);
        v
    }
}

fn parent_of(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&[][..], rel),
    }
}

/// Whether `rel` is `base` or beneath it.
fn within(rel: &[u8], base: &[u8]) -> bool {
    base.is_empty() || rel == base || (rel.starts_with(base) && rel.get(base.len()) == Some(&b'/'))
}

/// The keys of `map` strictly beneath `base`.
fn beneath<'m, V>(
    map: &'m BTreeMap<Vec<u8>, V>,
    base: &[u8],
) -> impl Iterator<Item = (&'m Vec<u8>, &'m V)> + 'm {
    let mut lo = base.to_vec();
    lo.push(b'/');
    let mut hi = base.to_vec();
    hi.push(b'/' + 1);
    map.range(lo..hi)
}

fn bytes_path(b: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(b))
}

fn show(rel: &[u8]) -> String {
    if rel.is_empty() {
        ".".to_owned()
    } else {
        String::from_utf8_lossy(rel).into_owned()
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens the directory `rel` beneath `root` one component at a time,
/// following no symlink.
fn open_dir(root: BorrowedFd<'_>, rel: &[u8]) -> Result<OwnedFd, Errno> {
    let mut fd = rfs::openat(root, c".", DIR_FLAGS, Mode::empty())?;
    if rel.is_empty() {
        return Ok(fd);
    }
    for comp in rel.split(|&b| b == b'/') {
        fd = rfs::openat(&fd, OsStr::from_bytes(comp), DIR_FLAGS, Mode::empty())?;
    }
    Ok(fd)
}

/// A walk's queued directories hold a descriptor while fewer than this many
/// do; the others are opened again beneath the root, one component at a
/// time, when their turn comes. Otherwise a directory with more
/// subdirectories than the process has descriptors (commonly 1,024) would
/// have the rest fail to open, and go unrecorded or unchecked.
const HELD_DIRS: usize = 32;

/// Linux's PATH_MAX, counting the terminating NUL.
const PATH_MAX: usize = 4096;

/// `lstat` of `rel` beneath `root` (intermediate components resolved by
/// the kernel; callers only trust it where no ancestor changed). A path
/// too long for one call (a tree made one directory at a time) is
/// reached through its parent, opened one component at a time.
fn lstat(root: BorrowedFd<'_>, rel: &[u8]) -> Result<Stat, Errno> {
    if rel.is_empty() {
        rfs::fstat(root)
    } else if rel.len() < PATH_MAX {
        rfs::statat(root, bytes_path(rel), AtFlags::SYMLINK_NOFOLLOW)
    } else {
        let (parent, name) = parent_of(rel);
        let dir = open_dir(root, parent)?;
        rfs::statat(&dir, bytes_path(name), AtFlags::SYMLINK_NOFOLLOW)
    }
}

/// One directory entry: name, type (from `lstat` when the directory does not
/// say) and inode.
struct Listed {
    name: Vec<u8>,
    kind: FileType,
    ino: u64,
}

/// Reads `dir`'s entries one at a time into `each`, without keeping them,
/// until `each` answers false. Answers whether every entry was read.
fn each_listed(dir: &OwnedFd, mut each: impl FnMut(Listed) -> bool) -> Result<bool, Errno> {
    let dup = rustix::io::fcntl_dupfd_cloexec(dir, 0)?;
    let mut d = Dir::new(dup)?;
    while let Some(e) = d.read() {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let mut kind = e.file_type();
        if kind == FileType::Unknown {
            kind = match rfs::statat(dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(_) => continue,
            };
        }
        let listed = Listed {
            name: name.to_vec(),
            kind,
            ino: e.ino(),
        };
        if !each(listed) {
            return Ok(false);
        }
    }
    Ok(true)
}

impl Record {
    /// A full walk of the root.
    fn take(ctx: &Ctx<'_>, watch: &mut WatchState) -> io::Result<Record> {
        let mut record = Record {
            t0: now_ns(),
            dirs: BTreeMap::new(),
            entries: BTreeMap::new(),
            copied: 0,
            dirty: BTreeSet::new(),
            left: usize::MAX,
            short: false,
            starved: None,
        };
        let fd = open_dir(ctx.root, b"")?;
        record.walk_add(ctx, watch, Vec::new(), fd);
        record.whole()?;
        if !record.dirs.contains_key(&b""[..]) {
            return Err(io::Error::other("cannot read the write root"));
        }
        Ok(record)
    }

    /// Notes `e`, met by the walk under way, if it says the process is out
    /// of a resource.
    fn note(&mut self, e: Errno) {
        if starved(e) && self.starved.is_none() {
            self.starved = Some(e);
        }
    }

    /// An error when the walk under way was starved: its record misses
    /// what it could not open or list, and a command checked against it
    /// would keep its changes there.
    fn whole(&mut self) -> io::Result<()> {
        match self.starved.take() {
            None => Ok(()),
            Some(e) => Err(io::Error::new(
                io::Error::from(e).kind(),
                format!(
                    "the record of the protected paths could not be completed: {}",
                    io::Error::from(e)
                ),
            )),
        }
    }

    /// Adds the directory `rel` (open as `fd`) and everything beneath it,
    /// breadth first so that shallow files are copied first. Each
    /// directory is watched before it is listed.
    ///
    /// The queue holds, for each listed directory with subdirectories,
    /// their names in listing order (so the walk's order is breadth first,
    /// one directory at a time); each child is opened beneath its parent
    /// when its turn comes. While fewer than [`HELD_DIRS`] queued parents
    /// hold a descriptor, a parent keeps its own; the others are opened
    /// again beneath the root, one component at a time, when their
    /// children's turn comes (once for all of them), and used only if they
    /// are still the directory that was listed. So the descriptors held do
    /// not grow with the tree's width, and a directory is reopened by path
    /// at most once however many subdirectories it has.
    fn walk_add(&mut self, ctx: &Ctx<'_>, watch: &mut WatchState, rel: Vec<u8>, fd: OwnedFd) {
        let Some(first) = self.add_dir(ctx, watch, rel, fd) else {
            return;
        };
        let mut queue = std::collections::VecDeque::from([first]);
        let mut held = 1;
        while let Some(mut parent) = queue.pop_front() {
            let fd = match parent.fd.take() {
                Some(fd) => {
                    held -= 1;
                    Some(fd)
                }
                None => match open_dir(ctx.root, &parent.rel) {
                    Ok(fd) => Some(fd),
                    Err(e) => {
                        self.note(e);
                        None
                    }
                }
                .filter(|fd| rfs::fstat(fd).is_ok_and(|s| (s.st_dev, s.st_ino) == parent.id)),
            };
            for name in std::mem::take(&mut parent.subdirs) {
                let sub = match fd.as_ref().filter(|_| !self.short) {
                    Some(fd) => {
                        match rfs::openat(fd, OsStr::from_bytes(&name), DIR_FLAGS, Mode::empty()) {
                            Ok(sub) => Some(sub),
                            Err(e) => {
                                self.note(e);
                                None
                            }
                        }
                    }
                    None => None,
                };
                let Some(sub) = sub else {
                    // Not opened (or past the bound of an update): not
                    // recorded as a subdirectory. Past the bound, the
                    // parent is read again by the next update (its ctime
                    // then never matches the record's).
                    let short = self.short;
                    if let Some(rec) = self.dirs.get_mut(&parent.rel) {
                        rec.subdirs.remove(&name);
                        if short {
                            rec.meta.ctime = i128::MIN;
                        }
                    }
                    if short {
                        self.dirty.insert(parent.rel.clone());
                    }
                    continue;
                };
                let Some(mut child) = self.add_dir(ctx, watch, join(&parent.rel, &name), sub)
                else {
                    continue;
                };
                if held < HELD_DIRS {
                    held += 1;
                } else {
                    child.fd = None;
                }
                queue.push_back(child);
            }
        }
    }

    /// Watches, lists and records the directory `rel` (open as `fd`) and
    /// its protected entries. Answers its subdirectories, still to be
    /// walked (`None` when it cannot be read or has none).
    fn add_dir(
        &mut self,
        ctx: &Ctx<'_>,
        watch: &mut WatchState,
        rel: Vec<u8>,
        fd: OwnedFd,
    ) -> Option<Pending> {
        watch.watch(ctx.root, &fd, &rel);
        let st = rfs::fstat(&fd).ok()?;
        let mut rec = DirRec {
            meta: Meta::of(&st),
            subdirs: BTreeSet::new(),
            protected: BTreeSet::new(),
        };
        let mut subdirs = Vec::new();
        let listed = each_listed(&fd, |e| {
            if !self.take_one() {
                return false;
            }
            let child = join(&rel, &e.name);
            if let Some(pattern) = ctx.protects(&child, e.kind) {
                if self.record_entry(&fd, &e.name, child, pattern) {
                    rec.protected.insert(e.name.clone());
                }
            }
            if e.kind == FileType::Directory {
                rec.subdirs.insert(e.name.clone());
                subdirs.push(e.name);
            }
            true
        });
        let listed = match listed {
            Ok(listed) => listed,
            Err(e) => {
                self.note(e);
                return None;
            }
        };
        if !listed {
            rec.meta.ctime = i128::MIN;
            self.dirty.insert(rel.clone());
        }
        self.dirs.insert(rel.clone(), rec);
        (!subdirs.is_empty()).then_some(Pending {
            id: (st.st_dev, st.st_ino),
            rel,
            fd: Some(fd),
            subdirs,
        })
    }

    /// Counts one directory entry read against the bound of the walk under
    /// way; false (and the record marked short) once it is spent.
    fn take_one(&mut self) -> bool {
        match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                true
            }
            None => {
                self.short = true;
                false
            }
        }
    }

    /// Records the protected entry `name` of `dir` as `rel`. False when it
    /// vanished meanwhile.
    fn record_entry(&mut self, dir: &OwnedFd, name: &[u8], rel: Vec<u8>, pattern: String) -> bool {
        let Ok(st) = rfs::statat(dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW) else {
            return false;
        };
        let meta = Meta::of(&st);
        if let Some(old) = self.entries.remove(&rel) {
            if let Data::Copy(c) = &old.data {
                self.copied = self.copied.saturating_sub(c.len() as u64);
            }
        }
        // A file is recreated only from its copy: its attributes are read
        // with it, through the descriptor that reads it. A file too large
        // to copy keeps its own inode, attributes included.
        let mut xattrs = None;
        let data = match meta.kind() {
            FileType::RegularFile
                if meta.size <= MAX_COPY_BYTES
                    && self.copied + meta.size <= MAX_TOTAL_COPY_BYTES =>
            {
                match read_file_with(dir, name, &meta, Some(&mut xattrs))
                    .inspect_err(|e| self.note(*e))
                    .ok()
                    .flatten()
                {
                    Some(c) => {
                        self.copied += c.len() as u64;
                        Data::Copy(c.into())
                    }
                    None => Data::None,
                }
            }
            FileType::Directory => {
                xattrs = read_xattrs(dir.as_fd(), name, &meta)
                    .inspect_err(|e| self.note(*e))
                    .ok()
                    .flatten();
                Data::None
            }
            FileType::Symlink => match rfs::readlinkat(dir, OsStr::from_bytes(name), Vec::new()) {
                Ok(t) => Data::Link(t.into_bytes()),
                Err(_) => Data::None,
            },
            _ => Data::None,
        };
        self.entries.insert(
            rel,
            Entry {
                pattern,
                meta,
                data,
                xattrs,
            },
        );
        true
    }

    /// Drops `rel` and everything beneath it from the record.
    fn drop_subtree(&mut self, rel: &[u8]) {
        let dirs: Vec<_> = beneath(&self.dirs, rel).map(|(k, _)| k.clone()).collect();
        for k in dirs {
            self.dirs.remove(&k);
        }
        self.dirs.remove(rel);
        let entries: Vec<_> = beneath(&self.entries, rel)
            .map(|(k, _)| k.clone())
            .collect();
        for k in entries {
            self.drop_entry(&k);
        }
    }

    fn drop_entry(&mut self, rel: &[u8]) {
        if let Some(old) = self.entries.remove(rel) {
            if let Data::Copy(c) = &old.data {
                self.copied = self.copied.saturating_sub(c.len() as u64);
            }
        }
    }

    /// Brings the record up to date, accepting every change since it was
    /// made (no command on the root is running). It reads at most `cap`
    /// directory entries, as a settle does: a command can leave millions
    /// in a directory, and the next command would wait for all of them to
    /// be read. Past the bound, what was not read is not recorded (the
    /// record keeps what it had for the names not reached, and new
    /// directories not reached are left out), and every settle against this
    /// record says so.
    fn refresh(&mut self, ctx: &Ctx<'_>, watch: &mut WatchState, cap: usize) -> io::Result<()> {
        let t0 = now_ns();
        self.left = cap;
        self.short = false;
        self.starved = None;
        // Events up to now are in `dirty`; later ones will be next time.
        let watched = watch.is_on();
        let mut moved = Vec::new();
        let dirty = std::mem::take(&mut self.dirty);
        if watched {
            moved.extend(dirty.into_iter().filter(|d| self.dirs.contains_key(d)));
        }
        for (rel, rec) in self.dirs.iter().filter(|_| !watched) {
            match lstat(ctx.root, rel) {
                Ok(st) => {
                    let m = Meta::of(&st);
                    if m.kind() != FileType::Directory
                        || m.ino != rec.meta.ino
                        || m.dev != rec.meta.dev
                        || m.ctime != rec.meta.ctime
                        || m.ctime >= self.t0 - GRANULARITY_NS
                    {
                        moved.push(rel.clone());
                    }
                }
                Err(_) => moved.push(rel.clone()),
            }
        }
        for rel in moved {
            if !self.dirs.contains_key(&rel) {
                continue; // dropped with an ancestor, or re-added whole
            }
            if self.short {
                // Past the bound: left as recorded, and read again next
                // time.
                if watched {
                    self.dirty.insert(rel);
                }
                continue;
            }
            match open_dir(ctx.root, &rel) {
                Ok(fd) => {
                    let same = rfs::fstat(&fd)
                        .ok()
                        .map(|st| Meta::of(&st))
                        .is_some_and(|m| {
                            self.dirs
                                .get(&rel)
                                .is_some_and(|r| r.meta.ino == m.ino && r.meta.dev == m.dev)
                        });
                    if same {
                        self.relist(ctx, watch, &rel, fd);
                    } else {
                        self.drop_subtree(&rel);
                        self.walk_add(ctx, watch, rel, fd);
                    }
                }
                Err(_) if rel.is_empty() => {
                    return Err(io::Error::other("cannot read the write root"))
                }
                Err(e) => {
                    self.note(e);
                    self.drop_subtree(&rel);
                }
            }
        }
        // Protected entries whose own metadata changed (a write does not
        // move its directory's ctime).
        let mut stale = Vec::new();
        for (rel, e) in &self.entries {
            match lstat(ctx.root, rel) {
                Ok(st) => {
                    let m = Meta::of(&st);
                    if !m.same_as(&e.meta) || m.ctime >= self.t0 - GRANULARITY_NS {
                        stale.push(rel.clone());
                    }
                }
                Err(_) => stale.push(rel.clone()),
            }
        }
        for rel in stale {
            let Some(pattern) = self.entries.get(&rel).map(|e| e.pattern.clone()) else {
                continue;
            };
            let (parent, name) = parent_of(&rel);
            let ok = match open_dir(ctx.root, parent) {
                Ok(dir) => self.record_entry(&dir, name, rel.clone(), pattern),
                Err(e) => {
                    self.note(e);
                    false
                }
            };
            if !ok {
                self.drop_entry(&rel);
                if let Some(d) = self.dirs.get_mut(parent) {
                    d.protected.remove(name);
                }
            }
        }
        self.whole()?;
        self.t0 = t0;
        Ok(())
    }

    /// Reads the directory `rel` again (same inode as recorded) and takes
    /// what changed in it.
    fn relist(&mut self, ctx: &Ctx<'_>, watch: &mut WatchState, rel: &[u8], fd: OwnedFd) {
        // Watched again (the same watch if it still is): a directory
        // deleted and made again with the same inode number needs a new one.
        watch.watch(ctx.root, &fd, rel);
        let Ok(st) = rfs::fstat(&fd) else { return };
        let Some(old) = self.dirs.get(rel).cloned() else {
            return;
        };
        let mut rec = DirRec {
            meta: Meta::of(&st),
            subdirs: BTreeSet::new(),
            protected: BTreeSet::new(),
        };
        // Read one entry at a time, and only recorded names remembered as
        // seen: a directory a command filled costs time, not memory.
        let mut seen = BTreeSet::new();
        let listed = each_listed(&fd, |e| {
            if !self.take_one() {
                return false;
            }
            let child = join(rel, &e.name);
            if old.subdirs.contains(&e.name) || old.protected.contains(&e.name) {
                seen.insert(e.name.clone());
            }
            if let Some(pattern) = ctx.protects(&child, e.kind) {
                let same = self.entries.get(&child).is_some_and(|r| {
                    r.meta.ino == e.ino && r.meta.kind() == e.kind && r.pattern == pattern
                });
                if same || self.record_entry(&fd, &e.name, child.clone(), pattern) {
                    rec.protected.insert(e.name.clone());
                }
            } else {
                self.drop_entry(&child);
            }
            if e.kind == FileType::Directory {
                let known = self.dirs.get(&child).map(|d| (d.meta.ino, d.meta.dev));
                let sub =
                    match rfs::openat(&fd, OsStr::from_bytes(&e.name), DIR_FLAGS, Mode::empty()) {
                        Ok(sub) => sub,
                        Err(e) => {
                            self.note(e);
                            return true;
                        }
                    };
                let now = rfs::fstat(&sub).ok().map(|s| (s.st_ino, s.st_dev));
                rec.subdirs.insert(e.name.clone());
                if known.is_none() || known != now {
                    self.drop_subtree(&child);
                    self.walk_add(ctx, watch, child, sub);
                }
            } else if self.dirs.contains_key(&child) {
                self.drop_subtree(&child);
            }
            true
        });
        match listed {
            Err(e) => {
                self.note(e);
                return;
            }
            Ok(true) => {
                for gone in old.subdirs.iter().filter(|n| !seen.contains(*n)) {
                    self.drop_subtree(&join(rel, gone));
                }
                for gone in old.protected.iter().filter(|n| !seen.contains(*n)) {
                    self.drop_entry(&join(rel, gone));
                }
            }
            // Stopped at the bound: the names not reached keep what was
            // recorded of them, and the directory is read again next time.
            Ok(false) => {
                let unseen = |names: &BTreeSet<Vec<u8>>| {
                    names
                        .iter()
                        .filter(|n| !seen.contains(*n))
                        .cloned()
                        .collect::<Vec<_>>()
                };
                rec.subdirs.extend(unseen(&old.subdirs));
                rec.protected.extend(unseen(&old.protected));
                rec.meta.ctime = i128::MIN;
                self.dirty.insert(rel.to_vec());
            }
        }
        self.dirs.insert(rel.to_vec(), rec);
    }
}

/// Reads the regular file `name` of `dir` if it is still the one `meta`
/// describes.
fn read_file(dir: &OwnedFd, name: &[u8], meta: &Meta) -> Result<Option<Vec<u8>>, Errno> {
    read_file_with(dir, name, meta, None)
}

/// [`read_file`], and with `xattrs` its extended attributes too, read
/// through the same descriptor.
fn read_file_with(
    dir: &OwnedFd,
    name: &[u8],
    meta: &Meta,
    xattrs: Option<&mut Option<Xattrs>>,
) -> Result<Option<Vec<u8>>, Errno> {
    use std::io::Read;
    // Only the open's error is answered (a shortage of descriptors the
    // record must not take for a file it may not copy); a file that
    // changed or cannot be read is `None`.
    let fd = rfs::openat(
        dir,
        OsStr::from_bytes(name),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let Ok(st) = rfs::fstat(&fd) else {
        return Ok(None);
    };
    if st.st_ino != meta.ino || st.st_dev != meta.dev {
        return Ok(None);
    }
    if let Some(x) = xattrs {
        *x = xattrs_of(fd.as_fd());
    }
    let mut f = std::fs::File::from(fd);
    let mut buf = Vec::with_capacity(meta.size as usize);
    if f.by_ref()
        .take(MAX_COPY_BYTES + 1)
        .read_to_end(&mut buf)
        .is_err()
    {
        return Ok(None);
    }
    Ok((buf.len() as u64 <= MAX_COPY_BYTES).then_some(buf))
}

/// The extended attributes of the directory `name` in `dir` (still the
/// inode `meta` records), opened without following a symlink. `None` for
/// other types, or when they cannot be read; only the open's error is
/// answered (a shortage of descriptors the record must not take for a
/// directory without attributes to compare).
fn read_xattrs(dir: BorrowedFd<'_>, name: &[u8], meta: &Meta) -> Result<Option<Xattrs>, Errno> {
    if meta.kind() != FileType::Directory {
        return Ok(None);
    }
    let fd = rfs::openat(dir, OsStr::from_bytes(name), DIR_FLAGS, Mode::empty())?;
    let Ok(st) = rfs::fstat(&fd) else {
        return Ok(None);
    };
    if st.st_ino != meta.ino || st.st_dev != meta.dev {
        return Ok(None);
    }
    Ok(xattrs_of(fd.as_fd()))
}

/// The extended attributes of the file or directory open as `fd`, in
/// name order (none on a filesystem without them). `None` when they
/// cannot be read.
fn xattrs_of(fd: BorrowedFd<'_>) -> Option<Xattrs> {
    for _ in 0..4 {
        let n = match rfs::flistxattr_query(fd) {
            Ok(n) => n,
            Err(Errno::NOTSUP) => return Some(Vec::new()),
            Err(_) => return None,
        };
        let mut names = vec![0u8; n];
        let n = match rfs::flistxattr(fd, &mut names[..]) {
            Ok(n) => n,
            // It grew meanwhile: asked again.
            Err(Errno::RANGE) => continue,
            Err(_) => return None,
        };
        names.truncate(n);
        let mut out = Vec::new();
        for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
            let nm = OsStr::from_bytes(name);
            let value = match rfs::fgetxattr_query(fd, nm) {
                Ok(len) => {
                    let mut v = vec![0u8; len];
                    match rfs::fgetxattr(fd, nm, &mut v[..]) {
                        Ok(len) => {
                            v.truncate(len);
                            v
                        }
                        Err(Errno::NODATA) => continue,
                        Err(_) => return None,
                    }
                }
                Err(Errno::NODATA) => continue,
                Err(_) => return None,
            };
            out.push((name.to_vec(), value));
        }
        out.sort();
        return Some(out);
    }
    None
}

/// The extended attributes a restore answers for: all but the security
/// labels the kernel or a security module sets by itself on a new inode
/// (`security.selinux`, …), which the host's user may not be allowed to
/// set; file capabilities (`security.capability`) count.
fn answered(name: &[u8]) -> bool {
    !name.starts_with(b"security.") || name == b"security.capability"
}

/// The two sets of attributes are equal in what a restore answers for.
fn same_xattrs(a: &Xattrs, b: &Xattrs) -> bool {
    a.iter()
        .filter(|(n, _)| answered(n))
        .eq(b.iter().filter(|(n, _)| answered(n)))
}

/// Gives the inode open as `fd` the recorded extended attributes back:
/// those it has and the record has not (an ACL the command set, or one
/// a new inode took from its directory's default ACL) are removed, the
/// recorded ones set. Fails when it is left with one the record has not,
/// or with another value; a recorded one that cannot be set (file
/// capabilities, for a host that is not root) is left out. Setting
/// `user.*` attributes needs write permission on the inode: the caller
/// gives its mode back after.
fn set_xattrs(fd: BorrowedFd<'_>, want: &Xattrs) -> Result<(), Errno> {
    let have = xattrs_of(fd).ok_or(Errno::IO)?;
    if same_xattrs(&have, want) {
        return Ok(());
    }
    for (name, _) in have.iter().filter(|(n, _)| answered(n)) {
        if !want.iter().any(|(w, _)| w == name) {
            let _ = rfs::fremovexattr(fd, OsStr::from_bytes(name));
        }
    }
    for (name, value) in want.iter().filter(|(n, _)| answered(n)) {
        if !have.iter().any(|(h, v)| h == name && v == value) {
            let _ = rfs::fsetxattr(
                fd,
                OsStr::from_bytes(name),
                &value[..],
                rfs::XattrFlags::empty(),
            );
        }
    }
    match xattrs_of(fd) {
        Some(now)
            if now
                .iter()
                .filter(|(n, _)| answered(n))
                .all(|nv| want.contains(nv)) =>
        {
            Ok(())
        }
        _ => Err(Errno::PERM),
    }
}

/// Where entries are moved aside to.
struct Quarantine {
    /// `<parent>/.<rootname>.sandgate-quarantine`, when the root has a
    /// parent and a name.
    beside: Option<PathBuf>,
    /// This settle's directory, once made: the host path, or the path
    /// beneath the root (fallback), and an open root of it.
    current: Mutex<Option<Root>>,
}

impl Quarantine {
    fn new(root: &Path) -> Quarantine {
        let beside = match (root.parent(), root.file_name()) {
            (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => {
                let mut n = std::ffi::OsString::from(".");
                n.push(name);
                n.push(".sandgate-quarantine");
                Some(parent.join(n))
            }
            _ => None,
        };
        Quarantine {
            beside,
            current: Mutex::new(None),
        }
    }
}

fn stamp() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}.{:09}-{}-{}",
        t.as_secs(),
        t.subsec_nanos(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// What a settle found.
#[derive(Default)]
struct Scan {
    /// Recorded directories that are gone, replaced, or no longer
    /// directories (the top of each such subtree, and possibly more).
    missing: BTreeSet<Vec<u8>>,
    /// New protected entries (the topmost of each new subtree) and the
    /// rule protecting each.
    new_protected: Vec<(Vec<u8>, String)>,
    /// Every new directory seen that has the identity of a recorded
    /// directory (one renamed elsewhere), by device and inode.
    new_dirs: HashMap<(u64, u64), Vec<u8>>,
    /// Every other entry seen at an unrecorded name whose inode is a
    /// recorded entry's (the device is checked when one is used).
    new_files: HashMap<u64, Vec<u8>>,
    /// Once the scan has noted [`PRUNE_AT`] new entries: the identities of
    /// the record's directories and the inodes of its entries, the only
    /// ones `new_dirs` and `new_files` keep from then on (only those are
    /// looked up), so the scan's memory does not grow with the entries a
    /// command makes. Built only then: a settle after a command that made
    /// few entries does not pay for a set as large as the record.
    wanted: Option<Wanted>,
}

/// The directory identities and entry inodes a pruned [`Scan`] keeps.
type Wanted = (HashSet<(u64, u64)>, HashSet<u64>);

/// New entries a scan notes before it keeps only those the record knows.
const PRUNE_AT: usize = 4096;

impl Scan {
    /// Notes a directory seen at an unrecorded name (or replacing one).
    fn new_dir(&mut self, record: &Record, id: (u64, u64), rel: &[u8]) {
        if self.wanted.as_ref().is_none_or(|w| w.0.contains(&id)) {
            self.new_dirs.insert(id, rel.to_vec());
            self.prune(record);
        }
    }

    /// Notes another entry seen at an unrecorded name.
    fn new_file(&mut self, record: &Record, ino: u64, rel: &[u8]) {
        if self.wanted.as_ref().is_none_or(|w| w.1.contains(&ino)) {
            self.new_files.entry(ino).or_insert_with(|| rel.to_vec());
            self.prune(record);
        }
    }

    /// Past [`PRUNE_AT`] noted entries: builds the wanted sets and drops
    /// what they do not hold.
    fn prune(&mut self, record: &Record) {
        if self.wanted.is_some() || self.new_dirs.len() + self.new_files.len() < PRUNE_AT {
            return;
        }
        let dirs: HashSet<(u64, u64)> = record
            .dirs
            .values()
            .map(|d| (d.meta.dev, d.meta.ino))
            .collect();
        let files: HashSet<u64> = record.entries.values().map(|e| e.meta.ino).collect();
        self.new_dirs.retain(|id, _| dirs.contains(id));
        self.new_files.retain(|ino, _| files.contains(ino));
        self.wanted = Some((dirs, files));
    }

    fn ancestor_missing(&self, rel: &[u8]) -> bool {
        let mut r = rel;
        loop {
            if self.missing.contains(r) {
                return true;
            }
            if r.is_empty() {
                return false;
            }
            r = parent_of(r).0;
        }
    }
}

struct Settle<'a> {
    ctx: Ctx<'a>,
    /// The most entries this settle reads ([`MAX_SETTLE_ENTRIES`]).
    entry_cap: usize,
    /// Entries it may still read.
    left: Cell<usize>,
    /// It stopped reading at `entry_cap`.
    stopped: Cell<bool>,
    /// Directories the command made that could not be opened or read:
    /// what they hold was not checked.
    unchecked: RefCell<Vec<Vec<u8>>>,
    /// It could not open or list a directory for want of descriptors or
    /// memory (see [`starved`]): what lies there was not looked at.
    starved: Cell<Option<Errno>>,
    root: &'a Root,
    quarantine: &'a Quarantine,
    changes: Vec<Change>,
    /// The root's inotify instance, and the records of its other sets of
    /// patterns (which get the events read here too).
    watch: &'a mut WatchState,
    others: &'a mut HashMap<String, Record>,
}

impl Settle<'_> {
    fn run(&mut self, record: &mut Record) {
        let mut scan = self.scan(record);
        // Directories renamed elsewhere beneath the root go back first;
        // then everything is looked at again from their places.
        for _ in 0..4 {
            if !self.rename_back(record, &scan) {
                break;
            }
            scan = self.scan(record);
        }
        for (rel, pattern) in std::mem::take(&mut scan.new_protected) {
            let action = match self.quarantine(&rel) {
                Ok(()) => Action::Quarantined,
                Err(_) => Action::Reported,
            };
            self.changes.push(Change {
                path: show(&rel),
                pattern,
                action,
            });
        }
        for rel in std::mem::take(&mut *self.unchecked.borrow_mut()) {
            self.changes.push(Change {
                path: show(&rel),
                pattern: "(none: a directory the command made that could not be read; \
                          what it holds was not checked)"
                    .to_owned(),
                action: Action::Reported,
            });
        }
        if record.short {
            self.changes.push(Change {
                path: ".".to_owned(),
                pattern: format!(
                    "(none: the record before this command stopped after reading {} \
                     directory entries, MAX_SETTLE_ENTRIES; protected entries among the \
                     rest were not recorded, and a change to one is not undone)",
                    self.entry_cap
                ),
                action: Action::Reported,
            });
        }
        if let Some(e) = self.starved.get() {
            self.changes.push(Change {
                path: ".".to_owned(),
                pattern: format!(
                    "(none: the check could not open or read every directory that changed \
                     ({}); changes there were not looked for)",
                    io::Error::from(e)
                ),
                action: Action::Reported,
            });
        }
        if self.stopped.get() {
            self.changes.push(Change {
                path: ".".to_owned(),
                pattern: format!(
                    "(none: the check stopped after reading {} directory entries, \
                     MAX_SETTLE_ENTRIES; changes among the rest were not looked for)",
                    self.entry_cap
                ),
                action: Action::Reported,
            });
        }
        self.restore(record, &scan);
        self.changes.sort_by(|a, b| a.path.cmp(&b.path));
        // A directory whose permissions were given back during the scan
        // may have had its owner restored too, reported the same way.
        self.changes.dedup();
    }

    fn root_fd(&self) -> BorrowedFd<'_> {
        self.ctx.root
    }

    /// Reads the queued events (this settle's own renames among them) into
    /// every record's set of changed directories.
    fn absorb(&mut self, record: &mut Record) {
        let dirty = self.watch.drain();
        for r in self.others.values_mut() {
            r.dirty.extend(dirty.iter().cloned());
        }
        record.dirty.extend(dirty);
    }

    fn scan(&mut self, record: &mut Record) -> Scan {
        self.absorb(record);
        let mut scan = Scan::default();
        let threshold = record.t0 - GRANULARITY_NS;
        let mut moved = BTreeSet::new();
        // Watched: only directories with events since the record can have
        // changed. Otherwise every directory's ctime is looked at.
        let watched = self.watch.is_on();
        let candidates: Box<dyn Iterator<Item = (&Vec<u8>, &DirRec)>> = if watched {
            Box::new(
                record
                    .dirty
                    .iter()
                    .filter_map(|d| record.dirs.get_key_value(d)),
            )
        } else {
            Box::new(record.dirs.iter())
        };
        let mut regained = Vec::new();
        for (rel, rec) in candidates {
            if scan.ancestor_missing(rel) {
                continue;
            }
            match lstat(self.root_fd(), rel) {
                Ok(st) => {
                    let mut m = Meta::of(&st);
                    // Candidates come parents first, so the permissions of
                    // every directory above were given back already.
                    if m.kind() == FileType::Directory
                        && m.ino == rec.meta.ino
                        && m.dev == rec.meta.dev
                        && rec.meta.perm() & 0o777 & !m.perm() != 0
                        && self.regain_access(rel, &rec.meta).is_ok()
                    {
                        m.mode = rec.meta.mode;
                        if record.entries.contains_key(rel) {
                            regained.push(rel.clone());
                        }
                    }
                    if m.kind() != FileType::Directory
                        || m.ino != rec.meta.ino
                        || m.dev != rec.meta.dev
                    {
                        scan.missing.insert(rel.clone());
                        // What stands there now is seen from its parent.
                        // Usually the parent changed too (a rename or
                        // mkdir); a mount or unmount at that name changes
                        // nothing in it, so it is read again regardless.
                        if !rel.is_empty() {
                            moved.insert(parent_of(rel).0.to_vec());
                        }
                    } else if watched || m.ctime != rec.meta.ctime || m.ctime >= threshold {
                        moved.insert(rel.clone());
                    }
                }
                Err(_) => {
                    scan.missing.insert(rel.clone());
                }
            }
        }
        for rel in moved {
            if scan.ancestor_missing(&rel) {
                continue;
            }
            self.relist(record, &rel, &mut scan);
        }
        for rel in regained {
            let pattern = record.entries.get(&rel).map(|e| e.pattern.clone());
            self.changes.push(Change {
                path: show(&rel),
                pattern: pattern.unwrap_or_default(),
                action: Action::Restored,
            });
        }
        scan
    }

    /// Gives the recorded directory `rel` back its recorded permissions
    /// (`meta`), which the command cut down: a directory that cannot be
    /// read, searched or written cannot be checked, nor can protected
    /// entries in it be moved aside and restored. Every recorded directory
    /// could be read when it was recorded. The directory is reached one
    /// component at a time through `O_PATH` descriptors that follow no
    /// symlink (they need no permission on the directory itself), and
    /// changed through its descriptor, so nothing else can be.
    fn regain_access(&self, rel: &[u8], meta: &Meta) -> Result<(), Errno> {
        // The root's own descriptor serves for the root: even `.` cannot
        // be looked up in a directory without search permission.
        let mut fd: Option<OwnedFd> = None;
        for comp in rel.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
            let dir = fd.as_ref().map_or(self.root_fd(), |f| f.as_fd());
            fd = Some(rfs::openat(
                dir,
                OsStr::from_bytes(comp),
                PATH_FLAGS,
                Mode::empty(),
            )?);
        }
        let fd = fd.as_ref().map_or(self.root_fd(), |f| f.as_fd());
        let st = rfs::fstat(fd)?;
        if (st.st_dev, st.st_ino) != (meta.dev, meta.ino) {
            return Err(Errno::NOENT);
        }
        chmod_path_fd(fd, meta.perm())
    }

    fn relist(&self, record: &Record, rel: &[u8], scan: &mut Scan) {
        let Some(rec) = record.dirs.get(rel) else {
            return;
        };
        let fd = match open_dir(self.root_fd(), rel) {
            Ok(fd) => fd,
            Err(e) if starved(e) => {
                // Not gone: unseen.
                self.note(e);
                return;
            }
            Err(_) => {
                scan.missing.insert(rel.to_vec());
                return;
            }
        };
        // Only recorded subdirectories are remembered as seen: the rest
        // costs no memory however many there are.
        let mut seen_dirs = BTreeSet::new();
        let listed = self.each_within(&fd, |e| {
            let child = join(rel, &e.name);
            let ident = if e.kind == FileType::Directory {
                rfs::statat(&fd, OsStr::from_bytes(&e.name), AtFlags::SYMLINK_NOFOLLOW)
                    .ok()
                    .map(|s| (s.st_dev, s.st_ino))
            } else {
                None
            };
            if e.kind == FileType::Directory && rec.subdirs.contains(&e.name) {
                seen_dirs.insert(e.name.clone());
            }
            if let Some(entry) = record.entries.get(&child) {
                // A recorded protected entry: compared one by one later.
                if entry.meta.kind() == FileType::Directory
                    && ident != Some((entry.meta.dev, entry.meta.ino))
                {
                    scan.missing.insert(child.clone());
                    if let Some(id) = ident {
                        scan.new_dir(record, id, &child);
                    }
                }
                return;
            }
            if e.kind != FileType::Directory {
                scan.new_file(record, e.ino, &child);
            }
            if let Some(known) = record.dirs.get(&child) {
                if ident == Some((known.meta.dev, known.meta.ino)) {
                    return;
                }
                scan.missing.insert(child.clone());
            }
            if let Some(pattern) = self.ctx.protects(&child, e.kind) {
                if let Some(id) = ident {
                    scan.new_dir(record, id, &child);
                }
                scan.new_protected.push((child, pattern));
                return;
            }
            if let Some(id) = ident {
                scan.new_dir(record, id, &child);
                match open_new_dir(&fd, &e.name) {
                    Ok(sub) => self.walk_new(record, child, sub, scan),
                    Err(_) => self.unchecked.borrow_mut().push(child),
                }
            }
        });
        if let Err(e) = listed {
            self.note(e);
            return;
        }
        // A recorded subdirectory not seen is gone, unless the listing
        // stopped before it: then it is looked up.
        for gone in rec.subdirs.iter().filter(|n| !seen_dirs.contains(*n)) {
            let there = rfs::statat(&fd, OsStr::from_bytes(gone), AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| {
                    let id = (st.st_dev, st.st_ino);
                    record
                        .dirs
                        .get(&join(rel, gone))
                        .is_some_and(|d| (d.meta.dev, d.meta.ino) == id)
                });
            if listed == Ok(true) || !there {
                scan.missing.insert(join(rel, gone));
            }
        }
    }

    /// Notes `e` if it says the process is out of a resource.
    fn note(&self, e: Errno) {
        if starved(e) && self.starved.get().is_none() {
            self.starved.set(Some(e));
        }
    }

    /// Reads `dir`'s entries into `each` while this settle may read more
    /// ([`MAX_SETTLE_ENTRIES`] in all); answers whether every entry was
    /// read (when not, the settle reports that it stopped).
    fn each_within(&self, dir: &OwnedFd, mut each: impl FnMut(Listed)) -> Result<bool, Errno> {
        let complete = each_listed(dir, |e| {
            let Some(left) = self.left.get().checked_sub(1) else {
                return false;
            };
            self.left.set(left);
            each(e);
            true
        })?;
        if !complete {
            self.stopped.set(true);
        }
        Ok(complete)
    }

    /// Looks through a directory the command made for protected entries.
    fn walk_new(&self, record: &Record, rel: Vec<u8>, fd: OwnedFd, scan: &mut Scan) {
        let mut stack = vec![(rel, Some(fd), None)];
        let mut held = 1;
        while let Some((rel, fd, id)) = stack.pop() {
            let fd = match fd {
                Some(fd) => {
                    held -= 1;
                    fd
                }
                // Not held: opened again beneath the root, and only if it
                // is still the directory that was listed.
                None => match open_new_path(self.root_fd(), &rel) {
                    Ok(fd) if rfs::fstat(&fd).is_ok_and(|s| Some((s.st_dev, s.st_ino)) == id) => fd,
                    _ => {
                        self.unchecked.borrow_mut().push(rel);
                        continue;
                    }
                },
            };
            let listed = self.each_within(&fd, |e| {
                let child = join(&rel, &e.name);
                let ident = if e.kind == FileType::Directory {
                    rfs::statat(&fd, OsStr::from_bytes(&e.name), AtFlags::SYMLINK_NOFOLLOW)
                        .ok()
                        .map(|s| (s.st_dev, s.st_ino))
                } else {
                    None
                };
                if let Some(id) = ident {
                    scan.new_dir(record, id, &child);
                } else {
                    scan.new_file(record, e.ino, &child);
                }
                if let Some(pattern) = self.ctx.protects(&child, e.kind) {
                    scan.new_protected.push((child, pattern));
                    return;
                }
                if ident.is_none() {
                    return;
                }
                if held >= HELD_DIRS {
                    stack.push((child, None, ident));
                    return;
                }
                match open_new_dir(&fd, &e.name) {
                    Ok(sub) => {
                        stack.push((child, Some(sub), None));
                        held += 1;
                    }
                    Err(_) => self.unchecked.borrow_mut().push(child),
                }
            });
            match listed {
                Ok(true) => {}
                Ok(false) => return,
                Err(_) => self.unchecked.borrow_mut().push(rel),
            }
        }
    }

    /// Renames back recorded directories (protected, or holding protected
    /// entries) that the command moved elsewhere beneath the root. True if
    /// any was.
    fn rename_back(&mut self, record: &Record, scan: &Scan) -> bool {
        let mut done: Vec<Vec<u8>> = Vec::new();
        for rel in &scan.missing {
            if done.iter().any(|d| within(rel, d)) {
                continue;
            }
            let Some(rec) = record.dirs.get(rel) else {
                continue;
            };
            let holds =
                record.entries.contains_key(rel) || beneath(&record.entries, rel).next().is_some();
            if !holds {
                continue;
            }
            let Some(src) = scan.new_dirs.get(&(rec.meta.dev, rec.meta.ino)) else {
                continue;
            };
            if src == rel || within(rel, src) || within(src, rel) {
                continue;
            }
            let pattern = record
                .entries
                .get(rel)
                .or_else(|| beneath(&record.entries, rel).next().map(|(_, e)| e))
                .map(|e| e.pattern.clone())
                .unwrap_or_default();
            // Whatever took its name goes to the quarantine.
            if lstat(self.root_fd(), rel).is_ok() && self.quarantine(rel).is_err() {
                continue;
            }
            let (parent, _) = parent_of(rel);
            if self.ensure_dirs(record, parent, &pattern).is_err() {
                continue;
            }
            if self.rename_within(src, rel).is_ok() {
                self.changes.push(Change {
                    path: show(rel),
                    pattern,
                    action: Action::Restored,
                });
                done.push(rel.clone());
            }
        }
        !done.is_empty()
    }

    /// Restores every recorded protected entry that differs.
    fn restore(&mut self, record: &mut Record, scan: &Scan) {
        let threshold = record.t0 - GRANULARITY_NS;
        let rels: Vec<Vec<u8>> = record.entries.keys().cloned().collect();
        let mut lost: Vec<Vec<u8>> = Vec::new();
        for rel in rels {
            if lost.iter().any(|l| within(&rel, l)) {
                continue;
            }
            let Some(entry) = record.entries.get(&rel).cloned() else {
                continue;
            };
            let present = if scan.ancestor_missing(parent_of(&rel).0) && !rel.is_empty() {
                // Its directory was replaced: look at it through descriptors.
                let (parent, name) = parent_of(&rel);
                open_dir(self.root_fd(), parent).ok().and_then(|d| {
                    rfs::statat(&d, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW).ok()
                })
            } else {
                lstat(self.root_fd(), &rel).ok()
            }
            .map(|st| Meta::of(&st));
            let verdict = judge(
                &entry,
                present.as_ref(),
                threshold,
                || {
                    let (parent, name) = parent_of(&rel);
                    let dir = open_dir(self.root_fd(), parent).ok()?;
                    present.and_then(|m| read_file(&dir, name, &m).ok().flatten())
                },
                || {
                    let (parent, name) = parent_of(&rel);
                    let dir = open_dir(self.root_fd(), parent).ok()?;
                    present.and_then(|m| read_xattrs(dir.as_fd(), name, &m).ok().flatten())
                },
            );
            let (fixed, replaced) = match verdict {
                Verdict::Same => continue,
                Verdict::DirMeta => (self.fix_dir_meta(&rel, &entry).is_ok(), false),
                Verdict::Differs => (
                    self.recreate(record, scan, &rel, &entry, present.is_some()),
                    true,
                ),
            };
            let action = if fixed {
                Action::Restored
            } else {
                // A directory that is not back holds nothing to restore;
                // one whose mode, owner or attributes could not be given
                // back is still the recorded one, its entries still
                // restored.
                if replaced && entry.meta.kind() == FileType::Directory {
                    lost.push(rel.clone());
                }
                Action::Reported
            };
            self.changes.push(Change {
                path: show(&rel),
                pattern: entry.pattern.clone(),
                action,
            });
            if fixed {
                // The restored entry is the record from now on.
                if let Ok(st) = lstat(self.root_fd(), &rel) {
                    if let Some(e) = record.entries.get_mut(&rel) {
                        e.meta = Meta::of(&st);
                    }
                }
            }
        }
    }

    /// Moves what is at `rel` aside (if anything) and creates the recorded
    /// entry in its place. False when it cannot be recreated.
    fn recreate(
        &mut self,
        record: &Record,
        scan: &Scan,
        rel: &[u8],
        entry: &Entry,
        present: bool,
    ) -> bool {
        let kind = entry.meta.kind();
        let restorable = matches!(
            (&entry.data, kind),
            (Data::Copy(_), FileType::RegularFile)
                | (Data::Link(_), FileType::Symlink)
                | (_, FileType::Directory)
        );
        if !restorable {
            return self.rename_back_entry(record, scan, rel, entry, present);
        }
        let (parent, name) = parent_of(rel);
        // Content past the file size limit cannot be written back (the
        // write would raise `SIGXFSZ`, ending the embedding program): the
        // change is reported, and what the command left stays in place.
        if let Data::Copy(c) = &entry.data {
            if sandgate_rootfs::within_file_size_limit(c.len() as u64).is_err() {
                return false;
            }
        }
        if self.ensure_dirs(record, parent, &entry.pattern).is_err() {
            return false;
        }
        if present && self.quarantine(rel).is_err() {
            return false;
        }
        let Ok(dir) = open_dir(self.root_fd(), parent) else {
            return false;
        };
        in_dir(dir.as_fd(), || {
            create_entry(&dir, self.root, parent, name, entry)
        })
        .is_ok()
    }

    /// An entry recorded by identity only (a file too large to copy, a
    /// fifo, a socket, a device) that the command renamed or linked to
    /// another name beneath the root, found there by its inode, is renamed
    /// back; what took its name goes to the quarantine. True when it is
    /// back as recorded (a rename moves only its ctime); false when it is
    /// not found, or is back but changed.
    fn rename_back_entry(
        &mut self,
        record: &Record,
        scan: &Scan,
        rel: &[u8],
        entry: &Entry,
        present: bool,
    ) -> bool {
        let r = &entry.meta;
        let Some(src) = scan.new_files.get(&r.ino) else {
            return false;
        };
        let (sp, sn) = parent_of(src);
        let found = open_dir(self.root_fd(), sp)
            .ok()
            .and_then(|d| rfs::statat(&d, OsStr::from_bytes(sn), AtFlags::SYMLINK_NOFOLLOW).ok());
        let Some(m) = found.map(|st| Meta::of(&st)) else {
            return false;
        };
        if (m.dev, m.ino, m.kind()) != (r.dev, r.ino, r.kind()) {
            return false;
        }
        let (parent, name) = parent_of(rel);
        if self.ensure_dirs(record, parent, &entry.pattern).is_err()
            || (present && self.quarantine(rel).is_err())
        {
            return false;
        }
        // With one link when recorded, any other name is the command's, and
        // the entry is renamed back. With more, the other names may be the
        // host's: it is linked back, and they stay.
        let back = if r.nlink > 1 {
            open_dir(self.root_fd(), sp).and_then(|from| {
                let to = open_dir(self.root_fd(), parent)?;
                in_dir(to.as_fd(), || {
                    rfs::linkat(
                        &from,
                        OsStr::from_bytes(sn),
                        &to,
                        OsStr::from_bytes(name),
                        AtFlags::empty(),
                    )
                })
            })
        } else {
            self.rename_within(src, rel)
        };
        back.is_ok()
            && (m.mode, m.uid, m.gid, m.size, m.mtime) == (r.mode, r.uid, r.gid, r.size, r.mtime)
    }

    fn fix_dir_meta(&self, rel: &[u8], entry: &Entry) -> Result<(), Errno> {
        let meta = &entry.meta;
        let fd = open_dir(self.root_fd(), rel)?;
        let _ = rfs::fchown(
            &fd,
            Some(rfs::Uid::from_raw(meta.uid)),
            Some(rfs::Gid::from_raw(meta.gid)),
        );
        if let Some(want) = &entry.xattrs {
            // With the owner's permissions while they are set (`user.*`
            // needs write permission), then the recorded mode, which the
            // recorded ACL agrees with.
            rfs::fchmod(&fd, Mode::from_raw_mode(meta.perm() | 0o700))?;
            let set = set_xattrs(fd.as_fd(), want);
            rfs::fchmod(&fd, Mode::from_raw_mode(meta.perm()))?;
            return set;
        }
        rfs::fchmod(&fd, Mode::from_raw_mode(meta.perm()))
    }

    /// Makes sure every component of `rel` is a directory: a missing one is
    /// made (with its recorded mode when recorded), a non-directory in the
    /// way is moved to the quarantine.
    fn ensure_dirs(&mut self, record: &Record, rel: &[u8], pattern: &str) -> Result<(), Errno> {
        if rel.is_empty() {
            return Ok(());
        }
        let mut done = 0;
        loop {
            let end = rel[done..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(rel.len(), |i| done + i);
            let prefix = &rel[..end];
            let (parent, name) = parent_of(prefix);
            let dir = open_dir(self.root_fd(), parent)?;
            match rfs::statat(&dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {}
                other => {
                    if other.is_ok() {
                        if self.quarantine(prefix).is_err() {
                            return Err(Errno::NOTDIR);
                        }
                        self.changes.push(Change {
                            path: show(prefix),
                            pattern: pattern.to_owned(),
                            action: Action::Quarantined,
                        });
                    }
                    let mode = record.dirs.get(prefix).map_or(0o755, |d| d.meta.perm());
                    in_dir(dir.as_fd(), || {
                        rfs::mkdirat(&dir, OsStr::from_bytes(name), Mode::from_raw_mode(mode))
                    })?;
                    if let Some(d) = record.dirs.get(prefix) {
                        // Owner and mode go to the directory just made,
                        // held by an `O_PATH` descriptor opened without
                        // following a link: a process still running on the
                        // root may swap it for a symlink out of the root
                        // meanwhile, and a `chmodat` by name followed that
                        // link and gave the file it leads to this mode.
                        // (One made without read permission for its
                        // owner is opened as a path, its mode set through
                        // /proc.)
                        let uid = Some(rfs::Uid::from_raw(d.meta.uid));
                        let gid = Some(rfs::Gid::from_raw(d.meta.gid));
                        let made = OsStr::from_bytes(name);
                        match rfs::openat(&dir, made, DIR_FLAGS, Mode::empty()) {
                            Ok(fd) => {
                                let _ = rfs::fchown(&fd, uid, gid);
                                let _ = rfs::fchmod(&fd, Mode::from_raw_mode(mode));
                            }
                            Err(Errno::ACCESS) => {
                                let fd = rfs::openat(&dir, made, PATH_FLAGS, Mode::empty())?;
                                let _ = rfs::chownat(&fd, c"", uid, gid, AtFlags::EMPTY_PATH);
                                let _ = chmod_path_fd(fd.as_fd(), mode);
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
            if end == rel.len() {
                return Ok(());
            }
            done = end + 1;
        }
    }

    /// Renames `from` to `to`, both beneath the root, their parents opened
    /// without following links.
    fn rename_within(&self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        let (fp, fname) = parent_of(from);
        let (tp, tname) = parent_of(to);
        let fdir = self.dir_root(fp)?;
        let tdir = self.dir_root(tp)?;
        in_dir(fdir.as_fd(), || {
            in_dir(tdir.as_fd(), || {
                fdir.rename_to(
                    bytes_path(fname),
                    &tdir,
                    bytes_path(tname),
                    RenameMode::NoReplace,
                )
                .map_err(|e| e.errno().map_or(Errno::IO, Errno::from_raw_os_error))
            })
        })
    }

    /// The directory `rel` as a [`Root`], opened without following links.
    fn dir_root(&self, rel: &[u8]) -> Result<Root, Errno> {
        let fd = open_dir(self.root_fd(), rel)?;
        Ok(Root::from_fd(
            fd,
            Resolver::Auto,
            self.root.name().join(bytes_path(rel)),
        ))
    }

    /// Moves `rel` into this settle's quarantine directory, at the same
    /// relative path.
    fn quarantine(&self, rel: &[u8]) -> Result<(), Errno> {
        let mut current = self
            .quarantine
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if current.is_none() {
            *current = Some(self.make_quarantine()?);
        }
        let (parent, name) = parent_of(rel);
        let from = self.dir_root(parent)?;
        // The same relative path in the quarantine, made and opened one
        // component at a time (it may be longer than one path can name).
        // A component this settle already quarantined as something else
        // than a directory (a link the command made at `.github`, with the
        // command's version of `.github/workflows/ci.yml` to go after it)
        // cannot hold it: such an entry goes to a quarantine directory of
        // its own, else it stayed where it was and was not restored.
        // Nor can one where this settle already put an entry of that
        // name: the directory the command put at `.github` after moving
        // the host's away, with a `workflows/ci.yml` of its own, went
        // there before the command's version of the host's
        // `.github/workflows/ci.yml` (the host's directory renamed back
        // around it); the rename refused to replace it, and the command's
        // version stayed in place, only reported.
        let mut fresh = false;
        loop {
            let (to, q_name) = loop {
                let Some(q) = current.as_ref() else {
                    return Err(Errno::IO);
                };
                match quarantine_parent(q, parent) {
                    Ok(to) => break (to, q.name().to_path_buf()),
                    Err(Errno::NOTDIR | Errno::LOOP) if !fresh => {
                        fresh = true;
                        *current = Some(self.make_quarantine()?);
                    }
                    Err(e) => return Err(e),
                }
            };
            let to = Root::from_fd(to, Resolver::Auto, q_name.join(bytes_path(parent)));
            let rename = || {
                from.rename_to(
                    bytes_path(name),
                    &to,
                    bytes_path(name),
                    RenameMode::NoReplace,
                )
                .map_err(|e| e.errno().map_or(Errno::IO, Errno::from_raw_os_error))
            };
            let done = in_dir(from.as_fd(), || match rename() {
                // An immutable or append-only entry cannot be moved: it
                // goes to the quarantine without those flags.
                Err(Errno::PERM) if unpin(from.as_fd(), name) => rename(),
                done => done,
            });
            match done {
                Err(Errno::EXIST | Errno::NOTEMPTY) if !fresh => {
                    fresh = true;
                    *current = Some(self.make_quarantine()?);
                }
                done => return done,
            }
        }
    }

    /// This settle's quarantine directory: beside the root when possible,
    /// else inside it. Made once per settle and per protector.
    fn make_quarantine(&self) -> Result<Root, Errno> {
        let stamp = stamp();
        if let Some(beside) = &self.quarantine.beside {
            if let Ok(q) = own_dir_beside(beside, &stamp) {
                // Only usable if renames from the root can reach it.
                let same_fs = rfs::fstat(&q)
                    .ok()
                    .zip(rfs::fstat(self.root_fd()).ok())
                    .is_some_and(|(a, b)| a.st_dev == b.st_dev);
                if same_fs {
                    return Ok(q);
                }
                let _ = std::fs::remove_dir(beside.join(&stamp));
            }
        }
        // Inside the root, where the command can write too: made one
        // component at a time, following no symlink. Whatever the command
        // put at `.sandgate-quarantine` (a file, a symlink into a protected
        // directory, a directory it cannot be used through) leaves this
        // settle's quarantine at `.sandgate-quarantine-<stamp>` instead, a
        // name made here and now.
        let root = self.root_fd();
        let mkdir = |dir: BorrowedFd<'_>, name: &str| match rfs::mkdirat(
            dir,
            name,
            Mode::from_raw_mode(0o700),
        ) {
            Ok(()) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(e),
        };
        let shared = mkdir(root, ".sandgate-quarantine")
            .and_then(|()| open_dir(root, b".sandgate-quarantine"))
            .and_then(|dir| {
                rfs::mkdirat(&dir, stamp.as_str(), Mode::from_raw_mode(0o700))?;
                rfs::openat(&dir, stamp.as_str(), DIR_FLAGS, Mode::empty())
            });
        let (inside, fd) = match shared {
            Ok(fd) => (format!(".sandgate-quarantine/{stamp}"), fd),
            Err(_) => {
                let own = format!(".sandgate-quarantine-{stamp}");
                rfs::mkdirat(root, own.as_str(), Mode::from_raw_mode(0o700))?;
                let fd = open_dir(root, own.as_bytes())?;
                (own, fd)
            }
        };
        Ok(Root::from_fd(
            fd,
            Resolver::Auto,
            self.root.name().join(&inside),
        ))
    }
}

/// This settle's directory `stamp` in the quarantine `beside` the root,
/// made (mode 0700) or found there, only when it is a directory of this
/// process's user that no one else may write: beside a write root in a
/// shared parent (`/tmp`), another user can make that name first (a
/// directory of theirs, one anyone may write, a symlink), and what went
/// there would be theirs to read, move or swap. Opened without following
/// a symlink.
fn own_dir_beside(beside: &Path, stamp: &str) -> Result<Root, Errno> {
    let (Some(parent), Some(name)) = (beside.parent(), beside.file_name()) else {
        return Err(Errno::INVAL);
    };
    let parent = rfs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    match rfs::mkdirat(&parent, name, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    let q = rfs::openat(&parent, name, DIR_FLAGS, Mode::empty())?;
    let st = rfs::fstat(&q)?;
    if st.st_uid != rustix::process::geteuid().as_raw() || st.st_mode & 0o002 != 0 {
        return Err(Errno::PERM);
    }
    rfs::mkdirat(&q, stamp, Mode::from_raw_mode(0o700))?;
    let fd = rfs::openat(&q, stamp, DIR_FLAGS, Mode::empty())?;
    Ok(Root::from_fd(fd, Resolver::Auto, beside.join(stamp)))
}

impl Drop for Settle<'_> {
    fn drop(&mut self) {
        // The next settle gets a directory of its own.
        *self
            .quarantine
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
    }
}

enum Verdict {
    Same,
    /// A protected directory whose mode or owner changed.
    DirMeta,
    Differs,
}

fn judge(
    entry: &Entry,
    present: Option<&Meta>,
    threshold: i128,
    content: impl FnOnce() -> Option<Vec<u8>>,
    xattrs: impl FnOnce() -> Option<Xattrs>,
) -> Verdict {
    let Some(m) = present else {
        return Verdict::Differs;
    };
    let r = &entry.meta;
    if m.kind() != r.kind() || m.ino != r.ino || m.dev != r.dev {
        return Verdict::Differs;
    }
    if r.kind() == FileType::Directory {
        // Its extended attributes (an ACL granting another user write, a
        // default ACL every file made in it later would take) change its
        // ctime, which the entries made in it move too: read again then.
        let xattrs_moved = m.ctime != r.ctime
            && entry
                .xattrs
                .as_ref()
                .is_some_and(|want| xattrs().is_none_or(|now| !same_xattrs(&now, want)));
        return if m.mode != r.mode || m.uid != r.uid || m.gid != r.gid || xattrs_moved {
            Verdict::DirMeta
        } else {
            Verdict::Same
        };
    }
    if !m.same_as(r) {
        return Verdict::Differs;
    }
    if m.ctime >= threshold {
        if let Data::Copy(c) = &entry.data {
            if content().as_deref() != Some(&c[..]) {
                return Verdict::Differs;
            }
        }
    }
    Verdict::Same
}

const PATH_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Sets the permissions of the directory open as the `O_PATH` descriptor
/// `fd`: that very inode, whatever names it has now.
fn chmod_path_fd(fd: BorrowedFd<'_>, perm: u32) -> Result<(), Errno> {
    // fchmod refuses an `O_PATH` descriptor; its /proc link does not.
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rfs::chmodat(
        rfs::CWD,
        link.as_str(),
        Mode::from_raw_mode(perm),
        AtFlags::empty(),
    )
}

/// Opens the directory `name` of `dir`, one the command made, following no
/// symlink. A directory it left without read or search permission for the
/// host (`chmod 000 d`) would hide what it holds from a host that is not
/// root; if the host owns it, it gets the owner's read, write and search
/// permission (through an `O_PATH` descriptor of that very directory) and
/// is opened again, so that it is searched and a protected entry in it can
/// be moved to the quarantine.
fn open_new_dir(dir: &OwnedFd, name: &[u8]) -> Result<OwnedFd, Errno> {
    match rfs::openat(dir, OsStr::from_bytes(name), DIR_FLAGS, Mode::empty()) {
        Err(Errno::ACCESS) => {}
        done => return done,
    }
    let fd = rfs::openat(dir, OsStr::from_bytes(name), PATH_FLAGS, Mode::empty())?;
    let mode = rfs::fstat(&fd)?.st_mode & 0o7777;
    chmod_path_fd(fd.as_fd(), mode | 0o700)?;
    rfs::openat(&fd, c".", DIR_FLAGS, Mode::empty())
}

/// Opens the directory `rel` beneath `root` one component at a time, never
/// through a symlink, as [`open_new_dir`] opens each (giving the owner
/// access to one the command made unreadable).
fn open_new_path(root: BorrowedFd<'_>, rel: &[u8]) -> Result<OwnedFd, Errno> {
    let mut fd = rfs::openat(root, c".", DIR_FLAGS, Mode::empty())?;
    for comp in rel.split(|&b| b == b'/') {
        fd = open_new_dir(&fd, comp)?;
    }
    Ok(fd)
}

/// The inode flags that keep an entry from being renamed, and a directory
/// from having names added or removed, even by root.
const PINNED: rfs::IFlags = rfs::IFlags::IMMUTABLE.union(rfs::IFlags::APPEND);

/// Takes the immutable and append-only flags off the regular file or
/// directory `name` of `dir` (opened without following a symlink, and
/// checked to be the entry looked at). True when it had any.
fn unpin(dir: BorrowedFd<'_>, name: &[u8]) -> bool {
    let name = OsStr::from_bytes(name);
    let Ok(st) = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return false;
    };
    if !matches!(
        FileType::from_raw_mode(st.st_mode),
        FileType::RegularFile | FileType::Directory
    ) {
        return false;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let Ok(fd) = rfs::openat(dir, name, flags | OFlags::CLOEXEC, Mode::empty()) else {
        return false;
    };
    let same = rfs::fstat(&fd).is_ok_and(|now| (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino));
    match rfs::ioctl_getflags(&fd) {
        Ok(f) if same && f.intersects(PINNED) => rfs::ioctl_setflags(&fd, f - PINNED).is_ok(),
        _ => false,
    }
}

/// Runs `op`, which adds or removes names in the directory open as `dir`.
/// A host that is not root is refused that in a directory without write
/// permission for it: one the host keeps read-only (and so recorded), or
/// one the command made so. Then, when the host owns the directory, `op`
/// runs once more with the owner's write and search permission added, and
/// the directory's mode is put back after, so that a read-only directory
/// cannot keep a change in it from being undone.
fn in_dir<T>(dir: BorrowedFd<'_>, mut op: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    match op() {
        Err(Errno::ACCESS) => {}
        // An immutable or append-only directory (`chattr +i`, `+a`; a
        // command run as root keeps the capability to set them) refuses
        // even root: its flags come off for the time of `op` and are put
        // back after.
        Err(Errno::PERM) => {
            let flags = rfs::ioctl_getflags(dir).map_err(|_| Errno::PERM)?;
            if !flags.intersects(PINNED) {
                return Err(Errno::PERM);
            }
            rfs::ioctl_setflags(dir, flags - PINNED)?;
            let done = op();
            let _ = rfs::ioctl_setflags(dir, flags);
            return done;
        }
        done => return done,
    }
    let mode = rfs::fstat(dir)?.st_mode & 0o7777;
    if mode & 0o300 == 0o300 {
        return Err(Errno::ACCESS);
    }
    rfs::fchmod(dir, Mode::from_raw_mode(mode | 0o300))?;
    let done = op();
    let _ = rfs::fchmod(dir, Mode::from_raw_mode(mode));
    done
}

/// Creates `name` in `dir` as `entry` records it: under a temporary name,
/// with its mode, owner and times, then renamed to `name` (which must be
/// free).
fn create_entry(
    dir: &OwnedFd,
    root: &Root,
    parent: &[u8],
    name: &[u8],
    entry: &Entry,
) -> Result<(), Errno> {
    let m = &entry.meta;
    let owner = (
        Some(rfs::Uid::from_raw(m.uid)),
        Some(rfs::Gid::from_raw(m.gid)),
    );
    let times = Timestamps {
        last_access: rfs::Timespec {
            tv_sec: m.atime.0,
            tv_nsec: m.atime.1 as _,
        },
        last_modification: rfs::Timespec {
            tv_sec: m.mtime.0,
            tv_nsec: m.mtime.1 as _,
        },
    };
    if m.kind() == FileType::Directory {
        rfs::mkdirat(dir, OsStr::from_bytes(name), Mode::from_raw_mode(0o700))?;
        let fd = rfs::openat(dir, OsStr::from_bytes(name), DIR_FLAGS, Mode::empty())?;
        let _ = rfs::fchown(&fd, owner.0, owner.1);
        if let Some(want) = &entry.xattrs {
            set_xattrs(fd.as_fd(), want)?;
        }
        rfs::fchmod(&fd, Mode::from_raw_mode(m.perm()))?;
        return Ok(());
    }
    let tmp = {
        let mut t = b".".to_vec();
        t.extend_from_slice(&name[..name.len().min(200)]);
        t.extend_from_slice(format!(".sandgate-restore-{}", stamp()).as_bytes());
        t
    };
    match &entry.data {
        Data::Copy(content) => {
            use std::io::Write;
            sandgate_rootfs::within_file_size_limit(content.len() as u64)
                .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::FBIG))?;
            // Made without a name where the filesystem allows it, and
            // linked in at `name` when complete: a temporary name in a
            // directory the command can write could be replaced by a
            // process still running on the root (a second command) while
            // the content was written and synced, and the rename then put
            // that process's file at the protected name, reported as
            // restored.
            let unnamed = rfs::openat(
                dir,
                c".",
                OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            );
            let (fd, named) = match unnamed {
                Ok(fd) => (fd, false),
                Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOENT) => (
                    rfs::openat(
                        dir,
                        OsStr::from_bytes(&tmp),
                        OFlags::WRONLY
                            | OFlags::CREATE
                            | OFlags::EXCL
                            | OFlags::NOFOLLOW
                            | OFlags::CLOEXEC,
                        Mode::from_raw_mode(0o600),
                    )?,
                    true,
                ),
                Err(e) => return Err(e),
            };
            let mut f = std::fs::File::from(fd);
            let written = f
                .write_all(content)
                .and_then(|()| f.sync_data())
                .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO));
            let finish = written.and_then(|()| {
                let _ = rfs::fchown(&f, owner.0, owner.1);
                // Without what the record has not: a default ACL of the
                // directory it is made in (which the command may have
                // set) would otherwise come with it. Set while the owner
                // may still write it; the recorded mode after.
                if let Some(want) = &entry.xattrs {
                    set_xattrs(f.as_fd(), want)?;
                }
                rfs::fchmod(&f, Mode::from_raw_mode(m.perm()))?;
                rfs::futimens(&f, &times)
            });
            if let Err(e) = finish {
                if named {
                    let _ = rfs::unlinkat(dir, OsStr::from_bytes(&tmp), AtFlags::empty());
                }
                return Err(e);
            }
            if !named {
                // Linking fails if `name` is taken, as the rename below
                // would.
                let me = format!("/proc/self/fd/{}", f.as_raw_fd());
                return rfs::linkat(
                    rfs::CWD,
                    me.as_str(),
                    dir,
                    OsStr::from_bytes(name),
                    AtFlags::SYMLINK_FOLLOW,
                );
            }
            // What was renamed in must be the file written here, not one
            // put at the temporary name meanwhile: otherwise the change
            // is reported, not said to be undone.
            let mine = rfs::fstat(&f)?;
            rename_in(dir, root, parent, &tmp, name, &mine)
        }
        Data::Link(target) => {
            rfs::symlinkat(OsStr::from_bytes(target), dir, OsStr::from_bytes(&tmp))?;
            // Owner and times go to the link through a descriptor of it,
            // checked to be a link to the recorded target: a process still
            // running on the root could put something else at the
            // temporary name meanwhile (a hard link to a file of the
            // host's, which a `chown` by name would have given the link's
            // owner), and what is renamed in must be this link.
            let undo = |e: Errno| {
                let _ = rfs::unlinkat(dir, OsStr::from_bytes(&tmp), AtFlags::empty());
                e
            };
            let link = rfs::openat(
                dir,
                OsStr::from_bytes(&tmp),
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(undo)?;
            let mine = rfs::fstat(&link).map_err(undo)?;
            let says = rfs::readlinkat(&link, c"", Vec::new()).map_err(undo)?;
            if FileType::from_raw_mode(mine.st_mode) != FileType::Symlink
                || says.as_bytes() != &target[..]
            {
                return Err(Errno::EXIST);
            }
            let _ = rfs::chownat(&link, c"", owner.0, owner.1, AtFlags::EMPTY_PATH);
            let _ = rfs::utimensat(&link, c"", &times, AtFlags::EMPTY_PATH);
            // A link cannot be made without a name: what was put at the
            // temporary name after the check is renamed in as well. Only
            // this link (held open, so its inode is not another's) is said
            // to be restored; anything else there is reported.
            rename_in(dir, root, parent, &tmp, name, &mine)
        }
        Data::None => Err(Errno::NOENT),
    }
}

/// Renames `tmp` to `name` in `dir` (`parent`, root-relative, of `root`)
/// without replacing anything there, then checks that what stands at
/// `name` is `mine`: a process still running on the root may have put
/// something else at the temporary name. On a failed rename `tmp` is
/// removed; something other than `mine` renamed in is `EXIST`, for the
/// caller to report rather than call restored.
fn rename_in(
    dir: &OwnedFd,
    root: &Root,
    parent: &[u8],
    tmp: &[u8],
    name: &[u8],
    mine: &rfs::Stat,
) -> Result<(), Errno> {
    let undo = |e: Errno| {
        let _ = rfs::unlinkat(dir, OsStr::from_bytes(tmp), AtFlags::empty());
        e
    };
    let dup = rustix::io::fcntl_dupfd_cloexec(dir, 0).map_err(undo)?;
    let droot = Root::from_fd(dup, Resolver::Auto, root.name().join(bytes_path(parent)));
    droot
        .rename(bytes_path(tmp), bytes_path(name), RenameMode::NoReplace)
        .map_err(|e| undo(e.errno().map_or(Errno::IO, Errno::from_raw_os_error)))?;
    let now = rfs::statat(dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW)?;
    if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino) {
        Ok(())
    } else {
        Err(Errno::EXIST)
    }
}

/// Makes and opens `parent` (root-relative) beneath the quarantine `q`,
/// one component at a time, never through a symlink.
fn quarantine_parent(q: &Root, parent: &[u8]) -> Result<OwnedFd, Errno> {
    let mut to = rfs::openat(q, c".", DIR_FLAGS, Mode::empty())?;
    for comp in parent.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        let comp = OsStr::from_bytes(comp);
        match rfs::mkdirat(&to, comp, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e),
        }
        to = rfs::openat(&to, comp, DIR_FLAGS, Mode::empty())?;
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry keeps an entry only while a protector of that root
    /// lives: protectors of many roots, made and dropped, leave it empty
    /// (its table freed too), and two protectors of one root share it until
    /// the last goes. The only test in this crate's unit tests that makes
    /// protectors, so nothing else touches the registry meanwhile.
    #[test]
    fn the_registry_forgets_a_root_with_its_last_protector() {
        let guard = || {
            sandgate_fileguard::GuardBuilder::new()
                .pattern("*.lock")
                .build()
                .unwrap()
        };
        let dirs: Vec<_> = (0..50).map(|_| tempfile::tempdir().unwrap()).collect();
        let ps: Vec<_> = dirs
            .iter()
            .map(|d| Protector::new(d.path(), guard()).unwrap())
            .collect();
        assert_eq!(registry().lock().unwrap().len(), 50);
        drop(ps);
        assert!(registry().lock().unwrap().is_empty());
        assert_eq!(registry().lock().unwrap().capacity(), 0);
        let a = Protector::new(dirs[0].path(), guard()).unwrap();
        let b = Protector::new(dirs[0].path(), guard()).unwrap();
        assert!(Arc::ptr_eq(&a.shared, &b.shared));
        drop(a);
        assert_eq!(registry().lock().unwrap().len(), 1);
        drop(b);
        assert!(registry().lock().unwrap().is_empty());
    }
}
