"""Regenerate the JAX-produced MX modules shipped in examples/ and test/lit/Inputs/.

    python examples/make_examples.py

Each module is what JAX itself emits when a block-scaled matmul is lowered for CUDA
(``jax.jit(f).trace(...).lower(lowering_platforms=("cuda",))`` works without a GPU):
``jax.nn.scaled_matmul`` and ``jax.nn.scaled_dot_general`` (mxfp8 and nvfp4 configs) produce
``stablehlo.custom_call @__op$block_scaled_dot``; ``jax.lax.scaled_dot`` produces the
``stablehlo.composite "xla.scaled_dot"``.  Next to each ``NAME.mlir`` go ``NAME.inputs.npz``
(``arg0``, ``arg1``, ...: seeded data, quantized with JAX's own quantizer where the module takes
quantized operands) and ``NAME.ref.npz`` (``result0``: the dequantize-then-matmul reference of
mxlower.reference, accumulated exactly and rounded once).
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from mxlower import reference as R

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _lower(f, *args) -> str:
    lowered = jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",))
    return lowered.as_text()


def _jax_quantize(x: np.ndarray, mode: str):
    """JAX's own block quantizer (jax._src.cudnn.scaled_matmul_stablehlo.quantize) on CPU."""
    from mxlower.bindings.jax_private import jax_quantize as quantize  # JAX's own quantizer

    cfg = jax.nn.get_scaled_dot_general_config(mode)
    q, s = jax.jit(lambda v: quantize(v, cfg))(x)
    return np.asarray(q), np.asarray(s)


def _write(out_dir: pathlib.Path, name: str, text: str, how: str, inputs, ref) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    header = (f"// {name}: produced by examples/make_examples.py with jax {jax.__version__}:\n"
              f"//   {how}\n"
              f"// Inputs: {name}.inputs.npz; dequantize-then-matmul reference: {name}.ref.npz\n")
    (out_dir / f"{name}.mlir").write_text(header + text)
    np.savez(out_dir / f"{name}.inputs.npz", **{f"arg{i}": _codes(a) for i, a in enumerate(inputs)})
    np.savez(out_dir / f"{name}.ref.npz", result0=_codes(ref))


def _codes(a: np.ndarray) -> np.ndarray:
    """ml_dtypes arrays (bf16, f8, f4, ...) are stored as their raw unsigned codes, which is
    how mxlower-run reads data for those types (NumPy cannot load most of them back)."""
    a = np.asarray(a)
    return R.bits(a) if a.dtype.type.__module__.startswith("ml_dtypes") else a


def _matmul_ref(a, a_s, b, b_s, fmt: str, out="f32", global_scale=None) -> np.ndarray:
    """(B, M, K) x (B, N, K) -> (B, M, N), operands dequantized exactly."""
    da = R.dequantize(a, a_s, fmt)
    db = R.dequantize(b, b_s, fmt)
    return R.scaled_dot(da, None, db, None, dimension_numbers=(((2,), (2,)), ((0,), (0,))),
                        global_scale=global_scale, out_dtype=out)


def scaled_matmul(mode: str, fmt: str, shape=(1, 32, 16, 128), seed=0):
    b_, m, n, k = shape
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((b_, m, k)).astype(np.float32)
    b = rng.standard_normal((b_, n, k)).astype(np.float32)
    aq, a_s = _jax_quantize(a, mode)
    bq, b_s = _jax_quantize(b, mode)

    def f(lhs, rhs, lhs_scales, rhs_scales):
        return jax.nn.scaled_matmul(lhs, rhs, lhs_scales, rhs_scales,
                                    preferred_element_type=jnp.float32)

    text = _lower(f, aq, bq, a_s, b_s)
    how = (f"jax.nn.scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type="
           f"f32) on {mode} operands {aq.dtype}{list(aq.shape)} x {bq.dtype}{list(bq.shape)}, "
           "lowered for cuda")
    return text, how, [aq, bq, a_s, b_s], _matmul_ref(aq, a_s, bq, b_s, fmt)


def scaled_dot_general(mode: str, fmt: str, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((32, 128)).astype(np.float32)
    y = rng.standard_normal((16, 128)).astype(np.float32)
    cfg = jax.nn.get_scaled_dot_general_config(mode)

    def f(lhs, rhs):
        return jax.nn.scaled_dot_general(lhs, rhs, (((1,), (1,)), ((), ())),
                                         preferred_element_type=jnp.float32,
                                         configs=[cfg, cfg, cfg])

    text = _lower(f, x, y)
    xq, xs = _jax_quantize(x[None], mode)
    yq, ys = _jax_quantize(y[None], mode)
    g = None if mode == "mxfp8" else float(np.asarray(cfg.global_scale)[0]) ** 2
    ref = _matmul_ref(xq, xs, yq, ys, fmt, global_scale=g)[0]
    how = (f"jax.nn.scaled_dot_general(x, y, (((1,), (1,)), ((), ())), configs=[{mode} config]"
           f" * 3) on f32[32,128] x f32[16,128], lowered for cuda")
    return text, how, [x, y], ref


def lax_scaled_dot(plain_rhs: bool, seed=2):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((32, 128)).astype(np.float32)
    b = rng.standard_normal((128, 16)).astype(np.float32)
    aq, a_s = R.quantize(a, "mxfp8_e4m3", axis=1, scale_mode="rceil")
    da = R.dequantize(aq, a_s, "mxfp8_e4m3", axis=1)
    if plain_rhs:
        bp = b.astype(ml_dtypes.bfloat16)

        def f(lhs, rhs, lhs_scale):
            return jax.lax.scaled_dot(lhs, rhs, lhs_scale=lhs_scale,
                                      preferred_element_type=jnp.float32)

        text = _lower(f, aq, bp, a_s)
        ref = R.scaled_dot(da, None, bp, None, dimension_numbers=(((1,), (0,)), ((), ())))
        how = ("jax.lax.scaled_dot(lhs, rhs, lhs_scale=...) with an mxfp8_e4m3 lhs and a plain "
               "bf16 rhs, lowered for cuda")
        return text, how, [aq, bp, a_s], ref
    bq, b_s = R.quantize(b, "mxfp8_e5m2", axis=0, scale_mode="rceil")
    db = R.dequantize(bq, b_s, "mxfp8_e5m2", axis=0)

    def g(lhs, rhs, lhs_scale, rhs_scale):
        return jax.lax.scaled_dot(lhs, rhs, lhs_scale=lhs_scale, rhs_scale=rhs_scale,
                                  preferred_element_type=jnp.float32)

    text = _lower(g, aq, bq, a_s, b_s)
    ref = R.scaled_dot(da, None, db, None, dimension_numbers=(((1,), (0,)), ((), ())))
    how = ("jax.lax.scaled_dot(lhs, rhs, lhs_scale=..., rhs_scale=...) with mxfp8_e4m3 x "
           "mxfp8_e5m2 operands, lowered for cuda")
    return text, how, [aq, bq, a_s, b_s], ref


def main() -> None:
    examples = ROOT / "examples"
    inputs = ROOT / "test" / "lit" / "Inputs"
    mxfp8 = scaled_matmul("mxfp8", "mxfp8_e4m3")
    _write(examples, "mxfp8_scaled_matmul", *mxfp8)
    _write(inputs, "jax_scaled_matmul_mxfp8", *mxfp8)
    _write(inputs, "jax_scaled_matmul_nvfp4", *scaled_matmul("nvfp4", "nvfp4", seed=3))
    _write(inputs, "jax_scaled_dot_general_mxfp8", *scaled_dot_general("mxfp8", "mxfp8_e4m3"))
    _write(inputs, "jax_scaled_dot_general_nvfp4", *scaled_dot_general("nvfp4", "nvfp4"))
    _write(inputs, "jax_lax_scaled_dot", *lax_scaled_dot(plain_rhs=False))
    _write(inputs, "jax_lax_scaled_dot_plain_rhs", *lax_scaled_dot(plain_rhs=True))


if __name__ == "__main__":
    main()
