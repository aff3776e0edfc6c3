"""examples/mlp_mx_training.py: the MX-quantized MLP trains (its loss falls) on the CPU."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "mlp_mx_training.py"


def test_mlp_example_loss_falls():
    spec = importlib.util.spec_from_file_location("mlp_mx_training", EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    x, y, params = ex.make_data(0)
    _, losses = ex.train(ex.linear_mx, params, x, y, steps=12)
    assert all(np.isfinite(losses))
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])
