// A tiny cache that forces preemptions must produce exactly the token streams of a roomy one:
// the fake model's tokens depend on the KV contents, so this checks recompute and swap (and
// prefix hits and copy-on-write along the way) end to end on the host, in both KV modes. The
// tiny cache runs with vLLM's admission (no headroom: it preempts most) and with the default
// admission headroom (it holds prompts back instead; the streams must not change either).
#include <gtest/gtest.h>

#include "fake_engine.h"

namespace folio {
namespace {

using testing::FakeEngine;
using testing::make_kv;

using Streams = std::map<FakeEngine::StreamKey, std::vector<TokenId>>;

Streams run(bool token_mode, PreemptionMode mode, int num_blocks, int host_blocks,
            int64_t* preemptions, double conservativeness = 0.0) {
  SchedulerConfig c;
  c.schedule_conservativeness = conservativeness;
  c.max_num_batched_tokens = 32;
  c.max_num_seqs = 8;
  c.max_model_len = 64;
  c.preemption_mode = mode;
  FakeEngine e(c, make_kv(token_mode, num_blocks, host_blocks));
  for (GroupId id = 1; id <= 12; ++id) {
    Request r;
    r.id = id;
    for (int i = 0; i < 6; ++i) r.prompt.push_back(static_cast<TokenId>(id % 3 * 50 + i));
    for (int i = 0; i < int(id % 5); ++i) r.prompt.push_back(static_cast<TokenId>(id * 7 + i));
    r.params.max_tokens = 12 + int(id % 4) * 3;
    r.params.n = id % 4 == 0 ? 2 : 1;
    EXPECT_TRUE(e.sched().add_request(r).ok());
  }
  for (int i = 0; i < 1000 && e.sched().has_unfinished(); ++i) {
    e.step();
    if (::testing::Test::HasFatalFailure()) return {};
    EXPECT_TRUE(e.kv().check_invariants().ok());
  }
  EXPECT_FALSE(e.sched().has_unfinished());
  EXPECT_TRUE(e.failed.empty());
  EXPECT_EQ(e.kv().num_used_blocks(), 0);
  *preemptions = e.sched().stats().num_preemptions;
  return e.streams();
}

void expect_same_streams(bool token_mode, PreemptionMode mode) {
  int64_t roomy_preempt = 0, tiny_preempt = 0, headroom_preempt = 0;
  Streams roomy = run(token_mode, mode, 256, 64, &roomy_preempt);
  Streams tiny = run(token_mode, mode, 14, 12, &tiny_preempt);
  Streams headroom = run(token_mode, mode, 14, 12, &headroom_preempt, /*conservativeness=*/1.0);
  EXPECT_EQ(roomy_preempt, 0);
  EXPECT_GT(tiny_preempt, 3);
  EXPECT_LT(headroom_preempt, tiny_preempt);
  ASSERT_EQ(roomy.size(), 15u);  // 12 requests, 3 of them with n = 2
  EXPECT_EQ(roomy, tiny);
  EXPECT_EQ(roomy, headroom);
}

TEST(PreemptionEquivalence, PagedRecompute) { expect_same_streams(false, PreemptionMode::kRecompute); }
TEST(PreemptionEquivalence, PagedSwap) { expect_same_streams(false, PreemptionMode::kSwap); }
TEST(PreemptionEquivalence, TokenRecompute) { expect_same_streams(true, PreemptionMode::kRecompute); }
TEST(PreemptionEquivalence, TokenSwap) { expect_same_streams(true, PreemptionMode::kSwap); }

}  // namespace
}  // namespace folio
