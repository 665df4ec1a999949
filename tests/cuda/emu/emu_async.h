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
// error. Not emulated: expect-tx / complete-tx, cluster scope, arrive counts other than 1.
//
// Named barriers: per id, arrivals counted in threads; the count-th completes the barrier and
// releases the threads in bar.sync (ids 1-15; a count that differs within one phase fails).
//
// Deadlock: a waiter that finds its phase incomplete sleeps; if every thread of the block has
// exited or waits (on an mbarrier phase that is incomplete with no bundle left that could
// complete it, or in bar.sync on a barrier that has not completed), the emulator prints the
// waits and exits with status 3. A wait with no mbarrier
// progress for 60 s (e.g. threads stuck in __syncthreads) is reported the same way.
//
// Also checked: a thread that passed an mbarrier wait fed by cp.async arrivals must execute
// fence.proxy.async before its next wgmma (wgmma reads through the async proxy; the protocol in
// prefill_attention_v3pw.cu fences on the consumer side).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "simt_emu.h"

namespace emu {

enum class CopyPolicy { kEager, kLazy };
inline CopyPolicy copy_policy = [] {
  const char* e = std::getenv("FOLIO_EMU_CP_ASYNC");
  return e != nullptr && std::string(e) == "eager" ? CopyPolicy::kEager : CopyPolicy::kLazy;
}();

[[noreturn]] inline void async_fail(const char* what) {
  std::fprintf(stderr, "emulated cp.async / mbarrier (thread %u, block %u,%u,%u): %s\n", tid,
               blockIdx.x, blockIdx.y, blockIdx.z, what);
  std::fflush(stderr);
  std::_Exit(3);
}

struct Copy {
  void* dst;
  const void* src;
  bool valid;
  void land() const {
    if (valid)
      std::memcpy(dst, src, 16);
    else
      std::memset(dst, 0, 16);
  }
};

struct MBar {
  uint32_t phase = 0;
  int pending = 0, expected = 0;
  bool fed_by_copies = false;  // has had cp.async-triggered arrivals
};

// The copies a thread issued before a cp.async.mbarrier.arrive.noinc, and that arrival.
struct Bundle {
  uint64_t seq;
  std::vector<Copy> copies;
  uint32_t bar;
};

struct AsyncState {
  std::map<uint32_t, MBar> bars;            // by shared address
  std::vector<std::deque<Bundle>> bundles;  // per thread, oldest first
  uint64_t next_seq = 0, events = 0;
  struct Named {  // a named block barrier (bar.sync / bar.arrive)
    int arrived = 0, count = 0;
    uint64_t generation = 0;
  };
  std::map<int, Named> named;  // by id
  struct Wait {
    bool on = false, named = false;  // named: in bar.sync on id `bar` until generation moves
    uint32_t bar = 0, parity = 0;
    uint64_t generation = 0;
  };
  std::vector<Wait> waits;  // per thread
};

// This thread's copies not yet landed or bundled (kLazy): uncommitted, then committed groups.
inline thread_local std::vector<Copy> open_copies;
inline thread_local std::deque<std::vector<Copy>> copy_groups;
// Set by a passed wait on a barrier fed by cp.async, cleared by fence.proxy.async.
inline thread_local bool unfenced_acquire = false;

// Callers hold cur->mu.
inline AsyncState& async_state() {
  if (!cur->async) {
    auto s = std::make_shared<AsyncState>();
    s->bundles.resize(cur->threads);
    s->waits.resize(cur->threads);
    cur->async = s;
  }
  return *static_cast<AsyncState*>(cur->async.get());
}

inline MBar& mbar_locked(AsyncState& s, uint32_t addr) {
  auto it = s.bars.find(addr);
  if (it == s.bars.end()) async_fail("mbarrier operation on an uninitialised mbarrier");
  return it->second;
}

inline void arrive_locked(AsyncState& s, uint32_t addr) {
  MBar& b = mbar_locked(s, addr);
  if (b.pending <= 0) async_fail("mbarrier arrival below a pending count of zero");
  if (--b.pending == 0) {
    ++b.phase;
    b.pending = b.expected;
  }
  ++s.events;
  cur->cv.notify_all();
}

inline bool phase_done(const MBar& b, uint32_t parity) {
  return (b.phase & 1u) != (parity & 1u);
}

// Lands thread t's bundles up to and including the one of sequence number `seq`.
inline void land_bundles_locked(AsyncState& s, size_t t, uint64_t seq) {
  auto& q = s.bundles[t];
  while (!q.empty() && q.front().seq <= seq) {
    for (const Copy& c : q.front().copies) c.land();
    const uint32_t bar = q.front().bar;
    q.pop_front();
    s.bars[bar].fed_by_copies = true;
    arrive_locked(s, bar);
  }
}

// The oldest bundle (over all threads) arriving on `addr`: {thread, seq}, or thread -1.
inline std::pair<int, uint64_t> oldest_bundle_locked(const AsyncState& s, uint32_t addr) {
  std::pair<int, uint64_t> best{-1, 0};
  for (size_t t = 0; t < s.bundles.size(); ++t)
    for (const Bundle& b : s.bundles[t])
      if (b.bar == addr) {
        if (best.first < 0 || b.seq < best.second) best = {static_cast<int>(t), b.seq};
        break;
      }
  return best;
}

// ---- cp.async ----

inline void cp_async_issue(void* dst, const void* src, bool valid) {
  const Copy c{dst, src, valid};
  if (copy_policy == CopyPolicy::kEager)
    c.land();
  else
    open_copies.push_back(c);
}

inline void cp_async_commit_group() {
  copy_groups.push_back(std::move(open_copies));
  open_copies.clear();
}

// wait_group n: every bundle of this thread is older than its remaining groups, so they land
// first; then the groups but the n most recent.
inline void cp_async_wait_group(size_t n) {
  if (copy_policy == CopyPolicy::kEager) return;
  {
    std::lock_guard<std::mutex> lk(cur->mu);
    AsyncState& s = async_state();
    if (!s.bundles[tid].empty()) land_bundles_locked(s, tid, s.bundles[tid].back().seq);
  }
  while (copy_groups.size() > n) {
    for (const Copy& c : copy_groups.front()) c.land();
    copy_groups.pop_front();
  }
}

// ---- mbarrier ----

inline void mbarrier_init(uint32_t addr, uint32_t count) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  if (count == 0) async_fail("mbarrier.init with count 0");
  s.bars[addr] = MBar{0, static_cast<int>(count), static_cast<int>(count), false};
  std::memset(smem() + addr, 0, 8);  // the object's bytes, as the hardware's init writes them
}

inline void mbarrier_arrive(uint32_t addr) {
  bool woke = false;
  {
    std::lock_guard<std::mutex> lk(cur->mu);
    AsyncState& s = async_state();
    const uint32_t phase = mbar_locked(s, addr).phase;
    arrive_locked(s, addr);
    if (s.bars[addr].phase != phase)
      for (const auto& w : s.waits) woke = woke || (w.on && w.bar == addr);
  }
  // kEager: let the threads this arrival woke run first (a producer refilling the released
  // stage), so that a consumer that released its stage before its wgmma retired has the
  // operands overwritten under it (the wgmma emulation compares them at issue and at retire).
  if (woke && copy_policy == CopyPolicy::kEager)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

inline void cp_async_mbarrier_arrive_noinc(uint32_t addr) {
  std::lock_guard<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  mbar_locked(s, addr);                     // initialised?
  if (copy_policy == CopyPolicy::kEager) {  // every earlier copy has landed already
    s.bars[addr].fed_by_copies = true;
    arrive_locked(s, addr);
    return;
  }
  Bundle b{s.next_seq++, {}, addr};
  for (auto& g : copy_groups) b.copies.insert(b.copies.end(), g.begin(), g.end());
  b.copies.insert(b.copies.end(), open_copies.begin(), open_copies.end());
  copy_groups.clear();
  open_copies.clear();
  s.bundles[tid].push_back(std::move(b));
}

// Every thread has exited or waits on a phase that nothing pending can complete.
inline bool deadlocked_locked(const AsyncState& s) {
  int stuck = cur->exited;
  for (size_t t = 0; t < s.waits.size(); ++t) {
    const auto& w = s.waits[t];
    if (!w.on) continue;
    if (w.named) {
      if (s.named.at(static_cast<int>(w.bar)).generation != w.generation) return false;
    } else {
      const auto it = s.bars.find(w.bar);
      if (phase_done(it->second, w.parity) || oldest_bundle_locked(s, w.bar).first >= 0)
        return false;
    }
    ++stuck;
  }
  return stuck == cur->threads;
}

[[noreturn]] inline void report_deadlock_locked(const AsyncState& s, const char* what) {
  std::fprintf(stderr, "emulated mbarrier: %s in block %u,%u,%u; waiting threads:\n", what,
               blockIdx.x, blockIdx.y, blockIdx.z);
  for (size_t t = 0; t < s.waits.size(); ++t) {
    const auto& w = s.waits[t];
    if (!w.on) continue;
    if (w.named) {
      const auto& n = s.named.at(static_cast<int>(w.bar));
      std::fprintf(stderr, "  thread %zu: bar.sync %u (%d of %d arrived)\n", t, w.bar, n.arrived,
                   n.count);
      continue;
    }
    const MBar& b = s.bars.at(w.bar);
    std::fprintf(stderr, "  thread %zu: barrier @%u parity %u (phase %u, pending %d/%d)\n", t,
                 w.bar, w.parity, b.phase, b.pending, b.expected);
  }
  std::fflush(stderr);
  std::_Exit(3);
}

// mbarrier.try_wait.parity: may suspend before returning false, as the hardware may.
inline bool mbarrier_try_wait_parity(uint32_t addr, uint32_t parity) {
  std::unique_lock<std::mutex> lk(cur->mu);
  AsyncState& s = async_state();
  mbar_locked(s, addr);
  auto done = [&] {
    const MBar& b = s.bars[addr];
    if (phase_done(b, parity)) return true;
    if (copy_policy == CopyPolicy::kLazy) {  // land just the arrivals this phase needs
      while (!phase_done(s.bars[addr], parity)) {
        const auto [t, seq] = oldest_bundle_locked(s, addr);
        if (t < 0) break;
        land_bundles_locked(s, t, seq);
      }
    }
    return phase_done(s.bars[addr], parity);
  };
  if (done()) {
    if (s.bars[addr].fed_by_copies) unfenced_acquire = true;
    return true;
  }
  s.waits[tid] = {true, false, addr, parity, 0};
  auto start = std::chrono::steady_clock::now();
  uint64_t seen = s.events;
  while (!done()) {
    if (deadlocked_locked(s)) report_deadlock_locked(s, "deadlock");
    cur->cv.wait_for(lk, std::chrono::milliseconds(200));
    if (s.events != seen) {
      seen = s.events;
      start = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
      report_deadlock_locked(s, "no mbarrier progress for 60 s");
    }
  }
  s.waits[tid].on = false;
  if (s.bars[addr].fed_by_copies) unfenced_acquire = true;
  return true;
}

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
  if (++n.arrived == count) {
    n.arrived = 0;
    ++n.generation;
    ++s.events;
    cur->cv.notify_all();
  }
  if (!wait) return;
  s.waits[tid] = {true, true, static_cast<uint32_t>(id), 0, gen};
  auto start = std::chrono::steady_clock::now();
  uint64_t seen = s.events;
  while (s.named[id].generation == gen) {
    if (deadlocked_locked(s)) report_deadlock_locked(s, "deadlock");
    cur->cv.wait_for(lk, std::chrono::milliseconds(200));
    if (s.events != seen) {
      seen = s.events;
      start = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
      report_deadlock_locked(s, "no barrier progress for 60 s");
    }
  }
  s.waits[tid].on = false;
}

}  // namespace emu
