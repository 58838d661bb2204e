"""The binding's own tests: Root, errors, context managers, audit, executor,
misuse after close, library lookup."""

from __future__ import annotations

import ctypes
import errno
import gc
import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import sandgate
from sandgate import (
    AbortSignal,
    AuditEvent,
    Executor,
    Policy,
    Root,
    Sandbox,
    SandgateError,
    _ffi,
)

SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    d = tmp_path.resolve()
    (d / "ws").mkdir()
    (d / "ws" / "a.txt").write_text("hello\nworld\n")
    (d / "ws" / "sub").mkdir()
    (d / "ws" / "sub" / "b.txt").write_text("bee\n")
    (d / "outside").mkdir()
    (d / "outside" / "secret.txt").write_text("TOP SECRET\n")
    return d


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# ---------------------------------------------------------------------------
# Root


def test_root_refuses_dotdot_escape(tree):
    with Root(tree / "ws") as r:
        with pytest.raises(sandgate.PathEscapeError) as ei:
            r.open("../outside/secret.txt")
        assert ei.value.code == "E_PATH_ESCAPE"
        with pytest.raises(PermissionError):
            r.stat("sub/../../outside/secret.txt")
        # `..` that stays inside is fine (beneath semantics).
        assert r.stat("sub/../a.txt").size == 12


def test_root_refuses_absolute_symlink_even_inside(tree):
    os.symlink(str(tree / "outside" / "secret.txt"), tree / "ws" / "abs_out")
    os.symlink(str(tree / "ws" / "a.txt"), tree / "ws" / "abs_in")
    with Root(tree / "ws") as r:
        for name in ("abs_out", "abs_in"):
            with pytest.raises(sandgate.PathEscapeError) as ei:
                r.open(name)
            assert ei.value.code == "E_PATH_ESCAPE"
        # lstat and readlink act on the link itself.
        assert r.lstat("abs_out").kind == "symlink"
        assert r.readlink("abs_out") == str(tree / "outside" / "secret.txt")


def test_root_refuses_symlink_chain_escape(tree):
    ws = tree / "ws"
    os.symlink("l2", ws / "l1")
    os.symlink("sub/l3", ws / "l2")
    os.symlink("../../outside/secret.txt", ws / "sub" / "l3")
    os.symlink("sub/b.txt", ws / "ok1")
    os.symlink("ok1", ws / "ok2")
    with Root(ws) as r:
        with pytest.raises(sandgate.PathEscapeError):
            r.open("l1")
        with pytest.raises(sandgate.PathEscapeError):
            r.stat("l1")
        with r.open("ok2") as f:
            assert f.read() == "bee\n"


def test_root_symlink_loop(tree):
    os.symlink("loop2", tree / "ws" / "loop1")
    os.symlink("loop1", tree / "ws" / "loop2")
    with Root(tree / "ws") as r:
        with pytest.raises(sandgate.LoopError) as ei:
            r.stat("loop1")
        assert isinstance(ei.value, OSError) and ei.value.errno == errno.ELOOP


def test_root_open_returns_file_objects(tree):
    with Root(tree / "ws") as r:
        with r.open("a.txt") as f:
            assert isinstance(f, io.TextIOWrapper)
            assert f.readline() == "hello\n"
        with r.open("a.txt", "rb") as f:
            assert isinstance(f, io.BufferedReader)
            assert f.read() == b"hello\nworld\n"
        with r.open("new.txt", "w", encoding="utf-8") as f:
            f.write("caf\u00e9\n")
        assert (tree / "ws" / "new.txt").read_bytes() == "caf\u00e9\n".encode()
        with r.open("new.txt", "a") as f:
            f.write("more\n")
        assert (tree / "ws" / "new.txt").read_text() == "caf\u00e9\nmore\n"
        with pytest.raises(FileExistsError):
            r.open("new.txt", "x")
        with r.open("x.bin", "xb", perm=0o600) as f:
            f.write(b"\x00\x01")
        assert os.stat(tree / "ws" / "x.bin").st_mode & 0o777 == 0o600
        with r.open("x.bin", "r+b") as f:
            f.seek(1)
            f.write(b"\x02")
        assert (tree / "ws" / "x.bin").read_bytes() == b"\x00\x02"
        with r.open("x.bin", "wb") as f:
            pass
        assert (tree / "ws" / "x.bin").read_bytes() == b""
        with pytest.raises(ValueError):
            r.open("a.txt", "rw")
        with pytest.raises(FileNotFoundError):
            r.open("missing.txt")
        with pytest.raises(IsADirectoryError):
            r.open("sub", "w")
        os.symlink("a.txt", tree / "ws" / "rel")
        with pytest.raises(SandgateError):
            r.open("rel", follow_symlinks=False)
        with r.open("rel") as f:
            assert f.read() == "hello\nworld\n"


def test_root_file_ops(tree):
    with Root(str(tree / "ws")) as r:
        assert r.name == str(tree / "ws")
        r.mkdir("d", 0o750)
        st = r.stat("d")
        assert st.kind == "dir" and st.is_dir() and st.mode == 0o750
        import stat as S

        assert S.S_ISDIR(st.st_mode)
        with r.open("d/f", "w") as f:
            f.write("x")
        real = os.stat(tree / "ws" / "d" / "f")
        st = r.stat("d/f")
        assert (st.st_ino, st.st_dev, st.st_size, st.st_nlink) == (real.st_ino, real.st_dev, 1, 1)
        assert st.st_mtime_ns == real.st_mtime_ns
        assert (st.st_uid, st.st_gid) == (real.st_uid, real.st_gid)
        r.rename("d/f", "d/g")
        assert not r.exists("d/f") and r.exists("d/g")
        with pytest.raises(OSError) as ei:
            r.remove("d")
        assert isinstance(ei.value, sandgate.NotEmptyError)
        r.remove("d/g")
        r.remove("d")
        assert not (tree / "ws" / "d").exists()
        with r.open_root("sub") as sub:
            assert sub.name.endswith("sub")
            assert sub.stat("b.txt").size == 4
            with pytest.raises(sandgate.PathEscapeError):
                sub.stat("../a.txt")


def test_root_resolvers_agree(tree):
    os.symlink("../outside", tree / "ws" / "out")
    for res in ("auto", "walk", "openat2"):
        try:
            r = Root(tree / "ws", resolver=res)
        except sandgate.SandgateError:
            assert res == "openat2"  # kernel without openat2
            continue
        with r:
            assert r.stat("a.txt").size == 12
            with pytest.raises(sandgate.PathEscapeError):
                r.stat("out/secret.txt")


def test_cabi19_root_open_closes_its_descriptor_once(tree):
    """A failing open() closes the descriptor exactly once: the built-in
    open() closes it itself when it fails after wrapping it (an unknown
    encoding, a bad newline, unbuffered text), so closing it again hit a
    closed number (EBADF masking the real error) or, in a threaded program,
    another thread's file that had reused it. A failure before wrapping
    (binary mode with an encoding) still closes it."""
    with Root(tree / "ws") as r:
        before = _fds()
        with pytest.raises(LookupError):
            r.open("a.txt", encoding="cabi19-no-such-codec")
        with pytest.raises(ValueError, match="newline"):
            r.open("a.txt", newline="bogus")
        with pytest.raises(ValueError, match="unbuffered"):
            r.open("a.txt", buffering=0)
        with pytest.raises(ValueError, match="encoding"):
            r.open("a.txt", "rb", encoding="utf-8")
        with pytest.raises(IsADirectoryError):
            r.open("sub")
        assert _fds() == before
        # The descriptor a failed open() had is free again, and closing it
        # twice would have closed this file.
        fd = os.open(tree / "ws" / "a.txt", os.O_RDONLY)
        try:
            with pytest.raises(LookupError):
                r.open("a.txt", encoding="cabi19-no-such-codec")
            assert os.read(fd, 5) == b"hello"
        finally:
            os.close(fd)
        with r.open("a.txt") as f:
            assert f.read() == "hello\nworld\n"
        assert _fds() == before


def test_root_open_missing_dir():
    with pytest.raises(FileNotFoundError):
        Root("/nonexistent/sandgate/dir")


# ---------------------------------------------------------------------------
# Errors


def test_exception_hierarchy(tree):
    sb = Sandbox(read_roots=[tree / "ws"], write_root=tree / "ws", deny_write=["*.lock"], allow_overwrite=True)
    with sb:
        try:
            sb.read("missing.txt")
        except FileNotFoundError as e:
            assert isinstance(e, SandgateError) and isinstance(e, sandgate.NotFoundError)
            assert e.code == "E_NOT_FOUND" and e.path == "missing.txt"
            assert str(e) == e.message and "missing.txt" not in str(tree)
            assert e.errno == errno.ENOENT
        else:
            pytest.fail("no error")
        with pytest.raises(FileExistsError) as ei:
            sb.write("a.txt", "x")
        assert ei.value.code == "E_EXISTS"
        with pytest.raises(PermissionError) as ei:
            sb.write("x.lock", "x")
        assert ei.value.code == "E_FS_PROTECTED" and ei.value.pattern == "*.lock"
        with pytest.raises(ValueError) as ei:
            sb.read("../x")
        assert ei.value.code == "E_PATH_INVALID" and ei.value.errno is None
        with pytest.raises(IsADirectoryError):
            sb.read("sub")
        with pytest.raises(NotADirectoryError):
            sb.list("a.txt")
        with pytest.raises(sandgate.EditNoMatchError):
            sb.edit("a.txt", "nope", "x")
    with pytest.raises(sandgate.PolicyError) as ei:
        Policy.parse('[fs]\nwrite_root = "nope"\n', str(tree))
    assert ei.value.key == "fs.write_root" and isinstance(ei.value, ValueError)
    # Every code has a class; the classes are what `except` expects.
    table = {
        "E_NOT_FOUND": FileNotFoundError,
        "E_EXISTS": FileExistsError,
        "E_NOT_FILE": IsADirectoryError,
        "E_NOT_DIR": NotADirectoryError,
        "E_DENIED": PermissionError,
        "E_FS_PROTECTED": PermissionError,
        "E_PATH_ESCAPE": PermissionError,
        "E_HARDLINK": PermissionError,
        "E_SYMLINK": PermissionError,
        "E_NET_DENIED": PermissionError,
        "E_TIMEOUT": TimeoutError,
        "E_PATH_INVALID": ValueError,
        "E_REQUEST": ValueError,
        "E_POLICY": ValueError,
        "E_EDIT_NO_MATCH": ValueError,
        "E_EDIT_AMBIGUOUS": ValueError,
        "E_NOT_EMPTY": OSError,
        "E_IO": OSError,
        "E_LOOP": OSError,
    }
    for code, builtin in table.items():
        cls = sandgate.BY_CODE[code]
        assert issubclass(cls, builtin) and issubclass(cls, SandgateError), code
    for code, cls in sandgate.BY_CODE.items():
        e = sandgate.error_for(code, "msg", path="p", errno=5)
        assert type(e) is cls and str(e) == "msg" and e.errno == 5 and e.path == "p"
        assert _ffi.lib.sg_code_name(_ffi.CODE_NAMES.index(code)).decode() == code
        import pickle

        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is cls and e2.code == code and e2.path == "p"


def test_io_error_keeps_os_errno(tree):
    # A file the process cannot read (unless root): E_IO/E_DENIED with errno.
    p = tree / "ws" / "locked.txt"
    p.write_text("x")
    os.chmod(p, 0)
    try:
        with Root(tree / "ws") as r:
            if os.geteuid() == 0:
                r.open("locked.txt").close()  # root reads anything
            else:
                with pytest.raises(OSError) as ei:
                    r.open("locked.txt")
                assert ei.value.errno == errno.EACCES
    finally:
        os.chmod(p, 0o644)


# ---------------------------------------------------------------------------
# Sandbox


def test_sandbox_keyword_options(tree):
    ws = tree / "ws"
    with Sandbox(
        read_roots=[ws],
        write_root=ws,
        max_read_bytes=100,
        max_write_bytes=10,
        allow_overwrite=True,
        deny_write=[".github/**"],
        restricted=True,
        resolver="walk",
        fs_ops_budget=100,
    ) as sb:
        assert sb.read("a.txt") == b"hello\nworld\n"
        assert sb.read_text("a.txt") == "hello\nworld\n"
        r = sb.read_lines("a.txt", 2, 5)
        assert (r.content, r.offset, r.lines, r.total_lines, r.truncated) == (b"world\n", 2, 1, 2, False)
        assert r.text == "world\n"
        assert sb.write("n/new.txt", "12345") == 5
        assert sb.write("n/new.txt", b"abc", overwrite=True) == 3
        with pytest.raises(sandgate.TooLargeError):
            sb.write("big.txt", "x" * 11)
        assert sb.edit("n/new.txt", "b", "B") == 1
        assert sb.read("n/new.txt") == b"aBc"
        with pytest.raises(sandgate.ProtectedError):
            sb.write(".git/config", "x")
        with pytest.raises(sandgate.ProtectedError):
            sb.write(".github/workflows/x.yml", "x")
        names = [(e.name, e.kind) for e in sb.list(".")]
        assert names == [("a.txt", "file"), ("n", "dir"), ("sub", "dir")]
        st = sb.stat("a.txt")
        assert (st.kind, st.size, st.mode) == ("file", 12, 0o644)
        sb.mkdir("m/n")
        sb.rename("n/new.txt", "m/n/moved.txt")
        assert sb.glob("**/*.txt") == sorted(sb.glob("**/*.txt"))
        assert "m/n/moved.txt" in sb.glob("**/*.txt")
        hits = sb.grep("wor", max_results=5)
        assert [(m.path, m.line, m.text) for m in hits] == [("a.txt", 2, "world")]
        sb.delete("m/n/moved.txt")
        assert not sb.exists("m/n/moved.txt")
        assert isinstance(sb.warnings(), list)
        with pytest.raises(sandgate.RequestError):
            sb.read_lines("a.txt", 0, 1)
        with pytest.raises(sandgate.RequestError):
            sb.grep("x", max_results=0)


def test_grep7_grep_says_which_lines_were_cut_and_what_went_unread(tree):
    ws = tree / "ws"
    long = "y" * 1500
    (ws / "g.txt").write_text(f"{long}\nhit{long}\n{long}\nshort\n")
    with Sandbox(read_roots=[ws]) as sb:
        hits = sb.grep("hit", before=1, after=2)
        m = hits[0]
        assert (len(m.text), m.line_truncated) == (1000, True)
        assert (m.before_truncated, m.after_truncated) == ((0,), (0,))
        assert hits.unreadable == 0
        assert sb.grep("short")[0].line_truncated is False
    (ws / "locked.txt").write_text("hit\n")
    (ws / "locked.txt").chmod(0)
    try:
        with open(ws / "locked.txt", "rb"):
            pass
        return  # this uid reads a mode-000 file: nothing to show
    except PermissionError:
        pass
    with Sandbox(read_roots=[ws]) as sb:
        assert sb.grep("hit").unreadable == 1
        assert sb.grep("hit", mode="files").unreadable == 1


def test_glob_passes_over_an_unlistable_directory_and_counts_it(tree):
    ws = tree / "ws"
    (ws / "locked").mkdir()
    (ws / "locked" / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    with Sandbox(read_roots=[ws]) as sb:
        assert sb.glob("**/*.txt").unreadable == 0
    (ws / "locked").chmod(0)
    try:
        try:
            os.listdir(ws / "locked")
            return  # this uid lists a mode-000 directory: nothing to show
        except PermissionError:
            pass
        with Sandbox(read_roots=[ws]) as sb:
            found = sb.glob("**/*.txt")
            assert "b.txt" in found
            assert not [p for p in found if p.startswith("locked/")]
            assert found.unreadable == 1
    finally:
        (ws / "locked").chmod(0o755)


def test_sandbox_grep_options(tree):
    ws = tree / "ws"
    (ws / "src").mkdir()
    (ws / "src" / "m.rs").write_text("one\nFn alpha\nthree\nfn beta\n")
    (ws / "src" / "skip.rs").write_text("fn gamma\n")
    (ws / "notes.md").write_text("fn in a note\n")
    (ws / ".gitignore").write_text("src/skip.rs\n")
    with Sandbox(read_roots=[ws]) as sb:
        # The old call forms answer as before.
        assert [m.text for m in sb.grep("alpha")] == ["Fn alpha"]
        assert len(sb.grep("fn", "src", 1)) == 1
        # Include glob, case folding, context.
        hits = sb.grep("fn", glob="*.rs", case_insensitive=True, before=1, after=1)
        assert [(m.path, m.line) for m in hits] == [("src/m.rs", 2), ("src/m.rs", 4), ("src/skip.rs", 1)]
        assert hits[0].before == ("one",) and hits[0].after == ("three",)
        assert hits[1].after == ()
        assert [m.path for m in sb.grep("fn", glob="*.rs")] == ["src/m.rs", "src/skip.rs"]
        # Modes, a head limit and .gitignore.
        assert sb.grep("fn", mode="files", glob="*.rs", gitignore=True) == ["src/m.rs"]
        assert sb.grep("fn", mode="files") == ["notes.md", "src/m.rs", "src/skip.rs"]
        assert sb.grep("fn", mode="files", max_results=1) == ["notes.md"]
        assert sb.grep("fn", mode="count", case_insensitive=True, glob="*.rs") == [
            sandgate.Count("src/m.rs", 2),
            sandgate.Count("src/skip.rs", 1),
        ]
        # Refusals name what was wrong.
        with pytest.raises(sandgate.RequestError, match="mode"):
            sb.grep("fn", mode="everything")
        with pytest.raises(sandgate.RequestError, match="lines"):
            sb.grep("fn", mode="files", before=2)
        with pytest.raises(sandgate.RequestError, match="before"):
            sb.grep("fn", before=-1)


def test_sandbox_search_says_when_it_was_cut(tree):
    ws = tree / "ws"
    (ws / "c.txt").write_text("hit\nhit\n")
    (ws / "many").mkdir()
    for i in range(1001):
        (ws / "many" / f"f{i:04}").write_text("")
    with Sandbox(read_roots=[ws]) as sb:
        cut = sb.grep("hit", max_results=1)
        assert [m.line for m in cut] == [1]
        assert cut.truncated and cut.limit == "max_results"
        whole = sb.grep("hit", max_results=2)
        assert len(whole) == 2 and not whole.truncated and whole.limit is None
        counts = sb.grep("hit", mode="count")
        assert counts == [sandgate.Count("c.txt", 2)] and not counts.truncated
        paths = sb.glob("many/*")
        assert len(paths) == 1000 and paths.truncated and paths.limit == "max_results"
        paths = sb.glob("*.txt")
        assert paths == ["a.txt", "c.txt"] and not paths.truncated and paths.limit is None
    # A file over the read cap is passed over, and the answer says so.
    with Sandbox(read_roots=[ws], max_read_bytes=4) as sb:
        skipped = sb.grep("hit", "c.txt")
        assert skipped == [] and skipped.truncated and skipped.limit == "max_read_bytes"


def test_sandbox_grants_nothing_by_default(tree):
    with Sandbox() as sb:
        with pytest.raises(sandgate.DeniedError):
            sb.read("a.txt")
        with pytest.raises(PermissionError):
            sb.write("a.txt", "x")


def test_sandbox_budget(tree):
    with Sandbox(read_roots=[tree / "ws"], fs_ops_budget=2) as sb:
        sb.read("a.txt")
        with pytest.raises(FileNotFoundError):
            sb.read("missing")
        with pytest.raises(sandgate.DeniedError):
            sb.read("a.txt")


def test_sandbox_from_policy_and_warnings(tree):
    (tree / "policy.toml").write_text('[fs]\nread_roots = ["ws/sub"]\nwrite_root = "ws"\n')
    with Policy.load(tree / "policy.toml") as p:
        sb = Sandbox.from_policy(p)
    # the sandbox outlives the policy
    with sb:
        assert sb.read("b.txt") == b"bee\n"
        assert sb.warnings() == []
    # a malformed deny pattern fails closed and is reported
    with Sandbox(write_root=tree / "ws", deny_write=["a/[bc/x"]) as sb:
        w = sb.warnings()
        assert len(w) == 1 and "[bc" in w[0], w


def test_sandbox_concurrent_use_and_close(tree):
    sb = Sandbox(read_roots=[tree / "ws"])
    errors: list[BaseException] = []
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            try:
                assert sb.read("a.txt") == b"hello\nworld\n"
            except sandgate.ClosedError:
                return
            except BaseException as e:  # pragma: no cover
                errors.append(e)
                return

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    sb.close()  # while reads are in flight: no crash, later calls E_CLOSED
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    with pytest.raises(sandgate.ClosedError):
        sb.read("a.txt")


def test_root_concurrent_use_and_close(tree):
    base = _fds()
    r = Root(tree / "ws")
    errors: list[BaseException] = []

    def worker():
        while True:
            try:
                assert r.stat("a.txt").size == 12
                assert r.lstat("sub").kind == "dir"
            except sandgate.ClosedError:
                return
            except BaseException as e:  # pragma: no cover
                errors.append(e)
                return

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    r.close()
    for t in threads:
        t.join()
    assert not errors, errors
    assert r.closed and _fds() == base


# ---------------------------------------------------------------------------
# Policy


def test_policy(tree):
    text = '[fs]\nread_roots = ["ws"]\n[net]\nallow = ["example.com:443"]\n'
    (tree / "policy.toml").write_text(text)
    import hashlib

    with Policy.load(tree / "policy.toml") as p:
        assert p.digest == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        s = p.summary()
        assert s["mode"] == "restricted" and s["read_roots"] == [str(tree / "ws")]
        assert s["digest"] == p.digest
        assert "restricted" in p.summary_text()
        ok = p.authorize("https", "example.com")
        assert ok["allowed"] is True
        no = p.authorize("https", "evil.example", 443)
        assert no["allowed"] is False and isinstance(no["reason"], str)
        with pytest.raises(sandgate.NetDeniedError):
            p.authorize("https", "evil.example", raise_on_deny=True)
        assert p.authorize("http", "example.com", 443)["allowed"] is False
        digest = p.digest
    with Policy.parse(text, str(tree)) as p2:
        assert p2.digest == digest
    with pytest.raises(TypeError):
        Policy()


def test_ints_out_of_a_c_parameters_range_are_refused_not_truncated(tree):
    """ctypes masks an int to the width of its C parameter without a word:
    2**32 + 443 would reach the library as 443, a negative port as "the
    scheme's default", a mode with bit 32 set as a plain 0o644."""
    with Policy.from_options(tree, allow=["example.com:443"]) as p:
        assert p.authorize("https", "example.com", 443)["allowed"] is True
        for port in (2**32 + 443, 2**31 + 443, -443, -1, 65536):
            with pytest.raises(sandgate.RequestError):
                p.authorize("https", "example.com", port)
    with Root(tree / "ws") as r:
        with pytest.raises(sandgate.RequestError):
            r.open_fd("new.txt", os.O_CREAT | os.O_WRONLY, 2**32 | 0o644)
        assert not (tree / "ws" / "new.txt").exists()
        with pytest.raises(sandgate.RequestError):
            r.open_fd("a.txt", 2**32 | os.O_RDONLY)
        with pytest.raises(sandgate.RequestError):
            r.mkdir("d", 2**32 | 0o755)
        assert not (tree / "ws" / "d").exists()
    for resolver in (2**32, 2**32 + 1):
        with pytest.raises(sandgate.RequestError):
            Root(tree / "ws", resolver=resolver)
        with pytest.raises(sandgate.RequestError):
            Sandbox(read_roots=[tree / "ws"], resolver=resolver)


def test_bindcons21_root_modes_beyond_0o777_are_refused(tree):
    """Root.open, open_fd and mkdir take permission bits only (0o777), as
    Go's Root does: a setuid, setgid or sticky bit is E_REQUEST naming the
    mode, and nothing is created (the library would set it)."""
    ws = tree / "ws"
    with Root(ws) as r:
        for bits in (0o4755, 0o2755, 0o1777, 0o7777):
            with pytest.raises(sandgate.RequestError, match=r"perm 0o%o: unsupported file mode" % bits) as e:
                r.open("s.txt", "w", perm=bits)
            assert e.value.code == "E_REQUEST"
            with pytest.raises(sandgate.RequestError, match=r"mode 0o%o: unsupported file mode" % bits):
                r.open_fd("s.txt", os.O_CREAT | os.O_WRONLY, bits)
            with pytest.raises(sandgate.RequestError, match=r"mode 0o%o: unsupported file mode" % bits):
                r.mkdir("s", bits)
            assert not (ws / "s.txt").exists() and not (ws / "s").exists()
        with r.open("s.txt", "w", perm=0o777):
            pass
        r.mkdir("s", 0o777)
        assert (ws / "s").is_dir() and (ws / "s.txt").stat().st_mode & 0o7000 == 0


def test_lone_surrogates_in_names_are_refused_by_the_library(tree):
    """A name with any lone surrogate is not UTF-8: the library refuses it
    with E_REQUEST, whichever surrogate it is (surrogateescape alone can
    encode only U+DC80..U+DCFF and raised UnicodeEncodeError for the rest)."""
    with Sandbox(read_roots=[tree / "ws"], write_root=tree / "ws") as sb:
        for name in ("\udc80", "\ud800", "a\udfffb", "\ud83d\ude00x\udc80"):
            with pytest.raises(sandgate.RequestError) as ei:
                sb.read(name)
            assert ei.value.code == "E_REQUEST"
            with pytest.raises(sandgate.RequestError):
                sb.write(name, "x")
        assert sorted(os.listdir(tree / "ws")) == ["a.txt", "sub"]
    with pytest.raises(sandgate.RequestError):
        Policy.load("\ud800")
    with _exec_policy(tree) as p, Executor(p) as ex:
        with pytest.raises(sandgate.RequestError):
            ex.exec("echo \ud800")
        with pytest.raises(sandgate.RequestError):
            ex.exec("true", cwd="\ud800")


def test_an_int_is_not_data(tree):
    """bytes(n) is n zero bytes: an int given as the data to write (or as
    policy text) must be refused, not written as NULs (or allocated whole:
    bytes(10**12) tries to)."""
    with Sandbox(write_root=tree / "ws", max_write_bytes=1 << 40) as sb:
        for bad in (3, True, 10**12):
            with pytest.raises(TypeError):
                sb.write("n.bin", bad)
        assert not (tree / "ws" / "n.bin").exists()
        assert sb.write("ok.bin", bytearray(b"ab")) == 2
        assert sb.write("mv.bin", memoryview(b"abc")) == 3
    with pytest.raises(TypeError):
        Policy.parse(5, str(tree))


# ---------------------------------------------------------------------------
# Context managers, close, misuse


def test_context_managers_close_and_free(tree):
    base = _fds()
    with Root(tree / "ws") as r, Sandbox(read_roots=[tree / "ws"]) as sb:
        assert not r.closed and not sb.closed
        assert _fds() > base
    assert r.closed and sb.closed
    assert _fds() == base
    for call in (lambda: r.stat("a.txt"), lambda: r.name, lambda: sb.read("a.txt"), lambda: sb.list(".")):
        with pytest.raises(sandgate.ClosedError) as ei:
            call()
        assert ei.value.code == "E_CLOSED" and isinstance(ei.value, SandgateError)
    r.close()
    sb.close()  # twice is fine


def test_del_frees_without_close(tree):
    base = _fds()
    for _ in range(50):
        Root(tree / "ws").stat("a.txt")
        Sandbox(read_roots=[tree / "ws"], write_root=tree / "ws").read("a.txt")
    gc.collect()
    assert _fds() == base


def test_null_handles_answer_e_request():
    """Every fallible C function called with NULL handles and NULL/zero
    arguments answers an error (E_REQUEST), never a crash; run in a child
    process so a crash fails the test instead of killing pytest."""
    code = r"""
import ctypes, sys
from sandgate import _ffi
from sandgate._ffi import lib, PROTOTYPES
bad = []
for name, (restype, argtypes) in sorted(PROTOTYPES.items()):
    if restype is not ctypes.c_uint32 or name in ("sg_abi_version", "sg_error_code"):
        continue
    args = []
    err = ctypes.c_void_p()
    for i, t in enumerate(argtypes):
        if i == len(argtypes) - 1:
            args.append(ctypes.byref(err))
        elif isinstance(t, type) and issubclass(t, ctypes._CFuncPtr):
            args.append(t())  # a NULL function pointer
        elif t in (ctypes.c_void_p, ctypes.c_char_p) or issubclass(t, ctypes._Pointer):
            args.append(None)
        else:
            args.append(t(0))
    st = getattr(lib, name)(*args)
    code = lib.sg_error_code_name(err.value) if err.value else None
    if err.value:
        lib.sg_error_free(err.value)
    if st != 23 or code != b"E_REQUEST":
        bad.append((name, st, code))
# the NULL-accepting ones
lib.sg_bytes_free(None); lib.sg_error_free(None); lib.sg_exec_result_free(None)
for f in ("sg_root_free", "sg_policy_free", "sg_sandbox_free", "sg_executor_free", "sg_abort_free", "sg_sandbox_options_free"):
    getattr(lib, f)(None)
assert lib.sg_error_code(None) == 23
assert lib.sg_abort_is_triggered(None) is False
assert lib.sg_error_message(None) is None
print("BAD", bad)
sys.exit(1 if bad else 0)
"""
    env = dict(os.environ, PYTHONPATH=SRC)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_no_leaks_of_errors_and_bytes(tree):
    """Many failing and succeeding calls: memory stays flat (every sg_error
    and sg_bytes is freed)."""

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    with Sandbox(read_roots=[tree / "ws"]) as sb:
        for _ in range(2000):
            sb.read("a.txt")
            try:
                sb.read("x" * 200)
            except FileNotFoundError:
                pass
        before = rss()
        for _ in range(30000):
            sb.read("a.txt")
            try:
                sb.read("x" * 200)
            except FileNotFoundError:
                pass
        grown = rss() - before
    # 30k leaked errors with a 200-byte path would be well over 10 MB.
    assert grown < 4 * 1024 * 1024, grown


# ---------------------------------------------------------------------------
# Audit


def test_audit_callback_receives_events(tree):
    events: list[AuditEvent] = []
    with Sandbox(read_roots=[tree / "ws"], write_root=tree / "ws", audit=events.append) as sb:
        sb.read("a.txt")
        sb.write("w.txt", "abc")
        with pytest.raises(FileNotFoundError):
            sb.read("missing.txt")
        sb.rename("w.txt", "v.txt")
    assert [(e.op, e.path, e.size, e.outcome) for e in events] == [
        ("read", "a.txt", 12, "OK"),
        ("write", "w.txt", 3, "OK"),
        ("read", "missing.txt", None, "E_NOT_FOUND"),
        ("rename", "w.txt -> v.txt", None, "OK"),
    ]
    now = time.time()
    assert all(now - 60 < e.time <= now + 1 for e in events)
    assert events[0].ok and not events[2].ok
    assert str(tree) not in repr(events)


def test_audit_callback_exception_is_contained(tree, caplog):
    calls = []

    def bad(ev):
        calls.append(ev)
        raise RuntimeError("boom in audit")

    with Policy.parse('[fs]\nread_roots = ["ws"]\n', str(tree)) as p:
        sb = Sandbox.from_policy(p, audit=bad)
    with sb:
        with caplog.at_level("ERROR", logger="sandgate"):
            assert sb.read("a.txt") == b"hello\nworld\n"
            assert sb.read("a.txt") == b"hello\nworld\n"
    assert len(calls) == 2
    assert len(sb.audit_errors) == 2 and isinstance(sb.audit_errors[0], RuntimeError)
    assert "boom in audit" in caplog.text


def test_audit_from_many_threads(tree):
    events = []
    lock = threading.Lock()

    def sink(ev):
        with lock:
            events.append(ev)

    with Sandbox(read_roots=[tree / "ws"], audit=sink) as sb:
        threads = [threading.Thread(target=lambda: [sb.read("a.txt") for _ in range(50)]) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(events) == 200


# ---------------------------------------------------------------------------
# Executor


def _exec_policy(tree: Path, extra: str = "") -> Policy:
    return Policy.parse(
        '[fs]\nread_roots = ["ws"]\nwrite_root = "ws"\n[exec]\nenabled = true\nshell = "/bin/sh"\ntimeout_ms = 10000\n'
        + extra,
        str(tree),
    )


def test_executor_exit_code_and_output(tree):
    with _exec_policy(tree) as p, Executor(p) as ex:
        ex.start()
        r = ex.exec("cat a.txt; echo err >&2; exit 4")
        assert r.exit_code == 4 and r.stdout == b"hello\nworld\n" and r.stderr == b"err\n"
        assert not (r.truncated or r.timed_out or r.aborted)
        assert isinstance(r.confinement, dict) and r.confinement
        assert r.env_names_digest and r.duration_ms >= 0
        r = ex.exec("pwd", cwd="sub")
        assert r.stdout.decode().strip().endswith("/ws/sub")
        with pytest.raises(sandgate.PathInvalidError):
            ex.exec("true", cwd="..")
        with pytest.raises(sandgate.RequestError):
            ex.exec("true", timeout_ms=0)
        ex.dispose()
        assert ex.exec("echo again").stdout == b"again\n"


def test_executor_timeout_is_124(tree):
    with _exec_policy(tree) as p, Executor(p) as ex:
        t0 = time.monotonic()
        r = ex.exec("sleep 10", timeout_ms=200)
        assert r.exit_code == 124 and r.timed_out
        assert time.monotonic() - t0 < 5


def test_executor_names_the_limit_that_stopped_a_command(tree):
    with _exec_policy(tree, "max_cpu_ms = 300\n") as p, Executor(p) as ex:
        r = ex.exec("while :; do :; done")
        assert r.limit == "cpu" and not r.timed_out, r
        assert r.confinement["limits"]["max_cpu_ms"] == 300
        r = ex.exec("sleep 10", timeout_ms=200)
        assert r.limit == "timeout"
        assert ex.exec("true").limit is None


def test_executor_reports_and_undoes_changes_to_protected_paths(tree):
    (tree / "ws" / "Cargo.lock").write_text("v1\n")
    policy = Policy.parse(
        '[fs]\nread_roots = ["ws"]\nwrite_root = "ws"\ndeny_write = ["*.lock"]\n'
        '[exec]\nenabled = true\nshell = "/bin/sh"\ntimeout_ms = 10000\n',
        str(tree),
    )
    with policy as p, Executor(p) as ex:
        r = ex.exec("echo ok > free.txt; echo evil > Cargo.lock; touch new.lock")
        quarantined = {"path": "new.lock", "pattern": "*.lock", "action": "quarantined"}
        if (r.confinement.get("protected_binds") or {}).get("bound"):
            # In namespaces Cargo.lock is bound read-only: the write fails
            # in the command, and only the new file is undone afterwards.
            assert "Read-only file system" in r.stderr_text, r
            assert r.protected_changes == [quarantined], r
        else:
            assert r.protected_changes == [
                {"path": "Cargo.lock", "pattern": "*.lock", "action": "restored"},
                quarantined,
            ], r
        assert (tree / "ws" / "Cargo.lock").read_text() == "v1\n"
        assert not (tree / "ws" / "new.lock").exists()
        assert (tree / "ws" / "free.txt").read_text() == "ok\n"
        assert ex.exec("true").protected_changes == []


def test_executor_abort_from_another_thread_is_130(tree):
    with _exec_policy(tree) as p, Executor(p) as ex, AbortSignal() as sig:
        assert not sig.aborted
        threading.Timer(0.3, sig.abort).start()
        t0 = time.monotonic()
        r = ex.exec("sleep 10", abort=sig)
        assert r.exit_code == 130 and r.aborted
        assert time.monotonic() - t0 < 5
        assert sig.aborted
        # a triggered signal ends later commands at once
        assert ex.exec("sleep 10", abort=sig).exit_code == 130


def test_ranged9_a_ranged_read_stops_once_its_abort_signal_is_triggered(tree):
    ws = tree / "ws"
    (ws / "r9.txt").write_text("one\ntwo\nthree\n")
    with Sandbox(read_roots=[ws]) as sb, AbortSignal() as sig:
        r = sb.read_lines("r9.txt", 2, 1, abort=sig)
        assert (r.content, r.total_lines) == (b"two\n", 3)
        sig.abort()
        with pytest.raises(sandgate.AbortedError) as e:
            sb.read_lines("r9.txt", 1, 1, abort=sig)
        assert e.value.path == "r9.txt"
        # without the signal, the same read is served
        assert sb.read_lines("r9.txt", 1, 1).content == b"one\n"


def test_a_grep_or_glob_over_a_large_tree_stops_once_its_abort_signal_is_triggered(tree):
    ws = tree / "ws"
    big = ws / "big"
    for d in range(40):
        sub = big / f"d{d:02}"
        sub.mkdir(parents=True)
        for i in range(500):
            (sub / f"f{i:03}.txt").write_text("nothing to see\n" * 20)
    with Sandbox(read_roots=[ws]) as sb:
        # Unaborted, the same calls answer in full.
        with AbortSignal() as sig:
            assert sb.grep("needle", "big", mode="files", abort=sig) == []
            assert len(sb.glob("big/d00/*.txt", abort=sig)) == 500
        for call in (
            lambda s: sb.grep("needle", "big", mode="files", abort=s),
            lambda s: sb.glob("**/*.md", "big", abort=s),
        ):
            # Triggered while the walk runs (20,000 files): it stops with
            # E_ABORTED, said by the walk ("cancelled"), not by the check
            # made before a call starts. The trigger races the walk, so a
            # few tries are allowed; a call that ignored the signal would
            # answer every time.
            stopped = None
            for _ in range(20):
                with AbortSignal() as sig:
                    started = threading.Event()

                    def trigger(sig=sig, started=started):
                        started.wait()
                        time.sleep(0.002)
                        sig.abort()

                    t = threading.Thread(target=trigger)
                    t.start()
                    started.set()
                    try:
                        call(sig)
                    except sandgate.AbortedError as e:
                        if "cancelled" in str(e):
                            stopped = e
                    finally:
                        t.join()
                    if stopped is not None:
                        break
            assert stopped is not None and stopped.code == "E_ABORTED"
            # Already triggered: refused before the walk starts.
            with AbortSignal() as sig:
                sig.abort()
                with pytest.raises(sandgate.AbortedError) as e:
                    call(sig)
                assert e.value.path == "big"
                assert "before the call started" in str(e.value)
        with pytest.raises(TypeError) as te:
            sb.grep("x", abort=object())  # type: ignore[arg-type]
        assert "abort" in str(te.value)
        with pytest.raises(TypeError):
            sb.read_lines("big/d00/f000.txt", abort=1)  # type: ignore[arg-type]


def test_executor_refusals(tree):
    with Policy.parse('[fs]\nread_roots = ["ws"]\n', str(tree)) as p, Executor(p) as ex:
        with pytest.raises(sandgate.DeniedError):
            ex.exec("true")
    with _exec_policy(tree) as p, Executor(p) as ex:
        sig = AbortSignal()
        sig.close()
        with pytest.raises(sandgate.ClosedError):
            ex.exec("true", abort=sig)
        assert ex.exec("true").exit_code == 0  # still usable
    with _exec_policy(tree, "[budgets]\nexec_ops = 1\n") as p, Executor(p) as ex:
        ex.exec("true")
        with pytest.raises(PermissionError):
            ex.exec("true")
    assert ex.closed
    with pytest.raises(sandgate.ClosedError):
        ex.exec("true")


def test_executor_audit_reports_exit_code_limit_and_refusals(tree):
    events: list[AuditEvent] = []
    secret = "marker-7f3a-not-in-audit"
    with _exec_policy(tree) as p, Executor(p, audit=events.append) as ex:
        r = ex.exec(f"echo {secret}; exit 3")
        assert r.exit_code == 3
        r = ex.exec(f"sleep 10 # {secret}", timeout_ms=200)
        assert r.timed_out
        with pytest.raises(sandgate.PathInvalidError):
            ex.exec(f"echo {secret}", cwd="..")
        ex.exec("true", cwd="sub")
    assert [(e.op, e.path, e.outcome, e.exit_code, e.limit) for e in events] == [
        ("exec", "", "OK", 3, None),
        ("exec", "", "OK", 124, "timeout"),
        ("exec", "..", "E_PATH_INVALID", None, None),
        ("exec", "sub", "OK", 0, None),
    ]
    # The size is the output's, never the text: neither the command nor what
    # it printed is in any event.
    assert events[0].size == len(secret) + 1
    assert events[2].size is None and not events[2].ok
    assert secret not in repr(events)
    assert ex.audit_errors == []


def test_executor_audit_from_policy_and_options_with_errors_contained(tree, caplog):
    calls = []

    def bad(ev):
        calls.append(ev)
        raise RuntimeError("boom in exec audit")

    with _exec_policy(tree) as p:
        ex = Executor.from_policy(p, audit=bad)
    with ex, caplog.at_level("ERROR", logger="sandgate"):
        assert ex.exec("echo hi").stdout == b"hi\n"
    assert [c.exit_code for c in calls] == [0]
    assert len(ex.audit_errors) == 1 and isinstance(ex.audit_errors[0], RuntimeError)
    assert "boom in exec audit" in caplog.text

    events = []
    with Executor(
        base_dir=tree, read_roots=["ws"], write_root="ws", enabled=True, shell="/bin/sh", audit=events.append
    ) as ex:
        ex.exec("exit 5")
    assert [(e.op, e.exit_code) for e in events] == [("exec", 5)]
    with pytest.raises(TypeError):
        with _exec_policy(tree) as p:
            Executor(p, audit="not callable")


def test_file_audit_events_have_no_exit_code_or_limit(tree):
    events: list[AuditEvent] = []
    with Sandbox(read_roots=[tree / "ws"], audit=events.append) as sb:
        sb.read("a.txt")
    assert [(e.op, e.exit_code, e.limit) for e in events] == [("read", None, None)]


# ---------------------------------------------------------------------------
# Library lookup


def _import_in_child(env_extra: dict, code: str = "import sandgate; print(sandgate.LIBRARY_PATH)"):
    env = {k: v for k, v in os.environ.items() if k != "SANDGATE_LIBRARY"}
    env.update(env_extra)
    env["PYTHONPATH"] = SRC
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


def test_lookup_env_wins_and_missing_env_is_an_error(tmp_path):
    p = _import_in_child({"SANDGATE_LIBRARY": _ffi.LIBRARY_PATH})
    assert p.returncode == 0 and p.stdout.strip() == os.path.abspath(_ffi.LIBRARY_PATH)
    p = _import_in_child({"SANDGATE_LIBRARY": str(tmp_path / "nope.so")})
    assert p.returncode != 0 and "ImportError" in p.stderr and "nope.so" in p.stderr


def test_lookup_order_and_not_found_message(tmp_path, monkeypatch):
    monkeypatch.setenv("SANDGATE_LIBRARY", "/x/libsandgate.so")
    c = _ffi.candidates()
    assert c[0] == str(Path(_ffi.__file__).resolve().parent / "libsandgate.so")
    assert c[1] == "/x/libsandgate.so"
    root = Path(__file__).resolve().parents[3]
    assert c[2:5] == [str(root / s / "libsandgate.so") for s in ("target/lib", "target/debug", "target/release")]
    # Last, the system's library, when the loader's cache names one.
    assert c[5:] == ([_ffi._system_library()] if _ffi._system_library() else [])
    # A copy of the package outside any checkout, with no library: the
    # error names every place tried.
    import shutil

    pkg = tmp_path / "site" / "sandgate"
    shutil.copytree(Path(_ffi.__file__).parent, pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    # No library anywhere: neither named, nor on the paths the system
    # lookup (ctypes.util.find_library) searches besides its cache.
    hidden = {"SANDGATE_LIBRARY", "LD_LIBRARY_PATH", "LIBRARY_PATH"}
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env["PYTHONPATH"] = str(tmp_path / "site")
    p = subprocess.run([sys.executable, "-c", "import sandgate"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode != 0
    assert "libsandgate.so not found" in p.stderr and str(pkg / "libsandgate.so") in p.stderr
    assert "find_library" in p.stderr and "SANDGATE_LIBRARY" in p.stderr and "To fix" in p.stderr
    # A library the system lookup finds (here through LD_LIBRARY_PATH, as
    # after an install under a prefix) is loaded by the name it answers.
    sysdir = tmp_path / "syslib"
    sysdir.mkdir()
    # Laid out as `cargo xtask install` does: the file, its SONAME, the
    # development link.
    shutil.copy(_ffi.LIBRARY_PATH, sysdir / "libsandgate.so.2.0.0")
    os.symlink("libsandgate.so.2.0.0", sysdir / "libsandgate.so.2")
    os.symlink("libsandgate.so.2", sysdir / "libsandgate.so")
    p = subprocess.run(
        [sys.executable, "-c", "import sandgate; print(sandgate.LIBRARY_PATH)"],
        capture_output=True, text=True, env={**env, "LD_LIBRARY_PATH": str(sysdir)}, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "libsandgate.so.2", p.stdout
    # ... and a copy next to __init__.py is found first.
    shutil.copy(_ffi.LIBRARY_PATH, pkg / "libsandgate.so")
    p = subprocess.run(
        [sys.executable, "-c", "import sandgate; print(sandgate.LIBRARY_PATH)"],
        capture_output=True, text=True, env={**env, "LD_LIBRARY_PATH": str(sysdir)}, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(pkg / "libsandgate.so")


def test_abi_major_mismatch_is_refused():
    class FakeLib:
        pass

    # Another major is refused; a library older than the binding (a lower
    # minor) lacks functions it calls.
    major, minor = _ffi.EXPECTED_ABI_MAJOR, _ffi.EXPECTED_ABI_MINOR
    cases = [
        ((major << 16) | minor, True),
        ((major << 16) | (minor + 5), True),
        (((major - 1) << 16) | 0, False),
        (((major - 1) << 16) | (minor + 2), False),
        (((major + 1) << 16) | minor, False),
        (0, False),
    ]
    if minor > 0:
        cases.append(((major << 16) | (minor - 1), False))
    for v, ok in cases:
        fake = FakeLib()
        fake.sg_abi_version = lambda v=v: v
        if ok:
            _ffi._check_abi(fake, "fake.so")
        else:
            with pytest.raises(ImportError, match="C ABI"):
                _ffi._check_abi(fake, "fake.so")
    assert sandgate.abi_version()[0] == sandgate.EXPECTED_ABI_MAJOR == 2
    assert sandgate.version() == "0.1.0"


# ---------------------------------------------------------------------------
# Options instead of a policy file; host paths


def test_executor_from_keyword_options(tree):
    with Executor(write_root=tree / "ws", enabled=True, timeout_ms=300, base_dir=tree) as ex:
        r = ex.exec("pwd", cwd=str(tree / "ws" / "sub"))
        assert r.exit_code == 0 and r.stdout.decode().strip().endswith("/ws/sub")
        # A sibling spelled with the root's prefix is outside.
        (tree / "ws-secrets").mkdir()
        with pytest.raises(sandgate.PathEscapeError):
            ex.exec("true", cwd=str(tree / "ws-secrets"))
        # A longer call timeout runs under the policy's and says so.
        r = ex.exec("sleep 5", timeout_ms=60_000)
        assert r.exit_code == 124
        assert any("exec.timeout_ms (300 ms)" in n for n in r.confinement["notes"])


def test_bindings6_executor_refuses_a_cwd_in_another_read_root_as_denied(tree):
    # Granted, but no place for a command: E_DENIED as MCP answers, not
    # E_PATH_ESCAPE (outside every root); with a write root and without.
    marker = tree / "ws" / "ran"
    for keys in ({"write_root": "ws", "read_roots": ["ws", "outside"]}, {"read_roots": ["ws", "outside"]}):
        with Executor(**keys, enabled=True, base_dir=tree) as ex:
            for cwd in (tree / "outside", f"{tree}/outside//."):
                with pytest.raises(sandgate.DeniedError):
                    ex.exec(f"touch {marker}", cwd=str(cwd))
            with pytest.raises(sandgate.PathEscapeError):
                ex.exec(f"touch {marker}", cwd=str(tree / "ws-secrets"))
    assert not marker.exists()


def test_policy_options_use_the_file_keys_and_gate(tree):
    with Policy.from_options(base_dir=tree, write_root="ws", enabled=True, timeout_ms=4321) as p:
        s = p.summary()
        assert "4321" in str(s)
        assert s["write_root"].endswith("/ws")
    with pytest.raises(sandgate.PolicyError) as ei:
        Policy.from_options(base_dir=tree, write_root="ws", timeout_ms=0)
    assert ei.value.key == "exec.timeout_ms"
    with pytest.raises(sandgate.PolicyError) as ei:
        Policy.from_options(base_dir=tree, write_roots="ws")
    assert "write_roots" in str(ei.value)
    with pytest.raises(sandgate.PolicyError) as ei:
        Executor(write_root=tree / "nope", enabled=True)
    assert ei.value.key == "fs.write_root"
    with pytest.raises(TypeError):
        with Policy.from_options(base_dir=tree) as p:
            Executor(p, enabled=True)


def test_hostapi18_options_json_cannot_hold_are_request_errors_naming_them(tree):
    # Go and Node refuse an option value JSON cannot hold as it is (NaN, a
    # string with a lone surrogate, bytes that are not UTF-8) with E_REQUEST
    # naming it; Python sent NaN as `NaN` and a lone surrogate as an escape,
    # both refused as "not a JSON object" with no key, and raised a bare
    # TypeError (no code) for bytes.
    cases = [
        ({"exec_ops": float("nan")}, "exec_ops"),
        ({"timeout_ms": float("inf")}, "timeout_ms"),
        ({"exec": {"max_cpu_ms": float("-inf")}}, "exec"),
        ({"write_root": "ws\udcff"}, "write_root"),
        ({"read_roots": ["ws", "x\ud800"]}, "read_roots"),
        ({"write_root": b"ws\xff"}, "write_root"),
        ({"deny_write": [Path("a\udcff")]}, "deny_write"),
    ]
    for options, name in cases:
        with pytest.raises(sandgate.RequestError) as ei:
            Policy.from_options(base_dir=tree, enabled=True, **options)
        assert ei.value.code == "E_REQUEST", options
        assert name in str(ei.value), (options, str(ei.value))
    # UTF-8 bytes and a PathLike are the path they spell.
    with Policy.from_options(base_dir=tree, write_root=b"ws", read_roots=[tree / "ws"]) as p:
        assert p.summary()["write_root"] == str(tree / "ws")
    # A key given twice (flat and in its section) is refused naming it.
    with pytest.raises(sandgate.PolicyError) as ei:
        Policy.from_options(base_dir=tree, write_root="ws", fs={"write_root": "/"})
    assert ei.value.key == "fs.write_root"
    # A number of the wrong kind names its key.
    for v in (-1, 1.5, 2**64, True, "5"):
        with pytest.raises(sandgate.PolicyError) as ei:
            Policy.from_options(base_dir=tree, write_root="ws", enabled=True, timeout_ms=v)
        assert ei.value.key == "exec.timeout_ms", v


def test_host_name_maps_by_components_never_by_prefix(tree):
    (tree / "ws-secrets").mkdir()
    (tree / "ws-secrets" / "key").write_text("secret")
    (tree / "docs").mkdir()
    with Sandbox(read_roots=[tree / "ws", tree / "docs"], write_root=tree / "ws") as sb:
        assert sb.host_name(str(tree / "ws" / "sub" / "b.txt")) == "sub/b.txt"
        assert sb.host_name(tree / "ws") == "."
        assert sb.host_name(str(tree / "ws" / "sub") + "/") == "sub/"
        assert sb.host_name("sub/b.txt") == "sub/b.txt"
        assert sb.host_name(str(tree / "ws" / "new.txt"), write=True) == "new.txt"
        assert sb.host_name(str(tree / "docs" / "x")) == "x"
        for p in (tree / "ws-secrets" / "key", tree, "/etc/passwd"):
            with pytest.raises(sandgate.PathEscapeError):
                sb.host_name(str(p))
        with pytest.raises(sandgate.PathEscapeError):
            sb.host_name(str(tree / "ws-secrets" / "key"), write=True)
        with pytest.raises(sandgate.DeniedError):
            sb.host_name(str(tree / "docs" / "x"), write=True)
        # A climb maps to a name with "..", which every operation refuses.
        climbed = sb.host_name(f"{tree / 'ws'}/../ws-secrets/key")
        assert climbed == "../ws-secrets/key"
        with pytest.raises(sandgate.PathInvalidError):
            sb.read(climbed)


def test_host_name_takes_a_symlinked_root_spelled_both_ways(tree):
    (tree / "link").symlink_to(tree / "ws")
    with Sandbox(read_roots=[tree / "link"], write_root=tree / "link") as sb:
        for root in (tree / "link", tree / "ws"):
            name = sb.host_name(str(root / "a.txt"))
            assert name == "a.txt"
            assert sb.read(name) == b"hello\nworld\n"
            assert sb.host_name(str(root / "b.txt"), write=True) == "b.txt"
        with pytest.raises(sandgate.PathEscapeError):
            sb.host_name(str(tree / "link-other" / "a.txt"))
    # A policy resolves the root when it loads and keeps it as named too.
    with Policy.from_options(base_dir=tree, write_root="link", read_roots=["link"]) as p:
        with Sandbox.from_policy(p) as sb:
            for root in (tree / "link", tree / "ws"):
                assert sb.host_name(str(root / "a.txt")) == "a.txt"
            with pytest.raises(sandgate.PathEscapeError):
                sb.host_name(str(tree / "link-other" / "a.txt"))


def test_arguments_of_the_wrong_type_are_e_request_naming_them(tree: Path, tmp_path: Path) -> None:
    """A value of the wrong type is refused like every other malformed call:
    E_REQUEST naming the argument, a RequestError that is also a TypeError
    (so ``except TypeError`` still catches it). Before, these raised a bare
    TypeError from os.fsencode ("expected str, bytes or os.PathLike object,
    not int", no code, no argument named), or an AttributeError (edit's
    texts, a policy that is not a Policy)."""
    from sandgate import Fetcher, RequestError

    ws = tree / "ws"
    sb = Sandbox(read_roots=[ws], write_root=ws, allow_overwrite=True)
    root = Root(ws)
    policy = Policy.parse("", ws)
    before = sorted(os.listdir(ws))
    cases = [
        (lambda: sb.read(5), "path"),
        (lambda: sb.read(None), "path"),
        (lambda: sb.read_lines(5), "path"),
        (lambda: sb.write(5, "x"), "path"),
        (lambda: sb.write("w.txt", 5), "data"),
        (lambda: sb.edit("a.txt", 1, "x"), "old"),
        (lambda: sb.edit("a.txt", "a", None), "new"),
        (lambda: sb.list(1.5), "path"),
        (lambda: sb.stat([]), "path"),
        (lambda: sb.mkdir(1), "path"),
        (lambda: sb.delete(1), "path"),
        (lambda: sb.rename("a.txt", 2), "dst"),
        (lambda: sb.glob(5), "pattern"),
        (lambda: sb.glob("*", 5), "path"),
        (lambda: sb.grep(5), "pattern"),
        (lambda: sb.host_name(5), "path"),
        (lambda: Sandbox(read_roots=[5]), "read_roots"),
        (lambda: Sandbox(write_root=5), "write_root"),
        (lambda: Sandbox(deny_write=[5]), "deny_write"),
        (lambda: Sandbox.from_policy("policy.toml"), "policy"),
        (lambda: Root(5), "path"),
        (lambda: root.stat(5), "path"),
        (lambda: root.open(5), "path"),
        (lambda: root.open("a.txt", 5), "mode"),
        (lambda: root.rename("a.txt", 5), "dst"),
        (lambda: Policy.load(5), "path"),
        (lambda: Policy.parse("", 5), "base_dir"),
        (lambda: Executor("policy.toml"), "policy"),
        (lambda: Fetcher(None), "policy"),
        (lambda: Fetcher(policy).fetch(5), "url"),
    ]
    for fn, what in cases:
        with pytest.raises(RequestError) as ei:
            fn()
        assert ei.value.code == "E_REQUEST", ei.value
        assert isinstance(ei.value, TypeError), type(ei.value)
        assert what in str(ei.value), str(ei.value)
    ex = Executor(policy)
    try:
        for fn, what in [(lambda: ex.exec(5), "command"), (lambda: ex.exec("true", cwd=5), "cwd")]:
            with pytest.raises(RequestError) as ei:
                fn()
            assert isinstance(ei.value, TypeError) and what in str(ei.value), str(ei.value)
    finally:
        ex.close()
    assert sorted(os.listdir(ws)) == before
    # The right types are as before.
    assert sb.write("w.txt", b"xy") == 2
    assert sb.read(Path("w.txt")) == b"xy"
    sb.delete("w.txt")
    sb.close()
    root.close()


def test_lone_surrogates_in_texts_are_e_request_naming_them(tree: Path) -> None:
    """A str holding a lone surrogate cannot be UTF-8: in edit's texts, in
    content to write and in policy text it is E_REQUEST naming the argument,
    as in a path (and as in Node), never str.encode's UnicodeEncodeError,
    which carries no code. Nothing is written."""
    from sandgate import RequestError

    ws = tree / "ws"
    sb = Sandbox(read_roots=[ws], write_root=ws, allow_overwrite=True)
    cases = [
        (lambda: sb.edit("a.txt", "hel\ud800", "x"), "old"),
        (lambda: sb.edit("a.txt", "hello", "\udc80"), "new"),
        (lambda: sb.write("w.txt", "a\ud800b"), "data"),
        (lambda: sb.write("a.txt", "\udfff", overwrite=True), "data"),
        (lambda: Policy.parse("[fs]\nwrite_root = '\ud800'\n", ws), "text"),
    ]
    for fn, what in cases:
        with pytest.raises(RequestError) as ei:
            fn()
        assert ei.value.code == "E_REQUEST", ei.value
        assert what in str(ei.value), str(ei.value)
    assert (ws / "a.txt").read_text() == "hello\nworld\n"
    assert not (ws / "w.txt").exists()
    # Surrogate pairs are ordinary characters.
    assert sb.edit("a.txt", "hello", "\U0001F600") == 1
    sb.close()


def test_close_while_calls_return_on_other_threads(tree: Path) -> None:
    """Sandbox.close() calls sg_sandbox_close(h) between marking the handle
    closing and freeing it; a call on another thread returning in that
    window saw "closing, nothing in flight" and freed the handle, so
    close() went on with a freed one (a segfault within a few hundred
    rounds). Run in a child process so that a crash is a failure here."""
    code = f"""
import threading, sandgate
d = {str(tree / "ws")!r}
for _ in range(300):
    sb = sandgate.Sandbox(read_roots=[d]); r = sandgate.Root(d)
    go = threading.Event()
    def work():
        go.wait()
        for _ in range(100):
            for f in (lambda: sb.read("a.txt"), lambda: sb.grep("hello"), lambda: r.stat("a.txt")):
                try:
                    f()
                except sandgate.ClosedError:
                    pass
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    go.set()
    sb.close(); r.close()
    for t in ts:
        t.join()
print("ok")
"""
    env = dict(os.environ, PYTHONPATH=SRC)
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, env=env, timeout=240)
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.returncode, p.stderr[-2000:])


def test_grep8_grep_counts_binary_files_passed_over(tree):
    # A binary file (a NUL in its first 8 KiB) holding the pattern after the
    # NUL was skipped in silence: the answer now says how many were.
    ws = tree / "ws"
    (ws / "g8").mkdir()
    (ws / "g8" / "blob.bin").write_bytes(b"head\0hit after the NUL\n")
    (ws / "g8" / "a.txt").write_text("hit\n")
    (ws / "t8").mkdir()
    (ws / "t8" / "a.txt").write_text("hit\n")
    with Sandbox(read_roots=[ws]) as sb:
        found = sb.grep("hit", path="g8")
        assert [m.path for m in found] == ["g8/a.txt"]
        assert (found.binary, found.unreadable) == (1, 0)
        assert sb.grep("hit", path="g8", mode="files").binary == 1
        assert sb.grep("hit", path="g8", mode="count").binary == 1
        assert sb.grep("hit", path="t8").binary == 0
        assert sb.glob("**/*", path="g8").binary == 0


def test_ffi17_a_glob_too_large_to_compile_is_a_request_error_not_internal(tree):
    # 100,000 `*`: its regular expression is over the matcher's size limit.
    # Before, the library's matcher panicked on it and the call answered
    # E_INTERNAL ("a bug in sandgate") with the whole expression as message.
    # Now it is past the 64 KiB cap on a pattern's length, which refuses it
    # before it is compiled, naming its length.
    huge = "*" * 100_000
    with Sandbox(read_roots=[tree / "ws"]) as sb:
        for call in (lambda: sb.glob(huge), lambda: sb.grep("hello", glob=huge)):
            with pytest.raises(sandgate.RequestError) as ei:
                call()
            assert ei.value.code == "E_REQUEST"
            assert "a pattern of 100000 bytes" in str(ei.value) and len(str(ei.value)) < 300
        assert list(sb.glob("*.txt")) == ["a.txt"]


def test_ffi17_authorize_refuses_a_lone_surrogate_or_a_non_str_by_name(tree):
    """A scheme, host or ip with a lone surrogate has no UTF-8 form: E_REQUEST
    naming it, as every other text argument of the binding and the Go and
    Node bindings answer (before: str.encode's UnicodeEncodeError, which has
    no code; bytes for a host raised AttributeError)."""
    with Policy.from_options(tree, allow=["example.com:443"]) as p:
        for what, args in (
            ("scheme", ("https\ud800", "example.com")),
            ("host", ("https", "example.com\udcff")),
            ("ip", ("https", "example.com", 443, "93.184.216.34\ud800")),
        ):
            with pytest.raises(sandgate.RequestError) as ei:
                p.authorize(*args)
            assert ei.value.code == "E_REQUEST" and what in str(ei.value), str(ei.value)
        for what, args in (("host", ("https", b"example.com")), ("scheme", (None, "example.com"))):
            with pytest.raises(sandgate.RequestTypeError) as ei:
                p.authorize(*args)
            assert what in str(ei.value), str(ei.value)
        assert p.authorize("https", "example.com")["allowed"] is True


def test_a_number_that_is_not_an_int_is_refused_by_name(tree):
    """Offsets, limits, counts, timeouts, ports and sizes take an int (or an
    integer type of another library): a float, a numeric string or a bool
    is E_REQUEST naming the argument, as the Go and Node bindings answer.
    Before, ``int()`` read 1.9 as 1 and "7" as 7."""
    import fractions

    class Index:
        def __index__(self):
            return 2

    with Sandbox(read_roots=[tree / "ws"]) as sb:
        calls = (
            ("offset", lambda v: sb.read_lines("a.txt", offset=v)),
            ("limit", lambda v: sb.read_lines("a.txt", limit=v)),
            ("max_results", lambda v: sb.grep("hello", max_results=v)),
            ("before", lambda v: sb.grep("hello", before=v)),
        )
        for what, call in calls:
            for bad in (1.9, 2.0, "2", True, fractions.Fraction(2)):
                with pytest.raises(sandgate.RequestTypeError) as ei:
                    call(bad)
                assert ei.value.code == "E_REQUEST" and what in str(ei.value), (what, bad, str(ei.value))
            call(Index())
        assert sb.read_lines("a.txt", offset=Index()).content == b"world\n"
    with Policy.from_options(tree, allow=["example.com:443"]) as p:
        with pytest.raises(sandgate.RequestTypeError) as ei:
            p.authorize("https", "example.com", 443.0)
        assert "port" in str(ei.value)
        assert p.authorize("https", "example.com", 443)["allowed"] is True


def test_bind20_a_flag_that_is_not_a_bool_is_refused_by_name(tree):
    """Switches take a bool (None: the default): a string such as "false"
    or "no", a number or a list is E_REQUEST naming the argument, as the
    Node binding refuses one (and Go's types do). Before, ``bool()`` read
    ``allow_overwrite="false"`` and ``overwrite="no"`` as True, and a file
    the caller meant to keep was replaced."""
    ws = tree / "ws"
    for what, kwargs in (("allow_overwrite", {"allow_overwrite": "false"}), ("restricted", {"restricted": "no"})):
        with pytest.raises(sandgate.RequestTypeError) as ei:
            Sandbox(read_roots=[ws], write_root=ws, **kwargs)
        assert ei.value.code == "E_REQUEST" and what in str(ei.value), str(ei.value)
    with Sandbox(read_roots=[ws], write_root=ws, allow_overwrite=True) as sb:
        calls = (
            ("overwrite", lambda v: sb.write("a.txt", "replaced\n", overwrite=v)),
            ("all", lambda v: sb.edit("a.txt", "o", "0", all=v)),
            ("write", lambda v: sb.host_name(str(ws / "a.txt"), write=v)),
            ("case_insensitive", lambda v: sb.grep("HELLO", case_insensitive=v)),
            ("gitignore", lambda v: sb.grep("hello", gitignore=v)),
        )
        for what, call in calls:
            for bad in ("false", "no", 0, 1, [], "True"):
                with pytest.raises(sandgate.RequestTypeError) as ei:
                    call(bad)
                assert ei.value.code == "E_REQUEST" and what in str(ei.value), (what, bad, str(ei.value))
        # Nothing was written or edited by the refused calls.
        assert (ws / "a.txt").read_text() == "hello\nworld\n"
        # A bool, and None for the default, are taken.
        assert sb.edit("a.txt", "o", "0", all=True) == 2
        assert sb.write("a.txt", "replaced\n", overwrite=True) == 9
        assert sb.host_name(str(ws / "a.txt"), write=None) == "a.txt"
        assert len(sb.grep("REPLACED", case_insensitive=True)) == 1
    with Policy.from_options(tree, allow=["example.com:443"]) as p:
        with pytest.raises(sandgate.RequestTypeError) as ei:
            p.authorize("https", "example.com", redirect="false")
        assert "redirect" in str(ei.value)
        with pytest.raises(sandgate.RequestTypeError) as ei:
            p.authorize("https", "example.org", raise_on_deny="yes")
        assert "raise_on_deny" in str(ei.value)
    with Root(ws) as r:
        os.symlink("a.txt", ws / "link")
        with pytest.raises(sandgate.RequestTypeError) as ei:
            r.open("link", follow_symlinks="false")
        assert "follow_symlinks" in str(ei.value)


def test_bind20_grep_glob_and_mode_are_not_stringified(tree):
    """grep's ``glob`` and ``mode`` are text: bytes, a number or a list is
    E_REQUEST naming the argument, as the Node binding refuses them. Before,
    ``str()`` turned ``glob=b"*.txt"`` into the pattern ``"b'*.txt'"``,
    which matched nothing, and the search answered an empty list as if no
    file held the text."""
    with Sandbox(read_roots=[tree / "ws"]) as sb:
        assert [m.path for m in sb.grep("hello", glob="*.txt")] == ["a.txt"]
        for what, call in (
            ("glob", lambda v: sb.grep("hello", glob=v)),
            ("mode", lambda v: sb.grep("hello", mode=v)),
        ):
            for bad in (b"*.txt", 7, ["*.txt"]):
                with pytest.raises(sandgate.RequestTypeError) as ei:
                    call(bad)
                assert ei.value.code == "E_REQUEST" and what in str(ei.value), (what, bad, str(ei.value))
        with pytest.raises(sandgate.RequestError) as ei:
            sb.grep("hello", glob="*.t\ud800")
        assert ei.value.code == "E_REQUEST" and "glob" in str(ei.value), str(ei.value)


def test_bind20_policy_options_json_cannot_hold_are_refused_by_name(tree):
    """A policy option value JSON has no form for (a set, an object of
    another type) or a section key that is not text is RequestTypeError
    (E_REQUEST) naming the option; a lone surrogate in a section's key is
    RequestError naming it. Before, the first was json's bare TypeError
    naming no option and carrying no code, a non-text key was turned into
    text (``exec={1: 2}`` asked for a key "1"), and the last a PolicyError
    about a hex escape in JSON text the caller never wrote."""
    ws = str(tree / "ws")
    for what, kwargs in (
        ("read_roots", {"read_roots": {ws}}),
        ("exec.timeout_ms", {"exec": {"timeout_ms": object()}}),
        ("exec", {"exec": {1: 2}}),
    ):
        with pytest.raises(sandgate.RequestTypeError) as ei:
            Policy.from_options(tree, write_root=ws, **kwargs)
        assert ei.value.code == "E_REQUEST" and what in str(ei.value), (what, str(ei.value))
    with pytest.raises(sandgate.RequestError) as ei:
        Policy.from_options(tree, write_root=ws, exec={"enabled\ud800": True})
    assert ei.value.code == "E_REQUEST" and "exec" in str(ei.value), str(ei.value)
    # What JSON holds is taken as before.
    with Policy.from_options(tree, write_root=ws, read_roots=(ws,), exec={"enabled": True}) as p:
        assert p.summary()["read_roots"] == [ws]
