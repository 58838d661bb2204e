//! What the seccomp tests of the unit tests (`src/seccomp.rs`) and of
//! `tests/seccomp.rs` share: a Python program that makes raw system calls
//! and the calls whose control needs root's capabilities.

/// Makes raw system calls given as `name=nr,arg,…` (an argument `s:text`
/// passes a pointer to that text, any other an integer) and prints
/// `name=` with the errno name (or `ok`) for each.
pub const NAMED_SYSCALL_PROBE: &str = r#"
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def arg(a):
    if a.startswith("s:"):
        return ctypes.c_char_p(a[2:].encode())
    return ctypes.c_long(int(a, 0))
for spec in sys.argv[1:]:
    name, _, rest = spec.partition("=")
    ctypes.set_errno(0)
    r = libc.syscall(*[arg(a) for a in rest.split(",")])
    e = ctypes.get_errno()
    print(name + "=" + ("ok" if r >= 0 else errno.errorcode.get(e, str(e))), flush=True)
"#;

/// Calls the filter refuses whatever their arguments, for which the
/// kernel checks a capability first (`CAP_SYS_ADMIN`, `CAP_SYS_BOOT`,
/// `CAP_SYS_PACCT`, `CAP_SYS_MODULE`; `CAP_DAC_READ_SEARCH` for
/// `open_by_handle_at` before Linux 6.12 or so), then arguments it
/// rejects: a NULL path, bad reboot magic, a path that does not exist,
/// unknown flags, too many kexec segments, an empty module image.
pub fn capability_checked_calls() -> Vec<String> {
    vec![
        format!("move_mount={},-1,0,-1,0,0xffffffff", libc::SYS_move_mount),
        format!("fsmount={},-1,0xff,0", libc::SYS_fsmount),
        format!("fspick={},-1,0,0xffffffff", libc::SYS_fspick),
        format!("pivot_root={},0,0", libc::SYS_pivot_root),
        format!("swapoff={},0", libc::SYS_swapoff),
        format!("reboot={},0,0,0,0", libc::SYS_reboot),
        format!("acct={},s:/nonexistent-sandgate/acct", libc::SYS_acct),
        format!("kexec_load={},0,1000,0,0x100", libc::SYS_kexec_load),
        format!(
            "kexec_file_load={},-1,-1,0,0,0x40000000",
            libc::SYS_kexec_file_load
        ),
        format!("init_module={},0,0,0", libc::SYS_init_module),
        format!("finit_module={},-1,0,0xffff", libc::SYS_finit_module),
        format!("delete_module={},0,0", libc::SYS_delete_module),
        format!("open_by_handle_at={},-1,0,0", libc::SYS_open_by_handle_at),
    ]
}
