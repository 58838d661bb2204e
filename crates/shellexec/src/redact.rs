//! Streaming output redaction (docs/reference/executor.md).
//!
//! A child may print a secret it should not have: a key read from a config
//! file, a token echoed by a tool, the value of a variable the executor
//! withheld (found through `/proc` or a dotfile). The executor passes the
//! child's output through a [`Redactor`] before anyone sees it.
//!
//! # What is replaced
//!
//! A *secret occurrence* is a range of the output bytes that is one of:
//!
//! - a withheld variable's value, [`MIN_VALUE_LEN`] bytes or longer, byte
//!   for byte (shorter values would hit ordinary text), or spelled as a
//!   common JSON serializer spells it inside a string (JavaScript's, serde's
//!   and Ruby's plain style, Python's, PHP's, Go's and .NET's defaults): a
//!   host that echoes a token back in a JSON answer may write `/` as `\/`
//!   or `+` as `\u002B`;
//! - `sk-` followed by 20 or more of `[A-Za-z0-9_-]` (so `sk-proj-…` too);
//! - `ghp_`, `gho_`, `ghu_`, `ghs_` or `ghr_` followed by 20 or more of
//!   `[A-Za-z0-9]`, or `github_pat_` followed by 20 or more of
//!   `[A-Za-z0-9_]`;
//! - `AKIA` followed by exactly 16 of `[A-Z0-9]` (an AWS access key id);
//! - `xoxb-`, `xoxa-`, `xoxp-`, `xoxr-` or `xoxs-` followed by 10 or more of
//!   `[A-Za-z0-9-]` (Slack);
//! - the value of an `Authorization:` header (ASCII case-insensitive, also
//!   `Proxy-Authorization:`, and `"Authorization":` as in JSON): everything
//!   after the colon and any spaces or tabs up to the end of the line (CR or
//!   LF); the header name stays visible;
//! - a `Bearer` token (ASCII case-insensitive): after `Bearer`, one or more
//!   spaces or tabs, 8 or more of `[A-Za-z0-9._~+/=-]`; the word `Bearer`
//!   stays visible;
//! - a PEM private-key block: from `-----BEGIN <LABEL>PRIVATE KEY-----`
//!   (also `… PRIVATE KEY BLOCK-----`, as PGP writes; `<LABEL>` is up to 64
//!   of `[A-Z0-9 ]`, as in `RSA `, `EC `, `OPENSSH `) through the end of the
//!   first `-----END <LABEL>PRIVATE KEY-----` after it. A block with no END
//!   within [`PEM_BLOCK_MAX`] bytes of its BEGIN (a cut-off key, or a stray
//!   marker) ends there and scanning resumes. Blocks do not nest;
//! - a URL's password: after `://`, a user part of up to
//!   [`URL_USER_MAX`] bytes (anything but `:`, `/`, `?`, `#` and what ends
//!   a URL; an unencoded `@` is kept in it, as in an e-mail address) and a
//!   `:`, the bytes up to the *last* `@` of the URL within
//!   [`URL_PASSWORD_MAX`] bytes. A URL ends at an ASCII control byte, a
//!   space, `"`, `<` or `>`. A parser would end the userinfo at the last
//!   `@` before the path, but a person writes `pa/ss` or `p@ss` unencoded,
//!   so the password may hold `/`, `?`, `#` and `@`: taking the last `@`
//!   never shows a part of it, at the price of hiding more where the path
//!   holds an `@` (`https://u:p@host/@me` shows `https://u:[REDACTED]@me`).
//!   Without an `@` after the `:` (`http://host:8080/x`) nothing is
//!   replaced; the scheme, the user and the host stay visible. A URL that
//!   has not ended within the window is hidden from the password's start
//!   to its end: a longer password is never shown in part;
//! - a password after a key `password`, `passwd` or `pwd` (ASCII
//!   case-insensitive, also glued to a word: `PGPASSWORD`, `userPassword`,
//!   `db_password`); the key stays visible:
//!   - after `=` (libpq, ODBC, ADO.NET, `.env`, a command line; no blank
//!     around `=`): a quoted value from its `'`, `"` or `{` through its
//!     closing `'`, `"` or `}` (a backslash escapes the next byte, a
//!     doubled closing quote continues the value; an unclosed one ends
//!     with its line), or else a run up to a control byte or `;` that, in
//!     a query string (after `?` or `&`), ends at `&` or a blank; after a
//!     `;` on its line (ODBC) takes blanks in; elsewhere ends at `&` when
//!     `key=` follows it (a form body) and at a blank unless a `;` comes
//!     within [`CONN_GAP_MAX`] bytes before a line end or a `key=`
//!     (libpq accepts no blank in an unquoted value: its next item is a
//!     `key=`). Nothing is replaced when no value follows
//!     (`the password= field`), for a longer key (`--password-file=`,
//!     `passwords=`, `passwordless=`), or for a `pwd` value that begins
//!     with `/` (`PWD=/home/me`, `OLDPWD=/tmp` are the shell's
//!     directories);
//!   - after `=` with a blank before or after it, where the key begins
//!     its line after blanks, `-` and key bytes or `.` (INI, TOML:
//!     `password = x`, `db.password = "x"`): a `'` or `"` quoted value as
//!     above, or else the rest of the line; nothing when a comment (`#`,
//!     `;`) or the line's end comes first. Elsewhere (`if password = x`)
//!     it is prose;
//!   - after a closing quote and `:` (JSON): a quoted value as above;
//!   - after `:` and a blank, where the key begins its line after blanks,
//!     `-` and key bytes (YAML: `  - db_password: x`): a quoted value, or
//!     the rest of the line. Elsewhere `password:` is prose. A block
//!     scalar (`password: |`, `password: >-`) runs from its indicator
//!     through its last line: the lines after it go on while the next
//!     one with text is indented more than the key (blanks and `-` before
//!     it) and its text begins within [`BLOCK_GAP_MAX`] bytes of the line
//!     end before it; the line end that ends the block stays visible.
//!
//! The token shapes other than PEM, `Authorization:`, URLs and password
//! keys must not follow an ASCII letter or digit (`task-force…` is not an `sk-` key), and the
//! repeating parts are greedy: the whole run of admitted bytes is covered.
//!
//! Occurrences that overlap are merged, so that no byte of any occurrence
//! survives (two secrets that share bytes are not half-revealed). Each
//! merged range becomes one marker: `[REDACTED:NAME]` when the occurrence
//! that starts first is a withheld value (at equal starts a value wins over
//! a shape and the longer value wins over the shorter), `[REDACTED]`
//! otherwise. Identical values withheld under several names are labelled
//! with the first name in sort order.
//!
//! # Streaming
//!
//! The output is a function of the whole byte stream only: whatever the
//! read boundaries, the concatenation of what [`Redactor::push`] and
//! [`Redactor::finish`] return is the same. To get there the redactor holds
//! back the bytes that could still turn out to be part of a secret — at most
//! the longest withheld value, about a hundred bytes for the token shapes,
//! or [`URL_PASSWORD_MAX`] bytes of a URL whose password is undecided
//! until the URL ends, or [`CONN_GAP_MAX`] bytes after a blank or an `&` in
//! an unquoted password value, or [`BLOCK_GAP_MAX`] bytes after a line of
//! a YAML block scalar — and emits a marker as soon as a secret is
//! certain. Bytes inside
//! a secret are dropped as they arrive, never buffered, so a long token, a
//! header line or a PEM block costs no memory.
//!
//! This guards against accidents, not against a child that wants to leak:
//! a secret printed in base64 or one byte per line passes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use aho_corasick::packed::{self, Searcher};

/// Withheld values shorter than this are not redacted (they would match
/// ordinary output).
pub const MIN_VALUE_LEN: usize = 8;

/// The most bytes a PEM private-key block covers when its END line does not
/// come: then the block ends there and scanning resumes.
pub const PEM_BLOCK_MAX: u64 = 16 * 1024;

/// Above this capacity, the hold-back buffer is shrunk after each chunk.
const HOLD_CAPACITY: usize = 64 * 1024;

/// Bytes of a quiet run checked one by one before the vectorised search
/// takes over (see `Rules::next_wake`).
const SKIP_AFTER: usize = 32;

/// The marker for a token shape.
const MARKER: &[u8] = b"[REDACTED]";

/// The longest `<LABEL>PRIVATE KEY BLOCK` text between `-----BEGIN ` (or
/// `-----END `) and the closing dashes.
const PEM_LABEL_MAX: u8 = 64 + 17;

/// A streaming redactor for one output stream.
///
/// Feed it the stream's bytes as they are read with [`Redactor::push`]; at
/// the end of the stream call [`Redactor::finish`]. Use one per stream
/// (stdout and stderr each need their own): build one, then clone it before
/// feeding any bytes; clones share the compiled value matcher.
#[derive(Clone)]
pub struct Redactor {
    rules: Arc<Rules>,
    /// Input bytes consumed so far.
    pos: u64,
    /// The input byte before `pos`, for the left-boundary rule.
    prev: Option<u8>,
    /// The value matcher's state.
    ac_state: u32,
    /// Live token-shape candidates, in order of creation.
    cands: Vec<Cand>,
    /// Start of the PEM block being dropped, if inside one.
    pem_inside: Option<u64>,
    /// Live END-marker candidates while inside a PEM block.
    pem_ends: Vec<Cand>,
    /// Input bytes `[done, pos)`: not yet emitted nor dropped.
    pending: VecDeque<u8>,
    /// Input before this offset has been emitted or dropped.
    done: u64,
    /// Known secret ranges not yet fully behind `done`: sorted, disjoint.
    regions: VecDeque<Region>,
    /// Nothing from this input offset on is emitted
    /// ([`Redactor::stop_emitting`]); `u64::MAX` until then.
    limit: u64,
    /// The line so far: `LINE_INDENT` (only blanks and `-`), `LINE_KEY`
    /// (then only key bytes, as in `  - db_`) or `LINE_OTHER`.
    line: u8,
    /// A `;` since the last line end.
    line_semi: bool,
    /// Bytes of the line's indentation (blanks and `-`) so far.
    line_indent: u32,
}

impl Redactor {
    /// A redactor for the token shapes and for the given withheld values
    /// (name, value bytes). Values shorter than [`MIN_VALUE_LEN`] are
    /// ignored.
    pub fn new<I, N, V>(withheld: I) -> Redactor
    where
        I: IntoIterator<Item = (N, V)>,
        N: AsRef<str>,
        V: AsRef<[u8]>,
    {
        Redactor {
            rules: Arc::new(Rules::new(withheld)),
            pos: 0,
            prev: None,
            ac_state: 0,
            cands: Vec::new(),
            pem_inside: None,
            pem_ends: Vec::new(),
            pending: VecDeque::new(),
            done: 0,
            regions: VecDeque::new(),
            limit: u64::MAX,
            line: LINE_INDENT,
            line_semi: false,
            line_indent: 0,
        }
    }

    /// A redactor for the token shapes only (no withheld values).
    pub fn shapes_only() -> Redactor {
        Redactor::new(std::iter::empty::<(&str, &[u8])>())
    }

    /// Feeds the next `chunk` of the stream; returns the redacted bytes that
    /// are now certain. Bytes that could still be the start of a secret are
    /// held back until a later call (or [`Redactor::finish`]) decides them.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(chunk.len());
        self.push_into(chunk, &mut out);
        out
    }

    /// Like [`Redactor::push`], appending to `out` instead of allocating.
    pub fn push_into(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.push_with(chunk, out, true);
    }

    /// The in-place form of the fast path: `bytes` were appended to the
    /// output unread; returns how many of their leading bytes [`push_into`]
    /// would have copied straight through (they start nothing), and takes
    /// them as emitted. The caller feeds the rest, if any, to `push_into`.
    /// Nothing is taken while anything is held back or in progress.
    ///
    /// [`push_into`]: Redactor::push_into
    pub fn pass_quiet(&mut self, bytes: &[u8]) -> usize {
        if !self.idle()
            || !self.pending.is_empty()
            || !self.regions.is_empty()
            || self.limit != u64::MAX
        {
            return 0;
        }
        let quiet = self.rules.quiet_run(bytes, false);
        if quiet > 0 {
            self.pos += quiet as u64;
            self.done += quiet as u64;
            self.prev = Some(bytes[quiet - 1]);
            self.note_run(&bytes[..quiet]);
        }
        quiet
    }

    /// The body of [`Redactor::push_into`]; `fast` off forces every byte
    /// through the hold-back buffer (for tests: the output is the same).
    fn push_with(&mut self, chunk: &[u8], out: &mut Vec<u8>, fast: bool) {
        let mut rest = chunk;
        while let Some((&byte, tail)) = rest.split_first() {
            if self.idle() {
                // Nothing in progress: this point is as good as a chunk
                // boundary, so decide what is held back (everything, as
                // nothing can claim it), then copy the run of bytes that
                // start nothing straight to `out`.
                if fast && (!self.pending.is_empty() || !self.regions.is_empty()) {
                    let pos = self.pos;
                    self.emit(pos, false, out);
                    // What is left ends at or before `done`: announced.
                    debug_assert!(self
                        .regions
                        .iter()
                        .all(|r| r.announced && r.end <= self.done));
                    self.regions.clear();
                }
                let quiet = self.rules.quiet_run(rest, !fast);
                if quiet > 0 {
                    let run = &rest[..quiet];
                    if fast {
                        let shown = self.limit.saturating_sub(self.pos).min(quiet as u64);
                        out.extend_from_slice(&run[..to_usize(shown)]);
                        self.done += quiet as u64;
                    } else {
                        self.pending.extend(run);
                    }
                    self.pos += quiet as u64;
                    self.prev = Some(run[quiet - 1]);
                    self.note_run(run);
                    rest = &rest[quiet..];
                    continue;
                }
            }
            self.pending.push_back(byte);
            self.step(byte);
            rest = tail;
        }
        let frontier = self.frontier();
        let open = self.growing();
        self.emit(frontier, open, out);
        // A huge chunk must not pin its size in the hold-back buffer.
        if self.pending.capacity() > HOLD_CAPACITY && self.pending.len() < HOLD_CAPACITY / 2 {
            self.pending.shrink_to(HOLD_CAPACITY / 2);
        }
    }

    /// [`Redactor::push`] without the direct-copy fast path (every byte
    /// goes through the hold-back buffer, no look-ahead skipping): the
    /// reference the fast path is tested against.
    #[cfg(test)]
    fn push_slow(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(chunk.len());
        self.push_with(chunk, &mut out, false);
        out
    }

    /// Ends the stream: returns everything still held back, redacted.
    /// A secret cut off by the end of the stream is redacted up to there
    /// when it is certain (a long enough token run, a PEM block after its
    /// BEGIN line); an incomplete prefix is plain text.
    pub fn finish(mut self) -> Vec<u8> {
        let mut out = Vec::new();
        // A URL cut off by the end: its password runs to its last `@`.
        let pos = self.pos;
        for (from, to) in self.cands.iter().filter_map(|c| c.at_end(pos)) {
            cover_range(&mut self.regions, from, to, Label::shape(from));
        }
        self.cands.clear();
        self.pem_inside = None;
        self.pem_ends.clear();
        let end = self.pos;
        self.emit(end, false, &mut out);
        out
    }

    /// How many input bytes are held back now (neither emitted nor
    /// dropped). Bounded by the longest withheld value, a PEM marker or
    /// [`URL_PASSWORD_MAX`], whichever is longest, plus nothing for secrets
    /// being dropped.
    pub fn held_back(&self) -> usize {
        self.pending.len()
    }

    /// Emits nothing of the input from the current position on: bytes fed
    /// later only decide what is held back now (emitted as plain text, or
    /// a marker where a secret that began before this point is completed),
    /// and a marker is emitted only for a secret that begins before it.
    /// For a stream cut at an output cap: what is shown of it is then the
    /// same whether or not its last bytes begin a secret, so the cut tells
    /// the command nothing about a value it was not given. Calling it
    /// again keeps the earliest stop.
    pub fn stop_emitting(&mut self) {
        self.limit = self.limit.min(self.pos);
    }

    /// Like [`Redactor::stop_emitting`], after the first `keep` of the
    /// bytes held back now ([`Redactor::held_to_show`]): for a cap that
    /// falls among them.
    pub fn stop_emitting_within(&mut self, keep: usize) {
        let at = self.done.saturating_add(keep as u64).min(self.pos);
        self.limit = self.limit.min(at);
    }

    /// How many of the bytes held back now may still be emitted (all of
    /// them until emitting is stopped, then those before the stop). Each
    /// comes out as it is or within a marker, so a cap that keeps them a
    /// place cuts the same whether or not they begin a secret.
    pub fn held_to_show(&self) -> usize {
        to_usize(self.limit.min(self.pos).saturating_sub(self.done))
    }

    /// Whether, after [`Redactor::stop_emitting`], nothing before the stop
    /// is held back any more: more input would change nothing emitted.
    /// Reached within as many bytes as can be held back.
    pub fn settled(&self) -> bool {
        self.done >= self.limit
    }

    /// Whether no match of any kind is in progress: then a byte that
    /// starts nothing changes nothing but the position.
    fn idle(&self) -> bool {
        self.ac_state == 0 && self.cands.is_empty() && self.pem_inside.is_none()
    }

    /// Updates what is known of the current line after a run of bytes
    /// that was not stepped through: only its tail matters.
    fn note_run(&mut self, run: &[u8]) {
        let tail = match memchr::memrchr2(b'\n', b'\r', run) {
            Some(k) => {
                self.line = LINE_INDENT;
                self.line_semi = false;
                self.line_indent = 0;
                &run[k + 1..]
            }
            None => run,
        };
        if !self.line_semi && memchr::memchr(b';', tail).is_some() {
            self.line_semi = true;
        }
        for &b in tail {
            if self.line == LINE_OTHER {
                break;
            }
            self.next_line_state(b);
        }
    }

    /// The context a key starting at the current byte is in.
    fn ctx(&self) -> u8 {
        let mut ctx = 0;
        if matches!(self.prev, Some(b'?' | b'&')) {
            ctx |= CTX_QUERY;
        }
        if self.line != LINE_OTHER {
            ctx |= CTX_LINE_START;
        }
        if self.line_semi {
            ctx |= CTX_SEMI;
        }
        ctx
    }

    /// Consumes one input byte.
    fn step(&mut self, byte: u8) {
        let p = self.pos;
        self.pos += 1;
        let end = self.pos;
        let rules = &*self.rules;

        // Withheld values.
        if let Some(ac) = &rules.ac {
            self.ac_state = ac.step(self.ac_state, byte);
            if let Some((pattern, len)) = ac.output(self.ac_state) {
                let start = end - u64::from(len);
                let label = Label::value(start, len, pattern);
                cover(&mut self.regions, start, end, label);
            }
        }

        // Inside a PEM block: drop everything up to its END line. No block
        // begins on the byte that ends one.
        let was_inside = self.pem_inside.is_some();
        if let Some(start) = self.pem_inside {
            cover(&mut self.regions, start, end, Label::shape(start));
            let mut closed = false;
            self.pem_ends
                .retain_mut(|cand| match cand.advance(byte, p) {
                    Advance::Live => true,
                    Advance::Dead => false,
                    Advance::Confirmed { .. } => {
                        closed = true;
                        false
                    }
                    Advance::Found { .. } => false,
                });
            if byte == b'-' {
                self.pem_ends.push(Cand::new(Kind::PemEnd, p));
            }
            if closed || end - start >= PEM_BLOCK_MAX {
                self.pem_inside = None;
                self.pem_ends.clear();
            }
        }

        // Token shapes.
        let mut pem_begun = None;
        let regions = &mut self.regions;
        self.cands.retain_mut(|cand| match cand.advance(byte, p) {
            Advance::Live => true,
            Advance::Dead => false,
            Advance::Confirmed { from, done } => {
                if cand.kind == Kind::PemBegin {
                    pem_begun = Some(cand.start);
                }
                cover(regions, from, end, Label::shape(from));
                !done
            }
            Advance::Found { from, to } => {
                cover_range(regions, from, to, Label::shape(from));
                false
            }
        });
        if let Some(start) = pem_begun {
            self.cands.retain(|cand| cand.kind != Kind::PemBegin);
            self.pem_inside = Some(start);
        }
        let mut starts = rules.starts[usize::from(byte)];
        // Asked only where something may start: most bytes start nothing.
        let (boundary, ctx) = if starts != 0 {
            (
                !self.prev.is_some_and(|b| b.is_ascii_alphanumeric()),
                self.ctx(),
            )
        } else {
            (false, 0)
        };
        while starts != 0 {
            let kind = KINDS[starts.trailing_zeros() as usize];
            starts &= starts - 1;
            if kind.spec().boundary && !boundary {
                continue;
            }
            if kind == Kind::PemBegin && (was_inside || self.pem_inside.is_some()) {
                continue;
            }
            let mut cand = Cand::new(kind, p);
            cand.ctx = ctx;
            cand.indent = self.line_indent;
            self.cands.push(cand);
        }
        if self.cands.len() > 1 {
            self.prune();
        }
        self.prev = Some(byte);
        if is_line_end(byte) {
            self.line = LINE_INDENT;
            self.line_semi = false;
            self.line_indent = 0;
        } else {
            self.next_line_state(byte);
            self.line_semi |= byte == b';';
        }
    }

    /// The line state after `b` (not a line end), with the indentation
    /// counted.
    fn next_line_state(&mut self, b: u8) {
        let next = line_next(self.line, b);
        if self.line == LINE_INDENT && next == LINE_INDENT {
            self.line_indent = self.line_indent.saturating_add(1);
        }
        self.line = next;
    }

    /// Drops token candidates that another one of the same kind dominates:
    /// for greedy shapes, a run that began earlier covers every byte a later
    /// one could (same admitted bytes, longer so far). Keeps the candidate
    /// count bounded on input like `sk-sk-sk-…`.
    fn prune(&mut self) {
        // A URL whose password window overflowed hides the rest of the
        // URL: every other URL candidate began after its password did
        // (an earlier one would have died at its `//` or overflowed
        // first), and ends with it, so it covers them.
        if let Some(first) = self
            .cands
            .iter()
            .position(|c| matches!(c.phase, Phase::UrlRest { .. }))
        {
            let mut i = 0;
            self.cands.retain(|c| {
                let keep = c.kind != Kind::Url || i == first;
                i += 1;
                keep
            });
        }
        // A YAML block scalar that began first covers every later one: a
        // later key is on one of its lines, indented more, so its block
        // ends no later.
        if self
            .cands
            .iter()
            .filter(|c| c.block_from().is_some())
            .nth(1)
            .is_some()
        {
            let first = self.cands.iter().filter_map(Cand::block_from).min();
            let mut kept = false;
            self.cands.retain(|c| match c.block_from() {
                Some(from) if !kept && Some(from) == first => {
                    kept = true;
                    true
                }
                Some(_) => false,
                None => true,
            });
        }
        // Quoted values of one key in the same state end together, and the
        // one that began first covers every byte a later one could: keep
        // it only (on input like `password='password='…`).
        if self
            .cands
            .iter()
            .filter(|c| matches!(c.phase, Phase::Quoted { .. }))
            .nth(1)
            .is_some()
        {
            let mut seen: Vec<(Kind, u8, bool, bool)> = Vec::new();
            self.cands.retain(|cand| match cand.phase {
                Phase::Quoted {
                    close, esc, closed, ..
                } => {
                    let state = (cand.kind, close, esc, closed);
                    if seen.contains(&state) {
                        false
                    } else {
                        seen.push(state);
                        true
                    }
                }
                _ => true,
            });
        }
        let mut best: [Option<u64>; KINDS.len() * 8] = [None; KINDS.len() * 8];
        for cand in &self.cands {
            if let Some(from) = cand.greedy_body_start() {
                let slot = &mut best[cand.greedy_slot()];
                *slot = Some(slot.map_or(from, |b| b.min(from)));
            }
        }
        if self
            .cands
            .iter()
            .filter(|c| c.greedy_body_start().is_some())
            .count()
            <= 1
        {
            return;
        }
        let mut kept: [bool; KINDS.len() * 8] = [false; KINDS.len() * 8];
        self.cands.retain(|cand| match cand.greedy_body_start() {
            None => true,
            Some(from) => {
                let k = cand.greedy_slot();
                if kept[k] || best[k] != Some(from) {
                    false
                } else {
                    kept[k] = true;
                    true
                }
            }
        });
    }

    /// The first input offset that a live, unconfirmed candidate could
    /// still claim: everything before it is decided.
    fn frontier(&self) -> u64 {
        let mut frontier = self.pos;
        if let Some(ac) = &self.rules.ac {
            frontier = frontier.min(self.pos - u64::from(ac.depth(self.ac_state)));
        }
        for cand in &self.cands {
            if let Some(hold) = cand.hold_from() {
                frontier = frontier.min(hold);
            }
        }
        frontier
    }

    /// Whether a confirmed secret is still growing at the end of the input
    /// (a greedy token run, a header value, a PEM block).
    fn growing(&self) -> bool {
        self.pem_inside.is_some() || self.cands.iter().any(Cand::is_growing)
    }

    /// Emits or drops the input before `frontier`.
    fn emit(&mut self, frontier: u64, open: bool, out: &mut Vec<u8>) {
        while self.done < frontier {
            let last = self.regions.len() == 1;
            match self.regions.front_mut() {
                Some(region) if region.start <= self.done => {
                    if !region.announced {
                        if region.start < self.limit {
                            out.extend_from_slice(self.rules.marker(region.label));
                        }
                        region.announced = true;
                    }
                    let stop = region.end.min(frontier);
                    self.pending.drain(..to_usize(stop - self.done));
                    self.done = stop;
                    // While a match is open, the last region, or one ending
                    // at the frontier, may still be extended (a
                    // connection-string value whose blank is undecided):
                    // keep it, but only while it reaches the frontier.
                    // One that ends before it is done with (the bytes up to
                    // the frontier are decided), and kept, it would stop
                    // this loop from moving past its end: the loop spun
                    // for ever on such input.
                    let extendable = open && (last || region.end == frontier);
                    if region.end < frontier || (region.end == frontier && !extendable) {
                        self.regions.pop_front();
                    }
                }
                next => {
                    let stop = next.map_or(frontier, |r| r.start.min(frontier));
                    let n = to_usize(stop - self.done);
                    // Only what lies before the limit is shown.
                    let shown = to_usize(stop.min(self.limit).saturating_sub(self.done));
                    let (front, back) = self.pending.as_slices();
                    let from_front = shown.min(front.len());
                    out.extend_from_slice(&front[..from_front]);
                    out.extend_from_slice(&back[..shown - from_front]);
                    self.pending.drain(..n);
                    self.done = stop;
                }
            }
        }
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values, nor the held-back bytes (they may be secret).
        f.debug_struct("Redactor")
            .field("values", &self.rules.markers.len())
            .field("consumed", &self.pos)
            .field("held_back", &self.pending.len())
            .finish()
    }
}

fn to_usize(n: u64) -> usize {
    // The distance is at most the pending buffer's length.
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Adds the secret `[start, end)` (`end` is the input position, or for
/// [`cover_range`] before it, with no region at or after it) to
/// the regions, merging with those it overlaps.
fn cover(regions: &mut VecDeque<Region>, start: u64, end: u64, label: Label) {
    // The common case, a growing secret: it extends the last region only
    // (regions are disjoint, so none before it reaches `start`).
    if let Some(last) = regions.back_mut() {
        if last.start <= start && start < last.end {
            last.end = last.end.max(end);
            if label.key() < last.label.key() {
                debug_assert!(!last.announced);
                last.label = label;
            }
            return;
        }
    }
    let mut merged = Region {
        start,
        end,
        label,
        announced: false,
    };
    while let Some(last) = regions.pop_back() {
        if last.end <= start {
            regions.push_back(last);
            break;
        }
        merged.start = merged.start.min(last.start);
        merged.end = merged.end.max(last.end);
        if last.announced {
            // Decided already: nothing that starts earlier can join it.
            debug_assert!(last.label.key() <= merged.label.key());
            merged.label = last.label;
            merged.announced = true;
        } else if last.label.key() < merged.label.key() {
            merged.label = last.label;
        }
    }
    regions.push_back(merged);
}

/// Adds the secret `[start, end)`, which may end before the input position
/// (a URL's password, decided where the URL ends), to the regions: merged
/// with those it overlaps, and kept before those that begin at or after
/// its end.
fn cover_range(regions: &mut VecDeque<Region>, start: u64, end: u64, label: Label) {
    let mut later = Vec::new();
    while regions.back().is_some_and(|r| r.start >= end) {
        later.extend(regions.pop_back());
    }
    cover(regions, start, end, label);
    regions.extend(later.into_iter().rev());
}

/// A merged secret range of the input.
#[derive(Clone, Copy, Debug)]
struct Region {
    start: u64,
    end: u64,
    label: Label,
    /// Its marker has been emitted.
    announced: bool,
}

/// Which marker a range gets: that of its occurrence with the least key.
#[derive(Clone, Copy, Debug)]
struct Label {
    start: u64,
    /// 0 for a value, 1 for a shape.
    rank: u8,
    /// `u32::MAX - len` for values (longer first), 0 for shapes.
    shortness: u32,
    /// The value's index, for values.
    pattern: u32,
}

impl Label {
    fn value(start: u64, len: u32, pattern: u32) -> Label {
        Label {
            start,
            rank: 0,
            shortness: u32::MAX - len,
            pattern,
        }
    }

    fn shape(start: u64) -> Label {
        Label {
            start,
            rank: 1,
            shortness: 0,
            pattern: u32::MAX,
        }
    }

    fn key(&self) -> (u64, u8, u32) {
        (self.start, self.rank, self.shortness)
    }
}

/// What does not change while streaming: the value matcher, markers.
struct Rules {
    ac: Option<Ac>,
    /// `[REDACTED:NAME]` for each value pattern.
    markers: Vec<Vec<u8>>,
    /// For each byte, the kinds whose first prefix byte it is (bit set).
    starts: [u16; 256],
    /// For each byte, 1 if it starts a shape or a value, else 0.
    wakes: [u8; 256],
    /// A vectorised search for the same bytes (each a one-byte pattern),
    /// for long runs where none occurs; `None` where the CPU lacks the
    /// instructions or the set is too large for it.
    skip: Option<Searcher>,
    /// For each byte that starts something, the bytes (bit set) that can
    /// come next in it: the shapes' second prefix bytes and the values'
    /// second bytes.
    seconds: Box<[[u64; 4]; 256]>,
}

impl Rules {
    fn new<I, N, V>(withheld: I) -> Rules
    where
        I: IntoIterator<Item = (N, V)>,
        N: AsRef<str>,
        V: AsRef<[u8]>,
    {
        // One pattern per distinct value, labelled with its least name.
        let mut by_value: BTreeMap<Vec<u8>, String> = BTreeMap::new();
        for (name, value) in withheld {
            let (name, value) = (name.as_ref(), value.as_ref());
            if value.len() < MIN_VALUE_LEN || value.len() > u32::MAX as usize {
                continue;
            }
            match by_value.get_mut(value) {
                Some(existing) if existing.as_str() <= name => {}
                Some(existing) => *existing = name.to_owned(),
                None => {
                    by_value.insert(value.to_vec(), name.to_owned());
                }
            }
        }
        // Each value's JSON spellings, under the same name; a spelling
        // that is itself a withheld value keeps that value's name.
        let spelled: Vec<(Vec<u8>, String)> = by_value
            .iter()
            .flat_map(|(value, name)| {
                json_spellings(value)
                    .into_iter()
                    .map(move |spelling| (spelling, name.clone()))
            })
            .collect();
        for (spelling, name) in spelled {
            if spelling.len() > u32::MAX as usize {
                continue;
            }
            match by_value.get_mut(&spelling) {
                Some(existing) if existing.as_str() <= name.as_str() => {}
                Some(existing) => *existing = name,
                None => {
                    by_value.insert(spelling, name);
                }
            }
        }
        let mut patterns = Vec::with_capacity(by_value.len());
        let mut markers = Vec::with_capacity(by_value.len());
        for (value, name) in by_value {
            patterns.push(value);
            markers.push(format!("[REDACTED:{name}]").into_bytes());
        }
        let ac = (!patterns.is_empty()).then(|| Ac::new(&patterns));

        let mut starts = [0u16; 256];
        for (i, kind) in KINDS.iter().enumerate() {
            if *kind == Kind::PemEnd {
                continue;
            }
            for &b in kind.spec().prefix[0] {
                starts[usize::from(b)] |= 1 << i;
            }
        }
        let mut seconds = Box::new([[0u64; 4]; 256]);
        for (i, kind) in KINDS.iter().enumerate() {
            if *kind == Kind::PemEnd {
                continue;
            }
            let prefix = kind.spec().prefix;
            for &first in prefix[0] {
                debug_assert!(starts[usize::from(first)] & (1 << i) != 0);
                for &second in prefix[1] {
                    seconds[usize::from(first)][usize::from(second >> 6)] |= 1 << (second & 63);
                }
            }
        }
        let mut wakes = [0u8; 256];
        for (b, wake) in wakes.iter_mut().enumerate() {
            let value = ac
                .as_ref()
                .and_then(|ac| (ac.root[b] != 0).then_some(ac.root[b]));
            if let (Some(ac), Some(node)) = (&ac, value) {
                // A value that begins here continues with these bytes.
                for &(second, _) in &ac.edges[node as usize] {
                    seconds[b][usize::from(second >> 6)] |= 1 << (second & 63);
                }
            }
            *wake = u8::from(starts[b] != 0 || value.is_some());
        }
        let skip = {
            let mut config = packed::Config::new();
            config.only_teddy(true).heuristic_pattern_limits(false);
            let mut builder = config.builder();
            for b in (0..=255u8).filter(|&b| wakes[usize::from(b)] != 0) {
                builder.add([b]);
            }
            builder.build()
        };
        Rules {
            ac,
            markers,
            starts,
            wakes,
            skip,
            seconds,
        }
    }

    /// The length of the run at the start of `s` that changes nothing but
    /// the position when no match is in progress: bytes that start
    /// nothing, and (unless `plain`) bytes whose next byte (in `s`)
    /// already ends everything they start. Every shape's prefix and every
    /// value is at least two bytes long, and a value matcher one byte deep
    /// whose next byte has no edge falls back to the root, where it would
    /// have been without that byte; so skipping it changes nothing.
    fn quiet_run(&self, s: &[u8], plain: bool) -> usize {
        let mut i = 0;
        loop {
            i = self.next_wake(s, i);
            let Some(&b) = s.get(i) else {
                return s.len();
            };
            match s.get(i + 1) {
                Some(&next)
                    if !plain
                        && self.seconds[usize::from(b)][usize::from(next >> 6)]
                            & (1 << (next & 63))
                            == 0 =>
                {
                    i += 1;
                }
                _ => return i,
            }
        }
    }

    /// The first index at or after `i` whose byte wakes something
    /// (`s.len()` if none). The table answers the first [`SKIP_AFTER`]
    /// bytes, where text usually has a wake byte; past them, a quiet run
    /// is likely long and the vectorised search takes over.
    fn next_wake(&self, s: &[u8], mut i: usize) -> usize {
        let wakes = &self.wakes;
        let near = s.len().min(i.saturating_add(SKIP_AFTER));
        while i < near {
            if wakes[usize::from(s[i])] != 0 {
                return i;
            }
            i += 1;
        }
        if let Some(skip) = &self.skip {
            return skip.find(&s[i..]).map_or(s.len(), |m| i + m.start());
        }
        self.next_wake_table(s, i)
    }

    /// [`Rules::next_wake`] by the table alone, eight bytes a step.
    fn next_wake_table(&self, s: &[u8], mut i: usize) -> usize {
        let wakes = &self.wakes;
        while let Some(w) = s.get(i..i + 8) {
            let any = wakes[usize::from(w[0])]
                | wakes[usize::from(w[1])]
                | wakes[usize::from(w[2])]
                | wakes[usize::from(w[3])]
                | wakes[usize::from(w[4])]
                | wakes[usize::from(w[5])]
                | wakes[usize::from(w[6])]
                | wakes[usize::from(w[7])];
            if any != 0 {
                break;
            }
            i += 8;
        }
        while i < s.len() && wakes[usize::from(s[i])] == 0 {
            i += 1;
        }
        i
    }

    fn marker(&self, label: Label) -> &[u8] {
        match label.rank {
            0 => &self.markers[label.pattern as usize],
            _ => MARKER,
        }
    }
}

/// Aho–Corasick automaton over the withheld values: one step per input
/// byte (amortised), whatever the number of values, and its state's depth
/// says how far back a value could still have begun.
struct Ac {
    /// Transitions out of the root, dense (0 means none: back to root).
    root: Box<[u32; 256]>,
    /// Transitions out of every node, sorted by byte.
    edges: Vec<Vec<(u8, u32)>>,
    fail: Vec<u32>,
    depth: Vec<u32>,
    /// The longest value that ends at this node: (pattern, len), as
    /// pattern + 1 (0 for none).
    output: Vec<u32>,
    lens: Vec<u32>,
}

impl Ac {
    fn new(patterns: &[Vec<u8>]) -> Ac {
        let mut ac = Ac {
            root: Box::new([0; 256]),
            edges: vec![Vec::new()],
            fail: vec![0],
            depth: vec![0],
            output: vec![0],
            lens: Vec::with_capacity(patterns.len()),
        };
        let mut terminal = vec![0u32];
        for (index, pattern) in patterns.iter().enumerate() {
            let mut node = 0u32;
            for &b in pattern {
                node = match ac.goto(node, b) {
                    Some(next) => next,
                    None => {
                        let next = ac.edges.len() as u32;
                        ac.edges.push(Vec::new());
                        ac.fail.push(0);
                        ac.depth.push(ac.depth[node as usize] + 1);
                        ac.output.push(0);
                        terminal.push(0);
                        let list = &mut ac.edges[node as usize];
                        let at = list.partition_point(|&(c, _)| c < b);
                        list.insert(at, (b, next));
                        if node == 0 {
                            ac.root[usize::from(b)] = next;
                        }
                        next
                    }
                };
            }
            terminal[node as usize] = index as u32 + 1;
            ac.lens.push(pattern.len() as u32);
        }
        // Breadth first, so that a node's failure target is done before it.
        let mut queue = VecDeque::from([0u32]);
        while let Some(node) = queue.pop_front() {
            for i in 0..ac.edges[node as usize].len() {
                let (b, child) = ac.edges[node as usize][i];
                let fail = if node == 0 {
                    0
                } else {
                    ac.step(ac.fail[node as usize], b)
                };
                ac.fail[child as usize] = fail;
                ac.output[child as usize] = match terminal[child as usize] {
                    0 => ac.output[fail as usize],
                    own => own,
                };
                queue.push_back(child);
            }
        }
        ac
    }

    fn goto(&self, node: u32, b: u8) -> Option<u32> {
        if node == 0 {
            let next = self.root[usize::from(b)];
            return (next != 0).then_some(next);
        }
        let list = &self.edges[node as usize];
        list.binary_search_by_key(&b, |&(c, _)| c)
            .ok()
            .map(|i| list[i].1)
    }

    fn step(&self, mut node: u32, b: u8) -> u32 {
        loop {
            if let Some(next) = self.goto(node, b) {
                return next;
            }
            if node == 0 {
                return 0;
            }
            node = self.fail[node as usize];
        }
    }

    fn depth(&self, node: u32) -> u32 {
        self.depth[node as usize]
    }

    /// The longest value ending here, as (pattern, len).
    fn output(&self, node: u32) -> Option<(u32, u32)> {
        match self.output[node as usize] {
            0 => None,
            p => Some((p - 1, self.lens[(p - 1) as usize])),
        }
    }
}

/// The token shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Sk,
    Gh,
    GithubPat,
    Akia,
    Slack,
    Bearer,
    Authorization,
    PemBegin,
    PemEnd,
    Url,
    Password,
    Passwd,
    Pwd,
}

const KINDS: [Kind; 13] = [
    Kind::Sk,
    Kind::Gh,
    Kind::GithubPat,
    Kind::Akia,
    Kind::Slack,
    Kind::Bearer,
    Kind::Authorization,
    Kind::PemBegin,
    Kind::PemEnd,
    Kind::Url,
    Kind::Password,
    Kind::Passwd,
    Kind::Pwd,
];

/// What follows a shape's fixed prefix.
#[derive(Clone, Copy, PartialEq, Eq)]
enum After {
    /// The body right away; the secret starts with the prefix.
    Body,
    /// One or more spaces or tabs, then the body; the secret is the body.
    Ws,
    /// An optional quote, spaces, a colon, optional spaces, then the body;
    /// the secret is the body.
    Colon,
    /// A PEM label, then five dashes.
    Label,
    /// A URL's user, `:`, then its password up to the last `@` of the URL.
    Url,
    /// A password key's end: `=` and a connection-string value (quoted,
    /// or a run of [`conn_body`] bytes), a quote and `:` (JSON), or `:`
    /// at the start of a line (YAML).
    Key,
}

struct Spec {
    /// The admitted bytes at each prefix position.
    prefix: &'static [&'static [u8]],
    after: After,
    body: fn(u8) -> bool,
    min: u64,
    max: Option<u64>,
    /// Must not follow an ASCII letter or digit.
    boundary: bool,
}

impl Kind {
    fn spec(self) -> &'static Spec {
        match self {
            Kind::Sk => &SK,
            Kind::Gh => &GH,
            Kind::GithubPat => &GITHUB_PAT,
            Kind::Akia => &AKIA,
            Kind::Slack => &SLACK,
            Kind::Bearer => &BEARER,
            Kind::Authorization => &AUTHORIZATION,
            Kind::PemBegin => &PEM_BEGIN,
            Kind::PemEnd => &PEM_END,
            Kind::Url => &URL,
            Kind::Password => &PASSWORD,
            Kind::Passwd => &PASSWD,
            Kind::Pwd => &PWD,
        }
    }
}

static SK: Spec = Spec {
    prefix: &[b"s", b"k", b"-"],
    after: After::Body,
    body: |b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-',
    min: 20,
    max: None,
    boundary: true,
};

static GH: Spec = Spec {
    prefix: &[b"g", b"h", b"pousr", b"_"],
    after: After::Body,
    body: |b| b.is_ascii_alphanumeric(),
    min: 20,
    max: None,
    boundary: true,
};

static GITHUB_PAT: Spec = Spec {
    prefix: &[
        b"g", b"i", b"t", b"h", b"u", b"b", b"_", b"p", b"a", b"t", b"_",
    ],
    after: After::Body,
    body: |b| b.is_ascii_alphanumeric() || b == b'_',
    min: 20,
    max: None,
    boundary: true,
};

static AKIA: Spec = Spec {
    prefix: &[b"A", b"K", b"I", b"A"],
    after: After::Body,
    body: |b| b.is_ascii_uppercase() || b.is_ascii_digit(),
    min: 16,
    max: Some(16),
    boundary: true,
};

static SLACK: Spec = Spec {
    prefix: &[b"x", b"o", b"x", b"baprs", b"-"],
    after: After::Body,
    body: |b| b.is_ascii_alphanumeric() || b == b'-',
    min: 10,
    max: None,
    boundary: true,
};

static BEARER: Spec = Spec {
    prefix: &[b"bB", b"eE", b"aA", b"rR", b"eE", b"rR"],
    after: After::Ws,
    body: |b| b.is_ascii_alphanumeric() || b"._~+/=-".contains(&b),
    min: 8,
    max: None,
    boundary: true,
};

static AUTHORIZATION: Spec = Spec {
    prefix: &[
        b"aA", b"uU", b"tT", b"hH", b"oO", b"rR", b"iI", b"zZ", b"aA", b"tT", b"iI", b"oO", b"nN",
    ],
    after: After::Colon,
    body: |b| b != b'\n' && b != b'\r',
    min: 1,
    max: None,
    boundary: false,
};

static PEM_BEGIN: Spec = Spec {
    prefix: &[
        b"-", b"-", b"-", b"-", b"-", b"B", b"E", b"G", b"I", b"N", b" ",
    ],
    after: After::Label,
    body: |_| false,
    min: 0,
    max: None,
    boundary: false,
};

static PEM_END: Spec = Spec {
    prefix: &[b"-", b"-", b"-", b"-", b"-", b"E", b"N", b"D", b" "],
    after: After::Label,
    body: |_| false,
    min: 0,
    max: None,
    boundary: false,
};

static URL: Spec = Spec {
    prefix: &[b":", b"/", b"/"],
    after: After::Url,
    body: |_| false,
    min: 0,
    max: None,
    boundary: false,
};

static PASSWORD: Spec = Spec {
    prefix: &[b"pP", b"aA", b"sS", b"sS", b"wW", b"oO", b"rR", b"dD"],
    after: After::Key,
    body: conn_body,
    min: 1,
    max: None,
    boundary: false,
};

static PASSWD: Spec = Spec {
    prefix: &[b"pP", b"aA", b"sS", b"sS", b"wW", b"dD"],
    after: After::Key,
    body: conn_body,
    min: 1,
    max: None,
    boundary: false,
};

static PWD: Spec = Spec {
    prefix: &[b"pP", b"wW", b"dD"],
    after: After::Key,
    body: conn_body,
    min: 1,
    max: None,
    boundary: false,
};

/// The most bytes of a URL's user part (between `://` and the `:` before
/// the password) that are looked at.
pub const URL_USER_MAX: u16 = 128;

/// The most bytes after a URL's `user:` searched for the `@` that ends its
/// password: a password is at most this long, and this many bytes of a URL
/// are held back while it is undecided.
pub const URL_PASSWORD_MAX: u16 = 256;

/// A key's context: it follows `?` or `&` (a query string).
const CTX_QUERY: u8 = 1;
/// A key's context: only blanks and `-` before it on its line, then key
/// bytes and `.` (`  - db_password:`, `db.password =`).
const CTX_LINE_START: u8 = 2;

/// The start of a line: blanks and `-` so far.
const LINE_INDENT: u8 = 0;
/// The start of a line, then key bytes.
const LINE_KEY: u8 = 1;
/// Anything else.
const LINE_OTHER: u8 = 2;

/// The line state after `b` (not a line end).
fn line_next(line: u8, b: u8) -> u8 {
    match line {
        LINE_INDENT if is_blank(b) || b == b'-' => LINE_INDENT,
        LINE_INDENT | LINE_KEY if is_key_byte(b) || b == b'.' => LINE_KEY,
        _ => LINE_OTHER,
    }
}
/// A key's context: a `;` before it on its line.
const CTX_SEMI: u8 = 4;

/// The most bytes after the first blank of an unquoted
/// connection-string value that are held back to see whether a `;` ends
/// the value there (`Password=my pass;`).
pub const CONN_GAP_MAX: u16 = 256;

/// The most bytes after a line end in a YAML block scalar (blank lines
/// and the next line's indentation) that are held back to see whether the
/// block goes on; past them it ended at the line end.
pub const BLOCK_GAP_MAX: u16 = 256;

/// The longest key (`dbname`, `--host`) whose `key=` after a blank ends an
/// unquoted value there.
const KEY_MAX: u16 = 64;

/// Bytes of a key in `key=`: ASCII letters, digits, `_` and `-`.
fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// A byte that ends a line-long value: an ASCII control other than tab.
fn is_control(b: u8) -> bool {
    (b < b' ' && b != b'\t') || b == 0x7f
}

/// Bytes that end a URL as it is written in text: ASCII controls, space,
/// `"` (never raw inside a JSON string), `<` and `>`.
pub(crate) fn url_end(b: u8) -> bool {
    b <= b' ' || b == 0x7f || b == b'"' || b == b'<' || b == b'>'
}

/// Bytes of an unquoted connection-string value: all but ASCII controls,
/// space and `;`.
fn conn_body(b: u8) -> bool {
    !(b <= b' ' || b == 0x7f || b == b';')
}

/// The closing byte of a quoted connection-string value opened by `b`.
fn conn_close(b: u8) -> Option<u8> {
    match b {
        b'\'' => Some(b'\''),
        b'"' => Some(b'"'),
        b'{' => Some(b'}'),
        _ => None,
    }
}

fn is_line_end(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// A possible token occurrence being matched.
#[derive(Clone, Copy, Debug)]
struct Cand {
    kind: Kind,
    /// Offset of the prefix's first byte.
    start: u64,
    phase: Phase,
    /// What came before the key (`CTX_*` bits).
    ctx: u8,
    /// The indentation of the key's line (blanks and `-` before it).
    indent: u32,
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    /// This many prefix bytes matched.
    Prefix(u8),
    /// After `authorization`, before the colon.
    Colon { quoted: bool },
    /// After the keyword (or colon); `ready` once the required blank (if
    /// any) has been seen.
    Blank { ready: bool },
    /// In the body, which began at `from`, `len` bytes so far.
    Body { from: u64, len: u64 },
    /// In a PEM label; the last bytes of it, for the suffix check.
    Label { len: u8, tail: [u8; 17] },
    /// Closing dashes seen.
    Close(u8),
    /// After a URL's `://`, `len` bytes of its user part so far.
    UrlUser { len: u16 },
    /// In a URL's password, which began at `from`: `len` bytes so far, and
    /// the last `@` among them.
    UrlPass {
        from: u64,
        len: u16,
        last_at: Option<u64>,
    },
    /// Past a URL's password window: the rest of the URL (from `from`) is
    /// hidden.
    UrlRest { from: u64 },
    /// After a password key, before `=`, `:` or a closing quote.
    KeyEnd,
    /// After a key at the start of a line and a blank (INI, TOML:
    /// `password = x`): blanks, then `=`.
    IniKey,
    /// After `=` with a blank around it, at the start of a line: blanks,
    /// then a quoted value or the rest of the line.
    IniValue,
    /// After a quoted key (JSON): `colon` once its `:` was seen.
    JsonColon { colon: bool },
    /// After `key:` at the start of a line (YAML): `ready` after a blank.
    YamlColon { ready: bool },
    /// A YAML plain value, from `from` to the end of its line.
    ToLine { from: u64 },
    /// A YAML block scalar (from its `|` or `>` at `from`): in its header
    /// line or one of its lines.
    Block { from: u64 },
    /// A YAML block scalar after a line end at `gap`: `len` bytes since,
    /// `col` blanks on the current line. It goes on if a line indented
    /// more than the key comes, else it ended at `gap`.
    BlockGap {
        from: u64,
        gap: u64,
        len: u16,
        col: u32,
    },
    /// After a connection-string key's `=`.
    ValueStart,
    /// An unquoted value (from `from`) met a blank at `gap`: it ends there
    /// unless a `;` comes before the line ends or a `key=` follows. `len`
    /// bytes since `gap`; `word` bytes of the current word (0 among
    /// blanks), `key` while they could be a key.
    ConnGap {
        from: u64,
        gap: u64,
        len: u16,
        word: u16,
        key: bool,
    },
    /// An unquoted value (from `from`) met `&` at `amp`: it ends there if
    /// a `key=` follows (a form body), else the `&` is part of it. `word`
    /// key bytes since the `&`.
    AmpGap { from: u64, amp: u64, word: u16 },
    /// Right after the opening quote (at `from`) of a quoted value.
    QuoteOpen { from: u64, close: u8 },
    /// In a quoted value (from its opening quote at `from`): `esc` after a
    /// backslash, `closed` right after a closing quote (a second one
    /// continues the value, as a doubled quote is written).
    Quoted {
        from: u64,
        close: u8,
        esc: bool,
        closed: bool,
    },
}

/// The outcome of feeding one byte to a candidate.
enum Advance {
    Live,
    Dead,
    /// The secret `[from, end)` is certain; `done` when it cannot grow.
    Confirmed {
        from: u64,
        done: bool,
    },
    /// The secret `[from, to)`, which ended before this byte, is certain,
    /// and the candidate is finished.
    Found {
        from: u64,
        to: u64,
    },
}

impl Cand {
    /// A candidate whose first prefix byte is at `start`.
    fn new(kind: Kind, start: u64) -> Cand {
        Cand {
            kind,
            start,
            phase: Phase::Prefix(1),
            ctx: 0,
            indent: 0,
        }
    }

    fn advance(&mut self, b: u8, at: u64) -> Advance {
        let spec = self.kind.spec();
        match self.phase {
            Phase::Prefix(n) => {
                if !spec.prefix[usize::from(n)].contains(&b) {
                    return Advance::Dead;
                }
                let n = n + 1;
                self.phase = if usize::from(n) < spec.prefix.len() {
                    Phase::Prefix(n)
                } else {
                    match spec.after {
                        After::Body => Phase::Body {
                            from: self.start,
                            len: 0,
                        },
                        After::Ws => Phase::Blank { ready: false },
                        After::Colon => Phase::Colon { quoted: false },
                        After::Label => Phase::Label {
                            len: 0,
                            tail: [0; 17],
                        },
                        After::Url => Phase::UrlUser { len: 0 },
                        After::Key => Phase::KeyEnd,
                    }
                };
                Advance::Live
            }
            Phase::UrlUser { len } => {
                if b == b':' {
                    self.phase = Phase::UrlPass {
                        from: at + 1,
                        len: 0,
                        last_at: None,
                    };
                    Advance::Live
                } else if url_end(b) || matches!(b, b'/' | b'?' | b'#') || len == URL_USER_MAX {
                    Advance::Dead
                } else {
                    self.phase = Phase::UrlUser { len: len + 1 };
                    Advance::Live
                }
            }
            Phase::UrlPass { from, len, last_at } => {
                if url_end(b) {
                    return url_found(from, last_at);
                }
                let last_at = if b == b'@' { Some(at) } else { last_at };
                let len = len + 1;
                if len == URL_PASSWORD_MAX {
                    // Undecided past the window: hiding the rest of the
                    // URL never shows a part of a long password.
                    self.phase = Phase::UrlRest { from };
                    return Advance::Confirmed { from, done: false };
                }
                self.phase = Phase::UrlPass { from, len, last_at };
                Advance::Live
            }
            Phase::UrlRest { from } => {
                if url_end(b) {
                    Advance::Dead
                } else {
                    Advance::Confirmed { from, done: false }
                }
            }
            Phase::KeyEnd => match b {
                b' ' | b'\t' if self.ctx & CTX_LINE_START != 0 => {
                    self.phase = Phase::IniKey;
                    Advance::Live
                }
                b'=' => {
                    self.phase = Phase::ValueStart;
                    Advance::Live
                }
                b'"' | b'\'' => {
                    self.phase = Phase::JsonColon { colon: false };
                    Advance::Live
                }
                b':' if self.ctx & CTX_LINE_START != 0 => {
                    self.phase = Phase::YamlColon { ready: false };
                    Advance::Live
                }
                _ => Advance::Dead,
            },
            Phase::IniKey => match b {
                b' ' | b'\t' => Advance::Live,
                b'=' => {
                    self.phase = Phase::IniValue;
                    Advance::Live
                }
                _ => Advance::Dead,
            },
            Phase::IniValue => {
                if is_blank(b) {
                    Advance::Live
                } else if is_control(b)
                    || b == b'#'
                    || b == b';'
                    || (self.kind == Kind::Pwd && b == b'/')
                {
                    // No value, or a comment.
                    Advance::Dead
                } else if b == b'"' || b == b'\'' {
                    self.phase = Phase::QuoteOpen { from: at, close: b };
                    Advance::Live
                } else {
                    self.phase = Phase::ToLine { from: at };
                    Advance::Confirmed {
                        from: at,
                        done: false,
                    }
                }
            }
            Phase::JsonColon { colon } => {
                if is_blank(b) {
                    Advance::Live
                } else if b == b':' && !colon {
                    self.phase = Phase::JsonColon { colon: true };
                    Advance::Live
                } else if colon && (b == b'"' || b == b'\'') {
                    self.phase = Phase::QuoteOpen { from: at, close: b };
                    Advance::Live
                } else {
                    Advance::Dead
                }
            }
            Phase::YamlColon { ready } => {
                if is_blank(b) {
                    self.phase = Phase::YamlColon { ready: true };
                    Advance::Live
                } else if !ready
                    || is_control(b)
                    || b == b'#'
                    || (self.kind == Kind::Pwd && b == b'/')
                {
                    Advance::Dead
                } else if b == b'"' || b == b'\'' {
                    self.phase = Phase::QuoteOpen { from: at, close: b };
                    Advance::Live
                } else if b == b'|' || b == b'>' {
                    self.phase = Phase::Block { from: at };
                    Advance::Confirmed {
                        from: at,
                        done: false,
                    }
                } else {
                    self.phase = Phase::ToLine { from: at };
                    Advance::Confirmed {
                        from: at,
                        done: false,
                    }
                }
            }
            Phase::Block { from } => {
                if is_line_end(b) {
                    self.phase = Phase::BlockGap {
                        from,
                        gap: at,
                        len: 1,
                        col: 0,
                    };
                    Advance::Live
                } else if is_control(b) {
                    Advance::Dead
                } else {
                    Advance::Confirmed { from, done: false }
                }
            }
            Phase::BlockGap {
                from,
                gap,
                len,
                col,
            } => {
                if len == BLOCK_GAP_MAX {
                    return Advance::Dead;
                }
                let col = if is_line_end(b) {
                    0
                } else if is_blank(b) {
                    col.saturating_add(1)
                } else if is_control(b) || col <= self.indent {
                    // The block ended at `gap`: a line indented no more
                    // than its key, or no text.
                    return Advance::Dead;
                } else {
                    self.phase = Phase::Block { from };
                    return Advance::Confirmed { from, done: false };
                };
                self.phase = Phase::BlockGap {
                    from,
                    gap,
                    len: len + 1,
                    col,
                };
                Advance::Live
            }
            Phase::ToLine { from } => {
                if is_control(b) {
                    Advance::Dead
                } else {
                    Advance::Confirmed { from, done: false }
                }
            }
            Phase::AmpGap { from, amp, word } => {
                if b == b'=' && word > 0 {
                    // `password=x&ssl=1`: the next item of a form body.
                    Advance::Dead
                } else if is_key_byte(b) && word < KEY_MAX {
                    self.phase = Phase::AmpGap {
                        from,
                        amp,
                        word: word + 1,
                    };
                    Advance::Live
                } else if conn_body(b) && b != b'&' {
                    // Not a key: the `&` and what follows are the value's.
                    self.phase = Phase::Body { from, len: 1 };
                    Advance::Confirmed { from, done: false }
                } else {
                    // The value ended after the `&` and its key bytes.
                    Advance::Found { from, to: at }
                }
            }
            Phase::ConnGap {
                from,
                gap,
                len,
                word,
                key,
            } => {
                if b == b';' {
                    return Advance::Found { from, to: at };
                }
                if is_control(b) || len == CONN_GAP_MAX || (b == b'=' && word > 0 && key) {
                    // The value ended at the blank: a line end (libpq, a
                    // command line), a `key=` (libpq's next item), or
                    // too far to tell.
                    return Advance::Dead;
                }
                let (word, key) = if is_blank(b) {
                    (0, true)
                } else {
                    (word + 1, key && is_key_byte(b) && word < KEY_MAX)
                };
                self.phase = Phase::ConnGap {
                    from,
                    gap,
                    len: len + 1,
                    word,
                    key,
                };
                Advance::Live
            }
            Phase::ValueStart => {
                if self.kind == Kind::Pwd && b == b'/' {
                    // `PWD=/home/me`: the shell's directory, not a password.
                    Advance::Dead
                } else if let Some(close) = conn_close(b) {
                    self.phase = Phase::QuoteOpen { from: at, close };
                    Advance::Live
                } else if is_blank(b) && self.ctx & CTX_LINE_START != 0 {
                    // `password= x` at the start of a line: INI.
                    self.phase = Phase::IniValue;
                    Advance::Live
                } else if b == b'&' && self.ctx & CTX_QUERY != 0 {
                    // `?password=&x=1`: no value.
                    Advance::Dead
                } else if b == b'&' && self.ctx & CTX_SEMI == 0 {
                    // `password=&user=me`: no value, unless no `key=`
                    // follows.
                    self.phase = Phase::AmpGap {
                        from: at,
                        amp: at,
                        word: 0,
                    };
                    Advance::Live
                } else if conn_body(b) {
                    self.phase = Phase::Body { from: at, len: 0 };
                    self.body_byte(spec)
                } else {
                    Advance::Dead
                }
            }
            Phase::QuoteOpen { from, close } => {
                if b == close || is_line_end(b) || (self.kind == Kind::Pwd && b == b'/') {
                    return Advance::Dead;
                }
                self.phase = Phase::Quoted {
                    from,
                    close,
                    esc: b == b'\\',
                    closed: false,
                };
                Advance::Confirmed { from, done: false }
            }
            Phase::Quoted {
                from,
                close,
                esc,
                closed,
            } => {
                if is_line_end(b) || (closed && b != close) {
                    return Advance::Dead;
                }
                let (esc, closed) = if esc || closed {
                    (false, false)
                } else {
                    (b == b'\\', b == close)
                };
                self.phase = Phase::Quoted {
                    from,
                    close,
                    esc,
                    closed,
                };
                Advance::Confirmed { from, done: false }
            }
            Phase::Colon { quoted } => {
                if b == b':' {
                    self.phase = Phase::Blank { ready: true };
                } else if (b == b'"' || b == b'\'') && !quoted {
                    self.phase = Phase::Colon { quoted: true };
                } else if !is_blank(b) {
                    return Advance::Dead;
                }
                Advance::Live
            }
            Phase::Blank { ready } => {
                if is_blank(b) {
                    self.phase = Phase::Blank { ready: true };
                    Advance::Live
                } else if ready && (spec.body)(b) {
                    self.phase = Phase::Body { from: at, len: 0 };
                    self.body_byte(spec)
                } else {
                    Advance::Dead
                }
            }
            Phase::Body { from, .. } if spec.after == After::Key => {
                // A connection-string value: in a query string it ends at
                // `&` or a blank; after a `;` on its line (ODBC, ADO.NET)
                // it runs to the next `;` or the line's end; otherwise a
                // blank leaves it undecided.
                if self.ctx & CTX_QUERY != 0 {
                    if conn_body(b) && b != b'&' {
                        self.body_byte(spec)
                    } else {
                        Advance::Dead
                    }
                } else if self.ctx & CTX_SEMI != 0 {
                    if b != b';' && !is_control(b) {
                        self.body_byte(spec)
                    } else {
                        Advance::Dead
                    }
                } else if b == b'&' {
                    self.phase = Phase::AmpGap {
                        from,
                        amp: at,
                        word: 0,
                    };
                    Advance::Live
                } else if conn_body(b) {
                    self.body_byte(spec)
                } else if is_blank(b) {
                    self.phase = Phase::ConnGap {
                        from,
                        gap: at,
                        len: 1,
                        word: 0,
                        key: true,
                    };
                    Advance::Live
                } else {
                    Advance::Dead
                }
            }
            Phase::Body { .. } => {
                if (spec.body)(b) {
                    self.body_byte(spec)
                } else {
                    Advance::Dead
                }
            }
            Phase::Label { len, mut tail } => {
                if b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' ' {
                    if len == PEM_LABEL_MAX {
                        return Advance::Dead;
                    }
                    tail.copy_within(1.., 0);
                    tail[16] = b;
                    self.phase = Phase::Label { len: len + 1, tail };
                    Advance::Live
                } else if b == b'-'
                    && (tail.ends_with(b"PRIVATE KEY") && len >= 11
                        || tail.ends_with(b"PRIVATE KEY BLOCK") && len >= 17)
                {
                    self.phase = Phase::Close(1);
                    Advance::Live
                } else {
                    Advance::Dead
                }
            }
            Phase::Close(n) => {
                if b != b'-' {
                    return Advance::Dead;
                }
                if n + 1 == 5 {
                    return Advance::Confirmed {
                        from: self.start,
                        done: true,
                    };
                }
                self.phase = Phase::Close(n + 1);
                Advance::Live
            }
        }
    }

    /// Counts one body byte (already known to be admitted).
    fn body_byte(&mut self, spec: &Spec) -> Advance {
        let Phase::Body { from, len } = &mut self.phase else {
            return Advance::Dead;
        };
        *len += 1;
        if *len < spec.min {
            return Advance::Live;
        }
        let done = spec.max == Some(*len);
        Advance::Confirmed { from: *from, done }
    }

    /// Where this candidate's secret would begin, while it is unconfirmed
    /// and that is already known (bytes from there on must be held back).
    fn hold_from(&self) -> Option<u64> {
        let spec = self.kind.spec();
        match self.phase {
            Phase::Prefix(_) | Phase::Label { .. } | Phase::Close(_) => {
                (spec.after == After::Body || spec.after == After::Label).then_some(self.start)
            }
            Phase::Colon { .. }
            | Phase::Blank { .. }
            | Phase::UrlUser { .. }
            | Phase::UrlRest { .. }
            | Phase::KeyEnd
            | Phase::IniKey
            | Phase::IniValue
            | Phase::JsonColon { .. }
            | Phase::YamlColon { .. }
            | Phase::ToLine { .. }
            | Phase::Block { .. }
            | Phase::ValueStart
            | Phase::Quoted { .. } => None,
            Phase::ConnGap { gap, .. } | Phase::BlockGap { gap, .. } => Some(gap),
            Phase::AmpGap { amp, .. } => Some(amp),
            Phase::Body { from, len } => (len < spec.min).then_some(from),
            Phase::UrlPass { from, .. } | Phase::QuoteOpen { from, .. } => Some(from),
        }
    }

    /// Whether this is a confirmed secret that may still grow.
    fn is_growing(&self) -> bool {
        let spec = self.kind.spec();
        matches!(self.phase, Phase::Body { len, .. } if len >= spec.min && spec.max.is_none())
            || matches!(
                self.phase,
                Phase::Quoted { .. }
                    | Phase::UrlRest { .. }
                    | Phase::ToLine { .. }
                    | Phase::Block { .. }
                    | Phase::BlockGap { .. }
                    | Phase::ConnGap { .. }
                    | Phase::AmpGap { .. }
            )
    }

    /// The URL password this candidate found so far, at the end of the
    /// stream.
    fn at_end(&self, pos: u64) -> Option<(u64, u64)> {
        match self.phase {
            // `password=x&ssl` at the end: no `key=` came, so `&ssl` is
            // part of the value.
            Phase::AmpGap { from, .. } => Some((from, pos)),
            Phase::UrlPass {
                from,
                last_at: Some(to),
                ..
            } if to > from => Some((from, to)),
            _ => None,
        }
    }

    /// Where a YAML block scalar's secret began, while in one.
    fn block_from(&self) -> Option<u64> {
        match self.phase {
            Phase::Block { from } | Phase::BlockGap { from, .. } => Some(from),
            _ => None,
        }
    }

    /// The prune slot of a greedy candidate: its kind and context (a
    /// connection-string value's end depends on its context).
    fn greedy_slot(&self) -> usize {
        self.kind as usize * 8 + usize::from(self.ctx & 7)
    }

    /// Where the body began, for a greedy shape in its body.
    fn greedy_body_start(&self) -> Option<u64> {
        match self.phase {
            Phase::Body { from, .. } if self.kind.spec().max.is_none() => Some(from),
            _ => None,
        }
    }
}

/// The end of a URL's password search: the password runs from `from` to
/// the last `@` seen, if any came after it.
fn url_found(from: u64, last_at: Option<u64>) -> Advance {
    match last_at {
        Some(to) if to > from => Advance::Found { from, to },
        _ => Advance::Dead,
    }
}

/// How one JSON serializer writes a string: which ASCII bytes it escapes
/// beyond `"`, `\` and the control bytes, and how it writes what is not
/// ASCII.
struct JsonStyle {
    /// `/` written as `\/`.
    slash: bool,
    /// Bytes written as `\u00XX`.
    unicode: &'static [u8],
    /// `"` as `\u0022` rather than `\"`.
    quote_unicode: bool,
    /// Hex digits in upper case.
    upper: bool,
    /// Characters beyond ASCII as `\uXXXX` (UTF-16, surrogate pairs
    /// above U+FFFF) rather than as they are.
    ascii_only: bool,
}

/// The styles of the serializers a host is likely to answer with: the
/// plain one (JavaScript, serde, Ruby), Python's default (everything
/// beyond ASCII escaped), PHP's default (`/` escaped too), Go's
/// `encoding/json` (`<`, `>` and `&` escaped) and .NET's default encoder
/// (HTML-sensitive bytes, `+`, `` ` `` and everything beyond ASCII
/// escaped, in upper-case hex).
const JSON_STYLES: [JsonStyle; 5] = [
    JsonStyle {
        slash: false,
        unicode: b"",
        quote_unicode: false,
        upper: false,
        ascii_only: false,
    },
    JsonStyle {
        slash: false,
        unicode: b"",
        quote_unicode: false,
        upper: false,
        ascii_only: true,
    },
    JsonStyle {
        slash: true,
        unicode: b"",
        quote_unicode: false,
        upper: false,
        ascii_only: true,
    },
    JsonStyle {
        slash: false,
        unicode: b"<>&",
        quote_unicode: false,
        upper: false,
        ascii_only: false,
    },
    JsonStyle {
        slash: false,
        unicode: b"<>&'+`",
        quote_unicode: true,
        upper: true,
        ascii_only: true,
    },
];

/// The spellings of `value` inside a JSON string, as [`JSON_STYLES`] write
/// it, other than `value` itself, each once. Empty for a value none of them
/// changes, as most tokens are (letters, digits, `-`, `_`, `.`); a value
/// that is not UTF-8 gets only its ASCII bytes escaped.
///
/// This is why a withheld value is also redacted when a host echoes it in
/// a JSON answer; it is still an accident guard: a value spelled any other
/// way (base64, percent-encoded, one byte per line) passes.
pub(crate) fn json_spellings(value: &[u8]) -> Vec<Vec<u8>> {
    let text = std::str::from_utf8(value).ok();
    let mut out: Vec<Vec<u8>> = Vec::new();
    for style in &JSON_STYLES {
        let hex = |out: &mut Vec<u8>, unit: u32| {
            let digits = if style.upper {
                format!("\\u{unit:04X}")
            } else {
                format!("\\u{unit:04x}")
            };
            out.extend_from_slice(digits.as_bytes());
        };
        let mut spelled = Vec::with_capacity(value.len() + 8);
        let ascii = |spelled: &mut Vec<u8>, b: u8| match b {
            b'"' if style.quote_unicode => hex(spelled, 0x22),
            b'"' => spelled.extend_from_slice(b"\\\""),
            b'\\' => spelled.extend_from_slice(b"\\\\"),
            b'\n' => spelled.extend_from_slice(b"\\n"),
            b'\r' => spelled.extend_from_slice(b"\\r"),
            b'\t' => spelled.extend_from_slice(b"\\t"),
            0x08 => spelled.extend_from_slice(b"\\b"),
            0x0c => spelled.extend_from_slice(b"\\f"),
            0..=0x1f => hex(spelled, u32::from(b)),
            b'/' if style.slash => spelled.extend_from_slice(b"\\/"),
            _ if style.unicode.contains(&b) => hex(spelled, u32::from(b)),
            _ => spelled.push(b),
        };
        match text {
            Some(text) if style.ascii_only => {
                for c in text.chars() {
                    if c.is_ascii() {
                        ascii(&mut spelled, c as u8);
                    } else {
                        let mut units = [0u16; 2];
                        for unit in c.encode_utf16(&mut units) {
                            hex(&mut spelled, u32::from(*unit));
                        }
                    }
                }
            }
            _ => {
                for &b in value {
                    if b.is_ascii() {
                        ascii(&mut spelled, b);
                    } else {
                        spelled.push(b);
                    }
                }
            }
        }
        if spelled != value && !out.contains(&spelled) {
            out.push(spelled);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Text dense in bytes that start (or continue) something, so that the
    /// fast path's look-ahead and direct copies run often, with near misses.
    fn near_misses() -> impl Strategy<Value = Vec<u8>> {
        let atoms: Vec<&'static [u8]> = vec![
            b"s",
            b"g",
            b"A",
            b"x",
            b"-",
            b"B",
            b"b",
            b"a",
            b"P",
            b"p",
            b"\"",
            b"k",
            b"h",
            b"K",
            b"o",
            b"u",
            b"e",
            b"E",
            b" ",
            b"\n",
            b":",
            b"0",
            b"Z",
            b"_",
            b"sk-",
            b"ghp_",
            b"github_pat_",
            b"AKIA",
            b"xoxb-",
            b"Bearer ",
            b"bearer\t",
            b"Authorization:",
            b"\"authorization\": ",
            b"Proxy-Authorization: ",
            b"-----BEGIN ",
            b"-----END ",
            b"RSA PRIVATE KEY",
            b"-----",
            b"abcdefghij0123456789",
            b"ABCDEFGHIJ0123456789",
            b"topsecret",
            b"topsecretvalue",
            b"secretsec",
            b"://",
            b"u:",
            b"@",
            b"/",
            b"password=",
            b"PWD=",
            b"passwd=",
            b"password: ",
            b"\"password\":\"",
            b"  - db_",
            b"password = ",
            b" = ",
            b"PGPASSWORD=",
            b"a.b",
            b"password: |",
            b"\n   ",
            b"&",
            b"?",
            b"k=",
            b"\t",
            b"'",
            b"{",
            b"}",
            b";",
            b"\\",
            // Quiet runs longer than SKIP_AFTER, for the vectorised search.
            &[0u8; 64],
            b"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
            b"0123456789012345678901234567890123456789 zzzz\n",
        ];
        prop::collection::vec(prop::sample::select(atoms), 0..120).prop_map(|parts| parts.concat())
    }

    fn redactor() -> Redactor {
        Redactor::new([
            ("A", "topsecretvalue"),
            ("B", "secretsecret"),
            ("C", "xoxb-12345"),
        ])
    }

    /// `input` cut at `cuts`, each chunk given to `step`, then finished.
    fn through(
        input: &[u8],
        cuts: &[usize],
        mut step: impl FnMut(&mut Redactor, &[u8], &mut Vec<u8>),
    ) -> Vec<u8> {
        let mut r = redactor();
        let mut out = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
            let cut = cut.clamp(at, input.len());
            step(&mut r, &input[at..cut], &mut out);
            at = cut;
        }
        out.extend(r.finish());
        out
    }

    fn fast(input: &[u8], cuts: &[usize]) -> Vec<u8> {
        through(input, cuts, |r, chunk, out| r.push_into(chunk, out))
    }

    /// What the executor's drain does: each chunk lands in `out` first;
    /// the redactor takes its quiet prefix in place and the rest is fed
    /// through `push_into`.
    fn in_place(input: &[u8], cuts: &[usize]) -> Vec<u8> {
        through(input, cuts, |r, chunk, out| {
            let start = out.len();
            out.extend_from_slice(chunk);
            let quiet = r.pass_quiet(&out[start..]);
            let rest = out.split_off(start + quiet);
            r.push_into(&rest, out);
        })
    }

    fn slow(input: &[u8]) -> Vec<u8> {
        let mut r = redactor();
        let mut out = Vec::new();
        for b in input {
            out.extend(r.push_slow(std::slice::from_ref(b)));
        }
        out.extend(r.finish());
        out
    }

    proptest! {
        #[test]
        fn fast_path_matches_slow_path_on_near_misses(
            input in near_misses(),
            mut cuts in prop::collection::vec(0usize..2000, 0..6),
        ) {
            cuts.sort_unstable();
            let reference = slow(&input);
            prop_assert_eq!(fast(&input, &[]), reference.clone());
            prop_assert_eq!(fast(&input, &cuts), reference.clone());
            prop_assert_eq!(in_place(&input, &[]), reference.clone());
            prop_assert_eq!(in_place(&input, &cuts), reference.clone());
            let mut r = redactor();
            let mut out = r.push_slow(&input);
            out.extend(r.finish());
            prop_assert_eq!(out, reference);
        }
    }

    /// Haystacks over a few bytes, some of them wake bytes, with long runs.
    fn sparse_bytes() -> impl Strategy<Value = Vec<u8>> {
        let run = (
            prop::sample::select(vec![0u8, b'z', b' ', b's', b'a', b'-', 0xff, b'Q']),
            0usize..90,
        );
        prop::collection::vec(run, 0..12).prop_map(|runs| {
            runs.into_iter()
                .flat_map(|(b, n)| std::iter::repeat_n(b, n))
                .collect()
        })
    }

    #[test]
    fn the_vectorised_search_is_there_where_the_cpu_has_it() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("ssse3") {
            assert!(Redactor::shapes_only().rules.skip.is_some());
        }
        // More distinct wake bytes than it takes: the table alone.
        let many: Vec<(String, Vec<u8>)> = (0..=255u8)
            .map(|b| {
                (
                    format!("V{b}"),
                    vec![b, b'#', b'#', b'#', b'#', b'#', b'#', b'#'],
                )
            })
            .collect();
        let r = Redactor::new(many);
        assert!(r.rules.skip.is_none());
        assert_eq!(r.rules.quiet_run(&[7u8; 100], false), 99);
    }

    proptest! {
        #[test]
        fn next_wake_agrees_with_the_table(
            hay in sparse_bytes(),
            values in prop::collection::vec(prop::collection::vec(any::<u8>(), 8..12), 0..20),
            from in 0usize..200,
        ) {
            let r = Redactor::new(values.iter().enumerate().map(|(i, v)| (format!("V{i}"), v.clone())));
            let from = from.min(hay.len());
            prop_assert_eq!(r.rules.next_wake(&hay, from), r.rules.next_wake_table(&hay, from));
        }
    }

    #[test]
    fn quiet_run_skips_only_dead_starts() {
        let r = Redactor::shapes_only();
        assert_eq!(r.rules.quiet_run(b"as is", false), 4);
        assert_eq!(r.rules.quiet_run(b"as is", true), 0);
        assert_eq!(r.rules.quiet_run(b"an sk", false), 3);
        assert_eq!(r.rules.quiet_run(b"zzzzzzzzzzzzauth", false), 12);
        assert_eq!(r.rules.quiet_run(b"zzzzzzzzzzzzzzzs", false), 15);
        let v = Redactor::new([("N", "abcdefgh")]);
        assert_eq!(v.rules.quiet_run(b"xyab", false), 2);
    }

    #[test]
    fn json_spellings_are_the_serializers_ones() {
        assert!(json_spellings(b"ghp_plainToken-0123.xyz").is_empty());
        let got = json_spellings(b"a/b+c<d\"e");
        let want: Vec<&[u8]> = vec![
            br#"a/b+c<d\"e"#,
            br#"a\/b+c<d\"e"#,
            br#"a/b+c\u003cd\"e"#,
            br#"a/b\u002Bc\u003Cd\u0022e"#,
        ];
        assert_eq!(got, want.iter().map(|w| w.to_vec()).collect::<Vec<_>>());
        // Beyond ASCII: Python's lower-case escapes, .NET's upper-case
        // ones, a surrogate pair above U+FFFF.
        let got = json_spellings("pä𝄞ss".as_bytes());
        assert!(got.contains(&br"p\u00e4\ud834\udd1ess".to_vec()), "{got:?}");
        assert!(got.contains(&br"p\u00E4\uD834\uDD1Ess".to_vec()), "{got:?}");
        // Not UTF-8: its ASCII escaped, the rest as it is.
        assert_eq!(json_spellings(b"\xff/\xfe"), vec![b"\xff\\/\xfe".to_vec()]);
    }

    /// A host that echoes a withheld value in a JSON answer may escape its
    /// `/` or `+`; before, those spellings passed whole.
    #[test]
    fn a_value_echoed_in_json_is_redacted() {
        let value = "Pz8/Pz8+OmdocF9zYW5kZ2F0ZQ==";
        let mk = || Redactor::new([("TOKEN", value)]);
        for echoed in [
            r#"{"token":"Pz8\/Pz8+OmdocF9zYW5kZ2F0ZQ=="}"#,
            r#"{"token":"Pz8/Pz8\u002BOmdocF9zYW5kZ2F0ZQ=="}"#,
            r#"{"token":"Pz8/Pz8+OmdocF9zYW5kZ2F0ZQ=="}"#,
        ] {
            for cut in 0..echoed.len() {
                let mut r = mk();
                let mut out = r.push(&echoed.as_bytes()[..cut]);
                out.extend(r.push(&echoed.as_bytes()[cut..]));
                out.extend(r.finish());
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    r#"{"token":"[REDACTED:TOKEN]"}"#,
                    "{echoed} cut at {cut}"
                );
            }
        }
        // A spelling that is another withheld value keeps that value's
        // name when it sorts first.
        let r = Redactor::new([("B", r"abcd\/efgh"), ("Z", "abcd/efgh")]);
        let mut r2 = r.clone();
        let mut out = r2.push(br"x abcd\/efgh y");
        out.extend(r2.finish());
        assert_eq!(out, b"x [REDACTED:B] y");
    }
}
