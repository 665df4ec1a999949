// --hf-overrides (vLLM's): a JSON object whose top-level keys replace config.json's before the
// model is read, the way Qwen's model cards enable YaRN (`{"rope_scaling": {"rope_type": "yarn",
// ...}}`). The overridden config sets the model's length; malformed overrides fail the load
// with a message that says what was wrong.
#include <gtest/gtest.h>

#include "dummy_configs.h"
#include "engine/engine_factory.h"
#include "engine_runner.h"
#include "scratch_dir.h"

namespace folio {
namespace {

using nlohmann::json;

// A tiny Qwen3 config (dummy weights) of 512 positions.
std::string write_qwen3_config(const testing::ScratchDir& dir) {
  json c = testing::tiny_config("Qwen3ForCausalLM");
  c["head_dim"] = 16;
  c["rope_theta"] = 1000000.0;
  return dir.write("config.json", c.dump());
}

Result<std::unique_ptr<EngineCore>> load(const std::string& config_path,
                                         const std::string& overrides, int max_model_len = 0) {
  return testing::load_dummy_engine(config_path, max_model_len, overrides);
}

const char* kYarn =
    R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                         "original_max_position_embeddings": 256}})";

TEST(HfOverrides, YarnFromTheOverridesSetsTheModelsLength) {
  const testing::ScratchDir dir;
  const std::string path = write_qwen3_config(dir);
  auto plain = load(path, "");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ((*plain)->max_model_len(), 512);
  auto yarn = load(path, kYarn);
  ASSERT_TRUE(yarn.ok()) << yarn.status().message();
  EXPECT_EQ((*yarn)->max_model_len(), 1024);  // original 256 x factor 4, as vLLM derives it
  auto longer = load(path, kYarn, 1025);
  ASSERT_FALSE(longer.ok());
  EXPECT_NE(longer.status().message().find(
                "--max-model-len 1025 exceeds the model's length 1024 (yarn rope scaling by 4)"),
            std::string::npos)
      << longer.status().message();
}

TEST(HfOverrides, AYarnModelGeneratesPastItsOriginalContext) {
  const testing::ScratchDir dir;
  auto e = load(write_qwen3_config(dir), kYarn);
  ASSERT_TRUE(e.ok()) << e.status().message();
  GenerateRequest r;
  for (int i = 0; i < 300; ++i) r.prompt_token_ids.push_back((i * 37) % 256);
  r.params.temperature = 0;
  r.params.max_tokens = 8;
  r.params.ignore_eos = true;
  const testing::RunResult out = testing::run_all(**e, {r});
  ASSERT_TRUE(out.add_status[0].ok()) << out.add_status[0].message();
  ASSERT_TRUE(out.outputs[0].finished);
  ASSERT_TRUE(out.outputs[0].error.ok()) << out.outputs[0].error.message();
  EXPECT_EQ(out.outputs[0].num_generated_tokens, 8);
}

TEST(HfOverrides, NullSetsNullAndAnObjectReplacesTheWholeKey) {
  json c = {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 2.0}}}, {"sliding_window", 128}};
  ASSERT_TRUE(apply_hf_overrides(c, json::parse(R"({"sliding_window": null,
                                                   "rope_scaling": {"rope_type": "linear",
                                                                    "factor": 3.0}})"))
                  .ok());
  EXPECT_TRUE(c["sliding_window"].is_null());
  EXPECT_EQ(c["rope_scaling"], json::parse(R"({"rope_type": "linear", "factor": 3.0})"));
}

TEST(HfOverrides, MalformedOverridesFailTheLoad) {
  const testing::ScratchDir dir;
  const std::string path = write_qwen3_config(dir);
  auto bad_json = load(path, "{rope_scaling: 1}");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.status().message().find("--hf-overrides is not valid JSON"), std::string::npos)
      << bad_json.status().message();
  auto not_object = load(path, "[1, 2]");
  ASSERT_FALSE(not_object.ok());
  EXPECT_NE(not_object.status().message().find("--hf-overrides must be a JSON object"),
            std::string::npos);
  // An override the config parser refuses names the field, as a bad config.json would.
  auto bad_field = load(path, R"({"max_position_embeddings": "long"})");
  ASSERT_FALSE(bad_field.ok());
  EXPECT_NE(bad_field.status().message().find("max_position_embeddings"), std::string::npos);
}

}  // namespace
}  // namespace folio
