// Measuring only (the K1 bench, tests/cuda/decode_read_probe_test.cc): how fast any kernel can read
// what decode kernel tc reads. The probe reads the same K and V rows through the same block tables,
// each warp walking every 4th 16-token chunk as tc's warps do, with `depth` chunks in flight per
// warp, and does nothing with the bytes but fold them (XOR) into one word per warp. Its rate is
// tc's ceiling for this cache layout on this GPU: beside the plain copy's it says how much of tc's
// gap is the access pattern's and how much is tc's own (arithmetic, block turns, epilogue).
//
// Three ways to hold the chunks in flight (ReadProbeStaging), tc's three forms: register loads,
// the cp.async ring and the bulk-row ring (decode_attention_tc_stages.cuh), each with tc's own
// copies and reads back into its registers.
#pragma once

#include <cstdint>

#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda {

inline constexpr int kReadProbeWarps = 4;

enum class ReadProbeStaging {
  // tc's register form: each lane's 16-byte loads (__ldg) into registers, `depth` buffers
  // (tc: 2 over a 16-bit cache, 1 over fp8). depth 1..3.
  kRegisters,
  // tc's ring form: the same 16-byte pieces by cp.async.cg into shared memory, [stage][load][lane]
  // per warp, `depth` stages in flight (tc's ring of R stages keeps R - 1). depth 1..6.
  kCpAsync,
  // tc's bulk form: whole rows by bulk copy (cp.async.bulk, sm_90): lane L copies the K row
  // (L < 16) or the V row (L >= 16) of token L % 16 of the chunk, 256 bytes (16-bit) or 128
  // (fp8), into row L of its warp's stage, completing on the stage's mbarrier. depth 1..6.
  kBulkRows,
};

// The largest depth `staging` takes.
constexpr int read_probe_max_depth(ReadProbeStaging staging) {
  return staging == ReadProbeStaging::kRegisters ? 3 : 6;
}

// Reads the K/V rows of every sequence of `p` (one block per sequence and KV head, the whole
// context, head_dim 128, a 16-bit or an fp8 cache per p.kv_dtype) and writes the XOR of each
// warp's 32-bit words to sink[(seq * num_kv_heads + kv_head) * kReadProbeWarps + warp].
// blocks_per_sm > 0 pads each block's shared memory so that at most that many blocks share an SM
// (the staged forms' own shared memory may allow fewer); 0 lets registers and staging decide. The
// padding takes nearly all of the SM's 256 KiB of L1 + shared memory, which leaves the loads
// ~30 KiB of L1: on the H200 that alone cost the register form 10-20% at the same residency
// (NOTES.md, session 30), so padded figures are not tc's residency. resident (optional) receives
// the blocks per SM the launch allows. kBulkRows needs sm_90.
Status decode_read_probe(const PagedAttentionParams& p, ReadProbeStaging staging, int depth,
                         int blocks_per_sm, uint32_t* sink, void* stream, int* resident = nullptr);

}  // namespace folio::cuda
