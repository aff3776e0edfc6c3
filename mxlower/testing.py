"""Build modules of ``mx`` ops as text, lower them and run them on XLA:CPU, and make test data.

Shared by the tests and the benchmarks::

    m = MxModule()
    x = m.arg(np.zeros((4, 64), np.float32))
    q, s = m.quantize(x, "mxfp8_e4m3", axis=1, block_size=32, scale_mode="floor")
    m.ret(q, s)
    outs = m.run()            # lowered with mxlower-mx-to-stablehlo, run on XLA:CPU

f6 values cannot cross XLA:CPU's boundary, so a module that has them in its signature is
lowered with ``mxlower-expand-narrow-floats{types=f6...}`` appended (f6 arguments and results
travel as ui8 codes; :meth:`MxModule.run` converts both ways), or, where that pass is not
registered, run on StableHLO's interpreter.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

import ml_dtypes
import numpy as np

from mxlower import passes, types
from mxlower import reference as R
from mxlower.bindings import jaxlib as J
from mxlower.execution.run import make_static, run_module, select_function
from mxlower.formats import FORMATS
from mxlower.ir.signature import tensor_type as _tensor_type
from mxlower.pipeline.manager import run_pipeline

__all__ = ["MxModule", "Value", "assert_dot_close", "bits", "refine_for_inputs",
           "run_on_host_devices", "same_bits", "special_blocks", "tensor_type"]

F6 = ("f6E3M2FN", "f6E2M3FN")


def bits(a) -> np.ndarray:
    """The bit patterns of an array (NumPy or JAX) as unsigned integers of its width."""
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def same_bits(a, b) -> bool:
    """Whether two arrays have the same shape, dtype and bits (NaN payloads included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(bits(a), bits(b))


def tensor_type(shape, elt: str) -> str:
    """``tensor<4x8xf32>`` for ``((4, 8), "f32")``."""
    return _tensor_type(tuple(shape), elt)


@dataclasses.dataclass(frozen=True)
class Value:
    name: str
    shape: tuple[int, ...]
    elt: str

    @property
    def type(self) -> str:
        return tensor_type(self.shape, self.elt)


def _elt_of(a: np.ndarray) -> str:
    try:
        return types.of_dtype(a.dtype).mlir
    except KeyError:
        raise ValueError(f"no MLIR element type for dtype {a.dtype}") from None


class MxModule:
    """A ``@main`` built from mx ops (and raw StableHLO lines), with its input arrays."""

    def __init__(self) -> None:
        self.args: list[Value] = []
        self.inputs: list[np.ndarray] = []
        self.lines: list[str] = []
        self.results: list[Value] = []
        self._n = 0

    def _fresh(self, shape, elt: str) -> Value:
        self._n += 1
        return Value(f"%v{self._n}", tuple(shape), elt)

    def arg(self, a: np.ndarray) -> Value:
        a = np.asarray(a)
        v = Value(f"%arg{len(self.args)}", tuple(a.shape), _elt_of(a))
        self.args.append(v)
        self.inputs.append(a)
        return v

    def ret(self, *values: Value) -> None:
        self.results.extend(values)

    def quantize(self, x: Value, fmt: str, *, axis: int = -1, block_size: int | None = None,
                 scale_mode: str | None = "floor", global_scale: Value | None = None):
        f = FORMATS[fmt]
        axis %= len(x.shape)
        k = block_size or f.block_size
        s_shape = list(x.shape)
        s_shape[axis] //= k
        q, s = self._fresh(x.shape, f.element), self._fresh(s_shape, f.scale)
        mode = "" if f.is_nvfp4 or scale_mode is None else f', scale_mode = "{scale_mode}"'
        ops = [x] + ([global_scale] if global_scale else [])
        self.lines.append(
            f'{q.name}, {s.name} = "mx.quantize"({", ".join(o.name for o in ops)}) '
            f'{{format = "{fmt}", block_size = {k} : i64, axis = {axis} : i64{mode}}} : '
            f'({", ".join(o.type for o in ops)}) -> ({q.type}, {s.type})')
        return q, s

    def dequantize(self, q: Value, s: Value, fmt: str, out: str = "f32", *, axis: int = -1,
                   block_size: int | None = None, global_scale: Value | None = None) -> Value:
        f = FORMATS[fmt]
        axis %= len(q.shape)
        k = block_size or f.block_size
        r = self._fresh(q.shape, out)
        ops = [q, s] + ([global_scale] if global_scale else [])
        self.lines.append(
            f'{r.name} = "mx.dequantize"({", ".join(o.name for o in ops)}) '
            f'{{format = "{fmt}", block_size = {k} : i64, axis = {axis} : i64}} : '
            f'({", ".join(o.type for o in ops)}) -> {r.type}')
        return r

    def scaled_dot(self, lhs: Value, lhs_scales: Value | None, rhs: Value,
                   rhs_scales: Value | None, *, lhs_format: str | None, rhs_format: str | None,
                   dims, out: str = "f32", compute: str = "f32",
                   block_sizes=(None, None), global_scale: Value | None = None) -> Value:
        (lc, rc), (lb, rb) = dims
        attrs = [f"dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = "
                 f"{list(lb)}, rhs_batching_dimensions = {list(rb)}, "
                 f"lhs_contracting_dimensions = {list(lc)}, "
                 f"rhs_contracting_dimensions = {list(rc)}>", f"compute_type = {compute}"]
        ops = [lhs]
        for side, fmt, sc, k, v in (("lhs", lhs_format, lhs_scales, block_sizes[0], lhs),
                                    ("rhs", rhs_format, rhs_scales, block_sizes[1], rhs)):
            if side == "rhs":
                ops.append(rhs)
            if fmt is not None:
                attrs += [f'{side}_format = "{fmt}"',
                          f"{side}_block_size = {k or FORMATS[fmt].block_size} : i64"]
                ops.append(sc)
        if global_scale is not None:
            ops.append(global_scale)
        lfree = [d for d in range(len(lhs.shape)) if d not in lc and d not in lb]
        rfree = [d for d in range(len(rhs.shape)) if d not in rc and d not in rb]
        shape = ([lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lfree]
                 + [rhs.shape[d] for d in rfree])
        r = self._fresh(shape, out)
        self.lines.append(
            f'{r.name} = "mx.scaled_dot"({", ".join(o.name for o in ops)}) '
            f'{{{", ".join(attrs)}}} : ({", ".join(o.type for o in ops)}) -> {r.type}')
        return r

    def raw(self, text: str, shape, elt: str) -> Value:
        """A raw op line; ``{r}`` in ``text`` is replaced by the new value's name."""
        v = self._fresh(shape, elt)
        self.lines.append(text.replace("{r}", v.name))
        return v

    # ----------------------------------------------------------------------------- text / run
    def text(self) -> str:
        sig = ", ".join(f"{a.name}: {a.type}" for a in self.args)
        res = ", ".join(r.type for r in self.results)
        body = "".join(f"    {line}\n" for line in self.lines)
        rets = ", ".join(r.name for r in self.results)
        return (f"func.func @main({sig}) -> ({res}) {{\n{body}    return {rets} : {res}\n}}\n")

    def uses_f6(self) -> bool:
        return any(v.elt in F6 for v in self.args + self.results)

    def pipeline(self) -> str:
        p = "mxlower-mx-to-stablehlo"
        if self.uses_f6() and passes.get("mxlower-expand-narrow-floats") is not None:
            p += ",mxlower-expand-narrow-floats{types=" + ",".join(F6) + "}"
        return f"builtin.module({p})"

    def compile(self) -> Any:
        """Lower and compile once; the returned callable runs on new inputs (same types)."""
        if self.uses_f6() and passes.get("mxlower-expand-narrow-floats") is None:
            text, pipe = self.text(), self.pipeline()
            return lambda *xs: run_module(text, list(xs), pipeline=pipe,
                                          backend="interpreter")
        # JAX is imported here, not at the top: only running on XLA:CPU needs it
        from mxlower.execution.xla import compile as xla_compile

        ctx = J.make_context(allow_unregistered=True)
        with ctx:
            module = J.ir.Module.parse(self.text())
            run_pipeline(module, self.pipeline())
            exe = xla_compile(str(module))
        results = list(self.results)

        def call(*xs: np.ndarray) -> list[np.ndarray]:
            ins = [x.view(np.uint8) if v.elt in F6 else x for x, v in zip(xs, self.args)]
            outs = exe(*ins)
            return [o.view(_dtype(v.elt)) if v.elt in F6 else o for o, v in zip(outs, results)]

        return call

    def run(self) -> list[np.ndarray]:
        return self.compile()(*self.inputs)


def _dtype(elt: str) -> np.dtype:
    return types.dtype(elt)


# ----------------------------------------------------------------------------- data

#: the kinds of block :func:`special_blocks` draws from
BLOCK_KINDS = ("normal", "zero", "nan", "inf", "subnormal", "huge", "wide", "signed_zero",
               "grid", "tiny_normal", "max", "mixed")


def special_blocks(rng: np.random.Generator, shape, axis: int, block: int,
                   dtype=np.float32) -> np.ndarray:
    """Data whose blocks (``block`` values along ``axis``) exercise the MX corner cases: all
    zero (with -0), a NaN, an Inf, only subnormals of ``dtype``, values near the top of its
    range, exponents spread over its whole range, values on rounding grids and midpoints of the
    element types, the smallest normals, and plain normal data.  Every kind occurs when there
    are at least as many blocks as kinds."""
    dt = np.dtype(dtype)
    f16 = dt == np.float16
    big = 60000.0 if f16 else 3.0e38
    tiny = 2.0 ** -20 if f16 else 2.0 ** -135
    shape = list(shape)
    n = shape.pop(axis)
    nb = n // block
    lead = int(np.prod(shape, dtype=np.int64))
    out = np.empty((lead, nb, block), np.float64)
    grid = np.array([1.0, 1.5, 1.75, 1.25, 448, 464, 480, 6, 7, 5, 7.5, 7.75, 28, 30, 57344,
                     61440, 1.9375, 127 / 64, 0.25, 0.375])
    order = rng.permutation(lead * nb)
    for i, j in enumerate(order):
        b, c = divmod(int(j), nb)
        kind = BLOCK_KINDS[i % len(BLOCK_KINDS)]
        v = rng.standard_normal(block)
        if kind == "zero":
            v = np.where(rng.random(block) < 0.5, -0.0, 0.0)
        elif kind == "nan":
            v[rng.integers(block)] = np.nan
        elif kind == "inf":
            v[rng.integers(block)] = rng.choice([-np.inf, np.inf])
        elif kind == "subnormal":
            v = v * tiny
        elif kind == "huge":
            v = rng.uniform(-1, 1, block) * big
        elif kind == "wide":
            lo, hi = (-24, 15) if f16 else (-149, 127)
            v = v * 2.0 ** rng.integers(lo, hi, block).astype(np.float64)
        elif kind == "signed_zero":
            v = v * 2.0 ** -3
            v[: block // 2] = -0.0
        elif kind == "grid":
            e = rng.integers(-10, 4) if f16 else rng.integers(-140, 110)
            v = rng.choice(grid, block) * rng.choice([-1.0, 1.0], block) * 2.0 ** float(e)
        elif kind == "tiny_normal":
            v = v * (2.0 ** -14 if f16 else 2.0 ** -126)
        elif kind == "max":
            v = np.full(block, big) * rng.choice([-1.0, 1.0], block)
        elif kind == "mixed":
            v = v * 2.0 ** rng.integers(-8, 8, block).astype(np.float64)
        out[b, c] = v
    with np.errstate(over="ignore"):
        x = out.astype(np.float32).astype(dt)
    x = x.reshape(*shape, n)
    return np.ascontiguousarray(np.moveaxis(x, -1, axis))



def refine_for_inputs(text: str, inputs) -> str:
    """StableHLO text whose @main has dynamic dimensions, made static for the shapes of
    ``inputs`` exactly as ``mxlower-run`` does (:func:`mxlower.execution.run.make_static`:
    the argument types, then StableHLO's shape refinement, as JAX does for a shape-polymorphic
    export).  Returns the static text."""
    with J.make_context(allow_unregistered=True):
        m = J.ir.Module.parse(text)
        make_static(m.operation, select_function(m.operation, "main"), list(inputs))
        return str(m)


# ----------------------------------------------------------------------------- checks


def assert_dot_close(got, a, b, dims, out: str = "f32", global_scale=None, what: str = "") -> None:
    """``got`` vs the exact dot of the (already dequantized, compute-typed) ``a`` and ``b``:
    docs/semantics.md section 6's bound, ``1e-6 * |g| * sum_k |a_k b_k|`` (plus half an ulp of a
    bf16/f16 result type ``out``), around the exact sum rounded to f32 and scaled by ``g``."""
    ref = R.scaled_dot(a, None, b, None, dimension_numbers=dims, global_scale=global_scale,
                       out_dtype="f32").astype(np.float64)
    mag = R.scaled_dot(np.abs(a.astype(np.float32)), None, np.abs(b.astype(np.float32)), None,
                       dimension_numbers=dims).astype(np.float64)
    g = abs(float(global_scale)) if global_scale is not None else 1.0
    tol = 1e-6 * mag * g
    if out != "f32":
        fi = ml_dtypes.finfo(types.dtype(out))
        ulp = np.maximum(np.abs(ref), float(fi.smallest_normal)) * float(fi.eps)
        tol = tol + ulp / 2 * 1.0001
    err = np.abs(np.asarray(got).astype(np.float64) - ref)
    bad = ~(err <= tol)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} results off; worst err/tol "
            f"{float(np.max(err / np.maximum(tol, 1e-300))):.3g}; first at {list(at)}: got "
            f"{float(np.asarray(got)[at])!r}, expected {float(ref[at])!r}")


#: the imports a machine without mxlower's MLIR stacks lacks (a lent GPU machine)
MLIR_STACKS = ("jax", "jaxlib", "mlir")


def run_without_mlir(code: str, path: str, env: dict[str, str] | None = None):
    """Runs the Python ``code`` in a child process where importing jax, jaxlib or mlir fails,
    with ``path`` first on ``sys.path`` (a test's folder): how a test checks that what a GPU
    machine runs imports none of them.  Returns the CompletedProcess (text output)."""
    prelude = ("import importlib.abc, sys\n"
               "class _Block(importlib.abc.MetaPathFinder):\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               f"        if name.split('.')[0] in {MLIR_STACKS!r}:\n"
               "            raise ImportError('blocked: ' + name)\n"
               "sys.meta_path.insert(0, _Block())\n"
               f"sys.path.insert(0, {path!r})\n")
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True,
                          text=True, env=env, check=False)


def run_on_host_devices(script: str, flag: str, devices: int = 8, timeout: float = 600) -> Any:
    """Runs ``python script flag`` with JAX on ``devices`` virtual CPU devices
    (``--xla_force_host_platform_device_count``, which must be set before JAX starts: a test
    session has already started it with one) and returns the JSON value its last line of
    output holds: how the sharding tests run their multi-device half."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        f" --xla_force_host_platform_device_count={devices}").strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, script, flag], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
