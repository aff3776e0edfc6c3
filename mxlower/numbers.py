"""Number specs, scale specs and datatypes of docs/semantics.md section 10 (TensorCast's grammar;
where TensorCast's results differ from mxlower's: docs/compat.md).

A **number spec** says how one value is coded; a **scale spec** how values share scales; a
**datatype** pairs them.  Everything here is parsed from the string codes numerics
researchers write, and validated with an error that says what is wrong::

    >>> from mxlower import numbers
    >>> n = numbers.number("e5m6")
    >>> n.bits, n.emax, n.max
    (12, 15, 65024.0)
    >>> numbers.number("float8_e4m3fnuz").code          # the ml_dtypes name, bias 8
    'e4m3b8fnuz'
    >>> s = numbers.scale("e8m0_t32")                    # power-of-two scale per 32 values
    >>> s.kind, s.tile, s.dims
    ('tile', (32,), (-1,))
    >>> numbers.datatype("int4", "e8m0_t32").code
    'int4:e8m0_t32'

Number specs (section 10.1):

* ``eXmY[bZ][ieee|fn|fnuz|fo]`` -- a signed float with X exponent bits (1..8), Y mantissa bits
  (0..23), bias Z (default 2^(X-1)-1), an implicit leading bit and subnormals.  ``ieee`` (the
  default) keeps the top exponent code for Inf and NaN; ``fn`` has no Inf and one NaN code per
  sign (all ones, as f8E4M3FN); ``fnuz`` has no Inf and no -0: the code of -0 is the only NaN
  (as f8E4M3FNUZ); ``fo`` is finite only (every code a number, as f6E2M3FN and f4E2M1FN).
* ``eXm0`` with no suffix -- an *exponent type* (4 <= X <= 8): unsigned powers of two, code c
  meaning 2^(c - bias), all ones NaN (e8m0 is f8E8M0FNU).
* ``intK`` (2..32 bits, symmetric: -(2^(K-1)) is never produced) and ``uintK`` (1..32 bits).
* Names: MLIR spellings and NumPy / ml_dtypes / torch dtype names of every type in
  :mod:`mxlower.types` (``f8E4M3FN``, ``float8_e4m3fnuz``, ``torch.bfloat16``, ``float32``,
  ...), and any code behind a ``torch.`` / ``float8_`` / ``float6_`` / ``float4_`` prefix.  Two
  names have a bias that is not the default: ``e4m3fnuz`` (bias 8) and ``e5m2fnuz`` (bias 16);
  the f6/f4 names with "fn" (``float6_e2m3fn``, ``f4E2M1FN``) are finite-only (``fo``) types,
  while the bare code ``e2m1fn`` follows the grammar.

Every spec's values must lie within f32's (the model computes in f32): its largest value at
most f32's, its smallest subnormal at least 2^-149.

Scale specs (section 10.3): ``<scale number>[_<zero-point number>][_t<tile>][_s<subtile>o<bits>]
[_g<tensor number>]`` with tile ``t0`` / ``t0dY`` (one scale per channel of dimension Y),
``tXdY`` (1D tiles of X consecutive values along Y) and ``tAxB[dYdZ]`` (2D tiles over
dimensions Y and Z); no tile: one scale for the tensor.  ``_sAoD`` / ``_sAxBoD`` after an
exponent-scale tile: *shared micro-exponents*, subtiles of A (A x B) values each with a D-bit
offset below the tile's scale (MX9 is ``int8:e8m0_t16_s2o1``).  ``_gf32`` adds a tensor
level, one f32 scale for the whole tensor over the tile scales (two-level scaling: nvfp4 with
its global scale is ``e2m1fo:e4m3fn_t16_gf32``; with subtiles, three levels).

The MX formats of section 1 and the other predefined datatypes of section 10.4 are in
:mod:`mxlower.formats` (:data:`mxlower.formats.DATATYPES`), which re-exports :func:`number`,
:func:`scale` and :func:`datatype`.
"""

from __future__ import annotations

import dataclasses
import fractions
import hashlib
import math
import re
from typing import Literal

import numpy as np

from mxlower import types

__all__ = [
    "Datatype",
    "NumberSpec",
    "ROUND_MODES",
    "SCALE_MODES",
    "ScaleSpec",
    "SpecError",
    "LUTS",
    "NF4",
    "NF4_VALUES",
    "datatype",
    "floor_log2",
    "lut_spec",
    "number",
    "of_float_type",
    "scale",
]

#: Element rounding modes (section 10.2).
ROUND_MODES = ("even", "nearest", "zero", "half_down", "stochastic")
#: Exponent-scale selection rules (section 10.3; ``max`` is section 3's ``floor``).
SCALE_MODES = ("max", "midmax", "rceil", "nearest")

Kind = Literal["float", "exp", "int", "uint", "lut"]
Special = Literal["ieee", "fn", "fnuz", "fo"]

_F32_MAX = fractions.Fraction(float(np.finfo(np.float32).max))
_F32_TINY = fractions.Fraction(2) ** -149


class SpecError(ValueError):
    """A number spec, scale spec or datatype that is malformed or not defined."""


def _pow2(k: int) -> fractions.Fraction:
    return fractions.Fraction(2) ** k


# ============================================================================= number specs


@dataclasses.dataclass(frozen=True)
class NumberSpec:
    """One number format.  Build with :func:`number`; the fields are the format's parameters.

    ``kind``: "float" (``eXmY...``), "exp" (exponent type ``eXm0``), "int", "uint" or "lut"
    (a lookup table, :func:`lut_spec`).
    ``exp_bits``/``man_bits``/``bias``/``special`` describe floats and exponent types
    (``special`` is None for the others); ``bits`` is the code width.  ``table`` (lookup
    tables only): the 2^bits values, strictly increasing f32 values, code i meaning
    ``table[i]``; ``name``: a lookup table's code (``nf4``, a caller's name, or
    ``lutK_<digest>``).
    """

    kind: Kind
    bits: int
    exp_bits: int = 0
    man_bits: int = 0
    bias: int = 0
    special: Special | None = None
    table: tuple[float, ...] | None = None
    name: str | None = None

    # ------------------------------------------------------------------ names
    @property
    def code(self) -> str:
        """The canonical code: ``e4m3fn``, ``e5m2``, ``e4m3b8fnuz``, ``e8m0``, ``int4``,
        ``nf4``..."""
        if self.kind == "lut":
            return self.name
        if self.kind in ("int", "uint"):
            return f"{self.kind}{self.bits}"
        base = f"e{self.exp_bits}m{self.man_bits}"
        if self.kind == "exp":
            return base
        # the two names e4m3fnuz / e5m2fnuz mean bias 8 / 16, so a default-bias fnuz code of
        # those shapes must spell its bias out
        named = (self.exp_bits, self.man_bits, self.special) in ((4, 3, "fnuz"), (5, 2, "fnuz"))
        if self.bias != _default_bias(self.exp_bits) or named:
            base += f"b{self.bias}"
        return base + ("" if self.special == "ieee" else self.special)

    def __str__(self) -> str:
        return self.code

    @property
    def mlir(self) -> str | None:
        """The MLIR builtin type of this spec (``f8E4M3FN``, ``f32``, ``i8``...), or None when
        MLIR (as :mod:`mxlower.types` knows it) has none; its codes are then stored as
        :attr:`storage`.  ``intK``/``uintK`` map to ``iK``/``uiK`` for K = 8, 16, 32."""
        if self.kind == "lut":
            return None
        if self.is_integer:
            if self.bits in _INT_WIDTHS:
                return f"{'i' if self.kind == 'int' else 'ui'}{self.bits}"
            return None
        ft = self.float_type
        return ft.mlir if ft.mlir in types.SCALARS else None

    @property
    def storage(self) -> str:
        """The MLIR type its codes live in: :attr:`mlir` when there is one, else the smallest
        unsigned integer type of 8, 16 or 32 bits that holds a code (signed for ints)."""
        m = self.mlir
        if m is not None:
            return m
        w = next(w for w in (8, 16, 32) if w >= self.bits)
        return f"i{w}" if self.kind == "int" else f"ui{w}"

    @property
    def dtype(self) -> np.dtype:
        """The NumPy / ml_dtypes dtype of one stored code (``float8_e4m3fn``, ``uint16``...)."""
        return types.dtype(self.storage)

    # ------------------------------------------------------------------ classification
    @property
    def signed(self) -> bool:
        """Holds negative values (a lookup table: when its first value is negative)."""
        if self.kind == "lut":
            return self.table[0] < 0
        return self.kind in ("float", "int")

    @property
    def is_lut(self) -> bool:
        """A lookup-table spec (:func:`lut_spec`, docs/semantics.md section 10.7)."""
        return self.kind == "lut"

    @property
    def is_float(self) -> bool:
        """A float or an exponent type (coded by :attr:`float_type`)."""
        return self.kind in ("float", "exp")

    @property
    def is_integer(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def has_inf(self) -> bool:
        return self.special == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.kind == "exp" or self.special in ("ieee", "fn", "fnuz")

    @property
    def has_negative_zero(self) -> bool:
        return self.kind == "float" and self.special != "fnuz"

    # ------------------------------------------------------------------ codes
    @property
    def sign_mask(self) -> int:
        return 1 << (self.bits - 1) if self.kind == "float" else 0

    @property
    def max_code(self) -> int:
        """The magnitude code of the largest finite value (the value itself for ints; for a
        lookup table the code of its largest magnitude, the last one on a tie)."""
        if self.kind == "lut":
            return max(range(len(self.table)), key=lambda i: (abs(self.table[i]), i))
        if self.kind == "int":
            return (1 << (self.bits - 1)) - 1
        if self.kind == "uint":
            return (1 << self.bits) - 1
        mag = (1 << (self.bits - (self.kind == "float"))) - 1
        if self.kind == "exp" or self.special == "fn":
            return mag - 1  # all ones is NaN
        if self.special == "ieee":
            return (((1 << self.exp_bits) - 2) << self.man_bits) | ((1 << self.man_bits) - 1)
        return mag  # fnuz, fo: every magnitude is a number

    @property
    def nan_code(self) -> int | None:
        """The code a NaN becomes (positive sign), None when the spec has no NaN."""
        if self.kind == "exp":
            return (1 << self.bits) - 1
        if self.special == "fn":
            return (1 << (self.bits - 1)) - 1
        if self.special == "fnuz":
            return 1 << (self.bits - 1)
        if self.special == "ieee":  # the quiet NaN: all-ones exponent, top mantissa bit
            return (((1 << self.exp_bits) - 1) << self.man_bits) | (1 << (self.man_bits - 1))
        return None

    @property
    def lut_nan_code(self) -> int:
        """The code a NaN becomes in a lookup table (section 10.7): the value of smallest
        magnitude (0 when the table has 0; the positive one of two)."""
        t = self.table
        return min(range(len(t)), key=lambda k: (abs(t[k]), -t[k]))

    @property
    def param(self) -> str | NumberSpec:
        """The spec as a hashable parameter that rebuilds it (a JAX primitive's, a kernel
        spec's): its code, or for a custom lookup table (``lutK_<digest>`` or a caller's name,
        which :func:`number` cannot read back) the frozen spec itself."""
        return self if self.kind == "lut" and self.code not in LUTS else self.code

    @property
    def inf_code(self) -> int | None:
        return ((1 << self.exp_bits) - 1) << self.man_bits if self.special == "ieee" else None

    # ------------------------------------------------------------------ values (exact)
    def value_of(self, code: int) -> fractions.Fraction | float:
        """The exact value of a code (a Fraction; NaN, +-Inf and +-0 as floats)."""
        code &= (1 << self.bits) - 1
        if self.kind == "lut":
            return fractions.Fraction(self.table[code])
        if self.kind == "int":
            return fractions.Fraction(code - (1 << self.bits) if code >> (self.bits - 1)
                                      else code)
        if self.kind == "uint":
            return fractions.Fraction(code)
        if self.kind == "exp":
            return math.nan if code == self.nan_code else _pow2(code - self.bias)
        sign = -1 if code & self.sign_mask else 1
        mag = code & (self.sign_mask - 1)
        if self.special == "fnuz" and code == self.sign_mask:
            return math.nan
        if self.special == "fn" and mag == self.sign_mask - 1:
            return math.nan
        if self.special == "ieee" and mag >= self.inf_code:
            return math.nan if mag > self.inf_code else sign * math.inf
        e, m = mag >> self.man_bits, mag & ((1 << self.man_bits) - 1)
        if mag == 0:
            return math.copysign(0.0, sign)  # a Fraction has no -0
        if e == 0:
            return sign * m * _pow2(1 - self.bias - self.man_bits)
        return sign * (m + (1 << self.man_bits)) * _pow2(e - self.bias - self.man_bits)

    @property
    def max_exact(self) -> fractions.Fraction:
        """The largest finite value, exactly (a lookup table's largest magnitude)."""
        if self.kind == "lut":
            return abs(fractions.Fraction(self.table[self.max_code]))
        v = self.value_of(self.max_code)
        return fractions.Fraction(v) if not isinstance(v, float) or math.isfinite(v) else \
            fractions.Fraction(0)

    @property
    def max(self) -> float:
        """The largest finite value (integer view for ints: 127 for int8)."""
        return float(self.max_exact)

    @property
    def min(self) -> float:
        """The most negative value (symmetric ints: -(2^(K-1)-1)); for unsigned specs the
        smallest value (0 for uints, 2^emin for exponent types)."""
        if self.kind == "lut":
            return self.table[0]
        if self.signed:
            return -self.max
        return float(self.smallest_normal) if self.kind == "exp" else 0.0

    @property
    def emax(self) -> int:
        """floor(log2(max))."""
        return floor_log2(self.max_exact)

    @property
    def emin(self) -> int:
        """The exponent of the smallest normal value (0 for ints; for a lookup table that of
        its smallest non-zero magnitude)."""
        if self.kind == "lut":
            return floor_log2(min(abs(fractions.Fraction(t)) for t in self.table if t != 0))
        if self.is_integer:
            return 0
        return -self.bias if self.kind == "exp" else 1 - self.bias

    @property
    def smallest_normal(self) -> float:
        if self.kind == "lut":
            return self.smallest_subnormal
        return float(_pow2(self.emin))

    @property
    def smallest_subnormal(self) -> float:
        """The spacing below the smallest normal (the smallest value of exponent types; a
        lookup table's smallest non-zero magnitude)."""
        if self.kind == "lut":
            return min(abs(t) for t in self.table if t != 0)
        if self.is_integer:
            return 1.0
        return float(_pow2(self.emin - (self.man_bits if self.kind == "float" else 0)))

    @property
    def eps(self) -> float:
        """The spacing just above 1 relative to 1: 2^-Y (1 for exponent types and ints);
        SpecError for a lookup table, which has no uniform spacing."""
        if self.kind == "lut":
            raise SpecError(f"the lookup table '{self.code}' has no eps (no uniform spacing)")
        return float(_pow2(-self.man_bits)) if self.kind == "float" else 1.0

    @property
    def midmax(self) -> float:
        """(max + 2^(emax+1)) / 2: the ``midmax`` scale rule's threshold."""
        return float((self.max_exact + _pow2(self.emax + 1)) / 2)

    # ------------------------------------------------------------------ the scaled view
    @property
    def fixed_point(self) -> bool:
        """A scaled ``intK``: fixed point with K-2 fraction bits (mxint8)."""
        return self.kind == "int"

    @property
    def scaled_max_exact(self) -> fractions.Fraction:
        """The largest value as scaled data: ``intK`` reads as fixed point with K-2 fraction
        bits (so int8's is 127/64 and its emax 0); other specs as they are."""
        if self.kind == "int":
            return self.max_exact * _pow2(2 - self.bits)
        return self.max_exact

    @property
    def scaled_emax(self) -> int:
        return floor_log2(self.scaled_max_exact)

    @property
    def scaled_midmax_exact(self) -> fractions.Fraction:
        return (self.scaled_max_exact + _pow2(self.scaled_emax + 1)) / 2

    # ------------------------------------------------------------------ codec description
    @property
    def float_type(self) -> types.FloatType:
        """The codec description (:class:`mxlower.types.FloatType`) of a float or exponent
        type: the registered row when MLIR has the type, else one made for the spec (named by
        its code, codes stored as :attr:`storage`)."""
        if not self.is_float:
            what = "a lookup-table" if self.kind == "lut" else "an integer"
            raise SpecError(f"'{self.code}' is {what} spec; it has no float codec")
        if self.kind == "exp":
            special, overflow, subnormals = "fnu", "nan", False
        else:
            special = {"ieee": "ieee", "fn": "fn", "fnuz": "fnuz", "fo": "none"}[self.special]
            overflow = {"ieee": "inf", "fn": "nan", "fnuz": "nan", "fo": "saturate"}[
                self.special]
            subnormals = True
        nan = self.nan_code
        if nan is None:  # fo: every NaN converts to the -0 code (docs/semantics.md 2.3)
            nan = self.sign_mask
        elif self.special in ("fn", "ieee"):
            nan &= self.sign_mask - 1  # the magnitude; the sign is the input's
        made = types.FloatType(self.code, "", self.bits, self.exp_bits, self.man_bits,
                               self.bias, self.kind == "float", special, overflow, nan,
                               subnormals)
        for t in types.SCALARS.values():
            if t.codec is not None and _same_codec(t.codec, made):
                return t.codec
        return made

_INT_WIDTHS = (8, 16, 32)


def _same_codec(a: types.FloatType, b: types.FloatType) -> bool:
    return (a.bits, a.exp_bits, a.man_bits, a.bias, a.signed, a.special) == \
        (b.bits, b.exp_bits, b.man_bits, b.bias, b.signed, b.special)


def _default_bias(exp_bits: int) -> int:
    return (1 << (exp_bits - 1)) - 1


def floor_log2(v: fractions.Fraction) -> int:
    """floor(log2(v)) of a positive rational, exactly."""
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if _pow2(e) <= v else e - 1


_CODE = re.compile(r"e(?P<x>\d+)m(?P<y>\d+)(?:b(?P<b>-?\d+))?(?P<s>ieee|fnuz|fnu|fn|fo)?")
_INT = re.compile(r"(?P<u>u?)int(?P<k>\d+)")
#: the two names whose bias is not the default (torch / ml_dtypes)
_NAMED_BIAS = {"e4m3fnuz": "e4m3b8fnuz", "e5m2fnuz": "e5m2b16fnuz"}


def number(code: str | NumberSpec) -> NumberSpec:
    """The :class:`NumberSpec` of a code or a name (see the module docstring); SpecError
    saying what is wrong otherwise."""
    if isinstance(code, NumberSpec):
        return code
    if not isinstance(code, str):
        raise SpecError(f"a number spec is a string such as 'e4m3fn' or 'int8', got {code!r}")
    text = _short(code.strip(), "number")
    if not text:
        raise SpecError("empty number spec")
    if text in LUTS:
        return LUTS[text]
    if _LUT_DIGEST.fullmatch(text):
        raise SpecError(f"'{text}' names a custom lookup-table spec by the digest of its table; "
                        "the code cannot rebuild the table: pass the NumberSpec itself "
                        "(numbers.lut_spec(values))")
    s = text[len("torch."):] if text.startswith("torch.") else text
    spec = _from_type_table(s)
    if spec is not None:
        return spec
    finite_fn = False
    for prefix in ("float8_", "float6_", "float4_"):
        if s.startswith(prefix):
            s = s[len(prefix):]
            # ml_dtypes' float6_/float4_ types say "fn" for finite-only ("fo" here)
            finite_fn = prefix != "float8_"
            break
    s = _NAMED_BIAS.get(s, s)
    m = _CODE.fullmatch(s)
    if m:
        return _float_spec(text, m, finite_fn)
    m = _INT.fullmatch(s)
    if m:
        kind = "uint" if m["u"] else "int"
        lo = 2 if kind == "int" else 1
        return NumberSpec(kind, _bounded(f"'{text}'", m["k"], f"{kind}K needs {lo} <= K <= 32",
                                         lo, 32))
    raise SpecError(f"unknown number spec '{text}': expected a code eXmY[bZ][ieee|fn|fnuz|fo] "
                    "(e.g. e4m3fn, e5m6, e4m3b11fnuz), an exponent type eXm0 (e8m0), intK, "
                    "uintK, a lookup table (nf4), or a type name (f8E4M3FN, float8_e5m2, "
                    "bfloat16, ...)")


# ============================================================================= lookup tables

#: QLoRA's NormalFloat4 (Dettmers et al. 2023, "QLoRA: Efficient Finetuning of Quantized
#: LLMs", appendix E; bitsandbytes' ``get_4bit_type("nf4")``): 16 values, each an f32
NF4_VALUES = (
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
)

#: the largest lookup table: 2^MAX_LUT_BITS values
MAX_LUT_BITS = 8

_LUT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_LUT_DIGEST = re.compile(r"lut[1-8]_[0-9a-f]{12}")


def _lut_table(values) -> tuple[float, ...]:
    """The validated table of :func:`lut_spec` (SpecError saying what is wrong)."""
    if isinstance(values, (str, bytes)):
        raise SpecError(f"a lookup table is a sequence of numbers, got {values!r:.40}")
    try:
        vals = list(values)
    except TypeError:
        raise SpecError(f"a lookup table is a sequence of numbers, got {values!r:.40}") from None
    n = len(vals)
    if n > 1 << MAX_LUT_BITS:
        raise SpecError(f"a lookup table has at most {1 << MAX_LUT_BITS} values (codes of at "
                        f"most {MAX_LUT_BITS} bits), got {n}")
    if n < 2 or n & (n - 1):
        raise SpecError(f"a lookup table has 2^K values (K = 1..{MAX_LUT_BITS}: every K-bit "
                        f"code has a value), got {n}")
    out = []
    for i, v in enumerate(vals):
        if isinstance(v, (bool, np.bool_)) or not isinstance(
                v, (int, float, fractions.Fraction, np.integer, np.floating)):
            raise SpecError(f"lookup table value #{i} is not a number: {v!r:.40}")
        try:
            f = float(v)
        except OverflowError:
            raise SpecError(f"lookup table value #{i} is not finite") from None
        if not math.isfinite(f):
            raise SpecError(f"lookup table value #{i} is not finite: {f!r}")
        with np.errstate(over="ignore"):
            f32 = float(np.float32(f))
        if fractions.Fraction(f) != fractions.Fraction(v) or f32 != f:
            raise SpecError(f"lookup table value #{i} ({v!r:.40}) is not exactly an f32 value "
                            f"(the model computes in f32); the nearest f32 is {f32!r}")
        out.append(f + 0.0)  # -0.0 is 0
    for i in range(n - 1):
        if not out[i] < out[i + 1]:
            what = "duplicate" if out[i] == out[i + 1] else "unsorted"
            raise SpecError(f"a lookup table is strictly increasing: values #{i} and #{i + 1} "
                            f"({out[i]!r}, {out[i + 1]!r}) are {what}")
    return tuple(out)


def lut_spec(values, name: str | None = None) -> NumberSpec:
    """The lookup-table number spec of ``values`` (docs/semantics.md section 10.7): 2^K values
    (K = 1..8), strictly increasing, finite, each exactly an f32; code i means ``values[i]``.

    Its code is ``name`` when given (letters and digits, starting with a letter, and no code
    :func:`number` reads: not ``e4m3``, ``int8``, ``nf4``...), else ``lutK_<digest>`` (the first
    12 hex digits of the SHA-256 of the table's f32 bytes, little-endian), which
    :func:`number` does not read back: pass the spec itself.  The table of a predefined spec
    without a name gives that spec (``lut_spec(NF4_VALUES)`` is ``number("nf4")``)."""
    table = _lut_table(values)
    K = len(table).bit_length() - 1
    if name is None:
        for spec in LUTS.values():
            if spec.table == table:
                return spec
        digest = hashlib.sha256(np.asarray(table, "<f4").tobytes()).hexdigest()[:12]
        name = f"lut{K}_{digest}"
    else:
        if not isinstance(name, str) or not _LUT_NAME.fullmatch(name) or \
                len(name) > MAX_SPEC_LENGTH:
            raise SpecError(f"a lookup table's name is letters and digits starting with a "
                            f"letter (at most {MAX_SPEC_LENGTH} characters), got {name!r:.40}")
        try:
            number(name)
        except SpecError:
            pass
        else:
            raise SpecError(f"'{name}' is already a number spec; name the lookup table "
                            "otherwise")
    return NumberSpec("lut", K, table=table, name=name)


#: the predefined lookup tables, by code
LUTS: dict[str, NumberSpec] = {}
NF4 = LUTS.setdefault("nf4", NumberSpec("lut", 4, table=_lut_table(NF4_VALUES), name="nf4"))


#: the longest spec text read (the longest valid one has about 40 characters)
MAX_SPEC_LENGTH = 100


def _short(text: str, what: str) -> str:
    if len(text) > MAX_SPEC_LENGTH:
        raise SpecError(f"a {what} spec has at most {MAX_SPEC_LENGTH} characters, got "
                        f"{len(text)} ('{text[:24]}...')")
    return text


def _from_type_table(name: str) -> NumberSpec | None:
    """The spec of a float type in :mod:`mxlower.types`, by MLIR spelling or dtype name."""
    try:
        t = types.scalar(name)
    except KeyError:
        return None
    c = t.codec
    if c is None or c.mlir == "f64":
        return None
    return of_float_type(c)


def of_float_type(c: types.FloatType) -> NumberSpec:
    """The number spec of a codec description (the inverse of :attr:`NumberSpec.float_type`;
    f64 has none: SpecError)."""
    if c.exp_bits > 8:
        raise SpecError(f"{c.mlir} has {c.exp_bits} exponent bits; a number spec has at most 8")
    if c.special == "fnu":
        return NumberSpec("exp", c.bits, c.exp_bits, 0, c.bias)
    special = {"ieee": "ieee", "fn": "fn", "fnuz": "fnuz", "none": "fo"}[c.special]
    return NumberSpec("float", c.bits, c.exp_bits, c.man_bits, c.bias, special)


#: the largest |bias| a float spec may name: any larger one puts its values outside f32's
#: (checked before any arithmetic with it, so a huge bias costs nothing)
MAX_BIAS = 1024


def _bounded(where: str, digits: str, rule: str, lo: int, hi: int) -> int:
    """The integer ``digits`` if ``lo <= it <= hi``, else SpecError ``where: rule, got ...``;
    its size is judged from its digit count first, so a number of any length costs time
    proportional to its text only."""
    magnitude = digits.lstrip("-").lstrip("0")
    if len(magnitude) > len(str(max(abs(lo), abs(hi)))):
        raise SpecError(f"{where}: {rule}, got {digits[:12]}{'...' if len(digits) > 12 else ''}"
                        f" ({len(magnitude)} digits)")
    v = int(digits)
    if not lo <= v <= hi:
        raise SpecError(f"{where}: {rule}, got {v}")
    return v


def _float_spec(text: str, m: re.Match, finite_fn: bool) -> NumberSpec:
    x = _bounded(f"'{text}'", m["x"], "exponent bits must be 1..8", 1, 8)
    y = _bounded(f"'{text}'", m["y"], "mantissa bits must be 0..23", 0, 23)
    suffix = m["s"]
    if suffix == "fnu" or (y == 0 and suffix is None):
        if y != 0:
            raise SpecError(f"'{text}': 'fnu' names an exponent type, which has no mantissa")
        if m["b"] is not None:
            raise SpecError(f"'{text}': an exponent type has the default bias")
        if not 4 <= x <= 8:
            raise SpecError(f"'{text}': an exponent type eXm0 needs 4..8 exponent bits, got {x}")
        return _checked(text, NumberSpec("exp", x, x, 0, _default_bias(x)))
    special = suffix or "ieee"
    if finite_fn and special == "fn":
        special = "fo"
    bias = (_default_bias(x) if m["b"] is None
            else _bounded(f"'{text}'", m["b"], f"the bias must be {-MAX_BIAS}..{MAX_BIAS}",
                      -MAX_BIAS, MAX_BIAS))
    if special == "ieee":
        if x < 2:
            raise SpecError(f"'{text}': an ieee spec needs at least 2 exponent bits (the top "
                            "exponent code is Inf/NaN); use fn, fnuz or fo")
        if y == 0:
            raise SpecError(f"'{text}': an ieee spec needs a mantissa bit to code NaN; use fn, "
                            "fnuz or fo")
    if special == "fn" and x == 1 and y == 0:
        raise SpecError(f"'{text}': e1m0fn has no finite non-zero value")
    return _checked(text, NumberSpec("float", 1 + x + y, x, y, bias, special))


def _checked(text: str, spec: NumberSpec) -> NumberSpec:
    mx = spec.max_exact
    if mx <= 0:
        raise SpecError(f"'{text}' has no positive finite value")
    if mx > _F32_MAX:
        raise SpecError(f"'{text}': its largest value 2^{floor_log2(mx)} exceeds f32's (the "
                        "model computes in f32); use a larger bias")
    if fractions.Fraction(spec.smallest_subnormal) < _F32_TINY:
        raise SpecError(f"'{text}': its smallest value {spec.smallest_subnormal:g} is below "
                        "f32's smallest subnormal 2^-149 (the model computes in f32); use a "
                        "smaller bias")
    return spec


# ============================================================================= scale specs

ScaleKind = Literal["tensor", "channel", "tile", "tile2d"]


@dataclasses.dataclass(frozen=True)
class ScaleSpec:
    """How values share scales.  Build with :func:`scale`.

    ``number``: the scale's spec (an exponent type: power-of-two scales; or a float);
    ``zero_point``: the zero point's spec (asymmetric ``uintK`` data), or None.
    ``kind``: "tensor" (one scale), "channel" (one per index of the other dimensions, the tile
    spanning all of ``dims[0]``), "tile" (``tile[0]`` consecutive values along ``dims[0]``) or
    "tile2d" (``tile[0]`` x ``tile[1]`` over ``dims[0]``, ``dims[1]``).  Dimensions may be
    negative (counted from the last).
    ``tensor``: two-level scaling: the spec of one tensor scale over the tile scales (the
    caller's value, e.g. nvfp4's global scale; only f32 so far), or None.
    ``subtile`` / ``offset_bits``: shared micro-exponents (section 10.3): each subtile of
    ``subtile`` values (one extent per tile dimension, dividing the tile) has an unsigned
    ``offset_bits``-bit offset o, its scale being the tile's exponent scale 2^E times 2^-o;
    ``()`` and 0 without subtiles.
    """

    number: NumberSpec
    zero_point: NumberSpec | None = None
    kind: ScaleKind = "tensor"
    tile: tuple[int, ...] = ()
    dims: tuple[int, ...] = ()
    tensor: NumberSpec | None = None
    subtile: tuple[int, ...] = ()
    offset_bits: int = 0

    @property
    def code(self) -> str:
        parts = [self.number.code]
        if self.zero_point is not None:
            parts.append(self.zero_point.code)
        if self.kind == "channel":
            parts.append("t0" + ("" if self.dims == (-1,) else f"d{self.dims[0]}"))
        elif self.kind == "tile":
            parts.append(f"t{self.tile[0]}" + ("" if self.dims == (-1,) else f"d{self.dims[0]}"))
        elif self.kind == "tile2d":
            dims = "" if self.dims == (-2, -1) else f"d{self.dims[0]}d{self.dims[1]}"
            parts.append(f"t{self.tile[0]}x{self.tile[1]}{dims}")
        if self.subtile:
            parts.append("s" + "x".join(map(str, self.subtile)) + f"o{self.offset_bits}")
        if self.tensor is not None:
            parts.append(f"g{self.tensor.code}")
        return "_".join(parts)

    @property
    def tile_level(self) -> ScaleSpec:
        """The spec without its tensor level (:attr:`tensor`): the tile scales alone."""
        return dataclasses.replace(self, tensor=None) if self.tensor is not None else self

    def __str__(self) -> str:
        return self.code

    @property
    def offset_number(self) -> NumberSpec | None:
        """The spec of the subtile offsets (``uint<offset_bits>``), None without subtiles."""
        return NumberSpec("uint", self.offset_bits) if self.subtile else None

    @property
    def max_offset(self) -> int:
        """The largest subtile offset, 2^offset_bits - 1 (0 without subtiles)."""
        return (1 << self.offset_bits) - 1 if self.subtile else 0

    @property
    def subtiles_as_tiles(self) -> ScaleSpec:
        """The subtiles as tiles of their own (the same scale number and dimensions, no
        tensor level): the spec whose tiles' exponents are the subtiles' E_s."""
        return dataclasses.replace(self, tile=self.subtile, subtile=(), offset_bits=0,
                                   tensor=None)

    @property
    def tile_scale(self) -> ScaleSpec:
        """The spec without its subtiles (:attr:`subtile`): the tile scales alone."""
        return dataclasses.replace(self, subtile=(), offset_bits=0) if self.subtile else self

    def subtile_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of one subtile of a tensor of ``shape`` (its extent along the tile's
        dimensions, 1 along the others); SpecError as :meth:`tile_shape`, or when the spec has
        no subtiles."""
        if not self.subtile:
            raise SpecError(f"scale '{self.code}' has no subtiles")
        t = self.tile_shape(shape)
        out = [1] * len(t)
        for d, k in zip(self.normalized_dims(len(t)), self.subtile):
            out[d] = k
        return tuple(out)

    def offsets_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the subtile offsets for data of ``shape``: each dimension divided by
        the subtile's extent along it."""
        return tuple(s // k for s, k in zip(shape, self.subtile_shape(shape)))

    @property
    def power_of_two(self) -> bool:
        """Exponent-type scales (chosen by a scale mode) rather than float scales."""
        return self.number.kind == "exp"

    def normalized_dims(self, rank: int) -> tuple[int, ...]:
        """:attr:`dims` as non-negative dimensions of a rank-``rank`` tensor; SpecError when
        one is out of range."""
        out = []
        for d in self.dims:
            if not -rank <= d < rank:
                raise SpecError(f"scale '{self.code}': dimension {d} is out of range for rank "
                                f"{rank}")
            out.append(d % rank)
        if len(set(out)) != len(out):
            raise SpecError(f"scale '{self.code}': its two tile dimensions are the same "
                            f"dimension of a rank-{rank} tensor")
        return tuple(out)

    def tile_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of one tile of a tensor of ``shape``: SpecError when a tile size does not
        divide its dimension (values are never padded)."""
        shape = tuple(shape)
        if self.kind == "tensor":
            return shape
        dims = self.normalized_dims(len(shape))
        out = [1] * len(shape)
        if self.kind == "channel":
            out[dims[0]] = shape[dims[0]]
            return tuple(out)
        for d, t in zip(dims, self.tile):
            if shape[d] % t:
                raise SpecError(f"scale '{self.code}': tile size {t} does not divide dimension "
                                f"{d} of size {shape[d]}")
            out[d] = t
        return tuple(out)

    def scales_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the scale tensor for data of ``shape``: each dimension divided by the
        tile's extent along it (so a tensor scale has shape (1, ..., 1))."""
        t = self.tile_shape(shape)
        return tuple(s // k if k else s for s, k in zip(shape, t))


_TILE = re.compile(r"_t(?P<a>\d+)(?:x(?P<b>\d+))?(?P<dims>(?:d-?\d+)*)$")
_SUBTILE = re.compile(r"_s(?P<a>\d+)(?:x(?P<b>\d+))?o(?P<o>\d+)$")
#: the widest subtile offset (bits)
MAX_OFFSET_BITS = 8


def scale(code: str | ScaleSpec) -> ScaleSpec:
    """The :class:`ScaleSpec` of a code (see the module docstring); SpecError otherwise."""
    if isinstance(code, ScaleSpec):
        return code
    if not isinstance(code, str):
        raise SpecError(f"a scale spec is a string such as 'e8m0_t32', got {code!r}")
    text = _short(code.strip(), "scale")
    body, tensor = text, None
    g = _TENSOR.search(text)
    if g:
        body, tensor = text[:g.start()], _tensor_spec(text, g["g"])
    sub = _SUBTILE.search(body)
    if sub:
        body = body[:sub.start()]
    m = _TILE.search(body)
    head = body[:m.start()] if m else body
    if not head:
        raise SpecError(f"scale spec '{text}' names no scale number spec")
    num, zp = _scale_numbers(text, head)
    kind, tile, dims = "tensor", (), ()
    if m:
        a = _bounded(f"scale '{text}'", m["a"], _TILE_RULE, 0, MAX_TILE)
        dims = tuple(_bounded(f"scale '{text}'", d, f"a tile dimension must be "
                              f"{-MAX_TILE_DIM}..{MAX_TILE_DIM - 1}", -MAX_TILE_DIM,
                              MAX_TILE_DIM - 1) for d in re.findall(r"d(-?\d+)", m["dims"]))
        if m["b"] is None:
            if a == 0:
                kind, tile = "channel", ()
            else:
                kind, tile = "tile", (_tile_size(text, a),)
            if len(dims) > 1:
                raise SpecError(f"scale '{text}': a 1D tile takes one dimension (dY), got "
                                f"{len(dims)}")
            dims = dims or (-1,)
        else:
            b = _bounded(f"scale '{text}'", m["b"], _TILE_RULE, 0, MAX_TILE)
            kind, tile = "tile2d", (_tile_size(text, a), _tile_size(text, b))
            if len(dims) not in (0, 2):
                raise SpecError(f"scale '{text}': a 2D tile takes two dimensions (dYdZ) or "
                                f"none, got {len(dims)}")
            dims = dims or (-2, -1)
            if dims[0] == dims[1]:
                raise SpecError(f"scale '{text}': the two tile dimensions must differ")
    if tensor is not None:
        if kind == "tensor":
            raise SpecError(f"scale '{text}': a tensor scale ('_g...') goes over tile or "
                            "channel scales (give a tile, e.g. 'e4m3fn_t16_gf32')")
        if zp is not None:
            raise SpecError(f"scale '{text}': a tensor scale ('_g...') does not go with a "
                            "zero point")
    subtile, offset_bits = _subtile(text, sub, num, kind, tile) if sub else ((), 0)
    return ScaleSpec(num, zp, kind, tile, dims, tensor, subtile, offset_bits)


def _subtile(text: str, m: re.Match, num: NumberSpec, kind: str,
             tile: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """The subtile part ``_sA[xB]oD`` of a scale spec, checked against its tile."""
    if kind not in ("tile", "tile2d"):
        raise SpecError(f"scale '{text}': subtiles ('_s...') divide a tile; give a 1D or 2D "
                        f"tile before them (e.g. 'e8m0_t16_s2o1')")
    if num.kind != "exp":
        raise SpecError(f"scale '{text}': subtile offsets are powers of two below an exponent "
                        f"scale (e8m0, ...), not the float scale {num.code}")
    sizes = [m["a"]] + ([m["b"]] if m["b"] is not None else [])
    if len(sizes) != len(tile):
        raise SpecError(f"scale '{text}': a {len(tile)}D tile takes {len(tile)}D subtiles "
                        f"({'sA' if len(tile) == 1 else 'sAxB'}), got {len(sizes)}D")
    sub = []
    for digits, t in zip(sizes, tile):
        k = _bounded(f"scale '{text}'", digits, _SUBTILE_RULE, 1, MAX_TILE)
        if k & (k - 1) or k > t:
            raise SpecError(f"scale '{text}': {_SUBTILE_RULE}, got {k} for a tile of {t}")
        sub.append(k)
    if tuple(sub) == tuple(tile):
        raise SpecError(f"scale '{text}': the subtile is the whole tile; a subtile is smaller")
    o = _bounded(f"scale '{text}'", m["o"], f"a subtile offset has 1 to {MAX_OFFSET_BITS} bits",
                 1, MAX_OFFSET_BITS)
    return tuple(sub), o


_SUBTILE_RULE = "a subtile size is a power of two that divides the tile (1 up to the tile)"


_TENSOR = re.compile(r"_g(?P<g>[A-Za-z0-9.]+)$")


def _tensor_spec(text: str, code: str) -> NumberSpec:
    """The tensor level of a two-level scale spec: f32 (the only one defined so far)."""
    try:
        n = number(code)
    except SpecError as e:
        raise SpecError(f"scale '{text}': its tensor scale: {e}") from None
    if n.code != "e8m23":
        raise SpecError(f"scale '{text}': a tensor scale is f32 (float32), got {n.code}")
    return n


#: the largest tile size and the largest |dimension| a scale spec may name
MAX_TILE, MAX_TILE_DIM = 1024, 1024


_TILE_RULE = f"a tile size must be a power of two from 2 to {MAX_TILE}"


def _tile_size(text: str, n: int) -> int:
    if n < 2 or n & (n - 1):
        raise SpecError(f"scale '{text}': {_TILE_RULE}, got {n}")
    return n


def _scale_numbers(text: str, head: str) -> tuple[NumberSpec, NumberSpec | None]:
    """The scale spec and zero-point spec in ``head`` (names may contain '_' themselves)."""
    try:
        num, zp = number(head), None
    except SpecError as first:
        found = None
        for i, ch in enumerate(head):
            if ch != "_":
                continue
            try:
                found = (number(head[:i]), number(head[i + 1:]))
                break
            except SpecError:
                continue
        if found is None:
            raise SpecError(f"scale spec '{text}': {first}") from None
        num, zp = found
    if num.is_integer or num.is_lut:
        raise SpecError(f"scale spec '{text}': a scale is an exponent type (e8m0) or a float "
                        f"(float32, e4m3fn, ...), not {num.code}")
    if num.kind == "float" and not num.has_nan:
        raise SpecError(f"scale spec '{text}': a float scale needs a NaN code (for NaN/Inf "
                        f"tiles); {num.code} is finite-only")
    if zp is not None and num.kind == "exp":
        raise SpecError(f"scale spec '{text}': a zero point goes with a float scale, not the "
                        f"exponent type {num.code}")
    if zp is not None and zp.kind in ("exp", "lut"):
        raise SpecError(f"scale spec '{text}': a zero point is an intK, uintK or float spec, "
                        f"not the {'exponent type' if zp.kind == 'exp' else 'lookup table'} "
                        f"{zp.code}")
    return num, zp


# ============================================================================= datatypes


@dataclasses.dataclass(frozen=True)
class Datatype:
    """A number spec with an optional scale spec (section 10.4).  Build with :func:`datatype`."""

    number: NumberSpec
    scale: ScaleSpec | None = None
    name: str | None = None

    @property
    def code(self) -> str:
        """``number`` or ``number:scale`` (the name, if any, is not part of it)."""
        return self.number.code + (f":{self.scale.code}" if self.scale else "")

    def __str__(self) -> str:
        return self.name or self.code

    @property
    def two_level(self) -> bool:
        """Whether the scale spec has a tensor level (``_gf32``): a caller-given g."""
        return self.scale is not None and self.scale.tensor is not None


def datatype(number: str | NumberSpec, scale: str | ScaleSpec | None = None,  # noqa: A002
             name: str | None = None) -> Datatype:
    """A validated :class:`Datatype`: SpecError for the combinations section 10.3 does not
    define (uint data without a zero point or with an exponent scale, int or float data with
    a zero point, a zero point that cannot hold every zero point of the data, scaled exponent
    types)."""
    n = _number(number)
    s = _scale(scale) if scale is not None else None
    what = f"datatype {n.code}" + (f":{s.code}" if s else "")
    if s is not None:
        if n.kind == "exp":
            raise SpecError(f"{what}: exponent types cannot be scaled data")
        if n.kind == "uint":
            if s.zero_point is None or s.power_of_two:
                raise SpecError(f"{what}: uint data is asymmetric: it needs a float scale with "
                                "a zero point (e.g. float32_uint8_t0)")
            zp = s.zero_point
            if zp.is_integer and not (zp.min <= 0 and zp.max >= (1 << n.bits) - 1):
                raise SpecError(f"{what}: the zero point {zp.code} cannot hold every zero "
                                f"point 0..{(1 << n.bits) - 1} of {n.code}")
        elif s.zero_point is not None:
            raise SpecError(f"{what}: only uint data takes a zero point ({n.code} is "
                            "symmetric)")
    return Datatype(n, s, name)


# the parsers under other names, for datatype(), whose arguments are named number and scale
_number, _scale = number, scale
