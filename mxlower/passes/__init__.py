"""mxlower's pass and pipeline registry.

Passes and named pipelines are registered by name with the ``module:Class`` that implements
them, and imported on first use, so ``mxlower-opt --help`` does not import every pass.  One pass
per file, each named ``mxlower-...``; each has ``test/lit/<area>/<name>.mlir``.  The registry
knows names only: running passes is :mod:`mxlower.pipeline.manager`'s job (layer 4), which
imports this module, never the other way round.
"""

from __future__ import annotations

import difflib
import importlib

from mxlower.passes.base import ModulePass, OptionError, Pipeline, option

__all__ = [
    "ModulePass",
    "OptionError",
    "PASSES",
    "PIPELINES",
    "Pipeline",
    "UPSTREAM_PASS_NAMES",
    "all_names",
    "get",
    "option",
    "register",
    "registry_unknown_flag_hint",
    "suggest",
]

#: pass name -> "module:Class"
PASSES: dict[str, str] = {
    "mxlower-pack-subbyte-args": "mxlower.passes.pack_subbyte_args:PackSubbyteArgs",
    "mxlower-lower-narrow-floats-to-nvvm":
        "mxlower.passes.lower_narrow_floats_to_nvvm:LowerNarrowFloatsToNVVM",
    "mxlower-test-diagnostics": "mxlower.passes.test_diagnostics:TestDiagnostics",
    "mxlower-expand-narrow-floats": "mxlower.passes.expand_narrow_floats:ExpandNarrowFloats",
    "mxlower-legalize-xla-mx": "mxlower.passes.legalize_xla_mx:LegalizeXlaMx",
    "mxlower-decompose-mx": "mxlower.passes.decompose_mx:DecomposeMx",
    "mxlower-verify-mx": "mxlower.passes.verify_mx:VerifyMx",
    "mxlower-lower-narrow-floats-to-llvm": "mxlower.passes.lower_narrow_floats_to_llvm:LowerNarrowFloatsToLLVM",
    "mxlower-widen-bool-memrefs": "mxlower.passes.widen_bool_memrefs:WidenBoolMemrefs",
    "mxlower-lower-dot-kernels": "mxlower.passes.lower_dot_kernels:LowerDotKernels",
    "mxlower-scaled-dot-to-kernel": "mxlower.passes.scaled_dot_to_kernel:ScaledDotToKernel",
    "mxlower-unsigned-to-signless": "mxlower.passes.unsigned_to_signless:UnsignedToSignless",
    "mxlower-stablehlo-control-flow-to-scf":
        "mxlower.passes.stablehlo_control_flow_to_scf:StablehloControlFlowToScf",
}

#: named pipeline -> "module:Class"
PIPELINES: dict[str, str] = {
    "mxlower-gpu-to-nvvm": "mxlower.passes.nvvm_pipelines:GpuToNVVM",
    "mxlower-mx-to-stablehlo": "mxlower.passes.pipelines:MxToStablehlo",
    "mxlower-stablehlo-to-llvm": "mxlower.passes.llvm_pipelines:StablehloToLLVM",
}

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

_loaded: dict[str, type] = {}


def register(name: str, target: str, *, pipeline: bool = False) -> None:
    """Register a pass (or a pipeline) implemented by ``target`` = ``"module:Class"``."""
    (PIPELINES if pipeline else PASSES)[name] = target
    _loaded.pop(name, None)


def get(name: str) -> type[ModulePass] | type[Pipeline] | None:
    """The class registered under ``name`` (a pass or a pipeline), or None."""
    if name in _loaded:
        return _loaded[name]
    target = PASSES.get(name) or PIPELINES.get(name)
    if target is None:
        return None
    mod, _, cls = target.partition(":")
    obj = getattr(importlib.import_module(mod), cls)
    if obj.name != name:
        raise RuntimeError(f"{target} is registered as '{name}' but names itself '{obj.name}'")
    _loaded[name] = obj
    return obj


def all_names() -> list[str]:
    """Every registered pass and named pipeline, sorted."""
    return sorted([*PASSES, *PIPELINES])


def suggest(name: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Close matches for a misspelt pass name among mxlower's and ``extra`` names."""
    pool = [n for n in dict.fromkeys([*all_names(), *extra]) if n != name]
    return difflib.get_close_matches(name, pool, n=3, cutoff=0.6)


def registry_unknown_flag_hint(name: str) -> str:
    """'; did you mean ...' for an unknown command-line flag that may be a misspelt pass."""
    hint = suggest(name, UPSTREAM_PASS_NAMES)
    return "; did you mean " + " or ".join(f"'--{h}'" for h in hint) + "?" if hint else ""
