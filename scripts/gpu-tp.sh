#!/usr/bin/env bash
# Tensor parallelism on a multi-GPU machine, in one device call: the TP tests (TP=2 and, with 4
# GPUs, TP=4 against one GPU: fixture checkpoints, tiny checkpoints, dummy fixture-shaped and
# Llama-3-8B-shaped models), then B3 (batch-1 latency) and B1 (ShareGPT-like throughput) for the
# dummy Llama-3-8B at -tp 1 and -tp 2; on 4 GPUs also the dummy Llama-3-70B at -tp 4.
#
#   scripts/gpu-tp.sh stage          # here: build folio_cuda_tests and folio in build-tp
#                                    #   (FOLIO_CUDA=ON) and fill build-tp/carry
#   device run (kind nvidia-h200-x2), carry ["build-tp/carry"], command:
#     scripts/gpu-tp.sh run          # tests + 8B benchmarks; JSON and logs under $OUT
#     scripts/gpu-tp.sh tests        # the tests only
#     scripts/gpu-tp.sh bench        # the 8B benchmarks only
#     scripts/gpu-tp.sh bench70      # (nvidia-h200-x4) the dummy 70B at -tp 4
#     scripts/gpu-tp.sh bench70x2    # (nvidia-h200-x2) the dummy 70B at -tp 2 (66 GiB a GPU)
#     scripts/gpu-tp.sh bench4       # (nvidia-h200-x4) the dummy 8B at -tp 4
#     scripts/gpu-tp.sh flowcheck    # (2 GPUs) TpAsync tp2 repeated with SkinnyFlow under TP and
#                                    #   without (REPS=10 each), then B3 -tp 2 both ways
#     scripts/gpu-tp.sh allreduce    # peer all-reduce against NCCL over every GPU: the kernel
#                                    #   benches (one-shot; two-shot by grid), then B3 and B1 at
#                                    #   -tp <GPUs> with and without --disable-custom-all-reduce
# `run` takes about 8-10 minutes (the device call limit is 10): if it runs out, call `tests` and
# `bench` separately. On 4 GPUs, `tests` also runs the TP=4 cases.
#
# NCCL is loaded at run time (dlopen of libnccl.so.2): the script finds it in the CUDA toolkit or
# in the Python nvidia-nccl wheel there and puts its folder on LD_LIBRARY_PATH. NVLink multicast
# stays off (NCCL_NVLS_ENABLE=0 unless already set; folio sets it too).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-tp}
CARRY=$BUILD/carry
source scripts/gpu-carry.sh

stage() { carry_stage "$BUILD"; }

setup_env() {
  carry_unpack "$CARRY" || exit 1
  OUTDIR=${OUT:-/tmp/folio-gpu-tp}
  mkdir -p "$OUTDIR"
  local nccl_dir=""
  if [[ -e /usr/local/cuda/lib64/libnccl.so.2 ]]; then
    nccl_dir=/usr/local/cuda/lib64
  else
    nccl_dir=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
  fi
  echo "NCCL from: ${nccl_dir:-not found}"
  export LD_LIBRARY_PATH="${nccl_dir:+$nccl_dir:}${LD_LIBRARY_PATH:-}"
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv || true
  nvidia-smi topo -m 2>/dev/null | head -n 12 || true
  return 0
}

tests() {
  echo "== TP tests (plus the single-GPU executor tests they rely on)"
  # All GPU tests: the TP ones and the single-GPU ones (the executor code they share changed).
  timeout 540 "$CARRY/folio_cuda_tests" \
    --gtest_output="xml:$OUTDIR/tp_tests.xml" >"$OUTDIR/tp_tests.log" 2>&1
  echo "test binary exit $?"
  grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure|TP=|Expected|Which is|actual|skipped|\(([0-9]{4,}) ms\)' \
    "$OUTDIR/tp_tests.log" | head -n 80
  grep -q '^\[  PASSED  \]' "$OUTDIR/tp_tests.log" && ! grep -q '^\[  FAILED  \]' "$OUTDIR/tp_tests.log"
}

# bench_models CONFIG TAG TP...: B3 then B1 for each tensor-parallel size.
bench_models() {
  local config=$1 tag=$2
  shift 2
  local dummy=(--device cuda --load-format dummy --model configs --model-config "$config")
  for tp in "$@"; do
    echo "== $tag -tp $tp: B3 (batch 1, 128 in, 512 out)"
    # The bandwidth floor of a TP step: every GPU reads its shard at once (H200: 4270 GB/s each).
    timeout 300 "$CARRY/folio" bench latency "${dummy[@]}" -tp "$tp" --batch-size 1 --input-len 128 \
      --output-len 512 --num-iters-warmup 3 --num-iters 10 --bandwidth-gbps $((4270 * tp)) \
      --output-json "$OUTDIR/$tag-tp$tp-b3.json" >"$OUTDIR/$tag-tp$tp-b3.log" 2>&1
    echo "exit $?"; grep -vE '^\s*$' "$OUTDIR/$tag-tp$tp-b3.log" | grep -E 'tensor parallel|cuda:|TPOT|TTFT|floor|rror' | cut -c1-300 | head -n 12
    echo "== $tag -tp $tp: B1 (sharegpt_like_1000)"
    timeout 300 "$CARRY/folio" bench throughput "${dummy[@]}" -tp "$tp" \
      --workload bench/workloads/sharegpt_like_1000.jsonl \
      --output-json "$OUTDIR/$tag-tp$tp-b1.json" >"$OUTDIR/$tag-tp$tp-b1.log" 2>&1
    echo "exit $?"; grep -E 'tensor parallel|cuda:|req/s|tok/s|requests_per_second|rror' "$OUTDIR/$tag-tp$tp-b1.log" | cut -c1-300 | head -n 12
  done
}

# The peer all-reduce (backend/cuda/peer_all_reduce.h) against NCCL on this machine's GPUs.
allreduce() {
  local gpus dummy=(--device cuda --load-format dummy --model configs --model-config configs/llama-3-8b.json)
  gpus=$(nvidia-smi -L | wc -l)
  echo "== PeerAllReduceBench over $gpus GPUs"
  FOLIO_CUDA_BENCH=1 timeout 120 "$CARRY/folio_cuda_tests" --gtest_filter='PeerAllReduceBench.*' 2>&1 |
    grep -E 'all-reduce|SKIPPED|FAILED'
  for round in 1 2; do
    for flag in "" --disable-custom-all-reduce; do
      echo "== round $round -tp $gpus ${flag:-(peer all-reduce)}"
      timeout 120 "$CARRY/folio" bench latency "${dummy[@]}" -tp "$gpus" $flag --batch-size 1 \
        --input-len 128 --output-len 256 --num-iters-warmup 1 --num-iters 3 2>&1 | grep -E 'TPOT \(mean|all-reduces'
      timeout 200 "$CARRY/folio" bench throughput "${dummy[@]}" -tp "$gpus" $flag \
        --workload bench/workloads/sharegpt_like_1000.jsonl --max-num-seqs 1024 \
        --max-num-batched-tokens 16384 --output-json "$OUTDIR/allreduce-tp$gpus-r$round${flag:+-nccl}.json" 2>&1 |
        grep -E 'Throughput'
    done
  done
}

# SkinnyFlow under TP (on by default for a rank gate_up <= 128 MiB since session 40, after its
# consumer's partial-warp hang at k < 256 was fixed): repeats TpAsync tp2 (the 2-layer fixture,
# a rank's k of 128) with the default and with FOLIO_SKINNY_FLOW=0, then B3 -tp 2 on the 8B both
# ways. Each repeat has its own timeout, so a hang shows as one "exit 124".
flowcheck() {
  local reps=${REPS:-10}
  for flow in default 0; do
    echo "== TpAsync tp2 x $reps, FOLIO_SKINNY_FLOW=$flow"
    for ((i = 1; i <= reps; ++i)); do
      # One log per setting: at most 8 files come back from a device call.
      echo "== run $i" >>"$OUTDIR/flowcheck-$flow.log"
      flow_env "$flow" timeout 60 "$CARRY/folio_cuda_tests" \
        --gtest_filter='World/TpAsync*/tp2' >>"$OUTDIR/flowcheck-$flow.log" 2>&1
      echo "run $i exit $?"
    done
  done
  echo "== SkinnyFlow kernels and TpSkinnyFlow (the flow under TP against the PDL wait, bit for bit)"
  timeout 120 "$CARRY/folio_cuda_tests" --gtest_filter='SkinnyFlow*:TpSkinnyFlow*' 2>&1 |
    grep -E 'identical|OK|FAILED|Failure'
  local dummy=(--device cuda --load-format dummy --model configs --model-config configs/llama-3-8b.json)
  for flow in default 0; do
    echo "== B3 8B -tp 2, FOLIO_SKINNY_FLOW=$flow"
    flow_env "$flow" timeout 120 "$CARRY/folio" bench latency "${dummy[@]}" -tp 2 --batch-size 1 \
      --input-len 128 --output-len 256 --num-iters-warmup 1 --num-iters 3 --bandwidth-gbps 8540 2>&1 |
      grep -E 'TPOT \(|rror'
  done
}

# Runs "$@" with FOLIO_SKINNY_FLOW=$1, or with it unset for "default".
flow_env() {
  local flow=$1
  shift
  if [[ $flow == default ]]; then env -u FOLIO_SKINNY_FLOW "$@"; else FOLIO_SKINNY_FLOW=$flow "$@"; fi
}

case "${1:-}" in
  stage) stage ;;
  run) setup_env; set +e; tests; rc=$?; bench_models configs/llama-3-8b.json llama3-8b 1 2; exit $rc ;;
  tests) setup_env; set +e; tests ;;
  bench) setup_env; set +e; bench_models configs/llama-3-8b.json llama3-8b 1 2 ;;
  bench70) setup_env; set +e; bench_models configs/llama-3-70b.json llama3-70b 4 ;;
  bench70x2) setup_env; set +e; bench_models configs/llama-3-70b.json llama3-70b 2 ;;
  bench4) setup_env; set +e; bench_models configs/llama-3-8b.json llama3-8b 4 ;;
  allreduce) setup_env; set +e; allreduce ;;
  flowcheck) setup_env; set +e; flowcheck ;;
  *) echo "usage: $0 stage|run|tests|bench|bench70|bench70x2|bench4|allreduce|flowcheck" >&2; exit 2 ;;
esac
