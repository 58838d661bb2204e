//! sandgate: one enforcement core for the tools AI agents are handed.
//!
//! This facade composes the layers below it:
//!
//! - [`RelPath`]: every agent-supplied name is parsed first and refused when
//!   it could mean something else on another host or climb with `..`;
//! - [`Sandbox`]: the file toolkit (read, write, edit, list, stat, mkdir,
//!   delete, rename, glob, grep) confined by the kernel to granted roots
//!   ([`rootfs`]), guarded by deny-write patterns ([`fileguard`]), capped,
//!   budgeted and audited;
//! - [`Fetcher`]: a web fetch confined by the network rules the policy
//!   grants ([`netguard`]), every redirect hop included, with pinned
//!   connections and caps.
//!
//! ```no_run
//! use sandgate::{ErrorCode, Sandbox};
//! let sb = Sandbox::builder()
//!     .read_root("project")
//!     .write_root("project")
//!     .deny_write(".github/**")
//!     .build()?;
//! let text = sb.read("README.md")?;
//! assert_eq!(sb.read("../etc/passwd").unwrap_err().code(), ErrorCode::PathInvalid);
//! let refused = sb.write(".github/workflows/ci.yml", b"x", sandgate::WriteOptions::default());
//! assert_eq!(refused.unwrap_err().code(), ErrorCode::FsProtected);
//!
//! // No policy file: the executor's settings are the policy's keys.
//! let ex = sandgate::Executor::builder()
//!     .write_root("project")
//!     .enabled(true)
//!     .timeout_ms(30_000)
//!     .build()?;
//! let name = sb.host_read_name("/abs/path/to/project/src/lib.rs")?; // a host path
//! let r = ex.exec("cargo test", sandgate::ExecOptions { cwd: Some("/abs/path/to/project/crates".into()), ..Default::default() })?;
//! # let _ = (name, r);
//! # Ok::<(), sandgate::Error>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod audit;
mod bytes;
mod error;
pub mod exec;
pub mod fetch;
pub mod hostpath;
pub mod relpath;
mod sandbox;
pub mod search;
pub mod tool;

pub use audit::{AuditEvent, AuditSink};
pub use error::{chain_message, Error, ErrorCode};
pub use exec::{
    ExecGrant, ExecOptions, ExecResult, Executor, ExecutorBuilder, Limit, LimitsReport, Mechanism,
    NetAuditRecord, NetProtocol, NetRequestRecord, NetResolve, NetVerdict, ProtectedAction,
    ProtectedChange, ProtectedDetection,
};
pub use fetch::Fetcher;
pub use relpath::{RelPath, RelPathError, RelPathReason};
pub use sandbox::{
    EditOptions, EditPreview, FsGrant, LinesRead, ListEntry, Sandbox, SandboxBuilder, StatInfo,
    WriteOptions, DEFAULT_MAX_READ_BYTES, DEFAULT_MAX_WRITE_BYTES, MAX_RANGE_LINES,
    MAX_RENAME_WALK_ENTRIES,
};
pub use sandgate_fileguard as fileguard;
pub use sandgate_netguard as netguard;
pub use sandgate_policy as policy;
pub use sandgate_policy::{Policy, PolicyError, PolicyOptions};
pub use sandgate_rootfs as rootfs;
pub use sandgate_rootfs::{FileKind, Resolver};
pub use sandgate_shellexec as shellexec;
pub use tool::ToolSession;
