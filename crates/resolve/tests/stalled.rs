//! The system resolver against a name service that never answers: the
//! threads of queries that outlived their timeout are bounded, a query past
//! the bound is refused at once naming it, and queries are made again once
//! the stalled ones end.
//!
//! `getaddrinfo` is made to hang for real: the test runs itself again in a
//! user and mount namespace of its own (`unshare -Urm`) where the hosts
//! file is a FIFO nobody writes and `nsswitch.conf` names only that file,
//! so every lookup blocks in its `open` until the test opens the FIFO for
//! writing.

use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandgate_resolve::{Resolve, SystemResolver, MAX_LINGERING_QUERIES};

const CHILD: &str = "SANDGATE_RESOLVE_STALL_FIFO";
/// Queries asked, each of which outlives its timeout: far past the bound.
const QUERIES: usize = 300;

/// Threads of this process now.
fn threads() -> usize {
    fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

#[test]
fn queries_stalled_past_their_timeout_hold_a_bounded_number_of_threads() {
    let Ok(fifo) = std::env::var(CHILD) else {
        run_in_namespace();
        return;
    };
    let fifo = Path::new(&fifo);
    let before = threads();
    let mut refused = Vec::new();
    for i in 0..QUERIES {
        match SystemResolver.resolve(&format!("h{i}.stall.test"), 443, Duration::from_millis(20)) {
            Ok(a) => panic!("query {i} answered {a:?} from a hosts file that never opens"),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => refused.push((i, e.to_string())),
        }
    }
    let held = threads().saturating_sub(before);
    eprintln!(
        "{QUERIES} stalled queries: {held} threads left, {} refused",
        refused.len()
    );
    assert!(
        held <= MAX_LINGERING_QUERIES,
        "{QUERIES} queries that outlived their timeout left {held} threads running \
         (bound {MAX_LINGERING_QUERIES})"
    );
    assert_eq!(
        refused.len(),
        QUERIES - MAX_LINGERING_QUERIES,
        "{refused:?}"
    );
    let (_, why) = &refused[0];
    assert!(
        why.contains(&MAX_LINGERING_QUERIES.to_string()) && why.contains("outlived"),
        "the refusal does not name the bound: {why}"
    );

    // The name service answers again (the hosts file opens, empty): the
    // stalled queries end, their places come back, and a query is made.
    let open = Arc::new(AtomicBool::new(true));
    let writer = {
        let (open, fifo) = (Arc::clone(&open), fifo.to_owned());
        std::thread::spawn(move || {
            while open.load(Ordering::SeqCst) {
                // ENXIO while no lookup has it open for reading.
                let _ = fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&fifo);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while threads() > before + 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        threads() <= before + 1,
        "the stalled queries did not end once the name service answered"
    );
    let again = SystemResolver.resolve("again.stall.test", 443, Duration::from_secs(10));
    open.store(false, Ordering::SeqCst);
    writer.join().unwrap();
    let e = again.expect_err("a name absent from an empty hosts file");
    assert_ne!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert!(!e.to_string().contains("outlived"), "still refused: {e}");
}

/// Runs this test again in a user and mount namespace whose hosts file
/// never opens, and fails with its output if it fails.
fn run_in_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("hosts");
    let nss = dir.path().join("nsswitch.conf");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: c is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fs::write(&nss, "hosts: files\n").unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["-Urm", "sh", "-c"])
        .arg(
            "mount --bind \"$1\" /etc/hosts && mount --bind \"$2\" /etc/nsswitch.conf \
             && exec \"$3\" --exact queries_stalled_past_their_timeout_hold_a_bounded_number_of_threads \
             --nocapture --test-threads 1",
        )
        .args(["sh".as_ref(), fifo.as_os_str(), nss.as_os_str(), exe.as_os_str()])
        .env(CHILD, &fifo)
        .output()
        .expect("unshare (util-linux) runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    assert!(out.status.success(), "the test in its namespace failed");
}
