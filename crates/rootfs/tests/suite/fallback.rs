//! Placeholder: filled in by the fallback work.
