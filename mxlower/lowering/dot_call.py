"""Where the fused dot kernel (:mod:`mxlower.lowering.dot_kernels`) takes an ``mx.scaled_dot``,
and the StableHLO that calls it.

:func:`plan` decides, from the two sides and the dimension numbers, whether the kernel
applies and in which order it takes the sides; :func:`emit_call` writes the call -- each side
brought to ``[B, rows, K]`` (a transpose only where its dimensions are not in that order
already), a typed-FFI ``stablehlo.custom_call`` to the kernel's target
(:attr:`DotSpec.name`), and the kernel's ``[B, M, N]`` reshaped to the dot's result.  The
``mxlower-scaled-dot-to-kernel`` pass and ``mxlower.jax``'s CPU ``scaled_dot`` rule both use
:func:`plan`; the pass uses :func:`emit_call` (JAX emits the call through ``jax.ffi``).

A side's MX format may be given by name or as its datatype (:class:`Side`); :func:`plan`
reads a datatype as its format, block size and blocked axis, which name the kernel's
:class:`DotSpec`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mxlower.bindings.jaxlib import ir, stablehlo
from mxlower.formats import FORMATS, format_of, get_datatype, why_not_format
from mxlower.lowering.dot_kernels import STREAM_M, DotSpec, gemm_by_default
from mxlower.lowering.mx_math import dequantize_values
from mxlower.numbers import Datatype

__all__ = ["CALLABLE_TYPES", "F16_ROWS", "KN_COPY_ROWS", "KN_MX_ROWS", "K_MAJOR", "Side",
           "bf16_exact", "callable_side", "converted_a", "dequantized_a", "emit_call", "k_major",
           "normalize_order", "plan", "side_of"]

#: whether :func:`plan` gives K-major MX weights against plain rows -- any number of them --
#: the K-major kernel (:attr:`DotSpec.rhs_kn`: read as stored), else the ``[N, K]`` one
#: after a transpose (XLA:CPU's transpose of a 16 MB f8 array took 64 ms, the GEMV 1.2 ms:
#: BENCHMARKS.md, eighteenth session; at N = K = 4096 the K-major kernel ran 256-2048 f32
#: rows 1.1-2.7x, 2048 bf16 rows 1.1-1.2x faster than the transposed path, 4096 bf16 rows
#: level: twenty-third session; bench/bench_dot_layouts.py switches it for its "transposed"
#: column)
K_MAJOR = True
#: the most rows of MX activations against K-major MX weights that :func:`plan` gives the
#: K-major kernel, the activations dequantized first (:func:`dequantized_a`), by what they
#: are dequantized to (bf16 where :func:`bf16_exact`, else f32); more rows take the MX
#: pair's ``[N, K]`` kernel on the copy of the weights its handler transposes
#: (:attr:`DotSpec.transposes_b`: 1.1-3.7 ms for 9-17 MB of codes, where XLA's transpose
#: took 42-66 ms).  At N = K = 4096 on a Zen 4 (weights cold), 16 rows read K-major
#: 2.2-3.9 ms against 3.9-6.8 transposed, 64 bf16 rows 5.1-7.2 ms either way, 128 rows
#: 8.7-13.4 ms transposed against 11.2-22.1 read K-major, 32 e4m3 rows (f32) 5.9 ms
#: transposed against 6.7 (BENCHMARKS.md, twenty-fourth session)
KN_MX_ROWS = {"bf16": 64, "f32": 16}
#: the most f16 rows that :func:`plan` gives the kernel as f16 against MX weights held
#: ``[N, K]``; more are converted to f32 first (exact; :func:`converted_a`): the f32 rows'
#: streaming tiles and GEMM ran them 1.03-1.5x (16-96 rows) and 1.2-1.4x (129-256 rows,
#: the GEMM on transposed panels, where f16 rows took the dequantize kernel + XLA's dot past
#: 256) faster at N = K = 4096 on a Zen 4 (BENCHMARKS.md, twenty-fourth session)
F16_ROWS = 16
#: the most bf16 rows that :func:`plan` gives the K-major kernel against K-major MX weights
#: where the ``[N, K]`` kernel's GEMM runs by default; more take that kernel on the copy of
#: the weights its handler transposes (:attr:`DotSpec.rhs_copy`): at N = K = 4096 on a Zen 4
#: the copy ran 512 rows 0.99-1.04x, 1024 rows 1.06-1.12x, 2048-4096 rows 1.07-1.23x as fast
#: as the K-major tiles, 256 rows 0.94-0.97x (BENCHMARKS.md, twenty-fourth session)
KN_COPY_ROWS = 512
#: element types a kernel call can take on XLA:CPU (f6 has no XLA type there)
CALLABLE_TYPES = frozenset({"f32", "bf16", "f16", "f4E2M1FN", "f8E4M3FN", "f8E5M2", "i8",
                            "ui8"})


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a scaled dot, as :func:`plan` needs it: its MX format (None: plain), its
    element type (``f32``, ``bf16``, ``f16`` for a plain side), block size and blocked axis
    (MX), and its shape.  ``fmt`` is a format name or an MX format's datatype (a
    :class:`~mxlower.numbers.Datatype` or a code such as ``"e4m3fn:e8m0_t32d0"``), whose
    tiles give the block size and blocked axis (``block_size`` / ``axis`` None, or the
    same)."""

    fmt: str | Datatype | None
    element_type: str
    block_size: int | None
    axis: int | None
    shape: tuple[int, ...]


def _named(side: Side) -> Side:
    """``side`` with its MX format by name, block size and axis given (ValueError for a
    datatype that is no MX format's, or that contradicts ``block_size`` / ``axis``)."""
    if side.fmt is None or (isinstance(side.fmt, str) and side.fmt in FORMATS):
        return side
    dt = get_datatype(side.fmt)
    m = format_of(dt)
    if m is None:
        raise ValueError(f"dot: datatype {dt.code} is not an MX format's: {why_not_format(dt)}")
    fmt, k, dim = m
    rank = len(side.shape)
    if not -rank <= dim < rank:
        raise ValueError(f"dot: datatype {dt.code} blocks dimension {dim} of a rank-{rank} "
                         "side")
    axis = dim % rank
    for what, given, want in (("block size", side.block_size, k), ("axis", side.axis, axis)):
        if given is not None and given != want:
            raise ValueError(f"dot: datatype {dt.code} has {what} {want}, the side {given}")
    return dataclasses.replace(side, fmt=fmt.name, block_size=k, axis=axis)


def plan(lhs: Side, rhs: Side, contracting: tuple[Sequence[int], Sequence[int]],
         batch: tuple[Sequence[int], Sequence[int]], path: str, *,
         gemm: bool = False, vendor: str = "") -> tuple[DotSpec, bool] | None:
    """``(spec, swap)`` of the kernel computing this dot, or None where none applies: more
    than one contracting dimension, an MX side not contracted over its blocked axis, a side
    type the kernel does not read (a plain side other than f32 / bf16 / f16), and -- unless
    ``gemm`` -- a GEMM (more free rows on both sides than stream, :attr:`DotSpec.stream_m`:
    :data:`STREAM_M` MX rows, the path's :data:`~mxlower.lowering.dot_kernels.PLAIN_STREAM_M`
    plain ones against MX weights) that does not take the kernel by default
    (:func:`mxlower.lowering.dot_kernels.gemm_by_default` on the CPU ``vendor``: the
    integer dot products for both sides e2m1 / nvfp4, e2m3, e3m2 or mxint8 with one block
    size, on avx2, vnni and avx512; the bf16 dot products for the other MX pairs with one
    block size and for bf16 rows against MX weights, on avx512, where the vendor's CPUs run
    them faster than XLA's dot; f32 rows against MX weights on avx512, on transposed
    panels): the kernel's other f32 GEMM path is slower than the dequantize kernels + XLA's
    f32 dot, its packed dot products faster (BENCHMARKS.md).  ``swap``: the kernel computes
    ``rhs x lhs`` (the side with few free rows streams the other: a GEMV written ``w @
    x``).  MX weights held K-major (:func:`k_major`) against plain rows -- any number of
    them -- take the K-major kernel (:attr:`DotSpec.rhs_kn`, :data:`K_MAJOR`; f4 ones where
    N is even), but for more than :data:`KN_COPY_ROWS` bf16 rows, which take the ``[N, K]``
    kernel on a copy of the weights its handler transposes (:attr:`DotSpec.rhs_copy`) where
    that kernel's GEMM runs by default; MX rows -- at most :data:`KN_MX_ROWS` -- against
    them are dequantized first (the kernel's A side then plain bf16 rows where
    :func:`bf16_exact`, else f32: :func:`dequantized_a`), more take the MX pair's kernel on
    such a copy (:attr:`DotSpec.transposes_b`) where that kernel takes them (they stream,
    or its GEMM runs by default), else they too are dequantized for the K-major kernel.
    More than :data:`F16_ROWS` f16 rows against MX weights held ``[N, K]`` take the kernel
    of f32 rows (:func:`converted_a`).  A side's format may be a datatype (:class:`Side`)."""
    lhs, rhs = _named(lhs), _named(rhs)
    sides = {"lhs": lhs, "rhs": rhs}
    free = {}
    for i, name in enumerate(("lhs", "rhs")):
        side, c = sides[name], contracting[i]
        if len(c) != 1:
            return None
        if side.fmt is not None and side.axis != c[0]:
            return None
        free[name] = math.prod(d for j, d in enumerate(side.shape)
                               if j not in c and j not in batch[i])
    # the kernel's A side: the lhs unless only the rhs's rows stream against the other side
    # (so that plain rows against MX weights are A whatever their count: the shards of a dot
    # split along either side's rows compute as the whole does)
    # (and plain rows whose GEMM against MX weights runs by default are A, whatever the
    # other side's count)
    swap = ((free["rhs"] <= _stream_m(rhs, lhs, path)
             or _gemm_rows(rhs, lhs, free["rhs"], path, vendor))
            and free["lhs"] > _stream_m(lhs, rhs, path))
    an, bn = ("rhs", "lhs") if swap else ("lhs", "rhs")  # the kernel's sides A and B
    a, b = sides[an], sides[bn]
    ib = ("lhs", "rhs").index(bn)
    # (f4 codes of an odd N would start a row of K mid-byte: the K-major kernel's exact
    # path, one result at a time, would take them all)
    kn = (K_MAJOR and b.fmt is not None and k_major(b.shape, contracting[ib], batch[ib])
          and (FORMATS[b.fmt].bits != 4 or free[bn] % 2 == 0))
    if kn and a.fmt is not None:  # few MX rows: their values, bf16 where exact there
        t = "bf16" if bf16_exact(a.fmt) else "f32"
        if free[an] <= KN_MX_ROWS[t] or not _takes(a, b, path, free[an], gemm, vendor):
            a = Side(None, t, None, None, a.shape)
    if not kn and a.fmt is None and a.element_type == "f16" and free[an] > F16_ROWS:
        a = dataclasses.replace(a, element_type="f32")  # (exact: converted_a)
    copy = (kn and a.fmt is None and a.element_type == "bf16" and free[an] > KN_COPY_ROWS
            and _gemm_rows(a, b, free[an], path, vendor))  # (the [N, K] kernel's GEMM)
    try:
        spec = _spec(a, b, path, kn, copy)
    except ValueError:
        return None
    if free[an] > spec.stream_m and not gemm and not gemm_by_default(spec, vendor):
        return None
    return spec, swap


def _gemm_rows(a: Side, b: Side, m: int, path: str, vendor: str) -> bool:
    """Whether ``m`` plain rows of ``a`` against MX ``b`` take the kernel's GEMM by default
    (f16 ones as f32 past :data:`F16_ROWS`)."""
    if a.fmt is not None or b.fmt is None:
        return False
    if a.element_type == "f16" and m > F16_ROWS:
        a = dataclasses.replace(a, element_type="f32")
    try:
        return gemm_by_default(_spec(a, b, path), vendor)
    except ValueError:
        return False


def _takes(a: Side, b: Side, path: str, m: int, gemm: bool, vendor: str) -> bool:
    """Whether the MX pair's kernel takes ``m`` rows of ``a`` against K-major ``b``
    (:attr:`DotSpec.transposes_b`): they stream, or its GEMM runs by default (or ``gemm``).
    Where it does not, :func:`plan` gives the K-major kernel the rows' values, any number of
    them, as it does plain rows."""
    try:
        spec = _spec(a, b, path, True)
    except ValueError:
        return False
    return m <= spec.stream_m or gemm or gemm_by_default(spec, vendor)


def dequantized_a(spec: DotSpec, a_format: Any) -> bool:
    """Whether the kernel's A side, given in MX format ``a_format`` (None: plain), is to be
    dequantized before the call of ``spec`` (MX rows against K-major MX weights:
    :func:`plan`, :data:`KN_MX_ROWS`): the kernel reads it as plain rows of ``spec.lhs``
    (bf16 where :func:`bf16_exact`, else f32)."""
    return a_format is not None and spec.fmt("lhs") is None


def converted_a(spec: DotSpec, a_format: Any, a_type: str) -> bool:
    """Whether the kernel's plain A side of element type ``a_type`` (``a_format`` None) is
    converted to the kernel's type first (f16 rows read as f32 past :data:`F16_ROWS`:
    :func:`plan`)."""
    return a_format is None and a_type != spec.lhs


def bf16_exact(fmt: str) -> bool:
    """Whether every value of MX format ``fmt`` (without nvfp4's global scale) is exact in
    bf16, whatever its scale: at most 8 significant bits (every MX element's), and each a
    multiple of 2^-133, bf16's smallest subnormal (``value_exponents``: mxint8, the f4 and
    f6 formats, nvfp4; not e4m3 / e5m2, whose smallest subnormals under a low scale are
    finer).  Such rows dequantized to bf16 (:func:`dequantized_a`) are the same values as
    in f32, and take the K-major kernel's bf16 dot products."""
    return FORMATS[fmt].value_exponents[0] >= -133


def _spec(a: Side, b: Side, path: str, kn: bool = False, copy: bool = False) -> DotSpec:
    """The kernel of ``a`` and ``b`` as its A and B sides (ValueError where none is)."""
    return DotSpec(a.fmt or a.element_type, b.fmt or b.element_type,
                   a.block_size if a.fmt else None, b.block_size if b.fmt else None, path, kn,
                   copy)


def _stream_m(a: Side, b: Side, path: str) -> int:
    """The most rows of ``a`` that stream against ``b`` as the kernel's A and B sides
    (:attr:`DotSpec.stream_m`; :data:`STREAM_M` where no kernel takes them)."""
    try:
        return _spec(a, b, path).stream_m
    except ValueError:
        return STREAM_M


def k_major(shape: Sequence[int], contracting: Sequence[int], batch: Sequence[int]) -> bool:
    """Whether a side of ``shape`` is held ``[batch..., K, free...]`` and not already
    ``[batch..., free..., K]``: the K-major weights (``[K, N]`` blocked along K) that the
    kernel reads as stored (:attr:`DotSpec.rhs_kn`) where the ``[N, K]`` kernel would want a
    transposed copy."""
    free = [d for d in range(len(shape)) if d not in contracting and d not in batch]
    return (list(batch) + list(contracting) + free == list(range(len(shape)))
            and list(batch) + free + list(contracting) != list(range(len(shape))))


def normalize_order(shape: Sequence[int], contracting: Sequence[int], batch: Sequence[int],
                    kn: bool) -> tuple[list[int], list[int]]:
    """(the permutation, the 3-d shape) that bring a side to ``[B, rows, K]`` -- or, ``kn``
    (:attr:`DotSpec.rhs_kn`), ``[B, K, N]`` --: batch, free and contracting dimensions."""
    free = [d for d in range(len(shape)) if d not in contracting and d not in batch]
    bn = math.prod(shape[d] for d in batch)
    rows = math.prod(shape[d] for d in free)
    k = shape[contracting[0]]
    if kn:
        return list(batch) + list(contracting) + free, [bn, k, rows]
    return list(batch) + free + list(contracting), [bn, rows, k]


def side_of(o: Any) -> Side:
    """The :class:`Side` of a parsed ``mx.scaled_dot`` operand
    (:class:`mxlower.dialect.mx.Operand`: whichever spelling the op used, an MX side is parsed
    to its format, block size and axis)."""
    return Side(o.fmt.name if o.fmt is not None else None, o.element_type, o.block_size,
                o.axis, tuple(o.shape))


def callable_side(o: Any) -> bool:
    """Whether XLA:CPU can hand this operand (and its scales) to a kernel call: a static
    shape, and element and scale types XLA:CPU has (not f6)."""
    if o.element_type not in CALLABLE_TYPES or not all(isinstance(d, int) for d in o.shape):
        return False
    return o.scales is None or str(ir.RankedTensorType(o.scales.type).element_type) in (
        "f8E8M0FNU", "f8E4M3FN", "ui8", "i8")


def emit_call(b: Any, s: Any, spec: DotSpec, swap: bool) -> Any:
    """At ``b``'s insertion point: the f32 contraction of the parsed ``mx.scaled_dot`` ``s``
    (without nvfp4's global scale), shaped as its result, by a call of ``spec``'s kernel
    target (registered for XLA:CPU by :func:`mxlower.execution.ffi_dot.register`); an MX A
    side the kernel reads as plain rows (:func:`dequantized_a`) dequantized first."""
    order = ("rhs", "lhs") if swap else ("lhs", "rhs")
    dims = {"lhs": (s.lhs_batch, s.lhs_contracting), "rhs": (s.rhs_batch, s.rhs_contracting)}

    def normalize(v: Any, side: str) -> Any:
        bd, cd = dims[side]
        perm, shape3 = normalize_order(b.shape(v), cd, bd, spec.rhs_kn and side == order[1])
        return b.reshape(b.transpose(v, perm), shape3)

    a = getattr(s, order[0])
    first = a.value
    deq = dequantized_a(spec, a.fmt)
    if converted_a(spec, a.fmt, a.element_type):  # f16 rows as f32 (exact)
        first = b.convert(first, spec.lhs)
    if deq:  # its exact values (docs/semantics.md section 5)
        first = dequantize_values(b, a.value, a.scales, a.fmt, a.block_size, a.axis,
                                  None, "f32")
        if spec.lhs == "bf16":  # exact in bf16 (bf16_exact): the high half of its bits
            bits = b.bitcast(first, "ui32")
            first = b.bitcast(b.convert(b.shr(bits, b.like(bits, 16)), "ui16"), "bf16")
    values = {order[0]: normalize(first, order[0]),
              order[1]: normalize(getattr(s, order[1]).value, order[1])}
    operands = []
    for i, side in enumerate(order):
        operands.append(values[side])
        if getattr(s, side).scales is not None and not (i == 0 and deq):
            operands.append(normalize(getattr(s, side).scales, side))
    B, M = b.shape(values[order[0]])[:2]
    N = b.shape(values[order[1]])[2 if spec.rhs_kn else 1]
    layout = ir.DenseElementsAttr.get(np.array([2, 1, 0], dtype=np.int64),
                                      type=ir.IndexType.get())
    call = stablehlo.CustomCallOp(
        [b.ttype([B, M, N], "f32")], operands, spec.name,
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
        backend_config=ir.DictAttr.get({}),
        operand_layouts=ir.ArrayAttr.get([layout] * len(operands)),
        result_layouts=ir.ArrayAttr.get([layout]), loc=b.loc, ip=b.ip)
    out = call.results[0]
    if swap:
        out = b.transpose(out, [0, 2, 1])
    return b.reshape(out, list(s.result_shape))
