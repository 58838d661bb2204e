//! `cargo xtask unprivileged`: runs the confinement tests again as an
//! unprivileged user (uid and gid 65534, no supplementary groups), since
//! agents run unprivileged and root hides bugs (root passes permission
//! checks, ignores `RLIMIT_NPROC`, and may read what the tests mean to be
//! unreadable).
//!
//! The test binaries are built by the caller's `cargo test` (this task
//! asks cargo for their paths without building anything new) and run with
//! `setpriv --reuid=65534 --regid=65534 --clear-groups` from `/tmp`, so
//! every file a test makes is the unprivileged user's. Where a cgroup2
//! hierarchy is mounted, the limits suites run once more inside a cgroup
//! v2 subtree delegated to that user. Needs root; a
//! developer who is not root gets a note and nothing runs.
//!
//! [`mcp_clients`] does the same for `sandgate mcp` under the official MCP
//! SDK clients (their attack classes are confinement tests too).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::{cargo, namespaces_possible, step, step_logged, workspace_root, REQUIRE_NAMESPACES};

/// `(crate directory under crates/, test target)` pairs whose subject is
/// confinement.
const SUITES: &[(&str, &str)] = &[
    ("shellexec", "seccomp"),
    ("shellexec", "confine"),
    ("shellexec", "exec"),
    ("shellexec", "namespaces"),
    ("shellexec", "limits"),
    ("shellexec", "bounded"),
    ("shellexec", "git"),
    ("shellexec", "binds"),
    ("sandgate", "git"),
    ("sandgate", "proxy"),
    ("sandgate", "credentials"),
    ("sandgate", "protect"),
    ("sandgate", "binds"),
    ("sandgate", "scale"),
    ("sandgate", "sandbox"),
    ("rootfs", "race"),
    // Creating the longest path a root allows keeps to a small stack.
    ("rootfs", "deep22"),
    ("proxy", "proxy"),
    ("proxy", "intercept"),
    ("fetch", "fetch"),
    // Hostile servers and long URLs against the fetch: refusals quote a
    // long URL by its start, heads, drips, bombs, cancels, proxies.
    ("fetch", "fetch27"),
    ("protect", "settle"),
    ("protect", "watch"),
    ("cli", "run"),
    ("cli", "exec"),
    ("cli", "mcp_protocol"),
    // A client that goes away (HTTP DELETE, a closed socket, stdin)
    // ends its command's process tree.
    ("cli", "mcphttp20"),
    ("cli", "doors"),
    // The file-tool doors against each other on random trees (what a
    // write root the server cannot list answers, too).
    ("cli", "differential"),
    // Two processes protecting one write root take turns.
    ("protect", "processes"),
    // A fetcher's audit sink hears of every fetch, without its secrets.
    ("sandgate", "fetch"),
    // The shell's unit tests: the connect supervisor's own (a listener
    // another process made is refused) and the seccomp programs'.
    ("shellexec", "lib"),
    // The MCP server's unit tests: a client root's names judged by where
    // they lead, under both resolvers.
    ("mcp", "lib"),
    // What a policy may not name as a credential's source (a file the
    // command could read, or one with a second name in the write root).
    ("policy", "suite"),
    // A replace under faults: a file size limit, a full or read-only
    // filesystem, a directory's default ACL, a group the caller is not
    // in, a filesystem without O_TMPFILE (some cases need root and say so
    // when they skip; one needs a user other than root).
    ("sandgate", "faults21"),
    ("rootfs", "faults21"),
    // The executor, the file tools, the fetch and the proxy while the
    // host's threads take a signal every millisecond.
    ("shellexec", "eintr21"),
    ("sandgate", "eintr21"),
    ("proxy", "eintr21"),
    // The MCP server as a library under a file size limit: its audit
    // file and its token file fail the write, not the program.
    ("mcp", "fsize21"),
    // Executors disposed of while commands start, run and report, twice at
    // once, and from the proxy's own report.
    ("shellexec", "dispose22"),
    ("sandgate", "dispose22"),
    // The HTTP transport against clients without the token: long heads,
    // kept-alive connections, a descriptor table filled.
    ("cli", "mcpgone22"),
    // A flood of connections without the token leaves descriptors for the
    // sessions that have it.
    ("cli", "flood22"),
    // A file its owner may not write is not replaced by the file tools:
    // the kernel answers for the user that runs them.
    ("sandgate", "readonly23"),
    ("cli", "readonly23"),
    // Confined git vets a .git directory by the bytes of its names.
    ("shellexec", "gitshown23"),
    // A grep with .gitignore filtering keeps to its work bounds.
    ("sandgate", "grepwork23"),
    // The floor's judged connect under hand-built addresses and races.
    ("shellexec", "floorsock24"),
    // The floor's signal judgement: a pid nobody holds yet, the
    // executor's threads, groups, sessions and a file's owner.
    ("shellexec", "floorsig24"),
    // Destinations in every spelling, at the fetch and the proxy.
    ("fetch", "spell24"),
    ("proxy", "spell24"),
    // The HTTP transport's token, Host, Origin, framing and sessions
    // against a hostile local client.
    ("cli", "mcphttp24"),
    // The MCP transports' edges: unknown sessions, an unreadable stdin,
    // the socket and token files at a signal, a signal inherited ignored.
    ("cli", "mcpedge23"),
    // A message giving a key twice runs nothing, on stdio and HTTP.
    ("cli", "mcpdup25"),
    // URL and connection-string passwords redacted through the confined
    // shell, at every read split and cap.
    ("shellexec", "redact25"),
    // Long URL passwords, blanks in `;`-separated values, `&`, YAML and
    // JSON password keys, through the confined shell and at every cap.
    ("shellexec", "redact26"),
    // INI/TOML `password = x`, keys glued to a word (`PGPASSWORD=`), a
    // long URL password in a withheld variable, through the confined shell.
    ("shellexec", "redact26b"),
    // The credential proxy against the command it serves: other hosts,
    // header spellings, smuggling framings, paths, SNI and reflection.
    ("proxy", "credproxy25"),
    // Process trees that try to outlive `sandgate run`.
    ("cli", "runsup25"),
    // The CLI's stdout on a full disk, `init -o DIR`, names not UTF-8.
    ("cli", "cli26"),
    // Deny-write spellings at the file tools, the JSON endpoint and the shell.
    ("sandgate", "denyglob26"),
];

/// Suites run once more as the unprivileged user inside a cgroup v2
/// subtree delegated to it, as systemd's `Delegate=yes` with
/// `DelegateSubgroup=` lays one out: the tests' process in `D/host`, the
/// executor's cgroups made beneath `D`, named by `SANDGATE_CGROUP_PARENT`.
const DELEGATED: &[(&str, &str)] = &[
    ("shellexec", "limits"),
    ("shellexec", "bounded"),
    ("cli", "run"),
];

const NOBODY: &str = "65534";

/// `setpriv`'s arguments that run what follows as [`NOBODY`], with no
/// supplementary groups and the environment reset, through `env` (whose
/// `NAME=value` arguments come next).
const AS_NOBODY: &[&str] = &[
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--reset-env",
    "env",
];

/// The environment the MCP client suites run in as [`NOBODY`], after
/// [`AS_NOBODY`]: a home and temporary directory that user may write.
const NOBODY_HOME: &[&str] = &["HOME=/tmp", "TMPDIR=/tmp"];

pub fn run(_args: &[String]) -> Result<(), String> {
    if !is_root() {
        eprintln!("note: unprivileged: not root, so the tests cannot switch user; skipped");
        return Ok(());
    }
    let plan = build_plan()?;
    suites(&plan, &Output::Inherit, &AtomicBool::new(false))
}

/// What `ci` runs beside the root test run: the same suites on a thread of
/// their own, each suite's output kept in a file under `target/` and shown
/// whole when it fails (a line with its time and count when it passes), so
/// that it does not interleave with the root run's. The root run and this
/// one are different users, so neither's processes count against the
/// other's `RLIMIT_NPROC`; the suites themselves still run one at a time,
/// as the same user they would. `plan` is [`build_plan`]'s (the tests
/// built); `stop` set makes the lane start no further suite.
pub fn start(plan: String, stop: Arc<AtomicBool>) -> Option<JoinHandle<Result<(), String>>> {
    if !is_root() {
        eprintln!("note: unprivileged: not root, so the tests cannot switch user; skipped");
        return None;
    }
    let logs = crate::target_dir().join("unprivileged-logs");
    Some(std::thread::spawn(move || {
        reachable_by_nobody()?;
        std::fs::create_dir_all(&logs)
            .map_err(|e| format!("unprivileged: cannot make {}: {e}", logs.display()))?;
        suites(&plan, &Output::Files(logs), &stop)
    }))
}

/// Where a suite's output goes.
enum Output {
    /// The caller's stdout and stderr, as the suite writes them.
    Inherit,
    /// A file per suite in this directory, shown whole on failure.
    Files(PathBuf),
}

/// Every suite of [`SUITES`] as [`NOBODY`], then the [`DELEGATED`] ones in
/// a delegated cgroup where the host has cgroup v2; stops at the first
/// failure.
fn suites(plan: &str, out: &Output, stop: &AtomicBool) -> Result<(), String> {
    if matches!(out, Output::Inherit) {
        reachable_by_nobody()?;
    }
    for (package, test) in SUITES {
        if stop.load(Ordering::Relaxed) {
            return Err("unprivileged: stopped, the root run failed".to_owned());
        }
        let exe = find_test(plan, package, test)?;
        run_as_nobody(package, test, &exe, None, out)?;
    }
    let Some(mount) = cgroup2_mount() else {
        eprintln!("note: unprivileged: no cgroup2 mount, so no delegated cgroup v2 run");
        return Ok(());
    };
    let delegated = Delegated::make(&mount)?;
    for (package, test) in DELEGATED {
        if stop.load(Ordering::Relaxed) {
            return Err("unprivileged: stopped, the root run failed".to_owned());
        }
        let exe = find_test(plan, package, test)?;
        run_as_nobody(package, test, &exe, Some(&delegated), out)?;
    }
    Ok(())
}

/// Whether [`NOBODY`] may have namespaces here ([`namespaces_possible`]
/// asked as that user), said once.
fn nobody_has_namespaces() -> bool {
    static ASKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ASKED.get_or_init(|| {
        let prefix: Vec<&str> = std::iter::once("setpriv")
            .chain(AS_NOBODY.iter().copied())
            .collect();
        let possible = namespaces_possible(&prefix);
        match possible {
            true => eprintln!(
                "note: unprivileged: uid {NOBODY} may have namespaces here: tests that need them may not skip"
            ),
            false => eprintln!(
                "note: unprivileged: uid {NOBODY} has no namespaces here (unshare failed): tests that need them skip"
            ),
        }
        possible
    })
}

fn run_as_nobody(
    package: &str,
    test: &str,
    exe: &str,
    delegated: Option<&Delegated>,
    out: &Output,
) -> Result<(), String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c");
    match delegated {
        // The shell moves itself into the delegated subtree's leaf, then
        // becomes the unprivileged test.
        Some(d) => cmd.arg(format!(
            "echo $$ > '{}/host/cgroup.procs' && exec \"$@\"",
            d.dir.display()
        )),
        None => cmd.arg("exec \"$@\""),
    };
    cmd.args(["sh", "setpriv"])
        .args(AS_NOBODY)
        .arg("RUST_BACKTRACE=1");
    if let Some(d) = delegated {
        cmd.arg(format!("SANDGATE_CGROUP_PARENT={}", d.dir.display()));
    }
    // As for the root run: where this user may have namespaces, the tests
    // that need them may not skip.
    if nobody_has_namespaces() {
        cmd.arg(format!("{REQUIRE_NAMESPACES}=1"));
    }
    cmd.arg(exe).current_dir("/tmp");
    let what = match delegated {
        Some(d) => format!(
            "unprivileged: {package} --test {test} as uid {NOBODY} in the delegated cgroup {}",
            d.dir.display()
        ),
        None => format!("unprivileged: {package} --test {test} as uid {NOBODY}"),
    };
    match out {
        Output::Files(dir) => {
            let cg = if delegated.is_some() {
                "-delegated"
            } else {
                ""
            };
            step_logged(
                &what,
                &mut cmd,
                &dir.join(format!("{package}-{test}{cg}.log")),
            )
        }
        Output::Inherit => {
            eprintln!("==> {what}");
            let start = Instant::now();
            let status = cmd
                .status()
                .map_err(|e| format!("unprivileged: cannot run setpriv: {e}"))?;
            eprintln!(
                "<== {what}: {status} in {:.1}s",
                start.elapsed().as_secs_f64()
            );
            match status.success() {
                true => Ok(()),
                false => Err(format!("{what} failed ({status})")),
            }
        }
    }
}

/// Where the whole cgroup v2 hierarchy is mounted.
fn cgroup2_mount() -> Option<std::path::PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (fields, after) = l.split_once(" - ")?;
        let f: Vec<&str> = fields.split(' ').collect();
        (after.starts_with("cgroup2 ") && f.get(3) == Some(&"/"))
            .then(|| f.get(4).map(std::path::PathBuf::from))
            .flatten()
    })
}

/// A cgroup v2 subtree delegated to the unprivileged user for one run:
/// `D` and `D/host` owned by it (the directories and the files delegation
/// hands over), removed again at drop.
struct Delegated {
    dir: std::path::PathBuf,
}

impl Delegated {
    fn make(mount: &std::path::Path) -> Result<Delegated, String> {
        let dir = mount.join(format!("sandgate-ci-{}", std::process::id()));
        let host = dir.join("host");
        let fail =
            |e: std::io::Error| format!("unprivileged: delegated cgroup {}: {e}", dir.display());
        std::fs::create_dir(&dir).map_err(fail)?;
        let made = Delegated { dir: dir.clone() };
        std::fs::create_dir(&host).map_err(fail)?;
        for d in [&dir, &host] {
            for name in [
                "",
                "cgroup.procs",
                "cgroup.threads",
                "cgroup.subtree_control",
            ] {
                let path = if name.is_empty() {
                    d.clone()
                } else {
                    d.join(name)
                };
                std::os::unix::fs::chown(&path, Some(65534), Some(65534)).map_err(fail)?;
            }
        }
        Ok(made)
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        // What a failed run left beneath it first, then the leaf, then it.
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten().filter(|e| e.path().is_dir()) {
                if let Ok(slots) = std::fs::read_dir(e.path()) {
                    for s in slots.flatten().filter(|s| s.path().is_dir()) {
                        let _ = std::fs::remove_dir(s.path());
                    }
                }
                let _ = std::fs::remove_dir(e.path());
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Pythons the unprivileged user may be able to run. A virtual
/// environment's interpreter is a link to the one that made it, and the
/// caller's (often under root's home) may be out of that user's reach.
const SYSTEM_PYTHONS: &[&str] = &["/usr/bin/python3", "/usr/local/bin/python3"];

/// Runs the Python and TypeScript SDK client suites of
/// `crates/mcp/tests` again as uid 65534, against `bin`, from the
/// checkout (read, never written: Python writes no bytecode where it may
/// not, pytest's cache is off, and every file a test makes goes to
/// `/tmp`). The Python SDK goes into its own virtual environment, `venv`,
/// made from a system Python that user can run; where there is none, a
/// note says so and nothing runs.
pub fn mcp_clients(bin: &Path, venv: &Path) -> Result<(), String> {
    if !is_root() {
        eprintln!("note: unprivileged mcp clients: not root, so they cannot switch user; skipped");
        return Ok(());
    }
    reachable_by_nobody()?;
    let Some(python) = SYSTEM_PYTHONS.iter().find(|p| {
        nobody(p)
            .args(["-c", "import venv, ensurepip"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }) else {
        eprintln!(
            "note: unprivileged mcp clients: no Python that uid {NOBODY} can run (tried {}); skipped",
            SYSTEM_PYTHONS.join(", ")
        );
        return Ok(());
    };
    let venv_python = venv.join("bin/python");
    let venv_s = venv.to_str().ok_or("the target directory is not UTF-8")?;
    if !venv_python.exists() {
        step(
            "mcp clients venv (uid 65534)",
            python,
            &["-m", "venv", venv_s],
        )?;
    }
    let vp = venv_python
        .to_str()
        .ok_or("the target directory is not UTF-8")?;
    step(
        "mcp clients pip (uid 65534)",
        vp,
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            "crates/mcp/tests/python/requirements.txt",
        ],
    )?;
    let bin = format!(
        "SANDGATE_BIN={}",
        bin.to_str().ok_or("the target directory is not UTF-8")?
    );
    let mut args = [AS_NOBODY, NOBODY_HOME].concat();
    args.extend([
        &bin,
        "sh",
        "-c",
        "cd crates/mcp/tests && \"$1\" -m pytest -q -p no:cacheprovider python && cd ts && node --test",
        "sh",
        vp,
    ]);
    step("mcp clients as uid 65534", "setpriv", &args)
}

/// Runs the Python, Go and Node bindings' tests again as uid 65534,
/// against the library `bindings::test` used, from the checkout (read,
/// never written: every file a test makes goes to `/tmp`). Python runs
/// from `venv`, the virtual environment [`mcp_clients`] made for that
/// user (it holds pytest); Go's test binary is built as root and run as
/// that user.
pub fn bindings(venv: &Path) -> Result<(), String> {
    if !is_root() {
        eprintln!("note: unprivileged bindings: not root, so they cannot switch user; skipped");
        return Ok(());
    }
    reachable_by_nobody()?;
    let lib = crate::bindings::lib_dir();
    let utf8 = |p: &Path| {
        p.to_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{}: not UTF-8", p.display()))
    };
    let library = format!("SANDGATE_LIBRARY={}", utf8(&lib.join("libsandgate.so"))?);
    let path = format!("PATH={}", std::env::var("PATH").unwrap_or_default());
    let venv_python = venv.join("bin/python");
    if venv_python.exists() {
        let vp = utf8(&venv_python)?;
        let mut args = [AS_NOBODY, NOBODY_HOME].concat();
        args.extend([
            library.as_str(),
            path.as_str(),
            "PYTHONDONTWRITEBYTECODE=1",
            vp.as_str(),
        ]);
        args.extend(crate::bindings::PYTEST);
        step("python binding as uid 65534", "setpriv", &args)?;
    } else {
        eprintln!(
            "note: unprivileged bindings: no Python with pytest that uid {NOBODY} can run ({} is missing); the Python binding's tests were skipped",
            venv_python.display()
        );
    }
    // The race-detector test binary is built as root, from the cache the
    // root run just warmed (a cache of this user's own started cold and
    // cost most of a minute and a half), and only run as this user: who
    // builds it does not matter, who runs it does. `TestStaticLinking`
    // builds a program with `go build` to see how it links, which is the
    // same whoever runs it, so only the root run has it.
    crate::bindings::use_pkg_config()?;
    let go_test = crate::target_dir().join("go/sandgate-race.test");
    let go_test = utf8(&go_test)?;
    step(
        "go test binary",
        "go",
        &["-C", "bindings/go", "test", "-c", "-race", "-o", &go_test],
    )?;
    let mut args = [AS_NOBODY, NOBODY_HOME].concat();
    args.extend([
        path.as_str(),
        "sh",
        "-c",
        "cd bindings/go && exec \"$1\" -test.count=1 -test.skip '^TestStaticLinking$'",
        "sh",
        go_test.as_str(),
    ]);
    step("go binding as uid 65534", "setpriv", &args)?;
    let mut args = [AS_NOBODY, NOBODY_HOME].concat();
    args.extend([path.as_str(), "sh", "-c", "cd bindings/node && node --test"]);
    step("node binding as uid 65534", "setpriv", &args)
}

/// Runs the C ABI's test program `exe` again as uid 65534 (without
/// valgrind, which the root run has), loading the library from `lib`.
pub fn c_test(exe: &str, lib: &str) -> Result<(), String> {
    if !is_root() {
        eprintln!("note: unprivileged C test: not root, so it cannot switch user; skipped");
        return Ok(());
    }
    reachable_by_nobody()?;
    let library_path = format!("LD_LIBRARY_PATH={lib}");
    let mut args = [AS_NOBODY, NOBODY_HOME].concat();
    args.extend([library_path.as_str(), exe]);
    step("C test as uid 65534", "setpriv", &args)
}

/// Makes sure uid 65534 can reach the checkout: every directory above it
/// must let others search it. A checkout in a private temporary directory
/// (`mktemp -d` makes it 0700) gets that search permission added to the
/// directories beneath the system's temporary directory, which this run
/// made or owns for the purpose; anywhere else a directory that refuses it
/// is named, and nothing is changed.
fn reachable_by_nobody() -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let root = workspace_root();
    let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap_or_else(|_| "/tmp".into());
    for dir in root.ancestors() {
        let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mode = meta.permissions().mode();
        if mode & 0o001 != 0 {
            continue;
        }
        if dir.starts_with(&tmp) && dir != tmp {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o001))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            eprintln!(
                "note: unprivileged: gave others search permission on {} (mode {:o}), so that uid {NOBODY} can reach the checkout",
                dir.display(),
                mode & 0o7777
            );
        } else {
            return Err(format!(
                "uid {NOBODY} cannot reach the checkout: {} lets others no search (mode {:o}); \
                 run `chmod o+x` on it or check out elsewhere",
                dir.display(),
                mode & 0o7777
            ));
        }
    }
    Ok(())
}

/// `program` as uid 65534 with no supplementary groups, the environment
/// reset but for `HOME` and `TMPDIR` (both `/tmp`).
fn nobody(program: &str) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(AS_NOBODY).args(NOBODY_HOME).arg(program);
    cmd
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// cargo's JSON messages for the workspace's tests, as `cargo test
/// --workspace --all-targets` builds them (the same features, so nothing
/// is rebuilt after that command).
pub fn build_plan() -> Result<String, String> {
    let out = Command::new(cargo())
        .args([
            "test",
            "--workspace",
            "--all-targets",
            "--no-run",
            "--message-format=json",
        ])
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("unprivileged: cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err("unprivileged: cannot build the tests".to_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The path of the integration test `test` of the crate in
/// `crates/<package>` in the build plan (found by the test's source path,
/// `tests/<test>.rs` or `tests/<test>/main.rs`: cargo spells a package id
/// without the name when the name is the directory's).
/// `test` = `lib` names the crate's unit tests (`src/lib.rs`).
fn find_test(plan: &str, package: &str, test: &str) -> Result<String, String> {
    let lib = test == "lib";
    let (file, dir, name, kind) = if lib {
        let src = format!("/crates/{package}/src/lib.rs\"");
        (src.clone(), src, String::new(), "\"test\":true")
    } else {
        (
            format!("/crates/{package}/tests/{test}.rs\""),
            format!("/crates/{package}/tests/{test}/main.rs\""),
            format!("\"name\":\"{test}\""),
            // The test itself, not a binary target built for it.
            "\"kind\":[\"test\"]",
        )
    };
    plan.lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        .filter(|l| l.contains(kind) && l.contains("\"executable\":\""))
        .filter(|l| (l.contains(&file) || l.contains(&dir)) && l.contains(&name))
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = l[at..].find('"')?;
            Some(l[at..at + end].to_owned())
        })
        .ok_or_else(|| format!("unprivileged: no test binary for {package} --test {test}"))
}

#[cfg(test)]
mod tests {
    use super::find_test;

    /// Two artifacts as `cargo test --message-format=json` prints them: a
    /// crate's unit tests and one of its integration tests, beside the
    /// library built for the latter (no executable).
    const PLAN: &str = concat!(
        r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"sandgate_shellexec","src_path":"/w/crates/shellexec/src/lib.rs"},"profile":{"test":false},"executable":null}"#,
        "\n",
        r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"sandgate_shellexec","src_path":"/w/crates/shellexec/src/lib.rs"},"profile":{"test":true},"executable":"/w/target/debug/deps/sandgate_shellexec-1"}"#,
        "\n",
        r#"{"reason":"compiler-artifact","target":{"kind":["test"],"name":"exec","src_path":"/w/crates/shellexec/tests/exec.rs"},"profile":{"test":true},"executable":"/w/target/debug/deps/exec-2"}"#,
        "\n",
    );

    #[test]
    fn unit_tests_and_integration_tests_are_found_by_their_sources() {
        assert_eq!(
            find_test(PLAN, "shellexec", "lib").unwrap(),
            "/w/target/debug/deps/sandgate_shellexec-1"
        );
        assert_eq!(
            find_test(PLAN, "shellexec", "exec").unwrap(),
            "/w/target/debug/deps/exec-2"
        );
        assert!(find_test(PLAN, "shellexec", "seccomp").is_err());
        assert!(find_test(PLAN, "rootfs", "lib").is_err());
    }
}
