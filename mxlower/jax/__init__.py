"""mxlower.jax: MX quantize, dequantize and scaled dot for JAX, lowered by mxlower.

::

    import jax, jax.numpy as jnp
    import mxlower.jax as mxj

    @jax.jit
    def layer(x, w):
        qx = mxj.quantize(x, "mxfp4_e2m1")                    # MXArray: elements + scales
        qw = mxj.quantize(w, "mxfp8_e4m3", scale_mode="rceil")
        return mxj.scaled_dot(qx, qw)                         # [M, K] x [N, K] -> [M, N] f32

API
---
* :func:`quantize` ``(x, format="mxfp8_e4m3", *, axis=-1, block_size=None,
  scale_mode="floor", global_scale=None) -> MXArray``
* :func:`dequantize` ``(mx, dtype=jnp.float32)``; also ``MXArray.dequantize(dtype)``
* :func:`convert` ``(x, dtype, *, source=None)``: plain conversions between float32 /
  bfloat16 / float16 and the narrow float types (f6 as uint8 codes)
* :func:`scaled_dot` ``(lhs, rhs, dimension_numbers=None,
  preferred_element_type=jnp.float32)``: each side an :class:`MXArray` or a plain array
* :class:`DatatypeArray`: the one quantized array type, a pytree of ``codes``, ``scales``,
  ``zero_points`` (and a two-level datatype's ``global_scale``) with the static datatype;
  ``.shape``, ``.nbytes``, ``.dequantize()``, ``.detach()``.  :class:`MXArray` is its named
  view for the MX formats: ``elements`` (the codes), ``scales`` (and nvfp4's
  ``global_scale``), ``format``, blocked ``axis`` and ``block_size``
* :func:`cast` ``(x, number, scale=None, *, roundmode="even", scalemode="max", key=None,
  rbits=None)``: the virtual cast to any datatype of docs/semantics.md section 10 (STE
  gradient); :func:`sparse` ``(x, n, m, dim=-1)``: M-of-N sparsity (masked gradient)
* :func:`lower` ``(f, *args, platform="cpu")``: the StableHLO text after mxlower's pipeline
* :func:`install` / :func:`uninstall`: make ``jax.nn.scaled_matmul`` and
  ``jax.nn.scaled_dot_general`` run on the CPU through mxlower

How it lowers
-------------
Each call binds a JAX primitive (``mx_quantize``, ``mx_dequantize``, ``mx_scaled_dot``) whose
lowering rule, registered for every platform, builds the ``mx`` op and runs mxlower's
``mxlower-mx-to-stablehlo`` pipeline on it (:mod:`mxlower.jax.lowering`).  What XLA receives is
plain StableHLO, bit-exact with docs/semantics.md and :mod:`mxlower.reference`, identical for cpu,
cuda and rocm.  Arguments are checked at trace time (``TypeError``/``ValueError`` naming the
argument); the emitted ops carry the caller's source location.

Transformations
---------------
``jax.vmap`` (batching rules), ``jax.jvp`` / ``jax.grad`` (JVP rules; reverse mode by JAX's
transposition).  Gradients are exact through ``dequantize`` and ``scaled_dot`` and use the
straight-through estimator through ``quantize``: a quantized array differentiates as if it
were its input (``d dequantize(quantize(x)) / dx = I``).  Elements, scales and global scales
carry no gradient.  See docs/jax.md.

Sharding and scaling past one machine
-------------------------------------
``jax.jit`` with ``NamedSharding`` inputs works unchanged.  With ``impl="auto"`` on the CPU each
shard runs mxlower's kernels on its own blocks (:mod:`mxlower.jax.sharding`: partitioning rules
through ``jax.experimental.custom_partitioning``); with ``impl="xla"`` the lowering is ordinary
StableHLO that XLA's SPMD partitioner (Shardy) partitions like any JAX op.  Shard batch and
non-blocked axes freely; shard the blocked axis on block boundaries (each shard's length a
multiple of the block size), and quantize/dequantize run without any communication, every
block local to its device.  A ``scaled_dot`` whose contracting (blocked) axis is sharded
computes partial f32 sums per shard and reduce-scatters (or all-reduces) them, or, where
that moves fewer bytes, gathers the operands and splits the result instead.  Blocks that
straddle shards are still computed correctly; XLA then moves data first.  Bit-identical to
one device except a K reduction's summation order (docs/jax.md, "Sharding").
Past one machine nothing changes in mxlower: JAX's multi-controller runtime runs the same
SPMD program in every process.  Call ``jax.distributed.initialize()`` on each host, build the
mesh over ``jax.devices()`` (all hosts' devices, e.g. ``jax.make_mesh((hosts, local),
("data", "model"))`` keeping the "model" axis inside a host so the K reduction stays on the
fast intra-host links), assemble inputs with ``jax.make_array_from_process_local_data``, and
call the same jitted function.  test/python/test_jax_sharding.py and
test_jax_sharding_kernels.py prove the partitioned program on one machine (8 virtual CPU
devices: results equal to one device, the kernels called on each shard's blocks, no
collectives for block-aligned quantize/dequantize, sharding annotations kept in ``lower``'s
text); multi-host runs were not tested here.
"""

from mxlower.jax import cuda_dot as _cuda_dot  # noqa: F401 (registers the CUDA scaled_dot rule)
from mxlower.jax.api import convert, dequantize, lower, quantize, scaled_dot
from mxlower.jax.array import DatatypeArray, MXArray
from mxlower.jax.casts import cast, sparse
from mxlower.jax.install import install, installed, uninstall

__all__ = ["DatatypeArray", "MXArray", "cast", "convert", "dequantize", "install", "installed", "lower", "quantize",
           "scaled_dot", "sparse", "uninstall"]
