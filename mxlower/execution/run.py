"""Running one function of a StableHLO module: the library behind ``mxlower-run``.

::

    outs = run_module(text, [x, k], pipeline="builtin.module(mxlower-mx-to-stablehlo)")

:func:`prepare` parses and verifies the module, runs the pipeline and makes the chosen function
the module's ``@main``; :func:`make_static` gives a ``@main`` with dynamic dimensions the shapes
of its inputs; :func:`execute` runs it on a backend (:mod:`mxlower.execution.backends`), in a
child process when a time limit is given.  Bad input is a :class:`RunError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mxlower import types
from mxlower.bindings import collect_ops
from mxlower.bindings import jaxlib as J
from mxlower.diagnostics import DiagnosticEngine, PassFailure
import mxlower.execution.backends as backends
import mxlower.execution.isolated as isolated
from mxlower.execution.arrays import check_inputs, random_inputs
from mxlower.execution.backends import BACKENDS
from mxlower.execution.errors import RunError
from mxlower.ir.signature import Signature, TensorSpec, functions, read_signature
from mxlower.ir.source import check_dialects, check_resources, parse_module
from mxlower.pipeline.manager import PassPipeline, run_pipeline
from mxlower.pipeline.parser import PipelineError

__all__ = ["BACKENDS", "RunError", "execute", "make_static", "prepare", "run_module",
           "select_function"]


def _check_spec(spec: TensorSpec, what: str) -> None:
    if not spec.is_tensor:
        raise RunError(f"{what} has type {spec.type}; only ranked tensors can be run")
    t = types.SCALARS.get(spec.element)
    if t is None or t.kind == "index":
        known = ", ".join(n for n, s in types.SCALARS.items() if s.kind != "index")
        raise RunError(f"{what} has element type {spec.element}, which mxlower-run cannot "
                       f"exchange (supported: {known})")


def select_function(module: Any, name: str) -> Signature:
    """Make ``@name`` the module's public ``@main`` (what XLA and the interpreter run; a
    ``@main`` already there is renamed) and return its signature, named ``name``; only ranked
    tensors of the type table's element types can be exchanged."""
    funcs = functions(module)
    if name not in funcs:
        known = ", ".join(f"@{f}" for f in funcs) or "none"
        raise RunError(f"no function @{name} in the module (functions: {known})")
    fn = funcs[name]
    ir = J.ir
    with module.context:
        if name != "main":
            if "main" in funcs:
                ir.SymbolTable.set_symbol_name(funcs["main"], "__mxlower_run_main")
                ir.SymbolTable.replace_all_symbol_uses("main", "__mxlower_run_main", module)
            ir.SymbolTable.set_symbol_name(fn, "main")
            ir.SymbolTable.replace_all_symbol_uses(name, "main", module)
        if "sym_visibility" in fn.attributes:
            del fn.attributes["sym_visibility"]
    sig = read_signature(fn)
    for i, spec in enumerate(sig.args):
        _check_spec(spec, f"argument #{i} of @{name}")
    for i, spec in enumerate(sig.results):
        _check_spec(spec, f"result #{i} of @{name}")
    return Signature(name, sig.args, sig.results)


def make_static(module: Any, sig: Signature, arrays: list[np.ndarray]) -> Signature:
    """Give ``@main`` the static argument types of ``arrays`` and refine the shapes inside
    (``stablehlo-refine-arguments``, ``stablehlo-refine-shapes``,
    ``stablehlo-canonicalize-dynamism``, and ``stablehlo-check-shape-assertions`` for the
    ``shape_assertion`` custom calls of a ``jax.export`` module: what JAX does when it calls a
    shape-polymorphic export), so that a module with dynamic dimensions runs on every
    backend.  Returns the static signature; a module already static is left alone."""
    if not any(spec.is_dynamic for spec in sig.args + sig.results):
        return sig
    static_types = ",".join(spec.tensor_type(a.shape) for a, spec in zip(arrays, sig.args))
    try:
        run_pipeline(module, f"builtin.module(stablehlo-refine-arguments{{types={static_types}}}"
                     ", stablehlo-refine-shapes, func.func(stablehlo-canonicalize-dynamism, "
                     "stablehlo-check-shape-assertions))")
    except PassFailure as e:
        raise RunError(f"cannot make @{sig.name} static for the inputs' shapes "
                       f"({static_types}): {e}") from None
    static = select_function(module, "main")
    left = [i for i, spec in enumerate(static.results) if spec.is_dynamic]
    if left:
        raise RunError(f"the shapes of result(s) {', '.join(f'#{i}' for i in left)} of "
                       f"@{sig.name} stay dynamic after shape refinement")
    return Signature(sig.name, static.args, static.results)


def _leftover_ops(module: Any) -> list[str]:
    found = collect_ops(module, lambda o: o.name.startswith("mx."))
    return list(dict.fromkeys(o.name for o in found))


def prepare(module: Any, engine: DiagnosticEngine, *, name: str = "<module>",
            pipeline: str | None = None, function: str = "main") -> tuple[Any, Signature] | None:
    """Parse (``module`` as text; an ``ir`` module or operation is taken as it is), verify,
    run ``pipeline`` and select ``function``: the one path of the command line and of
    :func:`run_module`.

    Returns None when ``engine`` holds the reasons (parse, verify or pass diagnostics); raises
    ``PipelineError`` for a malformed pipeline and :class:`RunError` for a pipeline that leaves
    StableHLO, an unknown function or ops that no backend runs."""
    text = isinstance(module, str)
    op = None if text else getattr(module, "operation", module)
    ctx = J.make_context(allow_unregistered=True) if text else op.context
    passes = PassPipeline.parse(pipeline, ctx) if pipeline else None  # its errors come first
    if text:
        op = parse_module(module, name, ctx, engine, J.ir)
        if op is None or not check_dialects(op, ctx, engine, False):
            return None
    with ctx, engine.capture(ctx):
        try:
            if not op.verify():
                return None
        except J.MLIRError as e:  # verify() raises with these bindings
            engine.add_mlir_error(e)
            return None
        if not check_resources(op, engine):  # no backend runs a constant without its data
            return None
    if passes is not None:
        if passes.ends_upstream:
            raise RunError("the pipeline hands the module to upstream MLIR; mxlower-run takes "
                           "StableHLO (for the LLVM path use --backend=llvm, which lowers it)")
        if passes.run(op, engine) is None:
            return None
    sig = select_function(op, function)
    left = _leftover_ops(op)
    if left:
        raise RunError(f"the module still contains {', '.join(left)} ops, which no backend "
                       "runs; lower them first, e.g. with the pipeline "
                       "'builtin.module(mxlower-mx-to-stablehlo)'")
    return op, sig


def execute(op: Any, sig: Signature, arrays: list[np.ndarray], backend: str,
            filename: str = "<module>", timeout: float | None = None) -> list[np.ndarray]:
    """Run the prepared, static module on ``backend``; with ``timeout`` (seconds) in a child
    process that is stopped when compiling and running take longer.  StableHLO's interpreter
    always runs in a child process (it aborts on ops it cannot run)."""
    if backend not in BACKENDS:
        raise RunError(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
    if timeout is not None or backend == "interpreter":
        return isolated.execute(op, sig, arrays, backend, filename, timeout)
    return backends.execute(op, sig, arrays, backend, filename)


def run_module(module: Any, inputs: Sequence[np.ndarray] | None = None, *,
               pipeline: str | None = None, function: str = "main", seed: int = 0,
               backend: str = "xla", timeout: float | None = None) -> list[np.ndarray]:
    """Library entry: run ``function`` of ``module`` (text or an ``ir`` module/operation in a
    context that allows unregistered ops) after ``pipeline``; NumPy in, NumPy out.  Random
    inputs (seeded by ``seed``) when ``inputs`` is None; ``timeout``: see :func:`execute`.

    Raises :class:`RunError` for bad input, a failing pipeline (the message holds the
    diagnostics, with their source lines when ``module`` is text) and backend failures."""
    engine = DiagnosticEngine()
    try:
        prepared = prepare(module, engine, pipeline=pipeline, function=function)
    except PipelineError as e:
        raise RunError(e.format()) from None
    if prepared is None:
        sources = {"<module>": module.splitlines()} if isinstance(module, str) else {}
        raise RunError("\n".join(d.format(sources) for d in engine.diagnostics)
                       or "the module does not verify")
    op, sig = prepared
    arrays = (random_inputs(sig, seed) if inputs is None
              else check_inputs(sig, [(f"input #{i}", np.asarray(a)) for i, a in
                                      enumerate(inputs)]))
    return execute(op, make_static(op, sig, arrays), arrays, backend, timeout=timeout)
