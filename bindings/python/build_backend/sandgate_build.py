"""The PEP 517 build backend of the sandgate Python package (standard
library only).

The package is pure Python plus one shared library, libsandgate.so, loaded
with ctypes. A wheel therefore holds the Python sources and a release
libsandgate.so and is tagged ``py3-none-<platform>``: any Python 3, no
extension ABI, one platform. ``cargo xtask dist`` then has auditwheel retag
it manylinux after checking which glibc symbols the library uses.

Where the library comes from, first found:

1. ``--config-settings library=PATH`` or ``$SANDGATE_WHEEL_LIBRARY``: a
   library built beforehand (``cargo xtask dist`` passes its release build);
2. an sdist's ``rust/`` tree: ``cargo build --release -p sandgate-ffi``
   there (the sdist carries the Rust sources and Cargo.lock);
3. the source checkout this directory sits in: the same cargo build there.

An sdist holds the Python sources, this backend and ``rust/``: the
workspace's crates and Cargo.lock, so ``pip install sandgate-X.tar.gz``
builds the library with cargo where no wheel fits.

From a git checkout, the wheel and the sdist carry only files git tracks
(``git ls-files``): what else lies in the checkout (a test's node_modules,
a local .env, scratch files) is never packaged.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # the project (pyproject.toml)
LIB_NAME = "libsandgate.so"
LIBRARY_ENV = "SANDGATE_WHEEL_LIBRARY"
LICENSES = ("LICENSE-APACHE", "LICENSE-MIT")
# The workspace's parts an sdist carries to build the library.
RUST_FILES = ("Cargo.toml", "Cargo.lock")
RUST_DIRS = ("crates",)


# ---------------------------------------------------------------------------
# Metadata, from pyproject.toml's [project]


def _project() -> dict:
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover - older Pythons get tomli
        import tomli as tomllib  # type: ignore[no-redef]
    with open(HERE / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _metadata() -> str:
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p['description']}",
    ]
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    lic = p.get("license", {})
    if "text" in lic:
        lines.append(f"License: {lic['text']}")
    for label, url in p.get("urls", {}).items():
        lines.append(f"Project-URL: {label}, {url}")
    for c in p.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    for extra, reqs in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for r in reqs:
            lines.append(f'Requires-Dist: {r}; extra == "{extra}"')
    readme = p.get("readme")
    body = ""
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        body = (HERE / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + body


def _dist_name() -> tuple[str, str]:
    p = _project()
    return p["name"].replace("-", "_"), p["version"]


# ---------------------------------------------------------------------------
# The library


def _checkout_root() -> Path | None:
    """The Rust workspace to build the library from: an sdist's rust/, or
    the checkout this project sits in."""
    if (HERE / "rust" / "Cargo.toml").is_file():
        return HERE / "rust"
    for d in HERE.parents:
        if (d / "Cargo.toml").is_file() and (d / "crates" / "ffi" / "Cargo.toml").is_file():
            return d
    return None


def _tracked(root: Path | None) -> set[Path] | None:
    """The files git tracks in ``root`` when it is a git checkout (None
    otherwise: an unpacked sdist or an exported tree is packaged whole).
    A checkout also holds what git does not track (a test's node_modules,
    a local .env, scratch files); none of that goes into a package."""
    if root is None or not (root / ".git").exists():
        return None
    # safe.directory: a checkout owned by another user is still listed; the
    # build runs cargo in it anyway, and ls-files runs nothing of its own.
    cmd = ["git", "-c", f"safe.directory={root}", "-C", str(root), "ls-files", "-z", "--cached"]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        raise RuntimeError(
            f"sandgate build: {root} is a git checkout and `git ls-files` (which names the files "
            f"to package, leaving out what git does not track) failed: {e} {os.fsdecode(detail).strip()}"
        ) from e
    return {root / os.fsdecode(p) for p in out.split(b"\0") if p}


def _library(config_settings: dict | None) -> Path:
    given = (config_settings or {}).get("library") or os.environ.get(LIBRARY_ENV)
    if given:
        path = Path(given).resolve()
        if not path.is_file():
            raise RuntimeError(f"sandgate build: the library {path} (from library= or {LIBRARY_ENV}) does not exist")
        return path
    root = _checkout_root()
    if root is None:
        raise RuntimeError(
            "sandgate build: no libsandgate.so to put in the wheel: pass "
            f"--config-settings library=PATH, set {LIBRARY_ENV}, or build from "
            "the sdist or a source checkout (which need cargo)"
        )
    cargo = os.environ.get("CARGO", "cargo")
    if shutil.which(cargo) is None:
        raise RuntimeError(
            f"sandgate build: building libsandgate from {root} needs cargo (Rust >= 1.88) "
            "on PATH: install Rust with your system's packages or rustup, or install "
            "a sandgate wheel made for your platform instead"
        )
    cmd = [cargo, "build", "--release", "-p", "sandgate-ffi", "--manifest-path", str(root / "Cargo.toml")]
    print("sandgate build:", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    target = os.environ.get("CARGO_TARGET_DIR")
    target_dir = Path(target) if target else root / "target"
    if not target_dir.is_absolute():
        target_dir = root / target_dir
    lib = target_dir / "release" / LIB_NAME
    if not lib.is_file():
        raise RuntimeError(f"sandgate build: cargo finished but {lib} does not exist")
    return lib


def _platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


# ---------------------------------------------------------------------------
# Wheel


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _wheel_files(library: Path) -> list[tuple[str, bytes, int]]:
    """(archive name, content, mode) of every file of the package."""
    files = []
    pkg = HERE / "src" / "sandgate"
    tracked = _tracked(_checkout_root())
    for f in sorted(pkg.iterdir()):
        if tracked is not None and f not in tracked:
            continue
        if f.is_file() and (f.suffix == ".py" or f.name == "py.typed"):
            files.append((f"sandgate/{f.name}", f.read_bytes(), 0o644))
    files.append((f"sandgate/{LIB_NAME}", library.read_bytes(), 0o755))
    return files


def _license_files() -> list[tuple[str, bytes]]:
    out = []
    for name in LICENSES:
        for d in (HERE, *HERE.parents):
            if (d / name).is_file():
                out.append((name, (d / name).read_bytes()))
                break
    return out


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version = _dist_name()
    library = _library(config_settings)
    tag = f"py3-none-{_platform_tag()}"
    wheel_name = f"{name}-{version}-{tag}.whl"
    info = f"{name}-{version}.dist-info"
    entries = list(_wheel_files(library))
    for lic, data in _license_files():
        entries.append((f"{info}/licenses/{lic}", data, 0o644))
    entries.append((f"{info}/METADATA", _metadata().encode(), 0o644))
    wheel_meta = (
        "Wheel-Version: 1.0\n"
        "Generator: sandgate_build\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n"
    )
    entries.append((f"{info}/WHEEL", wheel_meta.encode(), 0o644))
    record = [_record_line(a, d) for a, d, _ in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    out = Path(wheel_directory) / wheel_name
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for arcname, data, mode in entries:
            zi = zipfile.ZipInfo(arcname, date_time=_zip_time())
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(tmp, out)
    return wheel_name


def _zip_time() -> tuple:
    # SOURCE_DATE_EPOCH makes the archive reproducible; zip cannot hold
    # dates before 1980.
    t = max(int(os.environ.get("SOURCE_DATE_EPOCH", time.time())), 315532800)
    return time.gmtime(t)[:6]


# ---------------------------------------------------------------------------
# Sdist


def _sdist_members(root: Path) -> list[tuple[str, Path]]:
    """(name inside the sdist, source path) of every file it carries."""
    members: list[tuple[str, Path]] = []
    tracked = _tracked(root)
    for f in ("pyproject.toml", "README.md"):
        members.append((f, HERE / f))
    for lic in LICENSES:
        for d in (HERE, *HERE.parents):
            if (d / lic).is_file():
                members.append((lic, d / lic))
                break
    for d in ("src", "build_backend"):
        for f in sorted((HERE / d).rglob("*")):
            if tracked is not None and f not in tracked:
                continue
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".so":
                members.append((f.relative_to(HERE).as_posix(), f))
    if (HERE / "rust" / "Cargo.toml").is_file():
        # Rebuilding an sdist from an unpacked sdist.
        for f in sorted((HERE / "rust").rglob("*")):
            if f.is_file() and "target" not in f.relative_to(HERE / "rust").parts:
                members.append((f.relative_to(HERE).as_posix(), f))
        return members
    for f in RUST_FILES:
        members.append((f"rust/{f}", root / f))
    for d in RUST_DIRS:
        for f in sorted((root / d).rglob("*")):
            rel = f.relative_to(root)
            if tracked is not None and f not in tracked:
                continue
            if f.is_file() and "target" not in rel.parts:
                members.append((f"rust/{rel.as_posix()}", f))
    return members


def _sdist_workspace_manifest(text: str) -> str:
    """The checkout's Cargo.toml with only the crates an sdist carries as
    members (the checkout also lists its tooling and the Node addon)."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("members") and "=" in s:
            line = 'members = ["crates/*"]'
        elif s.startswith("exclude") and "=" in s:
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def build_sdist(sdist_directory, config_settings=None):
    name, version = _dist_name()
    root = _checkout_root()
    if root is None:
        raise RuntimeError("sandgate build: an sdist is made from a source checkout (no Cargo workspace found)")
    base = f"{name}-{version}"
    out = Path(sdist_directory) / f"{base}.tar.gz"
    tmp = out.with_name(out.name + ".tmp")
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))

    def add(tar: tarfile.TarFile, arcname: str, data: bytes, mode: int = 0o644) -> None:
        ti = tarfile.TarInfo(f"{base}/{arcname}")
        ti.size, ti.mode, ti.mtime = len(data), mode, mtime
        tar.addfile(ti, io.BytesIO(data))

    with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "PKG-INFO", _metadata().encode())
        for arcname, src in _sdist_members(root):
            data = src.read_bytes()
            if arcname == "rust/Cargo.toml" and not (HERE / "rust").is_dir():
                data = _sdist_workspace_manifest(data.decode()).encode()
            add(tar, arcname, data, 0o755 if os.access(src, os.X_OK) else 0o644)
    os.replace(tmp, out)
    return out.name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
