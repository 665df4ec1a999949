#!/usr/bin/env bash
# Checks the cascade wide-item kernel's device code (src/backend/cuda/cascade_attention_wg.cuh)
# on the CPU: the host SIMT emulator (tests/cuda/emu) runs it with emulated wgmma, TMA and
# mbarriers over real cascade plans, against a double-precision reference, under both
# copy-landing policies and the race check (tests/cuda/emu/cascade_wg_emu.cc says what each case
# covers). What it cannot check: PTX syntax, the GPU memory model beyond that, timing. Needs a
# configured build folder for libfolio_base.a (BUILD, default build-cuda) and the CUDA headers.
# A minute or two; one argument N runs only case N.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cuda}
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --build "$BUILD" --target folio_base >/dev/null
g++ -std=c++20 -O1 -w -I tests/cuda/emu -I tests/cuda/emu/shim -I src -I "$CUDA_INC" \
  tests/cuda/emu/cascade_wg_emu.cc src/backend/cascade_plan.cc \
  src/backend/cascade_packs.cc "$BUILD/src/base/libfolio_base.a" \
  -lpthread -o "$work/emu"
"$work/emu" "$@"
