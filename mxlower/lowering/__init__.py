"""Lowering recipes (layer 2 of docs/architecture.md): the MX math, the narrow-float codec,
the decoding of XLA's MX custom calls, NVVM planning and the hardware cvt model.  Passes call
these; a recipe never imports a pass."""
