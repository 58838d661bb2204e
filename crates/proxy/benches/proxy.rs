//! The egress proxy's cost against a direct connection, on host loopback:
//!
//! - `download_10MB`: a client reads 10 MB from a server, directly and
//!   through a `CONNECT` tunnel of the proxy (relayed with `splice`). Runs
//!   alternate, the median of each is printed as a `RATIO` line (target
//!   ≤ 1.15, docs/BENCHMARKS.md);
//! - `connect_setup`: from `connect` to the first byte of the server's
//!   answer, directly and through the tunnel (reported, no target).
//!
//! The client runs on CPU 0 and the server on CPU 1 where the machine has
//! two; the proxy's threads are left to the scheduler.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use sandgate_netguard::{Mode, NetEntry, Rules};
use sandgate_proxy::{Proxy, ProxyConfig};

const SIZE: usize = 10 * 1024 * 1024;

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if rustix::thread::sched_setaffinity(None, &set).is_err() {
        eprintln!("note: could not pin a thread to CPU {cpu}");
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Each connection: one byte right away (for the setup figure), then
/// reads a byte saying how much to send (0: nothing, 1: 10 MB).
fn server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        if cpus() > 1 {
            pin(1);
        }
        let data = vec![7u8; SIZE];
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let _ = c.set_nodelay(true);
            let _ = c.write_all(b"!");
            let mut what = [0u8; 1];
            if c.read_exact(&mut what).is_ok() && what[0] == 1 {
                let _ = c.write_all(&data);
            }
        }
    });
    addr
}

/// Opens a connection (through the proxy when `proxy` is given) and reads
/// the server's first byte.
fn open(server: SocketAddr, proxy: Option<SocketAddr>) -> TcpStream {
    let mut s = TcpStream::connect(proxy.unwrap_or(server)).unwrap();
    s.set_nodelay(true).unwrap();
    if proxy.is_some() {
        write!(s, "CONNECT {server} HTTP/1.1\r\n\r\n").unwrap();
        let mut head = [0u8; 39];
        s.read_exact(&mut head).unwrap();
        assert!(
            head.starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&head)
        );
    }
    let mut first = [0u8; 1];
    s.read_exact(&mut first).unwrap();
    s
}

fn download(server: SocketAddr, proxy: Option<SocketAddr>, buf: &mut [u8]) -> Duration {
    let t = Instant::now();
    let mut s = open(server, proxy);
    s.write_all(&[1]).unwrap();
    let mut got = 0;
    while got < SIZE {
        let n = s.read(buf).unwrap();
        assert!(n > 0, "the download ended early");
        got += n;
    }
    t.elapsed()
}

fn setup(server: SocketAddr, proxy: Option<SocketAddr>) -> Duration {
    let t = Instant::now();
    let mut s = open(server, proxy);
    let d = t.elapsed();
    s.write_all(&[0]).unwrap();
    d
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_nanos() as f64
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 7 } else { 31 };
    let server = server();
    let entry = NetEntry::parse(&server.to_string()).unwrap();
    let proxy = Proxy::new(ProxyConfig::new(Rules::new(
        Mode::Restricted,
        vec![entry],
        false,
    )));
    let proxy_addr = proxy
        .serve(TcpListener::bind("127.0.0.1:0").unwrap().into())
        .unwrap();
    if cpus() > 1 {
        pin(0);
    }
    let mut buf = vec![0u8; 256 * 1024];
    // Warm up both paths.
    download(server, None, &mut buf);
    download(server, Some(proxy_addr), &mut buf);
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        direct.push(download(server, None, &mut buf));
        proxied.push(download(server, Some(proxy_addr), &mut buf));
    }
    let (d, p) = (median(direct), median(proxied));
    println!(
        "download 10 MB: direct {:.2} ms, through the proxy {:.2} ms ({:.0} MB/s)",
        d / 1e6,
        p / 1e6,
        SIZE as f64 / (p * 1e-9) / 1e6
    );
    println!(
        "RATIO\tsandgate-proxy\tdownload_10MB/proxied\t{p:.1}\t{d:.1}\t{:.4}\tdirect",
        p / d
    );
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..runs * 4 {
        direct.push(setup(server, None));
        proxied.push(setup(server, Some(proxy_addr)));
    }
    let (d, p) = (median(direct), median(proxied));
    println!(
        "connection setup: direct {:.1} µs, through the proxy {:.1} µs",
        d / 1e3,
        p / 1e3
    );
    println!(
        "RATIO\tsandgate-proxy\tconnect_setup/proxied\t{p:.1}\t{d:.1}\t{:.4}\tdirect",
        p / d
    );
    proxy.stop();
}
