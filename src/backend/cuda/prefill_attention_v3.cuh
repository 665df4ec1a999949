// Internal to prefill_attention_v3.cu and prefill_attention_v3n128.cu: the per-block state and
// tile steps shared by the v3 kernels (plain, pipelined, 128-key tiles); the layout and
// descriptor scheme is described in prefill_attention_v3.cu.
#pragma once

#include <cmath>

#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/paged_kernel_args.cuh"
#include "backend/cuda/swizzle128.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace folio::cuda::prefill_detail::v3k {

using folio::cuda::sw128_offset;  // swizzle128.cuh (the v3 family names it v3k::sw128_offset)

constexpr int kWarpgroups = 2;
constexpr int kThreads = 128 * kWarpgroups;
constexpr int BM = 64 * kWarpgroups;  // rows per block
constexpr int BN = 64;                // keys per tile of v3 / v3p / v3pq (v3n128: 128)

template <typename T>
using Args = PrefillArgs<T>;

// kQRegs: Q lives in registers as wgmma A fragments (no Q tile in shared memory). kBN: keys
// per tile (64 or 128).
template <int D, int Stages, bool kQRegs, int kBN = BN>
struct Cfg {
  static constexpr int kQBytes = kQRegs ? 0 : BM * D * 2;
  static constexpr int kTileBytes = kBN * D * 2;  // one K or V stage
  // [Q], K[Stages], V[Stages], each 1024-byte aligned; + 1024 to align the dynamic base.
  static constexpr size_t kBytes = size_t{kQBytes} + 2 * Stages * kTileBytes + 1024;
};

// Repacks S's accumulator n-blocks 2kk, 2kk + 1 (16 keys) into the A fragment of P · V
// (NS = tile keys / 2 floats per thread).
template <typename T, int NS>
__device__ __forceinline__ void pack_p(uint32_t (&a)[4], const float (&s)[NS], int kk) {
  const float* x = s + 8 * kk;
  a[0] = pack2<T>(x[0], x[1]);  // row g,     keys 2t, 2t + 1
  a[1] = pack2<T>(x[2], x[3]);  // row g + 8
  a[2] = pack2<T>(x[4], x[5]);  // row g,     keys 8 + 2t, 8 + 2t + 1
  a[3] = pack2<T>(x[6], x[7]);  // row g + 8
}

// One block's geometry, shared-memory tiles and tile steps. Methods named issue_* start wgmma
// groups (all 128 threads of the warpgroup must call them together) and do not wait. kBN: keys
// per tile, 64 (S by m64n64k16) or 128 (S by m64n128k16; Q from shared memory only).
template <typename T, int D, int Stages, bool kQRegs = false, int kBN = BN>
struct Block {
  static_assert(kBN == 64 || (kBN == 128 && !kQRegs), "key tiles of 64, or 128 with Q in smem");
  using C = Cfg<D, Stages, kQRegs, kBN>;
  static constexpr int CPR = D / 8;  // 16-byte chunks per row

  Args<T> a;
  unsigned char* q_s;  // [Q], then K[Stages], then V[Stages]
  uint32_t q_addr;     // its shared address, 1024-byte aligned
  int kvh, qs, G, r0, first_pos, last_row, kv_end, n_tiles;
  const int32_t* table;
  // This thread: warpgroup wg, rows wr0 + 8 h + g (h = 0, 1) at positions pos[h].
  int wg, wg_r0, wr0, g, tq, pos[2], warp_min_pos, wg_max_pos;
  bool live;     // the block has rows (else return at once)
  bool wg_live;  // warpgroup-uniform: some of the warpgroup's rows are real

  __device__ Block(const Args<T>& args, unsigned char* smem_raw) : a(args) {
    // The swizzle pattern repeats every 1024 bytes of shared address: align the tiles to it.
    const uint32_t raw_addr = smem_addr(smem_raw);
    q_addr = (raw_addr + 1023u) & ~1023u;
    q_s = smem_raw + (q_addr - raw_addr);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    wg = warp / 4;
    wg_r0 = wg * 64;
    wr0 = wg_r0 + (warp % 4) * 16;
    g = lane / 4;
    tq = lane % 4;
    set_item(blockIdx.x, blockIdx.y, blockIdx.z);
  }

  // Takes on work item (row tile a.row_tiles - 1 - tile_from_end, sequence s, KV head kv_head):
  // the grid launches the longest tiles (latest rows) first.
  __device__ void set_item(int tile_from_end, int s, int kv_head) {
    kvh = kv_head;
    const int tile = a.row_tiles - 1 - tile_from_end;
    qs = a.query_start[s];
    const int q_len = a.query_start[s + 1] - qs;
    G = a.group;
    const int rows = q_len * G;
    r0 = tile * BM;
    live = r0 < rows;
    first_pos = a.context_lens[s] - q_len;
    last_row = min(r0 + BM, rows) - 1;
    kv_end = first_pos + a.group_div.div(last_row) + 1;
    n_tiles = (kv_end + kBN - 1) / kBN;
    table = a.block_table + a.block_table_start[s];
    // Rows past the end take the last position so that no row is wholly masked.
    for (int h = 0; h < 2; ++h)
      pos[h] = first_pos + a.group_div.div(min(r0 + wr0 + 8 * h + g, last_row));
    warp_min_pos = first_pos + a.group_div.div(min(r0 + wr0, last_row));
    wg_live = r0 + wg_r0 <= last_row;
    wg_max_pos = first_pos + a.group_div.div(min(r0 + wg_r0 + 63, last_row));
  }

  __device__ unsigned char* k_tile(int st) const { return q_s + C::kQBytes + st * C::kTileBytes; }
  __device__ unsigned char* v_tile(int st) const {
    return q_s + C::kQBytes + (Stages + st) * C::kTileBytes;
  }
  __device__ uint32_t k_addr(int st) const { return q_addr + C::kQBytes + st * C::kTileBytes; }
  __device__ uint32_t v_addr(int st) const {
    return q_addr + C::kQBytes + (Stages + st) * C::kTileBytes;
  }
  // Key tiles this warpgroup computes: [0, wg_tiles); the later ones are above its rows.
  __device__ int wg_tiles() const { return wg_live ? wg_max_pos / kBN + 1 : 0; }

  // Q as this thread's A fragments (layout in wgmma_ptx.cuh) for the D / 16 k-steps, 4-byte
  // loads straight from global memory; rows past the end are zero.
  __device__ void load_q_frags(uint32_t (&qf)[D / 16][4]) const {
    const uint32_t* qrow[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gr = r0 + wr0 + 8 * h + g;
      const int64_t row = a.q_row(qs, kvh, gr);
      qrow[h] = gr <= last_row ? reinterpret_cast<const uint32_t*>(a.q + row * D) : nullptr;
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // a0..a3 = (row g | g + 8) x (cols 2t | 2t + 8)
        const uint32_t* src = qrow[e % 2];
        qf[kk][e] = src != nullptr ? src[(kk * 16 + 2 * tq + (e / 2) * 8) / 2] : 0u;
      }
  }

  // Q rows past the end are zero-filled (finite scores; never stored).
  __device__ void load_q() const { load_q_rows(0, BM, threadIdx.x, kThreads); }

  // Q rows [row0, row0 + nrows) of the tile by n_threads threads, this one being thread `tid`.
  __device__ void load_q_rows(int row0, int nrows, int tid, int n_threads) const {
    static_assert(!kQRegs, "Q is in registers");
    for (int i = tid; i < nrows * CPR; i += n_threads) {
      const int r = row0 + i / CPR, c = (i % CPR) * 8, gr = r0 + r;
      const bool ok = gr <= last_row;
      const int64_t qrow = ok ? a.q_row(qs, kvh, gr) : 0;
      cp_async_16(q_s + sw128_offset(r, c, BM), a.q + qrow * D + c, ok);
    }
  }

  // Keys [t * kBN, t * kBN + kBN) into stage st through the block table; keys >= kv_end are
  // zero-filled (their scores are masked, and a zero V row keeps 0 * V finite).
  __device__ void load_kv(int t, int st) const {
    unsigned char* const kd = k_tile(st);
    unsigned char* const vd = v_tile(st);
    const int64_t slot_stride = static_cast<int64_t>(a.num_kv_heads) * D;
    const int64_t head_off = static_cast<int64_t>(kvh) * D;
#pragma unroll 4
    for (int i = threadIdx.x; i < kBN * CPR; i += kThreads) {
      const int r = i / CPR, c = (i % CPR) * 8, j = t * kBN + r;
      const bool ok = j < kv_end;
      const int blk = a.block_shift >= 0 ? j >> a.block_shift : j / a.block_size;
      const int64_t slot =
          static_cast<int64_t>(ok ? table[blk] : 0) * a.block_size + (j - blk * a.block_size);
      const int64_t off = ok ? slot * slot_stride + head_off + c : 0;
      const uint32_t so = sw128_offset(r, c, kBN);
      cp_async_16(kd + so, a.k_cache + off, ok);
      cp_async_16(vd + so, a.v_cache + off, ok);
    }
  }

  // S (this warpgroup's 64 x kBN) = Q · K^T of stage st: D / 16 wgmmas, one commit group.
  // first_half (kBN 128 only): just keys [0, 64) of the tile, by m64n64k16 into sc[0, 32) (the
  // n64 accumulator layout is the first half of the n128 one); sc[32, 64) is left as it is.
  __device__ void issue_qk(float (&sc)[kBN / 2], int st, bool first_half = false) const {
    const uint64_t da0 = wgmma_desc_sw128(q_addr + wg_r0 * 128, 16, 1024);
    const uint64_t db0 = wgmma_desc_sw128(k_addr(st), 16, 1024);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = wgmma_desc_advance(da0, (kk / 4) * BM * 128 + (kk % 4) * 32);
      const uint64_t db = wgmma_desc_advance(db0, (kk / 4) * kBN * 128 + (kk % 4) * 32);
      if constexpr (kBN == 64) {
        wgmma_m64n64k16_ss<T>(sc, da, db, kk > 0 ? 1 : 0);
      } else if (first_half) {
        wgmma_m64n64k16_ss<T>(*reinterpret_cast<float(*)[32]>(sc), da, db, kk > 0 ? 1 : 0);
      } else {
        wgmma_m64n128k16_ss<T>(sc, da, db, kk > 0 ? 1 : 0);
      }
    }
    wgmma_commit();
  }

  // The same with Q from registers: only K is read from shared memory.
  __device__ void issue_qk(float (&sc)[kBN / 2], const uint32_t (&qf)[D / 16][4], int st,
                           bool first_half = false) const {
    const uint64_t db0 = wgmma_desc_sw128(k_addr(st), 16, 1024);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t db = wgmma_desc_advance(db0, (kk / 4) * kBN * 128 + (kk % 4) * 32);
      if constexpr (kBN == 64) {
        wgmma_m64n64k16_rs<T>(sc, qf[kk], db, kk > 0 ? 1 : 0);
      } else if (first_half) {
        wgmma_m64n64k16_rs<T>(*reinterpret_cast<float(*)[32]>(sc), qf[kk], db, kk > 0 ? 1 : 0);
      } else {
        wgmma_m64n128k16_rs<T>(sc, qf[kk], db, kk > 0 ? 1 : 0);
      }
    }
    wgmma_commit();
  }

  // Q as this thread's A fragments (load_q_frags' layout) from the Q tile in shared memory (the
  // 128-byte-swizzled panels v3tmaq's producer fills by TMA): 32 4-byte loads, pairs of columns
  // never straddle a 16-byte chunk.
  __device__ void load_q_frags_smem(uint32_t (&qf)[D / 16][4]) const {
    static_assert(!kQRegs, "Q has no shared-memory tile");
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e)  // a0..a3 = (row g | g + 8) x (cols 2t | 2t + 8)
        qf[kk][e] = *reinterpret_cast<const uint32_t*>(
            q_s + sw128_offset(wr0 + g + 8 * (e % 2), kk * 16 + 2 * tq + (e / 2) * 8, BM));
  }

  // O += P · V of stage st: kBN / 16 wgmmas (the first n_steps only: keys [0, 16 n_steps) of
  // the tile), one commit group; pf must stay untouched until the group retires.
  __device__ void issue_pv(float (&o)[D / 2], const uint32_t (&pf)[kBN / 16][4], int st,
                           int n_steps = kBN / 16) const {
    const uint64_t desc0 = wgmma_desc_sw128(v_addr(st), kBN * 128, 1024);
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      if (kk >= n_steps) break;
      const uint64_t desc = wgmma_desc_advance(desc0, kk * 16 * 128);
      if constexpr (D == 64) {
        wgmma_m64n64k16_rs_tb<T>(o, pf[kk], desc, 1);
      } else {
        static_assert(D == 128, "v3 runs head_dim 64 and 128");
        wgmma_m64n128k16_rs_tb<T>(o, pf[kk], desc, 1);
      }
    }
    wgmma_commit();
  }

  // Masks S of key tile t (sc[4n + e]: row g + 8 (e / 2), key t kBN + 8n + 2 tq + e % 2), then
  // turns it into P = exp2(S scale - m_new) in place, updating m and l; returns the factors
  // alpha[h] = exp2(m_old - m_new) that O's rows must be scaled by. Tile 0 holds key 0, visible
  // to every row, so m is finite from then on and exp2(-inf - m) = 0 covers masked entries.
  // kKeys < kBN: only the tile's first kKeys keys are read and turned into P (the caller knows
  // the rest are past every row of the warpgroup and does not use them).
  template <int kKeys = kBN>
  __device__ void softmax(float (&sc)[kBN / 2], int t, float (&m)[2], float (&l)[2],
                          float (&alpha)[2]) const {
    static_assert(kKeys % 16 == 0 && kKeys <= kBN, "whole P fragments");
    const int kt = t * kBN;
    if (kt + kKeys - 1 > warp_min_pos) {  // the keys cross this warp's diagonal
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (kt + n * 8 + 2 * tq + (e & 1) > pos[e / 2]) sc[4 * n + e] = -INFINITY;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
        mx = fmaxf(mx, fmaxf(sc[4 * n + 2 * h], sc[4 * n + 2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[h], mx * a.scale_log2);
      alpha[h] = fast_exp2(m[h] - m_new);
      m[h] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          const float p = fast_exp2(fmaf(sc[4 * n + e], a.scale_log2, -m_new));
          sc[4 * n + e] = p;
          sum += p;
        }
      l[h] = l[h] * alpha[h] + sum;  // this thread's columns only; summed at the end
    }
  }

  __device__ static void rescale(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
    for (int d = 0; d < D / 8; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[4 * d + e] *= alpha[e / 2];
  }

  // Finishes l across the quad, normalises, stores the real rows. Each quad holds one row's 8
  // columns of every group 8 j .. 8 j + 7 (thread tq: columns 8 j + 2 tq, + 1); two rounds of
  // exchanges inside the quad (partners tq ^ 1, then tq ^ 2) leave each thread 4 whole groups,
  // stored as 16-byte writes: the row's 128 columns in 4 stores a thread instead of 16 4-byte
  // ones (O's stores cost 8 x 1024 about 15% of its time: 355 against 415 TFLOP/s without them).
  __device__ void store(const float (&o)[D / 2], const float (&l)[2]) const {
    static_assert(D % 32 == 0, "whole groups of 4 column groups");
    const int odd = tq & 1, upper = tq >> 1;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gr = r0 + wr0 + 8 * h + g;
      float sum = l[h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.f ? fast_rcp(sum) : 0.f;
      // Round 1: of groups 2p and 2p + 1, the even thread keeps 2p, the odd one 2p + 1, each
      // with its partner's word: 4 columns (8 bytes) at 4 upper.
      uint32_t w2[D / 16][2];
#pragma unroll
      for (int p = 0; p < D / 16; ++p) {
        const uint32_t even = pack2<T>(o[8 * p + 2 * h] * inv, o[8 * p + 2 * h + 1] * inv);
        const uint32_t oddw = pack2<T>(o[8 * p + 4 + 2 * h] * inv, o[8 * p + 4 + 2 * h + 1] * inv);
        const uint32_t got = __shfl_xor_sync(0xffffffffu, odd ? even : oddw, 1);
        w2[p][0] = odd ? got : even;
        w2[p][1] = odd ? oddw : got;
      }
      // Round 2: of that thread's groups 2q and 2q + 1 (groups 2 (2q) + odd, 2 (2q + 1) + odd),
      // the lower thread keeps the first, the upper one the second, each with its partner's
      // half: a whole group (16 bytes).
      uint4 w4[D / 32];
#pragma unroll
      for (int q = 0; q < D / 32; ++q) {
        const uint32_t s0 = upper ? w2[2 * q][0] : w2[2 * q + 1][0];
        const uint32_t s1 = upper ? w2[2 * q][1] : w2[2 * q + 1][1];
        const uint32_t r0w = __shfl_xor_sync(0xffffffffu, s0, 2);
        const uint32_t r1w = __shfl_xor_sync(0xffffffffu, s1, 2);
        w4[q] = upper ? make_uint4(r0w, r1w, w2[2 * q + 1][0], w2[2 * q + 1][1])
                      : make_uint4(w2[2 * q][0], w2[2 * q][1], r0w, r1w);
      }
      if (gr > last_row) continue;
      const int64_t orow = a.q_row(qs, kvh, gr);
      T* const dst = a.out + orow * D;
#pragma unroll
      for (int q = 0; q < D / 32; ++q) {
        const int group = 2 * (2 * q + upper) + odd;  // columns 8 group .. 8 group + 7
        *reinterpret_cast<uint4*>(dst + 8 * group) = w4[q];
      }
    }
  }
};

}  // namespace folio::cuda::prefill_detail::v3k
