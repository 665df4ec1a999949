// Cascade decode attention, the partial kernel's pieces below the block (cascade_attention.cu):
// its geometry, its shared-memory layout, one warp's step over a K/V tile (q·K^T, the online
// softmax, P·V on mma.m16n8k16) and the combine of warps that split a tile's keys. Device code,
// included by cascade_attention.cu only; the fragment layouts are mma_ptx.cuh's.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/online_softmax_rows.cuh"

namespace folio::cuda::cascade_kernel {

constexpr int kTileTokens = 64;  // keys per pipeline stage
constexpr int kStages = 3;       // tiles in flight: two load while one is computed
constexpr int kQRows = 64;       // query rows per block: 4 warps x 16
constexpr int kThreads = 128;
constexpr int kPad = 8;  // elements after each smem row: 8 ldmatrix rows then hit 32 distinct banks

// Shared memory in elements: stage s holds a K tile at (2 s) x kTile and a V tile at (2 s + 1) x
// kTile, each [64][D + pad]. Q [64][D + pad] waits in stage 2's K tile until the warps have read
// it into registers (before tile 2 is loaded there). At head_dim 128 that is 104 KB: two blocks
// per SM, each with two tiles (64 KB) in flight while it computes a third. (On the H200, session
// 46, with cp.async loads, three stages timed level with two: 715 against 711 us at b1024 x 2304
// in groups of 16; what moved it was bulk rows, CascadeLoad.)
template <int D>
struct Smem {
  static constexpr int kRow = D + kPad;
  static constexpr int kTile = kTileTokens * kRow;
  static_assert(kQRows == kTileTokens, "Q borrows one K tile");
  static constexpr size_t kBytes = static_cast<size_t>(2 * kStages * kTile) * 2;
  // combine_split_warps reuses it after the last tile: [4 warps][16 rows][D + 2] floats.
  static_assert(4 * 16 * (D + 2) * sizeof(float) <= kBytes);
};

// One warp's share of a K/V tile: its 16 query rows (A fragments qf) against kKeys keys of the
// tile starting at key0, folded into its running softmax (m_run, l_run in the exp2 domain) and
// unnormalised accumulator o. t0 is the tile's first token; keys at or past tok_end score -inf.
template <typename T, int D, int kKeys>
__device__ __forceinline__ void attend_keys(const T* tk, const T* tv, int key0, int t0, int tok_end,
                                            float scale_log2, const uint32_t (&qf)[D / 16][4],
                                            float (&o)[D / 8][4], float (&m_run)[2],
                                            float (&l_run)[2], int lane) {
  constexpr int kRow = Smem<D>::kRow;
  const int t4 = lane & 3, mi = lane >> 3, mr = lane & 7;
  float s[kKeys / 8][4];
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
    for (int np = 0; np < kKeys / 16; ++np) {
      uint32_t b[4];
      ldmatrix_x4(b, tk + (key0 + np * 16 + mr + (mi & 2) * 4) * kRow + kk * 16 + (mi & 1) * 8);
      mma_16816<T>(s[2 * np], qf[kk], b[0], b[1]);
      mma_16816<T>(s[2 * np + 1], qf[kk], b[2], b[3]);
    }
  }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int t = t0 + key0 + n * 8 + 2 * t4 + (c & 1);
      const float v = t < tok_end ? s[n][c] * scale_log2 : -INFINITY;
      s[n][c] = v;
      mx[c >> 1] = fmaxf(mx[c >> 1], v);
    }
  float corr[2];
  fold_row_max(mx, m_run, corr);
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n)
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
  // O += P · V: P's accumulators become the A fragments of 16-key steps.
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    const uint32_t pa[4] = {
        pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
        pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b,
                        tv + (key0 + kk * 16 + mr + (mi & 1) * 8) * kRow + dp * 16 + (mi & 2) * 4);
      mma_16816<T>(o[2 * dp], pa, b[0], b[1]);
      mma_16816<T>(o[2 * dp + 1], pa, b[2], b[3]);
    }
  }
}

// Warps that split one row group's keys (kSplit > 1) combine their partials into the group's
// first warp (part 0) through shared memory `buf` ([4 warps][16 rows][D + 2] floats: o, max,
// sum). Every thread of the block calls it (it synchronises). l_run is already summed over the
// quad. Part 0's max is finite: its keys include the item's first token.
template <int D>
__device__ __forceinline__ void combine_split_warps(float* buf, int warp, int split, bool active,
                                                    float (&o)[D / 8][4], float (&m_run)[2],
                                                    float (&l_run)[2], int lane) {
  constexpr int kStride = D + 2;
  const int g = lane >> 2, t4 = lane & 3, part = warp % split;
  if (active && part > 0) {
    float* mine = buf + warp * 16 * kStride;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float* row = mine + (g + h * 8) * kStride;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<float2*>(row + n * 8 + 2 * t4) =
            make_float2(o[n][2 * h], o[n][2 * h + 1]);
      if (t4 == 0) row[D] = m_run[h], row[D + 1] = l_run[h];
    }
  }
  __syncthreads();
  if (!active || part != 0) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + h * 8;
    float m_all = m_run[h];
    for (int p = 1; p < split; ++p) m_all = fmaxf(m_all, buf[((warp + p) * 16 + r) * kStride + D]);
    const float w0 = fast_exp2(m_run[h] - m_all);
    float l = l_run[h] * w0;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[n][2 * h] *= w0, o[n][2 * h + 1] *= w0;
    for (int p = 1; p < split; ++p) {
      const float* row = buf + ((warp + p) * 16 + r) * kStride;
      const float w = fast_exp2(row[D] - m_all);  // 0 where that warp saw only masked keys
      l += w * row[D + 1];
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const float2 v = *reinterpret_cast<const float2*>(row + n * 8 + 2 * t4);
        o[n][2 * h] += w * v.x;
        o[n][2 * h + 1] += w * v.y;
      }
    }
    m_run[h] = m_all;
    l_run[h] = l;
  }
}

}  // namespace folio::cuda::cascade_kernel
