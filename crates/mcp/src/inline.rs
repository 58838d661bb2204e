//! Short tool calls answered as the transport reads them, beside the SDK's
//! service loop.
//!
//! The SDK hands every request to a task of its own, with a cancellation
//! token and a channel back, after parsing it through its untagged message
//! enums: about 4 µs of CPU per message, half of what a whole 4 KiB read
//! costs at the JSON endpoint. A short call (reading a regular file of at
//! most [`INLINE_READ`] bytes whole, never a head or tail, which counts
//! every line of a file of any size; one file's metadata; the allowed
//! directories) has nothing to cancel and no progress to report, so the
//! transport's reader answers it at once: it parses only the fields such a
//! call has, runs the same tool function on the same session (the same
//! sandbox, guard, budgets, audit and client roots), and writes the answer
//! the SDK would write. A single text block, the answer of every short
//! text tool, is written by hand so that its text is escaped once although
//! the answer carries it twice (as content and as `structuredContent`);
//! every other answer is the SDK's own message, serialized.
//!
//! Everything else goes to the SDK as before: every other method and tool,
//! arguments that do not fit (the SDK answers the JSON-RPC error), a
//! message this parse cannot read, every call before the session is
//! initialized, and every call while the client's roots are being asked
//! for, so no call runs on roots the client has said are out of date.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use rmcp::model::{
    ClientNotification, JsonRpcMessage, NumberOrString, ServerJsonRpcMessage, ServerResult, Tool,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::RoleServer;

use crate::lines::{Inline, Reply};
use crate::{tool_result, tools, Server};

/// The fields of a `tools/call` request that this path reads; the rest of
/// the message is ignored, as the SDK ignores it.
#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    /// Read as the SDK reads it (an integer that fits an i64, in integer
    /// or float form, or a string).
    id: NumberOrString,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: Params<'a>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// A short call, its arguments parsed.
enum Short {
    ReadText(tools::ReadTextFile),
    ReadMedia(tools::OnePath),
    Info(tools::OnePath),
    Allowed(tools::NoArgs),
}

impl Server {
    /// Whether calls may be answered here: the session is initialized and
    /// its client roots are settled.
    fn inline_ready(&self) -> bool {
        self.shared.inline_ready.load(Ordering::Acquire) && !self.shared.narrow_pending()
    }

    /// The call, when it is a short one with arguments that fit. `args`
    /// must be a JSON object, as the SDK requires (serde would read an
    /// array as a struct's fields in order).
    fn short(&self, name: &str, args: &str) -> Option<Short> {
        if !args.starts_with('{') {
            return None;
        }
        Some(match name {
            "read_text_file" => {
                let a: tools::ReadTextFile = serde_json::from_str(args).ok()?;
                (!a.counts_lines() && self.small_regular_file(&a.path))
                    .then_some(Short::ReadText(a))?
            }
            "read_media_file" => {
                let a: tools::OnePath = serde_json::from_str(args).ok()?;
                self.small_regular_file(&a.path)
                    .then_some(Short::ReadMedia(a))?
            }
            "get_file_info" => Short::Info(serde_json::from_str(args).ok()?),
            "list_allowed_directories" => Short::Allowed(serde_json::from_str(args).ok()?),
            _ => return None,
        })
    }
}

impl Inline for Server {
    fn answer(&self, line: &str) -> Option<Reply> {
        if !self.inline_ready() {
            return None;
        }
        let req = serde_json::from_str::<Request<'_>>(line).ok()?;
        if req.jsonrpc != "2.0" || req.method != "tools/call" {
            return None;
        }
        let id = req.id;
        let args = req.params.arguments.map_or("{}", RawValue::get);
        let call = self.short(&req.params.name, args)?;
        let s = &*self.shared;
        let answer = match call {
            // Never a head or tail (see `short`): nothing to cancel.
            Short::ReadText(a) => tools::read_text_file(s, a, &AtomicBool::new(false)),
            Short::ReadMedia(a) => tools::read_media_file(s, a),
            Short::Info(a) => tools::get_file_info(s, a),
            Short::Allowed(a) => tools::list_allowed_directories(s, a),
        };
        let tools = Arc::clone(&self.tools);
        let tool = tools.iter().position(|t| t.name == req.params.name);
        Some(Reply(Box::new(move |out| {
            write_answer(tool.map(|i| &tools[i]), id, answer, out)
        })))
    }

    fn forwarding(&self, message: &RxJsonRpcMessage<RoleServer>) {
        // The client's roots changed: later calls go to the SDK, which
        // waits for the new roots, until it has asked for them and set the
        // session ready again.
        if let JsonRpcMessage::Notification(n) = message {
            if matches!(
                n.notification,
                ClientNotification::RootsListChangedNotification(_)
            ) {
                self.shared.inline_ready.store(false, Ordering::Release);
            }
        }
    }
}

/// The text of an answer that is one text block, from a tool other than
/// `read_media_file` and `exec` (whose structured copies have other
/// shapes).
fn single_text<'a>(tool: Option<&Tool>, answer: &'a tools::Answer) -> Option<&'a str> {
    let tool = tool?;
    if tool.name == "read_media_file" || tool.name == "exec" {
        return None;
    }
    match answer.as_ref().ok()?.as_slice() {
        [one] => one.as_text().map(|t| t.text.as_str()),
        _ => None,
    }
}

/// Writes the JSON-RPC answer as one line ending in a newline: the same
/// object the SDK writes for the call.
pub(crate) fn write_answer(
    tool: Option<&Tool>,
    id: NumberOrString,
    answer: tools::Answer,
    out: &mut Vec<u8>,
) {
    let mark = out.len();
    if let (Some(text), Some(t)) = (single_text(tool, &answer), tool) {
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        // Writing an id or a string into a vector cannot fail.
        let _ = serde_json::to_writer(&mut *out, &id);
        out.extend_from_slice(b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
        let start = out.len();
        sandgate::tool::write_json_str(out, text);
        let escaped = start..out.len();
        if t.output_schema.is_some() {
            // The structured copy, `{"content": text}`, is the same text.
            out.extend_from_slice(b"}],\"structuredContent\":{\"content\":");
            out.extend_from_within(escaped);
            out.extend_from_slice(b"},\"isError\":false}}\n");
        } else {
            out.extend_from_slice(b"}],\"isError\":false}}\n");
        }
        return;
    }
    let mut result = tool_result(tool, answer);
    // The SDK leaves the result type out for the revisions this server
    // speaks (all before the one that added it).
    result.result_type = None;
    let message = ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), id.clone());
    if serde_json::to_writer(&mut *out, &message).is_err() {
        out.truncate(mark);
        let error = ServerJsonRpcMessage::error(
            rmcp::ErrorData::internal_error("the answer could not be written", None),
            Some(id),
        );
        let _ = serde_json::to_writer(&mut *out, &error);
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;
    use sandgate::{Error, ErrorCode};

    /// What the SDK writes for the same answer.
    fn sdk(tool: Option<&Tool>, id: NumberOrString, answer: tools::Answer) -> Vec<u8> {
        let mut r = tool_result(tool, answer);
        r.result_type = None;
        let mut out = serde_json::to_vec(&ServerJsonRpcMessage::response(
            ServerResult::CallToolResult(r),
            id,
        ))
        .unwrap();
        out.push(b'\n');
        out
    }

    #[test]
    fn answers_are_the_bytes_the_sdk_writes() {
        let defs = tools::definitions(true, true);
        let text = "a \"quoted\" line\n\ttab \u{1} \u{7f} \u{e9} \u{2028} \\ end";
        let answers = || -> Vec<tools::Answer> {
            vec![
                Ok(vec![ContentBlock::text(text)]),
                Ok(vec![ContentBlock::text("")]),
                Ok(vec![ContentBlock::text("one"), ContentBlock::text("two")]),
                Ok(vec![ContentBlock::image("aGk=", "image/png")]),
                Err(Error::new(ErrorCode::PathEscape, "out \"there\"").with_path("x")),
            ]
        };
        let ids = [
            NumberOrString::Number(-3),
            NumberOrString::Number(i64::MAX),
            NumberOrString::String("a\"b\u{1}".into()),
        ];
        let mut hand_written = 0;
        for t in defs.iter().map(Some).chain([None]) {
            for id in &ids {
                for (i, (a, b)) in answers().into_iter().zip(answers()).enumerate() {
                    if single_text(t, &a).is_some() {
                        hand_written += 1;
                    }
                    let mut ours = b"left alone".to_vec();
                    write_answer(t, id.clone(), a, &mut ours);
                    assert_eq!(
                        String::from_utf8_lossy(&ours[10..]),
                        String::from_utf8_lossy(&sdk(t, id.clone(), b)),
                        "tool {:?}, id {id:?}, answer {i}",
                        t.map(|t| &t.name)
                    );
                }
            }
        }
        assert!(hand_written > 20, "{hand_written}");
    }
}
