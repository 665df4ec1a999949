// Internal to gemm_wgmma.cu (and the host emulator's check, tests/cuda/emu/gemm_wgmma_emu.cc):
// the device side of the Hopper GEMM y[m, n] = x[m, k] · w[n, k]^T (+ y), for the decode
// batches where cuBLASLt streams the weights at 1.7-2.2 TB/s (m 128-256: the problem sits at the
// H100's ridge, so the weight stream and the tensor cores must both run near their peaks).
//
// Tiles: BM 256 rows of x (all of a 256-row decode batch: each weight tile is read once) x BN 128
// rows of w, stepped over k by BK 64 (one 128-byte row of each operand per tile row). A block is
// 384 threads: consumer warpgroups 0 and 1 own rows [128 wg, 128 wg + 128) of the tile as two
// m64 halves (wgmma m64n128k16, both operands from 128-byte-swizzled shared memory, K-major;
// 2 x 64 fp32 accumulators per thread), and one thread of the producer warpgroup fills two
// rings by TMA, one of x tiles and a deeper one of w tiles. x's copies take m's rows only (m
// rounded up to 64 when m <= BM: zero-filling rows past a tensor's end is slow in TMA, m 64
// took 176 us against 102 without x's copies); the tile rows past them are zeroed once, and
// their products land in rows that are never stored.
//
// Stream-K: the grid's blocks (one per SM) split the tiles x (k / BK) iterations into equal
// contiguous ranges, so there is no partial last wave (gate_up at m 256: 224 tiles on 132 SMs).
// A tile whose iterations span several blocks is finished by the block that has its last
// iteration; every earlier block stores its fp32 partial sum in its own workspace slot, in
// fragment order (thread-major float4s: coalesced, and the finisher's threads read exactly the
// fragments they hold), and sets its flag. A block walks its range from the top tile down, so
// a partial is the first thing its block computes and the finisher, which needs it last, rarely
// waits; a block stores at most one partial (its range's top tile, when the range ends inside
// it). Sums are added in a fixed order (the finisher's own, then slots c - 1, c - 2, ...), so
// results are deterministic for a given grid. Flags are reset by their reader: zero between
// launches (graph-safe).
//
// Ring protocol (as prefill v3tma's), per ring: full[s] (count 1) completes with the
// producer's arrive.expect_tx and its copy; empty[s] (count 8: lane 0 of each consumer warp)
// when both warpgroups' wgmmas that read the stage retired. Iteration g of the block's walk
// uses stage g % stages of each ring, phase g / stages.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gpu_flag_ptx.cuh"
#include "backend/cuda/mbarrier_ptx.cuh"
#include "backend/cuda/named_barrier_ptx.cuh"
#include "backend/cuda/setmaxnreg_ptx.cuh"
#include "backend/cuda/tma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace folio::cuda::gemm_wgmma_detail {

constexpr int BM = 256, BN = 128, BK = 64;
// Two rings: w's tiles come from HBM and need many bytes in flight (with one ring of 4 (x, w)
// stages the consumers held 1-2 of them and the weights streamed at 2.1 TB/s), x's from L2
// (x is at most a few MB, read by every block) and need few. The producer issues w kLag
// iterations ahead of x.
constexpr int kXStages = 4, kWStages = 6, kLag = kWStages - kXStages;
constexpr int kConsumerThreads = 256, kThreads = kConsumerThreads + 128;
constexpr int kConsumerWarps = kConsumerThreads / 32, kProducerWarp = kConsumerWarps;
constexpr int kConsumerRegs = 232, kProducerRegs = 40;
static_assert(128 * kProducerRegs + kConsumerThreads * kConsumerRegs <= 65536, "register file");
constexpr uint32_t kXBytes = BM * BK * 2, kWBytes = BN * BK * 2;
constexpr int kPartialFloats = BM * BN;  // one workspace slot
constexpr int kConsumerBarrier = 1;      // named barrier of the 256 consumer threads

struct Barriers {
  uint64_t x_full[kXStages], x_empty[kXStages], w_full[kWStages], w_empty[kWStages];
};
// The rings at 1024-byte boundaries (the 128-byte swizzle's period), then the barriers; +1024
// for aligning the dynamic shared memory's base.
constexpr size_t kRingBytes = kXStages * kXBytes + kWStages * kWBytes;
constexpr size_t kSmemBytes = kRingBytes + sizeof(Barriers) + 1024;
static_assert(kSmemBytes <= 227 * 1024, "shared memory");

struct Args {
  void* y;
  int m, n, k;
  int accumulate;  // y += x · w^T
  float* partials; // [gridDim.x][kPartialFloats]
  int* flags;      // [gridDim.x], zero between launches
  int m_tiles, k_iters;
  int64_t total_iters;  // m_tiles x (n / BN) x k_iters
  int x_box_rows;       // rows of x's tile filled: BM, or m rounded up to 64 when m_tiles is 1
};

struct Maps {
  CUtensorMap x, w;  // rows maps (tensor_map.h): boxes of 64 columns x BM / BN rows
};

// Block c's iterations [range_lo(c), range_lo(c + 1)). Tile t: row tile t % m_tiles, column
// tile t / m_tiles (the row tiles of one column tile are neighbours: its w comes from L2 after
// the first).
__device__ __forceinline__ int64_t range_lo(const Args& a, int c) {
  return a.total_iters * c / gridDim.x;
}
__device__ __forceinline__ int tile_m0(const Args& a, int tile) {
  return (tile % a.m_tiles) * BM;
}
__device__ __forceinline__ int tile_n0(const Args& a, int tile) {
  return (tile / a.m_tiles) * BN;
}

// One contiguous run of a tile's k iterations [k0, k1) inside this block's range.
struct Segment {
  int tile, k0, k1;
};

// Calls fn(segment, g0) for this block's segments, top tile first; g0: ring iterations before it.
template <typename F>
__device__ __forceinline__ void for_each_segment(const Args& a, F&& fn) {
  const int64_t lo = range_lo(a, blockIdx.x);
  int64_t pos = range_lo(a, blockIdx.x + 1);
  int g = 0;
  while (pos > lo) {
    const int tile = static_cast<int>((pos - 1) / a.k_iters);
    const int64_t begin = static_cast<int64_t>(tile) * a.k_iters;
    const int64_t seg_lo = begin > lo ? begin : lo;
    const Segment s{tile, static_cast<int>(seg_lo - begin), static_cast<int>(pos - begin)};
    fn(s, g);
    g += s.k1 - s.k0;
    pos = seg_lo;
  }
}

__device__ __forceinline__ unsigned char* stage_x(unsigned char* smem, int g) {
  return smem + (g % kXStages) * kXBytes;
}
__device__ __forceinline__ unsigned char* stage_w(unsigned char* smem, int g) {
  return smem + kXStages * kXBytes + (g % kWStages) * kWBytes;
}

// Iteration g's copy into its ring stage, once the consumers released the stage's previous
// iteration (g - stages).
template <int kStages>
__device__ __forceinline__ void fill(unsigned char* dst, const CUtensorMap* map, uint64_t* full,
                                     uint64_t* empty, int g, uint32_t bytes, int c0, int c2) {
  const int st = g % kStages;
  if (g >= kStages) mbarrier_wait_parity(&empty[st], ((g / kStages) + 1) & 1);
  mbarrier_arrive_expect_tx(&full[st], bytes);
  tma_load_3d(dst, map, c0, 0, c2, &full[st]);
}

// The producer (one thread): w's copy of iteration g, then x's of iteration g - kLag, over the
// block's walk; pending x copies wait in a small ring of coordinates.
__device__ __forceinline__ void produce(const Args& a, const Maps& maps, unsigned char* smem,
                                       Barriers& bar) {
  const uint32_t x_bytes = static_cast<uint32_t>(a.x_box_rows) * BK * 2;
  int pend_m0[kLag] = {}, pend_k[kLag] = {};  // slot j % kLag: iteration j's tile row, k step
  const auto fill_x = [&](int j) {
    fill<kXStages>(stage_x(smem, j), &maps.x, bar.x_full, bar.x_empty, j, x_bytes,
                   pend_k[j % kLag] * BK, pend_m0[j % kLag]);
  };
  int g = 0;
  for_each_segment(a, [&](const Segment& s, int) {
    const int m0 = tile_m0(a, s.tile), n0 = tile_n0(a, s.tile);
    for (int kt = s.k0; kt < s.k1; ++kt, ++g) {
      fill<kWStages>(stage_w(smem, g), &maps.w, bar.w_full, bar.w_empty, g, kWBytes, kt * BK, n0);
      if (g >= kLag) fill_x(g - kLag);
      pend_m0[g % kLag] = m0;
      pend_k[g % kLag] = kt;
    }
  });
  for (int j = g > kLag ? g - kLag : 0; j < g; ++j) fill_x(j);
}

// A consumer warp's release of iteration g's stages (its wgmmas that read them retired).
__device__ __forceinline__ void release(Barriers& bar, int g, int lane) {
  __syncwarp();
  if (lane == 0) {
    mbarrier_arrive(&bar.w_empty[g % kWStages]);
    mbarrier_arrive(&bar.x_empty[g % kXStages]);
  }
}

// A consumer warpgroup's product over the segment: acc[h] = rows [row0 + 64 h, + 64) of
// x · w^T over k iterations [k0, k1). Halves with no row below m are computed too (on TMA's
// zero fill): skipping them made the wgmmas conditional, and ptxas then serializes them all.
template <typename T>
__device__ __forceinline__ void consume(const Args& a, unsigned char* smem, Barriers& bar,
                                        const Segment& s, int g0, int row0, float (&acc)[2][64]) {
  const int lane = threadIdx.x % 32;
  for (int kt = s.k0; kt < s.k1; ++kt) {
    const int g = g0 + kt - s.k0;
    // TMA wrote them: no proxy fence.
    mbarrier_wait_parity(&bar.w_full[g % kWStages], (g / kWStages) & 1);
    mbarrier_wait_parity(&bar.x_full[g % kXStages], (g / kXStages) & 1);
    const uint64_t dx = wgmma_desc_sw128(smem_addr(stage_x(smem, g)) + row0 * 128, 16, 1024);
    const uint64_t dw = wgmma_desc_sw128(smem_addr(stage_w(smem, g)), 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const int scale = kt > s.k0 || kk > 0 ? 1 : 0;
      const uint64_t w_k = wgmma_desc_advance(dw, kk * 32);
      wgmma_m64n128k16_ss<T>(acc[0], wgmma_desc_advance(dx, kk * 32), w_k, scale);
      wgmma_m64n128k16_ss<T>(acc[1], wgmma_desc_advance(dx, 64 * 128 + kk * 32), w_k, scale);
    }
    wgmma_commit();
    wgmma_wait<1>();  // the previous iteration's group retired: release its stage
    if (kt > s.k0) release(bar, g - 1, lane);
  }
  wgmma_wait<0>();
  wgmma_fence_operand(acc[0]);
  wgmma_fence_operand(acc[1]);
  release(bar, g0 + s.k1 - s.k0 - 1, lane);
}

// After consume: a segment that ends before the tile's last iteration stores acc as this
// block's partial and sets its flag; the finishing one adds the partials of the blocks below
// that cover the tile's earlier iterations, then writes y (+ y's old value when accumulating).
// The accumulator layout (m64nNk16, fp32): thread (warp v, lane l) of a warpgroup holds, in
// acc[h][4 j + e], row 16 v + l / 4 + 8 (e / 2) of the half, columns 8 j + 2 (l % 4) + e % 2.
template <typename T>
__device__ __forceinline__ void finish(const Args& a, const Segment& s, int row0,
                                       float (&acc)[2][64]) {
  const int ctid = threadIdx.x;  // 0 .. 255: the consumer threads
  if (s.k1 < a.k_iters) {
    float4* slot = reinterpret_cast<float4*>(a.partials) +
                   static_cast<int64_t>(blockIdx.x) * (kPartialFloats / 4);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < 16; ++i)
        slot[(h * 16 + i) * kConsumerThreads + ctid] =
            make_float4(acc[h][4 * i], acc[h][4 * i + 1], acc[h][4 * i + 2], acc[h][4 * i + 3]);
    named_barrier_sync(kConsumerBarrier, kConsumerThreads);
    if (ctid == 0) flag_set_release(&a.flags[blockIdx.x], 1);
    return;
  }
  if (s.k0 > 0) {
    const int64_t begin = static_cast<int64_t>(s.tile) * a.k_iters;
    for (int c = static_cast<int>(blockIdx.x) - 1; c >= 0 && range_lo(a, c + 1) > begin; --c) {
      if (ctid == 0) {
        flag_wait_acquire(&a.flags[c], 1);
        flag_reset(&a.flags[c]);  // its only reader: zero again for the next launch
      }
      named_barrier_sync(kConsumerBarrier, kConsumerThreads);
      const float4* slot =
          reinterpret_cast<const float4*>(a.partials) + static_cast<int64_t>(c) * (kPartialFloats / 4);
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const float4 p = load_cg(&slot[(h * 16 + i) * kConsumerThreads + ctid]);
          acc[h][4 * i] += p.x;
          acc[h][4 * i + 1] += p.y;
          acc[h][4 * i + 2] += p.z;
          acc[h][4 * i + 3] += p.w;
        }
    }
  }
  const int lane = ctid % 32, v = (ctid % 128) / 32;
  const int m0 = tile_m0(a, s.tile) + row0, n0 = tile_n0(a, s.tile);
  T* const y = static_cast<T*>(a.y);
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int e2 = 0; e2 < 2; ++e2) {
      const int row = m0 + 64 * h + 16 * v + lane / 4 + 8 * e2;
      if (row >= a.m) continue;
      T* const y_row = y + static_cast<int64_t>(row) * a.n + n0 + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        float out[2] = {acc[h][4 * j + 2 * e2], acc[h][4 * j + 2 * e2 + 1]};
        if (a.accumulate) {
          float old[2];
          load_floats<2>(y_row + 8 * j, old);
          out[0] += old[0];
          out[1] += old[1];
        }
        store_floats<2>(y_row + 8 * j, out);
      }
    }
}

// The kernel's body (the __global__ wrapper in gemm_wgmma.cu declares the shared memory).
template <typename T>
__device__ __forceinline__ void gemm_wgmma_body(const Args& a, const Maps& maps,
                                                unsigned char* smem_raw) {
  unsigned char* const smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  Barriers& bar = *reinterpret_cast<Barriers*>(smem + kRingBytes);
  if (threadIdx.x == 0) {
    for (int st = 0; st < kXStages; ++st) {
      mbarrier_init(&bar.x_full[st], 1);
      mbarrier_init(&bar.x_empty[st], kConsumerWarps);
    }
    for (int st = 0; st < kWStages; ++st) {
      mbarrier_init(&bar.w_full[st], 1);
      mbarrier_init(&bar.w_empty[st], kConsumerWarps);
    }
    fence_mbarrier_init();
  }
  // x's tile rows past its copies' rows: zeros once (no copy ever writes them), so that the
  // products of the rows that are never stored are finite and the wgmmas read no stale bytes.
  const int tail = (BM - a.x_box_rows) * 8;  // 16-byte chunks per stage
  for (int i = threadIdx.x; i < kXStages * tail; i += kThreads)
    store_zero_16_smem(stage_x(smem, i / tail) + a.x_box_rows * 128 + (i % tail) * 16);
  fence_proxy_async_smem();
  __syncthreads();  // the only block barrier: the mbarriers and the zeros precede their users
  const int warp = threadIdx.x / 32;
  if (warp >= kProducerWarp) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x != kProducerWarp * 32) return;
    tma_prefetch_map(&maps.x);
    tma_prefetch_map(&maps.w);
    produce(a, maps, smem, bar);
    return;
  }
  setmaxnreg_inc<kConsumerRegs>();
  const int row0 = (threadIdx.x / 128) * 128;
  float acc[2][64];
  for_each_segment(a, [&](const Segment& s, int g0) {
    consume<T>(a, smem, bar, s, g0, row0, acc);
    finish<T>(a, s, row0, acc);
  });
}

}  // namespace folio::cuda::gemm_wgmma_detail
