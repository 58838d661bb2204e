//! `sandgate mcp`: the policy's tools over the Model Context Protocol.

use std::path::PathBuf;
use std::process::ExitCode;

/// Where `sandgate mcp` listens, from its options.
pub struct Transport {
    /// `--http ADDR`.
    pub http: Option<std::net::SocketAddr>,
    /// `--token-file FILE`.
    pub token_file: Option<PathBuf>,
    /// `--unix PATH`.
    pub unix: Option<PathBuf>,
}

/// `sandgate mcp --policy P.toml [--audit FILE]` or `sandgate mcp DIR…`.
pub fn mcp(
    policy: Option<PathBuf>,
    audit: Option<PathBuf>,
    dirs: Vec<PathBuf>,
    transport: Transport,
) -> ExitCode {
    let listen = match (transport.http, transport.token_file, transport.unix) {
        (None, None, None) => sandgate_mcp::Listen::Stdio,
        (Some(addr), Some(token), None) => {
            if let Err(e) = sandgate_mcp::transport::check_loopback(&addr) {
                errln!("sandgate: {e}");
                return ExitCode::from(2);
            }
            sandgate_mcp::Listen::Http(addr, token)
        }
        (Some(_), None, _) => {
            errln!("sandgate: --http needs --token-file FILE (where the bearer token is written, mode 0600)");
            return ExitCode::from(2);
        }
        (None, None, Some(path)) => sandgate_mcp::Listen::Unix(path),
        _ => {
            errln!(
                "sandgate: choose one of stdio (the default), --http with --token-file, or --unix"
            );
            return ExitCode::from(2);
        }
    };
    let loaded = match (&policy, dirs.is_empty()) {
        (Some(p), true) => match sandgate::policy::Policy::load(p) {
            Ok(p) => p,
            Err(e) => {
                errln!("sandgate: {}: {}", e.code(), sandgate::chain_message(&e));
                return ExitCode::from(2);
            }
        },
        (None, false) => match sandgate_mcp::policy_for_dirs(&dirs) {
            Ok(p) => p,
            Err(e) => {
                errln!("sandgate: {}: {}", e.code(), e.message());
                return ExitCode::from(2);
            }
        },
        _ => {
            // A user used to the other subcommands may expect the variable
            // to name the policy here too: say that it is not read.
            let unread = if policy.is_none() && std::env::var_os("SANDGATE_POLICY").is_some() {
                " (mcp does not read SANDGATE_POLICY)"
            } else {
                ""
            };
            errln!("sandgate: mcp takes either --policy FILE or one or more directories{unread}");
            return ExitCode::from(2);
        }
    };
    // The policy file as its own audit would take a JSON line for every
    // operation, and the next start would refuse it as broken TOML.
    if let (Some(a), Some(p)) = (&audit, &policy) {
        if same_file(a, p) {
            errln!(
                "sandgate: the audit file {} is the policy file {}; give the audit a file of its own",
                sandgate::policy::shown(a),
                sandgate::policy::shown(p)
            );
            return ExitCode::from(2);
        }
    }
    let write_root = loaded.write_root();
    let sink = match audit
        .as_deref()
        .map(|a| sandgate_mcp::audit::json_lines_file(a, write_root))
    {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            errln!("sandgate: {e}");
            return ExitCode::from(2);
        }
    };
    let server = match sandgate_mcp::Server::from_policy(&loaded, sink, dirs) {
        Ok(s) => s,
        Err(e) => {
            errln!("sandgate: {}: {}", e.code(), e.message());
            return ExitCode::from(2);
        }
    };
    match server.serve_blocking(listen) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("sandgate: mcp: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `a` and `b` name one file (links followed); a path that does not
/// exist names none.
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
