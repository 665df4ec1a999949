// Decode attention: the split planner and the checked entry point; the kernels are in
// decode_attention_v1.cu and decode_attention_v2.cu (decode_attention_v2_fp8.cu: an fp8 cache).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/decode_attention.h"
#include "backend/cuda/decode_attention_impl.h"
#include "backend/cuda/decode_tc_ring.h"
#include "backend/cuda/fast_dram.h"

namespace folio::cuda {
namespace {

constexpr int kMinPartition = 32;
constexpr int kV1MaxPartition = 512;    // v1 keeps a partition's scores in shared memory
constexpr int kV2MaxPartition = 16384;  // v2 streams any length; this bounds the search
constexpr int kMinAutoPartition = 64;   // below this, block setup outweighs the tokens
constexpr int kV1BlocksPerSm = 2;       // v1: split until the grid has this many blocks per SM
constexpr int kV2BlocksPerSm = 3;       // v2: resident blocks per SM (registers: 3 or 4)
constexpr int kTcBlocksPerSm = kTcRegisterBlocksPerSm;  // tc's register form (launch bounds)
constexpr int kTcFp8BlocksPerSm = 3;    // tc over an fp8 cache (every form)
constexpr int kMinWaveSplit = 1024;     // tc's wave split keeps partitions at least this long

// Blocks per KV head of a decode grid: decode_head_chunk (and tc) cap a block at 8 q heads.
int head_chunks(int num_heads, int num_kv_heads) {
  return (num_heads / num_kv_heads + 7) / 8;
}

// tc's resident blocks on the GPU: its launch bounds' blocks per SM times the SMs.
int64_t tc_resident_blocks(int num_sms, bool fp8) {
  return int64_t{fp8 ? kTcFp8BlocksPerSm : kTcBlocksPerSm} * num_sms;
}

bool v1_supports(int head_dim) {
  return head_dim == 64 || head_dim == 128;
}

bool tc_supports(int head_dim) {
  return head_dim == 128;
}

// The kernel a plan runs; by_planner: neither the caller nor FOLIO_DECODE_KERNEL chose it, so
// the cache's format may still change it (plan()).
struct KernelChoice {
  DecodeKernel kernel;
  bool by_planner;
};

Result<KernelChoice> resolve_kernel(DecodeKernel kernel, int head_dim) {
  if (kernel == DecodeKernel::kV1 && !v1_supports(head_dim))
    return unimplemented("decode plan: kernel v1 supports head_dim 64 and 128, not " +
                         std::to_string(head_dim));
  if (kernel == DecodeKernel::kTc && !tc_supports(head_dim))
    return unimplemented("decode plan: kernel tc supports head_dim 128, not " +
                         std::to_string(head_dim));
  if (kernel != DecodeKernel::kDefault) return KernelChoice{kernel, false};
  const char* env = std::getenv("FOLIO_DECODE_KERNEL");
  const std::string v = env ? env : "";
  // The default: tc at head_dim 128 (on the H100 it is 1.0-1.1x v2 on a 16-bit cache, B1 +3%,
  // B3 -1%, and 1.3-1.4x on an fp8 cache; NOTES.md), v2 elsewhere.
  const DecodeKernel tc_or_v2 = tc_supports(head_dim) ? DecodeKernel::kTc : DecodeKernel::kV2;
  if (v.empty()) return KernelChoice{tc_or_v2, true};
  if (v == "v2") return KernelChoice{DecodeKernel::kV2, false};
  if (v == "v1")
    return KernelChoice{v1_supports(head_dim) ? DecodeKernel::kV1 : DecodeKernel::kV2, false};
  if (v == "tc") return KernelChoice{tc_or_v2, false};
  return invalid_argument("FOLIO_DECODE_KERNEL=" + v + " (expected v1, v2 or tc)");
}

bool wave_split_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FOLIO_TC_WAVE_SPLIT");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}

// tc's unsplit grid of `grid_blocks` runs the fragment ring (decode_tc_ring.h's tc_frags_win: a
// 16-bit cache in unsplit plans on fast DRAM, pages under 16 tokens on some grids only) unless
// FOLIO_TC_RING=0 forces the registers (or FOLIO_TC_FRAG_GRID=0 asks for session 31's plans, to
// compare). Its ring of 2 fits 3 blocks per SM and the ring of 3 takes the grids just past that
// (tc_frag_ring_stages), so the wave split below, which counts the registers' 2 per SM and moves
// split grids to the registers, does not apply: on the H200 (session 32, K1 queued, page 16) the
// unsplit fragment rings ran b40 / b48 x 2048 in 94.1 / 107.7 us against 113.7 / 122.9 split,
// b72 / b80 in 171.7 / 177.2 against 189.7 / 198.3, b112 262.7 / 273.8, b48 x 8192 397.7 /
// 427.4, b80 x 4096 348.0 / 367.6.
bool tc_unsplit_runs_frags(const DecodeCacheFormat& cache, int64_t grid_blocks, int num_sms) {
  return detail::tc_frag_grid_enabled() && !detail::tc_registers_forced() &&
         tc_frags_win(cache.fp8, 1, cache.block_size, cache.peak_memory_gbps, grid_blocks,
                      num_sms);
}

bool refine_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FOLIO_DECODE_REFINE");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}

// Plans kernel k (resolved) for `num_seqs` sequences whose lengths `len(i)` are known (`exact`)
// or bounded on the host, over `cache`.
template <typename LenFn>
Result<DecodePlan> plan_for(DecodeKernel k, int num_seqs, LenFn len, int num_heads,
                            int num_kv_heads, int head_dim, int num_sms, int partition_size,
                            bool exact, const DecodeCacheFormat& cache) {
  const bool fp8 = cache.fp8;
  const bool wave_split = k == DecodeKernel::kTc && wave_split_enabled() && partition_size == 0;
  const int max_p = k == DecodeKernel::kV1 ? kV1MaxPartition : kV2MaxPartition;
  if (partition_size != 0 && (partition_size < kMinPartition || partition_size > max_p ||
                              (partition_size & (partition_size - 1)) != 0))
    return invalid_argument("decode plan: partition_size " + std::to_string(partition_size) +
                            " is not a power of two in [32, " + std::to_string(max_p) + "]");
  if (num_seqs < 0) return invalid_argument("decode plan: negative num_seqs");
  const int chunks = head_chunks(num_heads, num_kv_heads);
  int max_len = 0;
  for (int s = 0; s < num_seqs; ++s) {
    if (len(s) < 0) return invalid_argument("decode plan: negative context length");
    max_len = std::max(max_len, len(s));
  }
  // Blocks the grid runs (the rest return at once) for partition size p.
  auto blocks = [&](int p) {
    int64_t b = 0;
    for (int s = 0; s < num_seqs; ++s) b += std::max(1, (len(s) + p - 1) / p);
    return b * num_kv_heads * chunks;
  };
  // v2 and tc: one resident wave of blocks.
  const int64_t wave =
      int64_t{k == DecodeKernel::kTc ? kTcBlocksPerSm : kV2BlocksPerSm} * num_sms;
  int p = partition_size;
  if (p == 0) {
    // Split finer (flash-decoding) until the grid has about a resident wave of blocks.
    p = max_p;
    if (k == DecodeKernel::kV1) {
      // Split finer (flash-decoding) until the grid has kV1BlocksPerSm blocks per SM.
      const int64_t target = int64_t{kV1BlocksPerSm} * num_sms;
      while (p > kMinAutoPartition && (p / 2 >= max_len || blocks(p) < target)) p /= 2;
    } else {
      // The finest split whose grid still fits one resident wave: a second, partial wave of
      // short blocks costs more than longer blocks (each keeps 3 iterations of loads in flight).
      // Large batches fill the GPU unsplit and skip the merge.
      while (p > kMinAutoPartition && (p / 2 >= max_len || blocks(p / 2) <= wave)) p /= 2;
      // The wave split (tc, lengths known): a grid just past whole resident waves ends in a
      // partial wave of full-length blocks, which costs nearly a whole block time. Halving the
      // partitions once, where that needs fewer wave-equivalents (waves of half-length blocks
      // counted as half), evens the tail out for a merge. On the H200 (session 27, K1 page 16,
      // 2048 tokens) 16-bit b36-b48 (1.1-1.5 waves of 2 blocks per SM) ran 6-13% faster split,
      // b40 x 8192 18%; b52-b64 and b96 (1.6-2.9 waves) and 1024-token contexts (partitions of
      // 512) were slower split. fp8 (3 blocks per SM): b52-b64 10-14% faster. The wave count
      // stands for time only where the blocks are alike, so only where nearly every sequence
      // would split (at least 7/8 of the blocks: lengths within a factor of 2): B1's mixed
      // steps, whose lengths vary widely, split most of their long sequences under the plain
      // count and lost 1% (55.56 / 55.83 req/s against 56.18 / 56.33). Graph plans (bounds, not
      // lengths) do not split so. Nor do grids that run the fragment ring
      // (tc_unsplit_runs_frags).
      if (wave_split && exact && p / 2 >= kMinWaveSplit) {
        const int64_t resident = tc_resident_blocks(num_sms, fp8);
        auto waves = [&](int64_t b) { return (b + resident - 1) / resident; };
        const int64_t whole = blocks(p), halved = blocks(p / 2);
        const bool alike = 8 * (halved - whole) >= 7 * whole;
        if (alike && whole > resident && waves(halved) < 2 * waves(whole) &&
            !tc_unsplit_runs_frags(cache, whole, num_sms))
          p /= 2;
      }
    }
  }
  const int64_t max_parts = std::max<int64_t>(1, (static_cast<int64_t>(max_len) + p - 1) / p);
  if (max_parts > 65535) return invalid_argument("decode plan: context too long for the split");
  DecodePlan out;
  out.kernel = k;
  out.num_seqs = num_seqs;
  out.num_heads = num_heads;
  out.num_kv_heads = num_kv_heads;
  out.head_dim = head_dim;
  out.partition_size = p;
  out.max_partitions = static_cast<int>(max_parts);
  out.max_context_len = max_len;
  out.refine_partitions = partition_size == 0 && k != DecodeKernel::kV1 && max_parts > 1 &&
                          refine_enabled() &&
                          int64_t{num_seqs} * num_kv_heads * chunks * max_parts <= wave;
  // A graph plan (bounds) whose unsplit grid lies just past one resident wave takes the wave
  // split per step instead (DecodePlan::step_split): room for 2 partitions, the size uploaded
  // with each step's lengths. Only within 1.25 waves: on the H200 (session 28, graphs of the
  // split plan on every step) batches 48-80 (1.45-2.4 waves) were level or up to 1.8% slower,
  // batches 36 and 40 (1.09-1.21 waves) 2-3% faster (NOTES.md).
  if (wave_split && !exact && max_parts == 1 && p / 2 >= kMinWaveSplit) {
    const int64_t resident = tc_resident_blocks(num_sms, fp8);
    const int64_t whole = blocks(p);
    if (whole > resident && 4 * whole <= 5 * resident &&
        !tc_unsplit_runs_frags(cache, whole, num_sms)) {
      out.step_split = true;
      out.max_partitions = 2;
      out.refine_partitions = false;
    }
  }
  out.workspace_bytes = out.max_partitions > 1 ? sizeof(float) * static_cast<size_t>(num_seqs) *
                                                     num_heads * out.max_partitions * (head_dim + 2)
                                               : 0;
  return out;
}

template <typename LenFn>
Result<DecodePlan> plan(int num_seqs, LenFn len, int num_heads, int num_kv_heads, int head_dim,
                        int num_sms, int partition_size, DecodeKernel kernel,
                        DecodeCacheFormat cache, bool exact) {
  FOLIO_RETURN_IF_ERROR(check_attention_geometry(num_heads, num_kv_heads, head_dim));
  FOLIO_ASSIGN_OR_RETURN(const KernelChoice choice, resolve_kernel(kernel, head_dim));
  // Token mode on a 16-bit cache: v2 where its plan is unsplit, but on fast DRAM not where tc's
  // unsplit grid fits one resident wave (DecodeCacheFormat says why) nor where it runs the
  // fragment ring (session 32, H200, K1 queued: b48 / b96 x 2048 115.5 / 207.2 us against v2's
  // 117.9 / 224.5, level at b128; B1 in token mode +2.5-3.6% with the fragment ring). v2 is
  // planned first, so the usual case plans once (tc and v2 validate partition sizes alike). v2's
  // wave is the larger, so where v2 is unsplit tc is too.
  if (choice.by_planner && choice.kernel == DecodeKernel::kTc && cache.block_size == 1 &&
      !cache.fp8) {
    FOLIO_ASSIGN_OR_RETURN(
        DecodePlan v2, plan_for(DecodeKernel::kV2, num_seqs, len, num_heads, num_kv_heads, head_dim,
                                num_sms, partition_size, exact, cache));
    const int64_t tc_blocks =
        int64_t{num_seqs} * num_kv_heads * head_chunks(num_heads, num_kv_heads);
    const bool tc_one_wave =
        fast_dram(cache.peak_memory_gbps) && tc_blocks <= tc_resident_blocks(num_sms, false);
    if (v2.max_partitions == 1 && !tc_one_wave && !tc_unsplit_runs_frags(cache, tc_blocks, num_sms))
      return v2;
  }
  return plan_for(choice.kernel, num_seqs, len, num_heads, num_kv_heads, head_dim, num_sms,
                  partition_size, exact, cache);
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

}  // namespace

Result<DecodePlan> plan_decode_attention(std::span<const int32_t> context_lens, int num_heads,
                                         int num_kv_heads, int head_dim, int num_sms,
                                         int partition_size, DecodeKernel kernel,
                                         DecodeCacheFormat cache) {
  return plan(
      static_cast<int>(context_lens.size()), [&](int s) { return context_lens[s]; }, num_heads,
      num_kv_heads, head_dim, num_sms, partition_size, kernel, cache, /*exact=*/true);
}

Result<DecodePlan> plan_decode_attention_bounded(int num_seqs, int max_context_len, int num_heads,
                                                 int num_kv_heads, int head_dim, int num_sms,
                                                 int partition_size, DecodeKernel kernel,
                                                 DecodeCacheFormat cache) {
  return plan(
      num_seqs, [&](int) { return max_context_len; }, num_heads, num_kv_heads, head_dim, num_sms,
      partition_size, kernel, cache, /*exact=*/false);
}

int decode_step_partition(const DecodePlan& graph, std::span<const int32_t> context_lens,
                          int num_sms, DecodeCacheFormat cache) {
  if (!graph.step_split) return 0;  // the planner sets it on tc plans only
  auto exact = plan_decode_attention(context_lens, graph.num_heads, graph.num_kv_heads,
                                     graph.head_dim, num_sms, 0, DecodeKernel::kTc, cache);
  if (!exact.ok() || exact->max_partitions < 2 || exact->max_partitions > graph.max_partitions)
    return 0;
  return exact->partition_size;
}

DecodePlan without_step_split(DecodePlan graph) {
  if (!graph.step_split) return graph;
  graph.step_split = false;
  graph.max_partitions = 1;
  graph.workspace_bytes = 0;
  return graph;
}

bool decode_fuses_qkv_post(const DecodePlan& plan) {
  return plan.kernel == DecodeKernel::kTc && plan.head_dim == 128 && plan.num_kv_heads > 0 &&
         plan.num_heads % plan.num_kv_heads == 0 && plan.num_heads / plan.num_kv_heads <= 8;
}

Status decode_attention(const PagedAttentionParams& p, const DecodePlan& plan, void* workspace,
                        void* stream) {
  FOLIO_RETURN_IF_ERROR(check_attention_params(p));
  if (plan.num_seqs != p.num_seqs || plan.num_heads != p.num_heads ||
      plan.num_kv_heads != p.num_kv_heads || plan.head_dim != p.head_dim)
    return invalid_argument("decode_attention: the plan was made for another batch shape");
  if (plan.partition_size < 1 || plan.max_partitions < 1 || plan.max_partitions > 65535 ||
      plan.kernel == DecodeKernel::kDefault)
    return invalid_argument("decode_attention: not a plan from plan_decode_attention");
  if (plan.head_chunk != 0 && plan.head_chunk != 1 && plan.head_chunk != 2 &&
      plan.head_chunk != 4 && plan.head_chunk != 8)
    return invalid_argument("decode_attention: head_chunk must be 0, 1, 2, 4 or 8");
  if (plan.step_split && plan.kernel != DecodeKernel::kTc)
    return invalid_argument("decode_attention: step_split needs kernel tc");
  // v2 and tc split [context - window, context) at token granularity (window_start) and look
  // every token's slot up in the table; v1 attends from position 0.
  if (p.sliding_window < 0 || (p.sliding_window > 0 && plan.kernel == DecodeKernel::kV1))
    return invalid_argument("decode_attention: a sliding window runs on a kernel v2 or tc plan");
  if (plan.tc_ring_stages != -1 && plan.tc_ring_stages != 0 &&
      (plan.tc_ring_stages < 2 || plan.tc_ring_stages > 4))
    return invalid_argument("decode_attention: tc_ring_stages must be -1, 0, 2, 3 or 4");
  if (plan.tc_ring_bulk < -1 || plan.tc_ring_bulk > 2)
    return invalid_argument("decode_attention: tc_ring_bulk must be -1, 0, 1 or 2");
  if (p.num_seqs == 0) return Status();
  if (p.num_seqs > 65535) return invalid_argument("decode_attention: more than 65535 sequences");
  if (plan.workspace_bytes > 0 && workspace == nullptr)
    return invalid_argument("decode_attention: the plan needs a workspace");
  const FusedQkvPost& f = p.qkv_post;
  if (f.qkv) {
    if (!decode_fuses_qkv_post(plan))
      return invalid_argument(
          "decode_attention: a fused qkv_post needs kernel tc, head_dim 128 and at most 8 q "
          "heads per KV head");
    if (!f.positions || !f.inv_freq || !f.slot_mapping)
      return invalid_argument("decode_attention: a fused qkv_post needs positions, inv_freq "
                              "and slot_mapping");
  }
  if ((!f.qkv && !aligned16(p.q)) || !aligned16(p.k_cache) || !aligned16(p.v_cache) ||
      !aligned16(p.out) || !aligned16(workspace))
    return invalid_argument(
        "decode_attention: q, caches, out and workspace must be 16-byte aligned");
  detail::DecodeWorkspace ws;
  if (plan.max_partitions > 1) {
    const size_t n = static_cast<size_t>(p.num_seqs) * p.num_heads * plan.max_partitions;
    ws.out = static_cast<float*>(workspace);
    ws.m = ws.out + n * p.head_dim;
    ws.l = ws.m + n;
  }
  // An fp8 cache runs v2 whatever the plan says (v1 reads 16-bit rows only); a v1 plan's split
  // (partitions of 32..512 tokens, the same workspace layout) suits v2 as well.
  if (plan.kernel == DecodeKernel::kTc) return detail::launch_decode_tc(p, plan, ws, stream);
  if (p.kv_dtype == KvCacheDtype::kFp8E4m3)
    return detail::launch_decode_v2_fp8(p, plan, ws, stream);
  return plan.kernel == DecodeKernel::kV1 ? detail::launch_decode_v1(p, plan, ws, stream)
                                          : detail::launch_decode_v2(p, plan, ws, stream);
}

}  // namespace folio::cuda
