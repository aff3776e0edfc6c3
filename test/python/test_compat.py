"""docs/compat.md, checked: every statement there about a peer's results (torchao's MX, nvfp4
and NF4, microxcaling, TensorCast, JAX's quantizer, XLA) is a test here.

Each peer's rule is re-implemented in NumPy from its source (the peers are not dependencies; the
models were compared by hand with torchao 0.18 on torch 2.13's CPU wheel and with op-for-op
torch transcriptions of microxcaling and TensorCast, see docs/compat.md), run on the inputs of
the stated condition, and compared with mxlower's oracle (``mxlower.reference``, which every
lowering matches bit for bit): the test shows where the peer agrees with mxlower and that it
differs exactly where docs/compat.md says.  JAX's quantizer is part of the installed jax, so its
tests run the real thing (jax 0.10.2 and 0.12.0.1 give the same results).
"""

from __future__ import annotations

import dataclasses
import ml_dtypes
import numpy as np
import pytest

import mxlower.reference as R
from mxlower.cast_reference import resolve
from mxlower.formats import get_format

F32, F64, U32, U8 = np.float32, np.float64, np.uint32, np.uint8
E8M0 = ml_dtypes.float8_e8m0fnu
FLOAT_MX = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1")


# ------------------------------------------------------------------------------------ helpers

def bits(x) -> np.ndarray:
    return np.asarray(x, F32).view(U32)


def from_bits(b) -> np.ndarray:
    return np.asarray(b, U32).view(F32)


def log2_f32(a) -> np.ndarray:
    """log2 of f32 values, correctly rounded to f32 (what torch.log2 gives on every input used
    here; the peers take floor/ceil of it)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log2(np.asarray(a, F32).astype(F64)).astype(F32)


def blocks(first, fill=0.0, k=32) -> np.ndarray:
    """One block per value of ``first``: that value, then k-1 copies of ``fill``."""
    first = np.asarray(first, F32).ravel()
    b = np.full((first.size, k), F32(fill), F32)
    b[:, 0] = first
    return b


def mx_codes(x, fmt, mode="floor"):
    """mxlower's (element codes, scale codes) as uint8."""
    e, s = R.quantize(x, fmt, scale_mode=mode)
    return e.view(U8), s.view(U8)[..., 0]


def elem_codes(v, fmt) -> np.ndarray:
    """Codes of f32 values v rounded RNE to the format's element type (saturating before)."""
    f = get_format(fmt)
    v = np.clip(np.asarray(v, F32), -f.max_elem, f.max_elem)
    return v.astype(f.element_dtype).view(U8)


def binade_sweep(rng, n=4000, lo=-126, hi=127) -> np.ndarray:
    """Random positive f32 values spread over binades lo..hi, plus every power of two and its
    neighbours (the places where exponent rules disagree)."""
    e = rng.integers(lo, hi + 1, n)
    m = rng.integers(0, 1 << 23, n)
    v = from_bits(((e + 127) << 23) | m)
    p = from_bits((np.arange(lo, hi + 1) + 127) << 23)
    near = np.concatenate([from_bits(bits(p).astype(np.int64) + d) for d in (-2, -1, 0, 1, 2)])
    return np.concatenate([v, near]).astype(F32)


# ==================================================================================== torchao

def ao_floor(x, fmt, even=False):
    """torchao 0.18 ``to_mx(..., ScaleCalculationMode.FLOOR / EVEN)`` on the CPU: (element codes,
    scale codes).  E from amax's f32 exponent field, clamped to [-127, 128]; the f32 scale is
    clamped below at 2^-126; elements are x / scale (an f32 division), clamped, cast RNE."""
    f = get_format(fmt)
    mbits = {"mxfp8_e4m3": 3, "mxfp8_e5m2": 2, "mxfp6_e3m2": 2, "mxfp6_e2m3": 3,
             "mxfp4_e2m1": 1}[fmt]
    amax = np.max(np.abs(x), axis=-1)
    ab = bits(amax).astype(np.int64)
    if even:  # round amax's mantissa at the element's precision (ties up), keep sign+exponent
        ab = (ab + (1 << (22 - mbits))) & 0xFF800000
    e = ((ab >> 23) & 0xFF) - 127 - f.emax_elem
    code = np.clip(e, -127, 128) + 127
    code = np.where(np.isnan(amax), 255, code).astype(np.int64)
    scale = np.maximum(from_bits((code << 23).astype(U32)), F32(2.0 ** -126))
    with np.errstate(invalid="ignore"):
        data = x / scale[:, None]
    return elem_codes(data, fmt), code.astype(U8)


def ao_rceil(x, fmt):
    """torchao 0.18 ``to_mx(..., RCEIL)`` outside torch.compile: descale = amax / max (f32),
    code = clamp(ceil(log2(descale)) in f32, -127, 127) + 127 (NaN -> 255, Inf -> 254); the
    elements are x times 2^(127 - code), with code 0 read as 1 and 254 as 2^-127."""
    f = get_format(fmt)
    amax = np.max(np.abs(x), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = amax / F32(f.max_elem)
        e = np.clip(np.ceil(log2_f32(d)), -127, 127)
        code = np.where(np.isnan(d), 255, np.where(np.isinf(d), 254, e + 127)).astype(np.int64)
        rcp = np.where(code == 255, np.nan, np.where(
            code == 254, 2.0 ** -127, np.where(code == 0, 1.0, np.exp2(127.0 - code)))).astype(F32)
        data = x * rcp[:, None]
    return elem_codes(data, fmt), code.astype(U8)


@pytest.mark.parametrize("fmt", FLOAT_MX)
def test_torchao_floor_scale_is_mxlower_floor(fmt):
    """FLOOR gives mxlower's `floor` scale code for every finite block, subnormal amax included."""
    x = blocks(binade_sweep(np.random.default_rng(1)), fill=0.5)
    x = np.concatenate([x, blocks(from_bits(np.arange(1, 2000, 7)), fill=0.0)])
    _, ms = mx_codes(x, fmt)
    _, ts = ao_floor(x, fmt)
    assert np.array_equal(ms, ts)


@pytest.mark.parametrize("fmt", ("mxfp8_e4m3", "mxfp4_e2m1"))
def test_torchao_floor_clamps_the_scale_at_2_pow_minus_126(fmt):
    """Elements agree for every scale code >= 1; for code 0x00 (amax < 2^(emax_elem - 126))
    torchao divides by 2^-126 instead of 2^-127, so its elements are those of x * 2^126, half of
    mxlower's x * 2^127 (and its own dequantize multiplies them by 2^-127)."""
    rng = np.random.default_rng(2)
    x = blocks(binade_sweep(rng, lo=-126, hi=127), fill=0.0)
    x[:, 1:] = x[:, :1] * rng.uniform(-1, 1, (x.shape[0], 31)).astype(F32)
    me, ms = mx_codes(x, fmt)
    te, ts = ao_floor(x, fmt)
    low = ms == 0
    assert low.any() and (~low).any()
    assert np.array_equal(me[~low], te[~low])
    emax = get_format(fmt).emax_elem
    assert np.all(np.max(np.abs(x[low]), -1) < 2.0 ** (emax - 126))
    assert np.array_equal(te[low], elem_codes(np.ldexp(x[low].astype(F64), 126), fmt))
    assert np.array_equal(me[low], elem_codes(np.ldexp(x[low].astype(F64), 127), fmt))
    assert (te[low] != me[low]).any()


@pytest.mark.parametrize("fmt", FLOAT_MX)
def test_torchao_rceil_is_off_by_one_where_its_f32_log2_rounds_to_an_integer(fmt):
    """RCEIL gives mxlower's `rceil` scale exactly, except one lower where descale = amax / max
    is not a power of two but its f32 log2 rounds to the integer above (so ceil() does not move):
    for descale = 2^k (1 + 2^-23) that is every k <= -5 and k >= 4."""
    f = get_format(fmt)
    k = np.arange(-120, 121)
    d = (np.ldexp(1.0, k) * (1 + 2.0 ** -23)).astype(F32)
    with np.errstate(over="ignore"):
        fits = d * F32(f.max_elem) < F32(2.0 ** 127)
    k, d = k[fits], d[fits]
    amax = np.array([np.nextafter(F32(v) * F32(f.max_elem), F32(np.inf)) for v in d], F32)
    while True:  # the smallest f32 amax whose quotient is d (amax * max may have rounded)
        q = amax / F32(f.max_elem)
        lower = np.where(q > d, np.nextafter(amax, F32(0)), amax)
        if np.array_equal(lower, amax):
            break
        amax = lower
    amax = np.where(amax / F32(f.max_elem) < d, np.nextafter(amax, F32(np.inf)), amax)
    ok = (amax / F32(f.max_elem)) == d
    x = blocks(amax[ok])
    _, ms = mx_codes(x, fmt, "rceil")
    _, ts = ao_rceil(x, fmt)
    diff = ms.astype(int) - ts.astype(int)
    kk = k[ok]
    inside = (kk >= -126 + 0) & (kk <= 126)
    off = (kk <= -5) | (kk >= 4)
    assert np.all(diff[inside & off] == 1) and np.all(diff[inside & ~off] == 0)
    # and anywhere else: differences exactly where RN_f32(log2 q) is an integer but q is not 2^n
    x = blocks(binade_sweep(np.random.default_rng(3), lo=-100, hi=100), fill=0.25)
    _, ms = mx_codes(x, fmt, "rceil")
    _, ts = ao_rceil(x, fmt)
    q = np.max(np.abs(x), -1) / F32(f.max_elem)
    lg = log2_f32(q)
    cond = (lg == np.round(lg)) & (np.frexp(q.astype(F64))[0] != 0.5) & (ms > 0)
    assert np.array_equal(ms != ts, cond) and np.all(ms[cond].astype(int) - ts[cond] == 1)


def test_torchao_rceil_reads_scale_code_zero_as_one():
    """A non-zero block whose rceil scale code is 0x00 (amax / max <= 2^-127): torchao multiplies
    the elements by 1 instead of 2^127, so they all round to +-0; mxlower keeps them."""
    fmt = "mxfp8_e4m3"
    x = blocks(np.float32([448 * 2.0 ** -127, 2.0 ** -130, 1e-40]), fill=2.0 ** -131)
    me, ms = mx_codes(x, fmt, "rceil")
    te, ts = ao_rceil(x, fmt)
    assert np.all(ms == 0) and np.all(ts == 0)
    assert np.all(te & 0x7F == 0)
    assert np.all(me[:, 0] != 0)
    assert np.array_equal(me, elem_codes(np.ldexp(x.astype(F64), 127), fmt))


def test_torchao_non_finite_blocks():
    """NaN: scale 0xFF as in mxlower, but FLOOR writes the NaN code (0x7F) for the NaN element
    and RCEIL for every element, where mxlower writes 0.  Inf: FLOOR's scale is
    2^(128 - emax_elem) (0xF7 for e4m3) and RCEIL's 0xFE,
    with the Inf saturated to max_elem; mxlower: scale 0xFF, elements 0."""
    fmt = "mxfp8_e4m3"
    x = blocks(np.float32([np.nan, np.inf, -np.inf]), fill=1.0)
    me, ms = mx_codes(x, fmt)
    fe, fs = ao_floor(x, fmt)
    re_, rs = ao_rceil(x, fmt)
    assert list(ms) == [0xFF] * 3 and not me.any()
    assert list(fs) == [0xFF, 0xF7, 0xF7] and list(rs) == [0xFF, 0xFE, 0xFE]
    assert fe[0, 0] == 0x7F and not fe[0, 1:].any() and np.all(re_[0] == 0x7F)
    assert list(fe[1:, 0]) == [0x7E, 0xFE] and list(re_[1:, 0]) == [0x7E, 0xFE]


@pytest.mark.parametrize("fmt", FLOAT_MX)
def test_torchao_even_is_mxlower_midmax_except_e4m3(fmt):
    """EVEN (round amax at the element's precision, then floor) is mxlower's section-10 `midmax`
    scale mode for every MX float format except mxfp8_e4m3, where EVEN steps up from a
    significand of 1.9375 and midmax (480 = (448 + 512) / 2) from 1.875."""
    x = blocks(binade_sweep(np.random.default_rng(4), lo=-100, hi=120), fill=0.0)
    sig = np.concatenate([np.arange(1.84, 1.96, 2 ** -10), [1.875, 1.9375]])
    x = np.concatenate([x, blocks((sig[:, None] * 2.0 ** np.arange(-20, 20, 7)).ravel())])
    ms = R.encode(x, fmt, scalemode="midmax").scales.view(U8)[:, 0]
    _, ts = ao_floor(x, fmt, even=True)
    if fmt != "mxfp8_e4m3":
        assert np.array_equal(ms, ts)
        return
    amax = np.max(np.abs(x), -1).astype(F64)
    s = amax / np.ldexp(1.0, np.frexp(amax)[1] - 1)
    cond = (s >= 1.875) & (s < 1.9375)
    assert np.array_equal(ms != ts, cond) and np.all(ms[cond].astype(int) - ts[cond] == 1)


def test_torchao_ceil_has_no_mxlower_mode():
    """CEIL (E = ceil(log2 amax) - emax_elem) is none of mxlower's scale modes: each differs
    from it on some block."""
    fmt = "mxfp8_e4m3"
    x = blocks(np.float32([1.0 + 2 ** -20, 300.0, 1.6, 1.9]) * F32(2.0 ** 8))
    amax = np.max(np.abs(x), -1).astype(F64)
    ceil_codes = np.ceil(np.log2(amax)).astype(int) - 8 + 127
    for mode in ("floor", "rceil", "nearest"):
        assert (mx_codes(x, fmt, mode)[1] != ceil_codes).any()
    assert (R.encode(x, fmt, scalemode="midmax").scales.view(U8)[:, 0] != ceil_codes).any()


def ao_nvfp4(x, g=None):
    """torchao 0.18 ``nvfp4_quantize(x, per_tensor_scale=g)``: s = e4m3(clamp(amax / 6 [/ g],
    2^-6, 448)), elements RNE_f4(clamp(x * RN_f32(1 / s), -6, 6)), with a per-tensor scale
    x * RN_f32(RN_f32(1 / g) / s); every operation in f32."""
    amax = np.max(np.abs(x), axis=-1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        q = amax / F32(6) if g is None else (amax / F32(6)) / F32(g)
        s = np.clip(q, F32(2.0 ** -6), F32(448)).astype(ml_dtypes.float8_e4m3fn)
        r = F32(1) / s.astype(F32) if g is None else (F32(1) / F32(g)) / s.astype(F32)
        data = x * r[:, None]
    data = np.clip(data, F32(-6), F32(6))
    return data.astype(ml_dtypes.float4_e2m1fn).view(U8), s.view(U8)


def test_torchao_nvfp4_scale_floor_at_2_pow_minus_6():
    """torchao clamps amax / 6 below at 2^-6 (E4M3's smallest normal): its scale code is never
    below 0x08.  It equals mxlower's exactly when RN_f32(amax / 6) >= 15 * 2^-10 (the midpoint
    that rounds up to 2^-6); below, mxlower keeps the subnormal scale (or 0 and +0 elements)."""
    v = np.concatenate([from_bits(np.arange(bits(F32(0.09)) - 4000, bits(F32(0.09)) + 4000, 3)),
                        np.float32([0.0, 1e-4, 0.06, 1.0, 100.0, 3000.0])])
    x = blocks(v, fill=0.0, k=16)
    _, ms = R.quantize(x, "nvfp4")
    ms = ms.view(U8)[:, 0]
    _, ts = ao_nvfp4(x)
    cond = (v / F32(6)) < F32(15 * 2.0 ** -10)
    assert cond.any() and (~cond).any()
    assert np.array_equal(ms != ts, cond) and np.all(ts[cond] == 0x08)


def test_torchao_nvfp4_elements_use_a_reciprocal():
    """Elements are x * RN_f32(1 / s), not RN_f32(x / s): equal whenever s is a power of two;
    for other scales an f4 tie x = t * s can round the other way (x = 300 in a block with amax
    1440, s = 240: torchao 1.5, mxlower 1.0, ties to even)."""
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    codes = np.arange(0x08, 0x7F, dtype=U8)
    svals = codes.view(ml_dtypes.float8_e4m3fn).astype(F64)
    rows = []
    for s in svals:
        for t in mids:
            b = np.zeros(16, F32)
            b[0], b[1] = F32(6 * s), F32(t * s)
            rows.append(b)
    x = np.array(rows, F32)
    me, ms = R.quantize(x, "nvfp4")
    te, ts = ao_nvfp4(x)
    assert np.array_equal(ms.view(U8)[:, 0], ts)
    diff = me.view(U8)[:, 1] != te[:, 1]
    pow2 = np.repeat(np.frexp(svals)[0] == 0.5, len(mids))
    assert not diff[pow2].any() and diff[~pow2].any()
    i = np.nonzero((x[:, 0] == 1440) & (x[:, 1] == 300))[0][0]
    assert me.view(U8)[i, 1] == 0x2 and te[i, 1] == 0x3


@pytest.mark.parametrize("g", (2.0 ** -3, 16.0, 0.3, 1.7e-3, 37.0))
def test_torchao_nvfp4_per_tensor_scale(g):
    """With a per-tensor scale g (mxlower's global_scale): torchao's scale is
    RNE_e4m3(clamp(RN(RN(amax / 6) / g), 2^-6, 448)) and its elements RNE_f4(x * RN(RN(1 / g) /
    s)), where mxlower divides every x by g first.  Outside the 2^-6 clamp the rounding order
    changes nothing on these 4,000 random blocks; it can at rounding midpoints (see the
    reciprocal test, which is g = 1)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4000, 16)) * np.exp2(rng.integers(-8, 8, (4000, 1)))).astype(F32)
    me, ms = R.quantize(x, "nvfp4", global_scale=g)
    me, ms = me.view(U8), ms.view(U8)[:, 0]
    te, ts = ao_nvfp4(x, g)
    clamped = (np.max(np.abs(x), -1) / F32(6)) / F32(g) < F32(15 * 2.0 ** -10)
    assert np.array_equal(ms[~clamped], ts[~clamped])
    assert np.array_equal(me[~clamped], te[~clamped])
    assert np.all(ts[clamped] == 0x08) and np.all(ms[clamped] != 0x08)


# ----------------------------------------------------------------------------- torchao NF4

#: torchao 0.18's NF4 table as its source writes it (``NF4Tensor.from_tensor`` in
#: quantization/quantize_/workflows/nf4/nf4_tensor.py): QLoRA's values to four decimals, made
#: a tensor of the input's dtype (each literal rounded once to it).
AO_NF4 = (-1.0, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0,
          0.0796, 0.1609, 0.2461, 0.3379, 0.4407, 0.5626, 0.7230, 1.0)
BF16 = ml_dtypes.bfloat16


def ao_nf4_table(dtype=F32) -> np.ndarray:
    """torchao's NF4 table in ``dtype`` (float32 or bfloat16), as f32 values."""
    return np.array(AO_NF4, F32).astype(dtype).astype(F32)


def ao_nf4(x, dtype=F32, block=64, sblock=256, mean=None):
    """torchao 0.18 ``to_nf4(x, block, sblock)`` and ``get_original_weight()`` on the CPU, x flat
    in ``dtype`` (float32 or bfloat16); every operation is an f32 one rounded to ``dtype``, as
    torch's CPU kernels compute bf16.  Returns a dict: ``codes`` (one per value), ``q``,
    ``factor`` (the int8 scalers, one f32 factor per scaler block), ``mean``, ``dq`` (the
    dequantized block scales) and ``w`` (the dequantized values, f32).

    Elements: v = x / amax; the code is the first index of the smallest |v - T[i]| (a tie
    takes the lower index; a NaN v, from 0 / 0 or x / NaN, gives 0).  Scales: mean = the mean
    of all the tensor's block absmaxes (torch's f32 ``mean()``: its summation order is not
    modelled, this is the exact mean rounded once; ``mean=`` gives it), d = amax - mean, A =
    max |d| over the scaler block, factor = 256 / (2 A), q = clamp(round_even(d * factor),
    -128, 127) as int8 (NaN, A = 0, becomes 0 as torch's conversion gives here), dq = q /
    factor + mean.  Values: T[code] * dq."""
    dtype = np.dtype(dtype)

    def r(v):
        return np.asarray(v, F32).astype(dtype).astype(F32)

    xf = np.asarray(x, dtype).astype(F32).reshape(-1, block)
    T = ao_nf4_table(dtype)
    with np.errstate(all="ignore"):
        amax = np.max(np.abs(xf), -1)
        v = r(xf / amax[:, None])
        codes = np.argmin(r(np.abs(v[..., None] - T)), -1)  # first minimum, or first NaN
        mu = r(np.sum(amax, dtype=F64) / amax.size) if mean is None else r(mean)
        d = r(amax - mu).reshape(-1, sblock)
        a = np.max(np.abs(d), -1, keepdims=True)
        f = r(F32(256) / r(F32(2) * a))
        q = np.clip(np.round(r(d * f)), -128, 127)
        q = np.where(np.isnan(q), 0, q).astype(np.int8)
        dq = r(r(q.astype(F32) / f) + mu).reshape(-1)
        w = r(T[codes] * dq[:, None])
    return dict(codes=codes.reshape(-1).astype(U8), q=q.reshape(-1), factor=f.reshape(-1),
                mean=mu, dq=dq, w=w.reshape(-1))


def _midpoints(table) -> np.ndarray:
    t = np.asarray(table, F64)
    return (t[:-1] + t[1:]) / 2  # exact: the table values are f32


def _nf4_probe_blocks(rng, mids, n, dtype=F32) -> np.ndarray:
    """n blocks of 64 (n a multiple of 256, the scaler block): for amax = 2^k (k = -3, 0, 5),
    blocks holding each midpoint (times 2^k) and two neighbours either side in ``dtype``; two
    zero blocks, two tiny ones (amax about 1e-40 and 2^-130, subnormal); random blocks."""
    rows = []
    for k in (-3, 0, 5):
        for m in mids:
            c = np.asarray(m, F32).astype(dtype).astype(F32)
            u = c.astype(dtype).view(U32 if dtype == F32 else np.uint16).astype(np.int64)
            near = [np.asarray(u + s).astype(U32 if dtype == F32 else np.uint16).view(dtype)
                    for s in (0, 1, -1, 2, -2)]
            row = rng.uniform(-1, 1, 64)
            row[0], row[1:6] = 1.0, np.array(near).astype(F64)
            rows.append(row * 2.0 ** k)
    rows += [np.zeros(64)] * 2 + [rng.uniform(-1, 1, 64) * a for a in (1e-40, 2.0 ** -130)]
    m = n - len(rows)
    rand = rng.standard_normal((m, 64)) * np.exp2(rng.uniform(-12, 12, (m, 1)))
    return np.concatenate([np.array(rows), rand]).astype(F32).astype(dtype)


def _code_from_mids(v, mids, lower_ties) -> np.ndarray:
    """The nearest-value code of v (f64) among values with these midpoints: the number of
    midpoints below v, a value exactly at one counting it when not ``lower_ties`` and its
    lower index is odd (ties to the even code)."""
    v = np.asarray(v, F64)[..., None]
    i = np.arange(len(mids))
    above = (v > mids) if lower_ties else ((v > mids) | ((v == mids) & (i % 2 == 1)))
    return above.sum(-1)


def test_torchao_nf4_codes_are_mxlower_nf4_outside_the_midpoint_gaps():
    """f32: both take v = x / amax as one f32 division (mxlower's s = amax / max|T| = amax), and
    the nearest table value.  torchao's table is QLoRA's to four decimals (nf4's values moved by
    at most 5.0e-5, its midpoints by at most 3.9e-5; in bf16 by up to 1.7e-3), and a tie takes
    the lower index.  So the
    codes are equal except where v lies between a midpoint of mxlower's nf4 and the matching
    one of torchao's table (each end by its own tie rule); an all-zero block gets codes 0 in
    both (torchao: 0 / 0 is NaN, whose argmin is index 0; mxlower: s = 0)."""
    from mxlower.numbers import NF4_VALUES

    rng = np.random.default_rng(11)
    qm = _midpoints(resolve("nf4:float32_t64").number.table)
    am = _midpoints(ao_nf4_table(F32))
    assert np.max(np.abs(qm - am)) < 3.9e-5
    q_table, ao_table = np.array(NF4_VALUES), ao_nf4_table(F32).astype(F64)
    assert 4.9e-5 < np.max(np.abs(q_table - ao_table)) < 5.0e-5
    assert 1.6e-3 < np.max(np.abs(q_table - ao_nf4_table(BF16))) < 1.7e-3
    x = _nf4_probe_blocks(rng, np.concatenate([qm, am]), 1024)
    t = ao_nf4(x)
    e = R.encode(x, "nf4:float32_t64")
    mc = e.codes.reshape(-1)
    assert np.array_equal(e.scales.reshape(-1), np.max(np.abs(x), -1))  # s = amax
    with np.errstate(invalid="ignore"):
        v = (x / np.max(np.abs(x), -1, keepdims=True)).reshape(-1)
    zero = np.repeat(np.max(np.abs(x), -1) == 0, 64)
    assert zero.any() and np.all(t["codes"][zero] == 0) and np.all(mc[zero] == 0)
    ao_rule = _code_from_mids(v, am, lower_ties=True)
    mx_rule = _code_from_mids(v, qm, lower_ties=False)
    assert np.array_equal(t["codes"][~zero], ao_rule[~zero])
    assert np.array_equal(mc[~zero], mx_rule[~zero])
    cond = (ao_rule != mx_rule) & ~zero
    assert cond.sum() > 50 and np.array_equal(t["codes"] != mc, cond)


@pytest.mark.parametrize("dtype", (F32, BF16), ids=("f32", "bf16"))
def test_torchao_nf4_rounding_is_mxlower_lut_rounding_except_ties(dtype):
    """With torchao's own table in the input's dtype as an mxlower LUT (`lut_spec`,
    `float32_t64` scales) the element rule is the same: the nearest value of the quotient;
    they differ exactly at a tie, v on a midpoint T[i], T[i+1] with i odd (torchao the lower
    index i, mxlower the even code i + 1).  f32 midpoints that are f32 values: i = 0, 1, 4, 6,
    7.  bf16: torchao divides in bf16 (v = RN_bf16(x / amax)) where mxlower's quotient is f32,
    so there the codes are mxlower's for the bf16 quotient (`round_codes`) except those ties,
    and mxlower's cast of the bf16 input differs exactly where the rounding of the quotient to
    bf16 moves it onto (odd i) or across a midpoint."""
    from mxlower.numbers import lut_spec

    T = ao_nf4_table(dtype)
    spec = lut_spec([float(t) for t in T])
    am = _midpoints(T)
    rng = np.random.default_rng(12)
    x = _nf4_probe_blocks(rng, am, 512, dtype)
    t = ao_nf4(x, dtype)
    xf = x.astype(F32)
    amax = np.max(np.abs(xf), -1, keepdims=True)
    nz = np.repeat(amax[:, 0] > 0, 64)
    with np.errstate(invalid="ignore"):
        v = (xf / amax).reshape(-1)  # mxlower's quotient (one f32 division)
    vq = v.astype(dtype).astype(F32)  # torchao's
    odd_tie = np.isin(vq.astype(F64), am[1::2]) & nz
    assert odd_tie.any()
    mc = R.encode(x, spec, "float32_t64").codes.reshape(-1)
    ref = np.where(nz, R.round_codes(np.where(nz, vq, 0).astype(F64), spec), 0)
    assert np.array_equal(t["codes"] != ref, odd_tie)
    assert np.all(ref[odd_tie].astype(int) - t["codes"][odd_tie] == 1)
    if dtype == F32:
        assert np.array_equal(t["codes"] != mc, odd_tie)
        assert set(np.nonzero(np.isin(am, am.astype(F32)))[0]) == {0, 1, 4, 6, 7}
        return
    cond = nz & (_code_from_mids(v, am, False) != _code_from_mids(vq, am, True))
    assert np.array_equal(t["codes"] != mc, cond) and (cond & ~odd_tie).any()


def test_torchao_nf4_double_quantizes_the_scales():
    """torchao stores each block's absmax as int8 q with one f32 factor per scaler block (256
    blocks) and the tensor's mean mu: dq = q / factor + mu, factor = 256 / (2 A), A = max |amax
    - mu| over the scaler block.  mxlower's `nf4:float32_t64` keeps s = amax.  The error
    |dq - amax| is at most A / 256 plus four f32 ulps of max(amax, |mu|, A), and at most A / 128
    plus those where d * factor rounds to 128 and q is clamped to 127 (amax - mu within about
    A / 256 of A).  It is absolute: a small block among large ones can get a scale many times
    its amax, 0 or a negative one (on these random blocks too, where over 99% of the scales
    differ from amax).  The scales are exact where A = 0: every block of the scaler block has
    amax = mu (the factor is Inf, q is 0); then the values are mxlower's with torchao's table
    as the LUT."""
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((256 * 8, 64))
         * np.exp2(rng.uniform(-6, 6, (256 * 8, 1)))).astype(F32)
    t = ao_nf4(x)
    amax = np.max(np.abs(x), -1)
    d = (amax - t["mean"]).reshape(-1, 256)
    A = np.repeat(np.max(np.abs(d), -1), 256)
    err = np.abs(t["dq"].astype(F64) - amax)
    ulp = np.spacing(np.maximum.reduce([amax, np.abs(np.repeat(t["mean"], amax.size)), A]))
    clamped = (np.round((d * t["factor"][:, None]).astype(F32)) == 128).reshape(-1)
    assert clamped.sum() > 8 and np.all(t["q"][clamped] == 127)
    assert np.all(err[~clamped] <= A[~clamped] / 256 + 4 * ulp[~clamped])
    assert np.all(err[clamped] <= A[clamped] / 128 + 4 * ulp[clamped])
    assert np.any(err[clamped] > A[clamped] / 256 * 1.99)
    assert (t["dq"] != amax).mean() > 0.99 and (t["dq"] < 0).any()
    # a scaler block of 255 blocks of amax 1/1024 and one of 128: mu ~ 0.5, A ~ 127.5, the
    # small blocks' d * factor ~ -0.5 rounds to 0 or -1: scale mu (~500 times amax) or < 0
    y = np.zeros((256, 64), F32)
    y[:, 0] = 2.0 ** -10
    y[0, 0] = 128
    s = ao_nf4(y)["dq"]
    assert s[0] != 128 and np.all((s[1:] > 400 * 2.0 ** -10) | (s[1:] <= 0))
    # A = 0: exact scales, and the values are mxlower's with torchao's table as the LUT
    from mxlower.numbers import lut_spec

    z = rng.uniform(-0.375, 0.375, (256, 64)).astype(F32)
    z[:, 0] = np.where(rng.integers(0, 2, 256) == 1, F32(0.375), F32(-0.375))
    t = ao_nf4(z)
    assert t["mean"] == F32(0.375) and np.all(t["dq"] == F32(0.375))
    spec = lut_spec([float(v) for v in ao_nf4_table(F32)])
    e = R.encode(z, spec, "float32_t64")
    w = R.decode(e, spec, "float32_t64").reshape(-1)
    same = t["codes"] == e.codes.reshape(-1)
    assert np.array_equal(t["w"][same], w[same]) and same.all()


def test_torchao_nf4_zero_and_non_finite_blocks():
    """An all-zero block: codes 0 in both, so torchao's values are -dq, which is non-zero unless
    the double quantization gives dq = 0 exactly; mxlower's are -0 (T[0] * 0).  A NaN or Inf
    anywhere makes the mean NaN or Inf and so every block's dq NaN: torchao's whole tensor
    dequantizes to NaN (the NaN block's codes 0, the Inf block's 7 for finite x and 0 for the
    Inf), where mxlower gives that block a NaN scale and codes 0 and keeps the others."""
    rng = np.random.default_rng(14)
    x = (rng.standard_normal((256, 64)) * np.exp2(rng.uniform(-3, 3, (256, 1)))).astype(F32)
    x[3] = 0
    t = ao_nf4(x)
    e = R.encode(x, "nf4:float32_t64")
    w = R.decode(e, "nf4:float32_t64")
    assert np.all(t["codes"][3 * 64:4 * 64] == 0) and np.all(e.codes[3] == 0)
    assert np.all(w[3].view(U32) == 0x80000000) and t["dq"][3] != 0
    assert np.all(t["w"][3 * 64:4 * 64] == -t["dq"][3])
    for bad, codes in ((np.nan, 0), (np.inf, 7)):
        y = x.copy()
        y[3] = rng.uniform(-1, 1, 64)
        y[3, 5] = bad
        t = ao_nf4(y)
        e = R.encode(y, "nf4:float32_t64")
        w = R.decode(e, "nf4:float32_t64")
        assert np.all(np.isnan(t["dq"])) and np.all(np.isnan(t["w"]))
        tc = t["codes"].reshape(-1, 64)
        assert tc[3, 5] == 0 and np.all(tc[3, np.arange(64) != 5] == codes)
        assert np.isnan(e.scales[3, 0]) and not e.codes[3].any()
        assert np.isnan(w[3]).all() and not np.isnan(np.delete(w, 3, 0)).any()


# ================================================================================ microxcaling

_MXC = {  # element format: (ebits, mbits incl. sign and implicit bit, emax, max_norm)
    "mxfp8_e4m3": (4, 5, 8, 448.0), "mxfp8_e5m2": (5, 4, 15, 57344.0),
    "mxfp6_e3m2": (3, 4, 4, 28.0), "mxfp6_e2m3": (2, 5, 2, 7.5), "mxfp4_e2m1": (2, 3, 2, 6.0),
    "mxint8": (0, 8, 0, 127 / 64),
}


def mxc_quantize(x, fmt, rnd="nearest"):
    """microxcaling's ``_quantize_mx`` (PyTorch path, f32, shared_exp_method "max", 8-bit
    scale): the fake-quantized f32 values, every step an f32 operation as in its source."""
    ebits, mbits, emax, max_norm = _MXC[fmt]
    with np.errstate(all="ignore"):
        amax = np.max(np.abs(x), axis=-1, keepdims=True)
        se = np.floor(log2_f32(amax + F32(2.0 ** -126) * (amax == 0))) - emax
        se = np.where(se > 127, np.nan, np.maximum(se, -127)).astype(F32)
        scale = np.exp2(se.astype(F64)).astype(F32)  # 2^se, exact (2^-127 is an f32 subnormal)
        a = (x / scale).astype(F32)
        if ebits:
            pe = np.floor(log2_f32(np.abs(a) + (a == 0).astype(F32)))
            pe = np.maximum(pe, F32(2 - 2 ** (ebits - 1)))
            step = np.exp2(pe.astype(F64) - (mbits - 2)).astype(F32)
        else:
            step = F32(2.0 ** -(mbits - 2))
        t = (a / step).astype(F32)
        sign = np.where(t > 0, F32(1), np.where(t < 0, F32(-1), F32(0)))  # torch.sign(-0.) is +0
        at = np.abs(t)
        if rnd == "floor":
            r = np.floor(at)
        else:
            r = np.floor((at + F32(0.5)).astype(F32))
            if rnd == "even":
                r = r - (np.mod((at - F32(0.5)).astype(F32), F32(2)) == 0)
        out = np.clip((sign * r).astype(F32) * step, -max_norm, max_norm).astype(F32)
        out = np.where(np.isinf(a), a, np.where(np.isnan(a), np.nan, out))
        return (out * scale).astype(F32)


MXC_ROUND = {"even": "even", "nearest": "nearest", "floor": "zero"}


def _mxc_window(amax) -> np.ndarray:
    """amax whose f32 log2 rounds up to the next integer (amax not a power of two)."""
    lg = log2_f32(amax)
    return (lg == np.round(lg)) & (np.frexp(np.asarray(amax, F64))[0] != 0.5)


@pytest.mark.parametrize("fmt", tuple(_MXC))
@pytest.mark.parametrize("rnd", tuple(MXC_ROUND))
def test_microxcaling_matches_mxlower_cast_outside_five_conditions(fmt, rnd):
    """round "even" / "nearest" / "floor" are mxlower's cast with roundmode even / nearest (ties
    away) / zero and scalemode max (= floor).  Every value agrees except: (a) blocks whose amax's
    f32 log2 rounds up to an integer (E one too large); (b) -0 inputs (become +0); (c) a value
    whose scaled magnitude is 2^-25 below half the smallest element step (f32's floor(t + 0.5)
    gives one step; even and nearest only, see the next tests); (d) with "floor", an element
    whose own f32 log2 rounds up to an integer (truncated one bit coarser); (e) mxint8: negative
    values that round to zero stay -0 (mxlower's integer codes give +0)."""
    rng = np.random.default_rng(5)
    amax = binade_sweep(rng, n=600, lo=-120, hi=120)
    x = blocks(amax, fill=0.0)
    x[:, 1:] = (x[:, :1] * rng.uniform(-1, 1, (x.shape[0], 31))).astype(F32)
    x[::7, 5] = F32(-0.0)
    got = mxc_quantize(x, fmt, rnd)
    want = R.cast(x, fmt, roundmode=MXC_ROUND[rnd])
    same = (got.view(U32) == want.view(U32)) | (np.isnan(got) & np.isnan(want))
    win = _mxc_window(np.max(np.abs(x), -1))[:, None] & np.ones(x.shape, bool)
    negzero = x.view(U32) == 0x80000000
    E = R.quantize(x, fmt)[1].view(U8).astype(np.int64) - 127
    a = np.ldexp(np.abs(x).astype(F64), -E).astype(F32)  # the scaled element, exact
    emin = 2 - 2 ** (_MXC[fmt][0] - 1)
    elem_win = (rnd == "floor") & (_MXC[fmt][0] > 0) & _mxc_window(a) & (a > 2.0 ** emin)
    int_negzero = (fmt == "mxint8") & (x < 0) & (want == 0)
    assert win.any() and negzero.any()
    assert np.all(same | win | negzero | elem_win | int_negzero)
    assert not np.all(same[win])
    assert np.all(got.view(U32)[negzero & ~win] == 0)
    if fmt != "mxint8":
        assert np.all(want.view(U32)[negzero] == 0x80000000)
    else:
        assert np.all(got.view(U32)[int_negzero & ~win] == 0x80000000)


def test_microxcaling_f32_log2_window():
    """For the largest f32 below 2^k the window holds for every k except -1, 0, 1 and 2; there
    E = floor(log2 amax) + 1 - emax_elem, one more than mxlower's floor."""
    k = np.arange(-110, 121)
    amax = np.nextafter(np.ldexp(F32(1), k).astype(F32), F32(0))
    win = _mxc_window(amax)
    assert np.array_equal(~win, np.isin(k, (-1, 0, 1, 2)))
    mxc_E = np.floor(log2_f32(amax)).astype(int) - 8  # its shared exponent, mxfp8_e4m3
    mx_E = R.quantize(blocks(amax), "mxfp8_e4m3")[1].view(U8)[:, 0].astype(int) - 127
    assert np.array_equal(mxc_E - mx_E, win.astype(int))


def test_microxcaling_f32_half_rounds_up():
    """(c): mxfp4_e2m1 with E = 0 (amax in [4, 8)): x = 0.25 - 2^-26 is just below half the
    smallest step (0.5); f32's 0.5 - 2^-25 + 0.5 rounds to 1, so microxcaling gives 0.5,
    mxlower 0."""
    x = blocks(np.float32([4.0]), fill=0.0)
    x[0, 1] = F32(0.25 - 2 ** -26)
    for rnd in ("even", "nearest"):
        assert mxc_quantize(x, "mxfp4_e2m1", rnd)[0, 1] == 0.5
        assert R.cast(x, "mxfp4_e2m1", roundmode=MXC_ROUND[rnd])[0, 1] == 0.0
    assert mxc_quantize(x, "mxfp4_e2m1", "floor")[0, 1] == 0.0


def test_microxcaling_floor_truncates_elements_in_the_window_coarser():
    """(d): mxfp4_e2m1, amax = x = 4 - 2^-22 (E = -1, outside the window): the scaled element
    8 - 2^-21 has f32 log2 3, so microxcaling truncates it with the step of [8, 16) (4) and
    gives 4 * 2^-1 = 2; mxlower's `zero` saturates it to 6 and gives 3."""
    x = blocks(np.nextafter(F32(4), F32(0)), fill=0.0)
    assert mxc_quantize(x, "mxfp4_e2m1", "floor")[0, 0] == 2.0
    assert R.cast(x, "mxfp4_e2m1", roundmode="zero")[0, 0] == 3.0


def test_microxcaling_non_finite_blocks_agree():
    """A NaN or Inf makes microxcaling's whole block NaN, as mxlower's NaN scale does after
    dequantize."""
    x = blocks(np.float32([np.nan, np.inf, -np.inf]), fill=1.0)
    assert np.all(np.isnan(mxc_quantize(x, "mxfp8_e4m3")))
    assert np.all(np.isnan(R.cast(x, "mxfp8_e4m3")))


# ================================================================================= TensorCast

def tc_scale_code(amax, fmt, mode="floor") -> np.ndarray:
    """TensorCast's torchcast ``select_scales`` for an e8m0 scale: maxexp = floor(log2(amax +
    2^-126)) in f32, MIDMAX adds 1 when amax / 2^maxexp > midmax / 2^emax (strictly); the code
    maxexp - emax + 127 is cast to uint8 without clamping (wraps)."""
    f = get_format(fmt)
    spec = resolve(fmt).number
    a = np.asarray(amax, F32)
    me = np.floor(log2_f32((a + F32(2.0 ** -126)).astype(F32))).astype(np.int64)
    if mode == "midmax":
        mid = spec.midmax
        if spec.special == "fn":  # tcast: midmax -= (midmax - max) / 2 for fn types
            mid -= (mid - spec.max) / 2
        me = me + ((a.astype(F64) / np.ldexp(1.0, me)) > mid / 2.0 ** f.emax_elem)
    return ((me - f.emax_elem + 127) % 256).astype(U8)


def tc_round(t, mode) -> np.ndarray:
    """TensorCast's element rounding of t (f32): EVEN half-even, AWAY trunc(t + sign(t)/2) in
    f32, ZERO half toward zero (the default branch: ties where frac(|t|) == 0.5 truncate)."""
    t = np.asarray(t, F32)
    if mode == "even":
        return np.round(t)
    if mode == "away":
        return np.trunc((t + np.sign(t) * F32(0.5)).astype(F32))
    return np.where(np.abs(t) % 1 == 0.5, np.trunc(t), np.round(t))


def test_tensorcast_floor_scale_unclamped_below():
    """FLOOR: mxlower's `max` (= floor) code for amax >= 2^(emax_elem - 127), except one higher
    where TensorCast's f32 sum amax + 2^-126 (taken before the log2) reaches the next power of
    two (amax within 2^-126 below it: only amax < 2^-101 or so); below 2^(emax_elem - 127)
    mxlower clamps to 0x00 while TensorCast's code wraps modulo 256 (e.g. 0xFF, the NaN code, for
    E = -128).  (The f32-log2 window of microxcaling applies here too.)"""
    for fmt in ("mxfp8_e4m3", "mxfp4_e2m1"):
        emax = get_format(fmt).emax_elem
        a = binade_sweep(np.random.default_rng(6), n=2000, lo=-126, hi=120)
        a = np.concatenate([a, from_bits(np.arange(1, 1 << 20, 997))])
        a = a[~_mxc_window(a)]
        ms = R.encode(blocks(a), fmt).scales.view(U8)[:, 0]
        ts = tc_scale_code(a, fmt)
        low = a < 2.0 ** (emax - 127)
        fl = np.frexp(a.astype(F64))[1]
        cross = (np.frexp((a + F32(2.0 ** -126)).astype(F32).astype(F64))[1] > fl) & ~low
        assert cross.any() or fmt == "mxfp8_e4m3"  # there every such amax is below the range
        assert np.all(ms[low] == 0) and np.all(ts[cross].astype(int) - ms[cross] == 1)
        # below the range TensorCast's code is (floor(log2(amax + 2^-126)) - emax + 127) mod 256,
        # which is 0 only where that sum reaches 2^(emax - 127)
        assert np.array_equal(ms != ts, (low & (ts != 0)) | cross)
        assert (low & (ts != 0)).any()
    assert tc_scale_code(F32(2.0 ** (8 - 128)), "mxfp8_e4m3") == 0xFF


def test_tensorcast_midmax_differs_for_fn_types_and_at_the_tie():
    """MIDMAX: for f8E4M3FN TensorCast's midmax is 464 where mxlower's is 480, so they differ for
    amax * 2^-E in (464, 480); for the other formats the midmax is the same and only the tie
    differs (TensorCast steps up above midmax, mxlower from midmax on)."""
    k = 2.0 ** np.arange(-30, 30, 5)
    s = np.concatenate([np.arange(448, 512, 0.5), [464, 480]])
    a = (s[:, None] * k / 256).ravel().astype(F32)
    ms = R.encode(blocks(a), "mxfp8_e4m3", scalemode="midmax").scales.view(U8)[:, 0]
    ts = tc_scale_code(a, "mxfp8_e4m3", "midmax")
    sig = np.repeat(s, len(k))
    assert np.array_equal(ms != ts, (sig > 464) & (sig < 480))
    for fmt in ("mxfp8_e5m2", "mxfp4_e2m1", "mxfp6_e2m3", "mxfp6_e3m2"):
        f = get_format(fmt)
        mid = resolve(fmt).number.midmax
        a = np.float32([mid, np.nextafter(F32(mid), F32(0)), np.nextafter(F32(mid), F32(1e9))])
        ms = R.encode(blocks(a), fmt, scalemode="midmax").scales.view(U8)[:, 0]
        ts = tc_scale_code(a, fmt, "midmax")
        assert list(ms.astype(int) - ts) == [1, 0, 0], fmt
        assert ms[0] == 127 + 1 and f.emax_elem >= 0


def test_tensorcast_zero_is_half_down():
    """TensorCast's ZERO rounds to nearest with ties toward zero: mxlower's `half_down`, not its
    `zero` (truncation, which differs for fractions above 1/2) nor `even` (which differs on ties
    with an odd floor)."""
    t = np.float32([0.5, 1.5, 2.5, 2.6, 3.4, 3.5, -2.5, -3.5, 0.7])
    tc = tc_round(t, "zero")
    assert list(tc) == [0, 1, 2, 3, 3, 3, -2, -3, 1]
    zero = np.sign(t) * R.round_codes(np.abs(t).astype(F64), "int8", "zero")
    even = np.sign(t) * R.round_codes(np.abs(t).astype(F64), "int8", "even")
    assert list(zero) == [0, 1, 2, 2, 3, 3, -2, -3, 0]
    assert list(even) == [0, 2, 2, 3, 3, 4, -2, -4, 1]
    assert (tc != zero).any() and (tc != even).any()
    assert np.array_equal(tc_round(t, "even"), even)
    half_down = np.sign(t) * R.round_codes(np.abs(t).astype(F64), "int8", "half_down")
    assert np.array_equal(tc, half_down)
    # and as a cast: TensorCast's element rule (x scaled to units of the element's step, then
    # ZERO) on every f16 value against mxlower's unscaled e2m1fo cast with half_down
    x = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(F32)
    x = np.concatenate([x, -x])
    spec = resolve("e2m1fo").number
    step = np.exp2(np.maximum(np.floor(log2_f32(np.abs(x) + F32(2.0 ** -126))), spec.emin)
                   - spec.man_bits).astype(F32)
    tcv = np.clip(tc_round(x / step, "zero") * step, -spec.max, spec.max)
    want = R.cast(x, "e2m1fo", roundmode="half_down")
    assert np.array_equal(tcv, want)


def test_tensorcast_away_f32_half():
    """AWAY is mxlower's `nearest` (ties away) except t = 1/2 - 2^-25, where f32's t + 1/2
    rounds to 1 (as in microxcaling)."""
    t = np.float32([0.5 - 2 ** -25, 0.5, 1.5, 2.5, 0.49, 3.49999976])
    want = R.round_codes(t.astype(F64), "int8", "nearest")
    got = tc_round(t, "away")
    assert list(got != want) == [True, False, False, False, False, False]


# ======================================================================================= JAX

def _jax_quantize(x, mode, fmt="mxfp8_e4m3"):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    # JAX's own quantizer is private: mxlower.bindings.jax_private reaches it
    from mxlower.bindings.jax_private import jax_quantize

    if mode == "mxfp8":  # blocks of 32, e8m0 scales; e4m3 or e5m2 elements
        cfg = dataclasses.replace(jax.nn.get_scaled_dot_general_config("mxfp8"),
                                  data_type=get_format(fmt).element_dtype)
    else:  # blocks of 16 of e2m1 with e4m3 scales, global scale 1
        cfg = jax.nn.get_scaled_dot_general_config("nvfp4", global_scale=jnp.float32(1))
    e, s = jax.jit(lambda v: jax_quantize(v, cfg))(jnp.asarray(x))
    return np.asarray(e).view(U8), np.asarray(s).view(U8)[:, 0]


@pytest.mark.parametrize("fmt", ("mxfp8_e4m3", "mxfp8_e5m2"))
def test_jax_mxfp8_is_rceil_for_normal_quotients(fmt):
    """JAX's mxfp8 quantizer (what jax.nn.scaled_matmul uses) is mxlower's `rceil`, scale
    and elements, for every f32 block whose q = amax / max_elem is >= 2^-126, including every
    amax within 64 ulps of the thresholds max_elem * 2^k."""
    mx = F32(get_format(fmt).max_elem)
    k = np.arange(-119, 120, 4)
    k = k[np.ldexp(float(mx), k) < 2.0 ** 127]
    th = bits(np.ldexp(mx, k).astype(F32)).astype(np.int64)
    amax = from_bits((th[:, None] + np.arange(-64, 65)).ravel())
    rng = np.random.default_rng(7)
    x = blocks(np.concatenate([amax, binade_sweep(rng, n=1000, lo=-117, hi=120)]))
    x[:, 1:] = (x[:, :1] * rng.uniform(-1, 1, (x.shape[0], 31))).astype(F32)
    x = x[np.max(np.abs(x), -1) / mx >= 2.0 ** -126]
    je, js = _jax_quantize(x, "mxfp8", fmt)
    me, ms = mx_codes(x, fmt, "rceil")
    assert np.array_equal(js, ms) and np.array_equal(je, me)


def test_jax_mxfp8_flushes_subnormal_quotients_on_cpu():
    """On XLA:CPU q < 2^-126 is flushed: for 2^-127 < q < 2^-126 JAX's scale is 0x00 where
    mxlower's is 0x01, and its elements are x * 2^127 (saturating)."""
    x = blocks(np.float32([448 * 1.5 * 2.0 ** -127, 448 * 1.9 * 2.0 ** -127]))
    je, js = _jax_quantize(x, "mxfp8")
    me, ms = mx_codes(x, "mxfp8_e4m3", "rceil")
    assert list(ms) == [1, 1] and list(js) == [0, 0]
    assert list(je[:, 0]) == [0x7E, 0x7E] and list(me[:, 0]) == [0x7A, 0x7D]


def test_jax_mxfp8_non_finite_blocks():
    """A NaN in a block wraps JAX's scale to 0x00 (mxlower: 0xFF, elements 0); an Inf gives
    0xFF as in mxlower, but the Inf's element is a NaN code where mxlower writes 0."""
    x = blocks(np.float32([np.nan, np.inf]), fill=1.0)
    je, js = _jax_quantize(x, "mxfp8")
    me, ms = mx_codes(x, "mxfp8_e4m3", "rceil")
    assert list(ms) == [0xFF, 0xFF] and not me.any()
    assert list(js) == [0x00, 0xFF]
    assert je[0, 0] & 0x7F == 0x7F and je[1, 0] & 0x7F == 0x7F and not je[1, 1:].any()


def test_jax_nvfp4_differs_on_cpu():
    """nvfp4: same formula as mxlower's section 4, but on XLA:CPU the element division becomes
    a multiplication by a reciprocal (300 in a block of amax 1440: 1.5 instead of 1.0), a block
    whose scale is 0 gets x / 0 (+-6 and the -0 code) instead of +0, and an Inf block gets
    scale 448 (0x7E) instead of NaN."""
    x = np.zeros((3, 16), F32)
    x[0, :2] = [1440, 300]
    x[1, :2] = [2.0 ** -12, 2.0 ** -13]
    x[2, :2] = [np.inf, 1]
    je, js = _jax_quantize(x, "nvfp4")
    me, ms = R.quantize(x, "nvfp4")
    me, ms = me.view(U8), ms.view(U8)[:, 0]
    assert list(ms) == [0x77, 0, 0x7F] and list(js) == [0x77, 0, 0x7E]
    assert (me[0, 1], je[0, 1]) == (0x2, 0x3)
    assert not me[1].any() and je[1, 0] == 0x7 and je[1, 2] == 0x8


# ======================================================================================= XLA

def xla_quantize(x, fmt):
    """XLA's ``__op$quantize`` expansion (block_scaling_rewriter): scale = convert_e8m0(amax /
    2^emax_elem), elements = convert(x / scale), no clamp."""
    f = get_format(fmt)
    amax = np.max(np.abs(x), axis=-1)
    with np.errstate(all="ignore"):
        v = (amax / F32(2.0 ** f.emax_elem)).astype(F32)
        s = R.convert(v, "f8E8M0FNU")
        data = (x / s.astype(F32)[:, None]).astype(F32)
    return R.convert(data, f.element_dtype).view(U8), s.view(U8)


@pytest.mark.parametrize("fmt", FLOAT_MX)
def test_xla_quantize_is_nearest(fmt):
    """`nearest` is XLA's rule: same scale and element codes for every finite block whose amax /
    2^emax_elem is not 0 in f32 (no clamp is needed: after `nearest`'s scale every element is at
    most max_elem), except one amax: 2^(emax_elem - 127) * (1 + 2^-23), whose quotient
    2^-127 + 2^-150 XLA's f32 division rounds (a tie, to even) to 2^-127, giving scale 0x00,
    where `nearest` takes the quotient exactly (above 2^-127: 0x01).  Where the quotient is 0
    in f32 (an all-zero block, or amax below 2^(emax_elem - 150)) XLA converts 0 to
    f8E8M0FNU, which is NaN (0xFF); mxlower gives 0x00.  A non-finite block gets scale 0xFF in
    both, but XLA's elements are x / NaN (NaN codes, or the -0 code for f4/f6) where mxlower
    writes +0."""
    rng = np.random.default_rng(8)
    emax = get_format(fmt).emax_elem
    x = blocks(binade_sweep(rng, n=1500, lo=-126, hi=126))
    x[:, 1:] = (x[:, :1] * rng.uniform(-1, 1, (x.shape[0], 31))).astype(F32)
    tie = F32(2.0 ** (emax - 127) * (1 + 2.0 ** -23))  # exact: a normal f32 (emax >= 1)
    x = np.concatenate([x, blocks(from_bits(np.arange(1, 1 << 23, 4099)), fill=0.0),
                        blocks(np.float32([tie, -tie]), fill=0.0)])
    xe, xs = xla_quantize(x, fmt)
    me, ms = mx_codes(x, fmt, "nearest")
    amax = np.max(np.abs(x), -1)
    with np.errstate(under="ignore"):
        under = amax / F32(2.0 ** emax) == 0
    at_tie = amax == tie
    assert under.any() and at_tie.sum() >= 2
    same = ~under & ~at_tie
    assert np.array_equal(xs[same], ms[same]) and np.array_equal(xe[same], me[same])
    assert np.all(xs[under] == 0xFF) and np.all(ms[under] == 0)
    assert np.all(xs[at_tie] == 0x00) and np.all(ms[at_tie] == 0x01)
    n = blocks(np.float32([np.nan, np.inf]), fill=1.0)
    xe, xs = xla_quantize(n, fmt)
    me, ms = mx_codes(n, fmt, "nearest")
    assert list(xs) == list(ms) == [0xFF, 0xFF]
    assert not me.any() and xe.all()
