#!/usr/bin/env bash
# The tensor-core decode kernel (FOLIO_DECODE_KERNEL=tc) against v2 on the GPU machine, in one
# device call: the decode tests, K1, then B3 / B1 / B2 with each kernel alternated.
#
#   scripts/gpu-executor.sh stage                    # here
#   device run, carry ["build-cudaexec/carry"], command:
#     scripts/gpu-tc.sh tests|k1|e2e|b2              # there; logs and JSON under $OUT
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-carry.sh
carry_start tc >/dev/null || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader || true
m=(--device cuda --load-format dummy --model-config configs/llama-3-8b.json)
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(*[f'{k}={d[k]:.4g}' for k in sys.argv[2:] if k in d])" "$@" 2>/dev/null || echo failed; }
case "${1:-}" in
  tests)
    timeout 240 "$CARRY/folio_cuda_tests" --gtest_filter="${TESTS:-*Decode*}" >"$out/tests.log" 2>&1
    echo "tests exit $?"
    grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|tests ran|Failure|Expected|Which is' "$out/tests.log" | head -n 30
    ;;
  k1)
    FOLIO_CUDA_BENCH=1 timeout 300 "$CARRY/folio_cuda_tests" --gtest_filter='AttentionBench.K1*' \
      >"$out/k1.log" 2>&1
    grep -E 'copy d2d|K1 decode' "$out/k1.log" | grep -E 'copy d2d|: v2:| v2 queued| v2 fp8 cache:| tc' |
      grep -v forced | sed 's/(L2 cold, launch not timed)//'
    ;;
  e2e)
    for r in 1 2; do
      for k in v2 tc; do
        FOLIO_DECODE_KERNEL=$k timeout 120 "$CARRY/folio" bench latency "${m[@]}" --batch-size 1 \
          --input-len 128 --output-len 256 --num-iters-warmup 1 --num-iters 3 \
          --output-json "$out/b3-$k-$r.json" >/dev/null 2>&1
        echo "B3 $k round $r: $(json "$out/b3-$k-$r.json" median_tpot_ms)"
      done
    done
    for k in v2 tc; do
      FOLIO_DECODE_KERNEL=$k timeout 200 "$CARRY/folio" bench throughput "${m[@]}" \
        --workload bench/workloads/sharegpt_like_1000.jsonl --max-num-seqs 1024 \
        --max-num-batched-tokens 16384 --output-json "$out/b1-$k.json" >/dev/null 2>&1
      echo "B1 $k: $(json "$out/b1-$k.json" requests_per_second output_tokens_per_second)"
    done
    ;;
  b2)
    for spec in "${@:2}"; do
      read -r k kv seqs <<<"$spec"
      FOLIO_DECODE_KERNEL=$k timeout 280 "$CARRY/folio" bench throughput "${m[@]}" --input-len 1024 \
        --output-len 1024 --num-prompts 1000 --max-num-batched-tokens 16384 \
        --gpu-memory-utilization 0.95 --kv-cache-dtype "$kv" --max-num-seqs "$seqs" \
        --output-json "$out/b2-$k-$kv-$seqs.json" >/dev/null 2>&1
      echo "B2 $k $kv $seqs: $(json "$out/b2-$k-$kv-$seqs.json" output_tokens_per_second elapsed_seconds num_preemptions)"
    done
    ;;
  *) echo "usage: $0 tests|k1|e2e|b2 'KERNEL KV SEQS'..." >&2; exit 2 ;;
esac
