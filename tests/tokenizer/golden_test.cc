// Byte-exactness against HF `tokenizers`: every golden line's ids (with and without special
// tokens) and both decodes must match exactly.
#include <thread>

#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace folio {
namespace {

class GoldenTest : public ::testing::TestWithParam<std::string> {};

std::string show(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

TEST_P(GoldenTest, EncodeAndDecodeMatchHuggingFace) {
  FOLIO_REQUIRE_TOKENIZER(tok, GetParam());
  auto lines = testing::load_goldens(GetParam());
  ASSERT_GT(lines.size(), 300u);
  int failures = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& g = lines[i];
    auto ids = tok->encode(g.text, false);
    auto ids_special = tok->encode(g.text, true);
    std::string dec = tok->decode(g.ids, false);
    std::string dec_skip = tok->decode(g.ids, true);
    bool ok = ids == g.ids && ids_special == g.ids_with_special && dec == g.decoded &&
              dec_skip == g.decoded_skip_special;
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << GetParam() << " line " << i + 1 << " text=" << nlohmann::json(g.text).dump()
                    << "\n  ids      " << show(ids) << "\n  expected " << show(g.ids)
                    << "\n  with special " << show(ids_special) << " expected "
                    << show(g.ids_with_special) << "\n  decoded " << nlohmann::json(dec).dump()
                    << " expected " << nlohmann::json(g.decoded).dump() << "\n  skip "
                    << nlohmann::json(dec_skip).dump() << " expected "
                    << nlohmann::json(g.decoded_skip_special).dump();
    }
  }
  EXPECT_EQ(failures, 0) << "lines differing from the goldens";
}

// The thread contract: one Tokenizer shared by many threads (the word cache is the only shared
// mutable state). Each thread encodes every golden line in a different order.
TEST_P(GoldenTest, ConcurrentEncodesMatch) {
  FOLIO_REQUIRE_TOKENIZER(tok, GetParam());
  auto lines = testing::load_goldens(GetParam());
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < lines.size(); ++k) {
        size_t i = (k * (2 * t + 1) + static_cast<size_t>(t) * 97) % lines.size();
        if (tok->encode(lines[i].text, true) != lines[i].ids_with_special) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GoldenTest, ::testing::Values("llama3", "qwen3", "llama2"));

TEST(TokenizerTest, SpecialTokenAccessors) {
  FOLIO_REQUIRE_TOKENIZER(l3, "llama3");
  EXPECT_EQ(l3->bos_token(), "<|begin_of_text|>");
  EXPECT_EQ(l3->bos_id(), 128000);
  EXPECT_EQ(l3->eos_id(), 128001);
  EXPECT_EQ(l3->vocab_size(), 128256);
  EXPECT_TRUE(l3->is_special(128009));
  EXPECT_FALSE(l3->is_special(9906));
  EXPECT_EQ(l3->id_to_token(22691), "\xC4\xA0Hello");  // "ĠHello"
  EXPECT_EQ(l3->token_to_id("\xC4\xA0Hello"), 22691);
  EXPECT_EQ(l3->token_to_id("<|eot_id|>"), 128009);
  EXPECT_FALSE(l3->token_to_id("no such token").has_value());
  EXPECT_EQ(l3->id_to_token(-1), "");
  EXPECT_EQ(l3->id_to_token(1 << 24), "");

  FOLIO_REQUIRE_TOKENIZER(l2, "llama2");
  EXPECT_EQ(l2->bos_id(), 1);
  EXPECT_EQ(l2->eos_id(), 2);
  EXPECT_EQ(l2->add_bos_token(), true);
  EXPECT_EQ(l2->vocab_size(), 32000);
  EXPECT_EQ(l2->token_to_id("<0x0A>"), 13);

  FOLIO_REQUIRE_TOKENIZER(q3, "qwen3");
  EXPECT_FALSE(q3->bos_id().has_value());
  EXPECT_EQ(q3->eos_token(), "<|im_end|>");
  EXPECT_EQ(q3->vocab_size(), 151669);
  auto think = q3->token_to_id("<think>");
  ASSERT_TRUE(think.has_value());
  EXPECT_FALSE(q3->is_special(*think));  // added but not special: kept by skip_special_tokens
  EXPECT_EQ(q3->decode(std::vector<int32_t>{*think}, true), "<think>");
}

}  // namespace
}  // namespace folio
