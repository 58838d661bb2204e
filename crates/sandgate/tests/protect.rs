//! Deny-write patterns bind the shell: every attack on a protected path
//! runs in one command after a control that does the same to an
//! unprotected path, and afterwards the protected state (entries, content,
//! mode, owner, link count, link targets) equals the state before. Each
//! test runs on the floor (no namespaces) and, where the host allows them,
//! in namespaces. Run as root and as uid 65534 (`cargo xtask
//! unprivileged`).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use sandgate::fileguard::{Guard, GuardBuilder};
use sandgate::policy::SecurityMode;
use sandgate::{ExecOptions, ExecResult, Executor, ProtectedAction};

const PATTERNS: &[&str] = &["*.lock", ".github/**"];

struct Fx {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

fn write(p: &Path, data: &str) {
    if let Some(d) = p.parent() {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(p, data).unwrap();
}

fn have_git() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A write root with protected files at several depths, a workflow, a
/// protected symlink, unprotected files, and (with `git`) a repository.
fn fixture(git: bool) -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().to_path_buf();
    fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).unwrap();
    let root = base.join("work");
    fs::create_dir(&root).unwrap();
    write(&root.join("Cargo.lock"), "lock v1\n");
    write(&root.join("pkg/deep/yarn.lock"), "yarn v1\n");
    write(&root.join(".github/workflows/ci.yml"), "on: push\n");
    write(&root.join("free.txt"), "free\n");
    write(&root.join("src/main.rs"), "fn main() {}\n");
    fs::set_permissions(root.join("Cargo.lock"), fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("Cargo.lock", root.join("link.lock")).unwrap();
    if git && have_git() {
        let ok = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&root)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        write(&root.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
    }
    Fx {
        _tmp: tmp,
        base,
        root,
    }
}

fn executor(fx: &Fx, namespaces: bool, restricted: bool, patterns: &[&str]) -> Executor {
    let mut b = Executor::builder();
    b.write_root(&fx.root)
        .enabled(true)
        .timeout_ms(60_000)
        .namespaces(namespaces)
        .security_mode(if restricted {
            SecurityMode::Restricted
        } else {
            SecurityMode::TrustedHost
        });
    for p in patterns {
        b.deny_write(*p);
    }
    let ex = b.build().unwrap();
    ex.start().unwrap();
    // In namespaces, a protected directory named whole by a pattern
    // (`.github/**`) that is missing is made empty before the first
    // command, to be bound read-only: make it now, so that the tests'
    // "before" holds it.
    ex.exec("true", ExecOptions::default()).unwrap();
    ex
}

fn guard(restricted: bool, patterns: &[&str]) -> Guard {
    GuardBuilder::new()
        .patterns(patterns.iter())
        .restricted(restricted)
        .build()
        .unwrap()
}

/// What the protected state is made of, per entry.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Snap {
    kind: &'static str,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u64,
    body: Vec<u8>,
}

/// Every protected entry beneath `root`, found by a walk that follows no
/// symlink.
fn state(root: &Path, guard: &Guard) -> BTreeMap<String, Snap> {
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel)).unwrap() {
            let e = e.unwrap();
            let child = rel.join(e.file_name());
            let md = fs::symlink_metadata(root.join(&child)).unwrap();
            let text = String::from_utf8_lossy(child.as_os_str().as_bytes()).into_owned();
            if guard.check_write(&text, None).is_refused() {
                let (kind, body) = if md.file_type().is_symlink() {
                    let t = fs::read_link(root.join(&child)).unwrap();
                    ("symlink", t.as_os_str().as_bytes().to_vec())
                } else if md.is_dir() {
                    ("dir", Vec::new())
                } else {
                    ("file", fs::read(root.join(&child)).unwrap())
                };
                out.insert(
                    text,
                    Snap {
                        kind,
                        mode: md.mode(),
                        uid: md.uid(),
                        gid: md.gid(),
                        nlink: if md.is_dir() { 0 } else { md.nlink() },
                        body,
                    },
                );
            }
            if md.is_dir() {
                stack.push(child);
            }
        }
    }
    out
}

/// Modes to run in: always the floor; namespaces too when the host has
/// them.
fn modes() -> Vec<bool> {
    vec![false, true]
}

fn run(ex: &Executor, command: &str) -> ExecResult {
    ex.exec(command, ExecOptions::default()).unwrap()
}

/// Runs `control && attack` in one command; the control must take effect
/// (checked by `control_ok`), the protected state must be unchanged, and
/// at least one change must be reported. Answers the result.
fn attack_with(
    fx: &Fx,
    ex: &Executor,
    g: &Guard,
    control: &str,
    attack: &str,
    control_ok: impl Fn(&Path) -> bool,
) -> ExecResult {
    let before = state(&fx.root, g);
    let r = run(ex, &format!("{control} && {{ {attack} ; }}; exit 0"));
    assert!(
        control_ok(&fx.root),
        "the control `{control}` did not take effect: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let after = state(&fx.root, g);
    assert_eq!(
        before,
        after,
        "`{attack}` changed the protected state; reported {:?}; stderr {}",
        r.protected_changes,
        String::from_utf8_lossy(&r.stderr)
    );
    // In the view the read-only binds refuse most attacks while the
    // command runs: then nothing changed and the command saw the error.
    assert!(
        !r.protected_changes.is_empty() || refused_in_flight(&r),
        "`{attack}` was undone but not reported: exit {} stderr {}",
        r.exit_code,
        String::from_utf8_lossy(&r.stderr)
    );
    r
}

/// The command ran with protected entries bound read-only and saw an
/// error from the kernel for its attack (`EROFS`, `EBUSY`, `EXDEV`).
fn refused_in_flight(r: &ExecResult) -> bool {
    let err = String::from_utf8_lossy(&r.stderr);
    r.confined.protected_binds.is_some_and(|b| b.bound > 0)
        && [
            "Read-only file system",
            "Device or resource busy",
            "Invalid cross-device link",
        ]
        .iter()
        .any(|e| err.contains(e))
}

/// A control writing `free.txt`, and its check.
const CONTROL: &str = "echo control > ctl.txt";
fn control_ok(root: &Path) -> bool {
    fs::read_to_string(root.join("ctl.txt")).is_ok_and(|s| s == "control\n")
}

/// Runs each attack in a fresh fixture, in every mode.
fn each_attack(git: bool, restricted: bool, patterns: &[&str], attacks: &[&str]) {
    for ns in modes() {
        for attack in attacks {
            let fx = fixture(git);
            let ex = executor(&fx, ns, restricted, patterns);
            let g = guard(restricted, patterns);
            attack_with(&fx, &ex, &g, CONTROL, attack, control_ok);
        }
    }
}

#[test]
fn writes_to_existing_and_missing_workflows_are_undone() {
    each_attack(
        false,
        false,
        PATTERNS,
        &[
            "echo evil > .github/workflows/ci.yml",
            "echo evil > .github/workflows/x.yml",
            "echo evil >> .github/workflows/ci.yml",
            "rm -rf .github",
            "mv .github gh && echo evil > gh/workflows/ci.yml",
            "rm -rf .github && mkdir -p .github/workflows && echo evil > .github/workflows/ci.yml",
        ],
    );
}

#[test]
fn a_workflow_directory_made_from_nothing_is_quarantined_never_deleted() {
    for ns in modes() {
        let fx = fixture(false);
        fs::remove_dir_all(fx.root.join(".github")).unwrap();
        let ex = executor(&fx, ns, false, PATTERNS);
        let g = guard(false, PATTERNS);
        let r = attack_with(
            &fx,
            &ex,
            &g,
            CONTROL,
            "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/x.yml",
            control_ok,
        );
        if ns && refused_in_flight(&r) {
            // In the view `.github` was made empty before the first
            // command and bound read-only: nothing could be made in it.
            assert_eq!(fs::read_dir(fx.root.join(".github")).unwrap().count(), 0);
            assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
            continue;
        }
        assert!(!fx.root.join(".github").exists());
        assert_eq!(r.protected_changes.len(), 1, "{:?}", r.protected_changes);
        let c = &r.protected_changes[0];
        assert_eq!(
            (c.path.as_str(), c.pattern.as_str(), c.action),
            (".github", ".github/**", ProtectedAction::Quarantined)
        );
        // The quarantine beside the root holds it, whole.
        let q = fx.base.join(".work.sandgate-quarantine");
        let stamps: Vec<_> = fs::read_dir(&q)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(stamps.len(), 1);
        assert_eq!(
            fs::read_to_string(stamps[0].join(".github/workflows/x.yml")).unwrap(),
            "on: push\n"
        );
    }
}

#[test]
fn new_lock_files_at_any_depth_and_spelling_are_quarantined() {
    each_attack(
        false,
        false,
        PATTERNS,
        &[
            "touch new.lock",
            "mkdir -p a/b/c && touch a/b/c/new.lock",
            "touch pkg/deep/other.lock",
            "echo x > Cargo.LOCK",
            "mkdir -p .GITHUB/workflows && echo x > .GITHUB/workflows/x.yml",
            // NFD: `é` as `e` + combining acute, in a name the pattern spells
            // in NFC.
            "touch \"$(printf 'caf\\x65\\xcc\\x81.lock')\"",
        ],
    );
}

#[test]
fn unicode_spellings_of_a_pattern_are_protected() {
    let nfc: &[&str] = &["caf\u{e9}/**"];
    for ns in modes() {
        let fx = fixture(false);
        let ex = executor(&fx, ns, false, nfc);
        let g = guard(false, nfc);
        attack_with(
            &fx,
            &ex,
            &g,
            CONTROL,
            "mkdir -p \"$(printf 'cafe\\xcc\\x81')\" && touch \"$(printf 'cafe\\xcc\\x81/x')\"",
            control_ok,
        );
    }
}

#[test]
fn overwrite_append_and_chmod_of_a_protected_file_are_undone() {
    each_attack(
        false,
        false,
        PATTERNS,
        &[
            "echo evil > Cargo.lock",
            "echo evil >> Cargo.lock",
            "chmod 777 Cargo.lock",
            "echo evil > pkg/deep/yarn.lock",
            ": > Cargo.lock",
            "truncate -s 0 Cargo.lock",
        ],
    );
}

#[test]
fn mv_rm_ln_cp_install_onto_or_from_protected_files_are_undone() {
    each_attack(
        false,
        false,
        PATTERNS,
        &[
            "mv Cargo.lock moved",
            "mv free.txt Cargo.lock",
            "rm Cargo.lock",
            "rm -f link.lock",
            "ln Cargo.lock hard",
            "ln -f free.txt Cargo.lock",
            "ln -sf /etc/passwd Cargo.lock",
            "ln -sfn src link.lock",
            "cp --remove-destination free.txt Cargo.lock",
            "install -m 0755 free.txt Cargo.lock",
            "install -D -m 0644 free.txt .github/workflows/new.yml",
        ],
    );
}

#[test]
fn renaming_a_protected_files_parent_is_undone() {
    each_attack(
        false,
        false,
        PATTERNS,
        &[
            "mv pkg pkg2",
            "mv pkg pkg2 && echo evil > pkg2/deep/yarn.lock",
            "mv pkg/deep pkg/deep2 && mkdir pkg/deep && echo evil > pkg/deep/yarn.lock",
            "rm -rf pkg",
            "mv pkg pkg2 && ln -s pkg2 pkg",
        ],
    );
}

#[test]
fn python_renames_links_and_exchanges_are_undone() {
    if Command::new("/usr/bin/python3").arg("-V").output().is_err() {
        eprintln!("skipped: no python3");
        return;
    }
    each_attack(
        false,
        false,
        PATTERNS,
        &[
            "/usr/bin/python3 -c 'import os; os.rename(\"free.txt\", \"Cargo.lock\")'",
            "/usr/bin/python3 -c 'import os; os.replace(\"src/main.rs\", \"pkg/deep/yarn.lock\")'",
            "/usr/bin/python3 -c 'import os; os.link(\"free.txt\", \"new.lock\")'",
            "/usr/bin/python3 -c 'import os; os.link(\"Cargo.lock\", \"hard\")'",
            // renameat2(AT_FDCWD, "free.txt", AT_FDCWD, "Cargo.lock", RENAME_EXCHANGE)
            "/usr/bin/python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); \
             r = l.syscall(316, -100, b\"free.txt\", -100, b\"Cargo.lock\", 2); \
             assert r == 0, os.strerror(ctypes.get_errno())'",
        ],
    );
}

#[test]
fn writes_through_a_symlink_the_command_made_are_undone() {
    each_attack(
        false,
        false,
        PATTERNS,
        &[
            "ln -s Cargo.lock l && echo evil > l",
            "ln -s .github/workflows w && echo evil > w/ci.yml",
            "echo evil > link.lock",
        ],
    );
}

/// A symbolic link the command makes at a name above what an anchored
/// pattern protects (`.claude` under `.claude/settings.json`,
/// `.github/workflows` under `.github/workflows/*.yml`) would make the
/// protected path lead to a file the command wrote: it is quarantined and
/// reported, while a link elsewhere is kept. Before, both links stayed and
/// `.claude/settings.json` read the command's file, unreported.
#[test]
fn a_link_made_above_protected_paths_is_quarantined() {
    let patterns = &[".claude/settings.json", ".github/workflows/*.yml"];
    for ns in modes() {
        let fx = fixture(false);
        fs::remove_dir_all(fx.root.join(".github")).unwrap();
        let ex = executor(&fx, ns, false, patterns);
        let r = run(
            &ex,
            "mkdir x y .github && echo evil > x/settings.json && echo bad > y/ci.yml \
             && ln -s x .claude && ln -s ../y .github/workflows && ln -s x kept \
             && cat .claude/settings.json .github/workflows/ci.yml",
        );
        let out = String::from_utf8_lossy(&r.stdout);
        assert_eq!(
            out,
            "evil\nbad\n",
            "ns {ns}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        for link in [".claude", ".github/workflows"] {
            assert!(
                fs::symlink_metadata(fx.root.join(link)).is_err(),
                "ns {ns}: {link} is still there; reported {:?}",
                r.protected_changes
            );
        }
        // The link elsewhere and the command's own files stay.
        assert_eq!(fs::read_link(fx.root.join("kept")).unwrap(), Path::new("x"));
        assert_eq!(
            fs::read_to_string(fx.root.join("x/settings.json")).unwrap(),
            "evil\n"
        );
        let reported: Vec<&str> = r
            .protected_changes
            .iter()
            .map(|c| c.path.as_str())
            .collect();
        assert!(
            reported.contains(&".claude") && reported.contains(&".github/workflows"),
            "ns {ns}: {reported:?}"
        );
        // A later command finds neither protected path.
        let r = run(&ex, "cat .claude/settings.json .github/workflows/ci.yml");
        assert_eq!(String::from_utf8_lossy(&r.stdout), "", "ns {ns}");
    }
}

/// Under patterns with a leading `**` (`**/secrets/*.json`,
/// `**/.github/workflows/*`), a symbolic link at a name whose paths beneath
/// would match only there (`ln -s mine secrets` makes `secrets/a.json`
/// read the command's `mine/a.json`) is a new protected entry; but every
/// other link, the command's own (`ln -s mine kept`, as package managers
/// make by the hundred) and the host's (removed by the command), was taken
/// for one too, quarantined or put back, since a leading `**` makes every
/// name an ancestor of what it protects. What lies beneath such a link
/// matches beneath its target alike. (Beneath a target outside the root,
/// no pattern protects anything: a link to one is kept too, which
/// SECURITY.md states as a limit.)
#[test]
fn links19_a_link_under_a_leading_double_star_is_judged_by_what_lies_beneath() {
    let patterns = &["**/secrets/*.json", "**/.github/workflows/*"];
    for ns in modes() {
        let fx = fixture(false);
        fs::remove_dir_all(fx.root.join(".github")).unwrap();
        std::os::unix::fs::symlink("src", fx.root.join("host_link")).unwrap();
        let ex = executor(&fx, ns, false, patterns);
        let outside = fx.base.join("outside");
        let r = run(
            &ex,
            &format!(
                "mkdir -p mine/workflows sub && echo evil > mine/a.json && echo bad > mine/workflows/ci \
                 && ln -s mine secrets && ln -s ../mine sub/secrets && ln -s mine .github \
                 && ln -s mine kept && ln -s ../mine sub/kept && rm host_link \
                 && ln -s {} far \
                 && cat secrets/a.json sub/secrets/a.json .github/workflows/ci",
                outside.display()
            ),
        );
        assert_eq!(
            String::from_utf8_lossy(&r.stdout),
            "evil\nevil\nbad\n",
            "ns {ns}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        for link in ["secrets", "sub/secrets", ".github"] {
            assert!(
                fs::symlink_metadata(fx.root.join(link)).is_err(),
                "ns {ns}: {link} is still there; reported {:?}",
                r.protected_changes
            );
        }
        assert_eq!(
            fs::read_link(fx.root.join("kept")).ok(),
            Some(PathBuf::from("mine")),
            "ns {ns}: reported {:?}",
            r.protected_changes
        );
        assert_eq!(
            fs::read_link(fx.root.join("sub/kept")).ok(),
            Some(PathBuf::from("../mine")),
            "ns {ns}"
        );
        assert!(
            fs::symlink_metadata(fx.root.join("host_link")).is_err(),
            "ns {ns}: the host's ordinary link came back"
        );
        assert_eq!(fs::read_link(fx.root.join("far")).ok(), Some(outside));
        let mut reported: Vec<&str> = r
            .protected_changes
            .iter()
            .map(|c| c.path.as_str())
            .collect();
        reported.sort_unstable();
        assert_eq!(reported, [".github", "secrets", "sub/secrets"], "ns {ns}");
    }
}

/// Links at a protected file's parent made in other ways: the parent
/// renamed away and a link to it put in its place, a link changed to
/// another target in a second command, a chain of links, a link swapped
/// for a directory and back, and a hard link to a protected file. After
/// each command the protected state is the host's, and the parent is the
/// host's directory again.
#[test]
fn links19_links_at_a_protected_parent_made_other_ways_are_undone() {
    let patterns = &[".github/workflows/*.yml", ".claude/settings.json", "*.lock"];
    for ns in modes() {
        let fx = fixture(false);
        write(&fx.root.join(".claude/settings.json"), "{}\n");
        let ex = executor(&fx, ns, false, patterns);
        let g = guard(false, patterns);
        let ino = |p: &str| fs::symlink_metadata(fx.root.join(p)).unwrap().ino();
        let gh = ino(".github");
        for attack in [
            "mv .github gh && ln -s gh .github && echo evil > gh/workflows/ci.yml",
            "mv .claude cl && mkdir mine && echo evil > mine/settings.json && ln -s mine .claude",
            "mkdir -p a b && echo 1 > a/settings.json && echo 2 > b/settings.json \
             && mv .claude old && ln -sfn a .claude",
            "rm -rf .claude && mkdir -p m && echo evil > m/settings.json && ln -s m l1 && ln -s l1 .claude",
            "rm -rf .claude && ln -s m .claude && rm .claude && mkdir .claude && echo x > .claude/settings.json",
            "ln Cargo.lock hard && echo evil > hard",
        ] {
            attack_with(&fx, &ex, &g, CONTROL, attack, control_ok);
            assert_eq!(ino(".github"), gh, "ns {ns}: `{attack}`");
            assert!(fs::symlink_metadata(fx.root.join(".claude")).unwrap().is_dir());
            assert_eq!(
                fs::read_to_string(fx.root.join(".claude/settings.json")).unwrap(),
                "{}\n",
                "ns {ns}: `{attack}`"
            );
            assert_eq!(
                fs::read_to_string(fx.root.join(".github/workflows/ci.yml")).unwrap(),
                "on: push\n",
                "ns {ns}: `{attack}`"
            );
        }
        // A link the host keeps above protected paths, pointed elsewhere
        // in one command and again in the next, comes back each time.
        write(&fx.root.join("conf/vscode/settings.json"), "{}\n");
        std::os::unix::fs::symlink("conf/vscode", fx.root.join(".vscode")).unwrap();
        let patterns = &[".vscode/settings.json", "*.lock"];
        let ex = executor(&fx, ns, false, patterns);
        let g = guard(false, patterns);
        for attack in [
            "mkdir -p a b && echo 1 > a/settings.json && echo 2 > b/settings.json && ln -sfn a .vscode",
            "ln -sfn b .vscode",
            "rm .vscode && mkdir .vscode && echo 3 > .vscode/settings.json",
            "rm .vscode && ln -s l1 .vscode && ln -s a l1",
        ] {
            attack_with(&fx, &ex, &g, CONTROL, attack, control_ok);
            assert_eq!(
                fs::read_link(fx.root.join(".vscode")).ok(),
                Some(PathBuf::from("conf/vscode")),
                "ns {ns}: `{attack}`"
            );
            assert_eq!(
                fs::read_to_string(fx.root.join(".vscode/settings.json")).unwrap(),
                "{}\n",
                "ns {ns}: `{attack}`"
            );
        }
    }
}

/// Pins a limit (SECURITY.md, "What sandgate does not protect"): patterns
/// judge names, so of a host's chain of links above protected paths
/// (`.vscode -> l1 -> conf/vscode` under `.vscode/settings.json`) only the
/// first is a protected entry: a command that points `l1` elsewhere makes
/// `.vscode/settings.json` read its own file, unreported, as writing
/// `conf/vscode/settings.json` itself would.
#[test]
fn links19_a_link_a_protected_link_leads_through_is_not_protected() {
    let patterns = &[".vscode/settings.json"];
    for ns in modes() {
        let fx = fixture(false);
        write(&fx.root.join("conf/vscode/settings.json"), "{}\n");
        std::os::unix::fs::symlink("conf/vscode", fx.root.join("l1")).unwrap();
        std::os::unix::fs::symlink("l1", fx.root.join(".vscode")).unwrap();
        let ex = executor(&fx, ns, false, patterns);
        let r = run(
            &ex,
            "mkdir -p evil && echo x > evil/settings.json && ln -sfn evil l1",
        );
        assert!(
            r.protected_changes.is_empty(),
            "ns {ns}: {:?}",
            r.protected_changes
        );
        assert_eq!(
            fs::read_to_string(fx.root.join(".vscode/settings.json")).unwrap(),
            "x\n",
            "ns {ns}"
        );
        assert_eq!(
            fs::read_link(fx.root.join(".vscode")).unwrap(),
            Path::new("l1")
        );
    }
}

/// `touch -d` sets mtime back; the same-size rewrite keeps the size. ctime
/// still moves, and the content is compared.
#[test]
fn a_forged_mtime_does_not_hide_a_change() {
    for ns in modes() {
        let fx = fixture(false);
        let ex = executor(&fx, ns, false, PATTERNS);
        let g = guard(false, PATTERNS);
        let md = fs::metadata(fx.root.join("Cargo.lock")).unwrap();
        let attack = format!(
            "printf 'lock v2\\n' > Cargo.lock && touch -d @{}.{:09} Cargo.lock",
            md.mtime(),
            md.mtime_nsec()
        );
        attack_with(&fx, &ex, &g, CONTROL, &attack, control_ok);
        // And an old forged time on a new file does not hide it either.
        attack_with(
            &fx,
            &ex,
            &g,
            "echo again > free.txt",
            "touch -d 2001-01-01 made.lock",
            |r: &Path| fs::read_to_string(r.join("free.txt")).unwrap() == "again\n",
        );
    }
}

#[test]
fn git_metadata_is_protected_in_restricted_mode() {
    if !have_git() {
        eprintln!("skipped: no git");
        return;
    }
    each_attack(
        true,
        true,
        PATTERNS,
        &[
            "mv .git .git2 && echo 'echo pwned' > .git2/hooks/pre-commit",
            "rm -rf .git/hooks",
            "env GIT_CONFIG_GLOBAL=/dev/null git config core.hooksPath /tmp/hooks",
            "echo 'echo pwned' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout",
            "mkdir -p sub && env GIT_CONFIG_GLOBAL=/dev/null git init -q sub",
            "mkdir -p x && mv .git x/",
        ],
    );
}

#[test]
fn git_config_is_protected_with_the_hooks() {
    if !have_git() {
        eprintln!("skipped: no git");
        return;
    }
    let hooks: &[&str] = &[".git/hooks/**"];
    for ns in modes() {
        let fx = fixture(true);
        let ex = executor(&fx, ns, false, hooks);
        // The state as the executor's guard sees it: hooks and config.
        let g = guard(false, &[".git/hooks/**", ".git/config"]);
        let r = attack_with(
            &fx,
            &ex,
            &g,
            CONTROL,
            "env GIT_CONFIG_GLOBAL=/dev/null git config core.hooksPath /tmp/hooks",
            control_ok,
        );
        // In the view `.git/config` is bound read-only: git's rename of
        // `config.lock` onto it fails (EBUSY) while the command runs.
        assert!(
            refused_in_flight(&r)
                || r.protected_changes.iter().any(|c| c.path == ".git/config"
                    && c.pattern == ".git/config"
                    && c.action == ProtectedAction::Restored)
        );
        // Everything else in .git stays the command's to change.
        let r = run(&ex, "echo x > .git/description");
        assert!(r.protected_changes.is_empty());
        assert_eq!(
            fs::read_to_string(fx.root.join(".git/description")).unwrap(),
            "x\n"
        );
    }
}

#[test]
fn a_nested_repository_is_quarantined_in_restricted_mode() {
    if !have_git() {
        eprintln!("skipped: no git");
        return;
    }
    for ns in modes() {
        let fx = fixture(true);
        let ex = executor(&fx, ns, true, PATTERNS);
        let r = run(&ex, "mkdir -p crate && env GIT_CONFIG_GLOBAL=/dev/null git init -q crate && echo kept > crate/a.rs");
        assert_eq!(r.exit_code, 0, "{}", String::from_utf8_lossy(&r.stderr));
        assert!(!fx.root.join("crate/.git").exists());
        assert_eq!(
            fs::read_to_string(fx.root.join("crate/a.rs")).unwrap(),
            "kept\n"
        );
        assert!(r
            .protected_changes
            .iter()
            .any(|c| c.path == "crate/.git" && c.action == ProtectedAction::Quarantined));
    }
}

/// The host edits an unprotected file while a command runs: its edit is
/// kept. The command and the host hand over through files, not time.
#[test]
fn a_host_edit_to_an_unprotected_file_during_a_command_is_kept() {
    for ns in modes() {
        let fx = fixture(false);
        let ex = executor(&fx, ns, false, PATTERNS);
        let root = fx.root.clone();
        let host = std::thread::spawn(move || {
            while !root.join("ready").exists() {
                std::thread::yield_now();
            }
            fs::write(root.join("src/main.rs"), "host edit\n").unwrap();
            fs::write(root.join("go"), "").unwrap();
        });
        let r = run(
            &ex,
            "touch ready && while [ ! -e go ]; do sleep 0.01; done; echo cmd > free.txt",
        );
        host.join().unwrap();
        assert_eq!(r.exit_code, 0);
        assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
        assert_eq!(
            fs::read_to_string(fx.root.join("src/main.rs")).unwrap(),
            "host edit\n"
        );
        assert_eq!(
            fs::read_to_string(fx.root.join("free.txt")).unwrap(),
            "cmd\n"
        );
    }
}

/// Between commands the host may change protected files: the next command
/// starts from the host's version, and only its own change is undone.
#[test]
fn host_edits_between_commands_become_the_record() {
    for ns in modes() {
        let fx = fixture(false);
        let ex = executor(&fx, ns, false, PATTERNS);
        let g = guard(false, PATTERNS);
        let r = run(&ex, "true");
        assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
        // The floor really runs without namespaces.
        if !ns {
            assert!(!r.confined.namespaces);
        }
        eprintln!("namespaces={ns}: in force: {}", r.confined.namespaces);
        fs::write(fx.root.join("Cargo.lock"), "host v2\n").unwrap();
        fs::write(fx.root.join("host.lock"), "host\n").unwrap();
        let before = state(&fx.root, &g);
        let r = run(&ex, "echo evil > Cargo.lock; echo evil > host.lock");
        assert_eq!(state(&fx.root, &g), before);
        assert_eq!(
            fs::read_to_string(fx.root.join("Cargo.lock")).unwrap(),
            "host v2\n"
        );
        if r.confined.protected_binds.is_some() {
            // The host's edits are in the record, so both were bound
            // read-only: both writes failed in the command.
            assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
            let err = String::from_utf8_lossy(&r.stderr);
            assert_eq!(err.matches("Read-only file system").count(), 2, "{err}");
        } else {
            assert_eq!(r.protected_changes.len(), 2, "{:?}", r.protected_changes);
        }
        // A command that changes nothing protected reports nothing.
        let r = run(&ex, "echo ok > free.txt");
        assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
    }
}

/// Two commands on one write root at once: the record is shared, the one
/// that settles first undoes (and reports) what either changed, each change
/// is reported once, and the state after both equals the state before.
#[test]
fn concurrent_commands_on_one_root_share_one_record() {
    for ns in modes() {
        let fx = fixture(false);
        let ex = std::sync::Arc::new(executor(&fx, ns, false, PATTERNS));
        let g = guard(false, PATTERNS);
        let before = state(&fx.root, &g);
        let waiting = {
            let ex = ex.clone();
            std::thread::spawn(move || {
                run(
                    &ex,
                    "touch a-ready && while [ ! -e b-done ]; do sleep 0.01; done",
                )
            })
        };
        while !fx.root.join("a-ready").exists() {
            std::thread::yield_now();
        }
        let b = run(&ex, "echo evil > Cargo.lock; touch new.lock; touch b-done");
        let a = waiting.join().unwrap();
        assert_eq!(state(&fx.root, &g), before);
        // Whichever settles first finds both changes (a may see b-done
        // and end before b's own check runs); together they report each
        // change once.
        let mut all: Vec<_> = a
            .protected_changes
            .iter()
            .chain(&b.protected_changes)
            .map(|c| c.path.clone())
            .collect();
        all.sort();
        if b.confined.protected_binds.is_some() {
            // Cargo.lock was bound read-only: only the new file is the
            // floor's.
            assert!(String::from_utf8_lossy(&b.stderr).contains("Read-only file system"));
            assert_eq!(all, ["new.lock"], "a: {a:?}\nb: {b:?}");
        } else {
            assert_eq!(all, ["Cargo.lock", "new.lock"], "a: {a:?}\nb: {b:?}");
        }
    }
}

/// What the floor cannot attribute: a host edit to a protected file while
/// a command runs on that root is undone like the command's own, and
/// reported.
#[test]
fn a_host_edit_to_a_protected_file_during_a_command_is_undone_and_reported() {
    for ns in modes() {
        let fx = fixture(false);
        let ex = executor(&fx, ns, false, PATTERNS);
        let root = fx.root.clone();
        let host = std::thread::spawn(move || {
            while !root.join("ready").exists() {
                std::thread::yield_now();
            }
            fs::write(root.join("Cargo.lock"), "host edit\n").unwrap();
            fs::write(root.join("go"), "").unwrap();
        });
        let r = run(&ex, "touch ready && while [ ! -e go ]; do sleep 0.01; done");
        host.join().unwrap();
        assert_eq!(
            fs::read_to_string(fx.root.join("Cargo.lock")).unwrap(),
            "lock v1\n"
        );
        assert!(r
            .protected_changes
            .iter()
            .any(|c| c.path == "Cargo.lock" && c.action == ProtectedAction::Restored));
    }
}

/// Changes the root's watches must see (or, in namespaces, the same checks
/// through the binds): a protected file made deep inside a tree the command
/// made, and directories renamed between watched directories with writes
/// at their new places.
#[test]
fn changes_in_new_trees_and_renamed_directories_are_undone() {
    each_attack(
        false,
        false,
        PATTERNS,
        &[
            "mkdir -p n1/n2/n3/n4/n5/n6 && echo x > n1/n2/n3/n4/n5/n6/deep.lock",
            "mkdir -p n1/n2/n3 && mv n1 src/ && mkdir -p src/n1/n2/n3/n4 && echo x > src/n1/n2/n3/n4/deep.lock",
            "mkdir -p src/sub && mv pkg src/sub/pkg && echo evil > src/sub/pkg/deep/yarn.lock && echo x > src/sub/pkg/deep/new.lock",
            "mv pkg/deep src/deep2 && echo evil > src/deep2/yarn.lock && mv src/deep2 pkg/deep3",
            "mv src src2 && mkdir -p src2/a/b && mv pkg src2/a/b/ && echo evil > src2/a/b/pkg/deep/yarn.lock",
        ],
    );
}

/// A tree one command makes is watched from the next command on: a
/// protected file a later command makes deep inside it is found, and so is
/// a change to one the host put there between commands.
#[test]
fn a_tree_made_by_one_command_is_checked_in_the_next() {
    for ns in modes() {
        let fx = fixture(false);
        let ex = executor(&fx, ns, false, PATTERNS);
        let g = guard(false, PATTERNS);
        let r = run(&ex, "mkdir -p t/a/b/c/d/e && echo free > t/a/b/c/free.txt");
        assert!(r.protected_changes.is_empty(), "{:?}", r.protected_changes);
        write(&fx.root.join("t/a/b/host.lock"), "host\n");
        let before = state(&fx.root, &g);
        let r = run(
            &ex,
            "echo x > t/a/b/c/d/e/new.lock; echo evil > t/a/b/host.lock",
        );
        assert_eq!(state(&fx.root, &g), before, "{:?}", r.protected_changes);
        let mut paths: Vec<_> = r
            .protected_changes
            .iter()
            .map(|c| c.path.as_str())
            .collect();
        paths.sort_unstable();
        if ns && refused_in_flight(&r) {
            // In namespaces the host's file is bound read-only: the write
            // failed while the command ran, and only the new file is left
            // for the check after it.
            assert_eq!(paths, ["t/a/b/c/d/e/new.lock"]);
        } else {
            assert_eq!(paths, ["t/a/b/c/d/e/new.lock", "t/a/b/host.lock"]);
        }
        assert_eq!(
            fs::read_to_string(fx.root.join("t/a/b/c/free.txt")).unwrap(),
            "free\n"
        );
    }
}

/// A write through a hard link in another directory (made by the host
/// before the command) changes a protected file without touching its
/// directory: its content is put back and the change reported. The
/// restored file is a new one, so the link count drops to one: the other
/// name keeps what the command wrote.
#[test]
fn a_write_through_a_hard_link_from_another_directory_is_undone() {
    for ns in modes() {
        let fx = fixture(false);
        fs::create_dir(fx.root.join("other")).unwrap();
        fs::hard_link(fx.root.join("Cargo.lock"), fx.root.join("other/alias")).unwrap();
        let ex = executor(&fx, ns, false, PATTERNS);
        let before = fs::symlink_metadata(fx.root.join("Cargo.lock")).unwrap();
        let r = run(&ex, &format!("{CONTROL} && echo 'lock v2' > other/alias"));
        assert!(control_ok(&fx.root));
        assert_eq!(
            fs::read_to_string(fx.root.join("Cargo.lock")).unwrap(),
            "lock v1\n"
        );
        let after = fs::symlink_metadata(fx.root.join("Cargo.lock")).unwrap();
        assert_eq!(
            (after.mode(), after.uid(), after.gid()),
            (before.mode(), before.uid(), before.gid())
        );
        assert_eq!(
            r.protected_changes
                .iter()
                .map(|c| (c.path.as_str(), c.action))
                .collect::<Vec<_>>(),
            [("Cargo.lock", ProtectedAction::Restored)]
        );
    }
}

/// A command that makes more events in a watched directory than the
/// kernel's queue holds, then makes a protected file in a new directory of
/// a directory with no other event (so the one event that would show it is
/// lost to the overflow): the check falls back to the ctime walk and still
/// finds it.
#[test]
fn a_flood_of_events_does_not_hide_a_change() {
    let max: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    if max > 1 << 20 {
        eprintln!("note: max_queued_events is {max}: too many files to flood; skipped");
        return;
    }
    let n = max + 1000;
    each_attack(
        false,
        false,
        PATTERNS,
        &[&format!(
            "i=0; while [ $i -lt {n} ]; do : > src/f$i; i=$((i+1)); done; \
             mkdir -p pkg/deep/late/a && echo x > pkg/deep/late/a/new.lock"
        )],
    );
}

/// The result's report says how the check after the command found what
/// it changed: `inotify`, or `ctime_walk` with the reason (forced here
/// through the environment, or a flood that overflowed the inotify queue
/// during the command), so that a host that must know when the slower
/// fallback judged a command can tell. Before, only
/// `Protector::detection()` said it, which a host of the executor cannot
/// reach. A command that can write nowhere has no check, and no field.
#[test]
fn protect8_the_report_says_how_protected_paths_were_checked() {
    let forced = std::env::var_os("SANDGATE_PROTECT_DETECTION").is_some_and(|v| v == "ctime");
    let max: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    for ns in modes() {
        let fx = fixture(false);
        let ex = executor(&fx, ns, false, PATTERNS);
        let r = run(&ex, "echo x > new.lock");
        assert_eq!(r.protected_changes.len(), 1, "{:?}", r.protected_changes);
        let d = r
            .confined
            .protected_detection
            .clone()
            .expect("no detection in the report");
        if forced {
            assert_eq!(d.mode, "ctime_walk");
            assert_eq!(
                d.reason.as_deref(),
                Some("forced by SANDGATE_PROTECT_DETECTION")
            );
            continue;
        }
        assert_eq!((d.mode.as_str(), d.reason.as_deref()), ("inotify", None));
        if max > 1 << 20 {
            eprintln!("note: max_queued_events is {max}: too many files to flood; skipped");
            continue;
        }
        let json = serde_json::to_value(&r.confined).unwrap();
        assert_eq!(
            json["protected_detection"],
            serde_json::json!({"mode": "inotify"})
        );
        // A flood that overflows the queue: this very command is judged by
        // the ctime walk, and the report says so and why.
        let n = max + 1000;
        let r = run(
            &ex,
            &format!(
                "i=0; while [ $i -lt {n} ]; do : > src/f$i; i=$((i+1)); done; \
                 echo x > pkg/deep/late.lock"
            ),
        );
        assert_eq!(r.protected_changes.len(), 1, "{:?}", r.protected_changes);
        let d = r.confined.protected_detection.clone().unwrap();
        assert_eq!(
            (d.mode.as_str(), d.reason.as_deref()),
            ("ctime_walk", Some("the inotify queue overflowed"))
        );
        let json = serde_json::to_value(&r.confined).unwrap();
        assert_eq!(
            json["protected_detection"],
            serde_json::json!({"mode": "ctime_walk", "reason": "the inotify queue overflowed"})
        );
    }
}

/// Every test here again, in a child whose write roots use the ctime walk
/// (forced through the environment variable that exists for this) instead
/// of inotify.
#[test]
fn every_attack_here_also_holds_with_the_ctime_walk_forced() {
    const FORCE: &str = "SANDGATE_PROTECT_DETECTION";
    if std::env::var_os(FORCE).is_some() {
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--skip",
            "every_attack_here_also_holds_with_the_ctime_walk_forced",
        ])
        .env(FORCE, "ctime")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "with the ctime walk forced:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every other test of this file ran, whatever their number.
    let others = include_str!("protect.rs").matches("\n#[test]\n").count() - 1;
    assert!(
        stdout.contains(&format!("test result: ok. {others} passed")),
        "{others} tests expected: {stdout}"
    );
}

/// Another process's command holds the write root (its `flock`): a
/// command here waits for its turn no longer than its own timeout, and an
/// abort ends the wait. Before, the wait was not counted in the timeout
/// and no abort ended it: the call hung for as long as the root was held.
/// The holder is a second open of the root, which `flock` treats as
/// another process's.
#[test]
fn a_command_waits_for_another_process_no_longer_than_its_timeout() {
    let fx = fixture(false);
    for ns in modes() {
        let ex = executor(&fx, ns, false, PATTERNS);
        let holder = fs::File::open(&fx.root).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&holder);
        // SAFETY: flock on a descriptor this test owns and keeps open.
        let locked = unsafe { libc::flock(fd, libc::LOCK_EX) };
        assert_eq!(locked, 0);
        let r = ex
            .exec(
                "echo ran > free.txt",
                ExecOptions {
                    timeout_ms: Some(400),
                    ..ExecOptions::default()
                },
            )
            .unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(r.timed_out && r.not_started, "ns {ns}: {r:?}");
        assert_eq!(r.exit_code, 124, "ns {ns}: {stderr}");
        assert!(stderr.contains("held the write root"), "ns {ns}: {stderr}");
        assert_eq!(
            fs::read_to_string(fx.root.join("free.txt")).unwrap(),
            "free\n"
        );

        let abort = sandgate::exec::AbortSignal::new();
        let trigger = abort.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            trigger.abort();
        });
        let r = ex
            .exec(
                "echo ran > free.txt",
                ExecOptions {
                    timeout_ms: Some(600_000),
                    abort: Some(abort),
                    ..ExecOptions::default()
                },
            )
            .unwrap();
        t.join().unwrap();
        assert!(r.aborted && !r.timed_out, "ns {ns}: {r:?}");
        assert_eq!(
            fs::read_to_string(fx.root.join("free.txt")).unwrap(),
            "free\n"
        );

        // Once the holder lets go, commands run and are checked as ever.
        drop(holder);
        let r = run(&ex, "echo ran > free.txt; echo x > Cargo.lock");
        // (in namespaces the write to the bound `Cargo.lock` fails at once)
        assert!(!r.not_started && !r.timed_out, "ns {ns}: {r:?}");
        assert_eq!(
            fs::read_to_string(fx.root.join("free.txt")).unwrap(),
            "ran\n"
        );
        assert_eq!(
            fs::read_to_string(fx.root.join("Cargo.lock")).unwrap(),
            "lock v1\n"
        );
        write(&fx.root.join("free.txt"), "free\n");
    }
}

/// Round 4 attacks on the restore itself: a protected file replaced by a
/// FIFO, by a directory holding many entries, by a hard link to another
/// file, by a symlink out of the root; a protected directory renamed away
/// with a new one made at its name; a protected file's parent replaced by
/// a symlink to a directory outside the root holding a file of that name.
/// Nothing outside the root changes.
#[test]
fn fifos_big_directories_and_planted_links_are_undone_without_following_them() {
    let attacks = [
        "rm Cargo.lock && mkfifo Cargo.lock",
        "rm Cargo.lock && mkdir Cargo.lock && i=0; while [ $i -lt 3000 ]; do : > Cargo.lock/f$i; i=$((i+1)); done",
        "rm Cargo.lock && ln free.txt Cargo.lock",
        "rm Cargo.lock && ln -s ../outside/target Cargo.lock",
        "mv .github gh2 && mkdir -p .github/workflows && echo evil > .github/workflows/ci.yml",
        "mv pkg pkg2 && ln -s ../outside pkg",
        "mv pkg/deep pkg/deep2 && ln -s ../../outside pkg/deep",
        "mv .github gh2 && ln -s ../outside .github",
    ];
    for ns in modes() {
        for attack in attacks {
            let fx = fixture(false);
            let outside = fx.base.join("outside");
            fs::create_dir_all(outside.join("workflows")).unwrap();
            write(&outside.join("target"), "outside\n");
            write(&outside.join("yarn.lock"), "outside\n");
            write(&outside.join("deep/yarn.lock"), "outside\n");
            write(&outside.join("workflows/ci.yml"), "outside\n");
            let ex = executor(&fx, ns, false, PATTERNS);
            let g = guard(false, PATTERNS);
            attack_with(&fx, &ex, &g, CONTROL, attack, control_ok);
            for f in ["target", "yarn.lock", "deep/yarn.lock", "workflows/ci.yml"] {
                assert_eq!(
                    fs::read_to_string(outside.join(f)).unwrap(),
                    "outside\n",
                    "ns={ns} `{attack}`: the restore wrote outside the root ({f})"
                );
            }
        }
    }
}

/// An ACL a command sets on a protected directory: a named user with
/// write in the access ACL (the directory's mode does not move: its group
/// already has write) and in the default ACL, which every file made there
/// later would take. On the floor it is undone after the command (before,
/// it stayed, unreported); in namespaces the read-only bind refuses it.
#[test]
fn protect18_an_acl_set_on_a_protected_directory_is_undone() {
    if Command::new("/usr/bin/python3").arg("-V").output().is_err() {
        eprintln!("skipped: no python3");
        return;
    }
    let attack = "/usr/bin/python3 -c \"import os, struct; \
        a = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', t, p, i) for t, p, i in \
        [(1, 7, 0xffffffff), (2, 7, 12345), (4, 7, 0xffffffff), (16, 7, 0xffffffff), (32, 5, 0xffffffff)]); \
        [os.setxattr(d, n, a) for d in ['.github', '.github/workflows'] \
        for n in ['system.posix_acl_access', 'system.posix_acl_default']]\" && echo acl-set";
    for ns in modes() {
        let fx = fixture(false);
        for d in [".github", ".github/workflows"] {
            fs::set_permissions(fx.root.join(d), fs::Permissions::from_mode(0o775)).unwrap();
        }
        let ex = executor(&fx, ns, false, PATTERNS);
        let r = run(&ex, &format!("{CONTROL} && {attack}; exit 0"));
        assert!(control_ok(&fx.root));
        let stderr = String::from_utf8_lossy(&r.stderr);
        // On the floor the command sets it; in the view the bind refuses.
        assert_eq!(
            String::from_utf8_lossy(&r.stdout).contains("acl-set"),
            !ns,
            "ns={ns}: {stderr}"
        );
        for d in [".github", ".github/workflows"] {
            let path = fx.root.join(d);
            for n in ["system.posix_acl_access", "system.posix_acl_default"] {
                let mut buf = [0u8; 256];
                let there = rustix::fs::lgetxattr(&path, n, &mut buf[..]).is_ok();
                assert!(
                    !there,
                    "ns={ns}: {d} keeps the command's {n}; reported {:?}; stderr {stderr}",
                    r.protected_changes
                );
            }
            assert_eq!(
                fs::metadata(&path).unwrap().mode() & 0o7777,
                0o775,
                "ns={ns} {d}"
            );
        }
        assert!(
            !r.protected_changes.is_empty() || refused_in_flight(&r),
            "ns={ns}: neither undone nor refused: {:?} {stderr}",
            r.protected_changes
        );
    }
}

/// A process the command leaves behind (in its own session, ignoring
/// SIGHUP) is dead before the settle: it cannot write a protected file
/// after the restore.
#[test]
fn a_background_process_cannot_race_the_restore() {
    for ns in modes() {
        let fx = fixture(false);
        let ex = executor(&fx, ns, false, PATTERNS);
        let g = guard(false, PATTERNS);
        let before = state(&fx.root, &g);
        // The processes left behind write once the test makes `go`, after
        // the command's call has answered (its restore done): a survivor
        // writes within one 10 ms poll of it, and the test looks 500 ms
        // later. Before, they slept 1 s and the test 2.5 s, which both
        // cost the time and let a slow call's restore come after the
        // survivors' writes.
        let r = run(
            &ex,
            "setsid sh -c 'trap \"\" HUP TERM; while [ ! -e go ]; do sleep 0.01; done; echo late > Cargo.lock; echo late > new.lock' </dev/null >/dev/null 2>&1 & \
             nohup sh -c 'trap \"\" HUP TERM; while [ ! -e go ]; do sleep 0.01; done; echo late2 > pkg/deep/yarn.lock' </dev/null >/dev/null 2>&1 & \
             echo evil > Cargo.lock; exit 0",
        );
        assert!(
            !r.protected_changes.is_empty() || refused_in_flight(&r),
            "ns={ns}: the write was neither undone nor refused: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        fs::write(fx.root.join("go"), "").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert_eq!(
            before,
            state(&fx.root, &g),
            "ns={ns}: a process outlived the command"
        );
    }
}
