// Asynchronous copies (cp.async), mbarriers and named barriers (bar.sync / bar.arrive with an id)
// on the SIMT emulator (simt_emu.h), modelled from
// the PTX ISA so that a kernel which relies on an ordering the ISA does not promise gets wrong
// results, an error or a reported deadlock instead of passing by luck.
//
// cp.async: a copy lands at a time the policy picks among the legal ones.
//   kEager: at issue (the earliest), and a cp.async.mbarrier.arrive arrives at once. Catches a
//     producer that overwrites a stage still being read (missing wait on "empty").
//   kLazy (default): as late as the program allows. Plain copies land when cp.async.wait_group
//     retires their group; the copies before a cp.async.mbarrier.arrive.noinc (all of the
//     thread's pending ones, committed or not) form a bundle that lands, with its arrival, only
//     when some thread waits on that barrier and needs the arrival to see its phase complete
//     (bundles of one thread land in issue order). Catches a consumer that reads a stage without
//     waiting on "full", or waits on the wrong parity.
// FOLIO_EMU_CP_ASYNC=eager|lazy sets the policy; the prefill check runs the mbarrier kernels under
// both.
//
// mbarrier (PTX ISA "mbarrier"): phase, pending count, expected count. init(n) sets phase 0 and
// both counts to n; an arrival decrements pending (below zero: error) and at zero completes the
// phase (phase + 1, pending = expected). try_wait.parity(p) is true iff the current phase's
// parity is not p (the phase of parity p has completed). Use of an uninitialised barrier is an
// error. Transaction bytes: arrive.expect_tx(n) raises the phase's pending bytes by n before its
// arrival; a TMA copy (cp.async.bulk.tensor) subtracts its bytes when it lands; the phase
// completes when both the pending arrivals and the pending bytes are zero (bytes below zero:
// error, a copy that landed before its bytes were expected). Not emulated: cluster scope, arrive
// counts other than 1.
//
// TMA copies (tma_issue): kEager lands them at issue; kLazy keeps them pending until a waiter on
// their barrier needs them to see its phase complete (oldest first), so a consumer that reads a
// stage without waiting on its full barrier reads stale data, and the race check sees the
// write's missing happens-before. They write through the async proxy: no fence needed after.
//
// Named barriers (bar.sync / bar.arrive) and the race check's hooks into __syncthreads,
// __syncwarp and wgmma: emu_block_sync.h, on this state.
//
// Deadlock: a waiter that finds its phase incomplete sleeps; if every thread of the block has
// exited or waits (on an mbarrier phase that is incomplete with no bundle left that could
// complete it, or in bar.sync on a barrier that has not completed), the emulator prints the
// waits and exits with status 3. A wait with no mbarrier
// progress for 60 s (e.g. threads stuck in __syncthreads) is reported the same way.
//
// With race_check set, emu_race.h's happens-before detector checks every cp.async write and
// wgmma read of shared memory against the mbarrier (and __syncwarp) synchronisation, whatever
// the interleaving: a stage refilled before its release, or read before its fill, fails.
//
// Also checked: a thread that passed an mbarrier wait fed by cp.async arrivals must execute
// fence.proxy.async before its next wgmma (wgmma reads through the async proxy; the protocol in
// prefill_attention_v3pw.cu fences on the consumer side).
#pragma once

#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "emu_async_state.h"

namespace emu {

// ---- cp.async ----

inline void cp_async_issue(void* dst, const void* src, bool valid) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  Copy c{dst, src, valid, static_cast<int>(tid), 0};
  if (s.race) c.epoch = race::copy_issue(*s.race, tid, smem_offset(dst));
  if (copy_policy == CopyPolicy::kEager)
    land_locked(s, c);
  else
    open_copies.push_back(c);
}

// A plain 16-byte store into shared memory that a wgmma reads later (after fence.proxy.async
// and a barrier): for the race check, a write by the storing thread that lands at once.
inline void generic_smem_store(void* dst) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  if (s.race) {
    const uint32_t addr = smem_offset(dst);
    race::copy_land(*s.race, addr, static_cast<int>(tid), race::copy_issue(*s.race, tid, addr));
  }
}

inline void cp_async_commit_group() {
  copy_groups.push_back(std::move(open_copies));
  open_copies.clear();
}

// wait_group n: every bundle of this thread is older than its remaining groups, so they land
// first; then the groups but the n most recent.
inline void cp_async_wait_group(size_t n) {
  if (copy_policy == CopyPolicy::kEager) return;
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  if (!s.bundles[tid].empty()) land_bundles_locked(s, tid, s.bundles[tid].back().seq);
  while (copy_groups.size() > n) {
    for (const Copy& c : copy_groups.front()) land_locked(s, c);
    copy_groups.pop_front();
  }
}

// ---- mbarrier ----

inline void mbarrier_init(uint32_t addr, uint32_t count) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  if (count == 0) async_fail("mbarrier.init with count 0");
  MBar b;
  b.pending = b.expected = static_cast<int>(count);
  s.bars[addr] = std::move(b);
  std::memset(smem() + addr, 0, 8);  // the object's bytes, as the hardware's init writes them
}

inline void mbarrier_arrive(uint32_t addr) {
  bool woke = false;
  {
    std::lock_guard<std::mutex> lk(cur->mu);
    AsyncState& s = async_state();
    const uint32_t phase = mbar_locked(s, addr).phase;
    if (s.race) {
      const race::Clock clock = race::release(*s.race, tid);
      arrive_locked(s, addr, &clock);
    } else {
      arrive_locked(s, addr, nullptr);
    }
    if (s.bars[addr].phase != phase)
      for (const auto& w : s.waits) woke = woke || (w.on && w.bar == addr);
  }
  // kEager: let the threads this arrival woke run first (a producer refilling the released
  // stage), so that a consumer that released its stage before its wgmma retired has the
  // operands overwritten under it (the wgmma emulation compares them at issue and at retire).
  if (woke && copy_policy == CopyPolicy::kEager)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

// mbarrier.arrive.expect_tx: the phase expects `bytes` more, then this thread arrives.
inline void mbarrier_arrive_expect_tx(uint32_t addr, uint32_t bytes) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  mbar_locked(s, addr).tx += bytes;
  if (s.race) {
    const race::Clock clock = race::release(*s.race, tid);
    arrive_locked(s, addr, &clock);
  } else {
    arrive_locked(s, addr, nullptr);
  }
}

// cp.async.bulk.tensor: chunks (shared offset, source or null for zeros) completing on `bar`.
inline void tma_issue(std::vector<std::pair<uint32_t, const void*>> chunks, uint32_t bar) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  mbar_locked(s, bar);
  TmaCopy c{{}, bar, static_cast<int>(tid), {}};
  for (const auto& [dst, src] : chunks) {
    if (dst % 16 != 0 || dst + 16 > cur->smem.size()) async_fail("TMA destination out of range");
    c.chunks.push_back({dst, src, s.race ? race::copy_issue(*s.race, tid, dst) : 0u});
  }
  if (s.race) c.clock = race::release(*s.race, tid);
  if (copy_policy == CopyPolicy::kEager)
    land_tma_locked(s, c);
  else
    s.tma.push_back(std::move(c));
}

inline void cp_async_mbarrier_arrive_noinc(uint32_t addr) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  mbar_locked(s, addr);  // initialised?
  race::Clock clock;
  if (s.race) clock = race::release(*s.race, tid);
  if (copy_policy == CopyPolicy::kEager) {  // every earlier copy has landed already
    s.bars[addr].fed_by_copies = true;
    arrive_locked(s, addr, s.race ? &clock : nullptr);
    return;
  }
  Bundle b{s.next_seq++, {}, addr, std::move(clock)};
  for (auto& g : copy_groups) b.copies.insert(b.copies.end(), g.begin(), g.end());
  b.copies.insert(b.copies.end(), open_copies.begin(), open_copies.end());
  copy_groups.clear();
  open_copies.clear();
  s.bundles[tid].push_back(std::move(b));
}

// mbarrier.try_wait.parity: may suspend before returning false, as the hardware may.
inline bool mbarrier_try_wait_parity(uint32_t addr, uint32_t parity) {
  std::unique_lock<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  mbar_locked(s, addr);
  auto done = [&] {
    const MBar& b = s.bars[addr];
    if (phase_done(b, parity)) return true;
    if (copy_policy == CopyPolicy::kLazy) {  // land just the arrivals and bytes it needs
      while (!phase_done(s.bars[addr], parity)) {
        const auto [t, seq] = oldest_bundle_locked(s, addr);
        if (t >= 0) {
          land_bundles_locked(s, t, seq);
        } else if (!land_oldest_tma_locked(s, addr)) {
          break;
        }
      }
    }
    return phase_done(s.bars[addr], parity);
  };
  auto acquired = [&] {
    if (s.bars[addr].fed_by_copies) unfenced_acquire = true;
    if (s.race) race::acquire(*s.race, tid, s.bars[addr].done[parity & 1u]);
    if (static_cast<int>(tid / 128) == lagging_group) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (std::chrono::steady_clock::now() < until) {
        int idle = cur->exited;
        for (size_t t = 0; t < s.waits.size(); ++t)
          idle += static_cast<int>(t / 128) != lagging_group && s.waits[t].on;
        if (idle >= cur->threads - 128) break;
        cur->cv.wait_for(lk, std::chrono::milliseconds(5));  // rarely: the lock is shared
      }
    }
    return true;
  };
  if (done()) return acquired();
  s.waits[tid] = {true, false, addr, parity, 0};
  wait_locked(s, lk, done, "no mbarrier progress for 60 s");
  s.waits[tid].on = false;
  return acquired();
}

}  // namespace emu
