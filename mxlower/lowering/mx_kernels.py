"""Fused MX kernels: quantize, dequantize, plain conversions and ``mx.cast`` as loops over
blocks on upstream MLIR, for the CPU (``func.func``) and for NVIDIA GPUs (``gpu.func``).

The recipe behind mxlower's XLA FFI kernels (:mod:`mxlower.execution.ffi`,
:mod:`mxlower.execution.ffi_cuda`).  A CPU kernel is a ``func.func`` in the
``scf``/``vector``/``arith``/``math``/``memref`` dialects of upstream MLIR
(:mod:`mxlower.bindings.upstream`) that walks the blocks of a flat buffer once: each block is
loaded into registers (``vector.load`` of ``k`` values, or of ``k / V`` chunks of ``V`` lanes for
blocks longer than 64), its maximum magnitude is a ``vector.reduction``, the shared scale is
scalar integer arithmetic, and the elements are scaled and converted from the same registers
and written with one ``vector.store`` (f4 elements packed two per byte, low nibble first, which
is how XLA stores ``f4E2M1FN`` arrays; f6 elements one code per byte, or packed four per three
bytes in ``mx.pack``'s layout when asked).  Sizes are dynamic: the kernel takes the block range
``[b0, b1)`` it works on, so one compiled kernel serves every shape and a caller may split the
range across threads.

A GPU kernel (``target="gpu"``) is the same body in a ``gpu.func``: thread ``t`` of the grid
does block (or unit) ``b0 + t`` when it is below ``b1`` -- one block per thread, no loop.  Its
narrow-float conversions are ``arith.truncf`` / ``arith.extf`` on the narrow types (elements
already clamped into range carry ``{mxlower.satfinite}``), which
``mxlower-lower-narrow-floats-to-nvvm`` turns into the chip's ``cvt`` instructions where they
match docs/semantics.md section 2 and into the codec's integer expansion elsewhere; on the CPU
they are the codec's integer expansion directly.

The numerics are not restated here.  The block arithmetic is :mod:`mxlower.lowering.mx_math`'s
(the functions ``mxlower-decompose-mx`` builds StableHLO with: :func:`scale_exponent`,
:func:`scale_by_pow2`, :func:`ldexp_bits`, :func:`mul_f32_exact`, the nvfp4 global-scale
division), run through :class:`ArithOps`, an implementation of the elementwise part of
:class:`mxlower.ir.stablehlo_builder.Builder` on ``arith``/``math``/``vector`` values; every
narrow-float conversion (elements, nvfp4's E4M3 scales, bf16/f16 inputs and outputs) is
:mod:`mxlower.lowering.codec`'s.  So a kernel is bit-exact with docs/semantics.md and
:mod:`mxlower.reference` exactly when the StableHLO lowering is, and neither depends on whether
the CPU flushes subnormals (XLA:CPU's threads may).

Signatures (``memref<?xT>``, all one-dimensional: the caller flattens the array, blocking runs
along the flattened last axis)::

    quantize:   @name(%x: memref<?xW> [, %g: memref<?xf32>], %elements: memref<?xi8>,
                      %scales: memref<?xi8>, %b0: index, %b1: index)
    dequantize: @name(%elements: memref<?xi8>, %scales: memref<?xi8> [, %g: memref<?xf32>],
                      %y: memref<?xW>, %b0: index, %b1: index)
    convert:    @name(%x: memref<?xS>, %y: memref<?xD>, %b0: index, %b1: index)
    cast:       @name(%x: memref<?xW> [, %rbits: memref<?xi32>] [, %g: memref<?xf32>],
                      %y: memref<?xW>, %b0: index, %b1: index)

``W`` is f32, bf16 or f16; narrow values travel as their codes in ``i8`` (one per byte, or
packed); ``g`` is nvfp4's global scale, or a two-level cast's tensor scale (``g[0]``).  Block ``i`` covers values
``[i * k, (i + 1) * k)`` and scale ``i``.  A conversion (:class:`ConvertSpec`) has no blocks:
its unit ``i`` is values ``[i * V, (i + 1) * V)`` (``V`` = :data:`CONVERT_LANES`) cut at the
value count, which the kernel reads from its wide buffer's size (the last unit is done with
masked loads and stores, so any size works, odd f4 counts included).  A cast
(:class:`CastSpec`, docs/semantics.md section 10.4: each value the dequantized value of its
cast to a number spec) has tiles of ``k`` values as its units where it has a scale, vectors
of 8 values (the last one masked) where it has none; its element rounding is
:mod:`mxlower.lowering.codec`'s encoder and decoder on ``arith``, its scale choice
:func:`mxlower.lowering.mx_math.scale_exponent` on :class:`ArithOps` -- except a cast to an
MX format's datatype (:attr:`CastSpec.mx_spec`: tiles along the last dimension, roundmode
even, an MX scale rule), whose kernel is the MX kernels' math: per group of blocks the
quantize kernel's scale choice and element codes, then the dequantize kernel's decoding of
them, in registers (one read of ``x``, one write of ``y``).

Example::

    from mxlower.lowering import mx_kernels
    spec = mx_kernels.KernelSpec("quantize", "mxfp4_e2m1", scale_mode="rceil")
    text = mx_kernels.build(spec)              # the kernel module, printed
    gpu = mx_kernels.build(spec, target="gpu")  # the same as a gpu.func in a gpu.module
"""

from __future__ import annotations

import dataclasses
import fractions
from typing import Any, ClassVar

import numpy as np

from mxlower import numbers, types
from mxlower.bindings import upstream
from mxlower.formats import (FORMATS, SCALE_MODES, WIDE_TYPES, MXFormat, get_datatype,
                             last_axis_format, mx_quantize_of)
from mxlower.ir.stablehlo_builder import Comparisons
import mxlower.lowering.cast_math as cast_math
import mxlower.lowering.codec as codec
import mxlower.lowering.int_builders as int_builders
import mxlower.lowering.mx_math as mx_math

__all__ = ["CONVERT_LANES", "GPU_THREADS", "TARGETS", "ArithOps", "CastSpec", "ConvertSpec",
           "KernelSpec", "Operand", "build", "emit_kernel", "gpu_module_name"]

_MAG = 0x7FFFFFFF
_INF = 0x7F800000
_NAN = 0x7FC00000
#: the longest block held in registers as one vector; longer blocks go in chunks
_MAX_LANES = 64
#: values per loop iteration (a group of blocks whose scales are computed together)
_GROUP_VALUES = 256
#: the vector length (i32 lanes: one AVX-512 register) :meth:`_MXKernel.group_max` shuffles
_REDUCE_LANES = 16
#: values per vector (and per unit of the block range) of a conversion kernel
CONVERT_LANES = 32
#: threads per CTA of a GPU kernel's launch (the CUDA handler launches ceil(units / this))
GPU_THREADS = 128
#: bytes of shared memory a widening GPU kernel stages a CTA's output in (at most)
GPU_STAGE_BYTES = 32768
#: values per vector of a cast kernel: its codec keeps many values live, and on AVX2 a
#: vector of 8 i32 (one register) ran 2x faster than 16 or 32 lanes (register spills)
_CAST_LANES = 8
#: what a kernel is built for: "cpu" (a func.func looping over its range, conversions by the
#: codec), "gpu" (a gpu.func, one thread per block or unit, conversions as narrow
#: arith.truncf/extf for mxlower-lower-narrow-floats-to-nvvm) and "gpu-body" (the GPU kernel's
#: body, conversions and arithmetic as built for the GPU, in a CPU func.func looping over the
#: units one at a time: how the GPU kernels' logic is run and tested without a GPU, its
#: conversions lowered by mxlower-lower-narrow-floats-to-llvm)
TARGETS = ("cpu", "gpu", "gpu-body")
#: how a CPU kernel quantizes to nvfp4: "limits" compares |x|'s bits with per-call limits
#: indexed by the block's scale code (mx_math.nvfp4_limit: the global scale folded in, no
#: quotient per element; a |g| below mx_math.NVFP4_G_FAST takes the "thresholds" way);
#: "thresholds" compares |y| with the block's f4 thresholds times s on the bits
#: (mx_math.nvfp4_element_codes), y = x / g formed per element; "quotient" forms RNE_f32(y / s)
#: in f64 and converts it (the GPU kernels' way).  The last two are kept for comparison
#: (bench/bench_ffi.py --nvfp4).
NVFP4_ELEMENTS = "limits"
#: f4 elements by limits tables (nvfp4 and mxfp4 quantize on the CPU): the input is
#: prefetched this many values ahead, and the software-pipelined loop
#: (:meth:`_MXKernel.f4_pipelined`) takes groups of about this many values (two groups'
#: values stay live: 256 would spill)
PREFETCH = 1024
PIPE_VALUES = 128
#: whether mxfp4 quantize (CPU) converts its elements by a limits table (as nvfp4 does) or by
#: scaling and the codec's conversion
MXFP4_LIMITS = True
#: the unit attribute mxlower-lower-narrow-floats-to-nvvm reads (mxlower.lowering.nvvm)
_SATFINITE = "mxlower.satfinite"


# ============================================================================== kernel specs


@dataclasses.dataclass(frozen=True)
class Operand:
    """One buffer of a kernel, as the caller sees it (the FFI glue checks buffers against it).

    ``dtype`` is the storage dtype (NumPy / ml_dtypes); ``kind`` says how its size
    follows from the logical element count ``n`` of the array: ``"values"`` (``n``; for
    f4E2M1FN that is ``n`` nibbles, ``ceil(n / 2)`` bytes), ``"packed6"`` (``3 n / 4`` bytes,
    the last dimension scaled by 3/4), ``"scales"`` (``n / k``, the last dimension divided by
    k) or ``"scalar"`` (one f32, rank 0)."""

    name: str
    dtype: np.dtype
    kind: str


def _narrow_storage(name: str, t: str, packed: bool) -> Operand:
    """The buffer holding codes of the narrow type ``t``: XLA's own dtype (f4 packed two per
    byte by XLA), or uint8 codes for the 6-bit types XLA lacks (packed four per three bytes
    with ``packed``)."""
    ft = types.float_type(t)
    if ft.bits == 6:
        return Operand(name, np.dtype(np.uint8), "packed6" if packed else "values")
    return Operand(name, types.dtype(t), "values")


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """What one kernel computes.

    ``op``: "quantize" (``wide`` values -> elements and scales) or "dequantize" (elements and
    scales -> ``wide`` values).  ``format``: an MX format's name, or its datatype (a
    :class:`~mxlower.numbers.Datatype` or a code such as ``"e4m3fn:e8m0_t32"`` or ``"bfp16"``,
    :func:`mxlower.formats.format_of`; its tiles along the last dimension give the block size,
    and nvfp4's two-level ``e2m1fo:e4m3fn_t16_gf32`` the global scale).  ``scale_mode``
    applies to quantize of the MX formats (not nvfp4).  ``block_size`` defaults to the
    format's.  ``packed``: f6 elements packed four per three bytes (``mx.pack``'s layout)
    instead of one code per byte; f4 elements are always packed (XLA's layout).
    ``global_scale``: nvfp4 with the optional f32 per-tensor scale.

    The fields are canonical, whichever spelling made the spec: ``format`` the format's
    name, ``block_size`` None where it is the format's, so the specs of one kernel are equal
    and have one :attr:`name`."""

    op: str
    format: str
    wide: str = "f32"
    scale_mode: str = "floor"
    block_size: int | None = None
    packed: bool = False
    global_scale: bool = False

    def __post_init__(self) -> None:
        if self.op not in ("quantize", "dequantize"):
            raise ValueError(f"unknown kernel op '{self.op}' (known: quantize, dequantize; "
                             "conversions are a ConvertSpec)")
        if not (isinstance(self.format, str) and self.format in FORMATS):
            self._from_datatype()
        if self.block_size == FORMATS[self.format].block_size:
            object.__setattr__(self, "block_size", None)
        if self.wide not in WIDE_TYPES:
            raise ValueError(f"'{self.wide}' is not f32, bf16 or f16")
        fmt = FORMATS[self.format]
        if self.scale_mode not in SCALE_MODES:
            raise ValueError(f"unknown scale mode '{self.scale_mode}' (known: "
                             f"{', '.join(SCALE_MODES)})")
        if fmt.is_nvfp4 and self.scale_mode != "floor":
            raise ValueError("scale_mode does not apply to nvfp4; leave it at its default")
        if self.global_scale and not fmt.global_scale:
            raise ValueError(f"only nvfp4 takes a global scale, not {self.format}")
        if self.packed and fmt.bits != 6:
            raise ValueError("packed applies to the f6 formats (f4 is always packed)")
        k = self.k
        if k <= 0:
            raise ValueError(f"block_size must be positive, got {k}")
        if fmt.bits == 4 and k % 2:
            raise ValueError(f"packed f4 elements need an even block size, got {k}")
        if self.packed and k % 4:
            raise ValueError(f"packed f6 elements need a block size divisible by 4, got {k}")

    def _from_datatype(self) -> None:
        """``format`` given as a datatype: the format's name, block size and global scale."""
        try:
            dt = get_datatype(self.format)
        except (numbers.SpecError, TypeError, AttributeError) as err:
            raise ValueError(f"unknown MX format {self.format!r} (known: {', '.join(FORMATS)}; "
                             f"or an MX format's datatype: {err})") from None
        fmt, k = last_axis_format(dt, "the kernels block the last dimension (a scale spec "
                                      "without 'dY')")
        if self.block_size is not None and self.block_size != k:
            raise ValueError(f"block_size {self.block_size} contradicts datatype {dt.code} "
                             f"(blocks of {k})")
        object.__setattr__(self, "format", fmt.name)
        object.__setattr__(self, "block_size", k)
        if dt.two_level:
            object.__setattr__(self, "global_scale", True)

    @property
    def fmt(self) -> MXFormat:
        return FORMATS[self.format]

    @property
    def k(self) -> int:
        """The block size: values per unit of the block range ``[b0, b1)``."""
        return self.block_size or self.fmt.block_size

    @property
    def name(self) -> str:
        """A symbol naming the kernel uniquely (also its FFI target name)."""
        parts = ["mxlower", self.op, self.format, self.wide, f"k{self.k}"]
        if self.op == "quantize" and not self.fmt.is_nvfp4:
            parts.append(self.scale_mode)
        if self.packed:
            parts.append("packed")
        if self.global_scale:
            parts.append("g")
        return "_".join(parts)

    @property
    def element_storage(self) -> Operand:
        if self.fmt.is_int:
            return Operand("elements", self.fmt.element_dtype, "values")
        return _narrow_storage("elements", self.fmt.element, self.packed)

    def operands(self) -> list[Operand]:
        """The kernel's inputs, in order."""
        g = [Operand("global_scale", np.dtype(np.float32), "scalar")] if self.global_scale else []
        if self.op == "quantize":
            return [Operand("x", types.dtype(self.wide), "values"), *g]
        return [self.element_storage, Operand("scales", self.fmt.scale_dtype, "scales"), *g]

    def results(self) -> list[Operand]:
        """The kernel's outputs, in order."""
        if self.op == "quantize":
            return [self.element_storage, Operand("scales", self.fmt.scale_dtype, "scales")]
        return [Operand("y", types.dtype(self.wide), "values")]

    @property
    def reference(self) -> int:
        """Index (in operands + results) of the buffer whose shape the others follow: the
        values (``x``, or the result ``y``)."""
        return 0 if self.op == "quantize" else len(self.operands())

    @property
    def last_dim_rule(self) -> tuple[int, str] | None:
        """(divisor, message): the reference's last dimension must be a multiple of it (the
        array needs at least one dimension)."""
        ref = (self.operands() + self.results())[self.reference].name
        return self.k, f"the block size {self.k} must divide the last dimension of {ref}"


@dataclasses.dataclass(frozen=True)
class ConvertSpec:
    """A plain conversion (docs/semantics.md section 2) as a kernel: ``src`` -> ``dst``, one of
    them f32, bf16 or f16 and the other a narrow float type.

    Narrow values are stored as XLA holds them (f8 one per byte, f4E2M1FN packed two per byte,
    low nibble first), the f6 types as uint8 codes, one per byte or, with ``packed``, four per
    three bytes along the last axis (``mx.pack``'s layout; the last dimension must then be a
    multiple of 4).  The unit of the range ``[b0, b1)`` is :data:`CONVERT_LANES` values."""

    src: str
    dst: str
    packed: bool = False

    op: ClassVar[str] = "convert"

    def __post_init__(self) -> None:
        ends = (self.src, self.dst)
        for t in ends:
            if t not in WIDE_TYPES and not types.is_narrow_float(t):
                raise ValueError(f"'{t}' is neither f32, bf16, f16 nor a narrow float type")
        if (self.src in WIDE_TYPES) == (self.dst in WIDE_TYPES):
            raise ValueError(f"a conversion kernel converts between f32/bf16/f16 and a narrow "
                             f"float type, not {self.src} -> {self.dst}")
        if self.packed and types.float_type(self.narrow).bits != 6:
            raise ValueError("packed applies to the f6 types (f4 is always packed)")

    @property
    def narrow(self) -> str:
        return self.dst if self.src in WIDE_TYPES else self.src

    @property
    def wide(self) -> str:
        return self.src if self.src in WIDE_TYPES else self.dst

    @property
    def truncates(self) -> bool:
        """Whether it converts wide -> narrow."""
        return self.src in WIDE_TYPES

    @property
    def k(self) -> int:
        """Values per unit of the range ``[b0, b1)`` (the last unit may be partial)."""
        return CONVERT_LANES

    @property
    def name(self) -> str:
        return "_".join(["mxlower", "convert", self.src, self.dst]
                        + (["packed"] if self.packed else []))

    def operands(self) -> list[Operand]:
        if self.truncates:
            return [Operand("x", types.dtype(self.src), "values")]
        return [_narrow_storage("x", self.src, self.packed)]

    def results(self) -> list[Operand]:
        if self.truncates:
            return [_narrow_storage("y", self.dst, self.packed)]
        return [Operand("y", types.dtype(self.dst), "values")]

    @property
    def reference(self) -> int:
        """Index of the wide buffer (its shape is the array's)."""
        return 0 if self.truncates else 1

    @property
    def last_dim_rule(self) -> tuple[int, str] | None:
        if not self.packed:
            return None  # any shape, scalars included
        ref = (self.operands() + self.results())[self.reference].name
        return 4, f"the last dimension of {ref} must be a multiple of 4 (packed f6)"


@dataclasses.dataclass(frozen=True)
class CastSpec:
    """``mx.cast`` (docs/semantics.md section 10.4, the virtual cast) as a kernel: ``wide``
    values (f32, bf16 or f16) in, the same type out, each value the dequantized value of its
    actual cast to ``number`` [with ``scale``].

    Covered: any number spec (lookup tables included) unscaled (units of one vector of values,
    the last one masked:
    any shape), and exponent scales (``e8m0``-like, every scale mode) or float scales
    (``e4m3fn``, ``bf16``, ...: ``scalemode`` max) in 1D tiles of ``k`` values along the last
    dimension: a ``..._tK`` scale whose dimension is the last (``k`` = K), or a channel scale
    of the last dimension (``..._t0``) or a tensor scale with the tile ``length`` given (the
    last dimension, or every value of an array the caller flattens; a kernel per length).  Every rounding mode; ``stochastic`` takes the random bits (uint32,
    one per value) as a second operand.  The element rounding is
    :mod:`mxlower.lowering.codec`'s, the scale choice
    :func:`mxlower.lowering.mx_math.scale_exponent`, so a kernel gives the bits of the
    StableHLO lowering; a cast to an MX format's datatype (:attr:`mx_spec`) runs the MX
    quantize and dequantize kernels' math instead on the CPU (the same bits: one numerics
    model).  Subtiles (shared micro-exponents, ``..._tK_sAoD``) of up to
    :data:`_CAST_LANES` values: each vector's subtile maxima by lane shuffles, each subtile's
    offset from them.  A tensor level (``..._gf32``, :attr:`two_level`; subtiles too: three
    levels) takes g as one more operand (f32, rank 0, after the random bits): the tiles
    scale y = RNE_f32(x / g), the exact quotient (:func:`cast_math.divide_by`, subnormal y
    included), and each value is the tile level's times g rounded once in f32
    (:func:`cast_math.times`); such casts always take the general recipe (no
    :attr:`mx_spec`).  Other datatypes (zero points, 2D tiles) raise ValueError: the caller
    falls back to that lowering."""

    number: str | numbers.NumberSpec
    scale: str | None = None
    wide: str = "f32"
    roundmode: str = "even"
    scalemode: str = "max"
    length: int | None = None

    op: ClassVar[str] = "cast"

    def __post_init__(self) -> None:
        n = numbers.number(self.number)  # SpecError (a ValueError) when it is no spec
        object.__setattr__(self, "number", n.param)  # a custom table: the spec itself
        if self.wide not in WIDE_TYPES:
            raise ValueError(f"'{self.wide}' is not f32, bf16 or f16")
        if self.roundmode not in numbers.ROUND_MODES:
            raise ValueError(f"unknown roundmode '{self.roundmode}' (known: "
                             f"{', '.join(numbers.ROUND_MODES)})")
        if self.scale is None:
            if self.length is not None:
                raise ValueError("an unscaled cast has no tile length")
            object.__setattr__(self, "scalemode", "max")
            return
        s = numbers.scale(self.scale)
        if self.scalemode not in numbers.SCALE_MODES:
            raise ValueError(f"unknown scalemode '{self.scalemode}' (known: "
                             f"{', '.join(numbers.SCALE_MODES)})")
        if s.zero_point is not None:
            raise ValueError(f"no cast kernel for the asymmetric scale {s.code} (zero points)")
        if not s.power_of_two and s.number.nan_code is None:
            raise ValueError(f"no cast kernel for the float scale {s.code}: its spec has no "
                             "NaN for a tile holding NaN or Inf")
        if not s.power_of_two and self.scalemode != "max":
            raise ValueError(f"scalemode '{self.scalemode}' applies to exponent scales; the "
                             f"float scale {s.number.code} takes 'max'")
        if s.kind == "tile2d" or s.kind in ("tile", "channel") and s.dims != (-1,):
            raise ValueError(f"no cast kernel for scale {s.code}: 1D tiles along the last "
                             "dimension only")
        if (s.kind == "tile") != (self.length is None):
            raise ValueError(f"scale {s.code}: a tile length is given for channel and tensor "
                             "scales (only)")
        if s.subtile and s.subtile[0] > _CAST_LANES:
            raise ValueError(f"no cast kernel for scale {s.code}: subtiles of at most "
                             f"{_CAST_LANES} values (one vector)")
        if self.length is not None and self.length <= 0:
            raise ValueError(f"the tile length must be positive, got {self.length}")
        dt = numbers.Datatype(n, s)
        reason = cast_math.unsupported(dt, self.scalemode)
        if reason:
            raise ValueError(reason)
        object.__setattr__(self, "scale", s.code)

    @property
    def spec(self) -> numbers.NumberSpec:
        return numbers.number(self.number)

    @property
    def scale_spec(self) -> numbers.ScaleSpec | None:
        return None if self.scale is None else numbers.scale(self.scale)

    @property
    def stochastic(self) -> bool:
        return self.roundmode == "stochastic"

    @property
    def two_level(self) -> bool:
        """Whether the scale has a tensor level (``_gf32``): the kernel takes g (a rank-0
        f32) as its last operand, the tiles scale y = x / g and each value is times g."""
        s = self.scale_spec
        return s is not None and s.tensor is not None

    @property
    def mx_spec(self) -> KernelSpec | None:
        """The MX quantize kernel whose math the CPU cast kernel runs (per block: that
        quantize, then its dequantize, in registers): set when the datatype is an MX format's
        (:func:`mxlower.formats.format_of`) in 1D tiles of ``k`` values along the last
        dimension (a ``..._tK`` scale; not a channel or tensor scale), ``roundmode`` is
        "even" and ``scalemode`` one of the MX scale rules ("max", "rceil", "nearest": the
        MX formats' floor, rceil and nearest; nvfp4 takes "max") and the quantize kernel
        takes the block size (f4 needs it even).  None otherwise: the general recipe
        (codec and :func:`mx_math.scale_exponent`)."""
        s = self.scale_spec
        if s is None or s.kind != "tile" or s.tensor is not None:
            return None
        found = mx_quantize_of(numbers.Datatype(self.spec, s), self.roundmode, self.scalemode)
        if found is None or found[2] != -1:
            return None
        fmt, k, _, mode = found
        try:
            return KernelSpec("quantize", fmt.name, self.wide, mode, k)
        except ValueError:  # a block size the MX kernels do not take (an odd f4 block)
            return None

    @property
    def k(self) -> int:
        """Values per unit of the range ``[b0, b1)``: the tile, or one vector of
        :data:`_CAST_LANES` (the last unit of an unscaled cast may be partial)."""
        s = self.scale_spec
        if s is None:
            return _CAST_LANES
        return s.tile[0] if self.length is None else self.length

    @property
    def name(self) -> str:
        parts = ["mxlower", "cast", self.spec.code, self.scale or "none", self.wide,
                 self.roundmode]
        if self.scale is not None:
            parts.append(self.scalemode)
        if self.length is not None:
            parts.append(f"L{self.length}")
        return "_".join("".join(c if c.isalnum() else "n" if c == "-" else "_" for c in p)
                        for p in parts)

    def operands(self) -> list[Operand]:
        x = [Operand("x", types.dtype(self.wide), "values")]
        r = [Operand("rbits", np.dtype(np.uint32), "values")] if self.stochastic else []
        g = [Operand("tensor_scale", np.dtype(np.float32), "scalar")] if self.two_level \
            else []
        return x + r + g

    def results(self) -> list[Operand]:
        return [Operand("y", types.dtype(self.wide), "values")]

    @property
    def reference(self) -> int:
        return 0

    @property
    def last_dim_rule(self) -> tuple[int, str] | None:
        if self.scale is None:
            return None  # any shape, scalars included
        return self.k, f"the tile size {self.k} must divide the last dimension of x"


# ============================================================================== arith ops


class ArithOps(Comparisons):
    """The elementwise interface of :class:`mxlower.ir.stablehlo_builder.Builder` on upstream
    ``arith``/``math``/``vector`` values (scalars or 1-D vectors), so that
    :mod:`mxlower.lowering.mx_math`'s bit arithmetic runs unchanged inside a kernel.

    Integers are signless and read as signed (as StableHLO's ``i32``); a Python number operand
    becomes a constant of the other operand's type, and a scalar operand meeting a vector is
    broadcast to it (``vector.broadcast``).  Build under an insertion point and location.

    ``libm=False`` builds float ``abs`` and ``round_even`` from ``arith`` alone (the sign bit
    cleared; adding and subtracting 2^p, exact in round-to-nearest-even), because the GPU
    lowering turns ``math.absf`` / ``math.roundeven`` into libdevice calls (``__nv_fabs``,
    ``__nv_rint``) that no kernel image links."""

    f64_from_bits = False  # LLVM keeps the subnormal lanes' select (see Comparisons)

    def __init__(self, ir: Any, arith: Any, math: Any, vector: Any, *, libm: bool = True):
        self.ir, self.arith, self.math, self.vector = ir, arith, math, vector
        self.libm = libm

    # -- types ------------------------------------------------------------------------------
    def _elem(self, t: Any) -> Any:
        return self.ir.VectorType(t).element_type if isinstance(t, self.ir.VectorType) else t

    def _is_float(self, v: Any) -> bool:
        return isinstance(self._elem(v.type), self.ir.FloatType)

    def etype(self, v: Any) -> str:
        return str(self._elem(v.type))

    def shape(self, v: Any) -> tuple[int, ...]:
        return tuple(self.ir.VectorType(v.type).shape) if isinstance(
            v.type, self.ir.VectorType) else ()

    def _typed(self, elt: str | Any, shape: tuple[int, ...]) -> Any:
        et = self.ir.Type.parse(elt.lstrip("u")) if isinstance(elt, str) else elt
        return self.ir.VectorType.get(list(shape), et) if shape else et

    # -- constants --------------------------------------------------------------------------
    def const(self, value: float | int, elt: str, shape: tuple[int, ...] = ()) -> Any:
        t = self._typed(elt, shape)
        et = self._elem(t)
        if isinstance(et, self.ir.FloatType):
            attr = self.ir.FloatAttr.get(et, float(value))
        else:
            w = self.ir.IntegerType(et).width
            v = int(value) & ((1 << w) - 1)
            attr = self.ir.IntegerAttr.get(et, v - (1 << w) if v >> (w - 1) else v)
        if shape:
            attr = self.ir.DenseElementsAttr.get_splat(t, attr)
        return self.arith.ConstantOp(t, attr).result

    def like(self, v: Any, value: float | int, elt: str | None = None) -> Any:
        return self.const(value, elt or self._elem(v.type), self.shape(v))

    def broadcast(self, v: Any, shape, dims=()) -> Any:
        """``v`` broadcast to ``shape`` (a scalar splatted; an equal shape unchanged)."""
        shape = tuple(shape)
        if self.shape(v) == shape:
            return v
        if self.shape(v):
            raise ValueError(f"cannot broadcast {v.type} to {shape}")
        return self.vector.BroadcastOp(self._typed(self._elem(v.type), shape), v).result

    def _coerce(self, a: Any, b: Any) -> tuple[Any, Any]:
        if isinstance(a, (int, float)):
            a = self.like(b, a)
        if isinstance(b, (int, float)):
            b = self.like(a, b)
        sa, sb = self.shape(a), self.shape(b)
        if sa != sb:
            a, b = (self.broadcast(a, sb), b) if not sa else (a, self.broadcast(b, sa))
        return a, b

    # -- arithmetic -------------------------------------------------------------------------
    def _bin(self, iop: str | None, fop: str | None, a: Any, b: Any) -> Any:
        a, b = self._coerce(a, b)
        name = fop if self._is_float(a) else iop
        if name is None:
            raise TypeError(f"no {iop or fop} for {a.type}")
        return getattr(self.arith, name)(a, b).result

    def add(self, a, b): return self._bin("AddIOp", "AddFOp", a, b)  # noqa: E704
    def sub(self, a, b): return self._bin("SubIOp", "SubFOp", a, b)  # noqa: E704
    def mul(self, a, b): return self._bin("MulIOp", "MulFOp", a, b)  # noqa: E704
    def div(self, a, b): return self._bin("DivSIOp", "DivFOp", a, b)  # noqa: E704
    def max(self, a, b): return self._bin("MaxSIOp", "MaximumFOp", a, b)  # noqa: E704
    def min(self, a, b): return self._bin("MinSIOp", "MinimumFOp", a, b)  # noqa: E704
    def and_(self, a, b): return self._bin("AndIOp", None, a, b)  # noqa: E704
    def or_(self, a, b): return self._bin("OrIOp", None, a, b)  # noqa: E704
    def xor(self, a, b): return self._bin("XOrIOp", None, a, b)  # noqa: E704
    def shl(self, a, b): return self._bin("ShLIOp", None, a, b)  # noqa: E704
    def shr(self, a, b): return self._bin("ShRUIOp", None, a, b)  # noqa: E704
    def sra(self, a, b): return self._bin("ShRSIOp", None, a, b)  # noqa: E704

    def not_(self, a):
        return self.xor(a, -1)

    def _float_bits(self, a: Any) -> tuple[str, int]:
        """(integer type, mantissa bits) of a float value's element type (f32 or f64)."""
        w = self.ir.FloatType(self._elem(a.type)).width
        return f"i{w}", {32: 23, 64: 52}[w]

    def abs(self, a):
        if not self._is_float(a):
            return self.math.AbsIOp(a).result
        if self.libm:
            return self.math.AbsFOp(a).result
        it, _ = self._float_bits(a)
        w = int(it[1:])
        return self.bitcast(self.and_(self.bitcast(a, it), (1 << (w - 1)) - 1), self.etype(a))

    def clz(self, a):
        return self.math.CountLeadingZerosOp(a).result

    def round_even(self, a):
        if self.libm:
            return self.math.RoundEvenOp(a).result
        # |a| < 2^p: (|a| + 2^p) - 2^p rounds |a| to an integer, ties to even; the sign of a
        # is put back (-0.3 -> -0).  Larger magnitudes, Inf and NaN are integral already.
        it, p = self._float_bits(a)
        w = int(it[1:])
        mag = self.abs(a)
        big = self.like(a, float(2 ** p))
        r = self.sub(self.add(mag, big), big)
        sign = self.and_(self.bitcast(a, it), self.like(self.bitcast(a, it), 1 << (w - 1)))
        r = self.bitcast(self.or_(self.bitcast(r, it), sign), self.etype(a))
        return self.select(self.lt(mag, big), r, a)

    def clamp(self, lo, x, hi):
        return self.min(self.max(x, lo), hi)

    def select(self, pred, a, b):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            raise TypeError("select needs a value operand to take the type from")
        a, b = self._coerce(a, b)  # a scalar i1 may select between vectors
        return self.arith.SelectOp(pred, a, b).result

    #: arith.cmpi (signed) and arith.cmpf (ordered; NE unordered, as StableHLO) predicates
    _IPRED = {"EQ": "EQ", "NE": "NE", "LT": "SLT", "LE": "SLE", "GT": "SGT", "GE": "SGE"}
    _FPRED = {"EQ": "OEQ", "NE": "UNE", "LT": "OLT", "LE": "OLE", "GT": "OGT", "GE": "OGE"}

    def compare(self, direction: str, a: Any, b: Any) -> Any:
        a, b = self._coerce(a, b)
        i64 = self.ir.IntegerType.get_signless(64)
        if self._is_float(a):
            pred = getattr(self.arith.CmpFPredicate, self._FPRED[direction])
            return self.arith.CmpFOp(self.ir.IntegerAttr.get(i64, int(pred)), a, b).result
        pred = getattr(self.arith.CmpIPredicate, self._IPRED[direction].lower())
        return self.arith.CmpIOp(self.ir.IntegerAttr.get(i64, int(pred)), a, b).result


    # -- conversions ------------------------------------------------------------------------
    def convert(self, v: Any, elt: str) -> Any:
        """Value conversion between f32/f64 and signed integers (as StableHLO's convert; the
        narrow float types are :mod:`mxlower.lowering.codec`'s job, not this)."""
        t = self._typed(elt, self.shape(v))
        src_f, dst_f = self._is_float(v), isinstance(self._elem(t), self.ir.FloatType)
        if src_f and dst_f:
            w_src = self.ir.FloatType(self._elem(v.type)).width
            w_dst = self.ir.FloatType(self._elem(t)).width
            if w_src == w_dst:
                return v
            return (self.arith.ExtFOp if w_dst > w_src else self.arith.TruncFOp)(t, v).result
        if src_f:
            return self.arith.FPToSIOp(t, v).result
        if dst_f:
            return self.arith.SIToFPOp(t, v).result
        w_src = self.ir.IntegerType(self._elem(v.type)).width
        w_dst = self.ir.IntegerType(self._elem(t)).width
        if w_src == w_dst:
            return v
        return (self.arith.ExtSIOp if w_dst > w_src else self.arith.TruncIOp)(t, v).result

    def bitcast(self, v: Any, elt: str) -> Any:
        t = self._typed(elt, self.shape(v))
        return v if t == v.type else self.arith.BitcastOp(t, v).result


# ============================================================================== the kernels


class _Kernel:
    """What every kernel builder shares: index arithmetic, loads and stores of wide values and
    of (packed) narrow codes, masked where a unit is partial, the narrow-float conversions of
    the target, and the function around the body -- a loop over the range on the CPU, one
    unit per thread on the GPU.  Subclasses say what one unit does."""

    def __init__(self, spec: Any, mods: dict[str, Any], target: str, lanes: int,
                 code_bits: int, packed: bool):
        if target not in TARGETS:
            raise ValueError(f"unknown kernel target '{target}' (known: {', '.join(TARGETS)})")
        self.spec = spec
        self.m = mods
        self.ir = mods["ir"]
        self.target = target
        self.b = ArithOps(mods["ir"], mods["arith"], mods["math"], mods["vector"],
                          libm=target == "cpu")
        self.lanes = lanes
        #: the narrow codes' width in storage (4: two per byte; 6 with packed: four per 3 bytes)
        self.code_bits = code_bits
        self.packed = packed
        #: vectors of ``lanes`` values per unit (units longer than the longest vector)
        self.chunks = 1

    # -- small helpers ----------------------------------------------------------------------
    def index(self, v: int) -> Any:
        return self.m["arith"].ConstantOp(self.ir.IndexType.get(), v).result

    def vec(self, elt: str, n: int | None = None) -> Any:
        return self.ir.VectorType.get([n or self.lanes], self.ir.Type.parse(elt))

    def codec_builder(self, like: Any) -> Any:
        return int_builders.ArithBuilder(self.ir, self.m["arith"], like)

    def scaled_index(self, base: Any, num: int, den: int) -> Any:
        """``base * num / den`` (exact where it is used: units start on whole bytes)."""
        a = self.m["arith"]
        v = base if num == 1 else a.MulIOp(base, self.index(num)).result
        return v if den == 1 else a.DivUIOp(v, self.index(den)).result

    def mask(self, count: Any, n: int) -> Any:
        """vector<n x i1>: the first ``count`` lanes (``lane < count``, in plain ``arith``: the
        GPU pipeline's convert-to-llvm has no lowering of a dynamic ``vector.create_mask``)."""
        ir, a = self.ir, self.m["arith"]
        i32 = ir.IntegerType.get_signless(32)
        t = ir.VectorType.get([n], i32)
        lanes = a.ConstantOp(t, ir.DenseElementsAttr.get(np.arange(n, dtype=np.int32),
                                                         type=t)).result
        c = a.IndexCastOp(i32, count).result
        return self.b.lt(lanes, c)

    def alignment(self, vtype: Any) -> int | None:
        """GPU: the byte alignment of a whole-vector access of ``vtype`` (the largest power of
        two dividing its size, at most 16: one ``ld/st.v4.b32``), which every vector access of
        a kernel has -- each is at a multiple of its own length from a buffer's start (a block,
        a unit, a group of blocks' scales), and XLA:GPU aligns every buffer to 16 bytes or
        more (the CUDA handler checks it: ``mxlower.execution.ffi_cuda.ALIGNMENT``).  Without
        it LLVM splits a vector access into one scalar access a lane.  CPU: None (the
        element's alignment)."""
        if self.target != "gpu":
            return None
        vt = self.ir.VectorType(vtype)
        nbytes = vt.shape[0] * types.scalar(str(vt.element_type)).bits // 8
        return min(16, nbytes & -nbytes) if nbytes else None

    def _align_attr(self, vtype: Any) -> dict[str, Any]:
        n = self.alignment(vtype)
        return {} if n is None else {"alignment": n}

    def load(self, mem: Any, at: Any, vtype: Any, count: Any = None) -> Any:
        """``vtype`` values at ``mem[at]``; with ``count``, only that many (the rest zero)."""
        vector = self.m["vector"]
        if count is None:
            return vector.LoadOp(vtype, mem, [at], **self._align_attr(vtype)).result
        n = self.ir.VectorType(vtype).shape[0]
        zero = self.b.const(0, self.ir.VectorType(vtype).element_type, (n,))
        return vector.MaskedLoadOp(vtype, mem, [at], self.mask(count, n), zero).result

    def store(self, value: Any, mem: Any, at: Any, count: Any = None) -> None:
        """``value`` to ``mem[at]``; with ``count``, only its first ``count`` lanes."""
        vector = self.m["vector"]
        if count is None:
            vector.StoreOp(value, mem, [at], **self._align_attr(value.type))
        else:
            n = self.b.shape(value)[0]
            vector.MaskedStoreOp(mem, [at], self.mask(count, n), value)

    # -- narrow-float conversions (the target's) --------------------------------------------
    def _typed_like(self, v: Any, elt: str) -> Any:
        return self.b._typed(self.ir.Type.parse(elt), self.b.shape(v))

    def to_narrow(self, v: Any, src: str, dst: str, *, satfinite: bool = False) -> Any:
        """``v`` (floats of the wide type ``src``) -> ``dst`` codes as i8 (docs/semantics.md
        section 2).  CPU: the codec's integer expansion.  GPU: ``arith.truncf`` to ``dst`` for
        mxlower-lower-narrow-floats-to-nvvm, marked ``{mxlower.satfinite}`` when the caller
        knows every value is finite and within +-max (then it is a bare cvt)."""
        if self.target == "cpu":
            return codec.emit_truncf(self.codec_builder(v.type), v, src, dst, code_bits=8)
        a, ir = self.m["arith"], self.ir
        op = a.TruncFOp(self._typed_like(v, dst), v)
        if satfinite:
            op.operation.attributes[_SATFINITE] = ir.UnitAttr.get()
        bits = types.float_type(dst).bits
        iv = a.BitcastOp(self._typed_like(v, f"i{bits}"), op.result).result
        return iv if bits == 8 else a.ExtUIOp(self._typed_like(v, "i8"), iv).result

    def from_narrow(self, codes: Any, src: str, dst: str) -> Any:
        """i8 ``codes`` of ``src`` -> floats of the wide type ``dst`` (exact; section 2.4)."""
        if self.target == "cpu":
            return codec.emit_extf(self.codec_builder(codes.type), codes, src, dst)
        a = self.m["arith"]
        bits = types.float_type(src).bits
        iv = codes if bits == 8 else a.TruncIOp(self._typed_like(codes, f"i{bits}"),
                                                codes).result
        nv = a.BitcastOp(self._typed_like(codes, src), iv).result
        return a.ExtFOp(self._typed_like(codes, dst), nv).result

    # -- loads and stores of values and element codes ---------------------------------------
    def load_bits(self, x: Any, at: Any, count: Any = None) -> Any:
        """The f32 bit patterns (vector<V x i32>) of ``V`` wide values at ``x[at]`` (with
        ``count``, only that many; the rest are zero)."""
        w = self.spec.wide
        v = self.load(x, at, self.vec(w), count)
        if w == "f32":
            return self.b.bitcast(v, "i32")
        if self.target == "gpu":  # cvt.f32.bf16 / cvt.f32.f16: exact, subnormals kept
            f = self.m["arith"].ExtFOp(self._typed_like(v, "f32"), v).result
            return self.b.bitcast(f, "i32")
        codes = self.b.bitcast(v, "i16")
        f = codec.emit_extf(self.codec_builder(codes.type), codes, w, "f32")
        return self.b.bitcast(f, "i32")

    def store_values(self, y: Any, at: Any, bits: Any, count: Any = None) -> None:
        """Stores f32 bits (vector<V x i32>) to ``y[at]`` rounded to the wide output type
        (with ``count``, only the first ``count`` lanes)."""
        w = self.spec.wide
        f = self.b.bitcast(bits, "f32")
        if w != "f32" and self.target == "gpu":  # cvt.rn.bf16.f32 / cvt.rn.f16.f32: RNE,
            # subnormals kept, Inf past the range (section 2)
            f = self.m["arith"].TruncFOp(self._typed_like(f, w), f).result
        elif w != "f32":
            codes = codec.emit_truncf(self.codec_builder(f.type), f, "f32", w, code_bits=16)
            f = self.b.bitcast(codes, w)
        self.store(f, y, at, count)

    def _code_bytes(self, values: Any) -> Any:
        """Bytes holding ``values`` codes (from a code boundary on a byte)."""
        if self.code_bits == 4:
            a = self.m["arith"]
            return self.scaled_index(a.AddIOp(values, self.index(1)).result, 1, 2)
        if self.code_bits == 6 and self.packed:
            return self.scaled_index(values, 3, 4)
        return values

    def store_codes(self, q: Any, at: Any, codes: Any, count: Any = None) -> None:
        """Stores ``V`` element codes (vector<V x i8>, one per lane; f4 codes may come as
        vector<V x i32>) for values ``at``...:
        one byte each, or packed (f4: two per byte, low nibble first; packed f6: four per three
        bytes, LSB first); with ``count``, only the bytes of the first ``count`` values."""
        b, vector = self.b, self.m["vector"]
        bits = self.code_bits
        if bits == 4 and b.etype(codes) == "i32":
            codes = b.convert(self.f4_pairs(codes), "i8")
        elif bits == 4:
            lo, hi = vector.DeinterleaveOp(codes).results
            codes = b.or_(lo, b.shl(hi, 4))
        elif bits == 6 and self.packed:
            ev, od = vector.DeinterleaveOp(codes).results
            c0, c2 = vector.DeinterleaveOp(ev).results
            c1, c3 = vector.DeinterleaveOp(od).results
            b0 = b.or_(c0, b.shl(c1, 6))
            b1 = b.or_(b.shr(c1, 2), b.shl(c2, 4))
            b2 = b.or_(b.shr(c2, 4), b.shl(c3, 2))
            g = b.shape(codes)[0] // 4
            pairs = vector.InterleaveOp(b0, b1).result
            mask = [j for i in range(g) for j in (2 * i, 2 * i + 1, 2 * g + i)]
            codes = vector.ShuffleOp(pairs, b2, mask).result
        self.store(codes, q, self._code_bytes(at),
                   None if count is None else self._code_bytes(count))

    def f4_pairs(self, codes: Any) -> Any:
        """f4 codes as vector<V x i32> -> vector<V/2 x i64> whose low bytes are the packed
        bytes (lane pairs as one i64: c0 | c1 << 4)."""
        b = self.b
        w = self.m["vector"].BitCastOp(self.vec("i64", b.shape(codes)[0] // 2), codes).result
        return b.or_(w, b.shr(w, 28))

    def load_codes(self, q: Any, at: Any, count: Any = None) -> Any:
        """``V`` element codes (vector<V x i8>, low bits) of values ``at``... (see
        :meth:`store_codes` for the layouts); with ``count``, lanes past it are garbage."""
        b, vector = self.b, self.m["vector"]
        bits, n = self.code_bits, self.lanes
        off = self._code_bytes(at)
        nbytes = None if count is None else self._code_bytes(count)
        if bits == 4:
            p = self.load(q, off, self.vec("i8", n // 2), nbytes)
            return vector.InterleaveOp(b.and_(p, 0xF), b.shr(p, 4)).result
        if bits == 6 and self.packed:
            g = n // 4
            p = self.load(q, off, self.vec("i8", 3 * g), nbytes)
            b0, b1, b2 = (vector.ShuffleOp(p, p, [3 * i + j for i in range(g)]).result
                          for j in range(3))
            c0 = b.and_(b0, 0x3F)
            c1 = b.or_(b.shr(b0, 6), b.shl(b.and_(b1, 0xF), 2))
            c2 = b.or_(b.shr(b1, 4), b.shl(b.and_(b2, 0x3), 4))
            c3 = b.shr(b2, 2)
            return vector.InterleaveOp(vector.InterleaveOp(c0, c2).result,
                                       vector.InterleaveOp(c1, c3).result).result
        return self.load(q, off, self.vec("i8"), nbytes)

    # -- loops ------------------------------------------------------------------------------
    def over_chunks(self, start: Any, body, init: list[Any] | None = None) -> list[Any]:
        """Runs ``body(value offset, *carried)`` for each chunk of the block at ``start``; one
        chunk is emitted straight-line, several as an ``scf.for``."""
        if self.chunks == 1:
            return list(body(start, *(init or [])) or [])

        def step(c, *carried):
            a = self.m["arith"]
            at = a.AddIOp(start, a.MulIOp(c, self.index(self.lanes)).result).result
            return body(at, *carried)

        loop = self.for_each(self.index(0), self.index(self.chunks), step, init)
        return list(loop.results)

    def for_each(self, lo: Any, hi: Any, body, iter_args: list[Any] | None = None,
                 step: int = 1) -> Any:
        """``scf.for %i = lo to hi step step`` whose body is ``body(i, *args) -> yielded``."""
        scf = self.m["scf"]
        loop = scf.ForOp(lo, hi, self.index(step), iter_args or [])
        with self.ir.InsertionPoint(loop.body):
            out = body(loop.induction_variable, *loop.inner_iter_args)
            scf.YieldOp(list(out or []))
        return loop

    def when(self, cond: Any, then, otherwise=None) -> None:
        """``scf.if cond { then() } else { otherwise() }``."""
        scf = self.m["scf"]
        op = scf.IfOp(cond, [], has_else=otherwise is not None)
        with self.ir.InsertionPoint(op.then_block):
            then()
            scf.YieldOp([])
        if otherwise is not None:
            with self.ir.InsertionPoint(op.else_block):
                otherwise()
                scf.YieldOp([])

    # -- the function -----------------------------------------------------------------------
    def signature(self) -> list[Any]:
        """The buffer types, in order (the range ``b0, b1`` follows)."""
        raise NotImplementedError

    def run_range(self, args: list[Any], b0: Any, b1: Any) -> None:
        """CPU: the body over units ``[b0, b1)``."""
        raise NotImplementedError

    def run_unit(self, args: list[Any], i: Any) -> None:
        """GPU: the body of unit ``i``."""
        raise NotImplementedError

    def function(self) -> Any:
        ir, spec = self.ir, self.spec
        index = ir.IndexType.get()
        ftype = ir.FunctionType.get([*self.signature(), index, index], [])
        if self.target != "gpu":
            f = self.m["func"].FuncOp(spec.name, ftype)
            entry = f.add_entry_block()
        else:
            stage = self.staged_output()
            if stage is not None:  # the CTA's stage, a shared-memory global of the gpu.module
                self.m["memref"].GlobalOp(self.stage_symbol(), self.stage_type(stage[1]),
                                          sym_visibility="private", alignment=16)
            f = self.m["gpu"].GPUFuncOp(ftype, sym_name=spec.name, kernel=True)
            entry = f.add_entry_block()
        with ir.InsertionPoint(entry):
            a = list(entry.arguments)
            bufs, b0, b1 = a[:-2], a[-2], a[-1]
            if self.target == "cpu":
                self.run_range(bufs, b0, b1)
                self.m["func"].ReturnOp([])
            elif self.target == "gpu-body":
                self.for_each(b0, b1, lambda i: self.run_unit(bufs, i))
                self.m["func"].ReturnOp([])
            else:
                gpu, ar = self.m["gpu"], self.m["arith"]
                dim = ir.Attribute.parse("#gpu<dim x>")
                t = ar.AddIOp(ar.MulIOp(gpu.BlockIdOp(dim).result,
                                        gpu.BlockDimOp(dim).result).result,
                              gpu.ThreadIdOp(dim).result).result
                i = ar.AddIOp(b0, t).result
                if stage is None:
                    self.when(self.b.lt(i, b1), lambda: self.run_unit(bufs, i))
                else:
                    self.run_staged(bufs, b0, b1, i, stage)
                gpu.ReturnOp([])
        return f

    # -- GPU: widening kernels' stores through shared memory --------------------------------
    def staged_output(self) -> tuple[int, int] | None:
        """GPU: (index of the output buffer, values per unit) when the kernel's one output is
        wide values written a whole unit per thread (dequantize, narrow -> wide converts,
        ``mx.cast``) and a CTA's units fit :data:`GPU_STAGE_BYTES`; else None.  A thread
        writing its own 64-128 contiguous bytes makes every warp store 32 separate L2
        transactions (stores are not cached in L1: the H200 ran such kernels at 15-25% of a
        copy); staged, the CTA's units land in shared memory and consecutive threads write
        them back 16 bytes each."""
        widening = (isinstance(self.spec, ConvertSpec) and not self.spec.truncates
                    or isinstance(self.spec, CastSpec)
                    or isinstance(self.spec, KernelSpec) and self.spec.op == "dequantize")
        if self.target != "gpu" or not widening:  # each has one output: wide values
            return None
        unit = self.spec.k  # values a unit (thread) writes: a block, a tile or a vector
        if GPU_THREADS * unit * self.spec.results()[0].dtype.itemsize > GPU_STAGE_BYTES:
            return None
        return len(self.spec.operands()), unit

    def stage_type(self, unit: int) -> Any:
        """The stage's type: a CTA's ``unit``-value outputs in workgroup (shared) memory."""
        ir = self.ir
        wide = types.of_dtype(self.spec.results()[0].dtype).mlir
        return ir.MemRefType.get([GPU_THREADS * unit], ir.Type.parse(wide),
                                 memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>"))

    def run_staged(self, bufs: list[Any], b0: Any, b1: Any, i: Any,
                   stage: tuple[int, int]) -> None:
        """GPU: unit ``i`` written into this CTA's shared-memory stage (through a view of the
        output whose element ``i * U + j`` is the stage's ``tid * U + j``), a barrier, then the
        CTA's values copied to the output by consecutive threads, 16 bytes each (the last
        piece masked at the output's size)."""
        ir, a, gpu, memref = self.ir, self.m["arith"], self.m["gpu"], self.m["memref"]
        at, unit = stage
        y = bufs[at]
        stage_t = self.stage_type(unit)
        wide, space = stage_t.element_type, stage_t.memory_space
        smem = memref.GetGlobalOp(stage_t, self.stage_symbol()).result
        dim = ir.Attribute.parse("#gpu<dim x>")
        tid = gpu.ThreadIdOp(dim).result
        size = self.dim(y)
        dyn = ir.ShapedType.get_dynamic_size()
        layout = ir.Attribute.parse("strided<[1], offset: ?>")
        view_t = ir.MemRefType.get([dyn], wide, layout=layout, memory_space=space)
        u = self.index(unit)
        offset = a.SubIOp(a.MulIOp(tid, u).result, a.MulIOp(i, u).result).result
        view = memref.ReinterpretCastOp(view_t, smem, [offset], [size], [], [dyn], [dyn],
                                        [1]).result
        staged = list(bufs)
        staged[at] = view
        self.when(self.b.lt(i, b1), lambda: self.run_unit(staged, i))
        gpu.BarrierOp()
        # the CTA's values [lo, hi): its units, cut at the range's end and the output's size
        first = a.AddIOp(b0, a.MulIOp(gpu.BlockIdOp(dim).result,
                                      self.index(GPU_THREADS)).result).result
        lo = a.MulIOp(first, u).result
        last = a.MinUIOp(a.AddIOp(first, self.index(GPU_THREADS)).result, b1).result
        hi = a.MinUIOp(a.MulIOp(last, u).result, size).result
        count = a.SubIOp(a.MaxUIOp(hi, lo).result, lo).result
        w = 16 // self.spec.results()[0].dtype.itemsize
        vt = ir.VectorType.get([w], wide)

        def piece(j: Any) -> None:
            rest = a.SubIOp(count, j).result
            out = a.AddIOp(lo, j).result
            self.when(self.b.ge(rest, self.index(w)),
                      lambda: self.store(self.load(smem, j, vt), y, out),
                      lambda: self.store(self.load(smem, j, vt, rest), y, out, rest))

        self.for_each(a.MulIOp(tid, self.index(w)).result, count, piece, step=GPU_THREADS * w)

    def stage_symbol(self) -> str:
        return f"{self.spec.name}_stage"

    def dim(self, mem: Any) -> Any:
        return self.m["memref"].DimOp(mem, self.index(0)).result


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _block_lanes(k: int) -> int:
    """The vector length a block of ``k`` values is loaded in: ``k`` itself up to
    :data:`_MAX_LANES`, else the largest power of two up to it dividing ``k``."""
    return k if k <= _MAX_LANES else next(v for v in (64, 32, 16, 8, 4, 2, 1) if k % v == 0)


class _MXKernel(_Kernel):
    """Quantize / dequantize: the loop over groups of blocks and the per-block body."""

    def __init__(self, spec: KernelSpec, mods: dict[str, Any], target: str):
        k = spec.k
        lanes = _block_lanes(k)
        fmt = spec.fmt
        super().__init__(spec, mods, target, lanes, fmt.bits if not fmt.is_int else 8,
                         spec.packed)
        self.fmt = fmt
        #: the KernelSpec of the kernel's MX math (``spec`` itself; a cast's own, see
        #: :class:`_MXCastKernel`)
        self.mx = spec
        self.chunks = k // lanes
        #: blocks per loop iteration: their scale arithmetic runs as one vector (GPU: one
        #: block per thread)
        self.group = (1 if self.chunks > 1 or target != "cpu"
                      else max(1, min(16, _GROUP_VALUES // k)))

    def whole_groups_end(self, b0: Any, b1: Any, G: int) -> Any:
        """Where the whole groups of ``G`` blocks from ``b0`` end (at most ``b1``)."""
        a = self.m["arith"]
        n = a.SubIOp(b1, b0).result
        return a.AddIOp(b0, a.MulIOp(a.DivUIOp(n, self.index(G)).result,
                                     self.index(G)).result).result

    def grouped(self, b0: Any, b1: Any, body) -> None:
        """``body(i, G)`` for the groups of G blocks in ``[b0, b1)``, then ``body(i, 1)`` for
        the blocks left over."""
        G = self.group
        if G == 1:
            self.for_each(b0, b1, lambda i: body(i, 1))
            return
        mid = self.whole_groups_end(b0, b1, G)
        self.for_each(b0, mid, lambda i: body(i, G), step=G)
        self.for_each(mid, b1, lambda i: body(i, 1))

    # -- quantize ---------------------------------------------------------------------------
    def lane(self, v: Any, j: int) -> Any:
        """Lane ``j`` of a per-block value (itself when it is a scalar: a group of one)."""
        return self.m["vector"].ExtractOp(v, [], [j]).result if self.b.shape(v) else v

    def per_block(self, values: list[Any]) -> Any:
        """Scalars of the blocks of a group as one vector (one scalar stays a scalar)."""
        if len(values) == 1:
            return values[0]
        t = self.ir.VectorType.get([len(values)], values[0].type)
        return self.m["vector"].FromElementsOp(t, values).result

    def group_max(self, vs: list[Any]) -> Any:
        """vector<G x i32>: the signed maxima of the G (a power of two, at most the lanes)
        vectors ``vs``, in order -- a transposing reduction: pairs of vectors are merged by
        two shuffles and one max each (every lane then holds a partial maximum of one
        block), halving the lanes per block at each level, instead of a horizontal
        reduction per block."""
        b, vector = self.b, self.m["vector"]
        n = b.shape(vs[0])[0]
        while n > _REDUCE_LANES and len(vs) > 1:  # long blocks: their halves' maxima first
            h = n // 2
            vs = [b.max(vector.ShuffleOp(v, v, list(range(h))).result,
                        vector.ShuffleOp(v, v, list(range(h, n))).result) for v in vs]
            n = h
        seg = n  # lanes per block in each vector
        owners = [[j] for j in range(len(vs))]  # the block of each segment, per vector
        while len(vs) > 1 and seg > 1:
            h = seg // 2
            nxt, nown = [], []
            for (a, oa), (c, oc) in zip(zip(vs[0::2], owners[0::2]), zip(vs[1::2], owners[1::2])):
                lo, hi, own = [], [], []
                for p in range(n // seg):
                    for src, o in ((0, oa), (n, oc)):
                        lo += [src + p * seg + t for t in range(h)]
                        hi += [src + p * seg + h + t for t in range(h)]
                        own.append(o[p])
                nxt.append(b.max(vector.ShuffleOp(a, c, lo).result,
                                 vector.ShuffleOp(a, c, hi).result))
                nown.append(own)
            vs, owners, seg = nxt, nown, h
        v, own, width = vs[0], owners[0], seg
        while seg > 1:  # one vector left: reduce within its segments
            h = seg // 2
            swap = [p * seg + (t + h) % seg for p in range(n // seg) for t in range(seg)]
            v = b.max(v, vector.ShuffleOp(v, v, swap).result)
            seg = h
        where = {blk: p * width for p, blk in enumerate(own)}
        return vector.ShuffleOp(v, v, [where[j] for j in range(len(where))]).result

    def store_scales(self, s: Any, i: Any, codes: Any) -> None:
        if self.b.shape(codes):
            self.m["vector"].StoreOp(codes, s, [i])
        else:
            self.m["memref"].StoreOp(codes, s, [i])

    def group_starts(self, i: Any, count: int) -> list[Any]:
        """The value offsets of blocks ``i .. i + count``."""
        a = self.m["arith"]
        starts = [self.scaled_index(i, self.spec.k, 1)]
        starts += [a.AddIOp(starts[0], self.index(j * self.spec.k)).result
                   for j in range(1, count)]
        return starts

    def block_maxima(self, xbs: list[Any]) -> Any:
        """The maxima of |x| (bits) of the blocks ``xbs`` (one vector each): vector<G> for a
        group (:meth:`group_max`, or horizontal maxima), a scalar for one block."""
        b = self.b
        n = len(xbs)
        if 1 < n <= self.lanes and _power_of_two(n) and _power_of_two(self.lanes):
            return self.group_max([b.and_(xb, _MAG) for xb in xbs])
        i32 = self.ir.IntegerType.get_signless(32)
        return self.per_block([self.m["vector"].ReductionOp(i32, "maxsi", b.and_(xb, _MAG))
                               .result for xb in xbs])

    def quantize_group(self, i: Any, count: int, x: Any, g: Any, q: Any, s: Any,
                       g_exact: bool = True) -> None:
        """Blocks ``i .. i + count``: each block's values loaded once, the maxima reduced, the
        scale arithmetic done for the whole group at once (vector<count>), the elements
        converted from the loaded registers, the group's scales stored together.
        ``g_exact=False``: x / g may read subnormal x as zero (valid for |g| >=
        mx_math.NVFP4_G_FAST, see :func:`mx_math.divide_by_global`)."""
        b = self.b
        starts = self.group_starts(i, count)

        def bits_at(at: Any) -> Any:
            xb = self.load_bits(x, at)
            if g is not None:  # nvfp4: y = x / g, exactly (mx_math); g is RN_f64(1 / g) here
                xb = mx_math.divide_by_global(b, xb, b.broadcast(g, b.shape(xb)),
                                              exact_small=g_exact)
            return xb

        if self.chunks == 1:  # each block is one vector: loaded once, kept in registers
            xbs = [bits_at(st) for st in starts]
            amax = self.block_maxima(xbs)
        else:  # chunk by chunk: the maximum, then the elements (the block is in L1 by then)
            (amax,) = self.over_chunks(
                starts[0], lambda at, acc: [b.max(acc, self.block_maxima([bits_at(at)]))],
                [b.const(0, "i32")])
        nonfinite = b.ge(amax, _INF)
        if self.fmt.is_nvfp4:
            scale_codes, convert = self._nvfp4_scale(amax, nonfinite)
        else:
            scale_codes, convert = self._mx_scale(amax, nonfinite)
        held = self.put_scales(s, i, scale_codes)
        for j, st in enumerate(starts):
            if self.chunks == 1:
                self.put_elements(q, st, lambda j=j: convert(xbs[j], j), j, held)
            else:
                self.over_chunks(st, lambda at: self.put_elements(
                    q, at, lambda: convert(bits_at(at), 0), 0, held))

    def put_scales(self, s: Any, i: Any, codes: Any) -> Any:
        """Where a group's scale codes go: stored at ``s[i]``.  Returns what
        :meth:`put_elements` needs of them (nothing here; a cast decodes them,
        :class:`_MXCastKernel`)."""
        self.store_scales(s, i, codes)
        return None

    def put_elements(self, q: Any, at: Any, codes, j: int, held: Any) -> None:
        """Where the element codes of values ``at``... (block ``j`` of its group; ``codes()``
        emits them) go: stored in ``q``."""
        self.store_codes(q, at, codes())

    # -- f4 elements with a limits table (CPU: nvfp4 and mxfp4) ----------------------------
    @property
    def f4_columns(self) -> int:
        """The limits table's columns: one per scale code (E4M3 for nvfp4, E8M0 for mxfp4)."""
        return 128 if self.fmt.is_nvfp4 else 256

    def f4_head(self, i: Any, count: int, x: Any, g: Any, s: Any) -> tuple[list, Any]:
        """The first half of f4 blocks ``i .. i + count`` with a limits table: the values
        loaded (x's bits, kept in registers), the maxima of |x| (nvfp4: then of |y| = |x / g|;
        ``g`` is RN_f64(1 / g)), the scale codes, stored; returns (the values, the codes)."""
        b, a = self.b, self.m["arith"]
        starts = self.group_starts(i, count)
        if PREFETCH and count > 1:  # the next groups' lines (the scale's chain is long)
            i32 = self.ir.IntegerType.get_signless(32)
            for j in range(0, count * self.spec.k, 16):
                at = a.AddIOp(starts[0], self.index(PREFETCH + j)).result
                self.m["memref"].PrefetchOp(x, [at], False, self.ir.IntegerAttr.get(i32, 3),
                                            True)
        xbs = [self.load_bits(x, st) for st in starts]
        amax = self.block_maxima(xbs)
        if g is not None:
            amax = b.and_(mx_math.divide_by_global(b, amax, b.broadcast(g, b.shape(amax)),
                                                   exact_small=False), _MAG)
        if self.fmt.is_nvfp4:
            codes = self.to_narrow(mx_math.nvfp4_scale_f32(b, amax, b.ge(amax, _INF)), "f32",
                                   "f8E4M3FN")
        else:
            codes, _ = self._mx_codes(amax, b.ge(amax, _INF))
        self.put_scales(s, i, codes)
        return xbs, codes

    def f4_tail(self, i: Any, xbs: list[Any], codes: Any, q: Any, table: Any,
                g_neg: bool) -> None:
        """The second half: the elements of the blocks from their values and scale codes
        (:meth:`f4_elements`), stored packed -- two blocks per store (the codes narrowed
        in registers: a narrowing store to memory is slow on AMD Zen 4)."""
        b, vector = self.b, self.m["vector"]
        starts = self.group_starts(i, len(xbs))
        convert = self.f4_elements(codes, table, g_neg)
        ws = [self.f4_pairs(convert(xb, j)) for j, xb in enumerate(xbs)]
        if len(ws) % 2:  # one block (or an odd one out): a store of its own
            self.store(b.convert(ws[-1], "i8"), q, self._code_bytes(starts[-1]))
            ws = ws[:-1]
        n = b.shape(xbs[0])[0] // 2
        for j in range(0, len(ws), 2):  # the low bytes of two blocks' lanes (one vpermt2b)
            bs = [vector.BitCastOp(self.vec("i8", 8 * n), w).result for w in ws[j:j + 2]]
            both = vector.ShuffleOp(bs[0], bs[1], [8 * t for t in range(2 * n)]).result
            self.store(both, q, self._code_bytes(starts[j]))

    def f4_pipelined(self, b0: Any, b1: Any, x: Any, g: Any, q: Any, s: Any, table: Any,
                     g_neg: bool) -> None:
        """Blocks ``[b0, b1)`` in groups, software-pipelined: each iteration loads the next
        group and works out its scales while the elements of the group before it are
        converted from the registers it kept (so the long chain from the loads through the
        scale to the table's limits overlaps other work); the blocks left over one by one."""
        a = self.m["arith"]
        G = min(self.group, max(2, PIPE_VALUES // self.spec.k))
        G = 1 << (G.bit_length() - 1)  # a power of two: blocks stored in pairs
        mid = self.whole_groups_end(b0, b1, G)

        def pipeline() -> None:
            xbs, codes = self.f4_head(b0, G, x, g, s)

            def step(i: Any, *carried: Any) -> list[Any]:
                nxbs, ncodes = self.f4_head(i, G, x, g, s)
                prev = a.SubIOp(i, self.index(G)).result
                self.f4_tail(prev, list(carried[:-1]), carried[-1], q, table, g_neg)
                return [*nxbs, ncodes]

            first = a.AddIOp(b0, self.index(G)).result
            loop = self.for_each(first, mid, step, [*xbs, codes], step=G)
            last = a.SubIOp(mid, self.index(G)).result
            res = list(loop.results)
            self.f4_tail(last, res[:-1], res[-1], q, table, g_neg)

        self.when(self.b.lt(b0, mid), pipeline)

        def one(i: Any) -> None:
            xbs, codes = self.f4_head(i, 1, x, g, s)
            self.f4_tail(i, xbs, codes, q, table, g_neg)

        self.for_each(mid, b1, one)

    def _mx_codes(self, amax: Any, nonfinite: Any) -> tuple[Any, Any]:
        """docs/semantics.md section 3 for a group of blocks: their E8M0 scale codes, and E."""
        b, fmt = self.b, self.fmt
        e = mx_math.shared_exponent(b, amax, fmt, self.mx.scale_mode)
        return b.convert(b.select(nonfinite, b.like(e, 255), b.add(e, 127)), "i8"), e

    def _mx_scale(self, amax: Any, nonfinite: Any):
        """docs/semantics.md section 3 for a group of blocks: their scale codes, and the
        conversion of block ``j``'s elements."""
        b, fmt = self.b, self.fmt
        codes, e = self._mx_codes(amax, nonfinite)
        neg_e = b.sub(0, e)
        limit = mx_math.f32_bits_floor(fractions.Fraction(fmt.max_elem))

        def convert(xb: Any, j: int) -> Any:
            y = mx_math.scale_by_pow2(b, xb, self.lane(neg_e, j), [], limit,
                                      self.lane(nonfinite, j))
            if fmt.is_int:
                return b.convert(b.round_even(b.mul(y, 64.0)), "i8")
            # finite and within +-max_elem: a saturating conversion is exact
            return self.to_narrow(y, "f32", fmt.element, satfinite=True)

        return codes, convert

    def _nvfp4_scale(self, amax: Any, nonfinite: Any):
        """docs/semantics.md section 4 for a group of blocks: their E4M3 scale codes, and the
        conversion of block ``j``'s elements."""
        b = self.b
        s = mx_math.nvfp4_scale_f32(b, amax, nonfinite)
        codes = self.to_narrow(s, "f32", "f8E4M3FN")
        sd = self.from_narrow(codes, "f8E4M3FN", "f32")
        drop = self.m["arith"].OrIOp(nonfinite, b.eq(sd, 0.0)).result
        if self.target == "cpu" and NVFP4_ELEMENTS != "quotient":
            def convert(xb: Any, j: int) -> Any:
                c = mx_math.nvfp4_element_codes(b, xb, b.broadcast(self.lane(sd, j), b.shape(xb)))
                return b.convert(b.select(self.lane(drop, j), b.like(c, 0), c), "i8")

            return codes, convert
        recip = mx_math.nvfp4_reciprocal(b, sd, drop)

        def convert(xb: Any, j: int) -> Any:
            v = mx_math.nvfp4_element_values(b, xb, self.lane(recip, j))
            v = b.select(self.lane(drop, j), b.like(v, 0.0), v)
            return self.to_narrow(v, "f32", "f4E2M1FN", satfinite=True)  # finite, in [-6, 6]

        return codes, convert

    #: rows of the table of :meth:`f4_limits` after the seven limits: 8 for a block that
    #: keeps its elements (0 for one dropped), and 8 where a kept block's signs flip (g < 0)
    _KEEP_ROW, _FLIP_ROW = 7, 8

    def f4_table(self) -> Any:
        """Stack space for :meth:`f4_limits` (allocate it in the entry block)."""
        return self.m["memref"].AllocaOp(self.ir.MemRefType.get(
            [9 * self.f4_columns], self.ir.IntegerType.get_signless(32)), [], []).result

    def f4_limits(self, table: Any, g_abs: Any | None = None, g_neg: Any | None = None) -> Any:
        """Fills ``table`` (:meth:`f4_table`, memref<9 x C x i32> flattened; once per call)
        whose column ``c`` serves the blocks of scale code ``c``: rows 0..6 the smallest |x|
        (bits) whose element passes each f4 threshold in order -- nvfp4:
        :func:`mx_math.nvfp4_limit` (C = 128 E4M3 codes); mxfp4: :func:`mx_math.f4_limit_pow2`
        (C = 256 E8M0 codes) -- or -1, which no |x| passes, for the codes of a dropped block
        (nvfp4's 0 and NaN, the NaN scale), then :data:`_KEEP_ROW` and :data:`_FLIP_ROW`
        (``g_neg``: whether g's sign bit is set).  So the elements of a block cost comparisons
        alone."""
        b, ir = self.b, self.ir
        a, vector = self.m["arith"], self.m["vector"]
        cols = self.f4_columns
        iota = a.ConstantOp(self.vec("i32", 16), ir.DenseElementsAttr.get(
            np.arange(16, dtype=np.int32), type=self.vec("i32", 16))).result

        def chunk(c0: Any) -> None:
            c32 = b.add(iota, b.broadcast(a.IndexCastOp(ir.IntegerType.get_signless(32),
                                                        c0).result, [16]))
            if self.fmt.is_nvfp4:
                sd = self.from_narrow(b.convert(c32, "i8"), "f8E4M3FN", "f32")
                drop = a.OrIOp(b.eq(c32, 0), b.eq(c32, 0x7F)).result
                ga = None if g_abs is None else b.broadcast(g_abs, [16])
                rows = [mx_math.nvfp4_limit(b, b.mul(sd, t), up, ga)
                        for t, up in mx_math._F4_THRESHOLDS]
            else:
                drop = b.eq(c32, 255)
                rows = [mx_math.f4_limit_pow2(b, t, up, b.sub(c32, 127))
                        for t, up in mx_math._F4_THRESHOLDS]
            rows = [b.select(drop, b.like(r, -1), r) for r in rows]
            keep = b.select(drop, b.like(c32, 0), b.like(c32, 8))
            rows += [keep, b.like(c32, 0) if g_neg is None else b.select(
                g_neg, keep, b.like(c32, 0))]
            for r, v in enumerate(rows):
                vector.StoreOp(v, table, [a.AddIOp(c0, self.index(r * cols)).result])

        self.for_each(self.index(0), self.index(cols), chunk, step=16)
        return table

    def f4_elements(self, codes: Any, table: Any, g_neg: bool):
        """Block ``j``'s f4 codes (i32) from its x's bits and its scale code (lane ``j``
        of ``codes``) with the table of :meth:`f4_limits`: a binary search over the seven
        limits of that code (three unsigned comparisons of |x|'s bits); the sign is y's, x's
        flipped where g < 0 (``g_neg``: read the table's flip row)."""
        b, ir = self.b, self.ir
        a, memref = self.m["arith"], self.m["memref"]
        i32 = ir.IntegerType.get_signless(32)

        def uge(p: Any, q: Any) -> Any:
            return a.CmpIOp(a.CmpIPredicate.uge, p, q).result

        def convert(xb: Any, j: int) -> Any:
            code = a.ExtUIOp(i32, self.lane(codes, j)).result
            col = a.IndexCastOp(ir.IndexType.get(), code).result
            shape = b.shape(xb)

            def row(r: int) -> Any:
                at = a.AddIOp(col, self.index(r * self.f4_columns)).result
                return b.broadcast(memref.LoadOp(table, [at]).result, shape)

            mag = b.and_(xb, _MAG)
            hi = uge(mag, row(3))                                         # code >= 4
            mid = uge(mag, b.select(hi, row(5), row(1)))                  # >= 6, or >= 2
            low = uge(mag, b.select(hi, b.select(mid, row(6), row(4)),
                                    b.select(mid, row(2), row(0))))
            c = b.and_(b.shr(xb, 28), row(self._KEEP_ROW))  # the sign bit (+0 if dropped)
            if g_neg:
                c = b.xor(c, row(self._FLIP_ROW))
            c = b.select(hi, b.add(c, 4), c)
            c = b.select(mid, b.add(c, 2), c)
            return b.select(low, b.add(c, 1), c)

        return convert

    # -- dequantize -------------------------------------------------------------------------
    def dequantize_group(self, i: Any, count: int, q: Any, s: Any, g: Any, y: Any) -> None:
        """Blocks ``i .. i + count``: the group's scales loaded and decoded together, each
        block's element codes loaded once, decoded, scaled and stored."""
        k = self.spec.k
        a = self.m["arith"]
        if count > 1:
            raw = self.m["vector"].LoadOp(self.vec("i8", count), s, [i]).result
        else:
            raw = self.m["memref"].LoadOp(s, [i]).result
        held = self.scale_values(raw)
        start = self.scaled_index(i, k, 1)
        for j in range(count):
            st = start if j == 0 else a.AddIOp(start, self.index(j * k)).result

            def step(at: Any, j: int = j) -> None:
                self.store_values(y, at, self.element_values(self.load_codes(q, at), j, held, g))

            self.over_chunks(st, step)

    def scale_values(self, raw: Any) -> tuple[Any, Any]:
        """What dequantize reads of a group's scale codes ``raw`` (i8, one per block): nvfp4
        (their E4M3 values as f32, None); the MX formats (the exponent shift of the
        elements' values and whether the scale is NaN; on the GPU the scale's f32 value,
        NaN for the NaN code, and None: :meth:`element_values`)."""
        b, fmt = self.b, self.fmt
        if fmt.is_nvfp4:
            return self.from_narrow(raw, "f8E4M3FN", "f32"), None
        code = b.and_(b.convert(raw, "i32"), 0xFF)  # the bytes, unsigned
        shift = b.sub(code, 127 + (6 if fmt.is_int else 0))
        if self.target != "cpu":  # 2^shift, shift in [-133, 127]; the NaN scale a NaN
            bits = b.select(b.lt(shift, -126), b.shl(b.like(shift, 1), b.add(shift, 149)),
                            b.shl(b.add(shift, 127), 23))
            return b.bitcast(b.select(b.eq(code, 255), b.like(bits, _NAN), bits), "f32"), None
        return shift, b.eq(code, 255)

    def element_values(self, codes: Any, j: int, held: tuple[Any, Any], g: Any) -> Any:
        """The f32 bits of the dequantized values of element ``codes`` (a vector; f4 codes
        may come as i32) of block ``j`` of a group whose scales read ``held``
        (:meth:`scale_values`); ``g``: nvfp4's global scale (or None)."""
        b, fmt = self.b, self.fmt
        if fmt.is_int:
            ev = b.convert(codes, "f32")
        else:
            ev = self.from_narrow(codes, fmt.element, "f32")
        if fmt.is_nvfp4:
            p = b.mul(ev, self.lane(held[0], j))  # exact and normal (docs/semantics.md 5)
            if g is not None:
                p = mx_math.mul_f32_exact(b, p, g)
            return b.bitcast(p, "i32")
        shift, is_nan = held
        if self.target != "cpu":
            # the GPU's f32 product (no flush to zero) by 2^shift: exact, subnormal results
            # included (every element value has at most 7 significant bits and the smallest
            # product is 2^-143), +-Inf past f32's range, NaN by a NaN scale -- ldexp_bits'
            # bits in one instruction (XLA:CPU's threads flush subnormals, so the CPU builds
            # the bits)
            return b.bitcast(b.mul(ev, self.lane(shift, j)), "i32")
        r = mx_math.ldexp_bits(b, b.bitcast(ev, "i32"), self.lane(shift, j), small="exact",
                               normal_input=True)
        return b.select(self.lane(is_nan, j), b.like(r, _NAN), r)

    # -- the function -----------------------------------------------------------------------
    def signature(self) -> list[Any]:
        ir, spec = self.ir, self.spec
        dyn = ir.ShapedType.get_dynamic_size()

        def mem(elt: str) -> Any:
            return ir.MemRefType.get([dyn], ir.Type.parse(elt))

        g_t = [mem("f32")] if spec.global_scale else []
        if spec.op == "quantize":
            return [mem(spec.wide), *g_t, mem("i8"), mem("i8")]
        return [mem("i8"), mem("i8"), *g_t, mem(spec.wide)]

    def _global(self, a: list[Any]) -> Any:
        if not self.spec.global_scale:
            return None
        g_at = 1 if self.spec.op == "quantize" else 2
        g = self.m["memref"].LoadOp(a[g_at], [self.index(0)]).result
        if self.spec.op == "quantize":  # x / g as x * RN_f64(1 / g) (mx_math.f32_quotient)
            g = mx_math.reciprocal_f64(self.b, self.b.bitcast(g, "i32"))
        return g

    def _unit(self, a: list[Any], g: Any):
        if self.spec.op == "quantize":
            x, q, s = a[0], a[-2], a[-1]
            return lambda i, n: self.quantize_group(i, n, x, g, q, s)
        q, s, y = a[0], a[1], a[-1]
        return lambda i, n: self.dequantize_group(i, n, q, s, g, y)

    def f4_by_limits(self) -> bool:
        """Whether this (CPU quantize) kernel converts f4 elements with :meth:`f4_limits`."""
        if self.chunks > 1:  # blocks longer than a vector: quantize_group's chunks
            return False
        if self.fmt.is_nvfp4:
            return NVFP4_ELEMENTS == "limits"
        return MXFP4_LIMITS and self.code_bits == 4 and self.group > 1

    def run_range(self, a: list[Any], b0: Any, b1: Any) -> None:
        g = self._global(a)
        limits = self.spec.op == "quantize" and self.f4_by_limits()
        if limits and g is None:
            x, q, s = a[0], a[-2], a[-1]
            self.f4_pipelined(b0, b1, x, None, q, s, self.f4_limits(self.f4_table()), False)
            return
        if g is None or self.spec.op != "quantize" or not (
                limits or NVFP4_ELEMENTS == "thresholds"):
            self.grouped(b0, b1, self._unit(a, g))
            return
        # nvfp4 with g: the loop twice, picked by |g| once per call -- the usual g takes the
        # limits (or reads x with a plain conversion), a tiny g reads subnormal x exactly
        # (mx_math.divide_by_global)
        x, q, s = a[0], a[-2], a[-1]
        graw = self.b.bitcast(self.m["memref"].LoadOp(a[1], [self.index(0)]).result, "i32")
        gb = self.b.and_(graw, _MAG)
        fast = self.b.ge(gb, mx_math.f32_bits_floor(fractions.Fraction(mx_math.NVFP4_G_FAST)))
        if limits:
            space = self.f4_table()  # in the entry block

            def usual() -> None:
                table = self.f4_limits(space, self.b.convert(self.b.bitcast(gb, "f32"), "f64"),
                                       self.b.lt(graw, 0))
                self.f4_pipelined(b0, b1, x, g, q, s, table, True)
        else:
            def usual() -> None:
                self.grouped(b0, b1, lambda i, n: self.quantize_group(i, n, x, g, q, s,
                                                                     g_exact=False))
        self.when(fast, usual, lambda: self.grouped(b0, b1, self._unit(a, g)))

    def run_unit(self, a: list[Any], i: Any) -> None:
        self._unit(a, self._global(a))(i, 1)


class _MXCastKernel(_MXKernel):
    """``mx.cast`` to an MX format's datatype (:attr:`CastSpec.mx_spec`; CPU and GPU): the MX
    kernels' math, per block the format's quantize -- the same loop, groups of blocks, scale
    choice and element codes as the quantize kernel (:meth:`_MXKernel.quantize_group`, f4 by
    limits tables in the software-pipelined loop) -- then its dequantize
    (:meth:`_MXKernel.scale_values`, :meth:`_MXKernel.element_values`) from the registers:
    ``x`` is read once and ``y`` written once, no element or scale reaches memory.  Its
    signature and name are the cast's (``spec`` is the :class:`CastSpec`)."""

    def __init__(self, spec: CastSpec, mods: dict[str, Any], target: str):
        mx = spec.mx_spec
        if mx is None:
            raise ValueError(f"{spec.name}: no MX format's cast (CastSpec.mx_spec)")
        super().__init__(mx, mods, target)
        self.spec = spec

    def put_scales(self, s: Any, i: Any, codes: Any) -> Any:
        return self.scale_values(codes)  # kept in registers, read as dequantize reads them

    def put_elements(self, y: Any, at: Any, codes, j: int, held: Any) -> None:
        """The values of block ``j``'s ``codes()`` dequantized and stored at ``y[at]`` -- or,
        for a block whose scale is NaN (it held NaN or Inf), the NaN its every value
        dequantizes to, without forming its codes: a branch, so that such blocks cost about a
        store, as in the general cast kernel (whose compiled code skips a non-finite tile's
        arithmetic: inputs with many such blocks ran up to 3.8x faster there without it); on
        finite data it costs blocks of 2-8 values 4-15%, longer ones nothing measurable."""
        b = self.b
        if held[1] is None:  # the scale as an f32 (nvfp4; the GPU's MX formats)
            nan = b.gt(b.and_(b.bitcast(self.lane(held[0], j), "i32"), _MAG), _INF)
        else:
            nan = self.lane(held[1], j)
        self.when(nan, lambda: self.store_values(y, at, b.const(_NAN, "i32", (self.lanes,))),
                  lambda: self.store_values(y, at, self.element_values(codes(), j, held, None)))

    def f4_tail(self, i: Any, xbs: list[Any], codes: Any, y: Any, table: Any,
                g_neg: bool) -> None:
        """The pipelined loop's second half (:meth:`_MXKernel.f4_tail`): each block's f4
        codes from the limits table, dequantized and stored."""
        starts = self.group_starts(i, len(xbs))
        convert = self.f4_elements(codes, table, g_neg)
        held = self.scale_values(codes)
        for j, (st, xb) in enumerate(zip(starts, xbs)):
            self.put_elements(y, st, lambda xb=xb, j=j: convert(xb, j), j, held)

    def signature(self) -> list[Any]:
        dyn = self.ir.ShapedType.get_dynamic_size()
        wide = self.ir.MemRefType.get([dyn], self.ir.Type.parse(self.spec.wide))
        return [wide, wide]

    def run_range(self, a: list[Any], b0: Any, b1: Any) -> None:
        x, y = a
        if self.f4_by_limits():
            self.f4_pipelined(b0, b1, x, None, y, None, self.f4_limits(self.f4_table()), False)
        else:
            self.grouped(b0, b1, lambda i, n: self.quantize_group(i, n, x, None, y, None))

    def run_unit(self, a: list[Any], i: Any) -> None:
        self.quantize_group(i, 1, a[0], None, a[1], None)


class _ValueUnits(_Kernel):
    """A kernel whose units are one vector (``lanes`` values) of one array, the last unit cut
    at the value count (masked loads and stores): subclasses say what ``values(args, at,
    count)`` does with the values ``at``... and which buffer ``sized(args)`` holds them."""

    def values(self, a: list[Any], at: Any, count: Any = None) -> None:
        raise NotImplementedError

    def sized(self, a: list[Any]) -> Any:
        raise NotImplementedError

    def _bounds(self, a: list[Any], u0: Any, u1: Any) -> tuple[Any, Any]:
        """Values ``[lo, hi)`` of units ``[u0, u1)``, cut at the value count."""
        ar = self.m["arith"]
        n = self.dim(self.sized(a))
        lo = self.scaled_index(u0, self.lanes, 1)
        hi = ar.MinUIOp(self.scaled_index(u1, self.lanes, 1), n).result
        return lo, ar.MaxUIOp(lo, hi).result

    def run_range(self, a: list[Any], b0: Any, b1: Any) -> None:
        ar = self.m["arith"]
        lo, hi = self._bounds(a, b0, b1)
        full = self.scaled_index(self.scaled_index(ar.SubIOp(hi, lo).result, 1, self.lanes),
                                 self.lanes, 1)
        whole = ar.AddIOp(lo, full).result
        self.for_each(lo, whole, lambda at: self.values(a, at), step=self.lanes)
        rest = ar.SubIOp(hi, whole).result
        self.when(self.b.gt(rest, self.index(0)), lambda: self.values(a, whole, rest))

    def run_unit(self, a: list[Any], i: Any) -> None:
        ar = self.m["arith"]
        lo, hi = self._bounds(a, i, ar.AddIOp(i, self.index(1)).result)
        rest = ar.SubIOp(hi, lo).result
        self.when(self.b.eq(rest, self.index(self.lanes)),
                  lambda: self.values(a, lo),
                  lambda: self.values(a, lo, rest))


class _ConvertKernel(_ValueUnits):
    """A plain conversion: units of :data:`CONVERT_LANES` values, the last one masked."""

    def __init__(self, spec: ConvertSpec, mods: dict[str, Any], target: str):
        super().__init__(spec, mods, target, CONVERT_LANES,
                         types.float_type(spec.narrow).bits, spec.packed)

    def signature(self) -> list[Any]:
        ir, spec = self.ir, self.spec
        dyn = ir.ShapedType.get_dynamic_size()
        wide = ir.MemRefType.get([dyn], ir.Type.parse(spec.wide))
        codes = ir.MemRefType.get([dyn], ir.IntegerType.get_signless(8))
        return [wide, codes] if spec.truncates else [codes, wide]

    def sized(self, a: list[Any]) -> Any:
        return a[0] if self.spec.truncates else a[1]

    def values(self, a: list[Any], at: Any, count: Any = None) -> None:
        """Values ``at``... (``V`` of them, or ``count``)."""
        spec = self.spec
        x, y = a
        if spec.truncates:
            v = self.load(x, at, self.vec(spec.src), count)
            self.store_codes(y, at, self.to_narrow(v, spec.src, spec.dst), count)
        else:
            f = self.from_narrow(self.load_codes(x, at, count), spec.src, spec.dst)
            self.store(f, y, at, count)


class _CastKernel(_ValueUnits):
    """``mx.cast`` by the general recipe (every cast but the CPU's of MX formats' datatypes,
    :class:`_MXCastKernel`): unscaled, units of one vector of :data:`_CAST_LANES` values (the
    last one masked); with an exponent scale, units of one tile, read in vectors of up to
    :data:`_CAST_LANES` values (tiles longer than that chunk by chunk: the maximum, then the
    elements, re-read from L1), the
    scale exponent chosen from their maximum magnitude in scalar integer arithmetic, and each
    value rounded and decoded from the registers by the spec-driven codec with the tile's
    exponent as its shift (no scaled value is ever formed)."""

    def __init__(self, spec: CastSpec, mods: dict[str, Any], target: str):
        tiled = spec.scale is not None
        lanes = min(spec.k, _CAST_LANES) if tiled else _CAST_LANES
        super().__init__(spec, mods, target, lanes, 8, False)
        self.chunks = spec.k // lanes if tiled else 1
        #: values of a tile past its whole vectors (done with a masked vector)
        self.rest = spec.k % lanes if tiled else 0
        self.number = spec.spec
        #: intK with an exponent scale is fixed point with K - 2 fraction bits
        self.fixed = self.number.bits - 2 if tiled and self.number.kind == "int" else 0
        #: g (f32) of a two-level cast, loaded by :meth:`load_g`
        self.g: Any = None

    def signature(self) -> list[Any]:
        ir, spec = self.ir, self.spec
        dyn = ir.ShapedType.get_dynamic_size()
        wide = ir.MemRefType.get([dyn], ir.Type.parse(spec.wide))
        rbits = [ir.MemRefType.get([dyn], ir.IntegerType.get_signless(32))] \
            if spec.stochastic else []
        g = [ir.MemRefType.get([dyn], ir.F32Type.get())] if spec.two_level else []
        return [wide, *rbits, *g, wide]

    def sized(self, a: list[Any]) -> Any:
        return a[0]

    def load_g(self, a: list[Any]) -> None:
        """A two-level cast: g (``g[0]``, f32) loaded once, before the units; else None."""
        self.g = self.m["memref"].LoadOp(a[-2], [self.index(0)]).result \
            if self.spec.two_level else None

    def load_y(self, x: Any, at: Any, count: Any = None) -> Any:
        """The f32 bits of the values the tiles scale: :meth:`load_bits`, divided by g in a
        two-level cast (y = RNE_f32(x / g), subnormals included: the exact quotient of
        :func:`cast_math.divide_by`, not the codec's shift, which takes powers of two only)."""
        xb = self.load_bits(x, at, count)
        return xb if self.g is None else cast_math.divide_by(self.b, xb, self.g)

    def times_g(self, v: Any) -> Any:
        """The f32 bits of a tile level's values ``v``, times g (rounded once, in f32) in a
        two-level cast."""
        return v if self.g is None else cast_math.times(self.b, v, self.g)

    def _rbits(self, a: list[Any], at: Any, count: Any = None) -> Any:
        return self.load(a[1], at, self.vec("i32"), count) if self.spec.stochastic else None

    def rounded(self, xb: Any, r: Any, shift: Any = None, nan: Any = None) -> Any:
        """The f32 bits of the cast values of f32 bits ``xb``: encoded (times 2^-shift, the
        scaled value never formed) to the number spec with the rounding mode, decoded (times
        2^shift); NaN where ``nan``."""
        spec, b = self.spec, self.b
        cb = self.codec_builder(xb.type)
        shifts = None if shift is None else b.broadcast(shift, b.shape(xb))
        codes = codec.emit_encode(cb, b.bitcast(xb, "f32"), "f32", self.number,
                                  roundmode=spec.roundmode, rbits=r, shift=shifts,
                                  code_bits=32)
        v = b.bitcast(codec.emit_decode(cb, codes, self.number, "f32", shift=shifts), "i32")
        return v if nan is None else self.b.select(nan, self.b.like(v, _NAN), v)

    def float_scaled(self, amax: Any, nonfinite: Any):
        """A tile with a float scale (docs/semantics.md section 10.3, as
        :mod:`mxlower.lowering.cast_math` lowers it): the scale ``RNE(amax / max)`` rounded to
        the scale's spec (scalar), and the cast of a vector of the tile's f32 bits: the
        element code of ``x / s`` (exact quotients, :func:`mx_math.quotient`; +0 where the
        scale is 0), decoded and multiplied by the decoded scale, rounded once to f32; NaN
        where the tile holds NaN or Inf."""
        b, n = self.b, self.number
        sn = self.spec.scale_spec.number
        sb = self.codec_builder(amax.type)  # scalar codec for the scale
        q = mx_math.quotient(b, amax, n.max)
        sc = codec.emit_encode(sb, b.bitcast(q, "f32"), "f32", sn, code_bits=32)
        sval = b.bitcast(codec.emit_decode(sb, sc, sn, "f32"), "i32")
        zero = b.eq(b.and_(sval, _MAG), 0)
        sd = b.select(zero, b.like(sval, mx_math.f32_bits_of(1.0)), sval)
        drop = self.m["arith"].OrIOp(nonfinite, zero).result
        stored = b.select(nonfinite, b.like(sc, sn.nan_code), sc)
        sdec = b.bitcast(codec.emit_decode(sb, stored, sn, "f32"), "i32")
        nan = b.gt(b.and_(sdec, _MAG), _INF)
        small = not cast_math.tiny_is_zero(n)

        def cast(xb: Any, r: Any) -> Any:
            cb = self.codec_builder(xb.type)
            v = mx_math.quotient(b, xb, sd, small=small)
            codes = codec.emit_encode(cb, b.bitcast(v, "f32"), "f32", n,
                                      roundmode=self.spec.roundmode, rbits=r, code_bits=32)
            codes = b.select(drop, b.like(codes, 0), codes)
            dv = b.bitcast(codec.emit_decode(cb, codes, n, "f32"), "i32")
            out = cast_math.mul_f32(b, dv, sdec)
            return b.select(nan, b.like(out, _NAN), out)

        return cast

    def subtiled(self, amax: Any, nonfinite: Any):
        """A tile with subtiles (docs/semantics.md section 10.3, shared micro-exponents): the
        tile's E from its amax (scalar), and the cast of a vector of the tile's f32 bits with
        each subtile's exponent E - o, o = min(E - E_s, 2^D - 1), E_s the same rule on the
        subtile's amax: the subtile maxima by log2(subtile) butterfly shuffles (every lane
        ends with its subtile's maximum), E_s lane-wise."""
        b, spec = self.b, self.spec
        s = spec.scale_spec
        e = mx_math.scale_exponent(b, amax, self.number, s, spec.scalemode)
        sub = s.subtiles_as_tiles
        vector = self.m["vector"]

        def cast(xv: Any, r: Any) -> Any:
            mags = b.and_(xv, _MAG)
            V = self.lanes
            step = 1
            while step < s.subtile[0]:
                mags = b.max(mags, vector.ShuffleOp(mags, mags,
                                                    [i ^ step for i in range(V)]).result)
                step *= 2
            e_sub = mx_math.scale_exponent(b, mags, self.number, sub, spec.scalemode)
            ev = b.broadcast(e, b.shape(xv))
            off = b.min(b.sub(ev, e_sub), s.max_offset)
            return self.rounded(xv, r, b.sub(b.sub(ev, off), self.fixed), nonfinite)

        return cast

    def values(self, a: list[Any], at: Any, count: Any = None) -> None:
        """Unscaled: values ``at``... (``V`` of them, or ``count``)."""
        bits = self.rounded(self.load_bits(a[0], at, count), self._rbits(a, at, count))
        self.store_values(a[-1], at, bits, count)

    def tile(self, a: list[Any], i: Any) -> None:
        """Tile ``i``: values ``[i k, (i + 1) k)``: ``k // V`` whole vectors and, where ``V``
        does not divide ``k``, a masked last one."""
        b, x, y = self.b, a[0], a[-1]
        ar = self.m["arith"]
        k, V = self.spec.k, self.lanes
        start = self.scaled_index(i, k, 1)
        tail = None if not self.rest else (ar.AddIOp(start, self.index(k - self.rest)).result,
                                           self.index(self.rest))

        def magnitudes(xb: Any) -> Any:
            return b.and_(xb, _MAG)

        def reduce(mags: Any) -> Any:
            return self.m["vector"].ReductionOp(self.ir.IntegerType.get_signless(32), "maxsi",
                                                mags).result

        held = k <= _MAX_LANES
        if held:  # the tile's vectors are loaded once and kept in registers
            pieces = [(start if c == 0 else ar.AddIOp(start, self.index(c * V)).result, None)
                      for c in range(self.chunks)] + ([tail] if tail else [])
            xbs = [self.load_y(x, at, count) for at, count in pieces]
            mags = magnitudes(xbs[0])
            for xb in xbs[1:]:  # lane-wise maxima, then one reduction
                mags = b.max(mags, magnitudes(xb))
            amax = reduce(mags)
        else:  # chunk by chunk: the maximum, then the elements (the tile is in L1 by then)
            (amax,) = self.over_chunks(
                start, lambda at, acc: [b.max(acc, reduce(magnitudes(self.load_y(x, at))))],
                [b.const(0, "i32")])
            if tail:
                amax = b.max(amax, reduce(magnitudes(self.load_y(x, *tail))))
        nonfinite = b.ge(amax, _INF)
        s = self.spec.scale_spec
        if s.power_of_two and s.subtile:
            cast = self.subtiled(amax, nonfinite)
        elif s.power_of_two:
            e = mx_math.scale_exponent(b, amax, self.number, s, self.spec.scalemode)
            shift = b.sub(e, self.fixed)

            def cast(xv: Any, r: Any) -> Any:
                return self.rounded(xv, r, shift, nonfinite)
        else:
            cast = self.float_scaled(amax, nonfinite)

        def chunk(at: Any, count: Any = None, bits: Any = None) -> None:
            xv = self.load_y(x, at, count) if bits is None else bits
            self.store_values(y, at, self.times_g(cast(xv, self._rbits(a, at, count))),
                              count)

        if held:
            for (at, count), xb in zip(pieces, xbs):
                chunk(at, count, xb)
        else:
            self.over_chunks(start, chunk)
            if tail:
                chunk(*tail)

    def run_range(self, a: list[Any], b0: Any, b1: Any) -> None:
        self.load_g(a)
        if self.spec.scale is None:
            super().run_range(a, b0, b1)
        else:
            self.for_each(b0, b1, lambda i: self.tile(a, i))

    def run_unit(self, a: list[Any], i: Any) -> None:
        self.load_g(a)
        if self.spec.scale is None:
            super().run_unit(a, i)
        else:
            self.tile(a, i)


def _modules() -> dict[str, Any]:
    """The upstream MLIR modules a kernel is built with (imported on first use: optional)."""
    return {name.rpartition(".")[2]: upstream.module(name) for name in (
        "ir", "dialects.arith", "dialects.math", "dialects.vector", "dialects.scf",
        "dialects.memref", "dialects.func", "dialects.gpu")}


def gpu_module_name() -> str:
    """The ``gpu.module`` GPU kernels are emitted into."""
    return "mxlower_kernels"


def _kernel(spec: KernelSpec | ConvertSpec | CastSpec, mods: dict[str, Any],
            target: str) -> _Kernel:
    if isinstance(spec, ConvertSpec):
        return _ConvertKernel(spec, mods, target)
    if isinstance(spec, CastSpec):
        if spec.mx_spec is not None:
            return _MXCastKernel(spec, mods, target)
        return _CastKernel(spec, mods, target)
    return _MXKernel(spec, mods, target)


def emit_kernel(spec: KernelSpec | ConvertSpec | CastSpec, module: Any, *, target: str = "cpu") -> Any:
    """Appends ``spec``'s kernel to ``module`` (an upstream ``ir.Module``, under its context):
    a ``func.func`` named ``spec.name`` (``target="cpu"`` or ``"gpu-body"``) or a ``gpu.func``
    of that name in the module's ``gpu.module @mxlower_kernels``, created on first use
    (``"gpu"``); returns the function op."""
    m = _modules()
    ir = m["ir"]
    with ir.Location.name(spec.name):
        kernel = _kernel(spec, m, target)
        if target != "gpu":
            with ir.InsertionPoint(module.body):
                return kernel.function()
        container = next((op for op in module.body.operations
                          if op.operation.name == "gpu.module"
                          and ir.StringAttr(op.operation.attributes["sym_name"]).value
                          == gpu_module_name()), None)
        if container is None:
            with ir.InsertionPoint(module.body):
                container = m["gpu"].GPUModuleOp(gpu_module_name())
                container.regions[0].blocks.append()
        with ir.InsertionPoint(container.regions[0].blocks[0]):
            return kernel.function()


def build(spec: KernelSpec | ConvertSpec | CastSpec, *, target: str = "cpu") -> str:
    """The kernel module of ``spec`` as MLIR text (verified), in a fresh upstream context."""

    ir = upstream.module("ir")
    with upstream.context(), ir.Location.unknown():
        module = ir.Module.create()
        emit_kernel(spec, module, target=target)
        module.operation.verify()
        return str(module)
