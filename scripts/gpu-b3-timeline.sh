#!/usr/bin/env bash
# Kernel times of one B3 batch-1 decode step on the GPU machine (no Nsight Systems there):
# Nsight Compute replays every kernel of a short `folio bench latency` run, graph nodes included,
# and bench/b3_timeline.py prints, per kernel name, the count and summed time in one decode step.
# Set against the step's TPOT, the isolated sum says how much of the step is launch, completion
# and dependency latency between kernels (what fusing or a persistent kernel could remove).
#
#   scripts/gpu-executor.sh stage   # here
#   device run, carry ["build-cudaexec/carry"], command:
#     scripts/gpu-b3-timeline.sh [VAR=value ...]   # settings applied to both runs
#   BATCH=256 (env) times a decode step of that many sequences instead of B3's one.
#
# Logs under $OUT: ncu.csv (every kernel), timeline.txt, latency.json (the unprofiled TPOT).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-carry.sh
carry_start timeline || exit 1
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
b3=(bench latency --device cuda --load-format dummy --model-config configs/llama-3-8b.json
  --batch-size "${BATCH:-1}" --input-len 128)
env "$@" timeout 120 "$CARRY/folio" "${b3[@]}" --output-len 256 --num-iters-warmup 1 --num-iters 3 \
  --output-json "$out/latency.json" 2>&1 | grep -vE '^\[' | tail -n 3
# Warm-up off and 4 output tokens: the last full step between two sampling kernels is a decode
# step; caches are left as the previous kernel left them, clocks unlocked, as in the real run.
env "$@" timeout 400 "$ncu" --csv --metrics gpu__time_duration.sum --graph-profiling node \
  --cache-control none --clock-control none "$CARRY/folio" "${b3[@]}" --output-len 4 \
  --num-iters-warmup 0 --num-iters 1 >"$out/ncu.csv" 2>"$out/ncu.err"
echo "ncu exit $?; $(grep -c gpu__time_duration "$out/ncu.csv") kernels"
python3 bench/b3_timeline.py "$out/ncu.csv" | tee "$out/timeline.txt"
