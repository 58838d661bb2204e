//! Helpers shared by the fetch's test suites.

// Each suite uses a part of this.
#![allow(dead_code)]

use std::net::{IpAddr, TcpListener, TcpStream};
use std::time::Duration;

use sandgate_fetch::{FetchError, FetchOptions, FetchResponse, Fetcher};
use sandgate_netguard::{Mode, NetEntry, Rules};

/// A loopback listener nobody accepts from, its queue filled: a new
/// connect to it hangs (Linux drops the SYN of a full queue).
pub fn full_listener() -> (TcpListener, Vec<TcpStream>) {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind a loopback port");
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => held.push(s),
            Err(_) => break,
        }
        assert!(held.len() < 100_000, "the queue never filled");
    }
    (listener, held)
}

/// Rules as a policy would grant them: each entry well-formed and, in
/// restricted mode, one that restricted mode admits.
pub fn rules<S: AsRef<str>>(mode: Mode, allow: &[S], allow_http: bool) -> Rules {
    let allow = allow
        .iter()
        .map(|raw| {
            let entry = NetEntry::parse(raw.as_ref()).expect("the test entry parses");
            if mode == Mode::Restricted {
                entry.check_restricted().expect("restricted mode admits it");
            }
            entry
        })
        .collect();
    Rules::new(mode, allow, allow_http)
}

/// Restricted rules with `allow_http`.
pub fn http_rules<S: AsRef<str>>(allow: &[S]) -> Rules {
    rules(Mode::Restricted, allow, true)
}

/// A `GET` of `url` with a 10 s timeout.
pub fn get(f: &Fetcher, url: &str) -> Result<FetchResponse, FetchError> {
    f.fetch(url, &FetchOptions::new().timeout(Duration::from_secs(10)))
}

/// An address of this machine outside loopback that restricted mode
/// admits: the source address of the route towards a public address (a
/// UDP `connect` sends nothing). `None` when there is no such route.
pub fn local_public_v4() -> Option<IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9")
        .or_else(|_| s.connect("8.8.8.8:53"))
        .ok()?;
    let ip = s.local_addr().ok()?.ip();
    (sandgate_netguard::classify(ip) == sandgate_netguard::AddrClass::Public).then_some(ip)
}
