"""The ``mx`` ops: mxlower's own in-IR form of MX quantize, dequantize, scaled dot, pack, unpack.

jaxlib's MLIR cannot register a dialect from Python, so ``mx`` ops are *unregistered* ops in
MLIR's generic form (the context must allow unregistered dialects; ``mxlower-opt`` does, and the
builders here switch it on).  This module is their definition: the op names, the attributes,
builders that compute result types, and the verifier (:func:`verify`, :func:`parse`) that the
``mxlower-verify-mx`` pass and every pass consuming ``mx`` ops run, so that a bad op is reported
at its location instead of being mis-lowered.  The textual forms are documented in
``mxlower/dialect/README.md``; in short::

    %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64,
             scale_mode = "floor"}
             : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
    %y = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64}
             : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xbf16>
    %r = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxfp8_e4m3", lhs_block_size = 32 : i64,
             rhs_format = "mxfp8_e4m3", rhs_block_size = 32 : i64, compute_type = f32,
             dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1],
                                                    rhs_contracting_dimensions = [1]>}
             : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf8E4M3FN>,
                tensor<8x2xf8E8M0FNU>) -> tensor<4x8xf32>
    %p = "mx.pack"(%q) {axis = 1 : i64} : (tensor<4x64xf4E2M1FN>) -> tensor<4x32xui8>
    %u = "mx.unpack"(%p) {axis = 1 : i64} : (tensor<4x32xui8>) -> tensor<4x64xf4E2M1FN>

docs/semantics.md section 10 (any datatype): the virtual cast, M-of-N sparsity, and the
general form of quantize / dequantize (a ``number`` attribute instead of ``format``)::

    %y = "mx.cast"(%x) {number = "e5m6", scale = "e8m0_t32", roundmode = "even",
             scalemode = "max"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
    %z = "mx.sparse"(%x) {n = 4 : i64, m = 2 : i64, dim = 1 : i64}
             : (tensor<4x64xf32>) -> tensor<4x64xf32>
    %c, %s = "mx.quantize"(%x) {number = "e5m6", scale = "e8m0_t32", roundmode = "even",
             scalemode = "max"} : (tensor<4x64xf32>) -> (tensor<4x64xui16>, tensor<4x2xf8E8M0FNU>)
    %v = "mx.dequantize"(%c, %s) {number = "e5m6", scale = "e8m0_t32"}
             : (tensor<4x64xui16>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xf32>

``roundmode = "stochastic"`` takes the random bits as one more operand, ``tensor<...xui32>``
of the input's shape; a scale spec with a zero point adds the zero points as a third result
of quantize (third operand of dequantize).  A lookup-table number (section 10.7, codes
``ui8``) is named (``number = "nf4"``, ``number = "nf4:float32_t64"``) or, for a custom
table, ``number = "lut"`` with its 2^K increasing f32 values::

    %y = "mx.cast"(%x) {number = "lut", table = array<f32: -1.5, -0.5, 0.5, 1.5>,
             scale = "e8m0_t32"} : (tensor<4x64xf32>) -> tensor<4x64xf32>

One vocabulary: a quantize / dequantize whose datatype is an MX format's is that format's op,
and a scaled_dot side may name its MX format's datatype as dequantize does, prefixed
(``lhs_number`` [+ ``lhs_scale``], tiles along a contracting dimension) -- the same parsed
record as ``lhs_format`` (with ``lhs_block_size`` / ``lhs_axis``)::

    %r = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_number = "e4m3fn", lhs_scale = "e8m0_t32",
             rhs_number = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<
             lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : ...

nvfp4 takes its optional per-tensor scale as one extra trailing ``tensor<f32>`` operand of
quantize, dequantize and scaled_dot.  Any two-level datatype (a scale spec ending in
``_gf32``, tensor x tile [x subtile]) takes its tensor scale g the same way, as the last
operand of ``mx.cast`` and of the datatype forms of ``mx.quantize`` (after the random bits)
and ``mx.dequantize`` (after the codes, scales and zero points or subtile offsets)::

    %c, %s, %o = "mx.quantize"(%x, %g) {number = "int8", scale = "e8m0_t16_s2o1_gf32"}
             : (tensor<4x64xf32>, tensor<f32>)
             -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops, typed_attribute
from mxlower.bindings.jaxlib import ir, stablehlo
from mxlower.cast_reference import resolve
from mxlower.formats import (
    FLOAT_TYPES,
    FORMATS,
    MAX_BLOCK_SIZE,
    SCALE_MODES,
    WIDE_TYPES,
    MXFormat,
    block_datatype,
    format_of,
    mx_quantize_of,
    why_not_format,
)
from mxlower.numbers import ROUND_MODES, Datatype, NumberSpec, SpecError, lut_spec
from mxlower.numbers import SCALE_MODES as CAST_SCALE_MODES

__all__ = [
    "ATTRIBUTES",
    "CAST_SCALE_MODES",
    "CastOp",
    "DEFAULT_ROUND_MODE",
    "DEFAULT_SCALE_MODE",
    "DEFAULT_CAST_SCALE_MODE",
    "DequantizeOp",
    "GeneralDequantizeOp",
    "GeneralQuantizeOp",
    "ROUND_MODES",
    "SparseOp",
    "MXError",
    "OP_NAMES",
    "Operand",
    "PackOp",
    "QuantizeOp",
    "ScaledDotOp",
    "UnpackOp",
    "cast",
    "dequantize",
    "is_mx_op",
    "pack",
    "packed_length",
    "parse",
    "quantize",
    "scaled_dot",
    "sparse",
    "unpack",
    "verify",
    "verify_or_fail",
]

OP_NAMES = ("mx.quantize", "mx.dequantize", "mx.scaled_dot", "mx.pack", "mx.unpack",
            "mx.cast", "mx.sparse")
DEFAULT_SCALE_MODE = "floor"
#: defaults of the section 10 attributes (``roundmode``, ``scalemode``)
DEFAULT_ROUND_MODE = "even"
DEFAULT_CAST_SCALE_MODE = "max"

#: the attributes of a named-format quantize / dequantize (sections 3-5)
_NAMED = {"mx.quantize": ("format", "block_size", "axis", "scale_mode"),
          "mx.dequantize": ("format", "block_size", "axis")}
#: the attributes of a datatype cast (section 10)
_GENERAL = {"mx.quantize": ("number", "scale", "roundmode", "scalemode", "table"),
            "mx.dequantize": ("number", "scale", "table"),
            "mx.cast": ("number", "scale", "roundmode", "scalemode", "table")}
#: the ``number`` of a custom lookup table (section 10.7), whose values are the ``table``
#: attribute (``array<f32: ...>``); a predefined table is named (``number = "nf4"``)
LUT_NUMBER = "lut"
#: the attributes of one side of ``mx.scaled_dot`` (prefixed ``lhs_`` / ``rhs_``): a named
#: format as quantize / dequantize name one, or a datatype as dequantize names one
_SIDE_NAMED = ("format", "block_size", "axis")
_SIDE_GENERAL = ("number", "scale")

ATTRIBUTES = _ATTRS = {
    "mx.quantize": _NAMED["mx.quantize"] + _GENERAL["mx.quantize"],
    "mx.dequantize": _NAMED["mx.dequantize"] + _GENERAL["mx.dequantize"],
    "mx.cast": _GENERAL["mx.cast"],
    "mx.sparse": ("n", "m", "dim"),
    "mx.scaled_dot": ("lhs_format", "rhs_format", "lhs_block_size", "rhs_block_size",
                      "lhs_axis", "rhs_axis", "lhs_number", "lhs_scale", "rhs_number",
                      "rhs_scale", "dot_dimension_numbers", "compute_type"),
    "mx.pack": ("axis",),
    "mx.unpack": ("axis",),
}

#: element types ``mx.pack`` accepts (MLIR spelling -> bit width)
PACKABLE: dict[str, int] = {**{t.mlir: t.bits for t in FLOAT_TYPES.values()}, "i8": 8}


class MXError(ValueError):
    """A malformed ``mx`` op; the message says what is wrong (the op supplies the location)."""


def is_mx_op(op: Any) -> bool:
    """Whether ``op`` is in the ``mx`` namespace (known op or not: :func:`parse` tells)."""
    return op.operation.name.startswith("mx.")


# ----------------------------------------------------------------------------- parsed views


@dataclasses.dataclass(frozen=True)
class QuantizeOp:
    """A verified ``mx.quantize``."""

    op: Any
    input: Any
    global_scale: Any | None
    fmt: MXFormat
    block_size: int
    axis: int  #: normalized, >= 0
    scale_mode: str
    shape: tuple[int, ...]
    input_type: str  #: f32, bf16 or f16


@dataclasses.dataclass(frozen=True)
class DequantizeOp:
    """A verified ``mx.dequantize``."""

    op: Any
    elements: Any
    scales: Any
    global_scale: Any | None
    fmt: MXFormat
    block_size: int
    axis: int
    shape: tuple[int, ...]
    result_type: str  #: f32, bf16 or f16


@dataclasses.dataclass(frozen=True)
class Operand:
    """One side of ``mx.scaled_dot``: a scaled MX operand or a plain wide one."""

    value: Any
    scales: Any | None
    fmt: MXFormat | None
    block_size: int | None
    axis: int | None
    shape: tuple[int, ...]
    element_type: str

    @property
    def datatype(self) -> Datatype | None:
        """The side's section-10 datatype (the format's with blocks of :attr:`block_size`
        along :attr:`axis`: :func:`mxlower.formats.block_datatype`), whichever spelling the
        op used; None for a plain side.  nvfp4's global scale is the op's
        (:attr:`ScaledDotOp.global_scale`), not part of it."""
        if self.fmt is None:
            return None
        return block_datatype(self.fmt, self.block_size, self.axis)


@dataclasses.dataclass(frozen=True)
class ScaledDotOp:
    """A verified ``mx.scaled_dot``."""

    op: Any
    lhs: Operand
    rhs: Operand
    global_scale: Any | None
    lhs_contracting: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs_batch: tuple[int, ...]
    rhs_batch: tuple[int, ...]
    compute_type: str
    result_type: str
    result_shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class PackOp:
    """A verified ``mx.pack``."""

    op: Any
    input: Any
    axis: int
    bits: int
    element_type: str
    shape: tuple[int, ...]  #: unpacked shape


@dataclasses.dataclass(frozen=True)
class UnpackOp:
    """A verified ``mx.unpack``."""

    op: Any
    input: Any
    axis: int
    bits: int
    element_type: str
    shape: tuple[int, ...]  #: unpacked (result) shape


@dataclasses.dataclass(frozen=True)
class CastOp:
    """A verified ``mx.cast`` (docs/semantics.md section 10.4: the virtual cast).

    When the datatype and modes are an MX format's by the rule that makes a datatype
    ``mx.quantize`` the format's quantize (:func:`mxlower.formats.format_of` names a format,
    ``roundmode`` is ``even``, ``scalemode`` is max / rceil / nearest, or max for nvfp4),
    ``fmt`` / ``block_size`` / ``axis`` / ``scale_mode`` (section 3's name: floor / rceil /
    nearest) are that quantize's, and the cast is that quantize followed by the format's
    dequantize to ``input_type``.  All four are None for any other datatype."""

    op: Any
    input: Any
    rbits: Any | None  #: the ui32 random bits (roundmode "stochastic" only)
    datatype: Datatype
    roundmode: str
    scalemode: str
    shape: tuple[int, ...]
    input_type: str  #: f32, bf16 or f16 (also the result's)
    fmt: MXFormat | None = None
    block_size: int | None = None
    axis: int | None = None  #: normalized, >= 0
    scale_mode: str | None = None
    #: the ``tensor<f32>`` g of a two-level datatype (``_gf32``; its last operand)
    tensor_scale: Any | None = None


@dataclasses.dataclass(frozen=True)
class GeneralQuantizeOp:
    """A verified ``mx.quantize`` with a ``number`` attribute (section 10.4: the actual cast):
    results codes [, scales [, zero points | subtile offsets]]."""

    op: Any
    input: Any
    rbits: Any | None
    datatype: Datatype
    roundmode: str
    scalemode: str
    shape: tuple[int, ...]
    input_type: str
    #: the ``tensor<f32>`` g of a two-level datatype (``_gf32``; the last operand)
    tensor_scale: Any | None = None


@dataclasses.dataclass(frozen=True)
class GeneralDequantizeOp:
    """A verified ``mx.dequantize`` with a ``number`` attribute: codes [, scales [, zero
    points | subtile offsets]] back to values."""

    op: Any
    codes: Any
    scales: Any | None
    zero_points: Any | None
    datatype: Datatype
    shape: tuple[int, ...]
    result_type: str
    offsets: Any | None = None  #: the ui8 subtile offsets (a scale spec with subtiles)
    #: the ``tensor<f32>`` g of a two-level datatype (``_gf32``; the last operand)
    tensor_scale: Any | None = None


@dataclasses.dataclass(frozen=True)
class SparseOp:
    """A verified ``mx.sparse`` (section 10.5)."""

    op: Any
    input: Any
    n: int
    m: int
    dim: int  #: normalized, >= 0
    shape: tuple[int, ...]
    element_type: str


# ----------------------------------------------------------------------------- helpers


#: the size MLIR gives a dynamic dimension (``ShapedType.get_dynamic_size()``)
DYNAMIC = -(1 << 63)


def _tensor(value: Any, what: str) -> tuple[tuple[int, ...], str]:
    """(shape, element type); a dynamic dimension's size is :data:`DYNAMIC`."""
    t = value.type
    if not isinstance(t, ir.RankedTensorType):
        raise MXError(f"{what} must be a ranked tensor, got {t}")
    rt = ir.RankedTensorType(t)
    return tuple(rt.shape), str(rt.element_type)


def _size(d: int) -> str:
    return "?" if d == DYNAMIC else str(d)


def _ttype(shape, elt: str) -> str:
    return "tensor<" + "".join(f"{_size(d)}x" for d in shape) + elt + ">"


def _attr(attrs, name: str, what: str):
    """``attrs[name]`` -- or a clear error where the Python bindings cannot type that
    attribute (a dense array of an element type they do not know, e.g. f8E8M0FNU)."""
    a = typed_attribute(attrs, name)
    if a is None:
        raise MXError(f"attribute '{name}' must be {what}, got an attribute of a type the "
                      f"bindings cannot read")
    return a


def _attr_str(attrs, name: str, what: str) -> str | None:
    if name not in attrs:
        return None
    a = _attr(attrs, name, f"a string ({what})")
    if not isinstance(a, ir.StringAttr):
        raise MXError(f"attribute '{name}' must be a string ({what}), got {a}")
    return ir.StringAttr(a).value


def _attr_int(attrs, name: str) -> int | None:
    if name not in attrs:
        return None
    a = _attr(attrs, name, "an integer")
    if not isinstance(a, ir.IntegerAttr):
        raise MXError(f"attribute '{name}' must be an integer, got {a}")
    return ir.IntegerAttr(a).value


def _format(attrs, name: str, required: bool = True) -> MXFormat | None:
    known = ", ".join(FORMATS)
    s = _attr_str(attrs, name, f"one of {known}")
    if s is None:
        if required:
            raise MXError(f"missing attribute '{name}' (one of {known})")
        return None
    if s not in FORMATS:
        raise MXError(f"unknown MX format '{s}' (known: {known})")
    return FORMATS[s]


def _block_size(attrs, name: str, fmt: MXFormat) -> int:
    k = _attr_int(attrs, name)
    if k is None:
        return fmt.block_size
    if k <= 0:
        raise MXError(f"'{name}' must be positive, got {k}")
    if k > MAX_BLOCK_SIZE:
        raise MXError(f"'{name}' must be at most {MAX_BLOCK_SIZE}, got {k}")
    return k


def _axis(attrs, name: str, rank: int, default: int = -1) -> int:
    a = _attr_int(attrs, name)
    a = default if a is None else a
    if not -rank <= a < rank:
        raise MXError(f"'{name}' {a} is out of range for rank {rank}")
    return a % rank


def _attr_names(op) -> set[str]:
    return {a if isinstance(a, str) else a.name for a in op.attributes}


#: attributes a scaled_dot side might be given by analogy with quantize, which do not apply
_QUANTIZE_ONLY = ("roundmode", "scalemode", "scale_mode")


def _check_attr_names(op) -> None:
    allowed = _ATTRS[op.name]
    for a in op.attributes:
        name = a if isinstance(a, str) else a.name
        if "." in name:  # discardable attributes of other dialects (mhlo.*, jax.*) are kept
            continue
        side, _, rest = name.partition("_")
        if op.name == "mx.scaled_dot" and side in ("lhs", "rhs") and rest in _QUANTIZE_ONLY:
            raise MXError(f"'{name}' does not apply to a scaled_dot side: its operands are "
                          f"quantized already (rounding and scale modes are mx.quantize's)")
        if name not in allowed:
            raise MXError(f"unknown attribute '{name}' (known for {op.name}: "
                          f"{', '.join(allowed)})")


def _counts(op, operands: tuple[int, ...], results: int) -> None:
    n = len(op.operands)
    if n not in operands:
        want = " or ".join(str(x) for x in operands)
        raise MXError(f"expects {want} operands, got {n}")
    if len(op.results) != results:
        raise MXError(f"expects {results} result{'s' if results != 1 else ''}, "
                      f"got {len(op.results)}")


def scale_shape(shape, axis: int, block_size: int) -> tuple[int, ...]:
    """The scales' shape for elements of ``shape`` blocked by ``block_size`` along ``axis``."""
    out = list(shape)
    out[axis] //= block_size
    return tuple(out)


def _check_blocked(shape, axis: int, k: int, what: str) -> None:
    if shape[axis] == DYNAMIC:
        raise MXError(f"blocked dimension {axis} of {what} must have a static size (other "
                      f"dimensions may be dynamic), got shape {'x'.join(map(_size, shape))}")
    if shape[axis] % k:
        raise MXError(f"blocked dimension {axis} of {what} has size {shape[axis]}, which "
                      f"block size {k} does not divide")


def _check_scales(s_val, e_shape, axis: int, k: int, fmt: MXFormat, what: str) -> None:
    s_shape, s_elt = _tensor(s_val, what)
    want = scale_shape(e_shape, axis, k)
    if s_elt != fmt.scale:
        raise MXError(f"{what} of {fmt.name} must have element type {fmt.scale}, got {s_elt}")
    if s_shape != want:
        raise MXError(f"{what} must have shape {_ttype(want, fmt.scale)} for elements "
                      f"{_ttype(e_shape, fmt.element)} blocked by {k} along dimension {axis}, "
                      f"got {_ttype(s_shape, s_elt)}")


def _check_elements(shape_elt, fmt: MXFormat, what: str) -> None:
    _, elt = shape_elt
    if elt != fmt.element:
        raise MXError(f"{what} of {fmt.name} must have element type {fmt.element}, got {elt}")


def _global_scale(op, index: int, fmt: MXFormat | None) -> Any | None:
    if len(op.operands) <= index:
        return None
    g = op.operands[index]
    if fmt is not None and not fmt.global_scale:
        raise MXError(f"format {fmt.name} takes no global scale operand (only nvfp4 does)")
    shape, elt = _tensor(g, "the global scale")
    if shape != () or elt != "f32":
        raise MXError(f"the global scale must be tensor<f32>, got {_ttype(shape, elt)}")
    return g


def _wide(elt: str, what: str) -> None:
    if elt not in WIDE_TYPES:
        raise MXError(f"{what} must have element type f32, bf16 or f16, got {elt}")


# ----------------------------------------------------------------------------- parsing


def _quantize_input(op, operands: tuple[int, ...]) -> tuple[tuple[int, ...], str]:
    _counts(op, operands, 2)
    shape, elt = _tensor(op.operands[0], "the input")
    _wide(elt, "the input")
    if not shape:
        raise MXError("the input must have at least one dimension")
    return shape, elt


def _parse_quantize(op) -> QuantizeOp:
    a = op.attributes
    fmt = _format(a, "format")
    shape, elt = _quantize_input(op, (1, 2) if fmt.global_scale else (1,))
    k = _block_size(a, "block_size", fmt)
    axis = _axis(a, "axis", len(shape))
    mode = _attr_str(a, "scale_mode", f"one of {', '.join(SCALE_MODES)}")
    if fmt.is_nvfp4 and mode is not None:
        raise MXError("'scale_mode' does not apply to nvfp4 (its scales are f8E4M3FN values)")
    mode = mode or DEFAULT_SCALE_MODE
    if mode not in SCALE_MODES:
        raise MXError(f"unknown scale mode '{mode}' (known: {', '.join(SCALE_MODES)})")
    return _quantize_op(op, fmt, k, axis, mode, shape, elt)


def _quantize_op(op, fmt: MXFormat, k: int, axis: int, mode: str, shape, elt: str) -> QuantizeOp:
    """The checks after the attributes, whichever spelling named the format."""
    _check_blocked(shape, axis, k, "the input")
    e = _tensor(op.results[0], "result #0 (elements)")
    if e[0] != shape:
        raise MXError(f"result #0 (elements) must have the input's shape "
                      f"{_ttype(shape, fmt.element)}, got {_ttype(*e)}")
    _check_elements(e, fmt, "result #0 (elements)")
    _check_scales(op.results[1], shape, axis, k, fmt, "result #1 (scales)")
    g = _global_scale(op, 1, fmt)
    return QuantizeOp(op, op.operands[0], g, fmt, k, axis, mode, shape, elt)


def _dequantize_input(op, fmt: MXFormat, operands: tuple[int, ...]):
    _counts(op, operands, 1)
    e = _tensor(op.operands[0], "operand #0 (elements)")
    if not e[0]:
        raise MXError("the elements must have at least one dimension")
    _check_elements(e, fmt, "operand #0 (elements)")
    return e[0]


def _parse_dequantize(op) -> DequantizeOp:
    a = op.attributes
    fmt = _format(a, "format")
    shape = _dequantize_input(op, fmt, (2, 3) if fmt.global_scale else (2,))
    k = _block_size(a, "block_size", fmt)
    return _dequantize_op(op, fmt, k, _axis(a, "axis", len(shape)), shape)


def _dequantize_op(op, fmt: MXFormat, k: int, axis: int, shape) -> DequantizeOp:
    """The checks after the attributes, whichever spelling named the format."""
    _check_blocked(shape, axis, k, "the elements")
    _check_scales(op.operands[1], shape, axis, k, fmt, "operand #1 (scales)")
    r_shape, r_elt = _tensor(op.results[0], "the result")
    _wide(r_elt, "the result")
    if r_shape != shape:
        raise MXError(f"the result must have the elements' shape {_ttype(shape, r_elt)}, got "
                      f"{_ttype(r_shape, r_elt)}")
    g = _global_scale(op, 2, fmt)
    return DequantizeOp(op, op.operands[0], op.operands[1], g, fmt, k, axis, shape, r_elt)


def _dot_dims(attrs) -> tuple[tuple[int, ...], ...]:
    if "dot_dimension_numbers" not in attrs:
        raise MXError("missing attribute 'dot_dimension_numbers' (a #stablehlo.dot<...>)")
    a = _attr(attrs, "dot_dimension_numbers", "a #stablehlo.dot<...>")
    if not stablehlo.DotDimensionNumbers.isinstance(a):
        raise MXError(f"attribute 'dot_dimension_numbers' must be a #stablehlo.dot<...>, got {a}")
    d = stablehlo.DotDimensionNumbers(a)
    return (tuple(d.lhs_contracting_dimensions), tuple(d.rhs_contracting_dimensions),
            tuple(d.lhs_batching_dimensions), tuple(d.rhs_batching_dimensions))


def _side_spelling(op, side: str) -> tuple[MXFormat | None, Datatype | None]:
    """The MX format a scaled_dot side names and, in the datatype spelling
    (``{side}_number`` [+ ``{side}_scale``], as ``mx.dequantize`` names a datatype), its
    datatype; (None, None) for a plain side.  A datatype that is not an MX format's is an
    error saying why (:func:`mxlower.formats.why_not_format`)."""
    names = _attr_names(op)
    named = names & {f"{side}_{n}" for n in _SIDE_NAMED}
    general = names & {f"{side}_{n}" for n in _SIDE_GENERAL}
    if named and general:
        raise MXError(f"the {side} side mixes a named format ({', '.join(sorted(named))}) "
                      f"with a datatype ({', '.join(sorted(general))}): give '{side}_format' "
                      f"(sections 3-5) or '{side}_number' (section 10), not both")
    if not general:
        return _format(op.attributes, f"{side}_format", required=False), None
    dt = _side_datatype(_attr_str(op.attributes, f"{side}_number", "a number spec such as "
                                  "'e4m3fn' or a datatype name"),
                        _attr_str(op.attributes, f"{side}_scale", "a scale spec such as "
                                  "'e8m0_t32'"), side)
    return format_of(dt)[0], dt


def _side_datatype(number: str | None, scale: str | None, side: str) -> Datatype:
    """The datatype of a scaled_dot side's ``{side}_number`` / ``{side}_scale``, which must be
    an MX format's (any block size; nvfp4 with or without its tensor scale)."""
    if number is None:
        raise MXError(f"missing attribute '{side}_number' (a number spec such as 'e4m3fn' or "
                      f"a datatype name such as 'mxfp8_e4m3'): '{side}_scale' alone names no "
                      "datatype")
    try:
        dt = resolve(number, scale)
    except SpecError as e:
        raise MXError(f"bad {side} datatype: {e}") from None
    why = why_not_format(dt)
    if why is not None:
        plain = (f"; a plain f32, bf16 or f16 {side} side takes no '{side}_number'"
                 if dt.scale is None else "")
        raise MXError(f"the {side} datatype {dt.code} is not an MX format's: {why}{plain}")
    return dt


def _side(op, attrs, side: str, idx: int, contracting: tuple[int, ...], fmt: MXFormat | None,
          dt: Datatype | None) -> tuple[Operand, int]:
    value = op.operands[idx]
    shape, elt = _tensor(value, f"the {side} operand")
    if fmt is None:
        for extra in (f"{side}_block_size", f"{side}_axis"):
            if extra in attrs:
                raise MXError(f"'{extra}' given for a plain (unscaled) {side} operand")
        _wide(elt, f"the plain {side} operand")
        return Operand(value, None, None, None, None, shape, elt), idx + 1
    if not shape:
        raise MXError(f"the {side} operand must have at least one dimension")
    if elt != fmt.element:
        raise MXError(f"the {side} operand of {fmt.name} must have element type {fmt.element}, "
                      f"got {elt}")
    if dt is not None:  # the datatype spelling: its tiles name the block size and axis
        _, k, dim = format_of(dt)
        axis = _datatype_axis(dt, dim, shape, contracting, side)
    else:
        k = _block_size(attrs, f"{side}_block_size", fmt)
        if f"{side}_axis" in attrs:
            axis = _axis(attrs, f"{side}_axis", len(shape))
        elif len(contracting) == 1 and 0 <= contracting[0] < len(shape):
            axis = contracting[0]
        else:
            raise MXError(f"the {side} operand has {len(contracting)} contracting dimensions; "
                          f"give '{side}_axis' to say which one is blocked")
    _check_blocked(shape, axis, k, f"the {side} operand")
    if idx + 1 >= len(op.operands):
        raise MXError(f"missing the {side} scales operand")
    _check_scales(op.operands[idx + 1], shape, axis, k, fmt, f"the {side} scales")
    return Operand(value, op.operands[idx + 1], fmt, k, axis, shape, elt), idx + 2


def _datatype_axis(dt: Datatype, dim: int, shape, contracting: tuple[int, ...],
                   side: str) -> int:
    """The blocked dimension of a side given as a datatype: its tiles' dimension (default the
    last), which must be one of the side's contracting dimensions."""
    rank = len(shape)
    if not -rank <= dim < rank:
        raise MXError(f"the {side} datatype {dt.code} blocks dimension {dim}, which is out of "
                      f"range for the rank-{rank} {side} operand")
    axis = dim % rank
    if axis not in contracting:
        hint = ""
        if len(contracting) == 1 and 0 <= contracting[0] < rank:
            fix = dataclasses.replace(dt.scale, dims=(contracting[0],)).code
            hint = f" (name it in the scale spec: '{fix}')"
        raise MXError(f"the {side} datatype {dt.code} blocks dimension {axis}, which is not a "
                      f"contracting dimension of the {side} operand "
                      f"({', '.join(map(str, contracting)) or 'none'}): a scaled side's blocks "
                      f"run along its contracting dimension{hint}")
    return axis


def _parse_scaled_dot(op) -> ScaledDotOp:
    a = op.attributes
    if len(op.results) != 1:
        raise MXError(f"expects 1 result, got {len(op.results)}")
    lc, rc, lb, rb = _dot_dims(a)
    lf, ldt = _side_spelling(op, "lhs")
    rf, rdt = _side_spelling(op, "rhs")
    base = 2 + (lf is not None) + (rf is not None)
    # a side whose datatype has nvfp4's tensor level ('_gf32') has it as the global scale
    two_level = [(side, dt) for side, dt in (("lhs", ldt), ("rhs", rdt))
                 if dt is not None and dt.two_level]
    allowed = (base + 1,) if two_level else (base, base + 1)
    if len(op.operands) not in allowed:
        layout = ("lhs" + (", lhs_scales" if lf else "") + ", rhs" + (", rhs_scales" if rf else "")
                  + (", global_scale" if two_level else " [, global_scale]"))
        why = ""
        if two_level:
            named = " and ".join(f"the {side} datatype {dt.code}" for side, dt in two_level)
            has = "has a tensor scale" if len(two_level) == 1 else "have tensor scales"
            why = (f": {named} {has} ('_gf32'), the trailing global scale operand"
                   + (" (their product)" if len(two_level) == 2 else ""))
        raise MXError(f"expects {' or '.join(map(str, allowed))} operands ({layout}), got "
                      f"{len(op.operands)}{why}")
    lhs, i = _side(op, a, "lhs", 0, lc, lf, ldt)
    rhs, i = _side(op, a, "rhs", i, rc, rf, rdt)
    if lf is None and rf is None:
        raise MXError("neither operand is scaled: give 'lhs_format' and/or 'rhs_format' (or "
                      "'lhs_number' / 'rhs_number': a datatype)")
    g = op.operands[i] if i < len(op.operands) else None
    if g is not None:
        shape, elt = _tensor(g, "the global scale")
        if shape != () or elt != "f32":
            raise MXError(f"the global scale must be tensor<f32>, got {_ttype(shape, elt)}")
    ct = "f32"
    if "compute_type" in a:
        if not isinstance(a["compute_type"], ir.TypeAttr):
            raise MXError(f"attribute 'compute_type' must be a type, got {a['compute_type']}")
        ct = str(ir.TypeAttr(a["compute_type"]).value)
        _wide(ct, "'compute_type'")
    # dimension numbers
    for dims, x, what in ((lc + lb, lhs, "lhs"), (rc + rb, rhs, "rhs")):
        for d in dims:
            if not 0 <= d < len(x.shape):
                raise MXError(f"{what} dimension {d} in dot_dimension_numbers is out of range "
                              f"for rank {len(x.shape)}")
        if len(set(dims)) != len(dims):
            raise MXError(f"dot_dimension_numbers repeat a {what} dimension: {list(dims)}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise MXError("lhs and rhs need the same number of contracting and of batch dimensions")
    for xs, ys, what in ((lc, rc, "contracting"), (lb, rb, "batch")):
        for dl, dr in zip(xs, ys):
            if lhs.shape[dl] != rhs.shape[dr]:
                raise MXError(f"{what} dimension sizes differ: lhs dimension {dl} is "
                              f"{_size(lhs.shape[dl])}, rhs dimension {dr} is "
                              f"{_size(rhs.shape[dr])} (a dynamic size only matches a dynamic "
                              "one)")
    lfree = [d for d in range(len(lhs.shape)) if d not in lc and d not in lb]
    rfree = [d for d in range(len(rhs.shape)) if d not in rc and d not in rb]
    want = tuple([lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lfree]
                 + [rhs.shape[d] for d in rfree])
    r_shape, r_elt = _tensor(op.results[0], "the result")
    _wide(r_elt, "the result")
    if r_shape != want:
        raise MXError(f"the result must have shape {_ttype(want, r_elt)} (batch, lhs free, rhs "
                      f"free dimensions), got {_ttype(r_shape, r_elt)}")
    return ScaledDotOp(op, lhs, rhs, g, lc, rc, lb, rb, ct, r_elt, r_shape)


# ----------------------------------------------------------------------------- section 10 forms


def _datatype(attrs) -> Datatype:
    """The datatype of the ``number`` / ``scale`` attributes (``number`` may also be a
    predefined datatype name or a ``number:scale`` code, as :func:`mxlower.reference.cast`
    takes them)."""
    number = _attr_str(attrs, "number", "a number spec such as 'e5m6' or a datatype name")
    if number is None:
        raise MXError("missing attribute 'number' (a number spec such as 'e5m6', 'int4', "
                      "'e2m1fo', or a datatype name such as 'mxfp8_e4m3')")
    scale = _attr_str(attrs, "scale", "a scale spec such as 'e8m0_t32'")
    table = _table(attrs, number)
    return _checked_datatype(number if table is None else table, scale)


def _table(attrs, number: str) -> NumberSpec | None:
    """The custom lookup table of ``number = "lut"`` and its ``table`` attribute (None for
    every other number)."""
    if "table" not in attrs:
        if number == LUT_NUMBER:
            raise MXError(f"number '{LUT_NUMBER}' needs a 'table' attribute: the lookup "
                          f"table's 2^K increasing f32 values, array<f32: ...>")
        return None
    if number != LUT_NUMBER:
        raise MXError(f"attribute 'table' goes with number = \"{LUT_NUMBER}\" (a custom "
                      f"lookup table), got number '{number}'")
    a = _attr(attrs, "table", "an array<f32: ...> (the lookup table's values)")
    if not isinstance(a, ir.DenseF32ArrayAttr):
        raise MXError(f"attribute 'table' must be an array<f32: ...> (the lookup table's "
                      f"values), got {a}")
    try:
        return lut_spec(list(ir.DenseF32ArrayAttr(a)))
    except SpecError as e:
        raise MXError(f"bad datatype: {e}") from None


def _modes(attrs, dt: Datatype, with_round: bool = True) -> tuple[str, str]:
    rm = DEFAULT_ROUND_MODE
    if with_round:
        rm = _attr_str(attrs, "roundmode", f"one of {', '.join(ROUND_MODES)}") or rm
        if rm not in ROUND_MODES:
            raise MXError(f"unknown roundmode '{rm}' (known: {', '.join(ROUND_MODES)})")
    sm = _attr_str(attrs, "scalemode", f"one of {', '.join(CAST_SCALE_MODES)}")
    sm = sm or DEFAULT_CAST_SCALE_MODE
    if sm not in CAST_SCALE_MODES:
        raise MXError(f"unknown scalemode '{sm}' (known: {', '.join(CAST_SCALE_MODES)})")
    s = dt.scale
    if s is not None and not s.power_of_two and sm != DEFAULT_CAST_SCALE_MODE:
        raise MXError(f"scalemode '{sm}' applies to exponent scales; the float scale "
                      f"{s.number.code} takes 'max'")
    return rm, sm


def _static(shape, what: str) -> None:
    if any(d == DYNAMIC for d in shape):
        raise MXError(f"{what} must have a static shape (scaled datatypes and sparsity tile "
                      f"it), got {_ttype(shape, '...')}")


def _scale_layout(dt: Datatype, shape, what: str) -> tuple[tuple[int, ...], ...] | None:
    """(scales' shape) of data of ``shape`` scaled by ``dt``; MXError when it does not tile."""
    if dt.scale is None:
        return None
    _static(shape, what)
    try:
        if dt.scale.subtile:
            dt.scale.offsets_shape(tuple(shape))
        return dt.scale.scales_shape(tuple(shape))
    except SpecError as e:
        raise MXError(f"{what}: {e}") from None


def _expect(value, shape, elt: str, what: str) -> None:
    got = _tensor(value, what)
    if got != (tuple(shape), elt):
        raise MXError(f"{what} must be {_ttype(shape, elt)}, got {_ttype(*got)}")


def _rbits(op, rm: str, index: int, shape) -> Any | None:
    """The random-bits operand at ``index`` (required iff ``rm`` is stochastic)."""
    has = len(op.operands) > index
    if rm != "stochastic":
        if has:
            raise MXError(f"roundmode '{rm}' takes no random bits operand (only 'stochastic' "
                          "does)")
        return None
    if not has:
        raise MXError(f"roundmode 'stochastic' needs a random bits operand "
                      f"{_ttype(shape, 'ui32')} (one uint32 per element)")
    _expect(op.operands[index], shape, "ui32", "the random bits operand")
    return op.operands[index]


def _tile_level(dt: Datatype) -> Datatype:
    """``dt`` without its tensor level (``_gf32``), if it has one."""
    if not dt.two_level:
        return dt
    return dataclasses.replace(dt, scale=dt.scale.tile_level)


def _g_operand(op, dt: Datatype) -> Any:
    """The last operand of an op of a two-level datatype: its tensor scale g, ``tensor<f32>``."""
    i = len(op.operands) - 1
    _expect(op.operands[i], (), "f32", f"operand #{i} (the tensor scale g of {dt.code})")
    return op.operands[i]


def _no_tensor_scale(extra, dt: Datatype) -> None:
    """An extra ``tensor<f32>`` operand of a one-level datatype: a tensor scale it has no
    level for."""
    if _tensor(extra, "an operand") == ((), "f32"):
        raise MXError(f"{dt.code} has no tensor level (a scale spec ending in '_gf32'); it "
                      f"takes no tensor scale g operand")


def _part_names(dt: Datatype) -> str:
    """The names of a dequantize's code operands: codes [, scales [, zero points | offsets]]."""
    s = dt.scale
    names = ["the codes"] + ["scales"] * (s is not None)
    if s is not None and s.zero_point is not None:
        names.append("zero points")
    if s is not None and s.subtile:
        names.append("subtile offsets")
    return ", ".join(names)


def _parse_cast(op) -> CastOp:
    a = op.attributes
    dt = _datatype(a)
    two = dt.two_level
    rm, sm = _modes(a, dt)
    stochastic = rm == "stochastic"
    n = len(op.operands)
    if not two:
        _counts(op, (1, 2), 1)
    elif n != 2 + stochastic or len(op.results) != 1:
        names = "the input, " + "random bits, " * stochastic + "the tensor scale g"
        raise MXError(f"expects {2 + stochastic} operands ({names}) and 1 result for "
                      f"{dt.code} with roundmode '{rm}', got {n} "
                      f"operand{'s' if n != 1 else ''} and {len(op.results)} "
                      f"result{'s' if len(op.results) != 1 else ''}")
    shape, elt = _tensor(op.operands[0], "the input")
    _wide(elt, "the input")
    _scale_layout(dt, shape, "the input")
    rbits = _rbits(op, rm, 1, shape) if stochastic or not two else None
    g = None
    if two:
        g = op.operands[n - 1]
        _expect(g, (), "f32", f"operand #{n - 1} (the tensor scale g of {dt.code})")
    _expect(op.results[0], shape, elt, "the result (the input's type)")
    form = None if two else _mx_form(dt, rm, sm)
    if form is None:
        return CastOp(op, op.operands[0], rbits, dt, rm, sm, shape, elt, tensor_scale=g)
    fmt, k, dim, mode = form  # an MX format's datatype: its quantize, then its dequantize
    return CastOp(op, op.operands[0], rbits, dt, rm, sm, shape, elt, fmt, k,
                  _mx_axis(dt, dim, shape, "the input"), mode)


def _result_types(dt: Datatype, shape) -> list[tuple[str, tuple[int, ...], str]]:
    """(what, shape, element type) of each result of a general quantize."""
    out = [("result #0 (codes)", tuple(shape), dt.number.storage)]
    s = dt.scale
    if s is not None:
        ss = s.scales_shape(tuple(shape))
        out.append(("result #1 (scales)", ss, s.number.storage))
        if s.zero_point is not None:
            out.append(("result #2 (zero points)", ss, s.zero_point.storage))
        if s.subtile:
            out.append((f"result #{len(out)} (subtile offsets)",
                        s.offsets_shape(tuple(shape)), s.offset_number.storage))
    return out


def _mx_form(dt: Datatype, rm: str | None = None, sm: str | None = None):
    """``(format, block size, tile dimension, scale mode)`` when a datatype quantize or cast
    (with ``rm`` / ``sm``: :func:`mxlower.formats.mx_quantize_of`) or dequantize (None;
    :func:`mxlower.formats.format_of`, scale mode None) names an MX format's datatype with the
    format's own rules: that op *is* the format's quantize / dequantize, parsed as the named
    form is.  None otherwise."""
    if rm is None:
        m = format_of(dt)
        return None if m is None else (*m, None)
    return mx_quantize_of(dt, rm, sm)


def _mx_axis(dt: Datatype, dim: int, shape, what: str) -> int:
    _scale_layout(dt, shape, what)  # the tiles divide their dimension, which exists
    return dim % len(shape)


def _parse_general_quantize(op) -> GeneralQuantizeOp | QuantizeOp:
    a = op.attributes
    dt = _datatype(a)
    rm, sm = _modes(a, dt)
    form = _mx_form(dt, rm, sm)
    if form is not None:  # an MX format's datatype: the format's quantize
        fmt, k, dim, mode = form
        shape, elt = _quantize_input(op, (1, 2) if dt.two_level else (1,))
        return _quantize_op(op, fmt, k, _mx_axis(dt, dim, shape, "the input"), mode, shape,
                            elt)
    two = dt.two_level
    stochastic = rm == "stochastic"
    n = len(op.operands)
    if two and n != 2 + stochastic:
        names = "the input, " + "random bits, " * stochastic + "the tensor scale g"
        raise MXError(f"expects {2 + stochastic} operands ({names}) for {dt.code} with "
                      f"roundmode '{rm}', got {n}")
    if not two and not 1 <= n <= 2:
        raise MXError(f"expects 1 or 2 operands (the input [, random bits]), got "
                      f"{len(op.operands)}")
    shape, elt = _tensor(op.operands[0], "the input")
    _wide(elt, "the input")
    _scale_layout(dt, shape, "the input")
    if not two and n == 2 and not stochastic:
        _no_tensor_scale(op.operands[1], dt)
    rbits = _rbits(op, rm, 1, shape) if stochastic or not two else None
    g = _g_operand(op, dt) if two else None
    want = _result_types(dt, shape)
    if len(op.results) != len(want):
        names = ", ".join(w for w, _, _ in want)
        raise MXError(f"expects {len(want)} result{'s' if len(want) != 1 else ''} for "
                      f"{dt.code} ({names}), got {len(op.results)}")
    for r, (what, rs, relt) in zip(op.results, want):
        _expect(r, rs, relt, f"{what} of {dt.code}")
    return GeneralQuantizeOp(op, op.operands[0], rbits, dt, rm, sm, shape, elt, g)


def _parse_general_dequantize(op) -> GeneralDequantizeOp | DequantizeOp:
    a = op.attributes
    dt = _datatype(a)
    form = _mx_form(dt)
    if form is not None:  # an MX format's datatype: the format's dequantize
        fmt, k, dim, _ = form
        shape = _dequantize_input(op, fmt, (3,) if dt.two_level else (2,))
        return _dequantize_op(op, fmt, k, _mx_axis(dt, dim, shape, "operand #0 (elements)"),
                              shape)
    s = dt.scale
    two = dt.two_level
    parts = 1 + (s is not None) + (s is not None and (s.zero_point is not None
                                                      or bool(s.subtile)))
    if two and (len(op.operands) != parts + 1 or len(op.results) != 1):
        got = len(op.operands)
        raise MXError(f"expects {parts + 1} operands ({_part_names(dt)}, the tensor scale g)"
                      f" and 1 result for {dt.code}, got {got} operand{'s' if got != 1 else ''}"
                      f" and {len(op.results)} result{'s' if len(op.results) != 1 else ''}")
    if not two and len(op.operands) == parts + 1 and len(op.results) == 1:
        _no_tensor_scale(op.operands[parts], dt)
    _counts(op, (parts + two,), 1)
    shape, elt = _tensor(op.operands[0], "operand #0 (codes)")
    _scale_layout(dt, shape, "operand #0 (codes)")
    want = _result_types(dt, shape)
    for v, (what, rs, relt) in zip(op.operands, want):
        what = what.replace("result", "operand")
        _expect(v, rs, relt, f"{what} of {dt.code}")
    g = _g_operand(op, dt) if two else None
    r_shape, r_elt = _tensor(op.results[0], "the result")
    _wide(r_elt, "the result")
    if r_shape != shape:
        raise MXError(f"the result must have the codes' shape {_ttype(shape, r_elt)}, got "
                      f"{_ttype(r_shape, r_elt)}")
    ops = list(op.operands[:parts]) + [None, None]
    zps = ops[2] if dt.scale is not None and dt.scale.zero_point is not None else None
    offs = ops[2] if dt.scale is not None and dt.scale.subtile else None
    return GeneralDequantizeOp(op, ops[0], ops[1], zps, dt, shape, r_elt, offs, g)


def _parse_sparse(op) -> SparseOp:
    a = op.attributes
    _counts(op, (1,), 1)
    shape, elt = _tensor(op.operands[0], "the input")
    _wide(elt, "the input")
    if not shape:
        raise MXError("the input must have at least one dimension")
    n, m = _attr_int(a, "n"), _attr_int(a, "m")
    for name, v in (("n", n), ("m", m)):
        if v is None:
            raise MXError(f"missing attribute '{name}' (keep m of every n values)")
    if not 0 < m <= n:
        raise MXError(f"need 0 < m <= n, got n = {n}, m = {m}")
    dim = _axis(a, "dim", len(shape))
    if shape[dim] == DYNAMIC:
        raise MXError(f"dimension {dim} must have a static size, got {_ttype(shape, elt)}")
    if shape[dim] % n:
        raise MXError(f"n = {n} does not divide dimension {dim} of size {shape[dim]}")
    _expect(op.results[0], shape, elt, "the result (the input's type)")
    return SparseOp(op, op.operands[0], n, m, dim, shape, elt)


def _form(op) -> str:
    """"named" or "general": which attribute set a quantize / dequantize uses."""
    names = _attr_names(op)
    named = names & set(_NAMED[op.name])
    general = names & set(_GENERAL[op.name])
    if named and general:
        raise MXError(f"mixes a named format ({', '.join(sorted(named))}) with a datatype "
                      f"({', '.join(sorted(general))}): give 'format' (sections 3-5) or "
                      "'number' (section 10), not both")
    if general:
        return "general"
    if "format" not in names:
        raise MXError(f"missing attribute 'format' (one of {', '.join(FORMATS)}) or "
                      "'number' (a number spec or datatype name)")
    return "named"


def packed_length(n: int, bits: int) -> int | None:
    """Bytes that ``n`` values of ``bits`` bits fill, or None when they do not fill whole bytes."""
    return None if (n * bits) % 8 else n * bits // 8


def _parse_pack(op, unpack: bool) -> PackOp | UnpackOp:
    _counts(op, (1,), 1)
    src = _tensor(op.operands[0], "the operand")
    dst = _tensor(op.results[0], "the result")
    packed, codes = (src, dst) if unpack else (dst, src)
    shape, elt = codes
    if elt not in PACKABLE:
        raise MXError(f"cannot pack element type {elt} (packable: {', '.join(PACKABLE)})")
    if packed[1] != "ui8":
        raise MXError(f"packed data must have element type ui8, got {packed[1]}")
    if not shape:
        raise MXError("packed tensors must have at least one dimension")
    axis = _axis(op.attributes, "axis", len(shape))
    bits = PACKABLE[elt]
    if shape[axis] == DYNAMIC:
        raise MXError(f"the packed dimension {axis} must have a static size, got "
                      f"{_ttype(shape, elt)}")
    m = packed_length(shape[axis], bits)
    if m is None:
        raise MXError(f"{shape[axis]} values of {elt} ({bits} bits) along dimension {axis} do "
                      f"not fill whole bytes ({shape[axis] * bits} bits)")
    want = list(shape)
    want[axis] = m
    if len(packed[0]) != len(shape) or tuple(want) != packed[0]:
        which = "the operand" if unpack else "the result"
        raise MXError(f"{which} must have shape {_ttype(want, 'ui8')} for "
                      f"{_ttype(shape, elt)}, got {_ttype(*packed)}")
    cls = UnpackOp if unpack else PackOp
    return cls(op, op.operands[0], axis, bits, elt, shape)


def parse(op: Any) -> (QuantizeOp | DequantizeOp | ScaledDotOp | PackOp | UnpackOp | CastOp
                       | SparseOp | GeneralQuantizeOp | GeneralDequantizeOp):
    """The verified view of an ``mx`` op; :class:`MXError` says what is wrong with it."""
    op = op.operation
    name = op.name
    if name not in _ATTRS:
        raise MXError(f"unknown mx op '{name}' (known: {', '.join(OP_NAMES)})")
    _check_attr_names(op)
    if name == "mx.cast":
        return _parse_cast(op)
    if name == "mx.sparse":
        return _parse_sparse(op)
    if name == "mx.quantize":
        if _form(op) == "general":
            return _parse_general_quantize(op)
        return _parse_quantize(op)
    if name == "mx.dequantize":
        if _form(op) == "general":
            return _parse_general_dequantize(op)
        return _parse_dequantize(op)
    if name == "mx.scaled_dot":
        return _parse_scaled_dot(op)
    return _parse_pack(op, unpack=name == "mx.unpack")


def verify(root: Any) -> list[tuple[Any, str]]:
    """Every malformed ``mx`` op under ``root`` (inclusive) with its problem, in IR order."""
    bad: list[tuple[Any, str]] = []
    for o in collect_ops(root, lambda o: o.name.startswith("mx.")):
        try:
            parse(o)
        except MXError as e:
            bad.append((o, f"'{o.name}' op {e}"))
    return bad


def verify_or_fail(root: Any) -> None:
    """Report every malformed ``mx`` op under ``root`` as an error diagnostic at the op (see
    :mod:`mxlower.diagnostics`); raise the first as :class:`~mxlower.diagnostics.PassFailure`."""
    failures = [diag.error(o, msg) for o, msg in verify(root)]
    if failures:
        raise failures[0]


# ----------------------------------------------------------------------------- builders


def _create(name: str, results, operands, attrs: dict[str, Any], loc, ip) -> Any:
    ctx = (loc or ir.Location.current).context
    ctx.allow_unregistered_dialects = True
    return ir.Operation.create(name, results=results, operands=list(operands),
                               attributes=attrs, loc=loc, ip=ip)


def _i64(v: int):
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(v))


def _type(shape, elt: str, loc: Any = None):
    return ir.RankedTensorType.get(list(shape), ir.Type.parse(elt),
                                   loc=loc or ir.Location.unknown())


def _general_attrs(number: str | NumberSpec, scale: str | None, roundmode: str | None,
                   scalemode: str | None, prefix: str = "") -> dict[str, Any]:
    attrs = {}
    if isinstance(number, NumberSpec) and number.is_lut and \
            number.code != getattr(_named_lut(number), "code", None):
        attrs[f"{prefix}table"] = ir.DenseF32ArrayAttr.get([float(t) for t in number.table])
        number = LUT_NUMBER
    attrs[f"{prefix}number"] = ir.StringAttr.get(number if isinstance(number, str)
                                                 else number.code)
    if scale is not None:
        attrs[f"{prefix}scale"] = ir.StringAttr.get(scale)
    if roundmode is not None:
        attrs[f"{prefix}roundmode"] = ir.StringAttr.get(roundmode)
    if scalemode is not None:
        attrs[f"{prefix}scalemode"] = ir.StringAttr.get(scalemode)
    return attrs


def _named_lut(spec: NumberSpec) -> NumberSpec | None:
    """The spec ``number()`` reads back from a lookup table's code (a predefined table: nf4),
    None for a custom table."""
    try:
        return resolve(spec.code).number
    except SpecError:
        return None


def _checked_datatype(number: str | NumberSpec, scale: str | None) -> Datatype:
    """The datatype of the attributes (any: every datatype has its ops; a two-level one takes
    its tensor scale g as an operand)."""
    try:
        return resolve(number, scale)
    except SpecError as e:
        raise MXError(f"bad datatype: {e}") from None


def quantize(x: Any, format: str | None = None, *, block_size: int | None = None,
             axis: int = -1, scale_mode: str | None = None, global_scale: Any | None = None,
             number: str | NumberSpec | None = None, scale: str | None = None,
             roundmode: str = "even",
             scalemode: str = "max", rbits: Any | None = None,
             tensor_scale: Any | None = None, loc: Any = None, ip: Any = None) -> Any:
    """Build ``mx.quantize``; returns the op.

    A named ``format`` (sections 3-4; results: elements, scales) or a datatype: ``number``
    [+ ``scale``] with ``roundmode`` / ``scalemode`` and, for stochastic rounding, ``rbits``
    (section 10; results: codes [, scales [, zero points | subtile offsets]]).  A two-level
    datatype (a scale spec ending in ``_gf32``) takes its ``tensor<f32>`` g as
    ``global_scale`` (or ``tensor_scale``: the same operand), the last operand.  A datatype
    that is an MX format's (``e4m3fn`` + ``e8m0_t32``, ``nvfp4``, ``e2m1fo`` +
    ``e4m3fn_t16_gf32`` with ``global_scale``...) makes the format's op, which :func:`parse`
    reads as the named form."""
    shape, _ = _tensor(x, "the input")
    global_scale = _one_g(global_scale, tensor_scale)
    if number is not None:
        if format is not None:
            raise MXError("give a named 'format' or a datatype 'number', not both")
        dt = _checked_datatype(number, scale)
        try:
            results = [_type(rs, relt, loc) for _, rs, relt in _result_types(dt, shape)]
        except SpecError as e:
            raise MXError(str(e)) from None
        attrs = _general_attrs(number, scale, roundmode, scalemode)
        operands = [x] + [v for v in (rbits, global_scale) if v is not None]
        return _create("mx.quantize", results, operands, attrs, loc, ip)
    fmt = FORMATS[format]
    axis %= len(shape)
    k = block_size or fmt.block_size
    attrs = {"format": ir.StringAttr.get(fmt.name), "block_size": _i64(k), "axis": _i64(axis)}
    if not fmt.is_nvfp4:
        attrs["scale_mode"] = ir.StringAttr.get(scale_mode or DEFAULT_SCALE_MODE)
    results = [_type(shape, fmt.element, loc), _type(scale_shape(shape, axis, k), fmt.scale, loc)]
    operands = [x] + ([global_scale] if global_scale is not None else [])
    return _create("mx.quantize", results, operands, attrs, loc, ip)


def dequantize(elements: Any, scales: Any | None, format: str | None = None, *,
               result_type: str = "f32", block_size: int | None = None, axis: int = -1,
               global_scale: Any | None = None, number: str | NumberSpec | None = None,
               scale: str | None = None, zero_points: Any | None = None,
               offsets: Any | None = None, tensor_scale: Any | None = None, loc: Any = None,
               ip: Any = None) -> Any:
    """Build ``mx.dequantize``; returns the op (result: a ``result_type`` tensor).  A named
    ``format`` or a datatype (``number`` [+ ``scale``]; ``scales`` None when unscaled,
    ``zero_points`` for a scale spec with a zero point, ``offsets`` for one with subtiles,
    ``global_scale`` or ``tensor_scale`` (one operand) the ``tensor<f32>`` g of a two-level
    datatype, last)."""
    shape, _ = _tensor(elements, "the elements")
    global_scale = _one_g(global_scale, tensor_scale)
    if number is not None:
        if format is not None:
            raise MXError("give a named 'format' or a datatype 'number', not both")
        _checked_datatype(number, scale)
        operands = [v for v in (elements, scales, zero_points, offsets, global_scale)
                    if v is not None]
        return _create("mx.dequantize", [_type(shape, result_type, loc)], operands,
                       _general_attrs(number, scale, None, None), loc, ip)
    fmt = FORMATS[format]
    axis %= len(shape)
    attrs = {"format": ir.StringAttr.get(fmt.name),
             "block_size": _i64(block_size or fmt.block_size), "axis": _i64(axis)}
    operands = [elements, scales] + ([global_scale] if global_scale is not None else [])
    return _create("mx.dequantize", [_type(shape, result_type, loc)], operands, attrs, loc, ip)


def _one_g(global_scale: Any | None, tensor_scale: Any | None) -> Any | None:
    """The one g operand of a builder that takes it as ``global_scale`` or ``tensor_scale``."""
    if global_scale is not None and tensor_scale is not None:
        raise MXError("give 'global_scale' or 'tensor_scale' (the same operand), not both")
    return tensor_scale if global_scale is None else global_scale


def cast(x: Any, number: str | NumberSpec, scale: str | None = None, *,
         roundmode: str = "even", scalemode: str = "max", rbits: Any | None = None,
         tensor_scale: Any | None = None, loc: Any = None, ip: Any = None) -> Any:
    """Build ``mx.cast`` (the virtual cast: same type in and out); returns the op.
    ``tensor_scale``: the ``tensor<f32>`` g of a two-level datatype (``_gf32``).  ``number``
    may be a :class:`~mxlower.numbers.NumberSpec`: a custom lookup table is written
    ``number = "lut"`` with its ``table`` (as are the datatype forms of quantize and
    dequantize)."""
    _checked_datatype(number, scale)
    operands = [x] + [v for v in (rbits, tensor_scale) if v is not None]
    return _create("mx.cast", [x.type], operands,
                   _general_attrs(number, scale, roundmode, scalemode), loc, ip)


def sparse(x: Any, n: int, m: int, *, dim: int = -1, loc: Any = None, ip: Any = None) -> Any:
    """Build ``mx.sparse`` (keep the ``m`` largest magnitudes of every ``n`` values along
    ``dim``); returns the op."""
    shape, _ = _tensor(x, "the input")
    attrs = {"n": _i64(n), "m": _i64(m), "dim": _i64(dim % len(shape) if shape else dim)}
    return _create("mx.sparse", [x.type], [x], attrs, loc, ip)


def scaled_dot(lhs: Any, lhs_scales: Any | None, rhs: Any, rhs_scales: Any | None, *,
               lhs_format: str | None = None, rhs_format: str | None = None,
               lhs_contracting: tuple[int, ...], rhs_contracting: tuple[int, ...],
               lhs_batch: tuple[int, ...] = (), rhs_batch: tuple[int, ...] = (),
               lhs_block_size: int | None = None, rhs_block_size: int | None = None,
               lhs_axis: int | None = None, rhs_axis: int | None = None,
               lhs_number: str | None = None, lhs_scale: str | None = None,
               rhs_number: str | None = None, rhs_scale: str | None = None,
               result_type: str = "f32", compute_type: str = "f32",
               global_scale: Any | None = None, loc: Any = None, ip: Any = None) -> Any:
    """Build ``mx.scaled_dot``; returns the op.  Each side is a named ``{side}_format``
    (with ``{side}_block_size`` / ``{side}_axis``), a datatype ``{side}_number`` [+
    ``{side}_scale``] that is an MX format's (its tiles along a contracting dimension; nvfp4
    with ``_gf32`` takes ``global_scale``), or neither: a plain wide operand without
    scales."""
    attrs: dict[str, Any] = {}
    operands = [lhs]
    for side, fmt_name, number, scale, scales, k, axis, value in (
            ("lhs", lhs_format, lhs_number, lhs_scale, lhs_scales, lhs_block_size, lhs_axis,
             lhs),
            ("rhs", rhs_format, rhs_number, rhs_scale, rhs_scales, rhs_block_size, rhs_axis,
             rhs)):
        if side == "rhs":
            operands.append(rhs)
        if number is not None or scale is not None:
            if fmt_name is not None or k is not None or axis is not None:
                raise MXError(f"give a named '{side}_format' (with its block size and axis) "
                              f"or a datatype '{side}_number', not both")
            _side_datatype(number, scale, side)
            attrs.update(_general_attrs(number, scale, None, None, prefix=f"{side}_"))
            operands.append(scales)
            continue
        if fmt_name is None:
            continue
        fmt = FORMATS[fmt_name]
        attrs[f"{side}_format"] = ir.StringAttr.get(fmt.name)
        attrs[f"{side}_block_size"] = _i64(k or fmt.block_size)
        if axis is not None:
            attrs[f"{side}_axis"] = _i64(axis % len(_tensor(value, side)[0]))
        operands.append(scales)
    if global_scale is not None:
        operands.append(global_scale)
    attrs["dot_dimension_numbers"] = stablehlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lhs_batch), rhs_batching_dimensions=list(rhs_batch),
        lhs_contracting_dimensions=list(lhs_contracting),
        rhs_contracting_dimensions=list(rhs_contracting))
    attrs["compute_type"] = ir.TypeAttr.get(ir.Type.parse(compute_type))
    ls, _ = _tensor(lhs, "lhs")
    rs, _ = _tensor(rhs, "rhs")
    lfree = [d for d in range(len(ls)) if d not in lhs_contracting and d not in lhs_batch]
    rfree = [d for d in range(len(rs)) if d not in rhs_contracting and d not in rhs_batch]
    shape = [ls[d] for d in lhs_batch] + [ls[d] for d in lfree] + [rs[d] for d in rfree]
    return _create("mx.scaled_dot", [_type(shape, result_type, loc)], operands, attrs, loc, ip)


def pack(codes: Any, *, axis: int = -1, loc: Any = None, ip: Any = None) -> Any:
    """Build ``mx.pack`` of a narrow-typed tensor along ``axis``; returns the op."""
    shape, elt = _tensor(codes, "the operand")
    axis %= len(shape)
    out = list(shape)
    m = packed_length(shape[axis], PACKABLE[elt])
    if m is None:
        raise MXError(f"{shape[axis]} values of {elt} do not fill whole bytes")
    out[axis] = m
    return _create("mx.pack", [_type(out, "ui8", loc)], [codes], {"axis": _i64(axis)}, loc, ip)


def unpack(packed: Any, element_type: str, *, axis: int = -1, loc: Any = None,
           ip: Any = None) -> Any:
    """Build ``mx.unpack`` of ui8 bytes to ``element_type`` along ``axis``; returns the op."""
    shape, _ = _tensor(packed, "the operand")
    axis %= len(shape)
    out = list(shape)
    bits = PACKABLE[element_type]
    if (8 * shape[axis]) % bits:
        raise MXError(f"{shape[axis]} bytes do not hold whole {element_type} values")
    out[axis] = 8 * shape[axis] // bits
    return _create("mx.unpack", [_type(out, element_type, loc)], [packed], {"axis": _i64(axis)},
                   loc, ip)
