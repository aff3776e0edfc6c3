"""Compatibility: the StableHLO builder moved to :mod:`mxlower.ir.stablehlo_builder` and the
exact f32 bit arithmetic of the MX lowerings to :mod:`mxlower.lowering.mx_math`."""

from mxlower.ir.stablehlo_builder import Builder, Dyn, is_dynamic
from mxlower.lowering.mx_math import (f32_bits_floor, frexp_bits, ldexp_bits, mul_f32_exact,
                                      normalize_bits, to_f32_bits)

__all__ = [
    "Builder",
    "Dyn",
    "f32_bits_floor",
    "frexp_bits",
    "is_dynamic",
    "ldexp_bits",
    "mul_f32_exact",
    "normalize_bits",
    "to_f32_bits",
]
