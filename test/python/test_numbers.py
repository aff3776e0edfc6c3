"""mxlower.numbers: number specs, scale specs and datatypes (docs/semantics.md section 10.1,
10.3, 10.4) -- parsing every code and name, the derived values (checked against ml_dtypes'
finfo wherever ml_dtypes has the type), the code of every value, and the errors."""

from __future__ import annotations

import fractions
import math

import ml_dtypes
import numpy as np
import pytest

from mxlower import formats, numbers, types
from mxlower.numbers import SpecError

F = fractions.Fraction

#: code or name -> canonical code
PARSES = {
    "e4m3fn": "e4m3fn", "f8E4M3FN": "e4m3fn", "float8_e4m3fn": "e4m3fn",
    "torch.float8_e4m3fn": "e4m3fn", "e5m2": "e5m2", "f8E5M2": "e5m2", "e5m2ieee": "e5m2",
    "float8_e5m2": "e5m2", "e4m3": "e4m3", "float8_e4m3": "e4m3", "e3m4": "e3m4",
    "e4m3fnuz": "e4m3b8fnuz", "float8_e4m3fnuz": "e4m3b8fnuz",
    "torch.float8_e4m3fnuz": "e4m3b8fnuz", "e5m2fnuz": "e5m2b16fnuz",
    "float8_e5m2fnuz": "e5m2b16fnuz", "e5m2b15fnuz": "e5m2b15fnuz",
    "e4m3b11fnuz": "e4m3b11fnuz", "float8_e4m3b11fnuz": "e4m3b11fnuz",
    "f6E3M2FN": "e3m2fo", "float6_e3m2fn": "e3m2fo", "f6E2M3FN": "e2m3fo",
    "float6_e2m3fn": "e2m3fo", "f4E2M1FN": "e2m1fo", "float4_e2m1fn": "e2m1fo",
    "e2m1fo": "e2m1fo", "e2m1fn": "e2m1fn", "e3m2fn": "e3m2fn",
    "f8E8M0FNU": "e8m0", "float8_e8m0fnu": "e8m0", "torch.float8_e8m0fnu": "e8m0",
    "e8m0": "e8m0", "e8m0fnu": "e8m0", "e5m0": "e5m0", "e4m0": "e4m0",
    "float32": "e8m23", "f32": "e8m23", "torch.float32": "e8m23", "bfloat16": "e8m7",
    "bf16": "e8m7", "torch.bfloat16": "e8m7", "float16": "e5m10", "f16": "e5m10",
    "e5m6": "e5m6", "e6m9": "e6m9", "e4m3b5": "e4m3b5", "e4m3b7": "e4m3", "e3m3": "e3m3",
    "e2m0fo": "e2m0fo", "e4m0fn": "e4m0fn", "e1m2fn": "e1m2fn", "e1m6fo": "e1m6fo",
    "int8": "int8", "int4": "int4", "int2": "int2", "int32": "int32", "uint1": "uint1",
    "uint8": "uint8", "uint32": "uint32", " e5m6 ": "e5m6",
}


@pytest.mark.parametrize("text", PARSES)
def test_parse(text):
    spec = numbers.number(text)
    assert spec.code == PARSES[text]
    assert numbers.number(spec.code) == spec  # the canonical code parses back to the spec
    assert numbers.number(spec) is spec


BAD = {
    "e9m2": "exponent bits must be 1..8", "e0m3fn": "exponent bits must be 1..8",
    "e4m24": "mantissa bits must be 0..23", "e3m0": "needs 4..8 exponent bits",
    "e9m0": "exponent bits must be 1..8", "e1m3": "at least 2 exponent bits",
    "e4m0ieee": "needs a mantissa bit", "e5m3fnu": "exponent type",
    "e8m0b3": "default bias", "e8m3b0": "exceeds f32", "e4m3b-200": "exceeds f32",
    "e8m7b200": "below f32's smallest subnormal", "int1": "2 <= K <= 32",
    "int33": "2 <= K <= 32", "uint0": "1 <= K <= 32", "uint33": "1 <= K <= 32",
    "float64": "unknown number spec", "f64": "unknown number spec", "foo": "unknown number spec",
    "e4m3xx": "unknown number spec", "": "empty number spec", "e1m0fn": "no finite",
}


@pytest.mark.parametrize("text", BAD)
def test_parse_errors(text):
    with pytest.raises(SpecError, match=BAD[text]):
        numbers.number(text)


def test_not_a_string():
    with pytest.raises(SpecError, match="a number spec is a string"):
        numbers.number(8)
    with pytest.raises(SpecError, match="a scale spec is a string"):
        numbers.scale(None)


# ----------------------------------------------------------------------------- vs ml_dtypes

ML = {  # spec code -> ml_dtypes / NumPy dtype
    "e4m3fn": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
    "e4m3": ml_dtypes.float8_e4m3, "e3m4": ml_dtypes.float8_e3m4,
    "e4m3b8fnuz": ml_dtypes.float8_e4m3fnuz, "e5m2b16fnuz": ml_dtypes.float8_e5m2fnuz,
    "e4m3b11fnuz": ml_dtypes.float8_e4m3b11fnuz, "e8m0": ml_dtypes.float8_e8m0fnu,
    "e3m2fo": ml_dtypes.float6_e3m2fn, "e2m3fo": ml_dtypes.float6_e2m3fn,
    "e2m1fo": ml_dtypes.float4_e2m1fn, "e8m7": ml_dtypes.bfloat16, "e5m10": np.float16,
}


@pytest.mark.parametrize("code", ML)
def test_derived_values_match_ml_dtypes(code):
    spec = numbers.number(code)
    fi = ml_dtypes.finfo(ML[code])
    assert spec.bits == fi.bits
    assert spec.max == float(fi.max)
    assert spec.min == float(fi.min)
    assert spec.smallest_normal == float(fi.tiny)
    assert spec.smallest_subnormal == float(fi.smallest_subnormal)
    assert spec.eps == float(fi.eps)
    assert spec.emax == fi.maxexp - 1
    assert spec.emin == fi.minexp
    assert spec.midmax == (spec.max + 2.0 ** (spec.emax + 1)) / 2


@pytest.mark.parametrize("code", [c for c in ML if numbers.number(c).bits <= 16])
def test_value_of_every_code_matches_ml_dtypes(code):
    spec = numbers.number(code)
    dt = np.dtype(ML[code])
    codes = np.arange(1 << spec.bits, dtype=types.code_dtype(dt))
    with np.errstate(invalid="ignore"):
        want = codes.view(dt).astype(np.float64)
    got = np.array([float(spec.value_of(int(c))) for c in codes])
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    assert np.all(same | (np.isnan(got) & np.isnan(want)))


@pytest.mark.parametrize("code", [c for c in ML if numbers.number(c).bits <= 16])
def test_nan_code_is_ml_dtypes(code):
    spec = numbers.number(code)
    dt = np.dtype(ML[code])
    got = np.array(np.nan, np.float32).astype(dt).view(types.code_dtype(dt))
    mask = (1 << spec.bits) - 1
    if spec.special == "fo":
        assert spec.nan_code is None and not spec.has_nan
    else:
        assert int(got) & mask == spec.nan_code


def test_mlir_types_and_storage():
    assert numbers.number("e4m3fn").mlir == "f8E4M3FN"
    assert numbers.number("e4m3fn").float_type is types.FLOAT_TYPES["f8E4M3FN"]
    assert numbers.number("e8m23").mlir == "f32"
    assert numbers.number("e2m1fo").storage == "f4E2M1FN"
    e5m6 = numbers.number("e5m6")
    assert e5m6.mlir is None and e5m6.storage == "ui16" and e5m6.dtype == np.uint16
    assert numbers.number("e3m3").storage == "ui8"
    assert numbers.number("e8m20").storage == "ui32"
    assert numbers.number("int8").mlir == "i8" and numbers.number("int4").storage == "i8"
    assert numbers.number("uint4").storage == "ui8"
    assert numbers.number("uint16").mlir == "ui16"
    ft = e5m6.float_type
    assert (ft.bits, ft.exp_bits, ft.man_bits, ft.bias, ft.special) == (12, 5, 6, 15, "ieee")
    assert ft.max == e5m6.max == 65024.0
    assert ft.dtype == np.uint16
    with pytest.raises(SpecError, match="integer spec"):
        numbers.number("int8").float_type


@pytest.mark.parametrize("code,values", [
    # code: (max, min, emax, emin, smallest_normal, smallest_subnormal, eps, nan_code)
    ("e5m6", (65024.0, -65024.0, 15, -14, 2.0 ** -14, 2.0 ** -20, 2.0 ** -6, 0x7E0)),
    ("e3m3", (15.0, -15.0, 3, -2, 0.25, 2.0 ** -5, 0.125, 0x3C)),
    ("e2m1fn", (4.0, -4.0, 2, 0, 1.0, 0.5, 0.5, 0x7)),
    ("e1m2fn", (3.0, -3.0, 1, 1, 2.0, 0.5, 0.25, 0x7)),
    ("e2m0fo", (4.0, -4.0, 2, 0, 1.0, 1.0, 1.0, None)),
    ("e5m2b15fnuz", (114688.0, -114688.0, 16, -14, 2.0 ** -14, 2.0 ** -16, 0.25, 0x80)),
    ("e5m0", (2.0 ** 15, 2.0 ** -15, 15, -15, 2.0 ** -15, 2.0 ** -15, 1.0, 0x1F)),
    ("int8", (127.0, -127.0, 6, 0, 1.0, 1.0, 1.0, None)),
    ("int2", (1.0, -1.0, 0, 0, 1.0, 1.0, 1.0, None)),
    ("uint4", (15.0, 0.0, 3, 0, 1.0, 1.0, 1.0, None)),
])
def test_derived_values(code, values):
    s = numbers.number(code)
    got = (s.max, s.min, s.emax, s.emin, s.smallest_normal, s.smallest_subnormal, s.eps,
           s.nan_code)
    assert got == values


def test_fixed_point_view_of_ints():
    i8 = numbers.number("int8")
    assert i8.scaled_max_exact == F(127, 64) and i8.scaled_emax == 0
    assert i8.scaled_midmax_exact == (F(127, 64) + 2) / 2
    i4 = numbers.number("int4")
    assert i4.scaled_max_exact == F(7, 4)
    e4 = numbers.number("e4m3fn")
    assert e4.scaled_max_exact == 448 and e4.scaled_emax == 8


def test_value_of_special_codes():
    e4m3fnuz = numbers.number("e4m3fnuz")
    assert math.isnan(e4m3fnuz.value_of(0x80)) and e4m3fnuz.value_of(0) == 0
    assert e4m3fnuz.value_of(0x7F) == 240 and e4m3fnuz.value_of(0xFF) == -240
    e5m6 = numbers.number("e5m6")
    assert e5m6.value_of(0x7C0) == math.inf and e5m6.value_of(0xFC0) == -math.inf
    assert math.isnan(e5m6.value_of(0x7C1))
    assert math.copysign(1.0, e5m6.value_of(0x800)) == -1.0  # -0
    assert numbers.number("int4").value_of(0xF) == -1
    assert math.isnan(numbers.number("e5m0").value_of(31))
    assert numbers.number("e5m0").value_of(0) == F(1, 2 ** 15)


# ----------------------------------------------------------------------------- scale specs

SCALES = {
    "e8m0": ("e8m0", None, "tensor", (), ()),
    "e8m0_t32": ("e8m0", None, "tile", (32,), (-1,)),
    "e8m0_t32d0": ("e8m0", None, "tile", (32,), (0,)),
    "e8m0_t16d-2": ("e8m0", None, "tile", (16,), (-2,)),
    "e8m0_t0": ("e8m0", None, "channel", (), (-1,)),
    "e8m0_t0d1": ("e8m0", None, "channel", (), (1,)),
    "e4m3fn_t16": ("e4m3fn", None, "tile", (16,), (-1,)),
    "float8_e4m3fn_t16": ("e4m3fn", None, "tile", (16,), (-1,)),
    "e8m0_t32x32": ("e8m0", None, "tile2d", (32, 32), (-2, -1)),
    "e8m0_t32x16d0d1": ("e8m0", None, "tile2d", (32, 16), (0, 1)),
    "e8m0_t2x1024d2d0": ("e8m0", None, "tile2d", (2, 1024), (2, 0)),
    "float32_uint8_t0": ("e8m23", "uint8", "channel", (), (-1,)),
    "float32_int16": ("e8m23", "int16", "tensor", (), ()),
    "bfloat16_bfloat16_t64": ("e8m7", "e8m7", "tile", (64,), (-1,)),
    "float16_float8_e4m3fn_t8d0": ("e5m10", "e4m3fn", "tile", (8,), (0,)),
    "e5m0_t4": ("e5m0", None, "tile", (4,), (-1,)),
}


@pytest.mark.parametrize("text", SCALES)
def test_scale_parse(text):
    s = numbers.scale(text)
    num, zp, kind, tile, dims = SCALES[text]
    assert (s.number.code, s.zero_point and s.zero_point.code, s.kind, s.tile, s.dims) == \
        (num, zp, kind, tile, dims)
    assert numbers.scale(s.code) == s


SCALE_BAD = {
    "e8m0_t3": "power of two from 2 to 1024", "e8m0_t1": "power of two",
    "e8m0_t2048": "power of two", "e8m0_t32x3": "power of two",
    "int8_t32": "a scale is an exponent type", "e2m1fo_t32": "needs a NaN code",
    "e8m0_uint8_t0": "goes with a float scale", "float32_e8m0": "not the exponent type",
    "e8m0_t32d0d1": "a 1D tile takes one dimension", "e8m0_t32x32d1": "two dimensions",
    "e8m0_t32x32d1d1": "must differ", "_t32": "names no scale number spec",
    "nope_t32": "unknown number spec", "float32_bogus_t0": "unknown number spec",
}


@pytest.mark.parametrize("text", SCALE_BAD)
def test_scale_errors(text):
    with pytest.raises(SpecError, match=SCALE_BAD[text]):
        numbers.scale(text)


def test_tiles_and_scale_shapes():
    s = numbers.scale("e8m0_t32")
    assert s.tile_shape((4, 64)) == (1, 32) and s.scales_shape((4, 64)) == (4, 2)
    assert numbers.scale("e8m0_t32d0").scales_shape((64, 3)) == (2, 3)
    assert numbers.scale("e8m0_t0").scales_shape((4, 64)) == (4, 1)
    assert numbers.scale("e8m0_t0d0").scales_shape((4, 64)) == (1, 64)
    assert numbers.scale("e8m0").scales_shape((4, 64)) == (1, 1)
    assert numbers.scale("e8m0").scales_shape(()) == ()
    two = numbers.scale("e8m0_t32x16")
    assert two.tile_shape((2, 64, 32)) == (1, 32, 16)
    assert two.scales_shape((2, 64, 32)) == (2, 2, 2)
    assert numbers.scale("e8m0_t16x32d2d0").scales_shape((64, 3, 32)) == (2, 3, 2)
    with pytest.raises(SpecError, match="tile size 32 does not divide dimension 1 of size 48"):
        s.tile_shape((4, 48))
    with pytest.raises(SpecError, match="out of range for rank 2"):
        numbers.scale("e8m0_t32d2").tile_shape((4, 64))
    with pytest.raises(SpecError, match="same dimension"):
        numbers.scale("e8m0_t2x2d0d-2").tile_shape((4, 4))


def test_two_level_scale_specs():
    """``_g<f32>`` after a tile or channel part: one f32 tensor scale over the tiles (nvfp4
    with its global scale); the canonical code spells the level with f32's number code."""
    for text, kind in [("e4m3fn_t16_gf32", "tile"), ("e8m0_t32_gfloat32", "tile"),
                       ("e8m0_t32x32d0d1_ge8m23", "tile2d"), ("e8m0_t0d0_gf32", "channel")]:
        s = numbers.scale(text)
        assert s.kind == kind and s.tensor == numbers.number("f32")
        assert s.code.endswith("_ge8m23") and numbers.scale(s.code) == s
        assert s.tile_level == numbers.scale(text[:text.rindex("_g")])
        t = s.tile_level
        assert t.tensor is None and t.tile_level is t
        assert s.scales_shape((64, 64)) == s.tile_level.scales_shape((64, 64))
    dt = numbers.datatype("e2m1fo", "e4m3fn_t16_gf32")
    assert dt.code == "e2m1fo:e4m3fn_t16_ge8m23"
    assert formats.get_datatype("e2m1fo:e4m3fn_t16_gf32") == dt
    nv = formats.block_datatype(formats.FORMATS["nvfp4"], global_scale=True)
    assert nv.number == dt.number and nv.scale.tensor == dt.scale.tensor
    with pytest.raises(ValueError, match="takes no global scale"):
        formats.block_datatype(formats.FORMATS["mxfp8_e4m3"], global_scale=True)
    for text, msg in [("e4m3fn_gf32", "goes over tile or channel scales"),
                      ("float32_uint8_t0_gf32", "does not go with a zero point"),
                      ("e4m3fn_t16_gbf16", "a tensor scale is f32"),
                      ("e4m3fn_t16_ge8m0", "a tensor scale is f32"),
                      ("e4m3fn_t16_gnope", "its tensor scale: unknown number spec"),
                      ("e4m3fn_t3_gf32", "power of two")]:
        with pytest.raises(SpecError, match=msg):
            numbers.scale(text)


# ----------------------------------------------------------------------------- datatypes


def test_datatype_rules():
    assert numbers.datatype("uint8", "float32_uint8_t0").code == "uint8:e8m23_uint8_t0"
    assert numbers.datatype("uint4", "bfloat16_float16").scale.zero_point.code == "e5m10"
    assert numbers.datatype("uint8").scale is None  # unscaled uint rounds to integers
    for n, s, msg in [("uint8", "e8m0_t32", "asymmetric"), ("uint8", "float32_t0", "asymmetric"),
                      ("int8", "float32_uint8_t0", "only uint data takes a zero point"),
                      ("e4m3fn", "float32_int8", "only uint data"),
                      ("uint8", "float32_int8_t0", "cannot hold every zero point 0..255"),
                      ("uint8", "float32_uint4_t0", "cannot hold"),
                      ("e8m0", "e8m0_t32", "exponent types cannot be scaled")]:
        with pytest.raises(SpecError, match=msg):
            numbers.datatype(n, s)
    assert numbers.datatype("uint4", "float32_int8_t0").number.code == "uint4"


def test_predefined_datatypes():
    D = formats.DATATYPES
    assert D["mxfp8_e4m3"].code == "e4m3fn:e8m0_t32"
    assert D["mxfp8_e5m2"].code == "e5m2:e8m0_t32"
    assert D["mxfp6_e3m2"].code == "e3m2fo:e8m0_t32"
    assert D["mxfp6_e2m3"].code == "e2m3fo:e8m0_t32"
    assert D["mxfp4_e2m1"].code == "e2m1fo:e8m0_t32"
    assert D["mxint8"].code == "int8:e8m0_t32"
    assert D["nvfp4"].code == "e2m1fo:e4m3fn_t16"
    assert D["mxint4"].code == "int4:e8m0_t32"
    assert D["bfp16"].code == "int8:e8m0_t8"
    for alias, target in [("mxfp8e5", "mxfp8_e5m2"), ("mxfp8e4", "mxfp8_e4m3"),
                          ("mxfp6e3", "mxfp6_e3m2"), ("mxfp6e2", "mxfp6_e2m3"),
                          ("mxfp4e2", "mxfp4_e2m1")]:
        assert D[alias].code == D[target].code and D[alias].name == alias
    for t in ("f8E4M3FN", "f8E5M2", "f8E8M0FNU"):
        assert D[t].scale is None and D[t].number.mlir == t
    for name, dt in D.items():
        assert dt.name == name and str(dt) == name
    assert formats.get_datatype("e5m6:e8m0_t32").code == "e5m6:e8m0_t32"
    assert formats.get_datatype("int8").scale is None
    with pytest.raises(SpecError, match="predefined datatypes: mxfp8_e4m3"):
        formats.get_datatype("mxfp9")
    # the format table and the datatypes agree on every format's parameters
    for f in formats.FORMATS.values():
        dt = D[f.name]
        assert dt.scale.tile == (f.block_size,)
        assert dt.scale.number.mlir == f.scale
        assert dt.number.storage == f.element
        if not f.is_nvfp4:
            view = dt.number.scaled_max_exact
            assert float(view) == f.max_elem and dt.number.scaled_emax == f.emax_elem
