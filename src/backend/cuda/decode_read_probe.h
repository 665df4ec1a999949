// Measuring only (the K1 bench, tests/cuda/decode_read_probe_test.cc): how fast any kernel can read
// what decode kernel tc reads. The probe reads the same K and V rows through the same block tables,
// with the same 16-byte loads per lane, each warp walking every 4th 16-token chunk as tc's warps
// do, with `depth` chunks in flight per warp (tc: 2 over a 16-bit cache, 1 over fp8), and does
// nothing with the bytes but fold them (XOR) into one word per warp. Its rate is tc's ceiling for
// this cache layout on this GPU: beside the plain copy's it says how much of tc's gap is the access
// pattern's and how much is tc's own (arithmetic, block turns, epilogue).
#pragma once

#include <cstdint>

#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda {

inline constexpr int kReadProbeWarps = 4;

// Reads the K/V rows of every sequence of `p` (one block per sequence and KV head, the whole
// context, head_dim 128, a 16-bit or an fp8 cache per p.kv_dtype) and writes the XOR of each
// warp's 32-bit words to sink[(seq * num_kv_heads + kv_head) * kReadProbeWarps + warp]. depth: 1,
// 2 or 3 chunks in flight per warp. blocks_per_sm > 0 pads each block's shared memory so that at
// most that many blocks share an SM; 0 lets the registers decide. The padding takes nearly all of
// the SM's 256 KiB of L1 + shared memory, which leaves the loads ~30 KiB of L1: on the H200 that
// alone cost the probe 10-20% at the same residency (NOTES.md, session 30), so padded figures are
// not tc's residency, only the unpadded ones compare. resident (optional) receives the blocks per
// SM the launch allows.
Status decode_read_probe(const PagedAttentionParams& p, int depth, int blocks_per_sm,
                         uint32_t* sink, void* stream, int* resident = nullptr);

}  // namespace folio::cuda
