"""mxlower.jax's kernels in partitioned programs (mxlower.jax.sharding): each shard runs the
FFI kernel on its own blocks.

Like test_jax_sharding.py, the 8-device part runs in a child Python process (XLA_FLAGS must
be set before JAX starts); the child prints one JSON line of checks.  Mesh 2 x 4 ("data",
"model").  For each case the child records whether the sharded result equals the unsharded
one bit for bit (or, for a dot whose contracting dimension is sharded, whether it is within
docs/semantics.md section 6's bound of mxlower.reference), which mxlower kernels the compiled
program calls and on which per-shard operand shapes, and which collectives it has.  A case
that fell back to the StableHLO lowering calls no kernel; one where XLA gathered the whole
array onto every device calls it on the global shape.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from mxlower.execution import ffi, ffi_dot
from mxlower.lowering import dot_kernels
from mxlower.testing import run_on_host_devices

CHILD_FLAG = "--mxlower-jax-sharding-kernels-child"

pytestmark = pytest.mark.skipif(not ffi.available(), reason="upstream MLIR is not installed")


def _child() -> dict:  # noqa: C901 (one case after another)
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import mxlower.jax as mxj
    from mxlower import reference as R
    from mxlower.testing import assert_dot_close

    assert len(jax.devices()) == 8, jax.devices()
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 16, 256)) * np.exp2(rng.integers(-8, 8, (4, 16, 256)))).astype(
        np.float32)
    w = (rng.standard_normal((64, 256)) * np.exp2(rng.integers(-4, 4, (64, 256)))).astype(
        np.float32)
    res: dict = {}

    def same(a, b) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(
            np.array_equal(a.view(np.uint8), b.view(np.uint8)))

    def compiled(f, *args) -> dict:
        text = f.lower(*args).compile().as_text()
        calls = {}
        for line in text.splitlines():
            m = re.search(r'custom_call_target="([^"]+)"', line)
            if m:
                shapes = re.findall(r"custom-call\(([^)]*)\)", line)
                calls.setdefault(m.group(1), []).append(
                    re.search(r"operand_layout_constraints=\{([^}]*)\}", line).group(1)
                    if "operand_layout_constraints" in line else shapes)
        names = ("all-gather", "all-reduce", "all-to-all", "collective-permute",
                 "reduce-scatter")
        return {"calls": calls, "collectives": [n for n in names if n in text]}

    def case(name, fn, args, shardings, *, exact=True, out=None):
        f = jax.jit(fn, in_shardings=tuple(NamedSharding(mesh, s) for s in shardings),
                    **({} if out is None else {"out_shardings": NamedSharding(mesh, out)}))
        placed = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, shardings)]
        got = f(*placed)
        want = jax.jit(fn)(*args)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        entry = compiled(f, *args)
        if exact:
            entry["equal"] = all(same(a, b) for a, b in zip(got, want))
        entry["out_shardings"] = [str(getattr(o.sharding, "spec", None)) for o in got]
        res[name] = entry
        return got

    def qdq(fmt, **kw):
        def f(x):
            q = mxj.quantize(x, fmt, **kw)
            return q.elements, q.scales, mxj.dequantize(q, jnp.bfloat16)
        return f

    # quantize / dequantize: blocked axis on block boundaries, other axes, nvfp4 with g
    case("qdq_blocked", qdq("mxfp8_e4m3", scale_mode="rceil"), [x], [P("data", None, "model")])
    case("qdq_rows", qdq("mxfp6_e3m2"), [x], [P("data", "model", None)])
    case("qdq_axis0", qdq("mxint8", axis=1, block_size=4), [x], [P("data", "model", None)])
    case("qdq_nvfp4", qdq("nvfp4", global_scale=0.125), [x], [P("data", None, "model")])

    # an MX format's datatype named by its codes binds the same primitive (a DatatypeArray)
    def qdq_datatype(code, **kw):
        def f(x):
            q = mxj.quantize(x, code, **kw)
            return q.codes, q.scales, mxj.dequantize(q, jnp.bfloat16)
        return f

    case("qdq_datatype", qdq_datatype("e4m3fn:e8m0_t32", scale_mode="rceil"), [x],
         [P("data", None, "model")])
    case("qdq_datatype_gf32", qdq_datatype("e2m1fo:e4m3fn_t16_gf32", global_scale=0.125), [x],
         [P("data", None, "model")])
    # blocks of 128 along an axis in shards of 64: the blocks straddle shards
    case("qdq_split_blocks", qdq("mxfp4_e2m1", block_size=128), [x], [P("data", None, "model")])
    # a plain conversion and the casts of section 10 (tiles along the last axis, a channel)
    case("convert", lambda x: mxj.convert(x, jnp.float8_e5m2), [x], [P("data", None, "model")])
    case("convert_f6", lambda x: mxj.convert(mxj.convert(x, "f6E2M3FN"), jnp.float32,
                                             source="f6E2M3FN"),
         [x], [P("data", "model", None)])
    case("cast_tiles", lambda x: mxj.cast(x, "e2m1", scale="e8m0_t32"), [x],
         [P("data", None, "model")])
    case("cast_channel", lambda x: mxj.cast(x, "e4m3", scale="e8m0_t0"), [x],
         [P("data", "model", None)])

    # the dot: MXFP4 activations [B, M, K] x MXFP8 weights [N, K]
    dn = (((2,), (1,)), ((), ()))

    def mlp(x, w):
        return mxj.scaled_dot(mxj.quantize(x, "mxfp4_e2m1"), mxj.quantize(w, "mxfp8_e4m3"), dn)


    def gemv(x, w):  # plain bf16 activations, MX weights
        return mxj.scaled_dot(x.astype(jnp.bfloat16), mxj.quantize(w, "mxfp6_e2m3"), dn,
                              jnp.bfloat16)

    case("dot_plain_lhs_n", gemv, [x, w], [P("data", None, None), P("model", None)])

    # K-major weights [K, N] (blocked along K) against plain rows: N sharded, the K-major
    # kernel on each shard's [K, N / 4] (the same FMAs per column: the same bits); K
    # sharded, the per-shard partials summed (within the contract)
    xk = x[:, :2]
    wk = (rng.standard_normal((256, 512)) * np.exp2(rng.integers(-4, 4, (256, 512)))).astype(
        np.float32)
    dkn = (((2,), (0,)), ((), ()))

    def gemv_kn(x, w):
        return mxj.scaled_dot(x, mxj.quantize(w, "mxfp8_e4m3", axis=0), dkn)

    case("dot_kn_n", gemv_kn, [xk, wk], [P("data", None, None), P(None, "model")])
    def values(v, fmt, axis=-1):  # an MX side's f32 values
        q = mxj.quantize(v, fmt, axis=axis)
        return R.dequantize(np.asarray(q.elements), np.asarray(q.scales), fmt, axis=axis)

    def within(name, got, a, b, dims):  # res[name]["within_contract"]: True or why not
        try:
            assert_dot_close(np.asarray(got), a, b, dims, what=name)
            res[name]["within_contract"] = True
        except AssertionError as err:
            res[name]["within_contract"] = str(err)

    (got,) = case("dot_kn_k", gemv_kn, [xk, wk], [P(None, None, "model"), P("model", None)],
                  exact=False)
    within("dot_kn_k", got, xk, values(wk, "mxfp8_e4m3", 0), dkn)

    # many MX rows (128: past dot_call.KN_MX_ROWS) against K-major MX weights sharded along
    # N: each shard's MX pair kernel on its own transposed copy of [K, N / 4]
    x2 = np.concatenate([x, x * 0.5], axis=1)

    def gemm_kn(x, w):
        return mxj.scaled_dot(mxj.quantize(x, "mxfp4_e2m1"),
                              mxj.quantize(w, "mxfp4_e2m1", axis=0), dkn)

    (got,) = case("dot_kn_mx_n", gemm_kn, [x2, wk], [P(None, None, None), P(None, "model")])
    within("dot_kn_mx_n", got, values(x2, "mxfp4_e2m1"), values(wk, "mxfp4_e2m1", 0), dkn)

    # batch dimensions on both sides: [B, M, K] x [B, N, K]
    xb = x[:, :8]

    def bmm(a, b):
        return mxj.scaled_dot(mxj.quantize(a, "mxfp8_e5m2"), mxj.quantize(b, "mxint8"),
                              (((2,), (2,)), ((0,), (0,))))

    case("dot_batch_dims", bmm, [x, xb], [P("data", "model", None), P("data", None, None)])

    # K sharded: per-shard partial sums, summed across the shards (or operands gathered);
    # within the contract.  The test's results are small: all but dot_k_small and
    # dot_k_wanted take the large results' ways (no all-reduce for small partials)
    from mxlower.jax import sharding

    small, sharding.SMALL_PARTIAL = sharding.SMALL_PARTIAL, 0

    def k_check(name, fn, args, shardings, lhs, rhs, out="f32", g=None, out_sharding=None):
        fn = (lambda f: lambda *a: f(*a))(fn)  # a function of its own: jit lowers it anew
        (got,) = case(name, fn, args, shardings, exact=False, out=out_sharding)
        res[name]["equal"] = same(got, jax.jit(fn)(*args))
        try:
            assert_dot_close(np.asarray(got), lhs, rhs, dn, out=out, global_scale=g, what=name)
            res[name]["within_contract"] = True
        except AssertionError as err:
            res[name]["within_contract"] = str(err)

    qx, qw = mxj.quantize(x, "mxfp4_e2m1"), mxj.quantize(w, "mxfp8_e4m3")
    a = R.dequantize(np.asarray(qx.elements), np.asarray(qx.scales), "mxfp4_e2m1")
    b = R.dequantize(np.asarray(qw.elements), np.asarray(qw.scales), "mxfp8_e4m3")
    k_check("dot_k", mlp, [x, w], [P("data", None, "model"), P(None, "model")], a, b)
    # K sharded where a shard's f32 partial result [2, 16, 512] would outweigh the operand
    # bytes it lacks: the operands are gathered and each shard computes its slice of N (no
    # sum across shards: the kernel's bits where the slice takes the same kernel path)
    w2 = (rng.standard_normal((512, 256)) * np.exp2(rng.integers(-4, 4, (512, 256)))).astype(
        np.float32)
    qw2 = mxj.quantize(w2, "mxfp8_e4m3")
    b2 = R.dequantize(np.asarray(qw2.elements), np.asarray(qw2.scales), "mxfp8_e4m3")
    k_check("dot_k_gather", mlp, [x, w2], [P("data", None, "model"), P(None, "model")], a, b2)
    # K sharded and no result dimension divisible by its 4 shards: the partials all-reduced
    x3, w3 = x[:3, :5], w[:7]
    a3 = R.dequantize(np.asarray(qx.elements)[:3, :5], np.asarray(qx.scales)[:3, :5],
                      "mxfp4_e2m1")
    b3 = R.dequantize(np.asarray(qw.elements)[:7], np.asarray(qw.scales)[:7], "mxfp8_e4m3")
    k_check("dot_k_all_reduce", mlp, [x3, w3], [P(None, None, "model"), P(None, "model")],
            a3, b3)
    # M or N sharded: no all-reduce, but a shard's row count can choose another path of the
    # dot than the whole array's (the fused kernel's streaming rows for <= 16 rows, the
    # dequantize kernels + XLA's f32 dot for a GEMM, or the kernel computing rhs x lhs), so
    # the results are within the contract, not always the same bits
    for name, shardings in (("dot_batch_m", [P("data", "model", None), P(None, None)]),
                            ("dot_n", [P(None, None, None), P("model", None)]),
                            ("dot_batch_n", [P("data", None, None), P("model", None)])):
        k_check(name, mlp, [x, w], shardings, a, b)

    # mixed block sizes (nvfp4's 16 against 32) with global scales and a bf16 result
    def mixed(x, w):
        return mxj.scaled_dot(mxj.quantize(x, "nvfp4", global_scale=0.5),
                              mxj.quantize(w, "mxfp6_e3m2"), dn, jnp.bfloat16)

    nx, mw = mxj.quantize(x, "nvfp4", global_scale=0.5), mxj.quantize(w, "mxfp6_e3m2")
    a = R.dequantize(np.asarray(nx.elements), np.asarray(nx.scales), "nvfp4")
    b = R.dequantize(np.asarray(mw.elements).view(ml_dtypes.float6_e3m2fn),  # codes as stored
                     np.asarray(mw.scales), "mxfp6_e3m2")
    k_check("dot_k_mixed", mixed, [x, w], [P(None, None, ("data", "model")),
                                          P(None, ("data", "model"))], a, b, "bf16", 0.5)

    # tiny values: products and partial sums below 2^-126 count as the subnormals they are
    tx, tw = x * np.float32(2.0 ** -66), w * np.float32(2.0 ** -66)
    qx, qw = mxj.quantize(tx, "mxfp4_e2m1"), mxj.quantize(tw, "mxfp8_e4m3")
    a = R.dequantize(np.asarray(qx.elements), np.asarray(qx.scales), "mxfp4_e2m1")
    b = R.dequantize(np.asarray(qw.elements), np.asarray(qw.scales), "mxfp8_e4m3")
    k_check("dot_k_subnormal", mlp, [tx, tw], [P("data", None, "model"), P(None, "model")],
            a, b)
    res["dot_k_subnormal"]["nonzero"] = float(np.count_nonzero(
        R.scaled_dot(a, None, b, None, dimension_numbers=dn)))
    k_check("dot_k_subnormal_all_reduce", mlp, [tx[:3, :5], tw[:7]],
            [P(None, None, "model"), P(None, "model")], a[:3, :5], b[:7])
    # the default threshold: a small partial result is all-reduced, unless the program wants
    # the result sharded over K's mesh axes (then reduce-scattered, nothing gathered after)
    sharding.SMALL_PARTIAL = small
    qx, qw = mxj.quantize(x, "mxfp4_e2m1"), mxj.quantize(w, "mxfp8_e4m3")
    a = R.dequantize(np.asarray(qx.elements), np.asarray(qx.scales), "mxfp4_e2m1")
    b = R.dequantize(np.asarray(qw.elements), np.asarray(qw.scales), "mxfp8_e4m3")
    k_check("dot_k_small", mlp, [x, w], [P("data", None, "model"), P(None, "model")], a, b)
    k_check("dot_k_wanted", mlp, [x, w], [P("data", None, "model"), P(None, "model")], a, b,
            out_sharding=P("data", None, "model"))

    # the gathered way's collective (sharding._gather_along): each shard's part along one
    # dimension over one or two mesh axes, gathered whole on its bits, for every element width
    # (f4 in byte pairs; an odd last dimension through XLA's own all-gather)
    rng_g = np.random.default_rng(7)
    gathers = {}
    for dt, shape, d in ((jnp.float4_e2m1fn, (4, 8, 64), 2), (jnp.float4_e2m1fn, (4, 64, 3), 1),
                         (jnp.float8_e4m3fn, (64, 8), 0), (jnp.float8_e8m0fnu, (8, 64), 1),
                         (jnp.bfloat16, (4, 64, 2), 1), (jnp.float32, (64,), 0)):
        full = jnp.asarray(rng_g.standard_normal(shape) * 4, np.float32).astype(dt)
        if dt == jnp.float8_e8m0fnu:
            full = jnp.asarray(np.exp2(rng_g.integers(-20, 20, shape)), np.float32).astype(dt)
        for axes in (("model",), ("data", "model")):
            spec = P(*([None] * d + [axes if len(axes) > 1 else axes[0]]))
            f = jax.jit(jax.shard_map(lambda y, d=d, axes=axes: sharding._gather_along(y, d, axes),
                                      mesh=mesh, in_specs=spec, out_specs=P(), check_vma=False))
            got = f(jax.device_put(full, NamedSharding(mesh, spec)))
            gathers[f"{np.dtype(dt).name}{shape}@{d}/{len(axes)}"] = same(got, full)
    res["gather_along"] = gathers

    # transformations: grad (through the straight-through estimator) and vmap, sharded
    def loss(x):
        return jnp.sum(mxj.dequantize(mxj.quantize(x, "mxfp8_e4m3")) * x)

    case("grad", jax.grad(loss), [x], [P("data", None, "model")])
    case("vmap", jax.vmap(lambda r: mxj.quantize(r, "mxint8").elements), [x],
         [P("data", None, "model")])

    # jax.export over an AbstractMesh: impl="xla" as before; impl="auto" needs devices
    from jax.sharding import AbstractMesh

    am = AbstractMesh((2, 4), ("data", "model"))
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype,
                                sharding=NamedSharding(am, P("data", None, "model")))
    for impl in ("xla", "auto"):
        try:
            exp = jax.export.export(jax.jit(lambda x: mxj.quantize(x, impl=impl).elements),
                                    platforms=["cpu"])(spec)
            res[f"export_abstract_mesh_{impl}"] = "custom_call" not in exp.mlir_module()
        except ValueError as err:
            res[f"export_abstract_mesh_{impl}"] = str(err)
    return res


@pytest.fixture(scope="module")
def res() -> dict:
    return run_on_host_devices(__file__, CHILD_FLAG)


def _kernels(entry: dict, prefix: str) -> dict:
    return {k: v for k, v in entry["calls"].items() if k.startswith(prefix)}


#: case -> (kernel name prefix, the per-shard operand shape its calls must show); a dot whose
#: shard is a GEMV-sized one (at most 16 free MX rows on a side, 64-1024 plain rows against
#: MX weights: DotSpec.stream_m) runs the fused dot kernel on its shard, the others the dequantize kernels +
#: XLA's dot
#: the K-sharded mxfp4 x mxfp8 GEMM: the dot kernel's bf16 dot products where they take
#: GEMMs by default (dot_kernels.gemm_by_default: the avx512 path on an AMD CPU), else the
#: dequantize kernels (+ XLA's dot)
_DOT_K = (("mxlower_dot_mxfp4_e2m1k32_mxfp8_e4m3k32", "f4e2m1fn[1,32,64]")
          if dot_kernels.gemm_by_default(
              dot_kernels.DotSpec("mxfp4_e2m1", "mxfp8_e4m3", path=ffi_dot.host_path()),
              dot_kernels.cpu_vendor())
          else ("mxlower_dequantize_mxfp4_e2m1", "f4e2m1fn[2,16,64]"))
#: the gathered K-sharded dot: each shard's slice of N with K whole, batch 2 x 16 rows
_DOT_K_GATHER = ((_DOT_K[0], "f4e2m1fn[1,32,256]") if _DOT_K[0].startswith("mxlower_dot")
                 else (_DOT_K[0], "f4e2m1fn[2,16,256]"))
PER_SHARD = {
    "qdq_blocked": ("mxlower_quantize_mxfp8_e4m3", "f32[2,16,64]"),
    "qdq_rows": ("mxlower_quantize_mxfp6_e3m2", "f32[2,4,256]"),
    "qdq_axis0": ("mxlower_quantize_mxint8", "f32[2,256,4]"),  # the blocked axis moved last
    "qdq_nvfp4": ("mxlower_quantize_nvfp4", "f32[2,16,64]"),
    "qdq_datatype": ("mxlower_quantize_mxfp8_e4m3", "f32[2,16,64]"),
    "qdq_datatype_gf32": ("mxlower_quantize_nvfp4", "f32[2,16,64]"),
    "convert": ("mxlower_convert_f32_f8E5M2", "f32[2,16,64]"),
    "convert_f6": ("mxlower_convert_f32_f6E2M3FN", "f32[2,4,256]"),
    "cast_tiles": ("mxlower_cast_e2m1", "f32[2,16,64]"),
    "cast_channel": ("mxlower_cast_e4m3", "f32[2,4,256]"),
    "dot_batch_m": ("mxlower_dot_mxfp4_e2m1k32_mxfp8_e4m3k32", "f4e2m1fn[1,8,256]"),
    "dot_n": ("mxlower_dot_mxfp8_e4m3k32_mxfp4_e2m1k32", "f8e4m3fn[1,16,256]"),
    "dot_batch_n": ("mxlower_dot_mxfp8_e4m3k32_mxfp4_e2m1k32", "f8e4m3fn[1,16,256]"),
    # (the 32 plain rows of a shard stream against its 16 columns, as the 64 rows of the
    # whole dot against its 64: the same bits)
    "dot_plain_lhs_n": ("mxlower_dot_bf16_mxfp6_e2m3k32", "bf16[1,32,256]"),
    "dot_kn_n": ("mxlower_dot_f32_mxfp8_e4m3k32_kn", "f32[1,4,256]"),
    "dot_batch_dims": ("mxlower_dot_mxfp8_e5m2k32_mxint8k32", "f8e5m2[2,4,256]"),
    "dot_k": _DOT_K,
    "dot_k_mixed": ("mxlower_dequantize_nvfp4", "f4e2m1fn[4,16,32]"),
    "dot_k_subnormal": _DOT_K,
    "dot_k_gather": _DOT_K_GATHER,
    "dot_k_small": _DOT_K,
    "dot_k_wanted": _DOT_K,
    # 15 rows: the fused kernel's streaming rows, K = 256 / 4 shards
    "dot_k_all_reduce": ("mxlower_dot_mxfp4_e2m1k32_mxfp8_e4m3k32", "f4e2m1fn[1,15,64]"),
    "dot_k_subnormal_all_reduce": ("mxlower_dot_mxfp4_e2m1k32_mxfp8_e4m3k32",
                                   "f4e2m1fn[1,15,64]"),
}

PER_SHARD.update({"grad": ("mxlower_quantize_mxfp8_e4m3", "f32[2,16,64]"),
                  "vmap": ("mxlower_quantize_mxint8", "f32[2,16,64]")})

#: sharded on M or N, where a shard's shape may pick another dot path (within the contract)
PATH_DEPENDENT = ["dot_batch_m", "dot_n", "dot_batch_n"]
EXACT = [c for c in PER_SHARD if not c.startswith("dot_k") and c not in PATH_DEPENDENT] + [
    "qdq_split_blocks"]


@pytest.mark.parametrize("name", EXACT)
def test_sharded_is_bit_identical(res, name):
    assert res[name]["equal"], res[name]


@pytest.mark.parametrize("name", sorted(PER_SHARD))
def test_kernel_runs_per_shard(res, name):
    """The kernel (not the StableHLO fallback) is in the compiled program, called on one
    shard's operands."""
    prefix, shape = PER_SHARD[name]
    calls = _kernels(res[name], prefix)
    assert calls, (name, sorted(res[name]["calls"]))
    operands = " ".join(str(v) for vs in calls.values() for v in vs)
    assert shape in operands, (name, calls)
    assert "CustomSPMDPartitioning" not in res[name]["calls"], name


@pytest.mark.parametrize("name", ["qdq_blocked", "qdq_rows", "qdq_nvfp4", "qdq_datatype",
                                  "qdq_datatype_gf32",
                                  "convert", "convert_f6", "cast_tiles", "dot_batch_m",
                                  "dot_n", "dot_batch_n", "dot_plain_lhs_n", "dot_batch_dims",
                                  "dot_kn_n"])
def test_no_collectives_where_blocks_are_local(res, name):
    assert res[name]["collectives"] == [], (name, res[name]["collectives"])


def test_few_blocks_gather_only_the_scales(res):
    """4 blocks along the blocked axis on a mesh of 8: the Shardy rule cannot tie the scales
    to the elements there (it would split a mesh axis), so XLA gathers the scales after the
    per-shard kernels; the elements stay sharded."""
    entry = res["qdq_axis0"]
    assert entry["out_shardings"][0] == entry["out_shardings"][2] == "P('data', 'model')"
    assert entry["collectives"] == ["all-gather"], entry


def test_results_stay_sharded(res):
    assert res["qdq_blocked"]["out_shardings"] == ["P('data', None, 'model')"] * 3
    assert res["dot_batch_m"]["out_shardings"] == ["P('data', 'model')"]
    assert res["dot_n"]["out_shardings"] == ["P(None, None, 'model')"]


def test_blocks_split_by_shards_move_data_first(res):
    """Blocks of 128 along an axis in shards of 64: XLA gathers that axis, then each device
    runs the kernel on whole blocks; bit-identical."""
    entry = res["qdq_split_blocks"]
    calls = _kernels(entry, "mxlower_quantize_mxfp4_e2m1")
    assert calls and "f32[2,16,256]" in str(calls), calls
    assert "all-gather" in entry["collectives"] or "all-to-all" in entry["collectives"]


def test_export_over_an_abstract_mesh(res):
    """impl="xla" exports over an AbstractMesh (the portable StableHLO); impl="auto" needs the
    devices to run its kernels per shard, and says so (as JAX's own scaled_matmul)."""
    assert res["export_abstract_mesh_xla"] is True
    assert "AbstractMesh cannot be used" in res["export_abstract_mesh_auto"]


def test_many_mx_rows_against_k_major_weights_sharded_along_n(res):
    """128 MX rows against K-major MX weights sharded along N: each shard runs the MX pair's
    kernel on the copy its handler transposes (where that kernel's GEMM runs by default,
    else the rows dequantized for the K-major kernel), within the contract and the same
    bits as the unsharded dot (each result's sums do not depend on the other columns)."""
    entry = res["dot_kn_mx_n"]
    assert entry["within_contract"] is True, entry["within_contract"]
    assert entry["equal"], "sharded and unsharded results differ"
    pair = dot_kernels.DotSpec("mxfp4_e2m1", "mxfp4_e2m1", path=ffi_dot.host_path(),
                               rhs_kn=True)
    if dot_kernels.gemm_by_default(pair, dot_kernels.cpu_vendor()):
        calls = _kernels(entry, pair.name)
        assert calls and all("f4e2m1fn[1,128,256]" in c for c in calls[pair.name]), (
            entry["calls"])  # (every row on each shard)
        assert "f32[128,256]" in str(entry["calls"]), entry["calls"]  # (w's N / 4 columns)
    else:
        assert _kernels(entry, "mxlower_dot_bf16_mxfp4_e2m1k32_kn"), sorted(entry["calls"])
    assert entry["collectives"] == [] or "all-gather" in entry["collectives"]


def test_k_major_weights_sharded_along_k(res):
    """K-major weights sharded along K: each shard's partial dot by the K-major kernel, the
    partials summed within the contract."""
    entry = res["dot_kn_k"]
    assert entry["within_contract"] is True, entry["within_contract"]
    assert _kernels(entry, "mxlower_dot_f32_mxfp8_e4m3k32_kn"), sorted(entry["calls"])


@pytest.mark.parametrize("name", PATH_DEPENDENT)
def test_m_or_n_sharded_dot_within_contract(res, name):
    assert res[name]["within_contract"] is True, res[name]["within_contract"]


@pytest.mark.parametrize("name", ["dot_k", "dot_k_mixed", "dot_k_subnormal"])
def test_k_sharded_dot_reduce_scatters_partials_within_contract(res, name):
    """Each shard's partial dot, reduce-scattered along a result dimension with subnormal
    results kept (the all-reduce: the one-integer test for tiny partials)."""
    assert res[name]["within_contract"] is True, res[name]["within_contract"]
    assert "reduce-scatter" in res[name]["collectives"], res[name]


@pytest.mark.parametrize("name", ["dot_k_all_reduce", "dot_k_subnormal_all_reduce"])
def test_k_sharded_dot_all_reduces_where_no_result_dimension_divides(res, name):
    assert res[name]["within_contract"] is True, res[name]["within_contract"]
    assert res[name]["collectives"] == ["all-reduce"], res[name]
    assert res[name]["out_shardings"] == ["P()"], res[name]


def test_gather_along_every_width(res):
    assert res["gather_along"] and all(res["gather_along"].values()), res["gather_along"]


def test_k_sharded_dot_with_a_small_result_all_reduces(res):
    """A partial result under SMALL_PARTIAL bytes wanted whole: one all-reduce."""
    entry = res["dot_k_small"]
    assert entry["within_contract"] is True, entry
    assert entry["collectives"] == ["all-reduce"], entry


def test_k_sharded_dot_reduce_scatters_where_the_result_is_wanted_sharded(res):
    """out_shardings split N over K's mesh axis: the partials reduce-scattered along N,
    nothing gathered after (small as the result is)."""
    entry = res["dot_k_wanted"]
    assert entry["within_contract"] is True, entry
    assert "reduce-scatter" in entry["collectives"], entry
    assert "all-gather" not in entry["collectives"], entry
    assert entry["out_shardings"] == ["P('data', None, 'model')"], entry


def test_k_sharded_dot_with_a_large_result_gathers_the_operands(res):
    """[4, 16, 512] from K = 256 over 4 shards: the operands are gathered (fewer bytes than
    one f32 partial result), each shard computes its slice of N with K whole: no sum across
    shards, the one-device bits."""
    entry = res["dot_k_gather"]
    assert entry["collectives"] == ["all-gather"], entry
    assert entry["equal"] and entry["within_contract"] is True, entry


def test_subnormal_case_is_not_trivial(res):
    assert res["dot_k_subnormal"]["nonzero"] > 1000


if __name__ == "__main__" and CHILD_FLAG in sys.argv:
    print(json.dumps(_child()))


# ----------------------------------------------------------------------------- the plans alone


class _Mesh:
    """What Plan.choose reads of a mesh: its axis sizes."""

    shape = {"data": 2, "model": 4}


def _aval(shape, dtype="float32"):
    import jax
    import numpy as np

    return jax.core.ShapedArray(shape, np.dtype(dtype))


def _quantize_plan(shape, axis, k):
    from mxlower.jax import primitives, sharding

    return sharding.PLANS["mx_quantize"](primitives.quantize_p, [_aval(shape)],
                                         dict(format="mxfp8_e4m3", block_size=k, axis=axis,
                                              scale_mode="floor", impl="auto"))


def test_plan_keeps_whole_blocks_only():
    # 256 / 4 shards = 64 = 2 blocks of 32: kept; blocks of 128 in shards of 64: replicated
    assert _quantize_plan((4, 256), 1, 32).choose(_Mesh, [("data", "model")]) == {
        "d0": ("data",), "d1": ("model",)}
    assert _quantize_plan((4, 256), 1, 128).choose(_Mesh, [("data", "model")]) == {
        "d0": ("data",)}
    # an axis two dimensions ask for goes to the first one (results' order), a tuple of axes
    # is kept whole
    assert _quantize_plan((8, 256), 1, 32).choose(_Mesh, [("model", "model")]) == {
        "d0": ("model",)}
    assert _quantize_plan((4, 256), 1, 32).choose(_Mesh, [(None, ("data", "model"))]) == {
        "d1": ("data", "model")}


def test_dot_plan_factors():
    """[B, M, K] MXFP4 x [N, K] NVFP4: K is one factor in units of lcm(32, 16) = 32 on the
    elements, of 1 and 2 on the two sides' scales; K is summed over."""
    import numpy as np

    from mxlower.jax import primitives, sharding

    params = dict(lhs_format="mxfp4_e2m1", lhs_block_size=32, lhs_axis=2, lhs_ste=False,
                  rhs_format="nvfp4", rhs_block_size=16, rhs_axis=1, rhs_ste=False,
                  has_g=True, dimension_numbers=(((2,), (1,)), ((), ())),
                  out_dtype=np.dtype("float32"), impl="auto")
    avals = [_aval((4, 16, 256), "float4_e2m1fn"), _aval((4, 16, 8), "float8_e8m0fnu"),
             _aval((64, 256), "float4_e2m1fn"), _aval((64, 16), "float8_e4m3fn"), _aval(())]
    plan = sharding.PLANS["mx_scaled_dot"](primitives.scaled_dot_p, avals, params)
    assert plan.operands == (
        (sharding.Dim("l0"), sharding.Dim("l1"), sharding.Dim("c0", 32)),
        (sharding.Dim("l0"), sharding.Dim("l1"), sharding.Dim("c0", 1)),
        (sharding.Dim("r0"), sharding.Dim("c0", 32)),
        (sharding.Dim("r0"), sharding.Dim("c0", 2)),
        ())
    assert plan.results == ((sharding.Dim("l0"), sharding.Dim("l1"), sharding.Dim("r0")),)
    assert plan.sizes["c0"] == 8 and plan.reduced == ("c0",)
    # K over 8 shards would split blocks of 32 (8 blocks): kept; the model axis on N too
    assert plan.choose(_Mesh, [("data", None, "model"), (), (None, "model")]) == {
        "l0": ("data",), "c0": ("model",)}
    rule = str(plan.sharding_rule(8))
    assert "c0_u32" in rule and "c0_u2" in rule and "need_replication" in rule
    # a mesh of 16 does not divide 8 blocks: elements and scales become separate factors
    assert "c0_x32" in str(plan.sharding_rule(16))


def test_dot_plan_reduction(monkeypatch):
    """How a K-sharded dot runs (Plan.reduction): the operands gathered where the bytes a
    shard lacks are fewer than one f32 partial result's, the partials reduce-scattered
    otherwise -- both along the result dimension the program wants split over K's axes, else
    the largest result factor not yet sharded that the K shard count divides -- and
    all-reduced where none divides or a small result is wanted whole."""
    import jax
    import numpy as np
    from jax.sharding import AbstractMesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from mxlower.jax import primitives, sharding

    params = dict(lhs_format="mxfp4_e2m1", lhs_block_size=32, lhs_axis=2, lhs_ste=False,
                  rhs_format="mxfp8_e4m3", rhs_block_size=32, rhs_axis=1, rhs_ste=False,
                  has_g=False, dimension_numbers=(((2,), (1,)), ((), ())),
                  out_dtype=np.dtype("float32"), impl="auto")

    def reduction(b, m, n, chosen, out=P()):
        shapes = [((b, m, 256), "float4_e2m1fn"), ((b, m, 8), "float8_e8m0fnu"),
                  ((n, 256), "float8_e4m3fn"), ((n, 8), "float8_e8m0fnu")]
        avals = [_aval(*sd) for sd in shapes]
        plan = sharding.PLANS["mx_scaled_dot"](primitives.scaled_dot_p, avals, params)
        args = [jax.ShapeDtypeStruct(*sd) for sd in shapes]
        mesh = AbstractMesh((2, 4), ("data", "model"))
        result = jax.ShapeDtypeStruct((b, m, n), np.float32, sharding=NamedSharding(mesh, out))
        return plan.reduction(_Mesh, chosen, args, result)

    k = {"c0": ("model",)}
    R = sharding.Reduction
    # a 16 KB partial result (under SMALL_PARTIAL) wanted whole: all-reduced
    assert reduction(4, 16, 64, k) == R(("model",), 4, "all-reduce")
    # ... wanted split over "model" on M: reduce-scattered along M, though N is larger
    assert reduction(4, 16, 64, k, P(None, "model")) == R(("model",), 4, "scatter", 1)
    monkeypatch.setattr(sharding, "SMALL_PARTIAL", 0)
    # 3/4 of 33.8 KB to move, a 16 KB partial: reduce-scattered along N (64, the largest)
    assert reduction(4, 16, 64, k) == R(("model",), 4, "scatter", 2)
    # N = 512: 114 KB to move, a 128 KB partial: gathered, N split
    assert reduction(4, 16, 512, k) == R(("model",), 4, "gather", 2)
    # N already sharded over "data": M (16) takes the K shards
    assert reduction(4, 16, 64, dict(k, r0=("data",))) == R(("model",), 4, "scatter", 1)
    # 3, 5, 7: no result dimension divides into 4 shards
    assert reduction(3, 5, 7, k) == R(("model",), 4, "all-reduce")
    # K not sharded: nothing to reduce
    assert reduction(4, 16, 64, {"l0": ("data",)}) is None
    # the A/B switch
    monkeypatch.setattr(sharding, "FORCE_REDUCTION", "all-reduce")
    assert reduction(4, 16, 512, k) == R(("model",), 4, "all-reduce")
