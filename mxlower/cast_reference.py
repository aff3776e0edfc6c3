"""The NumPy oracle of docs/semantics.md section 10: casts to any datatype, and M-of-N sparsity.

Re-exported by :mod:`mxlower.reference` (``mxlower.reference.cast``, ``.encode``, ``.decode``,
``.sparse``), the one oracle every test compares with.  Written for obvious exactness: every
value is carried in f64, where all the quantities of the model are exact (an f32 value scaled
by a power of two, its position between two neighbours of the target, a rounded result), and
every step the contract computes in f32 is an explicit f32 operation.

* :func:`cast` -- the **virtual cast** (fake quantization): ``decode(encode(x))`` in ``x``'s
  type.
* :func:`encode` -- the **actual cast**: :class:`Encoded` codes, scales and zero points.
* :func:`decode` -- codes (+ scales, zero points) back to f32 / bf16 / f16 values.
* :func:`round_codes` -- one number spec's rounding of exact values (section 10.2), used by the
  above and by tests of the codec.
* :func:`sparse` -- section 10.5.

Choices the contract leaves open, made here (and documented in docs/semantics.md section 10):

* Inputs are f32, bf16 or f16 arrays (upcast to f32 exactly), as for quantize.
* An ``intK`` element with an **exponent** scale is fixed point with K-2 fraction bits (its
  scaled max is (2^(K-1)-1) * 2^-(K-2) and its emax 0: mxint8); with a **float** scale it is an
  integer: s = amax / (2^(K-1) - 1), value = code * s.  Both give the same values (the contract
  says so); the stored scales differ by 2^(K-2), and the integer view is what int8 users
  store.
* NaN inputs of an unscaled cast give the target's NaN code (with the input's sign for ieee and
  fn targets, as section 2 does), the -0 code for ``fo`` targets and 0 for integer targets.
* The element codes of a NaN/Inf tile are 0 (the NaN is in the scale, as in section 3); its
  zero point is 0.
* A float scale rounds with ``even`` and saturates like every cast.  A float zero point too.
* ``scalemode`` applies to exponent scales only; float scales take the default ``max``.
* A value of a code decoded "in f32": exact for every spec (all have at most 24 significant
  bits and lie in f32's range) except ``intK`` codes above 2^24 in magnitude, converted to f32
  first (RNE).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import NamedTuple

import ml_dtypes
import numpy as np

from mxlower import types
from mxlower.formats import DATATYPES, Datatype, get_datatype
from mxlower.numbers import number as _number  # the parser (cast's argument is 'number')
from mxlower.numbers import (
    ROUND_MODES,
    SCALE_MODES,
    NumberSpec,
    ScaleSpec,
    SpecError,
    datatype,
)

__all__ = ["Encoded", "cast", "decode", "encode", "f32_arg",
           "resolve", "round_codes", "round_to_odd_f32", "sparse"]

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)
_WIDE = (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16))


class Encoded(NamedTuple):
    """An actual cast: ``codes`` (the number spec's storage dtype, x's shape), ``scales`` (the
    scale spec's storage dtype, shape :meth:`~mxlower.numbers.ScaleSpec.scales_shape`; None
    when unscaled), ``zero_points`` (the zero-point spec's storage, the scales' shape; None
    without one) and ``offsets`` (the subtile offsets, uint8, shape
    :meth:`~mxlower.numbers.ScaleSpec.offsets_shape`; None without subtiles)."""

    codes: np.ndarray
    scales: np.ndarray | None = None
    zero_points: np.ndarray | None = None
    offsets: np.ndarray | None = None


# ============================================================================== arguments


def resolve(number, scale=None) -> Datatype:
    """The datatype a cast is asked for: a :class:`Datatype`, a predefined name
    (``"mxfp8_e4m3"``), ``"number:scale"``, or a number spec with ``scale``."""
    if isinstance(number, Datatype):
        if scale is not None:
            raise SpecError(f"datatype {number} has its own scale; do not pass scale")
        return number
    if isinstance(number, str) and (number in DATATYPES or ":" in number):
        dt = get_datatype(number)
        if scale is None:
            return dt
        if dt.scale is not None:
            raise SpecError(f"datatype {number} has its own scale; do not pass scale")
    return datatype(number, scale)


def _wide(x) -> tuple[np.ndarray, np.dtype]:
    a = np.asarray(x)
    if a.dtype not in _WIDE:
        raise ValueError(f"cast: input must be float32, bfloat16 or float16, got {a.dtype}")
    return a.astype(_F32), a.dtype


def _modes(roundmode: str, scalemode: str, rbits, shape) -> np.ndarray | None:
    if roundmode not in ROUND_MODES:
        raise ValueError(f"unknown roundmode '{roundmode}' (known: {', '.join(ROUND_MODES)})")
    if scalemode not in SCALE_MODES:
        raise ValueError(f"unknown scalemode '{scalemode}' (known: {', '.join(SCALE_MODES)})")
    if roundmode != "stochastic":
        if rbits is not None:
            raise ValueError("rbits is only used with roundmode='stochastic'")
        return None
    if rbits is None:
        raise ValueError("roundmode='stochastic' needs rbits: one uint32 per element")
    r = np.asarray(rbits)
    if r.dtype != np.uint32:
        raise ValueError(f"rbits must be uint32, got {r.dtype}")
    if r.shape != tuple(shape):
        raise ValueError(f"rbits must have the input's shape {tuple(shape)}, got {r.shape}")
    return r.astype(np.int64)


def f32_arg(value, what: str, *, nonzero: bool = False) -> np.float32:
    """``value`` as a finite (non-zero) f32; a ValueError naming ``what`` otherwise (a number
    too large for a float, 10**400, included)."""
    try:
        with np.errstate(over="ignore"):
            g = np.float32(value)
    except OverflowError:
        g = np.float32(np.inf)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a number, got {value!r}") from None
    if g.shape != () or not np.isfinite(g) or (nonzero and g == 0):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:24] + "..."
        raise ValueError(f"{what} must be a finite{' non-zero' if nonzero else ''} f32, got "
                         f"{shown}")
    return g


def _tensor_scale(dt: Datatype, tensor_scale, fn: str) -> np.float32 | None:
    """The tensor level's value (two-level scaling, :attr:`ScaleSpec.tensor`): the caller's
    finite non-zero f32, None when not given (then 1: no second level applied)."""
    if tensor_scale is None:
        return None
    if not dt.two_level:
        raise ValueError(f"{fn}: {dt} has no tensor scale level (a scale spec ending in "
                         f"'_gf32'); do not pass tensor_scale")
    return f32_arg(tensor_scale, f"{fn}: tensor_scale", nonzero=True)


def _divided(xf: np.ndarray, g: np.float32 | None) -> np.ndarray:
    """x / g, one f32 division per value (the tile level then scales y = x / g)."""
    if g is None:
        return xf
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return (xf / g).astype(_F32)


def _times(v: np.ndarray, g: np.float32 | None) -> np.ndarray:
    """The tile level's f32 values times the tensor scale, in f32."""
    if g is None:
        return v
    with np.errstate(over="ignore", invalid="ignore"):
        return (np.asarray(v, _F32) * g).astype(_F32)


# ============================================================================== rounding


def _round_int(t: np.ndarray, mode: str, r: np.ndarray | None) -> np.ndarray:
    """R(t) of section 10.2 for t >= 0 (f64, exact): an f64 holding an integer."""
    if mode == "even":  # NumPy's rint is round-half-even (and exact: t is an f64)
        return np.rint(t)
    T = np.floor(t)
    frac = t - T  # exact
    if mode == "zero":
        return T
    if mode == "nearest":
        return T + (frac >= 0.5)
    if mode == "half_down":
        return T + (frac > 0.5)
    if mode == "even":
        odd = np.fmod(T, 2) == 1
        return T + ((frac > 0.5) | ((frac == 0.5) & odd))
    # stochastic: floor(t + r 2^-32) = T + [r + floor(frac 2^32) >= 2^32]
    return T + ((r + np.floor(np.ldexp(frac, 32)).astype(np.int64)) >= (1 << 32))


def _floor_log2(a: np.ndarray) -> np.ndarray:
    """floor(log2(a)) for a > 0 (f64; exact through frexp)."""
    _, e = np.frexp(a)
    return e.astype(np.int64) - 1


def round_to_odd_f32(v: np.ndarray) -> np.ndarray:
    """f64 -> f32 with round-to-odd: exact values are kept, inexact ones are truncated toward
    zero and get their last significand bit set.  A following RNE to any type with at most 22
    significand bits (and an exponent range inside f32's) is then a correct single rounding of
    the f64 value (Boldo & Melquiond).  Finite values beyond f32 range become +-f32 max|1,
    which still overflows every narrower type correctly."""
    v = np.asarray(v, dtype=_F64)
    with np.errstate(over="ignore", invalid="ignore"):
        t = v.astype(_F32)
    t64 = t.astype(_F64)
    inexact = np.isfinite(v) & (t64 != v)
    toward_zero = inexact & (np.abs(t64) > np.abs(v))
    u = t.view(np.uint32)
    u = np.where(toward_zero, u - np.uint32(1), u)
    u = np.where(inexact, u | np.uint32(1), u).astype(np.uint32)
    return u.view(_F32)


@functools.lru_cache(maxsize=None)
def _assisting_dtype(spec: NumberSpec) -> np.dtype | None:
    """The NumPy / ml_dtypes float type with exactly ``spec``'s codes and values (MLIR has
    the type), whose conversion from f32 (f32 itself: from f64) is a correct round to
    nearest even; None for the other specs.  :func:`round_codes`' float-assisted path."""
    if spec.kind != "float" or spec.mlir is None or spec.mlir == "f64":
        return None
    return spec.dtype


def _magnitude_codes_even(a: np.ndarray, spec: NumberSpec, dt: np.dtype) -> np.ndarray:
    """The magnitude codes of finite ``a`` >= 0 (f64, exact) rounded to nearest even and
    saturated, by the float type ``dt`` (clip, then one correct rounding: the saturated RNE,
    ``max`` being representable)."""
    c = np.minimum(a, spec.max)
    with np.errstate(over="ignore", invalid="ignore"):
        m = c.astype(_F32) if dt == _F32 else round_to_odd_f32(c).astype(dt)
    return m.view(types.code_dtype(dt)).astype(np.int64) & ((1 << spec.bits) - 1)


def round_codes(v, spec: NumberSpec | str, roundmode: str = "even", rbits=None, *,
                fixed: bool = False) -> np.ndarray:
    """The codes (int64, the spec's bits; ints as their two's complement value) of exact
    values ``v`` (f64, NaN and +-Inf allowed) cast to ``spec`` with ``roundmode``
    (section 10.2: saturating; ``rbits`` an int64/uint32 array for ``stochastic``).
    ``fixed``: read an ``intK`` as fixed point with K-2 fraction bits (scaled by an exponent
    scale)."""
    spec = _number(spec)
    v = np.asarray(v, dtype=_F64)
    r = None
    if rbits is not None:
        rb = np.asarray(rbits)
        if rb.dtype.kind not in "iu":
            raise TypeError(f"round_codes: argument 'rbits' must be integers (uint32 random "
                            f"bits), got {rb.dtype}")
        try:
            r = np.broadcast_to(rb.astype(np.int64), v.shape)
        except ValueError:
            raise ValueError(f"round_codes: argument 'rbits' of shape {rb.shape} does not "
                             f"broadcast to the values' shape {v.shape}") from None
    if spec.is_lut:
        return _round_lut(v, spec, roundmode, r)
    a = np.abs(v)
    neg = np.signbit(v)
    nan = np.isnan(v)
    inf = np.isinf(v)
    a_fin = np.where(nan | inf, 0.0, a)
    with np.errstate(invalid="ignore", divide="ignore"):
        if spec.is_integer:
            frac_bits = spec.bits - 2 if fixed and spec.kind == "int" else 0
            n = _round_int(np.ldexp(a_fin, frac_bits), roundmode, r)
            n = np.minimum(n, float(spec.max_code))
            n = np.where(inf, float(spec.max_code), n).astype(np.int64)
            if spec.kind == "uint":
                return np.where(neg | nan, 0, n)
            return np.where(nan, 0, np.where(neg, -n, n))
        if spec.kind == "exp":
            return _round_exp(a_fin, neg, nan, inf, spec, roundmode, r)
        dt = _assisting_dtype(spec) if roundmode == "even" else None
        if dt is not None:  # float-assisted: the same codes as below, 5-10x faster
            codes = _magnitude_codes_even(a_fin, spec, dt)
        else:
            Y, emin = spec.man_bits, spec.emin
            e = np.maximum(np.where(a_fin > 0, _floor_log2(np.where(a_fin > 0, a_fin, 1.0)),
                                    emin), emin)
            q = np.ldexp(1.0, (e - Y).astype(np.int32))
            mag = _round_int(a_fin / q, roundmode, r) * q  # exact
            mag = np.minimum(mag, spec.max)
            codes = _encode_magnitude(mag, spec)
        codes = np.where(inf, spec.inf_code if spec.has_inf else spec.max_code, codes)
        sign = neg & ((codes != 0) | spec.has_negative_zero)
        codes = np.where(sign, codes | spec.sign_mask, codes)
        if spec.nan_code is None:  # fo: every NaN is the -0 code
            nan_codes = spec.sign_mask
        elif spec.special == "fnuz":
            nan_codes = spec.nan_code
        else:
            nan_codes = np.where(neg, spec.nan_code | spec.sign_mask, spec.nan_code)
        return np.where(nan, nan_codes, codes).astype(np.int64)


def _round_lut(v: np.ndarray, spec: NumberSpec, mode: str, r) -> np.ndarray:
    """Section 10.7's rounding of exact values ``v`` (f64) to a lookup table: the codes."""
    t = np.asarray(spec.table, _F64)
    n = len(t)
    nan = np.isnan(v)
    x = np.where(nan, 0.0, v)
    i = np.searchsorted(t, x, side="right") - 1  # t[i] <= x < t[i + 1]; -1 below t[0]
    codes = np.clip(i, 0, n - 1).astype(np.int64)  # below / above the table: its ends
    inside = (i >= 0) & (i < n - 1) & (t[np.clip(i, 0, n - 1)] != x) & ~nan
    if inside.any() and mode != "stochastic":
        codes[inside] = _lut_deterministic(x[inside], i[inside], spec.table, mode)
    elif inside.any():  # stochastic: per distinct value, Z, A and floor(f 2^32) exactly
        xs, ii = x[inside], i[inside]
        keys, first, inv = np.unique(xs.view(np.int64), return_index=True,
                                     return_inverse=True)
        toward = np.empty(len(keys), np.int64)
        away = np.empty(len(keys), np.int64)
        thresh = np.empty(len(keys), np.int64)
        for k, j in enumerate(first):
            _, toward[k], away[k], thresh[k] = _lut_between(float(xs[j]), int(ii[j]),
                                                             spec.table, mode)
        inv = inv.reshape(-1)
        up = np.asarray(r, np.int64)[inside] + thresh[inv] >= (1 << 32)
        codes[inside] = np.where(up, away[inv], toward[inv])
    return np.where(nan, spec.lut_nan_code, codes).astype(np.int64)


@functools.lru_cache(maxsize=64)
def _lut_gaps(table: tuple[float, ...]):
    """Per gap (T[i], T[i+1]): the largest f64 at or below its exact midpoint, whether that
    is the midpoint itself, and the gap's toward-zero direction (-1: T[i], +1: T[i+1], 0:
    the gap straddles 0 and the direction is x's sign)."""
    mid_floor, exact, toward = [], [], []
    for lo, hi in zip(table, table[1:]):
        m = (Fraction(lo) + Fraction(hi)) / 2
        f = float(m)
        if Fraction(f) > m:
            f = math.nextafter(f, -math.inf)
        mid_floor.append(f)
        exact.append(Fraction(f) == m)
        toward.append(-1 if lo >= 0 else 1 if hi <= 0 else 0)
    return (np.array(mid_floor, _F64), np.array(exact, bool), np.array(toward, np.int64))


def _lut_deterministic(x: np.ndarray, i: np.ndarray, table: tuple[float, ...],
                       mode: str) -> np.ndarray:
    """:func:`_lut_between`'s deterministic codes for many values at once: ``x`` (exact f64)
    strictly inside gap ``i``.  x is an f64, so it is above the exact midpoint m exactly when
    it is above the largest f64 at or below m, and equal to it only when m is an f64."""
    mid, exact, toward = (a[i] for a in _lut_gaps(table))
    pos = (x > 0) | ((x == 0) & ~np.signbit(x))
    z_up = np.where(toward == 0, pos, toward > 0)  # Z is T[i+1]
    if mode == "zero":
        return i + z_up
    tie = exact & (x == mid)
    if mode == "even":
        up_at_tie = i % 2 == 1
    elif mode == "nearest":  # the away neighbour; Z for a gap straddling 0
        up_at_tie = np.where(toward == 0, z_up, ~z_up)
    else:  # half_down: Z
        up_at_tie = z_up
    return i + np.where(tie, up_at_tie, x > mid)


def _lut_between(x: float, i: int, table: tuple[float, ...], mode: str):
    """For table[i] < x < table[i + 1]: (the code of ``mode`` when deterministic, the toward-
    zero code Z, the away code A, floor(f 2^32) with f = |x - table[Z]| / (hi - lo)), all in
    exact rational arithmetic (section 10.7)."""
    lo, hi = Fraction(table[i]), Fraction(table[i + 1])
    X = Fraction(x)
    straddle = lo < 0 < hi
    if lo >= 0:
        Z, A = i, i + 1
    elif hi <= 0:
        Z, A = i + 1, i
    else:  # a table without 0, x between its negative and positive neighbours: x's sign
        pos = x > 0 or (x == 0 and not math.copysign(1.0, x) < 0)
        Z, A = (i + 1, i) if pos else (i, i + 1)
    dlo, dhi = X - lo, hi - X
    f = abs(X - Fraction(table[Z])) / (hi - lo)
    th = math.floor(f * (1 << 32))
    if mode == "zero":
        code = Z
    elif dlo != dhi:
        code = i if dlo < dhi else i + 1
    elif mode == "even":
        code = i if i % 2 == 0 else i + 1
    elif mode == "nearest":
        code = Z if straddle else A
    else:  # half_down (and stochastic, unused)
        code = Z
    return code, Z, A, th


def _encode_magnitude(mag: np.ndarray, spec: NumberSpec) -> np.ndarray:
    """The magnitude code of exact non-negative values of ``spec`` (float kind)."""
    Y, emin = spec.man_bits, spec.emin
    sub = mag < math.ldexp(1.0, emin)
    e = _floor_log2(np.where(sub, 1.0, mag))
    m_sub = np.ldexp(mag, Y - emin)  # integer below 2^Y
    m_norm = np.ldexp(mag, (Y - e).astype(np.int32)) - (1 << Y)
    norm = ((e + spec.bias) << Y) + m_norm.astype(np.int64)
    return np.where(sub, m_sub.astype(np.int64), norm)


def _round_exp(a, neg, nan, inf, spec: NumberSpec, mode: str, r) -> np.ndarray:
    """Unscaled cast to an exponent type: NaN, zeros and negatives -> NaN; +Inf and overflow
    -> max; below range -> the smallest value; else 2^e * R(a / 2^e)."""
    pos = a > 0
    e = _floor_log2(np.where(pos, a, 1.0))
    t = a / np.ldexp(1.0, e.astype(np.int32))
    k = e + (_round_int(t, mode, r) - 1).astype(np.int64)  # R(t) is 1 or 2
    code = np.clip(k + spec.bias, 0, spec.max_code)
    code = np.where(inf, spec.max_code, code)
    return np.where(nan | neg | ~(pos | inf), spec.nan_code, code).astype(np.int64)


def _decode(codes: np.ndarray, spec: NumberSpec, *, fixed: bool = False) -> np.ndarray:
    """Exact f64 values of int64 ``codes`` (ints as values; NaN/Inf codes as NaN/Inf)."""
    c = np.asarray(codes, np.int64)
    if spec.is_integer:
        v = c.astype(_F64)
        return np.ldexp(v, -(spec.bits - 2)) if fixed and spec.kind == "int" else v
    if spec.bits <= 16:
        return _value_table(spec)[c & ((1 << spec.bits) - 1)]
    return _decode_wide(c, spec)


@functools.lru_cache(maxsize=None)
def _value_table(spec: NumberSpec) -> np.ndarray:
    """The value of every code of a spec of at most 16 bits (f64, exact)."""
    return np.array([float(spec.value_of(i)) for i in range(1 << spec.bits)], _F64)


def _decode_wide(c: np.ndarray, spec: NumberSpec) -> np.ndarray:
    """Vectorized decode of float codes wider than 16 bits."""
    Y = spec.man_bits
    sign = np.where(c & spec.sign_mask, -1.0, 1.0)
    mag = c & (spec.sign_mask - 1)
    e, m = mag >> Y, mag & ((1 << Y) - 1)
    v = np.where(e == 0, np.ldexp(m.astype(_F64), 1 - spec.bias - Y),
                 np.ldexp((m + (1 << Y)).astype(_F64), (e - spec.bias - Y).astype(np.int32)))
    v = sign * v
    if spec.special == "ieee":
        top = e == (1 << spec.exp_bits) - 1
        v = np.where(top, np.where(m == 0, sign * np.inf, np.nan), v)
    elif spec.special == "fn":
        v = np.where(mag == spec.sign_mask - 1, np.nan, v)
    elif spec.special == "fnuz":
        v = np.where(c == spec.sign_mask, np.nan, v)
    return v


def _store(codes: np.ndarray, spec: NumberSpec) -> np.ndarray:
    """int64 codes -> the spec's storage dtype (bit patterns for floats, values for ints)."""
    dt = spec.dtype
    if spec.is_integer:
        return codes.astype(dt)
    return (codes & ((1 << spec.bits) - 1)).astype(types.code_dtype(dt)).view(dt)


def _load(stored, spec: NumberSpec, what: str) -> np.ndarray:
    """The inverse of :func:`_store`: int64 codes."""
    a = np.asarray(stored)
    if a.dtype != spec.dtype:
        raise ValueError(f"{what} of {spec.code} must have dtype {spec.dtype}, got {a.dtype}")
    if spec.is_integer:
        return a.astype(np.int64)
    return a.view(types.code_dtype(a.dtype)).astype(np.int64) & ((1 << spec.bits) - 1)


# ============================================================================== tiles


def _tiled(x: np.ndarray, s: ScaleSpec) -> tuple[np.ndarray, tuple[int, ...]]:
    """``x`` reshaped to (n0, t0, n1, t1, ...) (tile index, position within the tile, per
    dimension) and the axes of the t's."""
    t = s.tile_shape(x.shape)
    shape = []
    for size, k in zip(x.shape, t):
        shape += [size // k if k else 0, k]
    return x.reshape(shape), tuple(range(1, 2 * x.ndim, 2))


def _untile(y: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return y.reshape(shape)


def _per_tile(v: np.ndarray, ndim: int) -> np.ndarray:
    """A per-tile array of shape (n0, n1, ...) broadcastable against the tiled layout."""
    out = v
    for i in range(ndim):
        out = np.expand_dims(out, 2 * i + 1)
    return out


# ============================================================================== encode


def encode(x, number, scale=None, roundmode: str = "even", scalemode: str = "max",
           rbits=None, *, tensor_scale=None) -> Encoded:
    """The actual cast of ``x`` (f32/bf16/f16) to a datatype (see :func:`resolve`): codes,
    scales and zero points, as docs/semantics.md section 10 defines them.  ``tensor_scale``:
    the value g of a two-level datatype's tensor scale (``..._gf32``): the tiles then scale
    y = x / g (default: no second level, g = 1)."""
    xf, _ = _wide(x)
    dt = resolve(number, scale)
    r = _modes(roundmode, scalemode, rbits, xf.shape)
    g = _tensor_scale(dt, tensor_scale, "encode")
    codes, scales, zps, offs = _encode(_divided(xf, g), dt, roundmode, scalemode, r)
    n, s = dt.number, dt.scale
    return Encoded(_store(codes, n),
                   None if scales is None else _store(scales, s.number),
                   None if zps is None else _store(zps, s.zero_point),
                   None if offs is None else _store(offs, s.offset_number))


def _encode(xf: np.ndarray, dt: Datatype, mode: str, scalemode: str, r):
    """(codes, scale codes, zero-point codes, subtile offsets), int64 or None."""
    n, s = dt.number, dt.scale
    if s is None:
        return round_codes(xf.astype(_F64), n, mode, r), None, None, None
    if s.power_of_two:
        return _encode_pow2(xf, n, s, mode, scalemode, r)
    if scalemode != "max":
        raise ValueError(f"scalemode '{scalemode}' applies to exponent scales; the float "
                         f"scale {s.number.code} takes 'max'")
    if s.zero_point is not None:
        return (*_encode_asymmetric(xf, n, s, mode, r), None)
    return (*_encode_float_scale(xf, n, s, mode, r), None)


def _tile_stats(xf: np.ndarray, s: ScaleSpec):
    xt, axes = _tiled(xf, s)
    bad = ~np.isfinite(xt)
    nonfinite = bad.any(axis=axes) if xt.size else np.zeros(s.scales_shape(xf.shape), bool)
    a = np.where(bad, 0.0, np.abs(xt)).astype(_F64)
    amax = a.max(axis=axes, initial=0.0)
    return xt, axes, nonfinite, amax


def _scale_exponent(amax: np.ndarray, n: NumberSpec, s: ScaleSpec, mode: str) -> np.ndarray:
    """E per tile (int64, clamped to the exponent type's range) for finite ``amax`` (f64)."""
    emax = n.scaled_emax if n.kind == "int" else n.emax
    mx = float(n.scaled_max_exact) if n.kind == "int" else n.max
    pos = amax > 0
    safe = np.where(pos, amax, 1.0)
    fl = _floor_log2(safe)
    if mode == "max":
        E = fl - emax
    elif mode == "midmax":
        E = fl - emax
        mid = float(n.scaled_midmax_exact) if n.kind == "int" else n.midmax
        E = E + (np.ldexp(safe, (-E).astype(np.int32)) >= mid)
    elif mode == "rceil":
        with np.errstate(under="ignore", over="ignore"):
            q = (safe / mx).astype(_F32).astype(_F64)  # one f32 division (correctly rounded)
        qpos = q > 0
        fq = _floor_log2(np.where(qpos, q, 1.0))
        exact_pow2 = np.ldexp(1.0, fq.astype(np.int32)) == q
        E = np.where(qpos, fq + ~exact_pow2, np.iinfo(np.int32).min)
        # amax / max beyond f32's range (a format whose max is below 1): the f32 quotient is
        # +Inf, whose ceil(log2) is +Inf, clamped to the scale's emax below
        E = np.where(np.isinf(q), np.iinfo(np.int32).max, E)
    else:  # nearest: ml_dtypes' f32 -> e8m0 rounding of v = amax 2^-emax (exact)
        v = np.ldexp(safe, -emax)
        fv = _floor_log2(v)
        sig = np.ldexp(v, (-fv).astype(np.int32))
        E = np.where(v >= 2.0 ** -126, fv + (sig >= 1.5),
                     np.where(v > 2.0 ** -127, -126, -127))
    lo, hi = s.number.emin, s.number.emax
    return np.clip(np.where(pos, E, lo), lo, hi).astype(np.int64)


def _encode_pow2(xf, n: NumberSpec, s: ScaleSpec, mode, scalemode, r):
    xt, axes, nonfinite, amax = _tile_stats(xf, s)
    E = _scale_exponent(amax, n, s, scalemode)
    scale_codes = np.where(nonfinite, s.number.nan_code, E + s.number.bias).astype(np.int64)
    offsets = None
    if s.subtile:  # each subtile's exponent: E - o, o = min(E - E_sub, 2^D - 1)
        sub = s.subtiles_as_tiles
        xt, _, _, samax = _tile_stats(xf, sub)
        E_sub = _scale_exponent(samax, n, sub, scalemode)  # <= E: every rule is monotone
        E, nonfinite = _to_subtiles(E, s, xf.shape), _to_subtiles(nonfinite, s, xf.shape)
        offsets = np.where(nonfinite, 0, np.minimum(E - E_sub, s.max_offset)).astype(np.int64)
        E, s = E - offsets, sub
    v = np.ldexp(xt.astype(_F64), _per_tile(-E, xf.ndim).astype(np.int32))
    rt = None if r is None else _tiled(r, s)[0]
    codes = round_codes(v, n, mode, rt, fixed=True)
    codes = np.where(_per_tile(nonfinite, xf.ndim), 0, codes)
    return _untile(codes, xf.shape), scale_codes, None, offsets


def _to_subtiles(per_tile: np.ndarray, s: ScaleSpec, shape: tuple[int, ...]) -> np.ndarray:
    """A per-tile array (the scales' shape) repeated onto the subtiles (the offsets' shape)."""
    out = per_tile
    for d, (t, k) in enumerate(zip(s.tile_shape(shape), s.subtile_shape(shape))):
        if t != k:
            out = np.repeat(out, t // k, axis=d)
    return out


def _to_scale(q_f32: np.ndarray, spec: NumberSpec) -> tuple[np.ndarray, np.ndarray]:
    """A positive f32 quantity rounded to a float scale spec (even, saturating): (codes,
    exact values)."""
    codes = round_codes(q_f32.astype(_F64), spec, "even")
    return codes, _decode(codes, spec)


def _div_f32(a, b) -> np.ndarray:
    """One IEEE f32 division of exact f64 operands (correctly rounded: f64 then f32 is
    innocuous double rounding for 24-bit operands; b may have more bits: then it is the
    correctly rounded quotient of the exact values, as the contract asks)."""
    with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="ignore"):
        return (np.asarray(a, _F64) / np.asarray(b, _F64)).astype(_F32)


def _encode_float_scale(xf, n: NumberSpec, s: ScaleSpec, mode, r):
    xt, axes, nonfinite, amax = _tile_stats(xf, s)
    mx = n.max  # ints: the integer view (s = amax / (2^(K-1) - 1))
    scale_codes, sval = _to_scale(_div_f32(amax, mx), s.number)
    zero = sval == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        v = (xt / _per_tile(np.where(zero, 1.0, sval), xf.ndim).astype(_F32)).astype(_F32)
    rt = None if r is None else _tiled(r, s)[0]
    codes = round_codes(v.astype(_F64), n, mode, rt)
    drop = _per_tile(nonfinite | zero, xf.ndim)
    codes = np.where(drop, 0, codes)
    scale_codes = np.where(nonfinite, _nan_code(s.number), scale_codes)
    return _untile(codes, xf.shape), scale_codes.astype(np.int64), None


def _nan_code(spec: NumberSpec) -> int:
    return spec.nan_code


def _encode_asymmetric(xf, n: NumberSpec, s: ScaleSpec, mode, r):
    xt, axes, nonfinite, _ = _tile_stats(xf, s)
    K = n.bits
    top = (1 << K) - 1
    fin = np.where(np.isfinite(xt), xt, 0).astype(_F32)
    # (an empty tensor has tiles of shape (..., 0, ...) or no tiles: the initial values keep
    # the reductions' shapes right either way)
    vmin = fin.min(axis=axes, initial=np.float32(np.inf))
    vmax = fin.max(axis=axes, initial=np.float32(-np.inf))
    int_zp = s.zero_point.is_integer
    if int_zp:
        vmin, vmax = np.minimum(vmin, np.float32(0)), np.maximum(vmax, np.float32(0))
    with np.errstate(over="ignore", invalid="ignore"):
        span = (vmax - vmin).astype(_F32)
    scale_codes, sval = _to_scale(_div_f32(span, top), s.number)
    zero = sval == 0
    s32 = np.where(zero, 1.0, sval).astype(_F32)
    rt = None if r is None else _tiled(r, s)[0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if int_zp:
            z = np.clip(_round_signed((-vmin / s32).astype(_F32), "even", None), 0, top)
            z = np.where(zero, 0, z).astype(np.int64)
            q = (xt / _per_tile(s32, xf.ndim)).astype(_F32)
            codes = np.clip(_round_signed(q, mode, rt) + _per_tile(z, xf.ndim), 0, top)
            zp_codes = z
        else:
            zp_codes = round_codes(vmin.astype(_F64), s.zero_point, "even")
            zv = _decode(zp_codes, s.zero_point).astype(_F32)
            d = (xt - _per_tile(zv, xf.ndim)).astype(_F32)
            q = (d / _per_tile(s32, xf.ndim)).astype(_F32)
            codes = np.clip(_round_signed(q, mode, rt), 0, top)
    drop = _per_tile(nonfinite | zero, xf.ndim)
    if int_zp:  # s = 0 (an all-zero tile): code z = 0, value 0
        codes = np.where(_per_tile(nonfinite, xf.ndim), 0,
                         np.where(_per_tile(zero, xf.ndim), _per_tile(z, xf.ndim), codes))
    else:
        codes = np.where(drop, 0, codes)
    zp_codes = np.where(nonfinite, 0, zp_codes)
    scale_codes = np.where(nonfinite, _nan_code(s.number), scale_codes)
    return (_untile(codes.astype(np.int64), xf.shape), scale_codes.astype(np.int64),
            zp_codes.astype(np.int64))


def _round_signed(q: np.ndarray, mode: str, r) -> np.ndarray:
    """R applied to |q| with q's sign kept (an int64 integer)."""
    # every caller saturates the result to [0, 2^K - 1] with K <= 32, so magnitudes beyond
    # 2^62 (f32 quotients reach 2^128) are clipped first: the same saturated result, and no
    # int64 wrap-around
    q = np.clip(np.asarray(q, _F64), -2.0 ** 62, 2.0 ** 62)
    rr = None if r is None else np.broadcast_to(np.asarray(r, np.int64), q.shape)
    with np.errstate(invalid="ignore"):
        m = _round_int(np.where(np.isfinite(q), np.abs(q), 0.0), mode, rr)
    return np.where(q < 0, -m, m).astype(np.int64)


# ============================================================================== decode


def decode(encoded, number=None, scale=None, *, scales=None, zero_points=None,
           offsets=None, dtype=np.float32, tensor_scale=None) -> np.ndarray:
    """Values of an actual cast: ``decode(encode(x, dt), dt)`` (or codes with ``scales=``,
    ``zero_points=`` and ``offsets=``) in ``dtype`` (f32, bf16 or f16): each value computed in
    f32 and rounded once to ``dtype``; a two-level datatype's tile-level value times
    ``tensor_scale`` in f32 first (default 1)."""
    out = np.dtype(dtype)
    if out not in _WIDE:
        raise ValueError(f"decode: dtype must be float32, bfloat16 or float16, got {out}")
    if isinstance(encoded, Encoded):
        if scales is not None or zero_points is not None or offsets is not None:
            raise ValueError("decode: scales, zero points and offsets come with the Encoded "
                             "value")
        codes, scales, zero_points, offsets = encoded
    else:
        codes = encoded
    dt = resolve(number, scale)
    n, s = dt.number, dt.scale
    c = _load(codes, n, "codes")
    g = _tensor_scale(dt, tensor_scale, "decode")
    if s is None:
        if scales is not None or zero_points is not None or offsets is not None:
            raise ValueError(f"decode: {dt} is unscaled; it takes no scales, zero points or "
                             f"offsets")
        return _to_out(_decode(c, n), out)
    want = s.scales_shape(c.shape)
    if scales is None:
        raise ValueError(f"decode: {dt} needs scales of shape {want}")
    sc = _load(scales, s.number, "scales")
    if sc.shape != want:
        raise ValueError(f"decode: scales of {dt} for codes of shape {c.shape} must have shape "
                         f"{want}, got {sc.shape}")
    if (s.zero_point is None) != (zero_points is None):
        raise ValueError(f"decode: {dt} takes {'no ' if s.zero_point is None else ''}zero "
                         "points")
    zp = None if zero_points is None else _load(zero_points, s.zero_point, "zero points")
    if zp is not None and zp.shape != want:
        raise ValueError(f"decode: zero points must have shape {want}, got {zp.shape}")
    off = _offsets(offsets, dt, c.shape)
    return _to_out(_times(_decode_scaled(c, n, s, sc, zp, off), g), out)


def _offsets(offsets, dt: Datatype, shape: tuple[int, ...]) -> np.ndarray | None:
    """The checked subtile offsets of a decode (int64), None for a spec without subtiles."""
    s = dt.scale
    if not s.subtile:
        if offsets is not None:
            raise ValueError(f"decode: {dt} has no subtiles; it takes no offsets")
        return None
    want = s.offsets_shape(shape)
    if offsets is None:
        raise ValueError(f"decode: {dt} needs subtile offsets of shape {want}")
    off = _load(offsets, s.offset_number, "offsets")
    if off.shape != want:
        raise ValueError(f"decode: offsets of {dt} for codes of shape {shape} must have shape "
                         f"{want}, got {off.shape}")
    if off.size and int(off.max()) > s.max_offset:
        raise ValueError(f"decode: an offset of {dt} is at most {s.max_offset} "
                         f"({s.offset_bits} bits), got {int(off.max())}")
    return off


def _decode_scaled(c, n: NumberSpec, s: ScaleSpec, sc, zp, off=None) -> np.ndarray:
    snan = np.isnan(_decode(sc, s.number))
    if s.subtile:  # the tile's E and NaN flag onto the subtiles, less each subtile's offset
        sc = _to_subtiles(sc, s, c.shape) - off
        snan = _to_subtiles(snan, s, c.shape)
        s = s.subtiles_as_tiles
    ct, _ = _tiled(c, s)
    if s.power_of_two:
        E = sc - s.number.bias
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            v = np.ldexp(_decode(ct, n, fixed=True), _per_tile(E, c.ndim).astype(np.int32))
            v = v.astype(_F32)  # the one f32 rounding of the exact value
    else:
        sval = _per_tile(_decode(sc, s.number), c.ndim).astype(_F32)
        with np.errstate(over="ignore", invalid="ignore"):
            if zp is None:
                v = (_decode(ct, n).astype(_F32) * sval).astype(_F32)
            elif s.zero_point.is_integer:
                d = (ct - _per_tile(zp, c.ndim)).astype(_F32)
                v = (d * sval).astype(_F32)
            else:
                zv = _per_tile(_decode(zp, s.zero_point), c.ndim).astype(_F32)
                v = ((_decode(ct, n).astype(_F32) * sval).astype(_F32) + zv).astype(_F32)
    v = np.where(_per_tile(snan, c.ndim), np.float32(np.nan), v)
    return v.reshape(c.shape)


def _to_out(v: np.ndarray, out: np.dtype) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(v).astype(_F32).astype(out)


# ============================================================================== cast


def cast(x, number, scale=None, roundmode: str = "even", scalemode: str = "max",
         rbits=None, *, tensor_scale=None) -> np.ndarray:
    """The virtual cast of ``x`` (f32/bf16/f16) to a datatype: ``x``'s shape and dtype, each
    value the dequantized quantized value computed in f32 and rounded once to ``x``'s dtype
    (docs/semantics.md section 10.4); ``tensor_scale`` as for :func:`encode`."""
    xf, out = _wide(x)
    dt = resolve(number, scale)
    r = _modes(roundmode, scalemode, rbits, xf.shape)
    g = _tensor_scale(dt, tensor_scale, "cast")
    codes, scales, zps, offs = _encode(_divided(xf, g), dt, roundmode, scalemode, r)
    n, s = dt.number, dt.scale
    if s is None:
        return _to_out(_decode(codes, n), out)
    return _to_out(_times(_decode_scaled(codes, n, s, scales, zps, offs), g), out)


# ============================================================================== sparsity


def sparse(x, n: int, m: int, dim: int = -1) -> np.ndarray:
    """Section 10.5: in each run of ``n`` consecutive values along ``dim`` keep the ``m`` of
    largest magnitude (NaN counts as the largest; among equals the lower index), set the others
    to +0.  ``x``'s dtype is kept (any float dtype)."""
    a = np.asarray(x)
    if a.dtype.kind != "f" and a.dtype not in _WIDE:
        raise ValueError(f"sparse: input must be a float array, got {a.dtype}")
    for name, v in (("n", n), ("m", m)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise ValueError(f"sparse: {name} must be an int, got {v!r}")
    if a.ndim == 0:
        raise ValueError("sparse: input must have at least one dimension")
    if not -a.ndim <= dim < a.ndim:
        raise ValueError(f"sparse: dim {dim} is out of range for rank {a.ndim}")
    d = dim % a.ndim
    if n <= 0 or not 0 < m <= n:
        raise ValueError(f"sparse: need 0 < m <= n, got n={n}, m={m}")
    if a.shape[d] % n:
        raise ValueError(f"sparse: n={n} does not divide dimension {d} of size {a.shape[d]}")
    if a.size == 0:  # nothing to choose from (n may be any size: its runs are not built)
        return a.copy()
    moved = np.moveaxis(a, d, -1)
    g = moved.reshape(*moved.shape[:-1], moved.shape[-1] // n, n)
    mag = np.abs(g.astype(_F64))
    isnan = np.isnan(mag)
    # rank by NaN first, then larger magnitude, then lower index (lexsort: last key first)
    idx = np.broadcast_to(np.arange(n), g.shape)
    order = np.lexsort((idx, -np.where(isnan, 0.0, mag), ~isnan), axis=-1)
    keep = np.zeros(g.shape, bool)
    np.put_along_axis(keep, order[..., :m], True, axis=-1)
    out = np.where(keep, g, np.zeros((), a.dtype)).astype(a.dtype)
    return np.moveaxis(out.reshape(moved.shape), -1, d)
