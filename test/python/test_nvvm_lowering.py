"""mxlower-lower-narrow-floats-to-nvvm on real IR, and its numerics on the CPU.

* Which nvvm ops each chip gets, pair counts, the fallback, errors.
* End to end on the CPU: the pass's output, with every ``nvvm.convert.*`` op replaced by an
  arith emulation of the PTX instruction (written here from the ISA text, independently of the
  pass: clamp in float, codec rounding, the documented lane layout), is JIT-compiled by
  :mod:`mxlower.execution.llvm` and run on > 200k probes per conversion, for scalars and for vectors
  of odd and even lengths and rank 2.  This checks the IR the pass builds -- pairing, lane
  order, splitting and joining, the fix-ups -- not just the NumPy recipe.
"""

from __future__ import annotations

import functools
import re

import ml_dtypes
import numpy as np
import pytest

from mxlower import diagnostics as diag
from mxlower import reference as R
from mxlower.bindings import upstream
from mxlower.execution import llvm
from mxlower.formats import FLOAT_TYPES
from mxlower.lowering import codec
from mxlower.lowering import int_builders
from mxlower.types import probe_values
from mxlower.lowering import nvvm as L
from mxlower.lowering import nvvm_model as M
from mxlower.passes.lower_narrow_floats_to_nvvm import LowerNarrowFloatsToNVVM
from mxlower.tools.translate import _target_chip

pytest.importorskip("mlir.execution_engine")
ir = upstream.module("ir")
arith = upstream.module("dialects.arith")
vector = upstream.module("dialects.vector")


def lower(text: str, **opts) -> str:
    with upstream.context():
        m = ir.Module.parse(text)
        LowerNarrowFloatsToNVVM(**opts).run(m.operation)
        m.operation.verify()
        return str(m)


def _fn(src: str, dst: str, shape: str = "4", rounding: str = "", attrs: str = "") -> str:
    op = "arith.extf" if src in FLOAT_TYPES else "arith.truncf"
    t_in = f"vector<{shape}x{src}>" if shape else src
    t_out = f"vector<{shape}x{dst}>" if shape else dst
    r = f" {rounding}" if rounding else ""
    return (f"func.func @f(%x: {t_in}) -> {t_out} {{\n"
            f"  %y = {op} %x{r}{attrs} : {t_in} to {t_out}\n"
            f"  return %y : {t_out}\n}}\n")


# ----------------------------------------------------------------------------- structure


@pytest.mark.parametrize("chip,dst,op,count", [
    ("sm_89", "f8E4M3FN", "nvvm.convert.f32x2.to.f8x2", 3),
    ("sm_90a", "f8E5M2", "nvvm.convert.f32x2.to.f8x2", 3),
    ("sm_90a", "f4E2M1FN", "nvvm.convert", 0),
    ("sm_100a", "f4E2M1FN", "nvvm.convert.f32x2.to.f4x2", 3),
    ("sm_120a", "f6E2M3FN", "nvvm.convert.f32x2.to.f6x2", 3),
    ("sm_100", "f6E3M2FN", "nvvm.convert", 0),
    ("sm_100a", "f8E8M0FNU", "nvvm.convert", 0),
    ("sm_80", "f8E4M3FN", "nvvm.convert", 0),
])
def test_ops_per_chip(chip, dst, op, count):
    out = lower(_fn("f32", dst, "5"), chip=chip)
    assert out.count(op) == count
    assert "arith.truncf" not in out


def test_f16_pairs_use_shuffles_and_the_tail_pairs_with_itself():
    out = lower(_fn("f16", "f8E4M3FN", "3"), chip="sm_89")
    assert "vector.shuffle %arg0, %arg0 [0, 1]" in out
    assert out.count("nvvm.convert.f16x2.to.f8x2") == 2
    assert re.search(r"vector\.from_elements (%\w+), \1 : vector<2xf16>", out)


def test_first_element_is_operand_b():
    out = lower(_fn("f32", "f8E4M3FN", "2"), chip="sm_90a")
    # nvvm.convert.f32x2.to.f8x2 %a, %b puts a in the high byte: a = element 1
    line = next(ln for ln in out.splitlines() if "nvvm.convert" in ln)
    ext = {ln.split("=")[0].strip(): ln for ln in out.splitlines() if "vector.extract" in ln}
    a, b = [x.strip() for x in line.split("nvvm.convert.f32x2.to.f8x2")[1].split("{")[0]
            .split(",")]
    assert "[1]" in ext[a] and "[0]" in ext[b]


def test_chip_from_the_gpu_module_target():
    text = ('gpu.module @k [#nvvm.target<chip = "sm_100a">] {\n  gpu.func @f(%x: f32) {\n'
            '    %y = arith.truncf %x : f32 to f4E2M1FN\n    gpu.return\n  }\n}\n')
    assert "nvvm.convert.f32x2.to.f4x2" in lower(text)
    assert "nvvm.convert" not in lower(text, chip="sm_90a")  # the option wins


@pytest.mark.parametrize("text,msg", [
    (_fn("f32", "f4E2M1FN"), "no target chip"),
    (_fn("f32", "f4E2M1FN").replace("vector<4x", "tensor<4x"), "handles scalars and fixed"),
])
def test_errors(text, msg):
    eng = diag.DiagnosticEngine()
    with eng.activate(), pytest.raises(diag.PassFailure):
        lower(text)
    assert msg in eng.diagnostics[0].message


def test_narrow_storage_keeps_cvt_type_attributes():
    text = ("func.func @f(%x: vector<2xf32>, %m: memref<8xf4E2M1FN>, %i: index) {\n"
            "  %y = arith.truncf %x : vector<2xf32> to vector<2xf4E2M1FN>\n"
            "  vector.store %y, %m[%i] : memref<8xf4E2M1FN>, vector<2xf4E2M1FN>\n"
            "  return\n}\n")
    out = lower(text, chip="sm_100a", narrow_storage=True)
    assert "memref<8xi8>" in out and ": i8(f4E2M1FN)" in out and "f4E2M1FN>" not in out


# ----------------------------------------------------------------------------- CPU emulation


def _c(b, v, bits):
    return b.constant(v, bits)


def _emulate_trunc_lane(x: object, wide: str, dst: str, rnd: str) -> object:
    """One lane of a narrowing cvt as the ISA defines it, in arith (scalar ``x``)."""
    b = int_builders.ArithBuilder(ir, arith, x.type)
    if wide != "f32":
        x = arith.ExtFOp(ir.F32Type.get(), x).result
    if dst == "f8E8M0FNU":
        return L._ue8m0_directed(b, b.bitcast_to_int(x), rnd)
    t = FLOAT_TYPES[dst]
    f32 = ir.F32Type.get()
    hi = arith.ConstantOp(f32, ir.FloatAttr.get(f32, t.max)).result
    lo = arith.ConstantOp(f32, ir.FloatAttr.get(f32, -t.max)).result
    clamped = arith.MinimumFOp(arith.MaximumFOp(x, lo).result, hi).result  # NaN stays NaN
    code = codec.emit_truncf(b, clamped, "f32", dst, code_bits=8)
    nan = arith.CmpFOp(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 14), x, x).result
    # the ISA's NaN result: canonical NaN for f8, unspecified for f4/f6 (here +max)
    return b.select(nan, _c(b, 0x7F if t.has_nan else t.magnitude_mask, 8), code)


def _emulate_ext_lane(code: object, src: str) -> object:
    b = int_builders.ArithBuilder(ir, arith, code.type)
    wide = "bf16" if src == "f8E8M0FNU" else "f16"
    return codec.emit_extf(b, code, src, wide)


def _lanes(v, n=2):
    return [vector.ExtractOp(v, [], [i]).result for i in range(n)]


def emulate_nvvm(module) -> int:
    """Replace every nvvm.convert op in ``module`` by its arith emulation; returns the count."""
    ops = []
    module.operation.walk(lambda o: (ops.append(o.operation) if o.operation.name.startswith(
        "nvvm.convert") else None, ir.WalkResult.ADVANCE)[1])
    i8 = ir.IntegerType.get_signless(8)
    for o in ops:
        name = o.name
        attrs = o.attributes
        with ir.InsertionPoint(o), o.location:
            if ".to.f16x2" in name or ".to.bf16x2" in name:
                src = str(ir.TypeAttr(attrs["srcType"]).value)
                if src == "f4E2M1FN":  # .b8: lane 0 in bits 3..0
                    b = int_builders.ArithBuilder(ir, arith, i8)
                    reg = o.operands[0]
                    lanes = [b.and_(reg, 0xF), b.shr(reg, 4)]
                else:
                    lanes = _lanes(o.operands[0])
                outs = [_emulate_ext_lane(c, src) for c in lanes]
                new = vector.FromElementsOp(o.results[0].type, outs).result
            else:
                dst = str(ir.TypeAttr(attrs["dstTy"]).value)
                rnd = "rn"
                if "rnd" in attrs:
                    rnd = str(attrs["rnd"]).split("<")[1].rstrip(">")
                if name in ("nvvm.convert.f16x2.to.f8x2", "nvvm.convert.bf16x2.to.f8x2"):
                    lo, hi = _lanes(o.operands[0])  # register lane 0 = b (low half)
                    wide = "f16" if "f16x2" in name and "bf16" not in name else "bf16"
                else:
                    hi, lo = o.operands[0], o.operands[1]  # cvt d, a, b: a -> high half
                    wide = "f32"
                cl = _emulate_trunc_lane(lo, wide, dst, rnd)
                ch = _emulate_trunc_lane(hi, wide, dst, rnd)
                if dst == "f4E2M1FN":  # .b8: a in bits 7..4
                    b = int_builders.ArithBuilder(ir, arith, i8)
                    new = b.or_(b.shl(ch, 4), cl)
                else:
                    new = vector.FromElementsOp(ir.VectorType.get([2], i8), [cl, ch]).result
        o.results[0].replace_all_uses_with(new)
        o.erase()
    return len(ops)


def _kernel(name: str, src: str, dst: str, width: int | None, rounding: str = "",
            attrs: str = "", rows: int = 0) -> str:
    """``@name(%x: memref<?xsrc>) -> memref<?xdst>`` converting in chunks of ``width``."""
    op = "arith.extf" if src in FLOAT_TYPES else "arith.truncf"
    r = f" {rounding}" if rounding else ""
    head = (f"func.func @{name}(%x: memref<?x{src}>) -> memref<?x{dst}> {{\n"
            "  %c0 = arith.constant 0 : index\n"
            f"  %n = memref.dim %x, %c0 : memref<?x{src}>\n"
            f"  %y = memref.alloc(%n) : memref<?x{dst}>\n")
    body = f"  %st = arith.constant {(width or 1) * max(rows, 1)} : index\n"
    body += "  scf.for %i = %c0 to %n step %st {\n"
    if width is None:
        body += (f"    %v = memref.load %x[%i] : memref<?x{src}>\n"
                 f"    %c = {op} %v{r}{attrs} : {src} to {dst}\n"
                 f"    memref.store %c, %y[%i] : memref<?x{dst}>\n")
    elif rows:  # a rank-2 vector built from `rows` consecutive chunks
        vt_in, vt_out = f"vector<{rows}x{width}x{src}>", f"vector<{rows}x{width}x{dst}>"
        vrow_in, vrow_out = f"vector<{width}x{src}>", f"vector<{width}x{dst}>"
        body += f"    %z = arith.constant dense<0.0> : {vt_in}\n"
        cur = "%z"
        for k in range(rows):
            body += (f"    %o{k} = arith.constant {k * width} : index\n"
                     f"    %j{k} = arith.addi %i, %o{k} : index\n"
                     f"    %r{k} = vector.load %x[%j{k}] : memref<?x{src}>, {vrow_in}\n"
                     f"    %a{k} = vector.insert %r{k}, {cur} [{k}] : {vrow_in} into {vt_in}\n")
            cur = f"%a{k}"
        body += f"    %c = {op} {cur}{r}{attrs} : {vt_in} to {vt_out}\n"
        for k in range(rows):
            body += (f"    %w{k} = vector.extract %c[{k}] : {vrow_out} from {vt_out}\n"
                     f"    vector.store %w{k}, %y[%j{k}] : memref<?x{dst}>, {vrow_out}\n")
    else:
        vt_in, vt_out = f"vector<{width}x{src}>", f"vector<{width}x{dst}>"
        body += (f"    %v = vector.load %x[%i] : memref<?x{src}>, {vt_in}\n"
                 f"    %c = {op} %v{r}{attrs} : {vt_in} to {vt_out}\n"
                 f"    vector.store %c, %y[%i] : memref<?x{dst}>, {vt_out}\n")
    return head + body + "  }\n" + f"  return %y : memref<?x{dst}>\n}}\n"


#: (src, dst, vector width or None for scalars, rows of a rank-2 vector or 0)
TRUNC_CASES = [
    (src, dst, w, rows)
    for src, dst in [("f32", "f8E4M3FN"), ("f32", "f8E5M2"), ("f32", "f4E2M1FN"),
                     ("f32", "f6E2M3FN"), ("f32", "f6E3M2FN"), ("f16", "f8E4M3FN"),
                     ("f16", "f8E5M2"), ("bf16", "f8E4M3FN"), ("f16", "f4E2M1FN")]
    for w, rows in [(None, 0), (3, 0), (8, 0), (2, 3)]
]
EXT_CASES = [
    (src, dst, w, rows)
    for src, dst in [("f8E4M3FN", "f32"), ("f8E5M2", "f16"), ("f8E4M3FN", "bf16"),
                     ("f4E2M1FN", "f32"), ("f6E2M3FN", "f16"), ("f6E3M2FN", "f32"),
                     ("f8E8M0FNU", "f32"), ("f8E8M0FNU", "f16"), ("f8E8M0FNU", "bf16")]
    for w, rows in [(None, 0), (5, 0), (2, 0), (3, 2)]
]
DIRECTED = [("f32", "upward", 4), ("f32", "toward_zero", 3), ("bf16", "upward", 2),
            ("bf16", "toward_zero", None)]


def _name(kind, src, dst, w, rows, extra=""):
    return f"{kind}_{src}_{dst}_{w or 's'}_{rows}{extra}"


@functools.cache
def _compiled(chip: str):
    fns = [_kernel(_name("t", *c), c[0], c[1], c[2], rows=c[3]) for c in TRUNC_CASES]
    fns += [_kernel(_name("e", *c), c[0], c[1], c[2], rows=c[3]) for c in EXT_CASES]
    fns += [_kernel(f"d_{s}_{r}_{w or 's'}", s, "f8E8M0FNU", w, rounding=r,
                    attrs=" {mxlower.satfinite}") for s, r, w in DIRECTED]
    text = "\n".join(fns)
    with upstream.context():
        m = ir.Module.parse(text)
        LowerNarrowFloatsToNVVM(chip=chip).run(m.operation)
        n = emulate_nvvm(m)
        m.operation.verify()
        lowered = str(m)
    return llvm.compile(lowered, opt_level=0), n


def _pad(x: np.ndarray, m: int) -> np.ndarray:
    k = (-len(x)) % m
    return np.concatenate([x, x[:k]]) if k else x


@functools.cache
def _probes(name: str) -> np.ndarray:
    return probe_values(name)


def test_cpu_emulation_truncf():
    h, n = _compiled("sm_100a")  # every cvt kind; other chips differ only by using the codec
    assert n > 0
    for src, dst, w, rows in TRUNC_CASES:
        x = _pad(_probes(src), 24)
        (y,) = h.run(_name("t", src, dst, w, rows), x)
        want = R.bits(R.convert(x, dst))
        got = y.view(np.uint8)
        bad = np.flatnonzero(got != want)
        assert not bad.size, (src, dst, w, rows, [(float(x[i]), hex(got[i]), hex(want[i]))
                                                   for i in bad[:4]])


def test_cpu_emulation_extf():
    h, _ = _compiled("sm_100a")
    for src, dst, w, rows in EXT_CASES:
        t = FLOAT_TYPES[src]
        x = _pad(np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype), 30)
        (y,) = h.run(_name("e", src, dst, w, rows), x)
        want = R.convert(x, dst)
        wn = np.isnan(want.astype(np.float64))
        same = np.where(wn, np.isnan(y.astype(np.float64)), R.bits(y) == R.bits(want))
        assert same.all(), (src, dst, w, rows)


def test_cpu_emulation_directed_e8m0():
    h, _ = _compiled("sm_100a")
    for s, r, w in DIRECTED:
        x = _probes("f32")
        with np.errstate(over="ignore", invalid="ignore"):  # f32 probes beyond bf16 range
            x = x[~np.signbit(x)].astype({"f32": np.float32, "bf16": ml_dtypes.bfloat16}[s])
        x = _pad(x, 12)
        (y,) = h.run(f"d_{s}_{r}_{w or 's'}", x)
        want = M.cvt_ue8m0(x, "rp" if r == "upward" else "rz")
        assert np.array_equal(y.view(np.uint8), want), (s, r, w)


def test_several_target_chips_need_the_option():
    text = ('gpu.module @k [#nvvm.target<chip = "sm_90a">, #nvvm.target<chip = "sm_100a">] {\n'
            '  gpu.func @f(%x: f32) {\n    %y = arith.truncf %x : f32 to f4E2M1FN\n'
            '    gpu.return\n  }\n}\n')
    eng = diag.DiagnosticEngine()
    with eng.activate(), pytest.raises(diag.PassFailure):
        lower(text)
    assert "targets several chips (sm_100a, sm_90a)" in eng.diagnostics[0].message
    assert "nvvm.convert.f32x2.to.f4x2" in lower(text, chip="sm_120a")


def test_translate_takes_the_chip_of_the_chosen_gpu_module():
    text = ('// #nvvm.target<chip = "sm_50">\ngpu.module @a [#nvvm.target<chip = "sm_89">] {\n}\n'
            'gpu.module @b [#nvvm.target<chip = "sm_120a">] {\n}\n')
    assert _target_chip(text) == "sm_89"
    assert _target_chip(text, "b") == "sm_120a"
    assert _target_chip(text, "c") is None
