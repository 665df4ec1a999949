#!/usr/bin/env bash
# Checks the logic of rms_norm.cu, rope.cu and qkv_post.cu on the CPU (no GPU): rewrites their
# launch lines and shared-memory declarations for the host SIMT emulator (tests/cuda/emu), and runs
# tests/cuda/emu/small_ops_emu.cc: qkv_post against the emulated chain (host split, rms_norm's warp
# kernel, rope, host cache write) bit for bit, and rms_norm / rope against a double reference.
# Device math (rsqrtf, sincosf) is the host's here: this checks indexing, lane layouts and
# summation order, not the GPU's rounding. Needs a configured build folder (BUILD, default
# build-cuda) for libfolio_base.a and the CUDA headers.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cuda}
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for op in rms_norm rope qkv_post; do
  sed -E -e 's/extern __shared__ float ([a-z_]+)\[\];/float* \1 = reinterpret_cast<float*>(emu::smem());/' \
    -e 's/__shared__ float partial\[32\];/float* partial = reinterpret_cast<float*>(emu::smem());/' \
    -e 's/([A-Za-z_][A-Za-z0-9_]*(<[^<>]*>)?)<<<([^>]*)>>>\(/emu::launch_n(\1, \3, /' \
    -e 's/launch_status\("[a-z_]+"\)/Status()/' \
    "src/backend/cuda/$op.cu" >"$work/${op}_emu.inc"
  if grep -q '<<<\|extern __shared__\|launch_status' "$work/${op}_emu.inc"; then
    echo "emu-small-ops: $op.cu has a launch or shared declaration this script does not rewrite" >&2
    exit 2
  fi
done
cmake --build "$BUILD" --target folio_base >/dev/null
flags=(-std=c++20 -O1 -w -I tests/cuda/emu -I tests/cuda/emu/shim -I src -I "$CUDA_INC" -I "$work")
objs=()
for op in rms_norm rope qkv_post; do  # one translation unit each: their anonymous namespaces clash
  printf '#include "small_ops_emu_shim.h"\n#include "%s_emu.inc"\n' "$op" >"$work/$op.cc"
  g++ "${flags[@]}" -c "$work/$op.cc" -o "$work/$op.o"
  objs+=("$work/$op.o")
done
g++ "${flags[@]}" -c tests/cuda/emu/small_ops_emu.cc -o "$work/main.o"
g++ "$work/main.o" "${objs[@]}" "$BUILD/src/base/libfolio_base.a" -lpthread -o "$work/emu"
"$work/emu"
