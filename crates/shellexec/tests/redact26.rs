//! Output redaction of the password shapes redact25 left open: URL
//! passwords past the search window (the rest of the URL is hidden, never
//! a prefix), connection-string values with a blank in them (`;`-separated
//! forms run to the `;`, libpq's ends at the blank), `&` in form bodies and
//! query strings, and the YAML, JSON and `.env` spellings — whole at every
//! read boundary, never a prefix at the output cap, prose untouched,
//! bounded hold-back and linear time on long adversarial input.

use sandgate_shellexec::redact::{CONN_GAP_MAX, URL_PASSWORD_MAX};

mod redact_support;
use redact_support::{bounded, every_way, executor_caps, executor_shows, table};

/// Before, a password longer than the 256-byte window was not found: the
/// URL was emitted as it was, the password whole.
#[test]
fn redact26_a_url_password_past_the_window_hides_the_rest_of_the_url() {
    let window = usize::from(URL_PASSWORD_MAX);
    // The URL after `user:` (password, `@`, host) within the window, or
    // not: decided exactly, or hidden from the password to the URL's end.
    for rest in [window - 2, window - 1, window, window + 1, window + 40] {
        let pw = "Q".repeat(rest - 3);
        let input = format!("postgres://app:{pw}@db ok\n");
        let got = every_way(&input);
        assert!(
            !got.contains('Q'),
            "{rest}: a part of the password shown: {got}"
        );
        if rest < window {
            assert_eq!(got, "postgres://app:[REDACTED]@db ok\n");
        } else {
            assert_eq!(got, "postgres://app:[REDACTED] ok\n", "{rest}");
        }
    }
    // An `@` inside the window does not end a longer password there.
    let pw = format!("a@b{}", "Q".repeat(window));
    let got = every_way(&format!("https://u:{pw}@host/ x"));
    assert_eq!(got, "https://u:[REDACTED] x");
    // Over-redaction, chosen: a long `host:port` URL hides its path.
    let path = "p".repeat(window);
    assert_eq!(
        every_way(&format!("http://host:8080/{path} x")),
        "http://host:[REDACTED] x"
    );
    // A short one is untouched.
    assert_eq!(every_way("http://host:8080/x y"), "http://host:8080/x y");
}

/// Before, `Password=my pass;` hid only `my`.
#[test]
fn redact26_a_blank_in_a_semicolon_separated_value_stays_hidden() {
    table(
        &[
            (
                "Server=db;Password=my pass;Encrypt=yes",
                "Server=db;Password=[REDACTED];Encrypt=yes",
            ),
            // The key first: the `;` after the blank decides.
            (
                "Password=my pass;Server=db",
                "Password=[REDACTED];Server=db",
            ),
            ("PWD=my  pass word;", "PWD=[REDACTED];"),
            // After a `;` on the line, to the line's end.
            (
                "Server=db;Password=my pass\nnext",
                "Server=db;Password=[REDACTED]\nnext",
            ),
            ("Server=db; Pwd=my pass", "Server=db; Pwd=[REDACTED]"),
        ],
        &["my", "pass"],
    );
    // libpq reads `key=value` items split by blanks and refuses a bare
    // word: an unquoted value ends at its blank, and so does one on a
    // command line.
    table(
        &[
            (
                "host=db password=s3cret dbname=x",
                "host=db password=[REDACTED] dbname=x",
            ),
            (
                "password=s3cret dbname=x; ok",
                "password=[REDACTED] dbname=x; ok",
            ),
            ("MYSQL_PWD=s3cret mysql", "MYSQL_PWD=[REDACTED] mysql"),
            (
                "mysql --password=s3cret -h db",
                "mysql --password=[REDACTED] -h db",
            ),
            (
                "mysql --password=s3cret --host=db; echo",
                "mysql --password=[REDACTED] --host=db; echo",
            ),
            // Fail-closed: a `;` later on the line, no `key=` between.
            ("DB_PASSWORD=s3cret psql; ok", "DB_PASSWORD=[REDACTED]; ok"),
        ],
        &["s3cret"],
    );
    // Too far to tell: the value ended at its blank.
    let far = format!("password=s3cret {};", "w".repeat(usize::from(CONN_GAP_MAX)));
    assert_eq!(
        every_way(&far),
        format!(
            "password=[REDACTED] {};",
            "w".repeat(usize::from(CONN_GAP_MAX))
        )
    );
}

/// Before, `password=x&ssl=1` hid `x&ssl=1`.
#[test]
fn redact26_an_ampersand_ends_a_value_before_the_next_item() {
    table(
        &[
            // A query string: `&` ends the value.
            (
                "https://h/login?user=a&password=s3cret&ssl=1 x",
                "https://h/login?user=a&password=[REDACTED]&ssl=1 x",
            ),
            ("?pwd=s3cret&x y", "?pwd=[REDACTED]&x y"),
            // A form body: `&` then `key=` ends it.
            ("password=s3cret&ssl=1", "password=[REDACTED]&ssl=1"),
            (
                "curl -d password=s3cret&user=me",
                "curl -d password=[REDACTED]&user=me",
            ),
        ],
        &["s3cret"],
    );
    // Otherwise the `&` is part of the value.
    table(
        &[
            ("password=s3c&ret x", "password=[REDACTED] x"),
            ("password=s3c&ret", "password=[REDACTED]"),
            ("password=s3c&r!et;", "password=[REDACTED];"),
        ],
        &["s3c", "ret"],
    );
    assert_eq!(every_way("?password=&x=1"), "?password=&x=1");
}

/// Before, none of the YAML and JSON spellings was redacted.
#[test]
fn redact26_yaml_json_and_env_spellings_are_redacted() {
    table(
        &[
            ("password: s3cret\n", "password: [REDACTED]\n"),
            ("  password: s3cret x\nnext", "  password: [REDACTED]\nnext"),
            (
                "db:\n  - db_password: s3cret\n",
                "db:\n  - db_password: [REDACTED]\n",
            ),
            (
                "environment:\n  POSTGRES_PASSWORD: \"s3\\\"cret\" # c\n",
                "environment:\n  POSTGRES_PASSWORD: [REDACTED] # c\n",
            ),
            ("passwd: 's3cret'", "passwd: [REDACTED]"),
            (r#"{"password": "s3cret"}"#, r#"{"password": [REDACTED]}"#),
            (
                r#"{"user":"a","db_password":"s3\"cret","x":1}"#,
                r#"{"user":"a","db_password":[REDACTED],"x":1}"#,
            ),
            (r#"{'password' : 's3cret'}"#, r#"{'password' : [REDACTED]}"#),
            ("PASSWORD=\"s3 cret\"\nX=1\n", "PASSWORD=[REDACTED]\nX=1\n"),
            (
                "export DB_PASSWORD='s3\\'cret'\n",
                "export DB_PASSWORD=[REDACTED]\n",
            ),
        ],
        &["s3", "cret"],
    );
}

/// The rule for prose: a `password:` that does not begin its line (after
/// indentation, `- ` and a key prefix such as `db_`) is prose, and a quoted
/// key is JSON only when a quoted value follows its colon.
#[test]
fn redact26_prose_about_passwords_is_untouched() {
    for plain in [
        "the password: field is required",
        "Error: password: too short",
        "the \"password\" field is required",
        "\"password\": null",
        "\"password\": 12345",
        "password:\n  nested: x",
        "password: # none",
        "PWD: /home/me",
        "password:x",
        "a password_hash: x",
        "my pass word",
    ] {
        assert_eq!(every_way(plain), plain);
    }
}

/// Long adversarial input for the new shapes: held-back bytes stay
/// bounded and the time linear.
#[test]
fn redact26_held_back_bytes_and_time_stay_bounded() {
    let bound = usize::from(URL_PASSWORD_MAX.max(CONN_GAP_MAX)) + 64;
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("long url", {
            let mut v = b"https://u:".to_vec();
            v.extend(b"x".repeat(1_000_000));
            v
        }),
        ("urls past the window", b"x://u:".repeat(100_000)),
        ("gaps", b"password=a b'".repeat(100_000)),
        ("gap keys", b"password=a b ".repeat(100_000)),
        ("amps", b"password=a&b&password=".repeat(50_000)),
        ("semis", b";password=a b ".repeat(80_000)),
        ("yaml", b"password: password: \"x\\\"".repeat(50_000)),
        ("json", b"\"password\": \"password\":'".repeat(50_000)),
        ("lines", b"- db_password: x\n".repeat(60_000)),
    ];
    bounded(inputs, bound, 2);
}

// ---------------------------------------------------------------------------
// Through the real executor: a confined shell prints each new shape.

#[test]
fn redact26_the_executor_redacts_the_new_shapes_on_both_streams_and_at_every_cap() {
    let long_url = format!("postgres://app:{}@db/x", "Q".repeat(300));
    let shapes: Vec<(String, &str)> = vec![
        (long_url, "postgres://app:[REDACTED]"),
        (
            "Server=db;Password=my pass;Encrypt=yes".into(),
            "Server=db;Password=[REDACTED];Encrypt=yes",
        ),
        (
            "?user=a&password=s3cret&ssl=1".into(),
            "?user=a&password=[REDACTED]&ssl=1",
        ),
        ("  db_password: s3cret".into(), "  db_password: [REDACTED]"),
        (
            r#"{"db_password":"a\"b c"}"#.into(),
            r#"{"db_password":[REDACTED]}"#,
        ),
        ("PASSWORD=\"x y z\"".into(), "PASSWORD=[REDACTED]"),
        (
            "the password: field is required".into(),
            "the password: field is required",
        ),
    ];
    let shapes: Vec<(&str, &str)> = shapes.iter().map(|(s, w)| (s.as_str(), *w)).collect();
    executor_shows(&shapes, &["QQQ", "my pass", "s3cret", r#"a\"b"#, "x y z"]);

    // The cap at every offset of the ODBC line and the YAML line (printed
    // and redacted lengths): always a prefix of the redacted line.
    for (printed, shown) in [shapes[1], shapes[3]] {
        executor_caps(printed, shown);
    }
}
