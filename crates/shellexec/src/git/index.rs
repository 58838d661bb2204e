//! The vetting reader of the repository's index (`.git/index`).
//!
//! The index names the files `git status` and `git diff` compare with the
//! work tree, and git takes those names as they are when it reads the
//! index: it checks a path only when it *writes* an entry. An entry
//! `../../etc/passwd` or `/etc/passwd`, planted in a hostile repository,
//! makes `git diff` read that file and print it. So every name is checked
//! here the way git checks a path it adds (`verify_path`): relative, and no
//! component that is empty (but a trailing `/`, a sparse directory entry),
//! `.`, `..` or `.git` in any case.
//!
//! The reader follows git 2.39's `read-cache.c`: the header (`DIRC`,
//! version 2, 3 or 4, the entry count), then each entry: 40 bytes of stat
//! data, the object name (20 bytes, or 32 where `.git/config` sets
//! `extensions.objectFormat = sha256`), 16 bits of flags whose low 12 bits
//! are the name's length (or `0xFFF`: up to the NUL), 16 more with the
//! extended flag, then the name: NUL-padded to a multiple of 8 bytes in
//! versions 2 and 3, prefix compressed in version 4; then the extensions,
//! each a signature and a size. The name's length comes from the flags, as
//! git takes it, and the byte after it must be the NUL (else git's C
//! string would be longer than the name that was checked). An index that
//! does not read this way is refused.
//!
//! A split index (the `link` extension) keeps its entries in a
//! `sharedindex.*` file as well: refused. git is also run with
//! `index.threads=1`, so that it reads the entries one after the other, as
//! here, and never from the offsets an `IEOT` extension would give its
//! threads.

use super::{shown_bytes, GitError};

/// The largest index [`vet_index`] reads.
pub(super) const MAX_INDEX_BYTES: u64 = 256 * 1024 * 1024;

/// Why an index is refused.
enum Bad {
    /// The bytes are not an index.
    Structure,
    /// An entry names this path, which is not admitted.
    Name(Vec<u8>),
    /// A split index.
    Split,
}

/// Refuses an index (whose object names are `hash` bytes long) that names
/// a path outside the work tree, a split index, or one that does not parse.
/// Otherwise, the names of its entries.
pub(super) fn vet_index(bytes: &[u8], hash: usize) -> Result<Vec<Vec<u8>>, GitError> {
    match check(bytes, hash) {
        Ok(names) => Ok(names),
        Err(Bad::Structure) => Err(GitError::repository(
            "confined git refuses the repository: its index does not parse (as git 2.39 reads it)",
        )),
        Err(Bad::Name(name)) => Err(GitError::repository(format!(
            "confined git refuses the repository: its index names `{}`, a path git would read \
             outside the work tree or in .git (git never writes such an entry)",
            shown_bytes(&name)
        ))),
        Err(Bad::Split) => Err(GitError::repository(
            "confined git refuses the repository: its index is split (core.splitIndex), and the \
             shared index is not vetted",
        )),
    }
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// git's `decode_varint` (offset encoding), from `at`: the value and the
/// offset after it.
fn varint(bytes: &[u8], mut at: usize) -> Option<(usize, usize)> {
    let mut c = *bytes.get(at)?;
    at += 1;
    let mut val = usize::from(c & 127);
    while c & 128 != 0 {
        c = *bytes.get(at)?;
        at += 1;
        val = val.checked_add(1)?.checked_mul(128)? | usize::from(c & 127);
    }
    Some((val, at))
}

/// Whether git's `verify_path` would admit `name` (no `..`, `.`, `.git` or
/// empty component, not absolute; a trailing `/` ends a sparse directory).
fn name_ok(name: &[u8]) -> bool {
    let name = name.strip_suffix(b"/").unwrap_or(name);
    !name.is_empty()
        && !name.contains(&0)
        && name
            .split(|b| *b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b".." && !c.eq_ignore_ascii_case(b".git"))
}

fn check(bytes: &[u8], hash: usize) -> Result<Vec<Vec<u8>>, Bad> {
    const FIXED: usize = 40;
    const NAME_MASK: usize = 0x0FFF;
    const EXTENDED: u16 = 0x4000;
    if bytes.len() < 12 + hash || &bytes[..4] != b"DIRC" {
        return Err(Bad::Structure);
    }
    let version = be32(bytes, 4).ok_or(Bad::Structure)?;
    if !(2..=4).contains(&version) {
        return Err(Bad::Structure);
    }
    let count = be32(bytes, 8).ok_or(Bad::Structure)?;
    let end = bytes.len() - hash;
    let body = &bytes[..end];
    let mut at = 12usize;
    let mut previous: Vec<u8> = Vec::new();
    // The first name refused; the whole index is read first, since a split
    // index holds entries without names (their names are in the shared
    // index).
    let mut bad: Option<Vec<u8>> = None;
    let mut names = Vec::new();
    for _ in 0..count {
        let flags_at = at + FIXED + hash;
        let flags = be16(body, flags_at).ok_or(Bad::Structure)?;
        let mut name_at = flags_at + 2;
        if flags & EXTENDED != 0 {
            be16(body, name_at).ok_or(Bad::Structure)?;
            name_at += 2;
        }
        let len = usize::from(flags) & NAME_MASK;
        let nul_from = |from: usize| -> Result<usize, Bad> {
            body.get(from..)
                .and_then(|rest| rest.iter().position(|b| *b == 0))
                .map(|n| from + n)
                .ok_or(Bad::Structure)
        };
        // The entry's name is built in `previous` (version 4 names keep a
        // prefix of the name before), reusing its buffer.
        let next = if version == 4 {
            let (strip, tail_at) = varint(body, name_at).ok_or(Bad::Structure)?;
            let keep = previous.len().checked_sub(strip).ok_or(Bad::Structure)?;
            let tail_nul = nul_from(tail_at)?;
            let tail_len = if len == NAME_MASK {
                tail_nul - tail_at
            } else {
                // git copies `len - keep` bytes of the tail and the byte
                // after them, which must be the NUL.
                let n = len.checked_sub(keep).ok_or(Bad::Structure)?;
                if tail_at + n != tail_nul {
                    bad.get_or_insert_with(|| body[tail_at..tail_nul].to_vec());
                }
                n
            };
            let tail = body
                .get(tail_at..tail_at + tail_len)
                .ok_or(Bad::Structure)?;
            previous.truncate(keep);
            previous.extend_from_slice(tail);
            tail_at + tail_len + 1
        } else {
            let name_nul = nul_from(name_at)?;
            let len = if len == NAME_MASK {
                name_nul - name_at
            } else {
                len
            };
            if name_at + len != name_nul {
                let shown_end = name_nul.max(name_at + len).min(body.len());
                bad.get_or_insert_with(|| body[name_at..shown_end].to_vec());
            }
            // git's `ondisk_ce_size`: the entry padded to 8 bytes.
            let size = (name_at - at + len + 8) & !7;
            let name = body.get(name_at..name_at + len).ok_or(Bad::Structure)?;
            previous.clear();
            previous.extend_from_slice(name);
            at + size
        };
        if next > end {
            return Err(Bad::Structure);
        }
        if !name_ok(&previous) {
            bad.get_or_insert_with(|| previous.clone());
        }
        names.push(previous.clone());
        at = next;
    }
    // Extensions: a four-byte signature and a 32-bit size each.
    let mut split = false;
    while at + 8 <= end {
        split |= &body[at..at + 4] == b"link";
        let size = be32(body, at + 4).ok_or(Bad::Structure)? as usize;
        at = at
            .checked_add(8)
            .and_then(|a| a.checked_add(size))
            .filter(|a| *a <= end)
            .ok_or(Bad::Structure)?;
    }
    match (split, bad) {
        (true, _) => Err(Bad::Split),
        (false, Some(name)) => Err(Bad::Name(name)),
        (false, None) => Ok(names),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 2 index of `names` (SHA-1), with `extra` extensions.
    fn index_v2(names: &[&[u8]], extra: &[u8]) -> Vec<u8> {
        let mut out = b"DIRC".to_vec();
        out.extend_from_slice(&2u32.to_be_bytes());
        out.extend_from_slice(&(names.len() as u32).to_be_bytes());
        for name in names {
            let start = out.len();
            out.extend_from_slice(&[0; 40 + 20]);
            out.extend_from_slice(&(name.len().min(0xFFF) as u16).to_be_bytes());
            out.extend_from_slice(name);
            let size = (40 + 20 + 2 + name.len() + 8) & !7;
            out.resize(start + size, 0);
        }
        out.extend_from_slice(extra);
        out.extend_from_slice(&[0; 20]);
        out
    }

    /// A version 4 index: (bytes to strip from the previous name, tail).
    fn index_v4(names: &[(u8, &[u8], usize)]) -> Vec<u8> {
        let mut out = b"DIRC".to_vec();
        out.extend_from_slice(&4u32.to_be_bytes());
        out.extend_from_slice(&(names.len() as u32).to_be_bytes());
        for (strip, tail, len) in names {
            out.extend_from_slice(&[0; 40 + 20]);
            out.extend_from_slice(&(*len as u16).to_be_bytes());
            out.push(*strip);
            out.extend_from_slice(tail);
            out.push(0);
        }
        out.extend_from_slice(&[0; 20]);
        out
    }

    #[test]
    fn good_names_pass() {
        vet_index(
            &index_v2(&[b"a.rs", b"src/lib.rs", b"dir/"], b"TREE\0\0\0\0"),
            20,
        )
        .unwrap();
        vet_index(&index_v4(&[(0, b"src/a.rs", 8), (4, b"b.rs", 8)]), 20).unwrap();
    }

    #[test]
    fn names_outside_the_work_tree_are_refused() {
        for bad in [
            &b"../x"[..],
            b"a/../../x",
            b"/etc/passwd",
            b"a//b",
            b"./a",
            b".git/config",
            b"sub/.GIT/config",
        ] {
            let err = vet_index(&index_v2(&[b"a", bad], b""), 20).unwrap_err();
            assert!(err.message().contains("names"), "{err}");
        }
        // Version 4: `../x` made of the previous name's prefix and a tail.
        let err = vet_index(&index_v4(&[(0, b"..a", 3), (1, b"/x", 4)]), 20).unwrap_err();
        assert!(err.message().contains("`../x`"), "{err}");
        // The length in the flags is what git takes: a name whose NUL
        // comes later than its length is refused.
        let mut raw = index_v2(&[b"abcd"], b"");
        raw[12 + 60 + 1] = 2;
        assert!(vet_index(&raw, 20).is_err());
    }

    #[test]
    fn split_and_broken_indexes_are_refused() {
        let err = vet_index(&index_v2(&[b"a"], b"link\0\0\0\0"), 20).unwrap_err();
        assert!(err.message().contains("split"), "{err}");
        let mut raw = index_v2(&[b"a"], b"");
        raw[8..12].copy_from_slice(&9u32.to_be_bytes());
        let err = vet_index(&raw, 20).unwrap_err();
        assert!(err.message().contains("does not parse"), "{err}");
        // Read with SHA-256 object names, a SHA-1 index does not parse.
        assert!(vet_index(&index_v2(&[b"a.rs"], b""), 32).is_err());
    }
}
