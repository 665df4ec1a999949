// The scheduler over a paged KV manager with a sliding window: blocks below each sequence's
// window are freed before its step, so a small cache runs more sequences at once (and a
// sequence longer than the whole cache), while the fake model, which reads the window back
// from the cache every step, produces exactly the token streams of a roomy cache.
#include <gtest/gtest.h>

#include "fake_engine.h"

namespace folio {
namespace {

using testing::FakeEngine;
using testing::make_kv;

using Streams = std::map<FakeEngine::StreamKey, std::vector<TokenId>>;

struct WindowRun {
  Streams streams;
  int64_t preemptions = 0;
  int peak_blocks = 0;
  int peak_running = 0;
};

// Twelve requests (prompts of 6-10 tokens, 40-49 outputs, three with n = 2) over a cache of
// `num_blocks` blocks of 4 whose manager frees below `kv_window`; the fake model reads
// `read_window` positions (0: all of them).
WindowRun run(int num_blocks, int kv_window, int read_window, PreemptionMode mode,
              double conservativeness = 0.0) {
  SchedulerConfig c;
  c.schedule_conservativeness = conservativeness;
  c.max_num_batched_tokens = 32;
  c.max_num_seqs = 8;
  c.max_model_len = 128;
  c.preemption_mode = mode;
  c.sliding_window = kv_window;
  FakeEngine e(c, make_kv(false, num_blocks, /*host_blocks=*/24, 4, kv_window));
  e.window = read_window;
  for (GroupId id = 1; id <= 12; ++id) {
    Request r;
    r.id = id;
    for (int i = 0; i < 6; ++i) r.prompt.push_back(static_cast<TokenId>(id % 3 * 50 + i));
    for (int i = 0; i < int(id % 5); ++i) r.prompt.push_back(static_cast<TokenId>(id * 7 + i));
    r.params.max_tokens = 40 + int(id % 4) * 3;
    r.params.ignore_eos = true;
    r.params.n = id % 4 == 0 ? 2 : 1;
    EXPECT_TRUE(e.sched().add_request(r).ok());
  }
  WindowRun out;
  for (int i = 0; i < 3000 && e.sched().has_unfinished(); ++i) {
    e.step();
    if (::testing::Test::HasFatalFailure()) return {};
    EXPECT_TRUE(e.kv().check_invariants().ok()) << e.kv().check_invariants().to_string();
    out.peak_blocks = std::max(out.peak_blocks, e.kv().num_used_blocks());
    out.peak_running = std::max(out.peak_running, e.sched().num_running());
  }
  EXPECT_FALSE(e.sched().has_unfinished());
  EXPECT_TRUE(e.failed.empty());
  EXPECT_EQ(e.kv().num_used_blocks(), 0);
  out.preemptions = e.sched().stats().num_preemptions;
  out.streams = e.streams();
  return out;
}

void expect_window_pays(PreemptionMode mode) {
  const WindowRun roomy = run(512, 0, 0, mode);
  // 24 blocks hold about one and a half of these sequences whole, four windows of 8.
  const WindowRun kept = run(24, 0, 8, mode);
  const WindowRun freed = run(24, 8, 8, mode);
  const WindowRun freed_headroom = run(24, 8, 8, mode, /*conservativeness=*/1.0);
  ASSERT_EQ(roomy.streams.size(), 15u);
  EXPECT_EQ(roomy.preemptions, 0);
  EXPECT_EQ(freed.streams, roomy.streams);
  EXPECT_EQ(freed_headroom.streams, roomy.streams);
  EXPECT_EQ(kept.streams, roomy.streams);
  EXPECT_LT(freed.preemptions, kept.preemptions);
  EXPECT_GT(freed.peak_running, kept.peak_running);
  EXPECT_LT(freed_headroom.preemptions, kept.preemptions);
}

TEST(SlidingWindowScheduler, FreedBlocksRunMoreSequencesWithTheSameOutputsRecompute) {
  expect_window_pays(PreemptionMode::kRecompute);
}

TEST(SlidingWindowScheduler, FreedBlocksRunMoreSequencesWithTheSameOutputsSwap) {
  expect_window_pays(PreemptionMode::kSwap);
}

// One request whose 6 + 100 tokens are far more than a cache of 6 blocks of 4 holds runs to its
// full length: it never holds more than its window's 3 blocks. Without a window it stops where
// the cache ends (finish reason length, 24 - 6 outputs), as before.
TEST(SlidingWindowScheduler, ASequenceLongerThanTheCacheRunsWithinItsWindow) {
  for (int window : {0, 6}) {
    SchedulerConfig c;
    c.max_num_batched_tokens = 32;
    c.max_num_seqs = 4;
    c.max_model_len = 256;
    c.sliding_window = window;
    FakeEngine e(c, make_kv(false, 6, 0, 4, window));
    e.window = window;
    Request r = testing::iota_request(1, 6, 100, 10);
    r.params.ignore_eos = true;
    ASSERT_TRUE(e.sched().add_request(r).ok());
    for (int i = 0; i < 500 && e.sched().has_unfinished(); ++i) {
      e.step();
      if (HasFatalFailure()) return;
      ASSERT_TRUE(e.kv().check_invariants().ok());
      EXPECT_LE(e.kv().num_used_blocks(), window ? 3 : 6);
    }
    EXPECT_FALSE(e.sched().has_unfinished());
    EXPECT_TRUE(e.failed.empty());
    const size_t expected = window ? 100u : 24u - 6u;
    EXPECT_EQ(e.streams().at({1, 0}).size(), expected) << "window " << window;
  }
}

}  // namespace
}  // namespace folio
