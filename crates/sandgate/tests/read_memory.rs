//! A ranged read holds at most `max_read_bytes` of one line in memory,
//! however long the line on disk: the cap bounds memory, not only the answer.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fs;

use sandgate::{ErrorCode, Sandbox};

/// The system allocator, noting the largest block each thread asks for.
struct Peak;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is passed on unchanged to the system allocator, which
// upholds GlobalAlloc's contract; `note` neither allocates nor unwinds.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System with this layout (every block does).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as for dealloc; `new_size` is the caller's, checked by it.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Peak = Peak;

#[test]
fn a_long_line_is_not_held_whole_by_a_ranged_read() {
    const CAP: u64 = 64 * 1024;
    const LINE: u64 = 64 * 1024 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    // One line of 64 MiB (a sparse file: zeros, no newline), then a short one.
    let f = fs::File::create(tmp.path().join("long.txt")).unwrap();
    f.set_len(LINE).unwrap();
    drop(f);
    let mut tail = fs::OpenOptions::new()
        .append(true)
        .open(tmp.path().join("long.txt"))
        .unwrap();
    std::io::Write::write_all(&mut tail, b"\nshort\n").unwrap();
    let sb = Sandbox::builder()
        .read_root(tmp.path())
        .max_read_bytes(CAP)
        .build()
        .unwrap();

    LARGEST.with(|l| l.set(0));
    let e = sb.read_lines("long.txt", 1, 1).unwrap_err();
    assert_eq!(e.code(), ErrorCode::TooLarge);
    let r = sb.read_lines("long.txt", 2, 5).unwrap();
    assert_eq!((r.content.as_slice(), r.total_lines), (&b"short\n"[..], 2));
    let largest = LARGEST.with(|l| l.get());
    assert!(
        largest <= 4 * CAP as usize + 128 * 1024,
        "a ranged read with a cap of {CAP} bytes allocated one block of {largest} bytes"
    );

    // A line of exactly the cap is served; one byte more is cut.
    let exact = vec![b'x'; CAP as usize - 1];
    fs::write(
        tmp.path().join("exact.txt"),
        [&exact[..], b"\nnext\n"].concat(),
    )
    .unwrap();
    let r = sb.read_lines("exact.txt", 1, 2).unwrap();
    assert_eq!(
        (r.lines, r.truncated, r.content.len() as u64),
        (1, true, CAP)
    );
    let over = vec![b'x'; CAP as usize];
    fs::write(tmp.path().join("over.txt"), [&over[..], b"\n"].concat()).unwrap();
    assert_eq!(
        sb.read_lines("over.txt", 1, 1).unwrap_err().code(),
        ErrorCode::TooLarge
    );
    // Without a final newline, a last line of exactly the cap is served.
    fs::write(tmp.path().join("nonl.txt"), &over).unwrap();
    let r = sb.read_lines("nonl.txt", 1, 1).unwrap();
    assert_eq!((r.lines, r.truncated, r.total_lines), (1, false, 1));
}

/// The walks' entry bounds bound memory too: a directory rename looks at no
/// more than `MAX_RENAME_WALK_ENTRIES` entries and a glob walk at no more
/// than `MAX_WALK_ENTRIES`, however many one directory holds, so neither
/// reads a huge directory whole before its bound applies.
#[test]
fn a_huge_directory_is_not_read_whole_by_a_bounded_walk() {
    use sandgate::search::MAX_WALK_ENTRIES;
    use sandgate::MAX_RENAME_WALK_ENTRIES;
    const FILES: usize = MAX_WALK_ENTRIES + 70_000;
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big");
    fs::create_dir(&big).unwrap();
    // Links to a few empty files: new files cost up to a millisecond each
    // on a loaded ext4, links a fiftieth of that (ext4 allows 65,000 to
    // one file).
    for i in 0..FILES {
        let first = i - i % 50_000;
        match i == first {
            true => drop(fs::File::create(big.join(format!("f{i:07}"))).unwrap()),
            false => fs::hard_link(
                big.join(format!("f{first:07}")),
                big.join(format!("f{i:07}")),
            )
            .unwrap(),
        }
    }
    let sb = Sandbox::builder()
        .read_root(tmp.path())
        .write_root(tmp.path())
        .deny_write("*.lock")
        .build()
        .unwrap();
    // One entry is a few dozen bytes (its name, kind, inode): a bound of N
    // entries holds a block of at most about 64 bytes times N.
    let most = |n: usize| 64 * n.next_power_of_two();

    LARGEST.with(|l| l.set(0));
    let found = sb.glob("big/*", None).unwrap();
    assert_eq!(found.len(), sandgate::search::MAX_GLOB_RESULTS);
    let largest = LARGEST.with(|l| l.get());
    assert!(
        largest <= most(MAX_WALK_ENTRIES),
        "a glob walk bounded at {MAX_WALK_ENTRIES} entries allocated one block of {largest} bytes over a directory of {FILES}"
    );

    LARGEST.with(|l| l.set(0));
    let e = sb.rename("big", "moved").unwrap_err();
    assert_eq!(e.code(), ErrorCode::FsProtected, "{e}");
    let largest = LARGEST.with(|l| l.get());
    assert!(
        largest <= most(MAX_RENAME_WALK_ENTRIES),
        "a rename bounded at {MAX_RENAME_WALK_ENTRIES} entries allocated one block of {largest} bytes over a directory of {FILES}"
    );
}

/// Bytes this thread has read (its `rchar`).
fn thread_read_bytes() -> u64 {
    fs::read_to_string("/proc/thread-self/io")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .parse()
        .unwrap()
}

/// A head read of a 4 GiB file without a newline (sparse: no disk used) is
/// refused as soon as its first line passes `max_read_bytes`, without
/// reading the rest: it read all 4 GiB before (33 s for 2 GiB in a debug
/// build, and hours for the terabytes a sparse file may claim), only to
/// answer the same refusal.
#[test]
fn floods7_a_first_line_over_the_cap_is_refused_without_reading_the_file() {
    const CAP: u64 = 1024 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    let f = fs::File::create(tmp.path().join("sparse")).unwrap();
    f.set_len(4 << 30).unwrap();
    drop(f);
    let sb = Sandbox::builder()
        .read_root(tmp.path())
        .max_read_bytes(CAP)
        .build()
        .unwrap();
    let before = thread_read_bytes();
    let e = sb.read_lines("sparse", 1, 10).unwrap_err();
    let read = thread_read_bytes() - before;
    assert_eq!(e.code(), ErrorCode::TooLarge, "{e}");
    assert!(e.message().contains("line 1 alone"), "{e}");
    assert!(
        read < 16 * CAP,
        "refusing the first line read {read} bytes of the file"
    );
}

/// A ranged read counts every line of its file, so its time grows with
/// the file's data (holes are passed over unread). The cancellable forms
/// stop when their flag is set, with `E_ABORTED`, having read a small part
/// of a 1 TiB file.
#[test]
fn special8_a_ranged_read_of_a_huge_sparse_file_stops_when_cancelled() {
    use std::sync::atomic::AtomicBool;
    const HUGE: u64 = 1 << 40;
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("huge.log"), "first\nsecond\n").unwrap();
    fs::File::options()
        .write(true)
        .open(tmp.path().join("huge.log"))
        .unwrap()
        .set_len(HUGE)
        .unwrap();
    let sb = Sandbox::builder().read_root(tmp.path()).build().unwrap();
    for tail in [false, true] {
        let cancel = AtomicBool::new(true);
        let before = thread_read_bytes();
        let e = match tail {
            false => sb.read_lines_cancellable("huge.log", 1, 1, &cancel),
            true => sb.read_last_lines_cancellable("huge.log", 5, &cancel),
        }
        .unwrap_err();
        let read = thread_read_bytes() - before;
        assert_eq!(e.code(), ErrorCode::Aborted, "{e}");
        assert_eq!(e.path(), Some("huge.log"), "{e}");
        assert!(
            read < HUGE / 4,
            "the cancelled read went on for {read} bytes"
        );
    }
    // Not cancelled, the same reads answer as before.
    let never = AtomicBool::new(false);
    fs::write(tmp.path().join("small.log"), "a\nb\nc\n").unwrap();
    let r = sb
        .read_last_lines_cancellable("small.log", 2, &never)
        .unwrap();
    assert_eq!(
        (r.content.as_slice(), r.offset, r.total_lines),
        (&b"b\nc\n"[..], 2, 3)
    );
    let r = sb
        .read_lines_cancellable("small.log", 1, 1, &never)
        .unwrap();
    assert_eq!((r.content.as_slice(), r.total_lines), (&b"a\n"[..], 3));
}

/// A sparse file of `size` bytes holding `writes` (offset, bytes) and
/// zeros everywhere else (holes where the filesystem keeps them).
fn sparse(path: &std::path::Path, size: u64, writes: &[(u64, &[u8])]) {
    use std::os::unix::fs::FileExt;
    let f = fs::File::create(path).unwrap();
    f.set_len(size).unwrap();
    for (at, bytes) in writes {
        f.write_all_at(bytes, *at).unwrap();
    }
}

/// The lines a plain scan finds in such a file: its newlines, and one
/// more for a last line without one (zeros are never newlines).
fn lines_in(size: u64, writes: &[(u64, &[u8])]) -> usize {
    let mut last = vec![];
    let newlines = writes
        .iter()
        .map(|(at, b)| {
            last.push((at + b.len() as u64, b.last().copied()));
            b.iter().filter(|&&c| c == b'\n').count()
        })
        .sum::<usize>();
    let ends_in_newline = last.iter().any(|&(end, b)| end == size && b == Some(b'\n'));
    newlines + usize::from(size > 0 && !ends_in_newline)
}

/// A ranged read counts the lines of a sparse file without reading its
/// holes (they hold only zeros, never a newline), and counts exactly what
/// a plain scan counts: holes at the start, the end, between lines, inside
/// a line, a file all hole, data only, newlines at block edges. Before, a
/// head read of a 64 GiB sparse file read all 64 GiB to count its lines.
#[test]
fn ranged9_line_counts_skip_holes_and_stay_exact() {
    const G64: u64 = 64 << 30;
    const M: u64 = 1 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let sb = Sandbox::builder().read_root(tmp.path()).build().unwrap();
    type Layout = (u64, Vec<(u64, &'static [u8])>);
    let layouts: Vec<(&str, Layout)> = vec![
        ("all hole", (G64, vec![])),
        ("empty", (0, vec![])),
        ("data only", (12, vec![(0, b"one\ntwo\nthr\n")])),
        ("data only, no last newline", (9, vec![(0, b"one\ntwo\nt")])),
        ("hole at the start", (G64, vec![(G64 - 6, b"x\ny\nz\n")])),
        ("hole at the end", (G64, vec![(0, b"a\nb\n")])),
        (
            "hole in the middle",
            (G64, vec![(0, b"a\n"), (G64 - 2, b"b\n")]),
        ),
        (
            "holes between lines",
            (
                G64,
                vec![
                    (0, b"a\n"),
                    (4 * M, b"b\nc"),
                    (G64 / 2, b"\n"),
                    (G64 - 1, b"\n"),
                ],
            ),
        ),
        (
            "newlines at block edges",
            (
                16 * M,
                vec![
                    (4095, b"\n"),
                    (4096, b"\n"),
                    (M - 1, b"\n\n"),
                    (16 * M - 1, b"x"),
                ],
            ),
        ),
        ("one byte of data after a hole", (M + 1, vec![(M, b"\n")])),
        (
            "a hole of one block",
            (8192 + 2, vec![(0, b"a\n"), (8192, b"b\n")]),
        ),
    ];
    for (what, (size, writes)) in &layouts {
        let name = what.replace([' ', ','], "_");
        sparse(&tmp.path().join(&name), *size, writes);
        let want = lines_in(*size, writes);
        let before = thread_read_bytes();
        // A range past the end serves nothing and counts every line.
        let total = sb.read_lines(&name, 1 << 40, 1).unwrap().total_lines;
        let tail = sb.read_last_lines(&name, 1);
        let read = thread_read_bytes() - before;
        assert_eq!(total, want, "{what}: head read's total_lines");
        match tail {
            Ok(r) => assert_eq!(r.total_lines, want, "{what}: tail read's total_lines"),
            Err(e) => assert_eq!(e.code(), ErrorCode::TooLarge, "{what}: {e}"),
        }
        assert!(
            read < 64 * M,
            "{what}: counting the lines of {size} bytes read {read} bytes"
        );
        // Where a plain scan is cheap, it agrees line for line.
        if *size <= 16 * M {
            let plain = fs::read(tmp.path().join(&name)).unwrap();
            let lines = plain.split_inclusive(|&b| b == b'\n').count();
            assert_eq!(lines, want, "{what}: plain scan");
        }
    }
    // A line after a hole is served with the hole's zeros, as it reads.
    let r = sb.read_lines("a_hole_of_one_block", 2, 1).unwrap();
    assert_eq!(r.content.len(), 8192 - 2 + 2);
    assert!(r.content[..8190].iter().all(|&b| b == 0));
    assert_eq!(&r.content[8190..], b"b\n");
    // The last lines of a 64 GiB file, read at once.
    let r = sb.read_last_lines("hole_at_the_start", 2).unwrap();
    assert_eq!((r.offset, r.lines, r.total_lines), (2, 2, 3));
    assert_eq!(r.content, b"y\nz\n");
}

/// A sparse file grown and cut while its lines are counted: every count
/// ends, without an error. A count taken while the file changes is of no
/// one state of it (a read that meets the end of the file, then more bytes
/// once it grows again, ends a line there, as any read does), but it holds
/// the two lines the file always has.
#[test]
fn ranged9_a_line_count_ends_while_the_file_grows_and_shrinks() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("moving");
    sparse(&path, 4, &[(0, b"a\nb\n")]);
    let sb = Sandbox::builder().read_root(tmp.path()).build().unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let f = fs::File::options().write(true).open(&path).unwrap();
            while !stop.load(Ordering::Relaxed) {
                f.set_len(64 << 30).unwrap();
                f.set_len(4).unwrap();
            }
        });
        // Stops the other thread even when an assertion fails.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        for _ in 0..500 {
            let r = sb.read_lines("moving", 1 << 40, 1).unwrap();
            assert!(
                r.total_lines >= 2 && r.content.is_empty(),
                "{}",
                r.total_lines
            );
            let r = sb.read_last_lines("moving", 2).unwrap();
            assert!(r.total_lines >= 2 && r.lines >= 1, "{}", r.total_lines);
        }
    });
}
