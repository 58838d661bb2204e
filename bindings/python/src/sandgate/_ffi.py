"""Low level: finding and loading libsandgate, the C structs, and an explicit
prototype (``argtypes``/``restype``) for every exported ``sg_*`` function.

Nothing here is public API; use the classes exported by :mod:`sandgate`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char_p,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path

# Status value -> code name, generated from the one code table.
from ._codes import CODE_NAMES  # noqa: F401

#: The ABI major this binding was written against (``SANDGATE_ABI_MAJOR``).
EXPECTED_ABI_MAJOR = 2
#: The least ABI minor this binding needs (``SANDGATE_ABI_MINOR``).
EXPECTED_ABI_MINOR = 4

LIBRARY_ENV = "SANDGATE_LIBRARY"
_LIB_NAME = "libsandgate.so"


# ---------------------------------------------------------------------------
# Structs (layouts from include/sandgate.h)


class sg_bytes(Structure):
    _fields_ = [("ptr", POINTER(c_uint8)), ("len", c_size_t)]


class sg_exec_result(Structure):
    _fields_ = [
        ("exit_code", c_int32),
        ("truncated", c_bool),
        ("timed_out", c_bool),
        ("aborted", c_bool),
        ("duration_ms", c_uint64),
        ("stdout_bytes", sg_bytes),
        ("stderr_bytes", sg_bytes),
        ("confinement_json", sg_bytes),
        ("env_names_digest", sg_bytes),
        ("limit", sg_bytes),
        ("protected_changes_json", sg_bytes),
    ]


class sg_audit_event(Structure):
    _fields_ = [
        ("op", c_char_p),
        ("path", c_void_p),
        ("path_len", c_size_t),
        ("size", c_uint64),
        ("has_size", c_bool),
        ("outcome", c_uint32),
        ("time_sec", c_int64),
        ("time_nsec", c_uint32),
        # ABI 2.1
        ("has_exit_code", c_bool),
        ("exit_code", c_int32),
        ("limit", c_char_p),
    ]


class sg_lines(Structure):
    _fields_ = [
        ("offset", c_uint64),
        ("lines", c_uint64),
        ("total_lines", c_uint64),
        ("truncated", c_bool),
    ]


class sg_stat(Structure):
    _fields_ = [
        ("kind", c_uint32),
        ("mode", c_uint32),
        ("size", c_uint64),
        ("nlink", c_uint64),
        ("dev", c_uint64),
        ("ino", c_uint64),
        ("uid", c_uint32),
        ("gid", c_uint32),
        ("mtime_sec", c_int64),
        ("mtime_nsec", c_uint32),
    ]


sg_audit_fn = CFUNCTYPE(None, c_void_p, POINTER(sg_audit_event))


SG_RESOLVER = {"auto": 0, "openat2": 1, "walk": 2}
SG_KIND = {1: "file", 2: "dir", 3: "symlink", 4: "other"}

# ---------------------------------------------------------------------------
# Prototypes: name -> (restype, argtypes). Every function the library
# exports, each declared in include/sandgate.h (tests/test_header.py checks
# both directions).

_P = c_void_p  # an opaque handle
_PP = POINTER(c_void_p)  # an out-handle / `sg_error **`
_S = c_char_p  # a (pointer, length) string's pointer: bytes or None
_ST = c_uint32  # sg_status
_B = POINTER(sg_bytes)

PROTOTYPES: dict[str, tuple[object, list[object]]] = {
    "sg_abi_version": (c_uint32, []),
    "sg_version": (c_char_p, []),
    "sg_bytes_free": (None, [_B]),
    "sg_error_code": (_ST, [_P]),
    "sg_code_name": (c_char_p, [_ST]),
    "sg_error_code_name": (c_char_p, [_P]),
    "sg_error_message": (c_char_p, [_P]),
    "sg_error_path": (c_char_p, [_P]),
    "sg_error_pattern": (c_char_p, [_P]),
    "sg_error_key": (c_char_p, [_P]),
    "sg_error_errno": (c_int32, [_P]),
    "sg_error_free": (None, [_P]),
    # executor
    "sg_executor_new": (_ST, [_P, _PP, _PP]),
    "sg_executor_free": (None, [_P]),
    "sg_executor_set_audit": (_ST, [_P, sg_audit_fn, c_void_p, _PP]),
    "sg_executor_start": (_ST, [_P, _PP]),
    "sg_executor_dispose": (_ST, [_P, _PP]),
    "sg_executor_exec": (
        _ST,
        [_P, _S, c_size_t, _S, c_size_t, c_uint64, _P, POINTER(sg_exec_result), _PP],
    ),
    "sg_exec_result_free": (None, [POINTER(sg_exec_result)]),
    "sg_abort_new": (_ST, [_PP, _PP]),
    "sg_abort_trigger": (_ST, [_P, _PP]),
    "sg_abort_is_triggered": (c_bool, [_P]),
    "sg_abort_free": (None, [_P]),
    # fetcher
    "sg_fetcher_new": (_ST, [_P, _PP, _PP]),
    "sg_fetcher_free": (None, [_P]),
    "sg_fetcher_fetch": (_ST, [_P, _S, c_size_t, _B, _PP]),
    # policy
    "sg_policy_load": (_ST, [_S, c_size_t, _PP, _PP]),
    "sg_policy_parse": (_ST, [_S, c_size_t, _S, c_size_t, _PP, _PP]),
    "sg_policy_from_options": (_ST, [_S, c_size_t, _S, c_size_t, _PP, _PP]),
    "sg_policy_free": (None, [_P]),
    "sg_policy_digest": (_ST, [_P, _B, _PP]),
    "sg_policy_summary": (_ST, [_P, c_bool, _B, _PP]),
    "sg_policy_authorize": (
        _ST,
        [_P, _S, c_size_t, _S, c_size_t, c_int32, _S, c_size_t, c_bool, _B, _PP],
    ),
    # root
    "sg_root_open": (_ST, [_S, c_size_t, c_uint32, _PP, _PP]),
    "sg_root_open_root": (_ST, [_P, _S, c_size_t, _PP, _PP]),
    "sg_root_free": (None, [_P]),
    "sg_root_name": (_ST, [_P, _B, _PP]),
    "sg_root_open_file": (
        _ST,
        [_P, _S, c_size_t, c_int32, c_uint32, POINTER(c_int32), _PP],
    ),
    "sg_root_mkdir": (_ST, [_P, _S, c_size_t, c_uint32, _PP]),
    "sg_root_remove": (_ST, [_P, _S, c_size_t, _PP]),
    "sg_root_stat": (_ST, [_P, _S, c_size_t, POINTER(sg_stat), _PP]),
    "sg_root_lstat": (_ST, [_P, _S, c_size_t, POINTER(sg_stat), _PP]),
    "sg_root_readlink": (_ST, [_P, _S, c_size_t, _B, _PP]),
    "sg_root_rename": (_ST, [_P, _S, c_size_t, _S, c_size_t, _PP]),
    # sandbox options
    "sg_sandbox_options_new": (_P, []),
    "sg_sandbox_options_from_policy": (_ST, [_P, _PP, _PP]),
    "sg_sandbox_options_free": (None, [_P]),
    "sg_sandbox_options_add_read_root": (_ST, [_P, _S, c_size_t, _PP]),
    "sg_sandbox_options_set_write_root": (_ST, [_P, _S, c_size_t, _PP]),
    "sg_sandbox_options_add_deny_write": (_ST, [_P, _S, c_size_t, _PP]),
    "sg_sandbox_options_set_max_read_bytes": (_ST, [_P, c_uint64, _PP]),
    "sg_sandbox_options_set_max_write_bytes": (_ST, [_P, c_uint64, _PP]),
    "sg_sandbox_options_set_allow_overwrite": (_ST, [_P, c_bool, _PP]),
    "sg_sandbox_options_set_restricted": (_ST, [_P, c_bool, _PP]),
    "sg_sandbox_options_set_resolver": (_ST, [_P, c_uint32, _PP]),
    "sg_sandbox_options_set_fs_ops_budget": (_ST, [_P, c_uint64, _PP]),
    "sg_sandbox_options_set_audit": (_ST, [_P, sg_audit_fn, c_void_p, _PP]),
    # sandbox
    "sg_sandbox_new": (_ST, [_P, _PP, _PP]),
    "sg_sandbox_free": (None, [_P]),
    "sg_sandbox_close": (_ST, [_P, _PP]),
    "sg_sandbox_warnings": (_ST, [_P, _B, _PP]),
    "sg_sandbox_host_name": (_ST, [_P, _S, c_size_t, c_bool, _B, _PP]),
    "sg_sandbox_read": (_ST, [_P, _S, c_size_t, _B, _PP]),
    "sg_sandbox_read_lines": (
        _ST,
        [_P, _S, c_size_t, c_uint64, c_uint64, _B, POINTER(sg_lines), _PP],
    ),
    "sg_sandbox_read_lines_cancellable": (
        _ST,
        [_P, _S, c_size_t, c_uint64, c_uint64, _P, _B, POINTER(sg_lines), _PP],
    ),
    "sg_sandbox_write": (
        _ST,
        [_P, _S, c_size_t, _S, c_size_t, c_bool, POINTER(c_uint64), _PP],
    ),
    "sg_sandbox_edit": (
        _ST,
        [_P, _S, c_size_t, _S, c_size_t, _S, c_size_t, c_bool, POINTER(c_uint64), _PP],
    ),
    "sg_sandbox_list": (_ST, [_P, _S, c_size_t, _B, _PP]),
    "sg_sandbox_stat": (_ST, [_P, _S, c_size_t, POINTER(sg_stat), _PP]),
    "sg_sandbox_mkdir": (_ST, [_P, _S, c_size_t, _PP]),
    "sg_sandbox_delete": (_ST, [_P, _S, c_size_t, _PP]),
    "sg_sandbox_rename": (_ST, [_P, _S, c_size_t, _S, c_size_t, _PP]),
    "sg_sandbox_glob": (_ST, [_P, _S, c_size_t, _S, c_size_t, _B, _PP]),
    "sg_sandbox_grep": (
        _ST,
        [_P, _S, c_size_t, _S, c_size_t, c_uint32, _B, _PP],
    ),
    "sg_sandbox_grep_with": (
        _ST,
        [_P, _S, c_size_t, _S, c_size_t, _S, c_size_t, _B, _PP],
    ),
    # ABI 2.4
    "sg_fetcher_fetch_cancellable": (_ST, [_P, _S, c_size_t, _P, _B, _PP]),
    "sg_sandbox_glob_found_cancellable": (
        _ST,
        [_P, _S, c_size_t, _S, c_size_t, _P, _B, _PP],
    ),
    "sg_sandbox_grep_found_cancellable": (
        _ST,
        [_P, _S, c_size_t, _S, c_size_t, _S, c_size_t, _P, _B, _PP],
    ),
    # ABI 2.3
    "sg_fetcher_set_audit": (_ST, [_P, sg_audit_fn, c_void_p, _PP]),
    # ABI 2.2
    "sg_sandbox_glob_found": (_ST, [_P, _S, c_size_t, _S, c_size_t, _B, _PP]),
    "sg_sandbox_grep_found": (
        _ST,
        [_P, _S, c_size_t, _S, c_size_t, _S, c_size_t, _B, _PP],
    ),
}

# ---------------------------------------------------------------------------
# Finding the library


def _repo_root() -> Path | None:
    """The workspace this package sits in (source checkout), if any."""
    here = Path(__file__).resolve().parent
    for d in [here, *here.parents]:
        if (d / "include" / "sandgate.h").is_file() and (d / "Cargo.toml").is_file():
            return d
    return None


def _system_library() -> str | None:
    """The installed system library's name as the dynamic loader knows it
    (``libsandgate.so.2``), if ``ldconfig`` or the compiler can find one."""
    return ctypes.util.find_library("sandgate")


def candidates() -> list[str]:
    """Where the library is looked for, in order: beside the package (a
    wheel's own copy), ``$SANDGATE_LIBRARY``, a source checkout's build
    directories, then the system's (``ctypes.util.find_library``)."""
    out: list[str] = [str(Path(__file__).resolve().parent / _LIB_NAME)]
    env = os.environ.get(LIBRARY_ENV)
    if env:
        out.append(os.path.abspath(env))
    root = _repo_root()
    if root is not None:
        for sub in ("target/lib", "target/debug", "target/release"):
            out.append(str(root / sub / _LIB_NAME))
    system = _system_library()
    if system is not None:
        out.append(system)
    return out


def _load() -> ctypes.CDLL:
    tried: list[str] = []
    env = os.environ.get(LIBRARY_ENV)
    env_path = os.path.abspath(env) if env else None
    for path in candidates():
        # A bare name (from find_library) is resolved by the dynamic loader.
        if os.sep in path and not os.path.isfile(path):
            tried.append(f"{path} (not found)")
            if path == env_path:
                # An explicit choice that does not exist is an error, not a
                # reason to load something else silently.
                raise ImportError(
                    f"sandgate: {LIBRARY_ENV}={env!r} does not name a file"
                )
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            if path == env_path:
                raise ImportError(f"sandgate: cannot load {path}: {e}") from e
            tried.append(f"{path} ({e})")
            continue
        _check_abi(lib, path)
        lib._sandgate_path = path  # type: ignore[attr-defined]
        return lib
    if _system_library() is None:
        tried.append("the system's libsandgate (ctypes.util.find_library found none)")
    raise ImportError(
        "sandgate: libsandgate.so not found. Tried: "
        + "; ".join(tried)
        + ". To fix: install a sandgate wheel for this platform (its library "
        "sits beside the package), or install the C library system-wide "
        "(`cargo xtask install --prefix /usr/local` in a checkout, then "
        f"`ldconfig`), or set {LIBRARY_ENV} to a libsandgate.so"
    )


def _check_abi(lib: ctypes.CDLL, path: str) -> None:
    try:
        f = lib.sg_abi_version
    except AttributeError as e:
        raise ImportError(f"sandgate: {path} is not libsandgate (no sg_abi_version)") from e
    f.restype = c_uint32
    f.argtypes = []
    v = f()
    major, minor = v >> 16, v & 0xFFFF
    if major != EXPECTED_ABI_MAJOR or minor < EXPECTED_ABI_MINOR:
        raise ImportError(
            f"sandgate: {path} has C ABI {major}.{minor}; this binding needs "
            f"{EXPECTED_ABI_MAJOR}.x with x >= {EXPECTED_ABI_MINOR}"
        )


def _bind(lib: ctypes.CDLL) -> None:
    missing = []
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        f.restype = restype
        f.argtypes = argtypes
    if missing:
        raise ImportError(
            f"sandgate: {lib._sandgate_path} lacks {', '.join(sorted(missing))}"  # type: ignore[attr-defined]
        )


lib = _load()
_bind(lib)
LIBRARY_PATH: str = lib._sandgate_path  # type: ignore[attr-defined]


def preconverted(name: str) -> tuple[ctypes._CFuncPtr, list[object]]:
    """For a hot path: a second function object for ``name`` with the
    declared restype and no argtypes, and the declared argtypes.

    The caller converts every argument ahead of time (or once, and reuses
    the result) with the declared argtype's ``from_param``, or passes what
    that would hand back as is (bytes, None, ``byref(x)``), so the library
    sees exactly what a call of ``lib.<name>`` passes, minus the per-call
    converter calls (about half of ctypes' cost on a ~2 us call).
    ``lib.<name>`` keeps its full prototype; this is a separate object."""
    restype, argtypes = PROTOTYPES[name]
    f = lib[name]  # a new function object, not the cached lib.<name>
    f.restype = restype
    return f, argtypes


# ---------------------------------------------------------------------------
# Helpers


#: The most bytes ``ctypes.string_at`` copies right: it takes its size as
#: a C int, so 2 GiB or more arrives negative (SystemError) or wrapped
#: (4 GiB + 5 bytes copied as 5: a wrong answer, without a word).
_STRING_AT_MAX = 2**31 - 1


def copy_out(ptr: "ctypes._Pointer | int", n: int) -> bytes:
    """The ``n`` bytes at ``ptr``, whatever ``n``."""
    if n <= _STRING_AT_MAX:
        return ctypes.string_at(ptr, n)
    return (ctypes.c_char * n).from_address(ctypes.cast(ptr, c_void_p).value).raw


def take_bytes(b: sg_bytes) -> bytes:
    """Copies `b` out and frees it."""
    try:
        if not b.len or not b.ptr:
            return b""
        return copy_out(b.ptr, b.len)
    finally:
        lib.sg_bytes_free(ctypes.byref(b))
