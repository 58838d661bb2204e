//! `cargo xtask <task>`: the project's own automation, in Rust so that it
//! needs nothing beyond the toolchain.
//!
//! Tasks:
//! - `ci`: formatting check, header check, the import graph, the docs'
//!   citations of tests and files (see [`citations`]), clippy with
//!   warnings denied, every test (Rust, then C and the bindings).
//! - `deps`: prints the workspace's import graph and fails on an edge the
//!   layering forbids or a cycle (see [`deps`]).
//! - `test`: every test (what `ci` runs after the checks), the MCP server
//!   under the official Python and TypeScript SDK clients included (the C
//!   test, the bindings and the clients again as uid 65534), then
//!   `dist` and `install-test`.
//! - `bench [--quick]`: every benchmark of the project, one table of ratios
//!   against the in-run baselines (see [`mod@bench`]).
//! - `codegen [--check]`: generates include/sandgate.h and the error-code
//!   tables of the C ABI, Python and Go (see [`codegen`]).
//! - `bindings [--release]`: builds libsandgate into target/lib (see
//!   [`bindings`]).
//! - `unprivileged`: the confinement tests again as uid 65534 (see
//!   [`unprivileged`]).
//! - `unprivileged-bindings`: the Python, Go and Node bindings' tests
//!   again as uid 65534 (part of `test`, after `mcp-clients`, whose
//!   virtual environment for that user gives Python its pytest).
//! - `mcp-clients`: `sandgate mcp` under the official Python and
//!   TypeScript SDK clients, as root and again as uid 65534 (part of
//!   `test`).
//! - `c-test`: the C ABI's test program, under valgrind (see [`c_test`]).
//! - `man`: the man page, generated from the CLI's definitions, into
//!   dist/man/sandgate.1 (see [`man`]).
//! - `bench-tool [N] [--runs R] [--cpu C] [--keep]`: requests per second of
//!   `sandgate tool` on a generated session of N small requests (see
//!   [`bench_tool`]).
//! - `install --prefix DIR`: installs the C library, header and pkg-config
//!   files under DIR, release-built (see [`install`]).
//! - `dist`: every artifact a user installs from, into dist/ (see [`dist`]).
//! - `install-test`: installs dist/'s artifacts away from the checkout and
//!   checks each (see [`install_test`]).
#![forbid(unsafe_code)]

mod bench;
mod bench_tool;
mod bindings;
mod c_test;
mod citations;
mod codegen;
mod codetables;
mod deps;
mod dist;
mod fuzz;
mod install;
mod install_test;
mod man;
mod unprivileged;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn main() -> ExitCode {
    forget_cargos_package_variables();
    let args: Vec<String> = env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let result = match task {
        "ci" => ci(),
        "test" => test(),
        "bench" => bench::run(&args[1..]),
        "bench-tool" => bench_tool::run(&args[1..]),
        "codegen" => codegen::run(&args[1..]),
        "deps" => deps::run(&args[1..]),
        "bindings" => bindings::run(&args[1..]),
        "c-test" => c_test::run(&args[1..]),
        "citations" => citations::run(&args[1..]),
        "fuzz" => fuzz::run(&args[1..]),
        "unprivileged" => unprivileged::run(&args[1..]),
        "unprivileged-bindings" => unprivileged::bindings(&target_dir().join("mcp-venv-nobody")),
        "mcp-clients" => mcp_clients(Build::Own),
        "man" => man::run(&args[1..]),
        "install" => install::run(&args[1..]),
        "dist" => dist::run(&args[1..]),
        "install-test" => install_test::run(&args[1..]),
        "help" | "--help" | "-h" => {
            println!(
                "usage: cargo xtask <ci|test|bench [--quick]|bench-tool [N]|codegen|deps|citations|bindings|c-test|fuzz|man|unprivileged|unprivileged-bindings|mcp-clients|install --prefix DIR|dist [--dev]|install-test>"
            );
            Ok(())
        }
        other => Err(format!(
            "unknown task `{other}` (try: ci, test, bench, bench-tool, install, dist, install-test)"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs one step, printing its name and duration; fails on a non-zero exit.
fn step(name: &str, program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("==> {name}: {program} {}", args.join(" "));
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("{name}: cannot run {program}: {e}"))?;
    eprintln!(
        "<== {name}: {status} in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status})"))
    }
}

/// Runs `cmd` as the step `name` with its stdout and stderr kept in `log`
/// rather than shown, for a step that runs beside another (their output
/// would interleave); from the workspace unless `cmd` names a directory.
/// Says one line when it ends, with its time and its tests' counts
/// (cargo's `test result:` lines, else the output's last line); a step
/// that fails has its whole output shown.
fn step_logged(name: &str, cmd: &mut Command, log: &Path) -> Result<(), String> {
    let file = std::fs::File::create(log)
        .map_err(|e| format!("{name}: cannot make {}: {e}", log.display()))?;
    let twin = file
        .try_clone()
        .map_err(|e| format!("{name}: {}: {e}", log.display()))?;
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(workspace_root());
    }
    cmd.stdin(Stdio::null()).stdout(file).stderr(twin);
    let start = Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("{name}: cannot run {:?}: {e}", cmd.get_program()))?;
    let took = start.elapsed().as_secs_f64();
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    if status.success() {
        let counts: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("test result: "))
            .collect();
        let summary = match counts.is_empty() {
            true => text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .trim()
                .to_owned(),
            false => counts.join("; "),
        };
        eprintln!("<== {name}: {status} in {took:.1}s ({summary})");
        Ok(())
    } else {
        eprintln!(
            "<== {name}: {status} in {took:.1}s; its output:\n{text}\n<== end of the output of {name}"
        );
        Err(format!("{name} failed ({status})"))
    }
}

/// The target directory cargo builds into: `$CARGO_TARGET_DIR` (relative
/// to the workspace when relative), else the workspace's `target/`.
fn target_dir() -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(d) => workspace_root().join(d),
        None => workspace_root().join("target"),
    }
}

/// The variable that turns a namespace test's skip into a failure.
const REQUIRE_NAMESPACES: &str = "SANDGATE_REQUIRE_NAMESPACES";

/// Whether the host gives what sandgate's namespaces need, asked without
/// sandgate (so that a fault in its own probe cannot hide itself): a user
/// namespace with new mount, PID, network, IPC and UTS namespaces, a
/// fresh `/proc`, and a tmpfs mounted inside. `prefix` is put before
/// `unshare` (`setpriv …` to ask as another user).
fn namespaces_possible(prefix: &[&str]) -> bool {
    let probe = [
        "unshare",
        "--user",
        "--map-root-user",
        "--mount",
        "--pid",
        "--net",
        "--ipc",
        "--uts",
        "--fork",
        "--mount-proc",
        "sh",
        "-c",
        "mount -t tmpfs none /tmp",
    ];
    let all: Vec<&str> = prefix.iter().chain(probe.iter()).copied().collect();
    let Some((program, args)) = all.split_first() else {
        return false;
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd.status().is_ok_and(|s| s.success())
}

/// Whether `program args…` runs and exits successfully (output discarded).
fn works(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Drops the variables cargo ran xtask with for xtask's own package
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, ...). Passed on to the cargo
/// builds xtask starts, they made those builds differ from any started
/// elsewhere (from a shell, or by the ffi tests, which build the library
/// without them): build scripts that watch one (ring's watches
/// `CARGO_MANIFEST_DIR`) ran again, and what stands on them was compiled
/// again, a minute of every CI run. Called first, while xtask has one
/// thread.
fn forget_cargos_package_variables() {
    let names: Vec<String> = env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|name| {
            [
                "CARGO_PKG_",
                "CARGO_MANIFEST_",
                "CARGO_CRATE_",
                "CARGO_BIN_",
            ]
            .iter()
            .any(|p| name.starts_with(p))
                || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"]
                    .contains(&name.as_str())
        })
        .collect();
    for name in names {
        env::remove_var(name);
    }
}

fn cargo() -> String {
    env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

fn ci() -> Result<(), String> {
    let cargo = cargo();
    step("fmt", &cargo, &["fmt", "--all", "--check"])?;
    codegen::run(&["--check".to_owned()])?;
    deps::run(&[])?;
    citations::run(&[])?;
    step(
        "clippy",
        &cargo,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // The API documentation builds without a warning (broken links, bare
    // URLs, private items linked from public ones). xtask runs its steps
    // one at a time; the variable is for the child.
    env::set_var("RUSTDOCFLAGS", "-D warnings");
    let doc = step("doc", &cargo, &["doc", "--workspace", "--no-deps"]);
    env::remove_var("RUSTDOCFLAGS");
    doc?;
    test()
}

fn test() -> Result<(), String> {
    let cargo = cargo();
    // Where this host gives namespaces, the tests that need them must not
    // skip: a skip there would mean sandgate fell back to the floor on a
    // host where it should have prevented, and the run would still pass.
    // xtask runs its steps one at a time; the variable is for the children.
    match namespaces_possible(&[]) {
        true => {
            eprintln!("note: this host gives namespaces: tests that need them may not skip");
            env::set_var(REQUIRE_NAMESPACES, "1");
        }
        false => eprintln!(
            "note: this host gives no namespaces (unshare failed): tests that need them skip"
        ),
    }
    // The tests are built first, then run as root here while two lanes
    // run beside them: the same suites as the unprivileged user, and the
    // bindings' steps that need nothing the tests make (the Node addon's
    // build, Python's and Go's tests). Most of the tests wait on
    // processes, sockets, timers and the kernel rather than on the CPU,
    // so the three overlap well. What each lane runs is shown as a line
    // when it ends, and whole if it fails.
    eprintln!("==> build tests: {cargo} test --workspace --all-targets --no-run");
    let start = Instant::now();
    let plan = unprivileged::build_plan()?;
    eprintln!(
        "<== build tests: built in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    bindings::prepare()?;
    let stop = Arc::new(AtomicBool::new(false));
    let lanes = [
        (
            "the unprivileged lane",
            unprivileged::start(plan, Arc::clone(&stop)),
        ),
        (
            "the bindings lane",
            Some(bindings::start(
                target_dir().join("ci-logs"),
                Arc::clone(&stop),
            )),
        ),
    ];
    let root = step("test", &cargo, &["test", "--workspace", "--all-targets"]);
    if root.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    let start = Instant::now();
    let mut failed = Vec::new();
    for (name, lane) in lanes {
        let Some(lane) = lane else { continue };
        let done = lane
            .join()
            .unwrap_or_else(|_| Err(format!("{name} panicked")));
        eprintln!(
            "note: {name} ended {:.1}s after the root run",
            start.elapsed().as_secs_f64()
        );
        if let Err(e) = done {
            stop.store(true, Ordering::Relaxed);
            failed.push(e);
        }
    }
    root?;
    if !failed.is_empty() {
        return Err(failed.join("; "));
    }
    step("doctest", &cargo, &["test", "--workspace", "--doc"])?;
    // The C ABI against the library built once here.
    c_test::run(&[])?;
    bindings::node_tests()?;
    mcp_clients(Build::AsTheTests)?;
    // The bindings' tests again as uid 65534, with the Python that
    // `mcp_clients` made for that user.
    unprivileged::bindings(&target_dir().join("mcp-venv-nobody"))?;
    // What a user installs, packed from the debug build the tests made
    // (`cargo xtask dist` packs a release build; the packaging is the same)
    // and installed away from the checkout.
    dist::run(&["--dev".to_owned()])?;
    install_test::run(&[])
}

/// How [`mcp_clients`] gets its `sandgate`.
enum Build {
    /// Built for this task alone (`cargo xtask mcp-clients`).
    Own,
    /// The one the test step built for the CLI's own tests, where its
    /// features are the workspace's with the test dependencies': asking
    /// cargo for the tests again finds everything fresh, where a build of
    /// the CLI alone resolves features anew and compiles a second copy of
    /// much of the workspace (46 s of a CI run).
    AsTheTests,
}

/// `sandgate mcp` under the official MCP SDK clients (Python and
/// TypeScript), installed by crates/mcp/tests/clients.sh; then the same
/// suites as uid 65534.
fn mcp_clients(build: Build) -> Result<(), String> {
    let args: &[&str] = match build {
        Build::Own => &["build", "-p", "sandgate-cli", "--bin", "sandgate"],
        Build::AsTheTests => &["test", "--workspace", "--all-targets", "--no-run"],
    };
    step("build sandgate", &cargo(), args)?;
    let target = target_dir();
    // xtask runs its steps one at a time; the variables are for the children.
    env::set_var("SANDGATE_BIN", target.join("debug/sandgate"));
    env::set_var("SANDGATE_MCP_VENV", target.join("mcp-venv"));
    step("mcp clients", "bash", &["crates/mcp/tests/clients.sh"])?;
    unprivileged::mcp_clients(
        &target.join("debug/sandgate"),
        &target.join("mcp-venv-nobody"),
    )
}
