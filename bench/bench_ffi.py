"""mxlower's fused FFI kernels on the CPU against memcpy, mxlower.jax's StableHLO and JAX's own
quantizer, in one run.

For each size (f32 ``[N / 4096, 4096]``, blocked along the last axis), timed round-robin in
one process (the fastest of ``--reps`` runs after two warm-ups, so load from other processes
hits every case alike):

* ``ffi``: :func:`mxlower.execution.ffi.quantize` under ``jax.jit`` (mxfp8_e4m3, mxfp6_e2m3,
  mxfp4_e2m1, nvfp4, mxint8; floor scales), and :func:`~mxlower.execution.ffi.dequantize` of
  mxfp4 and nvfp4 back to f32;
* ``stablehlo``: ``mxlower.jax.quantize`` / ``dequantize`` (today's portable lowering, as
  ``impl="xla"`` runs it);
* ``kernel alone``: the same kernels' handlers called directly through the C ABI on buffers
  allocated once, on one thread (what the kernel costs without XLA's per-call result
  allocation and without XLA's thread pool);
* ``jax``: JAX's own block quantizer (``jax._src.cudnn.scaled_matmul_stablehlo.quantize`` with
  the ``mxfp8`` / ``nvfp4`` configs of ``jax.nn.get_scaled_dot_general_config``, the code
  ``jax.nn.scaled_dot_general`` uses);
* ``memcpy``: ``numpy.copyto`` of the f32 input into a buffer whose pages are already mapped
  (one thread), the bandwidth the kernels are measured against: a case's "% of memcpy" is
  (the bytes it must move: input read plus elements and scales written) / its time /
  (2 x input bytes / memcpy time); and the same copy through XLA (``x + 0.0``), which, like
  every XLA call here, writes a freshly allocated result (page faults included).

Then, per kernel, the build (MLIR: kernel, lowering, handler) and LLVM compile times and the
first-call overhead of a jitted call (tracing, kernel compile, registration and XLA compile)
against the same call warm.  Printed as Markdown; ``--json`` saves the rows.

    python bench/bench_ffi.py                         # 2^22, 2^24, 2^26 (a few minutes)
    python bench/bench_ffi.py --sizes 22 --reps 10
"""

from __future__ import annotations

import argparse
import ctypes
import os
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import mxlower.jax as mxj
from mxlower.benchmarking import Session, round_robin
from mxlower.execution import ffi
from mxlower.execution import ffi_abi as abi
from mxlower.formats import FORMATS
from mxlower.lowering.mx_kernels import KernelSpec

FORMATS_Q = ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4", "mxint8")
FORMATS_DQ = ("mxfp4_e2m1", "nvfp4")
ROW = 4096
MEMCPY = "memcpy (numpy.copyto of the f32 input, warm pages)"


def _ready(fn: Callable, *args) -> Callable[[], object]:
    return lambda: jax.block_until_ready(fn(*args))


def _parts(q: mxj.MXArray) -> tuple:
    return q.elements, q.scales


def written(fmt: str, n: int) -> float:
    """Bytes of elements and scales a quantize of ``n`` values writes."""
    f = FORMATS[fmt]
    return n * f.bits / 8 + n / f.block_size


def bench_size(logn: int, reps: int) -> list[dict]:
    from jax._src.cudnn.scaled_matmul_stablehlo import quantize as jax_quantize

    n = 1 << logn
    x = jnp.asarray(np.random.default_rng(0).standard_normal((n // ROW, ROW)), jnp.float32)
    src = np.asarray(x).copy()
    dst = np.empty_like(src)
    dst[...] = 1  # touch the pages once
    cases: dict[str, tuple[Callable[[], object], float]] = {
        MEMCPY: (lambda: np.copyto(dst, src), 2 * 4 * n),
        # the same bytes through XLA, which allocates its result on every call as the
        # kernels' results are
        "XLA copy (x + 0.0 under jit, f32)": (_ready(jax.jit(lambda x: x + 0.0), x), 2 * 4 * n),
    }
    xn = np.asarray(x)
    for fmt in FORMATS_Q:
        moved = 4 * n + written(fmt, n)
        cases[f"kernel alone, quantize {fmt} (C ABI, warm buffers)"] = (
            direct_case(KernelSpec("quantize", fmt), xn), moved)
        cases[f"ffi quantize {fmt}"] = (
            _ready(jax.jit(lambda x, f=fmt: ffi.quantize(x, f)), x), moved)
        cases[f"stablehlo quantize {fmt}"] = (
            _ready(jax.jit(lambda x, f=fmt: _parts(mxj.quantize(x, f, impl="xla"))), x), moved)
    mx8 = jax.nn.get_scaled_dot_general_config("mxfp8")
    nv4 = jax.nn.get_scaled_dot_general_config("nvfp4", global_scale=jnp.float32(1.0))
    cases["jax quantize mxfp8 (scaled_dot_general's)"] = (
        _ready(jax.jit(lambda x: jax_quantize(x, mx8)), x), 4 * n + written("mxfp8_e4m3", n))
    cases["jax quantize nvfp4 (scaled_dot_general's)"] = (
        _ready(jax.jit(lambda x: jax_quantize(x, nv4)), x), 4 * n + written("nvfp4", n))
    for fmt in FORMATS_DQ:
        q = mxj.quantize(x, fmt).detach()
        moved = 4 * n + written(fmt, n)
        cases[f"ffi dequantize {fmt}"] = (
            _ready(jax.jit(lambda e, s, f=fmt: ffi.dequantize(e, s, f)), q.elements, q.scales),
            moved)
        cases[f"stablehlo dequantize {fmt}"] = (
            _ready(jax.jit(lambda q: mxj.dequantize(q, impl="xla")), q), moved)
    t = round_robin({k: fn for k, (fn, _) in cases.items()}, reps)
    memcpy_bw = cases[MEMCPY][1] / t[MEMCPY]
    rows = []
    for k, (_, moved) in cases.items():
        bw = moved / t[k]
        rows.append({"size": f"2^{logn}", "case": k, "ms": t[k] * 1e3, "gb_s": bw / 1e9,
                     "of_memcpy": bw / memcpy_bw})
    base = {r["case"]: r["ms"] for r in rows}
    for r in rows:
        for kind in ("quantize", "dequantize"):
            if r["case"].startswith(f"ffi {kind} "):
                fmt = r["case"].rsplit(" ", 1)[1]
                r["vs_stablehlo"] = base[f"stablehlo {kind} {fmt}"] / r["ms"]
                jax_case = {"mxfp8_e4m3": "jax quantize mxfp8 (scaled_dot_general's)",
                            "nvfp4": "jax quantize nvfp4 (scaled_dot_general's)"}.get(fmt)
                if kind == "quantize" and jax_case:
                    r["vs_jax"] = base[jax_case] / r["ms"]
    return rows


def _buffer(a: np.ndarray, dtype: str, dims: tuple[int, ...], keep: list) -> int:
    d = (ctypes.c_int64 * len(dims))(*dims)
    b = abi.Buffer(struct_size=ctypes.sizeof(abi.Buffer), dtype=abi.DTYPES[dtype],
                   data=a.ctypes.data, rank=len(dims), dims=d)
    keep += [d, b]
    return ctypes.addressof(b)


def direct_case(spec: KernelSpec, x: np.ndarray) -> Callable[[], object]:
    """The kernel's handler called through the C ABI on buffers allocated (and touched) once:
    the kernel alone, on this thread, without XLA's per-call result allocation."""
    ck = ffi.compile_kernel(spec)
    n = x.size
    res = spec.results()
    elements = np.ones(n // 2 if spec.fmt.bits == 4 else n, np.uint8)  # f6: a code a byte
    scales = np.ones(n // spec.k, np.uint8)
    keep: list = []
    shape = x.shape
    bufs = [_buffer(elements, res[0].dtype.name, shape, keep),
            _buffer(scales, res[1].dtype.name, (*shape[:-1], shape[-1] // spec.k), keep)]
    args = (ctypes.c_void_p * 1)(_buffer(x, "float32", shape, keep))
    rets = (ctypes.c_void_p * 2)(*bufs)
    types = (ctypes.c_int32 * 2)(abi.BUFFER, abi.BUFFER)
    # an API without the thread-pool functions: the kernel runs on this thread alone
    api = abi.Api(struct_size=abi.Api.XLA_FFI_Error_Create.offset + 8)
    frame = abi.CallFrame(
        struct_size=abi.struct_size(abi.CallFrame, "attrs"), stage=abi.EXECUTE,
        api=ctypes.addressof(api),
        args=abi.Args(struct_size=ctypes.sizeof(abi.Args), size=1, types=types, args=args),
        rets=abi.Rets(struct_size=ctypes.sizeof(abi.Rets), size=2, types=types, rets=rets))
    keep += [args, rets, types, frame, elements, scales, api]

    def run() -> None:
        assert ck.handler(ctypes.addressof(frame)) is None, "the handler reported an error"
        assert keep  # the buffers live as long as the closure

    return run


def bench_startup() -> list[dict]:
    """Build and compile time per kernel, and a jitted call's first-call overhead."""
    rows = []
    x = jnp.asarray(np.random.default_rng(1).standard_normal((16, ROW)), jnp.float32)
    for fmt in FORMATS_Q:
        f = jax.jit(lambda x, f=fmt: ffi.quantize(x, f))
        t0 = time.perf_counter()
        jax.block_until_ready(f(x))
        first = time.perf_counter() - t0
        warm = min(_timed(lambda: jax.block_until_ready(f(x))) for _ in range(20))
        ck = ffi.compile_kernel(KernelSpec("quantize", fmt))
        rows.append({"kernel": ck.name, "build_ms": ck.build_s * 1e3,
                     "compile_ms": ck.compile_s * 1e3, "first_call_ms": first * 1e3,
                     "warm_call_ms": warm * 1e3})
    return rows


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="mxlower FFI kernels, CPU benchmark")
    ap.add_argument("--sizes", default="22,24,26", help="log2 of the element counts")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    session = Session()
    startup = bench_startup()  # first: nothing compiled yet
    rows = []
    for logn in (int(s) for s in args.sizes.split(",")):
        rows += bench_size(logn, args.reps)
    lines = ["| size | case | ms | GB/s moved | % of memcpy | vs StableHLO | vs JAX |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        vs = f"{r['vs_stablehlo']:.1f}x" if "vs_stablehlo" in r else ""
        vj = f"{r['vs_jax']:.1f}x" if "vs_jax" in r else ""
        lines.append(f"| {r['size']} | {r['case']} | {r['ms']:.2f} | {r['gb_s']:.2f} | "
                     f"{100 * r['of_memcpy']:.0f}% | {vs} | {vj} |")
    lines += ["", "| kernel | build ms | LLVM compile ms | first jitted call ms | warm call ms |",
              "|---|---:|---:|---:|---:|"]
    for r in startup:
        lines.append(f"| {r['kernel']} | {r['build_ms']:.0f} | {r['compile_ms']:.0f} | "
                     f"{r['first_call_ms']:.0f} | {r['warm_call_ms']:.3f} |")
    session.report("\n".join(lines), rows + startup, args.json,
                   extra=f"jax {jax.__version__}, fastest of {args.reps}, "
                   f"x f32 [N / {ROW}, {ROW}], {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
