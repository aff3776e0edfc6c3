"""MLIR text to the LLVM dialect, with the signatures of its public functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mxlower.bindings import collect_ops, upstream
from mxlower.bindings import jaxlib as J
from mxlower.diagnostics import DiagnosticEngine, PassFailure, location_of
from mxlower.execution.llvm.errors import CompileError
from mxlower.ir.signature import Signature, public_signatures
from mxlower.ir.source import parse_module
from mxlower.pipeline.manager import run_pipeline
from mxlower.pipeline.parser import PipelineError

__all__ = ["default_pipeline", "lower"]


def default_pipeline(*, out_params: bool, vector_width: int, from_stablehlo: bool) -> str:
    """``mxlower-stablehlo-to-llvm`` with these options (StableHLO legalization skipped for
    input in upstream dialects only)."""
    opts = [f"out-params={'true' if out_params else 'false'}", f"vector-width={vector_width}"]
    if not from_stablehlo:
        opts.append("legalize-stablehlo=false")
    return f"builtin.module(mxlower-stablehlo-to-llvm{{{' '.join(opts)}}})"


def _format_diagnostics(diags: Sequence[Any], text: str, filename: str) -> str:
    """The diagnostics with the lines of ``text`` quoted where they point into it."""
    srcs = {filename: text.splitlines(keepends=True)}
    return "\n".join(d.format(srcs) for d in diags) or "unknown error"


def lower(text: str, *, pipeline: str | None = None, out_params: bool = False,
          vector_width: int = 0, filename: str = "<input>") -> tuple[str, dict[str, Signature]]:
    """Lower MLIR text to the LLVM dialect in this process: (LLVM-dialect text, signatures).

    Runs in-process: prefer :func:`mxlower.execution.llvm.compile` (isolated) for untrusted
    input.  Inputs jaxlib's MLIR cannot parse (upstream-only dialects) are parsed by upstream
    MLIR and skip the StableHLO legalization.
    """
    ctx = J.make_context()
    engine = DiagnosticEngine()
    module = parse_module(text, filename, ctx, DiagnosticEngine(), J.ir)
    from_stablehlo = module is not None
    if module is None:  # upstream-only dialects: parse there (its errors are the ones to show)
        module = parse_module(text, filename, upstream.context(), engine, upstream.module("ir"))
        if module is None:
            raise CompileError("cannot parse the module:\n" +
                               _format_diagnostics(engine.diagnostics, text, filename))
    sigs = public_signatures(module)
    if out_params:
        sigs = {name: sig.with_out_params() for name, sig in sigs.items()}
    pipe = pipeline or default_pipeline(out_params=out_params, vector_width=vector_width,
                                        from_stablehlo=from_stablehlo)
    try:
        result = run_pipeline(module, pipe, ctx=ctx, engine=engine)
    except PipelineError as err:
        raise CompileError(err.format()) from None
    except PassFailure as err:
        diags = getattr(err, "diagnostics", None) or engine.diagnostics
        errors = [d for d in diags if d.severity == "error"] or list(diags)
        raise CompileError("lowering to LLVM failed:\n" +
                           _format_diagnostics(errors, text, filename)) from None
    leftover = non_llvm_ops(result)
    if leftover:
        raise CompileError("the pipeline did not lower everything to the LLVM dialect; left: "
                           + ", ".join(leftover))
    return result.get_asm(enable_debug_info=False), sigs


def non_llvm_ops(module_op: Any) -> list[str]:
    """``'op.name' (file:line:col)`` for every op outside the LLVM dialect nested in
    ``module_op`` (the first of each name)."""
    seen: dict[str, str] = {}
    for op in collect_ops(module_op, pre_order=True)[1:]:
        if not op.name.startswith("llvm.") and op.name not in seen:
            f, line, col = location_of(op)
            seen[op.name] = f"'{op.name}'" + (f" ({f}:{line}:{col})" if f else "")
    return list(seen.values())
