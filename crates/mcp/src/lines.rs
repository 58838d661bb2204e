//! Newline-delimited JSON-RPC over a byte stream (stdio, a UNIX socket),
//! answering every line it cannot use.
//!
//! The SDK's own stream transport drops a line that is not JSON, not UTF-8
//! or too long without a word, so a client that sent one waits forever.
//! This one answers such a line with a JSON-RPC error and keeps reading:
//!
//! - a line that is not UTF-8, not JSON, or longer than [`MAX_LINE`]:
//!   `-32700` (parse error) with a `null` id, since no id can be read;
//! - JSON that is not a JSON-RPC 2.0 message (a wrong `jsonrpc` version, a
//!   request without a method, an array): `-32600` (invalid request), with
//!   the request's id when it has a usable one;
//! - a notification that does not fit (a method without an id): nothing,
//!   as JSON-RPC says a notification is never answered;
//! - JSON that gives a key twice in one object, at any depth (see
//!   `duplicate_refusal`): `-32602` (invalid params) when the key is
//!   inside `params`, else `-32600`, naming the key, with the request's id
//!   unless the id is the key given twice; a notification, nothing.
//!
//! Blank lines are skipped. Every answer is one valid JSON line, so a peer
//! that answers errors with errors cannot start a loop with this side.

use std::borrow::Cow;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

/// The longest line read as a message (16 MiB); a longer one is answered
/// with a parse error and skipped to its end without being held in memory.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// JSON-RPC's code for a line that cannot be parsed.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for a request whose params its method cannot take.
pub const INVALID_PARAMS: i64 = -32602;

/// Answers waiting to be written above which no more input is read until
/// the peer has taken some (a client that never reads cannot make the
/// server hold an unbounded backlog).
pub const OUTPUT_HIGH_WATER: usize = 4 * 1024 * 1024;

/// Answers queued by the reader's own short calls above which it lets the
/// writer run before reading on: half the grown output pipe, so that one
/// write fits while the peer keeps up. Measured against no batching, with
/// 20,000 pipelined 4 KiB reads: 10.5 µs of CPU per call without, 9.6 µs
/// at 512 KiB and 1 MiB, 9.9 µs at 256 KiB.
pub const OUTPUT_BATCH: usize = OUTPUT_PIPE / 2;

/// The smaller batch the reader lets the writer take when little input
/// waits behind the call it answered (less than [`FEW_WAITING`] bytes):
/// the client has sent what it had and waits for answers, so the first
/// ones go out while the rest are read. With 32 calls in flight, written
/// at 64 KiB rather than at the end of what was read, the wall time per
/// pipelined 4 KiB read fell from 9–11 µs to 7–9 µs at no more CPU; with
/// 20,000 calls sent at once, where much input waits, 64 KiB batches cost
/// 15% more CPU than [`OUTPUT_BATCH`].
pub const OUTPUT_EARLY: usize = 64 * 1024;

/// Input waiting to be read below which the reader writes in batches of
/// [`OUTPUT_EARLY`]: about 45 calls' requests.
pub const FEW_WAITING: usize = 8 * 1024;

/// How long closing waits for the answers still queued to be written.
const CLOSE_DRAIN: Duration = Duration::from_secs(5);

/// Bytes read from the input at a time: a pipelining client's requests
/// are taken in one read.
const READ_BUFFER: usize = 64 * 1024;

/// Calls a server answers as its transport reads them (see
/// `inline.rs`): short ones that need none of the service loop.
pub trait Inline: Send + Sync + 'static {
    /// Answers the message on `line`, or returns `None` to leave it to the
    /// service.
    fn answer(&self, line: &str) -> Option<Reply>;

    /// Sees each message on its way to the service.
    fn forwarding(&self, message: &RxJsonRpcMessage<RoleServer>);
}

/// An answer made by [`Inline::answer`]: it writes one JSON line, ending
/// in a newline, straight into the queue of output.
pub struct Reply(pub Box<WriteReply>);

/// Writes a reply into the output queue.
pub type WriteReply = dyn FnOnce(&mut Vec<u8>) + Send;

/// Answers waiting for the writer task: every message is appended here and
/// written with whatever else queued up meanwhile, in one write.
#[derive(Default)]
struct Outbox {
    state: Mutex<OutState>,
    /// Something to write, or closing.
    wake_writer: Notify,
    /// The writer took what was queued (or failed).
    drained: Notify,
    /// The bytes of the batch the writer is writing now (taken out of
    /// the queue, not yet taken by the peer).
    writing: AtomicUsize,
    /// Nobody can take an answer any more: the output failed, or the
    /// input ended and the output's reader is gone too.
    gone: AtomicBool,
    /// Woken when `gone` is set.
    gone_notify: Notify,
    /// Why the input ended, when a read failed (rather than reaching the
    /// end of input).
    input_error: Mutex<Option<std::io::Error>>,
}

#[derive(Default)]
struct OutState {
    buf: Vec<u8>,
    closing: bool,
    /// The output failed; later messages are dropped.
    failed: bool,
}

impl Outbox {
    fn lock(&self) -> MutexGuard<'_, OutState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends what `write` writes to the queue and wakes the writer;
    /// answers how many bytes are then queued. What a failed `write` left
    /// is taken back out; after the output failed nothing is queued.
    fn append(
        &self,
        write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
    ) -> std::io::Result<usize> {
        let queued = {
            let mut st = self.lock();
            if st.failed {
                return Err(broken());
            }
            let mark = st.buf.len();
            if let Err(e) = write(&mut st.buf) {
                st.buf.truncate(mark);
                return Err(e);
            }
            st.buf.len()
        };
        self.wake_writer.notify_one();
        Ok(queued)
    }

    /// Queues one line (which ends in a newline).
    fn push(&self, line: &[u8]) -> std::io::Result<()> {
        self.append(|buf| {
            buf.extend_from_slice(line);
            Ok(())
        })
        .map(drop)
    }

    /// Queues what `reply` writes, straight into the queue; answers how
    /// many bytes are then queued.
    fn push_reply(&self, reply: Reply) -> std::io::Result<usize> {
        self.append(|buf| {
            (reply.0)(buf);
            Ok(())
        })
    }

    /// Queues a message serialized straight into the queue.
    fn push_message(&self, item: &TxJsonRpcMessage<RoleServer>) -> std::io::Result<()> {
        self.append(|buf| {
            serde_json::to_writer(&mut *buf, item).map_err(std::io::Error::other)?;
            buf.push(b'\n');
            Ok(())
        })
        .map(drop)
    }

    /// Whether more than [`OUTPUT_HIGH_WATER`] bytes wait to be written,
    /// counting the batch the writer is writing (the output has not
    /// failed).
    fn full(&self) -> bool {
        let st = self.lock();
        !st.failed && st.buf.len() + self.writing.load(Ordering::Acquire) > OUTPUT_HIGH_WATER
    }

    /// Waits while [`Outbox::full`].
    async fn room(&self) {
        self.wait_while(Outbox::full).await
    }

    /// Waits while more than [`OUTPUT_HIGH_WATER`] bytes wait to be written.
    async fn below_high_water(&self) {
        self.wait_while(|out| {
            let st = out.lock();
            !st.failed && st.buf.len() > OUTPUT_HIGH_WATER
        })
        .await
    }

    /// Says that nobody can take an answer any more.
    fn set_gone(&self) {
        self.gone.store(true, Ordering::Release);
        self.gone_notify.notify_waiters();
    }

    /// Waits until nobody can take an answer any more.
    async fn gone(&self) {
        loop {
            let woken = self.gone_notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.gone.load(Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }

    /// Waits until `busy` is false, looking again each time the writer
    /// has taken what was queued.
    async fn wait_while(&self, busy: impl Fn(&Outbox) -> bool) {
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if !busy(self) {
                return;
            }
            drained.await;
        }
    }
}

fn broken() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the output is closed")
}

/// Writes what the outbox holds, each batch in one write, until closing
/// with nothing left or the output fails.
async fn write_out<W: AsyncWrite + Unpin>(mut w: W, out: Arc<Outbox>) {
    let mut chunk = Vec::new();
    loop {
        let closing = {
            let mut st = out.lock();
            std::mem::swap(&mut st.buf, &mut chunk);
            out.writing.store(chunk.len(), Ordering::Release);
            st.closing
        };
        if chunk.is_empty() {
            if closing {
                return;
            }
            out.wake_writer.notified().await;
            continue;
        }
        let written = async {
            w.write_all(&chunk).await?;
            w.flush().await
        }
        .await;
        chunk.clear();
        out.writing.store(0, Ordering::Release);
        if written.is_err() {
            let mut st = out.lock();
            st.failed = true;
            st.buf = Vec::new();
            drop(st);
            out.drained.notify_waiters();
            out.set_gone();
            return;
        }
        out.drained.notify_waiters();
    }
}

/// Puts a descriptor's file status flags back as they were when the server
/// took it over (stdio shares its open file with the parent, which may use
/// it after the server ends).
struct RestoreFlags(Vec<(OwnedFd, rustix::fs::OFlags)>);

impl RestoreFlags {
    fn save(&mut self, fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
        let own = fd.try_clone_to_owned()?;
        let flags = rustix::fs::fcntl_getfl(&own)?;
        self.0.push((own.try_clone()?, flags));
        Ok(own)
    }
}

impl RestoreFlags {
    /// Puts back the flags of the descriptor saved last and forgets it,
    /// when taking it over failed half-way.
    fn undo_last(&mut self) {
        if let Some((fd, flags)) = self.0.pop() {
            let _ = rustix::fs::fcntl_setfl(&fd, flags);
        }
    }
}

impl Drop for RestoreFlags {
    fn drop(&mut self) {
        for (fd, flags) in &self.0 {
            let _ = rustix::fs::fcntl_setfl(fd, *flags);
        }
    }
}

/// What a standard stream is, for reading and writing it on the runtime's
/// own thread: a pipe or a stream socket can be polled (made
/// non-blocking); anything else (a terminal, a file) cannot.
enum Pollable {
    Pipe,
    Socket,
    Other,
}

fn pollable(fd: std::os::fd::BorrowedFd<'_>) -> Pollable {
    use rustix::fs::FileType;
    match rustix::fs::fstat(fd).map(|st| FileType::from_raw_mode(st.st_mode)) {
        Ok(FileType::Fifo) => Pollable::Pipe,
        Ok(FileType::Socket) => Pollable::Socket,
        _ => Pollable::Other,
    }
}

/// Whether two descriptors are the same open file's (same device and
/// inode), as stdout and stderr are after `2>&1`.
fn same_file(a: std::os::fd::BorrowedFd<'_>, b: std::os::fd::BorrowedFd<'_>) -> bool {
    match (rustix::fs::fstat(a), rustix::fs::fstat(b)) {
        (Ok(x), Ok(y)) => x.st_dev == y.st_dev && x.st_ino == y.st_ino,
        _ => false,
    }
}

type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

fn poll_stdin(restore: &mut RestoreFlags) -> Option<BoxRead> {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let kind = pollable(fd);
    if matches!(kind, Pollable::Other) {
        return None;
    }
    let own = restore.save(fd).ok()?;
    let taken = match kind {
        Pollable::Pipe => {
            tokio::net::unix::pipe::Receiver::from_owned_fd(own).map(|r| Box::new(r) as BoxRead)
        }
        _ => poll_socket(own).map(|s| Box::new(s) as BoxRead),
    };
    // Half taken over (non-blocking, not polled): put the flags back for
    // tokio's stdio.
    taken.map_err(|_| restore.undo_last()).ok()
}

fn poll_socket(own: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(own);
    s.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(s)
}

/// The size an output pipe is grown to: the most an unprivileged process
/// may ask for by default (`/proc/sys/fs/pipe-max-size`).
pub const OUTPUT_PIPE: usize = 1024 * 1024;

/// Grows an output pipe to [`OUTPUT_PIPE`] bytes when it is smaller; does
/// nothing to anything that is not a pipe. A 4 KiB read answers about
/// 8.5 KB, so the default 64 KiB pipe fills every few answers, and each
/// time the writer waits for the peer to read and is woken again: with a
/// pipelining client that cost about 2 µs of CPU per call (a fifth of the
/// whole; measured with `perf stat` as in docs/BENCHMARKS.md). The size is
/// a property of the pipe, so the peer sees the same pipe, only able to
/// hold more. Refused (the user's pipe quota is spent, or a lower
/// maximum), it stays as it was. `sandgate tool` grows its output the same
/// way.
pub fn grow_pipe(fd: std::os::fd::BorrowedFd<'_>) {
    if rustix::pipe::fcntl_getpipe_size(fd).is_ok_and(|n| n < OUTPUT_PIPE) {
        let _ = rustix::pipe::fcntl_setpipe_size(fd, OUTPUT_PIPE);
    }
}

fn poll_stdout(restore: &mut RestoreFlags) -> Option<BoxWrite> {
    let stdout = std::io::stdout();
    let fd = stdout.as_fd();
    // Non-blocking is a flag of the open file: were stderr the same one,
    // a message written to it while the pipe is full would fail.
    if same_file(fd, std::io::stderr().as_fd()) {
        return None;
    }
    let kind = pollable(fd);
    if matches!(kind, Pollable::Other) {
        return None;
    }
    let own = restore.save(fd).ok()?;
    if matches!(kind, Pollable::Pipe) {
        grow_pipe(own.as_fd());
    }
    let taken = match kind {
        Pollable::Pipe => {
            tokio::net::unix::pipe::Sender::from_owned_fd(own).map(|w| Box::new(w) as BoxWrite)
        }
        _ => poll_socket(own).map(|s| Box::new(s) as BoxWrite),
    };
    taken.map_err(|_| restore.undo_last()).ok()
}

/// Standard output that is a regular file (a transcript), kept to the
/// process's file size limit (`ulimit -f`): a write whose end would pass
/// it fails with `EFBIG`, writing nothing, where the kernel would cut it
/// and the next write would raise `SIGXFSZ`, whose default action ends
/// the program embedding the server. The write before is finished first
/// (tokio hands each to a thread), so the file's offset is where this one
/// lands.
struct WithinFileSizeLimit<W>(W);

impl<W: AsyncWrite + Unpin> AsyncWrite for WithinFileSizeLimit<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::ready!(std::pin::Pin::new(&mut self.0).poll_flush(cx))?;
        if let Some(at) = regular_file_offset(std::io::stdout().as_fd()) {
            sandgate::rootfs::within_file_size_limit(at.saturating_add(buf.len() as u64))?;
        }
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Where the next write to `fd` lands when it is a regular file: its
/// offset, or its size where it was opened `O_APPEND`. `None` for
/// anything else (a terminal, a pipe, a device), which the file size limit
/// does not bound.
pub(crate) fn regular_file_offset(fd: std::os::fd::BorrowedFd<'_>) -> Option<u64> {
    let st = rustix::fs::fstat(fd).ok()?;
    if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_file() {
        return None;
    }
    match rustix::fs::fcntl_getfl(fd) {
        Ok(f) if f.contains(rustix::fs::OFlags::APPEND) => Some(st.st_size as u64),
        _ => rustix::fs::seek(fd, rustix::fs::SeekFrom::Current(0)).ok(),
    }
}

/// The room left in a [`LineTransport`]'s output, for a server to wait
/// on before it starts work whose answer will be queued there: a client
/// that sends calls and never reads its answers then leaves at most
/// [`OUTPUT_HIGH_WATER`] bytes queued, and the answers of the calls that
/// were running when the output filled, rather than the answers of every
/// call it has sent.
#[derive(Clone)]
pub struct OutputRoom(Arc<Outbox>);

impl OutputRoom {
    /// Whether more than [`OUTPUT_HIGH_WATER`] bytes of answers wait for
    /// the client to take them (never once the output has failed: what
    /// is sent then is dropped).
    pub fn full(&self) -> bool {
        self.0.full()
    }

    /// Waits until the output is not [`full`](OutputRoom::full).
    pub async fn wait(&self) {
        self.0.room().await
    }

    /// Waits until nobody can take an answer any more: the output failed
    /// (its reader is gone), standard output is a pipe whose last reader
    /// is gone, or the input ended and the output, watched for it, shows
    /// that its reader is gone too (a socket whose peer closed or shut
    /// down both ways). A client that closed only its sending side still
    /// reads, and never makes this end. The input then ends too.
    pub async fn gone(&self) {
        self.0.gone().await
    }
}

/// How a [`LineTransport`]'s input ended: at the end of input, or with a
/// read that failed (standard input a directory, say).
#[derive(Clone)]
pub struct InputEnd(Arc<Outbox>);

impl InputEnd {
    /// The error of the read that ended the input, if one failed (taken:
    /// answered once).
    pub fn error(&self) -> Option<std::io::Error> {
        self.0
            .input_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// A transport over a reader and a writer of newline-delimited JSON-RPC.
/// Lines are read by a task of their own, so a receive that the service
/// abandons never loses part of a line; answers are queued and written by
/// another, as many in one write as have queued up.
pub struct LineTransport {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    out: Arc<Outbox>,
    reader: JoinHandle<()>,
    writer: Option<JoinHandle<()>>,
    /// Watches an output pipe for its reader going away, whatever the
    /// input does.
    pipe_watch: Option<JoinHandle<()>>,
    _restore: RestoreFlags,
}

impl LineTransport {
    /// Starts reading `read`; messages go out on `write`. Must be called
    /// inside a tokio runtime.
    pub fn new<R, W>(read: R, write: W) -> LineTransport
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        Self::with_restore(read, write, RestoreFlags(Vec::new()), None, None)
    }

    /// As [`LineTransport::new`], with `inline` answering the calls it
    /// takes as they are read.
    pub fn with_inline<R, W>(read: R, write: W, inline: Arc<dyn Inline>) -> LineTransport
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        Self::with_restore(read, write, RestoreFlags(Vec::new()), Some(inline), None)
    }

    /// As [`LineTransport::with_inline`], with `output` (a descriptor of
    /// the open file `write` writes to) watched once the input ends:
    /// when it shows its reader gone too, [`OutputRoom::gone`] ends, so
    /// that the calls still running are stopped at once rather than given
    /// time to answer a client that can no longer read.
    pub fn with_inline_watching<R, W>(
        read: R,
        write: W,
        inline: Arc<dyn Inline>,
        output: OwnedFd,
    ) -> LineTransport
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        Self::with_restore(
            read,
            write,
            RestoreFlags(Vec::new()),
            Some(inline),
            Some(output),
        )
    }

    fn with_restore<R, W>(
        read: R,
        write: W,
        restore: RestoreFlags,
        inline: Option<Arc<dyn Inline>>,
        output: Option<OwnedFd>,
    ) -> LineTransport
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let out = Arc::new(Outbox::default());
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(read_lines(
            BufReader::with_capacity(READ_BUFFER, read),
            tx,
            Arc::clone(&out),
            inline,
            output,
        ));
        let writer = Some(tokio::spawn(write_out(write, Arc::clone(&out))));
        LineTransport {
            incoming,
            out,
            reader,
            writer,
            pipe_watch: None,
            _restore: restore,
        }
    }

    /// The process's standard input and output. A pipe or a socket is
    /// read and written on the runtime's own thread, made non-blocking for
    /// the server's lifetime (its flags are put back when the transport is
    /// dropped); anything else goes through tokio's stdio, which hands
    /// every read and write to a thread of its blocking pool. Must be called
    /// inside a tokio runtime.
    pub fn stdio() -> LineTransport {
        Self::stdio_with(None)
    }

    /// As [`LineTransport::stdio`], with `inline` answering the calls it
    /// takes as they are read.
    pub fn stdio_with(inline: Option<Arc<dyn Inline>>) -> LineTransport {
        let mut restore = RestoreFlags(Vec::new());
        let read = poll_stdin(&mut restore).unwrap_or_else(|| Box::new(tokio::io::stdin()));
        let write = poll_stdout(&mut restore).unwrap_or_else(|| {
            match regular_file_offset(std::io::stdout().as_fd()) {
                Some(_) => Box::new(WithinFileSizeLimit(tokio::io::stdout())),
                None => Box::new(tokio::io::stdout()),
            }
        });
        // Standard output, watched for its reader going away once the
        // input ends; a pipe, from the start (its reader may go while
        // another process still holds the input open).
        let stdout = std::io::stdout();
        let output = stdout.as_fd().try_clone_to_owned().ok();
        let pipe = matches!(pollable(stdout.as_fd()), Pollable::Pipe)
            .then(|| stdout.as_fd().try_clone_to_owned().ok())
            .flatten();
        let mut t = Self::with_restore(read, write, restore, inline, output);
        if let Some(pipe) = pipe {
            t.pipe_watch = Some(tokio::spawn(watch_pipe_reader(pipe, Arc::clone(&t.out))));
        }
        t
    }

    /// The room left in this transport's output.
    pub fn room(&self) -> OutputRoom {
        OutputRoom(Arc::clone(&self.out))
    }

    /// What tells, once the input has ended, whether a read failed.
    pub fn input(&self) -> InputEnd {
        InputEnd(Arc::clone(&self.out))
    }
}

impl Drop for LineTransport {
    fn drop(&mut self) {
        self.reader.abort();
        if let Some(w) = &self.pipe_watch {
            w.abort();
        }
        if let Some(w) = &self.writer {
            w.abort();
        }
    }
}

fn error_line(id: Value, code: i64, message: String) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

/// The refusal of a message that gives a key twice in one object.
pub(crate) struct Duplicate {
    /// The JSON-RPC error answering it.
    pub error: Value,
    /// Whether it is a notification (a method without an id), which
    /// JSON-RPC never answers.
    pub notification: bool,
}

/// The refusal of `text` when it is a JSON object that gives a key twice
/// in one object at any depth (in `params`, `arguments`, an edit, `_meta`,
/// anywhere), keys compared once their escapes are read (`"p\u0061th"` is
/// `"path"`); `None` when it gives none or is not JSON (the message's own
/// parse says what is wrong then). The SDK reads such a message keeping
/// the last value, so a gateway or a log in front of this server that kept
/// the first would see another call than the one that ran; nothing of it
/// is run. The scan is the JSON endpoint's ([`sandgate::tool::duplicated_key`]):
/// one pass, keys looked up by hash, depth bounded by serde_json's
/// recursion limit (a deeper message is not JSON to the SDK either).
///
/// The line is JSON (RFC 8259 allows a name twice), so this is not a parse
/// error with a `null` id: the message is read, and only its meaning is
/// refused. A key inside `params` is answered `-32602` (invalid params,
/// as the SDK answers a struct field given twice there, `params.name`),
/// any other (`method`, `jsonrpc`, `params` itself) `-32600` (invalid
/// request). The request's id comes back whenever it is unambiguous: it
/// is a string or a number, the message has a method (a client's response
/// is not answered with its id), and `id` is not the key given twice.
pub(crate) fn duplicate_refusal(text: &str) -> Option<Duplicate> {
    // The cheap scan first: every message is asked, few give a key twice.
    if !sandgate::tool::gives_a_key_twice(text) {
        return None;
    }
    let key = sandgate::tool::duplicated_key(text)?;
    // Read last-wins, but only for what is not the key given twice.
    let value: Value = serde_json::from_str(text).ok()?;
    let method = value.get("method").and_then(Value::as_str);
    let id = value.get("id");
    let notification = method.is_some() && id.is_none();
    let id = match id {
        Some(id @ (Value::String(_) | Value::Number(_))) if method.is_some() && key != "id" => {
            id.clone()
        }
        _ => Value::Null,
    };
    let shown = sandgate::policy::shown(&key);
    let in_params = key
        .strip_prefix("params")
        .is_some_and(|rest| rest.starts_with(['.', '[']));
    let (code, message) = match method {
        Some(m) if in_params && key != "method" => (
            INVALID_PARAMS,
            format!(
                "invalid params for {}: duplicated key `{shown}` (a key may appear once in \
                 an object)",
                sandgate::policy::shown(m)
            ),
        ),
        _ => (
            INVALID_REQUEST,
            format!(
                "Invalid Request: duplicated key `{shown}` (a key may appear once in an object)"
            ),
        ),
    };
    Some(Duplicate {
        error: json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        notification,
    })
}

/// What one line asks of the reader.
enum Line {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    Answer(Vec<u8>),
    Skip,
}

/// Reads one line into `buf` (without its newline). `Ok(false)` at the end
/// of input; `Err(n)` for a line of `n` bytes over [`MAX_LINE`], consumed
/// but not kept.
async fn next_line<R: AsyncRead + Unpin>(
    read: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<Result<bool, usize>> {
    buf.clear();
    let mut over = 0usize;
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            // A last line without a newline is still a line.
            return Ok(if over > 0 {
                Err(over)
            } else {
                Ok(!buf.is_empty())
            });
        }
        let newline = memchr::memchr(b'\n', available);
        let take = newline.map_or(available.len(), |i| i + 1);
        let content = newline.unwrap_or(available.len());
        if over > 0 || buf.len() + content > MAX_LINE {
            over = over.max(buf.len()) + content;
            buf.clear();
        } else {
            buf.extend_from_slice(&available[..content]);
        }
        read.consume(take);
        if newline.is_some() {
            return Ok(if over > 0 { Err(over) } else { Ok(true) });
        }
    }
}

/// A line without a carriage return at its end or a byte order mark at
/// its start.
fn trimmed(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line)
}

fn classify(line: &[u8]) -> Line {
    let line = trimmed(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => {
            return Line::Answer(error_line(
                Value::Null,
                PARSE_ERROR,
                format!(
                    "Parse error: the message is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ),
            ))
        }
    };
    // The common case, a valid message, in one pass; anything else is
    // looked at as JSON to say what is wrong with it.
    if let Ok(m) = serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(text) {
        return Line::Message(Box::new(m));
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Line::Answer(error_line(
                Value::Null,
                PARSE_ERROR,
                format!("Parse error: the message is not JSON ({e})"),
            ))
        }
    };
    let method = value
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let id = value.get("id").cloned();
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(m) => Line::Message(Box::new(m)),
        Err(e) => match (method, id) {
            // A notification is never answered, even a malformed one.
            (Some(_), None) => Line::Skip,
            (method, id) => {
                let id = match id {
                    Some(id @ (Value::String(_) | Value::Number(_))) if method.is_some() => id,
                    _ => Value::Null,
                };
                Line::Answer(error_line(
                    id,
                    INVALID_REQUEST,
                    format!("Invalid Request: not a JSON-RPC 2.0 message ({e})"),
                ))
            }
        },
    }
}

/// [`Inline::answer`], with a panic (a bug) taken as "not answered here":
/// the message then goes to the service, which runs every call on a task
/// whose panic becomes an error answer. Unguarded, it would end the reader
/// task, and with it the server, for one message.
fn answer_inline(inline: &dyn Inline, line: &str) -> Option<Reply> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inline.answer(line))).unwrap_or(None)
}

/// How often the output is looked at, once the input ended, for its
/// reader having gone too.
const HANGUP_POLL: Duration = Duration::from_millis(50);

/// Whether `fd`, an output, shows that nobody reads it any more: a
/// socket whose peer closed or shut down both ways (`POLLHUP`), a pipe
/// with no reader left (`POLLERR`).
fn hung_up(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::event::{PollFd, PollFlags};
    let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
    let zero = rustix::event::Timespec::default();
    matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
        && fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
}

/// Once the input ended: looks at `output` until its reader is gone (then
/// says so to the outbox) or the transport closes (this task is then
/// aborted). The input ending alone is not a client gone: one that
/// closed its sending side may still read every answer.
async fn watch_hangup(output: OwnedFd, out: &Outbox) {
    loop {
        if out.gone.load(Ordering::Acquire) {
            return;
        }
        if hung_up(output.as_fd()) {
            out.set_gone();
            return;
        }
        tokio::time::sleep(HANGUP_POLL).await;
    }
}

/// Waits, without polling, for the last reader of `pipe` (an output pipe)
/// to go (the kernel then reports an error on its write end), and says
/// so to the outbox. A pipe the reactor cannot watch is left to
/// [`watch_hangup`].
async fn watch_pipe_reader(pipe: OwnedFd, out: Arc<Outbox>) {
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;
    // Deprecated because a type whose descriptor can be closed while
    // registered would be unsound; the `OwnedFd` here is owned by the
    // `AsyncFd`, which deregisters it before closing it. Its flags are
    // left as they are (stdout may share its open file with stderr).
    #[allow(deprecated)]
    let registered = AsyncFd::with_interest(pipe, Interest::ERROR);
    let Ok(fd) = registered else {
        return;
    };
    loop {
        let Ok(mut ready) = fd.ready(Interest::ERROR).await else {
            return;
        };
        if hung_up(fd.get_ref().as_fd()) {
            out.set_gone();
            return;
        }
        ready.clear_ready();
    }
}

async fn read_lines<R: AsyncRead + Unpin>(
    read: BufReader<R>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    out: Arc<Outbox>,
    inline: Option<Arc<dyn Inline>>,
    output: Option<OwnedFd>,
) {
    let ended = read_until_end(read, tx, &out, inline).await;
    if let (true, Some(output)) = (ended, output) {
        watch_hangup(output, &out).await;
    }
}

/// Reads lines until the input ends (answers `true`; the service is then
/// told, by the channel closing) or nothing more can be sent or queued
/// (`false`).
async fn read_until_end<R: AsyncRead + Unpin>(
    mut read: BufReader<R>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    out: &Outbox,
    inline: Option<Arc<dyn Inline>>,
) -> bool {
    let mut buf = Vec::new();
    loop {
        if out.lock().buf.len() > OUTPUT_HIGH_WATER {
            out.below_high_water().await;
        }
        // Nobody can take an answer any more: the input ends too, so the
        // session does (its running calls are stopped meanwhile).
        let next = tokio::select! {
            biased;
            n = next_line(&mut read, &mut buf) => n,
            _ = out.gone() => return true,
        };
        let line = match next {
            Ok(Ok(true)) => {
                // Before any parse that would run it: neither the short
                // path nor the SDK runs a message that gives a key twice.
                let text = std::str::from_utf8(trimmed(&buf));
                if let Some(d) = text.ok().and_then(duplicate_refusal) {
                    if !d.notification {
                        let mut line = d.error.to_string().into_bytes();
                        line.push(b'\n');
                        if out.push(&line).is_err() {
                            return false;
                        }
                    }
                    continue;
                }
                let reply = match (&inline, text) {
                    (Some(inline), Ok(text)) => answer_inline(&**inline, text),
                    _ => None,
                };
                if let Some(reply) = reply {
                    let Ok(queued) = out.push_reply(reply) else {
                        return false;
                    };
                    // Answered without a wait, short calls would pile up
                    // until the input buffer is spent (megabytes of
                    // answers, out of the CPU's cache by the time they are
                    // written): let the writer take them in batches.
                    let batch = if read.buffer().len() < FEW_WAITING {
                        OUTPUT_EARLY
                    } else {
                        OUTPUT_BATCH
                    };
                    if queued >= batch {
                        tokio::task::yield_now().await;
                    }
                    continue;
                }
                classify(&buf)
            }
            Ok(Ok(false)) => return true,
            Err(e) => {
                *out.input_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                return true;
            }
            Ok(Err(len)) => Line::Answer(error_line(
                Value::Null,
                PARSE_ERROR,
                format!(
                    "Parse error: a message of {len} bytes is over the limit of {MAX_LINE} bytes"
                ),
            )),
        };
        match line {
            Line::Message(m) => {
                if let Some(inline) = &inline {
                    inline.forwarding(&m);
                }
                if tx.send(*m).await.is_err() {
                    return false;
                }
            }
            Line::Answer(a) => {
                if out.push(&a).is_err() {
                    return false;
                }
            }
            Line::Skip => {}
        }
    }
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "newline-delimited JSON-RPC".into()
    }

    /// Queues the message for the writer task: it is serialized here, on
    /// the caller's thread, and written with whatever else is queued.
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(self.out.push_message(&item))
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.incoming.recv().await
    }

    /// Stops reading, then waits (a few seconds at most) for the queued
    /// answers to be written: the last answers must not be lost when the
    /// input closes while calls were still running.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        if let Some(w) = self.pipe_watch.take() {
            w.abort();
        }
        self.incoming.close();
        self.out.lock().closing = true;
        self.out.wake_writer.notify_one();
        if let Some(mut w) = self.writer.take() {
            if tokio::time::timeout(CLOSE_DRAIN, &mut w).await.is_err() {
                w.abort();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An inline path with a bug: it panics on every line.
    struct Panics;

    impl Inline for Panics {
        fn answer(&self, _line: &str) -> Option<Reply> {
            panic!("a bug in the inline path");
        }
        fn forwarding(&self, _message: &RxJsonRpcMessage<RoleServer>) {}
    }

    /// A transport on one end of a socket pair, its output watched: the
    /// other end, and the room of the transport's output.
    fn watched_pair() -> (std::os::unix::net::UnixStream, LineTransport, OutputRoom) {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let watched = ours.as_fd().try_clone_to_owned().unwrap();
        ours.set_nonblocking(true).unwrap();
        let (r, w) = tokio::net::UnixStream::from_std(ours).unwrap().into_split();
        let t = LineTransport::with_restore(r, w, RestoreFlags(Vec::new()), None, Some(watched));
        let room = t.room();
        (theirs, t, room)
    }

    #[tokio::test]
    async fn early22_a_peer_shut_down_both_ways_is_gone_and_one_half_closed_is_not() {
        let (theirs, _t, room) = watched_pair();
        theirs.shutdown(std::net::Shutdown::Write).unwrap();
        // It may still read: not gone.
        assert!(
            tokio::time::timeout(Duration::from_millis(500), room.gone())
                .await
                .is_err(),
            "a peer that only stopped sending is taken for gone"
        );
        theirs.shutdown(std::net::Shutdown::Read).unwrap();
        tokio::time::timeout(Duration::from_secs(2), room.gone())
            .await
            .expect("a peer shut down both ways is not taken for gone");
        // Closed at once: gone too.
        let (theirs, _t, room) = watched_pair();
        drop(theirs);
        tokio::time::timeout(Duration::from_secs(2), room.gone())
            .await
            .expect("a closed peer is not taken for gone");
    }

    #[tokio::test]
    async fn a_panic_on_the_inline_path_leaves_the_message_to_the_service() {
        let (mut client, server_in) = tokio::io::duplex(4096);
        let (server_out, _client_out) = tokio::io::duplex(4096);
        let mut t = LineTransport::with_inline(server_in, server_out, Arc::new(Panics));
        for id in 1..=2 {
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n");
            client.write_all(line.as_bytes()).await.unwrap();
            let got = tokio::time::timeout(Duration::from_secs(10), t.receive())
                .await
                .expect("the reader is still reading")
                .expect("the message reached the service");
            let rmcp::model::JsonRpcMessage::Request(r) = got else {
                panic!("not a request: {got:?}");
            };
            assert_eq!(r.id, rmcp::model::NumberOrString::Number(id));
        }
    }
}
