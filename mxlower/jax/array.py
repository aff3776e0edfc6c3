"""``MXArray``: an MX-quantized JAX array (elements + scales) registered as a pytree.

Storage dtypes (what ``elements`` and ``scales`` hold on the device):

============  ======================  ==================
format        elements                scales
============  ======================  ==================
mxfp8_e4m3    float8_e4m3fn           float8_e8m0fnu
mxfp8_e5m2    float8_e5m2             float8_e8m0fnu
mxfp6_e3m2    uint8 (6-bit codes)     float8_e8m0fnu
mxfp6_e2m3    uint8 (6-bit codes)     float8_e8m0fnu
mxfp4_e2m1    float4_e2m1fn           float8_e8m0fnu
mxint8        int8 (value = code/64)  float8_e8m0fnu
nvfp4         float4_e2m1fn           float8_e4m3fn (+ optional f32 ``global_scale``)
============  ======================  ==================

XLA has no f6 types (``jnp.float6_*`` arrays cannot reach a device), so the f6 formats hold their
codes one per ``uint8`` (code in the low 6 bits, ``mxlower.reference.bits`` layout); everything
else uses the JAX dtype of the MLIR element type.

The static part (format name, blocked axis, block size) is pytree auxiliary data.  The blocked
axis is stored counted from the end (``-1`` = last), so an ``MXArray`` stays valid under
``jax.vmap`` over leading axes.

Gradients: ``quantize`` attaches its input as a hidden straight-through-estimator (STE) source
when it is traced (under ``jit``, ``grad`` or ``vmap``); ``dequantize`` and ``scaled_dot``
differentiate through that source (see ``docs/jax.md``).  ``elements``, ``scales`` and
``global_scale`` themselves carry no gradient.  :meth:`MXArray.detach` drops the source, e.g.
before returning quantized weights from a ``jit`` (otherwise the source, the unquantized input,
is returned too).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mxlower.formats import FORMATS, MXFormat
import mxlower.jax.checks as checks
import mxlower.jax.kernels as kernels
import mxlower.jax.sharding as sharding
from mxlower.jax.dtypes import element_dtype, scale_dtype
from mxlower.jax.primitives import dequantize_p

__all__ = ["MXArray", "ShapeOfValues", "element_dtype", "scale_dtype"]


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(x))


class ShapeOfValues:
    """``shape``/``ndim``/``size`` of the values an encoded array stands for: those of its
    per-value array, which the subclass names in ``_values_attr``.

    Immutable: its fields are checked together when it is built, so none can be reassigned
    after (an AttributeError saying so; build a new one instead)."""

    __slots__ = ()
    _values_attr = "elements"

    def _set(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self).__name__
        raise AttributeError(f"{cls} is immutable: '{name}' cannot be reassigned (its fields "
                             f"are checked together when it is built; build a new {cls})")

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    def __setstate__(self, state: Any) -> None:  # copy and pickle
        d, slots = state if isinstance(state, tuple) else (state, None)
        self._set(**(d or {}), **(slots or {}))

    @property
    def shape(self) -> tuple[int, ...]:
        return _shape(getattr(self, self._values_attr))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


class MXArray(ShapeOfValues):
    """An MX-quantized array: ``elements`` and ``scales`` (and nvfp4's ``global_scale``).

    Build one with :func:`mxlower.jax.quantize`, or from existing parts with
    ``MXArray(elements, scales, format, axis=-1)`` (checked: dtypes, ranks, scale shape).
    """

    __slots__ = ("elements", "scales", "global_scale", "format", "axis", "block_size", "_ste")

    def __init__(self, elements: Any, scales: Any, format: str, *,  # noqa: A002
                 axis: int = -1, global_scale: Any | None = None, block_size: int | None = None):
        fmt = checks.check_format(format, "MXArray")
        elements = checks.as_array(elements)
        scales = checks.as_array(scales)
        want_e, want_s = element_dtype(fmt), scale_dtype(fmt)
        if elements.dtype != want_e:
            raise TypeError(f"MXArray: argument 'elements' of {fmt.name} must have dtype "
                            f"{want_e}, got {elements.dtype}")
        if scales.dtype != want_s:
            raise TypeError(f"MXArray: argument 'scales' of {fmt.name} must have dtype "
                            f"{want_s}, got {scales.dtype}")
        if elements.ndim == 0:
            raise ValueError("MXArray: argument 'elements' must have at least one dimension")
        ax = checks.check_axis(axis, elements.ndim, "MXArray", "axis", "elements")
        if scales.ndim != elements.ndim:
            raise ValueError(f"MXArray: argument 'scales' has rank {scales.ndim}, but "
                             f"'elements' has rank {elements.ndim}")
        n, ns = elements.shape[ax], scales.shape[ax]
        if block_size is None:
            if ns == 0 or n % ns:
                raise ValueError(f"MXArray: {ns} scales along axis {ax} do not evenly block "
                                 f"{n} elements (argument 'scales')")
            block_size = n // ns
        block_size = checks.check_block_size(block_size, n, ax, "MXArray", "elements")
        want = list(elements.shape)
        want[ax] //= block_size
        if tuple(scales.shape) != tuple(want):
            raise ValueError(f"MXArray: argument 'scales' must have shape {tuple(want)} for "
                             f"elements {tuple(elements.shape)} blocked by {block_size} along "
                             f"axis {ax}, got {tuple(scales.shape)}")
        if global_scale is not None:
            global_scale = checks.check_global_scale(global_scale, fmt, "MXArray")
        self._set(elements=elements, scales=scales, global_scale=global_scale, format=fmt.name,
                  axis=ax - elements.ndim, block_size=int(block_size), _ste=None)

    @classmethod
    def _make(cls, elements, scales, global_scale, format, axis, block_size, ste=None):  # noqa: A002
        """Unchecked construction (pytree unflattening and the primitives' results)."""
        self = object.__new__(cls)
        self._set(elements=elements, scales=scales, global_scale=global_scale, format=format,
                  axis=axis, block_size=block_size, _ste=ste)
        return self

    # ----------------------------------------------------------------------------- pytree
    def tree_flatten(self):
        children = [self.elements, self.scales]
        if self.global_scale is not None:
            children.append(self.global_scale)
        if self._ste is not None:
            children.append(self._ste)
        aux = (self.format, self.axis, self.block_size, self.global_scale is not None,
               self._ste is not None)
        return tuple(children), aux

    @classmethod
    def tree_unflatten(cls, aux, children):
        fmt, axis, k, has_g, has_ste = aux
        it = iter(children)
        e, s = next(it), next(it)
        g = next(it) if has_g else None
        ste = next(it) if has_ste else None
        return cls._make(e, s, g, fmt, axis, k, ste)

    # ----------------------------------------------------------------------------- properties
    @property
    def fmt(self) -> MXFormat:
        return FORMATS[self.format]

    @property
    def nbytes(self) -> int:
        """Packed storage in bytes: elements at their bit width (4, 6 or 8), one byte per
        scale, 4 for a global scale.  (The device arrays may be larger: f6 codes and, on some
        backends, f4 values take a byte each.)"""
        n = (self.size * self.fmt.bits + 7) // 8
        n += int(np.prod(_shape(self.scales), dtype=np.int64))
        return n + (4 if self.global_scale is not None else 0)

    @property
    def blocked_axis(self) -> int:
        """The blocked axis as a non-negative index."""
        return self.axis % self.ndim

    def dequantize(self, dtype: Any = jnp.float32, *, impl: str = "auto") -> jax.Array:
        """``decode(element) * decode(scale)`` (nvfp4: times the global scale) rounded to
        ``dtype`` (float32, bfloat16 or float16); the same as ``mxlower.jax.dequantize(self,
        dtype, impl=impl)``."""
        dt = checks.check_dtype(dtype, "dequantize", "dtype")
        kernels.check_impl(impl, "dequantize")
        operands = [sharding.mark(self.elements, impl), self.scales]
        if self.global_scale is not None:
            operands.append(self.global_scale)
        if self._ste is not None:
            operands.append(self._ste)
        return dequantize_p.bind(*operands, format=self.format, block_size=self.block_size,
                                 axis=self.blocked_axis, dtype=dt,
                                 has_g=self.global_scale is not None,
                                 has_ste=self._ste is not None, impl=impl)

    def detach(self) -> MXArray:
        """This array without its straight-through-estimator source (no gradient flows back
        to the quantized input; nothing but elements and scales is kept)."""
        return MXArray._make(self.elements, self.scales, self.global_scale, self.format,
                             self.axis, self.block_size, None)

    def __repr__(self) -> str:
        g = ", global_scale" if self.global_scale is not None else ""
        return (f"MXArray(format={self.format}, shape={self.shape}, axis={self.axis}, "
                f"block_size={self.block_size}{g})")


jax.tree_util.register_pytree_node(MXArray, MXArray.tree_flatten, MXArray.tree_unflatten)
