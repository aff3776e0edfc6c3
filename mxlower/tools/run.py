"""``mxlower-run``: compile a StableHLO module on XLA:CPU (after an optional pipeline) and run it.

    mxlower-run model.mlir -p 'builtin.module(mxlower-mx-to-stablehlo)' -i inputs.npz
    mxlower-run model.mlir -p 'builtin.module(mxlower-mx-to-stablehlo)' --seed 3 -o out.npz
    mxlower-run model.mlir -i x.npy -i y.npy --compare ref.npz --rtol 1e-6

Inputs come from ``.npy`` files (one argument each) and ``.npz`` files (arguments ``arg0``,
``arg1``, ... or ``arr_0``, ``arr_1``, ... by number, else in file order), in the order given;
with no ``-i`` they are seeded random data of the argument types.  Results are printed as MLIR
dense literals (``%0 = dense<[...]> : tensor<...>``, non-finite values as their bit patterns,
as MLIR prints them), saved with ``-o out.npz`` (``result0``, ``result1``, ...), and compared
with ``--compare ref.npz``: bit-exact by default, or ``|got - ref| <= atol + rtol * |ref|``.
Bad input (no such function, wrong argument count, dtype or shape, a failing pipeline, a module
XLA cannot compile) is an error with exit code 1; a comparison that fails exits with 2.

A ``@main`` with dynamic dimensions (``jax.export`` with symbolic shapes) runs at the shapes of
its inputs: it takes their static types and StableHLO's shape refinement makes the body static.

``--backend=interpreter`` runs the module with StableHLO's reference interpreter instead of
XLA:CPU (slow, but it handles every type, f6 included; its own f32 -> f8E8M0FNU conversion
departs from MX-SEMANTICS for 0, negative and subnormal inputs, so append
``mxlower-expand-narrow-floats`` for exact e8m0 conversions there).  ``--backend=llvm`` lowers it with
``mxlower-stablehlo-to-llvm`` and runs it on upstream MLIR's ExecutionEngine (every narrow type,
f6 included, through mxlower's own conversion code), in an isolated worker process.

``--timeout SECONDS`` runs the backend in a child process and stops it when compiling and
running take longer (a ``while`` that never ends): an error, exit code 1 (at most 10^7 s;
``inf``: no limit, still in a child process).

The library behind it is :mod:`mxlower.execution` (:func:`mxlower.execution.run.run_module`,
re-exported here); this module is the command line only.
"""

from __future__ import annotations

import argparse
import os
import sys

# XLA's C++ INFO lines (the PjRt device count at start-up) are not the tool's output.  Read
# when jaxlib's native library loads, so set before the imports below load it; a user's own
# TF_CPP_MIN_LOG_LEVEL wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from mxlower import types  # noqa: E402
from mxlower.diagnostics import DiagnosticEngine
from mxlower.execution.arrays import (check_inputs, compare, load_arrays, npz_bytes,
                                      random_inputs, storable, typed)
from mxlower.execution.isolated import check_timeout
from mxlower.execution.run import (BACKENDS, RunError, execute, make_static, prepare, run_module,
                                   select_function)
from mxlower.ir.literals import format_literal
from mxlower.ir.signature import Signature
from mxlower.ir.source import read_source
from mxlower.pipeline.parser import PipelineError
from mxlower.tools.source import (ArgParser, CliError, check_output_path, cli_main,
                                  print_diagnostics, write_output)

__all__ = ["BACKENDS", "DTYPES", "RunError", "Signature", "check_inputs", "compare", "format_literal",
           "load_arrays", "main", "make_static", "prepare", "random_inputs", "run_module",
           "select_function"]

PROG = "mxlower-run"

#: MLIR element type -> NumPy dtype, for old callers (bench/bench_mx_xla.py also runs in older
#: checkouts); a view of :data:`mxlower.types.SCALARS`, which is the table.
DTYPES = {name: t.dtype for name, t in types.SCALARS.items() if t.kind != "index"}


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog=PROG, description="Compile a StableHLO module on XLA:CPU (after an "
                   "optional mxlower pipeline) and run one of its functions.")
    p.add_argument("input", help="the module (.mlir; '-' for stdin)")
    p.add_argument("-p", "--pass-pipeline", dest="pipeline", metavar="PIPELINE",
                   help="run this pipeline first, e.g. 'builtin.module(mxlower-mx-to-stablehlo)'")
    p.add_argument("-f", "--function", default="main", help="the function to run (default: main; '@main' works too)")
    p.add_argument("-i", "--input", dest="inputs", action="append", default=[], metavar="FILE",
                   help=".npy (one argument) or .npz (several) input file; repeat in order")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random inputs used when no -i is given (default 0)")
    p.add_argument("-o", "--output", metavar="OUT.npz",
                   help="save the results as result0, result1, ... in OUT.npz")
    p.add_argument("--compare", metavar="REF.npz", help="compare the results with REF.npz")
    p.add_argument("--rtol", type=float, help="relative tolerance of --compare (default: exact)")
    p.add_argument("--atol", type=float, help="absolute tolerance of --compare (default: exact)")
    p.add_argument("--no-print", action="store_true", help="do not print the results")
    p.add_argument("--print-bits", action="store_true",
                   help="print raw bit patterns (hex) instead of values")
    p.add_argument("--print-ir", action="store_true",
                   help="print the module that is run (after the pipeline) to stderr")
    p.add_argument("--backend", choices=BACKENDS, default="xla",
                   help="XLA:CPU (default), StableHLO's reference interpreter (its own "
                   "f32 -> f8E8M0FNU convert is not MX-exact: expand it), or the LLVM "
                   "lowering run on upstream MLIR's ExecutionEngine")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="stop the run when compiling and running the module take longer (it "
                   "then runs in a child process); an error, exit code 1.  At most 10^7 s; "
                   "'inf': no limit")
    return p


def main(argv: list[str] | None = None) -> int:
    return cli_main(PROG, _main, argv)


def _check_args(args: argparse.Namespace) -> None:
    if args.seed < 0:
        raise CliError(f"--seed must be a non-negative integer, got {args.seed}")
    try:
        check_timeout(args.timeout, "--timeout")
    except RunError as e:
        raise CliError(str(e)) from None
    for flag, value in (("--rtol", args.rtol), ("--atol", args.atol)):
        if value is not None and not value >= 0:
            raise CliError(f"{flag} must be a non-negative number, got {value:g}")
    if args.output is not None:
        check_output_path(args.output)
        if not args.output.endswith(".npz"):
            raise CliError(f"the output file must end in .npz, got '{args.output}'")


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    _check_args(args)
    name, text = read_source(args.input)
    engine = DiagnosticEngine()
    try:
        prepared = prepare(text, engine, name=name, pipeline=args.pipeline,
                           function=args.function.removeprefix("@"))
    except PipelineError as e:
        sys.stderr.write(e.format() + "\n")
        return 1
    finally:
        if engine.diagnostics:
            print_diagnostics(engine.diagnostics, {name: text.splitlines()})
    if prepared is None:
        if not engine.has_errors:
            sys.stderr.write(f"{PROG}: error: the input does not verify\n")
        return 1
    module, sig = prepared
    if args.print_ir:
        sys.stderr.write(str(module) + "\n")
    if args.inputs:
        inputs = check_inputs(sig, load_arrays(args.inputs))
    else:
        inputs = random_inputs(sig, args.seed)
    refs = load_arrays([args.compare]) if args.compare else None
    sig = make_static(module, sig, inputs)
    outs = execute(module, sig, inputs, args.backend, name, timeout=args.timeout)
    if refs is not None and len(refs) != len(outs):
        raise RunError(f"@{sig.name} returns {len(outs)} results but {args.compare} holds "
                       f"{len(refs)} arrays")
    failed = False
    lines = []
    for i, (out, spec) in enumerate(zip(outs, sig.results)):
        if not args.no_print:
            lines.append(f"%{i} = {format_literal(out, spec.element, bits=args.print_bits)}")
        if refs is not None:
            ok, report = compare(out, typed(refs[i][1], spec.element), spec.element, args.rtol,
                                 args.atol)
            failed |= not ok
            lines.append(f"// compare result #{i} with {refs[i][0]}: {report}")
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
    if args.output:
        write_output(args.output, npz_bytes({f"result{i}": storable(o)
                                             for i, o in enumerate(outs)}))
    return 2 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
