// Decode kernel v2 (see decode_attention.h): one pass over each partition's K and V rows with an
// online softmax, the rows streamed through a per-thread cp.async ring so several iterations of
// loads are in flight while the current one is scored, the partition's slot ids staged in shared
// memory, and the GQA group's q heads sharing every K/V load.
//
// The kernel bodies, templated on the cache's element type C: T (a 16-bit cache,
// decode_attention_v2.cu) or uint8_t (an fp8 e4m3 cache, decode_attention_v2_fp8.cu); their
// launchers are in decode_attention_v2_launch.cuh. Two translation units so each builds its own
// instantiations (in parallel); only they include this.
#pragma once

#include <cstdint>

#include "backend/cuda/decode_attention_partitions.cuh"
#include "backend/cuda/device_pipeline.cuh"
#include "backend/cuda/fp8_e4m3.cuh"

namespace folio::cuda::detail {
namespace {

constexpr int kChunks = 2;   // K (and V) chunks (8-element vectors) per thread per stage
constexpr int kStages = 4;   // cp.async ring depth: kStages - 1 iterations in flight
constexpr int kTile = 1024;  // slot ids staged per tile; two tiles double-buffered

// 8 bytes global -> shared, asynchronously; fill == false writes 8 zero bytes (src unread).
// cp.async.cg (L2 only, device_pipeline.cuh's cp_async16) takes 16-byte copies alone, so 8 bytes
// go through .ca (which may also keep them in L1; each is read once either way).
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem, bool fill) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(fill ? 8 : 0)
               : "memory");
}

// A lane's 8-element vector of a K/V row as it moves through the ring: a 16-byte chunk of a
// 16-bit cache (C = T), or an 8-byte chunk of e4m3 codes (C = uint8_t), half the bytes per
// element with the same lane/element mapping, decoded exactly to floats (fp8_e4m3.cuh).
template <typename T, typename C>
struct CacheChunk {
  using W = uint4;
  static constexpr int kBytes = 16;
  static __device__ __forceinline__ void copy(W* smem, const C* gmem, bool fill) {
    cp_async16(smem, gmem, fill);
  }
  static __device__ __forceinline__ void unpack(const W& r, float (&f)[8]) { unpack8<T>(r, f); }
};
template <typename T>
struct CacheChunk<T, uint8_t> {
  using W = uint2;
  static constexpr int kBytes = 8;
  static __device__ __forceinline__ void copy(W* smem, const uint8_t* gmem, bool fill) {
    cp_async8(smem, gmem, fill);
  }
  static __device__ __forceinline__ void unpack(const W& r, float (&f)[8]) { unpack8_e4m3(r, f); }
};

// Shared memory: a ring of [kStages][K, V][kChunks][kThreads] CB-byte chunks (each thread reads
// back only what it copied, so the ring needs no block barrier), reused after the loop for the
// cross-warp reduction [kWarps][GC][D]; then per-warp max and sum [kWarps][GC] each, then the
// slot ids [2][kTile].
template <int CB>
__host__ __device__ constexpr int ring_bytes() {
  return kStages * 2 * kChunks * kThreads * CB;
}
template <int CB>
__host__ __device__ inline int main_bytes(int gc, int d) {
  const int red = kWarps * gc * d * 4;
  return red > ring_bytes<CB>() ? red : ring_bytes<CB>();
}
template <int CB>
__host__ __device__ inline int smem_bytes(int gc, int d) {
  return main_bytes<CB>(gc, d) + 2 * kWarps * gc * 4 + 2 * kTile * 4;
}

// grid (num_kv_heads * num_chunks, num_seqs, max_partitions), kThreads threads. A token's row of
// D elements (D / 8 8-element vectors: 16-byte chunks, 8-byte ones in an fp8 cache) is read by a
// lane group of TG lanes (a power of two), VPL
// vectors each: lane lig owns vectors v * TG + lig (those past D / 8 idle). A warp reads
// TPW = 32 / TG tokens per step, STEPS steps per iteration (each thread moves kChunks chunks of K
// and of V per iteration). VPL 2 halves the shuffles and exponentials per byte (its
// q and accumulators take twice the registers). Every lane group keeps its own online-softmax
// state (max m, sum l, unnormalised acc) over its tokens; the groups of a warp merge by
// shuffles, the warps through shared memory.
template <typename T, typename C, int TG, int GC, int VPL>
__global__ void __launch_bounds__(kThreads, VPL == 2 ? 3 : 1) decode_v2_kernel(V2Args<T> a) {
  pdl_wait();  // pdl.cuh: inputs come from the previous kernel
  pdl_launch_dependents();
  static_assert(kChunks % VPL == 0, "a stage holds whole rows per lane");
  constexpr int E = 8 * VPL;  // elements per lane per row
  constexpr int STEPS = kChunks / VPL;
  constexpr int TPW = 32 / TG;
  constexpr int TI = kWarps * TPW * STEPS;  // tokens per block iteration
  static_assert(kTile % TI == 0 && TI * (kStages - 1) <= kTile, "issue runs <= 1 tile ahead");
  using Chunk = CacheChunk<T, C>;
  using W = typename Chunk::W;
  extern __shared__ __align__(16) unsigned char smem[];
  const int D = a.head_dim;
  W* ring = reinterpret_cast<W*>(smem);
  float* red = reinterpret_cast<float*>(smem);
  float* wm = reinterpret_cast<float*>(smem + main_bytes<Chunk::kBytes>(GC, D));
  float* wl = wm + kWarps * GC;
  int32_t* slots = reinterpret_cast<int32_t*>(wl + kWarps * GC);

  DecodeBlockSpan sp;
  if (!decode_block_span(a, GC, sp)) return;
  const int kvh = sp.kvh, s = sp.s, part = sp.part, nparts = sp.nparts, start = sp.start, n = sp.n;
  const int gcount = sp.gcount, h0 = sp.h0, row = sp.row;
  const int32_t* table = sp.table;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int lig = lane % TG, tiw = lane / TG;
  bool on[VPL];  // which of this lane's vectors lie inside the row
#pragma unroll
  for (int v = 0; v < VPL; ++v) on[v] = (v * TG + lig) * 8 < D;

  // Slot ids of partition tokens [tile * kTile, +kTile) into buffer tile % 2.
  auto fill_tile = [&](int tile) {
    int32_t* dst = slots + (tile & 1) * kTile;
    const int t0 = tile * kTile, cnt = min(kTile, n - t0);
    for (int i = tid; i < cnt; i += kThreads) {
      const int pos = start + t0 + i;
      const int page = pos / a.block_size;
      dst[i] = table[page] * a.block_size + (pos - page * a.block_size);
    }
  };
  fill_tile(0);
  if (n > kTile) fill_tile(1);

  float q[GC][E];  // pre-scaled by scale * log2(e)
#pragma unroll
  for (int g = 0; g < GC; ++g) {
#pragma unroll
    for (int v = 0; v < VPL; ++v) {
      float* qv = q[g] + 8 * v;
      if (g < gcount && on[v]) {
        const T* src =
            a.q + (static_cast<int64_t>(row) * a.num_heads + h0 + g) * D + (v * TG + lig) * 8;
        float f[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(src), f);
#pragma unroll
        for (int j = 0; j < 8; ++j) qv[j] = f[j] * a.scale_log2;
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) qv[j] = 0.f;
      }
    }
  }
  __syncthreads();

  const C* k_cache = reinterpret_cast<const C*>(a.k_cache);  // offsets below count elements
  const C* v_cache = reinterpret_cast<const C*>(a.v_cache);
  const int64_t slot_stride = static_cast<int64_t>(a.num_kv_heads) * D;
  const int64_t head_off = static_cast<int64_t>(kvh) * D + lig * 8;
  auto token = [&](int it, int u) { return it * TI + (warp * STEPS + u) * TPW + tiw; };
  // Ring chunk c = u * VPL + v of a stage holds step u's vector v; V's chunks follow K's.
  auto issue = [&](int it) {
    W* st = ring + (it % kStages) * (2 * kChunks * kThreads) + tid;
#pragma unroll
    for (int u = 0; u < STEPS; ++u) {
      const int t = token(it, u);
      const bool ok = t < n;
      int64_t off = head_off;
      if (ok) off += slots[((t / kTile) & 1) * kTile + t % kTile] * slot_stride;
#pragma unroll
      for (int v = 0; v < VPL; ++v) {
        const bool fill = ok && on[v];
        const int64_t o = fill ? off + v * TG * 8 : 0;  // zero fill reads nothing
        Chunk::copy(st + (u * VPL + v) * kThreads, k_cache + o, fill);
        Chunk::copy(st + (kChunks + u * VPL + v) * kThreads, v_cache + o, fill);
      }
    }
  };

  float m[GC], l[GC], acc[GC][E];
#pragma unroll
  for (int g = 0; g < GC; ++g) {
    m[g] = kNoMax;
    l[g] = 0.f;
#pragma unroll
    for (int j = 0; j < E; ++j) acc[g][j] = 0.f;
  }

  const int iters = (n + TI - 1) / TI;  // block-uniform, so every loop below is warp-uniform
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < iters) issue(i);
    cp_async_commit();
  }
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
    const int tok0 = it * TI;
    if (it > 0 && tok0 % kTile == 0) {
      // Entering tile k: every issue that read tile k - 1's slots has run, so its buffer takes
      // tile k + 1 (issues run at most kStages - 1 iterations, less than a tile, ahead).
      __syncthreads();
      if (tok0 + kTile < n) fill_tile(tok0 / kTile + 1);
      __syncthreads();
    }
    if (it + kStages - 1 < iters) issue(it + kStages - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // this thread's copies for iteration `it` have landed

    const W* st = ring + (it % kStages) * (2 * kChunks * kThreads) + tid;
    float sc[STEPS][GC];
#pragma unroll
    for (int u = 0; u < STEPS; ++u) {
      float kf[VPL][8];
#pragma unroll
      for (int v = 0; v < VPL; ++v) Chunk::unpack(st[(u * VPL + v) * kThreads], kf[v]);
      const bool valid = token(it, u) < n;
#pragma unroll
      for (int g = 0; g < GC; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int j = 0; j < E; ++j) dot = fmaf(q[g][j], kf[j / 8][j % 8], dot);
#pragma unroll
        for (int o = TG / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        sc[u][g] = valid ? dot : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < GC; ++g) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < STEPS; ++u) mx = fmaxf(mx, sc[u][g]);
      if (mx > m[g]) {  // rescale only when the max grows (rarer as the partition goes on)
        const float alpha = fast_exp2(m[g] - mx);
        m[g] = mx;
        l[g] *= alpha;
#pragma unroll
        for (int j = 0; j < E; ++j) acc[g][j] *= alpha;
      }
    }
#pragma unroll
    for (int u = 0; u < STEPS; ++u) {
      float vf[VPL][8];
#pragma unroll
      for (int v = 0; v < VPL; ++v) Chunk::unpack(st[(kChunks + u * VPL + v) * kThreads], vf[v]);
#pragma unroll
      for (int g = 0; g < GC; ++g) {
        const float p = fast_exp2(sc[u][g] - m[g]);
        l[g] += p;
#pragma unroll
        for (int j = 0; j < E; ++j) acc[g][j] = fmaf(p, vf[j / 8][j % 8], acc[g][j]);
      }
    }
  }
  cp_async_wait<0>();  // only empty groups are left, but the ring is reused below

  // Merge the lane groups of each warp (lanes lig of every group hold the same columns).
#pragma unroll
  for (int g = 0; g < GC; ++g) {
    if constexpr (TPW > 1) {
      float mw = m[g];
#pragma unroll
      for (int o = TG; o < 32; o <<= 1) mw = fmaxf(mw, __shfl_xor_sync(0xffffffffu, mw, o));
      const float f = fast_exp2(m[g] - mw);
      m[g] = mw;
      l[g] *= f;
#pragma unroll
      for (int j = 0; j < E; ++j) acc[g][j] *= f;
#pragma unroll
      for (int o = TG; o < 32; o <<= 1) {
        l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
#pragma unroll
        for (int j = 0; j < E; ++j) acc[g][j] += __shfl_xor_sync(0xffffffffu, acc[g][j], o);
      }
    }
  }
  __syncthreads();  // every warp is done with the ring
  if (tiw == 0) {
#pragma unroll
    for (int g = 0; g < GC; ++g)
#pragma unroll
      for (int v = 0; v < VPL; ++v) {
        if (!on[v]) continue;
        const float* x = acc[g] + 8 * v;
        float4* dst = reinterpret_cast<float4*>(red + (warp * GC + g) * D + (v * TG + lig) * 8);
        dst[0] = make_float4(x[0], x[1], x[2], x[3]);
        dst[1] = make_float4(x[4], x[5], x[6], x[7]);
      }
  }
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < GC; ++g) {
      wm[warp * GC + g] = m[g];
      wl[warp * GC + g] = l[g];
    }
  }
  __syncthreads();

  store_block_result<T, GC>(a, red, wm, wl, gcount, h0, row, s, part, nparts);
}

}  // namespace
}  // namespace folio::cuda::detail
