"""mxlower.jax: MX quantize, dequantize and scaled dot for JAX, lowered by mxlower."""

from mxlower.jax.api import dequantize, lower, quantize, scaled_dot
from mxlower.jax.array import MXArray
from mxlower.jax.install import install, installed, uninstall

__all__ = ["MXArray", "dequantize", "install", "installed", "lower", "quantize", "scaled_dot",
           "uninstall"]
