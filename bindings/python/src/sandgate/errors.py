"""sandgate's exceptions: one base class, one subclass per error code.

Each subclass also derives from the builtin exception a Python programmer
would catch for that situation (``except FileNotFoundError`` catches
``E_NOT_FOUND``). ``str(e)`` is the library's message; ``e.code`` the code
name; ``e.path``/``e.pattern``/``e.key`` what the error names (or None);
``e.errno`` the OS error number behind it, or, for an ``OSError`` subclass
whose error had none, the conventional errno of that builtin (``ENOENT``
for ``NotFoundError``), else None. An error raised by ``Fetcher.fetch``
also carries ``e.hops`` (a list of :class:`sandgate.Hop`, possibly empty)
and ``e.rule`` (the ``net.allow`` entry that matched, or None); on other
errors both are None.
"""

from __future__ import annotations

from ._codes import *  # noqa: F401,F403
from ._codes import BY_CODE
from ._codes import __all__ as _codes_all
from ._errbase import SandgateError


class RequestTypeError(RequestError, TypeError):  # type: ignore[misc]  # noqa: F405
    """E_REQUEST for an argument of the wrong type (``sb.read(5)``): a
    :class:`RequestError` naming the argument, and a ``TypeError``, which is
    what Python code catches for one."""

    __module__ = "sandgate.errors"


def error_for(
    code: str,
    message: str,
    *,
    path: str | None = None,
    pattern: str | None = None,
    key: str | None = None,
    errno: int | None = None,
    hops: list | None = None,
    rule: str | None = None,
) -> SandgateError:
    """The exception for `code` (unknown codes get the base class)."""
    cls = BY_CODE.get(code, SandgateError)
    return cls(message, code=code, path=path, pattern=pattern, key=key, errno=errno, hops=hops, rule=rule)


__all__ = ["SandgateError", "RequestTypeError", "error_for", *(n for n in _codes_all if n != "CODE_NAMES")]
