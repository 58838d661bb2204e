//! Strict TOML: unknown keys, duplicated keys and wrong types name the key;
//! defaults fail closed.

use sandgate_policy::{
    Confine, PolicyErrorKind as K, SecurityMode, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_READ_BYTES,
    DEFAULT_MAX_WRITE_BYTES, DEFAULT_SHELL, DEFAULT_TIMEOUT_MS,
};

use crate::common::{load, ok, refused, Fixture};

#[test]
fn empty_file_grants_nothing() {
    let p = ok("");
    assert_eq!(p.security_mode(), SecurityMode::Restricted);
    assert!(p.read_roots().is_empty());
    assert!(p.write_root().is_none());
    assert!(p.deny_write().is_empty());
    let limits = p.limits();
    assert_eq!(limits.max_read_bytes, DEFAULT_MAX_READ_BYTES);
    assert_eq!(limits.max_read_bytes, 10 * 1024 * 1024);
    assert_eq!(limits.max_write_bytes, DEFAULT_MAX_WRITE_BYTES);
    assert_eq!(limits.max_write_bytes, 5 * 1024 * 1024);
    assert!(!limits.allow_overwrite);
    let exec = p.exec();
    assert!(!exec.enabled);
    assert_eq!(exec.shell, DEFAULT_SHELL);
    assert_eq!(exec.timeout_ms, DEFAULT_TIMEOUT_MS);
    assert_eq!(exec.max_output_bytes, DEFAULT_MAX_OUTPUT_BYTES);
    assert_eq!(exec.max_output_bytes, 8 * 1024 * 1024);
    assert_eq!(exec.confine, Confine::BestEffort);
    assert!(exec.env_inherit.is_empty() && exec.process_allow.is_empty());
    assert!(p.net_allow().is_empty());
    assert!(!p.allow_http());
    let b = p.budgets();
    assert_eq!((b.fs_ops, b.exec_ops, b.net_ops), (None, None, None));
}

#[test]
fn exec_table_without_enabled_is_disabled() {
    let p = ok("[exec]\ntimeout_ms = 5000\n");
    assert!(!p.exec().enabled);
    assert_eq!(p.exec().timeout_ms, 5000);
    assert!(ok("[exec]\nenabled = true\n").exec().enabled);
    assert!(!ok("[exec]\nenabled = false\n").exec().enabled);
}

#[test]
fn spec_example_loads() {
    let fx = Fixture::new();
    let p = fx
        .load(
            r#"
security_mode = "restricted"

[fs]
read_roots      = ["inputs", "templates"]
write_root      = "workspace"
deny_write      = [".github/**", "*.yml", "Makefile"]
max_read_bytes  = 10485760
max_write_bytes = 5242880
allow_overwrite = false

[exec]
enabled          = true
shell            = "/bin/bash"
timeout_ms       = 30000
max_output_bytes = 8388608
env_inherit      = []
confine          = "best_effort"
process_allow    = []

[net]
allow      = []
allow_http = false

[budgets]
fs_ops   = 1000
exec_ops = 100
"#,
        )
        .expect("the reference example loads");
    assert_eq!(
        p.read_roots(),
        [fx.canon("project/inputs"), fx.canon("project/templates")]
    );
    assert_eq!(
        p.write_root(),
        Some(fx.canon("project/workspace").as_path())
    );
    assert_eq!(p.deny_write(), [".github/**", "*.yml", "Makefile"]);
    assert!(p.exec().enabled);
    assert_eq!(p.budgets().fs_ops, Some(1000));
    assert_eq!(p.budgets().exec_ops, Some(100));
    assert_eq!(p.budgets().net_ops, None);
}

#[test]
fn every_setting_is_read() {
    let p = ok(r#"
security_mode = "trusted_host"
[fs]
read_roots = ["inputs"]
deny_write = ["a/**"]
max_read_bytes = 7
max_write_bytes = 9
allow_overwrite = true
[exec]
enabled = true
shell = "/bin/sh"
timeout_ms = 1234
max_output_bytes = 99
env_inherit = ["GITHUB_TOKEN", "LANG"]
confine = "required"
process_allow = ["gh:pr", "git:status"]
[net]
allow = ["api.example.com", "*.svc.example:9000"]
allow_http = true
[budgets]
fs_ops = 0
exec_ops = 3
net_ops = 4
"#);
    assert_eq!(p.security_mode(), SecurityMode::TrustedHost);
    let l = p.limits();
    assert_eq!(
        (l.max_read_bytes, l.max_write_bytes, l.allow_overwrite),
        (7, 9, true)
    );
    let e = p.exec();
    assert_eq!(e.shell, "/bin/sh");
    assert_eq!(e.timeout_ms, 1234);
    assert_eq!(e.max_output_bytes, 99);
    assert_eq!(e.env_inherit, ["GITHUB_TOKEN", "LANG"]);
    assert_eq!(e.confine, Confine::Required);
    assert_eq!(e.process_allow, ["gh:pr", "git:status"]);
    let raws: Vec<_> = p.net_allow().iter().map(|e| e.raw()).collect();
    assert_eq!(raws, ["api.example.com", "*.svc.example:9000"]);
    assert!(p.allow_http());
    let b = p.budgets();
    assert_eq!(
        (b.fs_ops, b.exec_ops, b.net_ops),
        (Some(0), Some(3), Some(4))
    );
}

#[test]
fn confine_words() {
    for (word, want) in [
        ("off", Confine::Off),
        ("best_effort", Confine::BestEffort),
        ("required", Confine::Required),
    ] {
        assert_eq!(
            ok(&format!("[exec]\nconfine = \"{word}\"\n"))
                .exec()
                .confine,
            want
        );
    }
}

// ---- unknown keys ----

#[test]
fn unknown_top_level_key_is_named() {
    let err = refused("bogus = 1\n", K::UnknownKey, "bogus");
    assert!(
        err.message().contains("security_mode"),
        "lists the keys: {err}"
    );
}

#[test]
fn unknown_key_in_each_table_is_named() {
    refused("[fs]\nread_root = []\n", K::UnknownKey, "fs.read_root");
    refused("[exec]\nbogus = true\n", K::UnknownKey, "exec.bogus");
    refused(
        "[net]\nallow_https = true\n",
        K::UnknownKey,
        "net.allow_https",
    );
    refused("[budgets]\nai_ops = 1\n", K::UnknownKey, "budgets.ai_ops");
}

#[test]
fn unknown_subtable_is_named() {
    refused("[fs.extra]\nx = 1\n", K::UnknownKey, "fs.extra");
    refused("[[exec]]\nenabled = true\n", K::WrongType, "exec");
}

#[test]
fn unknown_key_via_dotted_and_inline_forms_is_named() {
    refused("exec.bogus = 1\n", K::UnknownKey, "exec.bogus");
    refused(
        "net = { allow = [], extra = 1 }\n",
        K::UnknownKey,
        "net.extra",
    );
}

#[test]
fn keys_are_case_sensitive() {
    refused(
        "[fs]\nMax_Read_Bytes = 1\n",
        K::UnknownKey,
        "fs.Max_Read_Bytes",
    );
    refused(
        "Security_Mode = \"restricted\"\n",
        K::UnknownKey,
        "Security_Mode",
    );
}

// ---- duplicated keys ----

#[test]
fn duplicated_key_in_a_table_is_named() {
    let err = refused(
        "[fs]\nmax_read_bytes = 1\nmax_read_bytes = 2\n",
        K::DuplicateKey,
        "fs.max_read_bytes",
    );
    let at = err.problems()[0].location().expect("a place in the file");
    assert_eq!((at.line(), at.column()), (3, 1), "{err}");
}

#[test]
fn duplicated_top_level_key_is_named() {
    refused(
        "security_mode = \"restricted\"\nsecurity_mode = \"trusted_host\"\n",
        K::DuplicateKey,
        "security_mode",
    );
}

#[test]
fn duplicated_table_is_named() {
    refused(
        "[exec]\nenabled = true\n[net]\n[exec]\nshell = \"/bin/sh\"\n",
        K::DuplicateKey,
        "exec",
    );
}

#[test]
fn duplicated_dotted_key_is_named() {
    refused(
        "fs.allow_overwrite = true\nfs.allow_overwrite = false\n",
        K::DuplicateKey,
        "fs.allow_overwrite",
    );
}

#[test]
fn duplicated_key_in_an_inline_table_is_named() {
    refused(
        "net = { allow_http = true, allow_http = false }\n",
        K::DuplicateKey,
        "net.allow_http",
    );
}

/// A quoted key may spell its name with escapes; the second definition is
/// still named by the key it defines (before, the refusal named no key at
/// all, since the escaped text was compared with the key names).
#[test]
fn policy19_duplicated_key_spelled_with_escapes_is_named() {
    refused(
        "[fs]\nwrite_root = \"workspace\"\n\"write\\u005froot\" = \"inputs\"\n",
        K::DuplicateKey,
        "fs.write_root",
    );
    refused(
        "[fs]\nmax_read_bytes = 1\n\"max_read\\U0000005Fbytes\" = 2\n",
        K::DuplicateKey,
        "fs.max_read_bytes",
    );
    refused(
        "\"\\u0066s\".allow_overwrite = true\nfs.allow_overwrite = false\n",
        K::DuplicateKey,
        "fs.allow_overwrite",
    );
}

/// TOML writes integers in hexadecimal, octal and binary too: each is the
/// number it spells (before, the range check dropped its first two digits,
/// so `0x10`, `0o7` and `0b1` were refused as "does not fit a 64-bit
/// signed integer", and one over the range was let through to a second,
/// vaguer refusal).
#[test]
fn policy19_integers_in_every_radix_are_read_as_written() {
    let p = ok("[fs]\nmax_read_bytes = 0x10\nmax_write_bytes = 0b1\n\
                [exec]\nenabled = true\ntimeout_ms = 0o7\nmax_output_bytes = 0xff_ff\n");
    assert_eq!(p.limits().max_read_bytes, 16);
    assert_eq!(p.limits().max_write_bytes, 1);
    assert_eq!(p.exec().timeout_ms, 7);
    assert_eq!(p.exec().max_output_bytes, 0xffff);
    let p = ok("[fs]\nmax_read_bytes = 0x7fff_ffff_ffff_ffff\n");
    assert_eq!(p.limits().max_read_bytes, i64::MAX as u64);
    for big in [
        "0x8000000000000000",
        "0xffffffffffffffff",
        "0o1000000000000000000000",
    ] {
        let err = refused(
            &format!("[fs]\nmax_read_bytes = {big}\n"),
            K::InvalidValue,
            "fs.max_read_bytes",
        );
        assert!(
            err.message().contains(&format!("{big} does not fit")),
            "{err}"
        );
    }
}

#[test]
fn duplicated_quoted_key_is_named() {
    refused(
        "[fs]\nread_roots = [\"inputs\"]\n[budgets]\nfs_ops = 1\n\"fs_ops\" = 2\n",
        K::DuplicateKey,
        "budgets.fs_ops",
    );
}

#[test]
fn duplicated_key_in_an_array_of_tables_is_named() {
    let net = "[net]\nallow = [\"api.example.com\"]\n";
    refused(
        &format!("{net}[[net.rules]]\naction = \"allow\"\nhost = \"api.example.com\"\nhost = \"b.example.com\"\n"),
        K::DuplicateKey,
        "net.rules[0].host",
    );
    refused(
        &format!(
            "{net}[[net.credentials]]\nhost = \"api.example.com\"\nenv = \"A\"\n\
             [[net.credentials]]\nhost = \"api.example.com\"\nheader = \"X-Key\"\nenv = \"B\"\n\
             env = \"C\"\n"
        ),
        K::DuplicateKey,
        "net.credentials[1].env",
    );
}

// ---- wrong types ----

#[test]
fn wrong_type_names_the_key() {
    let err = refused(
        "[fs]\nmax_read_bytes = \"10\"\n",
        K::WrongType,
        "fs.max_read_bytes",
    );
    assert!(
        err.message()
            .contains("expected an integer, found a string"),
        "{err}"
    );
    refused("[exec]\nenabled = \"yes\"\n", K::WrongType, "exec.enabled");
    refused(
        "[exec]\ntimeout_ms = 1.5\n",
        K::WrongType,
        "exec.timeout_ms",
    );
    refused(
        "[exec]\nshell = [\"/bin/sh\"]\n",
        K::WrongType,
        "exec.shell",
    );
    refused(
        "[exec]\nenv_inherit = \"HOME\"\n",
        K::WrongType,
        "exec.env_inherit",
    );
    refused("[net]\nallow_http = 1\n", K::WrongType, "net.allow_http");
    refused(
        "[net]\nallow = \"example.com\"\n",
        K::WrongType,
        "net.allow",
    );
    refused(
        "[budgets]\nfs_ops = \"10\"\n",
        K::WrongType,
        "budgets.fs_ops",
    );
    refused(
        "[fs]\nwrite_root = 1979-05-27\n",
        K::WrongType,
        "fs.write_root",
    );
    refused("security_mode = true\n", K::WrongType, "security_mode");
}

#[test]
fn wrong_type_of_a_table_names_it() {
    refused("fs = 1\n", K::WrongType, "fs");
    refused("budgets = [1]\n", K::WrongType, "budgets");
}

#[test]
fn wrong_type_in_an_array_names_the_element() {
    let err = refused(
        "[fs]\nread_roots = [\"inputs\", 1]\n",
        K::WrongType,
        "fs.read_roots[1]",
    );
    assert!(err.message().contains("found an integer"), "{err}");
    refused(
        "[fs]\ndeny_write = [[\"x\"]]\n",
        K::WrongType,
        "fs.deny_write[0]",
    );
    refused(
        "[exec]\nprocess_allow = [\"git:log\", false]\n",
        K::WrongType,
        "exec.process_allow[1]",
    );
    refused(
        "[net]\nallow = [{ host = \"x\" }]\n",
        K::WrongType,
        "net.allow[0]",
    );
}

#[test]
fn unknown_words_name_the_key() {
    let err = refused(
        "security_mode = \"paranoid\"\n",
        K::InvalidValue,
        "security_mode",
    );
    assert!(err.message().contains("\"trusted_host\""), "{err}");
    refused(
        "[exec]\nconfine = \"strict\"\n",
        K::InvalidValue,
        "exec.confine",
    );
    refused(
        "[exec]\nconfine = \"Required\"\n",
        K::InvalidValue,
        "exec.confine",
    );
}

// ---- syntax ----

#[test]
fn syntax_error_names_the_key_and_line() {
    let err = load("[fs]\nallow_overwrite = true\nmax_read_bytes = \n").unwrap_err();
    assert_eq!(err.kind(), K::Syntax);
    assert_eq!(err.key(), Some("fs.max_read_bytes"));
    assert_eq!(err.problems()[0].location().map(|l| l.line()), Some(3));
}

#[test]
fn syntax_error_in_an_array_of_tables_names_the_key() {
    let err = load(
        "[net]\nallow = [\"api.example.com\"]\n[[net.rules]]\nhost = \"api.example.com\"\n\
         action = allow\n",
    )
    .unwrap_err();
    assert_eq!(err.kind(), K::Syntax);
    assert_eq!(err.key(), Some("net.rules[0].action"), "{err}");
}

#[test]
fn syntax_error_outside_a_key_has_no_key() {
    let err = load("[fs\n").unwrap_err();
    assert_eq!(err.kind(), K::Syntax);
    assert!(err.to_string().starts_with("policy"), "{err}");
}

#[test]
fn non_utf8_is_refused() {
    let fx = Fixture::new();
    let err =
        sandgate_policy::Policy::from_bytes(b"security_mode = \"\xff\"\n", &fx.project(), None)
            .unwrap_err();
    assert_eq!(err.kind(), K::Syntax);
    assert_eq!(err.key(), None);
    assert_eq!(err.to_string(), format!("policy: {}", err.message()));
}

#[test]
fn unreadable_file_is_a_read_error() {
    let fx = Fixture::new();
    let err = sandgate_policy::Policy::load(fx.project().join("missing.toml")).unwrap_err();
    assert_eq!(err.kind(), K::Read);
    assert!(std::error::Error::source(&err).is_some());
    // Named as the caller spelled it, so a user sees which file is missing.
    assert!(
        err.message().contains("`") && err.message().contains("missing.toml"),
        "{err}"
    );
    assert_eq!(
        err.file(),
        Some(fx.project().join("missing.toml").as_path())
    );
    let err = sandgate_policy::Policy::load(fx.project()).unwrap_err();
    assert_eq!(err.kind(), K::Read);
}

#[test]
fn oversized_file_is_refused() {
    let fx = Fixture::new();
    let path = fx.project().join("big.toml");
    let mut text = String::from("# padding\n");
    while text.len() as u64 <= sandgate_policy::MAX_POLICY_BYTES {
        text.push_str("# ...................................................................\n");
    }
    std::fs::write(&path, text).unwrap();
    let err = sandgate_policy::Policy::load(&path).unwrap_err();
    assert_eq!(err.kind(), K::Read);
}

/// A FIFO (or another file that is not a regular one) at the policy path is
/// refused at once, naming it, instead of blocking until some writer opens
/// it; the policy file's bytes are what its digest is taken over.
#[test]
fn fifo_is_refused_without_waiting_for_a_writer() {
    let fx = Fixture::new();
    let path = fx.project().join("fifo.toml");
    assert!(std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap()
        .success());
    let (tx, rx) = std::sync::mpsc::channel();
    let loading = path.clone();
    std::thread::spawn(move || {
        let _ = tx.send(sandgate_policy::Policy::load(&loading).map(|_| ()));
    });
    let err = rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("loading a FIFO as the policy blocked for 5 s")
        .unwrap_err();
    assert_eq!(err.kind(), K::Read);
    assert!(err.to_string().contains("not a regular file"), "{err}");
    assert_eq!(err.file(), Some(path.as_path()));
    for device in ["/dev/null", "/dev/zero"] {
        let err = sandgate_policy::Policy::load(device).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}

/// The path checked before the open is not the file opened: a policy name
/// that turns into a FIFO between the two (here a symlink swapped, over
/// and over, between a policy and a FIFO no one writes) must not block the
/// open until some writer comes. Every load answers, at once, the policy
/// or "not a regular file".
#[test]
fn a_policy_swapped_for_a_fifo_at_open_time_never_blocks() {
    use std::os::unix::fs::symlink;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let fx = Fixture::new();
    let (real, fifo) = (fx.project().join("real.toml"), fx.path("elsewhere/fifo"));
    std::fs::write(&real, "").unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (path, tmp) = (fx.project().join("policy.toml"), fx.project().join("next"));
    symlink(&real, &path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, real, fifo, path, tmp) = (
            Arc::clone(&stop),
            real.clone(),
            fifo.clone(),
            path.clone(),
            tmp.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for target in [&fifo, &real] {
                    let _ = std::fs::remove_file(&tmp);
                    symlink(target, &tmp).unwrap();
                    std::fs::rename(&tmp, &path).unwrap();
                }
            }
        })
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let loading = path.clone();
    std::thread::spawn(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
        let (mut ok, mut refused) = (0, 0);
        while std::time::Instant::now() < until {
            match sandgate_policy::Policy::load(&loading) {
                Ok(_) => ok += 1,
                Err(e) => {
                    assert_eq!(e.kind(), K::Read, "{e}");
                    assert!(e.to_string().contains("not a regular file"), "{e}");
                    refused += 1;
                }
            }
        }
        let _ = tx.send((ok, refused));
    });
    let answer = rx.recv_timeout(std::time::Duration::from_secs(10));
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    if answer.is_err() {
        // Free the blocked open before failing.
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
    }
    let (ok, refused) = answer.expect("a load blocked on a FIFO swapped in after the check");
    assert!(ok > 0 && refused > 0, "{ok} loaded, {refused} refused");
}
