"""The one table of scalar types mxlower handles (docs/semantics.md section 2).

Every element type mxlower reads, writes, converts or runs is one :class:`ScalarType` row in
:data:`SCALARS`: its MLIR spelling, its NumPy / ml_dtypes dtype, its bit width, the MLIR
integer type that stores its bits, and (for floats) the :class:`FloatType` codec description
every generated conversion is derived from.  The codec, the passes, the signature reader and
the tools' array I/O all read this table; adding a type here is the whole job::

    >>> from mxlower import types
    >>> types.scalar("f4E2M1FN").bits, types.scalar("f4E2M1FN").dtype
    (4, dtype(float4_e2m1fn))
    >>> types.of_dtype(np.dtype("float32")).mlir
    'f32'

Views kept for the code that needs only one column: :data:`FLOAT_TYPES` (narrow float codecs
by MLIR spelling), :data:`WIDE_FLOAT_TYPES` (f64/f32/bf16/f16 codecs) and :data:`WIDE_TYPES`
(the three types MX values are quantized from and dequantized to).  They are updated in place
by :func:`register`, so code that looks a name up at call time sees a registered type.
:func:`probe_values` gives the inputs that test a conversion from a type exhaustively or
nearly so (NumPy only, like the rest of this module: the GPU side of the tests runs it
without MLIR).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Literal

import ml_dtypes
import numpy as np

__all__ = [
    "FLOAT_TYPES",
    "FloatType",
    "SCALARS",
    "ScalarType",
    "WIDE_FLOAT_TYPES",
    "WIDE_TYPES",
    "code_dtype",
    "dtype",
    "extensions",
    "float_type",
    "is_narrow_float",
    "is_subbyte_float",
    "is_wide_float",
    "of_dtype",
    "probe_values",
    "register",
    "scalar",
    "unregister",
    "withdrawn",
]


@dataclasses.dataclass(frozen=True)
class FloatType:
    """The codec description of one float type.

    A finite non-zero value with biased exponent e and mantissa m is
    ``(-1)^s * 2^(e - bias) * (1 + m / 2^man_bits)`` for e > 0 and
    ``(-1)^s * 2^(1 - bias) * (m / 2^man_bits)`` for e == 0 (when ``subnormals``).
    """

    mlir: str  #: MLIR spelling, e.g. "f8E4M3FN"
    numpy_name: str  #: ml_dtypes (or NumPy) dtype name, e.g. "float8_e4m3fn"
    bits: int  #: storage width
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool
    #: "ieee": all-ones exponent is Inf (m == 0) / NaN (m != 0);
    #: "fn": no Inf, only the all-ones code (exponent and mantissa) is NaN;
    #: "fnuz": no Inf, no -0: the code of -0 (the sign bit alone) is the only NaN (f8E4M3FNUZ);
    #: "fnu": unsigned, no Inf, the all-ones code is NaN (f8E8M0FNU);
    #: "none": no Inf, no NaN.
    special: Literal["ieee", "fn", "fnuz", "fnu", "none"]
    #: what a finite value beyond max converts to: "inf", "nan" or "saturate" (to +-max).
    overflow: Literal["inf", "nan", "saturate"]
    #: what a NaN input converts to (unsigned code; the sign is applied where the type has one).
    #: For "none" types this is the code of -0 regardless of sign (docs/semantics.md section 2).
    nan_code: int
    subnormals: bool = True

    @property
    def dtype(self) -> np.dtype:
        """The NumPy / ml_dtypes dtype; for a type ml_dtypes lacks (``numpy_name`` empty: a
        number spec of mxlower.numbers), the unsigned integer dtype its codes are stored in."""
        if not self.numpy_name:
            return np.dtype(next(f"uint{w}" for w in (8, 16, 32, 64) if w >= self.bits))
        return _dtype_named(self.numpy_name)

    @property
    def finfo(self):
        return ml_dtypes.finfo(self.dtype)

    @property
    def max(self) -> float:
        """The largest finite value, from the description."""
        mag = self.max_code
        if self.special == "fnu":
            return math.ldexp(1.0, mag - self.bias)
        e, m = mag >> self.man_bits, mag & ((1 << self.man_bits) - 1)
        if e == 0:
            return math.ldexp(float(m), 1 - self.bias - self.man_bits)
        return math.ldexp(float(m + (1 << self.man_bits)), e - self.bias - self.man_bits)

    @property
    def sign_mask(self) -> int:
        return (1 << (self.bits - 1)) if self.signed else 0

    @property
    def magnitude_mask(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def exponent_mask(self) -> int:
        """The exponent field's bits (the code of +Inf in an "ieee" type)."""
        return ((1 << self.exp_bits) - 1) << self.man_bits

    @property
    def max_code(self) -> int:
        """The code of the largest finite value (its magnitude bits)."""
        return {"ieee": self.exponent_mask - 1, "fn": self.magnitude_mask - 1,
                "fnu": self.magnitude_mask - 1, "fnuz": self.magnitude_mask,
                "none": self.magnitude_mask}[self.special]

    @property
    def overflow_midpoint(self) -> float:
        """max + half an ulp, where round to nearest overflows: larger magnitudes round past
        max; the midpoint itself ties to even (onto max when max's code is even)."""
        _, e = math.frexp(self.max)  # max = m * 2^e, m in [0.5, 1)
        return self.max + math.ldexp(1.0, e - 2 - self.man_bits)

    @property
    def is_subbyte(self) -> bool:
        """Narrower than a byte (stored one per byte in the low bits, packable)."""
        return self.bits < 8

    @property
    def has_inf(self) -> bool:
        return self.special == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.special != "none"

    def code_of(self, value: float) -> int:
        """The code of ``value`` in this type (rounded as ml_dtypes' ``astype`` from f64)."""
        with np.errstate(over="ignore"):
            return int(np.array(value, np.float64).astype(self.dtype).view(
                code_dtype(self.dtype))) & ((1 << self.bits) - 1)


Kind = Literal["narrow", "wide", "int", "uint", "bool", "index"]


@dataclasses.dataclass(frozen=True)
class ScalarType:
    """One row of the scalar-type table."""

    mlir: str  #: MLIR spelling: "f8E4M3FN", "f32", "i8", "ui8", "i1", "index"
    dtype: np.dtype  #: NumPy / ml_dtypes dtype of one element
    bits: int  #: logical width (4 for f4E2M1FN, 1 for i1)
    kind: Kind
    codec: FloatType | None = None  #: codec description (floats only)

    @property
    def storage(self) -> str:
        """The MLIR integer type holding one element in memory (narrow floats: one per byte)."""
        if self.kind in ("narrow", "bool"):
            return "i8"
        if self.kind in ("int", "uint"):
            return self.mlir
        return f"i{8 * self.dtype.itemsize}"

    @property
    def code_dtype(self) -> np.dtype:
        """The unsigned integer dtype viewing one element's bits (uint8 for f4E2M1FN)."""
        return code_dtype(self.dtype)

    @property
    def code_mask(self) -> int:
        """The bits of a stored element that carry its code (0xF for f4E2M1FN)."""
        return (1 << self.bits) - 1

    @property
    def is_float(self) -> bool:
        return self.codec is not None


def _dtype_named(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name, None) or getattr(np, name))


def code_dtype(dt: np.dtype) -> np.dtype:
    """The unsigned integer dtype of the same item size as ``dt``."""
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dt).itemsize])


def _float(codec: FloatType, kind: Kind) -> ScalarType:
    return ScalarType(codec.mlir, codec.dtype, codec.bits, kind, codec)


def _int(mlir: str, dt: type, kind: Kind) -> ScalarType:
    d = np.dtype(dt)
    return ScalarType(mlir, d, 1 if kind == "bool" else 8 * d.itemsize, kind)


_NARROW = (
    FloatType("f8E4M3FN", "float8_e4m3fn", 8, 4, 3, 7, True, "fn", "nan", 0x7F),
    FloatType("f8E5M2", "float8_e5m2", 8, 5, 2, 15, True, "ieee", "inf", 0x7E),
    FloatType("f8E8M0FNU", "float8_e8m0fnu", 8, 8, 0, 127, False, "fnu", "nan", 0xFF,
              subnormals=False),
    FloatType("f6E3M2FN", "float6_e3m2fn", 6, 3, 2, 3, True, "none", "saturate", 0x20),
    FloatType("f6E2M3FN", "float6_e2m3fn", 6, 2, 3, 1, True, "none", "saturate", 0x20),
    FloatType("f4E2M1FN", "float4_e2m1fn", 4, 2, 1, 1, True, "none", "saturate", 0x8),
    # IEEE-style f8 (Inf and NaNs, overflow to Inf) and the FNUZ family (no Inf, no -0: 0x80
    # is the one NaN, overflow and Inf give it); NaN codes are ml_dtypes'
    FloatType("f8E4M3", "float8_e4m3", 8, 4, 3, 7, True, "ieee", "inf", 0x7C),
    FloatType("f8E3M4", "float8_e3m4", 8, 3, 4, 3, True, "ieee", "inf", 0x78),
    FloatType("f8E4M3FNUZ", "float8_e4m3fnuz", 8, 4, 3, 8, True, "fnuz", "nan", 0x80),
    FloatType("f8E5M2FNUZ", "float8_e5m2fnuz", 8, 5, 2, 16, True, "fnuz", "nan", 0x80),
    FloatType("f8E4M3B11FNUZ", "float8_e4m3b11fnuz", 8, 4, 3, 11, True, "fnuz", "nan", 0x80),
)
#: The wide IEEE types (NaN code: the canonical quiet NaN).
_WIDE = (
    FloatType("f32", "float32", 32, 8, 23, 127, True, "ieee", "inf", 0x7FC00000),
    FloatType("bf16", "bfloat16", 16, 8, 7, 127, True, "ieee", "inf", 0x7FC0),
    FloatType("f16", "float16", 16, 5, 10, 15, True, "ieee", "inf", 0x7E00),
    FloatType("f64", "float64", 64, 11, 52, 1023, True, "ieee", "inf", 0x7FF8000000000000),
)

#: Every scalar type, by MLIR spelling.
SCALARS: dict[str, ScalarType] = {
    t.mlir: t
    for t in (
        *(_float(c, "narrow") for c in _NARROW),
        *(_float(c, "wide") for c in _WIDE),
        _int("i1", np.bool_, "bool"),
        *(_int(f"i{8 * np.dtype(d).itemsize}", d, "int")
          for d in (np.int8, np.int16, np.int32, np.int64)),
        *(_int(f"ui{8 * np.dtype(d).itemsize}", d, "uint")
          for d in (np.uint8, np.uint16, np.uint32, np.uint64)),
        _int("index", np.int64, "index"),
    )
}

#: Narrow float codec descriptions by MLIR spelling (a view of :data:`SCALARS`).
FLOAT_TYPES: dict[str, FloatType] = {}
#: Wide float codec descriptions (f32, bf16, f16, f64) by MLIR spelling.
WIDE_FLOAT_TYPES: dict[str, FloatType] = {}
#: The wide types MX values are quantized from and dequantized to: MLIR spelling -> dtype.
WIDE_TYPES: dict[str, np.dtype] = {}
_MX_WIDE = ("f32", "bf16", "f16")


def _index(t: ScalarType) -> None:
    if t.kind == "narrow":
        FLOAT_TYPES[t.mlir] = t.codec
    elif t.kind == "wide":
        WIDE_FLOAT_TYPES[t.mlir] = t.codec
        if t.mlir in _MX_WIDE:
            WIDE_TYPES[t.mlir] = t.dtype


for _t in SCALARS.values():
    _index(_t)
_BUILT_IN = frozenset(SCALARS)
#: The names :func:`register` added, in order (what :func:`extensions` returns).
_REGISTERED: list[str] = []


def register(t: ScalarType | FloatType) -> ScalarType:
    """Add a scalar type (a :class:`FloatType` becomes a narrow float) to every view.

    For extensions and tests: a registered narrow float flows through the codec, the
    conversion passes and the tools' array I/O with no other change.
    """
    if isinstance(t, FloatType):
        t = _float(t, "narrow")
    if t.mlir in SCALARS and SCALARS[t.mlir] != t:
        raise ValueError(f"scalar type '{t.mlir}' is already registered differently")
    if t.mlir not in SCALARS:
        _REGISTERED.append(t.mlir)
    SCALARS[t.mlir] = t
    _index(t)
    return t


def extensions() -> list[ScalarType]:
    """The rows :func:`register` added (in order), e.g. for a child process to register too."""
    return [SCALARS[name] for name in _REGISTERED]


def unregister(name: str) -> None:
    """Remove a type added by :func:`register` (tests use it to clean up)."""
    if name not in _REGISTERED:
        if name in SCALARS:
            raise ValueError(f"scalar type '{name}' is built in; only registered types can be "
                             "removed")
        raise KeyError(f"scalar type '{name}' is not registered")
    _REGISTERED.remove(name)
    del SCALARS[name]
    for view in (FLOAT_TYPES, WIDE_FLOAT_TYPES, WIDE_TYPES):
        view.pop(name, None)


@contextlib.contextmanager
def withdrawn(name: str) -> Iterator[ScalarType]:
    """Test support: the built-in type ``name`` taken out of every view for the duration, so
    that a test can :func:`register` it again and watch a registered type flow through
    mxlower (every MLIR narrow float is built in, so no other type is left to register).  On
    exit a registration of it is undone and the built-in row restored, the table's order
    kept."""
    if name not in _BUILT_IN or name not in SCALARS or name in _REGISTERED:
        raise ValueError(f"'{name}' is not a built-in scalar type here to withdraw")
    order = list(SCALARS)
    row = SCALARS.pop(name)
    for view in (FLOAT_TYPES, WIDE_FLOAT_TYPES, WIDE_TYPES):
        view.pop(name, None)
    try:
        yield row
    finally:
        if name in _REGISTERED:
            unregister(name)
        rows = {k: SCALARS[k] for k in order if k in SCALARS and k != name}
        rows[name] = row
        rest = {k: v for k, v in SCALARS.items() if k not in rows}
        SCALARS.clear()
        SCALARS.update({k: rows[k] for k in order if k in rows}, **rest)
        for view in (FLOAT_TYPES, WIDE_FLOAT_TYPES, WIDE_TYPES):
            view.clear()
        for t in SCALARS.values():
            _index(t)


def scalar(name: str) -> ScalarType:
    """A scalar type by MLIR spelling ("f4E2M1FN") or dtype name ("float4_e2m1fn")."""
    t = SCALARS.get(name)
    if t is not None:
        return t
    for t in SCALARS.values():
        if t.dtype.name == name and t.kind != "index":
            return t
    raise KeyError(f"unknown scalar type '{name}' (known: {', '.join(SCALARS)})")


def of_dtype(dt: np.dtype | type) -> ScalarType:
    """The scalar type of a NumPy / ml_dtypes dtype; KeyError if mxlower has none."""
    d = np.dtype(dt)
    for t in SCALARS.values():
        if t.dtype == d and t.kind != "index":
            return t
    raise KeyError(f"dtype '{d}' has no MLIR scalar type here")


def dtype(name: str) -> np.dtype:
    """The NumPy dtype of an MLIR scalar type spelling; KeyError naming the known ones."""
    return scalar(name).dtype


def float_type(name: str) -> FloatType:
    """A narrow float's codec description by MLIR spelling or ml_dtypes name."""
    try:
        t = scalar(name)
    except KeyError:
        t = None
    if t is None or t.kind != "narrow":
        raise KeyError(f"unknown narrow float type '{name}' (known: {', '.join(FLOAT_TYPES)})")
    return t.codec


def is_narrow_float(name: str) -> bool:
    """Whether ``name`` is a narrow float type (by MLIR spelling)."""
    t = SCALARS.get(name)
    return t is not None and t.kind == "narrow"


def is_subbyte_float(name: str) -> bool:
    """Whether ``name`` is a narrow float of fewer than 8 bits (f4E2M1FN, f6E2M3FN, ...)."""
    t = SCALARS.get(name)
    return t is not None and t.kind == "narrow" and t.codec.is_subbyte


def is_wide_float(name: str) -> bool:
    """Whether ``name`` is one of the wide float types (f64, f32, bf16, f16)."""
    t = SCALARS.get(name)
    return t is not None and t.kind == "wide"


# ---------------------------------------------------------------- conversion test inputs


def probe_values(type_name: str, *, n_random: int = 1 << 16, seed: int = 0) -> np.ndarray:
    """Inputs that exercise a conversion from ``type_name`` exhaustively or near-exhaustively.

    * a narrow type: every code (ml_dtypes array);
    * bf16, f16: every bit pattern;
    * f32 (> 200k values): for each narrow type, every value, every midpoint between
      neighbours (and the overflow midpoint past max) and their f32 neighbours (+-1, +-2 ulp),
      with both signs; every power of two and 1.5 * 2^k (f8E8M0FNU ties) with neighbours;
      subnormals around 2^-127 and 2^-126; +-0, +-Inf, quiet and signalling NaNs of both signs
      with several payloads; ``n_random`` random bit patterns;
    * f64: the f32 set, plus every narrow midpoint nudged by 1 f64 ulp and by 2^-30 relative
      (a double rounding through f32 gets these wrong), f64 subnormals, and random values
      over the whole exponent range.
    """
    if type_name in FLOAT_TYPES:
        t = FLOAT_TYPES[type_name]
        return np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype)
    if type_name in ("bf16", "f16"):
        return np.arange(1 << 16, dtype=np.uint16).view(WIDE_FLOAT_TYPES[type_name].dtype)
    if type_name == "f64":
        return _f64_probes(n_random, seed)
    if type_name != "f32":
        raise KeyError(f"no probe set for '{type_name}'")
    f64: list[np.ndarray] = []
    for t in FLOAT_TYPES.values():
        v = np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype).astype(np.float64)
        v = np.unique(np.abs(v[np.isfinite(v)]))
        ulp_top = v[-1] - v[-2]
        v = np.concatenate([v, [v[-1] + ulp_top, v[-1] + 2 * ulp_top]])
        mids = (v[:-1] + v[1:]) / 2  # exact in f64, and exact in f32 (<= 5 significand bits)
        f64 += [v, mids]
    k = np.arange(-149, 128)
    f64 += [np.ldexp(1.0, k), np.ldexp(1.5, k[1:]), np.ldexp(1.25, k[2:]),
            np.ldexp(1.75, k[2:])]
    with np.errstate(over="ignore"):  # e8m0's top midpoints overflow f32 to Inf: kept
        base = np.concatenate(f64).astype(np.float32)  # exact otherwise
    u = base.view(np.uint32).astype(np.int64)
    near = np.concatenate([u + d for d in (-2, -1, 0, 1, 2)])
    sub = np.concatenate([np.arange(1, 64), (1 << 22) + np.arange(-64, 65),
                          (1 << 23) - np.arange(1, 64), (3 << 21) + np.arange(-8, 9)])
    special = np.array([0, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0x7FA00000,
                        0x7F7FFFFF, 0x00800000, 0x007FFFFF])
    rng = np.random.default_rng(seed)
    rand = rng.integers(0, 1 << 31, n_random, dtype=np.int64)
    # random values inside the narrow types' ranges: |x| in [2^-12, 2^17)
    rand_small = rng.integers(0x39800000, 0x48000000, n_random, dtype=np.int64)
    mags = np.concatenate([near, sub, special, rand, rand_small])
    mags = mags[(mags >= 0) & (mags < (1 << 31))]
    bits_ = np.concatenate([mags, mags | (1 << 31)]).astype(np.uint32)
    return np.unique(bits_).view(np.float32)


def _f64_probes(n_random: int, seed: int) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        x32 = probe_values("f32", n_random=n_random, seed=seed).astype(np.float64)
    parts = [x32]
    for t in FLOAT_TYPES.values():
        v = np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype).astype(np.float64)
        v = np.unique(np.abs(v[np.isfinite(v)]))
        m = (v[:-1] + v[1:]) / 2
        parts += [np.nextafter(m, 0), np.nextafter(m, np.inf), m * (1 + 2.0 ** -30),
                  m * (1 - 2.0 ** -30)]
    rng = np.random.default_rng(seed + 1)
    parts += [np.ldexp(rng.random(n_random), rng.integers(-1080, 1024, n_random)),
              np.ldexp(1.0, np.arange(-1074, 1024)),
              np.array([5e-324, 2.2250738585072014e-308, np.inf])]
    x = np.concatenate(parts)
    return np.unique(np.concatenate([x, -x]).view(np.uint64)).view(np.float64)
