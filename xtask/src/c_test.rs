//! `cargo xtask c-test`: compiles tests/c/test_sandgate.c against the
//! header with `-std=c11 -Wall -Wextra -Werror -pedantic`, links it to the
//! shared library in target/lib (see [`crate::bindings`]), and runs it under
//! valgrind (no error, no leak) when valgrind is installed, else plainly;
//! then once more as uid 65534 (see [`crate::unprivileged::c_test`]).

use std::fs;
use std::os::unix::fs::symlink;

use crate::{bindings, codegen, step, works, workspace_root};

pub fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask c-test".into());
    }
    bindings::run(&[])?;
    let root = workspace_root();
    let lib = bindings::lib_dir();
    // The library's SONAME is libsandgate.so.<ABI major>: the loader looks
    // for that name.
    let header = fs::read_to_string(root.join("include/sandgate.h"))
        .map_err(|e| format!("cannot read include/sandgate.h: {e}"))?;
    let major = codegen::define(&header, "SANDGATE_ABI_MAJOR")
        .ok_or("include/sandgate.h has no SANDGATE_ABI_MAJOR")?;
    let soname = lib.join(format!("libsandgate.so.{major}"));
    let _ = fs::remove_file(&soname);
    symlink("libsandgate.so", &soname)
        .map_err(|e| format!("cannot link {}: {e}", soname.display()))?;

    let out_dir = root.join("target/c");
    fs::create_dir_all(&out_dir).map_err(|e| format!("cannot create target/c: {e}"))?;
    let exe = out_dir.join("test_sandgate");
    let (exe_s, lib_s) = (
        exe.to_str().ok_or("non-UTF-8 path")?,
        lib.to_str().ok_or("non-UTF-8 path")?,
    );
    let include = root.join("include");
    step(
        "compile C test",
        "gcc",
        &[
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-g",
            "-I",
            include.to_str().ok_or("non-UTF-8 path")?,
            "tests/c/test_sandgate.c",
            "-L",
            lib_s,
            "-lsandgate",
            "-lpthread",
            "-o",
            exe_s,
        ],
    )?;
    // xtask is single-threaded here; the variable is for the test process.
    std::env::set_var("LD_LIBRARY_PATH", lib_s);
    let root_run = if works("valgrind", &["--version"]) {
        // Forked children (the executor's keeper) exit without freeing the
        // parent's heap; only the test process itself is checked.
        step(
            "C test under valgrind",
            "valgrind",
            &[
                "-q",
                "--child-silent-after-fork=yes",
                "--error-exitcode=99",
                "--leak-check=full",
                "--show-leak-kinds=definite,indirect,possible",
                "--errors-for-leak-kinds=definite,indirect,possible",
                exe_s,
            ],
        )
    } else {
        eprintln!("valgrind is not installed: running the C test without it");
        step("C test", exe_s, &[])
    };
    root_run?;
    crate::unprivileged::c_test(exe_s, lib_s)
}
