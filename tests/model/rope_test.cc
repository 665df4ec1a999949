// The rope frequencies of each scaling type folio reads, against transformers' definitions
// (modeling_rope_utils): linear divides every default frequency by `factor`; the config parser
// takes the type from either spelling and refuses the types folio does not compute; yarn blends
// the two by dimension and scales attention, and sets the model's length as vLLM does.
#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/model_config.h"

namespace folio {
namespace {

TEST(Rope, LinearDividesEveryDefaultFrequencyByTheFactor) {
  RopeConfig plain;
  plain.theta = 500000.0;
  RopeConfig linear = plain;
  linear.type = "linear";
  linear.factor = 4.0;
  const std::vector<double> a = exact_rope_inv_freq(plain, 128),
                            b = exact_rope_inv_freq(linear, 128);
  ASSERT_EQ(a.size(), 64u);
  ASSERT_EQ(b.size(), 64u);
  EXPECT_EQ(a[0], 1.0);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_DOUBLE_EQ(b[i], a[i] / 4.0) << i;
}

TEST(Rope, ScalingTypesFromTheConfig) {
  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}},
                      {"vocab_size", 32},
                      {"hidden_size", 64},
                      {"intermediate_size", 128},
                      {"num_hidden_layers", 1},
                      {"num_attention_heads", 4},
                      {"max_position_embeddings", 4096}};
  c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};  // the legacy spelling
  auto r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->rope.type, "linear");
  EXPECT_EQ(r->rope.factor, 2.0);
  c.erase("rope_scaling");
  c["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 1e4}};  // no factor
  EXPECT_FALSE(ModelConfig::from_json(c, "x").ok());
  c["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  r = ModelConfig::from_json(c, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "unsupported rope type \"dynamic\" (default, linear, llama3, yarn)"),
            std::string::npos)
      << r.status().message();
}

// Qwen3's model card's YaRN settings: theta 1e6, head_dim 128, 32768 original positions,
// factor 4. Dimension i turns o / (2 pi theta^(2i/d)) times over them, so beta_fast's 32 turns
// fall at i = 23.6 and beta_slow's one turn at 39.65: truncated, the ramp runs from 23 to 40.
RopeConfig qwen3_yarn() {
  RopeConfig r;
  r.theta = 1e6;
  r.type = "yarn";
  r.factor = 4.0;
  r.original_max_position_embeddings = 32768;
  return r;
}

TEST(Rope, YarnKeepsFastDimensionsInterpolatesSlowOnesAndRampsBetween) {
  RopeConfig plain;
  plain.theta = 1e6;
  const std::vector<double> a = exact_rope_inv_freq(plain, 128),
                            y = exact_rope_inv_freq(qwen3_yarn(), 128);
  ASSERT_EQ(y.size(), 64u);
  for (int i = 0; i <= 23; ++i) EXPECT_DOUBLE_EQ(y[i], a[i]) << i;
  for (int i = 40; i < 64; ++i) EXPECT_DOUBLE_EQ(y[i], a[i] / 4.0) << i;
  for (int i = 24; i < 40; ++i) {
    const double ramp = (i - 23) / 17.0;
    EXPECT_DOUBLE_EQ(y[i], a[i] * (1 - ramp) + a[i] / 4.0 * ramp) << i;
  }
  // Without truncation the band is [23.596, 39.651]: dimension 24 blends less (ramp 0.025, not
  // 1/17) and 39 not wholly (0.959).
  RopeConfig exact = qwen3_yarn();
  exact.truncate = false;
  const std::vector<double> e = exact_rope_inv_freq(exact, 128);
  EXPECT_DOUBLE_EQ(e[23], a[23]);
  const double r24 = (24 - 23.5959476083381) / (39.6508807104171 - 23.5959476083381);
  EXPECT_NEAR(e[24], a[24] * (1 - r24) + a[24] / 4.0 * r24, 1e-12 * a[24]);
  EXPECT_GT(e[24], y[24]);
  EXPECT_GT(e[39], a[39] / 4.0);
  EXPECT_DOUBLE_EQ(e[40], a[40] / 4.0);
}

nlohmann::json qwen3_config() {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"vocab_size", 32},
          {"hidden_size", 256},
          {"head_dim", 128},
          {"intermediate_size", 128},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 2},
          {"max_position_embeddings", 40960},
          {"rope_theta", 1e6}};
}

TEST(Rope, YarnFromTheConfigSetsTheAttentionFactorAndTheLength) {
  nlohmann::json c = qwen3_config();
  c["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  auto r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->rope.type, "yarn");
  EXPECT_EQ(r->rope.beta_fast, 32.0);
  EXPECT_EQ(r->rope.beta_slow, 1.0);
  EXPECT_TRUE(r->rope.truncate);
  EXPECT_NEAR(r->rope.attention_factor, 1.1386294361, 1e-9);  // 0.1 ln 4 + 1
  EXPECT_NEAR(r->softmax_scale(), 1.1386294361 * 1.1386294361 / std::sqrt(128.0), 1e-9);
  EXPECT_EQ(r->rope_scaled_max_len(), 131072);  // vLLM's: original x factor
  EXPECT_EQ(r->max_context_len(), 131072);
  const std::vector<double> y = exact_rope_inv_freq(r->rope, 128),
                            want = exact_rope_inv_freq(qwen3_yarn(), 128);
  for (int i = 0; i < 64; ++i) EXPECT_DOUBLE_EQ(y[i], want[i]) << i;

  // DeepSeek's form: the factor from the two mscale terms; an explicit attention_factor wins.
  c["rope_scaling"]["mscale"] = 0.707;
  c["rope_scaling"]["mscale_all_dim"] = 1.0;
  r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NEAR(r->rope.attention_factor, (0.0707 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1),
              1e-12);
  c["rope_scaling"]["attention_factor"] = 1.0;
  r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rope.attention_factor, 1.0);

  // Without original_max_position_embeddings the config's own length is the original.
  c["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}, {"beta_fast", 16}, {"truncate", false}};
  r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->rope.original_max_position_embeddings, 40960);
  EXPECT_EQ(r->rope.beta_fast, 16.0);
  EXPECT_FALSE(r->rope.truncate);
  EXPECT_EQ(r->max_context_len(), 81920);
  // Other types leave the logits' scale at 1 / sqrt(head_dim).
  c.erase("rope_scaling");
  r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->softmax_scale(), 1 / std::sqrt(128.0));
  EXPECT_EQ(r->max_context_len(), 40960);
}

TEST(Rope, YarnRefusesSettingsItCannotUse) {
  nlohmann::json c = qwen3_config();
  for (const nlohmann::json& bad :
       {nlohmann::json{{"rope_type", "yarn"}},  // no factor
        nlohmann::json{{"rope_type", "yarn"}, {"factor", -2.0}},
        nlohmann::json{{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 1}, {"beta_slow", 2}},
        nlohmann::json{{"rope_type", "yarn"}, {"factor", 4.0}, {"truncate", "yes"}},
        nlohmann::json{{"rope_type", "yarn"}, {"factor", 4.0}, {"attention_factor", 0}}}) {
    c["rope_scaling"] = bad;
    EXPECT_FALSE(ModelConfig::from_json(c, "x").ok()) << bad.dump();
  }
}

TEST(Rope, LinearScalingExtendsTheLengthByItsFactor) {  // vLLM's derived max_model_len
  nlohmann::json c = qwen3_config();
  c["max_position_embeddings"] = 4096;
  c["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  auto r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_context_len(), 16384);
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_context_len(), 4096);  // llama3's configs give the extended length
}

}  // namespace
}  // namespace folio
