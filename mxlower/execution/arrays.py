"""A run's arrays: seeded inputs, ``.npy``/``.npz`` files in and out, checking inputs against a
signature, and comparing results with a reference.

Data of an ml_dtypes element type (bf16, the f8, f6 and f4 types) travels in files as its raw
codes: unsigned integers of the same width (NumPy itself cannot load most ml_dtypes arrays
back), or the untyped bytes (``|V1``, ``|V2``) NumPy saves them as.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from collections.abc import Sequence

import ml_dtypes
import numpy as np

from mxlower import types
from mxlower.execution.errors import RunError
from mxlower.ir.literals import element_bits, element_strings
from mxlower.ir.signature import Signature

__all__ = ["check_inputs", "compare", "load_arrays", "npz_bytes", "pack", "random_inputs",
           "storable", "typed", "unpack"]


# ----------------------------------------------------------------------------- seeded inputs


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def random_inputs(sig: Signature, seed: int) -> list[np.ndarray]:
    """Seeded data of the argument types: normal(0, 1) for f16/bf16/f32/f64; for narrow floats
    normal values scaled to a quarter of the type's range (never NaN); f8E8M0FNU scales
    2^-8 .. 2^8; integers uniform in [-8, 8) (unsigned [0, 16)); i1 uniform.

    :class:`RunError` for a negative seed, a dynamic shape (its size is the input's to give)
    or data larger than the machine's memory."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise RunError(f"the seed must be a non-negative integer, got {seed!r}")
    total = 0
    for i, spec in enumerate(sig.args):
        if spec.is_dynamic:
            raise RunError(f"argument #{i} of @{sig.name} is {spec.tensor_type()}: a dynamic "
                           "shape needs its data as an input (-i), not seeded random data")
        total += int(np.prod(spec.shape or (), dtype=object)) * 8  # float64 draws first
    memory = _physical_memory()
    if memory is not None and total > memory:
        raise RunError(f"seeded inputs for @{sig.name} need {total / 2**30:.3g} GiB, more than "
                       f"this machine's {memory / 2**30:.3g} GiB of memory")
    rng = np.random.default_rng(seed)
    try:
        return [_draw(rng, spec.shape or (), spec.element) for spec in sig.args]
    except MemoryError:
        raise RunError(f"not enough memory for the seeded inputs of @{sig.name} "
                       f"({total / 2**30:.3g} GiB)") from None


def _draw(rng: np.random.Generator, shape: tuple[int, ...], elt: str) -> np.ndarray:
    t = types.scalar(elt)
    dt = t.dtype
    if elt == "f8E8M0FNU":
        return rng.integers(127 - 8, 127 + 9, size=shape).astype(np.uint8).view(dt)
    if t.kind == "wide":
        return rng.standard_normal(shape).astype(dt)
    if t.kind == "narrow":
        top = float(ml_dtypes.finfo(dt).max)
        return np.clip(rng.standard_normal(shape) * top / 4, -top, top).astype(dt)
    if t.kind == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if t.kind == "uint":
        return rng.integers(0, 16, size=shape).astype(dt)
    return rng.integers(-8, 8, size=shape).astype(dt)


# ----------------------------------------------------------------------------- files


def _npz_arrays(path: str) -> list[tuple[str, np.ndarray]]:
    with np.load(path, allow_pickle=False) as z:
        keys = list(z.files)
        for prefix in ("arg", "arr_", "result"):
            if keys and all(re.fullmatch(re.escape(prefix) + r"\d+", k) for k in keys):
                keys.sort(key=lambda k: int(k[len(prefix):]))
                break
        return [(f"{path}[{k}]", np.asarray(z[k])) for k in keys]


def load_arrays(paths: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """(display name, array) for every array in ``.npy``/``.npz`` files, in order; a file that
    is missing, not NumPy's format or corrupt is a :class:`RunError`."""
    out: list[tuple[str, np.ndarray]] = []
    for p in paths:
        try:
            if p.endswith(".npz"):
                out.extend(_npz_arrays(p))
            else:
                out.append((p, np.load(p, allow_pickle=False)))
        except FileNotFoundError:
            raise RunError(f"could not open input file '{p}': no such file") from None
        except IsADirectoryError:
            raise RunError(f"could not open input file '{p}': is a directory") from None
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            detail = str(e).strip() or type(e).__name__
            raise RunError(f"could not read '{p}' as a NumPy .npy/.npz file: {detail}") from None
        except MemoryError:
            raise RunError(f"could not read '{p}': not enough memory for its arrays") from None
    return out


def _is_ml(dt: np.dtype) -> bool:
    return dt.kind == "V" or dt.type.__module__.startswith("ml_dtypes")


def typed(a: np.ndarray, elt: str) -> np.ndarray:
    """``a`` as element type ``elt`` when it holds that type's raw codes (unsigned integers or
    untyped bytes of the same width); f4/f6 codes must fit their width."""
    t = types.SCALARS.get(elt)
    if t is None or not _is_ml(t.dtype) or a.dtype.itemsize != t.dtype.itemsize:
        return a
    if a.dtype.kind == "u" or (a.dtype.kind == "V" and a.dtype.fields is None):
        codes = a.view(t.code_dtype)
        if t.bits < 8 and codes.size and int(codes.max()) > t.code_mask:
            raise RunError(f"codes of {elt} must be below {1 << t.bits}, found "
                           f"{int(codes.max())}")
        return codes.view(t.dtype)
    return a


def storable(a: np.ndarray) -> np.ndarray:
    """ml_dtypes arrays as their raw codes (see :func:`typed`), others unchanged."""
    return a.view(types.code_dtype(a.dtype)) if _is_ml(a.dtype) else a


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """The bytes of an ``.npz`` file holding ``arrays`` (written atomically by the caller)."""
    b = io.BytesIO()
    np.savez(b, **arrays)
    return b.getvalue()


def pack(a: object) -> tuple:
    """An array (or scalar) as plain data for another process: (dtype name, shape, bytes)."""
    arr = np.asarray(a)
    return (arr.dtype.name if arr.dtype.names is None else str(arr.dtype), arr.shape,
            np.ascontiguousarray(arr).tobytes())


def unpack(t: tuple) -> np.ndarray:
    """The array :func:`pack` described (ml_dtypes types included)."""
    name, shape, data = t
    dt = np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)
    return np.frombuffer(data, dtype=dt).reshape(shape).copy()


def _dtype_name(dt: np.dtype) -> str:
    try:
        return f"{types.of_dtype(dt).mlir} ({dt.name})"
    except KeyError:
        return dt.name


def check_inputs(sig: Signature, named: list[tuple[str, np.ndarray]]) -> list[np.ndarray]:
    """The arrays of ``named`` ((display name, array) pairs) as ``sig``'s arguments: their
    count, element types and shapes checked (raw codes typed), C-contiguous."""
    if len(named) != len(sig.args):
        raise RunError(f"@{sig.name} takes {len(sig.args)} argument"
                       f"{'s' if len(sig.args) != 1 else ''} but {len(named)} input array"
                       f"{'s were' if len(named) != 1 else ' was'} given")
    out = []
    for i, ((name, a), spec) in enumerate(zip(named, sig.args)):
        want = types.SCALARS[spec.element].dtype if spec.element in types.SCALARS else None
        a = typed(a, spec.element)
        if a.dtype != want:
            raise RunError(f"argument #{i} of @{sig.name} is {spec.tensor_type()} but {name} "
                           f"holds {_dtype_name(a.dtype)} data"
                           + (f" (expected {want.name})" if want is not None else ""))
        if a.ndim != len(spec.shape) or any(d is not None and d != n
                                            for d, n in zip(spec.shape, a.shape)):
            raise RunError(f"argument #{i} of @{sig.name} is {spec.tensor_type()} but {name} "
                           f"has shape {tuple(a.shape)}")
        out.append(np.asarray(a, order="C"))  # (ascontiguousarray makes 0-d arrays 1-d)
    return out


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
            bad = element_bits(got, elt) != element_bits(ref, elt)
            if types.is_wide_float(elt):
                bad &= ~both_nan
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
    gs = element_strings(got[idx][None], elt)[0]
    rs = element_strings(ref[idx][None], elt)[0]
    return False, (f"MISMATCH ({mode}): {n} of {got.size} elements differ; first at "
                   f"{list(idx)}: got {gs}, expected {rs}{'; ' + stats if stats else ''}")
