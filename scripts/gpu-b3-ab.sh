#!/usr/bin/env bash
# B3 (Llama-3-8B dummy weights, batch-1 decode, TPOT) under several environment settings,
# alternated in one device call so that the figures share a machine and its clocks.
#
#   scripts/gpu-executor.sh stage                       # here
#   device run, carry ["build-cudaexec/carry"], command:
#     scripts/gpu-b3-ab.sh 'FOLIO_L2_PREFETCH_MIB=0' 'FOLIO_L2_PREFETCH_MIB=16' ...
#
# Each argument is one variant: space-separated NAME=VALUE pairs ('' = the defaults). ROUNDS
# (default 2) passes over the list; TESTS (a gtest filter) runs first when set. Prints one line
# per run: the variant and its TPOT (median of the iterations, ms).
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=${BUILD:-build-cudaexec}/carry
source scripts/gpu-carry.sh
carry_unpack "$CARRY" || exit 1
out=${OUT:-/tmp/folio-gpu-b3ab}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
git rev-parse --short HEAD 2>/dev/null || true
if [[ -n ${TESTS:-} ]]; then
  timeout 240 "$CARRY/folio_cuda_tests" --gtest_filter="$TESTS" >"$out/tests.log" 2>&1
  echo "tests exit $?"
  grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure|tests ran|Expected|Which is' "$out/tests.log" | head -n 30
fi
m=(--device cuda --load-format dummy --model-config configs/llama-3-8b.json --batch-size 1
   --input-len 128 --output-len 256 --num-iters-warmup 1 --num-iters 3)
for round in $(seq "${ROUNDS:-2}"); do
  i=0
  for variant in "$@"; do
    i=$((i + 1))
    json="$out/b3-r$round-v$i.json"
    env $variant timeout 120 "$CARRY/folio" bench latency "${m[@]}" --output-json "$json" \
      >"$out/b3-r$round-v$i.log" 2>&1
    tpot=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(round(d['median_tpot_ms'], 3), 'mean', round(d['mean_tpot_ms'], 3))" "$json" 2>/dev/null || echo "failed")
    echo "round $round [$variant] TPOT ms: $tpot"
  done
done
