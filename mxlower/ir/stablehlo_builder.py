"""A small StableHLO builder: one location and insertion point, Python scalars as operands.

:class:`Builder` emits StableHLO ops at one location and insertion point, with Python scalars
accepted wherever a tensor operand is (they become splat constants of the other operand's shape
and element type)::

    b = Builder(op.location, ir.InsertionPoint(op))
    y = b.select(b.ge(x, 0), x, b.neg(x))

Shapes may hold dynamic dimensions (:class:`Dyn`): reshapes and broadcasts to them become the
dynamic StableHLO ops, their shape operands read at run time.  The builder knows no MX
numerics; the MX recipe built on it is :mod:`mxlower.lowering.mx_math`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mxlower.bindings.jaxlib import ir, stablehlo

__all__ = ["Builder", "Comparisons", "Dyn", "is_dynamic"]


def _elt(t: str | Any) -> Any:
    return ir.Type.parse(t) if isinstance(t, str) else t


class Dyn:
    """A dynamic dimension in a shape: dimension ``index`` of ``value``, read at run time
    with ``stablehlo.get_dimension_size`` when a shape operand needs it."""

    __slots__ = ("value", "index")

    def __init__(self, value: Any, index: int):
        self.value = value
        self.index = index

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Dyn) and self.index == other.index
                and self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.index)

    def __repr__(self) -> str:
        return f"Dyn({self.index})"


def _static(shape: Sequence[int | Dyn]) -> list[int]:
    """The shape for a tensor type: dynamic sizes where the shape has a :class:`Dyn`."""
    dyn = ir.ShapedType.get_dynamic_size()
    return [dyn if isinstance(d, Dyn) else int(d) for d in shape]


def is_dynamic(shape: Sequence[int | Dyn]) -> bool:
    """Whether ``shape`` has a dynamic dimension (a :class:`Dyn`)."""
    return any(isinstance(d, Dyn) for d in shape)


class Comparisons:
    """``eq`` .. ``ge`` over a builder's ``compare(direction, a, b)``: the shorthands every
    builder of the MX math offers (this StableHLO :class:`Builder`, and the kernels' ``arith``
    builder in :mod:`mxlower.lowering.mx_kernels`)."""

    #: whether an f32 -> f64 conversion must be built from the bits
    #: (:func:`mxlower.lowering.mx_math.f64_of_f32_bits`): on StableHLO, where XLA:CPU both
    #: flushes subnormal inputs and rewrites conversions around the selects that avoid them;
    #: not in the kernels (arith), where the select's other lane is never read
    f64_from_bits = True

    def compare(self, direction: str, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def eq(self, a, b): return self.compare("EQ", a, b)  # noqa: E704
    def ne(self, a, b): return self.compare("NE", a, b)  # noqa: E704
    def lt(self, a, b): return self.compare("LT", a, b)  # noqa: E704
    def le(self, a, b): return self.compare("LE", a, b)  # noqa: E704
    def gt(self, a, b): return self.compare("GT", a, b)  # noqa: E704
    def ge(self, a, b): return self.compare("GE", a, b)  # noqa: E704


class Builder(Comparisons):
    """Emits StableHLO ops at ``loc`` through the insertion point ``ip``."""

    def __init__(self, loc: Any, ip: Any):
        self.loc = loc
        self.ip = ip
        self._shape_tensors: dict[tuple[int | Dyn, ...], Any] = {}

    # ----------------------------------------------------------------------------- types
    @staticmethod
    def shape(v: Any) -> tuple[int | Dyn, ...]:
        """``v``'s shape: ints, and a :class:`Dyn` for each dynamic dimension."""
        t = ir.RankedTensorType(v.type)
        return tuple(Dyn(v, i) if t.is_dynamic_dim(i) else d for i, d in enumerate(t.shape))

    @staticmethod
    def etype(v: Any) -> str:
        return str(ir.RankedTensorType(v.type).element_type)

    def ttype(self, shape: Sequence[int | Dyn], elt: str | Any) -> Any:
        return ir.RankedTensorType.get(_static(shape), _elt(elt), loc=self.loc)

    def shape_tensor(self, shape: Sequence[int | Dyn]) -> Any:
        """``tensor<rank x i32>`` holding ``shape`` at run time (the operand of the dynamic
        reshape and broadcast ops); built once per shape by this builder."""
        key = tuple(shape)
        if key not in self._shape_tensors:
            self._shape_tensors[key] = self._build_shape_tensor(key)
        return self._shape_tensors[key]

    def _build_shape_tensor(self, shape: tuple[int | Dyn, ...]) -> Any:
        i32 = ir.IntegerType.get_signless(32)
        one = self.ttype([1], i32)
        parts = []
        for d in shape:
            if isinstance(d, Dyn):
                size = stablehlo.GetDimensionSizeOp(d.value, d.index, **self._kw()).result
                parts.append(stablehlo.ReshapeOp(one, size, **self._kw()).result)
            else:
                dense = ir.DenseElementsAttr.get(np.asarray([d], dtype=np.int32))
                parts.append(stablehlo.ConstantOp(dense, **self._kw()).result)
        if len(parts) == 1:
            return parts[0]
        return stablehlo.ConcatenateOp(parts, 0, **self._kw()).result

    def _kw(self) -> dict[str, Any]:
        return {"loc": self.loc, "ip": self.ip}

    # ----------------------------------------------------------------------------- constants
    def const(self, value: float | int, elt: str, shape: Sequence[int | Dyn] = ()) -> Any:
        """A splat constant; ``value`` is a Python number (ints for integer types, and for a
        float type an int means those raw bits when ``elt`` is f32).  A dynamic ``shape``
        broadcasts a scalar constant to it."""
        t = _elt(elt)
        if isinstance(t, ir.IntegerType):
            attr = ir.IntegerAttr.get(t, int(value))
        else:
            attr = ir.FloatAttr.get(t, float(value))
        if is_dynamic(shape):
            return self.broadcast(self.const(value, elt), shape, [])
        dense = ir.DenseElementsAttr.get_splat(self.ttype(shape, t), attr)
        return stablehlo.ConstantOp(dense, **self._kw()).result

    def f32_from_bits(self, bits: int, shape: Sequence[int | Dyn] = ()) -> Any:
        """An f32 splat given by its bit pattern (NaN payloads, exact subnormals)."""
        signed = bits - (1 << 32) if bits >= 1 << 31 else bits
        return self.bitcast(self.const(signed, "i32", shape), "f32")

    def like(self, v: Any, value: float | int, elt: str | None = None) -> Any:
        return self.const(value, elt or self.etype(v), self.shape(v))

    def _coerce(self, a: Any, b: Any) -> tuple[Any, Any]:
        if isinstance(a, (int, float)):
            a = self.like(b, a)
        if isinstance(b, (int, float)):
            b = self.like(a, b)
        return a, b

    # ----------------------------------------------------------------------------- elementwise
    def _bin(self, cls: Any, a: Any, b: Any) -> Any:
        a, b = self._coerce(a, b)
        return cls(a, b, **self._kw()).result

    def add(self, a, b): return self._bin(stablehlo.AddOp, a, b)  # noqa: E704
    def sub(self, a, b): return self._bin(stablehlo.SubtractOp, a, b)  # noqa: E704
    def mul(self, a, b): return self._bin(stablehlo.MulOp, a, b)  # noqa: E704
    def div(self, a, b): return self._bin(stablehlo.DivOp, a, b)  # noqa: E704
    def max(self, a, b): return self._bin(stablehlo.MaxOp, a, b)  # noqa: E704
    def min(self, a, b): return self._bin(stablehlo.MinOp, a, b)  # noqa: E704
    def and_(self, a, b): return self._bin(stablehlo.AndOp, a, b)  # noqa: E704
    def or_(self, a, b): return self._bin(stablehlo.OrOp, a, b)  # noqa: E704
    def shl(self, a, b): return self._bin(stablehlo.ShiftLeftOp, a, b)  # noqa: E704
    def shr(self, a, b): return self._bin(stablehlo.ShiftRightLogicalOp, a, b)  # noqa: E704
    def sra(self, a, b): return self._bin(stablehlo.ShiftRightArithmeticOp, a, b)  # noqa: E704

    def not_(self, a):
        return stablehlo.NotOp(a, **self._kw()).result

    def abs(self, a):
        return stablehlo.AbsOp(a, **self._kw()).result

    def clz(self, a):
        return stablehlo.ClzOp(a, **self._kw()).result

    def round_even(self, a):
        return stablehlo.RoundNearestEvenOp(a, **self._kw()).result

    def clamp(self, lo, x, hi):
        lo = self.like(x, lo) if isinstance(lo, (int, float)) else lo
        hi = self.like(x, hi) if isinstance(hi, (int, float)) else hi
        return stablehlo.ClampOp(lo, x, hi, **self._kw()).result

    def select(self, pred, a, b):
        a, b = self._coerce(a, b)
        if isinstance(a, (int, float)):  # both scalars: shape from the predicate
            raise TypeError("select needs at least one tensor branch")
        return stablehlo.SelectOp(pred, a, b, **self._kw()).result

    def compare(self, direction: str, a: Any, b: Any) -> Any:
        a, b = self._coerce(a, b)
        elt = ir.RankedTensorType(a.type).element_type
        if isinstance(elt, ir.IntegerType):
            kind = "UNSIGNED" if ir.IntegerType(elt).is_unsigned else "SIGNED"
        else:
            kind = "FLOAT"
        return stablehlo.CompareOp(
            a, b, stablehlo.ComparisonDirectionAttr.get(direction),
            compare_type=stablehlo.ComparisonTypeAttr.get(kind), **self._kw()).result

    # ----------------------------------------------------------------------------- types and shapes
    def convert(self, v: Any, elt: str) -> Any:
        if self.etype(v) == elt:
            return v
        return stablehlo.ConvertOp(self.ttype(self.shape(v), elt), v, **self._kw()).result

    def bitcast(self, v: Any, elt: str) -> Any:
        if self.etype(v) == elt:
            return v
        return stablehlo.BitcastConvertOp(self.ttype(self.shape(v), elt), v,
                                          **self._kw()).result

    def reshape(self, v: Any, shape: Sequence[int | Dyn]) -> Any:
        if self.shape(v) == tuple(shape):
            return v
        t = self.ttype(shape, self.etype(v))
        if is_dynamic(shape):
            return stablehlo.DynamicReshapeOp(t, v, self.shape_tensor(shape),
                                              **self._kw()).result
        return stablehlo.ReshapeOp(t, v, **self._kw()).result

    def transpose(self, v: Any, permutation: Sequence[int]) -> Any:
        """``v`` with its dimensions in the order ``permutation`` (none moved: ``v``)."""
        if list(permutation) == list(range(len(permutation))):
            return v
        s = self.shape(v)
        t = self.ttype([s[d] for d in permutation], self.etype(v))
        return stablehlo.TransposeOp(v, list(permutation), results=[t], **self._kw()).result

    def broadcast(self, v: Any, shape: Sequence[int | Dyn], dims: Sequence[int]) -> Any:
        t = self.ttype(shape, self.etype(v))
        if is_dynamic(shape):
            return stablehlo.DynamicBroadcastInDimOp(t, v, self.shape_tensor(shape), list(dims),
                                                     **self._kw()).result
        return stablehlo.BroadcastInDimOp(t, v, list(dims), **self._kw()).result

    def slice(self, v: Any, limits: Sequence[int]) -> Any:
        if self.shape(v) == tuple(limits):
            return v
        n = len(limits)
        return stablehlo.SliceOp(v, [0] * n, list(limits), [1] * n, **self._kw()).result

    def reduce(self, v: Any, dims: Sequence[int], kind: str, init: float | int) -> Any:
        """Reduce ``v`` over ``dims`` with ``kind`` in {"max", "min", "add", "or", "and"}."""
        elt = _elt(self.etype(v))
        scalar = self.ttype((), elt)
        init_v = self.const(init, self.etype(v))
        shape = [d for i, d in enumerate(self.shape(v)) if i not in dims]
        op = stablehlo.ReduceOp([self.ttype(shape, elt)], [v], [init_v], list(dims),
                                **self._kw())
        block = op.regions[0].blocks.append(scalar, scalar, arg_locs=[self.loc, self.loc])
        cls = {"max": stablehlo.MaxOp, "min": stablehlo.MinOp, "add": stablehlo.AddOp,
               "or": stablehlo.OrOp, "and": stablehlo.AndOp}[kind]
        inner = ir.InsertionPoint(block)
        r = cls(block.arguments[0], block.arguments[1], loc=self.loc, ip=inner).result
        stablehlo.ReturnOp([r], loc=self.loc, ip=inner)
        return op.results[0]

    def dot_general(self, lhs: Any, rhs: Any, lc, rc, lb, rb, result_elt: str) -> Any:
        ls, rs = self.shape(lhs), self.shape(rhs)
        lfree = [d for d in range(len(ls)) if d not in lc and d not in lb]
        rfree = [d for d in range(len(rs)) if d not in rc and d not in rb]
        shape = [ls[d] for d in lb] + [ls[d] for d in lfree] + [rs[d] for d in rfree]
        dn = stablehlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
            lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
        # HIGHEST: the operands' own precision.  DEFAULT lets a backend contract f32 in less
        # (XLA:GPU takes TF32 on Ampere and later), which docs/semantics.md section 6 forbids.
        highest = stablehlo.PrecisionAttr.get("HIGHEST")
        return stablehlo.DotGeneralOp(self.ttype(shape, result_elt), lhs, rhs, dn,
                                      precision_config=ir.ArrayAttr.get([highest, highest]),
                                      **self._kw()).result

    def if_(self, pred: Any, types: Sequence[Any], then: Any, else_: Any) -> list[Any]:
        """``stablehlo.if`` on the ``tensor<i1>`` ``pred`` with results of ``types``:
        ``then`` and ``else_`` are called with a builder inside their region and return the
        values it yields; returns the op's results."""
        op = stablehlo.IfOp(list(types), pred, **self._kw())
        for fn, region in ((then, op.true_branch), (else_, op.false_branch)):
            sub = Builder(self.loc, ir.InsertionPoint(region.blocks.append()))
            stablehlo.ReturnOp(list(fn(sub)), loc=self.loc, ip=sub.ip)
        return list(op.results)

    # ----------------------------------------------------------------------------- blocks
    def split_blocks(self, v: Any, axis: int, k: int) -> Any:
        """[..., n, ...] -> [..., n/k, k, ...] (the block dimension is ``axis + 1``)."""
        s = list(self.shape(v))
        return self.reshape(v, s[:axis] + [s[axis] // k, k] + s[axis + 1:])

    def expand_blocks(self, v: Any, axis: int, k: int) -> Any:
        """Per-block values [..., nb, ...] repeated k times along ``axis``: [..., nb*k, ...]."""
        s = list(self.shape(v))
        if k == 1:
            return v
        big = s[:axis] + [s[axis], k] + s[axis + 1:]
        dims = [i for i in range(len(big)) if i != axis + 1]
        out = self.broadcast(v, big, dims)
        return self.reshape(out, s[:axis] + [s[axis] * k] + s[axis + 1:])

    def unblock(self, v: Any, axis: int) -> Any:
        """[..., nb, k, ...] -> [..., nb*k, ...]."""
        s = list(self.shape(v))
        return self.reshape(v, s[:axis] + [s[axis] * s[axis + 1]] + s[axis + 2:])

    def along(self, values: Sequence[int], shape: Sequence[int | Dyn], dim: int) -> Any:
        """The i32 vector ``values`` broadcast along dimension ``dim`` of ``shape``."""
        dense = ir.DenseElementsAttr.get(np.asarray(values, dtype=np.int32))
        c = stablehlo.ConstantOp(dense, **self._kw()).result
        return self.broadcast(c, shape, [dim])
