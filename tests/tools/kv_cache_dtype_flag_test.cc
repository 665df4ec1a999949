// --kv-cache-dtype as users type it: vLLM's names map to the engine's KvCacheDtype, anything
// else is a one-line error with exit code 2, and `folio generate --kv-cache-dtype fp8` runs the
// model end to end (the CPU reference's fp8 cache) and writes valid JSONL.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tools/engine_flags.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Result<EngineConfig> config_for(const std::string& value) {
  tools::EngineFlags f;
  f.kv_cache_dtype = value;
  return tools::to_engine_config(f);
}

TEST(KvCacheDtypeFlag, VllmNamesMapToTheEnum) {
  EXPECT_EQ(tools::EngineFlags{}.kv_cache_dtype, "auto");
  for (const auto& [name, want] : std::vector<std::pair<std::string, KvCacheDtype>>{
           {"auto", KvCacheDtype::kAuto},
           {"fp8", KvCacheDtype::kFp8E4m3},
           {"fp8_e4m3", KvCacheDtype::kFp8E4m3}}) {
    auto c = config_for(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().to_string();
    EXPECT_EQ(c->kv_cache_dtype, want) << name;
  }
  EXPECT_EQ(EngineConfig{}.kv_cache_dtype, KvCacheDtype::kAuto);
}

TEST(KvCacheDtypeFlag, OtherNamesAreErrors) {
  auto e5m2 = config_for("fp8_e5m2");
  ASSERT_FALSE(e5m2.ok());
  EXPECT_EQ(e5m2.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(e5m2.status().message().find("fp8_e5m2 is not supported"), std::string::npos);
  for (const char* bad : {"int8", "FP8", "", "bfloat16"}) {
    auto c = config_for(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(KvCacheDtypeFlag, ParsedFromTheCommandLine) {
  CLI::App app;
  tools::EngineFlags f;
  tools::add_engine_flags(&app, f);
  app.parse("--kv-cache-dtype fp8", /*program_name_included=*/false);
  EXPECT_EQ(f.kv_cache_dtype, "fp8");
}

struct FolioRun {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `folio generate ARGS` with `input` on stdin (bounded by coreutils timeout).
FolioRun run_generate(const std::string& args, const std::string& input) {
  const fs::path dir = fs::temp_directory_path();
  const std::string tag = std::to_string(getpid());
  const fs::path in = dir / ("folio_kvd_in_" + tag), out = dir / ("folio_kvd_out_" + tag),
                 err = dir / ("folio_kvd_err_" + tag);
  std::ofstream(in) << input;
  const std::string cmd = "timeout 120 " + std::string(FOLIO_BINARY) + " generate " + args +
                          " < " + in.string() + " > " + out.string() + " 2> " + err.string();
  const int status = std::system(cmd.c_str());
  FolioRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

const std::string kFixture = std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa";

TEST(KvCacheDtypeFlag, BadValueIsOneLineErrorAndExitCode2) {
  for (const auto& [value, message] : std::vector<std::pair<std::string, std::string>>{
           {"int8", "--kv-cache-dtype must be auto, fp8 or fp8_e4m3, got 'int8'"},
           {"fp8_e5m2", "--kv-cache-dtype fp8_e5m2 is not supported"}}) {
    const FolioRun r = run_generate("--model " + kFixture + " --device cpu --kv-cache-dtype " + value,
                               "{\"prompt_token_ids\": [1, 2], \"max_tokens\": 1}\n");
    EXPECT_EQ(r.exit_code, 2) << value << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("folio generate: " + message), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// models/tiny_llama3 (the `make run` model, real Llama 3 tokenizer): a text prompt and a token
// prompt, greedy, through the fp8 cache; every line is a complete result.
TEST(KvCacheDtypeFlag, GenerateWithFp8WritesValidJsonl) {
  const std::string model = std::string(FOLIO_SOURCE_DIR) + "/models/tiny_llama3";
  if (!fs::exists(model + "/model.safetensors")) GTEST_SKIP() << model << " missing";
  const fs::path stats =
      fs::temp_directory_path() / ("folio_kvd_stats_" + std::to_string(getpid()) + ".json");
  const FolioRun r = run_generate(
      "--model " + model + " --device cpu --kv-cache-dtype fp8 --max-model-len 256 --stats-json " +
          stats.string(),
      "{\"prompt\": \"Hello, my name is\", \"max_tokens\": 8, \"temperature\": 0, "
      "\"ignore_eos\": true}\n"
      "{\"prompt_token_ids\": [128000, 9906, 1917], \"max_tokens\": 5, \"temperature\": 0, "
      "\"ignore_eos\": true, \"logprobs\": 1}\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(json::parse(line));  // throws (fails) on bad JSON
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (int i = 0; i < 2; ++i) {
    const json& l = lines[i];
    ASSERT_FALSE(l.contains("error")) << l.dump();
    EXPECT_EQ(l["index"], i);
    EXPECT_FALSE(l["prompt_token_ids"].empty());
    const json& o = l["outputs"][0];
    EXPECT_EQ(o["token_ids"].size(), i == 0 ? 8u : 5u);
    EXPECT_TRUE(o["text"].is_string());
    EXPECT_EQ(o["finish_reason"], "length");
  }
  EXPECT_EQ(lines[1]["outputs"][0]["logprobs"].size(), 5u);
  EXPECT_EQ(json::parse(slurp(stats))["kv_cache_dtype"], "fp8_e4m3");
  fs::remove(stats);
}

}  // namespace
}  // namespace folio
