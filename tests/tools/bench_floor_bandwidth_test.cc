// `folio bench latency`'s bandwidth for the floor (resolve_floor_bandwidth): the flag when given,
// else the engine's own device measured (the CPU engine here: the host's copy rate), else the
// H100 default with the reason, never an error.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "engine/engine_factory.h"
#include "tools/bench_latency.h"

namespace folio::tools {
namespace {

const std::string kModel = std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa";

// An executor that runs nothing and cannot measure (the Executor default).
class NoRateExecutor final : public Executor {
 public:
  std::string device_name() const override { return "nowhere"; }
  int vocab_size() const override { return 1; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  Status execute(const ForwardBatch&, std::vector<float>&) override { return Status(); }
  void copy_blocks(std::span<const BlockCopy>) override {}
  void swap_out(std::span<const BlockCopy>) override {}
  void swap_in(std::span<const BlockCopy>) override {}

 private:
  KvCacheShape kv_;
};

TEST(FloorBandwidth, TheFlagWins) {
  const NoRateExecutor ex;
  const FloorBandwidth b = resolve_floor_bandwidth(ex, 4270);
  EXPECT_EQ(b.gbps, 4270);
  EXPECT_EQ(b.source, "flag");
  EXPECT_TRUE(b.note.empty());
}

TEST(FloorBandwidth, MeasuresTheEnginesDevice) {
  LoadOptions o;
  o.model_dir = kModel;
  auto engine = load_engine(o, EngineConfig{});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const FloorBandwidth b = resolve_floor_bandwidth((*engine)->executor(), 0);
  EXPECT_EQ(b.source, "measured") << b.note;
  EXPECT_GT(b.gbps, 0.1);     // any machine's memcpy
  EXPECT_LT(b.gbps, 100000);  // and no cache-sized fantasy
}

TEST(FloorBandwidth, FallsBackWithTheReason) {
  const NoRateExecutor ex;
  const FloorBandwidth b = resolve_floor_bandwidth(ex, 0);
  EXPECT_EQ(b.gbps, kDefaultBandwidthGbps);
  EXPECT_EQ(b.source, "default");
  EXPECT_NE(b.note.find("nowhere"), std::string::npos) << b.note;
}

}  // namespace
}  // namespace folio::tools
