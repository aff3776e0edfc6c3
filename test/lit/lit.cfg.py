# lit configuration for mxlower's FileCheck tests.  Run with:  lit -sv test/lit
# Tests run in lit's internal shell (lit 23 rejects execute_external=True).

import os
import shutil
import sys

import lit.formats
import lit.util

config.name = "mxlower"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py", "__pycache__"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(
    os.environ.get("MXLOWER_LIT_OUT", os.path.join(config.test_source_root, "Output")))

python = os.environ.get("MXLOWER_PYTHON", sys.executable)
bindir = os.path.dirname(python)


def _tool(name):
    """A console script installed beside the Python running lit, else on PATH."""
    cand = os.path.join(bindir, name)
    if os.path.exists(cand):
        return cand
    return shutil.which(name)


# Pass the environment that matters through to tests.
for var in ("HOME", "TMPDIR", "XLA_FLAGS", "JAX_PLATFORMS", "MXLOWER_DEBUG", "CUDA_HOME",
            "PATH", "CI", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["PYTHONUNBUFFERED"] = "1"
config.environment["JAX_PLATFORMS"] = os.environ.get("JAX_PLATFORMS", "cpu")
config.environment["TF_CPP_MIN_LOG_LEVEL"] = "3"

config.substitutions.append(("%PYTHON", python))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))

for tool in ("mxlower-opt", "mxlower-run", "mxlower-translate", "mxlower-cast"):
    path = _tool(tool)
    if path:
        config.substitutions.append((r"(?<![\w-])" + tool + r"(?![\w-])", path))

# FileCheck: xtc's LLVM FileCheck when installed, else the Python `filecheck` package.
sys.path.insert(0, os.path.join(config.test_source_root, "..", ".."))
try:
    from mxlower.bindings.upstream import tool as _xtc_tool
except Exception:  # pragma: no cover - mxlower not importable: lit will fail on the tools anyway
    _xtc_tool = shutil.which
filecheck = _xtc_tool("FileCheck")
if filecheck:
    config.available_features.add("llvm-filecheck")
else:
    filecheck = _tool("filecheck")
if filecheck:
    config.substitutions.append((r"(?<![\w-])FileCheck(?![\w-])", filecheck))

# Features for REQUIRES:
try:
    import jax  # noqa: F401

    config.available_features.add("jax")
except Exception:
    pass
if _xtc_tool("llc") and _xtc_tool("mlir-opt"):
    config.available_features.add("llvm-tools")
    # upstream mlir-opt (test/lit/dialect loads dialect/mx.irdl.mlir into it)
    config.substitutions.append((r"(?<![\w-])mlir-opt(?![\w-])", _xtc_tool("mlir-opt")))
ptxas = shutil.which("ptxas") or (
    os.path.join(os.environ["CUDA_HOME"], "bin", "ptxas") if "CUDA_HOME" in os.environ else None)
if not ptxas and os.path.exists("/usr/local/cuda/bin/ptxas"):
    ptxas = "/usr/local/cuda/bin/ptxas"
if ptxas and os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append((r"(?<![\w-])ptxas(?![\w-])", ptxas))
