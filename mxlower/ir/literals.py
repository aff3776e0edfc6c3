"""Dense literals to and from NumPy arrays: the one literal codec.

MLIR prints a dense attribute as ``dense<[[1.5, -2.0], ...]> : tensor<2x2xf32>``: finite floats
as decimals that round back to the element, other values as bit patterns (``0x7FC00000``), a
splat as one element, and a large attribute as one hex string of its little-endian storage
(``dense<"0x0102..."> : ...``).  :func:`format_literal` writes that syntax from an array (what
``mxlower-run`` prints and feeds StableHLO's interpreter); :func:`element_codes` and
:func:`parse_dense` read it back, for every type of :mod:`mxlower.types` (narrow floats
included, which NumPy cannot take from the bindings' buffers)::

    text = format_literal(np.float32([1.5, np.nan]), "f32")   # dense<[1.5, 0x7FC00000]> : ...
    arr = parse_dense(attr, (2,), "f32")
    codes = element_codes("1.5", "f4E2M1FN", 1)               # uint8 [0x3]
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from mxlower import types
from mxlower.ir.signature import tensor_type

__all__ = ["LiteralError", "dense_body", "element_bits", "element_codes", "element_strings",
           "format_literal", "parse_dense"]


class LiteralError(ValueError):
    """A literal that does not hold the elements asked for."""


def _scalar(elt: str, dt: np.dtype) -> types.ScalarType | None:
    t = types.SCALARS.get(elt)
    return t if t is not None and t.dtype.itemsize == dt.itemsize else None


def _bits(elt: str, dt: np.dtype) -> int:
    t = _scalar(elt, dt)
    return t.bits if t is not None else 8 * dt.itemsize


# ----------------------------------------------------------------------------- writing


def _hex(code: int, bits: int) -> str:
    return f"0x{code:0{max(1, (bits + 3) // 4)}X}"


def element_bits(a: np.ndarray, elt: str) -> np.ndarray:
    """The bit patterns of ``a``'s elements as unsigned integers (narrow types masked to their
    width: a float4_e2m1fn array gives its 4-bit codes)."""
    c = a.view(types.code_dtype(a.dtype))
    bits = _bits(elt, a.dtype)
    return c & ((1 << bits) - 1) if bits < 8 else c


def element_strings(a: np.ndarray, elt: str, bits: bool = False) -> list[str]:
    """Each element of ``a`` as MLIR prints it in a dense literal of element type ``elt``
    (``bits``: every element as its bit pattern)."""
    flat = np.ascontiguousarray(a).reshape(-1)
    width = _bits(elt, a.dtype)
    if elt == "i1":
        return ["true" if v else "false" for v in flat]
    if a.dtype.kind in "iu":
        if bits:
            return [_hex(int(v), width) for v in flat.view(types.code_dtype(a.dtype))]
        return [str(int(v)) for v in flat]
    codes = element_bits(flat, elt)
    if bits:
        return [_hex(int(c), width) for c in codes]
    f = flat.astype(np.float64)
    f32 = flat.astype(np.float32) if a.dtype != np.float64 else None
    out = []
    for i, v in enumerate(f):
        if not np.isfinite(v):
            out.append(_hex(int(codes[i]), width))
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
    step = len(items) // shape[0]
    return "[" + ", ".join(_nest(items[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"


def format_literal(a: np.ndarray, elt: str, *, bits: bool = False) -> str:
    """``dense<...> : tensor<...>`` for an array of MLIR element type ``elt`` (parseable by
    MLIR: finite floats as shortest round-trip decimals, non-finite ones as bit patterns; an
    array with no elements as ``dense<>``, as MLIR prints it)."""
    a = np.asarray(a)
    if a.size == 0:
        return f"dense<> : {tensor_type(a.shape, elt)}"
    items = element_strings(a, elt, bits)
    if a.size > 1 and not bits and all(x == items[0] for x in items):
        body = items[0]  # a splat, as MLIR prints it
    else:
        body = _nest(items, a.shape)
    return f"dense<{body}> : {tensor_type(a.shape, elt)}"


# ----------------------------------------------------------------------------- reading

_TOKEN_RE = re.compile(r'"0x[0-9A-Fa-f]*"|0x[0-9A-Fa-f]+|true|false|'
                       r'[-+]?(?:inf|nan|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)', re.I)
_DENSE_RE = re.compile(r"\s*dense<(.*)>\s*:\s*[^:]*$", re.S)


def dense_body(attr: Any) -> str:
    """What is between ``dense<`` and ``>`` in a dense attribute (or its text)."""
    text = str(attr)
    m = _DENSE_RE.match(text)
    if m is None:
        raise LiteralError(f"not a dense literal: {text[:80]}")
    return m.group(1).strip()


def element_codes(body: str, elt: str, count: int) -> np.ndarray:
    """The bit patterns (unsigned, of the element's storage width) of ``count`` elements of
    type ``elt`` printed in ``body`` -- a dense literal's body (see :func:`dense_body`) or one
    scalar literal: decimals (printed so that they round back to the element), ``0x..`` bit
    patterns, ``true``/``false``, or a ``"0x.."`` hex string of the little-endian storage.  A
    single element is a splat of ``count``."""
    try:
        t = types.scalar(elt)
    except KeyError:
        raise LiteralError(f"element type '{elt}' has no NumPy equivalent here") from None
    dt, cdt = t.dtype, t.code_dtype
    mask = t.code_mask if t.kind == "narrow" else (1 << (8 * dt.itemsize)) - 1
    tokens = _TOKEN_RE.findall(body)
    if len(tokens) == 1 and tokens[0].startswith('"'):
        raw = bytes.fromhex(tokens[0][3:-1])
        if len(raw) % dt.itemsize:
            raise LiteralError(f"a hex literal of {len(raw)} bytes does not hold whole {elt} "
                               "elements")
        codes = np.frombuffer(raw, dtype=cdt).copy()
        if t.kind == "narrow":
            codes &= cdt.type(mask)
    else:
        codes = np.empty(len(tokens), dtype=cdt)
        for i, tok in enumerate(tokens):
            codes[i] = _token_code(tok, dt, cdt, mask)
    if codes.size == 1 and count != 1:
        return np.broadcast_to(codes, (count,)).copy()
    if codes.size != count:
        raise LiteralError(f"expected {count} elements of {elt}, found {codes.size}")
    return codes


def _token_code(tok: str, dt: np.dtype, cdt: np.dtype, mask: int) -> int:
    low = tok.lower()
    if low.startswith("0x"):
        return int(tok, 16) & mask
    if low in ("true", "false"):
        return int(low == "true")
    try:
        if dt.kind == "b":
            return int(int(tok) != 0)
        value = np.array(int(tok) if dt.kind in "iu" else float(tok))
    except ValueError:
        raise LiteralError(f"'{tok}' is not a {dt.name} literal") from None
    return int(value.astype(dt).view(cdt))


def parse_dense(attr: Any, shape: tuple[int, ...], elt: str) -> np.ndarray:
    """The array of element type ``elt`` and ``shape`` a dense attribute (or its text) holds."""
    dt = types.dtype(elt) if elt in types.SCALARS else None
    if dt is None:
        raise LiteralError(f"element type '{elt}' has no NumPy equivalent here")
    if not isinstance(attr, str):
        try:  # the bindings' buffer: fast, for the types NumPy knows
            a = np.array(attr)
            if a.dtype.kind == dt.kind and a.dtype.itemsize == dt.itemsize:
                return a.reshape(shape).view(dt) if a.dtype != dt else a.reshape(shape)
        except Exception:  # noqa: BLE001,S110 - the bindings reject types NumPy lacks
            pass
    n = int(np.prod(shape, dtype=np.int64))
    codes = element_codes(dense_body(attr), elt, n) if n else np.empty(0, types.code_dtype(dt))
    return codes.view(dt).reshape(shape)
