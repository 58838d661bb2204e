//! Audit events: one per operation, refused ones included, never content.

pub use sandgate_codes::audit::{AuditEvent, AuditSink};
