#!/usr/bin/env bash
# Checks the v3 (wgmma) prefill kernels' logic on the CPU (no GPU): rewrites the launch-only lines
# of src/backend/cuda/prefill_attention_{v3,v3n128,v3pw,v3pwpp,v3tma,v3tmap,v3tmapp,v3tmaq}.cu (and of v2,
# their fallback for other head dims) for the host SIMT emulator (tests/cuda/emu), compiles them
# with g++ against emulated mma_ptx.cuh and wgmma_ptx.cuh (the latter decodes the shared-memory
# matrix descriptors from the PTX ISA's layout definitions), and runs them against a
# double-precision reference, with NaN in the pool's slots past each sequence's end. What it checks:
# the swizzled tile addressing, descriptor fields, fragment layouts, masking, the online softmax,
# the paged K/V gather; for v3pw, v3pwpp, v3tma, v3tmap and v3tmapp also the mbarrier protocol
# (tests/cuda/emu/emu_async.h: phases, parities and transaction bytes, cp.async and TMA copies
# landing at the earliest and the latest legal time, deadlocks, operands overwritten under an
# in-flight wgmma, the consumer-side proxy fence), and for the TMA kernels the tensor-map boxes, the
# zero fill outside the tensor, the swizzle by address and persistent blocks walking several work
# items (FOLIO_EMU_SMS blocks, default 2). What it cannot: PTX syntax, the memory model beyond that,
# timing.
# Needs a configured build folder for libfolio_base.a (BUILD, default build-cuda) and the CUDA
# headers. A few minutes (one argument N runs only case N of each variant).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cuda}
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for v in v2 v3 v3n128 v3pw v3pwpp v3tma v3tmap v3tmapp v3tmaq; do
  src=src/backend/cuda/prefill_attention_$v.cu
  sed -e 's|extern __shared__ __align__(128) unsigned char smem_raw\[\];|unsigned char* smem_raw = emu::smem();|' \
    -e 's|kernel<<<grid, kThreads, bytes, as_stream(stream)>>>(a);|(void)stream; emu::launch(kernel, grid, kThreads, bytes, a);|' \
    -e 's|FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void\*>(kernel), bytes));||' \
    -e "s|return launch_status(\"prefill_${v}_kernel\");|return Status();|" \
    "$src" >"$work/prefill_attention_${v}_emu.inc"
  # v2 launches itself (3 rewritten lines); the v3 family launches through
  # prefill_attention_v3_launch.cuh, whose host version is in tests/cuda/emu/shim (1 line: smem).
  want=1
  [[ $v == v2 ]] && want=3
  if [[ $(grep -c 'emu::\|return Status();$' "$work/prefill_attention_${v}_emu.inc") -lt $want ]] ||
    grep -q 'opt_in_dynamic_smem(' "$work/prefill_attention_${v}_emu.inc"; then
    echo "emu-prefill-v3: the launch lines of $src changed; update this script" >&2
    exit 2
  fi
done
cmake --build "$BUILD" --target folio_base >/dev/null
g++ -std=c++20 -O1 -w -I tests/cuda/emu -I tests/cuda/emu/shim -I src -I "$CUDA_INC" -I "$work" \
  tests/cuda/emu/prefill_v3_emu.cc "$BUILD/src/base/libfolio_base.a" -lpthread -o "$work/emu"
"$work/emu" "$@"
