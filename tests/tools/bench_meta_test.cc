// What every benchmark JSON carries to trace its figure: the commit, the date, the command and
// the FOLIO_* switches of the environment it ran under.
#include "tools/bench_meta.h"

#include <cstdlib>
#include <regex>

#include <gtest/gtest.h>

namespace folio::tools {
namespace {

TEST(BenchMeta, RecordsTheFolioEnvironmentOnly) {
  setenv("FOLIO_META_TEST_SWITCH", "longest-first", 1);
  setenv("NOT_FOLIO_META_TEST", "x", 1);
  const nlohmann::json j = run_metadata("test-gpu");
  unsetenv("FOLIO_META_TEST_SWITCH");
  unsetenv("NOT_FOLIO_META_TEST");
  EXPECT_EQ(j["gpu_name"], "test-gpu");
  ASSERT_TRUE(j["environment"].is_object());
  EXPECT_EQ(j["environment"]["FOLIO_META_TEST_SWITCH"], "longest-first");
  for (const auto& [name, value] : j["environment"].items())
    EXPECT_EQ(name.rfind("FOLIO_", 0), 0u) << name;
  EXPECT_FALSE(folio_environment().contains("FOLIO_META_TEST_SWITCH"));  // unset again
  EXPECT_TRUE(std::regex_match(j["date"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  EXPECT_NE(j["command"].get<std::string>().find("folio_tools_tests"), std::string::npos);
  EXPECT_FALSE(j["commit"].get<std::string>().empty());
}

}  // namespace
}  // namespace folio::tools
