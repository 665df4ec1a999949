// Errors on bad tokenizer files come back as a Status naming the file and the problem.
#include <gtest/gtest.h>

#include "scratch_dir.h"
#include "tokenizer/tokenizer.h"

namespace folio {
namespace {

class BadInputTest : public ::testing::Test {
 protected:
  void write(const std::string& name, const std::string& text) { dir_.write(name, text); }
  Status load_status() {
    auto r = Tokenizer::load(dir_.str());
    EXPECT_FALSE(r.ok());
    return r.ok() ? Status() : r.status();
  }
  // A minimal valid byte-level tokenizer.json with `patch` merged in at the top level.
  std::string tokenizer_json(const nlohmann::json& patch) {
    nlohmann::json j = {
        {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}},
                   {"merges", {"a b"}}}},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
        {"decoder", {{"type", "ByteLevel"}}}};
    j.merge_patch(patch);
    return j.dump();
  }
  testing::ScratchDir dir_;
};

TEST_F(BadInputTest, MissingDirectoryOrFile) {
  auto r = Tokenizer::load(dir_.file("nope"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("tokenizer.json"), std::string::npos);
  Status st = load_status();  // the directory exists but holds nothing
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
}

TEST_F(BadInputTest, MalformedJson) {
  write("tokenizer.json", "{\"model\": {\"type\": ");
  Status st = load_status();
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("tokenizer.json"), std::string::npos) << st.message();
}

TEST_F(BadInputTest, MalformedConfig) {
  write("tokenizer.json", tokenizer_json(nlohmann::json::object()));
  write("tokenizer_config.json", "not json");
  Status st = load_status();
  EXPECT_NE(st.message().find("tokenizer_config.json"), std::string::npos) << st.message();
}

TEST_F(BadInputTest, UnsupportedModelAndSteps) {
  write("tokenizer.json", tokenizer_json({{"model", {{"type", "WordPiece"}}}}));
  Status st = load_status();
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("WordPiece"), std::string::npos) << st.message();
  write("tokenizer.json", tokenizer_json({{"normalizer", {{"type", "Precompiled"}}}}));
  st = load_status();
  EXPECT_NE(st.message().find("Precompiled"), std::string::npos) << st.message();
  write("tokenizer.json", tokenizer_json({{"decoder", {{"type", "WordPiece"}}}}));
  st = load_status();
  EXPECT_NE(st.message().find("decoder"), std::string::npos) << st.message();
}

TEST_F(BadInputTest, BadFields) {
  write("tokenizer.json", tokenizer_json({{"model", {{"merges", {"a c"}}}}}));
  Status st = load_status();
  EXPECT_NE(st.message().find("merges[0]"), std::string::npos) << st.message();
  write("tokenizer.json", tokenizer_json({{"model", {{"vocab", {{"a", "zero"}}}}}}));
  st = load_status();
  EXPECT_NE(st.message().find("vocab"), std::string::npos) << st.message();
  write("tokenizer.json",
        tokenizer_json({{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(("}}}}}}));
  st = load_status();
  EXPECT_NE(st.message().find("(("), std::string::npos) << st.message();
  // A field of the wrong JSON type deep inside must not throw.
  write("tokenizer.json", tokenizer_json({{"normalizer", {{"type", "Prepend"}, {"prepend", 5}}}}));
  st = load_status();
  EXPECT_FALSE(st.ok());
  write("tokenizer.json", tokenizer_json({{"added_tokens", 7}}));
  st = load_status();
  EXPECT_NE(st.message().find("added_tokens"), std::string::npos) << st.message();
  write("tokenizer.json", "[1, 2]");
  st = load_status();
  EXPECT_NE(st.message().find("not a JSON object"), std::string::npos) << st.message();
}

TEST_F(BadInputTest, MinimalTokenizerWorks) {
  write("tokenizer.json", tokenizer_json(nlohmann::json::object()));
  auto r = Tokenizer::load(dir_.str());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->encode("abba", false), (std::vector<int32_t>{2, 1, 0}));
  EXPECT_EQ(r->decode(std::vector<int32_t>{2, 1, 0}, false), "abba");
  EXPECT_FALSE(r->bos_id().has_value());
}

}  // namespace
}  // namespace folio
