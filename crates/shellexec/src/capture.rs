//! Capturing a command's stdout and stderr: pipes read without blocking,
//! one shared cap across both streams, redaction on the way in, and the
//! memory tuning that keeps a 100 MB stream fast (widening busy pipes,
//! mapping the buffer ahead of the reads).
//!
//! The cap bounds two counts: the bytes read and kept (fed to the
//! redactor), and the bytes returned. Redaction can make the second larger
//! than the first: an 8-byte value withheld under a long name becomes a
//! marker several times its size, and `Authorization:a` gains
//! `[REDACTED]`. So what the redactor emits is counted too, and cut at the
//! cap (a marker may be cut; the secret's bytes never reach the output),
//! with the stream's held-back tail dropped as for bytes read past the cap.
//!
//! Where the cap cuts a stream must not say whether its last bytes begin a
//! withheld value: a command that could print a guess just before the cap
//! and see whether it came back would learn a value it was never given, a
//! byte at a time. So once the cap is reached each stream's redactor stops
//! emitting at the point it was read to ([`Redactor::stop_emitting`]) and
//! is fed what follows until nothing before that point is held back: the
//! held-back bytes come out as plain text, or as a marker where they begin
//! a whole secret, exactly as they would without the cap. Only then is the
//! rest dropped unread by the redactor. And while bytes are held back they
//! count against the shared cap as if shown, so that what the other stream
//! may show (or where markers push the cut) does not depend on them either.

use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;

use crate::redact::Redactor;
use crate::sys::{read_some, ReadOutcome};

/// Output buffers from this size on are mapped ahead ([`prefault`]).
const PREFAULT_FROM: usize = 1 << 20;

/// How far past the next read an output buffer is kept mapped.
const PREFAULT_AHEAD: usize = 512 * 1024;

/// A stream's pipe is widened once this many bytes came through it.
const WIDEN_FROM: usize = 1 << 20;

/// Pipe sizes tried, in order, when a stream is widened.
const WIDE_PIPE: [usize; 2] = [1 << 20, 256 << 10];

/// Bytes read per `read(2)`.
pub(crate) const READ_CHUNK: usize = 128 * 1024;

/// Both streams of one command, and the cap they share.
pub(crate) struct Capture {
    pub streams: [Stream; 2],
    /// Scratch for reads past the cap and for redaction, allocated at the
    /// first output so that a silent command costs none.
    buf: Vec<u8>,
    /// Bytes read and kept so far, both streams together.
    captured: usize,
    /// Bytes of output so far (after redaction), both streams together.
    shown: usize,
    cap: usize,
    /// Bytes past the cap came through and were dropped.
    pub truncated: bool,
}

impl Capture {
    pub fn new(stdout: OwnedFd, stderr: OwnedFd, redactor: &Redactor, cap: usize) -> Self {
        for fd in [&stdout, &stderr] {
            crate::sys::set_nonblocking(fd);
        }
        Capture {
            streams: [
                Stream::new(stdout, redactor.clone()),
                Stream::new(stderr, redactor.clone()),
            ],
            buf: Vec::new(),
            captured: 0,
            shown: 0,
            cap,
            truncated: false,
        }
    }

    /// Whether either pipe is still open.
    pub fn open(&self) -> bool {
        self.streams.iter().any(|s| s.fd.is_some())
    }

    /// Reads what stream `i` has.
    pub fn drain(&mut self, i: usize) {
        if self.buf.is_empty() {
            self.buf = vec![0u8; READ_CHUNK];
        }
        let count = Count {
            captured: &mut self.captured,
            shown: &mut self.shown,
            cap: self.cap,
            truncated: &mut self.truncated,
        };
        self.streams[i].drain(&mut self.buf, count);
    }

    /// Ends both streams: (stdout, stderr), redacted, tails included as
    /// far as the cap allows (not a stream still open: see
    /// `Stream::finish`), and whether anything was dropped.
    pub fn finish(self) -> (Vec<u8>, Vec<u8>, bool) {
        let Capture {
            streams: [mut out, mut err],
            mut shown,
            cap,
            mut truncated,
            ..
        } = self;
        truncated |= out.finish(&mut shown, cap);
        truncated |= err.finish(&mut shown, cap);
        (out.out, err.out, truncated)
    }
}

/// The counts both streams share, lent to one stream's drain.
struct Count<'a> {
    captured: &'a mut usize,
    shown: &'a mut usize,
    cap: usize,
    truncated: &'a mut bool,
}

/// One output stream being captured.
pub(crate) struct Stream {
    pub fd: Option<OwnedFd>,
    redactor: Option<Redactor>,
    out: Vec<u8>,
    /// Bytes read from the pipe so far, kept or dropped.
    read: usize,
    /// Offset in `out` below which its spare capacity is known mapped.
    mapped: usize,
    /// Bytes the redactor holds back that may still be shown, counted in
    /// the shared output count as if shown already: they keep their place
    /// under the cap, so what the other stream may show does not depend
    /// on whether they begin a secret.
    held: usize,
    /// Bytes past the cap came through and were dropped unredacted (the
    /// redactor held nothing back from before the cap any more), or the
    /// output reached the cap: what the redactor still holds back lies
    /// past the cap and is never emitted.
    dropped: bool,
}

impl Stream {
    fn new(fd: OwnedFd, redactor: Redactor) -> Self {
        Stream {
            fd: Some(fd),
            redactor: Some(redactor),
            out: Vec::new(),
            read: 0,
            mapped: 0,
            held: 0,
            dropped: false,
        }
    }

    /// What the redactor still holds back, redacted, once the stream is
    /// over, as far as the cap allows (`shown` is the output of both
    /// streams so far); whether some of it was cut. After the cap the
    /// redactor emits nothing of what lies past it. Nothing at all when
    /// the stream was dropped (what is held back lies past the cap). When
    /// the stream never ended (its pipe still open when the backstop ended
    /// the wait, held by a process the kill could not reach), its whole
    /// output is dropped and the answer is true: the held-back tail could
    /// be a prefix of a withheld value or a token whose rest is still to
    /// come, and whether there is one must not show (a guess printed
    /// there would be told apart).
    fn finish(&mut self, shown: &mut usize, cap: usize) -> bool {
        let Some(r) = self.redactor.take() else {
            return false;
        };
        // The held-back bytes' places are given back: the tail takes them.
        *shown -= std::mem::take(&mut self.held);
        if self.fd.is_some() {
            // Never ended: the tail could begin a secret whose rest is
            // still to come, and whether anything is held back must not
            // show either, so nothing of the stream is returned.
            self.out.clear();
            return true;
        }
        if self.dropped {
            return false;
        }
        let tail = r.finish();
        let fits = tail.len().min(cap.saturating_sub(*shown));
        self.out.extend_from_slice(&tail[..fits]);
        *shown += fits;
        fits < tail.len()
    }

    /// Reads what is there (a bounded number of chunks, to stay fair to
    /// the other stream), keeping bytes up to the shared cap.
    ///
    /// Below the cap the read lands straight in `out`, and the bytes that
    /// start no secret stay there (the common case: one copy, by the
    /// kernel); anything else goes back through the redactor via `buf`.
    /// Past the cap, reads land in `buf`, go through the redactor (which
    /// emits nothing of them) while it still holds back bytes from before
    /// the cap, and are dropped after that.
    fn drain(&mut self, buf: &mut [u8], mut count: Count<'_>) {
        let cap = count.cap;
        for _ in 0..16 {
            let Some(fd) = &self.fd else { return };
            let room = cap.saturating_sub(*count.captured);
            if room == 0 {
                // The cap is reached (by this stream or the other): what
                // this one shows ends where it has been read to.
                if let Some(r) = &mut self.redactor {
                    r.stop_emitting();
                }
            }
            let outcome = match &mut self.redactor {
                Some(r) if room > 0 => {
                    let want = room.min(buf.len());
                    if self.out.capacity() - self.out.len() < want {
                        // Grow geometrically (double what is there, at
                        // least this read), never past the cap: the
                        // redactor emits at most what it is fed plus
                        // markers, so appends rarely reallocate.
                        let len = self.out.len();
                        self.out
                            .reserve_exact(len.min(cap.saturating_sub(len)).max(want));
                        // A moved buffer may be backed anew.
                        self.mapped = len;
                    }
                    prefault(&self.out, &mut self.mapped, want);
                    let start = self.out.len();
                    let outcome = read_some(fd, &mut self.out.spare_capacity_mut()[..want]);
                    if let ReadOutcome::Data(n) = outcome {
                        // SAFETY: read(2) initialised these `n` bytes.
                        unsafe { self.out.set_len(start + n) };
                        *count.captured += n;
                        let quiet = r.pass_quiet(&self.out[start..]);
                        if quiet < n {
                            let rest = n - quiet;
                            buf[..rest].copy_from_slice(&self.out[start + quiet..]);
                            self.out.truncate(start + quiet);
                            r.push_into(&buf[..rest], &mut self.out);
                        }
                        count_output(
                            &mut self.out,
                            start,
                            r,
                            &mut self.held,
                            &mut self.dropped,
                            &mut count,
                        );
                    }
                    outcome
                }
                Some(r) if !self.dropped && !r.settled() => {
                    // Past the cap, bytes still decide what the redactor
                    // holds back from before it (emitted as they are, or
                    // as a marker where they complete a secret); nothing
                    // of their own is shown.
                    let outcome = read_some(fd, as_uninit(buf));
                    if let ReadOutcome::Data(n) = outcome {
                        *count.truncated = true;
                        let start = self.out.len();
                        r.push_into(&buf[..n], &mut self.out);
                        count_output(
                            &mut self.out,
                            start,
                            r,
                            &mut self.held,
                            &mut self.dropped,
                            &mut count,
                        );
                    }
                    outcome
                }
                _ => {
                    let outcome = read_some(fd, as_uninit(buf));
                    if matches!(outcome, ReadOutcome::Data(_)) && room == 0 {
                        *count.truncated = true;
                        self.dropped = true;
                    }
                    outcome
                }
            };
            match outcome {
                ReadOutcome::Data(n) => {
                    // Widened once: on the read that reaches WIDEN_FROM.
                    if self.read < WIDEN_FROM && self.read + n >= WIDEN_FROM {
                        widen(fd);
                    }
                    self.read += n;
                }
                ReadOutcome::Eof => {
                    self.fd = None;
                    return;
                }
                ReadOutcome::Again => return,
            }
        }
    }
}

/// Counts what the redactor emitted into `out` since `start` and the change
/// in what it holds back (`held`, kept a place as if shown), and cuts at
/// the cap. Markers can make the output longer than the input: where the
/// cap falls among the held-back bytes, those before it are still shown
/// as the stream decides them and nothing after; where it falls in what
/// was emitted, that is cut, nothing held back is shown, and the rest of
/// the stream is dropped.
fn count_output(
    out: &mut Vec<u8>,
    start: usize,
    r: &mut Redactor,
    held: &mut usize,
    dropped: &mut bool,
    count: &mut Count<'_>,
) {
    let cap = count.cap;
    let now = r.held_to_show();
    let shown = &mut *count.shown;
    *shown = *shown - *held + (out.len() - start) + now;
    *held = now;
    if *shown <= cap {
        return;
    }
    let excess = *shown - cap;
    *shown = cap;
    *count.captured = cap;
    *count.truncated = true;
    if excess < *held {
        r.stop_emitting_within(*held - excess);
        *held -= excess;
    } else {
        out.truncate(out.len() - (excess - *held));
        *held = 0;
        *dropped = true;
    }
}

/// Maps the output buffer's memory a little ahead of the next read of
/// `want` bytes (`MADV_POPULATE_WRITE`, Linux 5.14), in steps about
/// one read long. Otherwise each 4 KiB page faults in inside `read(2)`,
/// while the kernel holds the pipe's lock and the writer waits; mapped
/// here, outside that lock, the writer keeps filling the pipe, and the
/// freshly zeroed pages are still in cache when the read lands in them.
/// Only for buffers of [`PREFAULT_FROM`] bytes and more, and never past
/// the capacity, which never exceeds the cap. Advice only: an older
/// kernel's `EINVAL` is ignored and the pages fault in as before.
fn prefault(out: &Vec<u8>, mapped: &mut usize, want: usize) {
    let cap = out.capacity();
    if cap < PREFAULT_FROM {
        return;
    }
    let len = out.len();
    let target = (len + want + PREFAULT_AHEAD).min(cap);
    let from = (*mapped).max(len);
    if from >= target {
        return;
    }
    let page = 4096;
    let base = out.as_ptr() as usize;
    let start = (base + from).next_multiple_of(page);
    let end = (base + target) & !(page - 1);
    if end > start {
        // SAFETY: the range lies inside the vector's allocation, past
        // its initialised part; populating it changes how it is
        // backed, never its contents.
        unsafe {
            let _ = rustix::mm::madvise(
                start as *mut std::ffi::c_void,
                end - start,
                rustix::mm::Advice::LinuxPopulateWrite,
            );
        }
        *mapped = end - base;
    }
}

/// Enlarges a busy stream's pipe (`F_SETPIPE_SZ`): with the default
/// 64 KiB the writer fills it in a moment and then waits on every read,
/// so a bulk stream moves in many small turns. Done only for a stream that
/// has carried [`WIDEN_FROM`] bytes, since wide pipes count against the
/// user's pipe allowance (`pipe-user-pages-soft`). Best effort: a refusal
/// (a lower `pipe-max-size`, the allowance spent) keeps the pipe as it is.
fn widen(fd: &OwnedFd) {
    for size in WIDE_PIPE {
        if rustix::pipe::fcntl_setpipe_size(fd, size).is_ok() {
            return;
        }
    }
}

/// A byte buffer as the uninitialised memory `read_some` fills.
fn as_uninit(buf: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: `u8` and `MaybeUninit<u8>` have the same layout, and
    // `read_some` only writes bytes (never de-initialises any).
    unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) }
}
