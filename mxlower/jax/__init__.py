"""mxlower.jax: MX quantize, dequantize and scaled dot for JAX, lowered by mxlower."""

from mxlower.jax.api import dequantize, lower, quantize, scaled_dot
from mxlower.jax.array import MXArray

__all__ = ["MXArray", "dequantize", "lower", "quantize", "scaled_dot"]
