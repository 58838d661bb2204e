//! Output redaction of passwords in URLs (with `/`, `?`, `#` or `@`
//! written unencoded in them) and in connection strings (`password=`,
//! `passwd=`, `pwd=`, quoted or not): whole at every read boundary, never a
//! prefix at the output cap, ordinary prose untouched, bounded hold-back on
//! long adversarial input.

use std::time::{Duration, Instant};

use sandgate_shellexec::redact::{Redactor, URL_PASSWORD_MAX};

/// `input` cut at `cuts` (sorted), emitting stopped after its first `stop`
/// bytes (the rest still fed, as the executor does at its output cap).
fn run(input: &[u8], cuts: &[usize], stop: Option<usize>) -> Vec<u8> {
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

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The one-chunk output of `input`, checked to be the same at every split
/// point and one byte at a time, and, with the cap at every offset, a
/// prefix of it (so no byte of a redacted secret is ever shown: the cap
/// can only cut the output short).
fn every_way(input: &str) -> String {
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
        for stop in 0..=bytes.len() {
            let capped = run(bytes, &[cut], Some(stop));
            assert!(
                whole.starts_with(&capped),
                "{input:?} split at {cut}, capped at {stop}: {:?} is not a prefix of {:?}",
                text(&capped),
                text(&whole)
            );
        }
    }
    text(&whole)
}

fn table(cases: &[(&str, &str)]) {
    for &(input, want) in cases {
        assert_eq!(every_way(input), want, "input {input:?}");
    }
}

/// Before, a password with an unencoded `/`, `?` or `#` in it was not
/// taken for one at all (`pa` and `ss` both passed), and nothing of a URL
/// password was redacted in output unless the URL was a withheld value.
#[test]
fn redact25_url_passwords_are_redacted_whole_up_to_the_last_at() {
    table(&[
        (
            "postgres://app:pa/ss@db:5432/x",
            "postgres://app:[REDACTED]@db:5432/x",
        ),
        ("https://u:p@ss@host/", "https://u:[REDACTED]@host/"),
        (
            "https://u:p?s#s/@host/path?q=1#f",
            "https://u:[REDACTED]@host/path?q=1#f",
        ),
        (
            "redis://:s3cret@cache:6379 ok",
            "redis://:[REDACTED]@cache:6379 ok",
        ),
        (
            "DATABASE_URL=postgres://app:pw@db/app\nnext\n",
            "DATABASE_URL=postgres://app:[REDACTED]@db/app\nnext\n",
        ),
        (
            r#"{"url":"https://u:p@h/x","mail":"a@b.c"}"#,
            r#"{"url":"https://u:[REDACTED]@h/x","mail":"a@b.c"}"#,
        ),
        // Cut off by the end of the stream.
        ("mysql://root:pa@ss@db", "mysql://root:[REDACTED]@db"),
        // A user with an unencoded `@` (an e-mail address).
        (
            "smtp://me@example.com:s3cret@mail:587",
            "smtp://me@example.com:[REDACTED]@mail:587",
        ),
        // An `@` later in the URL could still end the password as a human
        // wrote it: the rule takes the last one and redacts more.
        ("https://u:p@host/users/@me x", "https://u:[REDACTED]@me x"),
    ]);
}

#[test]
fn redact25_urls_without_a_password_are_untouched() {
    for plain in [
        "http://host:8080/path ok",
        "https://user@host/",
        "https://user@host:8080/x",
        "see http://example.com:80/a b@c",
        "https://u:@host/ (empty password)",
        "ssh://git@github.com/org/repo.git",
        "a://b:c",
        "time 12:30://x",
    ] {
        assert_eq!(every_way(plain), plain);
    }
}

/// Before, none of these was redacted.
#[test]
fn redact25_connection_string_passwords_are_redacted() {
    table(&[
        (
            "host=db user=app password=s3cret dbname=x",
            "host=db user=app password=[REDACTED] dbname=x",
        ),
        (
            "Server=db;Database=x;User Id=app;Password=s3cret;Encrypt=yes",
            "Server=db;Database=x;User Id=app;Password=[REDACTED];Encrypt=yes",
        ),
        (
            "DRIVER={PG};UID=app;PWD={a;b}}c};SSL=1",
            "DRIVER={PG};UID=app;PWD=[REDACTED];SSL=1",
        ),
        (
            r"host=db password='a b\'c' dbname=x",
            "host=db password=[REDACTED] dbname=x",
        ),
        (
            r#"Data Source=x;PASSWORD="a;b""c";Pooling=true"#,
            "Data Source=x;PASSWORD=[REDACTED];Pooling=true",
        ),
        ("passwd=hunter22\n", "passwd=[REDACTED]\n"),
        ("export DB_PASSWORD=s3cret", "export DB_PASSWORD=[REDACTED]"),
        (
            "mysql --password=s3cret --host=db",
            "mysql --password=[REDACTED] --host=db",
        ),
        ("MYSQL_PWD=s3cret mysql", "MYSQL_PWD=[REDACTED] mysql"),
        (
            "?user=a&password=s3cret&ssl=1 x",
            // In a query string the value ends at `&` (redact26).
            "?user=a&password=[REDACTED]&ssl=1 x",
        ),
        // A quote that does not close ends with its line.
        ("password='abc\nnext", "password=[REDACTED]\nnext"),
        ("password=\"abc", "password=[REDACTED]"),
    ]);
}

#[test]
fn redact25_prose_and_other_keys_are_untouched() {
    for plain in [
        "the password= field",
        "password=",
        "password=\n",
        "password=;",
        "password=''",
        "--password-file=/x",
        // `mypassword=x` is a key glued to a word: redacted since redact26b.
        "mypassword",
        "passwords=x",
        "PWD=/home/me",
        "OLDPWD=/tmp",
        "declare -x PWD=\"/work\"",
        "cat /etc/passwd",
        // Not at the start of a line: prose, not YAML (redact26).
        "the password: not this form",
    ] {
        assert_eq!(every_way(plain), plain);
    }
}

/// Long adversarial input: what is held back stays bounded (a URL's
/// password window at most) and the time stays linear.
#[test]
fn redact25_held_back_bytes_and_time_stay_bounded() {
    let bound = usize::from(URL_PASSWORD_MAX) + 64;
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("schemes", b"://u:".repeat(50_000)),
        ("ats", {
            let mut v = b"https://u:".to_vec();
            v.extend(b"a@".repeat(500_000));
            v
        }),
        ("urls", b"x://u:p@h/".repeat(25_000)),
        ("keys", b"password=".repeat(100_000)),
        ("quoted keys", b"password='".repeat(100_000)),
        ("quoted mixed", b"pwd={password=\"passwd='\\".repeat(40_000)),
        ("doubled", {
            let mut v = b"password=\"".to_vec();
            v.extend(b"\"\"".repeat(500_000));
            v
        }),
    ];
    for (what, input) in inputs {
        let mut r = Redactor::shapes_only();
        let start = Instant::now();
        let mut out = 0;
        for chunk in input.chunks(4096) {
            out += r.push(chunk).len();
            assert!(r.held_back() <= bound, "{what}: {} held", r.held_back());
        }
        out += r.finish().len();
        assert!(out <= input.len() + 16, "{what}: {out} out");
        // Hundreds of kilobytes: quadratic work would take minutes.
        let took = start.elapsed();
        assert!(took < Duration::from_secs(20), "{what}: {took:?}");
    }
}

// ---------------------------------------------------------------------------
// Through the real executor: a confined shell prints each shape.

use std::ffi::OsString;
use std::path::PathBuf;

use sandgate_shellexec::confine::{ConfineMode, ConfineSpec};
use sandgate_shellexec::exec::{ExecConfig, ExecOptions, LocalShellExecutor, ShellExecutor};

/// (printed, shown): each shape as a command prints it, and what the
/// executor must return.
const SHAPES: &[(&str, &str)] = &[
    (
        "postgres://app:pa/ss@db:5432/x",
        "postgres://app:[REDACTED]@db:5432/x",
    ),
    ("https://u:p@ss@host/", "https://u:[REDACTED]@host/"),
    (
        "host=db user=app password=s3cret dbname=x",
        "host=db user=app password=[REDACTED] dbname=x",
    ),
    (
        "Server=db;Password=s3cret;",
        "Server=db;Password=[REDACTED];",
    ),
    (
        r"password='a b\'c' dbname=x",
        "password=[REDACTED] dbname=x",
    ),
    ("the password= field", "the password= field"),
];

fn executor(max_output_bytes: usize) -> LocalShellExecutor {
    let host_env: Vec<(OsString, OsString)> = [
        ("HOME", "/tmp"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("LANG", "C.UTF-8"),
    ]
    .iter()
    .map(|(k, v)| (OsString::from(k), OsString::from(v)))
    .collect();
    let ex = LocalShellExecutor::new(ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(20),
        max_output_bytes,
        env_inherit: Vec::new(),
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

/// The shell's `printf` of `s` and a newline, to stdout or stderr.
fn printf(s: &str, stderr: bool) -> String {
    let quoted = s.replace('\'', r"'\''");
    format!(
        "printf '%s\\n' '{quoted}'{}",
        if stderr { " >&2" } else { "" }
    )
}

#[test]
fn redact25_the_executor_redacts_each_shape_on_both_streams_and_at_every_cap() {
    let ex = executor(1 << 20);
    let command: Vec<String> = SHAPES
        .iter()
        .flat_map(|(s, _)| [printf(s, false), printf(s, true)])
        .collect();
    let r = ex
        .exec(&command.join("; "), ExecOptions::default())
        .unwrap();
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    // The shell was confined where the kernel offers Landlock.
    assert!(
        r.confined.fs || r.confined.kernel_abi.is_none(),
        "{:?}",
        r.confined
    );
    let want: String = SHAPES
        .iter()
        .map(|(_, shown)| format!("{shown}\n"))
        .collect();
    assert_eq!(text(&r.stdout), want);
    assert_eq!(text(&r.stderr), want);
    for secret in ["pa/ss", "p@ss", "s3cret", r"a b\'c"] {
        assert!(!text(&r.stdout).contains(secret), "{secret} shown");
    }

    // The cap at every offset of a URL and a connection string: what is
    // returned is always a prefix of the redacted line, never a part of
    // the password.
    for (printed, shown) in [SHAPES[0], SHAPES[2]] {
        let line = format!("{printed}\n");
        let shown_line = format!("{shown}\n");
        // Every offset of the printed line and of the redacted one.
        for cap in 0..=line.len().max(shown_line.len()) {
            let ex = executor(cap);
            let r = ex
                .exec(&printf(printed, false), ExecOptions::default())
                .unwrap();
            let out = text(&r.stdout);
            assert!(
                shown_line.starts_with(&out),
                "cap {cap}: {out:?} is not a prefix of {shown:?}"
            );
            assert_eq!(r.truncated, cap < shown_line.len(), "cap {cap}");
            if cap >= shown_line.len() {
                assert_eq!(out, shown_line);
            }
        }
    }
}

/// A variable whose value is a URL with a password written with `/`, `?`,
/// `#` or `@` unencoded is a credential: withheld, and its password
/// redacted on its own under its name. Before, `pa/ss…` made the URL look
/// passwordless (its authority ended at the `/`): the variable was not
/// withheld (an allowlisted name such as `HOME` reached the command) and
/// the password, printed on its own, passed.
#[test]
fn redact25_a_url_variable_with_reserved_bytes_in_its_password_is_withheld() {
    const DB_PASSWORD: &str = "pa/ss?wo#rd-1";
    const HOME_PASSWORD: &str = "home@pass/word";
    let db_url = format!("postgres://app:{DB_PASSWORD}@db:5432/x");
    let home = format!("https://me:{HOME_PASSWORD}@x/");
    let host_env: Vec<(OsString, OsString)> = [
        ("HOME", home.as_str()),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("DATABASE_URL", db_url.as_str()),
        ("SERVICE_URL", "https://user@example.com/no/pass:word"),
    ]
    .iter()
    .map(|(k, v)| (OsString::from(k), OsString::from(v)))
    .collect();
    let ex = LocalShellExecutor::new(ExecConfig {
        shell: PathBuf::from("/bin/sh"),
        default_timeout: Duration::from_secs(20),
        max_output_bytes: 1 << 20,
        env_inherit: vec!["SERVICE_URL".into()],
        confine_mode: ConfineMode::BestEffort,
        confine: ConfineSpec::default(),
        limits: Default::default(),
        grace: Duration::from_millis(500),
        host_env: Some(host_env),
        namespaces: true,
        protected: None,
    });
    ex.start().unwrap();
    let r = ex
        .exec(
            &format!(
                "env; {}; {}",
                printf(&format!("d {DB_PASSWORD}"), false),
                printf(&format!("h {HOME_PASSWORD}"), false)
            ),
            ExecOptions::default(),
        )
        .unwrap();
    let out = text(&r.stdout);
    assert!(
        !out.contains("HOME=https"),
        "HOME reached the command: {out}"
    );
    assert!(!out.contains("DATABASE_URL="), "{out}");
    assert!(out.contains("d [REDACTED:DATABASE_URL]\n"), "{out}");
    assert!(out.contains("h [REDACTED:HOME]\n"), "{out}");
    // Inherited on purpose, and no `@` follows its first `:`: passed and
    // shown as it is.
    assert!(
        out.contains("SERVICE_URL=https://user@example.com/no/pass:word\n"),
        "{out}"
    );
}
