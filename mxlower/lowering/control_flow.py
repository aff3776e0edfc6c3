"""StableHLO's conditionals as ``scf`` ops: ``stablehlo.if`` -> ``scf.if``, ``stablehlo.case``
-> ``scf.index_switch``.

The recipe of ``mxlower-stablehlo-control-flow-to-scf``.  ``stablehlo-legalize-to-linalg``
(jaxlib) leaves both ops alone although it lowers the ops inside them, and upstream MLIR, which
the LLVM lowering hands the module to next, does not know them; ``scf`` is what both stacks
bufferize and lower.  The branch regions move over unchanged (their ``stablehlo.return``
becomes ``scf.yield``), so values captured from above stay captured.

* ``stablehlo.if %p`` (``tensor<i1>``): ``scf.if`` on ``tensor.extract %p[]``;
* ``stablehlo.case %i`` (``tensor<i32>``) with branches 0 .. n-1: ``scf.index_switch`` on the
  index, cases 0 .. n-2 and branch n-1 as the default region: StableHLO runs the last branch
  for an index out of range (negative included), and so does the default region.
"""

from __future__ import annotations

from typing import Any

from mxlower.bindings.jaxlib import ir

__all__ = ["is_conditional", "rewrite"]

_OPS = ("stablehlo.if", "stablehlo.case")


def is_conditional(op: Any) -> bool:
    """Whether ``op`` is a ``stablehlo.if`` or ``stablehlo.case``."""
    return op.operation.name in _OPS


def _scalar(value: Any, ip: Any, loc: Any) -> Any:
    """The element of a rank-0 tensor (``tensor.extract``)."""
    elt = ir.RankedTensorType(value.type).element_type
    return ir.Operation.create("tensor.extract", results=[elt], operands=[value], loc=loc,
                               ip=ip).result


def _move_regions(old: Any, new: Any, order: list[int]) -> None:
    """Moves the body of ``old``'s region ``order[j]`` into ``new``'s region j, its
    ``stablehlo.return`` becoming ``scf.yield``."""
    for j, i in enumerate(order):
        block = old.regions[i].blocks[0]
        block.append_to(new.regions[j])
        term = block.operations[len(block.operations) - 1]
        ir.Operation.create("scf.yield", operands=list(term.operands), loc=term.location,
                            ip=ir.InsertionPoint(term))
        term.erase()


def rewrite(op: Any) -> None:
    """Replaces the ``stablehlo.if`` / ``stablehlo.case`` ``op`` by its ``scf`` form."""
    op = op.operation
    loc, ip = op.location, ir.InsertionPoint(op)
    types = [r.type for r in op.results]
    n = len(op.regions)
    if op.name == "stablehlo.if":
        cond = _scalar(op.operands[0], ip, loc)
        new = ir.Operation.create("scf.if", results=types, operands=[cond], regions=2,
                                  loc=loc, ip=ip)
        _move_regions(op, new, [0, 1])
    else:
        i32 = _scalar(op.operands[0], ip, loc)
        index = ir.Operation.create("arith.index_cast", results=[ir.IndexType.get()],
                                    operands=[i32], loc=loc, ip=ip).result
        cases = ir.DenseI64ArrayAttr.get(list(range(n - 1)))
        new = ir.Operation.create("scf.index_switch", results=types, operands=[index],
                                  attributes={"cases": cases}, regions=n, loc=loc, ip=ip)
        _move_regions(op, new, [n - 1, *range(n - 1)])
    for old, value in zip(op.results, new.results):
        old.replace_all_uses_with(value)
    op.erase()
