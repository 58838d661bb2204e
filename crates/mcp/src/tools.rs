//! The tools: their argument types (from which the input schemas are
//! derived), their descriptions and annotations, and what each one does
//! with the sandbox.

use std::fmt::Write as _;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{ContentBlock, JsonObject, ResourceContents, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use sandgate::search::{
    Cut, GrepMode, GrepOptions, GrepOutput, DEFAULT_GREP_RESULTS, MAX_GLOB_RESULTS,
    MAX_GREP_RESULTS, MAX_LINE_TEXT, MAX_WALK_ENTRIES,
};
use sandgate::{Error, ErrorCode, FileKind, Limit, MAX_RANGE_LINES};

use crate::Shared;

/// `read_text_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadTextFile {
    /// The file: a name relative to the root, or an absolute path inside an allowed directory.
    pub path: String,
    /// If provided, returns only the last N lines of the file (0: the whole file).
    pub tail: Option<usize>,
    /// If provided, returns only the first N lines of the file (0: the whole file).
    pub head: Option<usize>,
}

impl ReadTextFile {
    /// Whether the read is by line range (a head or a tail of 1 to
    /// [`MAX_RANGE_LINES`] lines), which counts every line of the file:
    /// its time grows with the file's size, not with the read cap.
    pub(crate) fn counts_lines(&self) -> bool {
        let ranged = |n: Option<usize>| n.is_some_and(|n| (1..=MAX_RANGE_LINES).contains(&n));
        ranged(self.head) || ranged(self.tail)
    }
}

/// Arguments of the tools that take one path.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OnePath {
    /// A name relative to the root, or an absolute path inside an allowed directory.
    pub path: String,
}

/// `read_multiple_files` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadMultipleFiles {
    /// The files to read; one failing does not fail the others.
    #[schemars(length(min = 1))]
    pub paths: Vec<String>,
}

/// `write_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    /// Where to write, below the write root.
    pub path: String,
    /// The file's new content (UTF-8 text).
    pub content: String,
}

/// One edit of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EditOperation {
    /// Text to search for - must match exactly, and once.
    pub old_text: String,
    /// Text to replace with.
    pub new_text: String,
}

/// `edit_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EditFile {
    /// The file to edit, below the write root.
    pub path: String,
    /// Edits applied in order; either all apply or none.
    pub edits: Vec<EditOperation>,
    /// Preview changes using git-style diff format, writing nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// How `list_directory_with_sizes` sorts.
#[derive(Debug, Default, Deserialize, JsonSchema, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum SortBy {
    /// By name.
    #[default]
    Name,
    /// By size, largest first.
    Size,
}

/// `list_directory_with_sizes` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListWithSizes {
    /// The directory.
    pub path: String,
    /// Sort entries by name or size.
    #[serde(default)]
    pub sort_by: SortBy,
}

/// `directory_tree` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DirectoryTree {
    /// The directory.
    pub path: String,
    /// Glob patterns of entries to leave out (a pattern without `*` also
    /// matches the name at any depth).
    #[serde(default)]
    pub exclude_patterns: Vec<String>,
}

/// `move_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveFile {
    /// What to move, below the write root.
    pub source: String,
    /// Where to move it; must not exist.
    pub destination: String,
}

/// `search_files` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SearchFiles {
    /// The directory to search below.
    pub path: String,
    /// Glob matched against paths below `path` (`*.ext` in that directory,
    /// `**/*.ext` at any depth).
    pub pattern: String,
    /// Glob patterns of results to leave out.
    #[serde(default)]
    pub exclude_patterns: Vec<String>,
}

/// `list_allowed_directories` takes nothing.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// What `grep` answers.
#[derive(Debug, Default, Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum GrepModeArg {
    /// Matching lines as `path:line:text`.
    #[default]
    Lines,
    /// Paths of files with a match.
    Files,
    /// `path:count` of matching lines per file.
    Count,
}

/// `grep` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Grep {
    /// A regular expression (Rust regex syntax).
    pub pattern: String,
    /// A directory to search below, or one file (default: the root).
    pub path: Option<String>,
    /// Only files matching this glob: without `/` it matches the file name
    /// (`*.rs`), with `/` the path below `path`.
    pub glob: Option<String>,
    /// Match letters case-insensitively.
    #[serde(default)]
    pub case_insensitive: bool,
    /// Lines of context before each match (lines mode).
    pub before: Option<usize>,
    /// Lines of context after each match (lines mode).
    pub after: Option<usize>,
    /// lines, files or count.
    #[serde(default)]
    pub mode: GrepModeArg,
    /// The most results answered (1 to 1000, default 100).
    pub max_results: Option<usize>,
    /// Skip what .gitignore and .ignore files exclude, and .git.
    #[serde(default)]
    pub gitignore: bool,
}

/// `exec` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Exec {
    /// A shell command line, run with `sh -c` under the policy's confinement
    /// (and, when this client declared roots, reaching only what lies
    /// beneath them).
    pub command: String,
    /// Working directory: a name below the write root (default: the root,
    /// or the first of this client's roots that lies in it and is a
    /// directory).
    pub cwd: Option<String>,
    /// Time limit in milliseconds (never more than the policy's).
    pub timeout_ms: Option<u64>,
}

/// `fetch` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fetch {
    /// The URL (only hosts the policy allows).
    pub url: String,
    /// HTTP method (default GET).
    pub method: Option<String>,
    /// Request headers.
    pub headers: Option<std::collections::BTreeMap<String, String>>,
    /// Request body (text).
    pub body: Option<String>,
    /// Time limit in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Most body bytes answered.
    pub max_bytes: Option<u64>,
}

fn schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_type::<T>()
}

fn ann(read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(open_world)
}

/// Every tool this server offers, in listing order; `exec` and `fetch` only
/// when granted.
pub fn definitions(exec: bool, fetch: bool) -> Vec<Tool> {
    let ro = || ann(true, false, true, false);
    let mut tools = vec![
        Tool::new(
            "read_text_file",
            "Read a file as text. Use 'head' for only the first N lines or 'tail' for only the last N lines. Paths are names relative to the root, or absolute paths inside an allowed directory.",
            schema::<ReadTextFile>(),
        )
        .with_title("Read Text File")
        .with_output_schema::<TextOutput>()
        .with_annotations(ro()),
        Tool::new(
            "read_media_file",
            "Read an image or audio file and answer it as base64 data with its MIME type; any other file comes back as an embedded binary resource.",
            schema::<OnePath>(),
        )
        .with_title("Read Media File")
        .with_output_schema::<MediaOutput>()
        .with_annotations(ro()),
        Tool::new(
            "read_multiple_files",
            "Read several files at once. Each file's content is answered after its path; one failing does not fail the others.",
            schema::<ReadMultipleFiles>(),
        )
        .with_title("Read Multiple Files")
        .with_output_schema::<TextOutput>()
        .with_annotations(ro()),
        Tool::new(
            "write_file",
            "Create a file, or replace an existing one when the policy allows overwriting. Protected paths are refused.",
            schema::<WriteFile>(),
        )
        .with_title("Write File")
        .with_output_schema::<TextOutput>()
        .with_annotations(ann(false, true, true, false)),
        Tool::new(
            "edit_file",
            "Replace exact text in a file: each edit's oldText must occur exactly once. Edits apply in order; all apply or none. Answers a git-style diff; with dryRun nothing is written.",
            schema::<EditFile>(),
        )
        .with_title("Edit File")
        .with_output_schema::<TextOutput>()
        .with_annotations(ann(false, true, false, false)),
        Tool::new(
            "create_directory",
            "Create a directory and any missing parents; succeeds when it already exists.",
            schema::<OnePath>(),
        )
        .with_title("Create Directory")
        .with_output_schema::<TextOutput>()
        .with_annotations(ann(false, false, true, false)),
        Tool::new(
            "list_directory",
            "List a directory: one entry per line, prefixed [DIR], [FILE] or [LINK] (symbolic links are listed, never followed).",
            schema::<OnePath>(),
        )
        .with_title("List Directory")
        .with_output_schema::<TextOutput>()
        .with_annotations(ro()),
        Tool::new(
            "list_directory_with_sizes",
            "List a directory with file sizes, sorted by name or size, with totals.",
            schema::<ListWithSizes>(),
        )
        .with_title("List Directory with Sizes")
        .with_output_schema::<TextOutput>()
        .with_annotations(ro()),
        Tool::new(
            "directory_tree",
            "A recursive tree of a directory as JSON: entries with 'name', 'type' (file, directory, symlink) and 'children' for directories. Symbolic links are not entered.",
            schema::<DirectoryTree>(),
        )
        .with_title("Directory Tree")
        .with_output_schema::<TextOutput>()
        .with_annotations(ro()),
        Tool::new(
            "move_file",
            "Move or rename a file or directory below the write root; the destination must not exist.",
            schema::<MoveFile>(),
        )
        .with_title("Move File")
        .with_output_schema::<TextOutput>()
        .with_annotations(ann(false, true, false, false)),
        Tool::new(
            "search_files",
            "Find files and directories whose path below 'path' matches a glob ('*.ext' there, '**/*.ext' at any depth). Answers one root-relative path per line.",
            schema::<SearchFiles>(),
        )
        .with_title("Search Files")
        .with_output_schema::<TextOutput>()
        .with_annotations(ro()),
        Tool::new(
            "get_file_info",
            "Metadata of a file or directory: size, modified time, isDirectory, isFile, permissions and type.",
            schema::<OnePath>(),
        )
        .with_title("Get File Info")
        .with_output_schema::<TextOutput>()
        .with_annotations(ro()),
        Tool::new(
            "list_allowed_directories",
            "The directories this server may read, and the one it may write.",
            schema::<NoArgs>(),
        )
        .with_title("List Allowed Directories")
        .with_output_schema::<TextOutput>()
        .with_annotations(ro()),
        Tool::new(
            "grep",
            "Search file contents with a regular expression below a directory: include glob, case-insensitive matching, context lines, modes lines/files/count, a result cap, and optional .gitignore filtering. Symbolic links are never followed.",
            schema::<Grep>(),
        )
        .with_title("Grep")
        .with_annotations(ro()),
    ];
    if exec {
        tools.push(
            Tool::new(
                "exec",
                "Run a shell command confined by the policy (filesystem and limits enforced by the kernel). Answers the exit code, then stdout and stderr as blocks of their own, each opened by a marker line whose tag the command's output cannot contain.",
                schema::<Exec>(),
            )
            .with_title("Execute Command")
            .with_output_schema::<ExecOutput>()
            .with_annotations(ann(false, true, false, true)),
        );
    }
    if fetch {
        tools.push(
            Tool::new(
                "fetch",
                "Fetch a URL the policy allows (every redirect hop checked). Answers the status, headers and body.",
                schema::<Fetch>(),
            )
            .with_title("Fetch URL")
            // Not read-only: it sends any method with a body (`POST`,
            // `DELETE`) to the hosts the policy allows, and a host may run
            // a read-only tool without asking its user.
            .with_annotations(ann(false, true, false, true)),
        );
    }
    tools
}

/// The structured answer of the reference server's text tools: the same
/// text as the content block.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TextOutput {
    /// The answer's text.
    pub content: String,
    /// What the answer leaves out, when it was cut (a `directory_tree` past
    /// its 10,000 entries or 32 levels, a `read_text_file` head or tail cut at
    /// `max_read_bytes`): the same text as the second content block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The structured answer of `exec`: the same as its content blocks, with
/// stdout and stderr apart.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecOutput {
    /// The command's exit code (`128 + n` for signal `n`; 124 when the
    /// timeout ended it).
    pub exit_code: i32,
    /// The timeout ended the command.
    pub timed_out: bool,
    /// Output past the policy's `max_output_bytes` was dropped.
    pub truncated: bool,
    /// The limit that stopped the command, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// Changes the command made to protected paths, and what was done.
    pub protected_changes: Vec<ExecProtectedChange>,
    /// The command's standard output.
    pub stdout: String,
    /// The command's standard error.
    pub stderr: String,
}

/// One change a command made to a protected path.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecProtectedChange {
    /// The path beneath the write root.
    pub path: String,
    /// The deny-write pattern protecting it.
    pub pattern: String,
    /// What was done about it.
    pub action: String,
}

/// What kind of data a [`MediaItem`] holds.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MediaKind {
    /// An `image/*` type.
    Image,
    /// An `audio/*` type.
    Audio,
    /// Any other type.
    Blob,
}

/// One file's data in a [`MediaOutput`].
#[derive(Debug, Serialize, JsonSchema)]
pub struct MediaItem {
    /// Image, audio, or other binary data.
    #[serde(rename = "type")]
    pub kind: MediaKind,
    /// The bytes, base64-encoded.
    pub data: String,
    /// The MIME type, from the file's extension.
    #[serde(rename = "mimeType")]
    pub mime_type: String,
}

/// The structured answer of `read_media_file`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MediaOutput {
    /// The file's data (one item).
    pub content: Vec<MediaItem>,
}

/// The structured form of a successful answer, for the tools that declare
/// an output schema: the same text, or the same media, as the content
/// blocks. `None` for the tools without one.
pub(crate) fn structured(tool: &Tool, content: &mut [ContentBlock]) -> Option<serde_json::Value> {
    tool.output_schema.as_ref()?;
    if tool.name == "exec" {
        let ContentBlock::Text(head) = content.first_mut()? else {
            return None;
        };
        let mut meta = head.meta.take()?;
        return meta.0.remove(EXEC_STRUCTURED);
    }
    if tool.name == "read_media_file" {
        let items = content
            .iter()
            .filter_map(|c| match c {
                ContentBlock::Image(i) => Some(MediaItem {
                    kind: MediaKind::Image,
                    data: i.data.clone(),
                    mime_type: i.mime_type.clone(),
                }),
                ContentBlock::Audio(a) => Some(MediaItem {
                    kind: MediaKind::Audio,
                    data: a.data.clone(),
                    mime_type: a.mime_type.clone(),
                }),
                ContentBlock::Resource(r) => match &r.resource {
                    ResourceContents::BlobResourceContents {
                        blob, mime_type, ..
                    } => Some(MediaItem {
                        kind: MediaKind::Blob,
                        data: blob.clone(),
                        mime_type: mime_type
                            .clone()
                            .unwrap_or_else(|| "application/octet-stream".to_owned()),
                    }),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        return serde_json::to_value(MediaOutput { content: items }).ok();
    }
    // The shape of `TextOutput`, built by hand: the text is copied
    // once (a read's answer is most of the message). The first block is
    // the answer (for `directory_tree`, JSON that must stay whole); a
    // block after it is the note of a cut.
    let mut texts = content.iter().filter_map(|c| c.as_text());
    let text = texts.next().map(|t| t.text.clone()).unwrap_or_default();
    let notes: Vec<&str> = texts.map(|t| t.text.as_str()).collect();
    let mut out = serde_json::Map::with_capacity(2);
    out.insert("content".to_owned(), serde_json::Value::String(text));
    if !notes.is_empty() {
        out.insert(
            "note".to_owned(),
            serde_json::Value::String(notes.join("\n")),
        );
    }
    Some(serde_json::Value::Object(out))
}

/// A tool's answer: content blocks, or a refusal.
pub type Answer = Result<Vec<ContentBlock>, Error>;

fn text(s: impl Into<String>) -> Answer {
    Ok(vec![ContentBlock::text(s)])
}

fn lossy(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

fn kind_tag(k: FileKind) -> &'static str {
    match k {
        FileKind::Dir => "[DIR]",
        FileKind::File => "[FILE]",
        FileKind::Symlink => "[LINK]",
        _ => "[OTHER]",
    }
}

pub(crate) fn read_text_file(s: &Shared, a: ReadTextFile, cancel: &AtomicBool) -> Answer {
    let rel = s.read_name("read", &a.path)?;
    let sb = &s.sandbox;
    // A head or tail of 0 is no head or tail, as the reference server
    // reads it: the whole file, not an empty answer the model would take
    // for an empty file (models fill optional numbers with 0).
    let (head, tail) = (a.head.filter(|&n| n > 0), a.tail.filter(|&n| n > 0));
    match (head, tail) {
        (Some(_), Some(_)) => Err(s.refused(
            "read",
            &rel,
            Error::new(ErrorCode::Request, "give head or tail, not both"),
        )),
        // A ranged read counts every line of the file, however few it
        // answers: stopped when the client cancels.
        (Some(n), None) if n <= MAX_RANGE_LINES => {
            ranged(s, sb.read_lines_cancellable(&rel, 1, n, cancel)?)
        }
        (None, Some(n)) if n <= MAX_RANGE_LINES => {
            ranged(s, sb.read_last_lines_cancellable(&rel, n, cancel)?)
        }
        // The sandbox's ranged read serves 2,000 lines at most; the
        // reference server takes any count, so a longer one is cut from
        // the whole file, which must then fit in max_read_bytes.
        (head, tail) => {
            let mut whole = sb.read(&rel).map_err(|e| match (e.code(), head.or(tail)) {
                (ErrorCode::TooLarge, Some(_)) => Error::new(
                    ErrorCode::TooLarge,
                    format!(
                        "{}; a head or tail of more than {MAX_RANGE_LINES} lines reads the \
                         whole file, so ask for {MAX_RANGE_LINES} lines or fewer",
                        e.message()
                    ),
                )
                .with_path(&rel),
                _ => e,
            })?;
            match (head, tail) {
                (Some(n), _) => whole.truncate(first_lines_len(&whole, n)),
                (_, Some(n)) => drop(whole.drain(..last_lines_start(&whole, n))),
                _ => {}
            }
            text(lossy(whole))
        }
    }
}

/// A head or tail read by line range: its lines, and when `max_read_bytes`
/// cut the range short, a second block saying which lines these are (a
/// cut tail does not reach the end of the file), so that the model does
/// not take them for all it asked for.
fn ranged(s: &Shared, r: sandgate::LinesRead) -> Answer {
    let mut blocks = vec![ContentBlock::text(lossy(r.content))];
    if r.truncated {
        let last = r.offset + r.lines - 1;
        blocks.push(ContentBlock::text(format!(
            "[these are lines {}-{last} of {}: the read stopped there, at max_read_bytes \
             ({} bytes), the most one read answers]",
            r.offset, r.total_lines, s.max_read_bytes
        )));
    }
    Ok(blocks)
}

/// How many bytes the first `n` lines of `bytes` take, each with its line
/// break (the last one may have none), as the sandbox's ranged read
/// counts lines.
fn first_lines_len(bytes: &[u8], n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    memchr::memchr_iter(b'\n', bytes)
        .nth(n - 1)
        .map_or(bytes.len(), |end| end + 1)
}

/// Where the last `n` lines of `bytes` start, counted as
/// [`first_lines_len`] counts them.
fn last_lines_start(bytes: &[u8], n: usize) -> usize {
    if n == 0 {
        return bytes.len();
    }
    // A final line without a break is a line too.
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    memchr::memrchr_iter(b'\n', body)
        .nth(n - 1)
        .map_or(0, |start| start + 1)
}

fn mime_of(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "svg" => "image/svg+xml",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "ogg" => "audio/ogg",
        "flac" => "audio/flac",
        _ => "application/octet-stream",
    }
}

pub(crate) fn read_media_file(s: &Shared, a: OnePath) -> Answer {
    let rel = s.read_name("read", &a.path)?;
    let data = base64::engine::general_purpose::STANDARD.encode(s.sandbox.read(&rel)?);
    let mime = mime_of(&rel);
    Ok(vec![if mime.starts_with("image/") {
        ContentBlock::image(data, mime)
    } else if mime.starts_with("audio/") {
        ContentBlock::audio(data, mime)
    } else {
        ContentBlock::resource(ResourceContents::BlobResourceContents {
            uri: format!("sandgate:///{}", rel.trim_start_matches("./")),
            mime_type: Some(mime.to_owned()),
            blob: data,
            meta: None,
        })
    }])
}

pub(crate) fn read_multiple_files(s: &Shared, a: ReadMultipleFiles) -> Answer {
    if a.paths.is_empty() {
        return Err(Error::new(
            ErrorCode::Request,
            "paths must name at least one file",
        ));
    }
    // The files' content in one answer is held to what one read may give,
    // so that naming a big file many times cannot fill the server's memory;
    // a file past that is refused on its own, and the rest still come.
    let cap = s.max_read_bytes;
    let mut held = 0u64;
    let parts: Vec<String> = a
        .paths
        .iter()
        .map(|p| {
            let read = s.read_name("read", p).and_then(|rel| {
                let full = || {
                    Error::new(
                        ErrorCode::TooLarge,
                        format!(
                            "this answer already holds {held} bytes of files, and max_read_bytes \
                             ({cap}) is the most one answer holds; read this file in another call"
                        ),
                    )
                    .with_path(&rel)
                };
                // A file left out for want of room is recorded as refused
                // (after the read's own record when it was read).
                if held >= cap {
                    return Err(s.refused("read", &rel, full()));
                }
                let bytes = s.sandbox.read(&rel)?;
                if held + bytes.len() as u64 > cap {
                    return Err(s.refused("read", &rel, full()));
                }
                held += bytes.len() as u64;
                Ok(bytes)
            });
            match read {
                Ok(bytes) => format!("{p}:\n{}\n", lossy(bytes)),
                Err(e) => format!("{p}: Error - {}", describe(&e)),
            }
        })
        .collect();
    text(parts.join("\n---\n"))
}

pub(crate) fn write_file(s: &Shared, a: WriteFile) -> Answer {
    let rel = s.write_name("write", &a.path)?;
    let n = s.sandbox.write(
        &rel,
        a.content.as_bytes(),
        sandgate::WriteOptions::default().overwrite(true),
    )?;
    text(format!("Successfully wrote {n} bytes to {}", a.path))
}

pub(crate) fn edit_file(s: &Shared, a: EditFile) -> Answer {
    // Recorded as the sandbox records it: a dry run is no edit.
    let op = if a.dry_run { "edit_dry_run" } else { "edit" };
    let rel = s.write_name(op, &a.path)?;
    let edits: Vec<(&str, &str)> = a
        .edits
        .iter()
        .map(|e| (e.old_text.as_str(), e.new_text.as_str()))
        .collect();
    if edits.is_empty() {
        return Err(s.refused(
            op,
            &rel,
            Error::new(ErrorCode::Request, "edits must hold at least one edit"),
        ));
    }
    let p = s.sandbox.edit_many(&rel, &edits, a.dry_run)?;
    let (Some(before), Some(after)) = (p.before, p.after) else {
        // The file tools may not read this file (the write root is no read
        // root, or an earlier read root answers for the name), and the
        // sandbox answers none of it: a diff's lines, context and changed
        // lines alike, would show what a read refuses, so only the outcome
        // is told.
        let done = if a.dry_run {
            "The edits apply (dry run: nothing was written)"
        } else {
            "Edited"
        };
        return text(format!(
            "{done}: {} ({} edit(s)). No diff is shown: this file lies where the \
             policy grants no reads (the write root is not a read root, or an earlier \
             read root answers for this name).",
            a.path,
            edits.len()
        ));
    };
    // The file's host path, as the reference names it in the diff.
    let host = s
        .dirs
        .iter()
        .find(|d| d.is_write)
        .map(|d| d.resolved.join(rel.trim_start_matches("./")))
        .map_or_else(|| rel.clone(), |p| p.display().to_string());
    text(crate::edits::diff_answer(
        &host,
        &lossy(before),
        &lossy(after),
    ))
}

pub(crate) fn create_directory(s: &Shared, a: OnePath) -> Answer {
    let rel = s.write_name("mkdir", &a.path)?;
    // One call, as through every other door: the sandbox makes the missing
    // parents, accepts an existing directory, checks every directory it
    // would make before making any, and spends one `fs_ops`. (A call per
    // component spent one each and left the first parents behind when a
    // later one was refused.)
    s.sandbox.mkdir(&rel)?;
    text(format!("Successfully created directory {}", a.path))
}

/// Most entries one `list_directory` or `list_directory_with_sizes`
/// answers. The directory is read no further: a huge one costs the server
/// memory and `lstat` calls for this many entries only, and the answer
/// ends with a line saying it holds more (which ones are listed is then
/// the filesystem's order).
pub const MAX_LIST_ENTRIES: usize = 10_000;

/// The line that ends a listing cut at [`MAX_LIST_ENTRIES`].
fn more_entries() -> String {
    format!(
        "[the directory holds more than {MAX_LIST_ENTRIES} entries, the most one listing answers; \
         these are {MAX_LIST_ENTRIES} of them, unordered by the directory; use search_files or grep to find a name]"
    )
}

pub(crate) fn list_directory(s: &Shared, a: OnePath) -> Answer {
    let rel = s.read_name("list", &a.path)?;
    let (entries, more) = s.sandbox.list_max(&rel, MAX_LIST_ENTRIES)?;
    let mut lines: Vec<String> = entries
        .into_iter()
        .map(|e| format!("{} {}", kind_tag(e.kind), e.name))
        .collect();
    if more {
        lines.push(more_entries());
    }
    text(lines.join("\n"))
}

fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", UNITS[u])
}

pub(crate) fn list_directory_with_sizes(s: &Shared, a: ListWithSizes) -> Answer {
    let rel = s.read_name("list", &a.path)?;
    let (mut entries, more) = s.sandbox.list_max(&rel, MAX_LIST_ENTRIES)?;
    if a.sort_by == SortBy::Size {
        entries.sort_by(|x, y| y.size.cmp(&x.size).then_with(|| x.name.cmp(&y.name)));
    }
    let mut out = String::new();
    let (mut files, mut dirs, mut total) = (0, 0, 0u64);
    for e in &entries {
        if e.kind == FileKind::Dir {
            dirs += 1;
            let _ = writeln!(out, "{} {}", kind_tag(e.kind), e.name);
        } else {
            files += 1;
            total += e.size;
            let _ = writeln!(
                out,
                "{} {:<30} {:>10}",
                kind_tag(e.kind),
                e.name,
                human(e.size)
            );
        }
    }
    let _ = write!(
        out,
        "\nTotal: {files} files, {dirs} directories\nCombined size: {}",
        human(total)
    );
    if more {
        let _ = write!(out, "\n{}", more_entries());
    }
    text(out)
}

/// Exclude patterns as the reference server reads them: a pattern with `*`
/// matches the relative path; one without also matches a name at any depth
/// and everything below it.
///
/// The forms are one set ([`sandgate::search::glob_set`], which answers a
/// pattern too complex to compile as the request's fault). The set
/// matches as the single matchers did, but for a path whose last component
/// is `..`, which no walked name has.
struct Excludes(globset::GlobSet);

impl Excludes {
    fn new(patterns: &[String]) -> Result<Excludes, Error> {
        let mut globs = Vec::new();
        for p in patterns {
            sandgate::search::pattern_fits(p, "exclude pattern")?;
            let mut forms = vec![p.clone()];
            if !p.contains('*') {
                forms.push(format!("**/{p}"));
                forms.push(format!("**/{p}/**"));
            }
            for f in forms {
                let g = globset::GlobBuilder::new(&f)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| {
                        Error::new(ErrorCode::Request, format!("invalid exclude pattern: {e}"))
                    })?;
                globs.push(g);
            }
        }
        let bytes: usize = patterns.iter().map(String::len).sum();
        sandgate::search::glob_set(
            globs,
            "exclude pattern",
            &format!("patterns of {bytes} bytes"),
        )
        .map(Excludes)
    }

    fn hit(&self, rel: &str) -> bool {
        self.0.is_match(rel)
    }
}

/// Most entries one directory_tree answers, so a huge tree cannot exhaust
/// the server: each directory is read no further than the entries left
/// (a huge directory is never read whole), and what is past them is left
/// out, which a second text block says; the first stays
/// the tree's JSON.
pub const MAX_TREE_ENTRIES: usize = 10_000;

/// Deepest directory level `directory_tree` enters: a directory this many
/// levels below `path` is shown without `children`. The walk recurses once
/// per level, so an unbounded one overflowed its thread's stack on a chain
/// of about 1,000 nested directories and ended the server; each level also
/// indents every line below it in the answer, and JSON nested deeper than
/// 128 levels (two per directory) is refused by common parsers.
pub const MAX_TREE_DEPTH: usize = 32;

/// The block that follows a tree cut at [`MAX_TREE_ENTRIES`].
fn tree_cut() -> String {
    format!(
        "[the tree holds more than {MAX_TREE_ENTRIES} entries, the most one directory_tree \
         answers; the rest is left out (a directory may show fewer children than it has): \
         ask for a subdirectory, add excludePatterns, or use search_files]"
    )
}

/// The block that follows a tree whose listing spent the `fs_ops` budget.
fn tree_spent() -> &'static str {
    "[the fs_ops budget ran out while the tree was listed (each directory listed spends \
     one): directories shown without children were not entered]"
}

/// The block that follows a tree with directories it did not enter.
fn tree_deep() -> String {
    format!(
        "[directories {MAX_TREE_DEPTH} levels down, or whose path is too long for the \
         operating system ({} bytes), were not entered and are shown without children: ask \
         for a subdirectory]",
        sandgate::relpath::MAX_NAME_BYTES
    )
}

/// The block that follows a tree with subdirectories it could not list.
fn tree_unlisted() -> &'static str {
    "[directories that could not be listed (a name no tool can take, such as one with ':', \
     a device name or bytes that are not UTF-8, or permissions that refuse the server) are \
     shown without children]"
}

/// Directories a `directory_tree` showed without entering them, and why.
#[derive(Default)]
struct LeftOut {
    /// Past [`MAX_TREE_DEPTH`], or a path too long for the kernel.
    deep: bool,
    /// The `fs_ops` budget was spent.
    spent: bool,
    /// A subdirectory could not be listed.
    unlisted: bool,
}

/// One entry of a `directory_tree`, its keys in the reference's order:
/// `name`, `type`, then `children` for a directory that was entered.
#[derive(Serialize)]
struct TreeEntry {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    children: Option<Vec<TreeEntry>>,
}

fn tree_entry(name: String, kind: &'static str, children: Option<Vec<TreeEntry>>) -> TreeEntry {
    TreeEntry {
        name,
        kind,
        children,
    }
}

pub(crate) fn directory_tree(s: &Shared, a: DirectoryTree) -> Answer {
    let rel = s.read_name("list", &a.path)?;
    let ex = Excludes::new(&a.exclude_patterns)?;
    let mut budget = MAX_TREE_ENTRIES;
    // A directory past the fs_ops budget is not entered, so that a tree
    // that spends the rest of the budget answers what it listed rather
    // than E_DENIED for all of it.
    let (mut cut, mut left) = (false, LeftOut::default());
    #[allow(clippy::too_many_arguments)]
    fn build(
        s: &Shared,
        dir: &str,
        below: &str,
        ex: &Excludes,
        budget: &mut usize,
        cut: &mut bool,
        level: usize,
        left: &mut LeftOut,
    ) -> Result<Vec<TreeEntry>, Error> {
        let mut out = Vec::new();
        let (entries, more) = s.sandbox.list_max(dir, *budget)?;
        // The directory was read no further than the entries left.
        *cut |= more;
        for e in entries {
            let sub = if below.is_empty() {
                e.name.clone()
            } else {
                format!("{below}/{}", e.name)
            };
            if ex.hit(&sub) {
                continue;
            }
            if *budget == 0 {
                *cut = true;
                break;
            }
            *budget -= 1;
            let path = if dir == "." {
                e.name.clone()
            } else {
                format!("{dir}/{}", e.name)
            };
            out.push(match e.kind {
                // Not entered: too deep to recurse into, or a path the
                // kernel cannot take (listing it would fail the whole tree).
                FileKind::Dir
                    if level + 1 >= MAX_TREE_DEPTH
                        || path.len() >= sandgate::relpath::MAX_NAME_BYTES =>
                {
                    left.deep = true;
                    tree_entry(e.name, "directory", None)
                }
                FileKind::Dir if s.sandbox.fs_ops_remaining() == Some(0) => {
                    left.spent = true;
                    tree_entry(e.name, "directory", None)
                }
                // A subdirectory that cannot be listed (a name no tool
                // can take, `a:b` or `con`, or one not UTF-8; permissions
                // that refuse the server) is shown without children, as
                // glob and grep pass it over; before, it failed the tree.
                FileKind::Dir => match build(s, &path, &sub, ex, budget, cut, level + 1, left) {
                    Ok(children) => tree_entry(e.name, "directory", Some(children)),
                    Err(_) => {
                        left.unlisted = true;
                        tree_entry(e.name, "directory", None)
                    }
                },
                FileKind::Symlink => tree_entry(e.name, "symlink", None),
                _ => tree_entry(e.name, "file", None),
            });
        }
        Ok(out)
    }
    let tree = build(s, &rel, "", &ex, &mut budget, &mut cut, 0, &mut left)?;
    let mut blocks = vec![ContentBlock::text(
        serde_json::to_string_pretty(&tree).unwrap_or_default(),
    )];
    if cut {
        blocks.push(ContentBlock::text(tree_cut()));
    }
    if left.deep {
        blocks.push(ContentBlock::text(tree_deep()));
    }
    if left.spent {
        blocks.push(ContentBlock::text(tree_spent()));
    }
    if left.unlisted {
        blocks.push(ContentBlock::text(tree_unlisted()));
    }
    Ok(blocks)
}

pub(crate) fn move_file(s: &Shared, a: MoveFile) -> Answer {
    let (from, to) = s
        .map_write(&a.source)
        .and_then(|from| Ok((from, s.map_write(&a.destination)?)))
        .map_err(|e| s.refused("rename", &format!("{} -> {}", a.source, a.destination), e))?;
    s.sandbox.rename(&from, &to)?;
    text(format!(
        "Successfully moved {} to {}",
        a.source, a.destination
    ))
}

pub(crate) fn search_files(s: &Shared, a: SearchFiles) -> Answer {
    let rel = s.walk_name("glob", &a.path)?;
    let ex = Excludes::new(&a.exclude_patterns)?;
    let base = if rel == "." { None } else { Some(rel.as_str()) };
    // The matches come back below the name as the parser folds it (`./sub`,
    // `sub/.` and `sub//` are `sub`), so the part cut off before the
    // exclude patterns are tried is measured on that folded name. (A name
    // the parser refuses is refused by the search below.)
    let folded = sandgate::RelPath::parse(&rel)
        .map(|r| r.as_str().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    let prefix_len = match folded.as_str() {
        "" | "." => 0,
        f => f.len() + 1,
    };
    let all = s.sandbox.glob_found(&a.pattern, base)?;
    let found: Vec<String> = all
        .results
        .into_iter()
        .filter(|p| !ex.hit(p.get(prefix_len..).unwrap_or(p)))
        .collect();
    let mut out = if found.is_empty() {
        "No matches found".to_owned()
    } else {
        found.join("\n")
    };
    // Said, so that the model does not take the answer for every match.
    match all.cut {
        Some(Cut::MaxResults) => {
            let _ = write!(
                out,
                "\n[the search stopped at {MAX_GLOB_RESULTS} matches, the most one search_files \
                 answers; there are more: narrow the path or the pattern]"
            );
        }
        Some(Cut::PathLength) => {
            out.push('\n');
            out.push_str(&long_cut());
        }
        Some(_) => {
            out.push('\n');
            out.push_str(&walk_cut());
        }
        None => {}
    }
    if all.unreadable > 0 {
        let _ = write!(
            out,
            "\n[{} directories could not be listed, or had names that are not UTF-8, and \
             were not searched]",
            all.unreadable
        );
    }
    text(out)
}

/// The last line of a search whose walk left a directory whose path is too
/// long for the operating system.
fn long_cut() -> String {
    format!(
        "[the search did not enter a directory whose path is {} bytes or longer, too long \
         for the operating system; what lies in it was not searched]",
        sandgate::relpath::MAX_NAME_BYTES
    )
}

/// The last line of a search whose walk stopped at [`MAX_WALK_ENTRIES`].
fn walk_cut() -> String {
    format!(
        "[the search stopped after walking {MAX_WALK_ENTRIES} entries, the most one search \
         visits; what lies past them was not searched: narrow the path]"
    )
}

pub(crate) fn get_file_info(s: &Shared, a: OnePath) -> Answer {
    let rel = s.read_name("stat", &a.path)?;
    let st = s.sandbox.stat(&rel)?;
    let kind = match st.kind {
        FileKind::Dir => "directory",
        FileKind::File => "file",
        FileKind::Symlink => "symlink",
        _ => "other",
    };
    // The reference's fields, in its order and its time format (but
    // no creation or access time, which the sandbox does not read), then
    // the type.
    text(format!(
        "size: {}\nmodified: {}\nisDirectory: {}\nisFile: {}\npermissions: {:03o}\ntype: {kind}",
        st.size,
        js_date(st.mtime),
        st.kind == FileKind::Dir,
        st.kind == FileKind::File,
        st.mode & 0o777
    ))
}

/// `secs` since the Unix epoch as JavaScript's `Date.prototype.toString`
/// writes it in UTC (`Sun Dec 06 2026 05:52:39 GMT+0000 (Coordinated
/// Universal Time)`), as the reference server's `get_file_info` does.
fn js_date(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0).map_or_else(
        || format!("{secs} seconds since 1970"),
        |t| {
            t.format("%a %b %d %Y %H:%M:%S GMT+0000 (Coordinated Universal Time)")
                .to_string()
        },
    )
}

pub(crate) fn list_allowed_directories(s: &Shared, _: NoArgs) -> Answer {
    // Each granted directory once, however many spellings it was given
    // in; with client roots, each of those instead.
    let client = s.client_roots();
    let listed: Vec<(std::path::PathBuf, usize)> = match &client {
        None => (0..s.dirs.len())
            .map(|i| (s.dirs[i].resolved.clone(), i))
            .collect(),
        Some(roots) => roots
            .iter()
            .map(|(i, prefix, _)| match prefix.as_str() {
                "." => (s.dirs[*i].resolved.clone(), *i),
                p => (s.dirs[*i].resolved.join(p), *i),
            })
            .collect(),
    };
    let mut out = String::from("Allowed directories:");
    let mut seen = std::collections::HashSet::new();
    for (path, i) in listed {
        let d = &s.dirs[i];
        let what = match (d.read_index.is_some(), d.is_write) {
            (true, true) => "read, write",
            (true, false) => "read",
            (false, true) => "write",
            (false, false) => continue,
        };
        if seen.insert(path.clone()) {
            // As every message names a path ([`sandgate::policy::shown`]):
            // a byte that is not UTF-8 as `\xNN` (never U+FFFD, which can be
            // another directory's name), a backslash doubled, a line break
            // as `\u{a}` (never a line of its own, read as another root).
            let _ = write!(out, "\n{} ({what})", sandgate::policy::shown(&path));
        }
    }
    if client.is_some() {
        out.push_str(
            "\nNarrowed to the roots this client declared; relative names still start at the granted directory.",
        );
    }
    out.push_str(
        "\nNames relative to the root are read from these in order; writes go to the write root.",
    );
    text(out)
}

pub(crate) fn grep(s: &Shared, a: Grep, cancel: Arc<std::sync::atomic::AtomicBool>) -> Answer {
    // No path is the whole of every read root: `.`.
    let rel = s.walk_name("grep", a.path.as_deref().unwrap_or("."))?;
    let mode = match a.mode {
        GrepModeArg::Lines => GrepMode::Lines,
        GrepModeArg::Files => GrepMode::Files,
        GrepModeArg::Count => GrepMode::Count,
    };
    let mut opts = GrepOptions::default();
    opts.glob = a.glob;
    opts.case_insensitive = a.case_insensitive;
    opts.before = a.before.unwrap_or(0);
    opts.after = a.after.unwrap_or(0);
    opts.mode = mode;
    opts.max_results = a.max_results;
    opts.gitignore = a.gitignore;
    let a_gitignore = a.gitignore;
    opts.cancel = Some(cancel);
    if mode != GrepMode::Lines && (opts.before > 0 || opts.after > 0) {
        return Err(Error::new(
            ErrorCode::Request,
            "before and after apply to mode lines only",
        ));
    }
    let found = s.sandbox.grep_found(&a.pattern, Some(&rel), &opts)?;
    let mut out = match found.results {
        GrepOutput::Lines(ms) => {
            let mut out = String::new();
            for m in ms {
                let first = m.line - m.before.len();
                let mark = |cut: bool| if cut { LINE_CUT_MARK } else { "" };
                for (i, l) in m.before.iter().enumerate() {
                    let cut = mark(m.before_cut.contains(&i));
                    let _ = writeln!(out, "{}-{}-{l}{cut}", m.path, first + i);
                }
                if m.text_start > 0 {
                    // A part of the line around a match past its first
                    // 1000 bytes: said where it starts, and where it ends
                    // when the line goes on.
                    let end = m.text_start + MAX_LINE_TEXT;
                    let _ = write!(
                        out,
                        "{}:{}:[line cut: shown from byte {}]…{}",
                        m.path, m.line, m.text_start, m.text
                    );
                    if m.text_cut {
                        let _ = write!(out, "…[line cut at byte {end}]");
                    }
                    out.push('\n');
                } else {
                    let cut = mark(m.text_cut);
                    let _ = writeln!(out, "{}:{}:{}{cut}", m.path, m.line, m.text);
                }
                for (i, l) in m.after.iter().enumerate() {
                    let cut = mark(m.after_cut.contains(&i));
                    let _ = writeln!(out, "{}-{}-{l}{cut}", m.path, m.line + 1 + i);
                }
                if opts.before > 0 || opts.after > 0 {
                    out.push_str("--\n");
                }
            }
            out
        }
        GrepOutput::Files(fs) => fs.join("\n"),
        GrepOutput::Counts(cs) => cs
            .into_iter()
            .map(|(p, n)| format!("{p}:{n}"))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    // A search stopped at its answer's size before its first match found
    // one: its last line says why none is answered.
    if out.is_empty() && found.cut != Some(Cut::AnswerBytes) {
        out.push_str("No matches found");
    }
    // Said on a last line, so that the model does not take the answer
    // for every match.
    let note = match found.cut {
        Some(Cut::MaxResults) => Some(format!(
            "[the search stopped at max_results ({}); there are more matches: narrow the \
             path, the pattern or glob, or raise max_results (at most {})]",
            opts.max_results.unwrap_or(DEFAULT_GREP_RESULTS),
            MAX_GREP_RESULTS
        )),
        Some(Cut::MaxReadBytes) => Some(format!(
            "[files larger than max_read_bytes ({} bytes) were passed over without being \
             searched; there may be matches in them: read such a file by head or tail]",
            s.max_read_bytes
        )),
        Some(Cut::AnswerBytes) => Some(format!(
            "[the search stopped when its matches and context lines reached max_read_bytes \
             ({} bytes), the most one answer holds; there may be more matches: ask fewer \
             context lines (before, after), or narrow the path, the pattern or glob]",
            s.max_read_bytes
        )),
        // With .gitignore filtering on, the walk also stops where its
        // ignore files ask more work than one search may spend.
        Some(Cut::WalkEntries) if a_gitignore => Some(format!(
            "[the search stopped at the bound of its walk: {MAX_WALK_ENTRIES} entries, or the \
             work the .gitignore and .ignore files ask (their rules, or the checks of entries \
             against a deep chain of them); what lies past it was not searched: narrow the path]"
        )),
        Some(Cut::WalkEntries) => Some(walk_cut()),
        Some(Cut::PathLength) => Some(long_cut()),
        Some(other) => Some(format!("[the search was cut: {}]", other.as_str())),
        None => None,
    };
    let unreadable = (found.unreadable > 0).then(|| {
        format!(
            "[{} file(s) or directories could not be opened, read to the end or listed, or had \
             names that are not UTF-8, and were not searched whole]",
            found.unreadable
        )
    });
    let binary = (found.binary > 0).then(|| {
        format!(
            "[{} binary file(s) (a NUL in the first 8 KiB) were passed over without being \
             searched]",
            found.binary
        )
    });
    for note in [note, unreadable, binary].into_iter().flatten() {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&note);
    }
    text(out)
}

/// Ends a grep match whose line was cut at [`sandgate::search::MAX_LINE_TEXT`]
/// bytes, so that the model does not take the cut text for the whole line.
const LINE_CUT_MARK: &str = "…[line cut at 1000 bytes]";

pub(crate) fn exec(s: &Shared, a: Exec, abort: sandgate::exec::AbortSignal) -> Answer {
    let Some(executor) = &s.executor else {
        return Err(Error::new(ErrorCode::Denied, "the policy grants no exec"));
    };
    let cwd = match &a.cwd {
        Some(c) => Some(s.cwd_name(c)?),
        // Narrowed to the client's roots: their first in the write root
        // that is a directory (a client may declare a file beside its
        // folders), where the command can work, rather than the whole
        // root; with none, their first there, which is refused.
        None => s.client_roots().and_then(|roots| {
            let mut written = roots.iter().filter(|(d, _, _)| s.dirs[*d].is_write);
            let is_dir = |d: usize, rel: &str| {
                s.dir_root(d)
                    .is_some_and(|r| r.stat(rel).is_ok_and(|m| m.is_dir()))
            };
            written
                .clone()
                .find(|(d, rel, _)| is_dir(*d, rel))
                .or_else(|| written.next())
                .map(|(_, rel, _)| rel.clone())
        }),
    };
    let r = executor.exec(
        &a.command,
        sandgate::ExecOptions {
            cwd,
            timeout_ms: a.timeout_ms,
            abort: Some(abort),
            within: s.client_root_dirs(),
        },
    )?;
    // The executor could not start it: nothing ran, and the model must
    // not read this as the command's own exit 127 (a shell's "not
    // found", which stays a result).
    if r.not_started {
        let why = lossy(r.stderr);
        let why = why.trim();
        return Err(Error::new(
            ErrorCode::NotStarted,
            format!(
                "the command did not run: {}",
                why.strip_prefix("sandgate: ").unwrap_or(why)
            ),
        ));
    }
    let mut out = format!("exit code: {}\n", r.exit_code);
    if r.timed_out {
        out.push_str("timed out\n");
    }
    if r.truncated {
        out.push_str("output truncated at the policy's max_output_bytes\n");
    }
    if let Some(limit) = r
        .limit
        .filter(|l| !matches!(l, Limit::Timeout | Limit::Output))
    {
        let _ = writeln!(out, "stopped by the {} limit", limit.as_str());
    }
    // The agent learns that its change to a protected path did not stay.
    for c in &r.protected_changes {
        let _ = writeln!(
            out,
            "protected path {} (deny-write `{}`): {}",
            c.path, c.pattern, c.action
        );
    }
    // Each output in a block of its own, opened by a marker line whose
    // tag is drawn now, after the command ended, and occurs in neither
    // output: a command cannot print the marker that opens stderr, so the
    // split stays true even for a client that joins the blocks into one
    // text.
    let stdout = lossy(r.stdout);
    let stderr = lossy(r.stderr);
    let tag = output_tag(&stdout, &stderr);
    let structured = ExecOutput {
        exit_code: r.exit_code,
        timed_out: r.timed_out,
        truncated: r.truncated,
        limit: r.limit.map(|l| l.as_str().to_owned()),
        protected_changes: r
            .protected_changes
            .iter()
            .map(|c| ExecProtectedChange {
                path: c.path.clone(),
                pattern: c.pattern.clone(),
                action: c.action.to_string(),
            })
            .collect(),
        stdout,
        stderr,
    };
    let head = ContentBlock::Text(
        rmcp::model::TextContent::new(out.trim_end_matches('\n')).with_meta(
            rmcp::model::MetaObject(
                std::iter::once((
                    EXEC_STRUCTURED.to_owned(),
                    serde_json::to_value(&structured).unwrap_or_default(),
                ))
                .collect(),
            ),
        ),
    );
    Ok(vec![
        head,
        ContentBlock::text(format!("--- stdout {tag} ---\n{}", structured.stdout)),
        ContentBlock::text(format!("--- stderr {tag} ---\n{}", structured.stderr)),
    ])
}

/// The key under which `exec` hands its structured answer to
/// [`structured`] (in its first block's `_meta`, taken out before the
/// answer is sent).
const EXEC_STRUCTURED: &str = "sandgate/exec";

/// A tag for the marker lines of one `exec` answer: 12 hex digits from the
/// kernel's random source, drawn again while either output contains it.
fn output_tag(stdout: &str, stderr: &str) -> String {
    loop {
        let mut bytes = [0u8; 6];
        if crate::transport::random_bytes(&mut bytes).is_err() {
            // No random source: a tag made from the clock, still checked
            // against both outputs below.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            bytes.copy_from_slice(&t.to_le_bytes()[..6]);
        }
        let tag = crate::transport::hex(&bytes);
        if !stdout.contains(&tag) && !stderr.contains(&tag) {
            return tag;
        }
    }
}

pub(crate) fn fetch(s: &Shared, a: Fetch, cancel: Arc<std::sync::atomic::AtomicBool>) -> Answer {
    let Some(fetcher) = &s.fetcher else {
        return Err(Error::new(ErrorCode::Denied, "the policy grants no fetch"));
    };
    let mut req = serde_json::Map::new();
    req.insert("url".into(), a.url.into());
    if let Some(m) = a.method {
        req.insert("method".into(), m.into());
    }
    if let Some(h) = a.headers {
        req.insert(
            "headers".into(),
            serde_json::to_value(h).unwrap_or_default(),
        );
    }
    if let Some(b) = a.body {
        req.insert("body".into(), b.into());
    }
    if let Some(t) = a.timeout_ms {
        req.insert("timeout_ms".into(), t.into());
    }
    if let Some(m) = a.max_bytes {
        req.insert("max_bytes".into(), m.into());
    }
    // A cancelled call ends the transfer, its connection closed.
    let (answer, err) = sandgate::tool::fetch_json_cancellable(
        fetcher,
        &serde_json::Value::Object(req).to_string(),
        Some(sandgate::fetch::CancelFlag::from_arc(cancel)),
    );
    if let Some(e) = err {
        return Err(e);
    }
    let mut out = format!("status: {}\n", answer["status"]);
    if let Some(h) = answer["headers"].as_object() {
        for (k, v) in h {
            let _ = writeln!(out, "{k}: {}", v.as_str().unwrap_or_default());
        }
    }
    if answer["truncated"] == serde_json::Value::Bool(true) {
        out.push_str("(body truncated)\n");
    }
    out.push('\n');
    match answer.get("body").and_then(|b| b.as_str()) {
        Some(b) => out.push_str(b),
        None => {
            let _ = write!(
                out,
                "(binary body, base64)\n{}",
                answer["body_base64"].as_str().unwrap_or_default()
            );
        }
    }
    text(out)
}

/// A refusal as the model reads it: the code, the reason, and the
/// root-relative path or pattern it concerns.
pub fn describe(e: &Error) -> String {
    let mut s = format!("{}: {}", e.code().as_str(), e.message());
    if let Some(p) = e.path() {
        let _ = write!(s, " (path: {p})");
    }
    if let Some(p) = e.pattern() {
        let _ = write!(s, " (pattern: {p})");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{first_lines_len, js_date, last_lines_start, Excludes};

    /// Exclude patterns too complex to compile (two of 60,000 `*`) are the
    /// request's fault, answered as such; globset's single-glob matcher
    /// panicked on it (the call answered an internal error, its message the
    /// half-megabyte expression).
    #[test]
    fn ffi17_an_exclude_pattern_too_complex_to_compile_is_a_request_error() {
        // Each under the cap on one pattern's length, the two together
        // over the matcher's size limit.
        let e = match Excludes::new(&vec!["*".repeat(60_000); 2]) {
            Ok(_) => panic!("a pattern over the matcher's size limit was accepted"),
            Err(e) => e,
        };
        assert_eq!(e.code(), sandgate::ErrorCode::Request, "{}", e.message());
        assert!(e.message().len() < 300, "{}", &e.message()[..300]);
        let ex = Excludes::new(&["*.log".to_owned(), "target".to_owned()]).unwrap();
        assert!(ex.hit("a.log") && ex.hit("target") && ex.hit("x/target/y"));
        assert!(!ex.hit("a.txt") && !ex.hit("d/a.log"));
    }

    /// An exclude pattern past the grep and glob patterns' cap is refused
    /// before it is parsed, naming its length and the cap; one at the cap
    /// is judged by what it is.
    #[test]
    fn pattern26_an_exclude_pattern_past_the_cap_is_refused_before_it_is_parsed() {
        use sandgate::search::MAX_PATTERN_BYTES;
        for len in [MAX_PATTERN_BYTES + 1, 100 << 20] {
            let patterns = ["*.log".to_owned(), "a".repeat(len)];
            let e = match Excludes::new(&patterns) {
                Ok(_) => panic!("an exclude pattern of {len} bytes was accepted"),
                Err(e) => e,
            };
            assert_eq!(e.code(), sandgate::ErrorCode::Request);
            assert_eq!(
                e.message(),
                format!(
                    "invalid exclude pattern: a pattern of {len} bytes, over the \
                     {MAX_PATTERN_BYTES} a pattern may have"
                )
            );
        }
        let ex = Excludes::new(&["a".repeat(MAX_PATTERN_BYTES)]).unwrap();
        assert!(ex.hit(&"a".repeat(MAX_PATTERN_BYTES)) && !ex.hit("a"));
    }

    /// As JavaScript's `new Date(ms).toString()` writes them under TZ=UTC.
    #[test]
    fn dates_are_written_as_javascript_writes_them() {
        let utc = " GMT+0000 (Coordinated Universal Time)";
        assert_eq!(js_date(0), format!("Thu Jan 01 1970 00:00:00{utc}"));
        assert_eq!(
            js_date(1_700_000_000),
            format!("Tue Nov 14 2023 22:13:20{utc}")
        );
        assert_eq!(
            js_date(951_782_400),
            format!("Tue Feb 29 2000 00:00:00{utc}")
        );
        assert_eq!(
            js_date(-86_400 * 400),
            format!("Wed Nov 27 1968 00:00:00{utc}")
        );
    }

    /// Lines as the sandbox's ranged read counts them: each up to and
    /// including its break, and a last one without a break.
    fn lines(bytes: &[u8]) -> Vec<&[u8]> {
        bytes.split_inclusive(|&b| b == b'\n').collect()
    }

    #[test]
    fn head_and_tail_cut_where_the_lines_do() {
        let samples: [&[u8]; 7] = [
            b"",
            b"\n",
            b"\n\n\n",
            b"one",
            b"one\ntwo\n",
            b"one\ntwo\nthree",
            b"\r\n\n a \n\nlast",
        ];
        for bytes in samples {
            let all = lines(bytes);
            for n in 0..all.len() + 3 {
                let head: Vec<u8> = all.iter().take(n).flat_map(|l| l.iter().copied()).collect();
                let skip = all.len().saturating_sub(n);
                let tail: Vec<u8> = all
                    .iter()
                    .skip(skip)
                    .flat_map(|l| l.iter().copied())
                    .collect();
                assert_eq!(
                    &bytes[..first_lines_len(bytes, n)],
                    &head[..],
                    "{bytes:?} head {n}"
                );
                assert_eq!(
                    &bytes[last_lines_start(bytes, n)..],
                    &tail[..],
                    "{bytes:?} tail {n}"
                );
            }
        }
    }
}
