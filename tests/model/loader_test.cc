// Bad checkpoints and configs get a clear error naming the file and the problem, never a crash;
// both config spellings and sharded checkpoints load.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/file_util.h"
#include "model/llama_weights.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "scratch_dir.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixture = std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa";

using testing::ScratchDir;

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string fixture_bytes(const std::string& name) {
  return *read_file(kFixture + "/" + name);
}

// A safetensors file holding the given header JSON and `data_bytes` zero bytes.
std::string make_safetensors(const json& header, size_t data_bytes) {
  std::string h = header.dump();
  uint64_t n = h.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + h + std::string(data_bytes, '\0');
}

TEST(ModelConfig, AcceptsBothSpellings) {
  json legacy =
      *read_json_file(std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_hd128/config.json");
  auto a = ModelConfig::from_json(legacy, "legacy");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->rope.theta, 10000.0);
  EXPECT_EQ(a->dtype, "bfloat16");
  EXPECT_EQ(a->head_dim, 128);
  EXPECT_EQ(a->num_kv_heads, 1);
  auto b = ModelConfig::load(kFixture);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->rope.type, "llama3");
  EXPECT_EQ(b->rope.factor, 8.0);
  EXPECT_EQ(b->rope.original_max_position_embeddings, 256);
  EXPECT_EQ(b->rope.theta, 500000.0);
  // Legacy rope_scaling spelling of the same llama3 settings.
  json c = *read_json_file(kFixture + "/config.json");
  c["rope_scaling"] = c["rope_parameters"];
  c["rope_theta"] = c["rope_parameters"]["rope_theta"];
  c.erase("rope_parameters");
  auto d = ModelConfig::from_json(c, "legacy-llama3");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->rope.type, "llama3");
  EXPECT_EQ(d->rope.factor, 8.0);
}

TEST(ModelConfig, QwenFlags) {
  auto q2 = ModelConfig::load(std::string(FOLIO_TEST_DATA_DIR) + "/models/qwen2_tied");
  ASSERT_TRUE(q2.ok());
  EXPECT_TRUE(q2->qkv_bias);
  EXPECT_TRUE(q2->tie_word_embeddings);
  auto q3 = ModelConfig::load(std::string(FOLIO_TEST_DATA_DIR) + "/models/qwen3_hd64");
  ASSERT_TRUE(q3.ok());
  EXPECT_TRUE(q3->qk_norm);
  EXPECT_EQ(q3->head_dim, 64);
}

// ModelConfig::sliding_window as transformers derives it, and the layers it applies to
// (layer_window); the model's length stays its own.
TEST(ModelConfig, SlidingWindowAsTransformersReadsIt) {
  json base = *read_json_file(kFixture + "/config.json");  // a Llama: never slides
  base["max_position_embeddings"] = 32768;
  base["sliding_window"] = 4096;
  auto window = [&](const json& c) {
    auto r = ModelConfig::from_json(c, "x");
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->sliding_window : std::optional<int>(-1);
  };
  EXPECT_EQ(window(base), std::nullopt);

  json mistral = base;
  mistral["architectures"] = {"MistralForCausalLM"};
  EXPECT_EQ(window(mistral), 4096);
  EXPECT_EQ(ModelConfig::from_json(mistral, "x")->max_context_len(), 32768);
  EXPECT_EQ(ModelConfig::from_json(mistral, "x")->layer_window(0), 4096);
  EXPECT_EQ(ModelConfig::from_json(mistral, "x")->layer_window(1), 4096);
  mistral["sliding_window"] = nullptr;  // Mistral-7B-v0.2 and later
  EXPECT_EQ(window(mistral), std::nullopt);
  EXPECT_EQ(ModelConfig::from_json(mistral, "x")->max_context_len(), 32768);
  mistral.erase("sliding_window");  // MistralConfig's default
  EXPECT_EQ(window(mistral), 4096);

  json qwen = base;  // 3 layers
  qwen["architectures"] = {"Qwen2ForCausalLM"};
  EXPECT_EQ(window(qwen), std::nullopt);  // use_sliding_window absent: false
  qwen["use_sliding_window"] = true;
  EXPECT_EQ(window(qwen), std::nullopt);  // max_window_layers 28 (default) >= 3 layers
  qwen["max_window_layers"] = 1;
  EXPECT_EQ(window(qwen), 4096);
  EXPECT_EQ(ModelConfig::from_json(qwen, "x")->layer_window(0), 0);  // below max_window_layers
  EXPECT_EQ(ModelConfig::from_json(qwen, "x")->layer_window(1), 4096);
  qwen["max_window_layers"] = 0;
  EXPECT_EQ(ModelConfig::from_json(qwen, "x")->layer_window(0), 4096);
  qwen["max_window_layers"] = 1;
  qwen["layer_types"] = {"full_attention", "full_attention", "full_attention"};  // the list decides
  EXPECT_EQ(window(qwen), std::nullopt);
  qwen["layer_types"] = {"sliding_attention", "full_attention", "full_attention"};
  EXPECT_EQ(window(qwen), 4096);
  EXPECT_EQ(ModelConfig::from_json(qwen, "x")->layer_window(0), 4096);
  EXPECT_EQ(ModelConfig::from_json(qwen, "x")->layer_window(1), 0);
  qwen["layer_types"] = {"sliding_attention"};  // one entry for three layers
  EXPECT_FALSE(ModelConfig::from_json(qwen, "x").ok());
  qwen["layer_types"] = {"full_attention", "full_attention", "sliding_attention"};
  qwen["use_sliding_window"] = false;
  EXPECT_EQ(window(qwen), std::nullopt);
  qwen["architectures"] = {"Qwen3ForCausalLM"};
  qwen["use_sliding_window"] = true;
  EXPECT_EQ(window(qwen), 4096);

  mistral["sliding_window"] = "4096";
  EXPECT_FALSE(ModelConfig::from_json(mistral, "x").ok());
  mistral["sliding_window"] = 0;
  EXPECT_FALSE(ModelConfig::from_json(mistral, "x").ok());
  qwen.erase("layer_types");
  qwen["max_window_layers"] = -1;
  EXPECT_FALSE(ModelConfig::from_json(qwen, "x").ok());
}

// attention_bias / mlp_bias as each architecture's modelling code reads them: biases folio has
// no place for are refused rather than dropped.
TEST(ModelConfig, BiasKeysByArchitecture) {
  json c = *read_json_file(kFixture + "/config.json");
  c["attention_bias"] = true;
  auto r = ModelConfig::from_json(c, "x");  // Llama: q/k/v and o_proj biases
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x: attention_bias: true (biases on q/k/v and o_proj)"),
            std::string::npos)
      << r.status().message();
  c["architectures"] = {"Qwen3ForCausalLM"};
  EXPECT_FALSE(ModelConfig::from_json(c, "x").ok());
  c["architectures"] = {"MistralForCausalLM"};  // Mistral's code reads neither key
  c["mlp_bias"] = true;
  r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->qkv_bias);
  c["architectures"] = {"Qwen2ForCausalLM"};  // q/k/v biases always, no o_proj bias
  c.erase("mlp_bias");
  c["attention_bias"] = false;
  r = ModelConfig::from_json(c, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->qkv_bias);
  c["architectures"] = {"LlamaForCausalLM"};
  c["mlp_bias"] = true;
  r = ModelConfig::from_json(c, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("mlp_bias"), std::string::npos);
}

TEST(ModelConfig, Errors) {
  json c = *read_json_file(kFixture + "/config.json");
  c["architectures"] = {"GPT2LMHeadModel"};
  auto r = ModelConfig::from_json(c, "x/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unsupported architecture \"GPT2LMHeadModel\""),
            std::string::npos);
  c = *read_json_file(kFixture + "/config.json");
  c.erase("hidden_size");
  r = ModelConfig::from_json(c, "x/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x/config.json: missing required field \"hidden_size\""),
            std::string::npos);
  c = *read_json_file(kFixture + "/config.json");
  c["num_key_value_heads"] = 3;
  EXPECT_FALSE(ModelConfig::from_json(c, "x").ok());
  c["num_key_value_heads"] = "2";
  EXPECT_FALSE(ModelConfig::from_json(c, "x").ok());
  c = *read_json_file(kFixture + "/config.json");
  c["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
  r = ModelConfig::from_json(c, "x/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x/config.json: quantized checkpoints are not supported "
                                      "(quantization_config, quant_method \"awq\")"),
            std::string::npos)
      << r.status().message();
  auto missing = ModelConfig::load("/nonexistent/model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model/config.json"), std::string::npos);
}

TEST(Safetensors, TruncatedAndCorruptedFiles) {
  ScratchDir d;
  std::string good = fixture_bytes("model.safetensors");
  write(d.file("short.safetensors"), good.substr(0, 5));
  auto r = SafetensorsFile::open(d.file("short.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("short.safetensors: truncated"), std::string::npos);

  write(d.file("cut.safetensors"), good.substr(0, good.size() / 2));
  r = SafetensorsFile::open(d.file("cut.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();

  std::string bad = good;
  bad[8] = '#';  // the JSON header's opening brace
  write(d.file("bad.safetensors"), bad);
  r = SafetensorsFile::open(d.file("bad.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("corrupted header"), std::string::npos);

  std::string huge = good;
  uint64_t n = uint64_t{1} << 40;
  std::memcpy(huge.data(), &n, 8);
  write(d.file("huge.safetensors"), huge);
  EXPECT_FALSE(SafetensorsFile::open(d.file("huge.safetensors")).ok());
}

TEST(Safetensors, DtypeAndSizeMismatch) {
  ScratchDir d;
  json h = {{"w", {{"dtype", "BF16"}, {"shape", {2, 3}}, {"data_offsets", {0, 10}}}}};
  write(d.file("a.safetensors"), make_safetensors(h, 10));
  auto r = SafetensorsFile::open(d.file("a.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor \"w\": byte size 10 does not match dtype BF16"),
            std::string::npos);
  h = {{"w", {{"dtype", "I8"}, {"shape", {2}}, {"data_offsets", {0, 2}}}}};
  write(d.file("b.safetensors"), make_safetensors(h, 2));
  r = SafetensorsFile::open(d.file("b.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unsupported dtype \"I8\""), std::string::npos);
}

TEST(Checkpoint, ShapeMismatchNamesTensor) {
  ScratchDir d;
  fs::copy(kFixture + "/model.safetensors", d.file("model.safetensors"));
  json c = *read_json_file(kFixture + "/config.json");
  c["intermediate_size"] = 353;
  auto cfg = ModelConfig::from_json(c, "config.json");
  ASSERT_TRUE(cfg.ok());
  auto ck = Checkpoint::open(d.str());
  ASSERT_TRUE(ck.ok());
  auto w = LlamaWeights::load(*cfg, *ck);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("model.layers.0.mlp.gate_proj.weight\" has shape [352, 128], "
                                      "expected [353, 128]"),
            std::string::npos)
      << w.status().message();
}

TEST(Checkpoint, ShardedEqualsSingleFile) {
  // Split the fixture into two shards by tensor name, with an index.
  auto single = Checkpoint::open(kFixture);
  ASSERT_TRUE(single.ok());
  auto file = SafetensorsFile::open(kFixture + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  ScratchDir d;
  json shard_h[2] = {json::object(), json::object()};
  std::string shard_data[2];
  json weight_map = json::object();
  int i = 0;
  for (const auto& [name, t] : (*file)->tensors()) {
    int s = (i++) % 2;
    size_t begin = shard_data[s].size();
    shard_data[s].append(reinterpret_cast<const char*>(t.data), t.num_bytes);
    shard_h[s][name] = {{"dtype", dtype_name(t.dtype)},
                        {"shape", t.shape},
                        {"data_offsets", {begin, shard_data[s].size()}}};
    weight_map[name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s) {
    std::string bytes = make_safetensors(shard_h[s], 0) + shard_data[s];
    write(d.file("model-0000" + std::to_string(s + 1) + "-of-00002.safetensors"), bytes);
  }
  write(d.file("model.safetensors.index.json"), json{{"weight_map", weight_map}}.dump());
  auto sharded = Checkpoint::open(d.str());
  ASSERT_TRUE(sharded.ok()) << sharded.status().to_string();
  EXPECT_EQ(sharded->num_tensors(), single->num_tensors());
  auto cfg = ModelConfig::load(kFixture);
  auto a = LlamaWeights::load(*cfg, *single);
  auto b = LlamaWeights::load(*cfg, *sharded);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->layers[2].gate_up, b->layers[2].gate_up);
  EXPECT_EQ(a->embed, b->embed);

  // A missing shard names the file.
  fs::remove(d.file("model-00002-of-00002.safetensors"));
  auto broken = Checkpoint::open(d.str());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("model-00002-of-00002.safetensors"), std::string::npos);
}

TEST(Checkpoint, MissingWeightsFile) {
  ScratchDir d;
  auto r = Checkpoint::open(d.str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace folio
