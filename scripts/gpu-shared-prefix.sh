#!/usr/bin/env bash
# Shared prompt prefixes (session 45), in one device call: decode attention over rows that share
# prefix blocks, the per-row kernel against cascade attention (AttentionBench.K1SharedPrefix),
# then `folio bench throughput` on the dummy Llama-3-8B over the shared-prefix workloads with
# cascade attention on (the default) and off (FOLIO_CASCADE_ATTENTION=0), one after the other.
#
#   here:   scripts/gpu-executor.sh stage
#   device: run, carry ["build-cudaexec/carry"], command: scripts/gpu-shared-prefix.sh
#   local smoke run (no GPU, no carry): FOLIO=build/src/tools/folio MODEL_ARGS='--model-config
#     tests/data/models/llama_hd128/config.json --load-format dummy' NUM_PROMPTS=16 NO_KERNEL=1
#     scripts/gpu-shared-prefix.sh
#
#   LOADS        workloads of bench/workloads without .jsonl (default: shared_prefix_64x16
#                shared_prefix_1x1024; about 3 minutes on an H200 with the kernel bench)
#   ARMS         FOLIO_CASCADE_ATTENTION values, in order (default: "1 0")
#   NUM_PROMPTS  the first N requests of each workload (default: all)
#   NO_KERNEL=1  skips the kernel bench
#   MODEL_ARGS, FOLIO as in scripts/gpu-serve.sh
# $OUT gets shared-prefix.log (this output) and shared-prefix-json.tgz (one JSON per run).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-carry.sh
folio_start shared-prefix || exit 1
git rev-parse --short HEAD 2>/dev/null || true
read -r -a model <<<"${MODEL_ARGS:---model-config configs/llama-3-8b.json --load-format dummy --device cuda}"
if [[ -z ${NO_KERNEL:-} ]]; then
  echo "== AttentionBench.K1SharedPrefix"
  FOLIO_CUDA_BENCH=1 timeout 150 "${CARRY:-build-cudaexec/carry}/folio_cuda_tests" \
    --gtest_filter='AttentionBench.K1SharedPrefix' 2>&1 | grep -E '^device|^K1|cascade|FAIL|rror'
fi
json=$(mktemp -d)
work=$(mktemp -d)
for name in ${LOADS:-shared_prefix_64x16 shared_prefix_1x1024}; do
  flags=(--workload "bench/workloads/$name.jsonl")
  [[ -n ${NUM_PROMPTS:-} ]] && flags+=(--num-prompts "$NUM_PROMPTS")
  for arm in ${ARMS:-1 0}; do
    tag=$name-cascade$arm
    t0=$SECONDS
    FOLIO_CASCADE_ATTENTION=$arm "$FOLIO" bench throughput "${model[@]}" "${flags[@]}" \
      --output-json "$json/$tag.json" >"$work/$tag.txt" 2>&1
    echo "== $tag: exit $?, $((SECONDS - t0)) s"
    grep -E '^Throughput|^Wall|^Preemptions|^Prefix|rror' "$work/$tag.txt"
  done
done
tar -C "$json" -czf "$out/shared-prefix-json.tgz" .
rm -rf "$json" "$work"
