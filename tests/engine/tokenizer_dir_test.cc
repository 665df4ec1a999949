// --tokenizer DIR (LoadOptions::tokenizer_dir, vLLM's flag): the tokenizer comes from DIR instead
// of the model folder, e.g. a real tokenizer beside dummy weights; a DIR without tokenizer.json is
// an error, not a silent run on token ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/file_util.h"
#include "dummy_configs.h"
#include "engine/engine_factory.h"
#include "engine_runner.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// testing::tiny_llama3_vocab_config() in a temporary file.
std::string write_config() {
  const json c = testing::tiny_llama3_vocab_config();
  const fs::path path =
      fs::temp_directory_path() /
      ("folio_tokdir_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json");
  std::ofstream(path) << c.dump();
  return path.string();
}

Result<std::unique_ptr<EngineCore>> load(const std::string& config, const std::string& tok_dir) {
  LoadOptions o;
  o.device = "cpu";
  o.load_format = "dummy";
  o.model_config_file = config;
  o.tokenizer_dir = tok_dir;
  EngineConfig c;
  c.kv_cache_memory_gib = 0.05;
  c.sched.max_model_len = 0;  // the model's
  return load_engine(o, c);
}

TEST(TokenizerDir, DummyWeightsWithARealTokenizer) {
  const std::string dir = std::string(FOLIO_SOURCE_DIR) + "/data/tokenizers/llama3";
  if (!file_exists(dir + "/tokenizer.json"))
    GTEST_SKIP() << dir << " is missing: run scripts/fetch_tokenizers.sh";
  const std::string config = write_config();
  auto none = load(config, "");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ((*none)->tokenizer(), nullptr);  // dummy weights alone: token ids only
  auto e = load(config, dir);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_NE((*e)->tokenizer(), nullptr);
  EXPECT_EQ((*e)->tokenizer()->encode("Hello", false), std::vector<int32_t>({9906}));
  fs::remove(config);
}

TEST(TokenizerDir, AFolderWithoutTokenizerJsonIsAnError) {
  const std::string config = write_config();
  const fs::path empty = fs::temp_directory_path() / "folio_tokdir_empty";
  fs::create_directories(empty);
  auto e = load(config, empty.string());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "--tokenizer " + empty.string() + ": no tokenizer.json there");
  fs::remove_all(empty);
  fs::remove(config);
}

}  // namespace
}  // namespace folio
