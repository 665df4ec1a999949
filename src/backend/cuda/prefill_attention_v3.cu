// Prefill attention v3: FlashAttention on Hopper warpgroup MMA (wgmma, sm_90a).
//
// Grid (row tiles, sequences, KV heads) as in v2; a block of 2 warpgroups (256 threads) takes
// BM = 128 (token, q head) rows of one sequence and one KV head, the GQA group folded into the
// rows (row r = token r / G, head kvh * G + r % G). Warpgroup wg owns rows 64 wg .. 64 wg + 63:
// its S = Q·K^T tile (64 x BN) and O (64 x D) are wgmma accumulators in registers, the online
// softmax state (m, l) too. Per key tile of BN = 64 keys:
//   S  = Q · K^T     wgmma m64n64k16, A = Q and B = K both from shared memory (K-major), D / 16
//                    steps;
//   P  = online softmax of S in registers (base 2), O rescaled;
//   O += P · V       wgmma m64nDk16, A = P from registers (the accumulator layout of S repacked
//                    to 16-bit pairs is the A-fragment layout), B = V from shared memory
//                    (MN-major, transposed by the instruction), BN / 16 steps.
// Q, K and V tiles use the 128-byte-swizzle layout (wgmma_ptx.cuh): a tile of R rows x D
// columns is D / 64 panels of R x 64 elements; in a panel, row r is 128 bytes at r * 128 and its
// 16-byte chunk c is stored at chunk c ^ (r % 8). Descriptors:
//   Q (A, K-major): start q + panel(kk) * BM * 128 + wg * 64 * 128 + (kk % 4) * 32, SBO 1024;
//   K (B, K-major): start k + panel(kk) * BN * 128 + (kk % 4) * 32, SBO 1024;
//   V (B, MN-major): start v + kk * 16 * 128 (16 keys), SBO 1024 (next 8 keys), LBO BN * 128
//     (next 64 columns of D).
// K/V tiles are gathered through the block table by cp.async (16 bytes per thread per copy;
// paged tiles are not rectangular, so no TMA) into a 2-stage ring: tile t + 1 loads while tile t
// is computed; the writers fence the async proxy before the barrier that hands a tile to wgmma.
// Causality: the block stops at the key tile holding its last row's position; a warpgroup skips
// tiles wholly above its rows and masks only tiles that cross its diagonal.
//
// head_dim 64 and 128 only (launch_v3 sends the others to v2x2). Not yet measured on a GPU: v2x2
// stays the default; FOLIO_PREFILL_KERNEL=v3 or PrefillPlan::kernel selects this one.
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/smem_opt_in.h"
#include "backend/cuda/wgmma_ptx.cuh"

namespace folio::cuda::prefill_detail {
namespace v3k {
namespace {

constexpr int kWarpgroups = 2;
constexpr int kThreads = 128 * kWarpgroups;
constexpr int BM = 64 * kWarpgroups;  // rows per block
constexpr int BN = 64;                // keys per tile
constexpr int kStages = 2;

template <typename T>
struct Args {
  const T* q;
  const T* k_cache;
  const T* v_cache;
  T* out;
  const int32_t* query_start;
  const int32_t* context_lens;
  const int32_t* block_table_start;
  const int32_t* block_table;
  int num_heads, num_kv_heads, head_dim, block_size, row_tiles;
  int block_shift;   // log2(block_size) when it is a power of two, else -1 (divide)
  float scale_log2;  // scale * log2(e): the softmax runs in base 2
};

template <int D>
struct Cfg {
  static constexpr int kQBytes = BM * D * 2;
  static constexpr int kTileBytes = BN * D * 2;  // one K or V stage
  // Q, K[kStages], V[kStages], each 1024-byte aligned; + 1024 to align the dynamic base.
  static constexpr size_t kBytes = size_t{kQBytes} + 2 * kStages * kTileBytes + 1024;
};

// Byte offset of element (row, col) in a 128-byte-swizzled tile of `rows` rows (see the top).
__device__ __forceinline__ uint32_t sw128_offset(int row, int col, int rows) {
  return static_cast<uint32_t>((col >> 6) * rows * 128 + row * 128 +
                               ((((col >> 3) & 7) ^ (row & 7)) << 4) + (col & 7) * 2);
}

// Repacks S's accumulator n-blocks 2kk, 2kk + 1 (16 keys) into the A fragment of P · V.
template <typename T>
__device__ __forceinline__ void pack_p(uint32_t (&a)[4], const float (&s)[BN / 2], int kk) {
  const float* x = s + 8 * kk;
  a[0] = pack2<T>(x[0], x[1]);  // row g,     keys 2t, 2t + 1
  a[1] = pack2<T>(x[2], x[3]);  // row g + 8
  a[2] = pack2<T>(x[4], x[5]);  // row g,     keys 8 + 2t, 8 + 2t + 1
  a[3] = pack2<T>(x[6], x[7]);  // row g + 8
}

template <typename T, int D>
__device__ __forceinline__ void pv_mma(float (&o)[D / 2], const uint32_t (&a)[4], uint64_t desc) {
  if constexpr (D == 64) {
    wgmma_m64n64k16_rs_tb<T>(o, a, desc, 1);
  } else {
    static_assert(D == 128, "v3 runs head_dim 64 and 128");
    wgmma_m64n128k16_rs_tb<T>(o, a, desc, 1);
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1) prefill_v3_kernel(Args<T> a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma needs sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  using C = Cfg<D>;
  constexpr int CPR = D / 8;  // 16-byte chunks per row
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // The swizzle pattern repeats every 1024 bytes of shared address: align the tiles to it.
  const uint32_t raw_addr = smem_addr(smem_raw);
  const uint32_t q_addr = (raw_addr + 1023u) & ~1023u;
  unsigned char* const q_s = smem_raw + (q_addr - raw_addr);
  unsigned char* const k_s = q_s + C::kQBytes;               // stage st at + st * kTileBytes
  unsigned char* const v_s = k_s + kStages * C::kTileBytes;  // likewise
  const uint32_t k_addr = q_addr + C::kQBytes;
  const uint32_t v_addr = k_addr + kStages * C::kTileBytes;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wg = warp / 4;
  const int s = blockIdx.y, kvh = blockIdx.z;
  const int tile = a.row_tiles - 1 - blockIdx.x;  // the longest (latest rows) launch first
  const int qs = a.query_start[s], q_len = a.query_start[s + 1] - qs;
  const int G = a.num_heads / a.num_kv_heads;
  const int rows = q_len * G, r0 = tile * BM;
  if (r0 >= rows) return;
  const int first_pos = a.context_lens[s] - q_len;
  const int last_row = min(r0 + BM, rows) - 1;
  const int last_pos = first_pos + last_row / G;
  const int kv_end = last_pos + 1;
  const int n_tiles = (kv_end + BN - 1) / BN;
  const int32_t* const table = a.block_table + a.block_table_start[s];
  const int bs = a.block_size;
  const int64_t slot_stride = static_cast<int64_t>(a.num_kv_heads) * D;
  const int64_t head_off = static_cast<int64_t>(kvh) * D;

  // Q rows past the end are zero-filled (finite scores; never stored).
  for (int i = threadIdx.x; i < BM * CPR; i += kThreads) {
    const int r = i / CPR, c = (i % CPR) * 8, gr = r0 + r;
    const bool ok = gr <= last_row;
    const int64_t qrow =
        ok ? static_cast<int64_t>(qs + gr / G) * a.num_heads + kvh * G + gr % G : 0;
    cp_async_16(q_s + sw128_offset(r, c, BM), a.q + qrow * D + c, ok);
  }
  // Keys [t * BN, t * BN + BN) into stage st; keys >= kv_end are zero-filled (their scores are
  // masked, and a zero V row keeps 0 * V finite).
  auto load_kv = [&](int t, int st) {
    unsigned char* const kd = k_s + st * C::kTileBytes;
    unsigned char* const vd = v_s + st * C::kTileBytes;
#pragma unroll 4
    for (int i = threadIdx.x; i < BN * CPR; i += kThreads) {
      const int r = i / CPR, c = (i % CPR) * 8, j = t * BN + r;
      const bool ok = j < kv_end;
      const int blk = a.block_shift >= 0 ? j >> a.block_shift : j / bs;
      const int64_t slot = static_cast<int64_t>(ok ? table[blk] : 0) * bs + (j - blk * bs);
      const int64_t off = ok ? slot * slot_stride + head_off + c : 0;
      const uint32_t so = sw128_offset(r, c, BN);
      cp_async_16(kd + so, a.k_cache + off, ok);
      cp_async_16(vd + so, a.v_cache + off, ok);
    }
  };
  load_kv(0, 0);
  cp_async_commit();  // group 0: Q and tile 0

  const int g = lane / 4, tq = lane % 4;
  const int wg_r0 = wg * 64;                // this warpgroup's first row in the block
  const int wr0 = wg_r0 + (warp % 4) * 16;  // this warp's first row
  // Positions of this thread's rows (half h: row wr0 + 8 h + g); rows past the end take the
  // last position so that no row is wholly masked.
  int pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) pos[h] = first_pos + min(r0 + wr0 + 8 * h + g, last_row) / G;
  const int warp_min_pos = first_pos + min(r0 + wr0, last_row) / G;
  // Warpgroup-uniform: every wgmma below is issued by all 128 threads or none.
  const bool wg_live = r0 + wg_r0 <= last_row;  // else all its rows are padding: no math
  const int wg_max_pos = first_pos + min(r0 + wg_r0 + 63, last_row) / G;

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int t = 0; t < n_tiles; ++t) {
    const int st = t % kStages;
    // Stage (t + 1) % 2 was last read in iteration t - 1 (its wgmma retired before the barrier
    // that ended it).
    if (t + 1 < n_tiles) load_kv(t + 1, (t + 1) % kStages);
    cp_async_commit();   // possibly empty: keeps the group count uniform
    cp_async_wait<1>();  // everything but tile t + 1 has landed
    fence_proxy_async_smem();
    __syncthreads();
    const int kt = t * BN;
    if (wg_live && kt <= wg_max_pos) {
      // S (64 x BN) = Q · K^T over D / 16 steps of 16 columns.
      float sc[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) sc[i] = 0.f;
      wgmma_fence_operand(sc);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t qa = q_addr + (kk / 4) * BM * 128 + wg_r0 * 128 + (kk % 4) * 32;
        const uint32_t ka = k_addr + st * C::kTileBytes + (kk / 4) * BN * 128 + (kk % 4) * 32;
        wgmma_m64n64k16_ss<T>(sc, wgmma_desc_sw128(qa, 16, 1024), wgmma_desc_sw128(ka, 16, 1024),
                              kk > 0 ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operand(sc);
      // Causal mask, only on tiles crossing this warp's diagonal (sc[4n + e]: row g + 8 (e / 2),
      // key kt + 8n + 2 tq + e % 2).
      if (kt + BN - 1 > warp_min_pos) {
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (kt + n * 8 + 2 * tq + (e & 1) > pos[e / 2]) sc[4 * n + e] = -INFINITY;
      }
      // Online softmax in base 2. Tile 0 holds key 0, visible to every row, so m is finite
      // from then on and exp2(-inf - m) = 0 covers the masked entries.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
          mx = fmaxf(mx, fmaxf(sc[4 * n + 2 * h], sc[4 * n + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[h], mx * a.scale_log2);
        const float alpha = fast_exp2(m[h] - m_new);
        m[h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int e = 2 * h; e < 2 * h + 2; ++e) {
            const float p = fast_exp2(fmaf(sc[4 * n + e], a.scale_log2, -m_new));
            sc[4 * n + e] = p;
            sum += p;
          }
        l[h] = l[h] * alpha + sum;  // this thread's columns only; summed at the end
#pragma unroll
        for (int d = 0; d < D / 8; ++d) {
          o[4 * d + 2 * h] *= alpha;
          o[4 * d + 2 * h + 1] *= alpha;
        }
      }
      // O += P · V over BN / 16 steps of 16 keys; P stays in registers until the wait.
      uint32_t pf[BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) pack_p<T>(pf[kk], sc, kk);
      wgmma_fence_operand(o);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        const uint32_t va = v_addr + st * C::kTileBytes + kk * 16 * 128;
        pv_mma<T, D>(o, pf[kk], wgmma_desc_sw128(va, BN * 128, 1024));
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operand(o);
    }
    __syncthreads();  // stage t % 2 is free for the load issued in iteration t + 1
  }

  // Epilogue: finish l across the quad, normalise, store the real rows.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int gr = r0 + wr0 + 8 * h + g;
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (gr > last_row) continue;
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int64_t orow = static_cast<int64_t>(qs + gr / G) * a.num_heads + kvh * G + gr % G;
    T* const dst = a.out + orow * D + 2 * tq;
#pragma unroll
    for (int d = 0; d < D / 8; ++d)
      *reinterpret_cast<uint32_t*>(dst + d * 8) =
          pack2<T>(o[4 * d + 2 * h] * inv, o[4 * d + 2 * h + 1] * inv);
  }
#endif
}

template <typename T, int D>
Status launch(const Args<T>& a, int num_seqs, void* stream) {
  auto kernel = prefill_v3_kernel<T, D>;
  constexpr size_t bytes = Cfg<D>::kBytes;
  static_assert(bytes <= 227 * 1024, "shared memory per block");
  FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes));
  const dim3 grid(a.row_tiles, num_seqs, a.num_kv_heads);
  kernel<<<grid, kThreads, bytes, as_stream(stream)>>>(a);
  return launch_status("prefill_v3_kernel");
}

}  // namespace
}  // namespace v3k

Status launch_v3(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  if (p.head_dim != 64 && p.head_dim != 128) return launch_v2(p, plan, 32, stream);
  const int64_t row_tiles = (plan.max_rows + v3k::BM - 1) / v3k::BM;
  if (row_tiles == 0) return Status();
  if (row_tiles > 0x7fffffff) return invalid_argument("prefill_attention: too many rows");
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    v3k::Args<T> a{};
    a.q = static_cast<const T*>(p.q);
    a.k_cache = static_cast<const T*>(p.k_cache);
    a.v_cache = static_cast<const T*>(p.v_cache);
    a.out = static_cast<T*>(p.out);
    a.query_start = p.query_start;
    a.context_lens = p.context_lens;
    a.block_table_start = p.block_table_start;
    a.block_table = p.block_table;
    a.num_heads = p.num_heads;
    a.num_kv_heads = p.num_kv_heads;
    a.head_dim = p.head_dim;
    a.block_size = p.block_size;
    a.block_shift = (p.block_size & (p.block_size - 1)) == 0 ? __builtin_ctz(p.block_size) : -1;
    a.row_tiles = static_cast<int>(row_tiles);
    a.scale_log2 = p.scale * 1.4426950408889634f;
    if (p.head_dim == 64) return v3k::launch<T, 64>(a, p.num_seqs, stream);
    return v3k::launch<T, 128>(a, p.num_seqs, stream);
  });
}

}  // namespace folio::cuda::prefill_detail
