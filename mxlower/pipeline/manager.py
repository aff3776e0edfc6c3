"""The adapter between mxlower's Python passes and the MLIR PassManagers of both stacks.

This is the only code that drives a ``PassManager``.  A textual pipeline mixing mxlower passes,
mxlower named pipelines and any registered MLIR pass is parsed, named pipelines are expanded, and
the result is compiled into stages: runs of MLIR passes become one ``PassManager``, and each
mxlower pass runs in Python on every op its nesting anchors it to.

Two stacks: a pipeline starts on jaxlib's MLIR (StableHLO).  A pass that only upstream MLIR has
(``one-shot-bufferize``, ``convert-to-llvm``, ...) or an mxlower pass declaring
``stack = "upstream"`` hands the module over to upstream MLIR as text (locations kept), and the
rest of the pipeline runs there.  Passes are looked up in the stack the module is on at that
point, so ``stablehlo-legalize-to-linalg`` must come before the hand-over.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import sys
import traceback
from typing import Any, TextIO

from mxlower import passes as registry
from mxlower.bindings import collect_ops
from mxlower.bindings import jaxlib as J
from mxlower.bindings import upstream
from mxlower.diagnostics import Diagnostic, DiagnosticEngine, PassFailure, location_of
from mxlower.ir.source import check_resources
from mxlower.lowering import xla_mx
from mxlower.passes import UPSTREAM_PASS_NAMES
from mxlower.passes.base import ModulePass, OptionError, Pipeline
from mxlower.pipeline.parser import Nested, PassRef, PipelineError, parse_elements, parse_pipeline

__all__ = ["PassPipeline", "UPSTREAM_PASS_NAMES", "cached_pipeline", "run_pipeline"]

_MAX_EXPANSION_DEPTH = 16

#: The largest vector (elements) handed to upstream MLIR: LLVM's lowering of a vector type
#: with 2^32 or more elements aborts the process ("SmallVector unable to grow"); no real
#: program has vectors anywhere near this size.
MAX_VECTOR_ELEMENTS = 1 << 24

_VECTOR = re.compile(r"vector<((?:\[?\d+\]?x)+)")


def _lowering_hint(op: Any) -> str:
    """What to run before handing ``op`` to upstream MLIR: MX ops (``mx.*``, XLA's MX custom
    calls, JAX's ``xla.scaled_dot`` composite) need mxlower-mx-to-stablehlo, which no StableHLO
    lowering replaces; plain StableHLO needs the LLVM pipeline's StableHLO -> linalg step."""
    mx_ops = collect_ops(op, lambda o: o.name.startswith("mx.") or xla_mx.is_mx_form(o))
    if mx_ops:
        return ("it has MX ops: run mxlower-mx-to-stablehlo first, e.g. "
                "'builtin.module(mxlower-mx-to-stablehlo, mxlower-stablehlo-to-llvm)'")
    return ("lower them first: use the pipeline mxlower-stablehlo-to-llvm, or put "
            "stablehlo-legalize-to-linalg before this pass")


def _huge_vector(text: str) -> tuple[str, int] | None:
    """The first vector type in ``text`` with more than MAX_VECTOR_ELEMENTS elements (its
    spelling up to the element type, and its element count), or None."""
    for m in _VECTOR.finditer(text):
        count = 1
        for d in re.findall(r"\d+", m.group(1)):
            count *= int(d)
        if count > MAX_VECTOR_ELEMENTS:
            return m.group(0) + "...>", count
    return None


def _first_user(root: Any, vtype: str) -> Any | None:
    """The first op (walk order) whose text names the type ``vtype`` (for the location)."""
    head = vtype[:-4]  # without the "...>"
    for o in collect_ops(root, pre_order=True):
        if o is not root and any(head in str(v.type) for v in (*o.operands, *o.results)):
            return o
    return None


JAXLIB, UPSTREAM = "jaxlib", "upstream"


@dataclasses.dataclass
class _Upstream:
    path: tuple[str, ...]  # anchors below the root, e.g. ("func.func",)
    texts: list[str]  # the elements as MLIR prints them (full options)
    names: list[str]
    stack: str = JAXLIB

    def pipeline(self, root: str) -> str:
        body = ",".join(self.texts)
        for anchor in reversed(self.path):
            body = f"{anchor}({body})"
        return f"{root}({body})"


@dataclasses.dataclass
class _Python:
    path: tuple[str, ...]
    instance: ModulePass

    @property
    def stack(self) -> str:
        return getattr(self.instance, "stack", JAXLIB)


class PassPipeline:
    """A parsed, expanded and validated pass pipeline, ready to run on modules of a context."""

    def __init__(self, root: Nested, ctx: Any, text: str):
        self.ctx = ctx
        self.text = text
        self.root_anchor = root.anchor
        self._tree: Nested = Nested(root.anchor, [], root.pos)
        self._stages: list[_Upstream | _Python] = []
        self._stack = JAXLIB  # the stack the module is on at the point being compiled
        self._handed_over_by = ""
        self._upstream_ctx: Any = None
        self._pass_managers: dict[str, Any] = {}
        self._expand(root.elements, (), self._tree.elements, 0)

    @property
    def upstream_context(self) -> Any:
        """The upstream MLIR context modules are handed to (created on first need)."""
        if self._upstream_ctx is None:
            self._upstream_ctx = upstream.context()
        return self._upstream_ctx

    def _pass_manager_class(self, stack: str) -> Any:
        if stack == JAXLIB:
            return J.PassManager
        return upstream.module("passmanager").PassManager

    def _context(self, stack: str) -> Any:
        return self.ctx if stack == JAXLIB else self.upstream_context

    def _switch_to_upstream(self, by: str, pos: int) -> None:
        if self._stack == UPSTREAM:
            return
        if not upstream.available():
            raise self._error(f"pass '{by}' needs upstream MLIR (the xtc-mlir-python-bindings "
                              "wheel), which is not installed", pos)
        self._stack = UPSTREAM
        self._handed_over_by = by

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
            if path and cls.module_only:
                raise self._error(
                    f"'{e.name}' runs on the module, not nested under '{path[-1]}' "
                    f"({cls.module_only}): write {self.root_anchor}({e.name})", e.pos)
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
                _point_at(inner, e.pos)  # errors inside it point at the pipeline's name
                self._expand(inner, path, out, depth + 1)
            else:
                stack = getattr(inst, "stack", JAXLIB)
                if stack == UPSTREAM:
                    self._switch_to_upstream(e.name, e.pos)
                elif self._stack == UPSTREAM:
                    raise self._error(
                        f"pass '{e.name}' runs on jaxlib's StableHLO stack, but the module was "
                        f"already handed to upstream MLIR by '{self._handed_over_by}'", e.pos)
                out.append(PassRef(e.name, inst.option_string()[1:-1], e.pos))
                self._stages.append(_Python(path, inst))

    def _probe(self, stack: str, pipeline: str) -> str:
        with self._context(stack):
            return str(self._pass_manager_class(stack).parse(pipeline))

    def _add_upstream(self, e: PassRef, path, out) -> None:
        text = e.name + ("{" + e.options + "}" if e.options else "")
        probe = _Upstream(path, [text], [e.name]).pipeline(self.root_anchor)
        try:
            try:
                printed = self._probe(self._stack, probe)
            except (ValueError, Exception) as err:
                if (self._stack != JAXLIB or "does not refer to a registered pass" not in str(err)
                        or not upstream.available()):
                    raise
                try:  # a pass only upstream MLIR has: the module is handed over here
                    printed = self._probe(UPSTREAM, probe)
                except Exception:  # noqa: BLE001 - report jaxlib's message
                    raise err from None
                self._switch_to_upstream(e.name, e.pos)
        except Exception as err:  # noqa: BLE001 - both stacks raise ValueError or MLIRError
            msg = str(err).strip()
            if "does not refer to a registered pass" in msg:
                hint = registry.suggest(e.name, UPSTREAM_PASS_NAMES)
                did = "; did you mean " + " or ".join(f"'{h}'" for h in hint) + "?" if hint else ""
                where = ("" if self._stack == JAXLIB else
                         f" in upstream MLIR (the module was handed over by "
                         f"'{self._handed_over_by}')")
                raise self._error(f"unknown pass '{e.name}'{where}{did}", e.pos) from None
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
        if isinstance(last, _Upstream) and last.path == path and last.stack == self._stack:
            last.texts.append(inner)
            last.names.append(e.name)
        else:
            self._stages.append(_Upstream(path, [inner], [e.name], self._stack))

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
    @property
    def ends_upstream(self) -> bool:
        """Whether the pipeline hands the module over to upstream MLIR."""
        return self._stack == UPSTREAM

    def run(self, module: Any, engine: DiagnosticEngine, *, print_ir_after_all: bool = False,
            print_debuginfo: bool = False, ir_stream: TextIO | None = None) -> Any | None:
        """Run on ``module`` (an ``ir.Module`` or its operation, jaxlib stack).

        Returns the resulting module operation -- the same one, transformed in place, unless the
        pipeline handed the module to upstream MLIR -- or None on failure, with the reasons
        recorded in ``engine``.
        """
        op = getattr(module, "operation", module)
        if op.name != self.root_anchor:
            engine.record(Diagnostic(
                "error", f"pipeline is anchored on '{self.root_anchor}' but the input's top-level "
                f"op is '{op.name}'", *location_of(op)))
            return None
        stream = ir_stream or sys.stderr
        stack = JAXLIB
        with engine.activate():
            for stage in self._stages:
                if stage.stack != stack:
                    op = self._hand_over(op, stage, engine)
                    if op is None:
                        return None
                    stack = stage.stack
                ctx = self._context(stack)
                with ctx, engine.capture(ctx):
                    if isinstance(stage, _Upstream):
                        groups = ([_Upstream(stage.path, [t], [n], stage.stack) for t, n in
                                   zip(stage.texts, stage.names)]
                                  if print_ir_after_all else [stage])
                        for g in groups:
                            if not self._run_upstream(g, op, engine):
                                return None
                            if print_ir_after_all:
                                _dump(stream, g.names[0], op, print_debuginfo)
                    else:
                        if not self._run_python(stage, op, engine):
                            return None
                        if print_ir_after_all:
                            _dump(stream, stage.instance.name, op, print_debuginfo)
        return op

    def _hand_over(self, op: Any, stage: Any, engine: DiagnosticEngine) -> Any | None:
        """Re-create a jaxlib module in the upstream context, through text with locations."""
        upstream_ir = upstream.module("ir")
        name = stage.names[0] if isinstance(stage, _Upstream) else stage.instance.name
        if not check_resources(op, engine, empty="upstream MLIR"):
            return None
        text = op.get_asm(enable_debug_info=True)
        huge = _huge_vector(text)
        if huge is not None:
            vtype, count = huge
            engine.record(Diagnostic(
                "error", f"{vtype} has {count} elements; mxlower hands upstream MLIR vectors of "
                f"at most {MAX_VECTOR_ELEMENTS} elements (its LLVM lowering aborts the process "
                "on vectors of 2^32 or more)", *location_of(_first_user(op, vtype) or op)))
            return None
        ctx = self.upstream_context
        try:
            with ctx:
                return upstream_ir.Module.parse(text).operation
        except upstream_ir.MLIRError as err:
            foreign = sorted({m.group(1) for m in re.finditer(
                r"^\s*(?:%[^=]*=\s*)?\"?([a-z_][\w]*\.[\w.]+)", text, re.M)
                if m.group(1).split(".")[0] in ("stablehlo", "chlo", "mhlo", "sdy", "mx")})
            detail = (f"it still holds ops upstream MLIR does not know ({', '.join(foreign[:4])}); "
                      f"{_lowering_hint(op)}"
                      if foreign else "; ".join(d.message for d in
                                                map(engine.from_mlir, err.error_diagnostics)))
            engine.record(Diagnostic(
                "error", f"cannot hand the module to upstream MLIR for pass '{name}': {detail}",
                *location_of(op)))
            return None

    def _run_upstream(self, stage: _Upstream, op: Any, engine: DiagnosticEngine) -> bool:
        text = stage.pipeline(self.root_anchor)
        pm = self._pass_managers.get(text)  # a PassManager can run again: parse it once
        if pm is None:
            pm = self._pass_managers[text] = self._pass_manager_class(stage.stack).parse(text)
        try:
            pm.run(op)
        except Exception as err:  # noqa: BLE001 - MLIRError of either stack
            if not hasattr(err, "error_diagnostics"):
                raise
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
        try:
            valid = root.verify()
        except Exception as err:  # noqa: BLE001 - upstream bindings raise MLIRError instead
            if not hasattr(err, "error_diagnostics"):
                raise
            engine.add_mlir_error(err)
            valid = False
        if not valid:
            engine.record(Diagnostic("error", f"pass '{inst.name}' produced IR that does not "
                                     "verify", *location_of(root)))
            return False
        return True


def _point_at(elements, pos: int) -> None:
    for e in elements:
        e.pos = pos
        if isinstance(e, Nested):
            _point_at(e.elements, pos)


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


_CACHE: collections.OrderedDict[tuple[int, str], PassPipeline] = collections.OrderedDict()
_CACHE_SIZE = 16


def cached_pipeline(text: str, ctx: Any) -> PassPipeline:
    """``PassPipeline.parse(text, ctx)``, remembered for the last few (context, text) pairs.

    Library callers that run the same pipeline many times in one context (``mxlower.jax``
    lowers every primitive call through a pipeline) skip re-parsing and re-validating it.  The
    cache holds its contexts alive, so their ids cannot be reused while cached.
    """
    key = (id(ctx), text)
    pipe = _CACHE.get(key)
    if pipe is not None and pipe.ctx is ctx:
        _CACHE.move_to_end(key)
        return pipe
    pipe = PassPipeline.parse(text, ctx)
    _CACHE[key] = pipe
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return pipe


def run_pipeline(module: Any, pipeline: str, *, ctx: Any | None = None,
                 engine: DiagnosticEngine | None = None) -> Any:
    """Library entry: run ``pipeline`` on ``module`` (in place); return the resulting module op.

    The result is ``module``'s operation unless the pipeline hands the module to upstream MLIR,
    in which case it is a new upstream module.  Raises :class:`PipelineError` for a bad pipeline
    and :class:`PassFailure` (all diagnostics attached as ``.diagnostics``) when a pass fails.
    """
    ctx = ctx or module.context
    engine = engine or DiagnosticEngine()
    pipe = cached_pipeline(pipeline, ctx)
    result = pipe.run(module, engine)
    if result is None:
        errors = [d for d in engine.diagnostics if d.severity == "error"]
        exc = PassFailure(errors[0] if errors else None)
        exc.diagnostics = engine.diagnostics  # type: ignore[attr-defined]
        raise exc
    return result
