"""Exactness where XLA:CPU's own arithmetic is not (issue 11): every lowering of quantize and
scaled dot agrees with mxlower.reference on the inputs that expose XLA:CPU's two behaviours.

XLA:CPU rewrites a division by a constant or a broadcast into a multiplication by a rounded
reciprocal, and runs f32 arithmetic (dots included) with subnormals flushed.  Before issue 11
that broke three things, and each has its tests here:

* ``rceil``: q = amax / max_elem was such a division, so about one f32 per binade got the
  wrong scale (mxint8, amax 0x477e0001: scale 0x8e instead of 0x8f).  The recipe now compares
  amax's mantissa with a per-format threshold.  Tests: the recipe itself evaluated in NumPy on
  every mantissa of whole binades; on every path, the neighbourhoods of every threshold (the
  only mantissas whose scale a rounded reciprocal can move) in binades spread over the range.
* nvfp4: x / g, amax / 6 and y / s were such divisions: ties of the f4 and E4M3 roundings came
  out wrong (300 / 240 = 1.25 gave f4 1.5).  Tests: exact f4 and E4M3 midpoints and their
  neighbours after the block scale, with and without a global scale (subnormal g and x too).
* scaled dot: XLA's f32 ``dot_general`` flushed operands and products below 2^-126 (scale
  0x00 times 0xE3 gave 0 instead of 2^-22).  Tests: scale codes near 0x00 against codes near
  0xFF, products and results below 2^-126, cancellation, the overflow of f32 partial sums, a
  plain operand with subnormals, bf16 compute, a global scale, both sides of the run-time test
  that picks the f32 contraction.

"Every path": ``mxlower-mx-to-stablehlo`` on XLA:CPU without and with
``mxlower-expand-narrow-floats``, the LLVM engine, XLA's custom calls
(``mxlower-legalize-xla-mx``), ``mxlower.jax`` with ``impl="xla"`` and ``impl="auto"`` (the
FFI kernels on the CPU) and ``jax.nn.scaled_matmul`` after ``mxlower.jax.install()``.
The section 3 ``nearest`` rule for quotients below 2^-126 is pinned on every path as well.
"""

from __future__ import annotations

import fractions
import functools
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mxlower.jax as mxj
from mxlower import reference as R
from mxlower import types
from mxlower.execution import ffi
from mxlower.execution.run import run_module
from mxlower.formats import FLOAT_TYPES, FORMATS
from mxlower.lowering import mx_math
from mxlower.testing import MxModule, assert_dot_close, tensor_type
from numpy_ops import NumPyOps

F32 = np.float32
MX = [f for f in FORMATS if not FORMATS[f].is_nvfp4]
PIPE = "builtin.module(mxlower-mx-to-stablehlo)"
PIPE_EXPANDED = "builtin.module(mxlower-mx-to-stablehlo, mxlower-expand-narrow-floats)"
MODULE_PATHS = ("xla", "xla-expanded", "llvm")
#: XLA:CPU has no f6 types: their converts become integer code (and f6 values ui8 codes)
EXPAND_F6 = "mxlower-expand-narrow-floats{types=f6E3M2FN,f6E2M3FN}"
F6_DTYPES = (np.dtype(ml_dtypes.float6_e3m2fn), np.dtype(ml_dtypes.float6_e2m3fn))
DOT_DIMS = (((1,), (1,)), ((), ()))


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(F32)


def _codes(a) -> np.ndarray:
    """Integer codes of typed or code arrays alike (ui8 codes of an expanded module, f6 codes
    JAX holds as uint8, f4/f8 values, int8 mxint8 codes)."""
    return np.asarray(R.bits(np.asarray(a))).astype(np.int64) & 0xFF


def _run_module(m: MxModule, path: str) -> list[np.ndarray]:
    if path == "xla":  # f6 needs expand-narrow-floats{types=f6...}; MxModule appends it
        return m.run()
    if path == "xla-expanded":  # every narrow type becomes ui8 codes, arguments included
        ins = [R.bits(a).astype(np.uint8) if types.of_dtype(a.dtype).mlir in FLOAT_TYPES else a
               for a in m.inputs]
        return run_module(m.text(), ins, pipeline=PIPE_EXPANDED)
    return run_module(m.text(), m.inputs, pipeline=PIPE, backend="llvm")


def _kernels_available() -> bool:
    return ffi.available()


# ============================================================================== quantize


@functools.cache
def _jax_quantize(fmt: str, k: int, mode: str | None, with_g: bool, impl: str):
    def f(x, *g):
        q = mxj.quantize(x, fmt, block_size=k, scale_mode=mode or "floor",
                         global_scale=g[0] if g else None, impl=impl)
        return q.elements, q.scales

    return jax.jit(f)


def _custom_call_quantize(cases: list[tuple], mode: str) -> list[tuple]:
    """``__op$quantize`` of each case (XLA's form: blocks along the last axis, the format from
    the result types), legalized with ``xla-scale-mode``, on XLA:CPU."""
    args, lines, rets, types = [], [], [], []
    for i, (x, fmt, k, _, _) in enumerate(cases):
        f = FORMATS[fmt]
        et = tensor_type(x.shape, f.element)
        st = tensor_type(x.shape[:-1] + (x.shape[-1] // k,), f.scale)
        args.append(f"%x{i}: {tensor_type(x.shape, 'f32')}")
        lines.append(f"  %q{i}, %s{i} = stablehlo.custom_call @__op$quantize(%x{i}) : "
                     f"({tensor_type(x.shape, 'f32')}) -> ({et}, {st})")
        rets += [f"%q{i}", f"%s{i}"]
        types += [et, st]
    text = (f"func.func @main({', '.join(args)}) -> ({', '.join(types)}) {{\n"
            + "\n".join(lines) + f"\n  return {', '.join(rets)} : {', '.join(types)}\n}}\n")
    pipe = (f"builtin.module(mxlower-mx-to-stablehlo{{xla-scale-mode={mode}}}, {EXPAND_F6})")
    outs = run_module(text, [c[0] for c in cases], pipeline=pipe)
    return list(zip(outs[::2], outs[1::2]))


def quantize_on(path: str, cases: list[tuple]) -> list[tuple]:
    """(elements, scales) of each case ``(x, format, block size, scale mode, g)`` (blocks
    along the last axis) computed by ``path``."""
    if path in MODULE_PATHS:
        m = MxModule()
        for x, fmt, k, mode, g in cases:
            gv = m.arg(np.array(g, F32)) if g is not None else None
            m.ret(*m.quantize(m.arg(x), fmt, block_size=k, scale_mode=mode, global_scale=gv))
        outs = _run_module(m, path)
        return list(zip(outs[::2], outs[1::2]))
    if path in ("jax-xla", "jax-auto"):
        impl = path.split("-")[1]
        out = []
        for x, fmt, k, mode, g in cases:
            fn = _jax_quantize(fmt, k, mode, g is not None, impl)
            e, s = fn(x, *([] if g is None else [np.asarray(g, F32)]))
            out.append((np.asarray(e), np.asarray(s)))
        return out
    raise ValueError(path)


QUANTIZE_PATHS = [*MODULE_PATHS, "jax-xla",
                  pytest.param("jax-auto", marks=pytest.mark.skipif(
                      not _kernels_available(), reason="the FFI kernels need upstream MLIR"))]


def _check_quantize(got: list[tuple], cases: list[tuple], what: str) -> None:
    for (e, s), (x, fmt, k, mode, g) in zip(got, cases):
        we, ws = R.quantize(x, fmt, block_size=k, scale_mode=mode or "floor", global_scale=g)
        for name, have, want in (("scales", s, ws), ("elements", e, we)):
            bad = _codes(have).reshape(_codes(want).shape) != _codes(want)
            if bad.any():
                at = tuple(int(i) for i in np.argwhere(bad)[0])
                start = at[-1] * k if name == "scales" else at[-1] // k * k
                block = x[at[:-1]][start:start + k]
                raise AssertionError(
                    f"{what}, {fmt}, g={g}: {int(bad.sum())} {name} of {bad.size} differ; "
                    f"first at {list(at)}: got {int(_codes(have).reshape(bad.shape)[at]):#x}, "
                    f"expected {int(_codes(want)[at]):#x}; block {block[:4].tolist()}... "
                    f"(bits {[hex(int(v)) for v in block[:2].view(np.uint32)]})")


# ----------------------------------------------------------------------------- rceil


def _rceil_limits(fmt: str) -> tuple[int, int, int]:
    """(the mantissa field above which q = amax / M rounds over a power of two; the amax
    bits below which q is subnormal; the amax bits above which a subnormal q exceeds
    2^-127): every point where rceil's E steps."""
    f = FORMATS[fmt]
    m = fractions.Fraction(f.max_elem)
    two = fractions.Fraction(2)
    field = math.floor((m / 2 ** f.emax_elem * (1 + two ** -24) - 1) * 2 ** 23)
    return (field, mx_math.f32_bits_floor(m * two ** -126),
            mx_math.f32_bits_floor(m * two ** -127 * (1 + two ** -23)))


def _rceil_amax(fmt: str, rng: np.random.Generator) -> np.ndarray:
    """amax bits: in binades spread over the whole range (subnormal amax, subnormal q, the
    binade where q becomes normal, ordinary and top binades), every mantissa within 2^9 of the
    threshold and of the binade's ends, plus random ones; around the subnormal-q thresholds
    too.  On main, the rounded reciprocal moved E only next to the threshold."""
    field, low, thr = _rceil_limits(fmt)
    emax = FORMATS[fmt].emax_elem
    near = np.arange(-512, 513)
    out = []
    for e in sorted({0, emax, emax + 1, emax + 2, 100, 127, 160, 254}):
        mant = np.concatenate([field + near, near, (1 << 23) - 1 + near,
                               rng.integers(0, 1 << 23, 1024)])
        mant = mant[(mant >= 0) & (mant < 1 << 23)]
        out.append((e << 23) | mant)
    out += [low + near, thr + near]
    bits = np.unique(np.concatenate(out)).astype(np.uint32)
    return bits[(bits > 0) & (bits < 0x7F800000)]


def _blocks_with_max(amax_bits: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Blocks of k whose first value is amax (with a random sign) and the others smaller."""
    amax = _f32(amax_bits)
    x = np.empty((amax.size, k), F32)
    x[:, 0] = amax * rng.choice([-1, 1], amax.size).astype(F32)
    x[:, 1:] = (amax[:, None] * rng.uniform(-1, 1, (amax.size, k - 1))).astype(F32)
    return x


@functools.cache
def _rceil_cases() -> list[tuple]:
    rng = np.random.default_rng(110)
    return [(_blocks_with_max(_rceil_amax(fmt, rng), 2, rng), fmt, 2, "rceil", None)
            for fmt in MX]


def _exponent_oracle(amax: np.ndarray, fmt: str, mode: str) -> np.ndarray:
    """docs/semantics.md section 3.4, unclamped, from the definitions (NumPy's f32 division
    is IEEE, subnormals kept): rceil E = ceil(log2(RNE(amax / M))); nearest from v = amax /
    2^emax taken exactly (in f64): floor(log2 v) plus one when v's significand is >= 1.5 for
    v >= 2^-126, -126 for 2^-127 < v < 2^-126, -127 for v <= 2^-127."""
    f = FORMATS[fmt]
    with np.errstate(under="ignore"):
        if mode == "rceil":
            q = amax / F32(f.max_elem)
            m, e = np.frexp(q.astype(np.float64))
            return np.where(q == 0, -127, np.where(m == 0.5, e - 1, e))
    v = amax.astype(np.float64) / 2.0 ** f.emax_elem  # exact
    m, e = np.frexp(np.where(v > 0, v, 1.0))  # v = m 2^e, m in [0.5, 1)
    hi = (e - 1) + (m >= 0.75)
    return np.where(v >= 2.0 ** -126, hi, np.where(v > 2.0 ** -127, -126, -127))


@pytest.mark.parametrize("fmt", MX)
def test_rceil_recipe_on_whole_binades(fmt):
    """mx_math.shared_exponent(rceil), run in NumPy, on all 2^23 mantissas of the binade where
    q = amax / M becomes normal and of [1, 2), and on amax below M * 2^-126 (q subnormal:
    2^21 spread out, and 2^17 around each of the two steps there), against the definition
    (clamped, as the op clamps); the definition itself against mxlower.reference on a
    sample."""
    emax = FORMATS[fmt].emax_elem
    mant = np.arange(1 << 23, dtype=np.int64)
    _, low, thr = _rceil_limits(fmt)
    near = np.arange(-(1 << 16), 1 << 16)
    below = np.concatenate([np.arange(1, low, max(1, low >> 21)), low + near, thr + near])
    for bits in (((emax + 1) << 23) | mant, (127 << 23) | mant, below[below > 0]):
        got = np.clip(mx_math.shared_exponent(NumPyOps(), bits, FORMATS[fmt], "rceil"), -127, 127)
        want = np.clip(_exponent_oracle(_f32(bits), fmt, "rceil"), -127, 127)  # E is clamped
        bad = got != want
        assert not bad.any(), (fmt, hex(int(bits[bad][0])), int(got[bad][0]),
                               int(want[bad][0]))
    sample = _rceil_cases()[MX.index(fmt)][0][:, :1]
    _, s = R.quantize(np.abs(sample), fmt, block_size=1, scale_mode="rceil")
    e = np.clip(_exponent_oracle(np.abs(sample[:, 0]), fmt, "rceil"), -127, 127)
    assert (_codes(s)[:, 0] == e + 127).all()


@pytest.mark.parametrize("path", QUANTIZE_PATHS)
def test_rceil_threshold_neighbourhoods(path):
    """Every MX format, rceil, the amax of _rceil_amax (about 30000 blocks each)."""
    cases = _rceil_cases()
    _check_quantize(quantize_on(path, cases), cases, f"rceil on {path}")


def test_rceil_custom_call():
    """XLA's ``__op$quantize`` legalized with xla-scale-mode=rceil (f8, f6 and f4 formats;
    XLA has no mxint8 form)."""
    cases = [c for c in _rceil_cases() if c[1] != "mxint8"]
    _check_quantize(_custom_call_quantize(cases, "rceil"), cases, "rceil custom call")


def test_rceil_reproducer_everywhere():
    """The issue's reproducer: mxint8, block [65024.0039 (0x477e0001), 0, ...]: scale 0x8f,
    element 0x40."""
    x = np.zeros((1, 32), F32)
    x[0, 0] = _f32(0x477E0001)
    cases = [(x, "mxint8", 32, "rceil", None)]
    for path in [*MODULE_PATHS, "jax-xla"] + (["jax-auto"] if _kernels_available() else []):
        ((e, s),) = quantize_on(path, cases)
        assert (_codes(s)[0, 0], _codes(e)[0, 0]) == (0x8F, 0x40), path


# ----------------------------------------------------------------------------- nearest


@functools.cache
def _nearest_cases() -> list[tuple]:
    """amax around the quotients v = amax / 2^emax = 2^-126, (2^-127, 2^-126), 2^-127 and
    below: the rule of section 3 on the exact v (E = -126 on (2^-127, 2^-126), -127 at or
    below), including the v just above 2^-127 whose f32 quotient would round to 2^-127."""
    rng = np.random.default_rng(3)
    cases = []
    for fmt in MX:
        emax = FORMATS[fmt].emax_elem
        edges = [2.0 ** (emax - 126), 2.0 ** (emax - 127), 2.0 ** (emax - 127) * 1.5,
                 2.0 ** (emax - 128), 2.0 ** -149 * 3]
        near = np.arange(-300, 301)
        bits = np.concatenate([int(_f32_bits(v)) + near for v in edges])
        bits = np.unique(bits[bits > 0]).astype(np.uint32)
        cases.append((_blocks_with_max(bits, 2, rng), fmt, 2, "nearest", None))
    return cases


def _f32_bits(v: float) -> int:
    return int(np.array(v, F32).view(np.uint32))


def test_nearest_low_rule_in_reference_and_recipe():
    for x, fmt, _, _, _ in _nearest_cases():
        amax = np.abs(x[:, 0])
        want = _exponent_oracle(amax, fmt, "nearest")
        v = amax.astype(np.float64) / 2.0 ** FORMATS[fmt].emax_elem  # exact
        with np.errstate(under="ignore"):
            vr = amax / F32(2.0 ** FORMATS[fmt].emax_elem)  # an f32 quotient (not the rule's)
        assert (want[(v > 2.0 ** -127) & (v < 2.0 ** -126)] == -126).all()
        assert (want[v <= 2.0 ** -127] == -127).all()
        if FORMATS[fmt].emax_elem > 0:  # amax finer than v's subnormal grid: the cases where
            # reading a rounded quotient would give -127 are among those checked
            above = (v > 2.0 ** -127) & (vr == 2.0 ** -127)
            assert above.any() and (want[above] == -126).all()
        got = mx_math.shared_exponent(NumPyOps(), amax.view(np.uint32).astype(np.int64),
                                      FORMATS[fmt], "nearest")
        assert (np.clip(got, -127, 127) == np.clip(want, -127, 127)).all(), fmt
        _, s = R.quantize(np.abs(x[:, :1]), fmt, block_size=1, scale_mode="nearest")
        assert (_codes(s)[:, 0] == np.clip(want, -127, 127) + 127).all(), fmt


@pytest.mark.parametrize("path", QUANTIZE_PATHS)
def test_nearest_low_rule_everywhere(path):
    cases = _nearest_cases()
    _check_quantize(quantize_on(path, cases), cases, f"nearest on {path}")


def test_nearest_low_rule_custom_call():
    cases = [c for c in _nearest_cases() if c[1] != "mxint8"]
    _check_quantize(_custom_call_quantize(cases, "nearest"), cases, "nearest custom call")


# ----------------------------------------------------------------------------- nvfp4

#: f4E2M1FN rounding midpoints (positive); every f4 tie lies on one of them
F4_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def _e4m3_values() -> np.ndarray:
    """Every positive finite f8E4M3FN value (the possible block scales)."""
    return R.from_bits(np.arange(1, 0x7F), "f8E4M3FN").astype(np.float64)


def _tie_blocks(rng: np.random.Generator, g: float = 1.0) -> np.ndarray:
    """nvfp4 blocks (of 16) whose y = x / g hit f4 midpoints after division by the block scale
    s: for every E4M3 scale s, amax = 6 s (so s is exact) and the other values mid * s and
    their f32 neighbours, both signs; and blocks whose amax / 6 is an E4M3 midpoint (or next
    to one).  Returned as ``x = y * g`` rounded to f32 (with a g of few significant bits,
    x / g is y exactly)."""
    blocks = []
    for s in _e4m3_values():
        ys = [m * s for m in F4_MIDPOINTS]
        cand = np.array(ys + [np.nextafter(F32(y), F32(0)) for y in ys]
                        + [np.nextafter(F32(y), F32(np.inf)) for y in ys], np.float64)
        cand = cand * rng.choice([-1.0, 1.0], cand.size)
        rng.shuffle(cand)
        for i in range(0, cand.size, 15):
            blk = np.zeros(16)
            blk[0] = 6 * s * rng.choice([-1.0, 1.0])
            blk[1:1 + len(cand[i:i + 15])] = cand[i:i + 15]
            blocks.append(blk)
    e4 = np.sort(_e4m3_values())
    mids = (e4[:-1] + e4[1:]) / 2  # E4M3 rounding midpoints below 448
    for d in (-2, -1, 0, 1, 2):
        a = np.array([float(np.float32(6 * m)) for m in mids], np.float32)
        a = a.view(np.uint32).astype(np.int64) + d
        for v in _f32(a):
            blk = np.zeros(16)
            blk[0] = v
            blk[1:] = v * rng.uniform(-1, 1, 15)
            blocks.append(blk)
    return (np.array(blocks) * g).astype(F32)


def test_nvfp4_thresholds_replace_the_quotient():
    """The claim behind mx_math.nvfp4_element_codes, checked in NumPy (IEEE f32 division,
    ml_dtypes' f4 rounding): for every E4M3 scale s and every f32 |y| within 40 ulps of each
    f4 threshold times s, counting thresholds (>= where the f4 tie rounds up, > where down)
    gives RNE_f4(min(RNE_f32(|y| / s), 6))."""
    s = _e4m3_values().astype(F32)
    p = (s[:, None] * np.array(F4_MIDPOINTS, F32)[None, :]).astype(F32)  # exact
    assert np.array_equal(p.astype(np.float64), s[:, None].astype(np.float64)
                          * np.array(F4_MIDPOINTS)[None, :])
    k = np.arange(-40, 41)
    a = _f32(p.view(np.uint32).astype(np.int64)[:, :, None] + k).reshape(len(s), -1)
    with np.errstate(over="ignore"):
        q = np.minimum(a / s[:, None], F32(6)).astype(F32)  # one IEEE f32 division
    want = np.asarray(q.astype(ml_dtypes.float4_e2m1fn)).view(np.uint8) & 0xF
    count = np.zeros(a.shape, np.int64)
    for t, up in mx_math._F4_THRESHOLDS:
        pt = (s * F32(t)).astype(F32)[:, None]
        count += (a >= pt) if up else (a > pt)
    assert np.array_equal(count, want)


@functools.cache
def _nvfp4_cases() -> list[tuple]:
    rng = np.random.default_rng(4)
    repro = np.zeros((2, 16), F32)
    repro[0, :2] = [300, 1424]
    repro[1, 0] = _f32(0x3D5F3333)
    cases = [(repro[:1], "nvfp4", 16, None, None), (repro[1:], "nvfp4", 16, None, 0.3)]
    cases.append((_tie_blocks(rng), "nvfp4", 16, None, None))
    for g in (0.75, 3.0, 0.3, 3.0 * 2.0 ** -140, 2.0 ** -149 * 5, 1.5e30):
        cases.append((_tie_blocks(rng, g), "nvfp4", 16, None, float(np.float32(g))))
    # random blocks over the whole range (subnormal x included) with random g
    x = (rng.standard_normal((2048, 16)) * 2.0 ** rng.integers(-150, 120, (2048, 1))).astype(F32)
    for g in (F32(0.1), F32(7.3), F32(1.0e-39), F32(3.0e30)):
        cases.append((x, "nvfp4", 16, None, float(g)))
    cases.append((x, "nvfp4", 16, None, None))
    return cases


@pytest.mark.parametrize("path", QUANTIZE_PATHS)
def test_nvfp4_ties(path):
    cases = _nvfp4_cases()
    _check_quantize(quantize_on(path, cases), cases, f"nvfp4 on {path}")


def test_nvfp4_custom_call():
    """``__op$quantize`` to f4E2M1FN elements with f8E4M3FN scales (nvfp4, no global scale)."""
    cases = [c for c in _nvfp4_cases() if c[4] is None]
    _check_quantize(_custom_call_quantize(cases, "nearest"), cases, "nvfp4 custom call")


def test_nvfp4_reproducers():
    """300 / 240 = 1.25 is an f4 tie: code 0x2 (1.0), not 0x3; with g = 0.3 and x =
    0x3d5f3333 the scale is 0x0f, not 0x10."""
    cases = _nvfp4_cases()[:2]
    for path in [*MODULE_PATHS, "jax-xla"] + (["jax-auto"] if _kernels_available() else []):
        (e0, s0), (_, s1) = quantize_on(path, cases)
        assert (_codes(s0)[0, 0], _codes(e0)[0, 0], _codes(e0)[0, 1]) == (0x77, 0x2, 0x7), path
        assert _codes(s1)[0, 0] == 0x0F, path


# ============================================================================== scaled dot


def _e8m0(codes) -> np.ndarray:
    return R.from_bits(np.asarray(codes), "f8E8M0FNU")


def _side(rng, fmt: str, rows: int, k_blocks: int, codes, k: int = 32,
          zero_blocks=None) -> tuple[np.ndarray, np.ndarray]:
    """Random elements of ``fmt`` (both signs, some zeros) and the given scale codes."""
    f = FORMATS[fmt]
    x = rng.standard_normal((rows, k_blocks * k)) * 0.4 * f.max_elem
    x[rng.random(x.shape) < 0.1] = 0
    if zero_blocks is not None:
        x.reshape(rows, k_blocks, k)[zero_blocks] = 0
    e, _ = R.quantize(x.astype(F32), fmt, block_size=k, scale_mode="floor")
    return e, _e8m0(np.broadcast_to(codes, (rows, k_blocks)).astype(np.uint8))


@functools.cache
def _dot_cases() -> list[dict]:
    """Scaled dots, all [M, K] x [N, K] -> [M, N] contracting the last dimension."""
    rng = np.random.default_rng(12)
    cases = []

    def add(name, lhs, rhs, fmts, **kw):
        cases.append(dict(name=name, lhs=lhs, rhs=rhs, fmts=fmts, compute=kw.get("compute", "f32"),
                          g=kw.get("g"), out=kw.get("out", "f32")))

    # the issue's reproducer: ones, lhs scale 2^-127, rhs 2^100: 32 * 2^-27 = 2^-22
    ones = np.ones((1, 32), ml_dtypes.float8_e4m3fn)
    add("reproducer", (ones, _e8m0([[0x00]])), (ones, _e8m0([[0xE3]])),
        ("mxfp8_e4m3", "mxfp8_e4m3"))
    # per K block one class of scale pair: (tiny lhs, ~1 rhs): products around 2^-127, some
    # subnormal; (huge lhs, tiny rhs): normal products; (tiny, tiny): products that underflow;
    # codes 0x00-0x04 against 0xF0-0xFE; rows whose large blocks are zero leave only the
    # subnormal products (results below 2^-126), and signs cancel
    nb, m, n = 8, 6, 5
    kinds = np.array([0, 1, 0, 2, 0, 1, 0, 0])
    lo, hi = np.arange(0, 5), np.arange(0xF0, 0xF6)  # 448 * 2^118 is still an f32
    one = np.arange(0x7C, 0x84)
    lc = np.where(kinds == 1, rng.choice(hi, (m, nb)), rng.choice(lo, (m, nb)))
    rc = np.where(kinds == 0, rng.choice(one, (n, nb)), rng.choice(lo, (n, nb)))
    for lf, rf in (("mxfp8_e4m3", "mxfp8_e5m2"), ("mxfp4_e2m1", "mxfp6_e2m3")):
        zb = (np.arange(m)[:, None] < 3) & (kinds[None, :] == 1)
        add(f"mixed {lf} x {rf}", _side(rng, lf, m, nb, lc, zero_blocks=zb),
            _side(rng, rf, n, nb, rc), (lf, rf))
    # f32 partial sums that overflow and cancel: 32 * 2^127 * 2^10 twice with opposite signs,
    # then 32: an f32 dot gives NaN, the exact sum is 32
    e = np.ones((1, 96), ml_dtypes.float8_e4m3fn)
    e[0, 32:64] = -1
    add("overflow", (e, _e8m0([[0xFE, 0xFE, 0x7F]])),
        (np.ones((1, 96), ml_dtypes.float8_e4m3fn), _e8m0([[0x89, 0x89, 0x7F]])),
        ("mxfp8_e4m3", "mxfp8_e4m3"))
    # the run-time test's boundary: elements 2^-9 (code 0x01), scale codes summing to 146
    # give products 2^-126 (the f32 contraction is exact), to 145 products 2^-127 (not)
    tiny = R.from_bits(np.ones((1, 32), np.uint8), "f8E4M3FN")
    for total in (146, 145):
        add(f"boundary {total}", (tiny, _e8m0([[total - 70]])), (tiny, _e8m0([[70]])),
            ("mxfp8_e4m3", "mxfp8_e4m3"))
    # a plain f32 operand with subnormal values (flushed as dot operands) times 2^100 scales
    lhs = _side(rng, "mxfp8_e4m3", 4, 2, [[0xE3, 0xE0]])
    plain = (rng.standard_normal((3, 64)) * 2.0 ** -140).astype(F32)
    add("plain subnormal", lhs, (plain, None), ("mxfp8_e4m3", None))
    # bf16 compute: dequantized values below 2^-126 are bf16 subnormals
    add("bf16 compute", _side(rng, "mxfp8_e4m3", 4, 2, rng.choice(lo, (4, 2))),
        _side(rng, "mxfp8_e4m3", 3, 2, rng.choice(one, (3, 2))),
        ("mxfp8_e4m3", "mxfp8_e4m3"), compute="bf16")
    # a global scale that lifts a subnormal f32 result: the result is rounded to f32 (losing
    # subnormal bits) and then scaled, as section 6 says
    add("global scale", _side(rng, "mxfp6_e2m3", 3, 2, rng.choice(lo, (3, 2))),
        _side(rng, "mxint8", 2, 2, rng.choice(one, (2, 2))), ("mxfp6_e2m3", "mxint8"),
        g=2.0 ** 100)
    # nvfp4 x nvfp4 with a subnormal global scale
    x = rng.standard_normal((4, 64)).astype(F32)
    ea, sa = R.quantize(x, "nvfp4")
    add("nvfp4", (ea, sa), (ea[:3], sa[:3]), ("nvfp4", "nvfp4"), g=float(F32(3e-39)))
    return cases


def _dequantized(side, fmt, compute):
    v, s = side
    if fmt is None:
        return v.astype(F32).astype(types.dtype(compute))
    return R.dequantize(v, s, fmt, dtype=compute, block_size=16 if fmt == "nvfp4" else 32)


def _check_dot(got, case, what):
    lf, rf = case["fmts"]
    assert_dot_close(np.asarray(got), _dequantized(case["lhs"], lf, case["compute"]),
                     _dequantized(case["rhs"], rf, case["compute"]), DOT_DIMS, case["out"],
                     case["g"], what=f"{case['name']} on {what}")


def _dot_module(cases) -> MxModule:
    m = MxModule()
    for c in cases:
        (a, sa), (b, sb) = c["lhs"], c["rhs"]
        lf, rf = c["fmts"]
        gv = m.arg(np.array(c["g"], F32)) if c["g"] is not None else None
        av, sav = m.arg(a), (m.arg(sa) if lf else None)
        bv, sbv = m.arg(b), (m.arg(sb) if rf else None)
        ks = tuple(16 if f == "nvfp4" else 32 for f in (lf, rf))
        m.ret(m.scaled_dot(av, sav, bv, sbv, lhs_format=lf, rhs_format=rf, dims=DOT_DIMS,
                           out=c["out"], compute=c["compute"], block_sizes=ks,
                           global_scale=gv))
    return m


@pytest.mark.parametrize("path", MODULE_PATHS)
def test_scaled_dot_subnormals(path):
    cases = _dot_cases()
    for got, case in zip(_run_module(_dot_module(cases), path), cases):
        _check_dot(got, case, path)


def test_scaled_dot_reproducer_is_exact():
    """2^-22 exactly on every module path (an f32 dot that flushes gives 0)."""
    case = _dot_cases()[0]
    for path in MODULE_PATHS:
        (got, *_) = _run_module(_dot_module([case]), path)
        assert float(got[0, 0]) == 2.0 ** -22, path


def _block_scaled_dot_text(case) -> str:
    """``__op$block_scaled_dot`` of a case (rank 2, contracting dimension last)."""
    (a, sa), (b, sb) = case["lhs"], case["rhs"]
    t = [tensor_type(v.shape, types.of_dtype(v.dtype).mlir) for v in (a, b)]
    st = [tensor_type(s.shape, "f8E8M0FNU" if s.dtype != ml_dtypes.float8_e4m3fn
                      else "f8E4M3FN") for s in (sa, sb) if s is not None]
    out = tensor_type((a.shape[0], b.shape[0]), "f32")
    ops = ["%a", "%b", "%sa"] + (["%sb"] if sb is not None else [])
    tys = t + st
    if case["g"] is not None:
        ops.append("%g")
        tys.append("tensor<f32>")
    names = ["%a", "%b", "%sa", "%sb", "%g"]
    args = ", ".join(f"{n}: {ty}" for n, ty in zip([o for o in names if o in ops], tys))
    cfg = {"f32": "F32", "bf16": "BF16"}[case["compute"]]
    return (f"func.func @main({args}) -> {out} {{\n"
            f"  %r = stablehlo.custom_call @__op$block_scaled_dot({', '.join(ops)}) "
            f"{{api_version = 4 : i32, backend_config = {{scaled_dot_backend_config = {{dequantize_type = \"{cfg}\"}}}}}}"
            f" : ({', '.join(tys)}) -> {out}\n  return %r : {out}\n}}\n")


def test_scaled_dot_custom_call():
    """``__op$block_scaled_dot`` (XLA's form; no mxint8) on XLA:CPU."""
    for case in _dot_cases():
        if "mxint8" in case["fmts"]:
            continue
        (a, sa), (b, sb) = case["lhs"], case["rhs"]
        inputs = [a, b, sa] + ([sb] if sb is not None else [])
        inputs = [R.bits(v).astype(np.uint8) if v.dtype in F6_DTYPES else v for v in inputs]
        if case["g"] is not None:
            inputs.append(np.array(case["g"], F32))
        pipe = f"builtin.module(mxlower-mx-to-stablehlo, {EXPAND_F6})"
        (got,) = run_module(_block_scaled_dot_text(case), inputs, pipeline=pipe)
        _check_dot(got, case, "custom call")


def _mx_array(side, fmt, g=None):
    v, s = side
    if fmt is None:
        return jnp.asarray(v)
    if FORMATS[fmt].element in FLOAT_TYPES and FLOAT_TYPES[FORMATS[fmt].element].bits == 6:
        v = _codes(v).astype(np.uint8)
    return mxj.MXArray(v, s, fmt, global_scale=g)


@pytest.mark.parametrize("impl", ["xla", "auto"])
def test_scaled_dot_jax(impl):
    """mxlower.jax.scaled_dot (f32 compute; a global scale only on nvfp4).  ``impl="auto"``
    runs the fused dot kernel on the CPU where the f32 contraction is provably exact (else the
    dequantize kernels and the f64 contraction "xla" uses): these small cases sum exactly in
    any order, so the same bits as "xla"; the last check also makes the operands with
    quantize."""
    for case in _dot_cases():
        lf, rf = case["fmts"]
        if case["compute"] != "f32" or (case["g"] is not None and lf != "nvfp4"):
            continue
        a = _mx_array(case["lhs"], lf, case["g"])
        b = _mx_array(case["rhs"], rf)
        got = jax.jit(lambda u, v: mxj.scaled_dot(u, v, impl=impl))(a, b)
        _check_dot(got, case, f"mxlower.jax (impl={impl})")
        want = jax.jit(lambda u, v: mxj.scaled_dot(u, v, impl="xla"))(a, b)
        ref = R.scaled_dot(_dequantized(case["lhs"], lf, "f32"), None,
                           _dequantized(case["rhs"], rf, "f32"), None, dimension_numbers=DOT_DIMS,
                           global_scale=case["g"])
        for w in (want, ref):  # these small cases: the reference's bits, too
            assert np.array_equal(np.asarray(got).view(np.uint32), np.asarray(w).view(np.uint32))
    # quantize with the kernels (or not), then the dot: tiny scales survive both
    x = np.ones((1, 32), F32) * F32(2.0 ** -130)
    y = np.ones((1, 32), F32) * F32(2.0 ** 100)
    got = jax.jit(lambda u, v: mxj.scaled_dot(mxj.quantize(u, impl=impl),
                                              mxj.quantize(v, impl=impl), impl=impl))(x, y)
    assert float(got[0, 0]) == 32 * 2.0 ** -30


def test_jax_nn_scaled_matmul_after_install():
    """jax.nn.scaled_matmul (rank 3) through mxlower.jax.install()."""
    mxj.install()
    try:
        for case in _dot_cases():
            lf, rf = case["fmts"]
            if lf != "mxfp8_e4m3" or rf != "mxfp8_e4m3" or case["compute"] != "f32":
                continue
            (a, sa), (b, sb) = case["lhs"], case["rhs"]
            got = jax.nn.scaled_matmul(a[None], b[None], sa[None], sb[None],
                                       preferred_element_type=jnp.float32)
            _check_dot(np.asarray(got)[0], case, "jax.nn.scaled_matmul")
    finally:
        mxj.uninstall()
