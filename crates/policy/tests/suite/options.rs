//! A policy stated from code: the same defaults, gate rules and key names
//! as the file.

use sandgate_policy::{
    BudgetOptions, Confine, ExecutorOptions, FsOptions, Policy, PolicyErrorKind as K,
    PolicyOptions, DEFAULT_MAX_READ_BYTES, DEFAULT_SHELL, DEFAULT_TIMEOUT_MS,
};

use crate::common::Fixture;

#[test]
fn options_resolve_like_the_file_they_stand_for() {
    let fx = Fixture::new();
    let options = PolicyOptions {
        fs: FsOptions {
            read_roots: vec!["inputs".into(), "templates".into()],
            write_root: Some("workspace".into()),
            deny_write: vec!["*.lock".into()],
            max_write_bytes: Some(4096),
            ..Default::default()
        },
        exec: ExecutorOptions {
            enabled: true,
            timeout_ms: Some(5000),
            confine: Some(Confine::Off),
            ..Default::default()
        },
        budgets: BudgetOptions {
            exec_ops: Some(3),
            ..Default::default()
        },
        ..Default::default()
    };
    let from_code = Policy::from_options(&options, &fx.project()).unwrap();
    let from_file = fx.load(&options.to_toml().unwrap()).unwrap();
    assert_eq!(from_code.read_roots(), from_file.read_roots());
    assert_eq!(from_code.read_roots()[0], fx.canon("project/inputs"));
    assert_eq!(from_code.write_root(), from_file.write_root());
    assert_eq!(from_code.deny_write(), ["*.lock"]);
    assert_eq!(from_code.limits(), from_file.limits());
    assert_eq!(from_code.limits().max_read_bytes, DEFAULT_MAX_READ_BYTES);
    assert_eq!(from_code.limits().max_write_bytes, 4096);
    assert_eq!(from_code.exec(), from_file.exec());
    assert_eq!(from_code.exec().shell, DEFAULT_SHELL);
    assert_eq!(from_code.budgets(), from_file.budgets());
    // The digest is the file's: the same text, the same bytes.
    assert_eq!(from_code.digest(), from_file.digest());
}

/// Options whose text is over the policy file's cap are refused as the
/// file would be, before they are parsed, without quoting the value (a
/// 100 MB root was parsed for half a minute and quoted whole).
#[test]
fn options26_past_the_files_cap_are_refused_before_they_are_parsed() {
    let fx = Fixture::new();
    for len in [sandgate_policy::MAX_POLICY_BYTES as usize + 1, 100 << 20] {
        let options = PolicyOptions {
            fs: FsOptions {
                write_root: Some("a".repeat(len).into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let e = Policy::from_options(&options, &fx.project()).unwrap_err();
        assert_eq!(e.problems()[0].kind(), K::InvalidValue);
        let m = e.to_string();
        assert!(m.len() < 300, "{}", &m[..300]);
        assert!(m.contains("over the 1048576 a policy may have"), "{m}");
    }
    // Many values, each short, are judged by their text.
    let options = PolicyOptions {
        fs: FsOptions {
            deny_write: vec!["\\".into(); 400_000],
            ..Default::default()
        },
        ..Default::default()
    };
    let e = Policy::from_options(&options, &fx.project()).unwrap_err();
    assert!(e.to_string().contains("a policy may have"), "{e}");
    // Under the cap, the root is judged by what it names.
    let options = PolicyOptions {
        fs: FsOptions {
            write_root: Some("a".repeat(1000).into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = Policy::from_options(&options, &fx.project()).unwrap_err();
    assert_eq!(e.problems()[0].kind(), K::RootMissing, "{e}");
}

#[test]
fn default_options_grant_nothing() {
    let fx = Fixture::new();
    let p = Policy::from_options(&PolicyOptions::default(), &fx.project()).unwrap();
    assert!(p.read_roots().is_empty());
    assert!(p.write_root().is_none());
    assert!(!p.exec().enabled);
    assert_eq!(p.exec().timeout_ms, DEFAULT_TIMEOUT_MS);
    assert!(p.net_allow().is_empty());
}

#[test]
fn options_break_the_same_gate_rules_naming_the_key() {
    let fx = Fixture::new();
    let cases: Vec<(PolicyOptions, K, &str)> = vec![
        (
            PolicyOptions {
                exec: ExecutorOptions {
                    timeout_ms: Some(0),
                    ..Default::default()
                },
                ..Default::default()
            },
            K::InvalidValue,
            "exec.timeout_ms",
        ),
        (
            PolicyOptions {
                fs: FsOptions {
                    write_root: Some("no-such-dir".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
            K::RootMissing,
            "fs.write_root",
        ),
        (
            PolicyOptions {
                fs: FsOptions {
                    max_read_bytes: Some(0),
                    ..Default::default()
                },
                ..Default::default()
            },
            K::InvalidValue,
            "fs.max_read_bytes",
        ),
        (
            PolicyOptions {
                budgets: BudgetOptions {
                    exec_ops: Some(1),
                    ..Default::default()
                },
                ..Default::default()
            },
            K::BudgetWithoutCapability,
            "budgets.exec_ops",
        ),
        (
            PolicyOptions {
                exec: ExecutorOptions {
                    enabled: true,
                    process_allow: vec!["python".into()],
                    ..Default::default()
                },
                fs: FsOptions {
                    write_root: Some("workspace".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
            K::ProcessNotAllowed,
            "exec.process_allow[0]",
        ),
    ];
    for (options, kind, key) in cases {
        let err = Policy::from_options(&options, &fx.project()).unwrap_err();
        assert_eq!(err.kind(), kind, "{err}");
        assert_eq!(err.key(), Some(key), "{err}");
        // No file, so no line of a file is shown.
        assert!(
            err.problems().iter().all(|p| p.location().is_none()),
            "{err}"
        );
    }
}

#[test]
fn a_write_root_holding_the_base_directory_is_admitted_without_a_file() {
    // The rule keeps an agent from rewriting its own policy file; options
    // stated from code have none.
    let fx = Fixture::new();
    let options = PolicyOptions {
        fs: FsOptions {
            write_root: Some(".".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let p = Policy::from_options(&options, &fx.project()).unwrap();
    assert_eq!(p.write_root(), Some(fx.canon("project").as_path()));
    // The same text in a file next to the root is refused.
    let err = fx.load(&options.to_toml().unwrap()).unwrap_err();
    assert_eq!(err.kind(), K::WriteRootContainsPolicy);
}
