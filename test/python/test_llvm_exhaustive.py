"""Exhaustive bit-exactness of the LLVM path (docs/semantics.md section 2).

Each type pair is one StableHLO ``stablehlo.convert`` function on dynamically shaped 1-D
tensors, lowered by ``mxlower-stablehlo-to-llvm`` (so through
``mxlower-lower-narrow-floats-to-llvm``), JIT-compiled once by the ExecutionEngine at O3 in the
isolated worker, and run on every input at once:

* to each narrow type: every bf16 and every f16 bit pattern, and > 200k f32 probes (every
  narrow value, every midpoint and its f32 neighbours, subnormals, +-0, +-Inf, NaNs of both
  signs with payloads, random bit patterns: :func:`mxlower.types.probe_values`); f64 probes
  too (single rounding, no detour through f32);
* from each narrow type: every code, to f32, bf16, f16 and f64.

The oracle is :func:`mxlower.reference.convert` (ml_dtypes plus the section-2 NaN rules).
Narrow results must be identical codes (the whole byte: f4/f6 upper bits zero); wide results
identical bits, except that a NaN result is only compared by NaN-ness.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxlower import reference
from mxlower.execution import llvm
from mxlower.formats import FLOAT_TYPES
from mxlower.lowering import codec
from mxlower.lowering import int_builders
from mxlower.types import probe_values

pytest.importorskip("mlir.execution_engine")

NARROW = list(FLOAT_TYPES)
WIDE = ["f32", "bf16", "f16", "f64"]


def _convert_module(src: str, dst: str) -> str:
    return (f"func.func @main(%x: tensor<?x{src}>) -> tensor<?x{dst}> {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<?x{src}>) -> tensor<?x{dst}>\n"
            f"  return %0 : tensor<?x{dst}>\n}}\n")


def _run(src: str, dst: str, x: np.ndarray) -> np.ndarray:
    with llvm.compile(_convert_module(src, dst)) as h:
        (y,) = h.run("main", x)
    assert y.dtype == reference.convert(x[:1], dst).dtype and y.shape == x.shape
    return y


def _first_mismatches(x, got, want, n=8) -> str:
    rows = [f"  input {reference.bits(x[i]):#x} ({x[i]!r}): got {reference.bits(got[i]):#x}, "
            f"want {reference.bits(want[i]):#x}" for i in np.flatnonzero(~_same(got, want))[:n]]
    return "\n".join(rows)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    if got.dtype.name in {t.numpy_name for t in FLOAT_TYPES.values()}:
        # raw bytes: f4/f6 codes must come with their upper bits zero, as ml_dtypes stores them
        return got.view(np.uint8) == reference.bits(want)
    w = want.astype(np.float64)
    g = got.astype(np.float64)
    nan = np.isnan(w)
    return np.where(nan, np.isnan(g), reference.bits(got) == reference.bits(want))


@pytest.mark.parametrize("src", WIDE)
@pytest.mark.parametrize("dst", NARROW)
def test_truncf_is_bit_exact(src, dst):
    x = probe_values(src)
    if src == "f32":
        assert x.size >= 200_000
        assert np.isnan(x).sum() >= 8 and np.isinf(x).sum() == 2 and (x == 0).sum() == 2
    got = _run(src, dst, x)
    want = reference.convert(x, dst)
    ok = _same(got, want)
    assert ok.all(), (f"{src} -> {dst}: {int((~ok).sum())} of {x.size} differ\n"
                      + _first_mismatches(x, got, want))


@pytest.mark.parametrize("dst", WIDE)
@pytest.mark.parametrize("src", NARROW)
def test_extf_is_bit_exact(src, dst):
    x = probe_values(src)
    assert x.size == 1 << FLOAT_TYPES[src].bits
    got = _run(src, dst, x)
    want = reference.convert(x, dst)
    ok = _same(got, want)
    assert ok.all(), (f"{src} -> {dst}: {int((~ok).sum())} of {x.size} differ\n"
                      + _first_mismatches(x, got, want))


def _rounding_module(src: str, rounding: str) -> str:
    """arith.truncf with ``rounding`` from ``src`` to every narrow type, elementwise in one
    linalg.generic (upstream dialects: the pipeline starts after StableHLO)."""
    ident = "affine_map<(i) -> (i)>"
    outs = [f"tensor<?x{d}>" for d in NARROW]
    empties = "\n".join(f"  %e{i} = tensor.empty(%n) : {t}" for i, t in enumerate(outs))
    args = ", ".join(f"%o{i}: {d}" for i, d in enumerate(NARROW))
    body = "\n".join(f"    %t{i} = arith.truncf %a {rounding} : {src} to {d}"
                     for i, d in enumerate(NARROW))
    res = ", ".join(outs)
    return (f"func.func @main(%x: tensor<?x{src}>) -> ({res}) {{\n"
            f"  %c0 = arith.constant 0 : index\n  %n = tensor.dim %x, %c0 : tensor<?x{src}>\n"
            f"{empties}\n"
            f"  %y:{len(NARROW)} = linalg.generic {{indexing_maps = "
            f"[{', '.join([ident] * (len(NARROW) + 1))}], iterator_types = [\"parallel\"]}}\n"
            f"      ins(%x : tensor<?x{src}>) outs({', '.join(f'%e{i}' for i in range(len(NARROW)))}"
            f" : {res}) {{\n  ^bb0(%a: {src}, {args}):\n{body}\n"
            f"    linalg.yield {', '.join(f'%t{i}' for i in range(len(NARROW)))} : "
            f"{', '.join(NARROW)}\n  }} -> ({res})\n"
            f"  return {', '.join(f'%y#{i}' for i in range(len(NARROW)))} : {res}\n}}\n")


@pytest.mark.parametrize("src", ["f32", "bf16"])
@pytest.mark.parametrize("rounding", ["toward_zero", "to_nearest_away"])
def test_truncf_rounding_modes_are_bit_exact(src, rounding):
    """arith.truncf toward_zero / to_nearest_away, lowered by mxlower-lower-narrow-floats-to-llvm
    and run on the ExecutionEngine: the codec's bits (codec.emit_truncf, checked against
    the oracle in test_codec.py) for every narrow type, on the f32 probes / every bf16."""
    mode = codec.TRUNCF_MODES[rounding]
    x = probe_values(src)
    with llvm.compile(_rounding_module(src, rounding)) as h:
        outs = h.run("main", x)
    for dst, got in zip(NARROW, outs):
        want = codec.emit_truncf(int_builders.NumpyBuilder(), x, src, dst, roundmode=mode)
        ok = got.view(np.uint8) == want
        assert ok.all(), (dst, int((~ok).sum()))
