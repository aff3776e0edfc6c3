"""mxlower-scaled-dot-to-kernel: mx.scaled_dot ops lowered to StableHLO that calls the fused
dot kernel (a typed-FFI custom call of mxlower_dot_...), run on XLA:CPU (the targets are
registered by mxlower.execution.xla.compile) and held to docs/semantics.md section 6 against
mxlower.reference; which ops the pass takes and which it leaves; its errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mxlower import reference as R
from mxlower.bindings import jaxlib as J
from mxlower.execution import ffi_dot
from mxlower.formats import FORMATS
from mxlower.lowering import dot_call, dot_kernels
from mxlower.lowering.dot_kernels import PLAIN_STREAM_M, STREAM_M
from mxlower.pipeline.manager import run_pipeline
from mxlower.testing import MxModule, assert_dot_close

pytest.importorskip("jax")

F32 = np.float32
LAST = (((1,), (1,)), ((), ()))


class KernelModule(MxModule):
    """An MxModule lowered with mxlower-scaled-dot-to-kernel before the usual pipeline."""

    def __init__(self, path: str = "", gemm: bool = False):
        super().__init__()
        self.options = " ".join(o for o in (f"path={path}" if path else "",
                                            "gemm=true" if gemm else "") if o)

    def pipeline(self) -> str:
        opts = "{" + self.options + "}" if self.options else ""
        return ("builtin.module(mxlower-verify-mx, mxlower-scaled-dot-to-kernel" + opts +
                ", mxlower-mx-to-stablehlo)")

    def lowered(self) -> str:
        with J.make_context(allow_unregistered=True):
            m = J.ir.Module.parse(self.text())
            run_pipeline(m, self.pipeline())
            return str(m)


def _mx(rng, shape, fmt, axis, k=None, spread=3):
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread + 1, shape)).astype(F32)
    return R.quantize(x, fmt, axis=axis, block_size=k, scale_mode="rceil")


def _add_side(m, rng, fmt, shape, axis, k, plain_dtype=F32):
    if fmt is None:
        v = rng.standard_normal(shape).astype(plain_dtype)
        return m.arg(v), None, v.astype(F32)
    e, s = _mx(rng, shape, fmt, axis, k)
    return m.arg(e), m.arg(s), R.dequantize(e, s, fmt, axis=axis, block_size=k, dtype="f32")


#: (lhs format or None, rhs format or None, lhs shape, rhs shape, dims, block size, plain dtype)
CASES = [
    # the GEMV of inference: plain activations, MX weights [N, K]
    (None, "mxfp4_e2m1", (1, 96), (40, 96), LAST, 32, F32),
    (None, "mxfp8_e4m3", (8, 64), (33, 64), LAST, 32, "bfloat16"),
    (None, "nvfp4", (3, 48), (17, 48), LAST, 16, np.float16),
    (None, "mxint8", (2, 128), (9, 128), LAST, 32, F32),
    # weights stored [K, N] (rhs contracted over dim 0): the K-major kernel reads them as
    # stored, for more rows than a GEMV's too (any number)
    (None, "mxfp8_e5m2", (2, 64), (64, 12), (((1,), (0,)), ((), ())), 32, F32),
    (None, "mxfp4_e2m1", (20, 64), (64, 40), (((1,), (0,)), ((), ())), 32, "bfloat16"),
    # MX rows against K-major MX weights: the rows dequantized to f32, the K-major kernel
    ("mxfp8_e4m3", "mxfp4_e2m1", (3, 64), (64, 40), (((1,), (0,)), ((), ())), 32, F32),
    # (mxint8 rows: to bf16, exact there whatever their scales)
    ("mxint8", "mxfp8_e4m3", (2, 64), (64, 24), (((1,), (0,)), ((), ())), 32, F32),
    # many MX rows: the MX pair's kernel on the copy its handler transposes (its integer
    # GEMM on the x86 paths), else the rows dequantized as above
    ("mxfp4_e2m1", "mxfp4_e2m1", (80, 64), (64, 40), (((1,), (0,)), ((), ())), 32, F32),
    # w @ x: the MX side has many rows, the plain one few (the kernel takes them swapped)
    ("mxfp4_e2m1", None, (40, 64), (2, 64), LAST, 32, F32),
    # more plain rows than a GEMV's against [N, K] weights stream too (DotSpec.stream_m),
    # in either order
    (None, "mxfp8_e4m3", (40, 64), (24, 64), LAST, 32, F32),
    # (more than F16_ROWS f16 rows: converted to f32, exactly, for the f32 rows' kernel)
    (None, "mxint8", (40, 64), (24, 64), LAST, 32, np.float16),
    ("mxint8", None, (48, 64), (20, 64), LAST, 32, "bfloat16"),
    # both sides MX, batch dimensions, K = 3 blocks (the exact block sums)
    ("mxfp4_e2m1", "mxint8", (2, 5, 96), (2, 7, 96), (((2,), (2,)), ((0,), (0,))), 32, F32),
    ("mxint8", "mxint8", (4, 32), (6, 32), LAST, 32, F32),
    # another block size
    (None, "mxfp4_e2m1", (2, 128), (8, 128), LAST, 64, F32),
]


@pytest.mark.parametrize("path", ffi_dot.kernel_paths())
def test_kernel_calls_within_contract(path):
    rng = np.random.default_rng(21)
    m = KernelModule(path)
    meta = []
    for lf, rf, lsh, rsh, dims, k, pd in CASES:
        (lc, rc), _ = dims
        av, asv, a = _add_side(m, rng, lf, lsh, lc[0], k, pd)
        bv, bsv, b = _add_side(m, rng, rf, rsh, rc[0], k, pd)
        m.ret(m.scaled_dot(av, asv, bv, bsv, lhs_format=lf, rhs_format=rf, dims=dims,
                           block_sizes=(k, k)))
        meta.append((a, b, dims))
    text = m.lowered()
    calls = re.findall(r"stablehlo\.custom_call @(mxlower_dot_\w+)", text)
    assert len(calls) == len(CASES), calls
    assert sum("_kn_" in c for c in calls) == 5, calls
    assert "mxlower_dot_f32_mxfp4_e2m1k32_kn_" + path in calls  # (the MX rows as f32)
    assert "mxlower_dot_bf16_mxfp8_e4m3k32_kn_" + path in calls  # (as bf16)
    many = ("mxfp4_e2m1k32" if path in dot_kernels.X86_PATHS else "bf16") + "_mxfp4_e2m1k32"
    assert f"mxlower_dot_{many}_kn_{path}" in calls, calls
    assert "mxlower_dot_f32_mxint8k32_" + path in calls, calls  # (the f16 rows as f32)
    assert all(c.endswith("_" + path) for c in calls)
    assert "mx." not in text.replace("mxlower", "")
    outs = m.run()
    for i, ((a, b, dims), out) in enumerate(zip(meta, outs)):
        assert_dot_close(out, a, b, dims, what=f"case {i} {CASES[i][:2]}")


def test_scales_at_the_ends_of_the_range_take_the_exact_branch():
    """Scale 2^-127 blocks (products far below f32's normal range) and 2^113 ones: the run-time
    test sends the dot to the exact f64 contraction, which still meets section 6."""
    rng = np.random.default_rng(4)
    m = KernelModule()
    e, s = _mx(rng, (24, 64), "mxfp8_e4m3", 1)
    s = s.copy()
    s.view(np.uint8)[:12] = 0      # 2^-127
    s.view(np.uint8)[12:, 0] = 240  # 2^113: the values reach 2^121
    x = rng.standard_normal((2, 64)).astype(F32) * F32(2.0 ** -100)
    m.ret(m.scaled_dot(m.arg(x), None, m.arg(e), m.arg(s), lhs_format=None,
                       rhs_format="mxfp8_e4m3", dims=LAST))
    assert "mxlower_dot_" in m.lowered()
    (out,) = m.run()
    w = R.dequantize(e, s, "mxfp8_e4m3", axis=1, dtype="f32")
    assert np.any(out != 0)
    assert_dot_close(out, x, w, LAST, what="range ends")


def test_headroom_of_the_unscaled_block_sums():
    """The kernel's run-time test leaves its one-row sums of unscaled weights room: x near
    2^118 against e5m2 weights scaled by 2^-40 takes the kernel's exact f64 contraction,
    within contract (the f32 path would overflow to NaN)."""
    from mxlower.lowering.dot_kernels import DotSpec

    assert DotSpec("f32", "mxfp8_e5m2").headroom == 21
    assert DotSpec("f32", "mxfp4_e2m1").headroom == 9
    assert DotSpec("mxfp8_e5m2", "f32").headroom == 0  # plain columns: no unscaled sums
    assert DotSpec("mxint8", "mxfp4_e2m1").headroom == 0  # exact sums
    rng = np.random.default_rng(6)
    m = KernelModule()
    e, s = R.quantize((rng.standard_normal((8, 64)) * 2.0 ** -40).astype(F32), "mxfp8_e5m2")
    x = (rng.standard_normal((1, 64)) * 2.0 ** 118).astype(F32)
    m.ret(m.scaled_dot(m.arg(x), None, m.arg(e), m.arg(s), lhs_format=None,
                       rhs_format="mxfp8_e5m2", dims=LAST))
    (out,) = m.run()
    w = R.dequantize(e, s, "mxfp8_e5m2", axis=1, dtype="f32")
    assert np.all(np.isfinite(out))
    assert_dot_close(out, x, w, LAST, what="headroom")


def test_what_the_pass_leaves_to_decompose():
    """A GEMM of the kernel's f32 path (an f8 side and two block sizes: no packed dot
    products on any path; unless gemm=true), a bf16 compute type, f6 elements (XLA:CPU has
    no f6 type) and a side contracted over another axis than its blocks are lowered without
    a call."""
    rng = np.random.default_rng(2)

    def build(gemm=False):
        m = KernelModule(gemm=gemm)
        av, asv, _ = _add_side(m, rng, "mxfp8_e4m3", (32, 64), 1, 32)
        bv, bsv, _ = _add_side(m, rng, "mxint8", (24, 64), 1, 64)
        m.ret(m.scaled_dot(av, asv, bv, bsv, lhs_format="mxfp8_e4m3", rhs_format="mxint8",
                           dims=LAST, block_sizes=(None, 64)))  # a GEMM (32 x 24 free
        # rows) of the f32 path
        xv, _, _ = _add_side(m, rng, None, (1, 64), 1, 32)
        m.ret(m.scaled_dot(xv, None, bv, bsv, lhs_format=None, rhs_format="mxint8", dims=LAST,
                           compute="bf16", block_sizes=(None, 64)))
        fv, fsv, _ = _add_side(m, rng, "mxfp6_e2m3", (8, 64), 1, 32)
        m.ret(m.scaled_dot(xv, None, fv, fsv, lhs_format=None, rhs_format="mxfp6_e2m3",
                           dims=LAST))
        return m

    text = build().lowered()
    assert "custom_call" not in text
    calls = re.findall(r"custom_call @(mxlower_dot_\w+)", build(gemm=True).lowered())
    assert len(calls) == 1 and calls[0].startswith("mxlower_dot_mxfp8_e4m3k32_mxint8k64_")


def test_gemm_through_the_kernel_within_contract():
    rng = np.random.default_rng(8)
    m = KernelModule(gemm=True)
    av, asv, a = _add_side(m, rng, "mxfp4_e2m1", (20, 64), 1, 32)
    bv, bsv, b = _add_side(m, rng, "mxfp8_e4m3", (18, 64), 1, 32)
    m.ret(m.scaled_dot(av, asv, bv, bsv, lhs_format="mxfp4_e2m1", rhs_format="mxfp8_e4m3",
                       dims=LAST))
    (out,) = m.run()
    assert_dot_close(out, a, b, LAST, what="gemm")


def test_bad_ops_are_located_errors(tmp_path):
    from mxlower.diagnostics import PassFailure

    bad = tmp_path / "bad.mlir"
    bad.write_text(
        'func.func @main(%x: tensor<1x64xf32>, %w: tensor<8x64xf4E2M1FN>, '
        '%s: tensor<8x3xf8E8M0FNU>) -> tensor<1x8xf32> {\n'
        '  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp4_e2m1", '
        'dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], '
        'rhs_contracting_dimensions = [1]>} : (tensor<1x64xf32>, tensor<8x64xf4E2M1FN>, '
        'tensor<8x3xf8E8M0FNU>) -> tensor<1x8xf32>\n'
        '  return %0 : tensor<1x8xf32>\n}\n')
    with J.make_context(allow_unregistered=True):
        m = J.ir.Module.parse(bad.read_text())
        with pytest.raises(PassFailure, match="scales"):
            run_pipeline(m, "builtin.module(mxlower-scaled-dot-to-kernel)")


def test_the_target_names_round_trip():
    from mxlower.lowering.dot_kernels import DotSpec

    for fmt in FORMATS:
        for spec in (DotSpec("f32", fmt), DotSpec(fmt, "bf16", 64, None, "avx2")):
            assert DotSpec.from_name(spec.name) == spec
    with pytest.raises(ValueError, match="not the name"):
        DotSpec.from_name("mxlower_dot_f32_f32_avx2")


def test_a_kernel_spec_keyed_by_datatype_is_the_format_spec():
    """DotSpec takes a side as an MX format's datatype (a Datatype, its code, a predefined
    name) and is then the spec its format names: equal fields, hash, name (the FFI target),
    declaration and kernel text; the fields are canonical (a block size None where it is the
    format's), so the specs of one kernel are equal whichever spelling made them."""
    from mxlower.formats import block_datatype
    from mxlower.lowering import dot_kernels
    from mxlower.lowering.dot_kernels import DotSpec

    for n, fmt in enumerate(FORMATS.values()):
        for k in (None, 16 if fmt.block_size == 32 else 32, 64):
            dt = block_datatype(fmt, k)
            named = DotSpec("f32", fmt.name, None, k, "avx2")
            assert named == DotSpec("f32", fmt.name, None, k or fmt.block_size, "avx2")
            for side in (dt, dt.code, block_datatype(fmt, k, 1).code.replace("d1", "d-1")):
                spec = DotSpec("f32", side, path="avx2")
                assert (spec, hash(spec), spec.name) == (named, hash(named), named.name)
                assert (spec.rhs, spec.rhs_block_size) == (fmt.name, k if k != fmt.block_size
                                                            else None)
                assert dot_kernels.declarations(spec) == dot_kernels.declarations(named)
                assert DotSpec.from_name(spec.name) == spec
            if n < 2:  # the whole kernel, for two formats
                assert dot_kernels.build(DotSpec(dt, "bf16", path="portable")) == \
                    dot_kernels.build(DotSpec(fmt.name, "bf16", k, path="portable"))
    assert DotSpec("bfp16", "mxfp8e4") == DotSpec("mxint8", "mxfp8_e4m3", 8)
    assert DotSpec("mxint8", "e2m1fo:e4m3fn_t16_gf32").rhs == "nvfp4"  # g: the caller's
    assert DotSpec("float32", "e2m1fo:e8m0_t32").name == "mxlower_dot_f32_mxfp4_e2m1k32_portable"
    for lhs, k, message in [
            ("e4m3fn:e8m0_t32d0", None, "blocks dimension 0; the kernel's sides are"),
            ("e5m6:e8m0_t32", None, "not an MX format's: no MX format has e5m6 elements"),
            ("f8E4M3FN", None, "not an MX format's: it is unscaled"),
            ("e4m3fn:e8m0_t32", 16, "has blocks of 32, but lhs_block_size is 16"),
            ("mxfp9", None, "neither an MX format"),
    ]:
        with pytest.raises(ValueError, match=message):
            DotSpec(lhs, "f32", k)


def test_plan_streams_the_side_with_few_rows():
    """dot_call.plan: the kernel's A side is the lhs unless only the rhs's rows stream
    (DotSpec.stream_m: STREAM_M MX rows, PLAIN_STREAM_M plain ones against MX weights); more
    rows on both sides are a GEMM, which plain rows take only when asked."""
    def side(fmt, rows):
        return (dot_call.Side(fmt, "f8E4M3FN", 32, 1, (rows, 64)) if fmt else
                dot_call.Side(None, "f32", None, None, (rows, 64)))

    def plan(lhs, rhs, **kw):
        p = dot_call.plan(lhs, rhs, *LAST, "avx2", **kw)
        return p and (p[0].lhs, p[1])

    w, x = "mxfp8_e4m3", None
    most = PLAIN_STREAM_M["avx2"]
    assert plan(side(x, most), side(w, 4096)) == ("f32", False)
    assert plan(side(w, 4096), side(x, most)) == ("f32", True)
    assert plan(side(w, STREAM_M + 1), side(x, 10)) == ("f32", True)
    assert plan(side(x, most), side(w, 10)) == ("f32", False)
    assert plan(side(w, 10), side(x, 100)) == (w, False)
    assert plan(side(x, STREAM_M + 1), side(w, STREAM_M)) == ("f32", False)
    assert plan(side(w, STREAM_M), side(w, 4096)) == (w, False)
    assert plan(side(w, 4096), side(w, STREAM_M)) == (w, True)
    for lhs, rhs in ((side(x, most + 1), side(w, most + 1)),
                     (side(w, most + 1), side(x, most + 1))):
        assert plan(lhs, rhs) is None
        assert plan(lhs, rhs, gemm=True) is not None


def test_plan_takes_a_side_as_a_datatype():
    """dot_call.plan: a side given by its datatype (the blocked dimension in the dot's layout)
    plans the kernel its format does; the parsed op's side (either spelling) by its datatype."""
    from mxlower.formats import block_datatype

    dims = (((0,), (1,)), ((), ()))
    w = dot_call.Side("mxfp8_e4m3", "f8E4M3FN", 32, 0, (64, 40))
    x = dot_call.Side(None, "bf16", None, None, (2, 64))
    want = dot_call.plan(w, x, *dims, "avx2")
    assert want is not None and want[1]  # swapped: the MX side has the rows
    for fmt in ("e4m3fn:e8m0_t32d0", block_datatype(FORMATS["mxfp8_e4m3"], 32, 0)):
        for k, axis in ((None, None), (32, 0)):
            got = dot_call.plan(dot_call.Side(fmt, "f8E4M3FN", k, axis, (64, 40)), x, *dims,
                                "avx2")
            assert got == want
    # blocks along a free dimension: no kernel, as for the format with that axis
    free = dot_call.Side("e4m3fn:e8m0_t8", "f8E4M3FN", None, None, (64, 40))
    assert dot_call.plan(free, x, *dims, "avx2") is None
    with pytest.raises(ValueError, match="has axis 1, the side 0"):
        dot_call.plan(dot_call.Side("e4m3fn:e8m0_t8", "f8E4M3FN", None, 0, (64, 40)), x,
                      *dims, "avx2")
    with pytest.raises(ValueError, match="not an MX format's"):
        dot_call.plan(dot_call.Side("e5m6:e8m0_t32", "ui16", None, None, (64, 40)), x, *dims,
                      "avx2")
