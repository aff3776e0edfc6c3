"""Type conversion of values, function signatures and ops, for either MLIR binding stack.

A retyping pass maps types with a function ``map_type(t) -> new type | None`` (None: keep
``t``) and attributes with ``map_attr(a) -> new attribute | None``, then applies them in
place to every op (:func:`retype_op`: results, block arguments, attributes) and verifies the
result (:func:`verify_retyped`).  The functions take the ``ir`` module of the stack the IR
belongs to (``jaxlib.mlir.ir`` or upstream ``mlir.ir``) and never import one themselves.

Example (every ``memref<...xi1>`` of a module as ``memref<...xi8>``)::

    def map_type(t):
        if isinstance(t, ir.MemRefType) and t.element_type == i1:
            return with_element_type(ir, t, i8)
        if isinstance(t, ir.FunctionType):
            return map_function_type(ir, t, map_type)
        return None

    for o in collect_ops(module, pre_order=True):
        retype_op(o, map_type, lambda a: None)
    verify_retyped(ir, module, "storing bools as i8")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxlower import diagnostics as diag
from mxlower.bindings import attribute_items

__all__ = [
    "element_type",
    "function_type",
    "map_function_type",
    "retype_op",
    "type_attr_mapper",
    "verify_retyped",
    "with_element_type",
]

TypeMap = Callable[[Any], Any]


def element_type(ir: Any, t: Any) -> Any:
    """The element type of a shaped type (vector, tensor, memref), else ``t`` itself."""
    return t.element_type if isinstance(t, ir.ShapedType) else t


def with_element_type(ir: Any, t: Any, elem: Any) -> Any:
    """``t`` with element type ``elem``: a vector (scalable dimensions kept), a ranked tensor
    (encoding kept), an unranked tensor, a memref (layout and memory space kept) or an
    unranked memref of the same shape; a scalar ``t`` gives ``elem``.  ``elem`` may be a type
    or its spelling."""
    if isinstance(elem, str):
        elem = ir.Type.parse(elem)
    if isinstance(t, ir.VectorType):
        scal = list(t.scalable_dims)
        return (ir.VectorType.get(t.shape, elem, scalable=scal) if any(scal)
                else ir.VectorType.get(t.shape, elem))
    if isinstance(t, ir.RankedTensorType):
        return ir.RankedTensorType.get(t.shape, elem, t.encoding)
    if isinstance(t, ir.UnrankedTensorType):
        return ir.UnrankedTensorType.get(elem)
    if isinstance(t, ir.MemRefType):
        return ir.MemRefType.get(t.shape, elem, t.layout, t.memory_space)
    if isinstance(t, ir.UnrankedMemRefType):
        return ir.UnrankedMemRefType.get(elem, t.memory_space)
    if isinstance(t, ir.ShapedType):
        raise ValueError(f"type '{t}'")
    return elem


def function_type(ir: Any, op: Any) -> Any:
    """The ``FunctionType`` of a ``func.func`` (or any op with a ``function_type``)."""
    return ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)


def map_function_type(ir: Any, t: Any, map_type: TypeMap) -> Any | None:
    """A FunctionType with ``map_type`` applied to its inputs and results, or None when none of
    them changes."""
    ins = [map_type(x) or x for x in t.inputs]
    outs = [map_type(x) or x for x in t.results]
    if list(ins) == list(t.inputs) and list(outs) == list(t.results):
        return None
    return ir.FunctionType.get(ins, outs)


def type_attr_mapper(ir: Any, map_type: TypeMap) -> Callable[[Any], Any]:
    """A ``map_attr`` that retypes ``TypeAttr`` values (e.g. ``function_type``, memref.global's
    ``type``) with ``map_type`` and keeps every other attribute."""
    def map_attr(a: Any) -> Any | None:
        if isinstance(a, ir.TypeAttr):
            t = map_type(a.value)
            return None if t is None else ir.TypeAttr.get(t)
        return None

    return map_attr


def retype_op(o: Any, map_type: TypeMap, map_attr: Callable[[Any], Any]) -> None:
    """Retype ``o``'s results, its regions' block arguments and its attributes in place
    (``Value.set_type``): ``map_type`` / ``map_attr`` return the new type / attribute, or None
    to keep it."""
    with o.location:
        for r in o.results:
            t = map_type(r.type)
            if t is not None:
                r.set_type(t)
        for region in o.regions:
            for block in region.blocks:
                for a in block.arguments:
                    t = map_type(a.type)
                    if t is not None:
                        a.set_type(t)
        for named, attr in attribute_items(o):
            new = None if attr is None else map_attr(attr)  # (None: an array the bindings
            if new is not None:  # cannot type, which holds no type to map)
                o.attributes[named] = new


def verify_retyped(ir: Any, root: Any, what: str) -> None:
    """Verify ``root`` after retyping; the first verifier error becomes a diagnostic
    ``"<what> made an op invalid: ..."`` at the op."""
    try:
        root.verify()
    except ir.MLIRError as err:
        diags = getattr(err, "error_diagnostics", None) or []
        where = diags[0].location if diags else root.location
        msg = diags[0].message if diags else str(err)
        raise diag.error(where, f"{what} made an op invalid: {msg}") from None
