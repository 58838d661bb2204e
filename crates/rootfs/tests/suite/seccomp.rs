//! A seccomp filter that takes `openat2` away, for the fallback run.
//!
//! `fallback` re-executes this test binary with `SANDGATE_TEST_SECCOMP` set
//! to `enosys` or `eperm`. In that child every test calls
//! [`install_from_env`] first (through `common::setup`), which installs, once
//! per process and for every thread (`SECCOMP_FILTER_FLAG_TSYNC`), a classic
//! BPF filter under which `openat2` fails with that errno and every other
//! system call is allowed. `Resolver::Auto` must then give the same answers
//! as it does with `openat2`.

use std::sync::Once;

/// The variable that asks for the filter, and the errno it makes `openat2`
/// return: `enosys` (an old kernel) or `eperm` (a container's filter).
pub const ENV: &str = "SANDGATE_TEST_SECCOMP";

/// `openat2`'s number: 437 on both x86_64 and aarch64 (asm-generic).
const NR_OPENAT2: u32 = 437;

/// The audit architecture of this build, checked by the filter so that a
/// system call number is only interpreted for the ABI it belongs to.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the seccomp fallback test knows x86_64 and aarch64 only");

/// Offsets in `struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;

/// The errno requested by the environment, or `None` when the variable is
/// unset or empty. Any other value is a mistake in the caller and panics,
/// so that a typo cannot silently run the suite without the filter.
fn requested_errno() -> Option<i32> {
    match std::env::var(ENV) {
        Err(std::env::VarError::NotPresent) => None,
        Ok(v) if v.is_empty() => None,
        Ok(v) if v == "enosys" => Some(libc::ENOSYS),
        Ok(v) if v == "eperm" => Some(libc::EPERM),
        other => panic!("{ENV} must be `enosys` or `eperm` (or unset), not {other:?}"),
    }
}

/// Whether the filter was requested (this process is the fallback child).
pub fn active() -> bool {
    requested_errno().is_some()
}

/// The errno `openat2` gives under the filter, when it is requested.
pub fn errno() -> Option<i32> {
    requested_errno()
}

/// Installs the filter once per process if [`ENV`] asks for it; does nothing
/// otherwise. Panics if the kernel refuses the filter: a fallback run that
/// silently kept `openat2` would prove nothing.
pub fn install_from_env() {
    static ONCE: Once = Once::new();
    if let Some(errno) = requested_errno() {
        ONCE.call_once(|| install(errno));
    }
}

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// The program. Jump offsets count instructions skipped after the jump.
fn program(errno: i32) -> [libc::sock_filter; 6] {
    use libc::{BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W};
    let errno = (errno as u32) & libc::SECCOMP_RET_DATA;
    [
        // 0: A = seccomp_data.arch
        stmt(BPF_LD | BPF_W | BPF_ABS, OFFSET_ARCH),
        // 1: native ABI? go on (to 2); a foreign ABI is not ours to
        //    interpret: skip 3 to 5 (allow).
        jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH, 0, 3),
        // 2: A = seccomp_data.nr
        stmt(BPF_LD | BPF_W | BPF_ABS, OFFSET_NR),
        // 3: openat2? go on (to 4); anything else: skip 1 to 5 (allow).
        jump(BPF_JMP | BPF_JEQ | BPF_K, NR_OPENAT2, 0, 1),
        // 4: openat2 fails with the requested errno, without running.
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ERRNO | errno),
        // 5: every other system call runs.
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW),
    ]
}

fn install(errno: i32) {
    let filter = program(errno);
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only and changes no
    // memory; it is required before an unprivileged process may install a
    // filter.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if r != 0 {
        panic!(
            "{ENV}: prctl(PR_SET_NO_NEW_PRIVS) failed: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: `prog` points at `filter`, a live array of `prog.len` valid
    // instructions that outlives the call; the kernel copies the program and
    // keeps no pointer to it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &prog as *const libc::sock_fprog,
        )
    };
    match r {
        0 => {}
        -1 => panic!(
            "{ENV}: installing the seccomp filter failed: {} (does this kernel have \
             CONFIG_SECCOMP_FILTER, or is the test already confined?)",
            std::io::Error::last_os_error()
        ),
        // With TSYNC, a positive answer is a thread that could not be
        // synchronised (it has a diverging filter of its own).
        tid => panic!("{ENV}: seccomp TSYNC failed on thread {tid}"),
    }
}
