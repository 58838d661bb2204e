"""The build backend (build_backend/sandgate_build.py): the wheel carries
the library and is tagged for the platform; the sdist carries what builds
the library with cargo."""

import base64
import hashlib
import importlib.util
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from sandgate import _ffi

PROJECT = Path(__file__).resolve().parents[1]


def _backend():
    spec = importlib.util.spec_from_file_location("sandgate_build", PROJECT / "build_backend" / "sandgate_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_wheel_is_platform_tagged_and_holds_the_library(tmp_path):
    be = _backend()
    name = be.build_wheel(str(tmp_path), {"library": _ffi.LIBRARY_PATH})
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert name == f"sandgate-0.1.0-py3-none-{plat}.whl"
    with zipfile.ZipFile(tmp_path / name) as z:
        names = set(z.namelist())
        assert {"sandgate/__init__.py", "sandgate/_ffi.py", "sandgate/py.typed", "sandgate/libsandgate.so"} <= names
        assert {"sandgate-0.1.0.dist-info/licenses/LICENSE-APACHE", "sandgate-0.1.0.dist-info/licenses/LICENSE-MIT"} <= names
        assert z.read("sandgate/libsandgate.so") == Path(_ffi.LIBRARY_PATH).read_bytes()
        wheel = z.read("sandgate-0.1.0.dist-info/WHEEL").decode()
        assert f"Tag: py3-none-{plat}" in wheel and "Root-Is-Purelib: false" in wheel
        meta = z.read("sandgate-0.1.0.dist-info/METADATA").decode()
        assert "Name: sandgate\n" in meta and "Requires-Python: >=3.9" in meta
        # RECORD names every other file with its sha256 and size.
        record = z.read("sandgate-0.1.0.dist-info/RECORD").decode().splitlines()
        listed = {line.split(",")[0]: line for line in record}
        assert set(listed) == names
        for arc in names - {"sandgate-0.1.0.dist-info/RECORD"}:
            data = z.read(arc)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert listed[arc] == f"{arc},sha256={digest},{len(data)}"


def test_wheel_without_a_library_says_where_it_looked(tmp_path, monkeypatch):
    be = _backend()
    monkeypatch.delenv("SANDGATE_WHEEL_LIBRARY", raising=False)
    with pytest.raises(RuntimeError, match="does not exist"):
        be.build_wheel(str(tmp_path), {"library": str(tmp_path / "nope.so")})
    assert not any(tmp_path.iterdir()), "a failed build left a file behind"


def test_sdist_carries_the_rust_workspace(tmp_path):
    be = _backend()
    name = be.build_sdist(str(tmp_path))
    assert name == "sandgate-0.1.0.tar.gz"
    with tarfile.open(tmp_path / name) as t:
        names = set(t.getnames())
        base = "sandgate-0.1.0/"
        for f in ("PKG-INFO", "pyproject.toml", "README.md", "LICENSE-MIT", "build_backend/sandgate_build.py",
                  "src/sandgate/_ffi.py", "rust/Cargo.toml", "rust/Cargo.lock", "rust/crates/ffi/Cargo.toml",
                  "rust/crates/ffi/src/lib.rs", "rust/crates/sandgate/Cargo.toml"):
            assert base + f in names, f
        assert not any("/target/" in n or n.endswith(".so") for n in names)
        manifest = t.extractfile(base + "rust/Cargo.toml").read().decode()
    # Only the crates the sdist carries are workspace members.
    assert 'members = ["crates/*"]' in manifest and "xtask" not in manifest and "bindings" not in manifest
    assert "[workspace.dependencies]" in manifest


def _git(cwd, *args):
    import subprocess

    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def test_sdist_from_a_git_checkout_carries_only_tracked_files(tmp_path):
    """A checkout holds files git does not track (a test's node_modules, a
    local .env, an editor's scratch file): the sdist carries what the
    repository tracks, never those."""
    import shutil

    co = tmp_path / "checkout"
    py = co / "bindings" / "python"
    (py / "build_backend").mkdir(parents=True)
    shutil.copy(PROJECT / "build_backend" / "sandgate_build.py", py / "build_backend")
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT / f, py / f)
    (py / "src" / "sandgate").mkdir(parents=True)
    (py / "src" / "sandgate" / "__init__.py").write_text("")
    (co / "crates" / "ffi" / "src").mkdir(parents=True)
    (co / "Cargo.toml").write_text('[workspace]\nmembers = ["crates/*", "xtask"]\n')
    (co / "Cargo.lock").write_text("version = 4\n")
    (co / "crates" / "ffi" / "Cargo.toml").write_text('[package]\nname = "sandgate-ffi"\n')
    (co / "crates" / "ffi" / "src" / "lib.rs").write_text("\n")
    (co / ".gitignore").write_text("node_modules/\n.env\n")
    _git(co, "init", "-q")
    _git(co, "add", "-A")
    _git(co, "commit", "-q", "-m", "tracked")
    # What git does not track: ignored and untracked files, in the crates
    # and in the Python project.
    (co / "crates" / "ffi" / "node_modules" / "pkg").mkdir(parents=True)
    (co / "crates" / "ffi" / "node_modules" / "pkg" / "index.js").write_text("x")
    (co / "crates" / "ffi" / ".env").write_text("TOKEN=secret\n")
    (co / "crates" / "ffi" / "src" / "scratch.rs").write_text("\n")
    (py / "src" / "sandgate" / "scratch.py").write_text("\n")
    (py / "build_backend" / "notes.txt").write_text("\n")

    spec = importlib.util.spec_from_file_location("sandgate_build_co", py / "build_backend" / "sandgate_build.py")
    be = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(be)
    out = tmp_path / "out"
    out.mkdir()
    name = be.build_sdist(str(out))
    with tarfile.open(out / name) as t:
        names = {n.split("/", 1)[1] for n in t.getnames()}
    assert {"rust/crates/ffi/Cargo.toml", "rust/crates/ffi/src/lib.rs", "src/sandgate/__init__.py",
            "build_backend/sandgate_build.py", "rust/Cargo.toml", "rust/Cargo.lock"} <= names, names
    untracked = {"rust/crates/ffi/node_modules/pkg/index.js", "rust/crates/ffi/.env",
                 "rust/crates/ffi/src/scratch.rs", "src/sandgate/scratch.py", "build_backend/notes.txt"}
    assert not (untracked & names), f"the sdist carries files git does not track: {sorted(untracked & names)}"
