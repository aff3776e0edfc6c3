"""Casts to any datatype and M-of-N sparsity in JAX (docs/semantics.md section 10).

* :func:`cast` ``(x, number, scale=None, *, roundmode="even", scalemode="max", key=None,
  rbits=None, tensor_scale=None)``: the virtual cast (fake quantization): ``x``'s shape and
  dtype, each value the dequantized quantized value; a two-level datatype (``_gf32``) takes
  its tensor scale g as ``tensor_scale``.  Gradient: straight-through (identity cotangent).
* :func:`sparse` ``(x, n, m, dim=-1)``: keep the ``m`` largest magnitudes of every ``n``
  consecutive values along ``dim``, the others +0.  Gradient: the cotangent where a value is
  kept, 0 elsewhere.

* :func:`check_encode` + :func:`bind_encode` (what
  :func:`mxlower.jax.quantize` binds for a datatype that is not an MX format's, or with a mode
  the MX quantize primitive lacks: stochastic or another rounding than ``even``, scale mode
  ``midmax``): the actual cast, codes, scales and zero points, which ``quantize`` holds in a
  :class:`~mxlower.jax.DatatypeArray` (:mod:`mxlower.jax.array`); its ``dequantize`` binds
  :data:`decode_p` for datatypes that are not an MX format's.

They bind JAX primitives (``mx_cast``, ``mx_cast_two_level``, ``mx_sparse``, ``mx_encode``,
``mx_decode``; the last two take a two-level datatype's g as one more operand) whose
lowering builds the ``mx.cast`` / ``mx.sparse`` / datatype ``mx.quantize`` / ``mx.dequantize``
op and runs mxlower's pipeline on it through :func:`mxlower.jax.lowering.emit`, like the other
mxlower.jax primitives: bit-exact with :func:`mxlower.reference.cast` / ``.sparse`` /
``.encode`` / ``.decode`` on every backend.  Arguments are checked at trace time
(``TypeError`` / ``ValueError`` naming the argument).  Transformations: ``jit``, ``vmap``
(batching rules; a tensor-wide scale stays one scale per example), ``jvp`` / ``grad``.

Primitive parameters are canonical codes: ``number`` and ``scale`` as
:class:`~mxlower.numbers.NumberSpec` / :class:`~mxlower.numbers.ScaleSpec` codes with the
scale's dimensions counted from the end (so they stay valid under ``vmap``), ``dim`` negative
for the same reason; a custom lookup table, whose code cannot rebuild it, is its
:class:`~mxlower.numbers.NumberSpec` (hashable, :attr:`~mxlower.numbers.NumberSpec.param`).

(The module is ``mxlower.jax.casts``, so that ``mxlower.jax.cast`` is only the function.)
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from mxlower.cast_reference import resolve
from mxlower.dialect import mx
import mxlower.jax.kernels as kernels
import mxlower.jax.sharding as sharding
from mxlower.jax.checks import as_int, check_axis, check_tensor_scale, check_wide
from mxlower.jax.dtypes import mlir_name, storage_dtype
from mxlower.jax.lowering import emit, tensor_type
from mxlower.jax.primitives import _define, _is_zero, _zero
from mxlower.lowering import cast_math
from mxlower.numbers import (
    ROUND_MODES,
    SCALE_MODES,
    Datatype,
    NumberSpec,
    ScaleSpec,
    SpecError,
)
from mxlower.numbers import scale as scale_spec

__all__ = ["bind_encode", "cast", "cast_p", "cast_two_level_p", "check_encode",
           "datatype_of", "decode_p", "encode_p", "kept", "layout", "sparse", "sparse_p"]


# ============================================================================== checks


def datatype_of(number: Any, scale: Any, fn: str, shape: tuple[Any, ...] | None = None,
                arg: str = "number") -> Datatype:
    """The canonical datatype of arguments ``arg`` (default 'number') / 'scale' of ``fn`` (as
    :func:`mxlower.reference.cast` takes them): its scale tiles checked against ``shape``
    (static sizes needed), its scale dimensions rewritten counted from the end, no name.
    A two-level datatype (a tensor level, ``_gf32``) passes; the caller takes its tensor
    scale g (:func:`check_tensor_scale`)."""
    if not isinstance(number, (str, NumberSpec, Datatype)):
        raise TypeError(f"{fn}: argument '{arg}' must be a number spec code ('e5m6', 'int4', "
                        f"...), a datatype name ('mxfp8_e4m3', 'nvfp4', ...) or "
                        f"'number:scale', got {number!r}")
    if scale is not None and not isinstance(scale, (str, ScaleSpec)):
        raise TypeError(f"{fn}: argument 'scale' must be a scale spec code ('e8m0_t32', ...) "
                        f"or None, got {scale!r}")
    try:
        dt = resolve(number, scale)
    except SpecError as e:
        where = f"argument '{arg}'" + (" / 'scale'" if scale is not None else "")
        raise ValueError(f"{fn}: {where}: {e}") from None
    dt = dataclasses.replace(dt, name=None)
    s = dt.scale
    if s is None or shape is None:
        return dt
    for d in shape:
        try:
            operator.index(d)
        except TypeError:  # a symbolic dimension (jax.export shape polymorphism)
            raise ValueError(f"{fn}: a scaled datatype ({dt.code}) needs a static shape (its "
                             f"tiles divide it), got {tuple(shape)}") from None
    rank = len(shape)
    try:
        if s.kind != "tensor" and rank == 0:
            raise SpecError(f"scale '{s.code}' tiles a dimension; 'x' has none")
        dims = s.normalized_dims(rank) if s.kind != "tensor" else ()
        s.scales_shape(tuple(shape))
    except SpecError as e:
        raise ValueError(f"{fn}: datatype {dt.code} on 'x' of shape {tuple(shape)}: {e}") \
            from None
    s = dataclasses.replace(s, dims=tuple(d - rank for d in dims))
    return dataclasses.replace(dt, scale=scale_spec(s.code))


def _modes(dt: Datatype, roundmode: Any, scalemode: Any, fn: str) -> tuple[str, str]:
    for arg, v, known in (("roundmode", roundmode, ROUND_MODES),
                          ("scalemode", scalemode, SCALE_MODES)):
        if not isinstance(v, str) or v not in known:
            raise ValueError(f"{fn}: unknown argument '{arg}' {v!r} (known: "
                             f"{', '.join(known)})")
    s = dt.scale
    if s is not None and not s.power_of_two and scalemode != "max":
        raise ValueError(f"{fn}: argument 'scalemode' {scalemode!r} applies to exponent "
                         f"scales; the float scale {s.number.code} takes 'max'")
    if s is None or not s.power_of_two:
        scalemode = "max"  # ignored: one canonical parameter
    reason = cast_math.unsupported(dt, scalemode)
    if reason:
        raise ValueError(f"{fn}: datatype {dt.code}: {reason} (mxlower.reference.cast "
                         "computes it)")
    return roundmode, scalemode


def _random_bits(x: Any, roundmode: str, key: Any, rbits: Any, fn: str) -> Any | None:
    if roundmode != "stochastic":
        if key is not None or rbits is not None:
            raise ValueError(f"{fn}: arguments 'key' and 'rbits' are for "
                             f"roundmode='stochastic', not {roundmode!r}")
        return None
    if (key is None) == (rbits is None):
        raise ValueError(f"{fn}: roundmode='stochastic' needs exactly one of 'key' (a "
                         "jax.random key: the bits are drawn with jax.random.bits) and 'rbits' "
                         f"(uint32, one per element, shape {tuple(x.shape)})")
    if key is not None:
        try:
            return jax.random.bits(key, tuple(x.shape), jnp.uint32)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{fn}: argument 'key' must be a jax.random key "
                            f"(jax.random.key(seed)): {e}") from None
    try:
        r = rbits if hasattr(rbits, "aval") or isinstance(rbits, jax.Array) else jnp.asarray(
            rbits)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: argument 'rbits' must be a uint32 array, got "
                        f"{type(rbits).__name__}") from None
    if r.dtype != jnp.uint32:
        raise TypeError(f"{fn}: argument 'rbits' must have dtype uint32, got {r.dtype}")
    if tuple(r.shape) != tuple(x.shape):
        raise ValueError(f"{fn}: argument 'rbits' must have the shape of 'x' "
                         f"{tuple(x.shape)}, got {tuple(r.shape)}")
    return r


def _tensor_scale(dt: Datatype, g: Any, fn: str, arg: str) -> Any | None:
    """The checked tensor scale g (argument ``arg``) of a two-level ``dt``: required for one,
    refused otherwise; a float32 scalar (None without a tensor level)."""
    if dt.two_level:
        if g is None:
            tile = dataclasses.replace(dt, scale=dt.scale.tile_level).code
            raise ValueError(f"{fn}: the two-level datatype {dt.code} needs argument '{arg}' "
                             f"(its f32 tensor scale g; without one, name the tile level "
                             f"alone: {tile!r})")
        return check_tensor_scale(g, fn, arg)
    if g is not None:
        raise ValueError(f"{fn}: argument '{arg}' is the tensor scale g of a two-level "
                         f"datatype (a scale spec ending in '_gf32', e.g. nvfp4's "
                         f"'e2m1fo:e4m3fn_t16_gf32'); {dt.code} has none")
    return None


# ============================================================================== cast


def cast(x: Any, number: Any, scale: Any = None, *, roundmode: str = "even",
         scalemode: str = "max", key: Any = None, rbits: Any = None,
         tensor_scale: Any = None, impl: str = "auto") -> jax.Array:
    """The virtual cast of ``x`` (float32, bfloat16 or float16) to a datatype:
    docs/semantics.md section 10.4, bit-exact with :func:`mxlower.reference.cast`.

    ``number``: a number spec (``"e5m6"``, ``"e2m1fo"``, ``"int4"``, ``"e4m3b8fnuz"``, a
    type name such as ``"f8E4M3FN"``, a lookup table: ``"nf4"`` or a
    :func:`mxlower.numbers.lut_spec`), a predefined datatype (``"mxfp8_e4m3"``, ``"nvfp4"``,
    ``"mxint4"``, ``"bfp16"``, ...) or ``"number:scale"``; ``scale``: a scale spec
    (``"e8m0_t32"``, ``"e4m3fn_t16"``, ``"e8m0_t32x32"``, ``"float32_uint8_t0"``) or None.
    ``roundmode``: even, nearest, zero, half_down or stochastic; ``scalemode`` (exponent
    scales): max, midmax, rceil or nearest.  Stochastic rounding takes exactly one of ``key`` (a
    ``jax.random`` key; one uint32 per element is drawn with ``jax.random.bits(key,
    x.shape, jnp.uint32)``) and ``rbits`` (those bits, uint32 of ``x``'s shape); the other
    modes take neither.  Scale tiles must divide their dimensions (never padded), so a scaled
    datatype needs a static shape; an unscaled cast takes ``jax.export``'s symbolic
    dimensions.

    ``tensor_scale``: the tensor scale g of a two-level datatype (a scale spec ending in
    ``_gf32``: ``"e4m3fn:e8m0_t32_gf32"``, nvfp4's ``"e2m1fo:e4m3fn_t16_gf32"``, the three
    levels of ``"int8:e8m0_t16_s2o1_gf32"``), required there and refused otherwise: a Python
    float or a float32 scalar array (traced allowed; a concrete one must be finite and
    non-zero).  The tiles scale y = x / g (one f32 division per value) and each value is the
    tile level's times g in f32 (docs/semantics.md 10.3), as
    ``mxlower.reference.cast(..., tensor_scale=g)``.  Under ``vmap`` g may be batched (one g
    per example; the examples are then cast one after another) or not.  It gets no gradient
    (a zero cotangent: the straight-through estimator's value, x, does not depend on g).
    On the CPU and CUDA ``impl`` applies as below (the cast kernel takes g as one more
    operand); on other platforms two-level casts run the StableHLO lowering.

    ``impl``: "auto" runs mxlower's fused cast kernel (an XLA FFI custom call) when lowered
    for the CPU (or CUDA) and one exists (:class:`mxlower.lowering.mx_kernels.CastSpec`:
    unscaled casts, exponent and float scales in 1D tiles, channels and tensors, subtiles,
    lookup tables and a tensor level included; on CUDA not a tensor scale), the
    StableHLO lowering otherwise; "xla" always the
    StableHLO.  Both give the same bits.

    Gradient: the straight-through estimator (the cotangent passes unchanged).
    """
    kernels.check_impl(impl, "cast")
    x = check_wide(x, "cast", "x")
    dt = datatype_of(number, scale, "cast", tuple(x.shape))
    g = _tensor_scale(dt, tensor_scale, "cast", "tensor_scale")
    roundmode, scalemode = _modes(dt, roundmode, scalemode, "cast")
    r = _random_bits(x, roundmode, key, rbits, "cast")
    if g is not None:  # two levels: the StableHLO lowering of mx.cast with g
        return cast_two_level_p.bind(x, *([] if r is None else [r]), g,
                                     number=dt.number.param, scale=dt.scale.code,
                                     roundmode=roundmode, scalemode=scalemode, impl=impl)
    return cast_p.bind(sharding.mark(x, impl), *([] if r is None else [r]),
                       number=dt.number.param,
                       scale=None if dt.scale is None else dt.scale.code, roundmode=roundmode,
                       scalemode=scalemode, impl=impl)


cast_p = Primitive("mx_cast")


def _cast_abstract(x, *r, number, scale, roundmode, scalemode, impl="auto"):
    return jax.core.ShapedArray(x.shape, x.dtype)


def _cast_lowering(ctx, x, *r, number, scale, roundmode, scalemode, impl="auto"):
    t = x.type
    arg_types = [t] + [v.type for v in r]

    def build(args):
        op = mx.cast(args[0], number, scale, roundmode=roundmode, scalemode=scalemode,
                     rbits=args[1] if r else None)
        return list(op.results)

    return emit(build, [x, *r], arg_types, [t])


def _cast_jvp(primals, tangents, **params):
    out = cast_p.bind(*primals, **params)
    t = tangents[0]
    if _is_zero(t):
        return out, _zero(out)
    return out, t  # the straight-through estimator


# on the CPU and CUDA, the fused kernel where one exists (impl="auto"; mxlower.jax.kernels)
for _platform in ("cpu", "cuda"):
    mlir.register_lowering(cast_p, kernels.cast_rule(_platform, _cast_lowering),
                           platform=_platform)


def _channel(scale: str) -> str:
    """The tensor-wide scale spec ``scale`` as one scale per channel of the last dimension:
    the batched form of a tensor scale over a ``[batch, n]`` view."""
    return dataclasses.replace(scale_spec(scale), kind="channel", tile=(), dims=(-1,)).code


def _g_index(prim, n_args: int, scale: str | None) -> int | None:
    """The position of the tensor scale g among ``prim``'s operands (a scale code with a
    tensor level), None without one: after the codes, scales and zero points / offsets of
    :data:`decode_p` (before its straight-through source), last for the others."""
    if scale is None or scale_spec(scale).tensor is None:
        return None
    return _n_parts(scale) if prim is decode_p else n_args - 1


def _one_by_one(prim, args, dims, params):
    """``prim`` on each example in turn (``lax.map`` over the batched operands, the others
    shared): the batching rule for a batched tensor scale g, which the ops take as one
    rank-0 value."""
    idx = [i for i, d in enumerate(dims) if d is not None]
    xs = [jnp.moveaxis(args[i], dims[i], 0) for i in idx]

    def one(sl):
        full = list(args)
        for i, v in zip(idx, sl):
            full[i] = v
        return prim.bind(*full, **params)

    out = lax.map(one, xs)
    return out, ([0] * len(out) if prim.multiple_results else 0)


def _front(args, dims, size: int, gi: int | None) -> list[Any]:
    """Every operand with its batch dimension in front (unbatched ones broadcast), except an
    unbatched tensor scale g (at ``gi``), which all examples share."""
    return [a if i == gi else batching.bdim_at_front(a, d, size)
            for i, (a, d) in enumerate(zip(args, dims))]


def _per_example_batch(prim):
    """The batching rule of a primitive returning one array of the values' shape (cast,
    decode): the batch dimension moves to the front of every operand; a tensor-wide scale
    becomes one scale per example (each example one channel of a ``[batch, n]`` view, every
    operand flattened to ``[batch, -1]``).  A two-level datatype's g: shared when unbatched,
    else the examples one by one."""
    def batch(args, dims, *, scale, **params):
        gi = _g_index(prim, len(args), scale)
        if gi is not None and dims[gi] is not None:
            return _one_by_one(prim, args, dims, dict(params, scale=scale))
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        front = _front(args, dims, size, gi)
        if scale is None or scale_spec(scale).kind != "tensor":
            # no scale, or tiles with dimensions counted from the end: the same per example
            return prim.bind(*front, scale=scale, **params), 0
        shape = front[0].shape
        flat = [a if i == gi else a.reshape(size, -1) for i, a in enumerate(front)]
        return prim.bind(*flat, scale=_channel(scale), **params).reshape(shape), 0
    return batch


_define(cast_p, _cast_abstract, _cast_lowering, _cast_jvp, _per_example_batch(cast_p))


#: ``mx_cast_two_level``: operands x [, rbits], g (rank 0, f32); the scale code ends in its
#: tensor level.  On the CPU and CUDA the fused cast kernel where one exists (``impl="auto"``,
#: :func:`mxlower.jax.kernels.cast_rule`), else the StableHLO lowering of mx.cast with g.
cast_two_level_p = Primitive("mx_cast_two_level")


def _cast_two_level_lowering(ctx, x, *rg, number, scale, roundmode, scalemode, impl="auto"):
    arg_types = [x.type] + [v.type for v in rg]

    def build(args):
        op = mx.cast(args[0], number, scale, roundmode=roundmode, scalemode=scalemode,
                     rbits=args[1] if len(rg) == 2 else None, tensor_scale=args[-1])
        return list(op.results)

    return emit(build, [x, *rg], arg_types, [x.type])


def _cast_two_level_jvp(primals, tangents, **params):
    out = cast_two_level_p.bind(*primals, **params)
    t = tangents[0]  # straight-through for x; g gets none (see cast)
    if _is_zero(t):
        return out, _zero(out)
    return out, t


_define(cast_two_level_p, _cast_abstract, _cast_two_level_lowering, _cast_two_level_jvp,
        _per_example_batch(cast_two_level_p))
# on the CPU and CUDA, the fused cast kernel where one exists (impl="auto")
for _platform in ("cpu", "cuda"):
    mlir.register_lowering(cast_two_level_p,
                           kernels.cast_rule(_platform, _cast_two_level_lowering,
                                             two_level=True),
                           platform=_platform)


# ============================================================================== sparse


def sparse(x: Any, n: int, m: int, dim: int = -1) -> jax.Array:
    """In each run of ``n`` consecutive values of ``x`` (float32, bfloat16 or float16) along
    ``dim``, keep the ``m`` of largest magnitude and set the others to +0 (NaN counts as the
    largest, equal magnitudes keep the lower index): docs/semantics.md section 10.5, bit-exact
    with :func:`mxlower.reference.sparse`.  ``n`` must divide ``x.shape[dim]`` (a static size);
    0 < m <= n.

    Gradient: the cotangent of the kept values, 0 for the others."""
    x = check_wide(x, "sparse", "x")
    if x.ndim == 0:
        raise ValueError("sparse: argument 'x' must have at least one dimension")
    n, m = as_int(n, "sparse", "n"), as_int(m, "sparse", "m")
    d = check_axis(dim, x.ndim, "sparse", "dim", "x")
    if n <= 0 or not 0 < m <= n:
        raise ValueError(f"sparse: arguments 'n' and 'm' need 0 < m <= n, got n={n}, m={m}")
    size = x.shape[d]
    try:
        operator.index(size)
    except TypeError:
        raise ValueError(f"sparse: dimension {d} of 'x' must have a static size, got "
                         f"'{size}'") from None
    if size % n:
        raise ValueError(f"sparse: argument 'n' = {n} does not divide dimension {d} of 'x' "
                         f"(size {size})")
    return sparse_p.bind(x, n=n, m=m, dim=d - x.ndim)


sparse_p = Primitive("mx_sparse")


def _sparse_abstract(x, *, n, m, dim):
    return jax.core.ShapedArray(x.shape, x.dtype)


def _sparse_lowering(ctx, x, *, n, m, dim):
    def build(args):
        return list(mx.sparse(args[0], n, m, dim=dim).results)

    return emit(build, [x], [x.type], [x.type])


def kept(x: Any, n: int, m: int, dim: int) -> jax.Array:
    """The mask of the values :func:`sparse` keeps, computed on the bits (magnitude = the
    value's bits without the sign; every NaN above +Inf; ties by index), independently of the
    lowering: a stable sort of each run."""
    x = jnp.asarray(x)
    width = np.dtype(x.dtype).itemsize * 8
    u = lax.bitcast_convert_type(x, jnp.dtype(f"uint{width}")).astype(jnp.int32)
    mag = u & ((1 << (width - 1)) - 1)
    inf = {32: 0x7F800000, 16: 0x7C00 if x.dtype == jnp.float16 else 0x7F80}[width]
    key = jnp.where(mag > inf, inf + 1, mag)  # every NaN the same, above Inf
    moved = jnp.moveaxis(key, dim, -1)
    runs = moved.reshape(*moved.shape[:-1], moved.shape[-1] // n, n)
    order = jnp.argsort(-runs, axis=-1, stable=True)
    rank = jnp.argsort(order, axis=-1, stable=True)
    return jnp.moveaxis((rank < m).reshape(moved.shape), -1, dim)


def _sparse_jvp(primals, tangents, *, n, m, dim):
    (x,), (t,) = primals, tangents
    out = sparse_p.bind(x, n=n, m=m, dim=dim)
    if _is_zero(t):
        return out, _zero(out)
    return out, jnp.where(kept(x, n, m, dim), t, jnp.zeros((), t.dtype))


def _sparse_batch(args, dims, **params):
    (x,), (d,) = args, dims
    return sparse_p.bind(batching.bdim_at_front(x, d, x.shape[d]), **params), 0


_define(sparse_p, _sparse_abstract, _sparse_lowering, _sparse_jvp, _sparse_batch)


# ============================================================================== actual casts


def _storage(spec: NumberSpec) -> np.dtype:
    """The JAX dtype holding codes of ``spec`` (uint8 codes for the f6 types)."""
    return storage_dtype(spec.storage)


def layout(dt: Datatype, shape: tuple[int, ...]) -> list[tuple[tuple[int, ...], np.dtype, str]]:
    """(shape, JAX dtype, MLIR type) of the codes [, scales [, zero points | subtile
    offsets]] of ``dt``."""
    out = [(tuple(shape), _storage(dt.number), dt.number.storage)]
    s = dt.scale
    if s is not None:
        ss = s.scales_shape(tuple(shape))
        out.append((ss, _storage(s.number), s.number.storage))
        if s.zero_point is not None:
            out.append((ss, _storage(s.zero_point), s.zero_point.storage))
        if s.subtile:
            out.append((s.offsets_shape(tuple(shape)), _storage(s.offset_number),
                        s.offset_number.storage))
    return out


def check_encode(x: Any, number: Any, scale: Any = None, *, roundmode: str = "even",
                 scalemode: str = "max", key: Any = None, rbits: Any = None,
                 fn: str = "quantize",
                 arg: str = "format") -> tuple[Any, Datatype, str, str, Any]:
    """The checked arguments of an actual cast (as :func:`cast` takes them; errors name the
    datatype argument ``arg``): ``x``, the canonical datatype, the round and scale modes
    (canonical: ``max`` for a float scale) and the random bits (None unless stochastic).  For
    a two-level datatype (``_gf32``) the caller checks its tensor scale g and binds
    :data:`encode_p` with it (or, for nvfp4's ``e2m1fo:e4m3fn_t16_gf32`` rounded as nvfp4
    does, the MX quantize primitive)."""
    x = check_wide(x, fn, "x")
    dt = datatype_of(number, scale, fn, tuple(x.shape), arg)
    roundmode, scalemode = _modes(dt, roundmode, scalemode, fn)
    r = _random_bits(x, roundmode, key, rbits, fn)
    return x, dt, roundmode, scalemode, r


def bind_encode(x: Any, dt: Datatype, roundmode: str, scalemode: str,
                r: Any = None, g: Any = None) -> list[Any]:
    """:data:`encode_p` on arguments :func:`check_encode` gave (``g``: the checked tensor
    scale of a two-level ``dt``, else None): ``[codes, scales, zero_points, offsets]``, None
    where the datatype has none (subtile offsets: a scale spec with subtiles)."""
    outs = list(encode_p.bind(x, *([] if r is None else [r]), *([] if g is None else [g]),
                              number=dt.number.param,
                              scale=None if dt.scale is None else dt.scale.code,
                              roundmode=roundmode, scalemode=scalemode))
    if dt.scale is not None and dt.scale.subtile:
        return outs[:2] + [None, outs[2]]
    return outs + [None] * (4 - len(outs))


encode_p = Primitive("mx_encode")
encode_p.multiple_results = True


def _encode_abstract(x, *r, number, scale, roundmode, scalemode):
    dt = resolve(number, scale)
    return [jax.core.ShapedArray(s, d) for s, d, _ in layout(dt, x.shape)]


def _encode_lowering(ctx, x, *r, number, scale, roundmode, scalemode):
    dt = resolve(number, scale)
    shape = ctx.avals_in[0].shape
    results = [tensor_type(s, t) for s, _, t in layout(dt, shape)]
    two = dt.two_level  # g is the last operand
    stochastic = len(r) > two

    def build(args):
        op = mx.quantize(args[0], number=number, scale=scale, roundmode=roundmode,
                         scalemode=scalemode, rbits=args[1] if stochastic else None,
                         tensor_scale=args[-1] if two else None)
        return list(op.results)

    return emit(build, [x, *r], [x.type] + [v.type for v in r], results)


def _encode_jvp(primals, tangents, **params):
    outs = encode_p.bind(*primals, **params)
    return outs, [_zero(o) for o in outs]


def _encode_batch(args, dims, *, scale, **params):
    gi = _g_index(encode_p, len(args), scale)
    if gi is not None and dims[gi] is not None:  # one g per example
        return _one_by_one(encode_p, args, dims, dict(params, scale=scale))
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    front = _front(args, dims, size, gi)
    if scale is None or scale_spec(scale).kind != "tensor":
        return encode_p.bind(*front, scale=scale, **params), [0] * _n_parts(scale)
    shape = front[0].shape
    outs = encode_p.bind(*[a if i == gi else a.reshape(size, -1) for i, a in enumerate(front)],
                         scale=_channel(scale), **params)
    tile = (size,) + (1,) * (len(shape) - 1)
    return [outs[0].reshape(shape)] + [o.reshape(tile) for o in outs[1:]], [0] * len(outs)


_define(encode_p, _encode_abstract, _encode_lowering, _encode_jvp, _encode_batch)


decode_p = Primitive("mx_decode")


def _n_parts(scale: str | None) -> int:
    if scale is None:
        return 1
    s = scale_spec(scale)
    return 2 + (s.zero_point is not None or bool(s.subtile))


def _decode_abstract(c, *rest, number, scale, dtype, has_ste):
    return jax.core.ShapedArray(c.shape, dtype)


def _decode_lowering(ctx, *args, number, scale, dtype, has_ste):
    k = _n_parts(scale)
    dt = resolve(number, scale)
    shape = ctx.avals_in[0].shape
    types = [tensor_type(s, t) for s, _, t in layout(dt, shape)]
    out = mlir_name(dtype)
    two = dt.two_level  # g after the codes' parts
    if two:
        types.append(tensor_type((), "f32"))

    sub = dt.scale is not None and bool(dt.scale.subtile)

    def build(a):
        op = mx.dequantize(a[0], a[1] if k > 1 else None, number=number, scale=scale,
                           zero_points=a[2] if k > 2 and not sub else None,
                           offsets=a[2] if sub else None, result_type=out,
                           tensor_scale=a[k] if two else None)
        return list(op.results)

    return emit(build, list(args[:k + two]), types, [tensor_type(shape, out)])


def _decode_jvp(primals, tangents, *, dtype, has_ste, **params):
    out = decode_p.bind(*primals, dtype=dtype, has_ste=has_ste, **params)
    if not has_ste or _is_zero(tangents[-1]):
        return out, _zero(out)
    return out, lax.convert_element_type(tangents[-1], dtype)  # straight-through estimator


_define(decode_p, _decode_abstract, _decode_lowering, _decode_jvp, _per_example_batch(decode_p))
