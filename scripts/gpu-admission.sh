#!/usr/bin/env bash
# Admission on loads whose outputs stop early (session 44), in one device call: `folio bench
# throughput` on the dummy Llama-3-8B over bench/workloads' EOS workloads (each request ended at
# its output_len as if it sampled EOS there: bench/README.md), every load under several admission
# arms, one after the other on the same GPU.
#
#   here:   scripts/gpu-executor.sh stage
#   device: run, carry ["build-cudaexec/carry"], command: scripts/gpu-admission.sh
#   local smoke run (no GPU, no carry): FOLIO=build/src/tools/folio MODEL_ARGS='--model-config
#     tests/data/models/llama_hd128/config.json --load-format dummy' LOADS='eos_mean100_2000:64'
#     NUM_PROMPTS=16 scripts/gpu-admission.sh
#
#   LOADS        "workload:blocks ...": a file of bench/workloads without .jsonl, or `capped` (B2's
#                1000 x 1024 in / 1024 out with EOS honoured: outputs that do run to max_tokens);
#                blocks 0 = the pool from memory. Default: the three of session 44's second call,
#                about 7 minutes on an H200 with the default arms.
#   ARMS         "X[:sglang] ...": --schedule-conservativeness values, `:sglang` with SGLang's ratio
#                (FOLIO_ADMISSION_RATIO=sglang) instead of the reactive default (default:
#                "0 0.3:sglang 0.3")
#   NUM_PROMPTS  the first N requests of each workload (default: all)
#   MODEL_ARGS, FOLIO as in scripts/gpu-serve.sh
# $OUT gets admission.log (this output) and admission-json.tgz (one JSON per run).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-carry.sh
folio_start admission || exit 1
git rev-parse --short HEAD 2>/dev/null || true
read -r -a model <<<"${MODEL_ARGS:---model-config configs/llama-3-8b.json --load-format dummy --device cuda}"
json=$(mktemp -d)
work=$(mktemp -d)
python3 bench/make_eos_workload.py fixed 1000 1024 1024 1024 >"$work/capped.jsonl"

for spec in ${LOADS:-sharegpt_like_1000_eos2048:16384 eos_mean100_2000:4096 eos_mean400_2000:16384}; do
  name=${spec%%:*}
  blocks=${spec#*:}
  file=bench/workloads/$name.jsonl
  [[ $name == capped ]] && file=$work/capped.jsonl
  flags=(--workload "$file")
  [[ $blocks != 0 ]] && flags+=(--num-kv-blocks "$blocks")
  [[ -n ${NUM_PROMPTS:-} ]] && flags+=(--num-prompts "$NUM_PROMPTS")
  for arm in ${ARMS:-0 0.3:sglang 0.3}; do
    x=${arm%%:*}
    ratio=reactive
    [[ $arm == *:sglang ]] && ratio=sglang
    tag=$name-$blocks-x$x-$ratio
    t0=$SECONDS
    FOLIO_ADMISSION_RATIO=$ratio "$FOLIO" bench throughput "${model[@]}" "${flags[@]}" \
      --schedule-conservativeness "$x" --output-json "$json/$tag.json" >"$work/$tag.txt" 2>&1
    echo "== $tag: exit $?, $((SECONDS - t0)) s"
    grep -E '^Throughput|^Wall|^Preemptions|rror' "$work/$tag.txt"
  done
done
tar -C "$json" -czf "$out/admission-json.tgz" .
rm -rf "$json" "$work"
