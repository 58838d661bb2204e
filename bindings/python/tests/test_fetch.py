"""Fetcher against a loopback HTTP server (http.server in a thread on
127.0.0.1, port 0): a granted fetch, an ungranted port refused with hops,
the metadata address refused (directly and as a redirect), the net_ops
budget, malformed arguments."""

from __future__ import annotations

import pickle
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import sandgate
from sandgate import Fetcher, FetchResponse, Hop, Policy

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")
T = 10_000  # timeout_ms of every fetch that reaches the server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a) -> None:  # quiet
        pass

    def _answer(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self.server.seen.append((self.command, self.path, dict(self.headers), body))  # type: ignore[attr-defined]
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/binary":
            data = b"\xff\x00\xfe"
            ctype = "application/octet-stream"
        else:
            data = f"{self.command} {self.path} ".encode() + body
            ctype = "text/plain"
        self.send_response(201)
        self.send_header("Content-Type", ctype)
        self.send_header("X-Test", "a")
        self.send_header("X-Test", "b")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _answer


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.seen = []  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    # A proxy in the environment makes restricted mode refuse every fetch.
    for k in PROXY_VARIABLES:
        monkeypatch.delenv(k, raising=False)


def _policy(tmp_path: Path, text: str) -> Policy:
    p = tmp_path.resolve() / "policy.toml"
    p.write_text(text)
    return Policy.load(p)


def _granted(port: int, extra: str = "") -> str:
    return f'[net]\nallow = ["127.0.0.1:{port}"]\nallow_http = true\n{extra}'


def test_granted_fetch(tmp_path, server):
    port = server.server_address[1]
    with _policy(tmp_path, _granted(port)) as policy, Fetcher(policy) as f:
        r = f.fetch(f"http://127.0.0.1:{port}/hello", timeout_ms=T)
        assert isinstance(r, FetchResponse)
        assert r.status == 201
        assert r.body == b"GET /hello "
        assert r.text == "GET /hello "
        assert r.truncated is False
        assert r.headers["content-type"] == "text/plain"
        assert r.headers["x-test"] == "a, b"
        assert len(r.hops) == 1
        hop = r.hops[0]
        assert isinstance(hop, Hop)
        assert hop.allowed and hop.status == 201 and hop.method == "GET"
        assert hop.addresses == ["127.0.0.1"]
        assert hop.rule == f"127.0.0.1:{port}"

        r = f.fetch(
            f"http://127.0.0.1:{port}/post", method="POST", headers={"X-Agent": "sg"}, body="payload", timeout_ms=T
        )
        assert r.text == "POST /post payload"
        method, path, headers, body = server.seen[-1]
        assert (method, path, body) == ("POST", "/post", b"payload")
        assert {k.lower(): v for k, v in headers.items()}["x-agent"] == "sg"

        r = f.fetch(f"http://127.0.0.1:{port}/bin", method="PUT", body=b"\x01\x02\xff", timeout_ms=T)
        assert server.seen[-1][3] == b"\x01\x02\xff"
        assert r.body == b"PUT /bin \x01\x02\xff"

        assert f.fetch(f"http://127.0.0.1:{port}/binary", timeout_ms=T).body == b"\xff\x00\xfe"

        r = f.fetch(f"http://127.0.0.1:{port}/long", max_bytes=3, timeout_ms=T)
        assert r.body == b"GET" and r.truncated is True


def test_ungranted_port_is_refused_with_hops(tmp_path, server):
    port = server.server_address[1]
    other = 1 if port == 65535 else port + 1
    before = len(server.seen)
    with _policy(tmp_path, _granted(port)) as policy, Fetcher(policy) as f:
        with pytest.raises(sandgate.NetDeniedError) as ei:
            f.fetch(f"http://127.0.0.1:{other}/")
    e = ei.value
    assert e.code == "E_NET_DENIED"
    assert isinstance(e, PermissionError)
    assert len(e.hops) == 1
    assert e.hops[0].allowed is False and e.hops[0].status is None
    assert e.hops[0].url == f"http://127.0.0.1:{other}/"
    assert isinstance(e.hops[0].reason, str) and e.hops[0].reason
    assert len(server.seen) == before
    # hops and rule survive pickling
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is type(e) and e2.hops == e.hops and e2.rule == e.rule


def test_metadata_address_refused(tmp_path, server):
    port = server.server_address[1]
    with _policy(tmp_path, _granted(port)) as policy, Fetcher(policy) as f:
        for url in ("http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/"):
            with pytest.raises(sandgate.NetDeniedError) as ei:
                f.fetch(url)
            assert isinstance(ei.value.hops, list)
        # ... and as a redirect from a granted server: the second hop is refused.
        with pytest.raises(sandgate.NetDeniedError) as ei:
            f.fetch(f"http://127.0.0.1:{port}/redirect", timeout_ms=T)
        hops = ei.value.hops
        assert [h.allowed for h in hops] == [True, False]
        assert hops[0].status == 302
        assert hops[1].url == "http://169.254.169.254/latest/meta-data/"


def test_net_ops_budget(tmp_path, server):
    port = server.server_address[1]
    with _policy(tmp_path, _granted(port, "\n[budgets]\nnet_ops = 2\n")) as policy, Fetcher(policy) as f:
        assert f.fetch(f"http://127.0.0.1:{port}/1", timeout_ms=T).status == 201
        with pytest.raises(sandgate.NetDeniedError):
            f.fetch("http://169.254.169.254/")  # refused fetches spend the budget too
        with pytest.raises(sandgate.DeniedError) as ei:
            f.fetch(f"http://127.0.0.1:{port}/3", timeout_ms=T)
        assert ei.value.code == "E_DENIED"
        assert ei.value.hops == [] and ei.value.rule is None


def test_malformed_requests(tmp_path, server):
    port = server.server_address[1]
    url = f"http://127.0.0.1:{port}/"
    with _policy(tmp_path, _granted(port)) as policy, Fetcher(policy) as f:
        for kw in (
            {"timeout_ms": 0},
            {"max_bytes": -1},
            {"headers": {"Host": "internal"}},
            {"headers": {"Connection": "close"}},
            {"method": "CONNECT"},
        ):
            with pytest.raises(sandgate.RequestError) as ei:
                f.fetch(url, **kw)
            assert ei.value.code == "E_REQUEST", kw
            assert ei.value.hops == []
        with pytest.raises(sandgate.RequestError):
            f.fetch("https://user:pw@127.0.0.1/")
        with pytest.raises(TypeError):
            f.fetch(url, body=3)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            f.fetch(url, headers={"a": 1})  # type: ignore[dict-item]
        with pytest.raises(TypeError):
            f.fetch(url, timeout_ms=True)


def test_close_and_context_manager(tmp_path, server):
    port = server.server_address[1]
    with _policy(tmp_path, _granted(port)) as policy:
        f = Fetcher(policy)
    # The fetcher outlives the policy handle.
    assert f.fetch(f"http://127.0.0.1:{port}/after", timeout_ms=T).status == 201
    assert "closed" not in repr(f)
    f.close()
    f.close()
    assert f.closed and "closed" in repr(f)
    with pytest.raises(sandgate.ClosedError):
        f.fetch(f"http://127.0.0.1:{port}/")


def test_concurrent_fetches(tmp_path, server):
    port = server.server_address[1]
    with _policy(tmp_path, _granted(port)) as policy, Fetcher(policy) as f:
        results: list = []

        def go(i: int) -> None:
            results.append(f.fetch(f"http://127.0.0.1:{port}/t{i}", timeout_ms=T).text)

        ts = [threading.Thread(target=go, args=(i,)) for i in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        assert sorted(results) == sorted(f"GET /t{i} " for i in range(6))


def test_fetch_audit_records_every_fetch_without_its_secrets(tmp_path, server):
    """The fetcher's audit callback: one event per fetch, made or refused
    (a URL that does not parse, credentials in the URL, a host not granted,
    a redirect refused, the budget spent), by the origins of its hops;
    the string SECRET, in the URL's query, user or a header, never reaches it.
    The callback may call back into its fetcher, close() included."""
    port = server.server_address[1]
    here = f"http://127.0.0.1:{port}"
    events: list[sandgate.AuditEvent] = []
    holder: dict = {}

    def audit(e: sandgate.AuditEvent) -> None:
        events.append(e)
        if e.outcome == "E_DENIED":  # the last: close from the callback
            holder["f"].close()

    secret = {"Authorization": "Bearer SECRET1"}
    with _policy(tmp_path, _granted(port, "\n[budgets]\nnet_ops = 5\n")) as policy:
        f = Fetcher(policy, audit=audit)
        holder["f"] = f
        assert f.fetch(f"{here}/p/SECRET2?token=SECRET3", headers=secret, timeout_ms=T).status == 201
        for url, err in (
            ("not a url SECRET4", sandgate.RequestError),
            (f"http://me:SECRET5@127.0.0.1:{port}/", sandgate.RequestError),
            ("http://not-granted.invalid/?token=SECRET6", sandgate.NetDeniedError),
            (f"{here}/redirect", sandgate.NetDeniedError),
            (f"{here}/?token=SECRET7", sandgate.DeniedError),
        ):
            with pytest.raises(err):
                f.fetch(url, headers=secret, timeout_ms=T)
        assert f.closed
        with pytest.raises(sandgate.ClosedError):
            f.fetch(here)
    assert f.audit_errors == []
    assert "SECRET" not in repr(events)
    assert [(e.op, e.path, e.size, e.outcome) for e in events] == [
        ("fetch", here, len(f"GET /p/SECRET2?token=SECRET3 "), "OK"),
        ("fetch", "", None, "E_REQUEST"),
        ("fetch", "", None, "E_REQUEST"),
        ("fetch", "http://not-granted.invalid:80", None, "E_NET_DENIED"),
        ("fetch", f"{here} -> http://169.254.169.254:80", None, "E_NET_DENIED"),
        ("fetch", here, None, "E_DENIED"),
    ]


def test_a_fetch_held_by_a_silent_server_ends_when_its_abort_signal_is_triggered(tmp_path):
    # A listener that takes connections into its backlog and never answers:
    # only the signal ends the fetch before its 30 s timeout.
    import socket
    import time

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(8)
        port = held.getsockname()[1]
        with _policy(tmp_path, _granted(port, "\n[budgets]\nnet_ops = 2\n")) as policy, Fetcher(
            policy
        ) as f, sandgate.AbortSignal() as sig:
            threading.Timer(0.3, sig.abort).start()
            t0 = time.monotonic()
            with pytest.raises(sandgate.AbortedError) as ei:
                f.fetch(f"http://127.0.0.1:{port}/held", timeout_ms=30_000, abort=sig)
            # Not a speed claim: a fetch the signal did not end takes 30 s.
            assert time.monotonic() - t0 < 10
            assert ei.value.code == "E_ABORTED"
            # Triggered already: refused before it connects, spending no
            # budget (one unit is left, and it still pays for a fetch).
            with pytest.raises(sandgate.AbortedError):
                f.fetch(f"http://127.0.0.1:{port}/again", timeout_ms=T, abort=sig)
            with pytest.raises(sandgate.TimedOutError):
                f.fetch(f"http://127.0.0.1:{port}/last", timeout_ms=200)
            with pytest.raises(sandgate.DeniedError):
                f.fetch(f"http://127.0.0.1:{port}/spent", timeout_ms=200)
            with pytest.raises(TypeError) as te:
                f.fetch(f"http://127.0.0.1:{port}/", abort="soon")  # type: ignore[arg-type]
            assert "abort" in str(te.value)


def test_wire23_a_header_given_in_two_spellings_is_refused(tmp_path, server):
    # HTTP names are one header whatever their case: `X-Dup` and `x-dup`
    # would send the header twice, and which value counts would be the
    # server's choice. Refused before anything is sent, naming it.
    port = server.server_address[1]
    url = f"http://127.0.0.1:{port}/dup"
    with _policy(tmp_path, _granted(port)) as policy, Fetcher(policy) as f:
        seen = len(server.seen)
        with pytest.raises(sandgate.RequestError) as ei:
            f.fetch(url, headers={"X-Dup": "1", "x-dup": "2"}, timeout_ms=T)
        assert ei.value.code == "E_REQUEST"
        assert "x-dup" in str(ei.value)
        assert ei.value.hops == []
        assert len(server.seen) == seen
        # Two distinct headers are sent, each once.
        f.fetch(url, headers={"X-Dup": "1", "X-Other": "2"}, timeout_ms=T)
        sent = {k.lower(): v for k, v in server.seen[-1][2].items()}
        assert (sent["x-dup"], sent["x-other"]) == ("1", "2")
