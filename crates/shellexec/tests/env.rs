//! The child environment: credential-shaped names, the allowlist,
//! `env_inherit`, executor overrides, the names digest, the withheld list.

use std::ffi::OsString;

use sandgate_shellexec::env::{is_credential_name, EnvPlan, BASE_ALLOWLIST};

/// (name, credential-shaped?) — each verdict follows docs/reference/executor.md to the letter,
/// with the rule that decides it.
const NAMES: &[(&str, bool)] = &[
    // Segments (split on `_` and `-`, case-insensitive).
    ("OPENAI_API_KEY", true),
    ("ANTHROPIC_API_KEY", true),
    ("GITHUB_TOKEN", true),
    ("HF_TOKEN", true),
    ("NPM_TOKEN", true),
    ("VAULT_TOKEN", true),
    ("CARGO_REGISTRY_TOKEN", true),
    ("HOMEBREW_GITHUB_API_TOKEN", true),
    ("MAX_OUTPUT_TOKENS", true), // TOKENS is a segment: fail closed
    ("API_KEYS", true),
    ("KEYS", true),
    ("SECRETS_DIR", true),
    ("MY_PASS", true),
    ("PASSWD", true),
    ("MYSQL_PWD", true),
    ("GITHUB_PAT", true),
    ("SENTRY_DSN", true),
    ("SLACK_WEBHOOK_URL", true),
    ("COOKIE_JAR", true),
    ("BEARER", true),
    ("SESSION_ID", true),
    ("XDG_SESSION_TYPE", true),
    ("DBUS_SESSION_BUS_ADDRESS", true),
    ("PRIVATE_KEY_PATH", true),
    ("npm_config__auth", true), // empty segment, then AUTH
    ("X-Api-Key", true),
    ("api-key", true),
    ("SKIP_AUTH", true),
    // Substrings (camelCase caught).
    ("DB_PASSWORD", true),
    ("PGPASSWORD", true),
    ("PASSWORD_MIN_LENGTH", true), // fail closed
    ("clientSecret", true),
    ("accessKeyId", true),
    ("myApiKey", true),
    ("privateKey", true),
    ("refreshToken", true),
    ("idToken", true),
    ("authToken", true),
    ("GOOGLE_APPLICATION_CREDENTIALS", true),
    // Exact names (case-insensitive).
    ("SSH_AUTH_SOCK", true),
    ("GIT_ASKPASS", true),
    ("SSH_ASKPASS", true),
    ("KUBECONFIG", true),
    ("kubeconfig", true),
    ("DOCKER_CONFIG", true),
    ("NETRC", true),
    // Prefixes (case-insensitive).
    ("AWS_REGION", true),
    ("aws_region", true),
    ("AZURE_TENANT_ID", true),
    ("GCP_PROJECT", true),
    ("GOOGLE_CLOUD_PROJECT", true),
    ("ARM_CLIENT_SECRET", true),
    ("ARM_CLIENT_ID", true),
    // Unicode look-alike: long s folds to S.
    ("\u{17f}ECRET", true),
    // The shell's own: exempt, in the shell's spelling only.
    ("PWD", false),
    ("OLDPWD", false),
    ("pwd", true),
    // Kept: no rule matches.
    ("PATH", false),
    ("LANG", false),
    ("HOME", false),
    ("TERM_PROGRAM", false),
    ("PATH_INFO", false),             // PATH is not PAT
    ("PATCH_LEVEL", false),           // PATCH is not PAT
    ("KEYBOARD_LAYOUT", false),       // KEYBOARD is not KEY
    ("MONKEY_BUSINESS", false),       // MONKEY is not KEY
    ("TOKENIZER_PARALLELISM", false), // TOKENIZER is not TOKEN
    ("PASSENGER_COUNT", false),       // PASSENGER is not PASS; "pass" is no listed substring
    ("BYPASS_CACHE", false),          // BYPASS is not PASS
    ("COMPASS_HOME", false),
    ("XAUTHORITY", false), // not AUTH, no listed substring
    ("DISPLAY", false),
    ("EDITOR", false),
    ("awsRegion", false), // the prefix is AWS_ with the underscore
    // camelCase words are segments too.
    ("githubToken", true),
    ("sessionToken", true),
    // Passphrases and JSON web tokens (segments; a passphrase also as a
    // substring, as a password is).
    ("GPG_PASSPHRASE", true),
    ("SSH_KEY_PASSPHRASE", true),
    ("gpgPassphrase", true),
    ("GPGPASSPHRASE", true),
    ("CI_JOB_JWT", true),
    ("CI_JOB_JWT_V2", true),
    ("ciJobJwt", true),
    ("JWT", true),
    ("JWTS_DIR", false), // JWTS is not JWT
];

#[test]
fn credential_name_table() {
    assert!(NAMES.len() >= 40);
    let wrong: Vec<String> = NAMES
        .iter()
        .filter(|&&(name, want)| is_credential_name(name) != want)
        .map(|&(name, want)| format!("{name}: expected credential={want}"))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    pairs
        .iter()
        .map(|&(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

fn names(plan: &EnvPlan) -> Vec<&str> {
    plan.names().collect()
}

/// Each table name, put where the allowlist would pass it, is passed
/// exactly when it is not credential-shaped, and withheld otherwise; named
/// in `env_inherit`, it is always passed and never withheld.
#[test]
fn credential_name_table_through_the_plan() {
    for &(name, credential) in NAMES {
        let host = os(&[(name, "value-of-the-variable")]);
        let plan = EnvPlan::build_with_base(&[name], host.clone(), &[], &[]);
        assert_eq!(plan.get(name).is_some(), !credential, "{name} allowlisted");
        assert_eq!(plan.withheld_names() == [name], credential, "{name}");

        let plan = EnvPlan::build(host, &[name.to_owned()], &[]);
        assert!(plan.get(name).is_some(), "{name} inherited");
        assert!(plan.withheld().is_empty(), "{name} inherited");
    }
}

#[test]
fn base_allowlist_is_the_spec_list_and_not_credential_shaped() {
    assert_eq!(
        BASE_ALLOWLIST,
        [
            "HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TEMP", "TERM", "TMP", "TMPDIR",
            "USER"
        ]
    );
    for name in BASE_ALLOWLIST {
        assert!(!is_credential_name(name), "{name}");
    }
}

#[test]
fn only_allowlisted_names_pass() {
    let host = os(&[
        ("HOME", "/home/u"),
        ("EDITOR", "vi"),
        ("PATH", "/usr/bin:/bin"),
        ("OPENAI_API_KEY", "sk-aaaaaaaaaaaaaaaaaaaaaaaa"),
        ("LD_PRELOAD", "/tmp/evil.so"),
        ("LANG", "C.UTF-8"),
        ("BASH_ENV", "/tmp/rc"),
    ]);
    let plan = EnvPlan::build(host, &[], &[]);
    assert_eq!(names(&plan), ["HOME", "LANG", "PATH"]);
    assert_eq!(plan.get("PATH").unwrap(), "/usr/bin:/bin");
    assert_eq!(plan.get("EDITOR"), None);
}

#[test]
fn every_base_name_passes_when_present() {
    let host: Vec<(OsString, OsString)> = BASE_ALLOWLIST
        .iter()
        .map(|n| (OsString::from(n), OsString::from(format!("v-{n}"))))
        .collect();
    let plan = EnvPlan::build(host, &[], &[]);
    let mut want = BASE_ALLOWLIST.to_vec();
    want.sort();
    assert_eq!(names(&plan), want);
}

#[test]
fn credential_in_allowlist_position_is_dropped_and_withheld() {
    let host = os(&[("HOME", "/home/u"), ("API_TOKEN", "tok-123456789")]);
    let plan = EnvPlan::build_with_base(&["HOME", "API_TOKEN"], host, &[], &[]);
    assert_eq!(names(&plan), ["HOME"]);
    assert_eq!(
        plan.withheld(),
        [("API_TOKEN".to_owned(), OsString::from("tok-123456789"))]
    );
}

#[test]
fn env_inherit_is_honoured_credentials_included() {
    let host = os(&[
        ("HOME", "/home/u"),
        ("FOO", "bar"),
        ("GITHUB_TOKEN", "ghp_0123456789abcdefghij0123"),
        ("NPM_TOKEN", "npm-secret-value"),
    ]);
    let inherit = [
        "FOO".to_owned(),
        "GITHUB_TOKEN".to_owned(),
        "ABSENT".to_owned(),
    ];
    let plan = EnvPlan::build(host, &inherit, &[]);
    assert_eq!(names(&plan), ["FOO", "GITHUB_TOKEN", "HOME"]);
    assert_eq!(
        plan.get("GITHUB_TOKEN").unwrap(),
        "ghp_0123456789abcdefghij0123"
    );
    // The inherited credential is the operator's choice: not withheld.
    assert_eq!(plan.withheld_names(), ["NPM_TOKEN"]);
}

#[test]
fn env_inherit_matches_names_case_sensitively() {
    let host = os(&[("FOO", "bar")]);
    let plan = EnvPlan::build(host, &["foo".to_owned()], &[]);
    assert!(names(&plan).is_empty());
}

#[test]
fn extra_overrides_host_values() {
    let host = os(&[("TMPDIR", "/tmp"), ("HOME", "/home/u")]);
    let extra = [
        ("TMPDIR".to_owned(), "/run/sandgate/tmp-1".to_owned()),
        ("SANDGATE".to_owned(), "1".to_owned()),
        ("SANDGATE".to_owned(), "2".to_owned()),
    ];
    let plan = EnvPlan::build(host, &[], &extra);
    assert_eq!(names(&plan), ["HOME", "SANDGATE", "TMPDIR"]);
    assert_eq!(plan.get("TMPDIR").unwrap(), "/run/sandgate/tmp-1");
    assert_eq!(plan.get("SANDGATE").unwrap(), "2", "last pair wins");
}

#[test]
fn extra_overriding_a_credential_withholds_the_host_value() {
    let host = os(&[("GIT_ASKPASS", "/usr/lib/ssh/askpass-host")]);
    let extra = [("GIT_ASKPASS".to_owned(), "/bin/false".to_owned())];
    let plan = EnvPlan::build(host, &[], &extra);
    assert_eq!(plan.get("GIT_ASKPASS").unwrap(), "/bin/false");
    assert_eq!(
        plan.withheld(),
        [(
            "GIT_ASKPASS".to_owned(),
            OsString::from("/usr/lib/ssh/askpass-host")
        )]
    );
}

#[test]
fn unsettable_extra_entries_are_ignored() {
    let extra = [
        ("".to_owned(), "x".to_owned()),
        ("A=B".to_owned(), "x".to_owned()),
        ("NUL".to_owned(), "a\0b".to_owned()),
        ("OK".to_owned(), "fine".to_owned()),
    ];
    let plan = EnvPlan::build(Vec::new(), &[], &extra);
    assert_eq!(names(&plan), ["OK"]);
}

#[test]
fn names_digest_has_the_documented_encoding() {
    let empty = EnvPlan::build(Vec::new(), &[], &[]);
    assert_eq!(
        empty.names_digest(),
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    let plan = EnvPlan::build(os(&[("PATH", "/bin"), ("HOME", "/h")]), &[], &[]);
    // sha256("HOME\nPATH")
    assert_eq!(
        plan.names_digest(),
        "sha256:cc223431cd82ee01c456252a947a8f6702bfae0aa18af56432065202e4869e8b"
    );
}

#[test]
fn names_digest_is_stable_across_host_order_and_values() {
    let pairs = [
        ("PATH", "/bin"),
        ("LANG", "C"),
        ("HOME", "/h"),
        ("SECRET", "xyz-secret-1"),
        ("FOO", "1"),
    ];
    let extra = [("TMPDIR".to_owned(), "/t".to_owned())];
    let forward = EnvPlan::build(os(&pairs), &[], &extra);
    let mut reversed_pairs = pairs;
    reversed_pairs.reverse();
    let reversed = EnvPlan::build(os(&reversed_pairs), &[], &extra);
    assert_eq!(forward.names_digest(), reversed.names_digest());
    assert_eq!(forward, reversed);
    // sha256("HOME\nLANG\nPATH\nTMPDIR")
    assert_eq!(
        forward.names_digest(),
        "sha256:2f5ac73f8beb22ea6c7f8e3f7a299b14b9c269e129c6f7ec734320fe7c4e540e"
    );

    let other_values = EnvPlan::build(
        os(&[
            ("PATH", "/usr/bin"),
            ("LANG", "en_US.UTF-8"),
            ("HOME", "/root"),
        ]),
        &[],
        &extra,
    );
    assert_eq!(forward.names_digest(), other_values.names_digest());
}

#[test]
fn names_digest_changes_when_the_set_changes() {
    let pairs = [("PATH", "/bin"), ("HOME", "/h"), ("FOO", "1")];
    let base = EnvPlan::build(os(&pairs), &[], &[]);
    let inheriting = EnvPlan::build(os(&pairs), &["FOO".to_owned()], &[]);
    let fewer = EnvPlan::build(os(&pairs[..1]), &[], &[]);
    assert_ne!(base.names_digest(), inheriting.names_digest());
    assert_ne!(base.names_digest(), fewer.names_digest());
    assert_ne!(inheriting.names_digest(), fewer.names_digest());
}

#[test]
fn withheld_lists_every_credential_not_passed() {
    let host = os(&[
        ("HOME", "/home/u"),
        ("OPENAI_API_KEY", "sk-live-abcdefghijklmnopqrstuvwx"),
        ("EDITOR", "vi"),
        ("AWS_REGION", "eu-west-1"),
        ("GITHUB_TOKEN", "ghp_passed_on_purpose_0123456789"),
        ("DB_PASSWORD", "hunter2"),
        ("PWD", "/home/u/src"),
    ]);
    let plan = EnvPlan::build(host, &["GITHUB_TOKEN".to_owned()], &[]);
    let withheld: Vec<(&str, &str)> = plan
        .withheld()
        .iter()
        .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
        .collect();
    assert_eq!(
        withheld,
        [
            ("AWS_REGION", "eu-west-1"),
            ("DB_PASSWORD", "hunter2"),
            ("OPENAI_API_KEY", "sk-live-abcdefghijklmnopqrstuvwx"),
        ]
    );
    assert_eq!(
        plan.withheld_names(),
        ["AWS_REGION", "DB_PASSWORD", "OPENAI_API_KEY"]
    );
}

#[test]
fn duplicate_host_names_first_wins_and_the_rest_are_withheld() {
    let host = os(&[
        ("PATH", "/first"),
        ("PATH", "/second"),
        ("API_TOKEN", "token-one-1234"),
        ("API_TOKEN", "token-two-1234"),
        ("API_TOKEN", "token-one-1234"),
    ]);
    let plan = EnvPlan::build(host.clone(), &[], &[]);
    assert_eq!(plan.get("PATH").unwrap(), "/first");
    assert_eq!(plan.withheld().len(), 2, "deduplicated (name, value) pairs");
    assert_eq!(plan.withheld_names(), ["API_TOKEN"]);

    let plan = EnvPlan::build(host, &["API_TOKEN".to_owned()], &[]);
    assert_eq!(plan.get("API_TOKEN").unwrap(), "token-one-1234");
    assert_eq!(
        plan.withheld(),
        [("API_TOKEN".to_owned(), OsString::from("token-two-1234"))]
    );
}

#[cfg(unix)]
#[test]
fn non_utf8_names_are_never_passed_but_still_withheld() {
    use std::os::unix::ffi::OsStringExt;

    let host = vec![
        (
            OsString::from_vec(b"SECRET_\xff".to_vec()),
            OsString::from("mangled-secret-value"),
        ),
        (
            OsString::from_vec(b"PLAIN_\xff".to_vec()),
            OsString::from("plain"),
        ),
        (
            OsString::from("PATH"),
            OsString::from_vec(b"/bin:/opt/\xfe".to_vec()),
        ),
    ];
    let plan = EnvPlan::build(host, &[], &[]);
    assert_eq!(names(&plan), ["PATH"]);
    assert_eq!(
        plan.get("PATH").unwrap(),
        &OsString::from_vec(b"/bin:/opt/\xfe".to_vec())
    );
    assert_eq!(plan.withheld_names(), ["SECRET_\u{fffd}"]);
}

#[test]
fn debug_shows_names_never_values() {
    let host = os(&[("HOME", "/home/u"), ("MY_SECRET", "do-not-print-me")]);
    let plan = EnvPlan::build(host, &[], &[]);
    let shown = format!("{plan:?}");
    assert!(
        shown.contains("MY_SECRET") && shown.contains("HOME"),
        "{shown}"
    );
    assert!(!shown.contains("do-not-print-me") && !shown.contains("/home/u"));
}

#[test]
fn the_plans_redactor_hides_withheld_values() {
    let host = os(&[
        ("HOME", "/home/u"),
        ("MY_SECRET", "correct-horse-battery"),
        ("SHORT_KEY", "abc"),
    ]);
    let plan = EnvPlan::build(host, &[], &[]);
    let mut redactor = plan.redactor();
    let mut out = redactor.push(b"home=/home/u secret=correct-horse-battery short=abc\n");
    out.extend(redactor.finish());
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "home=/home/u secret=[REDACTED:MY_SECRET] short=abc\n"
    );
}

/// A variable whose value is a URL carrying a password
/// (`postgres://app:pw@db/app`) is a credential whatever its name: it is
/// withheld, and both the URL and its password (as written and decoded)
/// are redacted. A URL without a password is not; one passed by
/// `env_inherit` is the operator's choice.
#[test]
fn wire23_a_url_carrying_a_password_is_withheld_whatever_its_name() {
    let url = "postgres://app:hunter2%40long@db.internal:5432/app";
    let host = os(&[
        ("DATABASE_URL", url),
        ("HTTP_PROXY", "http://proxyuser:proxy-password-1@proxy:3128"),
        ("SERVICE_URL", "https://user@example.com/no-password"),
        ("HOME", "https://me:home-password@x/"),
        ("LANG", "C.UTF-8"),
    ]);
    let plan = EnvPlan::build(host.clone(), &[], &[]);
    assert_eq!(names(&plan), ["LANG"]);
    assert_eq!(
        plan.withheld_names(),
        ["DATABASE_URL", "HOME", "HTTP_PROXY"]
    );
    let values: Vec<&str> = plan
        .withheld()
        .iter()
        .filter(|(n, _)| n == "DATABASE_URL")
        .map(|(_, v)| v.to_str().unwrap())
        .collect();
    assert!(values.contains(&url), "{values:?}");
    assert!(values.contains(&"hunter2%40long"), "{values:?}");
    assert!(values.contains(&"hunter2@long"), "{values:?}");
    // Inherited on purpose: passed, nothing of it withheld.
    let plan = EnvPlan::build(host, &["DATABASE_URL".into(), "SERVICE_URL".into()], &[]);
    assert_eq!(names(&plan), ["DATABASE_URL", "LANG", "SERVICE_URL"]);
    assert_eq!(plan.withheld_names(), ["HOME", "HTTP_PROXY"]);
}
