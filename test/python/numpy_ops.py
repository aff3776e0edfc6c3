"""The elementwise interface of :class:`mxlower.ir.stablehlo_builder.Builder` that
:mod:`mxlower.lowering.mx_math`'s recipes use, on NumPy arrays (integers as int64, floats as
float32/float64): to run a recipe on millions of inputs, or on every case, without compiling
anything.  Not a test module; the tests import it."""

from __future__ import annotations

import numpy as np


class NumPyOps:
    _T = {"i32": np.int32, "f32": np.float32, "f64": np.float64}

    def like(self, v, value): return np.full(np.shape(v), value, np.int64)  # noqa: E704
    def bitcast(self, v, t): return np.asarray(v).view(self._T[t])  # noqa: E704

    def convert(self, v, t):
        with np.errstate(over="ignore"):  # f64 -> f32 beyond the range: +Inf, as the CPU
            return np.asarray(v).astype(self._T[t])

    def add(self, a, b): return np.add(a, b)  # noqa: E704
    def sub(self, a, b): return np.subtract(a, b)  # noqa: E704
    def mul(self, a, b): return np.multiply(a, b)  # noqa: E704
    def and_(self, a, b): return np.bitwise_and(a, b)  # noqa: E704
    def or_(self, a, b): return np.bitwise_or(a, b)  # noqa: E704
    def shl(self, a, b): return np.left_shift(a, b)  # noqa: E704
    def shr(self, a, b): return np.right_shift(a, b)  # noqa: E704
    def eq(self, a, b): return np.equal(a, b)  # noqa: E704
    def ne(self, a, b): return np.not_equal(a, b)  # noqa: E704
    def lt(self, a, b): return np.less(a, b)  # noqa: E704
    def le(self, a, b): return np.less_equal(a, b)  # noqa: E704
    def gt(self, a, b): return np.greater(a, b)  # noqa: E704
    def ge(self, a, b): return np.greater_equal(a, b)  # noqa: E704
    def clamp(self, lo, x, hi): return np.clip(x, lo, hi)  # noqa: E704
    def select(self, p, a, b): return np.where(p, a, b)  # noqa: E704
