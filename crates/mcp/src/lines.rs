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
//!   as JSON-RPC says a notification is never answered.
//!
//! Blank lines are skipped. Every answer is one valid JSON line, so a peer
//! that answers errors with errors cannot start a loop with this side.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;

/// The longest line read as a message (16 MiB); a longer one is answered
/// with a parse error and skipped to its end without being held in memory.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// JSON-RPC's code for a line that cannot be parsed.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;

type Writer = Arc<Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// A transport over a reader and a writer of newline-delimited JSON-RPC.
/// Lines are read by a task of their own, so a receive that the service
/// abandons never loses part of a line.
pub struct LineTransport {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    writer: Writer,
    reader: JoinHandle<()>,
}

impl LineTransport {
    /// Starts reading `read`; messages go out on `write`. Must be called
    /// inside a tokio runtime.
    pub fn new<R, W>(read: R, write: W) -> LineTransport
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let writer: Writer = Arc::new(Mutex::new(Box::new(write)));
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(read_lines(BufReader::new(read), tx, Arc::clone(&writer)));
        LineTransport {
            incoming,
            writer,
            reader,
        }
    }
}

impl Drop for LineTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

async fn write_line(writer: &Writer, line: Vec<u8>) -> std::io::Result<()> {
    let mut w = writer.lock().await;
    w.write_all(&line).await?;
    w.flush().await
}

fn error_line(id: Value, code: i64, message: String) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
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
        let newline = available.iter().position(|b| *b == b'\n');
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

fn classify(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
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

async fn read_lines<R: AsyncRead + Unpin>(
    mut read: BufReader<R>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    writer: Writer,
) {
    let mut buf = Vec::new();
    loop {
        let line = match next_line(&mut read, &mut buf).await {
            Ok(Ok(true)) => classify(&buf),
            Ok(Ok(false)) | Err(_) => return,
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
                if tx.send(*m).await.is_err() {
                    return;
                }
            }
            Line::Answer(a) => {
                if write_line(&writer, a).await.is_err() {
                    return;
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

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            write_line(&writer, line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}
