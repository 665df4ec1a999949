#!/usr/bin/env bash
# Runs the CUDA op tests (ctest label `gpu`, binary folio_cuda_tests) on the GPU machine.
#
# The GPU machine has CUDA 13 but none of our Debian libraries, so we build HERE and carry the
# test binary plus the shared libraries it needs that a bare Ubuntu 24.04 + CUDA 13 lacks
# (OpenBLAS for the CPU reference, and its gfortran/quadmath/gomp deps; cuBLASLt and the driver
# are there already, cudart is linked statically). The libraries travel as one tar.xz (36 MiB of
# OpenBLAS packs to about 5) because a device call carries at most 64 MiB with the tree.
#
#   scripts/gpu-test.sh stage     # here: configure build-cuda with FOLIO_CUDA=ON, build, fill
#                                 #   build-cuda/carry (about 10 MiB)
#   device run, carry ["build-cuda/carry"], command:
#     scripts/gpu-test.sh run     # there (FOLIO_CUDA_BENCH=1 adds the K1/K2 timings): device
#                                 #   info, compute-sanitizer memcheck on a short
#                                 #   filter, then every test; logs under $OUT when set
#
# On a machine with a GPU and the full toolchain, `ctest --test-dir build-cuda -L gpu` is the
# same test set. Without a GPU every test skips with a message (CI has nvcc but no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cuda}
CARRY=$BUILD/carry
source scripts/gpu-carry.sh

stage() { carry_stage "$BUILD"; }

run() {
  local out=${OUT:-/tmp/folio-gpu-test}
  mkdir -p "$out"
  carry_unpack "$CARRY" || exit 1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  local sanitizer=/usr/local/cuda/bin/compute-sanitizer
  if [[ -x $sanitizer ]]; then
    "$sanitizer" --tool memcheck --error-exitcode 3 "$CARRY/folio_cuda_tests" \
      --gtest_filter='*bf16_h12_kv1*:*fp16_h5_kv5*:*KvCacheOpsTest*bf16*:*ElementwiseTest*fp16*:*GemmTest*bf16*:*fp16_h7_kv7*:*QkvPostTest.Matches*bf16*:*SmallOpsTest.Rms*fp16*' \
      2>&1 | tee "$out/memcheck.log" | tail -n 5
  fi
  "$CARRY/folio_cuda_tests" --gtest_output="xml:$out/gpu_tests.xml" 2>&1 | tee "$out/gpu_tests.log" |
    grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure|error|tests ran|^K[12] |^device:' || true
  ! grep -q '^\[  FAILED  \]' "$out/gpu_tests.log"
}

case "${1:-}" in
  stage) stage ;;
  run) run ;;
  *) echo "usage: $0 stage|run" >&2; exit 2 ;;
esac
