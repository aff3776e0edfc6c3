"""``python -m mxlower.tools.llvm_exec``: lower a module to LLVM, JIT it and call one function.

    python -m mxlower.tools.llvm_exec in.mlir --func main --input x.npy --output out.npz

One shot, in the LLVM engine's isolated worker (:mod:`mxlower.execution.llvm`).  Bad input (a
missing file, an unreadable .npy, a module that does not lower) is one ``error:`` line and exit
1; the output .npz is written like every tool output (mxlower.tools.source.write_output).
"""

from __future__ import annotations

import sys
import zipfile

import numpy as np

from mxlower import types
from mxlower.execution import llvm
from mxlower.execution.arrays import npz_bytes
from mxlower.ir.source import read_source
from mxlower.tools.source import ArgParser, CliError, check_output_path, cli_main, write_output

__all__ = ["format_result", "main"]

PROG = "python -m mxlower.tools.llvm_exec"


def format_result(k: int, r: np.ndarray) -> str:
    """``result K: DTYPE[SHAPE] = [values]``, plus ``codes = [0x..]`` for narrow float types."""
    head = f"result {k}: {r.dtype}{list(r.shape)} = "
    with np.printoptions(threshold=64, linewidth=10**6):
        line = head + np.array2string(r.astype(np.float32) if r.dtype.itemsize < 2 and
                                      r.dtype.kind == "V" else r, separator=", ")
        try:
            t = types.of_dtype(r.dtype)
        except KeyError:
            t = None
        if t is not None and t.kind == "narrow":
            codes = r.view(t.code_dtype) & t.code_dtype.type(t.code_mask)
            line += " codes = " + np.array2string(
                codes, separator=", ", formatter={"int": lambda v: f"0x{v:X}"})
    return line


def _load_npy(path: str) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise CliError(f"could not read '{path}' as a .npy file: "
                       f"{str(e).strip() or type(e).__name__}") from None
    if not isinstance(arr, np.ndarray):  # an .npz archive
        arr.close()
        raise CliError(f"could not read '{path}' as a .npy file: it is an .npz archive")
    return arr


def main(argv: list[str] | None = None) -> int:
    """The command line (``--worker`` serves as the LLVM engine's worker, for old callers)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--worker"]:
        llvm.worker.main()
        return 0
    return cli_main(PROG, _main, argv)


def _main(argv: list[str]) -> int:
    p = ArgParser(prog=PROG, description="Lower an MLIR module to LLVM, JIT it and call one "
                  "function on .npy inputs (in an isolated worker process).")
    p.add_argument("input", help="MLIR file (StableHLO or upstream dialects)")
    p.add_argument("--func", "-f", default="main", help="function to call (default: main)")
    p.add_argument("--input", "-i", dest="inputs", action="append", default=[],
                   metavar="NPY", help="an argument as a .npy file (repeat, in order)")
    p.add_argument("--output", "-o", metavar="NPZ",
                   help="write the results to this .npz (arr_0, arr_1, ...; bf16 and narrow "
                   "float arrays load as raw bytes: .view() them as the ml_dtypes type)")
    p.add_argument("--opt-level", type=int, default=3, choices=range(4))
    p.add_argument("--pipeline", metavar="PIPELINE",
                   help="pass pipeline to lower with instead of mxlower-stablehlo-to-llvm")
    p.add_argument("--out-params", action="store_true",
                   help="lower with out-params (statically shaped results only)")
    p.add_argument("--print-llvm", action="store_true",
                   help="print the LLVM-dialect module to stdout")
    a = p.parse_args(argv)
    if a.output is not None:
        check_output_path(a.output)
    name, text = read_source(a.input)
    args = [_load_npy(x) for x in a.inputs]
    try:
        h = llvm.compile(text, opt_level=a.opt_level, keep_llvm=a.print_llvm, filename=name,
                         pipeline=a.pipeline, out_params=a.out_params)
        if a.print_llvm:
            sys.stdout.write(h.llvm_mlir or "")
        if a.func:
            res = h.run(a.func, *args)
            if a.output is not None:
                write_output(a.output, npz_bytes({f"arr_{k}": np.asarray(r)
                                                  for k, r in enumerate(res)}))
            elif not a.print_llvm:
                for k, r in enumerate(res):
                    sys.stdout.write(format_result(k, np.asarray(r)) + "\n")
        h.close()
    except llvm.LLVMExecError as err:
        raise CliError(str(err)) from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
