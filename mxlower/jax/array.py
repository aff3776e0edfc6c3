"""The quantized JAX array of mxlower.jax: one type for every datatype of docs/semantics.md
section 10, :class:`DatatypeArray`, with :class:`MXArray` its named view for the MX formats.

Every MX format is a section-10 datatype (``mxfp8_e4m3`` is ``e4m3fn`` with ``e8m0_t32``
scales, nvfp4 with a global scale is the two-level ``e2m1fo:e4m3fn_t16_gf32``;
:func:`mxlower.formats.block_datatype` and :func:`~mxlower.formats.format_of` map the two
spellings), so one class holds every quantized array:

* the leaves of the pytree: ``codes`` (the values' shape), ``scales`` (the scale spec's
  layout; None when unscaled), ``zero_points`` (None without a zero point), ``global_scale``
  (the f32 tensor scale of a two-level datatype, nvfp4's global scale; else None), the
  hidden straight-through-estimator source (below) and ``offsets`` (the uint8 subtile
  offsets of a scale spec with subtiles, shared micro-exponents as in ``mx9``; else None);
* its auxiliary data: the datatype (:attr:`DatatypeArray.datatype` is its canonical code),
  whose tile dimensions are counted from the end, so an array stays valid under ``jax.vmap``
  over leading axes.

:class:`MXArray` is a subclass with no state of its own: ``elements`` is ``codes``, and
``format``, ``axis`` (counted from the end) and ``block_size`` are read off the datatype.  Its
constructor takes the MX spelling (format name, axis, block size), and
:func:`mxlower.jax.quantize` returns one for the seven format names.  Storage, pytree
flattening, immutability, ``nbytes``, ``detach`` and ``dequantize`` are the general class's.

``dequantize`` dispatches on the datatype: an MX format's (every MXArray, and a
DatatypeArray of e.g. ``e4m3fn:e8m0_t32`` or ``bfp16``) binds ``mx_dequantize``, the MX
primitive with its fused kernels; any other binds ``mx_decode``.  Both are bit-exact with
:mod:`mxlower.reference`, so the dispatch changes no bit.

Storage dtypes (what the leaves hold on the device) are the layout of
:func:`mxlower.reference.encode`: a number spec that is a type JAX has is held as that type;
XLA has no f6 types (``jnp.float6_*`` arrays cannot reach a device), so the f6 types hold their
codes one per ``uint8`` (code in the low 6 bits, ``mxlower.reference.bits`` layout); ``intK`` /
``uintK`` and every other spec are the integer codes of :attr:`mxlower.numbers.NumberSpec.storage`.
For the MX formats:

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

Gradients: a traced ``quantize`` attaches its input as a hidden straight-through-estimator
(STE) source (under ``jit``, ``grad`` or ``vmap``); ``dequantize`` and ``scaled_dot``
differentiate through that source (see ``docs/jax.md``).  The leaves themselves carry no
gradient.  :meth:`DatatypeArray.detach` drops the source, e.g. before returning quantized
weights from a ``jit`` (otherwise the source, the unquantized input, is returned too).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mxlower.formats import FLOAT_TYPES, FORMATS, Datatype, MXFormat, block_datatype, format_of
import mxlower.jax.checks as checks
import mxlower.jax.kernels as kernels
import mxlower.jax.sharding as sharding
from mxlower.jax.casts import datatype_of, decode_p, layout
from mxlower.jax.dtypes import element_dtype, held_as_codes, scale_dtype
from mxlower.jax.primitives import dequantize_p

__all__ = ["DatatypeArray", "MXArray", "mx_view"]


@functools.lru_cache(maxsize=256)
def _mx_of(dt: Datatype) -> tuple[MXFormat, int, int] | None:
    """``(format, block size, blocked axis counted from the end)`` of an MX format's
    datatype, None for any other (:func:`mxlower.formats.format_of`, once per datatype)."""
    return format_of(dt)


@functools.lru_cache(maxsize=256)
def _format_datatype(name: str, block_size: int, axis: int, global_scale: bool) -> Datatype:
    """The canonical datatype of an MX array: format ``name`` blocked by ``block_size`` along
    ``axis`` (negative), two-level with ``global_scale``."""
    dt = block_datatype(FORMATS[name], block_size, axis, global_scale=global_scale)
    return dataclasses.replace(dt, name=None)


class DatatypeArray:
    """An array quantized to a datatype of docs/semantics.md section 10: ``codes``,
    ``scales``, ``zero_points``, for a scale spec with subtiles the uint8 ``offsets``, and,
    for a two-level datatype, the f32 ``global_scale``, with the static ``datatype`` code
    (``"e5m6:e8m0_t32"``).  A registered pytree.

    Build one with :func:`mxlower.jax.quantize`, or from parts with ``DatatypeArray(codes,
    scales, zero_points, datatype, global_scale=None, offsets=None)`` (checked: dtypes and shapes against
    the datatype's layout; ``global_scale``, its f32 tensor scale g, exactly for a two-level
    datatype: a scale spec ending in ``_gf32``, nvfp4's ``e2m1fo:e4m3fn_t16_gf32`` among them).  Codes of an f6 type may be given as
    ml_dtypes float6 values (as :func:`mxlower.reference.encode` returns them).

    Immutable: its fields are checked together when it is built, so none can be reassigned
    after (an AttributeError saying so; build a new one instead).
    """

    __slots__ = ("codes", "scales", "zero_points", "global_scale", "_dt", "_ste", "offsets")

    def __init__(self, codes: Any, scales: Any, zero_points: Any, datatype: Any, *,
                 global_scale: Any | None = None, offsets: Any | None = None):
        fn = "DatatypeArray"
        dt = datatype_of(datatype, None, fn, arg="datatype")
        if isinstance(codes, np.ndarray) and any(
                held_as_codes(name) and t.dtype == codes.dtype for name, t in FLOAT_TYPES.items()):
            codes = codes.view(np.uint8)  # ml_dtypes f6 values: JAX holds their codes
        codes = checks.as_array(codes)
        dt = datatype_of(dt, None, fn, tuple(codes.shape), arg="datatype")
        parts = [codes] + [None if v is None else checks.as_array(v)
                           for v in (scales, zero_points, offsets)]
        s = dt.scale
        names = ["codes"] + ["scales"] * (s is not None) + [
            "zero_points"] * (s is not None and s.zero_point is not None) + [
            "offsets"] * (s is not None and bool(s.subtile))
        want = dict(zip(names, layout(dt, tuple(codes.shape))))
        for name, v in zip(("codes", "scales", "zero_points", "offsets"), parts):
            if name not in want:
                if v is not None:
                    what = "subtile offsets" if name == "offsets" else name.replace("_", " ")
                    raise ValueError(f"{fn}: {dt.code} has no {what}"
                                     f" (argument '{name}' must be None)")
                continue
            shape, dtype, _ = want[name]
            if v is None:
                raise ValueError(f"{fn}: {dt.code} needs argument '{name}'")
            if np.dtype(v.dtype) != dtype:
                raise TypeError(f"{fn}: argument '{name}' of {dt.code} must have "
                                f"dtype {dtype}, got {v.dtype}")
            if tuple(v.shape) != shape:
                raise ValueError(f"{fn}: argument '{name}' of {dt.code} must have "
                                 f"shape {shape}, got {tuple(v.shape)}")
        if dt.two_level:
            if global_scale is None:
                raise ValueError(f"{fn}: the two-level {dt.code} needs argument "
                                 "'global_scale' (its f32 tensor scale)")
            global_scale = checks.check_tensor_scale(global_scale, fn, "global_scale")
        elif global_scale is not None:
            raise ValueError(f"{fn}: {dt.code} has no tensor scale (argument 'global_scale' "
                             "must be None; a two-level scale spec ends in '_gf32')")
        self._set(codes=parts[0], scales=parts[1], zero_points=parts[2],
                  global_scale=global_scale, _dt=dt, _ste=None, offsets=parts[3])

    @classmethod
    def _make(cls, codes: Any, scales: Any, zero_points: Any, global_scale: Any, dt: Datatype,
              ste: Any = None, offsets: Any = None):
        """Unchecked construction (pytree unflattening and the primitives' results); ``dt``
        canonical (no name, tile dimensions counted from the end)."""
        self = object.__new__(cls)
        self._set(codes=codes, scales=scales, zero_points=zero_points,
                  global_scale=global_scale, _dt=dt, _ste=ste, offsets=offsets)
        return self

    # ----------------------------------------------------------------------------- immutable
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

    # ----------------------------------------------------------------------------- pytree
    def tree_flatten(self):
        return (self.codes, self.scales, self.zero_points, self.global_scale, self._ste,
                self.offsets), self._dt

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls._make(*children[:4], aux, children[4], children[5])

    # ----------------------------------------------------------------------------- properties
    @property
    def datatype(self) -> str:
        """The datatype's canonical code (tile dimensions counted from the end)."""
        return self._dt.code

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the values (that of ``codes``)."""
        return tuple(np.shape(self.codes))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Packed storage in bytes: codes, scales, zero points, subtile offsets and a global
        scale at their specs' bit widths (an MX format: elements at 4, 6 or 8 bits, one byte
        per scale, 4 for a global scale; mx9: 8 + 8/16 + 1/2 bits per value).  The device arrays may be larger: f6 codes and, on some
        backends, f4 values take a byte each."""
        dt = self._dt
        s = dt.scale
        bits = self.size * dt.number.bits
        for v, spec in ((self.scales, s and s.number), (self.zero_points, s and s.zero_point),
                        (self.global_scale, s and s.tensor),
                        (self.offsets, s and s.offset_number)):
            if v is not None:
                bits += int(np.prod(np.shape(v), dtype=np.int64)) * spec.bits
        return (bits + 7) // 8

    # ----------------------------------------------------------------------------- methods
    def dequantize(self, dtype: Any = jnp.float32, *, impl: str = "auto") -> jax.Array:
        """The values (docs/semantics.md sections 5 and 10.4) in ``dtype`` (float32,
        bfloat16 or float16), each computed in f32 and rounded once: bit-exact with
        :func:`mxlower.reference.dequantize` / :func:`~mxlower.reference.decode`; the same as
        ``mxlower.jax.dequantize(self, dtype, impl=impl)``.  ``impl`` applies to the MX
        formats' datatypes (their fused kernels)."""
        out = checks.check_dtype(dtype, "dequantize", "dtype")
        kernels.check_impl(impl, "dequantize")
        ste = [] if self._ste is None else [self._ste]
        mx = _mx_of(self._dt)
        if mx is not None:  # an MX format: its primitive and kernels
            fmt, k, axis = mx
            g = [] if self.global_scale is None else [self.global_scale]
            return dequantize_p.bind(sharding.mark(self.codes, impl), self.scales, *g, *ste,
                                     format=fmt.name, block_size=k, axis=axis % self.ndim,
                                     dtype=out, has_g=bool(g), has_ste=bool(ste), impl=impl)
        dt = self._dt
        parts = [v for v in (self.codes, self.scales, self.zero_points, self.offsets)
                 if v is not None]
        g = [] if self.global_scale is None else [self.global_scale]  # a two-level's g
        if g and np.ndim(g[0]) != 0:
            raise ValueError(f"dequantize: the tensor scale g ('global_scale') of this "
                             f"{dt.code} array has shape {tuple(np.shape(g[0]))}, not (): "
                             "an array returned from jax.vmap holds one g per example; "
                             "dequantize it under the same vmap")
        return decode_p.bind(*parts, *g, *ste, number=dt.number.param,
                             scale=None if dt.scale is None else dt.scale.code, dtype=out,
                             has_ste=bool(ste))

    def detach(self) -> DatatypeArray:
        """This array without its straight-through-estimator source (no gradient flows back
        to the quantized input; nothing but the leaves is kept)."""
        return type(self)._make(self.codes, self.scales, self.zero_points, self.global_scale,
                                self._dt, None, self.offsets)

    def __repr__(self) -> str:
        return f"DatatypeArray(datatype={self.datatype}, shape={self.shape})"


class MXArray(DatatypeArray):
    """An array of an MX format: a :class:`DatatypeArray` of the format's datatype, named by
    ``elements`` (its codes), ``scales`` (and nvfp4's ``global_scale``), ``format``, ``axis``
    (counted from the end) and ``block_size``.

    Build one with :func:`mxlower.jax.quantize`, or from existing parts with
    ``MXArray(elements, scales, format, axis=-1)`` (checked: dtypes, ranks, scale shape).
    """

    __slots__ = ()

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
        dt = _format_datatype(fmt.name, int(block_size), ax - elements.ndim,
                              global_scale is not None)
        self._set(codes=elements, scales=scales, zero_points=None, offsets=None,
                  global_scale=global_scale, _dt=dt, _ste=None)

    @classmethod
    def _of_format(cls, elements: Any, scales: Any, global_scale: Any, format: str,  # noqa: A002
                   axis: int, block_size: int, ste: Any = None) -> MXArray:
        """Unchecked construction in the MX spelling (``axis`` negative)."""
        dt = _format_datatype(format, block_size, axis, global_scale is not None)
        return cls._make(elements, scales, None, global_scale, dt, ste)

    @property
    def elements(self) -> Any:
        """The element codes (``codes``)."""
        return self.codes

    @property
    def fmt(self) -> MXFormat:
        return _mx_of(self._dt)[0]

    @property
    def format(self) -> str:  # noqa: A003
        return self.fmt.name

    @property
    def block_size(self) -> int:
        return _mx_of(self._dt)[1]

    @property
    def axis(self) -> int:
        """The blocked axis, counted from the end (``-1`` = last)."""
        return _mx_of(self._dt)[2]

    @property
    def blocked_axis(self) -> int:
        """The blocked axis as a non-negative index."""
        return self.axis % self.ndim

    def __repr__(self) -> str:
        g = ", global_scale" if self.global_scale is not None else ""
        return (f"MXArray(format={self.format}, shape={self.shape}, axis={self.axis}, "
                f"block_size={self.block_size}{g})")


def mx_view(a: Any) -> MXArray | None:
    """``a`` as an :class:`MXArray` when it is an array of an MX format's datatype (itself
    when it is one already; else the same leaves and datatype, named), None otherwise."""
    if isinstance(a, MXArray):
        return a
    if isinstance(a, DatatypeArray) and _mx_of(a._dt) is not None:
        return MXArray._make(a.codes, a.scales, a.zero_points, a.global_scale, a._dt, a._ste)
    return None


for _cls in (DatatypeArray, MXArray):  # one flatten / unflatten; JAX registers exact types
    jax.tree_util.register_pytree_node(_cls, _cls.tree_flatten, _cls.tree_unflatten)
