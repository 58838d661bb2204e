/// The ABI's major version: bumped only when a function or type changes
/// incompatibly. It is the shared library's SONAME suffix.
pub const SANDGATE_ABI_MAJOR: u32 = 2;
/// The ABI's minor version: bumped when functions are added or fields are
/// appended to a struct the library allocates.
pub const SANDGATE_ABI_MINOR: u32 = 4;
