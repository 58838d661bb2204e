//! `sandgate`: check a policy, or serve an agent's file tools over JSON lines.
//!
//! Every subcommand that reads a policy names it the same way: `--policy
//! POLICY`, or the `SANDGATE_POLICY` environment variable when the flag is
//! absent (`check` also takes it as its one positional argument, `explain`
//! before its target). `mcp` alone reads no environment variable: it
//! serves `--policy POLICY` or the directories named.
//!
//! - `sandgate check`: print what the policy grants (`--json`: as JSON), or
//!   every problem found in it (exit 2, with the `E_POLICY` code, the key,
//!   the line and a caret under the offending part).
//! - `sandgate explain TARGET`: whether the policy lets an agent read or
//!   write a path, connect to a host, or run a command, and which rule
//!   decides, without doing any of it.
//! - `sandgate tool`: read one JSON request per line on stdin, write one
//!   JSON answer per line on stdout, in order. `--pretty` prints the
//!   exchange for people instead.
//! - `sandgate exec` and `sandgate run`: one command under the executor.
//! - `sandgate completions SHELL` and `sandgate man`: generated from these
//!   definitions.
#![forbid(unsafe_code)]

use std::io::{self, BufRead, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// `println!` that never panics: a closed stdout (`sandgate check P |
/// head -1`) loses the rest of the text, not the exit code; any other
/// failure (a full disk) is kept for [`finish`] to report.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        $crate::note_stdout(writeln!(std::io::stdout(), $($t)*));
    }};
}

/// `print!` that never panics (see `outln`).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        $crate::note_stdout(write!(std::io::stdout(), $($t)*));
    }};
}

/// `eprintln!` that never panics: a closed stderr loses the message, not
/// the exit code. Every message goes out through [`terminal_safe`]: the
/// names it quotes (a policy file, an audit file, a directory, a root
/// written in the policy) are the user's or an agent's, and an escape
/// sequence or bidirectional override in one would otherwise reach the
/// terminal as is.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($t)*);
        let _ = writeln!(std::io::stderr(), "{}", $crate::terminal_safe(&text));
    }};
}

mod explain;
mod init;
mod lines;
mod mcp;
mod run;
use sandgate::policy::Policy;
use sandgate::ToolSession;
// Terminal controls escaped as `\u{1b}`, in what is shown on a terminal.
use sandgate_mcp::terminal_safe;
// How the CLI shows a path it names on a terminal (`init`'s output, its
// refusals): every control character (line feed and tab included) and
// every bidirectional embedding, override or isolate as `\u{…}`, each
// byte that is not part of valid UTF-8 as `\xNN` and a backslash as
// `\\`, so that a name cannot drive the terminal, split the one line a
// script reads, or pass for another name (the lossy spelling, U+FFFD, can
// be a real name of its own; `\xff` written as it is would read as the
// byte 0xFF). The policy's own, so that both show a name alike.
use sandgate::policy::shown;
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "sandgate",
    version,
    about = "Confined file tools for AI agents, under one policy file.",
    after_help = "check, explain, exec, run and tool take the policy as --policy POLICY, \
                  or from the SANDGATE_POLICY environment variable; mcp only as \
                  --policy POLICY (or serves the directories named)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `sandgate tool --help` shows after the options: each op with one
/// request.
const TOOL_OPS: &str = "\
Ops (one JSON object per line; every answer is {\"ok\":true,...} or
{\"ok\":false,\"error\":{\"code\",\"message\",\"path\"}}):
  summary  {\"op\":\"summary\"}
  read     {\"op\":\"read\",\"path\":\"src/main.rs\",\"offset\":1,\"limit\":40}
  write    {\"op\":\"write\",\"path\":\"notes/todo.md\",\"content\":\"- ship\\n\",\"overwrite\":true}
  edit     {\"op\":\"edit\",\"path\":\"notes/todo.md\",\"old\":\"ship\",\"new\":\"ship it\"}
  list     {\"op\":\"list\",\"path\":\"src\"}
  stat     {\"op\":\"stat\",\"path\":\"src/main.rs\"}
  mkdir    {\"op\":\"mkdir\",\"path\":\"build/out\"}
  delete   {\"op\":\"delete\",\"path\":\"build/out\"}
  rename   {\"op\":\"rename\",\"from\":\"a.txt\",\"to\":\"b.txt\"}
  glob     {\"op\":\"glob\",\"pattern\":\"**/*.rs\",\"path\":\"src\"}
  grep     {\"op\":\"grep\",\"pattern\":\"fn main\",\"path\":\"src\",\"max_results\":20}
  exec     {\"op\":\"exec\",\"command\":\"ls -l\",\"cwd\":\"src\",\"timeout_ms\":5000}
  fetch    {\"op\":\"fetch\",\"url\":\"https://api.github.com/zen\",\"max_bytes\":65536}

Paths are names beneath the policy's roots (no leading /, no ..). A request
may carry an \"id\" (string or number); its answer carries the same id.

Example:
  printf '%s\\n' '{\"op\":\"list\",\"path\":\".\"}' | sandgate tool --policy agent-policy.toml";

#[derive(Subcommand)]
enum Command {
    /// Check a policy file: print its summary, or every problem found in it
    /// and exit 2.
    Check {
        /// The policy file (TOML); the same as --policy.
        #[arg(value_name = "POLICY")]
        file: Option<PathBuf>,
        /// The policy file (TOML).
        #[arg(long, env = "SANDGATE_POLICY", value_name = "POLICY")]
        policy: Option<PathBuf>,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Say whether the policy lets an agent read or write a path, connect
    /// to HOST:PORT, or run a command, and which rule decides; nothing is
    /// read, written, connected or run.
    #[command(after_help = explain::AFTER_HELP)]
    Explain(explain::Args),
    /// Run one shell command as the policy's executor would, confined; print
    /// its output and exit with its exit code (2 when refused).
    Exec {
        /// The policy file (TOML).
        #[arg(long, env = "SANDGATE_POLICY", value_name = "POLICY")]
        policy: PathBuf,
        /// Working directory, a name beneath the write root (or first read root).
        #[arg(long)]
        cwd: Option<String>,
        /// The command, run with `shell -c`; words are joined with spaces.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Run a program under supervision: admission line, confinement, limits,
    /// and a `policy-result:` line when a limit stops it (exit 3). Exit 2 is
    /// the program's own after `policy: {"ok":true…}`, a refusal when the
    /// last `policy:` line says `"ok":false`, a usage error with no
    /// `policy:` line.
    Run {
        /// The policy file (TOML).
        #[arg(long, env = "SANDGATE_POLICY", value_name = "POLICY")]
        policy: PathBuf,
        /// The program and its arguments (run directly, not through a shell;
        /// passed byte for byte).
        #[arg(last = true, required = true, value_parser = clap::value_parser!(std::ffi::OsString))]
        program: Vec<std::ffi::OsString>,
    },
    /// Write a starter policy for a directory (read and write root; .git,
    /// .github, lockfiles and MCP host and editor settings protected; no
    /// shell, no network) and print where it went. `/`, the home directory
    /// and a directory holding it are refused: grant the project inside.
    Init {
        /// The directory the policy grants.
        dir: PathBuf,
        /// Where to write it (default: `<dir>.sandgate.toml` beside the
        /// directory); an existing file is never replaced, a directory is
        /// refused, and the policy is written whole or not at all. The path printed is escaped:
        /// controls as `\u{1b}`, bytes that are not UTF-8 as `\xff`.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Serve the policy's tools over the Model Context Protocol on
    /// stdin/stdout, for MCP hosts. `sandgate mcp DIR...` is the reference
    /// filesystem server's form: every DIR a read root, the first also the
    /// write root, overwriting allowed, restricted mode (every `.git`
    /// protected), what `sandgate init` protects besides (.github,
    /// lockfiles, and .cursor/, .vscode/, .claude/ and .mcp.json, which name
    /// commands a host runs unconfined), no shell and no network. The first
    /// DIR may not be `/`, the home directory or one holding it. To make
    /// any of those protected files writable, serve a policy with --policy.
    Mcp {
        /// The policy file (TOML).
        #[arg(long, conflicts_with = "dirs")]
        policy: Option<PathBuf>,
        /// Append one JSON line per call (file tools, exec, git and fetch;
        /// refusals included), and per connection a command makes through
        /// the egress proxy, here.
        #[arg(long)]
        audit: Option<PathBuf>,
        /// Serve streamable HTTP on this loopback address (e.g.
        /// 127.0.0.1:8765) instead of stdio; any other address is refused.
        /// Clients must present the generated bearer token.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// With --http: write the bearer token to this new file (mode 0600).
        #[arg(long, value_name = "FILE", requires = "http")]
        token_file: Option<PathBuf>,
        /// Serve on a UNIX socket (mode 0600) at this path instead of stdio.
        #[arg(long, value_name = "PATH", conflicts_with = "http")]
        unix: Option<PathBuf>,
        /// Directories to serve when no policy is given.
        dirs: Vec<PathBuf>,
    },
    /// Serve the JSON tool endpoint on stdin/stdout: one request per line.
    #[command(after_help = TOOL_OPS)]
    Tool {
        /// The policy file (TOML).
        #[arg(long, env = "SANDGATE_POLICY", value_name = "POLICY")]
        policy: PathBuf,
        /// Print each request and answer for a person to read. Lines
        /// starting with `#` are shown as narration and not answered.
        /// Terminal controls in what is shown (escape sequences, bidi
        /// overrides) are printed escaped, as `\u{1b}`.
        #[arg(long)]
        pretty: bool,
    },
    /// Print a completion script for a shell (bash, zsh, fish, elvish,
    /// powershell) on stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout; `cargo xtask man` writes it to
    /// dist/man/sandgate.1.
    Man,
}

fn main() -> ExitCode {
    // A write past a file size limit the server was started under (an
    // agent's large file, an audit record) fails with EFBIG, refused or
    // said like a full disk, instead of killing the server mid-call.
    if let Err(e) = sandgate::exec::outlive_file_size_limit() {
        errln!("sandgate: handling SIGXFSZ: {e}");
        return ExitCode::FAILURE;
    }
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return clap_exit(&e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // `check POLICY` and `check --policy POLICY` (`explain POLICY TARGET`
    // and `explain --policy POLICY TARGET`) are one argument spelled two
    // ways: both at once is a mistake, while SANDGATE_POLICY yields to
    // either.
    let flag_given = matches
        .subcommand_matches("check")
        .or_else(|| matches.subcommand_matches("explain"))
        .is_some_and(|m| m.value_source("policy") == Some(clap::parser::ValueSource::CommandLine));
    // `explain`'s 0 and 1 are its answers: an answer it could not write
    // is a 2, as when it cannot answer at all.
    let unwritten = if matches!(cli.command, Command::Explain(_)) {
        2
    } else {
        1
    };
    // Commands that stream a program's or a session's output write it
    // themselves, giving up on a reader that stopped reading once a
    // signal came: a last flush of stdout here would wait on that reader
    // (and on the writer still blocked in it, which holds stdout's lock)
    // for ever.
    let streams = matches!(
        cli.command,
        Command::Exec { .. } | Command::Run { .. } | Command::Tool { .. } | Command::Mcp { .. }
    );
    let code = match cli.command {
        Command::Check { file: Some(_), .. } if flag_given => {
            errln!("sandgate: the policy is given twice: as POLICY and as --policy");
            ExitCode::from(2)
        }
        Command::Check { file, policy, json } => match file.or(policy) {
            Some(path) => check(&path, json),
            None => {
                errln!(
                    "sandgate: no policy: give --policy POLICY (or POLICY), or set SANDGATE_POLICY"
                );
                ExitCode::from(2)
            }
        },
        Command::Explain(args) if flag_given && args.names_a_policy() => {
            errln!("sandgate: the policy is given twice: as POLICY and as --policy");
            ExitCode::from(2)
        }
        Command::Explain(args) => explain::run(&args),
        Command::Tool { policy, pretty } => tool(&policy, pretty),
        Command::Run { policy, program } => run::run(&policy, &program),
        Command::Init { dir, output } => init::init(&dir, output),
        Command::Mcp {
            policy,
            audit,
            http,
            token_file,
            unix,
            dirs,
        } => mcp::mcp(
            policy,
            audit,
            dirs,
            mcp::Transport {
                http,
                token_file,
                unix,
            },
        ),
        Command::Exec {
            policy,
            cwd,
            command,
        } => exec(&policy, cwd.as_deref(), &command.join(" ")),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "sandgate", &mut script);
            print_generated(&script)
        }
        Command::Man => {
            let mut page = Vec::new();
            match clap_mangen::Man::new(Cli::command()).render(&mut page) {
                Ok(()) => print_generated(&page),
                Err(e) => {
                    errln!("sandgate: rendering the man page: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    };
    if streams {
        return code;
    }
    finish(code, unwritten)
}

/// The first failure to write stdout other than a reader gone away.
static STDOUT_ERROR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Keeps a failed write to stdout for [`finish`]: a closed pipe (`| head
/// -c1`) only loses the rest of the text, while a full disk or an I/O
/// error loses an answer its reader will look for.
fn note_stdout(written: io::Result<()>) {
    if let Err(e) = written {
        if e.kind() != io::ErrorKind::BrokenPipe {
            let _ = STDOUT_ERROR.set(e.to_string());
        }
    }
}

/// `code`, unless what was printed on stdout did not all get there (a
/// full disk: `sandgate check P > /dev/full`): then the failure is said,
/// and the exit code is `unwritten` (before, the text was lost and the
/// exit code said all was well).
fn finish(code: ExitCode, unwritten: u8) -> ExitCode {
    note_stdout(io::stdout().flush());
    match STDOUT_ERROR.get() {
        Some(e) => {
            errln!("sandgate: writing stdout: {e}");
            ExitCode::from(unwritten)
        }
        None => code,
    }
}

/// Prints clap's help, version or usage error and gives its exit code; help
/// or a version that cannot be written to stdout is an error (clap's own
/// `exit` drops the failure and exits 0).
fn clap_exit(e: &clap::Error) -> ExitCode {
    let printed = e.print();
    let code = ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
    if e.use_stderr() {
        // A usage error: a closed stderr loses the message, not the code.
        return code;
    }
    note_stdout(printed);
    finish(code, 1)
}

/// Writes generated text to stdout; a reader that went away is not an
/// error.
fn print_generated(bytes: &[u8]) -> ExitCode {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            errln!("sandgate: writing stdout: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: &PathBuf) -> Result<Policy, ExitCode> {
    Policy::load(path).map_err(|e| {
        let e = sandgate::Error::from(e);
        errln!("sandgate: {}: {}", e.code(), e.message());
        ExitCode::from(2)
    })
}

/// Reports a policy the facade refused (deny patterns are validated there),
/// naming the key as `sandgate check` does for the parser's refusals.
fn refused(e: &sandgate::Error) {
    let key = e
        .key()
        .map(|k| format!("policy key `{k}`: "))
        .unwrap_or_default();
    errln!("sandgate: {}: {key}{}", e.code(), e.message());
}

fn check(path: &PathBuf, json: bool) -> ExitCode {
    let policy = match load(path) {
        Ok(p) => p,
        Err(code) => return code,
    };
    // Deny patterns are validated by the guard, not the policy parser.
    match sandgate::Sandbox::from_policy(&policy) {
        Ok(sb) => {
            for w in sb.warnings() {
                errln!("sandgate: warning: {w}");
            }
        }
        Err(e) => {
            refused(&e);
            return ExitCode::from(2);
        }
    }
    let summary = policy.summary();
    if json {
        outln!("{}", summary.to_json());
    } else {
        // Shown to a person deciding whether to trust the policy: a root
        // or pattern holding an escape sequence could redraw what is shown.
        out!("{}", terminal_safe(&summary.to_string()));
    }
    ExitCode::SUCCESS
}

fn exec(path: &PathBuf, cwd: Option<&str>, command: &str) -> ExitCode {
    let policy = match load(path) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let executor = match sandgate::Executor::from_policy(&policy) {
        Ok(e) => e,
        Err(e) => {
            refused(&e);
            return ExitCode::from(2);
        }
    };
    // A signal ends the command's whole tree, then this process (128+n).
    let abort = run::abort_on_signals();
    match executor.exec(
        command,
        sandgate::ExecOptions {
            cwd: cwd.map(str::to_owned),
            abort: abort.clone(),
            ..Default::default()
        },
    ) {
        Ok(r) => {
            // A reader that stops reading cannot keep a signal from ending
            // this process.
            let mut err = run::Bounded::stderr(abort.clone());
            let written = run::Bounded::stdout(abort).write_all(&r.stdout);
            let _ = err.write_all(&r.stderr);
            let mut notes = String::new();
            // The exit code stays the command's (its own 1 or 2 could not
            // be told from ours), but a lost output is said: a full disk,
            // not a reader that went away or one given up on at a signal.
            if let Err(e) = &written {
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::TimedOut
                ) {
                    notes.push_str(&format!(
                        "sandgate: writing stdout: {e}; the command's output is lost\n"
                    ));
                }
            }
            if r.truncated {
                notes.push_str("sandgate: output truncated at max_output_bytes\n");
            }
            if r.timed_out {
                notes.push_str("sandgate: timed out\n");
            }
            if let Some(
                l @ (sandgate::Limit::Memory | sandgate::Limit::Tasks | sandgate::Limit::Cpu),
            ) = r.limit
            {
                notes.push_str(&format!("sandgate: stopped by the {} limit\n", l.as_str()));
            }
            if !notes.is_empty() {
                let _ = err.write_all(notes.as_bytes());
            }
            if let Some(code) = run::signalled() {
                return code;
            }
            ExitCode::from(u8::try_from(r.exit_code).unwrap_or(1))
        }
        Err(e) => {
            errln!("sandgate: {}: {}", e.code(), e.message());
            ExitCode::from(2)
        }
    }
}

fn tool(path: &PathBuf, pretty: bool) -> ExitCode {
    let policy = match load(path) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let mut session = match ToolSession::from_policy(&policy) {
        Ok(s) => s,
        Err(e) => {
            refused(&e);
            return ExitCode::from(2);
        }
    };
    for w in session.sandbox().warnings() {
        errln!("sandgate: warning: {w}");
    }
    // SIGINT, SIGTERM and SIGHUP end a running command's whole tree (a
    // process that simply died would leave it running past its timeout),
    // cancel a ranged read, grep, glob or fetch in flight (a ranged read
    // of a huge file takes hours), then end the session with 128 + n. A
    // write, edit or other request in flight, bounded by the policy's
    // byte caps, finishes first (`busy`), so none is left half-done; a
    // session waiting for input ends at once.
    let busy = std::sync::Arc::new(std::sync::Mutex::new(()));
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Some(abort) = run::abort_on_signals() {
        session.set_exec_abort(abort.clone());
        session.set_cancel(std::sync::Arc::clone(&cancel));
        let busy = std::sync::Arc::clone(&busy);
        let cancel = std::sync::Arc::clone(&cancel);
        std::thread::spawn(move || {
            abort.wait();
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
            let _done = busy.lock();
            let n = sandgate::exec::AbortSignal::caught_signal().unwrap_or(15);
            std::process::exit(128 + n);
        });
    }
    // Answers to a pipelining client come faster than it reads them: a
    // bigger pipe holds more before a write has to wait (the MCP server
    // does the same).
    sandgate_mcp::lines::grow_pipe(io::stdout().as_fd());
    // Our own buffer (not stdin's) so we can see whether more requests are
    // already waiting before deciding to flush.
    let mut input = io::BufReader::with_capacity(64 * 1024, io::stdin().lock());
    let mut stdout = io::stdout().lock();
    // Answers are written straight into this buffer and go out together
    // when no further request waits or it holds a batch.
    let mut out = Vec::with_capacity(ANSWER_BATCH);
    // Lines are read as bytes: one that is not UTF-8 is a bad request to
    // answer, not the end of the session.
    let mut line = Vec::new();
    let cap = line_cap(&policy);
    loop {
        let len = match read_line(&mut input, &mut line, cap) {
            Ok(Some(len)) => len,
            Ok(None) => break,
            Err(e) => {
                errln!("sandgate: reading stdin: {e}");
                return ExitCode::FAILURE;
            }
        };
        let handling = busy.lock();
        // Told to stop: no further request is started (the watcher ends
        // the session once `busy` is free).
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            drop(handling);
            break;
        }
        let request = line.strip_suffix(b"\r").unwrap_or(&line);
        if len > cap {
            let e = sandgate::Error::new(
                sandgate::ErrorCode::Request,
                format!(
                    "the request line is {len} bytes, over the limit of {cap} bytes (room for \
                     a write or an edit within the policy's byte caps); it was skipped"
                ),
            );
            if pretty {
                let _ = writeln!(
                    out,
                    "-> <{len} bytes>\n   REFUSED {}: {}",
                    e.code(),
                    e.message()
                );
            } else {
                sandgate::tool::write_json(&mut out, &sandgate::tool::error_answer(&e));
                out.push(b'\n');
            }
        } else if pretty {
            // Writing into a vector cannot fail.
            let _ = pretty_exchange(&session, &policy, request, &mut out);
        } else if let Some(answer) = session.handle_input(request) {
            // Blank and comment lines get no answer.
            sandgate::tool::write_json(&mut out, &answer);
            out.push(b'\n');
        }
        // Never held while writing: a client that stops reading cannot
        // keep a signal from ending the session.
        drop(handling);
        // Answer promptly when no further request is already waiting.
        if input.buffer().is_empty() || out.len() >= ANSWER_BATCH {
            if let Err(code) = write_answers(&mut stdout, &mut out) {
                return code;
            }
        }
    }
    let written = write_answers(&mut stdout, &mut out);
    // A signal that came before the input closed decides the exit code,
    // whichever of this thread and the watcher's gets there first.
    if let Some(code) = run::signalled() {
        return code;
    }
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

/// The longest request line `sandgate tool` reads: at least the MCP
/// server's 16 MiB, and room for the largest request the policy admits (a
/// write of `max_write_bytes` or an edit within `max_read_bytes`, every
/// byte escaped as `\u00XX`). A longer line is answered with `E_REQUEST`
/// and skipped to its end without being held, so a client cannot grow the
/// endpoint's memory without bound.
fn line_cap(policy: &Policy) -> usize {
    let limits = policy.limits();
    let largest = limits
        .max_write_bytes
        .saturating_add(limits.max_read_bytes)
        .saturating_mul(6)
        .saturating_add(64 * 1024);
    usize::try_from(largest)
        .unwrap_or(usize::MAX)
        .max(sandgate_mcp::lines::MAX_LINE)
}

/// Reads one line into `line`, without its LF: `Ok(None)` at the end of
/// input, else the line's whole length. Past `cap` bytes the rest of the
/// line is consumed and dropped (`line` then holds `cap + 1` bytes, and
/// the length says how long it was).
fn read_line(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Option<usize>> {
    line.clear();
    let mut len = 0usize;
    let mut any = false;
    loop {
        let buf = match input.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(any.then_some(len));
        }
        any = true;
        let end = buf.iter().position(|b| *b == b'\n');
        let part = &buf[..end.unwrap_or(buf.len())];
        len = len.saturating_add(part.len());
        let room = cap.saturating_add(1).saturating_sub(line.len());
        line.extend_from_slice(&part[..part.len().min(room)]);
        let used = end.map_or(buf.len(), |i| i + 1);
        input.consume(used);
        if end.is_some() {
            return Ok(Some(len));
        }
    }
}

/// Answers `sandgate tool` gathers before writing them while more requests
/// wait.
const ANSWER_BATCH: usize = 64 * 1024;

/// Writes and empties the gathered answers; a buffer grown past 1 MiB by a
/// large answer is not kept for the session. A reader that has gone away
/// ends the session quietly.
fn write_answers(stdout: &mut impl Write, out: &mut Vec<u8>) -> Result<(), ExitCode> {
    if out.is_empty() {
        return Ok(());
    }
    let written = stdout.write_all(out).and_then(|()| stdout.flush());
    out.clear();
    if out.capacity() > 1024 * 1024 {
        *out = Vec::with_capacity(ANSWER_BATCH);
    }
    match written {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(ExitCode::SUCCESS),
        Err(e) => {
            errln!("sandgate: writing stdout: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// Prints one request and its answer for a person. A blank line is skipped
/// and a comment line shown as a heading; neither gets an answer. What is
/// printed goes to a terminal, so every control the agent's files, names
/// or commands could carry is shown escaped ([`terminal_safe`]).
fn pretty_exchange(
    session: &ToolSession,
    policy: &Policy,
    request: &[u8],
    out: &mut impl Write,
) -> io::Result<()> {
    let mut shown = Vec::new();
    pretty_exchange_raw(session, policy, request, &mut shown)?;
    out.write_all(terminal_safe(&String::from_utf8_lossy(&shown)).as_bytes())
}

fn pretty_exchange_raw(
    session: &ToolSession,
    policy: &Policy,
    request: &[u8],
    out: &mut impl Write,
) -> io::Result<()> {
    let Some(answer) = session.handle_input(request) else {
        let text = String::from_utf8_lossy(request);
        return match text.trim_start().strip_prefix('#') {
            Some(note) => writeln!(out, "\n# {}", note.trim()),
            None => Ok(()),
        };
    };
    let text = String::from_utf8_lossy(request);
    let shown = serde_json::from_str::<Value>(&text)
        .map(|v| describe_request(&v))
        .unwrap_or_else(|_| text.into_owned());
    writeln!(out, "-> {shown}")?;
    if answer["ok"] == Value::Bool(true) {
        writeln!(out, "   ok  {}", describe_answer(&answer))?;
        if !answer["summary"].is_null() {
            for l in policy.summary().to_string().lines() {
                writeln!(out, "       | {l}")?;
            }
        }
        if !answer["exit_code"].is_null() {
            let c = &answer["confined"];
            let landlock = match c["landlock_abi"].as_u64() {
                Some(abi) => format!(
                    "Landlock ABI {abi} (files: {}, tcp ports: {}, signals scoped: {})",
                    c["fs"], c["net"], c["scoped"]
                ),
                None => "no Landlock".to_owned(),
            };
            writeln!(
                out,
                "       confined: {landlock}; no_new_privs: {}",
                c["no_new_privs"]
            )?;
            for stream in ["stdout", "stderr"] {
                if let Value::String(t) = &answer[stream] {
                    for l in t.lines().take(10) {
                        writeln!(out, "       {stream} | {l}")?;
                    }
                }
            }
        }
        if let Value::String(t) = &answer["content"] {
            for l in t.lines().take(6) {
                writeln!(out, "       | {l}")?;
            }
            if t.lines().count() > 6 {
                writeln!(out, "       | ... ({} lines in all)", t.lines().count())?;
            }
        }
    } else {
        let e = &answer["error"];
        let code = e["code"].as_str().unwrap_or("?");
        let msg = e["message"].as_str().unwrap_or("");
        let path = e["path"]
            .as_str()
            .map(|p| format!(" [{p}]"))
            .unwrap_or_default();
        writeln!(out, "   REFUSED {code}{path}: {msg}")?;
    }
    Ok(())
}

fn describe_request(v: &Value) -> String {
    let op = v["op"].as_str().unwrap_or("?");
    let mut parts = vec![op.to_owned()];
    if let Value::Object(m) = v {
        for (k, val) in m {
            if k == "op" {
                continue;
            }
            let shown = match val {
                Value::String(s) if s.len() > 40 || s.contains('\n') => {
                    format!("{k}=<{} bytes>", s.len())
                }
                Value::String(s) => format!("{k}={s:?}"),
                other => format!("{k}={other}"),
            };
            parts.push(shown);
        }
    }
    parts.join(" ")
}

fn describe_answer(a: &Value) -> String {
    let mut parts = Vec::new();
    for key in [
        "exit_code",
        "size",
        "replacements",
        "total_lines",
        "lines",
        "kind",
        "mode",
    ] {
        if !a[key].is_null() {
            parts.push(format!("{key}={}", a[key]));
        }
    }
    if let Value::Array(entries) = &a["entries"] {
        let names: Vec<String> = entries
            .iter()
            .map(|e| {
                let n = e["name"].as_str().unwrap_or("?");
                if e["kind"] == "dir" {
                    format!("{n}/")
                } else {
                    n.to_owned()
                }
            })
            .collect();
        parts.push(format!("entries: {}", names.join("  ")));
    }
    if let Value::Array(paths) = &a["paths"] {
        parts.push(format!(
            "paths: {}",
            paths
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("  ")
        ));
    }
    if let Value::Array(matches) = &a["matches"] {
        let hits: Vec<String> = matches
            .iter()
            .map(|m| format!("{}:{}", m["path"].as_str().unwrap_or("?"), m["line"]))
            .collect();
        parts.push(format!("matches: {}", hits.join("  ")));
    }
    parts.join("  ")
}
