//! Output redaction of the password spellings redact26 left open: INI and
//! TOML `password = x` (blanks around `=`, the key at the start of its
//! line), keys glued to a word as environment dumps print them
//! (`PGPASSWORD=x`, `export PGPASSWORD=x`, `"userPassword": "x"`), YAML
//! block scalars (`password: |` and its indented lines), and a
//! URL password longer than the redactor's window in a host variable,
//! which the environment plan withholds whole — at every read boundary,
//! never a prefix at the output cap, prose untouched, bounded hold-back
//! and linear time.

use sandgate_shellexec::exec::{ExecOptions, ShellExecutor};
use sandgate_shellexec::redact::{BLOCK_GAP_MAX, CONN_GAP_MAX, URL_PASSWORD_MAX};

mod redact_support;
use redact_support::{
    bounded, every_way, executor, executor_caps, executor_shows, printf, table, text,
};

/// Before, `password = x` was not recognised at all: the value passed.
#[test]
fn redact26b_ini_and_toml_values_are_redacted() {
    table(
        &[
            ("password = s3cret", "password = [REDACTED]"),
            ("password = s3cret\nnext", "password = [REDACTED]\nnext"),
            ("password=\"s3cret\"", "password=[REDACTED]"),
            ("password = \"s3 cret\"", "password = [REDACTED]"),
            ("password = 's3 cret' # c", "password = [REDACTED] # c"),
            ("  db_password =s3cret\r\n", "  db_password =[REDACTED]\r\n"),
            ("db_password= my s3cret", "db_password= [REDACTED]"),
            ("Password\t=\ts3cret x", "Password\t=\t[REDACTED]"),
            (
                "[database]\nhost = db\npassword = s3cret\nport = 5432\n",
                "[database]\nhost = db\npassword = [REDACTED]\nport = 5432\n",
            ),
            (
                "[db]\r\npasswd = \"a\\\"s3cret\"\r\nuser = x",
                "[db]\r\npasswd = [REDACTED]\r\nuser = x",
            ),
            (
                "database.password = \"s3cret\"",
                "database.password = [REDACTED]",
            ),
            ("  - pwd = s3cret", "  - pwd = [REDACTED]"),
        ],
        &["s3cret", "s3 cret", "cret"],
    );
}

/// Before, a key right after a letter or digit was not a key:
/// `PGPASSWORD=x` as `env` prints it passed whole.
#[test]
fn redact26b_keys_glued_to_a_word_are_redacted() {
    table(
        &[
            ("PGPASSWORD=s3cret", "PGPASSWORD=[REDACTED]"),
            ("export PGPASSWORD=s3cret", "export PGPASSWORD=[REDACTED]"),
            (
                "declare -x PGPASSWORD=\"s3cret\"",
                "declare -x PGPASSWORD=[REDACTED]",
            ),
            (
                "MYSQL_PWD=s3cret\nREDIS_PASSWORD=s3cret\n",
                "MYSQL_PWD=[REDACTED]\nREDIS_PASSWORD=[REDACTED]\n",
            ),
            ("mypassword=s3cret", "mypassword=[REDACTED]"),
            (
                "\"Env\": [\"PGPASSWORD=s3cret\", \"PATH=/bin\"]",
                "\"Env\": [\"PGPASSWORD=[REDACTED] \"PATH=/bin\"]",
            ),
            (
                "{\"userPassword\": \"s3cret\"}",
                "{\"userPassword\": [REDACTED]}",
            ),
            ("  adminPassword: s3cret", "  adminPassword: [REDACTED]"),
            ("ROOTPWD = s3cret", "ROOTPWD = [REDACTED]"),
        ],
        &["s3cret"],
    );
}

/// What stays as it is: prose with `password =` inside a line, keys that
/// only begin with a password key, comments and empty values, the shell's
/// directories.
#[test]
fn redact26b_prose_longer_keys_and_empty_values_are_untouched() {
    for plain in [
        "if password = wrong then",
        "the password = field",
        "passwordless=true",
        "PASSWORDLESS=1",
        "passwords = a",
        "password =",
        "password = \n",
        "password = # none",
        "password = ; none",
        "password = ''",
        "OLDPWD=/tmp",
        "declare -x OLDPWD=\"/work\"",
        "pwd = /home/me",
        "cat /etc/passwd",
        "%wheel ALL=(ALL) NOPASSWD: ALL",
        "password\n= x",
    ] {
        assert_eq!(every_way(plain), plain);
    }
}

/// Before, only a block scalar's indicator was hidden (`password: |` was
/// a one-line value) and its lines passed.
#[test]
fn redact26b_yaml_block_scalars_are_redacted_through_their_last_line() {
    table(
        &[
            ("password: |\n  s3cret\n", "password: [REDACTED]\n"),
            (
                "password: >-\n  s3\n  cret\nnext: x\n",
                "password: [REDACTED]\nnext: x\n",
            ),
            (
                "  db_password: |\n    s3cret\n\n   \n    cret\n  user: x",
                "  db_password: [REDACTED]\n  user: x",
            ),
            (
                "- password: |\n    s3cret\n- x",
                "- password: [REDACTED]\n- x",
            ),
            (
                "password: |\r\n  s3cret\r\nuser: x",
                "password: [REDACTED]\r\nuser: x",
            ),
            ("password: |\n\ts3cret", "password: [REDACTED]"),
            ("password: |\nuser: x", "password: [REDACTED]\nuser: x"),
            (
                "outer: |\n  password: |2\n    s3cret\n  tail\nend",
                "outer: |\n  password: [REDACTED]\n  tail\nend",
            ),
            (
                "password: |\n  a\n  password: |\n    s3cret\n  b\nc",
                "password: [REDACTED]\nc",
            ),
        ],
        &["s3cret", "cret", "s3\n"],
    );
    // A line indented no more than the key (here its `- `) is not the
    // block's (a YAML parser refuses it).
    assert_eq!(
        every_way("- password: |\n  s3cret\n- x"),
        "- password: [REDACTED]\n  s3cret\n- x"
    );
    // A block's next line must show text fewer than BLOCK_GAP_MAX bytes
    // after the line end before it (so much is held back): here the
    // header's line end, 1 + blank lines + 2 blanks before `s3cret`.
    let at = |newlines: usize| format!("password: |\n{}  s3cret", "\n".repeat(newlines));
    let max = usize::from(BLOCK_GAP_MAX);
    assert_eq!(every_way(&at(max - 4)), "password: [REDACTED]");
    // One byte further the block ended at the header's line end.
    let far = at(max - 3);
    assert_eq!(
        every_way(&far),
        format!("password: [REDACTED]{}", &far["password: |".len()..])
    );
}

/// Long adversarial input for the new shapes: held-back bytes stay
/// bounded and the time linear.
#[test]
fn redact26b_held_back_bytes_and_time_stay_bounded() {
    let bound = usize::from(URL_PASSWORD_MAX.max(CONN_GAP_MAX)) + 64;
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("ini blanks", {
            let mut v = b"password".to_vec();
            v.extend(b" ".repeat(1_000_000));
            v
        }),
        ("ini lines", b"password = x\n".repeat(80_000)),
        ("ini keys", b"password password = = ".repeat(50_000)),
        ("glued", b"PGPASSWORDPASSWORDPWD".repeat(50_000)),
        ("glued values", b"XPWD=a b XPASSWORD=".repeat(50_000)),
        ("quoted ini", b"pwd = \"pwd = \"".repeat(70_000)),
        ("dotted", b"a.b.password ".repeat(80_000)),
        ("blocks", b"password: |\n  x\n".repeat(60_000)),
        ("block blanks", {
            let mut v = b"password: |\n  x\n".to_vec();
            v.extend(b" \n".repeat(500_000));
            v
        }),
        ("nested blocks", {
            let mut v = Vec::new();
            // Keys nested as deep as a line end and indentation can be
            // held back, then long lines inside all of their blocks.
            for i in 0..250 {
                v.extend(b" ".repeat(i));
                v.extend(b"password: |\n");
            }
            for _ in 0..500 {
                v.extend(b" ".repeat(251));
                v.extend(b"x".repeat(2000));
                v.push(b'\n');
            }
            v
        }),
    ];
    bounded(inputs, bound, 2);
}

// ---------------------------------------------------------------------------
// Through the real executor: a confined shell prints each new shape.

#[test]
fn redact26b_the_executor_redacts_ini_and_glued_keys_on_both_streams_and_at_every_cap() {
    let shapes: Vec<(&str, &str)> = vec![
        ("password = s3cret", "password = [REDACTED]"),
        ("  db_password = \"s3 cret\"", "  db_password = [REDACTED]"),
        ("PGPASSWORD=s3cret", "PGPASSWORD=[REDACTED]"),
        ("export PGPASSWORD=s3cret", "export PGPASSWORD=[REDACTED]"),
        ("passwordless=true", "passwordless=true"),
        ("if password = wrong then", "if password = wrong then"),
        (
            "password: |\n  s3 cret\n  s3cret\nuser: x",
            "password: [REDACTED]\nuser: x",
        ),
    ];
    executor_shows(&shapes, &["s3"]);

    // The cap at every offset of the INI line, the glued line and the
    // block: always a prefix of the redacted text.
    for (printed, shown) in [shapes[1], shapes[3], shapes[6]] {
        executor_caps(printed, shown);
    }
}

/// A host variable holding a URL whose password is longer than the
/// redactor's 256-byte URL window: the variable is withheld (its name says
/// nothing), and its password is redacted on its own wherever the command
/// prints it, as written and percent-decoded, whole.
#[test]
fn redact26b_a_long_url_password_in_a_variable_is_withheld_whole() {
    let password = format!("Q{}%40Z", "q".repeat(300));
    let decoded = format!("Q{}@Z", "q".repeat(300));
    let link = format!("postgres://app:{password}@db:5432/x");
    let ex = executor(1 << 20, vec![("MY_LINK".into(), link.clone().into())]);
    let r = ex
        .exec(
            &format!(
                "echo \"[${{MY_LINK:-unset}}]\"; {}; {}; {}",
                printf(&password, false),
                printf(&format!("pw {decoded} end"), false),
                printf(&link, true)
            ),
            ExecOptions::default(),
        )
        .unwrap();
    assert_eq!(r.exit_code, 0, "{}", text(&r.stderr));
    assert_eq!(
        text(&r.stdout),
        "[unset]\n[REDACTED:MY_LINK]\npw [REDACTED:MY_LINK] end\n"
    );
    assert_eq!(text(&r.stderr), "[REDACTED:MY_LINK]\n");
    for out in [&r.stdout, &r.stderr] {
        assert!(!text(out).contains("qqq"), "shown: {}", text(out));
    }
}
