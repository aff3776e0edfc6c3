#!/usr/bin/env bash
# One call on a lent GPU machine (16-core Sapphire Rapids host), from the checkout's root, with
# the carried builds .gpu, .gpu-kernels (bench/gpu_session.sh) and .dot-aot
# (bench/bench_dot_aot.py build .dot-aot --what gemv,gemm --targets avx2,spr,spr512):
#   1. the dot kernel's GEMVs and GEMMs ahead of time on the host CPU (avx2; vnni's VNNI dot
#      products; avx512's 512-bit and bf16 dot products; amx's tiles, where Linux grants
#      them): correctness against the exact dot, then the GEMV (M = 1, 8) and 1024^3 /
#      2048^3 (4096^3 for avx512 and amx) against XLA's f32 dot on 16 cores;
#   2. the GPU tests (bench/gpu_session.sh with GPU_BENCH=0).
# Everything goes to $OUT (/tmp/lent-out elsewhere).
set -u
OUT=${OUT:-/tmp/lent-out}
export OUT
mkdir -p "$OUT"
py=${PYTHON:-python3}
lscpu >"$OUT/lscpu.txt" 2>&1
JAX_PLATFORMS=cpu PYTHONPATH=. timeout "${AOT_TIMEOUT:-330}" $py bench/bench_dot_aot.py run .dot-aot \
  --what "${AOT_WHAT:-gemv,gemm}" --reps 15 --out "$OUT/dot.json" >"$OUT/aot.log" 2>&1
echo "aot exit $?"; grep -E "correctness|errors|^  " "$OUT/aot.log" | head -20
GPU_BENCH=0 TEST_TIMEOUT=${TEST_TIMEOUT:-240} bash bench/gpu_session.sh
