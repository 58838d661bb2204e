"""sandgate's exceptions: one base class, one subclass per SPEC §8 code.

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

import errno as _errno


class SandgateError(Exception):
    """Base class of every error sandgate raises."""

    #: The SPEC §8 code name this class stands for.
    code: str = "E_INTERNAL"
    #: errno used for an OSError subclass when the library reports none.
    default_errno: int | None = None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        path: str | None = None,
        pattern: str | None = None,
        key: str | None = None,
        errno: int | None = None,
        hops: list | None = None,
        rule: str | None = None,
    ) -> None:
        # One positional argument: OSError's constructor then leaves
        # errno/strerror alone; they are set below.
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.path = path
        self.pattern = pattern
        self.key = key
        self.hops = hops
        self.rule = rule
        if not errno:
            errno = self.default_errno
        self.errno = errno
        if isinstance(self, OSError):
            self.strerror = message
            self.filename = path

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        extra = "".join(
            f", {k}={v!r}"
            for k, v in (("path", self.path), ("pattern", self.pattern), ("key", self.key), ("rule", self.rule))
            if v is not None
        )
        return f"{type(self).__name__}({self.code}: {self.message!r}{extra})"

    def __reduce__(self):  # pickling: keep the keyword fields
        return (
            _rebuild,
            (
                type(self),
                self.message,
                self.code,
                self.path,
                self.pattern,
                self.key,
                self.errno,
                self.hops,
                self.rule,
            ),
        )


def _rebuild(cls, message, code, path, pattern, key, errno, hops=None, rule=None):
    return cls(message, code=code, path=path, pattern=pattern, key=key, errno=errno, hops=hops, rule=rule)


def _cls(name: str, code: str, bases: tuple, default_errno: int | None = None, doc: str = ""):
    return type(
        name,
        (SandgateError, *bases),
        {"code": code, "default_errno": default_errno, "__doc__": doc or code, "__module__": __name__},
    )


PathInvalidError = _cls("PathInvalidError", "E_PATH_INVALID", (ValueError,), doc="The name breaks SPEC §2.")
PathEscapeError = _cls("PathEscapeError", "E_PATH_ESCAPE", (PermissionError,), _errno.EXDEV, "Resolution would leave the root.")
NotFoundError = _cls("NotFoundError", "E_NOT_FOUND", (FileNotFoundError,), _errno.ENOENT)
ExistsError = _cls("ExistsError", "E_EXISTS", (FileExistsError,), _errno.EEXIST)
NotFileError = _cls("NotFileError", "E_NOT_FILE", (IsADirectoryError,), _errno.EISDIR)
NotDirError = _cls("NotDirError", "E_NOT_DIR", (NotADirectoryError,), _errno.ENOTDIR)
NotEmptyError = _cls("NotEmptyError", "E_NOT_EMPTY", (OSError,), _errno.ENOTEMPTY)
DeniedError = _cls("DeniedError", "E_DENIED", (PermissionError,), _errno.EACCES, "The capability is not granted.")
ProtectedError = _cls("ProtectedError", "E_FS_PROTECTED", (PermissionError,), _errno.EACCES, "A deny-write pattern matched.")
TooLargeError = _cls("TooLargeError", "E_TOO_LARGE", (OSError,), _errno.EFBIG)
SymlinkError = _cls("SymlinkError", "E_SYMLINK", (PermissionError,), _errno.ELOOP)
HardlinkError = _cls("HardlinkError", "E_HARDLINK", (PermissionError,), _errno.EMLINK)
LoopError = _cls("LoopError", "E_LOOP", (OSError,), _errno.ELOOP)
EditNoMatchError = _cls("EditNoMatchError", "E_EDIT_NO_MATCH", (ValueError,))
EditAmbiguousError = _cls("EditAmbiguousError", "E_EDIT_AMBIGUOUS", (ValueError,))
PolicyError = _cls("PolicyError", "E_POLICY", (ValueError,))
TimedOutError = _cls("TimedOutError", "E_TIMEOUT", (TimeoutError,), _errno.ETIMEDOUT)
AbortedError = _cls("AbortedError", "E_ABORTED", (InterruptedError,), _errno.EINTR)
NotStartedError = _cls("NotStartedError", "E_NOT_STARTED", (RuntimeError,))
ConfineUnavailableError = _cls("ConfineUnavailableError", "E_CONFINE_UNAVAILABLE", (OSError,), _errno.ENOSYS)
NetDeniedError = _cls("NetDeniedError", "E_NET_DENIED", (PermissionError,), _errno.EACCES)
ClosedError = _cls("ClosedError", "E_CLOSED", (ValueError,), doc="The handle was closed.")
RequestError = _cls("RequestError", "E_REQUEST", (ValueError,), doc="A malformed call.")
SandgateIOError = _cls("SandgateIOError", "E_IO", (OSError,), _errno.EIO)
InternalError = _cls("InternalError", "E_INTERNAL", (RuntimeError,), doc="A bug in sandgate.")

#: code name -> exception class
BY_CODE: dict[str, type[SandgateError]] = {
    c.code: c
    for c in (
        PathInvalidError,
        PathEscapeError,
        NotFoundError,
        ExistsError,
        NotFileError,
        NotDirError,
        NotEmptyError,
        DeniedError,
        ProtectedError,
        TooLargeError,
        SymlinkError,
        HardlinkError,
        LoopError,
        EditNoMatchError,
        EditAmbiguousError,
        PolicyError,
        TimedOutError,
        AbortedError,
        NotStartedError,
        ConfineUnavailableError,
        NetDeniedError,
        ClosedError,
        RequestError,
        SandgateIOError,
        InternalError,
    )
}


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


__all__ = ["SandgateError", "BY_CODE", "error_for"] + [c.__name__ for c in BY_CODE.values()]
