// Prefill attention v1 (the first kernel, kept selectable for comparison): wmma 16x16x16 tiles,
// the O accumulator and scores in shared memory, synchronous K/V tile loads, scalar softmax.
#include <mma.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/paged_kernel_args.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "backend/cuda/prefill_attention_kernels.h"

namespace folio::cuda::prefill_detail {
namespace {

using namespace nvcuda;

constexpr int BM = 64;  // (token, head) rows per block: 16 per warp
constexpr int BN = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

template <typename T>
struct V1Args : PagedPointers<T> {
  int num_heads, num_kv_heads, block_size, max_row_tiles;
  float scale;
};

// Shared-memory layout; rows are padded to dodge bank conflicts, and every wmma tile pointer stays
// 32-byte aligned (all offsets below are multiples of 32 bytes).
template <typename T, int D>
struct Smem {
  static constexpr int LDQ = D + 8;   // Q, K, V rows (T)
  static constexpr int LDS = BN + 4;  // scores (float)
  static constexpr int LDP = BN + 8;  // probabilities (T)
  static constexpr int LDO = D + 4;   // output accumulator (float)
  static constexpr size_t q = 0;
  static constexpr size_t k = q + sizeof(T) * BM * LDQ;
  static constexpr size_t v = k + sizeof(T) * BN * LDQ;
  static constexpr size_t s = v + sizeof(T) * BN * LDQ;
  static constexpr size_t p = s + sizeof(float) * kWarps * 16 * LDS;
  static constexpr size_t o = p + sizeof(T) * kWarps * 16 * LDP;
  static constexpr size_t bytes = o + sizeof(float) * kWarps * 16 * LDO;
};

// Loads keys [kt, kt + BN) of one KV head (zeros past kv_end) into a [BN][LDQ] tile.
template <typename T, int D>
__device__ void load_kv_tile(const T* cache, T* tile, const int32_t* table, int block_size,
                             int64_t slot_stride, int64_t head_off, int kt, int kv_end) {
  constexpr int LDQ = Smem<T, D>::LDQ, PK = D / 8;
  for (int i = threadIdx.x; i < BN * PK; i += kThreads) {
    const int r = i / PK, c = (i % PK) * 8, j = kt + r;
    Pack<T, 8> v;
    if (j < kv_end) {
      const int64_t slot =
          static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
      v = *reinterpret_cast<const Pack<T, 8>*>(cache + slot * slot_stride + head_off + c);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) v.v[e] = from_float<T>(0.f);
    }
    *reinterpret_cast<Pack<T, 8>*>(tile + r * LDQ + c) = v;
  }
}

// grid (max_row_tiles, num_seqs, num_kv_heads). Row r of a sequence is (token r / G, q head
// kvh * G + r % G). Lanes 2i and 2i+1 of a warp own row i of its 16 for the softmax and the
// output, each half of the columns.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) prefill_kernel(V1Args<T> a) {
  using L = Smem<T, D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* q_s = reinterpret_cast<T*>(smem + L::q);
  T* k_s = reinterpret_cast<T*>(smem + L::k);
  T* v_s = reinterpret_cast<T*>(smem + L::v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* s_w = reinterpret_cast<float*>(smem + L::s) + warp * 16 * L::LDS;
  T* p_w = reinterpret_cast<T*>(smem + L::p) + warp * 16 * L::LDP;
  float* o_w = reinterpret_cast<float*>(smem + L::o) + warp * 16 * L::LDO;

  const int s = blockIdx.y, kvh = blockIdx.z;
  const int tile = a.max_row_tiles - 1 - blockIdx.x;  // longest-running tiles launch first
  const int qs = a.query_start[s], q_len = a.query_start[s + 1] - qs;
  const int G = a.num_heads / a.num_kv_heads;
  const int rows = q_len * G, r0 = tile * BM;
  if (r0 >= rows) return;
  const int first_pos = a.context_lens[s] - q_len;
  const int kv_end = first_pos + (min(r0 + BM, rows) - 1) / G + 1;
  const int32_t* table = a.block_table + a.block_table_start[s];
  const int64_t slot_stride = static_cast<int64_t>(a.num_kv_heads) * D;
  const int64_t head_off = static_cast<int64_t>(kvh) * D;

  constexpr int PK = D / 8;
  for (int i = threadIdx.x; i < BM * PK; i += kThreads) {
    const int r = i / PK, c = (i % PK) * 8, gr = r0 + r;
    Pack<T, 8> v;
    if (gr < rows) {
      const int64_t qrow = static_cast<int64_t>(qs + gr / G) * a.num_heads + kvh * G + gr % G;
      v = *reinterpret_cast<const Pack<T, 8>*>(a.q + qrow * D + c);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) v.v[e] = from_float<T>(0.f);
    }
    *reinterpret_cast<Pack<T, 8>*>(q_s + r * L::LDQ + c) = v;
  }
  const int my_row = lane / 2, half = lane % 2;
  const int my_gr = r0 + warp * 16 + my_row;
  const int my_pos = my_gr < rows ? first_pos + my_gr / G : -1;  // -1 masks every key
  float* s_row = s_w + my_row * L::LDS + half * (BN / 2);
  T* p_row = p_w + my_row * L::LDP + half * (BN / 2);
  float* o_row = o_w + my_row * L::LDO + half * (D / 2);
  for (int d = 0; d < D / 2; ++d) o_row[d] = 0.f;
  float m = -INFINITY, l = 0.f;

  for (int kt = 0; kt < kv_end; kt += BN) {
    __syncthreads();  // the previous tile is consumed (and Q is in place on the first pass)
    load_kv_tile<T, D>(a.k_cache, k_s, table, a.block_size, slot_stride, head_off, kt, kv_end);
    load_kv_tile<T, D>(a.v_cache, v_s, table, a.block_size, slot_stride, head_off, kt, kv_end);
    __syncthreads();
    // S[16][BN] = Q_w[16][D] · K^T
#pragma unroll
    for (int nf = 0; nf < BN / 16; ++nf) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::fill_fragment(c, 0.f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, q_s + warp * 16 * L::LDQ + kk * 16, L::LDQ);
        wmma::load_matrix_sync(fb, k_s + nf * 16 * L::LDQ + kk * 16, L::LDQ);
        wmma::mma_sync(c, fa, fb, c);
      }
      wmma::store_matrix_sync(s_w + nf * 16, c, L::LDS, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax over this tile, causal mask by position.
    float mx = -INFINITY;
    for (int c = 0; c < BN / 2; ++c) {
      const int j = kt + half * (BN / 2) + c;
      const float x = j <= my_pos ? s_row[c] * a.scale : -INFINITY;
      s_row[c] = x;
      mx = fmaxf(mx, x);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_new = fmaxf(m, mx);
    const bool none = m_new == -INFINITY;  // no visible key yet (padding row)
    const float alpha = none ? 1.f : __expf(m - m_new);
    float sum = 0.f;
    for (int c = 0; c < BN / 2; ++c) {
      const float pr = none ? 0.f : __expf(s_row[c] - m_new);
      p_row[c] = from_float<T>(pr);
      sum += pr;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    if (alpha != 1.f)  // once the row max settles most tiles skip the rescale
      for (int d = 0; d < D / 2; ++d) o_row[d] *= alpha;
    __syncwarp();
    // O_w[16][D] += P_w[16][BN] · V[BN][D]
#pragma unroll
    for (int df = 0; df < D / 16; ++df) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::load_matrix_sync(c, o_w + df * 16, L::LDO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, p_w + kk * 16, L::LDP);
        wmma::load_matrix_sync(fb, v_s + kk * 16 * L::LDQ + df * 16, L::LDQ);
        wmma::mma_sync(c, fa, fb, c);
      }
      wmma::store_matrix_sync(o_w + df * 16, c, L::LDO, wmma::mem_row_major);
    }
    __syncwarp();
  }
  if (my_gr >= rows) return;
  const int64_t orow = static_cast<int64_t>(qs + my_gr / G) * a.num_heads + kvh * G + my_gr % G;
  T* dst = a.out + orow * D + half * (D / 2);
  const float inv = l > 0.f ? 1.f / l : 0.f;
  for (int d = 0; d < D / 2; d += 8) {
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = o_row[d + e] * inv;
    store_floats<8>(dst + d, v);
  }
}

template <typename T, int D>
Status launch(const V1Args<T>& a, int num_seqs, void* stream) {
  auto kernel = prefill_kernel<T, D>;
  constexpr size_t bytes = Smem<T, D>::bytes;
  // Above 48 KiB a kernel must opt in, on every device it runs on.
  FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes));
  const dim3 grid(a.max_row_tiles, num_seqs, a.num_kv_heads);
  kernel<<<grid, kThreads, bytes, as_stream(stream)>>>(a);
  return launch_status("prefill_kernel");
}

}  // namespace

Status launch_v1(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  if (p.head_dim != 64 && p.head_dim != 128)
    return unimplemented("prefill_attention v1: head_dim " + std::to_string(p.head_dim) +
                         " (v1 supports 64 and 128; use v2)");
  if (plan.max_row_tiles == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    V1Args<T> a{};
    a.set_pointers(p);
    a.num_heads = p.num_heads;
    a.num_kv_heads = p.num_kv_heads;
    a.block_size = p.block_size;
    a.max_row_tiles = plan.max_row_tiles;
    a.scale = p.scale;
    return p.head_dim == 64 ? launch<T, 64>(a, p.num_seqs, stream)
                            : launch<T, 128>(a, p.num_seqs, stream);
  });
}

}  // namespace folio::cuda::prefill_detail
