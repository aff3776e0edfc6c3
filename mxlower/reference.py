"""The NumPy + ml_dtypes reference ("oracle") of docs/semantics.md sections 2-6 and 8.

Every numeric test in mxlower compares against this module, so it is written for obvious
correctness first and speed second (everything is vectorized: quantizing 2^22 f32 values takes
well under a second).

Public API
----------
* :func:`convert` -- section 2 plain conversion (``stablehlo.convert`` / ``arith.truncf``).
* :func:`bits`, :func:`from_bits` -- raw codes <-> typed arrays.
* :func:`quantize`, :func:`dequantize` -- sections 3, 4 and 5, computed by the section-10
  model (:func:`encode` / :func:`decode` of :mod:`mxlower.cast_reference`) with the format's
  datatype (:func:`mxlower.formats.block_datatype`: floor is the ``max`` scale mode; nvfp4's
  global scale is the tensor level of two-level scaling, ``e2m1fo:e4m3fn_t16_gf32``): one
  oracle for both vocabularies.
* :func:`scaled_dot` -- section 6.
* :func:`pack`, :func:`unpack` -- section 8 sub-byte packing.
* :func:`cast` (virtual cast), :func:`encode` / :func:`decode` (actual cast), :func:`sparse`,
  :func:`round_codes` -- section 10, any number format, scaling and rounding (implemented in
  :mod:`mxlower.cast_reference`).

Type names are MLIR spellings (``"f32"``, ``"bf16"``, ``"f16"``, ``"f8E4M3FN"``, ``"f8E5M2"``,
``"f8E8M0FNU"``, ``"f6E3M2FN"``, ``"f6E2M3FN"``, ``"f4E2M1FN"``; ``"i8"`` and ``"f64"`` where
they make sense), ml_dtypes names (``"float8_e4m3fn"``) or NumPy dtypes.

What ml_dtypes (0.5/0.6) actually does, checked against an exact round-to-nearest-even oracle
(see test/python/test_reference.py), and how this module uses it
---------------------------------------------------------------------------------------------
* f32 -> every narrow type: correct single RNE rounding, directly from f32 (exhaustive over
  all bf16 and f16 inputs, and over every narrow value, midpoint and their f32 neighbours).
  f16/bf16 sources are exactly representable in f32, so "via f32" is not double rounding.
* f64 -> narrow types and f64 -> bf16 DO double-round: ml_dtypes goes through f32 first (a
  value just above a narrow midpoint rounds to the midpoint in f32, then ties to even).  Section
  2 only covers f32/bf16/f16 sources, but :func:`convert` accepts f64 anyway and rounds it
  correctly by first rounding to f32 with round-to-odd (exact for targets of at most 22
  significand bits, which all of them are), then letting ml_dtypes round once.
* f8E4M3FN: |x| > 464 (the midpoint between 448 and the would-be 480) -> NaN; 464 itself ties
  to 448.  Inf -> NaN with the input's sign.  NaN -> 0x7F/0xFF by sign.
* f8E5M2: |x| >= 61440 -> +-Inf (61440 ties to the even 65536 = Inf).  NaN -> 0x7E/0xFE.
* f4/f6: overflow and +-Inf saturate to +-max.  NaN: ml_dtypes gives the -0 code (0x8/0x20) for
  a *positive* NaN and +0 (0x0) for a *negative* NaN (the sign is inverted, it is not just
  dropped).  Section 2 wants the -0 code for every NaN; :func:`convert` forces it.
* f8E8M0FNU: 0, -0, negatives, +-Inf and NaN -> 0xFF.  Normal f32 inputs: 2^e * m rounds up
  iff m >= 1.5 (ties round up).  Values >= 1.5 * 2^127 overflow to 0xFF (NaN).  f32 values
  <= 2^-127 (including every subnormal up to 2^-127 and the smallest subnormal) give 0x00.
  SURPRISE: f32 *subnormals* strictly between 2^-127 and 2^-126 give 0x01 (2^-126), i.e. they
  round up even when their significand is below 1.5 (1.25 * 2^-127 -> 2^-126).  Code 0x00
  decodes to 2^-127 exactly, 0xFF to NaN.
* f8E4M3FN/f8E5M2 NaN payloads never leak: every NaN input gives the canonical code above.
* Narrow -> f32 decoding is exact (including f8E8M0FNU 0x00 -> 2^-127, an f32 subnormal).
* f32 -> f16 is NumPy's conversion (correct RNE, subnormals included); f32 -> bf16 is ml_dtypes'
  (correct RNE).  Both are checked by the tests.

Resolutions of points the OCP MX specification leaves open
----------------------------------------------
* ``nearest`` scale mode: E is f8E8M0FNU's rounding (section 2.5) of v = amax * 2^-emax_elem
  taken exactly (never a rounded f32 quotient): for v >= 2^-126 the "significand >= 1.5 rounds
  up" rule; below, -126 for 2^-127 < v < 2^-126 (e.g. mxint8 with amax = 1.25 * 2^-127) and
  -127 for v <= 2^-127 (v = 0 included).  An f32 division would round the one quotient
  2^-127 + 2^-150 (amax = 2^(emax_elem - 127) * (1 + 2^-23)) to 2^-127 and give -127; the
  exact v gives -126, as docs/semantics.md section 3 says.  A v that overflows e8m0
  (>= 1.5 * 2^127) gives E = 128, clamped to 127.
* ``rceil``: q = amax / max_elem is one f32 division (RNE); q == 0 (amax == 0 or an underflowed
  quotient) gives E = -127.  The f32 rounding of q is observable only at the E = -127/-126
  boundary (pinned by a test).
* The shared exponent takes at most two distinct values across the three modes
  (floor(log2 amax) - emax_elem or one more), so a block never distinguishes all three; the
  tests pin every pairwise difference.
* In floor mode the top-of-range saturation (amax * 2^-E rounding above max_elem) happens for
  every float format, not only e4m3: whenever amax's significand exceeds max_elem's
  (fp4: x * 2^-E >= 7; e2m3: > 7.75; e3m2/e4m3/e5m2: above max + half an ulp).  mxint8
  clamps 127.5 <= |x| * 2^(6-E) < 128 to +-127.
* Element computation: x * 2^-E is formed exactly in f64, clipped to +-max_elem (clip then
  round == round then saturate, since max_elem is representable) and rounded once to the
  element type (f64 -> f32 round-to-odd -> ml_dtypes RNE; in practice the f32 step is exact
  except for magnitudes far below every element type's smallest subnormal).
* NaN/Inf blocks: scale 0xFF (nvfp4: 0x7F) and element codes all +0 (code 0), as written.
* Near the top of f32 range, rceil and nearest can round amax up to 2^128: e.g. mxfp8_e4m3
  amax = 3.3e38 gets E = 120 and element 256, and dequantize's f32 product 256 * 2^120 is +Inf
  (section 5 says "computed in f32").  floor never does this (its dequantized values stay
  below 2^(floor(log2 amax) + 1)).
* Re-quantizing dequantized values: floor mode is bitwise idempotent; rceil returns the same
  values (its scale may drop by one when every element is <= max_elem / 2); nearest is not
  idempotent (its scale may rise by one and halve subnormal elements).  Pinned by property
  tests (floor, rceil) and hand vectors (all three).
* nvfp4: the global scale g is taken as an f32 and must be finite and non-zero (a negative g is
  accepted; it is just arithmetic).  The NaN/Inf test is applied to y = x / g, the values that
  are actually scaled, so a finite x whose y overflows marks its block NaN.  A block whose
  scale rounds to 0 (amax(y) / 6 < 2^-10) gets element codes +0.  ``scale_mode`` is validated
  but does not apply to nvfp4.
* Dequantize: decode(e) * decode(s) in f32 is exact for every MX format (or overflows to +-Inf,
  e.g. e5m2 57344 with scale 2^127), so rounding to bf16/f16 afterwards is a single rounding.
  nvfp4 with a global scale: ((decode(e) * decode(s)) in f32) * g in f32, then rounded to the
  output type (two roundings for bf16/f16 output: this is the order a lowering computes in).
* Dequantize infers the block size from the shapes when ``block_size`` is None
  (elements.shape[axis] / scales.shape[axis]); a given block size must match the shapes.
* scaled_dot: operands are dequantized to f32 (nvfp4 without a global scale), contracted with
  float64 accumulation (every f32 x f32 product is exact in f64; the sum is rounded once to
  f32), then multiplied by the f32 global scale in f32 and converted to ``out_dtype``.  This is
  a more accurate reference than any f32 accumulation order; compare with a tolerance.
  Default dimension numbers: contract the last dim of both operands (the XLA
  block_scaled_dot layout: lhs [..., M, K], rhs [..., N, K]), no batch dims.  The blocked axis
  of a scaled operand defaults to its (single) contracting dim.
* unpack ``count``: optional check only; count * bits must equal 8 * packed length exactly
  (no padding is ever implied, per section 8).
"""

from __future__ import annotations

import numpy as np

from mxlower import types
from mxlower.cast_reference import (
    Encoded,
    cast,
    decode,
    encode,
    f32_arg,
    round_codes,
    round_to_odd_f32,
    sparse,
)
from mxlower.formats import (
    FLOAT_TYPES,
    MAX_BLOCK_SIZE,
    SCALE_MODES,
    SCALEMODE_OF,
    WIDE_TYPES,
    MXFormat,
    UnknownNameError,
    block_datatype,
    get_format,
)

__all__ = [
    "Encoded",
    "bits",
    "cast",
    "convert",
    "decode",
    "encode",
    "round_codes",
    "sparse",
    "dequantize",
    "from_bits",
    "pack",
    "quantize",
    "scaled_dot",
    "unpack",
]

_F32 = types.dtype("f32")
_F64 = types.dtype("f64")
_I8 = types.dtype("i8")
_U8 = types.dtype("ui8")


# ----------------------------------------------------------------------------- type helpers


def _handled(t: types.ScalarType) -> bool:
    """The types this module works with: every float type of :mod:`mxlower.types` and i8."""
    return t.is_float or t.mlir == "i8"


def _known_names() -> list[str]:
    return [t.mlir for t in types.SCALARS.values() if _handled(t)]


def _name_of(dt: np.dtype) -> str | None:
    """The MLIR spelling of a dtype this module handles, else None."""
    try:
        t = types.of_dtype(dt)
    except KeyError:
        return None
    return t.mlir if _handled(t) else None


def _resolve_type(spec, what: str) -> tuple[str, np.dtype]:
    """(MLIR spelling, dtype) for an MLIR spelling, ml_dtypes name or NumPy dtype; errors name
    the argument (``what``, e.g. ``"convert: argument 'to'"``)."""
    if isinstance(spec, str):
        try:
            t = types.scalar(spec)  # an MLIR spelling or a dtype name
        except KeyError:
            t = None
        if t is not None and _handled(t):
            return t.mlir, t.dtype
        try:
            dt = np.dtype(spec)  # NumPy's other spellings ("f4", "<f8", "double")
        except TypeError:
            dt = None
        if dt is not None and _name_of(dt) is not None:
            return _name_of(dt), dt
        raise UnknownNameError(f"{what}: unknown element type '{spec}' (known: "
                               f"{', '.join(_known_names())})")
    try:
        dt = np.dtype(spec)
    except TypeError:
        raise TypeError(f"{what}: not a type: {spec!r}") from None
    name = _name_of(dt)
    if name is None:
        raise ValueError(f"{what}: unsupported dtype {dt} (supported: "
                         f"{', '.join(_known_names())})")
    return name, dt


def _norm_axis(axis: int, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise ValueError(f"axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for an array of rank {ndim}")
    return int(axis) % ndim


def _from_f64(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Correct single RNE rounding of f64 values to ``dt`` (ml_dtypes rules for overflow)."""
    if dt == _F64:
        return np.array(v, dtype=_F64)
    if dt == _F32:
        with np.errstate(over="ignore"):
            return np.asarray(v, dtype=_F64).astype(_F32)
    with np.errstate(over="ignore", invalid="ignore"):
        return round_to_odd_f32(v).astype(dt)


# ----------------------------------------------------------------------------- section 2


def convert(x: np.ndarray, to: str | np.dtype) -> np.ndarray:
    """docs/semantics.md section 2: plain conversion of ``x`` to the type ``to``.

    Sources: f64, f32, bf16, f16 and the narrow float types.  Targets: f64, f32, bf16, f16 and
    the narrow float types.  Non-NaN inputs round exactly like ml_dtypes' ``astype`` from f32
    (correct RNE; see the module docstring for overflow).  NaN inputs: to f8E4M3FN/f8E5M2 the
    ml_dtypes NaN code with the input's sign; to f8E8M0FNU 0xFF; to f4/f6 the -0 code (0x8 /
    0x20) whatever the NaN's sign; to wide types a NaN.
    """
    name, dt = _resolve_type(to, "convert: argument 'to'")
    if name == "i8":
        raise ValueError("convert only converts between float types; 'i8' is not one")
    src = np.asarray(x)
    if _name_of(src.dtype) in (None, "i8"):
        floats = [n for n in _known_names() if n != "i8"]
        raise ValueError(f"convert: unsupported source dtype {src.dtype} "
                         f"(supported: {', '.join(floats)})")
    with np.errstate(over="ignore", invalid="ignore"):
        if src.dtype == _F64:
            if dt in (_F64, _F32):
                return _from_f64(src, dt)
            mid = round_to_odd_f32(src)
        else:
            mid = src.astype(_F32)  # exact for every supported source
        out = mid.astype(dt)
    t = FLOAT_TYPES.get(name)
    if t is not None:
        nan = np.isnan(mid)
        if nan.any():
            codes = out.view(_U8).copy()
            if t.special == "none":
                codes[nan] = t.nan_code
            elif t.signed:
                codes[nan] = np.where(np.signbit(mid[nan]), t.nan_code | t.sign_mask, t.nan_code)
            else:
                codes[nan] = t.nan_code
            out = codes.view(dt)
    return out


def bits(x) -> np.ndarray:
    """The raw codes of ``x`` as unsigned integers (uint8 for 8-bit and sub-byte types, with the
    f4/f6 code in the low bits; uint16 for bf16/f16; uint32 for f32; uint64 for f64)."""
    a = np.asarray(x)
    if a.dtype.kind == "b" or a.dtype.kind not in "fiuV":
        raise ValueError(f"bits: unsupported dtype {a.dtype}")
    u = a.view(types.code_dtype(a.dtype))
    name = _name_of(a.dtype)
    t = FLOAT_TYPES.get(name) if name else None
    if t is not None and t.bits < 8:
        u = u & np.uint8((1 << t.bits) - 1)
    return u.copy()


def from_bits(codes, type_name: str | np.dtype) -> np.ndarray:
    """Typed array from raw codes (any integer array, values in [0, 2^bits))."""
    name, dt = _resolve_type(type_name, "from_bits: argument 'type_name'")
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise ValueError(f"from_bits: codes must be integers, got dtype {c.dtype}")
    nbits = types.scalar(name).bits
    if c.size and (int(c.min()) < 0 or int(c.max()) >= (1 << nbits)):
        raise ValueError(f"from_bits: codes for {name} must lie in [0, {(1 << nbits) - 1}]")
    return c.astype(types.code_dtype(dt)).view(dt)


# ----------------------------------------------------------------------------- sections 3, 4


def _wide_input(x, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype not in WIDE_TYPES.values():
        raise ValueError(f"{what}: input must be float32, bfloat16 or float16, got {a.dtype}")
    return a.astype(_F32)  # exact


def _block_size(fmt: MXFormat, block_size) -> int:
    if block_size is None:
        return fmt.block_size
    if (not isinstance(block_size, (int, np.integer)) or isinstance(block_size, bool)
            or not 0 < block_size <= MAX_BLOCK_SIZE):
        raise ValueError(f"block_size must be an int in 1..{MAX_BLOCK_SIZE}, got "
                         f"{block_size!r}")
    return int(block_size)


def _global_scale(fmt: MXFormat, global_scale) -> np.float32 | None:
    if global_scale is None:
        return None
    if not fmt.global_scale:
        raise ValueError(f"format '{fmt.name}' takes no global scale (only nvfp4 does)")
    return f32_arg(global_scale, "global_scale", nonzero=True)


def quantize(x, format: str, *, axis: int = -1, block_size: int | None = None,
             scale_mode: str = "floor",
             global_scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """docs/semantics.md sections 3 (MX formats) and 4 (nvfp4).

    ``x``: float32, bfloat16 or float16 array.  Returns ``(elements, scales)``: elements in the
    format's element dtype (int8 codes for mxint8), scales float8_e8m0fnu (float8_e4m3fn for
    nvfp4) with ``x``'s shape except ``shape[axis] // block_size`` along ``axis``.
    ``scale_mode`` is "floor", "rceil" or "nearest" (ignored by nvfp4); ``global_scale`` only
    for nvfp4.
    """
    fmt = get_format(format, "quantize: argument 'format'")
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"unknown scale_mode '{scale_mode}' (known: {', '.join(SCALE_MODES)})")
    g = _global_scale(fmt, global_scale)
    a = _wide_input(x, "quantize")
    if a.ndim == 0:
        raise ValueError("quantize: input must have at least one dimension")
    ax = _norm_axis(axis, a.ndim)
    k = _block_size(fmt, block_size)
    n = a.shape[ax]
    if n % k:
        raise ValueError(f"quantize: blocked dimension {ax} has size {n}, which block size "
                         f"{k} does not divide")
    # the format as the section-10 datatype it is (floor is the 'max' scale mode; nvfp4's
    # float scales take 'max' whatever scale_mode says; its global scale is the tensor level
    # of two-level scaling: the blocks scale y = x / g)
    scalemode = "max" if fmt.is_nvfp4 else SCALEMODE_OF[scale_mode]
    dt = block_datatype(fmt, k, ax, global_scale=g is not None)
    enc = encode(a, dt, scalemode=scalemode, tensor_scale=g)
    return enc.codes, enc.scales


# ----------------------------------------------------------------------------- section 5


def _wide_output(dtype, what: str) -> tuple[str, np.dtype]:
    name, dt = _resolve_type(dtype, what)
    if name not in WIDE_TYPES:
        raise ValueError(f"output type must be one of {', '.join(WIDE_TYPES)}, got '{name}'")
    return name, dt


def _blocked_shapes(e_shape, s_shape, ax: int, block_size, fmt: MXFormat, what: str) -> int:
    if len(e_shape) != len(s_shape):
        raise ValueError(f"{what}: elements have rank {len(e_shape)} but scales rank "
                         f"{len(s_shape)}")
    for d, (ne, ns) in enumerate(zip(e_shape, s_shape)):
        if d != ax and ne != ns:
            raise ValueError(f"{what}: elements shape {tuple(e_shape)} and scales shape "
                             f"{tuple(s_shape)} differ in non-blocked dimension {d}")
    ne, ns = e_shape[ax], s_shape[ax]
    if block_size is None:
        if ns == 0:
            if ne != 0:
                raise ValueError(f"{what}: no scales for {ne} elements along axis {ax}")
            return fmt.block_size
        if ne % ns:
            raise ValueError(f"{what}: {ns} scales do not evenly block {ne} elements along "
                             f"axis {ax}")
        return ne // ns
    k = _block_size(fmt, block_size)
    if ne % k:
        raise ValueError(f"{what}: blocked dimension {ax} has size {ne}, which block size {k} "
                         f"does not divide")
    if ne // k != ns:
        raise ValueError(f"{what}: expected {ne // k} scales along axis {ax} for block size "
                         f"{k}, got {ns}")
    return k


def dequantize(elements, scales, format: str, *, axis: int = -1,
               block_size: int | None = None, dtype: str | np.dtype = "f32",
               global_scale: float | None = None) -> np.ndarray:
    """docs/semantics.md section 5: decode(element) * decode(scale) in f32 (exact), nvfp4 then times
    the global scale in f32, then rounded to nearest even to ``dtype`` (f32, bf16 or f16).

    ``block_size`` None infers it from the shapes.  Scale 0xFF (nvfp4: a NaN scale) gives a NaN
    block; scale 0x00 is 2^-127.
    """
    fmt = get_format(format, "dequantize: argument 'format'")
    g = _global_scale(fmt, global_scale)
    _, out_dt = _wide_output(dtype, "dequantize: argument 'dtype'")
    e = np.asarray(elements)
    s = np.asarray(scales)
    if e.dtype != fmt.element_dtype:
        raise ValueError(f"dequantize: {fmt.name} elements must have dtype "
                         f"{fmt.element_dtype}, got {e.dtype}")
    if s.dtype != fmt.scale_dtype:
        raise ValueError(f"dequantize: {fmt.name} scales must have dtype {fmt.scale_dtype}, "
                         f"got {s.dtype}")
    if e.ndim == 0:
        raise ValueError("dequantize: elements must have at least one dimension")
    ax = _norm_axis(axis, e.ndim)
    k = _blocked_shapes(e.shape, s.shape, ax, block_size, fmt, "dequantize")
    # the section-10 decode: code x scale, exact, rounded once to f32 (+-Inf on overflow),
    # nvfp4's then times g in f32 (the tensor level)
    dt = block_datatype(fmt, k, ax, global_scale=g is not None)
    return convert(decode(e, dt, scales=s, dtype=_F32, tensor_scale=g), out_dt)


# ----------------------------------------------------------------------------- section 6


def _dims(v, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in v)
    except TypeError as exc:
        raise ValueError(f"scaled_dot: {what} must be a sequence of ints, got {v!r}") from exc


def _operand(x, scales, fmt_name, axis, block_size, contracting, side: str) -> np.ndarray:
    if fmt_name is None:
        if scales is not None:
            raise ValueError(f"scaled_dot: {side} has scales but no {side}_format")
        return _wide_input(x, f"scaled_dot ({side}, plain operand)")
    if scales is None:
        raise ValueError(f"scaled_dot: {side}_format '{fmt_name}' given without {side} scales")
    if axis is None:
        if len(contracting) != 1:
            raise ValueError(f"scaled_dot: {side} has {len(contracting)} contracting dims; "
                             f"pass {side}_axis to say which one is blocked")
        axis = contracting[0]
    return dequantize(x, scales, fmt_name, axis=axis, block_size=block_size, dtype="f32")


def _dot_general(a: np.ndarray, b: np.ndarray, lc, rc, lb, rb) -> np.ndarray:
    for dims, what in ((lc + lb, "lhs"), (rc + rb, "rhs")):
        if len(set(dims)) != len(dims):
            raise ValueError(f"scaled_dot: {what} dimension numbers repeat a dimension: {dims}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ValueError("scaled_dot: lhs and rhs need the same number of contracting and of "
                         "batch dimensions")
    for x, y, what in ((lc, rc, "contracting"), (lb, rb, "batch")):
        for dl, dr in zip(x, y):
            if a.shape[dl] != b.shape[dr]:
                raise ValueError(f"scaled_dot: {what} dimension sizes differ: lhs dim {dl} is "
                                 f"{a.shape[dl]}, rhs dim {dr} is {b.shape[dr]}")
    lf = [d for d in range(a.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(b.ndim) if d not in rc and d not in rb]
    bshape = [a.shape[d] for d in lb]
    mshape = [a.shape[d] for d in lf]
    nshape = [b.shape[d] for d in rf]
    B = int(np.prod(bshape, dtype=np.int64))
    M = int(np.prod(mshape, dtype=np.int64))
    N = int(np.prod(nshape, dtype=np.int64))
    K = int(np.prod([a.shape[d] for d in lc], dtype=np.int64))
    at = a.astype(_F64).transpose(list(lb) + lf + list(lc)).reshape(B, M, K)
    bt = b.astype(_F64).transpose(list(rb) + list(rc) + rf).reshape(B, K, N)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.matmul(at, bt)
    return out.reshape(tuple(bshape + mshape + nshape))  # () for a scalar result


def scaled_dot(lhs, lhs_scales, rhs, rhs_scales, *,
               lhs_format: str | None = None, rhs_format: str | None = None,
               dimension_numbers=None,
               lhs_axis: int | None = None, rhs_axis: int | None = None,
               lhs_block_size: int | None = None, rhs_block_size: int | None = None,
               global_scale: float | None = None,
               out_dtype: str | np.dtype = "f32") -> np.ndarray:
    """docs/semantics.md section 6.

    ``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))`` as in
    ``jax.lax.dot_general``; default: contract the last dim of both, no batch dims.  Result dim
    order: batch, lhs free, rhs free.  A plain (bf16/f16/f32) operand has ``scales=None`` and
    ``format=None``.  The blocked axis of a scaled operand defaults to its single contracting
    dim; the block size defaults to the one the shapes imply.  Dequantized operands (f32) are
    contracted with float64 accumulation, the sum is rounded to f32, multiplied by the f32
    ``global_scale`` in f32 and converted (RNE) to ``out_dtype``.
    """
    lhs = np.asarray(lhs)
    rhs = np.asarray(rhs)
    if dimension_numbers is None:
        if lhs.ndim == 0 or rhs.ndim == 0:
            raise ValueError("scaled_dot: operands must have at least one dimension")
        dimension_numbers = (((lhs.ndim - 1,), (rhs.ndim - 1,)), ((), ()))
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError) as exc:
        raise ValueError("scaled_dot: dimension_numbers must be ((lhs_contracting, "
                         "rhs_contracting), (lhs_batch, rhs_batch))") from exc
    lc, rc = _dims(lc, "lhs contracting dims"), _dims(rc, "rhs contracting dims")
    lb, rb = _dims(lb, "lhs batch dims"), _dims(rb, "rhs batch dims")
    lc, lb = (tuple(_norm_axis(d, lhs.ndim) for d in dims) for dims in (lc, lb))
    rc, rb = (tuple(_norm_axis(d, rhs.ndim) for d in dims) for dims in (rc, rb))
    _, out_dt = _wide_output(out_dtype, "scaled_dot: argument 'out_dtype'")
    g = None if global_scale is None else f32_arg(global_scale, "scaled_dot: global_scale")
    a = _operand(lhs, lhs_scales, lhs_format, lhs_axis, lhs_block_size, lc, "lhs")
    b = _operand(rhs, rhs_scales, rhs_format, rhs_axis, rhs_block_size, rc, "rhs")
    acc = _dot_general(a, b, lc, rc, lb, rb)
    with np.errstate(over="ignore", invalid="ignore"):
        out = acc.astype(_F32)
        if g is not None:
            out = out * g
    return convert(out, out_dt)


# ----------------------------------------------------------------------------- section 8


def _codes_u8(codes, nbits: int, what: str) -> np.ndarray:
    c = np.asarray(codes)
    name = _name_of(c.dtype)
    t = FLOAT_TYPES.get(name) if name else None
    if t is not None:
        if t.bits != nbits:
            raise ValueError(f"{what}: {name} values are {t.bits}-bit, but bits={nbits}")
        return c.view(_U8) & np.uint8((1 << nbits) - 1)
    if c.dtype == _I8 and nbits == 8:
        return c.view(_U8)
    if c.dtype.kind not in "iu":
        raise ValueError(f"{what}: expected integer codes or an ml_dtypes narrow float array, "
                         f"got dtype {c.dtype}")
    if c.size and (int(c.min()) < 0 or int(c.max()) >= (1 << nbits)):
        raise ValueError(f"{what}: {nbits}-bit codes must lie in [0, {(1 << nbits) - 1}]")
    return c.astype(_U8)


def _check_bits(nbits) -> int:
    if (not isinstance(nbits, (int, np.integer)) or isinstance(nbits, bool)
            or not 1 <= nbits <= 8):
        raise ValueError(f"bits must be an int in [1, 8], got {nbits!r}")
    return int(nbits)


def pack(codes, bits: int, *, axis: int = -1) -> np.ndarray:
    """docs/semantics.md section 8: pack ``bits``-wide codes along ``axis`` into a little-endian,
    LSB-first bit stream of bytes (f4: first value in the low nibble; f6: four values in three
    bytes).  ``codes``: unsigned integer codes or an ml_dtypes f4/f6/f8 (or int8) array.
    The packed length n * bits / 8 must be whole, else ValueError."""
    nbits = _check_bits(bits)
    c = _codes_u8(codes, nbits, "pack")
    if c.ndim == 0:
        raise ValueError("pack: codes must have at least one dimension")
    ax = _norm_axis(axis, c.ndim)
    c = np.moveaxis(c, ax, -1)
    n = c.shape[-1]
    if (n * nbits) % 8:
        raise ValueError(f"pack: {n} values of {nbits} bits along axis {ax} do not fill whole "
                         f"bytes ({n * nbits} bits)")
    stream = np.unpackbits(c[..., None], axis=-1, bitorder="little")[..., :nbits]
    stream = stream.reshape(*c.shape[:-1], n * nbits)
    out = np.packbits(stream, axis=-1, bitorder="little")
    return np.ascontiguousarray(np.moveaxis(out, -1, ax))


def unpack(packed, bits: int, *, axis: int = -1, count: int | None = None) -> np.ndarray:
    """Inverse of :func:`pack`: uint8 codes (use :func:`from_bits` for a typed array).
    ``count``, when given, must equal 8 * packed length / bits (a check; nothing is padded)."""
    nbits = _check_bits(bits)
    p = np.asarray(packed)
    if p.dtype != _U8:
        raise ValueError(f"unpack: packed data must be uint8, got {p.dtype}")
    if p.ndim == 0:
        raise ValueError("unpack: packed data must have at least one dimension")
    ax = _norm_axis(axis, p.ndim)
    p = np.moveaxis(p, ax, -1)
    m = p.shape[-1]
    if (8 * m) % nbits:
        raise ValueError(f"unpack: {m} bytes along axis {ax} do not hold a whole number of "
                         f"{nbits}-bit values")
    n = 8 * m // nbits
    if count is not None and count != n:
        raise ValueError(f"unpack: count={count} but {m} bytes hold exactly {n} {nbits}-bit "
                         f"values")
    stream = np.unpackbits(p, axis=-1, bitorder="little").reshape(*p.shape[:-1], n, nbits)
    out = np.packbits(stream, axis=-1, bitorder="little")[..., 0]
    return np.ascontiguousarray(np.moveaxis(out, -1, ax))
