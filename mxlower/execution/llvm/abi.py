"""Calling JIT-compiled functions in this process: upstream MLIR's ExecutionEngine and the
C ABI of its ``_mlir_ciface_`` wrappers (memref descriptors passed by pointer, results through
a leading out-pointer), with NumPy arrays and scalars on the Python side."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from mxlower import types
from mxlower.bindings import upstream
from mxlower.execution.llvm.errors import CallError, CompileError
from mxlower.ir.signature import Signature, TensorSpec

__all__ = ["Engine", "dtype_of"]


def dtype_of(element: str) -> np.dtype:
    """The NumPy dtype of an MLIR element type spelling (``f32``, ``bf16``, ``f4E2M1FN``...)."""
    t = types.SCALARS.get(element)
    if t is None:
        raise CallError(f"element type '{element}' has no NumPy equivalent here")
    return t.dtype

_DESCRIPTORS: dict[int, type] = {}


def _descriptor(rank: int) -> type:
    if rank not in _DESCRIPTORS:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                  ("offset", ctypes.c_int64)]
        if rank:
            fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        _DESCRIPTORS[rank] = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
    return _DESCRIPTORS[rank]


_GLOBAL_SENTINEL = 0xDEADBEEF  # memref.get_global's "allocated" pointer
_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]


def _scalar_ctype(spec: TensorSpec) -> Any:
    dt = dtype_of(spec.element)
    if dt == np.float32:
        return ctypes.c_float
    if dt == np.float64:
        return ctypes.c_double
    if dt == np.bool_:
        return ctypes.c_bool
    # integers and 16/8-bit floats: their bit pattern
    return np.ctypeslib.as_ctypes_type(types.code_dtype(dt))


def _result_ctype(spec: TensorSpec) -> Any:
    return _scalar_ctype(spec) if spec.is_scalar else _descriptor(len(spec.shape))


class Engine:
    """An ExecutionEngine with its signatures; calls happen in this process."""

    def __init__(self, llvm_text: str, sigs: dict[str, Signature], opt_level: int):
        ir = upstream.module("ir")
        ee_mod = upstream.module("execution_engine")
        self.ctx = upstream.context()
        libs = upstream.jit_libraries()
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
                       else a.view(types.code_dtype(a.dtype)).item())
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
    want = dtype_of(spec.element)
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
        return [np.empty(s.shape, dtype=dtype_of(s.element)) for s in specs]
    if len(out) != len(specs):
        raise CallError(f"@{func} has {len(specs)} out-parameter(s), got {len(out)}")
    n_in = len(sig.args) - sig.n_out_params
    for k, (s, a) in enumerate(zip(specs, out)):
        if not isinstance(a, np.ndarray) or not a.flags.c_contiguous or not a.flags.writeable:
            raise CallError(f"out[{k}] of @{func} must be a writeable C-contiguous array")
        _check_arg(func, n_in + k, s, a)
    return list(out)


def _read_result(spec: TensorSpec, r: Any) -> Any:
    dt = dtype_of(spec.element)
    if spec.is_scalar:
        if dt.kind == "f" and dt.itemsize >= 4 or dt.kind == "b":
            return dt.type(r)
        return np.array(r, dtype=types.code_dtype(dt)).view(dt)[()]
    rank = len(spec.shape)
    shape = tuple(r.sizes[k] for k in range(rank))
    strides = tuple(r.strides[k] for k in range(rank))
    storage = types.code_dtype(dt)
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
