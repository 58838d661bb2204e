//! What the floor's adversarial tests (floorsig24.rs, floorsock24.rs,
//! eintr21.rs) share: an executor that runs commands without namespaces,
//! and the python3 they drive their probes with.

// Each suite uses a part of this.
#![allow(dead_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use sandgate_shellexec::confine::{ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{ExecConfig, LocalShellExecutor, ShellExecutor};

pub const PYTHON: &str = "/usr/bin/python3";

/// Bytes a command wrote, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A started executor that runs commands on the floor (no namespaces,
/// best-effort confinement, `PATH=/usr/bin:/bin`), each for `timeout`
/// unless a command says otherwise.
pub fn floor_executor(timeout: Duration) -> LocalShellExecutor {
    let ex = LocalShellExecutor::new(ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: timeout,
        max_output_bytes: 1 << 20,
        env_inherit: Vec::new(),
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec::default(),
        limits: Default::default(),
        grace: Duration::from_millis(500),
        host_env: Some(vec![(
            OsString::from("PATH"),
            OsString::from("/usr/bin:/bin"),
        )]),
        namespaces: false,
        protected: None,
    });
    ex.start().unwrap();
    ex
}
