// Streaming decode: pieces are valid UTF-8 and concatenate to exactly Tokenizer::decode, on the
// golden texts, on random id sequences (which produce invalid byte runs and cut characters), and
// on hand-made cases whose expected pieces are known.
#include <random>

#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace folio {
namespace {

// Streams `ids`; checks each piece is valid UTF-8; returns the concatenation.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                   std::vector<std::string>* pieces = nullptr) {
  IncrementalDetokenizer d(tok, skip);
  std::string all;
  for (size_t i = 0; i <= ids.size(); ++i) {
    std::string p = i < ids.size() ? d.step(ids[i]) : d.finish();
    EXPECT_TRUE(is_valid_utf8(p)) << "piece " << i << " is not valid UTF-8";
    if (pieces) pieces->push_back(p);
    all += p;
  }
  return all;
}

class StreamingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamingTest, GoldenLinesConcatenateToDecode) {
  FOLIO_REQUIRE_TOKENIZER(tok, GetParam());
  for (const auto& g : testing::load_goldens(GetParam())) {
    for (bool skip : {false, true}) {
      for (const auto* ids : {&g.ids, &g.ids_with_special}) {
        ASSERT_EQ(stream(*tok, *ids, skip), tok->decode(*ids, skip))
            << "text " << nlohmann::json(g.text).dump() << " skip=" << skip;
      }
    }
    EXPECT_EQ(stream(*tok, g.ids, false), g.decoded);
    EXPECT_EQ(stream(*tok, g.ids, true), g.decoded_skip_special);
  }
}

TEST_P(StreamingTest, RandomIdSequencesConcatenateToDecode) {
  FOLIO_REQUIRE_TOKENIZER(tok, GetParam());
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any_id(-5, tok->vocab_size() + 5);
  std::uniform_int_distribution<int32_t> low_id(0, 600);  // byte tokens, byte-fallback, specials
  std::uniform_int_distribution<int> len(0, 40);
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<int32_t> ids(static_cast<size_t>(len(rng)));
    for (int32_t& id : ids) id = (rng() % 2) ? any_id(rng) : low_id(rng);
    for (bool skip : {false, true}) {
      std::string expected = tok->decode(ids, skip);
      ASSERT_TRUE(is_valid_utf8(expected));
      ASSERT_EQ(stream(*tok, ids, skip), expected) << "iteration " << iter;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, StreamingTest, ::testing::Values("llama3", "qwen3", "llama2"));

TEST(StreamingCases, ByteLevelHoldsIncompleteCharacter) {
  FOLIO_REQUIRE_TOKENIZER(tok, "llama3");
  // "😀" is F0 9F 98 80; feed it byte by byte via the single-byte tokens.
  std::vector<int32_t> ids;
  for (char c : std::string("\xF0\x9F\x98\x80!")) {
    ids.push_back(*tok->token_to_id(bytes_to_byte_level(std::string(1, c))));
  }
  std::vector<std::string> pieces;
  EXPECT_EQ(stream(*tok, ids, false, &pieces), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "", "", "\xF0\x9F\x98\x80", "!", ""}));
  // A cut character at the end becomes one U+FFFD, only at finish().
  pieces.clear();
  EXPECT_EQ(stream(*tok, {ids[0], ids[1]}, false, &pieces), std::string(kReplacementChar));
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "", std::string(kReplacementChar)}));
}

TEST(StreamingCases, SentencePieceByteFallbackAndLeadingSpace) {
  FOLIO_REQUIRE_TOKENIZER(tok, "llama2");
  auto id = [&](const char* t) { return *tok->token_to_id(t); };
  // "▁Hello" first: the decoder's Strip removes the leading space of the whole text only.
  std::vector<std::string> pieces;
  std::vector<int32_t> ids = {id("\xE2\x96\x81Hello"), id("\xE2\x96\x81world")};
  EXPECT_EQ(stream(*tok, ids, false, &pieces), "Hello world");
  EXPECT_EQ(pieces, (std::vector<std::string>{"Hello", " world", ""}));
  // A byte run E4 B8 AD ("中") is held until the run ends.
  pieces.clear();
  ids = {id("<0xE4>"), id("<0xB8>"), id("<0xAD>"), id("\xE2\x96\x81x")};
  EXPECT_EQ(stream(*tok, ids, false, &pieces), "\xE4\xB8\xAD x");
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "", "", "\xE4\xB8\xAD x", ""}));
  // An invalid run becomes one U+FFFD per byte, as HF's ByteFallback decoder does.
  ids = {id("<0xE4>"), id("<0xB8>"), id("a")};
  std::string two_fffd = std::string(kReplacementChar) + std::string(kReplacementChar);
  EXPECT_EQ(tok->decode(ids, false), two_fffd + "a");
  EXPECT_EQ(stream(*tok, ids, false), two_fffd + "a");
}

TEST(StreamingCases, PrimeKeepsTheSpaceOfTheFirstGeneratedWord) {
  FOLIO_REQUIRE_TOKENIZER(tok, "llama2");
  auto prompt = tok->encode("Say hi:", true);
  auto out = tok->encode(" Hello there", false);
  IncrementalDetokenizer d(*tok, true);
  d.prime(prompt);
  std::string text;
  for (int32_t id : out) text += d.step(id);
  text += d.finish();
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), out.begin(), out.end());
  EXPECT_EQ(tok->decode(prompt, true) + text, tok->decode(all, true));
  EXPECT_EQ(text.substr(0, 1), " ");
}

}  // namespace
}  // namespace folio
