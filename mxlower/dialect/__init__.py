"""mxlower's ``mx`` ops (unregistered ops in generic form; see ``mx.py`` and dialect/README.md)."""

from mxlower.dialect.mx import (OP_NAMES, DequantizeOp, MXError, Operand, PackOp, QuantizeOp,
                                ScaledDotOp, UnpackOp, is_mx_op, parse, verify, verify_or_fail)

__all__ = ["DequantizeOp", "MXError", "OP_NAMES", "Operand", "PackOp", "QuantizeOp",
           "ScaledDotOp", "UnpackOp", "is_mx_op", "parse", "verify", "verify_or_fail"]
