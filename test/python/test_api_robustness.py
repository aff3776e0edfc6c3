"""The Python API on hostile arguments (issue 22): a TypeError or ValueError naming the
argument, at once and at trace time, never a KeyError, OverflowError, MemoryError, a NumPy
error from deep inside, a run-time FFI error or a hang."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import mxlower.jax as mj
from mxlower import numbers
from mxlower import reference as R

X = np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32)


# ----------------------------------------------------------------------------- spec parameters


@pytest.mark.parametrize("code, what", [
    ("e4m3b99999999999999999", "the bias must be -1024..1024"),
    ("e4m3b-" + "9" * 60, "the bias must be -1024..1024"),
    ("e" + "9" * 30 + "m3", "exponent bits must be 1..8"),
    ("e4m" + "9" * 30, "mantissa bits must be 0..23"),
    ("int" + "9" * 30, "intK needs 2 <= K <= 32"),
    ("e4m3b" + "0" * 5000 + "7", "at most 100 characters"),
])
def test_huge_number_spec_parameters_are_refused_naming_the_limit(code, what):
    """Spec values used to be computed as exact powers of two of the bias (a hang in the tools,
    MemoryError in the API): every parameter is bounded first."""
    with pytest.raises(numbers.SpecError, match=what):
        numbers.number(code)
    with pytest.raises(ValueError, match=what):
        R.cast(X, code)
    with pytest.raises(ValueError, match=r"argument 'number'.*" + what):
        mj.cast(jnp.asarray(X), code)


@pytest.mark.parametrize("code, what", [
    ("e8m0_t" + "9" * 30, "a tile size must be a power of two from 2 to 1024"),
    ("e8m0_t32x" + "9" * 30, "a tile size must be a power of two from 2 to 1024"),
    ("e8m0_t32d" + "9" * 30, "a tile dimension must be -1024..1023"),
    ("e8m0_t32d-" + "9" * 30, "a tile dimension must be -1024..1023"),
])
def test_huge_scale_spec_parameters_are_refused_naming_the_limit(code, what):
    with pytest.raises(numbers.SpecError, match=what):
        numbers.scale(code)
    with pytest.raises(ValueError, match=what):
        R.cast(X, "int8", code)
