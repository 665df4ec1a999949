// A checkpoint tensor that folio's model would not read is refused with its name, so a model
// folio cannot represent (a bias it has no place for, quantization scales) fails at load rather
// than running with different outputs; the tensors transformers also skips pass.
#include "model/checkpoint_coverage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "base/file_util.h"
#include "scratch_dir.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixture = std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa";

// The fixture's checkpoint as shard 1 of an index, and `extra` (fp32 zero tensors of the given
// lengths) as shard 2, in a fresh folder.
class ShardedCopy {
 public:
  explicit ShardedCopy(const std::map<std::string, int64_t>& extra) {
    fs::copy_file(kFixture + "/config.json", dir_.file("config.json"));
    fs::copy_file(kFixture + "/model.safetensors", dir_.file("shard-1.safetensors"));
    json map;
    for (const std::string& n : Checkpoint::open(kFixture)->tensor_names())
      map[n] = "shard-1.safetensors";
    json header = json::object();
    int64_t offset = 0;
    for (const auto& [name, n] : extra) {
      header[name] = {{"dtype", "F32"}, {"shape", {n}}, {"data_offsets", {offset, offset + 4 * n}}};
      offset += 4 * n;
      map[name] = "shard-2.safetensors";
    }
    if (!extra.empty()) {
      const std::string h = header.dump();
      const uint64_t len = h.size();
      std::string bytes(8, '\0');
      std::memcpy(bytes.data(), &len, 8);
      dir_.write("shard-2.safetensors", bytes + h + std::string(static_cast<size_t>(offset), '\0'));
    }
    dir_.write("model.safetensors.index.json", json{{"weight_map", map}}.dump());
  }
  std::string dir() const { return dir_.str(); }

 private:
  testing::ScratchDir dir_;
};

Status check(const ShardedCopy& copy, bool tied = false) {
  auto config = ModelConfig::load(copy.dir());
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  config->tie_word_embeddings = tied;
  auto ck = Checkpoint::open(copy.dir());
  EXPECT_TRUE(ck.ok()) << ck.status().to_string();
  return check_every_tensor_is_read(*config, *ck);
}

TEST(CheckpointCoverage, TheFixtureIsReadWhole) {
  const ShardedCopy copy({});
  const Status s = check(copy);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(CheckpointCoverage, ATensorTheModelDoesNotReadIsNamed) {
  const ShardedCopy copy({{"model.layers.0.self_attn.o_proj.bias", 128},
                          {"model.layers.1.self_attn.o_proj.bias", 128},
                          {"model.layers.2.self_attn.o_proj.bias", 128},
                          {"model.layers.2.mlp.down_proj.bias", 128}});
  const Status s = check(copy);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(copy.dir() + ": 4 checkpoint tensor(s) that folio's "
                                          "LlamaForCausalLM does not read (model.layers.0.self_"
                                          "attn.o_proj.bias, model.layers.1.self_attn.o_proj.bias"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(", ...)"), std::string::npos);  // the first three, then "..."
}

TEST(CheckpointCoverage, WhatTransformersSkipsPasses) {
  const ShardedCopy inv_freq({{"model.layers.0.self_attn.rotary_emb.inv_freq", 16}});
  EXPECT_TRUE(check(inv_freq).ok());
  // A tied model that still ships lm_head.weight (the fixture is untied: tie it).
  EXPECT_TRUE(check(ShardedCopy({}), /*tied=*/true).ok());
}

}  // namespace
}  // namespace folio
