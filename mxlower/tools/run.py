"""``mxlower-run``: compile a StableHLO module on XLA:CPU (after an optional pipeline) and run it.

    mxlower-run model.mlir -p 'builtin.module(mxlower-mx-to-stablehlo)' -i inputs.npz
    mxlower-run model.mlir -p 'builtin.module(mxlower-mx-to-stablehlo)' --seed 3 -o out.npz
    mxlower-run model.mlir -i x.npy -i y.npy --compare ref.npz --rtol 1e-6

Inputs come from ``.npy`` files (one argument each) and ``.npz`` files (arguments ``arg0``,
``arg1``, ... or ``arr_0``, ``arr_1``, ... by number, else in file order), in the order given;
with no ``-i`` they are seeded random data of the argument types.  Results are printed as MLIR
dense literals (``%0 = dense<[...]> : tensor<...>``, non-finite values as their bit patterns,
as MLIR prints them), saved with ``-o out.npz`` (``result0``, ``result1``, ...), and compared
with ``--compare ref.npz``: bit-exact by default, or ``|got - ref| <= atol + rtol * |ref|``.
Bad input (no such function, wrong argument count, dtype or shape, a failing pipeline, a module
XLA cannot compile) is an error with exit code 1; a comparison that fails exits with 2.

A ``@main`` with dynamic dimensions (``jax.export`` with symbolic shapes) runs at the shapes of
its inputs: it takes their static types and StableHLO's shape refinement makes the body static.

``--backend=interpreter`` runs the module with StableHLO's reference interpreter instead of
XLA:CPU (slow, but it handles every type, f6 included; its own f32 -> f8E8M0FNU conversion
departs from MX-SEMANTICS for 0, negative and subnormal inputs, so append
``mxlower-expand-narrow-floats`` for exact e8m0 conversions there).  ``--backend=llvm`` lowers it with
``mxlower-stablehlo-to-llvm`` and runs it on upstream MLIR's ExecutionEngine (every narrow type,
f6 included, through mxlower's own conversion code), in an isolated worker process.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from mxlower.diagnostics import DiagnosticEngine
from mxlower.tools.source import (ArgParser, CliError, check_dialects, cli_main, parse_module,
                                  print_diagnostics, read_source, write_atomic)

__all__ = ["DTYPES", "format_literal", "main", "random_inputs", "run_module"]

PROG = "mxlower-run"

#: MLIR element type -> NumPy dtype
DTYPES: dict[str, np.dtype] = {
    "f64": np.dtype(np.float64), "f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn), "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f8E8M0FNU": np.dtype(ml_dtypes.float8_e8m0fnu),
    "f6E3M2FN": np.dtype(ml_dtypes.float6_e3m2fn), "f6E2M3FN": np.dtype(ml_dtypes.float6_e2m3fn),
    "f4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
    "i1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "ui8": np.dtype(np.uint8),
    "ui16": np.dtype(np.uint16), "ui32": np.dtype(np.uint32), "ui64": np.dtype(np.uint64),
}
_BITS = {"f8E4M3FN": 8, "f8E5M2": 8, "f8E8M0FNU": 8, "f6E3M2FN": 6, "f6E2M3FN": 6,
         "f4E2M1FN": 4, "f64": 64, "f32": 32, "f16": 16, "bf16": 16}


class RunError(CliError):
    """Bad input to a run (also raised by :func:`run_module`)."""


@dataclasses.dataclass
class Signature:
    name: str
    args: list[tuple[tuple[int, ...], str]]
    results: list[tuple[tuple[int, ...], str]]


def _ttype(shape: Sequence[int | None], elt: str) -> str:
    return "tensor<" + "".join("?x" if d is None else f"{d}x" for d in shape) + elt + ">"


# ----------------------------------------------------------------------------- literals


def _uint(dt: np.dtype) -> np.dtype:
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize])


def _hex(code: int, elt: str, itemsize: int = 1) -> str:
    width = max(1, (_BITS.get(elt, 8 * itemsize) + 3) // 4)
    return f"0x{code:0{width}X}"


def _codes(a: np.ndarray, elt: str) -> np.ndarray:
    c = a.view(_uint(a.dtype))
    bits = _BITS.get(elt)
    return c & ((1 << bits) - 1) if bits and bits < 8 else c


def _element_strings(a: np.ndarray, elt: str, bits: bool) -> list[str]:
    flat = np.ascontiguousarray(a).reshape(-1)
    if elt == "i1":
        return ["true" if v else "false" for v in flat]
    if a.dtype.kind in "iu":
        return [_hex(int(v), elt, a.dtype.itemsize) if bits else str(int(v)) for v in
                (flat.view(_uint(a.dtype)) if bits else flat)]
    codes = _codes(flat, elt)
    if bits:
        return [_hex(int(c), elt, a.dtype.itemsize) for c in codes]
    f = flat.astype(np.float64)
    f32 = flat.astype(np.float32) if a.dtype != np.float64 else None
    out = []
    for i, v in enumerate(f):
        if not np.isfinite(v):
            out.append(_hex(int(codes[i]), elt, a.dtype.itemsize))
        elif f32 is not None:
            out.append(_mlir_float(str(f32[i]) if np.float64(f32[i]) == v else repr(float(v))))
        else:
            out.append(_mlir_float(repr(float(v))))
    return out


def _mlir_float(s: str) -> str:
    """MLIR's float literals need a '.' before the exponent: '1e-45' -> '1.0e-45'."""
    mant, e, exp = s.partition("e")
    if e and "." not in mant:
        return f"{mant}.0e{exp}"
    return s if "." in s or e else s + ".0"


def _nest(items: list[str], shape: tuple[int, ...]) -> str:
    if not shape:
        return items[0]
    if len(shape) == 1:
        return "[" + ", ".join(items) + "]"
    step = len(items) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nest(items[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"


def format_literal(a: np.ndarray, elt: str, *, bits: bool = False) -> str:
    """``dense<...> : tensor<...>`` for an array of MLIR element type ``elt`` (parseable by
    MLIR: finite floats as shortest round-trip decimals, non-finite ones as bit patterns)."""
    a = np.asarray(a)
    items = _element_strings(a, elt, bits)
    if a.size and all(x == items[0] for x in items) and a.size > 1 and not bits:
        body = items[0]  # a splat, as MLIR prints it
    else:
        body = _nest(items, a.shape) if a.size else "[]" if a.ndim else ""
    return f"dense<{body}> : {_ttype(a.shape, elt)}"


# ----------------------------------------------------------------------------- inputs


def random_inputs(sig: Signature, seed: int) -> list[np.ndarray]:
    """Seeded data of the argument types: normal(0, 1) for f16/bf16/f32/f64; for narrow floats
    normal values scaled to a quarter of the type's range (never NaN); f8E8M0FNU scales
    2^-8 .. 2^8; integers uniform in [-8, 8) (unsigned [0, 16)); i1 uniform."""
    rng = np.random.default_rng(seed)
    out = []
    for i, (shape, elt) in enumerate(sig.args):
        if None in shape:
            raise RunError(f"argument #{i} of @{sig.name} is {_ttype(shape, elt)}: a dynamic "
                           "shape needs its data as an input (-i), not seeded random data")
        dt = DTYPES[elt]
        if elt == "f8E8M0FNU":
            codes = rng.integers(127 - 8, 127 + 9, size=shape).astype(np.uint8)
            out.append(codes.view(dt))
        elif elt in ("f64", "f32", "f16", "bf16"):
            out.append(rng.standard_normal(shape).astype(dt))
        elif dt.kind == "V" or elt.startswith(("f8", "f6", "f4")):
            top = float(ml_dtypes.finfo(dt).max)
            out.append(np.clip(rng.standard_normal(shape) * top / 4, -top, top).astype(dt))
        elif elt == "i1":
            out.append(rng.integers(0, 2, size=shape).astype(np.bool_))
        elif dt.kind == "u":
            out.append(rng.integers(0, 16, size=shape).astype(dt))
        else:
            out.append(rng.integers(-8, 8, size=shape).astype(dt))
    return out


def _npz_arrays(path: str) -> list[tuple[str, np.ndarray]]:
    with np.load(path, allow_pickle=False) as z:
        keys = list(z.files)
        for prefix in ("arg", "arr_", "result"):
            if keys and all(re.fullmatch(re.escape(prefix) + r"\d+", k) for k in keys):
                keys.sort(key=lambda k: int(k[len(prefix):]))
                break
        return [(f"{path}[{k}]", np.asarray(z[k])) for k in keys]


def load_arrays(paths: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """(display name, array) for every array in ``.npy``/``.npz`` files, in order."""
    out: list[tuple[str, np.ndarray]] = []
    for p in paths:
        try:
            if p.endswith(".npz"):
                out.extend(_npz_arrays(p))
            else:
                out.append((p, np.load(p, allow_pickle=False)))
        except FileNotFoundError:
            raise RunError(f"could not open input file '{p}': no such file") from None
        except (OSError, ValueError) as e:
            raise RunError(f"could not read '{p}' as a NumPy .npy/.npz file: {e}") from None
    return out


def _typed(a: np.ndarray, elt: str) -> np.ndarray:
    """Data for an ml_dtypes element type (bf16, f8, f6, f4) travels in .npy/.npz files as its
    raw codes: unsigned integers of the same width (what ``-o`` writes; NumPy itself cannot
    load most ml_dtypes arrays back) or the untyped bytes ('|V1', '|V2') NumPy saves them as.
    Give such data the element type; f4/f6 codes must fit their width."""
    want = DTYPES.get(elt)
    if want is None or not _is_ml(want) or a.dtype.itemsize != want.itemsize:
        return a
    if a.dtype.kind == "u" or (a.dtype.kind == "V" and a.dtype.fields is None):
        bits = _BITS.get(elt, 8 * want.itemsize)
        codes = a.view(_uint(want))
        if bits < 8 and codes.size and int(codes.max()) >= 1 << bits:
            raise RunError(f"codes of {elt} must be below {1 << bits}, found {int(codes.max())}")
        return codes.view(want)
    return a


def _is_ml(dt: np.dtype) -> bool:
    return dt.kind == "V" or dt.type.__module__.startswith("ml_dtypes")


def _storable(a: np.ndarray) -> np.ndarray:
    """ml_dtypes arrays as their raw codes (see :func:`_typed`), others unchanged."""
    return a.view(_uint(a.dtype)) if _is_ml(a.dtype) else a


def _dtype_name(dt: np.dtype) -> str:
    for k, v in DTYPES.items():
        if v == dt:
            return f"{k} ({dt.name})"
    return dt.name


def check_inputs(sig: Signature, named: list[tuple[str, np.ndarray]]) -> list[np.ndarray]:
    if len(named) != len(sig.args):
        raise RunError(f"@{sig.name} takes {len(sig.args)} argument"
                       f"{'s' if len(sig.args) != 1 else ''} but {len(named)} input array"
                       f"{'s were' if len(named) != 1 else ' was'} given")
    out = []
    for i, ((name, a), (shape, elt)) in enumerate(zip(named, sig.args)):
        want = DTYPES.get(elt)
        a = _typed(a, elt)
        if a.dtype != want:
            raise RunError(f"argument #{i} of @{sig.name} is {_ttype(shape, elt)} but {name} "
                           f"holds {_dtype_name(a.dtype)} data"
                           + (f" (expected {want.name})" if want is not None else ""))
        if a.ndim != len(shape) or any(d is not None and d != n for d, n in zip(shape, a.shape)):
            raise RunError(f"argument #{i} of @{sig.name} is {_ttype(shape, elt)} but {name} "
                           f"has shape {tuple(a.shape)}")
        out.append(np.asarray(a, order="C"))  # (ascontiguousarray makes 0-d arrays 1-d)
    return out


# ----------------------------------------------------------------------------- module handling


def _tensor_info(t: Any, what: str) -> tuple[tuple[int | None, ...], str]:
    """(shape with None for each dynamic dimension, element type)."""
    from mxlower.bindings.jaxlib import ir

    if not isinstance(t, ir.RankedTensorType):
        raise RunError(f"{what} has type {t}; only ranked tensors can be run")
    t = ir.RankedTensorType(t)
    elt = str(t.element_type)
    if elt not in DTYPES:
        raise RunError(f"{what} has element type {elt}, which mxlower-run cannot exchange "
                       f"(supported: {', '.join(DTYPES)})")
    return tuple(None if t.is_dynamic_dim(i) else d for i, d in enumerate(t.shape)), elt


def make_static(module: Any, sig: Signature, arrays: list[np.ndarray]) -> Signature:
    """Give ``@main`` the static argument types of ``arrays`` and refine the shapes inside
    (``stablehlo-refine-arguments``, ``stablehlo-refine-shapes``,
    ``stablehlo-canonicalize-dynamism``, and ``stablehlo-check-shape-assertions`` for the
    ``shape_assertion`` custom calls of a ``jax.export`` module: what JAX does when it calls a
    shape-polymorphic export), so that a module with dynamic dimensions runs on every backend.  Returns the
    static signature; a module already static is left alone."""
    from mxlower.diagnostics import PassFailure
    from mxlower.passes.manager import run_pipeline

    if not any(None in shape for shape, _ in sig.args + sig.results):
        return sig
    types = ",".join(_ttype(a.shape, elt) for a, (_, elt) in zip(arrays, sig.args))
    try:
        run_pipeline(module, f"builtin.module(stablehlo-refine-arguments{{types={types}}}, "
                     "stablehlo-refine-shapes, func.func(stablehlo-canonicalize-dynamism, "
                     "stablehlo-check-shape-assertions))")
    except PassFailure as e:
        raise RunError(f"cannot make @{sig.name} static for the inputs' shapes ({types}): "
                       f"{e}") from None
    static = select_function(module, "main")
    static.name = sig.name
    left = [i for i, (shape, _) in enumerate(static.results) if None in shape]
    if left:
        raise RunError(f"the shapes of result(s) {', '.join(f'#{i}' for i in left)} of "
                       f"@{sig.name} stay dynamic after shape refinement")
    return static


def select_function(module: Any, name: str) -> Signature:
    """Make ``@name`` the module's public ``@main`` (what XLA and the interpreter run)."""
    from mxlower.bindings.jaxlib import ir

    funcs = {}
    for o in module.regions[0].blocks[0].operations:
        if o.operation.name == "func.func":
            funcs[ir.StringAttr(o.operation.attributes["sym_name"]).value] = o.operation
    if name not in funcs:
        known = ", ".join(f"@{f}" for f in funcs) or "none"
        raise RunError(f"no function @{name} in the module (functions: {known})")
    fn = funcs[name]
    with module.context:
        if name != "main":
            if "main" in funcs:
                ir.SymbolTable.set_symbol_name(funcs["main"], "__mxlower_run_main")
                ir.SymbolTable.replace_all_symbol_uses("main", "__mxlower_run_main", module)
            ir.SymbolTable.set_symbol_name(fn, "main")
            ir.SymbolTable.replace_all_symbol_uses(name, "main", module)
        if "sym_visibility" in fn.attributes:
            del fn.attributes["sym_visibility"]
    ftype = ir.TypeAttr(fn.attributes["function_type"]).value
    args = [_tensor_info(t, f"argument #{i} of @{name}") for i, t in enumerate(ftype.inputs)]
    results = [_tensor_info(t, f"result #{i} of @{name}") for i, t in enumerate(ftype.results)]
    return Signature(name, args, results)


def _leftover_ops(module: Any) -> list[str]:
    from mxlower.bindings import collect_ops

    found = collect_ops(module, lambda o: o.name.startswith("mx."))
    return list(dict.fromkeys(o.name for o in found))


def _run_xla(text: str, sig: Signature, inputs: list[np.ndarray]) -> list[np.ndarray]:
    import jax

    from mxlower import xla_cpu

    if any(DTYPES[e].itemsize == 8 for _, e in sig.args + sig.results):
        jax.config.update("jax_enable_x64", True)
    f6 = sorted({t for t in ("f6E3M2FN", "f6E2M3FN") if t in text})
    if f6:
        raise RunError(f"XLA:CPU has no {' or '.join(f6)} type: append "
                       "mxlower-expand-narrow-floats to the pipeline, or use "
                       "--backend=interpreter")
    with _quiet_stderr() as captured:
        try:
            exe = xla_cpu.compile(text)
        except Exception as e:  # noqa: BLE001 - XLA reports through assorted exception types
            msg = [m for m in str(e).strip().splitlines() if m.strip()]
            first = msg[0] if msg else type(e).__name__
            raise RunError(f"XLA:CPU could not compile the module: {first}") from None
    if captured:  # XLA's own log lines of a successful compile: pass them on
        sys.stderr.write(captured[0])
    return exe(*inputs)


class _quiet_stderr:
    """Collect what native code writes to file descriptor 2 (LLVM and XLA print there)."""

    def __enter__(self) -> list[str]:
        import os
        import tempfile

        self.out: list[str] = []
        sys.stderr.flush()
        self.tmp = tempfile.TemporaryFile(mode="w+b")
        self.saved = os.dup(2)
        os.dup2(self.tmp.fileno(), 2)
        return self.out

    def __exit__(self, exc_type, *rest) -> None:
        import os

        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.tmp.seek(0)
        text = self.tmp.read().decode(errors="replace")
        self.tmp.close()
        if exc_type is None and text.strip():
            self.out.append(text)


def _attr_to_array(attr: Any, shape: tuple[int, ...], elt: str) -> np.ndarray:
    dt = DTYPES[elt]
    try:
        a = np.array(attr)
        if a.dtype == dt or (a.dtype.kind == dt.kind and a.dtype.itemsize == dt.itemsize):
            return a.reshape(shape).view(dt) if a.dtype != dt else a.reshape(shape)
    except Exception:  # noqa: BLE001 - the bindings reject types NumPy lacks
        pass
    text = str(attr)
    m = re.match(r"\s*dense<(.*)>\s*:\s*tensor<[^<>]*>\s*$", text, re.S)
    if m is None:
        raise RunError(f"cannot read the interpreter's result {text[:80]}")
    body = m.group(1).strip()
    n = int(np.prod(shape))
    blob = re.fullmatch(r'"0x([0-9A-Fa-f]*)"', body)
    if blob:  # large attributes print as their raw little-endian storage, one hex string
        raw = np.frombuffer(bytes.fromhex(blob.group(1)), dtype=_uint(dt))
        if raw.size not in (1, n):
            raise RunError(f"cannot read the interpreter's result: {raw.size} elements of "
                           f"{elt} for shape {list(shape)}")
        return np.broadcast_to(raw, (n,)).reshape(shape).view(dt).copy()
    toks = re.findall(r"0x[0-9A-Fa-f]+|true|false|[-+]?(?:inf|nan|\d+\.?\d*(?:[eE][-+]?\d+)?)",
                      body)
    vals = []
    for t in toks:
        if t.startswith("0x"):
            vals.append(np.array(int(t, 16), dtype=_uint(dt)).view(dt))
        elif t in ("true", "false"):
            vals.append(np.array(t == "true"))
        else:
            vals.append(np.array(float(t) if dt.kind not in "iu" else int(t)).astype(dt))
    if len(vals) == 1 and n != 1:
        vals = vals * n
    return np.array(vals, dtype=dt).reshape(shape)


def _run_interpreter(module: Any, sig: Signature, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from mxlower.bindings.jaxlib import MLIRError, eval_module, ir

    with module.context:
        attrs = [ir.Attribute.parse(format_literal(a, elt, bits=DTYPES[elt].kind not in "b"))
                 for a, (_, elt) in zip(inputs, sig.args)]
        try:
            outs = eval_module(ir.Module.parse(str(module)), attrs)
        except (MLIRError, RuntimeError, ValueError) as e:
            raise RunError(f"the StableHLO interpreter failed: {str(e).strip()}") from None
    return [_attr_to_array(o, shape, elt) for o, (shape, elt) in zip(outs, sig.results)]


def prepare(module: Any, engine: DiagnosticEngine, *, name: str = "<module>",
            pipeline: str | None = None, function: str = "main") -> tuple[Any, Signature] | None:
    """Parse (``module`` as text; an ``ir`` module or operation is taken as it is), verify,
    run ``pipeline`` and select ``function``: the one path of the command line and of
    :func:`run_module`.

    Returns None when ``engine`` holds the reasons (parse, verify or pass diagnostics); raises
    ``PipelineError`` for a malformed pipeline and :class:`RunError` for a pipeline that leaves
    StableHLO, an unknown function or ops that no backend runs."""
    from mxlower.bindings import jaxlib as J
    from mxlower.passes.manager import PassPipeline

    text = isinstance(module, str)
    op = None if text else getattr(module, "operation", module)
    ctx = J.make_context(allow_unregistered=True) if text else op.context
    passes = PassPipeline.parse(pipeline, ctx) if pipeline else None  # its errors come first
    if text:
        op = parse_module(module, name, ctx, engine, J.ir)
        if op is None or not check_dialects(op, ctx, engine, False):
            return None
    with ctx, engine.capture(ctx):
        try:
            if not op.verify():
                return None
        except J.MLIRError as e:  # verify() raises with these bindings
            engine.add_mlir_error(e)
            return None
    if passes is not None:
        if passes.ends_upstream:
            raise RunError("the pipeline hands the module to upstream MLIR; mxlower-run takes "
                           "StableHLO (for the LLVM path use --backend=llvm, which lowers it)")
        if passes.run(op, engine) is None:
            return None
    sig = select_function(op, function)
    left = _leftover_ops(op)
    if left:
        raise RunError(f"the module still contains {', '.join(left)} ops, which no backend "
                       "runs; lower them first, e.g. with the pipeline "
                       "'builtin.module(mxlower-mx-to-stablehlo)'")
    return op, sig


def run_module(module: Any, inputs: Sequence[np.ndarray] | None = None, *,
               pipeline: str | None = None, function: str = "main", seed: int = 0,
               backend: str = "xla") -> list[np.ndarray]:
    """Library entry: run ``function`` of ``module`` (text or an ``ir`` module/operation in a
    context that allows unregistered ops) after ``pipeline``; NumPy in, NumPy out.  Random
    inputs (seeded by ``seed``) when ``inputs`` is None.

    Raises :class:`RunError` for bad input, a failing pipeline (the message holds the
    diagnostics, with their source lines when ``module`` is text) and backend failures."""
    from mxlower.passes.pipeline import PipelineError

    engine = DiagnosticEngine()
    try:
        prepared = prepare(module, engine, pipeline=pipeline, function=function)
    except PipelineError as e:
        raise RunError(e.format()) from None
    if prepared is None:
        sources = {"<module>": module.splitlines()} if isinstance(module, str) else {}
        raise RunError("\n".join(d.format(sources) for d in engine.diagnostics)
                       or "the module does not verify")
    op, sig = prepared
    arrays = (random_inputs(sig, seed) if inputs is None
              else check_inputs(sig, [(f"input #{i}", np.asarray(a)) for i, a in
                                      enumerate(inputs)]))
    return _execute(op, make_static(op, sig, arrays), arrays, backend)


BACKENDS = ("xla", "interpreter", "llvm")


def _execute(op: Any, sig: Signature, arrays: list[np.ndarray], backend: str,
             filename: str = "<module>") -> list[np.ndarray]:
    if backend == "interpreter":
        return _run_interpreter(op, sig, arrays)
    if backend == "llvm":
        return _run_llvm(op, sig, arrays, filename)
    if backend != "xla":
        raise RunError(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
    return _run_xla(str(op), sig, arrays)


def _run_llvm(op: Any, sig: Signature, arrays: list[np.ndarray],
              filename: str) -> list[np.ndarray]:
    from mxlower import llvm_exec

    try:
        with llvm_exec.compile(op.get_asm(enable_debug_info=True), filename=filename) as h:
            return [np.asarray(r) for r in h.run(sig.name, *arrays)]
    except llvm_exec.LLVMExecError as e:
        raise RunError(f"the LLVM backend failed: {e}") from None


# ----------------------------------------------------------------------------- comparison


def compare(got: np.ndarray, ref: np.ndarray, elt: str, rtol: float | None,
            atol: float | None) -> tuple[bool, str]:
    """(ok, one-line report).  Exact: equal bit patterns (any NaN equals any NaN for f16, bf16,
    f32, f64).  With a tolerance (floats and integers; booleans stay exact): NaN where the
    reference has NaN, equal infinities, and ``|got - ref| <= atol + rtol * |ref|`` elsewhere."""
    if got.shape != ref.shape:
        return False, f"shape {got.shape} differs from the reference's {ref.shape}"
    if got.dtype != ref.dtype:
        return False, f"dtype {got.dtype} differs from the reference's {ref.dtype}"
    if got.dtype.kind == "b" or (got.dtype.kind in "iu" and rtol is None and atol is None):
        bad = got != ref
        g = r = None
    elif got.dtype.kind in "iu":
        g, r = got.astype(np.float64), ref.astype(np.float64)
        bad = np.abs(g - r) > (atol or 0.0) + (rtol or 0.0) * np.abs(r)
    else:
        g, r = got.astype(np.float64), ref.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(r)
        if rtol is None and atol is None:
            if elt in ("f16", "bf16", "f32", "f64"):
                bad = (_codes(got, elt) != _codes(ref, elt)) & ~both_nan
            else:
                bad = _codes(got, elt) != _codes(ref, elt)
        else:
            with np.errstate(invalid="ignore"):
                tol = (atol or 0.0) + (rtol or 0.0) * np.abs(r)
                close = (np.abs(g - r) <= tol) | (g == r) | both_nan
            bad = ~close
    n = int(bad.sum())
    stats = ""
    if g is not None:
        fin = np.isfinite(g) & np.isfinite(r)
        if fin.any():
            err = np.abs(g - r)[fin]
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = err / np.abs(r[fin])
            rel = rel[np.isfinite(rel)]
            stats = (f"max abs err {float(err.max()):.3g}, max rel err "
                     f"{float(rel.max()) if rel.size else 0.0:.3g}")
    mode = ("bit-exact" if rtol is None and atol is None
            else f"rtol {rtol or 0:g}, atol {atol or 0:g}")
    if not n:
        return True, f"OK ({mode}{', ' + stats if stats else ''})"
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    gs = _element_strings(got[idx][None], elt, False)[0]
    rs = _element_strings(ref[idx][None], elt, False)[0]
    return False, (f"MISMATCH ({mode}): {n} of {got.size} elements differ; first at "
                   f"{list(idx)}: got {gs}, expected {rs}{'; ' + stats if stats else ''}")


# ----------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog=PROG, description="Compile a StableHLO module on XLA:CPU (after an "
                   "optional mxlower pipeline) and run one of its functions.")
    p.add_argument("input", help="the module (.mlir; '-' for stdin)")
    p.add_argument("-p", "--pass-pipeline", dest="pipeline", metavar="PIPELINE",
                   help="run this pipeline first, e.g. 'builtin.module(mxlower-mx-to-stablehlo)'")
    p.add_argument("-f", "--function", default="main", help="the function to run (default: main)")
    p.add_argument("-i", "--input", dest="inputs", action="append", default=[], metavar="FILE",
                   help=".npy (one argument) or .npz (several) input file; repeat in order")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random inputs used when no -i is given (default 0)")
    p.add_argument("-o", "--output", metavar="OUT.npz",
                   help="save the results as result0, result1, ... in OUT.npz")
    p.add_argument("--compare", metavar="REF.npz", help="compare the results with REF.npz")
    p.add_argument("--rtol", type=float, help="relative tolerance of --compare (default: exact)")
    p.add_argument("--atol", type=float, help="absolute tolerance of --compare (default: exact)")
    p.add_argument("--no-print", action="store_true", help="do not print the results")
    p.add_argument("--print-bits", action="store_true",
                   help="print raw bit patterns (hex) instead of values")
    p.add_argument("--print-ir", action="store_true",
                   help="print the module that is run (after the pipeline) to stderr")
    p.add_argument("--backend", choices=BACKENDS, default="xla",
                   help="XLA:CPU (default), StableHLO's reference interpreter (its own "
                   "f32 -> f8E8M0FNU convert is not MX-exact: expand it), or the LLVM "
                   "lowering run on upstream MLIR's ExecutionEngine")
    return p


def main(argv: list[str] | None = None) -> int:
    return cli_main(PROG, _main, argv)


def _main(argv: list[str]) -> int:
    from mxlower.passes.pipeline import PipelineError

    args = build_parser().parse_args(argv)
    if args.output and not args.output.endswith(".npz"):
        raise CliError(f"the output file must end in .npz, got '{args.output}'")
    name, text = read_source(args.input)
    engine = DiagnosticEngine()
    try:
        prepared = prepare(text, engine, name=name, pipeline=args.pipeline,
                           function=args.function)
    except PipelineError as e:
        sys.stderr.write(e.format() + "\n")
        return 1
    finally:
        if engine.diagnostics:
            print_diagnostics(engine.diagnostics, {name: text.splitlines()})
    if prepared is None:
        if not engine.has_errors:
            sys.stderr.write(f"{PROG}: error: the input does not verify\n")
        return 1
    module, sig = prepared
    if args.print_ir:
        sys.stderr.write(str(module) + "\n")
    if args.inputs:
        inputs = check_inputs(sig, load_arrays(args.inputs))
    else:
        inputs = random_inputs(sig, args.seed)
    sig = make_static(module, sig, inputs)
    outs = _execute(module, sig, inputs, args.backend, name)
    refs = load_arrays([args.compare]) if args.compare else None
    if refs is not None and len(refs) != len(outs):
        raise RunError(f"@{sig.name} returns {len(outs)} results but {args.compare} holds "
                       f"{len(refs)} arrays")
    failed = False
    lines = []
    for i, (out, (_, elt)) in enumerate(zip(outs, sig.results)):
        if not args.no_print:
            lines.append(f"%{i} = {format_literal(out, elt, bits=args.print_bits)}")
        if refs is not None:
            ok, report = compare(out, _typed(refs[i][1], elt), elt, args.rtol, args.atol)
            failed |= not ok
            lines.append(f"// compare result #{i} with {refs[i][0]}: {report}")
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
    if args.output:
        buf = _npz_bytes({f"result{i}": _storable(o) for i, o in enumerate(outs)})
        write_atomic(args.output, buf)
    return 2 if failed else 0


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    import io

    b = io.BytesIO()
    np.savez(b, **arrays)
    return b.getvalue()


if __name__ == "__main__":
    raise SystemExit(main())
