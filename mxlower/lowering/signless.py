"""Unsigned integer types made signless once nothing depends on their signedness.

``stablehlo-legalize-to-linalg`` lowers every StableHLO op on ``ui<N>`` tensors to signless
arith ops that carry the signedness themselves (``arith.divui``, ``arith.cmpi ult``,
``arith.uitofp``, ``arith.extui``, ``arith.shrui``, ``arith.maxui``...), but leaves the types
at the boundaries unsigned -- function arguments and results, calls, region arguments -- joined
to the signless values by ``builtin.unrealized_conversion_cast``, which bufferization cannot
handle.  :func:`make_signless` retypes those to the signless integer of the same width (the
same bits; the ExecutionEngine's ABI passes both alike) and drops the casts that become
identities.  An op that still depends on signedness (StableHLO or CHLO ops left unlowered) is
reported, never silently retyped.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from mxlower.bindings import collect_ops, typed_attribute
from mxlower.diagnostics import error

__all__ = ["make_signless"]

#: ``ui<N>`` in a type's text ("4xui8": after a dimension's "x" too)
_UNSIGNED = re.compile(r"(?<![A-Za-wyz0-9_])ui(\d+)\b")
#: dialects whose ops read the signedness of their types (lowered before this runs)
_SIGNED_DIALECTS = ("stablehlo.", "chlo.", "mhlo.")


def _signless(ir: Any, t: Any) -> Any:
    text = str(t)
    return ir.Type.parse(_UNSIGNED.sub(r"i\1", text)) if _UNSIGNED.search(text) else t


def make_signless(module: Any) -> int:
    """Retype every unsigned integer type in ``module`` to signless; returns the number of
    identity casts removed.  Raises (a located error) at an op whose meaning depends on
    the signedness of an unsigned operand or result."""
    ir = sys.modules[type(module.operation).__module__]
    for o in collect_ops(module):
        if o.name.startswith(_SIGNED_DIALECTS) and any(
                _UNSIGNED.search(str(v.type)) for v in [*o.operands, *o.results]):
            raise error(o, f"'{o.name}' on unsigned integers is still here: lower StableHLO "
                        "first (stablehlo-legalize-to-linalg), which keeps their meaning")
    with module.context:
        for o in collect_ops(module):
            for r in o.results:
                r.set_type(_signless(ir, r.type))
            for region in o.regions:
                for block in region.blocks:
                    for a in block.arguments:
                        a.set_type(_signless(ir, a.type))
            for name in ("function_type", "value"):
                if name in o.attributes:
                    attr = typed_attribute(o.attributes, name)
                    if attr is None:  # a dense array the bindings cannot type (of a float
                        continue  # element type: nothing unsigned in it)
                    text = str(attr)
                    if _UNSIGNED.search(text) and (name == "function_type"
                                                   or "dense<" in text[:7]):
                        o.attributes[name] = ir.Attribute.parse(_UNSIGNED.sub(r"i\1", text))
        removed = 0
        for o in collect_ops(module, lambda o: o.name == "builtin.unrealized_conversion_cast"):
            if (len(o.operands) == 1 and len(o.results) == 1
                    and o.operands[0].type == o.results[0].type):
                o.results[0].replace_all_uses_with(o.operands[0])
                o.erase()
                removed += 1
    return removed
