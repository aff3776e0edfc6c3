#!/usr/bin/env bash
# One call on a lent GPU machine (16-core Sapphire Rapids host), from the checkout's root, with
# the carried builds .gpu, .gpu-kernels (bench/gpu_session.sh) and .dot-aot
# (bench/bench_dot_aot.py build .dot-aot --what gemv,gemm,kn,knmx --targets avx2,spr):
#   1. the dot kernel's GEMVs and GEMMs ahead of time on the host CPU (avx2; vnni's VNNI dot
#      products; avx512's 512-bit and bf16 dot products; amx's tiles, where Linux grants
#      them): correctness against the exact dot, then the GEMV (M = 1, 8) and 1024^3 /
#      2048^3 (4096^3 for avx512 and amx) against XLA's f32 dot on 16 cores; weights held
#      K-major too (kn: plain rows; knmx: MX rows, the handler's transposed copy);
#   2. with a carried .carried (bench/carried_kernels.py record .carried -- <script>, for
#      bench/bench_jax.py --sharded 8 and bench/bench_dot_peers.py): mxlower.jax on the host's
#      16 cores -- quantize and the dot sharded over 8 host devices against one device, and
#      the dot against its peers (JAX's scaled_matmul, torch);
#   3. the GPU tests (bench/gpu_session.sh with GPU_BENCH=0).
# Everything goes to $OUT (/tmp/lent-out elsewhere); AOT=0, CARRIED=0 or GPU=0 skips a part.
set -u
OUT=${OUT:-/tmp/lent-out}
export OUT
mkdir -p "$OUT"
py=${PYTHON:-python3}
lscpu >"$OUT/lscpu.txt" 2>&1
if [ "${AOT:-1}" != 0 ]; then
  JAX_PLATFORMS=cpu PYTHONPATH=. timeout "${AOT_TIMEOUT:-330}" $py bench/bench_dot_aot.py run \
    .dot-aot --what "${AOT_WHAT:-gemv,gemm,kn,knmx}" --reps "${AOT_REPS:-15}" \
    --out "$OUT/dot.json" >"$OUT/aot.log" 2>&1
  echo "aot exit $?"; grep -E "correctness|errors|^  " "$OUT/aot.log" | head -20
fi
if [ "${CARRIED:-1}" != 0 ] && [ -d .carried ]; then
  run_carried() {  # log name, timeout, script and its arguments
    local log=$1 t=$2; shift 2
    JAX_PLATFORMS=cpu PYTHONPATH=. timeout "$t" $py bench/carried_kernels.py run .carried -- "$@" \
      >"$OUT/$log" 2>&1
    echo "$log exit $?"; tail -45 "$OUT/$log"
  }
  run_carried sharded.log "${SHARDED_TIMEOUT:-240}" bench/bench_jax.py --sharded 8 --m 4096 \
    --k 4096 --n 1024 --dot-k 1024 --reps "${SHARDED_REPS:-15}" --json "$OUT/sharded.json"
  run_carried peers.log "${PEERS_TIMEOUT:-240}" bench/bench_dot_peers.py --gemv 1,8 \
    --gemm 1024,2048 --reps "${PEERS_REPS:-7}"
fi
if [ "${GPU:-1}" != 0 ]; then
  GPU_BENCH=0 TEST_TIMEOUT=${TEST_TIMEOUT:-240} bash bench/gpu_session.sh
fi
