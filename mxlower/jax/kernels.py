"""mxlower.jax on the CPU and on NVIDIA GPUs: ``mx_quantize``, ``mx_dequantize`` and
``mx_convert`` lowered to mxlower's fused kernels (XLA FFI custom calls,
:mod:`mxlower.execution.ffi` and :mod:`mxlower.execution.ffi_cuda`) instead of expanded
StableHLO; on the CPU, ``mx_scaled_dot``'s operands prepared by the dequantize kernel.

``mx_scaled_dot`` (CPU only): where :func:`dot_plan` gives a kernel (a GEMV or small-M
dot, each side contracted over its blocked axis), mxlower's fused dot kernel
(:mod:`mxlower.execution.ffi_dot`: the packed operands read as stored, never dequantized
into memory, each side brought to ``[B, rows, K]``) computes the whole contraction: it makes
docs/semantics.md section 6's run-time range test itself and takes the exact f64
contraction where the f32 one could flush or overflow, so no XLA conditional or reduction is
left around the call.  Otherwise :func:`mxlower.lowering.mx_math.lower_scaled_dot` emits
the run-time test on the scales and a ``stablehlo.if``: where the f32 contraction is
provably exact, each MX side dequantized to f32 by the dequantize kernel (nvfp4 without its
global scale: docs/semantics.md section 5's exact values, subnormals included) and XLA's f32
``dot_general``; otherwise the f64 ``dot_general`` on those f32 values read exactly from
their bits (XLA:CPU's f32 -> f64 conversion flushes subnormals); then the global scale and
the result type as in the portable lowering.  The f64 branch gives the portable lowering's
bits; the f32 one agrees with it within docs/semantics.md section 6's bound.  The
dequantize kernel calls are emitted inside each branch of the ``stablehlo.if``, so only the
branch taken runs them (emitted once before it, with the f32 results as the conditional's
operands, a 1024x1024x1024 dot took 1-2 ms longer: BENCHMARKS.md).
On CUDA, :mod:`mxlower.jax.cuda_dot` emits XLA's block-scaled dot for the pairs cuDNN runs and
uses this module's rule (with the CUDA dequantize kernels) for the others (run on an H200 and
an H100: test_gpu_jax.py, BENCHMARKS.md).

``impl`` (a parameter of :func:`mxlower.jax.quantize` / :func:`~mxlower.jax.dequantize` /
:func:`~mxlower.jax.convert` and of the primitives) chooses:

* ``"auto"`` (default): when the call is lowered for the CPU or CUDA, the kernel -- one pass
  over the input, bit-exact with the StableHLO lowering and :mod:`mxlower.reference`; compiled
  and registered on first use, once per process (for CUDA: the kernel's PTX/cubins built with
  xtc's llc and CUDA's ptxas, and the handler compiled for the host).  The portable StableHLO
  is used instead where no kernel applies: other platforms, a kernel that cannot exist (f4
  elements with an odd block size), symbolic shapes and ``jax.export`` (a custom call is not
  portable), programs partitioned over several CUDA devices, or without a mesh (on the CPU
  :mod:`mxlower.jax.sharding` runs the kernels per shard),
  inside :func:`mxlower.jax.lower`, and where upstream MLIR (for CUDA also llc) is not
  installed;
* ``"xla"``: always the portable StableHLO (``mxlower-mx-to-stablehlo``), on every platform.

Importing this module registers the CPU and CUDA lowering rules
(``mlir.register_lowering(..., platform="cpu" / "cuda")``); every other platform keeps the
primitives' own rule.  JAX's transformations are unaffected: ``vmap``, ``jvp``/``grad`` rebind
the same primitives, and the kernel handles any leading (batch) dimensions.
"""

from __future__ import annotations

import contextlib
import operator
import os
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
from jax.interpreters import mlir

from mxlower import types
from mxlower.bindings import jax_private
from mxlower.bindings.jaxlib import ir
from mxlower.execution import ffi, ffi_cuda, ffi_dot
from mxlower.execution import ffi_abi as abi
from mxlower.ir.stablehlo_builder import Builder
import mxlower.jax.primitives as primitives
import mxlower.jax.sharding as sharding
from mxlower.lowering import dot_call, dot_kernels, mx_math
from mxlower.lowering.dot_kernels import DotSpec
from mxlower.lowering.mx_kernels import CastSpec, ConvertSpec, KernelSpec

__all__ = ["IMPLS", "cast_rule", "cast_spec", "check_impl", "custom_calls_allowed",
           "dequantize_spec", "portable", "quantize_spec"]

IMPLS = ("auto", "xla")

_F32 = np.dtype(np.float32)
_BF16 = np.dtype(ml_dtypes.bfloat16)

#: While set, every lowering is the portable StableHLO (``mxlower.jax.lower``).  A JAX config
#: state so that jit's trace and lowering caches tell the two apart.
_portable = jax_private.bool_state(
    "mxlower_portable_lowering", False,
    "Lower mxlower.jax's primitives to portable StableHLO even on the CPU (no FFI kernels).",
    include_in_jit_key=True, include_in_trace_context=True)


@contextlib.contextmanager
def portable() -> Iterator[None]:
    """Within the block, mxlower.jax lowers to the portable StableHLO everywhere."""
    with _portable(True):
        yield


def check_impl(impl: Any, fn: str) -> str:
    """``impl`` if it is "auto" or "xla"; ValueError naming the argument otherwise."""
    if impl not in IMPLS:
        raise ValueError(f"{fn}: unknown argument 'impl' {impl!r} (known: {', '.join(IMPLS)})")
    return impl


def _wide(dtype: Any) -> str:
    return types.of_dtype(np.dtype(dtype)).mlir


def quantize_spec(aval: Any, format: str, block_size: int, scale_mode: str | None,  # noqa: A002
                  has_g: bool) -> KernelSpec | None:
    """The kernel of an ``mx_quantize`` on ``aval``, or None where none applies."""
    try:
        return KernelSpec("quantize", format, _wide(aval.dtype), scale_mode or "floor",
                          block_size, global_scale=has_g)
    except ValueError:
        return None


def dequantize_spec(format: str, block_size: int, dtype: Any,  # noqa: A002
                    has_g: bool) -> KernelSpec | None:
    """The kernel of an ``mx_dequantize`` to ``dtype``, or None where none applies."""
    try:
        return KernelSpec("dequantize", format, _wide(dtype), block_size=block_size,
                          global_scale=has_g)
    except ValueError:
        return None


def cast_spec(aval: Any, number: str, scale: str | None, roundmode: str, scalemode: str,
              platform: str = "cpu") -> CastSpec | None:
    """The kernel of an ``mx_cast`` on ``aval``, or None where none applies (laid out as
    :func:`mxlower.execution.ffi.cast_layout` says).  On CUDA a tensor scale (a flattened
    layout) keeps the StableHLO: its one tile would be one GPU thread.  Lookup tables and
    two-level scales (``_gf32``) take the GPU kernels as on the CPU (their gpu.func bodies are
    run on the CPU against the reference and their PTX assembled by ptxas in the tests; no GPU
    ran them yet)."""
    if scale is not None and not _static(aval.shape):
        return None
    try:
        _, flat, kscale, length = ffi.cast_layout(aval.shape, scale)
        if flat and platform != "cpu":
            return None
        return CastSpec(number, kscale, _wide(aval.dtype), roundmode, scalemode, length)
    except ValueError:
        return None


def _static(shape: Any) -> bool:
    try:
        for d in shape:
            operator.index(d)
    except TypeError:  # a symbolic dimension (jax.export shape polymorphism)
        return False
    return True


def _per_device(ctx: Any) -> bool:
    """Whether the lowered program runs unpartitioned: on one device, or inside a
    ``shard_map`` over every mesh axis.  XLA's SPMD partitioner cannot split a custom call (it
    would gather the whole array onto every device), so partitioned programs keep the
    StableHLO, which it partitions block by block."""
    ac = ctx.module_context.axis_context
    if hasattr(ac, "num_devices"):  # ShardingContext
        return ac.num_devices == 1
    if hasattr(ac, "manual_axes"):  # SPMDAxisContext
        return set(ac.manual_axes) == set(ac.mesh.axis_names)
    return False


#: platform -> whether its kernels can be built here
_AVAILABLE = {"cpu": ffi.available, "cuda": ffi_cuda.available}


def _kernel_applies(ctx: Any, impl: str, spec: KernelSpec | ConvertSpec | None,
                    platform: str) -> bool:
    return (impl == "auto" and spec is not None and not _portable.value
            and not ctx.module_context.lowering_parameters.for_export
            and all(_static(a.shape) for a in ctx.avals_in) and _AVAILABLE[platform]())


def custom_calls_allowed(ctx: Any, impl: str) -> bool:
    """Whether a call with ``impl`` may become a custom call other than mxlower's kernels
    (XLA's block-scaled dot on CUDA, :mod:`mxlower.jax.cuda_dot`): as for the kernels, not
    for ``impl="xla"``, ``lower``, ``jax.export``, symbolic shapes or partitioned programs."""
    return (impl == "auto" and not _portable.value
            and not ctx.module_context.lowering_parameters.for_export
            and all(_static(a.shape) for a in ctx.avals_in) and _per_device(ctx))


def _use_kernel(ctx: Any, impl: str, spec: KernelSpec | ConvertSpec | None,
                platform: str) -> bool:
    return _kernel_applies(ctx, impl, spec, platform) and _per_device(ctx)


def _sharded(ctx: Any, spec: KernelSpec | ConvertSpec | None, platform: str,
             params: dict[str, Any]) -> bool:
    """Whether the call runs its kernel per shard of a partitioned program
    (:mod:`mxlower.jax.sharding`; on the CPU)."""
    return (platform == "cpu" and not _per_device(ctx)
            and _kernel_applies(ctx, params.get("impl", "auto"), spec, platform)
            and sharding.applies(ctx, params))


def _quantize_rule(platform: str):
    def rule(ctx, x, *g, format, block_size, axis, scale_mode, impl="auto"):  # noqa: A002
        spec = quantize_spec(ctx.avals_in[0], format, block_size, scale_mode, bool(g))
        params = dict(format=format, block_size=block_size, axis=axis, scale_mode=scale_mode,
                      impl=impl)
        if _sharded(ctx, spec, platform, params):
            return sharding.lower(ctx, x, *g, **params)
        if not _use_kernel(ctx, impl, spec, platform):
            return primitives._quantize_lowering(ctx, x, *g, format=format,
                                                 block_size=block_size, axis=axis,
                                                 scale_mode=scale_mode)

        def run(x, *g):
            return ffi.quantize(x, format, axis=axis, block_size=block_size,
                                scale_mode=scale_mode or "floor",
                                global_scale=g[0] if g else None, platform=platform)

        return mlir.lower_fun(run, multiple_results=True)(ctx, x, *g)

    return rule


def _dequantize_rule(platform: str):
    def rule(ctx, e, s, *rest, format, block_size, axis, dtype, has_g,  # noqa: A002
             has_ste, impl="auto"):
        spec = dequantize_spec(format, block_size, dtype, has_g)
        params = dict(format=format, block_size=block_size, axis=axis, dtype=dtype,
                      has_g=has_g, has_ste=has_ste, impl=impl)
        if _sharded(ctx, spec, platform, params):
            return sharding.lower(ctx, e, s, *rest, **params)
        if not _use_kernel(ctx, impl, spec, platform):
            return primitives._dequantize_lowering(ctx, e, s, *rest, format=format,
                                                   block_size=block_size, axis=axis,
                                                   dtype=dtype, has_g=has_g, has_ste=has_ste)

        def run(e, s, *rest):
            return ffi.dequantize(e, s, format, axis=axis, block_size=block_size, dtype=dtype,
                                  global_scale=rest[0] if has_g else None, platform=platform)

        return mlir.lower_fun(run, multiple_results=False)(ctx, e, s, *rest)

    return rule


def _convert_rule(platform: str):
    def rule(ctx, x, *, src, dst, impl="auto"):
        spec = ConvertSpec(src, dst)
        if _sharded(ctx, spec, platform, dict(src=src, dst=dst, impl=impl)):
            return sharding.lower(ctx, x, src=src, dst=dst, impl=impl)
        # the kernels' ABI has no code for some dtypes (the fnuz f8 types): StableHLO there
        if not (_use_kernel(ctx, impl, spec, platform)
                and all(o.dtype.name in abi.DTYPES for o in spec.operands() + spec.results())):
            return primitives._convert_lowering(ctx, x, src=src, dst=dst)

        def run(x):
            return ffi.convert(x, dst, source=src if x.dtype == np.uint8 else None,
                               platform=platform)

        return mlir.lower_fun(run, multiple_results=False)(ctx, x)

    return rule


def cast_rule(platform: str, portable_rule: Any, *, two_level: bool = False):
    """The ``mx_cast`` lowering rule for ``platform``: the cast kernel (``impl="auto"``, where
    :func:`cast_spec` gives one) or ``portable_rule`` (the primitive's StableHLO lowering).
    ``two_level``: the rule of ``mx_cast_two_level``, whose last operand is the tensor scale
    g (rank 0, f32; the kernel's last operand too; such a call is never run per shard: a
    partitioned program keeps the StableHLO).  Registered by :mod:`mxlower.jax.casts`, which
    owns the primitives."""
    def rule(ctx, x, *r, number, scale, roundmode, scalemode, impl="auto"):
        spec = cast_spec(ctx.avals_in[0], number, scale, roundmode, scalemode, platform)
        params = dict(number=number, scale=scale, roundmode=roundmode, scalemode=scalemode,
                      impl=impl)
        if not two_level and _sharded(ctx, spec, platform, params):
            return sharding.lower(ctx, x, *r, **params)
        if not _use_kernel(ctx, impl, spec, platform):
            kw = dict(impl=impl) if two_level else {}
            return portable_rule(ctx, x, *r, number=number, scale=scale, roundmode=roundmode,
                                 scalemode=scalemode, **kw)
        stochastic = len(r) > (1 if two_level else 0)

        def run(x, *r):
            return ffi.cast(x, number, scale, roundmode=roundmode, scalemode=scalemode,
                            rbits=r[0] if stochastic else None,
                            tensor_scale=r[-1] if two_level else None, platform=platform)

        return mlir.lower_fun(run, multiple_results=False)(ctx, x, *r)

    return rule


def _scaled_dot_specs(params: dict[str, Any]) -> list[KernelSpec | None]:
    """The dequantize kernel (to f32, without nvfp4's global scale) of each scaled side of an
    ``mx_scaled_dot`` with ``params``, lhs first; None where none applies."""
    return [dequantize_spec(params[f"{side}_format"], params[f"{side}_block_size"], _F32, False)
            for side in ("lhs", "rhs") if params[f"{side}_format"] is not None]


def _scaled_dot_rule(platform: str):
    def rule(ctx, *args, dimension_numbers, out_dtype, impl="auto", **params):
        specs = _scaled_dot_specs(params)
        spec = specs[0] if specs and None not in specs else None
        if _sharded(ctx, spec, platform, dict(params, dimension_numbers=dimension_numbers,
                                              out_dtype=out_dtype, impl=impl)):
            return sharding.lower(ctx, *args, dimension_numbers=dimension_numbers,
                                  out_dtype=out_dtype, impl=impl, **params)
        if not _use_kernel(ctx, impl, spec, platform):
            return primitives._scaled_dot_lowering(ctx, *args, dimension_numbers=dimension_numbers,
                                                   out_dtype=out_dtype, **params)
        ix = primitives._layout(params)

        def prepared(side: str):  # the side's exact f32 values, by the dequantize kernel
            if params[f"{side}_format"] is None:
                return None
            i, si = ix[side], ix[f"{side}_scales"]

            def run(e, s):
                return ffi.dequantize(e, s, params[f"{side}_format"], axis=params[f"{side}_axis"],
                                      block_size=params[f"{side}_block_size"], dtype=_F32,
                                      platform=platform)

            def emit(sub: Builder) -> Any:  # at the builder's insertion point (a branch)
                sub_ctx = ctx.replace(avals_in=[ctx.avals_in[i], ctx.avals_in[si]],
                                      tokens_out=None)  # a context per call: no effects
                with sub.ip:
                    (v,) = mlir.lower_fun(run, multiple_results=False)(sub_ctx, args[i],
                                                                       args[si])
                return v

            return emit

        b = Builder(ir.Location.current, ir.InsertionPoint.current)
        s = primitives.scaled_dot_spec(ctx, args, dimension_numbers, out_dtype, params)
        # the fused dot kernel is a CPU one (CUDA: XLA's block-scaled dot, mxlower.jax.cuda_dot,
        # or the dequantize kernels below)
        fused = _fused_dot(ctx, args, dimension_numbers, params) if platform == "cpu" else None
        return [mx_math.lower_scaled_dot(b, s, "f32", (prepared("lhs"), prepared("rhs")),
                                         fused)]

    return rule


def dot_plan(shapes: dict[str, tuple[int, ...]], dimension_numbers: Any,
             params: dict[str, Any]) -> tuple[DotSpec, bool] | None:
    """(kernel, swap) of an ``mx_scaled_dot`` on the CPU (:mod:`mxlower.execution.ffi_dot`),
    or None where the kernel does not apply: an MX side contracted over several dimensions,
    the dot kernel switched off (``MXLOWER_DOT_KERNEL=0``), and a GEMM (more free rows on
    both sides than stream: :attr:`~mxlower.lowering.dot_kernels.DotSpec.stream_m`) unless
    ``MXLOWER_DOT_KERNEL=all`` or the kernel's integer dot products apply (both sides
    e2m1 / nvfp4, e2m3, e3m2 or mxint8 with one block size on avx2, vnni or avx512; the
    other MX pairs with one block size, and bf16 rows against MX weights, on avx512 where
    the CPU's vendor runs its bf16 dot products faster; f32 rows against MX weights on
    avx512, on transposed panels: :func:`mxlower.lowering.dot_kernels.gemm_by_default`):
    the kernel's other f32 GEMM path measured slower than the dequantize kernels + XLA's
    f32 dot (BENCHMARKS.md), so those GEMMs keep them.  ``swap``: the kernel
    computes ``rhs x lhs`` (the side with few free rows streams the other: a GEMV written
    ``w @ x``)."""
    mode = os.environ.get("MXLOWER_DOT_KERNEL", "1")
    if mode == "0":
        return None
    sides = []
    for side in ("lhs", "rhs"):
        fmt = params[f"{side}_format"]
        try:
            elt = fmt or _wide(shapes[f"{side}_dtype"])
        except KeyError:  # no MLIR type: no kernel reads it
            return None
        sides.append(dot_call.Side(fmt, elt, params[f"{side}_block_size"],
                                   params[f"{side}_axis"], tuple(shapes[side])))
    (lc, rc), (lb, rb) = dimension_numbers
    return dot_call.plan(*sides, (tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)),
                         ffi_dot.host_path(), gemm=mode == "all",
                         vendor=dot_kernels.cpu_vendor())


def _fused_dot(ctx: Any, args: Any, dimension_numbers: Any,
               params: dict[str, Any]) -> Any | None:
    """The function emitting the contraction of an ``mx_scaled_dot`` by the fused dot kernel
    (which makes section 6's run-time test and exact f64 contraction itself) for
    :func:`mxlower.lowering.mx_math.lower_scaled_dot`, or None where :func:`dot_plan` gives
    no kernel.  Each side is brought to ``[B, rows, K]`` (batch,
    free, contracting dimensions; a transpose where they are not in that order already, an
    identity for the usual ``[..., M, K] x [..., N, K]``), the kernel's ``[B, M, N]``
    reshaped to the result."""
    ix = primitives._layout(params)
    shapes = {side: tuple(ctx.avals_in[ix[side]].shape) for side in ("lhs", "rhs")}
    shapes.update({f"{side}_dtype": ctx.avals_in[ix[side]].dtype for side in ("lhs", "rhs")})
    plan = dot_plan(shapes, dimension_numbers, params)
    if plan is None:
        return None
    spec, swap = plan
    (lc, rc), (lb, rb) = dimension_numbers
    dims = {"lhs": (tuple(lb), tuple(lc)), "rhs": (tuple(rb), tuple(rc))}
    names = [n for n in ("lhs", "lhs_scales", "rhs", "rhs_scales") if ix[n] is not None]
    result_shape = tuple(ctx.avals_out[0].shape)

    def normalize(x: Any, side: str) -> Any:
        batch, contract = dims[side]
        kn = spec.rhs_kn and side == ("lhs" if swap else "rhs")  # read K-major as stored
        order, shape3 = dot_call.normalize_order(x.shape, contract, batch, kn)
        if order != list(range(x.ndim)):
            x = x.transpose(order)
        return x.reshape(shape3)

    def run(*vals: Any) -> Any:
        v = dict(zip(names, vals))
        a, b_ = (("rhs", "lhs") if swap else ("lhs", "rhs"))
        av, a_scales, a_format = (normalize(v[a], a),
                                  normalize(v[f"{a}_scales"], a) if f"{a}_scales" in v else None,
                                  params[f"{a}_format"])
        if a_format is None and dot_call.converted_a(spec, None, _wide(av.dtype)):
            av = av.astype(_F32)  # f16 rows as f32 (exact)
        if dot_call.dequantized_a(spec, a_format):  # MX rows read as plain (K-major weights)
            av = ffi.dequantize(av, a_scales, a_format, axis=2,
                                block_size=params[f"{a}_block_size"],
                                dtype=_BF16 if spec.lhs == "bf16" else _F32,
                                platform="cpu")
            a_scales = a_format = None
        out = ffi_dot.dot(av, a_scales,
                          normalize(v[b_], b_),
                          normalize(v[f"{b_}_scales"], b_) if f"{b_}_scales" in v else None,
                          a_format, params[f"{b_}_format"],
                          lhs_block_size=params[f"{a}_block_size"] if a_format else None,
                          rhs_block_size=params[f"{b_}_block_size"], path=spec.path,
                          rhs_kn=spec.rhs_kn, rhs_copy=spec.rhs_copy)
        if swap:
            out = out.transpose(0, 2, 1)
        return out.reshape(result_shape)

    def emit(sub: Builder) -> Any:
        sub_ctx = ctx.replace(avals_in=[ctx.avals_in[ix[n]] for n in names], tokens_out=None)
        with sub.ip:
            (v,) = mlir.lower_fun(run, multiple_results=False)(sub_ctx,
                                                                *(args[ix[n]] for n in names))
        return v

    return emit


for _platform in _AVAILABLE:
    mlir.register_lowering(primitives.quantize_p, _quantize_rule(_platform), platform=_platform)
    mlir.register_lowering(primitives.dequantize_p, _dequantize_rule(_platform),
                           platform=_platform)
    mlir.register_lowering(primitives.convert_p, _convert_rule(_platform), platform=_platform)
mlir.register_lowering(primitives.scaled_dot_p, _scaled_dot_rule("cpu"), platform="cpu")
