// Randomized state machine over Scheduler + both KV managers and both preemption modes:
// random adds (shared prefixes, n > 1, priorities), steps with the fake model, aborts, engine
// stops and beam-style forks on small pools; invariants are checked after every step and
// everything must be free at the end.
#include <random>

#include <gtest/gtest.h>

#include "fake_engine.h"

namespace folio {
namespace {

using testing::FakeEngine;
using testing::make_kv;

void run_random(bool token_mode, PreemptionMode mode, SchedulePolicy policy, uint32_t seed) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 24;
  c.max_num_seqs = 6;
  c.max_model_len = 48;
  c.preemption_mode = mode;
  c.policy = policy;
  FakeEngine e(c, make_kv(token_mode, /*num_blocks=*/12, /*host_blocks=*/6));
  e.stop_modulus = 37;
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  GroupId next = 1;
  std::vector<GroupId> live;
  for (int it = 0; it < 1500; ++it) {
    int op = pick(0, 9);
    if (op <= 2) {
      Request r;
      r.id = next++;
      int base = pick(0, 2);
      for (int i = 0, n = pick(0, 10); i < n; ++i) r.prompt.push_back(base * 100 + i);
      for (int i = 0, n = pick(1, 14); i < n; ++i) r.prompt.push_back(pick(0, 999));
      r.params.max_tokens = pick(1, 16);
      r.params.n = pick(1, 3) == 3 ? 2 : 1;
      r.priority = pick(0, 3);
      r.cache_salt = base == 2 ? "t2" : "";
      ASSERT_TRUE(e.sched().add_request(r).ok());
      live.push_back(r.id);
    } else if (op == 3 && !live.empty()) {
      (void)e.sched().abort_request(live[static_cast<size_t>(pick(0, int(live.size()) - 1))]);
    } else if (op == 4 && !live.empty()) {
      const SequenceGroup* g = e.sched().group(live[static_cast<size_t>(pick(0, int(live.size()) - 1))]);
      if (g && g->status == SeqStatus::kRunning && g->seqs.size() < 4)
        for (const Sequence& s : g->seqs)
          if (s.status == SeqStatus::kRunning) {
            ASSERT_TRUE(e.sched().fork_sequence(s.id).ok());
            break;
          }
    } else {
      e.step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    Status st = e.kv().check_invariants();
    ASSERT_TRUE(st.ok()) << st.to_string() << " at iteration " << it;
  }
  for (int i = 0; i < 2000 && e.sched().has_unfinished(); ++i) {
    e.step();
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(e.kv().check_invariants().ok());
  }
  EXPECT_FALSE(e.sched().has_unfinished()) << e.sched().summary();
  EXPECT_EQ(e.kv().num_used_blocks(), 0);
  EXPECT_EQ(e.kv().num_free_host_blocks(), token_mode ? 24 : 6);
  EXPECT_GT(e.sched().stats().num_preemptions, 0);
}

TEST(SchedulerRandom, PagedRecompute) {
  for (uint32_t s = 1; s <= 8; ++s) run_random(false, PreemptionMode::kRecompute, SchedulePolicy::kFcfs, s);
}
TEST(SchedulerRandom, PagedSwap) {
  for (uint32_t s = 1; s <= 8; ++s) run_random(false, PreemptionMode::kSwap, SchedulePolicy::kPriority, s);
}
TEST(SchedulerRandom, TokenRecompute) {
  for (uint32_t s = 1; s <= 8; ++s) run_random(true, PreemptionMode::kRecompute, SchedulePolicy::kPriority, s);
}
TEST(SchedulerRandom, TokenSwap) {
  for (uint32_t s = 1; s <= 8; ++s) run_random(true, PreemptionMode::kSwap, SchedulePolicy::kFcfs, s);
}
TEST(SchedulerRandom, PagedRecomputeLongestOutputFirst) {
  for (uint32_t s = 1; s <= 8; ++s)
    run_random(false, PreemptionMode::kRecompute, SchedulePolicy::kLongestOutputFirst, s);
}
TEST(SchedulerRandom, TokenSwapLongestOutputFirst) {
  for (uint32_t s = 1; s <= 8; ++s)
    run_random(true, PreemptionMode::kSwap, SchedulePolicy::kLongestOutputFirst, s);
}

}  // namespace
}  // namespace folio
