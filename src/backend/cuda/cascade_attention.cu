// Cascade decode attention: partials per (item, kv head) on tensor cores, then a merge per row.
// cascade_attention.h has the contract; the fragment layouts are mma_ptx.cuh's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "backend/cuda/cascade_attention.h"
#include "backend/cuda/cascade_attention_warp.cuh"
#include "backend/cuda/cascade_attention_wg.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mbarrier_ptx.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "backend/cuda/tma_ptx.cuh"

namespace folio::cuda {
namespace {

using namespace cascade_kernel;  // NOLINT: the kernel's own constants and warp steps

constexpr float kLog2e = 1.4426950408889634f;

struct PartialArgs {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  const int32_t* query_start;
  const int32_t* block_table;
  const CascadeItem* items;  // this launch's items: blockIdx.x indexes them
  const int32_t* rows;
  float* part_o;   // [num_slots][num_heads][D]: unnormalised accumulators
  float* part_ml;  // [num_slots][num_heads][2]: running max (log2 domain) and sum
  int num_heads, num_kv_heads, block_size;
  float scale_log2;  // scale x log2(e): scores go straight to exp2
  bool bulk_rows;    // K/V rows by bulk copies (one per row, on an mbarrier), else by cp.async
  bool split_keys;   // items of at most 32 query rows split each tile's keys over warps
  // The step's counts on the device (CascadeDevicePlan::counts): blockIdx.x indexes items from
  // counts->mma_begin, and blocks from counts->mma_count on have no work.
  const CascadeCounts* counts;
};

// One item (blockIdx.x) for one kv head (blockIdx.y): query row m = item row m / G, q head
// kvh * G + m % G (G q heads per kv head), in row groups of 16 (one warp's mma rows). With one
// row group, the four warps split each tile's keys four ways (16 each); with two, two ways;
// else warp w owns row group w and all keys. An item of one decode row (a row's own suffix, G
// <= 16 query rows) would otherwise leave three warps idle and one warp's tensor-core work
// setting the pace of the tile instead of its bytes.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) cascade_partial_kernel(PartialArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kRow = Smem<D>::kRow, kChunks = D / 8;  // 16-byte chunks per row
  T* stages = reinterpret_cast<T*>(smem_raw);
  T* sq = stages + 4 * Smem<D>::kTile;  // stage 2's K tile

  // The grid may be wider than the step's work (a graph's bound).
  if (static_cast<int>(blockIdx.x) >= a.counts->mma_count) return;
  const CascadeItem it = a.items[a.counts->mma_begin + blockIdx.x];
  const int kvh = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = a.num_heads / a.num_kv_heads, m_valid = it.num_rows * G;
  const int row_groups = (m_valid + 15) / 16;
  const int split = !a.split_keys ? 1 : row_groups == 1 ? 4 : row_groups == 2 ? 2 : 1;
  const T* q = static_cast<const T*>(a.q);
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);

  // Q rows (zero past m_valid), in the first cp.async group with tile 0.
  for (int c = tid; c < kQRows * kChunks; c += kThreads) {
    const int m = c / kChunks, part = c % kChunks;
    const bool valid = m < m_valid;
    const T* src = q;
    if (valid) {
      const int row = a.rows[it.row_begin + m / G];
      const int64_t qrow = a.query_start[row];
      src = q + (qrow * a.num_heads + kvh * G + m % G) * D + part * 8;
    }
    cp_async_16(sq + m * kRow + part * 8, src, valid);
  }
  const int n_tiles = (it.tok_end - it.tok_begin + kTileTokens - 1) / kTileTokens;
  __shared__ uint64_t full[kStages];  // bulk rows: stage s's k-th fill is phase k of full[s]
  if (a.bulk_rows) {
    if (tid == 0) {
      for (int st = 0; st < kStages; ++st) mbarrier_init(&full[st], 1);
      fence_mbarrier_init();
    }
    __syncthreads();
  }
  // Thread i's row of tile k: K (i < 64) or V row i % 64, its token clamped to the item's last.
  auto row_src = [&](int k) {
    const int r = tid % kTileTokens;
    const int t = min(it.tok_begin + k * kTileTokens + r, it.tok_end - 1);
    const int64_t slot =
        static_cast<int64_t>(a.block_table[it.bt_start + t / a.block_size]) * a.block_size +
        t % a.block_size;
    return (tid < kTileTokens ? kc : vc) + (slot * a.num_kv_heads + kvh) * D;
  };
  auto load_tile = [&](int k, int stage) {
    T* dk = stages + 2 * stage * Smem<D>::kTile;
    T* dv = dk + Smem<D>::kTile;
    const int t0 = it.tok_begin + k * kTileTokens;
    if (a.bulk_rows) {
      // Thread i copies K (i < 64) or V row i % 64. Rows past the item's end copy its last
      // token again (finite, and masked), so every fill is the same 128 rows.
      constexpr uint32_t kRowBytes = D * sizeof(T);
      if (tid == 0) mbarrier_arrive_expect_tx(&full[stage], 2 * kTileTokens * kRowBytes);
      const int r = tid % kTileTokens;
      bulk_load((tid < kTileTokens ? dk : dv) + r * kRow, row_src(k), kRowBytes, &full[stage]);
      return;
    }
#pragma unroll
    for (int i = 0; i < kTileTokens * kChunks / kThreads; ++i) {
      const int c = tid + i * kThreads, r = c / kChunks, part = c % kChunks;
      const int t = t0 + r;
      const bool valid = t < it.tok_end;
      int64_t off = 0;
      if (valid) {
        const int64_t slot =
            static_cast<int64_t>(a.block_table[it.bt_start + t / a.block_size]) * a.block_size +
            t % a.block_size;
        off = (slot * a.num_kv_heads + kvh) * D + part * 8;
      }
      cp_async_16(dk + r * kRow + part * 8, kc + off, valid);
      cp_async_16(dv + r * kRow + part * 8, vc + off, valid);
    }
  };
  load_tile(0, 0);
  cp_async_commit();  // group 0: Q and tile 0
  if (n_tiles > 1) load_tile(1, 1);
  cp_async_commit();  // group 1: tile 1 (maybe none); tile k >= 2 is group k, issued at k - 2

  const int part = warp % split, m0 = (warp / split) * 16;
  const int g = lane >> 2, t4 = lane & 3, mi = lane >> 3, mr = lane & 7;
  const bool active = m0 < m_valid;
  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  for (int k = 0; k < n_tiles; ++k) {
    cp_async_wait<1>();  // groups 0..k: tile k is here (tile k + 1 may still load)
    if (a.bulk_rows) mbarrier_wait_parity(&full[k % kStages], (k / kStages) & 1);
    __syncthreads();  // ... for every thread's copies; and tile k - 1's stage is free
    if (k == 0) {
      if (active) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          ldmatrix_x4(qf[kk], sq + (m0 + mr + (mi & 1) * 8) * kRow + kk * 16 + (mi & 2) * 4);
      }
      __syncthreads();  // Q is in registers: stage 2 may take tile 2
    }
    if (k + 2 < n_tiles) load_tile(k + 2, (k + 2) % kStages);
    cp_async_commit();  // possibly empty: keeps group k + 2 meaning tile k + 2
    if (active) {
      const T* tk = stages + 2 * (k % kStages) * Smem<D>::kTile;
      const T* tv = tk + Smem<D>::kTile;
      const int t0 = it.tok_begin + k * kTileTokens;
      if (split == 4)
        attend_keys<T, D, kTileTokens / 4>(tk, tv, part * (kTileTokens / 4), t0, it.tok_end,
                                           a.scale_log2, qf, o, m_run, l_run, lane);
      else if (split == 2)
        attend_keys<T, D, kTileTokens / 2>(tk, tv, part * (kTileTokens / 2), t0, it.tok_end,
                                           a.scale_log2, qf, o, m_run, l_run, lane);
      else
        attend_keys<T, D, kTileTokens>(tk, tv, 0, t0, it.tok_end, a.scale_log2, qf, o, m_run, l_run,
                                       lane);
    }
  }
  __syncthreads();  // every warp is done with the stages: the combine may reuse them
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
  if (split > 1)
    combine_split_warps<D>(reinterpret_cast<float*>(smem_raw), warp, split, active, o, m_run, l_run,
                           lane);
  if (!active || part != 0) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = m0 + g + h * 8;
    if (m >= m_valid) continue;
    const int64_t base =
        static_cast<int64_t>(it.slot_begin + m / G) * a.num_heads + kvh * G + m % G;
    float* dst = a.part_o + base * D + 2 * t4;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[n][2 * h], o[n][2 * h + 1]);
    if (t4 == 0) *reinterpret_cast<float2*>(a.part_ml + base * 2) = make_float2(m_run[h], l_run[h]);
  }
}

// One (batch row, q head) per block, one thread per element of the head.
template <typename T, int D>
__global__ void __launch_bounds__(D)
    cascade_merge_kernel(const float* part_o, const float* part_ml, const int32_t* row_slot_start,
                         const int32_t* row_slots, const int32_t* query_start, int num_heads,
                         T* out) {
  const int s = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  const int begin = row_slot_start[s], end = row_slot_start[s + 1];
  float m = -INFINITY;
  for (int i = begin; i < end; ++i)
    m = fmaxf(m, part_ml[(static_cast<int64_t>(row_slots[i]) * num_heads + h) * 2]);
  float num = 0.f, den = 0.f;
  for (int i = begin; i < end; ++i) {
    const int64_t base = static_cast<int64_t>(row_slots[i]) * num_heads + h;
    const float w = fast_exp2(part_ml[base * 2] - m);
    num += w * part_o[base * D + d];
    den += w * part_ml[base * 2 + 1];
  }
  const int64_t row = query_start[s];
  // No slots: a graph's padding row (CascadeDevicePlan's bounded form), read by nobody.
  out[(row * num_heads + h) * D + d] = static_cast<T>(end > begin ? num / den : 0.f);
}

// The mma.sync partial kernel over `blocks` x kv heads.
template <typename T, int D>
Status launch_mma(const PagedAttentionParams& p, const PartialArgs& a, int blocks,
                  cudaStream_t stream) {
  const size_t smem = Smem<D>::kBytes;
  FOLIO_RETURN_IF_ERROR(
      opt_in_dynamic_smem(reinterpret_cast<const void*>(&cascade_partial_kernel<T, D>), smem));
  cascade_partial_kernel<T, D>
      <<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(p.num_kv_heads)), kThreads, smem,
         stream>>>(a);
  return launch_status("cascade_partial_kernel");
}

// The wgmma kernel reads num_wide and num_packs as counts[0..1] (cascade_attention_wg_args.cuh).
static_assert(offsetof(CascadeCounts, num_wide) == 0 && offsetof(CascadeCounts, num_packs) == 4);

// The partials: each kernel over its grid, reading the step's counts on the device.
template <typename T, int D>
Status launch_partials(const PagedAttentionParams& p, const CascadeDevicePlan& plan,
                       const PartialArgs& a, cudaStream_t stream, CascadeTuning tuning) {
  // Checked before anything launches.
  if (plan.wgmma_blocks > 0 && !cascade_wide_supported(p))
    return invalid_argument(
        "cascade attention: a wgmma grid needs the wgmma kernel's geometry (head_dim 128, pages "
        "of 8-64 tokens, a power of two)");
  if (plan.mma_blocks > 0 && p.kv_dtype != KvCacheDtype::kAuto)
    return unimplemented(
        "cascade attention over an fp8 cache: every item goes to the wgmma kernel (wide or "
        "packed), so no mma.sync grid");
  if (plan.wgmma_blocks > 0)
    FOLIO_RETURN_IF_ERROR(cascade_detail::launch_wide(p, plan.items, plan.pack_start, plan.rows,
                                                      a.part_o, a.part_ml, tuning.wgmma_stages,
                                                      stream, plan.counts, plan.wgmma_blocks));
  if (plan.mma_blocks > 0) return launch_mma<T, D>(p, a, plan.mma_blocks, stream);
  return Status();
}

template <typename T, int D>
Status launch(const PagedAttentionParams& p, const CascadeDevicePlan& plan, void* workspace,
              cudaStream_t stream, CascadeTuning tuning) {
  PartialArgs a;
  a.q = p.q;
  a.k_cache = p.k_cache;
  a.v_cache = p.v_cache;
  a.query_start = p.query_start;
  a.block_table = p.block_table;
  a.items = plan.items;
  a.rows = plan.rows;
  a.part_o = static_cast<float*>(workspace);
  a.part_ml = a.part_o + static_cast<size_t>(plan.num_slots) * p.num_heads * D;
  a.num_heads = p.num_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.block_size = p.block_size;
  a.scale_log2 = p.scale * kLog2e;
  a.bulk_rows = tuning.load == CascadeLoad::kBulkRows;
  a.split_keys = tuning.split_keys;
  a.counts = plan.counts;
  FOLIO_RETURN_IF_ERROR((launch_partials<T, D>(p, plan, a, stream, tuning)));
  cascade_merge_kernel<T, D>
      <<<dim3(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_heads)), D, 0,
         stream>>>(a.part_o, a.part_ml, plan.row_slot_start, plan.row_slots, p.query_start,
                   p.num_heads, static_cast<T*>(p.out));
  return launch_status("cascade_merge_kernel");
}

}  // namespace

CascadeCounts cascade_counts(const CascadePlan& plan, const std::vector<int32_t>& packs) {
  CascadeCounts c;
  const int n = static_cast<int>(plan.items.size());
  c.num_wide = std::clamp(plan.num_wide_items, 0, n);
  c.num_packs = packs.empty() ? 0 : static_cast<int32_t>(packs.size()) - 1;
  c.mma_begin = c.num_wide;
  c.mma_count = (packs.empty() ? n : std::clamp(packs.front(), c.num_wide, n)) - c.num_wide;
  return c;
}

CascadeGrids cascade_exact_grids(const CascadeCounts& counts) {
  return {counts.num_wide + counts.num_packs, counts.mma_count};
}

bool cascade_supported(const PagedAttentionParams& p) {
  const bool heads = p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 &&
                     p.num_heads / p.num_kv_heads <= kQRows;
  if (!heads || (p.dtype != DType::kBF16 && p.dtype != DType::kFP16)) return false;
  if (p.kv_dtype == KvCacheDtype::kAuto) return p.head_dim == 64 || p.head_dim == 128;
  // An e4m3 cache: the wgmma kernel only (cascade_attention_wg_fp8.cuh).
  return p.kv_dtype == KvCacheDtype::kFp8E4m3 && cascade_detail::wide_geometry(p);
}

int cascade_max_rows_per_item(int num_heads, int num_kv_heads) {
  return num_kv_heads > 0 ? kQRows / std::max(1, num_heads / num_kv_heads) : 1;
}

int cascade_min_items(int num_kv_heads, int num_sms) {
  const int kv = std::max(1, num_kv_heads);
  return (2 * num_sms + kv - 1) / kv;
}

size_t cascade_workspace_bytes(int num_slots, int num_heads, int head_dim) {
  return static_cast<size_t>(num_slots) * num_heads * (head_dim + 2) * sizeof(float);
}

Status cascade_attention(const PagedAttentionParams& p, const CascadeDevicePlan& plan,
                         void* workspace, void* stream, CascadeTuning tuning) {
  if (!cascade_supported(p))
    return unimplemented(
        "cascade attention: needs a 16-bit cache and head_dim 64 or 128, or an fp8 cache, "
        "head_dim 128 and pages of 8-64 tokens (a power of two)");
  const bool fp8 = p.kv_dtype == KvCacheDtype::kFp8E4m3;
  const int stages = tuning.wgmma_stages;
  if (stages != 2 && stages != 3 && !(fp8 && stages == 4))
    return invalid_argument("cascade attention: wgmma_stages " + std::to_string(stages) +
                            " (2 or 3; 4 over an fp8 cache)");
  if (p.num_seqs <= 0) return Status();
  if (plan.counts == nullptr || plan.wgmma_blocks < 0 || plan.mma_blocks < 0)
    return invalid_argument("cascade attention: a plan needs its device counts and grids >= 0");
  cudaStream_t st = as_stream(stream);
  const bool bf16 = p.dtype == DType::kBF16;
  if (p.head_dim == 128)
    return bf16 ? launch<__nv_bfloat16, 128>(p, plan, workspace, st, tuning)
                : launch<__half, 128>(p, plan, workspace, st, tuning);
  return bf16 ? launch<__nv_bfloat16, 64>(p, plan, workspace, st, tuning)
              : launch<__half, 64>(p, plan, workspace, st, tuning);
}

}  // namespace folio::cuda
