"""Compile MLIR to native code with upstream MLIR's ExecutionEngine and run it on NumPy arrays.

Usage::

    from mxlower import llvm_exec

    h = llvm_exec.compile(text)              # StableHLO, or upstream func/memref/linalg/arith IR
    (y,) = h.run("main", x)                  # or llvm_exec.run(h, "main", x)
    h.close()                                # also on garbage collection / `with` exit

``compile`` lowers the module with the ``mxlower-stablehlo-to-llvm`` pipeline (or the pass
pipeline given as ``pipeline=``), JIT-compiles it at ``opt_level`` (3: LLVM's O3 pipeline,
loop vectorizer included, for the host CPU) and returns a :class:`Compiled` handle.  Inputs
that jaxlib's MLIR cannot parse (upstream-only dialects) skip the StableHLO legalization.

Arguments and results
---------------------
Every public ``func.func`` with a body can be called.  Its signature is read from the input
module: a tensor or memref argument takes a NumPy array of that element type and shape
(``ml_dtypes`` arrays for bf16 and the narrow float types, stored as ml_dtypes stores them,
one byte per element; made C-contiguous), a scalar argument a Python or NumPy scalar.
Results come back as new arrays (and NumPy scalars).  Buffers a function returns are freed
after copying, unless they lie inside an argument or are a constant global.  With
``out_params=True`` memref results become trailing arguments the caller provides: ``run(...,
out=[arrays])`` writes into them (statically shaped ones are allocated when ``out`` is not
given) -- no copy, no allocation per call: the form to benchmark.

Isolation
---------
The xtc wheels' MLIR/LLVM are built with assertions, and generated code can crash.  With
``isolate=True`` (the default) lowering, JIT compilation and every call run in a worker
process (``python -m mxlower.llvm_exec --worker``; one shared worker, restarted on demand,
holds all isolated handles); a worker that dies raises :class:`WorkerCrashed` naming the
signal and the tail of its stderr (e.g. the LLVM assertion), and the calling process lives
on.  Arrays cross the process boundary by pickling.  ``isolate=False`` does everything in the
calling process (for trusted inputs and timing loops).

Errors: :class:`CompileError` (bad IR, failing pass; the message lists the diagnostics as
``file:line:col: error: ...``), :class:`CallError` (unknown function, wrong argument types or
shapes), :class:`WorkerCrashed`.  All derive from :class:`LLVMExecError`.

Command line (one-shot, isolated)::

    python -m mxlower.llvm_exec in.mlir --func main --input x.npy --output out.npz
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from mxlower.formats import FLOAT_TYPES

__all__ = [
    "CallError",
    "CompileError",
    "Compiled",
    "LLVMExecError",
    "Signature",
    "TensorSpec",
    "Worker",
    "WorkerCrashed",
    "compile",
    "run",
]


class LLVMExecError(RuntimeError):
    """Base of the errors this module raises."""


class CompileError(LLVMExecError):
    """The module did not parse, a pass failed, or the JIT rejected the LLVM IR."""


class CallError(LLVMExecError):
    """A call that does not match the function (name, argument count, dtype, shape)."""


class WorkerCrashed(LLVMExecError):
    """The worker process died (a signal: an LLVM assertion, a crash in generated code)."""


# ============================================================================== signatures

_SCALAR_DTYPES: dict[str, np.dtype] = {
    "f64": np.dtype(np.float64), "f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16), "i1": np.dtype(np.bool_), "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16), "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
    "index": np.dtype(np.int64), "ui8": np.dtype(np.uint8), "ui16": np.dtype(np.uint16),
    "ui32": np.dtype(np.uint32), "ui64": np.dtype(np.uint64),
    **{name: t.dtype for name, t in FLOAT_TYPES.items()},
}


def dtype_of(element: str) -> np.dtype:
    """The NumPy dtype of an MLIR element type spelling (``f32``, ``bf16``, ``f4E2M1FN``...)."""
    try:
        return _SCALAR_DTYPES[element]
    except KeyError:
        raise CallError(f"element type '{element}' has no NumPy equivalent here") from None


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One argument or result: ``shape`` None for a scalar; None dims are dynamic."""

    element: str
    shape: tuple[int | None, ...] | None

    @property
    def dtype(self) -> np.dtype:
        return dtype_of(self.element)

    @property
    def is_scalar(self) -> bool:
        return self.shape is None

    def __str__(self) -> str:
        if self.shape is None:
            return self.element
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"memref<{dims + 'x' if dims else ''}{self.element}>"


@dataclasses.dataclass(frozen=True)
class Signature:
    """A callable function: its arguments and results after lowering (out-params appended)."""

    name: str
    args: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]
    n_out_params: int = 0  #: trailing args that are out-parameters

    def __str__(self) -> str:
        return (f"@{self.name}({', '.join(map(str, self.args))}) -> "
                f"({', '.join(map(str, self.results))})")


def _spec(t: Any) -> TensorSpec:
    """A tensor or memref type is an array argument; anything else a scalar (a type without
    a NumPy equivalent, e.g. a vector, is reported when the function is called)."""
    text = str(t)
    if text.startswith(("tensor<", "memref<")):
        shape = getattr(t, "shape", None) if getattr(t, "has_rank", True) else None
        if shape is None:
            return TensorSpec(text, None)  # unranked: not callable
        return TensorSpec(str(t.element_type), tuple(None if d < 0 else int(d) for d in shape))
    return TensorSpec(text, None)


def _signatures(module_op: Any, out_params: bool) -> dict[str, Signature]:
    """Public functions with a body, read from ``module_op`` (either binding stack)."""
    sigs: dict[str, Signature] = {}
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "func.func" or not op.regions[0].blocks:
            continue
        attrs = op.attributes
        if "sym_visibility" in attrs and str(attrs["sym_visibility"]).strip('"') != "public":
            continue
        name = str(attrs["sym_name"]).strip('"')
        ftype = attrs["function_type"].value
        args = tuple(_spec(t) for t in ftype.inputs)
        results = tuple(_spec(t) for t in ftype.results)
        n_out = 0
        if out_params:
            moved = tuple(r for r in results if not r.is_scalar)
            args, results, n_out = args + moved, tuple(r for r in results if r.is_scalar), len(
                moved)
        sigs[name] = Signature(name, args, results, n_out)
    return sigs


# ============================================================================== lowering


def _default_pipeline(*, out_params: bool, vector_width: int, from_stablehlo: bool) -> str:
    opts = [f"out-params={'true' if out_params else 'false'}", f"vector-width={vector_width}"]
    if not from_stablehlo:
        opts.append("legalize-stablehlo=false")
    return f"builtin.module(mxlower-stablehlo-to-llvm{{{' '.join(opts)}}})"


def _format_diagnostics(diags: Sequence[Any], text: str) -> str:
    lines = text.splitlines(keepends=True)
    srcs: dict[str, list[str]] = {}
    for d in diags:
        if d.file is not None:
            srcs.setdefault(d.file, lines)
    return "\n".join(d.format(srcs) for d in diags) or "unknown error"


def lower(text: str, *, pipeline: str | None = None, out_params: bool = False,
          vector_width: int = 0, filename: str = "<input>") -> tuple[str, dict[str, Signature]]:
    """Lower MLIR text to the LLVM dialect in this process: (LLVM-dialect text, signatures).

    Runs in-process: prefer :func:`compile` (isolated) for untrusted input.
    """
    from mxlower.bindings import jaxlib as J
    from mxlower.bindings import upstream
    from mxlower.diagnostics import DiagnosticEngine, PassFailure
    from mxlower.passes.manager import run_pipeline
    from mxlower.passes.pipeline import PipelineError

    from mxlower.tools.source import parse_module

    ctx = J.make_context()
    engine = DiagnosticEngine()
    module = parse_module(text, filename, ctx, DiagnosticEngine(), J.ir)
    from_stablehlo = module is not None
    if module is None:  # upstream-only dialects: parse there (its errors are the ones to show)
        module = parse_module(text, filename, upstream.context(), engine, upstream.module("ir"))
        if module is None:
            raise CompileError("cannot parse the module:\n" +
                               _format_diagnostics(engine.diagnostics, text))
    sigs = _signatures(module, out_params)
    pipe = pipeline or _default_pipeline(out_params=out_params, vector_width=vector_width,
                                         from_stablehlo=from_stablehlo)
    try:
        result = run_pipeline(module, pipe, ctx=ctx, engine=engine)
    except PipelineError as err:
        raise CompileError(err.format()) from None
    except PassFailure as err:
        diags = getattr(err, "diagnostics", None) or engine.diagnostics
        errors = [d for d in diags if d.severity == "error"] or list(diags)
        raise CompileError("lowering to LLVM failed:\n" +
                           _format_diagnostics(errors, text)) from None
    leftover = _non_llvm_ops(result)
    if leftover:
        raise CompileError("the pipeline did not lower everything to the LLVM dialect; left: "
                           + ", ".join(leftover))
    return result.get_asm(enable_debug_info=False), sigs


def _non_llvm_ops(module_op: Any) -> list[str]:
    """``'op.name' (file:line:col)`` for every op outside the LLVM dialect (first of each)."""
    from mxlower.diagnostics import location_of

    seen: dict[str, str] = {}

    def visit(o: Any) -> None:
        for region in o.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    name = child.name
                    if not name.startswith("llvm.") and name not in seen:
                        f, line, col = location_of(child)
                        seen[name] = f"'{name}'" + (f" ({f}:{line}:{col})" if f else "")
                    visit(child)

    visit(module_op)
    return list(seen.values())


# ============================================================================== in-process engine

_DESCRIPTORS: dict[int, type] = {}


def _descriptor(rank: int) -> type:
    if rank not in _DESCRIPTORS:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                  ("offset", ctypes.c_int64)]
        if rank:
            fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        _DESCRIPTORS[rank] = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
    return _DESCRIPTORS[rank]


_CTYPES = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}
_GLOBAL_SENTINEL = 0xDEADBEEF  # memref.get_global's "allocated" pointer
_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]


def _scalar_ctype(spec: TensorSpec) -> Any:
    dt = spec.dtype
    if dt == np.float32:
        return ctypes.c_float
    if dt == np.float64:
        return ctypes.c_double
    if dt == np.bool_:
        return ctypes.c_bool
    return _CTYPES[dt.itemsize]  # integers and 16/8-bit floats: their bit pattern


def _result_ctype(spec: TensorSpec) -> Any:
    return _scalar_ctype(spec) if spec.is_scalar else _descriptor(len(spec.shape))


class _Engine:
    """An ExecutionEngine with its signatures; calls happen in this process."""

    def __init__(self, llvm_text: str, sigs: dict[str, Signature], opt_level: int):
        from mxlower.bindings import upstream

        ir = upstream.module("ir")
        ee_mod = upstream.module("execution_engine")
        self.ctx = upstream.context()
        libs = [p for p in (upstream.runtime_library("libmlir_c_runner_utils.so"),) if p]
        msgs: list[str] = []

        def handler(d: Any) -> bool:
            msgs.append(str(d.message))
            return True

        h = self.ctx.attach_diagnostic_handler(handler)
        try:
            with self.ctx:
                self.module = ir.Module.parse(llvm_text)
                self.ee = ee_mod.ExecutionEngine(self.module, opt_level=opt_level,
                                                 shared_libs=libs)
        except Exception as err:  # noqa: BLE001 - MLIRError or RuntimeError from the JIT
            detail = "; ".join(msgs)
            raise CompileError(f"JIT compilation failed: {err}" +
                               (f" ({detail})" if detail else "")) from None
        finally:
            h.detach()
        self.sigs = sigs

    def call(self, func: str, args: Sequence[Any], out: Sequence[np.ndarray] | None) -> list:
        sig = self.sigs.get(func)
        if sig is None:
            known = ", ".join(f"@{n}" for n in self.sigs) or "none"
            raise CallError(f"no public function @{func} (callable: {known})")
        n_in = len(sig.args) - sig.n_out_params
        if len(args) != n_in:
            raise CallError(f"@{func} takes {n_in} argument(s), got {len(args)}: {sig}")
        arrays = [_check_arg(func, i, spec, a) for i, (spec, a) in enumerate(zip(sig.args, args))]
        outs = _out_arrays(func, sig, out)
        keep: list[Any] = []
        ptrs = []
        spans = []
        for spec, a in zip(sig.args, [*arrays, *outs]):
            if spec.is_scalar:
                ct = _scalar_ctype(spec)
                c = ct(a.item() if ct in (ctypes.c_float, ctypes.c_double, ctypes.c_bool)
                       else a.view(f"uint{a.dtype.itemsize * 8}").item())
                keep.append(c)
                ptrs.append(ctypes.pointer(c))
            else:
                d = _descriptor(a.ndim)()
                d.allocated = d.aligned = a.ctypes.data
                d.offset = 0
                for k in range(a.ndim):
                    d.sizes[k] = a.shape[k]
                    d.strides[k] = a.strides[k] // a.itemsize if a.itemsize else 0
                keep.append(d)
                ptrs.append(ctypes.pointer(ctypes.pointer(d)))
                spans.append((a.ctypes.data, a.ctypes.data + a.nbytes))
        results = sig.results
        res_storage = None
        if len(results) == 1 and results[0].is_scalar:
            res_storage = _scalar_ctype(results[0])()
            ptrs.append(ctypes.pointer(res_storage))
        elif results:
            if len(results) == 1:
                res_storage = _result_ctype(results[0])()
            else:
                st = type("Results", (ctypes.Structure,), {"_fields_": [
                    (f"r{i}", _result_ctype(r)) for i, r in enumerate(results)]})
                res_storage = st()
            ptrs.insert(0, ctypes.pointer(ctypes.pointer(res_storage)))
        self.ee.invoke(func, *ptrs)
        values: list[Any] = []
        if results:
            if len(results) == 1:
                raw = [res_storage.value if results[0].is_scalar else res_storage]
            else:
                raw = [getattr(res_storage, f"r{i}") for i in range(len(results))]
            # copy every result before freeing any buffer: results may share one (two
            # returned values that CSE made identical), and a freed block's first bytes are
            # the allocator's (reading it afterwards gave garbage there)
            values = [_read_result(spec, r) for spec, r in zip(results, raw)]
            freed: set[int] = set()
            for spec, r in zip(results, raw):
                _free_result(spec, r, spans, freed)
        return [*outs, *values] if sig.n_out_params else values


def _check_arg(func: str, i: int, spec: TensorSpec, a: Any) -> np.ndarray:
    want = spec.dtype
    arr = np.asarray(a)
    if spec.is_scalar:
        if arr.ndim != 0:
            raise CallError(f"argument {i} of @{func} is a scalar {spec}, got an array of shape "
                            f"{arr.shape}")
        if arr.dtype != want:
            try:
                arr = np.asarray(a, dtype=want)
            except (TypeError, ValueError, OverflowError):
                raise CallError(f"argument {i} of @{func} expects {spec} ({want}), got "
                                f"{a!r}") from None
        return arr
    if arr.dtype != want:
        raise CallError(f"argument {i} of @{func} expects {spec} ({want}), got {arr.dtype}")
    if arr.ndim != len(spec.shape) or any(d is not None and d != s
                                          for d, s in zip(spec.shape, arr.shape)):
        raise CallError(f"argument {i} of @{func} expects {spec}, got shape {arr.shape}")
    return np.ascontiguousarray(arr)


def _out_arrays(func: str, sig: Signature, out: Sequence[np.ndarray] | None) -> list[np.ndarray]:
    specs = sig.args[len(sig.args) - sig.n_out_params:]
    if not specs:
        if out:
            raise CallError(f"@{func} has no out-parameters (compile with out_params=True)")
        return []
    if out is None:
        for k, s in enumerate(specs):
            if any(d is None for d in s.shape):
                raise CallError(f"result {k} of @{func} ({s}) has a dynamic shape: pass "
                                "out=[arrays]")
        return [np.empty(s.shape, dtype=s.dtype) for s in specs]
    if len(out) != len(specs):
        raise CallError(f"@{func} has {len(specs)} out-parameter(s), got {len(out)}")
    n_in = len(sig.args) - sig.n_out_params
    for k, (s, a) in enumerate(zip(specs, out)):
        if not isinstance(a, np.ndarray) or not a.flags.c_contiguous or not a.flags.writeable:
            raise CallError(f"out[{k}] of @{func} must be a writeable C-contiguous array")
        _check_arg(func, n_in + k, s, a)
    return list(out)


def _read_result(spec: TensorSpec, r: Any) -> Any:
    dt = spec.dtype
    if spec.is_scalar:
        if dt.kind == "f" and dt.itemsize >= 4 or dt.kind == "b":
            return dt.type(r)
        return np.array(r, dtype=f"uint{dt.itemsize * 8}").view(dt)[()]
    rank = len(spec.shape)
    shape = tuple(r.sizes[k] for k in range(rank))
    strides = tuple(r.strides[k] for k in range(rank))
    storage = np.dtype(f"uint{dt.itemsize * 8}")
    if 0 in shape:
        arr = np.empty(shape, dtype=storage)
    else:
        base = (r.aligned or 0) + r.offset * dt.itemsize
        lo = sum(min(0, (s - 1) * st) for s, st in zip(shape, strides))
        hi = sum(max(0, (s - 1) * st) for s, st in zip(shape, strides))
        n = hi - lo + 1
        buf = (ctypes.c_uint8 * (n * dt.itemsize)).from_address(base + lo * dt.itemsize)
        flat = np.frombuffer(buf, dtype=storage)
        arr = np.lib.stride_tricks.as_strided(
            flat[-lo:], shape=shape, strides=tuple(st * dt.itemsize for st in strides)).copy()
    return arr.view(dt)


def _free_result(spec: TensorSpec, r: Any, spans: list[tuple[int, int]], freed: set[int]) -> None:
    """Free a returned buffer the caller owns: not a global, not inside an argument, once."""
    if spec.is_scalar:
        return
    alloc = r.allocated or 0
    if alloc and alloc != _GLOBAL_SENTINEL and alloc not in freed and not any(
            lo_ <= alloc < hi_ for lo_, hi_ in spans):
        freed.add(alloc)
        _libc.free(alloc)


# ============================================================================== the worker


def _encode(a: Any) -> tuple:
    arr = np.asarray(a)
    return (arr.dtype.name if arr.dtype.names is None else str(arr.dtype), arr.shape,
            np.ascontiguousarray(arr).tobytes())


def _decode(t: tuple) -> np.ndarray:
    name, shape, data = t
    dt = np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)
    return np.frombuffer(data, dtype=dt).reshape(shape).copy()


class Worker:
    """A child process holding ExecutionEngines (``python -m mxlower.llvm_exec --worker``).

    Requests are pickled over its stdin/stdout; its stderr goes to a temporary file whose
    tail is reported when it dies.  Thread-safe (one request at a time).
    """

    def __init__(self) -> None:
        self._log = tempfile.TemporaryFile()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "mxlower.llvm_exec", "--worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, env=env)
        self._lock = threading.Lock()
        self.dead: str | None = None

    @property
    def alive(self) -> bool:
        return self.dead is None and self._proc.poll() is None

    def request(self, msg: tuple, what: str) -> Any:
        with self._lock:
            if self.dead is not None:
                raise WorkerCrashed(f"the LLVM worker process died earlier ({self.dead}); "
                                    "compile again")
            try:
                pickle.dump(msg, self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self._proc.stdin.flush()
                status, payload = pickle.load(self._proc.stdout)
            except (EOFError, OSError, pickle.UnpicklingError):
                raise self._crashed(what) from None
        if status == "ok":
            return payload
        cls = {"compile": CompileError, "call": CallError}.get(status, LLVMExecError)
        raise cls(payload)

    def _crashed(self, what: str) -> WorkerCrashed:
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        if code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        self.dead = how
        self._log.seek(0)
        tail = self._log.read()[-4000:].decode(errors="replace").strip()
        hint = (" (an LLVM/MLIR assertion)" if "Assertion" in tail else
                " (a crash in LLVM or in the generated code)" if code < 0 else "")
        msg = f"the LLVM worker process {how}{hint} while {what}"
        return WorkerCrashed(msg + (f"; its stderr ends with:\n{tail}" if tail else ""))

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                pickle.dump(("exit",), self._proc.stdin)
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._log.close()


_default_worker: Worker | None = None
_default_lock = threading.Lock()


def default_worker() -> Worker:
    """The shared worker of isolated handles (started, or restarted after a crash, on demand)."""
    global _default_worker
    with _default_lock:
        if _default_worker is None or not _default_worker.alive:
            _default_worker = Worker()
        return _default_worker


def _worker_main() -> None:
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints must not corrupt the protocol
    proto_in = sys.stdin.buffer
    engines: dict[int, _Engine] = {}
    ids = itertools.count(1)
    while True:
        try:
            msg = pickle.load(proto_in)
        except EOFError:
            return
        kind = msg[0]
        if kind == "exit":
            return
        try:
            if kind == "compile":
                _, text, opts = msg
                llvm_text, sigs = lower(text, pipeline=opts["pipeline"],
                                        out_params=opts["out_params"],
                                        vector_width=opts["vector_width"],
                                        filename=opts["filename"])
                eid = next(ids)
                engines[eid] = _Engine(llvm_text, sigs, opts["opt_level"])
                reply = ("ok", (eid, sigs, llvm_text if opts["keep_llvm"] else None))
            elif kind == "call":
                _, eid, func, args, out = msg
                res = engines[eid].call(func, [_decode(a) for a in args],
                                        None if out is None else [_decode(a) for a in out])
                reply = ("ok", [_encode(r) for r in res])
            elif kind == "free":
                engines.pop(msg[1], None)
                reply = ("ok", None)
            else:
                reply = ("error", f"unknown request '{kind}'")
        except CompileError as err:
            reply = ("compile", str(err))
        except CallError as err:
            reply = ("call", str(err))
        except Exception as err:  # noqa: BLE001 - report, keep serving
            reply = ("error", f"{type(err).__name__}: {err}")
        pickle.dump(reply, proto_out, protocol=pickle.HIGHEST_PROTOCOL)
        proto_out.flush()


# ============================================================================== public API


class Compiled:
    """A compiled module: call its public functions with :meth:`run`."""

    def __init__(self, signatures: dict[str, Signature], llvm_text: str | None, *,
                 engine: _Engine | None = None, worker: Worker | None = None,
                 engine_id: int = 0):
        self.signatures = signatures
        #: the LLVM-dialect module (when compiled with ``keep_llvm=True`` or in-process)
        self.llvm_mlir = llvm_text
        self._engine = engine
        self._worker = worker
        self._id = engine_id
        if worker is not None:
            self._finalizer = weakref.finalize(self, _release, worker, engine_id)

    @property
    def isolated(self) -> bool:
        return self._worker is not None

    def run(self, func: str, *args: Any, out: Sequence[np.ndarray] | None = None) -> list:
        """Call ``@func`` on NumPy arrays/scalars; its results as a list (out-params first)."""
        if self._worker is None:
            if self._engine is None:
                raise CallError("this handle is closed")
            return self._engine.call(func, args, out)
        if self._id == 0:
            raise CallError("this handle is closed")
        enc = [_encode(a) for a in args]
        res = [_decode(r) for r in self._worker.request(
            ("call", self._id, func, enc, None if out is None else [_encode(a) for a in out]),
            f"running @{func}")]
        if out is not None:
            for dst, src in zip(out, res):
                np.copyto(dst, src)
            res[:len(out)] = list(out)
        return res

    __call__ = run

    def close(self) -> None:
        if self._worker is not None and self._id:
            self._finalizer()
            self._id = 0
        self._engine = None

    def __enter__(self) -> Compiled:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _release(worker: Worker, engine_id: int) -> None:
    if worker.alive:
        try:
            worker.request(("free", engine_id), "releasing a module")
        except LLVMExecError:
            pass


def compile(src: Any, *, opt_level: int = 3, out_params: bool = False,  # noqa: A001
            vector_width: int = 0, pipeline: str | None = None, isolate: bool = True,
            worker: Worker | None = None, keep_llvm: bool = False,
            filename: str = "<input>") -> Compiled:
    """Lower and JIT-compile ``src`` (MLIR text, or a module of either binding stack).

    ``pipeline``: a full pass pipeline (``builtin.module(...)``) replacing the default
    ``mxlower-stablehlo-to-llvm{out-params=... vector-width=...}``; it must end in the LLVM
    dialect, with ``llvm.emit_c_interface`` on the functions to call.  ``isolate``: run in a
    worker process (``worker``, default: the shared one).  ``keep_llvm``: keep the
    LLVM-dialect text as ``.llvm_mlir`` (always kept in-process).
    """
    if not isinstance(src, str):
        op = getattr(src, "operation", src)
        src = op.get_asm(enable_debug_info=True)
    opts = {"pipeline": pipeline, "out_params": out_params, "vector_width": vector_width,
            "opt_level": opt_level, "keep_llvm": keep_llvm, "filename": filename}
    if not isolate:
        llvm_text, sigs = lower(src, pipeline=pipeline, out_params=out_params,
                                vector_width=vector_width, filename=filename)
        return Compiled(sigs, llvm_text, engine=_Engine(llvm_text, sigs, opt_level))
    w = worker or default_worker()
    eid, sigs, llvm_text = w.request(("compile", src, opts), "compiling the module")
    return Compiled(sigs, llvm_text, worker=w, engine_id=eid)


def run(handle: Compiled, func: str, *args: Any, out: Sequence[np.ndarray] | None = None
        ) -> list:
    """``handle.run(func, *args, out=out)``."""
    return handle.run(func, *args, out=out)


# ============================================================================== command line


def format_result(k: int, r: np.ndarray) -> str:
    """``result K: DTYPE[SHAPE] = [values]``, plus ``codes = [0x..]`` for narrow float types."""
    head = f"result {k}: {r.dtype}{list(r.shape)} = "
    with np.printoptions(threshold=64, linewidth=10**6):
        line = head + np.array2string(r.astype(np.float32) if r.dtype.itemsize < 2 and
                                      r.dtype.kind == "V" else r, separator=", ")
        if r.dtype.name in {t.numpy_name for t in FLOAT_TYPES.values()}:
            bits = FLOAT_TYPES[_mlir_name(r.dtype)].bits
            codes = r.view(np.uint8) & np.uint8((1 << bits) - 1)
            line += " codes = " + np.array2string(
                codes, separator=", ", formatter={"int": lambda v: f"0x{v:X}"})
    return line


def _mlir_name(dt: np.dtype) -> str:
    return next(n for n, t in FLOAT_TYPES.items() if t.numpy_name == dt.name)


_PROG = "python -m mxlower.llvm_exec"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--worker"]:
        _worker_main()
        return 0
    from mxlower.tools.source import cli_main

    return cli_main(_PROG, _cli, argv)


def _cli(argv: list[str]) -> int:
    """The command line: bad input (a missing file, an unreadable .npy, a module that does not
    lower) is one ``error:`` line and exit 1; the output .npz is written atomically."""
    import io

    from mxlower.tools.source import ArgParser, CliError, read_source, write_atomic

    p = ArgParser(prog=_PROG, description="Lower an MLIR module to LLVM, JIT it and call one "
                  "function on .npy inputs (in an isolated worker process).")
    p.add_argument("input", help="MLIR file (StableHLO or upstream dialects)")
    p.add_argument("--func", "-f", default="main", help="function to call (default: main)")
    p.add_argument("--input", "-i", dest="inputs", action="append", default=[],
                   metavar="NPY", help="an argument as a .npy file (repeat, in order)")
    p.add_argument("--output", "-o", metavar="NPZ",
                   help="write the results to this .npz (arr_0, arr_1, ...; bf16 and narrow "
                   "float arrays load as raw bytes: .view() them as the ml_dtypes type)")
    p.add_argument("--opt-level", type=int, default=3, choices=range(4))
    p.add_argument("--pipeline", metavar="PIPELINE",
                   help="pass pipeline to lower with instead of mxlower-stablehlo-to-llvm")
    p.add_argument("--out-params", action="store_true",
                   help="lower with out-params (statically shaped results only)")
    p.add_argument("--print-llvm", action="store_true",
                   help="print the LLVM-dialect module to stdout")
    a = p.parse_args(argv)
    name, text = read_source(a.input)
    args = []
    for x in a.inputs:
        try:
            args.append(np.load(x, allow_pickle=False))
        except (OSError, ValueError) as e:
            raise CliError(f"could not read '{x}' as a .npy file: {e}") from None
    try:
        h = compile(text, opt_level=a.opt_level, keep_llvm=a.print_llvm, filename=name,
                    pipeline=a.pipeline, out_params=a.out_params)
        if a.print_llvm:
            sys.stdout.write(h.llvm_mlir or "")
        if a.func:
            res = h.run(a.func, *args)
            if a.output:
                buf = io.BytesIO()
                np.savez(buf, *[np.asarray(r) for r in res])
                write_atomic(a.output, buf.getvalue())
            elif not a.print_llvm:
                for k, r in enumerate(res):
                    sys.stdout.write(format_result(k, np.asarray(r)) + "\n")
        h.close()
    except LLVMExecError as err:
        raise CliError(str(err)) from None
    return 0


if __name__ == "__main__":
    # run the imported module's main, so that pickled classes name mxlower.llvm_exec
    from mxlower import llvm_exec as _self

    sys.exit(_self.main())
