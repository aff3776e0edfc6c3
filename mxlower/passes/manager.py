"""Compatibility: the pass manager moved to :mod:`mxlower.pipeline.manager` (layer 4 of
docs/architecture.md).  ``from mxlower.passes.manager import run_pipeline`` keeps working."""

from mxlower.pipeline.manager import (UPSTREAM_PASS_NAMES, PassPipeline, cached_pipeline,
                                      run_pipeline)

__all__ = ["PassPipeline", "UPSTREAM_PASS_NAMES", "cached_pipeline", "run_pipeline"]
