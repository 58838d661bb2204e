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
    /// An `RTM_NEWADDR` request that puts the address on `lo` first, for
    /// an address outside the loopback range (its length, then its bytes).
    add: Option<(usize, [u8; 64])>,
}

/// The `RTM_NEWADDR` netlink request adding `ip` (host scope, a /32 or
/// /128, without duplicate address detection) to interface 1, which is
/// `lo` in a fresh network namespace.
///
/// # References
///  - [rtnetlink(7)](https://man7.org/linux/man-pages/man7/rtnetlink.7.html)
fn new_addr_request(ip: std::net::IpAddr) -> (usize, [u8; 64]) {
    const RTM_NEWADDR: u16 = 20;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const NLM_F_EXCL: u16 = 0x200;
    const NLM_F_CREATE: u16 = 0x400;
    const IFA_ADDRESS: u16 = 1;
    const IFA_LOCAL: u16 = 2;
    const IFA_F_NODAD: u8 = 2;
    const RT_SCOPE_HOST: u8 = 254;
    let (family, prefix, bytes): (u8, u8, Vec<u8>) = match ip {
        std::net::IpAddr::V4(v4) => (libc::AF_INET as u8, 32, v4.octets().to_vec()),
        std::net::IpAddr::V6(v6) => (libc::AF_INET6 as u8, 128, v6.octets().to_vec()),
    };
    let attr_len = 4 + bytes.len();
    let total = 16 + 8 + 2 * attr_len;
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_NEWADDR.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK | NLM_F_EXCL | NLM_F_CREATE).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[family, prefix, IFA_F_NODAD, RT_SCOPE_HOST]);
    m.extend_from_slice(&1u32.to_ne_bytes());
    for kind in [IFA_LOCAL, IFA_ADDRESS] {
        m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&bytes);
    }
    let mut out = [0u8; 64];
    out[..m.len()].copy_from_slice(&m);
    (m.len(), out)
}

fn raw_addr(addr: &SocketAddr) -> RawAddr {
    // SAFETY: all-zero is a valid `sockaddr_storage`.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let add = (!addr.ip().is_loopback()).then(|| new_addr_request(addr.ip()));
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
                add,
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
                add,
            }
        }
    }
}

/// Creates a TCP listener at each of `addrs` inside the namespaces (port 0
/// for a port the kernel picks); an address outside the loopback range is
/// first added to the namespace's `lo`. Each address gets its own answer: the
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
    crate::sys::reap(pid);
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
            if let Some((len, req)) = &a.add {
                if let Err(e) = add_address(&req[..*len]) {
                    send(sock, e.into_raw(), -1);
                    continue;
                }
            }
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

/// Sends an `RTM_NEWADDR` request on a fresh route netlink socket and
/// reads the kernel's acknowledgement (an address already there is fine).
///
/// # Safety
///
/// Any process; it allocates nothing.
unsafe fn add_address(req: &[u8]) -> Result<(), Errno> {
    // SAFETY: raw system calls on integers and on live stack buffers.
    unsafe {
        let fd = syscalls::syscall!(
            Sysno::socket,
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE
        )? as RawFd;
        let done = (|| {
            syscalls::syscall!(Sysno::sendto, fd, req.as_ptr(), req.len(), 0, 0, 0)?;
            let mut ack = [0u8; 256];
            let n = loop {
                match syscalls::syscall!(Sysno::recvfrom, fd, ack.as_mut_ptr(), ack.len(), 0, 0, 0)
                {
                    Err(Errno::EINTR) => continue,
                    other => break other?,
                }
            };
            // struct nlmsghdr, then for NLMSG_ERROR (2) the error (0: done).
            if n < 20 || u16::from_ne_bytes([ack[4], ack[5]]) != 2 {
                return Err(Errno::EPROTO);
            }
            match i32::from_ne_bytes([ack[16], ack[17], ack[18], ack[19]]) {
                0 => Ok(()),
                e if -e == libc::EEXIST => Ok(()),
                e => Err(Errno::new(-e)),
            }
        })();
        let _ = syscalls::syscall!(Sysno::close, fd);
        done
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
