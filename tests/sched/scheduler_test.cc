#include "sched/scheduler.h"

#include <numeric>

#include <gtest/gtest.h>

#include "fake_engine.h"

namespace folio {
namespace {

using testing::FakeEngine;
using testing::make_kv;

Request req(GroupId id, int prompt_len, int max_tokens, TokenId first = 0, int n = 1) {
  Request r;
  r.id = id;
  r.prompt.resize(static_cast<size_t>(prompt_len));
  std::iota(r.prompt.begin(), r.prompt.end(), first);
  r.params.max_tokens = max_tokens;
  r.params.n = n;
  return r;
}

SchedulerConfig cfg(int budget, int max_seqs = 64, int max_len = 256) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.max_model_len = max_len;
  return c;
}

TEST(Scheduler, ChunkedPrefillSplitsAPromptAndNeverStarvesDecodes) {
  auto kv = make_kv(false, 64, 0);
  Scheduler s(cfg(8), *kv);
  ASSERT_TRUE(s.add_request(req(1, 3, 10)).ok());
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_TRUE(o.seqs[0].samples());
  s.update_from_output({{{o.seqs[0].seq_id, 500}}, {}});
  ASSERT_TRUE(s.add_request(req(2, 20, 10, 100)).ok());
  std::vector<int> starts, sizes;
  for (int step = 0; step < 3; ++step) {
    o = s.schedule();
    ASSERT_EQ(o.seqs.size(), 2u);
    EXPECT_EQ(o.seqs[0].group_id, 1);  // the decode comes first, one token
    EXPECT_EQ(o.seqs[0].num_tokens(), 1);
    EXPECT_EQ(o.seqs[1].group_id, 2);
    starts.push_back(o.seqs[1].start_pos);
    sizes.push_back(o.seqs[1].num_tokens());
    EXPECT_EQ(o.seqs[1].samples(), step == 2);  // only the last chunk samples
    EXPECT_LE(o.num_batched_tokens, 8);
    StepResult r;
    for (const auto& e : o.seqs)
      if (e.samples()) r.sampled.push_back({e.seq_id, 7});
    s.update_from_output(r);
  }
  EXPECT_EQ(starts, (std::vector<int>{0, 7, 14}));
  EXPECT_EQ(sizes, (std::vector<int>{7, 7, 6}));
}

TEST(Scheduler, PriorityPolicyRunsLowerValuesFirstAndTiesFcfs) {
  auto kv = make_kv(false, 64, 0);
  SchedulerConfig c = cfg(64, /*max_seqs=*/1);
  c.policy = SchedulePolicy::kPriority;
  Scheduler s(c, *kv);
  int prio[] = {5, 1, 5, 0};
  for (int i = 0; i < 4; ++i) {
    Request r = req(10 + i, 4, 1, 10 * i);
    r.priority = prio[i];
    ASSERT_TRUE(s.add_request(r).ok());
  }
  std::vector<GroupId> order;
  while (s.has_unfinished()) {
    SchedulerOutput o = s.schedule();
    ASSERT_EQ(o.seqs.size(), 1u);
    order.push_back(o.seqs[0].group_id);
    s.update_from_output({{{o.seqs[0].seq_id, 1}}, {}});
  }
  EXPECT_EQ(order, (std::vector<GroupId>{13, 11, 10, 12}));
}

// lof: the largest output budget first (max_tokens within max_model_len), ties by arrival.
TEST(Scheduler, LongestOutputFirstRunsLargestBudgetsFirstAndTiesFcfs) {
  auto kv = make_kv(false, 64, 0);
  SchedulerConfig c = cfg(64, /*max_seqs=*/1, /*max_len=*/32);
  c.policy = SchedulePolicy::kLongestOutputFirst;
  Scheduler s(c, *kv);
  ASSERT_TRUE(s.add_request(req(10, 4, 2)).ok());
  ASSERT_TRUE(s.add_request(req(11, 4, 5, 10)).ok());
  ASSERT_TRUE(s.add_request(req(12, 4, 2, 20)).ok());
  ASSERT_TRUE(s.add_request(req(13, 28, 100, 30)).ok());  // budget 32 - 28 = 4, not 100
  ASSERT_TRUE(s.add_request(req(14, 4, 3, 40)).ok());
  std::vector<GroupId> order;  // each group's first scheduled step, in order
  while (s.has_unfinished()) {
    SchedulerOutput o = s.schedule();
    ASSERT_EQ(o.seqs.size(), 1u);
    if (order.empty() || order.back() != o.seqs[0].group_id) order.push_back(o.seqs[0].group_id);
    s.update_from_output({{{o.seqs[0].seq_id, 1}}, {}});
  }
  EXPECT_EQ(order, (std::vector<GroupId>{11, 13, 14, 10, 12}));
}

// What lof is for: an offline batch whose longest request arrives last. FCFS admits it when a
// seat frees and it then decodes alone; lof starts it first and the short ones share the rest.
TEST(Scheduler, LongestOutputFirstShortensAnOfflineBatch) {
  auto steps_to_finish = [](SchedulePolicy policy) {
    SchedulerConfig c = cfg(64, /*max_seqs=*/2);
    c.policy = policy;
    FakeEngine e(c, make_kv(false, 64, 0));
    const int outputs[] = {4, 4, 4, 4, 16};
    for (int i = 0; i < 5; ++i)
      EXPECT_TRUE(e.sched().add_request(req(1 + i, 3, outputs[i], 10 * i)).ok());
    int steps = 0;
    while (e.step()) ++steps;
    EXPECT_FALSE(e.sched().has_unfinished());
    return steps;
  };
  const int fcfs = steps_to_finish(SchedulePolicy::kFcfs);
  const int lof = steps_to_finish(SchedulePolicy::kLongestOutputFirst);
  EXPECT_EQ(lof, 16);   // the long one from step 1; the four short ones beside it in turn
  EXPECT_EQ(fcfs, 24);  // two pairs of short ones (8 steps), then the long one's 16
}

// decode_rows_longest_first: a step's decode rows by context length, longest first (ties in
// queue order), then the prefill rows as before; off, the decodes keep queue order.
TEST(Scheduler, DecodeRowsLongestFirstOrdersOnlyTheDecodes) {
  for (bool longest_first : {false, true}) {
    SchedulerConfig c = cfg(256);
    c.decode_rows_longest_first = longest_first;
    FakeEngine e(c, make_kv(false, 64, 0));
    const int prompts[] = {5, 20, 9, 20, 14};
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(e.sched().add_request(req(1 + i, prompts[i], 8, 40 * i)).ok());
    ASSERT_TRUE(e.step());  // every prompt in one step: all five decode next
    ASSERT_TRUE(e.sched().add_request(req(9, 30, 4, 300)).ok());
    SchedulerOutput o = e.sched().schedule();
    std::vector<GroupId> order;
    for (const auto& x : o.seqs) order.push_back(x.group_id);
    ASSERT_EQ(order.size(), 6u);
    EXPECT_EQ(o.seqs.back().num_tokens(), 30);  // the prefill stays after the decodes
    if (longest_first)
      EXPECT_EQ(order, (std::vector<GroupId>{2, 4, 5, 3, 1, 9}));  // 21, 21, 15, 10, 6
    else
      EXPECT_EQ(order, (std::vector<GroupId>{1, 2, 3, 4, 5, 9}));
  }
}

TEST(Scheduler, NeverFittingRequestFailsCleanlyWithoutStallingOthers) {
  auto kv = make_kv(false, 4, 0);  // 16 token slots
  Scheduler s(cfg(64, 64, 64), *kv);
  ASSERT_TRUE(s.add_request(req(1, 16, 4)).ok());   // 16 + 1 > 16 slots
  ASSERT_TRUE(s.add_request(req(2, 64, 4)).ok());   // 64 + 1 > max_model_len
  ASSERT_TRUE(s.add_request(req(3, 5, 2)).ok());
  EXPECT_FALSE(s.add_request(req(3, 5, 2)).ok());   // duplicate id
  EXPECT_FALSE(s.add_request(req(4, 0, 2)).ok());   // empty prompt
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.failed.size(), 2u);
  EXPECT_EQ(o.failed[0].group_id, 1);
  EXPECT_NE(o.failed[0].message.find("KV cache"), std::string::npos) << o.failed[0].message;
  EXPECT_NE(o.failed[1].message.find("max_model_len"), std::string::npos);
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].group_id, 3);
  EXPECT_EQ(s.stats().num_failed, 2);
}

TEST(Scheduler, PrefixHitSkipsCachedBlocks) {
  FakeEngine e(cfg(64), make_kv(false, 64, 0));
  ASSERT_TRUE(e.sched().add_request(req(1, 13, 1)).ok());
  while (e.step()) {
  }
  ASSERT_TRUE(e.sched().add_request(req(2, 14, 1)).ok());  // same first 13 tokens
  SchedulerOutput o = e.sched().schedule();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].start_pos, 12);  // 3 full blocks of 4 reused
  EXPECT_EQ(o.seqs[0].num_tokens(), 2);
  EXPECT_EQ(e.kv().stats().prefix_hit_tokens, 12);
}

// Requests that arrive together with one prefix: the first's full blocks are cached as they are
// scheduled, so the second, admitted in the same step, starts after them (vLLM V1's order)
// instead of computing the prefix again.
TEST(Scheduler, RequestsAdmittedInOneStepShareTheirPrefix) {
  FakeEngine e(cfg(64), make_kv(false, 64, 0));
  ASSERT_TRUE(e.sched().add_request(req(1, 18, 1)).ok());
  ASSERT_TRUE(e.sched().add_request(req(2, 20, 1)).ok());  // the same first 18 tokens
  SchedulerOutput o = e.sched().schedule();
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[0].start_pos, 0);
  EXPECT_EQ(o.seqs[1].start_pos, 16);  // 4 full blocks of 4, cached by request 1 this step
  EXPECT_EQ(o.seqs[1].num_tokens(), 4);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(o.seqs[1].block_table[b], o.seqs[0].block_table[b]);
  EXPECT_EQ(e.sched().stats().num_prefix_hit_tokens, 16);
  EXPECT_TRUE(e.kv().check_invariants().ok());
}

// Async scheduling: a block completed by a placeholder (its token not known when scheduled) is
// cached only once advance() ends the step after resolve() wrote the token, under the real ids.
TEST(Scheduler, APlaceholderIsCachedOnlyOnceItsTokenIsKnown) {
  auto kv = make_kv(false, 64, 0);  // blocks of 4
  Scheduler s(cfg(64), *kv);
  ASSERT_TRUE(s.add_request(req(1, 3, 5)).ok());  // prompt 0 1 2
  SchedulerOutput o = s.schedule();
  const SeqId a = o.seqs[0].seq_id;
  s.advance({{{a, -1}}});
  o = s.schedule();  // a's decode input at position 3, still the placeholder, fills block 0
  ASSERT_EQ(o.seqs.size(), 1u);
  ASSERT_EQ(o.seqs[0].token_ids[0], -1);
  s.resolve({{{a, 70}}, {}});
  s.advance({{{a, -1}}});  // the step that computed position 3 ends: block 0 holds 0 1 2 70
  Request b = req(2, 6, 1);
  b.prompt = {0, 1, 2, 70, 9, 9};
  ASSERT_TRUE(s.add_request(std::move(b)).ok());
  o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[1].group_id, 2);
  EXPECT_EQ(o.seqs[1].start_pos, 4);  // block 0 found under its real tokens
  EXPECT_TRUE(kv->check_invariants().ok());
}

TEST(Scheduler, StatsCountTokensRunAndPrefixHitsAtAdmission) {
  // 5 blocks of 4: request 1 (16 + 4 tokens) takes all of them, so request 2 (its 16 tokens and
  // 3 more) is looked up, and rolled back, on every step until request 1 ends; the stats count
  // its hit once, when it is admitted, while the manager's own counter counts every lookup.
  FakeEngine e(cfg(64), make_kv(false, 5, 0));
  ASSERT_TRUE(e.sched().add_request(req(1, 16, 4)).ok());
  int64_t run = 0;
  SchedulerOutput o = e.sched().schedule();
  run += o.num_batched_tokens;
  e.sched().update_from_output({{{o.seqs[0].seq_id, 7}}, {}});
  ASSERT_TRUE(e.sched().add_request(req(2, 19, 1)).ok());  // shares request 1's 16 tokens
  for (int guard = 0; guard < 50 && e.sched().has_unfinished(); ++guard) {
    o = e.sched().schedule();
    run += o.num_batched_tokens;
    StepResult r;
    for (const auto& x : o.seqs)
      if (x.samples()) r.sampled.push_back({x.seq_id, 7});
    e.sched().update_from_output(r);
  }
  ASSERT_FALSE(e.sched().has_unfinished());
  EXPECT_EQ(e.sched().stats().num_scheduled_tokens, run);
  EXPECT_EQ(run, 16 + 3 + 3);  // request 1's prompt and 3 decode inputs; request 2's last 3
  EXPECT_EQ(e.sched().stats().num_prefix_hit_tokens, 16);
  EXPECT_GT(e.kv().stats().prefix_hit_tokens, 16);  // the retried lookups
}

TEST(Scheduler, ParallelSamplingForksAfterThePromptAndCopiesOnWrite) {
  FakeEngine e(cfg(64), make_kv(false, 64, 0));
  ASSERT_TRUE(e.sched().add_request(req(1, 6, 3, 0, /*n=*/3)).ok());
  SchedulerOutput o = e.sched().schedule();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].sample_seq_ids.size(), 3u);
  e.sched().update_from_output({{{o.seqs[0].sample_seq_ids[0], 1},
                                  {o.seqs[0].sample_seq_ids[1], 2},
                                  {o.seqs[0].sample_seq_ids[2], 3}},
                                 {}});
  o = e.sched().schedule();
  ASSERT_EQ(o.seqs.size(), 3u);
  EXPECT_EQ(o.copies.size(), 2u);  // the shared partial block: two copies, the last keeps it
  for (const auto& s : o.seqs) {
    EXPECT_EQ(s.start_pos, 6);
    EXPECT_EQ(s.block_table[0], o.seqs[0].block_table[0]);  // full block shared
  }
  EXPECT_TRUE(e.kv().check_invariants().ok());
}

// vLLM's admission (no headroom), so that both requests start and the cache runs out.
SchedulerConfig greedy_cfg(int budget) {
  SchedulerConfig c = cfg(budget);
  c.schedule_conservativeness = 0.0;
  return c;
}

TEST(Scheduler, RecomputePreemptsTheLatestArrivalAndResumes) {
  FakeEngine e(greedy_cfg(64), make_kv(false, 6, 0));  // 24 slots
  ASSERT_TRUE(e.sched().add_request(req(1, 8, 12, 0)).ok());
  ASSERT_TRUE(e.sched().add_request(req(2, 8, 12, 100)).ok());
  for (int i = 0; i < 100 && e.sched().has_unfinished(); ++i) {
    e.step();
    ASSERT_TRUE(e.kv().check_invariants().ok());
  }
  EXPECT_FALSE(e.sched().has_unfinished());
  EXPECT_GE(e.sched().stats().num_recompute_preemptions, 1);
  ASSERT_FALSE(e.preempted.empty());
  EXPECT_EQ(e.preempted.front(), 2);  // the later arrival goes
  EXPECT_EQ(e.streams().at({1, 0}).size(), 12u);
  EXPECT_EQ(e.streams().at({2, 0}).size(), 12u);
  EXPECT_EQ(e.kv().num_used_blocks(), 0);
}

TEST(Scheduler, SwapModeMovesBlocksOutAndBackIn) {
  SchedulerConfig c = greedy_cfg(64);
  c.preemption_mode = PreemptionMode::kSwap;
  FakeEngine e(c, make_kv(false, 6, 8));
  ASSERT_TRUE(e.sched().add_request(req(1, 8, 12, 0)).ok());
  ASSERT_TRUE(e.sched().add_request(req(2, 8, 12, 100)).ok());
  int swapped_out = 0, swapped_in = 0;
  for (int i = 0; i < 100 && e.sched().has_unfinished(); ++i) {
    e.step();
    swapped_out = static_cast<int>(e.sched().stats().num_swapped_out_blocks);
    swapped_in = static_cast<int>(e.kv().stats().swapped_in_blocks);
    ASSERT_TRUE(e.kv().check_invariants().ok());
  }
  EXPECT_FALSE(e.sched().has_unfinished());
  EXPECT_GT(swapped_out, 0);
  EXPECT_EQ(swapped_in, swapped_out);
  EXPECT_EQ(e.sched().stats().num_recompute_preemptions, 0);
  EXPECT_EQ(e.kv().num_free_host_blocks(), 8);
}

TEST(Scheduler, AbortFreesBlocksAtOnce) {
  auto kv = make_kv(true, 16, 0);
  Scheduler s(cfg(64), *kv);
  ASSERT_TRUE(s.add_request(req(1, 10, 5)).ok());
  SchedulerOutput o = s.schedule();
  EXPECT_GT(kv->num_used_blocks(), 0);
  ASSERT_TRUE(s.abort_request(1).ok());
  EXPECT_EQ(kv->num_used_blocks(), 0);
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_FALSE(s.abort_request(1).ok());
  s.update_from_output({{{o.seqs[0].seq_id, 3}}, {}});  // late result for an aborted request
  EXPECT_TRUE(kv->check_invariants().ok());
  EXPECT_NE(s.summary().find("running: 0 reqs"), std::string::npos) << s.summary();
}

// Async scheduling: advance() lets the next schedule() run the placeholder as the decode input
// before the token is known, length limits apply at advance, resolve() writes the real token
// over the placeholder and applies the engine's stops.
TEST(Scheduler, AdvanceSchedulesThePlaceholderAndResolveReplacesIt) {
  auto kv = make_kv(false, 64, 0);
  Scheduler s(cfg(64), *kv);
  ASSERT_TRUE(s.add_request(req(1, 5, 3)).ok());
  ASSERT_TRUE(s.add_request(req(2, 4, 10, 50)).ok());
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 2u);
  const SeqId a = o.seqs[0].seq_id, b = o.seqs[1].seq_id;
  UpdateResult up = s.advance({{{a, -1}, {b, -2}}});
  EXPECT_TRUE(up.finished_by_length.empty());
  o = s.schedule();  // the step after, before the first tokens are back
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[0].start_pos, 5);
  EXPECT_EQ(std::vector<TokenId>(o.seqs[0].token_ids.begin(), o.seqs[0].token_ids.end()),
            std::vector<TokenId>{-1});
  EXPECT_EQ(o.seqs[1].token_ids[0], -2);
  // Step 1's tokens: b stops (EOS).
  up = s.resolve({{{a, 70}, {b, 71}}, {{b, SeqStatus::kFinishedStopped}}});
  ASSERT_EQ(up.finished_groups, std::vector<GroupId>{2});
  EXPECT_EQ(s.group(1)->seqs[0].tokens.back(), 70);
  // Step 2 was launched with b too; its placeholder for b is dropped, a's counts.
  up = s.advance({{{a, -1}, {b, -2}}});
  EXPECT_TRUE(up.finished_groups.empty());
  EXPECT_EQ(s.group(1)->seqs[0].num_computed, 6);
  o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].token_ids[0], -1);
  up = s.resolve({{{a, 72}}, {}});
  EXPECT_TRUE(up.finished_groups.empty());
  // a's third token reaches max_tokens 3 at advance, before its value is known.
  up = s.advance({{{a, -1}}});
  EXPECT_EQ(up.finished_by_length, std::vector<SeqId>{a});
  EXPECT_EQ(up.finished_groups, std::vector<GroupId>{1});
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(kv->num_used_blocks(), 0);
  up = s.resolve({{{a, 73}}, {}});  // the retired group's token: nothing left to write
  EXPECT_TRUE(up.finished_groups.empty());
}

}  // namespace
}  // namespace folio
