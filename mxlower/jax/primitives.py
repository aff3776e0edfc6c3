"""The JAX primitives behind mxlower.jax: ``mx_quantize``, ``mx_dequantize``, ``mx_scaled_dot``.

Each primitive has an abstract evaluation rule, a lowering rule registered for every platform
(it builds the ``mx`` op and runs mxlower's pipeline on it, see :mod:`mxlower.jax.lowering`),
a batching rule (``vmap``) and a JVP rule (``jvp``/``grad``; reverse mode comes from JAX
transposing the linear JVP).

Parameters are static Python values: format names, non-negative axes (relative to the operand
as bound), block sizes, dimension numbers as tuples, dtypes as NumPy dtypes, and flags saying
which optional operands are present.

Operands
--------
* ``mx_quantize(x[, global_scale]) -> (elements, scales)``
* ``mx_dequantize(elements, scales[, global_scale][, ste]) -> y``
* ``mx_scaled_dot(lhs[, lhs_scales], rhs[, rhs_scales][, global_scale][, lhs_ste][, rhs_ste])``
* ``mx_convert(x) -> y``: a plain conversion (docs/semantics.md section 2) between f32/bf16/f16
  and a narrow float type; f6 values as uint8 codes

``ste`` operands are straight-through-estimator sources: the lowering ignores them (XLA drops
them), the JVP rules differentiate through them.  Elements, scales and global scales carry no
tangent (their JVP contribution is zero).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from mxlower.bindings import jax_private
from mxlower.bindings.jaxlib import ir, stablehlo
from mxlower.dialect import mx
from mxlower.formats import FORMATS
from mxlower.jax.dtypes import element_dtype, held_as_codes, mlir_name, scale_dtype, storage_dtype
from mxlower.ir.stablehlo_builder import Builder
from mxlower.jax.lowering import emit, tensor_type
from mxlower.lowering import mx_math

__all__ = ["convert_p", "dequantize_p", "quantize_p", "scaled_dot_p", "scaled_dot_spec"]

_F32 = np.dtype(np.float32)


def _zero(primal: Any) -> ad.Zero:
    return ad.Zero(jax.typeof(primal).to_tangent_aval())


def _is_zero(t: Any) -> bool:
    return type(t) is ad.Zero


# =============================================================================== quantize

quantize_p = Primitive("mx_quantize")
quantize_p.multiple_results = True


def _impl(prim: Primitive):
    """Eager evaluation: the primitive compiled alone, as JAX's own primitives are
    (:func:`mxlower.bindings.jax_private.apply_primitive`; it also works under
    ``jax.disable_jit()``, which a ``jax.jit`` wrapper would turn into infinite recursion)."""
    return functools.partial(jax_private.apply_primitive, prim)


def _define(prim: Primitive, abstract, lowering, jvp, batch) -> None:
    """Register a primitive's rules: eager impl, abstract eval, the lowering (one rule for every
    platform), JVP and batching."""
    prim.def_impl(_impl(prim))
    prim.def_abstract_eval(abstract)
    mlir.register_lowering(prim, lowering)
    ad.primitive_jvps[prim] = jvp
    batching.primitive_batchers[prim] = batch


def _quantize_abstract(x, *g, format, block_size, axis, scale_mode, impl="auto"):  # noqa: A002
    fmt = FORMATS[format]
    return (jax.core.ShapedArray(x.shape, element_dtype(fmt)),
            jax.core.ShapedArray(mx.scale_shape(x.shape, axis, block_size), scale_dtype(fmt)))


def _quantize_lowering(ctx, x, *g, format, block_size, axis, scale_mode,  # noqa: A002
                       impl="auto"):  # impl: see mxlower.jax.kernels (the CPU rules)
    fmt = FORMATS[format]
    (aval,) = ctx.avals_in[:1]
    arg_types = [x.type] + [v.type for v in g]
    result_types = [tensor_type(aval.shape, fmt.element),
                    tensor_type(mx.scale_shape(aval.shape, axis, block_size), fmt.scale)]

    def build(args):
        op = mx.quantize(args[0], format, block_size=block_size, axis=axis,
                         scale_mode=scale_mode, global_scale=args[1] if g else None)
        return list(op.results)

    return emit(build, [x, *g], arg_types, result_types)


def _quantize_jvp(primals, tangents, **params):
    outs = quantize_p.bind(*primals, **params)
    return outs, [_zero(o) for o in outs]


def _quantize_batch(args, dims, **params):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    front = [batching.bdim_at_front(a, d, size) for a, d in zip(args, dims)]
    if len(args) > 1 and dims[1] is not None:  # per-example global scales: one op each
        outs = lax.map(lambda a: tuple(quantize_p.bind(*a, **params)), tuple(front))
        return list(outs), [0, 0]
    p = dict(params, axis=params["axis"] + 1)
    x = batching.bdim_at_front(args[0], dims[0], size)
    return quantize_p.bind(x, *args[1:], **p), [0, 0]


_define(quantize_p, _quantize_abstract, _quantize_lowering, _quantize_jvp, _quantize_batch)


# =============================================================================== dequantize

dequantize_p = Primitive("mx_dequantize")


def _dequantize_abstract(e, s, *rest, format, block_size, axis, dtype, has_g, has_ste,  # noqa: A002
                         impl="auto"):
    return jax.core.ShapedArray(e.shape, dtype)


def _dequantize_lowering(ctx, e, s, *rest, format, block_size, axis, dtype, has_g,  # noqa: A002
                         has_ste, impl="auto"):  # impl: see mxlower.jax.kernels
    fmt = FORMATS[format]
    aval_e, aval_s = ctx.avals_in[:2]
    g = [rest[0]] if has_g else []
    out_type = mlir_name(dtype)
    arg_types = [tensor_type(aval_e.shape, fmt.element), tensor_type(aval_s.shape, fmt.scale)]
    arg_types += [v.type for v in g]

    def build(args):
        op = mx.dequantize(args[0], args[1], format, result_type=out_type,
                           block_size=block_size, axis=axis,
                           global_scale=args[2] if has_g else None)
        return list(op.results)

    return emit(build, [e, s, *g], arg_types, [tensor_type(aval_e.shape, out_type)])


def _dequantize_jvp(primals, tangents, *, dtype, has_ste, **params):
    out = dequantize_p.bind(*primals, dtype=dtype, has_ste=has_ste, **params)
    if not has_ste or _is_zero(tangents[-1]):
        return out, _zero(out)
    return out, lax.convert_element_type(tangents[-1], dtype)  # straight-through estimator


def _dequantize_batch(args, dims, *, axis, has_g, **params):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    front = [batching.bdim_at_front(a, d, size) for a, d in zip(args, dims)]
    p = dict(params, axis=axis, has_g=has_g)
    if has_g and dims[2] is not None:  # per-example global scales
        return lax.map(lambda a: dequantize_p.bind(*a, **p), tuple(front)), 0
    if has_g:
        front[2] = args[2]  # one global scale for the whole batch
    p["axis"] = axis + 1
    return dequantize_p.bind(*front, **p), 0


_define(dequantize_p, _dequantize_abstract, _dequantize_lowering, _dequantize_jvp, _dequantize_batch)


# =============================================================================== scaled dot

scaled_dot_p = Primitive("mx_scaled_dot")

#: parameter names of one side, in the order ``lhs_*`` / ``rhs_*``
_SIDE = ("format", "block_size", "axis", "ste")


def _layout(params) -> dict[str, int | None]:
    """Operand index of each optional operand."""
    idx: dict[str, int | None] = {}
    i = 0
    for side in ("lhs", "rhs"):
        idx[side] = i
        i += 1
        if params[f"{side}_format"] is not None:
            idx[f"{side}_scales"] = i
            i += 1
        else:
            idx[f"{side}_scales"] = None
    idx["g"] = i if params["has_g"] else None
    i += params["has_g"]
    for side in ("lhs", "rhs"):
        if params[f"{side}_ste"]:
            idx[f"{side}_ste"] = i
            i += 1
        else:
            idx[f"{side}_ste"] = None
    idx["n"] = i
    return idx


def _dot_shape(ls, rs, dn) -> tuple[int, ...]:
    (lc, rc), (lb, rb) = dn
    lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
    return tuple([ls[d] for d in lb] + [ls[d] for d in lf] + [rs[d] for d in rf])


def _scaled_dot_abstract(*avals, dimension_numbers, out_dtype, **params):
    ix = _layout(params)
    ls, rs = avals[ix["lhs"]].shape, avals[ix["rhs"]].shape
    return jax.core.ShapedArray(_dot_shape(ls, rs, dimension_numbers), out_dtype)


def _scaled_dot_lowering(ctx, *args, dimension_numbers, out_dtype, impl="auto",
                         **params):  # impl: see mxlower.jax.kernels (the CPU rules)
    if params["lhs_format"] is None and params["rhs_format"] is None:
        # two plain sides: no mx op holds them (it needs a scaled side), but the contraction
        # is the same exact one (section 6: no flushed subnormals, no overflowing partial sum)
        b = Builder(ir.Location.current, ir.InsertionPoint.current)
        s = scaled_dot_spec(ctx, args, dimension_numbers, out_dtype, params)
        return [mx_math.lower_scaled_dot(b, s, "f32")]
    ix = _layout(params)
    operands, arg_types = [], []
    for side in ("lhs", "rhs"):
        i = ix[side]
        name = params[f"{side}_format"]
        operands.append(args[i])
        if name is None:
            arg_types.append(args[i].type)
            continue
        fmt = FORMATS[name]
        si = ix[f"{side}_scales"]
        operands.append(args[si])
        arg_types += [tensor_type(ctx.avals_in[i].shape, fmt.element),
                      tensor_type(ctx.avals_in[si].shape, fmt.scale)]
    if ix["g"] is not None:
        operands.append(args[ix["g"]])
        arg_types.append(args[ix["g"]].type)
    out_type = mlir_name(out_dtype)
    (lc, rc), (lb, rb) = dimension_numbers
    lf, rf = params["lhs_format"], params["rhs_format"]

    def build(a):
        it = iter(a)
        lhs = next(it)
        ls = next(it) if lf else None
        rhs = next(it)
        rs = next(it) if rf else None
        g = next(it, None)
        op = mx.scaled_dot(lhs, ls, rhs, rs, lhs_format=lf, rhs_format=rf,
                           lhs_contracting=lc, rhs_contracting=rc, lhs_batch=lb, rhs_batch=rb,
                           lhs_block_size=params["lhs_block_size"],
                           rhs_block_size=params["rhs_block_size"],
                           lhs_axis=params["lhs_axis"], rhs_axis=params["rhs_axis"],
                           result_type=out_type, compute_type="f32", global_scale=g)
        return list(op.results)

    shape = ctx.avals_out[0].shape
    return emit(build, operands, arg_types, [tensor_type(shape, out_type)])


def scaled_dot_spec(ctx, args, dimension_numbers, out_dtype, params) -> mx.ScaledDotOp:
    """The ``mx.scaled_dot`` an ``mx_scaled_dot`` stands for, as :func:`mxlower.dialect.mx.parse`
    describes one (``op`` None), on JAX's IR values: what :func:`mxlower.lowering.mx_math.
    lower_scaled_dot` takes when a rule emits the contraction directly (the CPU kernels,
    :mod:`mxlower.jax.kernels`)."""
    ix = _layout(params)
    sides = []
    for side in ("lhs", "rhs"):
        i, name = ix[side], params[f"{side}_format"]
        shape = tuple(ctx.avals_in[i].shape)
        if name is None:
            sides.append(mx.Operand(args[i], None, None, None, None, shape,
                                    mlir_name(ctx.avals_in[i].dtype)))
            continue
        fmt = FORMATS[name]
        sides.append(mx.Operand(args[i], args[ix[f"{side}_scales"]], fmt,
                                params[f"{side}_block_size"], params[f"{side}_axis"], shape,
                                fmt.element))
    (lc, rc), (lb, rb) = dimension_numbers
    g = args[ix["g"]] if ix["g"] is not None else None
    return mx.ScaledDotOp(None, sides[0], sides[1], g, tuple(lc), tuple(rc), tuple(lb),
                          tuple(rb), "f32", mlir_name(out_dtype), tuple(ctx.avals_out[0].shape))


def _operand_f32(args, params, ix, side: str):
    """The f32 value of one side: dequantized (without nvfp4's global scale) or converted."""
    x = args[ix[side]]
    name = params[f"{side}_format"]
    if name is None:
        return lax.convert_element_type(x, _F32)
    return dequantize_p.bind(x, args[ix[f"{side}_scales"]], format=name,
                             block_size=params[f"{side}_block_size"],
                             axis=params[f"{side}_axis"], dtype=_F32, has_g=False,
                             has_ste=False, impl=params.get("impl", "auto"))


def _operand_tangent(tangents, params, ix, side: str):
    if params[f"{side}_format"] is None:
        t = tangents[ix[side]]
    elif ix[f"{side}_ste"] is not None:
        t = tangents[ix[f"{side}_ste"]]
    else:
        return None
    return None if _is_zero(t) else lax.convert_element_type(t, _F32)


def _scaled_dot_jvp(primals, tangents, *, dimension_numbers, out_dtype, **params):
    out = scaled_dot_p.bind(*primals, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                            **params)
    ix = _layout(params)
    lt = _operand_tangent(tangents, params, ix, "lhs")
    rt = _operand_tangent(tangents, params, ix, "rhs")
    if lt is None and rt is None:
        return out, _zero(out)
    t = None
    if lt is not None:
        t = lax.dot_general(lt, _operand_f32(primals, params, ix, "rhs"), dimension_numbers,
                            preferred_element_type=_F32)
    if rt is not None:
        u = lax.dot_general(_operand_f32(primals, params, ix, "lhs"), rt, dimension_numbers,
                            preferred_element_type=_F32)
        t = u if t is None else t + u
    if ix["g"] is not None:
        t = t * primals[ix["g"]]
    return out, lax.convert_element_type(t, out_dtype)


def _scaled_dot_batch(args, dims, *, dimension_numbers, **params):
    ix = _layout(params)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    front = [batching.bdim_at_front(a, d, size) for a, d in zip(args, dims)]
    if ix["g"] is not None and dims[ix["g"]] is not None:  # per-example global scales
        p = dict(params, dimension_numbers=dimension_numbers)
        return lax.map(lambda a: scaled_dot_p.bind(*a, **p), tuple(front)), 0
    new = list(front)
    if ix["g"] is not None:
        new[ix["g"]] = args[ix["g"]]
    (lc, rc), (lb, rb) = dimension_numbers

    def shift(ds):
        return tuple(d + 1 for d in ds)

    dn = ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb)))
    p = dict(params)
    for side in ("lhs", "rhs"):
        if p[f"{side}_axis"] is not None:
            p[f"{side}_axis"] += 1
    return scaled_dot_p.bind(*new, dimension_numbers=dn, **p), 0


_define(scaled_dot_p, _scaled_dot_abstract, _scaled_dot_lowering, _scaled_dot_jvp, _scaled_dot_batch)


# =============================================================================== convert

convert_p = Primitive("mx_convert")


def _convert_abstract(x, *, src, dst, impl="auto"):
    return jax.core.ShapedArray(x.shape, storage_dtype(dst))


def _convert_lowering(ctx, x, *, src, dst, impl="auto"):  # impl: see mxlower.jax.kernels
    (aval,) = ctx.avals_in
    out_t = tensor_type(aval.shape, dst)

    def build(args):
        return [stablehlo.ConvertOp(out_t, args[0]).result]

    return emit(build, [x], [tensor_type(aval.shape, src)], [out_t])


def _convert_jvp(primals, tangents, *, src, dst, **params):
    (x,), (t,) = primals, tangents
    out = convert_p.bind(x, src=src, dst=dst, **params)
    if held_as_codes(src) or held_as_codes(dst) or _is_zero(t):
        return out, _zero(out)  # uint8 codes carry no tangent
    return out, lax.convert_element_type(t, storage_dtype(dst))


def _convert_batch(args, dims, **params):
    return convert_p.bind(args[0], **params), dims[0]


_define(convert_p, _convert_abstract, _convert_lowering, _convert_jvp, _convert_batch)
