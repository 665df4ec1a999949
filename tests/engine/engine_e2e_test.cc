// End-to-end through the whole engine (scheduler, KV manager, sampler, CPU executor) on the
// fixture models: greedy tokens equal transformers' goldens, and a tiny KV pool that forces
// many preemptions gives token for token the outputs of an unconstrained run, in every mode.
#include <gtest/gtest.h>

#include <random>

#include "base/file_util.h"
#include "engine_runner.h"

namespace folio {
namespace {

using nlohmann::json;
using testing::make_engine;
using testing::run_all;

GenerateRequest greedy_request(std::vector<int32_t> prompt, int max_tokens) {
  GenerateRequest g;
  g.prompt_token_ids = std::move(prompt);
  g.params.temperature = 0.0f;
  g.params.has_temperature = true;
  g.params.max_tokens = max_tokens;
  g.params.ignore_eos = true;
  return g;
}

class EngineGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineGolden, GreedyMatchesTransformersWithAllCasesInFlight) {
  auto golden = read_json_file(testing::model_path(GetParam()) + "/golden.json");
  ASSERT_TRUE(golden.ok());
  EngineConfig c;
  c.num_kv_blocks = 512;
  c.sched.max_num_batched_tokens = 256;  // long prompts are chunked across steps
  auto engine = make_engine(GetParam(), c);
  ASSERT_NE(engine, nullptr);
  std::vector<GenerateRequest> reqs;
  for (const auto& cs : (*golden)["cases"])
    reqs.push_back(greedy_request(cs["prompt"].get<std::vector<int32_t>>(), 24));
  auto res = run_all(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(res.add_status[i].ok()) << res.add_status[i].to_string();
    const auto& cs = (*golden)["cases"][i];
    ASSERT_EQ(res.outputs[i].deltas.size(), 1u);
    const auto& got = res.outputs[i].deltas[0].token_ids;
    ASSERT_EQ(got.size(), 24u);
    EXPECT_EQ(res.outputs[i].deltas[0].finish_reason.value_or(""), "length");
    for (size_t s = 0; s < got.size(); ++s) {
      if (cs["greedy_margins"][s].get<double>() < 1e-3) break;
      ASSERT_EQ(got[s], cs["greedy"][s].get<int32_t>()) << "case " << i << " step " << s;
    }
  }
  EXPECT_EQ(engine->kv().num_free_blocks(), engine->kv().num_total_blocks());
  EXPECT_TRUE(engine->kv().check_invariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineGolden,
                         ::testing::Values("llama_gqa", "qwen2_tied", "qwen3_hd64", "llama_hd128"));

// 64 requests of varied lengths; a third share a common prefix so prefix caching matters.
std::vector<GenerateRequest> varied_requests(int vocab) {
  std::mt19937 rng(1234);
  std::vector<int32_t> shared(40);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % vocab);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 64; ++i) {
    int len = 1 + static_cast<int>(rng() % 48);
    std::vector<int32_t> p;
    if (i % 3 == 0) p.assign(shared.begin(), shared.begin() + 16 + static_cast<int>(rng() % 24));
    while (static_cast<int>(p.size()) < len) p.push_back(static_cast<int32_t>(rng() % vocab));
    reqs.push_back(greedy_request(p, 1 + static_cast<int>(rng() % 12)));
  }
  return reqs;
}

std::vector<std::vector<int32_t>> tokens_of(const testing::RunResult& r) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& o : r.outputs)
    out.push_back(o.deltas.empty() ? std::vector<int32_t>{} : o.deltas[0].token_ids);
  return out;
}

struct PoolCase {
  KvCacheMode mode;
  int block_size;
  PreemptionMode preemption;
  bool prefix;
  SchedulePolicy policy = SchedulePolicy::kFcfs;
  bool longest_first = false;  // SchedulerConfig::decode_rows_longest_first
};

TEST(EnginePreemption, TinyPoolMatchesUnconstrainedRun) {
  const std::string model = "llama_gqa";
  auto reqs = varied_requests(512);
  EngineConfig big;
  big.num_kv_blocks = 2048;
  big.enable_prefix_caching = false;
  auto ref_engine = make_engine(model, big);
  ASSERT_NE(ref_engine, nullptr);
  auto ref = tokens_of(run_all(*ref_engine, reqs));
  for (const auto& t : ref) ASSERT_FALSE(t.empty());

  std::vector<PoolCase> cases;
  for (auto pre : {PreemptionMode::kRecompute, PreemptionMode::kSwap})
    for (bool prefix : {true, false}) {
      for (int bs : {1, 4, 16}) cases.push_back({KvCacheMode::kPaged, bs, pre, prefix});
      cases.push_back({KvCacheMode::kToken, 1, pre, prefix});
    }
  // lof reorders admission and picks other victims: the order changes, no request's tokens do.
  cases.push_back({KvCacheMode::kPaged, 4, PreemptionMode::kRecompute, true,
                   SchedulePolicy::kLongestOutputFirst});
  cases.push_back({KvCacheMode::kToken, 1, PreemptionMode::kSwap, false,
                   SchedulePolicy::kLongestOutputFirst});
  // Decode rows by context length: other rows, the same tokens per request.
  cases.push_back({KvCacheMode::kPaged, 16, PreemptionMode::kRecompute, true,
                   SchedulePolicy::kFcfs, true});
  cases.push_back({KvCacheMode::kPaged, 4, PreemptionMode::kSwap, false, SchedulePolicy::kFcfs,
                   true});
  for (const auto& pc : cases) {
    EngineConfig c;
    c.kv_mode = pc.mode;
    c.block_size = pc.block_size;
    // Room for the longest request (48 + 12 tokens) and little more: constant preemption.
    const int tokens = 80;
    c.num_kv_blocks = (tokens + pc.block_size - 1) / pc.block_size;
    c.max_total_tokens = tokens;
    c.enable_prefix_caching = pc.prefix;
    c.sched.preemption_mode = pc.preemption;
    c.sched.policy = pc.policy;
    c.sched.decode_rows_longest_first = pc.longest_first;
    c.sched.schedule_conservativeness = 0.0;  // vLLM's admission: the tiny pool preempts
    c.sched.max_num_batched_tokens = 48;
    c.swap_space_gib = pc.preemption == PreemptionMode::kSwap ? 1.0 / 1024 : 0.0;
    auto engine = make_engine(model, c);
    ASSERT_NE(engine, nullptr);
    auto got = tokens_of(run_all(*engine, reqs));
    const std::string what = std::string(pc.mode == KvCacheMode::kToken ? "token" : "paged") +
                             " bs=" + std::to_string(pc.block_size) +
                             (pc.preemption == PreemptionMode::kSwap ? " swap" : " recompute") +
                             (pc.prefix ? " prefix" : " no-prefix") +
                             (pc.policy == SchedulePolicy::kLongestOutputFirst ? " lof" : "") +
                             (pc.longest_first ? " longest-first rows" : "");
    EXPECT_EQ(got, ref) << what;
    EXPECT_GT(engine->scheduler().stats().num_preemptions, 0) << what;
    EXPECT_EQ(engine->kv().num_free_blocks(), engine->kv().num_total_blocks()) << what;
    EXPECT_TRUE(engine->kv().check_invariants().ok()) << what;
  }
  // The default admission headroom in the same pool: requests wait instead, the same tokens.
  for (KvCacheMode mode : {KvCacheMode::kPaged, KvCacheMode::kToken}) {
    EngineConfig c;
    c.kv_mode = mode;
    c.block_size = mode == KvCacheMode::kToken ? 1 : 4;
    c.num_kv_blocks = 20;
    c.max_total_tokens = 80;
    c.sched.max_num_batched_tokens = 48;
    auto engine = make_engine(model, c);
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(tokens_of(run_all(*engine, reqs)), ref) << "headroom";
    EXPECT_EQ(engine->kv().num_free_blocks(), engine->kv().num_total_blocks());
  }
}

TEST(EngineRequests, BadRequestsAreRefusedCleanly) {
  EngineConfig c;
  c.num_kv_blocks = 64;
  c.sched.max_model_len = 128;
  auto engine = make_engine("llama_gqa", c);
  ASSERT_NE(engine, nullptr);
  auto sink = [](RequestOutput&&) {};
  GenerateRequest bad_id = greedy_request({1, 2, 512}, 4);
  bad_id.request_id = "a";
  Status st = engine->add_request(bad_id, sink, true);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("outside the vocabulary"), std::string::npos);
  GenerateRequest too_long = greedy_request(std::vector<int32_t>(200, 3), 4);
  too_long.request_id = "b";
  st = engine->add_request(too_long, sink, true);
  EXPECT_NE(st.message().find("maximum context length is 128 tokens"), std::string::npos);
  GenerateRequest bad_temp = greedy_request({1, 2}, 4);
  bad_temp.request_id = "c";
  bad_temp.params.temperature = -1;
  EXPECT_FALSE(engine->add_request(bad_temp, sink, true).ok());
  EXPECT_FALSE(engine->has_unfinished());
}

TEST(EngineRequests, AbortFreesBlocksAndReportsAbort) {
  EngineConfig c;
  c.num_kv_blocks = 64;
  auto engine = make_engine("llama_gqa", c);
  ASSERT_NE(engine, nullptr);
  RequestOutput last;
  GenerateRequest g = greedy_request(std::vector<int32_t>(50, 7), 100);
  g.request_id = "x";
  ASSERT_TRUE(engine
                  ->add_request(
                      g, [&](RequestOutput&& o) { last = std::move(o); }, false)
                  .ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine->step().ok());
  EXPECT_LT(engine->kv().num_free_blocks(), engine->kv().num_total_blocks());
  engine->abort("x");
  EXPECT_TRUE(last.finished);
  ASSERT_FALSE(last.deltas.empty());
  EXPECT_EQ(last.deltas[0].finish_reason.value_or(""), "abort");
  EXPECT_FALSE(engine->has_unfinished());
  EXPECT_EQ(engine->kv().num_free_blocks(), engine->kv().num_total_blocks());
}

}  // namespace
}  // namespace folio
