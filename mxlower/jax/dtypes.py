"""The dtypes of MX values in JAX, derived from :mod:`mxlower.types` and :mod:`mxlower.formats`.

* the wide dtypes MX values are quantized from and dequantized to (float32, bfloat16, float16):
  :func:`wide_dtypes`, :func:`wide_names`, :func:`mlir_name`;
* what an :class:`~mxlower.jax.MXArray` holds on the device: :func:`element_dtype`,
  :func:`scale_dtype` (and what :func:`mxlower.jax.convert` returns: :func:`storage_dtype`).  XLA has float types of 4 and 8 bits but none of 6 bits (a
  ``jnp.float6_*`` array cannot reach a device), so elements of a 6-bit type are held as their
  codes, one per ``uint8`` (:func:`held_as_codes`); every other type is held as itself.

No JAX import: these are NumPy / ml_dtypes dtypes, which JAX uses as its own.
"""

from __future__ import annotations

import numpy as np

from mxlower import types
from mxlower.formats import FLOAT_TYPES, WIDE_TYPES, MXFormat

__all__ = ["element_dtype", "held_as_codes", "mlir_name", "scale_dtype", "storage_dtype",
           "wide_dtypes", "wide_names"]

#: The float widths XLA has types for; a narrow type of another width is held as codes.
_XLA_FLOAT_BITS = (4, 8)


def wide_dtypes() -> tuple[np.dtype, ...]:
    """float32, bfloat16, float16: the dtypes quantize takes and dequantize returns."""
    return tuple(WIDE_TYPES.values())


def wide_names() -> str:
    """The wide dtypes' names for messages: ``"float32, bfloat16 or float16"``."""
    names = [dt.name for dt in wide_dtypes()]
    return ", ".join(names[:-1]) + " or " + names[-1]


def mlir_name(dtype: np.dtype) -> str:
    """The MLIR spelling of a dtype (``float32`` -> ``f32``)."""
    return types.of_dtype(dtype).mlir


def held_as_codes(element: str) -> bool:
    """Whether JAX holds values of the MLIR element type ``element`` as ``uint8`` codes (a
    narrow float of a width XLA has no type for: the f6 types)."""
    t = FLOAT_TYPES.get(element)
    return t is not None and t.bits not in _XLA_FLOAT_BITS


def storage_dtype(element: str) -> np.dtype:
    """The JAX dtype holding values of the MLIR float type ``element`` (uint8 codes for the
    f6 types)."""
    if held_as_codes(element):
        return np.dtype(np.uint8)
    return types.dtype(element)


def element_dtype(fmt: MXFormat) -> np.dtype:
    """The JAX storage dtype of ``fmt``'s elements (uint8 codes for the f6 formats)."""
    if held_as_codes(fmt.element):
        return np.dtype(np.uint8)
    return fmt.element_dtype


def scale_dtype(fmt: MXFormat) -> np.dtype:
    """The JAX dtype of ``fmt``'s scales."""
    return fmt.scale_dtype
