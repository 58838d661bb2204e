//! The seccomp filters a confined child runs under: the kernel objects and
//! system calls Landlock cannot judge.
//!
//! Landlock restricts TCP by port, but a socket of another protocol
//! (MPTCP, SCTP, UDP) or family (packet, vsock) is outside its view, and
//! `listen(2)` on an unbound socket binds it implicitly without the bind
//! hook Landlock watches. These filters close those doors and a few more
//! that no agent's shell command needs:
//!
//! | what | answer |
//! |---|---|
//! | a system call of another architecture (32-bit x86) | the process is killed |
//! | an x32 system call number (`__X32_SYSCALL_BIT`) | `ENOSYS` |
//! | `socket` of a family other than `AF_UNIX`, `AF_INET`, `AF_INET6`, `AF_NETLINK` | `EAFNOSUPPORT` |
//! | `socket(AF_NETLINK)` other than `NETLINK_ROUTE` | `EAFNOSUPPORT` |
//! | `socket(AF_INET*)` other than `SOCK_STREAM` with protocol 0 or `IPPROTO_TCP` (UDP with protocol 0 or `IPPROTO_UDP` too when [`SeccompSpec::udp`]) | `EPROTONOSUPPORT` |
//! | `socketpair` of a family other than `AF_UNIX` | `EAFNOSUPPORT` |
//! | `listen` | judged by the executor (below) |
//! | `clone3` | `ENOSYS` (its flags are in memory a filter cannot read; libcs then use `clone`) |
//! | `file_setattr` (inode flags by path, without the open Landlock judges: `append-only` or `immutable` on a host file outside the roots) | `ENOSYS` (tools then use the `FS_IOC_FSSETXATTR` ioctl on a file they may open) |
//! | `clone` with a namespace flag | `EPERM` |
//! | `sendto`, `sendmsg`, `sendmmsg` with `MSG_FASTOPEN` (TCP Fast Open connects without the `connect` hook Landlock's port rules watch) | `EPERM` |
//! | `setpriority`, `ioprio_set`, `sched_setscheduler`, `sched_setparam`, `sched_setattr`, `sched_setaffinity` naming anything but the caller (pid 0): Landlock does not scope scheduling; `ioprio_set` of the real-time I/O class for anyone | `EPERM` |
//! | `fallocate` with `FALLOC_FL_KEEP_SIZE` (but for punching a hole), `FALLOC_FL_INSERT_RANGE` or a mode this list does not know: they allocate blocks past a file's end or grow it without the `RLIMIT_FSIZE` check (`fs.max_write_bytes`) the kernel makes where a call sets the size (seen on ext4), so one call took any amount of disk | `EOPNOTSUPP` (what a file system without them answers) |
//! | `prlimit64` naming a pid other than 0 (Landlock does not scope it: a command of the executor's user could set the executor's or keeper's limits, e.g. `RLIMIT_CPU` to have it killed) | `EPERM` |
//! | io_uring, `ptrace`, `process_vm_*`, `pidfd_getfd`, `bpf`, `userfaultfd`, `perf_event_open`, the keyring calls, the mount family, `unshare`, `setns`, module and kexec loading, `open_by_handle_at`, `iopl`/`ioperm`, swap, `reboot`, `acct`, the host's name, clock and kernel log (`sethostname`, `setdomainname`, `settimeofday`, `clock_settime`, `adjtimex`, `clock_adjtime`, `syslog`), `fanotify_init` (its marks and permission events reach files outside every Landlock rule) | `EPERM` |
//! | `fcntl(F_SETLEASE)`: a lease, which Landlock does not judge, on a file the command may only read (a read root's, which its user owns; as root any file it may read) held every host process's open of it until the command ended or the kernel's `lease-break-time` passed | `EPERM` |
//! | on the floor only: `open` and `openat` for neither reading nor writing (`O_ACCMODE` 3, which Landlock does not judge: the file gets neither mode) | `EACCES` |
//! | on the floor only: `openat2` (its flags are in memory a filter cannot read) | `ENOSYS` (callers fall back to `openat`) |
//! | on the floor before Landlock ABI 3 (no truncate right): `truncate`, and `open` and `openat` with `O_TRUNC` for reading only | `EACCES` |
//! | on the floor only: System V IPC (`shm*`, `msg*`, `sem*`) and POSIX message queues (`mq_*`), which live in the host's IPC namespace there (in namespaces the command has an IPC namespace of its own, which ends with it) | `EPERM` |
//! | on the floor where Landlock does not scope signals (before ABI 6): `kill`, `tkill`, `tgkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo`, and `fcntl(F_SETOWN)` (which has the kernel signal the owner) | judged by the executor (below) |
//! | the same: `pidfd_send_signal` | `ENOSYS` (tools fall back to `kill`) |
//! | the same: the signal owner set through a pointer the filter cannot read (`fcntl(F_SETOWN_EX)`, `ioctl(FIOSETOWN)`, `ioctl(SIOCSPGRP)`), and `O_ASYNC` (`fcntl(F_SETFL)` with it, `ioctl(FIOASYNC)`), which on a terminal makes its foreground process group (another process's) the owner | `EPERM` |
//! | on the floor where Landlock does not judge UNIX sockets by path (before ABI 9): `connect` | performed by the executor (below) |
//! | the same: `socket` and `socketpair` of `AF_UNIX` with `SOCK_DGRAM` or `SOCK_RAW` (which the kernel makes a datagram socket; a datagram can name any socket by path in `sendto`/`sendmsg`, whose address a filter cannot read) | `EPERM` |
//!
//! Without scoping, a command could signal every process of its user: the
//! executor's own process (by its pid or by any of its threads' ids, which
//! a filter comparing numbers cannot tell from others), its keepers, its
//! process group, the user's other programs, or all at once (`kill -9
//! -1`). The executor lets through, as scoping would, only what reaches
//! the command's own processes: a process whose chain of parents in
//! `/proc` leads to the command's keeper (which adopts the command's
//! orphans), or a process group with such a member; a pid no thread
//! holds is answered `ESRCH` (let through, it could name a thread the
//! kernel starts before the call runs); everything else is refused
//! (`EPERM`). What it lets through runs as the command made it
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`: the target is in the call's
//! registers, which no other thread can change).
//!
//! Before Landlock ABI 9 nothing in the kernel judges a connect to a UNIX
//! socket by path. Where the executor supervises, every `connect` is
//! handed to it, and it performs the call itself on a copy of the
//! command's socket, with the address copied once from the command's
//! memory: a UNIX socket by path only beneath a write root, no abstract
//! name, TCP ports as Landlock judges them (the executor's `connect`
//! module says how). A UNIX datagram socket names its receiver in
//! `sendto`'s or `sendmsg`'s address, which no filter can read, so there
//! the command cannot make one.
//!
//! `listen` goes to the executor through seccomp user notification: a
//! plain filter sees only the descriptor number, not the socket's family.
//! The executor takes a copy of the socket with `pidfd_getfd` (through a
//! pidfd of the calling thread, which need not be the process's first:
//! threaded runtimes listen from any thread), checks the notification is
//! still pending, reads the socket's family (`SO_DOMAIN`), performs the `listen` itself on that copy for a
//! UNIX socket and answers `EACCES` for anything else. It never lets the
//! call continue in the caller (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the
//! caller's other threads could swap the descriptor in between. A child
//! whose listener nobody holds (confined outside the executor, through
//! [`crate::confine::Prepared::apply_in_child`]) gets `ENOSYS` for every
//! `listen`: closed, never open.
//!
//! The filters are built once, in the parent, with the `seccompiler`
//! crate (one filter per answer, since a seccompiler filter has one match
//! action). Two checks it cannot express are a short program written here:
//! the x32 number range (seccompiler compares system call numbers for
//! equality only) and the user-notification answer for `listen` (it has no
//! such action). The compiled filters and that program are then joined
//! into one program, installed with one system call (see `merge`): the
//! kernel runs each new filter for every system call number when it
//! installs it, and six filters, the first comparing a number with 80
//! named calls one by one, cost about 0.25 ms of each command's start
//! where one program behind a search over the named numbers (which
//! answers at once the calls refused whatever their arguments) costs a
//! fraction of it. Arguments are compared as the kernel reads them:
//! `int` arguments on their low 32 bits, flags words whole.
//!
//! # References
//!  - [seccomp(2)](https://man7.org/linux/man-pages/man2/seccomp.2.html)
//!  - [seccomp_unotify(2)](https://man7.org/linux/man-pages/man2/seccomp_unotify.2.html)

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd, RawFd};

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};
use syscalls::{Errno, Sysno};

/// What the filter lets through that depends on the policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeccompSpec {
    /// Allow UDP sockets (name resolution needs them while the policy
    /// grants any network access and the child shares the host's network).
    pub udp: bool,
}

/// Filters ready to install in a child.
pub(crate) struct Filters {
    /// The program for [`Listen::Supervised`]; installed with a listener
    /// when `notify` is set (else `listen` answers `ENOSYS`).
    supervised: Vec<sock_filter>,
    /// The program when nobody supervises: `listen` answers `ENOSYS`.
    unsupervised: Vec<sock_filter>,
    /// The program for a command in a network namespace of its own: UDP
    /// sockets refused whatever the spec (only loopback is there; name
    /// resolution goes through the executor's proxy), System V IPC
    /// allowed (the namespace has its own), and `listen` allowed (only
    /// its own loopback can be listened on).
    own_network: Vec<sock_filter>,
    /// Whether `supervised` answers `listen` with a user notification.
    notify: bool,
    /// Whether `supervised` also hands signals to the executor
    /// ([`SIGNAL_CALLS`]): where Landlock does not scope them.
    signals: bool,
    /// Whether `supervised` also hands every `connect` to the executor
    /// and refuses UNIX datagram sockets: where Landlock does not judge
    /// UNIX sockets by path.
    sockets: bool,
    /// Whether the floor's programs refuse truncation ([`open_rules`]):
    /// where Landlock does not judge it.
    truncate: bool,
}

/// `struct sock_fprog`.
#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const sock_filter,
}

const SECCOMP_SET_MODE_FILTER: u32 = 1;
const SECCOMP_GET_ACTION_AVAIL: u32 = 2;
const SECCOMP_FILTER_FLAG_NEW_LISTENER: u32 = 1 << 3;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// `__X32_SYSCALL_BIT`.
const X32_BIT: u32 = 0x4000_0000;
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE` (Linux 5.5): the call runs as made.
const NOTIF_FLAG_CONTINUE: u32 = 1;

/// The calls that send a signal to a process or thread the caller names
/// by a number, handed to the executor where Landlock does not scope
/// signals (see [`judge_signal`]).
const SIGNAL_CALLS: [i64; 5] = [
    libc::SYS_kill,
    libc::SYS_tkill,
    libc::SYS_tgkill,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
];
/// `fcntl` commands: the owner that `SIGIO`/`SIGURG` (or the signal
/// `F_SETSIG` names) go to, as a number, and as a pointer to a
/// `struct f_owner_ex` the filter cannot read.
const F_SETOWN: u32 = libc::F_SETOWN as u32;
/// `F_SETOWN_EX`: 15 on every architecture this module builds for (the
/// generic `fcntl.h`); not in every libc release.
const F_SETOWN_EX: u32 = 15;
/// `fcntl` command that takes a lease on a file: the kernel holds every
/// other process's open of the file (for writing, or with a write lease
/// any open) until the holder gives the lease back or the kernel's
/// `lease-break-time` passes, and Landlock judges no lease.
const F_SETLEASE: u32 = libc::F_SETLEASE as u32;
/// `ioctl` requests that set the same owner through a pointer.
const FIOSETOWN: u32 = 0x8901;
const SIOCSPGRP: u32 = 0x8902;
/// `O_ASYNC`, set by `fcntl(F_SETFL)` or `ioctl(FIOASYNC)` (through a
/// pointer): on a terminal it makes the terminal's foreground process
/// group (any process's, for a terminal the command may open) the owner
/// its input signals (`SIGIO`, which ends a process by default).
const O_ASYNC: u32 = libc::O_ASYNC as u32;
const F_SETFL: u32 = libc::F_SETFL as u32;
const FIOASYNC: u32 = libc::FIOASYNC as u32;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xC000_00F3;

const CLONE_NS_FLAGS: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    // CLONE_NEWTIME (Linux 5.6), not in every libc release.
    0x80,
];

/// `open_tree_attr` (Linux 6.15): `open_tree` that also sets the clone's
/// mount attributes. One number on every architecture (those from 424
/// on are shared); not in every libc release.
const SYS_OPEN_TREE_ATTR: i64 = 467;

/// `file_setattr` (Linux 6.17): sets a file's inode flags by path, with no
/// open for Landlock to judge (the `FS_IOC_FSSETXATTR` ioctl `chattr`
/// uses needs one): answered `ENOSYS`, so that tools fall back to the
/// ioctl on a file they may open. Not in every libc release.
const SYS_FILE_SETATTR: i64 = 469;

/// System calls refused with `EPERM`.
const REFUSED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    // Another process's descriptors: Landlock's ptrace rule refuses it
    // outside the command's domain, but a kernel with seccomp and no
    // Landlock has nothing else to, and nothing a command runs needs it.
    libc::SYS_pidfd_getfd,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_open_tree,
    SYS_OPEN_TREE_ATTR,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_pivot_root,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    // What the whole host shares and a command run as root on the floor
    // (which keeps root's capabilities) could otherwise change: its name,
    // its clock (`adjtimex` and `clock_adjtime` set it too, so they are
    // refused even to read), and the kernel log (read, cleared, or its
    // console level set). In namespaces the kernel refuses them already.
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_adjtimex,
    libc::SYS_clock_adjtime,
    libc::SYS_syslog,
    // fanotify judges no Landlock rule: as root on the floor a command
    // marked any host file (or the whole file system) for permission
    // events and held the host's opens of it while it ran; unprivileged,
    // it watches files it may read outside its roots. File watchers use
    // inotify.
    libc::SYS_fanotify_init,
];

/// System V IPC and POSIX message queues, refused with `EPERM` on the
/// floor: there they live in the host's IPC namespace, and Landlock does
/// not judge them, so a command could attach the segments of the
/// executor's user (every one, as root) and leave memory behind that
/// outlives it and no limit counts. In namespaces the command has an IPC
/// namespace of its own, which ends with it, and they are allowed.
const HOST_IPC: &[i64] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
];

/// The classes the filters refuse, as the confinement report lists them;
/// `signals`: signals are judged by the executor ([`Filters::judges_signals`]);
/// `sockets`: so are connects ([`Filters::judges_sockets`]).
pub(crate) fn refused_names(
    spec: SeccompSpec,
    listen: Listen,
    signals: bool,
    sockets: bool,
    truncate: bool,
) -> Vec<String> {
    let mut out: Vec<String> = vec![
        "foreign-architecture and x32 system calls".into(),
        "sockets other than UNIX, netlink route and TCP (MPTCP, SCTP, raw, packet, vsock…)".into(),
    ];
    out.push(if spec.udp {
        "UDP is allowed (the policy grants network access)".into()
    } else {
        "UDP sockets".into()
    });
    out.push("socketpair other than UNIX".into());
    out.push(match listen {
        Listen::Supervised => "listen on a non-UNIX socket (judged by the executor)".into(),
        Listen::Refused => "listen on any socket (no supervisor)".into(),
        Listen::OwnNetwork => {
            "nothing on listen (the command's own network namespace has only its loopback)".into()
        }
    });
    if signals {
        out.push(
            "signals to anything but the command's own processes (the executor's process, its \
             children the keepers, its process group, other processes of the user, every \
             process at once with kill -1), judged by the executor where Landlock does not \
             scope signals; pidfd_send_signal (ENOSYS), a signal owner set through a \
             pointer (F_SETOWN_EX, FIOSETOWN, SIOCSPGRP), and O_ASYNC (F_SETFL, FIOASYNC), \
             which has a terminal signal its foreground group"
                .into(),
        );
    }
    if sockets {
        out.push(
            "connect to a UNIX socket by path outside the write roots or by an abstract name, \
             judged by the executor where Landlock does not judge UNIX sockets (TCP ports \
             judged as Landlock does); UNIX datagram sockets (socket and socketpair)"
                .into(),
        );
    }
    out.push("clone3 (ENOSYS) and clone with namespace flags".into());
    out.push("file_setattr (ENOSYS: inode flags by path, which Landlock does not judge)".into());
    out.push("TCP Fast Open (sends with MSG_FASTOPEN)".into());
    out.push(
        "fallocate past the file size limit (FALLOC_FL_KEEP_SIZE but to punch a hole, \
         FALLOC_FL_INSERT_RANGE)"
            .into(),
    );
    out.push("prlimit on another process (a pid other than 0)".into());
    out.push(
        "scheduling of another process, group or user (setpriority, ioprio_set, \
         sched_setscheduler/setparam/setattr/setaffinity with a pid other than 0), \
         and the real-time I/O class (ioprio_set)"
            .into(),
    );
    out.push(
        "io_uring, ptrace, process_vm_readv/writev, pidfd_getfd, bpf, userfaultfd, perf_event_open, \
         keyctl/add_key/request_key, mount/umount2/open_tree/open_tree_attr/move_mount/\
         fsopen/fsconfig/fsmount/fspick/mount_setattr/pivot_root, unshare, setns, module and kexec loading, \
         open_by_handle_at, iopl/ioperm, swapon/swapoff, reboot, acct, the host's name, \
         clock and kernel log (sethostname/setdomainname, settimeofday/clock_settime/\
         adjtimex/clock_adjtime, syslog), fanotify_init"
            .into(),
    );
    out.push(
        "file leases (fcntl F_SETLEASE), which hold other processes' opens of a file the \
         command may read"
            .into(),
    );
    if listen != Listen::OwnNetwork {
        out.push(
            "opens for neither reading nor writing (O_ACCMODE 3), which Landlock does not \
             judge, and openat2 (ENOSYS: its flags are in memory the filter cannot read)"
                .into(),
        );
        if truncate {
            out.push(
                "truncate(2) and opens that truncate a file opened for reading only \
                 (O_RDONLY|O_TRUNC): Landlock judges truncation from ABI 3"
                    .into(),
            );
        }
        out.push(
            "System V IPC (shm/msg/sem) and POSIX message queues, which live in the host's IPC \
             namespace"
                .into(),
        );
    }
    out
}

fn cond(arg: u8, len: Len, op: Op, value: u64) -> Cond {
    Cond::new(arg, len, op, value).expect("argument index below 6")
}

fn rule(conds: Vec<Cond>) -> SeccompRule {
    SeccompRule::new(conds).expect("a rule with conditions")
}

/// What seccompiler makes of `rules`: `errno` for a call they name whose
/// conditions hold, `allow` for the rest, and the process killed for
/// another architecture.
fn compile_linear(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> io::Result<BpfProgram> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.to_string()))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| io::Error::other(e.to_string()))?;
    BpfProgram::try_from(filter).map_err(|e| io::Error::other(e.to_string()))
}

/// Keys a leaf of the dispatch tree compares one by one.
const LEAF: usize = 4;

/// Instructions of the dispatch tree over `n` numbers (see [`dispatch`]).
fn dispatch_len(n: usize) -> usize {
    if n <= LEAF {
        2 * n + 1
    } else {
        let left = n / 2;
        2 + dispatch_len(left) + dispatch_len(n - left)
    }
}

/// Appends a search over `entries` (number, target), sorted by number:
/// the loaded system call number jumps to its entry's target (an index in
/// the finished program), or to `outside` when no entry has it. Long jumps
/// are `JA`, whose offset is 32 bits wide; the conditional jumps skip one
/// instruction at most.
fn dispatch(entries: &[(u32, usize)], out: &mut Vec<sock_filter>, outside: usize) {
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const JA: u16 = 0x05;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    // A jump from the instruction about to be pushed to `to`.
    let ja = |out: &mut Vec<sock_filter>, to: usize| {
        let offset = to - out.len() - 1;
        out.push(ins(JA, 0, 0, offset as u32));
    };
    if entries.len() <= LEAF {
        for &(nr, target) in entries {
            out.push(ins(JEQ_K, 0, 1, nr));
            ja(out, target);
        }
        ja(out, outside);
        return;
    }
    let (low, high) = entries.split_at(entries.len() / 2);
    // At or above the high half's first number: over the low half's code.
    out.push(ins(JGE_K, 0, 1, high[0].0));
    out.push(ins(JA, 0, 0, dispatch_len(low.len()) as u32));
    dispatch(low, out, outside);
    dispatch(high, out, outside);
}

/// The stacked filters as one program: the filters compiled from
/// `rules` (each map with the errno it answers), in the order they would
/// be installed, then `last`.
///
/// The kernel, when it installs a filter, runs it for every system call
/// number (about 460 on x86_64) to learn which are allowed whatever their
/// arguments, so that those calls skip the filters later. Six filters,
/// the first comparing a number with 80 named calls in turn (as
/// seccompiler compiles them), took about 0.25 ms of every confined
/// command's start that way, with each filter's own setup. One program
/// is set up once, and a search over every number any map names answers
/// most calls in about 25 steps.
///
/// What the program answers is what the stack answers:
///
/// - another architecture, or a number in the x32 range: the filters in
///   order (they kill the former; `last` refuses the latter);
/// - a number no map names, nor `last_names` (which `last` judges):
///   allowed by every filter, so allowed at once;
/// - a number one map alone names with no condition: that map's errno at
///   once (every other filter allows it);
/// - a number of `last_names` no map names (`listen`, the signal calls):
///   `last` at once (every compiled filter allows it);
/// - the rest (calls refused for some arguments only): the filters
///   compiled from those calls' rules, in order, each unchanged except
///   that its `allow` continues with the next, then `last`, so the first
///   refusal is the answer.
///
/// The kernel would instead take the most severe of all the stack's
/// answers. The two agree while no call is refused by two filters for the
/// same arguments (the maps name different calls, but for `socket`, which
/// two refuse for disjoint families); the unit tests check the agreement
/// for every number and a sweep of arguments.
fn merge(
    rules: Vec<(BTreeMap<i64, Vec<SeccompRule>>, i32)>,
    last: &[sock_filter],
    last_names: &[u32],
) -> io::Result<Vec<sock_filter>> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const JA: u16 = 0x05;
    const RET_K: u16 = 0x06;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let mut named: BTreeMap<u32, usize> = BTreeMap::new();
    for (map, _) in &rules {
        for &nr in map.keys() {
            *named.entry(nr as u32).or_default() += 1;
        }
    }
    // Refused whatever the arguments, by one map alone: answered by the
    // search. The rest of each map is compiled, in order.
    let mut direct: BTreeMap<u32, i32> = BTreeMap::new();
    let mut programs: Vec<BpfProgram> = Vec::new();
    for (mut map, errno) in rules {
        map.retain(|&nr, conditions| {
            let alone = named[&(nr as u32)] == 1 && !last_names.contains(&(nr as u32));
            if conditions.is_empty() && alone {
                direct.insert(nr as u32, errno);
                false
            } else {
                true
            }
        });
        if !map.is_empty() {
            programs.push(compile_linear(map, errno)?);
        }
    }
    let mut numbers: Vec<u32> = named.keys().chain(last_names).copied().collect();
    numbers.sort_unstable();
    numbers.dedup();
    let mut errnos: Vec<i32> = direct.values().copied().collect();
    errnos.sort_unstable();
    errnos.dedup();
    // The architecture (3), the x32 range (3), the search, `allow`, one
    // `ret` per errno answered at once, the chain, then `last`.
    let allow = 6 + dispatch_len(numbers.len());
    let chain = allow + 1 + errnos.len();
    let last_at = chain + programs.iter().map(Vec::len).sum::<usize>();
    let refuse = |errno: i32| allow + 1 + errnos.binary_search(&errno).unwrap_or(0);
    let entries: Vec<(u32, usize)> = numbers
        .iter()
        .map(|nr| {
            let target = match direct.get(nr) {
                Some(&errno) => refuse(errno),
                None if !named.contains_key(nr) => last_at,
                None => chain,
            };
            (*nr, target)
        })
        .collect();
    let mut out = Vec::with_capacity(last_at + last.len());
    out.push(ins(LD_W_ABS, 0, 0, 4));
    out.push(ins(JEQ_K, 1, 0, AUDIT_ARCH));
    out.push(ins(JA, 0, 0, (chain - 3) as u32));
    out.push(ins(LD_W_ABS, 0, 0, 0));
    out.push(ins(JGE_K, 0, 1, X32_BIT));
    out.push(ins(JA, 0, 0, (chain - 6) as u32));
    dispatch(&entries, &mut out, allow);
    debug_assert_eq!(out.len(), allow);
    out.push(ins(RET_K, 0, 0, SECCOMP_RET_ALLOW));
    for &errno in &errnos {
        out.push(ins(RET_K, 0, 0, SECCOMP_RET_ERRNO | errno as u32));
    }
    for program in programs {
        let next = out.len() + program.len();
        for i in program {
            if i.code == RET_K && i.k == SECCOMP_RET_ALLOW {
                let at = out.len();
                out.push(ins(JA, 0, 0, (next - at - 1) as u32));
            } else {
                out.push(i);
            }
        }
    }
    debug_assert_eq!(out.len(), last_at);
    out.extend_from_slice(last);
    // BPF_MAXINSNS.
    if out.len() > 4096 {
        return Err(io::Error::other(format!(
            "the seccomp program has {} instructions, more than the kernel takes",
            out.len()
        )));
    }
    Ok(out)
}

/// Allowed `type` words of a TCP socket: `SOCK_STREAM` with or without
/// `SOCK_NONBLOCK` and `SOCK_CLOEXEC` (the kernel refuses other flags).
fn type_variants(base: u64) -> [u64; 4] {
    let nb = libc::SOCK_NONBLOCK as u64;
    let ce = libc::SOCK_CLOEXEC as u64;
    [base, base | nb, base | ce, base | nb | ce]
}

fn socket_family_rules() -> BTreeMap<i64, Vec<SeccompRule>> {
    let d = |op, v: i32| cond(0, Len::Dword, op, v as u64);
    let socket = vec![
        rule(vec![
            d(Op::Ne, libc::AF_UNIX),
            d(Op::Ne, libc::AF_INET),
            d(Op::Ne, libc::AF_INET6),
            d(Op::Ne, libc::AF_NETLINK),
        ]),
        rule(vec![
            d(Op::Eq, libc::AF_NETLINK),
            cond(2, Len::Dword, Op::Ne, libc::NETLINK_ROUTE as u64),
        ]),
    ];
    let socketpair = vec![rule(vec![d(Op::Ne, libc::AF_UNIX)])];
    BTreeMap::from([
        (libc::SYS_socket, socket),
        (libc::SYS_socketpair, socketpair),
    ])
}

fn socket_protocol_rules(spec: SeccompSpec) -> BTreeMap<i64, Vec<SeccompRule>> {
    let stream = type_variants(libc::SOCK_STREAM as u64);
    let dgram = type_variants(libc::SOCK_DGRAM as u64);
    let mut rules = Vec::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        let fam = || cond(0, Len::Dword, Op::Eq, family as u64);
        // A type that is neither TCP's nor (when allowed) UDP's.
        let mut other_type = vec![fam()];
        let allowed_types: Vec<u64> = if spec.udp {
            stream.iter().chain(&dgram).copied().collect()
        } else {
            stream.to_vec()
        };
        other_type.extend(
            allowed_types
                .iter()
                .map(|&t| cond(1, Len::Dword, Op::Ne, t)),
        );
        rules.push(rule(other_type));
        // The right type with another protocol (MPTCP is SOCK_STREAM with
        // IPPROTO_MPTCP; ICMP "ping" sockets are SOCK_DGRAM).
        let mut typed: Vec<(u64, i32)> = stream.iter().map(|&t| (t, libc::IPPROTO_TCP)).collect();
        if spec.udp {
            typed.extend(dgram.iter().map(|&t| (t, libc::IPPROTO_UDP)));
        }
        for (t, proto) in typed {
            rules.push(rule(vec![
                fam(),
                cond(1, Len::Dword, Op::Eq, t),
                cond(2, Len::Dword, Op::Ne, 0),
                cond(2, Len::Dword, Op::Ne, proto as u64),
            ]));
        }
    }
    BTreeMap::from([(libc::SYS_socket, rules)])
}

/// `fallocate` modes that keep to `RLIMIT_FSIZE`: allocating (and
/// zeroing) with the size changed, which the kernel checks against the
/// limit; punching a hole and collapsing a range, which free. Any other
/// mode (`FALLOC_FL_KEEP_SIZE` alone or with `FALLOC_FL_ZERO_RANGE` or
/// `FALLOC_FL_UNSHARE_RANGE`, `FALLOC_FL_INSERT_RANGE`, modes newer than
/// this list) is refused.
fn fallocate_rules() -> BTreeMap<i64, Vec<SeccompRule>> {
    const KEEP_SIZE: u64 = 0x01;
    const PUNCH_HOLE: u64 = 0x02;
    const COLLAPSE_RANGE: u64 = 0x08;
    const ZERO_RANGE: u64 = 0x10;
    let allowed = [0, PUNCH_HOLE | KEEP_SIZE, COLLAPSE_RANGE, ZERO_RANGE];
    let other = allowed
        .iter()
        .map(|&mode| cond(1, Len::Dword, Op::Ne, mode))
        .collect();
    BTreeMap::from([(libc::SYS_fallocate, vec![rule(other)])])
}

/// `own_ipc`: the command has an IPC namespace of its own ([`HOST_IPC`]).
fn refused_rules(own_ipc: bool) -> BTreeMap<i64, Vec<SeccompRule>> {
    let host_ipc: &[i64] = if own_ipc { &[] } else { HOST_IPC };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = REFUSED
        .iter()
        .chain(host_ipc)
        .map(|&nr| (nr, Vec::new()))
        .collect();
    let clone = CLONE_NS_FLAGS
        .iter()
        .map(|&flag| rule(vec![cond(0, Len::Qword, Op::MaskedEq(flag), flag)]))
        .collect();
    rules.insert(libc::SYS_clone, clone);
    // TCP Fast Open connects inside sendto/sendmsg, past the connect hook
    // Landlock's port rules use: a send that asks for it is refused.
    let fastopen = libc::MSG_FASTOPEN as u64;
    let flag = |arg| {
        vec![rule(vec![cond(
            arg,
            Len::Dword,
            Op::MaskedEq(fastopen),
            fastopen,
        )])]
    };
    rules.insert(libc::SYS_sendto, flag(3));
    rules.insert(libc::SYS_sendmsg, flag(2));
    rules.insert(libc::SYS_sendmmsg, flag(3));
    // A lease judges no Landlock rule: on a file a command may only read
    // (a read root's, which its user owns; as root any file it may read,
    // `/etc/passwd` too) a write lease held every host process's open of
    // it, reading or writing, until the command ended or the kernel's
    // `lease-break-time` (45 s by default) passed, and failed the file
    // tools' opens, which do not block, with `EWOULDBLOCK`. No command
    // needs one (file servers do).
    rules.insert(
        libc::SYS_fcntl,
        vec![rule(vec![cond(
            1,
            Len::Dword,
            Op::Eq,
            u64::from(F_SETLEASE),
        )])],
    );
    // Landlock scopes signals, not resource limits: `prlimit64` on another
    // process of the same user (any process, as root) could lower the
    // executor's or the keeper's limits, and `RLIMIT_CPU` or
    // `RLIMIT_FSIZE` then kill it with a signal scoping never sees. A
    // command sets its own limits with pid 0 (`setrlimit`, `ulimit`).
    rules.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![cond(0, Len::Dword, Op::Ne, 0)])],
    );
    // Nor does it scope scheduling: a command could put the executor (its
    // limits monitor, its timeout) at SCHED_IDLE on one CPU, or renice
    // every process of its user at once. Only the caller itself (pid 0)
    // may be named; `which` must be the process kind for the two calls
    // that also take a process group or a user.
    let only_self = |arg| vec![rule(vec![cond(arg, Len::Dword, Op::Ne, 0)])];
    for nr in [
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
        libc::SYS_sched_setaffinity,
    ] {
        rules.insert(nr, only_self(0));
    }
    let kind_and_self = |process: u32| {
        vec![
            rule(vec![cond(0, Len::Dword, Op::Ne, u64::from(process))]),
            rule(vec![cond(1, Len::Dword, Op::Ne, 0)]),
        ]
    };
    rules.insert(libc::SYS_setpriority, kind_and_self(libc::PRIO_PROCESS));
    // IOPRIO_WHO_PROCESS. And never the real-time I/O class (1 in the
    // class bits, 13 to 15), which a command run as root on the floor
    // (CAP_SYS_ADMIN) could take for itself, ahead of every other
    // process's I/O.
    let mut ioprio = kind_and_self(1);
    ioprio.push(rule(vec![cond(
        2,
        Len::Dword,
        Op::MaskedEq(0xe000),
        1 << 13,
    )]));
    rules.insert(libc::SYS_ioprio_set, ioprio);
    rules
}

/// Who answers `listen` in the child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listen {
    /// The executor, through the returned listener.
    Supervised,
    /// Nobody: every `listen` answers `ENOSYS`.
    Refused,
    /// The kernel: the child has a network namespace of its own, whose
    /// only interface is its own loopback.
    OwnNetwork,
}

/// The hand-written filter: the architecture, the x32 range, `listen` as
/// `listen` says, and with `signals` (a supervised filter where Landlock
/// does not scope signals) the calls that signal a process named by a
/// number handed to the executor too ([`SIGNAL_CALLS`], and `fcntl`'s
/// `F_SETOWN`), `pidfd_send_signal` answered `ENOSYS` (its descriptor
/// could be swapped between a judgement and the call; tools fall back to
/// `kill`), and the owner set through a pointer (`F_SETOWN_EX`,
/// `FIOSETOWN`, `SIOCSPGRP`) and `O_ASYNC` (`F_SETFL`, `FIOASYNC`)
/// refused with `EPERM`.
///
/// With `sockets` (a supervised filter where Landlock does not judge UNIX
/// sockets by path) every `connect` is handed to the executor.
fn last_filter(listen: Listen, signals: bool, sockets: bool) -> Vec<sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const JSET_K: u16 = 0x45;
    const RET_K: u16 = 0x06;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let listen = match listen {
        Listen::Supervised => SECCOMP_RET_USER_NOTIF,
        Listen::Refused => SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        Listen::OwnNetwork => SECCOMP_RET_ALLOW,
    };
    let mut out = vec![
        // seccomp_data.arch
        ins(LD_W_ABS, 0, 0, 4),
        ins(JEQ_K, 1, 0, AUDIT_ARCH),
        ins(RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        // seccomp_data.nr
        ins(LD_W_ABS, 0, 0, 0),
        ins(JGE_K, 0, 1, X32_BIT),
        ins(RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        ins(JEQ_K, 0, 1, libc::SYS_listen as u32),
        ins(RET_K, 0, 0, listen),
    ];
    if sockets {
        out.push(ins(JEQ_K, 0, 1, libc::SYS_connect as u32));
        out.push(ins(RET_K, 0, 0, SECCOMP_RET_USER_NOTIF));
    }
    if signals {
        let notify = SECCOMP_RET_USER_NOTIF;
        let eperm = SECCOMP_RET_ERRNO | libc::EPERM as u32;
        for nr in SIGNAL_CALLS {
            out.push(ins(JEQ_K, 0, 1, nr as u32));
            out.push(ins(RET_K, 0, 0, notify));
        }
        out.push(ins(JEQ_K, 0, 1, libc::SYS_pidfd_send_signal as u32));
        out.push(ins(RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
        // The command word, `args[1]`'s low half.
        let cmd = 16 + 8 + if cfg!(target_endian = "big") { 4 } else { 0 };
        // `args[2]`'s low half: `fcntl`'s `int` argument.
        let arg2 = 32 + if cfg!(target_endian = "big") { 4 } else { 0 };
        // A call judged by its command word: the number is in A; past its
        // block when it is another call. With `setfl`, last, `F_SETFL`
        // asking for `O_ASYNC` is refused too.
        let by_command =
            |out: &mut Vec<sock_filter>, nr: i64, answers: &[(u32, u32)], setfl: bool| {
                let block = 2 + 2 * answers.len() + if setfl { 4 } else { 0 };
                out.push(ins(JEQ_K, 0, block as u8, nr as u32));
                out.push(ins(LD_W_ABS, 0, 0, cmd));
                for &(command, answer) in answers {
                    out.push(ins(JEQ_K, 0, 1, command));
                    out.push(ins(RET_K, 0, 0, answer));
                }
                if setfl {
                    out.push(ins(JEQ_K, 0, 3, F_SETFL));
                    out.push(ins(LD_W_ABS, 0, 0, arg2));
                    out.push(ins(JSET_K, 0, 1, O_ASYNC));
                    out.push(ins(RET_K, 0, 0, eperm));
                }
                out.push(ins(RET_K, 0, 0, SECCOMP_RET_ALLOW));
            };
        by_command(
            &mut out,
            libc::SYS_fcntl,
            &[(F_SETOWN, notify), (F_SETOWN_EX, eperm)],
            true,
        );
        by_command(
            &mut out,
            libc::SYS_ioctl,
            &[(FIOSETOWN, eperm), (SIOCSPGRP, eperm), (FIOASYNC, eperm)],
            false,
        );
    }
    out.push(ins(RET_K, 0, 0, SECCOMP_RET_ALLOW));
    out
}

/// The system call numbers [`last_filter`] judges beyond the
/// architecture: the merged program hands them to it.
fn last_names(signals: bool, sockets: bool) -> Vec<u32> {
    let mut out = vec![libc::SYS_listen as u32];
    if sockets {
        out.push(libc::SYS_connect as u32);
    }
    if signals {
        out.extend(SIGNAL_CALLS.iter().map(|&nr| nr as u32));
        out.extend(
            [
                libc::SYS_pidfd_send_signal,
                libc::SYS_fcntl,
                libc::SYS_ioctl,
            ]
            .map(|nr| nr as u32),
        );
    }
    out
}

/// The rules of the filters, in the order they are stacked (before the
/// hand-written one), each with the errno it answers. `own_ipc`: the
/// command has an IPC namespace of its own; `unix_dgram`: UNIX datagram
/// sockets are refused ([`unix_dgram_rules`]).
///
/// On the floor (`!own_ipc`) opens Landlock cannot judge are refused
/// ([`open_rules`]; `truncate`: Landlock does not judge truncation here)
/// and `openat2`, whose flags are in memory a filter cannot read, answers
/// `ENOSYS`.
fn rule_maps(
    spec: SeccompSpec,
    own_ipc: bool,
    unix_dgram: bool,
    truncate: bool,
) -> Vec<(BTreeMap<i64, Vec<SeccompRule>>, i32)> {
    let mut enosys = BTreeMap::from([
        (libc::SYS_clone3, Vec::new()),
        (SYS_FILE_SETATTR, Vec::new()),
    ]);
    if !own_ipc {
        enosys.insert(libc::SYS_openat2, Vec::new());
    }
    let mut out = vec![
        (refused_rules(own_ipc), libc::EPERM),
        (enosys, libc::ENOSYS),
        (socket_family_rules(), libc::EAFNOSUPPORT),
        (socket_protocol_rules(spec), libc::EPROTONOSUPPORT),
        (fallocate_rules(), libc::EOPNOTSUPP),
    ];
    if unix_dgram {
        out.push((unix_dgram_rules(), libc::EPERM));
    }
    if !own_ipc {
        out.push((open_rules(truncate), libc::EACCES));
    }
    out
}

/// Opens that Landlock lets past its file rules on the floor, where the
/// command sees the host's tree:
///
/// - an open for neither reading nor writing (`O_ACCMODE` 3, which Linux
///   takes as "ioctl only"): the file gets neither mode, and Landlock
///   judges an open by those modes, so it passed whatever the path: a
///   command opened a host file outside every rule and, run as root, made
///   it append-only (`FS_IOC_SETFLAGS`), or, before ABI 5 (device ioctls),
///   opened its user's terminal and changed its settings and size;
/// - with `truncate` (Landlock before ABI 3, which has no truncate right):
///   an open that truncates a file opened for reading only
///   (`O_RDONLY | O_TRUNC`; Landlock grants it wherever it grants reads,
///   in a read root or a system directory), or for neither (above), and
///   `truncate(2)` by path, which Landlock does not see at all: a command
///   emptied files outside its write root. `ftruncate` needs a descriptor
///   opened for writing, which Landlock judges.
fn open_rules(truncate: bool) -> BTreeMap<i64, Vec<SeccompRule>> {
    const ACCMODE: u64 = libc::O_ACCMODE as u64;
    let trunc = libc::O_TRUNC as u64;
    let flags_rules = |arg: u8| {
        let mut rules = vec![rule(vec![cond(
            arg,
            Len::Dword,
            Op::MaskedEq(ACCMODE),
            ACCMODE,
        )])];
        if truncate {
            rules.push(rule(vec![cond(
                arg,
                Len::Dword,
                Op::MaskedEq(ACCMODE | trunc),
                trunc,
            )]));
        }
        rules
    };
    let mut out = BTreeMap::from([(libc::SYS_openat, flags_rules(2))]);
    #[cfg(target_arch = "x86_64")]
    out.insert(libc::SYS_open, flags_rules(1));
    if truncate {
        out.insert(libc::SYS_truncate, Vec::new());
    }
    out
}

/// `socket` and `socketpair` of `AF_UNIX` with `SOCK_DGRAM` or `SOCK_RAW`
/// (whatever its flags; the kernel makes a UNIX `SOCK_RAW` socket a
/// datagram socket): a datagram names its receiver in `sendto`'s or
/// `sendmsg`'s address, which a filter cannot read, so where the executor
/// judges UNIX sockets by path ([`crate::connect`]) the command has none.
fn unix_dgram_rules() -> BTreeMap<i64, Vec<SeccompRule>> {
    let dgram = || {
        [libc::SOCK_DGRAM, libc::SOCK_RAW]
            .map(|kind| {
                rule(vec![
                    cond(0, Len::Dword, Op::Eq, libc::AF_UNIX as u64),
                    cond(1, Len::Dword, Op::MaskedEq(0xf), kind as u64),
                ])
            })
            .into()
    };
    BTreeMap::from([(libc::SYS_socket, dgram()), (libc::SYS_socketpair, dgram())])
}

impl Filters {
    /// Builds every filter for `spec`; `notify` when the kernel can hand
    /// `listen` to a supervisor ([`notify_available`]).
    /// With `signals` (Landlock does not scope signals here) the
    /// supervised program hands signals to the executor as well.
    /// With `sockets` (Landlock does not judge UNIX sockets by path here)
    /// it hands every `connect` to the executor and refuses UNIX datagram
    /// sockets.
    ///
    /// With `truncate` (Landlock does not judge truncation here: before
    /// ABI 3) the floor's programs also refuse the truncations
    /// [`open_rules`] names.
    pub(crate) fn build(
        spec: SeccompSpec,
        notify: bool,
        signals: bool,
        sockets: bool,
        truncate: bool,
    ) -> io::Result<Filters> {
        let merged =
            |spec: SeccompSpec, own_ipc: bool, listen: Listen, signals: bool, sockets: bool| {
                merge(
                    rule_maps(spec, own_ipc, sockets, truncate),
                    &last_filter(listen, signals, sockets),
                    &last_names(signals, sockets),
                )
            };
        let unsupervised = merged(spec, false, Listen::Refused, false, false)?;
        let signals = signals && notify;
        let sockets = sockets && notify;
        Ok(Filters {
            supervised: if notify {
                merged(spec, false, Listen::Supervised, signals, sockets)?
            } else {
                unsupervised.clone()
            },
            unsupervised,
            // In namespaces: no UDP, and an IPC namespace of the command's
            // own; its PID namespace keeps signals to its own processes,
            // and the host's UNIX sockets are not in its view.
            own_network: merged(
                SeccompSpec { udp: false },
                true,
                Listen::OwnNetwork,
                false,
                false,
            )?,
            notify,
            signals,
            sockets,
            truncate,
        })
    }

    /// Whether the supervised program hands signals to the executor.
    pub(crate) fn judges_signals(&self) -> bool {
        self.signals
    }

    /// Whether the supervised program hands `connect` to the executor.
    pub(crate) fn judges_sockets(&self) -> bool {
        self.sockets
    }

    /// Whether the floor's programs refuse truncation.
    pub(crate) fn refuses_truncation(&self) -> bool {
        self.truncate
    }

    /// Whether `listen` goes to a supervisor.
    pub(crate) fn notifies(&self) -> bool {
        self.notify
    }

    /// Installs the program for `listen` in the calling process; returns
    /// its listener (when `listen` is supervised and the kernel can
    /// notify), close-on-exec.
    ///
    /// Raw system calls only: no allocation and no `errno`, so a child
    /// sharing the executor's memory may call it. No_new_privs must be set.
    pub(crate) fn install_raw(&self, listen: Listen) -> Result<Option<RawFd>, Errno> {
        match listen {
            Listen::Supervised if self.notify => {
                let fd = install(&self.supervised, SECCOMP_FILTER_FLAG_NEW_LISTENER)?;
                Ok(Some(fd as RawFd))
            }
            Listen::OwnNetwork => {
                install(&self.own_network, 0)?;
                Ok(None)
            }
            _ => {
                install(&self.unsupervised, 0)?;
                Ok(None)
            }
        }
    }
}

fn install(prog: &[sock_filter], flags: u32) -> Result<usize, Errno> {
    let fprog = SockFprog {
        len: prog.len() as u16,
        filter: prog.as_ptr(),
    };
    // SAFETY: `fprog` points at a live program of `len` instructions; the
    // kernel copies it.
    unsafe {
        syscalls::syscall!(
            Sysno::seccomp,
            SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const SockFprog
        )
    }
}

/// Whether this kernel has seccomp filters at all.
pub(crate) fn available() -> bool {
    // PR_GET_SECCOMP answers EINVAL without CONFIG_SECCOMP; a filter action
    // query answers EINVAL or ENOSYS without CONFIG_SECCOMP_FILTER.
    action_available(SECCOMP_RET_ERRNO)
}

fn action_available(action: u32) -> bool {
    // SAFETY: the kernel reads one u32 from the pointer.
    let r = unsafe {
        syscalls::syscall!(
            Sysno::seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32
        )
    };
    r.is_ok()
}

/// Whether `listen` can be handed to the executor: user notification
/// (Linux 5.0) and `pidfd_getfd` (Linux 5.6), tried on this process, and a
/// filter with a listener installable here ([`listener_installable`]).
pub(crate) fn notify_available() -> bool {
    if !action_available(SECCOMP_RET_USER_NOTIF) || !listener_installable() {
        return false;
    }
    let Ok(me) = rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    ) else {
        return false;
    };
    let probe = rustix::io::dup(io::stderr().as_fd());
    let Ok(probe) = probe else { return false };
    rustix::process::pidfd_getfd(
        &me,
        std::os::fd::AsRawFd::as_raw_fd(&probe),
        rustix::process::PidfdGetfdFlags::empty(),
    )
    .is_ok()
}

/// Whether a child of this process may install a filter with a listener.
///
/// The kernel allows one listener in a process's chain of filters and
/// answers `EBUSY` for a second: beneath a supervisor the host already
/// has (a container runtime that intercepts system calls, or a sandgate
/// command that runs sandgate) every confined command would fail to
/// start. Tried in a throwaway child, since the filter stays for good:
/// it sets no_new_privs, installs a filter that allows everything with
/// a listener, and exits 0 if the kernel took it.
fn listener_installable() -> bool {
    const ALLOW: [sock_filter; 1] = [sock_filter {
        code: 0x06, // BPF_RET | BPF_K
        jt: 0,
        jf: 0,
        k: SECCOMP_RET_ALLOW,
    }];
    let old = crate::spawn::block_all_signals();
    // SAFETY: a fork-like clone (a copy of memory, no new stack); the
    // child makes raw system calls only and exits, with every signal
    // blocked.
    let pid = unsafe { syscalls::syscall!(Sysno::clone, libc::SIGCHLD, 0, 0, 0, 0) };
    if let Ok(0) = pid {
        // SAFETY: integers only.
        let nnp =
            unsafe { syscalls::syscall!(Sysno::prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
        let ok = nnp.is_ok() && install(&ALLOW, SECCOMP_FILTER_FLAG_NEW_LISTENER).is_ok();
        crate::spawn::exit(if ok { 0 } else { 1 })
    }
    crate::spawn::restore_signals(old);
    let Some(pid) = pid
        .ok()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32))
    else {
        return false;
    };
    loop {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
            Err(rustix::io::Errno::INTR) => {}
            Ok(Some((_, status))) => return status.exit_status() == Some(0),
            _ => return false,
        }
    }
}

// ---------------------------------------------------------------------
// The supervisor side, run by the executor's thread.

/// `struct seccomp_data`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct SeccompData {
    nr: i32,
    arch: u32,
    instruction_pointer: u64,
    pub(crate) args: [u64; 6],
}

/// `struct seccomp_notif`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Notif {
    pub(crate) id: u64,
    pub(crate) pid: u32,
    flags: u32,
    pub(crate) data: SeccompData,
}

/// `struct seccomp_notif_resp`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct NotifResp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

const NOTIF_RECV: rustix::ioctl::Opcode = rustix::ioctl::opcode::read_write::<Notif>(b'!', 0);
const NOTIF_SEND: rustix::ioctl::Opcode = rustix::ioctl::opcode::read_write::<NotifResp>(b'!', 1);
const NOTIF_ID_VALID: rustix::ioctl::Opcode = rustix::ioctl::opcode::write::<u64>(b'!', 2);

/// What one notification came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A UNIX socket: listened on by the executor.
    Listened,
    /// A signal that reaches none of the executor's processes: the call
    /// runs as the command made it.
    Continued,
    /// Refused with this errno.
    Refused(i32),
    /// A connect performed by the executor ([`crate::connect`]), or left
    /// to one of its threads, which answers it.
    Connected,
    /// Nothing to answer (the caller is gone, or nothing was pending).
    Gone,
}

/// Receives one pending notification on `listener` and answers it, for
/// the command whose keeper is `keeper`; `connects` judges a `connect`
/// (the filter hands none over without).
pub(crate) fn serve_one(
    listener: &std::sync::Arc<OwnedFd>,
    keeper: i32,
    connects: Option<&mut crate::connect::Connects>,
) -> Verdict {
    let mut notif = Notif::default();
    // SAFETY: SECCOMP_IOCTL_NOTIF_RECV fills a zeroed `struct
    // seccomp_notif`, which `Updater` passes by pointer.
    let got = unsafe {
        rustix::ioctl::ioctl(
            listener,
            rustix::ioctl::Updater::<NOTIF_RECV, Notif>::new(&mut notif),
        )
    };
    if got.is_err() {
        return Verdict::Gone;
    }
    let (val, error, verdict) = if notif.data.nr == libc::SYS_listen as i32 {
        judge_listen(listener, &notif)
    } else if notif.data.nr == libc::SYS_connect as i32 {
        match connects.and_then(|c| c.serve(listener, &notif, keeper)) {
            Some((val, error)) => (val, error, Verdict::Connected),
            // Left to a thread of the executor, which answers it.
            None => return Verdict::Connected,
        }
    } else {
        judge_signal(&notif.data, keeper)
    };
    if answer(
        listener,
        notif.id,
        val,
        error,
        verdict == Verdict::Continued,
    ) {
        verdict
    } else {
        Verdict::Gone
    }
}

/// Answers notification `id`: `val` and the negated errno `error`, or
/// with `go_on` the call runs as its caller made it. False when nobody
/// waits for the answer any more.
pub(crate) fn answer(listener: &OwnedFd, id: u64, val: i64, error: i32, go_on: bool) -> bool {
    let mut resp = NotifResp {
        id,
        val,
        error,
        flags: if go_on { NOTIF_FLAG_CONTINUE } else { 0 },
    };
    // SAFETY: SECCOMP_IOCTL_NOTIF_SEND reads a `struct seccomp_notif_resp`.
    let sent = unsafe {
        rustix::ioctl::ioctl(
            listener,
            rustix::ioctl::Updater::<NOTIF_SEND, NotifResp>::new(&mut resp),
        )
    };
    sent.is_ok()
}

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that need not lead
/// its group.
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

/// A pidfd whose descriptor table is that of thread `tid`: opened on the
/// thread itself ([`PIDFD_THREAD`]), or, on a kernel without that flag,
/// on the leader of its thread group (read from `/proc/<tid>/status`).
pub(crate) fn caller_pidfd(tid: i32) -> Option<OwnedFd> {
    use rustix::process::{pidfd_open, Pid, PidfdFlags};
    let pid = Pid::from_raw(tid)?;
    match pidfd_open(pid, PidfdFlags::from_bits_retain(PIDFD_THREAD)) {
        Ok(fd) => return Some(fd),
        Err(e) if e != rustix::io::Errno::INVAL => return None,
        Err(_) => {}
    }
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid = status_field(&status, "Tgid:")?;
    pidfd_open(Pid::from_raw(tgid)?, PidfdFlags::empty()).ok()
}

/// `SECCOMP_IOCTL_NOTIF_ID_VALID`: whether notification `id` is still
/// pending (its caller alive and waiting).
pub(crate) fn notif_id_valid(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: SECCOMP_IOCTL_NOTIF_ID_VALID reads one u64.
    unsafe {
        rustix::ioctl::ioctl(
            listener,
            rustix::ioctl::Updater::<NOTIF_ID_VALID, u64>::new(&mut id),
        )
    }
    .is_ok()
}

/// Judges a signal call handed over where Landlock does not scope
/// signals, for the command whose keeper is `keeper`: (return value,
/// negated errno, verdict). As scoping would, it lets a command signal
/// its own processes only: a process (named by its pid or any of its
/// threads' ids) that descends from the keeper, which adopts every
/// orphan of the command (it is a subreaper), or a process group one of
/// whose members does (a group lives in one session, and the command's
/// sessions hold only its processes: [`group_is_the_commands`]). Anything
/// else is refused (`EPERM`): the executor's process, its children (the
/// keepers), other processes of the user, every process at once
/// (`kill(-1)`), a group that does not exist. What it lets through runs
/// as made (`Continued`). A pid that matches no thread is answered
/// `ESRCH` here, as the kernel would: let through, it could name a thread
/// or process the kernel starts between the look and the call (the next
/// pids are easily guessed, and the executor starts threads).
///
/// The numbers are the call's registers, which the caller's other threads
/// cannot change. A process judged here that ended, and whose pid another
/// process took, before the call ran would be reached. The kernel hands
/// out pids in turn, but a command can bring the counter round
/// beforehand to just below one of its own pids; the call then races
/// only that process's end and the start of a new thread or process
/// elsewhere. Only signalling through a pidfd opened before the judgement
/// would close it.
fn judge_signal(data: &SeccompData, keeper: i32) -> (i64, i32, Verdict) {
    let refuse = (0, -libc::EPERM, Verdict::Refused(libc::EPERM));
    let go = (0, 0, Verdict::Continued);
    // `pid_t` and `int` arguments: the low 32 bits.
    let arg = |i: usize| data.args[i] as u32 as i32;
    let nr = i64::from(data.nr);
    let named = if nr == libc::SYS_kill || nr == libc::SYS_fcntl {
        let n = if nr == libc::SYS_kill { arg(0) } else { arg(2) };
        match n {
            // kill(-1): every process the caller may signal. (For fcntl,
            // -1 is the process group 1, judged as any group below.)
            -1 if nr == libc::SYS_kill => return refuse,
            // The caller's own group; for fcntl, no owner.
            0 => return go,
            n => n,
        }
    } else if SIGNAL_CALLS.contains(&nr) {
        // tkill's thread, tgkill's and rt_tgsigqueueinfo's thread group,
        // rt_sigqueueinfo's process; the kernel refuses what is not
        // positive.
        match arg(0) {
            n if n <= 0 => return go,
            n => n,
        }
    } else {
        return (0, -libc::ENOSYS, Verdict::Refused(libc::ENOSYS));
    };
    if named < 0 {
        // A process group (`i32::MIN` names none: the kernel answers).
        return match named.checked_neg() {
            Some(group) if group_is_the_commands(group, keeper) => go,
            Some(_) => refuse,
            None => go,
        };
    }
    match descends(named, keeper) {
        Ok(Some(true)) => go,
        // No such thread: answered here, never let through. Between this
        // look and the call the kernel may hand the number to a new
        // thread or process (of the executor, which starts threads and
        // keepers, or of another program of the user), which the call
        // would then reach.
        Ok(None) => (0, -libc::ESRCH, Verdict::Refused(libc::ESRCH)),
        Ok(Some(false)) | Err(()) => refuse,
    }
}

/// Whether the process holding thread `id` descends from `keeper`,
/// read up its chain of parents in `/proc`; `None` when there is no such
/// thread, `Err` when it cannot be told.
fn descends(id: i32, keeper: i32) -> Result<Option<bool>, ()> {
    // An ancestor that ends while the chain is read has its children
    // adopted meanwhile: read again from the start.
    for _ in 0..3 {
        let Some(mut parent) = parent_of(id)? else {
            return Ok(None);
        };
        // Deeper than any process tree the kernel's pid range allows to
        // matter here.
        let mut steps = 0;
        loop {
            if parent == keeper {
                return Ok(Some(true));
            }
            if parent <= 1 || steps == 4096 {
                return Ok(Some(false));
            }
            steps += 1;
            match parent_of(parent)? {
                Some(up) => parent = up,
                None => break,
            }
        }
    }
    Err(())
}

/// Whether process group `group` is the command's: its leader, while it
/// leads it, descends from `keeper`; or, the leader gone, a member does
/// ([`crate::proctree::any_below`], whose cost follows the command's
/// processes, not the host's). A group with no member among the command's
/// processes, or none at all, is not.
fn group_is_the_commands(group: i32, keeper: i32) -> bool {
    use crate::proctree::{any_below, stat_of};
    if let Some(leader) = stat_of(group) {
        if leader.pgrp == group {
            return descends(group, keeper) == Ok(Some(true));
        }
    }
    any_below(keeper, |pid| {
        stat_of(pid).is_some_and(|st| st.pgrp == group)
    })
}

/// The parent of the process holding thread `id`, from
/// `/proc/<id>/status`; `None` when there is no such thread (the call
/// is then answered `ESRCH`), `Err` when it cannot be told.
fn parent_of(id: i32) -> Result<Option<i32>, ()> {
    let status = match std::fs::read_to_string(format!("/proc/{id}/status")) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err(()),
    };
    status_field(&status, "PPid:").ok_or(()).map(Some)
}

/// The number after `name` (`Tgid:`, `PPid:`) in a `/proc/<id>/status`.
fn status_field(status: &str, name: &str) -> Option<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))?
        .trim()
        .parse()
        .ok()
}

/// Performs or refuses the `listen` in `notif`: (return value, negated
/// errno, verdict).
fn judge_listen(listener: &OwnedFd, notif: &Notif) -> (i64, i32, Verdict) {
    let refuse = |errno: i32| (0, -errno, Verdict::Refused(errno));
    if notif.data.nr != libc::SYS_listen as i32 {
        return refuse(libc::ENOSYS);
    }
    // The notification names the calling thread, which is not the
    // process's first one when a threaded program (Go's runtime, a Java or
    // Python server thread) listens: its descriptors are the process's.
    let Some(pidfd) = caller_pidfd(notif.pid as i32) else {
        return refuse(libc::EACCES);
    };
    // The thread id named the caller while its notification was pending;
    // a fatal signal could have ended it and the id been reused before the
    // pidfd was opened: the notification is then gone (the refusal below
    // reaches no one), and nothing of the process the pidfd names is
    // touched.
    if !notif_id_valid(listener, notif.id) {
        return (0, -libc::EACCES, Verdict::Gone);
    }
    let target = notif.data.args[0] as u32 as i32;
    let backlog = notif.data.args[1] as u32 as i32;
    let sock = match rustix::process::pidfd_getfd(
        &pidfd,
        target,
        rustix::process::PidfdGetfdFlags::empty(),
    ) {
        Ok(fd) => fd,
        Err(e) if e == rustix::io::Errno::BADF => return refuse(libc::EBADF),
        Err(_) => return refuse(libc::EACCES),
    };
    match rustix::net::sockopt::socket_domain(&sock) {
        Ok(rustix::net::AddressFamily::UNIX) => match rustix::net::listen(&sock, backlog) {
            Ok(()) => (0, 0, Verdict::Listened),
            Err(e) => refuse(e.raw_os_error()),
        },
        Ok(_) => refuse(libc::EACCES),
        Err(e) => refuse(e.raw_os_error()),
    }
}

#[cfg(test)]
#[path = "../tests/seccomp_support/mod.rs"]
mod seccomp_support;

#[cfg(test)]
mod tests {
    use super::seccomp_support::{capability_checked_calls, NAMED_SYSCALL_PROBE};
    use super::*;

    #[test]
    fn every_program_is_within_the_kernels_limit() {
        for udp in [false, true] {
            for notify in [false, true] {
                for signals in [false, true] {
                    for sockets in [false, true] {
                        let f =
                            Filters::build(SeccompSpec { udp }, notify, signals, sockets, sockets)
                                .unwrap();
                        for p in [&f.supervised, &f.unsupervised, &f.own_network] {
                            assert!(p.len() > 100 && p.len() <= 4096, "{}", p.len());
                        }
                    }
                }
            }
        }
    }

    /// Runs a classic BPF program as the kernel runs a seccomp filter,
    /// for the instructions seccompiler and this module emit; any other
    /// instruction fails the test.
    fn run(prog: &[sock_filter], data: &[u8; 64]) -> u32 {
        let word = |k: u32| {
            let k = k as usize;
            u32::from_ne_bytes(data[k..k + 4].try_into().unwrap())
        };
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = &prog[pc];
            pc += 1;
            let jump = |taken: bool| usize::from(if taken { i.jt } else { i.jf });
            match i.code {
                0x20 => a = word(i.k),
                0x54 => a &= i.k,
                0x05 => pc += i.k as usize,
                0x15 => pc += jump(a == i.k),
                0x25 => pc += jump(a > i.k),
                0x35 => pc += jump(a >= i.k),
                0x45 => pc += jump(a & i.k != 0),
                0x06 => return i.k,
                code => panic!("instruction {code:#x} at {}", pc - 1),
            }
        }
    }

    fn data(nr: u32, arch: u32, args: [u64; 6]) -> [u8; 64] {
        let mut d = [0u8; 64];
        d[0..4].copy_from_slice(&nr.to_ne_bytes());
        d[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, v) in args.iter().enumerate() {
            d[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_ne_bytes());
        }
        d
    }

    /// What the kernel answers for a stack of filters, installed in
    /// order: the most severe answer (`ACTION_ONLY`, compared signed), the
    /// newest filter's among equals.
    fn stacked(filters: &[Vec<sock_filter>], d: &[u8; 64]) -> u32 {
        let severity = |r: u32| (r & 0xffff_0000) as i32;
        let mut answer = SECCOMP_RET_ALLOW;
        for f in filters {
            let r = run(f, d);
            if severity(r) <= severity(answer) {
                answer = r;
            }
        }
        answer
    }

    /// Every merged program beside the stack it stands for.
    fn programs() -> Vec<(Vec<sock_filter>, Vec<Vec<sock_filter>>)> {
        let mut out = Vec::new();
        for (spec, own_ipc, listen, signals, sockets) in [
            (
                SeccompSpec { udp: false },
                false,
                Listen::Supervised,
                false,
                false,
            ),
            (
                SeccompSpec { udp: true },
                false,
                Listen::Supervised,
                false,
                false,
            ),
            (
                SeccompSpec { udp: false },
                false,
                Listen::Supervised,
                true,
                false,
            ),
            (
                SeccompSpec { udp: true },
                false,
                Listen::Supervised,
                true,
                false,
            ),
            (
                SeccompSpec { udp: false },
                false,
                Listen::Supervised,
                false,
                true,
            ),
            (
                SeccompSpec { udp: true },
                false,
                Listen::Supervised,
                true,
                true,
            ),
            (
                SeccompSpec { udp: true },
                false,
                Listen::Refused,
                false,
                false,
            ),
            (
                SeccompSpec { udp: false },
                true,
                Listen::OwnNetwork,
                false,
                false,
            ),
        ] {
            let last = last_filter(listen, signals, sockets);
            let maps = || rule_maps(spec, own_ipc, sockets, signals);
            let mut stack: Vec<Vec<sock_filter>> = maps()
                .into_iter()
                .map(|(rules, errno)| compile_linear(rules, errno).unwrap())
                .collect();
            stack.push(last.clone());
            let merged = merge(maps(), &last, &last_names(signals, sockets)).unwrap();
            out.push((merged, stack));
        }
        out
    }

    /// Argument words worth trying: the edges, and every constant the
    /// rules compare against (families, types, flags, modes).
    const ARGS: [u64; 21] = [
        0,
        1,
        2,
        3,
        0x200,
        0x203,
        10,
        15,
        16,
        0x02 | 0x01,
        0x08,
        0x10,
        0x80,
        0x8901,
        0x8902,
        0x2000_0000,
        0x0008_0001,
        0x0000_0801,
        0x4000_0000,
        0xffff_ffff,
        u64::MAX,
    ];

    /// The merged program answers every system call as the stack of
    /// filters would: every number up to well past the last one, the x32
    /// range, other architectures, with every argument word above in each
    /// position the rules read, one at a time and all at once.
    #[test]
    fn the_merged_program_answers_as_the_stack() {
        for (merged, stack) in programs() {
            let mut nrs: Vec<u32> = (0..1024).collect();
            nrs.extend((0..1024).map(|n| n | X32_BIT));
            nrs.push(u32::MAX);
            for arch in [AUDIT_ARCH, 0x4000_0003, 0] {
                for &nr in &nrs {
                    let mut args = [0u64; 6];
                    for pos in 0..4 {
                        for &v in &ARGS {
                            args[pos] = v;
                            let d = data(nr, arch, args);
                            assert_eq!(
                                run(&merged, &d),
                                stacked(&stack, &d),
                                "nr {nr} args {args:?}"
                            );
                        }
                        args[pos] = 0;
                    }
                    for &v in &ARGS {
                        let d = data(nr, arch, [v; 6]);
                        assert_eq!(run(&merged, &d), stacked(&stack, &d), "nr {nr} all {v:#x}");
                    }
                }
            }
        }
    }

    /// The same with random arguments, for every number some filter
    /// reads arguments of.
    #[test]
    fn the_merged_program_answers_as_the_stack_for_random_arguments() {
        use proptest::prelude::*;
        let programs = programs();
        let numbers: Vec<u32> = [
            libc::SYS_socket,
            libc::SYS_socketpair,
            libc::SYS_clone,
            libc::SYS_sendto,
            libc::SYS_sendmsg,
            libc::SYS_sendmmsg,
            libc::SYS_prlimit64,
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setattr,
            libc::SYS_sched_setaffinity,
            libc::SYS_setpriority,
            libc::SYS_ioprio_set,
            libc::SYS_fallocate,
            libc::SYS_listen,
            libc::SYS_connect,
            libc::SYS_kill,
            libc::SYS_tgkill,
            libc::SYS_fcntl,
            libc::SYS_ioctl,
        ]
        .iter()
        .map(|&n| n as u32)
        .collect();
        proptest!(|(set in 0..programs.len(), pick in any::<prop::sample::Index>(),
                    args in any::<[u64; 6]>(), small in 0u64..0x20)| {
            let (merged, stack) = &programs[set];
            let nr = numbers[pick.index(numbers.len())];
            for args in [args, args.map(|a| a & 0xffff), [small; 6]] {
                let d = data(nr, AUDIT_ARCH, args);
                prop_assert_eq!(run(merged, &d), stacked(stack, &d));
            }
        });
    }

    /// The point of the merge: the kernel's walk of the program for a
    /// system call no filter names (to learn that it is always allowed)
    /// is short, however many calls the filters name.
    #[test]
    fn an_unnamed_call_is_allowed_in_a_few_steps() {
        let named: Vec<u32> = rule_maps(SeccompSpec { udp: true }, false, true, true)
            .iter()
            .flat_map(|(map, _)| map.keys().map(|&nr| nr as u32))
            .chain(last_names(true, true))
            .collect();
        assert!(named.len() > 80, "{}", named.len());
        for (merged, _) in programs() {
            let steps = |nr: u32| {
                let d = data(nr, AUDIT_ARCH, [0; 6]);
                let (mut a, mut pc, mut n) = (0u32, 0usize, 0);
                loop {
                    let i = &merged[pc];
                    pc += 1;
                    n += 1;
                    let jump = |t: bool| usize::from(if t { i.jt } else { i.jf });
                    match i.code {
                        0x20 => a = u32::from_ne_bytes(d[i.k as usize..][..4].try_into().unwrap()),
                        0x05 => pc += i.k as usize,
                        0x15 => pc += jump(a == i.k),
                        0x35 => pc += jump(a >= i.k),
                        0x06 => return (n, i.k),
                        code => panic!("{code:#x} before the search answered"),
                    }
                }
            };
            for nr in (0..512).filter(|nr| !named.contains(nr)) {
                let (n, answer) = steps(nr);
                assert_eq!(answer, SECCOMP_RET_ALLOW);
                assert!(n <= 30, "{n} steps for {nr}");
            }
            // And a call refused whatever its arguments is refused as
            // soon.
            for (nr, errno) in [
                (libc::SYS_ptrace, libc::EPERM),
                (libc::SYS_mount, libc::EPERM),
                (libc::SYS_fanotify_init, libc::EPERM),
                (libc::SYS_clone3, libc::ENOSYS),
            ] {
                let (n, answer) = steps(nr as u32);
                assert_eq!(answer, SECCOMP_RET_ERRNO | errno as u32, "{nr}");
                assert!(n <= 30, "{n} steps for {nr}");
            }
        }
    }

    /// What the programs answer, against this module's table rather than
    /// against the stack (which is built from the same rule lists and the
    /// same hand-written filter, so a check dropped from both would go
    /// unseen there, and the kernel tests cannot see the x32 check on a
    /// kernel without x32 calls, which answers `ENOSYS` itself): another
    /// architecture kills, an x32 number answers `ENOSYS`, whatever the
    /// arguments; every call of [`REFUSED`] answers `EPERM`, [`HOST_IPC`]
    /// too but in a network namespace of the command's own; `listen` is
    /// notified, refused or allowed as the program's [`Listen`] says;
    /// `connect` is notified and UNIX datagram sockets refused where
    /// sockets are judged, and both allowed elsewhere.
    #[test]
    fn the_programs_answer_as_the_table_says() {
        let kill = SECCOMP_RET_KILL_PROCESS;
        let errno = |e: i32| SECCOMP_RET_ERRNO | e as u32;
        for (udp, signals, sockets) in [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (true, true, false),
            (false, false, true),
            (true, true, true),
        ] {
            let f = Filters::build(SeccompSpec { udp }, true, signals, sockets, signals).unwrap();
            for (prog, listen, own_ipc, judged, sockets) in [
                (
                    &f.supervised,
                    SECCOMP_RET_USER_NOTIF,
                    false,
                    signals,
                    sockets,
                ),
                (&f.unsupervised, errno(libc::ENOSYS), false, false, false),
                (&f.own_network, SECCOMP_RET_ALLOW, true, false, false),
            ] {
                for args in [[0; 6], [u64::MAX; 6], [1, 2, 3, 4, 5, 6]] {
                    for nr in 0..1024u32 {
                        for arch in [0x4000_0003, AUDIT_ARCH & !0x8000_0000, 0] {
                            assert_eq!(run(prog, &data(nr, arch, args)), kill, "{nr} {arch:#x}");
                        }
                        let d = data(nr | X32_BIT, AUDIT_ARCH, args);
                        assert_eq!(run(prog, &d), errno(libc::ENOSYS), "x32 {nr}");
                    }
                    for &nr in REFUSED {
                        let d = data(nr as u32, AUDIT_ARCH, args);
                        assert_eq!(run(prog, &d), errno(libc::EPERM), "{nr}");
                    }
                    for &nr in HOST_IPC {
                        let want = if own_ipc {
                            SECCOMP_RET_ALLOW
                        } else {
                            errno(libc::EPERM)
                        };
                        assert_eq!(run(prog, &data(nr as u32, AUDIT_ARCH, args)), want, "{nr}");
                    }
                    let d = data(libc::SYS_listen as u32, AUDIT_ARCH, args);
                    assert_eq!(run(prog, &d), listen);
                    let d = data(libc::SYS_getpid as u32, AUDIT_ARCH, args);
                    assert_eq!(run(prog, &d), SECCOMP_RET_ALLOW);
                    // On the floor: opens Landlock cannot judge refused,
                    // truncation too where `signals` built it so.
                    let floor = |yes: u32| if own_ipc { SECCOMP_RET_ALLOW } else { yes };
                    let truncates = |yes: u32| {
                        if own_ipc || !signals {
                            SECCOMP_RET_ALLOW
                        } else {
                            yes
                        }
                    };
                    let d = data(libc::SYS_openat2 as u32, AUDIT_ARCH, args);
                    assert_eq!(run(prog, &d), floor(errno(libc::ENOSYS)));
                    let d = data(libc::SYS_truncate as u32, AUDIT_ARCH, args);
                    assert_eq!(run(prog, &d), truncates(errno(libc::EACCES)));
                    let trunc = libc::O_TRUNC as u64;
                    let mut opens = vec![(libc::SYS_openat, 2usize)];
                    #[cfg(target_arch = "x86_64")]
                    opens.push((libc::SYS_open, 1));
                    for (nr, at) in opens {
                        let open = |flags: u64| {
                            let mut a = args;
                            a[at] = (a[at] & !0xffff_ffff) | flags;
                            run(prog, &data(nr as u32, AUDIT_ARCH, a))
                        };
                        let cloexec = libc::O_CLOEXEC as u64;
                        assert_eq!(open(3 | cloexec), floor(errno(libc::EACCES)), "{nr}");
                        assert_eq!(open(3 | trunc), floor(errno(libc::EACCES)), "{nr}");
                        assert_eq!(open(trunc | cloexec), truncates(errno(libc::EACCES)));
                        for allowed in [0, 1, 2, 1 | trunc, 2 | trunc | cloexec, cloexec] {
                            assert_eq!(open(allowed), SECCOMP_RET_ALLOW, "{nr} {allowed:#x}");
                        }
                    }
                    // Connects handed over, UNIX datagram sockets refused,
                    // where sockets are judged.
                    let d = data(libc::SYS_connect as u32, AUDIT_ARCH, args);
                    let connect = if sockets {
                        SECCOMP_RET_USER_NOTIF
                    } else {
                        SECCOMP_RET_ALLOW
                    };
                    assert_eq!(run(prog, &d), connect);
                    let unix = libc::AF_UNIX as u64;
                    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
                        for flags in [0, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC] {
                            let flags = flags as u64;
                            let dgram = if sockets {
                                errno(libc::EPERM)
                            } else {
                                SECCOMP_RET_ALLOW
                            };
                            // SOCK_RAW: a datagram socket to the kernel.
                            let mut a = [unix, 0, 0, 0, 0, 0];
                            for kind in [libc::SOCK_DGRAM, libc::SOCK_RAW] {
                                a[1] = kind as u64 | flags;
                                assert_eq!(run(prog, &data(nr as u32, AUDIT_ARCH, a)), dgram);
                            }
                            for kind in [libc::SOCK_STREAM, libc::SOCK_SEQPACKET] {
                                a[1] = kind as u64 | flags;
                                let d = data(nr as u32, AUDIT_ARCH, a);
                                assert_eq!(run(prog, &d), SECCOMP_RET_ALLOW);
                            }
                        }
                    }
                    // Signals: handed over, refused or allowed as judged.
                    let when = |yes: u32| if judged { yes } else { SECCOMP_RET_ALLOW };
                    for nr in SIGNAL_CALLS {
                        let d = data(nr as u32, AUDIT_ARCH, args);
                        assert_eq!(run(prog, &d), when(SECCOMP_RET_USER_NOTIF), "{nr}");
                    }
                    let d = data(libc::SYS_pidfd_send_signal as u32, AUDIT_ARCH, args);
                    assert_eq!(run(prog, &d), when(errno(libc::ENOSYS)));
                    let with_cmd = |nr: i64, cmd: u32| {
                        let mut a = args;
                        a[1] = (a[1] & !0xffff_ffff) | u64::from(cmd);
                        run(prog, &data(nr as u32, AUDIT_ARCH, a))
                    };
                    let fcntl = libc::SYS_fcntl;
                    assert_eq!(with_cmd(fcntl, F_SETOWN), when(SECCOMP_RET_USER_NOTIF));
                    assert_eq!(with_cmd(fcntl, F_SETOWN_EX), when(errno(libc::EPERM)));
                    // F_SETFL: refused with O_ASYNC (on a terminal it
                    // signals the foreground group), allowed without.
                    let setfl = |flags: u64| {
                        let mut a = args;
                        a[1] = (a[1] & !0xffff_ffff) | u64::from(F_SETFL);
                        a[2] = flags;
                        run(prog, &data(fcntl as u32, AUDIT_ARCH, a))
                    };
                    let nonblock = libc::O_NONBLOCK as u64;
                    assert_eq!(setfl(nonblock), SECCOMP_RET_ALLOW);
                    assert_eq!(setfl(0xffff_ffff_0000_0000), SECCOMP_RET_ALLOW);
                    let o_async = u64::from(O_ASYNC);
                    assert_eq!(setfl(o_async | nonblock), when(errno(libc::EPERM)));
                    assert_eq!(
                        with_cmd(libc::SYS_ioctl, FIOASYNC),
                        when(errno(libc::EPERM))
                    );
                    assert_eq!(
                        with_cmd(libc::SYS_ioctl, FIOSETOWN),
                        when(errno(libc::EPERM))
                    );
                    assert_eq!(
                        with_cmd(libc::SYS_ioctl, SIOCSPGRP),
                        when(errno(libc::EPERM))
                    );
                    let fionread = libc::FIONREAD as u32;
                    assert_eq!(with_cmd(libc::SYS_ioctl, fionread), SECCOMP_RET_ALLOW);
                }
            }
        }
    }

    /// Every program, statically: each instruction is one [`run`] knows
    /// (the sweeps above run only what their inputs reach, so an
    /// instruction seccompiler emitted on a path no input takes would go
    /// unseen there), every jump lands inside the program, and the last
    /// instruction returns (the kernel refuses a program otherwise).
    #[test]
    fn every_instruction_is_known_and_every_jump_lands_inside() {
        for (merged, _) in programs() {
            let len = merged.len();
            assert_eq!(merged[len - 1].code, 0x06);
            for (pc, i) in merged.iter().enumerate() {
                let reach = match i.code {
                    0x20 | 0x54 | 0x06 => 0,
                    0x05 => i.k as usize,
                    0x15 | 0x25 | 0x35 | 0x45 => usize::from(i.jt.max(i.jf)),
                    code => panic!("instruction {code:#x} at {pc}"),
                };
                assert!(
                    pc + 1 + reach < len || i.code == 0x06,
                    "jump at {pc} leaves"
                );
                if i.code == 0x20 {
                    assert!(i.k % 4 == 0 && i.k < 64, "load of {} at {pc}", i.k);
                }
            }
        }
    }

    /// Runs `/usr/bin/python3 -c script args` and answers its stdout
    /// lines; with `prog`, under that program alone (no_new_privs, then the
    /// program: no Landlock, every capability kept).
    fn python_under(prog: Option<Vec<sock_filter>>, script: &str, args: &[String]) -> Vec<String> {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("/usr/bin/python3");
        cmd.arg("-c").arg(script).args(args);
        if let Some(prog) = prog {
            // SAFETY: raw system calls only, in the child before exec.
            unsafe {
                cmd.pre_exec(move || {
                    syscalls::syscall!(Sysno::prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
                        .and_then(|_| install(&prog, 0))
                        .map(drop)
                        .map_err(|e| io::Error::from_raw_os_error(e.into_raw()))
                })
            };
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every program the executor may install is taken by the kernel
    /// (whose checker the interpreter does not model), and ordinary work
    /// runs under it.
    #[test]
    fn every_program_installs_on_the_kernel() {
        if !available() || !std::path::Path::new("/usr/bin/python3").exists() {
            eprintln!("note: no seccomp filters or no python3 here");
            return;
        }
        for udp in [false, true] {
            for notify in [false, true] {
                let f = Filters::build(SeccompSpec { udp }, notify, !udp, !udp, !udp).unwrap();
                for p in [&f.supervised, &f.unsupervised, &f.own_network] {
                    let got = python_under(Some(p.clone()), "print(sum(range(4)))", &[]);
                    assert_eq!(got, ["6"]);
                }
            }
        }
    }

    /// The calls of [`REFUSED`] for which the kernel checks a capability
    /// before its arguments (`CAP_SYS_ADMIN`, `CAP_SYS_BOOT`,
    /// `CAP_SYS_PACCT`, `CAP_SYS_MODULE`), which a confined command run as
    /// root on the floor has lost: the executor's tests cannot tell the
    /// filter from the kernel for them. Here the program alone is
    /// installed and root keeps every capability, so the kernel reaches
    /// the arguments, which it rejects (a NULL path, bad reboot magic, a
    /// path that does not exist, unknown flags, too many kexec segments,
    /// an empty module image): unconfined nothing changes, and the answer
    /// is never `EPERM`; under the program it is. Root only.
    #[test]
    fn the_program_alone_refuses_what_root_could_otherwise_do() {
        if !available() || !std::path::Path::new("/usr/bin/python3").exists() {
            eprintln!("note: no seccomp filters or no python3 here");
            return;
        }
        if !rustix::process::geteuid().is_root() {
            eprintln!("note: not root: the kernel refuses these calls before the filter");
            return;
        }
        let calls = capability_checked_calls();
        let names: Vec<&str> = calls.iter().map(|c| c.split('=').next().unwrap()).collect();
        let control = python_under(None, NAMED_SYSCALL_PROBE, &calls);
        assert_eq!(control.len(), calls.len(), "{control:?}");
        for answer in &control {
            assert!(
                !answer.ends_with("=EPERM") && !answer.ends_with("=ok"),
                "control {answer}: {control:?}"
            );
        }
        let f = Filters::build(SeccompSpec::default(), false, false, false, false).unwrap();
        for prog in [&f.unsupervised, &f.own_network] {
            let got = python_under(Some(prog.clone()), NAMED_SYSCALL_PROBE, &calls);
            let refused: Vec<String> = names.iter().map(|n| format!("{n}=EPERM")).collect();
            assert_eq!(got, refused);
        }
    }

    #[test]
    fn uapi_layouts_match_the_kernel() {
        assert_eq!(std::mem::size_of::<SeccompData>(), 64);
        assert_eq!(std::mem::size_of::<Notif>(), 80);
        assert_eq!(std::mem::size_of::<NotifResp>(), 24);
        assert_eq!(std::mem::size_of::<SockFprog>(), 16);
        // SECCOMP_IOCTL_NOTIF_RECV and _SEND as the kernel's header has them.
        assert_eq!(NOTIF_RECV, 0xc050_2100);
        assert_eq!(NOTIF_SEND, 0xc018_2101);
        assert_eq!(NOTIF_ID_VALID, 0x4008_2102);
    }
}
