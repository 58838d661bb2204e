//! The relay: `splice` from one socket into a pipe and from the pipe into
//! the other socket, so the bytes never pass through the proxy's memory.
//! One thread per direction; a connection on which neither direction moved
//! for the idle timeout is shut down.

use std::net::{Shutdown, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::pipe::{splice, SpliceFlags};

/// The pipe's capacity asked for, and the most bytes moved by one
/// `splice` (a pipe keeps its default 64 KiB where the larger size is
/// refused, e.g. past `/proc/sys/fs/pipe-user-pages-soft`).
const CHUNK: usize = 1024 * 1024;

/// When either direction last moved, shared by both.
pub(crate) struct Activity {
    base: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    pub(crate) fn new() -> Activity {
        Activity {
            base: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = self.base.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    pub(crate) fn idle_for(&self) -> Duration {
        let now = self.base.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// How often a blocked `splice` wakes to look at the idle clock.
pub(crate) fn tick(idle: Duration) -> Duration {
    idle.clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Relays both directions between `client` and `upstream` until both have
/// ended (each end's EOF is passed on as a half close) or the connection
/// idled out or failed. Returns the bytes moved up (client to upstream)
/// and down.
pub(crate) fn both(
    client: &Arc<TcpStream>,
    upstream: &Arc<TcpStream>,
    idle: Duration,
) -> (u64, u64) {
    let (up, down, _) = both_after(client, upstream, idle, Box::new(|_| Ok(Vec::new())));
    (up, down)
}

/// What the upward direction does before relaying: reads and judges the
/// client's first bytes, and answers those to send on (or why the
/// connection must end). It is given the connection's activity, which
/// the downward direction keeps while it waits.
pub(crate) type Prelude = Box<dyn FnOnce(&Activity) -> Result<Vec<u8>, String> + Send>;

/// [`both`], the upward direction starting with `prelude` while the
/// downward one already runs (a server may speak first). When the prelude
/// refuses, both sockets are shut and its reason is returned.
pub(crate) fn both_after(
    client: &Arc<TcpStream>,
    upstream: &Arc<TcpStream>,
    idle: Duration,
    prelude: Prelude,
) -> (u64, u64, Option<String>) {
    for s in [client, upstream] {
        let _ = s.set_read_timeout(Some(tick(idle)));
        let _ = s.set_write_timeout(Some(idle));
    }
    let activity = Arc::new(Activity::new());
    let (c, u, a) = (
        Arc::clone(client),
        Arc::clone(upstream),
        Arc::clone(&activity),
    );
    let up = std::thread::Builder::new()
        .name("sandgate-proxy-up".into())
        .spawn(move || {
            let first = match prelude(&a) {
                Ok(first) => first,
                Err(why) => {
                    let _ = c.shutdown(Shutdown::Both);
                    let _ = u.shutdown(Shutdown::Both);
                    return (0, Some(why));
                }
            };
            let _ = c.set_read_timeout(Some(tick(idle)));
            a.touch();
            if !first.is_empty() && crate::conn::write_all(&u, &first).is_err() {
                let _ = c.shutdown(Shutdown::Both);
                let _ = u.shutdown(Shutdown::Both);
                return (0, None);
            }
            (first.len() as u64 + one_way(&c, &u, &a, idle), None)
        });
    let down = one_way(upstream, client, &activity, idle);
    let (up, why) = match up {
        Ok(t) => t.join().unwrap_or((0, None)),
        Err(_) => {
            // No thread for the other direction: end the connection.
            let _ = client.shutdown(Shutdown::Both);
            let _ = upstream.shutdown(Shutdown::Both);
            (0, None)
        }
    };
    (up, down, why)
}

/// Relays `src` to `dst` until `src` ends; returns the bytes moved. Sets
/// the timeouts itself.
pub(crate) fn down_only(src: &TcpStream, dst: &TcpStream, idle: Duration) -> u64 {
    let _ = src.set_read_timeout(Some(tick(idle)));
    let _ = dst.set_write_timeout(Some(idle));
    one_way(src, dst, &Activity::new(), idle)
}

fn one_way(src: &TcpStream, dst: &TcpStream, activity: &Activity, idle: Duration) -> u64 {
    let abort = || {
        let _ = src.shutdown(Shutdown::Both);
        let _ = dst.shutdown(Shutdown::Both);
    };
    let Ok((pr, pw)) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) else {
        abort();
        return 0;
    };
    let _ = rustix::pipe::fcntl_setpipe_size(&pw, CHUNK);
    let mut moved = 0u64;
    loop {
        match splice(src, None, &pw, None, CHUNK, SpliceFlags::MOVE) {
            Ok(0) => {
                let _ = dst.shutdown(Shutdown::Write);
                return moved;
            }
            Ok(n) => {
                activity.touch();
                if !drain(&pr, dst, n, activity, idle) {
                    abort();
                    return moved;
                }
                moved += n as u64;
            }
            // Interrupted (a signal of the host to this thread) or the
            // socket's timeout: the idle clock decides either way, or a
            // storm of signals, each restarting the timeout, would keep
            // an idle connection for good.
            Err(Errno::INTR | Errno::AGAIN) => {
                if activity.idle_for() >= idle {
                    abort();
                    return moved;
                }
            }
            Err(_) => {
                abort();
                return moved;
            }
        }
    }
}

/// Moves `n` bytes from the pipe into `dst`.
fn drain(pr: &OwnedFd, dst: &TcpStream, mut n: usize, activity: &Activity, idle: Duration) -> bool {
    while n > 0 {
        match splice(pr, None, dst, None, n, SpliceFlags::MOVE) {
            Ok(0) => return false,
            Ok(m) => {
                activity.touch();
                n -= m;
            }
            Err(Errno::INTR | Errno::AGAIN) if activity.idle_for() < idle => {}
            Err(_) => return false,
        }
    }
    true
}
