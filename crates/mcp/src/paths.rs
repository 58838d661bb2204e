//! Host paths to root-relative names: the facade's mapper
//! ([`sandgate::hostpath`]), which compares an absolute path with each
//! granted directory component by component, never by string prefix.

pub use sandgate::hostpath::{map, map_for_write, GrantedDir, Mapped};
