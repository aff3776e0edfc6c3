"""``mxlower-lower-dot-kernels``: kernel declarations to the fused block-scaled dot kernel.

Runs on upstream MLIR (``stack = "upstream"``), before the kernel pipeline lowers the
``scf`` / ``vector`` / ``memref`` kernel to the LLVM dialect.  See :class:`LowerDotKernels`;
the recipe is :func:`mxlower.lowering.dot_kernels.expand_declarations`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower.lowering import dot_kernels
from mxlower.passes.base import ModulePass, option

__all__ = ["LowerDotKernels"]


@dataclasses.dataclass(frozen=True)
class LowerDotKernels(ModulePass):
    """Give each fused-dot kernel declaration (a bodiless private func.func with a `mxlower.dot_kernel` attribute) its kernel.

    The declaration names the kernel in its ``mxlower.dot_kernel`` dictionary -- ``lhs`` and
    ``rhs`` (an MX format, or ``f32`` / ``bf16`` / ``f16`` for a plain side; at least one
    MX), the MX sides' ``lhs_block_size`` / ``rhs_block_size`` (default: the format's) and the
    SIMD ``path`` (``amx``, ``avx512``, ``vnni``, ``avx2`` or ``portable``) -- and its argument
    types must be the kernel's:
    ``A`` (``memref<?xi8>`` codes, f4 two per byte, or the plain type), A's scale codes where
    A is MX, the same for ``B``, ``out: memref<?xf32>``, ``dims: memref<?xi64>`` = [batch, M,
    N, K, mode, rows of A per block of a packed GEMM's units] and the work-unit range ``u0,
    u1: index``.  The body written in its place computes
    ``out[b, m, n] = sum_k A[b, m, k] * B[b, n, k]`` for the units ``[u0, u1)`` (a unit is a
    batch index and a panel of 32 columns of B) exactly as docs/semantics.md section 6 asks
    (under the range condition its caller checks):

    * it reads each operand once, as stored: f4 codes split from their bytes in registers
      (``avx2``: one byte shuffle turns 32 codes into their integer values), f6 / f8 / int8
      codes, e8m0 or e4m3 scale codes decoded per block -- it never writes a dequantized
      operand (its only allocations are a few rows of A and one panel of B, sized by K);
    * small M (at most 16: the GEMV of inference) streams B's codes straight into vector
      FMAs (one row of A: a partial sum of the unscaled values per column and block, then
      one FMA by the block's factor, the factors decoded eight scale codes at a time into a
      small scratch; on ``avx512`` and ``amx`` the tiles of plain rows are
      software-pipelined -- B's chunks decoded two steps ahead of the FMAs or
      ``vdpbf16ps``, f4 codes by permutes from each block's table of scaled values, A's
      rows copied once, a step's values of every row side by side); larger M decodes B's
      panel once and runs a 6 x 2 register tile of FMAs;
    * where both sides are integer-unit formats (e2m1, e2m3, e3m2, int8) with one block size,
      each block's sum of the integer units is exact and is scaled by the two blocks' factors
      (streaming: accumulated in f64 -- the f64 sum of exact block sums, rounded once); the
      GEMM of such pairs forms the block sums with integer dot products (``avx2``:
      ``vpmaddubsw`` / ``vpmaddwd``; ``vnni``: ``vpdpbusd`` on quads of bytes, mxint8
      included, and ``vpdpwssd`` for e3m2; ``avx512``: the same in 512-bit vectors) and
      accumulates the scaled sums in f32; on ``avx512`` the GEMM of the other MX pairs
      with one block size runs on bf16 dot products (``vdpbf16ps``: the scaled values are
      exact in bf16, their products in f32); on ``amx`` those with an f8 or e3m2 side run on
      AMX tiles (``tdpbf16ps`` through upstream's ``amx`` dialect, 2 x 2 tiles of 16 x 16
      f32 results per 32 rows of A and the panel's 32 columns);
    * ``rhs_layout = "kn"`` (default ``"nk"``) declares B held K-major -- ``B[b, k, n]``,
      its scales ``[b, K / k, n]``: weights ``[K, N]`` blocked along K -- against a plain A:
      units of 256 columns, tiles of 8, 4, 2 or 1 rows against 1, 2, 4 or 8 vectors of 32
      columns, each row of K's codes (contiguous) decoded, scaled by the columns' factors
      and taken into one FMA per row and vector; the columns past the whole vectors, f4
      codes of an odd N and every unit where the range test fails take the exact f64
      contraction one result at a time.  Against an MX A, the kernel is the MX pair's
      ``[N, K]`` one, and a declaration with ``part = "transpose"`` (arguments ``b``, ``b
      scales``, their copies, ``dims``, ``u0``, ``u1``) gets the copy of B it reads --
      codes to ``[b, n, k]`` (f4 two per byte along K), scales to ``[b, n, K / k]`` -- in
      units of 256 rows of K x 256 columns, through a stack tile of 64 x 64 bytes
      transposed 16 x 16 by two-source shuffles; ``rhs_layout = "kn_copy"`` declares the same
      for plain rows (the ``[N, K]`` kernel of the plain rows on that copy).  ``part =
      "range"`` declares the kernel's range test (the kernel's arguments), which its caller
      runs first.

    The kernel keeps the declaration's symbol name, so calls to it stay valid.  A
    declaration whose dictionary names no kernel (unknown fields or formats, a bad block
    size), whose argument types differ from the kernel's, or which has a body, is reported at
    its location; the pass fails after looking at every declaration.  Functions without the
    attribute are left alone.

    Before::

        func.func private @gemv(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>,
                                memref<?xi64>, index, index)
            attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1",
                                              path = "avx2"}}

    After (abridged)::

        func.func @gemv(%a: memref<?xf32>, %b: memref<?xi8>, %bs: memref<?xi8>, ...) {
          scf.for %u = %u0 to %u1 step %c1 {
            ...
            %raw = vector.load %b[%byte] : memref<?xi8>, vector<16xi8>
            ...
            %v = llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"(%table, %codes) ...
            %acc = vector.fma %x, %w, %sum : vector<32xf32>

    Example::

        mxlower-opt k.mlir -p 'builtin.module(mxlower-lower-dot-kernels{path=portable},
            convert-vector-to-scf, convert-scf-to-cf, convert-to-llvm,
            reconcile-unrealized-casts)'
    """

    name: ClassVar[str] = "mxlower-lower-dot-kernels"
    stack: ClassVar[str] = "upstream"

    path: str = option("", "SIMD path for every kernel instead of the declarations' "
                       "(empty: keep each declaration's)", choices=("",) + dot_kernels.PATHS)

    def run(self, op: Any) -> None:
        dot_kernels.expand_declarations(op, self.path or None)
