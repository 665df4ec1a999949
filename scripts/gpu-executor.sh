#!/usr/bin/env bash
# Runs the CUDA executor's checks on the GPU machine in one call: every `gpu` test (ops,
# executor vs CPU, engine goldens/preemption/sampling/memory planning), `folio generate` on a
# fixture model, and a dummy Llama-3-8B batch-1 decode timing.
#
#   scripts/gpu-executor.sh stage   # here: build folio_cuda_tests and folio in build-cudaexec
#                                   #   (FOLIO_CUDA=ON) and fill build-cudaexec/carry
#   device run, carry ["build-cudaexec/carry"], command:
#     scripts/gpu-executor.sh run   # there; logs under $OUT
#
# Like scripts/gpu-test.sh: the GPU machine has CUDA but none of our Debian libraries, so the
# binaries travel with the shared libraries they need beyond glibc/libstdc++/CUDA, as one tar.xz.
# The test binaries read fixtures through paths compiled in here (/work/main/...): `run` links
# that path to the checkout it runs in.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cudaexec}
CARRY=$BUILD/carry
source scripts/gpu-carry.sh

stage() { carry_stage "$BUILD"; }

# Seconds (wall) of one `folio generate` run.
timed_generate() {
  local t0 t1
  t0=$(date +%s.%N)
  "$CARRY/folio" generate "$@" >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l 2>/dev/null || python3 -c "print($t1 - $t0)"
}

run() {
  set +e +o pipefail  # report every part; the test log decides the exit status
  carry_unpack "$CARRY" || exit 1
  local out=${OUT:-/tmp/folio-gpu-exec}
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  echo "== gpu tests"
  timeout 300 "$CARRY/folio_cuda_tests" --gtest_filter="${FILTER:-*}" \
    --gtest_output="xml:$out/gpu_tests.xml" >"$out/gpu_tests.log" 2>&1
  echo "test binary exit $?"
  grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure|tests ran|Expected|Which is|actual|^golden |\(([0-9]{4,}) ms\)' \
    "$out/gpu_tests.log" | head -n 60
  echo "== transformers on the same goldens (calibration of bf16/fp16 error)"
  timeout 120 python3 tests/cuda/hf_golden_baseline.py 2>&1 | grep -E '^transformers|Error' | head -n 8
  local sanitizer=/usr/local/cuda/bin/compute-sanitizer
  if [[ -x $sanitizer ]]; then
    echo "== memcheck (executor vs CPU, two cases)"
    timeout 180 "$sanitizer" --tool memcheck --error-exitcode 3 "$CARRY/folio_cuda_tests" \
      --gtest_filter='*CudaVsCpu*qwen3_qknorm_bs1*:*CudaVsCpu*llama_hd128_bs16*' >"$out/memcheck.log" 2>&1
    echo "memcheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck.log" | head -n 5
  fi
  echo "== folio generate --device cuda (fixture llama_hd128)"
  echo '{"prompt_token_ids": [519, 3, 77, 12, 900], "max_tokens": 12, "temperature": 0}' >/tmp/req.jsonl
  "$CARRY/folio" generate --device cuda --model tests/data/models/llama_hd128 --input /tmp/req.jsonl 2>&1 | tail -n 4
  echo "== folio generate, bundled model (head_dim 16) on cuda"
  "$CARRY/folio" generate --device cuda --model models/tiny_llama3 --input /tmp/req.jsonl 2>&1 | tail -n 2
  echo "== dummy Llama-3-8B, batch 1, 128-token prompt"
  python3 -c "import json; print(json.dumps({'prompt_token_ids': list(range(1000, 1128)), 'max_tokens': int(__import__('sys').argv[1]), 'ignore_eos': True, 'temperature': 0}))" 32 >/tmp/r32.jsonl
  python3 -c "import json; print(json.dumps({'prompt_token_ids': list(range(1000, 1128)), 'max_tokens': int(__import__('sys').argv[1]), 'ignore_eos': True, 'temperature': 0}))" 544 >/tmp/r544.jsonl
  local dummy=(--device cuda --load-format dummy --model configs --model-config configs/llama-3-8b.json)
  "$CARRY/folio" generate "${dummy[@]}" --input /tmp/r32.jsonl >"$out/dummy8b.log" 2>&1
  grep -E 'cuda:|error|done' "$out/dummy8b.log" | cut -c1-400
  local t32 t544
  t32=$(timed_generate "${dummy[@]}" --input /tmp/r32.jsonl 2>/dev/null)
  t544=$(timed_generate "${dummy[@]}" --input /tmp/r544.jsonl 2>/dev/null)
  python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'generate 32 tokens: {a:.2f} s, 544 tokens: {b:.2f} s -> decode {(b-a)/512*1000:.2f} ms/token (batch 1)')" "$t32" "$t544"
  grep -q '^\[  PASSED  \]' "$out/gpu_tests.log" && ! grep -q '^\[  FAILED  \]' "$out/gpu_tests.log"
}

# Llama-3-8B dummy-weight benchmarks (B3 and decode batches, B1), JSON under $OUT; extra
# arguments go to every folio bench call (e.g. --no-device-sampling).
bench() {
  set +e
  carry_unpack "$CARRY" || exit 1
  local out=${OUT:-/tmp/folio-gpu-exec}
  mkdir -p "$out"
  local m=(--device cuda --load-format dummy --model-config configs/llama-3-8b.json)
  for b in ${BATCHES:-1 32 128}; do
    echo "== bench latency batch $b $*"
    timeout 120 "$CARRY/folio" bench latency "${m[@]}" --batch-size "$b" --input-len 128 \
      --output-len 256 --num-iters-warmup 1 --num-iters 3 --output-json "$out/latency_b$b${TAG:-}.json" "$@" 2>&1 | grep -vE '^\[' | tail -n 6
  done
  if [[ -n ${B1:-} ]]; then
    echo "== bench throughput B1 $*"
    timeout 300 "$CARRY/folio" bench throughput "${m[@]}" --workload bench/workloads/sharegpt_like_1000.jsonl \
      --output-json "$out/b1${TAG:-}.json" "$@" 2>&1 | grep -vE '^\[' | tail -n 12
  fi
}

case "${1:-}" in
  stage) stage ;;
  run) run ;;
  bench) shift; bench "$@" ;;
  *) echo "usage: $0 stage|run|bench [folio bench flags]" >&2; exit 2 ;;
esac
