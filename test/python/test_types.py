"""The scalar-type table, and a narrow float added in one place flowing through mxlower.

Each test below that takes ``new_type`` registers a narrow float mxlower does not list --
ml_dtypes' IEEE-like ``float8_e4m3`` (MLIR ``f8E4M3``: Inf, NaNs, overflow to Inf) and
``float8_e3m4`` (``f8E3M4``), built-in rows now, withdrawn from the table for the test
(:func:`mxlower.types.withdrawn`) -- with ONE ``types.register(FloatType(...))`` call and
removes it afterwards.  Nothing else is told about the type, and it must come out bit-exact with ml_dtypes
from: the codec (NumPy builder, every input class exhaustively), mxlower-expand-narrow-floats
(on XLA:CPU, converts and constants, default and explicit ``types=``),
mxlower-lower-narrow-floats-to-llvm (through mxlower-stablehlo-to-llvm on the LLVM
ExecutionEngine), the NVVM lowering's plan (no cvt: the codec) and mxlower-run's array I/O.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference as R
from mxlower import types
from mxlower.bindings import jaxlib as J
from mxlower.bindings import upstream
from mxlower.execution import llvm, xla
from mxlower.lowering import codec
from mxlower.lowering import int_builders
from mxlower.types import probe_values
from mxlower.lowering import nvvm as NV
from mxlower.passes import OptionError
from mxlower.passes.expand_narrow_floats import ExpandNarrowFloats
from mxlower.passes.lower_narrow_floats_to_nvvm import LowerNarrowFloatsToNVVM
from mxlower.pipeline.manager import run_pipeline
from mxlower.pipeline.parser import PipelineError
from mxlower.tools import run as run_tool
from mxlower.types import FloatType

#: The "new" types: ml_dtypes has them; mxlower's rows are withdrawn for the test and these
#: registered instead (they must equal the built-in rows).  f8E4M3: 4 exponent bits
#: (bias 7), 3 mantissa bits, IEEE specials (0x78 = Inf, 0x79.. = NaN; ml_dtypes' NaN 0x7C).
E4M3 = FloatType("f8E4M3", "float8_e4m3", 8, 4, 3, 7, True, "ieee", "inf", 0x7C)
#: f8E3M4: 3 exponent bits (bias 3), 4 mantissa bits, IEEE specials (0x70 = Inf, NaN 0x78).
E3M4 = FloatType("f8E3M4", "float8_e3m4", 8, 3, 4, 3, True, "ieee", "inf", 0x78)

NP = int_builders.NumpyBuilder()


#: An FNUZ type: no Inf, no -0, 0x80 the one NaN (overflow and Inf give it).
E4M3FNUZ = FloatType("f8E4M3FNUZ", "float8_e4m3fnuz", 8, 4, 3, 8, True, "fnuz", "nan", 0x80)


@pytest.fixture(params=[E4M3, E3M4, E4M3FNUZ], ids=lambda t: t.mlir)
def new_type(request):
    """The type registered for the test, unregistered after it (even when the test fails)."""
    t = request.param
    order = list(types.SCALARS)
    with types.withdrawn(t.mlir) as row:
        assert row.codec == t, "the built-in row differs from the registered one"
        assert t.mlir not in types.SCALARS and t.mlir not in types.FLOAT_TYPES
        types.register(t)
        try:
            yield t
        finally:
            types.unregister(t.mlir)
        assert t.mlir not in types.SCALARS and t.mlir not in types.FLOAT_TYPES
    assert list(types.SCALARS) == order and types.FLOAT_TYPES[t.mlir] == t


def want_codes(x: np.ndarray, t: FloatType) -> np.ndarray:
    """ml_dtypes' conversion of f32/bf16/f16 ``x`` to ``t`` as codes, every NaN as ``t``'s NaN
    code with the input's sign (docs/semantics.md section 2 for types with NaN).  f64 ``x``: the
    oracle's conversion (ml_dtypes' own rounds twice, through f32)."""
    if x.dtype == np.float64:
        return R.bits(R.convert(x, t.mlir))
    with np.errstate(over="ignore", invalid="ignore"):
        codes = x.astype(t.dtype).view(np.uint8).copy()
        nan = np.isnan(x.astype(np.float32))
        sign = np.signbit(x.astype(np.float32)).astype(np.uint8) << 7
    codes[nan] = (t.nan_code | sign)[nan]
    return codes


def mismatches(x: np.ndarray, got: np.ndarray, want: np.ndarray, k: int = 5) -> list:
    bad = np.flatnonzero(got != want)[:k]
    return [(hex(int(R.bits(x)[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad]


# ----------------------------------------------------------------------------- the table


def test_every_row_describes_its_dtype():
    """Each float row's codec description is the dtype's: widths, bias, max, specials."""
    for t in [*types.FLOAT_TYPES.values(), *types.WIDE_FLOAT_TYPES.values(), E4M3, E3M4]:
        fi = ml_dtypes.finfo(t.dtype)
        bias = 1 - fi.minexp if t.subnormals else -fi.minexp  # f8E8M0FNU: code 0 is 2^-127
        assert (t.exp_bits, t.man_bits, t.bias) == (fi.nexp, fi.nmant, bias), t.mlir
        assert t.max == float(fi.max) and t.code_of(t.max) == t.max_code, t.mlir
        if t.overflow != "saturate" and np.isfinite(t.overflow_midpoint):
            with np.errstate(over="ignore"):
                above = t.code_of(t.overflow_midpoint) & t.magnitude_mask
            # the midpoint ties to even: onto max when max's code is even, past it when odd
            # (f8E8M0FNU rounds ties up, so its midpoint overflows)
            even = t.max_code % 2 == 0 and t.special != "fnu"
            assert (above == t.max_code) == even, t.mlir
        if t.has_inf:
            assert t.code_of(np.inf) == t.exponent_mask, t.mlir
        assert t.is_subbyte == (t.bits < 8)


def test_table_lookups():
    f4 = types.scalar("f4E2M1FN")
    assert (f4.bits, f4.storage, f4.code_dtype, f4.code_mask) == (4, "i8", np.uint8, 0xF)
    assert types.scalar("float4_e2m1fn") is f4 and types.of_dtype(f4.dtype) is f4
    assert types.dtype("bf16") == np.dtype(ml_dtypes.bfloat16)
    assert types.float_type("f6E2M3FN").bits == 6
    assert types.is_subbyte_float("f6E3M2FN") and not types.is_subbyte_float("f8E4M3FN")
    assert not types.is_subbyte_float("i4") and types.is_wide_float("f64")
    assert types.scalar("i1").storage == "i8" and types.scalar("f64").storage == "i64"
    with pytest.raises(KeyError, match="unknown narrow float type 'f32'"):
        types.float_type("f32")
    with pytest.raises(KeyError, match="unknown scalar type 'tf32'"):
        types.scalar("tf32")
    with pytest.raises(ValueError, match="built in"):
        types.unregister("f8E4M3FN")
    assert types.extensions() == []


def test_register_and_unregister(new_type):
    t = types.scalar(new_type.mlir)
    assert t.kind == "narrow" and t.codec is new_type and t.storage == "i8"
    assert types.of_dtype(new_type.dtype) is t and types.scalar(new_type.numpy_name) is t
    assert types.float_type(new_type.mlir) is new_type and types.is_narrow_float(new_type.mlir)
    assert new_type.mlir in types.FLOAT_TYPES and new_type.mlir not in types.WIDE_TYPES
    assert types.register(new_type) is not None  # the same row again: a no-op
    assert types.extensions() == [t]
    other = FloatType(new_type.mlir, "float8_e5m2", 8, 5, 2, 15, True, "ieee", "inf", 0x7E)
    with pytest.raises(ValueError, match="already registered differently"):
        types.register(other)


# ----------------------------------------------------------------------------- the codec


@pytest.mark.parametrize("fpu", [True, False], ids=["fpu", "int"])
@pytest.mark.parametrize("src", ["f32", "bf16", "f16", "f64"])
def test_codec_truncf(new_type, src, fpu):
    """Every bf16/f16 bit pattern, the f32/f64 probe sets (which include the new type's values,
    midpoints and their neighbours, since they are built from the table when asked for)."""
    x = probe_values(src, n_random=1 << 12)
    got = codec.emit_truncf(NP, x, src, new_type.mlir, fpu=fpu)
    want = want_codes(x, new_type)
    assert np.array_equal(got, want), mismatches(x, got, want)


@pytest.mark.parametrize("dst", ["f32", "bf16", "f16", "f64"])
def test_codec_extf(new_type, dst):
    codes = np.arange(256, dtype=np.uint8)
    got = codec.emit_extf(NP, codes, new_type.mlir, dst)
    want = codes.view(new_type.dtype).astype(types.dtype(dst))
    nan = np.isnan(want.astype(np.float64))
    assert np.array_equal(np.isnan(got.astype(np.float64)), nan)
    assert np.array_equal(R.bits(got)[~nan], R.bits(want)[~nan])


@pytest.mark.parametrize("other", ["f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f6E2M3FN", "f4E2M1FN"])
def test_codec_narrow_to_narrow(new_type, other):
    """Both directions against the listed types: the result of going through f32."""
    mine = np.arange(256, dtype=np.uint8)
    got = codec.emit_convert_codes(NP, mine, new_type.mlir, other)
    want = R.bits(R.convert(mine.view(new_type.dtype).astype(np.float32), other))
    assert np.array_equal(got, want), mismatches(mine, got, want)
    theirs = np.arange(1 << types.float_type(other).bits, dtype=np.uint8)
    got = codec.emit_convert_codes(NP, theirs, other, new_type.mlir)
    want = want_codes(R.from_bits(theirs, other).astype(np.float32), new_type)
    assert np.array_equal(got, want), mismatches(theirs, got, want)


# ----------------------------------------------------------------------------- the passes


def _expand(text: str, options: str = "") -> str:
    with J.make_context():
        m = J.ir.Module.parse(text)
        run_pipeline(m, "builtin.module(mxlower-expand-narrow-floats"
                     + ("{" + options + "})" if options else ")"))
        return str(m)


@pytest.mark.parametrize("explicit", [False, True], ids=["default", "types="])
def test_expand_narrow_floats_on_xla_cpu(new_type, explicit):
    """f32 -> the new type, the new type -> f32 and a constant of it, expanded (with the
    default types and with types=<it>), compiled and run on XLA:CPU, against ml_dtypes."""
    t = new_type.mlir
    x = probe_values("f32", n_random=1 << 12)
    n = x.size
    lit = "[1.5, -2.0, 0x7F, 0.0, -0.0]"
    text = (f"func.func @main(%x: tensor<{n}xf32>, %c: tensor<256x{t}>) -> (tensor<{n}x{t}>, "
            f"tensor<256xf32>, tensor<5x{t}>) {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<{n}xf32>) -> tensor<{n}x{t}>\n"
            f"  %1 = stablehlo.convert %c : (tensor<256x{t}>) -> tensor<256xf32>\n"
            f"  %2 = stablehlo.constant dense<{lit}> : tensor<5x{t}>\n"
            f"  return %0, %1, %2 : tensor<{n}x{t}>, tensor<256xf32>, tensor<5x{t}>\n}}\n")
    out = _expand(text, f"types={t}" if explicit else "")
    assert t not in out and "tensor<256xui8>" in out
    codes = np.arange(256, dtype=np.uint8)
    got, back, const = xla.run(out, x, codes)
    want = want_codes(x, new_type)
    assert np.array_equal(got, want), mismatches(x, got, want)
    exp = codes.view(new_type.dtype).astype(np.float32)
    nan = np.isnan(exp)
    assert np.array_equal(np.isnan(back), nan) and np.array_equal(back[~nan], exp[~nan])
    c = np.array([1.5, -2.0, 0.0, 0.0, -0.0]).astype(new_type.dtype).view(np.uint8)
    c[2] = 0x7F
    assert np.array_equal(const, c)


def test_expand_types_option_follows_the_table():
    """types= accepts exactly the registered narrow types, when the pipeline is parsed."""
    text = "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}"
    with types.withdrawn(E4M3.mlir):
        with pytest.raises(OptionError, match="invalid value 'f8E4M3'"):
            ExpandNarrowFloats.from_options("types=f8E4M3")
        with pytest.raises(PipelineError, match="invalid value 'f8E4M3'"):
            _expand(text, "types=f8E4M3")
        types.register(E4M3)
        assert ExpandNarrowFloats.from_options("types=f8E4M3").types == ("f8E4M3",)
        assert "tensor<2xf32>" in _expand(text, "types=f8E4M3")
    assert ExpandNarrowFloats.from_options("types=f8E4M3").types == ("f8E4M3",)


def test_lower_to_llvm_runs(new_type):
    """mxlower-stablehlo-to-llvm (so mxlower-lower-narrow-floats-to-llvm) on the LLVM
    ExecutionEngine, in this process (a worker process would not have the type registered):
    arguments and results of the new type are ml_dtypes arrays of it."""
    pytest.importorskip("mlir.execution_engine")
    t = new_type.mlir
    text = (f"func.func @main(%x: tensor<?xf32>, %c: tensor<?x{t}>) -> (tensor<?x{t}>, "
            f"tensor<?xf32>) {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<?xf32>) -> tensor<?x{t}>\n"
            f"  %1 = stablehlo.convert %c : (tensor<?x{t}>) -> tensor<?xf32>\n"
            f"  return %0, %1 : tensor<?x{t}>, tensor<?xf32>\n}}\n")
    x = probe_values("f32", n_random=1 << 12)
    c = np.arange(256, dtype=np.uint8).view(new_type.dtype)
    with llvm.compile(text, isolate=False) as h:
        y, back = h.run("main", x, c)
    assert y.dtype == new_type.dtype and back.dtype == np.float32
    want = want_codes(x, new_type)
    assert np.array_equal(y.view(np.uint8), want), mismatches(x, y.view(np.uint8), want)
    exp = c.astype(np.float32)
    nan = np.isnan(exp)
    assert np.array_equal(np.isnan(back), nan) and np.array_equal(back[~nan], exp[~nan])


def test_nvvm_lowers_it_with_the_codec(new_type):
    """No cvt converts the new type, on any chip: mxlower-lower-narrow-floats-to-nvvm takes
    the codec's path (integer ops, no nvvm.convert) and stores it as i8; the plan's NumPy
    execution (the builder the cvt models extend) is bit-exact."""
    t = new_type.mlir
    for chip in ("sm_89", "sm_100a"):
        assert NV.plan_truncf("f32", t, chip).path == "codec"
        assert NV.plan_extf(t, "f16", chip).path == "codec"
    x = probe_values("f16")
    plan = NV.plan_truncf("f16", t, "sm_100a")
    got = NV.emit_truncf(NV.NumpyCvtBuilder(), x, "f16", t, plan)
    assert np.array_equal(got, want_codes(x, new_type))
    text = (f"func.func @f(%x: vector<4xf32>, %m: memref<4x{t}>) -> vector<4xf16> {{\n"
            f"  %c0 = arith.constant 0 : index\n"
            f"  %y = arith.truncf %x : vector<4xf32> to vector<4x{t}>\n"
            f"  vector.store %y, %m[%c0] : memref<4x{t}>, vector<4x{t}>\n"
            f"  %z = arith.extf %y : vector<4x{t}> to vector<4xf16>\n"
            f"  return %z : vector<4xf16>\n}}\n")
    with upstream.context():
        m = upstream.module("ir").Module.parse(text)
        LowerNarrowFloatsToNVVM(chip="sm_100a", narrow_storage=True).run(m.operation)
        m.operation.verify()
        out = str(m)
    assert t not in out and "nvvm." not in out and "memref<4xi8>" in out
    assert "arith.shrui" in out and "arith.bitcast" in out


# ----------------------------------------------------------------------------- tools' I/O


@pytest.mark.parametrize("backend", ["xla", "interpreter"])
def test_run_tool_reads_writes_and_prints_it(new_type, backend, tmp_path, capsys):
    """mxlower-run (in this process, where the type is registered) reads a .npy of the new
    dtype, prints its results as MLIR literals of it and writes them to .npz."""
    t = new_type.mlir
    text = (f"func.func @main(%x: tensor<5xf32>, %c: tensor<4x{t}>) -> (tensor<5x{t}>, "
            f"tensor<4xf32>) {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<5xf32>) -> tensor<5x{t}>\n"
            f"  %1 = stablehlo.convert %c : (tensor<4x{t}>) -> tensor<4xf32>\n"
            f"  return %0, %1 : tensor<5x{t}>, tensor<4xf32>\n}}\n")
    (tmp_path / "m.mlir").write_text(text)
    x = np.array([1.5, -3.0, 1000.0, np.inf, np.nan], np.float32)
    c = np.array([1.0, 0.5, -2.0, np.inf]).astype(new_type.dtype)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "c.npy", c)
    rc = run_tool.main([str(tmp_path / "m.mlir"), "-i", str(tmp_path / "x.npy"),
                        "-i", str(tmp_path / "c.npy"), "-o", str(tmp_path / "out.npz"),
                        f"--backend={backend}"])
    out = capsys.readouterr().out
    assert rc == 0, out
    want = want_codes(x, new_type)
    inf, nan = (f"0x{want[i]:02X}" for i in (3, 4))
    assert f"%0 = dense<[1.5, -3.0, {inf}, {inf}, {nan}]> : tensor<5x{t}>" in out
    last = "0x7F800000" if new_type.has_inf else "0x7FC00000"  # Inf, or the FNUZ NaN
    assert f"%1 = dense<[1.0, 0.5, -2.0, {last}]> : tensor<4xf32>" in out
    saved = np.load(tmp_path / "out.npz")
    assert np.array_equal(saved["result0"].view(np.uint8), want)
    assert np.array_equal(saved["result1"], c.astype(np.float32), equal_nan=True)
