"""The adapter between mxlower's Python passes and jaxlib's PassManager.

This is the only code that drives jaxlib's ``PassManager``.  A textual pipeline mixing mxlower
passes, mxlower named pipelines and any pass jaxlib registers (canonicalize, cse, symbol-dce,
inline, stablehlo-legalize-to-linalg, ...) is parsed, named pipelines are expanded, and the
result is compiled into stages: runs of upstream passes become one jaxlib ``PassManager``, and
each mxlower pass runs in Python on every op its nesting anchors it to.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import traceback
from typing import Any, TextIO

from mxlower import passes as registry
from mxlower.bindings import jaxlib as J
from mxlower.diagnostics import Diagnostic, DiagnosticEngine, PassFailure, location_of
from mxlower.passes.base import ModulePass, OptionError, Pipeline
from mxlower.passes.pipeline import Nested, PassRef, PipelineError, parse_elements, parse_pipeline

__all__ = ["PassPipeline", "UPSTREAM_PASS_NAMES", "run_pipeline"]

#: Upstream passes jaxlib registers that users reach for; used for "did you mean" suggestions
#: (any registered pass works, listed or not).
UPSTREAM_PASS_NAMES = (
    "canonicalize", "cse", "symbol-dce", "inline", "sccp", "loop-invariant-code-motion",
    "remove-dead-values", "strip-debuginfo", "symbol-privatize", "topological-sort",
    "stablehlo-legalize-to-linalg", "stablehlo-refine-shapes", "stablehlo-legalize-to-vhlo",
    "stablehlo-aggressive-folder", "stablehlo-aggressive-simplification",
    "stablehlo-legalize-composite-to-call", "chlo-legalize-to-stablehlo",
    "stablehlo-canonicalize-dynamism", "stablehlo-legalize-quant-to-math",
)

_MAX_EXPANSION_DEPTH = 16


@dataclasses.dataclass
class _Upstream:
    path: tuple[str, ...]  # anchors below the root, e.g. ("func.func",)
    texts: list[str]  # the elements as jaxlib prints them (full options)
    names: list[str]

    def pipeline(self, root: str) -> str:
        body = ",".join(self.texts)
        for anchor in reversed(self.path):
            body = f"{anchor}({body})"
        return f"{root}({body})"


@dataclasses.dataclass
class _Python:
    path: tuple[str, ...]
    instance: ModulePass


class PassPipeline:
    """A parsed, expanded and validated pass pipeline, ready to run on modules of a context."""

    def __init__(self, root: Nested, ctx: Any, text: str):
        self.ctx = ctx
        self.text = text
        self.root_anchor = root.anchor
        self._tree: Nested = Nested(root.anchor, [], root.pos)
        self._stages: list[_Upstream | _Python] = []
        self._expand(root.elements, (), self._tree.elements, 0)

    # ----------------------------------------------------------------------------- building
    @classmethod
    def parse(cls, text: str, ctx: Any) -> PassPipeline:
        """Parse ``builtin.module(...)``; PipelineError (with column) on any problem."""
        return cls(parse_pipeline(text), ctx, text)

    @classmethod
    def from_passes(cls, elements: list[str], ctx: Any) -> PassPipeline:
        """From per-pass flags: ``["mxlower-foo{a=1}", "cse"]`` as ``builtin.module(...)``."""
        return cls.parse("builtin.module(" + ",".join(elements) + ")", ctx)

    def _error(self, msg: str, pos: int) -> PipelineError:
        return PipelineError(msg, self.text, pos)

    def _expand(self, elements, path, out, depth) -> None:
        if depth > _MAX_EXPANSION_DEPTH:
            raise self._error("named pipelines expand recursively", 0)
        for e in elements:
            if isinstance(e, Nested):
                nested = Nested(e.anchor, [], e.pos)
                out.append(nested)
                self._expand(e.elements, (*path, e.anchor), nested.elements, depth)
                continue
            cls = registry.get(e.name)
            if cls is None:
                self._add_upstream(e, path, out)
                continue
            try:
                inst = cls.from_options(e.options)
            except OptionError as err:
                raise self._error(str(err), e.pos) from None
            if isinstance(inst, Pipeline):
                try:
                    inner = parse_elements(inst.build())
                except PipelineError as err:  # a bug in the pipeline's definition
                    raise self._error(f"pipeline '{e.name}' expands to invalid text: "
                                      f"{err.message}", e.pos) from None
                self._expand(inner, path, out, depth + 1)
            else:
                out.append(PassRef(e.name, inst.option_string()[1:-1], e.pos))
                self._stages.append(_Python(path, inst))

    def _add_upstream(self, e: PassRef, path, out) -> None:
        text = e.name + ("{" + e.options + "}" if e.options else "")
        probe = _Upstream(path, [text], [e.name]).pipeline(self.root_anchor)
        try:
            with self.ctx:
                printed = str(J.PassManager.parse(probe))
        except (ValueError, J.MLIRError) as err:
            msg = str(err).strip()
            if "does not refer to a registered pass" in msg:
                hint = registry.suggest(e.name, UPSTREAM_PASS_NAMES)
                did = "; did you mean " + " or ".join(f"'{h}'" for h in hint) + "?" if hint else ""
                raise self._error(f"unknown pass '{e.name}'{did}", e.pos) from None
            msg = re.sub(r"^(MLIR Textual PassPipeline Parser|<Pass-Options-Parser>):[\d:]*\s*"
                         r"(error:)?\s*", "", msg)
            msg = " ".join(x.strip() for x in msg.splitlines() if x.strip())
            raise self._error(f"invalid use of pass '{e.name}': {msg}", e.pos) from None
        # strip the anchors jaxlib printed around the single element
        inner = printed[len(self.root_anchor) + 1:-1]
        for anchor in path:
            inner = inner[len(anchor) + 1:-1]
        out.append(PassRef(e.name, _options_of(inner), e.pos))
        last = self._stages[-1] if self._stages else None
        if isinstance(last, _Upstream) and last.path == path:
            last.texts.append(inner)
            last.names.append(e.name)
        else:
            self._stages.append(_Upstream(path, [inner], [e.name]))

    # ----------------------------------------------------------------------------- printing
    def __str__(self) -> str:
        return _render_full(self._tree)

    @property
    def pass_names(self) -> list[str]:
        names: list[str] = []
        for s in self._stages:
            names.extend(s.names if isinstance(s, _Upstream) else [s.instance.name])
        return names

    # ----------------------------------------------------------------------------- running
    def run(self, module: Any, engine: DiagnosticEngine, *, print_ir_after_all: bool = False,
            print_debuginfo: bool = False, ir_stream: TextIO | None = None) -> bool:
        """Run on ``module`` (an ``ir.Module`` or its operation).  False on failure, with the
        reasons recorded in ``engine``."""
        op = getattr(module, "operation", module)
        if op.name != self.root_anchor:
            engine.record(Diagnostic(
                "error", f"pipeline is anchored on '{self.root_anchor}' but the input's top-level "
                f"op is '{op.name}'", *location_of(op)))
            return False
        stream = ir_stream or sys.stderr
        with self.ctx, engine.activate(), engine.capture(self.ctx):
            for stage in self._stages:
                if isinstance(stage, _Upstream):
                    groups = ([_Upstream(stage.path, [t], [n]) for t, n in
                               zip(stage.texts, stage.names)] if print_ir_after_all else [stage])
                    for g in groups:
                        if not self._run_upstream(g, op, engine):
                            return False
                        if print_ir_after_all:
                            _dump(stream, g.names[0], op, print_debuginfo)
                else:
                    if not self._run_python(stage, op, engine):
                        return False
                    if print_ir_after_all:
                        _dump(stream, stage.instance.name, op, print_debuginfo)
        return True

    def _run_upstream(self, stage: _Upstream, op: Any, engine: DiagnosticEngine) -> bool:
        pm = J.PassManager.parse(stage.pipeline(self.root_anchor))
        try:
            pm.run(op)
        except J.MLIRError as err:
            engine.add_mlir_error(err)
            if not engine.has_errors:
                engine.record(Diagnostic("error", f"pass pipeline '{','.join(stage.names)}' "
                                         "failed", *location_of(op)))
            return False
        return True

    def _run_python(self, stage: _Python, root: Any, engine: DiagnosticEngine) -> bool:
        inst = stage.instance
        before = len(engine.diagnostics)
        for target in _anchored(root, stage.path):
            try:
                inst.run(target)
            except PassFailure:
                if not engine.has_errors:
                    engine.record(Diagnostic("error", f"pass '{inst.name}' failed",
                                             *location_of(target)))
                return False
            except Exception as exc:  # noqa: BLE001 - a bug, reported as a diagnostic
                where = location_of(target)
                engine.record(Diagnostic(
                    "error", f"internal error in pass '{inst.name}': {type(exc).__name__}: "
                    f"{exc} (set MXLOWER_DEBUG=1 for a traceback)", *where))
                if os.environ.get("MXLOWER_DEBUG"):
                    traceback.print_exc()
                return False
        if any(d.severity == "error" for d in engine.diagnostics[before:]):
            return False  # a pass reported errors and carried on: still a failure
        if not root.verify():
            engine.record(Diagnostic("error", f"pass '{inst.name}' produced IR that does not "
                                     "verify", *location_of(root)))
            return False
        return True


def _anchored(root: Any, path: tuple[str, ...]):
    ops = [root]
    for anchor in path:
        nxt = []
        for op in ops:
            for region in op.regions:
                for block in region.blocks:
                    for child in block.operations:
                        if anchor in ("any", child.operation.name):
                            nxt.append(child.operation)
        ops = nxt
    return ops


def _options_of(text: str) -> str:
    i = text.find("{")
    return text[i + 1:-1].strip() if i >= 0 else ""


def _render_full(e) -> str:
    if isinstance(e, Nested):
        return f"{e.anchor}(" + ", ".join(_render_full(x) for x in e.elements) + ")"
    opts = " ".join(e.options.split())
    return e.name + ("{" + opts + "}" if opts else "")


def _dump(stream: TextIO, name: str, op: Any, debuginfo: bool) -> None:
    stream.write(f"// -----// IR Dump After {name} ({name}) //----- //\n")
    stream.write(op.get_asm(enable_debug_info=debuginfo))
    stream.write("\n")
    stream.flush()


def run_pipeline(module: Any, pipeline: str, *, ctx: Any | None = None,
                 engine: DiagnosticEngine | None = None) -> DiagnosticEngine:
    """Library entry: run ``pipeline`` on ``module`` in place; raise on failure.

    Raises :class:`PipelineError` for a bad pipeline and :class:`PassFailure` (its diagnostics in
    the returned engine's list, also attached as ``.diagnostics``) when a pass fails.
    """
    ctx = ctx or module.context
    engine = engine or DiagnosticEngine()
    pipe = PassPipeline.parse(pipeline, ctx)
    if not pipe.run(module, engine):
        errors = [d for d in engine.diagnostics if d.severity == "error"]
        exc = PassFailure(errors[0] if errors else None)
        exc.diagnostics = engine.diagnostics  # type: ignore[attr-defined]
        raise exc
    return engine
