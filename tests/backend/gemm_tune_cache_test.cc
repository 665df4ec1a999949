#include "backend/gemm_tune_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace folio {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json"))
      .string();
}

GemmTuneEntry entry(int n, bool acc, uint64_t seed) {
  GemmTuneEntry e;
  e.key = {"NVIDIA H200", 120804, "bf16", n, 4096, acc};
  for (size_t i = 0; i < e.algo.size(); ++i) e.algo[i] = seed * 0x9e3779b97f4a7c15ull + i;
  e.config = "algo 66 tile 201";
  e.us = 1131.5;
  e.first_us = 1186.8;
  return e;
}

TEST(GemmTuneCache, MissingFileIsEmptyAndPutWritesWhatLoadReadsBack) {
  const std::string path = temp_path("tune");
  std::filesystem::remove(path);
  auto c = GemmTuneCache::load(path);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->entries().empty());
  EXPECT_FALSE(c->find(entry(6144, false, 1).key));
  ASSERT_TRUE(c->put(entry(6144, false, 1)).ok());
  ASSERT_TRUE(c->put(entry(4096, true, ~0ull)).ok());  // every bit of the descriptor survives
  ASSERT_TRUE(c->put(entry(6144, false, 3)).ok());     // replaces the first
  auto back = GemmTuneCache::load(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->entries().size(), 2u);
  const auto a = back->find(entry(6144, false, 0).key);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->algo, entry(6144, false, 3).algo);
  EXPECT_EQ(a->config, "algo 66 tile 201");
  EXPECT_DOUBLE_EQ(a->us, 1131.5);
  const auto b = back->find(entry(4096, true, 0).key);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->algo, entry(4096, true, ~0ull).algo);
  // Another device, library, dtype or accumulate flag is another entry.
  GemmTuneKey other = entry(6144, false, 0).key;
  other.library = 120900;
  EXPECT_FALSE(back->find(other));
  other = entry(6144, true, 0).key;
  EXPECT_FALSE(back->find(other));
  for (const auto& f :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_EQ(f.path().string().rfind(path + ".tmp", 0), std::string::npos) << f.path();
  std::filesystem::remove(path);
}

// Tensor-parallel ranks are threads that each hold a cache of the same file and may save at
// once: every write must leave a whole file that loads.
TEST(GemmTuneCache, ConcurrentWritersLeaveAWholeFile) {
  const std::string path = temp_path("tune-race");
  std::filesystem::remove(path);
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&, t] {
      auto c = GemmTuneCache::load(path);
      if (!c.ok()) {
        ++failures;
        return;
      }
      for (int i = 0; i < 50; ++i)
        if (!c->put(entry(1000 * t + i, false, static_cast<uint64_t>(i))).ok()) ++failures;
    });
  for (auto& w : writers) w.join();
  EXPECT_EQ(failures.load(), 0);
  auto back = GemmTuneCache::load(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  // The last writer's 50 entries (plus whatever it had loaded) survive whole.
  EXPECT_GE(back->entries().size(), 50u);
  std::filesystem::remove(path);
}

TEST(GemmTuneCache, MalformedFilesAreErrorsNamingTheFile) {
  const std::string path = temp_path("tune-bad");
  const char* bad[] = {
      "not json",
      R"({"version": 2, "entries": []})",
      R"({"version": 1})",
      R"({"version": 1, "entries": [{"device": "x", "library": 1, "dtype": "bf16", "n": 1,
          "k": 1, "accumulate": false, "algo": "abc"}]})",
      R"({"version": 1, "entries": [{"device": "x", "library": 1, "dtype": "bf16", "n": 1}]})",
  };
  for (const char* text : bad) {
    std::ofstream(path) << text;
    auto c = GemmTuneCache::load(path);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(c.status().message().find(path), std::string::npos) << c.status().to_string();
  }
  std::filesystem::remove(path);
  EXPECT_FALSE(GemmTuneCache::load("").ok());
}

}  // namespace
}  // namespace folio
