"""mxlower's CUDA kernels and its XLA:GPU paths on a GPU, against a device-to-device copy and
against JAX's own quantize / scaled_matmul, ratios measured in one run (issue 25).

Runs on a lent GPU machine without mxlower's MLIR stacks: the CUDA FFI handlers are built where
the stacks are (``python test/python/test_gpu_kernels.py build .gpu-kernels``) and carried::

    XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=.:test/python \\
        python3 bench/bench_gpu.py --part kernels --kernels .gpu-kernels --out kernels.json
    ... --part jax ...   # JAX's quantize and scaled_matmul, mxlower.jax impl="auto" / "xla"

``--part kernels`` launches each carried handler through its XLA FFI C ABI on a CuPy stream
(XLA's API stood in for by test_gpu_kernels.FakeApi, the real CUDA driver; the call frame
built once) and times it with CUDA events: bandwidth = bytes read + written per call, against
``cupy.copyto`` of the wide array (bytes read + written) at the same size.  ``--part jax`` times jitted calls on the GPU
(the median of batches of calls ended by ``block_until_ready``): mxlower.jax.quantize with
``impl="auto"`` (the carried handlers, registered for CUDA) and ``impl="xla"`` (the portable
StableHLO) against JAX's own quantizer (``jax._src.cudnn.scaled_matmul_stablehlo.quantize``),
and mxlower.jax.scaled_dot against ``jax.nn.scaled_matmul`` and plain dots.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

import test_gpu_kernels as G  # noqa: E402 (test/python on PYTHONPATH)

KERNEL_CASES = (
    [{"op": "quantize", "format": f, "scale_mode": "floor"}
     for f in ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8",
               "nvfp4")]
    + [{"op": "quantize", "format": "mxfp8_e4m3", "scale_mode": "rceil"},
       {"op": "quantize", "format": "mxfp8_e4m3", "wide": "bf16"}]
    + [{"op": "dequantize", "format": f}
       for f in ("mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "mxint8", "nvfp4")]
    + [{"op": "convert", "src": "f32", "dst": d} for d in ("f8E4M3FN", "f6E2M3FN", "f4E2M1FN")]
    + [{"op": "convert", "src": s, "dst": "f32"} for s in ("f8E4M3FN", "f4E2M1FN")]
    + [G._cast("e2m1fn", "e8m0_t32", scalemode="max"),
       G._cast("e4m3fn", "e8m0_t128", "f16", "zero", "midmax"),
       G._cast("e5m6"), G._cast("e2m1fo", "e8m0_t32"),
       G._cast("nf4", "e8m0_t32", roundmode="stochastic", scalemode="midmax"),
       G._cast("int8", "e8m0_t16_s2o1"),
       G._cast("e2m1fo", "e4m3fn_t16_gf32", "bf16", "stochastic", g=0.3)])


def _nbytes(kind: str, dtype: str, n: int, k: int) -> int:
    if kind == "scalar":
        return 4
    if kind == "scales":
        return n // k
    if kind == "packed6":
        return n * 3 // 4
    if dtype == "float4_e2m1fn":
        return n // 2
    return n * np.dtype(dtype).itemsize if dtype != "bfloat16" else n * 2


def _events(cp, stream, fn, reps: int) -> float:
    """Seconds per call of ``fn`` (launches on ``stream``), from CUDA events over ``reps``:
    the median of 3 such batches.  The whole device is synchronized first: ``stream`` does
    not wait for work on the default stream (the inputs' random fill), which would otherwise
    run during the timing."""
    cp.cuda.Device().synchronize()
    for _ in range(3):
        fn()
    stream.synchronize()
    times = []
    for _ in range(3):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        for _ in range(reps):
            fn()
        end.record(stream)
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3 / reps)
    return statistics.median(times)


def part_kernels(root: str, logs: list[int], reps: int, only: str | None = None) -> dict:
    import cupy as cp

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    out: dict = {"device": props["name"].decode(), "cc": dev.compute_capability,
                 "driver": cp.cuda.runtime.driverGetVersion(),
                 "runtime": cp.cuda.runtime.runtimeGetVersion(), "rows": []}
    manifest = G._manifest(root)
    stream = cp.cuda.Stream(non_blocking=True)
    api = G.FakeApi(stream=stream.ptr)
    for lg in logs:
        n = 1 << lg
        shape = (n // 4096, 4096)
        src = cp.empty(n * 4, cp.uint8)
        dst = cp.empty_like(src)
        with stream:
            t_copy = _events(cp, stream, lambda: cp.copyto(dst, src), reps)
        copy_bw = 2 * src.nbytes / t_copy
        out["rows"].append({"case": "copy", "n": n, "s": t_copy, "GBps": copy_bw / 1e9})
        del src, dst
        for c in KERNEL_CASES:
            if only and only not in G.case_id(c):
                continue
            e = manifest.get(G.case_id(c))
            if e is None:
                out["rows"].append({"case": G.case_id(c), "n": n, "error": "not carried"})
                continue
            handler = G._handler_of(os.path.join(root, f"{e['name']}.so"), e["name"])
            k = e["k"]
            ins = [cp.random.randint(0, 256, _nbytes(o[2], o[1], n, k), dtype=cp.uint8)
                   for o in e["operands"]]
            for o, a in zip(e["operands"], ins):  # finite wide inputs, a finite global scale
                if o[2] in ("values", "scalar") and o[1] in ("float32", "float16", "bfloat16"):
                    a.view(cp.uint8)[:] = 0
                    w = {"float32": cp.float32, "float16": cp.float16}.get(o[1], cp.float16)
                    v = cp.random.standard_normal(a.size // np.dtype(w).itemsize, dtype=cp.float32)
                    a.view(w)[:] = v.astype(w)
            outs = [cp.empty(_nbytes(o[2], o[1], n, k), cp.uint8) for o in e["results"]]
            moved = sum(a.nbytes for a in ins) + sum(a.nbytes for a in outs)
            errs: list = []

            fr, _keep = G.frame(api, e["operands"], e["results"], [a.data.ptr for a in ins],
                                [a.data.ptr for a in outs], k, shape)
            at = ctypes.addressof(fr)

            def launch():  # the frame built once: the host's share of a call is the handler's
                if handler(at) is not None:
                    errs.append(api.errors[-1:])

            try:
                t = _events(cp, stream, launch, reps)
                bw = moved / t
                out["rows"].append({"case": G.case_id(c), "kernel": e["name"], "n": n, "s": t,
                                    "bytes": moved, "GBps": bw / 1e9,
                                    "of_copy": bw / copy_bw, "errors": errs[:1]})
            except Exception as err:  # noqa: BLE001 - recorded, the run goes on
                out["rows"].append({"case": G.case_id(c), "n": n, "error": repr(err)[:300]})
            del ins, outs
            cp.get_default_memory_pool().free_all_blocks()
    return out


def _time_jax(jax, fn, args, reps: int) -> float:
    r = fn(*args)
    jax.block_until_ready(r)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            r = fn(*args)
        jax.block_until_ready(r)
        ts.append((time.perf_counter() - t0) / reps)
    return statistics.median(ts)


def part_jax(root: str | None, logs: list[int], reps: int, platform_name: str,
             dot_shapes: list[tuple[int, int, int]]) -> dict:
    import jax
    import jax.numpy as jnp

    import mxlower.jax as mxj

    if root:
        import test_gpu_jax

        os.environ[G.KERNELS_ENV] = root
        test_gpu_jax._carried()
    from mxlower.bindings import jax_private  # JAX's own (private) quantizer

    gpu = jax.devices(platform_name)[0]
    out: dict = {"jax": jax.__version__, "device": gpu.device_kind, "quantize": [], "dot": []}

    def rec(table: str, **row):
        out[table].append(row)
        print(table, row, flush=True)

    for lg in logs:
        n = 1 << lg
        x = jax.device_put(np.random.default_rng(0).standard_normal((n // 4096, 4096),
                                                                    np.float32), gpu)
        moved = {"mxfp8_e4m3": n * 4 + n + n // 32, "nvfp4": n * 4 + n // 2 + n // 16}
        t_copy = _time_jax(jax, jax.jit(lambda x: x + 1.0), (x,), reps)
        rec("quantize", n=n, what="xla x + 1 (elementwise, f32 in and out)", s=t_copy,
            GBps=2 * n * 4 / t_copy / 1e9)
        for fmt, mode, jaxmode in (("mxfp8_e4m3", "rceil", "mxfp8"), ("nvfp4", "floor", "nvfp4")):
            cfg = jax.nn.get_scaled_dot_general_config(jaxmode)
            cands = [("jax", jax.jit(lambda x, cfg=cfg: jax_private.jax_quantize(x, cfg)))]
            for impl in (["auto"] if root else []) + ["xla"]:
                cands.append((f"mxlower {impl}", jax.jit(
                    lambda x, fmt=fmt, mode=mode, impl=impl: mxj.quantize(
                        x, fmt, scale_mode=mode, impl=impl).detach())))
            for name, f in cands:
                try:
                    t = _time_jax(jax, f, (x,), reps)
                    rec("quantize", n=n, format=fmt, what=name, s=t,
                        GBps=moved[fmt] / t / 1e9)
                except Exception as err:  # noqa: BLE001
                    rec("quantize", n=n, format=fmt, what=name, error=repr(err)[:300])
        del x
    rng = np.random.default_rng(1)
    for m, nn, kk in dot_shapes:
        a = jax.device_put(rng.standard_normal((m, kk), np.float32), gpu)
        b = jax.device_put(rng.standard_normal((nn, kk), np.float32), gpu)
        flops = 2 * m * nn * kk
        for fmt, jaxmode in (("mxfp8_e4m3", "mxfp8"), ("nvfp4", "nvfp4")):
            cfg = jax.nn.get_scaled_dot_general_config(jaxmode)
            qa, sa = jax.jit(lambda x, cfg=cfg: jax_private.jax_quantize(x, cfg))(a)
            qb, sb = jax.jit(lambda x, cfg=cfg: jax_private.jax_quantize(x, cfg))(b)
            ma = mxj.MXArray(qa, sa, fmt)
            mb = mxj.MXArray(qb, sb, fmt)
            cands = [("jax.nn.scaled_matmul", jax.jit(
                lambda qa, qb, sa, sb: jax.nn.scaled_matmul(qa[None], qb[None], sa[None],
                                                            sb[None])[0]), (qa, qb, sa, sb))]
            for impl in ("auto", "xla"):
                cands.append((f"mxlower.jax.scaled_dot {impl}", jax.jit(
                    lambda ma, mb, impl=impl: mxj.scaled_dot(ma, mb, impl=impl)), (ma, mb)))
            for name, f, args in cands:
                try:
                    t = _time_jax(jax, f, args, 3)
                    rec("dot", m=m, n=nn, k=kk, format=fmt, what=name, s=t,
                        TFLOPs=flops / t / 1e12)
                except Exception as err:  # noqa: BLE001
                    rec("dot", m=m, n=nn, k=kk, format=fmt, what=name, error=repr(err)[:300])
        for name, f in (("f32 dot HIGHEST", jax.jit(lambda a, b: jnp.dot(
                            a, b.T, precision=jax.lax.Precision.HIGHEST))),
                        ("bf16 dot", jax.jit(lambda a, b: jnp.dot(
                            a.astype(jnp.bfloat16), b.T.astype(jnp.bfloat16),
                            preferred_element_type=jnp.float32)))):
            t = _time_jax(jax, f, (a, b), 3)
            rec("dot", m=m, n=nn, k=kk, format="-", what=name, s=t, TFLOPs=flops / t / 1e12)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("kernels", "jax"), required=True)
    ap.add_argument("--kernels", help="folder of carried CUDA handlers (test_gpu_kernels build)")
    ap.add_argument("--sizes", default="24,26,28", help="log2 of the element counts")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", help="--part kernels: only the cases whose id holds this text "
                    "(e.g. dequantize-mxfp4, for a profiler)")
    ap.add_argument("--platform", default="cuda", help="JAX platform of --part jax")
    ap.add_argument("--dot-shapes", default="16x4096x4096,4096x4096x4096",
                    help="MxNxK of the --part jax dots, comma-separated")
    ap.add_argument("--out", required=True, help="JSON file to write")
    a = ap.parse_args(argv)
    logs = [int(s) for s in a.sizes.split(",")]
    if a.part == "kernels":
        if not a.kernels:
            ap.error("--part kernels needs --kernels")
        res = part_kernels(a.kernels, logs, a.reps, a.only)
    else:
        shapes = [tuple(int(v) for v in d.split("x")) for d in a.dot_shapes.split(",")]
        res = part_jax(a.kernels, logs, a.reps, a.platform, shapes)
    res["host"] = platform.node()
    try:
        res["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,memory.total",
             "--format=csv,noheader"], capture_output=True, text=True, check=False).stdout
    except OSError:
        pass
    res["date"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
    for r in res.get("rows", []):
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
