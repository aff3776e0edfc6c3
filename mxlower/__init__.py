"""mxlower: MLIR/StableHLO passes and lowerings for the OCP Microscaling (MX) formats."""

__version__ = "0.1.0"
