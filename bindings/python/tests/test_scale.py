"""Many sandboxes at once from Python threads, through the C ABI: every
thread gets its own sandbox's answers, closing them releases every
descriptor, and a call into the library lets other threads run (ctypes.CDLL
releases the GIL for the duration of a foreign call; PyDLL would not)."""

import os
import resource
import threading
import time
from pathlib import Path

from sandgate import Executor, Policy, Sandbox, SandgateError

ALIVE = 200
THREADS = 8


def _fds() -> int:
    return len(os.listdir("/proc/self/fd")) - 1


def _roots(base: Path, i: int) -> tuple[Path, Path]:
    r, w = base / f"r{i}", base / f"w{i}"
    (r / "sub").mkdir(parents=True)
    w.mkdir()
    (r / "sub" / "id.txt").write_text(f"sandbox {i}\n")
    return r, w


def test_many_sandboxes_from_threads_release_every_descriptor(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4 * ALIVE:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * ALIVE), hard))
    dirs = [_roots(tmp_path, i) for i in range(ALIVE)]
    before = _fds()
    boxes = [Sandbox(read_roots=[r], write_root=w, deny_write=["*.pem"]) for r, w in dirs]
    held = _fds() - before
    assert held <= 2 * ALIVE + 8, f"{ALIVE} sandboxes hold {held} descriptors"

    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for k in range(ALIVE):
                i = (k + t * ALIVE // THREADS) % ALIVE
                sb = boxes[i]
                assert sb.read("sub/id.txt") == f"sandbox {i}\n".encode()
                sb.write(f"t{t}.txt", b"x")
                sb.delete(f"t{t}.txt")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]

    for sb in boxes:
        sb.close()
    assert _fds() == before, "closed sandboxes still hold descriptors"
    try:
        boxes[0].read("sub/id.txt")
    except SandgateError as e:
        assert e.code == "E_CLOSED"
    else:
        raise AssertionError("a closed sandbox answered a read")


def test_a_call_into_the_library_lets_other_threads_run(tmp_path):
    """While one thread is inside a long library call (an executor running
    `sleep 1`), the main thread keeps running Python code. If the call held
    the GIL, the main thread would stall for the whole second."""
    (tmp_path / "ws").mkdir()
    policy = Policy.parse(
        '[fs]\nwrite_root = "ws"\n[exec]\nenabled = true\nshell = "/bin/sh"\ntimeout_ms = 10000\n',
        str(tmp_path),
    )
    with policy as p, Executor(p) as ex:
        inside = threading.Event()
        result = {}

        def call() -> None:
            inside.set()
            result["r"] = ex.exec("sleep 1")

        worker = threading.Thread(target=call)
        worker.start()
        inside.wait()
        start = last = time.monotonic()
        longest = 0.0
        ticks = 0
        while worker.is_alive():
            now = time.monotonic()
            longest = max(longest, now - last)
            last = now
            ticks += 1
        worker.join()
        elapsed = last - start
    assert result["r"].exit_code == 0
    assert elapsed >= 0.9, f"the call returned after {elapsed:.2f} s"
    # Held GIL: one stall of about the whole second. Released: the main
    # thread only waits out the interpreter's switch interval (5 ms) now
    # and then; 0.5 s leaves room for a loaded machine.
    assert longest < 0.5, f"the main thread stalled {longest:.2f} s during the call"
    assert ticks > 1000
