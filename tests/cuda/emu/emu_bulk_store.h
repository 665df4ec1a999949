// TMA stores (cp.async.bulk.tensor shared -> global, bulk async-groups) on the SIMT emulator,
// modelled from the PTX ISA like emu_async.h's loads: a store reads its shared-memory source at
// some time between its issue and the issuing thread's cp.async.bulk.wait_group.read that covers
// its group, and writes global memory then.
//   kEager (FOLIO_EMU_CP_ASYNC=eager): at issue. Catches a source read before its writers were
//     ordered before the issuing thread (a missing barrier or proxy fence shows as stale data).
//   kLazy (default): at the wait (the latest). Catches a source overwritten, or handed back to a
//     producer, before the wait.
// With race_check, each 16-byte chunk read is checked and recorded as a read by the issuing
// thread (emu_race.h: read after the writer's store, and a later copy into the chunk must have
// acquired the issuer's release after the read).
#pragma once

#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "emu_async.h"

namespace emu {

struct BulkStoreChunk {
  uint32_t src;  // shared offset
  void* dst;     // global, or null: outside the tensor (not written)
};

inline thread_local std::vector<BulkStoreChunk> open_bulk_stores;
inline thread_local std::deque<std::vector<BulkStoreChunk>> bulk_store_groups;

inline void perform_bulk_stores(const std::vector<BulkStoreChunk>& chunks) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  for (const BulkStoreChunk& c : chunks) {
    if (c.src % 16 != 0 || c.src + 16 > cur->smem.size())
      async_fail("TMA store source out of range");
    if (s.race) {
      race::read_issue(*s.race, static_cast<int>(tid), c.src);
      race::read_run(*s.race, static_cast<int>(tid), c.src);
    }
    if (c.dst != nullptr) std::memcpy(c.dst, smem() + c.src, 16);
  }
}

inline void bulk_store_issue(std::vector<BulkStoreChunk> chunks) {
  if (copy_policy == CopyPolicy::kEager) {
    perform_bulk_stores(chunks);
    chunks.clear();  // an empty record keeps the group structure
  }
  for (BulkStoreChunk& c : chunks) open_bulk_stores.push_back(c);
}

inline void bulk_commit_group() {
  bulk_store_groups.push_back(std::move(open_bulk_stores));
  open_bulk_stores.clear();
}

// wait_group.read n and wait_group n alike: the groups but the n most recent are performed.
inline void bulk_wait_group(size_t n) {
  while (bulk_store_groups.size() > n) {
    perform_bulk_stores(bulk_store_groups.front());
    bulk_store_groups.pop_front();
  }
}

}  // namespace emu
