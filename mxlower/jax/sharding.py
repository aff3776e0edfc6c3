"""Partitioning rules for mxlower.jax's kernel calls: sharded programs run the kernels per shard.

In a program partitioned over several devices (``jax.jit`` with ``NamedSharding`` inputs or
outputs), XLA's SPMD partitioner cannot split a custom call it knows nothing about.  So
:mod:`mxlower.jax.kernels` wraps each kernel call (``mx_quantize``, ``mx_dequantize``,
``mx_convert``, ``mx_cast``, ``mx_scaled_dot``) in ``jax.experimental.custom_partitioning``
with the rule below for its primitive: XLA propagates shardings through it (a Shardy sharding
rule), then asks the rule's ``partition`` which shardings the call runs on, and the call is
lowered again for one shard's shapes -- where the primitive's CPU rule, seeing a per-device
program, emits the kernel.  Each shard runs the kernel on its own blocks; nothing is
gathered unless a shard boundary would split a block.

How a rule sees a call (a :class:`Plan`): every dimension of every operand and result is a
*factor* times a *unit* -- the number of its elements per unit of the factor.  A plain
dimension is its own factor with unit 1; a blocked axis of ``k`` elements per block is the
factor "blocks" with unit ``k`` on the elements and unit 1 on the scales; a dimension whose
values form one tile (a channel scale of ``mx_cast``) is a factor of size 1, which no
sharding divides.  The partition keeps a factor sharded over the mesh axes of the first
operand that shards it where the number of shards divides the factor's size (so a shard
holds whole blocks) and no other factor already claimed those axes, and replicates it
otherwise (XLA moves the data first; the results stay bit-identical, only slower).  Results
are sharded like the operands' factors.

The dot (``mx_scaled_dot``): batch, lhs-free and rhs-free dimensions are factors as above and
run per shard (bit-identical to the unsharded program where a shard's dot takes the same
kernel path); contracting dimensions are *reduced* factors.  A sharded contracting dimension
(block boundaries as for quantize) runs one of three ways (:class:`Reduction`, chosen by
:meth:`Plan.reduction`); a result dimension that the contracting shard count divides takes
over those mesh axes -- the one the program wants split over them, else that of the largest
factor not sharded yet:

- **gather**, where the operand bytes a shard lacks (its operands' other slices of K) are
  fewer than one f32 partial result's bytes (large results, short K): the operands are
  gathered whole along K (:func:`_gather_along`: on their bits, along a new major dimension;
  XLA's own resharding of float8 arrays goes through f16 copies) and each shard computes its
  slice of that result dimension (its operands sliced by ``axis_index``) with K whole -- no
  sum across shards, the kernel's own bits, and no shard holds more than a partial result
  would take;
- **scatter**, otherwise (the GEMV of tensor parallelism: a small result, large K-sharded
  weights): each shard computes the f32 partial dot of its slice of K -- exact or rounded
  once, as the unsharded kernel path does -- the partials are reduce-scattered along that
  dimension (``lax.psum_scatter``), and each shard applies the epilogue to its slice only;
- **all-reduce** where no result dimension divides, or where a partial result under
  :data:`SMALL_PARTIAL` bytes is wanted whole: the partials all-reduced (``lax.psum``).

The sums of partials take care for XLA:CPU, whose f32 arithmetic flushes subnormals.  Where
every shard's partials are zero or at least 2^-103 (found by a one-integer ``pmax``), every
sum of them is zero or normal and the plain sum is used; otherwise an integer all-reduce
(``pmax``) finds each element's largest exponent over the shards, every partial
is scaled on its bits so that the largest sits near 2^100 (:data:`ldexp_p`), the scaled
partials are summed, and the sum is scaled back on its bits (subnormal results rounded to
nearest even), multiplied by the global scale exactly and converted to the result type
(:data:`epilogue_p`, the one-device epilogue).  This changes the order of summation, which
docs/semantics.md section 6 leaves open: the sum over ``s`` shards adds at most
``(s - 1) * 2^-24`` of ``sum |a b|`` to the shards' own errors, within the bound for up to 16
shards along K.  Where ``sum |a b|`` is itself deep in the subnormal range (below about
2^-130), the per-shard rounding of the partials to f32 can leave the result an ulp of the
subnormal grid from the once-rounded sum; and a shard's partial dot overflowing f32 where the
whole sum cancels back into range (scales near the top of e8m0's range) gives an infinity one
device would not.  A result the program wants replicated is gathered by XLA after the
gather and scatter ways (a reduce-scatter and an all-gather: the bytes of one all-reduce,
the epilogue run once per slice instead of on every shard).

Each rule rebinds its primitive on the shard's operands, so the per-shard code is whatever
the primitive's CPU rule emits: when ``mx_scaled_dot`` gets its own kernel it runs per shard
with no change here.  :data:`PLANS` maps primitive names to plan builders; a new kernel call
adds one.

Not partitioned (:func:`applies` is false; the StableHLO lowering, which XLA partitions
block by block, is used as before): an ``mx_cast`` with a tensor-wide scale (one tile of
every value; its StableHLO all-reduces the scale), programs partitioned without a mesh
(``GSPMDSharding`` only) and the partially manual bodies of a ``shard_map``.

Devices while lowering: ``custom_partitioning`` needs the program's device assignment, which
jit gives a lowering only when the program holds a primitive of
``jax._src.dispatch.prim_requires_devices_during_lowering`` (private, reached through
:func:`mxlower.bindings.jax_private.require_devices_during_lowering`; JAX's own
``scaled_matmul`` is in it).  Rather than the kernel primitives themselves -- then no program
using them could be lowered over an ``AbstractMesh`` (``jax.export`` of a program sharded over
an abstract mesh), with no way out -- the API passes each traced ``impl="auto"`` call's first
operand through :func:`mark`, an identity primitive (``mx_needs_devices``) in that set:
``impl="xla"`` programs lower over an abstract mesh as before, ``impl="auto"`` ones need
concrete devices, as ``scaled_matmul`` does (``kernels`` reads the lowering context's axis
context as before).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.custom_partitioning import (
    ArrayMapping,
    CompoundFactor,
    SdyShardingRule,
    custom_partitioning,
)
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from mxlower.bindings import jax_private
from mxlower.bindings.jaxlib import ir
from mxlower.ir.stablehlo_builder import Builder
import mxlower.jax.primitives as primitives
from mxlower.jax.dtypes import mlir_name
from mxlower.lowering import mx_math
from mxlower.numbers import scale as scale_spec

__all__ = ["PLANS", "Dim", "Plan", "Reduction", "applies", "devices_p", "lower", "mark",
           "plan_for"]

_F32 = np.dtype(np.float32)


@dataclasses.dataclass(frozen=True)
class Dim:
    """One dimension of an operand or result: ``unit`` elements per unit of ``factor``."""

    factor: str
    unit: int = 1


Value = tuple[Dim, ...]


@dataclasses.dataclass(frozen=True)
class Reduction:
    """How a call whose reduced factors are sharded runs (``axes``: the mesh axes they are
    sharded over, ``shards`` their number).  ``how`` is ``"gather"`` (every shard gathers the
    operands whole along the reduced factors and computes the slice of the result along
    ``dim``, its shard's part of the result factor there: no sum across shards),
    ``"scatter"`` (each shard's partial result over its slice of the reduced factors,
    reduce-scattered along result dimension ``dim``) or ``"all-reduce"`` (the partials
    all-reduced: no result dimension divides into ``shards``)."""

    axes: tuple[str, ...]
    shards: int
    how: str
    dim: int | None = None


@dataclasses.dataclass(frozen=True)
class Plan:
    """How one kernel call's operands and results split into shards.

    ``operands`` / ``results``: each value's dimensions; ``sizes``: each factor's size in
    units; ``reduced``: factors that appear in no result (summed over: the dot's contracting
    dimensions); ``order``: the order in which factors claim mesh axes; ``local``: given the
    mesh axes the reduced factors are sharded over (empty: none), the function each shard
    runs on its operands."""

    operands: tuple[Value, ...]
    results: tuple[Value, ...]
    sizes: dict[str, int]
    local: Callable[[Reduction | None], Callable[..., Any]]
    reduced: tuple[str, ...] = ()

    @property
    def order(self) -> list[str]:
        seen: dict[str, None] = {}
        for value in (*self.results, *self.operands):
            for d in value:
                seen.setdefault(d.factor, None)
        return [f for f in seen if f not in self.reduced] + list(self.reduced)

    # ------------------------------------------------------------------ Shardy's rule

    def sharding_rule(self, devices: int) -> SdyShardingRule:
        """The Shardy sharding rule for a mesh of ``devices``.  A dimension of unit
        ``u > 1`` is the compound factor ``(factor, factor_u)`` whose minor part Shardy must
        not shard, where every sharding of the mesh divides the factor's size; otherwise
        (Shardy would split a mesh axis between the two parts, which no partition spec can
        name) each (factor, unit) is a whole factor of its own, so elements and scales are
        propagated separately and :meth:`partition` ties them together."""
        split = {f for f, n in self.sizes.items() if n % devices}
        whole = {d.factor for v in (*self.operands, *self.results) for d in v if d.unit == 1}
        sizes: dict[str, int] = {}

        def mapping(v: Value) -> ArrayMapping:
            dims: list[Any] = []
            for d in v:
                if d.unit == 1:
                    dims.append(d.factor)
                elif d.factor in split:
                    dims.append(f"{d.factor}_x{d.unit}")
                else:
                    minor = f"{d.factor}_u{d.unit}"
                    sizes[minor] = d.unit
                    if d.factor not in whole:
                        sizes[d.factor] = self.sizes[d.factor]
                    dims.append(CompoundFactor(d.factor, minor))
            return ArrayMapping(*dims)

        ops = tuple(mapping(v) for v in self.operands)
        res = tuple(mapping(v) for v in self.results)
        minors = tuple(f for f in sizes if f not in self.sizes)
        return SdyShardingRule(ops, res, need_replication_factors=minors, **sizes)

    # ------------------------------------------------------------------ partition

    def choose(self, mesh: Any, specs: Sequence[Sequence[Any]]) -> dict[str, tuple[str, ...]]:
        """The mesh axes each factor is sharded over, from the operands' partition specs:
        the first operand sharding the factor names them; kept where their shard count
        divides the factor's size and no factor earlier in :attr:`order` holds them."""
        proposed: dict[str, tuple[str, ...]] = {}
        for value, spec in zip(self.operands, specs):
            for d, entry in zip(value, tuple(spec) + (None,) * (len(value) - len(spec))):
                axes = _axes(entry)
                if axes and d.factor not in proposed:
                    proposed[d.factor] = axes
        used: set[str] = set()
        chosen: dict[str, tuple[str, ...]] = {}
        for f in self.order:
            axes = proposed.get(f, ())
            shards = math.prod(mesh.shape[a] for a in axes)
            if axes and not used & set(axes) and self.sizes[f] % shards == 0:
                chosen[f] = axes
                used |= set(axes)
        return chosen

    def reduction(self, mesh: Any, chosen: dict[str, tuple[str, ...]], arg_shapes: Any,
                  result_shape: Any) -> Reduction | None:
        """How the call runs where :meth:`choose` shards a reduced factor (None: it does
        not).  The shards go to the result dimension the program already wants sharded over
        the reduced factors' mesh axes, else to that of the largest factor not sharded yet;
        either must divide into the shards.  The operands are gathered where their bytes
        still to be moved (the parts a shard does not hold) are fewer than one f32 partial
        result's, the partials reduce-scattered otherwise -- and all-reduced where no result
        dimension divides, or where a partial result under :data:`SMALL_PARTIAL` bytes is
        wanted whole (one collective then costs less than a reduce-scatter and the
        all-gather after it)."""
        axes = tuple(a for f in self.reduced for a in chosen.get(f, ()))
        if not axes:
            return None
        shards = math.prod(mesh.shape[a] for a in axes)
        (result,) = self.results
        out = result_shape[0] if isinstance(result_shape, (list, tuple)) else result_shape
        spec = tuple(getattr(getattr(out, "sharding", None), "spec", ()) or ())
        free = [(_axes(spec[i]) == axes if i < len(spec) else False,
                 self.sizes[d.factor], -i) for i, d in enumerate(result)
                if d.factor not in chosen and self.sizes[d.factor] % shards == 0]
        partial = 4 * math.prod(_shape(out))
        wanted = bool(free) and max(free)[0]
        if not free or (partial < SMALL_PARTIAL and not wanted and not FORCE_REDUCTION):
            return Reduction(axes, shards, "all-reduce")
        dim = -max(free)[2]
        moved = sum(_nbytes(a) * (1 - 1 / _shards_of(mesh, v, chosen, self.reduced))
                    for a, v in zip(arg_shapes, self.operands))
        how = FORCE_REDUCTION or ("gather" if moved < partial else "scatter")
        return Reduction(axes, shards, how, None if how == "all-reduce" else dim)

    def partition(self, mesh: Any, arg_shapes: Any, result_shape: Any) -> tuple[Any, ...]:
        """``custom_partitioning``'s ``partition``: the shards' function and shardings."""
        specs = [getattr(a.sharding, "spec", ()) for a in arg_shapes]
        chosen = self.choose(mesh, specs)
        red = self.reduction(mesh, chosen, arg_shapes, result_shape)
        out = dict(chosen)
        if red is not None and red.dim is not None:
            out[self.results[0][red.dim].factor] = red.axes

        def sharding(v: Value, axes: dict[str, tuple[str, ...]]) -> NamedSharding:
            return NamedSharding(mesh, P(*(_entry(axes.get(d.factor, ())) for d in v)))

        results = [sharding(v, out) for v in self.results]
        run = self.local(red)
        if red is not None and red.how == "gather":
            run = self._gathered(run, red, chosen)
        return (mesh, run, tuple(results) if len(results) > 1 else results[0],
                tuple(sharding(v, chosen) for v in self.operands))

    def _gathered(self, run: Callable[..., Any], red: Reduction,
                  chosen: dict[str, tuple[str, ...]]) -> Callable[..., Any]:
        """``run`` on each operand gathered whole along the reduced factors (by
        :func:`_gather_along`) and sliced along the result factor ``red`` shards: the part
        of it that this shard's part of the result reads."""
        factor = self.results[0][red.dim].factor

        def gathered(*args: Any) -> Any:
            i = lax.axis_index(red.axes)
            parts = []
            for x, v in zip(args, self.operands):
                for d, dim in enumerate(v):
                    if dim.factor in self.reduced and chosen.get(dim.factor):
                        x = _gather_along(x, d, chosen[dim.factor])
                for d, dim in enumerate(v):
                    if dim.factor == factor:
                        n = x.shape[d] // red.shards
                        x = lax.dynamic_slice_in_dim(x, i * n, n, axis=d)
                parts.append(x)
            return run(*parts)

        return gathered


def _gather_along(x: Any, d: int, axes: tuple[str, ...]) -> Any:
    """``x``'s shards along dimension ``d`` over mesh ``axes``, gathered whole -- as unsigned
    integers of the elements' width (f4 codes in pairs along the last dimension where it is
    even), stacked along a new major dimension and moved into place: XLA:CPU gathers float8
    and f4 arrays through f16 copies, and a minor dimension through transposes (an f8
    [4096, 1024] sharded along 1024 over 8 host devices: 74 ms; its bytes along a major
    dimension: 2 ms)."""
    dt, shape = np.dtype(x.dtype), x.shape
    f4 = dt.name.startswith("float4")
    if f4 and shape[-1] % 2:
        return lax.all_gather(x, axes, axis=d, tiled=True)
    if f4:
        bits = lax.bitcast_convert_type(x.reshape(*shape[:-1], shape[-1] // 2, 2), jnp.uint8)
    elif jnp.issubdtype(dt, jnp.floating):
        bits = lax.bitcast_convert_type(x, _UINT[dt.itemsize])
    else:
        bits = x
    g = lax.all_gather(bits, axes, axis=0, tiled=False)  # [shards, *bits.shape]
    g = jnp.moveaxis(g, 0, d).reshape(*bits.shape[:d], -1, *bits.shape[d + 1:])
    if f4:
        return lax.bitcast_convert_type(g, dt).reshape(*g.shape[:-1], -1)
    return g if g.dtype == dt else lax.bitcast_convert_type(g, dt)


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _shape(a: Any) -> tuple[int, ...]:
    return tuple(a.shape)


def _nbytes(a: Any) -> int:
    return math.prod(_shape(a)) * max(1, np.dtype(a.dtype).itemsize)


def _shards_of(mesh: Any, value: Value, chosen: dict[str, tuple[str, ...]],
               reduced: tuple[str, ...]) -> int:
    """The number of shards a value is split into along the reduced factors."""
    return math.prod(mesh.shape[a] for d in value if d.factor in reduced
                     for a in chosen.get(d.factor, ()))


def _axes(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def _entry(axes: tuple[str, ...]) -> Any:
    return None if not axes else axes[0] if len(axes) == 1 else axes


# ============================================================================ the plans


def _elementwise(shape: Sequence[int], axis: int | None = None,
                 unit: int = 1) -> tuple[Value, Value, dict[str, int]]:
    """A value of ``shape`` and its blocked form (``axis`` in blocks of ``unit``): the dims
    of the full array, of its per-block array (the scales), and the factor sizes."""
    full = tuple(Dim(f"d{i}", unit if i == axis else 1) for i in range(len(shape)))
    per_block = tuple(Dim(f"d{i}") for i in range(len(shape)))
    sizes = {f"d{i}": (n // unit if i == axis else n) for i, n in enumerate(shape)}
    return full, per_block, sizes


def _rebind(prim: Any, params: dict[str, Any]) -> Callable[[Reduction | None], Callable]:
    def local(red: Reduction | None) -> Callable:
        assert red is None, red

        def run(*args: Any) -> Any:
            out = prim.bind(*args, **params)
            return tuple(out) if prim.multiple_results else out

        return run

    return local


def _quantize_plan(prim: Any, avals: Sequence[Any], params: dict[str, Any]) -> Plan:
    x = avals[0]
    full, blocks, sizes = _elementwise(x.shape, params["axis"], params["block_size"])
    ops = (full,) + ((),) * (len(avals) - 1)  # the global scale: a scalar
    return Plan(ops, (full, blocks), sizes, _rebind(prim, params))


def _dequantize_plan(prim: Any, avals: Sequence[Any], params: dict[str, Any]) -> Plan:
    e = avals[0]
    full, blocks, sizes = _elementwise(e.shape, params["axis"], params["block_size"])
    ops = (full, blocks) + (((),) if params["has_g"] else ())
    return Plan(ops, (full,), sizes, _rebind(prim, dict(params, has_ste=False)))


def _convert_plan(prim: Any, avals: Sequence[Any], params: dict[str, Any]) -> Plan:
    full, _, sizes = _elementwise(avals[0].shape)
    return Plan((full,), (full,), sizes, _rebind(prim, params))


def _cast_plan(prim: Any, avals: Sequence[Any], params: dict[str, Any]) -> Plan | None:
    shape = avals[0].shape
    axis, unit = None, 1
    if params["scale"] is not None:
        s = scale_spec(params["scale"])
        if s.kind == "tensor" or not shape:
            return None  # one tile of every value: the StableHLO reduces across shards
        axis = s.dims[0] % len(shape)
        unit = s.tile[0] if s.kind == "tile" else shape[axis]  # a channel: the whole axis
    full, _, sizes = _elementwise(shape, axis, unit)
    return Plan((full,) * len(avals), (full,), sizes, _rebind(prim, params))


def _dot_plan(prim: Any, avals: Sequence[Any], params: dict[str, Any]) -> Plan:
    ix = primitives._layout(params)
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    shapes = {side: avals[ix[side]].shape for side in ("lhs", "rhs")}
    blocked = {side: (params[f"{side}_axis"], params[f"{side}_block_size"])
               for side in ("lhs", "rhs") if params[f"{side}_format"] is not None}
    # each contracting position j: the factor c{j}, in units of the lcm of its block sizes
    units = {}
    for j, (dl, dr) in enumerate(zip(lc, rc)):
        ks = [k for side, d in (("lhs", dl), ("rhs", dr)) if side in blocked
              for a, k in [blocked[side]] if a == d]
        units[j] = math.lcm(*ks) if ks else 1
    sizes: dict[str, int] = {}
    names: dict[str, list[Dim]] = {}
    scale_dims: dict[str, list[Dim]] = {}
    for side, contracting, batch in (("lhs", lc, lb), ("rhs", rc, rb)):
        dims, sdims = [], []
        for d, n in enumerate(shapes[side]):
            if d in contracting:
                j = contracting.index(d)
                f, u = f"c{j}", units[j]
                sizes[f] = n // u
                dims.append(Dim(f, u))
                k = blocked[side][1] if side in blocked and blocked[side][0] == d else 1
                sdims.append(Dim(f, u // k))
            else:
                f = f"b{batch.index(d)}" if d in batch else f"{side[0]}{d}"
                sizes[f] = n
                dims.append(Dim(f))
                sdims.append(Dim(f))
        names[side], scale_dims[side] = dims, sdims
    operands: list[Value] = []
    for side in ("lhs", "rhs"):
        operands.append(tuple(names[side]))
        if side in blocked:
            operands.append(tuple(scale_dims[side]))
    has_g = params["has_g"]
    if has_g:
        operands.append(())
    lfree = [d for d in names["lhs"] if d.factor.startswith("l")]
    rfree = [d for d in names["rhs"] if d.factor.startswith("r")]
    result = tuple(Dim(f"b{i}") for i in range(len(lb))) + tuple(lfree) + tuple(rfree)
    body = dict(params, lhs_ste=False, rhs_ste=False)

    def local(red: Reduction | None) -> Callable:
        if red is None or red.how == "gather":
            return lambda *args: prim.bind(*args, **body)
        partial = dict(body, has_g=False, out_dtype=_F32)
        axes = red.axes

        def summed(y: Any) -> Any:  # this shard's part of the sum of the partials
            if red.dim is None:
                return lax.psum(y, axes)
            return lax.psum_scatter(y, axes, scatter_dimension=red.dim, tiled=True)

        def careful(y: Any) -> Any:
            # each element's largest exponent field over the shards (integers: exact) ...
            e = lax.pmax(lax.shift_right_logical(lax.bitcast_convert_type(y, np.int32),
                                                 np.int32(23)) & 0xFF, axes)
            # ... brought to 2^100 on the bits, so the f32 sum meets no subnormal
            total = summed(ldexp_p.bind(y, _SHIFT - e))
            if red.dim is not None:
                n = e.shape[red.dim] // red.shards
                e = lax.dynamic_slice_in_dim(e, lax.axis_index(axes) * n, n, axis=red.dim)
            return ldexp_p.bind(total, e - _SHIFT)

        def run(*args: Any) -> Any:
            y = prim.bind(*(args[:-1] if has_g else args), **partial)
            # partials all zero or at least 2^-103 (f32 field 24) on every shard: each of their
            # sums is a multiple of 2^-126, so a plain f32 sum cannot meet a subnormal
            mag = lax.bitcast_convert_type(y, np.int32) & 0x7FFFFFFF
            tiny = lax.pmax(jnp.any((mag != 0) & (mag < (24 << 23))).astype(np.int32), axes)
            total = lax.cond(tiny > 0, careful, summed, y)
            return epilogue_p.bind(total, *args[-1:] if has_g else (),
                                   out_dtype=params["out_dtype"])

        return run

    return Plan(tuple(operands), (result,), sizes, local,
                reduced=tuple(f"c{j}" for j in range(len(lc))))


#: f32 partial results of fewer bytes are all-reduced unless the program wants the result
#: sharded (:meth:`Plan.reduction`): a GEMV's [8, 4096] on 8 host devices took 2.6 ms
#: all-reduced, 3.1 ms reduce-scattered and gathered again (BENCHMARKS.md)
SMALL_PARTIAL = 1 << 20

#: the A/B switch of :meth:`Plan.reduction` (None: chosen by bytes; "gather", "scatter" or
#: "all-reduce" where a result dimension divides into the shards)
FORCE_REDUCTION: str | None = None

#: the exponent field a K-sharded dot's largest partial is scaled to before the all-reduce
#: (2^100: eight such partials sum far below f32's overflow; a partial 2^-226 of the largest
#: or smaller may flush there, far below section 6's bound)
_SHIFT = 227

#: ``mx_ldexp(x, k)``: f32 ``x * 2^k`` for an i32 ``k`` per element, on the bits (subnormal
#: results rounded to nearest even, subnormal inputs read as they are: XLA:CPU's f32
#: arithmetic flushes both), :func:`mxlower.lowering.mx_math.ldexp_bits`.
ldexp_p = Primitive("mx_ldexp")
ldexp_p.def_abstract_eval(lambda x, k: x)

#: ``mx_dot_epilogue(acc[, global_scale], out_dtype)``: step 3 of section 6 on a summed f32
#: dot (:func:`mxlower.lowering.mx_math.scaled_dot_epilogue`: the global-scale product
#: exact in f64, subnormals kept, rounded once; then the result type).
epilogue_p = Primitive("mx_dot_epilogue")
epilogue_p.def_abstract_eval(
    lambda acc, *g, out_dtype: jax.core.ShapedArray(acc.shape, out_dtype))


def _ldexp_lowering(ctx: Any, x: Any, k: Any) -> list[Any]:
    b = Builder(ir.Location.current, ir.InsertionPoint.current)
    return [b.bitcast(mx_math.ldexp_bits(b, b.bitcast(x, "i32"), k), "f32")]


def _epilogue_lowering(ctx: Any, acc: Any, *g: Any, out_dtype: Any) -> list[Any]:
    b = Builder(ir.Location.current, ir.InsertionPoint.current)
    return [mx_math.scaled_dot_epilogue(b, acc, g[0] if g else None, mlir_name(out_dtype))]


mlir.register_lowering(ldexp_p, _ldexp_lowering)
mlir.register_lowering(epilogue_p, _epilogue_lowering)


#: primitive name -> the plan of one of its calls (None: not partitioned, see the docstring)
PLANS: dict[str, Callable[[Any, Sequence[Any], dict[str, Any]], Plan | None]] = {
    "mx_quantize": _quantize_plan,
    "mx_dequantize": _dequantize_plan,
    "mx_convert": _convert_plan,
    "mx_cast": _cast_plan,
    "mx_scaled_dot": _dot_plan,
}

#: operands a call passes to its kernel (the rest, straight-through sources, are dropped)
_KERNEL_OPERANDS: dict[str, Callable[[dict[str, Any], int], int]] = {
    "mx_dequantize": lambda p, n: 2 + p["has_g"],
    "mx_scaled_dot": lambda p, n: primitives._layout(p)["n"] - p["lhs_ste"] - p["rhs_ste"],
}


#: the identity whose presence makes jit lower a program with its devices (see the docstring)
devices_p = Primitive("mx_needs_devices")
devices_p.def_impl(lambda x: x)
devices_p.def_abstract_eval(lambda x: x)
mlir.register_lowering(devices_p, lambda ctx, x: [x])
ad.primitive_jvps[devices_p] = lambda primals, tangents: (devices_p.bind(*primals), tangents[0])
batching.primitive_batchers[devices_p] = lambda args, dims: (devices_p.bind(*args), dims[0])
jax_private.require_devices_during_lowering(devices_p)


def mark(x: Any, impl: str) -> Any:
    """``x``, passed through ``mx_needs_devices`` when it is traced and the call it feeds has
    ``impl="auto"``: the program is then lowered with its devices, so a partitioned one can run
    the call's kernel per shard."""
    return devices_p.bind(x) if impl == "auto" and isinstance(x, jax.core.Tracer) else x


def _mesh_devices(ctx: Any) -> bool:
    ac = ctx.module_context.axis_context
    am = getattr(ac, "abstract_mesh", None)
    return (getattr(ac, "num_devices", 1) > 1 and getattr(ac, "device_assignment", None)
            is not None and am is not None and not am.empty
            and math.prod(am.axis_sizes) == ac.num_devices)


def plan_for(ctx: Any, params: dict[str, Any]) -> Plan | None:
    """The plan of the call being lowered, or None where none applies."""
    name = ctx.primitive.name
    return PLANS[name](ctx.primitive, ctx.avals_in[:_operand_count(name, params,
                                                                    len(ctx.avals_in))], params)


def _operand_count(name: str, params: dict[str, Any], n: int) -> int:
    f = _KERNEL_OPERANDS.get(name)
    return n if f is None else f(params, n)


def applies(ctx: Any, params: dict[str, Any]) -> bool:
    """Whether the call being lowered is in a program partitioned over a mesh of several
    devices and its primitive has a plan for it: :func:`lower` then runs its kernel per
    shard."""
    return _mesh_devices(ctx) and plan_for(ctx, params) is not None


def lower(ctx: Any, *args: Any, **params: Any) -> Sequence[Any]:
    """Lower the call as ``custom_partitioning`` of its primitive under its :class:`Plan`."""
    plan = plan_for(ctx, params)
    assert plan is not None
    n = _operand_count(ctx.primitive.name, params, len(args))
    cp = custom_partitioning(plan.local(None))
    devices = ctx.module_context.axis_context.num_devices
    cp.def_partition(partition=plan.partition, sharding_rule=plan.sharding_rule(devices))
    multiple = ctx.primitive.multiple_results
    sub = ctx.replace(avals_in=ctx.avals_in[:n])
    return mlir.lower_fun(cp, multiple_results=multiple)(sub, *args[:n])
