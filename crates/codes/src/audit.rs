//! Audit events: one per operation, refused ones included, never content.
//!
//! Here, beside the codes, so that every layer that reports (the facade's
//! sandbox and executor, the fetcher) shares one event type.

use std::sync::Arc;
use std::time::SystemTime;

use crate::ErrorCode;

/// What one sandbox operation did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEvent {
    /// The operation: `read`, `write`, `edit`, `list`, `stat`, `mkdir`,
    /// `delete`, `rename`, `glob`, `grep`; an executor's `exec` (a shell
    /// command or an argv), `git` (confined git) and `connect` (a
    /// connection a command made through the egress proxy: `path` the
    /// `host:port` asked for, `size` the bytes relayed, `outcome` `OK` or
    /// `E_NET_DENIED`); a fetcher's `fetch` (`path` the origin,
    /// `scheme://host:port`, of every hop taken, ` -> ` between them; never
    /// the URL's user, password, path or query, nor a header or body).
    pub op: &'static str,
    /// The root-relative path. Mutating operations report where the name
    /// resolved (through in-root symlinks) once it did, a deny rule's
    /// refusal of that resolved name included; read-only operations
    /// report the normalized name as asked; a name refused before parsing is
    /// reported as given. For `rename`, `from -> to`. For `exec` and `git`,
    /// the working directory as asked (empty for the root); the command
    /// itself is not recorded. For `fetch`, the hops' origins (empty for a
    /// URL that does not parse).
    pub path: String,
    /// Bytes read or written, when the operation moved content; for `exec`
    /// and `git`, the bytes of output returned (stdout and stderr); for
    /// `fetch`, the bytes of body returned.
    pub size: Option<u64>,
    /// When the operation finished.
    pub time: SystemTime,
    /// `OK` or the refusal's code.
    pub outcome: ErrorCode,
    /// For `exec` and `git`: the command's exit code, when it ran.
    pub exit_code: Option<i32>,
    /// For `exec` and `git`: the limit that stopped the command (`memory`,
    /// `tasks`, `cpu`, `output`, `timeout`, `file_size`), when one did and
    /// sandgate saw it.
    pub limit: Option<&'static str>,
}

/// A callback that receives every [`AuditEvent`]. It is called on the thread
/// that ran the operation, possibly from many threads at once.
pub type AuditSink = Arc<dyn Fn(&AuditEvent) + Send + Sync>;
