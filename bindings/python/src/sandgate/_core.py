"""The public classes: Root, Policy, Sandbox, Executor, AbortSignal, Fetcher."""

from __future__ import annotations

import base64
import json
import logging
import math
import operator
import os
import stat as _stat
import threading
from contextlib import contextmanager
from ctypes import byref, c_int32, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import _ffi
from ._ffi import CODE_NAMES, SG_KIND, SG_RESOLVER, lib, sg_bytes, sg_exec_result, sg_lines, sg_stat, take_bytes
from .errors import ClosedError, RequestError, RequestTypeError, SandgateError, error_for

log = logging.getLogger("sandgate")

_U32_MAX = 0xFFFFFFFF
_U64_MAX = 0xFFFFFFFFFFFFFFFF

#: The most lines a ranged read may serve (docs/reference/sandbox.md), the default `limit`.
MAX_RANGE_LINES = 2000


# ---------------------------------------------------------------------------
# Errors across the boundary


def _s(p: bytes | None) -> str | None:
    return None if p is None else p.decode("utf-8", "replace")


def _raise(status: int, err: c_void_p) -> None:
    """Turns a failed call's status and error object into an exception,
    always freeing the error object."""
    e = err.value
    if not e:
        name = CODE_NAMES[status] if status < len(CODE_NAMES) else f"E_UNKNOWN_{status}"
        raise error_for(name, f"sandgate call failed with {name} and no error object")
    try:
        code = _s(lib.sg_error_code_name(e)) or f"E_UNKNOWN_{status}"
        message = _s(lib.sg_error_message(e)) or ""
        path = _s(lib.sg_error_path(e))
        pattern = _s(lib.sg_error_pattern(e))
        key = _s(lib.sg_error_key(e))
        errno = lib.sg_error_errno(e)
    finally:
        lib.sg_error_free(e)
        err.value = None
    raise error_for(code, message, path=path, pattern=pattern, key=key, errno=errno or None)


def _utf8(s: str) -> bytes:
    """``s`` as UTF-8 for the library. A lone surrogate is passed on as
    bytes that are not UTF-8, which the library refuses with E_REQUEST:
    U+DC80..U+DCFF as the byte it escapes (``surrogateescape``), any other
    as its three-byte form (``surrogatepass``), which ``surrogateescape``
    cannot encode."""
    try:
        return s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogatepass")


def _type_error(what: str, expected: str, v: Any) -> RequestTypeError:
    """E_REQUEST for argument ``what`` of the wrong type, naming it (a
    TypeError too), as the other bindings refuse one."""
    return RequestTypeError(f"{what} must be {expected}, not {type(v).__name__}", code="E_REQUEST")


@contextmanager
def _signal(abort: AbortSignal | None):
    """The handle of ``abort`` (None for None), held while the block runs;
    anything but an :class:`AbortSignal` is refused by name."""
    if abort is None:
        yield None
        return
    if not isinstance(abort, AbortSignal):
        raise _type_error("abort", "an AbortSignal", abort)
    a = abort._acquire()
    try:
        yield a
    finally:
        abort._release()


class _Helper:
    """The thread that runs the main thread's long calls, one at a time
    (see :func:`_interruptible`), kept from call to call: starting a thread
    and making an abort signal for each call cost more than a short call
    itself. ``signal`` is the calls' own abort signal, kept until one is
    triggered."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.busy = False
        self.go = threading.Lock()
        self.go.acquire()
        # An Event, not a Lock: a signal handled just after a Lock was
        # taken would leave the waiter taking it a second time.
        self.done = threading.Event()
        self.job: Any = None
        self.result: Any = None
        self.signal: AbortSignal | None = None
        threading.Thread(target=self._serve, name="sandgate-call", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self.go.acquire()
            call, a = self.job
            self.job = None
            try:
                self.result = (True, call(a))
            except BaseException as e:  # handed to the waiting thread
                self.result = (False, e)
            del call
            self.done.set()


_helper: _Helper | None = None


def _interruptible(abort: AbortSignal | None, call: Callable[[Any], Any]) -> Any:
    """``call(a)``, one long library call given the abort handle ``a``,
    made so that a signal handled in Python ends it: Python runs signal
    handlers on the main thread only, between bytecodes, so a Ctrl-C
    (KeyboardInterrupt) or a handler that raises would otherwise wait for
    the call to return, a command's whole timeout. On the main thread the
    call runs on a helper thread that the main thread waits on; an
    exception raised meanwhile triggers ``abort`` (the call's own signal
    when it was given none), waits the call out (it ends within moments:
    the command's process tree ended, the walk or fetch stopped) and is
    raised. Elsewhere (and for a call made by a signal handler while one
    runs) the call is made directly."""
    global _helper
    h = _helper
    if threading.current_thread() is not threading.main_thread() or (h is not None and h.busy):
        with _signal(abort) as a:
            return call(a)
    if h is None or h.pid != os.getpid():  # none yet, or this is a fork's child
        h = _helper = _Helper()
    if abort is None:
        if h.signal is None:
            h.signal = AbortSignal()
        abort = h.signal
    with _signal(abort) as a:
        h.busy = True
        try:
            h.done.clear()
            h.job = (call, a)
            h.go.release()
            try:
                h.done.wait()
            except BaseException:
                lib.sg_abort_trigger(a, None)
                while True:
                    try:
                        if h.done.wait():
                            break
                    except BaseException:  # another signal: the call is ending already
                        pass
                h.result = None
                if abort is h.signal:  # triggered: the next call needs another
                    h.signal.close()
                    h.signal = None
                raise
            ok, v = h.result
            h.result = None
        finally:
            h.busy = False
    if ok:
        return v
    try:
        raise v
    finally:
        del v

def _name(p: str | os.PathLike, what: str = "path") -> bytes:
    """An agent-facing name (UTF-8; a lone surrogate makes it invalid, which
    the library refuses with E_REQUEST)."""
    if isinstance(p, str):
        return _utf8(p)
    if isinstance(p, bytes):
        return p
    if isinstance(p, os.PathLike):
        return _host(p, what)
    raise _type_error(what, "str, bytes or os.PathLike", p)


def _host(p: str | bytes | os.PathLike, what: str = "path") -> bytes:
    """A host path as the file system's bytes (``os.fsencode``). A lone
    surrogate outside U+DC80..U+DCFF has no such bytes: E_REQUEST naming
    the argument, rather than UnicodeEncodeError, which has no code; so is
    an ``__fspath__`` that answers neither str nor bytes."""
    if not isinstance(p, (str, bytes, os.PathLike)):
        raise _type_error(what, "str, bytes or os.PathLike", p)
    try:
        p = os.fspath(p)
    except TypeError:
        raise RequestTypeError(
            f"{what}: {type(p).__name__}.__fspath__() must return str or bytes", code="E_REQUEST"
        ) from None
    try:
        return os.fsencode(p)
    except UnicodeEncodeError as e:
        raise RequestError(
            f"{what} holds a lone surrogate (U+D800..U+DFFF outside a pair) at index {e.start},"
            " which names no file",
            code="E_REQUEST",
        ) from None


def _str(v: Any, what: str) -> str:
    """A str argument (edit texts, a command, a URL)."""
    if not isinstance(v, str):
        raise _type_error(what, "str", v)
    return v


def _text(s: str, what: str) -> bytes:
    """Text the library takes as bytes (content to write, policy text) as
    UTF-8. A lone surrogate has no UTF-8 form: E_REQUEST naming the
    argument, rather than str.encode's UnicodeEncodeError, which has no
    code."""
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RequestError(
            f"{what} holds a lone surrogate (U+D800..U+DFFF outside a pair) at index {e.start},"
            " which UTF-8 cannot hold",
            code="E_REQUEST",
        ) from None


def _policy(p: Any) -> "Policy":
    """A Policy argument."""
    if not isinstance(p, Policy):
        raise _type_error("policy", "a sandgate.Policy", p)
    return p


def _whole(v: Any, what: str) -> int:
    """``v`` as an int: an int, or an integer type of another library
    (``operator.index``); a float, a string, None or a bool is refused by
    name, as the other bindings refuse them (``int()`` would have cut 1.9
    to 1 and read "7" as 7)."""
    if isinstance(v, bool):
        raise _type_error(what, "an int", v)
    try:
        return operator.index(v)
    except TypeError:
        raise _type_error(what, "an int", v) from None


def _flag(v: Any, what: str, default: bool = False) -> bool:
    """A switch: a bool, or None for ``default``. Anything else is refused
    by name, as the Node binding refuses it (``bool()`` would read
    ``"false"`` and ``"no"`` as True, granting what the caller meant to
    withhold)."""
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _type_error(what, "a bool", v)
    return v


def _c_int(v: int, lo: int, hi: int, what: str) -> int:
    """``v`` as an int for a C parameter holding ``lo..hi``. ctypes masks an
    int to the parameter's width without a word (2**32 + 443 would arrive
    as 443), so a value outside the range is refused here."""
    v = _whole(v, what)
    if not lo <= v <= hi:
        raise RequestError(f"{what} must be in {lo}..{hi} (got {v})", code="E_REQUEST")
    return v


def _u32(v: int, what: str) -> int:
    return _c_int(v, 0, _U32_MAX, what)


def _perm(v: int, what: str) -> int:
    """Permission bits for a created file or directory: 0o777 at most, as
    Go's Root allows. The library would set a setuid, setgid or sticky bit
    asked for; a host API that creates files has no need of one."""
    v = _u32(v, what)
    if v & ~0o777:
        raise RequestError(
            f"{what} 0o{v:o}: unsupported file mode (only the permission bits 0o777)", code="E_REQUEST"
        )
    return v


def _i32(v: int, what: str) -> int:
    return _c_int(v, -(2**31), 2**31 - 1, what)


def _data(v: Any, what: str) -> bytes:
    """Bytes-like ``v`` as bytes. An int is refused: ``bytes(n)`` would be
    ``n`` zero bytes (and ``bytes(10**12)`` an attempt to allocate them)."""
    if isinstance(v, int):
        raise _type_error(what, "str or bytes-like", v)
    try:
        return bytes(v)
    except TypeError:
        raise _type_error(what, "str or bytes-like", v) from None


def _resolver(r: str | int) -> int:
    if isinstance(r, str):
        try:
            return SG_RESOLVER[r]
        except KeyError:
            raise RequestError(f"unknown resolver {r!r} (auto, openat2, walk)", code="E_REQUEST") from None
    return _u32(r, "resolver")


def _closed(what: str) -> ClosedError:
    return ClosedError(f"the {what} is closed", code="E_CLOSED")


class _Owner:
    """Owns one library handle and frees it when the last reference to it
    goes away: its wrapper's (``_Handle._owner``, dropped by ``_reap``) and
    those of hot-path calls in flight, which hold it in a local while
    ctypes has released the GIL, so a concurrent close cannot free the
    handle under them. That is the in-flight bookkeeping of those calls,
    at no per-call cost. ``arg`` is the handle converted once for an
    argument declared ``c_void_p`` (see ``_ffi.preconverted``)."""

    __slots__ = ("h", "arg", "_free_fn")

    def __init__(self, h: int, free_fn: Callable[[int], None]) -> None:
        self.h = h
        self.arg = c_void_p.from_param(h)
        self._free_fn = free_fn

    def __del__(self) -> None:
        try:
            self._free_fn(self.h)
        except Exception:  # interpreter shutdown: lib may be gone
            pass


class _Handle:
    """An owned library handle, freed once: by close(), __exit__, or as a
    fallback by __del__. Calls in flight on other threads keep it alive:
    close() frees at once when nothing is in flight, else the last call out
    frees it. (Lock-free: list.append/pop and dict.pop are atomic under the
    GIL; this keeps the per-call cost low. The hot path (``_stat_method``)
    skips the list: it holds the ``_Owner`` itself, see there.)"""

    _what = "handle"
    _free_name = ""
    _h: int | None = None  # the class default once the handle is gone
    _ho: _Owner | None = None  # the owner while open (the hot path's view)
    _closing = False

    def __init__(self, h: int) -> None:
        self._inflight: list = []
        self._h = h
        # _owner lives until _reap; _ho goes at close() already.
        self._owner = self._ho = _Owner(h, getattr(lib, self._free_name))

    def _acquire(self) -> int:
        self._inflight.append(None)
        h = self._h
        if h is None or self._closing:
            self._release()
            raise _closed(self._what)
        return h

    def _release(self) -> None:
        inflight = self._inflight
        inflight.pop()
        if self._closing and not inflight:
            self._reap()

    def _call(self, fn, *args) -> None:
        """``fn(handle, *args, &err)``, raising its error."""
        err = c_void_p()
        h = self._acquire()
        try:
            st = fn(h, *args, byref(err))
        finally:
            self._release()
        if st:
            _raise(st, err)

    def _out(self, fn, *args) -> int | None:
        """``fn(handle, *args, &out, &err)``: the pointer it hands out."""
        out = c_void_p()
        self._call(fn, *args, byref(out))
        return out.value

    def _bytes(self, fn, *args) -> bytes:
        """``fn(handle, *args, &bytes, &err)``: the bytes it hands out."""
        out = sg_bytes()
        try:
            self._call(fn, *args, byref(out))
        except BaseException:
            take_bytes(out)  # frees whatever it handed out (nothing if closed)
            raise
        return take_bytes(out)

    def _bytes_abortable(self, fn, abort: AbortSignal | None, *args) -> bytes:
        """``fn(handle, *args, signal, &bytes, &err)``, the signal held for
        the call (NULL when ``abort`` is None)."""
        return _interruptible(abort, lambda a: self._bytes(fn, *args, a))

    def _reap(self) -> None:
        d = self.__dict__
        h = d.pop("_h", None)  # atomic: one caller wins
        if h is not None:
            d.pop("_ho", None)
            # Frees the handle now, or when the last hot-path call holding
            # the owner returns.
            d.pop("_owner", None)

    def _before_free(self, h: int) -> None:
        """Runs once at close(), before the handle is freed."""

    @property
    def closed(self) -> bool:
        return self._h is None or self._closing

    def close(self) -> None:
        """Frees the handle (at once, or when the last call in flight on
        another thread returns). Later calls raise ClosedError. Idempotent."""
        h = self._h
        if h is None or self._closing:
            return
        # close() is in flight itself until _before_free returns: a call on
        # another thread returning meanwhile sees this entry and leaves the
        # handle alone, rather than freeing it under _before_free.
        self._inflight.append(None)
        try:
            self._closing = True
            self.__dict__.pop("_ho", None)  # hot-path calls raise ClosedError from now on
            self._before_free(h)
        finally:
            self._release()  # frees the handle unless calls are still in flight

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._reap()
        except Exception:  # interpreter shutdown: lib may be gone
            pass


# ---------------------------------------------------------------------------
# Results


_KIND_FIELD = sg_stat.kind


class StatResult(sg_stat):
    """What a stat answers, shaped like :class:`os.stat_result`.

    ``kind`` is ``"file"``, ``"dir"``, ``"symlink"`` or ``"other"``; ``mode``
    the permission bits; ``size`` the size; ``st_mode`` the file type bits
    plus the permission bits, and ``st_size``, ``st_nlink``, ``st_dev``,
    ``st_ino``, ``st_uid``, ``st_gid``, ``st_mtime``, ``st_mtime_ns`` as in
    os.stat_result. ``Sandbox.stat`` fills only kind, mode and size; the
    rest are 0. (It is the C struct itself: no copy is made.)
    """

    __slots__ = ()
    _TYPE_BITS = {1: _stat.S_IFREG, 2: _stat.S_IFDIR, 3: _stat.S_IFLNK, 4: 0}

    @property
    def kind(self) -> str:  # type: ignore[override]
        return SG_KIND.get(_KIND_FIELD.__get__(self), "other")

    st_size = property(lambda self: self.size)
    st_mode = property(lambda self: self._TYPE_BITS.get(_KIND_FIELD.__get__(self), 0) | self.mode)
    st_nlink = property(lambda self: self.nlink)
    st_dev = property(lambda self: self.dev)
    st_ino = property(lambda self: self.ino)
    st_uid = property(lambda self: self.uid)
    st_gid = property(lambda self: self.gid)
    st_mtime = property(lambda self: self.mtime_sec + self.mtime_nsec / 1e9)
    st_mtime_ns = property(lambda self: self.mtime_sec * 1_000_000_000 + self.mtime_nsec)

    def is_file(self) -> bool:
        return _KIND_FIELD.__get__(self) == 1

    def is_dir(self) -> bool:
        return _KIND_FIELD.__get__(self) == 2

    def is_symlink(self) -> bool:
        return _KIND_FIELD.__get__(self) == 3

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "size": self.size, "mode": self.mode}

    def __repr__(self) -> str:
        return (
            f"StatResult(kind={self.kind!r}, mode=0o{self.mode:o}, size={self.size}, "
            f"nlink={self.nlink}, ino={self.ino}, mtime_ns={self.st_mtime_ns})"
        )


@dataclass(frozen=True)
class Entry:
    """One directory entry from :meth:`Sandbox.list`."""

    name: str
    kind: str
    size: int


@dataclass(frozen=True)
class Match:
    """One grep hit, with the context lines asked for (``before``, oldest
    first, and ``after``). ``text`` and each context line hold at most
    1,000 bytes of their line: ``line_truncated`` says ``text`` is not the
    whole line, ``before_truncated`` and ``after_truncated`` the indices
    (into ``before`` and ``after``) of the context lines cut at 1,000
    bytes. ``text`` is the line's start, unless the line's first match ends
    past its first 1,000 bytes: then it starts shortly before the match,
    ``text_start`` bytes into the line."""

    path: str
    line: int
    text: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    line_truncated: bool = False
    before_truncated: tuple[int, ...] = ()
    after_truncated: tuple[int, ...] = ()
    text_start: int = 0


class Found(list):
    """The answer of :meth:`Sandbox.glob` or :meth:`Sandbox.grep`: a list of
    its results that also says whether it was cut. ``truncated`` is true
    when it was; ``limit`` then names the cap: ``"max_results"`` (more
    matched than the answer holds; an answer of exactly the cap is whole),
    ``"walk_entries"`` (the walk stopped at its 200,000 entries, and what
    lies past them was not searched), ``"max_read_bytes"`` (grep passed
    over a file larger than ``max_read_bytes`` without searching it),
    ``"path_length"`` (a directory whose path is 4,096 bytes or longer was
    not entered) or ``"answer_bytes"`` (grep's matches and their context
    lines, each with its path, reached ``max_read_bytes``);
    ``None`` when whole. ``unreadable`` counts the subdirectories the walk
    could not list and the entries whose names are not UTF-8 (and, for
    grep, the files it could not open or read to the end), and so passed
    over; 0 when none. ``binary`` counts the files
    grep passed over unsearched as binary (a NUL in their first 8 KiB); 0
    when none, and always for glob."""

    truncated: bool
    limit: str | None
    unreadable: int
    binary: int

    def __init__(
        self, items, limit: str | None = None, unreadable: int = 0, binary: int = 0
    ):
        super().__init__(items)
        self.limit = limit
        self.truncated = limit is not None
        self.unreadable = unreadable
        self.binary = binary


@dataclass(frozen=True)
class Count:
    """How many lines match in one file (``Sandbox.grep(mode="count")``)."""

    path: str
    count: int


@dataclass(frozen=True)
class Lines:
    """A ranged read: ``content`` (bytes, line endings kept), the first line
    served (``offset``, 1-based), how many were served (``lines``), the
    file's ``total_lines``, and whether the read cap cut it (``truncated``)."""

    content: bytes
    offset: int
    lines: int
    total_lines: int
    truncated: bool
    limit: int

    @property
    def text(self) -> str:
        return self.content.decode("utf-8")


@dataclass(frozen=True)
class AuditEvent:
    """One audit event: the operation, the root-relative path (``"a -> b"``
    for rename), bytes read or written (or None), the outcome code (``"OK"``
    or ``"E_…"``) and when it finished (``time``: seconds since the epoch;
    ``time_ns``: nanoseconds since the epoch).

    An executor's event (``op`` ``"exec"``) has the working directory as
    asked in ``path`` (``""`` for the root), the bytes of output returned in
    ``size``, the command's ``exit_code`` when it ran, and ``limit``
    (``"memory"``, ``"tasks"``, ``"cpu"``, ``"output"``, ``"timeout"`` or ``"file_size"``)
    when one of those stopped it; never the command's text or output. Both
    are None for file operations and refused calls.

    A fetcher's event (``op`` ``"fetch"``) has the origin
    (``scheme://host:port``) of every hop taken in ``path``, ``" -> "``
    between them, and the bytes of body returned in ``size``; never the
    URL's user, password, path or query, nor a header or body."""

    op: str
    path: str
    size: int | None
    outcome: str
    time: float
    time_ns: int
    exit_code: int | None = None
    limit: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "OK"


@dataclass(frozen=True)
class ExecResult:
    """What one command did."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    truncated: bool
    timed_out: bool
    aborted: bool
    duration_ms: int
    # What was in force, as the JSON endpoint's "confined": "fs", "net",
    # "scoped", "seccomp", "namespaces" and "view" (booleans), "missing"
    # (each guarantee not in force, e.g. "namespaces"), "notes".
    confinement: dict = field(default_factory=dict)
    env_names_digest: str = ""
    #: The limit that ended the command, when known: "memory", "tasks",
    #: "cpu", "output", "timeout" or "file_size"; None otherwise.
    limit: str | None = None
    #: What the command did to protected paths and what was done about it:
    #: one dict per entry, {"path", "pattern", "action"} with action
    #: "restored", "quarantined" or "reported".
    protected_changes: list = field(default_factory=list)

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


# ---------------------------------------------------------------------------
# Root


def _open_flags(mode: str) -> tuple[int, str]:
    """open(2) flags for a built-in open() mode string, and the mode to hand
    to open(fd, …)."""
    if not isinstance(mode, str):
        raise _type_error("mode", "a str", mode)
    chars = set(mode)
    if len(chars) != len(mode) or not chars <= set("rwxabt+"):
        raise ValueError(f"invalid mode: {mode!r}")
    kinds = chars & set("rwxa")
    if len(kinds) != 1:
        raise ValueError("must have exactly one of create/read/write/append mode")
    if "b" in chars and "t" in chars:
        raise ValueError("can't have text and binary mode at once")
    plus = "+" in chars
    (k,) = kinds
    if k == "r":
        flags = os.O_RDWR if plus else os.O_RDONLY
    else:
        flags = os.O_RDWR if plus else os.O_WRONLY
        flags |= os.O_CREAT
        flags |= {"w": os.O_TRUNC, "x": os.O_EXCL, "a": os.O_APPEND}[k]
    return flags, mode


#: Path lengths whose size_t argument is converted once (_stat_method).
_SIZE_ARGS_CACHED = 512


def _stat_method(name, doc):
    """Root.stat and Root.lstat, the hot path. ctypes' own cost is about
    half the C call's, so:

    - the C function is bound in the closure as a function object without
      argtypes (``_ffi.preconverted``), each argument being passed already
      converted with its declared type's ``from_param``: the handle once
      per root (``_Owner.arg``), the length from a table of converted
      sizes, the out struct as ``byref`` (what ``POINTER(sg_stat)``'s
      from_param gives), bytes and None as is;
    - the call holds the handle's ``_Owner`` in a local instead of the
      in-flight list: a concurrent close only drops the wrapper's
      reference, and the handle is freed when this call's goes;
    - no error object is asked for (NULL); a failure is asked again with
      one to build the exception."""
    cfn, (handle_t, path_t, size_t, out_t, err_t) = _ffi.preconverted(name)
    # What the conversions below assume of the declared prototype.
    if (handle_t, path_t, size_t, out_t._type_, err_t) != (c_void_p, _ffi._S, c_size_t, sg_stat, _ffi._PP):
        raise TypeError(f"{name}: prototype changed; update _stat_method")
    sizes = tuple(size_t.from_param(n) for n in range(_SIZE_ARGS_CACHED))

    def method(self, path) -> "StatResult":
        if type(path) is str:
            try:
                p = path.encode()  # no error handler to look up for the usual case
            except UnicodeEncodeError:
                p = _host(path)
        else:
            p = _host(path)
        out = StatResult()
        owner = self._ho  # keeps the handle alive until this call returns
        if owner is None:
            raise _closed(self._what)
        try:
            n = sizes[len(p)]
        except IndexError:
            n = size_t.from_param(len(p))
        st = cfn(owner.arg, p, n, byref(out), None)
        if st:
            err = c_void_p()
            st = cfn(owner.arg, p, n, byref(out), byref(err))
            if st:
                del owner  # not kept alive by the exception's traceback
                _raise(st, err)
        return out

    method.__doc__ = doc
    return method


class Root(_Handle):
    """An opened directory that paths resolve beneath (docs/reference/resolution.md): like Go's
    ``os.Root``: relative paths, ``..`` allowed while it stays inside, a
    symlink followed only while it stays inside, absolute symlinks refused.

    ``Root(path, resolver="auto")`` opens ``path``; ``root.open_root(sub)``
    opens a directory beneath it as a root of its own.

    Closing a Root while another thread is still calling it is safe: the
    handle is freed when that call returns, and later calls raise
    ClosedError.
    """

    _what = "root"
    _free_name = "sg_root_free"

    def __init__(self, path: str | bytes | os.PathLike, resolver: str | int = "auto") -> None:
        r = _resolver(resolver)
        p = _host(path)
        out, err = c_void_p(), c_void_p()
        st = lib.sg_root_open(p, len(p), r, byref(out), byref(err))
        if st:
            _raise(st, err)
        super().__init__(out.value)

    @classmethod
    def _wrap(cls, h: int) -> "Root":
        self = cls.__new__(cls)
        _Handle.__init__(self, h)
        return self

    def open_root(self, path: str | bytes | os.PathLike) -> "Root":
        """The directory ``path`` beneath this root, as a root of its own."""
        p = _host(path)
        return Root._wrap(self._out(lib.sg_root_open_root, p, len(p)))

    @property
    def name(self) -> str:
        """The name the root was opened with."""
        return os.fsdecode(self._bytes(lib.sg_root_name))

    def open_fd(self, path, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
        """A raw descriptor for ``path`` opened with ``open(2)`` flags; the
        caller closes it. Supported flags: O_RDONLY, O_WRONLY, O_RDWR,
        O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_NOFOLLOW, O_CLOEXEC (always
        set)."""
        flags, mode = _i32(flags, "flags"), _perm(mode, "mode")
        p = _host(path)
        fd = c_int32(-1)
        self._call(lib.sg_root_open_file, p, len(p), flags, mode, byref(fd))
        return fd.value

    def open(
        self,
        path,
        mode: str = "r",
        buffering: int = -1,
        encoding: str | None = None,
        errors: str | None = None,
        newline: str | None = None,
        *,
        perm: int = 0o666,
        follow_symlinks: bool = True,
    ):
        """Opens ``path`` beneath the root like the built-in :func:`open`
        (same modes: r, w, x, a, with b/t and +) and returns a normal file
        object. ``perm`` is the permission bits of a created file (before
        the umask); ``follow_symlinks=False`` refuses a final symlink."""
        flags, mode = _open_flags(mode)
        perm = _perm(perm, "perm")
        if not _flag(follow_symlinks, "follow_symlinks", True):
            flags |= os.O_NOFOLLOW
        fd = self.open_fd(path, flags, perm)
        # The built-in open() closes a descriptor it was given when it fails
        # after wrapping it (an unknown encoding, a bad newline), and leaves
        # it open when it fails before (binary mode with an encoding): given
        # through an opener, the descriptor is known to be handed over once
        # the opener ran, and is closed here only when it did not.
        handed = False

        def opener(_name, _flags):
            nonlocal handed
            handed = True
            return fd

        try:
            f = open("<sandgate>", mode, buffering, encoding, errors, newline, opener=opener)
        except BaseException:
            if not handed:
                os.close(fd)
            raise
        # Named by its descriptor, as open(fd) names it.
        raw = getattr(f, "buffer", f)
        getattr(raw, "raw", raw).name = fd
        return f

    def mkdir(self, path, mode: int = 0o777) -> None:
        """Creates one directory with the permission bits ``mode`` (before
        the umask; 0o777 at most)."""
        mode = _perm(mode, "mode")
        p = _host(path)
        self._call(lib.sg_root_mkdir, p, len(p), mode)

    def remove(self, path) -> None:
        """Removes a file, a symlink (not its target) or an empty directory."""
        p = _host(path)
        self._call(lib.sg_root_remove, p, len(p))

    # stat and lstat are the hot path (see _stat_method).
    stat = _stat_method("sg_root_stat", "Describes ``path``, following a final symlink beneath the root.")
    lstat = _stat_method("sg_root_lstat", "Describes ``path`` without following a final symlink.")

    def readlink(self, path) -> str:
        """The stored target of the symlink ``path`` (never resolved)."""
        p = _host(path)
        return os.fsdecode(self._bytes(lib.sg_root_readlink, p, len(p)))

    def rename(self, src, dst) -> None:
        """Renames ``src`` to ``dst`` (replacing a file there, like rename(2))."""
        a, b = _host(src, "src"), _host(dst, "dst")
        self._call(lib.sg_root_rename, a, len(a), b, len(b))

    def exists(self, path) -> bool:
        try:
            self.stat(path)
        except FileNotFoundError:
            return False
        return True

    def __repr__(self) -> str:
        if self.closed:
            return "<sandgate.Root closed>"
        return f"<sandgate.Root {self.name!r}>"




# ---------------------------------------------------------------------------
# Policy


class Policy(_Handle):
    """A loaded, checked policy file (docs/reference/policy.md). Immutable and thread-safe.
    Sandboxes and executors made from it outlive it."""

    _what = "policy"
    _free_name = "sg_policy_free"

    def __init__(self, *_a, **_k) -> None:
        raise TypeError(
            "use Policy.load(path), Policy.parse(text, base_dir) or Policy.from_options(**options)"
        )

    @classmethod
    def _wrap(cls, h: int) -> "Policy":
        self = cls.__new__(cls)
        _Handle.__init__(self, h)
        return self

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Policy":
        """Loads and checks the policy file at ``path`` (PolicyError naming
        the key when refused). Relative roots resolve against its directory."""
        p = _name(path)
        out, err = c_void_p(), c_void_p()
        st = lib.sg_policy_load(p, len(p), byref(out), byref(err))
        if st:
            _raise(st, err)
        return cls._wrap(out.value)

    @classmethod
    def parse(cls, text: str | bytes, base_dir: str | os.PathLike) -> "Policy":
        """Checks policy text as if read from a file in ``base_dir``."""
        t = _text(text, "text") if isinstance(text, str) else _data(text, "text")
        b = _name(base_dir, "base_dir")
        out, err = c_void_p(), c_void_p()
        st = lib.sg_policy_parse(t, len(t), b, len(b), byref(out), byref(err))
        if st:
            _raise(st, err)
        return cls._wrap(out.value)

    @classmethod
    def from_options(cls, base_dir: str | os.PathLike | None = None, **options: Any) -> "Policy":
        """A policy from keyword arguments named like the policy file's keys
        (``write_root="work", enabled=True, timeout_ms=5000``; a section may
        be given whole as a dict, ``exec={...}``). Absent keys take the
        file's defaults, and the file's gate rules apply: a refusal is a
        PolicyError naming the dotted key. Relative roots resolve against
        ``base_dir`` (default: the current directory). Paths may be
        ``os.PathLike`` or UTF-8 ``bytes``. A value JSON cannot hold as it
        is (NaN, an infinity, a lone surrogate, bytes that are not UTF-8)
        is a RequestError (``E_REQUEST``) naming the option; a value of the
        wrong type or range, or a key given twice (flat and in its
        section), is a PolicyError whose ``key`` names it."""
        def plain(v: Any, name: str) -> Any:
            # What JSON cannot hold as it is (NaN, infinities, a lone
            # surrogate, bytes that are not UTF-8) is E_REQUEST naming the
            # option, as Go and Node refuse it, never a value it was not.
            if isinstance(v, os.PathLike):
                v = os.fspath(v)
            if isinstance(v, bytes):
                try:
                    v = v.decode("utf-8")
                except UnicodeDecodeError:
                    raise RequestError(f"policy option {name} is not valid UTF-8", code="E_REQUEST") from None
            if isinstance(v, str):
                _text(v, f"policy option {name}")
                return v
            if isinstance(v, float) and not math.isfinite(v):
                raise RequestError(f"policy option {name} is {v}, which JSON cannot hold", code="E_REQUEST")
            if isinstance(v, dict):
                out = {}
                for k, x in v.items():
                    # json.dumps would turn 1, True or None into the text
                    # of a key the caller did not write.
                    if not isinstance(k, str):
                        raise _type_error(f"a key of policy option {name}", "a str", k)
                    _text(k, f"a key of policy option {name}")
                    out[k] = plain(x, f"{name}.{k}")
                return out
            if isinstance(v, (list, tuple)):
                return [plain(x, f"{name}[{i}]") for i, x in enumerate(v)]
            if v is None or isinstance(v, (bool, int, float)):
                return v
            # A set, bytes-like or any other object: json.dumps' TypeError
            # would name neither the option nor a code.
            raise _type_error(f"policy option {name}", "a str, bool, number, list, dict or None", v)

        for k in ("read_roots", "deny_write", "env_inherit", "process_allow", "allow"):
            if isinstance(options.get(k), (str, bytes, os.PathLike)):
                options[k] = [options[k]]
        opts = {k: plain(v, _text(k, "policy option name").decode()) for k, v in options.items()}
        j = json.dumps(opts, allow_nan=False).encode("utf-8")
        b = _name(base_dir if base_dir is not None else os.getcwd(), "base_dir")
        out, err = c_void_p(), c_void_p()
        st = lib.sg_policy_from_options(j, len(j), b, len(b), byref(out), byref(err))
        if st:
            _raise(st, err)
        return cls._wrap(out.value)

    @property
    def digest(self) -> str:
        """``"sha256:<hex>"`` of the policy file's bytes."""
        return self._bytes(lib.sg_policy_digest).decode()

    def summary(self) -> dict:
        """What the policy grants, as a dict (mode, read_roots, write_root,
        deny_write, limits, exec, net, budgets, digest)."""
        return json.loads(self._bytes(lib.sg_policy_summary, False))

    def summary_text(self) -> str:
        """The summary as text for people (what ``sandgate check`` prints)."""
        return self._bytes(lib.sg_policy_summary, True).decode("utf-8")

    def authorize(
        self,
        scheme: str,
        host: str,
        port: int | None = None,
        ip: str | None = None,
        *,
        redirect: bool = False,
        raise_on_deny: bool = False,
    ) -> dict:
        """Asks the network authorizer (docs/reference/policy.md) whether ``scheme://host:port``
        may be dialled (``port`` in 0..65535, None for the scheme's default;
        another value is a RequestError); returns the decision
        ``{"allowed", "reason", "rule"}``.
        With ``raise_on_deny``, a refusal raises NetDeniedError instead."""
        # A non-str or a lone surrogate is E_REQUEST naming the argument,
        # as the other bindings answer (not AttributeError or
        # UnicodeEncodeError, which have no code).
        s, hs = _text(_str(scheme, "scheme"), "scheme"), _text(_str(host, "host"), "host")
        i = _text(_str(ip, "ip"), "ip") if ip is not None else None
        redirect, raise_on_deny = _flag(redirect, "redirect"), _flag(raise_on_deny, "raise_on_deny")
        out, err = sg_bytes(), c_void_p()
        # -1 is the C ABI's "the scheme's default", which None stands for.
        p = -1 if port is None else _c_int(port, 0, 65535, "port")
        h = self._acquire()
        try:
            st = lib.sg_policy_authorize(
                h, s, len(s), hs, len(hs), p, i, len(i) if i else 0, redirect, byref(out), byref(err)
            )
        finally:
            self._release()
        decision = take_bytes(out)
        if st and (raise_on_deny or st != 21 or not decision):
            _raise(st, err)
        if err.value:
            lib.sg_error_free(err.value)
        return json.loads(decision)

    def __repr__(self) -> str:
        if self.closed:
            return "<sandgate.Policy closed>"
        return f"<sandgate.Policy {self.digest}>"


# ---------------------------------------------------------------------------
# Sandbox


def _make_audit(callback: Callable[[AuditEvent], Any], errors: list):
    """A C callback that converts each event and calls ``callback``; an
    exception it raises is logged and kept in ``errors`` (the last 100),
    never propagated into C."""

    def trampoline(_user, ev_ptr):
        try:
            ev = ev_ptr.contents
            path = b"" if not ev.path_len else _ffi.copy_out(ev.path, ev.path_len)
            outcome = CODE_NAMES[ev.outcome] if ev.outcome < len(CODE_NAMES) else str(ev.outcome)
            event = AuditEvent(
                op=(ev.op or b"").decode("utf-8", "replace"),
                path=path.decode("utf-8", "replace"),
                size=ev.size if ev.has_size else None,
                outcome=outcome,
                time=ev.time_sec + ev.time_nsec / 1e9,
                time_ns=ev.time_sec * 1_000_000_000 + ev.time_nsec,
                exit_code=ev.exit_code if ev.has_exit_code else None,
                limit=ev.limit.decode("ascii", "replace") if ev.limit else None,
            )
            callback(event)
        except BaseException as e:  # never unwind into C
            errors.append(e)
            del errors[:-100]
            try:
                log.error("sandgate audit callback raised %r", e, exc_info=e)
            except BaseException:
                pass

    return _ffi.sg_audit_fn(trampoline)


class Sandbox(_Handle):
    """The agent-facing sandbox (docs/reference/names.md and docs/reference/sandbox.md). Names are root-relative,
    ``/``-separated, never absolute or ``..``. Thread-safe.

    ``Sandbox(read_roots=[…], write_root=…, max_read_bytes=…,
    max_write_bytes=…, allow_overwrite=False, deny_write=[…],
    restricted=False, resolver="auto", fs_ops_budget=None, audit=None)``
    grants exactly what it is given; :meth:`from_policy` what a policy
    grants. ``audit`` is a callable taking an :class:`AuditEvent`; it runs on
    the thread that made the call and may call back into the sandbox,
    ``close()`` included (the sandbox is then freed once the call it reports
    on returns). Exceptions it raises are logged and kept in ``audit_errors``.
    """

    _what = "sandbox"
    _free_name = "sg_sandbox_free"

    def __init__(
        self,
        *,
        read_roots: Iterable[str | os.PathLike] = (),
        write_root: str | os.PathLike | None = None,
        max_read_bytes: int | None = None,
        max_write_bytes: int | None = None,
        allow_overwrite: bool | None = None,
        deny_write: Iterable[str] = (),
        restricted: bool | None = None,
        resolver: str | int | None = None,
        fs_ops_budget: int | None = None,
        audit: Callable[[AuditEvent], Any] | None = None,
    ) -> None:
        if isinstance(read_roots, (str, bytes, os.PathLike)):
            read_roots = [read_roots]
        # bytes too: iterated, they would be refused byte by byte as ints.
        if isinstance(deny_write, (str, bytes, os.PathLike)):
            deny_write = [deny_write]
        for what, v in (("read_roots", read_roots), ("deny_write", deny_write)):
            try:
                iter(v)
            except TypeError:
                raise _type_error(what, "a str, bytes, os.PathLike or an iterable of them", v) from None
        opts = lib.sg_sandbox_options_new()
        try:
            err = c_void_p()

            def check(st):
                if st:
                    _raise(st, err)

            for r in read_roots:
                v = _name(r, "read_roots")
                check(lib.sg_sandbox_options_add_read_root(opts, v, len(v), byref(err)))
            if write_root is not None:
                v = _name(write_root, "write_root")
                check(lib.sg_sandbox_options_set_write_root(opts, v, len(v), byref(err)))
            for d in deny_write:
                v = _name(d, "deny_write")
                check(lib.sg_sandbox_options_add_deny_write(opts, v, len(v), byref(err)))
            if max_read_bytes is not None:
                check(lib.sg_sandbox_options_set_max_read_bytes(opts, _u64(max_read_bytes, "max_read_bytes"), byref(err)))
            if max_write_bytes is not None:
                check(lib.sg_sandbox_options_set_max_write_bytes(opts, _u64(max_write_bytes, "max_write_bytes"), byref(err)))
            if allow_overwrite is not None:
                check(lib.sg_sandbox_options_set_allow_overwrite(opts, _flag(allow_overwrite, "allow_overwrite"), byref(err)))
            if restricted is not None:
                check(lib.sg_sandbox_options_set_restricted(opts, _flag(restricted, "restricted"), byref(err)))
            if resolver is not None:
                r = _resolver(resolver)
                check(lib.sg_sandbox_options_set_resolver(opts, r, byref(err)))
            if fs_ops_budget is not None:
                check(lib.sg_sandbox_options_set_fs_ops_budget(opts, _u64(fs_ops_budget, "fs_ops_budget"), byref(err)))
            self._build(opts, audit)
        finally:
            lib.sg_sandbox_options_free(opts)

    def _build(self, opts: int, audit) -> None:
        self.audit_errors: list[BaseException] = []
        self._audit_cb = None
        err = c_void_p()
        if audit is not None:
            if not callable(audit):
                raise _type_error("audit", "callable", audit)
            self._audit_cb = _make_audit(audit, self.audit_errors)
            st = lib.sg_sandbox_options_set_audit(opts, self._audit_cb, None, byref(err))
            if st:
                _raise(st, err)
        out = c_void_p()
        st = lib.sg_sandbox_new(opts, byref(out), byref(err))
        if st:
            _raise(st, err)
        _Handle.__init__(self, out.value)

    @classmethod
    def from_policy(cls, policy: Policy, audit: Callable[[AuditEvent], Any] | None = None) -> "Sandbox":
        """A sandbox with what ``policy`` grants (roots, caps, overwrite
        switch, deny patterns, restricted mode, ``fs_ops`` budget)."""
        self = cls.__new__(cls)
        opts = _policy(policy)._out(lib.sg_sandbox_options_from_policy)
        try:
            self._build(opts, audit)
        finally:
            lib.sg_sandbox_options_free(opts)
        return self

    def _before_free(self, h: int) -> None:
        # Later calls already in flight answer E_CLOSED; the handle is freed
        # when the last of them returns.
        err = c_void_p()
        if lib.sg_sandbox_close(h, byref(err)) and err.value:
            lib.sg_error_free(err.value)

    # -- host paths --

    def host_name(self, path: str | os.PathLike, *, write: bool = False) -> str:
        """The root-relative name of a path the host holds (not one an agent
        gives): an absolute path inside a read root (``write=True``: inside
        the write root), compared with the root component by component, as
        the root was spelled and as its symlinks resolve, never by string
        prefix (``/srv/app-secrets`` is not inside ``/srv/app``). A relative
        name comes back as given. Raises PathInvalidError for a path holding
        a NUL byte (it names no file), PathEscapeError for an absolute path
        outside every root, DeniedError for one in a root of the other kind."""
        p = _host(path)
        return self._bytes(lib.sg_sandbox_host_name, p, len(p), _flag(write, "write")).decode("utf-8")

    # -- reads --

    def read(self, path: str) -> bytes:
        """The whole file (at most ``max_read_bytes``, else TooLargeError)."""
        p = _name(path)
        return self._bytes(lib.sg_sandbox_read, p, len(p))

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read(path).decode(encoding, errors)

    def read_lines(
        self, path: str, offset: int = 1, limit: int = MAX_RANGE_LINES, abort: AbortSignal | None = None
    ) -> Lines:
        """``limit`` lines (1..2000) from line ``offset`` (1-based). The read
        counts every line of the file; ``abort``, once triggered (from any
        thread), stops it with :class:`AbortedError`."""
        offset, limit = _whole(offset, "offset"), _whole(limit, "limit")
        if offset < 1:
            raise RequestError(f"offset must be at least 1 (got {offset})", code="E_REQUEST")
        if limit < 1:
            raise RequestError(f"limit must be at least 1 (got {limit})", code="E_REQUEST")
        p = _name(path)
        content, info, err = sg_bytes(), sg_lines(), c_void_p()
        h = self._acquire()
        try:
            st = _interruptible(
                abort,
                lambda a: lib.sg_sandbox_read_lines_cancellable(
                    h, p, len(p), min(offset, _U64_MAX), min(limit, _U64_MAX), a, byref(content), byref(info), byref(err)
                ),
            )
        except BaseException:
            take_bytes(content)
            if err.value:
                lib.sg_error_free(err.value)
            raise
        finally:
            self._release()
        if st:
            take_bytes(content)
            _raise(st, err)
        data = take_bytes(content)
        return Lines(data, info.offset, info.lines, info.total_lines, bool(info.truncated), limit)

    def list(self, path: str = ".") -> list[Entry]:
        """The directory's entries, sorted by name."""
        p = _name(path)
        return [Entry(e["name"], e["kind"], e["size"]) for e in json.loads(self._bytes(lib.sg_sandbox_list, p, len(p)))]

    def stat(self, path: str) -> StatResult:
        """kind, mode and size of ``path`` (a final symlink followed)."""
        p = _name(path)
        out = StatResult()
        self._call(lib.sg_sandbox_stat, p, len(p), out)
        return out

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
        except FileNotFoundError:
            return False
        return True

    def glob(self, pattern: str, path: str | None = None, *, abort: AbortSignal | None = None) -> Found:
        """The paths matching ``pattern`` below ``path``, sorted by name, at
        most 1,000; the answer's ``truncated`` and ``limit`` say whether it
        was cut (:class:`Found`). ``abort``, once triggered (from any
        thread), stops the walk with :class:`AbortedError`."""
        pt = _name(pattern, "pattern")
        p = None if path is None else _name(path)
        raw = json.loads(
            self._bytes_abortable(
                lib.sg_sandbox_glob_found_cancellable, abort, pt, len(pt), p, len(p) if p else 0
            )
        )
        return Found(raw["paths"], raw["limit"], raw.get("unreadable", 0))

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        max_results: int | None = None,
        *,
        glob: str | None = None,
        case_insensitive: bool = False,
        before: int = 0,
        after: int = 0,
        mode: str = "lines",
        gitignore: bool = False,
        abort: AbortSignal | None = None,
    ) -> Found:
        """Searches files below ``path`` for the regular expression
        ``pattern``, answering at most ``max_results`` results (default 100,
        at most 1000).

        ``glob`` keeps only files whose name (or, with a ``/``, path below
        ``path``) matches; ``case_insensitive`` folds case; ``before`` and
        ``after`` add context lines to each match. ``mode`` says what comes
        back: ``"lines"`` a list of :class:`Match`, ``"files"`` the paths of
        files with a match, ``"count"`` a :class:`Count` per such file.
        ``gitignore`` skips what ``.gitignore``/``.ignore`` files inside the
        root exclude. Symbolic links are never followed. The answer is a
        :class:`Found`: its ``truncated`` and ``limit`` say whether it was
        cut, its ``unreadable`` how many files or directories were passed
        over unread, its ``binary`` how many binary files (a NUL in their
        first 8 KiB) were passed over unsearched; a :class:`Match` says which of its lines were cut at
        1,000 bytes. ``abort``, once triggered (from any thread), stops the
        search with :class:`AbortedError`."""
        opts: dict = {}
        if max_results is not None:
            m = _whole(max_results, "max_results")
            if m < 1:
                raise RequestError(f"max_results must be at least 1 (got {m})", code="E_REQUEST")
            opts["max_results"] = m
        if glob is not None:
            opts["glob"] = _text(_str(glob, "glob"), "glob").decode()
        if _flag(case_insensitive, "case_insensitive"):
            opts["case_insensitive"] = True
        for name, n in (("before", before), ("after", after)):
            n = _whole(n, name)
            if n < 0:
                raise RequestError(f"{name} must not be negative (got {n})", code="E_REQUEST")
            if n:
                opts[name] = n
        if mode != "lines":
            opts["mode"] = _str(mode, "mode")
        if _flag(gitignore, "gitignore"):
            opts["gitignore"] = True
        pt = _name(pattern, "pattern")
        p = None if path is None else _name(path)
        o = json.dumps(opts).encode("utf-8")
        answer = json.loads(
            self._bytes_abortable(
                lib.sg_sandbox_grep_found_cancellable, abort, pt, len(pt), p, len(p) if p else 0, o, len(o)
            )
        )
        limit = answer["limit"]
        unreadable = answer.get("unreadable", 0)
        binary = answer.get("binary", 0)
        if "files" in answer:
            return Found(answer["files"], limit, unreadable, binary)
        if "counts" in answer:
            return Found(
                (Count(x["path"], x["count"]) for x in answer["counts"]), limit, unreadable, binary
            )
        return Found(
            (
                Match(
                    x["path"],
                    x["line"],
                    x["text"],
                    tuple(x.get("before", ())),
                    tuple(x.get("after", ())),
                    x.get("line_truncated", False),
                    tuple(x.get("before_truncated", ())),
                    tuple(x.get("after_truncated", ())),
                    x.get("text_start", 0),
                )
                for x in answer["matches"]
            ),
            limit,
            unreadable,
            binary,
        )

    # -- writes --

    def write(self, path: str, data: str | bytes, overwrite: bool = False) -> int:
        """Writes ``data`` (str: UTF-8) atomically; a new file unless
        ``overwrite`` and the sandbox allows it. Returns the bytes written."""
        if isinstance(data, str):
            data = _text(data, "data")
        else:
            data = _data(data, "data")
        p = _name(path)
        size = c_uint64()
        self._call(lib.sg_sandbox_write, p, len(p), data, len(data), _flag(overwrite, "overwrite"), byref(size))
        return size.value

    def edit(self, path: str, old: str, new: str, all: bool = False) -> int:
        """Replaces ``old`` by ``new`` (exactly once unless ``all``); returns
        the number of replacements."""
        p, o, n = _name(path), _utf8(_str(old, "old")), _utf8(_str(new, "new"))
        count = c_uint64()
        self._call(lib.sg_sandbox_edit, p, len(p), o, len(o), n, len(n), _flag(all, "all"), byref(count))
        return count.value

    def mkdir(self, path: str) -> None:
        """Creates ``path`` and missing parents beneath the write root."""
        p = _name(path)
        self._call(lib.sg_sandbox_mkdir, p, len(p))

    def delete(self, path: str) -> None:
        """Deletes a file, a symlink or an empty directory."""
        p = _name(path)
        self._call(lib.sg_sandbox_delete, p, len(p))

    def rename(self, src: str, dst: str) -> None:
        """Moves ``src`` to ``dst`` (which must not exist) within the write root."""
        a, b = _name(src, "src"), _name(dst, "dst")
        self._call(lib.sg_sandbox_rename, a, len(a), b, len(b))

    def warnings(self) -> list[str]:
        """Warnings about the configuration (e.g. a read root inside the
        write root)."""
        return json.loads(self._bytes(lib.sg_sandbox_warnings))

    def __repr__(self) -> str:
        return "<sandgate.Sandbox closed>" if self.closed else "<sandgate.Sandbox>"


def _u64(v: int, what: str) -> int:
    v = _whole(v, what)
    if v < 0 or v > _U64_MAX:
        raise RequestError(f"{what} must be in 0..2**64-1 (got {v})", code="E_REQUEST")
    return v


# ---------------------------------------------------------------------------
# Executor


class AbortSignal(_Handle):
    """Triggered from any thread with :meth:`abort`: every command running
    with it ends (exit code 130), and later ones end at once."""

    _what = "abort signal"
    _free_name = "sg_abort_free"

    def __init__(self) -> None:
        out, err = c_void_p(), c_void_p()
        st = lib.sg_abort_new(byref(out), byref(err))
        if st:
            _raise(st, err)
        super().__init__(out.value)

    def abort(self) -> None:
        self._call(lib.sg_abort_trigger)

    @property
    def aborted(self) -> bool:
        h = self._acquire()
        try:
            return bool(lib.sg_abort_is_triggered(h))
        finally:
            self._release()

    is_aborted = aborted


def _set_handle_audit(handle: "_Handle", set_fn, audit) -> None:
    """Sets ``audit`` as the callback of an executor or fetcher (``set_fn``
    its ``sg_*_set_audit``); closes the handle if that fails."""
    handle.audit_errors = []
    # Kept on the object: the C library holds only the pointer, which
    # must outlive the handle.
    handle._audit_cb = None
    if audit is None:
        return
    handle._audit_cb = _make_audit(audit, handle.audit_errors)
    try:
        handle._call(set_fn, handle._audit_cb, None)
    except BaseException:
        handle.close()
        raise


class Executor(_Handle):
    """The shell executor ``policy`` grants (docs/reference/executor.md). Thread-safe:
    :meth:`exec` may run on several threads at once. ``start()`` is optional
    (the first exec starts it); ``dispose()`` ends the session; ``close()``
    (or leaving a ``with`` block) disposes and frees it."""

    _what = "executor"
    _free_name = "sg_executor_free"

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        base_dir: str | os.PathLike | None = None,
        audit: Callable[[AuditEvent], Any] | None = None,
        **options: Any,
    ) -> None:
        """``Executor(policy)``, or ``Executor(write_root=..., enabled=True,
        timeout_ms=..., ...)`` with the policy file's key names as keyword
        arguments (:meth:`Policy.from_options`). ``audit`` is a callable
        taking an :class:`AuditEvent`, called once per :meth:`exec` (refused
        ones included) on the thread that made the call; it must not call
        back into the executor. Exceptions it raises are logged and kept in
        ``audit_errors``."""
        if audit is not None and not callable(audit):
            raise _type_error("audit", "callable", audit)
        if policy is None:
            policy = Policy.from_options(base_dir, **options)
            try:
                super().__init__(_policy(policy)._out(lib.sg_executor_new))
            finally:
                policy.close()
        else:
            if options or base_dir is not None:
                raise TypeError("give either a policy or options, not both")
            super().__init__(_policy(policy)._out(lib.sg_executor_new))
        self._set_audit(audit)

    @classmethod
    def from_policy(cls, policy: Policy, audit: Callable[[AuditEvent], Any] | None = None) -> "Executor":
        """The executor ``policy`` grants, reporting to ``audit`` (see the
        class)."""
        return cls(policy, audit=audit)

    def _set_audit(self, audit) -> None:
        _set_handle_audit(self, lib.sg_executor_set_audit, audit)

    def start(self) -> None:
        self._call(lib.sg_executor_start)

    def dispose(self) -> None:
        self._call(lib.sg_executor_dispose)

    def exec(
        self,
        command: str,
        cwd: str | None = None,
        timeout_ms: int | None = None,
        abort: AbortSignal | None = None,
    ) -> ExecResult:
        """Runs ``command`` with the policy's shell in ``cwd`` (a name beneath
        the write root, or the first read root, or an absolute host path
        inside that root) for at most ``timeout_ms`` (None: the policy's; a
        longer one runs under the policy's, and ``confinement["notes"]``
        says so). A command that ran answers a result whatever its exit
        code (124 timeout, 130 abort)."""
        if timeout_ms is None:
            t = 0
        else:
            t = _whole(timeout_ms, "timeout_ms")
            if t < 1:
                raise RequestError(f"timeout_ms must be at least 1 (got {t})", code="E_REQUEST")
            t = min(t, _U64_MAX)
        c = _utf8(_str(command, "command"))
        d = None if cwd is None else _name(cwd, "cwd")
        out, err = sg_exec_result(), c_void_p()
        try:
            h = self._acquire()
            try:
                st = _interruptible(
                    abort,
                    lambda a: lib.sg_executor_exec(h, c, len(c), d, len(d) if d else 0, t, a, byref(out), byref(err)),
                )
            except BaseException:
                if err.value:
                    lib.sg_error_free(err.value)
                raise
            finally:
                self._release()
            if st:
                _raise(st, err)
            confinement = take_bytes(out.confinement_json)
            protected = take_bytes(out.protected_changes_json)
            return ExecResult(
                exit_code=out.exit_code,
                stdout=take_bytes(out.stdout_bytes),
                stderr=take_bytes(out.stderr_bytes),
                truncated=bool(out.truncated),
                timed_out=bool(out.timed_out),
                aborted=bool(out.aborted),
                duration_ms=out.duration_ms,
                confinement=json.loads(confinement) if confinement else {},
                env_names_digest=take_bytes(out.env_names_digest).decode("utf-8", "replace"),
                limit=take_bytes(out.limit).decode("ascii", "replace") or None,
                protected_changes=json.loads(protected) if protected else [],
            )
        finally:
            lib.sg_exec_result_free(byref(out))

    def __repr__(self) -> str:
        return "<sandgate.Executor closed>" if self.closed else "<sandgate.Executor>"


# ---------------------------------------------------------------------------
# Fetcher


@dataclass(frozen=True)
class Hop:
    """One hop of a fetch: the request the authorizer judged and its answer.
    ``addresses`` are the checked addresses the host resolved to;
    ``status`` the HTTP status the hop answered (None when none arrived);
    ``rule`` the ``net.allow`` entry that matched (or None)."""

    url: str
    method: str
    addresses: list
    status: int | None
    allowed: bool
    reason: str
    rule: str | None

    @classmethod
    def _from_json(cls, h: dict) -> "Hop":
        return cls(
            url=h.get("url", ""),
            method=h.get("method", ""),
            addresses=list(h.get("addresses", [])),
            status=h.get("status"),
            allowed=bool(h.get("allowed", False)),
            reason=h.get("reason", ""),
            rule=h.get("rule"),
        )

    def as_dict(self) -> dict[str, Any]:
        """The hop in the JSON endpoint's shape."""
        return {
            "url": self.url,
            "method": self.method,
            "addresses": list(self.addresses),
            "status": self.status,
            "allowed": self.allowed,
            "reason": self.reason,
            "rule": self.rule,
        }


@dataclass(frozen=True)
class FetchResponse:
    """A response, whatever its HTTP status: ``status``, ``headers`` (a dict
    by name; repeated names joined with ``", "``), ``body`` (bytes, cut at
    ``max_bytes``), ``truncated`` (whether it was cut) and ``hops`` (every
    hop, redirects included, in order)."""

    status: int
    headers: dict
    body: bytes
    truncated: bool
    hops: list

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (invalid sequences as U+FFFD)."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


def _opt_count(v: int | None, what: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _type_error(what, "an int", v)
    return v


class Fetcher(_Handle):
    """The confined web fetch ``policy`` grants (docs/reference/policy.md): its ``net.allow``
    entries, ``allow_http``, security mode and ``[budgets] net_ops``. Every
    hop, redirects included, goes through the policy's authorizer; names
    are resolved by sandgate and connections pinned to the checked
    addresses. A proxy set in the environment (``HTTPS_PROXY``,
    ``HTTP_PROXY``, ``ALL_PROXY``) makes restricted mode refuse every fetch.

    Thread-safe: :meth:`fetch` may run on several threads at once (the GIL
    is released during the call). A context manager; ``close()`` frees it.
    """

    _what = "fetcher"
    _free_name = "sg_fetcher_free"

    def __init__(self, policy: Policy, audit: Callable[[AuditEvent], Any] | None = None) -> None:
        """``audit`` is a callable taking an :class:`AuditEvent`, called
        once per :meth:`fetch`, refused ones included (a host not granted,
        a URL that does not parse, a redirect refused, the ``net_ops``
        budget spent, a timeout), on the thread that made the call, after
        it ended: ``op`` ``"fetch"``, ``path`` the origin
        (``scheme://host:port``) of every hop taken, ``" -> "`` between
        them (``""`` for a URL that does not parse), ``size`` the bytes of
        body returned. Never the URL's user, password, path or query, nor a
        header or body. It may call back into the fetcher, ``close()``
        included. Exceptions it raises are logged and kept in
        ``audit_errors``."""
        if audit is not None and not callable(audit):
            raise _type_error("audit", "callable", audit)
        super().__init__(_policy(policy)._out(lib.sg_fetcher_new))
        _set_handle_audit(self, lib.sg_fetcher_set_audit, audit)

    def fetch(
        self,
        url: str,
        *,
        method: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: str | bytes | None = None,
        timeout_ms: int | None = None,
        max_bytes: int | None = None,
        abort: AbortSignal | None = None,
    ) -> FetchResponse:
        """Fetches ``url`` and returns the response whatever its HTTP status.

        ``method`` defaults to GET (CONNECT is refused); ``headers`` may not
        set ``Host``, ``Content-Length``, ``Transfer-Encoding`` or
        ``Connection``; ``body`` is text (sent as UTF-8) or bytes;
        ``timeout_ms`` is one deadline for the whole fetch (at least 1,
        capped by the library); ``max_bytes`` caps the body kept.
        ``abort``, once triggered (from any thread), ends the fetch within
        about 50 ms, its connection closed, with :class:`AbortedError`; one
        already triggered spends no ``net_ops`` budget.

        Raises NetDeniedError for a destination the policy refuses (at any
        hop), DeniedError for a spent ``net_ops`` budget, RequestError for a
        malformed request, TimedOutError, SandgateIOError; the exception
        carries ``.hops`` and ``.rule``."""
        if not isinstance(url, str):
            raise _type_error("url", "a str", url)
        req: dict[str, Any] = {"url": url}
        if method is not None:
            if not isinstance(method, str):
                raise _type_error("method", "a str", method)
            req["method"] = method
        if headers is not None:
            hs = {}
            for k, v in dict(headers).items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise RequestTypeError("headers must map str to str", code="E_REQUEST")
                hs[k] = v
            req["headers"] = hs
        if body is not None:
            if isinstance(body, str):
                req["body"] = body
            elif isinstance(body, (bytes, bytearray, memoryview)):
                req["body_base64"] = base64.b64encode(bytes(body)).decode("ascii")
            else:
                raise _type_error("body", "str or bytes", body)
        t = _opt_count(timeout_ms, "timeout_ms")
        if t is not None:
            req["timeout_ms"] = t
        m = _opt_count(max_bytes, "max_bytes")
        if m is not None:
            req["max_bytes"] = m
        # ASCII JSON: a lone surrogate stays a \u escape, which the library
        # refuses as E_REQUEST.
        r = json.dumps(req).encode("ascii")
        out, err = sg_bytes(), c_void_p()
        h = self._acquire()
        try:
            st = _interruptible(abort, lambda a: lib.sg_fetcher_fetch_cancellable(h, r, len(r), a, byref(out), byref(err)))
        except BaseException:
            take_bytes(out)
            if err.value:
                lib.sg_error_free(err.value)
            raise
        finally:
            self._release()
        raw = take_bytes(out)
        answer = json.loads(raw) if raw else None
        if st or not isinstance(answer, dict) or answer.get("ok") is not True:
            e = answer.get("error") if isinstance(answer, dict) else None
            if not isinstance(e, dict):
                try:
                    if st:
                        _raise(st, err)
                    raise error_for("E_INTERNAL", f"unexpected fetch answer: {raw[:200]!r}")
                except SandgateError as x:
                    x.hops = []
                    raise
            if err.value:
                lib.sg_error_free(err.value)
            raise error_for(
                e.get("code", "E_INTERNAL"),
                e.get("message", ""),
                path=e.get("path"),
                pattern=e.get("pattern"),
                key=e.get("key"),
                hops=[Hop._from_json(x) for x in e.get("hops", [])],
                rule=e.get("rule"),
            )
        if "body_base64" in answer:
            data = base64.b64decode(answer["body_base64"])
        else:
            data = answer.get("body", "").encode("utf-8")
        return FetchResponse(
            status=answer["status"],
            headers=dict(answer.get("headers", {})),
            body=data,
            truncated=bool(answer.get("truncated", False)),
            hops=[Hop._from_json(x) for x in answer.get("hops", [])],
        )

    def __repr__(self) -> str:
        return "<sandgate.Fetcher closed>" if self.closed else "<sandgate.Fetcher>"


def version() -> str:
    """The loaded library's version."""
    return lib.sg_version().decode()


def abi_version() -> tuple[int, int]:
    """The loaded library's C ABI (major, minor)."""
    v = lib.sg_abi_version()
    return v >> 16, v & 0xFFFF
