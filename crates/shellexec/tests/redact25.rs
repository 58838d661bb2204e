//! Output redaction of passwords in URLs (with `/`, `?`, `#` or `@`
//! written unencoded in them) and in connection strings (`password=`,
//! `passwd=`, `pwd=`, quoted or not): whole at every read boundary, never a
//! prefix at the output cap, ordinary prose untouched, bounded hold-back on
//! long adversarial input.

use sandgate_shellexec::exec::{ExecOptions, ShellExecutor};
use sandgate_shellexec::redact::URL_PASSWORD_MAX;

mod redact_support;
use redact_support::{
    bounded, env, every_way, executor_caps, executor_shows, executor_with, printf, table, text,
};

/// Before, a password with an unencoded `/`, `?` or `#` in it was not
/// taken for one at all (`pa` and `ss` both passed), and nothing of a URL
/// password was redacted in output unless the URL was a withheld value.
#[test]
fn redact25_url_passwords_are_redacted_whole_up_to_the_last_at() {
    table(
        &[
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
        ],
        &[],
    );
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
    table(
        &[
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
        ],
        &[],
    );
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
    bounded(inputs, bound, 1);
}

// ---------------------------------------------------------------------------
// Through the real executor: a confined shell prints each shape.

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

#[test]
fn redact25_the_executor_redacts_each_shape_on_both_streams_and_at_every_cap() {
    // The shell was confined where the kernel offers Landlock; no stream
    // holds a password.
    executor_shows(SHAPES, &["pa/ss", "p@ss", "s3cret", r"a b\'c"]);

    // The cap at every offset of a URL and a connection string: what is
    // returned is always a prefix of the redacted line, never a part of
    // the password.
    for (printed, shown) in [SHAPES[0], SHAPES[2]] {
        executor_caps(printed, shown);
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
    let host_env = env(&[
        ("HOME", home.as_str()),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("DATABASE_URL", db_url.as_str()),
        ("SERVICE_URL", "https://user@example.com/no/pass:word"),
    ]);
    let ex = executor_with(1 << 20, host_env, vec!["SERVICE_URL".into()]);
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
