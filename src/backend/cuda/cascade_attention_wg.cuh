// Cascade decode attention, the partial kernel for wide items and for packs of narrow ones
// (cascade_attention_wg.cu launches it; cascade_attention.h has the contract): one warpgroup per
// (work, kv head) computes S = Q K^T and O += P V by wgmma, with K/V tiles filled by TMA through
// each item's block table. Device code only, included by cascade_attention_wg.cu and by the host
// emulator's check (tests/cuda/emu/cascade_wg_emu.cc, scripts/emu-cascade-wg.sh).
//
// Why: the mma.sync kernel (cascade_attention.cu) gives each warp 16 query rows, so every warp
// reads the whole K and V tile out of shared memory by ldmatrix: four reads of each tile for a
// 64-row item, and its dependent mma chains left 0.37 eligible warps per scheduler (ncu, session
// 46). A shared prefix's items have 64 query rows (16 rows x 4 q heads), exactly one wgmma M:
// the tensor cores read each tile once, asynchronously.
//
// A block's work (block_work) is one of:
//   - a wide item: every query row (item row m / G, q head kvh G + m % G) reads every tile;
//   - a pack of narrow items (backend/cascade_packs.h: a few rows sharing a prompt, each row's
//     own suffix): item j owns the G num_rows query rows after item j - 1's, and the block walks
//     the items' tiles one after another, each tile read only by its item's rows (the others'
//     scores masked). The tensor cores do up to 64 / G times the useful work, which they have
//     to spare at a tile's 32 KB; what the packing buys is one pipeline over several items'
//     tiles instead of a block (Q load, pipeline fill, epilogue) per 256-token suffix.
//
// Geometry: head_dim 128, block_size a power of two in [8, 64] (a tile's pages are whole boxes on
// 1024-byte boundaries; every item starts on a block boundary, cascade_plan.h). Rows past the
// work's are zero and never stored.
//
// Shared memory: kSt stages of [K tile | V tile], each tile two 128-byte-swizzled panels of 64
// keys x 64 dims (8 KB). With 2 stages (64 KB, 168 registers: three blocks per SM; the default)
// Q's A fragments are loaded straight from global memory; with 3 (96 KB: two blocks per SM) Q
// goes by cp.async into stage 2's K tile and from there to registers before tile 2 is filled
// there. Stage s completes on full[s] (one arrive.expect_tx of 32 KB by lane 0 of warp 0, whose
// lanes issue the page boxes). A stage is refilled after every warp passed the block barrier
// that follows its P V wait, so no wgmma still reads it. (ncu on the 3-stage form inside the
// engine, session 47: 12.5% occupancy, DRAM 58%, SMs 24% busy; the third block per SM gave
// 12-23%.)
// An fp8 e4m3 cache (C = uint8_t) stages e4m3 rows and converts each tile to fp16 before its
// wgmmas: cascade_attention_wg_fp8.cuh.
//
// Measured and not kept (H200, session 47): issuing S of the next tile before this tile's
// softmax (FA3's overlap within a warpgroup, 32 more registers): b1024 groups of 16 539 against
// 531 us, level end to end. The tile's chain is not what sets the pace here.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cascade_plan.h"
#include "backend/cuda/cascade_attention_wg_args.cuh"
#include "backend/cuda/cascade_attention_wg_fp8.cuh"
#include "backend/cuda/mbarrier_ptx.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/online_softmax_rows.cuh"
#include "backend/cuda/swizzle128.cuh"
#include "backend/cuda/tma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace folio::cuda::cascade_wide {

__device__ __forceinline__ int tiles_of(const CascadeItem& it) {
  return (it.tok_end - it.tok_begin + kTileTokens - 1) / kTileTokens;
}

// A walk over the block's tiles in order: item j, its tile k (the loader and the consumer each
// keep one).
struct TileCursor {
  int j = 0, k = 0;
  __device__ __forceinline__ void next(const Work& w) {
    if (++k == tiles_of(w.first[j])) ++j, k = 0;
  }
};

// Warp 0: tile k of item `it` (keys tok_begin + 64 k ..) into `stage`, completing on full.
// kCols boxes of 128-byte rows per page and K or V: 2 over a 16-bit cache (the tile's two
// panels), 1 over an e4m3 cache (whole rows into the fp8 stage: cascade_attention_wg_fp8.cuh).
// Copy j is (K or V, page, column box); pages past tok_end are zero boxes (negative slot), the
// page tok_end cuts goes row by row with zeros past the end (its other slots may hold anything).
template <int kCols>
__device__ __forceinline__ void fill(const Args& a, const Maps& maps, const CascadeItem& it,
                                     int kvh, unsigned char* stage, uint64_t* full, int k,
                                     int lane) {
  static_assert(kCols == 1 || kCols == 2);
  constexpr uint32_t kKvBytes = kCols * kPanelBytes;  // K's (or V's) part of the stage
  const int bs = a.block_size, shift = a.block_shift, pages = kTileTokens >> shift;
  if (lane == 0) mbarrier_arrive_expect_tx(full, 2 * kKvBytes);
  __syncwarp();  // the bytes are expected before any copy can complete them
  for (int j = lane; j < 2 * kCols * pages; j += 32) {
    const int kv = j / (kCols * pages), p = (j % (kCols * pages)) / kCols, col = j % kCols;
    const int c0 = col * 64;
    const CUtensorMap* page_map = kv ? &maps.v_page : &maps.k_page;
    unsigned char* dst = stage + kv * kKvBytes + col * kPanelBytes + p * bs * 128;
    const int key0 = it.tok_begin + k * kTileTokens + p * bs;
    if (key0 >= it.tok_end) {
      tma_load_3d(dst, page_map, c0, kvh, -bs, full);
      continue;
    }
    const int slot0 = a.block_table[it.bt_start + (key0 >> shift)] * bs;
    if (key0 + bs <= it.tok_end) {
      tma_load_3d(dst, page_map, c0, kvh, slot0, full);
    } else {
      const CUtensorMap* row_map = kv ? &maps.v_row : &maps.k_row;
      for (int r = 0; r < bs; ++r)
        tma_load_3d(dst + r * 128, row_map, c0, kvh, key0 + r < it.tok_end ? slot0 + r : -1, full);
    }
  }
}

// Masks S of a tile whose first key is token t0 (s[4n + e]: row g + 8 (e / 2), key 8n + 2 t4 +
// e % 2; keys at or past tok_end, and every key of a row half that `reads` excludes), turns it
// into P in place (exp2 domain, scaled), and updates the running max and this thread's partial
// sums; returns O's rescale factors per row half. A row half that has read nothing yet keeps
// max -inf and weights 0.
__device__ __forceinline__ void online_softmax(float (&s)[32], int t0, int tok_end,
                                               const bool (&reads)[2], float scale_log2,
                                               float (&m_run)[2], float (&l_run)[2],
                                               float (&corr)[2], int t4) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool on = reads[e >> 1] && t0 + n * 8 + 2 * t4 + (e & 1) < tok_end;
      const float v = on ? s[4 * n + e] * scale_log2 : -INFINITY;
      s[4 * n + e] = v;
      mx[e >> 1] = fmaxf(mx[e >> 1], v);
    }
  fold_row_max(mx, m_run, corr);
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    s[i] = fast_exp2(s[i] - mx[(i >> 1) & 1]);
    sum[(i >> 1) & 1] += s[i];
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * corr[h] + sum[h];
}

// Query row m of the block (m < 64): its item j and row i within the item; false past the work's
// rows (then j is -1). A walk over the pack's items: a few (at most 64 / G) small reads, L1-hot.
__device__ __forceinline__ bool query_row(const Work& w, int m, int G, int* j, int* i) {
  int first_row = 0;  // of item j, in units of G query rows
  const int r = m / G;
  for (int k = 0; k < w.count; ++k) {
    const int n = w.first[k].num_rows;
    if (r < first_row + n) {
      *j = k;
      *i = r - first_row;
      return true;
    }
    first_row += n;
  }
  *j = -1;
  *i = 0;
  return false;
}

// One block (blockIdx.x: Args' work, blockIdx.y: kv head). smem_raw: smem_bytes(kSt) of dynamic
// shared memory. kSt 3: Q borrows stage 2 on its way to registers (96 KB, 2 blocks per SM); kSt
// 2: Q's fragments straight from global memory (64 KB, 3 blocks per SM). C: the cache's element,
// T (16-bit) or uint8_t (e4m3: cascade_attention_wg_fp8.cuh; smem_bytes_fp8(kSt), the products
// in fp16, Q through the fp16 tile with 3 or 4 stages; 2 stages: 64 KB, 3: 80 KB, 4: 96 KB).
template <typename T, int kSt = kStages, typename C = T>
__device__ __forceinline__ void partial_body(const Args& a, const Maps& maps,
                                             unsigned char* smem_raw) {
  constexpr bool kFp8 = std::is_same_v<C, uint8_t>;
  static_assert(kSt == 2 || kSt == 3 || (kFp8 && kSt == 4));
  constexpr bool kQViaSmem = kSt >= 3;  // else Q's fragments straight from global memory
  static_assert(kFp8 || std::is_same_v<C, T>);
  using M = std::conditional_t<kFp8, __half, T>;  // the products' type
  constexpr uint32_t kStageStride = kFp8 ? kFp8StageBytes : kStageBytes;
  unsigned char* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);
  unsigned char* half_tile = smem + kSt * kStageStride;  // fp8 only: the converted tile
  uint64_t* full =
      reinterpret_cast<uint64_t*>(smem + kSt * kStageStride + (kFp8 ? kStageBytes : 0));
  auto stage = [&](int s) { return smem + s * kStageStride; };
  const Work w = block_work(a);
  if (w.count == 0) return;  // past a bounded grid's work: before any barrier is set up
  const int kvh = blockIdx.y, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane >> 2, t4 = lane & 3;
  const int G = a.num_heads / a.num_kv_heads;
  auto fill_stage = [&](int s, const TileCursor& at) {
    fill<kFp8 ? 1 : 2>(a, maps, w.first[at.j], kvh, stage(s), &full[s], at.k, lane);
  };
  int n_tiles = 0;
  for (int j = 0; j < w.count; ++j) n_tiles += tiles_of(w.first[j]);

  if (tid == 0) {
    for (int s = 0; s < kSt; ++s) mbarrier_init(&full[s], 1);
    fence_mbarrier_init();
  }
  // Query row m's q (zeros past the work's rows): its column col, 16-byte aligned.
  const T* q = static_cast<const T*>(a.q);
  auto q_src = [&](int m, int col, bool* valid) {
    int j, i;
    *valid = query_row(w, m, G, &j, &i);
    if (!*valid) return q;
    const int64_t qrow = a.query_start[a.rows[w.first[j].row_begin + i]];
    return q + (qrow * a.num_heads + kvh * G + m % G) * D + col;
  };
  unsigned char* q_tile = kFp8 ? half_tile : stage(2);
  if constexpr (kQViaSmem) {  // Q rows into stage 2's K tile: 16 chunks of 16 bytes per row
    for (int c = tid; c < 64 * (D / 8); c += kThreads) {
      const int m = c / (D / 8), col = (c % (D / 8)) * 8;
      bool valid;
      const T* src = q_src(m, col, &valid);
      cp_async_16(q_tile + sw128_offset(m, col, 64), src, valid);
    }
    cp_async_commit();
  }
  __syncthreads();  // the barriers exist
  TileCursor loader;  // warp 0's: the next tile to fill
  if (warp == 0) {
    if (lane == 0) {
      tma_prefetch_map(&maps.k_page);
      tma_prefetch_map(&maps.v_page);
    }
    for (int k = 0; k < n_tiles && k < kSt - 1; ++k, loader.next(w)) fill_stage(k, loader);
  }
  uint32_t qf[D / 16][4];  // A fragments: (row g | g + 8) x (cols 2 t4 | 2 t4 + 8) of 16-col step
  if constexpr (kQViaSmem) {
    cp_async_wait<0>();
    __syncthreads();  // every Q row is in shared memory
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        qf[kk][e] = as_mma<T, M>(*reinterpret_cast<const uint32_t*>(
            q_tile +
            sw128_offset(16 * warp + g + 8 * (e % 2), kk * 16 + 2 * t4 + (e / 2) * 8, 64)));
    fence_proxy_async_smem();  // these reads before the TMA's writes of tile 2 there
    __syncthreads();
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      bool valid;
      const T* row = q_src(16 * warp + g + 8 * (e % 2), 0, &valid);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        qf[kk][e] = valid ? as_mma<T, M>(*reinterpret_cast<const uint32_t*>(row + kk * 16 + 2 * t4 +
                                                                            (e / 2) * 8))
                          : 0u;
    }
  }
  if (warp == 0 && n_tiles > kSt - 1) {
    fill_stage(kSt - 1, loader);
    loader.next(w);
  }

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  int row_item[2];  // the item of this thread's row halves (-1: past the work's rows)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int i;
    query_row(w, 16 * warp + g + 8 * h, G, &row_item[h], &i);
  }
  if constexpr (kFp8) {  // tile 0's K; then K of tile k + 1 during tile k's P V
    if (n_tiles > 0) {
      mbarrier_wait_parity(&full[0], 0);
      convert_fp8_half(stage(0), half_tile, 0, tid);
      fence_proxy_async_smem();
      __syncthreads();
    }
  }
  TileCursor at;  // the tile computed
  for (int k = 0; k < n_tiles; ++k, at.next(w)) {
    const int st = k % kSt;
    if constexpr (!kFp8) mbarrier_wait_parity(&full[st], (k / kSt) & 1);
    const uint32_t k_addr = smem_addr(kFp8 ? half_tile : stage(st)), v_addr = k_addr + kTileBytes;
    float s[32];
    wgmma_fence();
    const uint64_t db0 = wgmma_desc_sw128(k_addr, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_m64n64k16_rs<M>(s, qf[kk],
                            wgmma_desc_advance(db0, (kk / 4) * kPanelBytes + (kk % 4) * 32),
                            kk > 0 ? 1 : 0);
    wgmma_commit();
    if constexpr (kFp8) convert_fp8_half(stage(st), half_tile, 1, tid);  // V, beside S
    wgmma_wait<0>();
    wgmma_fence_operand(s);
    if constexpr (kFp8) {
      fence_proxy_async_smem();  // V's stores before P V reads them, the stage's reads before
      __syncthreads();           // its refill; and every warp's S has read K
      if (warp == 0 && k + kSt < n_tiles) {
        fill_stage(st, loader);
        loader.next(w);
      }
    }
    const CascadeItem& it = w.first[at.j];
    const bool reads[2] = {row_item[0] == at.j, row_item[1] == at.j};
    float corr[2];
    online_softmax(s, it.tok_begin + at.k * kTileTokens, it.tok_end, reads, a.scale_log2, m_run,
                   l_run, corr, t4);
    uint32_t pa[kTileTokens / 16][4];
#pragma unroll
    for (int kk = 0; kk < kTileTokens / 16; ++kk) {
      const float* x = s + 8 * kk;
      pa[kk][0] = pack2<M>(x[0], x[1]);
      pa[kk][1] = pack2<M>(x[2], x[3]);
      pa[kk][2] = pack2<M>(x[4], x[5]);
      pa[kk][3] = pack2<M>(x[6], x[7]);
    }
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] *= corr[(i >> 1) & 1];
    wgmma_fence_operand(o);
    wgmma_fence();
    const uint64_t dv0 = wgmma_desc_sw128(v_addr, kPanelBytes, 1024);
#pragma unroll
    for (int kk = 0; kk < kTileTokens / 16; ++kk)
      wgmma_m64n128k16_rs_tb<M>(o, pa[kk], wgmma_desc_advance(dv0, kk * 16 * 128), 1);
    wgmma_commit();
    if constexpr (kFp8) {
      if (k + 1 < n_tiles) {  // the next tile's K, beside P V
        const int nx = (k + 1) % kSt;
        mbarrier_wait_parity(&full[nx], ((k + 1) / kSt) & 1);
        convert_fp8_half(stage(nx), half_tile, 0, tid);
      }
    }
    wgmma_wait<0>();
    wgmma_fence_operand(o);
    if constexpr (kFp8) fence_proxy_async_smem();  // the next K's stores before S reads them
    __syncthreads();  // no wgmma reads stage st (fp8: the fp16 tile's V) any more
    if (!kFp8 && warp == 0 && k + kSt < n_tiles) {
      fill_stage(st, loader);
      loader.next(w);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = 16 * warp + g + 8 * h;
    int j, i;
    if (!query_row(w, m, G, &j, &i)) continue;
    const int64_t base =
        static_cast<int64_t>(w.first[j].slot_begin + i) * a.num_heads + kvh * G + m % G;
    float* dst = a.part_o + base * D + 2 * t4;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[4 * n + 2 * h], o[4 * n + 2 * h + 1]);
    if (t4 == 0) *reinterpret_cast<float2*>(a.part_ml + base * 2) = make_float2(m_run[h], l_run[h]);
  }
}

}  // namespace folio::cuda::cascade_wide
