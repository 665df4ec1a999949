#!/usr/bin/env bash
# The README's run command: folio generate, then folio serve, on the bundled tiny model (random weights in the
# Llama 3 shape with the real Llama 3 tokenizer, so its text is deterministic gibberish).
set -euo pipefail
FOLIO=${1:-build/src/tools/folio}
cd "$(dirname "$0")/.."
echo "== folio generate --prompt (greedy, 16 tokens)"
"$FOLIO" generate --model models/tiny_llama3 --prompt "The capital of France is" --max-tokens 16
echo "== folio generate --input (a JSONL batch, all in flight at once)"
printf '%s\n' \
  '{"prompt": "Hello, my name is", "max_tokens": 8, "temperature": 0, "logprobs": 2}' \
  '{"prompt_token_ids": [791, 6864, 315, 9822, 374], "max_tokens": 8, "temperature": 0.8, "seed": 7, "n": 2}' \
  '{"prompt_token_ids": [1, 2, 999999], "max_tokens": 4}' |
  "$FOLIO" generate --model models/tiny_llama3 --stats-json /tmp/folio-demo-stats.json
echo "== run statistics"
cat /tmp/folio-demo-stats.json
echo
echo "== folio serve (the bundled model, OpenAI-compatible API on http://127.0.0.1:8000; Ctrl-C stops it)"
echo "   try: curl -s localhost:8000/v1/completions -H 'content-type: application/json' \\"
echo "          -d '{\"prompt\": \"Hello, my name is\", \"max_tokens\": 16, \"temperature\": 0}'"
echo "        curl -sN localhost:8000/v1/chat/completions -H 'content-type: application/json' \\"
echo "          -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Say hello.\"}], \"stream\": true}'"
[[ "${FOLIO_DEMO_NO_SERVE:-0}" == 1 ]] && exit 0
exec "$FOLIO" serve --port "${PORT:-8000}"
