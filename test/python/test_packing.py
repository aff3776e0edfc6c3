"""Sub-byte packing (docs/semantics.md section 8) at function boundaries: mxlower-pack-subbyte-args
on XLA:CPU, bit-exact against :func:`mxlower.reference.pack` / ``unpack``.

* round trips: an f4/f6 identity function takes and returns packed bytes unchanged, for every
  code, along the last axis, axis 0 and a middle axis;
* cross-checks: f32 -> f4/f6 conversion results come back as ``reference.pack`` of the
  reference conversion; packed f4/f6 inputs decode as ``reference.unpack`` says;
* calls of rewritten functions, errors (odd f4 count, f6 count not a multiple of 4, dynamic
  dimension, scalar), and the memory footprint of packed MX tensors (the XLA RFC's table:
  MXFP8 33, MXFP6 25, MXFP4 17 bytes per 32-element block, f32 128).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference as R
from mxlower.bindings import jaxlib as J
from mxlower.diagnostics import DiagnosticEngine, PassFailure
from mxlower.execution import xla
from mxlower.formats import FLOAT_TYPES, FORMATS
from mxlower.pipeline.manager import run_pipeline

SUB = ["f4E2M1FN", "f6E2M3FN", "f6E3M2FN"]


def lower(text: str, opts: str = "", *, xla: bool = True) -> str:
    """mxlower-pack-subbyte-args, then (``xla``) mxlower-expand-narrow-floats for the f6 types:
    XLA:CPU (jaxlib 0.10.2) cannot compile f6 at all, so what is left of them in the body
    becomes ui8 codes and codec integer ops.  f4 stays native (the f4 pack lowering bitcasts
    f4 <-> ui4, which XLA:CPU runs and the expansion does not accept)."""
    ctx = J.make_context(allow_unregistered=True)
    with ctx:
        m = J.ir.Module.parse(text)
    tail = ", mxlower-expand-narrow-floats{types=f6E2M3FN,f6E3M2FN}" if xla else ""
    out = run_pipeline(m, f"builtin.module(mxlower-pack-subbyte-args{{{opts}}}{tail})", ctx=ctx)
    return out.get_asm()


def _t(shape, elt) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{elt}>"


def _codes(shape, t: str, seed=0) -> np.ndarray:
    """Random codes covering every code of ``t`` (uint8, upper bits zero)."""
    bits = FLOAT_TYPES[t].bits
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 1 << bits, size=int(np.prod(shape)), dtype=np.uint8)
    c[:1 << bits] = np.arange(1 << bits)[:c.size]
    return c.reshape(shape)


@pytest.mark.parametrize("t", SUB)
@pytest.mark.parametrize("shape,axis", [((4, 64), -1), ((48, 3), 0), ((2, 24, 5), 1)])
def test_identity_round_trip(t, shape, axis):
    ty = _t(shape, t)
    out = lower(f"func.func @main(%x: {ty}) -> {ty} {{\n  return %x : {ty}\n}}\n",
                f"axis={axis}")
    bits = FLOAT_TYPES[t].bits
    packed = R.pack(_codes(shape, t), bits, axis=axis)
    assert f"(%arg0: {_t(packed.shape, 'ui8')}) -> {_t(packed.shape, 'ui8')}" in out
    (y,) = xla.run(out, packed)
    assert y.dtype == np.uint8 and np.array_equal(y, packed)


@pytest.mark.parametrize("t", SUB)
@pytest.mark.parametrize("axis", [-1, 0])
def test_converted_results_are_packed_like_the_reference(t, axis):
    shape = (16, 32)
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x[0, :8] = [0.0, -0.0, np.inf, -np.inf, 1e9, -1e-9, 0.25, -0.75]
    text = (f"func.func @main(%x: {_t(shape, 'f32')}) -> {_t(shape, t)} {{\n"
            f"  %0 = stablehlo.convert %x : ({_t(shape, 'f32')}) -> {_t(shape, t)}\n"
            f"  return %0 : {_t(shape, t)}\n}}\n")
    (y,) = xla.run(lower(text, f"axis={axis}"), x)
    want = R.pack(R.bits(R.convert(x, t)), FLOAT_TYPES[t].bits, axis=axis)
    assert np.array_equal(y, want)


@pytest.mark.parametrize("t", SUB)
def test_packed_arguments_decode_like_the_reference(t):
    shape = (8, 64)
    codes = _codes(shape, t, seed=2)
    text = (f"func.func @main(%x: {_t(shape, t)}) -> {_t(shape, 'f32')} {{\n"
            f"  %0 = stablehlo.convert %x : ({_t(shape, t)}) -> {_t(shape, 'f32')}\n"
            f"  return %0 : {_t(shape, 'f32')}\n}}\n")
    packed = R.pack(codes, FLOAT_TYPES[t].bits)
    (y,) = xla.run(lower(text), packed)
    decoded = R.unpack(packed, FLOAT_TYPES[t].bits)
    assert np.array_equal(decoded, codes)
    want = R.convert(decoded.view(FLOAT_TYPES[t].dtype), "f32")
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))


def test_mixed_signature_and_calls():
    text = """
func.func @main(%x: tensor<4x8xf4E2M1FN>, %w: tensor<2xf32>) -> (tensor<4x8xf6E3M2FN>, tensor<2xf32>) {
  %0 = func.call @helper(%x) : (tensor<4x8xf4E2M1FN>) -> tensor<4x8xf6E3M2FN>
  return %0, %w : tensor<4x8xf6E3M2FN>, tensor<2xf32>
}
func.func @helper(%x: tensor<4x8xf4E2M1FN>) -> tensor<4x8xf6E3M2FN> {
  %0 = stablehlo.convert %x : (tensor<4x8xf4E2M1FN>) -> tensor<4x8xf6E3M2FN>
  return %0 : tensor<4x8xf6E3M2FN>
}
"""
    out = lower(text, "functions=main,helper", xla=False)
    assert "call @helper(%" in out and "(tensor<4x4xui8>) -> tensor<4x6xui8>" in out
    out = lower(text, "functions=main,helper")
    assert "@main(%arg0: tensor<4x4xui8>, %arg1: tensor<2xf32>) -> (tensor<4x6xui8>, " \
           "tensor<2xf32>)" in out
    codes = _codes((4, 8), "f4E2M1FN", 3)
    w = np.array([1.5, -2.0], np.float32)
    y, w2 = xla.run(out, R.pack(codes, 4), w)
    want = R.bits(R.convert(codes.view(ml_dtypes.float4_e2m1fn), "f6E3M2FN"))
    assert np.array_equal(y, R.pack(want, 6)) and np.array_equal(w2, w)


def test_default_rewrites_public_functions_only():
    text = """
func.func private @inner(%x: tensor<2xf4E2M1FN>) -> tensor<2xf4E2M1FN> {
  return %x : tensor<2xf4E2M1FN>
}
func.func @main(%x: tensor<2xf4E2M1FN>) -> tensor<2xf4E2M1FN> {
  %0 = func.call @inner(%x) : (tensor<2xf4E2M1FN>) -> tensor<2xf4E2M1FN>
  return %0 : tensor<2xf4E2M1FN>
}
"""
    out = lower(text, xla=False)
    assert "@inner(%arg0: tensor<2xf4E2M1FN>) -> tensor<2xf4E2M1FN>" in out
    assert "@main(%arg0: tensor<1xui8>) -> tensor<1xui8>" in out


@pytest.mark.parametrize("ty,msg", [
    ("tensor<4x7xf4E2M1FN>", "7 values of f4E2M1FN (4 bits) along dimension 1 do not fill "
                             "whole bytes (28 bits)"),
    ("tensor<6xf6E2M3FN>", "6 values of f6E2M3FN (6 bits) along dimension 0 do not fill "
                           "whole bytes (36 bits)"),
    ("tensor<2x?xf6E3M2FN>", "dimension 1 is dynamic"),
    ("tensor<f4E2M1FN>", "a rank-0 tensor cannot be packed"),
])
def test_errors(ty, msg):
    ctx = J.make_context(allow_unregistered=True)
    with ctx:
        m = J.ir.Module.parse(f"func.func @main(%x: {ty}) -> {ty} {{\n  return %x : {ty}\n}}\n")
    eng = DiagnosticEngine()
    with pytest.raises(PassFailure):
        run_pipeline(m, "builtin.module(mxlower-pack-subbyte-args)", ctx=ctx, engine=eng)
    assert eng.diagnostics[0].message == f"cannot pack argument 0 of @main ({ty}): {msg}"


# ----------------------------------------------------------------------------- footprint


def _bytes(t) -> int:
    """Storage bytes of a tensor type (ui8 and 8-bit floats: one byte per element)."""
    et = str(t.element_type)
    bits = 8 if et == "ui8" else FLOAT_TYPES[et].bits if et in FLOAT_TYPES else \
        J.ir.FloatType(t.element_type).width
    assert bits % 8 == 0, f"{t}: not a whole-byte storage type"
    return int(np.prod(t.shape)) * bits // 8


def _interface_bytes(text: str) -> int:
    ctx = J.make_context(allow_unregistered=True)
    with ctx:
        m = J.ir.Module.parse(text)
        f = m.body.operations[0]
        ft = J.ir.FunctionType(J.ir.TypeAttr(f.attributes["function_type"]).value)
        return sum(_bytes(J.ir.RankedTensorType(t)) for t in ft.inputs)


@pytest.mark.parametrize("fmt,per_block", [("mxfp8_e4m3", 33), ("mxfp6_e3m2", 25),
                                           ("mxfp6_e2m3", 25), ("mxfp4_e2m1", 17)])
def test_footprint_of_packed_mx_tensors(fmt, per_block):
    """Bytes of a packed MX interface (elements + f8E8M0FNU scales) per 32-element block."""
    f = FORMATS[fmt]
    rows, cols = 128, 1024
    el, sc = _t((rows, cols), f.element), _t((rows, cols // 32), f.scale)
    text = (f"func.func @main(%e: {el}, %s: {sc}) -> ({el}, {sc}) {{\n"
            f"  return %e, %s : {el}, {sc}\n}}\n")
    total = _interface_bytes(lower(text, xla=False))
    blocks = rows * cols // 32
    assert total == blocks * per_block == f.bytes_per_block() * blocks
    f32 = f"func.func @main(%x: {_t((rows, cols), 'f32')}) {{\n  return\n}}\n"
    assert _interface_bytes(f32) == blocks * 128
