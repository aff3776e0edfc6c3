"""Compatibility module: the PTX ``cvt`` model now lives in :mod:`mxlower.lowering.nvvm_model`.

Library code imports :mod:`mxlower.lowering.nvvm_model`.
"""

from mxlower.lowering.nvvm_model import *  # noqa: F403
from mxlower.lowering.nvvm_model import __all__  # noqa: F401
