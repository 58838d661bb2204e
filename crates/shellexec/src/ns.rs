//! Namespaces of the executor's own: a user and a network namespace made
//! once per executor and held by descriptor, and the allowlist view each
//! exec builds in a fresh mount namespace (SECURITY.md says what they add
//! to the floor and what they do not).
//!
//! [`Namespaces::create`] is also the probe: a throwaway child really
//! unshares a user and a network namespace, brings loopback up, unshares a
//! mount, an IPC and a PID namespace, and starts that PID namespace's
//! PID 1, which builds a small view (a tmpfs, `pivot_root`, a read-only
//! bind, a fresh `/proc`) and applies a Landlock ruleset. A host that
//! allows one step and refuses another (an AppArmor rule against mounts in
//! unprivileged user namespaces, a container's seccomp profile, a sysctl
//! that turns user or PID namespaces off, a `/proc` with entries a
//! container runtime covered) fails the probe, and the executor runs on
//! the floor instead.
//!
//! The functions that run in the keeper or the shell ([`enter_view`],
//! [`drop_caps`]) follow `spawn.rs`'s rules: raw system calls only, no
//! allocation, no `errno`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use syscalls::{Errno, Sysno};

use crate::spawn::{block_all_signals, exit, restore_signals, write_all};
use crate::sys::above_stdio;

/// Device nodes bound from the host into the view's `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// The private tmpfs mounts of every view: path, mode, size, inodes. What
/// the command writes there is memory: it counts against its memory limit
/// (charged to its cgroup by the kernel, or summed by the monitor). So are
/// its files themselves: an inode and its dentry are about 1 KiB of kernel
/// memory that holds no block of the mount's `size`, so each mount takes
/// one inode per KiB of its size (the kernel's default is one per two
/// pages of the host's RAM, millions, whatever the size), and the monitor
/// counts each inode in use as [`TMPFS_INODE_BYTES`].
pub(crate) const PRIVATE_TMPFS: &[(&str, &str)] = &[
    ("/tmp", "mode=1777,size=256m,nr_inodes=262144"),
    ("/var/tmp", "mode=1777,size=256m,nr_inodes=262144"),
    ("/run", "mode=0755,size=16m,nr_inodes=16384"),
    ("/dev/shm", "mode=1777,size=64m,nr_inodes=65536"),
];

/// What the monitor counts for an inode in use on a private tmpfs: an
/// empty file's shmem inode and dentry are 944 bytes on Linux 6.18, and
/// the kernel itself charges 1 KiB per inode to a tmpfs's inode space
/// (for user extended attributes too, since Linux 6.6).
pub(crate) const TMPFS_INODE_BYTES: u64 = 1024;

/// Capabilities a root caller loses from its bounding set in the
/// namespaces: `CAP_NET_*` (10–13), `CAP_SYS_*` (16–26, `CAP_SYS_ADMIN`
/// among them) and `CAP_MKNOD` (27).
pub(crate) const DROPPED_CAPS: &[u32] = &[
    10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
];

const MS_RDONLY: usize = 1;
const MS_NOSUID: usize = 2;
const MS_NODEV: usize = 4;
const MS_NOEXEC: usize = 8;
const MS_BIND: usize = 4096;
const MS_REC: usize = 16384;
const MS_PRIVATE: usize = 1 << 18;
const MNT_DETACH: usize = 2;
const MOUNT_ATTR_RDONLY: u64 = 1;
const MOUNT_ATTR_NOSUID: u64 = 2;
const MOUNT_ATTR_NODEV: u64 = 4;
const AT_RECURSIVE: usize = 0x8000;
const AT_FDCWD: isize = -100;

/// `struct mount_attr` (mount_setattr(2)).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// A user and a network namespace, held open for the executor's life.
#[derive(Debug)]
pub(crate) struct Namespaces {
    pub user: OwnedFd,
    pub net: OwnedFd,
    /// The caller is root: the command keeps an identity map and loses the
    /// capabilities of [`DROPPED_CAPS`].
    pub root: bool,
    /// The highest capability number this kernel knows.
    pub last_cap: u32,
}

/// What the probe's child reports: the step that failed and its error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Stage {
    Done = 0,
    Unshare = 1,
    Loopback = 2,
    MountNs = 3,
    View = 4,
    Landlock = 5,
}

impl Stage {
    fn from_u32(v: u32) -> Option<Stage> {
        [
            Stage::Done,
            Stage::Unshare,
            Stage::Loopback,
            Stage::MountNs,
            Stage::View,
            Stage::Landlock,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }

    fn what(self) -> &'static str {
        match self {
            Stage::Done => "nothing",
            Stage::Unshare => "creating a user and a network namespace (unshare)",
            Stage::Loopback => "bringing loopback up in the network namespace",
            Stage::MountNs => "creating a mount, an IPC and a PID namespace",
            Stage::View => {
                "building a view (tmpfs, pivot_root, a read-only bind mount, a proc mount)"
            }
            Stage::Landlock => "applying a Landlock ruleset inside the namespaces",
        }
    }
}

/// Why the namespaces could not be made, in words for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unavailable(pub String);

impl Namespaces {
    /// Probes and creates the namespaces (see the module documentation).
    pub(crate) fn create() -> Result<Namespaces, Unavailable> {
        let fail = |what: &str, e: io::Error| Unavailable(format!("{what}: {e}"));
        let probe = ViewPlan::probe().map_err(|e| fail("planning the probe's view", e))?;
        let (go_r, go_w) = crate::sys::pipe().map_err(|e| fail("a pipe", e))?;
        let (ack_r, ack_w) = crate::sys::pipe().map_err(|e| fail("a pipe", e))?;
        let landlock = crate::confine::kernel_abi().is_some();
        let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
        let root = uid.is_root();
        let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(40);

        let old = block_all_signals();
        // A fork-like clone (a copy of memory, no new stack): the child
        // returns here on its copy of this stack and never returns from
        // `holder`. Signals stay blocked in it, so no handler of the
        // host's runs there.
        // SAFETY: the child makes raw system calls only (see `holder`).
        let pid = unsafe { syscalls::syscall!(Sysno::clone, libc::SIGCHLD, 0, 0, 0, 0) };
        if let Ok(0) = pid {
            // SAFETY: this is the child of a fork-like clone.
            unsafe { holder(go_r.as_raw_fd(), ack_w.as_raw_fd(), &probe, landlock) }
        }
        restore_signals(old);
        drop((go_r, ack_w));
        let pid = match pid {
            Ok(pid) => pid as i32,
            Err(e) => {
                return Err(fail(
                    "starting the probe",
                    io::Error::from_raw_os_error(e.into_raw()),
                ))
            }
        };
        let reap = || crate::sys::reap(pid);
        let result = (|| {
            read_stage(&ack_r)?;
            let proc_dir = format!("/proc/{pid}");
            let write = |name: &str, text: String| {
                std::fs::write(format!("{proc_dir}/{name}"), text)
                    .map_err(|e| fail(&format!("writing {name} of the new user namespace"), e))
            };
            if root {
                write("uid_map", "0 0 4294967295\n".to_owned())?;
                write("gid_map", "0 0 4294967295\n".to_owned())?;
            } else {
                write("setgroups", "deny\n".to_owned())?;
                write("uid_map", format!("{0} {0} 1\n", uid.as_raw()))?;
                write("gid_map", format!("{0} {0} 1\n", gid.as_raw()))?;
            }
            let open = |name: &str| -> Result<OwnedFd, Unavailable> {
                let fd = rustix::fs::open(
                    format!("{proc_dir}/ns/{name}").as_str(),
                    rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )
                .map_err(|e| fail(&format!("opening the {name} namespace"), e.into()))?;
                above_stdio(fd).map_err(|e| fail("a descriptor", e))
            };
            let user = open("user")?;
            let net = open("net")?;
            rustix::io::write(&go_w, &[1]).map_err(|e| fail("resuming the probe", e.into()))?;
            read_stage(&ack_r)?;
            Ok(Namespaces {
                user,
                net,
                root,
                last_cap,
            })
        })();
        drop(go_w);
        reap();
        result
    }
}

/// Reads one report of the probe's child: `Ok` for `Done`, else what
/// failed.
fn read_stage(fd: &OwnedFd) -> Result<(), Unavailable> {
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::read(fd, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    if got < buf.len() {
        return Err(Unavailable(
            "the namespace probe ended without reporting".to_owned(),
        ));
    }
    let stage = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
    match Stage::from_u32(stage) {
        Some(Stage::Done) => Ok(()),
        Some(stage) => Err(Unavailable(format!(
            "{} failed: {}",
            stage.what(),
            io::Error::from_raw_os_error(errno)
        ))),
        None => Err(Unavailable(
            "the namespace probe answered nonsense".to_owned(),
        )),
    }
}

/// The probe's child: unshares, waits for its maps, sets the namespaces
/// up and tries a view and Landlock, reporting each stage; then waits until
/// the parent closes its pipe, and exits.
///
/// # Safety
///
/// Only in the child of a fork-like clone, with every signal blocked.
unsafe fn holder(go: RawFd, ack: RawFd, probe: &ViewPlan, landlock: bool) -> ! {
    let say = |stage: Stage, e: Errno| {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(stage as u32).to_ne_bytes());
        bytes[4..].copy_from_slice(&e.into_raw().to_ne_bytes());
        write_all(ack, &bytes);
    };
    let wait = || {
        let mut b = [0u8; 1];
        loop {
            // SAFETY: a live one-byte buffer.
            match unsafe { syscalls::syscall!(Sysno::read, go, b.as_mut_ptr(), 1) } {
                Err(Errno::EINTR) => continue,
                Ok(1) => return true,
                _ => return false,
            }
        }
    };
    // SAFETY: raw system calls on integers and on memory this child owns.
    unsafe {
        // Every other descriptor of the executor's (the parent's end of
        // `go` among them, which must close for `wait` to return, and other
        // execs' pipes, which must not be held open here).
        // Where `close_range` is refused (a kernel before 5.9, or a
        // container runtime's seccomp profile older than it), one by one:
        // before, the parent's end stayed open and the executor's start
        // waited for this child forever.
        crate::spawn::close_descriptors(0, &[go, ack]);
        let flags = (libc::CLONE_NEWUSER | libc::CLONE_NEWNET) as usize;
        if let Err(e) = syscalls::syscall!(Sysno::unshare, flags) {
            say(Stage::Unshare, e);
            exit(1)
        }
        say(Stage::Done, Errno::new(0));
        if !wait() {
            exit(1)
        }
        if let Err(e) = loopback_up() {
            say(Stage::Loopback, e);
            exit(1)
        }
        // PID 1 of every command is cloned into all three: a host that
        // allows the others but no PID namespace
        // (`user.max_pid_namespaces = 0`, `ENOSPC`) must fail here, not
        // at every exec.
        if let Err(e) = syscalls::syscall!(
            Sysno::unshare,
            (libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWPID) as usize
        ) {
            say(Stage::MountNs, e);
            exit(1)
        }
        // The view is built by PID 1 of the new PID namespace, as each
        // command's is, with a fresh `/proc`: the kernel refuses that mount
        // in a user namespace where the host's `/proc` has covered entries
        // (a container runtime masks some with `/dev/null`). PID 1 reports
        // the rest of the probe itself; this process reports only a PID 1
        // that could not start or ended without a word.
        match syscalls::syscall!(Sysno::clone, libc::SIGCHLD, 0, 0, 0, 0) {
            Ok(0) => {
                let _ = syscalls::syscall!(Sysno::prctl, libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if let Err(e) = enter_view(probe) {
                    say(Stage::View, e);
                    exit(1)
                }
                if landlock {
                    if let Err(e) = landlock_probe() {
                        say(Stage::Landlock, e);
                        exit(1)
                    }
                }
                say(Stage::Done, Errno::new(0));
                exit(0)
            }
            Ok(pid1) => {
                let mut status: i32 = 0;
                let reaped = loop {
                    match syscalls::syscall!(Sysno::wait4, pid1, &mut status as *mut i32, 0, 0) {
                        Err(Errno::EINTR) => continue,
                        r => break r,
                    }
                };
                if reaped.is_err() || !matches!(crate::sys::exit_code(status), Some(0 | 1)) {
                    say(Stage::View, Errno::ECHILD);
                    exit(1)
                }
            }
            Err(e) => {
                say(Stage::View, e);
                exit(1)
            }
        }
        wait();
        exit(0)
    }
}

/// `ioctl(SIOCSIFFLAGS)` raising `IFF_UP` on `lo` in the calling
/// process's network namespace.
///
/// # References
///  - [netdevice(7)](https://man7.org/linux/man-pages/man7/netdevice.7.html)
fn loopback_up() -> Result<(), Errno> {
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: i16,
        _pad: [u8; 22],
    }
    const SIOCGIFFLAGS: usize = 0x8913;
    const SIOCSIFFLAGS: usize = 0x8914;
    let mut req = IfReq {
        name: [0; 16],
        flags: 0,
        _pad: [0; 22],
    };
    req.name[..2].copy_from_slice(b"lo");
    // SAFETY: raw calls on integers and on `req`, a live `struct ifreq`.
    unsafe {
        let sock = syscalls::syscall!(
            Sysno::socket,
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0
        )?;
        let r = syscalls::syscall!(Sysno::ioctl, sock, SIOCGIFFLAGS, &mut req as *mut IfReq)
            .and_then(|_| {
                req.flags |= libc::IFF_UP as i16;
                syscalls::syscall!(Sysno::ioctl, sock, SIOCSIFFLAGS, &req as *const IfReq)
            });
        let _ = syscalls::syscall!(Sysno::close, sock);
        r.map(drop)
    }
}

/// Restricts the calling process with a Landlock ruleset that handles
/// execution and grants nothing (the probe's child execs nothing).
fn landlock_probe() -> Result<(), Errno> {
    let handled: u64 = 1; // LANDLOCK_ACCESS_FS_EXECUTE
                          // SAFETY: raw calls on integers and on a live 8-byte ruleset
                          // attribute (the first field of `struct landlock_ruleset_attr`).
    unsafe {
        syscalls::syscall!(Sysno::prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)?;
        let ruleset =
            syscalls::syscall!(Sysno::landlock_create_ruleset, &handled as *const u64, 8, 0)?;
        let r = syscalls::syscall!(Sysno::landlock_restrict_self, ruleset, 0);
        let _ = syscalls::syscall!(Sysno::close, ruleset);
        r.map(drop)
    }
}

/// One step of building the view, every path made ahead.
#[derive(Debug)]
enum Step {
    /// `mkdirat` each, in order (one that exists is fine).
    Dirs(Vec<CString>),
    /// A tmpfs with these options.
    Tmpfs { target: CString, data: CString },
    /// A recursive bind mount, made read-only (and nosuid, nodev) or not.
    Bind {
        source: CString,
        target: CString,
        read_only: bool,
    },
    /// An empty regular file to bind a device node onto.
    File(CString),
    /// `symlinkat(target, link)`.
    Symlink { target: CString, link: CString },
    /// A fresh `proc` mount (of the PID namespace of the caller).
    Proc(CString),
}

/// How to build the view: see [`enter_view`].
#[derive(Debug)]
pub(crate) struct ViewPlan {
    steps: Vec<Step>,
}

/// What goes where in the view, before it is turned into steps.
enum Kind {
    System,
    Root { writable: bool },
    Symlink(PathBuf),
    Tmpfs(&'static str),
    Device,
    DevLink(&'static str),
    Proc,
}

const STAGING: &str = "/newroot";
const OLD: &str = "/oldroot";

fn cstr(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a path of the view holds a NUL byte",
        )
    })
}

fn under(base: &str, path: &Path) -> io::Result<CString> {
    let mut v = base.as_bytes().to_vec();
    v.extend_from_slice(path.as_os_str().as_bytes());
    cstr(&v)
}

/// The directories to make before `path` (exclusive) exists in the
/// staging root.
fn parents(path: &Path) -> io::Result<Vec<CString>> {
    let mut out = Vec::new();
    let mut at = PathBuf::from("/");
    let comps: Vec<Component<'_>> = path.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        if let Component::Normal(n) = c {
            at.push(n);
            out.push(under(STAGING, &at)?);
        }
    }
    Ok(out)
}

impl ViewPlan {
    /// The view of a command that may read `read_dirs` and write
    /// `write_dirs` (each bound at its own path, canonicalized).
    pub(crate) fn new(read_dirs: &[PathBuf], write_dirs: &[PathBuf]) -> io::Result<ViewPlan> {
        let mut entries: Vec<(PathBuf, Kind)> = Vec::new();
        for dir in crate::SYSTEM_DIRS {
            let path = Path::new(dir);
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => {
                    entries.push((path.to_owned(), Kind::Symlink(std::fs::read_link(path)?)));
                }
                Ok(m) if m.is_dir() => entries.push((path.to_owned(), Kind::System)),
                _ => {}
            }
        }
        entries.push((PathBuf::from("/dev"), Kind::Tmpfs("mode=0755,size=64k")));
        for dev in DEVICES {
            let path = Path::new("/dev").join(dev);
            if path.exists() {
                entries.push((path, Kind::Device));
            }
        }
        for (name, target) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            entries.push((Path::new("/dev").join(name), Kind::DevLink(target)));
        }
        for (path, data) in PRIVATE_TMPFS {
            entries.push((PathBuf::from(path), Kind::Tmpfs(data)));
        }
        entries.push((PathBuf::from("/proc"), Kind::Proc));
        for (dirs, writable) in [(read_dirs, false), (write_dirs, true)] {
            for dir in dirs {
                let canon = std::fs::canonicalize(dir)?;
                entries.push((canon, Kind::Root { writable }));
            }
        }
        // Parents before children; at equal depth, the order above (so a
        // root bound at a system directory's path comes after it).
        entries.sort_by_key(|(p, _)| p.components().count());

        let mut steps = Vec::new();
        for (path, kind) in entries {
            let target = under(STAGING, &path)?;
            let source = under(OLD, &path)?;
            let mut dirs = parents(&path)?;
            let is_dir = !matches!(kind, Kind::Device | Kind::DevLink(_) | Kind::Symlink(_));
            if is_dir && path.as_os_str() != "/" {
                dirs.push(target.clone());
            }
            if !dirs.is_empty() {
                steps.push(Step::Dirs(dirs));
            }
            if matches!(kind, Kind::Device) {
                steps.push(Step::File(target.clone()));
            }
            steps.push(match kind {
                Kind::System => Step::Bind {
                    source,
                    target,
                    read_only: true,
                },
                Kind::Root { writable } => Step::Bind {
                    source,
                    target,
                    read_only: !writable,
                },
                Kind::Symlink(to) => Step::Symlink {
                    target: cstr(to.as_os_str().as_bytes())?,
                    link: target,
                },
                Kind::Tmpfs(data) => Step::Tmpfs {
                    target,
                    data: cstr(data.as_bytes())?,
                },
                Kind::Device => Step::Bind {
                    source,
                    target,
                    read_only: false,
                },
                Kind::DevLink(to) => Step::Symlink {
                    target: cstr(to.as_bytes())?,
                    link: target,
                },
                Kind::Proc => Step::Proc(target),
            });
        }
        // PID 1 shares the executor's memory, so its command line (which
        // procfs shows to anyone) is the host process's, secrets passed as
        // arguments included: /dev/null is bound over it, so that it reads
        // as empty, as a kernel thread's does (a read-only bind would be
        // `nodev` too, which no one can open).
        //
        // `/proc/keys` and `/proc/key-users` are not namespaced either: they
        // list every key the caller may view, in the host user's keyrings
        // too (the descriptions of the keys, their owners and counts),
        // though every keyring call is refused. Masked the same way, where
        // the kernel has them.
        let keys = ["/proc/keys", "/proc/key-users"]
            .into_iter()
            .filter(|p| Path::new(p).exists());
        for masked in ["/proc/1/cmdline", "/proc/1/task/1/cmdline"]
            .into_iter()
            .chain(keys)
        {
            steps.push(Step::Bind {
                source: under(OLD, Path::new("/dev/null"))?,
                target: under(STAGING, Path::new(masked))?,
                read_only: false,
            });
        }
        Ok(ViewPlan { steps })
    }

    /// The probe's view: `/etc` bound read-only and a fresh `/proc` (the
    /// probe's PID 1 builds it in a PID namespace of its own).
    fn probe() -> io::Result<ViewPlan> {
        let etc = Path::new("/etc");
        let proc = Path::new("/proc");
        Ok(ViewPlan {
            steps: vec![
                Step::Dirs(vec![under(STAGING, etc)?, under(STAGING, proc)?]),
                Step::Bind {
                    source: under(OLD, etc)?,
                    target: under(STAGING, etc)?,
                    read_only: true,
                },
                Step::Proc(under(STAGING, proc)?),
            ],
        })
    }
}

/// Builds the view and makes it the calling process's root: the mount
/// tree becomes private, a staging tmpfs is mounted on `/tmp` and becomes
/// the root (`pivot_root`) with the host's tree under `/oldroot`, the
/// plan's steps fill `/newroot` from `/oldroot`, the host's tree is
/// detached, `/newroot` becomes the root (`pivot_root(".", ".")`, as
/// bubblewrap does), and that root is made read-only.
///
/// Raw system calls only (no allocation, no `errno`): the keeper calls it
/// in the executor's memory.
///
/// # Safety
///
/// Only in a process of its own mount namespace (it changes the root).
///
/// # References
///  - [pivot_root(2)](https://man7.org/linux/man-pages/man2/pivot_root.2.html)
///  - [mount_setattr(2)](https://man7.org/linux/man-pages/man2/mount_setattr.2.html)
pub(crate) unsafe fn enter_view(plan: &ViewPlan) -> Result<(), Errno> {
    let null = std::ptr::null::<u8>();
    // SAFETY: raw calls on NUL-terminated strings the plan owns or
    // literals, and on live locals.
    unsafe {
        syscalls::syscall!(
            Sysno::mount,
            null,
            c"/".as_ptr(),
            null,
            MS_REC | MS_PRIVATE,
            null
        )?;
        let tmpfs = c"tmpfs".as_ptr();
        let small = c"mode=0755,size=1m".as_ptr();
        syscalls::syscall!(
            Sysno::mount,
            tmpfs,
            c"/tmp".as_ptr(),
            tmpfs,
            MS_NOSUID | MS_NODEV,
            small
        )?;
        syscalls::syscall!(Sysno::chdir, c"/tmp".as_ptr())?;
        mkdir(c"newroot".as_ptr())?;
        syscalls::syscall!(
            Sysno::mount,
            tmpfs,
            c"newroot".as_ptr(),
            tmpfs,
            MS_NOSUID | MS_NODEV,
            small
        )?;
        mkdir(c"oldroot".as_ptr())?;
        syscalls::syscall!(Sysno::pivot_root, c".".as_ptr(), c"oldroot".as_ptr())?;
        syscalls::syscall!(Sysno::chdir, c"/".as_ptr())?;
        for step in &plan.steps {
            run_step(step)?;
        }
        syscalls::syscall!(Sysno::umount2, c"/oldroot".as_ptr(), MNT_DETACH)?;
        syscalls::syscall!(Sysno::chdir, c"/newroot".as_ptr())?;
        syscalls::syscall!(Sysno::pivot_root, c".".as_ptr(), c".".as_ptr())?;
        syscalls::syscall!(Sysno::umount2, c".".as_ptr(), MNT_DETACH)?;
        syscalls::syscall!(Sysno::chdir, c"/".as_ptr())?;
        setattr(c"/".as_ptr(), MOUNT_ATTR_RDONLY, false)?;
    }
    Ok(())
}

/// `mkdirat(AT_FDCWD, path, 0755)`; an existing entry is fine.
///
/// # Safety
///
/// `path` is NUL-terminated.
unsafe fn mkdir(path: *const libc::c_char) -> Result<(), Errno> {
    // SAFETY: forwarded.
    match unsafe { syscalls::syscall!(Sysno::mkdirat, AT_FDCWD, path, 0o755) } {
        Ok(_) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `mount_setattr(AT_FDCWD, path, flags, {attr_set: set})`.
///
/// # Safety
///
/// `path` is NUL-terminated.
unsafe fn setattr(path: *const libc::c_char, set: u64, recursive: bool) -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: `attr` is a live `struct mount_attr` of the size passed.
    unsafe {
        syscalls::syscall!(
            Sysno::mount_setattr,
            AT_FDCWD,
            path,
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>()
        )
    }
    .map(drop)
}

/// One step of [`enter_view`].
fn run_step(step: &Step) -> Result<(), Errno> {
    let null = std::ptr::null::<u8>();
    // SAFETY: raw calls on NUL-terminated strings the plan owns.
    unsafe {
        match step {
            Step::Dirs(dirs) => {
                for d in dirs {
                    mkdir(d.as_ptr())?;
                }
            }
            Step::Tmpfs { target, data } => {
                let tmpfs = c"tmpfs".as_ptr();
                syscalls::syscall!(
                    Sysno::mount,
                    tmpfs,
                    target.as_ptr(),
                    tmpfs,
                    MS_NOSUID | MS_NODEV,
                    data.as_ptr()
                )?;
            }
            Step::Bind {
                source,
                target,
                read_only,
            } => {
                syscalls::syscall!(
                    Sysno::mount,
                    source.as_ptr(),
                    target.as_ptr(),
                    null,
                    MS_BIND | MS_REC,
                    null
                )?;
                if *read_only {
                    setattr(
                        target.as_ptr(),
                        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                        true,
                    )?;
                }
            }
            Step::File(path) => {
                let fd = syscalls::syscall!(
                    Sysno::openat,
                    AT_FDCWD,
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644
                )?;
                let _ = syscalls::syscall!(Sysno::close, fd);
            }
            Step::Symlink { target, link } => {
                syscalls::syscall!(Sysno::symlinkat, target.as_ptr(), AT_FDCWD, link.as_ptr())?;
            }
            Step::Proc(target) => {
                // Read-only, as Landlock's rules grant it: without
                // Landlock, a command could otherwise write PID 1's
                // `oom_score_adj`, `coredump_filter` or `clear_refs`, which
                // act on the executor's process or memory (PID 1 shares
                // it). Writes through `/proc/self/fd/N` reach the file the
                // link names, on its own mount.
                let proc = c"proc".as_ptr();
                syscalls::syscall!(
                    Sysno::mount,
                    proc,
                    target.as_ptr(),
                    proc,
                    MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    null
                )?;
            }
        }
    }
    Ok(())
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// What a command outside namespaces loses ([`drop_host_caps`]): what a
/// command in the namespaces loses, [`DROPPED_CAPS`], and
/// `CAP_LINUX_IMMUTABLE` (9), which a command in the namespaces holds to
/// no effect (the kernel asks for it in the initial user namespace). On
/// the floor Landlock does not judge ioctls on regular files, so with it
/// a command made a file it may only read (a read root's, `/etc`'s)
/// append-only or immutable with the `chattr` ioctl.
const HOST_CAPS: &[u32] = &[
    9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
];

/// Outside namespaces, takes [`HOST_CAPS`] away from the calling process
/// and whatever it execs, as the namespaces take them. A command run as
/// root on the floor would otherwise change the host's network
/// (addresses, routes, links, queueing rules) through route netlink,
/// which the seccomp filter allows for name lookups, make itself
/// real-time (`SCHED_FIFO`), which the filter allows since a process may
/// set its own scheduling, raise its own hard limits
/// (`CAP_SYS_RESOURCE`), or use whatever else `CAP_SYS_ADMIN` and the
/// other `CAP_SYS_*` grant that the filter does not refuse. Dropped
/// from the bounding set where the process may (`CAP_SETPCAP`), and
/// always from its permitted, effective and inheritable sets (so from its
/// ambient set too); under no_new_privs `execve` never grants more than
/// the permitted set held.
///
/// Raw system calls only.
pub(crate) fn drop_host_caps() -> Result<(), Errno> {
    const PR_CAPBSET_DROP: usize = 24;
    const VERSION_3: u32 = 0x2008_0522;
    // Every one is below 32: the first of the two words holds them.
    let mask: u32 = HOST_CAPS.iter().fold(0, |m, &c| m | 1 << c);
    // SAFETY: raw calls on integers and on live locals.
    unsafe {
        for &cap in HOST_CAPS {
            // EPERM without CAP_SETPCAP: the sets below still hold.
            let _ = syscalls::syscall!(Sysno::prctl, PR_CAPBSET_DROP, cap as usize, 0, 0, 0);
        }
        let mut hdr = CapHeader {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        syscalls::syscall!(Sysno::capget, &mut hdr as *mut CapHeader, data.as_mut_ptr())?;
        let d = &mut data[0];
        if (d.effective | d.permitted | d.inheritable) & mask == 0 {
            return Ok(());
        }
        d.effective &= !mask;
        d.permitted &= !mask;
        d.inheritable &= !mask;
        syscalls::syscall!(Sysno::capset, &hdr as *const CapHeader, data.as_ptr())?;
    }
    Ok(())
}

/// Drops [`DROPPED_CAPS`] from the bounding set. For a root caller the
/// other capabilities are made inheritable and ambient, and the noroot
/// securebits set and locked, so that the command (uid 0 in the user
/// namespace) runs with exactly those after `execve` and can never regain
/// the dropped ones.
///
/// Raw system calls only.
///
/// # References
///  - [capabilities(7)](https://man7.org/linux/man-pages/man7/capabilities.7.html)
///  - [prctl(2) PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_SET_SECUREBITS](https://man7.org/linux/man-pages/man2/prctl.2.html)
pub(crate) fn drop_caps(root: bool, last_cap: u32) -> Result<(), Errno> {
    const PR_CAPBSET_DROP: usize = 24;
    const PR_SET_SECUREBITS: usize = 28;
    const PR_CAP_AMBIENT: usize = 47;
    const PR_CAP_AMBIENT_RAISE: usize = 2;
    const SECBIT_NOROOT: usize = 1;
    const SECBIT_NOROOT_LOCKED: usize = 2;
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: raw calls on integers and on live locals.
    unsafe {
        for &cap in DROPPED_CAPS {
            if cap <= last_cap {
                syscalls::syscall!(Sysno::prctl, PR_CAPBSET_DROP, cap as usize, 0, 0, 0)?;
            }
        }
        if !root {
            return Ok(());
        }
        let mut kept: u64 = 0;
        for cap in 0..=last_cap.min(63) {
            if !DROPPED_CAPS.contains(&cap) {
                kept |= 1 << cap;
            }
        }
        let mut hdr = CapHeader {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        syscalls::syscall!(Sysno::capget, &mut hdr as *mut CapHeader, data.as_mut_ptr())?;
        for (i, d) in data.iter_mut().enumerate() {
            let mask = (kept >> (32 * i)) as u32;
            d.inheritable = d.permitted & mask;
        }
        syscalls::syscall!(Sysno::capset, &hdr as *const CapHeader, data.as_ptr())?;
        for cap in 0..=last_cap.min(63) {
            if kept & (1 << cap) != 0 {
                syscalls::syscall!(
                    Sysno::prctl,
                    PR_CAP_AMBIENT,
                    PR_CAP_AMBIENT_RAISE,
                    cap as usize,
                    0,
                    0
                )?;
            }
        }
        syscalls::syscall!(
            Sysno::prctl,
            PR_SET_SECUREBITS,
            SECBIT_NOROOT | SECBIT_NOROOT_LOCKED,
            0,
            0,
            0
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uapi_layouts_match_the_kernel() {
        assert_eq!(std::mem::size_of::<MountAttr>(), 32);
        assert_eq!(std::mem::size_of::<CapHeader>(), 8);
        assert_eq!(std::mem::size_of::<CapData>(), 12);
    }

    #[test]
    fn the_view_puts_parents_first() {
        let tmp = tempfile::tempdir().unwrap();
        let inner = tmp.path().join("a");
        std::fs::create_dir(&inner).unwrap();
        let plan = ViewPlan::new(&[tmp.path().to_owned()], &[inner]).unwrap();
        let targets: Vec<String> = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Bind { target, .. } | Step::Tmpfs { target, .. } => {
                    Some(target.to_string_lossy().into_owned())
                }
                _ => None,
            })
            .collect();
        let pos = |p: &str| targets.iter().position(|t| t == p).unwrap();
        assert!(pos("/newroot/tmp") < pos(&format!("/newroot{}", tmp.path().display())));
        assert!(pos("/newroot/dev") < pos("/newroot/dev/null"));
    }
}
