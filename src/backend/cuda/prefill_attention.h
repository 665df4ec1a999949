// Causal paged attention for prefill: any number of query tokens per sequence, variable across
// the batch, attending to the sequence's cached prefix (prefix caching, chunked prefill) and to
// each other, all read through the block table. Works for q_len 1 too, so a mixed step
// (prefills + decodes) can run in this one launch.
//
// FlashAttention-style: a thread block takes one KV head and a tile of (token, q head) rows of
// one sequence, the GQA group's heads folded into the rows so each K/V tile is loaded once for
// all of them; it walks the keys in tiles of 64 through shared memory, computes Q·K^T and P·V
// on tensor cores (bf16/fp16 in, fp32 accumulate) and keeps an online softmax in fp32.
//
// Kernels (PrefillKernel; the plan picks
// FOLIO_PREFILL_KERNEL=v1|v2|v2x2|v3|v3p|v3pq|v3n128|v3pw|v3pwpp|v3tma|v3tmap|v3tmapp|v3tmaq,
// by default v3tmaq):
//   v1:   wmma, O in shared memory, synchronous loads; head_dim 64 and 128 only.
//   v2:   mma.sync FlashAttention-2, O and softmax state in registers, cp.async double-buffered
//         K/V, causal tile skipping; 16 rows per warp (64 per block, Q in registers, 3 blocks
//         per SM at head_dim 128); head_dim % 8 == 0 in [8, 256].
//   v2x2: v2 with 32 rows per warp (128 per block: per FLOP, half the K/V bytes from L2 and
//         5/8 of the shared-memory reads, Q re-read from shared memory) for head_dim <= 128;
//         larger head_dim runs as v2.
//   v3:   Hopper wgmma (sm_90a): 2 warpgroups x 64 rows, S and O as wgmma accumulators, P as
//         the register A operand, 128-byte-swizzled Q/K/V tiles in shared memory, cp.async
//         double-buffered K/V; head_dim 64 and 128 (others run as v2x2). The default where
//         v3tma's ring does not fit (2026-11-22 on the H100: 210 TFLOP/s at 8x1024, 308 at
//         1x8192; v2x2 166 / 239; v3p and v3pq in between).
//   v3p:  v3 with P·V of key tile t - 1 in flight during the softmax of tile t.
//   v3pq: v3p with Q in registers (S = Q·K^T reads only K from shared memory).
//   v3n128: v3 with key tiles of 128 (S by wgmma m64n128k16: half the barriers and softmax
//         passes per key) at head_dim 128; head_dim 64 runs as v3, others as v2x2 (+3% over
//         v3 on long rows, -7% on short ones).
//   v3pw: v3n128 with a producer warp (cp.async gather into a 3-stage ring guarded by full /
//         empty mbarriers) instead of a block barrier per tile, so the two consumer warpgroups
//         no longer run in lockstep; head_dim 128 (others as v3n128). Slow (123 TFLOP/s at
//         8x1024): one warp cannot issue the whole gather.
//   v3pwpp: v3pw with FA3's ping-pong: the two warpgroups take turns issuing their GEMMs (named
//         barriers), so one's softmax overlaps the other's GEMMs. As slow as v3pw.
//   v3tma: v3pw with the ring filled by TMA (one bulk tensor copy
//         per page and column half, the K/V cache described by tensor maps) instead of the
//         producer warp's cp.async gather, persistent (one block per SM, work items dealt from
//         a counter); head_dim 128 with block sizes 8..128 (powers of two), the rest as v3.
//   v3tmap: v3tma with each warpgroup's S(t) and P(t-1)·V(t-1) in flight during its softmax
//         (FA3's intra-warpgroup overlap; a producer warpgroup gives its registers to the
//         consumers by setmaxnreg).
//   v3tmapp: v3tma with v3pwpp's ping-pong of the two warpgroups (turns on named barriers), in
//         v3tmap's shell (producer warpgroup, setmaxnreg).
//   v3tmaq (the default): v3tma with each item's Q fetched by the producer warp by TMA and
//         moved by the consumers into registers at the item's start (the Q tile is free for
//         the next item's copy at once; a producer warpgroup gives its registers to the
//         consumers by setmaxnreg); groups dividing 64 (others run as v3tma).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda {

enum class PrefillKernel {
  kV1, kV2, kV2x2, kV3, kV3p, kV3pq, kV3n128, kV3pw, kV3pwpp, kV3tma, kV3tmap, kV3tmapp, kV3tmaq
};

const char* prefill_kernel_name(PrefillKernel k);

// FOLIO_PREFILL_KERNEL (read once): v1, v2, v2x2, v3, v3p, v3pq, v3n128, v3pw, v3pwpp, v3tma,
// v3tmap, v3tmapp or v3tmaq; nullopt when unset or unknown (the plan then takes v3tmaq).
std::optional<PrefillKernel> prefill_kernel_override();

struct PrefillPlan {
  int num_seqs = 0;
  int max_rows = 0;       // the largest q_len * group (rows of one KV head) of the batch
  int max_row_tiles = 0;  // ceil(max_rows / 64): v1's grid extent
  // Sum over sequences of ceil(rows / 128): the v3-family grid's (row tile, sequence) pairs that
  // have rows, per KV head, of ceil(max_rows / 128) x num_seqs. Few when decode rows share the
  // step with a long prefill; v3tma then launches one block per pair instead of walking them.
  int64_t live_row_tiles_128 = 0;
  int num_tokens = 0;  // query_start[num_seqs]: the rows of q (v3tmaq's tensor map over them)
  PrefillKernel kernel = PrefillKernel::kV2x2;  // may be overridden after planning
};

// query_start: the step's host copy (ForwardBatch::query_start, [num_seqs + 1]).
Result<PrefillPlan> plan_prefill_attention(std::span<const int32_t> query_start, int num_heads,
                                           int num_kv_heads);

// A sliding window (p.sliding_window > 0) runs on kernel v2x2 whatever plan.kernel says (v2 where
// it says kV2): only v2 masks the window's lower edge.
Status prefill_attention(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

}  // namespace folio::cuda
