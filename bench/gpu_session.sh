#!/usr/bin/env bash
# One lent-GPU session (issue 25), run on the device machine from the checkout's root with the
# carried builds .gpu (test_gpu_nvvm.py build) and .gpu-kernels (test_gpu_kernels.py build):
# the GPU tests (NVVM conversions, the fused CUDA kernels through their FFI handlers, mxlower.jax
# on XLA:GPU with impl="xla" and with the carried kernels), then bench/bench_gpu.py.  Everything
# goes to $OUT (the device tool's result folder; /tmp/gpu-out elsewhere).  GPU_BENCH=0: the
# tests only.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=.:test/python XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
export MXLOWER_GPU_IMAGES=.gpu MXLOWER_GPU_KERNELS=.gpu-kernels
py=${PYTHON:-python3}
{
  date -u; nvidia-smi; nvcc --version; command -v ptxas
  lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | sed 's/^Flags:/Flags (AVX-512, VNNI, AMX?):/'
  $py -c "import sys, jax, jaxlib, numpy, ml_dtypes, cupy; print(sys.version); print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'numpy', numpy.__version__, 'ml_dtypes', ml_dtypes.__version__, 'cupy', cupy.__version__); print(jax.devices())"
  $py -m pip list 2>/dev/null | grep -i -E '^(jax|cuda|nvidia-cudnn|pytest)'
} >"$OUT/env.txt" 2>&1
xdist=$($py -c "import xdist" 2>/dev/null && echo "-n 4")
timeout "${TEST_TIMEOUT:-300}" $py -m pytest -q -m gpu -p no:cacheprovider $xdist -rfEs \
  --junitxml="$OUT/gpu-tests.xml" test/python/test_gpu_nvvm.py test/python/test_gpu_kernels.py \
  test/python/test_gpu_jax.py >"$OUT/gpu-tests.log" 2>&1
echo "pytest exit $?" >>"$OUT/gpu-tests.log"
tail -40 "$OUT/gpu-tests.log"
# which custom calls XLA:GPU compiled mxlower.jax.scaled_dot(impl="auto") into, per pair
timeout 120 $py -m pytest -q -s -m gpu -p no:cacheprovider -k scaled_dot_auto \
  test/python/test_gpu_jax.py 2>&1 | grep -E "compiled custom calls|passed|failed" | tee "$OUT/gpu-dot-calls.log"
if [ "${GPU_BENCH:-1}" = 0 ]; then exit 0; fi  # the tests only
timeout "${BENCH_TIMEOUT:-150}" $py bench/bench_gpu.py --part kernels --kernels .gpu-kernels \
  --out "$OUT/bench-kernels.json" >"$OUT/bench-kernels.log" 2>&1
echo "bench kernels exit $?"; tail -5 "$OUT/bench-kernels.log"
timeout "${BENCH_TIMEOUT:-150}" $py bench/bench_gpu.py --part jax --kernels .gpu-kernels \
  --sizes 24,26 --out "$OUT/bench-jax.json" >"$OUT/bench-jax.log" 2>&1
echo "bench jax exit $?"; tail -30 "$OUT/bench-jax.log"
