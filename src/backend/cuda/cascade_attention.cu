// Cascade decode attention: partials per (item, kv head) on tensor cores, then a merge per row.
// cascade_attention.h has the contract; the fragment layouts are mma_ptx.cuh's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/cascade_attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/smem_opt_in.h"

namespace folio::cuda {
namespace {

constexpr int kTileTokens = 64;  // keys per pipeline stage
constexpr int kQRows = 64;       // query rows per block: 4 warps x 16
constexpr int kThreads = 128;
constexpr int kPad = 8;  // elements after each smem row: 8 ldmatrix rows then hit 32 distinct banks
constexpr float kLog2e = 1.4426950408889634f;

// Shared memory in elements: Q [64][D + pad], then K and V tiles [64][D + pad] x 2 stages each.
template <int D>
struct Smem {
  static constexpr int kRow = D + kPad;
  static constexpr int kQ = kQRows * kRow;
  static constexpr int kTile = kTileTokens * kRow;
  static constexpr size_t kBytes = static_cast<size_t>(kQ + 4 * kTile) * 2;
};

struct PartialArgs {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  const int32_t* query_start;
  const int32_t* block_table;
  const CascadeItem* items;
  const int32_t* rows;
  float* part_o;   // [num_slots][num_heads][D]: unnormalised accumulators
  float* part_ml;  // [num_slots][num_heads][2]: running max (log2 domain) and sum
  int num_heads, num_kv_heads, block_size;
  float scale_log2;  // scale x log2(e): scores go straight to exp2
};

// One item (blockIdx.x) for one kv head (blockIdx.y): query row m = item row m / G, q head
// kvh * G + m % G (G q heads per kv head); warp w owns rows [16 w, 16 w + 16).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) cascade_partial_kernel(PartialArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);
  T* sk = sq + Smem<D>::kQ;                             // K stages 0, 1
  T* sv = sk + 2 * Smem<D>::kTile;                      // V stages 0, 1
  constexpr int kRow = Smem<D>::kRow, kChunks = D / 8;  // 16-byte chunks per row

  const CascadeItem it = a.items[blockIdx.x];
  const int kvh = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = a.num_heads / a.num_kv_heads, m_valid = it.num_rows * G;
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
  auto load_tile = [&](int k, int stage) {
    T* dk = sk + stage * Smem<D>::kTile;
    T* dv = sv + stage * Smem<D>::kTile;
    const int t0 = it.tok_begin + k * kTileTokens;
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
  cp_async_commit();

  const int m0 = warp * 16, g = lane >> 2, t4 = lane & 3, mi = lane >> 3, mr = lane & 7;
  const bool active = m0 < m_valid;
  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  for (int k = 0; k < n_tiles; ++k) {
    if (k + 1 < n_tiles) load_tile(k + 1, (k + 1) & 1);
    cp_async_commit();  // possibly empty: keeps "all but the newest group" meaning tile k
    cp_async_wait<1>();
    __syncthreads();
    if (k == 0 && active) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrix_x4(qf[kk], sq + (m0 + mr + (mi & 1) * 8) * kRow + kk * 16 + (mi & 2) * 4);
    }
    if (active) {
      const T* tk = sk + (k & 1) * Smem<D>::kTile;
      const T* tv = sv + (k & 1) * Smem<D>::kTile;
      float s[kTileTokens / 8][4];
#pragma unroll
      for (int n = 0; n < kTileTokens / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < kTileTokens / 16; ++np) {
          uint32_t b[4];
          ldmatrix_x4(b, tk + (np * 16 + mr + (mi & 2) * 4) * kRow + kk * 16 + (mi & 1) * 8);
          mma_16816<T>(s[2 * np], qf[kk], b[0], b[1]);
          mma_16816<T>(s[2 * np + 1], qf[kk], b[2], b[3]);
        }
      }
      // Online softmax over this tile; keys past the item's end score -inf.
      const int t0 = it.tok_begin + k * kTileTokens;
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < kTileTokens / 8; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int t = t0 + n * 8 + 2 * t4 + (c & 1);
          const float v = t < it.tok_end ? s[n][c] * a.scale_log2 : -INFINITY;
          s[n][c] = v;
          mx[c >> 1] = fmaxf(mx[c >> 1], v);
        }
      float corr[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float m_new = fmaxf(m_run[h], mx[h]);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;
        corr[h] = fast_exp2(m_run[h] - m_use);
        m_run[h] = m_new;
        mx[h] = m_use;
      }
      float sum[2] = {0.f, 0.f};
#pragma unroll
      for (int n = 0; n < kTileTokens / 8; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          s[n][c] = fast_exp2(s[n][c] - mx[c >> 1]);
          sum[c >> 1] += s[n][c];
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * corr[h] + sum[h];
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= corr[0];
        o[n][1] *= corr[0];
        o[n][2] *= corr[1];
        o[n][3] *= corr[1];
      }
      // O += P · V: P's accumulators become the A fragments of 16-token steps.
#pragma unroll
      for (int kk = 0; kk < kTileTokens / 16; ++kk) {
        const uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                                pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, tv + (kk * 16 + mr + (mi & 1) * 8) * kRow + dp * 16 + (mi & 2) * 4);
          mma_16816<T>(o[2 * dp], pa, b[0], b[1]);
          mma_16816<T>(o[2 * dp + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the next iteration refills this stage
  }
  if (!active) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
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
  out[(row * num_heads + h) * D + d] = static_cast<T>(num / den);
}

template <typename T, int D>
Status launch(const PagedAttentionParams& p, const CascadeDevicePlan& plan, void* workspace,
              cudaStream_t stream) {
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
  const size_t smem = Smem<D>::kBytes;
  FOLIO_RETURN_IF_ERROR(
      opt_in_dynamic_smem(reinterpret_cast<const void*>(&cascade_partial_kernel<T, D>), smem));
  cascade_partial_kernel<T, D>
      <<<dim3(static_cast<unsigned>(plan.num_items), static_cast<unsigned>(p.num_kv_heads)),
         kThreads, smem, stream>>>(a);
  FOLIO_RETURN_IF_ERROR(launch_status("cascade_partial_kernel"));
  cascade_merge_kernel<T, D>
      <<<dim3(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_heads)), D, 0,
         stream>>>(a.part_o, a.part_ml, plan.row_slot_start, plan.row_slots, p.query_start,
                   p.num_heads, static_cast<T*>(p.out));
  return launch_status("cascade_merge_kernel");
}

}  // namespace

bool cascade_supported(const PagedAttentionParams& p) {
  return (p.dtype == DType::kBF16 || p.dtype == DType::kFP16) &&
         p.kv_dtype == KvCacheDtype::kAuto && (p.head_dim == 64 || p.head_dim == 128) &&
         p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 &&
         p.num_heads / p.num_kv_heads <= kQRows;
}

int cascade_max_rows_per_item(int num_heads, int num_kv_heads) {
  return num_kv_heads > 0 ? kQRows / std::max(1, num_heads / num_kv_heads) : 1;
}

size_t cascade_workspace_bytes(int num_slots, int num_heads, int head_dim) {
  return static_cast<size_t>(num_slots) * num_heads * (head_dim + 2) * sizeof(float);
}

Status cascade_attention(const PagedAttentionParams& p, const CascadeDevicePlan& plan,
                         void* workspace, void* stream) {
  if (!cascade_supported(p))
    return unimplemented("cascade attention: needs a 16-bit cache and head_dim 64 or 128");
  if (p.num_seqs <= 0 || plan.num_items <= 0) return Status();
  cudaStream_t st = as_stream(stream);
  const bool bf16 = p.dtype == DType::kBF16;
  if (p.head_dim == 128)
    return bf16 ? launch<__nv_bfloat16, 128>(p, plan, workspace, st)
                : launch<__half, 128>(p, plan, workspace, st);
  return bf16 ? launch<__nv_bfloat16, 64>(p, plan, workspace, st)
              : launch<__half, 64>(p, plan, workspace, st);
}

}  // namespace folio::cuda
