// The FOLIO_CASCADE_* switches (model/cascade_switches.h): defaults, each value, the
// tensor-parallel default, and a clear error for every value out of its set.
#include "model/cascade_switches.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace folio {
namespace {

// An environment of these variables only, over a 16-bit cache unless `kv` says otherwise.
Result<CascadeSwitches> read(int world, const std::map<std::string, std::string>& env,
                             KvCacheDtype kv = KvCacheDtype::kAuto) {
  return read_cascade_switches(world, kv, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(CascadeSwitches, DefaultsAreOnForOneGpuAndOffUnderTensorParallelism) {
  auto one = read(1, {});
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_TRUE(one->requested);
  EXPECT_TRUE(one->wide);
  EXPECT_FALSE(one->pack_one_row_only);
  EXPECT_TRUE(one->graphs);
  EXPECT_FALSE(one->wgmma_stages.has_value());
  EXPECT_DOUBLE_EQ(one->min_saving, 0.3);
  auto fp8 = read(1, {}, KvCacheDtype::kFp8E4m3);  // an fp8 cache asks a larger saving
  ASSERT_TRUE(fp8.ok());
  EXPECT_DOUBLE_EQ(fp8->min_saving, 0.6);
  fp8 = read(1, {{"FOLIO_CASCADE_MIN_SAVING", "0.25"}}, KvCacheDtype::kFp8E4m3);
  ASSERT_TRUE(fp8.ok());
  EXPECT_DOUBLE_EQ(fp8->min_saving, 0.25);
  auto tp = read(2, {});
  ASSERT_TRUE(tp.ok());
  EXPECT_FALSE(tp->requested);  // opt-in until it has run on 2 GPUs
  auto tp_on = read(2, {{"FOLIO_CASCADE_ATTENTION", "1"}});
  ASSERT_TRUE(tp_on.ok());
  EXPECT_TRUE(tp_on->requested);
  auto off = read(1, {{"FOLIO_CASCADE_ATTENTION", "0"}});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->requested);
}

TEST(CascadeSwitches, EachSwitchTakesItsValues) {
  auto s = read(1, {{"FOLIO_CASCADE_WIDE", "0"},
                    {"FOLIO_CASCADE_PACKS", "one-row"},
                    {"FOLIO_CASCADE_GRAPHS", "0"},
                    {"FOLIO_CASCADE_STAGES", "3"},
                    {"FOLIO_CASCADE_MIN_SAVING", "0"}});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_FALSE(s->wide);
  EXPECT_TRUE(s->pack_one_row_only);
  EXPECT_FALSE(s->graphs);
  EXPECT_EQ(s->wgmma_stages, 3);
  EXPECT_DOUBLE_EQ(s->min_saving, 0.0);
  s = read(1, {{"FOLIO_CASCADE_WIDE", "1"},
               {"FOLIO_CASCADE_PACKS", "all"},
               {"FOLIO_CASCADE_GRAPHS", "1"},
               {"FOLIO_CASCADE_STAGES", "2"},
               {"FOLIO_CASCADE_MIN_SAVING", "0.5"}});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE(s->wide);
  EXPECT_FALSE(s->pack_one_row_only);
  EXPECT_TRUE(s->graphs);
  EXPECT_EQ(s->wgmma_stages, 2);
  EXPECT_DOUBLE_EQ(s->min_saving, 0.5);
  // 4 stages over an fp8 cache only.
  s = read(1, {{"FOLIO_CASCADE_STAGES", "4"}}, KvCacheDtype::kFp8E4m3);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->wgmma_stages, 4);
  s = read(1, {{"FOLIO_CASCADE_STAGES", "4"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("fp8"), std::string::npos) << s.status().message();
}

TEST(CascadeSwitches, ValuesOutOfTheirSetAreErrorsNamingTheVariable) {
  const std::map<std::string, std::string> bad[] = {
      {{"FOLIO_CASCADE_ATTENTION", "yes"}},   {{"FOLIO_CASCADE_WIDE", "2"}},
      {{"FOLIO_CASCADE_PACKS", "some"}},      {{"FOLIO_CASCADE_STAGES", "4"}},
      {{"FOLIO_CASCADE_GRAPHS", "on"}},       {{"FOLIO_CASCADE_MIN_SAVING", "1"}},
      {{"FOLIO_CASCADE_MIN_SAVING", "-0.1"}}, {{"FOLIO_CASCADE_MIN_SAVING", "0.3x"}},
      {{"FOLIO_CASCADE_MIN_SAVING", ""}},
  };
  for (const auto& env : bad) {
    const std::string& var = env.begin()->first;
    auto s = read(1, env);
    ASSERT_FALSE(s.ok()) << var << "=" << env.begin()->second;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(var + "=" + env.begin()->second + ": expected"),
              std::string::npos)
        << s.status().message();
  }
}

}  // namespace
}  // namespace folio
