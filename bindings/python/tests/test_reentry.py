"""Re-entrant and concurrent use: an audit callback that closes, or calls,
the sandbox or executor it reports on; close from another thread while a
long call runs. Each case runs in a child process under PYTHONMALLOC=debug
with a timeout, so a hang or a crash fails here instead of hanging the
run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

PRELUDE = """
import threading, time, sandgate
d = {ws!r}
def policy():
    return sandgate.Policy.parse(
        '[fs]\\nread_roots = ["ws"]\\nwrite_root = "ws"\\n[exec]\\nenabled = true\\nshell = "/bin/sh"\\ntimeout_ms = 20000\\n',
        {base!r})
"""


def run(tmp_path: Path, body: str) -> str:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("A")
    code = PRELUDE.format(ws=str(tmp_path / "ws"), base=str(tmp_path)) + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=SRC, PYTHONMALLOC="debug")
    try:
        p = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, env=env, timeout=60
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"did not return within 60 s (deadlock): {e.stdout!r} {e.stderr!r}") from None
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-3000:])
    return p.stdout


def test_bind9_audit_callback_may_close_its_sandbox(tmp_path):
    out = run(
        tmp_path,
        """
        box = []
        def audit(ev):
            if ev.op == "read":
                box[0].close()
                print("closed in callback", box[0].closed)
        sb = sandgate.Sandbox(read_roots=[d], audit=audit)
        box.append(sb)
        print("read", sb.read("a.txt"))
        try:
            sb.read("a.txt")
        except sandgate.ClosedError as e:
            print("after", e.code)
        sb.close()
        print("errors", sb.audit_errors)
        """,
    )
    assert out.split("\n")[:4] == ["closed in callback True", "read b'A'", "after E_CLOSED", "errors []"], out


def test_bind9_audit_callback_may_call_its_sandbox_while_close_is_pending(tmp_path):
    out = run(
        tmp_path,
        """
        box, seen = [], []
        def audit(ev):
            seen.append(ev.op)
            if len(seen) == 1:
                print("nested stat", box[0].stat("a.txt").st_size)
            elif len(seen) == 3:
                t = threading.Thread(target=box[0].close)
                t.start(); t.join()
                try:
                    box[0].stat("a.txt")
                except sandgate.ClosedError as e:
                    print("nested after close", e.code)
        sb = sandgate.Sandbox(read_roots=[d], audit=audit)
        box.append(sb)
        print("list", [e.name for e in sb.list(".")])
        print("read", sb.read("a.txt"))
        print("errors", sb.audit_errors)
        """,
    )
    assert out.split("\n")[:5] == [
        "nested stat 1",
        "list ['a.txt']",
        "nested after close E_CLOSED",
        "read b'A'",
        "errors []",
    ], out


def test_bind9_exec_audit_callback_may_close_its_executor(tmp_path):
    out = run(
        tmp_path,
        """
        box = []
        def audit(ev):
            box[0].close()
        with policy() as p:
            ex = sandgate.Executor(p, audit=audit)
            box.append(ex)
            r = ex.exec("echo hi")
            print("exec", r.exit_code, r.stdout)
            try:
                ex.exec("true")
            except sandgate.ClosedError as e:
                print("after", e.code)
            print("errors", ex.audit_errors)
        """,
    )
    assert out.split("\n")[:3] == ["exec 0 b'hi\\n'", "after E_CLOSED", "errors []"], out


def test_bind9_close_from_another_thread_while_a_command_runs(tmp_path):
    out = run(
        tmp_path,
        """
        with policy() as p:
            ex = sandgate.Executor(p)
            res = []
            t = threading.Thread(target=lambda: res.append(ex.exec("sleep 2; echo done")))
            t.start()
            time.sleep(0.3)
            ex.close()
            try:
                ex.exec("true")
            except sandgate.ClosedError as e:
                print("after", e.code)
            t.join()
            print("exec", res[0].exit_code, res[0].stdout)
        """,
    )
    assert out.split("\n")[:2] == ["after E_CLOSED", "exec 0 b'done\\n'"], out


def test_bind9_host_directories_with_a_nul_are_refused_naming_it(tmp_path):
    """A NUL in a host directory answered E_IO "Invalid argument"; it is
    E_PATH_INVALID naming the NUL, as in a name beneath a root."""
    import pytest

    import sandgate

    d = str(tmp_path)
    for bad in (d + "\0", d + "\0/../x", d + "/\0"):
        for open_ in (
            lambda: sandgate.Root(bad),
            lambda: sandgate.Sandbox(read_roots=[bad]),
            lambda: sandgate.Sandbox(write_root=bad),
        ):
            with pytest.raises(sandgate.PathInvalidError, match="NUL"):
                open_()
