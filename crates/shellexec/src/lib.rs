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
//! - [`git`]: confined git: a strict word splitter and a per-subcommand
//!   schema that turn `git status|diff|log …` into a hardened invocation.
//!
//! The facade (`sandgate::Executor`) builds all of this from a policy;
//! `sandgate run` (the supervised run) lives in the CLI.
#![deny(missing_docs)]

mod capture;
mod cgroup;
pub mod confine;
pub mod env;
pub mod exec;
pub mod git;
pub mod limits;
mod monitor;
mod proctree;
pub mod redact;
mod run;
pub mod seccomp;
mod spawn;
mod sys;
