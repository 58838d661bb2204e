//! The hook through which deny-write patterns bind the shell.
//!
//! The executor knows nothing of patterns. An embedder that protects paths
//! beneath the write root sets [`ExecConfig::protected`](crate::exec::ExecConfig::protected);
//! around every command the executor calls [`ProtectedPaths::before`] before
//! the command starts (a failure there runs nothing: exit code 127) and
//! [`Checkpoint::after`] once the command and every process it started
//! are dead, before the call returns. What `after` answers is the result's
//! [`protected_changes`](crate::exec::ExecResult::protected_changes).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Records the protected state before each command ([`before`](Self::before)).
pub trait ProtectedPaths: Send + Sync {
    /// Called before each command starts. An error keeps the command from
    /// running.
    ///
    /// # Errors
    ///
    /// When the protected state cannot be recorded.
    fn before(&self) -> io::Result<Box<dyn Checkpoint>>;

    /// [`before`](Self::before), for a command that may wait for its turn
    /// on the write root (another process's command holds it) no later
    /// than `deadline` and only while `stop` answers `false`. An error of
    /// kind [`io::ErrorKind::TimedOut`] or [`io::ErrorKind::Interrupted`]
    /// says the turn did not come in time or the call was aborted. The
    /// default waits as [`before`](Self::before) does.
    ///
    /// # Errors
    ///
    /// As [`before`](Self::before).
    fn before_until(
        &self,
        deadline: std::time::Instant,
        stop: &dyn Fn() -> bool,
    ) -> io::Result<Box<dyn Checkpoint>> {
        let _ = (deadline, stop);
        self.before()
    }

    /// The write root the protected entries are beneath. When it is given
    /// and a command runs in the view, the entries its checkpoint
    /// [lists](Checkpoint::entries) are bound read-only there
    /// ([`crate::binds`]). The default names none: no binds.
    fn root(&self) -> Option<&Path> {
        None
    }

    /// How the check after the last command found what changed
    /// ([`ProtectedDetection`]), read once its [`Checkpoint::after`] has
    /// run; it becomes the result's report's
    /// [`protected_detection`](crate::confine::ConfinementReport::protected_detection).
    /// The default says nothing.
    fn detection(&self) -> Option<ProtectedDetection> {
        None
    }
}

/// How the check after a command found the directories it changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedDetection {
    /// `inotify` (the kernel named the directories that changed) or
    /// `ctime_walk` (every recorded directory's ctime was compared: the
    /// slower fallback, taken for good once inotify cannot be trusted).
    pub mode: String,
    /// Why inotify is not used, for `ctime_walk`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One command's record of the protected state.
pub trait Checkpoint: Send {
    /// Called once, after the command and everything it started are dead:
    /// finds what changed since [`ProtectedPaths::before`], undoes it, and
    /// answers what was found and done.
    fn after(self: Box<Self>) -> Vec<ProtectedChange>;

    /// The protected entries as recorded, for the read-only binds of a
    /// command that runs in namespaces ([`crate::binds`]). The default
    /// lists none: everything is left to [`after`](Self::after).
    fn entries(&self) -> Vec<ProtectedEntry> {
        Vec::new()
    }
}

/// What a protected entry was when recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A fifo, socket or device.
    Other,
}

/// One protected entry beneath the write root, as recorded before the
/// command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtectedEntry {
    /// Its path beneath the write root (relative, no `..`).
    pub path: PathBuf,
    /// Its device when recorded.
    pub dev: u64,
    /// Its inode when recorded.
    pub ino: u64,
    /// Its type when recorded.
    pub kind: EntryKind,
    /// Its link count when recorded.
    pub nlink: u64,
    /// A directory every entry beneath which is protected too, so that it
    /// may be bound read-only as a whole. When false, a protected
    /// directory is only pinned (it cannot be renamed or removed) and its
    /// protected entries are bound one by one.
    pub subtree: bool,
}

/// What was done about a protected entry a command changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProtectedAction {
    /// Put back as it was before the command.
    Restored,
    /// A new protected entry, moved into the quarantine beside the write root.
    Quarantined,
    /// Changed, and could not be undone.
    Reported,
}

impl ProtectedAction {
    /// `restored`, `quarantined` or `reported`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtectedAction::Restored => "restored",
            ProtectedAction::Quarantined => "quarantined",
            ProtectedAction::Reported => "reported",
        }
    }
}

impl fmt::Display for ProtectedAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One protected entry a command changed, and what was done about it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProtectedChange {
    /// The entry's path beneath the write root.
    pub path: String,
    /// The deny-write pattern that protects it, as written.
    pub pattern: String,
    /// What was done.
    pub action: ProtectedAction,
}
