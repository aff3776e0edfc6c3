"""The fused block-scaled dot (docs/semantics.md section 6) as a CPU kernel on upstream MLIR.

The recipe behind :mod:`mxlower.execution.ffi_dot`.  A kernel is a ``func.func`` in the
``scf``/``vector``/``arith``/``memref`` dialects that computes, for a range of work units,

    out[b, m, n] = sum_k A[b, m, k] * B[b, n, k]        (f32, without nvfp4's global scale)

on the operands **as stored** -- f4 codes packed two per byte (low nibble first, as XLA lays
out ``f4E2M1FN``), f6 codes one per byte, f8 and int8 codes, e8m0 / e4m3 scale codes, or a
plain f32 / bf16 / f16 side -- normalized to ``[B, M, K] x [B, N, K]`` with the blocked axis K
contiguous.  No dequantized operand is ever written out: each side's codes are decoded in
registers, a chunk of ``C`` values at a time (``C`` divides every block size), into

* **integer units** for the formats whose elements are small integers after a fixed power of
  two (e2m1 x 2 in [-12, 12], e2m3 x 8 in [-60, 60], e3m2 x 16 in [-448, 448], mxint8 codes as
  they are): with both sides such formats and one block size, each block's sum of products
  is formed in f32 lanes from integer-valued operands -- exact (every partial sum is an
  integer below 2^24 while ``k * max|a| * max|b| < 2^24``, which holds for every format pair
  at block size 32 and up to 83 for e3m2 x e3m2) -- and then scaled by the product of the two
  blocks' factors (scale x 2^-shift: a power of two, or nvfp4's two E4M3 scales, exact) and
  accumulated (:data:`EXACT_ACC`: in f64, so the result is the f64 sum of exact block sums,
  rounded once to f32);
* **scaled values** (element x scale, exact in f32) otherwise (an f8 side, a plain side, two
  block sizes): products and sums in f32 FMA lanes, as XLA's f32 dot of the dequantized
  operands does.

Work units are ``(batch, panel of NP columns of B)`` -- for a packed GEMM's call (below),
``(block of dims[5] rows of A, batch, panel)`` -- ; the caller splits the unit range across
threads.  Within a unit two ways, chosen at run time by M:

* **streaming** (``M <=`` :attr:`DotSpec.stream_m`: 16 MX rows, 64 plain ones -- 256 on the
  512-bit paths, 48 bf16 rows there --, the GEMV of inference and more): B's codes are
  decoded straight from memory as they are read, the unit's block factors decoded first,
  eight scale codes at a time, into a scratch of ``NP x K / k`` -- for one or two rows of
  A, one row at a time
  against :data:`NR_STREAM` columns: per column and block a partial sum of the *unscaled*
  values (integer units or f8 values) in one f32 vector and one FMA by the block's factor
  (per 32 weights: the decode, four FMAs, and one FMA per block instead of a multiply per
  value); for more rows, once per tile of :data:`MR_STREAM_EXACT` (up to that many rows) or
  :data:`MR_STREAM` rows against :data:`NR_STREAM_TILE` columns (or
  :meth:`_DotKernel.few_columns`), the chunk scaled once for
  the tile's rows -- A's rows decoded once per unit into a scratch of ``M x K`` f32,
  or read in place when they are plain f32 (on avx512, bf16 rows are read in place too and
  the tile runs on bf16 dot products: :attr:`_DotKernel.bf_stream`; so do MX rows against MX
  weights, decoded to bf16 once per batch: :attr:`_DotKernel.a_bf16` -- the exact pairs' with
  f64 lanes, :attr:`_DotKernel.exact_bf16`, where the scales allow a group of
  :data:`EXACT_GROUP` blocks at a time: :meth:`_DotKernel.group_spread`).  On the 512-bit
  paths (:data:`PIPELINED_STREAM`) the tiles of plain f32 / bf16 rows are software-pipelined
  (:meth:`_DotKernel.piped_tile`: B's chunks decoded :data:`PIPE_DEPTH` steps ahead of the
  dot products, A's rows copied once per batch in slabs of a step's values of a tile's rows,
  f4 and f6 codes on bf16 dot products by one word permute from the block's table -- the row
  of a constant table of every scale code's products that the block's scale byte selects
  (:data:`SCALE_TABLES`) --, f8 and mxint8 codes by placing their bits:
  :meth:`_DotKernel.placed_bits`; on the f32 FMAs mxint8 and f6 codes' integer units by a
  magic number: :meth:`_DotKernel.magic_chunk`), two rows run as one such tile (B read once),
  and one row of bf16 activations too where such a decode applies; each chunk of B's codes
  prefetches the same chunk of the next column (group) (:data:`PREFETCH_NEXT_ROW`);
* **blocked GEMM**: the unit's B panel is decoded once into a scratch of ``NP x K`` f32 (a
  cache-sized panel, as any GEMM packs its operands), then each tile of MR rows of A into a
  scratch of ``MR x K``, and an MR x NR register tile of accumulators runs over K;
* **packed GEMM** (paths avx2, vnni and avx512, both sides integer-unit formats with one
  block size: :attr:`DotSpec.int_dot`; on avx512 also the other MX pairs with one block
  size, and plain bf16 rows against MX weights, read as stored: :attr:`DotSpec.bf16_dot`;
  on amx, the MX pairs with an f8 or e3m2 side on AMX tiles:
  :meth:`_DotKernel.amx_gemm`): per block of ``dims[5]`` rows of A (at most :data:`MB_INT`;
  packed once per call and block as pairs or quads of integer units or bf16 values; the
  scratch stays bounded whatever M) and per unit (B's panel packed likewise), per tile of :data:`MR_INT` rows and
  32 (pairs of bytes; avx512's 512-bit vectors) or 16 (words, quads of bytes) columns, per
  block of K, the block's sums formed by dot products -- on avx2, ``vpmaddubsw`` into i16
  for e2m1 / nvfp4 with each other or e2m3 (:attr:`DotSpec.byte_dot`), ``vpmaddwd`` into
  i32 otherwise (:attr:`DotSpec.word_dot`); on vnni and avx512, ``vpdpbusd`` (four byte
  products summed into i32, :attr:`DotSpec.quad_dot`) for every pairing of e2m1, nvfp4,
  e2m3 and mxint8, ``vpdpwssd`` for e3m2 on vnni (all exact) -- converted to f32
  (exactly), multiplied by the two blocks' factors and accumulated in f32 FMA lanes; on
  avx512, e3m2's pairs by ``vdpbf16ps`` on the scaled values into lanes that start each
  block at zero (the same exact block sums, :attr:`DotSpec.bf16_blocks`), each block's
  sum then added into the f32 lanes, and for the pairs with an f8 side ``vdpbf16ps`` on
  the scaled values (pairs of exact bf16 products added into f32 accumulators that run
  over the whole of K)
  (:meth:`_DotKernel.int_gemm`): two to eight times the multiply-adds of an f32 FMA per
  instruction.

A tile that runs past M or past the panel repeats its last row / column (computed, not
stored), so any M, N and K work.

SIMD: the vector ops are portable (LLVM vectorizes them for the host the ExecutionEngine
compiles for).  ``path="avx2"`` (and ``"vnni"``, which is avx2 plus the VNNI dot products of
the integer GEMM) additionally decodes f4 codes with a byte shuffle
(``llvm.x86.avx2.pshuf.b`` / ``llvm.x86.ssse3.pshuf.b.128``: one instruction maps 32 codes to
their integer values); on the one-row path, mxfp4's 32 codes take two byte shuffles to the
bf16 bytes of their integer values and in-lane unpacks into f32 lanes
(:meth:`_DotKernel.f4_bf16_units`: no conversion instruction, 25% fewer instructions per
block), their elements in :data:`F4_ORDER`, into which A's row is permuted once per unit;
on the 512-bit paths f4 codes in chunks of 16 (nvfp4's) take one f32 permute from the
constant table of their integer units instead (:data:`ONE_ROW_F4_PERM`);
``path="portable"`` decodes them arithmetically.  See :func:`host_paths`.

The decoding of narrow codes is docs/semantics.md sections 1-2's: normal codes
``(1.m) * 2^(e - bias)``, subnormal ``0.m * 2^(1 - bias)``, e4m3fn's NaN codes, e5m2's Inf
and NaN; e8m0 scale code c is 2^(c - 127) (c = 255 NaN).

**The range test.**  The f32 paths above meet docs/semantics.md section 6 where no value,
product or partial sum can fall below 2^-126 or overflow (and, for the one-row path's sums of
unscaled values, where A's values leave :attr:`DotSpec.headroom` bits of room).  Each kernel
comes with its range test, ``@<kernel>_range`` (same signature, :func:`declarations`), which a
caller runs once before the units: one pass over the scale codes and the plain sides'
exponent fields (:meth:`_DotKernel.range_function`: the test
:func:`mxlower.lowering.mx_math.lower_scaled_dot` makes around XLA's dot), storing the mode
into ``dims[4]``.  Where it fails, every unit runs the exact f64 contraction instead
(:meth:`_DotKernel.f64_unit`: values decoded exactly into f64, subnormal inputs from their
bits, products and sums in f64, rounded once to f32 with subnormal results kept) -- slow,
and only for data at the ends of the range, Inf or NaN.

Signature (all buffers one-dimensional ``memref<?xT>``)::

    @name(%a: memref<?xTA> [, %as: memref<?xi8>], %b: memref<?xTB> [, %bs: memref<?xi8>],
          %out: memref<?xf32>, %dims: memref<?xi64>, %u0: index, %u1: index)

``dims`` = [B, M, N, K, mode, mbw] (mode: 0 the f32 paths, else the f64 contraction; the
range test writes it; mbw: the rows of A per block of a packed GEMM's units, a multiple of
the path's :data:`MR_INT`, at most :data:`MB_INT`: the caller's choice); a side's scales only where it is MX; ``TA`` / ``TB`` is ``i8`` for codes (f4:
two per byte), else f32 / bf16 / f16.

Example::

    from mxlower.lowering import dot_kernels
    spec = dot_kernels.DotSpec("f32", "mxfp4_e2m1", rhs_block_size=32)
    print(dot_kernels.build(spec))
"""

from __future__ import annotations

import ctypes
import dataclasses
import fractions
import functools
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mxlower import diagnostics as diag
from mxlower import types
from mxlower.bindings import collect_ops, upstream
from mxlower.formats import FORMATS, WIDE_TYPES, MXFormat, get_datatype, last_axis_format
from mxlower.numbers import number
from mxlower.numbers import Datatype, SpecError

__all__ = ["ATTR", "EXACT_ACC", "NP", "NR_STREAM", "PARTS", "PATHS", "STREAM_M",
           "DotKernelError", "DotSpec", "build", "cpu_flags", "declaration", "declarations",
           "expand_declarations", "host_paths",
           "integer_shift", "kernel_side", "request_amx", "transpose_function",
           "unscaled_bits", "usable_paths"]

#: SIMD paths a kernel can be built for, best first (``portable`` runs everywhere; ``vnni``
#: is ``avx2`` plus the VNNI dot products of AVX512-VNNI (with AVX512VL) or AVX-VNNI, in
#: 256-bit vectors; ``avx512`` is ``vnni`` plus AVX512-BF16's dot products, the packed GEMMs
#: in 512-bit vectors; ``amx`` is ``avx512`` whose GEMMs of two MX sides with an f8 or an
#: e3m2 side run on AMX-BF16's tile products, :meth:`_DotKernel.amx_gemm`)
PATHS = ("amx", "avx512", "vnni", "avx2", "portable")
#: the paths that decode and multiply with x86 intrinsics
X86_PATHS = ("amx", "avx512", "vnni", "avx2")
#: the paths with the VNNI dot products
VNNI_PATHS = ("amx", "avx512", "vnni")
#: the paths with AVX-512 (BW, VL, VNNI, BF16): 512-bit packed GEMMs, bf16 dot products
AVX512_PATHS = ("amx", "avx512")
#: columns of B per work unit (the GEMM path's packed panel)
NP = 32
#: columns of K-major weights per work unit (:attr:`DotSpec.panel`)
KN_PANEL = 256
#: the largest M that takes the streaming path where A is MX (:attr:`DotSpec.stream_m`;
#: more rows: the GEMM paths)
STREAM_M = 16
#: per path, the largest M of plain rows (f32 and f16; bf16 off the 512-bit paths; f32 rows
#: there: :data:`F32_STREAM_M`) against MX weights that takes the streaming path
#: (:attr:`DotSpec.stream_m`: tiles of 8 rows, each a pass over the unit's panel of
#: weights), more rows the dequantize kernel + XLA's f32 dot:
#: at N = K = 4096 on a Zen 4, the 512-bit paths' f32 rows ran 17, 64, 256 rows 5.3-6.3x,
#: 2.3-3.1x, 1.3-1.4x faster than those (f16 rows 5-5.9x, 2-2.4x, 1-1.2x), 512 level, 1024
#: 1.6-2x slower; the 256-bit paths' (and the portable one's) 17, 64 rows 3-3.8x,
#: 1.2-1.7x, 128 level -- against XLA's dot on that host's AVX-512 (BENCHMARKS.md,
#: nineteenth session)
PLAIN_STREAM_M = {"amx": 256, "avx512": 256, "vnni": 64, "avx2": 64, "portable": 64}
#: the same for bf16 rows on the 512-bit paths' bf16 dot products (:data:`BF16_STREAM`),
#: more rows the packed GEMM (:data:`PLAIN_BF16_GEMM`): at N = K = 4096 on a Zen 4 the
#: streaming tiles ran 24-32 rows 0.7-1.5x (mostly 1.04-1.1x) as fast as the GEMM, 48 rows
#: 0.9-1.7x, 64 rows 0.9-1.1x, 80-1024 rows 0.57-0.97x (BENCHMARKS.md, twentieth session)
BF16_STREAM_M = 48
#: whether plain bf16 rows against MX weights (an even block size) take the 512-bit paths'
#: packed GEMM on bf16 dot products (:attr:`DotSpec.bf16_dot`, A's pairs read as stored)
#: past the streaming tiles' rows, rather than the dequantize kernel + XLA's f32 dot: 1.9-2.7x
#: faster at M = 1025 and 2048, N = K = 4096, on a Zen 4 (BENCHMARKS.md, twentieth session)
PLAIN_BF16_GEMM = True
#: whether the f32 GEMM path of plain f32 rows against MX weights takes the K-major
#: kernel's tiles on a transposed panel (:meth:`_DotKernel.kn_gemm_panel`: 8 rows x 32
#: columns, A's values broadcast) rather than the 6 x 2 tiles along K (:meth:`_DotKernel.tile`),
#: and (:func:`gemm_by_default`) on the 512-bit paths is a GEMM by default: at N = K = 4096
#: on a Zen 4 1.35x faster than the dequantize kernel + XLA's f32 dot at 512 rows, 1.2x at
#: 1024, 1.05-1.12x at 2048-4096 (BENCHMARKS.md, twenty-third session)
F32_KN_GEMM = True
#: the most f32 rows against MX weights that stream on the 512-bit paths where
#: :data:`F32_KN_GEMM` (more: that GEMM): at 24 rows the streaming tiles ran 1.15-2.3x as
#: fast as it, at 64 rows 0.9-1.2x, 128 rows 0.8-1.04x, 256 rows 0.7-0.93x (BENCHMARKS.md,
#: twenty-third session)
F32_STREAM_M = 128
#: rows x columns of the GEMM's register tile
MR, NR = 6, 2
#: rows of a streaming tile (from 3 rows of A on; one or two rows go one at a time)
MR_STREAM, MR_STREAM_EXACT = 8, 4
#: columns of the (not exact) streaming tiles of 3-4 rows whose decode yields a vector a chunk
#: from a table, or mxint8's magic numbers on the f32 FMAs (:meth:`_DotKernel.few_columns`);
#: the others take :data:`NR_STREAM_TILE` (one column had been every tile's: 1.2-1.6x slower
#: at M = 3, 4 than two; four against two: bf16 x mxfp4 / mxfp6 / nvfp4 1.04-1.26x, f32 x
#: nvfp4 / mxint8 1.04-1.26x, f32 x mxfp4 0.65-0.8x, bf16 x mxint8 0.9-0.99x, mxfp8
#: 0.84-1.03x, on a Zen 4) (BENCHMARKS.md, eighteenth session)
NR_FEW_TABLES = 4
#: columns of B one row of A streams at a time (one or two rows of A): one measured 7-25%
#: faster than two for every format at M = 1 and 2 (BENCHMARKS.md, fourth session)
NR_STREAM = 1
#: columns of B a tile of MR_STREAM rows streams at a time, per path: two where AVX-512's 32
#: vector registers hold the tile (each load of A feeds two FMAs: 10-30% faster at M = 8 on
#: a Zen 4 and 10-20% on a Sapphire Rapids), one where 16 do (two measured no faster or
#: slower on AVX2) (BENCHMARKS.md, third and sixth sessions)
NR_STREAM_TILE = {"amx": 2, "avx512": 2, "vnni": 1, "avx2": 1, "portable": 1}
#: columns of the tiles of 5-16 bf16 rows on bf16 dot products whose weights decode by a
#: table in chunks of 32 (:meth:`_DotKernel.table_decode`: mxfp4, mxfp6): three against
#: :data:`NR_STREAM_TILE`'s two at M = 8-16 on a Zen 4, four runs: mxfp4 1.03-1.13x (one run
#: 0.75x at M = 8), mxfp6 1.02-1.24x; nvfp4's chunks of 16 0.82-0.86x, keeping two; f32 rows
#: 0.63-0.9x with three (BENCHMARKS.md, twentieth session)
NR_STREAM_TILE_TABLES = 3
#: whether a path's streaming tiles (3-16 rows, the f32 paths) are software-pipelined
#: (:meth:`_DotKernel.piped_tile`): on the 512-bit paths, for every MX weight format (1.05-1.6x
#: faster at M = 8 on a Zen 4); the 256-bit paths measured no faster (their 16 vector
#: registers hold no second chunk) (BENCHMARKS.md, tenth session)
PIPELINED_STREAM = {"amx": True, "avx512": True, "vnni": False, "avx2": False, "portable": False}
#: how many of its tiles' column groups ahead a piped tile's chunk prefetches B's codes
PIPED_AHEAD = 1
#: how many steps ahead of the dot products a piped tile decodes B's chunks, per kind of
#: tile (f32 FMAs, bf16 dot products): two hide a decode chain longer than a step (one
#: measured up to 1.3x slower for mxfp8, three no faster than two, on a Zen 4)
PIPE_DEPTH = {"f32": 2, "bf16": 2}
#: columns of the piped tile of two rows (B read once: 1.5-2.3x faster than a row at a time,
#: which reads B twice, on a Zen 4) and of one row on bf16 dot products with a table or
#: placed-bits decode (f4: 1.15-1.4x, f6: 1.6x, f8: 1.4-1.5x, mxint8: 1.07x faster than the
#: one-row path; the other one-row kernels measured 10-20% slower piped and keep it)
#: (BENCHMARKS.md, tenth and eleventh sessions)
NR_PIPED_FEW = 4
#: columns of those tiles on the f32 FMAs with table decodes in chunks of 32 (each column
#: carries two 16-lane chunks a step: four columns spilled, erratically): f32 x mxfp4 1.3x
#: faster at M = 1, 0.95x at M = 2; f32 x mxfp6's two-row tables 1.45x; mxint8's two rows
#: measured 0.85-0.97x and keep four (BENCHMARKS.md, thirteenth session)
NR_PIPED_FEW_F32_32 = 2
#: whether the avx512 path's streaming tiles (3-16 rows) of bf16 activations run on bf16
#: dot products (:attr:`_DotKernel.bf_stream`)
BF16_STREAM = True
#: whether the avx512 path's streaming tiles of MX activations against MX weights (the pairs
#: off the exact path -- an f8 side, two block sizes -- and the exact ones that
#: :data:`EXACT_BF16` takes) decode A's few rows to bf16 once per
#: batch and run on bf16 dot products as bf16 rows do (:attr:`_DotKernel.a_bf16`): exact,
#: the values of every MX format having at most 8 significant bits and the range test
#: keeping them normal; mxfp8 x mxfp8 1.5x faster than on the f32 FMAs at M = 1, 2.6-2.7x at
#: M = 2, 1.75-2.2x at M = 8, on a Zen 4 (BENCHMARKS.md, fourteenth session)
MX_ROWS_BF16 = True
#: whether the avx512 path's streaming tiles of the exact pairs (both sides integer-unit
#: formats with one block size of 16 or 32: :attr:`DotSpec.exact`) run on bf16 dot products
#: too (:attr:`_DotKernel.exact_bf16`), A's rows decoded to bf16 as for :data:`MX_ROWS_BF16`:
#: each ``vdpbf16ps`` lane adds two exact products of one block, from zero, and the lanes are
#: added into f64 lanes at every step -- the same exact sums as the FMA tiles' integer block
#: sums, the same f64 accumulation (docs/semantics.md section 6: bit-exact whenever that f64
#: sum is exact); on a Zen 4 nvfp4 x nvfp4 2.0-2.3x faster at M = 1 to 16, mxfp4 x mxfp4
#: 1.4-2.05x, e2m3 x e2m3 1.5-2.3x, mxint8 x mxint8 1.1-1.3x (one row keeps the FMAs)
#: (BENCHMARKS.md, fourteenth session)
EXACT_BF16 = True
#: whether the packed GEMM of the word pairs (:attr:`DotSpec.word_dot`: an e3m2 side) forms
#: each block's exact sum on bf16 dot products on avx512 (:attr:`DotSpec.bf16_blocks`)
#: rather than ``vpdpwssd``: the same sums and roundings, one add per block and 16 columns
#: instead of a conversion, a multiply and an FMA
BF16_BLOCKS = True
#: whether the integer GEMM's block end forms the two blocks' factor (e8m0 sides: powers of
#: two, normal under the range test, as is their product) by an integer add of their bits
#: rather than a multiply: off the FMA pipes, which the dot products share on a Zen 4
#: (1.03-1.12x at 1024^3 and 2048^3; converting the block sums by a float's magic instead of
#: ``vcvtdq2ps`` measured level, 0.96-1.02x: not done)
BLOCK_END_EXPONENTS = True
#: whether those tiles add a step's two halves of lanes first where the step lies within one
#: block (k >= the step's 32 values: all but nvfp4), exactly, so that one conversion and one
#: f64 add take it, into half as many f64 lanes: 1.2-1.4x faster at M = 2 to 16 on a Zen 4
#: (two columns a tile then measured 0.67x: spills)
FOLD_EXACT = True
#: steps (of 32 values) that the exact pairs' bf16 tiles (:data:`EXACT_BF16`) sum in f32
#: lanes before adding them into their f64 lanes (at most: :attr:`_DotKernel.group_steps`),
#: where a run-time look at the group's scale codes shows every partial sum exact in f32
#: (:meth:`_DotKernel.group_spread`: the spread of the blocks' scale exponents within the
#: group, A's rows' and the tile's columns', no more than :meth:`_DotKernel.group_room`);
#: the other groups take a conversion and an f64 add per step as before.  The same exact
#: sums, added into the f64 lanes a group at a time (the group's two halves of lanes added
#: first, one (row, column) after another); such tiles also run two columns at a time from
#: three rows on.  0: every step into the f64 lanes
EXACT_GROUP = 8
#: the shortest group: a pair whose groups of EXACT_GROUP steps leave too little room takes
#: groups half as long (one more binade each time) down to this many steps, else none
EXACT_GROUP_MIN = 4
#: the shortest parts of a group that its spread sends past the group's room: a group of
#: EXACT_GROUP steps whose spread exceeds group_room(n) by one or two binades is summed in f32
#: lanes in parts of n / 2 or n / 4 steps (a part's spread is at most the group's), down to
#: this many, before it goes step by step: nvfp4 x nvfp4 1.14-1.37x faster where the blocks
#: lay up to 2^2 apart, e2m3 x e2m3 1.45-1.56x at M = 8 and 16 where up to 2^3, level on
#: normal data, on a Zen 4 (BENCHMARKS.md, sixteenth session)
EXACT_GROUP_PARTS = 2
#: the least room (binades of spread: :meth:`_DotKernel.group_room`) a pair's groups must
#: allow: groups of 8 steps for e2m1 x e2m1 (11), e2m1 x e2m3 (9), e2m1 x mxint8 (8), e2m3 x
#: e2m3 (7), e2m3 x mxint8 and e3m2 x e2m1 (6); of 4 for mxint8 x mxint8 (6); none for e3m2's
#: other pairs.  (mxint8 x mxint8 in groups of 8, room 5, measured 1.1-1.2x faster on normal
#: data, 0.82-0.86x where each block of 32 took a random power of two up to 2^3)
EXACT_GROUP_ROOM = 6
#: the same for the pairs with an E4M3-scaled side (nvfp4), whose scales' significands take
#: 8 bits of the room (15 x 15): nvfp4 x nvfp4 in groups of 8, room 4 -- on a Zen 4
#: 1.3-1.6x faster at M = 2, 2.2-2.8x at M = 8 and 16 on normal data (every group summed in
#: f32), 1.04-1.12x with each block of 32 times a random 2^0 or 2^1, level with up to 2^2
#: (in parts: :data:`EXACT_GROUP_PARTS`), 0.82-0.93x where the blocks lay up to 2^3 apart
#: or more (every group step by step) (BENCHMARKS.md, sixteenth session); one row (the
#: decode's GEMV) takes no groups of unfolded steps
EXACT_GROUP_ROOM_E4M3 = 4
#: whether the exact tiles whose steps hold two blocks (blocks of 16: nvfp4, e2m1 at k = 16;
#: 16 f64 lanes per row and column, not folded) sum groups too (the group's f32 lanes folded
#: into 8 of them as it is added), in tiles of two rows or more (see
#: :data:`EXACT_GROUP_ROOM_E4M3`)
EXACT_GROUP_UNFOLDED = True
#: whether the f8, f6 and mxint8 codes bound for bf16 dot products (the piped tiles of bf16
#: rows, where no table decode applies, and the bf16 GEMM's packing) are decoded by placing
#: their bits (:meth:`_DotKernel.placed_bits`: no conversion, no multiply): for mxfp8
#: weights 1.2-1.4x faster at M = 8, 1.2-1.6x at M = 1 and 2 (one row then runs the piped
#: tile), 1.2x for the mxfp8 GEMM at 2048^3; for mxint8 1.28x at M = 2, 1.07x at M = 1, level
#: at M = 8, on a Zen 4; the f32 FMA tiles keep their decode (the same bits widened measured
#: 0.9-1.1x) (BENCHMARKS.md, eleventh session)
PLACED_DECODE = True
#: whether the f32 FMA tiles (plain f32 rows, 2-16) decode e4m3 weights' codes the same
#: way, the bf16 bits widened by a shift (:meth:`_DotKernel.placed_f32`): the f16 decode's
#: two multiplies a vector (its rebias and the block's factor) shared the FMA pipes on a
#: Zen 4 (1.04-1.28x at M = 2 to 16; e5m2, one multiply, 0.85-0.98x, and mxint8, 0.68-0.77x
#: at M = 2, keep theirs) (BENCHMARKS.md, seventeenth session)
PLACED_F32 = True
#: whether the f32 FMA tiles (plain f32 rows, 2-16) decode B's integer units (mxint8's
#: codes, f6 codes' units from a word table) scaled by the block's factor 2^e by a magic
#: number (:meth:`_DotKernel.magic_chunk`): the units' low bits put under the exponent 23 + e
#: by an xor, then 2^(23 + e) (and the offset) subtracted -- an integer op and an f32
#: subtract (Zen 4's add pipes) where the conversion and the factor's multiply shared the
#: FMA pipes with the tile's FMAs
MAGIC_F32 = True
#: the largest block factor's exponent :meth:`_DotKernel.magic_chunk` takes (2^(23 + e)
#: must be a finite f32); the range test sends larger ones to the f64 contraction
MAGIC_TOP = 127 - 23
#: whether the piped tiles' decodes that scale by a power of two (placed bits; the f4 and f6
#: tables too where :data:`SCALE_TABLES` is off) read from the panel's scratch, instead of
#: each block's f32 factor, the word that adding to their bits multiplies them by it
#: (:meth:`_DotKernel.factor_word`, formed once per block by :meth:`prepare_factors`): the
#: table then costs an integer add, no multiply and no conversion on the FMA pipes (bf16 x
#: mxfp4 / mxfp6 / mxfp8 1.1x faster at M = 2, 1.01-1.03x at M = 8 on a Zen 4; see
#: :meth:`_DotKernel.word_bias` for the kernels that keep f32 factors) (BENCHMARKS.md,
#: twelfth session)
FACTOR_WORDS = True
#: whether the piped tiles' table decodes (f4 codes, f6 codes on bf16 dot products:
#: :meth:`_DotKernel.table_decode`) take each block's table of scaled values as the row of a
#: constant table of every scale code's products (:func:`scale_table`; an E4M3 or e8m0 scale
#: times an f4 / f6 value is exact in bf16 and in f32 wherever the range test lets the f32
#: paths run) that the block's scale byte, read as stored, selects: no factor, no multiply,
#: conversion or exponent word per block, and no pass over the panel's scales before its
#: tiles (:meth:`_DotKernel.table_row`).  On a Zen 4, one core, weights warm: bf16 x nvfp4
#: 1.5x faster at M = 1, 1.4x at M = 2, 1.2-1.3x at M = 8; bf16 x mxfp6 1.55-1.65x at M = 1
#: and 2, 1.05x at M = 8; bf16 x mxfp4 1.1x at M = 1 and 2, 1.02x at M = 8; f32 x nvfp4 /
#: mxfp4 1.12-1.15x at M = 2, level to 1.06x at M = 8 (BENCHMARKS.md, thirteenth session)
SCALE_TABLES = True
#: whether the piped tile of two f32 rows decodes f6 codes from their block's row of
#: :func:`scale_table` (f32 values) by two-table permutes (:meth:`_DotKernel.f6_f32_chunk`)
#: instead of converting integer units and multiplying them by the factor on the FMA pipes:
#: f32 x mxfp6 1.45-1.5x faster at M = 2; tiles of more rows keep the arithmetic decode
#: (0.93-1.0x at M = 8), one row the one-row path (0.82x piped) (one core, weights warm, on
#: a Zen 4; BENCHMARKS.md, thirteenth session)
F6_F32_TABLES = True
#: whether one row of f32 activations runs the piped tile (:meth:`_DotKernel.piped_tile`,
#: as one row of bf16 ones does) where B's f4 codes decode by permutes from the block's
#: table (:meth:`_DotKernel.table_decode`, :data:`SCALE_TABLES`), instead of the one-row
#: path's sums of unscaled values per block: f32 x nvfp4 1.09-1.10x faster at M = 1, f32 x
#: mxfp4 1.05x (1.3x with two columns, :data:`NR_PIPED_FEW_F32_32`) (one core, weights
#: warm, on a Zen 4; BENCHMARKS.md, thirteenth session)
ONE_ROW_TABLES_PIPED = True
#: whether the one-row path decodes f4 codes in chunks of 16 (nvfp4, and mxfp4 at block size
#: 16) on the 512-bit paths by one f32 permute from the constant table of their integer units
#: (:attr:`_DotKernel.f4_perm`): 1.07-1.15x faster at M = 1 on a Zen 4; mxfp4's chunks of 32
#: keep avx2's byte shuffles (the permutes, zmm operations that a Zen 4 splits in two,
#: measured no faster there) (BENCHMARKS.md, eleventh session)
ONE_ROW_F4_PERM = True
#: whether the one-row path (f32 / f16 rows one at a time against MX columns, each block's
#: sum of unscaled values) runs 16 lanes (zmm) per FMA on the 512-bit paths: half the FMAs
#: and a chain of two per 32 values, not four: 1.1x faster for mxfp8, 1.15x for mxfp6, 1.3x
#: for mxint8 at M = 1 on a Zen 4; mxfp4's chunks of 32 (avx2's byte shuffles, 8-lane
#: halves) measured 0.8x and keep 8 lanes (BENCHMARKS.md, twelfth session)
ONE_ROW_ZMM = True
#: f32 lanes of one accumulator
LANES = 8
#: the order in which the avx2 one-row path's f4 decode (:meth:`_DotKernel.f4_bf16_units`)
#: yields a chunk of 32 elements, and A's chunk is permuted to match: within each group of
#: eight, the even elements then the odd ones
F4_ORDER = [g * 8 + j for g in range(4) for j in (0, 2, 4, 6, 1, 3, 5, 7)]
#: whether each chunk of B's codes read by value (the streaming path, the f32 GEMM's panel)
#: prefetches the same chunk of B's next row: the GEMV streams a panel's rows one after the
#: other, and the prefetch (one row ahead; two measured no better) cut its median time by
#: 14-22% for mxfp4 and mxint8 weights on a Zen 4, cache-cold or warm (BENCHMARKS.md,
#: sixth session); x86 ignores a prefetch past the buffer's end (a prefetch never faults)
PREFETCH_NEXT_ROW = True
#: how the exact block sums are accumulated: "f64" or "f32"
EXACT_ACC = "f64"
#: vectors of columns of a tile of the packed GEMM (:attr:`DotSpec.packed_gemm`: one
#: 32-byte vector of B holds 16 columns' pair of bytes or 8 columns' pair of i16 or quad of
#: bytes; a 64-byte one, avx512's, 16 columns' i32 groups)
NV_INT = 2
#: rows of A of a tile of the packed GEMM, per path (BENCHMARKS.md, sixth session): 6 on
#: vnni (its dot products need no second register: 6 x 2 accumulators and three operands
#: fit AVX-VNNI's 16 vector registers; 10-20% faster than 4 on a Zen 4), 4 on avx512 (zmm:
#: 20-25% faster than 6 for mxfp4 on a Sapphire Rapids, even on a Zen 4; amx: avx512's,
#: for the byte dot products it keeps; its AMX GEMM has its own, :attr:`DotSpec.gemm_rows`)
MR_INT = {"avx2": 4, "vnni": 6, "avx512": 4, "amx": 4, "portable": 4}
#: the most rows of A packed at a time by the packed GEMM (a multiple of every MR_INT): a
#: call's scratch for A is at most MB_INT x K values, whatever M (B's panels are packed once
#: per block; the caller picks the block's rows, ``dims[5]``)
MB_INT = 1056
#: the AMX GEMM's tiles: AMX_ROWS rows of AMX_K bf16 values (64 bytes) for A and B (B's
#: rows are pairs of K positions of 16 columns), AMX_ROWS x 16 f32 for the results; a tile
#: of the GEMM is 2 x 2 result tiles (32 rows of A against the panel's NP = 32 columns), so
#: the eight tile registers hold two of A, two of B and the four results
AMX_ROWS, AMX_K = 16, 32
#: K steps (of AMX_K) between a result tile's loads and stores (the tiles live in memory
#: across steps: LLVM keeps no AMX tile across a loop's iterations): 8 measured faster than
#: 2, 4 and 16 in 7 of 9 GEMMs on a 16-core Sapphire Rapids (BENCHMARKS.md, ninth session)
AMX_STEPS = 8


def integer_shift(fmt: MXFormat) -> int | None:
    """``s`` such that every element of ``fmt`` times 2^s is an integer small enough for the
    exact block sums (e2m1: 1, e2m3: 3, e3m2: 4, mxint8: 6), or None (the f8 formats)."""
    if fmt.is_int:
        return 6
    t = fmt.element_type
    if t is None or t.bits > 6:
        return None
    return t.bias + t.man_bits - 1


def code_units(fmt: MXFormat, codes: Sequence[int]) -> list[float]:
    """The values of ``fmt``'s element ``codes`` times 2^integer_shift (small integers for
    the integer-unit formats; both zeros as +0): the tables the x86 decodes permute."""
    spec, shift = number(fmt.element), integer_shift(fmt) or 0
    return [float(spec.value_of(c)) * 2 ** shift + 0.0 for c in codes]


def unit_max(fmt: MXFormat) -> int:
    """The largest magnitude of ``fmt``'s integer units (:func:`integer_shift`)."""
    if fmt.is_int:
        return 128
    return int(fmt.element_type.max * 2.0 ** integer_shift(fmt))


def unscaled_bits(fmt: MXFormat, block_size: int) -> int:
    """``h`` such that a block's sum of ``fmt``'s unscaled values (integer units, or f8
    values) times values of magnitude at most 2^t is at most 2^(t + h): the kernel's
    one-row streaming path forms such sums in f32 before applying the block's factor, so the
    other side's values must stay below 2^(127 - h) there (mx_math's run-time test)."""
    t = fmt.element_type
    shift = integer_shift(fmt)
    top = 128 if fmt.is_int else t.max * 2.0 ** (shift or 0)
    return math.ceil(math.log2(top * block_size))


@functools.cache
def _cpuinfo(field: str) -> str:
    """The first ``field`` line's value in ``/proc/cpuinfo`` (empty where it cannot be
    read)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_flags() -> list[str]:
    """This host's CPU feature flags (``/proc/cpuinfo``; none where it cannot be read)."""
    return _cpuinfo("flags").split()


def cpu_vendor() -> str:
    """This host's CPU vendor (``/proc/cpuinfo``'s ``vendor_id``: ``GenuineIntel``,
    ``AuthenticAMD``; empty where it cannot be read)."""
    return _cpuinfo("vendor_id")


#: CPU vendors whose avx512 path's bf16 GEMM beats the dequantize kernels + XLA's f32 dot,
#: so that GEMMs of the bf16 dot products take the kernel by default: measured 1.4-1.5x
#: XLA's dot on a Zen 4 (whose FMA units are 256 bits wide), 0.4-0.6x on a Sapphire Rapids
#: (whose two 512-bit FMA units XLA's dot keeps busy) (BENCHMARKS.md, sixth session)
BF16_GEMM_VENDORS = ("AuthenticAMD",)


def gemm_by_default(spec: DotSpec, vendor: str) -> bool:
    """Whether a GEMM (more rows on both sides than stream, :attr:`DotSpec.stream_m`) of
    ``spec`` takes the kernel without being asked: its integer dot products and AMX tiles
    everywhere, its bf16 dot products -- two MX sides, or plain bf16 rows -- on
    :data:`BF16_GEMM_VENDORS`' CPUs, plain f32 rows' transposed panels on the 512-bit paths
    (:attr:`DotSpec.f32_kn_gemm`); its other f32 GEMM paths never (slower than the
    dequantize kernels + XLA's f32 dot)."""
    return (spec.int_dot or spec.amx_dot or (spec.bf16_dot and vendor in BF16_GEMM_VENDORS)
            or spec.f32_kn_gemm)


def host_paths(features: Sequence[str], amx_granted: bool = True) -> list[str]:
    """The paths a host with CPU ``features`` (``/proc/cpuinfo`` flag names) runs, best
    first: ``amx`` where it has what ``avx512`` needs and AMX-TILE and AMX-BF16, and the
    operating system grants the process AMX's tile state (``amx_granted``:
    :func:`request_amx`), ``avx512`` where it has AVX2 and AVX-512 with BW, VL, VNNI and
    BF16, ``vnni`` where it has AVX2 and the 256-bit VNNI forms (``avx512_vnni`` with
    ``avx512vl``, or ``avx_vnni``), ``avx2`` where it has AVX2, ``portable`` everywhere."""
    f = set(features)
    paths = []
    if "avx2" in f:
        if {"avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16"} <= f:
            if {"amx_tile", "amx_bf16"} <= f and amx_granted:
                paths.append("amx")
            paths.append("avx512")
        if {"avx512_vnni", "avx512vl"} <= f or "avx_vnni" in f:
            paths.append("vnni")
        paths.append("avx2")
    return paths + ["portable"]


#: Linux's arch_prctl: its number on x86-64, the request for a permission, the tile data
ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 158, 0x1023, 18


@functools.cache
def request_amx() -> bool:
    """Asks Linux for this process's permission to use AMX's tile data (``arch_prctl(
    ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, once; Linux 5.16 and later): whether it was
    granted.  Without it the first tile instruction kills the process, so the ``amx`` path
    is offered only where this returns True (:func:`usable_paths`)."""
    if "amx_tile" not in cpu_flags():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


def usable_paths() -> list[str]:
    """The paths this host and process run, best first (:func:`host_paths` of
    :func:`cpu_flags`, the ``amx`` path where :func:`request_amx` is granted)."""
    return host_paths(cpu_flags(), request_amx())


def _unit_range(fmt: MXFormat) -> tuple[int, int]:
    """The least and the largest of ``fmt``'s integer units (mxint8: its codes)."""
    if fmt.is_int:
        return -128, 127
    u = unit_max(fmt)
    return -u, u


def kernel_side(v: str | Datatype, what: str = "side") -> tuple[str, int | None]:
    """``(name, block size)`` of a dot kernel's side given as an MX format name or a plain
    type (f32, bf16, f16; block size None), or as a datatype -- a
    :class:`~mxlower.numbers.Datatype` or a datatype code (``"e4m3fn:e8m0_t32"``, a
    predefined name such as ``"bfp16"``): an MX format's (:func:`mxlower.formats.format_of`,
    its block size the tiles'; nvfp4's tensor level ``_gf32`` is the caller's global scale,
    applied after the kernel as for ``"nvfp4"``), or an unscaled f32, bf16 or f16.  The
    kernel's sides are ``[B, rows, K]`` with the blocks along K, so a datatype's tiles run
    along the last dimension (no ``dY`` but ``d-1``).  ValueError otherwise."""
    if isinstance(v, str) and (v in FORMATS or v in WIDE_TYPES):
        return v, None
    try:
        dt = get_datatype(v)
    except (SpecError, TypeError, AttributeError) as err:
        raise ValueError(f"dot kernel: {what} {v!r} is neither an MX format "
                         f"({', '.join(FORMATS)}), f32, bf16 or f16, nor a datatype ({err})") \
            from None
    if dt.scale is None and dt.number.mlir in WIDE_TYPES:
        return dt.number.mlir, None
    try:
        fmt, k = last_axis_format(dt, "the kernel's sides are [B, rows, K] with the blocks "
                                      "along K, the last dimension (a scale spec without 'dY')")
    except ValueError as err:
        raise ValueError(f"dot kernel: {what} {err}") from None
    return fmt.name, k


@dataclasses.dataclass(frozen=True)
class DotSpec:
    """One dot kernel.  ``lhs`` / ``rhs``: an MX format name or a plain type (f32, bf16,
    f16), or a datatype (:func:`kernel_side`: a :class:`~mxlower.numbers.Datatype` or a code
    such as ``"e2m1fo:e8m0_t32"``, which gives its block size); at least one side is MX.
    The block sizes default to the formats'.

    The fields are canonical, whichever spelling made the spec: each side the format's name
    (or the plain type), each block size None where it is the format's (and on a plain side),
    so the specs of one kernel are equal, hash alike and have one :attr:`name`."""

    lhs: str
    rhs: str
    lhs_block_size: int | None = None
    rhs_block_size: int | None = None
    path: str = "portable"
    #: B held K-major, ``[B, K, N]`` (scales ``[B, K / k, N]``): the layout of weights
    #: ``[K, N]`` blocked along K, read as stored by :class:`_KnKernel` against a plain A
    #: side (:attr:`kn_kernel`); against an MX A side the handler first transposes B's codes
    #: and scales (:attr:`transposes_b`) for the ``[N, K]`` kernel of the MX pair
    rhs_kn: bool = False
    #: K-major B against plain rows copied to ``[B, N, K]`` by the handler too, for the
    #: ``[N, K]`` kernel (:attr:`transposes_b`; rows many enough that its GEMM outruns the
    #: K-major kernel's tiles); implied (False) against MX rows
    rhs_copy: bool = False

    def __post_init__(self) -> None:
        for side in ("lhs", "rhs"):
            name, dk = kernel_side(getattr(self, side), side)
            given = getattr(self, f"{side}_block_size")
            if dk is not None and given is not None and given != dk:
                raise ValueError(f"dot kernel: {side} datatype {getattr(self, side)!r} has "
                                 f"blocks of {dk}, but {side}_block_size is {given}")
            k = dk if given is None else given
            if name not in FORMATS or k == FORMATS[name].block_size:
                k = None
            object.__setattr__(self, side, name)
            object.__setattr__(self, f"{side}_block_size", k)
        for side in ("lhs", "rhs"):
            v = getattr(self, side)
            k = self.k(side)
            if v in FORMATS:
                if k <= 0:
                    raise ValueError(f"dot kernel: {side} block size must be positive, got {k}")
                if FORMATS[v].bits == 4 and k % 2:
                    raise ValueError(f"dot kernel: packed f4 elements need an even block size, "
                                     f"got {k}")
        if self.lhs in WIDE_TYPES and self.rhs in WIDE_TYPES:
            raise ValueError("dot kernel: at least one side must be an MX format")
        if self.rhs_kn and self.rhs in WIDE_TYPES:
            raise ValueError("dot kernel: a K-major rhs (rhs_layout = \"kn\") must be MX")
        if self.rhs_copy and not self.rhs_kn:
            raise ValueError("dot kernel: only a K-major rhs is copied (rhs_layout = "
                             "\"kn_copy\")")
        if self.lhs not in WIDE_TYPES:  # (MX rows: the copy is implied)
            object.__setattr__(self, "rhs_copy", False)
        if self.path not in PATHS:
            raise ValueError(f"dot kernel: unknown path {self.path!r} (known: "
                             f"{', '.join(PATHS)})")

    @classmethod
    def from_name(cls, name: str) -> DotSpec:
        """The spec whose :attr:`name` is ``name`` (ValueError if none is)."""
        rest = name[len("mxlower_dot_"):] if name.startswith("mxlower_dot_") else None
        for path in PATHS:
            if rest is None or not rest.endswith("_" + path):
                continue
            body = rest[:-len(path) - 1]
            copy = body.endswith("_knc")
            kn = copy or body.endswith("_kn")
            body = body[:-4] if copy else body[:-3] if kn else body
            for i, ch in enumerate(body):
                if ch != "_":
                    continue
                sides = [_side_of_name(body[:i]), _side_of_name(body[i + 1:])]
                if None in sides:
                    continue
                (lhs, kl), (rhs, kr) = sides
                try:
                    spec = cls(lhs, rhs, kl, kr, path, kn, copy)
                except ValueError:
                    continue
                if spec.name == name:
                    return spec
        raise ValueError(f"{name!r} is not the name of an mxlower dot kernel")

    def fmt(self, side: str) -> MXFormat | None:
        return FORMATS.get(getattr(self, side))

    def k(self, side: str) -> int:
        f = self.fmt(side)
        if f is None:
            return 0
        return getattr(self, f"{side}_block_size") or f.block_size

    @property
    def chunk(self) -> int:
        """Values decoded at a time: divides each MX side's block size, at most 32."""
        c = 32
        for side in ("lhs", "rhs"):
            if self.fmt(side) is not None:
                c = math.gcd(c, self.k(side))
        return c

    @property
    def lanes(self) -> int:
        return math.gcd(self.chunk, LANES)

    @property
    def blockwise(self) -> bool:
        """Whether the one-row streaming path sums each block of B's *unscaled* values times
        A's before applying the block's factor (B MX, the sums not exact ones): then A's
        values need :func:`unscaled_bits` of room below f32's range."""
        return self.fmt("rhs") is not None and not self.exact

    @property
    def headroom(self) -> int:
        """Bits by which the kernel's sums can exceed A's largest magnitude: the one-row
        streaming path sums each block of B's unscaled values times A's before applying the
        block's factor (:attr:`blockwise`, :func:`unscaled_bits`), so the range test
        (:meth:`_DotKernel.range_function`) wants A's values that far below f32's range;
        other paths form no such sums (0)."""
        return unscaled_bits(self.fmt("rhs"), self.k("rhs")) if self.blockwise else 0

    @property
    def exact(self) -> bool:
        """Whether block sums are formed exactly from integer units (both sides integer-unit
        formats with one block size)."""
        fa, fb = self.fmt("lhs"), self.fmt("rhs")
        return (fa is not None and fb is not None and self.k("lhs") == self.k("rhs")
                and integer_shift(fa) is not None and integer_shift(fb) is not None)

    @property
    def byte_dot(self) -> bool:
        """Whether the GEMM path forms each block's sum from byte products, A's integer units
        offset by ``o`` (:attr:`byte_offset`) to unsigned bytes, B's as signed bytes, and
        the block's sum corrected by -o x (B's block sum) (an :attr:`exact` kernel):

        * path ``avx2``: ``vpmaddubsw`` (pairs of u8 x s8 products summed into i16),
          accumulated in wrapping i16 lanes, so exact where a pair of products fits i16 (no
          saturation) and the block's true sum does (k x max|a| x max|b| < 2^15): e2m1 /
          nvfp4 with each other up to k = 226, e2m1 with e2m3 up to k = 45;
        * paths ``vnni`` and ``avx512``: ``vpdpbusd`` (quads of u8 x s8 products summed into i32, no
          saturation), exact for every pairing of e2m1, nvfp4, e2m3 and mxint8 whose block
          size is a multiple of 4 and whose sums convert to f32 exactly (k x max|a| x
          max|b| < 2^24)."""
        if self.path not in X86_PATHS or not self.exact or self.amx_dot:
            return False
        (alo, ahi), (blo, bhi) = (_unit_range(self.fmt(side)) for side in ("lhs", "rhs"))
        k = self.k("lhs")
        ua, ub = unit_max(self.fmt("lhs")), unit_max(self.fmt("rhs"))
        if ahi - alo > 255 or blo < -128 or bhi > 127:
            return False
        if self.path in VNNI_PATHS:
            return k % 4 == 0 and k * ua * ub < 2 ** 24
        if self.fmt("lhs").is_int or self.fmt("rhs").is_int:
            return False
        return 2 * (2 * ua) * ub < 2 ** 15 and k * ua * ub < 2 ** 15 and k % 2 == 0

    @property
    def quad_dot(self) -> bool:
        """Whether the byte products come in quads (``vpdpbusd``, paths ``vnni`` and
        ``avx512``) rather than pairs (``vpmaddubsw``)."""
        return self.byte_dot and self.path in VNNI_PATHS

    @property
    def byte_offset(self) -> int:
        """``o``: what A's integer units are offset by to unsigned bytes (:attr:`byte_dot`;
        0 without it)."""
        return -_unit_range(self.fmt("lhs"))[0] if self.byte_dot else 0

    @property
    def word_dot(self) -> bool:
        """Whether the GEMM path forms each block's sum from word products (an :attr:`exact`
        kernel without :attr:`byte_dot`): both sides' integer units as i16, pairs of
        products summed into i32 (path ``avx2``: ``vpmaddwd`` and an add; ``vnni`` and
        ``avx512``: ``vpdpwssd``), exact, and converted to f32 exactly where k x max|a| x max|b| <
        2^24 (every pairing of e2m1, e2m3, e3m2, mxint8 at k = 32; e3m2 x e3m2 up to k =
        83)."""
        if self.path not in X86_PATHS or not self.exact or self.byte_dot or self.amx_dot:
            return False
        ua, ub = unit_max(self.fmt("lhs")), unit_max(self.fmt("rhs"))
        return self.k("lhs") * ua * ub < 2 ** 24 and self.k("lhs") % 2 == 0

    @property
    def bf16_blocks(self) -> bool:
        """Whether the word pairs' packed GEMM (:attr:`word_dot`) runs on bf16 dot products
        (path ``avx512``, :data:`BF16_BLOCKS`): both sides' scaled values (integer units
        times the block's factor) as bf16, exact (at most 8 significant bits, normal under
        the range test), one ``vdpbf16ps`` per pair of K positions into f32 accumulators
        that start each block at zero: every partial sum a multiple of the two blocks'
        factors below 2^24 of it (k x max|a| x max|b| < 2^24), so the block's sum is
        exact -- the i32 sum times the two factors -- and one add takes it into the result
        lanes: the word dot products' sums and roundings."""
        return BF16_BLOCKS and self.path == "avx512" and self.word_dot

    @property
    def int_dot(self) -> bool:
        """Whether the GEMM path runs on integer dot products (:attr:`byte_dot`,
        :attr:`word_dot`)."""
        return self.byte_dot or self.word_dot

    @property
    def bf16_dot(self) -> bool:
        """Whether the GEMM path runs on bf16 dot products (path ``avx512``:
        ``vdpbf16ps``, pairs of bf16 products added into f32 lanes): both sides MX with one
        (even) block size and no integer dot products (an f8 side), or plain bf16 rows of A
        against MX weights of an even block size (:data:`PLAIN_BF16_GEMM`: A's pairs read
        as stored, each bf16 value times an MX value exact in f32).  Every MX element's
        scaled value (a narrow value times a power of two, or nvfp4's E4M3 scale) is exact
        in bf16 where the range test passes (no value below 2^-126) and so is every product
        of two in f32; they are summed in f32 over K (rounded, as XLA's
        f32 dot of the dequantized operands does): the f32 paths' contract (section 6),
        under the same range test."""
        if self.path not in AVX512_PATHS or self.fmt("rhs") is None or self.k("rhs") % 2:
            return False
        if self.lhs == "bf16":  # plain bf16 rows, read as stored (:data:`PLAIN_BF16_GEMM`)
            return PLAIN_BF16_GEMM and not self.kn_kernel
        return (self.fmt("lhs") is not None and self.k("lhs") == self.k("rhs")
                and not self.int_dot)

    @property
    def amx_dot(self) -> bool:
        """Whether the GEMM path runs on AMX tiles (path ``amx``: ``tdpbf16ps``, 16 x 16 f32
        results each taking 16 x 32 bf16 products in pairs): both sides MX with one (even)
        block size, as :attr:`bf16_dot`'s scaled values (exact in bf16, exact products, sums
        in f32 over K; :meth:`_DotKernel.amx_gemm`), except the pairs of avx512's byte dot
        products (e2m1, nvfp4, e2m3 and mxint8 with each other), which keep them on amx:
        their exact block sums (one rounding per block, not per pair of products) measured
        as fast as the tiles at 1024^3 and 2048^3 on a Sapphire Rapids (BENCHMARKS.md,
        ninth session).  The f8 pairs and e3m2's (word dot products) take the tiles."""
        return (self.path == "amx" and self.fmt("lhs") is not None
                and self.fmt("rhs") is not None and self.k("lhs") == self.k("rhs")
                and self.k("lhs") % 2 == 0
                and not dataclasses.replace(self, path="avx512").byte_dot)

    @property
    def gemm_rows(self) -> int:
        """Rows of A per tile of the packed GEMM: two AMX tiles' (:attr:`amx_dot`), else the
        path's :data:`MR_INT`."""
        return 2 * AMX_ROWS if self.amx_dot else MR_INT[self.path]

    @property
    def kn_kernel(self) -> bool:
        """Whether the K-major kernel (:class:`_KnKernel`) runs: B held K-major
        (:attr:`rhs_kn`) against plain rows of A, read as stored (not :attr:`rhs_copy`)."""
        return self.rhs_kn and self.lhs in WIDE_TYPES and not self.rhs_copy

    @property
    def transposes_b(self) -> bool:
        """Whether the handler transposes B first: B held K-major (:attr:`rhs_kn`) against
        MX rows of A (or plain ones, :attr:`rhs_copy`), its codes and scales copied to ``[B,
        N, K]`` and ``[B, N, K / k]`` (:func:`transpose_function`, on XLA's threads) for the
        ``[N, K]`` kernel (:attr:`nk`: the same kernel, so the same bits as weights held
        ``[N, K]``)."""
        return self.rhs_kn and (self.lhs not in WIDE_TYPES or self.rhs_copy)

    @property
    def nk(self) -> DotSpec:
        """This kernel with B held ``[B, N, K]`` (what :attr:`transposes_b` runs)."""
        return dataclasses.replace(self, rhs_kn=False, rhs_copy=False)

    @property
    def panel(self) -> int:
        """Columns of B per work unit: :data:`NP`, or :data:`KN_PANEL` for the K-major
        kernel (:attr:`kn_kernel`: wide rows of their codes per visit of a row of K)."""
        return KN_PANEL if self.kn_kernel else NP

    @property
    def stream_m(self) -> int:
        """The most rows of A (M) that take the streaming path, more the GEMM paths: plain
        rows against MX weights stream up to the path's :data:`PLAIN_STREAM_M` rows
        (:data:`BF16_STREAM_M` bf16 rows on the 512-bit paths' bf16 dot products, chunks of
        8 values and more), MX rows up to :data:`STREAM_M`; the K-major kernel
        (:attr:`kn_kernel`) streams every row (``sys.maxsize``)."""
        if self.kn_kernel:
            return sys.maxsize
        if self.fmt("lhs") is not None or self.fmt("rhs") is None:
            return STREAM_M
        if self.bf16_stream():
            return BF16_STREAM_M
        if self.f32_kn_gemm:
            return F32_STREAM_M
        return PLAIN_STREAM_M[self.path]

    @property
    def f32_kn_gemm(self) -> bool:
        """Whether plain f32 rows against MX weights on a 512-bit path take the transposed
        panel's f32 GEMM (:data:`F32_KN_GEMM`) past :data:`F32_STREAM_M` rows, by default."""
        return (F32_KN_GEMM and self.lhs == "f32" and self.fmt("rhs") is not None
                and not self.kn_kernel and self.path in AVX512_PATHS)

    def bf16_stream(self, mx_rows: bool = False) -> bool:
        """Whether the streaming tiles run on bf16 dot products (:data:`BF16_STREAM`, the
        512-bit paths): bf16 rows -- or, ``mx_rows``, MX rows decoded to bf16 -- against MX
        weights, in chunks of 8 values and more."""
        return (BF16_STREAM and self.path in AVX512_PATHS
                and (self.lhs == "bf16" or mx_rows) and self.fmt("rhs") is not None
                and self.chunk >= 8)

    @property
    def packed_gemm(self) -> bool:
        """Whether the GEMM path packs both sides for dot-product instructions
        (:attr:`int_dot` or :attr:`bf16_dot`: :meth:`_DotKernel.int_gemm`)."""
        return self.int_dot or self.bf16_dot

    @property
    def name(self) -> str:
        parts = ["mxlower", "dot"]
        for side in ("lhs", "rhs"):
            v = getattr(self, side)
            parts.append(v if v in WIDE_TYPES else f"{v}k{self.k(side)}")
        if self.rhs_kn:
            parts.append("knc" if self.rhs_copy else "kn")
        parts.append(self.path)
        return "_".join(parts)

    def storage(self, side: str) -> tuple[np.dtype, np.dtype | None]:
        """(element dtype, scale dtype or None) of a side's buffers, as XLA holds them (f6:
        uint8 codes)."""
        f = self.fmt(side)
        if f is None:
            return types.dtype(getattr(self, side)), None
        t = f.element_type
        e = np.dtype(np.uint8) if t is not None and t.bits == 6 else f.element_dtype
        return e, f.scale_dtype


def _side_of_name(part: str) -> tuple[str, int | None] | None:
    if part in WIDE_TYPES:
        return part, None
    fmt, k, digits = part.rpartition("k")
    if k and fmt in FORMATS and digits.isdigit():  # the format's own block size as None
        return fmt, (None if int(digits) == FORMATS[fmt].block_size else int(digits))
    return None


# ============================================================================ the emitter


class _Text:
    """Fresh SSA names and lines of MLIR text."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.indent = 2
        self.consts: dict[tuple[str, str], str] = {}

    def op(self, text: str) -> str:
        self.n += 1
        r = f"%t{self.n}"
        self.lines.append(" " * self.indent + text.format(r=r))
        return r

    def do(self, text: str) -> None:
        self.lines.append(" " * self.indent + text)

    def c(self, v: int | float, t: str = "index") -> str:
        if t.startswith("vector<"):
            inner = t[t.rindex("x") + 1:-1]
            lit = _lit(v, inner)
            return self.op(f"{{r}} = arith.constant dense<{lit}> : {t}")
        return self.op(f"{{r}} = arith.constant {_lit(v, t)} : {t}")

    def for_(self, lo: str, hi: str, step: str, inits: Sequence[tuple[str, str]],
             body: Callable[[str, list[str]], list[str]]) -> list[str]:
        """``scf.for`` with iter_args ``inits`` ((value, type)); ``body(iv, args)`` returns
        the yielded values; returns the loop's results."""
        self.n += 1
        tag = self.n
        iv = f"%i{tag}"
        args = [f"%a{tag}_{j}" for j in range(len(inits))]
        res = f"%r{tag}"
        if inits:
            it = ", ".join(f"{a} = {v}" for a, (v, _) in zip(args, inits))
            ts = ", ".join(t for _, t in inits)
            self.do(f"{res}:{len(inits)} = scf.for {iv} = {lo} to {hi} step {step} "
                    f"iter_args({it}) -> ({ts}) {{")
        else:
            self.do(f"scf.for {iv} = {lo} to {hi} step {step} {{")
        self.indent += 2
        out = body(iv, args)
        if inits:
            self.do(f"scf.yield {', '.join(out)} : {', '.join(t for _, t in inits)}")
        self.indent -= 2
        self.do("}")
        return [f"{res}#{j}" for j in range(len(inits))]

    def for_chunks(self, hi: str, n: int, whole: Callable[[str, list[str]], list[str]],
                   rest: Callable[[str, list[str]], list[str]]) -> None:
        """``[0, hi)``: ``whole(iv, [])`` at every multiple of ``n`` while ``n`` fit, then
        ``rest(iv, [])`` at each index left."""
        left = self.op(f"{{r}} = arith.remui {hi}, {self.c(n)} : index")
        cut = self.op(f"{{r}} = arith.subi {hi}, {left} : index")
        self.for_(self.c(0), cut, self.c(n), [], whole)
        self.for_(cut, hi, self.c(1), [], rest)

    def if_(self, cond: str, then: Callable[[], None],
            other: Callable[[], None] | None = None) -> None:
        """``scf.if`` without results (no ``else`` region without ``other``)."""
        self.do(f"scf.if {cond} {{")
        self.indent += 2
        then()
        self.indent -= 2
        if other is not None:
            self.do("} else {")
            self.indent += 2
            other()
            self.indent -= 2
        self.do("}")

    def if_values(self, cond: str, types: Sequence[str], then: Callable[[], list[str]],
                  other: Callable[[], list[str]]) -> list[str]:
        """``scf.if`` yielding values of ``types`` (``then()`` / ``other()`` return them)."""
        self.n += 1
        res = f"%f{self.n}"
        ts = ", ".join(types)
        self.do(f"{res}:{len(types)} = scf.if {cond} -> ({ts}) {{")
        for i, branch in enumerate((then, other)):
            if i:
                self.do("} else {")
            self.indent += 2
            out = branch()
            self.do(f"scf.yield {', '.join(out)} : {ts}")
            self.indent -= 2
        self.do("}")
        return [f"{res}#{j}" for j in range(len(types))]


def _lit(v: int | float, t: str) -> str:
    if t in ("f32", "f64", "f16", "bf16"):
        if isinstance(v, float) and math.isnan(v):
            return "0x7FC00000" if t == "f32" else "0x7FF8000000000000"
        return repr(float(v))
    if t == "i1":
        return "true" if v else "false"
    return str(int(v))


def _bf16_bits(values: Sequence[float]) -> list[int]:
    """The bf16 bits of ``values`` exact in bf16 (their f32 bits' high halves)."""
    return [int(np.array(v, np.float32).view(np.uint32)) >> 16 for v in values]


def _vt(n: int, t: str) -> str:
    return f"vector<{n}x{t}>"


@functools.lru_cache(maxsize=None)
def scale_table(fmt: str, kind: str) -> tuple[int | float, ...]:
    """The constant table of :data:`SCALE_TABLES` for the MX format ``fmt`` (f4 or f6
    elements): for each scale code s (0-255) the values of its ``n`` element codes c (f4:
    the 16 codes; f6: the 32 magnitudes) times that scale, at ``n * s + c`` -- as bf16 bits
    (``kind = "bf16"``, each as an i16) or f32 values (``"f32"``); ``"bf16x2"``: the bf16
    rows of f4 formats twice over, 32 values at ``32 * s + c`` and ``32 * s + 16 + c``
    (``vpermw``'s table of 32 words as one load).  nvfp4: every product of
    a finite E4M3 scale is exact (at most six significant bits) and normal (2^-10 to 2688);
    e8m0 scales: a power of two times the value, exact wherever it is a normal number --
    the entries where it is not (the scales at the range's ends) are NaN, as are the NaN
    scale codes' rows: the kernel's range test sends such blocks to the f64 contraction
    before any reaches a table."""
    f = FORMATS[fmt]
    if kind == "bf16x2":
        assert f.bits == 4, fmt
        rows = scale_table(fmt, "bf16")
        return tuple(v for r in range(256) for v in rows[16 * r:16 * r + 16] * 2)
    n = 16 if f.bits == 4 else 32
    vals = [float(v) for v in np.arange(n, dtype=np.uint8).view(f.element_dtype)]
    scales = [float(v) for v in np.arange(256, dtype=np.uint8).view(f.scale_dtype)]
    tiny, big = 2.0 ** -126, float(np.finfo(np.float32).max)
    out: list[int | float] = []
    for sc in scales:
        for u in vals:
            v = sc * u
            if v != 0 and not tiny <= abs(v) <= big:  # not a normal f32 / bf16
                v = math.nan
            if kind == "f32":
                out.append(v)
                continue
            (b,) = _bf16_bits([v])
            exact = float(np.array(b << 16, np.uint32).view(np.float32)) == v
            assert math.isnan(v) or exact, (fmt, sc, u)
            out.append(b - (b >> 15 << 16))  # as i16
    return tuple(out)


# ============================================================================ the kernel


class _DotKernel:
    def __init__(self, spec: DotSpec):
        self.s = spec
        self.t = _Text()
        self.C = spec.chunk
        self.W = spec.lanes
        self.exact = spec.exact
        self.acc_t = EXACT_ACC if self.exact else "f32"
        # the one-row path's f4 weights decoded to bf16 bytes by two byte shuffles (avx2,
        # mxfp4's chunks of 32): A's rows then held in F4_ORDER
        fb = spec.fmt("rhs")
        # the integer GEMM's pairs of K positions: two i16 units in an i32 (words) or two
        # bytes in an i16
        self.bfx = spec.bf16_blocks  # the word pairs' exact block sums on bf16 dot products
        self.word = spec.word_dot and not self.bfx
        self.quad = spec.quad_dot
        self.bf = spec.bf16_dot  # pairs of bf16 values (vdpbf16ps; AMX tiles)
        self.amx = spec.amx_dot
        self.raw: dict[str, str] = {}  # packed scratches: view -> its bytes (packed_alloc)
        self.globals: dict[str, str] = {}  # the module's constants: symbol -> memref.global
        # K positions per packed lane (pairs; quads for vpdpbusd) and the lane's type
        self.G = 4 if self.quad else 2
        self.mr_int = spec.gemm_rows
        # the packed GEMM packs A's rows (MX), or reads them as stored (plain bf16)
        self.a_packed = spec.fmt("lhs") is not None
        # both sides packed as scaled bf16 values (the bf16 dot products, whole-K or blocks)
        self.scaled = self.bf or self.bfx
        self.pt = "i32" if self.word or self.quad or self.scaled else "i16"
        # the packed units: bytes (byte dot products, offset on A's side, B's block sums
        # kept) or i16 (words; bf16 bits)
        self.byte = spec.byte_dot
        self.ut = "i8" if self.byte else "i16"
        # B's block sums (byte products): i16 for vpmaddubsw's lanes, i32 for vpdpbusd's
        self.st = "i32" if self.quad else "i16"
        # the exact pairs' streaming tiles on bf16 dot products, each step's lanes added into
        # f64 lanes (:data:`EXACT_BF16`: every lane two exact products of one block)
        self.exact_bf16 = (EXACT_BF16 and spec.exact and spec.path in AVX512_PATHS
                           and self.C in (16, 32) and spec.k("rhs") in (16, 32))
        # MX activations decoded to bf16 once per batch (:data:`MX_ROWS_BF16`: exact, every
        # MX value having at most 8 significant bits and the range test keeping the f32
        # paths' values normal), their tiles then those of bf16 rows ...
        self.a_bf16 = (MX_ROWS_BF16 and spec.fmt("lhs") is not None
                       and (not spec.exact or self.exact_bf16))
        # ... the streaming tiles (3-16 rows) of bf16 activations against MX weights on bf16
        # dot products (avx512: A's bf16 values read as stored, B's scaled chunk truncated to
        # bf16, both exact; vdpbf16ps: pairs of exact products into f32 lanes)
        self.bf_stream = spec.bf16_stream(self.a_bf16)
        self.a_bf16 = self.a_bf16 and self.bf_stream
        self.exact_bf16 = self.exact_bf16 and self.a_bf16  # (the tiles it runs on)
        # ... a group of steps at a time in f32 lanes where the scales allow it: the longest
        # group (EXACT_GROUP steps, halved down to EXACT_GROUP_MIN) with room enough
        self.group_steps = 0
        if self.exact_bf16 and EXACT_GROUP and (self.folded() or EXACT_GROUP_UNFOLDED):
            g = EXACT_GROUP
            least = (EXACT_GROUP_ROOM_E4M3 if any(spec.fmt(x).is_nvfp4 for x in ("lhs", "rhs"))
                     else EXACT_GROUP_ROOM)
            while g >= EXACT_GROUP_MIN and self.group_room(g) < least:
                g //= 2
            self.group_steps = g if g >= EXACT_GROUP_MIN else 0
        # the one-row path's f4 codes by permutes from the constant table of their integer
        # units (the 512-bit paths: :meth:`f4_f32_chunk` without a factor), A as it is
        self.f4_perm = (ONE_ROW_F4_PERM and spec.path in AVX512_PATHS and spec.blockwise
                        and fb is not None and fb.bits == 4 and self.C == 16)
        self.f4_fast = (spec.path in X86_PATHS and spec.blockwise and fb is not None
                        and fb.bits == 4 and not fb.is_nvfp4 and self.C == 32
                        and not self.f4_perm)
        # the streaming tiles software-pipelined (:meth:`piped_tile`)
        self.piped = (PIPELINED_STREAM[spec.path] and (not spec.exact or self.exact_bf16)
                      and fb is not None)

    @property
    def grouped(self) -> bool:
        """Whether the exact tiles sum groups of :attr:`group_steps` steps in f32 lanes."""
        return self.group_steps > 0

    def step_values(self) -> int:
        """K values per step of the piped tiles on bf16 dot products: a chunk, two of 16."""
        return 2 * self.C if self.C == 16 else self.C

    def folded(self) -> bool:
        """Whether the exact bf16 tiles add each step's two halves of lanes first (one block a
        step: :data:`FOLD_EXACT`)."""
        return FOLD_EXACT and self.s.k("rhs") >= self.step_values()

    def group_room(self, steps: int | None = None) -> int:
        """The most binades by which the scale exponents of a group's blocks (of one row of
        A plus one column of B; E4M3 scales: their exponent fields, 1 for subnormals) may
        differ for a group of ``steps`` steps (default :attr:`group_steps`) to sum exactly
        in f32 lanes: each lane sums 2 x ``steps`` products, and its two halves are added
        (where the step's halves are folded: one block a step, else as the group is added
        into the f64 lanes): 4 x ``steps`` products, each at most ``unit_max(a) x
        unit_max(b)`` times the block's power of two (times 15 x 15 for two E4M3 scales'
        significands), and every partial sum is a multiple of the group's least power of
        two, so it is exact while below 2^24 of those; -1 where none is."""
        steps = self.group_steps if steps is None else steps
        ua, ub = (unit_max(self.s.fmt(side)) * (15 if self.s.fmt(side).is_nvfp4 else 1)
                  for side in ("lhs", "rhs"))
        most = 4 * max(steps, 1) * ua * ub
        room = 0
        while most << (room + 1) <= 1 << 24:
            room += 1
        return room if most <= 1 << 24 else -1

    # -- side descriptions ---------------------------------------------------------------
    def mem_type(self, side: str) -> str:
        v = getattr(self.s, side)
        return "i8" if v in FORMATS else v

    def args(self) -> list[tuple[str, str]]:
        out = []
        for side, nm in (("lhs", "a"), ("rhs", "b")):
            out.append((f"%{nm}", f"memref<?x{self.mem_type(side)}>"))
            if self.s.fmt(side) is not None:
                out.append((f"%{nm}s", "memref<?xi8>"))
        return out + [("%out", "memref<?xf32>"), ("%dims", "memref<?xi64>"),
                      ("%u0", "index"), ("%u1", "index")]

    # -- decoding --------------------------------------------------------------------------
    def codes(self, side: str, mem: str, at: str, split: bool = False) -> str:
        """vector<C x i8> codes (unsigned) of C elements starting at element index ``at``;
        ``split`` (f4): the low nibbles (even elements) then the high ones (odd elements)."""
        t, C = self.t, self.C
        f = self.s.fmt(side)
        if f.bits == 4:
            byte = t.op(f"{{r}} = arith.divui {at}, {t.c(2)} : index")
            raw = t.op(f"{{r}} = vector.load {mem}[{byte}] : memref<?xi8>, {_vt(C // 2, 'i8')}")
            lo = t.op(f"{{r}} = arith.andi {raw}, {t.c(15, _vt(C // 2, 'i8'))} : "
                      f"{_vt(C // 2, 'i8')}")
            hi = t.op(f"{{r}} = arith.shrui {raw}, {t.c(4, _vt(C // 2, 'i8'))} : "
                      f"{_vt(C // 2, 'i8')}")
            if split:
                return t.op(f"{{r}} = vector.shuffle {lo}, {hi} "
                            f"[{', '.join(map(str, range(C)))}] : {_vt(C // 2, 'i8')}, "
                            f"{_vt(C // 2, 'i8')}")
            v8 = t.op(f"{{r}} = vector.interleave {lo}, {hi} : {_vt(C // 2, 'i8')} -> "
                      f"{_vt(C, 'i8')}")
        else:
            v8 = t.op(f"{{r}} = vector.load {mem}[{at}] : memref<?xi8>, {_vt(C, 'i8')}")
        return v8

    def f4_table(self, side: str, v8: str) -> str | None:
        """avx2: the e2m1 codes' values x 2 as i8 by one byte shuffle."""
        C, t = self.C, self.t
        if self.s.path not in X86_PATHS or C not in (16, 32):
            return None
        vals = [int(u) for u in code_units(self.s.fmt(side), range(16))]
        tbl = t.op(f"{{r}} = arith.constant dense<[{', '.join(map(str, vals * (C // 16)))}]> "
                   f": {_vt(C, 'i8')}")
        intr = "llvm.x86.avx2.pshuf.b" if C == 32 else "llvm.x86.ssse3.pshuf.b.128"
        return t.op(f'{{r}} = llvm.call_intrinsic "{intr}"({tbl}, {v8}) : '
                    f"({_vt(C, 'i8')}, {_vt(C, 'i8')}) -> {_vt(C, 'i8')}")

    def prefetch_codes(self, mem: str, at: str, ahead: int) -> None:
        """Prefetches B's codes ``ahead`` rows of K after element ``at``: what the streaming
        path reads that many columns on (:data:`PREFETCH_NEXT_ROW`)."""
        if not PREFETCH_NEXT_ROW:
            return
        t = self.t
        step = self.K if ahead == 1 else t.op(f"{{r}} = arith.muli {self.K}, {t.c(ahead)} : "
                                              "index")
        nxt = t.op(f"{{r}} = arith.addi {at}, {step} : index")
        if self.s.fmt("rhs").bits == 4:  # two codes per byte
            nxt = t.op(f"{{r}} = arith.divui {nxt}, {t.c(2)} : index")
        t.do(f"memref.prefetch {mem}[{nxt}], read, locality<0>, data : memref<?xi8>")

    def code_at(self, mem: str, row: str, kk: str, ahead: int) -> str:
        """The element index of B's row ``row`` at ``kk``, its codes prefetched ``ahead``
        rows on (:meth:`prefetch_codes`)."""
        t = self.t
        base = t.op(f"{{r}} = arith.muli {row}, {self.K} : index")
        at = t.op(f"{{r}} = arith.addi {base}, {kk} : index")
        self.prefetch_codes(mem, at, ahead)
        return at

    def f4_scaled_table(self, mem: str, factor: str | None, row: str, kk: str,
                        ahead: int = 1) -> tuple[str, str]:
        """(the element index of B's row ``row`` at ``kk``, vector<16xf32>: the 16 f4 codes'
        scaled values in that chunk's block -- the integer units times the block's
        ``factor``, exact; without a factor the integer units); prefetches the chunk
        ``ahead`` rows on as :meth:`chunk` does."""
        t = self.t
        at = self.code_at(mem, row, kk, ahead)
        units = code_units(self.s.fmt("rhs"), range(16))
        v16 = _vt(16, "f32")
        tb = t.op(f"{{r}} = arith.constant dense<[{', '.join(map(repr, units))}]> : {v16}")
        if factor is None:
            return at, tb
        fv = t.op(f"{{r}} = vector.broadcast {factor} : f32 to {v16}")
        return at, t.op(f"{{r}} = arith.mulf {tb}, {fv} : {v16}")

    def table_decode(self, rows: int = 1) -> bool:
        """Whether the piped tiles of ``rows`` rows decode B's codes by permutes from a
        table of the block's scaled values: f4 codes in chunks of 16 or 32
        (:meth:`f4_bf16_chunk` on bf16 dot products, :meth:`f4_f32_chunk` for the f32
        FMAs), f6 codes in chunks of 32 on bf16 dot products (:meth:`f6_bf16_chunk`: 1.3x
        faster than the arithmetic decode at M = 8, 1.6x at M = 2 on a Zen 4) and, in tiles
        of two rows, on the f32 FMAs (:meth:`f6_f32_chunk`, :data:`F6_F32_TABLES`); the
        512-bit paths."""
        f = self.s.fmt("rhs")
        if not (self.piped and self.s.path in AVX512_PATHS and f is not None):
            return False
        if f.bits == 4:
            return self.C in (16, 32)
        return (f.bits == 6 and self.C == 32
                and (self.bf_stream or F6_F32_TABLES and SCALE_TABLES and rows == 2))

    def scale_tables(self, rows: int = 1) -> bool:
        """Whether the piped tiles of ``rows`` rows decode B's codes from
        :func:`scale_table` (their :meth:`table_decode`, :data:`SCALE_TABLES`)."""
        return SCALE_TABLES and self.table_decode(rows)

    def table_rows(self, kind: str = "bf16") -> int:
        """Values per scale code in :func:`scale_table` (``kind``): 16 (f4), 32 (f6, and f4
        doubled: "bf16x2")."""
        return 16 if self.s.fmt("rhs").bits == 4 and kind != "bf16x2" else 32

    def scale_table_of(self, kind: str) -> tuple[str, str]:
        """(``memref<256 n x et>``, et): :func:`scale_table` of B's format and ``kind``
        ("bf16", "bf16x2": et i16, "f32": et f32), a constant of the module (64-byte
        aligned: rows of 16 and 32 values fill whole lines)."""
        fmt = self.s.fmt("rhs").name
        name = f"mxlower_{fmt}_{kind}"
        et = "f32" if kind == "f32" else "i16"
        mt = f"memref<{256 * self.table_rows(kind)}x{et}>"
        if name not in self.globals:
            vals = ", ".join(_lit(v, et) for v in scale_table(fmt, kind))
            self.globals[name] = (f'memref.global "private" constant @{name} : {mt} = '
                                  f"dense<[{vals}]> {{alignment = 64 : i64}}")
        return self.t.op(f"{{r}} = memref.get_global @{name} : {mt}"), et

    def table_row(self, kind: str, row: str, blk: str) -> str:
        """vector<n x i16 | f32>: the row of :func:`scale_table` (``kind``) that the scale
        byte of B's row ``row``'s block ``blk``, read as stored, selects.  The byte passes
        an empty ``llvm.inline_asm`` (no instruction: an optimization barrier) before it
        becomes an offset: else LLVM's SLP vectorizer gathers the scale bytes of a tile's
        columns into a vector for the offsets' multiplies and extracts them again
        (``vpinsrb`` / ``vpextrw``), 1.1-1.5x slower at M = 1 and 2 on a Zen 4.  (A chunk
        past K, its codes masked to 0, reads its clamped neighbour's row: zeros against A's
        zero padding, or NaN where that block's scale is NaN -- whose column is NaN then
        anyway.)"""
        t = self.t
        g, et = self.scale_table_of(kind)
        per = self.table_rows(kind)
        o = t.op(f"{{r}} = arith.muli {row}, {self.nblk_r} : index")
        o = t.op(f"{{r}} = arith.addi {o}, {blk} : index")
        code = t.op(f"{{r}} = memref.load %bs[{o}] : memref<?xi8>")
        c = t.op(f"{{r}} = arith.extui {code} : i8 to i32")
        c = t.op(f'{{r}} = llvm.inline_asm "", "=r,0" {c} : (i32) -> i32')
        o = t.op(f"{{r}} = arith.index_castui {c} : i32 to index")
        o = t.op(f"{{r}} = arith.muli {o}, {t.c(per)} : index")
        return t.op(f"{{r}} = vector.load {g}[{o}] : memref<{256 * per}x{et}>, "
                    f"{_vt(per, et)}")

    def placed_decode(self) -> bool:
        """Whether the piped tiles on bf16 dot products decode B's codes by
        :meth:`placed_bits` (f8, f6 where :meth:`table_decode` does not apply, mxint8)."""
        return (PLACED_DECODE and self.piped and self.bf_stream and not self.table_decode()
                and self.placed_ok("rhs"))

    def placed_f32(self) -> bool:
        """Whether the piped tiles of the f32 FMAs decode B's e4m3 codes by
        :meth:`placed_bits` (:data:`PLACED_F32`), the bf16 bits widened to f32 by a shift:
        the scaled values with no conversion and no multiply, which share the FMA pipes on
        a Zen 4 (e5m2's f16 decode needs no rebias: one multiply, kept)."""
        f = self.s.fmt("rhs")
        return (PLACED_F32 and self.piped and not self.bf_stream and f is not None
                and f.bits == 8 and not f.is_int and f.element_type.bias != 15
                and self.s.path in AVX512_PATHS and self.placed_ok("rhs"))

    def few_columns(self) -> int:
        """Columns of the (not exact) streaming tiles of up to :data:`MR_STREAM_EXACT` rows:
        :data:`NR_FEW_TABLES` where B's codes decode by a table (:meth:`table_decode`) into
        one vector a chunk (bf16 dot products, or f32 FMAs on chunks of 16: nvfp4) and for
        mxint8's :meth:`magic_chunk`, else :data:`NR_STREAM_TILE`."""
        if (self.table_decode(MR_STREAM_EXACT) and (self.bf_stream or self.C == 16)
                or self.magic_f32() and self.s.fmt("rhs").is_int):
            return NR_FEW_TABLES
        return NR_STREAM_TILE[self.s.path]

    def magic_f32(self) -> bool:
        """Whether the piped tiles of the f32 FMAs decode B's integer units by
        :meth:`magic_chunk` (:data:`MAGIC_F32`): mxint8 codes, and f6 codes on the 512-bit
        paths in chunks of 32 (a word permute from their units); the kernel's range test
        then also asks that every block factor be at most 2^:data:`MAGIC_TOP`."""
        f = self.s.fmt("rhs")
        return (MAGIC_F32 and self.piped and not self.bf_stream and f is not None
                and not self.s.rhs_kn and (f.is_int or f.bits == 6 and self.C == 32
                     and self.s.path in AVX512_PATHS))

    def magic_chunk(self, mem: str, factor: str, row: str, kk: str, ahead: int) -> str:
        """:meth:`magic_f32`: vector<C x f32>, the scaled values of C codes of B's row
        ``row`` at ``kk``, their block's ``factor`` 2^e (normal, at most 2^MAGIC_TOP).  A
        unit u (|u| < 2^(m - 1): mxint8's codes m = 8, f6's units m = 10) as its low m
        bits w, xor-ed with the bits of 2^(23 + e) plus 2^(m - 1), reads as the f32
        2^(23 + e) + (u + 2^(m - 1)) 2^e; less that word's own value (the same binade:
        exact) it is u 2^e, exact (normal: the range test's q_b >= -126) -- per 16 values
        a widening, an xor and a subtract: no conversion and no multiply."""
        t, C = self.t, self.C
        f = self.s.fmt("rhs")
        at = self.code_at(mem, row, kk, ahead)
        v8 = t.op(f"{{r}} = vector.load {mem}[{at}] : memref<?xi8>, {_vt(C, 'i8')}")
        vi, vf = _vt(C, "i32"), _vt(C, "f32")
        if f.is_int:
            m, w = 8, t.op(f"{{r}} = arith.extui {v8} : {_vt(C, 'i8')} to {vi}")
        else:  # the codes' units mod 2^10 by one word permute from two tables of 32
            m, wh = 10, _vt(C, "i16")
            units = [int(u) % (1 << 10) for u in code_units(f, range(64))]
            tabs = [t.op(f"{{r}} = arith.constant dense<[{', '.join(map(str, part))}]> : "
                         f"{wh}") for part in (units[:32], units[32:])]
            c = t.op(f"{{r}} = arith.extui {v8} : {_vt(C, 'i8')} to {wh}")
            u = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.hi.512"'
                     f"({tabs[0]}, {c}, {tabs[1]}) : ({wh}, {wh}, {wh}) -> {wh}")
            w = t.op(f"{{r}} = arith.extui {u} : {wh} to {vi}")
        fb = t.op(f"{{r}} = arith.bitcast {factor} : f32 to i32")
        mb = t.op(f"{{r}} = arith.addi {fb}, {t.c((23 << 23) + (1 << (m - 1)), 'i32')} : i32")
        mv = t.op(f"{{r}} = vector.broadcast {mb} : i32 to {vi}")
        x = t.op(f"{{r}} = arith.xori {w}, {mv} : {vi}")
        x = t.op(f"{{r}} = arith.bitcast {x} : {vi} to {vf}")
        mf = t.op(f"{{r}} = arith.bitcast {mv} : {vi} to {vf}")
        return t.op(f"{{r}} = arith.subf {x}, {mf} : {vf}")

    def placed_ok(self, side: str) -> bool:
        """Whether :meth:`placed_bits` decodes ``side``'s codes: float codes with a
        :meth:`placed_table`, mxint8 in chunks of 32 (the 512-bit paths)."""
        f = self.s.fmt(side)
        if f is not None and f.is_int:
            return self.C == 32 and self.s.path in AVX512_PATHS
        return self.placed_table(side) is not None

    def f4_f32_chunk(self, mem: str, factor: str | None, row: str, kk: str,
                     ahead: int = 1, table: str | None = None) -> str:
        """:meth:`table_decode`, f32 FMAs: vector<C x f32>, the scaled values of C f4 codes
        of B's row ``row`` at ``kk`` by permutes (``vpermps``) from the block's table of 16
        -- eight code bytes widened to i64 lanes, each or-ed with itself shifted left by 28
        bits, hold a byte's low nibble in the low i32's index bits and its high nibble in
        the high one's: per 16 values a widening load, a shift, an or and the permute, no
        conversion and no multiply (3-8% faster than the arithmetic decode at M = 8 on a Zen
        4, up to 23% at M = 2; one step ahead, before the factors came from the scratch,
        LLVM had spilled the tile 1.6x slower).  ``table``: the block's 16 scaled values
        as they are (:meth:`table_row`), instead of a ``factor``."""
        t, C = self.t, self.C
        if table is None:
            at, tb = self.f4_scaled_table(mem, factor, row, kk, ahead)
        else:
            at, tb = self.code_at(mem, row, kk, ahead), table
        byte = t.op(f"{{r}} = arith.divui {at}, {t.c(2)} : index")
        v8, vq, vi, v16 = _vt(8, "i8"), _vt(8, "i64"), _vt(16, "i32"), _vt(16, "f32")
        parts = []
        for h in range(C // 16):
            o = t.op(f"{{r}} = arith.addi {byte}, {t.c(8 * h)} : index")
            raw = t.op(f"{{r}} = vector.load {mem}[{o}] : memref<?xi8>, {v8}")
            q = t.op(f"{{r}} = arith.extui {raw} : {v8} to {vq}")
            hi = t.op(f"{{r}} = arith.shli {q}, {t.c(28, vq)} : {vq}")
            q = t.op(f"{{r}} = arith.ori {q}, {hi} : {vq}")
            idx = t.op(f"{{r}} = vector.bitcast {q} : {vq} to {vi}")
            parts.append(t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"'
                              f"({tb}, {idx}) : ({v16}, {vi}) -> {v16}"))
        return self.concat(parts, 16)

    def f4_bf16_chunk(self, mem: str, factor: str | None, row: str, kk: str, ahead: int = 1,
                      word: bool = False, table: str | None = None) -> str:
        """:meth:`table_decode` in chunks of 32 (those of 16 go by pairs:
        :meth:`f4_bf16_pair`): vector<32 x bf16>, the scaled values of 32 f4 codes of B's
        row ``row`` at ``kk`` by one word permute (``vpermw``) from the block's table of 16
        (exact in bf16; ``vcvtne2ps2bf16`` exact too, the range test keeping every value
        normal) -- per chunk a load widened to i32 lanes, a shift, an or and the permute:
        each code byte's lane holds its low nibble in the low word's low bits and its high
        nibble in the high word's (``vpermw`` reads 5 index bits: the table is doubled).
        ``table``: the block's table's bf16 bits twice over, as they are (the row of
        ``bf16x2``: :meth:`table_row`; one load, where a row of 16 took a broadcast too),
        instead of the ``factor`` (or its ``word``)."""
        t = self.t
        v16, w, vi = _vt(16, "f32"), _vt(32, "i16"), _vt(16, "i32")
        if table is not None:  # the block's 16 values (bf16 bits) twice (bf16x2's row)
            at = self.code_at(mem, row, kk, ahead)
            tw = table
        elif word:  # the doubled table's bits plus the factor's word
            at = self.code_at(mem, row, kk, ahead)
            tw = self.word_table(code_units(self.s.fmt("rhs"), range(16)) * 2, factor)
        else:
            at, tb = self.f4_scaled_table(mem, factor, row, kk, ahead)
            tw = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512bf16.cvtne2ps2bf16.512"'
                      f"({tb}, {tb}) : ({v16}, {v16}) -> {_vt(32, 'bf16')}")
            tw = t.op(f"{{r}} = arith.bitcast {tw} : {_vt(32, 'bf16')} to {w}")
        byte = t.op(f"{{r}} = arith.divui {at}, {t.c(2)} : index")
        raw = t.op(f"{{r}} = vector.load {mem}[{byte}] : memref<?xi8>, {_vt(16, 'i8')}")
        d = t.op(f"{{r}} = arith.extui {raw} : {_vt(16, 'i8')} to {vi}")
        hi = t.op(f"{{r}} = arith.shli {d}, {t.c(12, vi)} : {vi}")
        d = t.op(f"{{r}} = arith.ori {d}, {hi} : {vi}")
        idx = t.op(f"{{r}} = vector.bitcast {d} : {vi} to {w}")
        v = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"'
                 f"({tw}, {idx}) : ({w}, {w}) -> {w}")
        return t.op(f"{{r}} = arith.bitcast {v} : {w} to {_vt(32, 'bf16')}")

    def bf16_table(self, parts: Sequence[tuple[Sequence[float], str]]) -> str:
        """vector<32 x i16>: the bf16 bits of two parts' 16 constant values times their
        factor (f32), side by side (two multiplies, one ``vcvtne2ps2bf16``: exact where the
        products are, as the range test keeps them)."""
        t, v16 = self.t, _vt(16, "f32")
        halves = []
        for vals, f in parts:
            tb = t.op(f"{{r}} = arith.constant dense<[{', '.join(map(repr, vals))}]> : {v16}")
            fv = t.op(f"{{r}} = vector.broadcast {f} : f32 to {v16}")
            halves.append(t.op(f"{{r}} = arith.mulf {tb}, {fv} : {v16}"))
        tw = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512bf16.cvtne2ps2bf16.512"'
                  f"({halves[1]}, {halves[0]}) : ({v16}, {v16}) -> {_vt(32, 'bf16')}")
        return t.op(f"{{r}} = arith.bitcast {tw} : {_vt(32, 'bf16')} to {_vt(32, 'i16')}")

    def f4_bf16_pair(self, mem: str, factors: Sequence[str], row: str, kk: str,
                     inside: str, ahead: int, rows: Sequence[str] = ()) -> str:
        """:meth:`table_decode` for f4 codes in chunks of 16 (C = 16) on bf16 dot products,
        two chunks (of B's row ``row``, from ``kk`` on; the second one's codes only where
        ``inside``, else zeros) at a time: vector<32 x bf16>, by one word permute
        (``vpermw``) from the two blocks' tables of 16 scaled values (``factors``) side by
        side -- each index the code's nibble alone, the second chunk's or-ed with 16.  Per
        two chunks two multiplies, one ``vcvtne2ps2bf16``, one 16-byte load (its second
        half masked off past K, where a masked load never faults: 1.02-1.05x faster than two
        8-byte loads and a shuffle at M = 1 and 2 on a Zen 4), a widen, a shift, an or, an
        and-or and the permute (each chunk by :meth:`f4_bf16_chunk` took a multiply, a
        conversion and a permute of its own, and a shuffle joined them: 1.1-1.2x faster for
        nvfp4 at M = 1, 2 and 8 on a Zen 4).  ``rows``: the two blocks' rows of
        :func:`scale_table` (bf16 bits, :meth:`table_row`), side by side the table, instead
        of ``factors``."""
        t = self.t
        at = self.code_at(mem, row, kk, ahead)  # (the second chunk: the same lines)
        w, m1, v16 = _vt(32, "i16"), _vt(16, "i1"), _vt(16, "i8")
        if rows:
            tw = self.concat(rows, 16, "i16")
        else:
            units = code_units(self.s.fmt("rhs"), range(16))
            tw = self.bf16_table([(units, f) for f in factors])
        byte = t.op(f"{{r}} = arith.divui {at}, {t.c(2)} : index")
        full = t.op(f"{{r}} = arith.constant dense<true> : {m1}")
        low = t.op(f"{{r}} = arith.constant dense<[{', '.join(['true'] * 8 + ['false'] * 8)}]> "
                   f": {m1}")
        mask = t.op(f"{{r}} = arith.select {inside}, {full}, {low} : {m1}")
        raw = t.op(f"{{r}} = vector.maskedload {mem}[{byte}], {mask}, {t.c(0, v16)} : "
                   f"memref<?xi8>, {m1}, {v16} into {v16}")
        vi = _vt(16, "i32")
        d = t.op(f"{{r}} = arith.extui {raw} : {v16} to {vi}")
        hi = t.op(f"{{r}} = arith.shli {d}, {t.c(12, vi)} : {vi}")
        d = t.op(f"{{r}} = arith.ori {d}, {hi} : {vi}")
        idx = t.op(f"{{r}} = vector.bitcast {d} : {vi} to {w}")
        idx = t.op(f"{{r}} = arith.andi {idx}, {t.c(15, w)} : {w}")  # the nibble alone
        second = t.op(f"{{r}} = arith.constant dense<[{', '.join(['0'] * 16 + ['16'] * 16)}]> "
                      f": {w}")
        idx = t.op(f"{{r}} = arith.ori {idx}, {second} : {w}")
        v = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"'
                 f"({tw}, {idx}) : ({w}, {w}) -> {w}")
        return t.op(f"{{r}} = arith.bitcast {v} : {w} to {_vt(32, 'bf16')}")

    def f6_bf16_chunk(self, mem: str, factor: str | None, row: str, kk: str, ahead: int = 1,
                      word: bool = False, table: str | None = None) -> str:
        """:meth:`table_decode` for f6 codes on bf16 dot products (C = 32): vector<32 x bf16>,
        the scaled values of 32 codes of B's row ``row`` at ``kk`` by one word permute
        (``vpermw``: its 5 index bits are the code's magnitude) from the block's table of
        the 32 magnitudes' scaled values (exact in bf16, normal under the range test), the
        code's sign bit then moved to bit 15.  ``table``: that table's bf16 bits as they are
        (:meth:`table_row`), instead of the ``factor`` (or its ``word``)."""
        t = self.t
        fmt = self.s.fmt("rhs")
        at = self.code_at(mem, row, kk, ahead)
        units = code_units(fmt, range(32))  # the magnitudes
        w = _vt(32, "i16")
        if table is not None:  # the block's 32 magnitudes' values (bf16 bits)
            tw = table
        elif word:
            tw = self.word_table(units, factor)
        else:
            tw = self.bf16_table([(units[:16], factor), (units[16:], factor)])
        raw = t.op(f"{{r}} = vector.load {mem}[{at}] : memref<?xi8>, {_vt(32, 'i8')}")
        c = t.op(f"{{r}} = arith.extui {raw} : {_vt(32, 'i8')} to {w}")
        v = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"'
                 f"({tw}, {c}) : ({w}, {w}) -> {w}")
        v = self.with_sign(c, v, fmt.element_type.bits - 1)
        return t.op(f"{{r}} = arith.bitcast {v} : {w} to {_vt(32, 'bf16')}")

    def f6_f32_chunk(self, mem: str, row: str, kk: str, ahead: int, table: str) -> str:
        """:meth:`table_decode` for f6 codes on the f32 FMAs (C = 32): vector<32 x f32>, the
        scaled values of 32 codes of B's row ``row`` at ``kk`` by two-table permutes
        (``vpermi2ps``: 5 index bits, the code's magnitude) from ``table`` (the block's 32
        magnitudes' values, :meth:`table_row`), the code's sign bit then moved to bit 31 --
        per 16 codes a widen, the permute, a shift and an and-or: no conversion and no
        multiply on the FMA pipes."""
        t = self.t
        fmt = self.s.fmt("rhs")
        at = self.code_at(mem, row, kk, ahead)
        v16, vi, b16 = _vt(16, "f32"), _vt(16, "i32"), _vt(16, "i8")
        lo, hi = (t.op(f"{{r}} = vector.extract_strided_slice {table} {{{{offsets = [{o}], "
                       f"sizes = [16], strides = [1]}}}} : {_vt(32, 'f32')} to {v16}")
                  for o in (0, 16))
        top = fmt.element_type.bits - 1
        parts = []
        for h in range(2):
            o = t.op(f"{{r}} = arith.addi {at}, {t.c(16 * h)} : index")
            raw = t.op(f"{{r}} = vector.load {mem}[{o}] : memref<?xi8>, {b16}")
            c = t.op(f"{{r}} = arith.extui {raw} : {b16} to {vi}")
            v = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.ps.512"'
                     f"({lo}, {c}, {hi}) : ({v16}, {vi}, {v16}) -> {v16}")
            vb = t.op(f"{{r}} = arith.bitcast {v} : {v16} to {vi}")
            vb = self.with_sign(c, vb, top, 32, 16)
            parts.append(t.op(f"{{r}} = arith.bitcast {vb} : {vi} to {v16}"))
        return self.concat(parts, 16)

    def with_sign(self, c: str, v: str, top: int, width: int = 16,
                  n: int | None = None) -> str:
        """The ``n`` (default C) lanes ``v`` of ``width`` bits (bf16 or f32 bits of
        magnitudes) with the sign bit ``top`` of the codes ``c`` (zero-extended to that
        width) moved to the lanes' top bit."""
        t, w = self.t, _vt(n or self.C, f"i{width}")
        sg = t.op(f"{{r}} = arith.shli {c}, {t.c(width - 1 - top, w)} : {w}")
        sg = t.op(f"{{r}} = arith.andi {sg}, {t.c(-1 << (width - 1), w)} : {w}")
        return t.op(f"{{r}} = arith.ori {v}, {sg} : {w}")

    def placed_table(self, side: str) -> list[int] | None:
        """:meth:`placed_bits`' table for float codes, indexed by a code's low ``log2 C``
        bits: the bf16 bits (as i16, exponent field biased by the element's bias, so possibly
        negative) of the subnormal magnitudes' values, normalized; zero for code 0; Inf's
        and NaN's bf16 bits for those codes -- or None where ``side`` is not a float format
        with e8m0 scales whose subnormal and special codes fall in distinct entries (f8 and
        f6 in chunks of 16 or 32)."""
        f = self.s.fmt(side)
        ft = f.element_type if f is not None else None
        if (ft is None or ft.bits < 6 or f.is_nvfp4 or self.C not in (16, 32)
                or self.s.path not in AVX512_PATHS):
            return None
        spec, top = number(f.element), ft.bits - 1
        table = [0] * self.C
        used = {0}
        for m in range(1, 1 << top):
            v = spec.value_of(m)
            if m >> ft.man_bits and math.isfinite(v):  # normal: placed, not looked up
                continue
            slot = m % self.C
            if slot in used:
                return None
            used.add(slot)
            if not math.isfinite(v):
                table[slot] = 0x7FC0 if math.isnan(v) else 0x7F80
                continue
            e = math.floor(math.log2(v))
            frac = v / fractions.Fraction(2) ** e - 1
            table[slot] = ((e + ft.bias) << 7) + int(frac * 128)
        return table

    def placed_bits(self, side: str, v8: str, factor: str, word: bool = False) -> str:
        """vector<C x i16>: the bf16 bits of C float codes' values (f8, f6) times the
        block's ``factor`` (a power of two, scale x 2^-integer_shift), with no conversion and
        no multiply: a normal code's magnitude shifted into bf16's exponent and mantissa
        fields is its value times 2^(bias - 127), so adding the factor's exponent (less the
        bias, plus the shift) to those bits scales it exactly -- the range test keeps every
        scaled value normal; subnormal codes take their normalized bits, and zero, Inf and
        NaN codes their bf16 bits, from :meth:`placed_table` by one word permute
        (``vpermw``), the sign then moved to bit 15 (``word``: the factor is its
        :meth:`factor_word`)."""
        t, C = self.t, self.C
        f = self.s.fmt(side)
        if f.is_int:
            assert not word  # (mxint8 keeps f32 factors: :meth:`word_bias`)
            return self.int8_bits(v8, factor)
        ft, table = f.element_type, self.placed_table(side)
        top, w = ft.bits - 1, _vt(C, "i16")
        c = t.op(f"{{r}} = arith.extui {v8} : {_vt(C, 'i8')} to {w}")
        mag = t.op(f"{{r}} = arith.andi {c}, {t.c((1 << top) - 1, w)} : {w}")
        p = t.op(f"{{r}} = arith.shli {mag}, {t.c(7 - ft.man_bits, w)} : {w}")
        tb = t.op(f"{{r}} = arith.constant dense<[{', '.join(map(str, table))}]> : {w}")
        tv = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.{16 * C}"'
                  f"({tb}, {c}) : ({w}, {w}) -> {w}")
        sub = t.op(f"{{r}} = arith.cmpi ult, {mag}, {t.c(1 << ft.man_bits, w)} : {w}")
        p = t.op(f"{{r}} = arith.select {sub}, {tv}, {p} : {_vt(C, 'i1')}, {w}")
        d = self.exponent_add(factor, ft.bias - (integer_shift(f) or 0), word)
        q = t.op(f"{{r}} = arith.addi {p}, {d} : {w}")
        spec = number(f.element)
        first = next((m for m in range(1 << top) if not math.isfinite(spec.value_of(m))),
                     None)
        if first is None:  # zero: the table's
            keep = t.op(f"{{r}} = arith.cmpi eq, {mag}, {t.c(0, w)} : {w}")
        else:  # zero (mag - 1 wraps) or a code from the first Inf / NaN one on
            m1 = t.op(f"{{r}} = arith.subi {mag}, {t.c(1, w)} : {w}")
            keep = t.op(f"{{r}} = arith.cmpi uge, {m1}, {t.c(first - 1, w)} : {w}")
        q = t.op(f"{{r}} = arith.select {keep}, {tv}, {q} : {_vt(C, 'i1')}, {w}")
        return self.with_sign(c, q, top)

    def exponent_add(self, factor: str, bias: int, word: bool = False) -> str:
        """vector<C x i16>: what adding to bf16 bits (whose exponent field is biased by
        ``bias``) multiplies them by ``factor`` (a power of two): its exponent field less
        ``bias``, shifted to bf16's exponent (``word``: the factor is its
        :meth:`factor_word` for that bias, broadcast)."""
        t = self.t
        if word:
            return self.word_lanes(factor, self.C)
        fb = t.op(f"{{r}} = arith.bitcast {factor} : f32 to i32")
        d = t.op(f"{{r}} = arith.shrui {fb}, {t.c(16, 'i32')} : i32")
        d = t.op(f"{{r}} = arith.subi {d}, {t.c(bias << 7, 'i32')} : i32")
        d = t.op(f"{{r}} = arith.trunci {d} : i32 to i16")
        return t.op(f"{{r}} = vector.broadcast {d} : i16 to {_vt(self.C, 'i16')}")

    def word_bias(self) -> int | None:
        """Where the piped tiles of bf16 dot products scale B's codes by adding the block
        factor's exponent to bf16 bits (:data:`FACTOR_WORDS`; the factor a power of two):
        the exponent bias of those bits -- 127 for the tables of values (f4, f6 in chunks of
        32, where :data:`SCALE_TABLES` is off), the element's bias less the integer shift
        for the placed bits of float codes --
        and the panel's scratch then holds :meth:`factor_word` for it; else None (f32
        factors: nvfp4; mxint8, whose tiles of two rows measured 1.1x slower with words and
        one row 1.1x faster; the f32 FMAs' f4 tables, 1.06x slower with an add and a mask
        for the multiply)."""
        f = self.s.fmt("rhs")
        if not (FACTOR_WORDS and self.piped and self.bf_stream and f is not None
                and not f.is_nvfp4 and not f.is_int):
            return None
        if self.table_decode():
            return 127 if self.C == 32 and not self.scale_tables() else None
        if self.placed_decode():
            return f.element_type.bias - (integer_shift(f) or 0)
        return None

    def factor_word(self, f: str, lanes: int, bias: int) -> str:
        """The word of the factors ``f`` (f32, or vector<lanes x f32>: powers of two, normal)
        that an integer add to bits whose exponent is biased by ``bias`` multiplies them by,
        as f32 bits: the i16 difference of the exponent fields (bf16's), twice (low and high
        halves, so that a 32-bit broadcast gives every lane).  Exact where the bits are those
        of a normal value and the product is normal (the range test); zero's bits must not
        take it (:meth:`word_table`)."""
        t = self.t
        it, ft = (_vt(lanes, "i32"), _vt(lanes, "f32")) if lanes else ("i32", "f32")
        b = t.op(f"{{r}} = arith.bitcast {f} : {ft} to {it}")
        d = t.op(f"{{r}} = arith.shrui {b}, {t.c(16, it)} : {it}")
        d = t.op(f"{{r}} = arith.subi {d}, {t.c(bias << 7, it)} : {it}")
        lo = t.op(f"{{r}} = arith.andi {d}, {t.c(0xFFFF, it)} : {it}")
        hi = t.op(f"{{r}} = arith.shli {d}, {t.c(16, it)} : {it}")
        d = t.op(f"{{r}} = arith.ori {lo}, {hi} : {it}")
        return t.op(f"{{r}} = arith.bitcast {d} : {it} to {ft}")

    def word_lanes(self, word: str, n: int) -> str:
        """vector<n x i16>: a :meth:`factor_word` (bf16 dot products) in every lane."""
        t = self.t
        v = t.op(f"{{r}} = vector.broadcast {word} : f32 to {_vt(n // 2, 'f32')}")
        return t.op(f"{{r}} = vector.bitcast {v} : {_vt(n // 2, 'f32')} to {_vt(n, 'i16')}")

    def word_table(self, values: Sequence[float], word: str) -> str:
        """vector<32 x i16>: the bf16 bits of 32 ``values`` (exact constants) times the
        block's factor, from its :meth:`factor_word`: the values' bits plus the word, zeros'
        bits kept (an integer add: no multiply and no conversion on the FMA pipes)."""
        t, it = self.t, _vt(32, "i16")
        bits = [b - (b >> 15 << 16) for b in _bf16_bits(values)]  # as i16
        tb = t.op(f"{{r}} = arith.constant dense<[{', '.join(map(str, bits))}]> : {it}")
        sm = t.op(f"{{r}} = arith.addi {tb}, {self.word_lanes(word, 32)} : {it}")
        nz = ", ".join("true" if v else "false" for v in values)
        keep = t.op(f"{{r}} = arith.constant dense<[{nz}]> : {_vt(32, 'i1')}")
        return t.op(f"{{r}} = arith.select {keep}, {sm}, {tb} : {_vt(32, 'i1')}, {it}")

    def int8_bits(self, v8: str, factor: str) -> str:
        """:meth:`placed_bits` for mxint8 (C = 32): vector<32 x i16>, the bf16 bits of the
        codes times ``factor`` (scale x 2^-6) -- magnitudes below 64 from a 64-entry table of
        their bf16 bits (``vpermt2w``), those from 64 (to 128) by placing their six low bits
        under the exponent 6; then the factor's exponent added (zeros kept) and the sign
        (bit 15 of the sign-extended code) or-ed in: no conversion and no multiply."""
        t = self.t
        w, wi = _vt(32, "i16"), _vt(32, "i1")
        c = t.op(f"{{r}} = arith.extsi {v8} : {_vt(32, 'i8')} to {w}")
        neg = t.op(f"{{r}} = arith.subi {t.c(0, w)}, {c} : {w}")
        m = t.op(f"{{r}} = arith.maxsi {c}, {neg} : {w}")  # |c| (128 for -128)
        bits = _bf16_bits(range(64))
        tabs = [t.op(f"{{r}} = arith.constant dense<[{', '.join(map(str, part))}]> : {w}")
                for part in (bits[:32], bits[32:])]
        tv = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.hi.512"'
                  f"({tabs[0]}, {m}, {tabs[1]}) : ({w}, {w}, {w}) -> {w}")
        top = t.op(f"{{r}} = arith.shli {m}, {t.c(1, w)} : {w}")  # 1.xxxxxx x 2^6
        top = t.op(f"{{r}} = arith.addi {top}, {t.c(((127 + 6) << 7) - 128, w)} : {w}")
        big = t.op(f"{{r}} = arith.cmpi uge, {m}, {t.c(64, w)} : {w}")
        p = t.op(f"{{r}} = arith.select {big}, {top}, {tv} : {wi}, {w}")
        q = t.op(f"{{r}} = arith.addi {p}, {self.exponent_add(factor, 127)} : {w}")
        zero = t.op(f"{{r}} = arith.cmpi eq, {m}, {t.c(0, w)} : {w}")
        q = t.op(f"{{r}} = arith.select {zero}, {p}, {q} : {wi}, {w}")
        sg = t.op(f"{{r}} = arith.andi {c}, {t.c(-0x8000, w)} : {w}")
        return t.op(f"{{r}} = arith.ori {q}, {sg} : {w}")

    def placed_chunk(self, mem: str, factor: str, row: str, kk: str, ahead: int,
                     word: bool = False) -> str:
        """:meth:`placed_bits` for C codes of B's row ``row`` at ``kk``: vector<C x bf16>."""
        t, C = self.t, self.C
        at = self.code_at(mem, row, kk, ahead)
        v8 = t.op(f"{{r}} = vector.load {mem}[{at}] : memref<?xi8>, {_vt(C, 'i8')}")
        bits = self.placed_bits("rhs", v8, factor, word)
        return t.op(f"{{r}} = arith.bitcast {bits} : {_vt(C, 'i16')} to {_vt(C, 'bf16')}")

    def f4_bf16_units(self, side: str, v8: str) -> str:
        """avx2, C = 32: vector<32xf32>, the integer units (value x 2) of 32 e2m1 codes split
        by :meth:`codes` (even elements, then odd), in :data:`F4_ORDER`: two byte shuffles
        give each code's bf16 high and low byte, and in-lane unpacks (``vpunpck[lh]bw``, then
        ``vpunpck[lh]wd`` with zeros) place them as the high half of f32 lanes -- no
        conversion instruction (the integer units are exact in bf16: 0, 1, 2, 3, 4, 6, 8,
        12)."""
        t = self.t
        units = code_units(self.s.fmt(side), range(8))
        bits = _bf16_bits(units)
        bits += [b | 0x8000 for b in bits]
        v32, w16 = _vt(32, "i8"), _vt(16, "i16")
        halves = []
        for part in (lambda b: b >> 8, lambda b: b & 0xFF):
            tbl = [part(b) - 256 if part(b) > 127 else part(b) for b in bits] * 2
            tv = t.op(f"{{r}} = arith.constant dense<[{', '.join(map(str, tbl))}]> : {v32}")
            halves.append(t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"({tv}, '
                               f"{v8}) : ({v32}, {v32}) -> {v32}"))
        hi, lo = halves
        zero = t.c(0, w16)
        out = []
        for half in (0, 8):  # vpunpcklbw / vpunpckhbw: bf16 words, in-lane
            mask = [x for lane in (0, 16) for i in range(half + lane, half + lane + 8)
                    for x in (i, i + 32)]
            w8 = t.op(f"{{r}} = vector.shuffle {lo}, {hi} [{', '.join(map(str, mask))}] : "
                      f"{v32}, {v32}")
            w = t.op(f"{{r}} = vector.bitcast {w8} : {v32} to {w16}")
            for q in (0, 4):  # vpunpcklwd / vpunpckhwd with zeros: the f32 lanes
                m = [x for lane in (0, 8) for i in range(q + lane, q + lane + 4)
                     for x in (i, i + 16)]
                d = t.op(f"{{r}} = vector.shuffle {zero}, {w} [{', '.join(map(str, m))}] : "
                         f"{w16}, {w16}")
                out.append(t.op(f"{{r}} = vector.bitcast {d} : {w16} to {_vt(8, 'f32')}"))
        return self.concat(out)

    def concat(self, parts: Sequence[str], n: int = 8, et: str = "f32") -> str:
        """The vector<n x et> ``parts`` (a power of two of them) as one vector."""
        t = self.t
        while len(parts) > 1:
            idx = ", ".join(map(str, range(2 * n)))
            parts = [t.op(f"{{r}} = vector.shuffle {a}, {b} [{idx}] : {_vt(n, et)}, "
                          f"{_vt(n, et)}") for a, b in zip(parts[0::2], parts[1::2])]
            n *= 2
        return parts[0]

    def in_order(self, v: str) -> str:
        """vector<32 x f32> ``v`` permuted into :data:`F4_ORDER`."""
        return self.t.op(f"{{r}} = vector.shuffle {v}, {v} [{', '.join(map(str, F4_ORDER))}] : "
                         f"{_vt(32, 'f32')}, {_vt(32, 'f32')}")

    def integer_units(self, side: str, v8: str) -> str:
        """vector<C x f32>: the elements times 2^integer_shift (exact small integers)."""
        t, C = self.t, self.C
        f = self.s.fmt(side)
        vi = _vt(C, "i32")
        if f.is_int:
            w = t.op(f"{{r}} = arith.extsi {v8} : {_vt(C, 'i8')} to {vi}")
            return t.op(f"{{r}} = arith.sitofp {w} : {vi} to {_vt(C, 'f32')}")
        if f.bits == 4:
            sh = self.f4_table(side, v8)
            if sh is not None:
                w = t.op(f"{{r}} = arith.extsi {sh} : {_vt(C, 'i8')} to {vi}")
                return t.op(f"{{r}} = arith.sitofp {w} : {vi} to {_vt(C, 'f32')}")
        return self.f16_decode(side, v8, integer_shift(f))

    def f16_decode(self, side: str, v8: str, shift: int) -> str:
        """vector<C x f32>: float element codes' values times 2^shift, through f16: a
        code's magnitude shifted into an f16's exponent and mantissa fields is its value
        times 2^(bias - 15), subnormals included (f16's conversion to f32 is exact and does
        not depend on the CPU's flush modes; F16C's ``vcvtph2ps`` where the host has it);
        e5m2's Inf / NaN codes are f16's, e4m3fn's NaN codes are selected."""
        t, C = self.t, self.C
        ft = self.s.fmt(side).element_type
        vh, vf = _vt(C, "i16"), _vt(C, "f32")
        top = ft.bits - 1  # the sign bit
        c = t.op(f"{{r}} = arith.extui {v8} : {_vt(C, 'i8')} to {vh}")
        mag = t.op(f"{{r}} = arith.andi {c}, {t.c((1 << top) - 1, vh)} : {vh}")
        sg = t.op(f"{{r}} = arith.andi {c}, {t.c(1 << top, vh)} : {vh}")
        mb = t.op(f"{{r}} = arith.shli {mag}, {t.c(10 - ft.man_bits, vh)} : {vh}")
        sb = t.op(f"{{r}} = arith.shli {sg}, {t.c(15 - top, vh)} : {vh}")
        bits = t.op(f"{{r}} = arith.ori {mb}, {sb} : {vh}")
        if ft.bits == 8 and ft.exp_bits == 4:  # e4m3fn: S.1111.111 is NaN
            # mag + 1 reaches bit 7 only for 0x7F: that bit moved to bit 14 turns its f16
            # 0x3F80 into 0x7F80, a NaN (no select: cheaper on every ISA)
            p1 = t.op(f"{{r}} = arith.addi {mag}, {t.c(1, vh)} : {vh}")
            hb = t.op(f"{{r}} = arith.andi {p1}, {t.c(0x80, vh)} : {vh}")
            nb = t.op(f"{{r}} = arith.shli {hb}, {t.c(7, vh)} : {vh}")
            bits = t.op(f"{{r}} = arith.ori {bits}, {nb} : {vh}")
        h = t.op(f"{{r}} = arith.bitcast {bits} : {vh} to {_vt(C, 'f16')}")
        v = t.op(f"{{r}} = arith.extf {h} : {_vt(C, 'f16')} to {vf}")
        mul = 15 - ft.bias + shift
        if mul == 0:
            return v
        return t.op(f"{{r}} = arith.mulf {v}, {t.c(2.0 ** mul, vf)} : {vf}")

    def factor(self, side: str, smem: str, block: str, n: int = 0) -> str:
        """f32: the block's scale times 2^-integer_shift (f8 formats: the scale); with ``n``,
        ``vector<n x f32>``: the factors of the n blocks from ``block`` on."""
        t = self.t
        f = self.s.fmt(side)
        i8, i32, f32 = ((_vt(n, "i8"), _vt(n, "i32"), _vt(n, "f32")) if n else
                        ("i8", "i32", "f32"))
        sel = f"{_vt(n, 'i1')}, {i32}" if n else i32  # arith.select's types
        if n:
            code = t.op(f"{{r}} = vector.load {smem}[{block}] : memref<?xi8>, {i8}")
        else:
            code = t.op(f"{{r}} = memref.load {smem}[{block}] : memref<?xi8>")
        c = t.op(f"{{r}} = arith.extui {code} : {i8} to {i32}")
        shift = integer_shift(f) or 0
        if f.is_nvfp4:  # an E4M3 scale (never NaN here: the caller checked the range)
            mag = t.op(f"{{r}} = arith.andi {c}, {t.c(0x7F, i32)} : {i32}")
            e = t.op(f"{{r}} = arith.shrui {mag}, {t.c(3, i32)} : {i32}")
            m = t.op(f"{{r}} = arith.andi {mag}, {t.c(7, i32)} : {i32}")
            nb = t.op(f"{{r}} = arith.shli {mag}, {t.c(20, i32)} : {i32}")
            normal = t.op(f"{{r}} = arith.addi {nb}, {t.c((120 - shift) << 23, i32)} : {i32}")
            mf = t.op(f"{{r}} = arith.uitofp {m} : {i32} to {f32}")
            subf = t.op(f"{{r}} = arith.mulf {mf}, {t.c(2.0 ** (-9 - shift), f32)} : {f32}")
            subb = t.op(f"{{r}} = arith.bitcast {subf} : {f32} to {i32}")
            is_sub = t.op(f"{{r}} = arith.cmpi eq, {e}, {t.c(0, i32)} : {i32}")
            bits = t.op(f"{{r}} = arith.select {is_sub}, {subb}, {normal} : {sel}")
            nan = t.op(f"{{r}} = arith.cmpi eq, {mag}, {t.c(0x7F, i32)} : {i32}")
            bits = t.op(f"{{r}} = arith.select {nan}, {t.c(0x7FC00000, i32)}, {bits} : {sel}")
            sg = t.op(f"{{r}} = arith.andi {c}, {t.c(0x80, i32)} : {i32}")
            sg = t.op(f"{{r}} = arith.shli {sg}, {t.c(24, i32)} : {i32}")
            bits = t.op(f"{{r}} = arith.ori {bits}, {sg} : {i32}")
        else:  # e8m0: 2^(c - 127) (code 0: the subnormal 2^-127, 255: NaN), times 2^-shift
            nb = t.op(f"{{r}} = arith.shli {c}, {t.c(23, i32)} : {i32}")
            z = t.op(f"{{r}} = arith.cmpi eq, {c}, {t.c(0, i32)} : {i32}")
            nb = t.op(f"{{r}} = arith.select {z}, {t.c(0x00400000, i32)}, {nb} : {sel}")
            nan = t.op(f"{{r}} = arith.cmpi eq, {c}, {t.c(255, i32)} : {i32}")
            bits = t.op(f"{{r}} = arith.select {nan}, {t.c(0x7FC00000, i32)}, {nb} : {sel}")
            f = t.op(f"{{r}} = arith.bitcast {bits} : {i32} to {f32}")
            if not shift:
                return f
            return t.op(f"{{r}} = arith.mulf {f}, {t.c(2.0 ** -shift, f32)} : {f32}")
        return t.op(f"{{r}} = arith.bitcast {bits} : {i32} to {f32}")

    def chunk(self, side: str, mem: str, smem: str | None, row: str, kk: str, K: str,
              scaled: bool, factor: str | None = None, order: bool = False,
              ahead: int = 1) -> str:
        """vector<C x f32>: C values of a side's row ``row`` (absolute, in units of K) at
        column ``kk``: plain values, integer units, or scaled values (``scaled``); ``order``
        (C = 32): in :data:`F4_ORDER` (mxfp4 codes by :meth:`f4_bf16_units`, other values
        permuted)."""
        t, C = self.t, self.C
        f = self.s.fmt(side)
        vf = _vt(C, "f32")
        base = t.op(f"{{r}} = arith.muli {row}, {K} : index")
        at = t.op(f"{{r}} = arith.addi {base}, {kk} : index")
        if f is None:
            pt = getattr(self.s, side)
            v = t.op(f"{{r}} = vector.load {mem}[{at}] : memref<?x{pt}>, {_vt(C, pt)}")
            if pt != "f32":
                v = t.op(f"{{r}} = arith.extf {v} : {_vt(C, pt)} to {vf}")
            return self.in_order(v) if order else v
        if side == "rhs":  # the codes ``ahead`` rows on, here
            self.prefetch_codes(mem, at, ahead)
        if order and f.bits == 4 and not f.is_nvfp4:
            v = self.f4_bf16_units(side, self.codes(side, mem, at, split=True))
        else:
            v8 = self.codes(side, mem, at)
            v = (self.integer_units(side, v8) if integer_shift(f) is not None else
                 self.f16_decode(side, v8, 0))
            if order:
                v = self.in_order(v)
        if not scaled:
            return v
        if factor is None:
            blk = t.op(f"{{r}} = arith.divui {at}, {t.c(self.s.k(side))} : index")
            factor = self.factor(side, smem, blk)
        fv = t.op(f"{{r}} = vector.broadcast {factor} : f32 to {vf}")
        return t.op(f"{{r}} = arith.mulf {v}, {fv} : {vf}")

    # -- the kernel --------------------------------------------------------------------------
    def function(self) -> str:
        s, t = self.s, self.t
        dims, (Bt, M, N, K) = self.open_function(s.name, 5)
        c0, c1 = t.c(0), t.c(1)
        self.M, self.N, self.K = M, N, K
        # dims[4]: 0 the f32 paths, else the exact f64 contraction (see range_function)
        in_f64 = t.op(f"{{r}} = arith.cmpi ne, {dims[4]}, {t.c(0, 'i64')} : i64")
        cnp = t.c(NP)
        npan = t.op(f"{{r}} = arith.ceildivui {N}, {cnp} : index")
        a_mx = s.fmt("lhs") is not None
        # scratches: A's rows (M rounded up to MR_STREAM, at least STREAM_M and the GEMM's MR
        # rows, at most the streaming path's), B's panel, factors
        up8 = t.op(f"{{r}} = arith.ceildivui {M}, {t.c(MR_STREAM)} : index")
        up8 = t.op(f"{{r}} = arith.muli {up8}, {t.c(MR_STREAM)} : index")
        up = t.op(f"{{r}} = arith.maxui {up8}, {t.c(max(STREAM_M, MR))} : index")
        self.srows = t.op(f"{{r}} = arith.minui {up}, {t.c(max(s.stream_m, MR))} : index")
        mk = t.op(f"{{r}} = arith.muli {self.srows}, {K} : index")
        self.ad = t.op(f"{{r}} = memref.alloc({mk}) : memref<?xf32>")
        # B's decoded panel (the f32 GEMMs'), and its K-major copy (:meth:`kn_gemm_panel`):
        # none for the streaming rows (a GEMV allocates nothing it does not use)
        pk = t.op(f"{{r}} = arith.muli {cnp}, {K} : index")
        big = t.op(f"{{r}} = arith.cmpi ugt, {M}, {t.c(s.stream_m)} : index")
        npk = t.op(f"{{r}} = arith.select {big}, {pk}, {t.c(0)} : index")
        # (the packed GEMMs pack their own panels)
        self.bd = t.op(f"{{r}} = memref.alloc({t.c(0) if s.packed_gemm else npk}) : "
                       "memref<?xf32>")
        if self.kn_gemm():
            self.bt = t.op(f"{{r}} = memref.alloc({npk}) : memref<?xf32>")
        self.blockwise = s.blockwise
        if self.blockwise or self.exact_bf16:  # the streaming path's B factors: a panel's
            # columns x blocks
            self.nblk_r = t.op(f"{{r}} = arith.divui {K}, {t.c(s.k('rhs'))} : index")
            fb = t.op(f"{{r}} = arith.muli {cnp}, {self.nblk_r} : index")
            self.bfs = t.op(f"{{r}} = memref.alloc({fb}) : memref<?xf32>")
        if s.exact:  # the streaming path's A factors
            nblk = t.op(f"{{r}} = arith.divui {K}, {t.c(s.k('rhs'))} : index")
            self.nblk = nblk
            mb = t.op(f"{{r}} = arith.muli {self.srows}, {nblk} : index")
            self.af = t.op(f"{{r}} = memref.alloc({mb}) : memref<?xf32>")
        if self.grouped:  # A's rows' spread per group (copy_rows), a tile's f64 sums
            ng = t.op(f"{{r}} = arith.divui {self.nblk}, {t.c(self.group_blocks())} : index")
            self.ngroups = ng
            ng1 = t.op(f"{{r}} = arith.addi {ng}, {c1} : index")
            self.arng = t.op(f"{{r}} = memref.alloc({ng1}) : memref<?xi32>")
            # (at most MR_STREAM rows x NR_PIPED_FEW columns x 16 lanes)
            self.acc64_t = f"memref<{MR_STREAM * NR_PIPED_FEW * 16}xf64>"
            self.acc64 = t.op(f"{{r}} = memref.alloc() {{{{alignment = 64 : i64}}}} : "
                              f"{self.acc64_t}")
        # the piped streaming tiles' copy of A's rows (plain f32, or bf16 on bf16 dot
        # products) in slabs of a step's values of every row (:meth:`copy_rows`), and the
        # batch it holds
        self.ap = None
        if self.piped and (s.lhs == "f32" or self.bf_stream):
            lt = self.ap_type = "bf16" if self.a_bf16 else s.lhs
            self.lay = self.step_values() if self.bf_stream else self.C
            kl = t.op(f"{{r}} = arith.ceildivui {K}, {t.c(self.lay)} : index")
            self.kl = t.op(f"{{r}} = arith.muli {kl}, {t.c(self.lay)} : index")
            n = t.op(f"{{r}} = arith.muli {self.srows}, {self.kl} : index")
            self.ap = t.op(f"{{r}} = memref.alloc({n}) {{{{alignment = 64 : i64}}}} : "
                           f"memref<?x{lt}>")
            # the slabs' rows: M (one or two rows: tiles of M rows), else M rounded up to
            # MR_STREAM (the last tile's rows past M: zeros)
            few = t.op(f"{{r}} = arith.cmpi ule, {M}, {t.c(2)} : index")
            self.arows = t.op(f"{{r}} = arith.select {few}, {M}, {up8} : index")
            # the rows of a slab: a tile's (each tile's rows then contiguous over all of K:
            # 256 rows in slabs of all rows put every step of a tile on another page)
            self.grows = t.op(f"{{r}} = arith.minui {self.arows}, {t.c(MR_STREAM)} : index")
            self.apb = t.op("{r} = memref.alloca() : memref<1xindex>")
            t.do(f"memref.store {Bt}, {self.apb}[{c0}] : memref<1xindex>")
        pt = self.pt
        if s.packed_gemm:  # the GEMM's packed pairs or quads (:meth:`int_gemm`)
            mbw = t.op(f"{{r}} = memref.load %dims[{t.c(5)}] : memref<?xi64>")
            self.mbw = t.op(f"{{r}} = arith.index_cast {mbw} : i64 to index")
            if not s.exact:
                self.nblk = t.op(f"{{r}} = arith.divui {K}, {t.c(s.k('rhs'))} : index")
            half = t.op(f"{{r}} = arith.divui {K}, {t.c(self.G)} : index")
            if self.amx:  # rows of whole tiles of K (AMX_K values, zero past K)
                half = t.op(f"{{r}} = arith.ceildivui {K}, {t.c(AMX_K)} : index")
                half = t.op(f"{{r}} = arith.muli {half}, {t.c(AMX_K // 2)} : index")
            self.kq = half  # groups per packed row of A (per column of B)
            n = t.op(f"{{r}} = arith.muli {cnp}, {half} : index")
            self.bq = self.packed_alloc(n, pt)
            if self.a_packed:  # A's rows, every tile of the batch packed once per call
                # (rows padded to tiles; plain bf16 rows are read as stored)
                self.alloc_packed_a(M, half, Bt)
            n = t.op(f"{{r}} = arith.muli {cnp}, {self.nblk} : index")
            self.bsum = t.op(f"{{r}} = memref.alloc({n}) : memref<?x{self.st}>")
            self.bfq = t.op(f"{{r}} = memref.alloc({n}) : memref<?xf32>")

        def unit_of(u: str) -> None:
            b, n0, ncols = self.panel_of(u, npan, cnp)
            arow0 = t.op(f"{{r}} = arith.muli {b}, {M} : index")  # A's first row
            bn = t.op(f"{{r}} = arith.muli {b}, {N} : index")
            brow0 = t.op(f"{{r}} = arith.addi {bn}, {n0} : index")  # B's first row
            self.unit = (b, n0, ncols, arow0, brow0)

        def unit(u: str, _: list[str]) -> list[str]:
            unit_of(u)
            b, n0, ncols, arow0, brow0 = self.unit

            def stream() -> None:
                self.exact = s.exact
                self.acc_t = EXACT_ACC if self.exact else "f32"
                a_direct = not a_mx and s.lhs == "f32"
                af = getattr(self, "af", None)
                one = t.op(f"{{r}} = arith.cmpi ule, {M}, {t.c(2)} : index")
                # one or two rows: one row at a time against NR_STREAM columns, accumulators
                # as wide as a chunk (piped: two rows as one tile, one row too where the
                # codes decode by tables -- f32 rows too, ONE_ROW_TABLES_PIPED -- or by placed
                # bits on bf16 dot products); more: tiles of MR_STREAM rows against
                # NR_STREAM_TILE columns (the columns' chunks decoded once per tile)
                def one_by_one() -> None:
                    # A's M rows (<= 2) decoded once (or, for the f4 decode in F4_ORDER,
                    # permuted into that order once), then one row at a time
                    if not a_direct or self.f4_fast:
                        self.prepare("lhs", arow0, c0, M, self.ad, af, order=self.f4_fast)
                    if self.blockwise:
                        self.prepare_factors(brow0, ncols)
                    self.rows(c0, M, 1, stream=True, a_direct=a_direct and not self.f4_fast,
                              nr=NR_STREAM)

                def few() -> None:
                    if not (self.piped and self.ap is not None):
                        one_by_one()
                        return

                    def tile(m: int) -> None:  # one piped tile of the M rows
                        self.copy_rows()
                        if not self.scale_tables(m):
                            self.prepare_factors(brow0, ncols, piped=True)
                        wide = not self.bf_stream and self.C == 32 and self.table_decode(m)
                        self.rows(c0, M, m, stream=True, a_direct=a_direct,
                                  nr=NR_PIPED_FEW_F32_32 if wide else NR_PIPED_FEW,
                                  piped=True)

                    m1 = t.op(f"{{r}} = arith.cmpi eq, {M}, {c1} : index")
                    # (one row of an exact pair by placed bits -- mxint8 -- measured 0.93x
                    # the FMAs' integer block sums: it keeps them)
                    one = (self.table_decode(1) and (self.bf_stream or ONE_ROW_TABLES_PIPED)
                           or self.bf_stream and self.placed_decode() and not self.exact)
                    t.if_(m1, (lambda: tile(1)) if one else one_by_one, lambda: tile(2))

                def many() -> None:
                    if not a_direct and not self.bf_stream:  # A's M rows (<= stream_m)
                        # decoded once
                        self.prepare("lhs", arow0, c0, M, self.ad, af)
                    if self.exact and not self.exact_bf16:
                        self.rows(c0, M, MR_STREAM_EXACT, stream=True, a_direct=a_direct, nr=1)
                        return
                    # up to MR_STREAM_EXACT rows: one tile that size (a tile of MR_STREAM
                    # would compute its clamped rows for nothing)
                    piped = self.piped
                    if self.ap is not None:
                        self.copy_rows()
                    if piped and not self.scale_tables(MR_STREAM_EXACT):  # the panel's
                        # block factors, once: off the decode's chain (5-25% faster on a Zen 4)
                        self.prepare_factors(brow0, ncols, piped=True)
                    le = t.op(f"{{r}} = arith.cmpi ule, {M}, {t.c(MR_STREAM_EXACT)} : index")
                    # (the exact tiles one column at a time: two spilled their f64 lanes; not
                    # those summing groups in f32, whose f64 lanes wait in memory)
                    wide = self.grouped
                    nr = 1 if self.exact and not wide else NR_STREAM_TILE[s.path]
                    if (self.bf_stream and not self.exact and self.C == 32
                            and self.table_decode(MR_STREAM)):
                        nr = NR_STREAM_TILE_TABLES  # (the tiles of more than 4 rows)
                    t.if_(le, lambda: self.rows(c0, M, MR_STREAM_EXACT, stream=True,
                                                a_direct=a_direct,
                                                nr=(nr if wide else 1) if self.exact else
                                                self.few_columns(),
                                                piped=piped),
                          lambda: self.rows(c0, M, MR_STREAM, stream=True, a_direct=a_direct,
                                            nr=nr, piped=piped))

                t.if_(one, few, many)

            def gemm() -> None:
                self.exact, self.acc_t = False, "f32"  # scaled values in the panels
                if self.kn_gemm():
                    self.kn_gemm_panel(arow0, n0, brow0, ncols)
                    return
                self.prepare("rhs", brow0, c0, ncols, self.bd, getattr(self, "bf", None))
                a_direct = not a_mx and s.lhs == "f32"

                def tile(m0: str, _: list[str]) -> list[str]:
                    if not a_direct:
                        r0 = t.op(f"{{r}} = arith.addi {arow0}, {m0} : index")
                        rem = t.op(f"{{r}} = arith.subi {M}, {m0} : index")
                        cnt = t.op(f"{{r}} = arith.minui {rem}, {t.c(MR)} : index")
                        self.prepare("lhs", r0, c0, cnt, self.ad, getattr(self, "af", None),
                                     pad_to=MR)
                    self.tile(m0, MR, stream=False, a_direct=a_direct, a_local=not a_direct)
                    return []

                t.for_(c0, M, t.c(MR), [], tile)

            if s.packed_gemm:  # the unit loop's f32 units stream: GEMMs run outside it
                t.if_(in_f64, self.f64_unit, stream)
            else:
                small = t.op(f"{{r}} = arith.cmpi ule, {M}, {t.c(s.stream_m)} : index")
                t.if_(in_f64, self.f64_unit, lambda: t.if_(small, stream, gemm))
            return []

        if not s.packed_gemm:
            t.for_("%u0", "%u1", c1, [], unit)
        else:  # the packed GEMM: units of (block of rows of A, batch, panel)
            big = t.op(f"{{r}} = arith.cmpi ugt, {M}, {t.c(s.stream_m)} : index")
            f32 = t.op(f"{{r}} = arith.cmpi eq, {dims[4]}, {t.c(0, 'i64')} : i64")
            go = t.op(f"{{r}} = arith.andi {big}, {f32} : i1")

            def blocks() -> None:  # units: (block of mbw rows of A, batch, panel)
                units0 = t.op(f"{{r}} = arith.muli {Bt}, {npan} : index")

                def each(u: str, _: list[str]) -> list[str]:
                    mb = t.op(f"{{r}} = arith.divui {u}, {units0} : index")
                    unit_of(t.op(f"{{r}} = arith.remui {u}, {units0} : index"))
                    r0 = t.op(f"{{r}} = arith.muli {mb}, {self.mbw} : index")
                    (self.amx_gemm if self.amx else self.int_gemm)(r0)
                    return []

                t.for_("%u0", "%u1", c1, [], each)

            t.if_(go, blocks, lambda: t.for_("%u0", "%u1", c1, [], unit))
        t.do(f"memref.dealloc {self.ad} : memref<?xf32>")
        t.do(f"memref.dealloc {self.bd} : memref<?xf32>")
        if self.kn_gemm():
            t.do(f"memref.dealloc {self.bt} : memref<?xf32>")
        if self.ap is not None:
            t.do(f"memref.dealloc {self.ap} : memref<?x{self.ap_type}>")
        if s.exact:
            t.do(f"memref.dealloc {self.af} : memref<?xf32>")
        if s.packed_gemm:
            bufs = [(self.bsum, self.st), (self.bfq, "f32")]
            raws = [self.bq]
            if self.a_packed:
                bufs.append((self.aqf, "f32"))
                raws.append(self.aq)
            for buf, ty in bufs:
                t.do(f"memref.dealloc {buf} : memref<?x{ty}>")
            for buf in raws:
                t.do(f"memref.dealloc {self.raw[buf]} : memref<?xi8>")
        if self.blockwise or self.exact_bf16:
            t.do(f"memref.dealloc {self.bfs} : memref<?xf32>")
        if self.grouped:
            t.do(f"memref.dealloc {self.arng} : memref<?xi32>")
            t.do(f"memref.dealloc {self.acc64} : {self.acc64_t}")
        return self.close_function()

    def broadcast_fmas(self, rows: int, a_of: Callable[[int], str], vs: Sequence[str],
                       accs: Sequence[str], vt: str) -> list[str]:
        """``accs`` (per row, per vector of ``vs``, all of type ``vt``) plus, per row i <
        ``rows``, its f32 value ``a_of(i)`` broadcast times each vector of ``vs``: one FMA a
        row and vector."""
        t = self.t
        out = list(accs)
        for i in range(rows):
            a = t.op(f"{{r}} = vector.broadcast {a_of(i)} : f32 to {vt}")
            for j, v in enumerate(vs):
                x = i * len(vs) + j
                out[x] = t.op(f"{{r}} = vector.fma {a}, {v}, {accs[x]} : {vt}")
        return out

    def kn_gemm(self) -> bool:
        """Whether the f32 GEMM path takes :meth:`kn_gemm_panel` (plain f32 rows against MX
        weights, :data:`F32_KN_GEMM`) rather than :meth:`tile`'s 6 x 2 tiles along K."""
        s = self.s
        return F32_KN_GEMM and s.lhs == "f32" and s.fmt("rhs") is not None and not s.packed_gemm

    def kn_gemm_panel(self, arow0: str, n0: str, brow0: str, ncols: str) -> None:
        """The f32 GEMM of the unit's panel (``ncols`` columns of B from ``n0``, rows
        ``brow0`` on; A's M rows from ``arow0``) as the K-major kernel's tiles do it: the
        panel's scaled values decoded once (:meth:`prepare`, its columns padded to NP by the
        last) and transposed 16 x 16 at a time into a K-major scratch (``bt``: row k's NP
        values together), then tiles of 8 rows (the last tile's rows past M read row M - 1,
        their results dropped) x NP columns in 16 accumulators over the whole of K: per row
        of K two vectors of the panel and one FMA a row and vector with A's value broadcast.
        Each result the f32 sum over K, in order, of exact products."""
        t, K, M, N = self.t, self.K, self.M, self.N
        c0, v16 = t.c(0), _vt(16, "f32")
        self.prepare("rhs", brow0, c0, ncols, self.bd, None, pad_to=NP)

        def add(x: str, y: str) -> str:
            return t.op(f"{{r}} = arith.addi {x}, {y} : index")

        def mul(x: str, y: str | int) -> str:
            return t.op(f"{{r}} = arith.muli {x}, {t.c(y) if isinstance(y, int) else y} : index")

        def block(k0: str, _: list[str]) -> list[str]:  # 16 rows of K, NP columns
            for h in range(0, NP, 16):
                vs = [t.op(f"{{r}} = vector.load {self.bd}[{add(mul(t.c(h + i), K), k0)}] : "
                           f"memref<?xf32>, {v16}") for i in range(16)]
                for j, v in enumerate(_transpose(t, vs, "f32")):
                    o = add(mul(add(k0, t.c(j)), NP), t.c(h))
                    t.do(f"vector.store {v}, {self.bt}[{o}] : memref<?xf32>, {v16}")
            return []

        def one(k: str, _: list[str]) -> list[str]:  # a row of K past the last 16
            for n in range(NP):
                v = t.op(f"{{r}} = memref.load {self.bd}[{add(mul(t.c(n), K), k)}] : "
                         "memref<?xf32>")
                t.do(f"memref.store {v}, {self.bt}[{add(mul(k, NP), t.c(n))}] : memref<?xf32>")
            return []

        t.for_chunks(K, 16, block, one)
        last = t.op(f"{{r}} = arith.subi {M}, {t.c(1)} : index")

        def tile(m0: str, _: list[str]) -> list[str]:
            rows = [add(arow0, t.op(f"{{r}} = arith.minui {add(m0, t.c(i))}, {last} : index"))
                    for i in range(8)]
            bases = [mul(r, K) for r in rows]

            def step(k: str, accs: list[str]) -> list[str]:
                o = mul(k, NP)
                bv = [t.op(f"{{r}} = vector.load {self.bt}[{add(o, t.c(h))}] : memref<?xf32>, "
                           f"{v16}") for h in (0, 16)]
                return self.broadcast_fmas(8, lambda i: t.op(
                    f"{{r}} = memref.load %a[{add(bases[i], k)}] : memref<?xf32>"), bv, accs, v16)

            zero = t.c(0.0, v16)
            accs = t.for_(c0, K, t.c(1), [(zero, v16)] * 16, step)
            for i in range(8):
                mi = add(m0, t.c(i))

                def store(i=i, mi=mi) -> None:
                    ob = add(mul(add(arow0, mi), N), n0)
                    for h in (0, 1):
                        left = t.op(f"{{r}} = arith.subi {ncols}, {t.c(16 * h)} : index")
                        left = t.op(f"{{r}} = arith.maxsi {left}, {c0} : index")
                        mask = t.op(f"{{r}} = vector.create_mask {left} : vector<16xi1>")
                        t.do(f"vector.maskedstore %out[{add(ob, t.c(16 * h))}], {mask}, "
                             f"{accs[2 * i + h]} : memref<?xf32>, vector<16xi1>, {v16}")

                t.if_(t.op(f"{{r}} = arith.cmpi ult, {mi}, {M} : index"), store)
            return []

        t.for_(c0, M, t.c(8), [], tile)

    def open_function(self, name: str, ndims: int) -> tuple[list[str], list[str]]:
        """Opens ``func.func @name`` with the kernel's signature (:meth:`args`): (the first
        ``ndims`` values of ``%dims``, i64; its first four as indices: batch, M, N, K)."""
        t = self.t
        t.do(f"func.func @{name}({', '.join(f'{n}: {ty}' for n, ty in self.args())}) {{")
        t.indent = 4
        dims = [t.op(f"{{r}} = memref.load %dims[{t.c(i)}] : memref<?xi64>")
                for i in range(ndims)]
        return dims, [t.op(f"{{r}} = arith.index_cast {d} : i64 to index") for d in dims[:4]]

    def close_function(self) -> str:
        """Returns from and closes the function :meth:`open_function` opened: the module's
        constants (:attr:`globals`) and the function, as text."""
        t = self.t
        t.do("return")
        t.indent = 2
        t.do("}")
        return "\n".join([*self.globals.values(), *t.lines])

    def panel_of(self, u: str, npan: str, cnp: str) -> tuple[str, str, str]:
        """(batch, first column, columns) of work unit ``u``: batch ``u / npan``, panel
        ``u % npan`` of ``cnp`` columns of B, the last one cut at N."""
        t = self.t
        b = t.op(f"{{r}} = arith.divui {u}, {npan} : index")
        p = t.op(f"{{r}} = arith.remui {u}, {npan} : index")
        n0 = t.op(f"{{r}} = arith.muli {p}, {cnp} : index")
        left = t.op(f"{{r}} = arith.subi {self.N}, {n0} : index")
        return b, n0, t.op(f"{{r}} = arith.minui {left}, {cnp} : index")

    # -- the GEMM's byte dot products ------------------------------------------------------
    def packed_alloc(self, n: str, pt: str) -> str:
        """A scratch of ``n`` values of ``pt`` (i16 / i32) for the packed GEMM: a view of
        bytes (:attr:`raw` keeps them, for the dealloc and AMX's bf16 views of them)."""
        t = self.t
        nb = t.op(f"{{r}} = arith.muli {n}, {t.c(int(pt[1:]) // 8)} : index")
        raw = t.op(f"{{r}} = memref.alloc({nb}) : memref<?xi8>")
        v = t.op(f"{{r}} = memref.view {raw}[{t.c(0)}][{n}] : memref<?xi8> to memref<?x{pt}>")
        self.raw[v] = raw
        return v

    def bf16_pair(self, at: str) -> str:
        """i32: plain bf16 A's two values at elements ``at`` and ``at + 1``, as stored (one
        32-bit load: a pair of K positions for ``vdpbf16ps``)."""
        t = self.t
        v = t.op(f"{{r}} = vector.load %a[{at}] : memref<?xbf16>, vector<2xbf16>")
        v = t.op(f"{{r}} = vector.bitcast {v} : vector<2xbf16> to vector<1xi32>")
        return t.op(f"{{r}} = vector.extract {v}[0] : i32 from vector<1xi32>")

    def bf16_bits(self, v: str) -> str:
        """vector<C x i16>: the high halves of the f32 vector ``v``'s lanes -- their bf16
        bits, exact where each value has at most 8 significant bits (its low half zero)."""
        t, C = self.t, self.C
        vi = _vt(C, "i32")
        w = t.op(f"{{r}} = arith.bitcast {v} : {_vt(C, 'f32')} to {vi}")
        w = t.op(f"{{r}} = arith.shrui {w}, {t.c(16, vi)} : {vi}")
        return t.op(f"{{r}} = arith.trunci {w} : {vi} to {_vt(C, 'i16')}")

    def packed_units(self, side: str, row: str, kk: str, factor: str | None = None) -> str:
        """vector<C x i8> (byte dot products) or vector<C x i16> (word dot products): the
        integer units of C elements of a side's row ``row`` at column ``kk`` (e2m1: one
        byte shuffle; mxint8: the codes); bf16 dot products: vector<C x i16>, the bf16 bits
        of the elements' values (integer units, or f8 values) times ``factor``, the block's
        factor (:meth:`bf16_bits`)."""
        t, C = self.t, self.C
        mem, _ = self.side_mems(side)
        f = self.s.fmt(side)
        ut = self.ut
        base = t.op(f"{{r}} = arith.muli {row}, {self.K} : index")
        at = t.op(f"{{r}} = arith.addi {base}, {kk} : index")
        v8 = self.codes(side, mem, at)
        if self.scaled and PLACED_DECODE and self.placed_ok(side):
            return self.placed_bits(side, v8, factor)
        if self.scaled:  # the scaled value (exact in bf16 under the range test)
            v = (self.integer_units(side, v8) if integer_shift(f) is not None else
                 self.f16_decode(side, v8, 0))
            fv = t.op(f"{{r}} = vector.broadcast {factor} : f32 to {_vt(C, 'f32')}")
            return self.bf16_bits(t.op(f"{{r}} = arith.mulf {v}, {fv} : {_vt(C, 'f32')}"))
        u = self.f4_table(side, v8) if f.bits == 4 else (v8 if f.is_int else None)
        if u is None:
            v = self.integer_units(side, v8)
            return t.op(f"{{r}} = arith.fptosi {v} : {_vt(C, 'f32')} to {_vt(C, ut)}")
        if self.word:
            return t.op(f"{{r}} = arith.extsi {u} : {_vt(C, 'i8')} to {_vt(C, 'i16')}")
        return u

    def int_pack(self, side: str, row0: str, count: str, rows: str, dst: str, fdst: str,
                 sdst: str | None = None) -> None:
        """Packs rows ``row0 + i`` (i < ``rows``, clamped below ``count``) of a side for
        :meth:`int_gemm` into ``dst`` as groups of G integer units (G = 2, the pair of K
        positions 2p, 2p + 1: an i16 of two bytes, or an i32 of two i16 for the word dot
        products; G = 4 for ``vpdpbusd``, the quad 4p .. 4p + 3: an i32 of four bytes):

        * A (lhs): row-major, row i's group p at ``dst[i * K / G + p]`` (one vector store
          per chunk), bytes offset by :attr:`DotSpec.byte_offset` o to unsigned ones; the
          block factors at ``fdst[i * nblk + blk]``;
        * B (rhs, the unit's :data:`NP` columns): group-major, column i's group p at
          ``dst[p * NP + i]`` (one 32-byte load gives 16 columns' pair of bytes, or 8
          columns' pair of words or quad of bytes); the block factors at ``fdst[blk * NP +
          pos]`` (pos: pairs of bytes order each group of 16 columns as :meth:`int_gemm`'s
          accumulators do, the even columns then the odd ones; otherwise pos = i); bytes:
          the block's sums of units times -o at ``sdst[blk * NP + i]``
          (:meth:`int_pack_columns`)."""
        t, C, K, s = self.t, self.C, self.K, self.s
        c0, c1 = t.c(0), t.c(1)
        last = t.op(f"{{r}} = arith.subi {count}, {c1} : index")
        if side == "rhs":  # rows: the panel's NP columns
            self.int_pack_columns(row0, last, dst, fdst, sdst)
            return
        _, smem = self.side_mems(side)
        kb = s.k(side)
        off, G, ut, pt = s.byte_offset, self.G, self.ut, self.pt
        vu, vp = _vt(C, ut), _vt(C // G, pt)

        def row(i: str, _: list[str]) -> list[str]:
            li = t.op(f"{{r}} = arith.minui {i}, {last} : index")
            src = t.op(f"{{r}} = arith.addi {row0}, {li} : index")
            fo = t.op(f"{{r}} = arith.muli {i}, {self.nblk} : index")
            do = t.op(f"{{r}} = arith.muli {i}, {self.kq} : index")

            def block(blk: str, _: list[str]) -> list[str]:
                si = t.op(f"{{r}} = arith.muli {src}, {self.nblk} : index")
                si = t.op(f"{{r}} = arith.addi {si}, {blk} : index")
                f = self.factor(side, smem, si)
                o = t.op(f"{{r}} = arith.addi {fo}, {blk} : index")
                t.do(f"memref.store {f}, {fdst}[{o}] : memref<?xf32>")
                k0 = t.op(f"{{r}} = arith.muli {blk}, {t.c(kb)} : index")

                def chunk(q: str, _: list[str]) -> list[str]:
                    kk = t.op(f"{{r}} = arith.addi {k0}, {q} : index")
                    u = self.packed_units(side, src, kk, f if self.scaled else None)
                    p0 = t.op(f"{{r}} = arith.divui {kk}, {t.c(G)} : index")
                    if self.byte:  # wrapping i8: o = 128 turns mxint8's codes into their
                        # offset bytes
                        u = t.op(f"{{r}} = arith.addi {u}, "
                                 f"{t.c(off if off < 128 else off - 256, vu)} : {vu}")
                    pairs = t.op(f"{{r}} = vector.bitcast {u} : {vu} to {vp}")
                    o = t.op(f"{{r}} = arith.addi {do}, {p0} : index")
                    t.do(f"vector.store {pairs}, {dst}[{o}] : memref<?x{pt}>, {vp}")
                    return []

                if kb == C:
                    chunk(c0, [])
                else:
                    t.for_(c0, t.c(kb), t.c(C), [], chunk)
                return []

            t.for_(c0, self.nblk, c1, [], block)
            if self.amx:  # the groups past K up to a whole tile: zeros
                def pad(p: str, _: list[str]) -> list[str]:
                    o = t.op(f"{{r}} = arith.addi {do}, {p} : index")
                    t.do(f"memref.store {t.c(0, pt)}, {dst}[{o}] : memref<?x{pt}>")
                    return []

                t.for_(t.op(f"{{r}} = arith.divui {K}, {t.c(G)} : index"), self.kq, c1, [],
                       pad)
            return []

        t.for_(c0, rows, c1, [], row)

    def factor_pos(self, i: str) -> str:
        """Where B's column ``i`` of the panel keeps its block factors in the packed GEMM's
        row of factors (:meth:`int_pack`): pairs of bytes (``vpmaddubsw``) order each group
        of 16 columns as :meth:`int_gemm`'s accumulators do, the even columns then the odd
        ones; otherwise ``i``."""
        t = self.t
        if not self.byte or self.quad:
            return i
        lane = t.op(f"{{r}} = arith.remui {i}, {t.c(16)} : index")
        grp = t.op(f"{{r}} = arith.subi {i}, {lane} : index")
        odd = t.op(f"{{r}} = arith.remui {lane}, {t.c(2)} : index")
        hlf = t.op(f"{{r}} = arith.divui {lane}, {t.c(2)} : index")
        pos = t.op(f"{{r}} = arith.muli {odd}, {t.c(8)} : index")
        pos = t.op(f"{{r}} = arith.addi {pos}, {hlf} : index")
        return t.op(f"{{r}} = arith.addi {grp}, {pos} : index")

    def int_pack_columns(self, row0: str, last: str, dst: str, fdst: str,
                         sdst: str | None) -> None:
        """:meth:`int_pack` of B's panel (:data:`NP` columns ``row0 + i``, clamped at
        ``last``) P = C / G columns at a time: per block and chunk, the P columns' P groups
        each (a vector a column, as A's rows are formed) transposed (:func:`_transpose`)
        into P vectors of one group of the P columns, each stored whole at ``dst[p * NP +
        i]`` (a scalar store per group and column measured 1.00-1.09x slower at 1024^3:
        MXFP8's GEMM 1.09x, BENCHMARKS.md, seventeenth session)."""
        t, C, s = self.t, self.C, self.s
        _, smem = self.side_mems("rhs")
        kb = s.k("rhs")
        c0, c1 = t.c(0), t.c(1)
        off, G, st, ut, pt = s.byte_offset, self.G, self.st, self.ut, self.pt
        P = C // G
        vu, vp = _vt(C, ut), _vt(P, pt)
        byte_sums = self.byte

        def columns(i0: str, _: list[str]) -> list[str]:
            cols, srcs, poss = [], [], []
            for c in range(P):
                i = t.op(f"{{r}} = arith.addi {i0}, {t.c(c)} : index")
                li = t.op(f"{{r}} = arith.minui {i}, {last} : index")
                cols.append(i)
                srcs.append(t.op(f"{{r}} = arith.addi {row0}, {li} : index"))
                poss.append(self.factor_pos(i))

            def block(blk: str, _: list[str]) -> list[str]:
                bo = t.op(f"{{r}} = arith.muli {blk}, {t.c(NP)} : index")
                fs = []
                for pos, src in zip(poss, srcs):
                    si = t.op(f"{{r}} = arith.muli {src}, {self.nblk} : index")
                    si = t.op(f"{{r}} = arith.addi {si}, {blk} : index")
                    f = self.factor("rhs", smem, si)
                    o = t.op(f"{{r}} = arith.addi {bo}, {pos} : index")
                    t.do(f"memref.store {f}, {fdst}[{o}] : memref<?xf32>")
                    fs.append(f)
                k0 = t.op(f"{{r}} = arith.muli {blk}, {t.c(kb)} : index")

                def chunk(q: str, acc: list[str]) -> list[str]:
                    kk = t.op(f"{{r}} = arith.addi {k0}, {q} : index")
                    groups, out = [], []
                    for c, src in enumerate(srcs):
                        u = self.packed_units("rhs", src, kk, fs[c] if self.scaled else None)
                        if byte_sums:
                            w = t.op(f"{{r}} = arith.extsi {u} : {vu} to {_vt(C, st)}")
                            r = t.op(f"{{r}} = vector.reduction <add>, {w} : {_vt(C, st)} "
                                     f"into {st}")
                            out.append(t.op(f"{{r}} = arith.addi {acc[c]}, {r} : {st}"))
                        groups.append(t.op(f"{{r}} = vector.bitcast {u} : {vu} to {vp}"))
                    p0 = t.op(f"{{r}} = arith.divui {kk}, {t.c(G)} : index")
                    for p, v in enumerate(_transpose(t, groups, pt)):
                        o = t.op(f"{{r}} = arith.addi {p0}, {t.c(p)} : index")
                        o = t.op(f"{{r}} = arith.muli {o}, {t.c(NP)} : index")
                        o = t.op(f"{{r}} = arith.addi {o}, {i0} : index")
                        t.do(f"vector.store {v}, {dst}[{o}] : memref<?x{pt}>, {vp}")
                    return out

                inits = [(t.c(0, st), st)] * P if byte_sums else []
                if kb == C:
                    res = chunk(c0, [x for x, _ in inits])
                else:
                    res = t.for_(c0, t.c(kb), t.c(C), inits, chunk)
                for i, r in zip(cols, res):
                    neg = t.op(f"{{r}} = arith.muli {r}, {t.c(-off, st)} : {st}")
                    o = t.op(f"{{r}} = arith.addi {bo}, {i} : index")
                    t.do(f"memref.store {neg}, {sdst}[{o}] : memref<?x{st}>")
                return []

            t.for_(c0, self.nblk, c1, [], block)
            return []

        t.for_(c0, t.c(NP), t.c(P), [], columns)
        if self.amx:  # the groups past K up to a whole tile: zeros
            def pad(p: str, _: list[str]) -> list[str]:
                o = t.op(f"{{r}} = arith.muli {p}, {t.c(NP)} : index")
                for j in range(0, NP, 16):
                    oj = t.op(f"{{r}} = arith.addi {o}, {t.c(j)} : index")
                    t.do(f"vector.store {t.c(0, _vt(16, pt))}, {dst}[{oj}] : "
                         f"memref<?x{pt}>, {_vt(16, pt)}")
                return []

            t.for_(t.op(f"{{r}} = arith.divui {self.K}, {t.c(G)} : index"), self.kq, c1, [],
                   pad)

    def alloc_packed_a(self, M: str, half: str, Bt: str) -> None:
        """The packed GEMM's scratches of A's rows (:meth:`pack_a_block`): ``half`` groups a
        row for M rows padded to tiles, at most :data:`MB_INT`, their block factors, and the
        batch and first row they hold (none yet: batch ``Bt``, past the last)."""
        t, c0 = self.t, self.t.c(0)
        mp = t.op(f"{{r}} = arith.ceildivui {M}, {t.c(self.mr_int)} : index")
        mp = t.op(f"{{r}} = arith.muli {mp}, {t.c(self.mr_int)} : index")
        mp = t.op(f"{{r}} = arith.minui {mp}, {t.c(MB_INT)} : index")
        n = t.op(f"{{r}} = arith.muli {mp}, {half} : index")
        self.aq = self.packed_alloc(n, self.pt)
        if self.amx:  # the same bytes as bf16 tiles' rows; the results' 2 x 2 tiles
            k2 = t.op(f"{{r}} = arith.muli {half}, {t.c(2)} : index")
            self.aq2 = t.op(f"{{r}} = memref.view {self.raw[self.aq]}[{c0}][{mp}, {k2}] : "
                            f"memref<?xi8> to memref<?x?xbf16>")
            self.bq2 = t.op(f"{{r}} = memref.view {self.raw[self.bq]}[{c0}][{half}] : "
                            f"memref<?xi8> to memref<?x{2 * NP}xbf16>")
            self.cq = t.op(f"{{r}} = memref.alloca() : memref<{2 * AMX_ROWS}x{NP}xf32>")
        n = t.op(f"{{r}} = arith.muli {mp}, {self.nblk} : index")
        self.aqf = t.op(f"{{r}} = memref.alloc({n}) : memref<?xf32>")
        self.abatch = t.op("{r} = memref.alloca() : memref<2xindex>")
        t.do(f"memref.store {Bt}, {self.abatch}[{c0}] : memref<2xindex>")
        t.do(f"memref.store {c0}, {self.abatch}[{t.c(1)}] : memref<2xindex>")

    def pack_a_block(self, r0: str) -> str:
        """Packs the block of A's rows ``r0 + [0, mbw)`` of the unit's batch (``dims[5]``
        rows, padded to tiles of :data:`MR_INT` rows) unless the call's previous unit packed
        it; the block's end (a row)."""
        t, M = self.t, self.M
        b, _, _, arow0, _ = self.unit
        c0, c1 = t.c(0), t.c(1)
        pb = t.op(f"{{r}} = memref.load {self.abatch}[{c0}] : memref<2xindex>")
        pr = t.op(f"{{r}} = memref.load {self.abatch}[{c1}] : memref<2xindex>")
        fresh = t.op(f"{{r}} = arith.cmpi ne, {pb}, {b} : index")
        moved = t.op(f"{{r}} = arith.cmpi ne, {pr}, {r0} : index")
        fresh = t.op(f"{{r}} = arith.ori {fresh}, {moved} : i1")
        rem = t.op(f"{{r}} = arith.subi {M}, {r0} : index")
        rows = t.op(f"{{r}} = arith.minui {rem}, {self.mbw} : index")  # of this block

        def pack_a() -> None:
            mp = t.op(f"{{r}} = arith.ceildivui {rows}, {t.c(self.mr_int)} : index")
            mp = t.op(f"{{r}} = arith.muli {mp}, {t.c(self.mr_int)} : index")
            first = t.op(f"{{r}} = arith.addi {arow0}, {r0} : index")
            self.int_pack("lhs", first, rows, mp, self.aq, self.aqf)
            t.do(f"memref.store {b}, {self.abatch}[{c0}] : memref<2xindex>")
            t.do(f"memref.store {r0}, {self.abatch}[{c1}] : memref<2xindex>")

        t.if_(fresh, pack_a)
        return t.op(f"{{r}} = arith.addi {r0}, {rows} : index")

    def amx_gemm(self, r0: str) -> None:
        """The unit's GEMM on AMX tiles (:attr:`DotSpec.amx_dot`): both sides packed as
        :attr:`DotSpec.bf16_dot`'s scaled bf16 values (:meth:`int_pack`; A's rows and B's
        pairs zero past K up to a whole tile of :data:`AMX_K`), then per tile of
        ``2 x AMX_ROWS`` rows of A against the panel's :data:`NP` columns, 2 x 2 result
        tiles of 16 x 16 f32: zeroed, then per step of AMX_K values of K two tiles of A
        (16 rows x 32 values) and two of B (16 pairs of K positions x 16 columns) loaded
        and four ``tdpbf16ps`` (``amx.tile_mulf``: each result takes 16 x 16 x 32 exact
        products, added in pairs into its f32 values), :data:`AMX_STEPS` steps between a
        result tile's loads and stores; the results then leave through vectors, masked at
        M and the panel's columns."""
        t, M, N = self.t, self.M, self.N
        b, n0, ncols, arow0, brow0 = self.unit
        c0, c1 = t.c(0), t.c(1)
        self.int_pack("rhs", brow0, ncols, t.c(NP), self.bq, self.bfq, self.bsum)
        r1 = self.pack_a_block(r0)
        rows_t = AMX_ROWS
        ta, tc = f"!amx.tile<{rows_t}x{AMX_K}xbf16>", f"!amx.tile<{rows_t}x16xf32>"
        cm = f"memref<{2 * rows_t}x{NP}xf32>"
        am, bm = "memref<?x?xbf16>", f"memref<?x{2 * NP}xbf16>"
        steps = t.op(f"{{r}} = arith.divui {self.kq}, {t.c(AMX_K // 2)} : index")
        at = [[t.c(rows_t * i), t.c(16 * j)] for i in range(2) for j in range(2)]
        masks = []  # the panel's columns, 16 at a time
        for g in range(NP // 16):
            left = t.op(f"{{r}} = arith.subi {ncols}, {t.c(16 * g)} : index")
            left = t.op(f"{{r}} = arith.maxsi {left}, {c0} : index")
            left = t.op(f"{{r}} = arith.minui {left}, {t.c(16)} : index")
            masks.append(t.op(f"{{r}} = vector.create_mask {left} : {_vt(16, 'i1')}"))

        def tile(m0: str, _: list[str]) -> list[str]:
            l0 = t.op(f"{{r}} = arith.subi {m0}, {r0} : index")  # in the packed block
            arow = [t.op(f"{{r}} = arith.addi {l0}, {t.c(rows_t * i)} : index")
                    for i in range(2)]
            z = t.op(f"{{r}} = amx.tile_zero : {tc}")
            for i, j in at:
                t.do(f"amx.tile_store {self.cq}[{i}, {j}], {z} : {cm}, {tc}")

            def run(n: int) -> Callable[[str, list[str]], list[str]]:
                def body(k0: str, _: list[str]) -> list[str]:
                    cs = [t.op(f"{{r}} = amx.tile_load {self.cq}[{i}, {j}] : {cm} into {tc}")
                          for i, j in at]
                    for u in range(n):
                        ks = t.op(f"{{r}} = arith.addi {k0}, {t.c(u)} : index")
                        ka = t.op(f"{{r}} = arith.muli {ks}, {t.c(AMX_K)} : index")
                        kp = t.op(f"{{r}} = arith.muli {ks}, {t.c(AMX_K // 2)} : index")
                        av = [t.op(f"{{r}} = amx.tile_load {self.aq2}[{arow[i]}, {ka}] : "
                                   f"{am} into {ta}") for i in range(2)]
                        bv = [t.op(f"{{r}} = amx.tile_load {self.bq2}[{kp}, {t.c(32 * j)}] : "
                                   f"{bm} into {ta}") for j in range(2)]
                        cs = [t.op(f"{{r}} = amx.tile_mulf {av[x // 2]}, {bv[x % 2]}, {c} : "
                                   f"{ta}, {ta}, {tc}") for x, c in enumerate(cs)]
                    for (i, j), c in zip(at, cs):
                        t.do(f"amx.tile_store {self.cq}[{i}, {j}], {c} : {cm}, {tc}")
                    return []
                return body

            t.for_chunks(steps, AMX_STEPS, run(AMX_STEPS), run(1))
            left = t.op(f"{{r}} = arith.subi {M}, {m0} : index")
            left = t.op(f"{{r}} = arith.minui {left}, {t.c(2 * rows_t)} : index")

            def out_row(i: str, _: list[str]) -> list[str]:
                orow = t.op(f"{{r}} = arith.addi {arow0}, {m0} : index")
                orow = t.op(f"{{r}} = arith.addi {orow}, {i} : index")
                o = t.op(f"{{r}} = arith.muli {orow}, {N} : index")
                o = t.op(f"{{r}} = arith.addi {o}, {n0} : index")
                for g, mask in enumerate(masks):
                    v = t.op(f"{{r}} = vector.load {self.cq}[{i}, {t.c(16 * g)}] : {cm}, "
                             f"{_vt(16, 'f32')}")
                    og = t.op(f"{{r}} = arith.addi {o}, {t.c(16 * g)} : index")
                    t.do(f"vector.maskedstore %out[{og}], {mask}, {v} : memref<?xf32>, "
                         f"{_vt(16, 'i1')}, {_vt(16, 'f32')}")
                return []

            t.for_(c0, left, c1, [], out_row)
            return []

        t.for_(r0, r1, t.c(2 * rows_t), [], tile)

    def int_gemm(self, r0: str) -> None:
        """The unit's GEMM by x86's dot products (:attr:`DotSpec.packed_gemm`).  B's
        panel packed (:meth:`int_pack`), and the unit's block of A's rows (:meth:`pack_a_block`,
        once per call and block: they stay packed while the call's next unit is in the same
        batch and block; plain bf16 rows are read as stored, a pair of values at a time, the
        tile's rows past M repeating its last); then per tile of
        :data:`MR_INT` rows (per path) and :data:`NV_INT` vectors of columns, per block:

        * **bytes** (:attr:`DotSpec.byte_dot`, 16 columns a vector): i16 accumulators
          start at -o x B's block sums and take one ``vpmaddubsw`` (A's pair broadcast,
          unsigned, against B's 16 columns, signed) and one add per pair of K positions,
          ending as the block's exact sums; ``vpmaddwd`` by (1, 0) and (0, 1) widens the
          even and the odd columns to i32;
        * **quads** (:attr:`DotSpec.quad_dot`, 8 columns a vector): i32 accumulators start
          at -o x B's block sums and take one ``vpdpbusd`` (A's quad of unsigned bytes
          broadcast against B's 8 columns' quads of signed bytes) per quad of K positions,
          exact;
        * **words** (8 columns a vector): i32 accumulators take one ``vpmaddwd`` and an add
          (path avx2) or one ``vpdpwssd`` (paths vnni, avx512) per pair of K positions (A's
          pair of i16 broadcast against B's 8 columns), exact;

        then the sums convert to f32 exactly (below 2^24) and are multiplied by the two
        blocks' factors (exact) and accumulated in f32 FMA lanes.  No scaled operand is
        formed.  On avx512 every vector is 512 bits (16 columns), and the **bf16** pairs
        (:attr:`DotSpec.bf16_dot`) are packed scaled: one ``vdpbf16ps`` per pair of K
        positions into f32 accumulators that run over the whole of K, no block ends; the
        words' pairs too (:attr:`DotSpec.bf16_blocks`), but into accumulators that start
        each block at zero and end it as the block's exact sum, added into f32 lanes."""
        t, s, M, N = self.t, self.s, self.M, self.N
        b, n0, ncols, arow0, brow0 = self.unit
        c0, c1 = t.c(0), t.c(1)
        kb = s.k("rhs")  # (one block size; A plain: B's)
        word, quad, bf, G, NV = self.word, self.quad, self.bf, self.G, NV_INT
        bfx = self.bfx  # bf16 dot products from zero each block (:attr:`DotSpec.bf16_blocks`)
        vnni = s.path in VNNI_PATHS
        lanes32 = word or quad or bf or bfx  # 32-bit accumulators, L columns each, in order
        if NV % 2:  # the results leave 16 columns at a time: two word vectors
            raise ValueError(f"NV_INT must be even, got {NV}")
        zmm = s.path in AVX512_PATHS  # 512-bit vectors (every kernel of the path is lanes32)
        L, bits = (16, 512) if zmm else (8, 256)  # 32-bit lanes per vector
        cv = L if lanes32 else 16  # columns per vector
        pt = self.pt
        self.int_pack("rhs", brow0, ncols, t.c(NP), self.bq, self.bfq, self.bsum)
        v8, v16, w8, f8 = _vt(4 * L, "i8"), _vt(2 * L, "i16"), _vt(L, "i32"), _vt(L, "f32")
        vbf = _vt(2 * L, "bf16")
        vacc = w8 if lanes32 else v16  # a load of B: cv columns' groups
        acc_t = f8 if bf or bfx else vacc  # an accumulator
        ones = [] if lanes32 else [
            t.op(f"{{r}} = arith.constant dense<[{', '.join([pair] * 8)}]> : {v16}")
            for pair in ("1, 0", "0, 1")]
        mlast = t.op(f"{{r}} = arith.subi {M}, {c1} : index")
        half = self.kq
        plain = not self.a_packed  # A's pairs of bf16 values read as stored
        if plain:
            rem = t.op(f"{{r}} = arith.subi {M}, {r0} : index")
            rows = t.op(f"{{r}} = arith.minui {rem}, {self.mbw} : index")
            r1 = t.op(f"{{r}} = arith.addi {r0}, {rows} : index")
        else:
            r1 = self.pack_a_block(r0)

        def tile(m0: str, _: list[str]) -> list[str]:
            l0 = t.op(f"{{r}} = arith.subi {m0}, {r0} : index")  # in the packed block
            arows = []  # where the tile's rows of A start, in pairs (packed A, or A's rows
            # as stored: the tile's rows past M repeat its last)
            for i in range(self.mr_int):
                if plain:
                    mi = t.op(f"{{r}} = arith.addi {m0}, {t.c(i)} : index")
                    mi = t.op(f"{{r}} = arith.minui {mi}, {mlast} : index")
                    li = t.op(f"{{r}} = arith.addi {arow0}, {mi} : index")
                else:
                    li = t.op(f"{{r}} = arith.addi {l0}, {t.c(i)} : index")
                arows.append(t.op(f"{{r}} = arith.muli {li}, {half} : index"))

            def group(j0: str, _: list[str]) -> list[str]:
                zero = t.c(0.0, f8)
                jg = [t.op(f"{{r}} = arith.addi {j0}, {t.c(cv * g)} : index") for g in range(NV)]
                nf = 1 if lanes32 else 2  # f32 vectors per accumulator

                def block(blk: str, accs: list[str]) -> list[str]:
                    so = t.op(f"{{r}} = arith.muli {blk}, {t.c(NP)} : index")
                    so = [t.op(f"{{r}} = arith.addi {so}, {j} : index") for j in jg]
                    if bf:  # scaled values: one running sum over K
                        inits = None
                    elif word or bfx:
                        inits = [t.c(0, acc_t)] * NV
                    else:
                        inits = [t.op(f"{{r}} = vector.load {self.bsum}[{o}] : "
                                      f"memref<?x{self.st}>, {vacc}") for o in so]
                    p0 = t.op(f"{{r}} = arith.muli {blk}, {t.c(kb // G)} : index")

                    def pair(p: str, sums: list[str]) -> list[str]:
                        kp = t.op(f"{{r}} = arith.addi {p0}, {p} : index")
                        bb = t.op(f"{{r}} = arith.muli {kp}, {t.c(NP)} : index")
                        bvs = []
                        for j in jg:
                            bo = t.op(f"{{r}} = arith.addi {bb}, {j} : index")
                            bw = t.op(f"{{r}} = vector.load {self.bq}[{bo}] : memref<?x{pt}>, "
                                      f"{vacc}")
                            if lanes32:  # the intrinsics' operand types
                                bw = t.op(f"{{r}} = vector.bitcast {bw} : {vacc} to "
                                          f"{v8 if quad else vbf if bf or bfx else v16}")
                            bvs.append(bw)
                        out = list(sums)
                        for i in range(self.mr_int):
                            o = t.op(f"{{r}} = arith.addi {arows[i]}, {kp} : index")
                            if plain:
                                a = self.bf16_pair(t.op(f"{{r}} = arith.muli {o}, {t.c(2)} : "
                                                        "index"))
                            else:
                                a = t.op(f"{{r}} = memref.load {self.aq}[{o}] : "
                                         f"memref<?x{pt}>")
                            av = t.op(f"{{r}} = vector.broadcast {a} : {pt} to {vacc}")
                            for g in range(NV):
                                x = i * NV + g
                                if bf or bfx:  # pairs of bf16 products added into f32 lanes
                                    ao = t.op(f"{{r}} = vector.bitcast {av} : {vacc} to {vbf}")
                                    intr = f"llvm.x86.avx512bf16.dpbf16ps.{bits}"
                                    out[x] = t.op(f'{{r}} = llvm.call_intrinsic "{intr}"('
                                                  f"{out[x]}, {ao}, {bvs[g]}) : "
                                                  f"({f8}, {vbf}, {vbf}) -> {f8}")
                                    continue
                                if vnni:  # the dot product added into the accumulator
                                    op, vt = ("vpdpbusd", v8) if quad else ("vpdpwssd", v16)
                                    ao = t.op(f"{{r}} = vector.bitcast {av} : {vacc} to {vt}")
                                    out[x] = t.op(f'{{r}} = llvm.call_intrinsic '
                                                  f'"llvm.x86.avx512.{op}.{bits}"({out[x]}, {ao}, '
                                                  f"{bvs[g]}) : ({w8}, {vt}, {vt}) -> {w8}")
                                    continue
                                if word:
                                    a16 = t.op(f"{{r}} = vector.bitcast {av} : {vacc} to {v16}")
                                    pr = t.op(f'{{r}} = llvm.call_intrinsic '
                                              f'"llvm.x86.avx2.pmadd.wd"({a16}, {bvs[g]}) : '
                                              f"({v16}, {v16}) -> {w8}")
                                    out[x] = t.op(f"{{r}} = arith.addi {out[x]}, {pr} : {w8}")
                                    continue
                                a8 = t.op(f"{{r}} = vector.bitcast {av} : {v16} to {v8}")
                                b8 = t.op(f"{{r}} = vector.bitcast {bvs[g]} : {v16} to {v8}")
                                pr = t.op(f'{{r}} = llvm.call_intrinsic '
                                          f'"llvm.x86.avx2.pmadd.ub.sw"({a8}, {b8}) : '
                                          f"({v8}, {v8}) -> {v16}")
                                # wrapping adds (vpaddw, any vector pipe; the saturating
                                # vpaddsw shares Zen 3's pipes with vpmaddubsw, measured 5-15%
                                # slower): every partial sum is below k x max|a| x max|b|
                                out[x] = t.op(f"{{r}} = arith.addi {out[x]}, {pr} : {v16}")
                        return out

                    if inits is None:
                        return t.for_(c0, t.c(kb // G), c1, [(a, acc_t) for a in accs], pair)
                    sums = t.for_(c0, t.c(kb // G), c1, [(inits[g], acc_t)
                                                         for _ in range(self.mr_int)
                                                         for g in range(NV)], pair)
                    fb = []
                    # e8m0 factors (powers of two, normal under the range test, and so is
                    # their product): the product's bits by an integer add of theirs
                    exps = BLOCK_END_EXPONENTS and not any(
                        s.fmt(x).is_nvfp4 for x in ("lhs", "rhs"))
                    for o in so:
                        for q in range(nf):
                            oq = t.op(f"{{r}} = arith.addi {o}, {t.c(8 * q)} : index")
                            fb.append(t.op(f"{{r}} = vector.load {self.bfq}[{oq}] : "
                                           f"memref<?xf32>, {f8}"))
                    out = []
                    if bfx:  # the exact block sums of scaled values (an add, not an FMA:
                        # Zen 4's adds leave the multiply pipes to the dot products)
                        return [t.op(f"{{r}} = arith.addf {accs[x]}, {sums[x]} : {f8}")
                                for x in range(self.mr_int * NV)]
                    if exps:  # B's factors' bits less the bias: a product's by one add
                        fb = [t.op(f"{{r}} = arith.bitcast {v} : {f8} to {w8}") for v in fb]
                        fb = [t.op(f"{{r}} = arith.subi {v}, {t.c(127 << 23, w8)} : {w8}")
                              for v in fb]
                    for i in range(self.mr_int):
                        o = t.op(f"{{r}} = arith.addi {l0}, {t.c(i)} : index")
                        o = t.op(f"{{r}} = arith.muli {o}, {self.nblk} : index")
                        o = t.op(f"{{r}} = arith.addi {o}, {blk} : index")
                        fa = t.op(f"{{r}} = memref.load {self.aqf}[{o}] : memref<?xf32>")
                        fav = t.op(f"{{r}} = vector.broadcast {fa} : f32 to {f8}")
                        if exps:
                            fav = t.op(f"{{r}} = arith.bitcast {fav} : {f8} to {w8}")
                        for g in range(NV):
                            for q in range(nf):
                                w = sums[i * NV + g]
                                if not lanes32:
                                    w = t.op(f'{{r}} = llvm.call_intrinsic '
                                             f'"llvm.x86.avx2.pmadd.wd"({w}, {ones[q]}) : '
                                             f"({v16}, {v16}) -> {w8}")
                                wf = t.op(f"{{r}} = arith.sitofp {w} : {w8} to {f8}")
                                if exps:
                                    f = t.op(f"{{r}} = arith.addi {fav}, {fb[nf * g + q]} : "
                                             f"{w8}")
                                    f = t.op(f"{{r}} = arith.bitcast {f} : {w8} to {f8}")
                                else:
                                    f = t.op(f"{{r}} = arith.mulf {fav}, {fb[nf * g + q]} : "
                                             f"{f8}")
                                x = (i * NV + g) * nf + q
                                out.append(t.op(f"{{r}} = vector.fma {wf}, {f}, {accs[x]} : "
                                                f"{f8}"))
                    return out

                nacc = self.mr_int * NV * nf
                accs = t.for_(c0, self.nblk, c1, [(zero, f8)] * nacc, block)
                # 16 results at a time: bytes, one accumulator's even and odd columns;
                # 8-lane words, two accumulators; 16-lane ones, one
                order = (", ".join(f"{j}, {j + 8}" for j in range(8)) if not lanes32 else
                         ", ".join(str(j) for j in range(16)))
                per = NV * nf * L // 16  # stores of 16 per row
                for g in range(per):
                    j16 = t.op(f"{{r}} = arith.addi {j0}, {t.c(16 * g)} : index")
                    left = t.op(f"{{r}} = arith.subi {ncols}, {j16} : index")
                    left = t.op(f"{{r}} = arith.maxsi {left}, {c0} : index")
                    left = t.op(f"{{r}} = arith.minui {left}, {t.c(16)} : index")
                    mask = t.op(f"{{r}} = vector.create_mask {left} : {_vt(16, 'i1')}")
                    for i in range(self.mr_int):
                        mi = t.op(f"{{r}} = arith.addi {m0}, {t.c(i)} : index")
                        ok = t.op(f"{{r}} = arith.cmpi ule, {mi}, {mlast} : index")
                        if L == 16:
                            v = accs[i * NV * nf + g]
                        else:
                            x = i * NV * nf + 2 * g
                            v = t.op(f"{{r}} = vector.shuffle {accs[x]}, {accs[x + 1]} "
                                     f"[{order}] : {f8}, {f8}")
                        def store(mi=mi, v=v, j16=j16, mask=mask) -> None:
                            orow = t.op(f"{{r}} = arith.addi {arow0}, {mi} : index")
                            o = t.op(f"{{r}} = arith.muli {orow}, {N} : index")
                            o = t.op(f"{{r}} = arith.addi {o}, {n0} : index")
                            o = t.op(f"{{r}} = arith.addi {o}, {j16} : index")
                            t.do(f"vector.maskedstore %out[{o}], {mask}, {v} : memref<?xf32>, "
                                 f"{_vt(16, 'i1')}, {_vt(16, 'f32')}")

                        t.if_(ok, store)
                return []

            t.for_(c0, ncols, t.c(cv * NV), [], group)
            return []

        t.for_(r0, r1, t.c(self.mr_int), [], tile)

    # -- the exact f64 contraction (outside the f32 paths' range) ----------------------------
    def f64_unit(self) -> None:
        """The unit's results as docs/semantics.md section 6's exact contraction: every
        value decoded exactly into f64 (subnormal inputs too, whatever the CPU's flush
        modes), products exact in f64, summed in f64 (C lanes), rounded once to f32
        (:meth:`round_f32`: subnormal results kept).  One row of A against one column of B
        at a time: the rare path (:meth:`range_function`), not a fast one."""
        t, C, K = self.t, self.C, self.K
        brow0 = self.unit[4]
        vd = _vt(C, "f64")

        def result(ar: str, j: str, o: str) -> None:
            br = t.op(f"{{r}} = arith.addi {brow0}, {j} : index")

            def step(kk: str, acc: list[str]) -> list[str]:
                a = self.f64_chunk("lhs", ar, kk)
                bv = self.f64_chunk("rhs", br, kk)
                p = t.op(f"{{r}} = arith.mulf {a}, {bv} : {vd}")
                return [t.op(f"{{r}} = arith.addf {acc[0]}, {p} : {vd}")]

            (acc,) = t.for_(t.c(0), K, t.c(C), [(t.c(0.0, vd), vd)], step)
            red = t.op(f"{{r}} = vector.reduction <add>, {acc} : {vd} into f64")
            t.do(f"memref.store {self.round_f32(red)}, %out[{o}] : memref<?xf32>")

        self.each_result(result)

    def each_result(self, fn: Callable[[str, str, str], None]) -> None:
        """``fn(A's row, column j of the unit, the result's offset in out)`` for each of
        the unit's M x ncols results, one at a time."""
        t = self.t
        b, n0, ncols, arow0, brow0 = self.unit

        def row(m: str, _: list[str]) -> list[str]:
            ar = t.op(f"{{r}} = arith.addi {arow0}, {m} : index")
            ob = t.op(f"{{r}} = arith.muli {ar}, {self.N} : index")
            ob = t.op(f"{{r}} = arith.addi {ob}, {n0} : index")

            def col(j: str, _: list[str]) -> list[str]:
                fn(ar, j, t.op(f"{{r}} = arith.addi {ob}, {j} : index"))
                return []

            t.for_(t.c(0), ncols, t.c(1), [], col)
            return []

        t.for_(t.c(0), self.M, t.c(1), [], row)

    def f64_chunk(self, side: str, row: str, kk: str) -> str:
        """vector<C x f64>: the exact values of C elements of a side's row ``row`` at
        column ``kk``."""
        t, C, K = self.t, self.C, self.K
        mem, smem = self.side_mems(side)
        vd = _vt(C, "f64")
        v = self.chunk(side, mem, smem, row, kk, K, scaled=False)
        f = self.s.fmt(side)
        if f is None:
            return self.f64_of_f32(v, C)
        v = t.op(f"{{r}} = arith.extf {v} : {_vt(C, 'f32')} to {vd}")  # normal or 0, Inf, NaN
        at = t.op(f"{{r}} = arith.muli {row}, {K} : index")
        at = t.op(f"{{r}} = arith.addi {at}, {kk} : index")
        blk = t.op(f"{{r}} = arith.divui {at}, {t.c(self.s.k(side))} : index")
        fv = t.op(f"{{r}} = vector.broadcast {self.f64_factor(side, smem, blk)} : f64 to {vd}")
        return self.f32_overflow(t.op(f"{{r}} = arith.mulf {v}, {fv} : {vd}"), C)

    def f32_overflow(self, v: str, n: int = 0) -> str:
        """The exact f64 values ``v`` (``n``: a vector of them) of dequantized elements,
        those past f32's range as +-Inf: what dequantizing them in f32 gives
        (docs/semantics.md section 5) -- each is exact with at most 8 significant bits, so
        past f32's largest finite value means at least 2^128."""
        t = self.t
        vd = _vt(n, "f64") if n else "f64"
        a = t.op(f"{{r}} = math.absf {v} : {vd}")
        big = t.op(f"{{r}} = arith.cmpf oge, {a}, {t.c(2.0 ** 128, vd)} : {vd}")
        inf = t.op(f"{{r}} = arith.mulf {v}, {t.c(2.0 ** 1000, vd)} : {vd}")  # +-Inf
        sel = f"{_vt(n, 'i1')}, {vd}" if n else vd
        return t.op(f"{{r}} = arith.select {big}, {inf}, {v} : {sel}")

    def f64_of_f32(self, v: str, n: int) -> str:
        """vector<n x f64>: the f32 values ``v`` exactly, a subnormal one from its bits (a CPU
        treating subnormal inputs as zero would convert it to 0)."""
        t = self.t
        vi, vd = _vt(n, "i32"), _vt(n, "f64")
        bits = t.op(f"{{r}} = arith.bitcast {v} : {_vt(n, 'f32')} to {vi}")
        ex = t.op(f"{{r}} = arith.andi {bits}, {t.c(0x7F800000, vi)} : {vi}")
        sub = t.op(f"{{r}} = arith.cmpi eq, {ex}, {t.c(0, vi)} : {vi}")
        m = t.op(f"{{r}} = arith.andi {bits}, {t.c(0x7FFFFF, vi)} : {vi}")
        neg = t.op(f"{{r}} = arith.cmpi slt, {bits}, {t.c(0, vi)} : {vi}")
        nm = t.op(f"{{r}} = arith.subi {t.c(0, vi)}, {m} : {vi}")
        sm = t.op(f"{{r}} = arith.select {neg}, {nm}, {m} : {_vt(n, 'i1')}, {vi}")
        sf = t.op(f"{{r}} = arith.sitofp {sm} : {vi} to {vd}")
        sv = t.op(f"{{r}} = arith.mulf {sf}, {t.c(2.0 ** -149, vd)} : {vd}")
        nv = t.op(f"{{r}} = arith.extf {v} : {_vt(n, 'f32')} to {vd}")
        return t.op(f"{{r}} = arith.select {sub}, {sv}, {nv} : {_vt(n, 'i1')}, {vd}")

    def f64_factor(self, side: str, smem: str, block: str) -> str:
        """f64: the block's scale times 2^-integer_shift, exactly (e8m0 from its code's bits:
        code 0 is 2^-127, 255 NaN; nvfp4's E4M3 scale through :meth:`factor`, whose f32 values
        are normal there)."""
        t = self.t
        f = self.s.fmt(side)
        if f.is_nvfp4:
            return t.op(f"{{r}} = arith.extf {self.factor(side, smem, block)} : f32 to f64")
        code = t.op(f"{{r}} = memref.load {smem}[{block}] : memref<?xi8>")
        c = t.op(f"{{r}} = arith.extui {code} : i8 to i64")
        eb = t.op(f"{{r}} = arith.addi {c}, {t.c(1023 - 127 - (integer_shift(f) or 0), 'i64')}"
                  " : i64")
        bits = t.op(f"{{r}} = arith.shli {eb}, {t.c(52, 'i64')} : i64")
        nan = t.op(f"{{r}} = arith.cmpi eq, {c}, {t.c(255, 'i64')} : i64")
        bits = t.op(f"{{r}} = arith.select {nan}, {t.c(0x7FF8000000000000, 'i64')}, {bits} : i64")
        return t.op(f"{{r}} = arith.bitcast {bits} : i64 to f64")

    def round_f32(self, r: str) -> str:
        """f32: the f64 ``r`` rounded to nearest even, a subnormal result computed on the bits
        (a CPU flushing subnormal results would give 0)."""
        t = self.t
        a = t.op(f"{{r}} = math.absf {r} : f64")
        tiny = t.op(f"{{r}} = arith.cmpf olt, {a}, {t.c(2.0 ** -126, 'f64')} : f64")
        q = t.op(f"{{r}} = arith.mulf {a}, {t.c(2.0 ** 149, 'f64')} : f64")  # exact, < 2^23
        big = t.c(2.0 ** 52, "f64")
        q = t.op(f"{{r}} = arith.addf {q}, {big} : f64")  # rounds to an integer, ties to even
        q = t.op(f"{{r}} = arith.subf {q}, {big} : f64")
        m = t.op(f"{{r}} = arith.fptoui {q} : f64 to i32")
        rb = t.op(f"{{r}} = arith.bitcast {r} : f64 to i64")
        sg = t.op(f"{{r}} = arith.shrui {rb}, {t.c(32, 'i64')} : i64")
        sg = t.op(f"{{r}} = arith.trunci {sg} : i64 to i32")
        sg = t.op(f"{{r}} = arith.andi {sg}, {t.c(-(1 << 31), 'i32')} : i32")
        sb = t.op(f"{{r}} = arith.ori {sg}, {m} : i32")
        sub = t.op(f"{{r}} = arith.bitcast {sb} : i32 to f32")
        nrm = t.op(f"{{r}} = arith.truncf {r} : f64 to f32")
        return t.op(f"{{r}} = arith.select {tiny}, {sub}, {nrm} : f32")

    # -- the range test -------------------------------------------------------------------
    def range_function(self, name: str) -> str:
        """``@name``, with the kernel's signature: stores into ``dims[4]`` 0 where the f32
        paths meet docs/semantics.md section 6 for these operands, else 1 (the kernel then
        runs :meth:`f64_unit`).  With q, t of each side (every non-zero value a multiple of
        2^q, none above 2^t in magnitude: :meth:`exponent_range`, over every value or scale
        code): no value, product or partial sum below 2^-126 (q_a, q_b, q_a + q_b >= -126),
        none overflowing (t_a + t_b + ceil(log2 K) <= 127), and A's values leaving the
        one-row path's room for sums of unscaled values (t_a + :attr:`DotSpec.headroom`
        <= 127) -- mxlower.lowering.mx_math's run-time test for XLA's dot, computed by the
        kernel on the operands as stored."""
        t, s = self.t, self.s
        dims, (Bt, M, N, K) = self.open_function(name, 4)
        self.K = K
        bm = t.op(f"{{r}} = arith.muli {Bt}, {M} : index")
        bn = t.op(f"{{r}} = arith.muli {Bt}, {N} : index")
        qa, ta = self.exponent_range("lhs", bm)
        qb, tb = self.exponent_range("rhs", bn)
        # ceil(log2 K) = the exponent of K - 1 as an f64, plus one (0 for K <= 1)
        k1 = t.op(f"{{r}} = arith.subi {dims[3]}, {t.c(1, 'i64')} : i64")
        k1 = t.op(f"{{r}} = arith.maxsi {k1}, {t.c(0, 'i64')} : i64")
        kf = t.op(f"{{r}} = arith.uitofp {k1} : i64 to f64")
        kb = t.op(f"{{r}} = arith.bitcast {kf} : f64 to i64")
        ke = t.op(f"{{r}} = arith.shrui {kb}, {t.c(52, 'i64')} : i64")
        lk = t.op(f"{{r}} = arith.subi {ke}, {t.c(1022, 'i64')} : i64")
        lk = t.op(f"{{r}} = arith.maxsi {lk}, {t.c(0, 'i64')} : i64")
        lk = t.op(f"{{r}} = arith.trunci {lk} : i64 to i32")

        def ge(x: str, v: int) -> str:
            return t.op(f"{{r}} = arith.cmpi sge, {x}, {t.c(v, 'i32')} : i32")

        def le(x: str, y: str) -> str:
            return t.op(f"{{r}} = arith.cmpi sle, {x}, {y} : i32")

        def add(x: str, y: str) -> str:
            return t.op(f"{{r}} = arith.addi {x}, {y} : i32")

        def both(x: str, y: str) -> str:
            return t.op(f"{{r}} = arith.andi {x}, {y} : i1")

        c127 = t.c(127, "i32")
        ok = both(ge(qa, -126), ge(qb, -126))
        ok = both(ok, ge(add(qa, qb), -126))
        ok = both(ok, le(add(add(ta, tb), lk), c127))
        if s.headroom:
            ok = both(ok, le(add(ta, t.c(s.headroom, "i32")), c127))
        for side, tx in (("lhs", ta), ("rhs", tb)):
            if s.fmt(side) is not None:  # every value of an MX side finite in f32 (bf16)
                ok = both(ok, le(tx, c127))
        if self.magic_f32():  # every block factor at most 2^MAGIC_TOP
            q, top = s.fmt("rhs").value_exponents
            ok = both(ok, le(tb, t.c(MAGIC_TOP + top - q, "i32")))
        mode = t.op(f"{{r}} = arith.select {ok}, {t.c(0, 'i64')}, {t.c(1, 'i64')} : i64")
        t.do(f"memref.store {mode}, %dims[{t.c(4)}] : memref<?xi64>")
        return self.close_function()

    def exponent_range(self, side: str, rows: str) -> tuple[str, str]:
        """(q, t), i32: every value of the side's ``rows`` x K (rows counting the batch)
        is a multiple of 2^q and at most 2^t in magnitude -- MX: from the smallest and
        largest scale codes (a NaN code 255 gives a t beyond any use; nvfp4: constants, its
        values being multiples of 2^-10 below 2^12 whatever the scales); plain: from the
        smallest and largest exponent fields of the non-zero values (Inf and NaN give t =
        129, an f32 subnormal a q below -149).  One pass, W or 32 lanes at a time."""
        t, K = self.t, self.K
        f = self.s.fmt(side)
        mem, smem = self.side_mems(side)
        if f is not None and f.is_nvfp4:
            q, top = f.value_exponents
            return t.c(q, "i32"), t.c(top, "i32")
        count = t.op(f"{{r}} = arith.muli {rows}, {K} : index")
        if f is not None:
            count = t.op(f"{{r}} = arith.divui {count}, {t.c(self.s.k(side))} : index")
            n, et, buf = 32, "i8", smem
        else:
            n, et, buf = LANES, getattr(self.s, side), mem
        rem = t.op(f"{{r}} = arith.remui {count}, {t.c(n)} : index")
        nvec = t.op(f"{{r}} = arith.subi {count}, {rem} : index")

        def fields(width: int, at: str) -> tuple[str, str]:
            """(for the min, for the max) of ``width`` values (0: one scalar) at ``at``."""
            it = _vt(width, "i32") if width else "i32"
            if f is not None:
                if width:
                    v = t.op(f"{{r}} = vector.load {buf}[{at}] : memref<?xi8>, "
                             f"{_vt(width, 'i8')}")
                else:
                    v = t.op(f"{{r}} = memref.load {buf}[{at}] : memref<?xi8>")
                return v, v
            vt = _vt(width, et) if width else et
            if width:
                v = t.op(f"{{r}} = vector.load {buf}[{at}] : memref<?x{et}>, {vt}")
            else:
                v = t.op(f"{{r}} = memref.load {buf}[{at}] : memref<?x{et}>")
            ft = _vt(width, "f32") if width else "f32"
            if et != "f32":  # exact (bf16: a shift; f16: F16C, which ignores flush modes)
                v = t.op(f"{{r}} = arith.extf {v} : {vt} to {ft}")
            bits = t.op(f"{{r}} = arith.bitcast {v} : {ft} to {it}")
            mag = t.op(f"{{r}} = arith.andi {bits}, {t.c(0x7FFFFFFF, it)} : {it}")
            fld = t.op(f"{{r}} = arith.shrui {mag}, {t.c(23, it)} : {it}")
            nz = t.op(f"{{r}} = arith.cmpi ne, {mag}, {t.c(0, it)} : {it}")
            i1 = _vt(width, "i1") if width else "i1"
            lo = t.op(f"{{r}} = arith.select {nz}, {fld}, {t.c(255, it)} : "
                      f"{i1 + ', ' if width else ''}{it}")
            return lo, fld

        lt = "i8" if f is not None else "i32"
        vt = _vt(n, lt)
        init_lo, init_hi = t.c(255 if f is None else -1, vt), t.c(0, vt)

        def vec_step(i: str, acc: list[str]) -> list[str]:
            lo, hi = fields(n, i)
            return [t.op(f"{{r}} = arith.minui {acc[0]}, {lo} : {vt}"),
                    t.op(f"{{r}} = arith.maxui {acc[1]}, {hi} : {vt}")]

        vlo, vhi = t.for_(t.c(0), nvec, t.c(n), [(init_lo, vt), (init_hi, vt)], vec_step)
        slo = t.op(f"{{r}} = vector.reduction <minui>, {vlo} : {vt} into {lt}")
        shi = t.op(f"{{r}} = vector.reduction <maxui>, {vhi} : {vt} into {lt}")

        def tail_step(i: str, acc: list[str]) -> list[str]:
            lo, hi = fields(0, i)
            return [t.op(f"{{r}} = arith.minui {acc[0]}, {lo} : {lt}"),
                    t.op(f"{{r}} = arith.maxui {acc[1]}, {hi} : {lt}")]

        lo, hi = t.for_(nvec, count, t.c(1), [(slo, lt), (shi, lt)], tail_step)
        if f is not None:
            lo = t.op(f"{{r}} = arith.extui {lo} : i8 to i32")
            hi = t.op(f"{{r}} = arith.extui {hi} : i8 to i32")
            q, top = f.value_exponents
            return (t.op(f"{{r}} = arith.addi {lo}, {t.c(q, 'i32')} : i32"),
                    t.op(f"{{r}} = arith.addi {hi}, {t.c(top, 'i32')} : i32"))
        mant = types.WIDE_FLOAT_TYPES[et].man_bits
        return (t.op(f"{{r}} = arith.subi {lo}, {t.c(127 + mant, 'i32')} : i32"),
                t.op(f"{{r}} = arith.subi {hi}, {t.c(126, 'i32')} : i32"))

    def side_mems(self, side: str) -> tuple[str, str | None]:
        nm = "a" if side == "lhs" else "b"
        return f"%{nm}", (f"%{nm}s" if self.s.fmt(side) is not None else None)

    def prepare(self, side: str, row0: str, r0: str, count: str, dst: str,
                fdst: str | None, pad_to: int = 0, order: bool = False,
                scaled: bool | None = None) -> None:
        """Decodes rows ``row0 + [r0, r0 + count)`` of a side into ``dst`` (row i at i * K):
        integer units with their factors in ``fdst`` (exact kernels, unless ``scaled``) or
        scaled values; with ``pad_to``, rows up to it repeat the last one; ``order``: each
        chunk in :data:`F4_ORDER`."""
        t, K, C = self.t, self.K, self.C
        scaled = not self.exact if scaled is None else scaled
        mem, smem = self.side_mems(side)
        c1 = t.c(1)
        hi = t.c(pad_to) if pad_to else count
        last = t.op(f"{{r}} = arith.subi {count}, {c1} : index")

        def row(i: str, _: list[str]) -> list[str]:
            li = t.op(f"{{r}} = arith.minui {i}, {last} : index")
            src = t.op(f"{{r}} = arith.addi {row0}, {li} : index")
            ob = t.op(f"{{r}} = arith.muli {i}, {K} : index")

            def ck(kk: str, _: list[str]) -> list[str]:
                v = self.chunk(side, mem, smem, src, kk, K, scaled=scaled, order=order)
                o = t.op(f"{{r}} = arith.addi {ob}, {kk} : index")
                t.do(f"vector.store {v}, {dst}[{o}] : memref<?xf32>, {_vt(C, 'f32')}")
                return []

            t.for_(t.c(0), K, t.c(C), [], ck)
            if not scaled:
                def fk(j: str, _: list[str]) -> list[str]:
                    sb = t.op(f"{{r}} = arith.muli {src}, {self.nblk} : index")
                    si = t.op(f"{{r}} = arith.addi {sb}, {j} : index")
                    f = self.factor(side, smem, si)
                    fb = t.op(f"{{r}} = arith.muli {i}, {self.nblk} : index")
                    fo = t.op(f"{{r}} = arith.addi {fb}, {j} : index")
                    t.do(f"memref.store {f}, {fdst}[{fo}] : memref<?xf32>")
                    return []

                t.for_(t.c(0), self.nblk, c1, [], fk)
            return []

        t.for_(r0, hi, c1, [], row)

    def prepare_factors(self, row0: str, count: str, piped: bool = False) -> None:
        """B's block factors of rows ``row0 + [0, count)`` into the scratch ``bfs`` (row i's
        block j at ``i * nblk_r + j``): eight blocks at a time in vector lanes, the rest one
        by one; for the piped tiles (``piped``) their :meth:`factor_word` where the decode
        takes one (:meth:`word_bias`)."""
        t, n = self.t, 8
        bias = self.word_bias() if piped else None
        c0, c1 = t.c(0), t.c(1)
        nb = self.nblk_r

        def row(i: str, _: list[str]) -> list[str]:
            src = t.op(f"{{r}} = arith.addi {row0}, {i} : index")
            sb = t.op(f"{{r}} = arith.muli {src}, {nb} : index")
            db = t.op(f"{{r}} = arith.muli {i}, {nb} : index")

            def factors(lanes: int) -> Callable[[str, list[str]], list[str]]:
                def body(j: str, _: list[str]) -> list[str]:  # lanes 0: one factor
                    si = t.op(f"{{r}} = arith.addi {sb}, {j} : index")
                    f = self.factor("rhs", "%bs", si, lanes)
                    if bias is not None:
                        f = self.factor_word(f, lanes, bias)
                    di = t.op(f"{{r}} = arith.addi {db}, {j} : index")
                    if lanes:
                        t.do(f"vector.store {f}, {self.bfs}[{di}] : memref<?xf32>, "
                             f"{_vt(lanes, 'f32')}")
                    else:
                        t.do(f"memref.store {f}, {self.bfs}[{di}] : memref<?xf32>")
                    return []
                return body

            t.for_chunks(nb, n, factors(n), factors(0))
            return []

        t.for_(c0, count, c1, [], row)

    def rows(self, lo: str, hi: str, mr: int, *, stream: bool, a_direct: bool,
             nr: int = NR, piped: bool = False) -> None:
        """Tiles of ``mr`` rows over [lo, hi) (the streaming path; ``piped``:
        :meth:`piped_tile`)."""
        t = self.t

        def tile(m0: str, _: list[str]) -> list[str]:
            if piped:
                self.piped_tile(m0, mr, nr)
            else:
                self.tile(m0, mr, stream=stream, a_direct=a_direct, a_local=False, nr=nr)
            return []

        if not piped:
            t.for_(lo, hi, t.c(mr), [], tile)
            return
        # a piped tile decodes its first chunks before its loop: K = 0 (no chunk to read)
        # gives zeros here
        empty = t.op(f"{{r}} = arith.cmpi eq, {self.K}, {t.c(0)} : index")
        t.if_(empty, self.store_zeros, lambda: t.for_(lo, hi, t.c(mr), [], tile))

    def tile(self, m0: str, mr: int, *, stream: bool, a_direct: bool, a_local: bool,
             nr: int = NR) -> None:
        """Rows m0 .. m0 + mr (clamped to M) of A against the unit's panel, nr columns at a
        time: a register tile of mr x nr accumulators over K."""
        t, s, C, W, K, M = self.t, self.s, self.C, self.W, self.K, self.M
        b, n0, ncols, arow0, brow0 = self.unit
        c0, c1 = t.c(0), t.c(1)
        acc_t = self.acc_t
        # one row of A against MX columns (the GEMV): per column and block, a partial sum
        # of the unscaled values (integer units or f8 values), then one FMA by the block's
        # factor from the scratch; against plain columns, accumulators as wide as a chunk
        # (independent FMA chains)
        blockwise = stream and not self.exact and mr == 1 and self.blockwise
        perm = blockwise and self.f4_perm
        if perm or (ONE_ROW_ZMM and blockwise and s.path in AVX512_PATHS and C % 16 == 0
                    and not self.f4_fast):
            W = 16  # zmm lanes
        wide = stream and not self.exact and mr == 1 and not blockwise
        # bf16 dot products (:attr:`bf_stream`): an accumulator of C / 2 f32 lanes per row and
        # column, one vdpbf16ps per chunk
        bfdot = stream and mr > 1 and self.bf_stream and not self.exact
        va, vc = _vt(C if wide else C // 2 if bfdot else W, acc_t), _vt(W, "f32")
        vh = _vt(C, "bf16")
        mlast = t.op(f"{{r}} = arith.subi {M}, {c1} : index")
        nlast = t.op(f"{{r}} = arith.subi {ncols}, {c1} : index")
        rows = []  # (A row index for reading, local row in the scratch, output row or None)
        for i in range(mr):
            mi = t.op(f"{{r}} = arith.addi {m0}, {t.c(i)} : index")
            mc = t.op(f"{{r}} = arith.minui {mi}, {mlast} : index")
            rows.append((mi, mc))
        kb = s.k("rhs") if s.fmt("rhs") is not None else C
        nchunks = kb // C

        def cols(j0: str, _: list[str]) -> list[str]:
            colv = []
            for j in range(nr):
                nj = t.op(f"{{r}} = arith.addi {j0}, {t.c(j)} : index")
                nc = t.op(f"{{r}} = arith.minui {nj}, {nlast} : index")
                colv.append((nj, nc))
            zero = t.c(0.0, va)
            inits = [(zero, va)] * (mr * nr)

            def a_vec(i: int, kk: str) -> str:
                mi, mc = rows[i]
                if a_direct:
                    r = t.op(f"{{r}} = arith.addi {arow0}, {mc} : index")
                    return self.chunk("lhs", "%a", None, r, kk, K, scaled=False)
                local = t.c(i) if a_local else mc
                o = t.op(f"{{r}} = arith.muli {local}, {K} : index")
                o = t.op(f"{{r}} = arith.addi {o}, {kk} : index")
                return t.op(f"{{r}} = vector.load {self.ad}[{o}] : memref<?xf32>, "
                            f"{_vt(C, 'f32')}")

            def b_vec(j: int, kk: str, factor: str | None) -> str:
                """Streaming: a chunk of column j decoded from B's codes."""
                r = t.op(f"{{r}} = arith.addi {brow0}, {colv[j][1]} : index")
                mem, smem = self.side_mems("rhs")
                if perm:
                    return self.f4_f32_chunk(mem, None, r, kk, NR_STREAM)
                return self.chunk("rhs", mem, smem, r, kk, K,
                                  scaled=not self.exact and not blockwise, factor=factor,
                                  order=blockwise and self.f4_fast)

            def fma_into(accs: list[str], a: str, bv: str) -> list[str]:
                out = list(accs)
                for p in range(C // W):
                    sa = t.op(f"{{r}} = vector.extract_strided_slice {a} {{{{offsets = [{p * W}], "
                              f"sizes = [{W}], strides = [1]}}}} : {_vt(C, 'f32')} to {vc}")
                    sb = t.op(f"{{r}} = vector.extract_strided_slice {bv} {{{{offsets = "
                              f"[{p * W}], sizes = [{W}], strides = [1]}}}} : {_vt(C, 'f32')} "
                              f"to {vc}")
                    out = [t.op(f"{{r}} = vector.fma {sa}, {sb}, {x} : {vc}") for x in out]
                return out

            def panel_step(kk: str, sums: list[str]) -> list[str]:
                """GEMM: W lanes at a time from the scratches (A in place where plain f32):
                mr x nr accumulators, nr + 1 vectors of operands live."""
                out = list(sums)
                for p in range(C // W):
                    kp = t.op(f"{{r}} = arith.addi {kk}, {t.c(p * W)} : index")
                    bvs = []
                    for j in range(nr):
                        o = t.op(f"{{r}} = arith.muli {colv[j][1]}, {K} : index")
                        o = t.op(f"{{r}} = arith.addi {o}, {kp} : index")
                        bvs.append(t.op(f"{{r}} = vector.load {self.bd}[{o}] : memref<?xf32>, "
                                        f"{vc}"))
                    for i in range(mr):
                        if a_direct:
                            r = t.op(f"{{r}} = arith.addi {arow0}, {rows[i][1]} : index")
                            o = t.op(f"{{r}} = arith.muli {r}, {K} : index")
                            mem = "%a"
                        else:
                            o = t.op(f"{{r}} = arith.muli {t.c(i)}, {K} : index")
                            mem = self.ad
                        o = t.op(f"{{r}} = arith.addi {o}, {kp} : index")
                        a = t.op(f"{{r}} = vector.load {mem}[{o}] : memref<?xf32>, {vc}")
                        for j in range(nr):
                            out[i * nr + j] = t.op(f"{{r}} = vector.fma {a}, {bvs[j]}, "
                                                   f"{out[i * nr + j]} : {vc}")
                return out

            def bf16_step(kk: str, bvs: list[str], out: list[str]) -> list[str]:
                """bf16 dot products: B's scaled chunks (exact in bf16: a narrow value times a
                power of two, or nvfp4's E4M3 scale) truncated to bf16, A's chunks read as
                stored, one ``vdpbf16ps`` per row and column."""
                bh = [t.op(f"{{r}} = arith.bitcast {self.bf16_bits(bv)} : {_vt(C, 'i16')} to "
                           f"{vh}") for bv in bvs]
                bits = 16 * C  # C bf16 lanes
                for i in range(mr):
                    r = t.op(f"{{r}} = arith.addi {arow0}, {rows[i][1]} : index")
                    o = t.op(f"{{r}} = arith.muli {r}, {K} : index")
                    o = t.op(f"{{r}} = arith.addi {o}, {kk} : index")
                    a = t.op(f"{{r}} = vector.load %a[{o}] : memref<?xbf16>, {vh}")
                    for j in range(nr):
                        x = i * nr + j
                        out[x] = t.op(f'{{r}} = llvm.call_intrinsic '
                                      f'"llvm.x86.avx512bf16.dpbf16ps.{bits}"({out[x]}, {a}, '
                                      f"{bh[j]}) : ({va}, {vh}, {vh}) -> {va}")
                return out

            def block(blk: str, accs: list[str]) -> list[str]:
                k0 = t.op(f"{{r}} = arith.muli {blk}, {t.c(kb)} : index")
                # B's factor for streamed scaled values: once per block and column
                bfac = [None] * nr
                if stream and s.fmt("rhs") is not None and not self.exact and not blockwise:
                    for j in range(nr):
                        r = t.op(f"{{r}} = arith.addi {brow0}, {colv[j][1]} : index")
                        nb = t.op(f"{{r}} = arith.divui {K}, {t.c(kb)} : index")
                        sb = t.op(f"{{r}} = arith.muli {r}, {nb} : index")
                        si = t.op(f"{{r}} = arith.addi {sb}, {blk} : index")
                        bfac[j] = self.factor("rhs", "%bs", si)
                sums = ([t.c(0.0, vc) for _ in range(mr * nr)] if self.exact or blockwise else
                        list(accs))

                def chunk_step(kk: str, sums: list[str]) -> list[str]:
                    if not stream:
                        return panel_step(kk, sums)
                    bvs = [b_vec(j, kk, bfac[j]) for j in range(nr)]
                    out = list(sums)
                    if bfdot:
                        return bf16_step(kk, bvs, out)
                    for i in range(mr):
                        a = a_vec(i, kk)
                        for j in range(nr):
                            if wide:
                                out[i * nr + j] = t.op(f"{{r}} = vector.fma {a}, {bvs[j]}, "
                                                       f"{out[i * nr + j]} : {va}")
                                continue
                            (out[i * nr + j],) = fma_into([out[i * nr + j]], a, bvs[j])
                    return out

                if nchunks <= 8:
                    for q in range(nchunks):
                        kk = t.op(f"{{r}} = arith.addi {k0}, {t.c(q * C)} : index")
                        sums = chunk_step(kk, sums)
                else:
                    k1 = t.op(f"{{r}} = arith.addi {k0}, {t.c(kb)} : index")
                    sums = t.for_(k0, k1, t.c(C), [(x, va if wide or bfdot else vc)
                                                   for x in sums], chunk_step)
                if blockwise:  # the partial sums times the blocks' factors
                    out = []
                    for j in range(nr):
                        o = t.op(f"{{r}} = arith.muli {colv[j][1]}, {self.nblk_r} : index")
                        o = t.op(f"{{r}} = arith.addi {o}, {blk} : index")
                        f = t.op(f"{{r}} = memref.load {self.bfs}[{o}] : memref<?xf32>")
                        fv = t.op(f"{{r}} = vector.broadcast {f} : f32 to {vc}")
                        out.append(t.op(f"{{r}} = vector.fma {sums[j]}, {fv}, {accs[j]} : {vc}"))
                    return out
                if not self.exact:
                    return sums
                # exact: the block sums (exact integers) times fa * fb, accumulated
                out = []
                for i in range(mr):
                    fa = self.block_factor("lhs", i, rows[i], blk, a_local)
                    for j in range(nr):
                        fb = self.block_factor("rhs", j, colv[j], blk, not stream)
                        f = t.op(f"{{r}} = arith.mulf {fa}, {fb} : f32")
                        acc = accs[i * nr + j]
                        sm = sums[i * nr + j]
                        if acc_t == "f64":
                            f = t.op(f"{{r}} = arith.extf {f} : f32 to f64")
                            sm = t.op(f"{{r}} = arith.extf {sm} : {vc} to {va}")
                        fv = t.op(f"{{r}} = vector.broadcast {f} : {acc_t} to {va}")
                        out.append(t.op(f"{{r}} = vector.fma {sm}, {fv}, {acc} : {va}"))
                return out

            nblocks = t.op(f"{{r}} = arith.divui {K}, {t.c(kb)} : index")
            accs = t.for_(c0, nblocks, c1, inits, block)
            self.store_tile(rows, colv, accs, va)
            return []

        t.for_(c0, ncols, t.c(nr), [], cols)

    def store_tile(self, rows: list[tuple[str, str]], colv: list[tuple[str, str]],
                   accs: list[str], va: str) -> None:
        """A register tile's accumulators (row-major, ``va`` each) reduced, and the results
        of rows < M and columns < the unit's stored."""
        t, M, acc_t = self.t, self.M, self.acc_t
        b, n0, ncols, arow0, brow0 = self.unit
        nr = len(colv)
        # f32 lanes summed as a tree (reassoc: halves added, log2 steps), not one after the
        # other: 5-6% faster at M = 8 on a Zen 4, as accurate; the exact f64 sums keep order
        fm = "fastmath<reassoc> " if acc_t == "f32" else ""
        for i, (mi, _) in enumerate(rows):
            for j, (nj, _) in enumerate(colv):
                red = t.op(f"{{r}} = vector.reduction <add>, {accs[i * nr + j]} {fm}: {va} "
                           f"into {acc_t}")
                if acc_t == "f64":
                    red = t.op(f"{{r}} = arith.truncf {red} : f64 to f32")
                okm = t.op(f"{{r}} = arith.cmpi ult, {mi}, {M} : index")
                okn = t.op(f"{{r}} = arith.cmpi ult, {nj}, {ncols} : index")
                ok = t.op(f"{{r}} = arith.andi {okm}, {okn} : i1")

                def store(mi=mi, nj=nj, red=red) -> None:
                    orow = t.op(f"{{r}} = arith.addi {arow0}, {mi} : index")
                    ob = t.op(f"{{r}} = arith.muli {orow}, {self.N} : index")
                    oc = t.op(f"{{r}} = arith.addi {n0}, {nj} : index")
                    o = t.op(f"{{r}} = arith.addi {ob}, {oc} : index")
                    t.do(f"memref.store {red}, %out[{o}] : memref<?xf32>")

                t.if_(ok, store)

    def store_zeros(self) -> None:
        """The unit's M x ncols results: zeros (an empty contraction)."""
        zero = self.t.c(0.0, "f32")
        self.each_result(lambda ar, j, o: self.t.do(
            f"memref.store {zero}, %out[{o}] : memref<?xf32>"))

    def piped_tile(self, m0: str, mr: int, nr: int) -> None:
        """The streaming tile of ``mr`` rows (from m0, clamped to M) against the unit's
        panel, ``nr`` columns at a time, software-pipelined (:data:`PIPELINED_STREAM`): one
        loop over K's chunks whose step decodes the columns' chunk :data:`PIPE_DEPTH` steps
        on (scaled by its block's factor, read from the panel's scratch; bf16 values on bf16
        dot products) while the FMAs (or ``vdpbf16ps``) run on the chunk decoded that many
        steps before.  The dot products of a step then wait on nothing, so a decode's long
        chain (load, shuffles, widen, convert, scale) no longer bounds the step, nor do they
        hold the scheduler while it runs.  A's rows come from their copy in slabs
        (:meth:`copy_rows`: one pointer for the tile's rows); f32 accumulators of
        :meth:`pipe_lanes` lanes per row and column.  On bf16 dot products with chunks of
        16 (nvfp4), two chunks per step, so that each ``vdpbf16ps`` is a 512-bit one: a
        second chunk past K (K an odd number of chunks) is zeros, as are A's values there
        (:meth:`copy_rows` zeroes the last slab's rest).  The exact tiles
        (:attr:`exact_bf16`) add each step's exact block sums into f64 lanes; those of
        :attr:`grouped` pairs (not one row against unfolded steps) keep the f64 lanes in
        memory and take K in groups of :data:`EXACT_GROUP` steps, each either summed in f32
        lanes and added once -- whole, or in parts of :data:`EXACT_GROUP_PARTS` steps or
        more (:meth:`group_spread`: every partial sum exact) -- or added step by step, the
        steps past the last whole group step by step."""
        t, s, C, K, M = self.t, self.s, self.C, self.K, self.M
        b, n0, ncols, arow0, brow0 = self.unit
        c0, c1 = t.c(0), t.c(1)
        bfdot = self.bf_stream
        W = self.pipe_lanes()
        S = self.step_values() if bfdot else C  # K values per step
        va, vh, vcf = _vt(S // 2 if bfdot else W, "f32"), _vt(S, "bf16"), _vt(C, "f32")
        # the exact tiles (:attr:`exact_bf16`): each step's lanes from zero (two exact products
        # of one block each), added into f64 lanes
        exact = self.exact
        assert not exact or (bfdot and self.exact_bf16)
        # (a step within one block -- k >= S --: its two halves of lanes added first, exactly,
        # so that one conversion and one f64 add take the step)
        fold = exact and self.folded()
        lanes64 = S // 4 if fold else S // 2  # f64 lanes per row and column
        vacc = _vt(lanes64, "f64") if exact else va
        vhalf = _vt(S // 4, "f32")

        def widened(p: str, halves: bool = fold) -> str:
            """An exact tile's f32 lanes ``p`` (a step's or a group's) in f64 lanes: their two
            halves added first where ``halves`` (the tile folds; every group: exact, see
            group_room), into S / 4 lanes then."""
            if not halves:
                return t.op(f"{{r}} = arith.extf {p} : {va} to {vacc}")
            h = [t.op(f"{{r}} = vector.extract_strided_slice {p} "
                      f"{{{{offsets = [{o_}], sizes = [{S // 4}], "
                      f"strides = [1]}}}} : {va} to {vhalf}")
                 for o_ in (0, S // 4)]
            p = t.op(f"{{r}} = arith.addf {h[0]}, {h[1]} : {vhalf}")
            return t.op(f"{{r}} = arith.extf {p} : {vhalf} to {_vt(S // 4, 'f64')}")

        def add_into_acc64(x: int, v: str, vt: str) -> None:
            """f64 lanes ``v`` (``vt``) added into the first of (row, column) ``x``'s f64
            lanes in the grouped tile's :attr:`acc64`."""
            ox = t.c(x * lanes64)
            m = t.op(f"{{r}} = vector.load {self.acc64}[{ox}] : {self.acc64_t}, {vt}")
            m = t.op(f"{{r}} = arith.addf {m}, {v} : {vt}")
            t.do(f"vector.store {m}, {self.acc64}[{ox}] : {self.acc64_t}, {vt}")
        zero_va = t.c(0.0, va) if exact else None
        bt = vh if bfdot else vcf  # the carried chunks' type
        mlast = t.op(f"{{r}} = arith.subi {M}, {c1} : index")
        nlast = t.op(f"{{r}} = arith.subi {ncols}, {c1} : index")
        rows = []
        for i in range(mr):
            mi = t.op(f"{{r}} = arith.addi {m0}, {t.c(i)} : index")
            rows.append((mi, t.op(f"{{r}} = arith.minui {mi}, {mlast} : index")))
        klast = t.op(f"{{r}} = arith.subi {K}, {t.c(C)} : index")

        def cols(j0: str, _: list[str]) -> list[str]:
            colv = []
            for j in range(nr):
                nj = t.op(f"{{r}} = arith.addi {j0}, {t.c(j)} : index")
                colv.append((nj, t.op(f"{{r}} = arith.minui {nj}, {nlast} : index")))
            mem, smem = self.side_mems("rhs")
            word = self.word_bias() is not None  # the scratch holds factor words

            def decode(kk: str) -> list[str]:
                if S == C:
                    return decode_chunks(kk)
                # two chunks: the second one's, or zeros past K
                k2 = t.op(f"{{r}} = arith.addi {kk}, {t.c(C)} : index")
                inside = t.op(f"{{r}} = arith.cmpi ult, {k2}, {K} : index")
                k2 = t.op(f"{{r}} = arith.minui {k2}, {klast} : index")
                if self.table_decode(mr):
                    return decode_pairs(kk, k2, inside)
                zero = t.c(0.0, _vt(C, "bf16"))
                out = []
                for v0, v1 in zip(decode_chunks(kk), decode_chunks(k2)):
                    v1 = t.op(f"{{r}} = arith.select {inside}, {v1}, {zero} : "
                              f"{_vt(C, 'bf16')}")
                    out.append(self.concat([v0, v1], C, "bf16"))
                return out

            def decode_pairs(kk: str, k2: str, inside: str) -> list[str]:
                """f4 codes in chunks of 16 on bf16 dot products: the two chunks of a step
                by one permute from the two blocks' tables (:meth:`f4_bf16_pair`), the
                second block's factor 0 past K (its values zeros)."""
                out = []
                blks = [t.op(f"{{r}} = arith.divui {x}, {t.c(s.k('rhs'))} : index")
                        for x in (kk, k2)]
                zero = t.c(0.0, "f32")
                for _, nc in colv:
                    r = t.op(f"{{r}} = arith.addi {brow0}, {nc} : index")
                    if self.scale_tables(mr):
                        halves = [self.table_row("bf16", r, blk) for blk in blks]
                        out.append(self.f4_bf16_pair(mem, (), r, kk, inside,
                                                     PIPED_AHEAD * nr, halves))
                        continue
                    o = t.op(f"{{r}} = arith.muli {nc}, {self.nblk_r} : index")
                    fs = []
                    for blk in blks:
                        ob = t.op(f"{{r}} = arith.addi {o}, {blk} : index")
                        fs.append(t.op(f"{{r}} = memref.load {self.bfs}[{ob}] : memref<?xf32>"))
                    fs[1] = t.op(f"{{r}} = arith.select {inside}, {fs[1]}, {zero} : f32")
                    out.append(self.f4_bf16_pair(mem, fs, r, kk, inside,
                                                 PIPED_AHEAD * nr))
                return out

            def decode_chunks(kk: str) -> list[str]:
                out = []
                blk = t.op(f"{{r}} = arith.divui {kk}, {t.c(s.k('rhs'))} : index")
                for _, nc in colv:
                    r = t.op(f"{{r}} = arith.addi {brow0}, {nc} : index")
                    if self.scale_tables(mr):  # the block's row of the table
                        six = s.fmt("rhs").bits == 6
                        tb = self.table_row("f32" if not bfdot else "bf16" if six else
                                            "bf16x2", r, blk)
                        if bfdot:
                            by = self.f6_bf16_chunk if six else self.f4_bf16_chunk
                            out.append(by(mem, None, r, kk, PIPED_AHEAD * nr, table=tb))
                        elif six:
                            out.append(self.f6_f32_chunk(mem, r, kk, PIPED_AHEAD * nr, tb))
                        else:
                            out.append(self.f4_f32_chunk(mem, None, r, kk, PIPED_AHEAD * nr,
                                                         table=tb))
                        continue
                    o = t.op(f"{{r}} = arith.muli {nc}, {self.nblk_r} : index")  # the factor
                    o = t.op(f"{{r}} = arith.addi {o}, {blk} : index")  # from the scratch
                    f = t.op(f"{{r}} = memref.load {self.bfs}[{o}] : memref<?xf32>")
                    if self.table_decode(mr):
                        if not bfdot:
                            out.append(self.f4_f32_chunk(mem, f, r, kk, PIPED_AHEAD * nr))
                            continue
                        by = (self.f6_bf16_chunk if s.fmt("rhs").bits == 6 else
                              self.f4_bf16_chunk)
                        out.append(by(mem, f, r, kk, PIPED_AHEAD * nr, word))
                        continue
                    if self.placed_decode():
                        out.append(self.placed_chunk(mem, f, r, kk, PIPED_AHEAD * nr, word))
                        continue
                    if self.magic_f32():
                        out.append(self.magic_chunk(mem, f, r, kk, PIPED_AHEAD * nr))
                        continue
                    if self.placed_f32():  # (bf16 to f32: exact, a shift)
                        b16 = self.placed_chunk(mem, f, r, kk, PIPED_AHEAD * nr)
                        out.append(t.op(f"{{r}} = arith.extf {b16} : {_vt(C, 'bf16')} to "
                                        f"{vcf}"))
                        continue
                    v = self.chunk("rhs", mem, smem, r, kk, K, scaled=True, factor=f,
                                   ahead=PIPED_AHEAD * nr)
                    if bfdot:  # (vcvtne2ps2bf16 here measured 8% slower on a Zen 4: it
                        # shares the FMA pipes with vdpbf16ps; the shifts do not)
                        v = t.op(f"{{r}} = arith.bitcast {self.bf16_bits(v)} : "
                                 f"{_vt(C, 'i16')} to {_vt(C, 'bf16')}")
                    out.append(v)
                return out

            def a_row(i: int) -> tuple[str, str]:
                """(memory, offset of K = 0) of the tile's row i of A: in the slabs of plain
                f32 / bf16 rows (the rows past M, zeros, unclamped: one pointer then
                serves every row), else (f16) the scratch of decoded rows."""
                if self.ap is not None:  # (the tile's first row, m0, starts its slabs)
                    return self.ap, t.op(f"{{r}} = arith.addi {tile0}, {t.c(i * self.lay)} "
                                         ": index")
                return self.ad, t.op(f"{{r}} = arith.muli {rows[i][1]}, {K} : index")

            tile0 = (t.op(f"{{r}} = arith.muli {m0}, {self.kl} : index")
                     if self.ap is not None else None)

            bases = [a_row(i) for i in range(mr)]

            depth = PIPE_DEPTH["bf16" if bfdot else "f32"]

            def step(kk: str, carry: list[str], summed: bool = False,
                     in_memory: bool = False) -> list[str]:
                """One step; ``summed``: an exact tile's step of a group summed in f32
                lanes (its accumulators f32, as a plain tile's); ``in_memory``: an exact
                tile's step adding into the f64 lanes in acc64 (``carry``: only the
                chunks)."""
                if in_memory:
                    carry = [""] * (mr * nr) + carry
                accs, cur = list(carry[:mr * nr]), carry[mr * nr:mr * nr + nr]
                nxt = t.op(f"{{r}} = arith.addi {kk}, {t.c(depth * S)} : index")
                nxt = carry[mr * nr + nr:] + decode(
                    t.op(f"{{r}} = arith.minui {nxt}, {klast} : index"))
                # (in the slabs: K position kk of row r at slab_row(r) + kk x grows)
                ks = (t.op(f"{{r}} = arith.muli {kk}, {self.grows} : index")
                      if self.ap is not None else kk)
                for i, (mem, base) in enumerate(bases):
                    o = t.op(f"{{r}} = arith.addi {base}, {ks} : index")
                    if bfdot:
                        a = t.op(f"{{r}} = vector.load {mem}[{o}] : memref<?xbf16>, {vh}")
                        for j in range(nr):
                            x = i * nr + j
                            into = zero_va if exact and not summed else accs[x]
                            p = t.op(f'{{r}} = llvm.call_intrinsic '
                                     f'"llvm.x86.avx512bf16.dpbf16ps.{16 * S}"'
                                     f"({into}, {a}, {cur[j]}) : ({va}, {vh}, {vh}) -> {va}")
                            if exact and not summed:
                                p = widened(p)
                                if in_memory:  # the tile's f64 lanes in acc64
                                    add_into_acc64(x, p, vacc)
                                    continue
                                p = t.op(f"{{r}} = arith.addf {accs[x]}, {p} : {vacc}")
                            accs[x] = p
                        continue
                    for p in range(C // W):
                        op = t.op(f"{{r}} = arith.addi {o}, {t.c(p * W)} : index")
                        a = t.op(f"{{r}} = vector.load {mem}[{op}] : memref<?xf32>, {va}")
                        for j in range(nr):
                            bv = t.op(f"{{r}} = vector.extract_strided_slice {cur[j]} "
                                      f"{{{{offsets = [{p * W}], sizes = [{W}], strides = [1]}}}}"
                                      f" : {vcf} to {va}")
                            x = i * nr + j
                            accs[x] = t.op(f"{{r}} = vector.fma {a}, {bv}, {accs[x]} : {va}")
                return nxt if in_memory else accs + nxt

            zero = t.c(0.0, vacc)
            inits = [(zero, vacc)] * (mr * nr)
            chunks = []
            for d in range(depth):  # the first chunks (past K: the last one again)
                kd = c0 if d == 0 else t.op(f"{{r}} = arith.minui {t.c(d * S)}, {klast} : "
                                             "index")
                chunks += [(v, bt) for v in decode(kd)]
            # (one row against unfolded steps -- nvfp4 --: every step into the f64 lanes, in
            # registers; its groups measured 1.07-1.16x where every group was summed in f32,
            # 0.8-0.9x where the blocks' scales lay 2^1 to 2^3 apart)
            if not self.grouped or mr == 1 and not fold:
                out = t.for_(c0, K, t.c(S), inits + chunks, step)
                self.store_tile(rows, colv, out[:mr * nr], vacc)
                return []
            # groups of group_steps steps: the tile's f64 lanes in memory (acc64, a vector
            # of S // 4 lanes -- folded -- or S // 2 per row and column), each group's steps
            # either summed in f32 lanes and added once, whole or in parts (group_spread), or
            # added step by step; the steps past the last whole group step by step
            n64 = mr * nr

            def sums() -> list[str]:
                return [t.op(f"{{r}} = vector.load {self.acc64}[{t.c(x * lanes64)}] : "
                             f"{self.acc64_t}, {vacc}") for x in range(n64)]

            def keep(vals: list[str]) -> None:
                for x, v in enumerate(vals):
                    t.do(f"vector.store {v}, {self.acc64}[{t.c(x * lanes64)}] : "
                         f"{self.acc64_t}, {vacc}")

            keep([zero] * n64)
            gs = self.group_values()
            whole = t.op(f"{{r}} = arith.divui {K}, {t.c(gs)} : index")
            whole = t.op(f"{{r}} = arith.muli {whole}, {t.c(gs)} : index")
            bts = [bt] * len(chunks)

            def by_steps(lo: str, hi: str, carried: list[str]) -> list[str]:
                if nr == 1:  # the f64 lanes in registers through the steps
                    out = t.for_(lo, hi, t.c(S), list(zip(sums() + carried,
                                                          [vacc] * n64 + bts)), step)
                    keep(out[:n64])
                    return out[n64:]
                # (two columns: each step's f64 add in memory -- kept in registers, a tile's
                # 16 f64 vectors beside the pipeline's chunks spilled, 0.72-0.91x a tile of
                # one column)
                return t.for_(lo, hi, t.c(S), list(zip(carried, bts)),
                              lambda kk, c: step(kk, c, in_memory=True))

            def summed(lo: str, carried: list[str], steps: int) -> list[str]:
                """``steps`` steps from ``lo`` summed in f32 lanes, then added into the f64
                lanes: each (row, column)'s sum, its halves added, into the first S / 4 of
                its f64 lanes (all of them where the tile folds), one after another (loads
                of every sum first held 16-32 of them in registers: spills)."""
                hi = t.op(f"{{r}} = arith.addi {lo}, {t.c(steps * S)} : index")
                f32s = [(zero_va, va)] * n64
                out = t.for_(lo, hi, t.c(S), f32s + list(zip(carried, bts)),
                             lambda kk, c: step(kk, c, summed=True))
                for x, lane in enumerate(out[:n64]):
                    add_into_acc64(x, widened(lane, True), _vt(S // 4, "f64"))
                return out[n64:]

            def group(kg: str, carried: list[str]) -> list[str]:
                end = t.op(f"{{r}} = arith.addi {kg}, {t.c(gs)} : index")
                spread = self.group_spread(kg, colv)

                # (the shorter groups -- mxint8 x mxint8's 4 steps -- in no parts: parts of 2
                # measured 0.90-0.96x for them on a Zen 4, normal data or spread)
                least = EXACT_GROUP_PARTS if self.group_steps == EXACT_GROUP else self.group_steps

                def by(steps: int) -> list[str]:
                    """The group, whose spread is within group_room(steps), as parts of
                    ``steps`` steps summed in f32 lanes (a part's spread is at most the
                    group's); else in parts half as long (one more binade of room), down
                    to EXACT_GROUP_PARTS steps; else step by step."""
                    if steps < least:
                        return by_steps(kg, end, carried)
                    ok = t.op(f"{{r}} = arith.cmpi ule, {spread}, "
                              f"{t.c(self.group_room(steps), 'i32')} : i32")

                    def parts() -> list[str]:
                        if steps == self.group_steps:
                            return summed(kg, carried, steps)
                        return t.for_(kg, end, t.c(steps * S), list(zip(carried, bts)),
                                      lambda lo, c: summed(lo, c, steps))

                    return t.if_values(ok, bts, parts, lambda: by(steps // 2))

                return by(self.group_steps)

            left = t.for_(c0, whole, t.c(gs), chunks, group)
            by_steps(whole, K, left)
            self.store_tile(rows, colv, sums(), vacc)
            return []

        t.for_(c0, ncols, t.c(nr), [], cols)

    def copy_rows(self) -> None:
        """Copies the unit's M rows of A (plain, as stored; MX rows decoded to f32 by
        :meth:`prepare` and converted to bf16, exactly: :attr:`a_bf16`) into :attr:`ap`,
        unless the call's previous unit copied that batch's: in slabs of :attr:`lay` values
        (a piped tile's step) of a tile's :attr:`grows` rows (of the :attr:`arows`), slab
        after slab -- K position k of row r at :meth:`slab_row` (r) + (k // lay) x grows x
        lay + k % lay --, so that a step reads its rows at fixed distances from one pointer
        (rows K values apart took a register each: 8 rows and the decode's pointers
        spilled) and a tile's slabs follow one another; zeros past K in the last slab (a
        second chunk of 16 past K) and in the rows from M to arows (their results are not
        stored)."""
        t, C, K, M = self.t, self.C, self.K, self.M
        b, _, _, arow0, _ = self.unit
        c0, c1 = t.c(0), t.c(1)
        at, L = self.ap_type, self.lay
        vt = _vt(C, at)
        zero = t.c(0.0, vt)

        def slab_at(base: str, kk: str) -> str:
            """The offset in :attr:`ap` of K position ``kk`` (a chunk's) of the row whose K
            position 0 is at ``base`` (:meth:`slab_row`)."""
            sl = t.op(f"{{r}} = arith.divui {kk}, {t.c(L)} : index")
            o = t.op(f"{{r}} = arith.muli {sl}, {self.grows} : index")
            o = t.op(f"{{r}} = arith.muli {o}, {t.c(L)} : index")
            w = t.op(f"{{r}} = arith.remui {kk}, {t.c(L)} : index")
            o = t.op(f"{{r}} = arith.addi {o}, {base} : index")
            return t.op(f"{{r}} = arith.addi {o}, {w} : index")

        def zeros(base: str, lo: str) -> None:
            """Zeros into the row at ``base`` from K position ``lo`` to the end of its last
            slab."""
            def chunk(kk: str, _: list[str]) -> list[str]:
                t.do(f"vector.store {zero}, {self.ap}[{slab_at(base, kk)}] : "
                     f"memref<?x{at}>, {vt}")
                return []

            t.for_(lo, self.kl, t.c(C), [], chunk)
        held = t.op(f"{{r}} = memref.load {self.apb}[{c0}] : memref<1xindex>")
        fresh = t.op(f"{{r}} = arith.cmpi ne, {held}, {b} : index")

        def copy() -> None:
            if self.a_bf16:  # the rows' scaled values, f32, in the scratch first
                self.prepare("lhs", arow0, c0, M, self.ad, None, scaled=True)

            def row(i: str, _: list[str]) -> list[str]:
                if self.a_bf16:
                    src = t.op(f"{{r}} = arith.muli {i}, {K} : index")
                else:
                    r = t.op(f"{{r}} = arith.addi {arow0}, {i} : index")
                    src = t.op(f"{{r}} = arith.muli {r}, {K} : index")
                base = self.slab_row(i)

                def step(kk: str, _: list[str]) -> list[str]:
                    o = t.op(f"{{r}} = arith.addi {src}, {kk} : index")
                    if self.a_bf16:  # exact: at most 8 significant bits, normal or zero
                        v = t.op(f"{{r}} = vector.load {self.ad}[{o}] : memref<?xf32>, "
                                 f"{_vt(C, 'f32')}")
                        v = t.op(f"{{r}} = arith.truncf {v} : {_vt(C, 'f32')} to {vt}")
                    else:
                        v = t.op(f"{{r}} = vector.load %a[{o}] : memref<?x{at}>, {vt}")
                    t.do(f"vector.store {v}, {self.ap}[{slab_at(base, kk)}] : "
                         f"memref<?x{at}>, {vt}")
                    return []

                t.for_(c0, K, t.c(C), [], step)
                if L > C:
                    zeros(base, K)
                return []

            t.for_(c0, M, c1, [], row)

            def empty(i: str, _: list[str]) -> list[str]:
                zeros(self.slab_row(i), c0)
                return []

            t.for_(M, self.arows, c1, [], empty)
            if self.grouped:
                self.row_spreads()
            t.do(f"memref.store {b}, {self.apb}[{c0}] : memref<1xindex>")

        t.if_(fresh, copy)

    def slab_row(self, r: str) -> str:
        """The offset in :attr:`ap` (:meth:`copy_rows`) of row ``r``'s K position 0: row i
        of the tile from row m0 (a multiple of :attr:`grows`) at m0 x kl + i x lay, where
        :meth:`piped_tile` reads it."""
        t = self.t
        i = t.op(f"{{r}} = arith.remui {r}, {self.grows} : index")
        m0 = t.op(f"{{r}} = arith.subi {r}, {i} : index")
        o = t.op(f"{{r}} = arith.muli {m0}, {self.kl} : index")
        w = t.op(f"{{r}} = arith.muli {i}, {t.c(self.lay)} : index")
        return t.op(f"{{r}} = arith.addi {o}, {w} : index")

    def group_values(self) -> int:
        """K values of a group of :attr:`group_steps` steps."""
        return self.group_steps * self.step_values()

    def group_blocks(self) -> int:
        """Blocks of a group of :attr:`group_steps` steps."""
        return self.group_values() // self.s.k("rhs")

    def spread(self, side: str, base: str) -> str:
        """i32: the largest minus the least exponent of ``side``'s :meth:`group_blocks`
        scale codes from ``base`` on (e8m0: the code; E4M3: its exponent field, 1 for the
        subnormals, whose significands are those of exponent 1's)."""
        t = self.t
        e4m3 = self.s.fmt(side).is_nvfp4
        smem = self.side_mems(side)[1]
        hi = lo = None
        for u in range(self.group_blocks()):
            o = t.op(f"{{r}} = arith.addi {base}, {t.c(u)} : index")
            c = t.op(f"{{r}} = memref.load {smem}[{o}] : memref<?xi8>")
            c = t.op(f"{{r}} = arith.extui {c} : i8 to i32")
            if e4m3:
                c = t.op(f"{{r}} = arith.shrui {c}, {t.c(3, 'i32')} : i32")
                c = t.op(f"{{r}} = arith.andi {c}, {t.c(15, 'i32')} : i32")
                c = t.op(f"{{r}} = arith.maxui {c}, {t.c(1, 'i32')} : i32")
            hi = c if hi is None else t.op(f"{{r}} = arith.maxui {hi}, {c} : i32")
            lo = c if lo is None else t.op(f"{{r}} = arith.minui {lo}, {c} : i32")
        return t.op(f"{{r}} = arith.subi {hi}, {lo} : i32")

    def row_spreads(self) -> None:
        """Per whole group of :meth:`group_blocks` blocks, the largest :meth:`spread` of the
        unit's M rows of A into :attr:`arng` (:meth:`group_spread`)."""
        t, M = self.t, self.M
        c0, c1 = t.c(0), t.c(1)
        arow0 = self.unit[3]

        def group(g: str, _: list[str]) -> list[str]:
            b0 = t.op(f"{{r}} = arith.muli {g}, {t.c(self.group_blocks())} : index")

            def row(i: str, acc: list[str]) -> list[str]:
                r = t.op(f"{{r}} = arith.addi {arow0}, {i} : index")
                o = t.op(f"{{r}} = arith.muli {r}, {self.nblk} : index")
                o = t.op(f"{{r}} = arith.addi {o}, {b0} : index")
                return [t.op(f"{{r}} = arith.maxui {acc[0]}, {self.spread('lhs', o)} : i32")]

            most = t.for_(c0, M, c1, [(t.c(0, "i32"), "i32")], row)[0]
            t.do(f"memref.store {most}, {self.arng}[{g}] : memref<?xi32>")
            return []

        t.for_(c0, self.ngroups, c1, [], group)

    def group_spread(self, kg: str, colv: list[tuple[str, str]]) -> str:
        """i32: a bound on every (row, column) pair's spread of block exponents (the two
        scales' exponents summed) in the group of :attr:`group_steps` steps from K position
        ``kg``: A's rows' largest spread (:meth:`row_spreads`) plus the tile's columns'
        largest; the group sums exactly in f32 lanes, in parts of ``n`` steps, while it is
        within :meth:`group_room` (``n``)."""
        t = self.t
        brow0 = self.unit[4]
        g = t.op(f"{{r}} = arith.divui {kg}, {t.c(self.group_values())} : index")
        most = t.op(f"{{r}} = memref.load {self.arng}[{g}] : memref<?xi32>")
        b0 = t.op(f"{{r}} = arith.muli {g}, {t.c(self.group_blocks())} : index")
        cols = None
        for _, nc in colv:
            r = t.op(f"{{r}} = arith.addi {brow0}, {nc} : index")
            o = t.op(f"{{r}} = arith.muli {r}, {self.nblk_r} : index")
            o = t.op(f"{{r}} = arith.addi {o}, {b0} : index")
            sp = self.spread("rhs", o)
            cols = sp if cols is None else t.op(f"{{r}} = arith.maxui {cols}, {sp} : i32")
        return t.op(f"{{r}} = arith.addi {most}, {cols} : i32")

    def pipe_lanes(self) -> int:
        """f32 lanes of the pipelined tile's accumulators (the 512-bit paths): 16 (zmm)
        where a chunk holds them, else :attr:`W`."""
        return 16 if self.C % 16 == 0 else self.W

    def block_factor(self, side: str, idx: int, rc: tuple[str, str], blk: str,
                     local: bool) -> str:
        """The factor of block ``blk`` of a tile row (lhs) or column (rhs): from the scratch
        where the side was prepared (``local``: at the tile's position ``idx``; the
        streaming path's A: at the row), else decoded from the scale codes."""
        t = self.t
        b, n0, ncols, arow0, brow0 = self.unit
        _, clamped = rc
        if side == "lhs":
            pos = t.c(idx) if local else clamped
            o = t.op(f"{{r}} = arith.muli {pos}, {self.nblk} : index")
            o = t.op(f"{{r}} = arith.addi {o}, {blk} : index")
            return t.op(f"{{r}} = memref.load {self.af}[{o}] : memref<?xf32>")
        if local:
            o = t.op(f"{{r}} = arith.muli {clamped}, {self.nblk} : index")
            o = t.op(f"{{r}} = arith.addi {o}, {blk} : index")
            return t.op(f"{{r}} = memref.load {self.bf}[{o}] : memref<?xf32>")
        r = t.op(f"{{r}} = arith.addi {brow0}, {clamped} : index")
        o = t.op(f"{{r}} = arith.muli {r}, {self.nblk} : index")
        o = t.op(f"{{r}} = arith.addi {o}, {blk} : index")
        return self.factor("rhs", "%bs", o)


#: rows of K ahead whose codes the K-major GEMV's step prefetches (:class:`_KnKernel`)
KN_PREFETCH_ROWS = 16
#: the K-major GEMV's tiles: rows of A -> vectors of 32 columns (16 accumulators of 512
#: bits), so that each visit of a row of K -- a page apart, for N of a few thousand --
#: reads as many of its codes as the registers allow
KN_TILES = {8: 1, 4: 2, 2: 4, 1: 8}
#: the fewest rows of a K-major tile of bf16 activations that runs on bf16 dot products
#: (:meth:`_KnKernel.kn_tile_bf16`, the 512-bit paths; fewer rows: the f32 FMAs); 0: none.
#: Against the FMAs at N = K = 4096 on a Zen 4, two runs: 8 rows 1.02-1.37x, 16 rows
#: 1.02-1.26x, 64 rows 1.09-1.24x faster; 4 rows 0.91-1.07x (BENCHMARKS.md, twentieth
#: session)
KN_BF16_ROWS = 8
#: rows of K (whole blocks, at least one) of the chunks in which the K-major kernel's bf16
#: tiles of 8 rows walk K together (:meth:`_KnKernel.kn_chunked`): each chunk's weights
#: decoded once into a scratch of bf16 pairs that every tile reads (1.5-2.6x faster at
#: M = 64-256 than each tile decoding its own, 1.0-1.6x at 8-16; BENCHMARKS.md,
#: twenty-second session); 0: every tile walks the whole of K decoding as it goes
KN_CHUNK_ROWS = 64
#: rows of K (whole blocks, at least one) of the chunks of f32 values in which the K-major
#: kernel's f32 tiles of 8 rows walk K together (:meth:`_KnKernel.kn_chunked`: 64 KB of
#: stack for a panel of 256 columns; 32 rows ran 0.88-1.02x as fast, 128 rows 0.96-1.06x:
#: BENCHMARKS.md, twenty-third session); 0: every tile decodes its own weights as it goes
KN_F32_CHUNK_ROWS = 64
#: rows of A (a multiple of 8) of a K-major kernel's work unit (:class:`_KnKernel`: a
#: block of rows, a batch, a panel of columns): its tiles walk K together in
#: :meth:`_KnKernel.kn_chunked`, their results in a scratch of that many rows of a panel (1
#: MB at 1024 rows), each block decoding the chunks again; XLA's threads split the blocks
#: too.  At 4096 rows 1.09-1.10x (bf16) and 1.26x (f32) faster than one block of all rows,
#: on a Zen 4 (BENCHMARKS.md, twenty-third session)
KN_BLOCK_ROWS = 1024
#: whether the f32 tiles of :meth:`_KnKernel.kn_chunked` take f16 (and bf16) rows' values
#: of each chunk converted to f32 once, into a slab of the tile's rows
#: (:meth:`_KnKernel.kn_slab`), rather than converting each value at every broadcast: f16
#: rows 1.3-2.0x faster at M = 8-256 on a Zen 4 (f32 rows, read as stored, level with a
#: copy: BENCHMARKS.md, twenty-third session)
KN_A_SLAB = True
#: whether K-major tiles of bf16 rows build f4 and f6 weights' bf16 pairs on integer words
#: (:meth:`_KnKernel.kn_added_pairs`), not by a conversion and a multiply in f32
KN_EXPONENT_ADD = True


def _f64_lit(v: float) -> str:
    """An f64 literal of MLIR's dense attributes, Inf and NaN as their bits."""
    if math.isnan(v):
        return "0x7FF8000000000000"
    if math.isinf(v):
        return "0x7FF0000000000000" if v > 0 else "0xFFF0000000000000"
    return repr(float(v))


class _KnKernel(_DotKernel):
    """The dot kernel of :attr:`DotSpec.rhs_kn`: plain rows of A ``[B, M, K]`` against MX
    weights held K-major, ``[B, K, N]`` with scales ``[B, K / k, N]`` -- the layout of
    weights ``[K, N]`` blocked along K (a ``[in, out]`` kernel quantized along its input
    axis), read as stored instead of through a transposed copy (XLA:CPU's transpose of a
    16 MB f8 or u8 array takes tens of milliseconds).  The units are ``(block of
    KN_BLOCK_ROWS rows, batch, panel of KN_PANEL columns)`` (:data:`KN_BLOCK_ROWS`,
    :attr:`DotSpec.panel`): per row of K a panel's codes are
    contiguous, so a tile reads :data:`KN_TILES` vectors of 32 columns a row of K -- each
    visit of a row (a page apart for N of a few thousand) as many codes as the
    accumulators allow (one row of A: 256 columns, 1.4-2x faster than 32) --, decodes them
    (:meth:`integer_units` / :meth:`f16_decode`), scales them by the columns' factors of
    that block (a vector of scale codes, contiguous too) and takes each row of A's value at
    K, broadcast, into one FMA per vector (bf16 rows on the 512-bit paths, tiles of
    :data:`KN_BF16_ROWS` rows and more: a pair of rows of K at a time on bf16 dot products,
    :meth:`kn_tile_bf16`).  The unit's tiles of 8 rows walk K all together, in chunks
    decoded once for them (:meth:`kn_chunked`: bf16 pairs, or f32 values for the FMAs);
    tiles of 8, 4, 2 and 1 rows cover the unit's rows exactly.
    The columns past a panel's whole vectors (N's last), f4 codes of an odd N (a row's
    codes then start mid-byte) and every unit where the range test fails take
    :meth:`kn_f64`: one result at a time, each product exact in f64, summed in f64,
    rounded once."""

    def __init__(self, spec: DotSpec):
        super().__init__(spec)
        self.C = 32  # columns a vector

    def function(self) -> str:
        s, t, C = self.s, self.t, self.C
        dims, (Bt, M, N, K) = self.open_function(s.name, 5)
        c1 = t.c(1)
        self.M, self.N, self.K = M, N, K
        cnp = t.c(s.panel)
        npan = t.op(f"{{r}} = arith.ceildivui {N}, {cnp} : index")
        self.nblk = t.op(f"{{r}} = arith.divui {K}, {t.c(s.k('rhs'))} : index")
        # dims[4]: 0 the f32 path, else the exact f64 contraction (the range test's)
        fast = t.op(f"{{r}} = arith.cmpi eq, {dims[4]}, {t.c(0, 'i64')} : i64")
        if s.fmt("rhs").bits == 4:  # a row of codes from a byte's start: N even
            odd = t.op(f"{{r}} = arith.remui {N}, {t.c(2)} : index")
            even = t.op(f"{{r}} = arith.cmpi eq, {odd}, {t.c(0)} : index")
            fast = t.op(f"{{r}} = arith.andi {fast}, {even} : i1")

        self.scratch = None
        if self.kn_chunk_blocks():  # the chunk's values (on the stack), every tile's results
            vt = self.kn_chunk_type()
            nb = self.kn_chunk_blocks() * s.k("rhs") * s.panel  # values
            vals = t.op(f"{{r}} = memref.alloca() {{{{alignment = 64 : i64}}}} : "
                        f"memref<{nb}x{vt}>")
            r8 = t.op(f"{{r}} = arith.minui {M}, {t.c(KN_BLOCK_ROWS)} : index")
            na = t.op(f"{{r}} = arith.muli {r8}, {t.c(s.panel)} : index")
            et, lanes, fn = self.kn_factor_slot()  # a block's factors for the panel
            ne = fn * lanes * (s.panel // C)
            ebuf = t.op(f"{{r}} = memref.alloca() {{{{alignment = 64 : i64}}}} : "
                        f"memref<{ne}x{et}>")
            self.scratch = (t.op(f"{{r}} = memref.cast {vals} : memref<{nb}x{vt}> to "
                                 f"memref<?x{vt}>"),
                            t.op(f"{{r}} = memref.alloc({na}) : memref<?xf32>"),
                            t.op(f"{{r}} = memref.cast {ebuf} : memref<{ne}x{et}> to "
                                 f"memref<?x{et}>"))
        # (every alloca here, before the unit loop: one in a loop grows the stack each time)
        self.slab = None  # f16 / bf16 rows on f32 FMAs: a tile's values of a chunk as f32
        if self.scratch is not None and KN_A_SLAB and self.kn_chunk_f32() and s.lhs != "f32":
            n = 8 * self.kn_chunk_blocks() * s.k("rhs")
            slab = t.op(f"{{r}} = memref.alloca() {{{{alignment = 64 : i64}}}} : memref<{n}xf32>")
            self.slab = t.op(f"{{r}} = memref.cast {slab} : memref<{n}xf32> to memref<?xf32>")

        per = t.op(f"{{r}} = arith.muli {Bt}, {npan} : index")  # units a block of rows

        def unit(u: str, _: list[str]) -> list[str]:
            mb = t.op(f"{{r}} = arith.divui {u}, {per} : index")
            b, n0, ncols = self.panel_of(t.op(f"{{r}} = arith.remui {u}, {per} : index"),
                                         npan, cnp)
            lo = t.op(f"{{r}} = arith.muli {mb}, {t.c(KN_BLOCK_ROWS)} : index")
            hi = t.op(f"{{r}} = arith.addi {lo}, {t.c(KN_BLOCK_ROWS)} : index")
            self.rows_of = (lo, t.op(f"{{r}} = arith.minui {hi}, {M} : index"))
            # whole vectors of columns on the f32 path, the rest exactly
            nv = t.op(f"{{r}} = arith.divui {ncols}, {t.c(C)} : index")
            nv = t.op(f"{{r}} = arith.select {fast}, {nv}, {t.c(0)} : index")
            t.if_(t.op(f"{{r}} = arith.cmpi ne, {nv}, {t.c(0)} : index"),
                  lambda: self.kn_rows(b, n0, nv))
            done = t.op(f"{{r}} = arith.muli {nv}, {t.c(C)} : index")
            n1 = t.op(f"{{r}} = arith.addi {n0}, {done} : index")
            rest = t.op(f"{{r}} = arith.subi {ncols}, {done} : index")
            self.kn_f64(b, n1, rest)
            return []

        t.for_("%u0", "%u1", c1, [], unit)
        if self.scratch is not None:
            t.do(f"memref.dealloc {self.scratch[1]} : memref<?xf32>")
        return self.close_function()

    def kn_rows(self, b: str, n0: str, nv: str) -> None:
        """The f32 path of ``nv`` whole vectors of columns from ``n0``: the unit's rows
        (:attr:`rows_of`) in tiles of 8, then one each of 4, 2 and 1 as their count's low
        bits ask, each against :data:`KN_TILES` vectors of columns at a time (the last ones
        one at a time)."""
        t, C = self.t, self.C
        lo, hi = self.rows_of

        def cols(m0: str, mr: int) -> None:
            nc = KN_TILES[mr]
            whole = t.op(f"{{r}} = arith.divui {nv}, {t.c(nc)} : index")
            whole = t.op(f"{{r}} = arith.muli {whole}, {t.c(nc)} : index")

            def group(v: str, nc: int) -> list[str]:
                c0 = t.op(f"{{r}} = arith.muli {v}, {t.c(C)} : index")
                self.kn_tile(b, t.op(f"{{r}} = arith.addi {n0}, {c0} : index"), m0, mr, nc)
                return []

            t.for_(t.c(0), whole, t.c(nc), [], lambda v, _: group(v, nc))
            if nc > 1:
                t.for_(whole, nv, t.c(1), [], lambda v, _: group(v, 1))

        n = t.op(f"{{r}} = arith.subi {hi}, {lo} : index")
        r8 = t.op(f"{{r}} = arith.divui {n}, {t.c(8)} : index")
        r8 = t.op(f"{{r}} = arith.muli {r8}, {t.c(8)} : index")
        rem = t.op(f"{{r}} = arith.subi {n}, {r8} : index")
        r8 = t.op(f"{{r}} = arith.addi {lo}, {r8} : index")  # the tiles of 8 rows' end
        if self.scratch is not None:  # the tiles of 8 rows together, K in chunks
            t.if_(t.op(f"{{r}} = arith.cmpi ne, {r8}, {lo} : index"),
                  lambda: self.kn_chunked(b, n0, nv, lo, r8))
        else:
            t.for_(lo, r8, t.c(8), [], lambda m0, _: cols(m0, 8) or [])
        for bit, below in ((4, 0), (2, 4), (1, 6)):
            has = t.op(f"{{r}} = arith.andi {rem}, {t.c(bit)} : index")
            has = t.op(f"{{r}} = arith.cmpi ne, {has}, {t.c(0)} : index")
            done = t.op(f"{{r}} = arith.andi {rem}, {t.c(below)} : index")
            m0 = t.op(f"{{r}} = arith.addi {r8}, {done} : index")
            t.if_(has, lambda m0=m0, bit=bit: cols(m0, bit))

    def kn_a(self, row: str, k: str, f64: bool = False) -> str:
        """A's value at (absolute row ``row``, ``k``): f32, or (``f64``) exact in f64 (a
        subnormal one from its bits)."""
        t, pt = self.t, self.s.lhs
        o = t.op(f"{{r}} = arith.muli {row}, {self.K} : index")
        o = t.op(f"{{r}} = arith.addi {o}, {k} : index")
        v = t.op(f"{{r}} = memref.load %a[{o}] : memref<?x{pt}>")
        if pt != "f32":  # exact (bf16: a shift; f16: F16C, whatever the flush modes)
            v = t.op(f"{{r}} = arith.extf {v} : {pt} to f32")
        if not f64:
            return v
        v1 = t.op(f"{{r}} = vector.broadcast {v} : f32 to vector<1xf32>")
        d = self.f64_of_f32(v1, 1)
        return t.op(f"{{r}} = vector.extract {d}[0] : f64 from vector<1xf64>")

    def kn_bf16(self, mr: int) -> bool:
        """Whether a tile of ``mr`` rows runs on bf16 dot products (:meth:`kn_tile_bf16`):
        bf16 rows on the 512-bit paths, at least :data:`KN_BF16_ROWS` of them, an even
        block size."""
        s = self.s
        return (bool(KN_BF16_ROWS) and mr >= KN_BF16_ROWS and s.lhs == "bf16"
                and s.path in AVX512_PATHS and s.k("rhs") % 2 == 0)

    def kn_tile(self, b: str, n0: str, m0: str, mr: int, nc: int) -> None:
        """Rows ``m0`` to ``m0 + mr`` (of batch ``b``) against ``nc`` vectors of columns
        from ``n0``: per block of K the columns' factors, per row of K the columns' codes
        decoded (unscaled), scaled by a multiply, and one FMA a row and vector with A's
        value broadcast (bf16 rows: :meth:`kn_tile_bf16` where :meth:`kn_bf16`)."""
        if self.kn_bf16(mr):
            self.kn_tile_bf16(b, n0, m0, mr, nc)
            return
        if self.kn_f32_added():
            self.kn_tile_f32_added(b, n0, m0, mr, nc)
            return
        t, C = self.t, self.C
        vf = _vt(C, "f32")
        rows = self.kn_tile_rows(b, m0, mr)

        def block(jb: str, accs: list[str]) -> list[str]:
            fvs, k0 = self.kn_block(b, jb, n0, nc)

            def step(dk: str, accs: list[str]) -> list[str]:
                k = t.op(f"{{r}} = arith.addi {k0}, {dk} : index")
                vs = self.kn_scaled(b, k, n0, nc, fvs)
                return self.broadcast_fmas(mr, lambda i: self.kn_a(rows[i], k), vs, accs, vf)

            return t.for_(t.c(0), t.c(self.s.k("rhs")), t.c(1), [(a, vf) for a in accs], step)

        zero = t.c(0.0, vf)
        accs = t.for_(t.c(0), self.nblk, t.c(1), [(zero, vf)] * (mr * nc), block)
        self.kn_store(rows, n0, accs, C)

    def kn_f32_added(self) -> bool:
        """Whether the f32 tiles take :meth:`kn_tile_f32_added` (e2m1 codes with e8m0
        scales on the 512-bit paths, :data:`KN_EXPONENT_ADD`)."""
        f = self.s.fmt("rhs")
        return (KN_EXPONENT_ADD and self.s.path in AVX512_PATHS and not f.is_nvfp4
                and f.element_type is not None and f.element_type.bits == 4)

    def kn_tile_f32_added(self, b: str, n0: str, m0: str, mr: int, nc: int) -> None:
        """:meth:`kn_tile` for e2m1 weights on integer words: each vector of 32 columns
        held as its 16 even columns and its 16 odd ones (a byte's two codes), per row of K
        its 16 bytes widened to 32-bit lanes once, the low code's unscaled value by one
        permute from a table of 16 f32 values (the lane's bits above its low four are
        free), the high code's after a shift, the column's exponent word (scale code -
        127, times 2^23) added to the non-zero ones: the scaled value, exact under the range
        test (normal, finite) -- no conversion, no multiply beside the FMAs, one FMA a row
        and half vector with A's value broadcast.  The columns interleaved again at the
        store."""
        t, s = self.t, self.s
        v16 = _vt(16, "f32")
        rows = self.kn_tile_rows(b, m0, mr)

        def block(jb: str, accs: list[str]) -> list[str]:
            exps, k0 = self.kn_f32_exponents(b, jb, n0, nc)

            def step(dk: str, accs: list[str]) -> list[str]:
                k = t.op(f"{{r}} = arith.addi {k0}, {dk} : index")
                vs = self.kn_added_f32(b, k, n0, nc, exps)
                return self.broadcast_fmas(mr, lambda i: self.kn_a(rows[i], k), vs, accs, v16)

            return t.for_(t.c(0), t.c(s.k("rhs")), t.c(1), [(a, v16) for a in accs], step)

        zero = t.c(0.0, v16)
        accs = t.for_(t.c(0), self.nblk, t.c(1), [(zero, v16)] * (mr * 2 * nc), block)
        inter = ", ".join(f"{i}, {i + 16}" for i in range(16))  # even, odd -> in order
        whole = []
        for x in range(0, len(accs), 2):
            whole.append(t.op(f"{{r}} = vector.shuffle {accs[x]}, {accs[x + 1]} [{inter}] : "
                              f"{v16}, {v16}"))
        self.kn_store(rows, n0, whole, self.C)

    def kn_f32_exponents(self, b: str, jb: str, n0: str, nc: int) -> tuple[list[str], str]:
        """:meth:`kn_block` for :meth:`kn_added_f32`: per vector of 32 columns from ``n0``
        its even columns' exponent words (``vector<16xi32>``: scale code - 127, times
        2^23), then its odd columns'; and the block's first row of K."""
        t, C = self.t, self.C
        so = self.kn_scales_at(b, jb, n0)
        exps = [self.kn_exponent_words(so, j, range(half, C, 2), 32, 23)
                for j in range(nc) for half in (0, 1)]
        return exps, t.op(f"{{r}} = arith.muli {jb}, {t.c(self.s.k('rhs'))} : index")

    def kn_added_f32(self, b: str, k: str, n0: str, nc: int, exps: list[str]) -> list[str]:
        """Per vector of 32 columns from ``n0``, its e2m1 values at row ``k`` as f32 on
        integer words (:meth:`kn_tile_f32_added`): its 16 even columns' ``vector<16xf32>``,
        then its 16 odd columns'."""
        t, C = self.t, self.C
        f = self.s.fmt("rhs")
        v16, vi, vb = _vt(16, "f32"), _vt(16, "i32"), _vt(16, "i8")
        shift = integer_shift(f) or 0
        vals = [u / 2 ** shift for u in code_units(f, range(16))]
        at = self.kn_at(b, k, n0, nc)
        tab = t.op(f"{{r}} = arith.constant dense<[{', '.join(map(repr, vals))}]> : {v16}")
        vs = []
        for j in range(nc):
            aj = t.op(f"{{r}} = arith.addi {at}, {t.c(j * C)} : index")
            aj = t.op(f"{{r}} = arith.divui {aj}, {t.c(2)} : index")
            raw = t.op(f"{{r}} = vector.load %b[{aj}] : memref<?xi8>, {vb}")
            d = t.op(f"{{r}} = arith.extui {raw} : {vb} to {vi}")
            hi = t.op(f"{{r}} = arith.shrui {d}, {t.c(4, vi)} : {vi}")
            for half, ix in enumerate((d, hi)):
                v = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"'
                         f"({tab}, {ix}) : ({v16}, {vi}) -> {v16}")
                w = t.op(f"{{r}} = arith.bitcast {v} : {v16} to {vi}")
                w = self.exponent_added(w, exps[2 * j + half], 16, 32)
                vs.append(t.op(f"{{r}} = arith.bitcast {w} : {vi} to {v16}"))
        return vs

    def kn_tile_bf16(self, b: str, n0: str, m0: str, mr: int, nc: int) -> None:
        """:meth:`kn_tile` on bf16 dot products: every block of K walked by
        :meth:`kn_walk_bf16` from zero accumulators, the result stored."""
        t = self.t
        rows = self.kn_tile_rows(b, m0, mr)
        zero = t.c(0.0, _vt(16, "f32"))
        accs = self.kn_walk_bf16(b, n0, rows, nc, t.c(0), self.nblk,
                                 [zero] * (mr * 2 * nc))
        self.kn_store(rows, n0, accs, 16)

    def kn_walk_bf16(self, b: str, n0: str, rows: list[str], nc: int, jb0: str, jb1: str,
                     accs: list[str]) -> list[str]:
        """Blocks ``jb0`` to ``jb1`` of K of rows ``rows`` (absolute) against ``nc`` vectors
        of columns from ``n0`` into the accumulators ``accs`` (per row, per vector, its 16
        columns' ``vector<16xf32>`` twice), on bf16 dot products: per pair of rows of K (k,
        k + 1, in one block: its size even) each vector's columns' pairs of bf16 values
        (:meth:`kn_pairs`), and per row of A its pair of values at (k, k + 1) -- two bf16 as
        stored, one 32-bit load -- broadcast into one ``vdpbf16ps`` per 16 columns: the two
        exact products added into the column's f32 lane."""
        t = self.t
        v16 = _vt(16, "f32")

        def block(jb: str, accs: list[str]) -> list[str]:
            fvs, k0 = self.kn_block_factors(b, jb, n0, nc)

            def step(dk: str, accs: list[str]) -> list[str]:
                k = t.op(f"{{r}} = arith.addi {k0}, {dk} : index")
                pairs = self.kn_pairs(b, k, n0, nc, fvs)
                return self.kn_dots(rows, k, accs, pairs)

            return t.for_(t.c(0), t.c(self.s.k("rhs")), t.c(2), [(a, v16) for a in accs],
                          step)

        return t.for_(jb0, jb1, t.c(1), [(a, v16) for a in accs], block)

    def kn_block_factors(self, b: str, jb: str, n0: str, nc: int) -> tuple[list, str]:
        """What :meth:`kn_pairs` needs of block ``jb`` (:meth:`kn_exponents` or
        :meth:`kn_block`), and the block's first row of K."""
        if self.kn_exponents_added():
            return self.kn_exponents(b, jb, n0, nc)
        return self.kn_block(b, jb, n0, nc)

    def kn_pairs(self, b: str, k: str, n0: str, nc: int, fvs: list) -> list[str]:
        """Per vector of 32 columns from ``n0``, its columns' pairs of B's values at rows
        ``k`` and ``k + 1`` as bf16 (exact: at most 8 significant bits, normal under the
        range test), 16 columns a ``vector<32xbf16>``: on integer words
        (:meth:`kn_added_pairs`), or each row's codes decoded and scaled in f32
        (:meth:`kn_scaled`) and each column's pair taken straight from the two f32 lanes'
        high words (one two-source word permute per 16 columns)."""
        t, C = self.t, self.C
        if self.kn_exponents_added():
            return self.kn_added_pairs(b, k, n0, nc, fvs)
        vbf, vw, vf, vh = _vt(C, "bf16"), _vt(2 * C, "i16"), _vt(C, "f32"), _vt(C, "i16")
        # the columns' pairs: word 2c + 1 of the first row's lane c, then the second's
        lo, hi = (", ".join(f"{2 * j + 1}, {2 * C + 2 * j + 1}" for j in js)
                  for js in (range(C // 2), range(C // 2, C)))
        k1 = t.op(f"{{r}} = arith.addi {k}, {t.c(1)} : index")
        x, y = ([t.op(f"{{r}} = vector.bitcast {v} : {vf} to {vw}")
                 for v in self.kn_scaled(b, kh, n0, nc, fvs)] for kh in (k, k1))
        pairs = []
        for j in range(nc):
            for order in (lo, hi):
                w = t.op(f"{{r}} = vector.shuffle {x[j]}, {y[j]} [{order}] : {vw}, {vw}")
                pairs.append(t.op(f"{{r}} = vector.bitcast {w} : {vh} to {vbf}"))
        return pairs

    def kn_dots(self, rows: list[str], k: str, accs: list[str], pairs: list[str]) -> list[str]:
        """``accs`` (per row, per vector of ``pairs``) plus, per row of A, its pair of values
        at (``k``, ``k + 1``) -- two bf16 as stored, one 32-bit load, broadcast -- times each
        vector of ``pairs`` by one ``vdpbf16ps``."""
        t, C, K = self.t, self.C, self.K
        v16, vi, vbf = _vt(16, "f32"), _vt(16, "i32"), _vt(C, "bf16")
        out = list(accs)
        for i, row in enumerate(rows):
            ar = t.op(f"{{r}} = arith.muli {row}, {K} : index")
            a1 = self.bf16_pair(t.op(f"{{r}} = arith.addi {ar}, {k} : index"))
            av = t.op(f"{{r}} = vector.broadcast {a1} : i32 to {vi}")
            av = t.op(f"{{r}} = vector.bitcast {av} : {vi} to {vbf}")
            for x, pv in enumerate(pairs):
                acc = i * len(pairs) + x
                out[acc] = t.op(f'{{r}} = llvm.call_intrinsic '
                                f'"llvm.x86.avx512bf16.dpbf16ps.512"({accs[acc]}, {av}, '
                                f"{pv}) : ({v16}, {vbf}, {vbf}) -> {v16}")
        return out

    def kn_exponents_added(self) -> bool:
        """Whether :meth:`kn_walk_bf16` makes its pairs by :meth:`kn_added_pairs` (f4 and f6
        codes with e8m0 scales, :data:`KN_EXPONENT_ADD`, where the kernel has bf16 tiles),
        else from the f32 values of :meth:`kn_scaled`."""
        f = self.s.fmt("rhs")
        return (KN_EXPONENT_ADD and self.kn_bf16(max(KN_TILES)) and not f.is_nvfp4
                and not f.is_int and f.element_type is not None
                and f.element_type.bits in (4, 6))

    def kn_exponents(self, b: str, jb: str, n0: str, nc: int) -> tuple[list[str], str]:
        """:meth:`kn_block` for :meth:`kn_added_pairs`: per vector of columns the two
        ``vector<32xi16>`` of its scales' exponents (code - 127) times 2^7 -- a bf16
        exponent field's step --, each column's twice (its pair's two words): its first 16
        columns, then its last."""
        t, C = self.t, self.C
        so = self.kn_scales_at(b, jb, n0)
        out = [self.kn_exponent_words(so, j, [c for c in cols for _ in (0, 1)], 16, 7)
               for j in range(nc) for cols in (range(C // 2), range(C // 2, C))]
        return out, t.op(f"{{r}} = arith.muli {jb}, {t.c(self.s.k('rhs'))} : index")

    def kn_added_pairs(self, b: str, k: str, n0: str, nc: int, exps: list[str]) -> list[str]:
        """Per vector of 32 columns from ``n0``, its columns' pairs of rows ``k`` and ``k +
        1`` as bf16 (:meth:`kn_walk_bf16`, 16 columns a ``vector<32xbf16>``) on integer
        words: both rows' codes put in pair order by one byte permute, each code's unscaled
        value as bf16 bits by one word permute from a table (f4: 16 values twice over, so
        that a word's bits above its code are free; f6: 64 values, two tables), and the
        column's exponent word (:meth:`kn_exponents`) added to every non-zero one: the
        scaled value, exact where the range test holds (every non-zero one normal and
        finite in bf16).  No conversion, no multiply: the FMA pipes keep the dot products."""
        t, s, C = self.t, self.s, self.C
        f = s.fmt("rhs")
        four = f.bits == 4
        vw, vbf = _vt(C, "i16"), _vt(C, "bf16")
        shift = integer_shift(f) or 0
        vals = [u / 2 ** shift for u in code_units(f, range(1 << f.element_type.bits))]
        bits = _bf16_bits(vals * 2 if four else vals)
        tabs = [t.op(f"{{r}} = arith.constant dense<[{', '.join(map(str, part))}]> : {vw}")
                for part in (bits[:32], bits[32:]) if part]
        at0 = self.kn_at(b, k, n0, nc)
        at1 = self.kn_at(b, t.op(f"{{r}} = arith.addi {k}, {t.c(1)} : index"), n0, nc)
        out = []
        for j in range(nc):
            rows = []
            for at in (at0, at1):
                aj = t.op(f"{{r}} = arith.addi {at}, {t.c(j * C)} : index")
                if four:
                    aj = t.op(f"{{r}} = arith.divui {aj}, {t.c(2)} : index")
                rows.append(t.op(f"{{r}} = vector.load %b[{aj}] : memref<?xi8>, "
                                 f"{_vt(C // 2 if four else C, 'i8')}"))
            if four:  # [k | k + 1 | k >> 4 | (k + 1) >> 4], 16 bytes each: a code a nibble
                v16, v32 = _vt(16, "i8"), _vt(32, "i8")
                z = t.op(f"{{r}} = vector.shuffle {rows[0]}, {rows[1]} "
                         f"[{', '.join(map(str, range(32)))}] : {v16}, {v16}")
                zw = t.op(f"{{r}} = vector.bitcast {z} : {v32} to {_vt(16, 'i16')}")
                zw = t.op(f"{{r}} = arith.shrui {zw}, {t.c(4, _vt(16, 'i16'))} : "
                          f"{_vt(16, 'i16')}")
                zs = t.op(f"{{r}} = vector.bitcast {zw} : {_vt(16, 'i16')} to {v32}")
                y = t.op(f"{{r}} = vector.shuffle {z}, {zs} [{', '.join(map(str, range(64)))}]"
                         f" : {v32}, {v32}")

                def byte(c: int, r: int) -> int:  # code (k + r, column c)'s byte of y
                    return (32 if c % 2 else 0) + 16 * r + c // 2
            else:  # [k | k + 1], 32 bytes each
                v32 = _vt(32, "i8")
                y = t.op(f"{{r}} = vector.shuffle {rows[0]}, {rows[1]} "
                         f"[{', '.join(map(str, range(64)))}] : {v32}, {v32}")

                def byte(c: int, r: int) -> int:
                    return 32 * r + c
            for cols, e in zip((range(C // 2), range(C // 2, C)), exps[2 * j:2 * j + 2]):
                order = ", ".join(f"{byte(c, r)}, {byte(c, r)}" for c in cols for r in (0, 1))
                ix = t.op(f"{{r}} = vector.shuffle {y}, {y} [{order}] : {_vt(64, 'i8')}, "
                          f"{_vt(64, 'i8')}")
                ix = t.op(f"{{r}} = vector.bitcast {ix} : {_vt(64, 'i8')} to {vw}")
                if four:
                    v = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"'
                             f"({tabs[0]}, {ix}) : ({vw}, {vw}) -> {vw}")
                else:
                    v = t.op(f'{{r}} = llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.hi.512"'
                             f"({tabs[0]}, {ix}, {tabs[1]}) : ({vw}, {vw}, {vw}) -> {vw}")
                v = self.exponent_added(v, e, C, 16)
                out.append(t.op(f"{{r}} = vector.bitcast {v} : {vw} to {vbf}"))
        return out

    def kn_chunk_f32(self) -> bool:
        """Whether the chunks of :meth:`kn_chunked` hold f32 values for tiles of f32 FMAs
        (f32 and f16 rows; bf16 rows where they have no bf16 tiles), not pairs of bf16
        values for bf16 dot products (:meth:`kn_bf16`)."""
        return not self.kn_bf16(8)

    def kn_chunk_type(self) -> str:
        """The element type of :meth:`kn_chunked`'s scratch of a chunk's values."""
        return "f32" if self.kn_chunk_f32() else "bf16"

    def kn_factor_slot(self) -> tuple[str, int, int]:
        """(element type, lanes, vectors) of what a vector of 32 columns needs of a block to
        make its values (:meth:`kn_chunk_factors`), kept for the panel in a scratch by
        :meth:`kn_chunked`: two ``vector<32xi16>`` of exponent words (bf16 pairs,
        :meth:`kn_exponents`), two ``vector<16xi32>`` (f32 e2m1 values,
        :meth:`kn_f32_exponents`), or one ``vector<32xf32>`` of factors (:meth:`kn_block`)."""
        if self.kn_chunk_f32():
            return ("i32", 16, 2) if self.kn_f32_added() else ("f32", self.C, 1)
        return ("i16", self.C, 2) if self.kn_exponents_added() else ("f32", self.C, 1)

    def kn_chunk_factors(self, b: str, jb: str, n0: str) -> list[str]:
        """What the vector of 32 columns from ``n0`` needs of block ``jb`` to make its values
        in a chunk (:meth:`kn_chunk_values`), as :meth:`kn_factor_slot` says."""
        if self.kn_chunk_f32() and self.kn_f32_added():
            return self.kn_f32_exponents(b, jb, n0, 1)[0]
        if self.kn_chunk_f32():
            return self.kn_block(b, jb, n0, 1)[0]
        return self.kn_block_factors(b, jb, n0, 1)[0]

    def kn_chunk_values(self, b: str, k: str, n0: str, fvs: list[str]) -> list[str]:
        """The values a chunk holds of the vector of 32 columns from ``n0`` at row ``k`` of
        K: their f32 values in order (one ``vector<32xf32>``), or (bf16 tiles) their pairs
        of rows ``k`` and ``k + 1`` (:meth:`kn_pairs`, two ``vector<32xbf16>``)."""
        t = self.t
        if not self.kn_chunk_f32():
            return self.kn_pairs(b, k, n0, 1, fvs)
        if not self.kn_f32_added():
            return self.kn_scaled(b, k, n0, 1, fvs)
        even, odd = self.kn_added_f32(b, k, n0, 1, fvs)
        inter = ", ".join(f"{i}, {i + 16}" for i in range(16))
        return [t.op(f"{{r}} = vector.shuffle {even}, {odd} [{inter}] : {_vt(16, 'f32')}, "
                     f"{_vt(16, 'f32')}")]

    def kn_chunk_blocks(self) -> int:
        """Blocks of K a chunk of :meth:`kn_chunked` (:data:`KN_CHUNK_ROWS` for bf16 pairs,
        :data:`KN_F32_CHUNK_ROWS` for f32 values), 0: none (chunks switched off)."""
        rows = KN_F32_CHUNK_ROWS if self.kn_chunk_f32() else KN_CHUNK_ROWS
        if not rows:
            return 0
        return max(1, rows // self.s.k("rhs"))

    def kn_chunked(self, b: str, n0: str, nv: str, mb0: str, mb1: str) -> None:
        """The tiles of 8 rows ``mb0`` to ``mb1`` of batch ``b`` against the unit's ``nv``
        vectors of columns from ``n0``, K in chunks of :meth:`kn_chunk_blocks` blocks: each
        chunk's values (:meth:`kn_chunk_values`: bf16 pairs or f32 values, each row of
        codes read once, whole lines, for every tile) written into a scratch, then per tile
        and vector of columns its 16 accumulators read from a scratch of every tile's
        results, the chunk's values taken into them (bf16 pairs: :meth:`kn_dots`; f32
        values: one FMA per row of A and 16 columns, A's value broadcast) and stored back;
        the results copied out after the last chunk.  Every tile's products and sums are
        the ones :meth:`kn_tile_bf16` / :meth:`kn_tile` form, in the same order."""
        t, s, C, N = self.t, self.s, self.C, self.N
        vals_buf, accbuf, ebuf = self.scratch
        kb = s.k("rhs")
        r8 = t.op(f"{{r}} = arith.subi {mb1}, {mb0} : index")  # rows (the scratch's from 0)
        g = self.kn_chunk_blocks()
        f32 = self.kn_chunk_f32()
        P = s.panel  # columns a row of either scratch (bf16 pairs: 2 P values a pair of rows)
        step_rows = 1 if f32 else 2  # rows of K a step (pairs: a column's values a row of the
        # scratch, the row's and the next's)
        vt = self.kn_chunk_type()
        v16, vv = _vt(16, "f32"), _vt(C, vt)

        def add(x: str, y: str) -> str:
            return t.op(f"{{r}} = arith.addi {x}, {y} : index")

        def mul(x: str, y: int) -> str:
            return t.op(f"{{r}} = arith.muli {x}, {t.c(y)} : index")

        ncol = mul(nv, C)  # columns of whole vectors
        zero = t.c(0.0, v16)
        t.for_(t.c(0), mul(r8, P), t.c(16), [], lambda o, _: t.do(
            f"vector.store {zero}, {accbuf}[{o}] : memref<?xf32>, {v16}") or [])
        nchunk = t.op(f"{{r}} = arith.ceildivui {self.nblk}, {t.c(g)} : index")
        R = g * kb  # rows of K a chunk
        slab = self.slab  # (f16 or bf16 rows on f32 FMAs: a tile's values of a chunk as f32)

        def at(q: str, jc: str) -> str:  # the chunk's row q (pairs: even), column jc
            return add(mul(q, P), mul(jc, step_rows))

        def chunk(c: str, _: list[str]) -> list[str]:
            jb0 = mul(c, g)
            jb1 = t.op(f"{{r}} = arith.minui {add(jb0, t.c(g))}, {self.nblk} : index")
            k0 = mul(jb0, kb)
            nsteps = mul(t.op(f"{{r}} = arith.subi {jb1}, {jb0} : index"), kb // step_rows)

            def store(k: str, jc: str, values: list[str]) -> None:
                q = t.op(f"{{r}} = arith.subi {k}, {k0} : index")
                o = at(q, jc)
                for h, pv in enumerate(values):
                    t.do(f"vector.store {pv}, {vals_buf}[{add(o, t.c(h * C))}] : "
                         f"memref<?x{vt}>, {vv}")

            # a row (a pair of rows) of K at a time, every vector of the panel's rows in
            # turn (whole lines; a vector of columns down every row would read a sixteenth
            # of an f4 line a row: 1.06-1.12x slower at M = 8), the block's factors from a
            # scratch
            elt, lanes, fn = self.kn_factor_slot()
            et, mt = _vt(lanes, elt), f"memref<?x{elt}>"
            per = fn * lanes  # a vector of columns' factor values

            def decode(jb: str, _: list[str]) -> list[str]:
                def factors(j: str, _: list[str]) -> list[str]:
                    fvs = self.kn_chunk_factors(b, jb, add(n0, mul(j, C)))
                    for h, f in enumerate(fvs):
                        t.do(f"vector.store {f}, {ebuf}[{add(mul(j, per), t.c(h * lanes))}] "
                             f": {mt}, {et}")
                    return []

                t.for_(t.c(0), nv, t.c(1), [], factors)
                kj = mul(jb, kb)

                def step(dk: str, _: list[str]) -> list[str]:
                    k = add(kj, dk)

                    def vec(j: str, _: list[str]) -> list[str]:
                        jc = mul(j, C)
                        fvs = [t.op(f"{{r}} = vector.load {ebuf}[{add(mul(j, per), t.c(h * lanes))}"
                                    f"] : {mt}, {et}") for h in range(fn)]
                        store(k, jc, self.kn_chunk_values(b, k, add(n0, jc), fvs))
                        return []

                    t.for_(t.c(0), nv, t.c(1), [], vec)
                    return []

                t.for_(t.c(0), t.c(kb), t.c(step_rows), [], step)
                return []

            t.for_(jb0, jb1, t.c(1), [], decode)

            def tile(m0: str, _: list[str]) -> list[str]:
                rows = self.kn_tile_rows(b, t.op(f"{{r}} = arith.addi {mb0}, {m0} : index"), 8)
                if slab is not None:
                    self.kn_slab(slab, rows, k0, mul(nsteps, step_rows), R)

                def a_value(i: int, k: str) -> str:  # row i's value at k, f32
                    if slab is None:
                        return self.kn_a(rows[i], k)
                    o = add(t.op(f"{{r}} = arith.subi {k}, {k0} : index"), t.c(i * R))
                    return t.op(f"{{r}} = memref.load {slab}[{o}] : memref<?xf32>")

                def vec(j: str, _: list[str]) -> list[str]:
                    jc = mul(j, C)
                    offs = [add(add(mul(m0, P), jc), t.c(i * P + h))
                            for i in range(8) for h in (0, 16)]
                    accs = [t.op(f"{{r}} = vector.load {accbuf}[{o}] : memref<?xf32>, {v16}")
                            for o in offs]

                    def step(q: str, accs: list[str]) -> list[str]:
                        o = at(mul(q, step_rows), jc)
                        k = add(k0, mul(q, step_rows))
                        if not f32:
                            pairs = [t.op(f"{{r}} = vector.load {vals_buf}[{add(o, t.c(h * C))}"
                                          f"] : memref<?xbf16>, {vv}") for h in (0, 1)]
                            return self.kn_dots(rows, k, accs, pairs)
                        vs = [t.op(f"{{r}} = vector.load {vals_buf}[{add(o, t.c(h))}] : "
                                   f"memref<?xf32>, {v16}") for h in (0, 16)]
                        return self.broadcast_fmas(8, lambda i: a_value(i, k), vs, accs, v16)

                    accs = t.for_(t.c(0), nsteps, t.c(1), [(a, v16) for a in accs], step)
                    for acc, o in zip(accs, offs):
                        t.do(f"vector.store {acc}, {accbuf}[{o}] : memref<?xf32>, {v16}")
                    return []

                t.for_(t.c(0), nv, t.c(1), [], vec)
                return []

            t.for_(t.c(0), r8, t.c(8), [], tile)
            return []

        t.for_(t.c(0), nchunk, t.c(1), [], chunk)
        arow0 = t.op(f"{{r}} = arith.muli {b}, {self.M} : index")

        def out_row(m: str, _: list[str]) -> list[str]:  # the tiles' results
            o = t.op(f"{{r}} = arith.muli {add(add(arow0, mb0), m)}, {N} : index")
            o = add(o, n0)
            src = mul(m, P)

            def out(c: str, _: list[str]) -> list[str]:
                v = t.op(f"{{r}} = vector.load {accbuf}[{add(src, c)}] : memref<?xf32>, {v16}")
                t.do(f"vector.store {v}, %out[{add(o, c)}] : memref<?xf32>, {v16}")
                return []

            t.for_(t.c(0), ncol, t.c(16), [], out)
            return []

        t.for_(t.c(0), r8, t.c(1), [], out_row)

    def kn_slab(self, slab: str, rows: list[str], k0: str, n: str, R: int) -> None:
        """Rows ``rows`` of A (absolute) from ``k0``, ``n`` values each, as f32 into
        ``slab`` (row i's at ``i R``): 16 values a vector where they fill one."""
        t, pt = self.t, self.s.lhs
        v16, vp = _vt(16, "f32"), _vt(16, pt)
        for i, row in enumerate(rows):
            o = t.op(f"{{r}} = arith.muli {row}, {self.K} : index")
            o = t.op(f"{{r}} = arith.addi {o}, {k0} : index")

            def whole(q: str, _: list[str], o=o, i=i) -> list[str]:
                v = t.op(f"{{r}} = vector.load %a[{t.op(f'{{r}} = arith.addi {o}, {q} : index')}]"
                         f" : memref<?x{pt}>, {vp}")
                if pt != "f32":
                    v = t.op(f"{{r}} = arith.extf {v} : {vp} to {v16}")
                d = t.op(f"{{r}} = arith.addi {q}, {t.c(i * R)} : index")
                t.do(f"vector.store {v}, {slab}[{d}] : memref<?xf32>, {v16}")
                return []

            def one(q: str, _: list[str], row=row, i=i) -> list[str]:
                v = self.kn_a(row, t.op(f"{{r}} = arith.addi {k0}, {q} : index"))
                d = t.op(f"{{r}} = arith.addi {q}, {t.c(i * R)} : index")
                t.do(f"memref.store {v}, {slab}[{d}] : memref<?xf32>")
                return []

            t.for_chunks(n, 16, whole, one)

    def kn_tile_rows(self, b: str, m0: str, mr: int) -> list[str]:
        """A tile's rows ``m0 + i`` (i < ``mr``) of batch ``b``, absolute."""
        t = self.t
        arow0 = t.op(f"{{r}} = arith.muli {b}, {self.M} : index")
        rows = [t.op(f"{{r}} = arith.addi {arow0}, {m0} : index")]
        for i in range(1, mr):
            rows.append(t.op(f"{{r}} = arith.addi {rows[0]}, {t.c(i)} : index"))
        return rows

    def kn_block(self, b: str, jb: str, n0: str, nc: int) -> tuple[list[str], str]:
        """(the ``nc`` vectors of columns' factors of block ``jb`` of batch ``b`` from
        column ``n0``, the block's first row of K)."""
        t, C = self.t, self.C
        so = self.kn_scales_at(b, jb, n0)
        fvs = [self.factor("rhs", "%bs", t.op(f"{{r}} = arith.addi {so}, {t.c(j * C)} : "
                                              "index"), n=C) for j in range(nc)]
        fold = self.kn_f16_fold()
        if fold:  # the f16 decode's power of two, once a block (:meth:`kn_scaled`)
            fvs = [t.op(f"{{r}} = arith.mulf {v}, {t.c(2.0 ** fold, _vt(C, 'f32'))} : "
                        f"{_vt(C, 'f32')}") for v in fvs]
        return fvs, t.op(f"{{r}} = arith.muli {jb}, {t.c(self.s.k('rhs'))} : index")

    def kn_scales_at(self, b: str, jb: str, n0: str) -> str:
        """The scale code of block ``jb`` of batch ``b``'s weights, column ``n0``."""
        t = self.t
        so = t.op(f"{{r}} = arith.muli {b}, {self.nblk} : index")  # the batch's scales
        so = t.op(f"{{r}} = arith.addi {so}, {jb} : index")
        so = t.op(f"{{r}} = arith.muli {so}, {self.N} : index")
        return t.op(f"{{r}} = arith.addi {so}, {n0} : index")

    def kn_exponent_words(self, so: str, j: int, order: Sequence[int], bits: int,
                          shift: int) -> str:
        """The e8m0 scale codes of the block's vector ``j`` of 32 columns (from scale
        ``so``), lanes in ``order`` (a column's index, each lane), as exponent words of a
        float of ``bits`` bits: (code - 127) times 2^``shift`` (its exponent field's step),
        to add to a value's bits (:meth:`exponent_added`)."""
        t, C = self.t, self.C
        o = t.op(f"{{r}} = arith.addi {so}, {t.c(j * C)} : index")
        c = t.op(f"{{r}} = vector.load %bs[{o}] : memref<?xi8>, {_vt(C, 'i8')}")
        n = len(order)
        c = t.op(f"{{r}} = vector.shuffle {c}, {c} [{', '.join(map(str, order))}] : "
                 f"{_vt(C, 'i8')}, {_vt(C, 'i8')}")
        vt = _vt(n, f"i{bits}")
        e = t.op(f"{{r}} = arith.extui {c} : {_vt(n, 'i8')} to {vt}")
        e = t.op(f"{{r}} = arith.subi {e}, {t.c(127, vt)} : {vt}")
        return t.op(f"{{r}} = arith.shli {e}, {t.c(shift, vt)} : {vt}")

    def exponent_added(self, w: str, e: str, n: int, bits: int) -> str:
        """The ``n`` words of ``bits`` bits ``w`` (floats' bits) with the exponent words
        ``e`` added to the non-zero ones (a zero's bits, either sign, stay as they are)."""
        t, vt = self.t, _vt(n, f"i{bits}")
        mag = (1 << (bits - 1)) - 1
        m = t.op(f"{{r}} = arith.andi {w}, {t.c(mag, vt)} : {vt}")
        nz = t.op(f"{{r}} = arith.cmpi ne, {m}, {t.c(0, vt)} : {vt}")
        we = t.op(f"{{r}} = arith.addi {w}, {e} : {vt}")
        return t.op(f"{{r}} = arith.select {nz}, {we}, {w} : {_vt(n, 'i1')}, {vt}")

    def kn_f16_fold(self) -> int:
        """f8 weights: the exponent of the power of two that :meth:`f16_decode` multiplies
        its values by (15 - the format's bias), folded into the block factors instead -- one
        multiply a vector of codes fewer; exact, as the range test keeps every value of B in
        [2^-126, 2^128) and so the folded factors finite and normal (e4m3: in [2^-109,
        2^126]); else 0."""
        f = self.s.fmt("rhs")
        if integer_shift(f) is not None:
            return 0
        return 15 - f.element_type.bias

    def kn_scaled(self, b: str, k: str, n0: str, nc: int, fvs: list[str]) -> list[str]:
        """The scaled values (``vector<32xf32>``, exact) of ``nc`` vectors of columns from
        ``n0`` at row ``k`` of batch ``b``'s weights, their factors ``fvs``; each line of
        those codes :data:`KN_PREFETCH_ROWS` rows on prefetched (:meth:`kn_at`)."""
        t, C, f = self.t, self.C, self.s.fmt("rhs")
        at = self.kn_at(b, k, n0, nc)
        vs = []
        for j in range(nc):
            aj = t.op(f"{{r}} = arith.addi {at}, {t.c(j * C)} : index")
            v8 = self.codes("rhs", "%b", aj)
            v = (self.integer_units("rhs", v8) if integer_shift(f) is not None else
                 self.f16_decode("rhs", v8, -self.kn_f16_fold()))
            vs.append(t.op(f"{{r}} = arith.mulf {v}, {fvs[j]} : {_vt(C, 'f32')}"))
        return vs

    def kn_at(self, b: str, k: str, n0: str, nc: int) -> str:
        """The element of B's codes at row ``k`` of batch ``b``, column ``n0``, with each line
        of the ``nc`` vectors of codes from there :data:`KN_PREFETCH_ROWS` rows on
        prefetched."""
        t, C, N = self.t, self.C, self.N
        four = self.s.fmt("rhs").bits == 4
        at = t.op(f"{{r}} = arith.muli {b}, {self.K} : index")  # B's first row of K
        at = t.op(f"{{r}} = arith.addi {at}, {k} : index")
        at = t.op(f"{{r}} = arith.muli {at}, {N} : index")
        at = t.op(f"{{r}} = arith.addi {at}, {n0} : index")
        ahead = t.op(f"{{r}} = arith.muli {N}, {t.c(KN_PREFETCH_ROWS)} : index")
        nxt = t.op(f"{{r}} = arith.addi {at}, {ahead} : index")
        for o in range(0, nc * C, 128 if four else 64):  # the byte of each line
            p = t.op(f"{{r}} = arith.addi {nxt}, {t.c(o)} : index")
            if four:
                p = t.op(f"{{r}} = arith.divui {p}, {t.c(2)} : index")
            t.do(f"memref.prefetch %b[{p}], read, locality<0>, data : memref<?xi8>")
        return at

    def kn_store(self, rows: list[str], n0: str, accs: list[str], w: int) -> None:
        """Each row's accumulators (vectors of ``w`` columns, in order from ``n0``) into the
        result."""
        t = self.t
        per = len(accs) // len(rows)
        for i, row in enumerate(rows):
            o = t.op(f"{{r}} = arith.muli {row}, {self.N} : index")
            o = t.op(f"{{r}} = arith.addi {o}, {n0} : index")
            for x in range(per):
                ox = t.op(f"{{r}} = arith.addi {o}, {t.c(x * w)} : index")
                t.do(f"vector.store {accs[i * per + x]}, %out[{ox}] : memref<?xf32>, "
                     f"{_vt(w, 'f32')}")

    def kn_values(self) -> tuple[str, str]:
        """(the memref, its type ``memref<2^bits x f64>``): every code's value times
        2^integer_shift (the integer units; Inf and NaN codes theirs), a constant of the
        module."""
        f = self.s.fmt("rhs")
        name = f"mxlower_{f.name}_units_f64"
        if f.is_int:
            vals = [float(c - 256 if c >= 128 else c) for c in range(256)]
        else:
            vals = code_units(f, range(1 << f.element_type.bits))
        mt = f"memref<{len(vals)}xf64>"
        if name not in self.globals:
            self.globals[name] = (f'memref.global "private" constant @{name} : {mt} = '
                                  f"dense<[{', '.join(map(_f64_lit, vals))}]>")
        return self.t.op(f"{{r}} = memref.get_global @{name} : {mt}"), mt

    def kn_f64(self, b: str, n0: str, ncols: str) -> None:
        """The unit's rows (:attr:`rows_of`) against its ``ncols`` columns from ``n0`` as
        docs/semantics.md section 6's exact contraction, one result at a time: A's values
        and B's (the code's integer units from :meth:`kn_values` times the block's factor,
        :meth:`f64_factor`) exact in f64, their products exact, summed in f64 over K,
        rounded once (:meth:`round_f32`)."""
        t, s, K, N = self.t, self.s, self.K, self.N
        f = s.fmt("rhs")
        table, mt = self.kn_values()
        kb = t.c(s.k("rhs"))
        arow0 = t.op(f"{{r}} = arith.muli {b}, {self.M} : index")
        bk = t.op(f"{{r}} = arith.muli {b}, {K} : index")
        bb = t.op(f"{{r}} = arith.muli {b}, {self.nblk} : index")

        def row(m: str, _: list[str]) -> list[str]:
            ar = t.op(f"{{r}} = arith.addi {arow0}, {m} : index")

            def col(j: str, _: list[str]) -> list[str]:
                n = t.op(f"{{r}} = arith.addi {n0}, {j} : index")

                def step(k: str, acc: list[str]) -> list[str]:
                    a = self.kn_a(ar, k, f64=True)
                    e = t.op(f"{{r}} = arith.addi {bk}, {k} : index")
                    e = t.op(f"{{r}} = arith.muli {e}, {N} : index")
                    e = t.op(f"{{r}} = arith.addi {e}, {n} : index")
                    if f.bits == 4:  # the low nibble first
                        byte = t.op(f"{{r}} = arith.divui {e}, {t.c(2)} : index")
                        c = t.op(f"{{r}} = memref.load %b[{byte}] : memref<?xi8>")
                        c = t.op(f"{{r}} = arith.extui {c} : i8 to i32")
                        odd = t.op(f"{{r}} = arith.remui {e}, {t.c(2)} : index")
                        sh = t.op(f"{{r}} = arith.index_cast {odd} : index to i32")
                        sh = t.op(f"{{r}} = arith.muli {sh}, {t.c(4, 'i32')} : i32")
                        c = t.op(f"{{r}} = arith.shrui {c}, {sh} : i32")
                        c = t.op(f"{{r}} = arith.andi {c}, {t.c(15, 'i32')} : i32")
                    else:
                        c = t.op(f"{{r}} = memref.load %b[{e}] : memref<?xi8>")
                        c = t.op(f"{{r}} = arith.extui {c} : i8 to i32")
                        if f.element_type is not None and f.element_type.bits == 6:
                            c = t.op(f"{{r}} = arith.andi {c}, {t.c(63, 'i32')} : i32")
                    ci = t.op(f"{{r}} = arith.index_cast {c} : i32 to index")
                    v = t.op(f"{{r}} = memref.load {table}[{ci}] : {mt}")
                    blk = t.op(f"{{r}} = arith.divui {k}, {kb} : index")
                    so = t.op(f"{{r}} = arith.addi {bb}, {blk} : index")
                    so = t.op(f"{{r}} = arith.muli {so}, {N} : index")
                    so = t.op(f"{{r}} = arith.addi {so}, {n} : index")
                    v = t.op(f"{{r}} = arith.mulf {v}, {self.f64_factor('rhs', '%bs', so)} : f64")
                    v = self.f32_overflow(v)
                    p = t.op(f"{{r}} = arith.mulf {a}, {v} : f64")
                    return [t.op(f"{{r}} = arith.addf {acc[0]}, {p} : f64")]

                (acc,) = t.for_(t.c(0), K, t.c(1), [(t.c(0.0, "f64"), "f64")], step)
                o = t.op(f"{{r}} = arith.muli {ar}, {N} : index")
                o = t.op(f"{{r}} = arith.addi {o}, {n} : index")
                t.do(f"memref.store {self.round_f32(acc)}, %out[{o}] : memref<?xf32>")
                return []

            t.for_(t.c(0), ncols, t.c(1), [], col)
            return []

        t.for_(*self.rows_of, t.c(1), [], row)


# ============================================================================ B's transpose

#: columns of K-major B per unit of its transpose (:func:`transpose_function`)
TRANSPOSE_PANEL = 256
#: rows of K per unit of the transpose: a unit's rows and columns lie on few pages
TRANSPOSE_ROWS = 256
#: bytes per side of the transpose's tiles through its stack scratch
TRANSPOSE_TILE = 64


def transpose_args() -> list[tuple[str, str]]:
    """The transpose's arguments (:func:`transpose_function`): B's codes and scales as held,
    their transposed copies, the dims buffer, the units [u0, u1)."""
    return [("%b", "memref<?xi8>"), ("%bs", "memref<?xi8>"), ("%bt", "memref<?xi8>"),
            ("%bts", "memref<?xi8>"), ("%dims", "memref<?xi64>"), ("%u0", "index"),
            ("%u1", "index")]


def _transpose(t: _Text, vs: Sequence[str], et: str) -> list[str]:
    """The n x n matrix of ``vs`` (n vectors of n ``et`` lanes, n a power of two)
    transposed: n log2(n) two-source shuffles, stage h swapping bit h of the row index
    with bit h of the lane index (lane j of row i, bit h clear in i and set in j, trades
    places with lane j - h of row i + h)."""
    n = len(vs)
    vt = _vt(n, et)
    out = list(vs)
    h = n // 2
    while h:
        lo = ", ".join(str(j + n - h if j & h else j) for j in range(n))
        hi = ", ".join(str(j + n if j & h else j + h) for j in range(n))
        for i in range(n):
            if i & h:
                continue
            a, b = out[i], out[i + h]
            out[i] = t.op(f"{{r}} = vector.shuffle {a}, {b} [{lo}] : {vt}, {vt}")
            out[i + h] = t.op(f"{{r}} = vector.shuffle {a}, {b} [{hi}] : {vt}, {vt}")
        h //= 2
    return out


def transpose_function(spec: DotSpec, name: str) -> str:
    """``@name``: the copy of K-major B (:attr:`DotSpec.transposes_b`) that the ``[N, K]``
    kernel reads: codes ``b [B, K, N]`` to ``bt [B, N, K]`` and scales ``bs [B, K / k, N]``
    to ``bts [B, N, K / k]``, bytes as they are; f4 codes two per byte as XLA packs them
    (element i's nibble at byte i / 2, the low one first: N even, so each row of K starts a
    byte, and K, a multiple of the even block size, so does each row of N).  Units [u0, u1)
    of (batch, :data:`TRANSPOSE_ROWS` rows of K, :data:`TRANSPOSE_PANEL` columns; the first
    row block's units also copy their columns' scales): each unit's bytes lie on a few
    hundred pages (a unit of all K rows walked thousands, one TLB miss a line).  Tiles of
    :data:`TRANSPOSE_TILE` square bytes go through a stack scratch (each line of ``b`` and
    ``bt`` read or written whole, however the rows' strides alias in the cache), transposed
    16 x 16 in registers (:func:`_transpose`); f4: tiles of 32 rows of K x 16 columns,
    each pair of rows' bytes first split into the even and the odd columns' bytes; the edges
    byte by byte.  ``dims``: [B, M, N, K, ...]."""
    t = _Text()
    t.lines.append(f"func.func @{name}({', '.join(f'{a}: {ty}' for a, ty in transpose_args())}) "
                   "{")
    f4 = spec.fmt("rhs").bits == 4
    c = t.c

    def dim(i: int) -> str:
        v = t.op(f"{{r}} = memref.load %dims[{c(i)}] : memref<?xi64>")
        return t.op(f"{{r}} = arith.index_cast {v} : i64 to index")

    def op(name_: str, a: str, b: str, ty: str = "index") -> str:
        return t.op(f"{{r}} = arith.{name_} {a}, {b} : {ty}")

    def ceil_div(a: str, n: int) -> str:
        return op("divui", op("addi", a, c(n - 1)), c(n))

    N, K = dim(2), dim(3)
    R = op("divui", K, c(spec.k("rhs")))  # rows of scales
    panels, blocks = ceil_div(N, TRANSPOSE_PANEL), ceil_div(K, TRANSPOSE_ROWS)
    v16, v8 = _vt(16, "i8"), _vt(8, "i8")
    S = TRANSPOSE_TILE
    scratch = t.op(f"{{r}} = memref.alloca() {{{{alignment = 64 : i64}}}} : "
                   f"memref<{S * S}xi8>")

    def cut(lo: str, hi: str, n: int) -> str:  # lo + the multiple of n that fits [lo, hi)
        span = op("subi", hi, lo)
        return op("addi", lo, op("subi", span, op("remui", span, c(n))))

    def cover(r_lo: str, r_hi: str, n_lo: str, n_hi: str,
              tiles: list[tuple[int, int, Callable[[str, str], None]]]) -> None:
        """[r_lo, r_hi) x [n_lo, n_hi) in tiles of the first (rows, columns, body), what is
        left in those of the next."""
        rs, ns, body = tiles[0]
        rc, nc = cut(r_lo, r_hi, rs), cut(n_lo, n_hi, ns)
        t.for_(r_lo, rc, c(rs), [], lambda r, _: (t.for_(
            n_lo, nc, c(ns), [], lambda n, _: (body(r, n), [])[1]), [])[1])
        if len(tiles) > 1:
            cover(rc, r_hi, n_lo, n_hi, tiles[1:])
            cover(r_lo, rc, nc, n_hi, tiles[1:])

    def bytes_(src: str, dst: str, base: str, rows: str, cols: str, r_lo: str, r_hi: str,
               n0: str, n1: str) -> None:
        """dst[base + n rows + r] = src[base + r cols + n], r_lo <= r < r_hi, n0 <= n <
        n1."""
        def block16(r0: str, n: str, put: Callable[[int, str], None]) -> None:
            at = op("addi", base, op("addi", op("muli", r0, cols), n))
            got = []
            for i in range(16):
                got.append(t.op(f"{{r}} = vector.load {src}[{at}] : memref<?xi8>, {v16}"))
                at = op("addi", at, cols)
            for j, v in enumerate(_transpose(t, got, "i8")):
                put(j, v)

        def big(r0: str, n: str) -> None:
            def quarter(q: str, _: list[str]) -> list[str]:  # rows r0 + q .. + 16
                for g in range(S // 16):
                    def put(j: int, v: str, g: int = g) -> None:  # column n + 16 g + j
                        at = op("addi", c((16 * g + j) * S), q)
                        t.do(f"vector.store {v}, {scratch}[{at}] : memref<{S * S}xi8>, {v16}")
                    block16(op("addi", r0, q), op("addi", n, c(16 * g)), put)
                return []
            t.for_(c(0), c(S), c(16), [], quarter)
            vs = _vt(S, "i8")
            at = op("addi", base, op("addi", op("muli", n, rows), r0))
            for j in range(S):
                v = t.op(f"{{r}} = vector.load {scratch}[{c(j * S)}] : memref<{S * S}xi8>, "
                         f"{vs}")
                t.do(f"vector.store {v}, {dst}[{at}] : memref<?xi8>, {vs}")
                at = op("addi", at, rows)

        def small(r0: str, n: str) -> None:
            def put(j: int, v: str) -> None:
                at = op("addi", base, op("addi", op("muli", op("addi", n, c(j)), rows), r0))
                t.do(f"vector.store {v}, {dst}[{at}] : memref<?xi8>, {v16}")
            block16(r0, n, put)

        def one(r: str, n: str) -> None:
            v = t.op(f"{{r}} = memref.load {src}"
                     f"[{op('addi', base, op('addi', op('muli', r, cols), n))}] : memref<?xi8>")
            t.do(f"memref.store {v}, {dst}"
                 f"[{op('addi', base, op('addi', op('muli', n, rows), r))}] : memref<?xi8>")
        cover(r_lo, r_hi, n0, n1, [(S, S, big), (16, 16, small), (1, 1, one)])

    def nibbles(x: str, y: str, ty: str) -> tuple[str, str]:
        """(even columns, odd columns): rows k and k + 1's codes of a byte's two columns as
        one byte each (row k's in the low nibble)."""
        lo = op("ori", op("andi", x, c(15, ty), ty), op("shli", y, c(4, ty), ty), ty)
        hi = op("ori", op("shrui", x, c(4, ty), ty), op("andi", y, c(0xF0 - 256, ty), ty), ty)
        return lo, hi

    def codes_f4(base: str, k_lo: str, k_hi: str, n0: str, n1: str) -> None:
        nh, kh = op("divui", N, c(2)), op("divui", K, c(2))  # bytes per row of K, of N

        def row_at(k: str, n: str) -> str:  # byte of (k, n) in b
            return op("addi", base, op("addi", op("muli", k, nh), op("divui", n, c(2))))

        def col_at(n: str, k: str) -> str:  # byte of (n, k) in bt
            return op("addi", base, op("addi", op("muli", n, kh), op("divui", k, c(2))))

        def tile(k0: str, n: str) -> None:  # rows k0 .. + 32, columns n .. + 16
            at, got = row_at(k0, n), []
            for _p in range(16):
                x = t.op(f"{{r}} = vector.load %b[{at}] : memref<?xi8>, {v8}")
                at = op("addi", at, nh)
                y = t.op(f"{{r}} = vector.load %b[{at}] : memref<?xi8>, {v8}")
                at = op("addi", at, nh)
                lo, hi = nibbles(x, y, v8)
                got.append(t.op(f"{{r}} = vector.shuffle {lo}, {hi} "
                                f"[{', '.join(map(str, range(16)))}] : {v8}, {v8}"))
            row0 = col_at(n, k0)
            for j, v in enumerate(_transpose(t, got, "i8")):  # j < 8: column n + 2j, else
                col = 2 * j if j < 8 else 2 * (j - 8) + 1  # n + 2(j - 8) + 1
                t.do(f"vector.store {v}, %bt[{op('addi', row0, op('muli', c(col), kh))}] : "
                     f"memref<?xi8>, {v16}")

        def pair(k: str, n: str) -> None:  # rows k, k + 1 of columns n, n + 1
            at = row_at(k, n)
            x = t.op(f"{{r}} = memref.load %b[{at}] : memref<?xi8>")
            y = t.op(f"{{r}} = memref.load %b[{op('addi', at, nh)}] : memref<?xi8>")
            lo, hi = nibbles(x, y, "i8")
            row = col_at(n, k)
            t.do(f"memref.store {lo}, %bt[{row}] : memref<?xi8>")
            t.do(f"memref.store {hi}, %bt[{op('addi', row, kh)}] : memref<?xi8>")
        cover(k_lo, k_hi, n0, n1, [(32, 16, tile), (2, 2, pair)])

    def unit(u: str, _: list[str]) -> list[str]:
        per = op("muli", panels, blocks)
        bi, rest = op("divui", u, per), op("remui", u, per)
        rb, p = op("divui", rest, panels), op("remui", rest, panels)
        n0 = op("muli", p, c(TRANSPOSE_PANEL))
        n1 = op("minui", op("addi", n0, c(TRANSPOSE_PANEL)), N)
        k0 = op("muli", rb, c(TRANSPOSE_ROWS))
        k1 = op("minui", op("addi", k0, c(TRANSPOSE_ROWS)), K)
        nk = op("muli", N, K)
        if f4:
            codes_f4(op("muli", bi, op("divui", nk, c(2))), k0, k1, n0, n1)
        else:
            bytes_("%b", "%bt", op("muli", bi, nk), K, N, k0, k1, n0, n1)
        first = t.op(f"{{r}} = arith.cmpi eq, {rb}, {c(0)} : index")
        t.if_(first, lambda: bytes_("%bs", "%bts", op("muli", bi, op("muli", N, R)), R, N,
                                    c(0), R, n0, n1))
        return []

    t.for_("%u0", "%u1", c(1), [], unit)
    t.do("return")
    t.lines.append("}")
    return "\n".join(t.lines)


def build(spec: DotSpec) -> str:
    """The kernel module of ``spec`` as MLIR text, parsed and verified by upstream MLIR: its
    declarations (:func:`declarations`: the kernel and its range test) expanded by
    :func:`expand_declarations`."""
    ir = upstream.module("ir")
    with upstream.context():
        module = ir.Module.parse("module {\n" + declarations(spec) + "\n}")
        expand_declarations(module.operation)
        module.operation.verify()
        return str(module)


# ============================================================================ declarations

#: the attribute marking a kernel declaration: a dictionary of :class:`DotSpec`'s fields
ATTR = "mxlower.dot_kernel"
_FIELDS = ("lhs", "rhs", "lhs_block_size", "rhs_block_size", "path", "rhs_layout", "part")
#: B's layouts a declaration's ``rhs_layout`` field names: ``[..., N, K]`` (the default),
#: K-major ``[..., K, N]`` (:attr:`DotSpec.rhs_kn`), or K-major against plain rows copied to
#: ``[..., N, K]`` by the caller (:attr:`DotSpec.rhs_copy`)
LAYOUTS = ("nk", "kn", "kn_copy")
#: what a declaration's ``part`` field names: the kernel, its range test
#: (:meth:`_DotKernel.range_function`), ``@<kernel>_range`` by :func:`declarations`, or --
#: kernels that transpose K-major B (:attr:`DotSpec.transposes_b`) -- that transpose
#: (:func:`transpose_function`), ``@<kernel>_transpose``
PARTS = ("dot", "range", "transpose")


class DotKernelError(ValueError):
    """A kernel declaration that cannot be expanded (the message says why)."""


def declaration(spec: DotSpec, name: str | None = None, part: str = "dot") -> str:
    """The private ``func.func`` declaring ``spec``'s kernel (named ``name``, default
    ``spec.name``), its fields in the :data:`ATTR` dictionary: what
    :func:`expand_declarations` (the ``mxlower-lower-dot-kernels`` pass) gives a body::

        func.func private @k(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>,
                             memref<?xi64>, index, index)
            attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1",
                                              rhs_block_size = 32 : i64, path = "avx2"}}

    ``part = "range"`` declares the kernel's range test instead (the field ``part =
    "range"``; same signature), which a caller runs once before the kernel's units."""
    if part not in PARTS:
        raise ValueError(f"dot kernel: unknown part {part!r} (known: {', '.join(PARTS)})")
    if part == "transpose" and not spec.transposes_b:
        raise ValueError(f"dot kernel: {spec.name} has no transpose part (only K-major B "
                         "against MX rows has)")
    fields = [f'lhs = "{spec.lhs}"', f'rhs = "{spec.rhs}"']
    for side in ("lhs", "rhs"):
        if spec.fmt(side) is not None:
            fields.append(f"{side}_block_size = {spec.k(side)} : i64")
    fields.append(f'path = "{spec.path}"')
    if spec.rhs_kn:
        fields.append(f'rhs_layout = "{"kn_copy" if spec.rhs_copy else "kn"}"')
    if part != "dot":
        fields.append(f'part = "{part}"')
    args = transpose_args() if part == "transpose" else _DotKernel(spec.nk).args()
    arg_types = ", ".join(t for _, t in args)
    return (f"func.func private @{name or spec.name}({arg_types}) attributes "
            f"{{{ATTR} = {{{', '.join(fields)}}}}}")


def declarations(spec: DotSpec, name: str | None = None) -> str:
    """:func:`declaration` of ``spec``'s kernel ``@name``, of its range test
    ``@name_range`` and -- K-major B against MX rows (:attr:`DotSpec.transposes_b`) -- of its
    transpose ``@name_transpose``: what a caller of the kernel needs
    (:mod:`mxlower.execution.ffi_dot`)."""
    name = name or spec.name
    parts = [declaration(spec, name), declaration(spec, f"{name}_range", "range")]
    if spec.transposes_b:
        parts.append(declaration(spec, f"{name}_transpose", "transpose"))
    return "\n".join(parts)


def _spec_of(f: Any, path: str | None) -> tuple[DotSpec, str]:
    """The :class:`DotSpec` and part a declaration's :data:`ATTR` names (``path`` overrides
    its)."""
    ir = upstream.module("ir")
    attr = f.attributes[ATTR]
    if not isinstance(attr, ir.DictAttr):
        raise DotKernelError(f"'{ATTR}' must be a dictionary, got {attr}")
    values: dict[str, Any] = {}
    for named in attr:
        key, v = named.name, named.attr
        if key not in _FIELDS:
            raise DotKernelError(f"'{ATTR}' has unknown field '{key}' (known: "
                                 f"{', '.join(_FIELDS)})")
        want = ir.IntegerAttr if key.endswith("block_size") else ir.StringAttr
        if not isinstance(v, want):
            kind = "an integer" if want is ir.IntegerAttr else "a string"
            raise DotKernelError(f"'{ATTR}' field '{key}' must be {kind}, got {v}")
        values[key] = v.value
    for key in ("lhs", "rhs"):
        if key not in values:
            raise DotKernelError(f"'{ATTR}' lacks the field '{key}'")
    if path:
        values["path"] = path
    part = values.pop("part", "dot")
    layout = values.pop("rhs_layout", "nk")
    if layout not in LAYOUTS:
        raise DotKernelError(f"'{ATTR}' field 'rhs_layout' must be one of "
                             f"{', '.join(LAYOUTS)}, got '{layout}'")
    values["rhs_kn"] = layout in ("kn", "kn_copy")
    values["rhs_copy"] = layout == "kn_copy"
    if part not in PARTS:
        raise DotKernelError(f"'{ATTR}' field 'part' must be one of {', '.join(PARTS)}, "
                             f"got '{part}'")
    try:
        return DotSpec(**values), part
    except ValueError as err:
        raise DotKernelError(str(err)) from None


def expand_declarations(root: Any, path: str | None = None) -> int:
    """Give every kernel declaration under ``root`` (upstream MLIR: a private ``func.func``
    without a body carrying :data:`ATTR`) its kernel's body, keeping its symbol name; the
    number expanded.  ``path``: a SIMD path for every kernel instead of the declarations'.

    A declaration whose fields name no kernel, whose argument types are not the kernel's, or
    that already has a body is reported at its location (every one is looked at; the first
    error is raised as :class:`mxlower.diagnostics.PassFailure`)."""
    ir = upstream.module("ir")
    decls = collect_ops(root, lambda o: o.name == "func.func" and ATTR in o.attributes)
    failures = []
    done = 0
    for f in decls:
        name = ir.StringAttr(f.attributes["sym_name"]).value
        try:
            spec, part = _spec_of(f, path)
            if len(f.regions[0].blocks):
                raise DotKernelError("a kernel declaration must not have a body")
            kernel = _KnKernel(spec) if spec.kn_kernel else _DotKernel(spec.nk)
            if part == "transpose" and not spec.transposes_b:
                raise DotKernelError(f"kernel {spec.name} has no transpose part (only "
                                     "K-major B against MX rows has)")
            want = [t for _, t in (transpose_args() if part == "transpose"
                                   else kernel.args())]
            got = [str(t) for t in ir.TypeAttr(f.attributes["function_type"]).value.inputs]
            results = list(ir.TypeAttr(f.attributes["function_type"]).value.results)
            if got != want or results:
                raise DotKernelError(f"kernel {spec.name} takes ({', '.join(want)}) -> (), "
                                     f"declared ({', '.join(got)}) -> "
                                     f"({', '.join(map(str, results))})")
        except DotKernelError as err:
            failures.append(diag.error(f, f"'func.func' op @{name}: {err}"))
            continue
        with f.location:
            text = (kernel.function() if part == "dot" else kernel.range_function(name)
                    if part == "range" else transpose_function(spec, name))
            body = ir.Module.parse("module {\n" + text + "\n}")
        *consts, new = body.body.operations
        have = {ir.StringAttr(o.attributes["sym_name"]).value: o
                for o in f.parent.regions[0].blocks[0].operations
                if "sym_name" in o.attributes}
        names = [ir.StringAttr(c.attributes["sym_name"]).value for c in consts]
        clash = [n for n, c in zip(names, consts) if n in have and str(have[n]) != str(c)]
        if clash:
            failures.append(diag.error(f, f"'func.func' op @{name}: the module's symbol "
                                          f"@{clash[0]} is not the kernel's constant"))
            continue
        for n, c in zip(names, consts):  # the kernel's constants (one copy per module)
            if n not in have:
                c.operation.move_before(f)
        new.operation.move_before(f)
        new.operation.attributes["sym_name"] = ir.StringAttr.get(name)
        f.erase()
        done += 1
    if failures:
        raise failures[0]
    return done
