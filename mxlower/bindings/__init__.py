"""The only modules that import MLIR Python bindings: one per binding stack.

* :mod:`mxlower.bindings.jaxlib` -- jaxlib's MLIR (StableHLO, CHLO, func, arith, ...).
* :mod:`mxlower.bindings.upstream` -- upstream MLIR 22 from the xtc wheels (LLVM, NVVM,
  ExecutionEngine, translation to LLVM IR).

The two stacks share no objects: hand modules across as text.  A version bump of either stack
touches one file here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["attribute_items", "collect_ops", "typed_attribute"]


def collect_ops(root: Any, pred: Callable[[Any], bool] | None = None, *,
                pre_order: bool = False) -> list[Any]:
    """The operations nested in ``root`` (itself included) for which ``pred`` holds, as a list.

    Works on either binding stack (the ``WalkResult`` of the stack ``root`` comes from is
    used).  Collect first, rewrite after: the list stays valid while the IR changes.  Order:
    MLIR's walk order, post-order by default (children before their parent), pre-order on
    request; sibling ops come in IR order either way.
    """
    op = root.operation
    ir = sys.modules[type(op).__module__]
    out: list[Any] = []

    def visit(o: Any) -> Any:
        o = o.operation
        if pred is None or pred(o):
            out.append(o)
        return ir.WalkResult.ADVANCE

    if pre_order:
        op.walk(visit, ir.WalkOrder.PRE_ORDER)
    else:
        op.walk(visit)
    return out


def typed_attribute(attributes: Any, name: str) -> Any | None:
    """``attributes[name]`` (an op's attribute map, either binding stack), or None where the
    bindings cannot type that attribute -- a dense array of an element type they do not know
    (``array<f8E8M0FNU: ...>``), which reading raises on (or, through a ``NamedAttribute``,
    aborts the process)."""
    try:
        return attributes[name]
    except TypeError:
        return None


def attribute_items(op: Any) -> list[tuple[str, Any | None]]:
    """(name, :func:`typed_attribute`) of each attribute of ``op``."""
    names = [a if isinstance(a, str) else a.name for a in op.attributes]
    return [(name, typed_attribute(op.attributes, name)) for name in names]
