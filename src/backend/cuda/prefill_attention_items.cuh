// Internal to the persistent TMA prefill kernels (prefill_attention_v3tma.cu, v3tmaq.cu): how a
// block's producer warp walks the work items (row tile, sequence, KV head; longest row tiles
// first, v3tma_ring::take_item).
//
// Dealt (the default): block b starts with item b, and its producer then draws tickets gridDim.x,
// gridDim.x + 1, ... from a counter in device memory, one draw ahead so that the draw's latency
// hides behind the current item's tiles, and a block that finishes early takes the next longest
// item. The static walk (b, b + gridDim.x, ...) left the busiest SM 3% of the tile steps above
// the mean at 8 x 1024 and 6% at 1 x 8192. The launch's last draw (the n_items-th: one per item
// past the first wave, plus one empty draw per block) resets the counter, so the next launch in
// stream order finds it at zero; launches take one of kTicketSlots counters in turn, so that
// launches on different streams do not share one. FOLIO_PREFILL_DYNAMIC=0: the static walk.
//
// The producer hands each item to its consumers through shared memory (the kernel's own
// protocol), and -1 once there are none left.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace folio::cuda::prefill_detail::item_deal {

constexpr int kTicketSlots = 64;

namespace {

__device__ unsigned int g_item_tickets[kTicketSlots];  // zero between launches

// Host: the counter for the next launch, round robin; -1 (the static walk) with
// FOLIO_PREFILL_DYNAMIC=0, kept for comparison.
inline int next_ticket_slot() {
  static const bool dynamic = [] {
    const char* e = std::getenv("FOLIO_PREFILL_DYNAMIC");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  static std::atomic<unsigned int> next{0};
  return dynamic ? static_cast<int>(next.fetch_add(1, std::memory_order_relaxed) % kTicketSlots)
                 : -1;
}

}  // namespace

// The producer warp's walk over its block's items:
//   for (Walk w(n_items, slot); w.more(); w.advance(lane)) { w.draw(lane); ... item w.i ... }
struct Walk {
  int n_items, i;
  bool dynamic;  // a ticket slot and more items than blocks
  unsigned int* tickets;
  unsigned int drawn = 0;  // lane 0's draw for the item after i

  __device__ Walk(int items, int ticket_slot)
      : n_items(items),
        i(blockIdx.x),
        dynamic(ticket_slot >= 0 && static_cast<int>(gridDim.x) < items),
        tickets(&g_item_tickets[ticket_slot >= 0 ? ticket_slot : 0]) {}

  __device__ bool more() const { return i < n_items; }

  // At item i's start: the next ticket, read only by advance().
  __device__ void draw(int lane) {
    if (dynamic && lane == 0) drawn = atomicAdd(tickets, 1u);
  }

  // After item i's tiles: the next item (n_items when none is left).
  __device__ void advance(int lane) {
    if (!dynamic) {
      i += gridDim.x;
      return;
    }
    if (lane == 0 && drawn == static_cast<unsigned int>(n_items) - 1) atomicExch(tickets, 0u);
    const int64_t next = int64_t{gridDim.x} + __shfl_sync(0xffffffffu, drawn, 0);
    i = next < n_items ? static_cast<int>(next) : n_items;
  }
};

// A consumer warp's read of the item the producer published in `slot` (after the wait on the
// barrier whose arrival published it): lane 0 reads and the warp gets it by shuffle, so that the
// read is ordered before the warp's later release of the slot by that same lane's arrival (the
// other lanes' reads would be ordered only through a __syncwarp, which racecheck does not follow).
__device__ __forceinline__ int receive(const int& slot) {
  int i = 0;
  if (threadIdx.x % 32 == 0) i = slot;
  return __shfl_sync(0xffffffffu, i, 0);
}

}  // namespace folio::cuda::prefill_detail::item_deal
