"""mxlower.jax on the CPU: quantize and scaled_dot against JAX's own code, in one run.

Everything is ``jax.jit``-compiled once and timed on XLA:CPU in the same process:

* quantize of an f32 ``[M, K]`` array along K: ``mxlower.jax.quantize`` (mxfp8_e4m3 with the
  floor and rceil scale rules, mxfp4_e2m1, nvfp4) against JAX's own block quantizer, the jnp
  code ``jax.nn.scaled_dot_general`` uses (``jax._src.cudnn.scaled_matmul_stablehlo.quantize``
  with ``get_scaled_dot_general_config("mxfp8")`` / ``("nvfp4")``), and against plain
  f32 -> f8E4M3FN / f4E2M1FN ``astype`` (XLA's own conversion of the same bytes, no block
  scaling: the floor under any quantizer that ends in that conversion);
* ``[M, K] x [N, K] -> [M, N]``: ``mxlower.jax.scaled_dot`` of pre-quantized MX operands
  (mxfp8 x mxfp8, mxfp4 x mxfp4), JAX's ``jax.nn.scaled_matmul`` on the same mxfp8 operands
  (runs on the CPU through ``mxlower.jax.install()``), a bf16 ``dot_general`` (f32 result)
  and an f32 ``dot_general`` of the same shape.

Each case's time is the median of ``--reps`` runs after two warm-up runs, the cases of one
group timed round-robin (so load from other processes hits them alike).  Printed as Markdown
tables (for BENCHMARKS.md); ``--json`` writes the numbers too.

    python bench/bench_jax.py                     # ~1 minute on 2 cores
    python bench/bench_jax.py --m 512 --k 2048 --n 512 --reps 10
    python bench/bench_jax.py --only quantize --expand f6   # XLA's own narrow conversions
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import mxlower.jax as mxj
from mxlower.benchmarking import cpu_model


def time_group(cases: dict[str, tuple], reps: int) -> dict[str, float]:
    """Median seconds per call of each jitted case (compiled by its first call), timed
    round-robin.  A case is ``(fn, args)`` or ``(fn, args, reduction)``: a K-sharded dot
    compiled with :data:`mxlower.jax.sharding.FORCE_REDUCTION` set to ``reduction`` (the A/B
    switch; each case needs a function of its own, or jit reuses the first one's program).
    jit calls, not ahead-of-time ``Compiled`` objects: JAX 0.10's ``Compiled`` refuses f4
    arrays committed to a device (a layout mismatch its jit calls do not have)."""
    from mxlower.jax import sharding

    compiled = {}
    for name, (fn, args, *force) in cases.items():
        c = jax.jit(fn)
        sharding.FORCE_REDUCTION = force[0] if force else None
        try:
            jax.block_until_ready(c(*args))
        finally:
            sharding.FORCE_REDUCTION = None
        jax.block_until_ready(c(*args))
        compiled[name] = (c, args)
    times: dict[str, list[float]] = {n: [] for n in cases}
    for _ in range(reps):
        for name, (c, args) in compiled.items():
            t = time.perf_counter()
            jax.block_until_ready(c(*args))
            times[name].append(time.perf_counter() - t)
    return {n: float(np.median(v)) for n, v in times.items()}


def bench_quantize(m: int, k: int, reps: int) -> list[dict]:
    from mxlower.bindings.jax_private import jax_quantize  # JAX's own (private) quantizer

    x = jnp.asarray(np.random.default_rng(0).standard_normal((m, k)), jnp.float32)
    mx8 = jax.nn.get_scaled_dot_general_config("mxfp8")
    nv4 = jax.nn.get_scaled_dot_general_config("nvfp4", global_scale=jnp.float32(1.0))

    def parts(q):
        return q.elements, q.scales

    cases = {
        "mxlower.jax.quantize mxfp8_e4m3 floor": (
            lambda x: parts(mxj.quantize(x, "mxfp8_e4m3")), (x,)),
        "mxlower.jax.quantize mxfp8_e4m3 rceil": (
            lambda x: parts(mxj.quantize(x, "mxfp8_e4m3", scale_mode="rceil")), (x,)),
        "JAX quantize (scaled_dot_general, mxfp8)": (lambda x: jax_quantize(x, mx8), (x,)),
        "mxlower.jax.quantize mxfp4_e2m1": (
            lambda x: parts(mxj.quantize(x, "mxfp4_e2m1")), (x,)),
        "mxlower.jax.quantize nvfp4": (lambda x: parts(mxj.quantize(x, "nvfp4")), (x,)),
        "JAX quantize (scaled_dot_general, nvfp4)": (lambda x: jax_quantize(x, nv4), (x,)),
        "x.astype(float8_e4m3fn) (no scaling)": (lambda x: x.astype(jnp.float8_e4m3fn), (x,)),
        "x.astype(float4_e2m1fn) (no scaling)": (lambda x: x.astype(jnp.float4_e2m1fn), (x,)),
    }
    t = time_group(cases, reps)
    return [{"case": n, "ms": s * 1e3, "gb_s": m * k * 4 / s / 1e9} for n, s in t.items()]


def bench_dot(m: int, n: int, k: int, reps: int) -> list[dict]:
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.standard_normal((m, k)), jnp.float32)
    b = jnp.asarray(rng.standard_normal((n, k)), jnp.float32)
    qa8, qb8 = mxj.quantize(a, "mxfp8_e4m3"), mxj.quantize(b, "mxfp8_e4m3")
    qa4, qb4 = mxj.quantize(a, "mxfp4_e2m1"), mxj.quantize(b, "mxfp4_e2m1")
    dn = (((1,), (1,)), ((), ()))
    mxj.install()
    cases = {
        "mxlower.jax.scaled_dot mxfp8 x mxfp8": (mxj.scaled_dot, (qa8, qb8)),
        "mxlower.jax.scaled_dot mxfp4 x mxfp4": (mxj.scaled_dot, (qa4, qb4)),
        "jax.nn.scaled_matmul mxfp8 (via install())": (
            lambda e1, e2, s1, s2: jax.nn.scaled_matmul(e1[None], e2[None], s1[None], s2[None]),
            (qa8.elements, qb8.elements, qa8.scales, qb8.scales)),
        "bf16 dot_general (f32 result)": (
            lambda x, y: jax.lax.dot_general(x, y, dn, preferred_element_type=jnp.float32),
            (a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))),
        "f32 dot_general": (lambda x, y: jax.lax.dot_general(x, y, dn), (a, b)),
    }
    t = time_group(cases, reps)
    return [{"case": nm, "ms": s * 1e3, "gflop_s": 2 * m * n * k / s / 1e9}
            for nm, s in t.items()]


def bench_sharded(m: int, n: int, k: int, dot_k: int, reps: int) -> dict[str, list[dict]]:
    """Quantize of an f32 ``[m, k]`` array and an mxfp8 x mxfp8 ``[m, dot_k] x [n, dot_k]``
    dot on one device against the same programs with their operands sharded over every
    host device (``--sharded``): each shard runs mxlower's kernels
    (:mod:`mxlower.jax.sharding`); ``impl="xla"`` is the StableHLO, which sharded programs
    used before."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = jax.devices()
    mesh = jax.make_mesh((len(devices),), ("x",))
    one = jax.sharding.SingleDeviceSharding(devices[0])

    def on(spec):
        return NamedSharding(mesh, spec)

    rng = np.random.default_rng(0)
    x = np.asarray(rng.standard_normal((m, k)), np.float32)

    def quant(impl):
        def f(x):
            q = mxj.quantize(x, "mxfp8_e4m3", impl=impl)
            return q.elements, q.scales
        return f

    qcases = {}
    for impl in ("auto", "xla"):
        qcases[f"quantize impl={impl}, one device"] = (quant(impl), (jax.device_put(x, one),))
        qcases[f"quantize impl={impl}, rows over {len(devices)}"] = (
            quant(impl), (jax.device_put(x, on(P("x", None))),))
        qcases[f"quantize impl={impl}, blocked axis over {len(devices)}"] = (
            quant(impl), (jax.device_put(x, on(P(None, "x"))),))
    qt = time_group(qcases, reps)

    a = np.asarray(rng.standard_normal((m, dot_k)), np.float32)
    b = np.asarray(rng.standard_normal((n, dot_k)), np.float32)
    qa, qb = mxj.quantize(a, "mxfp8_e4m3"), mxj.quantize(b, "mxfp8_e4m3")

    def dot(impl):
        return lambda qa, qb: mxj.scaled_dot(qa, qb, impl=impl)

    dcases = {}
    for impl in ("auto", "xla"):
        dcases[f"scaled_dot impl={impl}, one device"] = (
            dot(impl), (jax.device_put(qa, one), jax.device_put(qb, one)))
        dcases[f"scaled_dot impl={impl}, M over {len(devices)}"] = (
            dot(impl), (jax.device_put(qa, on(P("x", None))), jax.device_put(qb, on(P()))))
        dcases[f"scaled_dot impl={impl}, K over {len(devices)}"] = (
            dot(impl), (jax.device_put(qa, on(P(None, "x"))),
                        jax.device_put(qb, on(P(None, "x")))))
    # the K-sharded kernel dot's three ways (mxlower.jax.sharding.Reduction), A/B
    kargs = dcases[f"scaled_dot impl=auto, K over {len(devices)}"][1]
    for how in ("gather", "scatter", "all-reduce"):
        dcases[f"scaled_dot impl=auto, K over {len(devices)}, forced {how}"] = (
            dot("auto"), kargs, how)
    # ... and with the result left split over the devices (out_shardings): no all-gather after
    dcases[f"scaled_dot impl=auto, K over {len(devices)}, result M over {len(devices)}"] = (
        jax.jit(dot("auto"), out_shardings=on(P("x", None))), kargs)
    dt = time_group(dcases, reps)

    # the GEMV of tensor parallelism: bf16 activations [8, dot_k * 4] against mxfp4 weights
    # [m, dot_k * 4], K sharded (both operands), the partials summed across the devices
    gk = 4 * dot_k
    xs = jnp.asarray(rng.standard_normal((8, gk)), jnp.bfloat16)
    ws = mxj.quantize(np.asarray(rng.standard_normal((m, gk)), np.float32), "mxfp4_e2m1")

    def gemv():
        return lambda x, w: mxj.scaled_dot(x, w, preferred_element_type=jnp.bfloat16)

    gcases = {"GEMV impl=auto, one device": (gemv(), (jax.device_put(xs, one),
                                                    jax.device_put(ws, one)))}
    gargs = (jax.device_put(xs, on(P(None, "x"))), jax.device_put(ws, on(P(None, "x"))))
    gcases[f"GEMV impl=auto, K over {len(devices)}"] = (gemv(), gargs)
    gcases[f"GEMV impl=auto, K over {len(devices)}, forced all-reduce"] = (
        gemv(), gargs, "all-reduce")
    gt = time_group(gcases, reps)
    return {"quantize": [{"case": c, "ms": s * 1e3, "gb_s": m * k * 4 / s / 1e9}
                         for c, s in qt.items()],
            "dot": [{"case": c, "ms": s * 1e3, "gflop_s": 2 * m * n * dot_k / s / 1e9}
                    for c, s in dt.items()],
            "gemv": [{"case": c, "ms": s * 1e3, "gflop_s": 2 * 8 * m * gk / s / 1e9}
                     for c, s in gt.items()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="mxlower.jax CPU benchmark")
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", default=None)
    ap.add_argument("--expand", choices=("all", "f6"), default="all",
                    help="mxlower.jax.lowering.EXPAND_NARROW_FLOATS (f6: XLA's own "
                    "conversions for the narrow types it has)")
    ap.add_argument("--only", choices=("quantize", "dot"), default=None)
    ap.add_argument("--sharded", type=int, default=0, metavar="DEVICES",
                    help="instead: quantize (--m x --k) and a dot (--m x --dot-k x --n) on one "
                    "of DEVICES host devices and sharded over all of them "
                    "(--xla_force_host_platform_device_count)")
    ap.add_argument("--dot-k", type=int, default=1024, help="K of the --sharded dot")
    args = ap.parse_args(argv)
    if args.sharded:
        return main_sharded(args)

    from mxlower.jax import lowering

    lowering.EXPAND_NARROW_FLOATS = args.expand
    q = bench_quantize(args.m, args.k, args.reps) if args.only != "dot" else []
    d = bench_dot(args.m, args.n, args.k, args.reps) if args.only != "quantize" else []
    info = {"cpu": cpu_model(), "cores": os.cpu_count(), "jax": jax.__version__,
            "m": args.m, "n": args.n, "k": args.k, "reps": args.reps, "expand": args.expand,
            "loadavg": os.getloadavg()[0]}
    print(f"CPU: {info['cpu']}, {info['cores']} cores, jax {info['jax']}, "
          f"median of {args.reps}, expand={args.expand}, load average {info['loadavg']:.1f}")
    if q:
        print(f"\nquantize f32 [{args.m}, {args.k}] along K\n")
        print("| case | ms | input GB/s |\n|---|---:|---:|")
        for r in q:
            print(f"| {r['case']} | {r['ms']:.2f} | {r['gb_s']:.2f} |")
    if d:
        print(f"\n[{args.m}, {args.k}] x [{args.n}, {args.k}] -> [{args.m}, {args.n}]\n")
        print("| case | ms | GFLOP/s |\n|---|---:|---:|")
        for r in d:
            print(f"| {r['case']} | {r['ms']:.2f} | {r['gflop_s']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "quantize": q, "dot": d}, f, indent=1)
    return 0


def main_sharded(args: argparse.Namespace) -> int:
    flag = f"--xla_force_host_platform_device_count={args.sharded}"
    # read when JAX starts its CPU backend, which nothing here has used yet
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    if len(jax.devices()) != args.sharded:
        raise SystemExit(f"bench_jax: expected {args.sharded} devices, got {jax.devices()} "
                         "(was XLA_FLAGS set before JAX started?)")
    r = bench_sharded(args.m, args.n, args.k, args.dot_k, args.reps)
    info = {"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)), "jax": jax.__version__,
            "devices": args.sharded, "m": args.m, "n": args.n, "k": args.k,
            "dot_k": args.dot_k, "reps": args.reps, "loadavg": os.getloadavg()[0]}
    print(f"CPU: {info['cpu']}, {info['cores']} cores shared by {args.sharded} host devices, "
          f"jax {info['jax']}, median of {args.reps}, load average {info['loadavg']:.1f}")
    print(f"\nquantize mxfp8_e4m3 of f32 [{args.m}, {args.k}] along K\n")
    print("| case | ms | input GB/s |\n|---|---:|---:|")
    for row in r["quantize"]:
        print(f"| {row['case']} | {row['ms']:.2f} | {row['gb_s']:.2f} |")
    print(f"\nscaled_dot mxfp8 x mxfp8 [{args.m}, {args.dot_k}] x [{args.n}, {args.dot_k}]\n")
    print("| case | ms | GFLOP/s |\n|---|---:|---:|")
    for row in r["dot"]:
        print(f"| {row['case']} | {row['ms']:.2f} | {row['gflop_s']:.1f} |")
    print(f"\nscaled_dot bf16 [8, {4 * args.dot_k}] x mxfp4 [{args.m}, {4 * args.dot_k}] "
          "(bf16 result)\n")
    print("| case | ms | GFLOP/s |\n|---|---:|---:|")
    for row in r["gemv"]:
        print(f"| {row['case']} | {row['ms']:.2f} | {row['gflop_s']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, **r}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
