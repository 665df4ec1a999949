// Beam search through the engine (beams are sequences sharing KV blocks, forked and freed per
// step) against Hugging Face's generate(num_beams=4, num_return_sequences=4) goldens: the same
// sequences in the same order, scores within 1e-3; also on a tiny pool that forces preemption.
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "engine_runner.h"

namespace folio {
namespace {

GenerateRequest beam_request(const nlohmann::json& b) {
  GenerateRequest g;
  g.prompt_token_ids = b["prompt"].get<std::vector<int32_t>>();
  g.params.use_beam_search = true;
  g.params.temperature = 0.0f;
  g.params.n = b["num_beams"].get<int>();
  g.params.max_tokens = b["max_new_tokens"].get<int>();
  g.params.ignore_eos = true;
  g.params.length_penalty = 1.0f;
  return g;
}

void expect_matches_golden(const RequestOutput& out, const nlohmann::json& b,
                           const std::string& what) {
  ASSERT_TRUE(out.error.ok()) << out.error.to_string();
  ASSERT_EQ(out.deltas.size(), b["sequences"].size()) << what;
  for (size_t j = 0; j < out.deltas.size(); ++j) {
    const auto& d = out.deltas[j];
    EXPECT_EQ(d.token_ids, b["sequences"][j].get<std::vector<int32_t>>()) << what << " beam " << j;
    const double score = d.cumulative_logprob / static_cast<double>(d.token_ids.size());
    EXPECT_NEAR(score, b["scores"][j].get<double>(), 1e-3) << what << " beam " << j;
  }
}

class BeamGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(BeamGolden, MatchesTransformers) {
  auto golden = read_json_file(testing::model_path(GetParam()) + "/golden.json");
  ASSERT_TRUE(golden.ok());
  const auto& b = (*golden)["beam_search"];
  EngineConfig roomy;
  roomy.num_kv_blocks = 256;
  roomy.block_size = 4;
  auto engine = testing::make_engine(GetParam(), roomy);
  ASSERT_NE(engine, nullptr);
  // With a greedy request beside it: beams and other decoding share the batch.
  GenerateRequest other;
  other.prompt_token_ids = {5, 6, 7};
  other.params.temperature = 0.0f;
  other.params.max_tokens = 20;
  other.params.ignore_eos = true;
  auto res = testing::run_all(*engine, {beam_request(b), other});
  ASSERT_TRUE(res.add_status[0].ok()) << res.add_status[0].to_string();
  expect_matches_golden(res.outputs[0], b, GetParam());
  EXPECT_EQ(engine->kv().num_free_blocks(), engine->kv().num_total_blocks());
  EXPECT_TRUE(engine->kv().check_invariants().ok());
  EXPECT_GT(engine->kv().stats().blocks_shared, 0);  // forks shared blocks instead of copying

  // A pool barely larger than the request: preempted and recomputed, same beams.
  EngineConfig tight = roomy;
  const int len = static_cast<int>(b["prompt"].size()) + 12;
  tight.num_kv_blocks = 4 * ((len + 3) / 4) + 4;
  auto small = testing::make_engine(GetParam(), tight);
  ASSERT_NE(small, nullptr);
  auto res2 = testing::run_all(*small, {beam_request(b), other, other});
  expect_matches_golden(res2.outputs[0], b, GetParam() + " tight pool");
  EXPECT_EQ(small->kv().num_free_blocks(), small->kv().num_total_blocks());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BeamGolden,
                         ::testing::Values("llama_gqa", "qwen2_tied", "qwen3_hd64", "llama_hd128"));

}  // namespace
}  // namespace folio
