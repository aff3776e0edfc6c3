"""The shared body of the executables in tools/: run one of mxlower's tools from this checkout.

Each executable is a thin main (as MLIR keeps ``mlir-opt``'s main over ``MlirOptMain``): it
puts the checkout's root first on ``sys.path``, so the ``mxlower`` package of this checkout is
the one imported (before any installed copy), and calls the package's entry point, the same
``main`` that the installed console script calls.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(module: str) -> int:
    """Run ``module``'s ``main()`` (e.g. ``"mxlower.tools.opt"``); returns its exit code.

    A dependency that the running Python lacks (jaxlib, the xtc wheels, ...) is reported in one
    line with what to do, instead of a traceback.
    """
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(module).main()
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] == "mxlower":
            raise  # a broken checkout, not a missing dependency: show where
        venv = ROOT / ".venv" / "bin" / "python"
        in_venv = Path(sys.prefix) == venv.parent.parent
        if venv.exists() and not in_venv:
            hint = f"run `{venv} {sys.argv[0]}`, or activate that environment"
        else:
            hint = ("install the dependencies (`pip install -e .` in a virtual environment) and "
                    "run this with that environment's python")
        sys.stderr.write(f"{Path(sys.argv[0]).name}: error: {sys.executable} cannot import "
                         f"'{e.name}', which mxlower needs: {hint}\n")
        return 1
