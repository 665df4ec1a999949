#!/usr/bin/env bash
# A/B runs of kernel variants on the GPU machine in one device call: correctness tests first,
# then kernel benches, then Llama-3-8B dummy-weight end-to-end benches once per variant setting,
# all from one carried build (scripts/gpu-executor.sh stage builds it into build-cudaexec/carry).
#
#   device run, carry ["build-cudaexec/carry"], command e.g.:
#     TESTS='SkinnyGemm.*:SkinnyBulk.*' KBENCH='SkinnyGemm.Bench*' \
#     B3_VARIANTS='FOLIO_SKINNY_VARIANT=r4u2 FOLIO_SKINNY_VARIANT=bulk' scripts/gpu-ab.sh
#
# Variables (each optional):
#   TESTS        gtest filter of correctness tests (a failure stops the script before benches)
#   KBENCH       gtest filter of FOLIO_CUDA_BENCH=1 kernel benches
#   KBENCH_ENV   space-separated VAR=value settings, one kernel-bench run each ("-" = none;
#                commas join several variables, as in B3_VARIANTS)
#   B3_VARIANTS  space-separated VAR=value settings ("-" = none), one B3 latency run each
#                (batch 1, 128 in / 256 out, as in bench/results); a setting of several
#                variables joins them with commas (FOLIO_TC_RING=2,FOLIO_TC_RING_BULK=2)
#   ROUNDS       passes over B3_VARIANTS, alternated (default 1): variants compared within one
#                machine and its clocks, each round printing one TPOT line per variant
#   LAT_BATCH    batch size of the latency runs (default 1: B3)
#   LAT_ARGS     extra `folio bench latency` arguments for every B3 run (not the batch size)
#   THROUGHPUT   extra arguments for one `folio bench throughput` per B3 variant (e.g.
#                "--workload bench/workloads/sharegpt_like_1000.jsonl --max-num-seqs 1024
#                --max-num-batched-tokens 16384"); unset = no throughput runs
# Logs and JSON land under $OUT (at most 8 files come back: keep the settings few).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-carry.sh
carry_start ab || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
# A variant setting as env's words: "-" none, commas between several VAR=value.
setting_vars() { [[ $1 == - ]] || echo "${1//,/ }"; }

if [[ -n ${TESTS:-} ]]; then
  echo "== tests: $TESTS"
  timeout 240 "$CARRY/folio_cuda_tests" --gtest_filter="$TESTS" >"$out/tests.log" 2>&1
  rc=$?
  grep -E '^\[ *(FAILED|PASSED) *\]|Failure|tests ran' "$out/tests.log" | head -n 30
  if ((rc != 0)); then echo "tests failed (exit $rc): no benches"; exit 1; fi
fi

if [[ -n ${KBENCH:-} ]]; then
  for setting in ${KBENCH_ENV:--}; do
    echo "== kernel bench $KBENCH ($setting)"
    env $(setting_vars "$setting") FOLIO_CUDA_BENCH=1 timeout 200 \
      "$CARRY/folio_cuda_tests" --gtest_filter="$KBENCH" 2>&1 | tee -a "$out/kbench.log" |
      grep -vE '^\[ (RUN|  +OK) ' | grep -vE '^$' | tail -n 40
  done
fi

m=(--device cuda --load-format dummy --model-config configs/llama-3-8b.json)
i=0
for round in $(seq "${ROUNDS:-1}"); do
  for setting in ${B3_VARIANTS:-}; do
    i=$((i + 1))
    echo "== B3 latency ($setting) batch ${LAT_BATCH:-1} ${LAT_ARGS:-}, round $round"
    env $(setting_vars "$setting") timeout 150 "$CARRY/folio" bench latency \
      "${m[@]}" --batch-size "${LAT_BATCH:-1}" --input-len 128 --output-len 256 --num-iters-warmup 1 \
      --num-iters 3 ${LAT_ARGS:-} --output-json "$out/latency_$i.json" 2>&1 | grep -vE '^\[' |
      tail -n 5
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('round', sys.argv[2], sys.argv[3], 'median TPOT ms', round(d['median_tpot_ms'], 3))" \
      "$out/latency_$i.json" "$round" "$setting" 2>/dev/null || echo "round $round $setting: no result"
    if [[ -n ${THROUGHPUT:-} ]]; then
      echo "== throughput ($setting) $THROUGHPUT"
      env $(setting_vars "$setting") timeout 240 "$CARRY/folio" bench throughput \
        "${m[@]}" $THROUGHPUT --output-json "$out/throughput_$i.json" 2>&1 | grep -vE '^\[' |
        tail -n 6
    fi
  done
done
