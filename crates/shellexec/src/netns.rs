//! Listening sockets made inside the executor's network namespace and
//! handed back to the executor, which serves them from the host's own
//! network namespace (the proxy and the literal-address forwarders).
//!
//! An unprivileged process cannot `setns` into the namespace itself (that
//! needs `CAP_SYS_ADMIN` in its own user namespace), so a short-lived
//! child, a fork-like clone, joins the user and the network namespace by
//! descriptor (as the keeper does), creates, binds and listens, and sends
//! each listening descriptor back over a UNIX socket pair (`SCM_RIGHTS`).
//! The child follows `spawn.rs`'s rules: raw system calls only, no
//! allocation, no `errno`.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use syscalls::{Errno, Sysno};

use crate::ns::Namespaces;
use crate::spawn::{block_all_signals, exit, restore_signals};

/// A socket address as the kernel reads it, made before the child exists.
struct RawAddr {
    storage: libc::sockaddr_storage,
    len: u32,
    family: i32,
}

fn raw_addr(addr: &SocketAddr) -> RawAddr {
    // SAFETY: all-zero is a valid `sockaddr_storage`.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `sockaddr_storage` is larger than and aligned for
            // `sockaddr_in`.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            RawAddr {
                storage,
                len: std::mem::size_of::<libc::sockaddr_in>() as u32,
                family: libc::AF_INET,
            }
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: as above, for `sockaddr_in6`.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            RawAddr {
                storage,
                len: std::mem::size_of::<libc::sockaddr_in6>() as u32,
                family: libc::AF_INET6,
            }
        }
    }
}

/// Creates a TCP listener at each of `addrs` inside the namespaces (port 0
/// for a port the kernel picks). Each address gets its own answer: the
/// listener, or why it could not be made (an IPv6 address in a namespace
/// without IPv6, an address taken). `Err` when the child could not be run
/// at all.
pub(crate) fn listen_inside(
    ns: &Namespaces,
    addrs: &[SocketAddr],
) -> io::Result<Vec<io::Result<OwnedFd>>> {
    let raw: Vec<RawAddr> = addrs.iter().map(raw_addr).collect();
    let (mine, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )?;
    let (user, net, sock) = (ns.user.as_raw_fd(), ns.net.as_raw_fd(), theirs.as_raw_fd());
    let old = block_all_signals();
    // SAFETY: a fork-like clone; the child makes raw system calls only on
    // memory made before it (see `child`) and exits.
    let pid = unsafe { syscalls::syscall!(Sysno::clone, libc::SIGCHLD, 0, 0, 0, 0) };
    if let Ok(0) = pid {
        // SAFETY: this is the child of a fork-like clone.
        unsafe { child(user, net, sock, &raw) }
    }
    restore_signals(old);
    drop(theirs);
    let pid = pid.map_err(|e| io::Error::from_raw_os_error(e.into_raw()))? as i32;
    let mut out = Vec::with_capacity(addrs.len());
    for _ in addrs {
        match receive(&mine) {
            Some(answer) => out.push(answer),
            None => {
                out.push(Err(io::Error::other(
                    "the namespace helper ended without answering",
                )));
            }
        }
    }
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::empty());
    }
    Ok(out)
}

/// One answer of the child: an errno (0 for success) and, on success, the
/// listener.
fn receive(sock: &OwnedFd) -> Option<io::Result<OwnedFd>> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut errno = [0u8; 4];
    let got = loop {
        match rustix::net::recvmsg(
            sock,
            &mut [io::IoSliceMut::new(&mut errno)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other.ok()?,
        }
    };
    if got.bytes != 4 {
        return None;
    }
    let mut fd = None;
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = msg {
            for f in fds {
                fd.get_or_insert(f);
            }
        }
    }
    let errno = i32::from_ne_bytes(errno);
    Some(match (errno, fd) {
        (0, Some(fd)) => Ok(fd),
        (0, None) => Err(io::Error::other("the namespace helper sent no descriptor")),
        (e, _) => Err(io::Error::from_raw_os_error(e)),
    })
}

/// The child: joins the namespaces, then for each address makes a
/// listener and sends it (or the errno) back.
///
/// # Safety
///
/// Only in the child of a fork-like clone, with every signal blocked.
unsafe fn child(user: RawFd, net: RawFd, sock: RawFd, addrs: &[RawAddr]) -> ! {
    // SAFETY: raw system calls on integers and memory made before the
    // clone.
    unsafe {
        if let Err(e) = syscalls::syscall!(Sysno::setns, user, libc::CLONE_NEWUSER) {
            for _ in addrs {
                send(sock, e.into_raw(), -1);
            }
            exit(1)
        }
        if let Err(e) = syscalls::syscall!(Sysno::setns, net, libc::CLONE_NEWNET) {
            for _ in addrs {
                send(sock, e.into_raw(), -1);
            }
            exit(1)
        }
        for a in addrs {
            match listener(a) {
                Ok(fd) => {
                    send(sock, 0, fd);
                    let _ = syscalls::syscall!(Sysno::close, fd);
                }
                Err(e) => send(sock, e.into_raw(), -1),
            }
        }
        exit(0)
    }
}

/// `socket`, `SO_REUSEADDR`, `bind`, `listen` (raw calls only).
///
/// # Safety
///
/// Any process; it allocates nothing.
unsafe fn listener(a: &RawAddr) -> Result<RawFd, Errno> {
    // SAFETY: raw system calls on integers and on `a`, which is live.
    unsafe {
        let fd = syscalls::syscall!(
            Sysno::socket,
            a.family,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0
        )? as RawFd;
        let one: i32 = 1;
        let done = (|| {
            syscalls::syscall!(
                Sysno::setsockopt,
                fd,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                &one as *const i32,
                4
            )?;
            if a.family == libc::AF_INET6 {
                syscalls::syscall!(
                    Sysno::setsockopt,
                    fd,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_V6ONLY,
                    &one as *const i32,
                    4
                )?;
            }
            syscalls::syscall!(
                Sysno::bind,
                fd,
                &a.storage as *const libc::sockaddr_storage,
                a.len
            )?;
            syscalls::syscall!(Sysno::listen, fd, 256)?;
            Ok(())
        })();
        match done {
            Ok(()) => Ok(fd),
            Err(e) => {
                let _ = syscalls::syscall!(Sysno::close, fd);
                Err(e)
            }
        }
    }
}

/// Sends `errno` (4 bytes) and, when `fd` is not negative, `fd`.
///
/// # Safety
///
/// Any process; it allocates nothing.
unsafe fn send(sock: RawFd, errno: i32, fd: RawFd) {
    /// A control message with one descriptor, padded to `CMSG_SPACE`.
    #[repr(C)]
    struct OneFd {
        hdr: libc::cmsghdr,
        fd: RawFd,
        pad: u32,
    }
    let bytes = errno.to_ne_bytes();
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: 4,
    };
    // SAFETY: both are plain C structs for which all-zero is valid.
    let (mut control, mut msg): (OneFd, libc::msghdr) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if fd >= 0 {
        control.hdr.cmsg_len = std::mem::size_of::<libc::cmsghdr>() + std::mem::size_of::<RawFd>();
        control.hdr.cmsg_level = libc::SOL_SOCKET;
        control.hdr.cmsg_type = libc::SCM_RIGHTS;
        control.fd = fd;
        msg.msg_control = (&mut control as *mut OneFd).cast();
        msg.msg_controllen = std::mem::size_of::<OneFd>();
    }
    // SAFETY: `msg` points at live locals for the duration of the call.
    let _ = unsafe {
        syscalls::syscall!(
            Sysno::sendmsg,
            sock,
            &msg as *const libc::msghdr,
            libc::MSG_NOSIGNAL
        )
    };
}
