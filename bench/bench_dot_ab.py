"""The fused dot kernel's GEMV of two source trees, timed in one run: this checkout against a
git revision (``--before``, default ``HEAD``), for changes to the kernel's streaming path.

As ``bench_kernels_ab.py`` does for the other kernels: the revision's ``mxlower`` is exported
(``git archive``) and a child process importing it lowers each dot kernel with its handler
(:func:`mxlower.execution.ffi_dot.lower_module`); this process JIT-compiles those next to the
same kernels built from the checkout and registers both as XLA FFI targets (the revision's
under ``<name>_before``).  Per kernel and M, the two ``jax.ffi.ffi_call``s run on the same
operands, both checked against the exact dot (docs/semantics.md section 6's bound; their bits
may differ: the summation order is the kernel's to choose), then timed interleaved
(:func:`mxlower.benchmarking.round_robin`, best of ``--reps``) with the weights evicted from
the caches before every run (a 64 MiB buffer read: :func:`mxlower.benchmarking.evictor`), as
a GEMV of inference reads them.

Kernels: plain f32 and bf16 activations x [M, K] against MX weights [N, K] (mxfp4, mxfp6_e2m3,
mxfp8_e4m3, nvfp4, mxint8), N = K = ``--nk``; with ``--x mx`` activations of the weights'
format (MX x MX, as ``jax.nn.scaled_matmul`` has them); the host's SIMD path
(``MXLOWER_DOT_PATH`` forces one, in both trees).  ``--spread S`` multiplies each block of 32
values of both sides by a random power of two up to 2^S before quantizing: block scales that
far apart (the exact pairs' groups of blocks summed in f32 where their scales allow it:
``dot_kernels.EXACT_GROUP``).

    python bench/bench_dot_ab.py --before a421701 --m 1,2,8
    python bench/bench_dot_ab.py --before a421701 --m 2,8,16 --x mx --spread 8
    python bench/bench_dot_ab.py --before HEAD --m 8,64 --x bf16 --kn

``--kn``: the weights held K-major, ``[K, N]`` blocked along K, and the K-major kernel
(:attr:`~mxlower.lowering.dot_kernels.DotSpec.rhs_kn`) on both trees.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_kernels_ab import export, lowered_by, register_lowered  # noqa: E402

from mxlower.benchmarking import Session, evictor, round_robin  # noqa: E402

FORMATS = ("mxfp4_e2m1", "mxfp6_e2m3", "mxfp8_e4m3", "nvfp4", "mxint8")

#: the child's program: lower each dot kernel of (lhs, rhs, path, rhs_kn) (JSON on stdin)
#: with the mxlower it imports, print {name: LLVM-dialect text}
_CHILD = r"""
import json, sys
from mxlower.execution import ffi_dot
from mxlower.lowering.dot_kernels import DotSpec
out = {}
for lhs, rhs, path, kn in json.load(sys.stdin):
    s = DotSpec(lhs, rhs, path=path, **({"rhs_kn": True} if kn else {}))  # (older trees)
    out[s.name] = str(ffi_dot.lower_module(s)[1])
json.dump(out, sys.stdout)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="HEAD", help="the git revision to compare against")
    ap.add_argument("--m", default="1,2,8", help="rows of activations")
    ap.add_argument("--nk", type=int, default=4096, help="N = K of the weights")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", help="also save the numbers here")
    ap.add_argument("--x", default="f32,bf16",
                    help="activations: f32, bf16, f16, mx (the weights' format), "
                         "comma-separated")
    ap.add_argument("--formats", default=",".join(FORMATS), help="the weights' formats")
    ap.add_argument("--spread", type=int, default=0,
                    help="each block of 32 values of both sides times 2^u, u uniform in [0, "
                         "SPREAD]: block scales SPREAD binades further apart than normal "
                         "data's (the exact pairs' groups: EXACT_GROUP)")
    ap.add_argument("--kn", action="store_true",
                    help="weights held K-major, [K, N] blocked along K (DotSpec.rhs_kn: the "
                         "K-major kernel; plain activations)")
    ap.add_argument("--engine-before", action="store_true",
                    help="compile the revision's kernels by upstream MLIR's ExecutionEngine "
                         "(the kernel cache off for them; this checkout's through the cache "
                         "where it is on): with --before HEAD, the cache's libraries against "
                         "the JIT's code for the same kernels")
    a = ap.parse_args(argv)

    import jax
    import ml_dtypes

    import mxlower.jax as mxj
    from mxlower import reference as R
    from mxlower.execution import ffi_dot
    from mxlower.formats import FLOAT_TYPES
    from mxlower.formats import FORMATS as MX
    from mxlower.testing import assert_dot_close

    path = ffi_dot.host_path()
    kernels = [(f if x == "mx" else x, f, path, a.kn) for f in a.formats.split(",")
               for x in a.x.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        export(a.before, pathlib.Path(tmp))
        old = lowered_by(_CHILD, pathlib.Path(tmp), kernels)
    keep = [register_lowered(text, name, name + "_before",  # the revision's kernels
                             engine=a.engine_before)
            for name, text in old.items()]

    rng = np.random.default_rng(0)
    evict = evictor()  # 64 MiB read before each timed run

    def spread(v: np.ndarray) -> np.ndarray:
        if not a.spread:
            return v
        blocks = v.reshape(v.shape[0], -1, 32)
        up = np.exp2(rng.integers(0, a.spread + 1, blocks.shape[:2])).astype(np.float32)
        return (blocks * up[..., None]).reshape(v.shape)

    session = Session()
    rows = []
    NK = a.nk
    for lhs, fmt, _, kn in kernels:
        spec = ffi_dot.DotSpec(lhs, fmt, path=path, rhs_kn=kn)
        target = ffi_dot.register(spec)
        w32 = spread(rng.standard_normal((NK, NK)).astype(np.float32))
        w = mxj.quantize(w32, fmt, impl="xla")
        wk = (mxj.quantize(np.ascontiguousarray(w32.T), fmt, axis=0, impl="xla") if kn
              else w)  # the same weights [K, N], blocked along K (axis 0)
        e = np.asarray(w.elements)
        t = FLOAT_TYPES.get(MX[fmt].element)
        six = t is not None and t.bits == 6
        if six:  # f6 elements are held as their codes
            e = R.from_bits(e, MX[fmt].element)
        wv = R.dequantize(e, np.asarray(w.scales), fmt)
        for M in map(int, a.m.split(",")):
            x = spread(rng.standard_normal((M, NK)).astype(np.float32))
            if lhs in ("bf16", "f16"):
                x = x.astype(ml_dtypes.bfloat16 if lhs == "bf16" else np.float16)
            xs: tuple = (x,)
            if lhs == fmt:  # MX activations, the weights' format
                q = mxj.quantize(x, fmt, impl="xla")
                xs = (q.elements, q.scales)
                qe = np.asarray(q.elements)
                x = R.dequantize(R.from_bits(qe, MX[fmt].element) if six else qe,
                                 np.asarray(q.scales), fmt)
            ops = [jax.device_put(np.asarray(o)[None]) for o in (*xs, wk.elements, wk.scales)]
            out = jax.ShapeDtypeStruct((1, M, NK), np.float32)
            fns = {k: jax.jit(jax.ffi.ffi_call(t, out))
                   for k, t in (("before", spec.name + "_before"), ("after", target))}
            for k, f in fns.items():
                assert_dot_close(np.asarray(f(*ops))[0], x.astype(np.float32), wv,
                                 (((1,), (1,)), ((), ())), what=f"{spec.name} M={M} {k}")
            t = round_robin({k: (lambda f=f: jax.block_until_ready(f(*ops)))
                             for k, f in fns.items()}, a.reps, before=evict)
            rows.append({"kernel": spec.name, "weights": fmt, "x": "mx" if lhs == fmt else lhs,
                         "M": M,
                         "before_ms": t["before"] * 1e3,
                         "after_ms": t["after"] * 1e3,
                         "before_over_after": t["before"] / t["after"]})
            print(f"{spec.name} M={M}: {t['before'] * 1e3:.3f} -> {t['after'] * 1e3:.3f} ms",
                  file=sys.stderr)

    print(session.header(f"dot kernel GEMV{' (K-major weights)' if a.kn else ''}: "
                         f"{a.before} against this checkout, N = K = {NK}, "
                         f"path {path}, weights evicted before each run, best of {a.reps}"
                         + (f", block spread {a.spread}" if a.spread else "")))
    print("| M | weights | x | before (ms) | after (ms) | before / after |")
    print("|---:|---|---|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: r["M"]):
        print(f"| {r['M']} | {r['weights']} | {r['x']} | {r['before_ms']:.3f} | "
              f"{r['after_ms']:.3f} | "
              f"{r['before_over_after']:.2f}x |")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    del keep  # the revision's engines, alive until here
    return 0


if __name__ == "__main__":
    sys.exit(main())
