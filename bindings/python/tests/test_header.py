"""Every function of include/sandgate.h is bound with an explicit prototype
whose arguments match the header's, and every sg_* symbol the library
exports is bound."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sandgate import _ffi

HEADER = Path(__file__).resolve().parents[3] / "include" / "sandgate.h"

# A C parameter type -> a coarse kind, and the same for ctypes types.
_C_KINDS = [
    (re.compile(r"\*"), "ptr"),
    (re.compile(r"^(const )?(sg_status|uint32_t|sg_resolver|sg_kind)$"), "u32"),
    (re.compile(r"^int32_t$"), "i32"),
    # size_t and uint64_t are one ctypes type (c_ulong) on LP64 hosts.
    (re.compile(r"^(uint64_t|size_t)$"), "u64"),
    (re.compile(r"^bool$"), "bool"),
    (re.compile(r"^sg_audit_fn$"), "fn"),
]


def _c_kind(param: str) -> str:
    param = param.strip()
    # Drop the parameter name: the last identifier, unless it is the type.
    m = re.match(r"^(.*?)([A-Za-z_][A-Za-z0-9_]*)$", param)
    assert m, param
    ty = m.group(1).strip() if m.group(1).strip() else param
    for rx, kind in _C_KINDS:
        if rx.search(ty):
            return kind
    raise AssertionError(f"unknown C parameter type in {param!r}")


def _py_kind(t) -> str:
    if t in (ctypes.c_void_p, ctypes.c_char_p) or isinstance(t, type) and issubclass(t, ctypes._Pointer):
        return "ptr"
    if isinstance(t, type) and issubclass(t, ctypes._CFuncPtr):
        return "fn"
    return {
        ctypes.c_uint32: "u32",
        ctypes.c_int32: "i32",
        ctypes.c_uint64: "u64",
        ctypes.c_size_t: "u64",
        ctypes.c_bool: "bool",
    }[t]


def header_functions() -> dict[str, tuple[str, list[str]]]:
    """name -> (return type, [parameter kinds]) for every sg_* prototype."""
    text = HEADER.read_text()
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = {}
    for m in re.finditer(r"([A-Za-z_][\w \*]*?)\b(sg_\w+)\s*\(([^;{]*?)\)\s*;", text, flags=re.S):
        ret, name, params = m.group(1).strip(), m.group(2), m.group(3).strip()
        if "typedef" in ret:
            continue
        kinds = [] if params in ("", "void") else [_c_kind(p) for p in params.split(",")]
        out[name] = (ret, kinds)
    return out


def test_header_parses_to_many_functions():
    fns = header_functions()
    assert len(fns) >= 50, sorted(fns)
    assert "sg_sandbox_read" in fns and "sg_abi_version" in fns


@pytest.mark.parametrize("name", sorted(header_functions()))
def test_every_header_function_is_bound(name):
    ret, kinds = header_functions()[name]
    assert name in _ffi.PROTOTYPES, f"{name} is in sandgate.h but not bound"
    restype, argtypes = _ffi.PROTOTYPES[name]
    assert len(argtypes) == len(kinds), f"{name}: {len(argtypes)} args bound, header has {len(kinds)}"
    assert [_py_kind(t) for t in argtypes] == kinds, name
    f = getattr(_ffi.lib, name)
    assert f.argtypes == argtypes and f.restype is restype
    # The return type agrees too.
    if ret == "void":
        assert restype is None, name
    elif ret == "sg_status" or ret == "uint32_t":
        assert restype is ctypes.c_uint32, name
    elif ret == "bool":
        assert restype is ctypes.c_bool, name
    elif ret == "int32_t":
        assert restype is ctypes.c_int32, name
    elif "char *" in ret:
        assert restype is ctypes.c_char_p, name
    else:
        assert restype is ctypes.c_void_p, (name, ret)


def test_bound_functions_are_in_the_header():
    """Everything bound is declared in the header: the header is complete
    (no exported function is missing from it)."""
    fns = header_functions()
    assert set(_ffi.PROTOTYPES) - set(fns) == set()
    assert set(fns) == set(_ffi.PROTOTYPES)


@pytest.mark.skipif(shutil.which("nm") is None, reason="nm is not installed")
def test_every_exported_symbol_is_bound():
    out = subprocess.run(
        ["nm", "-D", "--defined-only", _ffi.LIBRARY_PATH], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split() and line.split()[-1].startswith("sg_")}
    assert exported, "no sg_ symbols found"
    assert exported - set(_ffi.PROTOTYPES) == set()
    assert set(_ffi.PROTOTYPES) - exported == set()
