"""A careless or hostile caller of the Python API: signals during long
calls, fork, threads, closed objects, parents collected under their
children, callbacks that raise, paths and numbers of every wrong shape,
huge answers, and many calls in a row. Every case must end in the
binding's own exception naming what was refused (or the right answer),
never a crash, a hang, a leak or a wrong answer. The cases that need a
process of their own (signals, fork) run in a child under a timeout."""

from __future__ import annotations

import ctypes
import gc
import mmap
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import sandgate
from sandgate import (
    AbortSignal,
    ClosedError,
    Executor,
    NotFoundError,
    Policy,
    RequestError,
    RequestTypeError,
    Root,
    Sandbox,
    SandgateError,
    _ffi,
)

SRC = str(Path(__file__).resolve().parents[1] / "src")

POLICY = (
    '[fs]\nread_roots = ["ws"]\nwrite_root = "ws"\nallow_overwrite = true\n'
    '[exec]\nenabled = true\nshell = "/bin/sh"\ntimeout_ms = 60000\n'
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    (d / "a.txt").write_text("hello\nworld\n")
    return d


def _policy(ws: Path) -> Policy:
    return Policy.parse(POLICY, str(ws.parent))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_mb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20


PRELUDE = """
import os, signal, sys, threading, time, sandgate
ws = {ws!r}
policy = sandgate.Policy.parse({policy!r}, os.path.dirname(ws))
def alive(mark):
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{{d}}/cmdline", "rb") as f:
                    n += mark.encode() in f.read()
            except OSError:
                pass
    return n
"""


def _child(ws: Path, body: str, timeout: int = 90) -> str:
    code = PRELUDE.format(ws=str(ws), policy=POLICY) + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=SRC)
    try:
        p = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"did not end within {timeout} s: {e.stdout!r} {e.stderr!r}") from None
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-3000:])
    return p.stdout


# ---------------------------------------------------------------------------
# Signals during long calls


def test_abuse25_ctrl_c_during_exec_ends_the_call_and_its_process_tree(ws):
    # Before, the SIGINT waited for the command: KeyboardInterrupt came
    # after the whole 30 s sleep (or the policy's timeout, up to 24 h).
    out = _child(
        ws,
        """
        ex = sandgate.Executor(policy)
        mark = "30." + "2512"  # not in this program's own command line
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            ex.exec("sleep " + mark + "; echo never")
            print("returned")
        except KeyboardInterrupt:
            print("interrupted", time.monotonic() - t0 < 6)
        print("alive", alive(mark))
        print("again", ex.exec("echo again").stdout)
        print("threads", threading.active_count() <= 2)
        """,
    )
    assert out.split("\n")[:4] == ["interrupted True", "alive 0", "again b'again\\n'", "threads True"], out


def test_abuse25_a_raising_signal_handler_ends_a_call_given_a_signal_and_triggers_it(ws):
    # With an AbortSignal given, the interrupt triggers that signal (the
    # call has no other to end it with); a raising SIGALRM handler is
    # treated as Ctrl-C is.
    out = _child(
        ws,
        """
        ex = sandgate.Executor(policy)
        ab = sandgate.AbortSignal()
        mark = "30." + "2513"
        class Alarm(Exception):
            pass
        def on_alarm(*_):
            raise Alarm()
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        t0 = time.monotonic()
        try:
            ex.exec("sleep " + mark, abort=ab)
            print("returned")
        except Alarm:
            print("alarm", time.monotonic() - t0 < 6)
        print("aborted", ab.aborted, "alive", alive(mark))
        """,
    )
    assert out.split("\n")[:2] == ["alarm True", "aborted True alive 0"], out


def test_abuse25_ctrl_c_during_a_ranged_read_ends_it(ws):
    # A ranged read counts every line of the file: 128 Mi lines take
    # several seconds, far longer than the second before the interrupt.
    chunk = b"x\n" * (32 << 20)
    with open(ws / "huge", "wb") as f:
        for _ in range(4):
            f.write(chunk)
    del chunk
    out = _child(
        ws,
        """
        sb = sandgate.Sandbox(read_roots=[ws], max_read_bytes=2**40)
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            sb.read_lines("huge", 2, 1)
            print("returned", time.monotonic() - t0)
        except KeyboardInterrupt:
            print("interrupted", time.monotonic() - t0 < 6)
        print(sb.read("a.txt"))
        """,
    )
    (ws / "huge").unlink()
    assert out.split("\n")[:2] == ["interrupted True", "b'hello\\nworld\\n'"], out


def test_abuse25_calls_off_the_main_thread_are_not_moved_and_still_answer(ws):
    ex = Executor(_policy(ws))
    seen = []
    ex2 = Executor(_policy(ws), audit=lambda e: seen.append(threading.current_thread().name))
    res = []
    t = threading.Thread(target=lambda: res.append(ex2.exec("echo x")), name="caller")
    t.start()
    t.join()
    assert res[0].stdout == b"x\n" and seen == ["caller"]
    assert ex.exec("echo y").stdout == b"y\n"
    ex.close()
    ex2.close()


# ---------------------------------------------------------------------------
# fork, threads, close from another thread, parents collected


def test_abuse25_fork_after_making_an_executor(ws):
    out = _child(
        ws,
        """
        ex = sandgate.Executor(policy)
        ex.exec("true")
        pid = os.fork()
        if pid == 0:
            try:
                r = ex.exec("echo child")
                os.write(1, b"child " + r.stdout)
            finally:
                os._exit(0)
        t0 = time.monotonic()
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.monotonic() - t0 > 30:
                os.kill(pid, 9)
                print("child hung")
                break
            time.sleep(0.05)
        print("parent", ex.exec("echo parent").stdout)
        """,
    )
    assert "child child\n" in out and "parent b'parent\\n'" in out and "hung" not in out, out


def test_abuse25_many_threads_share_one_sandbox_executor_and_root(ws):
    p = _policy(ws)
    sb, ex, root = Sandbox.from_policy(p), Executor(p), Root(str(ws))
    errs: list = []

    def work(i: int) -> None:
        try:
            for _ in range(15):
                assert sb.read("a.txt") == b"hello\nworld\n"
                assert root.stat("a.txt").size == 12
                assert [m.line for m in sb.grep("world")] == [2]
                assert ex.exec(f"echo {i}").stdout == f"{i}\n".encode()
        except BaseException as e:
            errs.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert errs == []
    for o in (sb, ex, root, p):
        o.close()


def test_abuse25_close_from_another_thread_while_calls_run(ws):
    for _ in range(30):
        sb, root = Sandbox(read_roots=[str(ws)]), Root(str(ws))
        outcomes: list = []

        def work() -> None:
            try:
                while True:
                    sb.read("a.txt")
                    root.stat("a.txt")
                    sb.grep("hello")
            except ClosedError as e:
                outcomes.append(e.code)
            except BaseException as e:
                outcomes.append(e)

        ts = [threading.Thread(target=work) for _ in range(3)]
        [t.start() for t in ts]
        time.sleep(0.005)
        sb.close()
        root.close()
        [t.join() for t in ts]
        assert outcomes == ["E_CLOSED"] * 3


def test_abuse25_parents_collected_under_their_children(ws):
    p = _policy(ws)
    sb, ex, fe = Sandbox.from_policy(p), Executor(p), sandgate.Fetcher(p)
    del p
    gc.collect()
    assert sb.read("a.txt") == b"hello\nworld\n"
    assert ex.exec("echo hi").stdout == b"hi\n"
    with pytest.raises(sandgate.NetDeniedError):
        fe.fetch("https://example.invalid/")
    parent = Root(str(ws))
    (ws / "sub").mkdir()
    (ws / "sub" / "f").write_text("f")
    child = parent.open_root("sub")
    del parent
    gc.collect()
    assert child.stat("f").size == 1
    # An audit callback that is the last holder of its executor.
    events: list = []
    holder: dict = {}
    ex2 = Executor(_policy(ws), audit=lambda e: events.append((e.op, holder["ex"].closed)))
    holder["ex"] = ex2
    assert ex2.exec("true").exit_code == 0
    del ex2
    holder.clear()
    gc.collect()
    assert events == [("exec", False)]
    for o in (sb, ex, fe, child):
        o.close()


def test_abuse25_an_exception_in_an_audit_callback_is_kept_not_raised(ws):
    def boom(_e):
        raise KeyboardInterrupt("from the callback")

    sb = Sandbox(read_roots=[str(ws)], audit=boom)
    assert sb.read("a.txt") == b"hello\nworld\n"
    ex = Executor(_policy(ws), audit=lambda e: 1 / 0)
    assert ex.exec("echo ok").stdout == b"ok\n"
    assert [type(e) for e in sb.audit_errors] == [KeyboardInterrupt]
    assert [type(e) for e in ex.audit_errors] == [ZeroDivisionError]
    sb.close()
    ex.close()


# ---------------------------------------------------------------------------
# Closed objects and context managers


CLOSED_CALLS = {
    "sandbox": [
        lambda o: o.read("a.txt"),
        lambda o: o.read_text("a.txt"),
        lambda o: o.read_lines("a.txt"),
        lambda o: o.list(),
        lambda o: o.stat("a.txt"),
        lambda o: o.exists("a.txt"),
        lambda o: o.glob("*"),
        lambda o: o.grep("x"),
        lambda o: o.write("b", "x"),
        lambda o: o.edit("a.txt", "h", "j"),
        lambda o: o.mkdir("d"),
        lambda o: o.delete("a.txt"),
        lambda o: o.rename("a.txt", "b"),
        lambda o: o.warnings(),
        lambda o: o.host_name("/x"),
    ],
    "executor": [lambda o: o.start(), lambda o: o.dispose(), lambda o: o.exec("true")],
    "root": [
        lambda o: o.open_root("."),
        lambda o: o.name,
        lambda o: o.open_fd("a.txt"),
        lambda o: o.open("a.txt"),
        lambda o: o.mkdir("x"),
        lambda o: o.remove("x"),
        lambda o: o.stat("a.txt"),
        lambda o: o.lstat("a.txt"),
        lambda o: o.readlink("x"),
        lambda o: o.rename("a", "b"),
        lambda o: o.exists("a.txt"),
    ],
    "abort signal": [lambda o: o.abort(), lambda o: o.aborted],
    "fetcher": [lambda o: o.fetch("https://example.invalid/")],
    "policy": [
        lambda o: o.digest,
        lambda o: o.summary(),
        lambda o: o.summary_text(),
        lambda o: o.authorize("https", "example.invalid"),
    ],
}


def test_abuse25_every_method_of_every_closed_object_raises_closed_error(ws):
    p = _policy(ws)
    objs = {
        "sandbox": Sandbox.from_policy(p),
        "executor": Executor(p),
        "root": Root(str(ws)),
        "abort signal": AbortSignal(),
        "fetcher": sandgate.Fetcher(p),
        "policy": p,
    }
    for what, o in objs.items():
        with o:
            pass
        o.__exit__(None, None, None)  # a context manager exited twice
        o.close()
        assert o.closed
        for call in CLOSED_CALLS[what]:
            with pytest.raises(ClosedError) as e:
                call(o)
            assert e.value.code == "E_CLOSED" and what in str(e.value)
    assert "closed" in repr(objs["sandbox"]) and (ws / "a.txt").read_text() == "hello\nworld\n"
    # A closed policy or abort signal handed to another object.
    for make in (Sandbox.from_policy, Executor, sandgate.Fetcher):
        with pytest.raises(ClosedError):
            make(p)
    with Executor(_policy(ws)) as ex:
        with pytest.raises(ClosedError):
            ex.exec("true", abort=objs["abort signal"])


# ---------------------------------------------------------------------------
# Paths, numbers and types of every wrong shape


class _Raises(os.PathLike):
    def __fspath__(self):
        raise RuntimeError("fspath boom")


class _Bytes(os.PathLike):
    def __fspath__(self):
        return b"a.txt"


class _Int(os.PathLike):
    def __fspath__(self):
        return 7


def test_abuse25_host_paths_with_a_lone_surrogate_are_refused_by_name(ws):
    # Before, U+D800..U+DC7F in a host path (Root, Root.stat, host_name)
    # raised UnicodeEncodeError, which has no code and names no argument.
    root = Root(str(ws))
    sb = Sandbox(read_roots=[str(ws)])
    for call in (
        lambda: Root(str(ws) + "/\ud800"),
        lambda: root.stat("a\ud800"),
        lambda: root.lstat("a\ud800"),
        lambda: root.open("a\ud800"),
        lambda: root.mkdir("a\ud800"),
        lambda: root.rename("a.txt", "a\ud800"),
        lambda: sb.host_name(str(ws) + "/\ud800"),
    ):
        with pytest.raises(RequestError) as e:
            call()
        assert e.value.code == "E_REQUEST" and "lone surrogate" in str(e.value)
    # U+DC80..U+DCFF is a byte that is not UTF-8: a host name may hold it.
    with pytest.raises(FileNotFoundError):
        root.stat("a\udcff")
    with pytest.raises(RequestError) as e:
        sb.read("a\udcff")
    assert "not UTF-8" in str(e.value)
    assert os.listdir(ws) == ["a.txt"]
    root.close()
    sb.close()


def test_abuse25_pathlike_objects_of_every_kind(ws):
    root = Root(str(ws))
    sb = Sandbox(read_roots=[str(ws)], write_root=str(ws))
    assert sb.read(_Bytes()) == b"hello\nworld\n" and root.stat(_Bytes()).size == 12
    for call in (lambda a: sb.read(a), lambda a: root.stat(a), lambda a: Root(a), lambda a: Policy.load(a)):
        with pytest.raises(RuntimeError, match="fspath boom"):
            call(_Raises())
        # Before, os.fspath's TypeError, which has no code.
        with pytest.raises(RequestTypeError) as e:
            call(_Int())
        assert e.value.code == "E_REQUEST" and "__fspath__" in str(e.value)
    root.close()
    sb.close()


def test_abuse25_sandbox_lists_of_the_wrong_shape(ws):
    # Before, deny_write=b"*.env" was iterated into ints and refused as
    # "deny_write must be str, ..., not int"; read_roots=None raised a bare
    # TypeError naming no argument.
    with Sandbox(read_roots=str(ws), write_root=str(ws), deny_write=b"*.env") as sb:
        with pytest.raises(sandgate.ProtectedError):
            sb.write("x.env", "secret")
        assert not (ws / "x.env").exists()
    for kw in ({"read_roots": None}, {"read_roots": 5}, {"deny_write": 5}):
        with pytest.raises(RequestTypeError) as e:
            Sandbox(**kw)
        assert next(iter(kw)) in str(e.value)


def test_abuse25_wrong_values_everywhere_are_refused_by_name(ws):
    p = _policy(ws)
    sb, ex, root = Sandbox.from_policy(p), Executor(p), Root(str(ws))
    cases = [
        (lambda: ex.exec("true", timeout_ms=0), "timeout_ms"),
        (lambda: ex.exec("true", timeout_ms=-1), "timeout_ms"),
        (lambda: ex.exec("true", timeout_ms=1.5), "timeout_ms"),
        (lambda: ex.exec("true", abort=5), "abort"),
        (lambda: ex.exec(None), "command"),
        (lambda: ex.exec(b"true"), "command"),
        (lambda: ex.exec("a\0b"), "NUL"),
        (lambda: sb.read_lines("a.txt", offset=0), "offset"),
        (lambda: sb.read_lines("a.txt", limit=2**64), "limit"),
        (lambda: sb.grep("x", max_results=-1), "max_results"),
        (lambda: sb.grep("x", before=2**70), "before"),
        (lambda: sb.grep("x", mode=3), "mode"),
        (lambda: sb.write("n.txt", 5), "data"),
        (lambda: sb.write("n.txt", None), "data"),
        (lambda: sb.write("n.txt", "x", overwrite="yes"), "overwrite"),
        (lambda: sb.read(None), "path"),
        (lambda: sb.read("a\0b"), "NUL"),
        (lambda: Sandbox(read_roots=[str(ws)], max_read_bytes=-1), "max_read_bytes"),
        (lambda: Sandbox(read_roots=[str(ws)], fs_ops_budget=2**64), "fs_ops_budget"),
        (lambda: Sandbox(read_roots=[str(ws)], audit=5), "audit"),
        (lambda: root.open_fd("a.txt", 2**40), "flags"),
        (lambda: root.mkdir("d", -1), "mode"),
        (lambda: root.open("q", "w", perm=2**40), "perm"),
        (lambda: Root(str(ws), resolver=-1), "resolver"),
        (lambda: p.authorize("https", "x.example", 2**64), "port"),
        (lambda: Executor("policy"), "policy"),
        (lambda: Sandbox.from_policy(None), "policy"),
        (lambda: Policy.parse(None, str(ws)), "text"),
    ]
    for call, named in cases:
        with pytest.raises(SandgateError) as e:
            call()
        assert e.value.code in ("E_REQUEST", "E_PATH_INVALID", "E_POLICY"), (named, e.value)
        assert named in str(e.value), (named, str(e.value))
    assert sorted(os.listdir(ws)) == ["a.txt"]
    for o in (sb, ex, root, p):
        o.close()


def test_abuse25_huge_arguments_are_refused_without_being_half_done(ws):
    big = "a" * (100 << 20)
    sb = Sandbox(read_roots=[str(ws)], write_root=str(ws))
    root = Root(str(ws))
    with pytest.raises(sandgate.PathInvalidError):
        sb.read(big)
    with pytest.raises(sandgate.PathInvalidError):
        root.stat(big)
    with pytest.raises(sandgate.TooLargeError):
        sb.write("big.txt", big)
    assert sorted(os.listdir(ws)) == ["a.txt"]
    sb.close()
    root.close()


# ---------------------------------------------------------------------------
# Answers of 2 GiB and more


def test_abuse25_bytes_of_2_gib_and_more_are_copied_whole():
    # ctypes.string_at takes its size as a C int: before, 2 GiB + 3 bytes
    # raised SystemError, and 4 GiB + 5 would have come back as 5 bytes.
    n = 2**31 + 3
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m[n - 1] = 7
        buf = (ctypes.c_char * n).from_buffer(m)
        addr = ctypes.addressof(buf)
        b = _ffi.copy_out(ctypes.cast(ctypes.c_void_p(addr), ctypes.POINTER(ctypes.c_uint8)), n)
        del buf
        assert len(b) == n and b[-1] == 7 and b[0] == 0
        del b
    finally:
        m.close()


def test_abuse25_a_read_of_2_gib_and_more_answers_the_whole_file(ws):
    n = 2**31 + 3
    with open(ws / "big", "wb") as f:
        f.seek(n - 1)
        f.write(b"Z")
    with Sandbox(read_roots=[str(ws)], max_read_bytes=2**40) as sb:
        data = sb.read("big")
        assert len(data) == n and data[-1:] == b"Z"


# ---------------------------------------------------------------------------
# Many calls: no growth


def test_abuse25_ten_thousand_calls_hold_no_memory_or_descriptors(ws):
    p = _policy(ws)
    sb, root = Sandbox.from_policy(p), Root(str(ws))

    def rounds(n: int) -> None:
        for _ in range(n):
            sb.read("a.txt")
            with pytest.raises(NotFoundError):
                sb.read("missing")
            root.stat("a.txt")
            with pytest.raises(FileNotFoundError):
                root.stat("missing")
            with pytest.raises(RequestTypeError):
                sb.read(None)
            sb.grep("world")

    rounds(2000)
    gc.collect()
    fds, rss = _fds(), _rss_mb()
    rounds(10000)
    gc.collect()
    assert _fds() == fds
    assert _rss_mb() - rss < 16, (rss, _rss_mb())
    with Executor(p) as ex:
        for _ in range(50):
            ex.exec("true")
        fds, threads = _fds(), threading.active_count()
        for _ in range(300):
            assert ex.exec("true").exit_code == 0
            with pytest.raises(SandgateError):
                ex.exec("true", cwd="missing")
        assert _fds() == fds and threading.active_count() == threads
    sb.close()
    root.close()
    p.close()
