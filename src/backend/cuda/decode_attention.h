// Paged attention for decode (one query token per sequence), flash-decoding style.
//
// Each thread block takes one KV head, up to 8 of the q heads that share it (GQA/MQA: the KV rows
// are read once for all of them), and one partition of the context: it writes either the final
// output (a single partition) or a partial (max, sum, unnormalised output) that a second kernel
// merges. The split is planned once per step on the host and reused by every layer.
//
// Two kernels (DecodeKernel): v2 (the default) streams the partition's K and V rows once through
// a cp.async pipeline with an online softmax, any head_dim that is a multiple of 8 up to 256; v1
// (the first version, kept so one GPU run can compare them) scores K into shared memory and then
// reads V in a second pass, head_dim 64 and 128 only. FOLIO_DECODE_KERNEL=v1|v2 picks the
// default (v1 falls back to v2 for head dims it lacks).
//
// FP8 KV cache (p.kv_dtype kFp8E4m3): k_cache/v_cache hold e4m3 bytes in the same layout. v2 reads
// them as 8-byte chunks (8 elements, the 16-bit cache's lane mapping) and decodes them exactly to
// floats; q, out and the arithmetic are as for a 16-bit cache, so the plan is the same. v1 reads
// 16-bit rows only: an fp8 call runs v2 whatever the plan's kernel (a v1 plan's split and
// workspace suit v2 as well).
//
// CUDA graphs (plan_decode_attention_bounded): a plan made from a bound instead of the step's
// lengths gives a launch (grid, workspace layout, number of kernels) that depends only on
// (num_seqs, max_context_len, num_heads, num_kv_heads, head_dim, num_sms, kernel). Every kernel
// reads each sequence's context length, query row and block table from device memory, blocks
// whose partition starts past the sequence's length return at once, and the merge kernel merges
// only the partitions a sequence has (none when it has one). So a graph captured around
// decode_attention can be replayed with new context lengths and block tables written into the
// same device arrays, as long as num_seqs is the same and every context length is in
// [0, max_context_len]. Nothing in decode_attention reads a host-side context length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/cuda/attention_params.h"
#include "base/status.h"

namespace folio::cuda {

enum class DecodeKernel {
  kDefault,  // FOLIO_DECODE_KERNEL (v1 | v2 | tc) when set, else tc at head_dim 128 (but see
             // DecodeCacheFormat), else v2
  kV1,       // two passes over the partition; head_dim 64 or 128
  kV2,       // one cp.async-pipelined pass with an online softmax; any supported head_dim
  kTc,       // v2's pass with q·K^T and P·V on tensor cores; head_dim 128, 16- or 8-bit cache
};

// The cache a plan is for, and the GPU's DRAM rate, where the default kernel depends on them.
// Token mode (block_size 1) on a 16-bit cache: an unsplit plan takes v2, not tc. Each token's
// slot is a lookup of its own there, which v2's lanes spread better than tc's chunk-ahead
// hand-out; on the H100 (NOTES.md, K1 session 15) tc reached 84% of the copy rate at b32 x 2048
// and 89% at b128 x 2048 against v2's 87% and 94%. Split plans (few sequences, issue-bound) keep
// tc, which is faster there (b1 x 8192: 23.1 against 25.8 us); on pages of 16 tokens and on fp8
// caches tc stays the default everywhere. On fast DRAM (fast_dram.h: the H200) an unsplit grid
// that fits one resident wave of tc's blocks keeps tc too: there (session 27) tc was 11% faster
// at b32 x 2048 (85.4 against 95.7 us, 256 blocks on 264 slots) and v2 faster from b48 (122.5
// against 138.8 us), once tc's grid needs a second, partial wave; since session 32 also grids
// where tc runs the fragment ring (decode_tc_ring.h's tc_frags_win: b48 x 2048 115.5 against
// v2's 117.9 us, b96 207.2 / 224.5, b128 280.1 / 281.2), leaving v2 the grids just past one
// wave of 3 blocks per SM (b64: 147.3 against 159.9).
struct DecodeCacheFormat {
  int block_size = 16;
  bool fp8 = false;
  double peak_memory_gbps = 0;  // DeviceInfo::peak_memory_gbps; 0 unknown (the H100's choices)
};

struct DecodePlan {
  DecodeKernel kernel = DecodeKernel::kV2;  // never kDefault in a plan
  int num_seqs = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int partition_size = 0;      // context tokens per thread block (a power of two)
  int max_partitions = 0;      // grid depth: ceil(max_context_len / partition_size), >= 1
  int max_context_len = 0;     // the longest context the plan covers
  size_t workspace_bytes = 0;  // device scratch decode_attention needs (0: no split)
  // v2 only, a tuning knob the bench compares: 16-byte vectors of a K/V row per lane. 2 uses two
  // where head_dim >= 128 and a block holds at most 4 q heads (fewer shuffles and exponentials
  // per byte, more registers), else one; 0 (the planner's choice) and 1 use one: on the H100
  // (2026-11-22) one vector was 2-5% faster on every K1 shape (bench/results/).
  int lane_vectors = 0;
  // v2 only, a tuning knob the bench compares: q heads per block (1, 2, 4 or 8). 0: the smallest
  // of those holding the GQA group (at most 8). Fewer heads per block than the group means more
  // blocks reading the same K/V rows, meant to fill the GPU at batches too small for a resident
  // wave. Measured on the H100 (2026-11-22, K1 b32 x 2048, group 4): 2 heads per block 105.2 us
  // and 1 head 146.5 us against 101.8 us for the whole group, so the planner keeps 0.
  int head_chunk = 0;
  // v2 and tc: each sequence splits its own context as finely as the grid allows (partitions of
  // the plan's size halved down to kMinRefinedPartition tokens while they still number at most
  // max_partitions), instead of every sequence using partition_size. Set by the planner (auto
  // partition size only) where even every sequence's max_partitions blocks fit one resident
  // wave, so the finer split only fills blocks that were launched idle: a CUDA-graph plan of a
  // few sequences is bounded by max_model_len, and a short context used 1 or 2 of its blocks.
  // FOLIO_DECODE_REFINE=0 turns it off.
  bool refine_partitions = false;
  // tc, CUDA-graph plans (bounded) only: the wave split (plan_decode_attention's, for a grid just
  // past whole resident waves) chosen per step. The planner sets it, with max_partitions 2, where
  // the bound's unsplit grid lies within 1.25 resident waves; each step then uploads its own
  // partition size (decode_step_partition, PagedAttentionParams::step_partition), 0 when the
  // step's lengths do not split. Such a step would pay the merge launch and blocks that return
  // at once (~1.5% of a step), so the executor captures a second graph per such bucket from
  // without_step_split(plan) and replays it on steps that do not split.
  bool step_split = false;
  // tc only, a knob the bench and tests compare: how a warp's next chunks of K/V wait. 0: in
  // registers (two buffers taking turns on a 16-bit cache); 2..4: a ring of that many stages in
  // shared memory (decode_attention_tc.cuh), filled as tc_ring_bulk says. -1 (the default)
  // picks: FOLIO_TC_RING (0, 2, 3 or 4) when set, else decode_tc_ring.h's default (the ring of
  // 2 for an fp8 cache in an unsplit plan below fast DRAM or in token mode, and of 2 or 3 by the
  // grid (tc_frag_ring_stages) for a 16-bit cache in an unsplit plan on fast DRAM where
  // tc_frags_win; else registers). On the H100 (NOTES.md) the
  // cp.async ring of 2 took an fp8 cache from 83 to 65 us at b32 x 2048 and 262 to 233 at b128
  // x 2048, and a 16-bit cache from 378 to 452.
  int tc_ring_stages = -1;
  // tc's ring forms only: how the stages fill. 0: cp.async, 16 bytes per lane per load; 1: one
  // bulk copy (cp.async.bulk, sm_90) per K or V row, completing on an mbarrier per stage, read
  // back as the register form's pieces; 2: the same rows read back as mma fragments by ldmatrix
  // (a 16-bit cache; an fp8 cache takes 1). -1 (the default) picks: FOLIO_TC_RING_BULK (0, 1 or
  // 2) when set, else decode_tc_ring.h's default (2 where its ring is a 16-bit cache's, else
  // 0). On the H200 the read probe (decode_read_probe.h) read tc's K1 pattern at 94-103% of the
  // copy by bulk rows, 66-74% by cp.async (NOTES.md, session 31).
  int tc_ring_bulk = -1;
};

// The smallest partition a refined plan gives a sequence: one 16-token step per warp of tc.
inline constexpr int kMinRefinedPartition = 64;

// context_lens: the step's host copy (ForwardBatch::context_lens). num_sms sizes the split so the
// grid fills the GPU. partition_size 0 picks it; a given one must be a power of two, at least 32
// and at most 512 (v1) or 16384 (v2) (tests use small ones to force splits).
Result<DecodePlan> plan_decode_attention(std::span<const int32_t> context_lens, int num_heads,
                                         int num_kv_heads, int head_dim, int num_sms,
                                         int partition_size = 0,
                                         DecodeKernel kernel = DecodeKernel::kDefault,
                                         DecodeCacheFormat cache = {});

// The CUDA-graph plan: sized for num_seqs sequences of up to max_context_len tokens each (for
// example max_model_len), whatever their lengths at run time; see the contract above. The split
// is the one plan_decode_attention would pick if every sequence had max_context_len tokens (less
// tc's wave split, which needs the real lengths), so a
// step whose real lengths are much shorter launches blocks that return at once (cheap, but a
// tighter bound, e.g. one graph per length bucket, gives a better split).
Result<DecodePlan> plan_decode_attention_bounded(int num_seqs, int max_context_len, int num_heads,
                                                 int num_kv_heads, int head_dim, int num_sms,
                                                 int partition_size = 0,
                                                 DecodeKernel kernel = DecodeKernel::kDefault,
                                                 DecodeCacheFormat cache = {});

// The step's partition size for a graph plan with step_split (`graph`, from
// plan_decode_attention_bounded): what plan_decode_attention picks over these lengths where it
// splits them into 2 to max_partitions partitions, else 0 (the graph plan's own size). 0 for any
// other plan.
int decode_step_partition(const DecodePlan& graph, std::span<const int32_t> context_lens,
                          int num_sms, DecodeCacheFormat cache = {});

// `graph` without DecodePlan::step_split: the plan plan_decode_attention_bounded gives with the
// wave split off (one partition, no workspace), for a graph step whose lengths do not split.
DecodePlan without_step_split(DecodePlan graph);

// Whether decode_attention under `plan` takes PagedAttentionParams::qkv_post (q and the new K/V
// raw from the qkv projection: qkv_post's split, bias, rope and cache write done by the attention
// blocks, bit for bit, one launch fewer per layer): kernel tc (head_dim 128) with at most 8 q
// heads per KV head (one block per KV head and partition). Models with a q/k norm keep qkv_post.
bool decode_fuses_qkv_post(const DecodePlan& plan);

// Every sequence of `p` has exactly one query token (query_start[s+1] - query_start[s] == 1); a
// mixed batch runs its prefill part through prefill_attention. The plan must cover this batch's
// context lengths (from them, or from a bound they respect): a sequence longer than the plan's
// max_context_len attends only to its first max_partitions * partition_size tokens (wrong, but
// never a read outside the workspace or the block table). `workspace` holds plan.workspace_bytes
// (16-byte aligned); q, k_cache, v_cache and out must be 16-byte aligned.
Status decode_attention(const PagedAttentionParams& p, const DecodePlan& plan, void* workspace,
                        void* stream);

}  // namespace folio::cuda
