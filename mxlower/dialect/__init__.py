"""mxlower's ``mx`` ops (see :mod:`mxlower.dialect.mx` and ``dialect/README.md``)."""

from mxlower.dialect.mx import (OP_NAMES, CastOp, DequantizeOp, GeneralDequantizeOp,
                                GeneralQuantizeOp, MXError, Operand, PackOp, QuantizeOp,
                                ScaledDotOp, SparseOp, UnpackOp, is_mx_op, parse, verify,
                                verify_or_fail)

__all__ = ["CastOp", "DequantizeOp", "GeneralDequantizeOp", "GeneralQuantizeOp", "MXError",
           "OP_NAMES", "Operand", "PackOp", "QuantizeOp", "ScaledDotOp", "SparseOp",
           "UnpackOp", "is_mx_op", "parse", "verify", "verify_or_fail"]
