"""mxlower.jax.scaled_dot lowered for CUDA (mxlower.jax.cuda_dot), checked on the CPU.

With impl="auto" a pair XLA runs on cuDNN becomes XLA's ``__op$block_scaled_dot`` custom call
in the form JAX's own ``jax.nn.scaled_matmul`` emits for CUDA; the text is read here (operands,
types, backend_config, layouts) and run through mxlower's own legalizer
(``mxlower-legalize-xla-mx``, inside ``mxlower-mx-to-stablehlo``) on XLA:CPU, where it must give
the numbers of ``mxlower.reference`` within docs/semantics.md section 6.  Other pairs, and
impl="xla", ``lower`` and ``jax.export``, never emit it.
"""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mxlower.jax as mxj
from mxlower import reference as R
from mxlower.execution import ffi_cuda
from mxlower.execution.run import run_module
from mxlower.testing import assert_dot_close

PIPE = "builtin.module(mxlower-mx-to-stablehlo)"
TARGET = "__op$block_scaled_dot"


def _cuda_text(f, *args) -> str:
    return jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def _calls(text: str) -> list[dict]:
    """Every ``__op$block_scaled_dot`` in ``text``: operand and result types, backend_config
    (parsed), layouts."""
    out = []
    for line in text.splitlines():
        if f"@{TARGET}(" not in line:
            continue
        attrs = re.search(r"\{(api_version.*)\}\s*:\s*\((.*)\)\s*->\s*(\S+)$", line)
        assert attrs, line
        config = re.search(r'backend_config = "((?:[^"\\]|\\.)*)"', line).group(1)
        out.append({
            "api_version": re.search(r"api_version = (\d+)", line).group(1),
            "config": json.loads(config.replace("\\22", '"')),
            "operand_layouts": line.split("operand_layouts = [")[1].split("], result_layouts")[0],
            "result_layouts": line.split("result_layouts = [")[1].split("]}")[0],
            "operands": [t.strip() for t in attrs.group(2).split(", tensor")],
            "result": attrs.group(3),
        })
    return out


def _mx(x, fmt, **kw):
    return mxj.quantize(np.asarray(x, np.float32), fmt, **kw)


def _dequantized(q) -> np.ndarray:
    """The side's exact f32 values, without nvfp4's global scale (section 6's operands)."""
    return R.dequantize(np.asarray(q.elements), np.asarray(q.scales), q.format,
                        axis=q.blocked_axis, block_size=q.block_size)


def _data(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-6, 6, shape))).astype(np.float32)


CUDNN = [("mxfp8_e4m3", "mxfp8_e4m3", {}), ("mxfp8_e4m3", "mxfp8_e5m2", {}),
         ("mxfp8_e5m2", "mxfp8_e4m3", {}),
         ("nvfp4", "nvfp4", {"global_scale": 0.75})]


@pytest.mark.parametrize("lf,rf,kw", CUDNN, ids=lambda v: v if isinstance(v, str) else "")
def test_cudnn_pairs_emit_block_scaled_dot(lf, rf, kw):
    a, w = _data((3, 8, 64), 0), _data((16, 64), 1)
    qa, qw = _mx(a, lf, **kw), _mx(w, rf, **kw)
    text = _cuda_text(lambda p, q: mxj.scaled_dot(p, q), qa, qw)
    (call,) = _calls(text)
    k = 16 if lf == "nvfp4" else 32
    le = {"mxfp8_e4m3": "f8E4M3FN", "mxfp8_e5m2": "f8E5M2", "nvfp4": "f4E2M1FN"}
    st = "f8E4M3FN" if lf == "nvfp4" else "f8E8M0FNU"
    # [B, M, K] x [B, N, K]: the batch-free lhs [3, 8] flattened to M = 24, B = 1
    assert call["operands"] == [f"tensor<1x24x64x{le[lf]}>", f"<1x16x64x{le[rf]}>",
                                f"<1x24x{64 // k}x{st}>", f"<1x16x{64 // k}x{st}>"]
    assert call["result"] == "tensor<1x24x16xf32>"
    assert call["api_version"] == "2"
    assert call["config"] == {"scaled_dot_backend_config": {
        "lhs_batch_dimensions": [0], "rhs_batch_dimensions": [0], "dequantize_type": "F32"}}
    assert call["operand_layouts"].count("dense<[2, 1, 0]> : tensor<3xindex>") == 4
    assert call["result_layouts"] == "dense<[2, 1, 0]> : tensor<3xindex>"
    assert "stablehlo.custom_call @mxlower_" not in text  # no dequantize kernel beside it


def test_layout_is_normalized_by_transposes_and_reshapes():
    """Batch dimensions in front and the contracting one last, whatever the dimension numbers:
    lhs [K, B, M] blocked along 0, rhs [B, K, N] blocked along 1."""
    a, w = _data((64, 2, 8), 2), _data((2, 64, 16), 3)
    qa = _mx(a, "mxfp8_e4m3", axis=0)
    qw = _mx(w, "mxfp8_e4m3", axis=1)
    dn = (((0,), (1,)), ((1,), (0,)))
    text = _cuda_text(lambda p, q: mxj.scaled_dot(p, q, dn), qa, qw)
    (call,) = _calls(text)
    assert call["operands"][:2] == ["tensor<2x8x64xf8E4M3FN>", "<2x16x64xf8E4M3FN>"]
    assert call["result"] == "tensor<2x8x16xf32>"
    assert "stablehlo.transpose" in text and "dims = [1, 2, 0]" in text


@pytest.mark.parametrize("lf,rf,kw", [
    ("mxfp4_e2m1", "mxfp4_e2m1", {}),          # XLA: no cuDNN MXFP4
    ("mxfp8_e5m2", "mxfp8_e5m2", {}),          # cuDNN: not both e5m2
    ("mxfp8_e4m3", "mxfp8_e4m3", {"block_size": 16}),
    ("mxint8", "mxint8", {}),
    ("nvfp4", "mxfp8_e4m3", {}),
    ("mxfp6_e2m3", "mxfp8_e4m3", {}),
], ids=lambda v: v if isinstance(v, str) else "")
def test_other_pairs_do_not(lf, rf, kw):
    a, w = _data((8, 64), 4), _data((16, 64), 5)
    text = _cuda_text(lambda p, q: mxj.scaled_dot(p, q),
                      _mx(a, lf, **(kw if lf != "nvfp4" else {})),
                      _mx(w, rf, **(kw if rf != "nvfp4" else {})))
    assert TARGET not in text
    assert "mxlower_dot_" not in text  # the fused dot kernel is the CPU's
    if ffi_cuda.available():  # mxlower's CUDA dequantize kernels, then XLA's dot
        kernels = set(re.findall(r"custom_call @(mxlower_dequantize_\w+)", text))
        assert {k.split("_")[2] for k in kernels} == {lf.split("_")[0], rf.split("_")[0]}
        assert "stablehlo.dot_general" in text


def test_plain_side_impl_xla_lower_and_export_do_not():
    a, w = _data((8, 64), 6), _data((16, 64), 7)
    qa, qw = _mx(a, "mxfp8_e4m3"), _mx(w, "mxfp8_e4m3")
    assert TARGET not in _cuda_text(lambda x, q: mxj.scaled_dot(x, q), a, qw)
    assert TARGET not in _cuda_text(lambda p, q: mxj.scaled_dot(p, q, impl="xla"), qa, qw)
    assert TARGET not in mxj.lower(mxj.scaled_dot, qa, qw, platform="cuda")
    exp = jax.export.export(jax.jit(mxj.scaled_dot), platforms=["cuda"])(qa, qw)
    assert TARGET not in exp.mlir_module()
    # and the CPU keeps its own lowering
    assert TARGET not in jax.jit(mxj.scaled_dot).trace(qa, qw).lower().as_text()


ROUND_TRIP = [("mxfp8_e4m3", "mxfp8_e4m3", {}, jnp.float32),
              ("mxfp8_e5m2", "mxfp8_e4m3", {}, jnp.bfloat16),
              ("nvfp4", "nvfp4", {"global_scale": 0.375}, jnp.float32),
              ("nvfp4", "nvfp4", {"global_scale": 3.0}, jnp.float16)]


@pytest.mark.parametrize("lf,rf,kw,out", ROUND_TRIP,
                         ids=lambda v: v if isinstance(v, str) else "")
def test_round_trip_through_the_legalizer(lf, rf, kw, out):
    """The CUDA text, legalized back to mx.scaled_dot by mxlower and run on XLA:CPU: within
    section 6 of the reference (with batch dimensions and a transposed rhs)."""
    a, w = _data((2, 5, 96), 8), _data((2, 96, 7), 9)
    qa, qw = _mx(a, lf, **kw), _mx(w, rf, axis=1, **kw)
    dn = (((2,), (1,)), ((0,), (0,)))
    f = lambda p, q: mxj.scaled_dot(p, q, dn, out)  # noqa: E731
    text = _cuda_text(f, qa, qw)
    assert len(_calls(text)) == 1
    leaves = [np.asarray(v) for v in jax.tree_util.tree_leaves((qa, qw))]
    (got,) = run_module(text, leaves, pipeline=PIPE)
    g = None
    if lf == "nvfp4":
        g = float(np.float32(kw["global_scale"]) * np.float32(kw["global_scale"]))
    name = {jnp.float32: "f32", jnp.bfloat16: "bf16", jnp.float16: "f16"}[out]
    assert_dot_close(got, _dequantized(qa), _dequantized(qw), dn, out=name, global_scale=g,
                     what=f"{lf} x {rf}")
    # and the CPU's own lowering of the same call agrees with it within the contract
    cpu = np.asarray(jax.jit(f)(qa, qw))
    assert_dot_close(cpu, _dequantized(qa), _dequantized(qw), dn, out=name, global_scale=g)
