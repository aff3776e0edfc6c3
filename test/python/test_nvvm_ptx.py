"""Every conversion kernel the NVVM lowering generates, compiled to PTX for every chip CUDA 13's
ptxas knows (sm_89 ... sm_121a) and assembled by ptxas; the PTX holds exactly the cvt
instructions the chip has.  Without ptxas the assembly step is skipped (the PTX is still
generated and checked); without llc the whole module is skipped.
"""

from __future__ import annotations

import functools

import pytest

from mxlower.bindings import upstream
from mxlower.execution import ptx
from mxlower.formats import FLOAT_TYPES
from mxlower.lowering import nvvm_model

if upstream.tool("llc") is None or upstream.tool("mlir-translate") is None:
    pytest.skip("xtc's llc / mlir-translate are not installed", allow_module_level=True)

NARROW = list(FLOAT_TYPES)


def _kernel(name: str, src: str, dst: str, width: int | None, extra: str = "") -> str:
    """A kernel converting ``width`` elements per thread (None: one scalar)."""
    op = "arith.extf" if src in FLOAT_TYPES else "arith.truncf"
    if width is None:
        load = f"%v = memref.load %x[%t] : memref<64x{src}>"
        conv = f"%c = {op} %v{extra} : {src} to {dst}"
        store = f"memref.store %c, %y[%t] : memref<64x{dst}>"
    else:
        vi, vo = f"vector<{width}x{src}>", f"vector<{width}x{dst}>"
        load = f"%v = vector.load %x[%t] : memref<64x{src}>, {vi}"
        conv = f"%c = {op} %v{extra} : {vi} to {vo}"
        store = f"vector.store %c, %y[%t] : memref<64x{dst}>, {vo}"
    return (f"  gpu.func @{name}(%x: memref<64x{src}>, %y: memref<64x{dst}>) kernel {{\n"
            f"    %t = gpu.thread_id x\n    {load}\n    {conv}\n    {store}\n"
            f"    gpu.return\n  }}\n")


def _kernels() -> tuple[str, list[str]]:
    fns, names = [], []
    for dst in NARROW:
        for src in ("f32", "f16", "bf16"):
            for w in (None, 5):
                names.append(f"t_{src}_{dst}_{w or 's'}")
                fns.append(_kernel(names[-1], src, dst, w))
        for wide in ("f32", "f16", "bf16"):
            names.append(f"e_{dst}_{wide}")
            fns.append(_kernel(names[-1], dst, wide, 3))
    for dst in ("f8E4M3FN", "f8E5M2", "f4E2M1FN", "f6E2M3FN", "f6E3M2FN"):
        names.append(f"sat_{dst}")
        fns.append(_kernel(names[-1], "f32", dst, 4, " {mxlower.satfinite}"))
    for src in ("f32", "bf16"):
        for rnd in ("upward", "toward_zero"):
            names.append(f"scale_{src}_{rnd}")
            fns.append(_kernel(names[-1], src, "f8E8M0FNU", 2, f" {rnd} {{mxlower.satfinite}}"))
    # truncf rounding modes (the codec: no cvt rounds toward zero or ties away)
    for dst in ("f8E4M3FN", "f4E2M1FN", "f8E4M3FNUZ", "f8E8M0FNU"):
        for rnd in ("toward_zero", "to_nearest_away"):
            names.append(f"rnd_{dst}_{rnd}")
            fns.append(_kernel(names[-1], "f16", dst, 2, f" {rnd}"))
    return "gpu.module @all {\n" + "".join(fns) + "}\n", names


@functools.cache
def _ptx(chip: str) -> str:
    from mxlower.bindings import jaxlib as J
    from mxlower.diagnostics import DiagnosticEngine
    from mxlower.pipeline.manager import PassPipeline

    text, _ = _kernels()
    ctx = J.make_context()
    with ctx:
        module = J.ir.Module.parse(text)
    eng = DiagnosticEngine()
    out = PassPipeline.parse(f"builtin.module(mxlower-gpu-to-nvvm{{chip={chip}}})", ctx).run(
        module.operation, eng)
    assert out is not None, [d.format() for d in eng.diagnostics]
    llvm_ir = ptx.translate_to_llvmir(ptx.device_module(out.get_asm()))
    return ptx.compile_ptx(llvm_ir, chip)


#: the cvt instructions each feature brings (mnemonic prefixes)
F8_CVTS = ("cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.satfinite.e5m2x2.f32",
           "cvt.rn.satfinite.e4m3x2.f16x2", "cvt.rn.satfinite.e5m2x2.f16x2",
           "cvt.rn.f16x2.e4m3x2", "cvt.rn.f16x2.e5m2x2")
NARROW_CVTS = ("cvt.rn.satfinite.e2m1x2.f32", "cvt.rn.satfinite.e2m3x2.f32",
               "cvt.rn.satfinite.e3m2x2.f32", "cvt.rn.f16x2.e2m1x2", "cvt.rn.f16x2.e2m3x2",
               "cvt.rn.f16x2.e3m2x2", "cvt.rn.bf16x2.ue8m0x2", "cvt.rp.satfinite.ue8m0x2.f32",
               "cvt.rz.satfinite.ue8m0x2.f32", "cvt.rp.satfinite.ue8m0x2.bf16x2",
               "cvt.rz.satfinite.ue8m0x2.bf16x2")


@pytest.mark.parametrize("chip", nvvm_model.PTX_CHIPS)
def test_ptx_has_the_chips_cvts_and_assembles(chip):
    asm = _ptx(chip)
    _, names = _kernels()
    for n in names:
        assert f".entry {n}(" in asm
    for ins in F8_CVTS:
        assert (ins in asm) == nvvm_model.has_f8_cvt(chip), ins
    for ins in NARROW_CVTS:
        assert (ins in asm) == nvvm_model.has_narrow_cvt(chip), ins
    if ptx.ptxas_path() is None:
        pytest.skip("ptxas not installed: PTX generated but not assembled")
    cubin = ptx.assemble(asm, chip)
    assert cubin[:4] == b"\x7fELF"


def test_llc_error_is_one_line():
    ir = ptx.translate_to_llvmir(
        'module {\n  llvm.func @k(%a: f32, %o: !llvm.ptr) attributes {nvvm.kernel} {\n'
        '    %0 = nvvm.convert.f32x2.to.f4x2 %a, %a : i8 (f4E2M1FN)\n'
        '    llvm.store %0, %o : i8, !llvm.ptr\n    llvm.return\n  }\n}\n')
    with pytest.raises(ptx.ToolError) as e:
        ptx.compile_ptx(ir, "sm_90a")
    assert str(e.value) == ("llc: LLVM ERROR: Cannot select: intrinsic "
                            "%llvm.nvvm.ff.to.e2m1x2.rn.satfinite")
    assert "PLEASE submit a bug report" in e.value.stderr


def test_ptxas_error_is_reported():
    if ptx.ptxas_path() is None:
        pytest.skip("ptxas not installed")
    with pytest.raises(ptx.ToolError, match="ptxas: .*error"):
        ptx.assemble(".version 8.6\n.target sm_100a\n.address_size 64\nbogus;\n", "sm_100a")


def test_device_module_selection():
    two = ('module {\n  gpu.module @a {\n  }\n  gpu.module @b {\n  }\n}\n')
    with pytest.raises(ValueError, match="has 2 gpu.modules"):
        ptx.device_module(two)
    assert "llvm.target_triple" in ptx.device_module(two, "b")
    with pytest.raises(ValueError, match="not in the LLVM dialect yet"):
        ptx.device_module("module {\n  func.func @f() {\n    return\n  }\n}\n")


# ----------------------------------------------------------------------------- stochastic rounding

_RS_OPS = {"f8E4M3FN": ("f8x4", "vector<4xi8>", "e4m3x4"),
           "f8E5M2": ("f8x4", "vector<4xi8>", "e5m2x4"),
           "f6E2M3FN": ("f6x4", "vector<4xi8>", "e2m3x4"),
           "f6E3M2FN": ("f6x4", "vector<4xi8>", "e3m2x4"),
           "f4E2M1FN": ("f4x4", "i16", "e2m1x4")}


def _rs_kernel() -> str:
    """One kernel with every cvt.rs the model describes (upstream's nvvm.convert.f32x4 ops)."""
    body = []
    for i, (t, (op, rt, _)) in enumerate(_RS_OPS.items()):
        body.append(f"    %c{i} = nvvm.convert.f32x4.to.{op} %v, %r : vector<4xf32> -> {rt} "
                    f"({t})\n"
                    f"    llvm.store %c{i}, %o{i} : {rt}, !llvm.ptr\n")
    lanes = "".join(f"    %i{k} = llvm.mlir.constant({k} : i32) : i32\n"
                    f"    %v{k + 1} = llvm.insertelement %x{k}, %v{k}[%i{k} : i32] : vector<4xf32>\n"
                    for k in range(4))
    outs = ", ".join(f"%o{i}: !llvm.ptr" for i in range(len(_RS_OPS)))
    return ("module {\n  llvm.func @rs(%x0: f32, %x1: f32, %x2: f32, %x3: f32, %r: i32, "
            f"{outs}) attributes {{nvvm.kernel}} {{\n"
            "    %v0 = llvm.mlir.poison : vector<4xf32>\n" + lanes +
            "    %v = llvm.bitcast %v4 : vector<4xf32> to vector<4xf32>\n" + "".join(body) +
            "    llvm.return\n  }\n}\n")


@pytest.mark.parametrize("chip", ["sm_100a", "sm_103a", "sm_100f", "sm_110a", "sm_120a"])
def test_cvt_rs_exists_exactly_where_the_model_says(chip):
    """cvt.rs.satfinite.{e4m3,e5m2,e2m3,e3m2,e2m1}x4.f32 (modelled by
    nvvm_model.cvt_rs_satfinite) compiles (llc, PTX 9.0) and assembles (ptxas) for the chips
    nvvm_model.has_rs_cvt names, and for no other."""
    if ptx.ptxas_path() is None:
        pytest.skip("ptxas not installed")
    ir = ptx.translate_to_llvmir(_rs_kernel())
    try:
        asm = ptx.compile_ptx(ir, chip, ptx_version=90)
        for _, _, name in _RS_OPS.values():
            assert f"cvt.rs.satfinite.{name}.f32" in asm
        ptx.assemble(asm, chip)
        ok = True
    except ptx.ToolError as e:
        assert ".rs" in str(e) or "Cannot select" in str(e), str(e)
        ok = False
    assert ok == nvvm_model.has_rs_cvt(chip)


def _stochastic_kernel(spec: str) -> str:
    """A gpu.module whose kernel casts f32 to ``spec`` with section 10.2's stochastic rounding:
    the codec recipe (what plan_stochastic picks on every chip), built by the arith builder."""
    from mxlower.bindings import jaxlib as J
    from mxlower.lowering import codec
    from mxlower.lowering import int_builders

    ir = J.ir
    with J.make_context(), ir.Location.unknown():
        m = ir.Module.create()
        f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
        with ir.InsertionPoint(m.body):
            f = J.func.FuncOp("enc", ir.FunctionType.get([f32, i32], [i32]))
            blk = f.add_entry_block()
            with ir.InsertionPoint(blk):
                b = int_builders.ArithBuilder(ir, J.arith, f32)
                c = codec.emit_encode(b, blk.arguments[0], "f32", spec,
                                      roundmode="stochastic", rbits=blk.arguments[1],
                                      code_bits=32)
                J.func.ReturnOp([c])
        enc = str(m).strip()[len("module {"):-1]
    return ("gpu.module @sr {\n" + enc +
            "  gpu.func @k(%x: memref<64xf32>, %r: memref<64xi32>, %y: memref<64xi32>) kernel {\n"
            "    %t = gpu.thread_id x\n    %v = memref.load %x[%t] : memref<64xf32>\n"
            "    %b = memref.load %r[%t] : memref<64xi32>\n"
            "    %c = func.call @enc(%v, %b) : (f32, i32) -> i32\n"
            "    memref.store %c, %y[%t] : memref<64xi32>\n    gpu.return\n  }\n}\n")


@pytest.mark.parametrize("chip", ["sm_80", "sm_100a", "sm_103a", "sm_120a"])
def test_software_stochastic_kernel_assembles(chip):
    """The stochastic cast's codec recipe (e4m3fn, and a spec no hardware has, e5m6) lowers
    through mxlower-gpu-to-nvvm and assembles: integer ops only, no cvt."""
    from mxlower.bindings import jaxlib as J
    from mxlower.diagnostics import DiagnosticEngine
    from mxlower.pipeline.manager import PassPipeline

    for spec in ("e4m3fn", "e5m6"):
        ctx = J.make_context()
        with ctx:
            module = J.ir.Module.parse(_stochastic_kernel(spec))
        eng = DiagnosticEngine()
        out = PassPipeline.parse(f"builtin.module(mxlower-gpu-to-nvvm{{chip={chip}}})",
                                 ctx).run(module.operation, eng)
        assert out is not None, [d.format() for d in eng.diagnostics]
        asm = ptx.compile_ptx(ptx.translate_to_llvmir(ptx.device_module(out.get_asm())), chip)
        assert ".entry k(" in asm and "cvt.rs" not in asm and "cvt.rn.satfinite" not in asm
        if ptx.ptxas_path() is not None:
            assert ptx.assemble(asm, chip)[:4] == b"\x7fELF"
