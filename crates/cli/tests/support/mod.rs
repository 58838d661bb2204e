//! What more than one of the CLI's test suites needs.

use std::fs;

/// The processes whose command line holds `token`, as `pid cmdline`
/// (sandgate's own, and this test process, aside).
pub fn holding(token: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == std::process::id().to_string() {
            continue;
        }
        if let Ok(cmd) = fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(token) && !cmd.contains("sandgate") {
                found.push(format!("{name} {cmd}"));
            }
        }
    }
    found
}
