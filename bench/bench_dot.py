"""mxlower's fused block-scaled dot kernel (mxlower.execution.ffi_dot) on the CPU against
memcpy of the packed weights and XLA's f32 dot of the dequantized operands, in one run;
prints Markdown for BENCHMARKS.md.

GEMV (``--gemv``: M = 1 and 8, N = K = 4096 by default): plain activations x [M, K] (f32 or
bf16; ``--x f16`` too) against MX weights w [N, K] (mxfp4, mxfp6_e2m3, mxfp8_e4m3, nvfp4,
mxint8):

* ``scaled_dot``: ``mxlower.jax.scaled_dot(x, w)`` (``impl="auto"``) under ``jax.jit``: the
  kernel's custom call (its handler makes the run-time range test) -- what a user runs;
* ``kernel``: ``ffi_dot.dot`` alone under ``jax.jit`` (the same custom call, without
  ``scaled_dot``'s dispatch);
* ``before``: the same scaled_dot with the dot kernel switched off (``MXLOWER_DOT_KERNEL=0``:
  the weights dequantized to f32 by the dequantize kernel, then XLA's dot: what
  ``impl="auto"`` did before this kernel);
* ``XLA f32 [N,K]`` / ``XLA f32 [K,N]``: XLA's f32 dot of x with the weights already
  dequantized to f32 (stored [N, K], the MX layout, and [K, N], XLA's favourite): the dot
  alone, no dequantization;
* ``memcpy``: ``numpy.copyto`` of the packed weight bytes (elements + scales) into a buffer
  already mapped (one thread).  "% memcpy" = memcpy time / scaled_dot time.

Every GEMV case runs cold: a 64 MiB buffer is read before each timed run
(:func:`mxlower.benchmarking.evictor`), so the weights come from memory as in inference (the
round robin alone left them in a 32 MiB L3 for the case run right after another that read
them: the sixteenth session's and earlier "kernel ms" were such warm runs).

GEMM (``--gemm``: 1024^3 by default): both sides MX (the same format), ``scaled_dot`` with
``MXLOWER_DOT_KERNEL=all`` (the kernel: by default for the integer-unit formats, whose GEMM
runs on integer dot products on avx2; only when asked for mxfp8) and ``kernel`` as above
against XLA's f32 dot of the dequantized operands (already f32) and ``before`` (the
dequantize kernels + XLA's dot: ``MXLOWER_DOT_KERNEL=0``); GFLOP/s = 2 M N K / time.  Where
the host runs several x86 paths (``vnni`` and ``avx2``), the kernel on each other one is a
column too (``kernel <path>``), timed in the same round robin.  "% peak": the kernel's
GFLOP/s against the peak of the instruction its GEMM runs on (``vdpbf16ps``, ``vpdpbusd``,
``vpdpwssd`` or the f32 FMAs: :func:`mxlower.execution.peaks.gemm_probe`), and XLA's against
the f32 FMAs' -- each peak measured in the same run on every core at once
(:func:`mxlower.execution.peaks.peaks`: independent chains of the instruction alone, operands
in registers; the best of the runs before and after the GEMMs), printed before the table.

Every case is timed round-robin in one process (the fastest of ``--reps`` runs after a
warm-up), so load from other processes hits every case alike.  The SIMD path is
``ffi_dot.host_path()`` (``MXLOWER_DOT_PATH`` forces one).

    python bench/bench_dot.py                         # GEMV M=1,8 and GEMM 1024^3
    python bench/bench_dot.py --gemm 1024,2048 --reps 5
    MXLOWER_DOT_PATH=portable python bench/bench_dot.py --gemv 1 --gemm ""
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import mxlower.jax as mxj
from mxlower.benchmarking import evictor, packed_nbytes, round_robin
from mxlower.execution import ffi_dot
from mxlower.execution.peaks import best_peaks, fma_probe, gemm_probe, path_probes, peaks

FORMATS = ("mxfp4_e2m1", "mxfp6_e2m3", "mxfp8_e4m3", "nvfp4", "mxint8")
#: the GEMVs' plain activation types (``--x``)
ACTIVATIONS = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16}


def _timer(f: Callable[[], object]) -> Callable[[], object]:
    """``f`` waited for (JAX dispatches asynchronously)."""
    return lambda: jax.block_until_ready(f())


def _round_robin(cases: dict[str, Callable[[], object]], reps: int,
                 before: Callable[[], object] | None = None) -> dict[str, float]:
    """:func:`mxlower.benchmarking.round_robin`, in milliseconds."""
    return {k: v * 1e3 for k, v in round_robin(cases, reps, before).items()}


def _before(f: Callable, *args: object) -> Callable:
    """``f`` jitted and compiled with the dot kernel switched off."""
    os.environ["MXLOWER_DOT_KERNEL"] = "0"
    try:
        return jax.jit(f).lower(*args).compile()
    finally:
        del os.environ["MXLOWER_DOT_KERNEL"]


def gemv(M: int, NK: int, reps: int, acts: tuple[str, ...] = ("f32", "bf16")) -> list[str]:
    rng = np.random.default_rng(0)
    rows = []
    evict = evictor()  # every run cold (round_robin's order left the kernel's warm in L3)
    for fmt in FORMATS:
        w32 = rng.standard_normal((NK, NK)).astype(np.float32)
        w = mxj.quantize(w32, fmt, impl="xla")
        wd = np.asarray(mxj.dequantize(w))
        wd_nk, wd_kn = jnp.asarray(wd), jnp.asarray(np.ascontiguousarray(wd.T))
        packed = np.ones(packed_nbytes(w), np.uint8)  # the bytes XLA holds
        dst = np.empty_like(packed)
        for act in acts:
            x = jnp.asarray(rng.standard_normal((M, NK)).astype(np.float32))
            x = x.astype(ACTIVATIONS[act])
            sd = jax.jit(lambda x, w: mxj.scaled_dot(x, w))
            kern = jax.jit(lambda x, e, s, fmt=fmt: ffi_dot.dot(x, None, e, s, None, fmt))
            before = _before(lambda x, w: mxj.scaled_dot(x, w), x, w)
            x32 = x.astype(jnp.float32)
            xnk = jax.jit(lambda x, w: x @ w.T)
            xkn = jax.jit(lambda x, w: x @ w)
            t = _round_robin({
                "scaled_dot": _timer(lambda: sd(x, w)),  # noqa: B023
                "kernel": _timer(lambda: kern(x, w.elements, w.scales)),  # noqa: B023
                "before": _timer(lambda: before(x, w)),  # noqa: B023
                "xla_nk": _timer(lambda: xnk(x32, wd_nk)),  # noqa: B023
                "xla_kn": _timer(lambda: xkn(x32, wd_kn)),  # noqa: B023
                "memcpy": lambda: np.copyto(dst, packed),  # noqa: B023
            }, reps, evict)
            gbs = packed.nbytes / t["scaled_dot"] / 1e6
            rows.append(f"| {M} | {fmt} | {act} | {packed.nbytes / 1e6:.2f} | "
                        f"{t['scaled_dot']:.2f} | {t['kernel']:.2f} | {gbs:.1f} | "
                        f"{t['memcpy']:.2f} | {100 * t['memcpy'] / t['scaled_dot']:.0f}% | "
                        f"{t['before']:.2f} | {t['xla_nk']:.2f} | {t['xla_kn']:.2f} | "
                        f"{min(t['xla_kn'], t['xla_nk']) / t['scaled_dot']:.1f}x | "
                        f"{t['before'] / t['scaled_dot']:.1f}x |")
            print(rows[-1], flush=True)
    return rows


def _other_paths() -> list[str]:
    """The x86 paths this host runs besides the one the kernels take."""
    return [p for p in ffi_dot.kernel_paths() if p != ffi_dot.host_path() and p != "portable"]


def gemm(n: int, reps: int) -> list[tuple[str, dict[str, float], str | None]]:
    """Per format: (format, {case: seconds}, the probe of the kernel's GEMM instruction)."""
    rng = np.random.default_rng(1)
    rows = []
    for fmt in ("mxfp4_e2m1", "nvfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxint8", "mxfp8_e4m3"):
        a = mxj.quantize(rng.standard_normal((n, n)).astype(np.float32), fmt, impl="xla")
        b = mxj.quantize(rng.standard_normal((n, n)).astype(np.float32), fmt, impl="xla")
        ad, bd = (jnp.asarray(np.asarray(mxj.dequantize(v))) for v in (a, b))
        os.environ["MXLOWER_DOT_KERNEL"] = "all"  # GEMMs run the kernel only when asked
        try:
            sd = jax.jit(lambda a, b: mxj.scaled_dot(a, b)).lower(a, b).compile()
        finally:
            del os.environ["MXLOWER_DOT_KERNEL"]
        kern = jax.jit(lambda a, sa, b, sb, fmt=fmt: ffi_dot.dot(a, sa, b, sb, fmt, fmt))
        before = _before(lambda a, b: mxj.scaled_dot(a, b), a, b)
        xla = jax.jit(lambda a, b: a @ b.T)
        others = {p: jax.jit(lambda a, sa, b, sb, fmt=fmt, p=p: ffi_dot.dot(a, sa, b, sb, fmt, fmt,
                                                                        path=p))
                  for p in _other_paths()}
        t = _round_robin({
            **{p: _timer(lambda k=k: k(a.elements, a.scales, b.elements, b.scales))  # noqa: B023
               for p, k in others.items()},
            "scaled_dot": _timer(lambda: sd(a, b)),  # noqa: B023
            "kernel": _timer(lambda: kern(a.elements, a.scales, b.elements,  # noqa: B023
                                          b.scales)),
            "before": _timer(lambda: before(a, b)),  # noqa: B023
            "xla": _timer(lambda: xla(ad, bd)),  # noqa: B023
        }, reps)
        probe = gemm_probe(ffi_dot.spec_for(fmt, fmt, a.elements, b.elements))
        print(f"{n}^3 {fmt}: kernel {t['kernel']:.2f} ms, XLA {t['xla']:.2f} ms", flush=True)
        rows.append((fmt, t, probe))
    return rows


def gemm_row(n: int, fmt: str, t: dict[str, float], probe: str | None, others: list[str],
             peak: dict[str, dict[str, float]]) -> str:
    fma = fma_probe(ffi_dot.host_path())
    fl = 2.0 * n ** 3
    share = (f"{probe} | {fl / t['kernel'] / 1e6 / peak[probe]['gflops']:.0%}" if probe
             else "- | -")
    return (f"| {n}^3 | {fmt} | {t['scaled_dot']:.2f} | {fl / t['scaled_dot'] / 1e6:.0f} | "
            f"{t['kernel']:.2f} | {share} | "
            + "".join(f"{t[p]:.2f} | " for p in others)
            + f"{t['before']:.2f} | {t['xla']:.2f} | {fl / t['xla'] / 1e6:.0f} | "
            f"{fl / t['xla'] / 1e6 / peak[fma]['gflops']:.0%} | "
            f"{t['xla'] / t['scaled_dot']:.2f}x | {t['before'] / t['scaled_dot']:.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gemv", default="1,8", help="M values of the GEMVs ('' for none)")
    ap.add_argument("--nk", type=int, default=4096, help="N = K of the GEMVs")
    ap.add_argument("--gemm", default="1024", help="sizes n of n^3 GEMMs ('' for none)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--x", default="f32,bf16",
                    help=f"the GEMVs' activation types ({', '.join(ACTIVATIONS)})")
    a = ap.parse_args()
    acts = tuple(a.x.split(","))
    for act in acts:
        if act not in ACTIVATIONS:
            ap.error(f"--x: {act!r} is not one of {', '.join(ACTIVATIONS)}")
    print(f"SIMD path: {ffi_dot.host_path()}; load average at start: {os.getloadavg()}")
    if a.gemv:
        print("\n| M | weights | x | packed MB | scaled_dot ms | kernel ms | GB/s | memcpy ms | "
              "% memcpy | before ms | XLA f32 [N,K] ms | XLA f32 [K,N] ms | x best XLA | "
              "x before |")
        print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for m in a.gemv.split(","):
            gemv(int(m), a.nk, a.reps, acts)
    if a.gemm:
        others = _other_paths()
        first = peaks(path_probes(ffi_dot.host_path()))
        runs = [(int(n), gemm(int(n), a.reps)) for n in a.gemm.split(",")]
        peak = best_peaks(first, peaks(path_probes(ffi_dot.host_path())))
        print("\nPeaks (every core at once, the best before and after the GEMMs; GFLOP/s = 2 x "
              "multiply-adds, integer ones too): "
              + "; ".join(f"{k} {v['gflops']:.0f} ({v['per_ns']:.2f} instructions/ns, "
                          f"{v['threads']} threads)" for k, v in peak.items()))
        print("\n| size | format | scaled_dot ms | GFLOP/s | kernel ms | instruction | % peak | "
              + "".join(f"kernel {p} ms | " for p in others)
              + "before ms | XLA f32 dot ms | XLA GFLOP/s | XLA % FMA peak | x XLA | x before |")
        print("|---|---|---:|---:|---:|---|---:|" + "---:|" * len(others)
              + "---:|---:|---:|---:|---:|---:|")
        for n, rows in runs:
            for fmt, t, probe in rows:
                print(gemm_row(n, fmt, t, probe, others, peak))
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
