"""Train a two-layer MLP with MXFP8 weights and MXFP4 activations on the CPU with mxlower.jax.

    python examples/mlp_mx_training.py [--steps 60] [--seed 0]

The model keeps float32 master weights.  Every forward pass quantizes the weights to
mxfp8_e4m3 and the activations (inputs and hidden layer) to mxfp4_e2m1, both blocked along the
contracting dimension, and multiplies them with ``mxlower.jax.scaled_dot`` (dequantize-then-dot
with f32 accumulation, lowered by mxlower's passes to plain StableHLO that XLA:CPU compiles).
Gradients flow through ``quantize`` with the straight-through estimator and exactly through
``scaled_dot``.  The data are synthetic: a random teacher MLP labels Gaussian inputs.

Printed: the training loss of the MX model next to the same model trained in bfloat16, then,
for every MX format, the relative error of one layer's output (weights and activations in that
format) against float32, next to bfloat16's, and a closing line comparing the mean MX loss of
the first three steps with that of the last three.  Exit status 1 if that mean did not fall
below half.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import mxlower.jax as mxj
from mxlower.formats import FORMATS

D_IN, HIDDEN, D_OUT, BATCH = 128, 256, 32, 256


def make_data(seed: int):
    rng = np.random.default_rng(seed)
    t1 = rng.standard_normal((HIDDEN, D_IN)).astype(np.float32) / np.sqrt(D_IN)
    t2 = rng.standard_normal((D_OUT, HIDDEN)).astype(np.float32) / np.sqrt(HIDDEN)
    x = rng.standard_normal((8 * BATCH, D_IN)).astype(np.float32)
    y = np.maximum(x @ t1.T, 0) @ t2.T
    params = {"w1": rng.standard_normal((HIDDEN, D_IN)).astype(np.float32) / np.sqrt(D_IN),
              "w2": rng.standard_normal((D_OUT, HIDDEN)).astype(np.float32) / np.sqrt(HIDDEN)}
    return x, y.astype(np.float32), params


def linear_mx(x, w, act_fmt="mxfp4_e2m1", w_fmt="mxfp8_e4m3"):
    """x [B, K] @ w[N, K]^T with both operands MX-quantized along K."""
    return mxj.scaled_dot(mxj.quantize(x, act_fmt), mxj.quantize(w, w_fmt))


def linear_bf16(x, w):
    return jax.lax.dot_general(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16),
                               (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)


def mlp(params, x, linear):
    return linear(jax.nn.relu(linear(x, params["w1"])), params["w2"])


def train(linear, params, x, y, steps: int, lr: float = 0.05):
    def loss_fn(p, xb, yb):
        return jnp.mean((mlp(p, xb, linear) - yb) ** 2)

    @jax.jit
    def step(p, m, xb, yb):  # SGD with momentum
        loss, g = jax.value_and_grad(loss_fn)(p, xb, yb)
        m = jax.tree.map(lambda m, g: 0.9 * m + g, m, g)
        p = jax.tree.map(lambda p, m: p - lr * m, p, m)
        return p, m, loss

    m = jax.tree.map(jnp.zeros_like, params)
    losses = []
    n = x.shape[0] // BATCH
    for i in range(steps):
        j = i % n
        params, m, loss = step(params, m, x[j * BATCH:(j + 1) * BATCH],
                               y[j * BATCH:(j + 1) * BATCH])
        losses.append(float(loss))
    return params, losses


def format_errors(seed: int):
    """Relative error ||y - y_f32|| / ||y_f32|| of one layer with weights and activations in
    each format (and in bf16)."""
    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal((BATCH, D_IN)).astype(np.float32)
    w = rng.standard_normal((HIDDEN, D_IN)).astype(np.float32) / np.sqrt(D_IN)
    ref = x.astype(np.float64) @ w.T.astype(np.float64)

    def rel(y):
        return float(np.linalg.norm(np.asarray(y, np.float64) - ref) / np.linalg.norm(ref))

    rows = [("bf16", 16.0, rel(jax.jit(linear_bf16)(x, w)))]
    for name, fmt in FORMATS.items():
        kw = {"act_fmt": name, "w_fmt": name}
        y = jax.jit(lambda x, w: linear_mx(x, w, **kw))(x, w)
        rows.append((name, fmt.bytes_per_block() * 8 / fmt.block_size, rel(y)))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    x, y, params = make_data(args.seed)
    t0 = time.perf_counter()
    _, mx_losses = train(linear_mx, params, x, y, args.steps)
    t_mx = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, bf_losses = train(linear_bf16, params, x, y, args.steps)
    t_bf = time.perf_counter() - t0

    print(f"MLP {D_IN}->{HIDDEN}->{D_OUT}, batch {BATCH}, {args.steps} steps on "
          f"{jax.devices()[0].platform}")
    print("  weights mxfp8_e4m3, activations mxfp4_e2m1 (mxlower.jax) vs bfloat16")
    print(f"  {'step':>5}  {'MX loss':>10}  {'bf16 loss':>10}")
    for i in sorted({0, 1, 2, 5, 10, 20, args.steps // 2, args.steps - 1}):
        if i < args.steps:
            print(f"  {i:>5}  {mx_losses[i]:>10.5f}  {bf_losses[i]:>10.5f}")
    print(f"  time (incl. compile): MX {t_mx:.1f} s, bf16 {t_bf:.1f} s")

    print("\nOne layer (x[256,128] @ w[128,256]), both operands in the format, error vs f32:")
    rows = format_errors(args.seed)
    bf = rows[0][2]
    print(f"  {'format':<12} {'bits/value':>10} {'rel. error':>11} {'vs bf16':>8}")
    for name, bits, err in rows:
        print(f"  {name:<12} {bits:>10.2f} {err:>11.2e} {err / bf:>7.1f}x")

    line, ok = loss_summary(mx_losses)
    print("\n" + line)
    return 0 if ok else 1


def loss_summary(losses, window: int = 3, factor: float = 0.5) -> tuple[str, bool]:
    """The closing line: the mean loss of the first ``window`` steps against that of the last
    ``window`` (single steps are noisy), and whether it fell below ``factor`` times the first."""
    n = len(losses)
    w = max(1, min(window, n // 2 or 1))
    first, last = float(np.mean(losses[:w])), float(np.mean(losses[-w:]))
    ok = last < factor * first
    span = (lambda a, b: f"step {a}" if a == b else f"steps {a}-{b}")
    return (f"MX loss, mean of {span(0, w - 1)} -> mean of {span(n - w, n - 1)}: "
            f"{first:.4f} -> {last:.4f}: "
            f"{f'falls below {factor:g}x' if ok else f'DID NOT FALL below {factor:g}x'}"), ok


if __name__ == "__main__":
    sys.exit(main())
