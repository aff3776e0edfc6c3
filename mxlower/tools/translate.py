"""``mxlower-translate``: GPU kernels to LLVM IR or PTX for one NVIDIA chip.

    mxlower-translate k.mlir --emit=ptx --chip=sm_100a -o k.ptx
    mxlower-translate k.mlir --emit=llvmir --chip=sm_89
    mxlower-translate k.mlir --emit=mlir --chip=sm_90a          # the LLVM + NVVM dialect module
    mxlower-translate k.ll.mlir --emit=ptx --chip=sm_120a --no-pipeline   # already lowered

The input's kernels (``gpu.func`` in a ``gpu.module``, or ``func.func`` marked ``gpu.kernel``)
go through ``mxlower-gpu-to-nvvm{chip=...}`` (or ``--pass-pipeline``), then ``mlir-translate``
and xtc's ``llc``.  ``--chip`` defaults to the gpu.module's ``#nvvm.target`` chip.  Errors --
bad IR, pass diagnostics, an llc crash -- are printed as ``file:line:col: error:`` or
``mxlower-translate: error: ...``, the exit code is 1 and nothing is written.
"""

from __future__ import annotations

import argparse
import re

from mxlower.bindings import jaxlib as J
from mxlower.bindings import upstream
from mxlower.diagnostics import Diagnostic, DiagnosticEngine
from mxlower.execution import ptx
from mxlower.ir.source import parse_module, read_source
from mxlower.lowering.nvvm_model import CHIPS
from mxlower.pipeline.manager import PassPipeline
from mxlower.pipeline.parser import PipelineError
from mxlower.tools.source import (ArgParser, CliError, check_output_path, cli_main,
                                  print_diagnostics, write_output)

PROG = "mxlower-translate"


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog=PROG, description="Lower GPU kernels with narrow-float conversions "
                   "to LLVM IR or PTX for an NVIDIA chip (llc from the xtc wheels).")
    p.add_argument("input", nargs="?", default="-", help="input file ('-' for stdin, default)")
    p.add_argument("-o", dest="output", default="-", metavar="FILE",
                   help="output file ('-' for stdout, default); written only on success")
    p.add_argument("--emit", choices=("mlir", "llvmir", "ptx"), default="ptx",
                   help="what to write: the LLVM-dialect module, LLVM IR or PTX (default)")
    p.add_argument("--chip", choices=CHIPS, metavar="sm_XX",
                   help="target chip, e.g. sm_89, sm_90a, sm_100a, sm_120a (default: the "
                   "gpu.module's #nvvm.target)")
    p.add_argument("--pass-pipeline", "-p", dest="pipeline", metavar="PIPELINE",
                   help="pipeline to the LLVM dialect (default: "
                   "'builtin.module(mxlower-gpu-to-nvvm{chip=CHIP})')")
    p.add_argument("--no-pipeline", action="store_true",
                   help="the input is already in the LLVM + NVVM dialects")
    p.add_argument("--no-hardware", action="store_true",
                   help="use the integer expansion for every conversion (no cvt instructions)")
    p.add_argument("--gpu-module", metavar="NAME",
                   help="the gpu.module to emit when the input has several")
    p.add_argument("--ptx-version", type=int, metavar="NN",
                   help="PTX ISA version for llc, e.g. 87 (default: what the chip needs)")
    p.add_argument("--opt-level", type=int, choices=(0, 1, 2, 3), default=3,
                   help="llc optimization level (default 3)")
    p.add_argument("--ptxas", action="store_true",
                   help="also assemble the PTX with CUDA's ptxas for the chip (a check; the "
                   "output is still the PTX)")
    return p


def main(argv: list[str] | None = None) -> int:
    return cli_main(PROG, _main, argv)


def _target_chip(text: str, gpu_module: str | None = None) -> str | None:
    """The chip of the first #nvvm.target in the IR (of ``gpu_module`` when given; comments
    skipped)."""
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("//"))
    if gpu_module is not None:
        m = re.search(r"gpu\.module\s+@" + re.escape(gpu_module) + r"\b([^{]*)", code)
        code = m.group(1) if m else ""
    m = re.search(r'#nvvm\.target<[^>]*chip\s*=\s*"([^"]+)"', code)
    return m.group(1) if m else None


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.no_pipeline and args.pipeline:
        raise CliError("--no-pipeline and --pass-pipeline exclude each other")
    check_output_path(args.output)
    name, text = read_source(args.input)
    chip = args.chip or _target_chip(text, args.gpu_module)
    if chip is not None and chip not in CHIPS:
        raise CliError(f"unknown chip '{chip}' in the input's #nvvm.target")
    if chip is None and (args.emit != "mlir" or not args.pipeline):
        raise CliError("no target chip: pass --chip=sm_XX or give the gpu.module an "
                       "#nvvm.target<chip = \"sm_XX\">")
    engine = DiagnosticEngine()
    sources = {name: text.splitlines()}
    if args.no_pipeline:  # checked by upstream MLIR's parser (LLVM + NVVM dialects) first
        if parse_module(text, name, upstream.context(), engine, upstream.module("ir")) is None:
            print_diagnostics(engine.diagnostics, sources)
            return 1
        lowered = text
    else:
        lowered = _lower(text, name, chip, args, engine)
        if lowered is None:
            print_diagnostics(engine.diagnostics, sources)
            return 1
        if engine.diagnostics:
            print_diagnostics(engine.diagnostics, sources)
    if args.emit == "mlir":
        write_output(args.output, lowered)
        return 0
    try:
        device = ptx.device_module(lowered, args.gpu_module)
        llvm_ir = ptx.translate_to_llvmir(device)
        if args.emit == "llvmir":
            write_output(args.output, llvm_ir)
            return 0
        asm = ptx.compile_ptx(llvm_ir, chip, ptx_version=args.ptx_version,
                              opt_level=args.opt_level)
        if args.ptxas:
            ptx.assemble(asm, chip)
    except ValueError as e:
        raise CliError(str(e)) from None
    except ptx.ToolError as e:
        raise CliError(f"{e} (while building for {chip})") from None
    write_output(args.output, asm)
    return 0


def _lower(text: str, name: str, chip: str | None, args: argparse.Namespace,
           engine: DiagnosticEngine) -> str | None:
    """Run the pipeline; the resulting module's text, or None with diagnostics in engine."""
    if args.pipeline:
        pipe_text = args.pipeline
    else:
        opts = [f"chip={chip}"] if chip else []
        if args.no_hardware:
            opts.append("hardware=false")
        pipe_text = "builtin.module(mxlower-gpu-to-nvvm{" + " ".join(opts) + "})"
    ctx = J.make_context(allow_unregistered=True)
    try:
        pipeline = PassPipeline.parse(pipe_text, ctx)
    except PipelineError as e:
        raise CliError("invalid pass pipeline:\n" + e.format()) from None
    # parse on jaxlib's stack (StableHLO and the GPU dialects); upstream MLIR parses what
    # jaxlib's older dialects do not know (e.g. already-lowered nvvm ops)
    module = parse_module(text, name, ctx, engine, J.ir)
    if module is None:
        up = DiagnosticEngine()
        module = parse_module(text, name, upstream.context(), up, upstream.module("ir"))
        if module is None:
            return None
        engine.diagnostics.clear()
    with engine.capture(module.context):
        try:
            if not module.verify():
                engine.record(Diagnostic("error", "input does not verify"))
                return None
        except Exception as err:  # noqa: BLE001 - upstream raises MLIRError
            engine.add_mlir_error(err)
            return None
    out = pipeline.run(module, engine)
    if out is None:
        return None
    return out.get_asm(enable_debug_info=False) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
