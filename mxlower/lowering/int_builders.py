"""The integer-op builders the codec (:mod:`mxlower.lowering.codec`) is written against.

The codec's algorithms are branch-free integer arithmetic on code bits, written once against
:class:`IntBuilder`; a builder decides what the arithmetic becomes:

* :class:`NumpyBuilder` -- executes it on NumPy arrays (the exhaustive tests);
* :class:`ArithBuilder` -- ``arith`` ops on scalars, vectors or tensors, for EITHER binding
  stack: pass the ``ir`` and ``arith`` modules to use (``jaxlib.mlir.{ir,dialects.arith}`` or
  upstream ``mlir.ir`` / ``mlir.dialects.arith``); the LLVM and NVVM lowerings and the FFI
  kernels use it;
* :class:`~mxlower.lowering.codec_stablehlo.StableHLOBuilder` -- ``stablehlo`` integer ops on
  ranked tensors (jaxlib stack; in its own module, so that this one imports no MLIR).

The interface
-------------
A builder implements nine primitives (see :class:`IntBuilder`): ``constant(value, bits)``,
``binary(op, lhs, rhs)`` with ``op`` in :data:`BINARY_OPS` (``and or xor add sub mul shl
shrui shrsi minsi maxsi``; ``mul`` keeps the low bits, as two's complement wraps),
``compare(pred, lhs, rhs)`` with the signed :data:`PREDICATES` (``eq ne slt sle sgt sge``,
result i1), ``select(cond, a, b)``, ``bitcast_to_int(x)`` /
``bitcast_to_float(x, wide)`` (same width), ``resize(x, bits)`` (zero-extend or truncate),
``width(x)``, and ``float_op(op, lhs, rhs, wide)`` (``add``/``sub``/``mul`` of f16, f32 or
f64 given and returned as bit patterns; the codec's float-assisted steps and the NVVM
lowering's widening by placement use it).  Optional ones:
``int_to_float`` (where ``has_int_to_float``: normalization by one conversion instead of a
shift ladder), ``signless`` and ``to_storage`` (identities except on StableHLO, whose
unsigned element types need bitcasts).  Every value of one conversion has the same shape;
constants are splats of it.  Integer values are two's complement; the algorithms only
compare values whose signed reading is their true value, so they never need unsigned
predicates (StableHLO ties compare signedness to the element type).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxlower.types import WIDE_FLOAT_TYPES

__all__ = ["ArithBuilder", "BINARY_OPS", "IntBuilder", "MLIRBuilder", "NumpyBuilder",
           "PREDICATES", "signed"]


BINARY_OPS = ("and", "or", "xor", "add", "sub", "mul", "shl", "shrui", "shrsi", "minsi",
              "maxsi")
PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge")


class IntBuilder:
    """The integer-op interface the codec's algorithms are written against.

    Subclasses implement the primitives; the helpers below them accept a Python ``int`` for
    either operand and splat it to the other operand's width.
    """

    # -- primitives ------------------------------------------------------------------------
    def constant(self, value: int, bits: int) -> Any:
        """A splat integer constant of width ``bits`` (``value`` taken modulo 2^bits)."""
        raise NotImplementedError

    def binary(self, op: str, lhs: Any, rhs: Any) -> Any:
        """``op`` in :data:`BINARY_OPS`; both operands of the same width.  Shifts are by less
        than the width; ``shrui`` is logical, ``shrsi`` arithmetic; min/max are signed."""
        raise NotImplementedError

    def compare(self, pred: str, lhs: Any, rhs: Any) -> Any:
        """``pred`` in :data:`PREDICATES` (signed); an i1 result."""
        raise NotImplementedError

    def select(self, cond: Any, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def bitcast_to_int(self, x: Any) -> Any:
        """Floats -> integers of the same width (the bit pattern)."""
        raise NotImplementedError

    def bitcast_to_float(self, x: Any, wide: str) -> Any:
        """Integers -> floats of type ``wide`` ("f32", "bf16" or "f16") of the same width."""
        raise NotImplementedError

    def resize(self, x: Any, bits: int) -> Any:
        """Zero-extend or truncate an integer value to ``bits`` bits."""
        raise NotImplementedError

    def float_op(self, op: str, lhs: Any, rhs: Any, wide: str) -> Any:
        """``op`` ("add", "sub" or "mul") on the ``wide`` floats (f16, f32 or f64) whose bit
        patterns ``lhs`` and ``rhs`` hold; returns the bit pattern of the IEEE result (round
        to nearest even).  Only plans made with ``fpu=True`` and the NVVM lowering's
        widening by placement use it."""
        raise NotImplementedError

    def width(self, x: Any) -> int:
        """The integer width of a value (1 for i1)."""
        raise NotImplementedError

    #: whether :meth:`int_to_float` is implemented (the spec codec then normalizes with one
    #: conversion instead of a shift ladder)
    has_int_to_float = False

    def int_to_float(self, x: Any, wide: str) -> Any:
        """Non-negative integers (exact in ``wide``: below 2^24 for f32, 2^53 for f64) ->
        floats of ``wide`` ("f32" or "f64") of the same width; returned as their bit pattern
        (integers).  The result is a normal float or zero, so flushing modes change nothing."""
        raise NotImplementedError

    def signless(self, x: Any) -> Any:
        """An integer value as the builder's working integers of the same width (StableHLO:
        ``ui32`` random bits or ``ui8`` codes bitcast to signless); the identity elsewhere."""
        return x

    def to_storage(self, x: Any, storage: str) -> Any:
        """Working integers as the storage integer type ``storage`` (``"ui8"``, ``"i8"``,
        ``"ui16"``...) of the same width: StableHLO bitcasts, NumPy views; arith (signless)
        returns ``x``."""
        return x

    # -- helpers -----------------------------------------------------------------------------
    def _pair(self, a: Any, b: Any) -> tuple[Any, Any]:
        if isinstance(a, int):
            a = self.constant(a, self.width(b))
        if isinstance(b, int):
            b = self.constant(b, self.width(a))
        return a, b

    def _bin(self, op: str, a: Any, b: Any) -> Any:
        return self.binary(op, *self._pair(a, b))

    def and_(self, a, b):
        return self._bin("and", a, b)

    def or_(self, a, b):
        return self._bin("or", a, b)

    def xor(self, a, b):
        return self._bin("xor", a, b)

    def add(self, a, b):
        return self._bin("add", a, b)

    def sub(self, a, b):
        return self._bin("sub", a, b)

    def mul(self, a, b):
        return self._bin("mul", a, b)

    def shl(self, a, b):
        return self._bin("shl", a, b)

    def shr(self, a, b):
        """Logical shift right."""
        return self._bin("shrui", a, b)

    def min(self, a, b):
        return self._bin("minsi", a, b)

    def max(self, a, b):
        return self._bin("maxsi", a, b)

    def cmp(self, pred: str, a, b):
        return self.compare(pred, *self._pair(a, b))

    def sel(self, cond, a, b):
        if isinstance(a, int) and isinstance(b, int):
            raise TypeError("sel needs at least one value operand to take the width from")
        return self.select(cond, *self._pair(a, b))


# ============================================================================ NumPy builder


def signed(v: int, bits: int) -> int:
    """``v`` modulo 2^bits, read as a two's complement ``bits``-bit integer."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class NumpyBuilder(IntBuilder):
    """Executes the algorithm on NumPy arrays (int16/int32 working values, bool for i1, uint8
    for 8-bit and narrower codes)."""

    def constant(self, value: int, bits: int) -> np.ndarray:
        if bits <= 8:
            return np.array(value & ((1 << bits) - 1), dtype=np.uint8)
        return np.array(signed(value, bits), dtype=f"int{bits}")

    def width(self, x) -> int:
        x = np.asarray(x)
        return 1 if x.dtype == np.bool_ else x.dtype.itemsize * 8

    def binary(self, op: str, lhs, rhs):
        if op == "shrui":
            bits = self.width(lhs)
            u = f"uint{bits}"
            return (np.asarray(lhs).view(u) >> np.asarray(rhs).astype(u)).view(lhs.dtype)
        fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
              "add": np.add, "sub": np.subtract, "mul": np.multiply, "shl": np.left_shift,
              "shrsi": np.right_shift, "minsi": np.minimum, "maxsi": np.maximum}[op]
        with np.errstate(over="ignore"):
            return fn(lhs, rhs).astype(lhs.dtype, copy=False)

    def compare(self, pred: str, lhs, rhs):
        fn = {"eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
              "sgt": np.greater, "sge": np.greater_equal}[pred]
        return fn(lhs, rhs)

    def select(self, cond, a, b):
        return np.where(cond, a, b).astype(np.result_type(a, b), copy=False)

    def bitcast_to_int(self, x):
        x = np.asarray(x)
        return x.view(f"int{x.dtype.itemsize * 8}")

    def bitcast_to_float(self, x, wide: str):
        return np.asarray(x).view(WIDE_FLOAT_TYPES[wide].dtype)

    has_int_to_float = True

    def int_to_float(self, x, wide: str):
        dt = WIDE_FLOAT_TYPES[wide].dtype
        return np.asarray(x).astype(dt).view(f"int{8 * dt.itemsize}")

    def float_op(self, op: str, lhs, rhs, wide: str):
        dt = WIDE_FLOAT_TYPES[wide].dtype
        x, y = np.asarray(lhs).view(dt), np.asarray(rhs).view(dt)
        with np.errstate(all="ignore"):
            r = x + y if op == "add" else x - y if op == "sub" else x * y
        return np.asarray(r, dtype=dt).view(np.asarray(lhs).dtype)

    def signless(self, x):
        x = np.asarray(x)
        return x if x.dtype.kind != "u" or x.dtype.itemsize == 1 else \
            x.view(f"int{8 * x.dtype.itemsize}")

    def to_storage(self, x, storage: str):
        x = np.asarray(x)
        dt = np.dtype(f"{'u' if storage.startswith('u') else ''}int{storage.lstrip('ui')}")
        return x.view(dt) if dt.itemsize == x.dtype.itemsize else x.astype(dt)

    def resize(self, x, bits: int):
        x = np.asarray(x)
        w = self.width(x)
        if bits <= 8:
            return x.astype(np.uint8) & np.uint8((1 << bits) - 1) if bits < 8 else \
                x.astype(np.uint8)
        if bits > w:
            return x.view(f"uint{w}").astype(f"int{bits}")
        return x.astype(f"int{bits}")


# ============================================================================ MLIR builders


class MLIRBuilder(IntBuilder):
    """Shared parts of the MLIR builders (:class:`ArithBuilder`,
    :class:`~mxlower.lowering.codec_stablehlo.StableHLOBuilder`): integer types by width,
    constant caching."""

    def __init__(self, ir: Any, *, loc: Any = None, ip: Any = None):
        self.ir = ir
        self.loc = loc
        self.ip = ip
        self._consts: dict[tuple[int, int], Any] = {}

    def _shaped(self, elem: Any) -> Any:
        raise NotImplementedError

    def _int(self, bits: int) -> Any:
        return self._shaped(self.ir.IntegerType.get_signless(bits))

    def _elem(self, t: Any) -> Any:
        for cls in ("VectorType", "RankedTensorType"):
            try:
                return getattr(self.ir, cls)(t).element_type
            except ValueError:
                pass
        return t

    def width(self, x: Any) -> int:
        return self.ir.IntegerType(self._elem(x.type)).width

    def _kw(self) -> dict:
        return {"loc": self.loc, "ip": self.ip}


_CMPI = {"eq": 0, "ne": 1, "slt": 2, "sle": 3, "sgt": 4, "sge": 5}


class ArithBuilder(MLIRBuilder):
    """``arith`` ops on scalars, vectors or ranked tensors, for either binding stack.

    ``ir`` and ``arith`` are the modules to build with (``mlir.ir`` and ``mlir.dialects.arith``
    upstream, or jaxlib's).  ``like``: any type whose shape the values have (``f32``,
    ``vector<8xf32>``, ``tensor<4x4xbf16>``, ...).  Create under a context (and insertion point
    and location, or pass ``loc``/``ip``).
    """

    def __init__(self, ir: Any, arith: Any, like: Any, *, loc: Any = None, ip: Any = None):
        super().__init__(ir, loc=loc, ip=ip)
        self.arith = arith
        self.shape = None
        self.kind = None
        for cls in ("VectorType", "RankedTensorType"):
            try:
                st = getattr(ir, cls)(like)
            except ValueError:
                continue
            self.kind, self.shape = cls, list(st.shape)
            self.scalable = (list(st.scalable_dims) if cls == "VectorType"
                             and hasattr(st, "scalable_dims") else None)
            break

    def _shaped(self, elem):
        if self.kind is None:
            return elem
        if self.kind == "VectorType":
            if self.scalable and any(self.scalable):
                return self.ir.VectorType.get(self.shape, elem, scalable=self.scalable)
            return self.ir.VectorType.get(self.shape, elem)
        return self.ir.RankedTensorType.get(self.shape, elem)

    def constant(self, value: int, bits: int):
        key = (value & ((1 << bits) - 1), bits)
        if key not in self._consts:
            t = self._int(bits)
            et = self.ir.IntegerType.get_signless(bits)
            ia = self.ir.IntegerAttr.get(et, signed(value, bits))
            attr = ia if self.kind is None else self.ir.DenseElementsAttr.get_splat(t, ia)
            self._consts[key] = self.arith.ConstantOp(t, attr, **self._kw()).result
        return self._consts[key]

    def binary(self, op: str, lhs, rhs):
        a = self.arith
        cls = {"and": a.AndIOp, "or": a.OrIOp, "xor": a.XOrIOp, "add": a.AddIOp,
               "sub": a.SubIOp, "mul": a.MulIOp, "shl": a.ShLIOp, "shrui": a.ShRUIOp,
               "shrsi": a.ShRSIOp, "minsi": a.MinSIOp, "maxsi": a.MaxSIOp}[op]
        return cls(lhs, rhs, **self._kw()).result

    def compare(self, pred: str, lhs, rhs):
        attr = self.ir.IntegerAttr.get(self.ir.IntegerType.get_signless(64), _CMPI[pred])
        return self.arith.CmpIOp(attr, lhs, rhs, **self._kw()).result

    def select(self, cond, a, b):
        return self.arith.SelectOp(cond, a, b, **self._kw()).result

    def bitcast_to_int(self, x):
        w = self.ir.FloatType(self._elem(x.type)).width
        return self.arith.BitcastOp(self._int(w), x, **self._kw()).result

    def bitcast_to_float(self, x, wide: str):
        return self.arith.BitcastOp(self._shaped(self.ir.Type.parse(wide)), x,
                                    **self._kw()).result

    has_int_to_float = True

    def int_to_float(self, x, wide: str):
        f = self.arith.SIToFPOp(self._shaped(self.ir.Type.parse(wide)), x, **self._kw()).result
        return self.bitcast_to_int(f)

    def float_op(self, op: str, lhs, rhs, wide: str):
        cls = {"add": self.arith.AddFOp, "sub": self.arith.SubFOp, "mul": self.arith.MulFOp}[op]
        r = cls(self.bitcast_to_float(lhs, wide), self.bitcast_to_float(rhs, wide),
                **self._kw()).result
        return self.bitcast_to_int(r)

    def resize(self, x, bits: int):
        w = self.width(x)
        if bits == w:
            return x
        op = self.arith.ExtUIOp if bits > w else self.arith.TruncIOp
        return op(self._int(bits), x, **self._kw()).result
