//! Helpers shared by the fetch's test suites.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

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
