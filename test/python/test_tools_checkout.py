"""The executables in tools/ run mxlower's tools from the checkout (tools/README.md)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mxlower

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
NAMES = ("mxlower-opt", "mxlower-run", "mxlower-translate", "mxlower-cast")


def _run(tool: str, *args: str, python: tuple[str, ...] = (sys.executable,),
         cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*python, str(TOOLS / tool), *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("tool", NAMES)
def test_executable_with_help(tool, tmp_path):
    path = TOOLS / tool
    assert os.access(path, os.X_OK), f"{path} is not executable"
    assert path.read_text().startswith("#!/usr/bin/env python3\n")
    r = _run(tool, "--help", cwd=tmp_path)  # from anywhere, not only the checkout's root
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: {tool}")


@pytest.mark.parametrize("tool", NAMES)
def test_version(tool):
    """Every tool (the checkout's executable and the installed console script) prints the
    versions of mxlower, the two MLIR stacks and Python, and exits 0."""
    want = [f"{tool} {mxlower.__version__}",
            f"  jax {importlib.metadata.version('jax')}, jaxlib "
            f"{importlib.metadata.version('jaxlib')} (StableHLO stack)",
            f"  xtc-mlir-python-bindings {importlib.metadata.version('xtc-mlir-python-bindings')}"
            " (upstream MLIR stack)",
            f"  Python {platform.python_version()}"]
    r = _run(tool, "--version")
    assert r.returncode == 0 and r.stdout.splitlines() == want and not r.stderr, r
    script = shutil.which(tool, path=os.path.dirname(sys.executable))
    if script:  # installed into this environment
        r = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.splitlines() == want, r
    assert "--version" in _run(tool, "--help").stdout


def test_opt_pipeline(tmp_path):
    src = tmp_path / "q.mlir"
    src.write_text(
        'func.func @main(%x: tensor<2x32xf32>) -> tensor<2x32xf8E4M3FN> {\n'
        '  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, '
        'axis = 1 : i64, scale_mode = "floor"} : (tensor<2x32xf32>) -> '
        '(tensor<2x32xf8E4M3FN>, tensor<2x1xf8E8M0FNU>)\n'
        '  return %q : tensor<2x32xf8E4M3FN>\n}\n')
    r = _run("mxlower-opt", str(src), "-p", "builtin.module(mxlower-mx-to-stablehlo)")
    assert r.returncode == 0, r.stderr
    assert "stablehlo.convert" in r.stdout and '"mx.' not in r.stdout
    r = _run("mxlower-opt", str(src), "--mxlower-no-such-pass")
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_run_the_readme_example():
    ex = ROOT / "examples"
    r = _run("mxlower-run", str(ex / "mxfp8_scaled_matmul.mlir"), "-p",
             "builtin.module(mxlower-mx-to-stablehlo)", "-i",
             str(ex / "mxfp8_scaled_matmul.inputs.npz"), "--compare",
             str(ex / "mxfp8_scaled_matmul.ref.npz"), "--rtol", "1e-6", "--atol", "1e-6")
    assert r.returncode == 0, r.stderr
    assert "mxfp8_scaled_matmul.ref.npz[result0]: OK" in r.stdout


def test_translate_to_llvm_ir():
    src = ROOT / "test" / "lit" / "ptx" / "mxlower-translate.mlir"
    r = _run("mxlower-translate", str(src), "--no-pipeline", "--chip=sm_100a", "--emit=llvmir")
    assert r.returncode == 0, r.stderr
    assert "define ptx_kernel void @pack_f4(" in r.stdout


def test_missing_dependency_is_one_line_not_a_traceback():
    # -S: no site-packages, so jaxlib, numpy, ... cannot be imported
    r = _run("mxlower-opt", "--version", python=(sys.executable, "-S"))
    assert r.returncode == 1
    assert r.stderr.startswith("mxlower-opt: error: ") and "cannot import" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1
