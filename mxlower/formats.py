"""The MX format table (MX-SEMANTICS section 1) and the narrow element types behind it.

Two tables:

* :data:`FLOAT_TYPES` -- one codec description per narrow float type (bits, exponent bias,
  mantissa bits, sign, NaN/Inf encoding, overflow rule).  Every conversion mxlower generates,
  in StableHLO or in the arith/LLVM dialects, is derived from these descriptions.
* :data:`FORMATS` -- the MX block formats: element type, emax_elem, max_elem, default block
  size, scale type.

Look-ups: :func:`get_format` by name, :func:`formats_for_element` by element type,
:func:`float_type` by MLIR spelling or ml_dtypes name.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import ml_dtypes
import numpy as np

__all__ = [
    "FLOAT_TYPES",
    "FORMATS",
    "FloatType",
    "MXFormat",
    "SCALE_MODES",
    "WIDE_TYPES",
    "float_type",
    "formats_for_element",
    "get_format",
]

SCALE_MODES = ("floor", "rceil", "nearest")

#: Wide float types MX values are quantized from and dequantized to: MLIR spelling -> NumPy dtype.
WIDE_TYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16),
}


@dataclasses.dataclass(frozen=True)
class FloatType:
    """The codec description of one narrow float type.

    A finite non-zero value with biased exponent e and mantissa m is
    ``(-1)^s * 2^(e - bias) * (1 + m / 2^man_bits)`` for e > 0 and
    ``(-1)^s * 2^(1 - bias) * (m / 2^man_bits)`` for e == 0 (when ``subnormals``).
    """

    mlir: str  #: MLIR spelling, e.g. "f8E4M3FN"
    numpy_name: str  #: ml_dtypes attribute name, e.g. "float8_e4m3fn"
    bits: int  #: storage width
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool
    #: "ieee": all-ones exponent is Inf (m == 0) / NaN (m != 0);
    #: "fn": no Inf, only the all-ones code (exponent and mantissa) is NaN;
    #: "fnu": unsigned, no Inf, code 0xFF is NaN (f8E8M0FNU);
    #: "none": no Inf, no NaN.
    special: Literal["ieee", "fn", "fnu", "none"]
    #: what a finite value beyond max converts to: "inf", "nan" or "saturate" (to +-max).
    overflow: Literal["inf", "nan", "saturate"]
    #: what a NaN input converts to (unsigned code; the sign is applied where the type has one).
    #: For "none" types this is the code of -0 regardless of sign (MX-SEMANTICS section 2).
    nan_code: int
    subnormals: bool = True

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(getattr(ml_dtypes, self.numpy_name))

    @property
    def finfo(self):
        return ml_dtypes.finfo(self.dtype)

    @property
    def max(self) -> float:
        return float(self.finfo.max)

    @property
    def sign_mask(self) -> int:
        return (1 << (self.bits - 1)) if self.signed else 0

    @property
    def magnitude_mask(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def has_inf(self) -> bool:
        return self.special == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.special != "none"


FLOAT_TYPES: dict[str, FloatType] = {
    t.mlir: t
    for t in (
        FloatType("f8E4M3FN", "float8_e4m3fn", 8, 4, 3, 7, True, "fn", "nan", 0x7F),
        FloatType("f8E5M2", "float8_e5m2", 8, 5, 2, 15, True, "ieee", "inf", 0x7E),
        FloatType("f8E8M0FNU", "float8_e8m0fnu", 8, 8, 0, 127, False, "fnu", "nan", 0xFF,
                  subnormals=False),
        FloatType("f6E3M2FN", "float6_e3m2fn", 6, 3, 2, 3, True, "none", "saturate", 0x20),
        FloatType("f6E2M3FN", "float6_e2m3fn", 6, 2, 3, 1, True, "none", "saturate", 0x20),
        FloatType("f4E2M1FN", "float4_e2m1fn", 4, 2, 1, 1, True, "none", "saturate", 0x8),
    )
}


def float_type(name: str) -> FloatType:
    """A narrow float type by MLIR spelling ("f4E2M1FN") or ml_dtypes name ("float4_e2m1fn")."""
    t = FLOAT_TYPES.get(name)
    if t is not None:
        return t
    for t in FLOAT_TYPES.values():
        if t.numpy_name == name:
            return t
    known = ", ".join(FLOAT_TYPES)
    raise KeyError(f"unknown narrow float type '{name}' (known: {known})")


@dataclasses.dataclass(frozen=True)
class MXFormat:
    """One row of MX-SEMANTICS section 1."""

    name: str
    element: str  #: MLIR element type spelling ("f8E4M3FN", ..., "i8" for mxint8)
    emax_elem: int | None  #: None for nvfp4 (its scale is not a power of two)
    max_elem: float
    block_size: int  #: default block size
    scale: str  #: MLIR scale type spelling
    bits: int  #: element bit width
    global_scale: bool = False  #: takes an optional f32 per-tensor scale (nvfp4)

    @property
    def element_type(self) -> FloatType | None:
        """The element's codec description (None for mxint8's i8)."""
        return FLOAT_TYPES.get(self.element)

    @property
    def scale_type(self) -> FloatType:
        return FLOAT_TYPES[self.scale]

    @property
    def element_dtype(self) -> np.dtype:
        return np.dtype(np.int8) if self.element == "i8" else self.element_type.dtype

    @property
    def scale_dtype(self) -> np.dtype:
        return self.scale_type.dtype

    @property
    def is_int(self) -> bool:
        return self.element == "i8"

    @property
    def is_nvfp4(self) -> bool:
        return self.scale == "f8E4M3FN"

    def mlir_element_type(self) -> str:
        return self.element

    def mlir_scale_type(self) -> str:
        return self.scale

    def bytes_per_block(self, block_size: int | None = None) -> float:
        """Packed storage of one block: elements at their bit width plus one scale byte."""
        k = block_size or self.block_size
        return k * self.bits / 8 + 1


FORMATS: dict[str, MXFormat] = {
    f.name: f
    for f in (
        MXFormat("mxfp8_e4m3", "f8E4M3FN", 8, 448.0, 32, "f8E8M0FNU", 8),
        MXFormat("mxfp8_e5m2", "f8E5M2", 15, 57344.0, 32, "f8E8M0FNU", 8),
        MXFormat("mxfp6_e3m2", "f6E3M2FN", 4, 28.0, 32, "f8E8M0FNU", 6),
        MXFormat("mxfp6_e2m3", "f6E2M3FN", 2, 7.5, 32, "f8E8M0FNU", 6),
        MXFormat("mxfp4_e2m1", "f4E2M1FN", 2, 6.0, 32, "f8E8M0FNU", 4),
        MXFormat("mxint8", "i8", 0, 127.0 / 64.0, 32, "f8E8M0FNU", 8),
        MXFormat("nvfp4", "f4E2M1FN", None, 6.0, 16, "f8E4M3FN", 4, global_scale=True),
    )
}


def get_format(name: str) -> MXFormat:
    """An MX format by name; KeyError naming the known formats otherwise."""
    try:
        return FORMATS[name]
    except KeyError:
        known = ", ".join(FORMATS)
        raise KeyError(f"unknown MX format '{name}' (known: {known})") from None


def formats_for_element(element: str, scale: str | None = None) -> list[MXFormat]:
    """The formats whose element type is ``element`` (and scale type ``scale`` when given)."""
    return [f for f in FORMATS.values()
            if f.element == element and (scale is None or f.scale == scale)]
