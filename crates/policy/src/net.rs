//! `net.allow` at load: each entry parsed by netguard, restricted mode's
//! refusals applied, and the policy's network rules produced for the
//! mechanisms that enforce them.

use sandgate_netguard::{Mode, NetEntry};

use crate::error::PolicyErrorKind;
use crate::SecurityMode;

impl From<SecurityMode> for Mode {
    fn from(mode: SecurityMode) -> Mode {
        match mode {
            SecurityMode::Restricted => Mode::Restricted,
            SecurityMode::TrustedHost => Mode::TrustedHost,
        }
    }
}

/// The gate rule for one `net.allow` entry: well-formed in every mode,
/// and admitted by restricted mode when `mode` says so (`None`: the mode
/// is unknown because its own key was refused; only the form is checked).
pub(crate) fn gate_entry(
    raw: &str,
    mode: Option<SecurityMode>,
) -> Result<NetEntry, (PolicyErrorKind, String)> {
    let quoted = raw.escape_debug();
    let entry = NetEntry::parse(raw).map_err(|why| {
        (
            PolicyErrorKind::NetEntryMalformed,
            format!("\"{quoted}\" is malformed: {why}"),
        )
    })?;
    if mode == Some(SecurityMode::Restricted) {
        entry.check_restricted().map_err(|why| {
            (
                PolicyErrorKind::NetEntryRefused,
                format!("\"{quoted}\": {why}"),
            )
        })?;
    }
    Ok(entry)
}
