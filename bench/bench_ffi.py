"""mxlower's fused FFI kernels on the CPU against memcpy, mxlower.jax's StableHLO, JAX's own
quantizer, XLA's ``astype`` and ml_dtypes, in one run; prints the BENCHMARKS.md section.

For each size (f32 ``[N / 4096, 4096]``, blocked along the last axis), every case is timed
round-robin in one process (the fastest of ``--reps`` runs after two warm-ups, so load from
other processes hits every case alike):

* ``kernel``: ``mxlower.jax.quantize`` / ``dequantize`` / ``convert`` with ``impl="auto"``
  under ``jax.jit`` -- the FFI kernels (XLA's intra-op threads from 2^18 values on);
* ``kernel alone``: the same kernels' handlers called directly through the C ABI on buffers
  allocated once, on one thread (what the kernel costs without XLA's per-call result
  allocation -- page faults of a fresh large result -- and without its thread pool);
* ``StableHLO``: the same calls with ``impl="xla"`` (the portable lowering; what
  ``mxlower.jax.quantize`` did before the kernels);
* ``JAX``: JAX's own block quantizer (``jax._src.cudnn.scaled_matmul_stablehlo.quantize``
  with the ``mxfp8`` / ``nvfp4`` configs of ``jax.nn.get_scaled_dot_general_config``, the
  code ``jax.nn.scaled_dot_general`` uses);
* conversions: ``x.astype(t)`` under ``jax.jit`` (XLA:CPU's own convert; it has no f6) and
  ml_dtypes' ``astype`` (NumPy, up to ``--ml-dtypes-max``);
* ``memcpy``: ``numpy.copyto`` of the f32 input into a buffer whose pages are already mapped
  (one thread), and the same copy through XLA (``x + 0.0`` under ``jax.jit``: a fresh result
  every call, as the kernels' results are).  A case's "% of memcpy" is (the bytes it must move: input read plus outputs
  written) / its time / (2 x input bytes / memcpy time).  Every XLA call also writes a freshly
  allocated result (page faults included), which memcpy does not.

Scaled dots (``--dots``): ``mxlower.jax.scaled_dot`` with ``impl="auto"`` (each MX side
dequantized by the kernel, then XLA's dot) against ``impl="xla"``, on both contractions the
run-time test can pick (see :func:`bench_dots`).

``--casts``: ``mxlower.jax.cast`` (the virtual cast of docs/semantics.md section 10) with
``impl="auto"`` (the cast kernel) against ``impl="xla"`` (the StableHLO lowering) and memcpy,
for a few datatypes and rounding modes (see :func:`bench_casts`).

``--threads``: quantize with the handler's thread-pool split against the same kernel
compiled to run in one call (see :func:`bench_threads`).

Then, per kernel, the build (MLIR: kernel, lowering, handler) and LLVM compile times and the
first-call overhead of a jitted call (tracing, kernel build and compile, registration, XLA
compile) against the same call warm.  Printed as Markdown, ready for BENCHMARKS.md;
``--json`` saves the rows.

    python bench/bench_ffi.py                         # 2^22, 2^24, 2^26 (a few minutes)
    python bench/bench_ffi.py --sizes 22 --reps 10
    python bench/bench_ffi.py --sizes "" --dots 256x256x1024   # scaled dots only
    python bench/bench_ffi.py --sizes "" --dots "" --threads 22,24,26   # thread pool or not
    python bench/bench_ffi.py --sizes "" --dots "" --casts 22,24        # mx.cast kernels
    python bench/bench_ffi.py --sizes 24,26 --dots "" --heap   # results reuse faulted pages
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
from mxlower import types
from mxlower.benchmarking import Session, round_robin
from mxlower.execution import ffi
from mxlower.execution import ffi_abi as abi
from mxlower.formats import FORMATS
from mxlower.lowering import mx_kernels
from mxlower.lowering.mx_kernels import ConvertSpec, KernelSpec

FORMATS_Q = ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4", "mxint8")
FORMATS_DQ = ("mxfp8_e4m3", "mxfp4_e2m1", "nvfp4")
CONVERT = ("f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f6E2M3FN", "f4E2M1FN")
JAX_CONFIGS = {"mxfp8_e4m3": "mxfp8", "nvfp4": "nvfp4"}
ROW = 4096
MEMCPY = "memcpy"
XLA_COPY = "xla copy"


def _ready(fn: Callable, *args) -> Callable[[], object]:
    return lambda: jax.block_until_ready(fn(*args))


def _parts(q: mxj.MXArray) -> tuple:
    return q.elements, q.scales


def written(fmt: str, n: int) -> float:
    """Bytes of elements and scales a quantize of ``n`` values writes (f6 one code a byte)."""
    f = FORMATS[fmt]
    return n * (8 if f.bits == 6 else f.bits) / 8 + n / f.block_size


def _convert_bytes(t: str, n: int) -> float:
    bits = types.float_type(t).bits
    return n * (8 if bits == 6 else bits) / 8


def bench_size(logn: int, reps: int, ml_dtypes_max: int) -> dict[str, tuple[float, float]]:
    """case -> (seconds, bytes moved) at 2^logn values."""
    from mxlower.bindings.jax_private import jax_quantize  # JAX's own (private) quantizer

    n = 1 << logn
    x = jnp.asarray(np.random.default_rng(0).standard_normal((n // ROW, ROW)), jnp.float32)
    xn = np.asarray(x)
    src = xn.copy()
    dst = np.empty_like(src)
    dst[...] = 1  # touch the pages once
    cases: dict[str, tuple[Callable[[], object], float]] = {
        MEMCPY: (lambda: np.copyto(dst, src), 2 * 4 * n),
        # the same bytes through XLA, which allocates its result on every call (as it does the
        # kernels' results): what a fresh f32 output costs at this size
        XLA_COPY: (_ready(jax.jit(lambda x: x + 0.0), x), 2 * 4 * n)}
    for fmt in FORMATS_Q:
        moved = 4 * n + written(fmt, n)
        cases[f"alone q {fmt}"] = (direct_case(KernelSpec("quantize", fmt), [xn], xn.shape),
                                   moved)
        for impl in ("auto", "xla"):
            cases[f"{impl} q {fmt}"] = (_ready(jax.jit(
                lambda x, f=fmt, i=impl: _parts(mxj.quantize(x, f, impl=i))), x), moved)
        if fmt in JAX_CONFIGS:
            kw = {"global_scale": jnp.float32(1.0)} if fmt == "nvfp4" else {}
            cfg = jax.nn.get_scaled_dot_general_config(JAX_CONFIGS[fmt], **kw)
            cases[f"jax q {fmt}"] = (_ready(jax.jit(lambda x, c=cfg: jax_quantize(x, c)), x),
                                     moved)
    for fmt in FORMATS_DQ:
        q = mxj.quantize(x, fmt).detach()
        moved = 4 * n + written(fmt, n)
        qb = [np.asarray(a).reshape(-1).view(np.uint8) if np.asarray(a).dtype.itemsize == 1
              else np.asarray(a) for a in (q.elements, q.scales)]
        if FORMATS[fmt].bits == 4:  # XLA's f4 array as NumPy holds it: one code a byte
            codes = qb[0] & 0xF
            qb[0] = codes[0::2] | (codes[1::2] << 4)
        cases[f"alone dq {fmt}"] = (direct_case(KernelSpec("dequantize", fmt), qb, xn.shape),
                                    moved)
        for impl in ("auto", "xla"):
            cases[f"{impl} dq {fmt}"] = (_ready(jax.jit(
                lambda q, i=impl: mxj.dequantize(q, impl=i)), q), moved)
    for t in CONVERT:
        moved = 4 * n + _convert_bytes(t, n)
        y = mxj.convert(x, t)
        src_kw = {"source": t} if types.float_type(t).bits == 6 else {}
        cases[f"auto to {t}"] = (_ready(jax.jit(lambda x, t=t: mxj.convert(x, t)), x), moved)
        yb = np.asarray(y).reshape(-1).view(np.uint8)
        if types.float_type(t).bits == 4:
            yb = (yb & 0xF)[0::2] | ((yb & 0xF)[1::2] << 4)
        cases[f"alone to {t}"] = (direct_case(ConvertSpec("f32", t), [xn], xn.shape), moved)
        cases[f"alone from {t}"] = (direct_case(ConvertSpec(t, "f32"), [yb], xn.shape), moved)
        cases[f"auto from {t}"] = (_ready(jax.jit(
            lambda y, kw=src_kw: mxj.convert(y, jnp.float32, **kw)), y), moved)
        if types.float_type(t).bits != 6:  # XLA:CPU has no f6
            dt = types.dtype(t)
            cases[f"astype to {t}"] = (_ready(jax.jit(lambda x, d=dt: x.astype(d)), x), moved)
            cases[f"astype from {t}"] = (_ready(jax.jit(lambda y: y.astype(jnp.float32)), y),
                                         moved)
            if logn <= ml_dtypes_max:
                yn = np.asarray(y)
                cases[f"ml_dtypes to {t}"] = (lambda d=dt: xn.astype(d), moved)
                cases[f"ml_dtypes from {t}"] = (lambda yn=yn: yn.astype(np.float32), moved)
    t = round_robin({k: fn for k, (fn, _) in cases.items()}, reps)
    return {k: (t[k], moved) for k, (_, moved) in cases.items()}


def variant_target(spec: KernelSpec, suffix: str, **knobs: int) -> str:
    """``spec``'s kernel compiled and registered a second time, as the FFI target
    ``<name>_<suffix>``, with the handler generated under other values of
    :mod:`mxlower.execution.ffi`'s thread knobs (``THREAD_CHUNK``, ``CHUNKS_PER_THREAD``)."""
    name = f"{spec.name}_{suffix}"
    saved = {k: getattr(ffi, k) for k in knobs}
    for k, v in knobs.items():
        setattr(ffi, k, v)
    try:
        ctx, module = ffi.lower_module(spec)
    finally:
        for k, v in saved.items():
            setattr(ffi, k, v)
    engine, address = ffi.jit(ctx, module, f"{spec.name}_ffi_address")
    ck = ffi.CompiledKernel(spec, (ctx, module, engine), address, 0.0, 0.0)
    _KEEP.append(ck)
    jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(ck.handler), platform="cpu",
                                api_version=1)
    return name


_KEEP: list = []  # the variants' engines live as long as the process (XLA holds the handlers)

#: --threads variants: suffix -> knobs (the default handler is "pool")
THREAD_VARIANTS = {"halves": {"CHUNKS_PER_THREAD": 1}, "1thread": {"THREAD_CHUNK": 1 << 62}}


def bench_threads(sizes: list[int], reps: int) -> list[dict]:
    """Quantize (f32 ``[N / 4096, 4096]``) through the FFI kernel under ``jax.jit``: the
    default handler ("pool": the blocks split into chunks of at least ``THREAD_CHUNK`` values,
    up to ``CHUNKS_PER_THREAD`` per thread, claimed one at a time by the caller and tasks on
    XLA's intra-op thread pool, ``XLA_FFI_ThreadPool_Schedule``), the same with one chunk per
    thread ("halves" on two threads), and the kernel in one call on XLA's calling thread
    ("1thread"); the three give the same bytes (checked); timed round-robin per size."""
    rows = []
    for logn in sizes:
        n = 1 << logn
        x = jnp.asarray(np.random.default_rng(0).standard_normal((n // ROW, ROW)), jnp.float32)
        cases = {}
        for fmt in FORMATS_Q:
            spec = KernelSpec("quantize", fmt)
            outs = [jax.ShapeDtypeStruct(x.shape if o.kind != "scales" else
                                         (x.shape[0], ROW // spec.k), o.dtype)
                    for o in spec.results()]
            pool = jax.jit(lambda x, f=fmt: _parts(mxj.quantize(x, f)))
            cases[f"pool {fmt}"] = _ready(pool, x)
            want = [np.asarray(a).view(np.uint8) for a in pool(x)]
            for suffix, knobs in THREAD_VARIANTS.items():
                target = (variant_target(spec, suffix, **knobs) if logn == sizes[0]
                          else f"{spec.name}_{suffix}")
                f = jax.jit(lambda x, t=target, o=outs: jax.ffi.ffi_call(t, o)(x))
                for a, b in zip(f(x), want):  # the same kernel: the same bytes
                    if not np.array_equal(np.asarray(a).view(np.uint8), b):
                        raise AssertionError(f"{fmt} at 2^{logn}: {suffix} and pool differ")
                cases[f"{suffix} {fmt}"] = _ready(f, x)
        t = round_robin(cases, reps)
        for fmt in FORMATS_Q:
            rows.append({"log2n": logn, "format": fmt, "pool_s": t[f"pool {fmt}"],
                         "halves_s": t[f"halves {fmt}"], "one_s": t[f"1thread {fmt}"]})
    return rows


def threads_markdown(rows: list[dict]) -> str:
    out = ["Quantize (f32 in) through the FFI kernel under `jax.jit`, ms: the default handler "
           "(chunks of >= 2^17 values, up to 16 per thread, claimed one at a time by the "
           "caller and tasks on XLA's intra-op thread pool), the same with one chunk per "
           "thread, and the kernel in one call on XLA's thread; speed-ups over one thread:",
           "", "| size | format | pool | one chunk per thread | one thread | pool speed-up | "
           "one chunk per thread speed-up |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| 2^{r['log2n']} | {r['format']} | {r['pool_s'] * 1e3:.2f} | "
                   f"{r['halves_s'] * 1e3:.2f} | {r['one_s'] * 1e3:.2f} | "
                   f"{r['one_s'] / r['pool_s']:.2f}x | {r['one_s'] / r['halves_s']:.2f}x |")
    return "\n".join(out)


#: (number, scale, roundmode, scalemode) of the timed casts
CASTS = (("e2m1fn", "e8m0_t32", "even", "max"), ("e4m3fn", "e8m0_t32", "even", "rceil"),
         ("int8", "e8m0_t32", "nearest", "max"), ("e2m1fn", "e8m0_t32", "stochastic", "max"),
         ("e3m2fn", "e8m0_t16", "zero", "midmax"), ("e2m1fn", "e8m0_t0", "even", "max"),
         ("e2m1fn", "e8m0", "even", "max"), ("e2m1fn", "e4m3fn_t16", "even", "max"),
         ("e5m6", None, "even", "max"), ("e4m3fn", None, "stochastic", "max"))


def bench_casts(sizes: list[int], reps: int) -> list[dict]:
    """``mxlower.jax.cast`` of f32 ``[N / 4096, 4096]`` under ``jax.jit`` with ``impl="auto"``
    (the FFI cast kernel) and ``impl="xla"`` (the StableHLO lowering), for :data:`CASTS`,
    against memcpy (``numpy.copyto``, one thread, warm pages), timed round-robin per size;
    stochastic casts take precomputed ``rbits`` (both impls read the same bits).  The two
    impls' results are checked equal bit for bit."""
    rows = []
    for logn in sizes:
        n = 1 << logn
        rng = np.random.default_rng(0)
        x = jnp.asarray(rng.standard_normal((n // ROW, ROW)), jnp.float32)
        r = jnp.asarray(rng.integers(0, 1 << 32, x.shape, dtype=np.uint32))
        src = np.asarray(x).copy()
        dst = np.empty_like(src)
        dst[...] = 1  # touch the pages once
        cases: dict[str, Callable[[], object]] = {
            MEMCPY: lambda: np.copyto(dst, src),
            XLA_COPY: _ready(jax.jit(lambda x: x + 0.0), x)}  # a fresh f32 result per call
        for num, sc, rm, sm in CASTS:
            outs = {}
            for impl in ("auto", "xla"):
                args = (x, r) if rm == "stochastic" else (x,)
                f = jax.jit(lambda x, *r, num=num, sc=sc, rm=rm, sm=sm, impl=impl: mxj.cast(
                    x, num, sc, roundmode=rm, scalemode=sm, rbits=r[0] if r else None,
                    impl=impl))
                outs[impl] = np.asarray(f(*args)).view(np.uint32)
                cases[f"{impl} {num} {sc} {rm} {sm}"] = _ready(f, *args)
            if not np.array_equal(outs["auto"], outs["xla"]):
                raise AssertionError(f"cast {num} {sc} {rm} {sm}: auto and xla differ")
        t = round_robin(cases, reps)
        for num, sc, rm, sm in CASTS:
            key = f"{num} {sc} {rm} {sm}"
            moved = 4 * n * (3 if rm == "stochastic" else 2)
            rows.append({"log2n": logn, "number": num, "scale": sc or "", "roundmode": rm,
                         "scalemode": sm if sc else "", "auto_s": t[f"auto {key}"],
                         "xla_s": t[f"xla {key}"], "memcpy_s": t[MEMCPY],
                         "xla_copy_s": t[XLA_COPY], "bytes": moved})
    return rows


def casts_markdown(rows: list[dict]) -> str:
    out = ["`mxlower.jax.cast` (f32 in and out) under `jax.jit`, ms: the cast kernel "
           "(`impl=\"auto\"`) and the StableHLO lowering (`impl=\"xla\"`); % memcpy: the "
           "kernel's bandwidth for the bytes it moves (x read, y written, rbits read) over a "
           "one-thread `numpy.copyto`:", "",
           "| size | number | scale | roundmode | scalemode | kernel | % memcpy | StableHLO | "
           "x StableHLO |", "|---|---|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        bw = 2 * 4 * (1 << r["log2n"]) / r["memcpy_s"]
        out.append(f"| 2^{r['log2n']} | {r['number']} | {r['scale']} | {r['roundmode']} | "
                   f"{r['scalemode']} | {r['auto_s'] * 1e3:.2f} | "
                   f"{_pct(r['bytes'], r['auto_s'], bw)} | {r['xla_s'] * 1e3:.2f} | "
                   f"{r['xla_s'] / r['auto_s']:.1f}x |")
    memcpy = ", ".join(f"2^{lg} {s * 1e3:.2f} ms, XLA's copy {c * 1e3:.2f} ms" for lg, s, c in
                       sorted({(r["log2n"], r["memcpy_s"], r["xla_copy_s"]) for r in rows}))
    out += ["", f"memcpy (numpy.copyto, one thread, warm pages) and the same copy through XLA "
            f"(`x + 0.0` under `jax.jit`, a fresh f32 result every call): {memcpy}."]
    return "\n".join(out)


DOT_FORMATS = ("mxfp8_e4m3", "mxfp4_e2m1")


def bench_dots(dots: list[tuple[int, int, int]], reps: int) -> list[dict]:
    """``mxlower.jax.scaled_dot`` of two MX operands ``[M, K] x [N, K]`` (the same format on
    both sides, ordinary data) with ``impl="auto"`` (the dequantize kernel, then XLA's dot)
    against ``impl="xla"`` (the portable StableHLO), each on ordinary scales (the f32
    contraction) and with one lhs scale 0x00 (the run-time test picks the exact f64 one), and
    XLA's f32 dot of the same shapes on plain f32 values (what the contraction alone costs);
    all timed round-robin per shape.  Also whether auto's result has impl="xla"'s bits."""
    rows = []
    rng = np.random.default_rng(2)
    for m, n, k in dots:
        x = jnp.asarray(rng.standard_normal((m, k)), jnp.float32)
        y = jnp.asarray(rng.standard_normal((n, k)), jnp.float32)
        cases: dict[str, Callable[[], object]] = {
            "f32 dot": _ready(jax.jit(lambda x, y: jax.lax.dot_general(
                x, y, (((1,), (1,)), ((), ())))), x, y)}
        same = {}
        for fmt in DOT_FORMATS:
            a, b = mxj.quantize(x, fmt).detach(), mxj.quantize(y, fmt).detach()
            s = np.asarray(a.scales).copy()
            s[0, 0] = np.uint8(0).view(s.dtype)  # one block scaled by 2^-127
            slow = mxj.MXArray(a.elements, s, fmt)
            for path, lhs in (("f32", a), ("f64", slow)):
                outs = {}
                for impl in ("auto", "xla"):
                    f = jax.jit(lambda u, v, i=impl: mxj.scaled_dot(u, v, impl=i))
                    cases[f"{impl} {fmt} {path}"] = _ready(f, lhs, b)
                    outs[impl] = np.asarray(f(lhs, b))
                same[f"{fmt} {path}"] = bool(np.array_equal(outs["auto"].view(np.uint32),
                                                             outs["xla"].view(np.uint32)))
        t = round_robin(cases, reps)
        for fmt in DOT_FORMATS:
            for path in ("f32", "f64"):
                rows.append({"dot": f"{m}x{n}x{k}", "format": fmt, "path": path,
                             "auto_s": t[f"auto {fmt} {path}"], "xla_s": t[f"xla {fmt} {path}"],
                             "f32_dot_s": t["f32 dot"], "same_bits": same[f"{fmt} {path}"]})
    return rows


def dots_markdown(rows: list[dict]) -> str:
    out = ["Scaled dot `[M, K] x [N, K]` (`mxlower.jax.scaled_dot`, both sides the same "
           "format), ms: `impl=\"auto\"` (each side dequantized by the kernel, then XLA's dot) "
           "vs `impl=\"xla\"`, on ordinary scales (the f32 contraction) and with one lhs "
           "scale 0x00 (the exact f64 contraction); XLA's f32 dot of plain f32 operands of the "
           "same shapes for scale:", "",
           "| M x N x K | format | contraction | auto | xla | x xla | plain f32 dot | "
           "same bits |", "|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {r['dot']} | {r['format']} | {r['path']} | {r['auto_s'] * 1e3:.2f} | "
                   f"{r['xla_s'] * 1e3:.2f} | {r['xla_s'] / r['auto_s']:.2f}x | "
                   f"{r['f32_dot_s'] * 1e3:.2f} | {'yes' if r['same_bits'] else 'NO'} |")
    return "\n".join(out)


#: --nvfp4: how the CPU kernel rounds nvfp4 elements (mx_kernels.NVFP4_ELEMENTS)
NVFP4_VARIANTS = ("thresholds", "limits")


def nvfp4_variant(spec: KernelSpec, elements: str) -> tuple[str, ffi.CompiledKernel]:
    """``spec``'s kernel built with ``mx_kernels.NVFP4_ELEMENTS = elements`` and registered as
    the FFI target ``<name>_<elements>`` (once); returns it and its compiled kernel."""
    if (spec, elements) not in _NV_TARGETS:
        saved = mx_kernels.NVFP4_ELEMENTS
        mx_kernels.NVFP4_ELEMENTS = elements
        try:
            _NV_TARGETS[(spec, elements)] = (variant_target(spec, elements), _KEEP[-1])
        finally:
            mx_kernels.NVFP4_ELEMENTS = saved
    return _NV_TARGETS[(spec, elements)]


_NV_TARGETS: dict = {}


def bench_nvfp4(sizes: list[int], reps: int) -> list[dict]:
    """nvfp4 quantize (f32 ``[N / 4096, 4096]``, without and with a global scale) with each
    element rounding of :data:`NVFP4_VARIANTS`, under ``jax.jit`` (``jax.ffi.ffi_call`` of the
    variant's target) and alone (the handler through the C ABI, one thread), against mxfp4
    (the same f4 elements, power-of-two scales) and memcpy; the variants' bytes are checked
    equal.  Timed round-robin per size."""
    rows = []
    for logn in sizes:
        n = 1 << logn
        xn = np.random.default_rng(0).standard_normal((n // ROW, ROW)).astype(np.float32)
        x = jnp.asarray(xn)
        src, dst = xn.copy(), np.ones_like(xn)
        cases = {MEMCPY: lambda: np.copyto(dst, src)}
        cases["alone mxfp4_e2m1"] = direct_case(KernelSpec("quantize", "mxfp4_e2m1"), [xn],
                                                xn.shape)
        cases["jax mxfp4_e2m1"] = _ready(jax.jit(
            lambda x: _parts(mxj.quantize(x, "mxfp4_e2m1"))), x)
        for gs in (False, True):
            spec = KernelSpec("quantize", "nvfp4", global_scale=gs)
            g = [np.float32(0.37)] if gs else []
            outs = [jax.ShapeDtypeStruct(x.shape if o.kind != "scales" else
                                         (x.shape[0], ROW // spec.k), o.dtype)
                    for o in spec.results()]
            got = {}
            for v in NVFP4_VARIANTS:
                key = f"{v}{' g' if gs else ''}"
                target, ck = nvfp4_variant(spec, v)
                bufs: list = []
                cases[f"alone {key}"] = direct_case(spec, [xn, *[np.asarray([a]) for a in g]],
                                                    xn.shape, ck, bufs)
                cases[f"alone {key}"]()
                f = jax.jit(lambda x, *g, t=target, o=outs: jax.ffi.ffi_call(t, o)(x, *g))
                cases[f"jax {key}"] = _ready(f, x, *g)
                got[v] = [np.asarray(a).view(np.uint8) for a in f(x, *g)] + bufs
            a, b = got.values()
            if not all(np.array_equal(p, q) for p, q in zip(a, b)):
                raise AssertionError(f"nvfp4 at 2^{logn}: the variants differ")
        load0 = os.getloadavg()[0]
        t = round_robin(cases, reps)
        load1 = os.getloadavg()[0]
        for case, sec in t.items():
            moved = 2 * 4 * n if case == MEMCPY else 4 * n + written(
                "mxfp4_e2m1" if "mxfp4" in case else "nvfp4", n)
            rows.append({"log2n": logn, "case": case, "s": sec, "bytes": moved,
                         "memcpy_s": t[MEMCPY], "load": (load0, load1)})
    return rows


def nvfp4_markdown(rows: list[dict]) -> str:
    out = ["nvfp4 quantize (f32 in; \"g\": with a global scale 0.37), ms and % of one-thread "
           "memcpy bandwidth for the bytes moved; \"thresholds\": |y| compared with t * s, y = x "
           "/ g formed per element (the kernel before), \"limits\": |x| compared with the "
           "per-call limits of its block's scale code, software-pipelined (now):", "",
           "| size | case | jax.jit (% memcpy) | kernel alone, 1 thread (% memcpy) |",
           "|---|---|---:|---:|"]
    by = {(r["log2n"], r["case"]): r for r in rows}
    for logn in sorted({r["log2n"] for r in rows}):
        for case in ["mxfp4_e2m1", *[f"{v}{g}" for g in ("", " g") for v in NVFP4_VARIANTS]]:
            cells = []
            for how in ("jax", "alone"):
                r = by[(logn, f"{how} {case}")]
                cells.append(f"{r['s'] * 1e3:.2f} ({_pct(r['bytes'], r['s'], 2 * 4 * (1 << logn) / r['memcpy_s'])})")
            out.append(f"| 2^{logn} | {case} | {cells[0]} | {cells[1]} |")
        r = by[(logn, MEMCPY)]
        out.append(f"\nmemcpy 2^{logn}: {r['s'] * 1e3:.2f} ms; load average {r['load'][0]:.1f} "
                   f"before, {r['load'][1]:.1f} after (2 cores)\n")
    return "\n".join(out)


def _dims(kind: str, k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    if kind == "scalar":
        return ()
    if kind == "scales":
        return (*shape[:-1], shape[-1] // k)
    return shape


def direct_case(spec: KernelSpec | ConvertSpec, inputs: list[np.ndarray],
                shape: tuple[int, ...], ck: ffi.CompiledKernel | None = None,
                outputs: list | None = None) -> Callable[[], object]:
    """The kernel's handler called through the C ABI on buffers allocated (and touched) once:
    the kernel alone, on this thread, without XLA's per-call result allocation.  ``inputs``:
    the input buffers (their bytes), ``shape``: the array's; ``ck``: another compiled build
    of ``spec`` (default: the cached one); the output buffers are appended to ``outputs``."""
    ck = ck or ffi.compile_kernel(spec)
    n = int(np.prod(shape))
    keep: list = list(inputs)
    args = [abi.buffer_arg(a.ctypes.data, o.dtype.name, _dims(o.kind, spec.k, shape), keep)
            for o, a in zip(spec.operands(), inputs)]
    rets = []
    for o in spec.results():
        size = {"scales": n // spec.k}.get(o.kind, n * o.dtype.itemsize)
        if o.dtype.name == "float4_e2m1fn":
            size = n // 2
        out = np.ones(size, np.uint8)  # pages touched once
        keep.append(out)
        if outputs is not None:
            outputs.append(out)
        rets.append(abi.buffer_arg(out.ctypes.data, o.dtype.name, _dims(o.kind, spec.k, shape),
                                   keep))
    # an API without the thread-pool functions: the kernel runs on this thread alone
    api = abi.Api(struct_size=abi.Api.XLA_FFI_Error_Create.offset + 8)
    frame = abi.call_frame(ctypes.addressof(api), args, rets, keep)
    keep.append(api)

    def run() -> None:
        assert ck.handler(ctypes.addressof(frame)) is None, "the handler reported an error"
        assert keep  # the buffers live as long as the closure

    return run


def bench_startup() -> list[dict]:
    """Build and compile time per kernel, and a jitted call's first-call overhead."""
    rows = []
    x = jnp.asarray(np.random.default_rng(1).standard_normal((16, ROW)), jnp.float32)
    calls = [(KernelSpec("quantize", f), lambda x, f=f: _parts(mxj.quantize(x, f)))
             for f in FORMATS_Q]
    calls += [(ConvertSpec("f32", "f4E2M1FN"), lambda x: mxj.convert(x, "f4E2M1FN"))]
    for spec, fn in calls:
        f = jax.jit(fn)
        t0 = time.perf_counter()
        jax.block_until_ready(f(x))
        first = time.perf_counter() - t0
        warm = min(_timed(lambda: jax.block_until_ready(f(x))) for _ in range(20))
        ck = ffi.compile_kernel(spec)
        rows.append({"kernel": ck.name, "build_ms": ck.build_s * 1e3,
                     "compile_ms": ck.compile_s * 1e3, "first_call_ms": first * 1e3,
                     "warm_call_ms": warm * 1e3})
    return rows


def _cache_mode() -> str:
    """What "LLVM compile" was: the kernel cache's load or build, or the ExecutionEngine's."""
    from mxlower.execution import kernel_cache

    s = kernel_cache.status()
    if not s["usable"]:
        return (f"the kernel cache not used ({s['why']}): each kernel JIT-compiled by the "
                "ExecutionEngine")
    return (f"through the kernel cache in {s['directory']}: a kernel already there is loaded, "
            f"not compiled; {kernel_cache.ENV}=off for the ExecutionEngine's compile times")


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _pct(moved: float, s: float, memcpy_bw: float) -> str:
    return f"{100 * moved / s / memcpy_bw:.0f}%"


def _of_memcpy(t: dict[str, tuple[float, float]], case: str) -> str:
    return _pct(t[case][1], t[case][0], t[MEMCPY][1] / t[MEMCPY][0])


def markdown(sizes: dict[int, dict[str, tuple[float, float]]], startup: list[dict]) -> str:
    """The BENCHMARKS.md tables of a run."""
    out = ["Quantize (f32 in; f6 elements one code per byte), ms and % of memcpy bandwidth for "
           "the bytes moved; speed-ups of the kernel (mxlower.jax, `impl=\"auto\"`):", "",
           "| size | format | kernel | % memcpy | kernel alone, 1 thread | StableHLO "
           "(`impl=\"xla\"`) | JAX's quantizer | x StableHLO | x JAX |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for logn, t in sizes.items():
        bw = t[MEMCPY][1] / t[MEMCPY][0]
        for fmt in FORMATS_Q:
            (sa, mv), (sx, _), (s1, _) = t[f"auto q {fmt}"], t[f"xla q {fmt}"], \
                t[f"alone q {fmt}"]
            sj = t.get(f"jax q {fmt}", (None,))[0]
            out.append(f"| 2^{logn} | {fmt} | {sa * 1e3:.2f} | {_pct(mv, sa, bw)} | "
                       f"{s1 * 1e3:.2f} ({_pct(mv, s1, bw)}) | {sx * 1e3:.2f} | "
                       f"{'' if sj is None else f'{sj * 1e3:.2f}'} | {sx / sa:.1f}x | "
                       f"{'' if sj is None else f'{sj / sa:.1f}x'} |")
    out += ["", "Dequantize to f32:", "",
            "| size | format | kernel | % memcpy | kernel alone, 1 thread | StableHLO | "
            "x StableHLO |", "|---|---|---:|---:|---:|---:|---:|"]
    for logn, t in sizes.items():
        bw = t[MEMCPY][1] / t[MEMCPY][0]
        for fmt in FORMATS_DQ:
            (sa, mv), (sx, _), (s1, _) = t[f"auto dq {fmt}"], t[f"xla dq {fmt}"], \
                t[f"alone dq {fmt}"]
            out.append(f"| 2^{logn} | {fmt} | {sa * 1e3:.2f} | {_pct(mv, sa, bw)} | "
                       f"{s1 * 1e3:.2f} ({_pct(mv, s1, bw)}) | {sx * 1e3:.2f} | "
                       f"{sx / sa:.1f}x |")
    out += ["", "Plain conversions from and to f32 (`mxlower.jax.convert` vs `x.astype` under "
            "`jax.jit` and ml_dtypes' `astype`):", "",
            "| size | conversion | kernel | % memcpy | kernel alone, 1 thread | XLA astype | "
            "ml_dtypes | x astype | x ml_dtypes |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for logn, t in sizes.items():
        bw = t[MEMCPY][1] / t[MEMCPY][0]
        for tname in CONVERT:
            for way, label in (("to", f"f32 -> {tname}"), ("from", f"{tname} -> f32")):
                sa, mv = t[f"auto {way} {tname}"]
                s1 = t[f"alone {way} {tname}"][0]
                sx = t.get(f"astype {way} {tname}", (None,))[0]
                sm = t.get(f"ml_dtypes {way} {tname}", (None,))[0]
                out.append(
                    f"| 2^{logn} | {label} | {sa * 1e3:.2f} | {_pct(mv, sa, bw)} | "
                    f"{s1 * 1e3:.2f} ({_pct(mv, s1, bw)}) | "
                    f"{'no f6' if sx is None else f'{sx * 1e3:.2f}'} | "
                    f"{'' if sm is None else f'{sm * 1e3:.2f}'} | "
                    f"{'' if sx is None else f'{sx / sa:.1f}x'} | "
                    f"{'' if sm is None else f'{sm / sa:.1f}x'} |")
    out += ["", "memcpy (numpy.copyto, one thread, warm pages): " + ", ".join(
        f"2^{logn} {t[MEMCPY][0] * 1e3:.2f} ms ({t[MEMCPY][1] / t[MEMCPY][0] / 1e9:.1f} GB/s)"
        for logn, t in sizes.items()) + ".  The same copy through XLA (`x + 0.0` under "
        "`jax.jit`, a fresh f32 result each call): " + ", ".join(
        f"2^{logn} {t[XLA_COPY][0] * 1e3:.2f} ms ({_of_memcpy(t, XLA_COPY)} of memcpy)"
        for logn, t in sizes.items()) + ".", "",
        "Kernel build (MLIR: kernel, lowering, handler) and LLVM compile time, and a jitted "
        "call on [16, 4096] f32: the first (trace, build, compile, register, XLA compile) and "
        f"a warm one ({_cache_mode()}):", "",
        "| kernel | build ms | LLVM compile ms | first call ms | warm call ms |",
        "|---|---:|---:|---:|---:|"]
    for r in startup:
        out.append(f"| {r['kernel']} | {r['build_ms']:.0f} | {r['compile_ms']:.0f} | "
                   f"{r['first_call_ms']:.0f} | {r['warm_call_ms']:.3f} |")
    return "\n".join(out)


#: the glibc malloc settings of --heap, as GLIBC_TUNABLES spells them
HEAP_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647"


def keep_large_allocations_on_the_heap() -> None:
    """glibc's ``mallopt``: no ``mmap`` for large blocks (M_MMAP_MAX = 0) and no trimming of
    the heap's top (M_TRIM_THRESHOLD = 2^31 - 1), so a freed result's pages serve the next
    call's instead of being unmapped and faulted in again (from 32-64 MiB on, glibc maps
    every block afresh by default)."""
    libc = ctypes.CDLL(None)
    m_trim_threshold, m_mmap_max = -1, -4
    if not (libc.mallopt(m_mmap_max, 0) and libc.mallopt(m_trim_threshold, 2**31 - 1)):
        raise SystemExit("--heap: mallopt failed (not glibc?)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="mxlower FFI kernels, CPU benchmark")
    ap.add_argument("--sizes", default="22,24,26", help="log2 of the element counts")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ml-dtypes-max", type=int, default=24,
                    help="largest log2 size ml_dtypes' astype is timed at (it is slow)")
    ap.add_argument("--dots", default="256x256x1024,1024x1024x1024",
                    help="scaled-dot shapes MxNxK, comma-separated (empty: none)")
    ap.add_argument("--threads", default="",
                    help="log2 sizes at which to time quantize with and without XLA's thread "
                    "pool, comma-separated (empty: none)")
    ap.add_argument("--casts", default="",
                    help="log2 sizes at which to time mxlower.jax.cast, auto vs xla, "
                    "comma-separated (empty: none)")
    ap.add_argument("--nvfp4", default="",
                    help="log2 sizes at which to time the nvfp4 element roundings "
                    "(mx_kernels.NVFP4_ELEMENTS) against each other, comma-separated")
    ap.add_argument("--heap", action="store_true",
                    help="glibc: serve large allocations from the heap and never trim it, so "
                    "that XLA's results reuse pages already faulted in (what GLIBC_TUNABLES="
                    f"{HEAP_TUNABLES} does for any program)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.heap:
        keep_large_allocations_on_the_heap()
    session = Session()
    sizes, startup, parts = {}, [], []
    if args.sizes:
        startup = bench_startup()  # first: nothing compiled yet
        for logn in (int(s) for s in args.sizes.split(",")):
            sizes[logn] = bench_size(logn, args.reps, args.ml_dtypes_max)
        parts.append(markdown(sizes, startup))
    rows = [{"size": logn, "case": k, "s": s, "bytes": mv}
            for logn, t in sizes.items() for k, (s, mv) in t.items()]
    if args.threads:
        thread_rows = bench_threads([int(v) for v in args.threads.split(",")], args.reps)
        parts.append(threads_markdown(thread_rows))
        rows += thread_rows
    if args.casts:
        cast_rows = bench_casts([int(v) for v in args.casts.split(",")], args.reps)
        parts.append(casts_markdown(cast_rows))
        rows += cast_rows
    if args.nvfp4:
        nv_rows = bench_nvfp4([int(v) for v in args.nvfp4.split(",")], args.reps)
        parts.append(nvfp4_markdown(nv_rows))
        rows += nv_rows
    if args.dots:
        dots = [tuple(int(v) for v in d.split("x")) for d in args.dots.split(",")]
        dot_rows = bench_dots(dots, args.reps)
        parts.append(dots_markdown(dot_rows))
        rows += dot_rows
    session.report("\n\n".join(parts), rows + startup, args.json,
                   extra=f"jax {jax.__version__}, fastest of {args.reps}, "
                   f"x f32 [N / {ROW}, {ROW}], {os.cpu_count()} CPUs"
                   + (f"; glibc heap kept ({HEAP_TUNABLES})" if args.heap else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
