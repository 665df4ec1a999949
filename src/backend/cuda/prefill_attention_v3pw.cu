// Prefill attention v3pw: v3n128 (prefill_attention_v3n128.cu: 128-key tiles, S by wgmma
// m64n128k16) with a producer warp and mbarriers instead of one block barrier per tile.
//
// Why: in v3 / v3n128 every warp both gathers K/V (cp.async) and computes, and one
// __syncthreads per tile keeps the two consumer warpgroups in lockstep: both wait for the slowest
// thread's copies, both run their softmax at the same time while the tensor cores idle. Halving
// the barriers per key (v3n128) bought only 3%, so here the warpgroups stop meeting at all: each
// follows the stage ring on its own, paced only by the data.
//
// Roles (288 threads): warps 0-7 are the two consumer warpgroups of v3n128 (rows 64 wg ..
// 64 wg + 63 of the block's 128); warp 8 is the producer. The producer loads Q, then for each key
// tile t gathers K(t) and V(t) through the block table by cp.async into stage t % 3, each
// followed by cp.async.mbarrier.arrive.noinc on the stage's full_k / full_v barrier (count 32: one
// arrival per producer lane, made by the hardware when that lane's earlier copies have landed; Q
// rides with tile 0's K). K and V have separate barriers so that S can start before V has landed
// and K's stage can be refilled while the consumers still run the softmax and P·V.
//
// Protocol, stage st = t % 3 used for the u-th time (u = t / 3):
//   producer:  t >= 3: wait empty_k[st] parity (u - 1) & 1 (tile t - 3's K released);
//              gather K(t); arrive.noinc full_k[st]; the same for V with empty_v / full_v.
//   consumer:  wait full_k[st] parity u & 1; fence.proxy.async (the copies are generic-proxy
//              writes that this thread has acquired through the barrier; wgmma reads through the
//              async proxy, and the producer never waits on its copies so cannot fence them);
//              S wgmma, wait; lane 0 of each warp arrives on empty_k[st] (count 8 = 4 warps x 2
//              warpgroups); softmax; wait full_v[st], fence, P·V wgmma, wait; arrive empty_v[st].
// A warpgroup skips tiles above its rows (causal). It still releases a skipped tile that the
// producer will refill (t + 3 < n_tiles: only a warpgroup with no real rows has such tiles), and
// waits on its full barrier first: an arrival before the producer has refilled the stage would
// count toward the stage's previous phase, completing it without the other warpgroup's release.
// No waiter falls two phases behind: the producer cannot refill a stage before both warpgroups
// released it, and neither releases before it waited on the current fill.
//
// Shared memory: v3n128's 225 KB (Q 32 KB, 3 stages of K and V at 32 KB each, 1 KB alignment)
// + 96 bytes of barriers, of the 227 KB opt-in; 1 block of 9 warps per SM, 288 threads x <= 224
// registers fit the register file without setmaxnreg.
//
// head_dim 128 only: launch_v3pw sends other head dims where launch_v3n128 does (64 to v3, the
// rest to v2x2). Not yet run on a GPU; FOLIO_PREFILL_KERNEL=v3pw or PrefillPlan::kernel selects it.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/mbarrier_ptx.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3.cuh"
#include "backend/cuda/smem_opt_in.h"

namespace folio::cuda::prefill_detail {
namespace v3pw {
namespace {

using v3k::Args;

constexpr int D = 128;
constexpr int BN = 128;                               // keys per tile
constexpr int kStages = 3;                            // stage ring depth
constexpr int kConsumerWarps = v3k::kThreads / 32;    // 8: arrivals that release a stage
constexpr int kProducerWarp = kConsumerWarps;         // warp 8
constexpr int kThreads = v3k::kThreads + 32;          // 288
constexpr int kSlots = BN / 32;                       // keys of a tile per producer lane

template <typename T>
using Blk = v3k::Block<T, D, kStages, false, BN>;
using Cfg = v3k::Cfg<D, kStages, false, BN>;

// The ring's barriers, right after the V tiles (8-byte aligned: the tiles end on 1024).
struct Barriers {
  uint64_t full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages];
};
constexpr size_t kSmemBytes = Cfg::kBytes + sizeof(Barriers);

template <typename T>
__device__ __forceinline__ Barriers& barriers(const Blk<T>& b) {
  return *reinterpret_cast<Barriers*>(b.q_s + Cfg::kBytes - 1024);
}

// ---- producer warp ---------------------------------------------------------------------------
// Lane l copies 16-byte chunk l % 16 of rows 2 i + l / 16: a half-warp reads one 256-byte row
// per instruction.

// Q's 128 rows (rows past the end zero-filled).
template <typename T>
__device__ __forceinline__ void produce_q(const Blk<T>& b, int lane) {
  const int half = lane / 16, c = (lane % 16) * 8;
#pragma unroll 4
  for (int i = 0; i < v3k::BM / 2; ++i) {
    const int r = 2 * i + half, gr = b.r0 + r;
    const bool ok = gr <= b.last_row;
    const int64_t qrow =
        ok ? static_cast<int64_t>(b.qs + gr / b.G) * b.a.num_heads + b.kvh * b.G + gr % b.G : 0;
    cp_async_16(b.q_s + v3k::sw128_offset(r, c, v3k::BM), b.a.q + qrow * D + c, ok);
  }
}

// Cache slots of keys t * BN + lane + 32 k (k < kSlots); -1 for keys >= kv_end. Slots are token
// indices of the paged cache (physical block * block_size + offset): < 2^31, far beyond any
// cache that fits device memory.
template <typename T>
__device__ __forceinline__ void tile_slots(const Blk<T>& b, int t, int lane, int (&slot)[kSlots]) {
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    const int j = t * BN + lane + 32 * k;
    const int blk = b.a.block_shift >= 0 ? j >> b.a.block_shift : j / b.a.block_size;
    slot[k] = j < b.kv_end ? b.table[blk] * b.a.block_size + (j - blk * b.a.block_size) : -1;
  }
}

// One K or V tile of keys (slots from tile_slots) into `dst`, 128-byte swizzled; keys past
// kv_end zero-filled (masked scores; a zero V row keeps 0 * V finite). Each row's slot comes
// from the lane that looked it up.
template <typename T>
__device__ __forceinline__ void produce_tile(const Blk<T>& b, const T* cache, unsigned char* dst,
                                             const int (&slot)[kSlots], int lane) {
  const int half = lane / 16, c = (lane % 16) * 8;
  const int64_t slot_stride = static_cast<int64_t>(b.a.num_kv_heads) * D;
  const int64_t head_off = static_cast<int64_t>(b.kvh) * D + c;
#pragma unroll
  for (int k = 0; k < kSlots; ++k)
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int s = __shfl_sync(0xffffffffu, slot[k], 2 * i + half);
      const bool ok = s >= 0;
      const int64_t off = ok ? s * slot_stride + head_off : 0;
      cp_async_16(dst + v3k::sw128_offset(32 * k + 2 * i + half, c, BN), cache + off, ok);
    }
}

template <typename T>
__device__ void produce(const Blk<T>& b, Barriers& bar) {
  const int lane = threadIdx.x % 32;
  produce_q(b, lane);  // completes with tile 0's K: an arrival covers all earlier copies
  for (int t = 0; t < b.n_tiles; ++t) {
    const int st = t % kStages;
    const uint32_t prev_parity = ((t / kStages) + 1) & 1;  // of fill u - 1 = tile t - kStages
    int slot[kSlots];
    tile_slots(b, t, lane, slot);
    if (t >= kStages) mbarrier_wait_parity(&bar.empty_k[st], prev_parity);
    produce_tile(b, b.a.k_cache, b.k_tile(st), slot, lane);
    cp_async_mbarrier_arrive_noinc(&bar.full_k[st]);
    if (t >= kStages) mbarrier_wait_parity(&bar.empty_v[st], prev_parity);
    produce_tile(b, b.a.v_cache, b.v_tile(st), slot, lane);
    cp_async_mbarrier_arrive_noinc(&bar.full_v[st]);
  }
  // Let this thread's copies finish before it exits (the consumers wait for them anyway).
  cp_async_commit();
  cp_async_wait<0>();
}

// ---- consumer warpgroups ---------------------------------------------------------------------

// Releases a stage: every warp of the warpgroup is past the wgmma wait that retired its reads.
__device__ __forceinline__ void release(uint64_t* bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbarrier_arrive(bar);
}

// Waits for a fill of the stage, then makes it visible to wgmma (see the protocol above).
__device__ __forceinline__ void acquire(uint64_t* bar, uint32_t parity) {
  mbarrier_wait_parity(bar, parity);
  fence_proxy_async_smem();
}

// One key tile of this warpgroup (v3n128's tile step with the stage handshakes). kHalf: only
// keys [0, 64) of the tile are at or before some row of the warpgroup; the two instances are
// separate straight-line paths (a per-wgmma choice makes ptxas serialize every wgmma, C7520).
template <bool kHalf, typename T>
__device__ __forceinline__ void tile_step(const Blk<T>& b, Barriers& bar, float (&o)[D / 2],
                                          float (&m)[2], float (&l)[2], int t, int st,
                                          uint32_t parity) {
  float sc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) sc[i] = 0.f;
  acquire(&bar.full_k[st], parity);  // K(t), and Q with tile 0
  wgmma_fence_operand(sc);
  wgmma_fence();
  b.issue_qk(sc, st, kHalf);
  wgmma_wait<0>();
  wgmma_fence_operand(sc);
  release(&bar.empty_k[st]);
  constexpr int kKeys = kHalf ? 64 : BN;  // keys of the tile some row of the warpgroup sees
  float alpha[2];
  b.template softmax<kKeys>(sc, t, m, l, alpha);
  b.rescale(o, alpha);
  uint32_t pf[BN / 16][4];  // of a half tile only pf[0, 4) is set and read
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) v3k::pack_p<T>(pf[kk], sc, kk);
  acquire(&bar.full_v[st], parity);
  wgmma_fence_operand(o);
  wgmma_fence();
  b.issue_pv(o, pf, st, kKeys / 16);
  wgmma_wait<0>();
  wgmma_fence_operand(o);
  release(&bar.empty_v[st]);
}

template <typename T>
__device__ void consume(const Blk<T>& b, Barriers& bar) {
  const int n_wg = b.wg_tiles();  // warpgroup-uniform
  float o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  for (int t = 0; t < b.n_tiles; ++t) {
    const int st = t % kStages;
    const uint32_t parity = (t / kStages) & 1;
    if (t < n_wg) {
      // Warpgroup-uniform: keys t * BN + 64 .. are past every row of this warpgroup.
      if (t * BN + 64 > b.wg_max_pos) {
        tile_step<true>(b, bar, o, m, l, t, st, parity);
      } else {
        tile_step<false>(b, bar, o, m, l, t, st, parity);
      }
    } else if (t + kStages < b.n_tiles) {  // not needed here, but refilled later: release it
      mbarrier_wait_parity(&bar.full_k[st], parity);
      release(&bar.empty_k[st]);
      mbarrier_wait_parity(&bar.full_v[st], parity);
      release(&bar.empty_v[st]);
    }
  }
  b.store(o, l);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) prefill_v3pw_kernel(Args<T> a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma needs sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Blk<T> b(a, smem_raw);  // warp 8 gets a warpgroup index of 2, unused
  if (!b.live) return;
  Barriers& bar = barriers(b);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&bar.full_k[s], 32);
      mbarrier_init(&bar.full_v[s], 32);
      mbarrier_init(&bar.empty_k[s], kConsumerWarps);
      mbarrier_init(&bar.empty_v[s], kConsumerWarps);
    }
  }
  __syncthreads();  // the only block barrier: the mbarriers exist before anyone uses them
  if (threadIdx.x / 32 == kProducerWarp) {
    produce(b, bar);
  } else {
    consume(b, bar);
  }
#endif
}

template <typename T>
Status launch(const Args<T>& a, int num_seqs, void* stream) {
  auto kernel = prefill_v3pw_kernel<T>;
  constexpr size_t bytes = kSmemBytes;
  static_assert(bytes <= 227 * 1024, "shared memory per block");
  FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes));
  const dim3 grid(a.row_tiles, num_seqs, a.num_kv_heads);
  kernel<<<grid, kThreads, bytes, as_stream(stream)>>>(a);
  return launch_status("prefill_v3pw_kernel");
}

}  // namespace
}  // namespace v3pw

Status launch_v3pw(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  if (p.head_dim != 128) return launch_v3n128(p, plan, stream);
  const int64_t row_tiles = (plan.max_rows + v3k::BM - 1) / v3k::BM;
  if (row_tiles == 0) return Status();
  if (row_tiles > 0x7fffffff) return invalid_argument("prefill_attention: too many rows");
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    v3k::Args<T> a{};
    a.set(p, static_cast<int>(row_tiles));
    return v3pw::launch<T>(a, p.num_seqs, stream);
  });
}

}  // namespace folio::cuda::prefill_detail
