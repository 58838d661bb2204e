//! `[[net.credentials]]` and `[[net.rules]]`: strict keys, sources that are
//! never values, hosts that must be granted, and a summary without values.

use sandgate_policy::{
    CredentialScheme, CredentialSource, PolicyErrorKind as K, PolicyOptions, RuleAction,
};

use crate::common::{ok, refused};

const GRANT: &str = "[net]\nallow = [\"api.example.com\", \"other.example.com:8443\"]\n";

#[test]
fn a_credential_and_rules_load_with_their_defaults() {
    let p = ok(&format!(
        "{GRANT}[[net.credentials]]\nhost = \"API.example.com\"\nenv = \"GH_TOKEN\"\n\
         scheme = \"Bearer\"\nmethods = [\"GET\"]\npath_prefixes = [\"/repos/org/\"]\n\
         [[net.credentials]]\nhost = \"other.example.com\"\nport = 8443\nheader = \"X-Api-Key\"\n\
         file = \"/run/secrets/key\"\n\
         [[net.rules]]\nhost = \"api.example.com\"\nmethods = [\"GET\"]\naction = \"allow\"\n\
         [[net.rules]]\nhost = \"api.example.com\"\npath_prefixes = [\"/admin\"]\naction = \"deny\"\n"
    ));
    let c = p.net_credentials();
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].host, "api.example.com");
    assert_eq!(c[0].header, "Authorization");
    assert_eq!(c[0].port, None);
    assert_eq!(c[0].source, CredentialSource::Env("GH_TOKEN".into()));
    assert_eq!(c[0].scheme, Some(CredentialScheme::Bearer));
    assert_eq!(c[0].header_value(b"abc"), b"Bearer abc");
    assert_eq!(c[1].port, Some(8443));
    assert_eq!(c[1].header, "X-Api-Key");
    assert_eq!(
        c[1].source,
        CredentialSource::File("/run/secrets/key".into())
    );
    assert_eq!(c[1].header_value(b"abc"), b"abc");
    let r = p.net_request_rules();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].action, RuleAction::Allow);
    assert_eq!(r[1].action, RuleAction::Deny);
    assert_eq!(r[1].path_prefixes, ["/admin"]);
}

#[test]
fn basic_needs_a_user_and_encodes_it() {
    let p = ok(&format!(
        "{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"PW\"\nscheme = \"basic\"\nuser = \"bot\"\n"
    ));
    assert_eq!(
        p.net_credentials()[0].header_value(b"pass"),
        b"Basic Ym90OnBhc3M="
    );
    refused(
        &format!("{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"PW\"\nscheme = \"basic\"\n"),
        K::InvalidValue,
        "net.credentials[0].scheme",
    );
    refused(
        &format!("{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"PW\"\nuser = \"bot\"\n"),
        K::InvalidValue,
        "net.credentials[0].user",
    );
}

#[test]
fn a_literal_value_is_not_a_key() {
    let err = crate::common::load(&format!(
        "{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nvalue = \"ghp_x\"\n"
    ))
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("policy key `net.credentials[0].value`: unknown key"),
        "{text}"
    );
    assert!(
        text.contains("a value is never written in the policy"),
        "{text}"
    );
}

#[test]
fn a_refused_credential_line_is_not_quoted() {
    // The mistake the missing `value` key refuses, a token pasted into the
    // policy, must not reach the terminal or a log through the error's
    // quoted line; nor a token given where a wrong type is refused.
    let token = "ghp_realSecretToken0123456789abcdef";
    for (text, key, line) in [
        (
            format!(
                "{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nvalue = \"{token}\"\n"
            ),
            "net.credentials[0].value",
            5,
        ),
        (
            format!(
                "{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = [\"{token}\"]\n"
            ),
            "net.credentials[0].env",
            5,
        ),
    ] {
        let err = crate::common::load(&text).unwrap_err();
        let shown = err.to_string();
        assert!(!shown.contains(token), "{shown}");
        let p = err
            .problems()
            .iter()
            .find(|p| p.key() == Some(key))
            .unwrap_or_else(|| panic!("{shown}"));
        let at = p.location().expect("a place in the file");
        assert_eq!(at.line(), line, "{shown}");
        assert!(!at.source_line().contains(token), "{shown}");
        assert!(shown.contains(&format!(":{line}:")), "{shown}");
    }
    // Other keys' lines are still quoted.
    let err = crate::common::load("[fs]\nread_rots = [\"inputs\"]\n").unwrap_err();
    assert!(
        err.to_string().contains("| read_rots = [\"inputs\"]"),
        "{err}"
    );
}

#[test]
fn a_source_is_required_once() {
    let err = refused(
        &format!("{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\n"),
        K::InvalidValue,
        "net.credentials[0]",
    );
    assert!(err.message().contains("env"), "{err}");
    refused(
        &format!(
            "{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"A\"\nfile = \"/a\"\n"
        ),
        K::InvalidValue,
        "net.credentials[0].env",
    );
    refused(
        &format!("{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nfile = \"relative\"\n"),
        K::InvalidValue,
        "net.credentials[0].file",
    );
}

#[test]
fn a_host_not_granted_is_refused() {
    let err = refused(
        &format!("{GRANT}[[net.credentials]]\nhost = \"evil.example\"\nenv = \"T\"\n"),
        K::NetEntryRefused,
        "net.credentials[0].host",
    );
    assert!(err.message().contains("net.allow"), "{err}");
    // other.example.com is granted on 8443 only.
    refused(
        &format!("{GRANT}[[net.credentials]]\nhost = \"other.example.com\"\nenv = \"T\"\n"),
        K::NetEntryRefused,
        "net.credentials[0].host",
    );
    refused(
        &format!("{GRANT}[[net.rules]]\nhost = \"evil.example\"\naction = \"allow\"\n"),
        K::NetEntryRefused,
        "net.rules[0].host",
    );
    refused(
        &format!("{GRANT}[[net.credentials]]\nhost = \"*.example.com\"\nenv = \"T\"\n"),
        K::InvalidValue,
        "net.credentials[0].host",
    );
    refused(
        "[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"T\"\n",
        K::NetEntryRefused,
        "net.credentials[0].host",
    );
}

#[test]
fn headers_methods_prefixes_and_words_are_checked() {
    for (entry, key) in [
        ("header = \"Host\"", "net.credentials[0].header"),
        ("header = \"Bad Header\"", "net.credentials[0].header"),
        ("methods = [\"get\"]", "net.credentials[0].methods[0]"),
        (
            "path_prefixes = [\"repos\"]",
            "net.credentials[0].path_prefixes[0]",
        ),
        (
            "path_prefixes = [\"/a/../b\"]",
            "net.credentials[0].path_prefixes[0]",
        ),
        (
            "path_prefixes = [\"/a%2f\"]",
            "net.credentials[0].path_prefixes[0]",
        ),
        ("scheme = \"bearer\"", "net.credentials[0].scheme"),
        ("port = 0", "net.credentials[0].port"),
    ] {
        refused(
            &format!(
                "{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"T\"\n{entry}\n"
            ),
            K::InvalidValue,
            key,
        );
    }
    refused(
        &format!("{GRANT}[[net.rules]]\nhost = \"api.example.com\"\naction = \"permit\"\n"),
        K::InvalidValue,
        "net.rules[0].action",
    );
    refused(
        &format!("{GRANT}[[net.rules]]\nhost = \"api.example.com\"\n"),
        K::InvalidValue,
        "net.rules[0].action",
    );
    refused(
        &format!("{GRANT}[[net.rules]]\nhost = \"api.example.com\"\naction = \"allow\"\nverb = \"GET\"\n"),
        K::UnknownKey,
        "net.rules[0].verb",
    );
    refused(
        &format!("{GRANT}credentials = \"x\"\n"),
        K::WrongType,
        "net.credentials",
    );
}

#[test]
fn a_second_value_for_one_header_is_refused() {
    refused(
        &format!(
            "{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"A\"\n\
             [[net.credentials]]\nhost = \"api.example.com\"\nheader = \"authorization\"\nenv = \"B\"\n"
        ),
        K::InvalidValue,
        "net.credentials[1]",
    );
}

#[test]
fn the_summary_names_hosts_headers_and_sources_never_values() {
    let p = ok(&format!(
        "{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"GH_TOKEN\"\nscheme = \"token\"\n\
         [[net.rules]]\nhost = \"api.example.com\"\nmethods = [\"GET\"]\naction = \"allow\"\n"
    ));
    let text = p.summary().to_string();
    assert!(
        text.contains(
            "api.example.com -> Authorization (token, from env GH_TOKEN) on any method on any path"
        ),
        "{text}"
    );
    assert!(
        text.contains("allow api.example.com GET on any path"),
        "{text}"
    );
    let json = p.summary().to_json();
    assert!(json.contains("\"credentials\":["), "{json}");
    // Without credentials, the JSON is as before.
    assert!(!ok(GRANT).summary().to_json().contains("credentials"));
}

#[test]
fn options_write_the_same_entries() {
    let o = PolicyOptions::from_json(
        r#"{"net": {"allow": ["api.example.com"],
                    "credentials": [{"host": "api.example.com", "env": "GH_TOKEN", "scheme": "Bearer"}],
                    "rules": [{"host": "api.example.com", "methods": ["GET"], "action": "allow"}]}}"#,
    )
    .unwrap();
    let text = o.to_toml().unwrap();
    assert!(text.contains("[[net.credentials]]"), "{text}");
    let p = ok(&text);
    assert_eq!(p.net_credentials().len(), 1);
    assert_eq!(p.net_request_rules()[0].methods, ["GET"]);
    let e =
        PolicyOptions::from_json(r#"{"net": {"credentials": [{"host": "a", "value": "secret"}]}}"#)
            .unwrap_err();
    assert_eq!(e.kind(), K::UnknownKey);
}

#[test]
fn a_credential_variable_is_never_also_inherited_by_commands() {
    // env_inherit would hand the value to every command, defeating the
    // proxy that keeps it out of the command.
    let err = crate::common::load(&format!(
        "[exec]\nenabled = true\nenv_inherit = [\"HOME_DIR\", \"GH_TOKEN\"]\n\
         {GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"GH_TOKEN\"\n"
    ))
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("net.credentials[0].env"), "{text}");
    assert!(
        text.contains("`GH_TOKEN` is also in exec.env_inherit"),
        "{text}"
    );
    refused(
        &format!(
            "[exec]\nenv_inherit = [\"GH_TOKEN\"]\n\
             {GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"GH_TOKEN\"\n"
        ),
        K::InvalidValue,
        "net.credentials[0].env",
    );
    // Names are matched exactly, as the environment does.
    ok(&format!(
        "[exec]\nenv_inherit = [\"gh_token\", \"GH_TOKEN_URL\"]\n\
         {GRANT}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"GH_TOKEN\"\n"
    ));
    // The builder goes through the same gate.
    let mut o = PolicyOptions::default();
    o.exec.env_inherit.push("GH_TOKEN".into());
    o.net.allow.push("api.example.com".into());
    o.net.credentials.push(sandgate_policy::CredentialOptions {
        host: Some("api.example.com".into()),
        env: Some("GH_TOKEN".into()),
        ..Default::default()
    });
    let e = sandgate_policy::Policy::from_options(&o, std::path::Path::new("/")).unwrap_err();
    assert!(e.to_string().contains("exec.env_inherit"), "{e}");
}

/// A credential file the agent could read itself through the file tools
/// (inside a read root or the write root, named directly or through a
/// link) is refused at load, naming the key: the executor refuses it too,
/// but only when it starts, and a session's `read` needs no executor.
#[test]
fn a_credential_file_inside_a_root_is_refused() {
    let fx = crate::common::Fixture::new();
    std::fs::write(fx.path("project/inputs/token"), "s3cret\n").unwrap();
    std::fs::write(fx.path("project/workspace/token"), "s3cret\n").unwrap();
    std::fs::write(fx.path("elsewhere/token"), "s3cret\n").unwrap();
    std::os::unix::fs::symlink(fx.path("project/inputs/token"), fx.path("elsewhere/link")).unwrap();
    let policy = |file: &str| {
        format!(
            "[fs]\nread_roots = [\"inputs\"]\nwrite_root = \"workspace\"\n{GRANT}\
             [[net.credentials]]\nhost = \"api.example.com\"\nfile = \"{file}\"\n"
        )
    };
    for inside in [
        "project/inputs/token",
        "project/workspace/token",
        "elsewhere/link",
        "project/inputs/not-yet",
    ] {
        let file = fx.path(inside);
        let err = fx.load(&policy(file.to_str().unwrap())).expect_err(inside);
        assert_eq!(err.kind(), K::InvalidValue, "{inside}: {err}");
        assert_eq!(
            err.key(),
            Some("net.credentials[0].file"),
            "{inside}: {err}"
        );
    }
    let outside = fx.path("elsewhere/token");
    fx.load(&policy(outside.to_str().unwrap()))
        .expect("a file outside every root loads");
}

/// `sandgate check`'s summary shows a credential file's path as every name
/// is: a line feed in it (TOML allows `\n`) written `\u{a}`, a backslash
/// `\\`, so the path cannot add a line of its own to the summary.
#[test]
fn gitshown23_a_credential_path_with_a_line_feed_is_one_line_in_the_summary() {
    let p = ok(&format!(
        "{GRANT}[[net.credentials]]\nhost = \"api.example.com\"\n\
         file = \"/run/a\\n  write root        /\\\\x\"\n"
    ));
    let text = p.summary().to_string();
    assert!(
        text.contains(r"(as is, from file /run/a\u{a}  write root        /\\x) on any method"),
        "{text}"
    );
    assert_eq!(
        text.matches("write root").count(),
        2,
        "only the real write root line and the path: {text}"
    );
    assert!(!text.contains("\n  write root        /"), "{text}");
    let json = p.summary().to_json();
    assert!(
        json.contains(r"/run/a\\u{a}  write root        /\\\\x"),
        "{json}"
    );
}
