//! The audit sink as a JSON-lines file: one object per operation, refusals
//! included, never content.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use sandgate::{AuditEvent, AuditSink};

/// Appends each event to `path` as a JSON line (`time` in milliseconds since
/// the epoch, `op`, `path`, `size`, `outcome`, and for `exec` and `git`
/// `exit_code` when the command ran and `limit` when one stopped it). The file is created with
/// mode 0600 when missing.
pub fn json_lines_file(path: &Path) -> std::io::Result<AuditSink> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    let file = Mutex::new(file);
    Ok(Arc::new(move |e: &AuditEvent| {
        let mut line = serde_json::json!({
            "time_ms": e.time.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
            "op": e.op,
            "path": e.path,
            "size": e.size,
            "outcome": e.outcome.as_str(),
        });
        if let Some(code) = e.exit_code {
            line["exit_code"] = code.into();
        }
        if let Some(limit) = e.limit {
            line["limit"] = limit.into();
        }
        let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
        // A full disk must not fail the operation itself.
        let _ = writeln!(f, "{line}");
    }))
}
