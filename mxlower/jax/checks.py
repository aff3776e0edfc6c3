"""Trace-time argument checks of mxlower.jax: each raises ``TypeError``/``ValueError`` naming
the function and the argument, before anything is bound or lowered."""

from __future__ import annotations

import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mxlower.formats import FORMATS, MAX_BLOCK_SIZE, MXFormat
from mxlower.jax.dtypes import wide_dtypes, wide_names

__all__ = ["as_array", "as_int", "check_axis", "check_block_size", "check_dtype",
           "check_format", "check_global_scale", "check_tensor_scale", "check_wide",
           "traced"]


def as_array(x: Any) -> Any:
    """``x`` as something with ``.shape``/``.dtype`` (a jax array, tracer or NumPy array)."""
    if isinstance(x, (jax.Array, np.ndarray)) or hasattr(x, "aval"):
        return x
    return jnp.asarray(x)


def traced(x: Any) -> bool:
    """Whether ``x`` is a JAX tracer (under ``jit``, ``grad``, ``vmap``...)."""
    return isinstance(x, jax.core.Tracer)


def check_format(format: Any, fn: str) -> MXFormat:  # noqa: A002
    """The MX format named by argument 'format' of ``fn``."""
    if not isinstance(format, str):
        raise TypeError(f"{fn}: argument 'format' must be a format name (one of "
                        f"{', '.join(FORMATS)}), got {format!r}")
    if format not in FORMATS:
        raise ValueError(f"{fn}: unknown MX format {format!r} for argument 'format' (known: "
                         f"{', '.join(FORMATS)})")
    return FORMATS[format]


def check_wide(x: Any, fn: str, arg: str) -> Any:
    """Argument ``arg`` of ``fn`` as an array of float32, bfloat16 or float16."""
    try:
        x = as_array(x)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: argument '{arg}' must be an array of {wide_names()}, got "
                        f"{type(x).__name__}") from None
    if np.dtype(x.dtype) not in wide_dtypes():
        raise TypeError(f"{fn}: argument '{arg}' must have dtype {wide_names()}, got {x.dtype}")
    return x


def check_dtype(dtype: Any, fn: str, arg: str) -> np.dtype:
    """Argument ``arg`` of ``fn`` as a wide dtype (float32, bfloat16 or float16)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in wide_dtypes():
        raise TypeError(f"{fn}: argument '{arg}' must be {wide_names()}, got {dtype!r}")
    return dt


def as_int(v: Any, fn: str, arg: str) -> int:
    """Argument ``arg`` of ``fn`` as a Python int (bools refused)."""
    if isinstance(v, bool):
        raise TypeError(f"{fn}: argument '{arg}' must be an int, got {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{fn}: argument '{arg}' must be an int, got {v!r}") from None


def check_axis(axis: Any, ndim: int, fn: str, arg: str, of: str) -> int:
    """Argument ``arg`` of ``fn``, an axis of ``of`` (rank ``ndim``), made non-negative."""
    a = as_int(axis, fn, arg)
    if not -ndim <= a < ndim:
        raise ValueError(f"{fn}: argument '{arg}' = {a} is out of range for '{of}' of rank "
                         f"{ndim}")
    return a % ndim


def check_block_size(block_size: Any, n: int, axis: int, fn: str, of: str) -> int:
    """A positive block size dividing the static size ``n`` of dimension ``axis`` of ``of``."""
    k = as_int(block_size, fn, "block_size")
    if not 0 < k <= MAX_BLOCK_SIZE:
        raise ValueError(f"{fn}: argument 'block_size' must be 1..{MAX_BLOCK_SIZE}, got {k}")
    try:
        operator.index(n)
    except TypeError:  # a symbolic dimension (jax.export shape polymorphism)
        raise ValueError(f"{fn}: the blocked dimension {axis} of '{of}' must have a static size "
                         f"(other dimensions may be symbolic), got '{n}'") from None
    if n % k:
        raise ValueError(f"{fn}: argument 'block_size' = {k} does not divide the blocked "
                         f"dimension {axis} of '{of}' (size {n}); MX never pads a block")
    return k


def check_global_scale(g: Any, fmt: MXFormat, fn: str) -> Any:
    """Argument 'global_scale' of ``fn`` (nvfp4 only) as a float32 scalar; a concrete value
    must be finite and non-zero."""
    if not fmt.global_scale:
        raise ValueError(f"{fn}: argument 'global_scale' is only for nvfp4, not {fmt.name}")
    return check_tensor_scale(g, fn, "global_scale")


def check_tensor_scale(g: Any, fn: str, arg: str) -> Any:
    """Argument ``arg`` of ``fn``, the tensor scale g of a two-level datatype (nvfp4's global
    scale among them), as a float32 scalar: a Python number, a NumPy or JAX scalar array of a
    float dtype of at most 32 bits, traced allowed; a concrete value must be finite and
    non-zero."""
    if isinstance(g, (int, float, np.number)) and not isinstance(g, bool):
        try:
            with np.errstate(over="ignore"):
                v = np.float32(g)
        except OverflowError:  # an int beyond every float (10**400)
            v = np.float32(np.inf)
        if not np.isfinite(v) or v == 0:
            shown = repr(g) if len(repr(g)) <= 40 else repr(g)[:24] + "..."
            raise ValueError(f"{fn}: argument '{arg}' must be a finite non-zero "
                             f"float32, got {shown}")
        return jnp.asarray(v)
    try:
        g = as_array(g)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: argument '{arg}' must be a float32 scalar, got "
                        f"{type(g).__name__}") from None
    if tuple(g.shape) != ():
        raise ValueError(f"{fn}: argument '{arg}' must be a scalar, got shape "
                         f"{tuple(g.shape)}")
    if not jnp.issubdtype(g.dtype, jnp.floating) or np.dtype(g.dtype).itemsize > 4:
        raise TypeError(f"{fn}: argument '{arg}' must be a float32 scalar, got "
                        f"{g.dtype}")
    if isinstance(g, np.ndarray) or (isinstance(g, jax.Array) and not traced(g)):
        v = np.float32(np.asarray(g))
        if not np.isfinite(v) or v == 0:
            raise ValueError(f"{fn}: argument '{arg}' must be a finite non-zero "
                             f"float32, got {v!r}")
    return g.astype(jnp.float32)
