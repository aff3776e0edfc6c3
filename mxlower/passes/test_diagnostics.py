"""``mxlower-test-diagnostics``: a test pass that reports diagnostics named in the IR."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops
from mxlower.bindings.jaxlib import ir
from mxlower.passes.base import ModulePass, option


@dataclasses.dataclass(frozen=True)
class TestDiagnostics(ModulePass):
    """Test pass: report the diagnostic an op asks for in its `mxlower.test_diag` attribute.

    Exercises the diagnostic plumbing of the drivers (`--verify-diagnostics`, error formatting,
    exit codes, atomic output).  An op carrying ``mxlower.test_diag = "<severity>: <message>"``
    gets that diagnostic at its location; errors fail the pass after every op has been visited.
    With ``tag-ops`` set, every op without the attribute gets ``mxlower.visited = <prefix>``,
    which shows that the pass ran and how its options were parsed.

    Before::

        %0 = stablehlo.add %a, %a {mxlower.test_diag = "warning: look here"} : tensor<2xf32>

    After (stderr)::

        in.mlir:3:8: warning: look here

    Example::

        mxlower-opt in.mlir --mxlower-test-diagnostics='tag-ops=true prefix=seen'
    """

    name: ClassVar[str] = "mxlower-test-diagnostics"
    tag_ops: bool = option(False, "tag every visited op with mxlower.visited")
    prefix: str = option("visited", "value of the mxlower.visited tag")
    ops: tuple[str, ...] = option((), "only tag these op names (default: all)")

    def run(self, op: Any) -> None:
        failed: list[diag.PassFailure] = []
        for o in collect_ops(op, pre_order=True):
            attrs = o.attributes
            if "mxlower.test_diag" in attrs:
                text = ir.StringAttr(attrs["mxlower.test_diag"]).value
                sev, _, msg = text.partition(":")
                sev, msg = sev.strip(), msg.strip()
                if sev == "error":
                    failed.append(diag.error(o, msg))
                elif sev == "warning":
                    diag.warning(o, msg)
                elif sev == "remark":
                    diag.remark(o, msg)
                else:
                    failed.append(diag.error(o, f"bad mxlower.test_diag severity '{sev}'"))
            elif self.tag_ops and o.name != "builtin.module" and (
                    not self.ops or o.name in self.ops):
                attrs["mxlower.visited"] = ir.StringAttr.get(self.prefix)
        if failed:
            raise failed[0]
