#!/usr/bin/env bash
# Every benchmark of issue 7's targets in one device call, with the commands bench/results/README.md
# documents, so that a session lent a GPU (an H100 above all: the targets are its figures) gets
# the whole table from one carried build:
#   K1  AttentionBench.K1Decode, the issue's shapes, pages 16 and 1 (token mode), "default" lines
#       (FOLIO_BENCH_K1_TC16=1: the default and tc's 16-bit forms only, to keep the call short)
#   K2  AttentionBench.K2Prefill, the default prefill kernel (K2_KERNEL, v3tmaq)
#   B3  folio bench latency, batch 1, 128 in / 256 out
#   B1  folio bench throughput on sharegpt_like_1000, paged and --kv-cache-mode token (M1: KV
#       utilization and peak sequences of both)
#   B2  1024 in / 1024 out x B2_PROMPTS (1000), bf16; its JSON's host_loop is the batch-256 host
#       loop target
# The peer comparison (bench/hf_peer.py, transformers on the same machine) is a separate call.
#
#   here:   scripts/gpu-executor.sh stage
#   device: run, carry ["build-cudaexec/carry"], command: scripts/gpu-targets.sh
# On an H100 it takes about 6 minutes (B2_SWAP=1 adds B2 with swap preemption, ~2.5 more);
# B2_PROMPTS=256 (one wave) shortens B2 for a smoke run; SHARED=1 adds the shared-prefix load
# with cascade attention on and off (~40 s); NO_ASYNC=1 runs B3, B1 and B2 with
# --no-async-scheduling; B1_LOF=1 adds B1 at 256 sequences and 2048-token steps with --scheduling-policy lof.
# $OUT gets kbench.log, b3.json, b1.json, b1_token.json, b2.json (b2_swap.json, b1_lof.json,
# shared_cascade1.json, shared_cascade0.json),
# smi-b3/b1/b1_token/b2.csv (the clock and power beside each, summarised in a
# "power" line) and targets.log (this output).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-carry.sh
carry_start targets || exit 1
exec > >(tee "$out/targets.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
date -u +%FT%TZ  # the binaries' commit is in every JSON (`commit`), shown after B3

echo "== K1 (pages 16 and 1) and K2 (${K2_KERNEL:-v3tmaq})"
FOLIO_CUDA_BENCH=1 FOLIO_BENCH_K1_PAGES=16,1 FOLIO_BENCH_K1_TC16=1 timeout 240 "$CARRY/folio_cuda_tests" \
  --gtest_filter='AttentionBench.K1Decode' >"$out/kbench.log" 2>&1
FOLIO_CUDA_BENCH=1 FOLIO_BENCH_K2_KERNELS=${K2_KERNEL:-v3tmaq} timeout 120 "$CARRY/folio_cuda_tests" \
  --gtest_filter='AttentionBench.K2Prefill' >>"$out/kbench.log" 2>&1
grep -E '^K1 copy|^K1 decode .* default|^K2 GEMM|^K2 prefill' "$out/kbench.log"

m=(--model-config configs/llama-3-8b.json --load-format dummy --device cuda)
# NO_ASYNC=1: B3, B1 and B2 with --no-async-scheduling (steps wait for their tokens), for the
# A/B against the default; the JSONs say which in their `command`.
[[ ${NO_ASYNC:-0} == 1 ]] && m+=(--no-async-scheduling)
# One JSON's figures as "key value" pairs (python3 is on the GPU machine).
show() {
  python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = d
    for part in k.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    print(f"  {k} {v:.4g}" if isinstance(v, float) else f"  {k} {v}")
EOF
}

echo "== B3"
power_start b3
timeout 150 "$CARRY/folio" bench latency "${m[@]}" --batch-size 1 --input-len 128 --output-len 256 \
  --num-iters-warmup 1 --num-iters 3 --output-json "$out/b3.json" >/dev/null 2>&1
power_stop
show "$out/b3.json" commit median_tpot_ms floor_tpot_ms floor_ratio bandwidth_gbps

b1=(--workload bench/workloads/sharegpt_like_1000.jsonl --max-num-seqs 1024 --max-num-batched-tokens 16384)
for mode in paged token; do
  name=b1$([[ $mode == token ]] && echo _token)
  echo "== B1 ($mode)"
  power_start "$name"
  timeout 240 "$CARRY/folio" bench throughput "${m[@]}" "${b1[@]}" \
    $([[ $mode == token ]] && echo --kv-cache-mode token) --output-json "$out/$name.json" >/dev/null 2>&1
  power_stop
  show "$out/$name.json" requests_per_second output_tokens_per_second kv_slot_utilization \
    peak_running_sequences num_preemptions host_loop.host_share_of_execute
done
# B1_LOF=1: B1's workload at 256 sequences and 2048-token steps (folio's defaults before session
# 42) with --scheduling-policy lof (longest output first; on an H200 66.5 req/s against 55.9 FCFS
# there and 61.5 with B1's flags, decode rows longest first).
if [[ ${B1_LOF:-0} == 1 ]]; then
  echo "== B1, 256 sequences, 2048-token steps, --scheduling-policy lof"
  timeout 240 "$CARRY/folio" bench throughput "${m[@]}" --workload bench/workloads/sharegpt_like_1000.jsonl \
    --max-num-seqs 256 --max-num-batched-tokens 2048 --scheduling-policy lof \
    --output-json "$out/b1_lof.json" >/dev/null 2>&1
  show "$out/b1_lof.json" requests_per_second output_tokens_per_second num_steps peak_running_sequences
fi

# B2's command (bench/results/README.md), its JSON to $out/$1.json, extra flags after it.
b2() {
  local name=$1
  shift
  timeout 400 "$CARRY/folio" bench throughput "${m[@]}" --input-len 1024 --output-len 1024 \
    --num-prompts "${B2_PROMPTS:-1000}" --max-num-batched-tokens 16384 \
    --gpu-memory-utilization 0.95 --max-num-seqs 256 "$@" --output-json "$out/$name.json" \
    >/dev/null 2>&1
}
echo "== B2 (${B2_PROMPTS:-1000} prompts)"
power_start b2
b2 b2
power_stop
show "$out/b2.json" output_tokens_per_second elapsed_seconds num_preemptions kv_num_blocks \
  host_loop.host_share_of_execute host_loop.mean_step_ms
# B2_SWAP=1: B2 again with swap preemption (where the pool holds fewer than 256 x 2048 tokens, an
# H100's, B2 preempts; on an H200 with the H100's pool swap lost 1.5% where recompute lost 3.4%).
# It admits as vLLM does (--schedule-conservativeness 0): the default admission headroom holds
# prompts back instead and does not preempt at all (session 43).
if [[ ${B2_SWAP:-0} == 1 ]]; then
  echo "== B2, swap preemption"
  b2 b2_swap --preemption-mode swap --swap-space 24 --schedule-conservativeness 0
  show "$out/b2_swap.json" output_tokens_per_second elapsed_seconds num_preemptions
fi

# SHARED=1: not an issue-7 target, a regression line for cascade attention (session 45 on): the
# shared-system-prompt load shared_prefix_64x16 (SGLang's default: 64 groups of 16 requests,
# each group's 2048-token prefix, 128 own tokens, 256 out) with cascade on (the default) and off.
if [[ ${SHARED:-0} == 1 ]]; then
  for arm in 1 0; do
    echo "== shared_prefix_64x16, FOLIO_CASCADE_ATTENTION=$arm"
    FOLIO_CASCADE_ATTENTION=$arm timeout 120 "$CARRY/folio" bench throughput "${m[@]}" \
      --workload bench/workloads/shared_prefix_64x16.jsonl --output-json "$out/shared_cascade$arm.json" \
      >/dev/null 2>&1
    show "$out/shared_cascade$arm.json" requests_per_second output_tokens_per_second num_steps
  done
fi

echo "targets (H100): K1 page 16 >= 90% of the queued copy at b >= 32, L >= 2048; token mode"
echo "  >= 85%; K2 8x1024 >= 400 TFLOP/s; B3 <= 5.5 ms; B1 >= 45 req/s; B2 >= 9,000 output"
echo "  tok/s; host loop < 5% at batch 256; M1 >= 95% paged, >= 99.9% token mode"
