// The CUDA weight arena's layout and its tensor-parallel slices, checked on the CPU: every rank
// lists the same tensors in the same order (dummy values derive from the index), the ranks'
// slices tile each tensor exactly (row slices for q/k/v, gate/up, embedding and lm_head; column
// slices for o_proj and down; whole norms), replicated KV heads are the ones the rank's query
// heads use, vocabulary padding is the only thing past the checkpoint's rows, and world 1 is the
// whole model.
#include "model/weight_layout.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace folio {
namespace {

ModelConfig config(int heads, int kv, int inter, int vocab, bool bias, bool qk_norm, bool tied) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = 256;
  c.intermediate_size = inter;
  c.num_layers = 2;
  c.num_heads = heads;
  c.num_kv_heads = kv;
  c.head_dim = 64;
  c.qkv_bias = bias;
  c.qk_norm = qk_norm;
  c.tie_word_embeddings = tied;
  return c;
}

struct Case {
  const char* name;
  ModelConfig c;
};

class WeightLayoutTp : public ::testing::TestWithParam<Case> {};

TEST_P(WeightLayoutTp, RankSlicesTileEveryTensor) {
  const ModelConfig& c = GetParam().c;
  const WeightLayout whole = build_weight_layout(c, nullptr);
  for (const WeightPart& p : whole.parts) {
    EXPECT_EQ(p.row0, 0);
    EXPECT_EQ(p.col0, 0);
    EXPECT_EQ(p.rows, p.shape[0]);
    EXPECT_EQ(p.cols, p.full_cols());
    EXPECT_EQ(p.valid_rows, p.rows);
  }
  for (int world : {1, 2, 4}) {
    if (!check_tp_divisibility(c.num_heads, c.num_kv_heads, c.intermediate_size, world).ok())
      continue;
    SCOPED_TRACE("world " + std::to_string(world));
    // Per tensor: which (row, col) elements the ranks cover, counted.
    std::map<std::string, std::vector<int>> covered;  // [rows * cols] counts
    for (int r = 0; r < world; ++r) {
      auto shard =
          make_tp_shard(c.num_heads, c.num_kv_heads, c.intermediate_size, c.vocab_size, r, world);
      ASSERT_TRUE(shard.ok()) << shard.status().to_string();
      const WeightLayout L = build_weight_layout(c, &*shard);
      ASSERT_EQ(L.parts.size(), whole.parts.size());
      size_t end = 0;
      for (size_t i = 0; i < L.parts.size(); ++i) {
        const WeightPart& p = L.parts[i];
        ASSERT_EQ(p.name, whole.parts[i].name);
        EXPECT_EQ(p.shape, whole.parts[i].shape);
        EXPECT_EQ(p.dummy_scale, whole.parts[i].dummy_scale) << p.name;
        EXPECT_GE(p.offset, end) << p.name;  // parts do not overlap
        end = p.offset + static_cast<size_t>(p.rows * p.cols) * 2;
        EXPECT_LE(end, L.total);
        EXPECT_LE(p.valid_rows, p.rows);
        EXPECT_LE(p.row0 + p.valid_rows, p.shape[0]) << p.name;
        EXPECT_LE(p.col0 + p.cols, p.full_cols()) << p.name;
        const bool vocab = p.name.find("embed_tokens") != std::string::npos ||
                           p.name.find("lm_head") != std::string::npos;
        if (!vocab) {
          EXPECT_EQ(p.valid_rows, p.rows) << p.name;
        }
        const bool kv = p.name.find("k_proj") != std::string::npos ||
                        p.name.find("v_proj") != std::string::npos;
        if (kv) {  // the rank's KV heads are the ones its query heads attend to
          const int group = c.num_heads / c.num_kv_heads;
          EXPECT_EQ(p.row0 / c.head_dim, shard->head_start / group) << p.name;
        }
        auto& cells = covered[p.name];
        cells.resize(static_cast<size_t>(p.shape[0] * p.full_cols()));
        for (int64_t row = 0; row < p.valid_rows; ++row)
          for (int64_t col = 0; col < p.cols; ++col)
            ++cells[static_cast<size_t>((p.row0 + row) * p.full_cols() + p.col0 + col)];
      }
      // The executor's fused matrices: q, k, v parts back to back, gate and up too.
      for (const LayerOffsets& o : L.layers) {
        EXPECT_NE(o.qkv, kNoTensor);
        EXPECT_EQ(o.qkv_bias == kNoTensor, !c.qkv_bias);
        EXPECT_EQ(o.q_norm == kNoTensor, !c.qk_norm);
      }
      EXPECT_EQ(L.lm_head == kNoTensor, c.tie_word_embeddings);
    }
    const bool replicated = c.num_kv_heads < world;
    for (const WeightPart& p : whole.parts) {
      const auto& cells = covered[p.name];
      ASSERT_EQ(static_cast<int64_t>(cells.size()), p.rows * p.cols) << p.name;
      const bool whole_on_each = p.name.find("norm") != std::string::npos;
      const bool kv =
          p.name.find("k_proj") != std::string::npos || p.name.find("v_proj") != std::string::npos;
      const int want = whole_on_each ? world : (kv && replicated ? world / c.num_kv_heads : 1);
      for (size_t e = 0; e < cells.size(); ++e)
        ASSERT_EQ(cells[e], want) << p.name << " element " << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, WeightLayoutTp,
    ::testing::Values(Case{"llama_gqa", config(8, 2, 512, 1000, false, false, false)},
                      Case{"mqa_replicated", config(4, 1, 512, 1001, false, false, false)},
                      Case{"qwen2_bias_tied", config(8, 4, 512, 387, true, false, true)},
                      Case{"qwen3_qk_norm", config(8, 8, 256, 500, false, true, false)}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace folio
