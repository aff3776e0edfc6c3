"""Lookup-table datatypes (docs/semantics.md section 10.7) in the mx ops: ``mx.cast`` and the
datatype forms of ``mx.quantize`` / ``mx.dequantize`` with ``number = "nf4"`` or a custom
``number = "lut"`` + ``table``, lowered by mxlower-mx-to-stablehlo and run on XLA:CPU (and the
LLVM engine), bit for bit against the oracle: unscaled, every exponent scale mode, float
scales, every rounding mode (stochastic with given random bits), NaN/Inf/zero/subnormal tiles."""

from __future__ import annotations

import numpy as np
import pytest
from test_mx_cast import WIDE, _check, _data, _llvm, _rbits_arg, _returnable

from mxlower import cast_reference as CR
from mxlower import reference as R
from mxlower.bindings import jaxlib as J
from mxlower.dialect import mx
from mxlower.numbers import lut_spec
from mxlower.testing import MxModule, Value

NOZERO = lut_spec([-1.5, -0.5, 0.5, 1.5])
SKEW = lut_spec([-3.0, -1.0, -0.25, 0.0, 0.125, 0.5, 2.0, 6.0])

#: (number, scale, roundmode, scalemode)
CASES = [
    ("nf4", None, "even", "max"),
    ("nf4", None, "stochastic", "max"),
    ("nf4", "e8m0_t32", "nearest", "max"),
    ("nf4", "e8m0_t32", "stochastic", "midmax"),
    ("nf4", "e8m0_t8x32", "zero", "rceil"),
    ("nf4", "e8m0_t32", "half_down", "nearest"),
    ("nf4", "float32_t64", "even", "max"),  # QLoRA's absmax scaling
    ("nf4", "bfloat16_t0", "stochastic", "max"),
    (NOZERO, None, "nearest", "max"),
    (NOZERO, "e8m0_t16", "stochastic", "max"),
    (NOZERO, "float16_t32", "half_down", "max"),
    (SKEW, "e5m0_t32", "even", "rceil"),
    (SKEW, "float32_t8d0", "zero", "max"),
]


def _attrs(number, scale, roundmode=None, scalemode=None) -> str:
    if isinstance(number, str):
        out = f'number = "{number}"'
    else:
        vals = ", ".join(repr(float(t)) for t in number.table)
        out = f'number = "lut", table = array<f32: {vals}>'
    if scale is not None:
        out += f', scale = "{scale}"'
    if roundmode is not None:
        out += f', roundmode = "{roundmode}", scalemode = "{scalemode}"'
    return out


def _rb(rm, rbits):
    return rbits if rm == "stochastic" else None


def _module(x, rbits, out: str, llvm: bool = False) -> MxModule:
    m = MxModule()
    xv, rv = m.arg(x), _rbits_arg(m, rbits, llvm)
    for number, scale, rm, sm in CASES:
        ops = [xv] + ([rv] if rm == "stochastic" else [])
        names, types = ", ".join(o.name for o in ops), ", ".join(o.type for o in ops)
        a = _attrs(number, scale, rm, sm)
        m.ret(m.raw(f'{{r}} = "mx.cast"({names}) {{{a}}} : ({types}) -> {xv.type}',
                    xv.shape, xv.elt))
        dt = CR.resolve(number, scale)
        outs = [(xv.shape, "ui8")]
        if dt.scale is not None:
            outs.append((dt.scale.scales_shape(xv.shape), dt.scale.number.storage))
        rt = ", ".join(Value("", s, e).type for s, e in outs)
        q = m.raw(f'{{r}}:{len(outs)} = "mx.quantize"({names}) {{{a}}} : ({types}) -> ({rt})',
                  xv.shape, "f32")
        parts = [Value(f"{q.name}#{i}", s, e) for i, (s, e) in enumerate(outs)]
        pt = ", ".join(p.type for p in parts)
        d = m.raw(f'{{r}} = "mx.dequantize"({", ".join(p.name for p in parts)}) '
                  f'{{{_attrs(number, scale)}}} : ({pt}) -> {Value("", xv.shape, out).type}',
                  xv.shape, out)
        m.ret(*[_returnable(m, p, llvm) for p in parts], d)
    return m


def _check_all(x, rbits, got, out: str) -> None:
    it = iter(got)
    for case in CASES:
        number, scale, rm, sm = case
        _check(next(it), R.cast(x, number, scale, roundmode=rm, scalemode=sm,
                                rbits=_rb(rm, rbits)), (case, "cast"))
        enc = R.encode(x, number, scale, roundmode=rm, scalemode=sm, rbits=_rb(rm, rbits))
        for i, w in enumerate([enc.codes] + [a for a in enc[1:] if a is not None]):
            g = next(it)
            if g.dtype.kind == "i" and w.dtype.kind == "u":  # the LLVM engine's signless view
                g = g.view(w.dtype)
            assert g.dtype == w.dtype and g.shape == w.shape, (case, i, g.dtype, w.dtype)
            _check(g, w, (case, ("codes", "scales")[i]))
        _check(next(it), R.decode(enc, number, scale, dtype=WIDE[out]), (case, "decode"))


@pytest.mark.parametrize("wide, out", [("f32", "bf16"), ("bf16", "f32")])
def test_lut_ops_bit_exact_on_xla(wide, out):
    x, rbits = _data(np.random.default_rng(5), wide)
    _check_all(x, rbits, _module(x, rbits, out).run(), out)


def test_lut_ops_bit_exact_on_the_llvm_engine():
    x, rbits = _data(np.random.default_rng(6), "f16")
    x, rbits = x[:32], rbits[:32]
    _check_all(x, rbits, _llvm(_module(x, rbits, "f16", llvm=True)), "f16")


def test_builders_spell_custom_tables_with_their_values():
    with J.make_context(allow_unregistered=True), J.ir.Location.unknown():
        m = J.ir.Module.parse("func.func @f(%x: tensor<4xf32>) {\n  return\n}")
        blk = m.body.operations[0].regions[0].blocks[0]
        ip = J.ir.InsertionPoint.at_block_begin(blk)
        x = blk.arguments[0]
        named = mx.cast(x, "nf4", ip=ip)
        custom = mx.cast(x, NOZERO, "e8m0_t4", roundmode="zero", ip=ip)
        q = mx.quantize(x, number=NOZERO, ip=ip)
        assert 'number = "nf4"' in str(named) and "table" not in str(named)
        assert 'number = "lut"' in str(custom)
        assert "table = array<f32: -1.500000e+00, -5.000000e-01" in str(custom)
        assert mx.parse(custom).datatype.number == NOZERO
        assert mx.parse(q).datatype.number == NOZERO
        assert str(q.results[0].type) == "tensor<4xui8>"
