//! A shell executor that confines the shell.
//!
//! - [`env`](mod@env): the child's environment: a fixed allowlist from the host, minus
//!   every credential-shaped name, plus the operator's `env_inherit`; the
//!   digest of the names passed; the withheld values for redaction.
//! - [`redact`]: a streaming redactor for withheld values and well-known
//!   token shapes, exact whatever the read boundaries.
//! - [`confine`]: Landlock, rlimits and no_new_privs for a child, prepared in
//!   the parent and applied between fork and exec, with a report of exactly
//!   what was enforced.
//! - [`seccomp`]: the seccomp filter under Landlock: sockets Landlock
//!   cannot judge, `listen` judged by the executor, and system calls no
//!   command needs.
//! - [`limits`]: memory, task and CPU limits of each command's tree: a
//!   cgroup v1 of its own as root, otherwise a sampling monitor with rlimit
//!   backstops; the result names the limit that ended a command.
//! - [`exec`]: the executor: `shell -c command` in a new session under a
//!   subreaper keeper, confined, with timeouts, abort, capped and redacted
//!   output, and every descendant killed before the call returns.
//! - [`protected`]: the hook around each command through which an embedder
//!   finds and undoes changes to protected paths.
//! - [`binds`]: in namespaces, protected entries bound read-only over
//!   themselves and their parents pinned, while the command runs.
//! - [`git`]: confined git: a strict word splitter and a per-subcommand
//!   schema that turn `git status|diff|log …` into a hardened invocation.
//!
//! The facade (`sandgate::Executor`) builds all of this from a policy;
//! `sandgate run` (the supervised run) lives in the CLI.
#![deny(missing_docs)]

// Process groups, pidfds, Landlock and seccomp are Linux interfaces; another
// system gets one clear message instead of a page of unresolved names.
#[cfg(not(target_os = "linux"))]
compile_error!(
    "sandgate-shellexec builds only on Linux: the executor confines the shell with Landlock, \
     seccomp and pidfds. x86_64 Linux with glibc is the platform that is built and tested."
);

/// The hooks git runs (githooks(5)). Confined git must run none of them,
/// and a deny-write pattern that covers any one protects hooks, so the
/// repository's config (whose `core.hooksPath` would move them) goes with
/// it.
pub const GIT_HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "p4-changelist",
    "p4-prepare-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
    "post-index-change",
];

/// Directories a command reads and executes from besides the policy's
/// roots, those a shell and ordinary tools need: granted read and execute
/// by Landlock on the floor, and bound read-only into the view in
/// namespaces (those that exist; a symlink such as `/bin -> usr/bin` is
/// recreated there as a symlink).
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

#[cfg(target_os = "linux")]
pub mod binds;
#[cfg(target_os = "linux")]
mod capture;
#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
pub mod confine;
#[cfg(target_os = "linux")]
mod connect;
#[cfg(target_os = "linux")]
pub mod env;
#[cfg(target_os = "linux")]
pub mod exec;
#[cfg(target_os = "linux")]
pub mod git;
#[cfg(target_os = "linux")]
pub mod limits;
#[cfg(target_os = "linux")]
mod monitor;
#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
mod ns;
#[cfg(target_os = "linux")]
mod proctree;
#[cfg(target_os = "linux")]
pub mod protected;
#[cfg(target_os = "linux")]
pub mod redact;
#[cfg(target_os = "linux")]
mod run;
#[cfg(target_os = "linux")]
pub mod seccomp;
#[cfg(target_os = "linux")]
mod spawn;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
mod tmpdir;
