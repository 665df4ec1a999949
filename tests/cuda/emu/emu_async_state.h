// The emulator's asynchronous state behind emu_async.h: the copy policy and checks' switches,
// the pending copies (per thread, and bundled with their cp.async.mbarrier.arrive), the TMA
// copies in flight, the mbarriers (phase, pending arrivals and transaction bytes), and the
// helpers that land copies, count arrivals and detect a deadlock. Callers hold cur->mu where a
// name ends in _locked. The semantics are documented in emu_async.h, whose operations use these.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "emu_race.h"
#include "simt_emu.h"

namespace emu {

enum class CopyPolicy { kEager, kLazy };
inline CopyPolicy copy_policy = [] {
  const char* e = std::getenv("FOLIO_EMU_CP_ASYNC");
  return e != nullptr && std::string(e) == "eager" ? CopyPolicy::kEager : CopyPolicy::kLazy;
}();

inline bool race_check = false;  // set by the test around the kernels it applies to
// Schedule skew: after every passed mbarrier wait, the threads of this 128-thread group (-1:
// none) hold back until every other thread waits or has exited (at most 2 s), so that the
// others run as far ahead as the protocol lets them. A protocol that only works while the groups
// stay in step (an arrival counted toward the wrong phase) then goes wrong, and the race check
// sees it.
inline int lagging_group = -1;

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
  int thread;      // issuer
  uint32_t epoch;  // the issuer's own clock entry at issue (race check)
};

struct MBar {
  uint32_t phase = 0;
  int pending = 0, expected = 0;
  int64_t tx = 0;              // pending transaction bytes of the current phase
  bool fed_by_copies = false;  // has had cp.async-triggered arrivals
  race::Clock acc, done[2];    // race check: current phase's clock, last completed per parity
};

// The copies a thread issued before a cp.async.mbarrier.arrive.noinc, and that arrival.
struct Bundle {
  uint64_t seq;
  std::vector<Copy> copies;
  uint32_t bar;
  race::Clock clock;  // race check: the issuer's clock at the arrive instruction
};

// A TMA copy: 16-byte chunks (src null: zero-filled, outside the tensor) and its barrier.
struct TmaCopy {
  struct Chunk {
    uint32_t dst;  // shared offset
    const void* src;
    uint32_t epoch;  // race check: the issuer's clock entry at issue
  };
  std::vector<Chunk> chunks;
  uint32_t bar;
  int thread;
  race::Clock clock;  // race check: the issuer's clock at issue
};

struct AsyncState {
  std::map<uint32_t, MBar> bars;            // by shared address
  std::vector<std::deque<Bundle>> bundles;  // per thread, oldest first
  std::deque<TmaCopy> tma;                  // kLazy: issued, not landed; oldest first
  uint64_t next_seq = 0, events = 0;
  struct Named {  // a named block barrier (bar.sync / bar.arrive)
    int arrived = 0, count = 0;
    uint64_t generation = 0;
    race::Clock acc, done[2];  // race check: this generation's arrivals, completed per parity
  };
  std::map<int, Named> named;  // by id
  struct Wait {
    bool on = false, named = false;  // named: in bar.sync on id `bar` until generation moves
    uint32_t bar = 0, parity = 0;
    uint64_t generation = 0;
  };
  std::vector<Wait> waits;            // per thread
  std::unique_ptr<race::State> race;  // when race_check
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
    if (race_check) s->race = std::make_unique<race::State>(cur->threads, cur->smem.size());
    cur->async = s;
  }
  return *static_cast<AsyncState*>(cur->async.get());
}

inline uint32_t smem_offset(const void* p) {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - smem());
}

inline void land_locked(AsyncState& s, const Copy& c) {
  if (c.valid)
    std::memcpy(c.dst, c.src, 16);
  else
    std::memset(c.dst, 0, 16);
  if (s.race) race::copy_land(*s.race, smem_offset(c.dst), c.thread, c.epoch);
}

inline MBar& mbar_locked(AsyncState& s, uint32_t addr) {
  auto it = s.bars.find(addr);
  if (it == s.bars.end()) async_fail("mbarrier operation on an uninitialised mbarrier");
  return it->second;
}

// Completes the current phase once no arrival and no transaction byte is pending.
inline void maybe_complete_locked(AsyncState& s, MBar& b) {
  if (b.pending == 0 && b.tx == 0) {
    b.done[b.phase & 1u] = std::move(b.acc);
    b.acc.clear();
    ++b.phase;
    b.pending = b.expected;
  }
  ++s.events;
  cur->cv.notify_all();
}

// One arrival; `clock`: the releasing thread's published clock (race check).
inline void arrive_locked(AsyncState& s, uint32_t addr, const race::Clock* clock) {
  MBar& b = mbar_locked(s, addr);
  if (b.pending <= 0) async_fail("mbarrier arrival below a pending count of zero");
  if (clock != nullptr) race::join(b.acc, *clock);
  --b.pending;
  maybe_complete_locked(s, b);
}

// A TMA copy lands: its chunks are written, its bytes completed on its barrier.
inline void land_tma_locked(AsyncState& s, const TmaCopy& c) {
  for (const TmaCopy::Chunk& ch : c.chunks) {
    if (ch.src != nullptr)
      std::memcpy(smem() + ch.dst, ch.src, 16);
    else
      std::memset(smem() + ch.dst, 0, 16);
    if (s.race) race::copy_land(*s.race, ch.dst, c.thread, ch.epoch);
  }
  MBar& b = mbar_locked(s, c.bar);
  b.tx -= static_cast<int64_t>(c.chunks.size()) * 16;
  if (b.tx < 0) async_fail("TMA bytes completed before they were expected (expect_tx)");
  if (s.race) race::join(b.acc, c.clock);
  maybe_complete_locked(s, b);
}

// Lands the oldest pending TMA copy on `addr`; false if there is none.
inline bool land_oldest_tma_locked(AsyncState& s, uint32_t addr) {
  for (auto it = s.tma.begin(); it != s.tma.end(); ++it)
    if (it->bar == addr) {
      const TmaCopy c = std::move(*it);
      s.tma.erase(it);
      land_tma_locked(s, c);
      return true;
    }
  return false;
}

inline bool tma_pending_locked(const AsyncState& s, uint32_t addr) {
  for (const TmaCopy& c : s.tma)
    if (c.bar == addr) return true;
  return false;
}

inline bool phase_done(const MBar& b, uint32_t parity) {
  return (b.phase & 1u) != (parity & 1u);
}

// Lands thread t's bundles up to and including the one of sequence number `seq`.
inline void land_bundles_locked(AsyncState& s, size_t t, uint64_t seq) {
  auto& q = s.bundles[t];
  while (!q.empty() && q.front().seq <= seq) {
    for (const Copy& c : q.front().copies) land_locked(s, c);
    const uint32_t bar = q.front().bar;
    const race::Clock clock = std::move(q.front().clock);
    q.pop_front();
    s.bars[bar].fed_by_copies = true;
    arrive_locked(s, bar, s.race ? &clock : nullptr);
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
      if (phase_done(it->second, w.parity) || oldest_bundle_locked(s, w.bar).first >= 0 ||
          tma_pending_locked(s, w.bar))
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
    std::fprintf(stderr, "  thread %zu: barrier @%u parity %u (phase %u, pending %d/%d, tx %lld)\n",
                 t, w.bar, w.parity, b.phase, b.pending, b.expected, static_cast<long long>(b.tx));
  }
  std::fflush(stderr);
  std::_Exit(3);
}

// Blocks the calling thread (lock held in lk, released while it sleeps) until done() holds,
// reporting a deadlock when no thread can make progress, or `stalled` after 60 s in which no
// barrier event happened.
template <typename Done>
void wait_locked(AsyncState& s, std::unique_lock<std::mutex>& lk, Done&& done,
                 const char* stalled) {
  auto start = std::chrono::steady_clock::now();
  uint64_t seen = s.events;
  while (!done()) {
    if (deadlocked_locked(s)) report_deadlock_locked(s, "deadlock");
    cur->cv.wait_for(lk, std::chrono::milliseconds(200));
    if (s.events != seen) {
      seen = s.events;
      start = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
      report_deadlock_locked(s, stalled);
    }
  }
}

}  // namespace emu
