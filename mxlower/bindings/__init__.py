"""The only modules that import MLIR Python bindings: one per binding stack.

* :mod:`mxlower.bindings.jaxlib` -- jaxlib's MLIR (StableHLO, CHLO, func, arith, ...).
* :mod:`mxlower.bindings.upstream` -- upstream MLIR 22 from the xtc wheels (LLVM, NVVM,
  ExecutionEngine, translation to LLVM IR).

The two stacks share no objects: hand modules across as text.  A version bump of either stack
touches one file here.
"""
