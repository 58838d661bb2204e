//! Line provenance for a supervised run (`sandgate run`).
//!
//! The supervisor reports on stderr with contract lines that begin with
//! `policy:` (admission) and `policy-result:` (a limit's verdict). The child
//! shares that stderr, so it could print a line that looks like a verdict —
//! a forged `policy-result: {"reason":"timeout"}` — and a host reading the
//! stream would believe it. [`Provenance`] sits between the child's stderr
//! and the real one and puts `worker: ` in front of every child line that
//! begins with either token, so that only the supervisor ever writes them
//! unprefixed. Everything else passes through byte for byte.
//!
//! A line begins at the start of the stream and after each of these breaks
//! (any of them, not only LF, since a host may split on any): LF, CR, VT
//! (0x0B), FF (0x0C), U+001C, U+001D, U+001E, and the UTF-8 encodings of
//! U+0085 (`C2 85`), U+2028 (`E2 80 A8`) and U+2029 (`E2 80 A9`), also when
//! such a sequence is split across reads. CR LF is two breaks, which changes
//! nothing. The tokens are matched byte for byte and case-sensitively at the
//! very start of a line; bytes that are not UTF-8 pass through untouched.
//!
//! The output is a function of the whole stream only: whatever the read
//! boundaries, the concatenation of what [`Provenance::push`] and
//! [`Provenance::finish`] return is the same. To get there, a line start
//! that could still become a token (`pol`…) is held back, at most
//! `policy-result` (13 bytes).
//!
//! The marker bytes are added after the output cap is counted: they do not
//! use up the child's output allowance (that is the caller's business).

/// What marks a child line that begins with a contract token.
pub const WORKER_PREFIX: &[u8] = b"worker: ";

/// The contract tokens only the supervisor may start a line with.
pub const CONTRACT_TOKENS: [&[u8]; 2] = [b"policy:", b"policy-result:"];

/// The longest token (`policy-result:`): room for a held line start plus
/// the byte being looked at.
const TOKEN_MAX: usize = 14;

/// Marks child lines that begin with a contract token; see the module
/// documentation.
///
/// One per stream (the child's stderr; stdout too if the caller wants).
#[derive(Clone, Debug)]
pub struct Provenance {
    state: State,
    /// How far into a multi-byte break we are: 0 none, 1 after `C2`,
    /// 2 after `E2`, 3 after `E2 80`.
    utf8: u8,
    /// The stream is empty or its last byte is LF.
    after_lf: bool,
    /// Lines marked so far.
    marked: u64,
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// At the start of a line, holding its first bytes while they are a
    /// proper prefix of a token.
    LineStart { held: [u8; TOKEN_MAX], len: u8 },
    /// Past the point where the line could become a contract line.
    MidLine,
}

impl Default for Provenance {
    fn default() -> Self {
        Provenance::new()
    }
}

impl Provenance {
    /// A marker for a new stream, which starts at the start of a line.
    pub fn new() -> Provenance {
        Provenance {
            state: State::LineStart {
                held: [0; TOKEN_MAX],
                len: 0,
            },
            utf8: 0,
            after_lf: true,
            marked: 0,
        }
    }

    /// Feeds the next `chunk` of child output; returns the bytes to write
    /// now, with `worker: ` inserted before each contract token that begins
    /// a line. The start of a line that may still become a token is held
    /// back until a later call (or [`Provenance::finish`]).
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(chunk.len() + WORKER_PREFIX.len());
        self.push_into(chunk, &mut out);
        out
    }

    /// Like [`Provenance::push`], appending to `out` instead of allocating.
    pub fn push_into(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        for &byte in chunk {
            self.step(byte, out);
            self.after_lf = byte == b'\n';
        }
    }

    /// Ends the stream: returns the bytes still held back (the start of a
    /// last line that never became a token, written as it was).
    pub fn finish(self) -> Vec<u8> {
        match self.state {
            State::LineStart { held, len } => held[..usize::from(len)].to_vec(),
            State::MidLine => Vec::new(),
        }
    }

    /// Whether the stream so far (including what is held back) is empty or
    /// ends with LF: a line the supervisor writes now starts a fresh
    /// LF-delimited line. When false, write `"\n"` first. Any other break
    /// (a lone CR, U+2028, …) does not count: hosts split on LF.
    #[cfg(test)]
    pub fn at_line_start(&self) -> bool {
        self.after_lf
    }

    /// How many child lines have been marked so far.
    #[cfg(test)]
    pub fn marked_lines(&self) -> u64 {
        self.marked
    }

    fn step(&mut self, byte: u8, out: &mut Vec<u8>) {
        let State::LineStart { mut held, len } = self.state else {
            self.mid_line(byte, out);
            return;
        };
        let len = usize::from(len);
        held[len] = byte;
        let line = &held[..=len];
        if CONTRACT_TOKENS.contains(&line) {
            out.extend_from_slice(WORKER_PREFIX);
            out.extend_from_slice(line);
            self.marked += 1;
            self.state = State::MidLine;
        } else if CONTRACT_TOKENS.iter().any(|t| t.starts_with(line)) {
            // A proper prefix (a token is never a prefix of the other
            // plus more: `policy:` ends with the colon).
            self.state = State::LineStart {
                held,
                len: (len + 1) as u8,
            };
        } else {
            // Not a contract line: release what was held, then treat this
            // byte as any other (it may be a break).
            out.extend_from_slice(&held[..len]);
            self.state = State::MidLine;
            self.mid_line(byte, out);
        }
    }

    fn mid_line(&mut self, byte: u8, out: &mut Vec<u8>) {
        out.push(byte);
        let is_break = matches!(
            (self.utf8, byte),
            (_, b'\n' | b'\r' | 0x0B | 0x0C | 0x1C | 0x1D | 0x1E) | (1, 0x85) | (3, 0xA8 | 0xA9)
        );
        self.utf8 = match (self.utf8, byte) {
            (2, 0x80) => 3,
            (_, 0xC2) => 1,
            (_, 0xE2) => 2,
            _ => 0,
        };
        if is_break {
            self.utf8 = 0;
            self.state = State::LineStart {
                held: [0; TOKEN_MAX],
                len: 0,
            };
        }
    }
}

#[cfg(test)]
mod tests;
