//! The byte-level work of the file tools, shared by the sandbox's reads
//! and edits and by grep: lines read under a cap with memory taken
//! fallibly, lines passed over (holes of sparse files skipped, not read),
//! and the edit's search for its old text.

use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// `read_until(b'\n')` over at most `limit` bytes of `reader`, appending
/// to `buf`, which grows fallibly: a line that memory cannot hold (under a
/// cap larger than memory, a sparse file of terabytes without a line
/// break) is `ENOMEM`, where `read_until` would abort the whole process.
/// Read in steps of 64 KiB, each with its room reserved first, so that
/// `read_until` itself never has to grow `buf`.
pub(crate) fn read_line_capped<R: BufRead>(
    reader: &mut R,
    limit: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    const STEP: u64 = 64 * 1024;
    let mut read = 0usize;
    while (read as u64) < limit {
        let step = STEP.min(limit - read as u64);
        buf.try_reserve(step as usize)
            .map_err(|_| std::io::Error::from(rustix::io::Errno::NOMEM))?;
        let n = reader.by_ref().take(step).read_until(b'\n', buf)?;
        read += n;
        if (n as u64) < step || buf.last() == Some(&b'\n') {
            break;
        }
    }
    Ok(read)
}

/// What [`skip_line`] fails with when its read is cancelled.
#[derive(Debug)]
pub(crate) struct ReadCancelled;

impl std::fmt::Display for ReadCancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the read was cancelled")
    }
}

impl std::error::Error for ReadCancelled {}

/// Consumes one line without keeping it; returns the bytes consumed. Fails
/// with [`ReadCancelled`] once `cancel` is set (looked at before each
/// buffer is filled): one line may be terabytes. The holes of a sparse
/// file are passed over unread ([`pass_hole`]).
pub(crate) fn skip_line<F: Read + AsFd>(
    reader: &mut BufReader<F>,
    cancel: &AtomicBool,
) -> std::io::Result<usize> {
    let mut n = 0usize;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(std::io::Error::other(ReadCancelled));
        }
        if reader.buffer().is_empty() {
            n = n.saturating_add(pass_hole(reader.get_ref().as_fd())?);
        }
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(n);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(n + i + 1);
            }
            None => {
                let len = buf.len();
                reader.consume(len);
                n += len;
            }
        }
    }
}

/// Moves `fd`, a regular file read from its offset, past the hole it
/// stands in (a run the filesystem does not store, read as zeros), all but
/// the hole's last byte: a hole holds no newline, and the byte left to read
/// keeps a line made only of a hole from looking like the end of the file.
/// Returns the bytes passed (0 outside a hole, and where the filesystem
/// cannot tell: `EINVAL`, `SEEK_DATA` not supported, means read it all).
/// `ENXIO` from `SEEK_DATA` means no data from the offset on: a hole up to
/// the end of the file, or an offset at or past it.
fn pass_hole(fd: BorrowedFd<'_>) -> std::io::Result<usize> {
    use rustix::fs::{seek, SeekFrom};
    let pos = seek(fd, SeekFrom::Current(0))?;
    let data = match seek(fd, SeekFrom::Data(pos)) {
        Ok(data) => data,
        Err(rustix::io::Errno::NXIO) => seek(fd, SeekFrom::End(0))?,
        Err(_) => return Ok(0),
    };
    // `data` is past `pos` in a hole; else (the file shrank under the
    // read, or `pos` is in data) the read goes on from `pos`.
    let to = if data > pos { data - 1 } else { pos };
    if to != data {
        seek(fd, SeekFrom::Start(to))?;
    }
    Ok(usize::try_from(to - pos).unwrap_or(usize::MAX))
}

/// Calls `found` with where `needle` starts in `hay`, left to right: every
/// place (`overlapping`), or the places that do not overlap, each taken
/// after the one before it ends. Knuth-Morris-Pratt: time linear in both,
/// whatever they hold. (Comparing `needle` at each place was quadratic: a
/// 4 MiB file of `a` and 2 MiB of `a` then `b` took minutes.)
fn each_place(hay: &[u8], needle: &[u8], overlapping: bool, mut found: impl FnMut(usize)) {
    let m = needle.len();
    if m == 0 || m > hay.len() {
        return;
    }
    // border[i]: the length of the longest proper border of needle[..=i].
    let mut border = vec![0usize; m];
    let mut k = 0;
    for i in 1..m {
        while k > 0 && needle[i] != needle[k] {
            k = border[k - 1];
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        border[i] = k;
    }
    k = 0;
    for (i, &b) in hay.iter().enumerate() {
        while k > 0 && b != needle[k] {
            k = border[k - 1];
        }
        if b == needle[k] {
            k += 1;
        }
        if k == m {
            found(i + 1 - m);
            k = if overlapping { border[m - 1] } else { 0 };
        }
    }
}

pub(crate) fn count_occurrences(hay: &[u8], needle: &[u8]) -> usize {
    let mut n = 0;
    each_place(hay, needle, false, |_| n += 1);
    n
}

/// The places `needle` occurs at, overlapping ones included: an edit of
/// exactly one occurrence needs exactly one place (`aa` in `aaa` is at
/// two, though only one of them can be replaced).
pub(crate) fn count_places(hay: &[u8], needle: &[u8]) -> usize {
    let mut n = 0;
    each_place(hay, needle, true, |_| n += 1);
    n
}

pub(crate) fn replace_all(hay: &[u8], old: &[u8], new: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut at = 0;
    each_place(hay, old, false, |i| {
        out.extend_from_slice(&hay[at..i]);
        out.extend_from_slice(new);
        at = i + old.len();
    });
    out.extend_from_slice(&hay[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn occurrences_do_not_overlap() {
        assert_eq!(count_occurrences(b"aaaa", b"aa"), 2);
        assert_eq!(replace_all(b"aaaa", b"aa", b"b"), b"bb");
        assert_eq!(count_occurrences(b"abc", b"x"), 0);
        assert_eq!(count_places(b"aaaa", b"aa"), 3);
        assert_eq!(count_places(b"a-a", b"a"), 2);
        assert_eq!(count_places(b"abc", b"x"), 0);
        // Needles with borders, where a search must fall back within them.
        assert_eq!(count_places(b"abababa", b"aba"), 3);
        assert_eq!(count_occurrences(b"abababa", b"aba"), 2);
        assert_eq!(replace_all(b"abababa", b"aba", b"X"), b"XbX");
        assert_eq!(count_places(b"aabaabaaab", b"aabaaab"), 1);
        assert_eq!(count_places(b"ab", b"abc"), 0);
        assert_eq!(replace_all(b"xaay", b"aa", b""), b"xy");
        assert_eq!(replace_all(b"x-y-x", b"x", b"zz"), b"zz-y-zz");
    }

    /// The places, found the slow way: `needle` compared at every offset.
    fn naive_places(hay: &[u8], needle: &[u8]) -> Vec<usize> {
        if needle.is_empty() || needle.len() > hay.len() {
            return Vec::new();
        }
        (0..=hay.len() - needle.len())
            .filter(|&i| &hay[i..i + needle.len()] == needle)
            .collect()
    }

    proptest! {
        /// On a two-letter alphabet, where needles overlap themselves
        /// often, the linear search finds exactly what comparing at every
        /// offset finds, and the replacement is the standard library's.
        #[test]
        fn the_search_agrees_with_comparing_at_every_offset(
            hay in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b')], 0..64),
            needle in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b')], 1..6),
        ) {
            let places = naive_places(&hay, &needle);
            prop_assert_eq!(count_places(&hay, &needle), places.len());
            let mut apart = 0;
            let mut next = 0;
            for &i in &places {
                if i >= next {
                    apart += 1;
                    next = i + needle.len();
                }
            }
            prop_assert_eq!(count_occurrences(&hay, &needle), apart);
            let (h, n) = (String::from_utf8(hay.clone()).unwrap(), String::from_utf8(needle.clone()).unwrap());
            prop_assert_eq!(replace_all(&hay, &needle, b"X"), h.replace(&n, "X").into_bytes());
        }
    }
}
