// AdmissionHeadroom (SGLang's admission control): the blocks a group is expected to grow into,
// certain outputs in full, others by a ratio that decays over decode steps and returns after a
// preemption; and the Scheduler holding prompts back on it instead of preempting later.
#include "sched/admission_headroom.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>


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

using Growth = AdmissionHeadroom::Growth;

std::vector<Growth> growth_of(const AdmissionHeadroom& h, const SequenceGroup& g, int bs = 4) {
  std::vector<Growth> out;
  h.add_growth(g, bs, &out);
  return out;
}

MATCHER_P2(IsGrowth, length, left, "") {
  return arg.length == length && arg.left == left;
}

TEST(AdmissionHeadroom, CertainOutputsCountInFullOthersByTheRatio) {
  AdmissionHeadroom h(1.0, 256, false);
  EXPECT_DOUBLE_EQ(h.ratio(), 0.7);
  EXPECT_THAT(growth_of(h, group(1, 6, 20, true)), ::testing::ElementsAre(IsGrowth(6, 20)));
  // May stop at EOS: ceil(0.7 x 20) = 14 tokens expected.
  EXPECT_THAT(growth_of(h, group(1, 6, 20, false)), ::testing::ElementsAre(IsGrowth(6, 14)));
  SequenceGroup stops = group(1, 6, 20, true);
  stops.params.stop = {"\n"};  // a stop string can end it early too
  EXPECT_THAT(growth_of(h, stops), ::testing::ElementsAre(IsGrowth(6, 14)));
  SequenceGroup beam = group(1, 6, 20, true);
  beam.params.use_beam_search = true;
  EXPECT_THAT(growth_of(h, beam), ::testing::ElementsAre(IsGrowth(6, 14)));
  // max_model_len caps the output: min(20, 16 - 6) = 10.
  AdmissionHeadroom short_model(1.0, 16, false);
  EXPECT_THAT(growth_of(short_model, group(1, 6, 20, true)),
              ::testing::ElementsAre(IsGrowth(6, 10)));
}

TEST(AdmissionHeadroom, GeneratedTokensCountAndFinishedSequencesDoNot) {
  AdmissionHeadroom h(1.0, 256, false);
  SequenceGroup g = group(1, 6, 20, true);
  for (int i = 0; i < 12; ++i) g.seqs[0].tokens.push_back(7);  // 12 generated, 8 to go
  EXPECT_THAT(growth_of(h, g), ::testing::ElementsAre(IsGrowth(18, 8)));
  g.seqs[0].status = SeqStatus::kFinishedLength;
  EXPECT_TRUE(growth_of(h, g).empty());
}

TEST(AdmissionHeadroom, SiblingsNotYetForkedAreEntriesToo) {
  AdmissionHeadroom h(1.0, 256, false);
  // The leader, then 2 siblings with a copied block (4 tokens) each and the same output.
  EXPECT_THAT(growth_of(h, group(1, 6, 20, true, /*n=*/3)),
              ::testing::ElementsAre(IsGrowth(6, 20), IsGrowth(4, 20), IsGrowth(4, 20)));
}

TEST(AdmissionHeadroom, UncertainOutputsAreClipped) {
  AdmissionHeadroom h(1.0, 100000, false);
  // ceil(0.7 x 4096) = 2868; certain: all 10000.
  EXPECT_THAT(growth_of(h, group(1, 4, 10000, false)), ::testing::ElementsAre(IsGrowth(4, 2868)));
  EXPECT_THAT(growth_of(h, group(1, 4, 10000, true)), ::testing::ElementsAre(IsGrowth(4, 10000)));
}

TEST(AdmissionHeadroom, ThePeakComesJustBeforeAnEntryEnds) {
  // A: 10 tokens, 30 to go; B: 50 tokens, 5 to go. In tokens the peak is at t = 5 (A 15, B 55:
  // 70), not the sum of final lengths (95); at t = 30 only A is left (40).
  const std::vector<Growth> by_left = {{10, 30}, {50, 5}};
  EXPECT_EQ(AdmissionHeadroom::peak_blocks(by_left, 1), 70);
  // Blocks of 4, a partial block per entry allowed for: (60 + 2 x (5 + 3)) / 4 = 19 (exactly: 4
  // + 14 = 18 at t = 5).
  EXPECT_EQ(AdmissionHeadroom::peak_blocks(by_left, 4), 19);
  // Equal outputs (B2's shape): the peak is the sum of final lengths.
  const std::vector<Growth> equal = {{8, 16}, {8, 16}, {8, 16}};
  EXPECT_EQ(AdmissionHeadroom::peak_blocks(equal, 1), 72);
  EXPECT_EQ(AdmissionHeadroom::peak_blocks({}, 4), 0);
}

// With a window of 8 (blocks of 4), a sequence holds at most the 3 blocks its last 8 positions
// span: an entry already that long counts 3 blocks whatever it has left, a shorter one grows to
// at most 3 (the windowed scheduler test runs it end to end).
TEST(AdmissionHeadroom, AWindowCapsWhatEachEntryHolds) {
  const std::vector<Growth> by_left = {{20, 30}, {4, 10}};
  EXPECT_EQ(AdmissionHeadroom::peak_blocks(by_left, 4), 13);  // (24 + 2 x 13) / 4 at t = 10
  EXPECT_EQ(AdmissionHeadroom::peak_blocks(by_left, 4, 8), 6);
  // Short entries and outputs stay below the cap: the same figure as without a window.
  const std::vector<Growth> short_ones = {{2, 3}, {1, 2}};
  EXPECT_EQ(AdmissionHeadroom::peak_blocks(short_ones, 4, 8),
            AdmissionHeadroom::peak_blocks(short_ones, 4));
  // Three growing entries that would reach 12 tokens (3 blocks) each: capped at 9 blocks.
  const std::vector<Growth> growing = {{4, 40}, {4, 40}, {4, 40}};
  EXPECT_EQ(AdmissionHeadroom::peak_blocks(growing, 4, 8), 9);
  EXPECT_EQ(AdmissionHeadroom::peak_blocks(growing, 4), 35);
}

TEST(AdmissionHeadroom, InsertSortedKeepsTheLongestLeftFirst) {
  std::vector<Growth> v;
  for (int64_t left : {5, 30, 12, 30, 1}) AdmissionHeadroom::insert_sorted(v, {left, left});
  ASSERT_EQ(v.size(), 5u);
  for (size_t i = 1; i < v.size(); ++i) EXPECT_GE(v[i - 1].left, v[i].left);
}

TEST(AdmissionHeadroom, TheRatioDecaysOverDecodeStepsAndReturnsAfterPreemption) {
  AdmissionHeadroom h(1.0, 256, false);
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

// folio's default: outputs that may stop early count nothing beyond their length until a
// preemption shows that they outgrow the cache; then SGLang's share, decaying to 0.
TEST(AdmissionHeadroom, TheReactiveRatioStartsAtZeroAndRisesAtAPreemption) {
  AdmissionHeadroom h(1.0, 256, true);
  EXPECT_TRUE(h.enabled());
  EXPECT_DOUBLE_EQ(h.ratio(), 0.0);
  EXPECT_THAT(growth_of(h, group(1, 6, 20, false)), ::testing::ElementsAre(IsGrowth(6, 0)));
  EXPECT_THAT(growth_of(h, group(1, 6, 20, true)), ::testing::ElementsAre(IsGrowth(6, 20)));
  for (int i = 0; i < 50; ++i) h.end_step(false, true, false);
  EXPECT_DOUBLE_EQ(h.ratio(), 0.0);  // decoding alone never raises it
  h.end_step(/*preempted=*/true, true, false);
  EXPECT_DOUBLE_EQ(h.ratio(), 0.7);
  EXPECT_THAT(growth_of(h, group(1, 6, 20, false)), ::testing::ElementsAre(IsGrowth(6, 14)));
  for (int i = 0; i < 300; ++i) h.end_step(false, true, false);
  EXPECT_NEAR(h.ratio(), 0.35, 1e-9);  // to 0 over 600 decoding steps
  for (int i = 0; i < 1000; ++i) h.end_step(false, true, false);
  EXPECT_DOUBLE_EQ(h.ratio(), 0.0);
  h.end_step(true, true, false);
  h.end_step(false, false, /*idle=*/true);
  EXPECT_DOUBLE_EQ(h.ratio(), 0.0);
}

TEST(AdmissionHeadroom, ConservativenessScalesTheRatioAndZeroTurnsItOff) {
  EXPECT_FALSE(AdmissionHeadroom(0.0, 256, false).enabled());
  AdmissionHeadroom careful(2.0, 256, false);
  EXPECT_TRUE(careful.enabled());
  EXPECT_DOUBLE_EQ(careful.ratio(), 1.0);  // 0.7 x 2, at most 1
  EXPECT_THAT(growth_of(careful, group(1, 6, 20, false)), ::testing::ElementsAre(IsGrowth(6, 20)));
}

Request certain_request(GroupId id, int prompt, int max_tokens) {
  Request r = testing::iota_request(id, prompt, max_tokens, static_cast<TokenId>(50 * id));
  r.params.ignore_eos = true;
  return r;
}

struct FourRun {
  int first_running = 0;  // after the first step
  int peak_running = 0;
  int64_t preemptions = 0;
  std::map<FakeEngine::StreamKey, std::vector<TokenId>> streams;
};

// `n` (four) requests of 8 prompt + 16 output tokens (6 blocks each at the end) in 16 blocks;
// their outputs certain (ignore_eos) or not (they may stop at EOS, though the fake engine never
// samples one).
FourRun run_four(double conservativeness, bool certain = true, bool reactive = true, int n = 4) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.max_model_len = 64;
  c.schedule_conservativeness = conservativeness;
  c.reactive_headroom = reactive;
  FakeEngine e(c, make_kv(false, 16, 0));
  for (GroupId id = 1; id <= n; ++id) {
    Request r = certain_request(id, 8, 16);
    r.params.ignore_eos = certain;
    EXPECT_TRUE(e.sched().add_request(std::move(r)).ok());
  }
  FourRun r;
  for (int i = 0; i < 500 && e.sched().has_unfinished(); ++i) {
    e.step();
    r.peak_running = std::max(r.peak_running, e.sched().num_running());
    if (i == 0) r.first_running = e.sched().num_running();
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
  EXPECT_EQ(greedy.first_running, 4);  // every prompt fits at first (2 blocks each)...
  EXPECT_GT(greedy.preemptions, 0);    // ...and the outputs do not
  // 2 x 6 blocks fit in 16, a third would need 18: two start; a third joins only when the first
  // two are about to end and free theirs.
  EXPECT_EQ(headroom.first_running, 2);
  EXPECT_EQ(headroom.peak_running, 3);
  EXPECT_EQ(headroom.preemptions, 0);
  ASSERT_EQ(greedy.streams.size(), 4u);
  EXPECT_EQ(greedy.streams, headroom.streams);
  for (const auto& [key, tokens] : headroom.streams) EXPECT_EQ(tokens.size(), 16u);
}

// Outputs that may stop early: SGLang's ratio holds prompts back from the start; the reactive
// one (the default) admits them as vLLM does (but for a partial block of room each) until the
// first preemption, then holds back, so it preempts less than vLLM's admission. The tokens are
// the same every way.
TEST(AdmissionHeadroomScheduler, TheReactiveRatioHoldsBackOnlyAfterAPreemption) {
  const FourRun greedy = run_four(0.0, /*certain=*/false, true, 12);
  const FourRun sglang = run_four(1.0, false, /*reactive=*/false, 12);
  const FourRun reactive = run_four(1.0, false, /*reactive=*/true, 12);
  // vLLM's admission fills the 8 seats (2 blocks per prompt); the reactive ratio keeps a partial
  // block of room per sequence (its next tokens: 6 fit); SGLang's reserves 0.7 x 16 tokens each.
  EXPECT_EQ(greedy.first_running, 8);
  EXPECT_EQ(reactive.first_running, 6);
  EXPECT_LT(sglang.first_running, reactive.first_running);
  EXPECT_GT(greedy.preemptions, 0);
  EXPECT_GT(reactive.preemptions, 0);
  EXPECT_LT(reactive.preemptions, greedy.preemptions);
  EXPECT_EQ(greedy.streams, sglang.streams);
  EXPECT_EQ(greedy.streams, reactive.streams);
}

// 16 blocks of 4: one output of 40 and two of 4. The sum of final lengths (12 + 3 + 3 blocks)
// would hold the third back; the peak (12 blocks, once the short ones end) lets all three run,
// and none is preempted.
TEST(AdmissionHeadroomScheduler, UnevenOutputsRunTogetherWithinThePeak) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.max_model_len = 64;
  FakeEngine e(c, make_kv(false, 16, 0));
  ASSERT_TRUE(e.sched().add_request(certain_request(1, 8, 40)).ok());
  ASSERT_TRUE(e.sched().add_request(certain_request(2, 8, 4)).ok());
  ASSERT_TRUE(e.sched().add_request(certain_request(3, 8, 4)).ok());
  ASSERT_TRUE(e.step());
  EXPECT_EQ(e.sched().num_running(), 3);
  for (int i = 0; i < 100 && e.sched().has_unfinished(); ++i) e.step();
  EXPECT_FALSE(e.sched().has_unfinished());
  EXPECT_EQ(e.sched().stats().num_preemptions, 0);
  EXPECT_EQ(e.streams().at({1, 0}).size(), 40u);
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
