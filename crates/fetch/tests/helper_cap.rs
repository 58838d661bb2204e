//! What cancelled fetches leave behind: the helper threads that finish a
//! connect or a name query nobody waits for any more are bounded, process
//! wide.
//!
//! A test binary of its own, since the bound is the process's: a test
//! holding every place would refuse the cancellable fetches of tests
//! running beside it.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sandgate_fetch::{CancelFlag, ErrorCode, FetchError, FetchOptions, Fetcher};
use sandgate_netguard::{Mode, NetEntry, Rules};

mod support;
use support::full_listener;

/// The bound, as the documentation states it.
const BOUND: usize = 128;

#[test]
fn the_bound_is_the_documented_one() {
    assert_eq!(sandgate_fetch::MAX_HELPER_THREADS, BOUND);
}

fn rules(allow: &[String]) -> Rules {
    let allow = allow
        .iter()
        .map(|raw| NetEntry::parse(raw).expect("the test entry parses"))
        .collect();
    Rules::new(Mode::Restricted, allow, true)
}

/// This process's threads named for the fetch's helpers (a thread's name
/// is cut to 15 bytes: `sandgate-fetch-` covers the connect and the name
/// query).
fn helper_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("sandgate-fetch"))
        .count()
}

/// A loopback server answering `hi` to every request.
fn hi_server() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0];
                while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
                );
            });
        }
    });
    port
}

/// 300 fetches of `url` that hang (in a connect or a name query) together,
/// as the cancelled calls of a long-lived server pile up, all cancelled
/// at once; answers how many were refused a helper.
fn flood(f: &Arc<Fetcher>, url: &str) -> usize {
    let flag = CancelFlag::new();
    let fetches: Vec<_> = (0..300)
        .map(|_| {
            let (f, url, flag) = (f.clone(), url.to_owned(), flag.clone());
            thread::spawn(move || {
                f.fetch(
                    &url,
                    &FetchOptions::new()
                        .timeout(Duration::from_secs(4))
                        .cancel(flag),
                )
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(1000));
    flag.cancel();
    let mut refused = 0;
    for t in fetches {
        let e = t.join().unwrap().expect_err("nothing answers");
        match e.code() {
            ErrorCode::Aborted => {}
            _ if is_at_the_cap(&e) => refused += 1,
            _ => panic!("{e}"),
        }
    }
    refused
}

fn is_at_the_cap(e: &FetchError) -> bool {
    e.code() == ErrorCode::Io && e.message().contains("helper threads")
}

/// Waits (at most 10 s) for every helper to end.
fn helpers_ended() {
    let until = Instant::now() + Duration::from_secs(10);
    while helper_threads() > 0 && Instant::now() < until {
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(helper_threads(), 0, "helpers outlived their fetch's time");
}

#[test]
fn fetch7_cancelled_connects_and_name_queries_leave_a_bounded_number_of_helper_threads() {
    let (listener, _held) = full_listener();
    let full = listener.local_addr().unwrap().port();
    let hi = hi_server();
    let to_hi = format!("http://127.0.0.1:{hi}/");
    let hanging = |allow: String| {
        Arc::new(
            Fetcher::builder(rules(&[allow, format!("127.0.0.1:{hi}")]))
                .resolver(
                    |_: &str, _: u16, t: Duration| -> std::io::Result<Vec<IpAddr>> {
                        thread::sleep(t.min(Duration::from_secs(3)));
                        Ok(vec!["10.0.0.1".parse().unwrap()])
                    },
                )
                .build(),
        )
    };
    for (what, allow, url) in [
        (
            "connecting",
            format!("127.0.0.1:{full}"),
            format!("http://127.0.0.1:{full}/"),
        ),
        (
            "resolving",
            "api.example.com".to_owned(),
            "http://api.example.com/".to_owned(),
        ),
    ] {
        let f = hanging(allow);
        let refused = flood(&f, &url);
        // Every fetch has answered; what it left behind is bounded.
        let left = helper_threads();
        assert!(
            left <= BOUND,
            "{left} helper threads are still {what} for cancelled fetches"
        );
        assert!(refused > 0, "no fetch was refused a helper while {what}");
        // At the cap a further cancellable fetch is told why at once ...
        let e = f
            .fetch(&to_hi, &FetchOptions::new().cancel(CancelFlag::new()))
            .unwrap_err();
        assert!(is_at_the_cap(&e), "{e}");
        // ... a fetch without a flag needs no helper ...
        assert_eq!(f.fetch(&to_hi, &FetchOptions::new()).unwrap().body, b"hi");
        // ... and once the helpers end (within their fetch's 4 s), the cap
        // no longer stands in the way.
        helpers_ended();
        let r = f.fetch(&to_hi, &FetchOptions::new().cancel(CancelFlag::new()));
        assert_eq!(r.unwrap().body, b"hi");
    }
}
