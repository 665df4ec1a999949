// Golden tests against Hugging Face transformers (float64 reference from the bf16 weights):
// last-position logits within 1e-4 relative, every position for the all_logits cases, greedy
// tokens identical up to the first step whose golden margin is below 1e-3; batched and one by one
// identical; block sizes 1, 4, 16 identical.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "base/file_util.h"
#include "batch_runner.h"
#include "model/cpu_llama_executor.h"
#include "model/llama_weights.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace folio {
namespace {

using nlohmann::json;
using testing::BatchRunner;

std::string model_dir(const std::string& name) {
  return std::string(FOLIO_TEST_DATA_DIR) + "/models/" + name;
}

struct Loaded {
  ModelConfig config;
  LlamaWeights weights;
  json golden;
};

const Loaded& load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[name];
  if (!slot) {
    auto cfg = ModelConfig::load(model_dir(name));
    EXPECT_TRUE(cfg.ok()) << cfg.status().to_string();
    auto ck = Checkpoint::open(model_dir(name));
    EXPECT_TRUE(ck.ok()) << ck.status().to_string();
    auto w = LlamaWeights::load(*cfg, *ck);
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    auto g = read_json_file(model_dir(name) + "/golden.json");
    EXPECT_TRUE(g.ok());
    slot = std::make_unique<Loaded>(Loaded{*cfg, std::move(*w), std::move(*g)});
  }
  return *slot;
}

std::unique_ptr<CpuLlamaExecutor> make_executor(const Loaded& m, int block_size, int num_blocks) {
  KvCacheShape kv;
  kv.block_size = block_size;
  kv.num_blocks = num_blocks;
  return std::make_unique<CpuLlamaExecutor>(m.config, m.weights, kv);
}

double rel_err(const float* a, const json& b, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    double d = a[i] - b[i].get<double>();
    num += d * d;
    den += b[i].get<double>() * b[i].get<double>();
  }
  return std::sqrt(num / den);
}

std::vector<int32_t> prompt_of(const json& c) {
  return c["prompt"].get<std::vector<int32_t>>();
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, LogitsMatchTransformers) {
  const Loaded& m = load(GetParam());
  const int V = m.config.vocab_size;
  for (const auto& c : m.golden["cases"]) {
    auto ex = make_executor(m, 16, 64);
    BatchRunner r(*ex);
    auto prompt = prompt_of(c);
    int id = r.add(prompt);
    const bool all = c.contains("all_logits");
    auto logits = r.step({id}, all);
    ASSERT_FALSE(logits.empty());
    const int n = static_cast<int>(prompt.size());
    const float* last = &logits[static_cast<size_t>(all ? n - 1 : 0) * V];
    EXPECT_LT(rel_err(last, c["last_logits"], V), 1e-4) << "prompt length " << n;
    if (all) {
      for (int p = 0; p < n; ++p)
        EXPECT_LT(rel_err(&logits[static_cast<size_t>(p) * V], c["all_logits"][p], V), 1e-4)
            << "position " << p << " of prompt length " << n;
    }
  }
}

// Greedy decode of every case, all prompts in one batch; returns tokens per case.
std::vector<std::vector<int32_t>> greedy_all(const Loaded& m, int block_size, bool batched) {
  const int V = m.config.vocab_size;
  const auto& cases = m.golden["cases"];
  const int steps = static_cast<int>(cases[0]["greedy"].size());
  auto ex = make_executor(m, block_size, 2 * 1100 / block_size * static_cast<int>(cases.size()));
  BatchRunner r(*ex);
  std::vector<int> ids;
  for (const auto& c : cases) ids.push_back(r.add(prompt_of(c)));
  std::vector<std::vector<int32_t>> out(ids.size());
  auto run_step = [&](const std::vector<int>& group) {
    auto logits = r.step(group);
    for (size_t i = 0; i < group.size(); ++i) {
      int32_t tok = testing::argmax(&logits[i * V], V);
      out[group[i]].push_back(tok);
      r.append(group[i], tok);
    }
  };
  for (int s = 0; s < steps; ++s) {
    if (batched) {
      run_step(ids);
    } else {
      for (int id : ids) run_step({id});
    }
  }
  return out;
}

TEST_P(Golden, GreedyMatchesUntilSmallMargin) {
  const Loaded& m = load(GetParam());
  auto got = greedy_all(m, 16, /*batched=*/true);
  const auto& cases = m.golden["cases"];
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& want = cases[i]["greedy"];
    const auto& margins = cases[i]["greedy_margins"];
    for (size_t s = 0; s < want.size(); ++s) {
      if (margins[s].get<double>() < 1e-3) break;
      ASSERT_EQ(got[i][s], want[s].get<int32_t>()) << "case " << i << " step " << s;
    }
  }
}

TEST_P(Golden, BatchedEqualsOneByOneAndBlockSizesAgree) {
  const Loaded& m = load(GetParam());
  auto batched = greedy_all(m, 16, true);
  EXPECT_EQ(batched, greedy_all(m, 16, false));
  EXPECT_EQ(batched, greedy_all(m, 4, true));
  EXPECT_EQ(batched, greedy_all(m, 1, true));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Values("llama_gqa", "qwen2_tied", "qwen3_hd64", "llama_hd128"));

}  // namespace
}  // namespace folio
