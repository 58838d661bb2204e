//! What the output-redaction suites for password shapes (redact25.rs,
//! redact26.rs, redact26b.rs) share: feeding text through the redactor
//! at every split point, one byte at a time and with the output cap at
//! every offset; long adversarial input with bounded hold-back and linear
//! time; and a real executor whose confined shell prints each shape, on
//! both streams and at every cap.

// Each suite uses a part of this.
#![allow(dead_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sandgate_shellexec::confine::{ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{ExecConfig, ExecOptions, LocalShellExecutor, ShellExecutor};
use sandgate_shellexec::redact::Redactor;

/// `input` cut at `cuts`, emitting stopped after its first `stop` bytes
/// (the rest still fed, as the executor does at its output cap).
pub fn run(input: &[u8], cuts: &[usize], stop: Option<usize>) -> Vec<u8> {
    let mut r = Redactor::shapes_only();
    let mut out = Vec::new();
    let mut at = 0;
    let mut points: Vec<usize> = cuts.to_vec();
    points.extend(stop);
    points.push(input.len());
    points.sort_unstable();
    for cut in points {
        out.extend(r.push(&input[at..cut]));
        at = cut;
        if stop == Some(cut) {
            r.stop_emitting();
        }
    }
    out.extend(r.finish());
    out
}

/// Bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Inputs up to this long are checked with the cap at every offset for
/// every split point; longer ones (cubic work) with the cap at the split
/// and at every offset in one chunk.
pub const EVERY_CAP_EVERY_SPLIT: usize = 120;

/// The one-chunk output of `input`, checked to be the same at every split
/// point and one byte at a time, and, with the cap at every offset (for
/// every split of a short sample), a prefix of it: so no byte of a
/// redacted secret is ever shown, the cap can only cut the output short.
pub fn every_way(input: &str) -> String {
    let bytes = input.as_bytes();
    let whole = run(bytes, &[], None);
    let ones: Vec<usize> = (1..bytes.len()).collect();
    assert_eq!(
        text(&run(bytes, &ones, None)),
        text(&whole),
        "{input:?} in 1-byte chunks"
    );
    for cut in 0..=bytes.len() {
        assert_eq!(
            text(&run(bytes, &[cut], None)),
            text(&whole),
            "{input:?} split at {cut}"
        );
        let stops: Vec<usize> = if bytes.len() <= EVERY_CAP_EVERY_SPLIT {
            (0..=bytes.len()).collect()
        } else {
            vec![cut, bytes.len() - cut]
        };
        for stop in stops {
            let capped = run(bytes, &[cut], Some(stop));
            assert!(
                whole.starts_with(&capped),
                "{input:?} split at {cut}, capped at {stop}: {:?} is not a prefix of {:?}",
                text(&capped),
                text(&whole)
            );
            untouched_stops_at(bytes, &whole, &capped, stop);
        }
    }
    for stop in 0..=bytes.len() {
        let capped = run(bytes, &[], Some(stop));
        assert!(
            whole.starts_with(&capped),
            "{input:?} capped at {stop}: {:?} is not a prefix of {:?}",
            text(&capped),
            text(&whole)
        );
        untouched_stops_at(bytes, &whole, &capped, stop);
    }
    text(&whole)
}

/// Where the redactor leaves `input` as it is (`whole` is `input`), what
/// it emits once told to stop at `stop` is exactly the input before that
/// point: nothing from the stop on, not a byte more (a prefix check alone
/// would pass a redactor that ran a few bytes past its cap).
fn untouched_stops_at(input: &[u8], whole: &[u8], capped: &[u8], stop: usize) {
    if whole == input {
        assert_eq!(
            text(capped),
            text(&input[..stop]),
            "{:?} stopped at {stop}",
            text(input)
        );
    }
}

/// Each input gives its expected output every way, and no output (capped
/// or not) holds any of `secrets`.
pub fn table(cases: &[(&str, &str)], secrets: &[&str]) {
    for &(input, want) in cases {
        let got = every_way(input);
        assert_eq!(got, want, "input {input:?}");
        for secret in secrets {
            assert!(!got.contains(secret), "{secret:?} shown in {got:?}");
        }
    }
}

/// Each named input fed in 4 KiB chunks: at most `bound` bytes are ever
/// held back, at most `growth` times the input (and 16 bytes) comes out
/// (markers may outgrow short values, but nothing piles up), and it takes
/// under 20 seconds (hundreds of kilobytes: quadratic work would take
/// minutes).
pub fn bounded(inputs: Vec<(&str, Vec<u8>)>, bound: usize, growth: usize) {
    for (what, input) in inputs {
        let mut r = Redactor::shapes_only();
        let start = Instant::now();
        let mut out = 0;
        for chunk in input.chunks(4096) {
            out += r.push(chunk).len();
            assert!(r.held_back() <= bound, "{what}: {} held", r.held_back());
        }
        out += r.finish().len();
        assert!(out <= growth * input.len() + 16, "{what}: {out} out");
        let took = start.elapsed();
        assert!(took < Duration::from_secs(20), "{what}: {took:?}");
    }
}

// ---------------------------------------------------------------------------
// Through the real executor.

/// Pairs of strings as a host environment.
pub fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    pairs
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

/// A started executor (best-effort confinement, namespaces) whose host
/// environment is `host_env`, of which `env_inherit` is passed on as well
/// as the allowlist, and whose output is capped at `max_output_bytes`.
pub fn executor_with(
    max_output_bytes: usize,
    host_env: Vec<(OsString, OsString)>,
    env_inherit: Vec<String>,
) -> LocalShellExecutor {
    let ex = LocalShellExecutor::new(ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(20),
        max_output_bytes,
        env_inherit,
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec::default(),
        limits: Default::default(),
        grace: Duration::from_millis(500),
        host_env: Some(host_env),
        namespaces: true,
        protected: None,
    });
    ex.start().unwrap();
    ex
}

/// [`executor_with`] a plain host environment (`HOME=/tmp`, a `PATH`,
/// `LANG`) and `extra` variables.
pub fn executor(max_output_bytes: usize, extra: Vec<(OsString, OsString)>) -> LocalShellExecutor {
    let mut host_env = env(&[
        ("HOME", "/tmp"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("LANG", "C.UTF-8"),
    ]);
    host_env.extend(extra);
    executor_with(max_output_bytes, host_env, Vec::new())
}

/// The shell's `printf` of `s` and a newline, to stdout or stderr.
pub fn printf(s: &str, stderr: bool) -> String {
    let quoted = s.replace('\'', r"'\''");
    format!(
        "printf '%s\\n' '{quoted}'{}",
        if stderr { " >&2" } else { "" }
    )
}

/// One confined command prints each of `shapes` (printed, shown) on
/// stdout and on stderr: both streams hold exactly the shown lines and
/// none of `secrets`, and the shell was confined where the kernel offers
/// Landlock.
pub fn executor_shows(shapes: &[(&str, &str)], secrets: &[&str]) {
    let ex = executor(1 << 20, Vec::new());
    let command: Vec<String> = shapes
        .iter()
        .flat_map(|(s, _)| [printf(s, false), printf(s, true)])
        .collect();
    let r = ex
        .exec(&command.join("; "), ExecOptions::default())
        .unwrap();
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    assert!(
        r.confined.fs || r.confined.kernel_abi.is_none(),
        "{:?}",
        r.confined
    );
    let want: String = shapes
        .iter()
        .map(|(_, shown)| format!("{shown}\n"))
        .collect();
    assert_eq!(text(&r.stdout), want);
    assert_eq!(text(&r.stderr), want);
    for out in [&r.stdout, &r.stderr] {
        for secret in secrets {
            assert!(!text(out).contains(secret), "{secret} shown: {}", text(out));
        }
    }
}

/// With the output cap at every offset of the printed line and of the
/// shown one, a command printing `printed` returns a prefix of the shown
/// line, never a part of a password; it is truncated exactly when the cap
/// cuts what was read or what is shown, and whole past both.
pub fn executor_caps(printed: &str, shown: &str) {
    let line = format!("{printed}\n");
    let shown_line = format!("{shown}\n");
    let longer = line.len().max(shown_line.len());
    for cap in 0..=longer {
        let ex = executor(cap, Vec::new());
        let r = ex
            .exec(&printf(printed, false), ExecOptions::default())
            .unwrap();
        let out = text(&r.stdout);
        assert!(
            shown_line.starts_with(&out),
            "cap {cap}: {out:?} is not a prefix of {shown:?}"
        );
        assert_eq!(r.truncated, cap < longer, "cap {cap}");
        if cap >= longer {
            assert_eq!(out, shown_line);
        }
    }
}
