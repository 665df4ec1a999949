// Randomized round trips (fixed seed, bounded size): random bytes and random Unicode through
// encode -> decode. Byte-level BPE must give back the input exactly, after the lossy UTF-8
// repair of invalid bytes and, for Qwen, NFC. Every decode must be valid UTF-8, with or without
// special tokens, and nothing may crash. Llama 2 (SentencePiece) round-trips text without
// added-token markers or a literal "▁" (those legitimately change spacing).
#include <random>

#include <gtest/gtest.h>
#include <utf8proc.h>

#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace folio {
namespace {

// An independent NFC reference straight from utf8proc.
std::string nfc(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out,
                                    static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  EXPECT_GE(n, 0);
  std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(std::max<utf8proc_ssize_t>(n, 0)));
  std::free(out);
  return r;
}

// Random bytes biased toward interesting material: ASCII, whitespace, UTF-8 lead and
// continuation bytes, and fragments of special tokens.
std::string random_bytes(std::mt19937& rng) {
  static const char* fragments[] = {"<|", "|>", "<s>", "</s>", "<|im_start|>", "<|eot_id|>",
                                    "'s", "\r\n", "  ", "\xE2\x96\x81", "<0x41>", "123"};
  std::string s;
  int n = static_cast<int>(rng() % 48);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 6) {
      case 0: s.push_back(static_cast<char>(rng() % 256)); break;
      case 1: s.push_back(static_cast<char>(0x80 + rng() % 0x40)); break;
      case 2: s.push_back(static_cast<char>(0xC2 + rng() % 0x33)); break;
      case 3: s.push_back(" \t\n\r"[rng() % 4]); break;
      case 4: s += fragments[rng() % (sizeof(fragments) / sizeof(fragments[0]))]; break;
      default: s.push_back(static_cast<char>(0x20 + rng() % 0x5F)); break;
    }
  }
  return s;
}

// Random valid UTF-8 over all planes (no surrogates), with combining marks and spaces.
std::string random_unicode(std::mt19937& rng) {
  std::string s;
  int n = static_cast<int>(rng() % 32);
  for (int i = 0; i < n; ++i) {
    char32_t cp = 0;
    switch (rng() % 5) {
      case 0: cp = 0x20 + rng() % 0x60; break;
      case 1: cp = 0x300 + rng() % 0x70; break;  // combining marks: NFC at work
      case 2: cp = 0xA0 + rng() % 0x3000; break;
      case 3: cp = 0x4E00 + rng() % 0x5000; break;
      default: cp = rng() % 0x110000; break;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
    append_codepoint(s, cp);
  }
  return s;
}

void fuzz(const Tokenizer& tok, bool nfc_applies, bool sentencepiece) {
  std::mt19937 rng(20240607);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string input = (iter % 2) ? random_bytes(rng) : random_unicode(rng);
    std::vector<int32_t> ids = tok.encode(input, true);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
    std::vector<int32_t> plain = tok.encode(input, false);
    std::string decoded = tok.decode(plain, false);
    ASSERT_TRUE(is_valid_utf8(decoded));
    ASSERT_TRUE(is_valid_utf8(tok.decode(ids, true)));
    std::string expected = utf8_lossy(input);
    if (nfc_applies) expected = nfc(expected);
    bool comparable = !sentencepiece || (expected.find('<') == std::string::npos &&
                                         expected.find("\xE2\x96\x81") == std::string::npos);
    if (comparable) {
      ASSERT_EQ(decoded, expected) << "iteration " << iter << " input "
                                   << nlohmann::json(expected).dump();
    }
  }
}

TEST(RoundTripFuzz, Llama3) {
  FOLIO_REQUIRE_TOKENIZER(tok, "llama3");
  fuzz(*tok, false, false);
}

TEST(RoundTripFuzz, Qwen3) {
  FOLIO_REQUIRE_TOKENIZER(tok, "qwen3");
  fuzz(*tok, true, false);
}

TEST(RoundTripFuzz, Llama2) {
  FOLIO_REQUIRE_TOKENIZER(tok, "llama2");
  fuzz(*tok, false, true);
}

TEST(Utf8, LossyMatchesRustRules) {
  // One U+FFFD per maximal invalid subpart (Unicode "best practice", what Rust implements).
  const std::string r(kReplacementChar);
  EXPECT_EQ(utf8_lossy("a\xFF" "b"), "a" + r + "b");
  EXPECT_EQ(utf8_lossy("\xE2\x82"), r);                 // truncated: one
  EXPECT_EQ(utf8_lossy("\xE2\x82" "a"), r + "a");
  EXPECT_EQ(utf8_lossy("\xF0\x80\x80"), r + r + r);     // F0 80: overlong, 80 is not allowed
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), r + r + r);     // surrogate
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), r + r);
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x41"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("\xE0\x80"), 0u);  // E0 80 can never complete
  EXPECT_EQ(incomplete_utf8_tail("\xC3"), 1u);
}

}  // namespace
}  // namespace folio
