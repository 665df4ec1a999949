#!/usr/bin/env bash
# Whole builds against each other in one device call: the test binaries that carry_ab_pack
# (scripts/gpu-carry.sh) packed, correctness first, then a kernel bench alternated over rounds.
#
#   here:  git checkout A && cmake --build build-cudaexec --target folio_cuda_tests && cp ...
#          (or one build folder per tree), then
#          source scripts/gpu-carry.sh && carry_ab_pack build-ab main=build-a wip=build-b
#   device run, carry ["build-ab"], command e.g.:
#          TESTS='*Prefill*:-*Bench*' RACECHECK='PrefillAttentionDynamicItemsTest.*' \
#          KBENCH_ENV='FOLIO_BENCH_K2_KERNELS=v3tmaq' GREP='^K2' scripts/gpu-build-ab.sh
#
# Variables (each optional):
#   AB_DIR      the packed folder (default build-ab); its NAME/ folders are the variants
#   BASELINE    the variant whose tests are not rerun and whose bench runs first in each round
#               (default main when there is one, else the first name in sort order)
#   TESTS       gtest filter run on every variant but the baseline (default '-*Bench*')
#   RACECHECK   gtest filter run under compute-sanitizer racecheck on the same (unset: none)
#   KBENCH      gtest filter of the FOLIO_CUDA_BENCH=1 bench (default 'AttentionBench.*')
#   KBENCH_ENV  VAR=value settings for every bench run (e.g. FOLIO_BENCH_K2_KERNELS=v3tmaq)
#   GREP        which bench lines to keep (default '^K[12]')
#   ROUNDS      passes over the variants, alternated (default 3); their ranges per variant and
#               shape end the output (scripts/kbench-summary.py)
# Everything lands in $OUT/r and, packed, $OUT/results.tgz (few files come back one by one).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-carry.sh
dir=${AB_DIR:-build-ab}
carry_ab_unpack "$dir" || exit 1
out=${OUT:-/tmp/folio-gpu-build-ab}/r
mkdir -p "$out"
mapfile -t names < <(cd "$dir" && ls -d */ | tr -d / | sort)
base=${BASELINE:-main}
[[ -d $dir/$base ]] || base=${names[0]}
variants=("$base")
for v in "${names[@]}"; do [[ $v == "$base" ]] || variants+=("$v"); done
echo "variants: ${variants[*]} (baseline ${variants[0]})"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
pack() { tar -C "$(dirname "$out")" -czf "$(dirname "$out")/results.tgz" r; }

for v in "${variants[@]:1}"; do
  timeout 300 "$dir/$v/folio_cuda_tests" --gtest_filter="${TESTS:--*Bench*}" >"$out/$v-tests.log" 2>&1
  rc=$?
  echo "$v tests: exit $rc, $(grep -E '^\[ *(PASSED|FAILED) *\]' "$out/$v-tests.log" | head -n 2 | tr '\n' ' ')"
  if ((rc != 0)); then pack; echo "tests failed: no benches"; exit 1; fi
  if [[ -n ${RACECHECK:-} ]]; then
    timeout 200 compute-sanitizer --tool racecheck "$dir/$v/folio_cuda_tests" \
      --gtest_filter="$RACECHECK" >"$out/$v-racecheck.log" 2>&1
    echo "$v racecheck: exit $?, $(grep -E 'RACECHECK SUMMARY' "$out/$v-racecheck.log")"
  fi
done
pack
for ((r = 1; r <= ${ROUNDS:-3}; ++r)); do
  for v in "${variants[@]}"; do
    echo "== $v round $r" | tee -a "$out/bench.log"
    env ${KBENCH_ENV:-} FOLIO_CUDA_BENCH=1 timeout 200 "$dir/$v/folio_cuda_tests" \
      --gtest_filter="${KBENCH:-AttentionBench.*}" 2>&1 | grep -E "${GREP:-^K[12]}" |
      tee -a "$out/bench.log"
  done
  pack
done
# Per variant and shape, the rounds' ranges (scripts/kbench-summary.py), also in $OUT/r/summary.txt.
python3 scripts/kbench-summary.py "$out/bench.log" 2>&1 | tee "$out/summary.txt"
pack
