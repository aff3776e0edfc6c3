"""Throughput of mxlower-expand-narrow-floats' conversions on XLA:CPU.

For every narrow type and both directions (f32 -> narrow, narrow -> f32), at 2^20 .. 2^26
elements, the expanded StableHLO module (one ``stablehlo.convert`` run through
``mxlower-expand-narrow-floats``) is compiled once and timed against, in the same run:

* a memory copy of the same bytes, two ways.  ``copy_xla``: an XLA module that reads the
  same input bytes and writes the same output bytes with no arithmetic (f32 -> narrow:
  bitcast to i32, truncate to ui8; narrow -> f32: widen ui8 to i32, bitcast), run exactly
  like the conversion (XLA allocates the output, as it does for the conversion: at 2^24 and
  more elements first-touch page faults of the fresh output dominate both).  ``copy_np``:
  ``np.copyto`` between preallocated byte arrays of (input + output bytes) / 2 each, so it
  moves the same number of bytes with no allocation (a hot memcpy: the harder bar).
  "% of copy" compares bytes moved per second;
* ml_dtypes' ``astype`` (single-threaded NumPy) on the same data;
* XLA's native ``stablehlo.convert`` for the types XLA:CPU supports (not f6).

Every XLA run writes into the previous run's output buffer (donated and aliased to the
output), so the numbers are steady-state throughput, not first-touch page faults of a fresh
output buffer (which at 2^24+ elements cost more than the conversion itself; see
BENCHMARKS.md).  The XLA modules of one size are timed round-robin (so load from other processes hits them
alike) and each time is the fastest of ``--reps`` runs after two warm-up runs; ml_dtypes
(10-80x slower) gets ``--ml-reps`` runs.  Results are printed as a
Markdown table (for BENCHMARKS.md) and, with ``--json``, written as JSON.

    python bench/bench_convert_xla.py                      # 2-5 minutes on 2 cores
    python bench/bench_convert_xla.py --sizes 20,22 --types f4E2M1FN --reps 5
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from mxlower import reference as R
from mxlower.benchmarking import Session, round_robin
from mxlower.bindings import jaxlib as J
from mxlower.execution import xla
from mxlower.formats import FLOAT_TYPES
from mxlower.pipeline.manager import run_pipeline

NATIVE = {"f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN"}  # XLA:CPU converts these itself


_ALIAS = "{tf.aliasing_output = 0 : i32}"


def module_text(src: str, dst: str, n: int, expand: bool = True) -> str:
    """One convert; a second parameter of the result type is aliased to the result, so that
    repeated runs write into the same (already touched) buffer."""
    text = (f"func.func @main(%x: tensor<{n}x{src}>, %o: tensor<{n}x{dst}> {_ALIAS}) "
            f"-> tensor<{n}x{dst}> {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<{n}x{src}>) -> tensor<{n}x{dst}>\n"
            f"  return %0 : tensor<{n}x{dst}>\n}}\n")
    if not expand:
        return text
    with J.make_context():
        m = J.ir.Module.parse(text)
        run_pipeline(m, "builtin.module(mxlower-expand-narrow-floats)")
        return str(m)


def copy_text(direction: str, n: int) -> str:
    """Moves the conversion's bytes (4n in and n out, or n in and 4n out), no arithmetic."""
    if direction == "truncf":
        return (f"func.func @main(%x: tensor<{n}xf32>, %o: tensor<{n}xui8> {_ALIAS}) "
                f"-> tensor<{n}xui8> {{\n"
                f"  %0 = stablehlo.bitcast_convert %x : (tensor<{n}xf32>) -> tensor<{n}xi32>\n"
                f"  %1 = stablehlo.convert %0 : (tensor<{n}xi32>) -> tensor<{n}xui8>\n"
                f"  return %1 : tensor<{n}xui8>\n}}\n")
    return (f"func.func @main(%x: tensor<{n}xui8>, %o: tensor<{n}xf32> {_ALIAS}) "
            f"-> tensor<{n}xf32> {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<{n}xui8>) -> tensor<{n}xi32>\n"
            f"  %1 = stablehlo.bitcast_convert %0 : (tensor<{n}xi32>) -> tensor<{n}xf32>\n"
            f"  return %1 : tensor<{n}xf32>\n}}\n")


def timeit(fn, reps: int, warmup: int = 1) -> float:
    """The fastest of ``reps`` timed runs after ``warmup`` runs (other processes on the
    machine only ever add time)."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def xla_runner(text: str, x: np.ndarray, out_dtype):
    """Steady state: each run's output buffer is donated to the next run as its (aliased)
    output, as a pipeline that reuses its buffers runs."""
    exe = xla.compile(text)
    xb = xla.device_put(x)
    state = [xla.device_put(np.zeros(x.shape, out_dtype))]

    def once():
        state[0] = exe.execute([xb, state[0]])[0]

    return once


def inputs(src: str, n: int, rng) -> np.ndarray:
    if src == "f32":  # values spread over the narrow types' ranges, some specials
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n))).astype(np.float32)
        x[:: 997] = np.inf
        x[1:: 1009] = np.nan
        return x
    t = FLOAT_TYPES[src]
    return rng.integers(0, 1 << t.bits, n, dtype=np.uint8)


def bench(types, sizes, reps, ml_reps) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for logn in sizes:
        n = 1 << logn
        x32 = inputs("f32", n, rng)
        x8 = rng.integers(0, 256, n, dtype=np.uint8)
        a, b = np.ones(5 * n // 2, np.uint8), np.zeros(5 * n // 2, np.uint8)
        fns = {("copy", "truncf"): xla_runner(copy_text("truncf", n), x32, np.uint8),
               ("copy", "extf"): xla_runner(copy_text("extf", n), x8, np.float32),
               ("memcpy", None): lambda a=a, b=b: np.copyto(b, a)}
        ml = {}
        codes = {t: inputs(t, n, rng) for t in types}
        for t in types:
            ft = FLOAT_TYPES[t]
            fns[("conv", t, "truncf")] = xla_runner(module_text("f32", t, n), x32, np.uint8)
            fns[("conv", t, "extf")] = xla_runner(module_text(t, "f32", n), codes[t],
                                                  np.float32)
            if t in NATIVE:
                fns[("native", t, "truncf")] = xla_runner(
                    module_text("f32", t, n, expand=False), x32, ft.dtype)
                fns[("native", t, "extf")] = xla_runner(
                    module_text(t, "f32", n, expand=False), codes[t].view(ft.dtype),
                    np.float32)
            xv = codes[t].view(ft.dtype)
            ml[(t, "truncf")] = timeit(lambda: x32.astype(ft.dtype), ml_reps)
            ml[(t, "extf")] = timeit(lambda: xv.astype(np.float32), ml_reps)
        best = round_robin(fns, reps)
        moved = n * (4 + 1)  # bytes read + written, both directions; the copies move as many
        for t in types:
            for direction in ("truncf", "extf"):
                conv = best[("conv", t, direction)]
                native = best.get(("native", t, direction))
                rows.append({
                    "log2n": logn, "type": t,
                    "direction": f"f32->{t}" if direction == "truncf" else f"{t}->f32",
                    "ns_per_elem": conv / n * 1e9,
                    "gbps": moved / conv / 1e9,
                    "copy_xla_gbps": moved / best[("copy", direction)] / 1e9,
                    "copy_np_gbps": moved / best[("memcpy", None)] / 1e9,
                    "vs_copy_xla": best[("copy", direction)] / conv,
                    "vs_copy_np": best[("memcpy", None)] / conv,
                    "vs_ml_dtypes": ml[(t, direction)] / conv,
                    "vs_xla_native": native / conv if native else None,
                })
                r = rows[-1]
                print(f"2^{logn} {r['direction']:>16}: {r['ns_per_elem']:.2f} ns/elem "
                      f"{r['gbps']:.1f} GB/s, {100 * r['vs_copy_xla']:.0f}% of XLA copy, "
                      f"{100 * r['vs_copy_np']:.0f}% of memcpy, {r['vs_ml_dtypes']:.1f}x "
                      "ml_dtypes" + (f", {r['vs_xla_native']:.2f}x XLA native"
                                     if native else ""), file=sys.stderr, flush=True)
    return rows


def correctness_spot_check(types) -> None:
    """The benchmarked modules compute the right thing (the tests do this exhaustively)."""
    rng = np.random.default_rng(1)
    x = inputs("f32", 4096, rng)
    for t in types:
        (got,) = xla.run(module_text("f32", t, x.size), x, np.zeros(x.size, np.uint8))
        assert np.array_equal(got, R.bits(R.convert(x, t))), t


def markdown(rows) -> str:
    out = ["| elements | conversion | ns/elem | GB/s moved | % of XLA copy | % of memcpy "
           "| x ml_dtypes | x XLA native |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        nat = f"{r['vs_xla_native']:.2f}" if r["vs_xla_native"] else "n/a (f6)" \
            if r["type"].startswith("f6") else "-"
        out.append(f"| 2^{r['log2n']} | {r['direction']} | {r['ns_per_elem']:.2f} | "
                   f"{r['gbps']:.2f} | {100 * r['vs_copy_xla']:.0f}% | "
                   f"{100 * r['vs_copy_np']:.0f}% | {r['vs_ml_dtypes']:.1f} | {nat} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20,22,24,26", help="log2 element counts")
    ap.add_argument("--types", default=",".join(FLOAT_TYPES))
    ap.add_argument("--reps", type=int, default=10, help="timed runs of each XLA module")
    ap.add_argument("--ml-reps", type=int, default=2, help="timed runs of ml_dtypes' astype")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    types = a.types.split(",")
    sizes = [int(s) for s in a.sizes.split(",")]
    correctness_spot_check(types)
    session = Session()
    rows = bench(types, sizes, a.reps, a.ml_reps)
    session.report(markdown(rows), rows, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
