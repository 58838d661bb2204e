//! Two processes protecting one write root: each keeps its own record, and
//! nothing is shared between them (the limit SECURITY.md states). The
//! second process is this test binary run again as a child, which takes the
//! part named by `CONC8_CHILD_ROOT`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandgate_fileguard::GuardBuilder;
use sandgate_protect::{Action, Change, Protector};

const CHILD: &str = "CONC8_CHILD_ROOT";
const NAME: &str = "conc8_a_second_process_puts_back_a_protected_write_the_first_undid";

fn protector(root: &Path) -> Arc<Protector> {
    let guard = GuardBuilder::new().patterns(["*.lock"]).build().unwrap();
    Arc::new(Protector::new(root, guard).unwrap())
}

/// Waits for `path` to exist (a step of the other process), for at most a
/// minute, so that a broken child fails the test instead of hanging it.
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never came",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The child's part: a command of its own begins on the root while the
/// parent's runs, and ends after the parent's was checked.
fn child(root: PathBuf, signals: PathBuf) {
    let p = protector(&root);
    let cp = p.begin().unwrap();
    fs::write(signals.join("begun"), "").unwrap();
    wait_for(&signals.join("go"));
    let changes = cp.settle();
    fs::write(signals.join("changes"), format!("{changes:?}")).unwrap();
}

/// Pins a limit: a command's write to a protected file, undone by its own
/// process's check, is put back by another process's check when that
/// process began a command on the same write root while the write stood
/// (its record took the write as the host's). Processes are not serialized
/// with one another; within one process this cannot happen.
#[test]
fn conc8_a_second_process_puts_back_a_protected_write_the_first_undid() {
    if let Some(root) = std::env::var_os(CHILD) {
        let signals = PathBuf::from(std::env::var_os("CONC8_SIGNALS").unwrap());
        return child(PathBuf::from(root), signals);
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    let signals = tmp.path().join("signals");
    fs::create_dir(&root).unwrap();
    fs::create_dir(&signals).unwrap();
    fs::write(root.join("a.lock"), "v1\n").unwrap();
    let p = protector(&root);
    let first = p.begin().unwrap();
    fs::write(root.join("a.lock"), "by the first command\n").unwrap();
    let mut other = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--test-threads=1"])
        .env(CHILD, &root)
        .env("CONC8_SIGNALS", &signals)
        .spawn()
        .unwrap();
    wait_for(&signals.join("begun"));
    assert_eq!(
        first.settle(),
        [Change {
            path: "a.lock".into(),
            pattern: "*.lock".into(),
            action: Action::Restored,
        }]
    );
    assert_eq!(fs::read_to_string(root.join("a.lock")).unwrap(), "v1\n");
    fs::write(signals.join("go"), "").unwrap();
    assert!(other.wait().unwrap().success());
    let theirs = fs::read_to_string(signals.join("changes")).unwrap();
    // The limit: the other process's check "restored" the first command's
    // version.
    assert!(theirs.contains("a.lock"), "{theirs}");
    assert_eq!(
        fs::read_to_string(root.join("a.lock")).unwrap(),
        "by the first command\n"
    );
}
