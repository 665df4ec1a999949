// decode_mlp.h's persistent kernel. Block b of G (one per SM) owns rows [b N / G, (b + 1) N / G)
// of each of its three products (N = H rows of o_proj, I gate/up row pairs, H rows of down).
//
// Warp w takes units w, w + W, ... of each phase (a unit: one row, or a gate row and its up row),
// split into chunks of at most kChunkPacks 16-byte packs, and streams them through its own ring
// of kSlots chunks in shared memory (WarpRing: cp.async, kSlots chunks ahead of the math and
// across the phase boundaries). Lane l takes packs l, l + 32, ... of each row, in order, with
// fp32 FMAs, then warp_sum: the skinny kernel's order (skinny_gemm.cu), so the rounded results
// are the same bits.
//
// Between phases the blocks meet at a grid barrier (sync[0] after o_proj, sync[1] after gate_up:
// each counts the blocks that got there; x and act are read back with coherent loads after it).
// sync[2] counts the blocks done; the last one zeroes the three for the next launch.
//
// Measured and replaced (H100, session 11): one producer warp filling every warp's ring by 1-D
// TMA bulk copies (cp.async.bulk, mbarriers) streamed only 2.0 TB/s without any math and 1.57
// with it, against the separate skinny launches' 2.81: one thread's issue rate was the limit.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <initializer_list>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/decode_mlp.h"
#include "backend/cuda/device_pipeline.cuh"
#include "backend/cuda/named_barrier_ptx.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/rms_norm_smem.cuh"
#include "backend/cuda/smem_opt_in.h"

namespace folio::cuda {
namespace {

constexpr int kChunkPacks = 256;  // 4 KiB of weights per ring slot
constexpr int kChunkBytes = 16 * kChunkPacks;

// kWarps warps per block, each with a ring of kSlots chunks: 16 KiB in flight per warp, 128 KiB
// per SM. On the H100 (DecodeMlpBench, a Llama-3-8B layer) 8 x 4 took 144.5 us, 8 x 3 145.1,
// 8 x 6 154.5, 16 x 3 151.3 and 4 x 12 171.7: more bytes in flight per SM is slower past 128 KiB.
constexpr int kWarps = 8, kSlots = 4, kThreads = 32 * kWarps;
constexpr int kRingBytes = kWarps * kSlots * kChunkBytes;
constexpr int kBlockBarrier = 1;  // named barrier of the block's warps (bar.sync 1: no id clash)

template <typename T>
struct MlpArgs {
  const T* attn;
  const T* w_o;
  const T* post_norm;
  const T* w_gate_up;
  const T* w_down;
  T* x;
  T* act;
  unsigned* sync;
  int hidden, inter, attn_width;
  float eps;
};

// One phase's rows for this block: units [u0, u0 + units) of a [N, depth] matrix at w; a unit is
// `srcs` rows (gated: row u of gate, then row u of up, `src_stride` elements later), each
// `chunks_per_row` chunks.
template <typename T>
struct Phase {
  const T* w;
  int64_t src_stride;
  int depth, srcs, u0, units, chunks_per_row;

  __device__ Phase(const T* w_, int64_t src_stride_, int n, int depth_, int srcs_)
      : w(w_), src_stride(src_stride_), depth(depth_), srcs(srcs_) {
    const int64_t b = blockIdx.x, g = gridDim.x;
    u0 = static_cast<int>(b * n / g);
    units = static_cast<int>((b + 1) * n / g) - u0;
    chunks_per_row = (depth / 8 + kChunkPacks - 1) / kChunkPacks;
  }
  __device__ int chunks_per_unit() const { return srcs * chunks_per_row; }
  __device__ int chunk_packs(int c) const { return min(kChunkPacks, depth / 8 - c * kChunkPacks); }
  // Chunk k of the block's unit u.
  __device__ const uint4* chunk(int u, int k) const {
    const int s = k / chunks_per_row, c = k % chunks_per_row;
    return reinterpret_cast<const uint4*>(w + static_cast<int64_t>(u0 + u) * depth +
                                          s * src_stride) + c * kChunkPacks;
  }
};

template <typename T>
struct Phases {
  Phase<T> p[3];
  __device__ explicit Phases(const MlpArgs<T>& a)
      : p{Phase<T>(a.w_o, 0, a.hidden, a.attn_width, 1),
          Phase<T>(a.w_gate_up, static_cast<int64_t>(a.inter) * a.hidden, a.inter, a.hidden, 2),
          Phase<T>(a.w_down, 0, a.hidden, a.inter, 1)} {}
};

// A warp's ring and the walk over its chunks: units warp, warp + kWarps, ... of each phase in
// order, each unit's chunks in order, across the phase boundaries. Lane l copies packs l, l + 32,
// ... of a chunk (cp.async) and later reads exactly those, so a lane only ever waits for its own
// copies: no warp barrier, and the ring runs kSlots chunks ahead of the math, into the next
// phase's rows while the warp waits at a grid barrier.
template <typename T>
struct WarpRing {
  uint4* slots;             // [kSlots][kChunkPacks]
  int phase = 0, i = 0, k = 0;  // the next chunk to copy: unit warp + kWarps i of phase, chunk k
  uint32_t issued = 0;

  __device__ void skip_empty(const Phases<T>& ph, int warp) {
    while (phase < 3 && warp + kWarps * i >= ph.p[phase].units) {
      ++phase;
      i = 0;
    }
  }
  // Copies the next chunk (if any is left) into its slot; one commit group either way, so that
  // the group count stays the chunk count.
  __device__ void issue(const Phases<T>& ph, int warp, int lane) {
    if (phase < 3) {
      const Phase<T>& p = ph.p[phase];
      const uint4* src = p.chunk(warp + kWarps * i, k);
      const int packs = p.chunk_packs(k % p.chunks_per_row);
      uint4* dst = slots + (issued % kSlots) * kChunkPacks;
#pragma unroll
      for (int t = 0; t < kChunkPacks / 32; ++t) {
        const int q = lane + 32 * t;
        if (q < packs) cp_async16(dst + q, src + q, true);
      }
      if (++k == p.chunks_per_unit()) {
        k = 0;
        ++i;
        skip_empty(ph, warp);
      }
    }
    cp_async_commit();
    ++issued;
  }
};

// acc += this lane's share of the warp's chunk j (packs lane, lane + 32, ... of `packs`) against
// the input packs xs (the row's packs from the chunk's first); then the slot takes chunk
// j + kSlots.
template <typename T>
__device__ __forceinline__ float consume_chunk(WarpRing<T>& ring, const Phases<T>& ph,
                                               uint32_t j, const uint4* xs, int packs,
                                               float acc) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  cp_async_wait<kSlots - 1>();  // chunk j's group (kSlots - 1 younger may be pending)
  const uint4* wc = ring.slots + (j % kSlots) * kChunkPacks;
#pragma unroll
  for (int t = 0; t < kChunkPacks / 32; ++t) {
    const int q = lane + 32 * t;
    if (q < packs) {
      float wf[8], xf[8];
      unpack8<T>(wc[q], wf);
      unpack8<T>(xs[q], xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc = fmaf(wf[e], xf[e], acc);
    }
  }
  ring.issue(ph, warp, lane);  // this lane's reads of the slot are done: refill it
  return acc;
}

__device__ __forceinline__ void block_sync() {
  named_barrier_sync(kBlockBarrier, kThreads);
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A wait that has not finished after kStuckCycles (seconds at any clock) is a bug (a hang would
// otherwise hold the GPU until the process dies): report it and trap (the launch fails).
constexpr long long kStuckCycles = 10'000'000'000ll;

__device__ __noinline__ void stuck(unsigned seen) {
  printf("decode_mlp: block %d stuck at a grid barrier (%u of %d blocks)\n", blockIdx.x, seen,
         gridDim.x);
  __trap();
}

// Every block has passed this point once it returns, and its global writes before it are
// visible to this block after it (cooperative groups' grid sync, on one counter per barrier).
__device__ void grid_barrier(unsigned* counter) {
  block_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
    const long long t0 = clock64();
    unsigned seen;
    while ((seen = load_acquire(counter)) < gridDim.x)
      if (clock64() - t0 > kStuckCycles) stuck(seen);
    __threadfence();
  }
  block_sync();
}

// n elements (n % 8 == 0) from global into shared memory; `coherent`: written earlier in this
// kernel by other blocks (read from L2, not through the read-only path).
template <typename T>
__device__ void stage_input(const T* src, T* xs, int n, bool coherent) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(xs);
  for (int i = threadIdx.x; i < n / 8; i += kThreads)
    d[i] = coherent ? __ldcg(s + i) : __ldg(s + i);
  block_sync();
}

// One phase's units for this warp. kGated: act[u] = silu(round(gate dot)) * round(up dot) (the
// pair's rows); else x[row] += dot (o_proj, down).
template <typename T, bool kGated>
__device__ void consume_phase(const Phases<T>& ph, int phase, WarpRing<T>& ring, uint32_t& j,
                              const T* xs, T* out) {
  constexpr int kSrcs = kGated ? 2 : 1;
  const Phase<T>& p = ph.p[phase];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint4* xp = reinterpret_cast<const uint4*>(xs);
  for (int u = warp; u < p.units; u += kWarps) {
    float acc[kSrcs] = {};
#pragma unroll
    for (int s = 0; s < kSrcs; ++s)
      for (int c = 0; c < p.chunks_per_row; ++c, ++j)
        acc[s] = consume_chunk<T>(ring, ph, j, xp + c * kChunkPacks, p.chunk_packs(c), acc[s]);
#pragma unroll
    for (int s = 0; s < kSrcs; ++s) acc[s] = warp_sum(acc[s]);
    if (lane != 0) continue;
    T* y = out + p.u0 + u;
    if constexpr (kGated) {  // skinny_gemm.cu's kGated store
      const float gv = to_float(from_float<T>(acc[0]));
      const float uv = to_float(from_float<T>(acc[kSrcs - 1]));
      *y = from_float<T>(gv / (1.f + __expf(-gv)) * uv);
    } else {  // accumulate: the old value (L2: another SM may have written it) added in fp32
      *y = from_float<T>(acc[0] + to_float(__ldcg(y)));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) decode_mlp_kernel(MlpArgs<T> a) {
  extern __shared__ __align__(128) uint4 smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Phases<T> ph(a);
  WarpRing<T> ring;
  ring.slots = smem + warp * kSlots * kChunkPacks;
  ring.skip_empty(ph, warp);
  T* xs = reinterpret_cast<T*>(smem + kRingBytes / 16);
  // The weights depend on nothing: the ring fills while the kernel before is still running.
  for (int t = 0; t < kSlots; ++t) ring.issue(ph, warp, lane);
  pdl_launch_dependents();  // the next kernel starts once every block runs (pdl.cuh)
  pdl_wait();               // attn and x come from earlier kernels
  uint32_t j = 0;           // this warp's chunks consumed so far
  stage_input<T>(a.attn, xs, a.attn_width, false);
  consume_phase<T, false>(ph, 0, ring, j, xs, a.x);
  grid_barrier(&a.sync[0]);  // x complete: x += o_proj(attn)

  rms_norm_rows_to_smem_group<T, 1>(a.x, a.post_norm, xs, a.hidden, a.eps, warp, kWarps,
                                    [] { block_sync(); });
  consume_phase<T, true>(ph, 1, ring, j, xs, a.act);
  grid_barrier(&a.sync[1]);  // act complete

  stage_input<T>(a.act, xs, a.inter, true);
  consume_phase<T, false>(ph, 2, ring, j, xs, a.x);
  cp_async_wait<0>();  // only empty groups are left; leave none behind
  block_sync();
  if (threadIdx.x == 0 && atomicAdd(&a.sync[2], 1u) == gridDim.x - 1) {
    // Every block has passed both barriers: the counters are free for the next launch.
    a.sync[0] = 0;
    a.sync[1] = 0;
    a.sync[2] = 0;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Shared memory beside the ring: the input vector (the widest of attn, x and act).
size_t fixed_smem(const DecodeMlpParams& p) {
  const int widest = std::max(std::max(p.hidden, p.inter), p.attn_width);
  return static_cast<size_t>(widest) * dtype_size(p.dtype);
}

template <typename T>
Status launch(const DecodeMlpParams& p, const DeviceInfo& device, void* stream) {
  auto* kernel = decode_mlp_kernel<T>;
  const size_t smem = kRingBytes + fixed_smem(p);
  // The opt-in is remembered per kernel (smem_opt_in.h), not per size: ask for the most any
  // shape may take (1 KiB left for the static shared memory).
  FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel),
                                            device.max_smem_per_block_optin - 1024));
  // Positional: the fields in MlpArgs' order.
  MlpArgs<T> a{static_cast<const T*>(p.attn),      static_cast<const T*>(p.w_o),
               static_cast<const T*>(p.post_norm), static_cast<const T*>(p.w_gate_up),
               static_cast<const T*>(p.w_down),    static_cast<T*>(p.x),
               static_cast<T*>(p.act),             p.sync,
               p.hidden,                           p.inter,
               p.attn_width,                       p.eps};
  // One block per SM: all resident at once, which the grid barriers need.
  return launch_pdl(kernel, dim3(device.num_sms), dim3(kThreads), smem, stream,
                    "decode_mlp_kernel", a);
}

}  // namespace

bool decode_mlp_supported(const DecodeMlpParams& p) {
  if (p.hidden % 8 || p.inter % 8 || p.attn_width % 8 || p.inter <= 0 || p.attn_width <= 0)
    return false;
  if (!rms_norm_is_block_pack8(p.hidden)) return false;
  for (const void* q : std::initializer_list<const void*>{p.attn, p.w_o, p.post_norm,
                                                          p.w_gate_up, p.w_down, p.x, p.act})
    if (!aligned16(q)) return false;
  return fixed_smem(p) + kRingBytes + 1024 <= 227 * 1024;
}

Status decode_mlp(const DecodeMlpParams& p, const DeviceInfo& device, void* stream) {
  for (const void* q : std::initializer_list<const void*>{p.attn, p.w_o, p.post_norm, p.w_gate_up,
                                                          p.w_down, p.x, p.act, p.sync})
    if (!q) return invalid_argument("decode_mlp: a null pointer");
  if (!decode_mlp_supported(p))
    return invalid_argument("decode_mlp: needs widths that are multiples of 8, "
                            "512 < hidden <= 8192 and 16-byte aligned operands");
  if (device.num_sms <= 0 || fixed_smem(p) + kRingBytes + 1024 > device.max_smem_per_block_optin)
    return invalid_argument("decode_mlp: the input vector leaves no room for the ring on " +
                            device.name);
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] { return launch<T>(p, device, stream); });
}

}  // namespace folio::cuda
