// A happens-before race detector for shared memory written by cp.async and read by wgmma on the
// SIMT emulator (emu_async.h calls it; on while emu::race_check is set). Timing-independent: it
// does not need the bad interleaving to happen, only the missing synchronisation.
//
// Vector clocks: every thread has one (its own entry starts at 1). A release (mbarrier arrive,
// cp.async.mbarrier.arrive) publishes the thread's clock into the barrier's current phase and
// then advances the thread's own entry; the phase's clock is the join of its arrivals', kept per
// parity when the phase completes; a passed try_wait.parity(p) joins the clock of the last
// completed phase of parity p. __syncwarp joins the clocks of the warp's lanes, __syncthreads
// those of the block (a release and an acquire by every thread). Named barriers carry no clocks
// here (a protocol that relied on them to hand over shared memory would be reported).
//
// Shadow state per 16-byte chunk of shared memory: the last copy that landed there (thread,
// its own clock entry when it issued the copy) and, per thread, the own-clock entry at which that
// thread's wgmma last read it (recorded when the wgmma runs, i.e. at its wait_group). Checks:
//   - wgmma issue (read after write): the chunk was written, and the reading thread has acquired
//     the writer's clock at least up to the copy's issue;
//   - cp.async issue (write after read): the writing thread has acquired every reader's clock at
//     least up to its last read of the chunk, i.e. the readers released the stage after their
//     wgmma retired, and the writer waited for that release.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace emu::race {

using Clock = std::vector<uint32_t>;

inline void join(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] > into[i]) into[i] = from[i];
}

struct State {
  int threads = 0;
  std::vector<Clock> vc;        // per thread
  std::vector<Clock> warp_vc;   // per warp: the join of what its lanes brought to __syncwarp
  Clock block_vc;               // the join of what the threads brought to __syncthreads
  std::vector<int32_t> writer;  // per chunk: thread of the last landed copy, -1 none
  std::vector<uint32_t> w_epoch;
  std::vector<uint32_t> reads;  // [chunk * threads + thread]: own-clock entry of the last read

  State(int n, size_t smem_bytes)
      : threads(n),
        vc(n, Clock(n, 0)),
        warp_vc((n + 31) / 32, Clock(n, 0)),
        writer(smem_bytes / 16 + 1, -1),
        w_epoch(smem_bytes / 16 + 1, 0),
        reads((smem_bytes / 16 + 1) * n, 0) {
    for (int t = 0; t < n; ++t) vc[t][t] = 1;
  }
};

[[noreturn]] inline void report(const char* what, int thread, uint32_t addr, int other) {
  std::fprintf(stderr, "emulated race check: %s (thread %d, shared byte %u, other thread %d)\n",
               what, thread, addr, other);
  std::fflush(stderr);
  std::_Exit(3);
}

// A release by thread t: the clock to publish, then t's own entry advances.
inline Clock release(State& s, int t) {
  Clock c = s.vc[t];
  ++s.vc[t][t];
  return c;
}

inline void acquire(State& s, int t, const Clock& c) {
  join(s.vc[t], c);
}

inline void syncthreads_arrive(State& s, int t) {
  join(s.block_vc, release(s, t));
}
inline void syncthreads_leave(State& s, int t) {
  join(s.vc[t], s.block_vc);
}

inline void syncwarp_arrive(State& s, int t) {
  join(s.warp_vc[t / 32], s.vc[t]);
}
inline void syncwarp_leave(State& s, int t) {
  join(s.vc[t], s.warp_vc[t / 32]);
}

// cp.async issued by thread t into shared byte `addr`: the write-after-read check; returns the
// copy's epoch (t's own entry).
inline uint32_t copy_issue(const State& s, int t, uint32_t addr) {
  const size_t c = addr / 16;
  for (int r = 0; r < s.threads; ++r)
    if (s.reads[c * s.threads + r] > s.vc[t][r])
      report(
          "cp.async overwrites shared memory a wgmma read without a release acquired by the "
          "writer in between (stage refilled before it was released)",
          t, addr, r);
  return s.vc[t][t];
}

inline void copy_land(State& s, uint32_t addr, int t, uint32_t epoch) {
  s.writer[addr / 16] = t;
  s.w_epoch[addr / 16] = epoch;
}

// wgmma issued by thread t reads shared byte `addr`: the read-after-write check.
inline void read_issue(const State& s, int t, uint32_t addr) {
  const size_t c = addr / 16;
  const int w = s.writer[c];
  if (w < 0) report("wgmma reads shared memory no cp.async has written", t, addr, -1);
  if (s.vc[t][w] < s.w_epoch[c])
    report(
        "wgmma reads shared memory whose copy the reading thread has not acquired (missing "
        "or wrong wait on the stage's full barrier)",
        t, addr, w);
}

inline void read_run(State& s, int t, uint32_t addr) {
  uint32_t& r = s.reads[(addr / 16) * s.threads + t];
  if (s.vc[t][t] > r) r = s.vc[t][t];
}

}  // namespace emu::race
