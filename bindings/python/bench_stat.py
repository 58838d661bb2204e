"""Confined Root.stat of a small file vs os.stat, in the same run.

    SANDGATE_LIBRARY=target/lib/libsandgate.so python3 bindings/python/bench_stat.py [N] [REPEATS]

Prints the median time per call of each over REPEATS runs of N calls
(defaults 100000 x 7) and the ratio Root.stat / os.stat (target <= 2x).
os.stat gets the same relative name with dir_fd set to the root's
directory, and also an absolute path, so the comparison is fair both ways.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import tempfile
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

import sandgate  # noqa: E402
from sandgate import _ffi  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    with tempfile.TemporaryDirectory() as d:
        d = os.path.realpath(d)
        os.mkdir(os.path.join(d, "sub"))
        path = os.path.join(d, "sub", "small.txt")
        with open(path, "w") as f:
            f.write("hello\n")
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        results = {}
        with sandgate.Root(d) as root:
            assert root.stat("sub/small.txt").size == 6
            raw, h, out = _ffi.lib.sg_root_stat, root._h, sandgate.StatResult()
            # the same with the arguments converted ahead (what Root.stat does)
            pre = _ffi.preconverted("sg_root_stat")[0]
            h_arg, n_arg, out_arg = root._ho.arg, ctypes.c_size_t.from_param(13), ctypes.byref(out)
            cases = {
                "os.stat(abs path)": lambda: os.stat(path),
                "os.stat(rel, dir_fd)": lambda: os.stat("sub/small.txt", dir_fd=dfd),
                "Root.stat(rel)": lambda: root.stat("sub/small.txt"),
                # the C call alone, without the binding's Python code
                "raw sg_root_stat": lambda: raw(h, b"sub/small.txt", 13, out, None),
                "raw, preconverted args": lambda: pre(h_arg, b"sub/small.txt", n_arg, out_arg, None),
            }
            for res in ("walk",):
                try:
                    r2 = sandgate.Root(d, resolver=res)
                except sandgate.SandgateError:
                    continue
                cases[f"Root.stat(rel) [{res}]"] = lambda r2=r2: r2.stat("sub/small.txt")
            # interleave the repeats so drift hits every case alike
            times: dict[str, list[float]] = {k: [] for k in cases}
            for _ in range(repeats):
                for k, fn in cases.items():
                    times[k].append(timeit.timeit(fn, number=n) / n)
            for k, ts in times.items():
                results[k] = statistics.median(ts)
        os.close(dfd)
    print(f"library: {sandgate.LIBRARY_PATH}")
    print(f"{n} calls x {repeats} repeats, median per call:")
    for k, t in results.items():
        print(f"  {k:<26} {t * 1e9:8.0f} ns")
    base = results["os.stat(abs path)"]
    print(f"ratio Root.stat / os.stat(abs path)     = {results['Root.stat(rel)'] / base:.2f}x")
    print(f"ratio Root.stat / os.stat(rel, dir_fd)  = {results['Root.stat(rel)'] / results['os.stat(rel, dir_fd)']:.2f}x")
    print(f"ratio raw C call / os.stat(abs path)    = {results['raw sg_root_stat'] / base:.2f}x")
    print(f"binding overhead per call               = {(results['Root.stat(rel)'] - results['raw sg_root_stat']) * 1e9:.0f} ns")
    print(f"  vs the preconverted raw call          = {(results['Root.stat(rel)'] - results['raw, preconverted args']) * 1e9:.0f} ns")


if __name__ == "__main__":
    main()
