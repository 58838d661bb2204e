//! `clone` as a bare system call, for the keeper.
//!
//! glibc's `clone` wrapper switches the child to its new stack and calls a
//! function there, which is what the keeper needs to start the shell; but on
//! failure it writes `errno`, and the keeper has no `errno` of its own: it
//! runs with the executor thread's thread pointer, so that write lands in
//! the executor's thread-local storage. This is the same stack switch done
//! by hand, returning the error number instead: nothing here reads or
//! writes `errno`, allocates, or touches thread-local storage.
//!
//! The child starts on `stack_top` with every register it inherited, calls
//! `f(arg)` there, and ends with `exit(f(arg))`; it never returns into Rust
//! code of the caller's frame (whose stack it does not own).

use std::ffi::c_void;

/// The function a child runs on its new stack.
pub(crate) type ChildMain = extern "C" fn(*mut c_void) -> i32;

/// Starts a child with the raw `clone(flags, stack_top)` system call that
/// runs `f(arg)` on `stack_top` and exits with its result. Returns the
/// child's pid in the caller, or the error number.
///
/// # Safety
///
/// `stack_top` is the 16-byte-aligned top of a stack the child may use
/// alone until it exits or calls `execve`; `f` obeys every rule that holds
/// for code run after `clone` in shared memory (see [`crate::spawn`]):
/// with `CLONE_VM`, `f` runs in the caller's memory.
pub(crate) unsafe fn clone_on_stack(
    flags: u64,
    stack_top: *mut u8,
    f: ChildMain,
    arg: *mut c_void,
) -> Result<i32, i32> {
    debug_assert_eq!(stack_top as usize % 16, 0, "stack top not 16-byte aligned");
    let ret: isize;
    // SAFETY: the caller's contract; the child path never falls through
    // into the caller's code (it ends in `exit`), so the registers it
    // clobbers by calling `f` need not be declared.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        // x86_64: clone(flags, newsp, parent_tid, child_tid, tls).
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            // The child: `rsp` is `stack_top`; no frame above this one.
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone as isize => ret,
            in("rdi") flags,
            in("rsi") stack_top,
            in("rdx") 0usize,
            in("r10") 0usize,
            in("r8") 0usize,
            in("r12") f,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        // aarch64: clone(flags, newsp, parent_tid, tls, child_tid).
        core::arch::asm!(
            "svc 0",
            "cbnz x0, 2f",
            // The child: `sp` is `stack_top`.
            "mov x29, xzr",
            "mov x30, xzr",
            "mov x0, x22",
            "blr x21",
            "mov x8, {exit}",
            "svc 0",
            "brk #0",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("x0") flags as isize => ret,
            in("x1") stack_top,
            in("x2") 0usize,
            in("x3") 0usize,
            in("x4") 0usize,
            in("x8") libc::SYS_clone,
            in("x21") f,
            in("x22") arg,
            options(nostack),
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    compile_error!("the keeper's raw clone is written for x86_64 and aarch64 only");
    if ret < 0 {
        Err(-ret as i32)
    } else {
        Ok(ret as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering};

    extern "C" fn child(arg: *mut c_void) -> i32 {
        // SAFETY: the test passes a live `AtomicI32`.
        let cell = unsafe { &*(arg as *const AtomicI32) };
        cell.store(42, Ordering::SeqCst);
        7
    }

    fn stack() -> (Vec<u128>, *mut u8) {
        let mut stack = vec![0u128; 8 * 1024];
        // SAFETY: one past the end of the vector, 16-byte aligned (u128).
        let top = unsafe { stack.as_mut_ptr().add(stack.len()) } as *mut u8;
        (stack, top)
    }

    #[test]
    fn the_child_runs_on_its_stack_in_shared_memory_and_exits_with_its_code() {
        let (_stack, top) = stack();
        let cell = AtomicI32::new(0);
        // SAFETY: the child uses only its stack and the atomic; VFORK keeps
        // the caller suspended until it has exited.
        let pid = unsafe {
            clone_on_stack(
                (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64,
                top,
                child,
                &cell as *const AtomicI32 as *mut c_void,
            )
        }
        .expect("clone");
        assert_eq!(cell.load(Ordering::SeqCst), 42, "the child shares memory");
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), 7);
    }

    #[test]
    fn a_refused_clone_answers_its_error_number_and_leaves_errno_alone() {
        let (_stack, top) = stack();
        // SAFETY: writing our own thread's errno.
        unsafe { *libc::__errno_location() = 12345 };
        // CLONE_SIGHAND without CLONE_VM is invalid: EINVAL, no child.
        // SAFETY: the call fails before any child exists.
        let got = unsafe {
            clone_on_stack(
                (libc::CLONE_SIGHAND | libc::SIGCHLD) as u64,
                top,
                child,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(got, Err(libc::EINVAL));
        // SAFETY: reading our own thread's errno.
        assert_eq!(unsafe { *libc::__errno_location() }, 12345);
    }
}
