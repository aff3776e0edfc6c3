"""``mxlower-legalize-xla-mx``: XLA's MX custom calls and JAX's ``xla.scaled_dot`` -> ``mx`` ops."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops
from mxlower.formats import FORMATS, SCALE_MODES, WIDE_TYPES, MXFormat
from mxlower.passes.base import ModulePass, option

__all__ = ["LegalizeXlaMx", "legalize", "TARGETS"]

QUANTIZE = "__op$quantize"
DEQUANTIZE = "__op$dequantize"
BLOCK_SCALED_DOT = "__op$block_scaled_dot"
TARGETS = (QUANTIZE, DEQUANTIZE, BLOCK_SCALED_DOT)
COMPOSITE = "xla.scaled_dot"

_DEQUANTIZE_TYPES = {"F32": "f32", "BF16": "bf16", "F16": "f16"}

#: (element type, scale type) -> format, for the interchange forms (MX-SEMANTICS section 7)
_BY_TYPES = {(f.element, f.scale): f for f in FORMATS.values() if f.element != "i8"}


@dataclasses.dataclass(frozen=True)
class LegalizeXlaMx(ModulePass):
    """Rewrite XLA's MX custom calls and JAX's xla.scaled_dot composite into mx ops.

    ``stablehlo.custom_call @__op$quantize(x)`` (two results or one tuple result),
    ``@__op$dequantize(q, scale)`` and ``@__op$block_scaled_dot(lhs, rhs, lhs_scale[,
    rhs_scale[, global_scale]])`` (rank 2 or 3, contracting dimension last, batch dimension 0;
    ``backend_config`` as a JSON string or a dictionary, with
    ``scaled_dot_backend_config.dequantize_type`` and ``block_scaled_dot_backend_config.
    block_size`` for padded scales), and ``stablehlo.composite "xla.scaled_dot"`` become
    ``mx.quantize`` / ``mx.dequantize`` / ``mx.scaled_dot`` with explicit attributes.  The MX
    format follows from the element and scale types (f8E8M0FNU scales: MX formats; f8E4M3FN
    scales with f4E2M1FN elements: nvfp4).  A form that cannot be honoured (wrong operand
    count, scale type, shapes, unknown dequantize type, non-divisible block, i8 elements whose
    XLA meaning differs from mxint8) is an error at the op; nothing is silently skipped.  (An
    ``xla.scaled_dot`` whose operands are both f32/bf16/f16 is no MX form and stays as it is;
    an unscaled operand next to an MX one must carry the constant all-ones scale that
    ``jax.lax.scaled_dot`` passes.)

    Before::

        %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs) {backend_config =
             "{\\"scaled_dot_backend_config\\": {\\"dequantize_type\\": \\"F32\\"}}"}
             : (tensor<4x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>,
                tensor<8x2xf8E8M0FNU>) -> tensor<4x8xf32>

    After::

        %0 = "mx.scaled_dot"(%a, %as, %b, %bs) {compute_type = f32, dot_dimension_numbers =
             #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>,
             lhs_block_size = 32 : i64, lhs_format = "mxfp8_e4m3", rhs_block_size = 32 : i64,
             rhs_format = "mxfp8_e4m3"} : (...) -> tensor<4x8xf32>

    Example::

        mxlower-opt jax_module.mlir --mxlower-legalize-xla-mx='scale-mode=nearest'
    """

    name: ClassVar[str] = "mxlower-legalize-xla-mx"
    scale_mode: str = option("nearest", "scale_mode given to the mx.quantize that replaces "
                             "__op$quantize (XLA's own rule is nearest)", choices=SCALE_MODES)

    def run(self, op: Any) -> None:
        from mxlower.passes.verify_mx import verify_or_fail

        verify_or_fail(op)
        legalize(op, scale_mode=self.scale_mode)


class _Unsupported(Exception):
    pass


def legalize(root: Any, *, scale_mode: str = "nearest") -> int:
    """Rewrite every MX custom call and xla.scaled_dot composite under ``root``; returns the
    number rewritten.  Every op that cannot be rewritten gets an error; the first is raised."""

    def is_mx_form(o: Any) -> bool:
        if o.name == "stablehlo.custom_call":
            return _target(o) in TARGETS
        return (o.name == "stablehlo.composite" and _composite_name(o) == COMPOSITE
                and _has_mx_operand(o))

    found = collect_ops(root, is_mx_form)
    failures = []
    for o in found:
        try:
            with o.location:
                if o.name == "stablehlo.composite":
                    _composite(o)
                elif _target(o) == QUANTIZE:
                    _quantize(o, scale_mode)
                elif _target(o) == DEQUANTIZE:
                    _dequantize(o)
                else:
                    _block_scaled_dot(o)
        except _Unsupported as e:
            what = f"'{COMPOSITE}'" if o.name == "stablehlo.composite" else f"@{_target(o)}"
            failures.append(diag.error(o, f"{what}: {e}"))
    if failures:
        raise failures[0]
    return len(found)


# ----------------------------------------------------------------------------- helpers


def _str_attr(o: Any, name: str) -> str | None:
    from mxlower.bindings.jaxlib import ir

    if name not in o.attributes:
        return None
    a = o.attributes[name]
    return a.value if isinstance(a, ir.StringAttr) else None


def _target(o: Any) -> str | None:
    return _str_attr(o, "call_target_name")


def _composite_name(o: Any) -> str | None:
    return _str_attr(o, "name")


def _shape_elt(v: Any, what: str, blocked_last: bool = False) -> tuple[tuple[int, ...], str]:
    """(shape, element type).  Static shapes only, except with ``blocked_last``: then only
    the last (blocked) dimension must be static (a dynamic size is ``ShapedType``'s)."""
    from mxlower.bindings.jaxlib import ir

    t = v.type
    if not isinstance(t, ir.RankedTensorType):
        raise _Unsupported(f"{what} must be a ranked tensor, got {t}")
    if blocked_last:
        if t.rank and t.is_dynamic_dim(t.rank - 1):
            raise _Unsupported(f"the last (blocked) dimension of {what} must be static, got {t}")
    elif not t.has_static_shape:
        raise _Unsupported(f"{what} must be a statically shaped tensor, got {t}")
    return tuple(t.shape), str(t.element_type)


def _fmt(elt: str, selt: str, what: str) -> MXFormat:
    f = _BY_TYPES.get((elt, selt))
    if f is not None:
        return f
    if elt == "i8" and selt == "f8E8M0FNU":
        raise _Unsupported(
            f"{what}: i8 elements with f8E8M0FNU scales are ambiguous (XLA scales the integer "
            "code, MX mxint8 scales code * 2^-6); write mx ops with format = \"mxint8\" instead")
    if selt not in ("f8E8M0FNU", "f8E4M3FN"):
        raise _Unsupported(f"{what}: scale type {selt} is not an MX scale type (f8E8M0FNU, or "
                           "f8E4M3FN for nvfp4)")
    pairs = ", ".join(f"{e}/{s}" for e, s in _BY_TYPES)
    raise _Unsupported(f"{what}: elements of type {elt} with {selt} scales are no MX format "
                       f"(supported element/scale types: {pairs})")


def _block(n: int, ns: int, what: str) -> int:
    from mxlower.dialect.mx import DYNAMIC

    if ns == DYNAMIC:
        raise _Unsupported(f"{what}: the last (blocked) dimension must be static")
    if ns <= 0 or n % ns:
        raise _Unsupported(f"{what}: {ns} scales do not evenly block {n} elements along the "
                           "last dimension")
    return n // ns


def _backend_config(o: Any) -> dict[str, Any]:
    from mxlower.bindings.jaxlib import ir

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
            raise _Unsupported(f"backend_config is not valid JSON ({e.msg} at character "
                               f"{e.pos})") from None
        if not isinstance(cfg, dict):
            raise _Unsupported("backend_config must be a JSON object")
        return cfg
    if isinstance(a, ir.DictAttr):
        return _to_py(a)
    raise _Unsupported(f"backend_config must be a string or a dictionary, got {a}")


def _to_py(a: Any) -> Any:
    from mxlower.bindings.jaxlib import ir

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
    from mxlower.bindings.jaxlib import ir

    if len(o.results) == n:
        return [r.type for r in o.results]
    if len(o.results) == 1 and isinstance(o.results[0].type, ir.TupleType):
        t = o.results[0].type
        if t.num_types == n:
            return [t.get_type(i) for i in range(n)]
    raise _Unsupported(f"expects {n} results ({what}) or one tuple of them, got "
                       f"{', '.join(str(r.type) for r in o.results) or 'none'}")


def _replace(o: Any, values: list[Any]) -> None:
    """Replace the custom call's results (or its single tuple result) by ``values``."""
    from mxlower.bindings.jaxlib import ir, stablehlo

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
    from mxlower.bindings.jaxlib import ir
    from mxlower.dialect import mx

    if len(o.operands) != 1:
        raise _Unsupported(f"expects 1 operand (the input), got {len(o.operands)}")
    shape, elt = _shape_elt(o.operands[0], "the input", blocked_last=True)
    if elt not in WIDE_TYPES:
        raise _Unsupported(f"the input must be f32, bf16 or f16, got {elt}")
    if not shape:
        raise _Unsupported("the input must have at least one dimension")
    qt, st = _results(o, 2, "elements, scales")
    qt, st = ir.RankedTensorType(qt), ir.RankedTensorType(st)
    q_shape, s_shape = tuple(qt.shape), tuple(st.shape)
    fmt = _fmt(str(qt.element_type), str(st.element_type), "the results")
    if q_shape != shape or len(s_shape) != len(shape) or s_shape[:-1] != shape[:-1]:
        raise _Unsupported(f"result shapes {qt} and {st} do not fit the input's shape "
                           f"{o.operands[0].type} (blocks run along the last dimension)")
    k = _block(shape[-1], s_shape[-1], "the scales")
    new = mx.quantize(o.operands[0], fmt.name, block_size=k, axis=len(shape) - 1,
                      scale_mode=None if fmt.is_nvfp4 else scale_mode,
                      loc=o.location, ip=ir.InsertionPoint(o))
    _replace(o, [new.results[0], new.results[1]])


def _dequantize(o: Any) -> None:
    from mxlower.bindings.jaxlib import ir
    from mxlower.dialect import mx

    if len(o.operands) != 2:
        raise _Unsupported(f"expects 2 operands (elements, scales), got {len(o.operands)}")
    shape, elt = _shape_elt(o.operands[0], "the elements", blocked_last=True)
    s_shape, selt = _shape_elt(o.operands[1], "the scales", blocked_last=True)
    fmt = _fmt(elt, selt, "the operands")
    (rt,) = _results(o, 1, "the dequantized tensor")
    rt = ir.RankedTensorType(rt)
    r_elt = str(rt.element_type)
    if r_elt not in WIDE_TYPES:
        raise _Unsupported(f"the result must be f32, bf16 or f16, got {r_elt}")
    if not shape or tuple(rt.shape) != shape or len(s_shape) != len(shape) \
            or s_shape[:-1] != shape[:-1]:
        raise _Unsupported(f"shapes do not fit: elements {o.operands[0].type}, scales "
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
        raise _Unsupported(f"the {side} scales must have rank {rank}, got {s.type}")
    if rank == 3 and s_shape[0] != shape[0]:
        raise _Unsupported(f"the {side} scales' batch dimension {s_shape[0]} differs from the "
                           f"operand's {shape[0]}")
    if s_shape[-2] < shape[-2]:
        raise _Unsupported(f"the {side} scales {s.type} have fewer rows than the operand "
                           f"{v.type}")
    kdim = shape[-1]
    if bs is None:
        k = _block(kdim, s_shape[-1], f"the {side} scales")
        want = kdim // k
    else:
        if kdim % bs:
            raise _Unsupported(f"contracting dimension {kdim} of the {side} operand is not a "
                               f"multiple of block_size {bs}")
        k, want = bs, kdim // bs
        if s_shape[-1] < want:
            raise _Unsupported(f"the {side} scales have {s_shape[-1]} blocks along the "
                               f"contracting dimension; block_size {bs} needs {want}")
    limits = list(s_shape[:-2]) + [shape[-2], want]
    return b.slice(s, limits), fmt, k


def _block_scaled_dot(o: Any) -> None:
    from mxlower.bindings.jaxlib import ir
    from mxlower.dialect import mx
    from mxlower.stablehlo_builders import Builder

    n = len(o.operands)
    if not 3 <= n <= 5:
        raise _Unsupported(f"expects 3, 4 or 5 operands (lhs, rhs, lhs_scale[, rhs_scale[, "
                           f"global_scale]]), got {n}")
    cfg = _backend_config(o)
    sd = cfg.get("scaled_dot_backend_config", {}) or {}
    bsd = cfg.get("block_scaled_dot_backend_config", {}) or {}
    if not isinstance(sd, dict) or not isinstance(bsd, dict):
        raise _Unsupported("backend_config sections must be objects")
    dq = sd.get("dequantize_type")
    if dq is not None and dq not in _DEQUANTIZE_TYPES:
        raise _Unsupported(f"unknown dequantize_type '{dq}' (known: "
                           f"{', '.join(_DEQUANTIZE_TYPES)})")
    compute = _DEQUANTIZE_TYPES.get(dq, "f32")
    bs = bsd.get("block_size")
    if bs is not None and (not isinstance(bs, int) or isinstance(bs, bool) or bs <= 0):
        raise _Unsupported(f"block_size must be a positive integer, got {bs!r}")
    lhs, rhs = o.operands[0], o.operands[1]
    ls, _ = _shape_elt(lhs, "the lhs operand")
    rs, r_elt = _shape_elt(rhs, "the rhs operand")
    rank = len(ls)
    if rank not in (2, 3) or len(rs) != rank:
        raise _Unsupported(f"operands must both have rank 2 or 3, got {lhs.type} and {rhs.type}")
    batch = [0] if rank == 3 else []
    for key in ("lhs_batch_dimensions", "rhs_batch_dimensions"):
        if key in sd and list(sd[key]) != batch:
            raise _Unsupported(f"{key} {sd[key]} is not supported for rank {rank} operands "
                               f"(expected {batch}: batch first, contracting last)")
    for key in ("lhs_contracting_dimensions", "rhs_contracting_dimensions"):
        if key in sd and list(sd[key]) != [rank - 1]:
            raise _Unsupported(f"{key} {sd[key]} is not supported (the contracting dimension "
                               "is the last one)")
    (rt,) = _results(o, 1, "the product")
    rt = ir.RankedTensorType(rt)
    res_elt = str(rt.element_type)
    if res_elt not in WIDE_TYPES:
        raise _Unsupported(f"the result must be f32, bf16 or f16, got {res_elt}")
    if ls[-1] != rs[-1] or (rank == 3 and ls[0] != rs[0]):
        raise _Unsupported(f"operand shapes {lhs.type} and {rhs.type} do not contract "
                           "(contracting dimension last, batch dimension first)")
    want = tuple(ls[:-1]) + (rs[-2],)
    if tuple(rt.shape) != want:
        raise _Unsupported(f"the result type {rt} does not match the product's shape "
                           f"{'x'.join(map(str, want))}")
    b = Builder(o.location, ir.InsertionPoint(o))
    ls_v, lfmt, lk = _scaled_side(b, lhs, o.operands[2], "lhs", rank, bs)
    if n >= 4:
        rs_v, rfmt, rk = _scaled_side(b, rhs, o.operands[3], "rhs", rank, bs)
    else:
        if r_elt not in WIDE_TYPES:
            raise _Unsupported(f"with 3 operands the rhs is unscaled and must be f32, bf16 or "
                               f"f16, got {r_elt}")
        rs_v, rfmt, rk = None, None, None
    g = None
    if n == 5:
        g_shape, g_elt = _shape_elt(o.operands[4], "the global scale")
        if g_shape != () or g_elt not in WIDE_TYPES:
            raise _Unsupported(f"the global scale must be a scalar f32, bf16 or f16, got "
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
    from mxlower.bindings.jaxlib import ir

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
    from mxlower.bindings.jaxlib import ir

    for v in list(o.operands)[:2]:
        t = v.type
        if not isinstance(t, ir.RankedTensorType) or str(t.element_type) not in WIDE_TYPES:
            return True
    return False


def _dims_attr(a: Any) -> tuple[list[int], list[int], list[int], list[int]]:
    try:
        (lc, rc), (lb, rb) = _to_py(a)
        return [int(x) for x in lc], [int(x) for x in rc], [int(x) for x in lb], \
            [int(x) for x in rb]
    except (TypeError, ValueError):
        raise _Unsupported(f"dimension_numbers must be [[lhs_contracting, rhs_contracting], "
                           f"[lhs_batch, rhs_batch]], got {a}") from None


def _composite_side(v: Any, s: Any, side: str, contracting: list[int]):
    shape, elt = _shape_elt(v, f"the {side} operand")
    s_shape, selt = _shape_elt(s, f"the {side} scale")
    if len(s_shape) != len(shape):
        raise _Unsupported(f"the {side} scale {s.type} must have the operand's rank "
                           f"{len(shape)}")
    differ = [d for d in range(len(shape)) if s_shape[d] != shape[d]]
    if elt in WIDE_TYPES:
        if _is_ones(s):
            return None, None, None, None
        raise _Unsupported(f"the {side} operand has element type {elt} with a scale that is "
                           "not a constant 1; only MX-typed operands may carry scales")
    fmt = _fmt(elt, selt, f"the {side} operand")
    if len(differ) > 1:
        raise _Unsupported(f"the {side} scale {s.type} blocks more than one dimension of "
                           f"{v.type}")
    if differ:
        axis = differ[0]
        if axis not in contracting:
            raise _Unsupported(f"the {side} scale blocks dimension {axis}, which is not a "
                               "contracting dimension")
    elif contracting:
        axis = contracting[0]
    else:
        raise _Unsupported(f"the {side} operand has no contracting dimension to block")
    k = _block(shape[axis], s_shape[axis], f"the {side} scale") if s_shape[axis] else 0
    if k == 0:
        raise _Unsupported(f"the {side} scale has size 0 along dimension {axis}")
    return s, fmt, k, axis


def _composite(o: Any) -> None:
    from mxlower.bindings.jaxlib import ir
    from mxlower.dialect import mx

    if len(o.operands) != 4:
        raise _Unsupported(f"expects 4 operands (lhs, rhs, lhs_scale, rhs_scale), got "
                           f"{len(o.operands)}")
    attrs = o.attributes["composite_attributes"] if "composite_attributes" in o.attributes \
        else None
    if attrs is None or not isinstance(attrs, ir.DictAttr) or "dimension_numbers" not in attrs:
        raise _Unsupported("missing composite_attributes.dimension_numbers")
    lc, rc, lb, rb = _dims_attr(attrs["dimension_numbers"])
    if len(o.results) != 1:
        raise _Unsupported(f"expects 1 result, got {len(o.results)}")
    _, res_elt = _shape_elt(o.results[0], "the result")
    if res_elt not in WIDE_TYPES:
        raise _Unsupported(f"the result must be f32, bf16 or f16, got {res_elt}")
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
        raise _Unsupported(str(e)) from None
    o.results[0].replace_all_uses_with(new.results[0])
    o.erase()
