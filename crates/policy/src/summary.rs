//! What a policy grants, for people and for programs.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Budgets, Confine, ExecPolicy, Limits, Policy, SecurityMode};

/// A policy's grants in plain values: `Display` prints an aligned page a
/// newcomer can read (what `sandgate check` shows), [`Summary::to_json`]
/// the same as one JSON object (the tool endpoint's `summary` answer).
///
/// JSON shape:
///
/// ```text
/// {"mode":"restricted","read_roots":["/abs/inputs"],"write_root":"/abs/ws",
///  "deny_write":["*.yml"],
///  "limits":{"max_read_bytes":10485760,"max_write_bytes":5242880,"allow_overwrite":false},
///  "exec":{"enabled":true,"shell":"/bin/bash","timeout_ms":30000,"max_output_bytes":8388608,
///          "max_memory_bytes":2147483648,"max_tasks":4096,"max_cpu_ms":null,
///          "env_inherit":[],"confine":"best_effort","process_allow":[]},
///  "net":{"allow":["api.example.com"],"allow_http":false},
///  "budgets":{"fs_ops":1000,"exec_ops":null,"net_ops":null},
///  "digest":"sha256:…"}
/// ```
///
/// Root paths are shown as [`shown`](fn@crate::shown) shows them: any bytes
/// that are not UTF-8 written `\xNN` (never U+FFFD, which can be a real
/// name of its own), a backslash written `\\` and a control character
/// `\u{…}`; a `null` budget is unlimited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// `security_mode`.
    pub mode: SecurityMode,
    /// The canonical read roots, in order.
    pub read_roots: Vec<String>,
    /// The canonical write root, if any.
    pub write_root: Option<String>,
    /// The deny-write patterns, verbatim.
    pub deny_write: Vec<String>,
    /// Byte caps and the overwrite switch.
    pub limits: Limits,
    /// The `[exec]` settings.
    pub exec: ExecPolicy,
    /// The `[net]` settings.
    pub net: SummaryNet,
    /// The operation budgets.
    pub budgets: Budgets,
    /// The policy digest (`sha256:<hex>`).
    pub digest: String,
}

/// The `[net]` part of a [`Summary`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryNet {
    /// `net.allow`, as written.
    pub allow: Vec<String>,
    /// `net.allow_http`.
    pub allow_http: bool,
    /// `[[net.credentials]]`, one line each: `host[:port] -> Header
    /// (scheme, from env NAME | file PATH) [methods] [paths]`. Never a
    /// value. Absent from the JSON when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
    /// `[[net.rules]]`, one line each: `allow|deny host[:port] [methods]
    /// [paths]`. Absent from the JSON when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
}

fn target(host: &str, port: Option<u16>) -> String {
    match port {
        Some(p) => format!("{host}:{p}"),
        None => host.to_owned(),
    }
}

fn matching(methods: &[String], prefixes: &[String]) -> String {
    let methods = if methods.is_empty() {
        "any method".to_owned()
    } else {
        methods.join(",")
    };
    let paths = if prefixes.is_empty() {
        "any path".to_owned()
    } else {
        prefixes.join(",")
    };
    format!("{methods} on {paths}")
}

impl Summary {
    pub(crate) fn of(policy: &Policy) -> Summary {
        Summary {
            mode: policy.security_mode(),
            read_roots: policy
                .read_roots()
                .iter()
                .map(sandgate_codes::shown)
                .collect(),
            write_root: policy.write_root().map(sandgate_codes::shown),
            deny_write: policy.deny_write().to_vec(),
            limits: policy.limits(),
            exec: policy.exec().clone(),
            net: SummaryNet {
                allow: policy
                    .net_allow()
                    .iter()
                    .map(|e| e.raw().to_owned())
                    .collect(),
                allow_http: policy.allow_http(),
                credentials: policy
                    .net_credentials()
                    .iter()
                    .map(|c| {
                        let scheme = match c.scheme {
                            None => "as is".to_owned(),
                            Some(crate::CredentialScheme::Bearer) => "Bearer".to_owned(),
                            Some(crate::CredentialScheme::Token) => "token".to_owned(),
                            Some(crate::CredentialScheme::Basic) => {
                                format!("basic, user {}", c.user.as_deref().unwrap_or_default())
                            }
                        };
                        format!(
                            "{} -> {} ({scheme}, from {}) on {}",
                            target(&c.host, c.port),
                            c.header,
                            c.source,
                            matching(&c.methods, &c.path_prefixes)
                        )
                    })
                    .collect(),
                rules: policy
                    .net_request_rules()
                    .iter()
                    .map(|r| {
                        format!(
                            "{} {} {}",
                            match r.action {
                                crate::RuleAction::Allow => "allow",
                                crate::RuleAction::Deny => "deny",
                            },
                            target(&r.host, r.port),
                            matching(&r.methods, &r.path_prefixes)
                        )
                    })
                    .collect(),
            },
            budgets: policy.budgets(),
            digest: policy.digest().to_owned(),
        }
    }

    /// The summary as one line of JSON.
    pub fn to_json(&self) -> String {
        // Plain strings, numbers and booleans with string keys: serializing
        // cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// The summary as a `serde_json::Value`, to embed in a larger answer.
    pub fn to_json_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// Width of the label column.
const LABEL: usize = 18;

fn bytes(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    const KIB: u64 = 1024;
    if n >= MIB && n % MIB == 0 {
        format!("{n} bytes ({} MiB)", n / MIB)
    } else if n >= KIB && n % KIB == 0 {
        format!("{n} bytes ({} KiB)", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

fn millis(ms: u64) -> String {
    if ms >= 1000 && ms % 1000 == 0 {
        format!("{ms} ms ({} s)", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

fn budget(b: Option<u64>) -> String {
    match b {
        None => "unlimited".to_owned(),
        Some(0) => "0 (none allowed)".to_owned(),
        Some(n) => n.to_string(),
    }
}

/// Writes `label` padded, then the first value, then the rest aligned
/// under it; `empty` when there are no values.
fn list(f: &mut fmt::Formatter<'_>, label: &str, values: &[String], empty: &str) -> fmt::Result {
    match values.split_first() {
        None => writeln!(f, "  {label:<LABEL$}{empty}"),
        Some((first, rest)) => {
            writeln!(f, "  {label:<LABEL$}{first}")?;
            for value in rest {
                writeln!(f, "  {:<LABEL$}{value}", "")?;
            }
            Ok(())
        }
    }
}

fn row(f: &mut fmt::Formatter<'_>, label: &str, value: impl fmt::Display) -> fmt::Result {
    writeln!(f, "  {label:<LABEL$}{value}")
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let restricted = self.mode == SecurityMode::Restricted;
        writeln!(f, "sandgate policy")?;
        row(
            f,
            "mode",
            if restricted {
                "restricted (confined grants only)"
            } else {
                "trusted_host (operator-approved host integrations, no confinement claim)"
            },
        )?;
        row(f, "digest", &self.digest)?;

        writeln!(f, "files")?;
        list(f, "read roots", &self.read_roots, "none (no reads)")?;
        row(
            f,
            "write root",
            self.write_root.as_deref().unwrap_or("none (no writes)"),
        )?;
        let mut denied = self.deny_write.clone();
        if restricted {
            denied.push("every .git component (restricted mode)".to_owned());
        }
        list(f, "deny write", &denied, "none")?;
        row(f, "max read", bytes(self.limits.max_read_bytes))?;
        row(f, "max write", bytes(self.limits.max_write_bytes))?;
        row(
            f,
            "overwrite",
            if self.limits.allow_overwrite {
                "allowed when the call also asks for it"
            } else {
                "refused (writes create new files only)"
            },
        )?;

        writeln!(f, "exec")?;
        if self.exec.enabled {
            row(f, "shell", format!("{} -c COMMAND", self.exec.shell))?;
        } else {
            row(f, "shell", "disabled")?;
        }
        row(f, "timeout", millis(self.exec.timeout_ms))?;
        row(
            f,
            "max output",
            format!(
                "{}, stdout and stderr together",
                bytes(self.exec.max_output_bytes)
            ),
        )?;
        row(
            f,
            "max memory",
            format!(
                "{}, the command's whole tree",
                bytes(self.exec.max_memory_bytes)
            ),
        )?;
        row(
            f,
            "max tasks",
            format!(
                "{} processes and threads of the command's tree",
                self.exec.max_tasks
            ),
        )?;
        row(
            f,
            "max cpu",
            match self.exec.max_cpu_ms {
                Some(ms) => format!("{}, the command's whole tree", millis(ms)),
                None => "unlimited (the timeout bounds it)".to_owned(),
            },
        )?;
        list(
            f,
            "env inherit",
            &self.exec.env_inherit,
            "none beyond the safe base set",
        )?;
        row(
            f,
            "confine",
            match self.exec.confine {
                Confine::Off => "off (no kernel confinement)",
                Confine::BestEffort => "best_effort (what the kernel offers; each run reports it)",
                Confine::Required => "required (no run without full kernel confinement)",
            },
        )?;
        list(f, "process allow", &self.exec.process_allow, "none")?;

        writeln!(f, "net")?;
        list(f, "allow", &self.net.allow, "none (no network)")?;
        row(
            f,
            "http",
            if self.net.allow_http {
                "allowed (http and ws as well as https and wss)"
            } else {
                "refused (https and wss only)"
            },
        )?;
        if !self.net.credentials.is_empty() {
            list(f, "credentials", &self.net.credentials, "")?;
        }
        if !self.net.rules.is_empty() {
            list(f, "rules", &self.net.rules, "")?;
        }

        writeln!(f, "budgets")?;
        row(f, "fs ops", budget(self.budgets.fs_ops))?;
        row(f, "exec ops", budget(self.budgets.exec_ops))?;
        row(f, "net ops", budget(self.budgets.net_ops))
    }
}
