"""A fresh process's first calls of mxlower's CPU kernels with the kernel cache
(:mod:`mxlower.execution.kernel_cache`) off, cold and warm.

Each run is a new Python process that imports ``mxlower.jax`` and JAX, then calls, under
``jax.jit``, what an inference program's first step does: quantize an f32 array to mxfp4 and
mxfp8, and ``scaled_dot`` of bf16 activations [8, 1024] against mxfp4 and mxfp8 weights
[1024, 1024] (small arrays: the kernels' build and compile dominate).  It prints the time
from before the first call to the last result (the kernels' build, compile or load, JAX's
tracing and XLA's compile; the imports excluded) and the process's wall time:

* ``off``: ``MXLOWER_CACHE_DIR=off``, every kernel JIT-compiled by upstream MLIR's
  ExecutionEngine (what every process did before the cache);
* ``cold``: an empty cache directory (each kernel compiled by opt / llc and linked, then
  loaded);
* ``warm``: the same directory again (each kernel built in MLIR and loaded; no compile).

The modes run round-robin ``--reps`` times (a new empty directory for every cold run); the
table gives the fastest and the median.

    python bench/bench_kernel_cache.py --reps 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from mxlower.benchmarking import Session

_CHILD = r"""
import json, time
t0 = time.perf_counter()
import jax, jax.numpy as jnp, numpy as np
import mxlower.jax as mxj
t1 = time.perf_counter()
rng = np.random.default_rng(0)
x = jnp.asarray(rng.standard_normal((8, 1024)), jnp.bfloat16)
w32 = jnp.asarray(rng.standard_normal((1024, 1024)), jnp.float32)
outs = []
for fmt in ("mxfp4_e2m1", "mxfp8_e4m3"):
    w = jax.jit(lambda v, fmt=fmt: mxj.quantize(v, fmt))(w32)
    outs.append(jax.jit(mxj.scaled_dot)(x, w))
jax.block_until_ready(outs)
print(json.dumps({"import_s": t1 - t0, "first_calls_s": time.perf_counter() - t1}))
"""


def _run(cache: str) -> tuple[float, dict]:
    env = dict(os.environ, MXLOWER_CACHE_DIR=cache)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, check=False)
    wall = time.perf_counter() - t0
    if res.returncode:
        raise SystemExit(f"the child failed:\n{res.stderr[-3000:]}")
    return wall, json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    session = Session()
    times: dict[str, list[tuple[float, float]]] = {"off": [], "cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="mxlower-cache-bench-") as tmp:
        for rep in range(a.reps):
            cold = os.path.join(tmp, f"cold{rep}")
            warm = os.path.join(tmp, "warm")
            if rep == 0:
                _run(warm)  # fills the warm directory (not timed)
            for mode, d in (("off", "off"), ("cold", cold), ("warm", warm)):
                wall, r = _run(d)
                times[mode].append((r["first_calls_s"], wall))
                print(f"{mode}: first calls {r['first_calls_s']:.2f} s, process {wall:.2f} s",
                      file=sys.stderr)
    print(session.header(f"kernel cache: a fresh process's first calls (quantize mxfp4 and "
                         f"mxfp8, scaled_dot bf16 [8, 1024] x MX [1024, 1024]), "
                         f"{a.reps} runs each, round-robin"))
    print("| cache | first calls s (best) | first calls s (median) | process s (best) | "
          "process s (median) |")
    print("|---|---:|---:|---:|---:|")
    for mode, ts in times.items():
        first, wall = zip(*ts)
        print(f"| {mode} | {min(first):.2f} | {statistics.median(first):.2f} | "
              f"{min(wall):.2f} | {statistics.median(wall):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
