// SchedulerConfig::long_prefill_token_threshold (vLLM V1's --long-prefill-token-threshold): one
// sequence computes at most that many tokens per step, so long prompts prefill in chunks of it
// while short prompts and decodes share the rest of the budget; 0 leaves only the budget.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "fake_engine.h"
#include "sched/scheduler.h"

namespace folio {
namespace {

using testing::FakeEngine;
using testing::make_kv;
using Step = std::vector<std::pair<GroupId, int>>;

Request prompt_of(GroupId id, int len, int max_tokens) {
  return testing::iota_request(id, len, max_tokens, static_cast<TokenId>(100 * id));
}

// Two 40-token prompts and a 10-token one, a 64-token budget: what each step schedules.
std::vector<Step> run(int threshold) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.max_model_len = 128;
  c.long_prefill_token_threshold = threshold;
  FakeEngine e(c, make_kv(false, 64, 0));
  EXPECT_TRUE(e.sched().add_request(prompt_of(1, 40, 2)).ok());
  EXPECT_TRUE(e.sched().add_request(prompt_of(2, 40, 2)).ok());
  EXPECT_TRUE(e.sched().add_request(prompt_of(3, 10, 2)).ok());
  while (e.step()) {
  }
  EXPECT_FALSE(e.sched().has_unfinished());
  return e.scheduled;
}

TEST(LongPrefillThreshold, CapsEachSequencesChunkAndLetsTheShortPromptIn) {
  const std::vector<Step> steps = run(16);
  ASSERT_GE(steps.size(), 3u);
  // Step 1: 16 tokens of each long prompt, the short prompt whole (under the cap).
  EXPECT_EQ(steps[0], (Step{{1, 16}, {2, 16}, {3, 10}}));
  // Step 2: the short one decodes first, the long ones take their next 16.
  EXPECT_EQ(steps[1], (Step{{3, 1}, {1, 16}, {2, 16}}));
  // Step 3: the long prompts' last 8 each.
  EXPECT_EQ(steps[2], (Step{{1, 8}, {2, 8}}));
  for (const Step& s : steps)
    for (const auto& [group, tokens] : s) EXPECT_LE(tokens, 16) << "group " << group;
}

TEST(LongPrefillThreshold, OffLeavesOnlyTheBudget) {
  const std::vector<Step> steps = run(0);
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps[0], (Step{{1, 40}, {2, 24}}));  // the budget runs out before the short prompt
}

TEST(LongPrefillThreshold, ValidatesAndNeedsChunkedPrefill) {
  SchedulerConfig c;
  c.long_prefill_token_threshold = -1;
  EXPECT_FALSE(c.validate().ok());
  c.long_prefill_token_threshold = 512;
  EXPECT_TRUE(c.validate().ok());
  c.enable_chunked_prefill = false;
  c.max_num_batched_tokens = c.max_model_len;
  const Status st = c.validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("chunked prefill"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace folio
