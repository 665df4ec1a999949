// Prefill attention v3tmaq: v3tma (prefill_attention_v3tma.cu: a persistent block per SM, a
// producer warp filling a 3-stage K/V ring by TMA, two consumer warpgroups) with each work
// item's Q fetched by the producer too, by TMA, instead of by the consumers at the item's start.
//
// Why: at 8 x 1024 an item is only 1-8 key tiles (4.5 on average), and in v3tma both consumer
// warpgroups start every item by syncing, loading their 64 Q rows with cp.async (16 per thread),
// waiting for them, fencing and syncing again, with the tensor cores idle. Here each warpgroup
// waits on a barrier for the Q the producer copied, moves its rows into registers (the A
// operand of S = Q K^T: 32 registers per thread) and releases the Q tile at once, so the
// producer fetches the next item's Q while this item runs. (Session 13 kept Q in shared memory
// until the item's last S or P V: the next item then waited for its copy, 8 x 1024 325 against
// 344 TFLOP/s; NOTES.md.)
//
// Registers: S, P, O and the Q fragments do not fit the 168 registers a 288-thread block
// allows, so the block is 384 threads, as v3tmap's (prefill_attention_v3tma_wg.cuh): warps
// 8-11 drop to kWgProducerRegs by setmaxnreg (only warp 8 produces, the others exit) and the
// consumer warpgroups rise to kWgConsumerRegs.
//
// Q's rows: a 128-row item is 128 / G tokens x the G query heads of one KV head, row r = token
// G + g, and those G heads are contiguous in q [token, head, head_dim]. So a 3-D tensor map over
// q (head_dim, head, token) with a box of (64 columns, G heads, 64 / G tokens) lands one column
// half of one warpgroup's 64 rows in v3's 128-byte-swizzled panel layout in one copy: 2 copies
// per warpgroup and item. Rows past the item's last row read the next tokens' q (finite, never
// stored: their positions clamp to the last row) or zeros past the tensor's end, as v3tma's
// zero-filled rows did. Needs G to divide 64; other groups run as v3tma.
//
// Protocol, per consumer warpgroup w and the block's j-th item: full_q[w] (count 1) completes
// when the producer's arrive.expect_tx(16 KB) and both copies have landed (phase j); empty_q[w]
// (count 4, lane 0 of each warp) completes when every warp of w has read its Q rows of item j
// into registers (phase j; before the item's first tile, with or without tiles). The producer
// waits on empty_q[w] phase j - 1 before issuing item j's copies, ahead of item j's first K/V
// tile (after that tile, as sessions 13-14 did, the copy waited for a free ring stage: 8 x 1024
// 345 against 353 TFLOP/s). Q keeps its own 32 KB, so the ring stays 3 stages deep.
//
// Work items are dealt from a counter (prefill_attention_items.cuh): the producer hands each to
// the consumers in QBarriers::item with its Q, and -1 once there are none left.
//
// O of an item whose 128 rows are all real leaves by TMA store, staged in the V stage of the
// item's last key tile (prefill_attention_v3tmaq_ostore.cuh); other items store it themselves.
#include <cstdint>

#include "backend/cuda/prefill_attention_items.cuh"
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3_launch.cuh"
#include "backend/cuda/prefill_attention_v3tma.cuh"
#include "backend/cuda/prefill_attention_v3tma_launch.cuh"
#include "backend/cuda/prefill_attention_v3tma_wg.cuh"
#include "backend/cuda/prefill_attention_v3tmaq_ostore.cuh"

namespace folio::cuda::prefill_detail {
namespace v3tmaq {
namespace {

using v3k::Args;
using v3pw_ring::Barriers;
using v3pw_ring::Blk;

constexpr uint32_t kQHalfBytes = 64 * v3pw_ring::D * 2;  // one warpgroup's 64 rows

struct MapsQ : v3tma_ring::Maps {
  CUtensorMap q;  // q [tokens, heads, head_dim], box (64, G, 64 / G)
  CUtensorMap o;  // out, the same shape and box (full items' O: v3tmaq_ostore.cuh)
};

using v3pw_ring::QBarriers;
constexpr size_t kSmemBytes = v3pw_ring::kSmemBytes + sizeof(QBarriers);

// Thread 0, before the ring's barrier init (which fences them for the async proxy too).
__device__ __forceinline__ void init_q_barriers(QBarriers& qb) {
  if (threadIdx.x != 0) return;
  for (int w = 0; w < 2; ++w) {
    mbarrier_init(&qb.full_q[w], 1);
    mbarrier_init(&qb.empty_q[w], 4);
  }
}

// The producer warp: item j's Q (item i), warpgroup by warpgroup, each once its previous Q is
// released; lane 0 publishes i before its arrival (release), which the consumers' wait acquires.
template <typename T>
__device__ __forceinline__ void fill_q(const Blk<T>& b, QBarriers& qb, const MapsQ& maps, int i,
                                       int j, int lane) {
  for (int w = 0; w < 2; ++w) {
    if (j > 0) mbarrier_wait_parity(&qb.empty_q[w], (j - 1) & 1);
    if (lane == 0) {
      qb.item[w] = i;
      mbarrier_arrive_expect_tx(&qb.full_q[w], kQHalfBytes);
    }
    __syncwarp();  // the bytes are expected before a copy can complete them
    if (lane < 2)  // column half `lane`: panel lane, rows 64 w ..
      tma_load_3d(b.q_s + lane * v3k::BM * 128 + w * 64 * 128, &maps.q, lane * 64, b.kvh * b.G,
                  b.qs + b.a.group_div.div(b.r0 + 64 * w), &qb.full_q[w]);
  }
}

// The producer warp's walk over its block's items (header comment): K/V tiles by the ring, Q
// ahead of each item's tiles, then the end (-1) for each warpgroup once it released its last Q.
template <typename T>
__device__ void produce_items(Blk<T>& b, Barriers& bar, QBarriers& qb, const MapsQ& maps,
                              int num_seqs) {
  const int lane = threadIdx.x % 32;
  int j = 0, g = 0;  // items produced (the Q barriers' phase), ring fills so far
  for (item_deal::Walk walk(b.a.row_tiles * num_seqs * b.a.num_kv_heads, maps.ticket_slot);
       walk.more(); walk.advance(lane)) {
    walk.draw(lane);
    const int i = walk.i;
    v3tma_ring::take_item(b, i);
    if (!b.live) continue;  // a row tile past its sequence's rows has no work
    // Q before the item's tiles: the previous item released its Q at its start, so this rarely
    // waits, and the consumers can take Q into registers while tile 0 is in flight.
    fill_q(b, qb, maps, i, j, lane);
    v3tma_ring::produce_tma(b, bar, maps, g);
    g += b.n_tiles;
    ++j;
  }
  for (int w = 0; w < 2; ++w) {
    if (j > 0) mbarrier_wait_parity(&qb.empty_q[w], (j - 1) & 1);
    if (lane == 0) {
      qb.item[w] = -1;
      mbarrier_arrive(&qb.full_q[w]);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(v3tma_ring::kWgThreads, 1)
    prefill_v3tmaq_kernel(Args<T> a, const __grid_constant__ MapsQ maps, int num_seqs) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma and TMA need sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Blk<T> b(a, smem_raw);  // warps 8-11 get a warpgroup index of 2, unused
  Barriers& bar = v3pw_ring::barriers(b);
  QBarriers& qb = v3pw_ring::q_barriers(b);
  init_q_barriers(qb);
  v3tma_ring::init_tma_barriers(bar);
  __syncthreads();  // the only block barrier: the mbarriers exist before anyone uses them
  const int warp = threadIdx.x / 32;
  // Separate loops for the two roles (in one loop the producer's state took consumer registers).
  if (warp >= v3pw_ring::kProducerWarp) {
    setmaxnreg_dec<v3tma_ring::kWgProducerRegs>();
    if (warp != v3pw_ring::kProducerWarp) return;
    if (threadIdx.x % 32 == 0) {
      tma_prefetch_map(&maps.k_page);
      tma_prefetch_map(&maps.v_page);
      tma_prefetch_map(&maps.q);
      tma_prefetch_map(&maps.o);
    }
    produce_items(b, bar, qb, maps, num_seqs);
    return;
  }
  setmaxnreg_inc<v3tma_ring::kWgConsumerRegs>();
  // The consumers take the items the producer hands them with their Q, until it hands them -1.
  int held_v = -1;  // the V stage this warpgroup's last O store may still read (ostore.cuh)
  for (int j = 0, g = 0;; ++j) {  // j: items so far (full_q's phase), g: ring fills so far
    mbarrier_wait_parity(&qb.full_q[b.wg], j & 1);    // TMA wrote Q: no proxy fence
    const int i = item_deal::receive(qb.item[b.wg]);  // released again through empty_q
    if (i < 0) break;
    v3tma_ring::take_item(b, i);
    v3tmaq_o::release_held_v(bar, held_v);
    held_v = -1;
    const bool full = v3tmaq_o::item_is_full(b);  // block-uniform
    const int last_st = (g + b.n_tiles - 1) % v3pw_ring::kStages;
    v3pw_ring::consume_tiles_then</*kFence=*/false, /*kQTileToRegs=*/true>(
        b, bar, g, /*more_items=*/true, /*hold_last_v=*/full,
        [&](const float (&o)[v3pw_ring::D / 2], const float (&l)[2]) {
          if (full) {
            held_v = v3tmaq_o::store_o(b, bar, &maps.o, last_st, o, l);
          } else {
            b.store(o, l);
          }
        });
    g += b.n_tiles;
  }
  v3tmaq_o::finish_stores();
#endif
}

}  // namespace
}  // namespace v3tmaq

Status launch_v3tmaq(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  const int G = p.num_heads / p.num_kv_heads;
  // TMA reads 16-byte-aligned rows (every q buffer of the engine is; a test's may not be).
  if (!v3tma_ring::tma_ring_fits(p) || 64 % G != 0 || plan.num_tokens <= 0 ||
      reinterpret_cast<uintptr_t>(p.q) % 16 != 0 || reinterpret_cast<uintptr_t>(p.out) % 16 != 0)
    return launch_v3tma(p, plan, stream);
  return v3k::with_row_tiles(p, plan, [&]<typename T>(const v3k::Args<T>& a) {
    v3tmaq::MapsQ maps;  // the K/V maps and the ticket slot are set by the launch
    FOLIO_RETURN_IF_ERROR(encode_rows_map(&maps.q, p.dtype, p.q, plan.num_tokens, p.num_heads,
                                          p.head_dim, G, 64 / G));
    FOLIO_RETURN_IF_ERROR(encode_rows_map(&maps.o, p.dtype, p.out, plan.num_tokens, p.num_heads,
                                          p.head_dim, G, 64 / G));
    return v3tma_ring::launch_tma_kernel<T>(v3tmaq::prefill_v3tmaq_kernel<T>, a, p, plan,
                                            v3tma_ring::kWgThreads, stream,
                                            "prefill_v3tmaq_kernel", maps, v3tmaq::kSmemBytes);
  });
}

}  // namespace folio::cuda::prefill_detail
