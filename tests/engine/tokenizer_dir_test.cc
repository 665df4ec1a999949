// --tokenizer DIR (LoadOptions::tokenizer_dir, vLLM's flag): the tokenizer comes from DIR instead
// of the model folder, e.g. a real tokenizer beside dummy weights; a DIR without tokenizer.json is
// an error, not a silent run on token ids.
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "dummy_configs.h"
#include "engine/engine_factory.h"
#include "engine_runner.h"
#include "scratch_dir.h"

namespace folio {
namespace {

// testing::tiny_llama3_vocab_config() written into `dir`.
std::string write_config(const testing::ScratchDir& dir) {
  return dir.write("config.json", testing::tiny_llama3_vocab_config().dump());
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
  const std::string tok = std::string(FOLIO_SOURCE_DIR) + "/data/tokenizers/llama3";
  if (!file_exists(tok + "/tokenizer.json"))
    GTEST_SKIP() << tok << " is missing: run scripts/fetch_tokenizers.sh";
  const testing::ScratchDir dir;
  const std::string config = write_config(dir);
  auto none = load(config, "");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ((*none)->tokenizer(), nullptr);  // dummy weights alone: token ids only
  auto e = load(config, tok);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_NE((*e)->tokenizer(), nullptr);
  EXPECT_EQ((*e)->tokenizer()->encode("Hello", false), std::vector<int32_t>({9906}));
}

TEST(TokenizerDir, AFolderWithoutTokenizerJsonIsAnError) {
  const testing::ScratchDir dir;
  const std::string config = write_config(dir);
  const testing::ScratchDir empty;
  auto e = load(config, empty.str());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "--tokenizer " + empty.str() + ": no tokenizer.json there");
}

}  // namespace
}  // namespace folio
