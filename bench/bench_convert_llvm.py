"""Throughput of the LLVM-lowered narrow-float conversions (ExecutionEngine, O3, one core).

For every narrow type and both directions (f32 -> narrow, narrow -> f32), at 2^20 .. 2^26
elements, ``func @main(%x: tensor<?xSRC>) -> tensor<?xDST>`` holding one ``stablehlo.convert``
is lowered by ``mxlower-stablehlo-to-llvm{out-params}`` (the conversion is
``mxlower-lower-narrow-floats-to-llvm``'s integer code; LLVM's loop vectorizer vectorizes it),
JIT-compiled once per type pair by :mod:`mxlower.llvm_exec` (in-process, ``opt_level=3``) and
called on preallocated input and output arrays.  Timed against, in the same run:

* a memory copy of the same bytes: ``np.copyto`` (memcpy) of the conversion's input buffer.
  "% of copy bandwidth" compares bytes moved per second: (input + output bytes) / time for
  the conversion, (2 x input bytes) / time for the copy (the definitions of
  bench_convert_xla.py).  Conversion and copy runs alternate, and the ratio is the median of
  the per-round ratios, so that load from other processes on a shared machine hits both;
* ml_dtypes' ``astype`` on the same data (single-threaded NumPy).

Each time is the median of ``--reps`` runs after a warm-up run (``astype``: half as many).
Results are printed as a Markdown table (for BENCHMARKS.md) and, with ``--json``, as JSON.

    python bench/bench_convert_llvm.py                    # about 1-2 minutes on 2 cores
    python bench/bench_convert_llvm.py --sizes 20,24 --types f4E2M1FN --reps 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

from mxlower import llvm_exec
from mxlower import reference as R
from mxlower.formats import FLOAT_TYPES


def module_text(src: str, dst: str) -> str:
    return (f"func.func @main(%x: tensor<?x{src}>) -> tensor<?x{dst}> {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<?x{src}>) -> tensor<?x{dst}>\n"
            f"  return %0 : tensor<?x{dst}>\n}}\n")


def timeit(fn, reps: int) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def inputs(src: str, n: int, rng) -> np.ndarray:
    if src == "f32":  # values spread over the narrow types' ranges, some specials
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n))).astype(np.float32)
        x[::997] = np.inf
        x[1::1009] = np.nan
        return x
    t = FLOAT_TYPES[src]
    return rng.integers(0, 1 << t.bits, n, dtype=np.uint8).view(t.dtype)


def paired(fn_a, fn_b, reps: int) -> tuple[float, float, float]:
    """Interleaved timing of two functions (so that load from other processes hits both
    alike): (median time of a, median time of b, median of the per-round ratios b / a)."""
    fn_a()
    fn_b()
    ta, tb = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn_a()
        t1 = time.perf_counter()
        fn_b()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return (statistics.median(ta), statistics.median(tb),
            statistics.median(b / a for a, b in zip(ta, tb)))


def compile_all(types, vector_width: int = 0) -> dict[tuple[str, str], llvm_exec.Compiled]:
    out = {}
    for t in types:
        for src, dst in (("f32", t), (t, "f32")):
            out[src, dst] = llvm_exec.compile(module_text(src, dst), out_params=True,
                                              isolate=False, opt_level=3,
                                              vector_width=vector_width)
    return out


def bench(types, sizes, reps, handles) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for logn in sizes:
        n = 1 << logn
        x32 = inputs("f32", n, rng)
        dst32 = np.empty_like(x32)
        for t in types:
            ft = FLOAT_TYPES[t]
            for src, dst in (("f32", t), (t, "f32")):
                x = x32 if src == "f32" else inputs(t, n, rng)
                copy_dst = dst32 if src == "f32" else np.empty_like(x)
                out = np.empty(n, dtype=ft.dtype if dst == t else np.float32)
                h = handles[src, dst]
                conv_t, copy_t, copy_over_conv = paired(
                    lambda h=h, x=x, out=out: h.run("main", x, out=[out]),
                    lambda x=x, c=copy_dst: np.copyto(c, x), reps)
                ml_dt = ft.dtype if dst == t else np.float32
                ml_t = timeit(lambda x=x, ml_dt=ml_dt: x.astype(ml_dt), max(1, reps // 2))
                if dst == t:
                    assert np.array_equal(out.view(np.uint8), R.bits(R.convert(x, dst))), t
                moved = n * (4 + 1)
                copy_moved = 2 * x.nbytes
                rows.append({
                    "log2n": logn, "type": t, "direction": f"{src}->{dst}",
                    "ns_per_elem": conv_t / n * 1e9,
                    "gbps": moved / conv_t / 1e9,
                    "copy_gbps": copy_moved / copy_t / 1e9,
                    # bandwidth ratio, from the per-round time ratios
                    "vs_copy": copy_over_conv * moved / copy_moved,
                    "ml_dtypes_ns_per_elem": ml_t / n * 1e9,
                    "vs_ml_dtypes": ml_t / conv_t,
                })
                r = rows[-1]
                print(f"2^{logn} {r['direction']:>16}: {r['ns_per_elem']:.3f} ns/elem "
                      f"{r['gbps']:.1f} GB/s, {100 * r['vs_copy']:.0f}% of copy "
                      f"({r['copy_gbps']:.1f} GB/s), {r['vs_ml_dtypes']:.1f}x ml_dtypes",
                      file=sys.stderr, flush=True)
    return rows


def markdown(rows) -> str:
    out = ["| elements | conversion | ns/elem | GB/s moved | copy GB/s | % of copy "
           "| ml_dtypes ns/elem | x ml_dtypes |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| 2^{r['log2n']} | {r['direction']} | {r['ns_per_elem']:.3f} | "
                   f"{r['gbps']:.2f} | {r['copy_gbps']:.2f} | {100 * r['vs_copy']:.0f}% | "
                   f"{r['ml_dtypes_ns_per_elem']:.2f} | {r['vs_ml_dtypes']:.1f} |")
    return "\n".join(out)


def cpu_model() -> str:
    try:
        cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return platform.processor()
    return next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines()
                 if ln.startswith("Model name")), platform.processor())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20,22,24,26", help="log2 element counts")
    ap.add_argument("--types", default=",".join(FLOAT_TYPES))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--vector-width", type=int, default=0,
                    help="mxlower-stablehlo-to-llvm's vector-width (0: LLVM's loop vectorizer)")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    types = a.types.split(",")
    sizes = [int(s) for s in a.sizes.split(",")]
    t0 = time.perf_counter()
    handles = compile_all(types, a.vector_width)
    t_compile = time.perf_counter() - t0
    rows = bench(types, sizes, a.reps, handles)
    print(f"CPU: {cpu_model()}, {len(os.sched_getaffinity(0))} cores; compile "
          f"{t_compile:.1f} s for {len(handles)} modules, total {time.perf_counter() - t0:.0f} s")
    print(markdown(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_model(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
