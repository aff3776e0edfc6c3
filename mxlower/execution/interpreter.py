"""Running a module with StableHLO's reference interpreter (``stablehlo.eval_module``).

Slow, but it handles every element type, f6 included.  Arrays cross as dense literals
(:mod:`mxlower.ir.literals`): inputs as bit patterns, so nothing is rounded on the way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxlower.bindings.jaxlib import MLIRError, eval_module, ir
from mxlower.execution.errors import RunError
from mxlower.ir.literals import LiteralError, format_literal, parse_dense
from mxlower.ir.signature import Signature

__all__ = ["execute"]


def execute(module: Any, sig: Signature, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``@main`` (signature ``sig``) of a jaxlib module on ``inputs``; the interpreter's
    failures are a :class:`RunError`."""
    with module.context:
        attrs = [ir.Attribute.parse(format_literal(a, spec.element, bits=a.dtype.kind != "b"))
                 for a, spec in zip(inputs, sig.args)]
        try:
            outs = eval_module(ir.Module.parse(str(module)), attrs)
        except (MLIRError, RuntimeError, ValueError) as e:
            raise RunError(f"the StableHLO interpreter failed: {str(e).strip()}") from None
    try:
        return [parse_dense(o, spec.shape, spec.element) for o, spec in zip(outs, sig.results)]
    except LiteralError as e:
        raise RunError(f"cannot read the interpreter's result: {e}") from None
