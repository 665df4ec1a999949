// Prefill attention v2: FlashAttention-2 on mma.sync (sm_80+, run on sm_90).
//
// Grid (row tiles, sequences, KV heads); a block of 4 warps takes BM (token, q head) rows of one
// sequence and one KV head, the GQA group folded into the rows (row r = token r / G, head
// kvh * G + r % G) so each K/V tile serves the whole group. Each warp owns MT x 16 rows: its Q
// fragments (when they fit), its O accumulator and its softmax state (m, l) live in registers.
// Keys are walked in tiles of BN = 64 through the block table (a tile may span many blocks;
// block_size 1 works) into double-buffered shared memory with cp.async, so tile t + 1 loads while
// tile t is computed. Causality: the block stops at the key tile holding its last row's
// position; a warp skips tiles wholly above its rows and masks only tiles that cross its
// diagonal. A sliding window W (row at position p sees keys (p - W, p]) is the same band from
// below: the block starts at the tile of its first row's first key, a warp skips tiles wholly
// below its rows' windows and masks the tiles that cross a window's start.
//
// head_dim D runs on the instantiation with the smallest padded width DP >= D (16, 32, 64, 80,
// 96, 128, 256); columns [D, DP) of the shared tiles are zeroed once, contribute nothing to Q·K^T
// and are never stored. Shared rows are DP + 8 elements: 16-byte-shifted rows make every
// ldmatrix (8 rows x 16 bytes) conflict-free since (DP + 8) * 2 / 16 is odd.
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/paged_kernel_args.cuh"
#include "backend/cuda/prefill_attention_kernels.h"

namespace folio::cuda::prefill_detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int BN = 64;  // keys per tile

template <typename T>
using Args = PrefillArgs<T>;

template <int DP, int MT>
struct Cfg {
  static constexpr int BM = 16 * MT * kWarps;  // rows per block
  static constexpr int LD = DP + 8;            // shared row stride, elements
  // Q fragments in registers, loaded straight from global memory (no Q tile in shared memory):
  // 69.6 KB at DP 128, so 3 blocks fit an SM (168 registers a thread).
  static constexpr bool kQRegs = MT == 1 && DP <= 128;
  static constexpr int kQRows = kQRegs ? 0 : BM;
  static constexpr int kRows = kQRows + 4 * BN;  // [Q], K[2], V[2], contiguous
  static constexpr size_t kBytes = size_t{2} * kRows * LD;
  static constexpr int kMinBlocks = kQRegs ? 3 : (MT == 1 ? 1 : 2);
};

template <typename T, int DP, int MT>
__global__ void __launch_bounds__(kThreads, (Cfg<DP, MT>::kMinBlocks))
    prefill_v2_kernel(Args<T> a) {
  using C = Cfg<DP, MT>;
  constexpr int BM = C::BM, LD = C::LD, CPR = DP / 8;  // 16-byte chunks per padded row
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* const q_s = reinterpret_cast<T*>(smem_raw);  // unused when C::kQRegs
  T* const k_s = q_s + C::kQRows * LD;            // stage st at k_s + st * BN * LD
  T* const v_s = k_s + 2 * BN * LD;               // likewise

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int s = blockIdx.y, kvh = blockIdx.z;
  const int tile = a.row_tiles - 1 - blockIdx.x;  // the longest (latest rows) launch first
  const int qs = a.query_start[s], q_len = a.query_start[s + 1] - qs;
  const int G = a.num_heads / a.num_kv_heads;
  const int rows = q_len * G, r0 = tile * BM;
  if (r0 >= rows) return;
  const int D = a.head_dim;
  const int first_pos = a.context_lens[s] - q_len;
  const int last_row = min(r0 + BM, rows) - 1;
  const int last_pos = first_pos + last_row / G;
  const int kv_end = last_pos + 1;
  const int n_tiles = (kv_end + BN - 1) / BN;
  const int W = a.window;  // > 0: key j is visible from position p iff p - W < j <= p
  const int t_begin = W > 0 ? max(0, first_pos + r0 / G - W + 1) / BN : 0;
  const int32_t* const table = a.block_table + a.block_table_start[s];
  const int bs = a.block_size;
  const int64_t slot_stride = static_cast<int64_t>(a.num_kv_heads) * D;
  const int64_t head_off = static_cast<int64_t>(kvh) * D;

  if (D < DP) {  // zero the pad columns of every tile once; cp.async never writes them
    const int pad = (DP - D) / 8;
    for (int i = threadIdx.x; i < C::kRows * pad; i += kThreads)
      *reinterpret_cast<uint4*>(q_s + (i / pad) * LD + D + (i % pad) * 8) = make_uint4(0, 0, 0, 0);
  }
  // Q rows past the end are zero-filled (finite scores; never stored).
  for (int i = threadIdx.x; i < C::kQRows * CPR; i += kThreads) {
    const int r = i / CPR, c = (i % CPR) * 8, gr = r0 + r;
    if (c >= D) continue;
    const bool ok = gr <= last_row;
    const int64_t qrow =
        ok ? static_cast<int64_t>(qs + gr / G) * a.num_heads + kvh * G + gr % G : 0;
    cp_async_16(q_s + r * LD + c, a.q + qrow * D + c, ok);
  }
  // Keys [t * BN, t * BN + BN) into stage st; keys >= kv_end are zero-filled (their scores are
  // masked, and a zero V row keeps 0 * V finite).
  auto load_kv = [&](int t, int st) {
    T* const kd = k_s + st * BN * LD;
    T* const vd = v_s + st * BN * LD;
#pragma unroll 4
    for (int i = threadIdx.x; i < BN * CPR; i += kThreads) {
      const int r = i / CPR, c = (i % CPR) * 8, j = t * BN + r;
      if (c >= D) continue;
      const bool ok = j < kv_end;
      // Slot of key j: block j / bs of the table, entry j % bs (shifts for power-of-two sizes).
      const int blk = a.block_shift >= 0 ? j >> a.block_shift : j / bs;
      const int64_t slot = static_cast<int64_t>(ok ? table[blk] : 0) * bs + (j - blk * bs);
      const int64_t off = ok ? slot * slot_stride + head_off + c : 0;
      cp_async_16(kd + r * LD + c, a.k_cache + off, ok);
      cp_async_16(vd + r * LD + c, a.v_cache + off, ok);
    }
  };
  load_kv(t_begin, t_begin % 2);
  cp_async_commit();  // group 0: [Q and] the first tile

  const int g = lane / 4, tq = lane % 4;
  const int wr0 = warp * 16 * MT;  // this warp's first row in the block
  // Q as A fragments (layout in mma_ptx.cuh), 4-byte loads while tile 0 is in flight; rows past
  // the end and pad columns are zero.
  uint32_t qf[C::kQRegs ? DP / 16 : 1][4];
  if constexpr (C::kQRegs) {
    const uint32_t* qrow[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gr = r0 + wr0 + 8 * h + g;
      const int64_t row = static_cast<int64_t>(qs + gr / G) * a.num_heads + kvh * G + gr % G;
      qrow[h] = gr <= last_row ? reinterpret_cast<const uint32_t*>(a.q + row * D) : nullptr;
    }
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // e: a0..a3 = (row g | g + 8) x (cols 2t | 2t + 8)
        const int c = kk * 16 + 2 * tq + (e / 2) * 8;
        const uint32_t* src = qrow[e % 2];
        qf[kk][e] = src != nullptr && c < D ? src[c / 2] : 0u;
      }
  }
  // Positions of this thread's rows (m-tile i, half h: row wr0 + 16 i + 8 h + g). Rows past the
  // end take the last position so that no row is wholly masked.
  int pos[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      pos[i][h] = first_pos + min(r0 + wr0 + 16 * i + 8 * h + g, last_row) / G;
  const int warp_min_pos = first_pos + min(r0 + wr0, last_row) / G;
  const int warp_max_pos = first_pos + min(r0 + wr0 + 16 * MT - 1, last_row) / G;
  const bool warp_live = r0 + wr0 <= last_row;  // else all its rows are padding: no math

  float o[MT][DP / 8][4];
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int d = 0; d < DP / 8; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[i][d][e] = 0.f;
    m[i][0] = m[i][1] = -INFINITY;
    l[i][0] = l[i][1] = 0.f;
  }
  // ldmatrix row/col offsets of this lane (see mma_ptx.cuh): A from row-major Q, B from K rows
  // (non-transposed) and from V rows (transposed).
  const int a_row = lane % 16, a_col = (lane / 16) * 8;
  const int k_row = (lane % 8) + (lane / 16) * 8, k_col = ((lane / 8) % 2) * 8;
  const int v_row = (lane % 8) + ((lane / 8) % 2) * 8, v_col = (lane / 16) * 8;

  for (int t = t_begin; t < n_tiles; ++t) {
    // Stage (t + 1) % 2 was last read in iteration t - 1, which ended with a barrier.
    if (t + 1 < n_tiles) load_kv(t + 1, (t + 1) % 2);
    cp_async_commit();   // possibly empty: keeps the group count uniform
    cp_async_wait<1>();  // everything but tile t + 1 has landed
    __syncthreads();
    const int kt = t * BN;
    const bool below_windows = W > 0 && kt + BN - 1 <= warp_min_pos - W;
    if (warp_live && kt <= warp_max_pos && !below_windows) {  // warp-uniform: a key is visible
      const T* const ks = k_s + (t % 2) * BN * LD;
      const T* const vs = v_s + (t % 2) * BN * LD;
      // S[MT x 16][BN] = Q · K^T
      float sc[MT][BN / 8][4];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[i][n][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        if (kk * 16 >= D) break;  // all-zero pad columns
        uint32_t af[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          if constexpr (C::kQRegs) {
#pragma unroll
            for (int e = 0; e < 4; ++e) af[i][e] = qf[C::kQRegs ? kk : 0][e];
          } else {
            ldmatrix_x4(af[i], q_s + (wr0 + 16 * i + a_row) * LD + kk * 16 + a_col);
          }
        }
#pragma unroll
        for (int np = 0; np < BN / 16; ++np) {
          uint32_t b[4];
          ldmatrix_x4(b, ks + (np * 16 + k_row) * LD + kk * 16 + k_col);
#pragma unroll
          for (int i = 0; i < MT; ++i) {
            mma_16816<T>(sc[i][2 * np], af[i], b[0], b[1]);
            mma_16816<T>(sc[i][2 * np + 1], af[i], b[2], b[3]);
          }
        }
      }
      // Causal mask, only on tiles crossing this warp's diagonal (or a window's start).
      if (kt + BN - 1 > warp_min_pos || (W > 0 && kt <= warp_max_pos - W)) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int n = 0; n < BN / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int j = kt + n * 8 + 2 * tq + (e & 1), p = pos[i][e / 2];
              if (j > p || (W > 0 && j <= p - W)) sc[i][n][e] = -INFINITY;
            }
      }
      // Online softmax in base 2. Without a window tile 0 holds key 0, visible to every row, so
      // m is finite from then on and exp2(-inf - m) = 0 covers the masked entries; a window can
      // mask a row's whole tile, so a max still -inf subtracts 0 instead (no -inf - -inf).
#pragma unroll
      for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float mx = -INFINITY;
#pragma unroll
          for (int n = 0; n < BN / 8; ++n)
            mx = fmaxf(mx, fmaxf(sc[i][n][2 * h], sc[i][n][2 * h + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float m_new = fmaxf(m[i][h], mx * a.scale_log2);
          const float m_sub = m_new == -INFINITY ? 0.f : m_new;
          const float alpha = fast_exp2(m[i][h] - m_sub);
          m[i][h] = m_new;
          float sum = 0.f;
#pragma unroll
          for (int n = 0; n < BN / 8; ++n)
#pragma unroll
            for (int e = 2 * h; e < 2 * h + 2; ++e) {
              const float p = fast_exp2(fmaf(sc[i][n][e], a.scale_log2, -m_sub));
              sc[i][n][e] = p;
              sum += p;
            }
          l[i][h] = l[i][h] * alpha + sum;  // this thread's columns only; summed at the end
#pragma unroll
          for (int d = 0; d < DP / 8; ++d) {
            o[i][d][2 * h] *= alpha;
            o[i][d][2 * h + 1] *= alpha;
          }
        }
      }
      // O += P · V, P taken straight from the score accumulators (C layout = A layout pairs).
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t pf[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          pf[i][0] = pack2<T>(sc[i][2 * kk][0], sc[i][2 * kk][1]);
          pf[i][1] = pack2<T>(sc[i][2 * kk][2], sc[i][2 * kk][3]);
          pf[i][2] = pack2<T>(sc[i][2 * kk + 1][0], sc[i][2 * kk + 1][1]);
          pf[i][3] = pack2<T>(sc[i][2 * kk + 1][2], sc[i][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < DP / 16; ++dp) {
          if (dp * 16 >= D) break;  // pad output columns are never stored
          uint32_t b[4];
          ldmatrix_x4_trans(b, vs + (kk * 16 + v_row) * LD + dp * 16 + v_col);
#pragma unroll
          for (int i = 0; i < MT; ++i) {
            mma_16816<T>(o[i][2 * dp], pf[i], b[0], b[1]);
            mma_16816<T>(o[i][2 * dp + 1], pf[i], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // stage t % 2 is free for the load issued in iteration t + 1
  }

  // Epilogue: finish l across the quad, normalise, store the real rows and columns.
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gr = r0 + wr0 + 16 * i + 8 * h + g;
      float sum = l[i][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (gr > last_row) continue;
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const int64_t orow = static_cast<int64_t>(qs + gr / G) * a.num_heads + kvh * G + gr % G;
      T* const dst = a.out + orow * D + 2 * tq;
#pragma unroll
      for (int d = 0; d < DP / 8; ++d) {
        if (d * 8 >= D) break;
        *reinterpret_cast<uint32_t*>(dst + d * 8) =
            pack2<T>(o[i][d][2 * h] * inv, o[i][d][2 * h + 1] * inv);
      }
    }
}

template <typename T, int DP, int MT>
Status launch(const Args<T>& a, int num_seqs, void* stream) {
  auto kernel = prefill_v2_kernel<T, DP, MT>;
  constexpr size_t bytes = Cfg<DP, MT>::kBytes;
  static_assert(bytes <= 227 * 1024, "shared memory per block");
  // Above 48 KiB a kernel must opt in, on every device it runs on.
  FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes));
  const dim3 grid(a.row_tiles, num_seqs, a.num_kv_heads);
  kernel<<<grid, kThreads, bytes, as_stream(stream)>>>(a);
  return launch_status("prefill_v2_kernel");
}

template <typename T, int MT>
Status launch_dp(const Args<T>& a, int num_seqs, void* stream) {
  const int d = a.head_dim;
  if (d <= 16) return launch<T, 16, MT>(a, num_seqs, stream);
  if (d <= 32) return launch<T, 32, MT>(a, num_seqs, stream);
  if (d <= 64) return launch<T, 64, MT>(a, num_seqs, stream);
  if (d <= 80) return launch<T, 80, MT>(a, num_seqs, stream);
  if (d <= 96) return launch<T, 96, MT>(a, num_seqs, stream);
  if (d <= 128) return launch<T, 128, MT>(a, num_seqs, stream);
  if constexpr (MT == 1) return launch<T, 256, MT>(a, num_seqs, stream);
  return internal_error("prefill v2: head_dim " + std::to_string(d) + " with 32 rows per warp");
}

}  // namespace

Status launch_v2(const PagedAttentionParams& p, const PrefillPlan& plan, int rows_per_warp,
                 void* stream) {
  // 32 rows per warp only where its registers fit (O is MT * DP / 2 floats per thread).
  const int mt = rows_per_warp == 32 && p.head_dim <= 128 ? 2 : 1;
  const int64_t bm = int64_t{16} * mt * kWarps;
  const int64_t row_tiles = (plan.max_rows + bm - 1) / bm;
  if (row_tiles == 0) return Status();
  if (row_tiles > 0x7fffffff) return invalid_argument("prefill_attention: too many rows");
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    Args<T> a{};
    a.set(p, static_cast<int>(row_tiles));
    if (mt == 2) return launch_dp<T, 2>(a, p.num_seqs, stream);
    return launch_dp<T, 1>(a, p.num_seqs, stream);
  });
}

}  // namespace folio::cuda::prefill_detail
