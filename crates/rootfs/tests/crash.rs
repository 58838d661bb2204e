//! Crash safety of `Root::replace`: a child process that replaces a large
//! file over and over is SIGKILLed at random moments, many times; afterwards
//! the file holds exactly one complete version and no temporary file
//! remains (beyond the one documented window, which the next replace
//! reclaims).
//!
//! The child is this test binary re-executed with `SANDGATE_CRASH_CHILD`
//! set: only then do the `child_*` tests act; in a normal run they return at
//! once.

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sandgate_rootfs::{ErrorKind, Root};

/// The directory the child works in.
const CHILD_ENV: &str = "SANDGATE_CRASH_CHILD";
/// The first version the child writes.
const FROM_ENV: &str = "SANDGATE_CRASH_FROM";
/// Reproduces a run of the kill schedule.
const SEED_ENV: &str = "SANDGATE_CRASH_SEED";

const NAME: &str = "big.bin";
const TEMP: &str = ".big.bin.sandgate-tmp";
/// 4 MiB: large enough that writing and fsyncing it takes a while.
const SIZE: usize = 4 << 20;
const ROUNDS: u64 = 100;

// ----- versions -----

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Version `k` of the big file: 4 KiB blocks, each a pattern derived from
/// `k` headed by `k` and the block's index (so that a block of another
/// version, a block out of place or a hole shows), then a trailer of `k`
/// and a checksum of the pattern in the last 16 bytes.
fn version(k: u64) -> Vec<u8> {
    const BLOCK: usize = 4096;
    let mut pattern = [0u8; BLOCK];
    let mut sum = splitmix(k);
    for (j, w) in pattern.chunks_exact_mut(8).enumerate() {
        let x = splitmix(k.wrapping_mul(0x1_0000_0001) ^ j as u64);
        sum = (sum ^ x).rotate_left(7).wrapping_mul(0x100_0000_01b3);
        w.copy_from_slice(&x.to_le_bytes());
    }
    let mut out = Vec::with_capacity(SIZE);
    for b in 0..SIZE / BLOCK {
        let mut block = pattern;
        block[..8].copy_from_slice(&k.to_le_bytes());
        block[8..16].copy_from_slice(&(b as u64).to_le_bytes());
        out.extend_from_slice(&block);
    }
    out[SIZE - 16..SIZE - 8].copy_from_slice(&k.to_le_bytes());
    out[SIZE - 8..].copy_from_slice(&sum.to_le_bytes());
    out
}

/// The version `bytes` holds, if it is exactly one complete version.
fn decode(bytes: &[u8]) -> Option<u64> {
    if bytes.len() != SIZE {
        return None;
    }
    let k = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    (bytes == version(k)).then_some(k)
}

fn decode_file(path: &Path) -> u64 {
    let bytes = fs::read(path).unwrap();
    decode(&bytes).unwrap_or_else(|| {
        let head = u64::from_le_bytes(bytes[..8.min(bytes.len())].try_into().unwrap_or([0; 8]));
        panic!(
            "{} is not one complete version: {} bytes, first word {head}",
            path.display(),
            bytes.len()
        )
    })
}

fn listing(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// A small deterministic generator for the kill schedule (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn seed() -> u64 {
    match std::env::var(SEED_ENV) {
        Ok(s) => s.parse().expect("SANDGATE_CRASH_SEED must be a number"),
        Err(_) => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            splitmix(t.as_nanos() as u64) | 1
        }
    }
}

fn child_command(test: &str, dir: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, dir)
        .env_remove(SEED_ENV);
    c
}

// ----- the children -----

/// In the child only: replaces big.bin with versions FROM, FROM+1, ...
/// until killed, printing `DONE k` after each replace has returned.
#[test]
fn child_replace_loop() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let from: u64 = std::env::var(FROM_ENV).unwrap().parse().unwrap();
    let root = Root::open(&dir).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "\nREADY").unwrap();
    out.flush().unwrap();
    // An orphan (the parent died) stops by itself.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut k = from;
    while Instant::now() < deadline {
        root.replace(NAME, &version(k)).unwrap();
        writeln!(out, "DONE {k}").unwrap();
        out.flush().unwrap();
        k += 1;
    }
}

/// In the child only: with RLIMIT_FSIZE at 1 MiB, a 4 MiB replace fails
/// with EFBIG (refused before a byte is written).
#[test]
fn child_fsize_limited_replace() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler
    // code and touches no memory; without it the first write past the limit
    // kills the process (SIGXFSZ) instead of failing with EFBIG.
    let previous = unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    assert_ne!(previous, libc::SIG_ERR);
    let limit = rustix::process::Rlimit {
        current: Some(1 << 20),
        maximum: Some(1 << 20),
    };
    rustix::process::setrlimit(rustix::process::Resource::Fsize, limit).unwrap();
    let root = Root::open(&dir).unwrap();
    let err = root.replace(NAME, &version(1)).unwrap_err();
    assert_eq!(err.errno(), Some(libc::EFBIG), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Io, "{err:?}");
    println!("EFBIG-AS-EXPECTED");
}

// ----- the parent tests -----

#[test]
fn replace_survives_sigkill_at_random_moments() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = Root::open(dir).unwrap();

    // How long one replace takes here, to spread the kills over it
    // (the median of three), and version 0 is on disk.
    let mut times: Vec<Duration> = (0..3)
        .map(|_| {
            let v0 = version(0);
            let t = Instant::now();
            root.replace(NAME, &v0).unwrap();
            t.elapsed()
        })
        .collect();
    times.sort();
    let one = times[1];
    let window_ms = 40u64.max(2 * one.as_millis() as u64);
    let seed = seed();
    eprintln!(
        "crash: one replace takes {one:?}; kills at 1..={window_ms} ms; \
         {SEED_ENV}={seed} reproduces the schedule"
    );
    let mut rng = Rng(seed);

    let mut current = 0u64; // the version big.bin holds
    let mut leftover: Option<u64> = None; // the version the temp name holds
    let (mut leftovers, mut changed, mut completed) = (0, 0, 0u64);
    for round in 0..ROUNDS {
        let from = (round + 1) * 1_000_000;
        let mut child = child_command("child_replace_loop", dir)
            .env(FROM_ENV, from.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // Libtest's own lines come first; wait for the loop to start.
        loop {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                let out = child.wait_with_output().unwrap();
                panic!(
                    "the child ended before READY: {}\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            if line.trim_end() == "READY" {
                break;
            }
        }
        let delay = 1 + rng.below(window_ms);
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGKILL),
            "round {round}: the child was not killed but ended: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let done: Vec<u64> = rest
            .lines()
            .filter_map(|l| l.strip_prefix("DONE "))
            .map(|k| k.parse().unwrap())
            .collect();
        completed += done.len() as u64;
        // The last replace that returned, and the one in flight at the kill.
        let (last, in_flight) = match done.last() {
            Some(&d) => (d, d + 1),
            None => (current, from),
        };

        let names = listing(dir);
        let allowed: BTreeSet<String> = [NAME.to_string(), TEMP.to_string()].into();
        assert!(
            names.is_subset(&allowed) && names.contains(NAME),
            "round {round} (killed after {delay} ms): the directory holds {names:?}"
        );
        let v = decode_file(&dir.join(NAME));
        assert!(
            v == last || v == in_flight,
            "round {round}: big.bin holds version {v}; expected {last} (last done) \
             or {in_flight} (in flight)"
        );
        if v != current {
            changed += 1;
        }
        current = v;
        if names.contains(TEMP) {
            // Killed between link and rename: the temporary is the complete,
            // fsynced version in flight (or an earlier leftover untouched).
            let t = decode_file(&dir.join(TEMP));
            assert!(
                (t == in_flight && v == last) || Some(t) == leftover,
                "round {round}: the temporary holds version {t} (big.bin {v}, \
                 in flight {in_flight}, earlier leftover {leftover:?})"
            );
            if Some(t) != leftover {
                leftovers += 1;
            }
            leftover = Some(t);
        } else {
            leftover = None;
        }
    }
    eprintln!(
        "crash: {ROUNDS} kills; {completed} replaces completed in the children; big.bin \
         changed in {changed} rounds; {leftovers} kills fell between link and rename"
    );
    assert!(
        completed > 0,
        "no child ever completed a replace: the kills never hit the loop"
    );

    // The next replace reclaims any leftover: exactly big.bin remains.
    let last = version(u64::MAX / 2);
    root.replace(NAME, &last).unwrap();
    assert_eq!(listing(dir), BTreeSet::from([NAME.to_string()]));
    assert!(fs::read(dir.join(NAME)).unwrap() == last);
}

#[test]
fn replace_failing_midway_leaves_old_content_and_no_temporary() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = Root::open(dir).unwrap();
    root.replace(NAME, &version(0)).unwrap();
    let out = child_command("child_fsize_limited_replace", dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("EFBIG-AS-EXPECTED"),
        "child: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(listing(dir), BTreeSet::from([NAME.to_string()]));
    assert_eq!(decode_file(&dir.join(NAME)), 0);
}

#[test]
fn replace_refused_before_writing_leaves_nothing() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::create_dir(dir.join("sub")).unwrap();
    fs::write(dir.join("sub/keep"), b"keep").unwrap();
    let root = Root::open(dir).unwrap();

    // The target is a directory.
    let err = root.replace("sub", b"data").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFile, "{err:?}");
    // The parent is missing.
    let err = root.replace("missing/file", b"data").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    // The parent is a file.
    let err = root.replace("sub/keep/x", b"data").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotDir, "{err:?}");

    assert_eq!(listing(dir), BTreeSet::from(["sub".to_string()]));
    assert_eq!(
        listing(&dir.join("sub")),
        BTreeSet::from(["keep".to_string()])
    );
    assert_eq!(fs::read(dir.join("sub/keep")).unwrap(), b"keep");
}

/// The crash guarantee rests on `O_TMPFILE` (an unnamed file vanishes with
/// its process); the named fallback would leave its file behind on a kill.
/// The test directory's filesystem must therefore offer it.
#[test]
fn o_tmpfile_is_available_where_the_tests_run() {
    use rustix::fs::{openat, Mode, OFlags, CWD};
    let tmp = tempfile::tempdir().unwrap();
    let r = openat(
        CWD,
        tmp.path(),
        OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_bits_truncate(0o600),
    );
    assert!(
        r.is_ok(),
        "O_TMPFILE is unavailable in {} ({r:?}): replace would use named \
         temporaries, which a kill leaves behind",
        tmp.path().display()
    );
    // And an unnamed file leaves no name.
    drop(r);
    assert!(listing(tmp.path()).is_empty());
}

/// Concurrent replaces of one target, from threads of one process (as from
/// several processes), must all succeed and leave no temporary.
///
/// A regression test: replace B may reclaim the temporary name replace A
/// has just linked. An O_TMPFILE inode that was linked once and unlinked can
/// never be linked again, so A must start over with a fresh unnamed file
/// rather than relink (which failed with ENOENT, or renamed an inode onto
/// itself and left the temporary name behind).
#[test]
fn concurrent_replaces_of_one_target() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Root::open(tmp.path()).unwrap();
    for round in 0..300 {
        let barrier = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            for w in 0..3u8 {
                let (root, barrier) = (&root, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    root.replace("g", &[w; 64]).unwrap();
                });
            }
        });
        assert_eq!(
            listing(tmp.path()),
            BTreeSet::from(["g".to_string()]),
            "round {round}"
        );
    }
}

/// Two names too long for their temporary names to hold them whole (242
/// bytes or more) that begin alike must still get temporary names of their
/// own: with a shared one, a replace of `a` could rename the bytes that a
/// concurrent replace of `b` had just linked there into `a`.
#[test]
fn long_names_alike_in_their_first_bytes_do_not_share_a_temporary() {
    // On tmpfs (no fsync cost) the two replaces interleave often enough.
    let tmp = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let root = Root::open(tmp.path()).unwrap();
    let stem = "n".repeat(250);
    let (a, b) = (format!("{stem}a"), format!("{stem}b"));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let wrong = std::thread::scope(|s| {
        let other = s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = root.replace(&b, b"bbbb");
            }
        });
        let mut wrong = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && wrong == 0 {
            if root.replace(&a, b"aaaa").is_ok()
                && fs::read(tmp.path().join(&a)).unwrap() != b"aaaa"
            {
                wrong += 1;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        other.join().unwrap();
        wrong
    });
    assert_eq!(
        wrong, 0,
        "a replace of `a` left the bytes written for `b` in `a`"
    );
    assert_eq!(fs::read(tmp.path().join(&b)).unwrap(), b"bbbb");
}

/// Readers running beside the replaces: every read of the target, by a
/// plain `open` of its host path and through the root, sees one complete
/// version (the old or the new), never a mix of two nor a short file.
#[test]
fn readers_see_one_whole_version_while_replaces_run() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = Root::open(tmp.path()).unwrap();
    root.replace(NAME, &version(0)).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (reads, replaces) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut k = 1u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                root.replace(NAME, &version(k)).unwrap();
                k += 1;
            }
            k - 1
        });
        let path = tmp.path().join(NAME);
        let mut reads = 0u64;
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            let host = decode_file(&path);
            let through = root.read(NAME).unwrap();
            let k = decode(&through).unwrap_or_else(|| {
                panic!(
                    "a read through the root saw no complete version ({} bytes)",
                    through.len()
                )
            });
            assert!(k >= host, "versions went backwards: {host} then {k}");
            reads += 2;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (reads, writer.join().unwrap())
    });
    eprintln!("crash: {reads} reads beside {replaces} replaces, each one whole version");
    assert!(replaces > 1, "the writer never replaced the file");
}
