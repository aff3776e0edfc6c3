"""The codec's general algorithm (mxlower.lowering.codec: any number spec, every rounding mode,
exponent shifts) against the section 10 oracle.

* NumPy builder, exhaustive: every number spec of at most 8 bits (floats of every shape, every
  Inf/NaN kind, default and other biases; exponent types; intK/uintK), every f16 and bf16 input,
  every rounding mode (stochastic with random bits 0, 2^32-1 and random) against
  :func:`mxlower.cast_reference.round_codes`; every code back (:func:`emit_decode`) to f32,
  bf16 and f16 against :func:`mxlower.cast_reference.decode`.
* Wider specs (e5m6, e8m10, e8m23, int16, int32, ...): f32 and f64 probes against an
  independent formula in exact fractions; shifts over the whole range, subnormal results
  included, against the oracle on the exactly scaled value.
* Stochastic rounding: unbiased (the mean error within a statistical bound).
* The StableHLO builder compiled and run on XLA:CPU, the arith builder lowered to LLVM and run
  on the ExecutionEngine, on a sample of specs and all modes: the same bits as NumPy.
"""

from __future__ import annotations

import fractions
import functools
import math

import ml_dtypes
import numpy as np
import pytest

from mxlower import cast_reference as CR
from mxlower import numbers
from mxlower.lowering import codec
from mxlower.lowering import int_builders
from mxlower.types import probe_values

NP = int_builders.NumpyBuilder()
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")]
MODES = ["even", "nearest", "zero", "half_down", "stochastic"]
_X16 = np.arange(1 << 16, dtype=np.uint16)
SOURCES16 = {"f16": _X16.view(np.float16), "bf16": _X16.view(ml_dtypes.bfloat16)}


def _small_specs() -> list[str]:
    """Every float shape of at most 8 bits with every Inf/NaN kind it admits (default bias;
    a few other biases), the exponent types and the integers of at most 8 bits."""
    out = []
    for x in range(1, 8):
        for y in range(0, 8 - x):
            for sfx in ("", "fn", "fnuz", "fo"):
                try:
                    out.append(numbers.number(f"e{x}m{y}{sfx}").code)
                except numbers.SpecError:
                    pass
    for code in ("e4m3b11fnuz", "e4m3b8fnuz", "e5m2b16fnuz", "e3m2b0fo", "e2m1b-1fo",
                 "e3m4b1", "e4m3b12fn", "e2m3b5fo", "e5m2b30", "e1m6b-3fo"):
        out.append(numbers.number(code).code)
    out += [f"e{x}m0" for x in range(4, 9)]
    out += [f"int{k}" for k in range(2, 9)] + [f"uint{k}" for k in range(1, 9)]
    return sorted(set(out))


SMALL = _small_specs()


def _rbits(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.zeros(n, np.uint32), np.full(n, 2**32 - 1, np.uint32),
            rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)]


def _cases(mode: str, n: int):
    return _rbits(n) if mode == "stochastic" else [None]


def _mismatch(x, got, exp, rb=None, k=4):
    bad = np.nonzero(got != exp)[0][:k]
    return [(float(np.asarray(x[i], np.float64)), hex(int(got[i])), hex(int(exp[i])),
             None if rb is None else int(rb[i])) for i in bad]


def _codes(a, spec) -> np.ndarray:
    return np.asarray(a).astype(np.int64) & ((1 << numbers.number(spec).bits) - 1)


def test_the_small_spec_list_is_broad():
    kinds = {numbers.number(s).kind for s in SMALL}
    specials = {numbers.number(s).special for s in SMALL if numbers.number(s).kind == "float"}
    assert kinds == {"float", "exp", "int", "uint"} and specials == {"ieee", "fn", "fnuz", "fo"}
    assert len(SMALL) > 100


@pytest.mark.parametrize("spec", SMALL)
def test_encode_every_f16_and_bf16_input(spec):
    n = numbers.number(spec)
    for src, x in SOURCES16.items():
        v = x.astype(np.float64)
        for mode in MODES:
            for rb in _cases(mode, x.size):
                got = codec.emit_encode(NP, x, src, n, roundmode=mode, rbits=rb)
                assert got.dtype == n.dtype if n.is_integer else got.dtype == np.uint8
                exp = CR.round_codes(v, n, mode, rb) & ((1 << n.bits) - 1)
                g = _codes(got, n)
                assert np.array_equal(g, exp), (src, mode, _mismatch(x, g, exp, rb))


def _signed_codes(codes: np.ndarray, n: numbers.NumberSpec) -> np.ndarray:
    if n.kind == "int":
        return np.where(codes >> (n.bits - 1), codes - (1 << n.bits), codes)
    return codes


def _same_float(got: np.ndarray, exp: np.ndarray) -> np.ndarray:
    g, e = got.astype(np.float64), exp.astype(np.float64)
    w = f"uint{8 * got.dtype.itemsize}"
    return np.where(np.isnan(e), np.isnan(g), got.view(w) == exp.view(w))


@pytest.mark.parametrize("spec", SMALL)
def test_decode_every_code(spec):
    n = numbers.number(spec)
    codes = np.arange(1 << n.bits, dtype=np.int64)
    stored = CR._store(_signed_codes(codes, n), n)
    for dt, name in ((np.float32, "f32"), (ml_dtypes.bfloat16, "bf16"), (np.float16, "f16")):
        exp = CR.decode(stored, n, dtype=dt)
        # the codes as the StableHLO builder returns them (unsigned for floats)
        got = codec.emit_decode(NP, _signed_codes(codes, n).astype(np.int32), n, name)
        assert got.dtype == np.dtype(dt)
        ok = _same_float(got, exp)
        assert ok.all(), (name, codes[~ok][:4], got[~ok][:4], exp[~ok][:4])


def test_decode_ignores_bits_above_the_code():
    n = numbers.number("e2m1fo")
    codes = np.arange(256, dtype=np.uint8)
    got = codec.emit_decode(NP, codes, n, "f32")
    exp = codec.emit_decode(NP, codes & 0xF, n, "f32")
    assert np.array_equal(got.view(np.uint32), exp.view(np.uint32))


# ----------------------------------------------------------------------------- wider specs

WIDE_SPECS = ["e5m6", "e8m10", "e8m23", "e7m23fn", "e8m22b128fn", "e6m17b40fnuz", "e4m20fo", "e3m12b-4",
              "e8m0", "int16", "int32", "uint16", "uint32", "int12"]


def _exact_round(v: float, n: numbers.NumberSpec, mode: str, r: int | None) -> int:
    """An independent formula: the code of ``v`` (a finite f64) by exact fractions, with the
    section 10.2 rules; NaN/Inf are the oracle's business (tested above)."""
    if n.kind == "exp":
        raise AssertionError("exponent types: see the enumerating test")
    q_neg = v < 0 or (v == 0 and math.copysign(1, v) < 0)
    a = abs(fractions.Fraction(v))
    if n.is_integer:
        q = fractions.Fraction(1)
    else:
        e = max(_flog2(a) if a else n.emin, n.emin)
        q = fractions.Fraction(2) ** (e - n.man_bits)
    t = a / q
    T = math.floor(t)
    frac = t - T
    if mode == "zero":
        R = T
    elif mode == "nearest":
        R = T + (frac >= fractions.Fraction(1, 2))
    elif mode == "half_down":
        R = T + (frac > fractions.Fraction(1, 2))
    elif mode == "even":
        R = T + (frac > fractions.Fraction(1, 2) or (frac == fractions.Fraction(1, 2) and T % 2))
    else:
        R = math.floor(t + fractions.Fraction(r, 2**32))
    mag = min(R * q, n.max_exact)
    if n.is_integer:
        m = int(mag)
        if n.kind == "uint":
            return 0 if q_neg else m
        return (-m if q_neg else m) & ((1 << n.bits) - 1)
    # the code of the exact magnitude: search the binade
    if mag == 0:
        code = 0
    elif mag < fractions.Fraction(2) ** n.emin:
        code = int(mag / fractions.Fraction(2) ** (n.emin - n.man_bits))
    else:
        e = _flog2(mag)
        code = ((e + n.bias) << n.man_bits) + int(mag / fractions.Fraction(2) ** (
            e - n.man_bits)) - (1 << n.man_bits)
    if q_neg and (code or n.has_negative_zero):
        code |= n.sign_mask
    return code


def _flog2(a: fractions.Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e if fractions.Fraction(2) ** e <= a else e - 1


@functools.cache
def _f32_probes() -> np.ndarray:
    return probe_values("f32")


@pytest.mark.parametrize("spec", [s for s in WIDE_SPECS if s != "e8m0"])
def test_wider_specs_against_exact_fractions(spec):
    """A sample of f32 probes (formula in Python fractions: slow, so ~3000 values per mode),
    around the spec's own midpoints too."""
    n = numbers.number(spec)
    rng = np.random.default_rng(5)
    x = _f32_probes()
    x = x[np.isfinite(x)]
    mx = float(n.max)
    # the spec's own neighbourhoods: max, midpoints between random codes, tiny values
    own = []
    if n.is_float:
        c = rng.integers(0, n.max_code, 400)
        vals = np.array([float(n.value_of(int(k))) for k in c] +
                        [float(n.value_of(int(k) + 1)) for k in c])
        own = [vals, (vals[:400] + vals[400:]) / 2]
    else:
        k = rng.integers(0, int(mx), 400).astype(np.float64)
        own = [k, k + 0.5, k + 0.25]
    o = np.concatenate(own + [np.array([mx, mx * 1.5, 2 * mx, n.smallest_subnormal / 2])])
    o = o[np.abs(o) < 3e38].astype(np.float32)
    o = np.concatenate([o, np.nextafter(o, np.float32(np.inf)), np.nextafter(o, np.float32(0))])
    sample = np.concatenate([rng.choice(x, 1500, replace=False), o, -o])
    for mode in MODES:
        rb = (rng.integers(0, 2**32, sample.size, dtype=np.uint64).astype(np.uint32)
              if mode == "stochastic" else None)
        got = _codes(codec.emit_encode(NP, sample, "f32", n, roundmode=mode, rbits=rb), n)
        exp = np.array([_exact_round(float(v), n, mode, None if rb is None else int(rb[i]))
                        for i, v in enumerate(sample)])
        assert np.array_equal(got, exp), (mode, _mismatch(sample, got, exp, rb))
        ora = CR.round_codes(sample.astype(np.float64), n, mode, rb) & ((1 << n.bits) - 1)
        assert np.array_equal(got, ora)


@pytest.mark.parametrize("spec", WIDE_SPECS + ["e4m3fn", "e2m1fo", "e8m0", "int8", "e3m2b0fo"])
@pytest.mark.parametrize("src", ["f32", "f64"])
def test_wider_specs_and_shifts_against_the_oracle(spec, src):
    """Every f32 probe (and f64 probes), unshifted and shifted by random exponents from -300 to
    300 (f64: -75..75), against the oracle on the exactly scaled f64 value."""
    n = numbers.number(spec)
    rng = np.random.default_rng(7)
    x = probe_values(src) if src == "f64" else _f32_probes()
    for shifted in (False, True):
        sh = None
        v = x.astype(np.float64)
        xs = x
        if shifted:
            lim = 300 if src == "f32" else 75
            sh = rng.integers(-lim, lim + 1, x.size).astype(np.int32)
            with np.errstate(all="ignore"):
                v = np.ldexp(v, -sh)
                exact = np.isnan(v) | (np.ldexp(v, sh) == x.astype(np.float64))
            xs, v, sh = x[exact], v[exact], sh[exact]
        for mode in MODES:
            rb = (rng.integers(0, 2**32, xs.size, dtype=np.uint64).astype(np.uint32)
                  if mode == "stochastic" else None)
            got = _codes(codec.emit_encode(NP, xs, src, n, roundmode=mode, rbits=rb, shift=sh), n)
            exp = CR.round_codes(v, n, mode, rb) & ((1 << n.bits) - 1)
            assert np.array_equal(got, exp), (shifted, mode, _mismatch(xs, got, exp, rb))


@pytest.mark.parametrize("spec", ["e4m3fn", "e2m1fo", "int8", "e8m23", "e5m6", "e8m0", "uint8"])
def test_shift_reaches_subnormal_results_and_saturation(spec):
    """Shifts over the whole range (-2^31..2^31-1 clamp to +-2000), applied to every bf16
    input: results below f32's normal range are exact (never flushed), far shifts saturate
    or flush."""
    n = numbers.number(spec)
    x = SOURCES16["bf16"]
    v0 = x.astype(np.float64)
    for s in (-2**31, -3000, -400, -200, -150, -130, -1, 0, 1, 100, 126, 127, 140, 149, 160,
              200, 300, 3000, 2**31 - 1):
        sh = np.full(x.size, s, np.int32)
        sc = max(min(s, 2000), -2000)
        with np.errstate(all="ignore"):
            v = np.ldexp(v0, -sc)  # exact for bf16 inputs at these shifts (or 0/Inf: clamped)
        # ldexp past f64's range: the value is beyond every spec's range, saturate or flush
        v = np.where(np.isinf(v) & np.isfinite(v0), np.copysign(1e300, v0), v)
        v = np.where((v == 0) & (v0 != 0), np.copysign(1e-300, v0), v)
        got = _codes(codec.emit_encode(NP, x, "bf16", n, shift=sh), n)
        exp = CR.round_codes(v, n, "even") & ((1 << n.bits) - 1)
        assert np.array_equal(got, exp), (s, _mismatch(x, got, exp))


@pytest.mark.parametrize("spec", ["e4m3fn", "e5m6", "int8", "e8m0", "e2m1fo", "e8m23"])
def test_decode_with_shift_matches_the_oracle(spec):
    """value * 2^shift rounded once to f32 (subnormal f32 results kept, Inf past the range),
    then to bf16 / f16, as cast_reference decodes scaled codes."""
    n = numbers.number(spec)
    rng = np.random.default_rng(3)
    codes = (np.arange(1 << n.bits, dtype=np.int64) if n.bits <= 16
             else rng.integers(0, 1 << n.bits, 1 << 16, dtype=np.int64))
    codes = np.repeat(codes, 4)
    sh = rng.integers(-300, 300, codes.size).astype(np.int32)
    signed = _signed_codes(codes, n)
    for dt, name in ((np.float32, "f32"), (ml_dtypes.bfloat16, "bf16"), (np.float16, "f16")):
        got = codec.emit_decode(NP, signed.astype(np.int32), n, name, shift=sh)
        with np.errstate(all="ignore"):
            exp = np.ldexp(CR._decode(signed, n), sh).astype(np.float32).astype(dt)
        ok = _same_float(got, exp)
        assert ok.all(), (name, codes[~ok][:4], sh[~ok][:4], got[~ok][:4], exp[~ok][:4])


def test_fixed_point_int_is_a_shift():
    x = SOURCES16["bf16"]
    got = codec.emit_encode(NP, x, "bf16", "int8", fixed=True)
    exp = CR.round_codes(x.astype(np.float64), "int8", fixed=True)
    assert np.array_equal(got.astype(np.int64), exp)
    back = codec.emit_decode(NP, got, "int8", "f32", fixed=True)
    assert np.array_equal(back, CR._decode(exp, numbers.number("int8"), fixed=True)
                          .astype(np.float32))
    # with a per-element exponent, as an e8m0-scaled mxint8 / int4 tile uses it
    rng = np.random.default_rng(2)
    sh = rng.integers(-130, 130, x.size).astype(np.int32)
    for spec in ("int8", "int4"):
        n = numbers.number(spec)
        got = codec.emit_encode(NP, x, "bf16", spec, fixed=True, shift=sh)
        with np.errstate(all="ignore"):
            v = np.ldexp(x.astype(np.float64), -sh)
        exp = CR.round_codes(v, n, fixed=True)
        assert np.array_equal(got.astype(np.int64), exp)
        back = codec.emit_decode(NP, got, spec, "f32", fixed=True, shift=sh)
        with np.errstate(all="ignore"):
            want = np.ldexp(CR._decode(exp, n, fixed=True), sh).astype(np.float32)
        assert np.array_equal(back.view(np.uint32), want.view(np.uint32))


# ----------------------------------------------------------------------------- stochastic


@pytest.mark.parametrize("spec", ["e2m1fo", "e4m3fn", "int4", "e5m6"])
def test_stochastic_rounding_is_unbiased(spec):
    """Values strictly inside the range, many random draws each: the mean of the rounded
    values is the value within 5 standard errors (the rounding error of one draw is at most
    one quantum q, so its standard deviation is at most q / 2)."""
    n = numbers.number(spec)
    rng = np.random.default_rng(11)
    k = 64
    vals = rng.uniform(-n.max * 0.9, n.max * 0.9, k).astype(np.float32)
    draws = 4096
    x = np.repeat(vals, draws)
    rb = rng.integers(0, 2**32, x.size, dtype=np.uint64).astype(np.uint32)
    codes = codec.emit_encode(NP, x, "f32", n, roundmode="stochastic", rbits=rb)
    y = codec.emit_decode(NP, codes, n, "f32").astype(np.float64).reshape(k, draws)
    v = vals.astype(np.float64)
    q = np.array([_quantum(n, abs(a)) for a in v])
    err = y.mean(axis=1) - v
    assert np.all(np.abs(err) <= 5 * (q / 2) / math.sqrt(draws)), err / q
    # and never farther than one quantum, and only onto the two neighbours
    assert np.all(np.abs(y - v[:, None]) < q[:, None])


def _quantum(n: numbers.NumberSpec, a: float) -> float:
    if n.is_integer:
        return 1.0
    e = max(math.floor(math.log2(a)) if a else n.emin, n.emin)
    return math.ldexp(1.0, e - n.man_bits)


def test_stochastic_is_the_oracle_for_given_bits():
    """Random bits straddling every carry boundary: r = 2^32 - floor(frac 2^32) +- 1."""
    n = numbers.number("e3m2fo")
    rng = np.random.default_rng(4)
    x = rng.uniform(-20, 20, 20000).astype(np.float32)
    t = np.abs(x.astype(np.float64))
    e = np.maximum(np.floor(np.log2(np.where(t > 0, t, 1))), n.emin)
    frac = t / np.ldexp(1.0, (e - n.man_bits).astype(int))
    f = np.floor((frac - np.floor(frac)) * 2**32).astype(np.int64)
    edge = (2**32 - f + rng.integers(-1, 2, x.size)) % 2**32
    rb = edge.astype(np.uint32)
    got = _codes(codec.emit_encode(NP, x, "f32", n, roundmode="stochastic", rbits=rb), n)
    exp = CR.round_codes(x.astype(np.float64), n, "stochastic", rb) & 0x3F
    assert np.array_equal(got, exp)


# ----------------------------------------------------------------------------- errors


def test_bad_arguments_are_clear_errors():
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="unknown roundmode 'up'"):
        codec.emit_encode(NP, x, "f32", "e4m3fn", roundmode="up")
    with pytest.raises(ValueError, match="needs rbits"):
        codec.emit_encode(NP, x, "f32", "e4m3fn", roundmode="stochastic")
    with pytest.raises(ValueError, match="needs rbits"):
        codec.emit_encode(NP, x, "f32", "e4m3fn", rbits=np.zeros(4, np.uint32))
    with pytest.raises(ValueError, match="rbits must be 32-bit"):
        codec.emit_encode(NP, x, "f32", "e4m3fn", roundmode="stochastic",
                          rbits=np.zeros(4, np.uint16))
    with pytest.raises(numbers.SpecError, match="exponent bits must be 1..8"):
        codec.emit_encode(NP, x, "f32", "e9m3")
    with pytest.raises(ValueError, match="source must be one of"):
        codec.emit_encode(NP, np.zeros(4, np.uint8), "f8E4M3FN", "e4m3fn")
    with pytest.raises(ValueError, match="code_bits=8 cannot hold"):
        codec.emit_encode(NP, x, "f32", "e5m6", code_bits=8)
    with pytest.raises(ValueError, match="destination must be f32, bf16 or f16"):
        codec.emit_decode(NP, np.zeros(4, np.uint8), "e4m3fn", "f64")


def test_storage_types():
    assert codec.storage_type("e4m3fn") == "ui8"
    assert codec.storage_type("e2m1fo") == "ui8"
    assert codec.storage_type("e5m6") == "ui16"
    assert codec.storage_type("e8m23") == "ui32"
    assert codec.storage_type("int5") == "i8"
    assert codec.storage_type("int16") == "i16"
    assert codec.storage_type("uint3") == "ui8"
    assert codec.storage_type("e8m0") == "ui8"


# ----------------------------------------------------------------------------- MLIR builders

MLIR_SPECS = ["e4m3fn", "e2m1fo", "e8m0", "int8", "uint4", "e5m6", "e8m23", "int32",
              "e4m3b11fnuz", "e3m4"]


def _hlo_text(n: int, spec: str, src: str, mode: str, shifted: bool, dst: str) -> str:
    """@main(x: src, r: ui32, s: i32) -> (codes, decoded): StableHLO builder throughout."""
    from mxlower.bindings import jaxlib as J
    from mxlower.lowering.codec_stablehlo import StableHLOBuilder

    ir = J.ir
    with J.make_context(), ir.Location.unknown():
        m = ir.Module.create()
        ts = [ir.RankedTensorType.get([n], ir.Type.parse(t)) for t in (src, "ui32", "i32")]
        with ir.InsertionPoint(m.body):
            f = J.func.FuncOp("main", ir.FunctionType.get(ts, []))
            blk = f.add_entry_block()
            x, r, s = blk.arguments
            with ir.InsertionPoint(blk):
                b = StableHLOBuilder([n])
                sh = s if shifted else None
                codes = codec.emit_encode(b, x, src, spec, roundmode=mode,
                                          rbits=r if mode == "stochastic" else None, shift=sh)
                back = codec.emit_decode(b, codes, spec, dst, shift=sh)
                J.func.ReturnOp([codes, back])
            f.attributes["function_type"] = ir.TypeAttr.get(
                ir.FunctionType.get(ts, [codes.type, back.type]))
        assert m.operation.verify()
        return str(m)


def _inputs(src: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    if src == "f32":
        x = _f32_probes()
        x = np.concatenate([x[rng.choice(x.size, n // 2, replace=False)],
                            rng.standard_normal(n - n // 2).astype(np.float32)
                            * np.float32(4.0) ** rng.integers(-20, 20, n - n // 2)])
        x = x.astype(np.float32)
    else:
        x = SOURCES16[src][rng.integers(0, 1 << 16, n)]
    r = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    s = rng.integers(-160, 160, n).astype(np.int32)
    return x, r, s


def _numpy_pair(x, r, s, src, spec, mode, shifted, dst):
    sh = s if shifted else None
    codes = codec.emit_encode(NP, x, src, spec, roundmode=mode,
                              rbits=r if mode == "stochastic" else None, shift=sh)
    return codes, codec.emit_decode(NP, codes, spec, dst, shift=sh)


@pytest.mark.parametrize("spec", MLIR_SPECS)
def test_stablehlo_builder_on_xla_cpu(spec):
    """Each mode (shifted or not) on XLA:CPU: the same codes and decoded values as NumPy (which
    equals the oracle above).  XLA:CPU flushes f32 subnormals in arithmetic: the codec does
    none, so shifted subnormal results come out exact."""
    from mxlower.execution import xla

    n = 4096
    for i, (mode, shifted) in enumerate([(m, sh) for m in MODES for sh in (False, True)]):
        src = ("f32", "bf16", "f16")[i % 3]
        dst = ("f32", "bf16", "f16")[(i // 3) % 3]
        x, r, s = _inputs(src, n, i)
        got_c, got_v = xla.run(_hlo_text(n, spec, src, mode, shifted, dst), x, r, s)
        exp_c, exp_v = _numpy_pair(x, r, s, src, spec, mode, shifted, dst)
        st = codec.storage_type(spec)
        assert got_c.dtype == np.dtype(st.replace("ui", "uint") if st.startswith("ui")
                                       else st.replace("i", "int"))
        assert np.array_equal(_codes(got_c, spec), _codes(exp_c, spec)), (mode, shifted)
        assert _same_float(got_v, exp_v).all(), (mode, shifted, dst)


def _arith_text(spec: str, src: str, mode: str, shifted: bool, dst: str) -> str:
    """Scalar @enc/@dec functions from the arith builder (jaxlib's stack), applied elementwise
    by a linalg.generic in @main."""
    from mxlower.bindings import jaxlib as J

    ir, arith = J.ir, J.arith
    with J.make_context(), ir.Location.unknown():
        m = ir.Module.create()
        ft, i32 = ir.Type.parse(src), ir.IntegerType.get_signless(32)
        dt = ir.Type.parse(dst)
        with ir.InsertionPoint(m.body):
            f = J.func.FuncOp("enc", ir.FunctionType.get([ft, i32, i32], [i32, dt]))
            f.attributes["sym_visibility"] = ir.StringAttr.get("private")
            blk = f.add_entry_block()
            x, r, s = blk.arguments
            with ir.InsertionPoint(blk):
                b = int_builders.ArithBuilder(ir, arith, ft)
                sh = s if shifted else None
                c = codec.emit_encode(b, x, src, spec, roundmode=mode,
                                      rbits=r if mode == "stochastic" else None, shift=sh,
                                      code_bits=32)
                v = codec.emit_decode(b, c, spec, dst, shift=sh)
                J.func.ReturnOp([c, v])
        assert m.operation.verify()
        enc = str(m).strip()
    assert enc.startswith("module {") and enc.endswith("}")
    body = enc[len("module {"):-1]
    ident = "affine_map<(i) -> (i)>"
    main = f"""
func.func @main(%x: tensor<?x{src}>, %r: tensor<?xi32>, %s: tensor<?xi32>)
    -> (tensor<?xi32>, tensor<?x{dst}>) {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x{src}>
  %e0 = tensor.empty(%n) : tensor<?xi32>
  %e1 = tensor.empty(%n) : tensor<?x{dst}>
  %y:2 = linalg.generic {{indexing_maps = [{ident}, {ident}, {ident}, {ident}, {ident}],
                         iterator_types = ["parallel"]}}
      ins(%x, %r, %s : tensor<?x{src}>, tensor<?xi32>, tensor<?xi32>)
      outs(%e0, %e1 : tensor<?xi32>, tensor<?x{dst}>) {{
  ^bb0(%a: {src}, %b: i32, %c: i32, %o0: i32, %o1: {dst}):
    %v:2 = func.call @enc(%a, %b, %c) : ({src}, i32, i32) -> (i32, {dst})
    linalg.yield %v#0, %v#1 : i32, {dst}
  }} -> (tensor<?xi32>, tensor<?x{dst}>)
  return %y#0, %y#1 : tensor<?xi32>, tensor<?x{dst}>
}}
"""
    return "module {" + body + main + "}\n"


@pytest.mark.parametrize("spec", MLIR_SPECS)
def test_arith_builder_on_llvm(spec):
    """The arith builder, lowered to LLVM and run on upstream MLIR's ExecutionEngine: the same
    codes and decoded values as NumPy, every mode, shifted and not."""
    pytest.importorskip("mlir.execution_engine")
    from mxlower.execution import llvm

    n = 4096
    for i, (mode, shifted) in enumerate([(m, sh) for m in MODES for sh in (False, True)]):
        src = ("f32", "bf16", "f16")[(i + 1) % 3]
        dst = ("f32", "bf16", "f16")[(i // 2) % 3]
        x, r, s = _inputs(src, n, 100 + i)
        with llvm.compile(_arith_text(spec, src, mode, shifted, dst)) as h:
            got_c, got_v = h.run("main", x, r.view(np.int32), s)
        exp_c, exp_v = _numpy_pair(x, r, s, src, spec, mode, shifted, dst)
        assert np.array_equal(_codes(got_c, spec), _codes(exp_c, spec)), (mode, shifted)
        assert _same_float(got_v, exp_v).all(), (mode, shifted, dst)


# ----------------------------------------------------------------------------- section 2 modes

from mxlower.types import FLOAT_TYPES  # noqa: E402


def _section2_with_mode(x: np.ndarray, t, mode: str) -> np.ndarray:
    """The oracle of arith.truncf with a rounding mode: section 10.2's rounding of the exact
    value (cast_reference), then the type's section 2 rules in place of saturation: a finite
    value that rounds past max (only with ``nearest``: at or past max + half an ulp) and +-Inf
    become the type's overflow code."""
    n = numbers.of_float_type(t)
    v = x.astype(np.float64)
    codes = CR.round_codes(v, n, mode) & ((1 << n.bits) - 1)
    neg = np.signbit(v).astype(np.int64)
    over = np.isinf(v)
    if mode == "nearest":
        over |= np.isfinite(v) & (np.abs(v) >= t.overflow_midpoint)
    if t.special == "ieee":
        k = t.exponent_mask | (neg << (t.bits - 1))
    elif t.special == "fn":
        k = t.nan_code | (neg << (t.bits - 1))
    elif t.special in ("fnuz", "fnu"):
        k = np.full(v.shape, t.nan_code)
    else:  # finite-only: round_codes saturates already, as section 2 does
        k = codes
    return np.where(over, k, codes)


@pytest.mark.parametrize("dst", list(FLOAT_TYPES))
@pytest.mark.parametrize("mode", ["zero", "nearest"])
def test_convert_with_rounding_mode(dst, mode):
    """emit_convert (arith.truncf toward_zero / to_nearest_away): every f16 and bf16 input,
    the f32 and f64 probes."""
    t = FLOAT_TYPES[dst]
    if t.has_nan:  # the cast oracle's NaN codes are section 2's
        assert numbers.of_float_type(t).nan_code == t.nan_code
    for src, x in [*SOURCES16.items(), ("f32", _f32_probes()),
                   ("f64", probe_values("f64", n_random=1 << 12))]:
        got = codec.emit_truncf(NP, x, src, dst, roundmode=mode).astype(np.int64)
        want = _section2_with_mode(x, t, mode)
        assert np.array_equal(got, want), (src, _mismatch(x, got, want))


@pytest.mark.parametrize("dst", [d for d in FLOAT_TYPES if d != "f8E8M0FNU"])
def test_convert_target_even_is_section_2(dst):
    """The spec algorithm with section 2's overflow rules and ``even`` is the section 2 codec
    (an independent implementation) for every type but f8E8M0FNU, whose ml_dtypes rules
    (ties up, the subnormal band) only the section 2 codec has."""
    t = FLOAT_TYPES[dst]
    n = numbers.of_float_type(t)
    for src, x in [*SOURCES16.items(), ("f32", _f32_probes())]:
        code, _ = codec._encode(NP, x, src, n, codec.convert_target(t, "even"), "even", None, None,
                             False)
        want = codec.emit_truncf(NP, x, src, dst)
        got = (code & 0xFF).astype(np.uint8)
        assert np.array_equal(got, want), (src, _mismatch(x, got, want))


def test_convert_rejects_other_modes():
    with pytest.raises(ValueError, match="not a section 2 conversion mode"):
        codec.emit_truncf(NP, np.zeros(2, np.float32), "f32", "f8E4M3FN", roundmode="stochastic")
    with pytest.raises(ValueError, match="must be a narrow type"):
        codec.emit_truncf(NP, np.zeros(2, np.float32), "f32", "bf16", roundmode="zero")


def test_stablehlo_builder_dynamic_shapes():
    """A tensor<?x4xf32> input (constants broadcast to its runtime shape): the module verifies,
    and after shape refinement to 8x4 it runs on XLA:CPU with NumPy's bits."""
    from mxlower.execution import xla
    from mxlower.bindings import jaxlib as J
    from mxlower.testing import refine_for_inputs
    from mxlower.lowering.codec_stablehlo import StableHLOBuilder

    ir = J.ir
    dyn = ir.ShapedType.get_dynamic_size()
    with J.make_context(), ir.Location.unknown():
        m = ir.Module.create()
        ts = [ir.RankedTensorType.get([dyn, 4], ir.Type.parse(t)) for t in ("f32", "ui32", "i32")]
        with ir.InsertionPoint(m.body):
            f = J.func.FuncOp("main", ir.FunctionType.get(ts, []))
            blk = f.add_entry_block()
            x, r, s = blk.arguments
            with ir.InsertionPoint(blk):
                b = StableHLOBuilder([dyn, 4], like=x)
                c = codec.emit_encode(b, x, "f32", "e5m6", roundmode="stochastic", rbits=r, shift=s)
                v = codec.emit_decode(b, c, "e5m6", "bf16", shift=s)
                J.func.ReturnOp([c, v])
            f.attributes["function_type"] = ir.TypeAttr.get(
                ir.FunctionType.get(ts, [c.type, v.type]))
        assert m.operation.verify()
        text = str(m)
    assert "tensor<?x4xui16>" in text
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((8, 4)) * 100).astype(np.float32)
    r = rng.integers(0, 2**32, (8, 4), dtype=np.uint64).astype(np.uint32)
    s = rng.integers(-20, 20, (8, 4)).astype(np.int32)
    got_c, got_v = xla.run(refine_for_inputs(text, [x, r, s]), x, r, s)
    exp_c = codec.emit_encode(NP, x, "f32", "e5m6", roundmode="stochastic", rbits=r, shift=s)
    assert np.array_equal(got_c, exp_c)
    exp_v = codec.emit_decode(NP, exp_c, "e5m6", "bf16", shift=s)
    assert _same_float(got_v, exp_v).all()


class _NoIntToFloat(int_builders.NumpyBuilder):
    """A builder without int_to_float: normalization falls back to the shift ladder."""

    has_int_to_float = False


@pytest.mark.parametrize("spec", ["e4m3fn", "e8m0", "e8m23", "int32", "e5m6", "uint3"])
def test_ladder_fallback_gives_the_same_bits(spec):
    x = SOURCES16["bf16"]
    rng = np.random.default_rng(12)
    sh = rng.integers(-200, 200, x.size).astype(np.int32)
    rb = rng.integers(0, 2**32, x.size, dtype=np.uint64).astype(np.uint32)
    for kw in ({"shift": sh}, {"shift": sh, "roundmode": "stochastic", "rbits": rb}):
        a = codec.emit_encode(NP, x, "bf16", spec, **kw)
        b = codec.emit_encode(_NoIntToFloat(), x, "bf16", spec, **kw)
        assert np.array_equal(a, b)
        da = codec.emit_decode(NP, a, spec, "f32", shift=sh)
        db = codec.emit_decode(_NoIntToFloat(), a, spec, "f32", shift=sh)
        assert np.array_equal(da.view(np.uint32), db.view(np.uint32))


class _Counter(int_builders.NumpyBuilder):
    def __init__(self):
        self.ops = 0

    def _count(self, name, *a):
        self.ops += 1
        return getattr(super(), name)(*a)

    def binary(self, *a):
        return self._count("binary", *a)

    def compare(self, *a):
        return self._count("compare", *a)

    def select(self, *a):
        return self._count("select", *a)


@pytest.mark.parametrize("spec, plain, shifted", [("e4m3fn", 36, 44), ("e2m1fo", 36, 44),
                                                  ("int8", 32, 40), ("e8m0", 34, 37)])
def test_emitted_sequence_stays_small(spec, plain, shifted):
    """A regression guard on the op count of f32 -> spec (the MX quantize path is shifted)."""
    x, sh = np.zeros(4, np.float32), np.zeros(4, np.int32)
    for kw, limit in (({}, plain), ({"shift": sh}, shifted)):
        b = _Counter()
        codec.emit_encode(b, x, "f32", spec, **kw)
        assert b.ops <= limit, (kw, b.ops)
