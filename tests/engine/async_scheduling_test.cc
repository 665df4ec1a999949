// Async scheduling (EngineCore::step_async) against synchronous steps, on an executor whose
// "model" reads its whole context back from its KV cache (engine/kv_echo_executor.h): a wrong
// block table, slot, placeholder resolution (tokens or ops), copy, swap or RNG step changes the
// tokens, so the two kinds of step must produce identical outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/engine_core.h"
#include "engine/kv_echo_executor.h"
#include "model/model_config.h"

namespace folio {
namespace {

using testing::kEos;
using testing::KvEchoExecutor;
using testing::kVocab;

struct Case {
  KvCacheMode mode = KvCacheMode::kPaged;
  int num_blocks = 400;
  PreemptionMode preemption = PreemptionMode::kRecompute;
  int num_requests = 40;
  bool with_sync_only = false;  // a beam search request among them
  int abort_at_step = -1;       // abort request "1" before this step
  int prompt_logprobs_request = -1;  // this request asks for prompt logprobs
};

struct Finished {
  std::vector<std::vector<int32_t>> tokens;  // per sequence index
  std::vector<std::string> reasons;
  std::vector<float> prompt_logprobs;  // of the prompt tokens, when asked for
  bool operator==(const Finished&) const = default;
};

struct RunOutcome {
  std::vector<Finished> outputs;
  EngineCounters counters;
  int64_t preemptions = 0;
  int placeholders = 0;
  int placeholder_ops = 0;
  int empty_launches = 0;  // launched steps that sampled nothing (prompt chunks only)
};

std::vector<GenerateRequest> make_requests(const Case& c) {
  std::mt19937 rng(7);
  std::vector<int32_t> shared(40);
  for (auto& t : shared) t = 3 + static_cast<int32_t>(rng() % (kVocab - 3));
  std::vector<GenerateRequest> out;
  for (int i = 0; i < c.num_requests; ++i) {
    GenerateRequest g;
    g.request_id = std::to_string(i);
    // Request 0's prompt takes two steps, the first sampling nothing: a launch without samples.
    const int len = i == 0 ? 100 : 5 + static_cast<int>(rng() % 40);
    if (i % 3 == 0)  // a shared prefix: prefix-cache hits
      g.prompt_token_ids.assign(shared.begin(), shared.begin() + std::min(len, 40));
    for (int k = static_cast<int>(g.prompt_token_ids.size()); k < len; ++k)
      g.prompt_token_ids.push_back(3 + static_cast<int32_t>(rng() % (kVocab - 3)));
    g.params.max_tokens = 1 + static_cast<int>(rng() % 30);
    g.params.temperature = i % 2 ? 0.8f : 0.0f;
    if (i % 4 == 1) g.params.seed = 1000 + i;
    if (i % 5 == 2) g.params.stop_token_ids = {static_cast<int32_t>(3 + i % 50)};
    if (i % 6 == 3) g.params.ignore_eos = true;
    if (i % 7 == 4) g.params.logit_bias[kEos] = 3.0f;
    if (i % 4 == 2) g.params.repetition_penalty = 1.3f;
    if (i % 5 == 1) {
      g.params.frequency_penalty = 0.5f;
      g.params.presence_penalty = 0.25f;
    }
    if (i % 9 == 3) g.params.presence_penalty = -0.5f;
    if (i % 8 == 6) g.params.min_tokens = std::min(4, g.params.max_tokens);
    if (i == 5 || i == 11) g.params.n = 2 + i % 3;  // siblings forked at the prompt's end
    if (i == c.prompt_logprobs_request) {
      g.params.prompt_logprobs = 2;
      g.params.max_tokens = 20;  // 100 + 20 tokens fit the 128 context
      g.params.ignore_eos = true;
      g.params.stop_token_ids.clear();
    }
    if (c.with_sync_only && i == 7) {  // beams: steps synchronous while it lives
      g.params.use_beam_search = true;
      g.params.n = 2;
      g.params.temperature = 0.0f;
    }
    out.push_back(std::move(g));
  }
  return out;
}

RunOutcome run(const Case& c, bool async) {
  EngineConfig config;
  config.kv_mode = c.mode;
  config.block_size = c.mode == KvCacheMode::kToken ? 1 : 4;
  config.sched.max_model_len = 128;
  config.sched.max_num_batched_tokens = 64;  // prompts chunk over steps
  config.sched.max_num_seqs = 12;
  config.sched.preemption_mode = c.preemption;
  config.async_scheduling = async;
  ModelConfig model;
  model.vocab_size = kVocab;
  model.max_position_embeddings = 128;
  model.generation.eos_token_ids = {kEos};
  const int swap = c.preemption == PreemptionMode::kSwap ? c.num_blocks * 2 : 0;
  auto exec = std::make_unique<KvEchoExecutor>(config.block_size, c.num_blocks, swap, true);
  KvEchoExecutor* echo = exec.get();
  auto engine = EngineCore::create(config, model, std::move(exec), nullptr);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  RunOutcome out;
  if (!engine.ok()) return out;
  const auto reqs = make_requests(c);
  out.outputs.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto* into = &out.outputs[i];
    Status st = (*engine)->add_request(reqs[i], [into](RequestOutput&& o) {
      for (const auto& p : o.prompt_logprobs) into->prompt_logprobs.push_back(p ? p->logprob : 1.0f);
      for (auto& d : o.deltas) {
        if (into->tokens.size() <= static_cast<size_t>(d.index)) {
          into->tokens.resize(d.index + 1);
          into->reasons.resize(d.index + 1);
        }
        auto& t = into->tokens[d.index];
        t.insert(t.end(), d.token_ids.begin(), d.token_ids.end());
        if (d.finish_reason) into->reasons[d.index] = *d.finish_reason;
      }
    }, /*final_only=*/false);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  for (int guard = 0; (*engine)->has_unfinished() && guard < 100000; ++guard) {
    if (guard == c.abort_at_step) (*engine)->abort("1");
    Status st = (*engine)->step();
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) break;
  }
  EXPECT_FALSE((*engine)->has_unfinished());
  EXPECT_EQ((*engine)->kv().num_used_blocks(), 0) << "blocks leaked";
  EXPECT_TRUE((*engine)->kv().check_invariants().ok());
  out.counters = (*engine)->counters();
  out.preemptions = (*engine)->scheduler().stats().num_preemptions;
  out.placeholders = echo->placeholders_seen();
  out.placeholder_ops = echo->placeholder_ops_seen();
  out.empty_launches = echo->empty_launches();
  return out;
}

void expect_same_outputs(const Case& c) {
  const RunOutcome sync = run(c, false), async = run(c, true);
  EXPECT_EQ(sync.counters.async_steps, 0);
  EXPECT_GT(async.counters.async_steps, 0);
  EXPECT_GT(async.placeholders, 0) << "no decode input came from the step before";
  EXPECT_GT(async.placeholder_ops, 0) << "no penalty named a token in flight";
  if (!c.with_sync_only) {  // there the first steps are synchronous (a beam request lives)
    EXPECT_GT(async.empty_launches, 0) << "no launch without samples";
  }
  ASSERT_EQ(sync.outputs.size(), async.outputs.size());
  int stopped = 0;
  for (size_t i = 0; i < sync.outputs.size(); ++i) {
    EXPECT_EQ(sync.outputs[i], async.outputs[i]) << "request " << i;
    for (const auto& r : sync.outputs[i].reasons) {
      EXPECT_TRUE(r == "stop" || r == "length") << "request " << i << ": '" << r << "'";
      stopped += r == "stop";
    }
  }
  EXPECT_GT(stopped, 0) << "no request stopped early: the late stop is not exercised";
  EXPECT_EQ(sync.counters.generated_tokens, async.counters.generated_tokens);
}

TEST(AsyncScheduling, PagedMatchesSynchronousSteps) { expect_same_outputs({}); }

TEST(AsyncScheduling, TokenModeMatchesSynchronousSteps) {
  Case c;
  c.mode = KvCacheMode::kToken;
  c.num_blocks = 4096;
  expect_same_outputs(c);
}

TEST(AsyncScheduling, RecomputePreemptionMatches) {
  Case c;
  c.num_blocks = 40;  // 160 slots for 12 running sequences of up to ~75 tokens
  const RunOutcome sync = run(c, false);
  EXPECT_GT(sync.preemptions, 0) << "the case must preempt";
  expect_same_outputs(c);
}

TEST(AsyncScheduling, SwapPreemptionMatches) {
  Case c;
  c.num_blocks = 40;
  c.preemption = PreemptionMode::kSwap;
  EXPECT_GT(run(c, true).preemptions, 0);
  expect_same_outputs(c);
}

// Prompt logprobs need the prompt's logits on the host, so steps are synchronous until that
// request's prompt is in; then its decode runs ahead like any other.
TEST(AsyncScheduling, PromptLogprobsAreSynchronousOnlyUntilThePromptIsIn) {
  Case c;
  c.num_requests = 1;
  c.prompt_logprobs_request = 0;  // 100 prompt tokens: two steps
  const RunOutcome sync = run(c, false), async = run(c, true);
  ASSERT_EQ(sync.outputs.size(), 1u);
  EXPECT_EQ(sync.outputs[0].prompt_logprobs.size(), 100u);
  ASSERT_EQ(sync.outputs[0].tokens.size(), 1u);
  ASSERT_GE(sync.outputs[0].tokens[0].size(), 3u) << "the request must decode for a while";
  EXPECT_EQ(sync.outputs[0], async.outputs[0]);
  EXPECT_GT(async.counters.async_steps, 0);  // its decode, alone, ran ahead
  EXPECT_LT(async.counters.async_steps, async.counters.model_steps);
}

// An abort between steps, while the request's token is in flight: the others are untouched (in
// this executor a request's tokens do not depend on its batch) and nothing leaks.
TEST(AsyncScheduling, AbortWhileATokenIsInFlight) {
  Case c;
  c.abort_at_step = 6;
  const RunOutcome sync = run(Case{}, false), async = run(c, true);
  ASSERT_EQ(sync.outputs.size(), async.outputs.size());
  for (size_t i = 0; i < sync.outputs.size(); ++i) {
    if (i != 1) {
      EXPECT_EQ(sync.outputs[i], async.outputs[i]) << "request " << i;
      continue;
    }
    ASSERT_EQ(async.outputs[1].reasons.size(), 1u);
    EXPECT_EQ(async.outputs[1].reasons[0], "abort");
    const auto& got = async.outputs[1].tokens[0];
    const auto& full = sync.outputs[1].tokens[0];
    ASSERT_GT(got.size(), 0u) << "abort the request after its first tokens";
    ASSERT_LT(got.size(), full.size()) << "abort the request before its end";
    EXPECT_TRUE(std::equal(got.begin(), got.end(), full.begin()));
  }
}

TEST(AsyncScheduling, SyncOnlyRequestsMakeStepsSynchronousWhileTheyLive) {
  Case c;
  c.with_sync_only = true;
  expect_same_outputs(c);
  const RunOutcome async = run(c, true);
  EXPECT_LT(async.counters.async_steps, async.counters.model_steps);
}

}  // namespace
}  // namespace folio
