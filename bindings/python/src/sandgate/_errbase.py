"""The base class of sandgate's exceptions and the helper that makes one
subclass per error code (the subclasses are generated into ``_codes.py``)."""

from __future__ import annotations


class SandgateError(Exception):
    """Base class of every error sandgate raises."""

    #: The error code name this class stands for.
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
        # Pickle finds the classes where users import them from.
        {"code": code, "default_errno": default_errno, "__doc__": doc or code, "__module__": "sandgate.errors"},
    )
