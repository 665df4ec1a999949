// The SkinnyFlow rule (model/skinny_flow_policy.h): the measured models on each side of the
// size limit, the forcing values, and a malformed value named in the error.
#include "model/skinny_flow_policy.h"

#include <gtest/gtest.h>

namespace folio {
namespace {

ModelConfig shape(int hidden, int intermediate, int world = 1) {
  ModelConfig c;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate / world;  // the rank's share, as rank_config gives it
  return c;
}

bool enabled(const ModelConfig& c, const char* env = nullptr) {
  auto r = skinny_flow_enabled(c, env);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() && *r;
}

TEST(SkinnyFlowPolicy, SmallProductsTakeTheFlowLargeOnesThePdlWait) {
  EXPECT_TRUE(enabled(shape(3072, 8192)));       // Llama-3.2-3B, one GPU: 96 MiB
  EXPECT_TRUE(enabled(shape(4096, 14336, 2)));   // Llama-3-8B at -tp 2: 112 MiB a rank
  EXPECT_TRUE(enabled(shape(4096, 14336, 4)));   // at -tp 4: 56 MiB
  EXPECT_FALSE(enabled(shape(4096, 14336)));     // Llama-3-8B, one GPU: 224 MiB
  EXPECT_FALSE(enabled(shape(8192, 28672, 2)));  // Llama-3-70B at -tp 2: 448 MiB
  EXPECT_FALSE(enabled(shape(3584, 18944)));     // Qwen2.5-7B, one GPU: 259 MiB
  EXPECT_TRUE(enabled(shape(8192, 28672, 8)));   // Llama-3-70B at -tp 8: 112 MiB
  EXPECT_TRUE(enabled(shape(4096, 8192)));       // exactly 128 MiB
  EXPECT_FALSE(enabled(shape(4096, 8200)));      // just past it
}

TEST(SkinnyFlowPolicy, TheVariableForcesEitherWay) {
  EXPECT_FALSE(enabled(shape(3072, 8192), "0"));
  EXPECT_TRUE(enabled(shape(8192, 28672), "1"));
  EXPECT_TRUE(enabled(shape(8192, 28672), "tp"));
}

TEST(SkinnyFlowPolicy, AMalformedValueIsAnErrorNamingIt) {
  for (const char* bad : {"", "yes", "2", "on"}) {
    auto r = skinny_flow_enabled(shape(3072, 8192), bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().to_string().find(std::string("FOLIO_SKINNY_FLOW=") + bad),
              std::string::npos)
        << r.status().to_string();
  }
}

}  // namespace
}  // namespace folio
