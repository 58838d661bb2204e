//! How a destination may be spelled to the confined fetch, against a real
//! loopback server: a URL (or a redirect's `Location`) that a WHATWG
//! parser, `inet_aton` or the HTTP client could read as 127.0.0.1 or as
//! another host than the plain one is refused before anything is resolved
//! or dialled, and a URL that is admitted is sent to the host and port it
//! was judged as (the `Host` the server sees says so).
//!
//! The grants are the loopback literal `127.0.0.1:PORT` (the server) and
//! the name `granted.example:PORT`, answered by a resolver that counts its
//! calls and answers 127.0.0.1 (which a name never reaches).

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use sandgate_fetch::{ErrorCode, FetchOptions, Fetcher};
use sandgate_netguard::{Mode, NetEntry, Rules};

/// A loopback server: counts connections, keeps each request head, and
/// answers `GET /go/N` with a redirect to `locations[N]`, anything else
/// with a 200.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

fn serve(locations: Arc<Mutex<Vec<String>>>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let (h, l) = (Arc::clone(&hits), Arc::clone(&heads));
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            h.fetch_add(1, Ordering::SeqCst);
            let (l, locations) = (Arc::clone(&l), Arc::clone(&locations));
            thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let reply = match head
                    .strip_prefix("GET /go/")
                    .and_then(|r| r.split(' ').next())
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    Some(n) => {
                        let location = locations.lock().unwrap()[n].clone();
                        let mut r = b"HTTP/1.1 302 Found\r\nLocation: ".to_vec();
                        r.extend_from_slice(location.as_bytes());
                        r.extend_from_slice(b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        r
                    }
                    None => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                        .to_vec(),
                };
                l.lock().unwrap().push(head);
                let _ = stream.write_all(&reply);
            });
        }
    });
    Server { port, hits, heads }
}

fn fetcher(port: u16, allow_http: bool) -> (Fetcher, Arc<Mutex<Vec<String>>>) {
    let allow = [
        format!("127.0.0.1:{port}"),
        format!("granted.example:{port}"),
    ]
    .iter()
    .map(|a| {
        let e = NetEntry::parse(a).unwrap();
        e.check_restricted().unwrap();
        e
    })
    .collect();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let a = Arc::clone(&asked);
    let f = Fetcher::builder(Rules::new(Mode::Restricted, allow, allow_http))
        .resolver(
            move |host: &str, _: u16, _: Duration| -> std::io::Result<Vec<IpAddr>> {
                a.lock().unwrap().push(host.to_owned());
                Ok(vec!["127.0.0.1".parse().unwrap()])
            },
        )
        .build();
    (f, asked)
}

fn opts() -> FetchOptions {
    FetchOptions::new().timeout(Duration::from_secs(10))
}

/// URLs that spell the granted literal or name another way, carry a user,
/// a control character, a character outside ASCII, a port that is not
/// the granted one or none: each is refused (`E_REQUEST` for a URL that
/// does not parse, `E_NET_DENIED` for one the rules refuse), with no
/// lookup and no connection. The plain spelling, the scheme in upper
/// case and an `@` in the path reach the server as `127.0.0.1:PORT`.
#[test]
fn spell24_urls_spelled_another_way_reach_nothing() {
    let s = serve(Arc::new(Mutex::new(Vec::new())));
    let p = s.port;
    let (f, asked) = fetcher(p, true);
    let mut urls = vec![
        format!("http://evil@127.0.0.1:{p}/"),
        format!("http://@127.0.0.1:{p}/"),
        format!("http://a%40b@127.0.0.1:{p}/"),
        format!("http://a%40b@granted.example:{p}/"),
        format!("http://127.0.0.1:{p}@evil.example/"),
        format!("http://granted.example:{p}@127.0.0.1:{p}/"),
        format!("http://evil.example\\@127.0.0.1:{p}/"),
        format!("http:\\\\127.0.0.1:{p}/"),
        format!("http:/\\127.0.0.1:{p}/"),
        format!("http:127.0.0.1:{p}/"),
        format!("http:/127.0.0.1:{p}/"),
        format!("http:///127.0.0.1:{p}/"),
        format!("http://%31%32%37.0.0.1:{p}/"),
        format!("http://127.0.0.%31:{p}/"),
        format!("http://granted%2eexample:{p}/"),
        format!("http://１２７．０．０．１:{p}/"),
        format!("http://127．0．0．1:{p}/"),
        format!("http://ｇｒａｎｔｅｄ.example:{p}/"),
        format!("http://xn--5g7caagbcfc9b:{p}/"),
        format!("http://2130706433:{p}/"),
        format!("http://0x7f.1:{p}/"),
        format!("http://0x7f000001:{p}/"),
        format!("http://0177.0.0.1:{p}/"),
        format!("http://127.1:{p}/"),
        format!("http://[::ffff:127.0.0.1]:{p}/"),
        format!("http://[::ffff:7f00:1]:{p}/"),
        format!("http://[0:0:0:0:0:ffff:127.0.0.1]:{p}/"),
        format!("http://[::127.0.0.1]:{p}/"),
        format!("http://[fe80::1%25lo]:{p}/"),
        format!("http://[127.0.0.1]:{p}/"),
        format!("http://127.0.0.1.:{p}/"),
        format!("http://LOCALHOST.:{p}/"),
        format!("http://localhost:{p}/"),
        format!("http://foo.localhost:{p}/"),
        format!("http://granted.example.:{p}/"),
        format!("http://GRANTED.EXAMPLE.:{p}/"),
        "http://127.0.0.1:0/".to_owned(),
        "http://127.0.0.1:65536/".to_owned(),
        format!("http://127.0.0.1:{}/", u32::from(p) + 65536),
        "http://127.0.0.1:/".to_owned(),
        format!("http://127.0.0.1:+{p}/"),
        format!("http://127.0.0.1:0{p}/"),
        format!("http://127.0.0.1:{p}:{p}/"),
        format!("http://127.0.0.1:７{p}/"),
        "http://127.0.0.1/".to_owned(),
    ];
    for c in ['\t', '\r', '\n', '\0'] {
        urls.push(format!("http://127.0.0.{c}1:{p}/"));
        urls.push(format!("http://127.0.0.1{c}:{p}/"));
        urls.push(format!("http://127.0.0.1:{p}{c}/"));
        urls.push(format!("http://127.0.0.1:{p}/{c}"));
        urls.push(format!("http://granted.exam{c}ple:{p}/"));
    }
    for url in &urls {
        let e = f.fetch(url, &opts()).unwrap_err();
        assert!(
            matches!(e.code(), ErrorCode::NetDenied | ErrorCode::Request),
            "{}: {e}",
            url.escape_debug()
        );
    }
    assert_eq!(s.hits.load(Ordering::SeqCst), 0);
    assert!(
        asked.lock().unwrap().is_empty(),
        "{:?}",
        asked.lock().unwrap()
    );
    // The granted name in upper case is that name: looked up as such,
    // then refused for the loopback address it resolved to.
    let e = f
        .fetch(&format!("http://GRANTED.Example:{p}/"), &opts())
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NetDenied, "{e}");
    assert_eq!(*asked.lock().unwrap(), vec!["granted.example".to_owned()]);
    assert_eq!(s.hits.load(Ordering::SeqCst), 0);
    // Admitted spellings go where they were judged to go.
    for (url, line) in [
        (format!("HTTP://127.0.0.1:{p}/x"), "GET /x HTTP/1.1"),
        (
            format!("http://127.0.0.1:{p}/@evil.example"),
            "GET /@evil.example HTTP/1.1",
        ),
        (
            format!("http://127.0.0.1:{p}?@evil.example"),
            "GET /?@evil.example HTTP/1.1",
        ),
        (
            format!("http://127.0.0.1:{p}#@evil.example/"),
            "GET / HTTP/1.1",
        ),
    ] {
        let r = f.fetch(&url, &opts()).unwrap();
        assert_eq!(r.status, 200, "{url}");
        let head = s.heads.lock().unwrap().last().cloned().unwrap();
        assert!(head.starts_with(&format!("{line}\r\n")), "{url}: {head}");
        let hosts: Vec<&str> = head
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("host:"))
            .collect();
        assert_eq!(hosts, vec![format!("host: 127.0.0.1:{p}")], "{url}: {head}");
    }
    // Without allow_http, `HTTP://` is plain http and refused.
    let (strict, _) = fetcher(p, false);
    let e = strict
        .fetch(&format!("HTTP://127.0.0.1:{p}/"), &opts())
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NetDenied, "{e}");
    assert!(e.message().contains("plain text"), "{e}");
}

/// A redirect whose `Location` spells a host any of the ways above (or
/// holds a tab, which a header value may) is refused at that hop: only
/// the first hop is sent, the next is neither looked up nor dialled.
#[test]
fn spell24_redirect_locations_spelled_another_way_are_refused_at_the_hop() {
    let locations = Arc::new(Mutex::new(Vec::new()));
    let s = serve(Arc::clone(&locations));
    let p = s.port;
    let (f, asked) = fetcher(p, true);
    let spelled: Vec<String> = [
        "//127.0.0.1:{p}/landed",
        "//0x7f.1:{p}/",
        "///127.0.0.1:{p}/",
        "HTTP://[::ffff:127.0.0.1]:{p}/",
        "http://[::127.0.0.1]:{p}/",
        "http://evil@127.0.0.1:{p}/",
        "http://granted.example:{p}@127.0.0.1:{p}/",
        "http://a%40b@granted.example:{p}/",
        "http:\\\\127.0.0.1:{p}/",
        "\\\\127.0.0.1:{p}/",
        "/\\127.0.0.1:{p}/",
        "http://127.0.0.1\t:{p}/",
        "http://127.0.0.\t1:{p}/",
        "//localhost:{p}/",
        "//foo.localhost:{p}/",
        "//LOCALHOST.:{p}/",
        "//granted.example.:{p}/",
        "//%31%32%37.0.0.1:{p}/",
        "//xn--5g7caagbcfc9b:{p}/",
        "http://127.0.0.1:0/",
        "http://127.0.0.1:65536/",
        "http://127.0.0.1:/",
        "http:127.0.0.1:{p}/",
        "ftp://127.0.0.1:{p}/",
    ]
    .iter()
    .map(|l| l.replace("{p}", &p.to_string()))
    .collect();
    let mut raw: Vec<String> = spelled.clone();
    // Bytes outside ASCII in the header itself.
    raw.push(format!("http://１２７．０．０．１:{p}/"));
    *locations.lock().unwrap() = raw.clone();
    for (n, location) in raw.iter().enumerate() {
        let before = s.hits.load(Ordering::SeqCst);
        let e = f
            .fetch(&format!("http://127.0.0.1:{p}/go/{n}"), &opts())
            .unwrap_err();
        assert_eq!(
            e.code(),
            ErrorCode::NetDenied,
            "{}: {e}",
            location.escape_debug()
        );
        let hops = e.hops();
        assert!(hops[0].allowed && hops[0].status == Some(302), "{hops:?}");
        assert!(
            hops.iter()
                .skip(1)
                .all(|h| !h.allowed && h.addresses.is_empty()),
            "{}: {hops:?}",
            location.escape_debug()
        );
        assert_eq!(
            s.hits.load(Ordering::SeqCst),
            before + 1,
            "{}: only the first hop was sent",
            location.escape_debug()
        );
    }
    assert!(
        asked.lock().unwrap().is_empty(),
        "{:?}",
        asked.lock().unwrap()
    );
}
