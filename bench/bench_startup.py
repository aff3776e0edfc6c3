"""Start-up cost of the command-line tools: the wall time of one whole tool call on a small input.

lit runs hundreds of tool calls, so what a call costs before it does any work matters.  Each row
is one command run as a fresh process (output to /dev/null); the rows are timed round-robin (load
from other processes hits them alike), and the table gives the fastest and the median of
``--reps`` runs after one warm-up run each:

* ``python -c pass`` -- the interpreter's own start-up, the floor of any Python tool;
* ``import jaxlib.mlir.ir`` and ``import jax`` -- the floor of a tool on jaxlib's MLIR, and what
  importing JAX adds;
* upstream ``mlir-opt`` (C++, from the xtc wheels) on the equivalent job: the same dense + ReLU
  layer written in linalg and arith, through ``arith-expand`` (upstream's narrow-float
  expansion), printed;
* ``mxlower-opt examples/dense_relu.mlir --mxlower-expand-narrow-floats`` -- the issue's target
  (<= 0.5 s), and the same call with ``import jax`` first: what every call cost while
  ``mxlower.bindings.jaxlib`` imported JAX;
* ``mxlower-run`` on the same file on the interpreter backend (no JAX) and on XLA:CPU (the
  default backend, which needs JAX), and ``mxlower-translate`` on a lit kernel to LLVM IR.

    python bench/bench_startup.py                  # about a minute on 2 cores
    python bench/bench_startup.py --reps 30 --json startup.json
    python bench/bench_startup.py --importtime     # also: the slowest imports of mxlower-opt
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from mxlower.benchmarking import Session
from mxlower.bindings import upstream

ROOT = Path(__file__).resolve().parents[1]
DENSE_RELU = ROOT / "examples" / "dense_relu.mlir"
KERNEL = ROOT / "test" / "lit" / "ptx" / "cvt-per-chip.mlir"

# examples/dense_relu.mlir in upstream dialects, for mlir-opt
DENSE_RELU_LINALG = """\
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = linalg.broadcast ins(%b : tensor<16xf32>) outs(%e : tensor<4x16xf32>) dimensions = [0]
  %2 = linalg.add ins(%0, %1 : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = linalg.max ins(%2, %z : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %3 : tensor<4x16xf32>
}
"""


def tool_command(name: str, *, import_jax: bool = False) -> list[str]:
    """The command line that runs one of mxlower's tools (``opt``, ``run``, ``translate``) the
    way its console script does, optionally importing JAX first."""
    pre = "import jax; " if import_jax else ""
    return [sys.executable, "-c",
            f"{pre}import sys; from mxlower.tools.{name} import main; sys.exit(main())"]


def commands(linalg_file: Path) -> dict[str, list[str]]:
    """Row label -> command line; rows whose tool is missing are left out."""
    opt_job = [str(DENSE_RELU), "--mxlower-expand-narrow-floats"]
    rows = {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "python -c 'import jaxlib.mlir.ir'": [sys.executable, "-c", "import jaxlib.mlir.ir"],
        "python -c 'import jax'": [sys.executable, "-c", "import jax"],
    }
    mlir_opt = upstream.tool("mlir-opt")
    if mlir_opt:
        rows["mlir-opt dense_relu (linalg) --arith-expand"] = [mlir_opt, str(linalg_file),
                                                              "--arith-expand"]
    rows["mxlower-opt dense_relu.mlir --mxlower-expand-narrow-floats"] = [
        *tool_command("opt"), *opt_job]
    rows["  same, JAX imported first (the cost before)"] = [
        *tool_command("opt", import_jax=True), *opt_job]
    rows["mxlower-run dense_relu.mlir --backend=interpreter"] = [
        *tool_command("run"), str(DENSE_RELU), "--backend=interpreter", "--no-print"]
    rows["mxlower-run dense_relu.mlir (XLA:CPU, needs JAX)"] = [
        *tool_command("run"), str(DENSE_RELU), "--no-print"]
    if upstream.available():
        rows["mxlower-translate cvt-per-chip.mlir --emit=llvmir"] = [
            *tool_command("translate"), str(KERNEL), "--chip=sm_89", "--emit=llvmir"]
    return rows


def time_once(cmd: list[str]) -> float:
    """Wall time of one run of ``cmd``; raises if it fails."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       cwd=ROOT, check=False)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {r.returncode}:\n{r.stderr[-2000:]}")
    return dt


def measure(rows: dict[str, list[str]], reps: int) -> dict[str, list[float]]:
    """``reps`` wall times per row, round-robin, after one warm-up run of each."""
    times: dict[str, list[float]] = {k: [] for k in rows}
    for cmd in rows.values():
        time_once(cmd)
    for _ in range(reps):
        for k, cmd in rows.items():
            times[k].append(time_once(cmd))
    return times


def slowest_imports(cmd: list[str], top: int) -> list[tuple[float, str]]:
    """The ``top`` top-level imports of ``cmd`` (a Python command) by cumulative time (s)."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       cwd=ROOT, env=env, check=False)
    found = []
    for line in r.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if m and len(m.group(2)) <= 1:
            found.append((int(m.group(1)) / 1e6, m.group(3)))
    return sorted(found, reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=10, help="timed runs per row (default 10)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--importtime", action="store_true",
                    help="also list the slowest top-level imports of the mxlower-opt row")
    args = ap.parse_args(argv)

    session = Session()
    linalg_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_startup_{os.getpid()}.mlir"
    linalg_file.write_text(DENSE_RELU_LINALG)
    try:
        rows = commands(linalg_file)
        times = measure(rows, args.reps)
    finally:
        linalg_file.unlink(missing_ok=True)

    floor = min(times["python -c pass (floor)"])
    lines = ["| command | fastest (s) | median (s) | fastest minus floor (s) |",
             "|---|---|---|---|"]
    out = []
    for k, ts in times.items():
        lo, med = min(ts), statistics.median(ts)
        lines.append(f"| {k} | {lo:.3f} | {med:.3f} | {lo - floor:.3f} |")
        out.append({"command": k, "argv": rows[k], "fastest_s": lo, "median_s": med,
                    "times_s": ts})
    session.report("\n".join(lines), out, args.json, extra=f"{args.reps} runs per row")

    if args.importtime:
        key = "mxlower-opt dense_relu.mlir --mxlower-expand-narrow-floats"
        print(f"\nSlowest top-level imports of `{key}` (cumulative, one run):")
        for t, name in slowest_imports(rows[key], 12):
            print(f"  {t * 1e3:7.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
