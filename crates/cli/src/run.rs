//! `sandgate run --policy P -- PROGRAM ARGS…`: the supervised run.
//!
//! The supervisor checks the policy, starts the executor (so a kernel that
//! lacks a required part refuses before anything runs), writes the admission
//! line, runs the program confined with the policy's timeout armed from the
//! start, and reports how it ended:
//!
//! - `policy: {…}` on stderr first: the admission decision, whose
//!   `program` (and any refusal that quotes it) is redacted as the
//!   program's output is — withheld values and token shapes — so that a
//!   credential on the command line is not printed beside redacted output;
//! - exit 2 when the policy refuses the run (the decision says why; a
//!   policy with `budgets.exec_ops = 0` is refused there, never after an
//!   admission that said `"ok":true`); a program's own exit 2 comes after
//!   an admission that said `"ok":true`, and a usage error (clap's, also
//!   2) writes no `policy:` line, so the three are told apart on stderr;
//! - exit 3 and `policy-result: {"version":1,"stage":"execute","reason":…}`
//!   when a limit stopped the program: `timeout`, `output_limit`,
//!   `memory_limit`, `task_limit`, `cpu_limit` or `file_size_limit` (a
//!   process it ended with died of the `SIGXFSZ` a write past
//!   `fs.max_write_bytes` sends), with `limit_key` naming the policy key
//!   (`exec.timeout_ms`, …, `fs.max_write_bytes`);
//! - a program that exits 3 by itself (the supervisor's own code) becomes
//!   exit 1 with reason `worker_reserved_exit`;
//! - otherwise the program's own exit code, after a `policy-result:` line
//!   with reason `protected_changes` when the program changed protected
//!   paths (which were restored or quarantined after it ended).
//!
//! Every `policy-result:` line carries `protected_changes`: each protected
//! entry the program changed (`path`, `pattern`, `action`).
//!
//! SIGINT, SIGTERM and SIGHUP do not end the supervisor on the spot: they
//! abort the run, whose whole tree is then ended as after a timeout, and
//! the supervisor exits `128 + n` for signal `n` (a supervisor that just
//! died would end its tree only through the keeper's parent-death signal,
//! without the grace period or the protected paths' check; SIGKILL, which
//! cannot be caught, does that). Nor can a reader that stops reading keep the
//! supervisor from exiting: once the signal has come, a write to stdout or
//! stderr that is still waiting for the reader gets [`GRACE`] more.
//!
//! The supervisor's own lines escape every character a host may split
//! lines on, or a terminal take for a control, that JSON leaves raw
//! (U+0080–U+009F, U+2028, U+2029): the program's words in the admission
//! line cannot start a line of their own there.
//!
//! Only the supervisor writes unprefixed contract lines: a program line
//! starting with `policy:` or `policy-result:` is shown as `worker: …`, after
//! every kind of line break, and the supervisor's lines always start on a
//! fresh line. When stdout and stderr are one stream (`2>&1`: the same
//! file, pipe or terminal) the program's stdout and then its stderr are
//! marked as the one text a reader of that stream sees, so that `polic` at
//! the end of stdout and `y-result: …` at the start of stderr are not an
//! unmarked line there, and a stdout ending mid-line puts the verdict on a
//! fresh line. The program's output is delivered when it ends (captured,
//! capped and redacted like any exec).

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use crate::lines::Provenance;
use sandgate::exec::AbortSignal;
use sandgate::policy::Policy;
use sandgate::{Executor, Limit};
use serde_json::{json, Value};

/// The supervisor's own exit codes.
const EXIT_REFUSED: u8 = 2;
const EXIT_LIMIT: u8 = 3;
const EXIT_WORKER_RESERVED: u8 = 1;

/// Writes one contract line in a single write (stderr is unbuffered, and
/// `writeln!` would issue one per formatted piece: hundreds per line), so
/// that supervisors sharing a log never interleave inside a line and one
/// that dies never leaves a line cut at a piece.
fn contract_line(err: &mut impl Write, fresh: &mut bool, token: &str, body: &Value) {
    let mut line = Vec::with_capacity(1024);
    if !*fresh {
        line.push(b'\n');
    }
    line.extend_from_slice(token.as_bytes());
    line.extend_from_slice(b": ");
    // Serializing a Value into a vector cannot fail.
    let mut json = Vec::with_capacity(1024);
    let _ = serde_json::to_writer(&mut json, body);
    escape_breaks(&json, &mut line);
    line.push(b'\n');
    let _ = err.write_all(&line);
    *fresh = true;
}

/// Copies serialized JSON to `out` with the characters JSON leaves raw
/// that a host may take for a line break or a terminal control escaped:
/// U+0085 (NEL) with the rest of the C1 controls (U+0080–U+009F, 8-bit CSI
/// among them), U+2028 and U+2029. The program's words are in the
/// admission line; raw, `x\u{2028}policy-result: …` in one would start a
/// forged contract line for a host that splits on every break
/// [`Provenance`] marks after. They occur only inside strings, where the
/// `\uXXXX` form means the same.
fn escape_breaks(json: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < json.len() {
        let escaped = match json[i..] {
            [0xC2, c @ 0x80..=0x9F, ..] => Some((2, u32::from(c))),
            [0xE2, 0x80, c @ (0xA8 | 0xA9), ..] => Some((3, 0x2000 + u32::from(c - 0x80))),
            _ => None,
        };
        match escaped {
            Some((len, code)) => {
                out.extend_from_slice(format!("\\u{code:04x}").as_bytes());
                i += len;
            }
            None => {
                out.push(json[i]);
                i += 1;
            }
        }
    }
}

/// Passes a stream through line provenance; says whether it ended a line.
fn mark(bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut p = Provenance::new();
    let mut out = p.push(bytes);
    out.extend(p.finish());
    let fresh = out.is_empty() || out.ends_with(b"\n");
    (out, fresh)
}

/// How long, once SIGINT, SIGTERM or SIGHUP has come, the supervisor
/// still waits for its reader to take what it is writing.
const GRACE: Duration = Duration::from_secs(1);

/// Stdout or stderr, written so that a reader that stops reading (a full
/// pipe) cannot keep SIGINT, SIGTERM or SIGHUP from ending the supervisor:
/// each write runs on a thread of its own, and once one of those signals
/// has come the supervisor waits [`GRACE`] more for it, then gives the
/// stream up (the write fails, and so does every later one; the exit
/// leaves that thread blocked where it was). Without a signal handler,
/// writes are plain blocking writes.
pub struct Bounded {
    stderr: bool,
    abort: Option<AbortSignal>,
    abandoned: bool,
}

impl Bounded {
    /// Stdout, given up on once `abort` has been set and [`GRACE`] passed.
    pub fn stdout(abort: Option<AbortSignal>) -> Bounded {
        Bounded {
            stderr: false,
            abort,
            abandoned: false,
        }
    }

    /// Stderr, given up on once `abort` has been set and [`GRACE`] passed.
    pub fn stderr(abort: Option<AbortSignal>) -> Bounded {
        Bounded {
            stderr: true,
            abort,
            abandoned: false,
        }
    }

    fn write_whole(stderr: bool, bytes: &[u8]) -> io::Result<()> {
        if stderr {
            io::stderr().write_all(bytes)
        } else {
            let mut out = io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        }
    }
}

impl Write for Bounded {
    /// Writes all of `buf` or fails: one call is one whole write.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let given_up = || {
            io::Error::new(
                io::ErrorKind::TimedOut,
                "the reader stopped reading, and a signal ends the supervisor",
            )
        };
        if self.abandoned {
            return Err(given_up());
        }
        let Some(abort) = &self.abort else {
            Self::write_whole(self.stderr, buf)?;
            return Ok(buf.len());
        };
        let (tx, rx) = mpsc::channel();
        let (stderr, bytes) = (self.stderr, buf.to_vec());
        let spawned = std::thread::Builder::new()
            .name("sandgate-write".to_owned())
            .spawn(move || {
                let _ = tx.send(Self::write_whole(stderr, &bytes));
            });
        if spawned.is_err() {
            Self::write_whole(self.stderr, buf)?;
            return Ok(buf.len());
        }
        loop {
            let aborted = abort.is_aborted();
            let wait = if aborted {
                GRACE
            } else {
                Duration::from_millis(50)
            };
            match rx.recv_timeout(wait) {
                Ok(written) => return written.map(|()| buf.len()),
                Err(mpsc::RecvTimeoutError::Timeout) if aborted => {
                    self.abandoned = true;
                    return Err(given_up());
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(given_up()),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether stdout and stderr are one stream (`2>&1`, one pipe, one
/// terminal): the same file, so that a host reading it sees the program's
/// stdout and then its stderr as one text.
fn one_stream() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    // `fstat` on a copy of each descriptor.
    let file = |fd: std::os::fd::BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .and_then(|fd| std::fs::File::from(fd).metadata())
            .map(|m| (m.dev(), m.ino()))
    };
    match (
        file(std::io::stdout().as_fd()),
        file(std::io::stderr().as_fd()),
    ) {
        (Ok(out), Ok(err)) => out == err,
        _ => false,
    }
}

/// The signals that abort a run rather than end the process at once.
const ABORTING: [i32; 3] = [1, 2, 15]; // SIGHUP, SIGINT, SIGTERM

/// An abort signal that SIGHUP, SIGINT and SIGTERM set, for the one exec
/// this process supervises (`None`, and the signals keep their default,
/// when the handler cannot be installed).
pub fn abort_on_signals() -> Option<AbortSignal> {
    let abort = AbortSignal::new();
    abort.on_signals(&ABORTING).ok().map(|()| abort)
}

/// `128 + n` when signal `n` aborted the run.
pub fn signalled() -> Option<ExitCode> {
    AbortSignal::caught_signal().map(|n| ExitCode::from(128u8.saturating_add(n as u8)))
}

/// Runs the supervised program; returns the supervisor's exit code.
pub fn run(policy_path: &Path, program: &[std::ffi::OsString]) -> ExitCode {
    let abort = abort_on_signals();
    // A reader that stops reading cannot keep a signal from ending the run.
    let mut err = Bounded::stderr(abort.clone());
    let mut fresh = true;
    let policy = match Policy::load(policy_path) {
        Ok(p) => p,
        Err(e) => {
            let e = sandgate::Error::from(e);
            let decision = json!({"ok": false, "code": e.code().as_str(), "key": e.key(), "reason": e.message()});
            contract_line(&mut err, &mut fresh, "policy", &decision);
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    let refuse =
        |err: &mut Bounded, fresh: &mut bool, e: sandgate::Error, executor: Option<&Executor>| {
            // A reason may quote the program: redacted as its output is.
            let reason = match executor {
                Some(x) => String::from_utf8_lossy(&x.redact(e.message().as_bytes())).into_owned(),
                None => e.message().to_owned(),
            };
            let decision = json!({
                "ok": false,
                "policy_digest": policy.digest(),
                "code": e.code().as_str(),
                "reason": reason,
            });
            contract_line(err, fresh, "policy", &decision);
            ExitCode::from(EXIT_REFUSED)
        };
    let executor = match Executor::from_policy(&policy) {
        Ok(x) => x,
        Err(e) => return refuse(&mut err, &mut fresh, e, None),
    };
    // `run` starts an arbitrary program: confined git alone does not grant it.
    if !executor.enabled() {
        let e = sandgate::Error::new(
            sandgate::ErrorCode::Denied,
            "exec is not enabled by the policy ([exec] enabled = false)",
        );
        return refuse(&mut err, &mut fresh, e, None);
    }
    // A budget of none refuses here, in the one decision: refused after
    // the admission, the run said `"ok":true` and then `"ok":false`.
    if policy.budgets().exec_ops == Some(0) {
        let e = sandgate::Error::new(
            sandgate::ErrorCode::Denied,
            "the policy allows no command ([budgets] exec_ops = 0)",
        );
        return refuse(&mut err, &mut fresh, e, None);
    }
    if let Err(e) = executor.start() {
        return refuse(&mut err, &mut fresh, e, Some(&executor));
    }
    let admission = json!({
        "ok": true,
        "policy_digest": policy.digest(),
        "security_mode": policy.security_mode().as_str(),
        // Shown as text, redacted as its output is; the program still gets
        // its words byte for byte.
        "program": program
            .iter()
            .map(|w| String::from_utf8_lossy(&executor.redact(w.as_encoded_bytes())).into_owned())
            .collect::<Vec<_>>(),
        "timeout_ms": policy.exec().timeout_ms,
        "max_output_bytes": policy.exec().max_output_bytes,
        "max_memory_bytes": policy.exec().max_memory_bytes,
        "max_tasks": policy.exec().max_tasks,
        "max_cpu_ms": policy.exec().max_cpu_ms,
        "confine": policy.exec().confine.as_str(),
    });
    contract_line(&mut err, &mut fresh, "policy", &admission);

    let options = sandgate::ExecOptions {
        abort: abort.clone(),
        ..Default::default()
    };
    let result = match executor.exec_argv(program, options) {
        Ok(r) => r,
        Err(e) => return refuse(&mut err, &mut fresh, e, Some(&executor)),
    };
    let (out, child_err, ended_line) = if one_stream() {
        // Read together, stdout's last line runs on into stderr's first:
        // `polic` then `y-result: …` is one line there, and a stdout that
        // ends without LF must not carry the verdict along with it.
        let mut p = Provenance::new();
        let out = p.push(&result.stdout);
        let mut child_err = p.push(&result.stderr);
        child_err.extend(p.finish());
        let whole = [out.as_slice(), child_err.as_slice()].concat();
        let fresh = whole.is_empty() || whole.ends_with(b"\n");
        (out, child_err, fresh)
    } else {
        let (out, _) = mark(&result.stdout);
        let (child_err, ended_line) = mark(&result.stderr);
        (out, child_err, ended_line)
    };
    let _ = Bounded::stdout(abort).write_all(&out);
    let _ = err.write_all(&child_err);
    fresh = ended_line;

    let base = |reason: &str| {
        json!({
            "version": 1,
            "stage": "execute",
            "reason": reason,
            "policy_digest": policy.digest(),
            "exit_code": result.exit_code,
            "duration_ms": result.duration.as_millis() as u64,
            "confined": result.confined,
            "protected_changes": result.protected_changes,
        })
    };
    if let Some(code) = signalled() {
        return code;
    }
    // A limit's verdict names the policy key that set it.
    let limited = |reason: &str, key: &str| {
        let mut line = base(reason);
        line["limit_key"] = key.into();
        line
    };
    let resource = match result.limit {
        Some(Limit::Memory) => Some(("memory_limit", "exec.max_memory_bytes")),
        Some(Limit::Tasks) => Some(("task_limit", "exec.max_tasks")),
        Some(Limit::Cpu) => Some(("cpu_limit", "exec.max_cpu_ms")),
        Some(Limit::FileSize) => Some(("file_size_limit", "fs.max_write_bytes")),
        _ => None,
    };
    if let Some((reason, key)) = resource {
        contract_line(&mut err, &mut fresh, "policy-result", &limited(reason, key));
        return ExitCode::from(EXIT_LIMIT);
    }
    if result.timed_out {
        let line = limited("timeout", "exec.timeout_ms");
        contract_line(&mut err, &mut fresh, "policy-result", &line);
        return ExitCode::from(EXIT_LIMIT);
    }
    if result.truncated {
        let line = limited("output_limit", "exec.max_output_bytes");
        contract_line(&mut err, &mut fresh, "policy-result", &line);
        return ExitCode::from(EXIT_LIMIT);
    }
    if result.exit_code == i32::from(EXIT_LIMIT) {
        contract_line(
            &mut err,
            &mut fresh,
            "policy-result",
            &base("worker_reserved_exit"),
        );
        return ExitCode::from(EXIT_WORKER_RESERVED);
    }
    if !result.protected_changes.is_empty() {
        contract_line(
            &mut err,
            &mut fresh,
            "policy-result",
            &base("protected_changes"),
        );
    }
    ExitCode::from(u8::try_from(result.exit_code).unwrap_or(1))
}
