"""sandgate: confined file tools, policies, a confined shell executor and a
confined web fetch for AI agents, over libsandgate's C ABI (ctypes, no
compiled extension).

The library is looked up, in order, next to this file (``libsandgate.so``,
where a wheel puts it), at ``$SANDGATE_LIBRARY``, in the source checkout's
``target/lib``, ``target/debug`` and ``target/release``, then as the
system's (``ctypes.util.find_library``). Its C ABI major must be 1.
"""

from ._core import (
    MAX_RANGE_LINES,
    AbortSignal,
    AuditEvent,
    Entry,
    ExecResult,
    Executor,
    Fetcher,
    Found,
    FetchResponse,
    Hop,
    Lines,
    Match,
    Count,
    Policy,
    Root,
    Sandbox,
    StatResult,
    abi_version,
    version,
)
from ._ffi import EXPECTED_ABI_MAJOR, LIBRARY_PATH
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all

__version__ = "0.1.0"

__all__ = [
    "AbortSignal",
    "AuditEvent",
    "Entry",
    "ExecResult",
    "Executor",
    "Fetcher",
    "Found",
    "FetchResponse",
    "Hop",
    "Lines",
    "Match",
    "Count",
    "Policy",
    "Root",
    "Sandbox",
    "StatResult",
    "MAX_RANGE_LINES",
    "EXPECTED_ABI_MAJOR",
    "LIBRARY_PATH",
    "abi_version",
    "version",
    *_errors_all,
]
