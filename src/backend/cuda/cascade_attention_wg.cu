// The wgmma partial kernel of cascade attention (device code: cascade_attention_wg.cuh), its
// launch, and the packs it takes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "backend/cascade_packs.h"
#include "backend/cuda/cascade_attention.h"
#include "backend/cuda/cascade_attention_wg.cuh"
#include "backend/cuda/cascade_attention_wg.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/smem_opt_in.h"
#include "backend/cuda/tensor_map.h"

namespace folio::cuda {
namespace {

template <typename T, int kSt, typename C>
__global__ void __launch_bounds__(cascade_wide::kThreads, kSt == 2 ? 3 : 2)
    cascade_wide_kernel(const cascade_wide::Args a,
                        const __grid_constant__ cascade_wide::Maps maps) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma and TMA need sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  cascade_wide::partial_body<T, kSt, C>(a, maps, smem_raw);
#endif
}

}  // namespace

bool cascade_detail::wide_geometry(const PagedAttentionParams& p) {
  const int bs = p.block_size;
  return p.head_dim == cascade_wide::D && bs >= 8 && bs <= cascade_wide::kTileTokens &&
         (bs & (bs - 1)) == 0;
}

bool cascade_wide_supported(const PagedAttentionParams& p) {
  return cascade_supported(p) && cascade_detail::wide_geometry(p);
}

int cascade_wide_min_rows(const PagedAttentionParams& p) {
  if (!cascade_wide_supported(p)) return 0;
  // Items of more than 32 query rows: at most 32 the mma.sync kernel splits the keys over its
  // warps instead, so each reads its share of a tile once.
  return 32 / (p.num_heads / p.num_kv_heads) + 1;
}

std::vector<int32_t> cascade_wgmma_packs(const CascadePlan& plan, int num_heads, int num_kv_heads,
                                         int num_sms, int max_items, bool one_row_only) {
  const int n = static_cast<int>(plan.items.size());
  const int wide = std::clamp(plan.num_wide_items, 0, n);
  const int begin = one_row_only ? std::max(wide, n - plan.num_single_row_items) : wide;
  CascadePackOptions o;
  o.q_per_kv = std::max(1, num_heads / std::max(1, num_kv_heads));
  o.max_query_rows = 64;
  o.tile_tokens = cascade_wide::kTileTokens;
  o.max_items = std::max(0, max_items);
  if (o.max_items == 0)
    o.target_tiles = cascade_pack_target_tiles(plan, begin, o.tile_tokens, num_kv_heads, num_sms);
  return pack_cascade_items(plan, begin, o);
}

namespace cascade_detail {
namespace {

// The kernel for (T, stages, cache element) and its shared memory, through launch(kernel, smem).
template <typename T, typename Launch>
Status launch_typed(int stages, bool fp8, Launch&& launch) {
  using cascade_wide::smem_bytes;
  using cascade_wide::smem_bytes_fp8;
  if (fp8 && stages == 4) return launch(&cascade_wide_kernel<T, 4, uint8_t>, smem_bytes_fp8(4));
  if (fp8)
    return stages == 2 ? launch(&cascade_wide_kernel<T, 2, uint8_t>, smem_bytes_fp8(2))
                       : launch(&cascade_wide_kernel<T, 3, uint8_t>, smem_bytes_fp8(3));
  return stages == 2 ? launch(&cascade_wide_kernel<T, 2, T>, smem_bytes(2))
                     : launch(&cascade_wide_kernel<T, 3, T>, smem_bytes(3));
}

}  // namespace

Status launch_wide(const PagedAttentionParams& p, const CascadeItem* items,
                   const int32_t* pack_start, const int32_t* rows, float* part_o, float* part_ml,
                   int stages, cudaStream_t stream, const void* counts, int blocks) {
  cascade_wide::Args a;
  a.q = p.q;
  a.query_start = p.query_start;
  a.block_table = p.block_table;
  a.items = items;
  a.rows = rows;
  a.part_o = part_o;
  a.part_ml = part_ml;
  a.num_heads = p.num_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.block_size = p.block_size;
  a.block_shift = std::countr_zero(static_cast<unsigned>(p.block_size));  // a power of two
  a.scale_log2 = p.scale * 1.4426950408889634f;
  a.pack_start = pack_start;
  // CascadeCounts starts with num_wide and num_packs (cascade_attention.cu checks the layout).
  a.counts = static_cast<const int32_t*>(counts);
  if (blocks <= 0) return Status();
  cascade_wide::Maps maps;
  // An e4m3 cache's rows are 128 bytes: its maps see them as 64 16-bit pairs, so a box lands
  // whole rows (cascade_attention_wg_fp8.cuh).
  const bool fp8 = p.kv_dtype == KvCacheDtype::kFp8E4m3;
  const int D = fp8 ? cascade_wide::D / 2 : cascade_wide::D;
  FOLIO_RETURN_IF_ERROR(
      cached_paged_cache_map(&maps.k_page, p.dtype, p.k_cache, p.num_kv_heads, D, p.block_size));
  FOLIO_RETURN_IF_ERROR(
      cached_paged_cache_map(&maps.v_page, p.dtype, p.v_cache, p.num_kv_heads, D, p.block_size));
  FOLIO_RETURN_IF_ERROR(
      cached_paged_cache_map(&maps.k_row, p.dtype, p.k_cache, p.num_kv_heads, D, 1));
  FOLIO_RETURN_IF_ERROR(
      cached_paged_cache_map(&maps.v_row, p.dtype, p.v_cache, p.num_kv_heads, D, 1));
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.num_kv_heads));
  auto launch = [&](auto* kernel, size_t smem) {
    FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), smem));
    kernel<<<grid, cascade_wide::kThreads, smem, stream>>>(a, maps);
    return Status();
  };
  FOLIO_RETURN_IF_ERROR(p.dtype == DType::kBF16 ? launch_typed<__nv_bfloat16>(stages, fp8, launch)
                                                : launch_typed<__half>(stages, fp8, launch));
  return launch_status("cascade_wide_kernel");
}

}  // namespace cascade_detail
}  // namespace folio::cuda
