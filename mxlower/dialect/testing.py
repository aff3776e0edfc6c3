"""Compatibility: :mod:`mxlower.testing` (the mx test and benchmark harness) under its old name."""

from mxlower.testing import (BLOCK_KINDS, MxModule, Value, refine_for_inputs, special_blocks,
                             tensor_type)

__all__ = ["BLOCK_KINDS", "MxModule", "Value", "refine_for_inputs", "special_blocks",
           "tensor_type"]
