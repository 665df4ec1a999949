// Decode kernel tc's arithmetic on one 16-token chunk of a warp (decode_attention_tc.cuh):
// S^T = K·q^T on tensor cores, the online softmax per q head, O^T += V^T·P^T. The kernel's
// streaming forms (registers, cp.async ring, bulk rings) differ only in how the chunk reached the
// lane: as the register form's pieces (ChunkRegs, in the layout L) or as mma fragments read by
// ldmatrix (ChunkFrags, L = RowsLayout).
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/cuda/decode_attention_partitions.cuh"
#include "backend/cuda/decode_attention_tc_layout.cuh"
#include "backend/cuda/decode_attention_tc_stages.cuh"
#include "backend/cuda/mma_16816.cuh"

namespace folio::cuda::detail {
namespace {
namespace tc {

// One lane's share of a warp's softmax and output for heads 2t and 2t + 1 (the lane's columns of
// S^T and of O^T): the running max (log2 units, the same in all 8 lanes of a t), this lane's
// share of the sum, and O^T's fragments.
template <typename L>
struct TcAccumulator {
  using Mma = typename L::Mma;
  float m_a = kNoMax, m_b = kNoMax, l_a = 0.f, l_b = 0.f;
  float o[8][4];  // O^T m-tile i: (vdim, head 2t), (vdim, 2t + 1), (vdim + 1, 2t), ...

  __device__ __forceinline__ TcAccumulator() {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[i][e] = 0.f;
  }

  // The chunk `cur` (the register form's pieces or, in the fragment form, the fragments) scored
  // against q's B fragments qb0/qb1 and accumulated. `tok`: the partition-local index of the
  // lane's first token (pi(g) of the chunk); tokens at or past `n` are masked.
  template <typename Chunk>
  __device__ __forceinline__ void add(const Chunk& cur, const uint32_t (&qb0)[8],
                                      const uint32_t (&qb1)[8], int tok, int n, float scale_log2) {
    constexpr bool kFromFrags = std::is_same_v<Chunk, ChunkFrags>;
    // S^T = K · q^T: A = the chunk's K (row g: token pi(g), row g + 8: token pi(g) + 2; the
    // lane's K pieces are exactly that A fragment), B = q^T (n = q head). Lane (g, t) gets the
    // scores of tokens pi(g) (s[0], s[1]) and pi(g) + 2 (s[2], s[3]) for heads 2t, 2t + 1.
    float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t ka[4];
      if constexpr (kFromFrags) {
#pragma unroll
        for (int e = 0; e < 4; ++e) ka[e] = cur.k[j][e];
      } else {
        L::k_words(cur.k[0], j, ka[0], ka[2]);
        L::k_words(cur.k[1], j, ka[1], ka[3]);
      }
      mma_16816<Mma>(s, ka, qb0[j], qb1[j]);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) s[e] = tok + (e / 2) * 2 < n ? s[e] * scale_log2 : -INFINITY;
    // Each head's max over the chunk: its two tokens here, then the 8 lanes of this t.
    float mx_a = fmaxf(s[0], s[2]), mx_b = fmaxf(s[1], s[3]);
#pragma unroll
    for (int off = 4; off < 32; off *= 2) {
      mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, off));
      mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, off));
    }
    const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
    const float alpha_a = fast_exp2(m_a - mn_a), alpha_b = fast_exp2(m_b - mn_b);
    m_a = mn_a;
    m_b = mn_b;
    const float p0 = fast_exp2(s[0] - m_a), p1 = fast_exp2(s[1] - m_b);
    const float p2 = fast_exp2(s[2] - m_a), p3 = fast_exp2(s[3] - m_b);
    l_a = l_a * alpha_a + (p0 + p2);
    l_b = l_b * alpha_b + (p1 + p3);
    // P^T as P·V's B operand (k = tokens 4t .. 4t + 3, n = head g): the two 8 x 8 blocks of P
    // (rows: tokens pi(0..7), pi(0..7) + 2; columns: heads) transposed across the warp.
    const uint32_t pb0 = movmatrix_trans(pack2<Mma>(p0, p1));
    const uint32_t pb1 = movmatrix_trans(pack2<Mma>(p2, p3));
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      o[i][0] *= alpha_a;
      o[i][1] *= alpha_b;
      o[i][2] *= alpha_a;
      o[i][3] *= alpha_b;
      uint32_t va[4];
      if constexpr (kFromFrags) {
#pragma unroll
        for (int e = 0; e < 4; ++e) va[e] = cur.v[i][e];
      } else {
        L::v_a(cur.v, i, va);
      }
      mma_16816<Mma>(o[i], va, pb0, pb1);
    }
  }
};

}  // namespace tc
}  // namespace
}  // namespace folio::cuda::detail
