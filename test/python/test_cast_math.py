"""The exact f32 steps of the datatype-cast recipe (mxlower.lowering.cast_math) on XLA:CPU,
which flushes f32 subnormals and multiplies by rounded reciprocals: quotients against NumPy's
correctly rounded f32 division (subnormal quotients included), scale selection against the
oracle's (mxlower.reference), every scale mode and several element specs."""

from __future__ import annotations

import numpy as np
import pytest

from mxlower import cast_reference as CR
from mxlower.bindings import jaxlib as J
from mxlower.ir.stablehlo_builder import Builder
from mxlower.lowering import cast_math
from mxlower.numbers import SCALE_MODES, number, scale

ir = J.ir


def _run(build, *inputs: np.ndarray) -> list[np.ndarray]:
    """Build ``@main`` over i32 vectors with ``build(b, *args) -> [values]`` and run it."""
    from mxlower.execution.xla import run  # JAX only where a test runs XLA

    with J.make_context(allow_unregistered=True), ir.Location.unknown() as loc:
        sig = ", ".join(f"%a{i}: tensor<{len(a)}xi32>" for i, a in enumerate(inputs))
        m = ir.Module.parse(f"func.func @main({sig}) {{\n  return\n}}")
        func = m.body.operations[0]
        block = func.regions[0].blocks[0]
        ret = block.operations[0]
        b = Builder(loc, ir.InsertionPoint(ret))
        outs = build(b, *block.arguments)
        text = str(m).replace("return\n", "return " + ", ".join(
            o.get_name() for o in outs) + " : " + ", ".join(str(o.type) for o in outs) + "\n")
        head = f"-> ({', '.join(str(o.type) for o in outs)})"
        text = text.replace(") {\n", f") {head} {{\n", 1)
    return run(text, *inputs)


def _f32_bits(a) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.int32)


def _interesting_f32(rng, n: int) -> np.ndarray:
    """Normal, subnormal, tiny and huge f32 values of both signs."""
    kinds = [rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n),
             rng.integers(1, 1 << 23, n) * 2.0 ** -149,  # subnormals
             rng.standard_normal(n) * 2.0 ** rng.integers(-149, -100, n),
             rng.standard_normal(n) * 2.0 ** rng.integers(100, 127, n)]
    x = np.concatenate(kinds).astype(np.float32)
    return x[np.isfinite(x)]


def test_quotient_by_tensor_and_constant_matches_ieee_division():
    rng = np.random.default_rng(0)
    x = _interesting_f32(rng, 3000)
    d = np.abs(_interesting_f32(rng, 3000))[:len(x)]
    d = np.where(d == 0, np.float32(1), d).astype(np.float32)
    x = x[:len(d)]
    consts = (6.0, 448.0, 127.0, 15.0, 0.375, 57344.0)
    got = _run(lambda b, xs, ds: [cast_math.quotient(b, xs, ds)]
               + [cast_math.quotient(b, xs, c) for c in consts], _f32_bits(x), _f32_bits(d))
    with np.errstate(all="ignore"):
        want = [x / d] + [x / np.float32(c) for c in consts]
    for g, w in zip(got, want):
        bad = g != _f32_bits(w)
        assert not bad.any(), (x[bad][:5], g[bad][:5], _f32_bits(w)[bad][:5])


@pytest.mark.parametrize("mode", SCALE_MODES)
def test_scale_exponent_matches_the_oracle(mode):
    rng = np.random.default_rng(1)
    amax = np.abs(_interesting_f32(rng, 2000))
    amax = np.concatenate([amax, np.float32([0, 2.0 ** -149, 2.0 ** -127, 2.0 ** -126,
                                             3.4e38, 448, 479, 480, 6, 7, 2.0 ** -125 +
                                             2.0 ** -148])]).astype(np.float32)
    specs = [number(c) for c in ("e4m3fn", "e2m1fo", "e5m2", "int8", "int4", "e3m2fo",
                                 "e5m6", "e2m1b4")]
    scales = [scale(c) for c in ("e8m0_t32", "e5m0_t32", "e4m0_t2x2")]
    pairs = [(n, s) for n in specs for s in scales]
    got = _run(lambda b, a: [cast_math.scale_exponent(b, a, n, s, mode) for n, s in pairs],
               _f32_bits(amax))
    for (n, s), g in zip(pairs, got):
        want = CR._scale_exponent(amax.astype(np.float64), n, s, mode)
        if mode == "rceil":
            # q = amax / max overflowing f32 (a spec with max < 1): the contract's E is
            # ceil(log2(+Inf)), clamped to the top; the oracle reads frexp(Inf) as 2^-1
            with np.errstate(over="ignore"):
                over = np.isinf(amax.astype(np.float64) / float(n.scaled_max_exact)
                                ).astype(bool) | np.isinf(
                    (amax.astype(np.float64) / float(n.scaled_max_exact)).astype(np.float32))
            assert (g[over] == s.number.emax).all()
            want = np.where(over, s.number.emax, want)
        bad = g != want
        assert not bad.any(), (n.code, s.code, amax[bad][:5], g[bad][:5], want[bad][:5])
