"""``mxlower-verify-mx``: the verifier of mxlower's ``mx`` ops, as a pass."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower.dialect.mx import verify_or_fail
from mxlower.passes.base import ModulePass

__all__ = ["VerifyMx", "verify_or_fail"]


@dataclasses.dataclass(frozen=True)
class VerifyMx(ModulePass):
    """Check every mx op (operands, attributes, element types, block shapes) at its location.

    ``mx`` ops are unregistered ops, so MLIR's own verifier does not look inside them; this pass
    does, and reports every malformed op (not just the first) as an error at the op: a wrong
    operand or result count, an unknown format, scale mode or attribute, an element type that
    does not match the format, a scale shape that does not match the block size and axis, a
    blocked dimension the block size does not divide, bad dot dimension numbers; for the
    datatype ops (``mx.cast``, ``mx.sparse``, quantize / dequantize with ``number``) a bad
    number or scale spec (with ``mxlower.numbers``' message), a tile that does not divide its
    dimension, an unknown round or scale mode, random bits missing or given without
    ``roundmode = "stochastic"``, codes, scales or zero points of the wrong type or shape, a
    bad ``n``/``m``/``dim``.  The IR is not changed.  ``mxlower-decompose-mx`` reports the same problem for each op it cannot lower,
    and the ``mxlower-mx-to-stablehlo`` pipeline runs this pass first.

    Before::

        %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 24 : i64}
                 : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)

    After (stderr)::

        in.mlir:3:10: error: 'mx.quantize' op blocked dimension 1 of the input has size 64,
        which block size 24 does not divide

    Example::

        mxlower-opt in.mlir --mxlower-verify-mx
    """

    name: ClassVar[str] = "mxlower-verify-mx"

    def run(self, op: Any) -> None:
        verify_or_fail(op)
