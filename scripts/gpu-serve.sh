#!/usr/bin/env bash
# B4 (online serving) in one device call: `folio serve` on the dummy Llama-3-8B and `folio bench
# serve` on the same machine, Poisson arrivals at several rates, then all at once (`inf`) against a
# fresh server per setting.
#
#   here:   scripts/gpu-executor.sh stage
#   device: run, carry ["build-cudaexec/carry"], command: scripts/gpu-serve.sh
#   local smoke run (no GPU, no carry): FOLIO=build/src/tools/folio MODEL_ARGS='--model-config
#     tests/data/models/llama_hd128/config.json --load-format dummy' VOCAB=500 RATES='20:20'
#     INF_SETTINGS='-' INF_PROMPTS=20 scripts/gpu-serve.sh
#
# Every run draws its prompts with its own --seed: one server driven at several rates with one
# seed would serve the same prompts again, and its prefix cache would answer their prefill (on an
# H200 the `inf` run read 74 req/s after four rates against 55 on a fresh server).
#   RATES         "rate:prompts ..." on one server (default: 8:480 16:1000 32:1000 48:1000)
#   INF_SETTINGS  server flags for the `inf` runs, one fresh server each; "-" = the defaults
#                 (default: "- --scheduling-policy=lof"; several flags joined by ',', e.g.
#                 --max-num-seqs=1024,--max-num-batched-tokens=16384; "none": no inf run)
#   SERVE_FLAGS   extra flags of the rate runs' server; MODEL_ARGS, VOCAB (prompt ids below it)
#   LOAD_ARGS     what bench serve sends (default: --workload bench/workloads/sharegpt_like_1000.jsonl;
#                 e.g. "--input-len 4000 --output-len 256" for long prompts)
# $OUT gets serve.log (this output, with each server's warnings and errors) and the JSONs,
# serve-rate<R>.json and serve-inf-<k>.json: at most 8 files come back from a device call.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-carry.sh
folio_start serve || exit 1
read -r -a model <<<"${MODEL_ARGS:---model-config configs/llama-3-8b.json --load-format dummy --device cuda}"
port=${PORT:-8000}
seed=0
spid=

logs=$(mktemp -d)
# Starts `folio serve` with the model and "$@", waits for /health; its log goes to $logs/$name.
start_server() {
  name=$1
  shift
  "$FOLIO" serve "${model[@]}" --port "$port" "$@" >"$logs/$name" 2>&1 &
  spid=$!
  for _ in $(seq 360); do
    if curl -sf "localhost:$port/health" >/dev/null; then
      sed -n 's/.*\] scheduler: /server scheduler: /p' "$logs/$name"  # the step budget and seats it uses
      return 0
    fi
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.5
  done
  echo "server did not come up ($*)"
  tail -n 20 "$logs/$name"
  return 1
}

stop_server() {
  kill -INT "$spid" && wait "$spid"
  echo "server exit $?"
  grep -E 'WARN|ERROR' "$logs/$name" | head -n 10
}

# One bench serve run at rate $1 with $2 prompts, JSON to $out/$3.json, a seed of its own.
bench() {
  seed=$((seed + 1))
  timeout 300 "$FOLIO" bench serve --base-url "http://127.0.0.1:$port" --seed "$seed" \
    "${load[@]}" --num-prompts "$2" --request-rate "$1" \
    --vocab-size "${VOCAB:-128256}" --output-json "$out/$3.json" >"$logs/$3.txt" 2>&1
  echo "== rate $1, $2 prompts, seed $seed: exit $?"
  grep -E 'Successful|Failed|duration|throughput|ttft|tpot|itl|e2el|Prefix|warning|rror' "$logs/$3.txt"
}

read -r -a load <<<"${LOAD_ARGS:---workload bench/workloads/sharegpt_like_1000.jsonl}"
read -r -a serve_flags <<<"${SERVE_FLAGS:-}"
if start_server server-rates.log "${serve_flags[@]}"; then
  for spec in ${RATES:-8:480 16:1000 32:1000 48:1000}; do
    bench "${spec%%:*}" "${spec#*:}" "serve-rate${spec%%:*}"
  done
  stop_server
fi

k=0
for setting in ${INF_SETTINGS:-- --scheduling-policy=lof}; do
  [[ $setting == none ]] && break
  k=$((k + 1))
  flags=()
  [[ $setting != - ]] && read -r -a flags <<<"${setting//,/ }"
  echo "== inf against a fresh server [${flags[*]}]"
  start_server "server-inf-$k.log" "${flags[@]}" || continue
  bench inf "${INF_PROMPTS:-1000}" "serve-inf-$k"
  stop_server
done
