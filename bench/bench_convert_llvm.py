"""Throughput of the LLVM-lowered narrow-float conversions (ExecutionEngine, O3, one thread).

For every narrow type and both directions (f32 -> narrow, narrow -> f32), at 2^20 .. 2^26
elements, ``func @main(%x: tensor<?xSRC>) -> tensor<?xDST>`` holding one ``stablehlo.convert``
is lowered by ``mxlower-stablehlo-to-llvm{out-params}`` (the conversion is
``mxlower-lower-narrow-floats-to-llvm``'s code from :mod:`mxlower.lowering.codec`; LLVM's loop
vectorizer vectorizes it), JIT-compiled once per type pair by :mod:`mxlower.execution.llvm`
(in-process, ``opt_level=3``) and called on preallocated input and output arrays (steady
state: no allocation, no first-touch page faults).  Timed against, in the same run:

* a memory copy of the same bytes, two ways.  ``copy_llvm``: a module that reads the same
  input bytes and writes the same output bytes with no arithmetic (f32 -> narrow: bitcast to
  i32 and truncate to i8; narrow -> f32: widen i8 to i32 and bitcast), lowered, compiled
  and called exactly like the conversion.  ``memcpy``: ``np.copyto`` between preallocated
  byte arrays of (input + output bytes) / 2 each, so it moves the same number of bytes (a hot
  memcpy: the harder bar).  "% of copy" compares bytes moved per second;
* ml_dtypes' ``astype`` (single-threaded NumPy) on the same data.

The definitions are bench_convert_xla.py's (XLA:CPU uses both cores; this runs on one).  The
candidates of one size are timed round-robin, so that load from other processes on a shared
machine hits them alike, and each time is the fastest of ``--reps`` runs after two warm-up
runs (ml_dtypes, 10-60x slower, gets ``--ml-reps``).  Results are printed as a Markdown table
(for BENCHMARKS.md) and, with ``--json``, written as JSON.

    python bench/bench_convert_llvm.py                    # 2-4 minutes on 2 cores
    python bench/bench_convert_llvm.py --sizes 20,24 --types f4E2M1FN --reps 5
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from mxlower import reference as R
from mxlower.benchmarking import Session, round_robin
from mxlower.execution import llvm
from mxlower.formats import FLOAT_TYPES


def module_text(src: str, dst: str) -> str:
    return (f"func.func @main(%x: tensor<?x{src}>) -> tensor<?x{dst}> {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<?x{src}>) -> tensor<?x{dst}>\n"
            f"  return %0 : tensor<?x{dst}>\n}}\n")


def copy_text(direction: str) -> str:
    """Same bytes in and out as a conversion, no arithmetic."""
    if direction == "truncf":
        return ("func.func @main(%x: tensor<?xf32>) -> tensor<?xi8> {\n"
                "  %0 = stablehlo.bitcast_convert %x : (tensor<?xf32>) -> tensor<?xi32>\n"
                "  %1 = stablehlo.convert %0 : (tensor<?xi32>) -> tensor<?xi8>\n"
                "  return %1 : tensor<?xi8>\n}\n")
    return ("func.func @main(%x: tensor<?xi8>) -> tensor<?xf32> {\n"
            "  %0 = stablehlo.convert %x : (tensor<?xi8>) -> tensor<?xi32>\n"
            "  %1 = stablehlo.bitcast_convert %0 : (tensor<?xi32>) -> tensor<?xf32>\n"
            "  return %1 : tensor<?xf32>\n}\n")


def timeit(fn, reps: int, warmup: int = 1) -> float:
    """The fastest of ``reps`` runs (other processes only ever add time)."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def inputs(src: str, n: int, rng) -> np.ndarray:
    if src == "f32":  # values spread over the narrow types' ranges, some specials
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n))).astype(np.float32)
        x[::997] = np.inf
        x[1::1009] = np.nan
        return x
    t = FLOAT_TYPES[src]
    return rng.integers(0, 1 << t.bits, n, dtype=np.uint8).view(t.dtype)


def compile_all(types, vector_width: int = 0) -> dict:
    def comp(text):
        return llvm.compile(text, out_params=True, isolate=False, opt_level=3,
                            vector_width=vector_width)

    out = {("copy", d): comp(copy_text(d)) for d in ("truncf", "extf")}
    for t in types:
        out[("conv", t, "truncf")] = comp(module_text("f32", t))
        out[("conv", t, "extf")] = comp(module_text(t, "f32"))
    return out


def runner(h, x: np.ndarray, out: np.ndarray):
    return lambda: h.run("main", x, out=[out])


def bench(types, sizes, reps, ml_reps, handles) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for logn in sizes:
        n = 1 << logn
        x32 = inputs("f32", n, rng)
        x8 = rng.integers(-128, 128, n, dtype=np.int8)
        a, b = np.ones(5 * n // 2, np.uint8), np.zeros(5 * n // 2, np.uint8)
        fns = {("copy", "truncf"): runner(handles["copy", "truncf"], x32,
                                          np.empty(n, np.int8)),
               ("copy", "extf"): runner(handles["copy", "extf"], x8, np.empty(n, np.float32)),
               ("memcpy", None): lambda a=a, b=b: np.copyto(b, a)}
        ml, outs = {}, {}
        codes = {t: inputs(t, n, rng) for t in types}
        for t in types:
            ft = FLOAT_TYPES[t]
            outs[t] = np.empty(n, ft.dtype)
            fns[("conv", t, "truncf")] = runner(handles["conv", t, "truncf"], x32, outs[t])
            fns[("conv", t, "extf")] = runner(handles["conv", t, "extf"], codes[t],
                                              np.empty(n, np.float32))
            xv = codes[t]
            ml[(t, "truncf")] = timeit(lambda ft=ft: x32.astype(ft.dtype), ml_reps)
            ml[(t, "extf")] = timeit(lambda xv=xv: xv.astype(np.float32), ml_reps)
        best = round_robin(fns, reps)
        for t in types:  # the timed code computed the right thing
            assert np.array_equal(outs[t].view(np.uint8), R.bits(R.convert(x32, t))), t
        moved = n * (4 + 1)  # bytes read + written, both directions; the copies move as many
        for t in types:
            for direction in ("truncf", "extf"):
                conv = best[("conv", t, direction)]
                rows.append({
                    "log2n": logn, "type": t,
                    "direction": f"f32->{t}" if direction == "truncf" else f"{t}->f32",
                    "ns_per_elem": conv / n * 1e9,
                    "gbps": moved / conv / 1e9,
                    "copy_llvm_gbps": moved / best[("copy", direction)] / 1e9,
                    "copy_np_gbps": moved / best[("memcpy", None)] / 1e9,
                    "vs_copy_llvm": best[("copy", direction)] / conv,
                    "vs_copy_np": best[("memcpy", None)] / conv,
                    "ml_dtypes_ns_per_elem": ml[(t, direction)] / n * 1e9,
                    "vs_ml_dtypes": ml[(t, direction)] / conv,
                })
                r = rows[-1]
                print(f"2^{logn} {r['direction']:>16}: {r['ns_per_elem']:.3f} ns/elem "
                      f"{r['gbps']:.1f} GB/s, {100 * r['vs_copy_llvm']:.0f}% of LLVM copy, "
                      f"{100 * r['vs_copy_np']:.0f}% of memcpy, {r['vs_ml_dtypes']:.1f}x "
                      "ml_dtypes", file=sys.stderr, flush=True)
    return rows


def markdown(rows) -> str:
    out = ["| elements | conversion | ns/elem | GB/s moved | % of LLVM copy | % of memcpy "
           "| x ml_dtypes |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| 2^{r['log2n']} | {r['direction']} | {r['ns_per_elem']:.2f} | "
                   f"{r['gbps']:.2f} | {100 * r['vs_copy_llvm']:.0f}% | "
                   f"{100 * r['vs_copy_np']:.0f}% | {r['vs_ml_dtypes']:.1f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20,22,24,26", help="log2 element counts")
    ap.add_argument("--types", default=",".join(FLOAT_TYPES))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--ml-reps", type=int, default=3)
    ap.add_argument("--vector-width", type=int, default=0,
                    help="mxlower-stablehlo-to-llvm's vector-width (0: LLVM's loop vectorizer)")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    types = a.types.split(",")
    sizes = [int(s) for s in a.sizes.split(",")]
    session = Session()
    handles = compile_all(types, a.vector_width)
    t_compile = time.perf_counter() - session.t0
    rows = bench(types, sizes, a.reps, a.ml_reps, handles)
    session.report(markdown(rows), rows, a.json,
                   f"compile {t_compile:.1f} s for {len(handles)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
