"""Pipelines (layer 4 of docs/architecture.md): the pipeline-string parser and the one
pass-manager adapter that runs mxlower and upstream passes across the two MLIR stacks."""
