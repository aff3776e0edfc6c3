"""mxlower's scaled dot against its peers on the CPU, in one process and one run: JAX's own
``jax.nn.scaled_matmul`` (which runs on the CPU from jax 0.11 on), torch's CPU matmul in bf16 and
f32 (an optional benchmark extra: ``pip install torch==2.13.0`` takes the CPU wheel), and XLA's
f32 dot of the dequantized operands; prints Markdown for BENCHMARKS.md.

GEMV (``--gemv``, N = K = 4096): activations x [M, K] against MX weights w [N, K].

* ``mxlower f32`` / ``mxlower bf16``: ``mxlower.jax.scaled_dot(x, w)`` under ``jax.jit`` with
  plain f32 / bf16 activations (the fused dot kernel on the packed weights);
* ``JAX scaled_matmul``: ``jax.nn.scaled_matmul`` under ``jax.jit`` on the same packed weights;
  it takes only scaled operands, so x is quantized first (to mxfp8_e4m3 beside MX weights, to
  nvfp4 beside nvfp4 ones; outside the timing) -- a different, less exact product;
* ``mxlower (x quantized)``: ``mxlower.jax.scaled_dot`` of those same MX operands (what
  ``jax.nn.scaled_matmul`` runs after ``mxlower.jax.install()``);
* ``torch bf16`` / ``torch f32``: ``torch.nn.functional.linear(x, w)`` with the weights
  dequantized to bf16 / f32 beforehand (what a torch user without MX kernels runs);
* ``XLA f32``: XLA's f32 dot with the weights dequantized to f32 [K, N] beforehand.

GEMM (``--gemm``, n^3, both sides MX of one format): ``mxlower`` (scaled_dot as it runs by
default: the fused kernel's GEMM where :func:`mxlower.lowering.dot_kernels.gemm_by_default`
says so for the host -- the integer pairs everywhere, mxfp8 on AMD's bf16 dot products and
AMX --, else the dequantize kernels + XLA's f32 dot), ``mxlower kernel``
(``MXLOWER_DOT_KERNEL=all``: the fused kernel's GEMM path always; the same program where the
default takes it, timed in the next slot of each round: ``mxlower`` runs right after XLA's
f32 dot, whose 12-48 MB evict its operands), JAX's scaled_matmul, torch bf16 / f32 and XLA
f32 as above.

Every case is timed round-robin (the fastest of ``--reps`` runs after a warm-up); a peer that
is not installed or rejects a format reads ``n/a``.  Run it in an environment with jax >= 0.11
for the JAX column::

    python bench/bench_dot_peers.py --gemv 1,8 --gemm 1024,2048 --reps 7
"""

from __future__ import annotations

import argparse
import os
import platform
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import mxlower.jax as mxj
from mxlower.benchmarking import round_robin
from mxlower.execution import ffi_dot

try:  # an optional benchmark extra, never a dependency
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

GEMV_FORMATS = ("mxfp4_e2m1", "mxfp8_e4m3", "nvfp4", "mxint8")
GEMM_FORMATS = ("mxfp4_e2m1", "mxfp8_e4m3", "mxint8")


def _timed(f: Callable[[], object]) -> Callable[[], object]:
    """``f`` waited for (JAX dispatches asynchronously; torch's CPU ops return done)."""
    return lambda: jax.block_until_ready(f())


def _round_robin(cases: dict[str, Callable[[], object] | None], reps: int) -> dict[str, float]:
    """:func:`mxlower.benchmarking.round_robin` in milliseconds over the cases a peer runs: one
    that is missing (None) or rejects its case on a first call reads NaN (``n/a``)."""
    live = {k: v for k, v in cases.items() if v is not None}
    for k, run in list(live.items()):
        try:
            run()
        except Exception as e:  # noqa: BLE001 - a peer rejecting a case reads n/a
            print(f"  ({k}: {type(e).__name__}: {str(e).splitlines()[0][:100]})", flush=True)
            del live[k]
    best = round_robin(live, reps)
    return {k: (best[k] * 1e3 if k in best else float("nan")) for k in cases}


def _jax_scaled_matmul(a: mxj.MXArray, b: mxj.MXArray) -> Callable[[], object] | None:
    if not hasattr(jax.nn, "scaled_matmul"):
        return None
    f = jax.jit(lambda ae, as_, be, bs: jax.nn.scaled_matmul(ae, be, as_, bs))
    args = [v[None] for v in (a.elements, a.scales, b.elements, b.scales)]
    return _timed(lambda: f(*args))


def _torch_linear(x: np.ndarray, w: np.ndarray, dtype: str) -> Callable[[], object] | None:
    if torch is None:
        return None
    dt = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    xt, wt = torch.from_numpy(np.array(x)).to(dt), torch.from_numpy(np.array(w)).to(dt)
    return _timed(lambda: torch.nn.functional.linear(xt, wt))


def _cell(t: float) -> str:
    return "n/a" if t != t else f"{t:.2f}"


def gemv(M: int, NK: int, reps: int) -> None:
    rng = np.random.default_rng(0)
    for fmt in GEMV_FORMATS:
        w32 = rng.standard_normal((NK, NK)).astype(np.float32)
        w = mxj.quantize(w32, fmt, impl="xla")
        wd = np.asarray(mxj.dequantize(w))
        wd_kn = jnp.asarray(np.ascontiguousarray(wd.T))
        x = rng.standard_normal((M, NK)).astype(np.float32)
        xj, xb = jnp.asarray(x), jnp.asarray(x).astype(jnp.bfloat16)
        xq = mxj.quantize(x, "nvfp4" if fmt == "nvfp4" else "mxfp8_e4m3", impl="xla")
        sd = jax.jit(lambda x, w: mxj.scaled_dot(x, w))
        xkn = jax.jit(lambda x, w: x @ w)
        t = _round_robin({
            "mx32": _timed(lambda: sd(xj, w)),  # noqa: B023
            "mx16": _timed(lambda: sd(xb, w)),  # noqa: B023
            "jax": _jax_scaled_matmul(xq, w),
            "mxq": _timed(lambda: sd(xq, w)),  # noqa: B023
            "tbf16": _torch_linear(x, wd, "bf16"),
            "tf32": _torch_linear(x, wd, "f32"),
            "xla": _timed(lambda: xkn(xj, wd_kn)),  # noqa: B023
        }, reps)
        peer = min(v for k, v in t.items() if k not in ("mx32", "mx16", "mxq") and v == v)
        print(f"| {M} | {fmt} | {_cell(t['mx32'])} | {_cell(t['mx16'])} | {_cell(t['jax'])} | "
              f"{_cell(t['mxq'])} | {_cell(t['tbf16'])} | {_cell(t['tf32'])} | "
              f"{_cell(t['xla'])} | {peer / t['mx32']:.1f}x |", flush=True)


def gemm(n: int, reps: int) -> None:
    rng = np.random.default_rng(1)
    for fmt in GEMM_FORMATS:
        a32 = rng.standard_normal((n, n)).astype(np.float32)
        b32 = rng.standard_normal((n, n)).astype(np.float32)
        a, b = (mxj.quantize(v, fmt, impl="xla") for v in (a32, b32))
        ad, bd = (np.asarray(mxj.dequantize(v)) for v in (a, b))
        sd = jax.jit(lambda a, b: mxj.scaled_dot(a, b)).lower(a, b).compile()
        os.environ["MXLOWER_DOT_KERNEL"] = "all"
        try:
            sdk = jax.jit(lambda a, b: mxj.scaled_dot(a, b)).lower(a, b).compile()
        finally:
            del os.environ["MXLOWER_DOT_KERNEL"]
        adj, bdj = jnp.asarray(ad), jnp.asarray(np.ascontiguousarray(bd.T))
        xla = jax.jit(lambda a, b: a @ b)
        t = _round_robin({
            "mx": _timed(lambda: sd(a, b)),  # noqa: B023
            "mxk": _timed(lambda: sdk(a, b)),  # noqa: B023
            "jax": _jax_scaled_matmul(a, b),
            "tbf16": _torch_linear(ad, bd, "bf16"),
            "tf32": _torch_linear(ad, bd, "f32"),
            "xla": _timed(lambda: xla(adj, bdj)),  # noqa: B023
        }, reps)
        fl = 2.0 * n ** 3 / 1e6
        cells = " | ".join(f"{_cell(t[k])} ({fl / t[k]:.0f})" if t[k] == t[k] else "n/a"
                           for k in ("mx", "mxk", "jax", "tbf16", "tf32", "xla"))
        print(f"| {n}^3 | {fmt} | {cells} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gemv", default="1,8", help="M values of the GEMVs ('' for none)")
    ap.add_argument("--nk", type=int, default=4096, help="N = K of the GEMVs")
    ap.add_argument("--gemm", default="1024", help="sizes n of n^3 GEMMs ('' for none)")
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    tv = torch.__version__ if torch else "not installed"
    print(f"Python {platform.python_version()}, jax {jax.__version__}, torch {tv} "
          f"({torch.get_num_threads() if torch else '-'} threads); mxlower SIMD path "
          f"{ffi_dot.host_path()}; load average at start: {os.getloadavg()}")
    if a.gemv:
        print("\nGEMV, ms (last column: the fastest peer's time / mxlower f32's)\n")
        print("| M | weights | mxlower f32 x | mxlower bf16 x | JAX scaled_matmul (x quantized) | "
              "mxlower (x quantized) | torch bf16 | torch f32 | XLA f32 | "
              "fastest peer / mxlower f32 x |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for m in a.gemv.split(","):
            gemv(int(m), a.nk, a.reps)
    if a.gemm:
        print("\nGEMM, ms (GFLOP/s)\n")
        print("| size | format | mxlower | mxlower kernel | JAX scaled_matmul | torch bf16 | "
              "torch f32 | XLA f32 |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for n in a.gemm.split(","):
            gemm(int(n), a.reps)
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
