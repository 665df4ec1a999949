// Encode throughput on a few MB of text (the golden texts repeated), printed for the record.
// The floor asserted is far below the measured figure so that a loaded CI machine does not
// flake, but a pathological slowdown (e.g. quadratic merging or a lost cache) still fails.
#include <chrono>

#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace folio {
namespace {

void measure(const std::string& name, size_t target_bytes, double floor_tokens_per_s) {
  FOLIO_REQUIRE_TOKENIZER(tok, name);
  // `expected` is the decode HF gives (the goldens' `decoded`: NFC for Qwen).
  std::string text, expected;
  auto lines = testing::load_goldens(name);
  while (text.size() < target_bytes) {
    for (const auto& g : lines) {
      text += g.text + "\n";
      expected += g.decoded + "\n";
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = tok->encode(text, false);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double tps = static_cast<double>(ids.size()) / secs;
  std::printf("[ encode ] %s: %.1f MB, %zu tokens in %.3f s: %.2f M tokens/s, %.1f MB/s\n",
              name.c_str(), text.size() / 1e6, ids.size(), secs, tps / 1e6,
              text.size() / 1e6 / secs);
  EXPECT_TRUE(tok->decode(ids, false) == expected);  // no EXPECT_EQ: its diff of MBs is huge
#ifdef NDEBUG
  EXPECT_GT(tps, floor_tokens_per_s);
#else
  (void)floor_tokens_per_s;
#endif
}

TEST(EncodeThroughput, Llama3) { measure("llama3", 4 << 20, 3e5); }
TEST(EncodeThroughput, Qwen3) { measure("qwen3", 2 << 20, 2e5); }

}  // namespace
}  // namespace folio
