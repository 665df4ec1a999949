// The model configs shipped in configs/ (dummy-weight benchmarks: `--model-config FILE
// --load-format dummy`) parse, and describe the models they are named after: the parameter
// count they imply matches the published one, so a mistyped size would fail here rather than
// make a benchmark measure another model.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "base/file_util.h"
#include "model/model_config.h"

namespace folio {
namespace {

// Weights of a Llama-family model: embeddings (and an untied lm_head), per layer the q/k/v/o
// projections (Qwen2's q/k/v biases, Qwen3's q/k norms), the SwiGLU MLP and two norms, then the
// final norm.
double parameter_count(const ModelConfig& c) {
  const double H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const double q = c.q_size(), kv = c.kv_size();
  double layer = H * (q + 2 * kv) + q * H + 3 * H * I + 2 * H;
  if (c.qkv_bias) layer += q + 2 * kv;
  if (c.qk_norm) layer += 2.0 * c.head_dim;
  return V * H * (c.tie_word_embeddings ? 1 : 2) + c.num_layers * layer + H;
}

struct Shipped {
  const char* file;
  double published_params;  // from each model's card
  int head_dim;
  const char* rope_type;
};

class ShippedConfig : public ::testing::TestWithParam<Shipped> {};

TEST_P(ShippedConfig, ParsesAndHasThePublishedSize) {
  const Shipped& s = GetParam();
  const std::string path = std::string(FOLIO_SOURCE_DIR) + "/configs/" + s.file;
  auto j = read_json_file(path);
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  auto c = ModelConfig::from_json(*j, path);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->head_dim, s.head_dim);
  EXPECT_EQ(c->rope.type, s.rope_type);
  EXPECT_EQ(c->num_heads % c->num_kv_heads, 0);
  const double params = parameter_count(*c);
  EXPECT_LT(std::abs(params / s.published_params - 1), 0.005)
      << s.file << ": " << params / 1e9 << "B parameters, published " << s.published_params / 1e9;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, ShippedConfig,
    ::testing::Values(Shipped{"llama-3-8b.json", 8.03e9, 128, "default"},
                      Shipped{"llama-3-70b.json", 70.55e9, 128, "default"},
                      Shipped{"llama-3.2-3b.json", 3.21e9, 128, "llama3"},
                      Shipped{"qwen2.5-7b.json", 7.62e9, 128, "default"},
                      Shipped{"mistral-7b.json", 7.25e9, 128, "default"}),
    [](const ::testing::TestParamInfo<Shipped>& i) {
      std::string n = i.param.file;
      n = n.substr(0, n.find(".json"));
      for (char& ch : n)
        if (ch == '-' || ch == '.') ch = '_';
      return n;
    });

}  // namespace
}  // namespace folio
