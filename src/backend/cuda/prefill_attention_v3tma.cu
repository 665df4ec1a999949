// Prefill attention v3tma: v3pw (prefill_attention_v3pw.cu: 128-key tiles, a producer warp, a
// 3-stage K/V ring guarded by full / empty mbarriers, two consumer warpgroups) with the ring
// filled by TMA instead of cp.async.
//
// Why: v3pw's producer warp issues every 16-byte cp.async of the paged gather, 4096 per key
// tile, and starves the consumers (123 TFLOP/s at 8 x 1024 against v3n128's 217). A TMA copy
// moves a whole page: the K cache [slot, kv head, head_dim] is a 3-D tensor map whose box is one
// page (block_size slots) of one head, 64 columns wide (a 128-byte row, the swizzle's width), so
// a 128-key tile at block size 16 is 8 pages x 2 column halves = 16 copies for K and 16 for V,
// landing directly in v3's 128-byte-swizzled layout (the panel of columns [64 h, 64 h + 64) at
// tile + h * BN * 128, page p's rows at p * block_size * 128; the tiles are 1024-byte aligned,
// so the hardware's swizzle by address matches sw128_offset).
//
// Keys past the sequence's end must read as zeros (their scores are masked, and a zero V row
// keeps 0 * V finite whatever the pool holds there): a page wholly past the end is copied from
// slot -block_size (outside the tensor, zero-filled); the one page that the end cuts is copied
// row by row through a second map with a one-slot box, rows past the end from slot -1.
//
// Persistent: one block per SM walks the work items (row tile, sequence, KV head; longest row
// tiles first, dealt from a counter: prefill_attention_items.cuh) on one ring, so the producer
// fetches the next item's first tiles while the consumers finish the current one and load its
// Q, and a block's start-up (barrier init, first fills) is paid once per SM instead of once per
// item: at 8 x 1024 an item is only 1-8 key tiles. Where at most half of the items have rows (a
// mixed step: decode rows beside a long prefill chunk, where a persistent block would walk
// hundreds of empty items) and with FOLIO_PREFILL_PERSISTENT=0, one block per item instead.
// The producer hands each item to the consumers in ItemSlots::item[st], st the stage of the
// item's tile 0, written by lane 0 before the arrive.expect_tx of that tile's K (release; the
// consumers' wait on it acquires), and -1 with a bare arrival once there are none left. The slot
// is rewritten only after the stage's release, which each warp's lane 0, the lane that read it,
// makes after the read.
//
// Protocol: v3pw's, with full barriers of count 1. For each fill the producer's lane 0 does
// arrive.expect_tx(32 KB) (its arrival and the stage's bytes; zero-filled boxes count too), then
// the lanes issue the copies, each completing its bytes on the barrier. Consumers wait on the
// full barrier's parity and need no proxy fence (TMA writes through the async proxy that wgmma
// reads through). Q is not in the ring: each consumer warpgroup loads its own 64 rows by
// cp.async before its first tile, fences the proxy once and meets its warpgroup at a named
// barrier.
//
// Used for head_dim 128 and power-of-two block sizes 8..128 (a page box of block_size rows
// starts on a 1024-byte boundary and divides the tile); the rest runs as v3.
#include "backend/cuda/prefill_attention_items.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3_launch.cuh"
#include "backend/cuda/prefill_attention_v3tma.cuh"
#include "backend/cuda/prefill_attention_v3tma_launch.cuh"

namespace folio::cuda::prefill_detail {
namespace v3tma {
namespace {

using v3k::Args;
using v3pw_ring::Barriers;
using v3pw_ring::Blk;
using v3pw_ring::kStages;
using v3pw_ring::kThreads;

// The item whose tile 0 fills stage st (-1: the end), right after the ring's barriers.
struct ItemSlots {
  int item[v3pw_ring::kStages];
};
constexpr size_t kSmemBytes = v3pw_ring::kSmemBytes + sizeof(ItemSlots);

template <typename T>
__device__ __forceinline__ ItemSlots& item_slots(const Blk<T>& b) {
  return *reinterpret_cast<ItemSlots*>(&v3pw_ring::barriers(b) + 1);
}

// Lane 0 of the producer warp writes `item` into the slot of ring position g once the stage is
// released (the fill of position g - kStages); the caller's next fill of that stage publishes it.
__device__ __forceinline__ void publish_item(Barriers& bar, ItemSlots& slots, int g, int item,
                                             int lane) {
  const int st = g % kStages;
  if (g >= kStages) mbarrier_wait_parity(&bar.empty_k[st], ((g / kStages) + 1) & 1);
  if (lane == 0) slots.item[st] = item;
}

// The producer warp's walk over its block's items, then the end: -1 and a bare arrival on the
// full barrier of the next ring position (count 1: it completes the phase without bytes).
template <typename T>
__device__ void produce_items(Blk<T>& b, Barriers& bar, ItemSlots& slots,
                              const v3tma_ring::Maps& maps, int num_seqs) {
  const int lane = threadIdx.x % 32;
  int g = 0;  // ring fills so far
  for (item_deal::Walk walk(b.a.row_tiles * num_seqs * b.a.num_kv_heads, maps.ticket_slot);
       walk.more(); walk.advance(lane)) {
    walk.draw(lane);
    v3tma_ring::take_item(b, walk.i);
    if (!b.live) continue;  // a row tile past its sequence's rows has no work
    publish_item(bar, slots, g, walk.i, lane);
    v3tma_ring::produce_tma(b, bar, maps, g);
    g += b.n_tiles;
  }
  publish_item(bar, slots, g, -1, lane);
  if (lane == 0) mbarrier_arrive(&bar.full_k[g % kStages]);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_v3tma_kernel(Args<T> a, const __grid_constant__ v3tma_ring::Maps maps, int num_seqs) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma and TMA need sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Blk<T> b(a, smem_raw);  // warp 8 gets a warpgroup index of 2, unused
  Barriers& bar = v3pw_ring::barriers(b);
  ItemSlots& slots = item_slots(b);
  v3tma_ring::init_tma_barriers(bar);
  __syncthreads();  // the only block barrier: the mbarriers exist before anyone uses them
  const bool producer = threadIdx.x / 32 == v3pw_ring::kProducerWarp;
  if (producer && threadIdx.x % 32 == 0) {
    tma_prefetch_map(&maps.k_page);
    tma_prefetch_map(&maps.v_page);
  }
  if (producer) {
    produce_items(b, bar, slots, maps, num_seqs);
    return;
  }
  for (int g = 0;;) {  // g: ring fills so far
    const int st = g % kStages;
    mbarrier_wait_parity(&bar.full_k[st], (g / kStages) & 1);  // the item's tile 0, or the end
    const int i = item_deal::receive(slots.item[st]);          // released again through empty_k[st]
    if (i < 0) break;
    v3tma_ring::take_item(b, i);
    v3tma_ring::load_q_warpgroup(b, g);
    // The producer moves on to the next item's tiles while this one finishes.
    v3pw_ring::consume_tiles</*kFence=*/false>(b, bar, g, /*more_items=*/true);
    g += b.n_tiles;
  }
#endif
}

}  // namespace
}  // namespace v3tma

Status launch_v3tma(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  if (!v3tma_ring::tma_ring_fits(p)) return launch_v3(p, plan, V3Variant::kPlain, stream);
  return v3k::with_row_tiles(p, plan, [&]<typename T>(const v3k::Args<T>& a) {
    return v3tma_ring::launch_tma_kernel<T>(v3tma::prefill_v3tma_kernel<T>, a, p, plan,
                                            v3pw_ring::kThreads, stream, "prefill_v3tma_kernel",
                                            v3tma_ring::Maps{}, v3tma::kSmemBytes);
  });
}

}  // namespace folio::cuda::prefill_detail
