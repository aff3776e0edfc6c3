"""mxlower's fused MX kernels on NVIDIA GPUs, as XLA FFI custom calls for the CUDA platform.

::

    from mxlower.execution import ffi, ffi_cuda
    from mxlower.lowering.mx_kernels import KernelSpec

    spec = KernelSpec("quantize", "mxfp4_e2m1", scale_mode="rceil")
    ffi_cuda.kernel_ptx(spec, "sm_100a")      # the kernel's PTX (hardware cvt instructions)
    ffi_cuda.register(spec)                   # the CUDA handler, registered with JAX
    q, s = jax.jit(lambda x: ffi.quantize(x, "mxfp4_e2m1", scale_mode="rceil",
                                          platform="cuda"))(x_on_gpu)

How a call gets to the GPU
--------------------------
1. :mod:`mxlower.lowering.mx_kernels` builds the kernel as a ``gpu.func`` (``target="gpu"``:
   the CPU kernel's recipe, one block or unit per thread; its narrow-float conversions are
   ``arith.truncf``/``extf`` on the narrow types);
2. ``mxlower-gpu-to-nvvm{chip=... bare-ptr=false}`` lowers it to LLVM + NVVM
   (``mxlower-lower-narrow-floats-to-nvvm`` picks the chip's ``cvt`` instructions where they
   match docs/semantics.md section 2); xtc's ``llc`` writes PTX and CUDA's ``ptxas`` assembles
   it.  :func:`images` makes one image per chip of :data:`IMAGE_CHIPS` (a cubin when ptxas is
   found, else PTX) and a portable PTX image for :data:`PORTABLE_CHIP` without hardware cvts,
   which the driver JIT-compiles for any other GPU;
3. :func:`handler_text` generates the host handler in the LLVM dialect with the CPU handler's
   generator (:func:`mxlower.execution.ffi.handler_text`: the same metadata answer, frame
   decoding, checks and ``INVALID_ARGUMENT`` errors), whose execution part gets XLA's stream
   (``XLA_FFI_Stream_Get``), loads the CUDA driver at run time (``dlopen`` of
   ``$MXLOWER_CUDA_DRIVER`` or ``libcuda.so.1``, ``dlsym`` of ``cuInit``, ``cuStreamGetCtx``,
   ``cuCtxPushCurrent_v2``, ``cuCtxPopCurrent_v2``, ``cuCtxGetDevice``,
   ``cuDeviceGetAttribute``, ``cuModuleLoadData``, ``cuModuleGetFunction``,
   ``cuLaunchKernel``, ``cuGetErrorString``; no link-time dependency), loads the image for
   the stream's device (by compute capability) once per CUDA context under a lock, and
   launches ``ceil(units / 128)`` blocks of 128 threads on the stream, each buffer passed as
   its memref descriptor ``(data, data, 0, size, 1)`` and the unit range ``(0, units)``.
   Driver failures (no driver, no image for the device, a failed launch) come back through
   ``XLA_FFI_Error_Create`` with the driver's message: ``FAILED_PRECONDITION`` when nothing
   can run here, ``INTERNAL`` when a driver call fails;
4. upstream MLIR's ExecutionEngine JIT-compiles the handler for the host, once per process
   and kernel (:func:`compile_handler`), and :func:`register` registers it with
   ``jax.ffi.register_ffi_target(name, ..., platform="CUDA")`` under the CPU kernel's name, so
   one ``jax.ffi.ffi_call`` serves both platforms.

Without a GPU the handler is checked through its C ABI against stand-ins of XLA's API and of
the driver (test/python/test_gpu_kernels.py); ``python -m mxlower.execution.ffi_cuda`` prints
a kernel's ``gpu.func``, its PTX or the handler module (see :func:`main`).  Running the kernels
on a GPU: see the docstring of test/python/test_gpu_kernels.py (one command).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import functools
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from mxlower.bindings import jaxlib, upstream
import mxlower.execution.ffi as ffi
import mxlower.execution.ffi_abi as abi
import mxlower.execution.ptx as ptx
from mxlower.execution.ffi import CompiledKernel, Emitter, FFIError, Frame, Spec
from mxlower.lowering import mx_kernels
from mxlower.lowering.nvvm_model import parse_chip
from mxlower.pipeline.manager import run_pipeline

__all__ = [
    "DRIVER_ENV",
    "DRIVER_FUNCTIONS",
    "IMAGE_CHIPS",
    "PORTABLE_CHIP",
    "THREADS",
    "Image",
    "available",
    "compile_handler",
    "handler_text",
    "images",
    "kernel_llvm",
    "kernel_ptx",
    "register",
    "shared_object",
]

#: chips an image is assembled for (the GPUs tasks may be lent: H100/H200 are sm_90a, B200
#: sm_100a); each runs only on its own compute capability
IMAGE_CHIPS = ("sm_90a", "sm_100a")
#: the chip of the portable PTX image (no hardware cvt), JIT-compiled by the driver for others
PORTABLE_CHIP = "sm_80"
#: threads per block of a launch (one block or unit of values per thread)
THREADS = mx_kernels.GPU_THREADS
#: the byte alignment the handler requires of every buffer (the kernels' vector accesses)
ALIGNMENT = 16
#: the environment variable naming the CUDA driver library to load instead of libcuda.so.1
DRIVER_ENV = "MXLOWER_CUDA_DRIVER"
_DEFAULT_DRIVER = "libcuda.so.1"
#: the driver functions the handler calls, with their LLVM signatures
DRIVER_FUNCTIONS = {
    "cuInit": "(i32) -> i32",
    "cuStreamGetCtx": "(!llvm.ptr, !llvm.ptr) -> i32",
    "cuCtxPushCurrent_v2": "(!llvm.ptr) -> i32",
    "cuCtxPopCurrent_v2": "(!llvm.ptr) -> i32",
    "cuCtxGetDevice": "(!llvm.ptr) -> i32",
    "cuDeviceGetAttribute": "(!llvm.ptr, i32, i32) -> i32",
    "cuModuleLoadData": "(!llvm.ptr, !llvm.ptr) -> i32",
    "cuModuleGetFunction": "(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32",
    "cuLaunchKernel": "(!llvm.ptr, i32, i32, i32, i32, i32, i32, i32, !llvm.ptr, !llvm.ptr, "
                      "!llvm.ptr) -> i32",
    "cuGetErrorString": "(i32, !llvm.ptr) -> i32",
}
_FN = {name: i for i, name in enumerate(DRIVER_FUNCTIONS)}
#: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
_CC_MAJOR, _CC_MINOR = 75, 76
#: CUDA contexts whose loaded kernel a handler remembers
_CONTEXTS = 16
_MSG = 512  # bytes of an error message
_RTLD_NOW = 2
_ERROR_FAILED_PRECONDITION, _ERROR_INTERNAL = abi.ERROR_FAILED_PRECONDITION, abi.ERROR_INTERNAL

_EXTERNS = {
    "dlopen": "llvm.func @dlopen(!llvm.ptr, i32) -> !llvm.ptr",
    "dlsym": "llvm.func @dlsym(!llvm.ptr, !llvm.ptr) -> !llvm.ptr",
    "dlerror": "llvm.func @dlerror() -> !llvm.ptr",
    "getenv": "llvm.func @getenv(!llvm.ptr) -> !llvm.ptr",
    "snprintf": "llvm.func @snprintf(!llvm.ptr, i64, !llvm.ptr, ...) -> i32",
    "sched_yield": "llvm.func @sched_yield() -> i32",
}


def available() -> bool:
    """Whether GPU kernels can be built here (upstream MLIR and xtc's llc are installed)."""
    return upstream.available() and upstream.tool("llc") is not None


# ============================================================================ kernel images


@dataclasses.dataclass(frozen=True)
class Image:
    """One loadable image of a kernel: for compute capability ``cc`` (e.g. 90; None: any GPU,
    the driver JIT-compiles the PTX), a cubin or NUL-free PTX text."""

    chip: str
    cc: int | None
    kind: str  #: "cubin" or "ptx"
    data: bytes


def kernel_llvm(spec: Spec, chip: str, *, hardware: bool = True) -> str:
    """``spec``'s ``gpu.func`` lowered by ``mxlower-gpu-to-nvvm`` for ``chip`` (LLVM + NVVM
    dialects; memrefs as descriptors)."""
    ir = upstream.module("ir")
    with upstream.context(), ir.Location.unknown():
        module = ir.Module.create()
        mx_kernels.emit_kernel(spec, module, target="gpu")
    # the pipeline runs on upstream MLIR only: the adapter hands the upstream module over to its
    # own upstream context as text (never through jaxlib's MLIR, whose parser may be newer than
    # upstream 22's printer: jaxlib 0.12 rejects `{alignment = ...}` in an op's attr-dict)
    ctx = jaxlib.make_context()  # the pipeline is parsed against jaxlib's registry
    hw = "true" if hardware else "false"
    out = run_pipeline(module.operation, f"builtin.module(mxlower-gpu-to-nvvm{{chip={chip} "
                       f"hardware={hw} bare-ptr=false}})", ctx=ctx)
    return out.get_asm()


@functools.cache
def kernel_ptx(spec: Spec, chip: str, *, hardware: bool = True) -> str:
    """``spec``'s kernel as PTX for ``chip`` (xtc's llc)."""
    return ptx.compile_ptx(ptx.translate_to_llvmir(ptx.device_module(
        kernel_llvm(spec, chip, hardware=hardware))), chip)


@functools.cache
def images(spec: Spec) -> tuple[Image, ...]:
    """The images a handler embeds: one per chip of :data:`IMAGE_CHIPS` (hardware cvts; a
    cubin when ptxas is found, else PTX) and the portable PTX for :data:`PORTABLE_CHIP`."""
    out = []
    for chip in IMAGE_CHIPS:
        asm = kernel_ptx(spec, chip)
        sm, _ = parse_chip(chip)
        if ptx.ptxas_path() is not None:
            out.append(Image(chip, sm, "cubin", ptx.assemble(asm, chip)))
        else:
            out.append(Image(chip, sm, "ptx", asm.encode()))
    out.append(Image(PORTABLE_CHIP, None, "ptx",
                     kernel_ptx(spec, PORTABLE_CHIP, hardware=False).encode()))
    return tuple(out)


# ============================================================================ the handler


def _globals(spec: Spec, imgs: Sequence[Image]) -> list[str]:
    """The handler module's globals: images, strings, the driver table, lock and context
    table (mutable, zero-initialized)."""
    n = len(DRIVER_FUNCTIONS)
    lines = [f"  llvm.mlir.global internal constant @__mxlower_cuda_image{i}"
             f"({ffi.c_string(img.data)}) {{addr_space = 0 : i32}}"
             for i, img in enumerate(imgs)]
    built = ", ".join(img.chip for img in imgs)
    strings = {
        "kernel": spec.name,
        "default_driver": _DEFAULT_DRIVER,
        "driver_env": DRIVER_ENV,
        "unknown": "unknown CUDA error",
        "no_driver": "%s: cannot load the CUDA driver (%s): %s",
        "no_symbol": "%s: the CUDA driver (%s) has no %s",
        "failed": "%s: %s failed: %s (CUDA error %d)",
        "no_image": f"%s: no kernel image for compute capability %d.%d (built: {built})",
        "too_many": f"%s: more than {_CONTEXTS} CUDA contexts",
        "grid": "%s: %lld units do not fit in one grid",
        **{f"fn_{name}": name for name in DRIVER_FUNCTIONS},
    }
    lines += [f"  llvm.mlir.global internal constant @__mxlower_cuda_s_{k}({ffi.c_string(v)}) "
              "{addr_space = 0 : i32}" for k, v in strings.items()]
    for name, t in (("fns", f"!llvm.array<{n} x ptr>"),
                    ("table", f"!llvm.array<{2 * _CONTEXTS} x ptr>"),
                    ("used", "i64"), ("lock", "i32"), ("ready", "i32")):
        lines += [f"  llvm.mlir.global internal @__mxlower_cuda_{name}() {{addr_space = 0 : i32}}"
                  f" : {t} {{", f"    %z = llvm.mlir.zero : {t}", f"    llvm.return %z : {t}",
                  "  }"]
    return lines


class _Code(Emitter):
    """The emitter with the handler module's own vocabulary."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    def check(self, r: str, what: str, msg: str, on_fail: str) -> None:
        """When the CUresult ``r`` of driver function ``what`` is not 0: its message into
        ``msg``, then to block ``on_fail``."""
        self.checks += 1
        bad, ok = f"cu_failed{self.checks}", f"cu_ok{self.checks}"
        self.do(f"llvm.cond_br {self.icmp('ne', r, self.i32(0), 'i32')}, ^{bad}, ^{ok}")
        self.block(bad)
        _describe_failure(self, msg, what, r)
        self.do(f"llvm.br ^{on_fail}")
        self.block(ok)

    def s(self, key: str) -> str:
        return self.emit(f"{{r}} = llvm.mlir.addressof @__mxlower_cuda_s_{key} : !llvm.ptr")

    def g(self, name: str) -> str:
        return self.emit(f"{{r}} = llvm.mlir.addressof @__mxlower_cuda_{name} : !llvm.ptr")

    def fn(self, name: str) -> str:
        """The driver function pointer ``name`` (loaded by ``__mxlower_cuda_load``)."""
        return self.load(self.g("fns"), 8 * _FN[name], "!llvm.ptr")

    def cu(self, name: str, *args: str) -> str:
        """Calls driver function ``name``; returns its CUresult (i32)."""
        sig = DRIVER_FUNCTIONS[name]
        ins = sig[1:sig.index(")")]
        return self.emit(f"{{r}} = llvm.call {self.fn(name)}({', '.join(args)}) : !llvm.ptr, "
                         f"{'(' + ins + ') -> i32'}")

    def slot(self, t: str = "!llvm.ptr") -> str:
        return self.emit(f"{{r}} = llvm.alloca {self.i64(1)} x {t} : (i64) -> !llvm.ptr")

    def printf(self, buf: str, fmt: str, *args: tuple[str, str]) -> None:
        """``snprintf(buf, 512, fmt, args...)``; ``args`` as (value, type)."""
        vals = ", ".join([buf, self.i64(_MSG), self.s(fmt)] + [v for v, _ in args])
        types = ", ".join(["!llvm.ptr", "i64", "!llvm.ptr"] + [t for _, t in args])
        self.emit(f"{{r}} = llvm.call @snprintf({vals}) vararg(!llvm.func<i32 (ptr, i64, ptr, "
                  f"...)>) : ({types}) -> i32")


def _lock_text() -> list[str]:
    """``__mxlower_cuda_acquire`` / ``_release``: a spin lock (atomic exchange, yielding)."""
    e = _Code()
    e.lines.append("  llvm.func internal @__mxlower_cuda_acquire() {")
    e.do("llvm.br ^try")
    e.block("try")
    old = e.emit(f"{{r}} = llvm.atomicrmw xchg {e.g('lock')}, {e.i32(1)} acquire : !llvm.ptr, "
                 "i32")
    e.do(f"llvm.cond_br {e.icmp('eq', old, e.i32(0), 'i32')}, ^held, ^wait")
    e.block("wait")
    e.emit("{r} = llvm.call @sched_yield() : () -> i32")
    e.do("llvm.br ^try")
    e.block("held")
    e.do("llvm.return")
    e.lines.append("  }")
    e.lines.append("  llvm.func internal @__mxlower_cuda_release() {")
    e.do(f"llvm.store {e.i32(0)}, {e.g('lock')} atomic release {{alignment = 4 : i64}} : i32, "
         "!llvm.ptr")
    e.do("llvm.return")
    e.lines.append("  }")
    return e.lines


def _load_text() -> list[str]:
    """``__mxlower_cuda_load(msg) -> i1`` (under the lock): the driver's functions, once; on
    failure a message in ``msg`` and false (a later call tries again)."""
    e = _Code()
    e.lines.append("  llvm.func internal @__mxlower_cuda_load(%msg: !llvm.ptr) -> i1 {")
    true, false = (e.emit(f"{{r}} = llvm.mlir.constant({v}) : i1") for v in ("true", "false"))
    null = e.emit("{r} = llvm.mlir.zero : !llvm.ptr")
    fns = e.g("fns")
    ready = e.load(e.g("ready"), 0, "i32")
    e.do(f"llvm.cond_br {e.icmp('ne', ready, e.i32(0), 'i32')}, ^done, ^open")
    e.block("done")
    e.do(f"llvm.return {true} : i1")
    e.block("open")
    env = e.emit(f"{{r}} = llvm.call @getenv({e.s('driver_env')}) : (!llvm.ptr) -> !llvm.ptr")
    no_env = e.icmp("eq", env, null, "!llvm.ptr")
    name = e.emit(f"{{r}} = llvm.select {no_env}, {e.s('default_driver')}, {env} : i1, "
                  "!llvm.ptr")
    lib = e.emit(f"{{r}} = llvm.call @dlopen({name}, {e.i32(_RTLD_NOW)}) : "
                 "(!llvm.ptr, i32) -> !llvm.ptr")
    e.do(f"llvm.cond_br {e.icmp('eq', lib, null, '!llvm.ptr')}, ^no_driver, ^sym0")
    e.block("no_driver")
    why = e.emit("{r} = llvm.call @dlerror() : () -> !llvm.ptr")
    e.printf("%msg", "no_driver", (e.s("kernel"), "!llvm.ptr"), (name, "!llvm.ptr"),
             (why, "!llvm.ptr"))
    e.do(f"llvm.return {false} : i1")
    for i, fname in enumerate(DRIVER_FUNCTIONS):
        e.block(f"sym{i}")
        p = e.emit(f"{{r}} = llvm.call @dlsym({lib}, {e.s('fn_' + fname)}) : "
                   "(!llvm.ptr, !llvm.ptr) -> !llvm.ptr")
        e.do(f"llvm.cond_br {e.icmp('eq', p, null, '!llvm.ptr')}, ^no_sym{i}, ^store{i}")
        e.block(f"no_sym{i}")
        e.printf("%msg", "no_symbol", (e.s("kernel"), "!llvm.ptr"), (name, "!llvm.ptr"),
                 (e.s("fn_" + fname), "!llvm.ptr"))
        e.do(f"llvm.return {false} : i1")
        e.block(f"store{i}")
        e.store(p, fns, 8 * i, "!llvm.ptr")
        e.do(f"llvm.br ^sym{i + 1}")
    e.block(f"sym{len(DRIVER_FUNCTIONS)}")
    e.check(e.cu("cuInit", e.i32(0)), "cuInit", "%msg", "init_failed")
    e.store(e.i32(1), e.g("ready"), 0, "i32")
    e.do(f"llvm.return {true} : i1")
    e.block("init_failed")
    e.do(f"llvm.return {false} : i1")
    e.lines.append("  }")
    return e.lines


def _describe_failure(e: _Code, msg: str, what: str, result: str) -> None:
    """``msg`` = "<kernel>: <what> failed: <cuGetErrorString> (CUDA error <result>)"."""
    text = e.slot()
    e.store(e.s("unknown"), text, 0, "!llvm.ptr")
    e.cu("cuGetErrorString", result, text)
    e.printf(msg, "failed", (e.s("kernel"), "!llvm.ptr"), (e.s("fn_" + what), "!llvm.ptr"),
             (e.load(text, 0, "!llvm.ptr"), "!llvm.ptr"), (result, "i32"))


def _function_text(imgs: Sequence[Image]) -> list[str]:
    """``__mxlower_cuda_function(stream, ctx_out, errc_out, msg) -> CUfunction``: the kernel
    loaded in the stream's context (once per context, under the lock), or null with an error
    code and message."""
    e = _Code()
    e.lines.append("  llvm.func internal @__mxlower_cuda_function(%stream: !llvm.ptr, "
                   "%ctx_out: !llvm.ptr, %errc: !llvm.ptr, %msg: !llvm.ptr) -> !llvm.ptr {")
    null = e.emit("{r} = llvm.mlir.zero : !llvm.ptr")
    zero, one = e.i64(0), e.i64(1)
    e.store(e.i32(_ERROR_INTERNAL), "%errc", 0, "i32")
    e.do("llvm.call @__mxlower_cuda_acquire() : () -> ()")
    loaded = e.emit("{r} = llvm.call @__mxlower_cuda_load(%msg) : (!llvm.ptr) -> i1")
    e.do(f"llvm.cond_br {loaded}, ^context, ^no_driver")
    e.block("no_driver")
    e.store(e.i32(_ERROR_FAILED_PRECONDITION), "%errc", 0, "i32")
    e.do("llvm.br ^fail")

    def check(r: str, what: str, on_fail: str) -> None:
        e.check(r, what, "%msg", on_fail)

    e.block("context")
    check(e.cu("cuStreamGetCtx", "%stream", "%ctx_out"), "cuStreamGetCtx", "fail")
    ctx = e.load("%ctx_out", 0, "!llvm.ptr")
    table, used_p = e.g("table"), e.g("used")
    used = e.load(used_p, 0, "i64")
    e.do(f"llvm.br ^search({zero} : i64)")
    e.block("search", "%i: i64")
    e.do(f"llvm.cond_br {e.icmp('sge', '%i', used)}, ^load, ^probe")
    e.block("probe")
    at = e.emit(f"{{r}} = llvm.getelementptr {table}[%i, 0] : (!llvm.ptr, i64) -> !llvm.ptr, "
                "!llvm.array<2 x ptr>")
    seen = e.load(at, 0, "!llvm.ptr")
    nxt = e.binary("add", "%i", one)
    e.do(f"llvm.cond_br {e.icmp('eq', seen, ctx, '!llvm.ptr')}, ^found, ^search({nxt} : i64)")
    e.block("found")
    fn = e.load(at, 8, "!llvm.ptr")
    e.do("llvm.call @__mxlower_cuda_release() : () -> ()")
    e.do(f"llvm.return {fn} : !llvm.ptr")
    # first use in this context: pick the image by compute capability, load it
    e.block("load")
    e.do(f"llvm.cond_br {e.icmp('sge', used, e.i64(_CONTEXTS))}, ^too_many, ^push")
    e.block("too_many")
    e.printf("%msg", "too_many", (e.s("kernel"), "!llvm.ptr"))
    e.do("llvm.br ^fail")
    e.block("push")
    check(e.cu("cuCtxPushCurrent_v2", ctx), "cuCtxPushCurrent_v2", "fail")
    dev = e.slot("i32")
    check(e.cu("cuCtxGetDevice", dev), "cuCtxGetDevice", "pop_fail")
    d = e.load(dev, 0, "i32")
    cc = []
    for attr in (_CC_MAJOR, _CC_MINOR):
        v = e.slot("i32")
        check(e.cu("cuDeviceGetAttribute", v, e.i32(attr), d), "cuDeviceGetAttribute",
              "pop_fail")
        cc.append(e.load(v, 0, "i32"))
    code = e.binary("add", e.binary("mul", cc[0], e.i32(10), "i32"), cc[1], "i32")
    chosen = e.slot()
    e.store(null, chosen, 0, "!llvm.ptr")
    for i, img in enumerate(reversed(imgs)):  # the first match wins: stored last
        idx = len(imgs) - 1 - i
        ptr = e.emit(f"{{r}} = llvm.mlir.addressof @__mxlower_cuda_image{idx} : !llvm.ptr")
        if img.cc is None:
            e.store(ptr, chosen, 0, "!llvm.ptr")
            continue
        cur = e.load(chosen, 0, "!llvm.ptr")
        pick = e.icmp("eq", code, e.i32(img.cc), "i32")
        e.store(e.emit(f"{{r}} = llvm.select {pick}, {ptr}, {cur} : i1, !llvm.ptr"), chosen, 0,
                "!llvm.ptr")
    image = e.load(chosen, 0, "!llvm.ptr")
    e.do(f"llvm.cond_br {e.icmp('eq', image, null, '!llvm.ptr')}, ^no_image, ^module")
    e.block("no_image")
    e.printf("%msg", "no_image", (e.s("kernel"), "!llvm.ptr"), (cc[0], "i32"), (cc[1], "i32"))
    e.store(e.i32(_ERROR_FAILED_PRECONDITION), "%errc", 0, "i32")
    e.do("llvm.br ^pop_fail")
    e.block("module")
    mod = e.slot()
    check(e.cu("cuModuleLoadData", mod, image), "cuModuleLoadData", "pop_fail")
    fn_out = e.slot()
    check(e.cu("cuModuleGetFunction", fn_out, e.load(mod, 0, "!llvm.ptr"), e.s("kernel")),
          "cuModuleGetFunction", "pop_fail")
    popped = e.slot()
    e.cu("cuCtxPopCurrent_v2", popped)
    f = e.load(fn_out, 0, "!llvm.ptr")
    at = e.emit(f"{{r}} = llvm.getelementptr {table}[{used}, 0] : (!llvm.ptr, i64) -> "
                "!llvm.ptr, !llvm.array<2 x ptr>")
    e.store(ctx, at, 0, "!llvm.ptr")
    e.store(f, at, 8, "!llvm.ptr")
    e.store(e.binary("add", used, one), used_p, 0, "i64")
    e.do("llvm.call @__mxlower_cuda_release() : () -> ()")
    e.do(f"llvm.return {f} : !llvm.ptr")
    e.block("pop_fail")
    e.cu("cuCtxPopCurrent_v2", e.slot())
    e.do("llvm.br ^fail")
    e.block("fail")
    e.do("llvm.call @__mxlower_cuda_release() : () -> ()")
    e.do(f"llvm.return {null} : !llvm.ptr")
    e.lines.append("  }")
    return e.lines


def _run_on_cuda(imgs: Sequence[Image]):
    """The CUDA handler's execution (a ``run`` for :func:`mxlower.execution.ffi.handler_text`):
    XLA's stream, the kernel loaded in its context, one launch over every unit."""

    def run(f: Frame) -> list[str]:
        e = f.e  # a _Code (handler_text's emitter)
        nothing = e.icmp("eq", f.blocks, f.zero)
        e.do(f"llvm.cond_br {nothing}, ^empty, ^aligned")
        e.block("empty")
        e.do(f"llvm.return {f.null} : !llvm.ptr")
        # 0. the kernels' whole-vector accesses (ld/st.v4) need 16-byte aligned buffers,
        # which XLA:GPU's are (mxlower.lowering.mx_kernels: _Kernel.alignment)
        e.block("aligned")
        for (data, _), o in zip(f.slots, [*f.spec.operands(), *f.spec.results()]):
            if o.kind != "scalar":
                low = e.binary("and", e.emit(f"{{r}} = llvm.ptrtoint {data} : !llvm.ptr to i64"),
                               e.i64(ALIGNMENT - 1))
                f.fail_if(e.icmp("ne", low, f.zero),
                          f"buffer '{o.name}' is not {ALIGNMENT}-byte aligned")
        e.do("llvm.br ^stream")
        # 1. XLA's stream
        e.block("stream")
        sa = abi.StreamGetArgs
        args = e.emit(f"{{r}} = llvm.alloca {f.one} x !llvm.array<{ctypes.sizeof(sa)} x i8> : "
                      "(i64) -> !llvm.ptr")
        e.store(e.i64(abi.struct_size(sa, "stream")), args, sa.struct_size.offset, "i64")
        e.store(f.null, args, sa.extension_start.offset, "!llvm.ptr")
        e.store(e.load("%frame", abi.CallFrame.ctx.offset, "!llvm.ptr"), args, sa.ctx.offset,
                "!llvm.ptr")
        e.store(f.null, args, sa.stream.offset, "!llvm.ptr")
        get = e.load(f.api, abi.Api.XLA_FFI_Stream_Get.offset, "!llvm.ptr")
        err = e.emit(f"{{r}} = llvm.call {get}({args}) : !llvm.ptr, (!llvm.ptr) -> !llvm.ptr")
        e.do(f"llvm.cond_br {e.icmp('ne', err, f.null, '!llvm.ptr')}, ^stream_error, ^kernel")
        e.block("stream_error")
        e.do(f"llvm.return {err} : !llvm.ptr")
        # 2. the kernel in the stream's context
        e.block("kernel")
        stream = e.load(args, sa.stream.offset, "!llvm.ptr")
        msg = e.emit(f"{{r}} = llvm.alloca {f.one} x !llvm.array<{_MSG} x i8> : (i64) -> "
                     "!llvm.ptr")
        ctx_out, errc = e.slot(), e.slot("i32")
        fn = e.emit(f"{{r}} = llvm.call @__mxlower_cuda_function({stream}, {ctx_out}, {errc}, "
                    f"{msg}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> !llvm.ptr")
        e.do(f"llvm.cond_br {e.icmp('eq', fn, f.null, '!llvm.ptr')}, ^no_kernel, ^grid")
        e.block("no_kernel")
        e.do(f"llvm.return {f.error(msg, e.load(errc, 0, 'i32'))} : !llvm.ptr")
        # 3. the launch: ceil(units / THREADS) blocks, the buffers as memref descriptors
        e.block("grid")
        grid = e.ceil_div(f.blocks, THREADS)
        e.do(f"llvm.cond_br {e.icmp('sgt', grid, e.i64(2 ** 31 - 1))}, ^too_big, ^launch")
        e.block("too_big")
        e.printf(msg, "grid", (e.s("kernel"), "!llvm.ptr"), (f.blocks, "i64"))
        e.do(f"llvm.return {f.error(msg, e.i32(_ERROR_INTERNAL))} : !llvm.ptr")
        e.block("launch")
        p, i64 = "!llvm.ptr", "i64"
        values = [pair for data, n in f.slots
                  for pair in ((data, p), (data, p), (f.zero, i64), (n, i64), (f.one, i64))]
        values += [(f.zero, i64), (f.blocks, i64)]
        count = e.i64(len(values))
        vals = e.emit(f"{{r}} = llvm.alloca {count} x i64 : (i64) -> !llvm.ptr")
        ptrs = e.emit(f"{{r}} = llvm.alloca {count} x !llvm.ptr : (i64) -> !llvm.ptr")
        for i, (v, t) in enumerate(values):
            e.store(v, vals, 8 * i, t)
            e.store(e.at(vals, 8 * i), ptrs, 8 * i, "!llvm.ptr")
        ctx = e.load(ctx_out, 0, "!llvm.ptr")
        pushed = e.cu("cuCtxPushCurrent_v2", ctx)
        e.do(f"llvm.cond_br {e.icmp('ne', pushed, e.i32(0), 'i32')}, ^push_failed, ^go")
        e.block("push_failed")
        _describe_failure(e, msg, "cuCtxPushCurrent_v2", pushed)
        e.do(f"llvm.return {f.error(msg, e.i32(_ERROR_INTERNAL))} : !llvm.ptr")
        e.block("go")
        g32 = e.emit(f"{{r}} = llvm.trunc {grid} : i64 to i32")
        one32 = e.i32(1)
        r = e.cu("cuLaunchKernel", fn, g32, one32, one32, e.i32(THREADS), one32, one32,
                 e.i32(0), stream, ptrs, f.null)
        e.cu("cuCtxPopCurrent_v2", e.slot())
        e.do(f"llvm.cond_br {e.icmp('ne', r, e.i32(0), 'i32')}, ^launch_failed, ^launched")
        e.block("launch_failed")
        _describe_failure(e, msg, "cuLaunchKernel", r)
        e.do(f"llvm.return {f.error(msg, e.i32(_ERROR_INTERNAL))} : !llvm.ptr")
        e.block("launched")
        e.do(f"llvm.return {f.null} : !llvm.ptr")
        return _lock_text() + _load_text() + _function_text(imgs)

    return run


def handler_text(spec: Spec, imgs: Sequence[Image]) -> str:
    """The LLVM dialect module of ``spec``'s CUDA handler ``@<name>_cuda_ffi`` (and
    ``@<name>_cuda_ffi_address``) embedding ``imgs`` (see the module docstring)."""
    body = ffi.handler_text(spec, _run_on_cuda(imgs), suffix="_cuda_ffi", emitter=_Code)
    decls = "".join(f"  {d}\n" for d in _EXTERNS.values())
    return "module {\n" + "\n".join(_globals(spec, imgs)) + "\n" + decls + body + "}\n"


_lock = threading.Lock()
_compiled: dict[Spec, CompiledKernel] = {}


def compile_handler(spec: Spec, imgs: Sequence[Image] | None = None) -> CompiledKernel:
    """``spec``'s CUDA handler (with :func:`images` unless ``imgs`` are given) JIT-compiled for
    the host, once per process and kernel; ``build_s`` includes building the images."""
    key = (spec, tuple(imgs) if imgs is not None else None)
    with _lock:
        if key in _compiled:
            return _compiled[key]
        t0 = time.perf_counter()
        try:
            imgs = images(spec) if imgs is None else imgs
            ir = upstream.module("ir")
            ctx = upstream.context()
            with ctx, ir.Location.unknown():
                module = ir.Module.parse(handler_text(spec, imgs))
        except (ptx.ToolError, ValueError) as err:
            raise FFIError(f"building the CUDA kernel {spec.name} failed: {err}") from None
        except Exception as err:  # MLIRError from a pass or the parser: a bug, say which
            raise FFIError(f"building the CUDA kernel {spec.name} failed: {err}") from None
        t1 = time.perf_counter()
        engine, address = ffi.jit(ctx, module, f"{spec.name}_cuda_ffi_address")
        ck = CompiledKernel(spec, (ctx, module, engine), address, t1 - t0,
                            time.perf_counter() - t1)
        _compiled[key] = ck
        return ck


def shared_object(spec: Spec, path: str, imgs: Sequence[Image] | None = None) -> None:
    """Writes ``spec``'s CUDA handler (with :func:`images` unless ``imgs`` are given) as a
    shared library exporting ``<name>_cuda_ffi``: the handler for a machine without mxlower's
    MLIR stacks (a GPU test machine loads it with ctypes)."""
    imgs = images(spec) if imgs is None else imgs
    ptx.host_shared_object(ptx.translate_to_llvmir(handler_text(spec, imgs)), path)


def register(spec: Spec) -> str:
    """Compiles ``spec``'s CUDA handler (once) and registers it as an XLA FFI target for the
    CUDA platform under the kernel's name (once); returns the name."""
    return ffi.register_handler(compile_handler(spec), "CUDA")


ffi.add_platform("cuda", register)


# ============================================================================ command line


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mxlower.execution.ffi_cuda OP FORMAT [options]``: print a GPU kernel's
    ``gpu.func`` (``--stage gpu``), its PTX for ``--chip`` (``--stage ptx``) or its CUDA
    handler module (``--stage handler``, with the PTX of the chips as images), e.g. for
    FileCheck tests."""
    ap = argparse.ArgumentParser(prog="python -m mxlower.execution.ffi_cuda",
                                 description="print the IR of one of mxlower's GPU kernels")
    ffi.spec_arguments(ap)
    ap.add_argument("--stage", choices=("gpu", "ptx", "handler"), default="gpu")
    ap.add_argument("--chip", default="sm_100a", help="ptx: the chip (default sm_100a)")
    ap.add_argument("--no-hardware", action="store_true", help="ptx: no cvt instructions")
    a = ap.parse_args(argv)
    try:
        spec = ffi.spec_from_arguments(a)
        parse_chip(a.chip)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if not available():
        print("error: upstream MLIR and llc (the xtc wheels) are not installed", file=sys.stderr)
        return 1
    try:
        if a.stage == "gpu":
            print(mx_kernels.build(spec, target="gpu"), end="")
        elif a.stage == "ptx":
            print(kernel_ptx(spec, a.chip, hardware=not a.no_hardware), end="")
        else:
            imgs = [Image(chip, parse_chip(chip)[0], "ptx", kernel_ptx(spec, chip).encode())
                    for chip in IMAGE_CHIPS]
            print(handler_text(spec, imgs), end="")
    except ptx.ToolError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
