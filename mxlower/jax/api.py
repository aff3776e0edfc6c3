"""The public functions of mxlower.jax: argument checking at trace time, then the primitives."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from mxlower.execution import ffi
from mxlower.formats import (FORMATS, SCALE_MODES, SCALEMODE_OF, MXFormat, get_datatype,
                             mx_quantize_of)
import mxlower.jax.kernels as kernels
import mxlower.jax.sharding as sharding
from mxlower.jax.array import DatatypeArray, MXArray, mx_view
from mxlower.jax.casts import bind_encode, check_encode
from mxlower.jax.checks import (as_array, as_int, check_axis, check_block_size, check_dtype,
                                check_format, check_global_scale, check_tensor_scale,
                                check_wide, traced)
from mxlower.jax.primitives import convert_p, quantize_p, scaled_dot_p

__all__ = ["convert", "dequantize", "lower", "quantize", "scaled_dot"]


# ----------------------------------------------------------------------------- quantize


def quantize(x: Any, format: str = "mxfp8_e4m3", *, axis: int = -1,  # noqa: A002
             block_size: int | None = None, scale_mode: str = "floor",
             global_scale: Any | None = None, impl: str = "auto", scale: Any = None,
             roundmode: str = "even", key: Any = None,
             rbits: Any = None) -> MXArray | DatatypeArray:
    """Quantize ``x`` (float32, bfloat16 or float16) to an MX format along ``axis``, or to
    any datatype of docs/semantics.md section 10.

    docs/semantics.md sections 3 (MX formats; ``scale_mode`` "floor", "rceil" or "nearest") and 4
    (nvfp4, with an optional f32 ``global_scale``; ``scale_mode`` does not apply to it).
    ``block_size`` defaults to the format's (32; nvfp4 16) and must divide ``x.shape[axis]``.
    Bit-exact with :func:`mxlower.reference.quantize`.

    Gradient: straight-through estimator -- ``dequantize(quantize(x))`` and ``scaled_dot`` of
    the result differentiate as if the quantized value were ``x`` itself.

    Any other datatype -- a number spec with ``scale`` (``quantize(x, "e5m6",
    scale="e8m0_t32")``), ``"number:scale"`` codes, a predefined datatype that is not one of the
    seven MX format names (``"mxint4"``, ``"bfp16"``, ``"f8E4M3"``) -- gives a
    :class:`~mxlower.jax.DatatypeArray` (codes, scales, zero points), bit-exact with
    :func:`mxlower.reference.encode`: tiles come from the scale spec (``axis`` and
    ``block_size`` do not apply), ``scale_mode`` is section 10's ``scalemode`` ("floor" is
    "max"), and ``roundmode`` / ``key`` / ``rbits`` are as for :func:`mxlower.jax.cast`.
    ``global_scale`` is the f32 tensor scale g of a two-level datatype, whose scale spec ends
    in ``_gf32`` (``"e4m3fn:e8m0_t32_gf32"``, ``"int8:e8m0_t16_s2o1_gf32"``: tensor x tile x
    subtile, nvfp4's ``"e2m1fo:e4m3fn_t16_gf32"``): needed there, refused for any other
    datatype; a Python float or a float32 scalar array (traced allowed; a concrete one finite
    and non-zero).  The array holds it as its ``global_scale`` leaf (without a gradient), and
    ``dequantize`` multiplies the tile level's values by it: bit-exact with
    ``mxlower.reference.encode`` / ``decode`` with ``tensor_scale=g``.

    An MX format's datatype however it is named (``"e4m3fn:e8m0_t32"``, ``"bfp16"``,
    ``"e2m1fo:e4m3fn_t16_gf32"``), rounded with "even" and scale mode "max" (= "floor"),
    "rceil" or "nearest", binds the MX quantize primitive (``mx_quantize``: the format's
    fused kernels, ``impl`` and sharding as for the format name; the same bits as the general
    path); other datatypes and modes bind ``mx_encode`` (``impl`` does not apply).

    ``impl``: "auto" runs mxlower's fused kernel (an XLA FFI custom call) when lowered for the
    CPU or CUDA, the portable StableHLO elsewhere; "xla" always the StableHLO (see
    :mod:`mxlower.jax.kernels`).  Both give the same bits.
    """
    if not (isinstance(format, str) and format in FORMATS) or scale is not None:
        return _quantize_datatype(x, format, scale, axis, block_size, scale_mode,
                                  global_scale, roundmode, key, rbits, impl)
    if roundmode != "even" or key is not None or rbits is not None:
        raise ValueError(f"quantize: the MX format {format!r} (an MXArray) rounds with 'even'; "
                         f"for roundmode={roundmode!r} name the datatype by its codes "
                         f"({get_datatype(format).code!r}: a DatatypeArray) or use "
                         "mxlower.jax.cast")
    kernels.check_impl(impl, "quantize")
    fmt = check_format(format, "quantize")
    x = check_wide(x, "quantize", "x")
    if x.ndim == 0:
        raise ValueError("quantize: argument 'x' must have at least one dimension")
    ax = check_axis(axis, x.ndim, "quantize", "axis", "x")
    k = check_block_size(fmt.block_size if block_size is None else block_size,
                         x.shape[ax], ax, "quantize", "x")
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"quantize: unknown argument 'scale_mode' {scale_mode!r} (known: "
                         f"{', '.join(SCALE_MODES)})")
    g = None if global_scale is None else check_global_scale(global_scale, fmt, "quantize")
    elements, scales, g = _quantize_mx(x, fmt, k, ax, scale_mode, g, impl)
    return MXArray._of_format(elements, scales, g, fmt.name, ax - x.ndim, k,
                              x if traced(x) else None)  # only a traced x can be differentiated


def _quantize_mx(x: Any, fmt: MXFormat, k: int, ax: int, scale_mode: str, g: Any,
                 impl: str) -> tuple[Any, Any, Any]:
    """``mx_quantize`` of checked arguments (``ax`` non-negative, ``scale_mode`` section 3's
    name, ``g`` a checked global scale or None): elements, scales and the global scale as
    the array holds it (no gradient)."""
    operands = [sharding.mark(x, impl)] if g is None else [sharding.mark(x, impl), g]
    elements, scales = quantize_p.bind(*operands, format=fmt.name, block_size=k, axis=ax,
                                       scale_mode=None if fmt.is_nvfp4 else scale_mode,
                                       impl=impl)
    return elements, scales, None if g is None else jax.lax.stop_gradient(g)


def _quantize_datatype(x, number, scale, axis, block_size, scale_mode, global_scale, roundmode,
                       key, rbits, impl) -> DatatypeArray:
    for arg, v, default in (("axis", axis, -1), ("block_size", block_size, None)):
        if not (v is default or v == default):
            raise ValueError(f"quantize: argument '{arg}' is for the MX formats; a datatype "
                             "takes its tiles from the scale spec (e.g. 'e8m0_t32d0' for tiles "
                             "of 32 along dimension 0)")
    kernels.check_impl(impl, "quantize")
    x, dt, roundmode, scalemode, r = check_encode(
        x, number, scale, roundmode=roundmode, scalemode=SCALEMODE_OF.get(scale_mode, scale_mode),
        key=key, rbits=rbits)
    ste = x if traced(x) else None  # only a traced x can be differentiated
    two_level = dt.two_level
    if two_level:
        if global_scale is None:
            tile = dataclasses.replace(dt, scale=dt.scale.tile_level).code
            raise ValueError(f"quantize: the two-level datatype {dt.code} needs argument "
                             "'global_scale' (its f32 tensor scale g, as nvfp4's global "
                             f"scale); without one, name the one-level {tile!r}")
    elif global_scale is not None:
        raise ValueError(f"quantize: argument 'global_scale' is the tensor scale of a two-level "
                         f"datatype (a scale spec ending in '_gf32', e.g. nvfp4's "
                         f"'e2m1fo:e4m3fn_t16_gf32'); {dt.code} has none")
    mx = mx_quantize_of(dt, roundmode, scalemode)  # an MX format's quantize: its primitive
    if mx is not None:
        fmt, k, dim, mode = mx
        g = None if global_scale is None else check_global_scale(global_scale, fmt, "quantize")
        codes, scales, g = _quantize_mx(x, fmt, k, dim % x.ndim, mode, g, impl)
        return DatatypeArray._make(codes, scales, None, g, dt, ste)
    g = check_tensor_scale(global_scale, "quantize", "global_scale") if two_level else None
    codes, scales, zps, offsets = bind_encode(x, dt, roundmode, scalemode, r, g)
    g = None if g is None else jax.lax.stop_gradient(g)
    return DatatypeArray._make(codes, scales, zps, g, dt, ste, offsets)


# ----------------------------------------------------------------------------- dequantize


def _check_mx(mx: Any, fn: str, arg: str) -> DatatypeArray:
    if not isinstance(mx, DatatypeArray):
        raise TypeError(f"{fn}: argument '{arg}' must be an MXArray or a DatatypeArray (from "
                        f"mxlower.jax.quantize), got {type(mx).__name__}")
    return mx


def dequantize(mx: MXArray | DatatypeArray, dtype: Any = jnp.float32, *,
               impl: str = "auto") -> jax.Array:
    """``decode(element) * decode(scale)`` (nvfp4: times the global scale) rounded to
    ``dtype`` (float32, bfloat16 or float16); docs/semantics.md section 5, bit-exact with
    :func:`mxlower.reference.dequantize`.  Gradient: exact (identity) through the
    straight-through source of a quantized array; none into elements or scales.  ``impl`` as
    for :func:`quantize`.  A :class:`~mxlower.jax.DatatypeArray` of another datatype decodes
    as :func:`mxlower.reference.decode` (``impl`` does not apply)."""
    return _check_mx(mx, "dequantize", "mx").dequantize(dtype, impl=impl)


# ----------------------------------------------------------------------------- convert


def convert(x: Any, dtype: Any, *, source: str | None = None, impl: str = "auto") -> jax.Array:
    """``x`` converted to ``dtype``: float32, bfloat16 or float16 to a narrow float type
    (``"f8E4M3FN"``, ``jnp.float8_e5m2``, ``"f8E8M0FNU"``, ``"f6E3M2FN"``, ``"f6E2M3FN"``,
    ``jnp.float4_e2m1fn``, ...) or back; docs/semantics.md section 2, bit-exact with
    :func:`mxlower.reference.convert` -- which ``x.astype`` is not for every type and input
    (XLA's NaN and f8E8M0FNU rules differ; XLA:CPU cannot convert to f6 at all).

    The f6 types, which XLA has no dtype for, travel as ``uint8`` codes, one per byte (as in an
    :class:`MXArray`): a conversion to them returns codes, and one from them takes codes and
    ``source`` naming their type (``convert(codes, jnp.float32, source="f6E2M3FN")``).

    ``impl``: "auto" runs mxlower's fused conversion kernel (an XLA FFI custom call) when lowered
    for the CPU or CUDA, the portable StableHLO (``stablehlo.convert`` expanded by
    ``mxlower-expand-narrow-floats``) elsewhere; "xla" always the StableHLO.  Gradient: the
    tangent converted like ``astype``'s (none through uint8 codes).
    """
    kernels.check_impl(impl, "convert")
    try:
        x = as_array(x)
    except (TypeError, ValueError):
        raise TypeError(f"convert: argument 'x' must be an array, got {type(x).__name__}") \
            from None
    spec = ffi.convert_spec(x.dtype, dtype, source=source, fn="convert")
    return convert_p.bind(sharding.mark(x, impl), src=spec.src, dst=spec.dst, impl=impl)


# ----------------------------------------------------------------------------- scaled dot


def _dims(v: Any, what: str) -> tuple[int, ...]:
    try:
        return tuple(as_int(d, "scaled_dot", "dimension_numbers") for d in v)
    except TypeError:
        raise TypeError(f"scaled_dot: argument 'dimension_numbers' ({what}) must be a "
                        f"sequence of ints, got {v!r}") from None


def _norm_dims(ds: tuple[int, ...], ndim: int, side: str, what: str) -> tuple[int, ...]:
    out = []
    for d in ds:
        if not -ndim <= d < ndim:
            raise ValueError(f"scaled_dot: argument 'dimension_numbers' names {side} "
                             f"{what} dimension {d}, out of range for rank {ndim}")
        out.append(d % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"scaled_dot: argument 'dimension_numbers' repeats a {side} "
                         f"dimension: {tuple(out)}")
    return tuple(out)


def _parse_dimension_numbers(dn: Any, lshape, rshape):
    if dn is None:
        if not lshape or not rshape:
            raise ValueError("scaled_dot: operands must have at least one dimension")
        # [..., M, K] x [..., N, K] -> [..., M, N]: same ranks batch the leading dimensions
        # (XLA's block-scaled-dot layout, matmul's convention); otherwise they are free
        batch = tuple(range(len(lshape) - 2)) if len(lshape) == len(rshape) else ()
        dn = ((len(lshape) - 1,), (len(rshape) - 1,)), (batch, batch)
    try:
        (lc, rc), (lb, rb) = dn
    except (TypeError, ValueError):
        raise ValueError("scaled_dot: argument 'dimension_numbers' must be "
                         "((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), got "
                         f"{dn!r}") from None
    lc, rc = _dims(lc, "contracting"), _dims(rc, "contracting")
    lb, rb = _dims(lb, "batch"), _dims(rb, "batch")
    lc, rc = _norm_dims(lc, len(lshape), "lhs", "contracting"), _norm_dims(
        rc, len(rshape), "rhs", "contracting")
    lb, rb = _norm_dims(lb, len(lshape), "lhs", "batch"), _norm_dims(
        rb, len(rshape), "rhs", "batch")
    if set(lc) & set(lb) or set(rc) & set(rb):
        raise ValueError("scaled_dot: argument 'dimension_numbers' uses a dimension as both "
                         "contracting and batch")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ValueError("scaled_dot: argument 'dimension_numbers' needs as many lhs as rhs "
                         f"contracting and batch dimensions, got {dn!r}")
    for xs, ys, what in ((lc, rc, "contracting"), (lb, rb, "batch")):
        for dl, dr in zip(xs, ys):
            if lshape[dl] != rshape[dr]:
                raise ValueError(f"scaled_dot: {what} dimension sizes differ: lhs dimension "
                                 f"{dl} is {lshape[dl]}, rhs dimension {dr} is {rshape[dr]}")
    return (lc, rc), (lb, rb)


def _side(v: Any, side: str) -> MXArray | Any:
    mx = mx_view(v)
    if mx is not None:
        return mx
    if isinstance(v, DatatypeArray):
        raise TypeError(f"scaled_dot: argument '{side}' is an array of {v.datatype}, which is "
                        "not an MX format's datatype; dequantize it first")
    return check_wide(v, "scaled_dot", side)


def scaled_dot(lhs: Any, rhs: Any, dimension_numbers: Any = None,
               preferred_element_type: Any = jnp.float32, *, impl: str = "auto") -> jax.Array:
    """``dot_general(dequantize(lhs), dequantize(rhs))`` with f32 accumulation, converted to
    ``preferred_element_type``; docs/semantics.md section 6.

    Each side is an :class:`MXArray` (or a :class:`DatatypeArray` of an MX format's
    datatype, e.g. ``e4m3fn:e8m0_t32``) or a plain float32/bfloat16/float16 array.
    ``dimension_numbers`` as in :func:`jax.lax.dot_general`
    (``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``, any positions); the
    default contracts the last dimension of both and, when both have the same rank, batches
    their leading dimensions (``[..., M, K] x [..., N, K] -> [..., M, N]``, XLA's
    block-scaled-dot layout); with different ranks the leading dimensions are free
    (``[B, M, K] x [N, K] -> [B, M, N]``).
    The contracting dimensions of an MX side must include its blocked axis.  Result: batch,
    lhs free, rhs free dimensions.  Two nvfp4 sides with global scales multiply the result by
    both.  Gradient: exact for plain sides, straight-through for quantized ones.

    ``impl``: "auto", lowered for the CPU, runs mxlower's fused dot kernel on the packed
    operands where an f32 contraction is provably exact, and otherwise dequantizes each MX
    side with the fused dequantize kernel and contracts in f64 as "xla" does
    (docs/semantics.md section 6); "xla" always uses the portable StableHLO (see
    :mod:`mxlower.jax.kernels`).  The two agree within section 6's bound (the same bits where
    the f64 contraction runs).
    """
    kernels.check_impl(impl, "scaled_dot")
    a, b = _side(lhs, "lhs"), _side(rhs, "rhs")
    out_dt = check_dtype(jnp.float32 if preferred_element_type is None
                         else preferred_element_type, "scaled_dot", "preferred_element_type")
    dn = _parse_dimension_numbers(dimension_numbers, tuple(a.shape), tuple(b.shape))
    for side, v, contracting in (("lhs", a, dn[0][0]), ("rhs", b, dn[0][1])):
        if isinstance(v, MXArray) and v.blocked_axis not in contracting:
            raise ValueError(f"scaled_dot: argument '{side}' is blocked along axis "
                             f"{v.blocked_axis}, which is not one of its contracting "
                             f"dimensions {tuple(contracting)} (argument 'dimension_numbers');"
                             " an MX operand must be contracted along its blocked axis")
    params: dict[str, Any] = {}
    operands: list[Any] = []
    stes: list[Any] = []
    gs: list[Any] = []
    for side, v in (("lhs", a), ("rhs", b)):
        operands.append(v.elements if isinstance(v, MXArray) else v)
        if isinstance(v, MXArray):
            operands.append(v.scales)
            params.update({f"{side}_format": v.format, f"{side}_block_size": v.block_size,
                           f"{side}_axis": v.blocked_axis, f"{side}_ste": v._ste is not None})
            if v._ste is not None:
                stes.append(v._ste)
            if v.global_scale is not None:
                gs.append(v.global_scale)
        else:
            params.update({f"{side}_format": None, f"{side}_block_size": None,
                           f"{side}_axis": None, f"{side}_ste": False})
    if gs:
        operands.append(gs[0] if len(gs) == 1 else gs[0] * gs[1])
    operands += stes
    operands[0] = sharding.mark(operands[0], impl)
    return scaled_dot_p.bind(*operands, dimension_numbers=dn, out_dtype=out_dt,
                             has_g=bool(gs), impl=impl, **params)


# ----------------------------------------------------------------------------- lower


def lower(f: Callable[..., Any], *args: Any, platform: str = "cpu",
          debug_info: bool = False, **kwargs: Any) -> str:
    """The StableHLO text of ``jax.jit(f)(*args, **kwargs)`` lowered for ``platform``
    ("cpu", "cuda", "rocm", "tpu") after mxlower's pipeline, ready for ``mxlower-opt``.

    ``f`` may already be a ``jax.jit`` function (its shardings are kept).  Every mxlower.jax
    call in it appears as the plain StableHLO mxlower's ``mxlower-mx-to-stablehlo`` pipeline
    produced for its ``mx`` op (the same text for every platform); no mx op or custom call is
    left.  ``debug_info=True`` prints locations (each op points at the user's source line).
    The portable lowering is used even for calls with ``impl="auto"`` on the CPU.
    """
    jitted = f if hasattr(f, "trace") else jax.jit(f)
    with kernels.portable():
        lowered = jitted.trace(*args, **kwargs).lower(lowering_platforms=(platform,))
    return lowered.as_text(debug_info=debug_info)
