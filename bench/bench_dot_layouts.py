"""The GEMV against MX weights held ``[N, K]`` and ``[K, N]`` (blocked along K: a ``[in,
out]`` kernel quantized along its input axis), in one run; prints Markdown for
BENCHMARKS.md.

Per format, plain activations x ``[M, K]`` (f32 or bf16), ``mxlower.jax.scaled_dot`` under
``jax.jit`` (``impl="auto"``), every case cold (a 64 MiB buffer read before each timed
run: :func:`mxlower.benchmarking.evictor`):

* ``[N, K]``: ``x @ w.T`` with w ``[N, K]`` -- the ``[N, K]`` dot kernel;
* ``[K, N] read as stored``: ``x @ w`` with w ``[K, N]`` -- the K-major kernel
  (:attr:`mxlower.lowering.dot_kernels.DotSpec.rhs_kn`);
* ``[K, N] transposed``: the same dot with
  :data:`mxlower.lowering.dot_call.K_MAJOR` off -- XLA transposes the weights to ``[N, K]``
  for the ``[N, K]`` kernel (what every ``[K, N]`` GEMV did before the K-major kernel);
* ``memcpy``: ``numpy.copyto`` of the packed weight bytes (elements + scales).

``--x mx``: activations quantized to the weights' format (along K) instead: ``[N, K]`` is
the kernel of the MX pair; ``[K, N] read as stored`` the activations dequantized (to bf16
where exact there, else f32) and the K-major kernel
(:data:`mxlower.lowering.dot_call.KN_MX_ROWS` lifted for the run); ``kernel's transpose``
the MX pair's kernel on the weights' copy its handler transposes
(:attr:`mxlower.lowering.dot_kernels.DotSpec.transposes_b`, ``KN_MX_ROWS`` 0 for the run);
``transposed`` XLA's transpose of the weights and the MX pair's kernel.

    python bench/bench_dot_layouts.py
    python bench/bench_dot_layouts.py --m 1,8 --nk 4096 --x f32,bf16 --reps 7
    python bench/bench_dot_layouts.py --m 16,256,512 --x mx --reps 3
"""

from __future__ import annotations

import argparse

import jax
import ml_dtypes
import numpy as np

import mxlower.jax as mxj
from mxlower.benchmarking import Session, evictor, packed_nbytes, round_robin
from mxlower.execution import ffi_dot
from mxlower.lowering import dot_call

FORMATS = "mxfp4_e2m1,mxfp6_e2m3,mxfp8_e4m3,nvfp4,mxint8"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--m", default="1,8", help="rows of activations")
    ap.add_argument("--nk", type=int, default=4096, help="N = K of the weights")
    ap.add_argument("--x", default="f32,bf16", help="activations: f32, bf16, mx")
    ap.add_argument("--formats", default=FORMATS)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args(argv)
    session = Session()
    rng = np.random.default_rng(0)
    evict = evictor()
    nk = a.nk
    nk_dn, kn_dn = (((1,), (1,)), ((), ())), (((1,), (0,)), ((), ()))
    rows = []
    for fmt in a.formats.split(","):
        w = rng.standard_normal((nk, nk)).astype(np.float32)
        w_nk = mxj.quantize(w, fmt, impl="xla")
        w_kn = mxj.quantize(np.ascontiguousarray(w.T), fmt, axis=0, impl="xla")
        src = np.ones(packed_nbytes(w_nk), np.uint8)  # the bytes XLA holds
        dst = np.empty_like(src)
        for m in map(int, a.m.split(",")):
            for xt in a.x.split(","):
                x = rng.standard_normal((m, nk)).astype(np.float32)
                if xt == "mx":
                    x = mxj.quantize(x, fmt, impl="xla")
                else:
                    x = jax.device_put(x.astype(ml_dtypes.bfloat16) if xt == "bf16" else x)
                nk_f = jax.jit(lambda x, w: mxj.scaled_dot(x, w, nk_dn))

                def kn_compiled(most: dict, k_major: bool = True) -> object:
                    """``x @ w`` compiled with these KN_MX_ROWS and K_MAJOR."""
                    keep = dot_call.KN_MX_ROWS, dot_call.K_MAJOR
                    dot_call.KN_MX_ROWS, dot_call.K_MAJOR = most, k_major
                    try:
                        return jax.jit(lambda x, w: mxj.scaled_dot(x, w, kn_dn)).lower(
                            x, w_kn).compile()
                    finally:
                        dot_call.KN_MX_ROWS, dot_call.K_MAJOR = keep
                every, none = {"bf16": m, "f32": m}, {"bf16": 0, "f32": 0}
                fs = {"nk": (nk_f, w_nk), "kn": (kn_compiled(every), w_kn),
                      "tr": (kn_compiled(every, False), w_kn)}
                if xt == "mx":  # the MX pair's kernel on its own transposed copy
                    fs["own"] = (kn_compiled(none), w_kn)
                outs = [np.asarray(f(x, v)) for f, v in fs.values()]
                for o in outs[1:]:  # the same dot, summed in other orders
                    np.testing.assert_allclose(o, outs[0], rtol=1e-4, atol=1e-3)
                runs = {k: (lambda f=f, v=v: jax.block_until_ready(f(x, v)))
                        for k, (f, v) in fs.items()}
                runs["memcpy"] = lambda: np.copyto(dst, src)
                t = round_robin(runs, a.reps, before=evict)
                rows.append((m, fmt, xt, src.nbytes / 1e6, t))
    print(session.header(f"scaled_dot GEMV, weights [N, K] and [K, N], N = K = {nk}, path "
                         f"{ffi_dot.host_path()}, every case cold, best of {a.reps}"))
    print("| M | weights | x | packed MB | [N, K] ms | [K, N] read as stored ms | "
          "[K, N] kernel's transpose ms | [K, N] transposed ms | memcpy ms | "
          "stored / transposed | stored % memcpy |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m, fmt, xt, mb, t in rows:
        own = f"{t['own'] * 1e3:.2f}" if "own" in t else "-"
        print(f"| {m} | {fmt} | {xt} | {mb:.2f} | {t['nk'] * 1e3:.2f} | {t['kn'] * 1e3:.2f} | "
              f"{own} | {t['tr'] * 1e3:.2f} | {t['memcpy'] * 1e3:.2f} | "
              f"{t['tr'] / t['kn']:.1f}x | {100 * t['memcpy'] / t['kn']:.0f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
