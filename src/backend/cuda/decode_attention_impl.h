// Internal to decode_attention: the launchers of the decode kernels (decode_attention_v1.cu,
// decode_attention_v2.cu, decode_attention_v2_fp8.cu for an fp8 cache, decode_attention_tc.cu),
// called by
// decode_attention.cu once the params and plan are checked.
#pragma once

#include "backend/cuda/decode_attention.h"

namespace folio::cuda::detail {

// Partials of split sequences in the workspace, each [num_seqs, num_heads, max_partitions]
// (partial_out with a trailing head_dim): the unnormalised output, the running max and the sum
// of exponentials of one partition. v1 keeps the max in natural-log units, v2 in log2 units.
struct DecodeWorkspace {
  float* out = nullptr;
  float* m = nullptr;
  float* l = nullptr;
};

// Groups of q heads per block sharing one KV head: the smallest of 1, 2, 4, 8 that holds the
// group, 8 for larger groups (then several chunks of 8).
inline int decode_head_chunk(int group) {
  return group <= 1 ? 1 : group <= 2 ? 2 : group <= 4 ? 4 : 8;
}

Status launch_decode_v1(const PagedAttentionParams& p, const DecodePlan& plan,
                        const DecodeWorkspace& ws, void* stream);
Status launch_decode_v2(const PagedAttentionParams& p, const DecodePlan& plan,
                        const DecodeWorkspace& ws, void* stream);
// v2 over an fp8 e4m3 cache (p.kv_dtype kFp8E4m3), decode_attention_v2_fp8.cu.
Status launch_decode_v2_fp8(const PagedAttentionParams& p, const DecodePlan& plan,
                            const DecodeWorkspace& ws, void* stream);
// The tensor-core kernel over either cache (decode_attention_tc.cu), head_dim 128.
Status launch_decode_tc(const PagedAttentionParams& p, const DecodePlan& plan,
                        const DecodeWorkspace& ws, void* stream);
// FOLIO_TC_RING=0 (tc's register form on every launch) is set: the planner then plans tc's
// unsplit grids for the registers' residency rather than the default form's.
bool tc_registers_forced();
// FOLIO_TC_FRAG_GRID=0 (a measuring switch, session 31's choices): the fragment ring keeps 2
// stages on every grid of pages of 16+ tokens, splits keep the registers, the planner wave-splits
// as for the registers, and token mode picks v2 past one register wave. Unlike session 31, pages
// of 2-15 tokens then take the registers (the policy cannot place them without the SM count).
// Read once.
bool tc_frag_grid_enabled();
// Measuring builds (FOLIO_KERNEL_TRACE, kernel_trace.cuh): the tc kernels' per-block stamps go
// to `words` (kTcTraceWords per block, blocks numbered x fastest; nullptr: none) from the next
// launch on. False, and nothing installed, in other builds.
constexpr int kTcTraceWords = 16;
bool set_tc_trace(unsigned long long* words);

}  // namespace folio::cuda::detail
