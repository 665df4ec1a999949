#!/usr/bin/env bash
# Checks the v2 prefill kernel's logic on the CPU (no GPU): rewrites the four launch-only lines of
# src/backend/cuda/prefill_attention_v2.cu for the host SIMT emulator (tests/cuda/emu), compiles
# it with g++ against an emulated mma_ptx.cuh, and runs it against a double-precision reference.
# About half a minute. Needs a configured build folder for libfolio_base.a (BUILD, default
# build-cuda) and the CUDA headers.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cuda}
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=src/backend/cuda/prefill_attention_v2.cu
sed -e 's|extern __shared__ __align__(128) unsigned char smem_raw\[\];|unsigned char* smem_raw = emu::smem();|' \
  -e 's|kernel<<<grid, kThreads, bytes, as_stream(stream)>>>(a);|(void)stream; emu::launch(kernel, grid, kThreads, bytes, a);|' \
  -e 's|FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void\*>(kernel), bytes));||' \
  -e 's|return launch_status("prefill_v2_kernel");|return Status();|' \
  "$src" >"$work/prefill_attention_v2_emu.inc"
if [[ $(grep -c 'emu::\|return Status();$' "$work/prefill_attention_v2_emu.inc") -lt 3 ]] ||
  grep -q 'opt_in_dynamic_smem(' "$work/prefill_attention_v2_emu.inc"; then
  echo "emu-prefill-v2: the launch lines of $src changed; update this script" >&2
  exit 2
fi
cmake --build "$BUILD" --target folio_base >/dev/null
g++ -std=c++20 -O1 -w -I tests/cuda/emu -I tests/cuda/emu/shim -I src -I "$CUDA_INC" -I "$work" \
  tests/cuda/emu/prefill_v2_emu.cc "$BUILD/src/base/libfolio_base.a" -lpthread -o "$work/emu"
"$work/emu"
