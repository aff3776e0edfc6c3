"""mxlower's fused MX kernels as XLA FFI custom calls on the CPU, for ``jax.jit``.

::

    import jax, jax.numpy as jnp
    from mxlower.execution import ffi

    @jax.jit
    def f(x):
        q, s = ffi.quantize(x, "mxfp4_e2m1", scale_mode="rceil")   # one pass over x
        return ffi.dequantize(q, s, "mxfp4_e2m1", dtype=jnp.bfloat16)

    y = jax.jit(lambda x: ffi.convert(x, jnp.float4_e2m1fn))(x)  # a plain conversion

How a call gets to native code
------------------------------
1. :mod:`mxlower.lowering.mx_kernels` builds the kernel (``func``/``scf``/``vector``/``arith``
   on upstream MLIR: one loop over the blocks, each block read once);
2. :data:`KERNEL_PIPELINE` lowers it to the LLVM dialect;
3. :func:`handler_text` generates the XLA FFI handler in the LLVM dialect: it answers XLA's
   metadata query (API version 0.3, no traits), does nothing outside the execute stage, decodes
   ``XLA_FFI_CallFrame`` (argument and result counts, buffer kinds, dtypes, ranks and
   dimensions, checked against :meth:`~mxlower.lowering.mx_kernels.KernelSpec.operands`), calls
   the kernel on the whole block range -- split into chunks run on XLA's intra-op thread pool
   (``XLA_FFI_ThreadPool_Schedule``) from :data:`THREAD_CHUNK` x 2 values on -- and reports bad
   input through ``XLA_FFI_Error_Create`` (``INVALID_ARGUMENT``), which JAX raises as an
   exception -- never a crash.  Layouts come from :mod:`mxlower.execution.ffi_abi`;
4. upstream MLIR's ExecutionEngine JIT-compiles both (LLVM O3, host CPU), once per process and
   kernel (:func:`compile_kernel` caches it); the handler's address comes from a generated
   function returning ``llvm.mlir.addressof`` (the engine's lookup finds only the packed
   ``_mlir_*`` wrappers), called once through its wrapper;
5. :func:`register` registers it with ``jax.ffi.register_ffi_target(name, capsule,
   platform="cpu", api_version=1)`` under the kernel's name
   (``mxlower_quantize_mxfp8_e4m3_f32_k32_floor``, ...).

:func:`quantize` and :func:`dequantize` call the kernels through ``jax.ffi.ffi_call`` with the
blocked axis moved last (a transpose for any other axis); they work under ``jit``, ``vmap``
(the kernels are shape-agnostic) and on concrete arrays.  :func:`convert` does the same for
plain conversions (:class:`~mxlower.lowering.mx_kernels.ConvertSpec`: f32/bf16/f16 to every
narrow float type and back, any shape, scalars included).  Results follow
:class:`mxlower.jax.MXArray`'s storage: f8 / f4 / int8 elements in their JAX dtypes (XLA
stores f4 packed two per byte, low nibble first, which is what the kernel writes), f6 as one
``uint8`` code per byte or, with ``packed=True``, ``mx.pack``'s layout (four codes per three
bytes along the last axis).  :func:`cast` runs ``mx.cast``'s kernels
(:class:`~mxlower.lowering.mx_kernels.CastSpec`: unscaled casts to any number spec, exponent
and float scales in 1D tiles, channels and tensors, subtiles and a tensor level ``_gf32``
included; stochastic rounding's uint32 bits a second operand, a tensor scale g, rank-0 f32,
the last).  Bit-exact
with :mod:`mxlower.reference`.

The engines live as long as the process (XLA keeps the handler pointers); ``available()`` says
whether the upstream MLIR stack is installed.  ``python -m mxlower.execution.ffi OP FORMAT``
prints a kernel's IR (see :func:`main`).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mxlower import numbers, types
from mxlower.bindings import jaxlib, upstream
import mxlower.execution.ffi_abi as abi
import mxlower.execution.kernel_cache as kernel_cache
from mxlower.formats import FORMATS, SCALE_MODES
from mxlower.lowering.mx_kernels import (
    CastSpec,
    ConvertSpec,
    KernelSpec,
    Operand,
    build,
    emit_kernel,
)
from mxlower.pipeline.manager import run_pipeline

#: what a kernel computes
Spec = KernelSpec | ConvertSpec | CastSpec

__all__ = [
    "KERNEL_PIPELINE",
    "CompiledKernel",
    "Emitter",
    "FFIError",
    "Frame",
    "available",
    "c_string",
    "cast",
    "cast_layout",
    "compile_kernel",
    "convert",
    "convert_spec",
    "dequantize",
    "float_type_name",
    "add_platform",
    "handler_text",
    "jit",
    "quantize",
    "register",
    "register_handler",
    "spec_arguments",
    "spec_from_arguments",
]

#: upstream passes taking a kernel module to the LLVM dialect
KERNEL_PIPELINE = ("builtin.module(canonicalize, cse, convert-scf-to-cf, "
                   "convert-vector-to-llvm{enable-amx}, "
                   "convert-math-to-llvm, convert-arith-to-llvm, expand-strided-metadata, "
                   "finalize-memref-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, "
                   "reconcile-unrealized-casts)")

_WIDE = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


class FFIError(RuntimeError):
    """A kernel could not be built, compiled or registered (the message says why)."""


def available() -> bool:
    """Whether the kernels can be built here (upstream MLIR's bindings are installed)."""
    return upstream.available()


# ============================================================================ handler text


class Emitter:
    """A little writer of LLVM dialect text: fresh SSA names, blocks, typed helpers."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def fresh(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def emit(self, text: str) -> str:
        """Emits ``text`` with ``{r}`` replaced by a fresh result name; returns that name."""
        r = self.fresh()
        self.lines.append("    " + text.format(r=r))
        return r

    def do(self, text: str) -> None:
        self.lines.append("    " + text)

    def block(self, name: str, args: str = "") -> None:
        self.lines.append(f"  ^{name}{'(' + args + ')' if args else ''}:")

    def i64(self, v: int) -> str:
        return self.emit(f"{{r}} = llvm.mlir.constant({v} : i64) : i64")

    def i32(self, v: int) -> str:
        return self.emit(f"{{r}} = llvm.mlir.constant({v} : i32) : i32")

    def at(self, ptr: str, offset: int) -> str:
        """``ptr + offset`` bytes."""
        if offset == 0:
            return ptr
        return self.emit(f"{{r}} = llvm.getelementptr {ptr}[{offset}] : (!llvm.ptr) -> "
                         "!llvm.ptr, i8")

    def load(self, ptr: str, offset: int, t: str) -> str:
        return self.emit(f"{{r}} = llvm.load {self.at(ptr, offset)} : !llvm.ptr -> {t}")

    def store(self, value: str, ptr: str, offset: int, t: str) -> None:
        self.do(f"llvm.store {value}, {self.at(ptr, offset)} : {t}, !llvm.ptr")

    def element(self, ptr: str, index: str, t: str) -> str:
        """``&ptr[index]`` for elements of type ``t``."""
        return self.emit(f"{{r}} = llvm.getelementptr {ptr}[{index}] : (!llvm.ptr, i64) -> "
                         f"!llvm.ptr, {t}")

    def binary(self, op: str, a: str, b: str, t: str = "i64") -> str:
        return self.emit(f"{{r}} = llvm.{op} {a}, {b} : {t}")

    def icmp(self, pred: str, a: str, b: str, t: str = "i64") -> str:
        return self.emit(f'{{r}} = llvm.icmp "{pred}" {a}, {b} : {t}')

    def ceil_div(self, a: str, n: int | str) -> str:
        """i64: ``ceil(a / n)`` (``n`` a constant or a value)."""
        if isinstance(n, int):
            return self.binary("udiv", self.binary("add", a, self.i64(n - 1)), self.i64(n))
        return self.binary("udiv", self.binary("add", a, self.binary("sub", n, self.i64(1))), n)


#: helper functions every handler module holds (internal linkage)
_HELPERS = """\
  llvm.func internal @__mxlower_ffi_product(%dims: !llvm.ptr, %n: i64) -> i64 {
    %zero = llvm.mlir.constant(0 : i64) : i64
    %one = llvm.mlir.constant(1 : i64) : i64
    llvm.br ^loop(%zero, %one : i64, i64)
  ^loop(%i: i64, %p: i64):
    %done = llvm.icmp "sge" %i, %n : i64
    llvm.cond_br %done, ^exit, ^body
  ^body:
    %a = llvm.getelementptr %dims[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    %d = llvm.load %a : !llvm.ptr -> i64
    %q = llvm.mul %p, %d : i64
    %j = llvm.add %i, %one : i64
    llvm.br ^loop(%j, %q : i64, i64)
  ^exit:
    llvm.return %p : i64
  }
  llvm.func internal @__mxlower_ffi_same_dims(%a: !llvm.ptr, %b: !llvm.ptr, %n: i64) -> i1 {
    %zero = llvm.mlir.constant(0 : i64) : i64
    %one = llvm.mlir.constant(1 : i64) : i64
    %yes = llvm.mlir.constant(true) : i1
    %no = llvm.mlir.constant(false) : i1
    llvm.br ^loop(%zero : i64)
  ^loop(%i: i64):
    %done = llvm.icmp "sge" %i, %n : i64
    llvm.cond_br %done, ^same, ^body
  ^body:
    %pa = llvm.getelementptr %a[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    %pb = llvm.getelementptr %b[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    %da = llvm.load %pa : !llvm.ptr -> i64
    %db = llvm.load %pb : !llvm.ptr -> i64
    %eq = llvm.icmp "eq" %da, %db : i64
    %j = llvm.add %i, %one : i64
    llvm.cond_br %eq, ^loop(%j : i64), ^differ
  ^differ:
    llvm.return %no : i1
  ^same:
    llvm.return %yes : i1
  }
"""


#: values per chunk below which a call is not split across threads (512 KiB of f32)
THREAD_CHUNK = 1 << 17

#: at most this many chunks per thread: the threads claim chunks one at a time, so a thread
#: that starts late (a loaded machine) or runs slowly leaves its share to the others, and the
#: caller never waits for more than the chunks already being run (1: one chunk per thread)
CHUNKS_PER_THREAD = 16

#: C library functions the parallel path calls (resolved in the process by the JIT)
_EXTERNS = {"malloc": "llvm.func @malloc(i64) -> !llvm.ptr",
            "free": "llvm.func @free(!llvm.ptr)",
            "sched_yield": "llvm.func @sched_yield() -> i32"}

#: the shared state of a parallel call (i64 slots): next chunk to claim, chunks done,
#: references (the tasks still to finish, and the handler), chunk count, block count, then the
#: (data, size) pairs of the buffers
_NEXT, _DONE, _REFS, _CHUNKS, _BLOCKS, _SLOTS = range(6)


def _call_kernel(e: Emitter, name: str, slots: list[tuple[str, str]], b0: str, b1: str) -> None:
    """Emits the call of the lowered kernel on blocks [b0, b1): each buffer as the memref
    descriptor (allocated, aligned, offset 0, size, stride 1)."""
    zero, one = e.i64(0), e.i64(1)
    args = [v for data, n in slots for v in (data, data, zero, n, one)] + [b0, b1]
    types = ", ".join(["!llvm.ptr", "!llvm.ptr", "i64", "i64", "i64"] * len(slots)
                      + ["i64", "i64"])
    e.do(f"llvm.call @{name}({', '.join(args)}) : ({types}) -> ()")


def _parallel_types(nslots: int) -> str:
    return ", ".join(["!llvm.ptr", "!llvm.ptr", "i64", "i64"] + ["!llvm.ptr", "i64"] * nslots)


def _parallel_text(name: str, nslots: int, least: int = 1,
                   prefix: str = "__mxlower_ffi") -> list[str]:
    """``@__mxlower_ffi_threads(api, ctx)``: XLA's thread count (1 without a pool), and
    ``@__mxlower_ffi_parallel(api, ctx, blocks, max_chunks, buffers...)``: the kernel on
    ``min(max_chunks, threads x CHUNKS_PER_THREAD)`` chunks of the block range -- with
    ``least``, at most ``ceil(max_chunks / least)`` but at least one per thread: for a kernel
    with a cost per call (the dot kernel's integer GEMM packs A once per call) -- run by
    ``threads = min(max_chunks, XLA's thread count)`` threads, chunks claimed one at a time
    with an atomic counter by the calling thread and by tasks given to
    ``XLA_FFI_ThreadPool_Schedule`` (so nothing waits on a task that never starts or starts
    late: the caller does every chunk nobody else claimed, then waits only for chunks being
    run).  The state is on the heap, freed by the last of the caller and the tasks to finish
    with it.  Without a thread pool (an error from the API, destroyed), the caller does it
    all.  ``prefix`` names these functions (``@<prefix>_parallel`` ...) where a handler runs
    a second kernel on XLA's threads."""
    api = abi.Api
    e = Emitter()
    slot_args = ", ".join(f"%d{i}: !llvm.ptr, %n{i}: i64" for i in range(nslots))

    def slot(state: str, i: int) -> str:
        return e.at(state, 8 * i)

    # the work loop: claim a chunk, run it, count it
    e.lines.append(f"  llvm.func internal @{prefix}_work(%state: !llvm.ptr) {{")
    e.do("llvm.br ^claim")
    e.block("claim")
    one = e.i64(1)
    c = e.emit(f"{{r}} = llvm.atomicrmw add {slot('%state', _NEXT)}, {one} acq_rel : "
               "!llvm.ptr, i64")
    n = e.load("%state", 8 * _CHUNKS, "i64")
    e.do(f"llvm.cond_br {e.icmp('sge', c, n)}, ^exit, ^run")
    e.block("run")
    blocks = e.load("%state", 8 * _BLOCKS, "i64")
    b0 = e.binary("udiv", e.binary("mul", c, blocks), n)
    b1 = e.binary("udiv", e.binary("mul", e.binary("add", c, one), blocks), n)
    slots = [(e.load("%state", 8 * (_SLOTS + 2 * i), "!llvm.ptr"),
              e.load("%state", 8 * (_SLOTS + 2 * i + 1), "i64")) for i in range(nslots)]
    _call_kernel(e, name, slots, b0, b1)
    e.emit(f"{{r}} = llvm.atomicrmw add {slot('%state', _DONE)}, {one} release : !llvm.ptr, i64")
    e.do("llvm.br ^claim")
    e.block("exit")
    e.do("llvm.return")
    e.lines.append("  }")
    # a task: work, then drop its reference
    e.lines.append(f"  llvm.func internal @{prefix}_task(%state: !llvm.ptr) {{")
    e.do(f"llvm.call @{prefix}_work(%state) : (!llvm.ptr) -> ()")
    e.do(f"llvm.call @{prefix}_release(%state) : (!llvm.ptr) -> ()")
    e.do("llvm.return")
    e.lines.append("  }")
    e.lines.append(f"  llvm.func internal @{prefix}_release(%state: !llvm.ptr) {{")
    one = e.i64(1)
    r = e.emit(f"{{r}} = llvm.atomicrmw sub {slot('%state', _REFS)}, {one} acq_rel : "
               "!llvm.ptr, i64")
    e.do(f"llvm.cond_br {e.icmp('eq', r, one)}, ^last, ^keep")
    e.block("last")
    e.do("llvm.call @free(%state) : (!llvm.ptr) -> ()")
    e.do("llvm.return")
    e.block("keep")
    e.do("llvm.return")
    e.lines.append("  }")
    # XLA's thread count (1 without a pool: an error from the API, destroyed)
    e.lines.append(f"  llvm.func internal @{prefix}_threads(%api: !llvm.ptr, %ctx: !llvm.ptr) "
                   "-> i64 {")
    one = e.i64(1)
    null = e.emit("{r} = llvm.mlir.zero : !llvm.ptr")
    nt_args = e.emit("{r} = llvm.alloca " + one + " x !llvm.array<"
                     f"{ctypes.sizeof(abi.ThreadPoolNumThreadsArgs)} x i8> : (i64) -> !llvm.ptr")
    de_args = e.emit("{r} = llvm.alloca " + one + " x !llvm.array<"
                     f"{ctypes.sizeof(abi.ErrorDestroyArgs)} x i8> : (i64) -> !llvm.ptr")
    nt = e.emit("{r} = llvm.alloca " + one + " x i64 : (i64) -> !llvm.ptr")
    e.store(one, nt, 0, "i64")
    na = abi.ThreadPoolNumThreadsArgs
    e.store(e.i64(abi.struct_size(na, "num_threads")), nt_args, na.struct_size.offset, "i64")
    e.store(null, nt_args, na.extension_start.offset, "!llvm.ptr")
    e.store("%ctx", nt_args, na.ctx.offset, "!llvm.ptr")
    e.store(nt, nt_args, na.num_threads.offset, "!llvm.ptr")
    da = abi.ErrorDestroyArgs
    e.store(e.i64(abi.struct_size(da, "error")), de_args, da.struct_size.offset, "i64")
    e.store(null, de_args, da.extension_start.offset, "!llvm.ptr")
    destroy = e.load("%api", api.XLA_FFI_Error_Destroy.offset, "!llvm.ptr")
    count = e.load("%api", api.XLA_FFI_ThreadPool_NumThreads.offset, "!llvm.ptr")
    err = e.emit(f"{{r}} = llvm.call {count}({nt_args}) : !llvm.ptr, (!llvm.ptr) -> !llvm.ptr")
    e.do(f"llvm.cond_br {e.icmp('ne', err, null, '!llvm.ptr')}, ^no_pool, ^pool")
    e.block("no_pool")
    e.store(err, de_args, da.error.offset, "!llvm.ptr")
    e.do(f"llvm.call {destroy}({de_args}) : !llvm.ptr, (!llvm.ptr) -> ()")
    e.store(one, nt, 0, "i64")
    e.do("llvm.br ^pool")
    e.block("pool")
    e.do(f"llvm.return {e.load(nt, 0, 'i64')} : i64")
    e.lines.append("  }")
    # the caller
    e.lines.append(f"  llvm.func internal @{prefix}_parallel(%api: !llvm.ptr, %ctx: !llvm.ptr, "
                   f"%blocks: i64, %most: i64, {slot_args}) {{")
    zero, one = e.i64(0), e.i64(1)
    null = e.emit("{r} = llvm.mlir.zero : !llvm.ptr")
    sc_args = e.emit("{r} = llvm.alloca " + one + " x !llvm.array<"
                     f"{ctypes.sizeof(abi.ThreadPoolScheduleArgs)} x i8> : (i64) -> !llvm.ptr")
    de_args = e.emit("{r} = llvm.alloca " + one + " x !llvm.array<"
                     f"{ctypes.sizeof(abi.ErrorDestroyArgs)} x i8> : (i64) -> !llvm.ptr")
    da = abi.ErrorDestroyArgs
    e.store(e.i64(abi.struct_size(da, "error")), de_args, da.struct_size.offset, "i64")
    e.store(null, de_args, da.extension_start.offset, "!llvm.ptr")
    destroy = e.load("%api", api.XLA_FFI_Error_Destroy.offset, "!llvm.ptr")
    threads = e.emit(f"{{r}} = llvm.call @{prefix}_threads(%api, %ctx) : "
                     "(!llvm.ptr, !llvm.ptr) -> i64")
    workers = e.emit(f"{{r}} = llvm.intr.smin({threads}, %most) : (i64, i64) -> i64")
    most = e.binary("mul", workers, e.i64(CHUNKS_PER_THREAD))
    cap = "%most"
    if least > 1:
        cap = e.ceil_div(cap, least)
    chunks = e.emit(f"{{r}} = llvm.intr.smin({most}, {cap}) : (i64, i64) -> i64")
    if least > 1:
        chunks = e.emit(f"{{r}} = llvm.intr.smax({chunks}, {workers}) : (i64, i64) -> i64")
    e.do(f"llvm.cond_br {e.icmp('slt', workers, e.i64(2))}, ^alone, ^split")
    e.block("alone")
    _call_kernel(e, name, [(f"%d{i}", f"%n{i}") for i in range(nslots)], zero, "%blocks")
    e.do("llvm.return")
    e.block("split")
    state = e.emit(f"{{r}} = llvm.call @malloc({e.i64(8 * (_SLOTS + 2 * nslots))}) : "
                   "(i64) -> !llvm.ptr")
    e.store(zero, state, 8 * _NEXT, "i64")
    e.store(zero, state, 8 * _DONE, "i64")
    e.store(workers, state, 8 * _REFS, "i64")  # the workers - 1 tasks and this thread
    e.store(chunks, state, 8 * _CHUNKS, "i64")
    e.store("%blocks", state, 8 * _BLOCKS, "i64")
    for i in range(nslots):
        e.store(f"%d{i}", state, 8 * (_SLOTS + 2 * i), "!llvm.ptr")
        e.store(f"%n{i}", state, 8 * (_SLOTS + 2 * i + 1), "i64")
    sa = abi.ThreadPoolScheduleArgs
    e.store(e.i64(abi.struct_size(sa, "data")), sc_args, sa.struct_size.offset, "i64")
    e.store(null, sc_args, sa.extension_start.offset, "!llvm.ptr")
    e.store("%ctx", sc_args, sa.ctx.offset, "!llvm.ptr")
    task = e.emit(f"{{r}} = llvm.mlir.addressof @{prefix}_task : !llvm.ptr")
    e.store(task, sc_args, sa.task.offset, "!llvm.ptr")
    e.store(state, sc_args, sa.data.offset, "!llvm.ptr")
    schedule = e.load("%api", api.XLA_FFI_ThreadPool_Schedule.offset, "!llvm.ptr")
    e.do(f"llvm.br ^schedule({one} : i64)")
    e.block("schedule", "%j: i64")
    e.do(f"llvm.cond_br {e.icmp('sge', '%j', workers)}, ^work, ^give")
    e.block("give")
    serr = e.emit(f"{{r}} = llvm.call {schedule}({sc_args}) : !llvm.ptr, (!llvm.ptr) -> "
                  "!llvm.ptr")
    nxt = e.binary("add", "%j", one)
    e.do(f"llvm.cond_br {e.icmp('ne', serr, null, '!llvm.ptr')}, ^refused, "
         f"^schedule({nxt} : i64)")
    e.block("refused")  # that task will never run: drop its reference
    e.store(serr, de_args, da.error.offset, "!llvm.ptr")
    e.do(f"llvm.call {destroy}({de_args}) : !llvm.ptr, (!llvm.ptr) -> ()")
    e.do(f"llvm.call @{prefix}_release({state}) : (!llvm.ptr) -> ()")
    e.do(f"llvm.br ^schedule({nxt} : i64)")
    e.block("work")
    e.do(f"llvm.call @{prefix}_work({state}) : (!llvm.ptr) -> ()")
    e.do("llvm.br ^wait")
    e.block("wait")  # every chunk is claimed: wait for those still running elsewhere
    done = e.emit(f"{{r}} = llvm.load {slot(state, _DONE)} atomic acquire "
                  "{{alignment = 8 : i64}}"
                  " : !llvm.ptr -> i64")
    e.do(f"llvm.cond_br {e.icmp('slt', done, chunks)}, ^yield, ^finish")
    e.block("yield")
    e.emit("{r} = llvm.call @sched_yield() : () -> i32")
    e.do("llvm.br ^wait")
    e.block("finish")
    e.do(f"llvm.call @{prefix}_release({state}) : (!llvm.ptr) -> ()")
    e.do("llvm.return")
    e.lines.append("  }")
    return e.lines


def c_string(text: str | bytes) -> str:
    """An MLIR string literal holding ``text`` (UTF-8, or raw bytes) and a terminating NUL."""
    out = []
    for ch in (text if isinstance(text, bytes) else text.encode()) + b"\0":
        out.append(chr(ch) if 32 <= ch < 127 and ch not in b'"\\' else f"\\{ch:02X}")
    return '"' + "".join(out) + '"'


def _describe(o: Operand, spec: Spec, ref: str) -> str:
    """How an operand's shape follows from the reference array's (for error messages)."""
    return {"values": f"{ref}'s shape",
            "packed6": f"{ref}'s shape with the last dimension times 3/4 (packed f6)",
            "scales": f"{ref}'s shape with the last dimension divided by {spec.k}",
            "scalar": "shape ()"}[o.kind]


class Frame:
    """What the generated handler knows once the call frame is decoded and checked, for the
    code that runs the kernel (:func:`handler_text`'s ``run``): the emitter, the SSA names of
    the ``XLA_FFI_Api`` and call-frame pointers and of constants, each buffer's (data, size)
    as the kernel's memref descriptor needs it, the value and unit counts; and the ways out."""

    def __init__(self, spec: Spec, e: Emitter):
        self.spec, self.e = spec, e
        self.messages: list[str] = []  # one error block and string per distinct message
        self.codes: dict[str, int] = {}  # a message's error code, if not INVALID_ARGUMENT
        self.checks = 0
        self.api = self.null = self.zero = self.one = ""
        self.slots: list[tuple[str, str]] = []
        self.total = self.blocks = ""

    def fail_if(self, cond: str, message: str,
                errc: int = abi.ERROR_INVALID_ARGUMENT) -> None:
        """Branch to an error (``errc``, by default ``INVALID_ARGUMENT``) saying ``message``
        when ``cond`` (i1)."""
        text = f"{self.spec.name}: {message}"
        if text not in self.messages:
            self.messages.append(text)
            if errc != abi.ERROR_INVALID_ARGUMENT:
                self.codes[text] = errc
        self.checks += 1
        self.e.do(f"llvm.cond_br {cond}, ^error{self.messages.index(text)}, ^ok{self.checks}")
        self.e.block(f"ok{self.checks}")

    def error(self, message: str, errc: int | str) -> str:
        """Emits ``XLA_FFI_Error_Create(errc, message)`` (a pointer to a NUL-terminated string,
        which XLA copies; ``errc`` a code or an i32 value) and returns the error."""
        e = self.e
        ea = e.emit("{r} = llvm.alloca " + self.one + " x !llvm.array<"
                    f"{ctypes.sizeof(abi.ErrorCreateArgs)} x i8> : (i64) -> !llvm.ptr")
        ca = abi.ErrorCreateArgs
        e.store(e.i64(abi.struct_size(ca, "errc")), ea, ca.struct_size.offset, "i64")
        e.store(self.null, ea, ca.extension_start.offset, "!llvm.ptr")
        e.store(message, ea, ca.message.offset, "!llvm.ptr")
        e.store(e.i32(errc) if isinstance(errc, int) else errc, ea, ca.errc.offset, "i32")
        create = e.load(self.api, abi.Api.XLA_FFI_Error_Create.offset, "!llvm.ptr")
        return e.emit(f"{{r}} = llvm.call {create}({ea}) : !llvm.ptr, (!llvm.ptr) -> !llvm.ptr")


def _run_on_cpu(f: Frame) -> list[str]:
    """The CPU handler's execution: the kernel on every unit, in one call or split across XLA's
    thread pool from two chunks of :data:`THREAD_CHUNK` values on."""
    e, name = f.e, f.spec.name
    chunks = e.binary("udiv", f.total, e.i64(THREAD_CHUNK))
    threaded = e.icmp("sge", chunks, e.i64(2))
    api_size = e.load(f.api, abi.Api.struct_size.offset, "i64")
    has_pool = e.icmp("sge", api_size, e.i64(abi.struct_size(abi.Api,
                                                          "XLA_FFI_ThreadPool_NumThreads")))
    e.do(f"llvm.cond_br {e.binary('and', threaded, has_pool, 'i1')}, ^pool, ^direct")
    e.block("direct")
    _call_kernel(e, name, f.slots, f.zero, f.blocks)
    e.do(f"llvm.return {f.null} : !llvm.ptr")
    e.block("pool")
    ctx = e.load("%frame", abi.CallFrame.ctx.offset, "!llvm.ptr")
    e.do(f"llvm.call @__mxlower_ffi_parallel({f.api}, {ctx}, {f.blocks}, {chunks}, "
         f"{', '.join(v for pair in f.slots for v in pair)}) : "
         f"({_parallel_types(len(f.slots))}) -> ()")
    e.do(f"llvm.return {f.null} : !llvm.ptr")
    return _parallel_text(name, len(f.slots))


def open_handler(f: Frame, name: str, suffix: str) -> None:
    """Opens the handler function ``@<name><suffix>(call_frame) -> error``: answers XLA's
    metadata query (API 0.3, no traits), returns at once outside the execute stage, and leaves
    ``f.e`` in the execute stage's block with ``f.null``, ``f.zero``, ``f.one`` and ``f.api``
    set."""
    e, fail_if = f.e, f.fail_if
    frame = abi.CallFrame
    e.lines.append(f"  llvm.func @{name}{suffix}(%frame: !llvm.ptr) -> !llvm.ptr {{")
    f.null = null = e.emit("{r} = llvm.mlir.zero : !llvm.ptr")
    f.zero, f.one = zero, one = e.i64(0), e.i64(1)  # in the entry block: they dominate all
    f.api = api = e.load("%frame", frame.api.offset, "!llvm.ptr")
    # 1. XLA's registration-time metadata query: a metadata extension on the call frame
    ext = e.load("%frame", frame.extension_start.offset, "!llvm.ptr")
    has_ext = e.icmp("ne", ext, null, "!llvm.ptr")
    e.do(f"llvm.cond_br {has_ext}, ^extension, ^frame")
    e.block("extension")
    ext_type = e.load(ext, abi.MetadataExtension.extension_base.offset
                      + abi.ExtensionBase.type.offset, "i32")
    is_md = e.icmp("eq", ext_type, e.i32(abi.METADATA_EXTENSION), "i32")
    e.do(f"llvm.cond_br {is_md}, ^metadata, ^frame")
    e.block("metadata")
    md = e.load(ext, abi.MetadataExtension.metadata.offset, "!llvm.ptr")
    md_size = e.load(md, abi.Metadata.struct_size.offset, "i64")
    fail_if(e.icmp("ult", md_size, e.i64(abi.struct_size(abi.Metadata, "traits"))),
            "XLA_FFI_Metadata is smaller than this handler's (FFI API 0.3)")
    ver = abi.Metadata.api_version.offset
    e.store(e.i64(abi.struct_size(abi.ApiVersion, "minor_version")), md,
            ver + abi.ApiVersion.struct_size.offset, "i64")
    e.store(null, md, ver + abi.ApiVersion.extension_start.offset, "!llvm.ptr")
    e.store(e.i32(abi.API_MAJOR), md, ver + abi.ApiVersion.major_version.offset, "i32")
    e.store(e.i32(abi.API_MINOR), md, ver + abi.ApiVersion.minor_version.offset, "i32")
    e.store(e.i32(0), md, abi.Metadata.traits.offset, "i32")
    e.do(f"llvm.return {null} : !llvm.ptr")
    # 2. a call: only the execute stage does anything
    e.block("frame")
    size = e.load("%frame", frame.struct_size.offset, "i64")
    fail_if(e.icmp("ult", size, e.i64(abi.struct_size(frame, "attrs"))),
            "XLA_FFI_CallFrame is smaller than this handler's (FFI API 0.3)")
    stage = e.load("%frame", frame.stage.offset, "i32")
    is_exec = e.icmp("eq", stage, e.i32(abi.EXECUTE), "i32")
    e.do(f"llvm.cond_br {is_exec}, ^execute, ^done")
    e.block("done")
    e.do(f"llvm.return {null} : !llvm.ptr")
    e.block("execute")


def handler_text(spec: Spec, run: Callable[[Frame], list[str]] = _run_on_cpu, *,
                 suffix: str = "_ffi", emitter: type[Emitter] = Emitter) -> str:
    """The LLVM dialect functions of ``spec``'s FFI handler, ``@<name><suffix>(call_frame) ->
    error`` and ``@<name><suffix>_address() -> ptr`` (its address), plus their helpers and
    message strings.  The handler answers the metadata query, returns at once outside the
    execute stage, decodes and checks the frame against ``spec``, then ``run(frame)`` emits the
    rest (by default: call the lowered kernel ``@<name>`` on the CPU; see the module
    docstring) with ``frame.e``, an ``emitter``, and returns the module-level functions it
    needs.  Every platform's handler is this one generator with another ``run``."""
    name = spec.name
    ins, outs = spec.operands(), spec.results()
    frame, args, rets = abi.CallFrame, abi.Args, abi.Rets
    buf = abi.Buffer
    e = emitter()
    f = Frame(spec, e)
    fail_if = f.fail_if
    open_handler(f, name, suffix)
    null, zero, one = f.null, f.zero, f.one
    # 3. decode the buffers
    buffers: list[str] = []
    for what, group, types_f, ptrs_f, ops in (
            ("argument", frame.args.offset, args.types.offset, args.args.offset, ins),
            ("result", frame.rets.offset, rets.types.offset, rets.rets.offset, outs)):
        n = e.load("%frame", group + args.size.offset, "i64")
        fail_if(e.icmp("ne", n, e.i64(len(ops))),
                f"expected {len(ops)} {what}{'s' if len(ops) != 1 else ''} "
                f"({', '.join(o.name for o in ops)})")
        types = e.load("%frame", group + types_f, "!llvm.ptr")
        ptrs = e.load("%frame", group + ptrs_f, "!llvm.ptr")
        for i, o in enumerate(ops):
            t = e.load(types, 4 * i, "i32")
            fail_if(e.icmp("ne", t, e.i32(abi.BUFFER), "i32"),
                    f"{what} {i} ({o.name}) must be a buffer")
            b = e.load(ptrs, 8 * i, "!llvm.ptr")
            dt = e.load(b, buf.dtype.offset, "i32")
            fail_if(e.icmp("ne", dt, e.i32(abi.DTYPES[o.dtype.name]), "i32"),
                    f"{what} {i} ({o.name}) must have dtype {o.dtype}")
            buffers.append(b)
    ops = ins + outs
    ref_i = spec.reference
    ref, ref_name = buffers[ref_i], ops[ref_i].name
    rank = e.load(ref, buf.rank.offset, "i64")
    dims = e.load(ref, buf.dims.offset, "!llvm.ptr")
    rule = spec.last_dim_rule
    if rule is not None or any(o.kind not in ("values", "scalar") for o in ops):
        fail_if(e.icmp("slt", rank, one), f"{ref_name} must have at least one dimension")
        lead = e.binary("sub", rank, one)
        last = e.emit(f"{{r}} = llvm.load {e.element(dims, lead, 'i64')} : !llvm.ptr -> i64")
    if rule is not None:
        fail_if(e.icmp("ne", e.binary("urem", last, e.i64(rule[0])), zero), rule[1])
    k = e.i64(spec.k)
    f.total = total = e.emit(f"{{r}} = llvm.call @__mxlower_ffi_product({dims}, {rank}) : "
                             "(!llvm.ptr, i64) -> i64")
    true = e.emit("{r} = llvm.mlir.constant(true) : i1")
    for i, (o, b) in enumerate(zip(ops, buffers)):
        if i == ref_i:
            continue
        what = f"{'argument' if i < len(ins) else 'result'} {i if i < len(ins) else i - len(ins)}"
        r = e.load(b, buf.rank.offset, "i64")
        msg = f"{what} ({o.name}) must have {_describe(o, spec, ref_name)}"
        if o.kind == "scalar":
            fail_if(e.icmp("ne", r, zero), msg)
            continue
        fail_if(e.icmp("ne", r, rank), msg)
        d = e.load(b, buf.dims.offset, "!llvm.ptr")
        lead_n = rank if o.kind == "values" else lead
        same = e.emit(f"{{r}} = llvm.call @__mxlower_ffi_same_dims({d}, {dims}, {lead_n}) : "
                      "(!llvm.ptr, !llvm.ptr, i64) -> i1")
        fail_if(e.emit(f"{{r}} = llvm.xor {same}, {true} : i1"), msg)
        if o.kind == "values":
            continue
        d_last = e.emit(f"{{r}} = llvm.load {e.element(d, lead, 'i64')} : !llvm.ptr -> i64")
        if o.kind == "packed6":
            want = e.binary("udiv", e.binary("mul", last, e.i64(3)), e.i64(4))
        else:
            want = e.binary("udiv", last, k)
        fail_if(e.icmp("ne", d_last, want), msg)
    # 4. the buffers as (data, size) and the unit count; the platform's run
    for o, b in zip(ops, buffers):
        data = e.load(b, buf.data.offset, "!llvm.ptr")
        if o.kind == "scalar":
            n = one
        elif o.kind == "scales":
            n = e.binary("udiv", total, k)
        elif o.kind == "packed6":
            n = e.binary("udiv", e.binary("mul", total, e.i64(3)), e.i64(4))
        elif o.dtype.name == "float4_e2m1fn":  # XLA packs f4 two per byte: ceil(n / 2)
            n = e.ceil_div(total, 2)
        else:
            n = total
        f.slots.append((data, n))
    f.blocks = e.ceil_div(total, k)
    extra = run(f)
    return close_handler(f, name, suffix, extra)


def close_handler(f: Frame, name: str, suffix: str, extra: list[str]) -> str:
    """Closes the handler :func:`open_handler` opened: its error blocks
    (``XLA_FFI_Error_Create(INVALID_ARGUMENT, message)``), ``extra`` (module-level functions
    it calls), ``@<name><suffix>_address()``, the message strings and helpers; returns the
    text."""
    e = f.e
    # 5. errors: XLA_FFI_Error_Create(INVALID_ARGUMENT, message)
    for mi, text in enumerate(f.messages):
        e.block(f"error{mi}")
        msg = e.emit(f"{{r}} = llvm.mlir.addressof @__mxlower_ffi_msg{mi} : !llvm.ptr")
        errc = f.codes.get(text, abi.ERROR_INVALID_ARGUMENT)
        e.do(f"llvm.return {f.error(msg, errc)} : !llvm.ptr")
    e.lines.append("  }")
    e.lines += extra
    e.lines.append(f"  llvm.func @{name}{suffix}_address() -> !llvm.ptr {{")
    e.lines.append(f"    %a = llvm.mlir.addressof @{name}{suffix} : !llvm.ptr")
    e.lines.append("    llvm.return %a : !llvm.ptr")
    e.lines.append("  }")
    strings = [f"  llvm.mlir.global internal constant @__mxlower_ffi_msg{i}({c_string(m)}) "
               "{addr_space = 0 : i32}" for i, m in enumerate(f.messages)]
    return "\n".join(strings + [_HELPERS] + e.lines) + "\n"


# ============================================================================ compile, register


class CompiledKernel:
    """One kernel JIT-compiled with its handler: the engine (kept alive), the handler's address,
    and how long building (MLIR) and compiling (LLVM) took, in seconds."""

    def __init__(self, spec: Spec, engine: Any, address: int, build_s: float,
                 compile_s: float):
        self.spec = spec
        self.engine = engine
        self.address = address
        self.build_s = build_s
        self.compile_s = compile_s
        self.handler = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(address)

    @property
    def name(self) -> str:
        return self.spec.name


def _narrow_floats_to_llvm(text: str) -> str:
    """``mxlower-lower-narrow-floats-to-llvm`` on a kernel module's text (the GPU kernels'
    bodies convert with narrow ``arith.truncf``/``extf``), through mxlower's pipeline adapter."""
    ctx = jaxlib.make_context()  # the adapter starts on jaxlib's stack
    with ctx:
        module = jaxlib.ir.Module.parse(text)
    return run_pipeline(module.operation, "builtin.module(mxlower-lower-narrow-floats-to-llvm)",
                        ctx=ctx).get_asm()


def lower_module(spec: Spec, *, target: str = "cpu") -> tuple[Any, Any]:
    """(context, module): ``spec``'s kernel lowered to the LLVM dialect with its handler.
    ``target="gpu-body"``: the GPU kernel's body in a CPU loop (its narrow conversions lowered
    by mxlower-lower-narrow-floats-to-llvm), to test the GPU kernels' logic on the CPU."""
    ir = upstream.module("ir")
    pm_mod = upstream.module("passmanager")
    ctx = upstream.context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        emit_kernel(spec, module, target=target)
        if target == "gpu-body":
            module = ir.Module.parse(_narrow_floats_to_llvm(str(module)))
        pm_mod.PassManager.parse(KERNEL_PIPELINE).run(module.operation)
        # the handler calls the lowered kernel: parse both as one module
        text = str(module).rstrip()
        assert text.endswith("}")
        module = ir.Module.parse(text[:-1] + externs(text) + handler_text(spec) + "}")
    return ctx, module


def externs(text: str) -> str:
    """Declarations of the C library functions the generated code calls that ``text`` (a
    module's text) does not declare yet."""
    return "".join(f"  {d}\n" for f, d in _EXTERNS.items() if f"llvm.func @{f}(" not in text)


def jit(ctx: Any, module: Any, address_fn: str, *, opt_level: int = 3,
        cache: bool = True) -> tuple[Any, int]:
    """(engine, address): ``module`` (LLVM dialect) compiled for this CPU -- loaded from
    :mod:`mxlower.execution.kernel_cache` (compiled into it on a miss) where that cache is on
    and can serve (and ``cache``), else JIT-compiled by upstream MLIR's ExecutionEngine -- and
    the pointer the generated ``@<address_fn>() -> !llvm.ptr`` returns (the engine's lookup
    finds only the packed ``_mlir_*`` wrappers, so a function's address comes out through
    one).  The engine (or library) must live as long as the address is used."""
    with ctx:
        cached = kernel_cache.load(module, address_fn, opt_level=opt_level) if cache else None
    if cached is not None:
        return cached
    ee_mod = upstream.module("execution_engine")
    with ctx:
        engine = ee_mod.ExecutionEngine(module, opt_level=opt_level,
                                        shared_libs=upstream.jit_libraries())
    getter = engine.raw_lookup(address_fn)
    if not getter:
        raise FFIError(f"compiled module has no function {address_fn}")
    out = ctypes.c_void_p()
    packed = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(out), ctypes.c_void_p))
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(getter)(packed)
    return engine, out.value


_lock = threading.Lock()
_compiled: dict[tuple[Spec, str], CompiledKernel] = {}
_registered: set[tuple[str, str]] = set()


def compile_kernel(spec: Spec, *, target: str = "cpu", opt_level: int = 3) -> CompiledKernel:
    """``spec``'s kernel and handler, compiled once per process and target (later calls return
    the same object).  ``target="gpu-body"`` compiles the GPU kernel's body for the CPU (see
    :func:`lower_module`)."""
    with _lock:
        key = (spec, target)
        if key in _compiled:
            return _compiled[key]
        t0 = time.perf_counter()
        try:
            ctx, module = lower_module(spec, target=target)
        except Exception as err:  # MLIRError from a pass or the verifier: a bug, say which
            raise FFIError(f"building kernel {spec.name} failed: {err}") from None
        t1 = time.perf_counter()
        engine, address = jit(ctx, module, f"{spec.name}_ffi_address", opt_level=opt_level)
        ck = CompiledKernel(spec, (ctx, module, engine), address,
                            t1 - t0, time.perf_counter() - t1)
        _compiled[key] = ck
        return ck


def register_handler(ck: CompiledKernel, platform: str) -> str:
    """Registers ``ck``'s handler as the XLA FFI target ``ck.name`` for ``platform`` ("cpu",
    "CUDA"), once per process; returns the name."""
    import jax  # optional, heavy

    with _lock:
        if (ck.name, platform) not in _registered:
            jax.ffi.register_ffi_target(ck.name, jax.ffi.pycapsule(ck.handler),
                                        platform=platform, api_version=1)
            _registered.add((ck.name, platform))
    return ck.name


def register(spec: Spec) -> str:
    """Compiles ``spec``'s kernel (once) and registers its handler as an XLA FFI target for the
    CPU (once); returns the target name (the same for every platform)."""
    return register_handler(compile_kernel(spec), "cpu")


#: platform -> the function registering a kernel's handler there (:func:`add_platform`)
_REGISTRARS: dict[str, Callable[[Spec], str]] = {"cpu": register}


def add_platform(platform: str, registrar: Callable[[Spec], str]) -> None:
    """Makes the JAX entry points' ``platform=`` accept ``platform``: ``registrar(spec)``
    registers ``spec``'s handler for it under ``spec.name`` (:mod:`mxlower.execution.ffi_cuda`
    adds "cuda")."""
    _REGISTRARS[platform] = registrar


def _register_for(spec: Spec, platform: str) -> str:
    if platform not in _REGISTRARS:
        raise ValueError(f"no kernels for platform {platform!r} (known: "
                         f"{', '.join(_REGISTRARS)}; import mxlower.execution.ffi_cuda for "
                         "cuda)")
    return _REGISTRARS[platform](spec)


# ============================================================================ JAX entry points


def _wide_name(dtype: Any, fn: str, arg: str) -> str:
    dt = np.dtype(dtype)
    if dt.name not in _WIDE:
        raise TypeError(f"{fn}: argument '{arg}' must be float32, bfloat16 or float16, got "
                        f"{dt}")
    return _WIDE[dt.name]


def _axis(axis: int, ndim: int, fn: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{fn}: axis {axis} is out of range for rank {ndim}")
    return axis % ndim


def _storage(spec: Spec, o: Operand, shape: Sequence[int]) -> Any:
    import jax  # optional, heavy

    shape = list(shape)
    if o.kind == "scales":
        shape[-1] //= spec.k
    elif o.kind == "packed6":
        shape[-1] = shape[-1] * 3 // 4
    return jax.ShapeDtypeStruct(tuple(shape), o.dtype)


def _vmap_method(global_scale: Any) -> str:
    """How ``jax.vmap`` maps a kernel call: the kernels take any leading dimensions, so one
    call on the batch; with a global scale (one scalar per call) a call per example."""
    return "broadcast_all" if global_scale is None else "sequential"


def quantize(x: Any, format: str = "mxfp8_e4m3", *, axis: int = -1,  # noqa: A002
             block_size: int | None = None, scale_mode: str = "floor",
             global_scale: Any | None = None, packed: bool = False,
             platform: str = "cpu") -> tuple[Any, Any]:
    """``(elements, scales)`` of ``x`` quantized along ``axis`` by mxlower's fused CPU kernel.

    The same arguments and results as :func:`mxlower.reference.quantize` (docs/semantics.md section 3, 4),
    as JAX arrays (see the module docstring for the storage dtypes); ``packed=True`` packs f6
    elements four per three bytes along the blocked axis.  Usable inside ``jax.jit`` and
    ``jax.vmap``.  ``platform``: where the call will run, "cpu" or (with
    :mod:`mxlower.execution.ffi_cuda` imported) "cuda"."""
    import jax  # optional, heavy
    import jax.numpy as jnp  # optional, heavy

    x = jnp.asarray(x)
    if x.ndim == 0:
        raise ValueError("quantize: argument 'x' must have at least one dimension")
    ax = _axis(axis, x.ndim, "quantize")
    fmt = FORMATS.get(format)
    if fmt is None:
        raise ValueError(f"quantize: unknown MX format {format!r} (known: {', '.join(FORMATS)})")
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"quantize: unknown scale_mode {scale_mode!r} (known: "
                         f"{', '.join(SCALE_MODES)})")
    spec = KernelSpec("quantize", format, _wide_name(x.dtype, "quantize", "x"),
                      "floor" if fmt.is_nvfp4 else scale_mode, block_size, packed,
                      global_scale is not None)
    if x.shape[ax] % spec.k:
        raise ValueError(f"quantize: block size {spec.k} does not divide dimension {ax} of "
                         f"'x' (size {x.shape[ax]})")
    xt = jnp.moveaxis(x, ax, -1)
    operands = [xt]
    if global_scale is not None:
        operands.append(jnp.asarray(global_scale, jnp.float32).reshape(()))
    target = _register_for(spec, platform)
    outs = [_storage(spec, o, xt.shape) for o in spec.results()]
    q, s = jax.ffi.ffi_call(target, outs, vmap_method=_vmap_method(global_scale))(*operands)
    return jnp.moveaxis(q, -1, ax), jnp.moveaxis(s, -1, ax)


def dequantize(elements: Any, scales: Any, format: str = "mxfp8_e4m3", *,  # noqa: A002
               axis: int = -1, block_size: int | None = None, dtype: Any = np.float32,
               global_scale: Any | None = None, packed: bool = False,
               platform: str = "cpu") -> Any:
    """``decode(element) * decode(scale)`` (nvfp4: times ``global_scale``) rounded to ``dtype``
    by mxlower's fused CPU kernel (docs/semantics.md section 5); the inverse of :func:`quantize`'s
    storage."""
    import jax  # optional, heavy
    import jax.numpy as jnp  # optional, heavy

    fmt = FORMATS.get(format)
    if fmt is None:
        raise ValueError(f"dequantize: unknown MX format {format!r} (known: "
                         f"{', '.join(FORMATS)})")
    e, s = jnp.asarray(elements), jnp.asarray(scales)
    if e.ndim == 0:
        raise ValueError("dequantize: argument 'elements' must have at least one dimension")
    ax = _axis(axis, e.ndim, "dequantize")
    if s.ndim != e.ndim:
        raise ValueError(f"dequantize: 'elements' has rank {e.ndim} but 'scales' rank {s.ndim}")
    n = e.shape[ax] * 4 // 3 if packed else e.shape[ax]
    if block_size is None and s.shape[ax]:  # inferred from the shapes, as the reference does
        if n % s.shape[ax]:
            raise ValueError(f"dequantize: {s.shape[ax]} scales do not block {n} elements "
                             f"along axis {ax}")
        block_size = n // s.shape[ax]
    spec = KernelSpec("dequantize", format, _wide_name(dtype, "dequantize", "dtype"),
                      block_size=block_size, packed=packed,
                      global_scale=global_scale is not None)
    et, st = jnp.moveaxis(e, ax, -1), jnp.moveaxis(s, ax, -1)
    shape = [*et.shape[:-1], n]
    operands = [et, st]
    if global_scale is not None:
        operands.append(jnp.asarray(global_scale, jnp.float32).reshape(()))
    target = _register_for(spec, platform)
    (out,) = [_storage(spec, o, shape) for o in spec.results()]
    y = jax.ffi.ffi_call(target, out, vmap_method=_vmap_method(global_scale))(*operands)
    return jnp.moveaxis(y, -1, ax)


def float_type_name(t: Any, fn: str, arg: str) -> str:
    """The MLIR spelling of a float type given by name ("f8E4M3FN", "float8_e4m3fn") or dtype;
    ValueError naming the argument otherwise."""
    try:
        st = types.scalar(t) if isinstance(t, str) else types.of_dtype(np.dtype(t))
    except (KeyError, TypeError):
        st = None
    if st is None or st.kind not in ("narrow", "wide") or st.mlir == "f64":
        raise ValueError(f"{fn}: argument '{arg}' must be f32, bf16, f16 or a narrow float "
                         f"type, got {t!r}")
    return st.mlir


def convert_spec(x_dtype: Any, dtype: Any, *, source: str | None = None,
                 packed: bool = False, fn: str = "convert") -> ConvertSpec:
    """The kernel converting an array of ``x_dtype`` (uint8 codes of the narrow type
    ``source``, or a float dtype) to ``dtype``; ValueError/TypeError naming the argument."""
    xd = np.dtype(x_dtype)
    if source is not None:
        src = float_type_name(source, fn, "source")
        if not types.is_narrow_float(src) or xd != np.dtype(np.uint8):
            raise ValueError(f"{fn}: 'source' names the narrow type of uint8 codes; got "
                             f"source={source!r} for an array of {xd}")
    elif xd == np.dtype(np.uint8):
        raise ValueError(f"{fn}: an array of uint8 codes needs 'source' (the narrow type, e.g. "
                         "'f6E2M3FN')")
    else:
        try:
            src = float_type_name(xd, fn, "x")
        except ValueError:
            raise TypeError(f"{fn}: argument 'x' must be float32, bfloat16, float16, a narrow "
                            f"float or uint8 codes, got {xd}") from None
    dst = float_type_name(dtype, fn, "dtype")
    try:
        spec = ConvertSpec(src, dst, packed)
    except ValueError as err:
        raise ValueError(f"{fn}: {err}") from None
    want = np.dtype(spec.operands()[0].dtype)
    if source is not None and want != xd:
        raise ValueError(f"{fn}: 'source' is for the types stored as uint8 codes (the f6 "
                         f"types); {src} has its own dtype: pass 'x' as {want.name} (e.g. "
                         "jax.lax.bitcast_convert_type(codes, that dtype)) without 'source'")
    return spec


def convert(x: Any, dtype: Any, *, source: str | None = None, packed: bool = False,
            platform: str = "cpu") -> Any:
    """``x`` converted to ``dtype`` by mxlower's fused CPU kernel (docs/semantics.md section 2,
    bit-exact with :func:`mxlower.reference.convert`): f32/bf16/f16 to a narrow float type or
    back.  Narrow values are stored as :class:`mxlower.jax.MXArray` stores elements: f8 and f4
    in their JAX dtypes, the f6 types as ``uint8`` codes (one per byte, or with ``packed=True``
    four per three bytes along the last axis, whose size must then be a multiple of 4 codes).
    ``source`` names the narrow type of an input of uint8 codes.  Usable inside ``jax.jit``
    and ``jax.vmap``; ``platform`` as for :func:`quantize`."""
    import jax  # optional, heavy
    import jax.numpy as jnp  # optional, heavy

    x = jnp.asarray(x)
    spec = convert_spec(x.dtype, dtype, source=source, packed=packed)
    shape = list(x.shape)
    if spec.packed:
        if not shape:
            raise ValueError("convert: packed f6 codes need at least one dimension")
        if spec.truncates:
            if shape[-1] % 4:
                raise ValueError(f"convert: packing f6 codes needs a last dimension divisible "
                                 f"by 4, got {shape[-1]}")
            shape[-1] = shape[-1] * 3 // 4
        else:
            if shape[-1] % 3:
                raise ValueError(f"convert: packed f6 codes need a last dimension divisible by "
                                 f"3, got {shape[-1]}")
            shape[-1] = shape[-1] * 4 // 3
    (o,) = spec.results()
    target = _register_for(spec, platform)
    return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(tuple(shape), o.dtype),
                            vmap_method="broadcast_all")(x)


def cast_layout(shape: Sequence[int], scale: str | None) -> tuple[int | None, bool,
                                                                   str | None, int | None]:
    """How :func:`cast` lays an array of ``shape`` out for the cast kernels, whose tiles run
    along the last dimension: ``(axis, flatten, scale, length)`` -- the dimension moved last
    (a tile or channel along another one; None: none moved), whether the array is flattened
    (a tensor scale: one tile of every value), and the :class:`CastSpec`'s ``scale`` and
    ``length`` (ValueError where ``scale`` is no spec)."""
    if scale is None:
        return None, False, None, None
    s = numbers.scale(scale)
    rank = len(shape)
    if s.kind == "tensor":
        return None, True, s.code, int(np.prod(shape, dtype=np.int64))
    if s.kind not in ("tile", "channel") or not rank:
        return None, False, s.code, None  # CastSpec says what is wrong
    ax = _axis(s.dims[0], rank, "cast")
    last = dataclasses.replace(s, dims=(-1,)).code
    return (None if ax == rank - 1 else ax), False, last, (
        int(shape[ax]) if s.kind == "channel" else None)


def cast(x: Any, number: str, scale: str | None = None, *, roundmode: str = "even",
         scalemode: str = "max", rbits: Any | None = None, tensor_scale: Any | None = None,
         platform: str = "cpu") -> Any:
    """The virtual cast of ``x`` (float32, bfloat16 or float16) to ``number`` [with the
    scale ``scale``] by mxlower's fused CPU kernel: docs/semantics.md section 10.4,
    bit-exact with :func:`mxlower.reference.cast` (same arguments; ``rbits``: uint32 of
    ``x``'s shape, for ``roundmode="stochastic"``; ``tensor_scale``: the finite non-zero f32
    g of a two-level scale, ``..._gf32``, required there and refused otherwise).  The kernels
    cover what
    :class:`~mxlower.lowering.mx_kernels.CastSpec` says (unscaled casts; exponent and float
    scales in 1D tiles, channels and tensors): a tile or channel along another dimension is moved last (a
    transpose each way), a tensor scale's array flattened (see :func:`cast_layout`).  Other
    datatypes raise ValueError (:func:`mxlower.jax.cast` lowers them to StableHLO instead).
    Usable inside ``jax.jit`` and ``jax.vmap`` (with a tensor scale, a call per example)."""
    import jax  # optional, heavy
    import jax.numpy as jnp  # optional, heavy

    x = jnp.asarray(x)
    wide = _wide_name(x.dtype, "cast", "x")
    if (roundmode == "stochastic") != (rbits is not None):
        raise ValueError("cast: roundmode='stochastic' needs 'rbits' (uint32, one per value), "
                         "and only it takes them")
    try:
        ax, flat, kscale, length = cast_layout(x.shape, scale)
        spec = CastSpec(number, kscale, wide, roundmode, scalemode, length)
    except ValueError as err:
        raise ValueError(f"cast: {err}") from None
    if spec.two_level != (tensor_scale is not None):
        raise ValueError(f"cast: argument 'tensor_scale' (the f32 g of a two-level scale, "
                         f"'..._gf32') is {'missing' if spec.two_level else 'given'} for "
                         f"scale {spec.scale}")
    operands = [x] if rbits is None else [x, jnp.asarray(rbits)]
    if ax is not None:
        operands = [jnp.moveaxis(v, ax, -1) for v in operands]
    elif flat:
        operands = [v.reshape(-1) for v in operands]
    if spec.scale is not None and operands[0].shape[-1] % spec.k:
        raise ValueError(f"cast: tile size {spec.k} does not divide dimension "
                         f"{x.ndim - 1 if ax is None else ax} of 'x' "
                         f"(size {operands[0].shape[-1]})")
    if tensor_scale is not None:
        operands.append(jnp.asarray(tensor_scale, jnp.float32).reshape(()))
    target = _register_for(spec, platform)
    y = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(operands[0].shape, x.dtype),
                         vmap_method="sequential" if flat or tensor_scale is not None
                         else "broadcast_all")(*operands)
    if ax is not None:
        return jnp.moveaxis(y, -1, ax)
    return y.reshape(x.shape) if flat else y


# ============================================================================ command line


def spec_arguments(ap: argparse.ArgumentParser) -> None:
    """The command-line arguments naming a kernel (shared with :mod:`ffi_cuda`'s)."""
    ap.add_argument("op", choices=("quantize", "dequantize", "convert", "cast"))
    ap.add_argument("format", help=f"one of {', '.join(FORMATS)}; for convert, the source "
                    "type (f32, bf16, f16 or a narrow float type); for cast, the number spec "
                    "(e2m1fn, int8, e4m3b8fnuz, ...)")
    ap.add_argument("--to", default=None, help="convert: the destination type")
    ap.add_argument("--wide", default="f32", help="input (quantize, cast) or output type: f32, "
                    "bf16, f16 (default f32)")
    ap.add_argument("--scale-mode", default=None,
                    help=f"quantize: one of {', '.join(SCALE_MODES)} (default floor); cast: "
                    f"one of {', '.join(numbers.SCALE_MODES)} (default max)")
    ap.add_argument("--scale", default=None, help="cast: the scale spec (e8m0_t32, ...)")
    ap.add_argument("--length", type=int, default=None,
                    help="cast: the tile length of a channel or tensor scale")
    ap.add_argument("--roundmode", default="even",
                    help=f"cast: one of {', '.join(numbers.ROUND_MODES)} (default even)")
    ap.add_argument("--block-size", type=int, default=None)
    ap.add_argument("--packed", action="store_true", help="f6 elements packed (mx.pack layout)")
    ap.add_argument("--global-scale", action="store_true", help="nvfp4's f32 global scale")


def spec_from_arguments(a: argparse.Namespace) -> Spec:
    """The kernel :func:`spec_arguments` name (ValueError saying what is wrong)."""
    if a.op == "convert":
        if a.to is None:
            raise ValueError("convert needs --to (the destination type)")
        return ConvertSpec(a.format, a.to, a.packed)
    if a.op == "cast":
        return CastSpec(a.format, a.scale, a.wide, a.roundmode, a.scale_mode or "max",
                        a.length)
    return KernelSpec(a.op, a.format, a.wide, a.scale_mode or "floor", a.block_size, a.packed,
                      a.global_scale)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mxlower.execution.ffi OP FORMAT [options]``: print a kernel's IR (the loops,
    or the LLVM dialect module with its FFI handler), e.g. for FileCheck tests."""
    ap = argparse.ArgumentParser(prog="python -m mxlower.execution.ffi",
                                 description="print the IR of one of mxlower's FFI kernels")
    spec_arguments(ap)
    ap.add_argument("--stage", choices=("loops", "llvm"), default="loops",
                    help="loops: the kernel as built; llvm: lowered, with its FFI handler")
    a = ap.parse_args(argv)
    try:
        spec = spec_from_arguments(a)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if not available():
        print("error: upstream MLIR (the xtc wheels) is not installed", file=sys.stderr)
        return 1
    if a.stage == "loops":
        print(build(spec), end="")
    else:
        _, module = lower_module(spec)
        print(module)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
