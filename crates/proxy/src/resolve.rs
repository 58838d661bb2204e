//! Name resolution, done by the proxy on the host's side: the command's
//! resolver is never asked, and the addresses answered are checked before
//! any is dialled. The trait and the system resolver are the ones the
//! confined fetch uses too, so a host injects one resolver for both.

pub use sandgate_resolve::{Resolve, SystemResolver};
