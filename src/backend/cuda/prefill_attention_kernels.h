// Internal to prefill_attention.cu: the launchers of the prefill kernel variants, each in its own
// .cu file. The caller has validated `p` (geometry, block size) and the plan.
#pragma once

#include "backend/cuda/attention_params.h"
#include "backend/cuda/prefill_attention.h"
#include "base/status.h"

namespace folio::cuda::prefill_detail {

// v1: wmma, O accumulator in shared memory, 64 rows x 64 keys per step; head_dim 64 or 128.
Status launch_v1(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

// v2: mma.sync m16n8k16 flash-attention-2, O and the softmax state in registers, cp.async double
// buffered K/V tiles. rows_per_warp 16 or 32 (kV2 / kV2x2); any head_dim % 8 == 0 in [8, 256].
Status launch_v2(const PagedAttentionParams& p, const PrefillPlan& plan, int rows_per_warp,
                 void* stream);

// v3: Hopper wgmma (sm_90a) flash attention, 2 warpgroups x 64 rows, cp.async-filled
// 128-byte-swizzled K/V tiles. kPipelined (v3p) overlaps P·V of a tile with the next tile's
// softmax; kPipelinedQRegs (v3pq) also keeps Q in registers. head_dim 64 or 128; other head
// dims run on launch_v2 (32 rows per warp).
enum class V3Variant { kPlain, kPipelined, kPipelinedQRegs };
Status launch_v3(const PagedAttentionParams& p, const PrefillPlan& plan, V3Variant variant,
                 void* stream);

// v3n128: v3 with key tiles of 128 (S by wgmma m64n128k16) at head_dim 128; head_dim 64 runs as
// v3, the others as v2x2.
Status launch_v3n128(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

// v3pw: v3n128 with a producer warp filling a 3-stage K/V ring guarded by mbarriers (no block
// barrier per tile) at head_dim 128; other head dims run as launch_v3n128 runs them.
Status launch_v3pw(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

// v3pwpp: v3pw with the two consumer warpgroups taking turns issuing their GEMMs (FA3's
// ping-pong); other head dims as launch_v3n128.
Status launch_v3pwpp(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

// v3tma: v3pw with the ring filled by TMA copies of whole pages (tensor maps over the K/V cache)
// at head_dim 128 and power-of-two block sizes 8..128; the rest runs as launch_v3 (kPlain).
Status launch_v3tma(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

// v3tmap: v3tma with each consumer warpgroup's S(t) and P(t-1)·V(t-1) in flight during its
// softmax (a producer warpgroup, registers reallocated by setmaxnreg); the same fallback.
Status launch_v3tmap(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

// v3tmapp: v3tma with v3pwpp's ping-pong of the two consumer warpgroups, in v3tmap's shell (a
// producer warpgroup, registers reallocated by setmaxnreg); the same fallback.
Status launch_v3tmapp(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

// v3tmaq: v3tma with each item's Q fetched by the producer warp (TMA, a tensor map over q) as
// soon as the consumers' last S of the previous item has read the old one, instead of by the
// consumers at the item's start. Group sizes that do not divide 64 run as v3tma.
Status launch_v3tmaq(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream);

}  // namespace folio::cuda::prefill_detail
