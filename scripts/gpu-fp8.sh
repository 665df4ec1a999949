#!/usr/bin/env bash
# The fp8 KV cache (--kv-cache-dtype fp8) on the GPU machine: its tests, then the 16-bit and fp8
# caches side by side on the benchmarks where KV bytes matter, from one carried build
# (scripts/gpu-executor.sh stage builds it into build-cudaexec/carry).
#
#   device run, carry ["build-cudaexec/carry"], command:
#     scripts/gpu-fp8.sh tests     # fp8 tests, then the whole GPU suite (logs under $OUT)
#     scripts/gpu-fp8.sh kbench    # K1 (16-bit and fp8 rows) and K2 (FOLIO_CUDA_BENCH=1)
#     scripts/gpu-fp8.sh b2        # B2 (1024 in / 1024 out x 1000) auto vs fp8, and fp8 at 512 seqs
#     scripts/gpu-fp8.sh b1b3      # B1 and B3 with the fp8 cache, B3 auto beside it
# Each mode fits one device call (10 minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-carry.sh
carry_start fp8 || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
m=(--device cuda --load-format dummy --model-config configs/llama-3-8b.json)
FP8_TESTS='*Fp8*:*fp8*:*KvDequant*'

summary() { grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure|tests ran|Expected|Which is|actual' "$1" | head -n 40; }

case "${1:-}" in
  tests)
    echo "== fp8 tests"
    timeout 200 "$CARRY/folio_cuda_tests" --gtest_filter="$FP8_TESTS" >"$out/fp8_tests.log" 2>&1
    echo "exit $?"; summary "$out/fp8_tests.log"
    echo "== whole GPU suite (benches excluded)"
    timeout 360 "$CARRY/folio_cuda_tests" --gtest_filter='-*Bench*' >"$out/gpu_tests.log" 2>&1
    echo "exit $?"; summary "$out/gpu_tests.log"
    ;;
  kbench)
    FOLIO_CUDA_BENCH=1 timeout 300 "$CARRY/folio_cuda_tests" --gtest_filter="${KBENCH:-AttentionBench.*}" \
      2>&1 | tee "$out/k1.log" | grep -vE '^\[ (RUN|  +OK) ' | grep -vE '^$' | tail -n 60
    ;;
  b2)
    b2=(--input-len 1024 --output-len 1024 --num-prompts 1000 --max-num-batched-tokens 16384
        --gpu-memory-utilization 0.95)
    for run in "auto 256" "fp8 256" "fp8 512"; do
      set -- $run
      echo "== B2 --kv-cache-dtype $1 --max-num-seqs $2"
      timeout 250 "$CARRY/folio" bench throughput "${m[@]}" "${b2[@]}" --kv-cache-dtype "$1" \
        --max-num-seqs "$2" --output-json "$out/b2-$1-$2.json" 2>&1 | grep -vE '^\[' | tail -n 8
    done
    ;;
  b1b3)
    echo "== B1 fp8"
    timeout 200 "$CARRY/folio" bench throughput "${m[@]}" --kv-cache-dtype fp8 \
      --workload bench/workloads/sharegpt_like_1000.jsonl --max-num-seqs 1024 \
      --max-num-batched-tokens 16384 --output-json "$out/b1-fp8.json" 2>&1 | grep -vE '^\[' | tail -n 8
    for kv in auto fp8; do
      echo "== B3 --kv-cache-dtype $kv"
      timeout 120 "$CARRY/folio" bench latency "${m[@]}" --kv-cache-dtype "$kv" --batch-size 1 \
        --input-len 128 --output-len 256 --num-iters-warmup 1 --num-iters 3 \
        --output-json "$out/b3-$kv.json" 2>&1 | grep -vE '^\[' | tail -n 5
    done
    ;;
  *) echo "usage: $0 tests|kbench|b2|b1b3" >&2; exit 2 ;;
esac
