// Named block barriers (bar.sync / bar.arrive with an id) and the race check's hooks into
// __syncthreads, __syncwarp and wgmma, on the SIMT emulator's asynchronous state (emu_async.h:
// the waits share its deadlock detection).
//
// Named barriers: per id, arrivals counted in threads; the count-th completes the barrier and
// releases the threads in bar.sync (ids 1-15; a count that differs within one phase fails). With
// the race check they carry clocks: every arrival releases into the barrier's phase, every
// thread released from bar.sync acquires it (bar.sync orders the participants' memory accesses).
#pragma once

#include <cstdint>
#include <mutex>

#include "emu_async.h"
#include "emu_race.h"
#include "simt_emu.h"

namespace emu {

// ---- named barriers ----

// bar.sync (wait) / bar.arrive on barrier `id` with `count` threads: the count-th arrival
// completes the barrier and releases the threads in bar.sync on it. Barrier 0 is
// __syncthreads' (simt_emu.h) and is not emulated here.
inline void named_barrier(int id, int count, bool wait) {
  std::unique_lock<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  if (id <= 0 || id >= 16 || count <= 0 || count % 32 != 0 || count > cur->threads)
    async_fail("named barrier: bad id or thread count");
  auto& n = s.named[id];
  if (n.arrived == 0)
    n.count = count;
  else if (n.count != count)
    async_fail("named barrier: arrivals with different thread counts");
  const uint64_t gen = n.generation;
  if (s.race) race::join(n.acc, race::release(*s.race, tid));
  if (++n.arrived == count) {
    n.arrived = 0;
    n.done[gen & 1u] = std::move(n.acc);
    n.acc.clear();
    ++n.generation;
    ++s.events;
    cur->cv.notify_all();
  }
  if (!wait) return;
  s.waits[tid] = {true, true, static_cast<uint32_t>(id), 0, gen};
  wait_locked(s, lk, [&] { return s.named[id].generation != gen; },
              "no barrier progress for 60 s");
  s.waits[tid].on = false;
  if (s.race) race::acquire(*s.race, tid, s.named[id].done[gen & 1u]);
}

// ---- race-check hooks (emu_race.h) ----

// __syncwarp: a warp barrier that also orders the lanes' memory accesses.
inline void syncwarp_with_clocks() {
  {
    std::lock_guard<std::mutex> lk(cur->mu);
    AsyncState& s = async_state();
    if (s.race) race::syncwarp_arrive(*s.race, tid);
  }
  warp_sync();
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  if (s.race) race::syncwarp_leave(*s.race, tid);
}
// __syncthreads: every thread releases into the block's clock, then acquires it.
inline void syncthreads_enter() {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  if (s.race) race::syncthreads_arrive(*s.race, tid);
}
inline void syncthreads_leave() {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  if (s.race) race::syncthreads_leave(*s.race, tid);
}
inline const bool sync_hooks_set = [] {
  syncwarp_hook = &syncwarp_with_clocks;
  sync_hook_enter = &syncthreads_enter;
  sync_hook_leave = &syncthreads_leave;
  return true;
}();

// A wgmma's shared-memory reads by this thread: checked at issue, recorded when it runs.
template <typename Addrs>
inline void wgmma_reads(const Addrs& addrs, bool at_issue) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  if (!s.race) return;
  for (uint32_t a : addrs) {
    if (at_issue)
      race::read_issue(*s.race, tid, a);
    else
      race::read_run(*s.race, tid, a);
  }
}

}  // namespace emu
