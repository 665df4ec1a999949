// AdmissionHeadroom (SGLang's admission control): the blocks a group is expected to grow into,
// certain outputs in full, others by a ratio that decays over decode steps and returns after a
// preemption; and the Scheduler holding prompts back on it instead of preempting later.
#include "sched/admission_headroom.h"

#include <gtest/gtest.h>

#include <numeric>

#include "fake_engine.h"
#include "sched/scheduler.h"

namespace folio {
namespace {

using testing::FakeEngine;
using testing::make_kv;

// A group of one sequence (id `id`) with a `prompt`-token prompt; block size 4 in make_kv.
SequenceGroup group(SeqId id, int prompt, int max_tokens, bool ignore_eos, int n = 1) {
  SequenceGroup g;
  g.id = static_cast<GroupId>(id);
  g.prompt_len = prompt;
  g.params.max_tokens = max_tokens;
  g.params.ignore_eos = ignore_eos;
  g.params.n = n;
  g.forked = n == 1;
  Sequence s;
  s.id = id;
  s.tokens.resize(static_cast<size_t>(prompt));
  s.prompt_len = prompt;
  g.seqs.push_back(s);
  return g;
}

TEST(AdmissionHeadroom, CertainOutputsCountInFullOthersByTheRatio) {
  auto kv = make_kv(false, 64, 0);
  AdmissionHeadroom h(1.0, 256);
  EXPECT_DOUBLE_EQ(h.ratio(), 0.7);
  // 6 prompt + 20 output tokens = 26 -> 7 blocks of 4.
  EXPECT_EQ(h.expected_blocks(group(1, 6, 20, true), *kv), 7);
  // May stop at EOS: 6 + ceil(0.7 x 20) = 20 tokens -> 5 blocks.
  EXPECT_EQ(h.expected_blocks(group(1, 6, 20, false), *kv), 5);
  SequenceGroup stops = group(1, 6, 20, true);
  stops.params.stop = {"\n"};  // a stop string can end it early too
  EXPECT_EQ(h.expected_blocks(stops, *kv), 5);
  SequenceGroup beam = group(1, 6, 20, true);
  beam.params.use_beam_search = true;
  EXPECT_EQ(h.expected_blocks(beam, *kv), 5);
  // max_model_len caps the output: 6 + min(20, 16 - 6) = 16 tokens -> 4 blocks.
  AdmissionHeadroom short_model(1.0, 16);
  EXPECT_EQ(short_model.expected_blocks(group(1, 6, 20, true), *kv), 4);
}

TEST(AdmissionHeadroom, HeldBlocksAndGeneratedTokensAreSubtracted) {
  auto kv = make_kv(false, 64, 0);
  AdmissionHeadroom h(1.0, 256);
  SequenceGroup g = group(1, 6, 20, true);
  EXPECT_EQ(kv->get_computed_prefix(1, g.seqs[0].tokens, ""), 0);
  ASSERT_TRUE(kv->append_slots(1, 6));  // the prompt's 2 blocks
  EXPECT_EQ(h.expected_blocks(g, *kv), 5);
  for (int i = 0; i < 12; ++i) g.seqs[0].tokens.push_back(7);  // 12 generated, 8 to go
  ASSERT_TRUE(kv->append_slots(1, 18));                        // 5 blocks held, 26 -> 7
  EXPECT_EQ(h.expected_blocks(g, *kv), 2);
  g.seqs[0].status = SeqStatus::kFinishedLength;
  EXPECT_EQ(h.expected_blocks(g, *kv), 0);  // finished sequences grow no more
}

TEST(AdmissionHeadroom, SiblingsNotYetForkedCountTheirOutputs) {
  auto kv = make_kv(false, 64, 0);
  AdmissionHeadroom h(1.0, 256);
  // The leader 7 blocks; each of the 2 siblings 20 tokens (5 blocks) and a copied block.
  EXPECT_EQ(h.expected_blocks(group(1, 6, 20, true, /*n=*/3), *kv), 7 + 2 * 6);
}

TEST(AdmissionHeadroom, UncertainOutputsAreClipped) {
  auto kv = make_kv(false, 4096, 0);
  AdmissionHeadroom h(1.0, 100000);
  // 4 + ceil(0.7 x 4096) = 2872 tokens -> 718 blocks; certain: 4 + 10000 -> 2501.
  EXPECT_EQ(h.expected_blocks(group(1, 4, 10000, false), *kv), 718);
  EXPECT_EQ(h.expected_blocks(group(1, 4, 10000, true), *kv), 2501);
}

TEST(AdmissionHeadroom, TheRatioDecaysOverDecodeStepsAndReturnsAfterPreemption) {
  AdmissionHeadroom h(1.0, 256);
  h.end_step(/*preempted=*/false, /*decoded=*/false, /*idle=*/false);
  EXPECT_DOUBLE_EQ(h.ratio(), 0.7);  // a step without decodes does not count
  for (int i = 0; i < 300; ++i) h.end_step(false, true, false);
  EXPECT_NEAR(h.ratio(), 0.7 - 300 * (0.7 - 0.098) / 600, 1e-9);
  for (int i = 0; i < 1000; ++i) h.end_step(false, true, false);
  EXPECT_NEAR(h.ratio(), 0.098, 1e-12);  // 0.14 of the start, and no lower
  h.end_step(/*preempted=*/true, true, false);
  EXPECT_DOUBLE_EQ(h.ratio(), 0.7);
  for (int i = 0; i < 10; ++i) h.end_step(false, true, false);
  h.end_step(false, false, /*idle=*/true);
  EXPECT_DOUBLE_EQ(h.ratio(), 0.7);
}

TEST(AdmissionHeadroom, ConservativenessScalesTheRatioAndZeroTurnsItOff) {
  auto kv = make_kv(false, 64, 0);
  AdmissionHeadroom off(0.0, 256);
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.expected_blocks(group(1, 6, 20, true), *kv), 0);
  AdmissionHeadroom careful(2.0, 256);
  EXPECT_DOUBLE_EQ(careful.ratio(), 1.0);  // 0.7 x 2, at most 1
  EXPECT_EQ(careful.expected_blocks(group(1, 6, 20, false), *kv), 7);
}

Request certain_request(GroupId id, int prompt, int max_tokens) {
  Request r;
  r.id = id;
  r.prompt.resize(static_cast<size_t>(prompt));
  std::iota(r.prompt.begin(), r.prompt.end(), static_cast<TokenId>(50 * id));
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

struct FourRun {
  int peak_running = 0;
  int64_t preemptions = 0;
  std::map<FakeEngine::StreamKey, std::vector<TokenId>> streams;
};

// Four requests of 8 prompt + 16 output tokens (6 blocks each at the end) in 16 blocks.
FourRun run_four(double conservativeness) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.max_model_len = 64;
  c.schedule_conservativeness = conservativeness;
  FakeEngine e(c, make_kv(false, 16, 0));
  for (GroupId id = 1; id <= 4; ++id)
    EXPECT_TRUE(e.sched().add_request(certain_request(id, 8, 16)).ok());
  FourRun r;
  for (int i = 0; i < 500 && e.sched().has_unfinished(); ++i) {
    e.step();
    r.peak_running = std::max(r.peak_running, e.sched().num_running());
    EXPECT_TRUE(e.kv().check_invariants().ok());
  }
  EXPECT_FALSE(e.sched().has_unfinished());
  EXPECT_TRUE(e.failed.empty());
  r.preemptions = e.sched().stats().num_preemptions;
  r.streams = e.streams();
  return r;
}

TEST(AdmissionHeadroomScheduler, HoldsPromptsBackInsteadOfPreempting) {
  const FourRun greedy = run_four(0.0);
  const FourRun headroom = run_four(1.0);
  EXPECT_EQ(greedy.peak_running, 4);  // every prompt fits at first (2 blocks each)...
  EXPECT_GT(greedy.preemptions, 0);   // ...and the outputs do not
  EXPECT_EQ(headroom.peak_running, 2);  // 2 x 6 blocks fit in 16, a third would need 18
  EXPECT_EQ(headroom.preemptions, 0);
  ASSERT_EQ(greedy.streams.size(), 4u);
  EXPECT_EQ(greedy.streams, headroom.streams);
  for (const auto& [key, tokens] : headroom.streams) EXPECT_EQ(tokens.size(), 16u);
}

TEST(AdmissionHeadroomScheduler, TheFirstRequestIntoAnIdleCacheAlwaysStarts) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.max_model_len = 256;
  FakeEngine e(c, make_kv(false, 16, 0));  // 64 slots
  // Expected to grow to 8 + 100 tokens, past the cache: it still starts; the next one waits.
  ASSERT_TRUE(e.sched().add_request(certain_request(1, 8, 100)).ok());
  ASSERT_TRUE(e.sched().add_request(certain_request(2, 8, 4)).ok());
  ASSERT_TRUE(e.step());
  EXPECT_EQ(e.sched().num_running(), 1);
  EXPECT_EQ(e.sched().num_waiting(), 1);
}

}  // namespace
}  // namespace folio
