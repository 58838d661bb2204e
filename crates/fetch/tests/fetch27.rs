//! The confined fetch against hostile servers and hostile URLs, on
//! loopback (and this machine's own address outside it) only: what a
//! refusal quotes, and what a server can make the client do.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use sandgate_fetch::{ErrorCode, FetchError, FetchOptions, FetchResponse, Fetcher};
use sandgate_netguard::{Mode, NetEntry, Rules, MAX_URL_BYTES};

// ---------------------------------------------------------------------------
// A scripted server: reads each request's head, then runs its script on
// the connection.

type Script = dyn Fn(&str, &mut TcpStream) + Send + Sync;

struct Server {
    port: u16,
    /// Request lines (`GET /x HTTP/1.1`) received, in order.
    requests: Arc<Mutex<Vec<String>>>,
}

fn serve_at(ip: IpAddr, script: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static) -> Server {
    let listener = TcpListener::bind((ip, 0)).expect("bind a local port");
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let script: Arc<Script> = Arc::new(script);
    let log = requests.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (script, log) = (script.clone(), log.clone());
            thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).unwrap_or(0) == 0 {
                    return;
                }
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let first = first.trim_end().to_owned();
                log.lock().unwrap().push(first.clone());
                script(&first, &mut stream);
            });
        }
    });
    Server { port, requests }
}

fn serve(script: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static) -> Server {
    serve_at("127.0.0.1".parse().unwrap(), script)
}

fn reply(bytes: impl AsRef<[u8]>) -> impl Fn(&str, &mut TcpStream) + Send + Sync + 'static {
    let bytes = bytes.as_ref().to_vec();
    move |_, s| {
        let _ = s.write_all(&bytes);
    }
}

/// Restricted rules with `allow_http`, the entries as a policy grants them.
fn rules<S: AsRef<str>>(allow: &[S]) -> Rules {
    let allow = allow
        .iter()
        .map(|raw| {
            let e = NetEntry::parse(raw.as_ref()).expect("the test entry parses");
            e.check_restricted().expect("restricted mode admits it");
            e
        })
        .collect();
    Rules::new(Mode::Restricted, allow, true)
}

fn fetch(f: &Fetcher, url: &str) -> Result<FetchResponse, FetchError> {
    f.fetch(url, &FetchOptions::new().timeout(Duration::from_secs(10)))
}

// ---------------------------------------------------------------------------
// What a refusal quotes

/// The longest message a refusal of a long URL may have: the cut URL
/// (100 bytes and `…`), a reason naming a host of at most 253 bytes or a
/// cut one, and the words around them.
const SHORT: usize = 1024;

fn assert_short(e: &FetchError, says: &str) {
    let m = e.message();
    assert!(
        m.len() < SHORT,
        "a refusal of {} bytes: {}…",
        m.len(),
        &m[..m.floor_char_boundary_compat(400)]
    );
    assert!(m.contains(says), "{says:?} not in {m}");
    for hop in e.hops() {
        assert!(
            hop.reason.len() < SHORT,
            "a hop's reason of {} bytes: {}…",
            hop.reason.len(),
            &hop.reason[..400]
        );
    }
}

trait FloorCompat {
    fn floor_char_boundary_compat(&self, at: usize) -> usize;
}

impl FloorCompat for str {
    fn floor_char_boundary_compat(&self, at: usize) -> usize {
        let mut at = at.min(self.len());
        while !self.is_char_boundary(at) {
            at -= 1;
        }
        at
    }
}

/// A URL under the 32 KiB cap but long (a path, a host, a scheme of
/// 30,000 bytes) is quoted by its first 100 bytes and `…` when it is
/// refused, as the first URL past the cap is: on the first hop, on a
/// redirect hop, and as the URL a refused `Location` came from. Before,
/// the hop's URL went into the message whole (and a long host or scheme
/// into its reason), a 30 KB message for a model to read.
#[test]
fn fetch27_a_long_url_refused_at_any_hop_is_quoted_by_its_start() {
    let long = "a".repeat(30_000);
    const { assert!(30_000 < MAX_URL_BYTES) };
    let s = serve(|_, _| ());
    let f = Fetcher::builder(rules(&[format!("127.0.0.1:{}", s.port)])).build();

    // The first hop: an ungranted host, an invalid host, a scheme.
    for (url, says) in [
        (
            format!("http://203.0.113.9/{long}"),
            "`203.0.113.9` port 80 is not in net.allow",
        ),
        (
            format!("http://{long}.example/"),
            "is neither a valid DNS name nor an IP literal",
        ),
        (
            format!("{long}://203.0.113.9/"),
            "is not admitted (https, wss; http and ws with net.allow_http)",
        ),
    ] {
        let e = fetch(&f, &url).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::NetDenied, "{}", &e.message()[..200]);
        assert_short(&e, says);
        assert!(e.message().contains('…'), "{}", e.message());
        // The hop itself keeps the URL whole: it is data, not a message.
        assert_eq!(e.hops()[0].url.len(), url.len());
    }
    assert!(s.requests.lock().unwrap().is_empty());

    // A redirect hop: a Location to an ungranted host, to an invalid host,
    // and an unusable Location from a long URL.
    for (location, path, says) in [
        (
            format!("http://203.0.113.9/{long}"),
            "/go".to_owned(),
            "the redirect to http://203.0.113.9/aaaa",
        ),
        (
            format!("http://{long}.example/"),
            "/go".to_owned(),
            "is neither a valid DNS name nor an IP literal",
        ),
        (
            "http://u:p@203.0.113.9/".to_owned(),
            format!("/{long}"),
            "its Location is refused: credentials",
        ),
    ] {
        let head = format!(
            "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: \
             close\r\n\r\n"
        );
        let s = serve(reply(head));
        let f = Fetcher::builder(rules(&[format!("127.0.0.1:{}", s.port)])).build();
        let e = fetch(&f, &format!("http://127.0.0.1:{}{path}", s.port)).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::NetDenied, "{}", &e.message()[..200]);
        assert_short(&e, says);
        assert_eq!(s.requests.lock().unwrap().len(), 1);
    }
}
