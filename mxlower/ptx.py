"""Compatibility: :mod:`mxlower.execution.ptx` (PTX assembly) under its old name."""

from mxlower.execution.ptx import (NVPTX_TRIPLE, ToolError, assemble, compile_ptx,
                                   default_ptx_version, device_module, ptxas_path,
                                   translate_to_llvmir)

__all__ = ["NVPTX_TRIPLE", "ToolError", "assemble", "compile_ptx", "default_ptx_version",
           "device_module", "ptxas_path", "translate_to_llvmir"]
