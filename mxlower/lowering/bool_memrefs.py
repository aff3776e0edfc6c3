"""Memrefs of i1 stored as one byte per bool: ``mxlower-widen-bool-memrefs``' rewrite.

:class:`BoolMemrefWidening` retypes every ``memref<...xi1>`` under a root op to the same memref
of i8 (allocations, globals and their initial values, function signatures, views, copies) and
converts at the accesses: loads ``arith.trunci`` the loaded i8 to i1, stores ``arith.extui``
the stored i1 to i8.  It checks everything before changing anything; an op it cannot retype is
a located error.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from mxlower import diagnostics as diag
from mxlower.bindings import attribute_items, collect_ops
from mxlower.ir.typeconv import map_function_type, retype_op, verify_retyped, with_element_type

__all__ = ["BoolMemrefWidening"]


#: a memref of i1 anywhere in a printed type or attribute ("memref<4x?xi1, strided<...>>")
_I1_MEMREF_RE = re.compile(r"memref<(?:[\d?*]+x)*i1[,>]")

#: loads: result #0 is the loaded value; (op, index of a pass-through operand or None).
#: vector.transfer_read's padding (the scalar i1 operand) is found by its type.
_LOADS = {"memref.load": None, "vector.load": None, "affine.load": None,
          "affine.vector_load": None, "vector.transfer_read": "padding",
          "vector.maskedload": -1, "vector.gather": -1, "vector.expandload": -1}
#: stores: the index of the stored value operand
_STORES = {"memref.store": 0, "vector.store": 0, "affine.store": 0, "affine.vector_store": 0,
           "vector.transfer_write": 0, "vector.maskedstore": -1, "vector.scatter": -1,
           "vector.compressstore": -1}
#: ops that only allocate, free, view, copy or describe a memref: retyped as they are
_RETYPED_OPS = frozenset({
    "memref.alloc", "memref.alloca", "memref.realloc", "memref.dealloc", "memref.global",
    "memref.get_global", "memref.subview", "memref.collapse_shape", "memref.expand_shape",
    "memref.cast", "memref.reinterpret_cast", "memref.reshape", "memref.transpose",
    "memref.copy", "memref.dim", "memref.rank", "memref.extract_strided_metadata",
    "memref.extract_aligned_pointer_as_index", "memref.memory_space_cast",
    "memref.assume_alignment", "memref.view", "memref.alloca_scope",
    "memref.alloca_scope.return", "memref.prefetch", "bufferization.clone",
    "bufferization.dealloc", "builtin.unrealized_conversion_cast", "builtin.module",
    "ub.poison", "affine.prefetch", "gpu.module", "gpu.func", "gpu.return", "gpu.launch_func",
    "gpu.alloc", "gpu.dealloc", "gpu.memcpy"})
#: dialects whose ops only pass values along (functions, calls, loops, branches)
_CONTROL_DIALECTS = frozenset({"func", "scf", "cf", "affine"})
#: ops of those dialects that do more than pass a memref along
_NOT_CONTROL = frozenset({"affine.dma_start", "affine.dma_wait"})


class BoolMemrefWidening:
    """Every memref of i1 under ``root`` as a memref of i8, loads and stores converting at the
    access (see mxlower-widen-bool-memrefs).  ``ir`` / ``arith``: the upstream modules."""

    def __init__(self, ir: Any, arith: Any, root: Any):
        self.ir, self.arith, self.root = ir, arith, root
        self.i1 = ir.IntegerType.get_signless(1, context=root.context)
        self.i8 = ir.IntegerType.get_signless(8, context=root.context)

    # ------------------------------------------------------------------------- types
    def is_bool(self, t: Any) -> bool:
        """Whether ``t`` is i1 or a vector of i1 (a loaded or stored value)."""
        ir = self.ir
        if isinstance(t, ir.VectorType):
            t = t.element_type
        return t == self.i1

    def wide(self, t: Any) -> Any:
        """i1 -> i8, vector<...xi1> -> vector<...xi8>."""
        return with_element_type(self.ir, t, self.i8)

    def map_type(self, t: Any) -> Any | None:
        """``t`` with every memref of i1 replaced by the memref of i8, or None when it has
        none; ValueError for a memref of i1 inside a type this pass does not know."""
        ir = self.ir
        if isinstance(t, (ir.MemRefType, ir.UnrankedMemRefType)) and t.element_type == self.i1:
            return with_element_type(ir, t, self.i8)
        if isinstance(t, ir.FunctionType):
            return map_function_type(ir, t, self.map_type)
        if _I1_MEMREF_RE.search(str(t)):
            raise ValueError(f"type '{t}'")
        return None

    def map_attr(self, a: Any) -> Any | None:
        ir = self.ir
        if isinstance(a, ir.TypeAttr):
            t = self.map_type(a.value)
            return None if t is None else ir.TypeAttr.get(t)
        if not isinstance(a, ir.StringAttr) and _I1_MEMREF_RE.search(str(a)):
            raise ValueError(f"attribute '{a}'")
        return None

    def has_bool_memref(self, o: Any) -> bool:
        for t in [v.type for v in (*o.operands, *o.results)] + [
                a.type for r in o.regions for b in r.blocks for a in b.arguments]:
            if self.map_type(t) is not None:
                return True
        return any(a is not None and self.map_attr(a) is not None  # (None: a dense array
                   for _, a in attribute_items(o))  # the bindings cannot type: no memref)

    # ------------------------------------------------------------------------- driver
    def run(self) -> None:
        ir = self.ir
        ops = collect_ops(self.root, pre_order=True)
        loads, stores, globals_ = [], [], []
        for o in ops:  # check everything before changing anything
            try:
                with o.location:
                    touched = self.has_bool_memref(o)
            except ValueError as err:
                raise diag.error(o, f"'{o.name}' has a {err} holding a memref of i1 that "
                                 "mxlower-widen-bool-memrefs cannot retype") from None
            if not touched:
                continue
            name = o.name
            if name in _LOADS and self.is_bool(o.results[0].type):
                loads.append((o, self.pass_through(o)))
            elif name in _STORES and self.is_bool(o.operands[_STORES[name]].type):
                stores.append((o, _STORES[name] % len(o.operands)))
            elif name == "memref.global":
                self.check_initial_value(o)
                globals_.append(o)
            elif not (name in _RETYPED_OPS or (name.split(".")[0] in _CONTROL_DIALECTS
                                               and name not in _NOT_CONTROL
                                               and name not in _LOADS and name not in _STORES)):
                raise diag.error(o, f"'{name}' on a memref of i1 is not supported: "
                                 "mxlower-widen-bool-memrefs stores bools as i8 and rewrites "
                                 "only loads, stores and ops that allocate, view, copy or "
                                 "pass memrefs along")
        for o in ops:
            retype_op(o, self.map_type, self.map_attr)
        for o in globals_:
            with o.location:
                self.widen_initial_value(o)
        for o, extra in loads:
            with o.location:
                self.widen_load(o, extra)
        for o, idx in stores:
            with o.location:
                self.extend_operand(o, idx)
        verify_retyped(ir, self.root, "storing memrefs of i1 as i8")

    def pass_through(self, o: Any) -> int | None:
        """The index of a load's operand holding i1 values to extend (padding, pass_thru)."""
        which = _LOADS[o.name]
        if which is None:
            return None
        if which == "padding":
            for i, v in enumerate(o.operands):
                if v.type == self.i1:
                    return i
            return None
        return which % len(o.operands)

    # ------------------------------------------------------------------------- rewrites
    def extend_operand(self, o: Any, idx: int) -> None:
        """Operand ``idx`` (i1 or a vector of i1) becomes its arith.extui to i8."""
        v = o.operands[idx]
        with self.ir.InsertionPoint(o):
            o.operands[idx] = self.arith.ExtUIOp(self.wide(v.type), v).result

    def widen_load(self, o: Any, extra: int | None) -> None:
        r = o.results[0]
        narrow = r.type
        if extra is not None:
            self.extend_operand(o, extra)
        r.set_type(self.wide(narrow))
        with self.ir.InsertionPoint.after(o):
            t = self.arith.TruncIOp(narrow, r)
        r.replace_all_uses_except(t.result, t.operation)

    def check_initial_value(self, o: Any) -> None:
        ir = self.ir
        a = o.attributes["initial_value"] if "initial_value" in o.attributes else None
        if a is None or isinstance(a, ir.UnitAttr):  # none, or uninitialized
            return
        if not isinstance(a, ir.DenseIntElementsAttr) or a.type.element_type != self.i1:
            raise diag.error(o, f"'memref.global' initial value {a} cannot be stored as i8 "
                             "by mxlower-widen-bool-memrefs (only dense i1 values)")

    def widen_initial_value(self, o: Any) -> None:
        """A memref.global's dense i1 initial value as 0/1 bytes."""
        ir = self.ir
        a = o.attributes["initial_value"] if "initial_value" in o.attributes else None
        if a is None or isinstance(a, ir.UnitAttr):
            return
        st = a.type
        vals = np.array(a, dtype=np.int8).reshape(st.shape)
        t = ir.RankedTensorType.get(st.shape, self.i8)
        if a.is_splat:
            o.attributes["initial_value"] = ir.DenseElementsAttr.get_splat(
                t, ir.IntegerAttr.get(self.i8, int(vals.flat[0]) if vals.size else 0))
        else:
            o.attributes["initial_value"] = ir.DenseElementsAttr.get(vals, type=t)
