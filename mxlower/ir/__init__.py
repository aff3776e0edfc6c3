"""IR utilities (layer 1 of docs/architecture.md): parsing sources into modules, walking,
reading function signatures, converting dense literals to and from arrays, retyping functions
and ops, and building StableHLO.  Nothing here knows MX numerics."""
