//! The executor's `connect` on a command's behalf, on the floor where
//! Landlock does not judge UNIX sockets by path (before ABI 9).
//!
//! Without that judgement a command could connect to any UNIX socket its
//! user may write: a session bus or a user's service manager (which start
//! programs outside every rule), a container runtime's socket, an SSH or
//! GPG agent. There the command's seccomp filter hands every `connect` to
//! the executor ([`crate::seccomp`]). The executor takes a copy of the
//! command's socket with `pidfd_getfd` (the same open socket, not a new
//! one), copies the address once from the command's memory, judges that
//! copy and performs the `connect` itself on the copy of the socket, so
//! nothing the command changes after the judgement (the address, the
//! descriptor) reaches the call. It never lets the call continue in the
//! command.
//!
//! | address | answer |
//! |---|---|
//! | a UNIX socket by path | connected when the socket lies beneath a write root (and, for a narrowed command, beneath one of the narrowing directories too): where Landlock ABI 9 grants the right; else `EACCES` |
//! | an abstract UNIX name | connected when its listener is the command's own (a process of the command holds the listening socket the name is bound to, and once connected the listener's credentials name the executor, which performed its `listen`), as Landlock's scoping would allow; else `EPERM` |
//! | TCP | the port judged as Landlock judges it from ABI 4 (the executor itself is not under Landlock, and below ABI 4 Landlock does not judge TCP at all): `EACCES` outside the granted ports |
//! | a netlink multicast group | `EPERM`: it takes `CAP_NET_ADMIN`, which the command does not hold on the floor and the kernel would look for in the executor |
//! | anything else | performed as asked |
//!
//! A path is resolved as the command would resolve it: from its working
//! directory (`/proc/<tid>/cwd`), or from the root when absolute (a
//! command whose root is not the executor's is refused), with a leading
//! `/proc/self/` or `/proc/thread-self/` read as the calling thread's, in
//! every spelling the kernel reads the same (`//proc/self/`,
//! `/proc/./self//`) (a relative path that climbs into `/proc` and names `self` is resolved
//! as the executor's, and so finds the executor's descriptors: the place
//! of what it reaches is judged all the same). The socket file
//! reached, links followed, is held open (`O_PATH`); its place is the name
//! the kernel gives that descriptor, confirmed by finding the same inode
//! under that name in the directory opened there; from that directory the
//! executor walks up by `..` comparing each directory's device and inode
//! with the roots', as Landlock ties its rules to inodes. It then connects
//! through the descriptor (`/proc/self/fd/N`), never through the name
//! again.
//!
//! A connect on a blocking socket may wait (a TCP handshake, a listener
//! whose queue is full): every connect is performed on a thread of the
//! executor (a socket read as non-blocking too: the command can clear the
//! flag before the call), never on the one that runs the command, in
//! slices of [`SLICE`] (the socket's send timeout, which the kernel's
//! connect waits by, set for the slice and put back after), so the thread
//! ends within a slice once its caller is gone. At most [`MAX_WAITING`]
//! wait at once per command; one more answers `EAGAIN`. The socket stays
//! the command's: a thread of the command that makes it non-blocking
//! meanwhile has the connect answered as it stands, and one that clears
//! its send timeout between two slices has the next slice wait as the
//! kernel's connect would (see [`wait_connect`]); the run's end wakes
//! such a thread with a signal ([`wake_signal`]) and waits at most
//! [`FINISH_WAIT`] for it.
//!
//! What the peer sees differs from a connect made by the command in one
//! way: a UNIX socket's peer credentials (`SO_PEERCRED`) name the
//! executor's process (same user and group), not the command's.

use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, CWD};
use rustix::io::Errno;
use rustix::net::addr::SocketAddrStorage;
use rustix::net::sockopt::{self, Timeout};
use rustix::net::{AddressFamily, SocketAddrAny, SocketAddrUnix, SocketType};

use crate::seccomp::{self, Notif};

/// How long one slice of a waiting connect lasts.
const SLICE: Duration = Duration::from_millis(100);

/// How long the end of a run waits for the threads performing its
/// connects.
const FINISH_WAIT: Duration = Duration::from_secs(1);

/// How many connects of one command may wait at once.
const MAX_WAITING: usize = 64;

/// A directory's identity: device and inode.
type Id = (u64, u64);

fn id(fd: impl AsFd) -> Option<Id> {
    rustix::fs::fstat(fd).ok().map(|st| (st.st_dev, st.st_ino))
}

/// What a command may connect to, from its confinement.
#[derive(Debug)]
pub(crate) struct SocketRules {
    /// The write roots: a UNIX socket beneath one may be connected.
    write_roots: Vec<Id>,
    /// A narrowing layer's directories: the socket must lie beneath one of
    /// these too.
    narrowing: Option<Vec<Id>>,
    /// The TCP ports a connect may reach (as Landlock judges them from
    /// ABI 4; below it, the executor alone does).
    tcp_ports: Vec<u16>,
}

impl SocketRules {
    pub(crate) fn new(
        write_roots: &[BorrowedFd<'_>],
        narrowing: Option<&[BorrowedFd<'_>]>,
        tcp_ports: Vec<u16>,
    ) -> SocketRules {
        let ids = |fds: &[BorrowedFd<'_>]| fds.iter().filter_map(id).collect();
        SocketRules {
            write_roots: ids(write_roots),
            narrowing: narrowing.map(ids),
            tcp_ports,
        }
    }

    /// Judges the address `bytes` for the socket `sock` of family
    /// `family`, of the thread `tid` of the command whose keeper is
    /// `keeper`: what to connect to, or the errno.
    fn judge(
        &self,
        tid: i32,
        keeper: i32,
        family: AddressFamily,
        sock: &OwnedFd,
        bytes: &[u8],
    ) -> Result<Target, i32> {
        // As the kernel: a family, and no more than a `sockaddr_storage`.
        if bytes.len() < 2 || bytes.len() > std::mem::size_of::<SocketAddrStorage>() {
            return Err(libc::EINVAL);
        }
        let addr_family = u16::from_ne_bytes([bytes[0], bytes[1]]);
        let any = || {
            let mut storage = MaybeUninit::<SocketAddrStorage>::zeroed();
            // SAFETY: `bytes` is at most the storage's size (checked
            // above) and the storage is zeroed past it.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    storage.as_mut_ptr().cast::<u8>(),
                    bytes.len(),
                );
                SocketAddrAny::new(storage, bytes.len() as u32)
            }
        };
        if family == AddressFamily::UNIX && addr_family == libc::AF_UNIX as u16 {
            // No longer than a `sockaddr_un`, as the kernel checks.
            if bytes.len() > std::mem::size_of::<libc::sockaddr_un>() {
                return Err(libc::EINVAL);
            }
            let path = &bytes[2..];
            match path.first() {
                // Unnamed: the kernel answers.
                None => return Ok(Target::Address(any())),
                // An abstract name: the command's own listener only, as
                // Landlock's scoping would have it.
                Some(0) if abstract_is_the_commands(path, keeper) => {
                    return Ok(Target::Abstract(any()));
                }
                Some(0) => return Err(libc::EPERM),
                Some(_) => {}
            }
            let path = &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())];
            let file = self.socket_file(tid, path)?;
            let name = format!("/proc/self/fd/{}", file.as_raw_fd());
            let addr = SocketAddrUnix::new(name).map_err(|e| e.raw_os_error())?;
            return Ok(Target::Unix { _file: file, addr });
        }
        // A netlink multicast group takes `CAP_NET_ADMIN`, which the kernel
        // would look for in the executor (the caller of the connect): the
        // command holds none on the floor, so the kernel's answer to it.
        if family == AddressFamily::NETLINK
            && addr_family == libc::AF_NETLINK as u16
            && bytes.len() >= std::mem::size_of::<libc::sockaddr_nl>()
            && bytes[8..12] != [0; 4]
        {
            return Err(libc::EPERM);
        }
        if let AddressFamily::INET | AddressFamily::INET6 = family {
            let ports = &self.tcp_ports;
            let tcp = sockopt::socket_type(sock).ok() == Some(SocketType::STREAM)
                && sockopt::socket_protocol(sock).ok().flatten() == Some(rustix::net::ipproto::TCP);
            // The port, where the address holds one (as Landlock reads
            // it: by the address's family, whatever the socket's).
            let port = match i32::from(addr_family) {
                libc::AF_INET if bytes.len() >= 16 => {
                    Some(u16::from_be_bytes([bytes[2], bytes[3]]))
                }
                libc::AF_INET6 if bytes.len() >= 24 => {
                    Some(u16::from_be_bytes([bytes[2], bytes[3]]))
                }
                _ => None,
            };
            if let (true, Some(port)) = (tcp, port) {
                if !ports.contains(&port) {
                    return Err(libc::EACCES);
                }
            }
        }
        Ok(Target::Address(any()))
    }

    /// The UNIX socket file `path` names for thread `tid`, held open, when
    /// it lies beneath the roots.
    fn socket_file(&self, tid: i32, path: &[u8]) -> Result<OwnedFd, i32> {
        // `/proc/self` is the caller's, not the executor's (a socket named
        // through a descriptor the command holds).
        let own;
        let path = match callers_proc(path) {
            Some(rest) => {
                own = [format!("/proc/{tid}/").as_bytes(), rest].concat();
                &own[..]
            }
            None => path,
        };
        let o = OFlags::PATH | OFlags::CLOEXEC;
        let dir = o | OFlags::DIRECTORY;
        let proc = |what: &str| {
            rustix::fs::openat(CWD, format!("/proc/{tid}/{what}"), dir, Mode::empty())
                .map_err(|_| libc::EACCES)
        };
        let base = if path.first() == Some(&b'/') {
            let root = proc("root")?;
            let ours =
                rustix::fs::openat(CWD, "/", dir, Mode::empty()).map_err(|_| libc::EACCES)?;
            if id(&root).is_none() || id(&root) != id(&ours) {
                return Err(libc::EACCES);
            }
            root
        } else {
            proc("cwd")?
        };
        let file = rustix::fs::openat(&base, OsStr::from_bytes(path), o, Mode::empty())
            .map_err(|e| e.raw_os_error())?;
        let st = rustix::fs::fstat(&file).map_err(|e| e.raw_os_error())?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Socket {
            return Err(libc::ECONNREFUSED);
        }
        // Where the file is: the kernel's name for the descriptor, then
        // the same inode found under that name.
        let name = rustix::fs::readlinkat(
            CWD,
            format!("/proc/self/fd/{}", file.as_raw_fd()),
            Vec::new(),
        )
        .map_err(|_| libc::EACCES)?;
        let name = name.as_bytes();
        if !name.starts_with(b"/") || name.ends_with(b" (deleted)") {
            return Err(libc::ECONNREFUSED);
        }
        let cut = name.iter().rposition(|&b| b == b'/').unwrap_or(0);
        let (parent, leaf) = (&name[..cut.max(1)], &name[cut + 1..]);
        let parent = rustix::fs::openat(CWD, OsStr::from_bytes(parent), dir, Mode::empty())
            .map_err(|_| libc::EACCES)?;
        let there = rustix::fs::statat(&parent, OsStr::from_bytes(leaf), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|_| libc::EACCES)?;
        if (there.st_dev, there.st_ino) != (st.st_dev, st.st_ino) {
            return Err(libc::EACCES);
        }
        if self.beneath(parent) {
            Ok(file)
        } else {
            Err(libc::EACCES)
        }
    }

    /// Whether `dir` is, or lies beneath, a write root (and a narrowing
    /// directory, when narrowed): walked up by `..` to the root.
    fn beneath(&self, mut dir: OwnedFd) -> bool {
        let mut write = false;
        let mut narrow = self.narrowing.is_none();
        let Some(mut here) = id(&dir) else {
            return false;
        };
        // Deeper than any path the kernel resolves (PATH_MAX / 2).
        for _ in 0..2048 {
            write |= self.write_roots.contains(&here);
            if let Some(n) = &self.narrowing {
                narrow |= n.contains(&here);
            }
            if write && narrow {
                return true;
            }
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let Ok(up) = rustix::fs::openat(&dir, "..", flags, Mode::empty()) else {
                return false;
            };
            match id(&up) {
                Some(there) if there != here => {
                    dir = up;
                    here = there;
                }
                _ => return false,
            }
        }
        false
    }
}

/// What a judged connect connects to.
enum Target {
    Address(SocketAddrAny),
    /// An abstract name whose listener was the command's when judged:
    /// checked again once connected ([`wait_connect`]).
    Abstract(SocketAddrAny),
    /// A UNIX socket file held open (`_file`), and its name through the
    /// descriptor.
    Unix {
        _file: OwnedFd,
        addr: SocketAddrUnix,
    },
}

impl Target {
    fn connect(&self, sock: &OwnedFd) -> Result<(), Errno> {
        match self {
            Target::Address(a) | Target::Abstract(a) => rustix::net::connect(sock, a),
            Target::Unix { addr, .. } => rustix::net::connect(sock, addr),
        }
    }
}

/// The connects of one command: its rules, and the threads performing
/// those that wait.
pub(crate) struct Connects {
    rules: Arc<SocketRules>,
    /// The connects judged and not yet taken by a thread (`None` once the
    /// run ends, which lets the threads go).
    jobs: Option<mpsc::Sender<Job>>,
    queue: Arc<Mutex<mpsc::Receiver<Job>>>,
    /// Threads waiting for a connect to perform. A thread started for a
    /// connect stays for the next ones: most connects end at once, and a
    /// thread costs more to start than a connect takes.
    idle: Arc<AtomicUsize>,
    threads: Vec<JoinHandle<()>>,
}

/// One judged connect for a thread to perform and answer.
struct Job {
    listener: Arc<OwnedFd>,
    id: u64,
    sock: OwnedFd,
    target: Target,
}

impl Connects {
    pub(crate) fn new(rules: Arc<SocketRules>) -> Connects {
        let (jobs, queue) = mpsc::channel();
        Connects {
            rules,
            jobs: Some(jobs),
            queue: Arc::new(Mutex::new(queue)),
            idle: Arc::new(AtomicUsize::new(0)),
            threads: Vec::new(),
        }
    }

    /// Judges the `connect` in `notif` and has a thread perform it and
    /// answer (`None`), or refuses it: (return value, negated errno).
    pub(crate) fn serve(
        &mut self,
        listener: &Arc<OwnedFd>,
        notif: &Notif,
        keeper: i32,
    ) -> Option<(i64, i32)> {
        let refuse = |errno: i32| Some((0, -errno));
        let tid = notif.pid as i32;
        // As for `listen`: the calling thread's descriptors, and the
        // notification still pending once the pidfd names it.
        let Some(pidfd) = seccomp::caller_pidfd(tid) else {
            return refuse(libc::EACCES);
        };
        if !seccomp::notif_id_valid(listener, notif.id) {
            return refuse(libc::EACCES);
        }
        let [fd, ptr, len, ..] = notif.data.args;
        let sock = match rustix::process::pidfd_getfd(
            &pidfd,
            fd as u32 as i32,
            rustix::process::PidfdGetfdFlags::empty(),
        ) {
            Ok(s) => s,
            Err(Errno::BADF) => return refuse(libc::EBADF),
            Err(_) => return refuse(libc::EACCES),
        };
        // `socklen_t`, read as the kernel reads it: an `int` no larger
        // than a `sockaddr_storage`.
        let len = len as u32 as i32;
        if len < 0 || len as usize > std::mem::size_of::<SocketAddrStorage>() {
            return refuse(libc::EINVAL);
        }
        let mut bytes = vec![0u8; len as usize];
        let read = std::fs::File::open(format!("/proc/{tid}/mem"))
            .and_then(|mem| mem.read_exact_at(&mut bytes, ptr));
        if read.is_err() {
            return refuse(libc::EFAULT);
        }
        // The thread id still named the caller while its memory was read.
        if !seccomp::notif_id_valid(listener, notif.id) {
            return refuse(libc::EACCES);
        }
        let family = match sockopt::socket_domain(&sock) {
            Ok(f) => f,
            Err(e) => return refuse(e.raw_os_error()),
        };
        let target = match self.rules.judge(tid, keeper, family, &sock, &bytes) {
            Ok(t) => t,
            Err(errno) => return refuse(errno),
        };
        // Performed on a thread even when the socket reads as
        // non-blocking: the command shares the socket's flags and can clear
        // `O_NONBLOCK` between that reading and the call, which would then
        // wait, without end, on the thread that runs the command (its
        // timeout, its output, its kill).
        let job = Job {
            listener: Arc::clone(listener),
            id: notif.id,
            sock,
            target,
        };
        let jobs = self.jobs.as_ref()?;
        // A thread that waits for work takes it; else a new one, up to
        // [`MAX_WAITING`] in all.
        if self
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
        {
            return match jobs.send(job) {
                Ok(()) => None,
                Err(_) => refuse(libc::EAGAIN),
            };
        }
        if self.threads.len() >= MAX_WAITING {
            return refuse(libc::EAGAIN);
        }
        let (queue, idle) = (Arc::clone(&self.queue), Arc::clone(&self.idle));
        let spawned = std::thread::Builder::new()
            .name("sandgate-connect".into())
            .spawn(move || perform(job, &queue, &idle));
        match spawned {
            Ok(t) => {
                self.threads.push(t);
                None
            }
            Err(_) => refuse(libc::EAGAIN),
        }
    }

    /// Waits for the threads still performing connects, once every
    /// process of the command is gone: each ends within a slice, and one
    /// whose slice the command cleared ([`wait_connect`]) is woken by
    /// [`wake_signal`] (it could wait for good: a listener whose queue is
    /// full, connecting to itself, is kept open by the thread's own copy of
    /// it). After [`FINISH_WAIT`] a thread is left to end by itself.
    ///
    /// The signal's handler is installed only when a thread is still
    /// there a few slices after the command ended: a command that never
    /// clears its send timeout leaves the process's signals as they were.
    pub(crate) fn finish(mut self) {
        use std::os::unix::thread::JoinHandleExt;
        // No more work: idle threads end now, busy ones after their connect.
        self.jobs = None;
        let began = Instant::now();
        let mut wake = None;
        for t in self.threads {
            while !t.is_finished() && began.elapsed() < FINISH_WAIT {
                if began.elapsed() >= 3 * SLICE {
                    if let Some(sig) = *wake.get_or_insert_with(wake_signal) {
                        // SAFETY: the thread is not joined yet, so its
                        // `pthread_t` is valid; the handler does nothing.
                        unsafe { libc::pthread_kill(t.as_pthread_t(), sig) };
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// A thread of [`Connects`]: performs `first`, then each connect the
/// queue hands it, until the run ends.
fn perform(first: Job, queue: &Mutex<mpsc::Receiver<Job>>, idle: &AtomicUsize) {
    wakeable();
    let mut job = first;
    loop {
        wait_connect(&job.listener, job.id, &job.sock, &job.target);
        drop(job);
        idle.fetch_add(1, Ordering::AcqRel);
        let next = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        match next {
            Ok(j) => job = j,
            Err(_) => return,
        }
    }
}

/// The signal that wakes a thread of [`wait_connect`] out of a connect
/// that waits without a timeout (the interrupted call answers `EINTR`):
/// the last real-time signal, given a handler that does nothing and no
/// `SA_RESTART`, once, when nothing else of the process handles it; `None`
/// when something does (then such a thread is left to end by itself).
fn wake_signal() -> Option<i32> {
    static WAKE: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *WAKE.get_or_init(|| {
        let sig = libc::SIGRTMAX();
        // SAFETY: zeroed sigactions, read and then filled with a handler
        // that does nothing.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                return None;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = wake as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut act.sa_mask);
            (libc::sigaction(sig, &act, std::ptr::null_mut()) == 0).then_some(sig)
        }
    })
}

/// The handler of [`wake_signal`]: nothing, the interruption is all.
extern "C" fn wake(_: libc::c_int) {}

/// Lets [`wake_signal`] reach the calling thread (it inherits the mask
/// of the thread that started it, which may block it). Nothing else
/// changes: until the handler is installed the signal keeps its action.
fn wakeable() {
    let sig = libc::SIGRTMAX();
    // SAFETY: a signal set on the stack, emptied before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Performs a connect in slices (at once for a non-blocking socket),
/// while its caller waits, and answers it.
///
/// The socket is the command's too: its other threads may change it
/// meanwhile. Made non-blocking, the connect answers at once, as the
/// kernel would (never a loop that spins); the slice is set again before
/// each try, and a send timeout the command clears between the two makes
/// one try wait as the kernel's connect would (for TCP, until the
/// handshake ends or fails; for a UNIX listener whose queue stays full,
/// until it takes a connection or closes, which a listener connecting to
/// itself never does), so [`Connects::finish`] wakes such a thread once
/// the command is gone, and does not wait for it without bound.
fn wait_connect(listener: &OwnedFd, id: u64, sock: &OwnedFd, target: &Target) {
    let own = sockopt::socket_timeout(sock, Timeout::Send).ok().flatten();
    let slice = own.map_or(SLICE, |t| t.min(SLICE));
    let began = Instant::now();
    let mut first = None;
    let result = loop {
        let sliced = sockopt::set_socket_timeout(sock, Timeout::Send, Some(slice)).is_ok();
        match target.connect(sock) {
            Err(e) if sliced && [Errno::AGAIN, Errno::INPROGRESS, Errno::ALREADY].contains(&e) => {
                let first = *first.get_or_insert(e);
                // Made non-blocking meanwhile: answered as it stands.
                if rustix::fs::fcntl_getfl(sock).is_ok_and(|f| f.contains(OFlags::NONBLOCK)) {
                    break Err(e);
                }
                // The command's own timeout ran out: what the kernel's
                // first answer would have been.
                if own.is_some_and(|t| began.elapsed() >= t) {
                    break Err(first);
                }
                if !seccomp::notif_id_valid(listener, id) {
                    let _ = sockopt::set_socket_timeout(sock, Timeout::Send, own);
                    return;
                }
            }
            // A signal to this thread: the host's (an embedding runtime's
            // timers, without `SA_RESTART` or, the slice being a timeout,
            // even with it) or [`wake_signal`] once the run ends. Not the
            // command's answer: the connect goes on (a retry waits for the
            // same one) while its caller waits.
            Err(Errno::INTR) => {
                if !seccomp::notif_id_valid(listener, id) {
                    let _ = sockopt::set_socket_timeout(sock, Timeout::Send, own);
                    return;
                }
                if own.is_some_and(|t| began.elapsed() >= t) {
                    let timed_out = match target {
                        Target::Unix { .. } | Target::Abstract(_) => Errno::AGAIN,
                        _ => Errno::INPROGRESS,
                    };
                    break Err(first.unwrap_or(timed_out));
                }
            }
            r => break r,
        }
    };
    let _ = sockopt::set_socket_timeout(sock, Timeout::Send, own);
    let result = match (result, target) {
        (Ok(()), Target::Abstract(_)) => listened_by_the_executor(sock),
        (r, _) => r,
    };
    let error = result.err().map_or(0, |e| -e.raw_os_error());
    seccomp::answer(listener, id, 0, error, false);
}

/// Whether the abstract name `name` (its first byte the NUL) is bound to a
/// listening socket that a process of the command (below `keeper`) holds
/// open: the table of UNIX sockets of the executor's network namespace,
/// which on the floor is the command's, gives the listener's inode, and
/// the descriptors of the command's processes are looked through for it.
/// A name the table cannot show unambiguously (it holds a newline) is
/// not.
fn abstract_is_the_commands(name: &[u8], keeper: i32) -> bool {
    // The table shows every NUL of an abstract name as `@`.
    let shown: Vec<u8> = name
        .iter()
        .map(|&b| if b == 0 { b'@' } else { b })
        .collect();
    if shown.contains(&b'\n') {
        return false;
    }
    let Ok(table) = std::fs::read("/proc/net/unix") else {
        return false;
    };
    let Some(inode) = listener_inode(&table, &shown) else {
        return false;
    };
    let held = format!("socket:[{inode}]");
    crate::proctree::any_below(keeper, |pid| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str().as_bytes() == held.as_bytes())
        })
    })
}

/// The inode of the listening socket whose name `/proc/net/unix` shows as
/// `shown`. Its lines: `Num RefCount Protocol Flags Type St Inode`, then
/// a space and the name where the socket has one; a listener's flags hold
/// `__SO_ACCEPTCON` (a connection it accepted shows the same name).
fn listener_inode(table: &[u8], shown: &[u8]) -> Option<u64> {
    const ACCEPTCON: u32 = 1 << 16;
    'lines: for line in table.split(|&b| b == b'\n').skip(1) {
        let mut rest = line;
        let mut fields: [&[u8]; 7] = [&[]; 7];
        for field in &mut fields {
            let Some(start) = rest.iter().position(|&b| b != b' ') else {
                continue 'lines;
            };
            rest = &rest[start..];
            let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            *field = &rest[..end];
            rest = &rest[end..];
        }
        if rest.strip_prefix(b" ") != Some(shown) {
            continue;
        }
        let text = |f: &[u8]| std::str::from_utf8(f).ok().map(str::to_owned);
        let flags = text(fields[3]).and_then(|f| u32::from_str_radix(&f, 16).ok());
        if flags.is_some_and(|f| f & ACCEPTCON != 0) {
            return text(fields[6])?.parse().ok();
        }
    }
    None
}

/// Checks, once connected, that an abstract listener is one whose
/// `listen` the executor performed (a command's, on the floor): the name
/// could have been bound anew between the judgement and the connect. If
/// not, the socket is shut down both ways, so the command can use the
/// connection for nothing, and the connect answers `EPERM`.
fn listened_by_the_executor(sock: &OwnedFd) -> Result<(), Errno> {
    let ours =
        sockopt::socket_peercred(sock).is_ok_and(|cred| cred.pid == rustix::process::getpid());
    if ours {
        Ok(())
    } else {
        let _ = rustix::net::shutdown(sock, rustix::net::Shutdown::Both);
        Err(Errno::PERM)
    }
}

/// What follows `/proc/self/` or `/proc/thread-self/` at the start of an
/// absolute path, in any spelling the kernel reads the same (`//proc/self/`,
/// `/./proc//thread-self/`): the part the command means in its own
/// `/proc`. `None` for any other path (a relative one included: see the
/// module's notes).
fn callers_proc(path: &[u8]) -> Option<&[u8]> {
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut rest = path;
    let mut names = [&b""[..]; 2];
    let mut found = 0;
    while found < 2 {
        let start = rest.iter().position(|&b| b != b'/')?;
        rest = &rest[start..];
        let end = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
        let name = &rest[..end];
        rest = &rest[end..];
        if name != b"." {
            names[found] = name;
            found += 1;
        }
    }
    // A separator must follow: `/proc/self` alone is a directory.
    let ours = names[0] == b"proc" && (names[1] == b"self" || names[1] == b"thread-self");
    let skip = rest.iter().position(|&b| b != b'/')?;
    (ours && skip > 0).then(|| &rest[skip..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/self/` and `/proc/thread-self/` are the caller's in every
    /// spelling the kernel reads the same, and nothing else is.
    #[test]
    fn the_callers_proc_is_found_in_every_spelling() {
        let cases: [(&[u8], Option<&[u8]>); 14] = [
            (b"/proc/self/cwd/s", Some(b"cwd/s")),
            (b"/proc/thread-self/fd/3", Some(b"fd/3")),
            (b"//proc/self/cwd/s", Some(b"cwd/s")),
            (b"/proc//self//cwd/s", Some(b"cwd/s")),
            (b"/./proc/./self/./cwd", Some(b"./cwd")),
            (b"///proc/thread-self///x", Some(b"x")),
            (b"/proc/self", None),
            (b"/proc/self/", None),
            (b"/proc/selfish/cwd", None),
            (b"/proc/1/cwd/s", None),
            (b"/prod/self/cwd", None),
            (b"proc/self/cwd/s", None),
            (b"/proc/../proc/self/cwd", None),
            (b"/tmp/proc/self/s", None),
        ];
        for (path, want) in cases {
            assert_eq!(
                callers_proc(path),
                want,
                "{}",
                String::from_utf8_lossy(path)
            );
        }
    }

    /// The listener's line is found by its exact name, past a connection
    /// it accepted (same name, no `__SO_ACCEPTCON`), a name that only
    /// starts the same, and names holding spaces.
    #[test]
    fn the_listener_is_found_by_its_exact_name() {
        let table = b"Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 501 @sg x\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 502 @sg x y\n\
            0000000000000000: 00000002 00000000 00010000 0001 01  90210 @sg x\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 503 /run/sg x\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 504\n";
        assert_eq!(listener_inode(table, b"@sg x"), Some(90210));
        assert_eq!(listener_inode(table, b"@sg x y"), Some(502));
        assert_eq!(listener_inode(table, b"@sg"), None);
        assert_eq!(listener_inode(table, b"/run/sg x"), Some(503));
        assert_eq!(listener_inode(b"", b"@sg x"), None);
    }

    /// Once connected, a listener whose `listen` this process made passes;
    /// one another process listens on does not, and the connection is
    /// shut down so that nothing can be sent through it.
    #[test]
    fn a_listener_another_process_made_is_refused_and_shut_down() {
        use std::io::{BufRead, Write};
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
        let name = format!("sandgate-unit-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let ours = UnixListener::bind_addr(&addr).unwrap();
        let client = OwnedFd::from(UnixStream::connect_addr(&addr).unwrap());
        assert_eq!(listened_by_the_executor(&client), Ok(()));
        drop(ours);
        // Another process's listener, on another name.
        let theirs = format!("{name}-theirs");
        let child = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket, sys, time\n\
                 l = socket.socket(socket.AF_UNIX)\n\
                 l.bind('\\0' + sys.argv[1])\n\
                 l.listen(4)\n\
                 print('ready', flush=True)\n\
                 time.sleep(30)\n",
                &theirs,
            ])
            .stdout(std::process::Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            eprintln!("note: no python3 here: the second half is skipped");
            return;
        };
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");
        let addr = SocketAddr::from_abstract_name(theirs.as_bytes()).unwrap();
        let client = UnixStream::connect_addr(&addr).unwrap();
        let fd = OwnedFd::from(client.try_clone().unwrap());
        assert_eq!(listened_by_the_executor(&fd), Err(Errno::PERM));
        let sent = (&client).write(b"x");
        assert_eq!(sent.map_err(|e| e.raw_os_error()), Err(Some(libc::EPIPE)));
        let _ = child.kill();
        let _ = child.wait();
    }
}
