#!/usr/bin/env bash
# The README's run command: folio's main job on the bundled tiny model (random weights in the
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
