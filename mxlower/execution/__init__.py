"""Execution (layer 5 of docs/architecture.md): running modules on XLA:CPU, the StableHLO
interpreter and the LLVM ExecutionEngine, and assembling PTX."""
