"""``mxlower-pack-subbyte-args``: f4/f6 function arguments and results as packed ui8 storage.

See :class:`PackSubbyteArgs`; the rewrites are :mod:`mxlower.lowering.subbyte_args`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower import diagnostics as diag
from mxlower.bindings.jaxlib import ir
from mxlower.ir.typeconv import function_type
from mxlower.lowering.subbyte_args import (fold, is_public, lower_pack_ops, packed_type_of,
                                           rewrite_calls, rewrite_function)
from mxlower.passes.base import ModulePass, option

__all__ = ["PackSubbyteArgs", "packed_type_of"]


@dataclasses.dataclass(frozen=True)
class PackSubbyteArgs(ModulePass):
    """Store f4/f6 function arguments and results packed in ui8 (two f4, or four f6 per 3 bytes).

    Every ``tensor<...xf4E2M1FN>``, ``tensor<...xf6E2M3FN>`` and ``tensor<...xf6E3M2FN>``
    argument and result of the rewritten functions becomes the ``tensor<...xui8>`` of its
    packed bits along ``axis`` -- docs/semantics.md section 8: a little-endian, LSB-first bit
    stream, the first f4 element in the low nibble, four f6 values in three bytes -- so the
    module's interface holds the real 4- and 6-bit memory footprint.  The body is unchanged: an
    ``mx.unpack`` after each packed argument and an ``mx.pack`` before each packed result (and
    around calls of rewritten functions), lowered at once to StableHLO shifts and masks by
    ``mxlower-decompose-mx``'s pack/unpack lowering (``lower=false`` leaves the mx ops).  A
    packed dimension whose length does not fill whole bytes (an odd f4 count, an f6 count not
    a multiple of 4), a dynamic one, or a rank-0 value is an error at the function.

    Before::

        func.func @main(%x: tensor<4x64xf4E2M1FN>) -> tensor<4x64xf6E2M3FN> { ... }

    After::

        func.func @main(%arg0: tensor<4x32xui8>) -> tensor<4x48xui8> {
          %0 = <unpack: shifts and masks> : (tensor<4x32xui8>) -> tensor<4x64xf4E2M1FN>
          ...
          %9 = <pack> : (tensor<4x64xf6E2M3FN>) -> tensor<4x48xui8>
          return %9 : tensor<4x48xui8>
        }

    Example::

        mxlower-opt m.mlir --mxlower-pack-subbyte-args='axis=-1 functions=main'
    """

    name: ClassVar[str] = "mxlower-pack-subbyte-args"
    axis: int = option(-1, "dimension packed along (negative: counted from the last)")
    functions: tuple[str, ...] = option((), "functions to rewrite (default: every public "
                                        "function with a body); their callers are updated")
    lower: bool = option(True, "lower the inserted mx.pack/mx.unpack to StableHLO at once "
                         "(false: leave them for mxlower-decompose-mx)")

    def run(self, op: Any) -> None:
        with op.location:
            self._run(op)

    def _run(self, op: Any) -> None:
        funcs = {}
        for o in op.regions[0].blocks[0].operations:
            o = o.operation
            if o.name == "func.func":
                funcs[ir.StringAttr(o.attributes["sym_name"]).value] = o
        unknown = [f for f in self.functions if f not in funcs]
        if unknown:
            raise diag.error(op, f"'{self.name}': no function named "
                             f"{', '.join(repr(u) for u in unknown)} in the module")
        chosen = [f for name, f in funcs.items()
                  if (name in self.functions if self.functions else is_public(f))
                  and f.regions[0].blocks]
        created: list[Any] = []
        changed: dict[str, tuple[dict[int, Any], dict[int, Any]]] = {}
        failures = []
        for f in chosen:
            try:
                plan = self._plan(f)
            except diag.PassFailure as e:
                failures.append(e)
                continue
            if plan[0] or plan[1]:
                changed[ir.StringAttr(f.attributes["sym_name"]).value] = plan
                created += rewrite_function(f, *plan, self.axis)
        if failures:
            raise failures[0]
        if changed:
            created += rewrite_calls(op, changed, self.axis)
        created = fold(created)
        if self.lower:
            lower_pack_ops(created)

    def _plan(self, f: Any) -> tuple[dict[int, Any], dict[int, Any]]:
        """({arg index: packed type}, {result index: packed type}) of a function."""
        ftype = function_type(ir, f)
        out: list[dict[int, Any]] = [{}, {}]
        for k, (kind, types) in enumerate((("argument", ftype.inputs),
                                           ("result", ftype.results))):
            for i, t in enumerate(types):
                try:
                    p = packed_type_of(t, self.axis)
                except ValueError as e:
                    raise diag.error(f, f"cannot pack {kind} {i} of @"
                                     f"{ir.StringAttr(f.attributes['sym_name']).value} ({t}): "
                                     f"{e}") from None
                if p is not None:
                    out[k][i] = p
        return out[0], out[1]
