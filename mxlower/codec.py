"""Compatibility module: the narrow-float codec now lives in :mod:`mxlower.lowering.codec`
(its StableHLO builder in :mod:`mxlower.lowering.codec_stablehlo`).

``from mxlower import codec`` keeps working for scripts, the README and the benchmarks (it
loads jaxlib's MLIR for the StableHLO builder); library code imports the modules above.
"""

from mxlower.lowering.codec import *  # noqa: F403
from mxlower.lowering.codec import __all__ as _CODEC
from mxlower.lowering.codec_stablehlo import StableHLOBuilder

__all__ = [*_CODEC, "StableHLOBuilder"]
