"""XLA's MX custom calls and JAX's ``xla.scaled_dot`` composite, decoded into ``mx`` ops.

The recipe of ``mxlower-legalize-xla-mx``: :func:`is_mx_form` says whether an op is one of the
forms, :func:`rewrite` replaces it by the equivalent ``mx`` op (or raises :class:`XlaMxError`
saying why it cannot), :func:`describe` names it in that error.

* ``stablehlo.custom_call @__op$quantize(x)`` (two results or one tuple of them) ->
  ``mx.quantize``; ``@__op$dequantize(q, scale)`` -> ``mx.dequantize``;
* ``@__op$block_scaled_dot(lhs, rhs, lhs_scale[, rhs_scale[, global_scale]])`` (rank 2 or 3,
  contracting dimension last, batch dimension 0) -> ``mx.scaled_dot``, its ``backend_config``
  (a JSON string or a dictionary) read field by field, each field's type checked;
* ``stablehlo.composite "xla.scaled_dot"`` with an MX operand -> ``mx.scaled_dot``.

The other way, :func:`emit_block_scaled_dot` writes a ``__op$block_scaled_dot`` as JAX's
``jax.nn.scaled_matmul`` does for CUDA (``mxlower.jax``'s CUDA ``scaled_dot`` rule), for the
format pairs :func:`cudnn_block_scaled_dot` says XLA hands to cuDNN.

The MX format follows from the element and scale types (docs/semantics.md section 7): f8E8M0FNU
scales give the MX formats, f8E4M3FN scales with f4E2M1FN elements nvfp4.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from mxlower.bindings import typed_attribute
from mxlower.bindings.jaxlib import ir, stablehlo
from mxlower.dialect import mx
from mxlower.formats import FORMATS, WIDE_TYPES, MXFormat
from mxlower.ir.stablehlo_builder import Builder

__all__ = [
    "BLOCK_SCALED_DOT",
    "COMPOSITE",
    "DEQUANTIZE",
    "QUANTIZE",
    "TARGETS",
    "XlaMxError",
    "cudnn_block_scaled_dot",
    "describe",
    "emit_block_scaled_dot",
    "is_mx_form",
    "rewrite",
]

QUANTIZE = "__op$quantize"
DEQUANTIZE = "__op$dequantize"
BLOCK_SCALED_DOT = "__op$block_scaled_dot"
TARGETS = (QUANTIZE, DEQUANTIZE, BLOCK_SCALED_DOT)
COMPOSITE = "xla.scaled_dot"

#: XLA's names of the dequantize types (PrimitiveType) -> MLIR spelling: "F32" -> "f32", ...
_DEQUANTIZE_TYPES = {t.upper(): t for t in WIDE_TYPES}

#: (element type, scale type) -> format, for the interchange forms (docs/semantics.md section 7)
_BY_TYPES = {(f.element, f.scale): f for f in FORMATS.values() if f.element != "i8"}


class XlaMxError(ValueError):
    """An XLA MX form that cannot be honoured; the message says why (the op is the location)."""


def is_mx_form(o: Any) -> bool:
    """Whether ``o`` is an MX custom call, or an ``xla.scaled_dot`` composite with an MX
    operand (one whose operands are both f32/bf16/f16 is a plain scaled dot: not MX)."""
    if o.name == "stablehlo.custom_call":
        return _target(o) in TARGETS
    return (o.name == "stablehlo.composite" and _composite_name(o) == COMPOSITE
            and _has_mx_operand(o))


def describe(o: Any) -> str:
    """How errors name the form: ``@__op$quantize`` or ``'xla.scaled_dot'``."""
    return f"'{COMPOSITE}'" if o.name == "stablehlo.composite" else f"@{_target(o)}"


def rewrite(o: Any, scale_mode: str = "nearest") -> None:
    """Replace the MX form ``o`` (:func:`is_mx_form`) by the equivalent mx op, in place, at
    ``o``'s location.  ``scale_mode`` is given to the ``mx.quantize`` replacing
    ``__op$quantize`` (XLA's own rule is nearest).  Raises :class:`XlaMxError`."""
    if o.name == "stablehlo.composite":
        _composite(o)
    elif _target(o) == QUANTIZE:
        _quantize(o, scale_mode)
    elif _target(o) == DEQUANTIZE:
        _dequantize(o)
    else:
        _block_scaled_dot(o)


# ----------------------------------------------------------------------------- emitting

#: (lhs format, rhs format) -> block size of the pairs XLA's GPU compiler runs as a cuDNN
#: block-scaled GEMM (its block-scaling matcher: both sides MXFP8 -- e4m3 or e5m2 elements,
#: not both e5m2 -- in blocks of 32, or both nvfp4 in blocks of 16).  XLA expands any other
#: ``__op$block_scaled_dot`` into a dequantize in the result type and a plain dot.
CUDNN_PAIRS = {("mxfp8_e4m3", "mxfp8_e4m3"): 32, ("mxfp8_e4m3", "mxfp8_e5m2"): 32,
               ("mxfp8_e5m2", "mxfp8_e4m3"): 32, ("nvfp4", "nvfp4"): 16}


def cudnn_block_scaled_dot(lhs_format: str | None, lhs_block_size: int | None,
                           rhs_format: str | None, rhs_block_size: int | None) -> bool:
    """Whether XLA runs a block-scaled dot of these sides on cuDNN (:data:`CUDNN_PAIRS`)."""
    k = CUDNN_PAIRS.get((lhs_format, rhs_format))
    return k is not None and lhs_block_size == rhs_block_size == k


def emit_block_scaled_dot(b: Builder, lhs: Any, rhs: Any, lhs_scales: Any,
                          rhs_scales: Any) -> Any:
    """``__op$block_scaled_dot`` of ``lhs [B, M, K]`` and ``rhs [B, N, K]`` with their
    scales ``[B, M, K/k]`` and ``[B, N, K/k]`` (no global scale: XLA takes four operands)
    -> ``f32 [B, M, N]``, dequantized in f32: the custom call, backend_config, operand and
    result layouts that ``jax.nn.scaled_matmul`` emits for CUDA, which :func:`rewrite`
    reads back."""
    ls, rs = b.shape(lhs), b.shape(rhs)
    shape = [ls[0], ls[1], rs[1]]
    config = {"scaled_dot_backend_config": {"lhs_batch_dimensions": [0],
                                            "rhs_batch_dimensions": [0],
                                            "dequantize_type": "F32"}}
    layout = ir.DenseElementsAttr.get(np.array([2, 1, 0], dtype=np.int64),
                                      type=ir.IndexType.get())
    op = stablehlo.CustomCallOp(
        [b.ttype(shape, "f32")], [lhs, rhs, lhs_scales, rhs_scales], BLOCK_SCALED_DOT,
        backend_config=ir.StringAttr.get(json.dumps(config)),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 2),
        operand_layouts=ir.ArrayAttr.get([layout] * 4),
        result_layouts=ir.ArrayAttr.get([layout]), loc=b.loc, ip=b.ip)
    return op.results[0]


# ----------------------------------------------------------------------------- helpers


def _str_attr(o: Any, name: str) -> str | None:
    if name not in o.attributes:
        return None
    a = typed_attribute(o.attributes, name)  # (None: an array the bindings cannot type)
    return a.value if isinstance(a, ir.StringAttr) else None


def _target(o: Any) -> str | None:
    return _str_attr(o, "call_target_name")


def _composite_name(o: Any) -> str | None:
    return _str_attr(o, "name")


def _shape_elt(v: Any, what: str, blocked_last: bool = False) -> tuple[tuple[int, ...], str]:
    """(shape, element type).  Static shapes only, except with ``blocked_last``: then only
    the last (blocked) dimension must be static (a dynamic size is ``ShapedType``'s)."""
    t = v.type
    if not isinstance(t, ir.RankedTensorType):
        raise XlaMxError(f"{what} must be a ranked tensor, got {t}")
    if blocked_last:
        if t.rank and t.is_dynamic_dim(t.rank - 1):
            raise XlaMxError(f"the last (blocked) dimension of {what} must be static, got {t}")
    elif not t.has_static_shape:
        raise XlaMxError(f"{what} must be a statically shaped tensor, got {t}")
    return tuple(t.shape), str(t.element_type)


def _fmt(elt: str, selt: str, what: str) -> MXFormat:
    f = _BY_TYPES.get((elt, selt))
    if f is not None:
        return f
    if elt == "i8" and selt == "f8E8M0FNU":
        raise XlaMxError(
          f"{what}: i8 elements with f8E8M0FNU scales are ambiguous (XLA scales the integer "
          "code, MX mxint8 scales code * 2^-6); write mx ops with format = \"mxint8\" instead")
    if selt not in ("f8E8M0FNU", "f8E4M3FN"):
        raise XlaMxError(f"{what}: scale type {selt} is not an MX scale type (f8E8M0FNU, or "
                         "f8E4M3FN for nvfp4)")
    pairs = ", ".join(f"{e}/{s}" for e, s in _BY_TYPES)
    raise XlaMxError(f"{what}: elements of type {elt} with {selt} scales are no MX format "
                     f"(supported element/scale types: {pairs})")


def _block(n: int, ns: int, what: str) -> int:
    if ns == mx.DYNAMIC:
        raise XlaMxError(f"{what}: the last (blocked) dimension must be static")
    if ns <= 0 or n % ns:
        raise XlaMxError(f"{what}: {ns} scales do not evenly block {n} elements along the "
                         "last dimension")
    return n // ns


def _backend_config(o: Any) -> dict[str, Any]:
    if "backend_config" not in o.attributes:
        return {}
    a = o.attributes["backend_config"]
    if isinstance(a, ir.StringAttr):
        text = a.value.strip()
        if not text:
            return {}
        try:
            cfg = json.loads(text)
        except json.JSONDecodeError as e:
            raise XlaMxError(f"backend_config is not valid JSON ({e.msg} at character "
                             f"{e.pos})") from None
        if not isinstance(cfg, dict):
            raise XlaMxError("backend_config must be a JSON object")
        return cfg
    if isinstance(a, ir.DictAttr):
        return _to_py(a)
    raise XlaMxError(f"backend_config must be a string or a dictionary, got {a}")


#: The dimension fields of ``scaled_dot_backend_config`` (XLA's DotDimensionNumbers).
_DIMENSION_FIELDS = ("lhs_batch_dimensions", "rhs_batch_dimensions",
                     "lhs_contracting_dimensions", "rhs_contracting_dimensions")


def _block_scaled_dot_config(o: Any) -> tuple[str, int | None, dict[str, list[int]]]:
    """(compute type, block size or None, the dimension fields present) of a
    ``__op$block_scaled_dot``'s backend_config.  Every field read has its type checked; a wrong
    one is an error naming the field.  Fields mxlower does not read are ignored."""
    cfg = _backend_config(o)
    sd = _section(cfg, "scaled_dot_backend_config")
    bsd = _section(cfg, "block_scaled_dot_backend_config")
    dq = sd.get("dequantize_type")
    if dq is not None and not isinstance(dq, str):
        raise _bad_field("scaled_dot_backend_config.dequantize_type", dq,
                         f"a string ({', '.join(_DEQUANTIZE_TYPES)})")
    if dq is not None and dq not in _DEQUANTIZE_TYPES:
        raise XlaMxError(f"unknown dequantize_type '{dq}' (known: "
                         f"{', '.join(_DEQUANTIZE_TYPES)})")
    bs = bsd.get("block_size")
    if bs is not None:
        bs = _config_int(bs, "block_scaled_dot_backend_config.block_size", "a positive integer")
        if bs <= 0:
            raise _bad_field("block_scaled_dot_backend_config.block_size", bs,
                             "a positive integer")
    dims = {key: _config_ints(sd[key], f"scaled_dot_backend_config.{key}")
            for key in _DIMENSION_FIELDS if sd.get(key) is not None}
    return _DEQUANTIZE_TYPES.get(dq, "f32"), bs, dims


def _section(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """A backend_config section (absent or null: empty)."""
    v = cfg.get(name)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _bad_field(name, v, "an object")
    return v


def _config_int(v: Any, field: str, want: str = "an integer") -> int:
    """An integer field: a JSON integer (or an integer attribute), or a decimal string, the
    form protobuf's JSON mapping writes int64 fields in."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and re.fullmatch(r"[+-]?[0-9]+", v.strip()):
        return int(v)
    raise _bad_field(field, v, want)


def _config_ints(v: Any, field: str) -> list[int]:
    """A list-of-integers field (each element as :func:`_config_int` reads it)."""
    if not isinstance(v, list):
        raise _bad_field(field, v, "a list of integers")
    try:
        return [_config_int(x, field) for x in v]
    except XlaMxError:
        raise _bad_field(field, v, "a list of integers") from None


def _bad_field(field: str, value: Any, want: str) -> XlaMxError:
    shown = json.dumps(value, default=str)
    return XlaMxError(f"backend_config field '{field}' must be {want}, got {shown}")


def _to_py(a: Any) -> Any:
    if isinstance(a, ir.DictAttr):
        return {a[i].name: _to_py(a[i].attr) for i in range(len(a))}
    if isinstance(a, ir.ArrayAttr):
        return [_to_py(x) for x in a]
    if isinstance(a, ir.BoolAttr):
        return a.value
    if isinstance(a, ir.IntegerAttr):
        return a.value
    if isinstance(a, ir.StringAttr):
        return a.value
    if isinstance(a, ir.FloatAttr):
        return a.value
    if isinstance(a, ir.TypeAttr):
        return str(a.value)
    if isinstance(a, (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr)):
        return list(a)
    return str(a)


def _results(o: Any, n: int, what: str) -> list[Any]:
    """The custom call's results as ``n`` types: its own results or the types of one tuple."""
    if len(o.results) == n:
        return [r.type for r in o.results]
    if len(o.results) == 1 and isinstance(o.results[0].type, ir.TupleType):
        t = o.results[0].type
        if t.num_types == n:
            return [t.get_type(i) for i in range(n)]
    raise XlaMxError(f"expects {n} results ({what}) or one tuple of them, got "
                     f"{', '.join(str(r.type) for r in o.results) or 'none'}")


def _replace(o: Any, values: list[Any]) -> None:
    """Replace the custom call's results (or its single tuple result) by ``values``."""
    if len(o.results) == len(values):
        for r, v in zip(o.results, values):
            r.replace_all_uses_with(v)
        o.erase()
        return
    tup = o.results[0]
    for use in list(tup.uses):
        user = use.owner
        if user.name == "stablehlo.get_tuple_element":
            idx = user.attributes["index"].value
            user.results[0].replace_all_uses_with(values[idx])
            user.erase()
    if len(list(tup.uses)):
        t = stablehlo.TupleOp(values, loc=o.location, ip=ir.InsertionPoint(o)).result
        tup.replace_all_uses_with(t)
    o.erase()


# ----------------------------------------------------------------------------- custom calls


def _quantize(o: Any, scale_mode: str) -> None:
    if len(o.operands) != 1:
        raise XlaMxError(f"expects 1 operand (the input), got {len(o.operands)}")
    shape, elt = _shape_elt(o.operands[0], "the input", blocked_last=True)
    if elt not in WIDE_TYPES:
        raise XlaMxError(f"the input must be f32, bf16 or f16, got {elt}")
    if not shape:
        raise XlaMxError("the input must have at least one dimension")
    qt, st = _results(o, 2, "elements, scales")
    qt, st = ir.RankedTensorType(qt), ir.RankedTensorType(st)
    q_shape, s_shape = tuple(qt.shape), tuple(st.shape)
    fmt = _fmt(str(qt.element_type), str(st.element_type), "the results")
    if q_shape != shape or len(s_shape) != len(shape) or s_shape[:-1] != shape[:-1]:
        raise XlaMxError(f"result shapes {qt} and {st} do not fit the input's shape "
                         f"{o.operands[0].type} (blocks run along the last dimension)")
    k = _block(shape[-1], s_shape[-1], "the scales")
    new = mx.quantize(o.operands[0], fmt.name, block_size=k, axis=len(shape) - 1,
                      scale_mode=None if fmt.is_nvfp4 else scale_mode,
                      loc=o.location, ip=ir.InsertionPoint(o))
    _replace(o, [new.results[0], new.results[1]])


def _dequantize(o: Any) -> None:
    if len(o.operands) != 2:
        raise XlaMxError(f"expects 2 operands (elements, scales), got {len(o.operands)}")
    shape, elt = _shape_elt(o.operands[0], "the elements", blocked_last=True)
    s_shape, selt = _shape_elt(o.operands[1], "the scales", blocked_last=True)
    fmt = _fmt(elt, selt, "the operands")
    (rt,) = _results(o, 1, "the dequantized tensor")
    rt = ir.RankedTensorType(rt)
    r_elt = str(rt.element_type)
    if r_elt not in WIDE_TYPES:
        raise XlaMxError(f"the result must be f32, bf16 or f16, got {r_elt}")
    if not shape or tuple(rt.shape) != shape or len(s_shape) != len(shape) \
            or s_shape[:-1] != shape[:-1]:
        raise XlaMxError(f"shapes do not fit: elements {o.operands[0].type}, scales "
                         f"{o.operands[1].type}, result {rt} (blocks run along the last "
                         "dimension)")
    k = _block(shape[-1], s_shape[-1], "the scales")
    new = mx.dequantize(o.operands[0], o.operands[1], fmt.name, result_type=r_elt,
                        block_size=k, axis=len(shape) - 1, loc=o.location,
                        ip=ir.InsertionPoint(o))
    _replace(o, [new.results[0]])


def _scaled_side(b: Any, v: Any, s: Any, side: str, rank: int, bs: int | None):
    """(scales value, format, block size) of one block_scaled_dot operand; scales padded in the
    non-contracting dimension, or in the contracting one with an explicit block size, are
    sliced."""
    shape, elt = _shape_elt(v, f"the {side} operand")
    s_shape, selt = _shape_elt(s, f"the {side} scales")
    fmt = _fmt(elt, selt, f"the {side} operand")
    if len(s_shape) != rank:
        raise XlaMxError(f"the {side} scales must have rank {rank}, got {s.type}")
    if rank == 3 and s_shape[0] != shape[0]:
        raise XlaMxError(f"the {side} scales' batch dimension {s_shape[0]} differs from the "
                         f"operand's {shape[0]}")
    if s_shape[-2] < shape[-2]:
        raise XlaMxError(f"the {side} scales {s.type} have fewer rows than the operand "
                         f"{v.type}")
    kdim = shape[-1]
    if bs is None:
        k = _block(kdim, s_shape[-1], f"the {side} scales")
        want = kdim // k
    else:
        if kdim % bs:
            raise XlaMxError(f"contracting dimension {kdim} of the {side} operand is not a "
                             f"multiple of block_size {bs}")
        k, want = bs, kdim // bs
        if s_shape[-1] < want:
            raise XlaMxError(f"the {side} scales have {s_shape[-1]} blocks along the "
                             f"contracting dimension; block_size {bs} needs {want}")
    limits = list(s_shape[:-2]) + [shape[-2], want]
    return b.slice(s, limits), fmt, k


def _block_scaled_dot(o: Any) -> None:
    n = len(o.operands)
    if not 3 <= n <= 5:
        raise XlaMxError(f"expects 3, 4 or 5 operands (lhs, rhs, lhs_scale[, rhs_scale[, "
                         f"global_scale]]), got {n}")
    compute, bs, dims = _block_scaled_dot_config(o)
    lhs, rhs = o.operands[0], o.operands[1]
    ls, _ = _shape_elt(lhs, "the lhs operand")
    rs, r_elt = _shape_elt(rhs, "the rhs operand")
    rank = len(ls)
    if rank not in (2, 3) or len(rs) != rank:
        raise XlaMxError(f"operands must both have rank 2 or 3, got {lhs.type} and {rhs.type}")
    batch = [0] if rank == 3 else []
    for key in ("lhs_batch_dimensions", "rhs_batch_dimensions"):
        if key in dims and dims[key] != batch:
            raise XlaMxError(f"{key} {dims[key]} is not supported for rank {rank} operands "
                             f"(expected {batch}: batch first, contracting last)")
    for key in ("lhs_contracting_dimensions", "rhs_contracting_dimensions"):
        if key in dims and dims[key] != [rank - 1]:
            raise XlaMxError(f"{key} {dims[key]} is not supported (the contracting dimension "
                             "is the last one)")
    (rt,) = _results(o, 1, "the product")
    rt = ir.RankedTensorType(rt)
    res_elt = str(rt.element_type)
    if res_elt not in WIDE_TYPES:
        raise XlaMxError(f"the result must be f32, bf16 or f16, got {res_elt}")
    if ls[-1] != rs[-1] or (rank == 3 and ls[0] != rs[0]):
        raise XlaMxError(f"operand shapes {lhs.type} and {rhs.type} do not contract "
                         "(contracting dimension last, batch dimension first)")
    want = tuple(ls[:-1]) + (rs[-2],)
    if tuple(rt.shape) != want:
        raise XlaMxError(f"the result type {rt} does not match the product's shape "
                         f"{'x'.join(map(str, want))}")
    b = Builder(o.location, ir.InsertionPoint(o))
    ls_v, lfmt, lk = _scaled_side(b, lhs, o.operands[2], "lhs", rank, bs)
    if n >= 4:
        rs_v, rfmt, rk = _scaled_side(b, rhs, o.operands[3], "rhs", rank, bs)
    else:
        if r_elt not in WIDE_TYPES:
            raise XlaMxError(f"with 3 operands the rhs is unscaled and must be f32, bf16 or "
                             f"f16, got {r_elt}")
        rs_v, rfmt, rk = None, None, None
    g = None
    if n == 5:
        g_shape, g_elt = _shape_elt(o.operands[4], "the global scale")
        if g_shape != () or g_elt not in WIDE_TYPES:
            raise XlaMxError(f"the global scale must be a scalar f32, bf16 or f16, got "
                             f"{o.operands[4].type}")
        g = b.convert(o.operands[4], "f32")
    new = mx.scaled_dot(lhs, ls_v, rhs, rs_v, lhs_format=lfmt.name,
                        rhs_format=rfmt.name if rfmt else None,
                        lhs_contracting=(rank - 1,), rhs_contracting=(rank - 1,),
                        lhs_batch=tuple(batch), rhs_batch=tuple(batch),
                        lhs_block_size=lk, rhs_block_size=rk, result_type=res_elt,
                        compute_type=compute, global_scale=g, loc=o.location,
                        ip=ir.InsertionPoint(o))
    _replace(o, [new.results[0]])


# ----------------------------------------------------------------------------- composite


def _is_ones(v: Any) -> bool:
    """True when ``v`` is provably all ones: a splat 1 constant seen through converts,
    broadcasts and reshapes (what jax.lax.scaled_dot passes for an unscaled operand)."""
    for _ in range(16):
        owner = v.owner
        if not isinstance(owner, (ir.Operation, ir.OpView)):
            return False
        o = owner.operation
        if o.name in ("stablehlo.convert", "stablehlo.broadcast_in_dim", "stablehlo.reshape"):
            v = o.operands[0]
            continue
        if o.name == "stablehlo.constant":
            a = o.attributes["value"]
            if not isinstance(a, ir.DenseElementsAttr) or not a.is_splat:
                return False
            s = a.get_splat_value()
            if isinstance(s, ir.FloatAttr):
                return s.value == 1.0
            if isinstance(s, ir.IntegerAttr):
                return s.value == 1
        return False
    return False


def _has_mx_operand(o: Any) -> bool:
    """An xla.scaled_dot whose lhs and rhs are both f32/bf16/f16 is no MX form (a plain
    scaled dot, which XLA runs through its decomposition): it is left alone."""
    for v in list(o.operands)[:2]:
        t = v.type
        if not isinstance(t, ir.RankedTensorType) or str(t.element_type) not in WIDE_TYPES:
            return True
    return False


def _dims_attr(a: Any) -> tuple[list[int], list[int], list[int], list[int]]:
    def ints(v: Any) -> list[int]:
        if not isinstance(v, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) for d in v):
            raise TypeError
        return v

    try:
        (lc, rc), (lb, rb) = _to_py(a)
        return ints(lc), ints(rc), ints(lb), ints(rb)
    except (TypeError, ValueError):
        raise XlaMxError(f"dimension_numbers must be [[lhs_contracting, rhs_contracting], "
                         f"[lhs_batch, rhs_batch]], got {a}") from None


def _composite_side(v: Any, s: Any, side: str, contracting: list[int]):
    shape, elt = _shape_elt(v, f"the {side} operand")
    s_shape, selt = _shape_elt(s, f"the {side} scale")
    if len(s_shape) != len(shape):
        raise XlaMxError(f"the {side} scale {s.type} must have the operand's rank "
                         f"{len(shape)}")
    differ = [d for d in range(len(shape)) if s_shape[d] != shape[d]]
    if elt in WIDE_TYPES:
        if _is_ones(s):
            return None, None, None, None
        raise XlaMxError(f"the {side} operand has element type {elt} with a scale that is "
                         "not a constant 1; only MX-typed operands may carry scales")
    fmt = _fmt(elt, selt, f"the {side} operand")
    if len(differ) > 1:
        raise XlaMxError(f"the {side} scale {s.type} blocks more than one dimension of "
                         f"{v.type}")
    if differ:
        axis = differ[0]
        if axis not in contracting:
            raise XlaMxError(f"the {side} scale blocks dimension {axis}, which is not a "
                             "contracting dimension")
    elif contracting:
        axis = contracting[0]
    else:
        raise XlaMxError(f"the {side} operand has no contracting dimension to block")
    k = _block(shape[axis], s_shape[axis], f"the {side} scale") if s_shape[axis] else 0
    if k == 0:
        raise XlaMxError(f"the {side} scale has size 0 along dimension {axis}")
    return s, fmt, k, axis


def _composite(o: Any) -> None:
    if len(o.operands) != 4:
        raise XlaMxError(f"expects 4 operands (lhs, rhs, lhs_scale, rhs_scale), got "
                         f"{len(o.operands)}")
    attrs = o.attributes["composite_attributes"] if "composite_attributes" in o.attributes \
        else None
    if attrs is None or not isinstance(attrs, ir.DictAttr) or "dimension_numbers" not in attrs:
        raise XlaMxError("missing composite_attributes.dimension_numbers")
    lc, rc, lb, rb = _dims_attr(attrs["dimension_numbers"])
    if len(o.results) != 1:
        raise XlaMxError(f"expects 1 result, got {len(o.results)}")
    _, res_elt = _shape_elt(o.results[0], "the result")
    if res_elt not in WIDE_TYPES:
        raise XlaMxError(f"the result must be f32, bf16 or f16, got {res_elt}")
    lhs, rhs, lsc, rsc = o.operands
    ls_v, lfmt, lk, la = _composite_side(lhs, lsc, "lhs", lc)
    rs_v, rfmt, rk, ra = _composite_side(rhs, rsc, "rhs", rc)
    new = mx.scaled_dot(lhs, ls_v, rhs, rs_v, lhs_format=lfmt.name if lfmt else None,
                        rhs_format=rfmt.name if rfmt else None,
                        lhs_contracting=tuple(lc), rhs_contracting=tuple(rc),
                        lhs_batch=tuple(lb), rhs_batch=tuple(rb),
                        lhs_block_size=lk, rhs_block_size=rk, lhs_axis=la, rhs_axis=ra,
                        result_type=res_elt, compute_type="f32",
                        loc=o.location, ip=ir.InsertionPoint(o))
    try:
        mx.parse(new)
    except mx.MXError as e:
        new.erase()
        raise XlaMxError(str(e)) from None
    o.results[0].replace_all_uses_with(new.results[0])
    o.erase()
