"""bench/carried_kernels.py, the way mxlower.jax runs on a lent machine's host (JAX, no upstream
MLIR): a script's CPU kernels recorded and compiled here, then the same script run on them in
a fresh interpreter where the ``mlir`` package cannot be imported -- its kernels the carried
ones (not the portable StableHLO), its results those of ``impl="xla"``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mxlower.bindings import upstream
from mxlower.execution import ffi_dot
from mxlower.lowering import dot_kernels

ROOT = Path(__file__).resolve().parents[2]

# quantize (a fused kernel) and a GEMV of bf16 rows against its MX weights (a dot kernel),
# each against the portable StableHLO
_SCRIPT = r"""
import jax, jax.numpy as jnp, numpy as np
import mxlower.jax as mxj

rng = np.random.default_rng(0)
w = rng.standard_normal((96, 256)).astype(np.float32)
q = jax.jit(lambda w: mxj.quantize(w, "mxfp4_e2m1"))(w)
r = mxj.quantize(w, "mxfp4_e2m1", impl="xla")
for got, want in ((q.elements, r.elements), (q.scales, r.scales)):
    assert np.array_equal(np.asarray(got).astype(np.float32),
                          np.asarray(want).astype(np.float32))
x = jnp.asarray(rng.standard_normal((8, 256)), jnp.bfloat16)
got = np.asarray(jax.jit(mxj.scaled_dot)(x, q), np.float64)
want = np.asarray(mxj.scaled_dot(x, r, impl="xla"), np.float64)
mag = np.abs(np.asarray(x, np.float64)) @ np.abs(np.asarray(mxj.dequantize(r, impl="xla"),
                                                      np.float64)).T
assert (np.abs(got - want) <= 2e-6 * mag).all()
print("script ok")
"""

# bench/carried_kernels.py run, with upstream MLIR made unimportable first
_NO_MLIR = r"""
import runpy, sys
sys.modules["mlir"] = None
sys.argv = ["bench/carried_kernels.py"] + sys.argv[1:]
runpy.run_path("bench/carried_kernels.py", run_name="__main__")
"""


@pytest.mark.skipif(not upstream.available() or not (shutil.which("cc") or shutil.which("gcc")),
                    reason="needs upstream MLIR and a C compiler to build the kernels")
def test_record_here_run_without_mlir(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(_SCRIPT)
    root = tmp_path / "carried"
    path = ffi_dot.kernel_paths()[0]
    rec = subprocess.run(
        [sys.executable, "bench/carried_kernels.py", "record", str(root), "--path", path,
         "--vendor", dot_kernels.cpu_vendor(), "--cpu", "native", "--", str(script)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert rec.returncode == 0, rec.stderr[-3000:]
    assert "script ok" in rec.stdout
    assert "2 kernels for native" in rec.stdout, rec.stdout[-2000:]
    run = subprocess.run([sys.executable, "-c", _NO_MLIR, "run", str(root), "--",
                          str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "script ok" in run.stdout
    assert "carried_kernels: 2 kernels loaded" in run.stdout, run.stdout[-2000:]
    # a kernel the recording did not see: a clear error, not the JIT (there is none)
    (root / "manifest.json").write_text((root / "manifest.json").read_text().replace(
        "mxlower_quantize_mxfp4_e2m1_f32_k32_floor", "renamed"))
    bad = subprocess.run([sys.executable, "-c", _NO_MLIR, "run", str(root), "--",
                          str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0
    assert "mxlower_quantize_mxfp4_e2m1_f32_k32_floor was not recorded" in bad.stderr
