// The rope frequencies of each scaling type folio reads, against transformers' definitions
// (modeling_rope_utils): linear divides every default frequency by `factor`; the config parser
// takes the type from either spelling and refuses the types folio does not compute.
#include "model/rope.h"

#include <gtest/gtest.h>

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
  c["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  r = ModelConfig::from_json(c, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unsupported rope type \"yarn\" (default, linear, llama3)"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace folio
