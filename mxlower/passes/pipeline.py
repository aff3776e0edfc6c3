"""Compatibility: the pass-pipeline parser moved to :mod:`mxlower.pipeline.parser` (layer 4 of
docs/architecture.md)."""

from mxlower.pipeline.parser import (Nested, PassRef, PipelineError, parse_elements,
                                     parse_pipeline, render)

__all__ = ["Nested", "PassRef", "PipelineError", "parse_elements", "parse_pipeline", "render"]
