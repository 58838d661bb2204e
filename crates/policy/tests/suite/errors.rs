//! The refusal texts a user reads, against tests/golden/errors.txt: the
//! file, the dotted key, line and column, the source line with a caret
//! under the offending part, a "did you mean" where a known spelling is
//! close, and every independent problem at once, in file order.
//!
//! The fixture's directory differs from run to run and is written `$DIR`.
//! Run with `SANDGATE_BLESS=1` to record the texts anew when a change is
//! intended, and read the diff.

use std::fs;
use std::path::Path;

use crate::common::Fixture;

/// Malformed policies, each with a name.
const CASES: &[(&str, &str)] = &[
    (
        "unknown key, close to a known one",
        "[fs]\nread_rots = [\"inputs\"]\n",
    ),
    ("unknown key, nothing close", "colour = \"blue\"\n"),
    (
        "unknown table, close to a known one",
        "[exce]\nenabled = true\n",
    ),
    (
        "unknown key in an inline table",
        "net = { allow = [], alow_http = true }\n",
    ),
    ("keys are case-sensitive", "[fs]\nMax_Read_Bytes = 1\n"),
    ("wrong type", "[fs]\nmax_read_bytes = \"10\"\n"),
    (
        "wrong type of an array element",
        "[fs]\nread_roots = [\"inputs\", 1]\n",
    ),
    ("a section that is not a table", "budgets = [1]\n"),
    ("confine word misspelt", "[exec]\nconfine = \"requried\"\n"),
    (
        "security_mode word misspelt",
        "security_mode = \"trusted-host\"\n",
    ),
    (
        "security_mode word unknown",
        "security_mode = \"paranoid\"\n",
    ),
    (
        "duplicated key",
        "[fs]\nwrite_root = \"workspace\"\nwrite_root = \"inputs\"\n",
    ),
    (
        "duplicated table",
        "[exec]\nenabled = true\n[net]\n[exec]\nshell = \"/bin/sh\"\n",
    ),
    (
        "syntax error: unclosed table header",
        "security_mode = \"restricted\"\n[fs\nread_roots = [\"inputs\"]\n",
    ),
    (
        "syntax error: a value missing",
        "[fs]\nallow_overwrite = true\nmax_read_bytes = \n",
    ),
    (
        "two bad keys at once, in file order",
        "[fs]\nread_roots = [\"inputs\"]\nmax_read_byte = 10\n\n[exec]\nenabeld = true\n",
    ),
    (
        "a bad key and a missing root together",
        "[fs]\nread_roots = [\"inputs\", \"nope\"]\nwrite_rot = \"workspace\"\n",
    ),
    (
        "timeout out of range",
        "[exec]\nenabled = true\ntimeout_ms = 86400001\n",
    ),
    (
        "write root holding the policy",
        "[fs]\nwrite_root = \".\"\n",
    ),
    (
        "process_allow in restricted mode",
        "[fs]\nwrite_root = \"workspace\"\n[exec]\nprocess_allow = [\"git:status\", \"curl\"]\n",
    ),
    (
        "net entries: malformed, and refused in restricted mode",
        "[net]\nallow = [\"http://example.com\", \"localhost:7655\", \"api.example.com\"]\n",
    ),
    (
        "a budget without its capability",
        "[exec]\nenabled = false\n[budgets]\nexec_ops = 3\n",
    ),
    (
        "a refused grant does not also refuse its budget",
        "[exec]\nenabled = \"yes\"\n[budgets]\nexec_ops = 3\n",
    ),
    (
        "columns count characters",
        "[fs]\ndeny_write = [\"é\", \"ü\", 1]\n",
    ),
    (
        "an integer beyond 64 bits",
        "[fs]\nread_roots = [\"inputs\"]\n[budgets]\nfs_ops = 99999999999999999999\n",
    ),
];

fn render(fx: &Fixture, name: &str, text: &str) -> String {
    let err = fx
        .load(text)
        .err()
        .unwrap_or_else(|| panic!("{name}: loaded"));
    let dir = fx.project().display().to_string();
    let canon = fx.canon("project").display().to_string();
    let shown = err
        .to_string()
        .replace(&canon, "$DIR")
        .replace(&dir, "$DIR");
    format!("=== {name}\n{text}---\n{shown}\n\n")
}

#[test]
fn refusal_texts_match_the_recorded_ones() {
    let fx = Fixture::new();
    let now: String = CASES.iter().map(|(n, t)| render(&fx, n, t)).collect();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/errors.txt");
    if std::env::var_os("SANDGATE_BLESS").is_some() {
        fs::create_dir_all(golden.parent().unwrap()).unwrap();
        fs::write(&golden, &now).unwrap();
        return;
    }
    let recorded = fs::read_to_string(&golden).expect("tests/golden/errors.txt");
    for (a, b) in now.split("=== ").zip(recorded.split("=== ")) {
        assert_eq!(a, b, "a refusal text changed");
    }
    assert_eq!(now, recorded);
}

#[test]
fn every_problem_is_reported_in_file_order() {
    let fx = Fixture::new();
    let err = fx
        .load("[fs]\nread_roots = [\"inputs\", \"nope\"]\nwrite_rot = \"workspace\"\n[exec]\nconfine = \"strict\"\n")
        .unwrap_err();
    let keys: Vec<_> = err.problems().iter().map(|p| p.key().unwrap()).collect();
    assert_eq!(keys, ["fs.read_roots[1]", "fs.write_rot", "exec.confine"]);
    let lines: Vec<_> = err
        .problems()
        .iter()
        .map(|p| p.location().unwrap().line())
        .collect();
    assert_eq!(lines, [2, 3, 5]);
}

/// A policy file name holding bytes that are not UTF-8 is shown with
/// them as `\xNN`, never as U+FFFD (which can be a real name of its own,
/// here one lying beside it): in `cannot read the policy file`, in `not a
/// regular file` and on the `-->` line of a problem in the file.
#[test]
fn leads22_a_file_name_not_utf8_is_shown_as_its_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fx = Fixture::new();
    let named = |b: &[u8]| fx.project().join(OsStr::from_bytes(b));
    // The lossy spellings, real files of their own.
    for lossy in ["gone\u{fffd}.toml", "dir\u{fffd}.toml", "bad\u{fffd}.toml"] {
        fs::write(fx.project().join(lossy), "").unwrap();
    }
    let gone = sandgate_policy::Policy::load(named(b"gone\xff.toml")).unwrap_err();
    fs::create_dir(named(b"dir\xfe.toml")).unwrap();
    let dir = sandgate_policy::Policy::load(named(b"dir\xfe.toml")).unwrap_err();
    fs::write(named(b"bad\xfd.toml"), "colour = \"blue\"\n").unwrap();
    let bad = sandgate_policy::Policy::load(named(b"bad\xfd.toml")).unwrap_err();
    for (err, want) in [
        (&gone, "cannot read the policy file"),
        (&dir, "is not a regular file"),
        (&bad, "-->"),
    ] {
        let text = err.to_string();
        assert!(text.contains(want), "{text}");
        assert!(!text.contains('\u{fffd}'), "shown lossily: {text}");
    }
    assert!(gone.to_string().contains("gone\\xff.toml"), "{gone}");
    assert!(dir.to_string().contains("dir\\xfe.toml"), "{dir}");
    assert!(bad.to_string().contains("bad\\xfd.toml:1:1"), "{bad}");
}

/// A root whose path is not UTF-8 (the policy's own directory's name is
/// not) is named with those bytes as `\xNN` where it is refused, never as
/// U+FFFD.
#[test]
fn leads22_a_root_path_not_utf8_is_shown_as_its_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fx = Fixture::new();
    let home = fx.project().join(OsStr::from_bytes(b"d\xfc"));
    fs::create_dir(&home).unwrap();
    fs::write(home.join("a-file"), "").unwrap();
    let path = home.join("policy.toml");
    for (text, want) in [
        ("[fs]\nread_roots = [\"nope\"]\n", "does not exist"),
        ("[fs]\nread_roots = [\"a-file\"]\n", "is not a directory"),
    ] {
        fs::write(&path, text).unwrap();
        let err = sandgate_policy::Policy::load(&path)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}");
        assert!(err.contains("d\\xfc/"), "{err}");
        assert!(!err.contains('\u{fffd}'), "shown lossily: {err}");
    }
}

/// A policy file or root whose name holds a literal backslash is shown
/// with it doubled, so that `gone\xff.toml` (the four characters) and
/// `gone` + the byte 0xFF + `.toml` are never shown alike: in `cannot read
/// the policy file`, in `not a regular file`, on the `-->` line and where
/// a root is refused. A name without a backslash is shown as before.
#[test]
fn shown23_a_backslash_in_a_name_is_shown_doubled() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let fx = Fixture::new();
    let named = |b: &[u8]| fx.project().join(OsStr::from_bytes(b));
    let load = |b: &[u8]| {
        sandgate_policy::Policy::load(named(b))
            .unwrap_err()
            .to_string()
    };
    // Missing files.
    let (byte, text) = (load(b"gone\xff.toml"), load(b"gone\\xff.toml"));
    assert_ne!(byte, text, "two files, one message");
    assert!(byte.contains("gone\\xff.toml`"), "{byte}");
    assert!(text.contains("gone\\\\xff.toml`"), "{text}");
    // Directories.
    fs::create_dir(named(b"dir\xfe.toml")).unwrap();
    fs::create_dir(named(b"dir\\xfe.toml")).unwrap();
    let (byte, text) = (load(b"dir\xfe.toml"), load(b"dir\\xfe.toml"));
    assert_ne!(byte, text, "two files, one message");
    assert!(
        text.contains("dir\\\\xfe.toml` is not a regular file"),
        "{text}"
    );
    // A problem in the file, on the `-->` line.
    fs::write(named(b"bad\xfd.toml"), "colour = \"blue\"\n").unwrap();
    fs::write(named(b"bad\\xfd.toml"), "colour = \"blue\"\n").unwrap();
    let (byte, text) = (load(b"bad\xfd.toml"), load(b"bad\\xfd.toml"));
    assert_ne!(byte, text, "two files, one message");
    assert!(byte.contains("/bad\\xfd.toml:1:1"), "{byte}");
    assert!(text.contains("/bad\\\\xfd.toml:1:1"), "{text}");
    // A root refused, in a directory named with a byte or with the text.
    let mut roots = Vec::new();
    for dir in [&b"d\xfc"[..], &b"d\\xfc"[..]] {
        let home = named(dir);
        fs::create_dir(&home).unwrap();
        fs::write(home.join("a-file"), "").unwrap();
        let path = home.join("policy.toml");
        let mut shown = Vec::new();
        for text in [
            "[fs]\nread_roots = [\"nope\"]\n",
            "[fs]\nread_roots = [\"a-file\"]\n",
        ] {
            fs::write(&path, text).unwrap();
            shown.push(
                sandgate_policy::Policy::load(&path)
                    .unwrap_err()
                    .to_string(),
            );
        }
        roots.push(shown);
    }
    for (byte, text) in roots[0].iter().zip(&roots[1]) {
        assert_ne!(byte, text, "two roots, one message");
        assert!(byte.contains("/d\\xfc/"), "{byte}");
        assert!(text.contains("/d\\\\xfc/"), "{text}");
    }
    // An ordinary name is shown as it is.
    let plain = load(b"plain-name.toml");
    assert!(plain.contains("/plain-name.toml`"), "{plain}");
}

/// A control character in a name a refusal shows (a line feed, a tab, an
/// escape) and a bidirectional control are written `\u{…}`, so that the
/// name cannot add a line of its own to the message (a forged `-->` line)
/// nor reorder or hide what follows it.
#[test]
fn shown23_a_control_in_a_name_is_shown_escaped() {
    let fx = Fixture::new();
    let name = "gone\n--> elsewhere.toml:1:1\t\u{1b}[2J\u{202e}.toml";
    let err = sandgate_policy::Policy::load(fx.project().join(name))
        .unwrap_err()
        .to_string();
    assert!(!err.contains('\n'), "a line of its own: {err}");
    assert!(
        err.contains("gone\\u{a}--> elsewhere.toml:1:1\\u{9}\\u{1b}[2J\\u{202e}.toml`"),
        "{err}"
    );
    // A root in a directory whose name holds a line feed.
    let home = fx.project().join("d\nx");
    fs::create_dir(&home).unwrap();
    let path = home.join("policy.toml");
    fs::write(&path, "[fs]\nread_roots = [\"nope\"]\n").unwrap();
    let err = sandgate_policy::Policy::load(&path)
        .unwrap_err()
        .to_string();
    let first = err.lines().next().unwrap();
    assert!(first.contains("/d\\u{a}x/nope"), "{err}");
    assert!(err.lines().nth(1).unwrap().contains("-->"), "{err}");
}
