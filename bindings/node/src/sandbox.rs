//! `Sandbox`: the agent-facing file tools (docs/reference/names.md and docs/reference/sandbox.md).
//!
//! Every operation exists twice: `read(…)` runs on the calling (main)
//! thread and returns the value or throws; `readAsync(…)` runs on the libuv
//! thread pool and returns a `Promise` that resolves with the same value or
//! rejects with the same error.

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use napi::bindgen_prelude::{AsyncTask, Buffer, Either3, Unknown, Utf16String};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;

use crate::abort::{abort_arg, Abort, ABORT_SIGNAL};
use crate::policy::Policy;
use crate::{
    class_arg, data_arg, is_nullish, opt_num_arg, opt_str_arg, options_of, same, str_arg, to_count,
    to_usize, utf8, utf8_opt, utf8_vec, wide_arg, Job, OrThrow,
};

/// One audit event: what one sandbox operation or one executor command did
/// (never file content, nor a command's text or output).
#[napi(object)]
pub struct AuditEvent {
    /// `read`, `write`, `edit`, `list`, `stat`, `mkdir`, `delete`, `rename`,
    /// `glob` or `grep`; `exec` for an executor's command.
    pub op: String,
    /// The root-relative path (`from -> to` for rename); for `exec`, the
    /// working directory as asked (`''` for the root).
    pub path: String,
    /// Bytes read or written, when the operation moved content; for `exec`,
    /// the bytes of output returned.
    pub size: Option<f64>,
    /// When the operation finished, milliseconds since the Unix epoch.
    pub time: f64,
    /// `'OK'` or the refusal's code (`'E_…'`).
    pub outcome: String,
    /// For `exec`: the command's exit code, when it ran.
    pub exit_code: Option<i32>,
    /// For `exec`: the limit that stopped the command (`memory`, `tasks`,
    /// `cpu`, `output`, `timeout` or `file_size`), when one did and sandgate
    /// saw it.
    pub limit: Option<String>,
}

/// The audit callback as the sandbox or executor holds it: weak (it never
/// keeps the process alive), called without an error argument.
pub(crate) type AuditFn =
    ThreadsafeFunction<AuditEvent, Unknown<'static>, AuditEvent, Status, false, true>;

/// Options of `new Sandbox(options)`. Nothing is granted unless given.
#[napi(object, object_to_js = false)]
pub struct SandboxOptions {
    /// Read roots, looked up in order (the first that holds a name wins).
    pub read_roots: Option<Vec<Utf16String>>,
    /// The one write root.
    pub write_root: Option<Utf16String>,
    /// Cap of one read in bytes (default 10 MiB).
    pub max_read_bytes: Option<f64>,
    /// Cap of one write in bytes (default 5 MiB).
    pub max_write_bytes: Option<f64>,
    /// The host's half of the overwrite rule (default false).
    pub allow_overwrite: Option<bool>,
    /// Deny-write patterns (docs/reference/deny-write.md).
    pub deny_write: Option<Vec<Utf16String>>,
    /// Restricted mode, which also protects every `.git` component
    /// (default true).
    pub restricted: Option<bool>,
    /// Most file operations allowed (default unlimited; 0: none).
    pub fs_ops: Option<f64>,
    /// Called with an `AuditEvent` after every operation, refused ones too.
    #[napi(ts_type = "(event: AuditEvent) => void")]
    pub audit: Option<AuditFn>,
}

/// The keys of [`SandboxOptions`] as JavaScript spells them.
const SANDBOX_OPTIONS: &[&str] = &[
    "readRoots",
    "writeRoot",
    "maxReadBytes",
    "maxWriteBytes",
    "allowOverwrite",
    "denyWrite",
    "restricted",
    "fsOps",
    "audit",
];

/// Options of `Sandbox.fromPolicy(policy, options)`.
#[napi(object, object_to_js = false)]
pub struct FromPolicyOptions {
    /// Called with an `AuditEvent` after every operation, refused ones too.
    #[napi(ts_type = "(event: AuditEvent) => void")]
    pub audit: Option<AuditFn>,
}

/// Options of `write`.
#[napi(object)]
pub struct WriteOptions {
    /// The call's half of the overwrite rule (default false).
    pub overwrite: Option<bool>,
}

/// Options of `hostName`.
#[napi(object)]
pub struct HostNameOptions {
    /// Map for a write-side operation: the path must lie in the write root
    /// (default false: in a read root).
    pub write: Option<bool>,
}

/// Options of `edit`.
#[napi(object)]
pub struct EditOptions {
    /// Replace every occurrence instead of exactly one (default false).
    pub all: Option<bool>,
}

/// A ranged read's answer.
#[napi(object)]
pub struct LinesResult {
    /// The lines served, with their line endings.
    pub content: Buffer,
    /// The first line asked for (1-based).
    pub offset: u32,
    /// How many lines were served.
    pub lines: u32,
    /// Lines in the whole file.
    pub total_lines: u32,
    /// Whether the byte cap cut the range short.
    pub truncated: bool,
}

/// One entry of a listing.
#[napi(object)]
pub struct ListEntry {
    /// The entry's name.
    pub name: String,
    /// `'file'`, `'dir'`, `'symlink'` or `'other'` (symlinks not followed).
    pub kind: String,
    /// Size in bytes.
    pub size: f64,
}

/// What `stat` answers.
#[napi(object)]
pub struct StatResult {
    /// `'file'`, `'dir'`, `'symlink'` or `'other'` (a final symlink beneath
    /// the root is followed).
    pub kind: String,
    /// Size in bytes.
    pub size: f64,
    /// Permission bits.
    pub mode: u32,
}

/// One grep hit.
#[napi(object)]
pub struct GrepMatch {
    /// Root-relative path of the file.
    pub path: String,
    /// 1-based line number.
    pub line: u32,
    /// The line without its ending (lossy UTF-8, at most 1000 bytes): its
    /// start, or the bytes from `textStart` on.
    pub text: String,
    /// Where `text` starts in the line, in bytes, when the line's first
    /// match ends past its first 1000 bytes (`text` then starts shortly
    /// before the match); absent when `text` starts the line.
    pub text_start: Option<u32>,
    /// The lines just before the match, oldest first (when `before` was
    /// asked for).
    pub before: Option<Vec<String>>,
    /// The lines just after the match (when `after` was asked for).
    pub after: Option<Vec<String>>,
    /// `true` when `text` is not the whole line; absent when whole.
    pub line_truncated: Option<bool>,
    /// The indices into `before` of the lines cut at 1000 bytes; absent
    /// when none was.
    pub before_truncated: Option<Vec<u32>>,
    /// The indices into `after` of the lines cut at 1000 bytes; absent
    /// when none was.
    pub after_truncated: Option<Vec<u32>>,
}

/// How many lines match in one file (grep mode `count`).
#[napi(object)]
pub struct GrepCount {
    /// Root-relative path of the file.
    pub path: String,
    /// Matching lines in it.
    pub count: u32,
}

/// What else a grep may be asked.
#[napi(object)]
#[derive(Default)]
pub struct GrepOptions {
    /// Only files matching this glob: without `/` against the file's name
    /// (`*.ts`), with `/` against its path below the search base.
    pub glob: Option<Utf16String>,
    /// Match letters in either case.
    pub case_insensitive: Option<bool>,
    /// Context lines before each match (mode `lines` only).
    pub before: Option<f64>,
    /// Context lines after each match (mode `lines` only).
    pub after: Option<f64>,
    /// `lines` (default: an array of GrepMatch), `files` (an array of
    /// paths) or `count` (an array of GrepCount).
    pub mode: Option<String>,
    /// Skip what `.gitignore` and `.ignore` files inside the root exclude.
    pub gitignore: Option<bool>,
}

/// A grep's answer, by mode.
type GrepAnswer = Either3<Vec<GrepMatch>, Vec<String>, Vec<GrepCount>>;

/// What `globFound` answers: the paths, and whether a cap cut them.
#[napi(object)]
pub struct GlobFound {
    /// Root-relative paths, sorted by name.
    pub paths: Vec<String>,
    /// Whether the answer was cut.
    pub truncated: bool,
    /// The cap that cut it: `max_results` (more paths match than the 1,000
    /// answered, the first the walk met), `walk_entries` (the walk
    /// stopped at its 200,000 entries) or `path_length` (a directory whose
    /// path is 4,096 bytes or longer was not entered); absent when whole.
    pub limit: Option<String>,
    /// How many subdirectories the walk could not list, and entries whose
    /// names are not UTF-8, and so passed over (0 when none).
    pub unreadable: u32,
}

/// What `grepFound` answers: the results under `matches`, `files` or
/// `counts` by mode, and whether a cap cut them.
#[napi(object)]
pub struct GrepFound {
    /// Mode `lines`: the matching lines.
    pub matches: Option<Vec<GrepMatch>>,
    /// Mode `files`: the paths of files with a match.
    pub files: Option<Vec<String>>,
    /// Mode `count`: matching lines per file.
    pub counts: Option<Vec<GrepCount>>,
    /// Whether the answer was cut.
    pub truncated: bool,
    /// The cap that cut it: `max_results` (more matched than `maxResults`;
    /// an answer of exactly `maxResults` is whole), `walk_entries` (the
    /// walk stopped at its 200,000 entries), `max_read_bytes` (a file
    /// larger than `maxReadBytes` was passed over without being searched),
    /// `path_length` (a directory whose path is 4,096 bytes or longer
    /// was not entered) or `answer_bytes` (the matches and their context
    /// lines, each with its path, reached `maxReadBytes`);
    /// absent when whole.
    pub limit: Option<String>,
    /// How many files grep could not open or read to the end,
    /// subdirectories it could not list, and entries whose names are not
    /// UTF-8, and so passed over (0 when none).
    pub unreadable: u32,
    /// How many files grep passed over unsearched as binary (a NUL in
    /// their first 8 KiB; 0 when none).
    pub binary: u32,
}

fn glob_found(_: &Env, f: sandgate::search::Found<Vec<String>>) -> napi::Result<GlobFound> {
    Ok(GlobFound {
        paths: f.results,
        truncated: f.cut.is_some(),
        limit: f.cut.map(|c| c.as_str().to_owned()),
        unreadable: sat_u32(f.unreadable),
    })
}

fn grep_found(
    env: &Env,
    (f, context): (sandgate::search::Found<sandgate::search::GrepOutput>, bool),
) -> napi::Result<GrepFound> {
    let mut out = GrepFound {
        matches: None,
        files: None,
        counts: None,
        truncated: f.cut.is_some(),
        limit: f.cut.map(|c| c.as_str().to_owned()),
        unreadable: sat_u32(f.unreadable),
        binary: sat_u32(f.binary),
    };
    match grep_answer(env, (f.results, context))? {
        Either3::A(m) => out.matches = Some(m),
        Either3::B(p) => out.files = Some(p),
        Either3::C(c) => out.counts = Some(c),
    }
    Ok(out)
}

/// The facade's options from the binding's, with the result cap.
fn grep_options(
    max_results: Option<f64>,
    o: Option<GrepOptions>,
) -> Result<(sandgate::search::GrepOptions, bool), sandgate::Error> {
    let o = o.unwrap_or_default();
    let mut opts = sandgate::search::GrepOptions::default();
    opts.max_results = max_results.map(|n| to_usize(n, "maxResults")).transpose()?;
    opts.glob = utf8_opt(o.glob, "glob")?;
    opts.case_insensitive = o.case_insensitive.unwrap_or(false);
    opts.before = o.before.map_or(Ok(0), |n| to_usize(n, "before"))?;
    opts.after = o.after.map_or(Ok(0), |n| to_usize(n, "after"))?;
    opts.gitignore = o.gitignore.unwrap_or(false);
    if let Some(mode) = o.mode {
        opts.mode = mode.parse()?;
    }
    if opts.mode != sandgate::search::GrepMode::Lines && (opts.before > 0 || opts.after > 0) {
        return Err(sandgate::Error::new(
            sandgate::ErrorCode::Request,
            "`before` and `after` apply to mode `lines` only",
        ));
    }
    let context = opts.before > 0 || opts.after > 0;
    Ok((opts, context))
}

fn grep_answer(
    _: &Env,
    (out, context): (sandgate::search::GrepOutput, bool),
) -> napi::Result<GrepAnswer> {
    use sandgate::search::GrepOutput;
    Ok(match out {
        GrepOutput::Lines(v) => Either3::A(
            v.into_iter()
                .map(|m| {
                    let cut = |v: Vec<usize>| {
                        (!v.is_empty()).then(|| v.into_iter().map(sat_u32).collect())
                    };
                    let line_truncated = m.line_truncated().then_some(true);
                    GrepMatch {
                        path: m.path,
                        line: sat_u32(m.line),
                        text: m.text,
                        text_start: (m.text_start > 0).then(|| sat_u32(m.text_start)),
                        before: context.then_some(m.before),
                        after: context.then_some(m.after),
                        line_truncated,
                        before_truncated: cut(m.before_cut),
                        after_truncated: cut(m.after_cut),
                    }
                })
                .collect(),
        ),
        GrepOutput::Files(v) => Either3::B(v),
        GrepOutput::Counts(v) => Either3::C(
            v.into_iter()
                .map(|(path, n)| GrepCount {
                    path,
                    count: sat_u32(n),
                })
                .collect(),
        ),
    })
}

fn sat_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn lines_result(_: &Env, r: sandgate::LinesRead) -> napi::Result<LinesResult> {
    Ok(LinesResult {
        content: r.content.into(),
        offset: sat_u32(r.offset),
        lines: sat_u32(r.lines),
        total_lines: sat_u32(r.total_lines),
        truncated: r.truncated,
    })
}

fn list_result(_: &Env, v: Vec<sandgate::ListEntry>) -> napi::Result<Vec<ListEntry>> {
    Ok(v.into_iter()
        .map(|e| ListEntry {
            name: e.name,
            kind: e.kind.as_str().to_owned(),
            size: e.size as f64,
        })
        .collect())
}

fn stat_result(_: &Env, s: sandgate::StatInfo) -> napi::Result<StatResult> {
    Ok(StatResult {
        kind: s.kind.as_str().to_owned(),
        size: s.size as f64,
        mode: s.mode,
    })
}

fn buffer(_: &Env, v: Vec<u8>) -> napi::Result<Buffer> {
    Ok(v.into())
}

fn text(_: &Env, v: Vec<u8>) -> napi::Result<String> {
    Ok(String::from_utf8_lossy(&v).into_owned())
}

fn number(_: &Env, n: u64) -> napi::Result<f64> {
    Ok(n as f64)
}

fn count(_: &Env, n: usize) -> napi::Result<u32> {
    Ok(sat_u32(n))
}

pub(crate) fn audit_sink(f: AuditFn) -> impl Fn(&sandgate::AuditEvent) + Send + Sync + 'static {
    move |ev: &sandgate::AuditEvent| {
        let time = ev
            .time
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or(0.0);
        let _ = f.call(
            AuditEvent {
                op: ev.op.to_owned(),
                path: ev.path.clone(),
                size: ev.size.map(|s| s as f64),
                time,
                outcome: ev.outcome.as_str().to_owned(),
                exit_code: ev.exit_code,
                limit: ev.limit.map(str::to_owned),
            },
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    }
}

// The arguments are taken as JavaScript values and converted by the
// `*_arg` helpers (lib.rs): a wrong type or a missing argument is
// `E_REQUEST` naming it, and a lone surrogate too. The `…Async` twins
// convert on the main thread and reject with the same error. Either way
// the refusal is reported to the audit callback ([`Sandbox::audited`]),
// as the sandbox reports its own.

/// How an audit event shows a name argument the binding refused, as C
/// shows one it cannot take as text: the string as given, each lone
/// surrogate as U+FFFD; `absent` for `undefined`, `null` or no argument
/// (`''`, or `'.'` for a search's base, as the sandbox shows one); `''`
/// for a value that is not a string.
fn shown(v: Option<Unknown<'_>>, absent: &str) -> String {
    match v.filter(|v| !is_nullish(v)) {
        None => absent.to_owned(),
        Some(v) => wide_arg(v, "").map_or_else(|_| String::new(), |w| String::from_utf16_lossy(&w)),
    }
}

/// The `refused` of an abortable job ([`Job::abortable`]): a signal
/// aborted before the call started (`E_ABORTED`), or one that is not an
/// `AbortSignal` (`E_REQUEST`), is reported as `op` on `path` (the
/// arguments were well formed), as C reports it, and names `path`.
fn signal_refused(
    sb: &Arc<sandgate::Sandbox>,
    op: &'static str,
) -> impl FnOnce(&str, sandgate::Error) -> sandgate::Error + Send + 'static {
    let sb = Arc::clone(sb);
    move |path, e| sb.audit_refusal(op, path, e.with_path(path))
}

/// `edit`'s strings as UTF-8.
fn edit_args(
    path: Unknown<'_>,
    old_text: Unknown<'_>,
    new_text: Unknown<'_>,
) -> Result<(String, String, String), sandgate::Error> {
    Ok((
        str_arg(path, "path")?,
        str_arg(old_text, "oldText")?,
        str_arg(new_text, "newText")?,
    ))
}

/// `write`'s name, content and `overwrite`.
type WriteArgs = (String, Vec<u8>, bool);

/// `write`'s name, content and `overwrite`, in the order they are
/// checked (the outer error: a JavaScript exception reading the options).
fn write_args(
    env: &Env,
    path: Unknown<'_>,
    data: Unknown<'_>,
    options: Option<Unknown<'_>>,
) -> napi::Result<Result<WriteArgs, sandgate::Error>> {
    let args = str_arg(path, "path").and_then(|p| Ok((p, data_arg(data, "data")?)));
    let overwrite = overwrite_of(env, options)?;
    Ok(args.and_then(|(p, d)| Ok((p, d, overwrite?))))
}

/// How an audit event shows `rename`'s names (`from -> to`, as the
/// sandbox shows them), each as [`shown`].
fn shown_rename(from: Unknown<'_>, to: Unknown<'_>) -> String {
    format!("{} -> {}", shown(Some(from), ""), shown(Some(to), ""))
}

/// `rename`'s names as UTF-8.
fn rename_args(from: Unknown<'_>, to: Unknown<'_>) -> Result<(String, String), sandgate::Error> {
    Ok((str_arg(from, "from")?, str_arg(to, "to")?))
}

/// A search's pattern and base as UTF-8.
fn pattern_args(
    pattern: Unknown<'_>,
    path: Option<Unknown<'_>>,
) -> Result<(String, Option<String>), sandgate::Error> {
    Ok((str_arg(pattern, "pattern")?, opt_str_arg(path, "path")?))
}

/// The pattern, base path, options and whether context was asked for, as
/// `grep`, `grepFound` and their async forms take them (`known`: the keys
/// of the options object, `abortSignal` too for the async forms, which
/// read it with [`Abort::of_options`]).
type GrepArgs = (String, Option<String>, sandgate::search::GrepOptions, bool);

/// Reads the arguments of `grep`, `grepFound` and their async forms on the
/// main thread, the one place they are unpacked: a malformed one is the
/// inner error, which the sync forms throw and the async ones reject
/// with; the outer error is a JavaScript exception reading the options
/// object raised.
/// The arguments of an `…Async` grep as JavaScript passes them: pattern,
/// path, maxResults, options.
type GrepJsArgs<'a> = (
    Unknown<'a>,
    Option<Unknown<'a>>,
    Option<Unknown<'a>>,
    Option<Unknown<'a>>,
);

/// An `…Async` grep on the libuv pool: `run` (a [`sandgate::Sandbox`]
/// grep) with the options' `abortSignal` stopping it, its answer
/// converted by `convert`.
fn grep_job<R: Send + 'static, T>(
    this: &Sandbox,
    env: &Env,
    (pattern, path, max_results, options): GrepJsArgs<'_>,
    run: fn(
        &sandgate::Sandbox,
        &str,
        Option<&str>,
        &sandgate::search::GrepOptions,
    ) -> Result<R, sandgate::Error>,
    convert: fn(&Env, (R, bool)) -> napi::Result<T>,
) -> napi::Result<AsyncTask<Job<(R, bool), T>>>
where
    Job<(R, bool), T>: napi::Task,
{
    let sb = Arc::clone(&this.inner);
    let args = grep_args(env, pattern, path, max_results, options, GREP_ASYNC_OPTIONS)?;
    let abort = Abort::of_options(env, options)?;
    let args = this.audited("grep", || shown(path, "."), args);
    let refused = signal_refused(&this.inner, "grep");
    Ok(AsyncTask::new(Job::abortable(
        abort,
        args,
        move |(_, path, _, _), e| refused(path.as_deref().unwrap_or("."), e),
        move |(pattern, path, mut opts, context), cancel| {
            opts.cancel = Some(cancel);
            Ok((run(&sb, &pattern, path.as_deref(), &opts)?, context))
        },
        convert,
    )))
}

fn grep_args(
    env: &Env,
    pattern: Unknown<'_>,
    path: Option<Unknown<'_>>,
    max_results: Option<Unknown<'_>>,
    options: Option<Unknown<'_>>,
    known: &[&str],
) -> napi::Result<Result<GrepArgs, sandgate::Error>> {
    let args = pattern_args(pattern, path);
    let max_results = opt_num_arg(max_results, "maxResults");
    let options = options_of(env, options, "options", known)?;
    Ok(args.and_then(|(pattern, path)| {
        let (opts, context) = grep_options(max_results?, options?)?;
        Ok((pattern, path, opts, context))
    }))
}

fn write_options(overwrite: bool) -> sandgate::WriteOptions {
    sandgate::WriteOptions::default().overwrite(overwrite)
}

fn edit_options(all: bool) -> sandgate::EditOptions {
    sandgate::EditOptions::default().replace_all(all)
}

/// The keys of each smaller options object as JavaScript spells them: an
/// unknown key is `E_REQUEST` ([`options_of`]), as for the constructor's.
const WRITE_OPTIONS: &[&str] = &["overwrite"];
const HOST_NAME_OPTIONS: &[&str] = &["write"];
const EDIT_OPTIONS: &[&str] = &["all"];
const GREP_OPTIONS: &[&str] = &[
    "glob",
    "caseInsensitive",
    "before",
    "after",
    "mode",
    "gitignore",
];
/// [`GREP_OPTIONS`] and the async forms' `abortSignal`.
const GREP_ASYNC_OPTIONS: &[&str] = &[
    "glob",
    "caseInsensitive",
    "before",
    "after",
    "mode",
    "gitignore",
    ABORT_SIGNAL,
];
const FROM_POLICY_OPTIONS: &[&str] = &["audit"];

/// `write`'s `overwrite` from its options.
fn overwrite_of(
    env: &Env,
    options: Option<Unknown<'_>>,
) -> napi::Result<Result<bool, sandgate::Error>> {
    Ok(
        options_of::<WriteOptions>(env, options, "options", WRITE_OPTIONS)?
            .map(|o| o.and_then(|o| o.overwrite).unwrap_or(false)),
    )
}

/// `edit`'s `all` from its options.
fn all_of(env: &Env, options: Option<Unknown<'_>>) -> napi::Result<Result<bool, sandgate::Error>> {
    Ok(
        options_of::<EditOptions>(env, options, "options", EDIT_OPTIONS)?
            .map(|o| o.and_then(|o| o.all).unwrap_or(false)),
    )
}

fn range(
    offset: Option<Unknown<'_>>,
    limit: Option<Unknown<'_>>,
) -> Result<(usize, usize), sandgate::Error> {
    let (offset, limit) = (opt_num_arg(offset, "offset")?, opt_num_arg(limit, "limit")?);
    Ok((
        offset.map_or(Ok(1), |o| to_usize(o, "offset"))?,
        limit.map_or(Ok(sandgate::MAX_RANGE_LINES), |l| to_usize(l, "limit"))?,
    ))
}

/// The confined file toolkit handed to an agent (docs/reference/sandbox.md).
///
/// Names are root-relative agent-facing names (docs/reference/names.md): `..`, absolute
/// paths and backslashes are refused with `E_PATH_INVALID`. Audit events
/// are delivered to the `audit` callback on the main thread, in order, on a
/// later turn of the event loop than the operation (for a `…Async` call,
/// possibly after its promise settles).
#[napi]
pub struct Sandbox {
    inner: Arc<sandgate::Sandbox>,
}

impl Sandbox {
    /// The one place where a call this binding refuses before the sandbox
    /// sees it (`args`, its arguments converted) is reported as the
    /// sandbox reports its own refusals ([`sandgate::Sandbox::audit_refusal`],
    /// which C's boundary uses too): one audit event, `op` on `shown` (the
    /// name as given, [`shown`]), outcome the refusal's code, no budget
    /// spent; on a closed sandbox the refusal is `E_CLOSED`, as every call
    /// then is. The sync forms throw what it answers, the `…Async` ones
    /// reject with it.
    fn audited<T>(
        &self,
        op: &'static str,
        shown: impl FnOnce() -> String,
        args: Result<T, sandgate::Error>,
    ) -> Result<T, sandgate::Error> {
        args.map_err(|e| self.inner.audit_refusal(op, &shown(), e))
    }
}

#[napi]
impl Sandbox {
    /// A sandbox with exactly what `options` grants (nothing by default).
    #[napi(constructor)]
    pub fn new(
        env: &Env,
        #[napi(ts_arg_type = "SandboxOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<Self> {
        let options: Option<SandboxOptions> =
            options_of(env, options, "options", SANDBOX_OPTIONS)?.or_throw(env)?;
        let mut b = sandgate::Sandbox::builder();
        if let Some(o) = options {
            if let Some(r) = o.read_roots {
                b.read_roots(utf8_vec(r, "readRoots").or_throw(env)?);
            }
            if let Some(w) = o.write_root {
                b.write_root(utf8(&w, "writeRoot").or_throw(env)?);
            }
            if let Some(n) = o.max_read_bytes {
                b.max_read_bytes(to_count(n, "maxReadBytes").or_throw(env)?);
            }
            if let Some(n) = o.max_write_bytes {
                b.max_write_bytes(to_count(n, "maxWriteBytes").or_throw(env)?);
            }
            if let Some(on) = o.allow_overwrite {
                b.allow_overwrite(on);
            }
            if let Some(p) = o.deny_write {
                b.deny_write_patterns(utf8_vec(p, "denyWrite").or_throw(env)?);
            }
            if let Some(on) = o.restricted {
                b.restricted(on);
            }
            if let Some(n) = o.fs_ops {
                b.fs_ops_budget(Some(to_count(n, "fsOps").or_throw(env)?));
            }
            if let Some(f) = o.audit {
                b.audit(audit_sink(f));
            }
        }
        let inner = b.build().or_throw(env)?;
        Ok(Sandbox {
            inner: Arc::new(inner),
        })
    }

    /// The sandbox `policy` grants for files (roots, caps, overwrite switch,
    /// deny patterns, mode, `fs_ops` budget), with an optional audit
    /// callback. Throws `E_POLICY` (with `key`) for a pattern it refuses.
    #[napi(factory)]
    pub fn from_policy(
        env: &Env,
        #[napi(ts_arg_type = "Policy")] policy: Unknown<'_>,
        #[napi(ts_arg_type = "FromPolicyOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<Sandbox> {
        let policy = class_arg::<Policy>(&policy, "policy", "Policy").or_throw(env)?;
        let options: Option<FromPolicyOptions> =
            options_of(env, options, "options", FROM_POLICY_OPTIONS)?.or_throw(env)?;
        let mut b = sandgate::SandboxBuilder::from_policy(&policy.inner);
        if let Some(f) = options.and_then(|o| o.audit) {
            b.audit(audit_sink(f));
        }
        let inner = b.build().or_throw(env)?;
        Ok(Sandbox {
            inner: Arc::new(inner),
        })
    }

    /// Releases the roots; later calls throw `E_CLOSED` (calls already
    /// running finish first).
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }

    /// Whether `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Malformed deny-pattern components that were treated as `*`.
    #[napi(getter)]
    pub fn warnings(&self) -> Vec<String> {
        self.inner.warnings()
    }

    /// File operations left in the budget (`null`: unlimited).
    #[napi(getter)]
    pub fn fs_ops_remaining(&self) -> Option<f64> {
        self.inner.fs_ops_remaining().map(|n| n as f64)
    }

    /// The root-relative name of a path the host gives: an absolute host
    /// path inside a read root (with `{ write: true }`: inside the write
    /// root) is compared with the root component by component, as the root
    /// was spelled and as its symlinks resolve, never by string prefix
    /// (`/srv/app-secrets` is not inside `/srv/app`); a relative name is
    /// returned as given. Throws `E_PATH_INVALID` for a path holding a NUL
    /// byte (it names no file), `E_PATH_ESCAPE` for an absolute path
    /// outside every root, `E_DENIED` for one in a root of the other kind.
    /// Agent-supplied names never need this.
    #[napi]
    pub fn host_name(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
        #[napi(ts_arg_type = "HostNameOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<String> {
        let path = str_arg(path, "path").or_throw(env)?;
        let options: Option<HostNameOptions> =
            options_of(env, options, "options", HOST_NAME_OPTIONS)?.or_throw(env)?;
        if options.and_then(|o| o.write).unwrap_or(false) {
            self.inner.host_write_name(&path).or_throw(env)
        } else {
            self.inner.host_read_name(&path).or_throw(env)
        }
    }

    // ----- read -----

    /// Reads a whole file (first read root that holds it). Over
    /// `maxReadBytes`: `E_TOO_LARGE` (read by line ranges instead).
    #[napi]
    pub fn read(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<Buffer> {
        let path = self
            .audited("read", || shown(Some(path), ""), str_arg(path, "path"))
            .or_throw(env)?;
        self.inner.read(&path).map(Buffer::from).or_throw(env)
    }

    /// `read`, off the main thread.
    #[napi(ts_return_type = "Promise<Buffer>")]
    pub fn read_async(
        &self,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> AsyncTask<Job<Vec<u8>, Buffer>> {
        let sb = Arc::clone(&self.inner);
        let path = self.audited("read", || shown(Some(path), ""), str_arg(path, "path"));
        AsyncTask::new(Job::new(
            move || {
                let path = path?;
                sb.read(&path)
            },
            buffer,
        ))
    }

    /// `read`, decoded as UTF-8 (invalid sequences become U+FFFD, as with
    /// `buffer.toString()`).
    #[napi]
    pub fn read_text(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<String> {
        let path = self
            .audited("read", || shown(Some(path), ""), str_arg(path, "path"))
            .or_throw(env)?;
        self.inner
            .read(&path)
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .or_throw(env)
    }

    /// `readText`, off the main thread.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn read_text_async(
        &self,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> AsyncTask<Job<Vec<u8>, String>> {
        let sb = Arc::clone(&self.inner);
        let path = self.audited("read", || shown(Some(path), ""), str_arg(path, "path"));
        AsyncTask::new(Job::new(
            move || {
                let path = path?;
                sb.read(&path)
            },
            text,
        ))
    }

    /// Reads `limit` lines (default and most 2000) from line `offset`
    /// (1-based, default 1), cut at a whole line under `maxReadBytes`.
    #[napi]
    pub fn read_lines(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
        #[napi(ts_arg_type = "number | undefined | null")] offset: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "number | undefined | null")] limit: Option<Unknown<'_>>,
    ) -> napi::Result<LinesResult> {
        let args = str_arg(path, "path").and_then(|p| Ok((p, range(offset, limit)?)));
        let (path, (o, l)) = self
            .audited("read", || shown(Some(path), ""), args)
            .or_throw(env)?;
        let r = self.inner.read_lines(&path, o, l).or_throw(env)?;
        lines_result(env, r)
    }

    /// `readLines`, off the main thread; aborting `options.abortSignal`
    /// stops it (`E_ABORTED`).
    #[napi(ts_return_type = "Promise<LinesResult>")]
    pub fn read_lines_async(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
        #[napi(ts_arg_type = "number | undefined | null")] offset: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "number | undefined | null")] limit: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "AbortOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<AsyncTask<Job<sandgate::LinesRead, LinesResult>>> {
        let sb = Arc::clone(&self.inner);
        let args = str_arg(path, "path").and_then(|p| Ok((p, range(offset, limit)?)));
        let abort = abort_arg(env, options)?;
        let args = self.audited("read", || shown(Some(path), ""), args);
        let refused = signal_refused(&self.inner, "read");
        Ok(AsyncTask::new(Job::abortable(
            abort,
            args,
            move |(path, _), e| refused(path, e),
            move |(path, (o, l)), cancel| sb.read_lines_cancellable(&path, o, l, &cancel),
            lines_result,
        )))
    }

    // ----- write and edit -----

    /// Writes `data` (a string is written as UTF-8) atomically and durably;
    /// creates exclusively unless `overwrite` is true and the sandbox allows
    /// overwriting. Returns the bytes written.
    #[napi]
    pub fn write(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
        #[napi(ts_arg_type = "string | Buffer")] data: Unknown<'_>,
        #[napi(ts_arg_type = "WriteOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<f64> {
        let args = write_args(env, path, data, options)?;
        let (name, data, overwrite) = self
            .audited("write", || shown(Some(path), ""), args)
            .or_throw(env)?;
        self.inner
            .write(&name, &data, write_options(overwrite))
            .map(|n| n as f64)
            .or_throw(env)
    }

    /// `write`, off the main thread (a Buffer is copied first).
    #[napi(ts_return_type = "Promise<number>")]
    pub fn write_async(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
        #[napi(ts_arg_type = "string | Buffer")] data: Unknown<'_>,
        #[napi(ts_arg_type = "WriteOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<AsyncTask<Job<u64, f64>>> {
        let sb = Arc::clone(&self.inner);
        let args = write_args(env, path, data, options)?;
        let args = self.audited("write", || shown(Some(path), ""), args);
        Ok(AsyncTask::new(Job::new(
            move || {
                let (path, data, overwrite) = args?;
                sb.write(&path, &data, write_options(overwrite))
            },
            number,
        )))
    }

    /// Replaces the exact string `oldText` by `newText`: it must occur exactly once
    /// unless `all` (`E_EDIT_NO_MATCH`, `E_EDIT_AMBIGUOUS`). Returns the
    /// number of replacements.
    #[napi]
    pub fn edit(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
        #[napi(ts_arg_type = "string")] old_text: Unknown<'_>,
        #[napi(ts_arg_type = "string")] new_text: Unknown<'_>,
        #[napi(ts_arg_type = "EditOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<u32> {
        let args = edit_args(path, old_text, new_text);
        let all = all_of(env, options)?;
        let ((name, old_text, new_text), all) = self
            .audited(
                "edit",
                || shown(Some(path), ""),
                args.and_then(|a| Ok((a, all?))),
            )
            .or_throw(env)?;
        self.inner
            .edit(&name, &old_text, &new_text, edit_options(all))
            .map(sat_u32)
            .or_throw(env)
    }

    /// `edit`, off the main thread.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn edit_async(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
        #[napi(ts_arg_type = "string")] old_text: Unknown<'_>,
        #[napi(ts_arg_type = "string")] new_text: Unknown<'_>,
        #[napi(ts_arg_type = "EditOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<AsyncTask<Job<usize, u32>>> {
        let sb = Arc::clone(&self.inner);
        let args = edit_args(path, old_text, new_text);
        let all = all_of(env, options)?;
        let args = self.audited(
            "edit",
            || shown(Some(path), ""),
            args.and_then(|a| Ok((a, all?))),
        );
        Ok(AsyncTask::new(Job::new(
            move || {
                let ((path, old_text, new_text), all) = args?;
                sb.edit(&path, &old_text, &new_text, edit_options(all))
            },
            count,
        )))
    }

    // ----- list and stat -----

    /// The entries of a directory, sorted by name.
    #[napi]
    pub fn list(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<Vec<ListEntry>> {
        let path = self
            .audited("list", || shown(Some(path), ""), str_arg(path, "path"))
            .or_throw(env)?;
        let v = self.inner.list(&path).or_throw(env)?;
        list_result(env, v)
    }

    /// `list`, off the main thread.
    #[napi(ts_return_type = "Promise<Array<ListEntry>>")]
    pub fn list_async(
        &self,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> AsyncTask<Job<Vec<sandgate::ListEntry>, Vec<ListEntry>>> {
        let sb = Arc::clone(&self.inner);
        let path = self.audited("list", || shown(Some(path), ""), str_arg(path, "path"));
        AsyncTask::new(Job::new(
            move || {
                let path = path?;
                sb.list(&path)
            },
            list_result,
        ))
    }

    /// Kind, size and permission bits.
    #[napi]
    pub fn stat(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<StatResult> {
        let path = self
            .audited("stat", || shown(Some(path), ""), str_arg(path, "path"))
            .or_throw(env)?;
        let s = self.inner.stat(&path).or_throw(env)?;
        stat_result(env, s)
    }

    /// `stat`, off the main thread.
    #[napi(ts_return_type = "Promise<StatResult>")]
    pub fn stat_async(
        &self,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> AsyncTask<Job<sandgate::StatInfo, StatResult>> {
        let sb = Arc::clone(&self.inner);
        let path = self.audited("stat", || shown(Some(path), ""), str_arg(path, "path"));
        AsyncTask::new(Job::new(
            move || {
                let path = path?;
                sb.stat(&path)
            },
            stat_result,
        ))
    }

    // ----- mkdir, delete, rename -----

    /// Creates a directory (and missing parents) below the write root.
    #[napi]
    pub fn mkdir(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<()> {
        let path = self
            .audited("mkdir", || shown(Some(path), ""), str_arg(path, "path"))
            .or_throw(env)?;
        self.inner.mkdir(&path).or_throw(env)
    }

    /// `mkdir`, off the main thread.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn mkdir_async(
        &self,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> AsyncTask<Job<(), ()>> {
        let sb = Arc::clone(&self.inner);
        let path = self.audited("mkdir", || shown(Some(path), ""), str_arg(path, "path"));
        AsyncTask::new(Job::new(
            move || {
                let path = path?;
                sb.mkdir(&path)
            },
            same,
        ))
    }

    /// Removes one file, one symlink entry or one empty directory.
    #[napi]
    pub fn delete(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> napi::Result<()> {
        let path = self
            .audited("delete", || shown(Some(path), ""), str_arg(path, "path"))
            .or_throw(env)?;
        self.inner.delete(&path).or_throw(env)
    }

    /// `delete`, off the main thread.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete_async(
        &self,
        #[napi(ts_arg_type = "string")] path: Unknown<'_>,
    ) -> AsyncTask<Job<(), ()>> {
        let sb = Arc::clone(&self.inner);
        let path = self.audited("delete", || shown(Some(path), ""), str_arg(path, "path"));
        AsyncTask::new(Job::new(
            move || {
                let path = path?;
                sb.delete(&path)
            },
            same,
        ))
    }

    /// Moves `from` to `to` within the write root.
    #[napi]
    pub fn rename(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] from: Unknown<'_>,
        #[napi(ts_arg_type = "string")] to: Unknown<'_>,
    ) -> napi::Result<()> {
        let (from, to) = self
            .audited("rename", || shown_rename(from, to), rename_args(from, to))
            .or_throw(env)?;
        self.inner.rename(&from, &to).or_throw(env)
    }

    /// `rename`, off the main thread.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn rename_async(
        &self,
        #[napi(ts_arg_type = "string")] from: Unknown<'_>,
        #[napi(ts_arg_type = "string")] to: Unknown<'_>,
    ) -> AsyncTask<Job<(), ()>> {
        let sb = Arc::clone(&self.inner);
        let args = self.audited("rename", || shown_rename(from, to), rename_args(from, to));
        AsyncTask::new(Job::new(
            move || {
                let (from, to) = args?;
                sb.rename(&from, &to)
            },
            same,
        ))
    }

    // ----- glob and grep -----

    /// Paths matching a glob below `path` (default: the root) in every read
    /// root, sorted, capped; symlinks are never followed.
    #[napi]
    pub fn glob(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] pattern: Unknown<'_>,
        #[napi(ts_arg_type = "string | undefined | null")] path: Option<Unknown<'_>>,
    ) -> napi::Result<Vec<String>> {
        let (pattern, base) = self
            .audited("glob", || shown(path, "."), pattern_args(pattern, path))
            .or_throw(env)?;
        self.inner.glob(&pattern, base.as_deref()).or_throw(env)
    }

    /// `glob`, off the main thread; aborting `options.abortSignal` stops
    /// it (`E_ABORTED`).
    #[napi(ts_return_type = "Promise<Array<string>>")]
    pub fn glob_async(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] pattern: Unknown<'_>,
        #[napi(ts_arg_type = "string | undefined | null")] path: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "AbortOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<AsyncTask<Job<Vec<String>, Vec<String>>>> {
        let sb = Arc::clone(&self.inner);
        let args = pattern_args(pattern, path);
        let abort = abort_arg(env, options)?;
        let args = self.audited("glob", || shown(path, "."), args);
        let refused = signal_refused(&self.inner, "glob");
        Ok(AsyncTask::new(Job::abortable(
            abort,
            args,
            move |(_, path), e| refused(path.as_deref().unwrap_or("."), e),
            move |(pattern, path), cancel| {
                sb.glob_found_cancellable(&pattern, path.as_deref(), &cancel)
                    .map(|f| f.results)
            },
            same,
        )))
    }

    /// Searches files below `path` (default: the root) for a regular
    /// expression, answering at most `maxResults` results (default 100, at
    /// most 1000). `options` adds an include glob, case-insensitive
    /// matching, context lines, the mode (`lines`: GrepMatch objects,
    /// `files`: paths, `count`: GrepCount objects) and `.gitignore`
    /// filtering. Symbolic links are never followed.
    #[napi(ts_return_type = "Array<GrepMatch> | Array<string> | Array<GrepCount>")]
    pub fn grep(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] pattern: Unknown<'_>,
        #[napi(ts_arg_type = "string | undefined | null")] path: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "number | undefined | null")] max_results: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "GrepOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<GrepAnswer> {
        let args = grep_args(env, pattern, path, max_results, options, GREP_OPTIONS)?;
        let (pattern, base, opts, context) = self
            .audited("grep", || shown(path, "."), args)
            .or_throw(env)?;
        let out = self
            .inner
            .grep_with(&pattern, base.as_deref(), &opts)
            .or_throw(env)?;
        grep_answer(env, (out, context))
    }

    /// `glob`, also saying whether a cap cut the answer.
    #[napi]
    pub fn glob_found(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] pattern: Unknown<'_>,
        #[napi(ts_arg_type = "string | undefined | null")] path: Option<Unknown<'_>>,
    ) -> napi::Result<GlobFound> {
        let (pattern, base) = self
            .audited("glob", || shown(path, "."), pattern_args(pattern, path))
            .or_throw(env)?;
        let found = self
            .inner
            .glob_found(&pattern, base.as_deref())
            .or_throw(env)?;
        glob_found(env, found)
    }

    /// `globFound`, off the main thread; aborting `options.abortSignal`
    /// stops it (`E_ABORTED`).
    #[napi(ts_return_type = "Promise<GlobFound>")]
    pub fn glob_found_async(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] pattern: Unknown<'_>,
        #[napi(ts_arg_type = "string | undefined | null")] path: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "AbortOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<AsyncTask<Job<sandgate::search::Found<Vec<String>>, GlobFound>>> {
        let sb = Arc::clone(&self.inner);
        let args = pattern_args(pattern, path);
        let abort = abort_arg(env, options)?;
        let args = self.audited("glob", || shown(path, "."), args);
        let refused = signal_refused(&self.inner, "glob");
        Ok(AsyncTask::new(Job::abortable(
            abort,
            args,
            move |(_, path), e| refused(path.as_deref().unwrap_or("."), e),
            move |(pattern, path), cancel| {
                sb.glob_found_cancellable(&pattern, path.as_deref(), &cancel)
            },
            glob_found,
        )))
    }

    /// `grep`, also saying whether a cap cut the answer: the results under
    /// `matches`, `files` or `counts` by mode, with `truncated` and `limit`.
    #[napi]
    pub fn grep_found(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] pattern: Unknown<'_>,
        #[napi(ts_arg_type = "string | undefined | null")] path: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "number | undefined | null")] max_results: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "GrepOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> napi::Result<GrepFound> {
        let args = grep_args(env, pattern, path, max_results, options, GREP_OPTIONS)?;
        let (pattern, base, opts, context) = self
            .audited("grep", || shown(path, "."), args)
            .or_throw(env)?;
        let found = self
            .inner
            .grep_found(&pattern, base.as_deref(), &opts)
            .or_throw(env)?;
        grep_found(env, (found, context))
    }

    /// `grepFound`, off the main thread; aborting `options.abortSignal`
    /// stops it (`E_ABORTED`).
    #[napi(ts_return_type = "Promise<GrepFound>")]
    #[allow(clippy::type_complexity)]
    pub fn grep_found_async(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] pattern: Unknown<'_>,
        #[napi(ts_arg_type = "string | undefined | null")] path: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "number | undefined | null")] max_results: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "(GrepOptions & AbortOptions) | undefined | null")] options: Option<
            Unknown<'_>,
        >,
    ) -> napi::Result<
        AsyncTask<Job<(sandgate::search::Found<sandgate::search::GrepOutput>, bool), GrepFound>>,
    > {
        let run = sandgate::Sandbox::grep_found;
        grep_job(
            self,
            env,
            (pattern, path, max_results, options),
            run,
            grep_found,
        )
    }

    /// `grep`, off the main thread; aborting `options.abortSignal` stops it
    /// (`E_ABORTED`).
    #[napi(ts_return_type = "Promise<Array<GrepMatch> | Array<string> | Array<GrepCount>>")]
    pub fn grep_async(
        &self,
        env: &Env,
        #[napi(ts_arg_type = "string")] pattern: Unknown<'_>,
        #[napi(ts_arg_type = "string | undefined | null")] path: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "number | undefined | null")] max_results: Option<Unknown<'_>>,
        #[napi(ts_arg_type = "(GrepOptions & AbortOptions) | undefined | null")] options: Option<
            Unknown<'_>,
        >,
    ) -> napi::Result<AsyncTask<Job<(sandgate::search::GrepOutput, bool), GrepAnswer>>> {
        let run = sandgate::Sandbox::grep_with;
        grep_job(
            self,
            env,
            (pattern, path, max_results, options),
            run,
            grep_answer,
        )
    }
}
