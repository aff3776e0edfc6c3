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


def test_mlp_example_summary_says_what_it_averages():
    spec = importlib.util.spec_from_file_location("mlp_mx_training", EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    losses = [4.0, 2.0, 3.0] + [1.0] * 54 + [0.5, 1.0, 1.5]
    line, ok = ex.loss_summary(losses)
    assert ok and line == ("MX loss, mean of steps 0-2 -> mean of steps 57-59: "
                           "3.0000 -> 1.0000: falls below 0.5x")
    line, ok = ex.loss_summary([2.0, 1.5])
    assert not ok and line == ("MX loss, mean of step 0 -> mean of step 1: "
                               "2.0000 -> 1.5000: DID NOT FALL below 0.5x")
