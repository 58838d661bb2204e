//! Gives the shared library its SONAME: `libsandgate.so.<ABI major>`, so a
//! program linked against one ABI major never loads another.

include!("src/abi.rs");

fn main() {
    println!("cargo:rerun-if-changed=src/abi.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os == "freebsd" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsandgate.so.{SANDGATE_ABI_MAJOR}");
    }
}
