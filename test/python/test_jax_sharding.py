"""mxlower.jax on 8 (virtual CPU) devices with NamedSharding: equal to the one-device run.

XLA_FLAGS=--xla_force_host_platform_device_count=8 must be set before JAX initializes its
backends, and the rest of the pytest session has already initialized them with one device, so
the multi-device part runs in a child Python process: this file run as a script.  The child
prints one JSON line of checks; the test asserts them.

What is checked (mesh 2 x 4, axes "data" and "model"):
* quantize / dequantize with the batch axis sharded on "data" and the blocked axis sharded on
  "model" at block boundaries (256 elements / 4 shards = 64 = 2 blocks of 32 per shard), and
  with a non-blocked axis sharded: bit-identical to the single-device result, and the compiled
  program has no collective at all (every block is local to its shard);
* scaled_dot of an MXFP4 activation [B, M, K] (batch on "data", K on "model") with MXFP8
  weights [N, K] (K on "model"): equal to the single-device result within 1e-6 relative (XLA
  all-reduces the K partial sums; their order may differ);
* an nvfp4 quantize with a global scale, sharded the same way: bit-identical;
* blocks of 128 with the blocked axis in shards of 64 (blocks straddle shards): still
  bit-identical (XLA moves data around the block reshape; only the speed suffers);
* the lowered text (mxlower.jax.lower of the sharded jit) keeps the sharding annotations.
"""

from __future__ import annotations

import json
import sys

from mxlower.testing import run_on_host_devices

CHILD_FLAG = "--mxlower-jax-sharding-child"


def _child() -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import mxlower.jax as mxj

    assert len(jax.devices()) == 8, jax.devices()
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 16, 256)) * np.exp2(rng.integers(-8, 8, (4, 16, 256)))).astype(
        np.float32)
    w = rng.standard_normal((64, 256)).astype(np.float32)
    res: dict = {}

    def same(a, b) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(
            np.array_equal(a.view(np.uint8), b.view(np.uint8)))

    def qdq(x):
        q = mxj.quantize(x, "mxfp8_e4m3", scale_mode="rceil")
        return q.elements, q.scales, mxj.dequantize(q, jnp.bfloat16)

    def collectives(compiled_text: str) -> list[str]:
        names = ("all-gather", "all-reduce", "all-to-all", "collective-permute",
                 "reduce-scatter")
        return [n for n in names if n in compiled_text]

    single = jax.jit(qdq)(x)
    for name, spec in (("blocked_axis_on_block_boundaries", P("data", None, "model")),
                       ("non_blocked_axes", P("data", "model", None))):
        sh = NamedSharding(mesh, spec)
        f = jax.jit(qdq, in_shardings=(sh,))
        out = f(jax.device_put(x, sh))
        res[f"qdq_{name}_equal"] = all(same(a, b) for a, b in zip(out, single))
        res[f"qdq_{name}_sharded"] = out[0].sharding.is_equivalent_to(sh, x.ndim)
        res[f"qdq_{name}_collectives"] = collectives(f.lower(x).compile().as_text())

    # blocks of 128 across shards of 64: still equal (XLA reshards around the block reshape)
    def qdq128(x):
        q = mxj.quantize(x, "mxint8", block_size=128)
        return q.elements, q.scales, q.dequantize()

    sh = NamedSharding(mesh, P("data", None, "model"))
    out = jax.jit(qdq128, in_shardings=(sh,))(jax.device_put(x, sh))
    res["qdq_blocks_across_shards_equal"] = all(
        same(a, b) for a, b in zip(out, jax.jit(qdq128)(x)))

    def mlp(x, w):
        qx = mxj.quantize(x, "mxfp4_e2m1")
        qw = mxj.quantize(w, "mxfp8_e4m3")
        return mxj.scaled_dot(qx, qw, (((2,), (1,)), ((), ())))

    xs = NamedSharding(mesh, P("data", None, "model"))
    ws = NamedSharding(mesh, P(None, "model"))
    f = jax.jit(mlp, in_shardings=(xs, ws))
    y1 = np.asarray(jax.jit(mlp)(x, w))
    y8 = np.asarray(f(jax.device_put(x, xs), jax.device_put(w, ws)))
    res["dot_rel_err"] = float(np.max(np.abs(y8 - y1)) / np.max(np.abs(y1)))
    res["dot_shape"] = list(y8.shape)
    text = mxj.lower(f, x, w)
    res["lowered_has_sharding"] = ('sdy.sharding' in text or 'mhlo.sharding' in text)
    res["lowered_mentions_mesh_axes"] = '"data"' in text and '"model"' in text
    res["lowered_has_no_mx_ops"] = '"mx.' not in text and "custom_call" not in text

    def nv(x):
        q = mxj.quantize(x, "nvfp4", global_scale=0.125)
        return q.elements, q.scales, q.dequantize()

    g1 = jax.jit(nv)(x)
    g8 = jax.jit(nv, in_shardings=(xs,))(jax.device_put(x, xs))
    res["nvfp4_equal"] = all(same(a, b) for a, b in zip(g8, g1))
    return res


def test_sharded_equals_single_device():
    res = run_on_host_devices(__file__, CHILD_FLAG)
    for name in ("blocked_axis_on_block_boundaries", "non_blocked_axes"):
        assert res[f"qdq_{name}_equal"], name
        assert res[f"qdq_{name}_sharded"], name
        assert res[f"qdq_{name}_collectives"] == [], (name, res[f"qdq_{name}_collectives"])
    assert res["qdq_blocks_across_shards_equal"]
    assert res["dot_shape"] == [4, 16, 64]
    assert res["dot_rel_err"] <= 1e-6
    assert res["lowered_has_sharding"] and res["lowered_mentions_mesh_axes"]
    assert res["lowered_has_no_mx_ops"]
    assert res["nvfp4_equal"]


if __name__ == "__main__" and CHILD_FLAG in sys.argv:
    print(json.dumps(_child()))
