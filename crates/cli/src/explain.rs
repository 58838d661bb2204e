//! `sandgate explain [POLICY] TARGET`: whether the policy lets an agent
//! read or write a path, connect to HOST:PORT or run a command, and which
//! rule decides, answered without doing any of it.
//!
//! The answers come from the checks the tool endpoint itself makes:
//! [`Sandbox::explain_read`] and [`Sandbox::explain_write`] share the root
//! walk and the write admission with `read` and `write`,
//! [`Executor::explain`] is the admission `exec` runs first, and a
//! connection is [`Policy::authorize`].

use std::path::PathBuf;
use std::process::ExitCode;

use sandgate::policy::{NetEntry, NetHost, Policy};
use sandgate::{Error, ErrorCode, ExecGrant, Executor, FsGrant, Sandbox};
use serde_json::{json, Value};

/// Shown after `sandgate explain --help`.
pub const AFTER_HELP: &str = "\
TARGET is guessed from its form unless --as says: HOST:PORT or an IPv6
literal ([ADDR]:PORT, [ADDR], ADDR) asks about a connection, read as a
net.allow entry is; anything with a space is a command, anything else a
path (asked both for read and write). Exit 0 when everything asked is allowed,
1 when something is refused, 2 when the policy itself is refused, TARGET
is not UTF-8 (no agent can name it), or the answer could not be written (a full disk; a reader that went away, as with
`| head -1`, keeps the answer's code).

Examples:
  sandgate explain agent-policy.toml notes/todo.md
  sandgate explain --policy agent-policy.toml 'git status'
  SANDGATE_POLICY=agent-policy.toml sandgate explain api.example.com:443";

/// What to ask about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Reading a path.
    Read,
    /// Writing (creating or replacing) a path.
    Write,
    /// Connecting to HOST:PORT.
    Connect,
    /// Running a command.
    Run,
}

/// `sandgate explain`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// `POLICY TARGET`, or `TARGET` alone with --policy or SANDGATE_POLICY.
    /// Quote a command that has spaces.
    /// (Taken as bytes: the policy may be any file name; a target that is
    /// not UTF-8 is refused by [`run`], naming it.)
    #[arg(
        value_name = "[POLICY] TARGET",
        num_args = 1..=2,
        required = true,
        value_parser = clap::value_parser!(std::ffi::OsString)
    )]
    words: Vec<std::ffi::OsString>,
    /// The policy file (TOML).
    #[arg(long, env = "SANDGATE_POLICY", value_name = "POLICY")]
    policy: Option<PathBuf>,
    /// What to ask about (default: guessed from TARGET).
    #[arg(long = "as", value_enum, value_name = "KIND")]
    kind: Option<Kind>,
    /// Print the answers as one JSON object.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// Whether the words name a policy before the target.
    pub fn names_a_policy(&self) -> bool {
        self.words.len() == 2
    }
}

/// One answer: the operation, whether it is allowed, the rule that
/// decides, and the refusal's code and message.
pub struct Answer {
    /// `read`, `write`, `connect` or `run`.
    pub op: &'static str,
    /// Whether the agent may do it.
    pub allowed: bool,
    /// The policy rule that decides.
    pub rule: String,
    /// The refusal's code, when refused.
    pub code: Option<ErrorCode>,
    /// Why, in words.
    pub detail: String,
}

impl Answer {
    fn to_json(&self) -> Value {
        json!({
            "op": self.op,
            "allowed": self.allowed,
            "rule": self.rule,
            "code": self.code.map(|c| c.as_str()),
            "detail": self.detail,
        })
    }
}

/// Guesses what `target` names.
fn guess(target: &str) -> &'static [Kind] {
    if target.contains(char::is_whitespace) {
        return &[Kind::Run];
    }
    let host_port = target.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok()
    });
    // An IPv6 literal (`2606:4700::abcd`, `[::1]`) names a host, not a file.
    let v6 = NetEntry::parse(target)
        .is_ok_and(|e| matches!(e.host(), NetHost::Ip(std::net::IpAddr::V6(_))));
    if host_port || v6 {
        &[Kind::Connect]
    } else {
        &[Kind::Read, Kind::Write]
    }
}

fn refused(op: &'static str, e: &Error, rule: String) -> Answer {
    Answer {
        op,
        allowed: false,
        rule,
        code: Some(e.code()),
        detail: e.message().to_owned(),
    }
}

/// The rule behind a file refusal, named as the policy file names it.
fn fs_rule(policy: &Policy, op: &str, e: &Error) -> String {
    match e.code() {
        ErrorCode::FsProtected => match e.pattern() {
            Some(p) if policy.deny_write().iter().any(|d| d == p) => {
                format!("fs.deny_write \"{p}\"")
            }
            Some(p) => format!("built-in protection \"{p}\""),
            None => "fs.deny_write".to_owned(),
        },
        ErrorCode::Denied if op == "read" => "fs.read_roots (none granted)".to_owned(),
        ErrorCode::Denied => "fs.write_root (none granted)".to_owned(),
        ErrorCode::NotFound if op == "read" => "fs.read_roots (no read root holds it)".to_owned(),
        ErrorCode::TooLarge if op == "read" => "fs.max_read_bytes".to_owned(),
        ErrorCode::TooLarge => "fs.max_write_bytes".to_owned(),
        ErrorCode::Exists => "fs.allow_overwrite = false".to_owned(),
        ErrorCode::PathInvalid | ErrorCode::PathEscape => {
            "agent-facing names (relative, no `..`)".to_owned()
        }
        _ => "the file beneath the root".to_owned(),
    }
}

/// A budget of 0, which refuses every call of its kind whatever else
/// allows it: `(op, key)` of the answer, or `None`.
fn spent_budget(policy: &Policy, kind: Kind) -> Option<(&'static str, &'static str)> {
    let budgets = policy.budgets();
    match kind {
        Kind::Read if budgets.fs_ops == Some(0) => Some(("read", "fs_ops")),
        Kind::Write if budgets.fs_ops == Some(0) => Some(("write", "fs_ops")),
        Kind::Run if budgets.exec_ops == Some(0) => Some(("run", "exec_ops")),
        // `net_ops` counts fetches, not a command's connections.
        _ => None,
    }
}

/// Answers `kind` about `target` under `policy`.
pub fn answer(
    policy: &Policy,
    sandbox: &Sandbox,
    executor: &Executor,
    kind: Kind,
    target: &str,
) -> Answer {
    let answer = answer_by_rules(policy, sandbox, executor, kind, target);
    // Every file tool call spends `fs_ops` first, refused or not; a command
    // spends `exec_ops` once everything else admits it.
    let first = kind != Kind::Run || answer.allowed;
    match spent_budget(policy, kind) {
        Some((op, key)) if first => Answer {
            op,
            allowed: false,
            rule: format!("budgets.{key} = 0"),
            code: Some(ErrorCode::Denied),
            detail: format!("the policy allows no such call ([budgets] {key} = 0)"),
        },
        _ => answer,
    }
}

fn answer_by_rules(
    policy: &Policy,
    sandbox: &Sandbox,
    executor: &Executor,
    kind: Kind,
    target: &str,
) -> Answer {
    match kind {
        Kind::Read => match sandbox.explain_read(target) {
            Ok(FsGrant::Read { root }) => Answer {
                op: "read",
                allowed: true,
                rule: format!("fs.read_roots[{root}]"),
                code: None,
                detail: format!(
                    "read from {}",
                    policy
                        .read_roots()
                        .get(root)
                        .map_or_else(String::new, crate::shown)
                ),
            },
            Ok(_) => unreachable_grant("read"),
            Err(e) => refused("read", &e, fs_rule(policy, "read", &e)),
        },
        Kind::Write => match sandbox.explain_write(target) {
            Ok(FsGrant::Write { exists }) => Answer {
                op: "write",
                allowed: true,
                rule: if exists {
                    "fs.write_root, fs.allow_overwrite = true".to_owned()
                } else {
                    "fs.write_root".to_owned()
                },
                code: None,
                detail: if exists {
                    "replaces the existing file when the call asks for overwrite".to_owned()
                } else {
                    "creates a new file".to_owned()
                },
            },
            Ok(_) => unreachable_grant("write"),
            Err(e) => refused("write", &e, fs_rule(policy, "write", &e)),
        },
        Kind::Run => match executor.explain(target) {
            Ok(ExecGrant::ConfinedGit(entry)) => Answer {
                op: "run",
                allowed: true,
                rule: format!("exec.process_allow \"{entry}\""),
                code: None,
                detail: "runs as confined git".to_owned(),
            },
            Ok(_) => Answer {
                op: "run",
                allowed: true,
                rule: "exec.enabled = true".to_owned(),
                code: None,
                detail: format!(
                    "runs as {} -c COMMAND, confine = {}",
                    policy.exec().shell,
                    policy.exec().confine.as_str()
                ),
            },
            Err(e) => {
                let rule = match e.code() {
                    ErrorCode::Denied => "exec.enabled = false".to_owned(),
                    _ => "exec.process_allow".to_owned(),
                };
                refused("run", &e, rule)
            }
        },
        Kind::Connect => {
            let (host, port) = match connect_target(target) {
                Ok(hp) => hp,
                Err(detail) => {
                    return Answer {
                        op: "connect",
                        allowed: false,
                        rule: "net.allow".to_owned(),
                        code: Some(ErrorCode::NetDenied),
                        detail,
                    }
                }
            };
            let decision = policy.authorize("https", &host, port, None);
            Answer {
                op: "connect",
                allowed: decision.allowed,
                rule: decision
                    .rule
                    .as_ref()
                    .map_or_else(|| "net.allow".to_owned(), |r| format!("net.allow \"{r}\"")),
                code: (!decision.allowed).then(|| decision.code()),
                detail: decision.reason,
            }
        }
    }
}

/// The host and port a connect target names, read as a `net.allow` entry
/// is (netguard's parser): `HOST`, `HOST:PORT`, an IPv4 literal, `[IPv6]`,
/// `[IPv6]:PORT`, or an unbracketed IPv6 literal that cannot be misread as
/// one with a port. Splitting at the last `:` instead read
/// `2606:4700::1111` as the host `2606:4700:` on port 1111, and answered
/// for a connection nobody asked about.
fn connect_target(target: &str) -> Result<(String, Option<u16>), String> {
    let quoted = target.escape_debug();
    let entry = NetEntry::parse(target)
        .map_err(|why| format!("\"{quoted}\" is not HOST, HOST:PORT or [IPv6]:PORT: {why}"))?;
    let host = match entry.host() {
        NetHost::Name(name) => name.clone(),
        NetHost::Ip(ip) => ip.to_string(),
        _ => {
            return Err(format!(
                "\"{quoted}\" names many hosts: ask about one (a wildcard is a grant, not a target)"
            ))
        }
    };
    Ok((host, entry.port()))
}

fn unreachable_grant(op: &'static str) -> Answer {
    Answer {
        op,
        allowed: false,
        rule: String::new(),
        code: Some(ErrorCode::Internal),
        detail: "an answer of another kind".to_owned(),
    }
}

/// `sandgate explain`.
pub fn run(args: &Args) -> ExitCode {
    let (path, target) = match args.words.as_slice() {
        [policy, target] => (Some(PathBuf::from(policy)), target),
        [target] => (args.policy.clone(), target),
        _ => unreachable!("clap takes one or two words"),
    };
    // An agent names paths, hosts and commands in JSON, which is UTF-8:
    // no call could ask about this target.
    let Some(target) = target.to_str() else {
        errln!(
            "sandgate: the target {} is not UTF-8: an agent names paths, hosts and commands \
             in UTF-8, so no call of its can ask about it",
            crate::shown(target)
        );
        return ExitCode::from(2);
    };
    let Some(path) = path else {
        errln!(
            "sandgate: no policy: give POLICY TARGET, or --policy POLICY, or set SANDGATE_POLICY"
        );
        return ExitCode::from(2);
    };
    let policy = match crate::load(&path) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let built =
        Sandbox::from_policy(&policy).and_then(|sb| Ok((sb, Executor::from_policy(&policy)?)));
    let (sandbox, executor) = match built {
        Ok(both) => both,
        Err(e) => {
            crate::refused(&e);
            return ExitCode::from(2);
        }
    };
    let kinds = match args.kind {
        Some(k) => vec![k],
        None => guess(target).to_vec(),
    };
    let answers: Vec<Answer> = kinds
        .iter()
        .map(|k| answer(&policy, &sandbox, &executor, *k, target))
        .collect();
    if args.json {
        let out = json!({
            "target": target,
            "answers": answers.iter().map(Answer::to_json).collect::<Vec<_>>(),
        });
        outln!("{out}");
    } else {
        // The target and what the rules quote are shown with their
        // controls escaped, as every other text on a terminal is.
        for a in &answers {
            if a.allowed {
                let line = format!("{} {target}: allowed by {} ({})", a.op, a.rule, a.detail);
                outln!("{}", crate::terminal_safe(&line));
            } else {
                let code = a.code.map_or("", |c| c.as_str());
                let line = format!(
                    "{} {target}: refused ({code}) by {}: {}",
                    a.op, a.rule, a.detail
                );
                outln!("{}", crate::terminal_safe(&line));
            }
        }
    }
    if answers.iter().all(|a| a.allowed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
