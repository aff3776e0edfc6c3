"""``mxlower-opt``: an mlir-opt-style driver over jaxlib's MLIR with mxlower's passes.

    mxlower-opt in.mlir --pass-pipeline='builtin.module(mxlower-mx-to-stablehlo, cse)' -o out.mlir
    mxlower-opt in.mlir --mxlower-legalize-xla-mx --canonicalize
    mxlower-opt --list-passes

Every jaxlib dialect is registered; mxlower's ``mx`` ops are accepted.  Errors are printed as
``file:line:col: error: message``; the exit code is 1; the output file is written only when the
whole run succeeds.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mxlower import passes as registry
from mxlower.bindings import jaxlib as J
from mxlower.diagnostics import Diagnostic, DiagnosticEngine
from mxlower.ir.source import check_dialects, parse_module, read_source, split_input
from mxlower.pipeline.manager import PassPipeline
from mxlower.pipeline.parser import PipelineError
from mxlower.tools.source import (ArgParser, CliError, check_output_path, cli_main,
                                  print_diagnostics, write_output)
from mxlower.tools.verify import parse_expected, verify

PROG = "mxlower-opt"


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(
        prog=PROG,
        description="Run MLIR pass pipelines mixing mxlower's MX passes with the StableHLO and "
        "core passes jaxlib provides.",
        epilog="Passes can also be given as flags, in order: --mxlower-foo, "
        "--mxlower-foo='opt=1', --canonicalize.  See --list-passes.",
    )
    p.add_argument("input", nargs="?", default="-", help="input file ('-' for stdin, default)")
    p.add_argument("-o", dest="output", default="-", metavar="FILE",
                   help="output file ('-' for stdout, default); written only on success")
    p.add_argument("--pass-pipeline", "-p", dest="pipeline", metavar="PIPELINE",
                   help="textual pass pipeline, e.g. 'builtin.module(mxlower-decompose-mx,cse)'")
    p.add_argument("--split-input-file", action="store_true",
                   help="process each '// -----' separated chunk of the input on its own")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check diagnostics against expected-* comments in the input")
    p.add_argument("--list-passes", action="store_true",
                   help="list mxlower's passes and pipelines with their options, then exit")
    p.add_argument("--dump-pass-pipeline", action="store_true",
                   help="print the expanded pass pipeline to stderr before running it")
    p.add_argument("--mlir-print-ir-after-all", action="store_true",
                   help="print the IR to stderr after every pass")
    p.add_argument("--mlir-print-debuginfo", action="store_true",
                   help="print location information in the output")
    p.add_argument("--mlir-print-op-generic", action="store_true",
                   help="print operations in their generic form")
    p.add_argument("--allow-unregistered-dialect", action="store_true",
                   help="accept ops of dialects that are not registered")
    return p


def list_passes(out: Any) -> None:
    def describe(names: list[str], title: str) -> None:
        out.write(f"{title}:\n")
        for name in names:
            cls = registry.get(name)
            out.write(f"  --{name:<40} - {cls.summary()}\n")
            for opt, typ, default, help_, choices in cls.options():
                d = default
                if isinstance(d, bool):
                    d = "true" if d else "false"
                elif isinstance(d, tuple):
                    d = ",".join(str(x) for x in d)
                extra = f" [{'|'.join(str(c) for c in choices)}]" if choices else ""
                out.write(f"      {opt}=<{typ}>{extra} (default: {d})\n          {help_}\n")

    describe(sorted(registry.PASSES), "Passes")
    describe(sorted(registry.PIPELINES), "Pass Pipelines")
    out.write("\nEvery pass jaxlib registers (canonicalize, cse, symbol-dce, inline, "
              "stablehlo-legalize-to-linalg, ...) can be mixed in.\n")


def _split_pass_flags(argv: list[str], parser: argparse.ArgumentParser,
                      ctx_factory) -> tuple[list[str], list[str]]:
    """Separate per-pass flags (``--name`` / ``--name=opts``) from driver arguments."""
    driver_flags = set(parser._option_string_actions)  # noqa: SLF001
    rest, passes = [], []
    ctx = None
    for arg in argv:
        if arg.startswith("--") and arg != "--":
            name, eq, value = arg[2:].partition("=")
            if "--" + name not in driver_flags:
                known = registry.get(name) is not None
                if not known:  # an upstream pass?
                    ctx = ctx or ctx_factory()
                    try:
                        PassPipeline.parse(f"builtin.module({name})", ctx)
                        known = True
                    except ValueError:
                        known = False
                if known:
                    passes.append(name + ("{" + value + "}" if eq else ""))
                    continue
        rest.append(arg)
    return rest, passes


def main(argv: list[str] | None = None) -> int:
    return cli_main(PROG, _main, argv)


def _main(argv: list[str]) -> int:
    parser = build_parser()
    ctx_holder: list[Any] = []

    def ctx_factory() -> Any:
        if not ctx_holder:
            ctx_holder.append(J.make_context(allow_unregistered=True))
        return ctx_holder[0]

    rest, pass_flags = _split_pass_flags(argv, parser, ctx_factory)
    unknown = [a for a in rest if a.startswith("--") and a != "--"
               and "--" + a[2:].partition("=")[0] not in parser._option_string_actions]  # noqa: SLF001
    if unknown:
        name = unknown[0][2:].partition("=")[0]
        raise CliError(f"unknown option or pass '--{name}'"
                       f"{registry.registry_unknown_flag_hint(name)}")
    args = parser.parse_args(rest)

    if args.list_passes:
        list_passes(sys.stdout)
        return 0
    check_output_path(args.output)
    if args.pipeline is not None and pass_flags:
        raise CliError("--pass-pipeline cannot be combined with per-pass flags "
                       f"(--{pass_flags[0].split('{')[0]})")

    ctx = ctx_factory()
    try:
        if args.pipeline is not None:
            pipeline = PassPipeline.parse(args.pipeline, ctx)
        else:
            pipeline = PassPipeline.from_passes(pass_flags, ctx)
    except PipelineError as e:
        if args.pipeline is None:  # from flags: point at the flag, not at synthesized text
            sys.stderr.write(f"{PROG}: error: {e.message}\n")
        else:
            sys.stderr.write(e.format() + "\n")
        return 1
    if args.dump_pass_pipeline:
        sys.stderr.write(f"Pass Manager with {len(pipeline.pass_names)} passes:\n{pipeline}\n\n")

    name, text = read_source(args.input)
    sources = {name: text.splitlines()}
    outputs: list[str] = []  # one per chunk, "" for a chunk that failed (as mlir-opt prints)
    failed = False
    for chunk in split_input(text, args.split_input_file):
        engine = DiagnosticEngine()
        ok = _process(chunk.text, name, ctx, engine, pipeline, args, outputs)
        if args.verify_diagnostics:
            expected, problems = parse_expected(chunk.text, chunk.first_line)
            for p in problems:
                p.file = name
            errs = problems + verify(engine.diagnostics, expected, name)
            if errs:
                print_diagnostics(errs, sources)
                failed = True
        else:
            if engine.diagnostics:
                print_diagnostics(engine.diagnostics, sources)
            failed |= not ok
    result = "// -----\n".join(outputs)
    if not failed or args.output == "-":
        # like mlir-opt: the chunks that succeeded are printed even when another one failed;
        # an output file is written only when every chunk succeeded
        write_output(args.output, result)
    return 1 if failed else 0


def _process(text: str, name: str, ctx: Any, engine: DiagnosticEngine, pipeline: Any,
             args: argparse.Namespace, outputs: list[str]) -> bool:
    """Parse, verify and transform one chunk; its printed result goes to ``outputs`` ("" when
    it fails)."""
    outputs.append("")
    module = parse_module(text, name, ctx, engine, J.ir)
    if module is None:
        return False
    if not check_dialects(module, ctx, engine, args.allow_unregistered_dialect):
        return False
    with ctx, engine.capture(ctx):
        if not module.verify():
            if not engine.has_errors:
                engine.record(Diagnostic("error", "input does not verify"))
            return False
    module = pipeline.run(module, engine, print_ir_after_all=args.mlir_print_ir_after_all,
                          print_debuginfo=args.mlir_print_debuginfo)
    if module is None:
        return False
    outputs[-1] = module.get_asm(enable_debug_info=args.mlir_print_debuginfo,
                                 print_generic_op_form=args.mlir_print_op_generic) + "\n"
    return True


if __name__ == "__main__":
    raise SystemExit(main())
