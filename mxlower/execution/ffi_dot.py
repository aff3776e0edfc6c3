"""mxlower's block-scaled dot kernel (:mod:`mxlower.lowering.dot_kernels`) as an XLA FFI
custom call on the CPU.

::

    import jax.numpy as jnp
    from mxlower.execution import ffi_dot

    # x: [M, K] f32, w: MX elements [N, K] with scales [N, K / 32]
    y = ffi_dot.dot(x, None, w_elements, w_scales, None, "mxfp4_e2m1")   # [M, N] f32
    y = ffi_dot.dot(x, None, w_elements, w_scales, None, "e2m1fo:e8m0_t32")  # the same kernel

A side's format is an MX format's name or its datatype (a :class:`~mxlower.numbers.Datatype`
or a code, blocks along K; :func:`mxlower.lowering.dot_kernels.kernel_side`): both name one
kernel (:class:`~mxlower.lowering.dot_kernels.DotSpec` is canonical).

The kernel is built, lowered by :data:`mxlower.execution.ffi.KERNEL_PIPELINE`, given an FFI
handler (:func:`handler_text`: the frame decoded and checked -- dtypes, ranks, the shapes
``A [B, M, K]``, ``A scales [B, M, K / ka]``, ``B [B, N, K]``, ``B scales [B, N, K / kb]``,
``out [B, M, N]``, bad ones an ``INVALID_ARGUMENT`` error JAX raises -- and the work split
into units of (batch, :data:`~mxlower.lowering.dot_kernels.NP` columns) run on XLA's
intra-op thread pool with :func:`mxlower.execution.ffi._parallel_text`) and JIT-compiled by
upstream MLIR's ExecutionEngine for the host CPU, once per process and kernel.

The SIMD path (:data:`~mxlower.lowering.dot_kernels.PATHS`) is the host's best
(:func:`host_path`: ``amx`` where ``/proc/cpuinfo`` lists what ``avx512`` needs and AMX-TILE
and AMX-BF16 and Linux grants the process the tile state, ``avx512`` where it lists AVX2 and
AVX-512 with BW, VL, VNNI and BF16, ``vnni`` where it lists AVX2 and the 256-bit VNNI forms,
``avx2`` where it lists AVX2, else ``portable``), or the one
the environment variable ``MXLOWER_DOT_PATH`` names (an unknown name, or a path this host
cannot run, is an error).

The handler computes docs/semantics.md section 6's contraction without nvfp4's global scale
on any operands: it first runs the kernel's range test (``@<kernel>_range``, once, on the
calling thread: one pass over the scale codes and the plain sides), which picks for every
unit the f32 paths or the exact f64 contraction (scales near the ends of the range, huge or
subnormal plain values, Inf and NaN) -- the run-time test that
:func:`mxlower.lowering.mx_math.lower_scaled_dot` makes around XLA's dot, with no XLA
conditional or reduction around the call.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from mxlower.bindings import upstream
import mxlower.execution.ffi as ffi
import mxlower.execution.ffi_abi as abi
import mxlower.execution.ptx as ptx
from mxlower.lowering import dot_kernels
from mxlower.lowering.dot_kernels import NP, DotSpec
from mxlower.numbers import Datatype
from mxlower.passes.lower_dot_kernels import LowerDotKernels

__all__ = ["ENV", "PARALLEL_WORK", "compile_dot", "dot", "handler_text", "host_path",
           "lower_module", "register", "register_called", "shared_object"]

#: the environment variable forcing a SIMD path
ENV = "MXLOWER_DOT_PATH"
#: multiply-adds (B x M x N x K) from which a call is split across XLA's threads
PARALLEL_WORK = 1 << 21
#: the fewest units (panels) per chunk of a call whose streaming tiles take three or more
#: plain rows, where the threads still get one chunk each: every chunk copies A's rows once
#: (1.0-1.1x at 3-256 rows against chunks of any size; BENCHMARKS.md, nineteenth session)
STREAM_CHUNK_PANELS = 8
#: ... and the most chunks per thread such a call makes where the units allow (XLA's threads
#: then balance the load: on 16 threads 1.1-1.4x at 8-16 rows against one chunk per thread;
#: the same chunks as before on 2; BENCHMARKS.md, twenty-fifth session)
STREAM_THREAD_CHUNKS = 4
#: units per chunk of a call split across XLA's threads, for kernels whose GEMM runs on
#: dot products of packed operands (:attr:`DotSpec.packed_gemm`: A packed once per call)
GEMM_UNITS = 8
#: chunks per thread of a packed GEMM's call where XLA has :data:`GEMM_SPREAD_THREADS`
#: threads or more (:func:`_gemm_units`; one per thread below): on 16 threads 1.13x (0.95-1.44x
#: over 18 GEMMs) against one, on 2 threads 0.92-0.99x (each chunk packs its rows of A;
#: BENCHMARKS.md, twenty-fifth session)
GEMM_THREAD_CHUNKS = 4
GEMM_SPREAD_THREADS = 8
#: the fewest rows of A a packed GEMM's block of rows has (:func:`_gemm_units`)
GEMM_MIN_ROWS = 64
#: the bytes of K-major B (codes and scales) from which its transpose is split across XLA's
#: threads (:attr:`~mxlower.lowering.dot_kernels.DotSpec.transposes_b`)
TRANSPOSE_PARALLEL_BYTES = 1 << 20


def host_path() -> str:
    """The SIMD path kernels are built for: ``$MXLOWER_DOT_PATH`` if set, else the host's
    best (:func:`mxlower.lowering.dot_kernels.usable_paths`)."""
    paths = dot_kernels.usable_paths()
    forced = os.environ.get(ENV)
    if forced:
        if forced not in dot_kernels.PATHS:
            raise ValueError(f"{ENV}={forced!r} is not a dot kernel path (known: "
                             f"{', '.join(dot_kernels.PATHS)})")
        if forced not in paths:
            raise ValueError(f"{ENV}={forced!r}: this CPU cannot run it (it runs: "
                             f"{', '.join(paths)})")
        return forced
    return paths[0]


# ============================================================================ handler


def _buffers(spec: DotSpec) -> tuple[list[tuple[str, np.dtype]], list[tuple[str, np.dtype]]]:
    """(arguments, results) as (name, dtype)."""
    ins = []
    for side, nm in (("lhs", "a"), ("rhs", "b")):
        e, s = spec.storage(side)
        ins.append((nm, e))
        if s is not None:
            ins.append((f"{nm}_scales", s))
    return ins, [("out", np.dtype(np.float32))]


def handler_text(spec: DotSpec) -> str:
    """The FFI handler of ``spec``'s kernel (LLVM dialect), ``@<name>_ffi``."""
    e = ffi.Emitter()
    f = ffi.Frame(spec, e)
    name = spec.name
    ffi.open_handler(f, name, "_ffi")
    zero, one = f.zero, f.one
    frame, args, buf = abi.CallFrame, abi.Args, abi.Buffer
    ins, outs = _buffers(spec)
    buffers: dict[str, str] = {}
    for what, group, types_f, ptrs_f, ops in (
            ("argument", frame.args.offset, args.types.offset, args.args.offset, ins),
            ("result", frame.rets.offset, abi.Rets.types.offset, abi.Rets.rets.offset, outs)):
        n = e.load("%frame", group + args.size.offset, "i64")
        f.fail_if(e.icmp("ne", n, e.i64(len(ops))),
                  f"expected {len(ops)} {what}{'s' if len(ops) != 1 else ''} "
                  f"({', '.join(o for o, _ in ops)})")
        types = e.load("%frame", group + types_f, "!llvm.ptr")
        ptrs = e.load("%frame", group + ptrs_f, "!llvm.ptr")
        for i, (o, dt) in enumerate(ops):
            t = e.load(types, 4 * i, "i32")
            f.fail_if(e.icmp("ne", t, e.i32(abi.BUFFER), "i32"),
                      f"{what} {i} ({o}) must be a buffer")
            b = e.load(ptrs, 8 * i, "!llvm.ptr")
            d = e.load(b, buf.dtype.offset, "i32")
            f.fail_if(e.icmp("ne", d, e.i32(abi.DTYPES[dt.name]), "i32"),
                      f"{what} {i} ({o}) must have dtype {dt}")
            buffers[o] = b
    # every buffer [..., rows, cols] with the same leading (batch) dimensions as a's
    rank = e.load(buffers["a"], buf.rank.offset, "i64")
    f.fail_if(e.icmp("slt", rank, e.i64(3)), "a must have rank 3 or more ([..., M, K])")
    lead = e.binary("sub", rank, e.i64(2))
    a_dims = e.load(buffers["a"], buf.dims.offset, "!llvm.ptr")
    shapes = (f"a [..., M, K], b [..., {'K, N' if spec.rhs_kn else 'N, K'}], out [..., M, N] "
              "(the same leading dimensions)")
    true = e.emit("{r} = llvm.mlir.constant(true) : i1")
    for o, _ in ins + outs:
        if o == "a":
            continue
        r = e.load(buffers[o], buf.rank.offset, "i64")
        f.fail_if(e.icmp("ne", r, rank), f"{o} must have a's rank")
        d = e.load(buffers[o], buf.dims.offset, "!llvm.ptr")
        same = e.emit(f"{{r}} = llvm.call @__mxlower_ffi_same_dims({d}, {a_dims}, {lead}) : "
                      "(!llvm.ptr, !llvm.ptr, i64) -> i1")
        f.fail_if(e.emit(f"{{r}} = llvm.xor {same}, {true} : i1"), f"shapes must be {shapes}")

    def dim(o: str, i: int) -> str:  # i = 0: rows, 1: columns
        d = e.load(buffers[o], buf.dims.offset, "!llvm.ptr")
        at = e.binary("add", lead, e.i64(i))
        return e.emit(f"{{r}} = llvm.load {e.element(d, at, 'i64')} : !llvm.ptr -> i64")

    B = e.emit(f"{{r}} = llvm.call @__mxlower_ffi_product({a_dims}, {lead}) : "
               "(!llvm.ptr, i64) -> i64")
    M, K = dim("a", 0), dim("a", 1)
    kn = spec.rhs_kn  # b [..., K, N] (scales [..., K / k, N])
    N = dim("b", 1 if kn else 0)
    for o, i, want in (("b", 0 if kn else 1, K), ("out", 0, M), ("out", 1, N)):
        f.fail_if(e.icmp("ne", dim(o, i), want), f"shapes must be {shapes}")
    if spec.transposes_b and spec.fmt("rhs").bits == 4:  # (rows of K of whole bytes)
        f.fail_if(e.icmp("ne", e.binary("urem", N, e.i64(2)), zero),
                  "a K-major f4 rhs against MX rows needs an even N")
    for side, nm in (("lhs", "a"), ("rhs", "b")):
        k = spec.k(side)
        if not k:
            continue
        f.fail_if(e.icmp("ne", e.binary("urem", K, e.i64(k)), zero),
                  f"the block size {k} must divide K")
        rows, blocks = (M if nm == "a" else N), e.binary("udiv", K, e.i64(k))
        want = ((0, blocks), (1, rows)) if kn and nm == "b" else ((0, rows), (1, blocks))
        shape = (f"K / {k}, N" if kn and nm == "b" else
                 f"{'M' if nm == 'a' else 'N'}, K / {k}")
        for i, w in want:
            f.fail_if(e.icmp("ne", dim(f"{nm}_scales", i), w),
                      f"{nm}_scales must have shape [..., {shape}]")
    # the dims buffer ([B, M, N, K, mode, mbw]: the range test stores the mode; mbw, a
    # packed GEMM's rows of A per block of units), the (data, size)
    # slots
    dims = e.emit(f"{{r}} = llvm.alloca {e.i64(6)} x i64 : (i64) -> !llvm.ptr")
    for i, v in enumerate((B, M, N, K, zero, e.i64(dot_kernels.MB_INT))):
        e.store(v, dims, 8 * i, "i64")
    slots = []
    for o, _ in ins + outs:
        b = buffers[o]
        data = e.load(b, buf.data.offset, "!llvm.ptr")
        d = e.load(b, buf.dims.offset, "!llvm.ptr")
        n = e.emit(f"{{r}} = llvm.call @__mxlower_ffi_product({d}, {rank}) : "
                   "(!llvm.ptr, i64) -> i64")
        slots.append((data, n))
    slots.append((dims, e.i64(6)))
    api_size = e.load(f.api, abi.Api.struct_size.offset, "i64")
    has_pool = e.icmp("sge", api_size, e.i64(abi.struct_size(abi.Api,
                                                          "XLA_FFI_ThreadPool_NumThreads")))
    ctx = e.load("%frame", abi.CallFrame.ctx.offset, "!llvm.ptr")
    copies: list[str] = []  # freed after the kernel
    if spec.transposes_b:  # K-major B against MX rows: the [N, K] kernel reads a copy
        slots, copies = _transpose_b(e, f, spec, slots, B, N, K, has_pool, ctx)
    # the range test, once: whether the units take the f32 paths or the exact f64 one
    ffi._call_kernel(e, f"{name}_range", slots, zero, zero)
    P = spec.panel  # columns of B per unit
    panels = e.ceil_div(N, P)
    units = e.binary("mul", B, panels)
    work = e.binary("mul", e.binary("mul", units, e.i64(P)), e.binary("mul", M, K))
    if spec.kn_kernel:  # the K-major kernel's units: (block of rows, batch, panel)
        R = dot_kernels.KN_BLOCK_ROWS
        blocks = e.ceil_div(M, R)
        units = e.binary("mul", units, blocks)
    big = e.icmp("sge", work, e.i64(PARALLEL_WORK))
    most, streamed = units, None  # chunks at most; the streaming tiles' (plain rows)
    if spec.stream_m > dot_kernels.STREAM_M and not spec.kn_kernel:
        most = streamed = _stream_chunks(e, f, has_pool, ctx, M, units)
    if spec.packed_gemm:
        units, most = _gemm_units(e, f, spec, dims, has_pool, ctx, B, M, panels, units,
                                  streamed)
    several = e.icmp("sge", units, e.i64(2))
    go = e.binary("and", e.binary("and", big, several, "i1"), has_pool, "i1")
    e.do(f"llvm.cond_br {go}, ^pool, ^direct")
    e.block("direct")
    ffi._call_kernel(e, name, slots, zero, units)
    e.do("llvm.br ^finished")
    e.block("pool")
    e.do(f"llvm.call @__mxlower_ffi_parallel({f.api}, {ctx}, {units}, {most}, "
         f"{', '.join(v for pair in slots for v in pair)}) : "
         f"({ffi._parallel_types(len(slots))}) -> ()")
    e.do("llvm.br ^finished")
    e.block("finished")
    for p in copies:
        e.do(f"llvm.call @free({p}) : (!llvm.ptr) -> ()")
    e.do(f"llvm.return {f.null} : !llvm.ptr")
    del one
    # the integer GEMM packs A once per call: chunks of GEMM_UNITS units (one per thread at
    # least); other kernels have no cost per call
    least = GEMM_UNITS if spec.packed_gemm else 1
    extra = ffi._parallel_text(name, len(slots), least)
    if spec.transposes_b:
        extra += ffi._parallel_text(f"{name}_transpose", len(_TRANSPOSE_SLOTS),
                                    prefix=_TRANSPOSE_PREFIX)
    return ffi.close_handler(f, name, "_ffi", extra)


#: the transpose's buffers (:func:`mxlower.lowering.dot_kernels.transpose_function`)
_TRANSPOSE_SLOTS = ("b", "b_scales", "bt", "bt_scales", "dims")
#: the names of the transpose's parallel helpers (``@<prefix>_parallel`` ...)
_TRANSPOSE_PREFIX = "__mxlower_ffi_transpose"


def _transpose_b(e: Any, f: Any, spec: DotSpec, slots: list[tuple[str, str]], B: str,
                 N: str, K: str, has_pool: str,
                 ctx: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(the kernel's slots, the copies to free after it): K-major B's codes and scales
    (:attr:`DotSpec.transposes_b`) copied to ``[B, N, K]`` and ``[B, N, K / k]`` on the heap
    by the kernel's transpose (``@<name>_transpose``, on XLA's threads from
    :data:`TRANSPOSE_PARALLEL_BYTES` bytes), the slots of B then the copies'.  A failed
    allocation is a ``RESOURCE_EXHAUSTED`` error (nothing left allocated)."""
    ib = 2 if spec.fmt("lhs") is not None else 1  # (after A and its scales, if any)
    (b, nb), (bs, nbs) = slots[ib], slots[ib + 1]
    nbytes = e.ceil_div(nb, 2) if spec.fmt("rhs").bits == 4 else nb
    copies = []
    for n in (nbytes, nbs):  # (at least a byte: malloc(0) may be null)
        size = e.emit(f"{{r}} = llvm.intr.umax({n}, {f.one}) : (i64, i64) -> i64")
        copies.append(e.emit(f"{{r}} = llvm.call @malloc({size}) : (i64) -> !llvm.ptr"))
    failed = e.binary("or", e.icmp("eq", copies[0], f.null, "!llvm.ptr"),
                      e.icmp("eq", copies[1], f.null, "!llvm.ptr"), "i1")
    e.do(f"llvm.cond_br {failed}, ^transpose_oom, ^transpose_go")
    e.block("transpose_oom")
    for p in copies:
        e.do(f"llvm.call @free({p}) : (!llvm.ptr) -> ()")
    true = e.emit("{r} = llvm.mlir.constant(true) : i1")
    f.fail_if(true, "cannot allocate the transposed copy of the K-major rhs "
              f"({'packed f4 ' if spec.fmt('rhs').bits == 4 else ''}codes [..., N, K] and "
              "scales [..., N, K / k])", abi.ERROR_RESOURCE_EXHAUSTED)
    e.do("llvm.unreachable")
    e.block("transpose_go")
    tslots = [(b, nb), (bs, nbs), (copies[0], nb), (copies[1], nbs), slots[-1]]
    units = e.binary("mul", B, e.binary("mul", e.ceil_div(N, dot_kernels.TRANSPOSE_PANEL),
                                        e.ceil_div(K, dot_kernels.TRANSPOSE_ROWS)))
    big = e.icmp("sge", e.binary("add", nbytes, nbs), e.i64(TRANSPOSE_PARALLEL_BYTES))
    go = e.binary("and", e.binary("and", big, e.icmp("sge", units, e.i64(2)), "i1"),
                  has_pool, "i1")
    e.do(f"llvm.cond_br {go}, ^transpose_pool, ^transpose_direct")
    e.block("transpose_direct")
    ffi._call_kernel(e, f"{spec.name}_transpose", tslots, f.zero, units)
    e.do("llvm.br ^transposed")
    e.block("transpose_pool")
    e.do(f"llvm.call @{_TRANSPOSE_PREFIX}_parallel({f.api}, {ctx}, {units}, {units}, "
         f"{', '.join(v for pair in tslots for v in pair)}) : "
         f"({ffi._parallel_types(len(tslots))}) -> ()")
    e.do("llvm.br ^transposed")
    e.block("transposed")
    return slots[:ib] + [(copies[0], nb), (copies[1], nbs)] + slots[ib + 2:], copies


def _threads(e: Any, f: Any, has_pool: str, ctx: str, at: str) -> str:
    """i64: XLA's thread count (1 without a thread pool), in a block named ``at``."""
    e.do(f"llvm.cond_br {has_pool}, ^{at}_pool, ^{at}_alone")
    e.block(f"{at}_pool")
    t = e.emit(f"{{r}} = llvm.call @__mxlower_ffi_threads({f.api}, {ctx}) : "
               "(!llvm.ptr, !llvm.ptr) -> i64")
    e.do(f"llvm.br ^{at}({t} : i64)")
    e.block(f"{at}_alone")
    e.do(f"llvm.br ^{at}({e.i64(1)} : i64)")
    e.block(at, f"%{at}_threads: i64")
    return f"%{at}_threads"


def _stream_chunks(e: Any, f: Any, has_pool: str, ctx: str, M: str, units: str) -> str:
    """The most chunks of a call whose streaming tiles take three or more plain rows: each
    chunk (a call of the kernel) copies all of A's rows into its slabs (the 512-bit paths'
    piped tiles), so each takes at least :data:`STREAM_CHUNK_PANELS` units where that
    leaves every thread :data:`STREAM_THREAD_CHUNKS` (or the units, where fewer)."""
    threads = _threads(e, f, has_pool, ctx, "stream_count")
    per = e.ceil_div(units, STREAM_CHUNK_PANELS)
    spread = e.binary("mul", threads, e.i64(STREAM_THREAD_CHUNKS))
    least = e.emit(f"{{r}} = llvm.intr.umin({units}, {spread}) : (i64, i64) -> i64")
    few = e.emit(f"{{r}} = llvm.intr.umax({per}, {least}) : (i64, i64) -> i64")
    many = e.icmp("ugt", M, e.i64(2))  # (one or two rows copy next to nothing)
    return e.emit(f"{{r}} = llvm.select {many}, {few}, {units} : i1, i64")


def _gemm_units(e: Any, f: Any, spec: DotSpec, dims: str, has_pool: str, ctx: str, B: str,
                M: str, panels: str, units: str, streamed: str | None) -> tuple[str, str]:
    """(units, chunks at most) of a packed GEMM's call (more than ``spec.stream_m`` rows, the
    f32 paths): the (batch, panel) units of each block of ``mbw`` rows of A, ``dims[5] = mbw``,
    in one chunk per thread (:data:`GEMM_THREAD_CHUNKS` on many threads: "threads" below counts
    chunks).  M is cut in equal blocks of about sqrt(B M N / threads) rows
    (at least :data:`GEMM_MIN_ROWS`, at most MB_INT, rounded up to a multiple of the tile's
    rows, :attr:`~mxlower.lowering.dot_kernels.DotSpec.gemm_rows`), so that each thread's
    share of the units, contiguous, is about as many rows of A as columns of B: it packs
    each once, where blocks of all of M had every chunk (a call of the kernel) pack all of
    A.  Otherwise the units as they are, in one chunk per thread, or -- ``streamed``, the
    streaming tiles' chunks of plain rows (:func:`_stream_chunks`) -- in those."""
    mr = spec.gemm_rows
    threads = _threads(e, f, has_pool, ctx, "counted")
    many = e.icmp("uge", threads, e.i64(GEMM_SPREAD_THREADS))
    spread = e.emit(f"{{r}} = llvm.select {many}, {e.i64(GEMM_THREAD_CHUNKS)}, {e.i64(1)} : "
                    "i1, i64")
    threads = e.binary("mul", threads, spread)  # chunks, in effect
    npad = e.binary("mul", panels, e.i64(NP))
    share = e.binary("udiv", e.binary("mul", e.binary("mul", B, M), npad), threads)
    fs = e.emit(f"{{r}} = llvm.uitofp {share} : i64 to f64")
    fs = e.emit(f"{{r}} = llvm.intr.sqrt({fs}) : (f64) -> f64")
    rows = e.emit(f"{{r}} = llvm.fptoui {fs} : f64 to i64")
    rows = e.emit(f"{{r}} = llvm.intr.umax({rows}, {e.i64(GEMM_MIN_ROWS)}) : (i64, i64) -> i64")
    rows = e.emit(f"{{r}} = llvm.intr.umin({rows}, {e.i64(dot_kernels.MB_INT)}) : "
                  "(i64, i64) -> i64")

    # blocks of equal rows (a multiple of MR_INT, at most MB_INT, which is one)
    nmb = e.ceil_div(M, rows)
    mbw = e.binary("mul", e.ceil_div(e.ceil_div(M, nmb), mr), e.i64(mr))
    e.store(mbw, dims, 8 * 5, "i64")
    nmb = e.ceil_div(M, mbw)
    mode = e.load(dims, 8 * 4, "i64")
    gemm = e.binary("and", e.icmp("ugt", M, e.i64(spec.stream_m)),
                    e.icmp("eq", mode, e.i64(0)), "i1")
    out = e.emit(f"{{r}} = llvm.select {gemm}, {e.binary('mul', units, nmb)}, {units} : i1, i64")
    # one chunk per thread (the parallel helper makes at most ceil(most / GEMM_UNITS))
    most = e.emit(f"{{r}} = llvm.intr.umin({out}, {threads}) : (i64, i64) -> i64")
    if streamed is not None:
        most = e.emit(f"{{r}} = llvm.select {gemm}, {most}, {streamed} : i1, i64")
    return out, e.binary("mul", most, e.i64(GEMM_UNITS))


# ============================================================================ compile, register


def lower_module(spec: DotSpec) -> tuple[Any, Any]:
    """(context, module): the kernel lowered to the LLVM dialect, with its handler."""
    ir = upstream.module("ir")
    pm_mod = upstream.module("passmanager")
    ctx = upstream.context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse("module {\n" + dot_kernels.declarations(spec) + "\n}")
        LowerDotKernels().run(module.operation)  # mxlower-lower-dot-kernels
        pm_mod.PassManager.parse(ffi.KERNEL_PIPELINE).run(module.operation)
        text = str(module).rstrip()
        assert text.endswith("}")
        module = ir.Module.parse(text[:-1] + ffi.externs(text) + handler_text(spec) + "}")
    return ctx, module


_lock = threading.Lock()
_compiled: dict[DotSpec, ffi.CompiledKernel] = {}


def compile_dot(spec: DotSpec) -> ffi.CompiledKernel:
    """``spec``'s kernel and handler, compiled once per process."""
    with _lock:
        if spec in _compiled:
            return _compiled[spec]
        t0 = time.perf_counter()
        try:
            ctx, module = lower_module(spec)
        except Exception as err:  # MLIRError from a pass or the verifier: a bug, say which
            raise ffi.FFIError(f"building kernel {spec.name} failed: {err}") from None
        t1 = time.perf_counter()
        engine, address = ffi.jit(ctx, module, f"{spec.name}_ffi_address")
        ck = ffi.CompiledKernel(spec, (ctx, module, engine), address, t1 - t0,
                                time.perf_counter() - t1)
        _compiled[spec] = ck
        return ck


def shared_object(spec: DotSpec, path: str, *, cpu: str, features: str | None = None) -> None:
    """Writes ``spec``'s kernel, range test and handler as a shared library exporting
    ``<name>_ffi`` (the XLA FFI handler), compiled ahead of time by xtc's llc for ``cpu``
    (llc's ``-mcpu``, e.g. ``x86-64-v3`` or ``sapphirerapids``; ``features``: its
    ``-mattr``): for a machine without mxlower's MLIR stacks, which loads it with ctypes and
    registers it with ``jax.ffi`` (bench/bench_dot_aot.py)."""
    _, module = lower_module(spec)
    ptx.host_shared_object(ptx.translate_to_llvmir(str(module)), path, cpu=cpu,
                           features=features, opt_level=3, optimize=True)


def register(spec: DotSpec) -> str:
    """Compiles ``spec``'s kernel (once) and registers it as an XLA FFI target for the CPU."""
    return ffi.register_handler(compile_dot(spec), "cpu")


def register_called(text: str) -> list[str]:
    """Registers every mxlower dot kernel target the StableHLO ``text`` calls (what
    ``mxlower-scaled-dot-to-kernel`` emits); the targets, sorted."""
    names = sorted(set(re.findall(r"\bmxlower_dot_[A-Za-z0-9_]+", text)))
    for name in names:
        register(DotSpec.from_name(name))
    return names


# ============================================================================ JAX entry point


def _side_name(fmt: str | Datatype | None, x: Any) -> str | Datatype:
    if fmt is not None:
        return fmt
    dt = np.dtype(x.dtype).name
    if dt not in ffi._WIDE:
        raise TypeError(f"dot: a plain side must be float32, bfloat16 or float16, got {dt}")
    return ffi._WIDE[dt]


def spec_for(lhs_format: str | Datatype | None, rhs_format: str | Datatype | None,
             lhs: Any, rhs: Any,
             lhs_block_size: int | None = None, rhs_block_size: int | None = None,
             path: str | None = None, rhs_kn: bool = False,
             rhs_copy: bool = False) -> DotSpec:
    """The kernel of a dot of these sides (``path``: default :func:`host_path`); a format is
    an MX format's name or datatype, None for a plain side (its type is ``lhs`` / ``rhs``'s
    dtype); ``rhs_kn``: the rhs held ``[..., K, N]`` (:attr:`DotSpec.rhs_kn`; ``rhs_copy``:
    copied to ``[..., N, K]`` by the handler, :attr:`DotSpec.rhs_copy`)."""
    return DotSpec(_side_name(lhs_format, lhs), _side_name(rhs_format, rhs),
                   lhs_block_size if lhs_format else None,
                   rhs_block_size if rhs_format else None, path or host_path(), rhs_kn,
                   rhs_copy)


def dot(a: Any, a_scales: Any, b: Any, b_scales: Any, lhs_format: str | Datatype | None,
        rhs_format: str | Datatype | None, *, lhs_block_size: int | None = None,
        rhs_block_size: int | None = None, path: str | None = None,
        rhs_kn: bool = False, rhs_copy: bool = False) -> Any:
    """``out[..., m, n] = sum_k A[..., m, k] B[..., n, k]`` (f32) by the kernel, through
    ``jax.ffi.ffi_call``: ``a`` [..., M, K] and ``b`` [..., N, K] with the same leading
    (batch) dimensions, each MX (elements and scales [..., rows, K / k]; f6 as uint8 codes)
    or plain f32 / bf16 / f16 (scales None, format None); a format is an MX format's name or
    its datatype (``"e2m1fo:e8m0_t32"``, ``"bfp16"``, a :class:`~mxlower.numbers.Datatype`:
    blocks along K, the last dimension).  ``rhs_kn``: ``b`` is held K-major, [..., K, N]
    (scales [..., K / k, N]): weights ``[K, N]`` blocked along K, read as they are against a
    plain ``a``, copied to ``[..., N, K]`` by the handler against an MX one (or, ``rhs_copy``,
    a plain one).  Any values: the kernel takes the
    exact f64 contraction where the f32 one could flush or overflow (docs/semantics.md
    section 6).  Works under jit and vmap."""
    import jax  # optional, heavy

    spec = spec_for(lhs_format, rhs_format, a, b, lhs_block_size, rhs_block_size, path,
                    rhs_kn, rhs_copy)
    kb = -2 if rhs_kn else -1  # b's K
    if a.ndim < 2 or b.ndim < 2 or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[kb]:
        raise ValueError(f"dot: shapes must be [..., M, K] and "
                         f"[..., {'K, N' if rhs_kn else 'N, K'}], got {a.shape} and "
                         f"{b.shape}")
    batch = tuple(a.shape[:-2])
    M, N = a.shape[-2], b.shape[-1 if rhs_kn else -2]
    if not batch:  # the handler takes [..., rows, K] with at least one leading dimension
        return dot(*(None if v is None else v[None] for v in (a, a_scales, b, b_scales)),
                   lhs_format, rhs_format, lhs_block_size=lhs_block_size,
                   rhs_block_size=rhs_block_size, path=path, rhs_kn=rhs_kn,
                   rhs_copy=rhs_copy)[0]
    operands = [v for v in (a, a_scales, b, b_scales) if v is not None]
    name = register(spec)
    # any leading dimensions: vmap adds one in front of every operand
    return jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(batch + (M, N), np.float32),
                            vmap_method="broadcast_all")(*operands)


def kernel_paths() -> Sequence[str]:
    """Every path this host can run (what the tests force in turn)."""
    return dot_kernels.usable_paths()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mxlower.execution.ffi_dot LHS RHS [--lhs-block-size K] [--rhs-block-size
    K] [--path P] [--lowered]``: prints the kernel (upstream MLIR; ``--lowered``: the LLVM
    dialect with its FFI handler).  LHS / RHS: an MX format, an MX format's datatype
    (``e2m1fo:e8m0_t32``, ``bfp16``) or f32, bf16, f16."""
    ap = argparse.ArgumentParser(prog="python -m mxlower.execution.ffi_dot",
                                 description=main.__doc__.split("\n")[0])
    ap.add_argument("lhs")
    ap.add_argument("rhs")
    ap.add_argument("--lhs-block-size", type=int)
    ap.add_argument("--rhs-block-size", type=int)
    ap.add_argument("--path", default="portable", choices=dot_kernels.PATHS)
    ap.add_argument("--lowered", action="store_true")
    a = ap.parse_args(argv)
    try:
        spec = DotSpec(a.lhs, a.rhs, a.lhs_block_size, a.rhs_block_size, a.path)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if a.lowered:
        ctx, module = lower_module(spec)
        with ctx:
            print(module)
    else:
        print(dot_kernels.build(spec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
